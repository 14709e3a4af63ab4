"""kablab.results.collect: the grouped page cache counters the guest
runner snapshots around every block of a kernel that has them."""
from __future__ import annotations

import shutil
from pathlib import Path

from kablab.results import collect

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample"

# /sys/kernel/debug/vmalloc_group_pages of grouped v3 (key ec7854c2b4c81afb),
# booted by tests/test_kernel_suites.py: after lib/test_vmalloc, after lib/test_bpf.
BEFORE = """enabled 1
cached_pages 512
block_order 9
blocks_allocated 1
refill_failures 0
refill_backoffs 0
cache_hits 6
remote_hits 0
fallback_pages 0
freed_to_cache 7
freed_referenced 0
shrinker_freed_pages 0
hwpoison_dropped 0
node0_cached_pages 512
node0_cache_hits 6
node0_remote_hits 0
node0_refills 1
node0_refill_failures 0
"""
AFTER = """enabled 1
cached_pages 2048
block_order 9
blocks_allocated 4
refill_failures 0
refill_backoffs 0
cache_hits 407400
remote_hits 0
fallback_pages 0
freed_to_cache 407404
freed_referenced 0
shrinker_freed_pages 0
hwpoison_dropped 0
node0_cached_pages 2048
node0_cache_hits 407400
node0_remote_hits 0
node0_refills 4
node0_refill_failures 0
"""


def raw_copy(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(SAMPLE, raw)
    for f in raw.glob("grouped.*"):
        f.unlink()
    return raw


def test_grouped_counters_are_parsed_around_the_block(tmp_path):
    raw = raw_copy(tmp_path)
    (raw / "grouped.before").write_text(BEFORE)
    (raw / "grouped.after").write_text(AFTER + "not a counter line\n")
    doc = collect.collect_to(raw, tmp_path / "out.json")
    gp = doc["grouped_pages"]
    assert gp["before"]["cached_pages"] == 512 and gp["before"]["blocks_allocated"] == 1
    assert gp["after"]["cache_hits"] - gp["before"]["cache_hits"] == 407394
    assert gp["after"]["node0_refills"] == 4 and gp["after"]["refill_failures"] == 0
    assert "not" not in gp["after"]
    assert "grouped.before" in doc["collect"]["files"]


def test_kernels_without_the_cache_record_null(tmp_path):
    doc = collect.collect_to(raw_copy(tmp_path), tmp_path / "out.json")
    assert doc["grouped_pages"] == {"before": None, "after": None}
    assert doc["status"] == "ok"
