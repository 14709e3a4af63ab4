// SPDX-License-Identifier: GPL-2.0
/*
 * hackbench: --groups groups of --fds sender and --fds receiver processes;
 * every sender writes --loops messages of --msg-size bytes to every
 * receiver of its group over AF_UNIX socketpairs (or pipes with --pipe).
 */
#include "harness.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static uint64_t groups = 2, fds = 10, loops = 50, msg_size = 100;
static bool use_pipe;

static const struct wl_opt opts[] = {
	{ "groups", WL_OPT_U64, &groups, "groups (default 2)", 1, 64, 0, 0 },
	{ "fds", WL_OPT_U64, &fds, "senders = receivers per group (default 10)", 1, 64, 0, 0 },
	{ "loops", WL_OPT_U64, &loops, "messages per sender per receiver (default 50)", 1, 1000000, 0, 0 },
	{ "msg-size", WL_OPT_U64, &msg_size, "message size in bytes (default 100)", 1, 65536, 0, 0 },
	{ "pipe", WL_OPT_FLAG, &use_pipe, "use pipes instead of socketpairs", 0, 0, 0, 0 },
	{ 0 }
};

static int ready[2], wake[2];

static pid_t spawn(void (*fn)(int *, uint64_t), int *fd, uint64_t n)
{
	pid_t pid = fork();
	char c = 'r';

	if (pid < 0)
		wl_die_errno("fork");
	if (pid == 0) {
		close(ready[0]);
		close(wake[1]);
		wl_write_full(ready[1], &c, 1);
		if (read(wake[0], &c, 1) != 0)	/* parent closes to start */
			_exit(1);
		fn(fd, n);
		_exit(0);
	}
	return pid;
}

static void sender(int *wfd, uint64_t n)
{
	char *buf = wl_xmalloc(msg_size);

	memset(buf, 's', msg_size);
	for (uint64_t l = 0; l < loops; l++)
		for (uint64_t i = 0; i < n; i++)
			wl_write_full(wfd[i], buf, msg_size);
}

static void receiver(int *rfd, uint64_t bytes)
{
	char buf[65536];

	while (bytes) {
		ssize_t r = read(rfd[0], buf, bytes < sizeof(buf) ? bytes : sizeof(buf));

		if (r <= 0)
			wl_die_errno("receiver read");
		bytes -= (uint64_t)r;
	}
}

static double one_run(void)
{
	uint64_t nproc = 2 * groups * fds, started = 0;
	pid_t *pids = wl_xmalloc(nproc * sizeof(*pids));
	int *rd = wl_xmalloc(fds * sizeof(int)), *wr = wl_xmalloc(fds * sizeof(int));
	char c;

	if (pipe(ready) || pipe(wake))
		wl_die_errno("pipe");
	for (uint64_t g = 0; g < groups; g++) {
		for (uint64_t i = 0; i < fds; i++) {
			int p[2];

			if (use_pipe ? pipe(p) : socketpair(AF_UNIX, SOCK_STREAM, 0, p))
				wl_die_errno(use_pipe ? "pipe" : "socketpair");
			rd[i] = p[0];
			wr[i] = p[1];
			pids[started++] = spawn(receiver, &rd[i],
						fds * loops * msg_size);
			close(rd[i]);
		}
		for (uint64_t i = 0; i < fds; i++)
			pids[started++] = spawn(sender, wr, fds);
		for (uint64_t i = 0; i < fds; i++)
			close(wr[i]);
	}
	for (uint64_t i = 0; i < nproc; i++)
		wl_read_full(ready[0], &c, 1);
	double t0 = wl_now_s();

	close(wake[1]);
	for (uint64_t i = 0; i < nproc; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0)
			wl_die_errno("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			for (uint64_t j = 0; j < nproc; j++)
				kill(pids[j], SIGKILL);
			wl_die("worker %d failed (status 0x%x)", (int)pids[i], st);
		}
	}
	double t = wl_now_s() - t0;

	close(ready[0]);
	close(ready[1]);
	close(wake[0]);
	free(pids);
	free(rd);
	free(wr);
	return t;
}

static int run(void)
{
	uint64_t msgs = groups * fds * fds * loops, n;
	double total = 0;

	wl_param_u64("processes", 2 * groups * fds);
	wl_param_u64("messages_per_iteration", msgs);
	if (wl_dry_run())
		return 0;
	for (n = 0; wl_continue(n); n++)
		total += one_run();
	wl_set_elapsed(total);
	wl_work((double)msgs * n, "message");
	wl_metric("time_s", total / n, "s", "lower");
	wl_metric("messages_per_s", msgs * n / total, "1/s", "higher");
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "hackbench",
	.description = "hackbench-style sender/receiver groups over socketpairs or pipes",
	.iteration = "one full hackbench run (fork all, exchange, wait all)",
	.default_iterations = 2,
	.opts = opts,
	.run = run,
};
