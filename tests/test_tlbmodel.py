"""Tests for tlbmodel/: the TLB model's unit-test driver (synthetic traces
with hand-computed answers, see tlbmodel/test_tlbmodel.c), the plugin's
exported ABI, and that Debian's QEMU loads the plugin (without running a
guest: -S, then quit). The booted check lives in tlbmodel/README.md.
"""
import json
import shutil
import subprocess

import pytest

from kablabtest import need
from kablabtest import REPO as ROOT

SRC = ROOT / "tlbmodel"
QEMU = shutil.which("qemu-system-x86_64")

# Every case the driver must report; a case dropped from the driver fails here.
CASES = [
    "walk_4k_2m_1g", "walk_absent_and_errors", "walk_5level", "lru_order",
    "set_assoc_eviction", "capacity_per_size", "stlb", "splinter_1g",
    "shared_array", "global_survives_cr3", "split_store", "invlpg",
    "walk_faults_counted", "stlb_golden_cove", "not_present_not_cached",
    "freed_table_unwatched", "cr4_pair_and_alone", "check_root",
    "shortcuts_change_nothing", "decode", "config",
    "watch_table", "watch_alias", "direct_map_apart", "stats_json",
]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("tlbmodel-build")
    p = subprocess.run(["nice", "make", "-C", str(SRC), f"BUILD={out}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning" not in (p.stdout + p.stderr).lower()
    return out


@pytest.fixture(scope="module")
def driver(build):
    p = subprocess.run([str(build / "test_tlbmodel")], capture_output=True,
                       text=True, timeout=60)
    return p


def json_line(output, name):
    prefix = f"json {name} "
    lines = [ln[len(prefix):] for ln in output.splitlines() if ln.startswith(prefix)]
    assert len(lines) == 1, output
    return json.loads(lines[0])


def test_driver_passes_every_case(driver):
    assert driver.returncode == 0, driver.stdout + driver.stderr
    oks = {ln[3:] for ln in driver.stdout.splitlines() if ln.startswith("ok ")}
    assert oks == set(CASES), driver.stdout
    assert f"{len(CASES)} tests, 0 failed" in driver.stdout


def test_default_core_is_golden_cove(driver):
    # CPUID leaf 0x18 of a Golden Cove P-core (tlbmodel/config.c): load-only
    # L1 dTLB, L1 iTLB, and the STLB's two arrays with their page sizes.
    cfg = json_line(driver.stdout, "config")
    assert cfg == {
        "l1d": [[64, 4, "4k"], [32, 4, "2m"], [8, 8, "1g"]],
        "l1i": [[256, 8, "4k"], [32, 8, "2m"]],
        "l2": [[1024, 8, "4k+2m"], [1024, 8, "4k+1g"]],
    }
    # core=legacy: the model's geometry before, for redoing old figures
    assert json_line(driver.stdout, "config_legacy") == {
        "l1d": [[96, 6, "4k"], [32, 4, "2m"], [8, 8, "1g"]],
        "l1i": [[256, 8, "4k"], [32, 8, "2m"]],
        "l2": [[2048, 16, "4k+2m"], [1024, 8, "1g"]],
    }


def test_counts_json(driver):
    # test_stats_json: kernel data 3 x one 2M page of the direct map, 2
    # fetches from a 4k kernel page, one user access, one CR3 write.
    s = json_line(driver.stdout, "stats")
    assert set(s) == {"kernel", "user", "events"}
    k = s["kernel"]
    assert k["insns"] == 2
    assert k["dtlb"]["2m"] == {"acc": 3, "l1_miss": 1, "walks": 1}
    assert k["itlb"]["4k"] == {"acc": 2, "l1_miss": 1, "walks": 1}
    # the direct-map subset of the kernel's data: the 2M page, not the fetches
    assert k["dtlb_directmap"]["2m"] == {"acc": 3, "l1_miss": 1, "walks": 1}
    assert k["dtlb_directmap"]["4k"] == {"acc": 0, "l1_miss": 0, "walks": 0}
    assert "dtlb_directmap" not in s["user"]
    assert s["user"]["dtlb"]["4k"] == {"acc": 1, "l1_miss": 1, "walks": 1}
    assert s["user"]["insns"] == 0
    assert s["events"]["cr3_writes"] == 1
    assert set(s["events"]) == {
        "cr3_writes", "cr4_writes", "cr4_global_flushes", "invlpg", "invpcid", "pt_stores",
        "pt_invalidations", "pt_alias_flushes", "walk_faults",
        "walk_read_errors"}


def test_plugin_exports_only_the_abi(build):
    p = subprocess.run(["nm", "-D", "--defined-only", str(build / "libkablab-tlb.so")],
                       capture_output=True, text=True, check=True)
    names = sorted(ln.split()[-1] for ln in p.stdout.splitlines() if ln.strip())
    assert names == ["qemu_plugin_install", "qemu_plugin_version"]


def qemu(build, plugin_args, *extra):
    need("qemu-system-x86_64")
    return subprocess.run(
        ["nice", "-n", "19", QEMU, "-accel", "tcg", "-m", "128", "-display", "none",
         "-net", "none", "-S", "-monitor", "stdio", *extra,
         "-plugin", f"{build / 'libkablab-tlb.so'},{plugin_args}"],
        input="quit\n", capture_output=True, text=True, timeout=60)


def test_qemu_loads_plugin_and_writes_params_and_total(build, tmp_path):
    out = tmp_path / "tlb.jsonl"
    p = qemu(build, f"root=0x2000,levels=4,l1d_4k=96:6,out={out}",
             "-object", "memory-backend-memfd,id=ram0,size=128M,share=on",
             "-machine", "pc,memory-backend=ram0")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [r["type"] for r in recs] == ["params", "total"]
    params, total = recs
    assert params["format"] == 2
    assert params["core"] == "custom" and params["base"] == "goldencove"
    assert params["tlb"]["l1d"][0] == [96, 6, "4k"]
    assert params["root"] == "0x2000"
    assert params["marker"] == "0x6b61626c0000"
    # the direct-map region counted apart: 64 TiB from page_offset (4 levels)
    assert params["page_offset"] == "0xffff888000000000"
    assert params["direct_map_size"] == hex(64 << 40)
    assert total["ram"] == "memfd"       # the backend mapping was found
    assert total["runs"] == 0
    # dormant until the guest runs the activation instruction (never, here)
    assert params["from"] == "mark" and total["active"] is False


def test_qemu_models_from_the_first_instruction_with_from_boot(build, tmp_path):
    out = tmp_path / "tlb.jsonl"
    p = qemu(build, f"root=none,from=boot,out={out}")
    assert p.returncode == 0, p.stderr
    params, total = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert params["from"] == "boot" and total["active"] is True


@pytest.mark.parametrize("args,core,base,l2", [
    # a named core, wherever its key stands
    ("l1d_4k=64:4,core=legacy", "custom", "legacy", [[2048, 16, "4k+2m"], [1024, 8, "1g"]]),
    ("core=legacy", "legacy", "legacy", [[2048, 16, "4k+2m"], [1024, 8, "1g"]]),
    # the whole STLB in one key
    ("l2=512:4:4k2m1g", "custom", "goldencove", [[512, 4, "4k+2m+1g"]]),
])
def test_qemu_loads_named_core_and_level(build, tmp_path, args, core, base, l2):
    out = tmp_path / "tlb.jsonl"
    p = qemu(build, f"root=none,{args},out={out}")
    assert p.returncode == 0, p.stderr
    params = json.loads(out.read_text().splitlines()[0])
    assert (params["core"], params["base"], params["tlb"]["l2"]) == (core, base, l2)


@pytest.mark.parametrize("args,message", [
    ("out=/dev/null", "root=<phys of init_top_pgt>"),
    ("root=none,l1d_4k=7:2", "l1d 4k array: entries (7) must be a multiple of ways (2)"),
    ("root=none,core=skylake", "unknown core 'skylake'"),
    ("root=none,l2=1024:8:4k8k", "bad argument 'l2=1024:8:4k8k'"),
    ("root=none,l9_4k=1:1", "bad argument 'l9_4k=1:1'"),
    ("root=none,levels=3", "bad argument 'levels=3'"),
    ("root=none,marker=0x1234", "bad argument 'marker=0x1234'"),
    ("root=none,from=start", "bad argument 'from=start'"),
])
def test_qemu_refuses_bad_arguments(build, args, message):
    p = qemu(build, args)
    assert p.returncode != 0
    assert message in p.stderr
