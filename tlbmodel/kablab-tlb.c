// SPDX-License-Identifier: GPL-2.0
/*
 * kablab-tlb: a QEMU TCG plugin (ABI version 1, QEMU 7.2) that feeds every
 * guest instruction fetch and memory access into the TLB model.
 *
 *   qemu-system-x86_64 -accel tcg ... \
 *     -object memory-backend-memfd,id=ram0,size=2G,share=on \
 *     -machine pc,memory-backend=ram0 \
 *     -plugin ./libkablab-tlb.so,root=0x1c0a000,out=tlb.jsonl
 *
 * ABI v1 cannot read guest registers or memory, so the plugin reads guest
 * RAM from QEMU's own mapping of the memfd backend (found in
 * /proc/self/maps) to walk the kernel page tables from root=, the physical
 * address of init_top_pgt. Arguments and output: README.md.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu-plugin-abi.h"
#include "tlbmodel.h"

KABLAB_PLUGIN_EXPORT int qemu_plugin_version = 1;

#define MARKER_DEFAULT	0x6b61626c0000ull	/* "kabl", a user address */
#define MARKER_START	0			/* load: a run starts */
#define MARKER_END	8			/* load: the run ends */
#define RAM_MAPPING	"/memfd:memory-backend-memfd (deleted)"

/*
 * Until the guest asks for the model (from=mark, the default), the plugin
 * only looks for this instruction when QEMU translates code: nopw
 * 0x4b41424c(%rax,%rax,1), "LBAK" in its displacement, which
 * kablab-tlb-mark executes before a run's start. Guest code runs at plain
 * TCG speed until then; at the instruction the
 * plugin asks QEMU to drop all translated code and instruments what is
 * translated again, so the model starts empty and cold, before the first
 * run's marker.
 */
static const uint8_t ACTIVATE_INSN[] = {
	0x66, 0x0f, 0x1f, 0x84, 0x00, 0x4c, 0x42, 0x41, 0x4b
};

/* Guest RAM as QEMU maps it; below the PCI hole offset == guest physical. */
struct ram {
	const uint8_t *base;
	uint64_t size;
	int state;		/* 0 not looked for yet, 1 found, -1 missing */
};

static struct {
	pthread_mutex_t lock;
	struct tlbm m;
	struct ram ram;
	FILE *out;
	uint64_t marker;
	uint64_t page_offset;	/* direct map: pa = va - page_offset */
	uint64_t dmap_size;	/* ... for va up to page_offset + dmap_size */
	bool in_run;
	uint64_t run_id, nruns;
	struct tlbm_stats run_start;
	char root_guard[192];	/* why root= failed its check at run start */
	bool one_vcpu;		/* vCPU callbacks need no lock */
	qemu_plugin_id_t id;
	bool active;		/* instrumenting (from=boot, or activated) */
	bool activating;	/* the reset is asked for */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * With one vCPU (the lab's -icount guests), its thread is the only one
 * that calls back while the guest runs, and QEMU stops it before the exit
 * callback: the per-access callbacks skip the lock then.
 */
static inline void vcpu_lock(void)
{
	if (!g.one_vcpu)
		pthread_mutex_lock(&g.lock);
}

static inline void vcpu_unlock(void)
{
	if (!g.one_vcpu)
		pthread_mutex_unlock(&g.lock);
}

static void ram_find(struct ram *r)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	uint64_t lo, hi, off, best = 0;

	r->state = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, RAM_MAPPING) ||
		    sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64,
			   &lo, &hi, &off) != 3)
			continue;
		if (off == 0 && hi - lo > best) {	/* a new region */
			best = hi - lo;
			r->base = (const uint8_t *)(uintptr_t)lo;
			r->size = best;
			r->state = 1;
		} else if (r->state == 1 &&
			   lo == (uintptr_t)r->base + r->size &&
			   off == r->size) {		/* its continuation */
			r->size += hi - lo;
			best = r->size;
		}
	}
	fclose(f);
}

static int ram_read(void *ctx, uint64_t pa, uint64_t *val)
{
	struct ram *r = ctx;

	if (!r->state) {
		ram_find(r);
		if (r->state < 0)
			fprintf(stderr, "kablab-tlb: no %s mapping: guest "
				"memory unreadable, kernel walks fail (use "
				"-object memory-backend-memfd,share=on)\n",
				RAM_MAPPING);
	}
	if (r->state < 0 || pa % 8 || r->size < 8 || pa > r->size - 8)
		return -1;
	*val = __atomic_load_n((const uint64_t *)(r->base + pa),
			       __ATOMIC_RELAXED);
	return 0;
}

/* A TB's fetches from one page: the page and the instructions it holds. */
static void *pack_fetch(uint64_t va, size_t n)
{
	return (void *)(uintptr_t)(((uint64_t)((int64_t)va >> 12) << 10) | n);
}

