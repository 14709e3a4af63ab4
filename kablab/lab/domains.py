"""The guest domains of a campaign: names, ports, paths and boot numbers.

guest_domain's task files work from one plan per domain; computing it here
(not in Jinja) keeps it unit-testable without a hypervisor.
"""
from __future__ import annotations

import datetime
import posixpath
import re
from typing import Any, Iterable, Mapping

from kablab.lab.inputs import VARIANT_NAME

_NAME = re.compile(f"^{VARIANT_NAME}$")
_PREFIX = re.compile(r"^[a-z][a-z0-9-]*$")


def plan_errors(variants: Iterable[Mapping[str, Any]], only: Iterable[str], prefix: str) -> list[str]:
    """Why the variant list cannot be planned; [] when it can."""
    names = [str(v.get("name", "")) for v in variants]
    errors = []
    if not names:
        errors.append("guest_domain_variants is empty")
    bad = [n for n in names if not _NAME.match(n)]
    if bad:
        errors.append(f"variant names must match {_NAME.pattern} (not {bad})")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        errors.append(f"variant names must be unique ({dup} repeat)")
    unknown = sorted(set(only) - set(names))
    if unknown:
        errors.append(f"guest_domain_only names unknown variants {unknown} (known: {names})")
    if not _PREFIX.match(prefix or ""):
        errors.append(f"guest_domain_prefix must match {_PREFIX.pattern} (is {prefix!r})")
    return errors


def lane_prefix(prefix: str, lane: int | str) -> str:
    """A lane's domain prefix (guest_domain_lane_prefix): lane 0 keeps the
    prefix, lane N adds -lN, so its domains, ports and known_hosts are its own."""
    return f"{prefix}-l{int(lane)}" if int(lane) > 0 else prefix


def leftover_domains(defined: Iterable[str], prefix: str, lane: int | str, variants: Iterable[str]) -> list[str]:
    """Which of the defined domains are this lane's domains of these
    variants: what a killed run of the campaign can have left behind (a run
    stage with nothing to run tears down only when there are any)."""
    mine = {f"{lane_prefix(prefix, lane)}-{v}" for v in variants}
    return sorted(d for d in defined if d in mine)


def handover_errors(plan: Iterable[Mapping[str, Any]], kernels: Mapping[str, Mapping[str, Any]],
                    image: str, hostkeys: Iterable[str]) -> list[str]:
    """Why the planned domains cannot boot with what the earlier stages
    handed over (kernel_build's kablab_kernels, guest_image's image and its
    host keys); [] when they can."""
    errors = []
    for entry in plan:
        k = kernels.get(entry["variant"]) or {}
        if not str(k.get("bzimage") or "").startswith("/") or not k.get("release"):
            errors.append(f"guest_domain_kernels (kablab_kernels) needs an entry with bzimage and release for "
                          f"variant {entry['variant']}; it has {sorted(kernels)}. Run playbooks/kernels.yml in "
                          "the same invocation (playbooks/site.yml)")
    if not str(image or "").startswith("/"):
        errors.append(f"guest_domain_image must be an absolute path (is {image!r}): run the guest_image role first")
    if not list(hostkeys):
        errors.append("guest_domain_image_hostkeys is empty: run the guest_image role first")
    return errors


def accel_choice(probe: Mapping[str, Any], setting: str) -> dict[str, Any]:
    """What the domains run on: scripts/kablab-accel-probe's answer, unless
    guest_domain_accel (setting) forces kvm or tcg. The domain type, CPU
    model and vPMU follow from it; the results record all of it."""
    accel = probe["accel"] if setting == "auto" else setting
    kvm = accel == "kvm"
    return {"accel": accel, "domain_type": "kvm" if kvm else "qemu", "cpu": "host-passthrough" if kvm else "max",
            "vpmu": kvm, "reason": probe["reason"] if setting == "auto" else "set by guest_domain_accel",
            "qemu_version": probe["qemu_version"]}


