// SPDX-License-Identifier: GPL-2.0
/*
 * pagecache-read: fill a --size-mib file in --dir, read it once to populate
 * the page cache, then per iteration one sequential 64 KiB pread() pass and
 * one seeded random pass of 4-64 KiB preads covering the file size.
 * The file is unlinked right after creation, so it disappears at exit.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>

#define BLK 4096u
#define SEQ_CHUNK (64u * 1024)

static uint64_t size_mib = 64;
static const char *dir = "/var/tmp";

static const struct wl_opt opts[] = {
	{ "size-mib", WL_OPT_U64, &size_mib, "file size in MiB (default 64)", 1, 65536, 0, 0 },
	{ "dir", WL_OPT_STR, &dir, "directory for the temporary file (default /var/tmp)", 0, 0, 0, 0 },
	{ 0 }
};

static int run(void)
{
	uint64_t size = size_mib << 20, pages = size / BLK;
	uint64_t nops = 0, cap = pages, bytes = 0;
	uint64_t *off = wl_xmalloc(cap * sizeof(*off));
	uint32_t *len = wl_xmalloc(cap * sizeof(*len));

	while (bytes < size) {		/* the seeded random plan */
		uint64_t np = 1 + wl_rand_below(16);

		if (np > pages)
			np = pages;
		off[nops] = BLK * wl_rand_below(pages - np + 1);
		len[nops] = (uint32_t)(np * BLK);
		bytes += len[nops++];
	}
	wl_param_u64("rand_ops_per_pass", nops);
	wl_param_u64("rand_bytes_per_pass", bytes);
	if (wl_dry_run())
		return 0;

	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/kablab-pagecache-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		wl_die_errno("mkstemp %s", path);
	if (unlink(path))
		wl_die_errno("unlink %s", path);

	char *buf = wl_xmalloc(1 << 20);

	for (uint64_t i = 0; i < (1 << 20) / 8; i++)
		((uint64_t *)buf)[i] = wl_rand();
	for (uint64_t o = 0; o < size; o += 1 << 20)
		wl_write_full(fd, buf, 1 << 20);
	for (uint64_t o = 0; o < size; o += SEQ_CHUNK)	/* populate */
		if (pread(fd, buf, SEQ_CHUNK, (off_t)o) != SEQ_CHUNK)
			wl_die_errno("pread");

	struct wl_samples *lat = wl_samples_new();
	double seq_t = 0, rand_t = 0, t0 = wl_now_s();
	uint64_t n;

	for (n = 0; wl_continue(n); n++) {
		uint64_t t = wl_now_ns();

		for (uint64_t o = 0; o < size; o += SEQ_CHUNK)
			if (pread(fd, buf, SEQ_CHUNK, (off_t)o) != SEQ_CHUNK)
				wl_die_errno("pread");
		uint64_t t1 = wl_now_ns();

		seq_t += (t1 - t) / 1e9;
		for (uint64_t i = 0; i < nops; i++) {
			uint64_t a = wl_now_ns();

			if (pread(fd, buf, len[i], (off_t)off[i]) != (ssize_t)len[i])
				wl_die_errno("pread");
			wl_samples_add(lat, (wl_now_ns() - a) / 1e3);
		}
		rand_t += (wl_now_ns() - t1) / 1e9;
	}
	wl_set_elapsed(wl_now_s() - t0);
	wl_work(n * (size_mib + bytes / 1048576.0), "MiB");
	close(fd);
	wl_metric("seq_mib_per_s", n * size_mib / seq_t, "MiB/s", "higher");
	wl_metric("rand_mib_per_s", n * (bytes / 1048576.0) / rand_t, "MiB/s", "higher");
	wl_metric("rand_p50_us", wl_samples_pct(lat, 50), "us", "lower");
	wl_metric("rand_p99_us", wl_samples_pct(lat, 99), "us", "lower");
	wl_samples_free(lat);
	free(buf);
	free(off);
	free(len);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "pagecache-read",
	.description = "sequential and seeded random 4-64 KiB pread() over a page-cached file",
	.iteration = "one sequential plus one random pass over the file",
	.default_iterations = 2,
	.opts = opts,
	.run = run,
};
