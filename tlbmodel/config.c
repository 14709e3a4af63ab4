// SPDX-License-Identifier: GPL-2.0
/*
 * Model parameters: the named cores and the key=value overrides.
 *
 * "goldencove" (the default) is the TLB hierarchy a Golden Cove P-core
 * (Alder Lake, Sapphire Rapids) reports about itself in CPUID leaf 0x18,
 * "Deterministic Address Translation Parameters". Source: the leaf 0x18
 * sub-leaves of an i7-12700K P-core (leaf 0x1a: core type "Intel Core"),
 * as decoded by cpuid(1) in the raw-cpuid crate's test fixture
 * (github.com/gz/rust-cpuid, test get_deterministic_address_translation_info):
 *
 *   sub-leaf  type          sizes          sets x ways   entries
 *   1         instruction   4K               32 x 8        256
 *   2         instruction   2M/4M             4 x 8         32
 *   3         store-only    4K/2M/4M/1G       1 x 16 FA     16
 *   4         load-only     4K               16 x 4         64
 *   5         load-only     2M/4M             8 x 4         32
 *   6         load-only     1G                1 x 8 FA       8
 *   7         unified       4K+2M/4M        128 x 8       1024
 *   8         unified       4K+1G           128 x 8       1024
 *
 * The prose sources disagree in two places (tlbmodel/README.md, "Default
 * core"): dendibakh/perf-book, chapters/3-CPU-Microarchitecture/"3-8
 * Modern CPU design.md" (drawn from the Intel 64 and IA-32 Architectures
 * Optimization Reference Manual, order no. 248966) gives the L1 DTLB 96
 * 4K entries, no ways; and the STLB 2048 4K entries of which 2M pages can
 * use 1024. CPUID says 64 4-way, and two 1024-entry arrays. The default
 * takes CPUID for both: it is what the part reports, it gives the ways the
 * model needs, and its two STLB arrays give exactly perf-book's 2048 4K and
 * 1024 2M entries when 4K entries may go to either array (model.c: a fill
 * takes the least recently used way of the two sets). Where Intel puts a
 * 4K entry is not documented; that rule is the model's.
 *
 * "legacy" is the model's geometry before that: L1 DTLB 4K 96 x 6-way
 * (perf-book's 96, ways not sourced), one STLB array of 2048 x 16-way for
 * 4K and 2M and 1024 x 8-way for 1G alone. It lets old figures be redone.
 *
 * Not modelled (README.md): the 16-entry store-only DTLB (stores look up
 * the load DTLB); the ITLB has no 1G array, so 1G code pages are splintered
 * into 2M entries there; 4M (32-bit paging) does not occur in a 64-bit
 * guest.
 */
#include <stdlib.h>
#include <string.h>

#include "tlbmodel.h"

const char *const tlbm_psize_name[TLBM_NPSIZE] = { "4k", "2m", "1g" };
const char *const tlbm_level_name[TLBM_NLEVEL] = { "l1d", "l1i", "l2" };

#define S4K (1u << TLBM_4K)
#define S2M (1u << TLBM_2M)
#define S1G (1u << TLBM_1G)

static const struct {
	const char *name;
	struct tlbm_level_cfg lv[TLBM_NLEVEL];
} cores[] = {
	{ "goldencove", {
		/* CPUID 0x18 sub-leaves 4, 5, 6 */
		[TLBM_L1D] = { 3, { { 64, 4, S4K }, { 32, 4, S2M },
				    { 8, 8, S1G } } },
		/* sub-leaves 1, 2 */
		[TLBM_L1I] = { 2, { { 256, 8, S4K }, { 32, 8, S2M } } },
		/* sub-leaves 7, 8 */
		[TLBM_L2] = { 2, { { 1024, 8, S4K | S2M },
				   { 1024, 8, S4K | S1G } } },
	} },
	{ "legacy", {
		[TLBM_L1D] = { 3, { { 96, 6, S4K }, { 32, 4, S2M },
				    { 8, 8, S1G } } },
		[TLBM_L1I] = { 2, { { 256, 8, S4K }, { 32, 8, S2M } } },
		[TLBM_L2] = { 2, { { 2048, 16, S4K | S2M },
				   { 1024, 8, S1G } } },
	} },
};

