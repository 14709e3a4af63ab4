// SPDX-License-Identifier: GPL-2.0
/*
 * The TLB hierarchy of every vCPU, lookups, fills, flushes and coherence.
 *
 * An access looks up its L1 (dTLB for data, iTLB for fetches); on a miss
 * the STLB; on a miss there a walk fills the STLB and then the L1, as on
 * Intel cores. Replacement is true LRU per set: every hit or fill stamps
 * the entry with a per-TLB clock and the victim is an invalid way or the
 * smallest stamp.
 */
#include <stdlib.h>
#include <string.h>

#include "tlbmodel.h"

static const int psize_shift[TLBM_NPSIZE] = { 12, 21, 30 };

const char *const tlbm_event_name[TLBM_NEV] = {
	"cr3_writes", "cr4_writes", "cr4_global_flushes", "invlpg", "invpcid",
	"pt_stores", "pt_invalidations", "pt_alias_flushes", "walk_faults",
	"walk_read_errors",
};

/* Flush kinds of queued CR4 writes, beside enum tlbm_flush */
enum { CR4_HELD = 16, CR4_PAIR, CR4_ALONE };

static int tlb_init(struct tlbm_tlb *t, const struct tlbm_level_cfg *cfg)
{
	memset(t, 0, sizeof(*t));
	t->narr = cfg->narr;
	for (int i = 0; i < cfg->narr; i++) {
		struct tlbm_array *a = &t->arr[i];

		a->ways = cfg->a[i].ways;
		a->sets = cfg->a[i].entries / cfg->a[i].ways;
		a->sizes = cfg->a[i].sizes;
		a->e = calloc(cfg->a[i].entries, sizeof(*a->e));
		if (!a->e)
			return -1;
		for (int s = 0; s < TLBM_NPSIZE; s++)
			if (a->sizes & (1u << s))
				t->home[s][t->nhome[s]++] = (uint8_t)i;
	}
	return 0;
}

static void tlb_fini(struct tlbm_tlb *t)
{
	for (int i = 0; i < t->narr; i++)
		free(t->arr[i].e);
}

static struct tlbm_entry *set_of(struct tlbm_array *a, uint64_t vpn)
{
	return a->e + (size_t)(vpn % a->sets) * a->ways;
}

static struct tlbm_entry *probe(struct tlbm_array *a, int s, uint64_t vpn)
{
	struct tlbm_entry *e = set_of(a, vpn);

	for (uint32_t w = 0; w < a->ways; w++)
		if (e[w].valid && e[w].esize == s && e[w].vpn == vpn)
			return &e[w];
	return NULL;
}

/* The entry that translates va at this level, whatever its size; LRU untouched. */
static struct tlbm_entry *tlb_find(struct tlbm_tlb *t, uint64_t va)
{
	for (int s = 0; s < TLBM_NPSIZE; s++)
		for (int h = 0; h < t->nhome[s]; h++) {
			struct tlbm_entry *e = probe(&t->arr[t->home[s][h]], s,
						     va >> psize_shift[s]);

			if (e)
				return e;
		}
	return NULL;
}

static struct tlbm_entry *tlb_lookup(struct tlbm_tlb *t, uint64_t va)
{
	struct tlbm_entry *e = tlb_find(t, va);

	if (e)
		e->stamp = ++t->clock;
	return e;
}

/*
 * Where an entry of size s goes: an invalid way of one of the sets it may
 * use (in array order), else the least recently used of them all. With
 * one array per size that is plain per-set LRU; for Golden Cove's 4k STLB
 * entries it is LRU over the 16 ways of the two arrays' sets.
 */
static struct tlbm_entry *victim(struct tlbm_tlb *t, int s, uint64_t vpn)
{
	struct tlbm_entry *v = NULL;

	for (int h = 0; h < t->nhome[s]; h++) {
		struct tlbm_array *a = &t->arr[t->home[s][h]];
		struct tlbm_entry *e = set_of(a, vpn);

		for (uint32_t w = 0; w < a->ways; w++) {
			if (!e[w].valid)
				return &e[w];
			if (!v || e[w].stamp < v->stamp)
				v = &e[w];
		}
	}
	return v;
}

