"""Statistics: significance, sign convention, hand-computed summaries, n/a perf."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kablab.fmt import count
from kablab.stats import apply_significance, compare, pct_change, summarise


def _sig(base, new, unit="s", better="lower"):  # type: ignore[no-untyped-def]
    c = compare(base, new, unit, better, seed=1, workload="w", metric="m", variant="v",
                baseline="b")
    apply_significance([c])
    return c


def test_identical_distributions_not_significant() -> None:
    rng = np.random.default_rng(7)
    x = 100 * rng.normal(1, 0.02, 10)
    c = _sig(x, x.copy())
    assert not c.significant
    assert c.pct == pytest.approx(0.0)
    assert c.ci_lo <= 0 <= c.ci_hi
    # two samples from the same distribution
    c = _sig(100 * rng.normal(1, 0.02, 10), 100 * rng.normal(1, 0.02, 10))
    assert not c.significant


def test_five_percent_shift_is_significant_higher_better() -> None:
    rng = np.random.default_rng(42)
    base = 1000 * rng.normal(1, 0.02, 10)
    new = 1050 * rng.normal(1, 0.02, 10)
    c = _sig(base, new, unit="MiB/s", better="higher")
    assert c.significant
    assert c.pct > 0 and c.ci_lo > 0
    assert c.central_kind == "Hmean"
    assert c.pct == pytest.approx(5, abs=2.5)
    assert c.welch_p_holm < 0.05


def test_lower_is_better_sign_convention() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(1.0, 0.02, 10)
    faster = rng.normal(0.95, 0.02, 10)      # 5 % less time: better -> positive
    slower = rng.normal(1.05, 0.02, 10)      # 5 % more time: worse -> negative
    cf, cs = _sig(base, faster), _sig(base, slower)
    assert cf.significant and cf.pct > 0
    assert cs.significant and cs.pct < 0
    assert pct_change(100, 95, "lower") == pytest.approx(5.0)
    assert pct_change(100, 95, "higher") == pytest.approx(-5.0)


def test_coeffvar_and_hmean_hand_computed() -> None:
    x = [2.0, 4.0, 4.0]
    s = summarise(x, "ops/s")
    assert s.hmean == pytest.approx(3 / (1 / 2 + 1 / 4 + 1 / 4))      # 3.0
    assert s.central == s.hmean and s.central_kind == "Hmean"
    assert s.amean == pytest.approx(10 / 3)
    sd = math.sqrt(((2 - 10 / 3) ** 2 + 2 * (4 - 10 / 3) ** 2) / 2)     # sample stddev
    assert s.stddev == pytest.approx(sd)
    assert s.coeffvar == pytest.approx(100 * sd / (10 / 3))
    assert (s.min, s.max, s.n) == (2.0, 4.0, 3)
    # CI of the mean uses sqrt(n): t(0.975, 2) = 4.302652729911275
    assert s.ci95_halfwidth == pytest.approx(4.302652729911275 * sd / math.sqrt(3))
    t = summarise(x, "s")
    assert t.central_kind == "Amean" and t.central == pytest.approx(10 / 3)


def test_holm_is_applied_over_all_comparisons() -> None:
    rng = np.random.default_rng(5)
    comps = [compare(rng.normal(1, .02, 10), rng.normal(1.03, .02, 10), "s", "lower",
                     workload=f"w{i}", metric="m", variant="v", baseline="b") for i in range(5)]
    apply_significance(comps)
    raw = sorted(c.welch_p for c in comps)
    adj = sorted(c.welch_p_holm for c in comps)
    assert adj[0] == pytest.approx(min(1.0, raw[0] * 5))
    assert all(a >= r for a, r in zip(adj, raw))


def test_unsupported_perf_is_na_not_zero(campaign_raw) -> None:  # type: ignore[no-untyped-def]
    from kablab.load import load_campaign
    from kablab.stats import perf_summary
    ps = perf_summary(load_campaign(campaign_raw))
    cells = ps["pagecache-read"]["stock"]
    assert cells["dTLB-loads"].mean is None and cells["dTLB-loads"].n == 0
    assert cells["dTLB-miss-rate"].mean is None
    assert cells["page-faults"].mean > 0
    assert count(None) == "n/a (no PMU)"
    assert count(0.0) != "n/a (no PMU)"


def test_tlb_miss_rate_with_a_pmu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With supported counters the miss rate is sum(misses)/sum(loads)."""
    import shutil
    from pathlib import Path

    from kablab.collect import collect_to
    from kablab.load import load_campaign
    from kablab.stats import perf_summary
    raw = tmp_path / "raw"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample", raw)
    groups = []
    for loads, misses in ((1000, 10), (3000, 50), (2000, 20)):
        groups.append(f"# started on Thu Dec  3 07:41:08 2026\n\n"
                      f"{loads},,dTLB-loads,1000,100.00,,\n"
                      f"{misses},,dTLB-load-misses,1000,100.00,1.00,of all dTLB cache accesses\n"
                      f"<not counted>,,iTLB-loads,0,0.00,,\n")
    (raw / "perf.csv").write_text("".join(groups))
    collect_to(raw, tmp_path / "camp" / "results" / "r.json")
    cells = perf_summary(load_campaign(tmp_path / "camp"))["pipe-pingpong"]["stock"]
    assert cells["dTLB-loads"].mean == pytest.approx(2000)
    assert cells["dTLB-miss-rate"].mean == pytest.approx(100 * 80 / 6000)
    assert cells["iTLB-loads"].mean is None and cells["iTLB-miss-rate"].mean is None
