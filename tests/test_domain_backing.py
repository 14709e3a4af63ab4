"""The domain XML of every guest memory backing (guest_domain_memory_backing)
validates against libvirt's schema (virt-xml-validate) and defines in
libvirt: a scratch domain with a unique name, defined and undefined, never
started. The KVM form (pmu on, host-passthrough) is schema-validated
everywhere and defined only where /dev/kvm exists."""
from __future__ import annotations

import os
import subprocess
import uuid
import xml.etree.ElementTree as ET

import jinja2
import pytest
import yaml

from kablab.remote import doctor
from kablabtest import REPO

URI = "qemu:///system"
ROLE = REPO / "roles/guest_domain"
ROLE_VARS = yaml.safe_load((ROLE / "vars/main.yml").read_text())


def render(backing: str, accel: str, name: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined)
    env.filters["to_uuid"] = lambda s: str(uuid.uuid5(uuid.NAMESPACE_URL, s))
    return env.get_template("domain.xml.j2").render(
        **ROLE_VARS, ansible_managed="managed",
        guest_domain_accel_result={"domain_type": "kvm" if accel == "kvm" else "qemu", "accel": accel},
        guest_domain_memory_mib=2048, guest_domain_memory_backing=backing, guest_domain_vcpus=2,
        guest_domain_vcpu_pinning=["0", "1"], guest_domain_numa_node="0", guest_domain_machine="pc", guest_domain_disk_cache="writeback",
        _dom={"name": name, "kernel": "/var/lib/kablab/kernels/none", "cmdline": "console=ttyS0",
              "log": "/var/lib/kablab/logs/" + name + ".log", "port": 0})


def test_backings_agree_with_the_role():
    spec = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())
    choices = spec["argument_specs"]["start"]["options"]["guest_domain_memory_backing"]["choices"]
    assert tuple(choices) == doctor.BACKINGS == tuple(ROLE_VARS["guest_domain_memory_backings"])
    assert ROLE_VARS["guest_domain_hugetlb_page_kib"] == doctor.HUGETLB_KIB


@pytest.mark.parametrize("accel", ["tcg", "kvm"])
@pytest.mark.parametrize("backing", doctor.BACKINGS)
def test_domain_xml_validates_and_defines(backing, accel, tmp_path):
    name = f"kablab-test-backing-{backing}-{accel}-{os.getpid()}"
    xml = render(backing, accel, name)
    mb = ET.fromstring(xml).find("memoryBacking")
    if backing == "default":
        assert mb is None
    elif backing.startswith("memfd"):
        assert mb.find("source").get("type") == "memfd" and mb.find("access").get("mode") == "shared"
    elif backing in doctor.HUGETLB_KIB:
        assert int(mb.find("hugepages/page").get("size")) == doctor.HUGETLB_KIB[backing]
    else:
        assert mb.find("hugepages") is not None
    # vCPU placement "cores": pinned, memory bound to the vCPUs' node
    assert ET.fromstring(xml).find("numatune/memory").get("nodeset") == "0"
    if accel == "kvm":
        assert ET.fromstring(xml).find("features/pmu").get("state") == "on"
    f = tmp_path / "domain.xml"
    f.write_text(xml)
    v = subprocess.run(["virt-xml-validate", str(f), "domain"], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr
    if accel == "kvm" and not os.path.exists("/dev/kvm"):
        # libvirt refuses to define type='kvm' without /dev/kvm ("does not
        # support virt type 'kvm'"): on a TCG host the KVM XML is schema-checked only.
        return
    d = subprocess.run(["virsh", "-c", URI, "define", str(f)], capture_output=True, text=True)
    try:
        assert d.returncode == 0, d.stderr
        dump = subprocess.run(["virsh", "-c", URI, "dumpxml", "--inactive", name],
                              capture_output=True, text=True, check=True).stdout
        # libvirt kept the backing as written
        assert (ET.fromstring(dump).find("memoryBacking") is None) == (backing == "default")
    finally:
        subprocess.run(["virsh", "-c", URI, "undefine", name], capture_output=True, text=True)
    left = subprocess.run(["virsh", "-c", URI, "list", "--all", "--name"], capture_output=True, text=True).stdout
    assert name not in left.split()
