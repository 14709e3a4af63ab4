"""The grouped-pages port keeps module/BPF permission
changes from fragmenting the direct map; same churn binary, same seed, stock
vs grouped, in two regimes:

* aged (pipe-fragmenter): few free 2 MB blocks remain, every refill of the
  grouped cache succeeds;
* fragmented (tests/guest-tools/pmd-pin): no free 2 MB block at all, so the
  cache's refills fail and areas fall back to ordinary pages; grouped must
  then cost no reclaim or compaction that stock does not.

Direct-map growth is measured from a userspace snapshot: DirectMap4k/2M/1G
deltas plus direct_map_level2/3_splits (the splits counter misses everything
before SYSTEM_RUNNING, the meminfo lines do not)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from kablabtest import PMD_PIN_DIR, PMD_PIN_SH, REPO, boot, build_guest_tool, build_kmod, free_pmd_blocks, meminfo

MODULE_LOADS = 50
BPF_PROGS = 200
GP = "/sys/kernel/debug/vmalloc_group_pages"

# snap TAG: the direct map, MemAvailable, reclaim and compaction counters,
# the grouped pages of live areas (/proc/vmallocinfo grouped=N) and the
# grouped cache's counters, read as one state. BPF programs are freed from a workqueue after an RCU
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
        vm=$(grep -E '^(direct_map|compact_|pgscan_|allocstall_)' /proc/vmstat)
        vmi=$(awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^pages=/) p = substr($i, 7) + 0;
                     if ($i ~ /^grouped=/) { g = substr($i, 9) + 0; n += g; a++; if (g > 0 && g < p) m++ } }
                     p = 0 }
                   END { printf "grouped_pages %d\ngrouped_areas %d\nmixed_areas %d\n", n, a, m }' /proc/vmallocinfo)
        gp=$(cat @GP@ 2>/dev/null)
        if [ "$gp_before" = "$gp" ] || [ $tries -ge 20 ]; then break; fi
        tries=$((tries + 1))
        sleep 1
    done
    echo "KABLAB-SNAP-TRIES-$1 $tries"
    echo "$mi" | sed "s/^/KABLAB-MI-$1 /"
    echo "$vm" | sed "s/^/KABLAB-VM-$1 /"
    echo "$vmi" | sed "s/^/KABLAB-VMI-$1 /"
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

CHURN_KMOD = REPO / "workloads/module-bpf-churn/kmod"

# The fragmented regime: kablab_pmd_pin keeps one page of every free 2 MB
# block, so none is left and an order-9 allocation goes through the slow
# path and fails. THP is off in both guests: its faults and khugepaged would
# reclaim and compact on their own and blur what the cache adds.
FRAGMENTED_INIT = f"""
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /var/tmp && mount -t tmpfs tmp /var/tmp
{SNAP}
snap FIRST
{PMD_PIN_SH}
snap PINNED
# Areas that got part of their pages from the cache and the rest from the
# page allocator live only while the churn runs: sample them.
(while [ ! -e /tmp/churn.done ]; do
    awk '{{ p = 0; for (i = 1; i <= NF; i++) {{ if ($i ~ /^pages=/) p = substr($i, 7) + 0;
           if ($i ~ /^grouped=/) {{ g = substr($i, 9) + 0; if (g > 0 && g < p) m++ }} }} }}
         END {{ print m + 0 }}' /proc/vmallocinfo
    sleep 0.2
done | sort -n | tail -n 1 | sed 's/^/KABLAB-MIXED-MAX /') &
sampler=$!
/bin/module-bpf-churn --seed 1 --json --module /lib/kablab_churn.ko --pipes 2 \\
    --module-loads {MODULE_LOADS} --bpf-progs {BPF_PROGS} >/tmp/churn.json
