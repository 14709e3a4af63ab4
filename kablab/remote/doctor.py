"""Host doctor: what on the hypervisor host decides whether TLB results mean anything.

Every check is a pure function over a sysfs/procfs root directory (``/`` on
a live host, a captured copy under tests/fixtures/hosts/<name>/ in the unit
tests) plus the lab's own decisions (the accel probe's record, the guest
memory backing, the vCPU pinning). Each returns one finding::

    {"check": "thp", "verdict": "ok" | "adds noise" | "invalidates",
     "invalidates": "<which results>" (only for that verdict),
     "detail": "what was read", "fix": "a command or a setting" | ""}

``python3 -m kablab.remote.doctor check`` prints one line per check and writes the
findings as JSON (the host_doctor role runs it; results carry the JSON);
``python3 -m kablab.remote.doctor capture DEST`` copies the files the checks read,
which is how the fixtures were taken; ``... fits BACKING MIB GUESTS`` exits 1
when the guests could not even start (guest_domain runs it before a boot).
"""
import argparse
import glob
import json
import os
import sys

OK, NOISE, INVALID, UNKNOWN = "ok", "adds noise", "invalidates", "unknown"
VERDICTS = (OK, NOISE, INVALID, UNKNOWN)
# Where no PMU counts TLB misses in a guest, the TLB model does.
MODEL_FIX = ("without one, the TLB model counts them: make smoke runs it where guests run under TCG "
             "(kablab_tlb_model=auto), -e kablab_tlb_model=true anywhere")
CHECKS = ("accel", "vpmu", "thp", "backing", "nx_huge_pages", "cpufreq", "smt", "isolated", "numa")

# Guest memory backings (guest_domain_memory_backing). 'memfd' is QEMU's
# memory-backend-memfd with shared access (what a plugin that reads guest RAM
# needs); its host page size follows the shmem THP setting. 'memfd-thp' is
# the same backend, declared to need THP on shmem: the doctor fails it
# unless shmem_enabled lets QEMU's MADV_HUGEPAGE through. 'hugepages' is the
# historical name of hugetlbfs at the host's default huge page size.
BACKINGS = ("default", "memfd", "memfd-thp", "hugetlbfs-2M", "hugetlbfs-1G", "hugepages")
HUGETLB_KIB = {"hugetlbfs-2M": 2048, "hugetlbfs-1G": 1048576}

# What a finding of each kind invalidates, named the way the report names results.
DIRECTMAP = "direct-map TLB differences (stock vs split4k): guest 2M mappings become 4k host mappings"
KTEXT = "kernel-text iTLB differences: executable huge pages are split to 4k in the EPT/NPT"
TLB_COUNTERS = "dTLB/iTLB counter results: perf events unsupported in the guest"
TIMINGS = "every timing as a hardware measure: TCG emulates the CPU and its TLB"

# Every file a check reads, relative to the root; globs are expanded.
FILES = (
    "proc/meminfo",
    "sys/kernel/mm/transparent_hugepage/enabled",
    "sys/kernel/mm/transparent_hugepage/defrag",
    "sys/kernel/mm/transparent_hugepage/shmem_enabled",
    "sys/kernel/mm/hugepages/hugepages-*/nr_hugepages",
    "sys/kernel/mm/hugepages/hugepages-*/free_hugepages",
    "sys/module/kvm/parameters/nx_huge_pages",
    "sys/module/kvm/parameters/enable_pmu",
    "sys/devices/system/cpu/vulnerabilities/itlb_multihit",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/isolated",
    "sys/devices/system/cpu/smt/control",
    "sys/devices/system/cpu/smt/active",
    "sys/devices/system/cpu/cpufreq/boost",
    "sys/devices/system/cpu/intel_pstate/no_turbo",
    "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
    "sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu[0-9]*/topology/core_id",
    "sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id",
    "sys/devices/system/node/online",
    "sys/devices/system/node/node[0-9]*/cpulist",
    "sys/devices/system/node/node[0-9]*/hugepages/hugepages-*/free_hugepages",
    "sys/bus/event_source/devices/*/type",
)


def read(root, rel):
    """The stripped text of root/rel, or None when the file is absent or unreadable."""
    try:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def bracketed(text):
    """The [selected] word of a sysfs choice file ('always [madvise] never' -> 'madvise')."""
    if text is None:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.split()[0] if text.split() else None


