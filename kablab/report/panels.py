"""The report's first screen, built on kablab.report.stats (no statistics of its own):
the verdict matrix (workload x kernel, primary metric) and the TLB matrix."""

from __future__ import annotations

import textwrap
from typing import Any

from kablab.report import robust
from kablab.results import tlbmodel
from kablab.report.fmt import finite
from kablab.results.load import Campaign
from kablab.report.stats import (Analysis, BootValues, Comparison, MetricData, apply_families, boot_id,
                    compare_pair, norm_event, summarise)

MARK = {"better": "\u25b2 better", "worse": "\u25bc worse"}


def _boots(c: Comparison) -> str:
    return c.boots_label()


def _note(c: Comparison) -> str:
    if c.significant:
        return ""
    if c.stat_significant:
        return f"below your threshold {c.min_effect_pct:.2f}% (interval excludes 0)"
    if finite(c.mde_pct):
        return f"no clear change; could miss \u00b1{c.mde_pct:.1f}%"
    return "no clear change"


def verdict_cell(c: Comparison | None, why_missing: str, *,
                 without: Comparison | None = None, left_out: str = "") -> dict[str, Any]:
    """One cell: % change (positive = better), deciding interval, a marker and a
    colour class only when flagged, boots; or "not tested: why". *without*: the
    same comparison without the outlier boots named in *left_out*, shown beside."""
    if c is None:
        return {"tested": False, "text": f"not tested: {why_missing}", "pct": "",
                "interval": "", "mark": "", "boots": "", "cls": "na", "note": "",
                "without": None}
    if not c.tested or not finite(c.pct):
        return {"tested": False, "text": f"not tested: {c.reason}", "pct": "", "interval": "",
                "mark": "", "boots": _boots(c) if c.n_boots else "", "cls": "na", "note": "",
                "without": None}
    flagged = bool(c.significant)
    alt = None
    if without is not None:
        if without.tested and finite(without.pct):
            alt = {"left_out": left_out, "pct": f"{without.pct:+.2f}%",
                   "interval": without.interval(),
                   "mark": MARK[without.direction] if without.significant else "",
                   "boots": _boots(without), "note": _note(without)}
        else:
            alt = {"left_out": left_out, "pct": "", "interval": "", "mark": "",
                   "boots": "", "note": f"not tested: {without.reason}"}
    return {"tested": True, "text": "", "pct": f"{c.pct:+.2f}%", "interval": c.interval(),
            "mark": MARK[c.direction] if flagged else "", "boots": _boots(c),
            "cls": f"sig-{c.direction}" if flagged else "", "note": _note(c), "without": alt}


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
            c = an.comparison(wl, pm, v) if md else None
            w = an.without.get((wl, pm or "", v)) if c is not None else None
            cells.append(verdict_cell(c, why, without=w, left_out=", ".join(
                o.label for o in an.dropped_for(c)) if w is not None and c is not None else ""))
        rows.append({"workload": wl, "anchor": anchors.get(wl, ""), "metric": pm or "none",
                     "unit": md.unit if md else "", "better": md.better if md else "",
                     "source": an.primaries.get(wl, {}).get("source", ""), "cells": cells})
    return {"baseline": an.baseline, "cols": cols, "rows": rows, "checks": boot_checks(an)}


