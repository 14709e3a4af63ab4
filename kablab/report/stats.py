"""Statistics of a campaign: the boot is the unit.

Values. Every boot gives one value per (kernel, workload, metric): the
geometric mean of the runs it keeps (the mean of their log values). A run more
than 5 robust SDs from its boot's median is set aside first (kablab.report.robust:
a preempted run no longer moves its boot) and listed in the report. Because
GM(1/x) = 1/GM(x), a rate and its time give the same answer, so one statistic
serves both. A boot is a result's `boot` field when present, else its
`block` (one boot per kernel and block); the round is the `block`: in each
round every kernel boots once (randomised complete block design).

Model. For each kernel against the baseline, on the two kernels' per-boot log
values only: OLS `log(value) ~ kernel + round (+ host)` (statsmodels). The
round term is used when at least 3 rounds hold boots of both kernels (then it
is the paired-by-round test); with fewer, the pooled-variance two-sample test
`log(value) ~ kernel`. The host term is added when it can be estimated beside
the others. The estimate exp(b_kernel) is the ratio of geometric means; the %
change is 100 * (ratio - 1), negated for lower-is-better metrics, so positive
= better. Metrics with a value <= 0 use per-boot arithmetic means and the
difference divided by the baseline mean.

Family. One family per kernel against the baseline, so a kernel's verdicts do
not depend on which other kernels ran. Each workload has one primary metric
(the result's `primary_metric`, else the first metric the harness prints),
which carries the headline verdict; the primary metrics of a kernel are one
Benjamini-Hochberg family (q = 0.05) and its secondary metrics another.
Derived duplicates (a metric that is exactly c * other^(+-1) in every run,
e.g. ns_per_op = 1e9 / ops_per_s) and the runner's wrapper time `wall_s`
(hyperfine; the harness times itself) are not tested.

Decision. The interval shown is the one that decides: the confidence interval
at the false-coverage-rate adjusted level 1 - max(R, 1) * q / m of its family
(m tests, R of them rejected by BH; Benjamini & Yekutieli 2005), which excludes
0 exactly when BH rejects. A change is flagged when that interval excludes 0;
the noise is in the interval, there is no noise floor. A practical threshold
(`--min-effect PCT`, none by default) is the user's: with it, a change must
also exceed it, and the report shows it as the user's threshold. Fewer than 2
boots of either kernel, no baseline value, all blocks failed, zero variance, a
derived or wrapper metric: "not tested: <why>", significant = null. The boots
shown with an estimate are the ones it used: with the round term, the boots of
the rounds both kernels have (a boot whose partner was lost tells nothing about
the difference, and is named as unpaired).

Boots. Outlier boots (a boot slow or fast on the workloads as a whole, or on
one workload; kablab.report.robust) are named with their evidence, and every verdict
they touch is given again without them, beside the verdict of all boots. When
a kernel is flagged on 3 or more primary metrics whose per-round differences
move together across workloads (a shared boot offset: one boot slow everywhere
makes every workload look changed), the report says so, with the effective
number of independent results and the verdicts without the boot that moves
them most. Rounds whose boots did not run together (a boot re-run after later
rounds, a sequential order) are warned about: the round term cannot remove
drift between them.

Power. Per metric the noise of one boot's value, all kernels pooled with
kernel and round removed (kablab.report.power.boot_noise; set-aside runs and outlier
boots left out), and the boots per kernel needed to flag a 1 % and a 3 % change
with 80 % power when it is the one real change among the m primary metrics
(level q / m), sized on the upper 80 % confidence bound of that noise, with the
range its 80 % interval gives; each tested comparison gives the change it could
have missed (minimum detectable effect at 80 % power at its own level).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import statsmodels.api as sm
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from kablab.report import robust
from kablab.results.load import Campaign
from kablab.report.power import POWER, VarComp, mde, to_pct

METHOD_NOTE = (
    "Each boot is one sample (the geometric mean of its runs, a run more than 5 robust SDs "
    "from its boot's median set aside and listed); a kernel is compared with "
    "the baseline by OLS on log per-boot values, log(value) ~ kernel + round (+ host) "
    "(pooled two-sample test with fewer than 3 paired rounds), with one Benjamini-Hochberg "
    "family per kernel for the primary metric of each workload and one for its secondary "
    "metrics, and [lo, hi] is that family's FCR-adjusted interval of the % change (positive "
    "= better). A change is flagged when [lo, hi] excludes 0 (and exceeds the practical "
    "threshold, when one is set); the boots shown are the ones the estimate used. Outlier "
    "boots are named and the verdicts they touch given again without them. Fewer than "
    "2 boots per kernel, a missing baseline, failed blocks, zero variance and derived or "
    "wrapper metrics are \"not tested\".")
ALPHA = 0.05            # q of the Benjamini-Hochberg families
WALL = "wall_s"
MIN_BOOTS = 2
MIN_ROUNDS_PAIRED = 3   # rounds holding both kernels before the round term is used
DERIVED_TOL = 1e-6      # log tolerance of an exact c * x^(+-1) relation


def is_rate(unit: str) -> bool:
    return unit.strip().endswith("/s")


def pct_change(base: float, new: float, better: str) -> float:
    """% change of *new* vs *base*, positive = better."""
    if base is None or new is None or not np.isfinite(base) or not np.isfinite(new) or base == 0:
        return float("nan")
    raw = (new - base) / abs(base) * 100.0
    return raw if better == "higher" else -raw


# ------------------------------------------------------------------ data

@dataclass
class BootValues:
    variant: str
    boot: str
    round: int
    host: str | None
    runs: list[float] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)    # each run's index in its result
    aside: list[int] = field(default_factory=list)      # positions in runs set aside (kablab.report.robust)

    @property
    def kept(self) -> list[float]:
        return [x for i, x in enumerate(self.runs) if i not in self.aside]

    def value(self, log: bool) -> float:
        """The boot's value: mean (of logs) of the runs it keeps."""
        x = np.asarray(self.kept, dtype=float)
        return float(np.mean(np.log(x))) if log else float(np.mean(x))