static void unpack_fetch(void *p, uint64_t *va, uint64_t *n)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	*va = (uint64_t)((int64_t)x >> 10) << 12;
	*n = x & 1023;
}

static void on_fetch(unsigned int vcpu, void *udata)
{
	uint64_t va, n;

	unpack_fetch(udata, &va, &n);
	vcpu_lock();
	if (vcpu < g.m.ncpu) {
		tlbm_insns(&g.m, vcpu, va, n);
		tlbm_access(&g.m, vcpu, va, TLBM_INSN, n);
	}
	vcpu_unlock();
}

static void on_flush(unsigned int vcpu, void *udata)
{
	vcpu_lock();
	if (vcpu < g.m.ncpu)
		tlbm_flush_insn(&g.m, vcpu, (enum tlbm_flush)(uintptr_t)udata);
	vcpu_unlock();
}

/*
 * The run's guard: "ok", or the reasons its counts are not the guest
 * kernel's (tlbmodel/README.md "Guards"). A completed kernel access whose
 * walk finds no mapping means the model does not see the tables the
 * guest uses.
 */
static void guard_json(const struct tlbm_stats *d, FILE *f)
{
	uint64_t faults = d->ev[TLBM_EV_WALK_FAULT];
	uint64_t errors = d->ev[TLBM_EV_WALK_ERROR];
	const char *sep = "";

	if (!g.root_guard[0] && !faults && !errors) {
		fputs("{\"ok\":true}", f);
		return;
	}
	fputs("{\"ok\":false,\"reasons\":[", f);
	if (g.root_guard[0]) {
		fprintf(f, "\"%s\"", g.root_guard);
		sep = ",";
	}
	if (faults) {
		fprintf(f, "%s\"%" PRIu64 " kernel walks found no mapping "
			"from root=0x%" PRIx64 "\"", sep, faults, g.m.kroot);
		sep = ",";
	}
	if (errors)
		fprintf(f, "%s\"%" PRIu64 " kernel walks could not read guest "
			"memory\"", sep, errors);
	fputs("]}", f);
}

static void emit_run(uint64_t id, unsigned int vcpu)
{
	struct tlbm_stats d;

	tlbm_stats_sub(&d, &g.m.st, &g.run_start);
	fprintf(g.out, "{\"type\":\"run\",\"seq\":%" PRIu64 ",\"id\":%" PRIu64
		",\"vcpu\":%u,\"guard\":", g.nruns++, id, vcpu);
	guard_json(&d, g.out);
	fputs(",\"counts\":", g.out);
	tlbm_stats_json(&d, g.out);
	fputs("}\n", g.out);
	fflush(g.out);
}

static void warn(const char *msg)
{
	fprintf(g.out, "{\"type\":\"warning\",\"msg\":\"%s\"}\n", msg);
	fflush(g.out);
}

/* The run id is the u64 the runner stored at the marker before loading it. */
static uint64_t marker_id(qemu_plugin_meminfo_t info, uint64_t va)
{
	struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, va);
	uint64_t id;

	if (!hw || qemu_plugin_hwaddr_is_io(hw) ||
	    ram_read(&g.ram, qemu_plugin_hwaddr_phys_addr(hw), &id))
		return UINT64_MAX;
	return id;
}

/* Accesses to the marker page are protocol, not workload: not modelled. */
static void on_marker(unsigned int vcpu, qemu_plugin_meminfo_t info,
		      uint64_t off, uint64_t va)
{
	uint64_t id = 0;

	if (qemu_plugin_mem_is_store(info) ||
	    (off != MARKER_START && off != MARKER_END))
		return;
	vcpu_lock();
	tlbm_settle(&g.m);	/* a held CR4 write is never part of a run's edge */
	if (off == MARKER_START) {
		id = marker_id(info, va);
		if (g.in_run)
			warn("run start inside a run: restarted");
		g.in_run = true;
		g.run_id = id;
		tlbm_check_root(&g.m, g.page_offset, g.root_guard,
				sizeof(g.root_guard));
		g.run_start = g.m.st;
	} else if (!g.in_run) {
		warn("run end without a start: ignored");
	} else {
		emit_run(g.run_id, vcpu);
		g.in_run = false;
	}
	vcpu_unlock();
}