/* A size the level does not cache is splintered into a smaller entry. */
static struct tlbm_entry *tlb_fill(struct tlbm_tlb *t, uint64_t va, int psize,
				   bool global)
{
	int s = psize;
	struct tlbm_entry *e;
	uint64_t vpn;

	while (s >= 0 && !t->nhome[s])
		s--;
	if (s < 0)
		return NULL;
	vpn = va >> psize_shift[s];
	e = victim(t, s, vpn);
	*e = (struct tlbm_entry){ .vpn = vpn, .stamp = ++t->clock, .valid = 1,
				  .global = global, .esize = (uint8_t)s,
				  .psize = (uint8_t)psize };
	return e;
}

static void tlb_flush(struct tlbm_tlb *t, bool keep_global)
{
	for (int i = 0; i < t->narr; i++) {
		struct tlbm_array *a = &t->arr[i];

		for (size_t k = 0; k < (size_t)a->sets * a->ways; k++)
			if (!(keep_global && a->e[k].global))
				a->e[k].valid = 0;
	}
}

static void inval_vpns(struct tlbm_array *a, int s, uint64_t v0, uint64_t v1)
{
	if (v1 - v0 < a->sets) {	/* few pages: probe their sets */
		for (uint64_t v = v0;; v++) {
			struct tlbm_entry *e = probe(a, s, v);

			if (e)
				e->valid = 0;
			if (v == v1)
				break;
		}
		return;
	}
	for (size_t k = 0; k < (size_t)a->sets * a->ways; k++) {
		struct tlbm_entry *e = &a->e[k];

		if (e->valid && e->esize == s && e->vpn >= v0 && e->vpn <= v1)
			e->valid = 0;
	}
}

/* Drop every entry overlapping [first, last], global or not. */
static void tlb_inval(struct tlbm_tlb *t, uint64_t first, uint64_t last)
{
	for (int s = 0; s < TLBM_NPSIZE; s++)
		for (int h = 0; h < t->nhome[s]; h++)
			inval_vpns(&t->arr[t->home[s][h]], s,
				   first >> psize_shift[s],
				   last >> psize_shift[s]);
}

static void mru_sync(struct tlbm_tlb *t, struct tlbm_mru *u);

int tlbm_init(struct tlbm *m, const struct tlbm_config *cfg,
	      unsigned int ncpu, int levels, bool have_root, uint64_t kroot,
	      tlbm_read_fn rd, void *ctx)
{
	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	m->levels = levels;
	m->have_root = have_root;
	m->kroot = kroot;
	m->read = rd;
	m->read_ctx = ctx;
	m->nowatch_pfn = UINT64_MAX;	/* no page stored to yet */
	m->cpu = calloc(ncpu, sizeof(*m->cpu));
	if (!m->cpu)
		return -1;
	m->ncpu = ncpu;
	for (unsigned int c = 0; c < ncpu; c++)
		for (int lv = 0; lv < TLBM_NLEVEL; lv++)
			if (tlb_init(&m->cpu[c].tlb[lv], &cfg->lv[lv]))
				return -1;
	return 0;
}

/*
 * Count the data accesses to [base, base + size) once more, apart: the
 * direct map (the plugin passes page_offset and the region's size).
 */
void tlbm_set_direct_map(struct tlbm *m, uint64_t base, uint64_t size)
{
	m->dmap_base = base;
	m->dmap_size = size;
	for (unsigned int c = 0; c < m->ncpu; c++)	/* their dmap is stale */
		for (int k = 0; k < TLBM_NKIND; k++) {
			mru_sync(&m->cpu[c].tlb[k == TLBM_DATA ? TLBM_L1D :
						TLBM_L1I], &m->cpu[c].mru[k]);
			m->cpu[c].mru[k].n = 0;
		}
}

void tlbm_fini(struct tlbm *m)
{
	for (unsigned int c = 0; c < m->ncpu; c++)
		for (int lv = 0; lv < TLBM_NLEVEL; lv++)
			tlb_fini(&m->cpu[c].tlb[lv]);
	free(m->cpu);
	free(m->watch.t);
	free(m->q);
	memset(m, 0, sizeof(*m));
}

/* The va a table's entry 0 maps: va with the table's index bits cleared. */
static uint64_t table_base(uint64_t va, int level)
{
	return va & ~((1ull << (12 + 9 * level)) - 1);
}

