"""The kablab-tlb plugin's output (tlbmodel/README.md "Output") turned into
the lab's figures: the plugin root from a System.map, a run record as a
result's `model` block, and misses per MiB / per kilo-instruction.

Pure functions; the plugin itself is C (tlbmodel/).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

START_KERNEL_MAP = 0xFFFFFFFF80000000
SIZES = ("4k", "2m", "1g")
MODES = ("kernel", "user")
TLBS = ("dtlb", "itlb")
# The kernel's data translations in the direct map, also counted in "dtlb"
# (tlbmodel/README.md "What is counted"). Records written before the plugin
# counted it lack the key: no figure then, not 0.
DIRECT_MAP = "dtlb_directmap"
# Same for every kernel so comparisons stay fair (tlbmodel/README.md
# "QEMU command line"): fixed direct map, 4-level paging, no PCID, and no
# user address randomisation, so two boots place a workload's buffers and
# stack alike. guest_domain_tlb_cmdline (roles/guest_domain/vars) is the same.
GUEST_CMDLINE = "nokaslr no5lvl nopcid norandmaps"
# QEMU arguments that make a guest which runs on its own (no input from the
# host: an initramfs script, scripts/bench-tlbmodel --replay) repeat itself
# to the instruction (tlbmodel/README.md "Replaying a guest"). -icount alone
# leaves four ways for host time or host entropy in; the fourth, an
# initramfs packed anew per boot, scripts/kablab-qemu-boot now packs
# reproducibly. These arguments close the other three: the virtual clock
# follows the host clock while the vCPU halts (sleep=off warps it to the
# next timer instead), the CMOS clock runs on host time so the kernel's
# RTC read spins a varying number of times (clock=vm, and a fixed base so
# every boot starts at the same date), and TCG's RDRAND under -cpu max
# returns host randomness (-seed). Not for campaign guests: over SSH the
# host's packets arrive by host time anyway, and with sleep=off an idle
# guest's clock would race ahead of them (timeouts firing early).
REPLAY_QEMU_ARGS = ("-icount", "shift=0,sleep=off",
                    "-rtc", "base=2026-01-01T00:00:00,clock=vm",
                    "-seed", "1")
MIB = 1 << 20
# The guest runner marks run n of a block with id base + n, base = the
# block's number within the boot times this (tlbmodel/README.md "Runs").
MARKS_PER_BLOCK = 1 << 16


def root_from_system_map(text: str, phys_base: int = 0) -> int:
    """Physical address of init_top_pgt: its link address minus
    __START_KERNEL_map, plus phys_base (0 for a kernel at its link address)."""
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == "init_top_pgt":
            return int(f[0], 16) - START_KERNEL_MAP + phys_base
    raise ValueError("System.map has no init_top_pgt")


def parse_jsonl(text: str) -> list[dict[str, Any]]:
    """The plugin's records; a torn last line (QEMU killed) is dropped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "type" in rec:
            out.append(rec)
    return out


def records(recs: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in recs if r.get("type") == kind]


