// SPDX-License-Identifier: GPL-2.0
/*
 * module-bpf-churn: churn the module/BPF text area on an aged page allocator.
 * (a) aging: open --pipes pipes, fill each with --pipe-kib, close a seeded
 *     half and keep the rest (unmovable pages scattered over memory);
 * (b) churn: a seeded interleave of --module-loads finit_module+delete_module
 *     of --module and --bpf-progs BPF_PROG_LOADs of a socket filter that
 *     returns a seeded constant (checked with BPF_PROG_TEST_RUN), a seeded
 *     --bpf-keep-pct of them kept loaded; between steps page-cache/slab
 *     activity (temp file write/read, file create/unlink);
 * (c) direct-map state before/after in params, deltas as metrics.
 */
#include "harness.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>

static uint64_t pipes = 8000, pipe_kib = 64, module_loads = 20, bpf_progs = 200;
static uint64_t keep_pct = 50;
static const char *module_path, *dir = "/var/tmp";

static const struct wl_opt opts[] = {
	{ "pipes", WL_OPT_U64, &pipes, "pipes opened for aging (default 8000)", 2, 1 << 20, 0, 0 },
	{ "pipe-kib", WL_OPT_U64, &pipe_kib, "KiB written into each pipe (default 64)", 4, 1024, 0, 0 },
	{ "module", WL_OPT_STR, &module_path, "test module .ko to load/unload (default: no module churn)", 0, 0, 0, 0 },
	{ "module-loads", WL_OPT_U64, &module_loads, "module load+unload cycles (default 20)", 0, 1 << 20, 0, 0 },
	{ "bpf-progs", WL_OPT_U64, &bpf_progs, "BPF programs loaded (default 200)", 0, 1 << 20, 0, 0 },
	{ "bpf-keep-pct", WL_OPT_U64, &keep_pct, "percent of BPF programs kept loaded (default 50)", 0, 100, 0, 0 },
	{ "dir", WL_OPT_STR, &dir, "directory for churn files (default /var/tmp)", 0, 0, 0, 0 },
	{ 0 }
};

enum { STEP_MODULE = 1, STEP_BPF_KEEP = 2, STEP_BPF_CLOSE = 3 };

static int bpf_load(uint32_t k)
{
	struct bpf_insn prog[] = {	/* r0 = k; r2 = r0 + 1 - 1; r0 = r2 */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = (int32_t)k },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 2, .src_reg = 0 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 2, .imm = 1 },
		{ .code = BPF_ALU64 | BPF_SUB | BPF_K, .dst_reg = 2, .imm = 1 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 0, .src_reg = 2 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	a.insns = (uint64_t)(uintptr_t)prog;
	a.insn_cnt = WL_ARRAY_SIZE(prog);
	a.license = (uint64_t)(uintptr_t)"GPL";
	int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));

	if (fd >= 0)
		return fd;
	int err = errno;

	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	errno = err;
	wl_die_errno("bpf(BPF_PROG_LOAD) socket filter (root/CAP_BPF needed; log: %.200s)", log);
}

static void bpf_check(int fd, uint32_t k)
{
	unsigned char pkt[64] = { 0 };
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.test.prog_fd = (uint32_t)fd;
	a.test.data_in = (uint64_t)(uintptr_t)pkt;
	a.test.data_size_in = sizeof(pkt);
	a.test.repeat = 1;
	if (syscall(SYS_bpf, BPF_PROG_TEST_RUN, &a, sizeof(a)))
		wl_die_errno("bpf(BPF_PROG_TEST_RUN)");
	if (a.test.retval != k)
		wl_die("BPF program returned %u, expected %u", a.test.retval, k);
}

static void module_cycle(int fd, const char *name, const void *img, size_t len)
{
	char args[64];

	snprintf(args, sizeof(args), "seed=%" PRIu64, wl_seed());
	if (syscall(SYS_finit_module, fd, args, 0)) {
		if (errno != ENOSYS || syscall(SYS_init_module, img, len, args))
			wl_die_errno("loading module %s", module_path);
	}
	if (syscall(SYS_delete_module, name, O_NONBLOCK))
		wl_die_errno("delete_module %s", name);
}

