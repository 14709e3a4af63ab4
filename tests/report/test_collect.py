"""kablab.results.collect and the raw-file parsers, on real-shaped tool output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kablab.results import collect
from kablab.results.rawparse import parse_hyperfine, parse_perf_csv, parse_perf_line
from kablab.util import validation_errors

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample"


def test_real_hyperfine_json() -> None:
    hf = parse_hyperfine((RAW / "hyperfine.json").read_text())
    assert len(hf["times"]) == 3
    assert hf["exit_codes"] == [0, 0, 0]
    assert hf["user_times"] is None          # hyperfine 1.15 exports only the mean
    assert isinstance(hf["user"], float)


def test_real_perf_output_and_unsupported() -> None:
    for n in (1, 2, 3):
        (g,) = parse_perf_csv((RAW / f"run-{n}.perf").read_text())     # one run, one group
        assert g["dTLB-loads"]["supported"] is False
        assert g["dTLB-loads"]["value"] is None          # never 0
        assert g["page-faults"]["supported"] is True
        assert isinstance(g["page-faults"]["value"], int) and g["page-faults"]["value"] > 0
        assert g["task-clock"]["unit"] == "msec"


def test_perf_taskclock_msec_and_not_counted() -> None:
    g = parse_perf_csv((RAW / "perf-taskclock.csv").read_text())[0]
    assert g["task-clock"]["unit"] == "msec" and g["task-clock"]["value"] > 0
    ev, rec = parse_perf_line("<not counted>,,iTLB-load-misses,0,0.00,,")
    assert ev == "iTLB-load-misses" and rec["value"] is None and rec["supported"] is False
    ev, rec = parse_perf_line("123456,,dTLB-loads,1000000,100.00,,")
    assert rec["value"] == 123456 and rec["supported"] is True
    assert parse_perf_line("# started on Thu Dec  3 07:41:08 2026") is None
    assert parse_perf_line("") is None


def test_collect_raw_sample(tmp_path: Path) -> None:
    """Every run from its own files, by index: harness JSON, perf, status."""
    out = tmp_path / "sub" / "r.json"
    assert collect.main([str(RAW), str(out)]) == 0
    doc = json.loads(out.read_text())
    assert validation_errors(doc) == []
    assert doc["status"] == "ok" and len(doc["runs"]) == 3 and doc["collect"]["warnings"] == []
    for n, run in enumerate(doc["runs"], 1):
        harness = json.loads((RAW / f"run-{n}.json").read_text())
        assert run["metrics"]["round_trips_per_s"]["value"] == harness["metrics"]["round_trips_per_s"]["value"]
        assert run["exit_code"] == 0 and run["included"]
        assert run["perf"]["dTLB-loads"]["value"] is None and run["perf"]["page-faults"]["value"] > 0
        assert run["work"] == {"amount": 2000.0, "unit": "round trip"}
    assert doc["runs"][1]["metrics"]["round_trips_per_s"]["unit"] == "1/s"
    assert doc["directmap"]["before"]["DirectMap4k"] is not None
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]   # no temp file left


def _copy(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    return raw


def test_ok_block_missing_files_becomes_failed(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    (raw / "hyperfine.json").unlink()
    (raw / "vmstat.after").unlink()
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "failed"
    assert doc["failure"]["stage"] == "collect"
    assert "hyperfine.json" in doc["failure"]["reason"] and "vmstat.after" in doc["failure"]["reason"]


def test_corrupt_hyperfine_becomes_failed(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    (raw / "hyperfine.json").write_text('{"results": [')
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "failed" and doc["failure"]["stage"] == "collect"
    assert "hyperfine.json" in doc["failure"]["reason"]


def test_failed_block_with_only_meta(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    meta = json.loads((RAW / "meta.json").read_text())
    meta["status"] = "failed"
    meta["failure"] = {"stage": "boot", "reason": "kernel panic", "exit_code": None,
                       "signal": None, "stderr_tail": None, "console_log": "logs/x.log",
                       "console_tail": "Kernel panic - not syncing"}
    (raw / "meta.json").write_text(json.dumps(meta))
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "failed" and doc["runs"] == []
    assert doc["failure"]["console_tail"] == "Kernel panic - not syncing"
    assert doc["directmap"]["after"]["DirectMap4k"] is None


def test_runs_that_failed_are_kept_and_excluded(tmp_path: Path) -> None:
    """The shapes kablab-guest-run leaves: a crashed run (its status 139, no
    JSON), a run killed with perf by the timeout (137, no perf output), a
    run whose status file is missing (unknown), a run that said 0 but
    printed no JSON. Each keeps its index; hyperfine's codes are not read."""
    raw = _copy(tmp_path)
    (raw / "run-2.rc").write_text("139\n")
    (raw / "run-2.json").write_text("")
    (raw / "run-2.err").write_text("Segmentation fault\n")
    (raw / "run-3.rc").write_text("137\n")
    (raw / "run-3.perf").unlink()
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "ok"
    assert [r["exit_code"] for r in doc["runs"]] == [0, 139, 137]
    assert [r["included"] for r in doc["runs"]] == [True, False, False]
    assert doc["runs"][1]["exclude_reason"] == "exit code 139 (SIGSEGV)" and doc["runs"][1]["metrics"] == {}
    assert doc["runs"][2]["perf"] == {} and doc["runs"][2]["metrics"]["round_trips_per_s"]["value"] > 0
    (raw / "run-1.rc").unlink()
    (raw / "run-3.rc").write_text("0\n")
    (raw / "run-3.json").write_text("")
    doc = collect.collect_to(raw, tmp_path / "r2.json")
    assert doc["runs"][0]["exclude_reason"].startswith("exit code unknown")
    assert doc["runs"][2]["exclude_reason"] == "exit 0 without JSON output"
    assert doc["status"] == "failed" and "all 3 runs failed" in doc["failure"]["reason"]
    assert "[run 2] Segmentation fault" in doc["failure"]["stderr_tail"]


