"""Turn one raw run directory into one schema-valid result file.

    python3 -m kablab.results.collect RAW_DIR OUT.json [--meta JSON] [--stream < guest-runner-output]

Rules:
* perf `<not supported>` / `<not counted>` -> value null, supported false (never 0);
* runs with a non-zero exit code are kept with their code, `included: false`;
* a failed block (meta.status == failed) may lack every raw file except meta.json;
* an ok block with missing or unparseable raw files becomes failed, stage "collect".
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kablab import __version__
from kablab.results.rawparse import directmap_state, parse_hyperfine, parse_meminfo, parse_perf_csv, parse_vmstat
from kablab.results.rawframe import FrameError, unpack
from kablab.results import tlbmodel
from kablab.util import atomic_write_bytes, atomic_write_json, tail, validation_errors

REQUIRED_OK_FILES = ("hyperfine.json", "meminfo.before", "meminfo.after", "vmstat.before", "vmstat.after")
# What the guest runner printed (kablab/results/rawframe.py), saved by the runner role.
FRAMES = "guest-run.out"
PROVENANCE_OBJECTS = ("campaign", "host", "guest", "kernel", "binary", "tools", "runner")
# The TLB model's records of this block (kablab/results/tlbmodel.py), and the
# runner's note of which marker ids the block used.
TLB_RECORDS = "tlbmodel.jsonl"
TLB_MARKS = "tlb.json"


class CollectError(Exception):
    """meta.json missing or unusable: no result can be identified."""


def _read(raw: Path, name: str) -> str | None:
    p = raw / name
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _measure(value: Any) -> str | list[str] | None:
    """meta's model_measure: one measure name or a list of them."""
    if isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(m, str) for m in value)):
        return value
    return None


def _int_or_none(v: Any) -> int | None:
    """An int, or a string holding one (Ansible templating may stringify), else None."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
        return int(v)
    return None


def _metrics(obj: dict[str, Any], warnings: list[str], where: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    metrics = obj.get("metrics")
    if not isinstance(metrics, dict):
        warnings.append(f"{where}: no metrics object")
        return out
    for name, m in metrics.items():
        if not isinstance(m, dict):
            warnings.append(f"{where}: metric {name!r} is not an object; skipped")
            continue
        better = m.get("better")
        if better not in ("higher", "lower"):
            warnings.append(f"{where}: metric {name!r} has better={better!r}; skipped")
            continue
        v = m.get("value")
        value = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        out[str(name)] = {"value": value, "unit": str(m.get("unit", "")), "better": better}
    return out


def _signal_suffix(code: int) -> str:
    """' (SIGSEGV)' for a shell-style 128+N status, else ''."""
    if 128 < code < 128 + 65:
        try:
            return f" ({signal.Signals(code - 128).name})"
        except ValueError:
            return f" (signal {code - 128})"
    return ""


def _run_file(raw: Path, n: int, kind: str) -> str | None:
    """Measured run n's (1-based) file of one kind: json, perf, err, rc."""
    return _read(raw, f"run-{n}.{kind}")


def run_stderr(raw: Path, runs: int) -> str:
    """Every measured run's stderr, each line prefixed with its run."""
    lines = []
    for n in range(1, runs + 1):
        lines += [f"[run {n}] {line}" for line in (_run_file(raw, n, "err") or "").splitlines()]
    return "\n".join(lines)


def _harness(text: str | None, where: str, warnings: list[str]) -> dict[str, Any] | None:
    if text is None or not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        warnings.append(f"{where}: not JSON ({e.msg})")
        return None
    if not isinstance(obj, dict):
        warnings.append(f"{where}: not a JSON object")
        return None
    return obj


