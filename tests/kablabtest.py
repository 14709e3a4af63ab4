"""Helpers shared by the tests: run the lab's playbooks exactly as a user does."""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KABLAB_CACHE_DIR", Path.home() / ".cache" / "kablab"))
# guest_domain_publish_dir's default: kernels, overlays and console logs libvirt reads
PUBLISH = Path("/var/lib/kablab")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass
class PlaybookRun:
    rc: int
    output: str

    def recap(self) -> dict[str, dict[str, int]]:
        return {
            m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
            for m in RECAP.findall(self.output)
        }


def run_playbook(playbook: str, *args: str, extra_vars: dict | None = None,
                 env: dict | None = None, timeout: int = 3600) -> PlaybookRun:
    """Run ansible-playbook from the repo root; output is kept for asserts."""
    cmd = ["ansible-playbook", f"playbooks/{playbook}", *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", **(env or {})})
    return PlaybookRun(proc.returncode, proc.stdout + proc.stderr)


def kablab_leftovers() -> list[str]:
    """Domains, overlays and seed disks, QEMU processes and forwarded ports a
    kablab run could leave."""
    left = []
    domains_dir = PUBLISH / "domains"
    if domains_dir.is_dir():
        left += [f"domain dir {d}" for d in domains_dir.iterdir() if d.name.startswith("kablab")]
    names = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True).stdout.split()
    left += [f"domain {n}" for n in names if n.startswith("kablab")]
    procs = subprocess.run(["pgrep", "-af", "qemu-system.*kablab"], capture_output=True, text=True).stdout
    left += [f"process {p}" for p in procs.splitlines() if p.strip()]
    ports = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    left += [f"port {l.split()[3]}" for l in ports.splitlines() if "qemu" in l]
    return left


# --- reliability table (docs/reliability.md), filled by tests/test_faults.py ---
_CASES: list[dict] = []


def record_case(case: str, injected: str, seen: str, kept: str) -> None:
    """Called by a fault test after its assertions passed."""
    _CASES.append({"case": case, "injected": injected, "seen": seen, "kept": kept})


