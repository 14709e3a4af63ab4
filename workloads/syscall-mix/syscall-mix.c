// SPDX-License-Identifier: GPL-2.0
/*
 * syscall-mix: a seeded sequence of cheap varied syscalls (getppid,
 * clock_gettime via syscall(2), read from /dev/zero, stat, open+close)
 * that walks a spread of kernel text.
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

enum { OP_GETPPID, OP_CLOCK, OP_READ, OP_STAT, OP_OPEN, NOPS };
static const char *const op_names[NOPS] = {
	"ops_getppid", "ops_clock_gettime", "ops_read", "ops_stat", "ops_open_close",
};
#define PLAN 4096

static uint64_t read_bytes = 64;

static const struct wl_opt opts[] = {
	{ "read-bytes", WL_OPT_U64, &read_bytes, "bytes per read(2) of /dev/zero (default 64)", 1, 1 << 20, 0, 0 },
	{ 0 }
};

static int run(void)
{
	static unsigned char plan[PLAN];
	uint64_t count[NOPS] = { 0 };

	for (int i = 0; i < PLAN; i++)
		plan[i] = (unsigned char)wl_rand_below(NOPS);
	for (uint64_t i = 0; i < wl_iterations(); i++)	/* 0: duration bound */
		count[plan[i % PLAN]]++;
	for (int i = 0; wl_iterations() && i < NOPS; i++)
		wl_param_u64(op_names[i], count[i]);
	if (wl_dry_run())
		return 0;

	char *buf = wl_xmalloc(read_bytes);
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	struct timespec ts;
	struct stat sb;

	if (zero < 0)
		wl_die_errno("open /dev/zero");
	uint64_t n, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++) {
		int op = plan[n % PLAN], fd;

		switch (op) {
		case OP_GETPPID:
			syscall(SYS_getppid);
			break;
		case OP_CLOCK:
			if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts))
				wl_die_errno("clock_gettime");
			break;
		case OP_READ:
			if (read(zero, buf, read_bytes) != (ssize_t)read_bytes)
				wl_die_errno("read /dev/zero");
			break;
		case OP_STAT:
			if (stat("/", &sb))
				wl_die_errno("stat /");
			break;
		case OP_OPEN:
			fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				wl_die_errno("open /dev/null");
			close(fd);
			break;
		}
	}
	double el = (wl_now_ns() - t0) / 1e9;

	close(zero);
	free(buf);
	wl_set_elapsed(el);
	wl_work(n, "syscall");
	wl_metric("ops_per_s", n / el, "1/s", "higher");
	wl_metric("ns_per_op", el * 1e9 / n, "ns", "lower");
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "syscall-mix",
	.description = "seeded mix of getppid, clock_gettime, read /dev/zero, stat, open/close",
	.iteration = "one syscall (open+close counts as one)",
	.default_iterations = 50000,
	.opts = opts,
	.run = run,
};