@dataclass
class MetricData:
    workload: str
    metric: str
    unit: str
    better: str
    source: str                                  # "hyperfine" or "harness"
    role: str = "secondary"                      # primary | secondary | derived | wrapper
    derived_from: str | None = None
    boots: dict[str, list[BootValues]] = field(default_factory=dict)
    aside: list[robust.RunAside] | None = None   # None until screen() ran

    def screen(self) -> list[robust.RunAside]:
        """Set aside the outlying runs of every boot, all kernels pooled (once)."""
        if self.aside is None:
            self.aside = robust.screen_runs([b for bs in self.boots.values() for b in bs],
                                            self.workload, self.metric)
        return self.aside

    @property
    def primary(self) -> bool:
        return self.role == "primary"

    @property
    def tested(self) -> bool:
        return self.role in ("primary", "secondary")

    @property
    def values(self) -> dict[str, list[float]]:
        """variant -> all included run values (descriptive only)."""
        return {v: [x for b in bs for x in b.runs] for v, bs in self.boots.items()}


def boot_id(r: dict[str, Any]) -> str:
    """The boot a result was measured in: its `boot` field, else its block."""
    b = r.get("boot")
    if b is None:
        return f"block {r['block']}"
    if isinstance(b, dict):
        b = b.get("id", json.dumps(b, sort_keys=True))
    return f"boot {b}"


def _ordered(results: list[dict[str, Any]], variants: list[str]) -> list[dict[str, Any]]:
    rank = {v: i for i, v in enumerate(variants)}
    return sorted(results, key=lambda r: (rank.get(r["variant"], len(rank)), r["variant"],
                                          r["block"], r.get("_file", "")))


def primary_metrics(camp: Campaign) -> dict[str, dict[str, str]]:
    """workload -> {"metric", "source"}: the result's `primary_metric`
    ("declared"), else the first metric of the harness ("first harness metric",
    the baseline's results first). Never wall_s."""
    variants = camp.variants()
    out: dict[str, dict[str, str]] = {}
    for r in _ordered(camp.results, variants):
        pm = r.get("primary_metric")
        if isinstance(pm, str) and pm and r["workload"] not in out:
            out[r["workload"]] = {"metric": pm, "source": "declared"}
    for r in _ordered(camp.ok, variants):
        if r["workload"] in out:
            continue
        for run in r["runs"]:
            names = [n for n in run["metrics"] if n != WALL]
            if run["included"] and names:
                out[r["workload"]] = {"metric": names[0], "source": "first harness metric"}
                break
    return out


def _exactly_related(x: np.ndarray, y: np.ndarray) -> bool:
    """y == c * x^(+-1) in every run (within printing precision)."""
    if x.size < 3 or np.any(x <= 0) or np.any(y <= 0):
        return False
    lx, ly = np.log(x), np.log(y)
    if np.ptp(lx) < 1e3 * DERIVED_TOL:
        return False
    return any(np.ptp(ly - s * lx) <= DERIVED_TOL for s in (1.0, -1.0))


def metric_data(camp: Campaign, baseline: str | None = None) -> dict[tuple[str, str], MetricData]:
    """(workload, metric) -> per-variant per-boot run values of the included runs
    of ok blocks, with each metric's role. Per workload: the primary metric
    first, then the harness's order, wall_s last."""
    variants = camp.variants()
    baseline = baseline if baseline is not None else (variants[0] if variants else "")
    prim = primary_metrics(camp)
    out: dict[tuple[str, str], MetricData] = {}
    slots: dict[tuple[str, str, str, str], BootValues] = {}
    order: dict[str, list[str]] = {}
    runs: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for r in _ordered(camp.ok, variants):
        wl, v, bid = r["workload"], r["variant"], boot_id(r)
        for run in r["runs"]:
            if not run["included"]:
                continue
            items: list[tuple[str, float | None, str, str, str]] = [
                (name, m["value"], m["unit"], m["better"], "harness")
                for name, m in run["metrics"].items() if name != WALL]
            items.append((WALL, run["wall_s"], "s", "lower", "hyperfine"))
            seen: dict[str, float] = {}
            for name, value, unit, better, source in items:
                if value is None or not math.isfinite(value):
                    continue
                md = out.get((wl, name))
                if md is None:
                    md = out[(wl, name)] = MetricData(wl, name, unit, better, source)
                    order.setdefault(wl, []).append(name)
                slot = slots.get((wl, name, v, bid))
                if slot is None:
                    slot = slots[(wl, name, v, bid)] = BootValues(v, bid, r["block"],
                                                                  r["host"].get("name"))
                    md.boots.setdefault(v, []).append(slot)
                slot.runs.append(float(value))
                slot.run_ids.append(int(run["index"]))
                seen[name] = float(value)
            runs.setdefault(wl, []).append((v, seen))
    result: dict[tuple[str, str], MetricData] = {}
    for wl in sorted(order):
        pm = prim.get(wl, {}).get("metric")
        names = sorted(order[wl], key=lambda n: (n != pm, n == WALL, order[wl].index(n)))
        kept: list[str] = []
        for name in names:
            md = out[(wl, name)]
            if name == WALL:
                md.role = "wrapper"
            elif name == pm:
                md.role = "primary"
            for src in (kept if md.role != "wrapper" else []):
                pairs = [(d[src], d[name]) for v, d in runs[wl]
                         if v == baseline and src in d and name in d]
                if len(pairs) < 3:
                    pairs = [(d[src], d[name]) for v, d in runs[wl] if src in d and name in d]
                if pairs and _exactly_related(np.array([p[0] for p in pairs]),
                                              np.array([p[1] for p in pairs])):
                    md.role, md.derived_from = "derived", src
                    break
            if md.role in ("primary", "secondary"):
                kept.append(name)
            md.screen()
            result[(wl, name)] = md
    return result


