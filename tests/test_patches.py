"""Kernel patch series: checkpatch-clean, and applying to the pristine tree.

Every series directory under kernel-patches/ (except configs/) is a
`git format-patch --cover-letter` series.  Each patch must have no
checkpatch.pl errors (checkpatch of the pristine tree), and the series of
every variant in inventory/group_vars/all/variants.yml must apply with
`git apply`, in the variant's order, to the pristine Debian tree, exactly
as roles/kernel_build/files/kablab-kernel-build applies them.

The applies run in a hard-link copy (`cp -al`) of the pristine tree.  That
is safe because git apply writes each patched file as a new file and
renames it into place, which breaks the hard link instead of writing
through it; test_git_apply_breaks_hard_links checks that assumption on this
machine, and every apply also checks that the pristine files it touched are
unchanged.  After each apply the touched paths are linked back to the
pristine files, so one copy serves all tests.

Runs on /usr/bin/python3 with Debian's python3-pytest and python3-yaml.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kablab.lab import kbuild
from kablabtest import CACHE, REPO

PATCHES = REPO / "kernel-patches"
VARIANTS_YML = REPO / "inventory/group_vars/all/variants.yml"
PRISTINE = CACHE / "src" / "linux-source-6.1"

CHECKPATCH_TOTAL = re.compile(r"^total: (\d+) errors, (\d+) warnings", re.M)
DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


def series_dirs() -> list[str]:
    if not PATCHES.is_dir():
        return []
    return sorted(d.name for d in PATCHES.iterdir() if d.is_dir() and d.name != "configs")


def series_patches(*series: str) -> list[Path]:
    """The patches of these series in apply order: the list the build glue
    applies (kablab.lab.kbuild.patch_files)."""
    return kbuild.patch_files(kbuild.Spec(cache=CACHE, source=PRISTINE, source_version="", patches=PATCHES,
                                          variant="test", series=list(series), profile="ci"))


def variants() -> list[dict]:
    data = yaml.safe_load(VARIANTS_YML.read_text())
    return data["kablab_variants"]


def variant_ids() -> list[str]:
    try:
        return [v["name"] for v in variants()]
    except Exception:  # reported by test_variants_name_existing_series
        return []


def touched_paths(patch: Path) -> list[str]:
    """Both sides of every `diff --git` header (covers renames and new files)."""
    paths = []
    for a, b in DIFF_GIT.findall(patch.read_text(errors="replace")):
        paths += [a, b]
    return list(dict.fromkeys(paths))


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def git_env(tree: Path) -> dict:
    # Never let git find a repository above the scratch tree.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(tree.parent)
    return env


@pytest.fixture(scope="session")
def pristine() -> Path:
    if not (PRISTINE / "Makefile").is_file() or not (PRISTINE / "scripts/checkpatch.pl").is_file():
        pytest.fail(
            f"pristine kernel tree {PRISTINE} is missing (KABLAB_CACHE_DIR="
            f"{os.environ.get('KABLAB_CACHE_DIR', '<unset>')}); run the kernels playbook first: "
            "ansible-playbook playbooks/kernels.yml (it extracts /usr/src/linux-source-6.1.tar.xz "
            "there)", pytrace=False)
    return PRISTINE


@pytest.fixture(scope="session")
def scratch(pristine, tmp_path_factory) -> Path:
    """One hard-link copy of the pristine tree, restored after every apply."""
    tree = tmp_path_factory.mktemp("scratch") / "linux-source-6.1"
    subprocess.run(["cp", "-al", str(pristine), str(tree)], check=True)
    return tree


def restore(tree: Path, pristine: Path, paths: list[str]) -> None:
    for rel in paths:
        dst, src = tree / rel, pristine / rel
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.link(src, dst)


def apply_in_order(tree: Path, pristine: Path, patches: list[Path]) -> tuple[Path | None, str]:
    """git apply each patch in order; return (first patch that fails, message).

    The tree is restored to the pristine state afterwards, and the pristine
    files the patches touch are checked to be unchanged.
    """
    touched: list[str] = []
    for p in patches:
        touched += [t for t in touched_paths(p) if t not in touched]
    before = {rel: sha256(pristine / rel) for rel in touched}
    failed, msg = None, ""
    try:
        for p in patches:
            cmd = ["git", "apply", "--whitespace=nowarn", "-p1"]
            check = subprocess.run(cmd + ["--check", str(p)], cwd=tree, env=git_env(tree),
                                   capture_output=True, text=True)
            if check.returncode != 0:
                failed, msg = p, check.stderr.strip()
                break
            done = subprocess.run(cmd + [str(p)], cwd=tree, env=git_env(tree),
                                  capture_output=True, text=True)
            if done.returncode != 0:
                failed, msg = p, done.stderr.strip()
                break
    finally:
        restore(tree, pristine, touched)
    after = {rel: sha256(pristine / rel) for rel in touched}
    assert after == before, "git apply in the hard-link copy changed the pristine tree!"
    for rel in touched:
        if (pristine / rel).is_file():
            assert (tree / rel).stat().st_ino == (pristine / rel).stat().st_ino, rel
    return failed, msg


def test_git_apply_breaks_hard_links(tmp_path):
    """The assumption behind `cp -al`: git apply replaces files, never writes through."""
    orig, copy = tmp_path / "orig", tmp_path / "copy"
    orig.mkdir()
    (orig / "f.txt").write_text("one\ntwo\nthree\n")
    subprocess.run(["cp", "-al", str(orig), str(copy)], check=True)
    assert (copy / "f.txt").stat().st_ino == (orig / "f.txt").stat().st_ino
    patch = tmp_path / "p.diff"
    patch.write_text("diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n"
                     "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n")
    subprocess.run(["git", "apply", str(patch)], cwd=copy, env=git_env(copy), check=True)
    assert (copy / "f.txt").read_text() == "one\nTWO\nthree\n"
    assert (orig / "f.txt").read_text() == "one\ntwo\nthree\n"
    assert (copy / "f.txt").stat().st_ino != (orig / "f.txt").stat().st_ino


def test_variants_name_existing_series():
    names = series_dirs()
    for v in variants():
        for s in v.get("series", []):
            assert s in names, (f"variant {v['name']}: series '{s}' has no directory "
                                f"{PATCHES / s}; existing series: {names}")


@pytest.mark.parametrize("series", series_dirs())
def test_series_is_a_format_patch_series(series):
    d = PATCHES / series
    cover = d / "0000-cover-letter.patch"
    assert cover.is_file(), f"{d}: no 0000-cover-letter.patch (git format-patch --cover-letter)"
    text = cover.read_text(errors="replace")
    assert "*** SUBJECT HERE ***" not in text and "*** BLURB HERE ***" not in text, \
        f"{cover}: the cover letter still has format-patch's placeholders"
    patches = series_patches(series)
    assert patches, f"{d}: series has a cover letter but no patches"
    for p in patches:
        assert re.match(r"^\d{4}-", p.name), f"{p}: not a format-patch file name"
        assert DIFF_GIT.search(p.read_text(errors="replace")), f"{p}: contains no diff"


@pytest.mark.parametrize("series", series_dirs())
def test_checkpatch_has_no_errors(series, pristine):
    report = []
    for p in series_patches(series):
        proc = subprocess.run(["perl", "scripts/checkpatch.pl", "--color=never", str(p)],
                              cwd=pristine, env=git_env(pristine), capture_output=True, text=True)
        m = CHECKPATCH_TOTAL.search(proc.stdout)
        assert m, f"checkpatch.pl gave no summary for {p}:\n{proc.stdout}{proc.stderr}"
        if int(m[1]):
            report.append(f"{p.relative_to(REPO)}: {m[1]} errors\n{proc.stdout}")
    assert not report, "\n".join(report)


@pytest.mark.parametrize("series", series_dirs())
def test_series_applies_alone(series, pristine, scratch):
    """Each series also applies directly on the pristine tree."""
    failed, msg = apply_in_order(scratch, pristine, series_patches(series))
    assert failed is None, f"series {series}: {failed.name} does not apply:\n{msg}"


@pytest.mark.parametrize("variant", variant_ids())
def test_variant_series_apply_in_order(variant, pristine, scratch):
    v = next(v for v in variants() if v["name"] == variant)
    patches = series_patches(*v.get("series", []))
    failed, msg = apply_in_order(scratch, pristine, patches)
    assert failed is None, (f"variant {variant} (series {v.get('series')}): "
                            f"{failed.relative_to(PATCHES)} does not apply:\n{msg}")


def test_broken_patch_is_reported(pristine, scratch, tmp_path):
    """A patch with a mangled context line must be reported as not applying."""
    real = next((p for s in series_dirs() for p in series_patches(s)), None)
    assert real is not None, f"no patch under {PATCHES} to break"
    lines = real.read_text().splitlines(keepends=True)
    in_hunk = False
    for i, line in enumerate(lines):
        if line.startswith("@@ "):
            in_hunk = True
        elif in_hunk and line.startswith(" ") and line.strip():
            lines[i] = " KABLAB-MANGLED" + line[1:]
            break
    else:
        pytest.fail(f"{real}: found no context line to mangle")
    broken = tmp_path / "series" / real.name
    broken.parent.mkdir()
    broken.write_text("".join(lines))
    failed, msg = apply_in_order(scratch, pristine, [broken])
    assert failed == broken, "a patch with a mangled context line was applied"
    assert "patch does not apply" in msg, msg
