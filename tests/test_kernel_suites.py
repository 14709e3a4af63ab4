"""The kernel's own vmalloc and BPF suites, booted on stock and
grouped (the ci kernels build both as modules; only the guest loads them).

* lib/test_vmalloc drives the vmalloc paths the grouped series changes
  (__vmalloc_area_node(), the huge-vmap choice, vfree()) with ordinary
  vmalloc() and per-CPU callers: the fixed-size, random-size, aligned and
  per-CPU cases, two worker threads.
* lib/test_bpf JITs its programs (BPF_JIT_ALWAYS_ON) into bpf_prog_pack
  chunks, which on grouped come from the grouped page cache: tests 0 to
  BPF_LAST of the test_bpf suite, then the tail-call and the skb segment
  suites. The 226 tests after BPF_LAST ("all ... value magnitudes",
  "Staggered jumps") are exhaustive ALU and jump checks: under TCG they
  took 195 of the whole suite's 210 s per kernel (2026-12-06, both
  kernels passed all 1026, 1014 of 1014 JIT'ed), so they are left to a
  manual run (test_range=0,1025).

After each suite the direct map (DirectMap4k, level-2 splits) and the
grouped cache's counters are recorded for both kernels."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kablabtest import boot, build_guest_tool

GP = "/sys/kernel/debug/vmalloc_group_pages"
# run_test_mask bits of lib/test_vmalloc.c: fix_size (1), random_size (8),
# fix_align (16), random_size_align (32), pcpu_alloc (128). Not
# align_shift (64): it asks for alignments up to 2^63 and "is supposed to
# be failed" (its comment), with a warn_alloc() stack dump.
VMALLOC_TESTS = ("fix_size_alloc_test", "random_size_alloc_test", "fix_align_alloc_test",
                 "random_size_align_alloc_test", "pcpu_alloc_test")
VMALLOC_MASK = 1 | 8 | 16 | 32 | 128
VMALLOC_THREADS = 2
# The module's default is 1000000 iterations per case; under TCG 2000 keep
# the five cases within seconds (8 s measured) and still allocate and free
# 16000 areas besides the per-CPU case's 70000 chunks.
VMALLOC_LOOPS = 2000
BPF_SUITES = ("test_bpf", "test_tail_calls", "test_skb_segment")
BPF_LAST = 799

SUITES_INIT = f"""
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs debugfs /sys/kernel/debug
state() {{
    grep -E '^DirectMap' /proc/meminfo | sed "s/^/KABLAB-MI-$1 /"
    grep direct_map /proc/vmstat | sed "s/^/KABLAB-VM-$1 /"
    if [ -e {GP} ]; then sed "s/^/KABLAB-GPS-$1 /" {GP}; fi
}}
state BOOT
start=$(cut -d. -f1 /proc/uptime)
# test_vmalloc reports through the log and always fails its own load (-EAGAIN)
/bin/load-module /lib/test_vmalloc.ko \\
    "nr_threads={VMALLOC_THREADS} run_test_mask={VMALLOC_MASK} test_loop_count={VMALLOC_LOOPS}"
echo "KABLAB-VMALLOC-SECONDS $(( $(cut -d. -f1 /proc/uptime) - start ))"
state VMALLOC
start=$(cut -d. -f1 /proc/uptime)
for params in "test_suite=test_bpf test_range=0,{BPF_LAST}" test_suite=test_tail_calls \\
              test_suite=test_skb_segment; do
    /bin/load-module /lib/test_bpf.ko "$params"
    echo "KABLAB-BPF-RC $?"
    rmmod test_bpf
