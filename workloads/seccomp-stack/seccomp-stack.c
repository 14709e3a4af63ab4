// SPDX-License-Identifier: GPL-2.0
/*
 * seccomp-stack: --procs processes, each with its own stack of --filters
 * seccomp filters of --filter-len classic BPF instructions, take turns over a
 * pipe ring; a turn is --batch getppid(2) calls.  Every syscall of a filtered
 * process runs its whole stack, JITed into bpf_prog_pack memory, so the JIT
 * code the CPU cycles through is procs x filters x the JIT size of a filter.
 * Each filter does real work on the syscall's nr and args and allows it.
 */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/*
 * seccomp_attach_filter() refuses a filter when its length plus, for every
 * filter already attached, that one's length + 4 exceeds MAX_INSNS_PER_PATH,
 * lengths counted after the conversion to eBPF: bpf_convert_filter() adds 3
 * instructions in front and makes the final return 2; every other
 * instruction of these filters stays one (the compares use no negative
 * immediate, which would cost one more).
 */
#define PATH_LIMIT 32768
#define FILTER_PENALTY 4
#define CONVERT_EXTRA 4

static uint64_t filters = 16, filter_len = 128, procs = 4, batch = 8, tlb_mark;

/* the kablab-tlb plugin's default marker page (tlbmodel/README.md "Runs") */
#define TLB_MARKER 0x6b61626c0000ul

static const struct wl_opt opts[] = {
	{ "filters", WL_OPT_U64, &filters, "seccomp filters per process (default 16)", 1, 8192, 0, 0 },
	{ "filter-len", WL_OPT_U64, &filter_len, "classic BPF instructions per filter (default 128)",
	  8, BPF_MAXINSNS, 0, 0 },
	{ "procs", WL_OPT_U64, &procs, "processes, each with its own filter stack (default 4)", 1, 1024, 0, 0 },
	{ "batch", WL_OPT_U64, &batch, "getppid(2) calls per turn (default 8)", 1, 1000000, 0, 0 },
	{ "tlb-mark", WL_OPT_U64, &tlb_mark,
	  "TLB model: mark rounds 2 to the last as plugin run ID (default 0: no marks)", 0, 1ull << 53, 0, 0 },
	{ 0 }
};

struct shared {
	uint64_t end_ns, rounds;
};

/* seccomp_data fields a filter reads: nr, arch, the low words of args[0..5] */
static const uint32_t fields[] = {
	offsetof(struct seccomp_data, nr), offsetof(struct seccomp_data, arch),
	offsetof(struct seccomp_data, args[0]), offsetof(struct seccomp_data, args[1]),
	offsetof(struct seccomp_data, args[2]), offsetof(struct seccomp_data, args[3]),
	offsetof(struct seccomp_data, args[4]), offsetof(struct seccomp_data, args[5]),
};

/*
 * Filter f of process p, seeded: blocks of load field, xor, compare, add
 * (the compare skips the add or not), then allow.  Every path runs all but
 * the skipped adds, so each syscall fetches the whole JIT image.
 */
