// SPDX-License-Identifier: GPL-2.0
/*
 * secretmem-frag: map and touch --regions memfd_secret(2) regions of
 * --region-kib each. Every secret page is removed from the kernel direct
 * map, which splits 2M/1G direct-map entries; the direct-map state before
 * and after goes into params and metrics. Then, with the regions still
 * mapped, pread() passes over a page-cached --file-mib file (a copy path
 * that goes through the direct map) give MiB/s. Needs secretmem.enable=1
 * on 6.1 kernels and enough RLIMIT_MEMLOCK (raised here as far as allowed).
 */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif
#define CHUNK (64u * 1024)

static uint64_t regions = 64, region_kib = 64, file_mib = 16;
static const char *dir = "/var/tmp";

static const struct wl_opt opts[] = {
	{ "regions", WL_OPT_U64, &regions, "memfd_secret regions (default 64)", 1, 1 << 20, 0, 0 },
	{ "region-kib", WL_OPT_U64, &region_kib, "KiB per region, multiple of 4 (default 64)", 4, 1 << 20, 0, 0 },
	{ "file-mib", WL_OPT_U64, &file_mib, "page-cached file read afterwards, MiB (default 16)", 1, 65536, 0, 0 },
	{ "dir", WL_OPT_STR, &dir, "directory for that file (default /var/tmp)", 0, 0, 0, 0 },
	{ 0 }
};

static void on_sigbus(int sig)
{
	static const char msg[] = "secretmem-frag: SIGBUS touching secret memory "
		"(out of memory or RLIMIT_MEMLOCK exhausted)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void secret_fail(const char *what)
{
	wl_die_errno("%s failed (secretmem needs CONFIG_SECRETMEM, boot option "
		     "secretmem.enable=1 on 6.1, and RLIMIT_MEMLOCK >= %" PRIu64 " KiB)",
		     what, regions * region_kib);
}

static int run(void)
{
	size_t rsize = region_kib << 10, pg = (size_t)sysconf(_SC_PAGESIZE);

	if (rsize % pg)
		wl_usage_error("--region-kib must be a multiple of %zu", pg / 1024);
	wl_param_u64("secret_kib", regions * region_kib);
	if (wl_dry_run())
		return 0;

	struct rlimit rl;

	getrlimit(RLIMIT_MEMLOCK, &rl);
	struct rlimit inf = { RLIM_INFINITY, RLIM_INFINITY };

	if (setrlimit(RLIMIT_MEMLOCK, &inf)) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			wl_die_errno("setrlimit RLIMIT_MEMLOCK");
	}
	getrlimit(RLIMIT_MEMLOCK, &rl);
	if (rl.rlim_cur == RLIM_INFINITY)
		wl_param_str("memlock_limit_kib", "unlimited");
	else
		wl_param_u64("memlock_limit_kib", rl.rlim_cur >> 10);
	signal(SIGBUS, on_sigbus);

	struct wl_dmap before, after;
	char **maps = wl_xmalloc(regions * sizeof(*maps));

	wl_dmap_read(&before);
	uint64_t t0 = wl_now_ns();

	for (uint64_t r = 0; r < regions; r++) {
		int fd = (int)syscall(SYS_memfd_secret, O_CLOEXEC);

		if (fd < 0)
			secret_fail("memfd_secret");
		if (ftruncate(fd, (off_t)rsize))
			secret_fail("ftruncate secretmem");
		maps[r] = mmap(NULL, rsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (maps[r] == MAP_FAILED)
			secret_fail("mmap secretmem");
		close(fd);
		for (size_t o = 0; o < rsize; o += pg)
			maps[r][o] = (char)(r + o);
	}
	double touch_s = (wl_now_ns() - t0) / 1e9;

	wl_dmap_read(&after);
	wl_dmap_params(&before, "before");
	wl_dmap_params(&after, "after");

	/* data workload on top, secret regions still mapped */
	char path[4096], *buf = wl_xmalloc(1 << 20);
	uint64_t fsize = file_mib << 20, n;
	int fd;

	snprintf(path, sizeof(path), "%s/kablab-secretmem-XXXXXX", dir);
	if ((fd = mkstemp(path)) < 0)
		wl_die_errno("mkstemp %s", path);
	if (unlink(path))
		wl_die_errno("unlink %s", path);
	for (uint64_t i = 0; i < (1 << 20) / 8; i++)
		((uint64_t *)buf)[i] = wl_rand();
	for (uint64_t o = 0; o < fsize; o += 1 << 20)
		wl_write_full(fd, buf, 1 << 20);
	uint64_t t1 = wl_now_ns();

	for (n = 0; wl_continue(n); n++)
		for (uint64_t o = 0; o < fsize; o += CHUNK)
			if (pread(fd, buf, CHUNK, (off_t)o) != CHUNK)
				wl_die_errno("pread");
	double read_s = (wl_now_ns() - t1) / 1e9;

	close(fd);
	for (uint64_t r = 0; r < regions; r++)
		munmap(maps[r], rsize);
	free(maps);
	free(buf);
	wl_set_elapsed(touch_s + read_s);
	wl_work(n * file_mib, "MiB");
	wl_metric("secret_faults_per_s", regions * (rsize / pg) / touch_s, "1/s", "higher");
	wl_metric("pread_mib_per_s", n * file_mib / read_s, "MiB/s", "higher");
	wl_dmap_delta_metrics(&before, &after, 1u << WL_DM_4K | 1u << WL_DM_L2);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "secretmem-frag",
	.description = "fragment the direct map with memfd_secret regions, then pread a page-cached file",
	.iteration = "one pread pass over the file (after the secret regions are set up)",
	.default_iterations = 4,
	.opts = opts,
	.run = run,
};
