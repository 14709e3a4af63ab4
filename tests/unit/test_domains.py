"""kablab.lab.domains: the per-domain plan and boot numbering guest_domain uses."""
from __future__ import annotations

import json
import subprocess

import yaml

from kablabtest import REPO
from kablab.lab.domains import (config_disks_to_make, domain_plan, emulator_lost,
                                accel_choice, boot_failures, guest_errors, guests_record, handover_errors, known_hosts_text,
                                only_emulators_lost, plan_errors)

VARIANTS = yaml.safe_load((REPO / "inventory/group_vars/all/variants.yml").read_text())["kablab_variants"]
# Recorded from a real `make kernels` (ci profile).
KERNELS = json.loads((REPO / "tests/fixtures/manifest-ci.json").read_text())
COMMON = "console=ttyS0 root=/dev/vda rw rootfstype=ext4 panic=-1"


def plan(only=()):
    return domain_plan(VARIANTS, only, "kablab", "/var/lib/kablab", KERNELS, 10022, COMMON, "/r/c1/ssh")


def test_plan_names_paths_and_cmdlines():
    p = plan()
    assert [d["name"] for d in p] == ["kablab-" + v["name"] for v in VARIANTS]
    stock = p[0]
    assert stock["overlay"] == "/var/lib/kablab/domains/kablab-stock/overlay.qcow2"
    assert stock["config_disk"] == "/var/lib/kablab/domains/kablab-stock/config.img"
    key = KERNELS["stock"]["build"]["key"]
    assert stock["kernel"] == f"/var/lib/kablab/kernels/stock-{key}/bzImage"
    assert stock["cmdline"] == COMMON  # no trailing blank for an empty variant cmdline
    split = next(d for d in p if d["variant"] == "split4k")
    assert split["cmdline"] == COMMON + " nohugepages_mapping"


def test_ssh_reaches_the_guests_port_with_the_campaign_key_only():
    split = plan(["split4k"])[0]
    ssh = split["ssh"]
    assert ssh[0] == "ssh" and ssh[-3:] == ["-p", str(split["port"]), "root@127.0.0.1"]
    opts = dict(zip(ssh[1:-3:2], ssh[2:-3:2]))
    assert opts["-i"] == "/r/c1/ssh/id_ed25519"
    assert {o for k, o in zip(ssh[1:-3:2], ssh[2:-3:2]) if k == "-o"} >= {
        "UserKnownHostsFile=/r/c1/ssh/known_hosts-kablab", "StrictHostKeyChecking=yes", "IdentitiesOnly=yes",
        "BatchMode=yes"}


def test_ansible_reaches_the_guests_with_the_same_options():
    """join_inventory.yml's ansible_ssh_common_args: the hypervisor's own
    ssh options, so the two ways into a guest cannot drift apart."""
    from plugins.filter.kablab_filters import FilterModule
    common = FilterModule().filters()["kablab_ssh_options"]("/r/c1/ssh", "kablab")
    ssh = plan(["split4k"])[0]["ssh"]
    assert common.split() == [w for w in ssh if w.startswith("-o") or "=" in w][:len(common.split())]
    assert common == ("-o UserKnownHostsFile=/r/c1/ssh/known_hosts-kablab -o StrictHostKeyChecking=yes "
                      "-o IdentitiesOnly=yes -o BatchMode=yes")


def test_a_subset_keeps_each_variants_port():
    ports = {d["variant"]: d["port"] for d in plan()}
    assert len(set(ports.values())) == len(ports)
    sub = plan(["split4k"])
    assert [d["variant"] for d in sub] == ["split4k"]
    assert sub[0]["port"] == ports["split4k"]


def test_plan_errors_name_each_bad_input():
    assert plan_errors(VARIANTS, [], "kablab") == []
    errs = plan_errors(VARIANTS + [{"name": "Bad Name"}, {"name": "stock"}], ["nope"], "9x")
    text = " ".join(errs)
    assert "Bad Name" in text and "'stock'" in text and "nope" in text and "9x" in text
    assert plan_errors([], [], "kablab") == ["guest_domain_variants is empty"]


# scripts/kablab-accel-probe's answer on the lab's CI host (/var/lib/kablab/accel-probe.json, 2026-12-06)
PROBE = {"accel": "tcg", "reason": "/dev/kvm (builtin) present but QEMU under KVM failed after 0 s (exit 134: "
         "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69)",
         "ident": "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3) | 6.18.44-fc-v1272 | builtin",
         "qemu_version": "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", "fresh": True}


def test_accel_choice_follows_the_probe_unless_forced():
    auto = accel_choice(PROBE, "auto")
    assert auto == {"accel": "tcg", "domain_type": "qemu", "cpu": "max", "vpmu": False, "reason": PROBE["reason"],
                    "qemu_version": PROBE["qemu_version"]}
    kvm = accel_choice(PROBE, "kvm")
    assert (kvm["domain_type"], kvm["cpu"], kvm["vpmu"], kvm["reason"]) == (
        "kvm", "host-passthrough", True, "set by guest_domain_accel")
    assert accel_choice({**PROBE, "accel": "kvm"}, "tcg")["domain_type"] == "qemu"


