"""The report's first screen, built on kablab.stats' analysis (no statistics here):
the verdict matrix (workload x kernel, primary metric)."""

from __future__ import annotations

from typing import Any

from .fmt import finite
from .stats import Analysis, Comparison

MARK = {"better": "\u25b2 better", "worse": "\u25bc worse"}


def _boots(c: Comparison) -> str:
    return f"{c.n_boots_base}/{c.n_boots_new} boots"


def verdict_cell(c: Comparison | None, why_missing: str) -> dict[str, Any]:
    """One cell: % change (positive = better), deciding interval, a marker and a
    colour class only when flagged, boots; or "not tested: why"."""
    if c is None:
        return {"tested": False, "text": f"not tested: {why_missing}", "pct": "",
                "interval": "", "mark": "", "boots": "", "cls": "na", "note": ""}
    if not c.tested or not finite(c.pct):
        return {"tested": False, "text": f"not tested: {c.reason}", "pct": "", "interval": "",
                "mark": "", "boots": _boots(c) if c.n_boots else "", "cls": "na", "note": ""}
    flagged = bool(c.significant)
    note = ("" if flagged else
            f"below noise floor {c.noise_floor_pct:.2f}%" if c.stat_significant else
            f"no clear change; could miss \u00b1{c.mde_pct:.1f}%" if finite(c.mde_pct) else
            "no clear change")
    return {"tested": True, "text": "", "pct": f"{c.pct:+.2f}%", "interval": c.interval(),
            "mark": MARK[c.direction] if flagged else "", "boots": _boots(c),
            "cls": f"sig-{c.direction}" if flagged else "", "note": note}


def verdict_matrix(an: Analysis, anchors: dict[str, str]) -> dict[str, Any]:
    """rows = workload + primary metric (unit, direction); columns = non-baseline kernels."""
    cols = an.variants[1:]
    rows = []
    for wl in an.workloads:
        pm = an.primary_metric(wl)
        md = an.metrics.get((wl, pm)) if pm else None
        cells = []
        for v in cols:
            if pm is None:
                why = "no metric"
            elif md is None:
                why = f"primary metric {pm} not in the results"
            else:
                why = "no value"
            cells.append(verdict_cell(an.comparison(wl, pm, v) if md else None, why))
        rows.append({"workload": wl, "anchor": anchors.get(wl, ""), "metric": pm or "none",
                     "unit": md.unit if md else "", "better": md.better if md else "",
                     "source": an.primaries.get(wl, {}).get("source", ""), "cells": cells})
    return {"baseline": an.baseline, "cols": cols, "rows": rows}


def verdict_matrix_text(vm: dict[str, Any], width: int = 100) -> list[str]:
    """Plain-text verdict matrix: one line per workload x kernel (fits `width`)."""
    out = [f"Verdicts vs {vm['baseline']} (primary metric, % change positive = better, "
           "[deciding interval], boots base/new):"]
    if not vm["cols"]:
        return out + ["  no comparison: only one kernel"]
    for r in vm["rows"]:
        head = f"  {r['workload']} {r['metric']}"
        if r["unit"]:
            head += f" [{r['unit']}, {r['better']} is better]"
        out.append(head[:width])
        for v, c in zip(vm["cols"], r["cells"]):
            if c["tested"]:
                line = (f"    {v:<14} {c['pct']:>8} {c['interval']:<18} "
                        f"{(c['mark'] or '-'):<9} {c['boots']}")
                if c["note"]:
                    line += f"  ({c['note']})"
            else:
                line = f"    {v:<14} {c['text']}"
            out.append(line if len(line) <= width else line[:width - 1] + "~")
    return out
