/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tlbmodel: a deterministic x86-64 TLB model, no QEMU dependency.
 *
 * Per vCPU: an L1 dTLB, an L1 iTLB and a second-level TLB (STLB) shared by
 * both, each built from one set-associative LRU array per page size (an
 * array may be shared by several sizes, as Intel's STLB shares 4k and 2M).
 * A miss in both levels is a page walk: kernel addresses are walked in the
 * guest's own page tables through a physical-memory reader callback, user
 * addresses are 4k (see README.md, "User space").
 *
 * The model stays coherent with the guest by watching the page-table pages
 * its walks read: a store to an entry a translation was derived from
 * invalidates that translation's range on every vCPU (tlbm_store()).
 */
#ifndef TLBMODEL_H
#define TLBMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum tlbm_psize { TLBM_4K, TLBM_2M, TLBM_1G, TLBM_NPSIZE };
enum tlbm_mode { TLBM_KERNEL, TLBM_USER, TLBM_NMODE };
enum tlbm_kind { TLBM_DATA, TLBM_INSN, TLBM_NKIND };
enum tlbm_level { TLBM_L1D, TLBM_L1I, TLBM_L2, TLBM_NLEVEL };

/* TLB-maintenance instructions recognised from their bytes */
enum tlbm_flush {
	TLBM_FLUSH_NONE,
	TLBM_FLUSH_CR3,		/* mov to CR3: drop non-global entries */
	TLBM_FLUSH_CR4,		/* mov to CR4: see tlbm_flush_insn() */
	TLBM_FLUSH_INVLPG,	/* invlpg m: one page, address not visible */
	TLBM_FLUSH_INVPCID,	/* invpcid: type not visible, drop all */
};

enum tlbm_event {
	TLBM_EV_CR3,		/* CR3 writes executed */
	TLBM_EV_CR4,		/* CR4 writes executed */
	TLBM_EV_CR4_GLOBAL,	/* ... that dropped global entries (pairs) */
	TLBM_EV_INVLPG,		/* invlpg executed (counted, see README) */
	TLBM_EV_INVPCID,	/* invpcid executed */
	TLBM_EV_PT_STORE,	/* stores to watched page-table pages */
	TLBM_EV_PT_INVAL,	/* ... to an entry translations came from */
	TLBM_EV_ALIAS_FLUSH,	/* ... to a page reached two ways: full flush */
	TLBM_EV_WALK_FAULT,	/* kernel walks that found no mapping */
	TLBM_EV_WALK_ERROR,	/* kernel walks that could not read memory */
	TLBM_NEV,
};

extern const char *const tlbm_psize_name[TLBM_NPSIZE];
extern const char *const tlbm_level_name[TLBM_NLEVEL];
extern const char *const tlbm_event_name[TLBM_NEV];

/*
 * One array of a level: entries / ways sets, holding the page sizes in
 * 'sizes' (a bitmask of 1 << enum tlbm_psize). A size may live in several
 * arrays of a level (Golden Cove's STLB keeps 4k entries in both of its
 * arrays): it is looked up in each, and a fill takes the least recently
 * used way among all the sets it may go to. A size no array of a level
 * holds is splintered there into the largest smaller size that level has
 * (as both Intel and AMD do for 1G pages in some structures).
 */
#define TLBM_MAXARR 4

struct tlbm_array_cfg {
	uint32_t entries;
	uint32_t ways;
	uint8_t sizes;
};

struct tlbm_level_cfg {
	uint8_t narr;
	struct tlbm_array_cfg a[TLBM_MAXARR];
};

struct tlbm_config {
	struct tlbm_level_cfg lv[TLBM_NLEVEL];
	const char *core;	/* the named parameter set it started from */
	bool custom;		/* overridden since */
};

void tlbm_config_default(struct tlbm_config *c);
int tlbm_config_core(struct tlbm_config *c, const char *name);
int tlbm_config_set(struct tlbm_config *c, const char *key, const char *val);
int tlbm_config_check(const struct tlbm_config *c, char *err, size_t n);
void tlbm_config_json(const struct tlbm_config *c, FILE *f);

/* Guest-physical memory reader: 0 on success, -1 outside guest RAM. */
typedef int (*tlbm_read_fn)(void *ctx, uint64_t pa, uint64_t *val);

#define TLBM_MAX_LEVELS 5

struct tlbm_walk {
	bool present;
	bool global;
	bool read_error;
	enum tlbm_psize psize;
	uint64_t pa;			/* physical base of the page */
	int ntables;			/* page-table pages read, root first */
	struct {
		uint64_t pa;		/* of the table page */
		int level;		/* 5..1, 1 = PTE table */
		unsigned int idx;	/* entry used */
	} t[TLBM_MAX_LEVELS];
};

int tlbm_walk(tlbm_read_fn rd, void *ctx, uint64_t root, int levels,
	      uint64_t va, struct tlbm_walk *w);

enum tlbm_flush tlbm_decode_flush(const uint8_t *b, size_t n);

/* TLB arrays */
struct tlbm_entry {
	uint64_t vpn;		/* va >> entry size shift */
	uint64_t stamp;		/* LRU: larger = more recent */
	uint8_t valid, global;
	uint8_t esize;		/* size the entry is tagged with */
	uint8_t psize;		/* guest mapping size it came from */
};

struct tlbm_array {
	uint32_t sets, ways;
	uint8_t sizes;		/* bitmask of entry sizes held */
	struct tlbm_entry *e;
};

struct tlbm_tlb {
	struct tlbm_array arr[TLBM_MAXARR];
	uint8_t narr;
	uint8_t nhome[TLBM_NPSIZE];	/* arrays that hold a size */
	uint8_t home[TLBM_NPSIZE][TLBM_MAXARR];
	uint64_t clock;
};

/* Counters. Every field is a uint64_t so runs can be diffed as arrays. */
struct tlbm_counts {
	uint64_t acc;		/* translations looked up */
	uint64_t l1_miss;	/* missed the L1 (d or i) TLB */
	uint64_t walks;		/* missed the STLB too: page walks */
};

struct tlbm_stats {
	struct tlbm_counts c[TLBM_NMODE][TLBM_NKIND][TLBM_NPSIZE];
	/*
	 * The kernel data accesses of c[] that fell in the direct map: the
	 * region the lab's kernels map differently. Other kernel 4k entries
	 * (vmalloc'd stacks, fixmap) move with boot-time layout and would
	 * blur the comparison.
	 */
	struct tlbm_counts dmap[TLBM_NPSIZE];
	uint64_t insns[TLBM_NMODE];
	uint64_t ev[TLBM_NEV];
};

void tlbm_stats_sub(struct tlbm_stats *d, const struct tlbm_stats *a,
		    const struct tlbm_stats *b);
void tlbm_stats_json(const struct tlbm_stats *s, FILE *f);

/* Page-table pages the walker read, keyed by page frame number */
struct tlbm_watch_ent {
	uint64_t key;		/* pfn + 1, 0 = empty slot */
	uint64_t base;		/* va the table's entry 0 maps */
	uint64_t bits[8];	/* entries translations were derived from */
	uint8_t level;
	uint8_t alias;		/* also reached at another level/base */
};

struct tlbm_watch {
	struct tlbm_watch_ent *t;
	size_t cap, n;
	uint64_t gen;		/* bumped when a page starts being watched */
};

struct tlbm_watch_ent *tlbm_watch_find(struct tlbm_watch *w, uint64_t pfn);
int tlbm_watch_add(struct tlbm_watch *w, uint64_t pfn, int level,
		   uint64_t base, unsigned int idx);
void tlbm_watch_del(struct tlbm_watch *w, struct tlbm_watch_ent *e);
size_t tlbm_watch_drop(struct tlbm_watch *w, int below, uint64_t first,
		       uint64_t last);

/*
 * ABI v1 does not show the value a mov to CR4 writes. Linux flushes global
 * entries by toggling CR4.PGE with two writes a few instructions apart
 * (__native_tlb_flush_global); its other CR4 writes (TSD, PCE, boot-time
 * feature bits) come alone and leave the TLB alone on hardware. So a CR4
 * write is held until its vCPU has either written CR4 again within
 * TLBM_CR4_PAIR_INSNS instructions (a PGE toggle: both writes drop every
 * entry) or run past that window (alone: nothing dropped). Meanwhile every
 * model event is queued and replayed once the write is decided, so the
 * accesses between the two writes of a pair meet the flushed TLB as they
 * do on hardware.
 */
#define TLBM_CR4_PAIR_INSNS 64

enum tlbm_qtype { TLBM_Q_ACCESS, TLBM_Q_INSNS, TLBM_Q_STORE, TLBM_Q_FLUSH,
		  TLBM_Q_INVLPG };

struct tlbm_qev {
	uint8_t type, kind;
	uint16_t cpu;
	uint32_t len;
	uint64_t a, n;
};

/*
 * The L1 entries the last accesses of a kind touched on a vCPU: the
 * TLBM_NRECENT most recently used entries of that L1, each with the tick
 * of its last use and where its counts go. No other entry can translate an
 * address one of them covers (a fill comes only after a miss), so an
 * access inside one is a hit, and tlbm_access() counts it here without a
 * lookup. Such a hit does not stamp the entry, it only takes a new tick;
 * before anything else reads or sets that L1's stamps, they are set in
 * tick order (mru_sync), so every LRU decision is the one per-access
 * stamping makes. A flush or invalidation clears an entry's valid bit,
 * which the check reads.
 */
#define TLBM_NRECENT 4

struct tlbm_recent {
	struct tlbm_entry *e;
	uint64_t vpn, tick;
	uint8_t shift, esize;
	struct tlbm_counts *cnt, *dmap;	/* dmap NULL: not in the direct map */
};

struct tlbm_mru {
	struct tlbm_recent r[TLBM_NRECENT];
	uint8_t n;
	bool dirty;		/* stamps do not follow the ticks yet */
	uint64_t tick;
};

struct tlbm_cpu {
	struct tlbm_tlb tlb[TLBM_NLEVEL];
	struct tlbm_mru mru[TLBM_NKIND];
	uint64_t insns;		/* executed, for the CR4 pair window */
	bool cr4_held;		/* a CR4 write waits for its decision */
	uint64_t cr4_at;	/* insns at that write */
	size_t cr4_q;		/* its place in the queue */
};

struct tlbm {
	struct tlbm_config cfg;
	unsigned int ncpu;
	struct tlbm_cpu *cpu;
	tlbm_read_fn read;
	void *read_ctx;
	bool have_root;
	uint64_t kroot;
	int levels;
	uint64_t dmap_base, dmap_size;	/* direct map; size 0: none */
	struct tlbm_watch watch;
	struct tlbm_stats st;
	bool no_shortcuts;	/* tests: every access and store the long way */
	uint64_t nowatch_pfn;	/* the last stored page: not watched ... */
	uint64_t nowatch_gen;	/* ... while watch.gen is still this */
	unsigned int held;	/* vCPUs with a CR4 write held */
	struct tlbm_qev *q;	/* events since the oldest held write */
	size_t qhead, qlen, qcap;
};

int tlbm_init(struct tlbm *m, const struct tlbm_config *cfg,
	      unsigned int ncpu, int levels, bool have_root, uint64_t kroot,
	      tlbm_read_fn rd, void *ctx);
void tlbm_fini(struct tlbm *m);
void tlbm_set_direct_map(struct tlbm *m, uint64_t base, uint64_t size);

static inline enum tlbm_mode tlbm_mode_of(uint64_t va)
{
	return (va >> 63) ? TLBM_KERNEL : TLBM_USER;
}

void tlbm_access(struct tlbm *m, unsigned int cpu, uint64_t va,
		 enum tlbm_kind kind, uint64_t n);
void tlbm_insns(struct tlbm *m, unsigned int cpu, uint64_t va, uint64_t n);
void tlbm_store(struct tlbm *m, uint64_t pa, unsigned int len);
void tlbm_flush_insn(struct tlbm *m, unsigned int cpu, enum tlbm_flush f);
void tlbm_invlpg(struct tlbm *m, unsigned int cpu, uint64_t va);
void tlbm_settle(struct tlbm *m);
int tlbm_check_root(struct tlbm *m, uint64_t page_offset, char *why,
		    size_t n);
bool tlbm_present(struct tlbm *m, unsigned int cpu, enum tlbm_level lv,
		  uint64_t va, enum tlbm_psize *psize);

#endif
