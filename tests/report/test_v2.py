"""The report on synthetic campaigns: the verdict matrix first, the
direct-map panel, the TLB matrix, provenance, summary.txt and the compare CLI."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import make_campaign as mc
from kablab.results.load import load_campaign
from kablab.report.render import render_campaign

KERNELS = ("stock", "grouped", "split4k")
EFFECTS = {"grouped": {("hackbench", "time_s"): 0.06},
           "split4k": {("pipe-pingpong", "round_trips_per_s"): 0.06,
                       ("hackbench", "dTLB-load-misses"): 0.5}}


class Tables(HTMLParser):
    """id -> list of rows (list of cell texts) of every table with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.rows_attrs: dict[str, list[dict[str, str]]] = {}
        self._stack: list[str | None] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._stack.append(a.get("id"))
            if a.get("id"):
                self.tables[a["id"]] = []
                self.rows_attrs[a["id"]] = []
        elif self._stack and self._stack[-1]:
            if tag == "tr":
                self.tables[self._stack[-1]].append([])
                self.rows_attrs[self._stack[-1]].append(a)
            elif tag in ("td", "th"):
                self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._stack:
            self._stack.pop()
        elif tag in ("td", "th") and self._cell is not None and self._stack and self._stack[-1]:
            self.tables[self._stack[-1]][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Tables:
    t = Tables()
    t.feed(html)
    return t


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    camp = mc.synthetic_campaign(tmp_path_factory.mktemp("v2") / "c", seed=3, boots=8, runs=3,
                                 variants=KERNELS, effects=EFFECTS, sd_between=0.01,
                                 sd_within=0.01, directmap=True, perf=True,
                                 drop={"split4k": ("rtt_p99_us",)})
    render_campaign(load_campaign(camp))
    return camp


def test_verdict_matrix_shape_and_first(synth: Path) -> None:
    html = (synth / "index.html").read_text(encoding="utf-8")
    body = html[html.index("<body>"):]
    assert body.index("<table") == body.index('<table id="verdict-matrix"')
    vm = parse(html).tables["verdict-matrix"]
    assert vm[0] == ["workload", "primary metric", "grouped", "split4k"]
    assert [r[0] for r in vm[1:]] == sorted(mc.SYNTH_WORKLOADS)
    for wl in mc.SYNTH_WORKLOADS:
        assert f'<a href="#wl{sorted(mc.SYNTH_WORKLOADS).index(wl)}">{wl}</a>' in html
    cells = {r[0]: dict(zip(vm[0][2:], r[2:])) for r in vm[1:]}
    assert "\u25bc worse" in cells["hackbench"]["grouped"]
    assert "\u25b2 better" in cells["pipe-pingpong"]["split4k"]
    assert "8/8 boots" in cells["hackbench"]["grouped"]
    assert "[s], lower is better" in vm[1][1]
    # unflagged cells have no marker and no colour
    assert "\u25b2" not in cells["syscall-mix"]["grouped"] + cells["syscall-mix"]["split4k"]
    assert "(0.00%)" not in html


def test_verdict_matrix_not_tested_cells(tmp_path: Path) -> None:
    camp = mc.synthetic_campaign(tmp_path / "c", seed=1, boots=1, runs=3, variants=KERNELS)
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    vm = parse(html).tables["verdict-matrix"]
    assert len(vm) == 4 and all(len(r) == 4 for r in vm)
    assert all(c.startswith("not tested: 1 boot per kernel") for r in vm[1:] for c in r[2:])
    assert "(0.00%)" not in html and "0.00%" not in "".join(c for r in vm for c in r)


def test_dm_cost_formula() -> None:
    from kablab.report.render import dm_cost_kib
    gib = 1048576
    assert dm_cost_kib({"DirectMap4k": 2 * gib, "DirectMap2M": 0}) == 2048 * 2  # 4 MiB / 2 GiB
    assert dm_cost_kib({"DirectMap4k": 16384, "DirectMap2M": 2 * gib - 16384}) == (8 + 2) * 4
    assert dm_cost_kib({"DirectMap4k": 1, "DirectMap2M": 1}) == 8          # ceil, not floor
    assert dm_cost_kib({"DirectMap4k": None, "DirectMap2M": None}) is None


def test_direct_map_panel_one_row_per_boot(synth: Path) -> None:
    html = (synth / "index.html").read_text(encoding="utf-8")
    t = parse(html)
    rows = t.tables["direct-map-table"][1:]
    attrs = t.rows_attrs["direct-map-table"][1:]
    assert len(rows) == 3 * 8                                     # kernels x boots
    assert [a["data-variant"] for a in attrs] == [v for v in KERNELS for _ in range(8)]
    for a in attrs:
        mem_gib = int(a["data-memory-mib"]) / 1024
        per_gib = int(a["data-cost-kib-after"]) / mem_gib
        if a["data-variant"] == "split4k":
            assert a["data-dm2m-after"] == "0" and 1900 <= per_gib <= 2100
        else:
            assert int(a["data-dm2m-after"]) > 0 and per_gib < 100
    # after boot -> after the workload set: the first block's before, the last's after
    stock0 = rows[0]
    assert stock0[3] == "16384 \u2192 22528"                       # 3 workloads, 1 split each
    assert html.index('id="verdict-matrix"') < html.index('id="direct-map"')
    txt = (synth / "summary.txt").read_text(encoding="utf-8")
    assert "ceil(DirectMap4k/2048 kB) + ceil(DirectMap2M/1048576 kB)" in txt


def test_tlb_matrix_tested_and_not_supported(synth: Path) -> None:
    html = (synth / "index.html").read_text(encoding="utf-8")
    t = parse(html)
    tlb = t.tables["tlb"]
    assert tlb[0] == ["workload", "measure", *KERNELS]
    rows = {(r[0], r[1]): r[2:] for r in tlb[1:]}
    assert set(rows) == {(wl, f"{k} misses/kinstr") for wl in mc.SYNTH_WORKLOADS
                         for k in ("dTLB", "iTLB")}
    assert all(c == "not supported: iTLB-load-misses"
               for wl in mc.SYNTH_WORKLOADS for c in rows[(wl, "iTLB misses/kinstr")])
    hb = rows[("hackbench", "dTLB misses/kinstr")]
    assert "between 8 boots" in hb[0] and "\u25bc worse" in hb[2]     # +50 % misses
    assert "\u25bc" not in hb[1] and "\u25b2" not in hb[1]
    assert "no PMU" not in html
    for c in (c for r in tlb[1:] for c in r[2:]):
        assert not re.match(r"^0(\.0+)?(\s|$)", c), c                   # never 0 for missing
    import json
    merged = json.loads((synth / "results.json").read_text())
    sig = [c for c in merged["tlb"]["comparisons"] if c["significant"]]
    assert [(c["workload"], c["variant"]) for c in sig] == [("hackbench", "split4k")]
    txt = (synth / "summary.txt").read_text(encoding="utf-8")
    assert "not supported: iTLB-load-misses" in txt


def test_tlb_matrix_modelled_rows(tmp_path: Path) -> None:
    """Real plugin counts (tests/fixtures/tlbmodel) as each run's `model`
    block; split4k's kernel 4k misses tripled: rows per kinstr, the label."""
    import copy
    import json
    from kablab.results import tlbmodel
    recs = tlbmodel.load(Path(__file__).resolve().parents[1] / "fixtures" / "tlbmodel"
                         / "qemu-boot-stock-8mib.jsonl")
    params = tlbmodel.records(recs, "params")[0]
    real = tlbmodel.runs_by_id(recs)[1]
    camp = mc.synthetic_campaign(tmp_path / "c", seed=2, boots=3, runs=3,
                                 variants=("stock", "split4k"))
    for f in (camp / "results").glob("*/*.json"):
        doc = json.loads(f.read_text())
        for run in doc["runs"]:
            rec = copy.deepcopy(real)
            k4 = rec["counts"]["kernel"]["dtlb"]["4k"]
            k4["l1_miss"] = (k4["l1_miss"] * (3 if doc["variant"] == "split4k" else 1)
                             + run["index"] + doc["block"])
            run["model"] = tlbmodel.model_block(rec)
        doc["tlb_model"] = {"enabled": True, "params": params,
                            "label": tlbmodel.params_label(params)}
        f.write_text(json.dumps(doc))
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    attrs = parse(html).rows_attrs["tlb"][1:]
    assert {a["data-source"] for a in attrs} == {"modelled"}
    measures = {a["data-measure"] for a in attrs}
    # the synthetic runs report no work: per 1000 instructions, said as TCG's
    assert {f"kernel dTLB L1 misses 4k {tlbmodel.PER_KINSTR}", f"kernel dTLB L1 misses 2M {tlbmodel.PER_KINSTR}",
            f"kernel dTLB walks {tlbmodel.PER_KINSTR}", f"user dTLB L1 misses {tlbmodel.PER_KINSTR}"} <= measures
    assert "(modelled)" in html
    assert "modelled: QEMU TCG, goldencove (l1d 4k 96x6w" in html
    rows = {(r[0], r[1]): r[2:] for r in parse(html).tables["tlb"][1:]}
    # 3101 misses over 16.06 M kernel instructions = 0.193 per kinstr on stock
    stock = [v for (wl, m), v in rows.items() if m.startswith("kernel dTLB L1 misses 4k per")][0]
    assert stock[0].startswith("0.193"), stock
    txt = (camp / "summary.txt").read_text(encoding="utf-8")
    assert "(modelled) rows: modelled: QEMU TCG, goldencove" in txt


def test_tlb_matrix_direct_map_rows_from_real_records(tmp_path: Path) -> None:
    """Each kernel's runs carry its own real plugin record (stock's and
    split4k's 16 MiB reads under -icount, tests/fixtures/tlbmodel) and the
    work those runs did (16 MiB read): the direct-map rows come per MiB,
    walks before L1 misses, split4k's walks hundreds of times stock's, and
    the modelled verdict matrix leads the first screen with that ratio."""
    import json
    from kablab.results import tlbmodel
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "tlbmodel"
    recs = {v: tlbmodel.load(fix / f"icount-{v}-16mib.jsonl") for v in ("stock", "split4k")}
    params = tlbmodel.records(recs["stock"], "params")[0]
    camp = mc.synthetic_campaign(tmp_path / "c", seed=2, boots=3, runs=3,
                                 variants=("stock", "split4k"))
    for f in (camp / "results").glob("*/*.json"):
        doc = json.loads(f.read_text())
        for run in doc["runs"]:
            run["model"] = tlbmodel.model_block(tlbmodel.runs_by_id(recs[doc["variant"]])[1])
            # a boot's runs differ by a few walks, as real boots do
            run["work"] = {"amount": 16.0 - 0.01 * (run["index"] + doc["block"] * len(doc["variant"]) % 3),
                           "unit": "MiB"}
        doc["tlb_model"] = {"enabled": True, "params": params,
                            "label": tlbmodel.params_label(params, "shift=0")}
        f.write_text(json.dumps(doc))
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    measures = [a["data-measure"] for a in parse(html).rows_attrs["tlb"][1:]
                if a["data-workload"] == "pipe-pingpong"]
    assert measures[:3] == ["direct-map dTLB walks per MiB", "kernel dTLB walks per MiB",
                            "kernel iTLB walks per MiB"], measures
    assert "direct-map dTLB L1 misses per MiB" in measures
    rows = {(r[0], r[1]): r[2:] for r in parse(html).tables["tlb"][1:]}
    walks = rows[("pipe-pingpong", "direct-map dTLB walks per MiB (modelled)")]
    stock = tlbmodel.per_mib(tlbmodel.runs_by_id(recs["stock"])[1]["counts"], "kernel", tlbmodel.DIRECT_MAP,
                             "walks", 16)
    split = tlbmodel.per_mib(tlbmodel.runs_by_id(recs["split4k"])[1]["counts"], "kernel", tlbmodel.DIRECT_MAP,
                             "walks", 16)
    assert split > 100 * stock > 0
    assert walks[0].startswith(f"{stock:.2g}") and walks[1].startswith(f"{split:.3g}"), (walks, stock, split)
    # the first screen: modelled verdicts before the time verdicts, the model banner
    assert html.index('id="model-matrix"') < html.index('id="verdict-matrix"')
    assert "Modelled TLB, emulated time" in html and "TLB differences not measurable" not in html
    model = {r[0]: r[1:] for r in parse(html).tables["model-matrix"][1:]}
    measure, base, cell = model["pipe-pingpong"]
    assert measure == "direct-map dTLB walks per MiB"
    ratio = float(re.search(r"\u00d7([\d,.]+)", cell).group(1).replace(",", ""))
    assert ratio == pytest.approx(split / stock, rel=0.05)
    assert "\u25bc more" in cell
    txt = (camp / "summary.txt").read_text(encoding="utf-8")
    assert txt.index("== modelled TLB verdicts") < txt.index("== time verdicts (emulated)")


def test_wrapper_time_only_in_provenance_and_plots_not_green_red(synth: Path) -> None:
    html = (synth / "index.html").read_text(encoding="utf-8")
    prov = html.index('id="provenance"')
    assert "wall_s" not in html[:prov].replace("wall_s</code> is never tested", "")
    assert 'class="wrapper-wall"' in html[prov:]
    for green_red in ("#55a868", "#c44e52"):
        assert green_red not in html.lower()
    txt = (synth / "summary.txt").read_text(encoding="utf-8")
    body = txt[:txt.index("== noise and power")]
    assert "wall_s" not in body


def test_provenance_without_none(synth: Path, rendered: Path) -> None:
    for camp in (synth, rendered):
        for name in ("index.html", "summary.txt", "summary-lkp.txt"):
            text = (camp / name).read_text(encoding="utf-8")
            assert not re.search(r"\bNone\b", text), (camp, name)
    html = (rendered / "index.html").read_text(encoding="utf-8")
    prov = parse(html).tables["prov-kernels"]
    by = {r[0]: r for r in prov[1:]}
    assert list(by) == ["stock", "grouped", "split4k"]
    assert "b" * 64 in by["grouped"][2] and "CONFIG_KABLAB_GROUPED=y" in by["grouped"][3]
    assert "rodata=full" in by["split4k"][4] and "console=ttyS0" in by["stock"][4]
    assert "#5555eeee6666ffff" in by["split4k"][1] and "sha256 " + "1111aaaa2222bbbb" * 4 \
        in by["stock"][3]
    # the series version beside the build key; a build that predates the record says so
    assert "3333cccc4444dddd" in by["grouped"][1] and by["grouped"][2].startswith("common v1, grouped v3")
    assert by["split4k"][2].startswith("series versions not recorded")
    assert "variant:" not in html


def test_each_workload_s_argv_is_shown(tmp_path: Path) -> None:
    """The argv each workload ran with, from a real campaign's results, in
    the provenance table beside its binary's sha256."""
    import shutil
    camp = tmp_path / "c"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "model-campaign", camp)
    render_campaign(load_campaign(camp))
    rows = {r[0]: r for r in parse((camp / "index.html").read_text(encoding="utf-8")).tables["prov-binaries"][1:]}
    churn = json.loads(next((camp / "results" / "stock").glob("module-bpf-churn-*.json")).read_text())
    assert " ".join(churn["binary"]["args"]) == rows["module-bpf-churn"][2]
    assert "--module-loads" in rows["module-bpf-churn"][2] and "--seed 1" in rows["pagecache-read"][2]


