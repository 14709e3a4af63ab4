// SPDX-License-Identifier: GPL-2.0
/* fork-exec: fork + execve + wait of --exec PATH, by default of itself. */
#include "harness.h"

#include <limits.h>
#include <sys/wait.h>

static const char *exec_path;
static bool child;

static const struct wl_opt opts[] = {
	{ "exec", WL_OPT_STR, &exec_path, "program to exec (default: this binary, which then exits at once)", 0, 0, 0, 0 },
	{ "child", WL_OPT_FLAG, &child, "internal: exit 0 at once", 0, 0, true, 0 },
	{ 0 }
};

static int run(void)
{
	static char self[PATH_MAX];
	char *argv[3] = { NULL, "--child", NULL }, *envp[] = { NULL };

	if (child)
		_exit(0);
	if (wl_dry_run())
		return 0;
	if (!exec_path) {
		ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (r < 0)
			wl_die_errno("readlink /proc/self/exe (use --exec)");
		self[r] = 0;
		argv[0] = self;
	} else {
		if (access(exec_path, X_OK))
			wl_die_errno("%s", exec_path);
		argv[0] = (char *)exec_path;
		argv[1] = NULL;
	}

	struct wl_samples *lat = wl_samples_new();
	uint64_t n, t0 = wl_now_ns();

	for (n = 0; wl_continue(n); n++) {
		uint64_t t = wl_now_ns();
		int st;
		pid_t pid = fork();

		if (pid < 0)
			wl_die_errno("fork");
		if (pid == 0) {
			execve(argv[0], argv, envp);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) < 0)
			wl_die_errno("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			wl_die("%s: exited with status 0x%x (exec failed?)", argv[0], st);
		wl_samples_add(lat, (wl_now_ns() - t) / 1e3);
	}
	double el = (wl_now_ns() - t0) / 1e9;

	wl_set_elapsed(el);
	wl_work(n, "spawn");
	wl_metric("spawns_per_s", n / el, "1/s", "higher");
	wl_metric("spawn_p50_us", wl_samples_pct(lat, 50), "us", "lower");
	wl_metric("spawn_p99_us", wl_samples_pct(lat, 99), "us", "lower");
	wl_samples_free(lat);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "fork-exec",
	.description = "fork + execve + waitpid of a program (default: itself, static, exits at once)",
	.iteration = "one fork + exec + wait",
	.default_iterations = 100,
	.opts = opts,
	.run = run,
};
