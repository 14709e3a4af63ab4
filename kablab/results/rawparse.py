"""Parsers for the files of a raw block directory (docs/design.md).

Each parser takes text and returns plain Python data; they raise ValueError
with a clear message on malformed input.
"""

from __future__ import annotations

import json
import re
from typing import Any

UNSUPPORTED_MARKERS = ("<not supported>", "<not counted>")


def parse_hyperfine(text: str) -> dict[str, Any]:
    """Parse `hyperfine --export-json` output (one command).

    Returns {"times": [...], "exit_codes": [...], "user": mean, "system": mean,
    "mean", "stddev", "median", "min", "max", "command", "user_times",
    "system_times"} where user_times/system_times are per-run lists only when
    the hyperfine version exports them (1.15 does not: only means).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"hyperfine.json is not valid JSON: {e}") from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list) or not results:
        raise ValueError("hyperfine.json has no results[0]")
    r = results[0]
    times = r.get("times")
    if not isinstance(times, list):
        raise ValueError("hyperfine.json results[0] has no 'times' list")
    exit_codes = r.get("exit_codes")
    if not isinstance(exit_codes, list) or len(exit_codes) != len(times):
        exit_codes = [None] * len(times)
    out: dict[str, Any] = {
        "command": r.get("command"),
        "times": [float(t) if t is not None else None for t in times],
        "exit_codes": [int(c) if c is not None else None for c in exit_codes],
    }
    for k in ("mean", "stddev", "median", "min", "max", "user", "system"):
        v = r.get(k)
        out[k] = float(v) if isinstance(v, (int, float)) else None
    # Some hyperfine versions may export per-run CPU times; use them if present.
    for key, name in (("user_times", "user_times"), ("system_times", "system_times")):
        v = r.get(key)
        out[name] = [float(x) for x in v] if isinstance(v, list) and len(v) == len(times) else None
    return out


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def parse_perf_line(line: str) -> tuple[str, dict[str, Any]] | None:
    """Parse one `perf stat -x,` line into (event, record); None for non-data lines.

    Field order: value, unit, event, run time, running %, metric value, metric unit.
    """
    line = line.rstrip("\r\n")
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    fields = line.split(",")
    if len(fields) < 3:
        return None
    raw_value, unit, event = fields[0].strip(), fields[1].strip(), fields[2].strip()
    if not event:
        return None
    running_pct = _num(fields[4]) if len(fields) > 4 and fields[4].strip() else None
    if raw_value in UNSUPPORTED_MARKERS or raw_value.startswith("<"):
        return event, {"value": None, "unit": unit, "supported": False, "raw": line,
                       "running_pct": running_pct}
    value = _num(raw_value)
    if value is None:
        return event, {"value": None, "unit": unit, "supported": False, "raw": line,
                       "running_pct": running_pct}
    if value.is_integer() and "." not in raw_value:
        value = int(value)
    return event, {"value": value, "unit": unit, "supported": True, "raw": line,
                   "running_pct": running_pct}


def parse_perf_csv(text: str) -> list[dict[str, dict[str, Any]]]:
    """Split `perf stat -x, --append -o` output into one dict of events per run.

    Each group starts with a `# started on ...` line. A file without such lines
    is one group.
    """
    groups: list[dict[str, dict[str, Any]]] = []
    current: dict[str, dict[str, Any]] | None = None
    for line in text.splitlines():
        if line.startswith("# started on"):
            current = {}
            groups.append(current)
            continue
        parsed = parse_perf_line(line)
        if parsed is None:
            continue
        if current is None:
            current = {}
            groups.append(current)
        event, rec = parsed
        current[event] = rec
    return groups


_MEMINFO_RE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$")


def parse_meminfo(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _MEMINFO_RE.match(line.strip())
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_vmstat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


MEMINFO_FIELDS = ("DirectMap4k", "DirectMap2M", "DirectMap1G", "PageTables")
# The direct-map fields the report shows per boot, one definition for the
# HTML and the text: field, HTML column, text column, text width.
DIRECTMAP_SHOWN = (
    ("DirectMap4k", "DirectMap4k kB", "4k kB", 19),
    ("DirectMap2M", "DirectMap2M kB", "2M kB", 19),
    ("DirectMap1G", "DirectMap1G kB", "1G kB", 9),
    ("direct_map_level2_splits", "level-2 splits", "l2spl", 8),
    ("direct_map_level3_splits", "level-3 splits", "l3spl", 6),
)
VMSTAT_FIELDS = ("direct_map_level2_splits", "direct_map_level3_splits", "nr_page_table_pages")


def directmap_state(meminfo: dict[str, int] | None, vmstat: dict[str, int] | None) -> dict[str, int | None]:
    meminfo = meminfo or {}
    vmstat = vmstat or {}
    state: dict[str, int | None] = {k: meminfo.get(k) for k in MEMINFO_FIELDS}
    state.update({k: vmstat.get(k) for k in VMSTAT_FIELDS})
    return state
