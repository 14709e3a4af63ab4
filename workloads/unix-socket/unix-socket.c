// SPDX-License-Identifier: GPL-2.0
/* unix-socket: ping-pong of a message over an AF_UNIX SOCK_STREAM pair. */
#include "harness.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t msg_size = 64;

static const struct wl_opt opts[] = {
	{ "msg-size", WL_OPT_U64, &msg_size, "message size in bytes (default 64)",
	  1, 1 << 20, 0, 0 },
	{ 0 }
};

static int run(void)
{
	int sv[2];

	if (wl_dry_run())
		return 0;
	char *buf = wl_xmalloc(msg_size);

	memset(buf, 0x5a, msg_size);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		wl_die_errno("socketpair");
	pid_t pid = fork();

	if (pid < 0)
		wl_die_errno("fork");
	if (pid == 0) {		/* echo whole messages until EOF */
		close(sv[0]);
		for (;;) {
			size_t got = 0;

			while (got < msg_size) {
				ssize_t r = read(sv[1], buf + got, msg_size - got);

				if (r <= 0)
					_exit(r == 0 && got == 0 ? 0 : 1);
				got += (size_t)r;
			}
			wl_write_full(sv[1], buf, msg_size);
		}
	}
	close(sv[1]);

	struct wl_samples *rtt = wl_samples_new();
	uint64_t n, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++) {
		uint64_t t = wl_now_ns();

		wl_write_full(sv[0], buf, msg_size);
		wl_read_full(sv[0], buf, msg_size);
		wl_samples_add(rtt, (wl_now_ns() - t) / 1e3);
	}
	double el = (wl_now_ns() - t0) / 1e9;
	int st;

	shutdown(sv[0], SHUT_WR);
	if (waitpid(pid, &st, 0) < 0)
		wl_die_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		wl_die("echo child failed (status 0x%x)", st);
	wl_set_elapsed(el);
	wl_work(n, "round trip");
	wl_metric("round_trips_per_s", n / el, "1/s", "higher");
	wl_metric("mib_per_s", 2.0 * msg_size * n / el / 1048576.0, "MiB/s", "higher");
	wl_metric("rtt_p50_us", wl_samples_pct(rtt, 50), "us", "lower");
	wl_metric("rtt_p99_us", wl_samples_pct(rtt, 99), "us", "lower");
	wl_samples_free(rtt);
	free(buf);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "unix-socket",
	.description = "ping-pong of --msg-size bytes over an AF_UNIX SOCK_STREAM socketpair",
	.iteration = "one round trip",
	.default_iterations = 1000,
	.opts = opts,
	.run = run,
};