def runs_by_id(recs: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Run records keyed by the runner's run id; a later run with the same
    id (a restarted bracket) replaces the earlier one."""
    return {r["id"]: r for r in records(recs, "run") if isinstance(r.get("id"), int)}


def params_label(params: dict[str, Any], icount: str | None = None) -> str:
    """"modelled: QEMU TCG[ -icount ...], <parameters>" -- short enough for a
    table caption. Format 2 records list each level's arrays as [entries,
    ways, "sizes"]; format 1 records map each size to [entries, ways] or to
    the size whose array it shares."""
    core = params.get("core", "?")
    if core == "custom" and params.get("base"):
        core = f"custom from {params['base']}"
    tlb = params.get("tlb", {})
    parts = []
    for level in ("l1d", "l1i", "l2"):
        arrays = tlb.get(level, {})
        cells = []
        if isinstance(arrays, list):
            for a in arrays:
                if isinstance(a, list) and len(a) == 3:
                    cells.append(f"{a[2]} {a[0]}x{a[1]}w" if a[0] != a[1] else f"{a[2]} {a[0]} fa")
        else:
            for s in SIZES:
                v = arrays.get(s)
                if isinstance(v, list) and len(v) == 2:
                    cells.append(f"{s} {v[0]}x{v[1]}w" if v[0] != v[1] else f"{s} {v[0]} fa")
                elif isinstance(v, str):
                    cells.append(f"{s} in {v}")
        if cells:
            parts.append(f"{level} " + "/".join(cells))
    tcg = f"QEMU TCG -icount {icount}" if icount else "QEMU TCG"
    return f"modelled: {tcg}, {core}" + (f" ({'; '.join(parts)})" if parts else "")


def _c(counts: dict[str, Any], mode: str, tlb: str, size: str, key: str) -> int:
    v = counts.get(mode, {}).get(tlb, {}).get(size, {}).get(key, 0)
    return v if isinstance(v, int) else 0


def model_block(run: dict[str, Any]) -> dict[str, Any]:
    """A result's `model` block from one plugin `run` record: the counts as
    the plugin wrote them plus derived totals per mode."""
    counts = run.get("counts", {})
    block: dict[str, Any] = {"seq": run.get("seq"), "id": run.get("id"), "counts": counts}
    totals = {}
    for mode in MODES:
        m = {"insns": counts.get(mode, {}).get("insns", 0)}
        for tlb in TLBS + (DIRECT_MAP,):
            if tlb not in counts.get(mode, {}):
                continue
            for key in ("acc", "l1_miss", "walks"):
                m[f"{tlb}_{key}"] = sum(_c(counts, mode, tlb, s, key) for s in SIZES)
        totals[mode] = m
    block["totals"] = totals
    return block


def diff_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """a - b, key by key (nested dicts of ints): a run minus an empty bracket."""
    out: dict[str, Any] = {}
    for k, v in a.items():
        w = b.get(k) if isinstance(b, dict) else None
        if isinstance(v, dict):
            out[k] = diff_counts(v, w if isinstance(w, dict) else {})
        elif isinstance(v, int):
            out[k] = v - (w if isinstance(w, int) else 0)
    return out


def per_mib(counts: dict[str, Any], mode: str, tlb: str, key: str, mib: float,
            size: str | None = None) -> float | None:
    """Misses (key = l1_miss or walks) per MiB moved, over one size or all;
    None when the record does not count that TLB."""
    if not mib or tlb not in counts.get(mode, {}):
        return None
    sizes = (size,) if size else SIZES
    return sum(_c(counts, mode, tlb, s, key) for s in sizes) / mib


def per_kinsn(counts: dict[str, Any], mode: str, tlb: str, key: str,
              size: str | None = None) -> float | None:
    """Misses per 1000 instructions of the same mode; None when the record
    does not count that TLB."""
    insns = counts.get(mode, {}).get("insns", 0)
    if not insns or tlb not in counts.get(mode, {}):
        return None
    sizes = (size,) if size else SIZES
    return 1000 * sum(_c(counts, mode, tlb, s, key) for s in sizes) / insns


# The report's modelled measures (kablab/report/panels.py), in reading order:
# walks (STLB misses: what a variant's page tables change) before L1
# misses (parameter-sensitive, review D2), the direct map's own next to
# all of the kernel's. Each is divided by the run's work (harness
# wl_work: per MiB, per syscall); a run without work falls back to per
# 1000 instructions of the same mode, which under TCG counts every `rep`
# iteration as one instruction (not MPKI: tlbmodel/README.md).
# name, mode, TLB, counter, mapping size (None: all sizes).
PANEL_MEASURES = (
    ("direct-map dTLB walks", "kernel", DIRECT_MAP, "walks", None),
    ("kernel dTLB walks", "kernel", "dtlb", "walks", None),
    ("kernel iTLB walks", "kernel", "itlb", "walks", None),
    ("direct-map dTLB L1 misses", "kernel", DIRECT_MAP, "l1_miss", None),
    ("kernel dTLB L1 misses", "kernel", "dtlb", "l1_miss", None),
    ("kernel dTLB L1 misses 4k", "kernel", "dtlb", "l1_miss", "4k"),
    ("kernel dTLB L1 misses 2M", "kernel", "dtlb", "l1_miss", "2m"),
    ("kernel iTLB L1 misses", "kernel", "itlb", "l1_miss", None),
    ("user dTLB walks", "user", "dtlb", "walks", None),
    ("user dTLB L1 misses", "user", "dtlb", "l1_miss", None),
)
MEASURE_NAMES = tuple(m[0] for m in PANEL_MEASURES)
# What the modelled verdict matrix shows for a workload that names no
# measure of its own (workload_<name>_model_measure): the translations
# the variants map differently.
DEFAULT_MEASURE = "direct-map dTLB walks"
PER_KINSTR = "per kinstr (TCG)"


def panel_values(model: dict[str, Any] | None) -> dict[str, tuple[float, float]]:
    """A run's `model` block -> measure name -> (count, instructions of its mode)."""
    if not isinstance(model, dict) or not isinstance(model.get("counts"), dict):
        return {}
    counts = model["counts"]
    out = {}
    for name, mode, tlb, key, size in PANEL_MEASURES:
        if tlb not in counts.get(mode, {}):
            continue
        sizes = (size,) if size else SIZES
        out[name] = (float(sum(_c(counts, mode, tlb, s, key) for s in sizes)),
                     float(counts.get(mode, {}).get("insns", 0) or 0))
    return out