echo "KABLAB-CHURN-RC $?"
touch /tmp/churn.done
wait $sampler
echo "KABLAB-CHURN-JSON $(cat /tmp/churn.json)"
snap CHURN
dmesg | grep -c 'kablab_churn: init' | sed 's/^/KABLAB-INITS /'
dmesg | grep -c 'kablab_churn: exit' | sed 's/^/KABLAB-EXITS /'
poweroff -f
"""

# Background reclaim and compaction, and the direct kind, that grouped must
# not add in the fragmented regime (V-3 of the v2 review).
RECLAIM_COUNTERS = ("compact_stall", "compact_daemon_wake", "pgscan_kswapd", "pgscan_direct")

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
    """One snap(): meminfo kB, vmstat, vmallocinfo sums and grouped-cache
    counters by name."""
    return {"mi": {k: int(v) for k, v in re.findall(rf"KABLAB-MI-{tag} (\w+):\s+(\d+) kB", console)},
            "vm": {k: int(v) for k, v in re.findall(rf"KABLAB-VM-{tag} (\w+) (\d+)", console)},
            "vmi": {k: int(v) for k, v in re.findall(rf"KABLAB-VMI-{tag} (\w+) (\d+)", console)},
            "gp": {k: int(v) for k, v in re.findall(rf"KABLAB-GPS-{tag} (\w+) (\d+)", console)}}


@pytest.fixture(scope="module")
def churn_binaries() -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "workloads")], check=True)
    return REPO / "workloads" / "build"


@pytest.fixture(scope="module")
def fragmenter(tmp_path_factory) -> Path:
    return build_guest_tool(tmp_path_factory.mktemp("tools"), "pipe-fragmenter")


def churn(variant: str, kernels: dict, binaries: Path, frag: Path, tmp_path: Path,
          init: str = CHURN_INIT, extra_cmdline: str = "") -> tuple[dict | None, str]:
    k = kernels[variant]
    files = [f"{binaries}/module-bpf-churn:/bin/module-bpf-churn", f"{binaries}/page-fault:/bin/page-fault",
             f"{build_kmod(k, tmp_path, CHURN_KMOD, 'kablab_churn')}:/lib/kablab_churn.ko", f"{frag}:/bin/pipe-fragmenter"]
    if "kablab_pmd_pin" in init:
        pin = build_kmod(k, tmp_path, PMD_PIN_DIR, "kablab_pmd_pin")
        files.append(f"{pin}:/lib/kablab_pmd_pin.ko")
    console = boot(k["bzimage"], f"{k['cmdline']} {extra_cmdline}".strip(), init, tmp_path, timeout=900,
                   files=files)
    assert "KABLAB-CHURN-RC 0" in console, console[-4000:]
    m = re.search(r"KABLAB-CHURN-JSON (\{.*\})", console)
    return (json.loads(m[1]) if m else None), console


@pytest.fixture(scope="module")
def churned(kernels, churn_binaries, fragmenter, tmp_path_factory) -> dict:
    # 1 GiB of the guest's 2: aging fills memory, and TCG copies slowly
    return {v: churn(v, kernels, churn_binaries, fragmenter, tmp_path_factory.mktemp(v),
                     extra_cmdline="mem=1024M")
            for v in ("stock", "grouped")}


@pytest.fixture(scope="module")
def fragmented(kernels, churn_binaries, fragmenter, tmp_path_factory) -> dict:
    return {v: churn(v, kernels, churn_binaries, fragmenter, tmp_path_factory.mktemp(f"{v}-fragmented"),
                     init=FRAGMENTED_INIT, extra_cmdline="mem=1024M transparent_hugepage=never")
            for v in ("stock", "grouped")}


def aged_figures(churned: dict) -> dict:
    """The aged regime's figures, per variant where both have them: what the
    tests assert and scripts/bench-grouped summarises over boots. Growth is
    from the first userspace snapshot to the end of the churn; the
    MemAvailable credit (MemAvailable - MemFree) and KReclaimable from the
    aged snapshot to the end of the churn, where the cache fills."""
    c = {v: churned[v][1] for v in churned}
    first, aged, end = ({v: snap(c[v], t) for v in c} for t in ("FIRST", "FRAG", "CHURN"))

    def grew(kind: str, key: str, since: dict = first) -> dict[str, int]:
        return {v: end[v][kind].get(key, 0) - since[v][kind].get(key, 0) for v in c}

    def credit(st: dict) -> int:
        return st["mi"]["MemAvailable"] - st["mi"]["MemFree"]
    f = {"directmap4k_kib": grew("mi", "DirectMap4k"), "directmap2m_kib": grew("mi", "DirectMap2M"),
         "directmap1g_kib": grew("mi", "DirectMap1G"), "level2_splits": grew("vm", "direct_map_level2_splits"),
         "level3_splits": grew("vm", "direct_map_level3_splits"),
         "free_pmd_blocks_aged": {v: free_pmd_blocks(c[v]) for v in c},
         "memavailable_credit_kib": {v: credit(end[v]) - credit(aged[v]) for v in c},
         "kreclaimable_kib": grew("mi", "KReclaimable", aged)}
    f["growth_ratio"] = f["directmap4k_kib"]["grouped"] / max(f["directmap4k_kib"]["stock"], 1)
    gp = end["grouped"]["gp"]
    f["grouped_blocks_taken"] = gp["blocks_allocated"] - first["grouped"]["gp"]["blocks_allocated"]
    f["grouped_cache_kib"] = 4 * gp["cached_pages"]
    return f


def test_grouped_limits_direct_map_fragmentation(churned):
    f = aged_figures(churned)
    for v in churned:
        print(f"{v}: since the first userspace snapshot DirectMap4k {f['directmap4k_kib'][v]:+d} kB, "
              f"DirectMap2M {f['directmap2m_kib'][v]:+d} kB, DirectMap1G {f['directmap1g_kib'][v]:+d} kB, "
              f"level2 splits {f['level2_splits'][v]:+d}, level3 splits {f['level3_splits'][v]:+d}; "
              f"free 2 MB blocks after aging {f['free_pmd_blocks_aged'][v]}")
    print(f"ratio grouped/stock = {f['growth_ratio']:.3f}")
    for v in churned:
        assert re.search(r"KABLAB-FRAG pipes [1-9]", churned[v][1]), churned[v][1][-3000:]
        # aged: few free 2 MB blocks are left (64 MiB left free is 32 blocks)
        assert f["free_pmd_blocks_aged"][v] <= 64
    assert f["level2_splits"]["stock"] >= 5, \
        "the churn did not fragment stock's direct map: the comparison measures nothing"
    # Grouped's splits stay inside the 2 MB blocks its cache took during the
    # churn, so one block (2048 kB) is the floor of its growth: the 10 % bar
    # can only be met once stock split more than ten blocks, which the churn
    # does not always reach (6 to 50 level-2 splits seen on this host).
    cache_kib = 2048 * f["grouped_blocks_taken"]
    assert f["directmap4k_kib"]["grouped"] <= max(0.10 * f["directmap4k_kib"]["stock"], cache_kib), (f, cache_kib)


def test_splits_stay_inside_the_cache_blocks(churned):
    """Every 2 MB mapping the grouped churn split belongs to a block the
    cache holds. Three sources that the cache code does not share: the
    level-2 splits (arch/x86/mm/pat/set_memory.c), the pages on the cache's
    lists (cached_pages) and the grouped pages of live areas
    (/proc/vmallocinfo grouped=N, from each page's mark). A cache that took
    smaller blocks, handed out pages that came from no block, or lost pages
    fails one of the two asserts."""
    console = churned["grouped"][1]
    first, after = snap(console, "FIRST"), snap(console, "CHURN")
    gp = after["gp"]
    assert gp["enabled"] == 1 and gp["block_order"] == 9, gp
    # aged, not fragmented: every refill found a block
    assert gp["refill_failures"] == 0 and gp["fallback_pages"] == 0, gp
    live = after["vmi"]["grouped_pages"]
    gone = gp["shrinker_freed_pages"] + gp["freed_referenced"] + gp["hwpoison_dropped"]
    splits = after["vm"]["direct_map_level2_splits"] - first["vm"]["direct_map_level2_splits"]
    blocks = gp["blocks_allocated"] - first["gp"]["blocks_allocated"]
    print(f"grouped churn: level-2 splits {splits:+d}, blocks taken {blocks:+d} ({gp['blocks_allocated']} in all); "
          f"pages: cached {gp['cached_pages']}, in live areas {live}, gone {gone}, "
          f"cache hits {gp['cache_hits']}, freed to the cache {gp['freed_to_cache']}")
    assert blocks >= 1, "the churn took no block: the window saw nothing grouped"
    # each of the blocks' 512 pages is cached, mapped in a live area or gone
    assert gp["cached_pages"] + live + gone == 512 * gp["blocks_allocated"], (gp, live)
    # a split 2 MB mapping needs a block's worth of pages that the cache holds
    assert 512 * splits <= gp["cached_pages"] + live + gone, (splits, gp, live)
    assert gp["cache_hits"] > 0 and gp["freed_to_cache"] > 0, gp


def test_memavailable_counts_the_cache(churned):
    """Cached pages are NR_KERNEL_MISC_RECLAIMABLE: KReclaimable covers them,
    and MemAvailable credits them the way it credits any reclaimable kernel
    memory (si_mem_available: the reclaimable pages less the smaller of half
    of them and the low watermark). Read as MemAvailable minus MemFree over
    the churn (aged snapshot to post-churn snapshot), which is where the
    cache fills: MemFree itself moves by up to ~1 MB between boots (stock:
    -948 to +752 kB over four runs), so comparing MemAvailable changes
    between two boots failed once by 428 kB with the cache counted right."""
    f = aged_figures(churned)
    credit, reclaimable = f["memavailable_credit_kib"], f["kreclaimable_kib"]
    end = snap(churned["grouped"][1], "CHURN")["mi"]
    tries = re.search(r"KABLAB-SNAP-TRIES-CHURN (\d+)", churned["grouped"][1])
    print(f"MemAvailable - MemFree over the churn: stock {credit['stock']:+d} kB, grouped {credit['grouped']:+d} kB; "
          f"grouped cache {f['grouped_cache_kib']} kB; KReclaimable grouped {reclaimable['grouped']:+d} kB; "
          f"snapshot read again {tries[1] if tries else '?'} time(s)")
    # node counters reach /proc/meminfo in per-CPU batches: allow a little lag
    assert end["KReclaimable"] >= f["grouped_cache_kib"] - 256
    # measured: grouped +1016 kB for 2028 kB reclaimable, stock +0 kB
    assert reclaimable["grouped"] / 2 - 256 <= credit["grouped"] <= reclaimable["grouped"] + 256, (credit, reclaimable)
    assert abs(credit["stock"] - reclaimable["stock"]) <= 256, credit


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


def fragmented_figures(fragmented: dict) -> dict:
    """The fragmented regime's figures, over the churn (pinned snapshot to
    the end): reclaim and compaction counters and direct-map growth for both
    kernels, and what the grouped cache did."""
    c = {v: fragmented[v][1] for v in fragmented}
    pinned, end = ({v: snap(c[v], t) for v in c} for t in ("PINNED", "CHURN"))
    f = {k: {v: end[v]["vm"].get(k, 0) - pinned[v]["vm"].get(k, 0) for v in c} for k in RECLAIM_COUNTERS}
    f["directmap4k_kib"] = {v: end[v]["mi"]["DirectMap4k"] - pinned[v]["mi"]["DirectMap4k"] for v in c}
    f["level2_splits"] = {v: end[v]["vm"]["direct_map_level2_splits"] - pinned[v]["vm"]["direct_map_level2_splits"]
                          for v in c}
    f["growth_ratio"] = f["directmap4k_kib"]["grouped"] / max(f["directmap4k_kib"]["stock"], 1)
    f["grouped"] = {k: end["grouped"]["gp"][k] - pinned["grouped"]["gp"][k]
                    for k in ("refill_failures", "refill_backoffs", "fallback_pages", "blocks_allocated",
                              "cache_hits", "freed_to_cache")}
    mixed = re.search(r"KABLAB-MIXED-MAX (\d+)", c["grouped"])
    f["grouped"]["mixed_areas_seen"] = int(mixed[1]) if mixed else -1
    return f


def test_fragmented_regime_falls_back_to_ordinary_pages(fragmented):
    """With no free 2 MB block the cache's refills fail and areas get
    ordinary pages (V-4 of the v2 review): modules and BPF still work, the
    cache's pages stay counted in KReclaimable, nothing warns."""
    for v, (result, console) in fragmented.items():
        scans = re.findall(r"KABLAB-PIN pinned \d+ blocks of order 9 \((\d+) in all\)", console)
        assert "KABLAB-PIN-RC 0" in console and scans and int(scans[-1]) > 0, console[-3000:]
        print(f"{v}: pinned {scans[-1]} blocks in {len(scans)} scans")
        assert free_pmd_blocks(console) == 0, re.findall(r"KABLAB-BUDDY .*", console)
        assert f"KABLAB-INITS {MODULE_LOADS}" in console and f"KABLAB-EXITS {MODULE_LOADS}" in console
        assert result["metrics"]["bpf_loads_per_s"]["value"] > 0
        for bad in ("WARNING:", "BUG:", "Oops"):
            assert bad not in console, (v, bad)
    delta = fragmented_figures(fragmented)["grouped"]
    after = snap(fragmented["grouped"][1], "CHURN")
    gp = after["gp"]
    print(f"grouped, fragmented, over the churn: {delta}; cached_pages {gp['cached_pages']}, "
          f"KReclaimable {after['mi']['KReclaimable']} kB")
    assert delta["refill_failures"] > 0 and delta["fallback_pages"] > 0, delta
    # an area with pages from both: its grouped pages went back to the cache,
    # the others to the page allocator (the cache's balance below)
    assert delta["mixed_areas_seen"] > 0, delta
    assert after["mi"]["KReclaimable"] >= 4 * gp["cached_pages"] - 256, (after["mi"], gp)
    # every page that a block brought in is still cached, mapped or gone
    gone = gp["shrinker_freed_pages"] + gp["freed_referenced"] + gp["hwpoison_dropped"]
    assert gp["cached_pages"] + after["vmi"]["grouped_pages"] + gone == 512 * gp["blocks_allocated"], (gp, after)


def test_fragmented_regime_costs_no_reclaim_or_compaction(fragmented):
    """A failed refill must not make the system reclaim or compact for an
    order-9 block where stock serves the same areas from order-0 pages
    (V-3 of the v2 review): over the churn, grouped's counters grow no more
    than stock's. Also reports the direct-map growth in this regime."""
    f = fragmented_figures(fragmented)
    for v in fragmented:
        print(f"{v}, fragmented, over the churn: " + ", ".join(
            f"{k} {f[k][v]:+d}" for k in (*RECLAIM_COUNTERS, "directmap4k_kib", "level2_splits")))
    print(f"fragmented: DirectMap4k growth grouped/stock = {f['growth_ratio']:.3f}")
    for v, (_, console) in fragmented.items():
        assert all(k in snap(console, "CHURN")["vm"] for k in RECLAIM_COUNTERS), v
    for k in RECLAIM_COUNTERS:
        assert f[k]["grouped"] <= f[k]["stock"], (k, f[k])