def test_qemu_libvirt_versions_where_present(tmp_path: Path) -> None:
    import json
    camp = mc.synthetic_campaign(tmp_path / "c", seed=2, boots=2, runs=2)
    for f in (camp / "results").glob("*/*.json"):
        doc = json.loads(f.read_text())
        doc["host"]["qemu_version"] = "QEMU emulator version 7.2.15"
        doc["host"]["libvirt_version"] = "libvirt 9.0.0"
        f.write_text(json.dumps(doc))
    camp_l = load_campaign(camp)
    render_campaign(camp_l)
    html = (camp / "index.html").read_text(encoding="utf-8")
    assert "QEMU emulator version 7.2.15" in html and "libvirt 9.0.0" in html


def test_summary_txt_starts_with_matrix_and_direct_map(synth: Path) -> None:
    txt = (synth / "summary.txt").read_text(encoding="utf-8")
    lines = txt.splitlines()
    assert all(len(ln) <= 100 for ln in lines)
    assert not any(ln.strip() == "SIGNIFICANT" for ln in lines)
    head = txt[:txt.index("== workload:")]
    assert head.index("== verdicts") < head.index("== direct map per boot") < head.index("Method:")
    assert re.search(r"grouped\s+[+-]\d+\.\d\d% \[[^]]+\]\s+\u25bc worse\s+8/8 boots", head)
    assert re.search(r"split4k\s+block 0\s+2097152\s+0\s+0\s+0\s+0\s+4096\s+2048", head)
    assert "Min      time_s" in txt and "Gmean    time_s" in txt     # compare-kernels tables


