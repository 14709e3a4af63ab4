// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the TLB model on synthetic traces whose answers are worked
 * out by hand in the comments. Prints "ok NAME" or "not ok NAME: why" per
 * test, "json NAME {...}" lines for tests/test_tlbmodel.py to parse, and
 * exits 1 if anything failed.
 *
 * The fake guest: 64 pages of physical memory holding one 4-level kernel
 * page table for the direct map at 0xffff888000000000 (PML4 slot 273):
 *
 *   page 1  PML4    [273] -> page 2
 *   page 2  PDPT    [0] -> page 3, [1] 1G leaf @1G (G), [2] 1G leaf @2G (G)
 *   page 3  PD      [0] -> page 4, [1] 2M @2M (G), [2] 2M @4M (G),
 *                   [3] 2M @6M (not global), [4] not present
 *   page 4  PT      [i] 4k @ 1M + i*4k (G)
 *   page 5  spare   becomes the PT of a split of PD[1]
 *   page 6  PML5    [273] -> page 1 (for the 5-level walk)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlbmodel.h"

#define NPAGES	64
#define K	0xffff888000000000ull	/* direct map, 4-level, nokaslr */
#define MB2	0x200000ull
#define GB1	0x40000000ull
#define P	1ull
#define PS	(1ull << 7)
#define G	(1ull << 8)

static uint64_t mem[NPAGES * 512];
static int failed, checks_failed;
static const char *cur;

#define CHECK(cond) check(!!(cond), #cond, __LINE__)
#define CHECK_EQ(a, b) check_eq((unsigned long long)(a), \
				(unsigned long long)(b), #a, __LINE__)

static void check(int ok, const char *what, int line)
{
	if (!ok && !checks_failed++)
		printf("not ok %s: line %d: %s\n", cur, line, what);
}

static void check_eq(unsigned long long a, unsigned long long b,
		     const char *what, int line)
{
	if (a != b && !checks_failed++)
		printf("not ok %s: line %d: %s = %llu, expected %llu\n", cur,
		       line, what, a, b);
}

static int rd(void *ctx, uint64_t pa, uint64_t *val)
{
	(void)ctx;
	if (pa >= sizeof(mem) || pa % 8)
		return -1;
	*val = mem[pa / 8];
	return 0;
}

static void pte(int page, int idx, uint64_t val)
{
	mem[page * 512 + idx] = val;
}

static void build_tables(void)
{
	memset(mem, 0, sizeof(mem));
	pte(1, 273, 0x2000 | P);
	pte(2, 0, 0x3000 | P);
	pte(2, 1, GB1 | P | PS | G);
	pte(2, 2, 2 * GB1 | P | PS | G);
	pte(3, 0, 0x4000 | P);
	pte(3, 1, MB2 | P | PS | G);
	pte(3, 2, 2 * MB2 | P | PS | G);
	pte(3, 3, 3 * MB2 | P | PS);
	for (int i = 0; i < 512; i++)
		pte(4, i, (0x100000 + i * 0x1000ull) | P | G);
	pte(6, 273, 0x1000 | P);
}

/* A config with every array absent; tests switch on what they need. */
static void cfg_none(struct tlbm_config *c)
{
	memset(c, 0, sizeof(*c));
}

static void set(struct tlbm_config *c, const char *k, const char *v)
{
	if (tlbm_config_set(c, k, v))
		check(0, k, __LINE__);
}

static struct tlbm *model(const struct tlbm_config *c, unsigned int ncpu)
{
	static struct tlbm m;
	char err[128];

	tlbm_fini(&m);
	build_tables();
	if (tlbm_config_check(c, err, sizeof(err)))
		check(0, err, __LINE__);
	if (tlbm_init(&m, c, ncpu, 4, true, 0x1000, rd, NULL))
		check(0, "tlbm_init", __LINE__);
	return &m;
}

static const struct tlbm_counts *cnt(struct tlbm *m, uint64_t va,
				     enum tlbm_kind k, enum tlbm_psize s)
{
	return &m->st.c[tlbm_mode_of(va)][k][s];
}

static void test_walk_4k_2m_1g(void)
{
	struct tlbm_walk w;

	build_tables();
	CHECK_EQ(tlbm_walk(rd, NULL, 0x1000, 4, K + 0x3abc, &w), 0);
	CHECK(w.present && w.global);
	CHECK_EQ(w.psize, TLBM_4K);
	CHECK_EQ(w.pa, 0x103000);	/* PT[3] */
	CHECK_EQ(w.ntables, 4);
	CHECK_EQ(w.t[0].pa, 0x1000);
	CHECK_EQ(w.t[0].idx, 273);
	CHECK_EQ(w.t[3].pa, 0x4000);
	CHECK_EQ(w.t[3].idx, 3);
	CHECK_EQ(w.t[3].level, 1);

	tlbm_walk(rd, NULL, 0x1000, 4, K + MB2 + 0x12345, &w);
	CHECK(w.present && w.global);
	CHECK_EQ(w.psize, TLBM_2M);
	CHECK_EQ(w.pa, MB2);
	CHECK_EQ(w.ntables, 3);
	CHECK_EQ(w.t[2].idx, 1);

	tlbm_walk(rd, NULL, 0x1000, 4, K + GB1 + 0x1234567, &w);
	CHECK(w.present && w.global);
	CHECK_EQ(w.psize, TLBM_1G);
	CHECK_EQ(w.pa, GB1);
	CHECK_EQ(w.ntables, 2);

	tlbm_walk(rd, NULL, 0x1000, 4, K + 3 * MB2, &w);
	CHECK(w.present && !w.global);	/* PD[3] has no G */
}

