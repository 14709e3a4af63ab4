"""One boot's workload blocks on the controller: what to run, and its results.

A boot runs all of its workloads with one guest command
(roles/workloads/files/kablab-guest-boot), whose output reaches the
hypervisor through the domain's frames channel as it is written: first
the guest's description of itself, then each block's raw files. The steps
here, each one controller command of the run stage:

    python3 -m kablab.lab.bootrun todo CAMPAIGN_DIR VARIANT BLOCK NAME...
        The workloads of this boot without a good result, in order (JSON
        list). An earlier failed or unreadable attempt of one of them moves
        to attempts/<time>/<variant>/ first: raw results are never
        overwritten.

    python3 -m kablab.lab.bootrun pending CAMPAIGN_DIR
        Read only: the boots of plan.json with a workload still to run, and
        the line of each finished boot. A lane with none left is done: the
        run stage starts nothing there.

    python3 -m kablab.lab.bootrun collect CAMPAIGN_DIR --boot JSON --specs JSON
            [--watch JSON] [--boot-failure JSON]  < FRAMES
        Writes the boot's record, boots/<variant>-boot<N>.json (the
        provenance all its results share, from --boot and the guest's
        description), then splits the frames into blocks and writes, for
        every workload of --specs that began, its raw directory and result
        (kablab.results.collect); one that was in flight when the guest was lost
        fails with the watcher's reason (kablab/remote/framewatch.py), and with
        --boot-failure (the guest never came up) or a guest that refused
        to run (not the kernel or binaries built) every workload fails at
        stage "boot". Prints {"ok", "failed", "remaining"}: remaining ones
        never began and run in a fresh boot of the same kernel.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from kablab.results import collect as collector
from kablab.results import rawframe
from kablab.results.load import check_files
from kablab.util import atomic_write_json

BEGIN_END = re.compile(r"^kablab-block (\S+) (begin|end)(?: (-?\d+))?$")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def block_name(workload: str, block: int | str) -> str:
    return f"{workload}-block{int(block)}"


def result_path(campaign: Path, variant: str, workload: str, block: int | str) -> Path:
    return campaign / "results" / variant / f"{block_name(workload, block)}.json"


def raw_path(campaign: Path, variant: str, workload: str, block: int | str) -> Path:
    return campaign / "raw" / variant / block_name(workload, block)


def guest_plan(specs: Iterable[Mapping[str, Any]], guest_dir: str, perf_events: Iterable[str],
               binaries: Mapping[str, str] | None = None) -> str:
    """kablab-guest-boot's standard input: the sha256 of the binaries the
    guest must run, then per block its settings and its command, one
    argument per line: the argv stays a list all the way (no shell parses
    it)."""
    lines = []
    specs = list(specs)
    names = {s["name"] for s in specs}
    for name, sha in sorted((binaries or {}).items()):
        if name not in names:
            continue
        lines.append(f"binary\t{name}\t{sha}")
    events = ",".join(perf_events)
    for s in specs:
        fields = [s["name"], str(int(s["runs"])), str(int(s["warmup"])), str(int(s["timeout_s"])), events]
        argv = [f"{guest_dir}/{s['name']}", *map(str, s["argv"])]
        if any(c in f for f in fields + argv for c in "\t\n") or not all(fields):
            raise ValueError(f"workload {s['name']!r}: a setting or argument is empty or holds a tab or "
                             f"newline: {fields + argv!r}")
        lines.append("\t".join(["block", *fields]))
        lines += [f"arg\t{a}" for a in argv]
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


DESCRIBE = re.compile(r"^kablab-describe (begin|end)$")
REFUSED = "kablab-boot refused "


def _boot_line(plan: list[Mapping[str, Any]], entry: Mapping[str, Any], host: str, skipped: bool) -> str:
    return (f"kablab: boot {int(entry['order_index']) + 1}/{len(plan)} on {host}: {entry['variant']} block "
            f"{entry['block']}{' (done, skipped)' if skipped else ''}")


def progress(plan: list[Mapping[str, Any]], entry: Mapping[str, Any], host: str, skipped: bool,
             done_here: int, elapsed_s: float) -> str:
    """The run stage's line per planned boot: which one, where, and how long
    this host's remaining boots should take at its pace so far."""
    left = sum(1 for b in plan if b["host"] == host and int(b["order_index"]) >= int(entry["order_index"]))
    eta = f"{int(elapsed_s / done_here * left)} s" if done_here else "unknown until the first boot ends"
    return (f"{_boot_line(plan, entry, host, skipped)}; {done_here} boot(s) done here in "
            f"{int(elapsed_s)} s, ETA {eta}")