# --------------------------------------------------------------- summaries

@dataclass
class Summary:
    """Per (workload, metric, variant). Min/Max/Amean/Stddev/CoeffVar are over all
    included runs (descriptive only); `central` is the tested quantity: the
    geometric mean of the per-boot values (each the geometric mean of the runs
    the boot keeps; Amean of per-boot means when a value is <= 0); `cov_boot` is
    the CoV of the per-boot values; `n_aside` the runs set aside."""
    n: int                  # runs
    n_boots: int
    min: float
    max: float
    amean: float
    stddev: float
    coeffvar: float
    central: float
    central_kind: str       # "Gmean" or "Amean"
    cov_boot: float
    n_aside: int = 0


def _as_boots(runs_by_boot: Sequence[Sequence[float] | BootValues]) -> list[BootValues]:
    """BootValues as given (screened as their metric was); plain run lists are
    screened among themselves (kablab.report.robust)."""
    out: list[BootValues] = []
    plain: list[BootValues] = []
    for i, b in enumerate(runs_by_boot):
        if isinstance(b, BootValues):
            out.append(b)
        else:
            bv = BootValues("", f"boot {i}", i, None, [float(x) for x in b])
            plain.append(bv)
            out.append(bv)
    if plain:
        robust.screen_runs(plain)
    return [b for b in out if b.runs]


def summarise(runs_by_boot: Sequence[Sequence[float] | BootValues],
              log: bool | None = None) -> Summary:
    """Summary of one kernel's boots: BootValues, or each boot's run values."""
    boots = _as_boots(runs_by_boot)
    nan = float("nan")
    if not boots:
        return Summary(0, 0, nan, nan, nan, nan, nan, nan, "Gmean", nan)
    x = np.concatenate([np.asarray(b.runs, dtype=float) for b in boots])
    n = int(x.size)
    if log is None:
        log = bool(np.all(x > 0))
    amean = float(np.mean(x))
    sd = float(np.std(x, ddof=1)) if n > 1 else nan
    cv = 100.0 * sd / abs(amean) if n > 1 and amean != 0 else nan
    bv = np.array([b.value(log) for b in boots])
    if log:
        central = float(np.exp(np.mean(bv)))
        cov_boot = to_pct(float(np.std(bv, ddof=1))) if bv.size > 1 else nan
    else:
        central = float(np.mean(bv))
        cov_boot = (100.0 * float(np.std(bv, ddof=1)) / abs(central)
                    if bv.size > 1 and central != 0 else nan)
    return Summary(n, len(boots), float(np.min(x)), float(np.max(x)), amean, sd, cv, central,
                   "Gmean" if log else "Amean", cov_boot, sum(len(b.aside) for b in boots))


# ------------------------------------------------------------- comparisons

@dataclass
class Comparison:
    workload: str
    metric: str
    unit: str
    better: str
    variant: str
    baseline: str
    primary: bool
    role: str                       # primary | secondary | derived | wrapper
    tested: bool = False
    reason: str = ""                # why not tested / why not flagged / what was flagged
    n_boots_base: int = 0
    n_boots_new: int = 0
    n_runs_base: int = 0
    n_runs_new: int = 0
    n_used_base: int = 0            # boots the estimate used (paired rounds, or all)
    n_used_new: int = 0
    unpaired: list[str] = field(default_factory=list)   # boots without a partner, not used
    base_value: float = float("nan")    # Gmean of the used boots' values (the tested quantity)
    new_value: float = float("nan")
    scale: str = ""                 # "log" or "raw"
    model: str = ""
    estimate: float = float("nan")  # kernel coefficient, model scale
    se: float = float("nan")
    df: float = float("nan")
    p: float = float("nan")
    q: float = float("nan")         # BH-adjusted p within the family
    family: str = ""                # e.g. "grouped: primary (4 tests)"
    family_size: int = 0
    level: float = float("nan")     # confidence level of [lo, hi]
    pct: float = float("nan")       # positive = better; null when not tested
    lo: float = float("nan")
    hi: float = float("nan")
    stat_significant: bool | None = None    # the interval excludes 0
    significant: bool | None = None         # flagged: interval excludes 0 (and > threshold)
    direction: str = ""             # "better" / "worse" when flagged
    min_effect_pct: float = 0.0     # the user's practical threshold (0: none)
    mde_pct: float = float("nan")   # change missed with 20 % chance at this level
    derived_from: str | None = None
    base_mean: float = float("nan")  # raw scale: baseline mean of per-boot means
    descriptive_pct: float = float("nan")   # ratio of the used boots' Gmeans, never tested

    @property
    def n_boots(self) -> int:
        return min(self.n_boots_base, self.n_boots_new)

    def boots_label(self, names: bool = False) -> str:
        """The boots behind the estimate, base/new, and how many it could not use
        (*names*: which)."""
        if not self.tested:
            return f"{self.n_boots_base}/{self.n_boots_new} boots"
        out = f"{self.n_used_base}/{self.n_used_new} boots"
        if self.unpaired:
            out += f", {len(self.unpaired)} unpaired"
            if names:
                out += f" (not used: {', '.join(self.unpaired)})"
        return out

    def interval(self) -> str:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return "n/a"
        return f"[{self.lo:+.2f}, {self.hi:+.2f}]"

    def decision(self) -> str:
        """One phrase for tables: flagged better/worse, no clear change, not tested."""
        if not self.tested:
            return f"not tested: {self.reason}"
        if self.significant:
            return self.direction
        return self.reason