static void test_walk_absent_and_errors(void)
{
	struct tlbm_walk w;

	build_tables();
	tlbm_walk(rd, NULL, 0x1000, 4, K + 4 * MB2, &w);	/* PD[4] = 0 */
	CHECK(!w.present && !w.read_error);
	CHECK_EQ(w.ntables, 3);
	tlbm_walk(rd, NULL, 0x1000, 4, 0x400000, &w);	/* PML4[0] = 0 */
	CHECK(!w.present);
	CHECK_EQ(w.ntables, 1);
	CHECK_EQ(tlbm_walk(rd, NULL, 1ull << 40, 4, K, &w), -1);
	CHECK(w.read_error && !w.present);
	CHECK_EQ(tlbm_walk(rd, NULL, 0x1000, 3, K, &w), -1);
}

/* LA57: PML5 index is bits 56:48; 0xff11... has index 273 there too. */
static void test_walk_5level(void)
{
	uint64_t va = 0xff11000000000000ull | (273ull << 39) | 0x3abc;
	struct tlbm_walk w;

	build_tables();
	tlbm_walk(rd, NULL, 0x6000, 5, va, &w);
	CHECK(w.present);
	CHECK_EQ(w.psize, TLBM_4K);
	CHECK_EQ(w.pa, 0x103000);
	CHECK_EQ(w.ntables, 5);
	CHECK_EQ(w.t[0].level, 5);
}

/*
 * Fully associative 4-entry L1, no STLB, user pages A..E (4k, no walk):
 *   A B C D   fill;            LRU order A B C D
 *   A         hit;             B C D A
 *   E         miss, evicts B;  C D A E
 *   B         miss, evicts C;  D A E B
 *   A         hit;             D E B A
 *   C         miss, evicts D;  E B A C
 * 9 accesses, 7 L1 misses (= walks, there is no STLB), D is gone.
 */
static void test_lru_order(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	const char *seq = "ABCDAEBAC";

	cfg_none(&c);
	set(&c, "l1d_4k", "4:4");
	m = model(&c, 1);
	for (const char *p = seq; *p; p++)
		tlbm_access(m, 0, (uint64_t)(*p - 'A' + 1) << 12, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->acc, 9);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->l1_miss, 7);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->walks, 7);
	for (const char *p = "ABCE"; *p; p++)
		CHECK(tlbm_present(m, 0, TLBM_L1D,
				   (uint64_t)(*p - 'A' + 1) << 12, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L1D, 4ull << 12, NULL));
}

/* 8 entries, 2-way: 4 sets by vpn % 4; vpns 4, 8, 12 share set 0. */
static void test_set_assoc_eviction(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	static const uint64_t vpn[] = { 4, 8, 12, 4, 12, 5 };

	cfg_none(&c);
	set(&c, "l1d_4k", "8:2");
	m = model(&c, 1);
	/* 4 miss, 8 miss, 12 miss evicts 4, 4 miss evicts 8, 12 hit, 5 miss */
	for (size_t i = 0; i < 6; i++)
		tlbm_access(m, 0, vpn[i] << 12, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->l1_miss, 5);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, 8ull << 12, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L1D, 4ull << 12, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L1D, 5ull << 12, NULL));
}

static struct tlbm *capacity_model(void)
{
	struct tlbm_config c;

	cfg_none(&c);
	set(&c, "l1d_4k", "4:4");
	set(&c, "l1d_2m", "2:2");
	set(&c, "l1d_1g", "1:1");
	return model(&c, 1);
}

static void cycle(struct tlbm *m, const uint64_t *va, int n, int rounds)
{
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n; i++)
			tlbm_access(m, 0, va[i], TLBM_DATA, 1);
}

/*
 * L1: 4 x 4k, 2 x 2M, 1 x 1G entries, fully associative, no STLB.
 * 5 4k pages cycled twice thrash 4 entries: 10 misses. The same 5 offsets
 * inside one 2M mapping: 1 miss. 3 2M pages cycled twice: 6 misses; 2 of
 * them cycled three times: 2. Two 1G pages alternating: every access
 * misses; offsets inside one 1G page: 1 miss.
 */
static void test_capacity_per_size(void)
{
	uint64_t va[5];
	struct tlbm *m = capacity_model();

	for (int i = 0; i < 5; i++)
		va[i] = K + i * 0x1000ull;
	cycle(m, va, 5, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->l1_miss, 10);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->walks, 10);

	m = capacity_model();
	for (int i = 0; i < 5; i++)
		va[i] = K + MB2 + i * 0x1000ull;
	cycle(m, va, 5, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->acc, 10);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->l1_miss, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->acc, 0);

	m = capacity_model();
	for (int i = 0; i < 3; i++)
		va[i] = K + (i + 1) * MB2;
	cycle(m, va, 3, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->l1_miss, 6);
	m = capacity_model();
	cycle(m, va, 2, 3);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->l1_miss, 2);

	m = capacity_model();
	va[0] = K + GB1;
	va[1] = K + 2 * GB1;
	cycle(m, va, 2, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->l1_miss, 4);
	m = capacity_model();
	for (int i = 0; i < 4; i++)
		va[i] = K + GB1 + i * 3 * MB2;
	cycle(m, va, 4, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->l1_miss, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->acc, 4);
}

/* 1-entry L1, 16-entry STLB: A B A -> 3 L1 misses, 2 walks. */
static void test_stlb(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	cfg_none(&c);
	set(&c, "l1d_4k", "1:1");
	set(&c, "l2_4k", "16:4");
	m = model(&c, 1);
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	tlbm_access(m, 0, 0x2000, TLBM_DATA, 1);
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->l1_miss, 3);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->walks, 2);
	/* the iTLB shares the STLB: a fetch from page B walks no more */
	tlbm_access(m, 0, 0x2000, TLBM_INSN, 5);
	CHECK_EQ(cnt(m, 0, TLBM_INSN, TLBM_4K)->acc, 5);
	CHECK_EQ(cnt(m, 0, TLBM_INSN, TLBM_4K)->l1_miss, 1);
	CHECK_EQ(cnt(m, 0, TLBM_INSN, TLBM_4K)->walks, 0);
}

