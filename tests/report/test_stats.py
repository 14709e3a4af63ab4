"""Statistics: per-boot summaries, the model against scipy's tests, BH and its
intervals, variance components against statsmodels' MixedLM, power, n/a perf."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from kablab.report.fmt import count
from kablab.report.power import VarComp, boots_for, boots_range, mde, power_at, variance_components
from kablab.report.stats import (BootValues, Comparison, _exactly_related, apply_families, fit_pair,
                          pct_change, summarise)


def _boots(variant: str, values_per_boot, rounds=None, hosts=None):  # type: ignore[no-untyped-def]
    rounds = rounds or list(range(len(values_per_boot)))
    hosts = hosts or ["h"] * len(values_per_boot)
    return [BootValues(variant, f"block {r}", r, h, list(map(float, v)))
            for v, r, h in zip(values_per_boot, rounds, hosts)]


def test_summary_is_per_boot_gmean_hand_computed() -> None:
    s = summarise([[2.0, 8.0], [4.0]])           # boot Gmeans 4 and 4
    assert s.central == pytest.approx(4.0) and s.central_kind == "Gmean"
    assert (s.n, s.n_boots, s.min, s.max) == (3, 2, 2.0, 8.0)
    assert s.amean == pytest.approx(14 / 3)
    sd = math.sqrt(((2 - 14 / 3) ** 2 + (8 - 14 / 3) ** 2 + (4 - 14 / 3) ** 2) / 2)
    assert s.stddev == pytest.approx(sd)
    assert s.coeffvar == pytest.approx(100 * sd / (14 / 3))
    assert s.cov_boot == pytest.approx(0.0)
    t = summarise([[1.0, 0.0], [3.0]])           # a zero: arithmetic per-boot means
    assert t.central_kind == "Amean" and t.central == pytest.approx((0.5 + 3.0) / 2)


def test_sign_convention() -> None:
    assert pct_change(100, 95, "lower") == pytest.approx(5.0)
    assert pct_change(100, 95, "higher") == pytest.approx(-5.0)


def test_paired_model_is_the_paired_t_test() -> None:
    """>= 3 rounds: log(value) ~ kernel + round == scipy's paired t-test on
    per-boot log values; fewer: the pooled-variance two-sample test."""
    rng = np.random.default_rng(1)
    base = [list(100 * np.exp(rng.normal(0, .01, 4))) for _ in range(6)]
    new = [list(103 * np.exp(rng.normal(0, .01, 4))) for _ in range(6)]
    fit, model = fit_pair(_boots("a", base), _boots("b", new), log=True)
    assert model == "log(value) ~ kernel + round"
    lb = [np.mean(np.log(b)) for b in base]
    ln = [np.mean(np.log(b)) for b in new]
    ref = sps.ttest_rel(ln, lb)
    assert fit["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert fit["estimate"] == pytest.approx(np.mean(np.subtract(ln, lb)))
    assert fit["df"] == 5
    fit, model = fit_pair(_boots("a", base[:2]), _boots("b", new[:2]), log=True)
    assert model == "log(value) ~ kernel"
    assert fit["p"] == pytest.approx(sps.ttest_ind(ln[:2], lb[:2]).pvalue, rel=1e-9)


def test_host_term_when_hosts_are_balanced() -> None:
    rng = np.random.default_rng(2)
    hb = ["h1", "h2"] * 3
    hn = ["h2", "h1"] * 3
    host_f = {"h1": 1.0, "h2": 1.10}          # a 10 % slower host
    base = [[100 * host_f[h] * math.exp(rng.normal(0, .005))] for h in hb]
    new = [[100 * host_f[h] * math.exp(rng.normal(0, .005))] for h in hn]
    fit, model = fit_pair(_boots("a", base, hosts=hb), _boots("b", new, hosts=hn), log=True)
    assert model == "log(value) ~ kernel + round + host"
    assert abs(fit["estimate"]) < 0.01 and fit["p"] > 0.05


def test_zero_variance_is_not_tested() -> None:
    fit, why = fit_pair(_boots("a", [[5.0]] * 3), _boots("b", [[6.0]] * 3), log=True)
    assert fit is None and why.startswith("zero variance")


def _comp(p: float, est: float, se: float = 0.01, variant: str = "v") -> Comparison:
    return Comparison("w", f"m{p}", "s", "higher", variant, "b", True, "primary", tested=True,
                      scale="log", estimate=est, se=se, df=9, p=p)


def test_bh_family_and_its_interval_decide_together() -> None:
    """The interval at level 1 - max(R,1) q / m excludes 0 exactly for the BH rejections."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        m = int(rng.integers(1, 8))
        comps = []
        for i in range(m):
            t = float(rng.normal(0, 3))
            comps.append(_comp(2 * float(sps.t.sf(abs(t), 9)), t * 0.01))
        apply_families(comps)
        from statsmodels.stats.multitest import multipletests
        rej = multipletests([c.p for c in comps], alpha=0.05, method="fdr_bh")[0]
        r = int(rej.sum())
        for c, rj in zip(comps, rej):
            assert c.level == pytest.approx(1 - max(r, 1) * 0.05 / m)
            assert c.stat_significant == bool(rj)
            assert c.lo <= c.pct <= c.hi


