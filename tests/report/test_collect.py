"""kablab.collect and the raw-file parsers, on real-shaped tool output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kablab import collect
from kablab.rawparse import parse_hyperfine, parse_perf_csv, parse_perf_line
from kablab.util import validation_errors

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample"


def test_real_hyperfine_json() -> None:
    hf = parse_hyperfine((RAW / "hyperfine.json").read_text())
    assert len(hf["times"]) == 3
    assert hf["exit_codes"] == [0, 0, 0]
    assert hf["user_times"] is None          # hyperfine 1.15 exports only the mean
    assert isinstance(hf["user"], float)


def test_real_perf_csv_groups_and_unsupported() -> None:
    groups = parse_perf_csv((RAW / "perf.csv").read_text())
    assert len(groups) == 2                   # two `# started on` groups (--append)
    for g in groups:
        assert g["dTLB-loads"]["supported"] is False
        assert g["dTLB-loads"]["value"] is None          # never 0
        assert g["page-faults"]["supported"] is True
        assert isinstance(g["page-faults"]["value"], int) and g["page-faults"]["value"] > 0
        assert g["context-switches"]["supported"] is True


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
    out = tmp_path / "sub" / "r.json"
    assert collect.main([str(RAW), str(out)]) == 0
    doc = json.loads(out.read_text())
    assert validation_errors(doc) == []
    assert doc["status"] == "ok" and len(doc["runs"]) == 3
    assert doc["runs"][0]["perf"]["dTLB-loads"]["value"] is None
    assert doc["runs"][2]["perf"] == {}                    # 2 perf groups for 3 runs
    assert any("perf.csv" in w for w in doc["collect"]["warnings"])
    assert doc["runs"][1]["metrics"]["round_trips_per_s"]["value"] == 60576.76348
    assert doc["runs"][1]["metrics"]["round_trips_per_s"]["unit"] == "1/s"
    assert doc["directmap"]["before"]["DirectMap4k"] is not None
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]   # no temp file left


def _copy(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    return raw


def test_ok_block_missing_files_becomes_failed(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    (raw / "perf.csv").unlink()
    (raw / "vmstat.after").unlink()
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "failed"
    assert doc["failure"]["stage"] == "collect"
    assert "perf.csv" in doc["failure"]["reason"] and "vmstat.after" in doc["failure"]["reason"]


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


def test_nonzero_exit_run_kept_but_excluded(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    hf = json.loads((raw / "hyperfine.json").read_text())
    hf["results"][0]["exit_codes"] = [0, 1, 0]
    (raw / "hyperfine.json").write_text(json.dumps(hf))
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert doc["status"] == "ok"
    assert [r["exit_code"] for r in doc["runs"]] == [0, 1, 0]
    assert [r["included"] for r in doc["runs"]] == [True, False, True]


def test_missing_meta_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _copy(tmp_path)
    (raw / "meta.json").unlink()
    assert collect.main([str(raw), str(tmp_path / "r.json")]) == 1
    assert "meta.json is missing" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_runner_shaped_block(tmp_path: Path) -> None:
    """The shape roles/workload_runner/files/kablab-guest-run writes: a `{}` harness
    line for a run without JSON, a placeholder perf group, Ansible-stringified ints."""
    raw = _copy(tmp_path)
    hf = json.loads((raw / "hyperfine.json").read_text())
    hf["results"][0]["exit_codes"] = [0, 137, 0]
    (raw / "hyperfine.json").write_text(json.dumps(hf))
    lines = (raw / "harness.jsonl").read_text().splitlines()
    (raw / "harness.jsonl").write_text("\n".join([lines[0], "{}", lines[2]]) + "\n")
    groups = (raw / "perf.csv").read_text()
    (raw / "perf.csv").write_text(groups + "# started on (run 3 produced no perf output)\n")
    meta = json.loads((raw / "meta.json").read_text())
    meta["block"], meta["order_index"], meta["campaign"]["seed"] = "2", "7", "1"
    meta["runner"]["runs"] = "3"
    (raw / "meta.json").write_text(json.dumps(meta))
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert (doc["block"], doc["order_index"], doc["campaign"]["seed"]) == (2, 7, 1)
    assert [r["included"] for r in doc["runs"]] == [True, False, True]
    assert doc["runs"][1]["metrics"] == {} and doc["runs"][1]["exit_code"] == 137
    assert doc["runs"][2]["metrics"]["round_trips_per_s"]["value"] == 65010.12419
    assert doc["runs"][2]["perf"] == {}
    assert doc["runs"][1]["perf"]["page-faults"]["value"] == 48


def test_runner_exit_codes_beat_hyperfine(tmp_path: Path) -> None:
    """hyperfine sees kablab-guest-run's wrapper exit 1 for a crash; runner.json
    has the signal, and a broken runner.json falls back with a warning."""
    raw = _copy(tmp_path)
    hf = json.loads((raw / "hyperfine.json").read_text())
    hf["results"][0]["exit_codes"] = [0, 1, 1]
    (raw / "hyperfine.json").write_text(json.dumps(hf))
    (raw / "runner.json").write_text('{"hyperfine_rc": 0, "exit_codes": [0, 139, null]}')
    doc = collect.collect_to(raw, tmp_path / "r.json")
    assert [r["exit_code"] for r in doc["runs"]] == [0, 139, None]
    assert doc["runs"][1]["exclude_reason"] == "exit code 139 (SIGSEGV)"
    assert doc["runs"][2]["exclude_reason"].startswith("exit code unknown")
    (raw / "runner.json").write_text('{"exit_codes": [0, 139]}')
    doc = collect.collect_to(raw, tmp_path / "r2.json")
    assert [r["exit_code"] for r in doc["runs"]] == [0, 1, 1]
    assert any("runner.json has no exit code list for 3 runs" in w for w in doc["collect"]["warnings"])


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
    from kablab.load import main
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