static void *slurp(int fd, size_t *len)
{
	off_t sz = lseek(fd, 0, SEEK_END);

	if (sz <= 0 || lseek(fd, 0, SEEK_SET))
		wl_die_errno("%s: empty or unseekable", module_path);
	void *p = wl_xmalloc((size_t)sz);

	wl_read_full(fd, p, (size_t)sz);
	*len = (size_t)sz;
	return p;
}

static int run(void)
{
	uint64_t nmod = module_path ? module_loads : 0, steps = nmod + bpf_progs;
	uint64_t *order = wl_xmalloc(pipes * sizeof(*order));
	unsigned char *plan = wl_xmalloc(steps + 1);
	uint32_t *konst = wl_xmalloc((bpf_progs + 1) * sizeof(*konst));
	uint64_t kept = 0, hash = 1469598103934665603ULL, m = nmod, b = bpf_progs;
	char modname[256] = "";

	/* the seeded plan: which pipes to close, step order, kept programs */
	for (uint64_t i = 0; i < pipes; i++)
		order[i] = i;
	for (uint64_t i = pipes - 1; i > 0; i--) {
		uint64_t j = wl_rand_below(i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (uint64_t s = 0, p = 0; s < steps; s++) {
		if (wl_rand_below(m + b) < m) {
			plan[s] = STEP_MODULE;
			m--;
		} else {
			bool keep = wl_rand_below(100) < keep_pct;

			plan[s] = keep ? STEP_BPF_KEEP : STEP_BPF_CLOSE;
			kept += keep;
			konst[p++] = (uint32_t)(wl_rand() & 0xffffff);
			b--;
		}
		hash = (hash ^ plan[s]) * 1099511628211ULL;
	}
	if (module_path) {
		const char *base = strrchr(module_path, '/');

		snprintf(modname, sizeof(modname), "%s", base ? base + 1 : module_path);
		char *dot = strstr(modname, ".ko");

		if (dot)
			*dot = 0;
		for (char *c = modname; *c; c++)
			if (*c == '-')
				*c = '_';
	}
	wl_param_str("module_churn", module_path ? "enabled" : "skipped: no --module given");
	wl_param_str("module_name", module_path ? modname : NULL);
	wl_param_u64("pipes_closed", pipes / 2);
	wl_param_u64("pipes_kept", pipes - pipes / 2);
	wl_param_u64("aging_kib", (pipes - pipes / 2) * pipe_kib);
	wl_param_u64("bpf_kept", kept);
	char hex[32];

	snprintf(hex, sizeof(hex), "%016" PRIx64, hash);
	wl_param_str("plan_fnv64", hex);

	int modfd = -1;
	size_t modlen = 0;
	void *modimg = NULL;

	if (module_path) {
		if ((modfd = open(module_path, O_RDONLY | O_CLOEXEC)) < 0)
			wl_die_errno("%s", module_path);
		modimg = slurp(modfd, &modlen);
	}
	if (wl_dry_run())
		return 0;

	/* (a) unmovable aging */
	struct wl_dmap before, after;
	struct rlimit rl = { 2 * pipes + 64, 2 * pipes + 64 }, cur;

	wl_dmap_read(&before);
	getrlimit(RLIMIT_NOFILE, &cur);
	if (cur.rlim_cur < rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &rl))
		wl_die_errno("setrlimit RLIMIT_NOFILE to %" PRIu64 " (see fs.nr_open)",
			     (uint64_t)rl.rlim_cur);
	int (*pfd)[2] = wl_xmalloc(pipes * sizeof(*pfd));
	size_t psz = pipe_kib << 10;
	char *buf = wl_xmalloc(psz > (64 << 10) ? psz : (64 << 10));

	memset(buf, 0x6b, psz);
	for (uint64_t i = 0; i < pipes; i++) {
		if (pipe2(pfd[i], O_NONBLOCK | O_CLOEXEC))
			wl_die_errno("pipe2 #%" PRIu64, i);
		ssize_t w = write(pfd[i][1], buf, psz);

		if (w >= 0 && (size_t)w < psz) {	/* too small: grow it */
			if (fcntl(pfd[i][1], F_SETPIPE_SZ, (int)psz) < 0)
				wl_die_errno("F_SETPIPE_SZ %zu", psz);
			w += write(pfd[i][1], buf, psz - (size_t)w);
		}
		if (w != (ssize_t)psz)
			wl_die_errno("filling pipe #%" PRIu64 " with %zu bytes", i, psz);
	}
	for (uint64_t i = 0; i < pipes / 2; i++) {
		close(pfd[order[i]][0]);
		close(pfd[order[i]][1]);
	}

	/* (b) interleaved churn */
	char tmp[4096];
	int tfd, *keep = wl_xmalloc((kept + 1) * sizeof(int));
	uint64_t nk = 0, s, p = 0, mdone = 0, bdone = 0;
	double mod_s = 0, bpf_s = 0, t0 = wl_now_s();

	snprintf(tmp, sizeof(tmp), "%s/kablab-churn-XXXXXX", dir);
	if ((tfd = mkstemp(tmp)) < 0)
		wl_die_errno("mkstemp %s", tmp);
	if (unlink(tmp))
		wl_die_errno("unlink %s", tmp);
	for (s = 0; s < steps && wl_continue(s); s++) {
		double t = wl_now_s();

		if (plan[s] == STEP_MODULE) {
			module_cycle(modfd, modname, modimg, modlen);
			mod_s += wl_now_s() - t;
			mdone++;
		} else {
			int fd = bpf_load(konst[p]);

			bpf_check(fd, konst[p++]);
			if (plan[s] == STEP_BPF_KEEP)
				keep[nk++] = fd;
			else
				close(fd);
			bpf_s += wl_now_s() - t;
			bdone++;
		}
		/* page-cache and slab activity between steps */
		size_t len = 4096 * (1 + wl_rand_below(16));
		off_t off = (off_t)(4096 * wl_rand_below(256));
		char name[4200];

		if (pwrite(tfd, buf, len, off) != (ssize_t)len ||
		    pread(tfd, buf, len, off) != (ssize_t)len)
			wl_die_errno("churn file I/O");
		snprintf(name, sizeof(name), "%s/kablab-churn-%d-%" PRIu64, dir, (int)getpid(), s);
		int f = open(name, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);

		if (f < 0 || write(f, buf, 4096) != 4096 || close(f) || unlink(name))
			wl_die_errno("churn file %s", name);
	}
	wl_set_elapsed(wl_now_s() - t0);
	wl_work(mdone + bdone, "load");

	/* (c) direct-map state with the aged pipes and kept programs alive */
	wl_dmap_read(&after);
	wl_dmap_params(&before, "before");
	wl_dmap_params(&after, "after");
	for (uint64_t i = 0; i < nk; i++)
		close(keep[i]);
	for (uint64_t i = pipes / 2; i < pipes; i++) {
		close(pfd[order[i]][0]);
		close(pfd[order[i]][1]);
	}
	close(tfd);
	if (mdone)
		wl_metric("module_loads_per_s", mdone / mod_s, "1/s", "higher");
	if (bdone)
		wl_metric("bpf_loads_per_s", bdone / bpf_s, "1/s", "higher");
	wl_dmap_delta_metrics(&before, &after, 1u << WL_DM_4K | 1u << WL_DM_L2 | 1u << WL_DM_PT);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "module-bpf-churn",
	.description = "pipe-aged allocator, then interleaved module load/unload and BPF program load churn",
	.iteration = "one churn step (a module load+unload or a BPF program load+test)",
	.default_iterations = 0,
	.opts = opts,
	.run = run,
};