def cpulist(text):
    """'0-3,8' -> [0, 1, 2, 3, 8]; '' or None -> []."""
    out = []
    for part in (text or "").replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def finding(check, verdict, detail, fix="", invalidates=""):
    assert verdict in VERDICTS
    f = {"check": check, "verdict": verdict, "detail": detail, "fix": fix}
    if verdict == INVALID:
        f["invalidates"] = invalidates
    return f


def check_accel(probe):
    """The accelerator the lab's one boot probe (scripts/kablab-accel-probe)
    decided, from its record; this check does not probe again."""
    if not probe or probe.get("accel") not in ("kvm", "tcg"):
        return finding("accel", UNKNOWN, "accelerator unknown: no boot probe has run on this host yet "
                       "(a campaign's run stage boots one and keeps its answer)",
                       "run make smoke once, then make doctor")
    reason = probe.get("reason", "")
    if probe["accel"] == "kvm":
        return finding("accel", OK, f"KVM usable: {reason}")
    return finding("accel", INVALID, f"no usable KVM, guests run under TCG: {reason}",
                   "run on a host where a KVM guest boots (/dev/kvm from kvm_intel/kvm_amd, "
                   "user in group kvm)", TIMINGS)


def check_vpmu(root, accel):
    """Host-side preconditions of TLB perf events in a guest: a hardware PMU
    on the host (event source 'cpu'), kvm.enable_pmu, and KVM. Not a perf
    stat inside a guest: the campaign records that per result."""
    sources = sorted(os.path.basename(os.path.dirname(p))
                     for p in glob.glob(os.path.join(root, "sys/bus/event_source/devices/*/type")))
    has_pmu = "cpu" in sources or any(s.startswith("cpu_") for s in sources)
    enable = read(root, "sys/module/kvm/parameters/enable_pmu")
    srcs = ",".join(sources) or "none"
    if not has_pmu:
        return finding("vpmu", INVALID, f"no hardware PMU on the host (event sources: {srcs}): "
                       "TLB events 'not supported' in guests",
                       "use a host whose CPU exposes its PMU (bare metal, or a VM with vPMU); " + MODEL_FIX,
                       TLB_COUNTERS)
    if accel is None:
        return finding("vpmu", UNKNOWN, "host PMU present; whether guests get a vPMU depends on the "
                       "accelerator, unknown until a boot probe has run", "run make smoke once, then make doctor")
    if accel != "kvm":
        return finding("vpmu", INVALID, "host has a PMU but guests run under TCG, which has no vPMU",
                       "make KVM usable (see accel); " + MODEL_FIX, TLB_COUNTERS)
    if enable is not None and enable not in ("Y", "1"):
        return finding("vpmu", INVALID, f"kvm.enable_pmu={enable}", "boot the host with kvm.enable_pmu=1",
                       TLB_COUNTERS)
    return finding("vpmu", OK, "host PMU present, kvm.enable_pmu on; guests get <pmu state='on'/>")


def check_thp(root):
    mode = bracketed(read(root, "sys/kernel/mm/transparent_hugepage/enabled"))
    defrag = bracketed(read(root, "sys/kernel/mm/transparent_hugepage/defrag"))
    if mode is None:
        return finding("thp", NOISE, "no THP on the host kernel", "use a host kernel with CONFIG_TRANSPARENT_HUGEPAGE")
    detail = f"THP enabled={mode} defrag={defrag}"
    if mode == "never":
        return finding("thp", NOISE, detail + ": anonymous guest RAM stays 4k",
                       "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (QEMU madvises guest RAM)")
    # QEMU madvises its RAM MADV_HUGEPAGE, so madvise behaves like always for guest RAM.
    return finding("thp", OK, detail)


def hugetlb_free_kib(root):
    """{page size KiB: free pages} over the host's hugetlb pools."""
    out = {}
    for p in glob.glob(os.path.join(root, "sys/kernel/mm/hugepages/hugepages-*kB/free_hugepages")):
        size = int(os.path.basename(os.path.dirname(p))[len("hugepages-"):-2])
        out[size] = int(read(root, os.path.relpath(p, root)) or 0)
    return out


def meminfo_value(root, key):
    for line in (read(root, "proc/meminfo") or "").splitlines():
        k, _, v = line.partition(":")
        if k.strip() == key:
            return int(v.split()[0])
    return None


