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


TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


def tlb_model_decision(setting: Any, accels: list[str | None]) -> dict[str, Any]:
    """Whether a campaign runs the TLB model: {"on": bool, "why": str}.

    `setting` is kablab_tlb_model: true/false (booleans or the strings
    `-e key=value` gives) or "auto", which turns the model on exactly when
    every hypervisor runs its guests under TCG: there no PMU counts TLB
    misses, and the model is the lab's answer; under KVM the vPMU is.
    `accels` is each hypervisor's accelerator ("kvm"/"tcg", None unknown)."""
    word = str(setting).strip().lower() if not isinstance(setting, bool) else ("true" if setting else "false")
    if word in TRUE_WORDS:
        return {"on": True, "why": "kablab_tlb_model=true"}
    if word in FALSE_WORDS:
        return {"on": False, "why": "kablab_tlb_model=false"}
    if word != "auto":
        raise ValueError(f"kablab_tlb_model must be auto, true or false (got {setting!r})")
    known = [a for a in accels if a in ("kvm", "tcg")]
    if not accels or len(known) != len(accels):
        return {"on": False, "why": "kablab_tlb_model=auto: a hypervisor's accelerator is unknown, "
                                    "so no model (set kablab_tlb_model=true to force it)"}
    if all(a == "tcg" for a in known):
        return {"on": True, "why": "kablab_tlb_model=auto: every hypervisor runs TCG (no usable KVM, "
                                   "no PMU in the guests), so the TLB model answers the TLB question"}
    return {"on": False, "why": "kablab_tlb_model=auto: KVM "
                                + ("on every hypervisor" if all(a == "kvm" for a in known) else
                                   f"on {known.count('kvm')} of {len(known)} hypervisors")
                                + ": TLB misses come from the guests' vPMU"}


def campaign_workloads(chosen: Any, all_workloads: list[str], model_workloads: list[str],
                       model_on: bool) -> list[str]:
    """The workloads a campaign runs: kablab_workloads when the user names
    them (a list, or the comma-separated string `-e` gives), else every
    workload, or the TLB model's set when the model is on (under the
    model a boot costs several times more, so it runs the workloads the
    model answers for)."""
    if isinstance(chosen, str):
        chosen = [w.strip() for w in chosen.split(",") if w.strip()]
    if chosen:
        return list(chosen)
    return list(model_workloads if model_on else all_workloads)


# Inventory variables a lane takes over from its hypervisor: how to reach
# it, and where its domain names and ports start (guest_domain adds the lane's).
LANE_VARS = ("ansible_connection", "ansible_host", "ansible_port", "ansible_user", "ansible_python_interpreter",
             "guest_domain_prefix", "guest_domain_ssh_port_base")


def lanes(hosts: list[str], settings: dict[str, Any], model_on: bool, cpus: dict[str, Any],
          host_vars: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The lanes the run stage deals boots to: each hypervisor runs as many
    boots at once as it has lanes. Its kablab_lanes (settings) "auto" is one lane, or one
    per CPU with the TLB model, whose guests run single-threaded (-icount,
    one vCPU) so that boots side by side share nothing but the host; a
    number sets it. Lane 0 is the hypervisor itself; lane i > 0 is
    "<host>-lane<i>", reached as the host is (host_vars: what its inventory
    sets of LANE_VARS); guest_domain gives each lane its own domain prefix
    and SSH ports."""
    out = []
    for host in hosts:
        word = str(settings.get(host, "auto")).strip().lower()
        n = (max(1, int(cpus.get(host) or 1)) if model_on else 1) if word == "auto" else int(word)
        hv = {k: v for k, v in (host_vars.get(host) or {}).items() if k in LANE_VARS}
        out += [{"name": host if i == 0 else f"{host}-lane{i}", "hypervisor": host, "lane": i, "vars": hv}
                for i in range(n)]
    return out
