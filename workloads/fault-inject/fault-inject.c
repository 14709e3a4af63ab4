// SPDX-License-Identifier: GPL-2.0
/*
 * fault-inject: the lab's own self-test workload, not a benchmark. It
 * computes a seeded checksum like any workload, but in the measured runs
 * named by --crash-runs or --hang-runs (the runner numbers them in
 * KABLAB_RUN, 1-based; 0 or unset is a warm-up or a run outside the
 * runner) it crashes or stops answering, so the fault tests can check that
 * such runs are recorded, excluded from the statistics and bounded.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>

static const char *crash_runs = "none";
static const char *hang_runs = "none";
static const char *crash_how = "segv";
static uint64_t hang_s = 600;

static const struct wl_opt opts[] = {
	{ "crash-runs", WL_OPT_STR, &crash_runs, "comma-separated run numbers that crash (default none)", 0, 0, 0, 0 },
	{ "crash-how", WL_OPT_STR, &crash_how, "segv, abort or exit (exit status 1) (default segv)", 0, 0, 0, 0 },
	{ "hang-runs", WL_OPT_STR, &hang_runs, "comma-separated run numbers that hang (default none)", 0, 0, 0, 0 },
	{ "hang-s", WL_OPT_U64, &hang_s, "how long a hang lasts before it gives up, s (default 600)", 1, 86400, 0, 0 },
	{ 0 }
};

/* Is `run` in LIST ("none" or "1,3,4")? Bad lists are usage errors. */
static bool in_list(const char *opt, const char *list, uint64_t run)
{
	bool found = false;
	const char *p = list;

	if (!strcmp(list, "none"))
		return false;
	while (*p) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p || errno || v == 0 || *p == '-' || (*end && *end != ','))
			wl_usage_error("--%s: '%s' is not 'none' or a list of run numbers like 2,5", opt, list);
		found |= v == run;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			wl_usage_error("--%s: '%s' ends with a comma", opt, list);
	}
	return found;
}

static uint64_t run_number(void)
{
	const char *env = getenv("KABLAB_RUN");
	char *end;
	unsigned long long v;

	if (!env || !*env)
		return 0;
	errno = 0;
	v = strtoull(env, &end, 10);
	if (errno || *end)
		wl_die("KABLAB_RUN='%s' is not a run number", env);
	return v;
}

static int run(void)
{
	uint64_t this_run = run_number();
	bool crash = in_list("crash-runs", crash_runs, this_run);
	bool hang = in_list("hang-runs", hang_runs, this_run);

	if (strcmp(crash_how, "segv") && strcmp(crash_how, "abort") && strcmp(crash_how, "exit"))
		wl_usage_error("--crash-how: '%s' is not segv, abort or exit", crash_how);
	wl_param_u64("kablab_run", this_run);
	if (wl_dry_run())
		return 0;

	if (hang) {
		/* Bounded even if nobody kills it: load tests stop by themselves. */
		struct timespec left = { .tv_sec = (time_t)hang_s };

		fprintf(stderr, "fault-inject: run %" PRIu64 " hangs for %" PRIu64 " s\n", this_run, hang_s);
		while (nanosleep(&left, &left) && errno == EINTR)
			;
		wl_die("run %" PRIu64 ": hang of %" PRIu64 " s ran out without being stopped", this_run, hang_s);
	}
	if (crash) {
		fprintf(stderr, "fault-inject: run %" PRIu64 " crashes (%s)\n", this_run, crash_how);
		if (!strcmp(crash_how, "exit"))
			wl_die("injected failure in run %" PRIu64, this_run);
		signal(SIGSEGV, SIG_DFL);
		raise(!strcmp(crash_how, "abort") ? SIGABRT : SIGSEGV);
		wl_die("raise did not end the run");
	}

	uint64_t n, sum = 0, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++)
		sum += wl_rand() >> 60;
	double el = (wl_now_ns() - t0) / 1e9;

	wl_param_u64("checksum", sum);
	wl_set_elapsed(el);
	wl_work(n, "step");
	wl_metric("ns_per_iteration", el * 1e9 / n, "ns", "lower");
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "fault-inject",
	.description = "self-test: seeded checksum that crashes or hangs in chosen runs",
	.iteration = "one PRNG step",
	.default_iterations = 200000,
	.opts = opts,
	.run = run,
};