def pending(campaign: Path) -> dict[str, Any]:
    """Where the campaign planned in CAMPAIGN/plan.json stands, read only
    (nothing moves to attempts/: the run role's status does that when it
    runs the boot): {"pending": the plan entries with a workload still
    without a good result, "done": {host: the progress line of each of its
    finished boots}}. A host with no pending entry needs no guest, image or
    provenance: the run stage skips its setup."""
    plan_doc = json.loads((campaign / "plan.json").read_text(encoding="utf-8"))
    plan, names = plan_doc["plan"], plan_doc["workloads"]
    out: dict[str, Any] = {"pending": [], "done": {}}
    for entry in sorted(plan, key=lambda e: int(e["order_index"])):
        paths = [str(result_path(campaign, entry["variant"], n, entry["block"])) for n in names]
        if check_files(paths):
            out["pending"].append(entry)
        else:
            out["done"].setdefault(entry["host"], []).append(_boot_line(plan, entry, entry["host"], True))
    return out



def split_frames(text: str) -> dict[str, Any]:
    """The guest command's output, split: {"describe": the guest's own raw
    frame (text) or None, "refused": why it ran nothing or None, "blocks":
    workload -> {"stream": its kablab-raw lines, "ended": bool, "rc": int |
    None}}."""
    blocks: dict[str, dict[str, Any]] = {}
    describe: list[str] | None = None
    refused = None
    current: list[str] | None = None
    for line in text.splitlines():
        m = BEGIN_END.match(line)
        d = DESCRIBE.match(line)
        if d and d.group(1) == "begin":
            current = describe = []
        elif d:
            current = None
        elif line.startswith(REFUSED):
            refused = line[len(REFUSED):].strip() or "no reason given"
        elif m and m.group(2) == "begin":
            current = []
            blocks[m.group(1)] = {"lines": current, "ended": False, "rc": None}
        elif m and m.group(1) in blocks:
            blocks[m.group(1)].update(ended=True, rc=int(m.group(3)) if m.group(3) else None)
            current = None
        elif current is not None:
            current.append(line)
    return {"describe": "\n".join(describe) + "\n" if describe is not None else None, "refused": refused,
            "blocks": {k: {"stream": "\n".join(v.pop("lines")) + "\n", **v} for k, v in blocks.items()}}


# What a boot's record takes of its guest's guest_domain record (the rest:
# ssh argv, ports and paths, is the hypervisor's business), and which keys
# of the layout every guest shares go elsewhere: the accelerator is the
# host's, the TLB model's settings are a block of their own.
GUEST_KEYS = ("boot", "booted_at", "ready_at", "domain", "emulator_lost", "cmdline", "uname_r", "uname_v")
NOT_GUEST = ("accel", "tlb_model")
INTS = ("vcpus", "memory_mib", "boot")


def boot_record(boot: Mapping[str, Any], describe: Mapping[str, bytes] | None = None) -> dict[str, Any]:
    """The provenance every result of one boot shares, in the result
    schema's shape: the run stage's inputs (--boot: campaign, plan entry,
    host, the guest's guest_domain record, the layout every guest shares,
    kernel) and what the guest said of itself (the describe frame: its
    kernel, cmdline and tools)."""
    config = dict(boot.get("config") or {})
    entry = boot["entry"]
    guest = {k: v for k, v in config.items() if k not in NOT_GUEST}
    guest.update({k: boot["guest"][k] for k in GUEST_KEYS if k in (boot.get("guest") or {})})
    said = {k: v.decode("utf-8", "replace").strip() for k, v in (describe or {}).items()}
    guest.update({k: said[k] for k in ("uname_r", "uname_v", "cmdline") if k in said})
    for k in INTS:
        if isinstance(guest.get(k), str) and guest[k].strip().lstrip("-").isdigit():
            guest[k] = int(guest[k])
    tlb = config.get("tlb_model") or None
    return {
        "campaign": {**boot["campaign"], "seed": int(boot["campaign"]["seed"])},
        "variant": entry["variant"], "block": int(entry["block"]), "order_index": int(entry["order_index"]),
        "host": {**boot["host"], "lane": int(boot["host"].get("lane") or 0), "accel": config.get("accel"),
                 # Ansible renders a missing sample as "": no sample
                 "noise": boot.get("noise") or None},
        "guest": guest,
        "kernel": boot["kernel"],
        "tools": {k: said[k].splitlines()[0] for k in ("hyperfine", "perf") if said.get(k)},
        "tlb_model": {**tlb, "root": tlb["roots"][entry["variant"]]} if tlb else None,
    }


def write_boot_record(campaign: Path, record: Mapping[str, Any]) -> Path | None:
    """boots/<variant>-boot<N>.json: one record per boot that came up."""
    n = record["guest"].get("boot")
    if n is None:
        return None
    path = campaign / "boots" / f"{record['variant']}-boot{int(n)}.json"
    atomic_write_json(path, record)
    return path


