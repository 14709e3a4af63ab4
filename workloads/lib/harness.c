// SPDX-License-Identifier: GPL-2.0
/*
 * kablab workload harness: argument parsing, seeded PRNG, timing, latency
 * samples, JSON/human output and exit codes shared by every workload.
 * The contract is docs/design.md "Workload binaries and harness output".
 */

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WL_MAX_ITEMS 128
#define WL_SAMPLES_CAP (1u << 20)

enum item_type { IT_U64, IT_I64, IT_DOUBLE, IT_STR, IT_NULL, IT_BOOL };

struct item {
	char name[64];
	enum item_type type;
	union { uint64_t u; int64_t i; double d; bool b; } v;
	char *s;
	const char *unit, *better;	/* metrics only */
};

static struct {
	uint64_t seed;
	bool json, dry_run, help;
	double duration_s;		/* 0: no duration bound */
	uint64_t iterations;		/* 0: no iteration bound */
	double deadline;		/* set on the first wl_continue() */
	double elapsed;			/* < 0: not set by the workload */
	double work;			/* < 0: not set by the workload */
	const char *work_unit;
	struct wl_rng rng;
	struct item params[WL_MAX_ITEMS], metrics[WL_MAX_ITEMS];
	int nparams, nmetrics;
} H = { .seed = 1, .elapsed = -1, .work = -1 };