/*
 * No 1G array in the L1: a 1G page is held as 2M pieces there while the
 * STLB keeps the 1G entry. Two 2M pieces of one 1G page: 2 L1 misses,
 * 1 walk, both counted as 1G mappings; the first piece then hits.
 */
static void test_splinter_1g(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	enum tlbm_psize ps;

	cfg_none(&c);
	set(&c, "l1d_2m", "4:4");
	set(&c, "l2_1g", "4:4");
	m = model(&c, 1);
	tlbm_access(m, 0, K + GB1, TLBM_DATA, 1);
	tlbm_access(m, 0, K + GB1 + MB2, TLBM_DATA, 1);
	tlbm_access(m, 0, K + GB1 + 0x1000, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->acc, 3);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->l1_miss, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->walks, 1);
	CHECK(tlbm_present(m, 0, TLBM_L1D, K + GB1, &ps) && ps == TLBM_1G);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, K + GB1 + 2 * MB2, NULL));
}

/*
 * A 2-entry STLB array shared by 4k and 2M (no L1 at all): 4k A, 4k B,
 * 2M C evicts A; A evicts B; B evicts C: 5 walks. With a separate 2M
 * array A and B stay: 3 walks.
 */
static void test_shared_array(void)
{
	static const uint64_t va[] = { K + 0x1000, K + 0x2000, K + MB2,
				       K + 0x1000, K + 0x2000 };
	uint64_t walks = 0;
	struct tlbm_config c;
	struct tlbm *m;

	cfg_none(&c);
	set(&c, "l2_4k", "2:2");
	set(&c, "l2_2m", "4k");
	m = model(&c, 1);
	cycle(m, va, 5, 1);
	for (int s = 0; s < TLBM_NPSIZE; s++)
		walks += cnt(m, K, TLBM_DATA, s)->walks;
	CHECK_EQ(walks, 5);

	set(&c, "l2_2m", "2:2");
	m = model(&c, 1);
	cycle(m, va, 5, 1);
	walks = 0;
	for (int s = 0; s < TLBM_NPSIZE; s++)
		walks += cnt(m, K, TLBM_DATA, s)->walks;
	CHECK_EQ(walks, 3);
}

/*
 * A mov to CR3 keeps global entries (kernel 4k K+1M, G set) and drops the
 * others (kernel 2M at 6M without G, user page); a CR4 PGE toggle (two
 * writes, test_cr4_pair_and_alone) drops all.
 */
static void test_global_survives_cr3(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	uint64_t kg = K + 0x1000, kn = K + 3 * MB2, u = 0x400000;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	tlbm_access(m, 0, kn, TLBM_DATA, 1);
	tlbm_access(m, 0, u, TLBM_DATA, 1);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR3);
	CHECK(tlbm_present(m, 0, TLBM_L1D, kg, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L2, kg, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L1D, kn, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, kn, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L1D, u, NULL));
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	tlbm_access(m, 0, kn, TLBM_DATA, 1);
	tlbm_access(m, 0, u, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->l1_miss, 1);
	CHECK_EQ(cnt(m, kn, TLBM_DATA, TLBM_2M)->walks, 2);
	CHECK_EQ(cnt(m, u, TLBM_DATA, TLBM_4K)->walks, 2);
	CHECK_EQ(m->st.ev[TLBM_EV_CR3], 1);

	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, kg, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, kg, NULL));
	tlbm_flush_insn(m, 0, TLBM_FLUSH_INVPCID);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_INVLPG);
	CHECK_EQ(m->st.ev[TLBM_EV_INVPCID], 1);
	CHECK_EQ(m->st.ev[TLBM_EV_INVLPG], 1);
}

/*
 * The guest splits the 2M mapping PD[1] into a PTE table (page 5) and
 * stores the new PD entry: the 2M translation must disappear from every
 * vCPU and level, later accesses walk to 4k entries, and PD[2]'s 2M
 * translation (same PD page, other slot) must survive.
 */
static void test_split_store(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	enum tlbm_psize ps;
	uint64_t a = K + MB2 + 0x5000;

	tlbm_config_default(&c);
	m = model(&c, 2);
	for (unsigned int cpu = 0; cpu < 2; cpu++) {
		tlbm_access(m, cpu, a, TLBM_DATA, 1);
		tlbm_access(m, cpu, K + 2 * MB2, TLBM_DATA, 1);
	}
	CHECK(tlbm_present(m, 1, TLBM_L1D, a, &ps) && ps == TLBM_2M);

	for (int i = 0; i < 512; i++)
		pte(5, i, (MB2 + i * 0x1000ull) | P | G);
	tlbm_store(m, 0x5000, 8);		/* not a watched page */
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 0);
	pte(3, 1, 0x5000 | P);
	tlbm_store(m, 0x3000 + 8 * 1, 8);	/* the PD[1] store */
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 1);
	CHECK_EQ(m->st.ev[TLBM_EV_PT_INVAL], 1);
	for (unsigned int cpu = 0; cpu < 2; cpu++) {
		CHECK(!tlbm_present(m, cpu, TLBM_L1D, a, NULL));
		CHECK(!tlbm_present(m, cpu, TLBM_L2, a, NULL));
		CHECK(tlbm_present(m, cpu, TLBM_L1D, K + 2 * MB2, NULL));
	}
	tlbm_access(m, 0, a, TLBM_DATA, 1);
	tlbm_access(m, 0, a + 0x1000, TLBM_DATA, 1);
	tlbm_access(m, 0, a, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, a, TLBM_DATA, TLBM_4K)->walks, 2);
	CHECK_EQ(cnt(m, a, TLBM_DATA, TLBM_4K)->acc, 3);
	CHECK(tlbm_present(m, 0, TLBM_L1D, a, &ps) && ps == TLBM_4K);

	/* a slot nothing was derived from: counted, nothing dropped */
	tlbm_store(m, 0x3000 + 8 * 7, 8);
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 2);
	CHECK_EQ(m->st.ev[TLBM_EV_PT_INVAL], 1);
	/* a PTE change in the new table drops just that 4k page */
	tlbm_store(m, 0x5000 + 8 * 5, 8);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, a, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L1D, a + 0x1000, NULL));
	/* the PD page is still watched for PD[2], derived before the split */
	tlbm_store(m, 0x3000 + 8 * 2, 8);
	CHECK(!tlbm_present(m, 1, TLBM_L1D, K + 2 * MB2, NULL));
	/* rewriting PD[1] drops all 512 4k pages under it, the last too */
	tlbm_access(m, 0, K + 2 * MB2 - 0x1000, TLBM_DATA, 1);
	CHECK(tlbm_present(m, 0, TLBM_L1D, K + 2 * MB2 - 0x1000, NULL));
	tlbm_store(m, 0x3000 + 8 * 1, 8);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, a + 0x1000, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L1D, K + 2 * MB2 - 0x1000, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, K + 2 * MB2 - 0x1000, NULL));
}