def normalised(model: dict[str, Any] | None,
               work: dict[str, Any] | None) -> dict[str, tuple[str, float]]:
    """A run's modelled measures per unit of its work: measure name ->
    ("per <unit>", value); per 1000 instructions of the measure's mode
    (PER_KINSTR) when the run reports no work. Measures the record does not
    count, and a zero denominator, give no entry."""
    amount = work.get("amount") if isinstance(work, dict) else None
    out = {}
    for name, (count, insns) in panel_values(model).items():
        if isinstance(amount, (int, float)) and amount > 0:
            out[name] = (f"per {work['unit']}", count / amount)
        elif insns > 0:
            out[name] = (PER_KINSTR, 1000.0 * count / insns)
    return out


# Guest features the model does not follow (tlbmodel/README.md "Guards").
# The guest runner reports which of these /proc/cpuinfo lists; the kernel
# clears each flag when the feature is off (nopcid, no5lvl, PTI not used).
GUARDED_FLAGS = {
    "pcid": "PCID is on in the guest: the model drops non-global entries at "
            "every CR3 write (boot with nopcid)",
    "pti": "page-table isolation is on in the guest: its CR3 switch at every "
           "kernel entry is not modelled (boot with nopti)",
    "la57": "5-level paging is on in the guest and the plugin walks 4 levels "
            "(boot with no5lvl, or give the plugin levels=5)",
}


def guard_failures(run: dict[str, Any]) -> list[str]:
    """Why the plugin says a run record's counts are not the guest kernel's
    (its `guard`); [] when it passed, or for records written before guards."""
    guard = run.get("guard")
    if not isinstance(guard, dict) or guard.get("ok", True) is True:
        return []
    reasons = guard.get("reasons")
    if isinstance(reasons, list) and reasons:
        return [str(r) for r in reasons]
    return ["the plugin's guard failed"]


def guest_flag_failures(flags: Any, levels: int = 4) -> list[str]:
    """The runner's `cpu_flags` (the guarded flags the guest has, space
    separated) as reasons the model's counts do not hold."""
    if not isinstance(flags, str):
        return []
    on = set(flags.split())
    if levels == 5:
        on.discard("la57")
    return [GUARDED_FLAGS[f] for f in GUARDED_FLAGS if f in on]


def load(path: str | Path) -> list[dict[str, Any]]:
    return parse_jsonl(Path(path).read_text(encoding="utf-8", errors="replace"))


def main(argv: list[str] | None = None) -> int:
    """python3 -m kablab.results.tlbmodel root SYSTEM_MAP: print the plugin's root=;
    ... roots KERNELS_JSON: {variant: root} for kablab_kernels (each kernel's
    System.map beside its bzImage), as guest_domain passes them to the plugin."""
    import argparse
    import json
    import sys
    ap = argparse.ArgumentParser(prog="python3 -m kablab.results.tlbmodel")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("root", help="print init_top_pgt's physical address (plugin root=)")
    r.add_argument("system_map")
    r.add_argument("--phys-base", type=lambda s: int(s, 0), default=0)
    rs = sub.add_parser("roots", help="print {variant: root} for kablab_kernels (JSON)")
    rs.add_argument("kernels", type=json.loads)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "roots":
            print(json.dumps({v: hex(root_from_system_map((Path(k["bzimage"]).parent / "System.map").read_text()))
                              for v, k in a.kernels.items()}, sort_keys=True))
        else:
            print(hex(root_from_system_map(Path(a.system_map).read_text(), a.phys_base)))
    except (OSError, ValueError) as e:
        print(f"kablab.results.tlbmodel: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