/* ------------------------------------------------------------------ */
/* PRNG: xoshiro256** seeded with splitmix64 */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void wl_rng_init(struct wl_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t wl_rng_next(struct wl_rng *r)
{
	uint64_t *s = r->s;
	uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

uint64_t wl_rand(void)
{
	return wl_rng_next(&H.rng);
}

uint64_t wl_rand_below(uint64_t n)
{
	/* Lemire-free simple rejection: unbiased and deterministic */
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;

	do
		x = wl_rand();
	while (x >= lim);
	return x % n;
}

uint64_t wl_seed(void)
{
	return H.seed;
}

/* ------------------------------------------------------------------ */
/* timing and run control */

uint64_t wl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

double wl_now_s(void)
{
	return wl_now_ns() / 1e9;
}

void wl_set_elapsed(double seconds)
{
	H.elapsed = seconds;
}

void wl_work(double amount, const char *unit)
{
	if (!isfinite(amount) || amount < 0)
		wl_die("work amount %g is not a finite number >= 0", amount);
	H.work = amount;
	H.work_unit = unit;
}

bool wl_dry_run(void)
{
	return H.dry_run;
}

uint64_t wl_iterations(void)
{
	return H.iterations;
}

bool wl_continue(uint64_t done)
{
	if (H.iterations && done >= H.iterations)
		return false;
	if (H.duration_s > 0) {
		double now = wl_now_s();

		if (H.deadline == 0)
			H.deadline = now + H.duration_s;
		else if (now >= H.deadline)
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* samples */

struct wl_samples {
	double *v;
	size_t n, cap;
	uint64_t seen;
	bool sorted;
	struct wl_rng rng;
};

struct wl_samples *wl_samples_new(void)
{
	struct wl_samples *s = wl_xmalloc(sizeof(*s));

	memset(s, 0, sizeof(*s));
	wl_rng_init(&s->rng, H.seed, 0x5a3b1e5ULL);
	return s;
}

void wl_samples_add(struct wl_samples *s, double v)
{
	s->seen++;
	s->sorted = false;
	if (s->n < WL_SAMPLES_CAP) {
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 4096;
			s->v = realloc(s->v, s->cap * sizeof(*s->v));
			if (!s->v)
				wl_die("out of memory for samples");
		}
		s->v[s->n++] = v;
		return;
	}
	/* reservoir sampling keeps the percentiles unbiased past the cap */
	uint64_t j = wl_rng_next(&s->rng) % s->seen;

	if (j < s->n)
		s->v[j] = v;
}

size_t wl_samples_count(const struct wl_samples *s)
{
	return s->seen;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double wl_samples_pct(struct wl_samples *s, double pct)
{
	if (!s->n)
		return 0;
	if (!s->sorted) {
		qsort(s->v, s->n, sizeof(*s->v), cmp_double);
		s->sorted = true;
	}
	double want = pct / 100.0 * (double)s->n;
	size_t rank = (size_t)want;

	if ((double)rank < want)
		rank++;

	if (rank < 1)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return s->v[rank - 1];
}

double wl_samples_mean(const struct wl_samples *s)
{
	double sum = 0;

	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	return s->n ? sum / (double)s->n : 0;
}

void wl_samples_free(struct wl_samples *s)
{
	if (s) {
		free(s->v);
		free(s);
	}
}

/* ------------------------------------------------------------------ */
/* params and metrics */

static struct item *new_item(struct item *arr, int *n, const char *name)
{
	if (*n >= WL_MAX_ITEMS)
		wl_die("too many params/metrics");
	struct item *it = &arr[(*n)++];

	memset(it, 0, sizeof(*it));
	snprintf(it->name, sizeof(it->name), "%s", name);
	return it;
}

void wl_param_u64(const char *name, uint64_t v)
{
	struct item *it = new_item(H.params, &H.nparams, name);

	it->type = IT_U64;
	it->v.u = v;
}

void wl_param_i64(const char *name, int64_t v)
{
	struct item *it = new_item(H.params, &H.nparams, name);

	it->type = IT_I64;
	it->v.i = v;
}

void wl_param_double(const char *name, double v)
{
	struct item *it = new_item(H.params, &H.nparams, name);

	it->type = isfinite(v) ? IT_DOUBLE : IT_NULL;
	it->v.d = v;
}

void wl_param_str(const char *name, const char *v)
{
	struct item *it = new_item(H.params, &H.nparams, name);

	it->type = v ? IT_STR : IT_NULL;
	if (v && !(it->s = strdup(v)))
		wl_die("out of memory");
}

void wl_param_bool(const char *name, bool v)
{
	struct item *it = new_item(H.params, &H.nparams, name);

	it->type = IT_BOOL;
	it->v.b = v;
}

void wl_metric(const char *name, double value, const char *unit,
	       const char *better)
{
	if (!isfinite(value))
		wl_die("metric %s is not a finite number", name);
	if (strcmp(better, "higher") && strcmp(better, "lower"))
		wl_die("metric %s: better must be higher or lower", name);
	struct item *it = new_item(H.metrics, &H.nmetrics, name);

	it->type = IT_DOUBLE;
	it->v.d = value;
	it->unit = unit;
	it->better = better;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void item_value(FILE *f, const struct item *it, bool json)
{
	switch (it->type) {
	case IT_U64: fprintf(f, "%" PRIu64, it->v.u); break;
	case IT_I64: fprintf(f, "%" PRId64, it->v.i); break;
	case IT_DOUBLE: fprintf(f, "%.10g", it->v.d); break;
	case IT_BOOL: fputs(it->v.b ? "true" : "false", f); break;
	case IT_NULL: fputs("null", f); break;
	case IT_STR:
		if (json)
			json_str(f, it->s);
		else
			fputs(it->s, f);
		break;
	}
}

static void print_json(double elapsed)
{
	FILE *f = stdout;

	fputs("{\"workload\": ", f);
	json_str(f, wl_workload.name);
	fprintf(f, ", \"seed\": %" PRIu64 ", \"params\": {", H.seed);
	for (int i = 0; i < H.nparams; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, H.params[i].name);
		fputs(": ", f);
		item_value(f, &H.params[i], true);
	}
	fprintf(f, "}, \"elapsed_s\": %.6f, ", elapsed);
	if (H.dry_run)
		fputs("\"dry_run\": true, ", f);
	if (H.work >= 0 && !H.dry_run) {
		fprintf(f, "\"work\": {\"amount\": %.6g, \"unit\": ", H.work);
		json_str(f, H.work_unit);
		fputs("}, ", f);
	} else {
		fputs("\"work\": null, ", f);
	}
	fputs("\"metrics\": {", f);
	for (int i = 0; i < H.nmetrics; i++) {
		const struct item *m = &H.metrics[i];

		fputs(i ? ", " : "", f);
		json_str(f, m->name);
		fputs(": {\"value\": ", f);
		item_value(f, m, true);
		fputs(", \"unit\": ", f);
		json_str(f, m->unit);
		fputs(", \"better\": ", f);
		json_str(f, m->better);
		fputs("}", f);
	}
	fputs("}}\n", f);
}

static void print_human(double elapsed)
{
	FILE *f = stdout;

	fprintf(f, "%s (seed %" PRIu64 ")%s\n", wl_workload.name, H.seed,
		H.dry_run ? " dry run: nothing executed" : "");
	for (int i = 0; i < H.nparams; i++) {
		fprintf(f, "  %-28s ", H.params[i].name);
		item_value(f, &H.params[i], false);
		fputc('\n', f);
	}
	fprintf(f, "  %-28s %.6f\n", "elapsed_s", elapsed);
	if (H.work >= 0 && !H.dry_run)
		fprintf(f, "  %-28s %.6g %s\n", "work", H.work, H.work_unit);
	for (int i = 0; i < H.nmetrics; i++) {
		const struct item *m = &H.metrics[i];

		fprintf(f, "  %-28s %14.3f %-8s (%s is better)\n", m->name,
			m->v.d, m->unit, m->better);
	}
}

/* ------------------------------------------------------------------ */
/* errors */

static void vmsg(const char *fmt, va_list ap, int err)
{
	fflush(stdout);
	fprintf(stderr, "%s: ", wl_workload.name);
	vfprintf(stderr, fmt, ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
}

void wl_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, 0);
	va_end(ap);
	exit(1);
}

void wl_die_errno(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, err);
	va_end(ap);
	exit(1);
}

static const struct wl_opt common_opts[] = {
	{ "seed", WL_OPT_U64, NULL, "PRNG seed (default 1)", 0, UINT64_MAX, 0, 0 },
	{ "json", WL_OPT_FLAG, NULL, "print one JSON object on stdout", 0, 0, 0, 0 },
	{ "duration-s", WL_OPT_DOUBLE, NULL, "stop the measured loop after S seconds", 0, 0, 0, 0 },
	{ "iterations", WL_OPT_U64, NULL, "stop after N iterations", 0, 0, 0, 0 },
	{ "dry-run", WL_OPT_FLAG, NULL, "validate, print the plan, touch nothing", 0, 0, 0, 0 },
	{ "help", WL_OPT_FLAG, NULL, "show this help and exit", 0, 0, 0, 0 },
};

static const char *argname(const struct wl_opt *o)
{
	switch (o->type) {
	case WL_OPT_U64: return " N";
	case WL_OPT_DOUBLE: return " S";
	case WL_OPT_STR: return " STR";
	default: return "";
	}
}

static void usage(FILE *f)
{
	char buf[64];

	fprintf(f, "usage: %s [options]\n", wl_workload.name);
	for (size_t i = 0; i < WL_ARRAY_SIZE(common_opts); i++) {
		snprintf(buf, sizeof(buf), "--%s%s", common_opts[i].name,
			 argname(&common_opts[i]));
		fprintf(f, "  %-22s %s\n", buf, common_opts[i].help);
	}
	for (const struct wl_opt *o = wl_workload.opts; o && o->name; o++) {
		if (o->hidden)
			continue;
		snprintf(buf, sizeof(buf), "--%s%s", o->name, argname(o));
		fprintf(f, "  %-22s %s\n", buf, o->help);
	}
	if (wl_workload.default_iterations)
		fprintf(f, "one iteration = %s; default --iterations %" PRIu64 "\n",
			wl_workload.iteration, wl_workload.default_iterations);
	else
		fprintf(f, "one iteration = %s; default: the whole plan\n",
			wl_workload.iteration);
}

void wl_usage_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: error: ", wl_workload.name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

/* ------------------------------------------------------------------ */
/* helpers */

void *wl_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		wl_die("cannot allocate %zu bytes", n);
	return p;
}

void wl_write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = write(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			wl_die_errno("write");
		p += r;
		n -= (size_t)r;
	}
}

