"""Runs and boots that do not belong with the others: the screen in front of
the verdicts (kablab.report.stats). Nothing here removes a value silently: every run
set aside and every outlier boot is listed in the report, with its evidence.

Scale. Within groups (the runs of each boot, or the boots of each kernel) the
robust SD is the median absolute difference over every pair of values in the
same group, divided by sqrt(2) * Phi^-1(3/4): a pooled Shamos estimator,
consistent for the SD of normal values, in which one wild value spoils only
the pairs it is in. Values are logs (values / |mean| when one is <= 0); the
scale is never below MIN_SCALE (0.1 %), so a metric that repeats exactly does
not turn a rounding step into an outlier.

Few values make the scale itself uncertain and the tails of one z heavy (with
3 boots per kernel a robust z beyond 12 comes 1 time in 10,000 from normal
noise), so a threshold on one z is widened by widen(df): the ratio of the t
quantile with the scale's degrees of freedom (values - groups) to the normal
one, at a two-sided 1e-5 (3.1 at 3 boots of 3 kernels, 1.2 at 10).

Runs. A run more than RUN_Z robust run-to-run SDs (pooled over every boot of
the metric, all kernels) from its boot's median is set aside: at most
(n - 1) // 2 of a boot's n runs (the farthest), none when a boot has fewer
than 3. The boot's value is the geometric mean of the runs it keeps, so a
preempted run (3x slow) no longer moves its boot by 25 %.

Boots. Per primary metric, a boot's value minus the median boot of its kernel,
in robust boot-to-boot SDs pooled over the kernels: z, positive = better
(faster). A boot's speed index is the median z over the workloads' primary
metrics (at least MIN_WORKLOADS): an *outlier boot* when |index| > BOOT_Z
(slow or fast on the workloads as a whole; a median of several workloads has
no heavy tails: over 720 simulated boots of 3 per kernel whose noise all
workloads share, |index| never passed 4.2); one workload of a boot is an
*outlier block* when its |z| > BLOCK_Z * widen(df), once the scale has
MIN_DF_BLOCK degrees of freedom (3 boots of 3 kernels give 9 pairs, and two of
them close by chance make any third boot look wild). Kernels with fewer than
3 boots of a metric are not screened (two boots cannot say which one is odd). The verdicts stay those of all boots;
kablab.report.stats adds the verdicts without the outliers beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from scipy import stats as sps

if TYPE_CHECKING:
    from kablab.report.stats import BootValues, MetricData

RUN_Z = 5.0
BOOT_Z = 6.0
BLOCK_Z = 8.0
MIN_WORKLOADS = 3       # workloads a speed index needs
MIN_DF_BLOCK = 8        # degrees of freedom of the boot scale before one workload is screened
MIN_SCALE = 1e-3
MIN_RUNS = 3
MIN_BOOTS = 3
_SHAMOS = math.sqrt(2.0) * float(sps.norm.ppf(0.75))
TAIL = 1e-5


def widen(df: int) -> float:
    """How much a z threshold grows when its scale has *df* degrees of freedom."""
    if df < 1:
        return float("inf")
    return float(sps.t.isf(TAIL / 2, df) / sps.norm.isf(TAIL / 2))


def transform(values: Sequence[float], log: bool, mean_abs: float = 1.0) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return np.log(x) if log else x / (mean_abs or 1.0)


def pairwise_scale(groups: Sequence[np.ndarray]) -> float:
    """Robust SD from the pairwise differences within each group (module doc);
    NaN when no group has two values."""
    diffs = [np.abs(g[:, None] - g[None, :])[np.triu_indices(g.size, 1)]
             for g in groups if g.size >= 2]
    if not diffs:
        return float("nan")
    return float(np.median(np.concatenate(diffs))) / _SHAMOS


def _scale_of(metric_boots: Sequence["BootValues"]) -> tuple[bool, float]:
    allv = [x for b in metric_boots for x in b.runs]
    log = bool(allv) and all(x > 0 for x in allv)
    mean_abs = float(np.mean(np.abs(allv))) if allv else 1.0
    return log, mean_abs


@dataclass
class RunAside:
    """One run of one metric set aside (kablab.report.robust)."""
    variant: str
    boot: str
    round: int
    workload: str
    metric: str
    run: int                 # the run's index in its result
    value: float
    boot_median: float
    z: float                 # robust run-to-run SDs from the boot's median


def screen_runs(boots: Sequence["BootValues"], workload: str = "", metric: str = ""
                ) -> list[RunAside]:
    """Set aside the outlying runs of these boots (one metric, any kernels): sets
    each boot's `aside`; returns what was set aside."""
    log, mean_abs = _scale_of(boots)
    xs = [transform(b.runs, log, mean_abs) for b in boots]
    s = pairwise_scale(xs)
    scale = max(s, MIN_SCALE) if math.isfinite(s) else MIN_SCALE
    limit = RUN_Z * widen(sum(x.size for x in xs) - len(xs))
    out: list[RunAside] = []
    for b, x in zip(boots, xs):
        b.aside = []
        if x.size < MIN_RUNS:
            continue
        med = float(np.median(x))
        dev = np.abs(x - med) / scale
        far = [i for i in np.argsort(-dev, kind="stable") if dev[i] > limit]
        b.aside = sorted(int(i) for i in far[:(x.size - 1) // 2])
        for i in b.aside:
            out.append(RunAside(b.variant, b.boot, b.round, workload, metric,
                                b.run_ids[i] if i < len(b.run_ids) else i, b.runs[i],
                                float(np.median(b.runs)), float(dev[i])))
    return out


@dataclass
class BootScore:
    """A boot against the median boot of its kernel on each primary metric."""
    variant: str
    boot: str
    round: int
    z: dict[str, float] = field(default_factory=dict)     # workload -> z, + = better
    df: dict[str, int] = field(default_factory=dict)      # workload -> the scale's df
    slower: dict[str, float] = field(default_factory=dict)  # workload -> % slower than the median boot

    @property
    def index(self) -> float:
        """The speed index: median z over the workloads (+ = faster)."""
        return float(np.median(list(self.z.values()))) if self.z else float("nan")

    @property
    def median_slower(self) -> float:
        return float(np.median(list(self.slower.values()))) if self.slower else float("nan")


@dataclass
class OutlierBoot:
    variant: str
    boot: str
    round: int
    whole: bool                 # the whole boot; else only `workloads`
    workloads: list[str]
    index: float                # speed index (whole) or the block's z
    slower_pct: float           # % slower than the kernel's median boot (time-like; < 0: faster)
    beyond: int                 # workloads beyond the threshold in the index's direction
    of: int                     # workloads scored
    threshold: float = BOOT_Z   # the |z| it is beyond (BOOT_Z or BLOCK_Z, widened)

    @property
    def label(self) -> str:
        return f"{self.variant} {self.boot}"

    def evidence(self) -> str:
        way = "slower" if self.slower_pct > 0 else "faster"
        if self.whole:
            return (f"{self.label} (round {self.round}) is {abs(self.slower_pct):.1f}% {way} than "
                    f"{self.variant}'s median boot (median over {self.of} workloads; "
                    f"{self.beyond} of {self.of} beyond {self.threshold:.1f} robust SDs, speed "
                    f"index {self.index:+.1f})")
        return (f"{self.label} (round {self.round}) on {', '.join(self.workloads)}: "
                f"{abs(self.slower_pct):.1f}% {way} than {self.variant}'s median boot "
                f"({self.index:+.1f} robust SDs, beyond {self.threshold:.1f}; the boot's other "
                f"workloads are in line)")


def boot_scores(primaries: Sequence["MetricData"]) -> dict[tuple[str, str], BootScore]:
    """(variant, boot) -> its z and % per workload (primary metrics only)."""
    scores: dict[tuple[str, str], BootScore] = {}
    for md in primaries:
        allb = [b for bs in md.boots.values() for b in bs if b.kept]
        if not allb:
            continue
        log, mean_abs = _scale_of(allb)
        sign = 1.0 if md.better == "higher" else -1.0
        ys = {v: np.array([float(np.mean(transform(b.kept, log, mean_abs))) for b in bs
                           if b.kept]) for v, bs in md.boots.items()}
        s = pairwise_scale([y for y in ys.values()])
        if not math.isfinite(s):
            continue
        s = max(s, MIN_SCALE)
        df = sum(y.size for y in ys.values() if y.size) - sum(1 for y in ys.values() if y.size)
        for v, bs in md.boots.items():
            bs = [b for b in bs if b.kept]
            if len(bs) < MIN_BOOTS:
                continue
            y = ys[v]
            med = float(np.median(y))
            for b, yb in zip(bs, y):
                sc = scores.setdefault((v, b.boot), BootScore(v, b.boot, b.round))
                sc.z[md.workload] = sign * (yb - med) / s
                sc.df[md.workload] = df
                # as a time: runs of a boot 1.4x as long are 40 % slower, whatever the metric
                sc.slower[md.workload] = 100.0 * (math.expm1(-sign * (yb - med)) if log
                                                  else -sign * (yb - med) / max(abs(med), 1e-12))
    return scores


def outlier_boots(scores: dict[tuple[str, str], BootScore]) -> list[OutlierBoot]:
    out = []
    for sc in scores.values():
        idx = sc.index
        if not math.isfinite(idx):
            continue
        thr = BOOT_Z
        if len(sc.z) >= MIN_WORKLOADS and abs(idx) > thr:
            beyond = sum(1 for z in sc.z.values() if z * idx > 0 and abs(z) > thr)
            out.append(OutlierBoot(sc.variant, sc.boot, sc.round, True, sorted(sc.z), idx,
                                   sc.median_slower, beyond, len(sc.z), thr))
            continue
        for wl, z in sorted(sc.z.items()):
            thr = BLOCK_Z * widen(sc.df[wl])
            if sc.df[wl] >= MIN_DF_BLOCK and abs(z) > thr:
                out.append(OutlierBoot(sc.variant, sc.boot, sc.round, False, [wl], z,
                                       sc.slower[wl], 1, len(sc.z), thr))
    return sorted(out, key=lambda o: (-abs(o.index), o.variant, o.round))


def drop_boots(md: "MetricData", drop: dict[tuple[str, str], Any]) -> "MetricData":
    """A copy of *md* without the boots in *drop* ((variant, boot) -> the
    OutlierBoot), for the workloads each drop covers."""
    import copy
    out = copy.copy(md)
    out.boots = {v: [b for b in bs
                     if not ((v, b.boot) in drop and (drop[(v, b.boot)].whole
                                                      or md.workload in drop[(v, b.boot)].workloads))]
                 for v, bs in md.boots.items()}
    return out
