"""Guest domains on REAL libvirt and QEMU: host setup, boot, identity, isolation, teardown.

Nothing is mocked. The playbooks run exactly as a user runs them
(ansible-playbook from the repo root); a few small consumer playbooks are
written to a temporary directory to use the guests the way playbooks/run.yml
does. Test domains use the prefix "kabtest" and ports from 10322, so a
campaign running on the same host (prefix "kablab", ports from 10022, or
inventory/two-hosts.yml's 10122 and 10222) is not touched. Kernels: the ci
kernels from the kernel stage's manifest (built by conftest's `kernels`
fixture when there is none); a variant without a build yet reuses the first
built kernel.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from kablabtest import CACHE, PUBLISH, REPO, run_playbook

URI = "qemu:///system"
PREFIX = "kabtest"
PORT_BASE = 10322
VARIANTS = yaml.safe_load((REPO / "inventory/group_vars/all/variants.yml").read_text())["kablab_variants"]
NAMES = [v["name"] for v in VARIANTS]


def virsh(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["virsh", "-c", URI, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc.stdout


def kabtest_domains() -> list[str]:
    return [n for n in virsh("list", "--all", "--name").split() if n.startswith(PREFIX + "-")]


def listening() -> list[str]:
    return subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.fixture(scope="session")
def guest_kernels(request) -> dict:
    """kablab_kernels as kernel_build provides it (its manifest), completed for missing variants.

    Uses what the kernel stage already built; only when nothing is built yet
    does it ask conftest's `kernels` fixture to run playbooks/kernels.yml.
    """
    manifest = CACHE / "kernels" / "manifest-ci.json"
    built = json.loads(manifest.read_text()) if manifest.exists() else {}
    built = {k: v for k, v in built.items() if Path(v.get("bzimage", "/nonexistent")).exists()}
    if not built:
        built = request.getfixturevalue("kernels")
    first = next(iter(built.values()))
    return {name: built.get(name, first) for name in NAMES}


def common_vars(tmp: Path, campaign: str, kernels: dict) -> dict:
    return {
        "kablab_kernels": kernels,
        "kablab_campaign_id": campaign,
        "kablab_campaign_dir": str(tmp / campaign),
        "guest_domain_prefix": PREFIX,
        "guest_domain_ssh_port_base": PORT_BASE,
        "guest_domain_boot_timeout": 240,
    }


CONSUMER = """
- name: Use the guests like the run stage does
  hosts: kablab_guests
  gather_facts: false
  tasks:
    - name: Read the kernel release
      ansible.builtin.command: uname -r
      register: uname
      changed_when: false
    - name: Read the kernel command line
      ansible.builtin.slurp:
        src: /proc/cmdline
      register: cmdline
    - name: Run a command that changes guest state
      ansible.builtin.command: touch /root/dirty
      changed_when: true
    - name: Report
      ansible.builtin.copy:
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
        content: >-
          {{ {'variant': kablab_variant, 'uname_r': uname.stdout,
              'cmdline': cmdline.content | b64decode | trim} | to_json }}
      delegate_to: localhost

- name: Report the hypervisor's guest facts
  hosts: hypervisors
  gather_facts: false
  tasks:
    - name: Write kablab_guests and kablab_guest_config
      ansible.builtin.copy:
        dest: "{{ out_dir }}/hypervisor.json"
        mode: "0644"
        content: "{{ {'guests': kablab_guests, 'config': kablab_guest_config} | to_json }}"
"""

RESTART = """
- name: Restart one guest (clean state between blocks)
  hosts: hypervisors
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: Image
      ansible.builtin.include_role:
        name: guest_image
    - name: Restart
      ansible.builtin.include_role:
        name: guest_domain
        tasks_from: restart
      vars:
        guest_domain_only: [{first}]

- name: Look at the restarted guest
  hosts: kablab_guests
  gather_facts: false
  tasks:
    - name: Is the state from before the restart gone?
      ansible.builtin.stat:
        path: /root/dirty
      register: dirty
    - name: Report
      ansible.builtin.copy:
        dest: "{{{{ out_dir }}}}/restart.json"
        mode: "0644"
        content: "{{{{ {{'dirty': dirty.stat.exists}} | to_json }}}}"
      delegate_to: localhost
"""

FAILING = """
- name: A run that fails midway
  hosts: hypervisors
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: Start, fail, always tear down
      block:
        - name: Image
          ansible.builtin.include_role:
            name: guest_image
        - name: Start
          ansible.builtin.include_role:
            name: guest_domain
            tasks_from: start
          vars:
            guest_domain_only: [{first}]
        - name: Prove the guest was up
          ansible.builtin.command: touch /root/was-up
          delegate_to: {prefix}-{first}
          changed_when: true
        - name: Injected failure after start
          ansible.builtin.command: /bin/false
          delegate_to: {prefix}-{first}
          changed_when: false
      always:
        - name: Teardown
          ansible.builtin.include_role:
            name: guest_domain
            tasks_from: teardown