void wl_read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			wl_die_errno("read");
		if (r == 0)
			wl_die("read: unexpected end of file (peer exited?)");
		p += r;
		n -= (size_t)r;
	}
}

bool wl_proc_field(const char *path, const char *key, int64_t *out)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t kl = strlen(key);
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) &&
		    (line[kl] == ':' || line[kl] == ' ')) {
			*out = strtoll(line + kl + 1, NULL, 10);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

static const struct { const char *file, *key, *name; } dm_fields[WL_DM_N] = {
	{ "/proc/meminfo", "DirectMap4k", "directmap4k_kib" },
	{ "/proc/meminfo", "DirectMap2M", "directmap2m_kib" },
	{ "/proc/meminfo", "DirectMap1G", "directmap1g_kib" },
	{ "/proc/vmstat", "direct_map_level2_splits", "direct_map_level2_splits" },
	{ "/proc/vmstat", "direct_map_level3_splits", "direct_map_level3_splits" },
	{ "/proc/vmstat", "nr_page_table_pages", "nr_page_table_pages" },
};

void wl_dmap_read(struct wl_dmap *d)
{
	for (int i = 0; i < WL_DM_N; i++)
		d->have[i] = wl_proc_field(dm_fields[i].file, dm_fields[i].key,
					   &d->v[i]);
}

void wl_dmap_params(const struct wl_dmap *d, const char *suffix)
{
	char name[64];

	for (int i = 0; i < WL_DM_N; i++) {
		snprintf(name, sizeof(name), "%s_%s", dm_fields[i].name, suffix);
		if (d->have[i])
			wl_param_i64(name, d->v[i]);
		else
			wl_param_str(name, NULL);
	}
}

void wl_dmap_delta_metrics(const struct wl_dmap *before, const struct wl_dmap *after,
			   unsigned int mask)
{
	static const struct { int idx; const char *name, *unit; } deltas[] = {
		{ WL_DM_4K, "delta_directmap4k_kib", "KiB" },
		{ WL_DM_L2, "delta_level2_splits", "1" },
		{ WL_DM_PT, "delta_nr_page_table_pages", "pages" },
	};

	for (size_t i = 0; i < WL_ARRAY_SIZE(deltas); i++) {
		int k = deltas[i].idx;

		if ((mask & (1u << k)) && before->have[k] && after->have[k])
			wl_metric(deltas[i].name, (double)(after->v[k] - before->v[k]),
				  deltas[i].unit, "lower");
	}
}

/* ------------------------------------------------------------------ */
/* argument parsing */

static void parse_value(const struct wl_opt *o, const char *arg, void *ptr)
{
	char *end;

	switch (o->type) {
	case WL_OPT_U64: {
		uint64_t lo = o->min, hi = o->max ? o->max : UINT64_MAX;
		unsigned long long v;

		if (!o->min && !o->max)
			lo = 1;
		if (*arg < '0' || *arg > '9')
			wl_usage_error("--%s: '%s' is not a non-negative integer",
				       o->name, arg);
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || *end)
			wl_usage_error("--%s: '%s' is not a valid integer",
				       o->name, arg);
		if (v < lo || v > hi)
			wl_usage_error("--%s: %llu is out of range [%" PRIu64
				       ", %" PRIu64 "]", o->name, v, lo, hi);
		*(uint64_t *)ptr = v;
		break;
	}
	case WL_OPT_DOUBLE: {
		double v;

		errno = 0;
		v = strtod(arg, &end);
		if (errno || end == arg || *end || !isfinite(v) || v <= 0)
			wl_usage_error("--%s: '%s' is not a positive number",
				       o->name, arg);
		*(double *)ptr = v;
		break;
	}
	case WL_OPT_STR:
		if (!*arg)
			wl_usage_error("--%s: empty argument", o->name);
		*(const char **)ptr = arg;
		break;
	case WL_OPT_FLAG:
		*(bool *)ptr = true;
		break;
	}
}

