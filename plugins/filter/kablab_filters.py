"""Ansible filters backed by the tested kablab package (logic lives there)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kablab.plan import host_boots, plan_boots  # noqa: E402


class FilterModule:
    def filters(self):
        return {
            "kablab_plan": lambda variants, rounds, seed, hosts: plan_boots(
                list(variants), int(rounds), int(seed), list(hosts)),
            "kablab_host_boots": host_boots,
        }
