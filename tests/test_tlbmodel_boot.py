"""Booted check of the TLB model (issue #26): one guest per kernel, stock
and split4k, each with the plugin, one small direct-map walk (a `dd` of an
initramfs file between run markers, scripts/bench-tlbmodel). Asserts the
guests boot, run and power off cleanly with the plugin (QEMU exit 0, the
plugin's total written at exit) and that split4k's direct-map reads cost
many times the kernel dTLB page walks per MiB that stock's do, and more L1
misses.

Cost: two plugin boots, ~55-65 s of QEMU CPU each; 86 s wall on a quiet
2-core host (290 s under load 3-9), so it can be excluded when CI time is
short: `-k 'not tlbmodel_boot'`. A 16 MiB read on a quiet host: stock
258.6 / split4k 884.4 kernel dTLB L1 misses per MiB, 51.0 / 269.9 walks
per MiB (a 4 MiB read gave 0.75 / 4.0: its pages were still in the STLB).
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from kablab import tlbmodel  # noqa: E402

# More than the modelled STLB reaches with 4k entries (2048 x 4 KiB = 8 MiB).
# The guest writes the file just before it reads it: with a smaller file
# split4k's 4k translations are still in the STLB from the writes, and its
# walks per MiB depend on how many timer ticks (host load, no -icount)
# evicted them in between: 4.0 per MiB on a quiet host against 192-292
# under load 20. A sequential pass over twice the reach misses every time.
MIB = 16


@pytest.fixture(scope="module")
def bench(kernels, tmp_path_factory):
    # kernels: the session fixture builds (or reuses) the ci kernels, so a
    # cold run measures this too instead of skipping it.
    assert {"stock", "split4k"} <= set(kernels), kernels
    work = tmp_path_factory.mktemp("tlbmodel-boot")
    t0 = time.monotonic()
    p = subprocess.run(["nice", "-n", "10", str(REPO / "scripts/bench-tlbmodel"),
                        "--kernels", "stock,split4k", "--mib", str(MIB), "--keep-dir", str(work)],
                       capture_output=True, text=True, timeout=3600)
    print(f"\ntlbmodel booted check: {time.monotonic() - t0:.0f} s wall\n{p.stdout}", file=sys.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    return work, p.stdout


@pytest.mark.parametrize("kernel", ["stock", "split4k"])
def test_tlbmodel_boot_clean(bench, kernel):
    work, out = bench
    row = next(ln.split() for ln in out.splitlines() if ln.startswith(kernel + " "))
    assert row[4] == "0", out                                  # QEMU's exit status
    log = (work / f"{kernel}-0.log").read_text(errors="replace")
    assert "KABLAB-TLB-DONE" in log and "Kernel panic" not in log
    recs = tlbmodel.load(work / f"{kernel}-0.jsonl")
    assert [r["type"] for r in recs] == ["params", "run", "run", "total"]
    total = recs[-1]
    assert total["ram"] == "memfd" and total["runs"] == 2
    assert total["counts"]["events"]["walk_read_errors"] == 0
    assert total["counts"]["events"]["pt_alias_flushes"] == 0


def _direct_map(work, kernel):
    runs = tlbmodel.runs_by_id(tlbmodel.load(work / f"{kernel}-0.jsonl"))
    return tlbmodel.diff_counts(runs[1]["counts"], runs[2]["counts"])


def test_tlbmodel_boot_split4k_direct_map_misses(bench):
    work, out = bench
    stock, split = _direct_map(work, "stock"), _direct_map(work, "split4k")
    # Stock reads the page cache through 2M direct-map entries: the copy's
    # source accesses (one per byte under TCG's rep movsb) are 2M, ~no misses.
    # (0.33 to 1 access per byte seen: it depends on the copy routine TCG runs)
    assert stock["kernel"]["dtlb"]["2m"]["acc"] > MIB * 100_000
    stock_2m = tlbmodel.per_mib(stock, "kernel", "dtlb", "l1_miss", MIB, "2m")
    assert stock_2m < 2
    # split4k maps the direct map with 4k pages: those accesses are 4k now.
    assert split["kernel"]["dtlb"]["2m"]["acc"] < stock["kernel"]["dtlb"]["2m"]["acc"] / 10
    f = {k: {key: tlbmodel.per_mib(c, "kernel", "dtlb", key, MIB) for key in ("l1_miss", "walks")}
         for k, c in (("stock", stock), ("split4k", split))}
    print(f"\nkernel dTLB per MiB read: {f}", file=sys.stderr)
    # Page walks (STLB misses) are the robust figure. A sequential pass over
    # more 4k pages than the STLB holds walks once per page, 256 per MiB;
    # stock's own kernel 4k walks (stacks, timer ticks) grow with host time
    # when TCG runs without -icount (tlbmodel/README.md "Figures": 0.5 to
    # 51 per MiB seen), so the excess is tested, not a ratio.
    assert f["split4k"]["walks"] > 200
    assert f["split4k"]["walks"] - f["stock"]["walks"] > 128
    assert f["split4k"]["l1_miss"] > f["stock"]["l1_miss"]
