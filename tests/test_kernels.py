"""Issue 3: the variant kernels build once, boot, and have the direct map they claim."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kablabtest import CACHE, REPO, kablab_leftovers, record_case, run_playbook

VARIANTS = ["stock", "grouped", "split4k"]

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
    out = tmp_path_factory.mktemp("tools") / "secretmem-check"
    subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(REPO / "tests/guest-tools/secretmem-check.c")], check=True)
    return out


def boot(kernel: str, cmdline: str, init: str, tmp_path: Path, files: list[str] = (),
         timeout: int = 240) -> str:
    script = tmp_path / "init.sh"
    script.write_text(init)
    log = tmp_path / "console.log"
    cmd = [str(REPO / "scripts/kablab-qemu-boot"), "--kernel", kernel, "--init", str(script),
           "--append", cmdline, "--timeout", str(timeout), "--log", str(log)]
    for f in files:
        cmd += ["--file", f]
    subprocess.run(cmd, check=False, timeout=timeout + 60)
    return log.read_text(errors="replace")


def meminfo(console: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"KABLAB-MEMINFO (\w+):\s+(\d+) kB", console)}


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
    assert re.search(r"TASK \[kernel_build : Build kernel", run.output) is None
    assert {v: Path(kernels[v]["dir"], "build.json").stat().st_mtime for v in VARIANTS} == logs


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


def test_distro_config_fragment_survives(kernels):
    """The full profile's config is checked here; building it is left to real campaigns."""
    source = json.loads((CACHE / "src" / "source.json").read_text())
    proc = subprocess.run([str(REPO / "roles/kernel_build/files/kablab-kernel-build"), "config",
                           "--cache", str(CACHE), "--source", str(CACHE / "src" / "linux-source-6.1"),
                           "--source-version", source["version"], "--patches", str(REPO / "kernel-patches"),
                           "--variant", "distrocheck", "--series", "common", "--profile", "distro"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "every Kconfig line survived olddefconfig" in proc.stdout
    assert not list((CACHE / "trees").glob("*distrocheck*"))