/* invlpg drops one page at every level, global or not */
static void test_invlpg(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	tlbm_access(m, 0, 0x2000, TLBM_DATA, 1);
	tlbm_access(m, 0, K + 0x1000, TLBM_DATA, 1);
	tlbm_invlpg(m, 0, 0x1abc);
	tlbm_invlpg(m, 0, K + 0x1000);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, 0x1000, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, 0x1000, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L1D, 0x2000, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L1D, K + 0x1000, NULL));
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	tlbm_access(m, 0, 0x2000, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, 0, TLBM_DATA, TLBM_4K)->walks, 3);
}

/* Unmapped kernel addresses and a missing root are counted, not hidden. */
static void test_walk_faults_counted(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_access(m, 0, K + 4 * MB2, TLBM_DATA, 1);
	CHECK_EQ(m->st.ev[TLBM_EV_WALK_FAULT], 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->walks, 1);
	m->kroot = 1ull << 40;
	tlbm_access(m, 0, K + 0x7000, TLBM_DATA, 1);
	CHECK_EQ(m->st.ev[TLBM_EV_WALK_ERROR], 1);
	tlbm_insns(m, 0, K, 7);
	tlbm_insns(m, 0, 0x400000, 3);
	CHECK_EQ(m->st.insns[TLBM_KERNEL], 7);
	CHECK_EQ(m->st.insns[TLBM_USER], 3);
}

/*
 * D1: Golden Cove's STLB (CPUID leaf 0x18 sub-leaves 7 and 8) is two
 * 1024-entry 8-way arrays, {4k, 2M} and {4k, 1G}: 128 sets each. 1536 2M
 * pages (PDPT[3..5] -> PD pages 7..9, 512 2M leaves each) cycled twice put
 * 12 pages in each set of the 2M array's 8 ways, so LRU misses every time:
 * 3072 walks. The legacy geometry (2048 x 16-way shared by 4k and 2M) holds
 * all of them after the first round: 1536. 4k pages may use both arrays,
 * 16 ways per set index: 2048 user pages cycled twice walk 2048 times,
 * 2304 (18 per set) walk on every access, 4608.
 */
static void map_1536_2m(void)
{
	for (int p = 0; p < 3; p++) {
		pte(2, 3 + p, (uint64_t)(7 + p) << 12 | P);
		for (int i = 0; i < 512; i++)
			pte(7 + p, i, (uint64_t)(p * 512 + i) * MB2 | P | PS | G);
	}
}

static uint64_t walks_all(struct tlbm *m, uint64_t va, enum tlbm_psize s)
{
	return cnt(m, va, TLBM_DATA, s)->walks;
}

static void test_stlb_golden_cove(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	map_1536_2m();
	for (int r = 0; r < 2; r++)
		for (uint64_t i = 0; i < 1536; i++)
			tlbm_access(m, 0, K + 3 * GB1 + i * MB2, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->acc, 3072);
	CHECK_EQ(walks_all(m, K, TLBM_2M), 3072);

	tlbm_config_core(&c, "legacy");
	m = model(&c, 1);
	map_1536_2m();
	for (int r = 0; r < 2; r++)
		for (uint64_t i = 0; i < 1536; i++)
			tlbm_access(m, 0, K + 3 * GB1 + i * MB2, TLBM_DATA, 1);
	CHECK_EQ(walks_all(m, K, TLBM_2M), 1536);

	for (uint64_t n = 2048; n <= 2304; n += 256) {
		tlbm_config_default(&c);
		m = model(&c, 1);
		for (int r = 0; r < 2; r++)
			for (uint64_t i = 1; i <= n; i++)
				tlbm_access(m, 0, i << 12, TLBM_DATA, 1);
		CHECK_EQ(walks_all(m, 0, TLBM_4K), n == 2048 ? 2048 : 4608);
	}
}

/*
 * D3: the walk of an unmapped kernel address (PD[4] not present) is not
 * cached: a second access walks again. Two walks, two walk faults, nothing
 * left in the L1 or the STLB.
 */
static void test_not_present_not_cached(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_access(m, 0, K + 4 * MB2, TLBM_DATA, 1);
	tlbm_access(m, 0, K + 4 * MB2 + 8, TLBM_DATA, 1);
	CHECK_EQ(m->st.ev[TLBM_EV_WALK_FAULT], 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->walks, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->l1_miss, 2);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, K + 4 * MB2, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, K + 4 * MB2, NULL));
	/* the guest maps it: the next access walks to the new entry */
	pte(3, 4, 4 * MB2 | P | PS | G);
	tlbm_store(m, 0x3000 + 8 * 4, 8);
	tlbm_access(m, 0, K + 4 * MB2, TLBM_DATA, 1);
	tlbm_access(m, 0, K + 4 * MB2 + 8, TLBM_DATA, 1);
	CHECK_EQ(walks_all(m, K, TLBM_2M), 1);
	CHECK_EQ(m->st.ev[TLBM_EV_WALK_FAULT], 2);
}

