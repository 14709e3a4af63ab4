"""The grouped-pages port keeps module/BPF permission
changes from fragmenting the direct map; same churn binary, same seed, stock
vs grouped, on a guest aged (pipe-fragmenter) so that few free 2 MB blocks
remain.  Direct-map growth is measured from the first userspace snapshot:
DirectMap4k/2M/1G deltas plus direct_map_level2/3_splits (the splits
counter misses everything before SYSTEM_RUNNING, the meminfo lines do not)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kablabtest import REPO, boot, build_guest_tool, meminfo

MODULE_LOADS = 50
BPF_PROGS = 200
GP = "/sys/kernel/debug/vmalloc_group_pages"

# snap TAG: the direct map, MemAvailable and the grouped cache's counters,
# read as one state. BPF programs are freed from a workqueue after an RCU
# grace period, and the last program of a 2 MB bpf_prog_pack gives all 512
# pages back at once: a snapshot once read KReclaimable 1980 kB and then a
# cache of 4096 kB. The cache's counters are read on both sides of meminfo
# and vmstat until they did not move in between (at most 20 tries, 1 s apart).
SNAP = r"""
snap() {
    tries=0
    while :; do
        gp_before=$(cat @GP@ 2>/dev/null)
        mi=$(grep -E '^(DirectMap|MemAvailable|MemFree|KReclaimable)' /proc/meminfo)
        vm=$(grep direct_map /proc/vmstat)
        gp=$(cat @GP@ 2>/dev/null)
        if [ "$gp_before" = "$gp" ] || [ $tries -ge 20 ]; then break; fi
        tries=$((tries + 1))
        sleep 1
    done
    echo "KABLAB-SNAP-TRIES-$1 $tries"
    echo "$mi" | sed "s/^/KABLAB-MI-$1 /"
    echo "$vm" | sed "s/^/KABLAB-VM-$1 /"
    if [ -n "$gp" ]; then echo "$gp" | sed "s/^/KABLAB-GPS-$1 /"; fi
}
""".replace("@GP@", GP)

CHURN_INIT = f"""
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /var/tmp && mount -t tmpfs tmp /var/tmp
mkdir -p /dev && mount -t devtmpfs dev /dev
{SNAP}
grep DirectMap /proc/meminfo | sed 's/^/KABLAB-MEMINFO /'
snap FIRST
# Age the allocator: pipes fill memory down to 64 MiB free, half are closed.
/bin/pipe-fragmenter --leave-mib 64 --seed 1 --ready /tmp/frag.ready &
frag=$!
i=0
while [ ! -e /tmp/frag.ready ] && [ $i -lt 600 ]; do sleep 1; i=$((i + 1)); done
sed 's/^/KABLAB-BUDDY /' /proc/buddyinfo
snap FRAG
/bin/module-bpf-churn --seed 1 --json --module /lib/kablab_churn.ko --pipes 2 \\
    --module-loads {MODULE_LOADS} --bpf-progs {BPF_PROGS} >/tmp/churn.json
echo "KABLAB-CHURN-RC $?"
echo "KABLAB-CHURN-JSON $(cat /tmp/churn.json)"
snap CHURN
kill $frag
wait $frag
snap KILLED
dmesg | grep -c 'kablab_churn: init' | sed 's/^/KABLAB-INITS /'
dmesg | grep -c 'kablab_churn: exit' | sed 's/^/KABLAB-EXITS /'
if [ -e {GP} ]; then
    sed 's/^/KABLAB-GP-BEFORE /' {GP}
    # Bounded memory pressure: one pass touching more anonymous memory than
    # is available, so reclaim reaches the shrinkers (the OOM killer may end
    # the hog; that bounds it too).
    hog=$(awk '/MemAvailable/ {{print int($2 / 1024) + 64}}' /proc/meminfo)
    echo "KABLAB-HOG-MIB $hog"
    /bin/page-fault --json --size-mib $hog --iterations 1 >/dev/null 2>&1
    echo "KABLAB-HOG-RC $?"
    sed 's/^/KABLAB-GP-AFTER /' {GP}