def _to_pct(d: float, c: Comparison) -> float:
    if not math.isfinite(d):
        return float("nan")
    if c.scale == "log":
        raw = 100.0 * math.expm1(d)
    else:
        raw = 100.0 * d / abs(c.base_mean) if c.base_mean else float("nan")
    return raw if c.better == "higher" else -raw


def _dummies(labels: list[Any]) -> np.ndarray:
    levels = sorted(set(labels), key=str)
    return np.array([[1.0 if x == lev else 0.0 for lev in levels[1:]] for x in labels]) \
        .reshape(len(labels), len(levels) - 1)


def _rank(x: np.ndarray) -> int:
    return int(np.linalg.matrix_rank(x)) if x.size else 0


def fit_pair(base: list[BootValues], new: list[BootValues], log: bool
             ) -> tuple[dict[str, Any] | None, str]:
    """OLS of per-boot values on kernel (+ round) (+ host); (fit, model) or (None, why).
    With the round term only the boots of rounds both kernels have are fitted (a
    boot alone in its round is fitted exactly by its round and adds nothing);
    fit["used"] = (base boots, new boots) the estimate comes from."""
    shared = {b.round for b in base} & {b.round for b in new}
    if len(shared) >= MIN_ROUNDS_PAIRED:
        pb = [b for b in base if b.round in shared]
        pn = [b for b in new if b.round in shared]
        if len({b.round for b in pb + pn}) > 1:
            got = _fit(pb, pn, log, rounds=True)
            if got is not None:
                return got
    got = _fit(base, new, log, rounds=False)
    assert got is not None
    return got


def _fit(base: list[BootValues], new: list[BootValues], log: bool, rounds: bool
         ) -> tuple[dict[str, Any] | None, str] | None:
    """None when *rounds* and the round term leaves too little to estimate."""
    boots = base + new
    y = np.array([b.value(log) for b in boots])
    k = np.array([0.0] * len(base) + [1.0] * len(new))
    X = np.column_stack([np.ones(len(boots)), k])
    terms = ["kernel"]

    def usable(cand: np.ndarray) -> bool:
        r = _rank(cand)
        return r - _rank(np.delete(cand, 1, axis=1)) == 1 and len(y) - r >= 2
    if rounds:
        cand = np.column_stack([X, _dummies([b.round for b in boots])])
        if not usable(cand):
            return None
        X, terms = cand, terms + ["round"]
    hosts = [b.host or "" for b in boots]
    if len(set(hosts)) > 1:
        cand = np.column_stack([X, _dummies(hosts)])
        if _rank(cand) > _rank(X) and usable(cand):
            X, terms = cand, terms + ["host"]
    model = f"{'log(value)' if log else 'value'} ~ {' + '.join(terms)}"
    if not usable(X):
        if _rank(X) - _rank(np.delete(X, 1, axis=1)) != 1:
            return None, "kernel effect not estimable"
        return None, "too few boots for the model"
    res = sm.OLS(y, X).fit()
    scale2 = max(1.0, float(np.mean(y ** 2)))
    if res.ssr <= 1e-18 * scale2 * len(y):
        return None, "zero variance (per-boot values constant)"
    return {"estimate": float(res.params[1]), "se": float(res.bse[1]),
            "df": float(res.df_resid), "p": float(res.pvalues[1]),
            "used": (base, new)}, model