def test_missing_meta_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _copy(tmp_path)
    (raw / "meta.json").unlink()
    assert collect.main([str(raw), str(tmp_path / "r.json")]) == 1
    assert "meta.json is missing" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_ansible_failure_strings(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    meta = json.loads((RAW / "meta.json").read_text())
    meta["status"] = "failed"
    meta["failure"] = {"stage": "run", "reason": "Timeout", "exit_code": "124",
                       "signal": None, "stderr_tail": "", "console_log": None,
                       "console_tail": None}
    (raw / "meta.json").write_text(json.dumps(meta))
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["failure"]["exit_code"] == 124 and doc["failure"]["stderr_tail"] is None


def test_load_check_cli(tmp_path: Path) -> None:
    from kablab.results.load import main
    good = tmp_path / "good.json"
    collect.collect_to(RAW, good)
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text()[:100])
    assert main(["--check", str(good)]) == 0
    assert main(["--check", str(good), str(bad)]) == 1
    assert main(["--check", str(tmp_path / "missing.json")]) == 1


TLB_FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tlbmodel"


def _tlb_raw(tmp_path: Path, base: int) -> Path:
    """The raw sample as a block of a kablab_tlb_model campaign: the runner's
    tlb.json and meta.tlb_model; the plugin's per-boot output comes from a
    real boot (tests/fixtures/tlbmodel, ids 1 and 2)."""
    raw = _copy(tmp_path)
    meta = json.loads((raw / "meta.json").read_text())
    meta["tlb_model"] = {"enabled": True, "cmdline": "nokaslr no5lvl nopcid", "plugin_args": "",
                         "plugin_sha256": "0" * 64, "root": "0x1c0a000"}
    (raw / "meta.json").write_text(json.dumps(meta))
    (raw / "tlb.json").write_text(json.dumps({"base": base}) + "\n")
    return raw