def check_backing(root, backing, memory_mib, guests=1):
    """Will guest RAM be backed by host huge pages, given the configured backing?"""
    if backing not in BACKINGS:
        raise ValueError(f"unknown backing {backing!r}, want one of {BACKINGS}")
    need_kib = memory_mib * 1024 * guests
    if backing in HUGETLB_KIB or backing == "hugepages":
        size = HUGETLB_KIB.get(backing) or meminfo_value(root, "Hugepagesize") or 2048
        free = hugetlb_free_kib(root).get(size)
        label = f"{size // 1024}M" if size < 1048576 else f"{size // 1048576}G"
        if free is None:
            return finding("backing", INVALID, f"{backing}: the host has no {label} hugetlb pool",
                           f"boot the host with hugepagesz={label} hugepages=N, or another backing", DIRECTMAP)
        if free * size < need_kib:
            n = -(-need_kib // size)
            return finding("backing", INVALID,
                           f"{backing}: {free} free {label} pages = {free * size // 1024} MiB, "
                           f"guests need {need_kib // 1024} MiB (guests would not start)",
                           f"echo {n} > /sys/kernel/mm/hugepages/hugepages-{size}kB/nr_hugepages", DIRECTMAP)
        return finding("backing", OK, f"{backing}: guest RAM on {label} host pages ({free} free)")
    if backing == "default":
        mode = bracketed(read(root, "sys/kernel/mm/transparent_hugepage/enabled"))
        if mode in ("always", "madvise"):
            return finding("backing", NOISE,
                           f"anonymous RAM, THP {mode}: 2M host pages where khugepaged/fault-time "
                           "allocation finds them (fragmentation varies per boot)",
                           "guest_domain_memory_backing=hugetlbfs-2M with pages reserved")
        return finding("backing", INVALID, f"anonymous RAM, THP {mode}: guest RAM backed by 4k host pages",
                       "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled, "
                       "or guest_domain_memory_backing=hugetlbfs-2M", DIRECTMAP)
    shmem = bracketed(read(root, "sys/kernel/mm/transparent_hugepage/shmem_enabled"))
    if shmem in ("always", "within_size", "advise", "force"):
        return finding("backing", NOISE if backing == "memfd" else OK,
                       f"{backing}: shared memfd, shmem THP {shmem}: 2M host pages where available")
    return finding("backing", INVALID, f"{backing}: shared memfd, shmem THP {shmem}: guest RAM backed by 4k host pages",
                   "echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled, "
                   "or guest_domain_memory_backing=hugetlbfs-2M", DIRECTMAP)


def backing_shortfall(root, backing, memory_mib, guests=1):
    """Why `guests` guests of memory_mib MiB cannot start on this backing
    (its hugetlb pool is missing or too small), None when they can. The
    other backings always start; check_backing judges what they do to the
    results."""
    if backing not in HUGETLB_KIB and backing != "hugepages":
        return None
    f = check_backing(root, backing, memory_mib, guests)
    return None if f["verdict"] == OK else f"{f['detail']}; reserve them ({f['fix']}) or use another backing"


def check_nx_huge_pages(root, accel):
    vuln = read(root, "sys/devices/system/cpu/vulnerabilities/itlb_multihit")
    nx = read(root, "sys/module/kvm/parameters/nx_huge_pages")
    detail = f"itlb_multihit: {vuln or 'unknown'}; kvm.nx_huge_pages={nx or 'absent'}"
    affected = vuln is not None and not vuln.startswith("Not affected")
    if accel == "kvm" and affected and nx in ("Y", "1", "force", "on"):
        return finding("nx_huge_pages", INVALID, detail,
                       "on a trusted single-tenant host: kvm.nx_huge_pages=off on the host command line "
                       "(or echo off > /sys/module/kvm/parameters/nx_huge_pages before any guest starts)", KTEXT)
    return finding("nx_huge_pages", OK, detail)


def check_cpufreq(root):
    cpus = cpulist(read(root, "sys/devices/system/cpu/online"))
    govs = sorted({g for g in (read(root, f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor") for c in cpus)
                   if g})
    boost = read(root, "sys/devices/system/cpu/cpufreq/boost")
    no_turbo = read(root, "sys/devices/system/cpu/intel_pstate/no_turbo")
    turbo_on = boost == "1" or no_turbo == "0"
    if not govs:
        return finding("cpufreq", OK, "no cpufreq driver visible (frequency set by the platform or a hypervisor)")
    detail = f"governor {','.join(govs)}; boost {'on' if turbo_on else 'off' if boost or no_turbo else 'unknown'}"
    fixes = []
    if govs != ["performance"]:
        fixes.append("cpupower frequency-set -g performance")
    if turbo_on:
        fixes.append("echo 0 > /sys/devices/system/cpu/cpufreq/boost" if boost is not None
                     else "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo")
    if fixes:
        return finding("cpufreq", NOISE, detail, "; ".join(fixes))
    return finding("cpufreq", OK, detail)


def topology(root):
    """{cpu: (package, core)} of the online CPUs."""
    out = {}
    for c in cpulist(read(root, "sys/devices/system/cpu/online")):
        out[c] = (read(root, f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id"),
                  read(root, f"sys/devices/system/cpu/cpu{c}/topology/core_id"))
    return out


def check_smt(root, pinning=()):
    active = read(root, "sys/devices/system/cpu/smt/active")
    control = read(root, "sys/devices/system/cpu/smt/control")
    detail = f"SMT control={control or 'absent'} active={active or 'unknown'}"
    if active != "1":
        return finding("smt", OK, detail)
    pinned = [c for cs in pinning for c in cpulist(cs)]
    topo = topology(root)
    cores = [topo.get(c) for c in pinned]
    if pinned and len(set(cores)) == len(cores):
        return finding("smt", OK, detail + "; vCPUs pinned to distinct physical cores")
    return finding("smt", NOISE, detail + "; vCPUs may share a physical core with a sibling's load",
                   "pin vCPUs to distinct cores (guest_domain_vcpu_pinning, see kablab.remote.doctor.pick_cpus) "
                   "or echo off > /sys/devices/system/cpu/smt/control")


def check_isolated(root, pinning=()):
    iso = cpulist(read(root, "sys/devices/system/cpu/isolated"))
    pinned = [c for cs in pinning for c in cpulist(cs)]
    if iso and pinned and set(pinned) <= set(iso):
        return finding("isolated", OK, f"vCPUs pinned to isolated CPUs {iso}")
    if not iso:
        return finding("isolated", NOISE, "no isolated CPUs: host tasks share the vCPUs' CPUs",
                       "boot the host with isolcpus=<cpus> and pin vCPUs there (guest_domain_vcpu_pinning)")
    return finding("isolated", NOISE, f"isolated CPUs {iso} but vCPUs are not pinned to them",
                   "set guest_domain_vcpu_pinning to isolated CPUs")


def check_numa(root, pinning=()):
    nodes = cpulist(read(root, "sys/devices/system/node/online") or "0")
    if len(nodes) <= 1:
        return finding("numa", OK, f"{len(nodes)} NUMA node")
    pinned = [c for cs in pinning for c in cpulist(cs)]
    node_of = {c: n for n in nodes for c in cpulist(read(root, f"sys/devices/system/node/node{n}/cpulist"))}
    used = {node_of.get(c) for c in pinned}
    if pinned and len(used) == 1:
        return finding("numa", OK, f"{len(nodes)} NUMA nodes; vCPUs on node {used.pop()}")
    return finding("numa", NOISE, f"{len(nodes)} NUMA nodes; vCPUs and guest RAM may land on different nodes",
                   "pin vCPUs to one node's cores (guest_domain_vcpu_pinning); libvirt then places RAM there")


def pick_placement(root, vcpus):
    """vCPU placement for guest_domain_vcpu_placement=cores: one CPU per
    distinct physical core (never two SMT siblings), isolated CPUs first,
    all on the first NUMA node that has enough cores, whose memory the guest
    then gets. {"cpus": [] , "node": None} when no node has vcpus cores."""
    iso = set(cpulist(read(root, "sys/devices/system/cpu/isolated")))
    topo = topology(root)
    nodes = cpulist(read(root, "sys/devices/system/node/online") or "0")
    for n in nodes:
        cpus = cpulist(read(root, f"sys/devices/system/node/node{n}/cpulist")) or sorted(topo)
        seen, picked = set(), []
        for c in sorted(cpus, key=lambda c: (c not in iso, c)):
            if c in topo and topo[c] not in seen:
                seen.add(topo[c])
                picked.append(str(c))
        if len(picked) >= vcpus:
            return {"cpus": picked[:vcpus], "node": n}
    return {"cpus": [], "node": None}


def pick_cpus(root, vcpus):
    """The cpus of pick_placement (guest_domain_vcpu_pinning's form)."""
    return pick_placement(root, vcpus)["cpus"]


def run_checks(root, probe, backing="default", memory_mib=2048, guests=1, pinning=()):
    accel = (probe or {}).get("accel")
    return [
        check_accel(probe),
        check_vpmu(root, accel),
        check_thp(root),
        check_backing(root, backing, memory_mib, guests),
        check_nx_huge_pages(root, accel),
        check_cpufreq(root),
        check_smt(root, pinning),
        check_isolated(root, pinning),
        check_numa(root, pinning),
    ]


def line(f):
    """One line per check: 'check: verdict [<what>] - detail (fix: ...)'."""
    verdict = f["verdict"] + (f" {f['invalidates']}" if f["verdict"] == INVALID else "")
    fix = f" (fix: {f['fix']})" if f["fix"] and f["verdict"] != OK else ""
    return f"{f['check']:<14} {verdict} - {f['detail']}{fix}"


def invalidating(findings):
    return [f["check"] for f in findings if f["verdict"] == INVALID]


def unaccepted(findings, accept):
    """Checks that invalidate results and are not named in accept (a list or 'a,b')."""
    if isinstance(accept, str):
        accept = [a.strip() for a in accept.split(",") if a.strip()]
    return [c for c in invalidating(findings) if c not in set(accept or ())]


# The first-screen phrase of each invalidating check (the detail is in the provenance).
SHORT = {
    "vpmu": "no vPMU: TLB counters unsupported",
    "backing": "guest RAM not on host huge pages: direct-map TLB differences hidden",
    "nx_huge_pages": "kvm.nx_huge_pages splits executable huge pages: kernel-text iTLB differences hidden",
}


TCG_SUMMARY = "TCG: timings emulated, TLB counters unsupported (the TLB model counts them: kablab_tlb_model)"


def summary(findings):
    """The short host line for the report's first screen."""
    by = {f["check"]: f for f in findings}
    parts = []
    if by.get("accel", {}).get("verdict") == INVALID:
        # Under TCG nothing else about the TLB matters.
        return TCG_SUMMARY
    parts = [SHORT[c] for c in ("vpmu", "backing", "nx_huge_pages") if by.get(c, {}).get("verdict") == INVALID]
    if by.get("accel", {}).get("verdict") == UNKNOWN:
        return "; ".join(["accelerator unknown (no boot probe yet)"] + parts)
    if not parts:
        noisy = [f["check"] for f in findings if f["verdict"] == NOISE]
        parts.append("KVM, host checks ok" + (f"; noise from {', '.join(noisy)}" if noisy else ""))
    return "; ".join(parts)


def provenance(doc):
    """What a result carries of a doctor document: the summary, what was
    accepted, and each check's verdict, what it invalidates and why."""
    if not doc:
        return {}
    return {"summary": doc.get("summary"), "accepted": list(doc.get("accepted") or []),
            "backing": doc.get("backing"),
            "checks": {f["check"]: {k: f[k] for k in ("verdict", "invalidates", "detail") if k in f}
                       for f in doc.get("findings") or []}}


# A campaign with the TLB model has an answer about TLBs where TCG has none.
# (The first key is what results recorded before the model was the TCG default.)
MODELLED = {key: "TCG: modelled TLB, emulated time (timings say nothing about hardware TLBs)"
            for key in ("TCG: timings emulated, TLB differences not measurable", TCG_SUMMARY)}


def host_lines(results, modelled=False):
    """One {host, summary, accepted, invalidates} per (host, summary) seen in
    the results' provenance, for the report's first screen; `modelled`: the
    campaign ran the TLB model, which answers what TCG cannot measure."""
    seen = {}
    for r in results:
        h = r.get("host") or {}
        d = h.get("doctor") or {}
        if not d.get("summary"):
            continue
        bad = sorted(c for c, f in (d.get("checks") or {}).items() if f.get("verdict") == INVALID)
        summ = MODELLED.get(d["summary"], d["summary"]) if modelled else d["summary"]
        key = (h.get("name"), summ)
        seen.setdefault(key, {"host": h.get("name") or "?", "summary": summ,
                              "accepted": list(d.get("accepted") or []), "invalidates": bad})
    return list(seen.values())


def capture(root, dest):
    """Copy every file the checks read from root into dest (same relative paths)."""
    n = 0
    for pattern in FILES:
        for src in sorted(glob.glob(os.path.join(root, pattern))):
            rel = os.path.relpath(src, root)
            text = read(root, rel)
            if text is None:
                continue
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            with open(os.path.join(dest, rel), "w", encoding="utf-8") as f:
                f.write(text + "\n")
            n += 1
    return n


def load_probe(paths):
    """The first readable accel probe record among paths (playbook's, then the script's)."""
    for p in paths:
        try:
            with open(os.path.expanduser(p), encoding="utf-8") as f:
                rec = json.load(f)
            if rec.get("accel") in ("kvm", "tcg"):
                rec["source"] = p
                return rec
        except (OSError, ValueError):
            continue
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kablab.remote.doctor", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--root", default="/")
    c.add_argument("--probe", action="append", default=[], help="accel probe record (first readable wins)")
    c.add_argument("--backing", default="default", choices=BACKINGS)
    c.add_argument("--memory-mib", type=int, default=2048)
    c.add_argument("--guests", type=int, default=1)
    c.add_argument("--pinning", default="", help="space-separated cpusets, one per vCPU")
    c.add_argument("--placement", default="manual", choices=("manual", "cores"),
                   help="cores: judge the pinning guest_domain would pick (pick_placement)")
    c.add_argument("--vcpus", type=int, default=2)
    c.add_argument("--accept", default="", help="comma-separated checks whose 'invalidates' is accepted")
    c.add_argument("--json", help="write the findings here")
    c.add_argument("--record", help="also keep the findings here (the host's record); a host that has "
                   "no such directory yet still gets its lines")
    p = sub.add_parser("capture")
    p.add_argument("dest")
    p.add_argument("--root", default="/")
    s = sub.add_parser("fits", help="exit 1 when the guests cannot start on the backing (backing_shortfall)")
    s.add_argument("backing", choices=BACKINGS)
    s.add_argument("memory_mib", type=int)
    s.add_argument("guests", type=int)
    s.add_argument("--root", default="/")
    k = sub.add_parser("pick-cpus")
    k.add_argument("vcpus", type=int)
    k.add_argument("--root", default="/")
    a = ap.parse_args(argv)
    if a.cmd == "capture":
        print(f"captured {capture(a.root, a.dest)} files into {a.dest}")
        return 0
    if a.cmd == "fits":
        why = backing_shortfall(a.root, a.backing, a.memory_mib, a.guests)
        if why:
            print(f"guest_domain: guest_domain_memory_backing={why}", file=sys.stderr)
        return 1 if why else 0
    if a.cmd == "pick-cpus":
        pick = pick_placement(a.root, a.vcpus)
        if not pick["cpus"]:
            print(f"guest_domain: guest_domain_vcpu_placement=cores needs {a.vcpus} distinct physical cores on one "
                  "NUMA node of this host; there are fewer. Lower guest_domain_vcpus or use "
                  "guest_domain_vcpu_placement=manual.", file=sys.stderr)
            return 1
        print(json.dumps(pick))
        return 0
    accept = [x.strip() for x in a.accept.split(",") if x.strip()]
    unknown = [x for x in accept if x not in CHECKS]
    if unknown:
        print(f"kablab.remote.doctor: kablab_accept names unknown checks {unknown}; the checks are {list(CHECKS)}",
              file=sys.stderr)
        return 2
    probe = load_probe(a.probe)
    pinning = pick_cpus(a.root, a.vcpus) if a.placement == "cores" else a.pinning.split()
    findings = run_checks(a.root, probe, a.backing, a.memory_mib, a.guests, pinning)
    left = unaccepted(findings, accept)
    doc = {"findings": findings, "summary": summary(findings), "invalidates": invalidating(findings),
           "accepted": [x for x in invalidating(findings) if x not in left], "unaccepted": left,
           "lines": [line(f) for f in findings], "probe": probe, "backing": a.backing, "pinning": " ".join(pinning)}
    if a.record:
        try:
            _write_json(a.record, doc)
        except OSError as e:
            print(f"kablab.remote.doctor: not recorded: {e}", file=sys.stderr)
    if a.json == "-":
        # For Ansible: the document alone on stdout (it carries the lines).
        print(json.dumps(doc, sort_keys=True))
        return 0
    for text in doc["lines"]:
        print(text)
    print(f"summary: {doc['summary']}")
    if a.json:
        _write_json(a.json, doc)
    return 0


def _write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
