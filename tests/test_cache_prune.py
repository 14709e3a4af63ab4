"""playbooks/cache-prune.yml on a scratch cache laid out as kablab-kernel-build
leaves it: finished builds (kernels/<name>/build.json plus trees/<name>
hard-linked to the pristine source), manifests, and the leftovers of killed
builds. The real cache is never touched."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from kablabtest import run_playbook

OBJECT_BYTES = 300 * 1024
SHARED_BYTES = 2 * 1024 * 1024
TWO_DAYS = 2 * 86400


def make_build(cache: Path, name: str, profile: str, built_at: str) -> None:
    variant = name.split("-")[0]
    kernel = cache / "kernels" / name
    kernel.mkdir(parents=True)
    (kernel / "bzImage").write_bytes(b"\0" * 1024)
    (kernel / "build.json").write_text(json.dumps({
        "variant": variant, "key": name.split("-")[1], "config_profile": profile,
        "built_at": built_at, "tree": str(cache / "trees" / name)}))
    make_tree(cache, name)


def make_tree(cache: Path, name: str, age_s: int = 0) -> None:
    tree = cache / "trees" / name
    (tree / "_build").mkdir(parents=True)
    (tree / "_build" / "vmlinux.o").write_bytes(os.urandom(OBJECT_BYTES))
    os.link(cache / "src" / "linux-source-6.1" / "Makefile", tree / "Makefile")
    if age_s:
        old = time.time() - age_s
        os.utime(tree, (old, old))


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    src = tmp_path / "src" / "linux-source-6.1"
    src.mkdir(parents=True)
    (src / "Makefile").write_bytes(os.urandom(SHARED_BYTES))
    make_build(tmp_path, "stock-0000000000000001", "ci", "2026-01-01T00:00:00Z")
    make_build(tmp_path, "stock-0000000000000002", "ci", "2026-02-01T00:00:00Z")
    make_build(tmp_path, "stock-0000000000000003", "distro", "2026-01-01T00:00:00Z")
    make_build(tmp_path, "grouped-0000000000000001", "ci", "2026-01-01T00:00:00Z")
    make_build(tmp_path, "grouped-0000000000000002", "ci", "2026-02-01T00:00:00Z")
    # The manifest names the older grouped build (a campaign's own variant list).
    (tmp_path / "kernels" / "manifest-ci.json").write_text(json.dumps({
        name.split("-")[0]: {"dir": str(tmp_path / "kernels" / name)}
        for name in ("stock-0000000000000002", "grouped-0000000000000001")}))
    make_tree(tmp_path, "split4k-killed0000000000", age_s=TWO_DAYS)
    make_tree(tmp_path, "split4k-running000000000")
    make_tree(tmp_path, ".config-check-stock-4242", age_s=TWO_DAYS)
    half = tmp_path / "kernels" / "split4k-0000000000000009.tmp"
    half.mkdir()
    # Killed after writing build.json, before the rename: still not a build.
    (half / "build.json").write_text(json.dumps({
        "variant": "split4k", "config_profile": "ci", "built_at": "2026-03-01T00:00:00Z"}))
    old = time.time() - TWO_DAYS
    os.utime(half, (old, old))
    return tmp_path


def entries(cache: Path) -> set[str]:
    return {f"{d}/{p.name}" for d in ("kernels", "trees") for p in (cache / d).iterdir()}


PRUNED = {
    "kernels/stock-0000000000000001", "trees/stock-0000000000000001",
    "trees/split4k-killed0000000000", "trees/.config-check-stock-4242",
    "kernels/split4k-0000000000000009.tmp",
}


def freed_mib(output: str) -> float:
    m = re.search(r'"(?:would free|freed): ([0-9.]+) MiB"', output)
    assert m, output
    return float(m[1])


def test_check_mode_lists_and_keeps_everything(cache: Path) -> None:
    before = entries(cache)
    run = run_playbook("cache-prune.yml", "--check", extra_vars={"kablab_cache_dir": str(cache)})
    assert run.rc == 0, run.output
    assert entries(cache) == before
    listed = re.search(r'"would remove: ([^"]*)"', run.output)
    assert listed, run.output
    assert set(listed[1].split(", ")) == PRUNED


def test_prune_keeps_newest_and_manifest_kernels(cache: Path) -> None:
    before = entries(cache)
    run = run_playbook("cache-prune.yml", extra_vars={"kablab_cache_dir": str(cache)})
    assert run.rc == 0, run.output
    assert entries(cache) == before - PRUNED
    # Three object files go; the hard-linked source file does not count.
    assert freed_mib(run.output) == pytest.approx(3 * OBJECT_BYTES / 2**20, abs=0.1)
    assert (cache / "src" / "linux-source-6.1" / "Makefile").stat().st_size == SHARED_BYTES

    again = run_playbook("cache-prune.yml", extra_vars={"kablab_cache_dir": str(cache)})
    assert again.rc == 0, again.output
    assert again.recap()["localhost"]["changed"] == 0
    assert entries(cache) == before - PRUNED


def test_keep_two_keeps_both_stock_builds(cache: Path) -> None:
    run = run_playbook("cache-prune.yml", extra_vars={"kablab_cache_dir": str(cache), "cache_prune_keep": 2})
    assert run.rc == 0, run.output
    assert (cache / "kernels" / "stock-0000000000000001" / "build.json").is_file()
    assert not (cache / "trees" / "split4k-killed0000000000").exists()


@pytest.mark.parametrize("bad, message", [
    ({"cache_prune_keep": 0}, "cache_prune_keep must be at least 1"),
    ({"cache_prune_keep": "many"}, "cache_prune_keep"),
    ({"cache_prune_stale_age": "-1d"}, "cache_prune_stale_age must be a positive age"),
])
def test_bad_settings_fail_before_removing(cache: Path, bad: dict, message: str) -> None:
    before = entries(cache)
    run = run_playbook("cache-prune.yml", extra_vars={"kablab_cache_dir": str(cache), **bad})
    assert run.rc != 0
    assert message in run.output, run.output
    assert entries(cache) == before