def compare_pair(md: MetricData, baseline: str, variant: str,
                 blocks: dict[tuple[str, str], tuple[int, int]],
                 min_effect_pct: float = 0.0) -> Comparison:
    """Everything up to the family adjustment (set by apply_families).
    *min_effect_pct*: the user's practical threshold (0: none); the runs are
    screened first (MetricData.screen)."""
    md.screen()
    c = Comparison(md.workload, md.metric, md.unit, md.better, variant, baseline,
                   md.primary, md.role, derived_from=md.derived_from,
                   min_effect_pct=min_effect_pct)
    base, new = md.boots.get(baseline, []), md.boots.get(variant, [])
    c.n_boots_base, c.n_boots_new = len(base), len(new)
    c.n_runs_base = sum(len(b.runs) for b in base)
    c.n_runs_new = sum(len(b.runs) for b in new)
    allv = [x for b in base + new for x in b.runs]
    log = bool(allv) and all(x > 0 for x in allv)
    c.scale = "log" if log else "raw"
    used_base, used_new = base, new
    if base:
        c.base_mean = float(np.mean([b.value(False) for b in base]))

    def failed(v: str) -> str | None:
        ok, bad = blocks.get((md.workload, v), (0, 0))
        return f"all {bad} block(s) of {v} failed" if ok == 0 and bad else None
    why = None
    if not base:
        why = failed(baseline) or f"no baseline value ({baseline} has no {md.metric})"
    elif not new:
        why = failed(variant) or f"no value for {variant}"
    elif md.role == "wrapper":
        why = "wrapper wall time (hyperfine), the harness times itself; see runner overhead"
    elif md.role == "derived":
        why = f"derived from {md.derived_from}"
    elif len(base) < MIN_BOOTS or len(new) < MIN_BOOTS:
        if len(base) == len(new) == 1:
            why = "1 boot per kernel"
        else:
            few = [f"{len(x)} boot(s) of {v}" for v, x in ((baseline, base), (variant, new))
                   if len(x) < MIN_BOOTS]
            why = f"{', '.join(few)} (need {MIN_BOOTS} per kernel)"
    elif not log and c.base_mean == 0:
        why = "baseline mean is 0: no % change"
    if why is None:
        fit, model = fit_pair(base, new, log)
        c.model = model if fit else ""
        if fit is None:
            why = model
        else:
            c.estimate, c.se, c.df, c.p = fit["estimate"], fit["se"], fit["df"], fit["p"]
            used_base, used_new = fit["used"]
            ids = {id(b) for b in used_base + used_new}
            c.unpaired = [f"{b.variant} {b.boot}" for b in base + new if id(b) not in ids]
            c.pct = _to_pct(c.estimate, c)
            c.tested = True
    c.n_used_base, c.n_used_new = len(used_base), len(used_new)
    if used_base:
        c.base_value = summarise(used_base, log).central
    if used_new:
        c.new_value = summarise(used_new, log).central
    if used_base and used_new:
        d = (math.log(c.new_value / c.base_value) if log
             else c.new_value - c.base_value)
        c.descriptive_pct = _to_pct(d, c)
    if why is not None:
        c.reason = why
    return c


def apply_families(comps: list[Comparison], q: float = ALPHA) -> None:
    """BH per (kernel, primary|secondary) family; the decisive interval at the
    FCR-adjusted level; the flag (interval excludes 0, and beyond the user's
    practical threshold when one is set)."""
    fams: dict[tuple[str, str], list[Comparison]] = {}
    for c in comps:
        if c.tested:
            fams.setdefault((c.variant, "primary" if c.primary else "secondary"), []).append(c)
    for (variant, kind), fam in fams.items():
        m = len(fam)
        reject, qv, _, _ = multipletests([c.p for c in fam], alpha=q, method="fdr_bh")
        r = int(np.sum(reject))
        alpha = max(r, 1) * q / m
        for c, qq in zip(fam, qv):
            c.q = float(qq)
            c.family, c.family_size = f"{variant}: {kind} ({m} test{'s' if m > 1 else ''})", m
            c.level = 1.0 - alpha
            c.pct = _to_pct(c.estimate, c)
            half = float(sps.t.isf(alpha / 2, c.df)) * c.se
            ends = sorted((_to_pct(c.estimate - half, c), _to_pct(c.estimate + half, c)))
            c.lo, c.hi = ends
            c.stat_significant = bool(c.lo > 0 or c.hi < 0)
            thr = c.min_effect_pct if finite_pos(c.min_effect_pct) else 0.0
            thr_m = (math.log1p(thr / 100.0) if c.scale == "log"
                     else thr / 100.0 * abs(c.base_mean))
            d = mde(c.se, c.df, alpha, thr_m, POWER)
            c.mde_pct = (100.0 * math.expm1(d) if c.scale == "log"
                         else 100.0 * d / abs(c.base_mean))
            c.significant = bool(c.stat_significant and abs(c.pct) > thr)
            if c.significant:
                c.direction = "better" if c.pct > 0 else "worse"
                c.reason = f"{c.direction}: interval excludes 0" + (
                    f" and |change| > your threshold {thr:.2f}%" if thr else "")
            elif c.stat_significant:
                c.reason = (f"below your threshold: |{c.pct:+.2f}%| <= {thr:.2f}% "
                            "(interval excludes 0)")
            else:
                c.reason = ("no clear change (interval includes 0; could miss "
                            f"\u00b1{c.mde_pct:.1f}%)")


