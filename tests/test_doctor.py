"""make doctor's playbook on this host: TCG (no usable KVM) and no PMU, so
accel and vpmu invalidate results; smoke warns, full refuses unless accepted."""
from __future__ import annotations

import json

from kablabtest import run_playbook


def doctor(tmp_path, *extra: str):
    record = tmp_path / "doctor.json"
    run = run_playbook("doctor.yml", "-e", f"host_doctor_record={record}", *extra, timeout=600)
    return run, (json.loads(record.read_text()) if record.exists() else None)


def test_doctor_on_this_host_smoke_warns(tmp_path):
    run, doc = doctor(tmp_path, "-e", "kablab_profile=smoke")
    assert run.rc == 0, run.output[-3000:]
    verdicts = {f["check"]: f["verdict"] for f in doc["findings"]}
    assert verdicts["accel"] == "invalidates" and verdicts["vpmu"] == "invalidates"
    assert verdicts["nx_huge_pages"] == "ok" and verdicts["numa"] == "ok"
    assert doc["probe"]["accel"] == "tcg"
    assert doc["summary"] == "TCG: timings emulated, TLB counters unsupported (the TLB model counts them: kablab_tlb_model)"
    assert "kablab_tlb_model" in next(f["fix"] for f in doc["findings"] if f["check"] == "vpmu")
    # one printed line per check, each with its verdict
    for check in verdicts:
        assert f'"{check:<14} {verdicts[check]}' in run.output
    assert "WARNING localhost: accel, vpmu invalidate results" in run.output


def test_doctor_full_refuses_then_accepts(tmp_path):
    run, _ = doctor(tmp_path, "-e", "kablab_profile=full")
    assert run.rc != 0
    assert "accel, vpmu would invalidate results" in run.output
    assert "-e kablab_accept=accel,vpmu" in run.output
    run, doc = doctor(tmp_path, "-e", "kablab_profile=full", "-e", "kablab_accept=accel,vpmu")
    assert run.rc == 0, run.output[-3000:]
    assert doc["accepted"] == ["accel", "vpmu"] and doc["unaccepted"] == []


def test_doctor_rejects_unknown_accept(tmp_path):
    run, _ = doctor(tmp_path, "-e", "kablab_accept=acel")
    assert run.rc != 0
    assert "kablab_accept names unknown checks ['acel']" in run.output
