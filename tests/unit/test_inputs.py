"""kablab.lab.inputs: the lab's one table of input rules, as a user types the
inputs (-e key=value hands over strings)."""
from __future__ import annotations


import pytest
import yaml

from kablab.lab import inputs
from kablabtest import REPO

CTX = {"profiles": ["smoke", "full"], "modes": ["ab", "aa", "slowdown"], "variants": ["stock", "grouped", "split4k"],
       "workloads": ["pagecache-read", "syscall-mix"], "doctor_checks": ["accel", "vpmu"]}


@pytest.mark.parametrize("name,value", [
    ("kablab_seed", 0), ("kablab_seed", "7"), ("kablab_seed", 2**64 - 1),
    ("guest_domain_boot_timeout", "1800"), ("guest_domain_boot_timeout", 1800),
    ("kablab_runs", "5"), ("kablab_warmup", "0"), ("kablab_noise_effect_pct", "1.5"),
    ("kablab_tlb_model", "auto"), ("kablab_tlb_model", "true"), ("kablab_tlb_model", False),
    ("kablab_keep_ssh_key", "false"), ("kablab_workloads", "syscall-mix,pagecache-read"),
    ("kablab_workloads", '["syscall-mix"]'), ("kablab_workloads", []), ("kablab_select_variants", "split4k"),
    ("kablab_accept", "accel,vpmu"), ("kablab_accept", ""), ("kablab_tlb_model_args", "l1d_4k=64:4"),
    ("guest_domain_vcpu_pinning", ["0-1", "3"]), ("guest_domain_memory_backing", "hugetlbfs-2M"),
    ("guest_domain_publish_dir", "/var/lib/kablab"), ("kablab_noise_from", ""),
])
def test_good_values(name, value):
    assert inputs.check({name: value}, CTX) == []


@pytest.mark.parametrize("name,value,message", [
    ("kablab_seed", -1, "kablab_seed must be an integer 0..18446744073709551615 (got -1)"),
    ("kablab_seed", "abc", "kablab_seed must be an integer 0..18446744073709551615 (got 'abc')"),
    ("kablab_seed", True, "kablab_seed must be an integer 0..18446744073709551615 (got True)"),
    ("kablab_runs", 0, "kablab_runs must be an integer 1..1000 (got 0)"),
    ("kablab_blocks", "-1", "kablab_blocks must be an integer 1..1000 (got '-1')"),
    ("guest_domain_boot_timeout", "a while", "guest_domain_boot_timeout must be an integer 10..3600 (got 'a while')"),
    ("guest_domain_memory_mib", 12, "guest_domain_memory_mib must be an integer 256..262144 (got 12)"),
    ("kablab_profile", "nosuch", "kablab_profile must be one of ['smoke', 'full'] (got 'nosuch')"),
    ("kablab_tlb_model", "maybe", "kablab_tlb_model must be auto, true or false (got 'maybe')"),
    ("kablab_keep_ssh_key", "sure", "kablab_keep_ssh_key must be true or false (got 'sure')"),
    ("kablab_workloads", ["nosuch"], "kablab_workloads must be a list (or comma-separated words), each one of "
                                     "['pagecache-read', 'syscall-mix'] (got ['nosuch'])"),
    ("kablab_accept", "accel,nx", "kablab_accept must be a list (or comma-separated words), each one of "
                                  "['accel', 'vpmu'] (got 'accel,nx')"),
    ("guest_domain_vcpu_pinning", ["0-1", "x"], "guest_domain_vcpu_pinning must be a list (or comma-separated "
                                                "words), each a cpuset such as 2 or 0-3,6 (got ['0-1', 'x'])"),
    ("guest_domain_publish_dir", "/root/kablab", "guest_domain_publish_dir must be an absolute path outside /root"),
    ("guest_domain_memory_backing", "", "guest_domain_memory_backing must be one of ['default', 'memfd'"),
    ("guest_domain_campaign_id", "../x", "guest_domain_campaign_id must be letters, digits, '.', '_' or '-'"),
])
def test_bad_values_are_named_with_the_rule(name, value, message):
    (msg,) = inputs.check({name: value}, CTX)
    assert msg.startswith(message), msg