"""


def assert_nothing_left(campaign: str) -> None:
    assert kabtest_domains() == []
    left = list((PUBLISH / "domains").glob(PREFIX + "-*"))
    assert left == [], left
    ports = {str(PORT_BASE + i) for i in range(len(NAMES))}
    assert [line for line in listening() if line.split()[3].rsplit(":", 1)[-1] in ports] == []
    assert not any(p.name.startswith(PREFIX) for p in (PUBLISH / "domains").iterdir())


def test_host_setup_from_nothing() -> None:
    """(1) libvirtd killed; the host-setup playbook brings it back and a domain can be defined."""
    for pid in subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True, text=True).stdout.split():
        os.kill(int(pid), signal.SIGTERM)
    for _ in range(100):
        if subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True).returncode != 0:
            break
        time.sleep(0.1)
    else:
        pytest.fail("libvirtd did not exit")
    run = run_playbook("host-setup.yml")
    assert run.rc == 0, run.output[-3000:]
    assert "started libvirtd" in run.output
    assert subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True).returncode == 0
    name = PREFIX + "-define-check"
    xml = (f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>"
           "<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>")
    xml_file = Path("/tmp") / f"{name}-{os.getpid()}.xml"
    xml_file.write_text(xml)
    try:
        t0 = time.monotonic()
        virsh("define", str(xml_file))
        assert name in virsh("list", "--all", "--name").split()
        # the QEMU capability cache must stay valid (see host_setup kvm_device.yml)
        assert time.monotonic() - t0 < 20
    finally:
        virsh("undefine", name, check=False)
        xml_file.unlink()
    again = run_playbook("host-setup.yml")
    assert again.rc == 0 and again.recap()["localhost"]["changed"] == 0, again.output[-3000:]


@pytest.fixture(scope="session")
def guests(tmp_path_factory, guest_kernels):
    """All variants up once (3 TCG boots in parallel), used by the tests below."""
    tmp = tmp_path_factory.mktemp("guests")
    campaign = f"test-guests-{os.getpid()}"
    evars = common_vars(tmp, campaign, guest_kernels)
    run_playbook("teardown.yml", extra_vars=evars)
    out = tmp / "out"
    out.mkdir()
    consumer = tmp / "consumer.yml"
    consumer.write_text(CONSUMER)
    t0 = time.monotonic()
    run = run_playbook("guests.yml", str(consumer), extra_vars={**evars, "out_dir": str(out)})
    elapsed = time.monotonic() - t0
    try:
        assert run.rc == 0, run.output[-5000:]
        hyp = json.loads((out / "hypervisor.json").read_text())
        yield {"tmp": tmp, "campaign": campaign, "vars": evars, "out": out, "hyp": hyp,
               "elapsed": elapsed, "output": run.output}
    finally:
        down = run_playbook("teardown.yml", extra_vars=evars)
        assert down.rc == 0, down.output[-3000:]


def test_every_variant_boots_and_runs_commands(guests) -> None:
    """(2) each domain boots; uname -r through the Ansible guest host is the variant's release."""
    kernels = guests["vars"]["kablab_kernels"]
    for v in VARIANTS:
        got = json.loads((guests["out"] / f"{PREFIX}-{v['name']}.json").read_text())
        assert got["variant"] == v["name"]
        assert got["uname_r"] == kernels[v["name"]]["release"]
        assert got["cmdline"].endswith(v["cmdline"])
        assert guests["hyp"]["guests"][v["name"]]["uname_r"] == got["uname_r"]
        log = PUBLISH / "logs" / guests["campaign"] / Path(guests["hyp"]["guests"][v["name"]]["console_log"]).name
        assert "KABLAB-GUEST-READY" in log.read_text(errors="replace")
    cfg = guests["hyp"]["config"]
    assert cfg["accel"] in ("kvm", "tcg") and cfg["accel_reason"]
    print(f"\nguests up in {guests['elapsed']:.0f} s, accel={cfg['accel']} ({cfg['accel_reason']})")


def normalise(xml: str, variant: dict) -> str:
    name = variant["name"]
    xml = xml.replace(f"{PREFIX}-{name}", "DOMAIN")
    xml = re.sub(r"<uuid>[^<]+</uuid>", "<uuid>UUID</uuid>", xml)
    xml = re.sub(r"<kernel>[^<]+</kernel>", "<kernel>KERNEL</kernel>", xml)
    xml = re.sub(rf"/{re.escape(name)}-boot\d+\.log", "/VARIANT-bootN.log", xml)
    xml = re.sub(rf"/{re.escape(name)}-boot\d+\.frames", "/VARIANT-bootN.frames", xml)
    xml = re.sub(r"hostfwd=tcp:127\.0\.0\.1:\d+-:22", "hostfwd=tcp:127.0.0.1:PORT-:22", xml)
    if variant["cmdline"]:
        xml, n = re.subn(rf" {re.escape(variant['cmdline'])}</cmdline>", "</cmdline>", xml)
        assert n == 1, f"{name}: its cmdline parameter is not at the end of <cmdline>"
    return xml


