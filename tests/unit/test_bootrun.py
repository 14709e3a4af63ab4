"""kablab/bootrun.py: the guest command's plan and the blocks' time bounds."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kablab.bootrun import block_timeouts, collect_boot, guest_plan, split_frames

SPECS = [{"name": "syscall-mix", "argv": ["--iterations", "50000", "--seed", "1"], "runs": 3, "warmup": 1,
          "timeout_s": 300},
         {"name": "module-bpf-churn", "argv": ["--module", "/var/tmp/kablab/kablab churn.ko", "--seed", "1"],
          "runs": 2, "warmup": 0, "timeout_s": 60}]


def test_plan_is_one_tab_separated_line_per_block():
    lines = guest_plan(SPECS, "/run/kablab/config/kablab", ["task-clock", "dTLB-load-misses"]).splitlines()
    assert len(lines) == 2
    name, runs, warmup, timeout, events, command = lines[1].split("\t")
    assert (name, runs, warmup, timeout, events) == ("module-bpf-churn", "2", "0", "60", "task-clock,dTLB-load-misses")
    assert shlex.split(command) == ["/run/kablab/config/kablab/module-bpf-churn", "--module",
                                    "/var/tmp/kablab/kablab churn.ko", "--seed", "1"]


def test_plan_refuses_what_the_guest_would_misread():
    with pytest.raises(ValueError, match="tab or newline"):
        guest_plan([{**SPECS[0], "argv": ["a\tb"]}], "/g", ["task-clock"])
    with pytest.raises(ValueError, match="empty"):
        guest_plan(SPECS, "/g", [])


def test_block_timeouts():
    assert block_timeouts(SPECS, 120) == [{"name": "syscall-mix", "timeout_s": 1320},
                                          {"name": "module-bpf-churn", "timeout_s": 240}]


def test_split_frames_keeps_a_cut_block():
    parts = split_frames("noise\nkablab-block a begin\nkablab-raw 1\nx eA==\nkablab-raw end\nkablab-block a end 0\n"
                         "kablab-block b begin\nkablab-raw 1\n")
    assert parts["a"] == {"stream": "kablab-raw 1\nx eA==\nkablab-raw end\n", "ended": True, "rc": 0}
    assert parts["b"] == {"stream": "kablab-raw 1\n", "ended": False, "rc": None}


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/guest-boot"


def test_recorded_guest_frames_become_valid_results(tmp_path):
    """A real guest's frames (stock, syscall-mix, module-bpf-churn and
    fault-inject; recorded by the suite's first one-command boot, which
    also ran an empty plan line as a nameless block: blocks not planned
    are ignored) with that boot's real provenance."""
    frames = (FIXTURE / "stock-boot6.frames").read_text()
    meta = json.loads((FIXTURE / "boot-meta.json").read_text())
    specs = [{"name": n, "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300, "primary_metric": m}
             for n, m in (("syscall-mix", "ops_per_s"), ("module-bpf-churn", "module_loads_per_s"),
                          ("fault-inject", "ns_per_iteration"))]
    boot = {"variant": "stock", "block": 0, "meta": meta, "sha256": {}, "variants": ["stock", "grouped", "split4k"],
            "perf_events": ["task-clock"], "tlb": "", "tlb_records": None, "noise": None,
            "console_log": "logs/stock-boot6.log"}
    watch = {"complete": True, "stopped": None,
             "blocks": {"syscall-mix": {"began": "2026-12-05T16:51:55Z", "ended": "2026-12-05T16:52:02Z", "rc": 0}}}
    out = collect_boot(tmp_path, boot, specs, frames, watch)
    assert out == {"ok": [s["name"] for s in specs], "failed": [], "remaining": [], "errors": []}
    doc = json.loads((tmp_path / "results/stock/syscall-mix-block0.json").read_text())
    assert (doc["started_at"], doc["finished_at"]) == ("2026-12-05T16:51:55Z", "2026-12-05T16:52:02Z")
    assert len(doc["runs"]) == 3 and all(r["included"] for r in doc["runs"])
    assert doc["guest"]["uname_r"] == "6.1.192-kablab-stock" and "tlb_model" not in doc
    churn = json.loads((tmp_path / "results/stock/module-bpf-churn-block0.json").read_text())
    assert churn["runs"][0]["metrics"]["module_loads_per_s"]["value"] > 0


def test_provenance_of_another_boot_is_refused(tmp_path):
    """A boot that failed early must not be recorded with the previous
    boot's description (a stale fact once labelled panicboot's results
    'stock')."""
    meta = json.loads((FIXTURE / "boot-meta.json").read_text())
    boot = {"variant": "panicboot", "block": 0, "meta": meta, "sha256": {}, "variants": ["stock", "panicboot"],
            "perf_events": ["task-clock"], "tlb": None, "tlb_records": None, "noise": None, "console_log": None}
    spec = {"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300,
            "primary_metric": "ops_per_s"}
    out = collect_boot(tmp_path, boot, [spec], "", boot_failure={"stage": "boot", "reason": "panicked"})
    assert out["ok"] == [] and out["failed"] == []
    assert out["errors"] == ["syscall-mix: the provenance describes stock round 0, not the boot of panicboot round 0"]
    assert not (tmp_path / "results").exists()