static void watch_walk(struct tlbm *m, uint64_t va, const struct tlbm_walk *w)
{
	for (int i = 0; i < w->ntables; i++)
		tlbm_watch_add(&m->watch, w->t[i].pa >> 12, w->t[i].level,
			       table_base(va, w->t[i].level), w->t[i].idx);
}

/*
 * Kernel: the guest's tables from the kernel root. User: 4k, see README.
 * Returns whether the TLB may keep the translation: the processor caches
 * no translation whose walk met a not-present entry (Intel SDM vol. 3A,
 * 4.10.2 "Translation Lookaside Buffers"), so the next access walks again;
 * nor does the model keep one whose tables it could not read.
 */
static bool translate(struct tlbm *m, uint64_t va, int *psize, bool *global)
{
	struct tlbm_walk w;

	*psize = TLBM_4K;
	*global = false;
	if (tlbm_mode_of(va) == TLBM_USER)
		return true;
	if (!m->have_root) {	/* root=none: every kernel page is 4k */
		m->st.ev[TLBM_EV_WALK_FAULT]++;
		return true;
	}
	tlbm_walk(m->read, m->read_ctx, m->kroot, m->levels, va, &w);
	watch_walk(m, va, &w);
	if (w.read_error) {
		m->st.ev[TLBM_EV_WALK_ERROR]++;
		return false;
	}
	if (!w.present) {
		m->st.ev[TLBM_EV_WALK_FAULT]++;
		return false;
	}
	*psize = w.psize;
	*global = w.global;
	return true;
}

static void count(struct tlbm_counts *c, int psize, uint64_t n,
		  bool l1_miss, bool walked)
{
	c[psize].acc += n;
	c[psize].l1_miss += l1_miss;
	c[psize].walks += walked;
}

/*
 * n accesses to va's page in a row: one lookup, the n-1 others hit the
 * entry it left most recently used (they cannot change any LRU order).
 */
/* Stamp the listed entries oldest first: stamps follow use again. */
static void mru_sync(struct tlbm_tlb *t, struct tlbm_mru *u)
{
	uint64_t done = 0;	/* ticks at or below it are stamped */

	if (!u->dirty)
		return;
	for (int k = 0; k < u->n; k++) {
		struct tlbm_recent *o = NULL;

		for (int i = 0; i < u->n; i++)
			if (u->r[i].tick > done && (!o || u->r[i].tick < o->tick))
				o = &u->r[i];
		o->e->stamp = ++t->clock;
		done = o->tick;
	}
	u->dirty = false;
}

/* e was just looked up or filled (and stamped): the most recent. */
static void mru_touch(struct tlbm *m, struct tlbm_mru *u, struct tlbm_entry *e,
		      enum tlbm_kind kind, struct tlbm_counts *cnt,
		      struct tlbm_counts *dmap)
{
	uint8_t shift = (uint8_t)psize_shift[e->esize];
	uint64_t first = e->vpn << shift, last = first + (1ull << shift) - 1;
	int i, old = 0;

	/* an entry across the direct map's edge is counted the long way */
	if (kind == TLBM_DATA && (first - m->dmap_base < m->dmap_size) !=
	    (last - m->dmap_base < m->dmap_size)) {
		u->n = 0;	/* stamps are in line (mru_sync ran): forget */
		return;
	}
	for (i = 0; i < u->n && u->r[i].e != e; i++)
		if (u->r[i].tick < u->r[old].tick)
			old = i;
	if (i == u->n)		/* new: a free slot, or the oldest one's */
		i = u->n < TLBM_NRECENT ? u->n++ : old;
	u->r[i] = (struct tlbm_recent){ .e = e, .vpn = e->vpn,
					.tick = ++u->tick, .esize = e->esize,
					.shift = shift, .cnt = cnt,
					.dmap = dmap };
}

static void do_access(struct tlbm *m, unsigned int cpu, uint64_t va,
		      enum tlbm_kind kind, uint64_t n)
{
	struct tlbm_cpu *c = &m->cpu[cpu];
	struct tlbm_tlb *l1 = &c->tlb[kind == TLBM_DATA ? TLBM_L1D : TLBM_L1I];
	struct tlbm_entry *e, *l1e;
	bool l1_miss, walked = false, global;
	struct tlbm_counts *cnt, *dmap = NULL;
	int psize;