def finite_pos(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


# ------------------------------------------------------------------ analysis

SHARED_MIN = 3          # flagged primaries of one kernel before the shared-offset check
SHARED_R = 0.5          # mean correlation of per-round differences that is "shared"
SHARED_ROUNDS = 4       # paired rounds the correlation needs


@dataclass
class SharedOffset:
    """A kernel flagged on several primary metrics whose per-round differences
    move together across workloads: boots, not workloads, carry the flags."""
    variant: str
    flagged: int            # primary metrics flagged
    of: int                 # primary metrics tested
    direction: str
    mean_r: float           # mean pairwise correlation of the per-round differences
    effective: float        # flagged / (1 + (flagged - 1) mean_r): independent results
    boot: robust.OutlierBoot    # the boot that moves them most
    still: int              # primary metrics still flagged without that boot

    def text(self) -> str:
        b = self.boot
        way = "slower" if b.slower_pct > 0 else "faster"
        return (f"{self.variant}: {self.flagged} of {self.of} primary metrics flagged "
                f"{self.direction}, but its per-round differences move together across "
                f"workloads (mean correlation {self.mean_r:.2f}): a shared boot offset, about "
                f"{self.effective:.1f} independent result(s), not {self.flagged}. The boot that "
                f"moves them most: {b.label} (round {b.round}), {abs(b.slower_pct):.1f}% {way} "
                f"than its kernel's median boot across workloads (speed index "
                f"{b.index:+.1f}); without it {self.still} of {self.of} are flagged.")


@dataclass
class Analysis:
    baseline: str
    variants: list[str]
    workloads: list[str]
    metrics: dict[tuple[str, str], MetricData]
    summaries: dict[tuple[str, str, str], Summary]
    comparisons: list[Comparison]
    seed: int
    noise: dict[tuple[str, str], VarComp] = field(default_factory=dict)
    boots_needed: dict[tuple[str, str], dict[str, int | None]] = field(default_factory=dict)
    primaries: dict[str, dict[str, str]] = field(default_factory=dict)
    overhead: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    plan_alpha: float = ALPHA           # level of the boots-needed figures
    boots_range: dict[tuple[str, str], dict[str, tuple[int | None, int | None]]] = \
        field(default_factory=dict)     # the boots needed at the ends of the noise's 80 % CI
    min_effect_pct: float = 0.0         # the user's practical threshold (0: none)
    runs_aside: list[robust.RunAside] = field(default_factory=list)   # tested metrics
    scores: dict[tuple[str, str], robust.BootScore] = field(default_factory=dict)
    outlier_boots: list[robust.OutlierBoot] = field(default_factory=list)
    without: dict[tuple[str, str, str], Comparison] = field(default_factory=dict)
    shared_offsets: list[SharedOffset] = field(default_factory=list)
    round_warnings: list[str] = field(default_factory=list)

    def comparison(self, workload: str, metric: str, variant: str) -> Comparison | None:
        for c in self.comparisons:
            if (c.workload, c.metric, c.variant) == (workload, metric, variant):
                return c
        return None

    def primary_metric(self, workload: str) -> str | None:
        return self.primaries.get(workload, {}).get("metric")

    def aside_per_boot(self) -> dict[tuple[str, str], int]:
        """(variant, boot) -> runs set aside (a run counts once however many of its
        workload's tested metrics set it aside)."""
        runs: dict[tuple[str, str], set[tuple[str, int]]] = {}
        for a in self.runs_aside:
            runs.setdefault((a.variant, a.boot), set()).add((a.workload, a.run))
        return {k: len(v) for k, v in runs.items()}

    def dropped_for(self, c: Comparison) -> list[robust.OutlierBoot]:
        """The outlier boots the verdict without them leaves out of *c*."""
        md = self.metrics.get((c.workload, c.metric))
        return [o for o in self.outlier_boots if md is not None
                and o.variant in (c.baseline, c.variant)
                and (o.whole or c.workload in o.workloads)
                and any(b.boot == o.boot for b in md.boots.get(o.variant, []))]

    def headline(self, workload: str, variant: str) -> tuple[str, str]:
        """(text, css class) of a kernel's verdict on a workload's primary metric."""
        pm = self.primary_metric(workload)
        if pm is None:
            return "not tested: no metric", ""
        c = self.comparison(workload, pm, variant)
        if c is None:
            if (workload, pm) not in self.metrics:
                return f"not tested: primary metric {pm} not in the results", ""
            return "not tested: no value", ""
        if not c.tested:
            return f"not tested: {c.reason} ({pm})", ""
        w = self.without.get((workload, pm, variant))
        tail = ""
        if w is not None and w.tested:
            tail = (f"; without {', '.join(o.label for o in self.dropped_for(c))}: "
                    f"{w.pct:+.2f}% {w.interval()} "
                    + (w.direction.upper() if w.significant else "no clear change"))
        if c.significant:
            return (f"{c.pct:+.2f}% {c.interval()} {c.direction.upper()} ({pm}){tail}",
                    f"sig-{c.direction}")
        if c.stat_significant:
            return (f"below your threshold: {c.pct:+.2f}% {c.interval()} "
                    f"(threshold {c.min_effect_pct:.2f}%, {pm}){tail}", "")
        return (f"no clear change: {c.pct:+.2f}% {c.interval()} ({pm}; could miss "
                f"\u00b1{c.mde_pct:.1f}%){tail}", "")

    def verdict(self, workload: str) -> list[str]:
        """One line per kernel (primary metric), then flagged secondary metrics."""
        if len(self.variants) < 2:
            return ["no comparison: only one kernel"]
        out = [f"{v} {self.headline(workload, v)[0]}" for v in self.variants[1:]]
        for c in self.comparisons:
            if c.workload == workload and not c.primary and c.significant:
                out.append(f"{c.variant} {c.pct:+.2f}% {c.interval()} {c.direction.upper()} "
                           f"({c.metric}, secondary)")
        return out

    def has_flag(self, workload: str) -> bool:
        return any(c.significant for c in self.comparisons if c.workload == workload)

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline, "variants": self.variants, "seed": self.seed,
            "method": __doc__.strip(), "alpha": ALPHA, "power": POWER,
            "boots_needed_alpha": self.plan_alpha, "min_effect_pct": self.min_effect_pct,
            "primary_metrics": self.primaries,
            "summaries": [dict(workload=k[0], metric=k[1], variant=k[2], **_clean(asdict(s)))
                          for k, s in self.summaries.items()],
            "comparisons": [dict(_clean(asdict(c)), n_boots=c.n_boots)
                            for c in self.comparisons],
            "without_outlier_boots": [
                dict(_clean(asdict(c)), n_boots=c.n_boots,
                     left_out=[o.label for o in self.dropped_for(c)])
                for c in self.without.values()],
            "runs_set_aside": [_clean(asdict(a)) for a in self.runs_aside],
            "outlier_boots": [dict(_clean(asdict(o)), evidence=o.evidence())
                              for o in self.outlier_boots],
            "shared_offsets": [dict(variant=s.variant, flagged=s.flagged, of=s.of,
                                    direction=s.direction, mean_r=s.mean_r,
                                    effective=s.effective, boot=s.boot.label,
                                    round=s.boot.round, still_flagged=s.still, text=s.text())
                               for s in self.shared_offsets],
            "round_warnings": self.round_warnings,
            "noise": [dict(workload=k[0], metric=k[1],
                           source="all kernels pooled, kernel and round removed",
                           role=self.metrics[k].role,
                           **_clean(dict(asdict(vc), cov_within_pct=vc.cov_within_pct,
                                         cov_between_pct=vc.cov_between_pct, ratio=vc.ratio)),
                           boots_needed=self.boots_needed.get(k, {}),
                           boots_needed_range={e: list(r) for e, r in
                                               self.boots_range.get(k, {}).items()})
                      for k, vc in self.noise.items()],
            "runner_overhead": self.overhead,
        }


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def runner_overhead(camp: Campaign) -> dict[str, dict[str, dict[str, float]]]:
    """workload -> variant -> median wrapper time (hyperfine wall_s - harness elapsed_s)."""
    acc: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in camp.ok:
        for run in r["runs"]:
            w, h = run.get("wall_s"), run.get("harness_elapsed_s")
            if run["included"] and w is not None and h is not None and w > 0:
                acc.setdefault(r["workload"], {}).setdefault(r["variant"], []).append((w, h))
    return {wl: {v: {"median_ms": float(np.median([1e3 * (w - h) for w, h in xs])),
                     "median_pct_of_wall": float(np.median([100 * (w - h) / w for w, h in xs])),
                     "runs": len(xs)}
                 for v, xs in per.items()} for wl, per in sorted(acc.items())}