def test_compare_cli_names_colliding_kernels(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    a = mc.synthetic_campaign(tmp_path / "a", seed=1, boots=3, runs=2,
                              variants=("stock", "grouped"))
    b = mc.synthetic_campaign(tmp_path / "b", seed=2, boots=3, runs=2,
                              variants=("stock", "split4k"), directmap=True)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "kablab.report.compare", str(a), str(b), "--out",
                        str(out)], cwd=mc.REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    merged = json.loads((out / "results.json").read_text())
    assert merged["variants"] == ["synthetic-1:stock", "grouped", "synthetic-2:stock", "split4k"]
    assert merged["baseline"] == "synthetic-1:stock"
    html = (out / "index.html").read_text(encoding="utf-8")
    vm = parse(html).tables["verdict-matrix"]
    assert vm[0][2:] == ["grouped", "synthetic-2:stock", "split4k"]
    assert all(len(r) == 5 for r in vm)
    # same statistics: A's own comparison is unchanged by merging B in
    from kablab.report.stats import analyse
    alone = {(c.workload, c.metric): c.pct for c in analyse(load_campaign(a)).comparisons
             if c.tested and c.primary}
    both = {(c["workload"], c["metric"]): c["pct"] for c in merged["analysis"]["comparisons"]
            if c["variant"] == "grouped" and c["tested"] and c["primary"]}
    assert alone == pytest.approx(both)
    assert (p2 := subprocess.run([sys.executable, "-m", "kablab.report.compare", str(a),
                                  str(tmp_path / "nope"), "--out", str(out)], cwd=mc.REPO,
                                 capture_output=True, text=True)).returncode == 1, p2.stderr