# guest_image's kablab_guest_image.info.ssh_host_keys of a real image (/var/lib/kablab/images/*/image.json)
HOSTKEYS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIrezX+zPOVCxf25v6iwAzF2uVBd6vDfp34Hx6TDHNaS root@vm",
            "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBPAV9t2XAVZYD5/SQglpit1akNJaDFuucy"
            "PHVP6Dbbd/ysUuCZg9uxFPqfonAkaV9UBFFswVm5CT31d70b7Fo80= root@vm"]


def test_handover_errors_name_the_stage_to_run():
    image = "/var/lib/kablab/images/base.qcow2"
    built = plan(["stock", "grouped", "split4k"])       # the variants the recorded manifest has
    assert handover_errors(built, KERNELS, image, HOSTKEYS) == []
    no_split = {k: v for k, v in KERNELS.items() if k != "split4k"}
    (err,) = handover_errors(built, no_split, image, HOSTKEYS)
    assert "variant split4k" in err and "playbooks/kernels.yml" in err
    assert handover_errors(plan(["stock"]), no_split, image, HOSTKEYS) == []
    unbuilt = {**KERNELS, "stock": {**KERNELS["stock"], "release": ""}}
    assert "variant stock" in handover_errors(plan(["stock"]), unbuilt, image, HOSTKEYS)[0]
    assert ["run the guest_image role first"] * 2 == [
        e[-30:] for e in handover_errors(plan(["stock"]), KERNELS, "", [])]


def test_known_hosts_pin_the_image_keys_for_any_loopback_port(tmp_path):
    text = known_hosts_text(HOSTKEYS)
    assert text.splitlines() == ["[127.0.0.1]:* " + " ".join(k.split()[:2]) for k in HOSTKEYS]
    # OpenSSH's own lookup finds them for a guest's forwarded port
    (tmp_path / "kh").write_text(text)
    found = subprocess.run(["ssh-keygen", "-F", "[127.0.0.1]:10322", "-f", str(tmp_path / "kh")],
                           capture_output=True, text=True)
    assert found.returncode == 0 and HOSTKEYS[0].split()[1] in found.stdout


def test_guest_errors_from_the_login():
    stock, grouped = plan(["stock", "grouped"])
    k = KERNELS["stock"]
    up = {"item": stock, "rc": 0, "stderr": "",
          "stdout": f"{k['release']} {k['build']['uname_v_prefix']} SMP 2026-11-26 17:12:56 UTC"}
    assert guest_errors([up], KERNELS) == []
    wrong = {**up, "item": grouped}
    assert guest_errors([wrong], KERNELS) == [f"kablab-grouped runs {up['stdout']}, expected "
                                              f"{KERNELS['grouped']['release']} "
                                              f"{KERNELS['grouped']['build']['uname_v_prefix']}"]
    # the OpenSSH client's last line when no pinned key matches (the booted
    # test_guests case with a foreign host key checks the real one)
    foreign = {"item": stock, "rc": 255, "stdout": "", "stderr": "Host key verification failed.\r\n"}
    assert guest_errors([foreign], KERNELS) == [
        f"kablab-stock on 127.0.0.1:{stock['port']} presented a host key that is not a host key of the image"]
    refused = {"item": stock, "rc": 255, "stdout": "",
               "stderr": f"ssh: connect to host 127.0.0.1 port {stock['port']}: Connection refused"}
    assert "refused the login (ssh rc 255): ssh: connect" in guest_errors([refused], KERNELS)[0]


def test_config_disks_made_when_missing_or_changed():
    """publish.yml's registered results, recorded by running its tasks
    (tests/fixtures/config-disks/record.yml): a first run stages everything
    (stock has a disk, split4k none); a second changes nothing."""
    first = json.loads((REPO / "tests/fixtures/config-disks/first.json").read_text())
    todo = config_disks_to_make(first["plan"], first["disks"], first["du"], first["staged"])
    assert [d["name"] for d in todo] == ["kablab-stock", "kablab-split4k"]
    assert [d["size_mib"] for d in todo] == [1 + 16, 1 + 16]
    again = json.loads((REPO / "tests/fixtures/config-disks/again.json").read_text())
    assert [d["name"] for d in config_disks_to_make(again["plan"], again["disks"], again["du"],
                                                    again["staged"])] == ["kablab-split4k"]
    made = [{"path": e["config_disk"]} for e in again["plan"]]
    assert config_disks_to_make(again["plan"], made, again["du"], again["staged"]) == []