def screen_boots(metrics: dict[tuple[str, str], MetricData]
                 ) -> tuple[list[robust.OutlierBoot], dict[tuple[str, str], robust.OutlierBoot]]:
    """Outlier boots of a campaign's primary metrics (kablab.report.robust), and the
    (variant, boot) -> OutlierBoot map the verdicts without them drop."""
    outliers = robust.outlier_boots(robust.boot_scores(
        [md for md in metrics.values() if md.role == "primary"]))
    drop: dict[tuple[str, str], robust.OutlierBoot] = {}
    for o in outliers:
        drop.setdefault((o.variant, o.boot), o)
    return outliers, drop


def compare_all(metrics: dict[tuple[str, str], MetricData], baseline: str, variants: list[str],
                blocks: dict[tuple[str, str], tuple[int, int]], min_effect_pct: float = 0.0,
                drop: dict[tuple[str, str], robust.OutlierBoot] | None = None
                ) -> list[Comparison]:
    """Every comparison of every metric with the baseline, families applied;
    without the boots in *drop* when given."""
    comps: list[Comparison] = []
    for (wl, name), md in metrics.items():
        base = md.boots.get(baseline, [])
        use = robust.drop_boots(md, drop) if drop else md
        for v in variants[1:]:
            if v in md.boots or (wl, v) in blocks or base:
                comps.append(compare_pair(use, baseline, v, blocks, min_effect_pct))
    apply_families(comps)
    return comps


def _round_diffs(md: MetricData, baseline: str, variant: str) -> dict[int, float]:
    """round -> the kernel's per-boot value minus the baseline's (+ = better)."""
    allv = [x for v in (baseline, variant) for b in md.boots.get(v, []) for x in b.kept]
    log = bool(allv) and all(x > 0 for x in allv)
    scale = 1.0 if log else abs(float(np.mean(allv))) or 1.0
    base = {b.round: b.value(log) for b in md.boots.get(baseline, []) if b.kept}
    new = {b.round: b.value(log) for b in md.boots.get(variant, []) if b.kept}
    sign = 1.0 if md.better == "higher" else -1.0
    return {r: sign * (new[r] - base[r]) / scale for r in base.keys() & new.keys()}


