// SPDX-License-Identifier: GPL-2.0
/*
 * The set of page-table pages the walker has read: an open-addressing hash
 * table keyed by page frame number, linear probing, deletion by backward
 * shift so no tombstones pile up (pages come and go as the kernel frees
 * and reuses page tables).
 *
 * Each entry remembers which of its 512 slots translations were derived
 * from, so a store to an unrelated slot costs nothing and a page-table page
 * that was freed and reused as data stops being watched once the slots
 * that mattered have been overwritten.
 */
#include <stdlib.h>
#include <string.h>

#include "tlbmodel.h"

static size_t slot_of(const struct tlbm_watch *w, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (w->cap - 1);
}

struct tlbm_watch_ent *tlbm_watch_find(struct tlbm_watch *w, uint64_t pfn)
{
	uint64_t key = pfn + 1;
	size_t i;

	if (!w->n)
		return NULL;
	for (i = slot_of(w, key); w->t[i].key; i = (i + 1) & (w->cap - 1))
		if (w->t[i].key == key)
			return &w->t[i];
	return NULL;
}

static struct tlbm_watch_ent *insert_slot(struct tlbm_watch *w, uint64_t key)
{
	size_t i;

	for (i = slot_of(w, key); w->t[i].key; i = (i + 1) & (w->cap - 1))
		if (w->t[i].key == key)
			return &w->t[i];
	memset(&w->t[i], 0, sizeof(w->t[i]));
	w->t[i].key = key;
	w->n++;
	w->gen++;
	return &w->t[i];
}

static int grow(struct tlbm_watch *w)
{
	struct tlbm_watch old = *w;

	w->cap = old.cap ? old.cap * 2 : 1024;
	w->t = calloc(w->cap, sizeof(*w->t));
	if (!w->t) {
		*w = old;
		return -1;
	}
	w->n = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.t[i].key)
			*insert_slot(w, old.t[i].key) = old.t[i];
	free(old.t);
	return 0;
}

int tlbm_watch_add(struct tlbm_watch *w, uint64_t pfn, int level,
		   uint64_t base, unsigned int idx)
{
	struct tlbm_watch_ent *e;
	size_t n0;

	if (2 * (w->n + 1) > w->cap && grow(w))	/* keep load <= 1/2 */
		return -1;
	n0 = w->n;
	e = insert_slot(w, pfn + 1);
	if (w->n != n0) {
		e->level = (uint8_t)level;
		e->base = base;
	} else if (e->level != level || e->base != base) {
		e->alias = 1;
	}
	e->bits[idx / 64] |= 1ull << (idx % 64);
	return 0;
}

/* Close the gap at i: move back every later entry whose home is at/before i */
void tlbm_watch_del(struct tlbm_watch *w, struct tlbm_watch_ent *e)
{
	size_t mask = w->cap - 1, i = (size_t)(e - w->t), j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!w->t[j].key)
			break;
		k = slot_of(w, w->t[j].key);
		if ((j > i && (k <= i || k > j)) ||
		    (j < i && (k <= i && k > j))) {
			w->t[i] = w->t[j];
			i = j;
		}
	}
	w->t[i].key = 0;
	w->n--;
}

/*
 * Stop watching the tables below level 'below' that map va in [first,
 * last]: their parent entry was overwritten, so they are no longer part of
 * the kernel's tables (freed, or about to be). Without this a freed table
 * kept its bits: reused as data, its stores dropped translations; reused as
 * a table elsewhere, it looked reached two ways and flushed everything.
 * Returns how many were dropped.
 */
size_t tlbm_watch_drop(struct tlbm_watch *w, int below, uint64_t first,
		       uint64_t last)
{
	size_t dropped = 0;

	for (size_t i = 0; i < w->cap && w->n;) {
		struct tlbm_watch_ent *e = &w->t[i];

		if (e->key && e->level < below && !e->alias &&
		    e->base >= first && e->base <= last) {
			/* backward shift may move an unseen entry into i */
			tlbm_watch_del(w, e);
			dropped++;
			continue;
		}
		i++;
	}
	return dropped;
}