fi
poweroff -f
"""

# debug_pagealloc maps the direct map with 4k pages: grouping must stay off.
DEBUG_PAGEALLOC_INIT = f"""
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /var/tmp && mount -t tmpfs tmp /var/tmp
{SNAP}
/bin/module-bpf-churn --seed 1 --json --module /lib/kablab_churn.ko --pipes 2 \\
    --module-loads 3 --bpf-progs 10 >/tmp/churn.json
echo "KABLAB-CHURN-RC $?"
snap END
poweroff -f
"""


def snap(console: str, tag: str) -> dict[str, dict[str, int]]:
    """One snap(): meminfo kB, vmstat and grouped-cache counters by name."""
    return {"mi": {k: int(v) for k, v in re.findall(rf"KABLAB-MI-{tag} (\w+):\s+(\d+) kB", console)},
            "vm": {k: int(v) for k, v in re.findall(rf"KABLAB-VM-{tag} (\w+) (\d+)", console)},
            "gp": {k: int(v) for k, v in re.findall(rf"KABLAB-GPS-{tag} (\w+) (\d+)", console)}}


@pytest.fixture(scope="module")
def churn_binaries() -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "workloads")], check=True)
    return REPO / "workloads" / "build"


def build_kmod(kernel: dict, dest: Path) -> Path:
    src = dest / "kmod"
    shutil.copytree(REPO / "workloads/module-bpf-churn/kmod", src)
    subprocess.run(["make", "-s", f"KDIR={kernel['build']['tree']}", "KOBJ=_build"], cwd=src, check=True,
                   capture_output=True)
    return src / "kablab_churn.ko"


@pytest.fixture(scope="module")
def fragmenter(tmp_path_factory) -> Path:
    return build_guest_tool(tmp_path_factory.mktemp("tools"), "pipe-fragmenter")


def churn(variant: str, kernels: dict, binaries: Path, frag: Path, tmp_path: Path,
          init: str = CHURN_INIT, extra_cmdline: str = "") -> tuple[dict | None, str]:
    k = kernels[variant]
    ko = build_kmod(k, tmp_path)
    console = boot(k["bzimage"], f"{k['cmdline']} {extra_cmdline}".strip(), init, tmp_path, timeout=900,
                   files=[f"{binaries}/module-bpf-churn:/bin/module-bpf-churn",
                          f"{binaries}/page-fault:/bin/page-fault", f"{ko}:/lib/kablab_churn.ko",
                          f"{frag}:/bin/pipe-fragmenter"])
    assert "KABLAB-CHURN-RC 0" in console, console[-4000:]
    m = re.search(r"KABLAB-CHURN-JSON (\{.*\})", console)
    return (json.loads(m[1]) if m else None), console


@pytest.fixture(scope="module")
def churned(kernels, churn_binaries, fragmenter, tmp_path_factory) -> dict:
    # 1 GiB of the guest's 2: aging fills memory, and TCG copies slowly
    return {v: churn(v, kernels, churn_binaries, fragmenter, tmp_path_factory.mktemp(v),
                     extra_cmdline="mem=1024M")
            for v in ("stock", "grouped")}


def free_pmd_blocks(console: str) -> int:
    """Free blocks of order >= 9 (2 MB) in /proc/buddyinfo after aging."""
    total = 0
    for line in re.findall(r"KABLAB-BUDDY (Node .*)", console):
        counts = [int(c) for c in line.split()[4:]]
        total += sum(c << (order - 9) for order, c in enumerate(counts) if order >= 9)
    return total


def test_grouped_limits_direct_map_fragmentation(churned):
    first = {v: snap(churned[v][1], "FIRST") for v in churned}
    after = {v: snap(churned[v][1], "CHURN") for v in churned}

    def delta(v: str, kind: str, key: str) -> int:
        return after[v][kind].get(key, 0) - first[v][kind].get(key, 0)

    growth = {v: delta(v, "mi", "DirectMap4k") for v in churned}
    for v in churned:
        print(f"{v}: since the first userspace snapshot DirectMap4k {growth[v]:+d} kB, "
              f"DirectMap2M {delta(v, 'mi', 'DirectMap2M'):+d} kB, "
              f"DirectMap1G {delta(v, 'mi', 'DirectMap1G'):+d} kB, "
              f"level2 splits {delta(v, 'vm', 'direct_map_level2_splits'):+d}, "
              f"level3 splits {delta(v, 'vm', 'direct_map_level3_splits'):+d}; "
              f"free 2 MB blocks after aging {free_pmd_blocks(churned[v][1])}")
    print(f"ratio grouped/stock = {growth['grouped'] / max(growth['stock'], 1):.3f}")
    for v in churned:
        assert re.search(r"KABLAB-FRAG pipes [1-9]", churned[v][1]), churned[v][1][-3000:]
        # aged: few free 2 MB blocks are left (64 MiB left free is 32 blocks)
        assert free_pmd_blocks(churned[v][1]) <= 64
    assert delta("stock", "vm", "direct_map_level2_splits") >= 5, \
        "the churn did not fragment stock's direct map: the comparison measures nothing"
    # Grouped's splits stay inside the 2 MB blocks its cache holds, so one
    # block (2048 kB) is the floor of its growth: the 10 % bar can only be
    # met once stock split more than ten blocks, which the churn does not
    # always reach (6 to 50 level-2 splits seen on this host).
    cache_kib = 2048 * snap(churned["grouped"][1], "CHURN")["gp"]["blocks_allocated"]
    assert growth["grouped"] <= max(0.10 * growth["stock"], cache_kib), (growth, cache_kib)


def test_cache_holds_only_pmd_blocks(churned):
    console = churned["grouped"][1]
    for tag in ("FIRST", "FRAG", "CHURN", "KILLED"):
        gp = snap(console, tag)["gp"]
        print(tag, gp)
        assert gp["enabled"] == 1 and gp["block_order"] == 9, gp
        orders = {int(k[len("blocks_order"):]): n for k, n in gp.items() if k.startswith("blocks_order")}
        assert all(n == 0 for order, n in orders.items() if order < 9), gp
        assert gp["block_pages"] == 512 * gp["blocks_allocated"] == 512 * orders[9], gp
        assert gp["cached_pages"] == sum(n for k, n in gp.items() if re.fullmatch(r"node\d+_cached_pages", k))
    assert snap(console, "CHURN")["gp"]["cache_hits"] > 0


def test_memavailable_counts_the_cache(churned):
    """Cached pages are NR_KERNEL_MISC_RECLAIMABLE: KReclaimable covers them,
    and MemAvailable credits them the way it credits any reclaimable kernel
    memory (si_mem_available: the reclaimable pages less the smaller of half
    of them and the low watermark). Read as MemAvailable minus MemFree over
    the churn (aged snapshot to post-churn snapshot), which is where the
    cache fills: MemFree itself moves by up to ~1 MB between boots (stock:
    -948 to +752 kB over four runs), so comparing MemAvailable changes
    between two boots failed once by 428 kB with the cache counted right."""
    g, s = churned["grouped"][1], churned["stock"][1]
    cached_kib = 4 * snap(g, "CHURN")["gp"]["cached_pages"]
    mi = {v: (snap(c, "FRAG")["mi"], snap(c, "CHURN")["mi"]) for v, c in (("grouped", g), ("stock", s))}
    credit = {v: (mi[v][1]["MemAvailable"] - mi[v][1]["MemFree"]) - (mi[v][0]["MemAvailable"] - mi[v][0]["MemFree"])
              for v in mi}
    reclaimable = mi["grouped"][1]["KReclaimable"] - mi["grouped"][0]["KReclaimable"]
    tries = re.search(r"KABLAB-SNAP-TRIES-CHURN (\d+)", g)
    print(f"MemAvailable - MemFree over the churn: stock {credit['stock']:+d} kB, grouped {credit['grouped']:+d} kB; "
          f"grouped cache {cached_kib} kB; KReclaimable grouped {reclaimable:+d} kB; "
          f"snapshot read again {tries[1] if tries else '?'} time(s)")
    # node counters reach /proc/meminfo in per-CPU batches: allow a little lag
    assert mi["grouped"][1]["KReclaimable"] >= cached_kib - 256
    # measured: grouped +1016 kB for 2028 kB reclaimable, stock +0 kB
    assert reclaimable / 2 - 256 <= credit["grouped"] <= reclaimable + 256, (credit, reclaimable)
    assert abs(credit["stock"] - (mi["stock"][1]["KReclaimable"] - mi["stock"][0]["KReclaimable"])) <= 256, credit


def test_debug_pagealloc_guest_uses_no_cache(kernels, churn_binaries, fragmenter, tmp_path):
    k = kernels["grouped"]
    config = (Path(k["build"]["objdir"]) / ".config").read_text()
    # kernel-patches/configs/ci.config builds it in, off unless asked for
    assert "CONFIG_DEBUG_PAGEALLOC=y" in config and "CONFIG_DEBUG_PAGEALLOC_ENABLE_DEFAULT=y" not in config
    _, console = churn("grouped", kernels, churn_binaries, fragmenter, tmp_path,
                       init=DEBUG_PAGEALLOC_INIT, extra_cmdline="debug_pagealloc=on")
    assert "vmalloc: no grouped pages with debug_pagealloc" in console, console[-3000:]
    assert "KABLAB-CHURN-RC 0" in console, console[-3000:]
    end = snap(console, "END")
    assert end["gp"] == {"enabled": 0}, end
    assert end["mi"]["DirectMap2M"] == 0 and end["mi"].get("DirectMap1G", 0) == 0, end
    for bad in ("WARNING:", "BUG:", "Oops"):
        assert bad not in console, bad


def test_module_and_bpf_work_in_grouped(churned):
    result, console = churned["grouped"]
    assert f"KABLAB-INITS {MODULE_LOADS}" in console
    assert f"KABLAB-EXITS {MODULE_LOADS}" in console
    # The churn checks every program's BPF_PROG_TEST_RUN return value and
    # exits non-zero on a mismatch; its rate is only there when all loaded.
    assert result["metrics"]["bpf_loads_per_s"]["value"] > 0
    for bad in ("WARNING:", "BUG:", "Oops", "Kernel panic - not syncing: Fatal"):
        assert bad not in console, bad


def test_shrinker_gives_cached_pages_back(churned):
    console = churned["grouped"][1]
    before = dict(re.findall(r"KABLAB-GP-BEFORE (\w+) (\d+)", console))
    after = dict(re.findall(r"KABLAB-GP-AFTER (\w+) (\d+)", console))
    assert before and after, console[-3000:]
    print(f"grouped cache: cached_pages {before['cached_pages']} -> {after['cached_pages']}, "
          f"shrinker_freed_pages {before['shrinker_freed_pages']} -> {after['shrinker_freed_pages']}")
    assert int(after["shrinker_freed_pages"]) > int(before["shrinker_freed_pages"])
    assert int(after["cached_pages"]) < int(before["cached_pages"]) or int(before["cached_pages"]) == 0
    for bad in ("WARNING:", "BUG:", "Oops"):
        assert bad not in console, bad


def test_stock_has_no_grouped_cache(churned):
    assert "KABLAB-GP-BEFORE" not in churned["stock"][1]
    assert meminfo(churned["stock"][1])["DirectMap2M"] > 0