def shared_offsets(an: Analysis, blocks: dict[tuple[str, str], tuple[int, int]]
                   ) -> list[SharedOffset]:
    """The shared-boot-offset pattern per kernel (see SharedOffset)."""
    out = []
    for v in an.variants[1:]:
        prim = [c for c in an.comparisons if c.variant == v and c.primary and c.tested]
        flagged = [c for c in prim if c.significant]
        if len(flagged) < SHARED_MIN:
            continue
        ups = sum(c.direction == "better" for c in flagged)
        direction = "better" if ups * 2 >= len(flagged) else "worse"
        diffs = [_round_diffs(an.metrics[(c.workload, c.metric)], an.baseline, v)
                 for c in flagged]
        rounds = sorted(set.intersection(*[set(d) for d in diffs]))
        if len(rounds) < SHARED_ROUNDS:
            continue
        m = np.array([[d[r] for r in rounds] for d in diffs])
        sd = m.std(axis=1, ddof=1)
        if np.any(sd <= 0):
            continue
        corr = np.corrcoef(m)
        k = len(flagged)
        mean_r = float((corr.sum() - k) / (k * (k - 1)))
        if mean_r < SHARED_R:
            continue
        sign = 1.0 if direction == "better" else -1.0
        push = np.median(sign * m / sd[:, None], axis=0)      # each round's push, in SDs
        r_top = rounds[int(np.argmax(push))]
        cands = []
        for kern, s_ in ((v, 1.0), (an.baseline, -1.0)):
            for (kv, boot), sc in an.scores.items():
                if kv == kern and sc.round == r_top and math.isfinite(sc.index):
                    cands.append((s_ * sign * sc.index, sc))
        if not cands:
            continue
        sc = max(cands, key=lambda t: t[0])[1]
        ob = robust.OutlierBoot(sc.variant, sc.boot, sc.round, True, sorted(sc.z), sc.index,
                                sc.median_slower,
                                sum(abs(z) > robust.BOOT_Z for z in sc.z.values()), len(sc.z))
        prim_md = {k_: md for k_, md in an.metrics.items() if md.role == "primary"}
        again = compare_all(prim_md, an.baseline, [an.baseline, v], blocks, an.min_effect_pct,
                            {(sc.variant, sc.boot): ob})
        still = sum(bool(c.significant) for c in again if c.tested)
        out.append(SharedOffset(v, k, len(prim), direction, mean_r,
                                k / (1.0 + (k - 1) * mean_r), ob, still))
    return out


def analyse(camp: Campaign, seed: int | None = None, min_effect_pct: float = 0.0) -> Analysis:
    """The analysis of a loaded campaign. *min_effect_pct*: the user's practical
    threshold (a flagged change must also exceed it; 0: none)."""
    from kablab.report.power import boots_for, boots_range, metric_noise, planning_alpha
    from kablab.report.rounds import round_warnings
    if not (math.isfinite(min_effect_pct) and min_effect_pct >= 0):
        raise ValueError(f"min_effect_pct must be a number >= 0, got {min_effect_pct}")
    variants = camp.variants()
    baseline = variants[0] if variants else ""
    if seed is None:
        seeds = [r["campaign"].get("seed") for r in camp.results
                 if isinstance(r["campaign"].get("seed"), int)]
        seed = seeds[0] if seeds else 1
    metrics = metric_data(camp, baseline)
    blocks: dict[tuple[str, str], tuple[int, int]] = {}
    for r in camp.results:
        ok, bad = blocks.get((r["workload"], r["variant"]), (0, 0))
        blocks[(r["workload"], r["variant"])] = (ok + (r["status"] == "ok"),
                                                 bad + (r["status"] != "ok"))
    summaries: dict[tuple[str, str, str], Summary] = {}
    noise: dict[tuple[str, str], VarComp] = {}
    needed: dict[tuple[str, str], dict[str, int | None]] = {}
    ranges: dict[tuple[str, str], dict[str, tuple[int | None, int | None]]] = {}
    plan_alpha = planning_alpha(sum(md.role == "primary" for md in metrics.values()))
    outliers, drop = screen_boots(metrics)
    for (wl, name), md in metrics.items():
        allv = [x for bs in md.boots.values() for b in bs for x in b.runs]
        log = bool(allv) and all(x > 0 for x in allv)
        for v in variants:
            if md.boots.get(v):
                summaries[(wl, name, v)] = summarise(md.boots[v], log)
        if md.boots.get(baseline):
            vc = noise[(wl, name)] = metric_noise(md, variants, drop)
            if md.tested:
                needed[(wl, name)] = {f"{e:g}": boots_for(vc, e, alpha=plan_alpha)
                                      for e in (1.0, 3.0)}
                ranges[(wl, name)] = {f"{e:g}": boots_range(vc, e, alpha=plan_alpha)
                                      for e in (1.0, 3.0)}
    comps = compare_all(metrics, baseline, variants, blocks, min_effect_pct)
    an = Analysis(baseline, variants, camp.workloads(), metrics, summaries, comps, seed,
                  noise, needed, primary_metrics(camp), runner_overhead(camp), plan_alpha,
                  ranges, min_effect_pct)
    an.runs_aside = [a for md in metrics.values() if md.tested for a in md.screen()]
    an.scores = robust.boot_scores([md for md in metrics.values() if md.role == "primary"])
    an.outlier_boots = outliers
    if drop:
        again = compare_all(metrics, baseline, variants, blocks, min_effect_pct, drop)
        for c, w in zip(comps, again):
            if c.tested and an.dropped_for(c):
                an.without[(c.workload, c.metric, c.variant)] = w
    an.shared_offsets = shared_offsets(an, blocks)
    an.round_warnings = round_warnings(camp.results, boot_id)
    return an


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
