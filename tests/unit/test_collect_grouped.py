"""kablab.results.collect: the grouped page cache counters the guest
runner snapshots around every block of a kernel that has them."""
from __future__ import annotations

import shutil
from pathlib import Path

from kablab.results import collect

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "raw-sample"

BEFORE = """enabled 1
cached_pages 300
block_order 9
blocks_order9 2
refills 2
cache_hits 700
fallback_pages 0
node0_cached_pages 300
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
    (raw / "grouped.after").write_text(BEFORE.replace("cache_hits 700", "cache_hits 812")
                                       + "not a counter line\n")
    doc = collect.collect_to(raw, tmp_path / "out.json")
    gp = doc["grouped_pages"]
    assert gp["before"]["cached_pages"] == 300 and gp["before"]["blocks_order9"] == 2
    assert gp["after"]["cache_hits"] - gp["before"]["cache_hits"] == 112
    assert "not" not in gp["after"]
    assert "grouped.before" in doc["collect"]["files"]


def test_kernels_without_the_cache_record_null(tmp_path):
    doc = collect.collect_to(raw_copy(tmp_path), tmp_path / "out.json")
    assert doc["grouped_pages"] == {"before": None, "after": None}
    assert doc["status"] == "ok"
