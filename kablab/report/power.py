"""Noise of a metric across boots, and the power of the report's test: the statistics
the analysis (stats.py) and the boot sizing (noise.py) share.

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

The noise of one boot's value (boot_noise): the per-boot values (the mean of
a boot's kept runs, kablab.report.robust) of all kernels, fitted by OLS with the same
terms as the test, value ~ kernel + round: its residual SD is the noise the
paired test sees, with drift between rounds removed, and its residual degrees
of freedom say how well it is known. The between-boot part is what is left
after the within-boot part sigma_w^2 / runs.

Power (the noncentral t of statsmodels.stats.power.TTestPower): the report's
test compares per-boot values of two kernels paired by round, so with n boots
per kernel the difference has standard error sqrt(2 / n) * sigma_boot, where
sigma_boot^2 = sigma_b^2 + sigma_w^2 / runs, and n - 1 degrees of freedom
(n = 2: the pooled two-sample test, 2 degrees of freedom), at the two-sided
level q / m that the report's BH family of m primary metrics applies to one
real change among them (planning_alpha). sigma_boot is itself an estimate
(chi-square with the fit's residual degrees of freedom): boots are sized on
its upper NOISE_UCB (80 %) confidence bound, so the campaign has 80 % power
with 80 % confidence, and the range printed beside the figure is what the
two-sided NOISE_CI (80 %) interval of sigma_boot gives. With a practical
threshold (a change must also exceed it to be flagged; none by default) the
power counted is the chance of both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import special
from scipy import stats as sps
from scipy.optimize import brentq

ALPHA = 0.05            # q of the report's Benjamini-Hochberg families
POWER = 0.8
NOISE_UCB = 0.8         # boots are sized on this one-sided upper confidence bound of the noise
NOISE_CI = 0.8          # two-sided level of the range printed with the figure
MAX_BOOTS = 10000       # boots_for() gives up beyond this
MIN_ROUNDS = 3          # rounds holding two kernels before the round term is used
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
    sd_boot_est: float = float("nan")   # SD of one boot's value at runs_per_boot runs (boot_noise)
    df_boot: float = float("nan")       # its degrees of freedom (NaN: taken as known)
    model: str = ""                     # the fit it comes from, e.g. "log(value) ~ kernel + round"

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

    def sd_boot_bound(self, conf: float | None, runs: float | None = None,
                      upper: bool = True) -> float:
        """sd_boot(runs) at the upper (or lower) one-sided *conf* confidence bound
        of the boot-level variance (chi-square, df_boot); the estimate itself
        when *conf* is None or the degrees of freedom are unknown."""
        point = self.sd_boot(runs)
        if conf is None or not (math.isfinite(self.df_boot) and self.df_boot > 0
                                and math.isfinite(self.sd_boot_est)):
            return point
        q = sps.chi2.ppf(1.0 - conf if upper else conf, self.df_boot)
        var = self.sd_boot_est ** 2 * self.df_boot / float(q)
        sw2 = self.sd_within ** 2 if math.isfinite(self.sd_within) else 0.0
        r = runs or self.runs_per_boot
        if sw2 and math.isfinite(self.runs_per_boot):
            var = max(var - sw2 / self.runs_per_boot, 0.0) + sw2 / max(r, 1.0)
        return math.sqrt(var)


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


def _dummies(labels: Sequence[Any]) -> np.ndarray:
    levels = sorted(set(labels), key=str)
    return np.array([[1.0 if x == lev else 0.0 for lev in levels[1:]] for x in labels],
                    dtype=float).reshape(len(labels), max(len(levels) - 1, 0))


def boot_noise(boots: Sequence[Iterable[float]], kernels: Sequence[Any],
               rounds: Sequence[Any]) -> VarComp:
    """The noise of one boot's value (module doc): *boots* one sequence of (kept)
    run values per boot, with its kernel and round. Round-adjusted when at
    least MIN_ROUNDS rounds hold boots of two kernels."""
    import statsmodels.api as sm
    vc = variance_components(boots, kernels)
    groups = [np.asarray([v for v in b if v is not None and math.isfinite(v)], dtype=float)
              for b in boots]
    keep = [i for i, g in enumerate(groups) if g.size]
    if not keep or vc.note == "all values 0":
        return vc
    groups = [groups[i] for i in keep]
    ks = [kernels[i] for i in keep]
    rs = [rounds[i] for i in keep]
    if vc.scale == "log":
        y = np.array([float(np.mean(np.log(g))) for g in groups])
    else:
        m = float(np.mean(np.abs(np.concatenate(groups)))) or 1.0
        y = np.array([float(np.mean(g)) / m for g in groups])
    X = np.column_stack([np.ones(len(y)), _dummies(ks)])
    terms = ["kernel"] if len(set(ks)) > 1 else []
    per_round: dict[Any, set[Any]] = {}
    for k, r in zip(ks, rs):
        per_round.setdefault(r, set()).add(k)
    if sum(len(v) >= 2 for v in per_round.values()) >= MIN_ROUNDS:
        cand = np.column_stack([X, _dummies(rs)])
        if len(y) - np.linalg.matrix_rank(cand) >= 1:
            X, terms = cand, terms + ["round"]
    df = len(y) - int(np.linalg.matrix_rank(X))
    model = f"{'log(value)' if vc.scale == 'log' else 'value'} ~ {' + '.join(terms) or '1'}"
    if df < 1:
        return vc
    res = sm.OLS(y, X).fit()
    sd_boot = math.sqrt(float(res.ssr) / df)
    sizes = [g.size for g in groups]
    r_h = float(sps.hmean(sizes)) if len(set(sizes)) > 1 else float(sizes[0])  # runs per boot
    sw2 = vc.sd_within ** 2 if math.isfinite(vc.sd_within) else 0.0
    vc.sd_between = math.sqrt(max(0.0, sd_boot ** 2 - sw2 / r_h))
    vc.runs_per_boot = r_h
    vc.sd_boot_est, vc.df_boot, vc.model = sd_boot, float(df), model
    return vc


# ------------------------------------------------------------------ power

def power_at(delta: float, se: float, df: float, alpha: float, threshold: float = 0.0) -> float:
    """Chance that a true change *delta* (analysis scale) is flagged: |t| beyond the
    two-sided critical value at *alpha* and |estimate| > *threshold*, for a test with
    standard error *se* and *df* degrees of freedom. Without a threshold this is
    statsmodels' TTestPower().power(delta / (se * sqrt(df + 1)), df + 1, alpha);
    the threshold raises the critical value to threshold / se (se taken as known)."""
    if not (se > 0 and df >= 1 and math.isfinite(se)):
        return float("nan")
    crit = max(float(special.stdtrit(df, 1.0 - alpha / 2)), threshold / se)
    ncp = abs(delta) / se
    if ncp > 1e3:               # power is 1 to double precision there
        return float(sps.norm.sf(crit - ncp) + sps.norm.cdf(-crit - ncp))
    # scipy.special's noncentral t (cdflib): scipy.stats.nct's boost code warns
    # spuriously, aborts the process on huge ncp and is 40x slower
    with np.errstate(all="ignore"):
        p = float(1.0 - special.nctdtr(df, ncp, crit) + special.nctdtr(df, ncp, -crit))
    if not math.isfinite(p):            # normal approximation
        p = float(sps.norm.sf(crit - ncp) + sps.norm.cdf(-crit - ncp))
    return p


def mde(se: float, df: float, alpha: float, threshold: float = 0.0,
        power: float = POWER) -> float:
    """Smallest change (analysis scale) flagged with probability *power*."""
    if not (se > 0 and df >= 1 and math.isfinite(se)):
        return float("nan")
    crit = max(float(special.stdtrit(df, 1.0 - alpha / 2)), threshold / se)
    hi = se * (crit + 10.0)
    while power_at(hi, se, df, alpha, threshold) < power:
        hi *= 2
    return float(brentq(lambda d: power_at(d, se, df, alpha, threshold) - power, 0.0, hi,
                        xtol=1e-9 * max(se, 1e-12), rtol=1e-10))


def design_se_df(sd_boot: float, n: int) -> tuple[float, int]:
    """SE and df of the kernel difference with n boots per kernel (see module doc)."""
    if n >= 3:
        return math.sqrt(2.0 / n) * sd_boot, n - 1
    return math.sqrt(2.0 / n) * sd_boot, 2 * n - 2


def boots_for(vc: VarComp, effect_pct: float, power: float = POWER, alpha: float = ALPHA,
              runs: float | None = None, threshold_pct: float = 0.0,
              bound: float | None = NOISE_UCB, upper: bool = True) -> int | None:
    """Boots per kernel needed to flag a change of *effect_pct* % with *power*,
    sized on the noise's upper *bound* confidence bound (None: the estimate;
    upper=False: the lower bound, for the range). *threshold_pct*: a practical
    threshold the change must also exceed (0: none).

    None when the noise is unknown, when the effect is not above the threshold,
    or when more than MAX_BOOTS would be needed.
    """
    sd = vc.sd_boot_bound(bound, runs, upper)
    if not math.isfinite(sd):
        return None
    if vc.scale == "log":
        delta, thr = abs(pct_to_log(effect_pct)), pct_to_log(threshold_pct)
    else:
        delta, thr = abs(effect_pct) / 100.0, threshold_pct / 100.0
    if delta <= thr:
        return None
    if sd <= 1e-12:             # values repeat exactly (to rounding)
        return 2

    def ok(n: int) -> bool:
        se, df = design_se_df(sd, n)
        return power_at(delta, se, df, alpha, thr) >= power
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


def boots_range(vc: VarComp, effect_pct: float, power: float = POWER, alpha: float = ALPHA,
                runs: float | None = None, threshold_pct: float = 0.0,
                level: float = NOISE_CI) -> tuple[int | None, int | None]:
    """The boots needed at the two ends of the noise's two-sided *level*
    confidence interval: the uncertainty of boots_for's figure."""
    conf = (1.0 + level) / 2.0
    return (boots_for(vc, effect_pct, power, alpha, runs, threshold_pct, conf, upper=False),
            boots_for(vc, effect_pct, power, alpha, runs, threshold_pct, conf, upper=True))


def need_text(n: int | None, vc: VarComp | None = None) -> str:
    """A boots-needed figure for tables: the number, "n/a" (noise unknown) or
    "> MAX_BOOTS"."""
    if n is not None:
        return str(n)
    if vc is not None and not math.isfinite(vc.sd_boot()):
        return "n/a"
    return f">{MAX_BOOTS}"


# ------------------------------------------------------- campaign noise table

def planning_alpha(n_primary: int, q: float = ALPHA) -> float:
    """Two-sided level at which one real change among *n_primary* primary metrics
    is flagged by the report's BH family (R = 1: q / m)."""
    return q / max(1, n_primary)


def metric_noise(md: Any, variants: Sequence[str], drop: dict[tuple[str, str], Any]) -> VarComp:
    """boot_noise of one metric's kept runs, *variants* pooled, the boots in
    *drop* (kablab.report.stats.screen_boots) left out."""
    from kablab.report.robust import drop_boots
    md = drop_boots(md, drop)
    groups, labels, rounds = [], [], []
    for v in variants:
        for b in md.boots.get(v, []):
            groups.append(b.kept)
            labels.append(v)
            rounds.append(b.round)
    return boot_noise(groups, labels, rounds)
