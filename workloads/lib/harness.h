/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kablab workload harness: the one shared main() for every workload.
 *
 * A workload is one short C file that defines
 *
 *     const struct wl_workload wl_workload = {
 *         .name = "pipe-pingpong",
 *         .description = "...",
 *         .iteration = "one round trip",
 *         .default_iterations = 5000,
 *         .opts = opts,            // NULL-name terminated table, may be NULL
 *         .run = run,
 *     };
 *
 * and a run() that loops `for (n = 0; wl_continue(n); n++)`, records
 * samples/params/metrics through the functions below and returns 0.
 * The harness owns argument parsing, the seeded PRNG, timing, the
 * --duration-s/--iterations bound, JSON/human output and exit codes
 * (0 ok, 1 runtime failure, 2 usage error). See workloads/README.md.
 */
#ifndef KABLAB_HARNESS_H
#define KABLAB_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum wl_opt_type {
	WL_OPT_U64,	/* unsigned integer in [min, max]; min defaults to 1 */
	WL_OPT_DOUBLE,	/* finite number > 0 */
	WL_OPT_STR,	/* non-empty string */
	WL_OPT_FLAG,	/* no argument, sets *bool to true */
};

struct wl_opt {
	const char *name;	/* long option name, e.g. "size-mib" */
	enum wl_opt_type type;
	void *ptr;		/* uint64_t *, double *, const char **, bool * */
	const char *help;
	uint64_t min, max;	/* WL_OPT_U64 bounds; 0/0 means [1, UINT64_MAX] */
	bool hidden;		/* not in --help, not in params (e.g. --child) */
	bool no_param;		/* don't copy into params automatically */
};

struct wl_workload {
	const char *name;
	const char *description;
	const char *iteration;		/* what one iteration is, for --help */
	uint64_t default_iterations;	/* used when neither bound is given */
	const struct wl_opt *opts;
	int (*run)(void);		/* 0 ok; failures call wl_die*() */
};

/* Defined by the workload file. */
extern const struct wl_workload wl_workload;

/* ---- run control ---- */
/* true while iteration `done` (0-based count of completed ones) may start */
bool wl_continue(uint64_t done);
bool wl_dry_run(void);		/* --dry-run: compute the plan, touch nothing */
uint64_t wl_iterations(void);	/* the iteration bound, 0 if none */
uint64_t wl_seed(void);

/* ---- deterministic PRNG (splitmix64-seeded xoshiro256**) ---- */
uint64_t wl_rand(void);
uint64_t wl_rand_below(uint64_t n);	/* uniform in [0, n), n > 0 */
/* a fresh independent stream derived from the seed and `stream` */
struct wl_rng { uint64_t s[4]; };
void wl_rng_init(struct wl_rng *r, uint64_t seed, uint64_t stream);
uint64_t wl_rng_next(struct wl_rng *r);

/* ---- timing (CLOCK_MONOTONIC) ---- */
uint64_t wl_now_ns(void);
double wl_now_s(void);
/* elapsed_s reported in the output: set by the workload around its
 * measured phase; if never set, the harness reports the run() time. */
void wl_set_elapsed(double seconds);
/* The work the measured phase did, in the unit a reader counts it in
 * ("MiB", "syscall", "fault"): whole-run counts such as the TLB model's
 * are reported per unit of it. Singular unit names. */
void wl_work(double amount, const char *unit);

/* ---- latency samples (reservoir-capped, percentiles) ---- */
struct wl_samples;
struct wl_samples *wl_samples_new(void);
void wl_samples_add(struct wl_samples *s, double v);
size_t wl_samples_count(const struct wl_samples *s);
double wl_samples_pct(struct wl_samples *s, double pct);	/* nearest rank */
double wl_samples_mean(const struct wl_samples *s);
void wl_samples_free(struct wl_samples *s);

/* ---- output ---- */
void wl_param_u64(const char *name, uint64_t v);
void wl_param_i64(const char *name, int64_t v);
void wl_param_double(const char *name, double v);
void wl_param_str(const char *name, const char *v);	/* NULL -> null */
void wl_param_bool(const char *name, bool v);
/* better: "higher" or "lower" */
void wl_metric(const char *name, double value, const char *unit,
	       const char *better);

/* ---- errors ---- */
/* runtime failure: "<name>: <msg>" (+ ": strerror(errno)") and exit 1 */
__attribute__((noreturn, format(printf, 1, 2))) void wl_die(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void wl_die_errno(const char *fmt, ...);
/* usage error: message + usage on stderr, exit 2 */
__attribute__((noreturn, format(printf, 1, 2))) void wl_usage_error(const char *fmt, ...);

/* ---- small helpers shared by several workloads ---- */
void *wl_xmalloc(size_t n);		/* dies on failure */
void wl_write_full(int fd, const void *buf, size_t n);	/* dies on error */
void wl_read_full(int fd, void *buf, size_t n);	/* dies on error/EOF */
/* value of "Key:" in a /proc file like /proc/meminfo ("Key:") or
 * /proc/vmstat ("key "); returns false if absent/unreadable */
bool wl_proc_field(const char *path, const char *key, int64_t *out);

/* direct-map state: DirectMap4k/2M/1G (kB, /proc/meminfo) and
 * direct_map_level2/3_splits, nr_page_table_pages (/proc/vmstat) */
enum { WL_DM_4K, WL_DM_2M, WL_DM_1G, WL_DM_L2, WL_DM_L3, WL_DM_PT, WL_DM_N };
struct wl_dmap { int64_t v[WL_DM_N]; bool have[WL_DM_N]; };
void wl_dmap_read(struct wl_dmap *d);
/* params "<field>_<suffix>" for every field (null when absent) */
void wl_dmap_params(const struct wl_dmap *d, const char *suffix);
/* delta_* metrics (lower is better) for the fields in mask (1 << WL_DM_*)
 * that both snapshots have. */
void wl_dmap_delta_metrics(const struct wl_dmap *before, const struct wl_dmap *after,
			   unsigned int mask);

#define WL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