def test_flag_needs_only_the_interval_unless_a_threshold_is_set() -> None:
    """No noise floor: a clear +0.4 % is flagged. A practical threshold is the
    user's (--min-effect): below it a clear change is said to be below it."""
    c = _comp(1e-6, math.log(1.004), se=0.0005)        # +0.4 %, very clear
    apply_families([c])
    assert c.stat_significant and c.significant and c.direction == "better"
    t = _comp(1e-6, math.log(1.004), se=0.0005)
    t.min_effect_pct = 0.5
    apply_families([t])
    assert t.stat_significant and not t.significant
    assert t.reason.startswith("below your threshold")
    d = _comp(1e-6, math.log(0.97), se=0.005)           # -3 % on higher-is-better: worse
    d.min_effect_pct = 0.5
    apply_families([d])
    assert d.significant and d.direction == "worse" and d.pct < 0 and d.hi < 0


def test_families_are_per_kernel() -> None:
    a = [_comp(0.01, 0.03, variant="k1"), _comp(0.5, 0.0, variant="k1")]
    apply_families(a)
    alone = [(c.level, c.lo, c.hi, c.significant) for c in a]
    b = [_comp(0.01, 0.03, variant="k1"), _comp(0.5, 0.0, variant="k1"),
         _comp(0.001, 0.05, variant="k2"), _comp(0.9, 0.0, variant="k2")]
    apply_families(b)
    assert [(c.level, c.lo, c.hi, c.significant) for c in b[:2]] == alone