def test_tlb_model_block_per_run(tmp_path: Path) -> None:
    raw = _tlb_raw(tmp_path, 0)
    collect.select_tlb_records(TLB_FIX / "qemu-boot-stock-8mib.jsonl", raw)
    kept = [json.loads(ln)["type"] for ln in (raw / "tlbmodel.jsonl").read_text().splitlines()]
    assert kept == ["params", "run", "run"]          # the boot's total is not this block's
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert validation_errors(doc) == []
    m0 = doc["runs"][0]["model"]
    assert m0["id"] == 1 and m0["counts"]["kernel"]["dtlb"]["4k"]["l1_miss"] == 3101
    assert m0["totals"]["kernel"]["insns"] == 16055570
    assert doc["runs"][1]["model"]["id"] == 2
    assert "model" not in doc["runs"][2]             # 3 runs, the boot had 2 brackets
    assert any("1 of 3 run(s) have no model counts" in w for w in doc["collect"]["warnings"])
    assert doc["runs"][0]["perf"]["dTLB-loads"]["value"] is None   # perf stays beside it
    tm = doc["tlb_model"]
    assert tm["params"]["core"] == "goldencove" and tm["params"]["root"] == "0x1c0a000"
    assert tm["label"].startswith("modelled: QEMU TCG, goldencove")
    assert tm["cmdline"] == "nokaslr no5lvl nopcid"


def test_tlb_model_other_blocks_and_missing_output(tmp_path: Path) -> None:
    raw = _tlb_raw(tmp_path, 65536)                  # the boot's first block: ids 65537..
    collect.select_tlb_records(TLB_FIX / "qemu-boot-stock-8mib.jsonl", raw)
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert all("model" not in r for r in doc["runs"])
    assert any("no run record for their marks" in w for w in doc["collect"]["warnings"])
    raw2 = _tlb_raw(tmp_path / "b", 65536)
    collect.select_tlb_records(tmp_path / "no-such.jsonl", raw2)   # QEMU wrote nothing
    doc2 = collect.collect_to(raw2, tmp_path / "r2.json")
    assert doc2["status"] == "ok" and doc2["tlb_model"]["params"] is None
    assert any("no plugin records" in w for w in doc2["collect"]["warnings"])


def test_no_tlb_model_no_block(tmp_path: Path) -> None:
    doc = collect.collect_to(_copy(tmp_path), tmp_path / "r.json")
    assert "tlb_model" not in doc and all("model" not in r for r in doc["runs"])


def test_tlb_model_guest_flags_fail_the_block(tmp_path: Path) -> None:
    """The guest runner lists in tlb.json which of pcid, la57 and pti the
    guest's /proc/cpuinfo has (kablab-guest-run); any of them fails the
    block at boot with the reason, and no run gets model counts."""
    raw = _tlb_raw(tmp_path, 0)
    (raw / "tlb.json").write_text(json.dumps({"base": 0, "cpu_flags": "pcid"}) + "\n")
    collect.select_tlb_records(TLB_FIX / "qemu-boot-stock-8mib.jsonl", raw)
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert validation_errors(doc) == []
    assert doc["status"] == "failed" and doc["failure"]["stage"] == "boot"
    assert doc["failure"]["reason"].startswith("tlb model guard: PCID is on in the guest")
    assert all("model" not in r for r in doc["runs"])
    raw2 = _tlb_raw(tmp_path / "b", 0)                  # none of them: the block stands
    (raw2 / "tlb.json").write_text(json.dumps({"base": 0, "cpu_flags": ""}) + "\n")
    collect.select_tlb_records(TLB_FIX / "qemu-boot-stock-8mib.jsonl", raw2)
    doc2 = collect.collect_to(raw2, tmp_path / "r2.json")
    assert doc2["status"] == "ok" and doc2["runs"][0]["model"]["id"] == 1
