"""Issue 9: the grouped-pages port keeps module/BPF permission changes from
fragmenting the direct map; same churn binary, same seed, stock vs grouped."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kablabtest import REPO, boot, meminfo

MODULE_LOADS = 50
BPF_PROGS = 200

CHURN_INIT = f"""
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /var/tmp && mount -t tmpfs tmp /var/tmp
grep DirectMap /proc/meminfo | sed 's/^/KABLAB-MEMINFO /'
/bin/module-bpf-churn --seed 1 --json --module /lib/kablab_churn.ko \\
    --module-loads {MODULE_LOADS} --bpf-progs {BPF_PROGS} >/tmp/churn.json
echo "KABLAB-CHURN-RC $?"
echo "KABLAB-CHURN-JSON $(cat /tmp/churn.json)"
dmesg | grep -c 'kablab_churn: init' | sed 's/^/KABLAB-INITS /'
dmesg | grep -c 'kablab_churn: exit' | sed 's/^/KABLAB-EXITS /'
if [ -e /sys/kernel/debug/vmalloc_group_pages ]; then
    sed 's/^/KABLAB-GP-BEFORE /' /sys/kernel/debug/vmalloc_group_pages
    # Bounded memory pressure: one pass touching more anonymous memory than
    # is available, so reclaim reaches the shrinkers (the OOM killer may end
    # the hog; that bounds it too).
    hog=$(awk '/MemAvailable/ {{print int($2 / 1024) + 64}}' /proc/meminfo)
    echo "KABLAB-HOG-MIB $hog"
    /bin/page-fault --json --size-mib $hog --iterations 1 >/dev/null 2>&1
    echo "KABLAB-HOG-RC $?"
    sed 's/^/KABLAB-GP-AFTER /' /sys/kernel/debug/vmalloc_group_pages
fi
poweroff -f
"""


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


def churn(variant: str, kernels: dict, binaries: Path, tmp_path: Path) -> tuple[dict, str]:
    k = kernels[variant]
    ko = build_kmod(k, tmp_path)
    console = boot(k["bzimage"], k["cmdline"], CHURN_INIT, tmp_path, timeout=900,
                   files=[f"{binaries}/module-bpf-churn:/bin/module-bpf-churn",
                          f"{binaries}/page-fault:/bin/page-fault", f"{ko}:/lib/kablab_churn.ko"])
    assert "KABLAB-CHURN-RC 0" in console, console[-4000:]
    result = json.loads(re.search(r"KABLAB-CHURN-JSON (\{.*\})", console)[1])
    return result, console


@pytest.fixture(scope="module")
def churned(kernels, churn_binaries, tmp_path_factory) -> dict:
    return {v: churn(v, kernels, churn_binaries, tmp_path_factory.mktemp(v)) for v in ("stock", "grouped")}


def test_grouped_limits_direct_map_fragmentation(churned):
    growth = {v: churned[v][0]["metrics"]["delta_directmap4k_kib"]["value"] for v in churned}
    splits = {v: churned[v][0]["metrics"]["delta_level2_splits"]["value"] for v in churned}
    print(f"DirectMap4k growth: stock {growth['stock']:.0f} kB, grouped {growth['grouped']:.0f} kB; "
          f"level2 splits: stock {splits['stock']:.0f}, grouped {splits['grouped']:.0f}; "
          f"ratio grouped/stock = {growth['grouped'] / max(growth['stock'], 1):.3f}")
    assert splits["stock"] >= 5, "the churn did not fragment stock's direct map: the comparison measures nothing"
    assert growth["grouped"] <= 0.10 * growth["stock"]


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