def build_runs(hf: dict[str, Any], raw: Path, meta: dict[str, Any],
               warnings: list[str]) -> list[dict[str, Any]]:
    """One record per measured run, run i from its own files (kablab-guest-run:
    run-<i+1>.json, .perf, .rc, .err) and hyperfine's i-th time."""
    times = hf["times"]
    n = len(times)
    planned = (meta.get("runner") or {}).get("runs")
    if planned not in (None, n):
        warnings.append(f"runner.runs={planned} but hyperfine measured {n} runs")
    wl = meta.get("workload")
    runs = []
    for i in range(n):
        h = _harness(_run_file(raw, i + 1, "json"), f"run-{i + 1}.json", warnings)
        if h is not None and wl is not None and h.get("workload") not in (None, wl):
            warnings.append(f"run-{i + 1}.json: workload {h.get('workload')!r} != meta {wl!r}")
        perf_text = _run_file(raw, i + 1, "perf")
        groups = parse_perf_csv(perf_text) if perf_text is not None else []
        rc = (_run_file(raw, i + 1, "rc") or "").strip()
        code = int(rc) if re.fullmatch(r"-?\d+", rc) else None
        reason = None
        if code is None:
            reason = "exit code unknown (no status recorded)"
        elif code != 0:
            reason = f"exit code {code}" + _signal_suffix(code)
        elif h is None:
            reason = "exit 0 without JSON output"
        elif times[i] is None:
            reason = "no wall time"
        runs.append({
            "index": i,
            "wall_s": times[i],
            "user_s": hf["user_times"][i] if hf.get("user_times") else None,
            "system_s": hf["system_times"][i] if hf.get("system_times") else None,
            "exit_code": code,
            "included": reason is None,
            "exclude_reason": reason,
            "harness_elapsed_s": (float(h["elapsed_s"]) if h is not None and
                                  isinstance(h.get("elapsed_s"), (int, float)) else None),
            "metrics": _metrics(h, warnings, f"run-{i + 1}.json") if h is not None else {},
            "work": _work(h),
            "perf": groups[-1] if groups else {},
        })
    return runs


def _work(h: dict[str, Any] | None) -> dict[str, Any] | None:
    """The harness's `work` (amount, unit) of a run; None when it has none."""
    w = h.get("work") if h is not None else None
    if (isinstance(w, dict) and isinstance(w.get("amount"), (int, float))
            and not isinstance(w.get("amount"), bool) and isinstance(w.get("unit"), str)):
        return {"amount": float(w["amount"]), "unit": w["unit"]}
    return None


def _block_marks(raw: Path, warnings: list[str]) -> dict[str, Any] | None:
    """The runner's tlb.json: `base`, the first marker id of this block's
    runs (run n has base + n), and `cpu_flags`, the guarded CPU flags the
    guest has (kablab.results.tlbmodel.GUARDED_FLAGS)."""
    text = _read(raw, TLB_MARKS)
    if text is None:
        return None
    try:
        marks = json.loads(text)
    except json.JSONDecodeError:
        marks = None
    if not isinstance(marks, dict) or not isinstance(marks.get("base"), int):
        warnings.append(f"{TLB_MARKS}: no integer base")
        return None
    return marks