def boot_checks(an: Analysis) -> list[dict[str, str]]:
    """What the first screen says about runs and boots beside the matrix: outlier
    boots, the shared-offset pattern, rounds that did not run together, runs
    set aside. {"kind", "text"} each."""
    out = []
    for o in an.outlier_boots:
        out.append({"kind": "outlier-boot", "text": f"Outlier boot: {o.evidence()}. Verdicts "
                    "it touches are shown with and without it."})
    for s in an.shared_offsets:
        out.append({"kind": "shared-offset", "text": f"Shared boot offset: {s.text()}"})
    for w in an.round_warnings:
        out.append({"kind": "round-order", "text": f"Rounds not contiguous in time: {w}. "
                    "Boots are paired by round number, so drift between a round's boots "
                    "is not removed and can show as a change."})
    per_boot = an.aside_per_boot()
    if per_boot:
        top = sorted(per_boot.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{v} {b}: {n}" for (v, b), n in top[:4])
        more = f", {len(top) - 4} more boots" if len(top) > 4 else ""
        out.append({"kind": "runs-aside", "text": f"{sum(per_boot.values())} run(s) set aside "
                    f"in {len(per_boot)} boot(s) (more than {robust.RUN_Z:g} robust SDs from "
                    f"their boot's median; listed under Failures): {shown}{more}."})
    return out


def verdict_matrix_text(vm: dict[str, Any], width: int = 100) -> list[str]:
    """Plain-text verdict matrix: one line per workload x kernel (fits `width`)."""
    out = [f"Verdicts vs {vm['baseline']} on each workload's primary metric: % change "
           "(positive = better),"[:width],
           "[deciding interval], marker only when flagged, boots base/new; n.s. = no clear "
           "change."]
    if not vm["cols"]:
        return out + ["  no comparison: only one kernel"]
    for chk in vm.get("checks", []):
        out += textwrap.wrap("!! " + chk["text"], width, subsequent_indent="   ",
                             break_on_hyphens=False)
    for r in vm["rows"]:
        head = f"  {r['workload']} {r['metric']}"
        if r["unit"]:
            head += f" [{r['unit']}, {r['better']} is better]"
        out.append(head[:width])
        for v, c in zip(vm["cols"], r["cells"]):
            if c["tested"]:
                line = (f"    {v:<10} {c['pct']:>8} {c['interval']:<17} "
                        f"{(c['mark'] or '-'):<9} {c['boots']}")
                if c["note"]:
                    line += "  " + c["note"].replace("no clear change; ", "n.s., ")
            else:
                line = f"    {v:<14} {c['text']}"
            out.append(line if len(line) <= width else line[:width - 1] + "~")
            w = c.get("without")
            if w:
                line = (f"      without {w['left_out']}: {w['pct']} {w['interval']} "
                        f"{w['mark'] or '-'} {w['boots']}" if w["pct"]
                        else f"      without {w['left_out']}: {w['note']}")
                out.append(line if len(line) <= width else line[:width - 1] + "~")
    return out


# ------------------------------------------------------------------ TLB matrix

TLB_MEASURES = (("dTLB", "dTLB-load-misses"), ("iTLB", "iTLB-load-misses"))
INSTR = "instructions"
OPS_METRICS = ("ops", "operations", "iterations")   # harness metrics that count operations


def _events(d: Any) -> dict[str, tuple[bool, float | None]]:
    """perf (or model) block of a run -> event -> (supported, value)."""
    out: dict[str, tuple[bool, float | None]] = {}
    if not isinstance(d, dict):
        return out
    for k, p in d.items():
        if isinstance(p, dict):
            v = p.get("value")
            sup = bool(p.get("supported", v is not None)) and v is not None
        else:
            v, sup = p, isinstance(p, (int, float))
        out[norm_event(k)] = (sup, float(v) if sup else None)
    return out


def _ops(run: dict[str, Any]) -> tuple[float, str] | None:
    """The run's operations and their label: the work the harness reports
    (wl_work: "per syscall", as the modelled rows divide), else a metric
    that counts operations ("/op")."""
    work = run.get("work")
    if isinstance(work, dict) and work.get("amount") and work.get("unit"):
        return float(work["amount"]), f" per {work['unit']}"
    for name, m in run["metrics"].items():
        if (name in OPS_METRICS or m.get("unit") in OPS_METRICS) and m.get("value"):
            return float(m["value"]), "/op"
    return None


def _model_rows(run: dict[str, Any], wl: str, v: str, bid: Any, r: dict[str, Any],
                mds: dict, seen: dict, slots: dict) -> None:
    """One run's modelled TLB values (kablab.results.tlbmodel.PANEL_MEASURES) into the
    matrix, per unit of the run's work (tlbmodel.normalised)."""
    for name, (per, value) in tlbmodel.normalised(run.get("model"), run.get("work")).items():
        key = (wl, f"{name} {per}", "modelled")
        seen.setdefault(key, {}).setdefault(v, set())
        md = mds.get(key)
        if md is None:
            md = mds[key] = MetricData(wl, key[1], "walks" if "walks" in name else "misses",
                                       "lower", "model")
        slot = slots.get((key, v, bid))
        if slot is None:
            slot = slots[(key, v, bid)] = BootValues(v, bid, r["block"], r["host"].get("name"))
            md.boots.setdefault(v, []).append(slot)
        slot.runs.append(value)


def _measure_name(measure: str) -> str | None:
    """The tlbmodel.PANEL_MEASURES name a modelled row's measure starts with
    ("direct-map dTLB walks per MiB" -> "direct-map dTLB walks")."""
    names = [n for n in tlbmodel.MEASURE_NAMES if measure.startswith(n + " ")]
    return max(names, key=len) if names else None


def _measure_rank(measure: str) -> int:
    """Modelled rows in tlbmodel.PANEL_MEASURES' reading order (walks first)."""
    name = _measure_name(measure)
    return tlbmodel.MEASURE_NAMES.index(name) if name else len(tlbmodel.MEASURE_NAMES)


def tlb_matrix(camp: Campaign, an: Analysis) -> dict[str, Any]:
    """dTLB/iTLB misses per kilo-instruction (and per operation where the workload
    counts operations) per boot, workload x kernel, tested like the verdicts
    (kablab.report.stats.compare_pair + one BH family per kernel for the TLB rows).
    Sources: perf counters ("measured") and a run's `model` block ("modelled")
    when a campaign has one; absent -> no rows. An unsupported event (perf
    `supported: false, value: null`) is "not supported: <event>", never 0."""
    variants, baseline = an.variants, an.baseline
    mds: dict[tuple[str, str, str], MetricData] = {}
    seen: dict[tuple[str, str, str], dict[str, set[str]]] = {}   # key -> variant -> missing
    slots: dict[tuple[tuple[str, str, str], str, str], BootValues] = {}
    blocks: dict[tuple[str, str], tuple[int, int]] = {}
    for r in camp.results:
        ok, bad = blocks.get((r["workload"], r["variant"]), (0, 0))
        blocks[(r["workload"], r["variant"])] = (ok + (r["status"] == "ok"),
                                                 bad + (r["status"] != "ok"))
    for r in camp.ok:
        wl, v, bid = r["workload"], r["variant"], boot_id(r)
        for run in r["runs"]:
            if not run["included"]:
                continue
            ops = _ops(run)
            _model_rows(run, wl, v, bid, r, mds, seen, slots)
            for source, block in (("measured", run.get("perf")),):
                ev = _events(block)
                if not ev:
                    continue
                for kind, miss_ev in TLB_MEASURES:
                    for per in ("kinstr", "op"):
                        if per == "op" and ops is None:
                            continue
                        if miss_ev not in ev and (per == "op" or INSTR not in ev):
                            continue
                        key = (wl, f"{kind} misses" + ("/kinstr" if per == "kinstr" else ops[1]),
                               source)
                        missing = seen.setdefault(key, {}).setdefault(v, set())
                        need = [miss_ev] + ([INSTR] if per == "kinstr" else [])
                        bad_ev = [e for e in need if not ev.get(e, (False, None))[0]]
                        if bad_ev:
                            missing.update(bad_ev)
                            continue
                        miss = ev[miss_ev][1] or 0.0
                        val = 1000.0 * miss / ev[INSTR][1] if per == "kinstr" else miss / ops[0]
                        if per == "kinstr" and not ev[INSTR][1]:
                            missing.add(INSTR)
                            continue
                        md = mds.get(key)
                        if md is None:
                            md = mds[key] = MetricData(wl, key[1], "misses", "lower", "perf")
                        slot = slots.get((key, v, bid))
                        if slot is None:
                            slot = slots[(key, v, bid)] = BootValues(v, bid, r["block"],
                                                                     r["host"].get("name"))
                            md.boots.setdefault(v, []).append(slot)
                        slot.runs.append(val)
    comps: dict[tuple[tuple[str, str, str], str], Comparison] = {}
    for key in seen:
        md = mds.get(key) or MetricData(key[0], key[1], "misses", "lower", "perf")
        for v in variants[1:]:
            comps[(key, v)] = compare_pair(md, baseline, v, blocks, an.min_effect_pct)
    apply_families(list(comps.values()))
    for c in comps.values():
        c.family = c.family.replace("secondary", "TLB")
    rows = []
    for key in sorted(seen, key=lambda k: (k[0], k[2] != "measured", _measure_rank(k[1]), k[1])):
        wl, measure, source = key
        md = mds.get(key)
        if md is not None:
            md.screen()
        cells = []
        for v in variants:
            bs = md.boots.get(v, []) if md else []
            missing = sorted(seen[key].get(v, set()))
            if not bs:
                why = (f"not supported: {', '.join(missing)}" if missing
                       else "not measured" if (wl, v) not in blocks or blocks[(wl, v)][0]
                       else f"all {blocks[(wl, v)][1]} block(s) failed")
                cells.append({"value": "", "spread": "", "text": why, "cls": "na",
                              "change": None})
                continue
            s = summarise(bs)
            cell = {"value": f"{s.central:.4g}", "text": "", "cls": "",
                    "spread": (f"\u00b1{s.cov_boot:.1f}% between {s.n_boots} boots"
                               if finite(s.cov_boot) else f"{s.n_boots} boot(s)"),
                    "change": None}
            if v != baseline:
                cell["comparison"] = comps.get((key, v))
                cell["change"] = verdict_cell(cell["comparison"], "no comparison")
                cell["cls"] = cell["change"]["cls"] if cell["change"]["tested"] else ""
            cells.append(cell)
        rows.append({"workload": wl, "measure": measure, "source": source, "cells": cells})
    labels = sorted({r["tlb_model"]["label"] for r in camp.ok
                     if isinstance(r.get("tlb_model"), dict) and r["tlb_model"].get("label")})
    return {"baseline": baseline, "cols": variants, "rows": rows,
            "comparisons": [c for c in comps.values()],
            # "modelled: QEMU TCG, <parameters>"; several = results of different parameters
            "model_label": "; ".join(labels) if labels else None}


def tlb_matrix_text(tm: dict[str, Any], width: int = 100) -> list[str]:
    out = [f"TLB misses: Gmean of per-boot values, +-CoV between boots; % change vs "
           f"{tm['baseline']}"[:width], "(positive = fewer misses), [deciding interval]:"]
    if not tm["rows"]:
        return out + ["  no TLB counters in this campaign"]
    if tm.get("model_label"):
        out.append(f"  (modelled) rows: {tm['model_label']}"[:width])
    for r in tm["rows"]:
        out.append(f"  {r['workload']} {r['measure']}"
                   + (" (modelled)" if r["source"] == "modelled" else ""))
        for v, c in zip(tm["cols"], r["cells"]):
            if c["text"]:
                line = f"    {v:<14} {c['text']}"
            else:
                line = f"    {v:<14} {c['value']:>10} {c['spread']}"
                ch = c["change"]
                if ch and ch["tested"]:
                    line += f"  {ch['pct']} {ch['interval']} {ch['mark']}".rstrip()
                elif ch:
                    line += f"  {ch['text']}"
            out.append(line if len(line) <= width else line[:width - 1] + "~")
    return out


# ---------------------------------------------------------- modelled verdicts

def ratio_text(c: Comparison) -> tuple[str, str]:
    """A tested comparison on the log scale as the ratio new/baseline and its
    deciding interval ("x4512", "[x3105, x6556]"): walks change by orders of
    magnitude, where a % change below -100 % reads badly. Raw-scale
    comparisons (a boot with 0) keep the % change."""
    if c.scale != "log" or not finite(c.pct):
        return f"{c.pct:+.2f}%", c.interval()
    sign = 1.0 if c.better == "higher" else -1.0

    def r(pct: float) -> float:
        return 1.0 + sign * pct / 100.0
    lo, hi = sorted((r(c.lo), r(c.hi)))

    def x(v: float) -> str:
        return f"\u00d7{v:.3g}" if v < 1000 else f"\u00d7{v:,.0f}"
    return x(r(c.pct)), (f"[{x(lo)}, {x(hi)}]" if finite(lo) and finite(hi) else "n/a")


def model_matrix(camp: Campaign, an: Analysis, tm: dict[str, Any]) -> dict[str, Any] | None:
    """The first screen of a campaign with the TLB model: workload x kernel on
    each workload's modelled measures (its result's `model_measure`, one row
    each, else tlbmodel.DEFAULT_MEASURE) per unit of its work, from the tlb_matrix rows
    (same per-boot values and tests: boots are the unit). None when no
    result of the campaign has modelled counts."""
    rows_by_wl: dict[str, list[dict[str, Any]]] = {}
    for r in tm["rows"]:
        if r["source"] == "modelled":
            rows_by_wl.setdefault(r["workload"], []).append(r)
    modelled = any(isinstance(r.get("tlb_model"), dict) for r in camp.results)
    if not rows_by_wl and not modelled:
        return None
    wanted: dict[str, list[str]] = {}
    for r in camp.results:
        m = r.get("model_measure") or tlbmodel.DEFAULT_MEASURE
        wanted.setdefault(r["workload"], m if isinstance(m, list) else [m])
    cols = an.variants[1:]
    rows = []
    for wl, measure in ((wl, m) for wl in an.workloads
                        for m in wanted.get(wl, [tlbmodel.DEFAULT_MEASURE])):
        match = [r for r in rows_by_wl.get(wl, []) if _measure_name(r["measure"]) == measure]
        if not match:
            why = ("no run of this workload has modelled counts" if wl not in rows_by_wl else
                   f"the plugin's records do not count {measure}")
            rows.append({"workload": wl, "measure": measure, "base": "", "base_spread": "",
                         "cells": [{"tested": False, "text": f"not tested: {why}", "cls": "na",
                                    "value": "", "ratio": "", "interval": "", "mark": "",
                                    "boots": "", "note": ""} for _ in cols]})
            continue
        row = match[0]
        base = row["cells"][0]
        cells = []
        for v, c in zip(an.variants[1:], row["cells"][1:]):
            comp: Comparison | None = c.get("comparison")
            cell = dict(c.get("change") or verdict_cell(None, c["text"] or "no value"))
            cell["value"] = c["value"]
            cell["ratio"], cell["interval_x"] = ratio_text(comp) if comp and cell["tested"] else ("", "")
            if cell["tested"] and cell["mark"]:
                cell["mark"] = "\u25b2 fewer" if comp and comp.direction == "better" else "\u25bc more"
            if not cell["tested"] and c["text"]:
                cell["text"] = c["text"] if c["text"].startswith("not ") else f"not tested: {c['text']}"
            cells.append(cell)
        rows.append({"workload": wl, "measure": row["measure"], "base": base["value"] or "",
                     "base_spread": base["spread"] or base["text"], "cells": cells})
    return {"baseline": an.baseline, "cols": cols, "rows": rows, "label": tm.get("model_label")}


def model_matrix_text(mm: dict[str, Any], width: int = 100) -> list[str]:
    """Plain-text modelled verdict matrix: one line per workload x kernel."""
    out = [f"Modelled TLB verdicts vs {mm['baseline']}: each workload's modelled measure per unit"[:width],
           "of its work; kernel value, ratio to the baseline [deciding interval], marker only when",
           "flagged (fewer/more), boots base/new."]
    if mm.get("label"):
        out.append(f"  {mm['label']}"[:width])
    if not mm["cols"]:
        return out + ["  no comparison: only one kernel"]
    for r in mm["rows"]:
        head = f"  {r['workload']}: {r['measure']}"
        if r["base"]:
            head += f"; {mm['baseline']} {r['base']} ({r['base_spread']})"
        out.append(head[:width])
        for v, c in zip(mm["cols"], r["cells"]):
            if c["tested"]:
                line = (f"    {v:<10} {c['value']:>10} {c['ratio']:>8} {c['interval_x']:<22} "
                        f"{(c['mark'] or '-'):<8} {c['boots']}")
            else:
                line = f"    {v:<10} {(c['value'] or '') + ' ' if c.get('value') else ''}{c['text']}"
            out.append(line if len(line) <= width else line[:width - 1] + "~")
    return out
