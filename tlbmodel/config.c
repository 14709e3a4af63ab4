// SPDX-License-Identifier: GPL-2.0
/*
 * Model parameters: the default core and the key=value overrides.
 *
 * Default: Intel Golden Cove (Alder Lake P-core, Sapphire Rapids), from the
 * TLB parameter table of the Golden Cove section in the Intel 64 and IA-32
 * Architectures Optimization Reference Manual (order no. 248966):
 *
 *   ITLB        4K        256 entries  8-way
 *   ITLB        2M/4M      32 entries  8-way
 *   DTLB load   4K         96 entries  6-way
 *   DTLB load   2M/4M      32 entries  4-way
 *   DTLB load   1G          8 entries  fully associative
 *   STLB        4K+2M    2048 entries 16-way (shared)
 *   STLB        1G       1024 entries  8-way
 *
 * Simplifications (README.md): the 16-entry store DTLB is not modelled
 * (stores look up the load DTLB); the ITLB has no 1G array, so 1G code
 * pages are splintered into 2M entries; the STLB's second array, which the
 * manual lists for 2M/4M and 1G, holds only 1G here while 2M shares the 4K
 * array.
 */
#include <stdlib.h>
#include <string.h>

#include "tlbmodel.h"

const char *const tlbm_psize_name[TLBM_NPSIZE] = { "4k", "2m", "1g" };
const char *const tlbm_level_name[TLBM_NLEVEL] = { "l1d", "l1i", "l2" };

static const struct tlbm_array_cfg golden_cove[TLBM_NLEVEL][TLBM_NPSIZE] = {
	[TLBM_L1D] = { { 96, 6, -1 }, { 32, 4, -1 }, { 8, 8, -1 } },
	[TLBM_L1I] = { { 256, 8, -1 }, { 32, 8, -1 }, { 0, 0, -1 } },
	[TLBM_L2] = { { 2048, 16, -1 }, { 0, 0, TLBM_4K }, { 1024, 8, -1 } },
};

void tlbm_config_default(struct tlbm_config *c)
{
	memcpy(c->a, golden_cove, sizeof(c->a));
	c->custom = false;
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

/* "ENTRIES:WAYS", "0" (not cached at this level) or a size name (share) */
static int parse_array(const char *val, struct tlbm_array_cfg *a)
{
	char *end;
	int s = lookup(tlbm_psize_name, TLBM_NPSIZE, val, strlen(val));

	if (s >= 0) {
		*a = (struct tlbm_array_cfg){ 0, 0, (int8_t)s };
		return 0;
	}
	a->share = -1;
	if (parse_u32(val, &end, &a->entries))
		return -1;
	if (!*end && a->entries == 0) {
		a->ways = 0;
		return 0;
	}
	if (*end != ':' || parse_u32(end + 1, &end, &a->ways) || *end)
		return -1;
	return 0;
}

/* key "<level>_<size>", e.g. l1d_4k=64:4, l2_2m=4k, l1i_1g=0 */
int tlbm_config_set(struct tlbm_config *c, const char *key, const char *val)
{
	const char *us = strchr(key, '_');
	struct tlbm_array_cfg a;
	int lv, s;

	if (!us)
		return -1;
	lv = lookup(tlbm_level_name, TLBM_NLEVEL, key, (size_t)(us - key));
	s = lookup(tlbm_psize_name, TLBM_NPSIZE, us + 1, strlen(us + 1));
	if (lv < 0 || s < 0 || parse_array(val, &a))
		return -1;
	c->a[lv][s] = a;
	c->custom = true;
	return 0;
}

static int check_array(const struct tlbm_array_cfg *lvl, int s)
{
	const struct tlbm_array_cfg *a = &lvl[s];

	if (a->share >= 0)	/* target must be a real, unshared array */
		return a->share == s || a->share >= TLBM_NPSIZE ||
		       lvl[a->share].share >= 0 || !lvl[a->share].entries;
	if (!a->entries)
		return 0;
	return !a->ways || a->entries % a->ways;
}

int tlbm_config_check(const struct tlbm_config *c, char *err, size_t n)
{
	for (int lv = 0; lv < TLBM_NLEVEL; lv++)
		for (int s = 0; s < TLBM_NPSIZE; s++)
			if (check_array(c->a[lv], s)) {
				snprintf(err, n, "%s_%s: entries must be a "
					 "multiple of ways>0, or share an "
					 "existing array",
					 tlbm_level_name[lv],
					 tlbm_psize_name[s]);
				return -1;
			}
	return 0;
}

static void array_json(const struct tlbm_array_cfg *a, FILE *f)
{
	if (a->share >= 0)
		fprintf(f, "\"%s\"", tlbm_psize_name[a->share]);
	else
		fprintf(f, "[%u,%u]", a->entries, a->ways);
}

/* {"l1d":{"4k":[96,6],...},"l2":{"2m":"4k",...}}: [entries,ways] or shared */
void tlbm_config_json(const struct tlbm_config *c, FILE *f)
{
	fputc('{', f);
	for (int lv = 0; lv < TLBM_NLEVEL; lv++) {
		fprintf(f, "%s\"%s\":{", lv ? "," : "", tlbm_level_name[lv]);
		for (int s = 0; s < TLBM_NPSIZE; s++) {
			fprintf(f, "%s\"%s\":", s ? "," : "",
				tlbm_psize_name[s]);
			array_json(&c->a[lv][s], f);
		}
		fputc('}', f);
	}
	fputc('}', f);
}