static void make_filter(struct sock_filter *insn, uint64_t p, uint64_t f)
{
	struct wl_rng r;
	uint64_t i = 0;

	wl_rng_init(&r, wl_seed(), (p << 20) | f);
	while (i + 4 < filter_len) {
		uint32_t k1 = (uint32_t)wl_rng_next(&r), k2 = (uint32_t)wl_rng_next(&r) & 0x7fffffff;

		insn[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
							  fields[wl_rng_next(&r) % WL_ARRAY_SIZE(fields)]);
		insn[i++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, k1);
		insn[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, k2, 0, 1);
		insn[i++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, k1 ^ k2);
	}
	while (i + 1 < filter_len)
		insn[i++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_K,
							  (uint32_t)wl_rng_next(&r));
	insn[i] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

static void check_jit_enabled(void)
{
	FILE *f = fopen("/proc/sys/net/core/bpf_jit_enable", "r");
	int v;

	if (!f || fscanf(f, "%d", &v) != 1)
		wl_die("cannot read /proc/sys/net/core/bpf_jit_enable: without a BPF JIT "
		       "the filters would run in the interpreter");
	fclose(f);
	if (v < 1)
		wl_die("bpf_jit_enable is %d: the filters would run in the interpreter", v);
}

/*
 * The kernel does not say whether a seccomp filter was JITed.  Classic
 * filters go through the same bpf_prog_select_runtime() as eBPF programs,
 * so load one eBPF socket filter of the same length after the stack and ask
 * for its JIT image: a JIT that is off, over bpf_jit_limit or failing to
 * allocate would have left this task's filters to the interpreter too (or,
 * with BPF_JIT_ALWAYS_ON, refused them).
 */
static void check_jited(void)
{
	uint64_t n = filter_len;
	struct bpf_insn *prog = wl_xmalloc(n * sizeof(*prog));
	struct bpf_prog_info info;
	union bpf_attr a;
	int fd;

	prog[0] = (struct bpf_insn){ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 };
	for (uint64_t i = 1; i + 1 < n; i++)
		prog[i] = (struct bpf_insn){ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 0,
					     .imm = (int32_t)i };
	prog[n - 1] = (struct bpf_insn){ .code = BPF_JMP | BPF_EXIT };
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	a.insns = (uint64_t)(uintptr_t)prog;
	a.insn_cnt = (uint32_t)n;
	a.license = (uint64_t)(uintptr_t)"GPL";
	fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (fd < 0)
		wl_die_errno("bpf(BPF_PROG_LOAD) of the JIT probe (root/CAP_BPF needed to check "
			     "that the filters are JITed)");
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (uint32_t)fd;
	a.info.info_len = sizeof(info);
	a.info.info = (uint64_t)(uintptr_t)&info;
	if (syscall(SYS_bpf, BPF_OBJ_GET_INFO_BY_FD, &a, sizeof(a)))
		wl_die_errno("bpf(BPF_OBJ_GET_INFO_BY_FD) of the JIT probe");
	if (!info.jited_prog_len)
		wl_die("the JIT left a %" PRIu64 "-instruction probe to the interpreter: "
		       "the filters would not be JITed either", n);
	close(fd);
	free(prog);
}

static void install_stack(uint64_t p)
{
	struct sock_filter *insn = wl_xmalloc(filter_len * sizeof(*insn));
	int64_t installed;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		wl_die_errno("prctl(PR_SET_NO_NEW_PRIVS)");
	for (uint64_t f = 0; f < filters; f++) {
		struct sock_fprog prog = { .len = (unsigned short)filter_len, .filter = insn };

		make_filter(insn, p, f);
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
			wl_die_errno("seccomp(SECCOMP_SET_MODE_FILTER) filter %" PRIu64 " of %" PRIu64,
				     f + 1, filters);
	}
	free(insn);
	if (!wl_proc_field("/proc/self/status", "Seccomp_filters", &installed) ||
	    installed != (int64_t)filters)
		wl_die("/proc/self/status does not show %" PRIu64 " seccomp filters", filters);
	check_jited();
}

/*
 * The steady state for the TLB model: the first round touches the JIT code
 * for the first time, so only the rounds after it are a plugin run, marked
 * in-process as kablab-tlb-mark does (store the id, load it; load +8).
 */
static volatile uint64_t *tlb_marker(void)
{
	void *m = mmap((void *)TLB_MARKER, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (m != (void *)TLB_MARKER)
		wl_die_errno("mmap of the TLB model's marker page at %#lx", TLB_MARKER);
	return m;
}

/* Process p of the ring: its own stack, then a turn per token until 'q'. */
static void child(uint64_t p, int in, int out, int ready, struct shared *sh)
{
	volatile uint64_t *mark = p == 0 && tlb_mark ? tlb_marker() : NULL;
	char tok = 't';
	uint64_t done = 0;

	install_stack(p);
	wl_write_full(ready, "r", 1);
	close(ready);
	wl_read_full(in, &tok, 1);
	while (tok != 'q') {
		if (p == 0 && !wl_continue(done))
			break;
		if (mark && done == 1) {
			mark[0] = tlb_mark;
			(void)mark[0];
		}
		for (uint64_t b = 0; b < batch; b++)
			syscall(SYS_getppid);
		wl_write_full(out, "t", 1);
		wl_read_full(in, &tok, 1);
		done++;
	}
	if (p == 0) {
		sh->end_ns = wl_now_ns();
		sh->rounds = done;
		if (mark && done > 1)
			(void)mark[1];
	}
	/* the last process's next is process 0, which has left */
	if (procs > 1 && p + 1 < procs)
		wl_write_full(out, "q", 1);
	_exit(0);
}

static void stop_all(pid_t *pid, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (pid[i] > 0)
			kill(pid[i], SIGKILL);
	for (uint64_t i = 0; i < n; i++)
		if (pid[i] > 0)
			waitpid(pid[i], NULL, 0);
}

static int run(void)
{
	uint64_t path = filters * (filter_len + CONVERT_EXTRA + FILTER_PENALTY) - FILTER_PENALTY;

	if (path > PATH_LIMIT)
		wl_usage_error("--filters %" PRIu64 " of --filter-len %" PRIu64 " make a path of %" PRIu64
			       " instructions (each filter + %d after conversion to eBPF, + %d after the "
			       "first): the kernel allows %d", filters, filter_len, path, CONVERT_EXTRA,
			       FILTER_PENALTY, PATH_LIMIT);
	wl_param_u64("path_insns", path);
	wl_param_u64("stack_insns_total", procs * filters * filter_len);
	wl_param_u64("syscalls_per_iteration", procs * (batch + 2));
	if (wl_dry_run())
		return 0;

	check_jit_enabled();
	int (*ring)[2] = wl_xmalloc(procs * sizeof(*ring));
	int ready[2];
	pid_t *pid = wl_xmalloc(procs * sizeof(*pid));
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (sh == MAP_FAILED)
		wl_die_errno("mmap");
	if (pipe2(ready, O_CLOEXEC))
		wl_die_errno("pipe2");
	for (uint64_t i = 0; i < procs; i++)
		if (pipe2(ring[i], O_CLOEXEC))
			wl_die_errno("pipe2 (%" PRIu64 " processes need 2 fds each)", procs);
	for (uint64_t i = 0; i < procs; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			stop_all(pid, i);
			wl_die_errno("fork");
		}
		if (pid[i] == 0) {
			int in = ring[i][0], out = ring[(i + 1) % procs][1];

			/* keep only this process's ends, so a dead neighbour is an EOF */
			for (uint64_t j = 0; j < procs; j++) {
				if (ring[j][0] != in)
					close(ring[j][0]);
				if (ring[j][1] != out)
					close(ring[j][1]);
			}
			close(ready[0]);
			child(i, in, out, ready[1], sh);
		}
	}
	close(ready[1]);
	for (uint64_t i = 0; i < procs; i++) {
		char c;

		if (read(ready[0], &c, 1) != 1) {
			stop_all(pid, procs);
			wl_die("a process failed to set up its filter stack (its message is above)");
		}
	}
	uint64_t t0 = wl_now_ns();

	wl_write_full(ring[0][1], "t", 1);
	for (uint64_t i = 0; i < procs; i++) {
		close(ring[i][0]);
		close(ring[i][1]);
	}
	for (uint64_t left = procs; left; left--) {
		int st;
		pid_t w = wait(&st);

		if (w < 0)
			wl_die_errno("wait");
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			for (uint64_t i = 0; i < procs; i++)
				if (pid[i] == w)
					pid[i] = 0;
			stop_all(pid, procs);
			wl_die("a filtered process failed (status 0x%x)", st);
		}
		for (uint64_t i = 0; i < procs; i++)
			if (pid[i] == w)
				pid[i] = 0;
	}
	double el = (sh->end_ns - t0) / 1e9;
	uint64_t ops = sh->rounds * procs * (batch + 2);

	wl_set_elapsed(el);
	wl_work(ops, "syscall");
	wl_metric("ops_per_s", ops / el, "1/s", "higher");
	wl_metric("ns_per_op", el * 1e9 / ops, "ns", "lower");
	munmap(sh, sizeof(*sh));
	free(pid);
	free(ring);
	close(ready[0]);
	return 0;
}

const struct wl_workload wl_workload = {
	.name = "seccomp-stack",
	.description = "getppid turns over a pipe ring of processes with their own seccomp filter stacks",
	.iteration = "one round of the ring: every process does a turn",
	.default_iterations = 100,
	.opts = opts,
	.run = run,
};
