"""The campaign's boot plan: a randomised complete block design.

Each round boots every variant once, in an order shuffled from the seed and
the round number, so host drift cannot line up with one kernel. Within a
round the boots are dealt to the hypervisor hosts by a rotation (variant i
of round r goes to host (i + r) mod n_hosts), so every round loads the hosts
evenly and, over n_hosts rounds, every variant visits every host once: the
host then enters the analysis as a blocking factor instead of being
confounded with a kernel.
"""

from __future__ import annotations

import random
from typing import Any


def plan_boots(variants: list[str], rounds: int, seed: int, hosts: list[str]) -> list[dict[str, Any]]:
    """One entry per boot, in run order: variant, block (the round), host,
    order_index (position in the whole plan)."""
    if not variants:
        raise ValueError("plan_boots: no variants")
    if len(set(variants)) != len(variants):
        raise ValueError(f"plan_boots: duplicate variant names in {variants}")
    if not hosts:
        raise ValueError("plan_boots: no hypervisor hosts")
    if rounds < 1:
        raise ValueError(f"plan_boots: rounds must be >= 1, got {rounds}")
    plan: list[dict[str, Any]] = []
    for r in range(rounds):
        order = list(variants)
        # str seed: stable across Python versions (hashed with sha512)
        random.Random(f"{seed}-{r}").shuffle(order)
        for v in order:
            host = hosts[(variants.index(v) + r) % len(hosts)]
            plan.append({"variant": v, "block": r, "host": host, "order_index": len(plan)})
    return plan


def host_boots(plan: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    """The boots one host runs, in plan order."""
    return [b for b in plan if b["host"] == host]
