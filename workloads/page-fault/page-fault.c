// SPDX-License-Identifier: GPL-2.0
/* page-fault: mmap anonymous --size-mib, write every 4 KiB page, munmap. */
#include "harness.h"

#include <sys/mman.h>
#include <sys/resource.h>

static uint64_t size_mib = 16;
static bool thp;

static const struct wl_opt opts[] = {
	{ "size-mib", WL_OPT_U64, &size_mib, "mapping size in MiB (default 16)", 1, 65536, 0, 0 },
	{ "thp", WL_OPT_FLAG, &thp, "allow transparent huge pages (default MADV_NOHUGEPAGE)", 0, 0, 0, 0 },
	{ 0 }
};

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static int run(void)
{
	size_t size = size_mib << 20, pg = (size_t)sysconf(_SC_PAGESIZE);

	wl_param_u64("pages_per_iteration", size / pg);
	if (wl_dry_run())
		return 0;

	struct wl_samples *lat = wl_samples_new();
	long f0 = minflt();
	uint64_t n, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++) {
		uint64_t t = wl_now_ns();
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			wl_die_errno("mmap %zu bytes", size);
		if (!thp && madvise(p, size, MADV_NOHUGEPAGE) && errno != EINVAL)
			wl_die_errno("madvise");
		for (size_t o = 0; o < size; o += pg)
			p[o] = (char)o;
		if (munmap(p, size))
			wl_die_errno("munmap");
		wl_samples_add(lat, (wl_now_ns() - t) / 1e6);
	}
	double el = (wl_now_ns() - t0) / 1e9;
	long faults = minflt() - f0;

	wl_set_elapsed(el);
	wl_work(faults, "fault");
	wl_metric("faults_per_s", faults / el, "1/s", "higher");
	wl_metric("mib_per_s", n * size_mib / el, "MiB/s", "higher");
	wl_metric("iteration_p99_ms", wl_samples_pct(lat, 99), "ms", "lower");
	wl_samples_free(lat);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "page-fault",
	.description = "anonymous mmap, first-touch every page, munmap (faults counted by getrusage)",
	.iteration = "one mmap + touch all pages + munmap",
	.default_iterations = 8,
	.opts = opts,
	.run = run,
};