def test_guests_record_keeps_other_guests():
    p = plan(["grouped"])
    rec = guests_record(p, ["6.1.192-kablab-grouped #8df5 SMP x"], {"grouped": 2}, "/l/c1",
                        "localhost", 1796464264.0, 1796464271.256, known={"stock": {"domain": "kablab-stock"}})
    assert rec["stock"] == {"domain": "kablab-stock"}
    g = rec["grouped"]
    assert g["console_log"] == "/l/c1/grouped-boot2.log"
    assert g["console_log_campaign"] == "logs/grouped-boot2.log"
    assert (g["uname_r"], g["uname_v"]) == ("6.1.192-kablab-grouped", "#8df5 SMP x")
    assert (g["booted_at"], g["ready_at"]) == ("2026-12-05T09:51:04Z", "2026-12-05T09:51:11Z")


def test_boot_failures_say_why_and_where():
    stock, panic = plan(["stock", "grouped"])
    logs = {"stock": "/l/c1/stock-boot2.log", "grouped": "/l/c1/grouped-boot1.log"}
    # framewatch.py ready's stdout on a real panicboot console (/var/lib/kablab/logs/<campaign>/panicboot-boot1.log)
    waited = [{"item": panic, "rc": 3,
               "stdout": "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n"},
              {"item": stock, "rc": 4, "stdout": "shut off (crashed)\n"}, {"item": stock, "rc": 0, "stdout": ""}]
    assert boot_failures(waited, logs, "300") == [
        "kablab-grouped panicked at boot: Kernel panic - not syncing: VFS: Unable to mount root fs on "
        "unknown-block(0,0) (console /l/c1/grouped-boot1.log)",
        "kablab-stock stopped while it booted (libvirt: shut off (crashed)): its emulator ended, not the guest "
        "kernel (console /l/c1/stock-boot2.log)"]
    (late,) = boot_failures([{"item": stock, "rc": 124, "stdout": "x" * 2000 + "Starting sshd"}], logs, 300)
    assert late.startswith("kablab-stock printed no KABLAB-GUEST-READY within 300 s (console /l/c1/stock-boot2.log): ")
    assert late.endswith("Starting sshd") and len(late) < 1600


def test_a_boot_that_replaced_lost_ones_names_them():
    """wait.yml's rc 4 (libvirt's state on stdout) marks a boot whose QEMU
    ended; start.yml boots it once more, and the guest that runs the
    workloads records the boot it replaced. Other rcs are not emulator losses."""
    p = plan(["stock", "grouped"])
    waited = [{"item": p[0], "rc": 4, "stdout": "shut off (crashed)\n"}, {"item": p[1], "rc": 0, "stdout": ""}]
    lost = emulator_lost(waited, {"stock": 3, "grouped": 3}, {})
    assert lost == {"stock": [{"boot": 3, "libvirt_state": "shut off (crashed)",
                               "console_log_campaign": "logs/stock-boot3.log"}]}
    # a second loss in the same start adds to the first (join.yml then fails the boot)
    again = emulator_lost([{"item": p[0], "rc": 4, "stdout": "shut off (crashed)"}], {"stock": 4}, lost)
    assert [x["boot"] for x in again["stock"]] == [3, 4] and len(lost["stock"]) == 1
    assert emulator_lost([{"item": p[0], "rc": 124, "stdout": "tail"}], {"stock": 3}, {}) == {}
    # start.yml boots once more only when every domain not up lost its emulator
    assert only_emulators_lost(waited)
    assert not only_emulators_lost(waited + [{"item": p[1], "rc": 3, "stdout": "Kernel panic"}])
    assert not only_emulators_lost([{"item": p[1], "rc": 0, "stdout": ""}])
    rec = guests_record(p, ["6.1.192-kablab-stock #1 SMP x", "6.1.192-kablab-grouped #2 SMP x"],
                        {"stock": 4, "grouped": 3}, "/l/c1", "localhost", 1.0, 2.0, {}, lost)
    assert rec["stock"]["emulator_lost"] == lost["stock"] and rec["grouped"]["emulator_lost"] == []


def test_console_logs_filter_names_each_boots_log():
    """guest_domain_boot_logs: the log the domain XML, the boot wait and
    the failure messages all name, from kablab.lab.domains.console_log."""
    from plugins.filter.kablab_filters import FilterModule
    logs = FilterModule().filters()["kablab_console_logs"]({"stock": "3", "split4k": 1}, "/var/lib/kablab/logs/c1")
    assert logs == {"stock": "/var/lib/kablab/logs/c1/stock-boot3.log",
                    "split4k": "/var/lib/kablab/logs/c1/split4k-boot1.log"}


def test_leftover_domains_are_this_lanes_domains_of_the_campaign():
    from kablab.lab.domains import lane_prefix, leftover_domains
    assert lane_prefix("kablab", 0) == "kablab" and lane_prefix("kablab", "1") == "kablab-l1"
    defined = ["kablab-stock", "kablab-l1-split4k", "kablabx-stock", "kablab-jit2m", "other"]
    assert leftover_domains(defined, "kablab", 0, ["stock", "split4k"]) == ["kablab-stock"]
    assert leftover_domains(defined, "kablab", 1, ["stock", "split4k"]) == ["kablab-l1-split4k"]
    assert leftover_domains([], "kablab", 0, ["stock"]) == []
