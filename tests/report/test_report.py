"""End-to-end: render the fixture campaign and check every output."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kablab.results.load import load_campaign
from kablab.report.render import render_campaign
from kablabtest import REPO

SCRIPT = "<script>alert(1)</script>"


def test_outputs_exist(rendered: Path) -> None:
    for name in ("index.html", "summary.txt", "summary-lkp.txt", "results.csv", "results.json"):
        assert (rendered / name).stat().st_size > 0, name
    assert not list(rendered.glob(".*.tmp"))


def test_text_width_at_most_100(rendered: Path) -> None:
    for name in ("summary.txt", "summary-lkp.txt"):
        lines = (rendered / name).read_text(encoding="utf-8").splitlines()
        assert lines
        too_long = [ln for ln in lines if len(ln) > 100]
        assert not too_long, (name, too_long)


def test_summary_content(rendered: Path) -> None:
    s = (rendered / "summary.txt").read_text(encoding="utf-8")
    assert "Emulated CPU (TCG)" in s
    # the baseline column carries no change; grouped's Gmean is flagged (*+x.xx%*)
    assert re.search(r"Gmean\s+seq_mib_per_s\s+[\d.]+\s+[\d.]+ \*\s*\+\d+\.\d\d%\*", s)
    assert "(0.00%)" not in s
    assert "Verdict: grouped +" in s
    assert "split4k wall_s [wrapper]: not tested: wrapper wall time" in s
    assert "== noise and power" in s and "Method: Each boot is one sample" in s
    assert "split4k / page-fault / block 1: stage run" in s
    assert "Cannot allocate memory" in s
    # each column's build and series version, before any verdict
    kernels = " ".join(s[:s.index("== ")].split())
    assert ("Kernels: stock build 1111aaaa2222bbbb (common v1); grouped build 3333cccc4444dddd "
            "(common v1, grouped v3); split4k build 5555eeee6666ffff (series versions not recorded") in kernels
    lkp = (rendered / "summary-lkp.txt").read_text(encoding="utf-8")
    assert "%stddev     %change         %stddev" in lkp
    assert "pagecache-read.seq_mib_per_s" in lkp


def test_html_content(rendered: Path) -> None:
    html = (rendered / "index.html").read_text(encoding="utf-8")
    assert 'class="banner"' in html and "Emulated CPU (TCG): timings do not reflect hardware " \
        "TLB behaviour; direct-map state is real" in html
    # failure shown, with stage, reason, stderr and console tails
    fail = html[html.index('id="failures"'):]
    for needle in ("split4k / page-fault / block 1", "<b>run</b>", "Cannot allocate memory",
                   "Out of memory: Killed process", "logs/split4k-run"):
        assert needle in fail, needle
    # escaping: the workload name appears as text only
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    # self-contained: no external resources
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)
    assert "<link" not in html and "@import" not in html
    assert html.count("<svg") >= 5                       # 4 workloads + forest plot
    assert "not supported: dTLB-load-misses, instructions" in html and "no PMU" not in html
    assert 'class="num sig-better"' in html and 'class="num sig-worse"' in html
    assert "*" in html and "Benjamini-Hochberg" in html and 'id="noise"' in html
    assert "(0.00%)" not in html and "Runner overhead" in html
    assert "PT cost KiB" in html and "level-2 splits" in html and 'id="direct-map"' in html
    for prov in ("6.1.192-3", "a" * 64, "hyperfine 1.15.0", "perf version 6.1.192",
                 "Intel(R) Xeon(R) CPU E5-2680 v4", "hv1", "hv2", "vcpus=2", "rodata=full"):
        assert prov in html, prov


def test_verdicts(rendered: Path) -> None:
    merged = json.loads((rendered / "results.json").read_text())
    comps = merged["analysis"]["comparisons"]
    by = {(c["workload"], c["metric"], c["variant"]): c for c in comps}
    grp = by[("pagecache-read", "seq_mib_per_s", "grouped")]
    assert grp["significant"] and grp["pct"] > 0
    assert by[("pipe-pingpong", "rtt_p99_us", "split4k")]["pct"] < 0      # slower = worse
    assert not by[(SCRIPT, "ops_per_s", "grouped")]["significant"]
    html = (rendered / "index.html").read_text(encoding="utf-8")
    assert grp["primary"] and grp["lo"] > 0 and grp["n_boots"] == 4
    assert grp["significant"] is True and grp["reason"].startswith("better")
    wall = by[("pipe-pingpong", "wall_s", "grouped")]
    assert wall["significant"] is None and wall["lo"] is None
    # the interval shown is the interval stored
    assert re.search(r"\+\d+\.\d\d% \[\+\d+\.\d\d, \+\d+\.\d\d\] BETTER \(seq_mib_per_s\)",
                     html)
    cell = f"{grp['pct']:+.2f}% [{grp['lo']:+.2f}, {grp['hi']:+.2f}] BETTER (seq_mib_per_s)"
    assert cell in html


def test_csv_and_json_tidy(rendered: Path) -> None:
    rows = list(csv.DictReader((rendered / "results.csv").open(encoding="utf-8")))
    assert rows and set(rows[0]) >= {"variant", "workload", "run_index", "metric", "value"}
    dtlb = [r for r in rows if r["metric"] == "dTLB-loads"]
    assert dtlb and all(r["value"] == "" and r["supported"] == "False" for r in dtlb)
    excluded = [r for r in rows if r["exit_code"] == "1"]
    assert excluded and all(r["included"] == "False" for r in excluded)
    merged = json.loads((rendered / "results.json").read_text())
    assert merged["tcg"] is True and merged["baseline"] == "stock"
    assert merged["variants"] == ["stock", "grouped", "split4k"]
    assert len(merged["failed_blocks"]) == 1
    assert len(merged["rows"]) == len(rows)


def test_truncated_result_is_named_and_excluded(campaign_raw: Path, tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(campaign_raw / "results", camp / "results")
    victim = camp / "results" / "grouped" / "pipe-pingpong-block0.json"
    victim.write_text(victim.read_text()[:500])
    bad_schema = camp / "results" / "stock" / "bogus.json"
    bad_schema.write_text('{"schema_version": 2}')
    loaded = load_campaign(camp)
    assert {f.path for f in loaded.invalid} == {"results/grouped/pipe-pingpong-block0.json",
                                                "results/stock/bogus.json"}
    render_campaign(loaded)
    html = (camp / "index.html").read_text(encoding="utf-8")
    assert "results/grouped/pipe-pingpong-block0.json" in html and "cannot parse JSON" in html
    assert "results/stock/bogus.json" in html
    txt = (camp / "summary.txt").read_text(encoding="utf-8")
    assert "results/grouped/pipe-pingpong-block0.json" in txt
    merged = json.loads((camp / "results.json").read_text())
    assert len(merged["invalid_files"]) == 2
    files = {r["file"] for r in merged["results"]}
    assert "results/grouped/pipe-pingpong-block0.json" not in files
    # grouped pipe-pingpong now has blocks 1-3 (3 boots x 5 runs)
    summ = [s for s in merged["analysis"]["summaries"]
            if (s["workload"], s["metric"], s["variant"]) == ("pipe-pingpong", "wall_s", "grouped")]
    assert (summ[0]["n"], summ[0]["n_boots"]) == (15, 3)


def test_cli(campaign_raw: Path, tmp_path: Path) -> None:
    camp = tmp_path / "c"
    shutil.copytree(campaign_raw / "results", camp / "results")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "kablab.report", str(camp)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "failed block split4k/page-fault/1" in p.stderr
    assert (camp / "index.html").exists() and (camp / "summary-lkp.txt").exists()
    p = subprocess.run([sys.executable, "-m", "kablab.report", str(tmp_path / "nope")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1


def test_degenerate_campaigns_render(campaign_raw: Path, tmp_path: Path) -> None:
    """Empty campaign, only failed blocks, a single kernel: a report, never a crash."""
    empty = tmp_path / "empty"
    (empty / "results").mkdir(parents=True)
    render_campaign(load_campaign(empty))
    assert "Verdicts" in (empty / "index.html").read_text(encoding="utf-8")

    only_failed = tmp_path / "failed"
    src = campaign_raw / "results" / "split4k" / "page-fault-block1.json"
    (only_failed / "results").mkdir(parents=True)
    shutil.copy(src, only_failed / "results" / "x.json")
    render_campaign(load_campaign(only_failed))
    html = (only_failed / "index.html").read_text(encoding="utf-8")
    assert "Cannot allocate memory" in html and "No successful runs" in html

    single = tmp_path / "single"
    shutil.copytree(campaign_raw / "results" / "stock", single / "results" / "stock")
    render_campaign(load_campaign(single))
    txt = (single / "summary.txt").read_text(encoding="utf-8")
    assert "no comparison: only one kernel" in txt and "no significant difference" not in txt


def test_baseline_option(campaign_raw: Path, tmp_path: Path) -> None:
    camp = tmp_path / "c"
    shutil.copytree(campaign_raw / "results", camp / "results")
    from kablab.report.cli import main
    assert main([str(camp), "--baseline", "grouped"]) == 0
    merged = json.loads((camp / "results.json").read_text())
    assert merged["baseline"] == "grouped"
    assert merged["variants"] == ["grouped", "stock", "split4k"]
    assert {c["baseline"] for c in merged["analysis"]["comparisons"]} == {"grouped"}


def test_kernel_without_a_good_block_is_named_at_the_top(campaign_raw: Path, tmp_path: Path) -> None:
    """A variant whose every block failed (a kernel that does not boot) is
    listed before the verdicts; a variant with some good blocks is not."""
    camp = tmp_path / "c"
    shutil.copytree(campaign_raw, camp)
    for f in (camp / "results" / "grouped").glob("*.json"):
        doc = json.loads(f.read_text(encoding="utf-8"))
        doc.update(status="failed", runs=[], failure={
            "stage": "boot", "reason": "kablab-grouped printed no KABLAB-GUEST-READY", "exit_code": None,
            "signal": None, "stderr_tail": None, "console_log": "logs/grouped-boot1.log",
            "console_tail": "Kernel panic - not syncing: VFS: Unable to mount root fs"})
        f.write_text(json.dumps(doc), encoding="utf-8")
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    box = html[html.index('id="failed-kernels"'):]
    box = box[:box.index("</div>")]
    assert "<b>grouped</b>" in box and "failed at boot" in box and 'href="logs/grouped-boot1.log"' in box
    assert "<b>split4k</b>" not in box          # split4k has one failed block, the rest are good
    assert html.index('id="failed-kernels"') < html.index('id="verdicts"')
    assert "KERNEL grouped: all" in (camp / "summary.txt").read_text(encoding="utf-8")


def test_report_rendered_again_only_when_its_inputs_change(tmp_path: Path, capsys) -> None:
    """A real campaign's report (tests/fixtures/model-campaign): a second
    run with the same results, options and code renders nothing; a changed
    result, option or missing output renders again, and so would a changed
    template (its hash)."""
    from kablab.report.cli import INPUTS_FILE, PACKAGE_DIR, inputs_digest, main
    camp = tmp_path / "c"
    shutil.copytree(REPO / "tests/fixtures/model-campaign", camp)
    index = camp / "index.html"

    def render(*more: str) -> str:
        capsys.readouterr()
        assert main([str(camp), *more]) == 0
        return capsys.readouterr().out

    assert "up to date" not in render()
    digest = (camp / INPUTS_FILE).read_text().strip()
    first = index.stat().st_mtime_ns
    assert render().startswith("kablab.report: up to date: ")
    assert index.stat().st_mtime_ns == first and (camp / INPUTS_FILE).read_text().strip() == digest

    # a block measured again (here: one result less) changes the report
    (camp / "results/grouped/page-fault-block1.json").unlink()
    assert "up to date" not in render()
    assert index.stat().st_mtime_ns > first and ",grouped,page-fault,1," not in (camp / "results.csv").read_text()
    assert render().startswith("kablab.report: up to date: ")
    # so do other options, an output that went missing, and --force
    assert "up to date" not in render("--min-effect", "2")
    (camp / "summary.txt").unlink()
    assert "up to date" not in render("--min-effect", "2") and (camp / "summary.txt").is_file()
    assert "up to date" not in render("--min-effect", "2", "--force")

    # the code is an input: an edited template gives another hash
    code = tmp_path / "kablab"
    shutil.copytree(PACKAGE_DIR, code, ignore=shutil.ignore_patterns("__pycache__"))
    opts = ["baseline=", "variants=", "min_effect=0.0"]
    same = inputs_digest(camp, opts, package_dir=code)
    template = code / "report/templates/report.html.j2"
    template.write_text(template.read_text() + "<!-- changed -->\n")
    assert inputs_digest(camp, opts, package_dir=code) != same
