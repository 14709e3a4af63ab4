"""kablab.lab.kcache: the kernel manifest and the cache prune decision, on the
manifest and build records of a real cache (tests/fixtures/kbuild/)."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from kablab.lab.kcache import build_times, du_freed, kernel_entries, merge_manifest, prune_decision
from kablabtest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "kbuild"
MANIFEST = json.loads((FIXTURES / "manifest-ci.json").read_text())
RECORDS = {v: json.loads((FIXTURES / f"{v}.build.json").read_text())
           for v in ("stock", "grouped", "split4k", "jit2m")}
VARIANTS = yaml.safe_load((REPO / "inventory/group_vars/all/variants.yml").read_text())["kablab_variants"]
# tests/test_faults.py's variant: stock's kernel, another cmdline
PANIC = {"name": "panicboot", "series": ["common"], "kconfig": [], "build_from": "stock",
         "cmdline": "root=/dev/nonexistent"}
CACHE = "/root/.cache/kablab"


def keys(names=("stock", "grouped", "split4k")) -> list[dict]:
    return [{"variant": n, "dir": f"{CACHE}/kernels/{n}-{RECORDS[n]['key']}"} for n in names]


def test_kernel_entries_reproduce_the_real_manifest():
    built = [v for v in VARIANTS if "build_from" not in v]
    entries = kernel_entries(VARIANTS + [PANIC], keys([v["name"] for v in built]),
                             [RECORDS[v["name"]] for v in built])
    assert entries == MANIFEST


def test_build_from_takes_the_named_kernel_with_its_own_cmdline():
    entries = kernel_entries([*VARIANTS[:1], PANIC], keys(["stock"]), [RECORDS["stock"]])
    assert entries["panicboot"]["dir"] == entries["stock"]["dir"]
    assert entries["panicboot"]["build"] is entries["stock"]["build"]
    assert (entries["stock"]["cmdline"], entries["panicboot"]["cmdline"]) == ("", "root=/dev/nonexistent")
    with pytest.raises(ValueError, match="build_from 'stock' is not a variant built"):
        kernel_entries([PANIC], [], [])


def test_records_out_of_step_with_keys_are_refused():
    with pytest.raises(ValueError, match="is variant 'grouped', not 'stock'"):
        kernel_entries(VARIANTS, keys(["stock", "grouped"]), [RECORDS["grouped"], RECORDS["stock"]])
    with pytest.raises(ValueError):
        kernel_entries(VARIANTS, keys(["stock", "grouped"]), [RECORDS["stock"]])


def test_manifest_keeps_earlier_variants_and_replaces_namesakes():
    new_stock = {**MANIFEST["stock"], "dir": f"{CACHE}/kernels/stock-0123456789abcdef"}
    merged = merge_manifest(MANIFEST, {"stock": new_stock, "aa": new_stock})
    assert list(merged) == ["aa", "grouped", "jit2m", "panicboot", "split4k", "stock"]
    assert merged["stock"] is new_stock and merged["grouped"] == MANIFEST["grouped"]
    assert merge_manifest(None, {"stock": new_stock}) == {"stock": new_stock}


def _records(cache: str, builds: dict[str, tuple[str, str]]) -> tuple[list[str], list[dict]]:
    """name -> (profile, built_at): the real stock/grouped/split4k records under other keys."""
    paths, records = [], []
    for name, (profile, built_at) in builds.items():
        variant = name.split("-")[0]
        paths.append(f"{cache}/kernels/{name}/build.json")
        records.append({**RECORDS[variant], "key": name.split("-")[1], "config_profile": profile,
                        "built_at": built_at, "tree": f"{cache}/trees/{name}"})
    return paths, records


BUILDS = {
    "stock-0000000000000001": ("ci", "2026-01-01T00:00:00Z"),
    "stock-0000000000000002": ("ci", "2026-02-01T00:00:00Z"),
    "stock-0000000000000003": ("distro", "2026-01-01T00:00:00Z"),
    "grouped-0000000000000001": ("ci", "2026-01-01T00:00:00Z"),
    "grouped-0000000000000002": ("ci", "2026-02-01T00:00:00Z"),
    "split4k-0000000000000001": ("ci", "2026-03-01T00:00:00Z"),
}
C = "/c"
STALE = [f"{C}/trees/split4k-killed", f"{C}/trees/.config-check-stock-4242", f"{C}/kernels/split4k-9.tmp",
         f"{C}/trees/stock-0000000000000001", f"{C}/kernels/stock-0000000000000001"]
# a campaign's own manifest names the older grouped build
IN_USE = {"grouped": {"dir": f"{C}/kernels/grouped-0000000000000001"},
          "stock": {"dir": f"{C}/kernels/stock-0000000000000002/"}}


def test_prune_keeps_the_newest_per_variant_and_profile_and_what_manifests_name():
    paths, records = _records(C, BUILDS)
    d = prune_decision(C, paths, records, [IN_USE, {}], STALE, 1)
    assert d["in_use"] == ["grouped-0000000000000001", "stock-0000000000000002"]
    assert d["old"] == ["stock-0000000000000001"]
    assert d["kept"] == sorted(set(BUILDS) - {"stock-0000000000000001"})
    # an old finished build's tree is owned until the build goes with it;
    # killed builds' trees and *.tmp entries are stale
    assert d["stale"] == STALE[:3]
    assert d["paths"] == [f"{C}/kernels/stock-0000000000000001", f"{C}/trees/stock-0000000000000001", *STALE[:3]]


def test_every_kernel_goes_before_any_tree():
    paths, records = _records(C, BUILDS)
    d = prune_decision(C, paths, records, [], [], 1)
    assert d["old"] == ["grouped-0000000000000001", "stock-0000000000000001"]
    kinds = [p.split("/")[2] for p in d["paths"]]
    assert kinds == ["kernels", "kernels", "trees", "trees"]


def test_keep_two_and_keep_below_one():
    paths, records = _records(C, BUILDS)
    d = prune_decision(C, paths, records, [], [], 2)
    assert d["old"] == [] and d["paths"] == []
    with pytest.raises(ValueError, match="at least 1"):
        prune_decision(C, paths, records, [], [], 0)


def test_real_manifest_marks_real_builds_in_use():
    paths = [f"{CACHE}/kernels/{n}-{r['key']}/build.json" for n, r in RECORDS.items()]
    d = prune_decision(CACHE, paths, list(RECORDS.values()), [MANIFEST], [], 1)
    assert d["in_use"] == sorted(f"{n}-{r['key']}" for n, r in RECORDS.items())
    assert d["old"] == [] and d["kept"] == d["in_use"]
    assert [b["group"] for b in d["builds"]] == ["grouped/ci", "jit2m/ci", "split4k/ci", "stock/ci"]


def test_du_freed_adds_only_the_removed_paths(tmp_path):
    """On real du output: a file hard-linked into a tree is counted under
    the source listed first, so only the tree's own bytes are freed."""
    src, tree = tmp_path / "src", tmp_path / "trees" / "stock-1"
    src.mkdir()
    tree.mkdir(parents=True)
    (src / "Makefile").write_bytes(b"x" * 200_000)
    (tree / "Makefile").hardlink_to(src / "Makefile")
    (tree / "vmlinux.o").write_bytes(b"y" * 100_000)
    gone = tmp_path / "kernels" / "gone"
    lines = subprocess.run(["du", "-sb", str(src), str(tree), str(gone)], capture_output=True, text=True
                           ).stdout.splitlines()
    assert len(lines) == 2
    freed = du_freed(lines, [str(tree), str(gone)])
    assert 100_000 <= freed < 150_000
    assert du_freed(lines, []) == 0


def test_build_times_name_each_variant_its_seconds_and_donor():
    # grouped-donor.build.json: a grouped build that started from stock's objects
    donor = json.loads((FIXTURES / "grouped-donor.build.json").read_text())
    ks = [{**k, "cached": c} for k, c in zip(keys(), (True, False, False))]
    lines = build_times(ks, [RECORDS["stock"], donor, RECORDS["split4k"]])
    stock, grouped, split4k = lines
    assert stock.startswith(f"stock-{RECORDS['stock']['key']} (ci): {RECORDS['stock']['build_seconds']} s, ")
    assert stock.endswith("from scratch; reused from the cache")
    assert grouped == (f"grouped-{donor['key']} (ci): {donor['build_seconds']} s, "
                       f"objects from {donor['donor']}; built by this run")
    assert split4k.startswith("split4k-")
    with pytest.raises(ValueError):
        build_times(ks, [RECORDS["stock"]])


def test_build_times_count_the_distro_trim():
    rec = {**RECORDS["stock"], "config_profile": "distro",
           "modules_trim": {"modules_file": "distro.modules", "trimmed": 3833}}
    (line,) = build_times(keys(["stock"]), [rec])
    assert "(distro)" in line and "from scratch, 3833 modules trimmed; built by this run" in line