int tlbm_config_core(struct tlbm_config *c, const char *name)
{
	for (size_t i = 0; i < sizeof(cores) / sizeof(cores[0]); i++)
		if (!strcmp(cores[i].name, name)) {
			memcpy(c->lv, cores[i].lv, sizeof(c->lv));
			c->core = cores[i].name;
			c->custom = false;
			return 0;
		}
	return -1;
}

void tlbm_config_default(struct tlbm_config *c)
{
	tlbm_config_core(c, cores[0].name);
}

static int lookup(const char *const *names, int n, const char *s, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == len && !strncmp(names[i], s, len))
			return i;
	return -1;
}

static int parse_u32(const char *s, char **end, uint32_t *v)
{
	unsigned long x;

	if (*s < '0' || *s > '9')
		return -1;
	x = strtoul(s, end, 10);
	if (x > (1u << 20))
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* "4k", "4k2m", "4k1g", ...: concatenated size names, each at most once */
static int parse_sizes(const char *s, size_t len, uint8_t *mask)
{
	*mask = 0;
	if (!len || len % 2)
		return -1;
	for (size_t i = 0; i < len; i += 2) {
		int z = lookup(tlbm_psize_name, TLBM_NPSIZE, s + i, 2);

		if (z < 0 || (*mask & (1u << z)))
			return -1;
		*mask |= (uint8_t)(1u << z);
	}
	return 0;
}

/* Keep arrays in one order whatever the edits: by smallest size, then set. */
static void normalise(struct tlbm_level_cfg *l)
{
	for (int i = 1; i < l->narr; i++)
		for (int j = i; j > 0; j--) {
			struct tlbm_array_cfg *a = &l->a[j - 1], *b = &l->a[j];
			uint8_t la = a->sizes & -a->sizes;
			uint8_t lb = b->sizes & -b->sizes;

			if (la < lb || (la == lb && a->sizes <= b->sizes))
				break;
			struct tlbm_array_cfg t = *a;
			*a = *b;
			*b = t;
		}
}

/* Take size s out of every array of the level; drop arrays left empty. */
static void remove_size(struct tlbm_level_cfg *l, int s)
{
	int k = 0;

	for (int i = 0; i < l->narr; i++) {
		l->a[i].sizes &= (uint8_t)~(1u << s);
		if (l->a[i].sizes)
			l->a[k++] = l->a[i];
	}
	l->narr = (uint8_t)k;
}

/* "0", or ENTRIES:WAYS:SIZES[:ENTRIES:WAYS:SIZES...] */
static int parse_level(const char *val, struct tlbm_level_cfg *l)
{
	const char *p = val;

	memset(l, 0, sizeof(*l));
	if (!strcmp(val, "0"))
		return 0;
	for (;;) {
		struct tlbm_array_cfg a;
		const char *colon;
		char *end;

		if (l->narr == TLBM_MAXARR || parse_u32(p, &end, &a.entries) ||
		    *end != ':' || parse_u32(end + 1, &end, &a.ways) ||
		    *end != ':')
			return -1;
		p = end + 1;
		colon = strchr(p, ':');
		if (parse_sizes(p, colon ? (size_t)(colon - p) : strlen(p),
				&a.sizes))
			return -1;
		l->a[l->narr++] = a;
		if (!colon)
			return 0;
		p = colon + 1;
	}
}

/* <level>_<size>: "ENTRIES:WAYS" (own array), "0" (none), a size (share) */
static int set_size(struct tlbm_level_cfg *l, int s, const char *val)
{
	int t = lookup(tlbm_psize_name, TLBM_NPSIZE, val, strlen(val));
	struct tlbm_array_cfg a = { 0, 0, (uint8_t)(1u << s) };
	bool joined = false;
	char *end;

	if (t >= 0) {
		if (t == s)
			return -1;
		remove_size(l, s);
		for (int i = 0; i < l->narr; i++)
			if (l->a[i].sizes & (1u << t)) {
				l->a[i].sizes |= a.sizes;
				joined = true;
			}
		return joined ? 0 : -1;
	}
	if (parse_u32(val, &end, &a.entries))
		return -1;
	if (!*end && a.entries == 0) {
		remove_size(l, s);
		return 0;
	}
	if (*end != ':' || parse_u32(end + 1, &end, &a.ways) || *end)
		return -1;
	remove_size(l, s);
	if (l->narr == TLBM_MAXARR)
		return -1;
	l->a[l->narr++] = a;
	return 0;
}

/*
 * key "<level>" (the whole level, e.g. l2=1024:8:4k2m:1024:8:4k1g) or
 * "<level>_<size>" (one size, e.g. l1d_4k=96:6, l2_2m=4k, l1i_1g=0).
 */
int tlbm_config_set(struct tlbm_config *c, const char *key, const char *val)
{
	const char *us = strchr(key, '_');
	struct tlbm_level_cfg l;
	int lv, s;

	lv = lookup(tlbm_level_name, TLBM_NLEVEL, key,
		    us ? (size_t)(us - key) : strlen(key));
	if (lv < 0)
		return -1;
	l = c->lv[lv];
	if (!us) {
		if (parse_level(val, &l))
			return -1;
	} else {
		s = lookup(tlbm_psize_name, TLBM_NPSIZE, us + 1, strlen(us + 1));
		if (s < 0 || set_size(&l, s, val))
			return -1;
	}
	normalise(&l);
	c->lv[lv] = l;
	c->custom = true;
	return 0;
}

static void sizes_name(uint8_t sizes, char *buf)
{
	*buf = '\0';
	for (int s = 0; s < TLBM_NPSIZE; s++)
		if (sizes & (1u << s)) {
			if (*buf)
				strcat(buf, "+");
			strcat(buf, tlbm_psize_name[s]);
		}
}

int tlbm_config_check(const struct tlbm_config *c, char *err, size_t n)
{
	for (int lv = 0; lv < TLBM_NLEVEL; lv++) {
		const struct tlbm_level_cfg *l = &c->lv[lv];

		for (int i = 0; i < l->narr; i++) {
			const struct tlbm_array_cfg *a = &l->a[i];
			char sz[16];

			if (a->ways && a->entries && a->sizes &&
			    !(a->entries % a->ways))
				continue;
			sizes_name(a->sizes, sz);
			snprintf(err, n, "%s %s array: entries (%u) must be "
				 "a multiple of ways (%u) > 0",
				 tlbm_level_name[lv], sz, a->entries, a->ways);
			return -1;
		}
	}
	return 0;
}

/* {"l1d":[[64,4,"4k"],...],"l2":[[1024,8,"4k+2m"],[1024,8,"4k+1g"]]} */
void tlbm_config_json(const struct tlbm_config *c, FILE *f)
{
	fputc('{', f);
	for (int lv = 0; lv < TLBM_NLEVEL; lv++) {
		const struct tlbm_level_cfg *l = &c->lv[lv];

		fprintf(f, "%s\"%s\":[", lv ? "," : "", tlbm_level_name[lv]);
		for (int i = 0; i < l->narr; i++) {
			char sz[16];

			sizes_name(l->a[i].sizes, sz);
			fprintf(f, "%s[%u,%u,\"%s\"]", i ? "," : "",
				l->a[i].entries, l->a[i].ways, sz);
		}
		fputc(']', f);
	}
	fputc('}', f);
}
