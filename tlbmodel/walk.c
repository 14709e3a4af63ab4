// SPDX-License-Identifier: GPL-2.0
/*
 * The x86-64 page walker and the TLB-maintenance instruction decoder.
 *
 * The walker reads the guest's page tables the way the MMU does: from the
 * root (CR3-like) physical address down, 9 index bits per level, stopping at
 * a non-present entry, a PS=1 entry in a PDPT (1G) or PD (2M), or a PTE
 * (4k). Only what the TLB model needs is interpreted: P, PS, G and the
 * address; permissions and A/D bits do not change a TLB's contents.
 */
#include "tlbmodel.h"

#define PTE_P		(1ull << 0)
#define PTE_PS		(1ull << 7)
#define PTE_G		(1ull << 8)
#define PTE_ADDR	0x000ffffffffff000ull	/* bits 51:12 */

static const int leaf_psize[] = { [1] = TLBM_4K, [2] = TLBM_2M,
				  [3] = TLBM_1G };

static bool is_leaf(uint64_t e, int level)
{
	return level == 1 || ((level == 2 || level == 3) && (e & PTE_PS));
}

static void leaf(struct tlbm_walk *w, uint64_t e, int level)
{
	uint64_t span = 1ull << (12 + 9 * (level - 1));

	w->present = true;
	w->global = !!(e & PTE_G);
	w->psize = leaf_psize[level];
	w->pa = e & PTE_ADDR & ~(span - 1);
}

int tlbm_walk(tlbm_read_fn rd, void *ctx, uint64_t root, int levels,
	      uint64_t va, struct tlbm_walk *w)
{
	uint64_t table = root & PTE_ADDR;

	*w = (struct tlbm_walk){ .psize = TLBM_4K };
	if (levels != 4 && levels != 5)
		return -1;
	for (int level = levels; level >= 1; level--) {
		unsigned int idx = (va >> (12 + 9 * (level - 1))) & 511;
		uint64_t e;

		w->t[w->ntables].pa = table;
		w->t[w->ntables].level = level;
		w->t[w->ntables].idx = idx;
		w->ntables++;
		if (rd(ctx, table + 8 * idx, &e)) {
			w->read_error = true;
			return -1;
		}
		if (!(e & PTE_P))
			return 0;
		if (is_leaf(e, level)) {
			leaf(w, e, level);
			return 0;
		}
		table = e & PTE_ADDR;
	}
	return 0;
}

static bool is_legacy_prefix(uint8_t b)
{
	switch (b) {
	case 0x26: case 0x2e: case 0x36: case 0x3e:
	case 0x64: case 0x65: case 0x66: case 0x67:
	case 0xf0: case 0xf2: case 0xf3:
		return true;
	}
	return false;
}

/*
 * mov to CRn is 0f 22 /r (ModRM.reg = n, REX.R adds 8; the ModRM is always
 * a register form), invlpg is 0f 01 /7 with a memory operand (the register
 * forms of /7 are swapgs and rdtscp), invpcid is 66 0f 38 82 /r.
 */
enum tlbm_flush tlbm_decode_flush(const uint8_t *b, size_t n)
{
	bool op66 = false, rex_r = false;
	size_t i = 0;
	uint8_t modrm;

	for (; i < n && is_legacy_prefix(b[i]); i++)
		op66 |= b[i] == 0x66;
	if (i < n && (b[i] & 0xf0) == 0x40)
		rex_r = b[i++] & 0x04;
	if (i + 3 > n || b[i] != 0x0f)	/* need 0f, opcode, ModRM */
		return TLBM_FLUSH_NONE;
	modrm = b[i + 2];
	if (b[i + 1] == 0x22) {
		int cr = ((modrm >> 3) & 7) | (rex_r ? 8 : 0);

		if (cr == 3)
			return TLBM_FLUSH_CR3;
		return cr == 4 ? TLBM_FLUSH_CR4 : TLBM_FLUSH_NONE;
	}
	if (b[i + 1] == 0x01)
		return ((modrm >> 3) & 7) == 7 && (modrm >> 6) != 3 ?
		       TLBM_FLUSH_INVLPG : TLBM_FLUSH_NONE;
	if (b[i + 1] == 0x38 && op66 && i + 3 < n && b[i + 2] == 0x82 &&
	    (b[i + 3] >> 6) != 3)
		return TLBM_FLUSH_INVPCID;
	return TLBM_FLUSH_NONE;
}