	mru_sync(l1, &c->mru[kind]);
	e = l1e = tlb_lookup(l1, va);
	l1_miss = !e;
	if (e) {
		psize = e->psize;
	} else {
		e = tlb_lookup(&c->tlb[TLBM_L2], va);
		if (e) {
			psize = e->psize;
			global = e->global;
			l1e = tlb_fill(l1, va, psize, global);
		} else {
			walked = true;
			if (translate(m, va, &psize, &global)) {
				tlb_fill(&c->tlb[TLBM_L2], va, psize, global);
				l1e = tlb_fill(l1, va, psize, global);
			}
		}
	}
	cnt = &m->st.c[tlbm_mode_of(va)][kind][psize];
	count(cnt, 0, n, l1_miss, walked);
	if (kind == TLBM_DATA && va - m->dmap_base < m->dmap_size) {
		dmap = &m->st.dmap[psize];
		count(dmap, 0, n, l1_miss, walked);
	}
	if (l1e)	/* no fill (a walk that found nothing): nothing touched */
		mru_touch(m, &c->mru[kind], l1e, kind, cnt, dmap);
}

static void flush_cpu(struct tlbm *m, unsigned int cpu, bool keep_global)
{
	for (int lv = 0; lv < TLBM_NLEVEL; lv++)
		tlb_flush(&m->cpu[cpu].tlb[lv], keep_global);
}

static void inval_all_cpus(struct tlbm *m, uint64_t first, uint64_t last)
{
	for (unsigned int c = 0; c < m->ncpu; c++)
		for (int lv = 0; lv < TLBM_NLEVEL; lv++)
			tlb_inval(&m->cpu[c].tlb[lv], first, last);
}

/* Returns whether the tables below this slot must stop being watched. */
static bool store_slot(struct tlbm *m, struct tlbm_watch_ent *w,
		       unsigned int slot)
{
	uint64_t span = 1ull << (12 + 9 * (w->level - 1));
	uint64_t first = w->base + slot * span;

	w->bits[slot / 64] &= ~(1ull << (slot % 64));
	if (w->alias) {		/* derived ranges unknown: drop everything */
		m->st.ev[TLBM_EV_ALIAS_FLUSH]++;
		for (unsigned int c = 0; c < m->ncpu; c++)
			flush_cpu(m, c, false);
		return false;
	}
	m->st.ev[TLBM_EV_PT_INVAL]++;
	inval_all_cpus(m, first, first + span - 1);
	return w->level > 1;
}

static bool watch_empty(const struct tlbm_watch_ent *w)
{
	for (int i = 0; i < 8; i++)
		if (w->bits[i])
			return false;
	return true;
}

/*
 * A guest store reached physical address pa. If it wrote an entry of a
 * page-table page some cached translation was derived from, drop that
 * translation everywhere: the kernel always flushes after changing a
 * present entry, and the flush it uses (invlpg) is invisible to ABI v1.
 * If the entry pointed to a lower table, that table has left the tree:
 * stop watching it (and the tables below it).
 */
static void do_store(struct tlbm *m, uint64_t pa, unsigned int len)
{
	uint64_t end = pa + (len ? len : 1) - 1, first = 1, last = 0;
	struct tlbm_watch_ent *w;
	int level;

	if ((pa >> 12) != (end >> 12)) {	/* crosses a page */
		do_store(m, (end & ~0xfffull), (unsigned int)(end & 0xfff) + 1);
		end = pa | 0xfff;
	}
	w = tlbm_watch_find(&m->watch, pa >> 12);
	if (!w) {
		m->nowatch_pfn = pa >> 12;
		m->nowatch_gen = m->watch.gen;
		return;
	}
	m->st.ev[TLBM_EV_PT_STORE]++;
	level = w->level;
	for (unsigned int s = (pa & 0xfff) >> 3; s <= (end & 0xfff) >> 3; s++) {
		uint64_t span = 1ull << (12 + 9 * (level - 1));

		if (!(w->bits[s / 64] & (1ull << (s % 64))) ||
		    !store_slot(m, w, s))
			continue;
		if (first > last)
			first = w->base + s * span;
		last = w->base + (s + 1) * span - 1;
	}
	if (watch_empty(w))
		tlbm_watch_del(&m->watch, w);
	/*
	 * A table under a used slot was reached through it, so it sets that
	 * slot's bit: the slots between the first and last stored one with a
	 * bit have none below them that is still watched.
	 */
	if (first <= last)	/* moves entries: after the last use of w */
		tlbm_watch_drop(&m->watch, level, first, last);
}