done
echo "KABLAB-BPF-SECONDS $(( $(cut -d. -f1 /proc/uptime) - start ))"
# JIT images are freed after an RCU grace period
sleep 2
state BPF
echo KABLAB-SUITES-DONE
poweroff -f
"""


def state(console: str, tag: str) -> dict[str, dict[str, int]]:
    return {"mi": {k: int(v) for k, v in re.findall(rf"KABLAB-MI-{tag} (\w+):\s+(\d+) kB", console)},
            "vm": {k: int(v) for k, v in re.findall(rf"KABLAB-VM-{tag} (\w+) (\d+)", console)},
            "gp": {k: int(v) for k, v in re.findall(rf"KABLAB-GPS-{tag} (\w+) (\d+)", console)}}


def boot_suites(kernel: dict, tmp: Path) -> str:
    """One boot of KERNEL (a manifest entry) running both suites; its console."""
    lib = Path(kernel["modules_dir"]) / "kernel" / "lib"
    loader = build_guest_tool(tmp, "load-module")
    console = boot(kernel["bzimage"], kernel["cmdline"], SUITES_INIT, tmp, timeout=1500,
                   files=[f"{lib}/test_vmalloc.ko:/lib/test_vmalloc.ko", f"{lib}/test_bpf.ko:/lib/test_bpf.ko",
                          f"{loader}:/bin/load-module"])
    assert "KABLAB-SUITES-DONE" in console, console[-4000:]
    return console


def suite_figures(suites: dict[str, str]) -> dict:
    """Per variant and suite: seconds, level-2 splits and DirectMap4k growth;
    for grouped, the blocks its cache took and the pages it could not give."""
    f: dict = {}
    for v, console in suites.items():
        st = {t: state(console, t) for t in ("BOOT", "VMALLOC", "BPF")}
        for suite, a, b in (("vmalloc", "BOOT", "VMALLOC"), ("bpf", "VMALLOC", "BPF")):
            f.setdefault(f"{suite}_seconds", {})[v] = int(re.search(
                rf"KABLAB-{suite.upper()}-SECONDS (\d+)", console)[1])
            f.setdefault(f"{suite}_level2_splits", {})[v] = \
                st[b]["vm"]["direct_map_level2_splits"] - st[a]["vm"]["direct_map_level2_splits"]
            f.setdefault(f"{suite}_directmap4k_kib", {})[v] = st[b]["mi"]["DirectMap4k"] - st[a]["mi"]["DirectMap4k"]
    g = {t: state(suites["grouped"], t)["gp"] for t in ("BOOT", "VMALLOC", "BPF")}
    for suite, a, b in (("vmalloc", "BOOT", "VMALLOC"), ("bpf", "VMALLOC", "BPF")):
        f[f"grouped_{suite}_blocks_taken"] = g[b]["blocks_allocated"] - g[a]["blocks_allocated"]
        f[f"grouped_{suite}_fallback_pages"] = g[b]["fallback_pages"] - g[a]["fallback_pages"]
    return f


@pytest.fixture(scope="module")
def suites(kernels, tmp_path_factory) -> dict[str, str]:
    return {v: boot_suites(kernels[v], tmp_path_factory.mktemp(f"suites-{v}")) for v in ("stock", "grouped")}


def test_vmalloc_suite_passes(suites):
    for v, console in suites.items():
        rows = re.findall(r"Summary: (\w+) passed: (\d+) failed: (\d+) repeat: (\d+) loops: (\d+)", console)
        seconds = re.search(r"KABLAB-VMALLOC-SECONDS (\d+)", console)[1]
        print(f"{v}: test_vmalloc {len(rows)} case runs in {seconds} s")
        # loaded once (/bin/load-module), each case run once by each worker
        assert re.search(r"KABLAB-LOAD-MODULE /lib/test_vmalloc.ko: Resource temporarily unavailable", console)
        assert sorted(r[0] for r in rows) == sorted(VMALLOC_TESTS * VMALLOC_THREADS), rows
        for name, passed, failed, repeat, loops in rows:
            assert int(failed) == 0 and int(passed) == int(repeat) == 1, (v, name, passed, failed)
            assert int(loops) == VMALLOC_LOOPS
        for bad in ("WARNING:", "BUG:", "Oops", "vmalloc error"):
            assert bad not in console, (v, bad)


def test_bpf_suite_passes_with_the_jit(suites):
    for v, console in suites.items():
        assert re.findall(r"KABLAB-BPF-RC (\d+)", console) == ["0"] * len(BPF_SUITES), console[-4000:]
        summary = dict((m[0], m[1:]) for m in re.findall(
            r"(test_bpf|test_tail_calls|test_skb_segment): Summary: (\d+) PASSED, (\d+) FAILED", console))
        jited = dict((m[0], (int(m[1]), int(m[2]))) for m in re.findall(
            r"(test_bpf|test_tail_calls): Summary: \d+ PASSED, \d+ FAILED, \[(\d+)/(\d+) JIT'ed\]", console))
        seconds = re.search(r"KABLAB-BPF-SECONDS (\d+)", console)[1]
        print(f"{v}: {summary} JIT'ed {jited} in {seconds} s")
        assert set(summary) == set(BPF_SUITES), summary
        for suite, (passed, failed) in summary.items():
            assert int(failed) == 0 and int(passed) > 0, (v, suite, passed, failed)
        assert int(summary["test_bpf"][0]) == BPF_LAST + 1, summary
        # BPF_JIT_ALWAYS_ON: a program the JIT refuses is not run at all
        for suite, (done, total) in jited.items():
            assert done == total > 0, (v, suite, done, total)
        for bad in ("WARNING:", "BUG:", "Oops"):
            assert bad not in console, (v, bad)


def test_suites_direct_map_splits(suites):
    """Recorded for both kernels after each suite. Each suite's window
    starts with the load of its module, whose text and rodata are set
    read-only: that splits stock's direct map wherever the pages were, and
    grouped's only inside the blocks its cache took in the window."""
    f = suite_figures(suites)
    for v in suites:
        print(f"{v}: " + "; ".join(f"{s}: level-2 splits {f[s + '_level2_splits'][v]:+d}, "
                                   f"DirectMap4k {f[s + '_directmap4k_kib'][v]:+d} kB" for s in ("vmalloc", "bpf")))
    for s in ("vmalloc", "bpf"):
        print(f"grouped {s}: blocks taken {f[f'grouped_{s}_blocks_taken']:+d}, "
              f"fallback pages {f[f'grouped_{s}_fallback_pages']:+d}")
        assert f[f"grouped_{s}_fallback_pages"] == 0, f
        assert 1 <= f[f"grouped_{s}_blocks_taken"] and f[f"{s}_level2_splits"]["grouped"] <= f[f"grouped_{s}_blocks_taken"], f
