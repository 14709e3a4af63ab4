"""scripts/kablab-accel-probe: the one KVM-or-TCG answer, asked at once by
several hypervisor entries of one machine (inventory/two-hosts.yml)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kablabtest import REPO

PROBES = 6


def test_concurrent_probes_all_answer_and_leave_one_record(kernels, tmp_path: Path) -> None:
    # A cold two-host campaign once failed a block here: both hosts wrote
    # accel-probe.json.tmp and the second rename found it gone.
    record = tmp_path / "publish" / "accel-probe.json"
    cmd = [str(REPO / "scripts/kablab-accel-probe"), "--kernel", kernels["stock"]["bzimage"],
           "--timeout", "20", "--record", str(record)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(PROBES)]
    streams = [p.communicate(timeout=120) for p in procs]
    outs = [(p.returncode, out, err) for p, (out, err) in zip(procs, streams)]
    assert all(rc == 0 for rc, _, _ in outs), [(rc, err) for rc, _, err in outs]
    answers = [json.loads(out) for _, out, _ in outs]
    assert len({a["accel"] for a in answers}) == 1, answers
    assert answers[0]["accel"] in ("kvm", "tcg") and answers[0]["reason"]
    kept = json.loads(record.read_text())
    assert kept["accel"] == answers[0]["accel"] and kept["fresh"] is True
    assert sorted(p.name for p in record.parent.iterdir()) == ["accel-probe.json"]
    # the next probe reads the record instead of probing again
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(again.stdout) == {**kept, "fresh": False}
    print(f"{PROBES} probes at once: {answers[0]['accel']} ({answers[0]['reason']})")