def test_browser_first_screen(synth: Path, tmp_path: Path) -> None:
    """Headless Chromium: #verdict-matrix is in the first screen; no console errors;
    the screenshot of the first screen stays in the test's tmp dir."""
    from kablabtest import console_lines, need, report_probe, report_screenshot
    need("chromium")
    shot = tmp_path / "first-screen.png"
    p = report_screenshot(synth / "index.html", shot)
    assert p.returncode == 0, p.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert console_lines(p.stderr) == []
    probe = report_probe(synth / "index.html", tmp_path / "probe")
    assert probe["visible"] and 0 <= probe["top"] < probe["height"] / 2
    assert probe["bottom"] <= probe["height"]
    assert probe["matrix"][0][2:] == ["grouped", "split4k"]
    assert len(probe["matrix"]) == 1 + len(mc.SYNTH_WORKLOADS)
    assert {d["variant"] for d in probe["dm"]} == set(KERNELS)
    assert "(0.00%)" not in probe["text"] and not re.search(r"\bNone\b", probe["provenance"])


def test_tlb_per_operation_where_the_workload_counts_operations(tmp_path: Path) -> None:
    import json
    camp = mc.synthetic_campaign(tmp_path / "c", seed=4, boots=3, runs=2,
                                 variants=("stock", "split4k"), perf=True,
                                 workloads=("hackbench", "syscall-mix"))
    for f in (camp / "results").glob("*/syscall-mix-*.json"):
        doc = json.loads(f.read_text())
        for run in doc["runs"]:
            run["metrics"]["iterations"] = {"value": 1000.0, "unit": "ops", "better": "higher"}
        f.write_text(json.dumps(doc))
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    rows = {(a["data-workload"], a["data-measure"]) for a in parse(html).rows_attrs["tlb"][1:]}
    assert ("syscall-mix", "dTLB misses/op") in rows and ("syscall-mix", "iTLB misses/op") in rows
    assert ("hackbench", "dTLB misses/op") not in rows
    # the work the harness reports (wl_work) names the unit, as the modelled rows do
    for f in (camp / "results").glob("*/syscall-mix-*.json"):
        doc = json.loads(f.read_text())
        for run in doc["runs"]:
            run["work"] = {"amount": 5000.0, "unit": "syscall"}
        f.write_text(json.dumps(doc))
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    rows = {(a["data-workload"], a["data-measure"]) for a in parse(html).rows_attrs["tlb"][1:]}
    assert ("syscall-mix", "iTLB misses per syscall") in rows and ("syscall-mix", "iTLB misses/op") not in rows


