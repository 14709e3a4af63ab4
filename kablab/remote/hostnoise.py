"""Host noise during a boot: load average, steal and the busiest other processes.

On the hypervisor (run as a standalone script, stdlib only)::

    hostnoise.py start STATE            # at the boot's start: CPU and per-process ticks
    hostnoise.py since STATE [--own D]  # at each result: the interval's summary as JSON

The summary goes into the result's host.noise; the report shows the last
one of each boot (the longest interval). Parsing is pure over a procfs root
so the unit tests run on captured files.
"""
import json
import os
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
TOP = 3


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_ticks(stat_text):
    """The aggregate 'cpu' line of /proc/stat as a dict of tick counters."""
    for line in (stat_text or "").splitlines():
        if line.startswith("cpu "):
            names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
            vals = [int(x) for x in line.split()[1:9]]
            return dict(zip(names, vals + [0] * (8 - len(vals))))
    return None


def proc_ticks(root="/"):
    """{pid: [comm, utime+stime, cmdline head]} of every process under root/proc."""
    out = {}
    proc = os.path.join(root, "proc")
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        stat = _read(os.path.join(proc, pid, "stat"))
        if not stat or ")" not in stat:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[0] is state (field 3); utime and stime are fields 14 and 15.
        out[pid] = [comm, int(fields[11]) + int(fields[12])]
    return out


def sample(root="/"):
    load = (_read(os.path.join(root, "proc/loadavg")) or "").split()
    return {"t": time.time(), "loadavg1": float(load[0]) if load else None,
            "cpu": cpu_ticks(_read(os.path.join(root, "proc/stat"))), "procs": proc_ticks(root)}


def own_pids(root, domain):
    """Pids of the QEMU running domain (its -name guest=<domain>): the guest
    itself, not noise."""
    if not domain:
        return set()
    pids = set()
    for pid in os.listdir(os.path.join(root, "proc")):
        if pid.isdigit():
            cmd = (_read(os.path.join(root, "proc", pid, "cmdline")) or "").split("\0")
            # libvirt passes "-name guest=<domain>,debug-threads=on"
            if any(a == f"guest={domain}" or a.startswith(f"guest={domain},") for a in cmd):
                pids.add(pid)
    return pids


def between(a, b, own=(), top=TOP):
    """The interval a -> b: steal and busy % of all CPU time, load, and the
    busiest processes other than own (pids) and the sampler itself."""
    dt = b["t"] - a["t"]
    out = {"interval_s": round(dt, 1), "loadavg1": b.get("loadavg1"),
           "steal_pct": None, "busy_pct": None, "top": []}
    ca, cb = a.get("cpu"), b.get("cpu")
    if ca and cb:
        d = {k: cb[k] - ca.get(k, 0) for k in cb}
        total = sum(d.values())
        if total > 0:
            out["steal_pct"] = round(100.0 * d["steal"] / total, 2)
            out["busy_pct"] = round(100.0 * (total - d["idle"] - d["iowait"] - d["steal"]) / total, 2)
    if dt > 0:
        busy = []
        for pid, (comm, ticks) in b.get("procs", {}).items():
            if pid in own or str(pid) == str(os.getpid()):
                continue
            prev = a.get("procs", {}).get(pid)
            # A process born during the interval counts all its ticks.
            d = ticks - (prev[1] if prev and prev[0] == comm else 0)
            if d > 0:
                busy.append({"comm": comm, "pcpu": round(100.0 * d / CLK_TCK / dt, 1)})
        busy.sort(key=lambda p: -p["pcpu"])
        out["top"] = busy[:top]
    return out


def boot_rows(results, boot_key):
    """One row per boot: the noise of its last result (the interval from the
    boot's start to its last workload). boot_key(result) names the boot."""
    last = {}
    for r in results:
        n = (r.get("host") or {}).get("noise")
        if not n:
            continue
        k = (r["variant"], boot_key(r))
        if k not in last or (n.get("interval_s") or 0) >= (last[k][1].get("interval_s") or 0):
            last[k] = (r, n)
    rows = []
    for (variant, boot), (r, n) in last.items():
        rows.append({"variant": variant, "boot": boot, "host": (r.get("host") or {}).get("name"),
                     "order_index": r.get("order_index"), "interval_s": n.get("interval_s"),
                     "loadavg1": n.get("loadavg1"), "steal_pct": n.get("steal_pct"),
                     "busy_pct": n.get("busy_pct"),
                     "top": ", ".join(f"{p['comm']} {p['pcpu']:g}%" for p in n.get("top") or [])})
    rows.sort(key=lambda d: (d["order_index"] is None, d["order_index"] or 0, d["variant"]))
    return rows


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] not in ("start", "since"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, state = argv[0], argv[1]
    root = os.environ.get("KABLAB_PROC_ROOT", "/")
    if cmd == "start":
        tmp = state + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(sample(root), f)
        os.replace(tmp, state)
        return 0
    own = argv[3] if len(argv) > 3 and argv[2] == "--own" else ""
    with open(state, encoding="utf-8") as f:
        start = json.load(f)
    print(json.dumps(between(start, sample(root), own_pids(root, own))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
