"""Every rule a user's input must follow, as data: one table, one checker.

Preflight (playbooks/preflight.yml) checks the campaign's inputs against
it once, before anything is built; the roles check the subset they own
when they run alone. Each rule names the variable, its type, and its
range, choices or pattern; the message says all of that and what was
given. `-e key=value` hands every value over as a string, so numbers and
booleans are coerced first ("1800" is 1800, "false" is False), and a list
may come as JSON or as comma-separated words.

Choices that depend on the lab (profiles, modes, workloads, variants,
doctor checks) come from the context the caller passes, under the key the
rule names.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

SEED_MAX = 2**64 - 1          # the harness's --seed is a uint64
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
CPUSET = r"[0-9]+([-,][0-9]+)*"
PLUGIN_ARGS = r"([a-z0-9_]+=[A-Za-z0-9:]+(,[a-z0-9_]+=[A-Za-z0-9:]+)*)?"
# A variant name: a directory, domain and file name part (kbuild, domains).
VARIANT_NAME = r"[a-z0-9][a-z0-9_-]*"
MEMORY_BACKINGS = ("default", "memfd", "memfd-thp", "hugetlbfs-2M", "hugetlbfs-1G", "hugepages")


@dataclass(frozen=True)
class Rule:
    """One input. kind: int, number, bool, str, list (of str), tlb (auto or
    a boolean). For int and number, low/high bound it; choices is a tuple or
    the context key that lists the allowed values (of the value, or of each
    item of a list); pattern must match the whole string (or each item),
    `what` says in words what it allows."""
    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | str | None = None
    pattern: str | None = None
    what: str = ""
    empty_ok: bool = True       # "" (str) or [] (list) is allowed


RULES: tuple[Rule, ...] = (
    # the campaign (inventory/group_vars/all)
    Rule("kablab_profile", "str", choices="profiles"),
    Rule("kablab_mode", "str", choices="modes"),
    Rule("kablab_runs", "int", 1, 1000),
    Rule("kablab_warmup", "int", 0, 100),
    Rule("kablab_blocks", "int", 1, 1000),
    Rule("kablab_seed", "int", 0, SEED_MAX),
    Rule("kablab_noise_from", "str", pattern=r"(/.*)?", what="empty or an absolute path to a campaign"),
    Rule("kablab_noise_effect_pct", "number", 0.1, 100),
    Rule("kablab_workloads", "list", choices="workloads"),
    Rule("kablab_select_variants", "list", choices="variants"),
    Rule("kablab_accept", "list", choices="doctor_checks"),
    Rule("kablab_tlb_model", "tlb"),
    Rule("kablab_tlb_model_args", "str", pattern=PLUGIN_ARGS,
         what="key=value,... plugin arguments (tlbmodel/README.md), without root= or out="),
    Rule("kablab_tlb_model_icount", "bool"),
    Rule("kablab_lanes", "str", pattern=r"auto|[1-9][0-9]?", what="auto or a number of boots at once, 1..99",
         empty_ok=False),
    Rule("kablab_keep_ssh_key", "bool"),
    Rule("run_block_slack_s", "int", 0, 86400),
    # the guests (roles/guest_domain)
    Rule("guest_domain_vcpus", "int", 1, 64),
    Rule("guest_domain_memory_mib", "int", 256, 262144),
    Rule("guest_domain_probe_timeout", "int", 5, 600),
    Rule("guest_domain_boot_timeout", "int", 10, 3600),
    Rule("guest_domain_ssh_port_base", "int", 1024, 65000),
    Rule("guest_domain_vcpu_pinning", "list", pattern=CPUSET, what="a cpuset such as 2 or 0-3,6"),
    Rule("guest_domain_memory_backing", "str", choices=MEMORY_BACKINGS, empty_ok=False),
    Rule("guest_domain_vcpu_placement", "str", choices=("manual", "cores"), empty_ok=False),
    Rule("guest_domain_accel", "str", choices=("auto", "kvm", "tcg"), empty_ok=False),
    Rule("guest_domain_disk_cache", "str", choices=("none", "writeback", "writethrough", "directsync", "unsafe"),
         empty_ok=False),
    Rule("guest_domain_machine", "str", choices=("pc",), empty_ok=False),
    Rule("guest_domain_publish_dir", "str", pattern=r"/(?!root(/|$)).*",
         what="an absolute path outside /root (libvirt-qemu cannot traverse /root)", empty_ok=False),
    Rule("guest_domain_campaign_id", "str", pattern=r"[A-Za-z0-9._-]+", what="letters, digits, '.', '_' or '-'",
         empty_ok=False),
    Rule("guest_domain_tlb_plugin", "str", pattern=r"(/.*)?", what="empty or the plugin's absolute path"),
    Rule("guest_domain_tlb_plugin_args", "str", pattern=PLUGIN_ARGS,
         what="key=value,... plugin arguments (tlbmodel/README.md), without root= or out="),
    Rule("guest_domain_tlb_icount", "bool"),
)
BY_NAME = {r.name: r for r in RULES}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None


def _list(value: Any) -> list[str] | None:
    """A list, or a string: JSON list or comma-separated words ('' is [])."""
    if isinstance(value, (list, tuple)):
        return [str(x) for x in value] if all(isinstance(x, (str, int)) for x in value) else None
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = json.loads(s)
            except ValueError:
                return None
            return _list(parsed) if isinstance(parsed, list) else None
        return [w.strip() for w in s.split(",") if w.strip()]
    return None


def coerce(rule: Rule, value: Any) -> tuple[Any, bool]:
    """(the value as its kind, whether it could be read as one)."""
    if rule.kind == "int":
        v = _int(value)
    elif rule.kind == "number":
        v = _number(value)
    elif rule.kind == "bool":
        v = _bool(value)
    elif rule.kind == "tlb":
        v = "auto" if str(value).strip().lower() == "auto" else _bool(value)
    elif rule.kind == "list":
        v = _list(value)
    else:
        v = value if isinstance(value, str) else None
    return v, v is not None


def _choices(rule: Rule, context: dict[str, Any]) -> list[str] | None:
    if rule.choices is None:
        return None
    if isinstance(rule.choices, str):
        return [str(c) for c in context.get(rule.choices, [])] if rule.choices in context else None
    return list(rule.choices)


def describe(rule: Rule, context: dict[str, Any]) -> str:
    """What the rule allows, in the words of the error message."""
    choices = _choices(rule, context)
    if rule.kind in ("int", "number"):
        word = "an integer" if rule.kind == "int" else "a number"
        if rule.high is None:
            return f"{word} >= {rule.low:g}"
        return f"{word} {rule.low:g}..{rule.high:g}" if rule.kind == "number" else \
            f"{word} {int(rule.low)}..{int(rule.high)}"
    if rule.kind == "bool":
        return "true or false"
    if rule.kind == "tlb":
        return "auto, true or false"
    if rule.kind == "list":
        item = f"one of {choices}" if choices is not None else rule.what or "a string"
        return f"a list (or comma-separated words), each {item}"
    if choices is not None:
        return f"one of {choices}"
    return rule.what or "a string"


def check_one(rule: Rule, value: Any, context: dict[str, Any]) -> str | None:
    """The message for a bad value, None for a good one."""
    v, ok = coerce(rule, value)
    bad = f"{rule.name} must be {describe(rule, context)} (got {value!r})"
    if not ok:
        return bad
    if rule.kind in ("int", "number"):
        if (rule.low is not None and v < rule.low) or (rule.high is not None and v > rule.high):
            return bad
        return None
    if rule.kind in ("bool", "tlb"):
        return None
    items = v if rule.kind == "list" else [v]
    if not items or items == [""]:
        return None if rule.empty_ok else bad
    choices = _choices(rule, context)
    for item in items:
        if choices is not None and item not in choices:
            return bad
        if rule.pattern is not None and not re.fullmatch(rule.pattern, item):
            return bad
    return None


# Rules between inputs: (names they read, the check, the message's rule).
Relation = tuple[tuple[str, ...], Callable[[dict[str, Any]], bool], str]
RELATIONS: tuple[Relation, ...] = tuple(
    ((name,), lambda v, name=name: not re.search(r"(^|,)(root|out)=", v[name]),
     f"{name} must not set root= or out= (the lab sets them per kernel)")
    for name in ("kablab_tlb_model_args", "guest_domain_tlb_plugin_args")) + (
    (("kablab_tlb_model", "kablab_tlb_model_args"),
     lambda v: v["kablab_tlb_model"] is not False or not v["kablab_tlb_model_args"],
     "kablab_tlb_model_args is for a campaign with the TLB model, and kablab_tlb_model is false"),
    (("guest_domain_vcpus", "guest_domain_vcpu_pinning"),
     lambda v: len(v["guest_domain_vcpu_pinning"]) in (0, v["guest_domain_vcpus"]),
     "guest_domain_vcpu_pinning must be empty or one cpuset per vCPU (guest_domain_vcpus)"),
    # -icount runs single-threaded TCG, under which an SMP bring-up stalls for minutes.
    (("guest_domain_tlb_plugin", "guest_domain_tlb_icount", "guest_domain_vcpus"),
     lambda v: not v["guest_domain_tlb_plugin"] or not v["guest_domain_tlb_icount"] or v["guest_domain_vcpus"] == 1,
     "guest_domain_vcpus must be 1 under the TLB model's -icount (kablab_tlb_model_icount=false for more)"),
    # The plugin reads the guest's page tables from the memfd.
    (("guest_domain_tlb_plugin", "guest_domain_memory_backing"),
     lambda v: not v["guest_domain_tlb_plugin"] or v["guest_domain_memory_backing"] == "memfd",
     "guest_domain_memory_backing must be memfd under the TLB model (its plugin reads guest RAM from it)"),
    (("guest_domain_ssh_port_base", "n_variants"),
     lambda v: v["guest_domain_ssh_port_base"] + v["n_variants"] <= 65535,
     "guest_domain_ssh_port_base plus the number of variants must stay within 65535"),
)


def check(values: dict[str, Any], context: dict[str, Any] | None = None) -> list[str]:
    """Every message for the values given (names the table does not know
    are the caller's mistake and raise KeyError), then the relations whose
    inputs are all given and good."""
    context = dict(context or {})
    errors, good = [], {}
    for name, value in values.items():
        rule = BY_NAME[name]
        msg = check_one(rule, value, context)
        if msg:
            errors.append(msg)
        else:
            good[name] = coerce(rule, value)[0]
    if "variants" in context:
        good["n_variants"] = len(context["variants"])
    for names, ok, msg in RELATIONS:
        if all(n in good for n in names) and not ok(good):
            errors.append(f"{msg} (got " + ", ".join(f"{n}={good[n]!r}" for n in names if n in values) + ")")
    return errors


def names(prefixes: Iterable[str] = ("",)) -> list[str]:
    """The table's variable names that start with one of `prefixes`."""
    return [r.name for r in RULES if any(r.name.startswith(p) for p in prefixes)]