def test_domains_identical_but_for_variant_parts(guests) -> None:
    """(2) the domain XMLs differ only in name/uuid, kernel, variant cmdline, port and per-domain paths
    (console log, frames channel)."""
    xmls = {v["name"]: virsh("dumpxml", "--inactive", f"{PREFIX}-{v['name']}") for v in VARIANTS}
    for v in VARIANTS:
        assert f"hostfwd=tcp:127.0.0.1:{guests['hyp']['guests'][v['name']]['port']}-:22" in xmls[v["name"]]
    norm = {v["name"]: normalise(xmls[v["name"]], v) for v in VARIANTS}
    base = NAMES[0]
    for name in NAMES[1:]:
        assert norm[name] == norm[base], f"{name} differs from {base} beyond the variant's own parts"


def test_ports_loopback_only_and_outbound_restricted(guests) -> None:
    """(3) forwarded ports listen on 127.0.0.1 only; the guest cannot reach the host via 10.0.2.2."""
    lines = listening()
    for v in NAMES:
        port = guests["hyp"]["guests"][v]["port"]
        local = [line.split()[3] for line in lines if line.split()[3].rsplit(":", 1)[-1] == str(port)]
        assert local == [f"127.0.0.1:{port}"], local
    qemu = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    for line in (line for line in qemu if "qemu-system" in line):
        assert line.split()[3].startswith("127.0.0.1:"), line

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(6)
    port = listener.getsockname()[1]
    ssh_dir = Path(guests["vars"]["kablab_campaign_dir"]) / "ssh"
    guest_port = guests["hyp"]["guests"][NAMES[0]]["port"]
    code = ("import socket\ntry:\n socket.create_connection(('10.0.2.2', %d), timeout=4)\n print('CONNECTED')\n"
            "except OSError as e:\n print('BLOCKED', e)\n" % port)
    proc = subprocess.run(["ssh", "-p", str(guest_port), "-i", str(ssh_dir / "id_ed25519"),
                           "-o", f"UserKnownHostsFile={ssh_dir / ('known_hosts-' + PREFIX)}", "-o", "StrictHostKeyChecking=yes",
                           "-o", "BatchMode=yes", "root@127.0.0.1", "python3", "-"],
                          input=code, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "BLOCKED" in proc.stdout, proc.stdout
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


def test_restart_gives_clean_state(guests) -> None:
    """restart: destroy, fresh overlay, boot N+1; what the consumer wrote before is gone."""
    play = guests["tmp"] / "restart.yml"
    play.write_text(RESTART.format(first=NAMES[0]))
    cmd_vars = {**guests["vars"], "out_dir": str(guests["out"])}
    run = run_playbook(play, extra_vars=cmd_vars, timeout=600)
    assert run.rc == 0, run.output[-4000:]
    assert json.loads((guests["out"] / "restart.json").read_text()) == {"dirty": False}
    logs = sorted((PUBLISH / "logs" / guests["campaign"]).glob(f"{NAMES[0]}-boot*.log"))
    assert [p.name for p in logs] == [f"{NAMES[0]}-boot1.log", f"{NAMES[0]}-boot2.log"]


def test_teardown_leaves_nothing(guests) -> None:
    """(4) teardown: no domain, overlay, config disk or forwarded port remains; logs kept in the campaign."""
    run = run_playbook("teardown.yml", extra_vars=guests["vars"])
    assert run.rc == 0, run.output[-3000:]
    assert_nothing_left(guests["campaign"])
    kept = {p.name for p in (Path(guests["vars"]["kablab_campaign_dir"]) / "logs").iterdir()}
    assert {f"{v}-boot1.log" for v in NAMES} <= kept
    again = run_playbook("teardown.yml", extra_vars=guests["vars"])
    assert again.rc == 0 and again.recap()["localhost"]["changed"] == 0, again.output[-3000:]


def test_teardown_after_failure_in_consumer(tmp_path, guest_kernels) -> None:
    """(4) a failing task after start: the consumer's always-teardown leaves nothing behind."""
    campaign = f"test-fail-{os.getpid()}"
    evars = common_vars(tmp_path, campaign, guest_kernels)
    play = tmp_path / "failing.yml"
    play.write_text(FAILING.format(first=NAMES[0], prefix=PREFIX))
    run = run_playbook(play, extra_vars=evars, timeout=600)
    out = run.output
    assert run.rc != 0
    assert "Injected failure after start" in out and "Prove the guest was up" in out
    assert re.search(rf"changed: \[localhost -> {PREFIX}-{NAMES[0]}[\](]", out), out[-3000:]
    assert_nothing_left(campaign)


def test_teardown_after_failure_during_start(tmp_path, guest_kernels) -> None:
    """(4) guests.yml failing midway (wrong expected host key after boot) tears down in its rescue."""
    campaign = f"test-failstart-{os.getpid()}"
    evars = {**common_vars(tmp_path, campaign, guest_kernels), "guest_domain_only": [NAMES[0]],
             "guest_domain_image_hostkeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN0tTh3Rea1K3y0000000000000000000000000000"]}
    run = run_playbook("guests.yml", extra_vars=evars)
    assert run.rc != 0
    assert "not a host key of the image" in run.output
    assert "the domains were torn down" in run.output
    assert_nothing_left(campaign)
