"""Booted check of the TLB model: two guests each of stock and
split4k and one of grouped, each with the plugin, one vCPU and
kablab.results.tlbmodel.REPLAY_QEMU_ARGS (-icount shift=0,sleep=off, the CMOS clock
on virtual time from a fixed date, a fixed RNG seed), one direct-map walk
each (a `dd` of an initramfs file between run markers,
scripts/bench-tlbmodel --replay). Asserts the guests boot, run and power off
cleanly with the plugin (QEMU exit 0, the plugin's total written at exit),
that split4k's direct-map reads cost many times the kernel dTLB page walks
per MiB that stock's do, that grouped reads like stock, and that two boots
of one kernel agree (the A/A spread).

Cost: five plugin boots, ~32-41 s of QEMU CPU each, two at a time (104 s
wall on 2 cores). Measured on 2026-12-06 by this test, per MiB read:
kernel dTLB walks stock 0.12 (0.00 in the direct map), grouped 0.06
(0.00), split4k 269.88 (265.81); kernel L1 misses 66.94, 63.19 and 438.81.

Why replay: with -icount shift=0 alone (what a campaign uses) the guest
still met the host where it halted, where it read the CMOS clock, in
RDRAND, and in an initramfs archive that differed by its timestamps from
boot to boot. Two stock boots then ran the read in 23583802 or in about
23477000 kernel instructions (73.25 or 70.31 L1 misses per MiB, 4.2 %),
whichever way a boot went, on a loaded host or not; CI saw both in one run.
With the replay arguments and a reproducible archive
(scripts/kablab-qemu-boot) four stock boots, two at a time and beside two
busy loops, wrote the same run records byte for byte.
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kablabtest import REPO

sys.path.insert(0, str(REPO))
from kablab.results import tlbmodel  # noqa: E402

# More than the modelled STLB reaches with 4k entries (2048 x 4 KiB = 8 MiB).
# The guest writes the file just before it reads it: with a smaller file
# split4k's 4k translations are still in the STLB from the writes, and its
# walks per MiB depend on how many timer ticks evicted them in between.
# A sequential pass over twice the reach misses every time.
MIB = 16
REPS = 2


@pytest.fixture(scope="module")
def bench(kernels, tmp_path_factory):
    # kernels: the session fixture builds (or reuses) the ci kernels, so a
    # cold run measures this too instead of skipping it.
    assert {"stock", "split4k"} <= set(kernels), kernels
    work = tmp_path_factory.mktemp("tlbmodel-boot")
    t0 = time.monotonic()
    p = subprocess.run(["nice", "-n", "10", str(REPO / "scripts/bench-tlbmodel"),
                        "--kernels", "stock,split4k,grouped", "--aa", "stock,split4k",
                        "--mib", str(MIB), "--reps", str(REPS),
                        "--replay", "--smp", "1", "--jobs", "2", "--keep-dir", str(work)],
                       capture_output=True, text=True, timeout=3600)
    print(f"\ntlbmodel booted check: {time.monotonic() - t0:.0f} s wall\n{p.stdout}", file=sys.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    return work, p.stdout


@pytest.mark.parametrize("kernel, rep", [(k, r) for k in ("stock", "split4k") for r in range(REPS)]
                         + [("grouped", 0)])
def test_tlbmodel_boot_clean(bench, kernel, rep):
    work, out = bench
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:2] == [kernel, str(rep)])
    assert row[4] == "0", out                                  # QEMU's exit status
    log = (work / f"{kernel}-{rep}.log").read_text(errors="replace")
    assert "KABLAB-TLB-DONE" in log and "Kernel panic" not in log
    recs = tlbmodel.load(work / f"{kernel}-{rep}.jsonl")
    # dormant through the boot, activated by the first run's start
    assert [r["type"] for r in recs] == ["params", "activated", "run", "run", "total"]
    total = recs[-1]
    assert total["ram"] == "memfd" and total["runs"] == 2 and total["active"] is True
    assert total["counts"]["events"]["walk_read_errors"] == 0
    assert total["counts"]["events"]["pt_alias_flushes"] == 0
    # the guards (tlbmodel/README.md "Guards"): right root, every kernel
    # walk of the runs found its mapping, no PCID/PTI/LA57 in the guest
    for run in recs[2:4]:
        assert run["guard"] == {"ok": True}, run["guard"]
        assert run["counts"]["events"]["walk_faults"] == 0
    assert "KABLAB-TLB-FLAG" not in log


def _read(work, kernel, rep=0):
    """The read's counts: run 1 (the dd) minus run 2 (an empty bracket)."""
    runs = tlbmodel.runs_by_id(tlbmodel.load(work / f"{kernel}-{rep}.jsonl"))
    return tlbmodel.diff_counts(runs[1]["counts"], runs[2]["counts"])


def _per_mib(work, kernel, tlb, key, rep=0):
    return tlbmodel.per_mib(_read(work, kernel, rep), "kernel", tlb, key, MIB)


DM = tlbmodel.DIRECT_MAP


