"""Ansible filters backed by the tested kablab package (logic lives there)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kablab.doctor import provenance as doctor_provenance  # noqa: E402
from kablab.plan import host_boots, plan_boots  # noqa: E402
from kablab.validate import input_errors, workload_argv  # noqa: E402


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
            # a make doctor document -> what each result's host provenance carries
            "kablab_doctor_provenance": doctor_provenance,
            # (settings, name, profile, seed) -> {var, argv, error}: a workload's campaign arguments
            "kablab_workload_argv": lambda settings, name, profile, seed: workload_argv(
                name, profile, seed, dict(settings)),
        }
