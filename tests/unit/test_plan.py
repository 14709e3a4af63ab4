"""kablab.lab.plan: the boot plan every campaign runs."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kablab.lab.plan import campaign_workloads, lanes, plan_boots, tlb_model_decision

V = ["stock", "grouped", "split4k"]


def test_every_round_boots_every_variant_once():
    plan = plan_boots(V, 4, 1, ["hv"])
    assert [b["order_index"] for b in plan] == list(range(12))
    for r in range(4):
        assert sorted(b["variant"] for b in plan if b["block"] == r) == sorted(V)
    # rounds follow each other: no boot of round r+1 before the end of round r
    assert [b["block"] for b in plan] == sorted(b["block"] for b in plan)


def test_order_is_seeded_and_shuffled():
    assert plan_boots(V, 5, 7, ["hv"]) == plan_boots(V, 5, 7, ["hv"])
    orders = {tuple(b["variant"] for b in plan_boots(V, 8, s, ["hv"])) for s in range(10)}
    assert len(orders) > 1
    # within one campaign the rounds are not all in the same order
    plan = plan_boots(V, 8, 1, ["hv"])
    assert len({tuple(b["variant"] for b in plan if b["block"] == r) for r in range(8)}) > 1


@pytest.mark.parametrize("n_hosts", [2, 3])
def test_hosts_are_balanced_within_rounds_and_rotate(n_hosts):
    hosts = [f"hv{i}" for i in range(n_hosts)]
    plan = plan_boots(V, n_hosts * 2, 3, hosts)
    for r in range(n_hosts * 2):
        load = Counter(b["host"] for b in plan if b["block"] == r)
        assert max(load.values()) - min(load.get(h, 0) for h in hosts) <= 1
    # every variant visits every host equally often
    for v in V:
        visits = Counter(b["host"] for b in plan if b["variant"] == v)
        assert set(visits.values()) == {2} and set(visits) == set(hosts)


def test_old_modulo_dealing_is_gone():
    """order_index % n_hosts put all of one kernel's boots on one host
    whenever the shuffles lined up; the rotation never does."""
    for seed in range(20):
        plan = plan_boots(["a", "b"], 4, seed, ["h1", "h2"])
        for v in ("a", "b"):
            assert {b["host"] for b in plan if b["variant"] == v} == {"h1", "h2"}


@pytest.mark.parametrize("args, msg", [
    (([], 1, 1, ["h"]), "no variants"),
    ((["a", "a"], 1, 1, ["h"]), "duplicate"),
    ((["a"], 0, 1, ["h"]), "rounds"),
    ((["a"], 1, 1, []), "no hypervisor"),
])
def test_bad_plans_are_refused(args, msg):
    with pytest.raises(ValueError, match=msg):
        plan_boots(*args)


# --------------------------------------------------- TLB model and workloads

@pytest.mark.parametrize("setting,accels,on", [
    ("auto", ["tcg"], True), ("auto", ["tcg", "tcg"], True),
    ("auto", ["kvm"], False), ("auto", ["kvm", "tcg"], False),
    ("auto", [None], False), ("auto", [], False),
    (True, ["kvm"], True), ("true", ["kvm"], True), ("yes", [], True),
    (False, ["tcg"], False), ("false", ["tcg"], False), ("0", ["tcg"], False),
])
def test_tlb_model_decision(setting, accels, on):
    d = tlb_model_decision(setting, accels)
    assert d["on"] is on and d["why"].startswith("kablab_tlb_model=")


def test_tlb_model_decision_says_why():
    assert "every hypervisor runs TCG" in tlb_model_decision("auto", ["tcg"])["why"]
    assert "1 of 2 hypervisors" in tlb_model_decision("auto", ["kvm", "tcg"])["why"]
    with pytest.raises(ValueError, match="auto, true or false"):
        tlb_model_decision("maybe", ["tcg"])


def test_campaign_workloads_the_users_else_by_the_model():
    every, model = ["a", "b", "c"], ["b"]
    assert campaign_workloads([], every, model, False) == every
    assert campaign_workloads([], every, model, True) == model
    assert campaign_workloads(["c", "a"], every, model, True) == ["c", "a"]
    # -e kablab_workloads=c,a arrives as a string
    assert campaign_workloads("c, a", every, model, False) == ["c", "a"]


def test_model_workloads_are_workloads():
    import yaml
    wl = yaml.safe_load((Path(__file__).resolve().parents[2] / "inventory/group_vars/all/workloads.yml").read_text())
    assert wl["kablab_model_workloads"] and set(wl["kablab_model_workloads"]) <= set(wl["kablab_all_workloads"])
    assert wl["kablab_workloads"] == []


def test_lanes_one_per_cpu_with_the_model_else_one():
    hv = {"a": {"ansible_connection": "local", "guest_domain_prefix": "kablab-a", "other": 1}}
    two = lanes(["a"], {"a": "auto"}, True, {"a": 2}, hv)
    assert [(x["name"], x["lane"], x["hypervisor"]) for x in two] == [("a", 0, "a"), ("a-lane1", 1, "a")]
    assert two[1]["vars"] == {"ansible_connection": "local", "guest_domain_prefix": "kablab-a"}
    assert [x["name"] for x in lanes(["a", "b"], {"a": "auto", "b": "auto"}, False, {"a": 8, "b": 8}, {})] == ["a", "b"]
    assert len(lanes(["a"], {"a": "3"}, False, {"a": 1}, {})) == 3
    assert len(lanes(["a"], {"a": 1}, True, {"a": 4}, {})) == 1