/* Physical address of a kernel store, for the page-table watch. */
static bool store_pa(qemu_plugin_meminfo_t info, uint64_t va, uint64_t *pa)
{
	struct qemu_plugin_hwaddr *hw;

	if (va - g.page_offset < g.dmap_size) {	/* direct map: cheap */
		*pa = va - g.page_offset;
		return true;
	}
	hw = qemu_plugin_get_hwaddr(info, va);
	if (!hw || qemu_plugin_hwaddr_is_io(hw))
		return false;
	*pa = qemu_plugin_hwaddr_phys_addr(hw);
	return true;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info,
		   uint64_t va, void *udata)
{
	bool pt_check;
	uint64_t pa;

	(void)udata;
	if (va - g.marker < 4096) {
		on_marker(vcpu, info, va - g.marker, va);
		return;
	}
	pt_check = tlbm_mode_of(va) == TLBM_KERNEL &&
		   qemu_plugin_mem_is_store(info) && store_pa(info, va, &pa);
	vcpu_lock();
	if (vcpu < g.m.ncpu) {
		tlbm_access(&g.m, vcpu, va, TLBM_DATA, 1);
		if (pt_check)
			tlbm_store(&g.m, pa,
				   1u << qemu_plugin_mem_size_shift(info));
	}
	vcpu_unlock();
}

/*
 * One iTLB lookup per page a TB executes from, standing for the fetches of
 * all its instructions there (the rest would hit the entry just used, so
 * misses and LRU order are the same as per-instruction lookups).
 */
static void on_atexit(qemu_plugin_id_t id, void *udata);
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

/* QEMU dropped the translated code and our callbacks: instrument all. */
static void on_reset(qemu_plugin_id_t id)
{
	pthread_mutex_lock(&g.lock);
	g.active = true;
	fputs("{\"type\":\"activated\"}\n", g.out);
	fflush(g.out);
	pthread_mutex_unlock(&g.lock);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
}

static void on_activate(unsigned int vcpu, void *udata)
{
	bool ask;

	(void)vcpu;
	(void)udata;
	pthread_mutex_lock(&g.lock);
	ask = !g.active && !g.activating;
	g.activating = true;
	pthread_mutex_unlock(&g.lock);
	if (ask)
		qemu_plugin_reset(g.id, on_reset);
}

/* Dormant: only the activation instruction gets a callback. */
static void on_tb_trans_dormant(struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);

	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (qemu_plugin_insn_size(insn) == sizeof(ACTIVATE_INSN) &&
		    !memcmp(qemu_plugin_insn_data(insn), ACTIVATE_INSN,
			    sizeof(ACTIVATE_INSN)))
			qemu_plugin_register_vcpu_insn_exec_cb(insn,
				on_activate, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), split = n;
	uint64_t va0 = qemu_plugin_tb_vaddr(tb);

	(void)id;
	if (!__atomic_load_n(&g.active, __ATOMIC_RELAXED)) {
		on_tb_trans_dormant(tb);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t va = qemu_plugin_insn_vaddr(insn);
		enum tlbm_flush f;

		if (split == n && (va >> 12) != (va0 >> 12)) {
			split = i;
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_fetch,
				QEMU_PLUGIN_CB_NO_REGS, pack_fetch(va, n - i));
		}
		f = tlbm_decode_flush(qemu_plugin_insn_data(insn),
				      qemu_plugin_insn_size(insn));
		if (f != TLBM_FLUSH_NONE)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_flush,
				QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)f);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem,
						 QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, NULL);
	}
	if (n)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_fetch,
			QEMU_PLUGIN_CB_NO_REGS, pack_fetch(va0, split));
}

static void on_atexit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	pthread_mutex_lock(&g.lock);
	tlbm_settle(&g.m);
	if (g.in_run)
		warn("exit inside a run: its counts are in the total only");
	if (!g.ram.state)	/* never needed: say whether it was there */
		ram_find(&g.ram);
	fprintf(g.out, "{\"type\":\"total\",\"runs\":%" PRIu64 ",\"ram\":\"%s\""
		",\"active\":%s,\"watched_pt_pages\":%zu,\"counts\":", g.nruns,
		g.ram.state > 0 ? "memfd" : "missing",
		g.active ? "true" : "false", g.m.watch.n);
	tlbm_stats_json(&g.m.st, g.out);
	fputs("}\n", g.out);
	fflush(g.out);
	if (g.out != stderr)
		fclose(g.out);
	g.out = stderr;
	pthread_mutex_unlock(&g.lock);
}

struct args {
	const char *out;
	bool have_root;
	uint64_t root;
	int levels;
	bool have_page_offset;
	uint64_t page_offset;
	uint64_t marker;
	bool from_boot;
	struct tlbm_config cfg;
};

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s)
		return -1;
	*v = strtoull(s, &end, 0);
	return *end ? -1 : 0;
}