static void do_flush(struct tlbm *m, unsigned int cpu, int f)
{
	switch (f) {
	case TLBM_FLUSH_CR3:
		m->st.ev[TLBM_EV_CR3]++;
		flush_cpu(m, cpu, true);
		break;
	case CR4_PAIR:
		m->st.ev[TLBM_EV_CR4]++;
		m->st.ev[TLBM_EV_CR4_GLOBAL]++;
		flush_cpu(m, cpu, false);
		break;
	case CR4_ALONE:
		m->st.ev[TLBM_EV_CR4]++;
		break;
	case TLBM_FLUSH_INVPCID:
		m->st.ev[TLBM_EV_INVPCID]++;
		flush_cpu(m, cpu, false);
		break;
	case TLBM_FLUSH_INVLPG:
		m->st.ev[TLBM_EV_INVLPG]++;
		break;
	}
}

static void do_insns(struct tlbm *m, uint64_t va, uint64_t n)
{
	m->st.insns[tlbm_mode_of(va)] += n;
}

static void do_invlpg(struct tlbm *m, unsigned int cpu, uint64_t va)
{
	for (int lv = 0; lv < TLBM_NLEVEL; lv++)
		tlb_inval(&m->cpu[cpu].tlb[lv], va, va);
}

static void apply(struct tlbm *m, const struct tlbm_qev *q)
{
	switch (q->type) {
	case TLBM_Q_ACCESS:
		do_access(m, q->cpu, q->a, (enum tlbm_kind)q->kind, q->n);
		break;
	case TLBM_Q_INSNS:
		do_insns(m, q->a, q->n);
		break;
	case TLBM_Q_STORE:
		do_store(m, q->a, q->len);
		break;
	case TLBM_Q_FLUSH:
		do_flush(m, q->cpu, q->kind);
		break;
	case TLBM_Q_INVLPG:
		do_invlpg(m, q->cpu, q->a);
		break;
	}
}

/* Apply queued events up to the first CR4 write still undecided. */
static void replay(struct tlbm *m)
{
	while (m->qlen) {
		struct tlbm_qev *q = &m->q[m->qhead];

		if (q->type == TLBM_Q_FLUSH && q->kind == CR4_HELD)
			return;
		apply(m, q);
		m->qhead++;
		m->qlen--;
	}
	m->qhead = 0;
}

/* A new slot at the queue's tail, NULL when out of memory. */
static struct tlbm_qev *push(struct tlbm *m)
{
	if (m->qhead + m->qlen == m->qcap) {
		size_t cap = m->qcap ? 2 * m->qcap : 4096;
		struct tlbm_qev *n = realloc(m->q, cap * sizeof(*n));

		if (!n)
			return NULL;
		m->q = n;
		m->qcap = cap;
	}
	return &m->q[m->qhead + m->qlen++];
}

/* Apply now, or queue behind a CR4 write that is still undecided. */
static void event(struct tlbm *m, struct tlbm_qev q)
{
	struct tlbm_qev *slot;

	if (!m->qlen) {
		apply(m, &q);
		return;
	}
	slot = push(m);
	if (!slot) {		/* out of memory: decide everything now */
		tlbm_settle(m);
		apply(m, &q);
		return;
	}
	*slot = q;
}

static void decide_cr4(struct tlbm *m, unsigned int cpu, bool pair)
{
	struct tlbm_cpu *c = &m->cpu[cpu];

	m->q[c->cr4_q].kind = pair ? CR4_PAIR : CR4_ALONE;
	c->cr4_held = false;
	m->held--;
	replay(m);
}

/* Decide every held CR4 write as alone (before counts are read). */
void tlbm_settle(struct tlbm *m)
{
	for (unsigned int c = 0; c < m->ncpu && m->held; c++)
		if (m->cpu[c].cr4_held)
			decide_cr4(m, c, false);
}

