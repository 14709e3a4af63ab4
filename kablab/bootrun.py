"""One boot's workload blocks on the controller: what to run, and its results.

A boot runs all of its workloads with one guest command
(roles/workload_runner/files/kablab-guest-boot), whose output reaches the
hypervisor through the domain's frames channel as it is written. Two steps
here, each one controller command of the run stage:

    python3 -m kablab.bootrun todo CAMPAIGN_DIR VARIANT BLOCK NAME...
        The workloads of this boot without a good result, in order (JSON
        list). An earlier failed or unreadable attempt of one of them moves
        to attempts/<time>/<variant>/ first: raw results are never
        overwritten.

    python3 -m kablab.bootrun collect CAMPAIGN_DIR --boot JSON --specs JSON
            [--watch JSON] [--boot-failure JSON]  < FRAMES
        Splits the frames into blocks and writes, for every workload of
        --specs that began, its raw directory and result (kablab.collect);
        one that was in flight when the guest was lost fails with the
        watcher's reason (kablab/framewatch.py), and with --boot-failure
        (the guest never came up) every workload fails at stage "boot".
        Prints {"ok", "failed", "remaining"}: remaining ones never began
        and run in a fresh boot of the same kernel.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import collect as collector
from .load import check_files
from .util import atomic_write_json

BEGIN_END = re.compile(r"^kablab-block (\S+) (begin|end)(?: (-?\d+))?$")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def block_name(workload: str, block: int | str) -> str:
    return f"{workload}-block{int(block)}"


def result_path(campaign: Path, variant: str, workload: str, block: int | str) -> Path:
    return campaign / "results" / variant / f"{block_name(workload, block)}.json"


def raw_path(campaign: Path, variant: str, workload: str, block: int | str) -> Path:
    return campaign / "raw" / variant / block_name(workload, block)


def guest_plan(specs: Iterable[Mapping[str, Any]], guest_dir: str, perf_events: Iterable[str]) -> str:
    """kablab-guest-boot's standard input: one tab-separated line per block."""
    lines = []
    events = ",".join(perf_events)
    for s in specs:
        command = " ".join(shlex.quote(a) for a in [f"{guest_dir}/{s['name']}", *map(str, s["argv"])])
        fields = [s["name"], str(int(s["runs"])), str(int(s["warmup"])), str(int(s["timeout_s"])), events, command]
        if any(c in f for f in fields for c in "\t\n") or not all(fields[:5]):
            raise ValueError(f"workload {s['name']!r}: a setting is empty or holds a tab or newline: {fields!r}")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def block_timeouts(specs: Iterable[Mapping[str, Any]], slack_s: int | str) -> list[dict[str, Any]]:
    """framewatch.py's blocks: the longest each block may take seen from the
    hypervisor, (runs + warmup) x the run timeout + slack."""
    return [{"name": s["name"],
             "timeout_s": (int(s["runs"]) + int(s["warmup"])) * int(s["timeout_s"]) + int(slack_s)}
            for s in specs]


def todo(campaign: Path, variant: str, block: int | str, names: Iterable[str], stamp: str) -> list[str]:
    """The workloads still to run; earlier attempts of them go to attempts/STAMP/VARIANT/."""
    out = []
    for name in names:
        res, raw = result_path(campaign, variant, name, block), raw_path(campaign, variant, name, block)
        if not check_files([str(res)]):
            continue
        out.append(name)
        old = [p for p in (res, raw) if p.exists()]
        if old:
            dest = campaign / "attempts" / stamp / variant
            dest.mkdir(parents=True, exist_ok=True)
            for p in old:
                shutil.move(str(p), str(dest / p.name))
    return out


