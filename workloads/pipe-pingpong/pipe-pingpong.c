// SPDX-License-Identifier: GPL-2.0
/* pipe-pingpong: two processes bounce a 1-byte token over a pipe pair. */
#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(void)
{
	int ab[2], ba[2];
	char tok = 'x';

	if (wl_dry_run())
		return 0;
	if (pipe(ab) || pipe(ba))
		wl_die_errno("pipe");
	pid_t pid = fork();

	if (pid < 0)
		wl_die_errno("fork");
	if (pid == 0) {		/* echo until the parent closes its end */
		close(ab[1]);
		close(ba[0]);
		while (read(ab[0], &tok, 1) == 1)
			if (write(ba[1], &tok, 1) != 1)
				_exit(1);
		_exit(0);
	}
	close(ab[0]);
	close(ba[1]);

	struct wl_samples *rtt = wl_samples_new();
	uint64_t n, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++) {
		uint64_t t = wl_now_ns();

		wl_write_full(ab[1], &tok, 1);
		wl_read_full(ba[0], &tok, 1);
		wl_samples_add(rtt, (wl_now_ns() - t) / 1e3);
	}
	double el = (wl_now_ns() - t0) / 1e9;
	int st;

	close(ab[1]);
	if (waitpid(pid, &st, 0) < 0)
		wl_die_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		wl_die("echo child failed (status 0x%x)", st);
	wl_set_elapsed(el);
	wl_work(n, "round trip");
	wl_metric("round_trips_per_s", n / el, "1/s", "higher");
	wl_metric("rtt_p50_us", wl_samples_pct(rtt, 50), "us", "lower");
	wl_metric("rtt_p99_us", wl_samples_pct(rtt, 99), "us", "lower");
	wl_samples_free(rtt);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "pipe-pingpong",
	.description = "two processes bounce a 1-byte token over a pipe pair",
	.iteration = "one round trip",
	.default_iterations = 2000,
	.run = run,
};