def domain_plan(variants: Iterable[Mapping[str, Any]], only: Iterable[str], prefix: str,
                publish_dir: str, kernels: Mapping[str, Mapping[str, Any]], port_base: int,
                cmdline_common: str, ssh_dir: str = "") -> list[dict[str, Any]]:
    """One entry per domain to act on.

    The SSH port comes from the variant's position in the whole list, not in
    `only`, so a variant keeps its port whichever subset a task acts on.
    `ssh` is how the hypervisor runs a command in the guest (append one
    remote command string): OpenSSH with the campaign's key pair and the
    prefix's known_hosts in ssh_dir, to the guest's port forwarded on 127.0.0.1.
    """
    only = list(only)
    out = []
    for index, v in enumerate(variants):
        name = v["name"]
        if only and name not in only:
            continue
        domain = f"{prefix}-{name}"
        ddir = posixpath.join(publish_dir, "domains", domain)
        k = kernels.get(name, {})
        kernel_src_dir = k.get("dir") or posixpath.dirname(k.get("bzimage") or "none")
        kdir = posixpath.join(publish_dir, "kernels", posixpath.basename(kernel_src_dir))
        port = int(port_base) + index
        out.append({
            "variant": name, "index": index, "name": domain, "port": port, "ssh": ssh_argv(ssh_dir, prefix, port),
            "cmdline": f"{cmdline_common} {v.get('cmdline') or ''}".strip(),
            "dir": ddir, "overlay": f"{ddir}/overlay.qcow2", "config_disk": f"{ddir}/config.img",
            "config_dir": f"{ddir}/config", "kernel_dir": kdir, "kernel": f"{kdir}/bzImage",
        })
    return out


def known_hosts(ssh_dir: str, prefix: str) -> str:
    """The guests' host keys for the hypervisor entry with domain prefix
    PREFIX (known_hosts_text): one file per prefix, so two entries on one
    machine (inventory/two-hosts.yml) sharing ssh_dir never write one file."""
    return f"{ssh_dir}/known_hosts-{prefix}"


def known_hosts_text(hostkeys: Iterable[str]) -> str:
    """known_hosts lines pinning the image's public host keys ("type base64
    [comment]", as guest_image reads them) for every port on 127.0.0.1:
    every guest boots that image, so OpenSSH itself (StrictHostKeyChecking)
    refuses a guest that is not one of ours, with no scan per boot."""
    return "".join(f"[127.0.0.1]:* {' '.join(k.split()[:2])}\n" for k in hostkeys)


