"""Statistics for the comparison tables.

Per (workload, metric, variant): n, Min, Amean (Hmean for rates: unit ends in
"/s"), Stddev (sample, ddof=1), CoeffVar = 100 * Stddev / Amean, Max, and the
95 % confidence interval of the mean, t(0.975, n-1) * Stddev / sqrt(n) (the
sqrt(n) that mmtests' compare-kernels leaves out).

Per (workload, metric, non-baseline variant): % change of the central value
vs the baseline, positive = better (mmtests convention, using the metric's
`better`), Welch's t-test and Mann-Whitney U on the repetitions, and a seeded
bootstrap 95 % CI of the % change (scipy.stats.bootstrap, BCa, percentile when
BCa is degenerate). Both p-values are Holm-corrected over all comparisons of
the report. A change is significant only when the CI excludes 0 AND the
Holm-corrected Welch p < 0.05; the Mann-Whitney result is reported beside it.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from .load import Campaign

ALPHA = 0.05
N_RESAMPLES = 2000
WALL = "wall_s"


def is_rate(unit: str) -> bool:
    return unit.strip().endswith("/s")


@dataclass
class Summary:
    n: int
    min: float
    amean: float
    hmean: float | None
    central: float          # Hmean for rates (when all values > 0), else Amean
    central_kind: str       # "Hmean" or "Amean"
    stddev: float
    coeffvar: float         # percent, relative to Amean
    max: float
    ci95_halfwidth: float   # t * s / sqrt(n)


def summarise(values: Iterable[float], unit: str = "") -> Summary:
    x = np.asarray(list(values), dtype=float)
    n = int(x.size)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, None, nan, "Amean", nan, nan, nan, nan)
    amean = float(np.mean(x))
    hmean = float(sps.hmean(x)) if np.all(x > 0) else None
    rate = is_rate(unit) and hmean is not None
    sd = float(np.std(x, ddof=1)) if n > 1 else float("nan")
    cv = 100.0 * sd / amean if n > 1 and amean != 0 else float("nan")
    ci = float(sps.t.ppf(0.975, n - 1) * sd / math.sqrt(n)) if n > 1 else float("nan")
    return Summary(n, float(np.min(x)), amean, hmean, hmean if rate else amean,
                   "Hmean" if rate else "Amean", sd, cv, float(np.max(x)), ci)


def pct_change(base: float, new: float, better: str) -> float:
    """% change of *new* vs *base*, positive = better."""
    if base is None or new is None or not np.isfinite(base) or not np.isfinite(new) or base == 0:
        return float("nan")
    raw = (new - base) / abs(base) * 100.0
    return raw if better == "higher" else -raw


def _center(x: np.ndarray, kind: str, axis: int = -1) -> np.ndarray:
    if kind == "Hmean":
        return sps.hmean(x, axis=axis)
    return np.mean(x, axis=axis)


@dataclass
class Comparison:
    workload: str
    metric: str
    unit: str
    better: str
    variant: str
    baseline: str
    n_base: int
    n_new: int
    central_kind: str
    base_value: float
    new_value: float
    pct: float                   # positive = better
    ci_lo: float
    ci_hi: float
    ci_method: str
    welch_p: float
    mw_p: float
    welch_p_holm: float = float("nan")
    mw_p_holm: float = float("nan")
    significant: bool = False
    mw_significant: bool = False
    note: str = ""

    @property
    def ci_halfwidth(self) -> float:
        return (self.ci_hi - self.ci_lo) / 2.0


def compare(base: Iterable[float], new: Iterable[float], unit: str, better: str,
            seed: int = 1, **ident: Any) -> Comparison:
    b = np.asarray(list(base), dtype=float)
    v = np.asarray(list(new), dtype=float)
    kind = "Hmean" if is_rate(unit) and b.size and v.size and np.all(b > 0) and np.all(v > 0) \
        else "Amean"
    bc = float(_center(b, kind)) if b.size else float("nan")
    vc = float(_center(v, kind)) if v.size else float("nan")
    pct = pct_change(bc, vc, better)
    nan = float("nan")
    welch_p = mw_p = lo = hi = nan
    method = "none"
    notes = []
    if b.size >= 2 and v.size >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            welch_p = float(sps.ttest_ind(b, v, equal_var=False).pvalue)
            try:
                mw_p = float(sps.mannwhitneyu(b, v, alternative="two-sided").pvalue)
            except ValueError:
                mw_p = nan
        if not np.isfinite(welch_p):
            notes.append("Welch p undefined (zero variance)")
            if np.all(b == b[0]) and np.all(v == v[0]):
                welch_p = 1.0 if b[0] == v[0] else 0.0

        def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
            xc, yc = _center(x, kind, axis), _center(y, kind, axis)
            raw = (yc - xc) / np.abs(xc) * 100.0
            return raw if better == "higher" else -raw

        if np.isfinite(pct):
            for m in ("BCa", "percentile"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        res = sps.bootstrap((b, v), stat, vectorized=True, paired=False,
                                            n_resamples=N_RESAMPLES, confidence_level=0.95,
                                            method=m, random_state=np.random.default_rng(seed))
                        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
                    except (ValueError, FloatingPointError, ZeroDivisionError):
                        lo = hi = nan
                if np.isfinite(lo) and np.isfinite(hi):
                    method = m
                    break
            if method == "none" and np.all(b == b[0]) and np.all(v == v[0]):
                lo = hi = pct
                method = "degenerate"
    else:
        notes.append("fewer than 2 repetitions: no test")
    return Comparison(unit=unit, better=better, n_base=int(b.size), n_new=int(v.size),
                      central_kind=kind, base_value=bc, new_value=vc, pct=pct, ci_lo=lo,
                      ci_hi=hi, ci_method=method, welch_p=welch_p, mw_p=mw_p,
                      note="; ".join(notes), **ident)


def holm(pvals: list[float]) -> list[float]:
    """Holm-adjust the finite p-values; NaN stays NaN."""
    idx = [i for i, p in enumerate(pvals) if p is not None and np.isfinite(p)]
    out = [float("nan")] * len(pvals)
    if idx:
        adj = multipletests([pvals[i] for i in idx], alpha=ALPHA, method="holm")[1]
        for i, a in zip(idx, adj):
            out[i] = float(a)
    return out


def apply_significance(comps: list[Comparison]) -> None:
    wh = holm([c.welch_p for c in comps])
    mh = holm([c.mw_p for c in comps])
    for c, w, m in zip(comps, wh, mh):
        c.welch_p_holm, c.mw_p_holm = w, m
        ci_excl = np.isfinite(c.ci_lo) and np.isfinite(c.ci_hi) and (c.ci_lo > 0 or c.ci_hi < 0)
        c.significant = bool(ci_excl and np.isfinite(w) and w < ALPHA)
        c.mw_significant = bool(np.isfinite(m) and m < ALPHA)


@dataclass
class MetricData:
    workload: str
    metric: str
    unit: str
    better: str
    source: str                                  # "hyperfine" or "harness"
    values: dict[str, list[float]] = field(default_factory=dict)


def metric_samples(camp: Campaign) -> dict[tuple[str, str], MetricData]:
    """(workload, metric) -> per-variant values of the included runs of ok blocks."""
    out: dict[tuple[str, str], MetricData] = {}
    for r in camp.ok:
        wl = r["workload"]
        for run in r["runs"]:
            if not run["included"]:
                continue
            items: list[tuple[str, float | None, str, str, str]] = [
                (WALL, run["wall_s"], "s", "lower", "hyperfine")]
            items += [(name, m["value"], m["unit"], m["better"], "harness")
                      for name, m in run["metrics"].items()]
            for name, value, unit, better, source in items:
                if value is None:
                    continue
                md = out.setdefault((wl, name), MetricData(wl, name, unit, better, source))
                md.values.setdefault(r["variant"], []).append(float(value))
    # wall_s first, then harness metrics by name
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1] != WALL, kv[0][1])))


@dataclass
class Analysis:
    baseline: str
    variants: list[str]
    workloads: list[str]
    metrics: dict[tuple[str, str], MetricData]
    summaries: dict[tuple[str, str, str], Summary]
    comparisons: list[Comparison]
    seed: int

    def comparison(self, workload: str, metric: str, variant: str) -> Comparison | None:
        for c in self.comparisons:
            if (c.workload, c.metric, c.variant) == (workload, metric, variant):
                return c
        return None

    def verdict(self, workload: str) -> list[str]:
        sig = [c for c in self.comparisons if c.workload == workload and c.significant]
        if not sig:
            return ["no significant difference"]
        return [f"{c.variant} {c.pct:+.1f} % \u00b1 {c.ci_halfwidth:.1f} % ({c.metric})"
                for c in sig]

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline, "variants": self.variants, "seed": self.seed,
            "method": __doc__.strip(),
            "summaries": [dict(workload=k[0], metric=k[1], variant=k[2], **_clean(asdict(s)))
                          for k, s in self.summaries.items()],
            "comparisons": [_clean(asdict(c)) for c in self.comparisons],
        }


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def analyse(camp: Campaign, seed: int | None = None) -> Analysis:
    variants = camp.variants()
    baseline = variants[0] if variants else ""
    if seed is None:
        seeds = [r["campaign"].get("seed") for r in camp.results
                 if isinstance(r["campaign"].get("seed"), int)]
        seed = seeds[0] if seeds else 1
    metrics = metric_samples(camp)
    summaries: dict[tuple[str, str, str], Summary] = {}
    comps: list[Comparison] = []
    for (wl, name), md in metrics.items():
        for v in variants:
            if v in md.values:
                summaries[(wl, name, v)] = summarise(md.values[v], md.unit)
        base = md.values.get(baseline)
        if not base:
            continue
        for v in variants[1:]:
            if v in md.values:
                comps.append(compare(base, md.values[v], md.unit, md.better, seed=seed,
                                     workload=wl, metric=name, variant=v, baseline=baseline))
    apply_significance(comps)
    return Analysis(baseline, variants, camp.workloads(), metrics, summaries, comps, seed)


# ---------------------------------------------------------------- perf counters

TLB_EVENTS = ("dTLB-loads", "dTLB-load-misses", "iTLB-loads", "iTLB-load-misses")


def norm_event(name: str) -> str:
    """cpu_core/dTLB-loads/u -> dTLB-loads; dTLB-loads:u -> dTLB-loads."""
    m = re.match(r"^[^/]+/([^/]+)/[a-zA-Z]*$", name)
    if m:
        name = m.group(1)
    return name.split(":")[0]


@dataclass
class PerfCell:
    mean: float | None       # None: no supported sample ("n/a (no PMU)")
    n: int
    unit: str


def perf_summary(camp: Campaign) -> dict[str, dict[str, dict[str, PerfCell]]]:
    """workload -> variant -> event -> mean over the included runs (supported only).

    Adds "dTLB-miss-rate" / "iTLB-miss-rate" (percent, sum(misses)/sum(loads)).
    """
    acc: dict[str, dict[str, dict[str, list[float]]]] = {}
    units: dict[str, str] = {}
    seen: dict[str, dict[str, set[str]]] = {}
    pairs: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {}
    for r in camp.ok:
        wl, var = r["workload"], r["variant"]
        for run in r["runs"]:
            if not run["included"]:
                continue
            ev = {norm_event(k): p for k, p in run["perf"].items()}
            for name, p in ev.items():
                seen.setdefault(wl, {}).setdefault(var, set()).add(name)
                units.setdefault(name, p["unit"])
                if p["supported"] and p["value"] is not None:
                    acc.setdefault(wl, {}).setdefault(var, {}).setdefault(name, []).append(
                        float(p["value"]))
            for kind in ("dTLB", "iTLB"):
                lo, mi = ev.get(f"{kind}-loads"), ev.get(f"{kind}-load-misses")
                if lo and mi and lo["supported"] and mi["supported"] and lo["value"] \
                        and mi["value"] is not None:
                    pairs.setdefault(wl, {}).setdefault(var, {}).setdefault(kind, []).append(
                        (float(lo["value"]), float(mi["value"])))
    out: dict[str, dict[str, dict[str, PerfCell]]] = {}
    for wl, per_var in seen.items():
        for var, names in per_var.items():
            cells = out.setdefault(wl, {}).setdefault(var, {})
            for name in sorted(names | set(TLB_EVENTS)):
                vals = acc.get(wl, {}).get(var, {}).get(name, [])
                cells[name] = PerfCell(float(np.mean(vals)) if vals else None, len(vals),
                                       units.get(name, ""))
            for kind in ("dTLB", "iTLB"):
                pr = pairs.get(wl, {}).get(var, {}).get(kind, [])
                loads = sum(p[0] for p in pr)
                rate = 100.0 * sum(p[1] for p in pr) / loads if pr and loads else None
                cells[f"{kind}-miss-rate"] = PerfCell(rate, len(pr), "%")
    return out
