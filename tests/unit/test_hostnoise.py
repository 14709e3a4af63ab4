"""kablab.remote.hostnoise on two captured /proc snapshots of this host (3 s apart)."""
from __future__ import annotations

import os

from kablab.remote import hostnoise

HERE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hostnoise")


def samples():
    a, b = hostnoise.sample(os.path.join(HERE, "a")), hostnoise.sample(os.path.join(HERE, "b"))
    a["t"], b["t"] = 0.0, 3.0  # the capture interval (the files carry no clock)
    return a, b


def test_interval_summary():
    a, b = samples()
    n = hostnoise.between(a, b)
    assert n["interval_s"] == 3.0
    assert n["loadavg1"] == float(open(os.path.join(HERE, "b/proc/loadavg")).read().split()[0])
    assert 0 <= n["steal_pct"] <= 100 and 0 < n["busy_pct"] <= 100
    assert 0 < len(n["top"]) <= hostnoise.TOP
    assert n["top"] == sorted(n["top"], key=lambda p: -p["pcpu"])
    assert "qemu-system-x86" in {p["comm"] for p in hostnoise.between(a, b, top=10)["top"]}


def test_own_guest_is_not_noise():
    a, b = samples()
    qemu = [pid for pid, (comm, _) in b["procs"].items() if comm.startswith("qemu-system")]
    assert qemu
    n = hostnoise.between(a, b, own=set(qemu), top=10)
    assert all(not p["comm"].startswith("qemu-system") for p in n["top"])


def test_cpu_line():
    assert hostnoise.cpu_ticks("cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 1") == {
        "user": 1, "nice": 2, "system": 3, "idle": 4, "iowait": 5, "irq": 6, "softirq": 7, "steal": 8}
    assert hostnoise.cpu_ticks("") is None