def test_real_model_campaign_first_screen(tmp_path: Path) -> None:
    """A real model campaign (tests/fixtures/model-campaign, two rounds):
    its report opens with the modelled verdicts, split4k's direct-map walks
    per MiB read flagged against stock with the interval of the ratio, and
    grouped's fewer walks per module/BPF load (its direct map stays 2M)."""
    import shutil
    camp = tmp_path / "c"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "model-campaign", camp)
    render_campaign(load_campaign(camp))
    html = (camp / "index.html").read_text(encoding="utf-8")
    assert html.index('id="model-matrix"') < html.index('id="direct-map-table"') < html.index('id="verdict-matrix"')
    model = {r[0]: r[1:] for r in parse(html).tables["model-matrix"][1:]}
    measure, stock, grouped, split = model["pagecache-read"]
    assert measure == "direct-map dTLB walks per MiB"
    ratio = re.search(r"\u00d7([\d,.]+) \[\u00d7([\d,.]+), \u00d7([\d,.]+)\] \u25bc more", split)
    assert ratio and float(ratio.group(2).replace(",", "")) > 100, split
    assert "\u25b2 fewer" in model["module-bpf-churn"][2] and "\u25bc more" in model["module-bpf-churn"][3]
    assert "2/2 boots" in split
    txt = (camp / "summary.txt").read_text(encoding="utf-8")
    assert "host localhost: TCG: modelled TLB, emulated time" in txt


def test_model_matrix_one_row_per_named_measure(tmp_path: Path) -> None:
    """A workload that names a list of measures (seccomp-stack: kernel iTLB
    walks and L1 misses) gets one row of the modelled matrix per measure, in
    its order; the others keep one."""
    import shutil
    camp = tmp_path / "c"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "model-campaign", camp)
    wanted = ["kernel dTLB walks", "direct-map dTLB L1 misses"]
    for f in (camp / "results").glob("*/pagecache-read-*.json"):
        doc = json.loads(f.read_text())
        doc["model_measure"] = wanted
        f.write_text(json.dumps(doc))
    render_campaign(load_campaign(camp))
    rows = parse((camp / "index.html").read_text(encoding="utf-8")).tables["model-matrix"][1:]
    measures = [r[1] for r in rows if r[0] == "pagecache-read"]
    assert measures == [m + " per MiB" for m in wanted], rows
    assert len([r for r in rows if r[0] == "page-fault"]) == 1, rows
