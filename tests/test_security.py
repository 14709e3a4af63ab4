"""Security: nothing the lab runs on the host loads code into the
host kernel or changes its settings; campaign keys stay private."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kablabtest import REPO

# What would load code into, or reconfigure, the host kernel.
HOST_KERNEL_CHANGES = re.compile(
    r"\b(insmod|rmmod|modprobe|kexec|sysctl\s+-w|sysctl\s+--write)\b"
    r"|/proc/sys/\S*\s*$|>\s*/proc/sys/|\b(community\.general\.modprobe|ansible\.posix\.sysctl)\b")

# Files that run on the controller/hypervisor. The workloads and the guest
# runner run inside guests only, so they are not scanned.
HOST_SIDE = ["playbooks", "roles", "scripts", "Makefile", ".ci", "kablab", "inventory", "ansible.cfg"]
GUEST_ONLY = {"roles/workloads/files/kablab-guest-run"}


def host_side_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", *HOST_SIDE], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    return [REPO / f for f in listed if f not in GUEST_ONLY and (REPO / f).is_file()]


def scan(paths: list[Path]) -> list[str]:
    hits = []
    for p in paths:
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0] if p.suffix in (".yml", ".yaml", ".py", ".cfg", "") else line
            if HOST_KERNEL_CHANGES.search(code):
                hits.append(f"{p}:{n}: {line.strip()}")
    return hits


def test_no_host_side_module_load_kexec_or_sysctl():
    files = host_side_files()
    assert len(files) > 50          # the scan really covers the roles and playbooks
    assert scan(files) == []


@pytest.mark.parametrize("line", ["  ansible.builtin.command: modprobe kvm_intel",
                                  "echo 1 > /proc/sys/vm/drop_caches", "sysctl -w vm.swappiness=1",
                                  "- community.general.modprobe:", "kexec -l bzImage"])
def test_the_scan_catches_host_kernel_changes(tmp_path, line):
    f = tmp_path / "task.yml"
    f.write_text(line + "\n")
    assert scan([f]), line


def test_campaign_keys_are_never_tracked(tmp_path):
    ignored = subprocess.run(["git", "check-ignore", "-q", "reports/20261203-abcdef12/ssh/id_ed25519"],
                             cwd=REPO)
    assert ignored.returncode == 0
    tracked = subprocess.run(["git", "ls-files", "reports"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    assert [t for t in tracked if "/ssh/" in t or t.endswith(("id_ed25519", ".pem"))] == []