def test_tlbmodel_boot_split4k_direct_map_misses(bench):
    work, out = bench
    stock, split = _read(work, "stock"), _read(work, "split4k")
    # Stock reads the page cache through 2M direct-map entries: the copy's
    # source accesses (one per byte under TCG's rep movsb) are 2M, ~no misses.
    # (0.33 to 1 access per byte seen: it depends on the copy routine TCG runs)
    assert stock["kernel"][DM]["2m"]["acc"] > MIB * 100_000
    assert tlbmodel.per_mib(stock, "kernel", DM, "l1_miss", MIB, "2m") < 2
    # split4k maps the direct map with 4k pages: those accesses are 4k now.
    assert split["kernel"][DM]["2m"]["acc"] < stock["kernel"][DM]["2m"]["acc"] / 10
    f = {k: {(tlb, key): tlbmodel.per_mib(c, "kernel", tlb, key, MIB)
             for tlb in ("dtlb", DM) for key in ("l1_miss", "walks")}
         for k, c in (("stock", stock), ("split4k", split))}
    print(f"\nkernel dTLB per MiB read: {f}", file=sys.stderr)
    # Page walks (STLB misses, what perf calls dTLB-load-misses on Intel) are
    # the figure. A sequential pass over more 4k pages than the STLB holds
    # walks once per page, 256 per MiB; stock reads through 2M entries and
    # walks (almost) never. Measured: split4k 265.81 direct-map walks per MiB
    # of 269.88 in the kernel, stock 0.00 of 0.12.
    assert f["split4k"][(DM, "walks")] > 200
    assert f["stock"][(DM, "walks")] < 1
    assert f["split4k"][(DM, "walks")] > 0.9 * f["split4k"][("dtlb", "walks")]
    assert f["split4k"][(DM, "l1_miss")] > 3 * f["stock"][(DM, "l1_miss")]


def test_tlbmodel_boot_grouped_reads_like_stock(bench):
    """grouped changes where module and BPF pages come from, not the page
    cache's direct map: its read walks as rarely as stock's. Its L1 misses
    differ from stock's by a few % of what split4k adds (63.19 against 66.94
    kernel L1 misses per MiB, split4k 438.81): two kernel images lay out their
    4k-mapped data differently, and the L1's set conflicts follow layout."""
    work, _ = bench
    f = {k: {(tlb, key): _per_mib(work, k, tlb, key) for tlb in ("dtlb", DM) for key in ("l1_miss", "walks")}
         for k in ("grouped", "stock", "split4k")}
    print(f"\ngrouped vs stock, kernel dTLB per MiB read: {f}", file=sys.stderr)
    assert f["grouped"][("dtlb", "walks")] < 2 and f["grouped"][(DM, "walks")] < 1
    effect = f["split4k"][(DM, "l1_miss")] - f["stock"][(DM, "l1_miss")]
    assert abs(f["grouped"][(DM, "l1_miss")] - f["stock"][(DM, "l1_miss")]) < 0.05 * effect


def test_tlbmodel_boot_a_a_spread(bench):
    """Two boots of one kernel agree within 0.5 % (the issue's bar). Replayed,
    they agree to the instruction: both stock boots ran the read in 23446899
    kernel instructions with 66.94 kernel L1 misses and 0.12 walks per MiB.
    Stock's walks are near zero, so theirs must agree within 0.5 % of
    split4k's."""
    work, _ = bench
    def spread(v):
        return (max(v) - min(v)) / min(v)
    insns = {k: [_read(work, k, r)["kernel"]["insns"] for r in range(REPS)] for k in ("stock", "split4k")}
    fig = {(k, tlb, key): [_per_mib(work, k, tlb, key, r) for r in range(REPS)]
           for k in ("stock", "split4k") for tlb in ("dtlb", DM) for key in ("l1_miss", "walks")}
    print(f"\nA/A: kernel insns {insns}, per MiB {fig}", file=sys.stderr)
    assert all(spread(v) < 0.005 for v in insns.values()), insns
    for tlb in ("dtlb", DM):
        for key in ("l1_miss", "walks"):
            assert spread(fig[("split4k", tlb, key)]) < 0.005, (tlb, key, fig)
        assert spread(fig[("stock", tlb, "l1_miss")]) < 0.005, (tlb, fig)
        stock_walks, split_walks = fig[("stock", tlb, "walks")], fig[("split4k", tlb, "walks")]
        assert max(stock_walks) - min(stock_walks) < 0.005 * min(split_walks), (tlb, fig)


def test_tlbmodel_boot_wrong_root_fails_with_reason(kernels, tmp_path):
    """A wrong root= (D8) gives a failed boot with the reason, not numbers.
    The page after init_top_pgt (level4_kernel_pgt, which maps only the
    kernel image's 512 GiB) has no direct-map entry: the plugin's check at
    the first run start finds page_offset unmapped, every kernel walk of the
    runs faults, and the bench prints the reasons instead of figures. The
    same records make kablab.results.collect fail the block (tests/report)."""
    stock = Path(kernels["stock"]["bzimage"]).parent
    root = tlbmodel.root_from_system_map((stock / "System.map").read_text()) + 0x1000
    p = subprocess.run(["nice", "-n", "10", str(REPO / "scripts/bench-tlbmodel"), "--kernels", "stock",
                        "--mib", "1", "--replay", "--smp", "1", "--root", hex(root),
                        "--keep-dir", str(tmp_path)], capture_output=True, text=True, timeout=1800)
    print(f"\nwrong root: {p.stdout}", file=sys.stderr)
    assert p.returncode == 1, p.stdout + p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.split()[:2] == ["stock", "0"])
    assert row.split()[4] == "0"                    # the guest ran and powered off
    assert f"guard failed: root={root:#x} does not map 0xffff888000000000" in row
    assert "kernel walks found no mapping" in row
    runs = tlbmodel.runs_by_id(tlbmodel.load(tmp_path / "stock-0.jsonl"))
    assert runs[1]["guard"]["ok"] is False and runs[1]["counts"]["events"]["walk_faults"] > 0