void tlbm_access(struct tlbm *m, unsigned int cpu, uint64_t va,
		 enum tlbm_kind kind, uint64_t n)
{
	struct tlbm_mru *u = &m->cpu[cpu].mru[kind];

	if (m->qlen) {
		event(m, (struct tlbm_qev){ .type = TLBM_Q_ACCESS,
					    .kind = (uint8_t)kind,
					    .cpu = (uint16_t)cpu, .a = va,
					    .n = n });
		return;
	}
	for (int i = 0; i < u->n && !m->no_shortcuts; i++) {
		struct tlbm_recent *r = &u->r[i];

		if ((va >> r->shift) != r->vpn || !r->e->valid ||
		    r->e->vpn != r->vpn || r->e->esize != r->esize)
			continue;
		r->cnt->acc += n;
		if (r->dmap)
			r->dmap->acc += n;
		if (r->tick != u->tick) {	/* not the most recent before */
			r->tick = ++u->tick;
			u->dirty = true;
		}
		return;
	}
	do_access(m, cpu, va, kind, n);
}

void tlbm_insns(struct tlbm *m, unsigned int cpu, uint64_t va, uint64_t n)
{
	struct tlbm_cpu *c = &m->cpu[cpu];

	c->insns += n;
	if (c->cr4_held && c->insns - c->cr4_at > TLBM_CR4_PAIR_INSNS)
		decide_cr4(m, cpu, false);
	if (!m->qlen) {
		do_insns(m, va, n);
		return;
	}
	event(m, (struct tlbm_qev){ .type = TLBM_Q_INSNS, .cpu = (uint16_t)cpu,
				    .a = va, .n = n });
}

void tlbm_store(struct tlbm *m, uint64_t pa, unsigned int len)
{
	if (m->qlen) {
		event(m, (struct tlbm_qev){ .type = TLBM_Q_STORE, .a = pa,
					    .len = len });
		return;
	}
	/* the common case: the page stored to last, not watched then or now */
	if (!m->no_shortcuts && (pa >> 12) == m->nowatch_pfn &&
	    m->watch.gen == m->nowatch_gen &&
	    (pa & 0xfff) + (len ? len : 1) <= 0x1000)
		return;
	do_store(m, pa, len);
}

/*
 * CR3: drop non-global entries (PCID is off). CR4: see TLBM_CR4_PAIR_INSNS
 * in tlbmodel.h. INVPCID: its type is not visible, but 6.1 without PTI uses
 * it only to flush everything. INVLPG: counted; its effect comes from the
 * page-table store before it (tlbm_store).
 */
void tlbm_flush_insn(struct tlbm *m, unsigned int cpu, enum tlbm_flush f)
{
	struct tlbm_cpu *c = &m->cpu[cpu];
	struct tlbm_qev q = { .type = TLBM_Q_FLUSH, .kind = (uint8_t)f,
			      .cpu = (uint16_t)cpu };
	struct tlbm_qev *slot;

	if (f == TLBM_FLUSH_NONE)
		return;
	if (f != TLBM_FLUSH_CR4) {
		event(m, q);
		return;
	}
	if (c->cr4_held) {	/* the second write of a PGE toggle */
		decide_cr4(m, cpu, true);
		q.kind = CR4_PAIR;
		event(m, q);
		return;
	}
	slot = push(m);
	if (!slot) {		/* cannot hold it: take it as alone */
		q.kind = CR4_ALONE;
		event(m, q);
		return;
	}
	q.kind = CR4_HELD;
	*slot = q;
	c->cr4_q = (size_t)(slot - m->q);
	c->cr4_held = true;
	c->cr4_at = c->insns;
	m->held++;
}

void tlbm_invlpg(struct tlbm *m, unsigned int cpu, uint64_t va)
{
	event(m, (struct tlbm_qev){ .type = TLBM_Q_INVLPG, .cpu = (uint16_t)cpu,
				    .a = va });
}

/*
 * Is the model's root the guest kernel's page-table root? Through it the
 * direct map must translate page_offset to physical 0 and page_offset +
 * root to the root page itself. A wrong root (another page, another
 * kernel's, 5-level tables walked with levels=4) fails this once the
 * kernel runs on its own tables, where its numbers would otherwise look
 * plausible. Returns 0 and an empty why if it passed. Reads only: counts,
 * TLBs and the watch set stay as they were.
 */
