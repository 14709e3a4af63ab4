"""Input checks run once in preflight, before any work starts.

Each check returns a list of messages; an empty list means the input is
good. A message names the variable, the bad value and what is allowed.
Ansible reaches these through plugins/filter/kablab_filters.py; the
workload argument check is also a CLI:

    python3 -m kablab.lab.validate workload-args --bin workloads/build \\
        '[{"name": "syscall-mix", "var": "workload_syscall_mix_args[smoke]", "argv": [...]}]'
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from kablab.results.tlbmodel import DEFAULT_MEASURE, MEASURE_NAMES


KCONFIG_RE = re.compile(
    r'^(?:CONFIG_[A-Za-z0-9_]+=(?:y|m|n|-?[0-9]+|0x[0-9A-Fa-f]+|"(?:[^"\\\n]|\\.)*")'
    r'|# CONFIG_[A-Za-z0-9_]+ is not set)$')
KCONFIG_ALLOWED = 'CONFIG_<SYMBOL>=<y|m|n|number|"string"> or "# CONFIG_<SYMBOL> is not set"'

# A kernel parameter: printable ASCII without space and without <>&"'
# (they would need quoting in the kernel's parser or escaping in XML).
CMDLINE_PARAM_RE = re.compile(r"^[!#-%(-;=?-~]+$")
CMDLINE_ALLOWED = "kernel parameters separated by spaces, printable ASCII without <>&\"'"


def check_kconfig_line(line) -> bool:
    return isinstance(line, str) and bool(KCONFIG_RE.match(line))


def check_cmdline(cmdline) -> bool:
    if not isinstance(cmdline, str):
        return False
    return all(CMDLINE_PARAM_RE.match(p) for p in cmdline.split(" ") if p != "")


def check_variants(variants, var: str = "kablab_variants") -> list[str]:
    """Kconfig lines and cmdlines of every variant (names, series and
    build_from are checked by the kernel_build role)."""
    errors: list[str] = []
    if not isinstance(variants, list):
        return [f"{var} must be a list of variants (got {variants!r})"]
    for i, v in enumerate(variants):
        if not isinstance(v, dict):
            errors.append(f"{var}[{i}] must be a dict with name, series, kconfig, cmdline (got {v!r})")
            continue
        name = v.get("name", f"#{i}")
        kconfig = v.get("kconfig", [])
        if not isinstance(kconfig, list):
            errors.append(f"{var}: variant {name!r} kconfig must be a list of lines (got {kconfig!r})")
        else:
            for line in kconfig:
                if not check_kconfig_line(line):
                    errors.append(f"{var}: variant {name!r} kconfig line {line!r} is not a Kconfig line; "
                                  f"allowed: {KCONFIG_ALLOWED}")
        cmdline = v.get("cmdline", "")
        if not check_cmdline(cmdline):
            errors.append(f"{var}: variant {name!r} cmdline {cmdline!r} is not a list of kernel parameters; "
                          f"allowed: {CMDLINE_ALLOWED}")
    return errors


def input_errors(variants) -> list[str]:
    """Every message for the variants' Kconfig lines and cmdlines,
    duplicates once (the other inputs: kablab/lab/inputs.py)."""
    out: list[str] = []
    for e in check_variants(variants):
        if e not in out:
            out.append(e)
    return out


def _int_setting(settings: dict, key: str, default, low: int) -> tuple[int | None, str | None]:
    value = settings.get(key, default)
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        return None, f"{key} must be an integer >= {low} (got {value!r})"
    return value, None


def workload_spec(name: str, profile: str, seed, settings: dict, runs=3, warmup=1) -> dict:
    """One workload's campaign settings, as the run stage uses them and
    preflight checks them: the role's defaults (roles/workload_<name>/
    defaults/main.yml) overlaid with the user's workload_<name>_* variables.

    Returns {"name", "var", "argv", "timeout_s", "primary_metric",
    "model_measure", "runs", "warmup", "prepare", "error"}. argv (without --json) is the profile's
    arguments, then workload_<name>_args_always with each "{setting}"
    replaced by workload_<name>_<setting>, then --seed: exactly what the
    guest runs. runs and warmup default to the campaign's. error is None or
    the first message naming the bad variable."""
    prefix = "workload_" + name.replace("-", "_") + "_"
    var = prefix + "args"
    spec = {"name": name, "var": var, "argv": [], "timeout_s": None, "primary_metric": None,
            "model_measure": None, "runs": None, "warmup": None, "prepare": "", "error": None}

    def bad(msg: str) -> dict:
        spec["error"] = msg
        return spec

    table = settings.get(var)
    if not isinstance(table, dict) or profile not in table:
        return bad(f"{var} must map each profile to a list of arguments; "
                   f"it has no entry for profile {profile!r} (got {table!r})")
    spec["var"] = f"{var}[{profile}]"
    args = table[profile]
    if not isinstance(args, list) or not all(isinstance(a, (str, int)) and not isinstance(a, bool) for a in args):
        return bad(f"{var}[{profile}] must be a list of strings (got {args!r})")
    always = settings.get(prefix + "args_always", [])
    if not isinstance(always, list):
        return bad(f"{prefix}args_always must be a list of strings (got {always!r})")
    fields = {k[len(prefix):]: v for k, v in settings.items() if k.startswith(prefix)}
    try:
        extra = [str(a).format(**fields) for a in always]
    except (KeyError, IndexError, ValueError) as e:
        return bad(f"{prefix}args_always: {always!r} names a setting that is not defined ({e})")
    for key, default, low in (("timeout_s", None, 1), ("runs", runs, 1), ("warmup", warmup, 0)):
        value, err = _int_setting(settings, prefix + key, default, low)
        if err:
            return bad(err)
        spec[key] = value
    metric = settings.get(prefix + "primary_metric")
    if not isinstance(metric, str) or not metric:
        return bad(f"{prefix}primary_metric must name the metric of the headline verdict (got {metric!r})")
    # one measure, or a list: the first carries the workload's row of the
    # modelled verdict matrix, the others follow it
    measure = settings.get(prefix + "model_measure", DEFAULT_MEASURE)
    measures = measure if isinstance(measure, list) else [measure]
    if not measures or not all(isinstance(m, str) and m in MEASURE_NAMES for m in measures):
        return bad(f"{prefix}model_measure must be one of {list(MEASURE_NAMES)} or a list of them "
                   f"(got {measure!r})")
    prepare = settings.get(prefix + "prepare", "") or ""
    if not isinstance(prepare, str) or not re.fullmatch(r"[A-Za-z0-9_]*", prepare):
        return bad(f"{prefix}prepare must name a tasks file of roles/{prefix[:-1]}/tasks/ (got {prepare!r})")
    spec.update(primary_metric=metric, model_measure=measure, prepare=prepare,
                argv=[str(a) for a in args] + extra + ["--seed", str(seed)])
    return spec


def workload_argv(name: str, profile: str, seed, settings: dict) -> dict:
    """{"var", "argv", "error"} of workload_spec: what preflight dry-runs."""
    spec = workload_spec(name, profile, seed, settings)
    return {"var": spec["var"], "argv": spec["argv"], "error": spec["error"]}


def workload_dry_run(binary: str | Path, args: list[str], var: str) -> str | None:
    """Run a workload binary with its campaign arguments and --dry-run: the
    harness parses and bounds every option and touches nothing. Returns
    None, or the binary's own message prefixed with the variable.

    --module PATH names a file in the guest (module-bpf-churn's test
    module, built per kernel at run time); it is replaced here by a
    placeholder with the same name, since dry-run opens the file."""
    args = [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="kablab-dryrun-") as tmp:
        for i, a in enumerate(args[:-1]):
            if a == "--module" and not os.path.exists(args[i + 1]):
                placeholder = Path(tmp) / (Path(args[i + 1]).name or "module.ko")
                placeholder.write_bytes(b"\0")
                args[i + 1] = str(placeholder)
        try:
            proc = subprocess.run([str(binary), *args, "--dry-run"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{var}: cannot run {binary}: {e}"
    if proc.returncode == 0:
        return None
    lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
    first = lines[0] if lines else f"exit code {proc.returncode}"
    return f"{var}: {Path(str(binary)).name} rejects its arguments {args}: {first}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m kablab.lab.validate")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload-args", help="dry-run workload binaries with their campaign arguments")
    w.add_argument("--bin", required=True, help="directory of the built workload binaries")
    w.add_argument("plan", help='JSON list of {"name", "var", "argv"} (kablab_workload_spec), '
                                'or {"error": message} entries')
    ns = p.parse_args(argv)
    errors = []
    for entry in json.loads(ns.plan):
        err = entry.get("error") or workload_dry_run(Path(ns.bin) / entry["name"], entry["argv"], entry["var"])
        if err:
            errors.append(err)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
