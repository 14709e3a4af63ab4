"""Ansible filters backed by the tested kablab package (logic lives there)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kablab.plan import host_boots, plan_boots  # noqa: E402
from kablab.validate import input_errors, workload_spec  # noqa: E402


def boots_from_noise(noise_from: str, effect_pct: float, at_least: int) -> int:
    """Boots per kernel: the profile's, or more when an earlier campaign's
    measured noise (kablab.noise) says a change of effect_pct % needs them."""
    if not noise_from:
        return int(at_least)
    from ansible.errors import AnsibleFilterError
    from kablab.noise import boots_needed
    if not (Path(noise_from) / "results").is_dir():
        raise AnsibleFilterError(f"kablab_noise_from: {noise_from} is not a campaign directory "
                                 "(it has no results/)")
    try:
        need = boots_needed(noise_from, float(effect_pct))
    except (OSError, ValueError, KeyError) as e:
        raise AnsibleFilterError(f"kablab_noise_from: cannot read the noise of {noise_from}: {e}") from e
    return max(int(at_least), need or 0)


class FilterModule:
    def filters(self):
        return {
            "kablab_plan": lambda variants, rounds, seed, hosts: plan_boots(
                list(variants), int(rounds), int(seed), list(hosts)),
            "kablab_host_boots": host_boots,
            "kablab_boots_from_noise": boots_from_noise,
            # (variants, seed) -> messages naming each bad input; [] = all good
            "kablab_input_errors": input_errors,
            # (settings, name, profile, seed, runs, warmup) -> a workload's campaign
            # settings: {name, var, argv, timeout_s, primary_metric, runs, warmup,
            # prepare, error}; preflight dry-runs the argv the runner runs.
            "kablab_workload_spec": lambda settings, name, profile, seed, runs, warmup: workload_spec(
                name, profile, seed, dict(settings), runs, warmup),
        }