/*
 * D4: the kernel unlinks the PTE table of PD[0] (page 4) and frees it.
 * Its watch entry must go with the PD store: reused as data, a store to it
 * is no page-table store; reused as the PTE table of PD[1] (a split at
 * another base), it is a fresh table, not one reached two ways, and a store
 * to one of its entries drops one page, not everything on every vCPU.
 */
static void test_freed_table_unwatched(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	uint64_t a = K + MB2 + 0x5000, g2 = K + 2 * MB2;

	tlbm_config_default(&c);
	m = model(&c, 2);
	tlbm_access(m, 0, K + 0x101000, TLBM_DATA, 1);	/* through PT page 4 */
	tlbm_access(m, 1, g2, TLBM_DATA, 1);		/* cpu 1: global 2M */
	CHECK(tlbm_watch_find(&m->watch, 4) != NULL);
	pte(3, 0, 0);					/* unlink */
	tlbm_store(m, 0x3000, 8);
	CHECK(tlbm_watch_find(&m->watch, 4) == NULL);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, K + 0x101000, NULL));
	tlbm_store(m, 0x4000 + 8 * 0x101, 8);		/* page 4 as data */
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 1);	/* the PD store only */

	for (int i = 0; i < 512; i++)			/* page 4 reused */
		pte(4, i, (MB2 + i * 0x1000ull) | P | G);
	pte(3, 1, 0x4000 | P);
	tlbm_store(m, 0x3000 + 8 * 1, 8);
	tlbm_access(m, 0, a, TLBM_DATA, 1);
	tlbm_access(m, 0, a + 0x1000, TLBM_DATA, 1);
	CHECK(!tlbm_watch_find(&m->watch, 4)->alias);
	tlbm_store(m, 0x4000 + 8 * 5, 8);		/* one PTE of it */
	CHECK_EQ(m->st.ev[TLBM_EV_ALIAS_FLUSH], 0);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, a, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L1D, a + 0x1000, NULL));
	CHECK(tlbm_present(m, 1, TLBM_L1D, g2, NULL));

	/* unlinking a PD (PDPT[0]) drops the PD and the tables below it */
	CHECK(tlbm_watch_find(&m->watch, 3) && tlbm_watch_find(&m->watch, 4));
	tlbm_store(m, 0x2000, 8);
	CHECK(!tlbm_watch_find(&m->watch, 3) && !tlbm_watch_find(&m->watch, 4));
	CHECK(tlbm_watch_find(&m->watch, 1) != NULL);	/* the PML4 stays */
}

/*
 * D5: a lone CR4 write (Linux toggling TSD or PCE) leaves the TLB alone; a
 * PGE toggle (two writes within TLBM_CR4_PAIR_INSNS instructions) drops
 * every entry at each write. The accesses between the two writes meet the
 * TLB the first write flushed: kg misses there again (3 L1 misses in all),
 * and a page-table store between them (queued) is applied in order.
 */
static void test_cr4_pair_and_alone(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	uint64_t kg = K + 0x101000, kn = K + 3 * MB2;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	tlbm_access(m, 0, kn, TLBM_DATA, 1);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);			/* alone */
	tlbm_insns(m, 0, K, TLBM_CR4_PAIR_INSNS + 1);
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	CHECK(tlbm_present(m, 0, TLBM_L1D, kg, NULL));
	CHECK(tlbm_present(m, 0, TLBM_L2, kn, NULL));
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->l1_miss, 1);
	CHECK_EQ(m->st.ev[TLBM_EV_CR4], 1);
	CHECK_EQ(m->st.ev[TLBM_EV_CR4_GLOBAL], 0);

	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);			/* a pair */
	tlbm_insns(m, 0, K, 10);
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	tlbm_store(m, 0x3000 + 8 * 3, 8);		/* drops nothing cached */
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 0);	/* still queued */
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);
	CHECK(!tlbm_present(m, 0, TLBM_L1D, kg, NULL));
	CHECK(!tlbm_present(m, 0, TLBM_L2, kn, NULL));
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->l1_miss, 2);
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->walks, 2);
	CHECK_EQ(m->st.ev[TLBM_EV_PT_STORE], 1);
	CHECK_EQ(m->st.ev[TLBM_EV_CR4], 3);
	CHECK_EQ(m->st.ev[TLBM_EV_CR4_GLOBAL], 2);
	tlbm_insns(m, 0, K, 2);
	CHECK_EQ(m->st.insns[TLBM_KERNEL], TLBM_CR4_PAIR_INSNS + 13);

	/* a write still held when counts are read is taken as alone */
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR4);
	tlbm_access(m, 0, kg, TLBM_DATA, 1);
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->acc, 4);
	tlbm_settle(m);
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->acc, 5);
	CHECK_EQ(cnt(m, kg, TLBM_DATA, TLBM_4K)->l1_miss, 3);
	CHECK_EQ(m->st.ev[TLBM_EV_CR4], 4);
	CHECK(tlbm_present(m, 0, TLBM_L1D, kg, NULL));
}

/*
 * D8, the root check: through the kernel's root the direct map translates
 * K to physical 0 and K + root to the root page. The fake table's direct
 * map is not the identity, so make PT[0] and PT[1] so first; then a wrong
 * root (the PDPT page, whose slot 273 is empty), root=none, a root outside
 * memory and a direct map that points elsewhere each fail with a reason.
 * The check reads only: no count, no watched page.
 */
