"""The Ansible filters (plugins/filter/kablab_filters.py) are thin calls into
the kablab package: each takes at most three positional arguments, more
inputs as one dict of named fields, so a reordered call cannot pass
silently."""
from __future__ import annotations

import importlib.util
import inspect

import pytest
from kablabtest import REPO



@pytest.fixture(scope="module")
def filters() -> dict:
    pytest.importorskip("ansible")
    spec = importlib.util.spec_from_file_location("kablab_filters", REPO / "plugins/filter/kablab_filters.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FilterModule().filters()


def test_no_filter_takes_more_than_three_positional_arguments(filters):
    for name, f in filters.items():
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
        assert len(params) <= 3, (name, [p.name for p in params])


def test_named_field_filters(filters):
    plan = filters["kablab_plan"]({"variants": ["stock", "split4k"], "rounds": "2", "seed": "1", "hosts": ["h"]})
    assert len(plan) == 4 and {b["block"] for b in plan} == {0, 1}
    assert filters["kablab_campaign_workloads"](
        {"chosen": "", "every": ["a", "b"], "model": ["b"], "model_on": "True"}) == ["b"]
    assert filters["kablab_lanes"]({"hosts": ["h"], "settings": {"h": "auto"}, "model_on": True,
                                    "cpus": {"h": "2"}, "host_vars": {}})[1]["name"] == "h-lane1"
    spec = filters["kablab_workload_spec"]({
        "settings": {"workload_syscall_mix_args": {"smoke": ["--iterations", "10"]},
                     "workload_syscall_mix_primary_metric": "ops_per_s", "workload_syscall_mix_timeout_s": 30},
        "name": "syscall-mix", "profile": "smoke", "seed": 4, "runs": 3, "warmup": 1})
    assert spec["error"] is None and spec["argv"] == ["--iterations", "10", "--seed", "4"]
    text = filters["kablab_guest_boot_plan"]({"specs": [{**spec, "name": "syscall-mix"}], "guest_dir": "/g",
                                              "events": ["task-clock"], "binaries": {"syscall-mix": "ab" * 32}})
    assert text.splitlines()[0] == "binary\tsyscall-mix\t" + "ab" * 32
    assert filters["kablab_input_check"]({"kablab_runs": "0"}) == ["kablab_runs must be an integer 1..1000 (got '0')"]
    # the fields roles/guest_domain/tasks/facts.yml passes
    entry = {"name": "kablab-stock", "variant": "stock", "port": 10022, "ssh": ["ssh"], "cmdline": "quiet"}
    guests = filters["kablab_guests_record"]({
        "plan": [entry], "unames": ["6.1.0-kablab-stock #1 SMP"], "boots": {"stock": 3}, "logdir": "/l",
        "hypervisor": "localhost", "booted": "10", "ready": "17.5", "known": {}, "lost": {}})
    assert guests["stock"]["uname_r"] == "6.1.0-kablab-stock" and guests["stock"]["boot"] == 3