def _attach_model(raw: Path, meta: dict[str, Any], runs: list[dict[str, Any]],
                  warnings: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """With the TLB model on (meta.tlb_model), give each run its `model`
    block (the plugin's run record whose id is the runner's mark) and return
    the model's provenance (the plugin's parameters and the guest cmdline
    additions; None when the model was off) and, when a guard failed (the
    guest runs PCID, PTI or 5-level paging, or the plugin's walks did not
    see the guest kernel's tables), why: then no run gets model counts."""
    prov = meta.get("tlb_model")
    if not isinstance(prov, dict) or not prov.get("enabled"):
        return None, None
    prov = dict(prov)
    text = _read(raw, TLB_RECORDS)
    marks = _block_marks(raw, warnings)
    base = marks["base"] if marks else None
    recs = tlbmodel.parse_jsonl(text) if text is not None else []
    params = tlbmodel.records(recs, "params")
    prov["params"] = params[-1] if params else None
    prov["label"] = tlbmodel.params_label(params[-1], prov.get("icount")) if params else None
    by_id = tlbmodel.runs_by_id(recs)
    levels = params[-1].get("levels", 4) if params else 4
    reasons = tlbmodel.guest_flag_failures(marks.get("cpu_flags") if marks else None, levels)
    found = {r["index"]: by_id.get(base + r["index"] + 1) if base is not None else None for r in runs}
    for rec in found.values():
        for why in tlbmodel.guard_failures(rec or {}):
            if why not in reasons:
                reasons.append(why)
    if reasons:
        return prov, "tlb model guard: " + "; ".join(reasons)
    missing = 0
    for r in runs:
        rec = found[r["index"]]
        if rec is None:
            missing += 1
        else:
            r["model"] = tlbmodel.model_block(rec)
    if missing:
        why = ("no plugin records" if text is None else
               "no runner marks" if base is None else "no run record for their marks")
        warnings.append(f"tlb model: {missing} of {len(runs)} run(s) have no model counts ({why})")
    return prov, None


def select_tlb_records(plugin_out: str | Path, raw: Path) -> None:
    """Keep, in RAW/tlbmodel.jsonl, the plugin output's params record and
    the run records of this block's marks (the plugin writes one file per
    boot; the raw directory must stand alone for a later re-collect)."""
    try:
        text = Path(plugin_out).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return  # collect() warns that the runs have no model counts
    marks = _block_marks(raw, [])
    base = marks["base"] if marks else None
    keep = []
    for rec in tlbmodel.parse_jsonl(text):
        if rec["type"] == "params" or (
                rec["type"] == "run" and base is not None and isinstance(rec.get("id"), int)
                and base < rec["id"] < base + tlbmodel.MARKS_PER_BLOCK):
            keep.append(json.dumps(rec, sort_keys=True))
    atomic_write_bytes(raw / TLB_RECORDS, ("\n".join(keep) + "\n").encode())


def save_stream(raw: Path, stream: bytes | None, tlb_records: str | Path | None = None) -> None:
    """Keep the guest runner's output as RAW/guest-run.out and, with the TLB
    model's per-boot output, this block's records of it."""
    if stream is not None:
        atomic_write_bytes(raw / FRAMES, stream)
    if tlb_records:
        # The runner's marks travel in the stream; collect() reports a bad one.
        if (raw / FRAMES).is_file():
            try:
                unpack((raw / FRAMES).read_text(encoding="utf-8", errors="replace"), raw)
            except FrameError:
                pass
        select_tlb_records(tlb_records, raw)


def collect(raw_dir: str | Path) -> dict[str, Any]:
    """Parse RAW_DIR and return a result document (not yet validated)."""
    raw = Path(raw_dir)
    meta_text = _read(raw, "meta.json")
    if meta_text is None:
        raise CollectError(f"{raw}/meta.json is missing: cannot identify the block")
    try:
        meta = json.loads(meta_text)
    except json.JSONDecodeError as e:
        raise CollectError(f"{raw}/meta.json is not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise CollectError(f"{raw}/meta.json is not an object")
    for k in ("variant", "workload"):
        if not isinstance(meta.get(k), str) or not meta.get(k):
            raise CollectError(f"{raw}/meta.json has no {k!r}")

    warnings: list[str] = []
    frame_error = None
    if (raw / FRAMES).is_file():
        try:
            unpack((raw / FRAMES).read_text(encoding="utf-8", errors="replace"), raw)
        except FrameError as e:
            frame_error = str(e)
    files = sorted(p.name for p in raw.iterdir() if p.is_file() and not p.name.startswith("."))
    status = meta.get("status", "ok")
    failure = meta.get("failure")
    if status not in ("ok", "failed"):
        warnings.append(f"meta.status={status!r} treated as failed")
        status = "failed"
    planned = (meta.get("runner") or {}).get("runs")
    stderr_text = run_stderr(raw, planned if isinstance(planned, int) else 0)

    def fail(reason: str, stage: str = "collect", exit_code: int | None = None) -> None:
        nonlocal status, failure
        status = "failed"
        # hyperfine's own output (kept by kablab-guest-run) explains a missing hyperfine.json
        err = stderr_text if stderr_text and stderr_text.strip() else _read(raw, "hyperfine.out")
        sig = _signal_suffix(exit_code).strip(" ()") if exit_code is not None else ""
        failure = {"stage": stage, "reason": reason, "exit_code": exit_code, "signal": sig or None,
                   "stderr_tail": tail(err) or None, "console_log": None, "console_tail": None}

    if frame_error and status == "ok":
        fail(f"{FRAMES}: {frame_error}")
    elif frame_error:
        warnings.append(f"{FRAMES}: {frame_error}")
    if status == "ok":
        missing = [f for f in REQUIRED_OK_FILES if f not in files]
        if missing:
            fail("missing raw files: " + ", ".join(missing))
    elif not isinstance(failure, dict):
        failure = {"stage": "run", "reason": "meta.json says failed but gives no failure object"}

    if isinstance(failure, dict):
        failure = dict(failure)
        if failure.get("stage") not in ("boot", "run", "collect"):
            warnings.append(f"failure.stage={failure.get('stage')!r} replaced by 'run'")
            failure["stage"] = "run"
        failure["reason"] = str(failure.get("reason") or "no reason given")
        if failure.get("stderr_tail") is None and stderr_text:
            failure["stderr_tail"] = tail(stderr_text)
        failure["exit_code"] = _int_or_none(failure.get("exit_code"))
        for k in ("stderr_tail", "console_log", "console_tail"):
            if failure.get(k) is not None and not isinstance(failure[k], str):
                failure[k] = str(failure[k])
            if failure.get(k) == "":
                failure[k] = None

    runs: list[dict[str, Any]] = []
    hf_summary = None
    hf_text = _read(raw, "hyperfine.json")
    if hf_text is not None:
        try:
            hf = parse_hyperfine(hf_text)
            hf_summary = {k: hf[k] for k in ("mean", "stddev", "median", "min", "max",
                                              "user", "system")}
            runs = build_runs(hf, raw, meta, warnings)
        except ValueError as e:
            if status == "ok":
                fail(f"cannot parse raw files: {e}")
            else:
                warnings.append(str(e))
    if status == "ok" and runs and not any(r["included"] for r in runs):
        codes = sorted({r["exit_code"] for r in runs}, key=str)
        fail(f"all {len(runs)} runs failed (exit codes {codes})", stage="run",
             exit_code=next((c for c in codes if isinstance(c, int) and c != 0), None))
    if status == "ok" and not runs:
        fail("hyperfine.json has no measured runs")

    tlb_prov, guard = _attach_model(raw, meta, runs, warnings)
    if guard and status == "ok":
        fail(guard, stage="boot")

    def state(suffix: str) -> dict[str, int | None]:
        mi, vm = _read(raw, f"meminfo.{suffix}"), _read(raw, f"vmstat.{suffix}")
        return directmap_state(parse_meminfo(mi) if mi else None, parse_vmstat(vm) if vm else None)

    def grouped(suffix: str) -> dict[str, int] | None:
        text = _read(raw, f"grouped.{suffix}")
        return parse_vmstat(text) if text is not None else None

    doc: dict[str, Any] = {"schema_version": 1}
    for k in PROVENANCE_OBJECTS:
        v = meta.get(k)
        doc[k] = v if isinstance(v, dict) else {}
    if "id" not in doc["campaign"]:
        doc["campaign"]["id"] = "unknown"
        warnings.append("meta.campaign.id missing")
    block = _int_or_none(meta.get("block"))
    if block is None or block < 0:
        warnings.append(f"meta.block={meta.get('block')!r}; using 0")
        block = 0
    doc.update({
        "variant": meta["variant"],
        "workload": meta["workload"],
        "primary_metric": meta["primary_metric"] if isinstance(meta.get("primary_metric"), str) else None,
        "model_measure": _measure(meta.get("model_measure")),
        "block": block,
        "order_index": _int_or_none(meta.get("order_index")),
        "status": status,
        "failure": failure if status == "failed" else None,
        "started_at": meta.get("started_at"),
        "finished_at": meta.get("finished_at"),
        "runs": runs,
        **({"tlb_model": tlb_prov} if tlb_prov is not None else {}),
        "directmap": {"before": state("before"), "after": state("after")},
        # The grouped page cache's counters (debugfs vmalloc_group_pages);
        # null on kernels without the cache.
        "grouped_pages": {"before": grouped("before"), "after": grouped("after")},
        "collect": {"collected_at": _now(), "raw_dir": str(raw), "kablab_version": __version__,
                    "files": files, "hyperfine_summary": hf_summary, "warnings": warnings},
    })
    return doc


def collect_to(raw_dir: str | Path, out: str | Path) -> dict[str, Any]:
    """Collect, validate, and write atomically. Raises CollectError / ValueError."""
    doc = collect(raw_dir)
    errs = validation_errors(doc)
    if errs:
        raise ValueError("collected result is not schema-valid:\n  " + "\n  ".join(errs))
    atomic_write_json(out, doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.results.collect", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw_dir", help="raw run directory (design.md)")
    ap.add_argument("out", help="result JSON to write (atomically)")
    ap.add_argument("--meta", metavar="JSON",
                    help="write this provenance as RAW_DIR/meta.json first (atomically)")
    ap.add_argument("--stream", action="store_true",
                    help=f"save standard input (the guest runner's output) as RAW_DIR/{FRAMES} first")
    ap.add_argument("--tlb-records", metavar="JSONL",
                    help=f"the TLB plugin's output for this boot: this block's records go to RAW_DIR/{TLB_RECORDS}")
    args = ap.parse_args(argv)
    try:
        raw = Path(args.raw_dir)
        if args.meta is not None:
            atomic_write_json(raw / "meta.json", json.loads(args.meta))
        save_stream(raw, sys.stdin.buffer.read() if args.stream else None, args.tlb_records)
        doc = collect_to(raw, args.out)
    except (CollectError, ValueError, OSError) as e:
        print(f"kablab.results.collect: error: {e}", file=sys.stderr)
        return 1
    for w in doc["collect"]["warnings"]:
        print(f"kablab.results.collect: warning: {w}", file=sys.stderr)
    if doc["status"] == "failed":
        f = doc["failure"]
        print(f"kablab.results.collect: block failed at {f['stage']}: {f['reason']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
