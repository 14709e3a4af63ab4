"""kablab.results.tlbmodel on real plugin output: tests/fixtures/tlbmodel/ holds
records written by tlbmodel's plugin in a booted guest (see the README there)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kablab.results import tlbmodel

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tlbmodel"
KERNELS = Path(os.environ.get("KABLAB_CACHE_DIR", Path.home() / ".cache" / "kablab")) / "kernels"


def test_root_from_system_map() -> None:
    text = ("ffffffff81000000 T _text\n"
            "ffffffff81c0a000 D init_top_pgt\n"
            "ffffffff81c0b000 D level4_kernel_pgt\n")
    assert tlbmodel.root_from_system_map(text) == 0x1C0A000
    assert tlbmodel.root_from_system_map(text, phys_base=0x200000) == 0x1E0A000
    with pytest.raises(ValueError):
        tlbmodel.root_from_system_map("ffffffff81000000 T _text\n")


def test_root_cli(tmp_path: Path, capsys) -> None:
    (tmp_path / "System.map").write_text("ffffffff81c0a000 D init_top_pgt\n")
    assert tlbmodel.main(["root", str(tmp_path / "System.map")]) == 0
    assert capsys.readouterr().out.strip() == "0x1c0a000"
    assert tlbmodel.main(["root", str(tmp_path / "missing")]) == 1
    (tmp_path / "bzImage").write_bytes(b"")
    kernels = json.dumps({"stock": {"bzimage": str(tmp_path / "bzImage"), "release": "6.1.0-kablab-stock"}})
    assert tlbmodel.main(["roots", kernels]) == 0
    assert json.loads(capsys.readouterr().out) == {"stock": "0x1c0a000"}
    assert tlbmodel.main(["roots", json.dumps({"x": {"bzimage": str(tmp_path / "no/bzImage")}})]) == 1


def test_parse_drops_torn_line() -> None:
    text = (FIX / "qemu-boot-stock-8mib.jsonl").read_text()
    recs = tlbmodel.parse_jsonl(text + '{"type":"run","se')
    assert [r["type"] for r in recs] == ["params", "run", "run", "total"]


def test_real_run_records() -> None:
    recs = tlbmodel.load(FIX / "qemu-boot-stock-8mib.jsonl")
    runs = tlbmodel.runs_by_id(recs)
    assert sorted(runs) == [1, 2]
    block = tlbmodel.model_block(runs[1])
    k = block["totals"]["kernel"]
    # The 8 MiB read of the stock kernel (hand-summed from the record).
    assert k["insns"] == 16055570
    assert k["dtlb_acc"] == 4597921 + 7547231
    assert k["dtlb_l1_miss"] == 3101 and k["dtlb_walks"] == 16
    assert block["id"] == 1 and block["seq"] == 0
    # Read minus the empty bracket, per MiB: no 2M misses on stock's direct map.
    d = tlbmodel.diff_counts(runs[1]["counts"], runs[2]["counts"])
    assert tlbmodel.per_mib(d, "kernel", "dtlb", "l1_miss", 8, "2m") == 0
    assert tlbmodel.per_mib(d, "kernel", "dtlb", "l1_miss", 8) == pytest.approx((3101 - 479) / 8)
    assert tlbmodel.per_mib(d, "kernel", "dtlb", "l1_miss", 0) is None
    assert tlbmodel.per_kinsn(runs[1]["counts"], "kernel", "dtlb", "walks") == pytest.approx(16e3 / 16055570)
    assert tlbmodel.per_kinsn({}, "kernel", "dtlb", "walks") is None


def test_params_label() -> None:
    params = tlbmodel.records(tlbmodel.load(FIX / "qemu-boot-stock-8mib.jsonl"), "params")[0]
    label = tlbmodel.params_label(params)
    assert label.startswith("modelled: QEMU TCG, goldencove (")
    assert "l1d 4k 96x6w/2m 32x4w/1g 8 fa" in label
    assert "l2 4k 2048x16w/2m in 4k/1g 1024x8w" in label
    assert tlbmodel.params_label({}) == "modelled: QEMU TCG, ?"
    assert tlbmodel.params_label(params, "shift=0").startswith("modelled: QEMU TCG -icount shift=0, goldencove (")


def test_root_of_the_ci_kernel(capsys) -> None:
    # Decided when the test runs, not at collection: in `make test` the
    # kernels fixture has built the ci kernels by then; `make check` runs
    # without them. The manifest names the build, whatever its key.
    manifest = KERNELS / "manifest-ci.json"
    stock = json.loads(manifest.read_text()).get("stock") if manifest.exists() else None
    if not stock or not (Path(stock["dir"]) / "System.map").exists():
        pytest.skip("the ci stock kernel is not built here")
    # tlbmodel/README.md: init_top_pgt at ffffffff81c0a000, phys_base 0 (checked in /proc/iomem).
    text = (Path(stock["dir"]) / "System.map").read_text()
    assert tlbmodel.root_from_system_map(text) == 0x1C0A000
    # what guest_domain's tlb.yml asks for the built kernels
    built = {v: k for v, k in json.loads(manifest.read_text()).items()
             if (Path(k["bzimage"]).parent / "System.map").exists()}
    assert tlbmodel.main(["roots", json.dumps(built)]) == 0
    assert json.loads(capsys.readouterr().out)["stock"] == "0x1c0a000"


def test_records_without_direct_map_give_no_direct_map_figure() -> None:
    # The fixture predates dtlb_directmap: its direct-map figures are
    # missing, not 0, and the report gets no direct-map row from it.
    recs = tlbmodel.load(FIX / "qemu-boot-stock-8mib.jsonl")
    run = tlbmodel.runs_by_id(recs)[1]
    assert tlbmodel.per_mib(run["counts"], "kernel", tlbmodel.DIRECT_MAP, "walks", 8) is None
    assert tlbmodel.per_kinsn(run["counts"], "kernel", tlbmodel.DIRECT_MAP, "walks") is None
    assert "dtlb_directmap_walks" not in tlbmodel.model_block(run)["totals"]["kernel"]
    values = tlbmodel.panel_values(tlbmodel.model_block(run))
    assert "kernel dTLB walks" in values
    assert not any("direct-map" in name for name in values)


def test_campaign_guests_get_the_benchs_cmdline() -> None:
    # The booted check (scripts/bench-tlbmodel) and campaigns must boot the
    # model's guests alike, or their A/A figures say nothing of each other.
    import yaml
    repo = Path(__file__).resolve().parents[2]
    defaults = yaml.safe_load((repo / "roles/guest_domain/vars/main.yml").read_text())
    assert defaults["guest_domain_tlb_cmdline"] == tlbmodel.GUEST_CMDLINE
    assert "norandmaps" in tlbmodel.GUEST_CMDLINE.split()


def test_direct_map_figures_of_real_records() -> None:
    # tests/test_tlbmodel_boot.py's first stock and split4k boots (16 MiB read)
    def read(v):
        runs = tlbmodel.runs_by_id(tlbmodel.load(FIX / f"icount-{v}-16mib.jsonl"))
        return tlbmodel.diff_counts(runs[1]["counts"], runs[2]["counts"])
    stock, split = read("stock"), read("split4k")
    dm = tlbmodel.DIRECT_MAP
    assert tlbmodel.per_mib(stock, "kernel", dm, "walks", 16) == 0.25
    assert tlbmodel.per_mib(split, "kernel", dm, "walks", 16) == 264.6875
    # the direct map is a subset of the kernel's data translations
    for c in (stock, split):
        for s in tlbmodel.SIZES:
            for key in ("acc", "l1_miss", "walks"):
                assert c["kernel"][dm][s][key] <= c["kernel"]["dtlb"][s][key]
    block = tlbmodel.model_block(tlbmodel.runs_by_id(tlbmodel.load(FIX / "icount-split4k-16mib.jsonl"))[1])
    assert block["totals"]["kernel"]["dtlb_directmap_walks"] > 4000
    assert "dtlb_directmap_walks" not in block["totals"]["user"]
    values = tlbmodel.panel_values(block)
    assert values["direct-map dTLB walks"][0] == block["totals"]["kernel"]["dtlb_directmap_walks"]
    per = tlbmodel.normalised(block, {"amount": 16, "unit": "MiB"})
    assert per["direct-map dTLB walks"] == ("per MiB", block["totals"]["kernel"]["dtlb_directmap_walks"] / 16)
    # no work reported: per 1000 instructions of the measure's mode, named as TCG's
    unit, value = tlbmodel.normalised(block, None)["kernel dTLB walks"]
    assert unit == tlbmodel.PER_KINSTR
    assert value == pytest.approx(1000 * block["totals"]["kernel"]["dtlb_walks"] / block["totals"]["kernel"]["insns"])


def test_guest_flag_failures() -> None:
    # The guest runner's cpu_flags: which of pcid/la57/pti /proc/cpuinfo lists.
    assert tlbmodel.guest_flag_failures("") == []
    assert tlbmodel.guest_flag_failures(None) == []
    why = tlbmodel.guest_flag_failures("pcid pti")
    assert len(why) == 2 and "nopcid" in why[0] and "nopti" in why[1]
    assert "no5lvl" in tlbmodel.guest_flag_failures("la57")[0]
    assert tlbmodel.guest_flag_failures("la57", levels=5) == []


def test_records_before_guards_pass() -> None:
    # Run records written before the plugin had guards have none: no failure.
    run = tlbmodel.runs_by_id(tlbmodel.load(FIX / "qemu-boot-stock-8mib.jsonl"))[1]
    assert "guard" not in run and tlbmodel.guard_failures(run) == []