static void test_check_root(void)
{
	struct tlbm_config c;
	struct tlbm *m;
	char why[192];

	tlbm_config_default(&c);
	m = model(&c, 1);
	pte(4, 0, 0 | P | G);
	pte(4, 1, 0x1000 | P | G);
	CHECK_EQ(tlbm_check_root(m, K, why, sizeof(why)), 0);
	CHECK_EQ(why[0], 0);
	CHECK_EQ(m->watch.n, 0);
	CHECK_EQ(m->st.ev[TLBM_EV_WALK_FAULT], 0);

	m->kroot = 0x2000;
	CHECK(tlbm_check_root(m, K, why, sizeof(why)) &&
	      strstr(why, "root=0x2000 does not map 0xffff888000000000"));
	m->kroot = 1ull << 40;
	CHECK(tlbm_check_root(m, K, why, sizeof(why)) &&
	      strstr(why, "unreadable"));
	m->kroot = 0x1000;
	pte(4, 1, 0x7000 | P | G);
	CHECK(tlbm_check_root(m, K, why, sizeof(why)) &&
	      strstr(why, "maps 0xffff888000001000 to 0x7000, not 0x1000"));
	m->have_root = false;
	CHECK(tlbm_check_root(m, K, why, sizeof(why)) &&
	      strstr(why, "root=none"));
}

/*
 * The shortcuts (the last L1 entry per vCPU and kind, the last unwatched
 * page stored to) change no count: 40000 random events, the same for a
 * model with them and one without (no_shortcuts), on two vCPUs, with
 * page-table changes, splits and their stores, every flush kind, CR4 pairs
 * and lone writes, and unmapped pages; in a small geometry that evicts all
 * the time and in the default one. The statistics must be equal bytewise.
 */
static uint64_t rnd(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return *x >> 33;
}

static void test_shortcuts_change_nothing(void)
{
	static const uint64_t pool[] = {
		K + 0x100000, K + 0x101000, K + 0x102000, K + 0x103000,
		K + 0x104000, K + 0x105000, K + 0x1ff000, K + MB2,
		K + MB2 + 0x5000, K + 2 * MB2, K + 3 * MB2, K + 4 * MB2,
		K + GB1, K + GB1 + 3 * MB2, K + 2 * GB1, 0x1000, 0x2000,
		0x3000, 0x4000, 0x5000, 0x400000, 0x401000,
	};
	for (int geo = 0; geo < 2; geo++) {
		struct tlbm_config c;
		struct tlbm a, b;
		uint64_t x = 42 + geo;

		tlbm_config_default(&c);
		if (geo == 0) {
			set(&c, "l1d", "4:2:4k:2:2:2m:1:1:1g");
			set(&c, "l1i", "2:2:4k:2:1:2m");
			set(&c, "l2", "8:2:4k2m:4:2:4k1g");
		}
		build_tables();
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		if (tlbm_init(&a, &c, 2, 4, true, 0x1000, rd, NULL) ||
		    tlbm_init(&b, &c, 2, 4, true, 0x1000, rd, NULL))
			check(0, "tlbm_init", __LINE__);
		tlbm_set_direct_map(&a, K, GB1);
		tlbm_set_direct_map(&b, K, GB1);
		b.no_shortcuts = true;
		for (int i = 0; i < 40000; i++) {
			unsigned int cpu = rnd(&x) % 2, op = rnd(&x) % 100;
			uint64_t va = pool[rnd(&x) % (sizeof(pool) / 8)] +
				      (rnd(&x) % 4) * 8;
			uint64_t pa = (rnd(&x) % 8) * 0x1000 + (rnd(&x) % 512) * 8;
			enum tlbm_flush f = (enum tlbm_flush)(1 + rnd(&x) % 4);

			if (op == 0) {		/* split PD[1] into page 5 */
				for (int k = 0; k < 512; k++)
					pte(5, k, (MB2 + k * 0x1000ull) | P | G);
				pte(3, 1, 0x5000 | P);
				pa = 0x3008;
			} else if (op == 1) {	/* and back to 2M */
				pte(3, 1, MB2 | P | PS | G);
				pa = 0x3008;
			} else if (op == 2) {	/* map / unmap PD[4] */
				mem[3 * 512 + 4] ^= 4 * MB2 | P | PS;
				pa = 0x3020;
			}
			if (op < 50) {
				tlbm_access(&a, cpu, va, TLBM_DATA, 1 + op % 3);
				tlbm_access(&b, cpu, va, TLBM_DATA, 1 + op % 3);
			} else if (op < 70) {
				tlbm_insns(&a, cpu, va, 1 + op % 5);
				tlbm_insns(&b, cpu, va, 1 + op % 5);
				tlbm_access(&a, cpu, va, TLBM_INSN, 1 + op % 5);
				tlbm_access(&b, cpu, va, TLBM_INSN, 1 + op % 5);
			}
			if (op < 3 || (op >= 70 && op < 95)) {
				tlbm_store(&a, pa, 8);
				tlbm_store(&b, pa, 8);
			} else if (op >= 95) {
				tlbm_flush_insn(&a, cpu, f);
				tlbm_flush_insn(&b, cpu, f);
			}
		}
		tlbm_settle(&a);
		tlbm_settle(&b);
		CHECK(a.st.c[TLBM_KERNEL][TLBM_DATA][TLBM_4K].walks > 100);
		CHECK(a.st.ev[TLBM_EV_CR4_GLOBAL] > 10);
		CHECK(a.st.ev[TLBM_EV_PT_INVAL] > 10);
		CHECK(!memcmp(&a.st, &b.st, sizeof(a.st)));
		tlbm_fini(&a);
		tlbm_fini(&b);
	}
}

