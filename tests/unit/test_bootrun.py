"""kablab/lab/bootrun.py: the guest command's plan, the blocks' time bounds, the
boot's record and its results."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kablab.lab.bootrun import block_timeouts, boot_record, collect_boot, guest_plan, progress, split_frames
from kablabtest import recorded_boot as boot_inputs

SPECS = [{"name": "syscall-mix", "argv": ["--iterations", "50000", "--seed", "1"], "runs": 3, "warmup": 1,
          "timeout_s": 300},
         {"name": "module-bpf-churn", "argv": ["--module", "/var/tmp/kablab/kablab churn.ko", "--seed", "1"],
          "runs": 2, "warmup": 0, "timeout_s": 60}]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/guest-boot"


def test_plan_names_the_binaries_then_each_block_and_its_argv_one_per_line():
    plan = guest_plan(SPECS, "/run/kablab/config/kablab", ["task-clock", "dTLB-load-misses"],
                      {"syscall-mix": "aa" * 32, "module-bpf-churn": "bb" * 32, "unused": "cc" * 32})
    lines = [line.split("\t") for line in plan.splitlines()]
    assert lines[:2] == [["binary", "module-bpf-churn", "bb" * 32], ["binary", "syscall-mix", "aa" * 32]]
    i = lines.index(["block", "module-bpf-churn", "2", "0", "60", "task-clock,dTLB-load-misses"])
    # the argument with a space stays one argument: nothing parses it as shell
    assert lines[i + 1:] == [["arg", "/run/kablab/config/kablab/module-bpf-churn"], ["arg", "--module"],
                             ["arg", "/var/tmp/kablab/kablab churn.ko"], ["arg", "--seed"], ["arg", "1"]]


def test_plan_refuses_what_the_guest_would_misread():
    with pytest.raises(ValueError, match="tab or newline"):
        guest_plan([{**SPECS[0], "argv": ["a\tb"]}], "/g", ["task-clock"])
    with pytest.raises(ValueError, match="tab or newline"):
        guest_plan([{**SPECS[0], "argv": ["a\nb"]}], "/g", ["task-clock"])
    with pytest.raises(ValueError, match="empty"):
        guest_plan(SPECS, "/g", [])


def test_block_timeouts():
    assert block_timeouts(SPECS, 120) == [{"name": "syscall-mix", "timeout_s": 1320},
                                          {"name": "module-bpf-churn", "timeout_s": 240}]


def test_split_frames_keeps_the_description_and_a_cut_block():
    parts = split_frames("noise\nkablab-describe begin\nkablab-raw 1\nuname_r eA==\nkablab-raw end\n"
                         "kablab-describe end\nkablab-block a begin\nkablab-raw 1\nx eA==\nkablab-raw end\n"
                         "kablab-block a end 0\nkablab-block b begin\nkablab-raw 1\n")
    assert parts["describe"] == "kablab-raw 1\nuname_r eA==\nkablab-raw end\n"
    assert parts["refused"] is None
    assert parts["blocks"]["a"] == {"stream": "kablab-raw 1\nx eA==\nkablab-raw end\n", "ended": True, "rc": 0}
    assert parts["blocks"]["b"] == {"stream": "kablab-raw 1\n", "ended": False, "rc": None}
    assert split_frames("kablab-boot refused a binary differs\n")["refused"] == "a binary differs"


def test_boot_record_is_the_results_provenance():
    """From a real boot's inputs and the description its guest sent, the
    record that boot wrote."""
    record = json.loads((FIXTURE / "boot-record.json").read_text())
    frames = (FIXTURE / "stock-boot1.frames").read_text()
    from kablab.results import rawframe
    described = rawframe.parse(split_frames(frames)["describe"])
    rec = boot_record(boot_inputs(record), described)
    assert rec == {**record, "tlb_model": None}
    assert rec["guest"]["vcpus"] == 2 and rec["guest"]["boot"] == 1 and rec["host"]["lane"] == 0
    assert rec["host"]["accel"] == "tcg" and "accel" not in rec["guest"]
    assert rec["guest"]["uname_r"] == "6.1.192-kablab-stock" and rec["guest"]["uname_v"].startswith("#")
    assert rec["tools"]["hyperfine"].startswith("hyperfine ")


def test_a_boot_without_a_noise_sample_records_none():
    """A pass rescued before its noise sample: Ansible renders the missing
    sample as "", which the schema refuses; the record says None."""
    record = json.loads((FIXTURE / "boot-record.json").read_text())
    inputs = boot_inputs(record)
    assert boot_record({**inputs, "noise": ""})["host"]["noise"] is None


def test_recorded_guest_frames_become_valid_results(tmp_path):
    """A real guest's frames (stock: syscall-mix, module-bpf-churn and
    fault-inject) with that boot's real provenance: the boot's record is
    written once, and every result carries it."""
    frames = (FIXTURE / "stock-boot1.frames").read_text()
    record = json.loads((FIXTURE / "boot-record.json").read_text())
    specs = [{"name": n, "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300, "primary_metric": m}
             for n, m in (("syscall-mix", "ops_per_s"), ("module-bpf-churn", "module_loads_per_s"),
                          ("fault-inject", "ns_per_iteration"))]
    watch = {"complete": True, "stopped": None,
             "blocks": {"syscall-mix": {"began": "2026-12-07T00:11:34Z", "ended": "2026-12-07T00:11:40Z", "rc": 0}}}
    out = collect_boot(tmp_path, boot_inputs(record), specs, frames, watch)
    assert out == {"ok": [s["name"] for s in specs], "failed": [], "remaining": [], "errors": []}
    written = json.loads((tmp_path / "boots/stock-boot1.json").read_text())
    doc = json.loads((tmp_path / "results/stock/syscall-mix-block0.json").read_text())
    assert (doc["started_at"], doc["finished_at"]) == ("2026-12-07T00:11:34Z", "2026-12-07T00:11:40Z")
    assert {k: doc[k] for k in ("host", "guest", "kernel", "tools", "campaign")} == \
        {k: written[k] for k in ("host", "guest", "kernel", "tools", "campaign")}
    assert doc["guest"]["uname_r"] == "6.1.192-kablab-stock" and "tlb_model" not in doc
    assert [r["exit_code"] for r in doc["runs"]] == [0, 0, 0] and doc["runs"][0]["work"]["unit"] == "syscall"
    churn = json.loads((tmp_path / "results/stock/module-bpf-churn-block0.json").read_text())
    assert churn["runs"][0]["metrics"]["module_loads_per_s"]["value"] > 0


def test_a_guest_that_refuses_fails_every_block_at_boot(tmp_path):
    meta = json.loads((FIXTURE / "boot-record.json").read_text())
    spec = {"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300,
            "primary_metric": "ops_per_s"}
    frames = "kablab-boot refused a workload binary is not the one built on the controller: syscall-mix: FAILED\n"
    out = collect_boot(tmp_path, boot_inputs(meta), [spec], frames, {"complete": True, "stopped": None})
    assert out["failed"] == ["syscall-mix"] and out["remaining"] == []
    doc = json.loads((tmp_path / "results/stock/syscall-mix-block0.json").read_text())
    assert doc["failure"]["stage"] == "boot"
    assert doc["failure"]["reason"].startswith("the guest refused to run: a workload binary is not the one built")


def test_a_guest_that_never_came_up_has_no_other_boots_provenance(tmp_path):
    """A boot that failed before its guest joined records no guest of an
    earlier boot (a stale one once labelled panicboot's results 'stock'),
    and writes no boot record."""
    meta = json.loads((FIXTURE / "boot-record.json").read_text())
    boot = {**boot_inputs(meta), "guest": {}}
    boot["entry"] = {**boot["entry"], "variant": "panicboot"}
    spec = {"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300,
            "primary_metric": "ops_per_s"}
    out = collect_boot(tmp_path, boot, [spec], "", boot_failure={"stage": "boot", "reason": "panicked"})
    assert out["failed"] == ["syscall-mix"] and out["errors"] == []
    doc = json.loads((tmp_path / "results/panicboot/syscall-mix-block0.json").read_text())
    assert doc["variant"] == "panicboot" and "uname_r" not in doc["guest"] and "boot" not in doc["guest"]
    assert not (tmp_path / "boots").exists()


def test_progress_line():
    plan = [{"variant": v, "block": b, "host": h, "order_index": i}
            for i, (v, b, h) in enumerate([("stock", 0, "a"), ("split4k", 0, "b"), ("split4k", 1, "a"),
                                           ("stock", 1, "b")])]
    assert progress(plan, plan[2], "a", False, 1, 100.0) == \
        "kablab: boot 3/4 on a: split4k block 1; 1 boot(s) done here in 100 s, ETA 100 s"
    assert progress(plan, plan[0], "a", True, 0, 3.0).endswith("(done, skipped); 0 boot(s) done here in 3 s, "
                                                                "ETA unknown until the first boot ends")


def test_status_command_as_the_run_role_calls_it(tmp_path, capsys):
    """kablab.lab.bootrun status with the run role's argv: what is left of the
    boot and its progress line (a finished result is skipped)."""
    from kablab.lab.bootrun import main
    plan = [{"variant": "stock", "block": 0, "host": "h", "order_index": 0},
            {"variant": "split4k", "block": 0, "host": "h-lane1", "order_index": 1}]
    (tmp_path / "plan.json").write_text(json.dumps({"plan": plan}))
    argv = ["status", str(tmp_path), "--entry", json.dumps(plan[1]), "--host", "h-lane1", "--done", "0",
            "--started", "0", "--workloads", "pagecache-read", "page-fault"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["todo"] == ["pagecache-read", "page-fault"]
    assert out["message"].startswith("kablab: boot 2/2 on h-lane1: split4k block 0;")


MODEL_CAMPAIGN = Path(__file__).resolve().parents[1] / "fixtures/model-campaign"


def test_pending_of_a_finished_campaign_is_empty_and_each_boot_says_done(tmp_path, capsys):
    """kablab.lab.bootrun pending on a real finished campaign: no boot left,
    one "(done, skipped)" line per planned boot, on its host."""
    from kablab.lab.bootrun import main
    camp = tmp_path / "c"
    shutil.copytree(MODEL_CAMPAIGN, camp)
    plan = json.loads((camp / "plan.json").read_text())["plan"]
    assert main(["pending", str(camp)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pending"] == []
    lines = [line for host_lines in out["done"].values() for line in host_lines]
    assert len(lines) == len(plan) and all(line.endswith("(done, skipped)") for line in lines)
    assert lines[0] == f"kablab: boot 1/{len(plan)} on localhost: stock block 0 (done, skipped)"


def test_pending_names_the_boots_with_a_missing_or_failed_result_and_moves_nothing(tmp_path):
    from kablab.lab.bootrun import pending
    camp = tmp_path / "c"
    shutil.copytree(MODEL_CAMPAIGN, camp)
    plan = json.loads((camp / "plan.json").read_text())["plan"]
    (camp / "results/grouped/page-fault-block1.json").unlink()
    failed = camp / "results/split4k/pagecache-read-block0.json"
    doc = json.loads(failed.read_text())
    doc.update(status="failed", failure={"stage": "run", "reason": "guest lost", "exit_code": None, "signal": None,
                                         "stderr_tail": None, "console_log": None, "console_tail": None})
    failed.write_text(json.dumps(doc))
    out = pending(camp)
    want = [e for e in plan if (e["variant"], e["block"]) in {("grouped", 1), ("split4k", 0)}]
    assert out["pending"] == sorted(want, key=lambda e: e["order_index"])
    assert sum(map(len, out["done"].values())) == len(plan) - 2
    # read only: the failed attempt stays where the run role's status finds it
    assert failed.exists() and not (camp / "attempts").exists()


def test_collect_command_records_a_boot_failure_as_the_run_role_passes_it(tmp_path, capsys, monkeypatch):
    """The rescue's --boot-failure: the reason (join.yml's message for a
    panicboot guest), its console log and tail; every workload fails at boot."""
    import io
    from kablab.lab.bootrun import main
    meta = json.loads((FIXTURE / "boot-record.json").read_text())
    boot = {**boot_inputs(meta), "guest": {}}
    boot["entry"] = {**boot["entry"], "variant": "panicboot"}
    spec = {"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 3, "warmup": 1, "timeout_s": 300,
            "primary_metric": "ops_per_s"}
    said = {"reason": "kablab-panicboot panicked at boot: Kernel panic - not syncing: VFS: Unable to mount root fs "
                      "on unknown-block(0,0) (console /var/lib/kablab/logs/c/panicboot-boot1.log)" + "x" * 3000,
            "console_log": "/var/lib/kablab/logs/c/panicboot-boot1.log",
            "console_tail": "[    6.062301] Kernel panic - not syncing"}
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["collect", str(tmp_path), "--boot", json.dumps(boot), "--specs", json.dumps([spec]),
                 "--boot-failure", json.dumps(said)]) == 0
    assert json.loads(capsys.readouterr().out)["failed"] == ["syscall-mix"]
    failure = json.loads((tmp_path / "results/panicboot/syscall-mix-block0.json").read_text())["failure"]
    assert failure == {"stage": "boot", "reason": said["reason"][:2000], "exit_code": None, "signal": None,
                       "stderr_tail": None, "console_log": "logs/panicboot-boot1.log",
                       "console_tail": said["console_tail"]}
