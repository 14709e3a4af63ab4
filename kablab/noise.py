"""Noise of a metric across boots, and the boots a campaign needs.

Variance components: per-run values (log values when every value is > 0) are
grouped by boot; the one-way random-effects ANOVA estimator (method of
moments; boots nested in kernels when several kernels are pooled) splits
their variance into a within-boot part (run to run, same boot) and a
between-boot part (boot to boot of the same kernel):

    sigma_w^2 = MS_within
    sigma_b^2 = max(0, (MS_between - MS_within) / n0)

with n0 the usual unbalanced-design coefficient (Searle, Casella &
McCulloch, "Variance Components", 1992, ch. 3). On a log scale
CoV% = 100 * sqrt(exp(sigma^2) - 1).

Power (the noncentral t of statsmodels.stats.power.TTestPower): the report's
test compares per-boot values of two kernels paired by round, so with n boots
per kernel the difference has standard error sqrt(2 / n) * sigma_boot, where
sigma_boot^2 = sigma_b^2 + sigma_w^2 / runs, and n - 1 degrees of freedom
(n = 2: the pooled two-sample test, 2 degrees of freedom), at the two-sided
level q / m that the report's BH family of m primary metrics applies to one
real change among them (planning_alpha). A change is flagged
only when its interval excludes 0 *and* it exceeds the noise floor, so the
power counted here is the chance of both (the floor taken as a fixed threshold
on the estimate): an effect at or below the floor can never reach 80 %, and
its boots needed is None.

Plan sizing from an A/A campaign (the two kernels are the same, so all
kernels are pooled):

    python3 -m kablab.noise CAMPAIGN_DIR --json            # per-metric table
    python3 -m kablab.noise CAMPAIGN_DIR --boots-for 3     # one number

    from kablab.noise import boots_needed
    boots_needed("reports/<aa-campaign>", 3.0)             # -> int or None
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq

ALPHA = 0.05            # q of the report's Benjamini-Hochberg families
POWER = 0.8
MIN_EFFECT_PCT = 0.5    # the noise floor is never below this
MAX_BOOTS = 10000       # boots_for() gives up beyond this
EFFECTS_PCT = (1.0, 3.0)


# ------------------------------------------------------------------ scales

def to_pct(log_sd: float) -> float:
    """Log-scale SD -> coefficient of variation in % (log-normal)."""
    if log_sd is None or not math.isfinite(log_sd):
        return float("nan")
    return 100.0 * math.sqrt(math.expm1(log_sd * log_sd))


def pct_to_log(pct: float) -> float:
    return math.log1p(pct / 100.0)


# ------------------------------------------------------- variance components

@dataclass
class VarComp:
    n_boots: int
    n_runs: int
    runs_per_boot: float            # mean
    sd_within: float                # on the analysis scale (log, or relative for raw)
    sd_between: float
    scale: str                      # "log" or "raw" (raw: SDs divided by |mean|)
    note: str = ""

    @property
    def cov_within_pct(self) -> float:
        return self._pct(self.sd_within)

    @property
    def cov_between_pct(self) -> float:
        return self._pct(self.sd_between)

    @property
    def ratio(self) -> float:
        """between / within (CoV ratio); > 1: boots matter more than runs."""
        if not (math.isfinite(self.sd_within) and math.isfinite(self.sd_between)) \
                or self.sd_within == 0:
            return float("nan")
        return self.sd_between / self.sd_within

    def _pct(self, sd: float) -> float:
        if not math.isfinite(sd):
            return float("nan")
        return to_pct(sd) if self.scale == "log" else 100.0 * sd

    def sd_boot(self, runs: float | None = None) -> float:
        """SD of one boot's value (mean of *runs* runs) on the analysis scale."""
        r = runs or self.runs_per_boot
        if not math.isfinite(self.sd_between):
            return float("nan")
        if not math.isfinite(self.sd_within):       # one run per boot: total is all we know
            return self.sd_between
        return math.sqrt(self.sd_between ** 2 + self.sd_within ** 2 / max(r, 1.0))

    @property
    def floor_pct(self) -> float:
        return noise_floor_pct(self.cov_between_pct)


def noise_floor_pct(cov_between_pct: float) -> float:
    """The smallest change the report flags: the between-boot CoV, >= MIN_EFFECT_PCT."""
    if cov_between_pct is None or not math.isfinite(cov_between_pct):
        return MIN_EFFECT_PCT
    return max(MIN_EFFECT_PCT, cov_between_pct)