int tlbm_check_root(struct tlbm *m, uint64_t page_offset, char *why,
		    size_t n)
{
	static const uint64_t page_size[TLBM_NPSIZE] = { 1ull << 12,
							 1ull << 21,
							 1ull << 30 };
	uint64_t want[2] = { 0, m->kroot & ~0xfffull };

	*why = '\0';
	if (!m->have_root) {
		snprintf(why, n, "root=none: no page walks, every kernel page "
			 "modelled as 4k");
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		uint64_t va = page_offset + want[i], pa;
		struct tlbm_walk w;

		tlbm_walk(m->read, m->read_ctx, m->kroot, m->levels, va, &w);
		pa = w.pa + (va & (page_size[w.psize] - 1));
		if (w.read_error)
			snprintf(why, n, "root=0x%llx: guest memory unreadable",
				 (unsigned long long)m->kroot);
		else if (!w.present)
			snprintf(why, n, "root=0x%llx does not map 0x%llx "
				 "(page_offset+0x%llx, levels=%d): not the "
				 "kernel's page tables",
				 (unsigned long long)m->kroot,
				 (unsigned long long)va,
				 (unsigned long long)want[i], m->levels);
		else if (pa != want[i])
			snprintf(why, n, "root=0x%llx maps 0x%llx to 0x%llx, "
				 "not 0x%llx: not the kernel's direct map",
				 (unsigned long long)m->kroot,
				 (unsigned long long)va,
				 (unsigned long long)pa,
				 (unsigned long long)want[i]);
		if (*why)
			return -1;
	}
	return 0;
}

/* For tests: is va cached at this level, and with which mapping size? */
bool tlbm_present(struct tlbm *m, unsigned int cpu, enum tlbm_level lv,
		  uint64_t va, enum tlbm_psize *psize)
{
	struct tlbm_entry *e = tlb_find(&m->cpu[cpu].tlb[lv], va);

	if (e && psize)
		*psize = (enum tlbm_psize)e->psize;
	return e != NULL;
}

void tlbm_stats_sub(struct tlbm_stats *d, const struct tlbm_stats *a,
		    const struct tlbm_stats *b)
{
	const uint64_t *x = (const uint64_t *)a, *y = (const uint64_t *)b;
	uint64_t *z = (uint64_t *)d;

	_Static_assert(sizeof(*d) % sizeof(uint64_t) == 0, "u64 fields only");
	for (size_t i = 0; i < sizeof(*d) / sizeof(uint64_t); i++)
		z[i] = x[i] - y[i];
}

static void counts_json(const struct tlbm_counts *c, FILE *f)
{
	fputc('{', f);
	for (int s = 0; s < TLBM_NPSIZE; s++)
		fprintf(f, "%s\"%s\":{\"acc\":%llu,\"l1_miss\":%llu,"
			"\"walks\":%llu}", s ? "," : "", tlbm_psize_name[s],
			(unsigned long long)c[s].acc,
			(unsigned long long)c[s].l1_miss,
			(unsigned long long)c[s].walks);
	fputc('}', f);
}

/*
 * {"kernel":{"insns":N,"dtlb":{"4k":{...},"2m":{...},"1g":{...}},
 *  "itlb":{...},"dtlb_directmap":{...}},"user":{...},"events":{...}}
 */
void tlbm_stats_json(const struct tlbm_stats *s, FILE *f)
{
	static const char *const mode[] = { "kernel", "user" };

	fputc('{', f);
	for (int md = 0; md < TLBM_NMODE; md++) {
		fprintf(f, "%s\"%s\":{\"insns\":%llu,\"dtlb\":", md ? "," : "",
			mode[md], (unsigned long long)s->insns[md]);
		counts_json(s->c[md][TLBM_DATA], f);
		fputs(",\"itlb\":", f);
		counts_json(s->c[md][TLBM_INSN], f);
		if (md == TLBM_KERNEL) {
			fputs(",\"dtlb_directmap\":", f);
			counts_json(s->dmap, f);
		}
		fputc('}', f);
	}
	fputs(",\"events\":{", f);
	for (int i = 0; i < TLBM_NEV; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "", tlbm_event_name[i],
			(unsigned long long)s->ev[i]);
	fputs("}}", f);
}
