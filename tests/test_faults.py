"""Issue 7: bad input and faults cost a clear message and nothing else.

Every case records how it was injected, what the user saw and what was
kept; tests/conftest.py writes the table to docs/reliability.md."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kablabtest import CACHE, REPO, run_playbook, record_case

STOCK = {"name": "stock", "series": ["common"], "kconfig": [], "cmdline": ""}


def kablab_leftovers() -> list[str]:
    """Domains, QEMU processes and forwarded ports a kablab run could leave."""
    left = []
    names = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True).stdout.split()
    left += [f"domain {n}" for n in names if n.startswith("kablab")]
    procs = subprocess.run(["pgrep", "-af", "qemu-system.*kablab"], capture_output=True, text=True).stdout
    left += [f"process {p}" for p in procs.splitlines() if p.strip()]
    ports = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    left += [f"port {l.split()[3]}" for l in ports.splitlines() if "qemu" in l]
    return left


def built_entries() -> set[str]:
    return {p.name for p in (CACHE / "kernels").glob("*") if p.is_dir()}


BAD_INPUT = [
    ("unknown variant", {"kablab_select_variants": ["nosuch"]},
     "kablab_select_variants: unknown variant(s) ['nosuch']; allowed: ['stock', 'grouped', 'split4k']"),
    ("unknown workload", {"kablab_workloads": ["nosuch"]}, "kablab_workloads: unknown workload(s) ['nosuch']; allowed:"),
    ("zero repetitions", {"kablab_runs": 0}, "kablab_runs (got 0)"),
    ("negative blocks", {"kablab_blocks": -1}, "kablab_blocks (got -1)"),
    ("unknown profile", {"kablab_profile": "nosuch"}, "kablab_profile must be one of ['smoke', 'full'] (got 'nosuch')"),
    ("unknown mode", {"kablab_mode": "nosuch"}, "kablab_mode one of ['ab', 'aa', 'slowdown'] (got 'nosuch')"),
    ("missing patch series", {"kablab_variants": [STOCK, {**STOCK, "name": "x", "series": ["common", "nosuch"]}]},
     "kablab_variants: series 'nosuch' has no directory"),
    ("bad guest memory", {"guest_domain_memory_mib": 12}, "guest_domain_memory_mib 256..262144 (is 12)"),
    ("bad vCPU count", {"guest_domain_vcpus": 0}, "guest_domain_vcpus must be 1..64 (is 0)"),
]


@pytest.mark.parametrize("case,extra,message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_fails_before_any_work(case, extra, message, tmp_path):
    before = built_entries()
    run = run_playbook("site.yml", extra_vars={**extra, "kablab_reports_dir": str(tmp_path)}, timeout=600)
    assert run.rc != 0
    assert message in run.output, run.output[-3000:]
    assert "TASK [kernel_build : Build kernel" not in run.output
    assert "guest_domain : Define" not in run.output
    assert built_entries() == before
    assert not list(tmp_path.glob("*/results/*/*.json"))
    assert kablab_leftovers() == []
    record_case("bad input: " + case, f"`-e '{json.dumps(extra)}'`", message, "nothing built or booted")


def test_disk_nearly_full_fails_before_the_build(kernels, tmp_path):
    variant = {**STOCK, "name": "diskfull"}
    run = run_playbook("kernels.yml", extra_vars={"kablab_variants": [variant],
                                                  "kernel_build_min_free_gib": {"ci": 1000000, "distro": 1000000}})
    assert run.rc != 0
    assert "GiB free; building 1 variant(s) with the 'ci' config needs 1000000 GiB" in run.output, run.output[-3000:]
    assert "TASK [kernel_build : Build kernel" not in run.output
    assert not list((CACHE / "kernels").glob("diskfull-*"))
    record_case("disk nearly full", "`kernel_build_min_free_gib` above the free space",
                "`<cache> has N GiB free; building 1 variant(s) ... needs M GiB`", "no tree, no cache entry")