def variance_components(boots: Sequence[Iterable[float]],
                        kernels: Sequence[Any] | None = None) -> VarComp:
    """Within- and between-boot SD of per-run values grouped by boot.

    *boots*: one sequence of run values per boot; *kernels*: the kernel of each
    boot (boots are nested in kernels, kernel means are removed) or None for
    one kernel. Values are analysed on a log scale when all are > 0, else on
    the raw scale divided by |mean| (relative SDs).
    """
    groups = [np.asarray([v for v in b if v is not None and math.isfinite(v)], dtype=float)
              for b in boots]
    labels = list(kernels) if kernels is not None else [0] * len(groups)
    keep = [i for i, g in enumerate(groups) if g.size]
    groups = [groups[i] for i in keep]
    labels = [labels[i] for i in keep]
    nan = float("nan")
    n_runs = int(sum(g.size for g in groups))
    if not groups:
        return VarComp(0, 0, nan, nan, nan, "log", "no values")
    allv = np.concatenate(groups)
    scale = "log" if np.all(allv > 0) else "raw"
    if scale == "log":
        groups = [np.log(g) for g in groups]
    else:
        m = float(np.mean(np.abs(allv)))
        if m == 0:
            return VarComp(len(groups), n_runs, n_runs / len(groups), nan, nan, "raw",
                           "all values 0")
        groups = [g / m for g in groups]
    n_b = np.array([g.size for g in groups], dtype=float)
    means = np.array([g.mean() for g in groups])
    ss_w = float(sum(((g - g.mean()) ** 2).sum() for g in groups))
    df_w = n_runs - len(groups)
    ss_b = 0.0
    sum_sq = 0.0
    kset = sorted(set(labels), key=str)
    for k in kset:
        idx = [i for i, lab in enumerate(labels) if lab == k]
        nk = n_b[idx].sum()
        mk = float((n_b[idx] * means[idx]).sum() / nk)
        ss_b += float((n_b[idx] * (means[idx] - mk) ** 2).sum())
        sum_sq += float((n_b[idx] ** 2).sum() / nk)
    df_b = len(groups) - len(kset)
    notes = []
    if df_b <= 0:
        sd_b = nan
        notes.append("fewer than 2 boots: between-boot SD unknown")
    if df_w <= 0:
        sd_w = nan
        notes.append("one run per boot: within-boot SD unknown (between-boot SD is the total)")
        if df_b > 0:
            sd_b = math.sqrt(ss_b / df_b)
    else:
        ms_w = ss_w / df_w
        sd_w = math.sqrt(ms_w)
        if df_b > 0:
            n0 = (n_runs - sum_sq) / df_b
            ms_b = ss_b / df_b
            sd_b = math.sqrt(max(0.0, (ms_b - ms_w) / n0))
    return VarComp(len(groups), n_runs, n_runs / len(groups), sd_w, sd_b, scale,
                   "; ".join(notes))


# ------------------------------------------------------------------ power

def power_at(delta: float, se: float, df: float, alpha: float, floor: float = 0.0) -> float:
    """Chance that a true change *delta* (analysis scale) is flagged: |t| beyond the
    two-sided critical value at *alpha* and |estimate| > *floor*, for a test with
    standard error *se* and *df* degrees of freedom. Without a floor this is
    statsmodels' TTestPower().power(delta / (se * sqrt(df + 1)), df + 1, alpha);
    the floor raises the critical value to floor / se (se taken as known)."""
    if not (se > 0 and df >= 1 and math.isfinite(se)):
        return float("nan")
    crit = max(float(sps.t.isf(alpha / 2, df)), floor / se)
    ncp = abs(delta) / se
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")     # scipy 1.10's boost nct warns spuriously
        p = float(sps.nct.sf(crit, df, ncp) + sps.nct.cdf(-crit, df, ncp))
    if not math.isfinite(p):            # normal approximation
        p = float(sps.norm.sf(crit - ncp) + sps.norm.cdf(-crit - ncp))
    return p


def mde(se: float, df: float, alpha: float, floor: float = 0.0,
        power: float = POWER) -> float:
    """Smallest change (analysis scale) flagged with probability *power*."""
    if not (se > 0 and df >= 1 and math.isfinite(se)):
        return float("nan")
    crit = max(float(sps.t.isf(alpha / 2, df)), floor / se)
    hi = se * (crit + 10.0)
    while power_at(hi, se, df, alpha, floor) < power:
        hi *= 2
    return float(brentq(lambda d: power_at(d, se, df, alpha, floor) - power, 0.0, hi,
                        xtol=1e-9 * max(se, 1e-12), rtol=1e-10))