static void test_decode(void)
{
	static const struct {
		uint8_t b[8];
		size_t n;
		enum tlbm_flush f;
	} t[] = {
		{ { 0x0f, 0x22, 0xd8 }, 3, TLBM_FLUSH_CR3 },	/* rax */
		{ { 0x41, 0x0f, 0x22, 0xdc }, 4, TLBM_FLUSH_CR3 }, /* r12 */
		{ { 0x0f, 0x22, 0xe0 }, 3, TLBM_FLUSH_CR4 },
		{ { 0x0f, 0x22, 0xc0 }, 3, TLBM_FLUSH_NONE },	/* cr0 */
		{ { 0x44, 0x0f, 0x22, 0xc0 }, 4, TLBM_FLUSH_NONE }, /* cr8 */
		{ { 0x0f, 0x20, 0xd8 }, 3, TLBM_FLUSH_NONE },	/* read */
		{ { 0x0f, 0x01, 0x38 }, 3, TLBM_FLUSH_INVLPG },	/* [rax] */
		{ { 0x0f, 0x01, 0x7d, 0x08 }, 4, TLBM_FLUSH_INVLPG },
		{ { 0x0f, 0x01, 0xf8 }, 3, TLBM_FLUSH_NONE },	/* swapgs */
		{ { 0x0f, 0x01, 0xf9 }, 3, TLBM_FLUSH_NONE },	/* rdtscp */
		{ { 0x66, 0x0f, 0x38, 0x82, 0x08 }, 5, TLBM_FLUSH_INVPCID },
		{ { 0x0f, 0x38, 0x82, 0x08 }, 4, TLBM_FLUSH_NONE },
		{ { 0x0f, 0x22 }, 2, TLBM_FLUSH_NONE },		/* truncated */
		{ { 0x48, 0x89, 0xd8 }, 3, TLBM_FLUSH_NONE },	/* mov */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (tlbm_decode_flush(t[i].b, t[i].n) != t[i].f)
			CHECK_EQ(i, 1000);	/* reports the failing row */
}

/* The array of level lv that holds exactly the sizes in mask, or NULL. */
static const struct tlbm_array_cfg *arr(const struct tlbm_config *c, int lv,
					unsigned int mask)
{
	for (int i = 0; i < c->lv[lv].narr; i++)
		if (c->lv[lv].a[i].sizes == mask)
			return &c->lv[lv].a[i];
	return NULL;
}

#define M4K (1u << TLBM_4K)
#define M2M (1u << TLBM_2M)
#define M1G (1u << TLBM_1G)

static void test_config(void)
{
	struct tlbm_config c, d;
	char err[128];

	tlbm_config_default(&c);
	CHECK(!tlbm_config_check(&c, err, sizeof(err)));
	CHECK(!c.custom && !strcmp(c.core, "goldencove"));
	CHECK_EQ(c.lv[TLBM_L2].narr, 2);
	CHECK(arr(&c, TLBM_L2, M4K | M2M) && arr(&c, TLBM_L2, M4K | M1G));
	/* one size: its own array */
	CHECK(!tlbm_config_set(&c, "l1d_4k", "96:6"));
	CHECK(arr(&c, TLBM_L1D, M4K) && arr(&c, TLBM_L1D, M4K)->entries == 96 &&
	      arr(&c, TLBM_L1D, M4K)->ways == 6);
	CHECK(c.custom);
	/* a size out of both STLB arrays: they keep the others */
	CHECK(!tlbm_config_set(&c, "l2_4k", "0"));
	CHECK(arr(&c, TLBM_L2, M2M) && arr(&c, TLBM_L2, M1G));
	/* a size into the arrays of another (share) */
	CHECK(!tlbm_config_set(&c, "l2_4k", "2m"));
	CHECK(arr(&c, TLBM_L2, M4K | M2M) && arr(&c, TLBM_L2, M1G));
	CHECK(tlbm_config_set(&c, "l2_4k", "4k"));
	CHECK(tlbm_config_set(&c, "l1i_2m", "1g"));	/* no 1g array there */
	CHECK(tlbm_config_set(&c, "l3_4k", "1:1"));
	CHECK(tlbm_config_set(&c, "l1d_8k", "1:1"));
	CHECK(tlbm_config_set(&c, "l1d_4k", "64"));
	CHECK(tlbm_config_set(&c, "l1d_4k", "64:x"));
	CHECK(tlbm_config_set(&c, "l1d_4k", ""));
	CHECK(!tlbm_config_check(&c, err, sizeof(err)));
	CHECK(!tlbm_config_set(&c, "l1d_4k", "65:4"));
	CHECK(tlbm_config_check(&c, err, sizeof(err)));
	CHECK(strstr(err, "l1d 4k array: entries (65)") != NULL);

	/* a whole level: the legacy STLB, written out */
	tlbm_config_default(&c);
	CHECK(!tlbm_config_set(&c, "l2", "2048:16:4k2m:1024:8:1g"));
	CHECK(!tlbm_config_set(&c, "l1d_4k", "96:6"));
	CHECK(!tlbm_config_core(&d, "legacy"));
	CHECK(!memcmp(c.lv, d.lv, sizeof(c.lv)));
	CHECK(!tlbm_config_set(&c, "l2", "1024:8:4k2m:1024:8:4k1g"));
	tlbm_config_default(&d);
	CHECK(!memcmp(c.lv[TLBM_L2].a, d.lv[TLBM_L2].a,
		      sizeof(c.lv[TLBM_L2].a)));
	CHECK(!tlbm_config_set(&c, "l2", "0"));
	CHECK_EQ(c.lv[TLBM_L2].narr, 0);
	CHECK(tlbm_config_set(&c, "l2", "1024:8"));
	CHECK(tlbm_config_set(&c, "l2", "1024:8:4k4k"));
	CHECK(tlbm_config_set(&c, "l2", "1024:8:8k"));
	CHECK(tlbm_config_set(&c, "l2", "1024:8:4k:"));
	CHECK(tlbm_config_set(&c, "l2", "1:1:4k:1:1:4k:1:1:4k:1:1:4k:1:1:4k"));
	CHECK(tlbm_config_core(&c, "skylake"));

	tlbm_config_default(&c);
	printf("json config ");
	tlbm_config_json(&c, stdout);
	printf("\n");
	tlbm_config_core(&c, "legacy");
	printf("json config_legacy ");
	tlbm_config_json(&c, stdout);
	printf("\n");
}

/* 20000 pseudo-random adds and deletes checked against a plain bitmap */
static void test_watch_table(void)
{
	static unsigned char ref[4096];
	struct tlbm_watch w = { 0 };
	uint64_t x = 12345;
	size_t n = 0;

	for (int i = 0; i < 20000; i++) {
		uint64_t pfn;
		struct tlbm_watch_ent *e;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		pfn = (x >> 33) % 4096;
		e = tlbm_watch_find(&w, pfn);
		CHECK_EQ(!!e, ref[pfn]);
		if (e) {
			tlbm_watch_del(&w, e);
			ref[pfn] = 0;
			n--;
		} else {
			tlbm_watch_add(&w, pfn, 1, pfn << 21, pfn % 512);
			ref[pfn] = 1;
			n++;
		}
	}
	CHECK_EQ(w.n, n);
	for (uint64_t pfn = 0; pfn < 4096; pfn++) {
		struct tlbm_watch_ent *e = tlbm_watch_find(&w, pfn);

		CHECK_EQ(!!e, ref[pfn]);
		if (e)
			CHECK_EQ(e->base, pfn << 21);
	}
	free(w.t);
}

/* The same page-table page reached as a PD and as a PT: marked alias. */
static void test_watch_alias(void)
{
	struct tlbm_watch w = { 0 };
	struct tlbm_watch_ent *e;

	tlbm_watch_add(&w, 7, 2, K, 1);
	tlbm_watch_add(&w, 7, 2, K, 2);
	e = tlbm_watch_find(&w, 7);
	CHECK(e && !e->alias && e->bits[0] == 6);
	tlbm_watch_add(&w, 7, 1, K + MB2, 3);
	CHECK(e->alias);
	free(w.t);
}

/*
 * The direct-map subset: with the region set to the 1G at K, the 2M page
 * K+2M and the 4k page K+1M+4k are in it; K+1G (the next PDPT slot) and a
 * user page are not. Fetches from the direct map are not data: not counted.
 * Three data accesses in the region, two of them to the same 2M page:
 * 2M acc 2 (1 miss, 1 walk), 4k acc 1 (1 miss, 1 walk).
 */
static void test_direct_map_apart(void)
{
	struct tlbm_config c;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_set_direct_map(m, K, GB1);
	tlbm_access(m, 0, K + MB2, TLBM_DATA, 1);
	tlbm_access(m, 0, K + MB2 + 0x1000, TLBM_DATA, 1);
	tlbm_access(m, 0, K + 0x101000, TLBM_DATA, 1);
	tlbm_access(m, 0, K + GB1, TLBM_DATA, 1);
	tlbm_access(m, 0, K + 0x102000, TLBM_INSN, 4);
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	CHECK_EQ(m->st.dmap[TLBM_2M].acc, 2);
	CHECK_EQ(m->st.dmap[TLBM_2M].l1_miss, 1);
	CHECK_EQ(m->st.dmap[TLBM_2M].walks, 1);
	CHECK_EQ(m->st.dmap[TLBM_4K].acc, 1);
	CHECK_EQ(m->st.dmap[TLBM_4K].l1_miss, 1);
	CHECK_EQ(m->st.dmap[TLBM_4K].walks, 1);
	CHECK_EQ(m->st.dmap[TLBM_1G].acc, 0);
	/* ... and every one of them is in the kernel dTLB counts as well */
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_2M)->acc, 2);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_1G)->acc, 1);
	CHECK_EQ(cnt(m, K, TLBM_DATA, TLBM_4K)->acc, 1);
	/* no region set: nothing counted apart */
	m = model(&c, 1);
	tlbm_access(m, 0, K + MB2, TLBM_DATA, 1);
	CHECK_EQ(m->st.dmap[TLBM_2M].acc, 0);
}

