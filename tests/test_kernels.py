"""The variant kernels build once, boot, and have the direct map they claim."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kablabtest import CACHE, REPO, boot, build_guest_tool, kablab_leftovers, meminfo, record_case, run_playbook

VARIANTS = ["stock", "grouped", "split4k", "jit2m"]

BOOT_INIT = """
mount -t proc proc /proc
mount -t sysfs sys /sys
echo "KABLAB-UNAME-R $(uname -r)"
echo "KABLAB-UNAME-V $(uname -v)"
echo "KABLAB-CMDLINE $(cat /proc/cmdline)"
grep DirectMap /proc/meminfo | sed 's/^/KABLAB-MEMINFO /'
grep direct_map /proc/vmstat | sed 's/^/KABLAB-VMSTAT /'
/bin/secretmem-check
poweroff -f
"""


@pytest.fixture(scope="session")
def secretmem_check(tmp_path_factory) -> Path:
    return build_guest_tool(tmp_path_factory.mktemp("tools"), "secretmem-check")


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_boots_with_its_direct_map(variant, kernels, secretmem_check, tmp_path):
    k = kernels[variant]
    console = boot(k["bzimage"], k["cmdline"], BOOT_INIT, tmp_path,
                   files=[f"{secretmem_check}:/bin/secretmem-check"])
    assert f"KABLAB-UNAME-R {k['release']}" in console, console[-3000:]
    assert k["release"].endswith(f"-kablab-{variant}")
    assert f"KABLAB-UNAME-V #{k['build']['key']} " in console
    assert "secretmem" not in re.search(r"KABLAB-CMDLINE (.*)", console)[1]
    assert "KABLAB-SECRETMEM-OK" in console, console[-3000:]
    dm = meminfo(console)
    assert dm["DirectMap4k"] > 0
    if variant == "split4k":
        assert dm["DirectMap2M"] == 0 and dm.get("DirectMap1G", 0) == 0, dm
    else:
        assert dm["DirectMap2M"] > 0, dm
    for bad in ("Kernel panic", "BUG:", "WARNING:", "Oops"):
        assert bad not in console


def test_build_records_provenance(kernels):
    for variant in VARIANTS:
        build = kernels[variant]["build"]
        assert build["variant"] == variant
        assert build["source_version"]
        assert build["config_profile"] == "ci"
        series = {s["series"] for s in build["series"]}
        assert "common" in series
        assert all(re.fullmatch(r"[0-9a-f]{64}", s["sha256"]) for s in build["series"])
        assert (Path(kernels[variant]["dir"]) / "config").is_file()


def test_second_run_builds_nothing(kernels):
    logs = {v: Path(kernels[v]["dir"], "build.json").stat().st_mtime for v in VARIANTS}
    run = run_playbook("kernels.yml", "-e", "kablab_profile=smoke")
    assert run.rc == 0, run.output[-3000:]
    assert run.recap()["localhost"]["changed"] == 0, run.output[-3000:]
    assert {v: Path(kernels[v]["dir"], "build.json").stat().st_mtime for v in VARIANTS} == logs


def _build_script(cache: Path, variant: str, series: str, *extra: str) -> subprocess.CompletedProcess:
    source = json.loads((CACHE / "src" / "source.json").read_text())
    return subprocess.run([str(REPO / "roles/kernel_build/files/kablab-kernel-build"), "build",
                           "--cache", str(cache), "--source", str(CACHE / "src" / "linux-source-6.1"),
                           "--source-version", source["version"], "--patches", str(REPO / "kernel-patches"),
                           "--variant", variant, "--series", series, "--profile", "ci", *extra],
                          capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "CCACHE_DIR": str(CACHE / "ccache")})


def _kernel_digest(kernel_dir: Path) -> dict[str, str]:
    files = [kernel_dir / "bzImage", kernel_dir / "System.map", kernel_dir / "config",
             *sorted((kernel_dir / "modules").rglob("*.ko"))]
    return {str(f.relative_to(kernel_dir)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def test_build_from_a_donor_is_the_same_kernel(kernels, tmp_path):
    """A donor is an optimisation only. The hard direction: stock built on top
    of grouped's object dir, where kbuild must undo grouped's patched
    vmalloc.h, mm/vmalloc.c and its Kconfig symbol, gives byte for byte the
    kernel that stock built from an empty object dir gives. The donor-less
    stock is the suite's own when it was built from an empty object dir (a
    cold cache builds stock first, without a donor); otherwise one is built here."""
    grouped = Path(kernels["grouped"]["dir"])
    scratch, clean = tmp_path / "scratch", tmp_path / "clean"
    # grouped's record is the only candidate donor in this cache; it names
    # grouped's tree in the real cache, which the build copies and leaves alone.
    (scratch / "kernels" / grouped.name).mkdir(parents=True)
    shutil.copy(grouped / "build.json", scratch / "kernels" / grouped.name)
    grouped_objects = sorted((Path(kernels["grouped"]["build"]["tree"]) / "_build").rglob("*.o"))
    grouped_mtimes = [o.stat().st_mtime_ns for o in grouped_objects]
    suite_stock = Path(kernels["stock"]["dir"])
    reuse = json.loads((suite_stock / "build.json").read_text())["donor"] is None

    try:
        donor_dir = _build_from_donor(scratch, grouped.name)
        if reuse:
            clean_dir = suite_stock
        else:
            proc = _build_script(clean, "stock", "common", "--donor", "none")
            assert proc.returncode == 0, proc.stderr[-3000:]
            # (the test's own tmp dir name contains "donor")
            assert "object dir from donor" not in proc.stdout
            [clean_dir] = (clean / "kernels").glob("stock-*")
        assert json.loads((clean_dir / "build.json").read_text())["donor"] is None
        donor_digest, clean_digest = _kernel_digest(donor_dir), _kernel_digest(clean_dir)
    finally:
        # two trees and object dirs: too big to leave to pytest's tmp retention
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(clean, ignore_errors=True)
    assert any(f.endswith(".ko") for f in clean_digest)
    differ = [f for f in clean_digest if donor_digest.get(f) != clean_digest[f]]
    assert donor_digest.keys() == clean_digest.keys() and differ == [], differ
    # the donor's own objects were copied, not rebuilt in place
    assert [o.stat().st_mtime_ns for o in grouped_objects] == grouped_mtimes
    print(f"stock from a donor == stock from scratch ({'the suite' + chr(39) + 's build' if reuse else 'built here'})")


def _build_from_donor(scratch: Path, donor: str) -> Path:
    """Stock built with DONOR's object dir as its start; returns the kernel dir
    (its digest is taken before the scratch cache goes)."""
    proc = _build_script(scratch, "stock", "common")
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = re.search(r"object dir from donor (\S+) \((\d+) file\(s\) the donor patched refreshed, (\d+) patched alike kept\)",
                  proc.stdout)
    # grouped patched vmalloc.h and more, which must be refreshed; the common
    # series (secretmem.c) is patched alike in both and keeps its objects
    assert m and m[1] == donor and int(m[2]) >= 3 and int(m[3]) >= 1, proc.stdout
    [donor_dir] = (scratch / "kernels").glob("stock-*")
    assert json.loads((donor_dir / "build.json").read_text())["donor"] == donor
    assert "CONFIG_VMALLOC_GROUP_PAGES" not in (donor_dir / "config").read_text()
    return donor_dir


def _one_variant(name: str, series: list[str], kconfig: list[str]) -> dict:
    return {"kablab_variants": [{"name": name, "series": series, "kconfig": kconfig, "cmdline": ""}]}


def test_patch_that_does_not_apply_fails_cleanly(tmp_path, kernels):
    patches = tmp_path / "kernel-patches"
    shutil.copytree(REPO / "kernel-patches", patches)
    victim = sorted((patches / "split4k").glob("0001-*.patch"))[0]
    text = victim.read_text()
    # Corrupt a context line of the first hunk so git apply must refuse it.
    hunk = text.index("\n@@ ")
    ctx = text.index("\n ", hunk + 1)
    victim.write_text(text[:ctx + 2] + "kablab-mangled " + text[ctx + 2:])
    run = run_playbook("kernels.yml", extra_vars={**_one_variant("badpatch", ["common", "split4k"], []),
                                                    "kernel_build_patches_dir": str(patches)})
    assert run.rc != 0
    assert f"series split4k: patch {victim.name} does not apply" in run.output
    assert not list((CACHE / "kernels").glob("badpatch-*"))
    assert not list((CACHE / "trees").glob("badpatch-*"))
    assert kablab_leftovers() == []
    record_case("patch does not apply", "a context line of split4k's first patch mangled",
                f"`series split4k: patch {victim.name} does not apply` + git apply's complaint",
                "no cache entry or tree for the variant")


def test_unknown_kconfig_option_is_named(kernels):
    run = run_playbook("kernels.yml", extra_vars=_one_variant("badkconfig", ["common"], ["CONFIG_KABLAB_NO_SUCH_OPTION=y"]))
    assert run.rc != 0
    assert "unknown Kconfig option CONFIG_KABLAB_NO_SUCH_OPTION" in run.output
    assert not list((CACHE / "kernels").glob("badkconfig-*"))
    assert not list((CACHE / "trees").glob("badkconfig-*"))


def _distro_config_check(patches: Path) -> subprocess.CompletedProcess:
    source = json.loads((CACHE / "src" / "source.json").read_text())
    return subprocess.run([str(REPO / "roles/kernel_build/files/kablab-kernel-build"), "config",
                           "--cache", str(CACHE), "--source", str(CACHE / "src" / "linux-source-6.1"),
                           "--source-version", source["version"], "--patches", str(patches),
                           "--variant", "distrocheck", "--series", "common", "--profile", "distro"],
                          capture_output=True, text=True, timeout=600)


def test_distro_config_fragment_survives(kernels):
    """The full profile's config (Debian's, modules trimmed) is checked here;
    building it takes most of an hour on two cores, so `make full` proves that (README)."""
    proc = _distro_config_check(REPO / "kernel-patches")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "every Kconfig line survived olddefconfig" in proc.stdout
    # Debian's ~3,800 modules go, but the five distro.modules keeps; no core
    # built-in went that the file does not accept
    trimmed = re.search(r"kablab: (\d+) module\(s\) trimmed, kept: KVM KVM_INTEL KVM_AMD VIRTIO_BALLOON IOSCHED_BFQ\n",
                        proc.stdout)
    assert trimmed and int(trimmed[1]) > 3000, proc.stdout
    assert re.search(r"after the trim: 6 module\(s\); 13 core built-in\(s\) went, each accepted in distro.modules",
                     proc.stdout), proc.stdout
    assert not list((CACHE / "trees").glob("*distrocheck*"))


def test_distro_trim_that_takes_a_core_built_in_is_named(kernels, tmp_path):
    """A modules file that keeps nothing: KVM's selects go, and the first one
    the check names is the scheduler's preempt notifiers."""
    patches = Path(shutil.copytree(REPO / "kernel-patches", tmp_path / "kernel-patches"))
    (patches / "configs" / "distro.modules").write_text("# nothing kept\n")
    proc = _distro_config_check(patches)
    assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "variant distrocheck: trimming modules turned off" in proc.stderr
    assert "PREEMPT_NOTIFIERS" in proc.stderr and "MITIGATION_VMSCAPE" in proc.stderr
    assert not list((CACHE / "trees").glob("*distrocheck*"))