def design_se_df(sd_boot: float, n: int) -> tuple[float, int]:
    """SE and df of the kernel difference with n boots per kernel (see module doc)."""
    if n >= 3:
        return math.sqrt(2.0 / n) * sd_boot, n - 1
    return math.sqrt(2.0 / n) * sd_boot, 2 * n - 2


def boots_for(vc: VarComp, effect_pct: float, power: float = POWER, alpha: float = ALPHA,
              runs: float | None = None, floor_pct: float | None = None) -> int | None:
    """Boots per kernel needed to flag a change of *effect_pct* % with *power*.

    None when the effect is not above the noise floor (more boots cannot help),
    when the noise is unknown, or when more than MAX_BOOTS would be needed.
    """
    sd = vc.sd_boot(runs)
    if not math.isfinite(sd):
        return None
    floor_pct = vc.floor_pct if floor_pct is None else floor_pct
    if vc.scale == "log":
        delta, floor = abs(pct_to_log(effect_pct)), pct_to_log(floor_pct)
    else:
        delta, floor = abs(effect_pct) / 100.0, floor_pct / 100.0
    if delta <= floor:
        return None
    if sd == 0:
        return 2

    def ok(n: int) -> bool:
        se, df = design_se_df(sd, n)
        return power_at(delta, se, df, alpha, floor) >= power
    if not ok(MAX_BOOTS):
        return None
    lo, hi = 2, 2
    while not ok(hi):
        lo, hi = hi, hi * 2
    while lo < hi:                      # smallest n in [lo, hi] with ok(n)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


# ------------------------------------------------------- campaign noise table

def planning_alpha(n_primary: int, q: float = ALPHA) -> float:
    """Two-sided level at which one real change among *n_primary* primary metrics
    is flagged by the report's BH family (R = 1: q / m)."""
    return q / max(1, n_primary)


def noise_table(camp: Any, pooled: bool = True, effects: Sequence[float] = EFFECTS_PCT,
                power: float = POWER, alpha: float | None = None) -> dict[str, Any]:
    """Variance components and boots needed per (workload, metric) of a loaded
    campaign: all kernels pooled (an A/A campaign), or the baseline only.
    *alpha* defaults to planning_alpha(number of primary metrics)."""
    from .stats import metric_data
    variants = camp.variants()
    mdata = metric_data(camp, variants[0] if variants else "")
    n_primary = sum(md.role == "primary" for md in mdata.values())
    if alpha is None:
        alpha = planning_alpha(n_primary)
    rows = []
    for (wl, name), md in mdata.items():
        use = variants if pooled else variants[:1]
        groups, labels = [], []
        for v in use:
            for b in md.boots.get(v, []):
                groups.append(b.runs)
                labels.append(v)
        vc = variance_components(groups, labels)
        rows.append(dict(
            workload=wl, metric=name, unit=md.unit, better=md.better, role=md.role,
            primary=md.role == "primary", derived_from=md.derived_from,
            scale=vc.scale, kernels=sorted({str(x) for x in labels}), n_boots=vc.n_boots,
            n_runs=vc.n_runs, runs_per_boot=_f(vc.runs_per_boot),
            sd_within=_f(vc.sd_within), sd_between=_f(vc.sd_between),
            cov_within_pct=_f(vc.cov_within_pct), cov_between_pct=_f(vc.cov_between_pct),
            ratio=_f(vc.ratio), noise_floor_pct=_f(vc.floor_pct), note=vc.note,
            boots_needed={f"{e:g}": boots_for(vc, e, power, alpha) for e in effects}))
    first = camp.results[0]["campaign"] if camp.results else {}
    return {"campaign": first.get("id"), "mode": first.get("mode"),
            "source": "all kernels pooled (boots nested in kernels)" if pooled
            else f"baseline {variants[0] if variants else None}",
            "kernels": variants if pooled else variants[:1],
            "alpha": alpha, "q": ALPHA, "n_primary": n_primary, "power": power,
            "min_effect_pct": MIN_EFFECT_PCT,
            "design": "per-boot values paired by round; n boots per kernel",
            "metrics": rows}