def test_variance_components_match_mixedlm() -> None:
    """The ANOVA estimator equals statsmodels' REML MixedLM on balanced data."""
    import pandas as pd
    import statsmodels.formula.api as smf
    rng = np.random.default_rng(4)
    boots = [list(np.exp(rng.normal(0, .02) + rng.normal(0, .01, 6))) for _ in range(12)]
    vc = variance_components(boots)
    df = pd.DataFrame([(i, math.log(x)) for i, b in enumerate(boots) for x in b],
                      columns=["boot", "y"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("y ~ 1", df, groups=df["boot"]).fit(reml=True)
    assert vc.sd_within == pytest.approx(math.sqrt(fit.scale), rel=1e-4)
    assert vc.sd_between == pytest.approx(math.sqrt(float(fit.cov_re.iloc[0, 0])), rel=1e-3)
    assert vc.scale == "log" and vc.n_boots == 12 and vc.runs_per_boot == 6
    # two kernels pooled: kernel means are removed, not counted as boot noise
    shifted = [[x * 1.5 for x in b] for b in boots[6:]]
    pooled = variance_components(boots[:6] + shifted, ["a"] * 6 + ["b"] * 6)
    assert pooled.sd_between < 0.05


def test_power_without_floor_is_statsmodels_ttestpower() -> None:
    from statsmodels.stats.power import TTestPower
    for delta, se, df in ((0.03, 0.01, 9), (0.01, 0.008, 4), (0.05, 0.02, 2)):
        with np.errstate(all="ignore"):     # scipy 1.10's nct warns spuriously
            ref = TTestPower().power(effect_size=delta / (se * math.sqrt(df + 1)),
                                     nobs=df + 1, alpha=0.05)
        assert power_at(delta, se, df, 0.05) == pytest.approx(ref, rel=1e-6)
        assert power_at(mde(se, df, 0.05), se, df, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert power_at(0.03, 0.001, 50, 0.05, threshold=0.03) == pytest.approx(0.5, abs=0.05)


def test_boots_for() -> None:
    vc = VarComp(10, 50, 5.0, 0.005, 0.01, "log")        # CoV between 1 %, known exactly
    n3 = boots_for(vc, 3.0)
    assert n3 is not None and 3 <= n3 <= 8
    n1 = boots_for(vc, 1.0)                               # no floor: 1 % at 1 % noise is possible
    assert n1 is not None and n1 > n3
    assert boots_for(vc, 1.0, threshold_pct=1.0) is None  # at the user's threshold: never
    assert boots_for(vc, 2.0) > n3
    se, df = math.sqrt(2 / n3) * vc.sd_boot(), n3 - 1
    assert power_at(math.log(1.03), se, df, 0.05) >= 0.8
    # the noise as an estimate with 9 degrees of freedom: sized on its upper 80 % bound,
    # with the range of its 80 % interval around it
    est = VarComp(10, 50, 5.0, 0.005, 0.01, "log", sd_boot_est=vc.sd_boot(), df_boot=9)
    up = boots_for(est, 3.0)
    lo, hi = boots_range(est, 3.0)
    assert boots_for(est, 3.0, bound=None) == n3
    assert lo <= n3 < up <= hi
    q = sps.chi2.ppf(0.2, 9)
    assert est.sd_boot_bound(0.8) == pytest.approx(vc.sd_boot() * math.sqrt(9 / q))
    assert boots_for(VarComp(3, 3, 1.0, float("nan"), float("nan"), "log"), 3.0) is None


def test_derived_duplicates() -> None:
    rng = np.random.default_rng(5)
    ops = 2e6 * np.exp(rng.normal(0, 0.01, 8))
    ns = np.array([float(f"{1e9 / x:.10g}") for x in ops])
    assert _exactly_related(ops, ns)
    assert _exactly_related(ops, 3.5 * ops)
    assert not _exactly_related(ops, ops * np.exp(rng.normal(0, 0.001, 8)))


def test_unsupported_perf_is_na_not_zero(campaign_raw) -> None:  # type: ignore[no-untyped-def]
    from kablab.results.load import load_campaign
    from kablab.report.stats import perf_summary
    ps = perf_summary(load_campaign(campaign_raw))
    cells = ps["pagecache-read"]["stock"]
    assert cells["dTLB-loads"].mean is None and cells["dTLB-loads"].n == 0
    assert cells["dTLB-miss-rate"].mean is None
    assert cells["page-faults"].mean > 0
    assert count(None) == "not supported"
    assert count(0.0) != "not supported"


def test_tlb_miss_rate_with_a_pmu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With supported counters the miss rate is sum(misses)/sum(loads)."""
    import shutil
    from pathlib import Path

    from kablab.results.collect import collect_to
    from kablab.results.load import load_campaign
    from kablab.report.stats import perf_summary
    raw = tmp_path / "raw"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample", raw)
    for n, (loads, misses) in enumerate(((1000, 10), (3000, 50), (2000, 20)), 1):
        (raw / f"run-{n}.perf").write_text(
            f"# started on Thu Dec  3 07:41:08 2026\n\n"
            f"{loads},,dTLB-loads,1000,100.00,,\n"
            f"{misses},,dTLB-load-misses,1000,100.00,1.00,of all dTLB cache accesses\n"
            f"<not counted>,,iTLB-loads,0,0.00,,\n")
    collect_to(raw, tmp_path / "camp" / "results" / "r.json")
    cells = perf_summary(load_campaign(tmp_path / "camp"))["pipe-pingpong"]["stock"]
    assert cells["dTLB-loads"].mean == pytest.approx(2000)
    assert cells["dTLB-miss-rate"].mean == pytest.approx(100 * 80 / 6000)
    assert cells["iTLB-loads"].mean is None and cells["iTLB-miss-rate"].mean is None
