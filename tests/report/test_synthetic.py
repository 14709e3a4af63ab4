"""Synthetic campaigns with known variance components, through the real loader,
analyse() and the report CLI: false flags, power, and the cases with no verdict.

The generator is tests/fixtures/make_campaign.py:synthetic_campaign (result
JSON in the result schema; load_campaign validates every file).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import make_campaign as mc
from kablab.results.load import load_campaign
from kablab.report.render import render_campaign
from kablab.report.cli import main as report_main
from kablab.report.stats import Analysis, analyse

SEEDS = range(30)
SLOW = {("hackbench", "time_s"): 0.03, ("pipe-pingpong", "round_trips_per_s"): -0.03}
FAST = {("hackbench", "time_s"): -0.03, ("pipe-pingpong", "round_trips_per_s"): 0.03}


def _analyse(path: Path, **kw) -> Analysis:  # type: ignore[no-untyped-def]
    camp = load_campaign(mc.synthetic_campaign(path, **kw))
    assert camp.invalid == [], camp.invalid[:3]
    return analyse(camp)


def _report(path: Path, cli: bool = False) -> tuple[str, str, str, dict]:
    """Render and read the outputs; cli: through the report CLI's entry point
    (`python3 -m kablab.report` runs the same main(), tests/report/test_report.py
    runs it as a process)."""
    if cli:
        assert report_main([str(path)]) == 0
    else:
        render_campaign(load_campaign(path))
    return ((path / "index.html").read_text(encoding="utf-8"),
            (path / "summary.txt").read_text(encoding="utf-8"),
            (path / "summary-lkp.txt").read_text(encoding="utf-8"),
            json.loads((path / "results.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("sd_between,sd_within", [(0.02, 0.005), (0.01, 0.01)])
def test_aa_flags_at_most_5_percent_of_cells(tmp_path: Path, sd_between: float,
                                            sd_within: float) -> None:
    tested = flagged = 0
    for seed in SEEDS:
        an = _analyse(tmp_path / f"s{seed}", seed=seed, boots=10, runs=3,
                      sd_between=sd_between, sd_within=sd_within)
        cells = [c for c in an.comparisons if c.tested]
        assert {c.n_boots for c in cells} == {10}           # boots, not runs
        tested += len(cells)
        flagged += sum(bool(c.significant) for c in cells)
    print(f"A/A {sd_between}/{sd_within}: {flagged}/{tested} cells flagged")
    assert tested == 4 * len(SEEDS)          # 3 primary + 1 secondary per campaign
    assert flagged <= 0.05 * tested


def test_three_percent_flagged_with_the_right_sign(tmp_path: Path) -> None:
    hits: dict[tuple[str, str], int] = {}
    for seed in SEEDS:
        an = _analyse(tmp_path / f"s{seed}", seed=seed, boots=10, runs=3,
                      sd_between=0.01, sd_within=0.01, variants=("stock", "slow", "fast"),
                      effects={"slow": SLOW, "fast": FAST})
        for variant, eff, want in (("slow", SLOW, "worse"), ("fast", FAST, "better")):
            for wl, metric in eff:
                c = an.comparison(wl, metric, variant)
                ok = (c is not None and c.significant and c.direction == want
                      and (c.pct < 0) == (want == "worse") and c.lo <= c.pct <= c.hi)
                hits[(variant, wl)] = hits.get((variant, wl), 0) + int(bool(ok))
    print("3 % flagged:", hits)
    assert all(n >= 0.8 * len(SEEDS) for n in hits.values()), hits


def test_report_cli_colours_and_intervals(tmp_path: Path) -> None:
    camp = mc.synthetic_campaign(tmp_path / "c", seed=3, boots=10, runs=5, sd_between=0.01,
                                 sd_within=0.01, variants=("stock", "slow", "fast"),
                                 effects={"slow": SLOW, "fast": FAST})
    html, txt, lkp, merged = _report(camp, cli=True)
    by = {(c["variant"], c["workload"], c["metric"]): c for c in merged["analysis"]["comparisons"]}
    slow = by[("slow", "hackbench", "time_s")]          # +3 % time: worse, negative
    assert slow["significant"] is True and slow["pct"] < 0 and slow["hi"] < 0
    assert slow["primary"] is True and slow["n_boots"] == 10 and slow["q"] <= slow["p"] * 3
    fast = by[("fast", "pipe-pingpong", "round_trips_per_s")]
    assert fast["significant"] is True and fast["pct"] > 0 and fast["lo"] > 0
    for c, cls in ((slow, "sig-worse"), (fast, "sig-better")):
        shown = f"{c['pct']:+.2f}% [{c['lo']:+.2f}, {c['hi']:+.2f}]"
        mark = "\u25b2 better" if cls == "sig-better" else "\u25bc worse"
        pct_s = re.escape(f"{c['pct']:+.2f}%")
        assert re.search(rf'<td class="cell {cls}"><span class="pct">{pct_s}</span> '
                         rf'<span class="ci">{re.escape(shown.split(" ", 1)[1])}</span> '
                         rf'<b class="mark">{mark}</b>', html)
        assert shown in txt
        assert f"*{c['pct']:+7.2f}%*" in txt             # the starred Gmean cell
    assert by[("slow", "syscall-mix", "ns_per_op")]["reason"] == "derived from ops_per_s"
    assert by[("fast", "hackbench", "messages_per_s")]["significant"] is None
    assert by[("fast", "hackbench", "wall_s")]["reason"].startswith("wrapper wall time")
    assert all(len(ln) <= 100 for ln in txt.splitlines() + lkp.splitlines())
    noise = {(n["workload"], n["metric"]): n for n in merged["analysis"]["noise"]}
    n = noise[("pipe-pingpong", "round_trips_per_s")]
    assert 0.4 < n["cov_between_pct"] < 1.8 and 0.7 < n["cov_within_pct"] < 1.3
    assert set(n["boots_needed"]) == {"1", "3"}


def test_changes_of_thousands_of_percent_keep_the_text_columns(tmp_path: Path) -> None:
    # CI's smoke campaign once printed a 101-column line: a Stddev row whose
    # baseline was tiny changed by more than 1000 %.
    huge = {("pipe-pingpong", "round_trips_per_s"): 25.0, ("hackbench", "time_s"): 400.0}
    camp = mc.synthetic_campaign(tmp_path / "c", seed=5, boots=3, runs=3,
                                 variants=("stock", "grouped", "split4k"),
                                 effects={"grouped": huge, "split4k": huge})
    _, txt, lkp, merged = _report(camp)
    by = {(c["variant"], c["workload"], c["metric"]): c for c in merged["analysis"]["comparisons"]}
    assert by[("split4k", "pipe-pingpong", "round_trips_per_s")]["pct"] > 1000
    too_long = [ln for ln in txt.splitlines() + lkp.splitlines() if len(ln) > 100]
    assert not too_long, too_long
    assert re.search(r"\*\+2\d{3}\.\d%\*", txt)      # one decimal fewer, still there


def test_one_boot_per_kernel_gives_no_verdict(tmp_path: Path) -> None:
    camp = mc.synthetic_campaign(tmp_path / "c", seed=1, boots=1, runs=3,
                                 variants=("stock", "grouped", "split4k"),
                                 effects={"grouped": SLOW})
    html, txt, lkp, merged = _report(camp)
    comps = merged["analysis"]["comparisons"]
    assert comps and all(c["significant"] is None and c["lo"] is None and c["pct"] is None
                         for c in comps)
    assert {c["reason"] for c in comps if c["role"] in ("primary", "secondary")} == \
        {"1 boot per kernel"}
    assert "not tested: 1 boot per kernel" in html and "not tested: 1 boot per kernel" in txt
    assert not re.search(r'class="[^"]*sig-(better|worse)', html)
    assert not re.search(r"\*\s*[+-]?\d+\.\d\d%\*", txt)
    assert not re.search(r"%\*", lkp)
    assert "no significant difference" not in html + txt
    assert "(0.00%)" not in html + txt


def test_baseline_missing_a_metric_is_na(tmp_path: Path) -> None:
    camp = mc.synthetic_campaign(tmp_path / "c", seed=2, boots=4, runs=3,
                                 drop={"stock": ("rtt_p99_us",)})
    html, txt, _, merged = _report(camp)
    c = [c for c in merged["analysis"]["comparisons"] if c["metric"] == "rtt_p99_us"][0]
    assert c["significant"] is None and c["pct"] is None
    assert c["reason"] == "no baseline value (stock has no rtt_p99_us)"
    assert "(0.00%)" not in html and "(0.00%)" not in txt
    assert re.search(r"Gmean\s+rtt_p99_us\s+-\s+[\d.]+ \(    n/a \)", txt)
    assert "not tested: no baseline value" in html


def test_kernel_with_all_blocks_failed_is_not_tested(tmp_path: Path) -> None:
    an = _analyse(tmp_path / "c", seed=4, boots=3, runs=3, variants=("stock", "broken"),
                  failed=("broken",))
    for wl in an.workloads:
        text, cls = an.headline(wl, "broken")
        assert text.startswith("not tested: all 3 block(s) of broken failed"), text
        assert cls == ""
    assert all(c.significant is None for c in an.comparisons)
    base_failed = _analyse(tmp_path / "d", seed=4, boots=3, runs=3,
                           variants=("stock", "other"), failed=("stock",))
    assert base_failed.headline("hackbench", "other")[0].startswith(
        "not tested: all 3 block(s) of stock failed")


def test_verdicts_do_not_depend_on_a_third_kernel(tmp_path: Path) -> None:
    kw = dict(seed=7, boots=6, runs=3, sd_between=0.01, sd_within=0.01)
    two = _analyse(tmp_path / "two", variants=("stock", "grouped"),
                   effects={"grouped": SLOW}, **kw)
    three = _analyse(tmp_path / "three", variants=("stock", "grouped", "split4k"),
                     effects={"grouped": SLOW, "split4k": FAST}, **kw)

    def mine(an: Analysis) -> list[dict]:
        return [c.__dict__ for c in an.comparisons if c.variant == "grouped"]
    assert mine(two) == mine(three)
    assert any(c["significant"] for c in mine(two))
    assert any(c.significant for c in three.comparisons if c.variant == "split4k")


def test_primary_metric_declared_or_first_harness_metric(tmp_path: Path) -> None:
    an = _analyse(tmp_path / "a", seed=5, boots=3, runs=3, declare_primary=False)
    assert an.primaries["hackbench"] == {"metric": "time_s", "source": "first harness metric"}
    camp = mc.synthetic_campaign(tmp_path / "b", seed=5, boots=3, runs=3)
    for f in (camp / "results").glob("*/pipe-pingpong-*.json"):
        doc = json.loads(f.read_text())
        doc["primary_metric"] = "rtt_p99_us"
        f.write_text(json.dumps(doc))
    an = analyse(load_campaign(camp))
    assert an.primaries["pipe-pingpong"] == {"metric": "rtt_p99_us", "source": "declared"}
    roles = {m: md.role for (w, m), md in an.metrics.items() if w == "pipe-pingpong"}
    assert roles == {"rtt_p99_us": "primary", "round_trips_per_s": "secondary",
                     "wall_s": "wrapper"}
    assert list(roles)[0] == "rtt_p99_us"


def test_boot_field_is_the_unit_when_present(tmp_path: Path) -> None:
    """Two workload results of one boot share it; a `boot` field overrides the block."""
    camp = mc.synthetic_campaign(tmp_path / "c", seed=6, boots=4, runs=3)
    before = analyse(load_campaign(camp))
    for f in (camp / "results").glob("*/*.json"):
        doc = json.loads(f.read_text())
        doc["boot"] = 100 + doc["block"]
        f.write_text(json.dumps(doc))
    after = analyse(load_campaign(camp))
    assert [(c.pct, c.lo, c.hi) for c in before.comparisons] == \
        [(c.pct, c.lo, c.hi) for c in after.comparisons]
    md = after.metrics[("hackbench", "time_s")]
    assert [b.boot for b in md.boots["stock"]] == [f"boot {100 + i}" for i in range(4)]


def test_underpowered_verdict_says_what_it_could_miss(tmp_path: Path) -> None:
    an = _analyse(tmp_path / "c", seed=8, boots=3, runs=3, sd_between=0.03, sd_within=0.01)
    text = an.headline("hackbench", "other")[0]
    m = re.search(r"could miss \u00b1(\d+\.\d)%", text)
    assert m and float(m.group(1)) > 3.0, text