/* One "key=value" argument; argv stays valid while the plugin is loaded. */
static int parse_arg(struct args *a, const char *arg)
{
	const char *val = strchr(arg, '=');
	char key[32];
	uint64_t v;

	if (!val || val - arg >= (long)sizeof(key))
		return -1;
	memcpy(key, arg, (size_t)(val - arg));
	key[val++ - arg] = '\0';
	if (!strcmp(key, "out"))
		a->out = val;
	else if (!strcmp(key, "root") && !strcmp(val, "none"))
		a->have_root = false;
	else if (!strcmp(key, "root"))
		return parse_u64(val, &a->root) ? -1 : (a->have_root = true, 0);
	else if (!strcmp(key, "levels"))
		return parse_u64(val, &v) || (v != 4 && v != 5) ? -1 :
		       (a->levels = (int)v, 0);
	else if (!strcmp(key, "page_offset"))
		return parse_u64(val, &a->page_offset) ? -1 :
		       (a->have_page_offset = true, 0);
	else if (!strcmp(key, "from") && (!strcmp(val, "boot") ||
					   !strcmp(val, "mark")))
		a->from_boot = !strcmp(val, "boot");
	else if (!strcmp(key, "core"))
		return 0;	/* applied first, see qemu_plugin_install() */
	else if (!strcmp(key, "marker"))
		return parse_u64(val, &a->marker) || a->marker % 4096 ||
		       a->marker >> 47 ? -1 : 0;
	else
		return tlbm_config_set(&a->cfg, key, val);
	return 0;
}

static void emit_params(const struct args *a, unsigned int ncpu)
{
	fprintf(g.out, "{\"type\":\"params\",\"plugin\":\"kablab-tlb\","
		"\"format\":2,\"core\":\"%s\",\"base\":\"%s\",\"tlb\":",
		a->cfg.custom ? "custom" : a->cfg.core, a->cfg.core);
	tlbm_config_json(&a->cfg, g.out);
	fprintf(g.out, ",\"levels\":%d,\"root\":", a->levels);
	if (a->have_root)
		fprintf(g.out, "\"0x%" PRIx64 "\"", a->root);
	else
		fputs("null", g.out);
	fprintf(g.out, ",\"page_offset\":\"0x%" PRIx64 "\",\"direct_map_size\":"
		"\"0x%" PRIx64 "\",\"marker\":\"0x%" PRIx64 "\",\"vcpus\":%u,"
		"\"from\":\"%s\"}\n", g.page_offset, g.dmap_size, g.marker, ncpu,
		a->from_boot ? "boot" : "mark");
	fflush(g.out);
}

static int setup(const struct args *a, unsigned int ncpu)
{
	char err[160];

	if (tlbm_config_check(&a->cfg, err, sizeof(err))) {
		fprintf(stderr, "kablab-tlb: %s\n", err);
		return -1;
	}
	g.out = a->out ? fopen(a->out, "w") : stderr;
	if (!g.out) {
		perror(a->out);
		return -1;
	}
	g.marker = a->marker;
	g.active = a->from_boot;
	g.page_offset = a->have_page_offset ? a->page_offset :
			a->levels == 5 ? 0xff11000000000000ull :
					 0xffff888000000000ull;
	/* Linux x86-64: 64 TiB of direct map with 4 levels, 32 PiB with 5 */
	g.dmap_size = a->levels == 5 ? 1ull << 55 : 1ull << 46;
	if (tlbm_init(&g.m, &a->cfg, ncpu, a->levels, a->have_root, a->root,
		      ram_read, &g.ram)) {
		fprintf(stderr, "kablab-tlb: out of memory\n");
		return -1;
	}
	tlbm_set_direct_map(&g.m, g.page_offset, g.dmap_size);
	emit_params(a, ncpu);
	return 0;
}

KABLAB_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					     const qemu_info_t *info,
					     int argc, char **argv)
{
	struct args a = { .levels = 4, .marker = MARKER_DEFAULT };
	bool root_given = false;

	tlbm_config_default(&a.cfg);
	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr, "kablab-tlb: needs qemu-system-x86_64\n");
		return -1;
	}
	/* a named core first, whatever its place: the other keys edit it */
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "core=", 5) &&
		    tlbm_config_core(&a.cfg, argv[i] + 5)) {
			fprintf(stderr, "kablab-tlb: unknown core '%s' "
				"(goldencove, legacy)\n", argv[i] + 5);
			return -1;
		}
	for (int i = 0; i < argc; i++) {
		root_given |= !strncmp(argv[i], "root=", 5);
		if (parse_arg(&a, argv[i])) {
			fprintf(stderr, "kablab-tlb: bad argument '%s' "
				"(see tlbmodel/README.md)\n", argv[i]);
			return -1;
		}
	}
	if (!root_given) {	/* silently modelling 4k would mislead */
		fprintf(stderr, "kablab-tlb: root=<phys of init_top_pgt> "
			"(or root=none) is required\n");
		return -1;
	}
	if (setup(&a, (unsigned int)info->system.max_vcpus))
		return -1;
	g.one_vcpu = info->system.max_vcpus == 1;
	g.id = id;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
	return 0;
}