def block_meta(record: Mapping[str, Any], boot: Mapping[str, Any], spec: Mapping[str, Any], status: str,
               failure: dict[str, Any] | None, started: str, finished: str) -> dict[str, Any]:
    """meta.json of one block: the boot's record plus the workload's own."""
    meta = json.loads(json.dumps(record))
    name = spec["name"]
    meta.update({
        "workload": name,
        "primary_metric": spec.get("primary_metric") or None,
        "model_measure": spec.get("model_measure") or None,
        "binary": {"name": name, "sha256": boot["sha256"].get(name), "args": list(spec["argv"])},
        "runner": {"runs": int(spec["runs"]), "warmup": int(spec["warmup"]),
                   "timeout_s": int(spec["timeout_s"]), "perf_events": list(boot["perf_events"])},
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
    """Write the boot's record and the results of one guest command's
    blocks (see the module doc)."""
    watch = watch or {}
    times = watch.get("blocks", {})
    stopped = watch.get("stopped") or {}
    split = split_frames(frames)
    parts = split["blocks"]
    describe = None
    if split["describe"] is not None:
        try:
            describe = rawframe.parse(split["describe"])
        except rawframe.FrameError:
            describe = None
    record = boot_record(boot, describe)
    write_boot_record(campaign, record)
    guest = boot.get("guest") or {}
    console = guest.get("console_log_campaign")
    tlb = record["tlb_model"]
    # the plugin writes one file per boot; each block keeps its own records
    tlb_records = (f"{tlb['records_dir']}/{record['variant']}-boot{int(guest['boot'])}.jsonl"
                   if tlb and guest.get("boot") is not None else None)
    if split["refused"] and boot_failure is None:
        boot_failure = _failure("boot", f"the guest refused to run: {split['refused']}", console)
    out: dict[str, list[str]] = {"ok": [], "failed": [], "remaining": [], "errors": []}
    progressed = False
    variant, block = record["variant"], record["block"]
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
        meta = block_meta(record, boot, spec, status, failure, started, finished)
        raw = raw_path(campaign, variant, name, block)
        raw.mkdir(parents=True, exist_ok=True)
        atomic_write_json(raw / "meta.json", meta)
        if part is not None:
            collector.save_stream(raw, part["stream"].encode(), tlb_records)
        try:
            doc = collector.collect_to(raw, result_path(campaign, variant, name, block))
        except (collector.CollectError, ValueError, OSError) as e:
            out["errors"].append(f"{name}: {e}")
            continue
        out["ok" if doc["status"] == "ok" else "failed"].append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.lab.bootrun", description=__doc__,
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
    c.add_argument("--watch", help="kablab/remote/framewatch.py's report (JSON)")
    c.add_argument("--boot-failure", help="the guest never came up: {reason, console_log (its path on the "
                   "hypervisor), console_tail} (JSON), every workload's failure")
    pe = sub.add_parser("pending", help="the plan entries with work left, and each finished boot's line "
                        "(JSON: pending, done); reads only")
    pe.add_argument("campaign_dir", type=Path)
    st = sub.add_parser("status", help="todo, plus the progress line of this boot (JSON: todo, message)")
    st.add_argument("campaign_dir", type=Path)
    st.add_argument("--entry", required=True, help="the plan entry (JSON)")
    st.add_argument("--host", required=True)
    st.add_argument("--done", type=int, default=0, help="boots this host ran so far in this run")
    st.add_argument("--started", type=float, required=True, help="when this host began (epoch s)")
    st.add_argument("--workloads", nargs="*", default=[], dest="names", help="the campaign's workloads, in order")
    a = ap.parse_args(argv)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    if a.cmd == "todo":
        print(json.dumps(todo(a.campaign_dir, a.variant, a.block, a.names, stamp)))
        return 0
    if a.cmd == "pending":
        print(json.dumps(pending(a.campaign_dir)))
        return 0
    if a.cmd == "status":
        entry = json.loads(a.entry)
        left = todo(a.campaign_dir, entry["variant"], entry["block"], a.names, stamp)
        plan = json.loads((a.campaign_dir / "plan.json").read_text())["plan"]
        print(json.dumps({"todo": left, "message": progress(
            plan, entry, a.host, not left, a.done,
            datetime.now(timezone.utc).timestamp() - a.started)}))
        return 0
    frames = sys.stdin.read() if not sys.stdin.isatty() else ""
    said = json.loads(a.boot_failure) if a.boot_failure else {}
    # the console log as collect_logs.yml keeps it in the campaign's logs/
    console = f"logs/{Path(said['console_log']).name}" if said.get("console_log") else None
    out = collect_boot(a.campaign_dir, json.loads(a.boot), json.loads(a.specs), frames,
                       json.loads(a.watch) if a.watch else None,
                       _failure("boot", str(said["reason"]), console, said.get("console_tail")) if said else None)
    print(json.dumps(out))
    for e in out["errors"]:
        print(f"kablab.lab.bootrun: error: {e}", file=sys.stderr)
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