def split_frames(text: str) -> dict[str, dict[str, Any]]:
    """Workload -> {"stream": its kablab-raw lines, "ended": bool, "rc": int | None}."""
    blocks: dict[str, dict[str, Any]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = BEGIN_END.match(line)
        if m and m.group(2) == "begin":
            current = []
            blocks[m.group(1)] = {"lines": current, "ended": False, "rc": None}
        elif m and m.group(1) in blocks:
            blocks[m.group(1)].update(ended=True, rc=int(m.group(3)) if m.group(3) else None)
            current = None
        elif current is not None:
            current.append(line)
    return {k: {"stream": "\n".join(v.pop("lines")) + "\n", **v} for k, v in blocks.items()}


def block_meta(boot: Mapping[str, Any], spec: Mapping[str, Any], status: str,
               failure: dict[str, Any] | None, started: str, finished: str) -> dict[str, Any]:
    """meta.json of one block: the boot's provenance plus the workload's own."""
    meta = json.loads(json.dumps(boot["meta"]))
    name = spec["name"]
    if str(meta.get("variant")) != str(boot["variant"]) or str(meta.get("block")) != str(boot["block"]):
        raise ValueError(f"the provenance describes {meta.get('variant')} round {meta.get('block')}, "
                         f"not the boot of {boot['variant']} round {boot['block']}")
    tlb = boot.get("tlb") or None
    meta["host"] = {**meta.get("host", {}), "noise": boot.get("noise")}
    meta["campaign"] = {**meta.get("campaign", {}), "variants": list(boot["variants"])}
    meta.update({
        "workload": name,
        "primary_metric": spec.get("primary_metric") or None,
        "model_measure": spec.get("model_measure") or None,
        "binary": {"name": name, "sha256": boot["sha256"].get(name), "args": list(spec["argv"])},
        "runner": {"runs": int(spec["runs"]), "warmup": int(spec["warmup"]),
                   "timeout_s": int(spec["timeout_s"]), "perf_events": list(boot["perf_events"])},
        "tlb_model": {**tlb, "root": tlb["roots"][meta["variant"]]} if tlb else None,
        "status": status,
        "failure": failure,
        "started_at": started,
        "finished_at": finished,
    })
    return meta


def _failure(stage: str, reason: str, console_log: str | None, console_tail: str | None = None) -> dict[str, Any]:
    return {"stage": stage, "reason": reason[:2000], "exit_code": None, "signal": None,
            "stderr_tail": None, "console_log": console_log, "console_tail": console_tail or None}


def collect_boot(campaign: Path, boot: Mapping[str, Any], specs: list[Mapping[str, Any]], frames: str,
                 watch: Mapping[str, Any] | None = None,
                 boot_failure: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """Write the results of one guest command's blocks (see the module doc)."""
    watch = watch or {}
    times = watch.get("blocks", {})
    stopped = watch.get("stopped") or {}
    parts = split_frames(frames)
    console = boot.get("console_log")
    out: dict[str, list[str]] = {"ok": [], "failed": [], "remaining": [], "errors": []}
    progressed = False
    for spec in specs:
        name = spec["name"]
        t = times.get(name, {})
        started, finished = t.get("began") or _now(), t.get("ended") or _now()
        part = parts.get(name)
        failure = None
        if boot_failure is not None:
            failure = dict(boot_failure)
        elif part is None:
            if watch.get("complete") or (stopped and not progressed):
                # the runner skipped it, or nothing began at all: fail it
                # rather than boot again for it forever
                failure = _failure("run", stopped.get("reason") or f"the guest runner never began {name}",
                                   console, stopped.get("console_tail"))
            else:
                out["remaining"].append(name)
                continue
        elif not part["ended"]:
            reason = stopped.get("reason") if stopped.get("block") == name else None
            failure = _failure("run", reason or f"the output of {name} was cut before its end line",
                               console, stopped.get("console_tail"))
        progressed = True
        status = "failed" if failure else "ok"
        try:
            meta = block_meta(boot, spec, status, failure, started, finished)
        except ValueError as e:
            out["errors"].append(f"{name}: {e}")
            continue
        raw = raw_path(campaign, boot["variant"], name, boot["block"])
        raw.mkdir(parents=True, exist_ok=True)
        atomic_write_json(raw / "meta.json", meta)
        if part is not None:
            collector.save_stream(raw, part["stream"].encode(), boot.get("tlb_records"))
        try:
            doc = collector.collect_to(raw, result_path(campaign, boot["variant"], name, boot["block"]))
        except (collector.CollectError, ValueError, OSError) as e:
            out["errors"].append(f"{name}: {e}")
            continue
        out["ok" if doc["status"] == "ok" else "failed"].append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.bootrun", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("todo")
    t.add_argument("campaign_dir", type=Path)
    t.add_argument("variant")
    t.add_argument("block", type=int)
    t.add_argument("names", nargs="*")
    c = sub.add_parser("collect")
    c.add_argument("campaign_dir", type=Path)
    c.add_argument("--boot", required=True, help="the boot's provenance and settings (JSON)")
    c.add_argument("--specs", required=True, help="the workloads the guest command ran, in order (JSON)")
    c.add_argument("--watch", help="kablab/framewatch.py's report (JSON)")
    c.add_argument("--boot-failure", help="the failure every workload gets: the guest never came up (JSON)")
    a = ap.parse_args(argv)
    if a.cmd == "todo":
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        print(json.dumps(todo(a.campaign_dir, a.variant, a.block, a.names, stamp)))
        return 0
    frames = sys.stdin.read() if not sys.stdin.isatty() else ""
    out = collect_boot(a.campaign_dir, json.loads(a.boot), json.loads(a.specs), frames,
                       json.loads(a.watch) if a.watch else None,
                       json.loads(a.boot_failure) if a.boot_failure else None)
    print(json.dumps(out))
    for e in out["errors"]:
        print(f"kablab.bootrun: error: {e}", file=sys.stderr)
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