static void test_stats_json(void)
{
	struct tlbm_config c;
	struct tlbm_stats d;
	struct tlbm *m;

	tlbm_config_default(&c);
	m = model(&c, 1);
	tlbm_set_direct_map(m, K, GB1);
	tlbm_access(m, 0, K + MB2, TLBM_DATA, 3);
	tlbm_access(m, 0, K + 0x1000, TLBM_INSN, 2);
	tlbm_insns(m, 0, K, 2);
	tlbm_access(m, 0, 0x1000, TLBM_DATA, 1);
	tlbm_flush_insn(m, 0, TLBM_FLUSH_CR3);
	tlbm_stats_sub(&d, &m->st, &(struct tlbm_stats){ 0 });
	CHECK(!memcmp(&d, &m->st, sizeof(d)));
	printf("json stats ");
	tlbm_stats_json(&m->st, stdout);
	printf("\n");
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "walk_4k_2m_1g", test_walk_4k_2m_1g },
	{ "walk_absent_and_errors", test_walk_absent_and_errors },
	{ "walk_5level", test_walk_5level },
	{ "lru_order", test_lru_order },
	{ "set_assoc_eviction", test_set_assoc_eviction },
	{ "capacity_per_size", test_capacity_per_size },
	{ "stlb", test_stlb },
	{ "splinter_1g", test_splinter_1g },
	{ "shared_array", test_shared_array },
	{ "global_survives_cr3", test_global_survives_cr3 },
	{ "split_store", test_split_store },
	{ "invlpg", test_invlpg },
	{ "walk_faults_counted", test_walk_faults_counted },
	{ "stlb_golden_cove", test_stlb_golden_cove },
	{ "not_present_not_cached", test_not_present_not_cached },
	{ "freed_table_unwatched", test_freed_table_unwatched },
	{ "cr4_pair_and_alone", test_cr4_pair_and_alone },
	{ "check_root", test_check_root },
	{ "shortcuts_change_nothing", test_shortcuts_change_nothing },
	{ "decode", test_decode },
	{ "config", test_config },
	{ "watch_table", test_watch_table },
	{ "watch_alias", test_watch_alias },
	{ "direct_map_apart", test_direct_map_apart },
	{ "stats_json", test_stats_json },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		cur = tests[i].name;
		checks_failed = 0;
		tests[i].fn();
		if (checks_failed)
			failed++;
		else
			printf("ok %s\n", cur);
	}
	printf("%zu tests, %d failed\n", sizeof(tests) / sizeof(tests[0]),
	       failed);
	return failed ? 1 : 0;
}