static void param_from_opt(const struct wl_opt *o)
{
	char name[64];

	snprintf(name, sizeof(name), "%s", o->name);
	for (char *p = name; *p; p++)
		if (*p == '-')
			*p = '_';
	switch (o->type) {
	case WL_OPT_U64: wl_param_u64(name, *(uint64_t *)o->ptr); break;
	case WL_OPT_DOUBLE: wl_param_double(name, *(double *)o->ptr); break;
	case WL_OPT_STR: wl_param_str(name, *(const char **)o->ptr); break;
	case WL_OPT_FLAG: wl_param_bool(name, *(bool *)o->ptr); break;
	}
}

int main(int argc, char **argv)
{
	const size_t ncommon = WL_ARRAY_SIZE(common_opts);
	size_t nw = 0, total;
	void *common_ptr[] = { &H.seed, &H.json, &H.duration_s, &H.iterations,
			       &H.dry_run, &H.help };
	bool got_iter = false;

	for (const struct wl_opt *o = wl_workload.opts; o && o->name; o++)
		nw++;
	total = ncommon + nw;
	struct option *lo = wl_xmalloc((total + 1) * sizeof(*lo));

	for (size_t i = 0; i < total; i++) {
		const struct wl_opt *o = i < ncommon ? &common_opts[i] :
			&wl_workload.opts[i - ncommon];

		lo[i].name = o->name;
		lo[i].has_arg = o->type == WL_OPT_FLAG ? no_argument :
			required_argument;
		lo[i].flag = NULL;
		lo[i].val = 0x100 + (int)i;
	}
	memset(&lo[total], 0, sizeof(lo[total]));

	opterr = 0;
	for (;;) {
		int idx = -1, c = getopt_long(argc, argv, ":", lo, &idx);

		if (c == -1)
			break;
		if (c == '?') {
			if (optopt)
				wl_usage_error("unknown option '-%c'", optopt);
			wl_usage_error("unknown option '%s'", argv[optind - 1]);
		}
		if (c == ':')
			wl_usage_error("option '%s' requires an argument",
				       argv[optind - 1]);
		size_t i = (size_t)(c - 0x100);

		if (i < ncommon) {
			parse_value(&common_opts[i], optarg, common_ptr[i]);
			if (common_ptr[i] == &H.iterations)
				got_iter = true;
		} else {
			parse_value(&wl_workload.opts[i - ncommon], optarg,
				    wl_workload.opts[i - ncommon].ptr);
		}
	}
	if (optind < argc)
		wl_usage_error("unexpected argument '%s'", argv[optind]);
	free(lo);
	if (H.help) {
		printf("%s: %s\n", wl_workload.name, wl_workload.description);
		usage(stdout);
		return 0;
	}
	if (!got_iter && H.duration_s == 0)	/* 0: the workload's plan bounds it */
		H.iterations = wl_workload.default_iterations;

	wl_rng_init(&H.rng, H.seed, 0);
	if (H.iterations)
		wl_param_u64("iterations", H.iterations);
	else
		wl_param_str("iterations", NULL);
	if (H.duration_s > 0)
		wl_param_double("duration_s", H.duration_s);
	else
		wl_param_str("duration_s", NULL);
	for (const struct wl_opt *o = wl_workload.opts; o && o->name; o++)
		if (!o->hidden && !o->no_param)
			param_from_opt(o);

	double t0 = wl_now_s();
	int rc = wl_workload.run();
	double t1 = wl_now_s();

	if (rc)
		return 1;
	if (H.dry_run)
		H.elapsed = 0;
	else if (H.elapsed < 0)
		H.elapsed = t1 - t0;
	if (H.json)
		print_json(H.elapsed);
	else
		print_human(H.elapsed);
	if (fflush(stdout) || ferror(stdout)) {
		perror("stdout");
		return 1;
	}
	return 0;
}
