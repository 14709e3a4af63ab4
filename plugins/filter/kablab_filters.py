"""Ansible filters backed by the tested kablab package (logic lives there)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kablab.lab import bootrun, domains, inputs  # noqa: E402
from kablab.remote.doctor import provenance as doctor_provenance  # noqa: E402
from kablab.lab.kcache import build_times, du_freed, kernel_entries, merge_manifest, prune_decision  # noqa: E402
from kablab.lab.plan import LANE_VARS, campaign_workloads, lanes, plan_boots, tlb_model_decision  # noqa: E402
from kablab.lab.validate import input_errors, workload_spec  # noqa: E402


def boots_from_noise(noise_from: str, effect_pct: float, at_least: int) -> int:
    """Boots per kernel: the profile's, or more when an earlier campaign's
    measured noise (kablab.report.noise) says a change of effect_pct % needs them
    (sized on the upper 80 % confidence bound of that noise)."""
    if not noise_from:
        return int(at_least)
    from ansible.errors import AnsibleFilterError
    from kablab.report.noise import boots_needed
    if not (Path(noise_from) / "results").is_dir():
        raise AnsibleFilterError(f"kablab_noise_from: {noise_from} is not a campaign directory "
                                 "(it has no results/)")
    try:
        need = boots_needed(noise_from, float(effect_pct))
    except (OSError, KeyError, json.JSONDecodeError) as e:
        raise AnsibleFilterError(f"kablab_noise_from: cannot read the noise of {noise_from}: {e}") from e
    except ValueError as e:         # one metric needs more than kablab.report.noise.MAX_BOOTS
        raise AnsibleFilterError(f"kablab_noise_from {noise_from}: {e}") from e
    return max(int(at_least), need or 0)


def input_check(values: dict, context: dict | None = None) -> list[str]:
    """kablab.lab.inputs.check, with the doctor's check names as the
    kablab_accept choices."""
    from kablab.remote.doctor import CHECKS
    return inputs.check(dict(values), {"doctor_checks": list(CHECKS), **dict(context or {})})


class FilterModule:
    def filters(self):
        return {
            # {variants, rounds, seed, hosts} -> the boot plan
            "kablab_plan": lambda a: plan_boots(list(a["variants"]), int(a["rounds"]), int(a["seed"]), list(a["hosts"])),
            # variable names -> those a lane takes over from its hypervisor
            "kablab_lane_var_names": lambda names: [n for n in names if n in LANE_VARS],
            # {hosts, settings, model_on, cpus, host_vars} -> the lanes boots are dealt to
            "kablab_lanes": lambda a: lanes(list(a["hosts"]), dict(a["settings"]), str(a["model_on"]).lower() == "true",
                                            dict(a["cpus"]), dict(a["host_vars"])),
            # (kablab_tlb_model, each hypervisor's accel) -> {on, why}
            "kablab_tlb_model_decision": lambda setting, accels: tlb_model_decision(setting, list(accels)),
            # {chosen: kablab_workloads, every, model: the model's set, model_on} -> the campaign's
            "kablab_campaign_workloads": lambda a: campaign_workloads(
                a["chosen"], list(a["every"]), list(a["model"]), str(a["model_on"]).lower() in ("true", "1", "yes")),
            "kablab_boots_from_noise": boots_from_noise,
            # (variants, seed) -> messages naming each bad input; [] = all good
            "kablab_input_errors": input_errors,
            # ({variable: value}, {choices key: [...]}) -> messages for every bad
            # input (kablab/lab/inputs.py, the lab's one table of input rules)
            "kablab_input_check": input_check,
            # (prefix, ...) -> the table's variable names with those prefixes
            "kablab_input_names": lambda prefix, *more: inputs.names((prefix, *more)),
            # a list input as a list: -e gives a JSON list or comma-separated words
            "kablab_list": lambda value: inputs.coerce(inputs.Rule("list", "list"), value)[0] or [],
            # (variants, key outputs, build.json contents) -> {variant: kernel entry}
            "kablab_kernel_entries": lambda variants, keys, records: kernel_entries(
                list(variants), list(keys), list(records)),
            # (key outputs, build.json contents) -> a line per variant: build time, donor, cached
            "kablab_build_times": lambda keys, records: build_times(list(keys), list(records)),
            # (old manifest or None, this run's kernels) -> the manifest to write
            "kablab_merge_manifest": merge_manifest,
            # {cache_dir, paths: record paths, records, manifests, stale: candidates, keep}
            #   -> {builds, in_use, old, stale, paths, kept}
            "kablab_prune_decision": lambda a: prune_decision(
                a["cache_dir"], list(a["paths"]), list(a["records"]), list(a["manifests"]), list(a["stale"]),
                int(a["keep"])),
            # (du -sb lines, paths) -> bytes the removal of paths frees
            "kablab_du_freed": lambda lines, paths: du_freed(list(lines), list(paths)),
            # guest_domain: the per-domain plan, its input errors, boot numbers,
            # config disks to (re)make and the guests' record (kablab.lab.domains)
            "kablab_domain_errors": lambda variants, only, prefix: domains.plan_errors(
                list(variants), list(only), prefix),
            # (the accel probe's record, guest_domain_accel) -> the accelerator and what follows from it
            "kablab_accel": lambda probe, setting: domains.accel_choice(dict(probe), str(setting)),
            # {plan, kernels, image, hostkeys} -> why the domains cannot boot; [] = they can
            "kablab_handover_errors": lambda a: domains.handover_errors(
                list(a["plan"]), dict(a["kernels"]), str(a["image"]), list(a["hostkeys"])),
            # {variants, only, prefix, publish_dir, kernels, port_base, cmdline, ssh_dir}
            "kablab_domain_plan": lambda a: domains.domain_plan(
                list(a["variants"]), list(a["only"]), a["prefix"], a["publish_dir"], dict(a["kernels"]),
                int(a["port_base"]), a["cmdline"], str(a["ssh_dir"])),
            # {defined: domain names, prefix, lane, variants} -> this lane's domains among them
            "kablab_leftover_domains": lambda a: domains.leftover_domains(
                list(a["defined"]), str(a["prefix"]), a["lane"], list(a["variants"])),
            "kablab_console_logs": lambda boots, logdir: {v: domains.console_log(logdir, v, int(n))
                                                          for v, n in dict(boots).items()},
            # Ansible's ansible_ssh_common_args for the guests (join_inventory.yml)
            # and the known_hosts file ssh_key.yml writes
            "kablab_ssh_options": lambda ssh_dir, prefix: " ".join(domains.ssh_options(ssh_dir, prefix)),
            "kablab_known_hosts": lambda ssh_dir, prefix: domains.known_hosts(ssh_dir, prefix),
            # the image's host keys -> the known_hosts lines ssh_key.yml writes
            "kablab_known_hosts_text": lambda keys: domains.known_hosts_text(list(keys)),
            # (join.yml's uname results, kernels) -> why the guests are not the planned ones
            "kablab_guest_errors": lambda results, kernels: domains.guest_errors(list(results), dict(kernels)),
            # {plan, disks: find's files, du: du -sm's stdout, staged: [staging results]} -> the disks to (re)make
            "kablab_config_disks": lambda a: domains.config_disks_to_make(
                list(a["plan"]), list(a["disks"]), str(a["du"]), list(a["staged"])),
            # {plan, unames, boots, logdir, hypervisor, booted, ready, known, lost}
            "kablab_guests_record": lambda a: domains.guests_record(
                list(a["plan"]), list(a["unames"]), dict(a["boots"]), a["logdir"],
                a["hypervisor"], float(a["booted"]), float(a["ready"]), dict(a["known"]), dict(a["lost"])),
            # (the boot wait's results, boot numbers, earlier) -> {variant: [lost boot]}
            "kablab_emulator_lost": lambda results, boots, known: domains.emulator_lost(
                list(results), dict(boots), dict(known)),
            # (the boot wait's results, console logs, timeout) -> why each domain did not come up
            "kablab_boot_failures": lambda results, logs, timeout: domains.boot_failures(list(results), dict(logs), timeout),
            # the boot wait's results -> whether only emulators ended the boots that did not come up
            "kablab_only_emulators_lost": lambda results: domains.only_emulators_lost(list(results)),
            # a pass's blocks: kablab-guest-boot's plan ({specs, guest_dir, events,
            # binaries}) and framewatch.py's timeouts
            "kablab_guest_boot_plan": lambda a: bootrun.guest_plan(
                list(a["specs"]), str(a["guest_dir"]), list(a["events"]), dict(a["binaries"])),
            "kablab_block_timeouts": lambda specs, slack: bootrun.block_timeouts(list(specs), slack),
            # {settings, name, profile, seed, runs, warmup} -> a workload's campaign
            # settings: {name, var, argv, timeout_s, primary_metric, model_measure,
            # runs, warmup, prepare, error}; preflight dry-runs the argv the runner runs
            "kablab_workload_spec": lambda a: workload_spec(
                a["name"], a["profile"], a["seed"], dict(a["settings"]), a["runs"], a["warmup"]),
            # a make doctor document -> what each result's host provenance carries
            "kablab_doctor_provenance": doctor_provenance,
        }