def _f(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _load_noise(noise: Any) -> dict[str, Any]:
    if isinstance(noise, dict):
        return noise
    p = Path(noise)
    if p.is_dir():
        from .load import load_campaign
        return noise_table(load_campaign(p))
    return json.loads(p.read_text(encoding="utf-8"))


def boots_needed_by_metric(noise: Any, effect_pct: float, power: float = POWER,
                           alpha: float | None = None, runs: float | None = None,
                           metrics: str = "primary") -> dict[tuple[str, str], int | None]:
    """(workload, metric) -> boots per kernel to flag *effect_pct* % with *power*.

    *noise*: the dict printed by `python3 -m kablab.noise DIR --json`, a path to
    that JSON, or a campaign directory. *alpha*: two-sided level; default
    q / (number of primary metrics), the level at which the report's BH family
    flags one real change among them. *metrics*: "primary" (one per workload,
    the headline verdicts) or "tested" (primary and secondary). *runs*: runs
    per boot of the planned campaign (default: as measured).
    """
    doc = _load_noise(noise)
    if alpha is None:
        alpha = planning_alpha(sum(bool(m.get("primary")) for m in doc["metrics"]))
    out: dict[tuple[str, str], int | None] = {}
    for m in doc["metrics"]:
        if metrics == "primary" and not m.get("primary"):
            continue
        if metrics == "tested" and m.get("role") not in ("primary", "secondary"):
            continue
        nan = float("nan")
        vc = VarComp(m["n_boots"], m["n_runs"], m["runs_per_boot"] or nan,
                     nan if m["sd_within"] is None else m["sd_within"],
                     nan if m["sd_between"] is None else m["sd_between"], m["scale"])
        out[(m["workload"], m["metric"])] = boots_for(vc, effect_pct, power, alpha, runs)
    return out


def boots_needed(noise: Any, effect_pct: float, power: float = POWER,
                 alpha: float | None = None, runs: float | None = None,
                 metrics: str = "primary") -> int | None:
    """Boots per kernel for a campaign that must flag a change of *effect_pct* %
    on every primary metric with probability *power*: the largest per-metric need
    (see boots_needed_by_metric). Metrics whose noise floor is at or above the
    effect (no number of boots helps) are skipped; None when no metric qualifies.
    """
    need = [n for n in boots_needed_by_metric(noise, effect_pct, power, alpha, runs,
                                              metrics).values() if n is not None]
    return max(need) if need else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.noise", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("campaign_dir")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--baseline-only", action="store_true",
                    help="use the baseline's boots only (default: pool all kernels)")
    ap.add_argument("--boots-for", type=float, metavar="PCT",
                    help="print only the boots per kernel needed to flag PCT %% on every "
                    "primary metric (empty line when none can be sized)")
    ap.add_argument("--power", type=float, default=POWER)
    ap.add_argument("--runs", type=float, help="runs per boot of the planned campaign")
    a = ap.parse_args(argv)
    root = Path(a.campaign_dir)
    if not (root / "results").is_dir():
        print(f"kablab.noise: error: {root}/results is not a directory", file=sys.stderr)
        return 1
    from .load import load_campaign
    table = noise_table(load_campaign(root), pooled=not a.baseline_only, power=a.power)
    if a.boots_for is not None:
        n = boots_needed(table, a.boots_for, a.power, runs=a.runs)
        print("" if n is None else n)
        return 0
    if a.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"campaign {table['campaign']}: {table['source']}; boots per kernel for "
          f"{int(a.power * 100)} % power at alpha {table['alpha']:.3g} "
          f"(q {ALPHA} / {table['n_primary']} primary metrics)")
    print(f"{'workload':<20}{'metric':<22}{'role':<10}{'boots':>6}{'CoVw%':>7}{'CoVb%':>7}"
          f"{'b/w':>6}{'floor%':>7}{'1%':>6}{'3%':>6}")
    for m in table["metrics"]:
        def f(x: float | None, w: int, p: int = 2) -> str:
            return ("n/a" if x is None else f"{x:.{p}f}").rjust(w)

        def n(x: int | None) -> str:
            return ("-" if x is None else str(x)).rjust(6)
        print(f"{m['workload'][:19]:<20}{m['metric'][:21]:<22}{m['role'][:9]:<10}"
              f"{m['n_boots']:>6}{f(m['cov_within_pct'], 7)}{f(m['cov_between_pct'], 7)}"
              f"{f(m['ratio'], 6, 1)}{f(m['noise_floor_pct'], 7)}"
              f"{n(m['boots_needed']['1'])}{n(m['boots_needed']['3'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["VarComp", "variance_components", "boots_for", "boots_needed",
           "boots_needed_by_metric", "noise_table", "power_at", "mde", "noise_floor_pct"]