def guest_errors(uname_results: Iterable[Mapping[str, Any]], kernels: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why the guests that came up are not the ones planned, from join.yml's
    `uname -r -v` over ssh (a looped command's results): a login refused for
    the host key (not the image's), a login that failed, or a kernel that is
    not the variant's build (release and the build key in uname -v)."""
    errors = []
    for r in uname_results:
        e, rc, out, err = r["item"], int(r.get("rc", 1)), str(r.get("stdout", "")), str(r.get("stderr", ""))
        if rc != 0:
            why = ("presented a host key that is not a host key of the image"
                   if "Host key verification failed" in err else f"refused the login (ssh rc {rc}): {err.strip()[-500:]}")
            errors.append(f"{e['name']} on 127.0.0.1:{e['port']} {why}")
            continue
        k = kernels[e["variant"]]
        want = f"{k['release']} {k['build']['uname_v_prefix']}"
        if out.split()[:2] != want.split():
            errors.append(f"{e['name']} runs {out.strip()}, expected {want}")
    return errors


def ssh_options(ssh_dir: str, prefix: str) -> list[str]:
    """The -o options of every SSH connection to a guest: key authentication
    only, the host key checked against known_hosts (filled from the image's
    keys), no prompt ever (BatchMode)."""
    return ["-o", f"UserKnownHostsFile={known_hosts(ssh_dir, prefix)}", "-o", "StrictHostKeyChecking=yes",
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]


def ssh_argv(ssh_dir: str, prefix: str, port: int) -> list[str]:
    """OpenSSH to a guest as the hypervisor runs it: ssh_options, the
    campaign key, and no user or system ssh_config in the way."""
    return ["ssh", "-F", "/dev/null", "-i", f"{ssh_dir}/id_ed25519", *ssh_options(ssh_dir, prefix),
            "-o", "ConnectTimeout=30", "-p", str(port), "root@127.0.0.1"]


def console_log(logdir: str, variant: str, boot: int) -> str:
    return f"{logdir}/{variant}-boot{boot}.log"


def campaign_console_log(variant: str, boot: int) -> str:
    """The same log as collect_logs.yml keeps it, relative to the campaign directory."""
    return console_log("logs", variant, boot)


def config_disks_to_make(plan: list[Mapping[str, Any]], disks: Iterable[Mapping[str, Any]], du: str,
                         staged: Iterable[Mapping[str, Any]], slack_mib: int = 16) -> list[dict[str, Any]]:
    """The plan entries whose config disk is missing or whose staged contents
    changed, with the disk size: the tree plus slack for ext4's own metadata.
    From publish.yml's registered results: `disks` the config disks
    ansible.builtin.find found, `du` the stdout of `du -sm` over the config
    trees, `staged` each staging task's registered loop over the plan."""
    found = {str(f["path"]) for f in disks}
    size = {path: int(mib) for mib, path in (line.split("\t", 1) for line in du.splitlines() if line.strip())}
    changed = {r["item"]["name"] for step in staged for r in step.get("results", []) if r.get("changed")}
    return [{**e, "size_mib": size[e["config_dir"]] + slack_mib} for e in plan
            if e["config_disk"] not in found or e["name"] in changed]


def _utc(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def boot_failures(wait_results: Iterable[Mapping[str, Any]], logs: Mapping[str, str], timeout: Any) -> list[str]:
    """Why each domain the boot wait saw not come up did not (framewatch.py
    ready's rc and stdout), naming its console log: 3 panicked (the panic
    line), 4 its emulator ended (libvirt's state), else no readiness marker
    within the timeout (the console's tail)."""
    out = []
    for r in wait_results:
        rc, text, e = int(r.get("rc", 0)), str(r.get("stdout", "")).strip(), r["item"]
        console = f"(console {logs[e['variant']]})"
        if rc == 3:
            out.append(f"{e['name']} panicked at boot: {text} {console}")
        elif rc == 4:
            out.append(f"{e['name']} stopped while it booted (libvirt: {text}): its emulator ended, "
                       f"not the guest kernel {console}")
        elif rc != 0:
            out.append(f"{e['name']} printed no KABLAB-GUEST-READY within {timeout} s {console}: {text[-1500:]}")
    return out


def emulator_lost(wait_results: Iterable[Mapping[str, Any]], boots: Mapping[str, int],
                  known: Mapping[str, list[dict[str, Any]]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """variant -> the boots of this start whose emulator ended while the
    guest booted (the boot wait's rc 4; its stdout is libvirt's state and
    reason), added to KNOWN. start.yml boots those variants once more, so
    the boot that runs the workloads names the ones it replaced."""
    out = {v: list(lost) for v, lost in (known or {}).items()}
    for r in wait_results:
        if int(r.get("rc", 0)) != 4:
            continue
        v = r["item"]["variant"]
        out.setdefault(v, []).append({"boot": int(boots[v]), "libvirt_state": str(r.get("stdout", "")).strip(),
                                      "console_log_campaign": campaign_console_log(v, int(boots[v]))})
    return out


def only_emulators_lost(wait_results: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some domains did not come up and every one of them lost its
    emulator (the boot wait's rc 4), not its guest kernel."""
    not_up = [int(r.get("rc", 0)) for r in wait_results if int(r.get("rc", 0)) != 0]
    return bool(not_up) and all(rc == 4 for rc in not_up)


def guests_record(plan: list[Mapping[str, Any]], unames: Iterable[str], boots: Mapping[str, int],
                  logdir: str, hypervisor: str,
                  booted_at: float, ready_at: float, known: Mapping[str, Any] | None = None,
                  lost: Mapping[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """kablab_guests: what the results record about each running guest.
    booted_at / ready_at: when the domains were started and when their
    consoles said ready (epoch seconds), kept as UTC times: they show when
    each hypervisor's boots ran (several hosts work at the same time).
    lost: emulator_lost() of this start; each guest names the boots it
    replaced ([] when none)."""
    out = dict(known or {})
    lost = lost or {}
    for entry, uname in zip(plan, unames):
        v = entry["variant"]
        release, _, version = uname.partition(" ")
        out[v] = {
            "domain": entry["name"], "inventory_host": entry["name"], "hypervisor": hypervisor,
            "port": entry["port"], "ssh": entry["ssh"], "cmdline": entry["cmdline"], "boot": boots[v],
            "console_log": console_log(logdir, v, boots[v]),
            "console_log_campaign": campaign_console_log(v, boots[v]),
            # the workload runner's output channel (kablab-guest-boot)
            "frames": f"{logdir}/{v}-boot{boots[v]}.frames",
            "uname_r": release, "uname_v": version,
            "booted_at": _utc(float(booted_at)), "ready_at": _utc(float(ready_at)),
            "emulator_lost": list(lost.get(v, [])),
        }
    return out