def test_relations_between_inputs():
    assert inputs.check({"kablab_tlb_model_args": "root=0x1000"}) == [
        "kablab_tlb_model_args must not set root= or out= (the lab sets them per kernel) "
        "(got kablab_tlb_model_args='root=0x1000')"]
    assert inputs.check({"kablab_tlb_model": "false", "kablab_tlb_model_args": "l1d_4k=64:4"})
    assert inputs.check({"kablab_tlb_model": "auto", "kablab_tlb_model_args": "l1d_4k=64:4"}) == []
    assert inputs.check({"guest_domain_vcpus": "2", "guest_domain_vcpu_pinning": ["0"]})
    assert inputs.check({"guest_domain_vcpus": "2", "guest_domain_vcpu_pinning": "0,1"}) == [], \
        "comma-separated words: one cpuset per vCPU"
    assert inputs.check({"guest_domain_ssh_port_base": 65000}, CTX) == []
    # the TLB model's guests as the campaign hands them over (inventory kablab_tlb_plugin, -e strings)
    model = {"guest_domain_tlb_plugin": "/srv/kablab/workloads/build/tlbmodel/libkablab-tlb.so",
             "guest_domain_tlb_icount": "true", "guest_domain_vcpus": "1", "guest_domain_memory_backing": "memfd",
             "guest_domain_tlb_plugin_args": "l1d_4k=64:4"}
    assert inputs.check(model) == []
    assert inputs.check({**model, "guest_domain_tlb_icount": "false", "guest_domain_vcpus": "2"}) == []
    assert [m.split(" (")[0] for m in inputs.check({**model, "guest_domain_vcpus": "2",
                                                      "guest_domain_memory_backing": "default",
                                                      "guest_domain_tlb_plugin_args": "out=x"})] == [
        "guest_domain_tlb_plugin_args must not set root= or out=",
        "guest_domain_vcpus must be 1 under the TLB model's -icount",
        "guest_domain_memory_backing must be memfd under the TLB model"]
    assert inputs.check({**model, "guest_domain_tlb_plugin": "", "guest_domain_vcpus": "2",
                         "guest_domain_memory_backing": "default"}) == []
    # a bad value is named once; the relations read only good ones
    assert len(inputs.check({"guest_domain_vcpus": "x", "guest_domain_vcpu_pinning": ["0"]})) == 1


def test_an_unknown_name_is_the_callers_mistake():
    with pytest.raises(KeyError):
        inputs.check({"kablab_nosuch": 1})


def test_every_kablab_rule_names_a_lab_variable():
    defined = {}
    for f in (REPO / "inventory/group_vars/all").glob("*.yml"):
        defined.update(yaml.safe_load(f.read_text()) or {})
    for name in inputs.names(("kablab_",)):
        assert name in defined, f"{name} has a rule but no default in inventory/group_vars/all"


def test_specs_choices_are_the_tables():
    """Every role option whose name the table knows has the table's choices
    in its argument spec (or none), so the two cannot drift."""
    seen = 0
    for spec_file in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            for name, opt in (entry.get("options") or {}).items():
                rule = inputs.BY_NAME.get(name)
                if rule is None or "choices" not in opt:
                    continue
                seen += 1
                assert isinstance(rule.choices, tuple) and list(opt["choices"]) == list(rule.choices), \
                    (spec_file, name, opt["choices"], rule.choices)
    assert seen >= 4


def test_specs_require_only_what_has_no_default():
    """A role option that defaults/main.yml defines is always present when
    the spec is checked, so `required: true` on it cannot fail; required
    marks only the inputs a caller must pass (run_entry, workloads_names)."""
    required = []
    for spec_file in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        role = spec_file.parent.parent
        dfile = role / "defaults" / "main.yml"
        defaults = (yaml.safe_load(dfile.read_text()) or {}) if dfile.exists() else {}
        for entry in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            for name, opt in (entry.get("options") or {}).items():
                if opt.get("required"):
                    required.append(name)
                    assert name not in defaults, f"{spec_file}: {name} is required and has a default"
    assert {"run_entry", "workloads_names"} <= set(required)
