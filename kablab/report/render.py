"""Render a loaded campaign: index.html, summary.txt, summary-lkp.txt, results.csv,
results.json — all written atomically into the campaign directory."""

from __future__ import annotations

import csv
import io
import shlex
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2

from kablab import __version__
from kablab.remote import doctor
from kablab.remote import hostnoise
from kablab.report.fmt import STAT_ROWS, count, finite, num
from kablab.results.load import Campaign
from kablab.report.power import NOISE_CI, NOISE_UCB, need_text
from kablab.report.panels import model_matrix, tlb_matrix, verdict_matrix
from kablab.report.plots import distribution_svg, forest_svg
from kablab.results.rawparse import DIRECTMAP_SHOWN
from kablab.report.stats import (METHOD_NOTE, TLB_EVENTS, Analysis, _clean, analyse, boot_id, pct_change,
                    perf_summary)
from kablab.report.textreport import lkp_text, row_change, summary_text
from kablab.util import atomic_write_json, atomic_write_text

TCG_BANNER = ("Emulated CPU (TCG): timings do not reflect hardware TLB behaviour; "
             "direct-map state is real")
MODEL_BANNER = ("Modelled TLB, emulated time: the TLB figures come from the TLB model (counted "
                "on each guest's own page tables); timings are TCG emulation; direct-map "
                "state is real")
# What a reader of modelled figures must know (tlbmodel/README.md, the review's
# caveats), in one paragraph under the modelled verdicts.
MODEL_CAVEATS = (
    "Modelled, not measured: a Golden Cove-like core (the parameters above) counts the "
    "translations, L1 misses and page walks (STLB misses) of the architecturally executed "
    "kernel-half accesses of one vCPU (no SMT sibling shares its TLB), under QEMU TCG with "
    "-icount, on guests booted with "
    "nokaslr no5lvl nopcid norandmaps. No speculation, no TLB prefetch, no walk cost: walks "
    "are not comparable with perf's dTLB-load-misses, and the model gives no cycles. Compare "
    "kernels under one parameter set; absolute values depend on the geometry. L1 misses "
    "depend on the L1 geometry and include user-store pressure: read walks first. "
    "\"Kernel\" and \"user\" are the two halves of the address space, not the CPU's "
    "privilege level; user translations are taken as 4k. Per-kinstr rows count each TCG "
    "`rep` iteration as one instruction (not MPKI). Each run's window spans the whole "
    "workload process (and perf), so counts are per unit of the work the workload reports, "
    "with everything else the guest did meanwhile. The model starts empty when a boot's first "
    "block starts (the boot itself runs unmodelled); warm-up runs warm it. Boots are the unit, "
    "as for times. Under "
    "-icount the guest's clock advances by instructions: its timings follow the instructions "
    "each kernel executes, not any speed.")
DM_FIELDS = tuple(f for f, *_ in DIRECTMAP_SHOWN)
DM_LABELS = {f: label for f, label, *_ in DIRECTMAP_SHOWN}
CSV_FIELDS = ("campaign", "variant", "workload", "block", "order_index", "host", "accel",
              "run_index", "exit_code", "included", "source", "metric", "value", "unit",
              "better", "supported")


def nz(v: Any, fmt: str | None = None) -> str:
    """A value for a cell: "n/a" for None/NaN (never "None"), else fmt % v or str(v)."""
    if v is None or (isinstance(v, float) and not finite(v)):
        return "n/a"
    return fmt % v if fmt else str(v)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, finalize=lambda v: "n/a" if v is None else v)
    env.filters["num"] = num
    env.filters["nz"] = nz
    env.filters["count"] = count
    return env


PT_PAGE_KIB = 4


def dm_cost_kib(state: dict[str, Any]) -> int | None:
    """Page-table memory the direct map costs, KiB: one 4 KiB page table (PTE page)
    maps 2 MiB of 4k pages and one (PMD page) maps 1 GiB of 2M pages, so
    ceil(DirectMap4k / 2048 kB) + ceil(DirectMap2M / 1048576 kB) pages x 4 KiB.
    1G mappings live in the PUD pages, shared with the rest of the kernel: not
    counted. /proc/meminfo `PageTables:` does not include these pages. None when
    DirectMap4k and DirectMap2M are both unknown."""
    k4, m2 = state.get("DirectMap4k"), state.get("DirectMap2M")
    if k4 is None and m2 is None:
        return None
    pages = -(-(k4 or 0) // 2048) + -(-(m2 or 0) // 1048576)
    return pages * PT_PAGE_KIB


def directmap_rows(camp: Campaign) -> list[dict[str, Any]]:
    """One row per boot (variant, boot): the state after boot (the first block's
    `directmap.before`) and after the workload set (the last block's
    `directmap.after`), blocks ordered by order_index; the page-table cost of
    each and per GiB of guest RAM (guest.memory_mib)."""
    variants = camp.variants()
    boots: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in camp.results:
        boots.setdefault((r["variant"], boot_id(r)), []).append(r)
    rows = []
    for (variant, bid), rs in boots.items():
        rs.sort(key=lambda r: (r.get("order_index") is None, r.get("order_index") or 0,
                               r.get("started_at") or "", r["workload"]))
        b, a = rs[0]["directmap"]["before"], rs[-1]["directmap"]["after"]
        if all(v is None for v in list(b.values()) + list(a.values())):
            continue
        mems = {r["guest"].get("memory_mib") for r in rs} - {None}
        mem = mems.pop() if len(mems) == 1 else None
        cb, ca = dm_cost_kib(b), dm_cost_kib(a)

        def per_gib(c: int | None) -> float | None:
            return None if c is None or not mem else c / (mem / 1024.0)
        rows.append({"variant": variant, "boot": bid, "round": min(r["block"] for r in rs),
                     "blocks": len(rs), "failed": sum(r["status"] != "ok" for r in rs),
                     "workloads": [r["workload"] for r in rs], "memory_mib": mem,
                     "before": b, "after": a, "cost_before_kib": cb, "cost_after_kib": ca,
                     "cost_per_gib_before_kib": per_gib(cb),
                     "cost_per_gib_after_kib": per_gib(ca)})
    rank = {v: i for i, v in enumerate(variants)}
    rows.sort(key=lambda d: (rank.get(d["variant"], len(rank)), d["variant"], d["round"],
                             d["boot"]))
    return rows


def _fmt_pct(v: float | None) -> str:
    return f"{v:+.2f}" if finite(v) else "n/a"


def central_change(an: Analysis, wl: str, metric: str, variant: str) -> tuple[str, str]:
    """(text, css class) of the change on the central (Gmean) row: the tested
    estimate, *starred* when flagged; n/t when not tested; n/a without a comparison."""
    c = an.comparison(wl, metric, variant)
    if c is None or not (c.n_boots_base and c.n_boots_new):
        return "(n/a)", ""
    if not c.tested:
        return "(n/t)", ""
    if c.significant:
        return f"*{c.pct:+.2f}%*", f"sig-{c.direction}"
    return f"({c.pct:+.2f}%)", ""


def workload_sections(an: Analysis, camp: Campaign) -> list[dict[str, Any]]:
    sections = []
    for wl in an.workloads:
        # the workload's own measurements; hyperfine's wrapper wall_s is in the overhead section
        metrics = [md for (w, _), md in an.metrics.items() if w == wl and md.role != "wrapper"]
        tables = []
        for md in metrics:
            base = an.summaries.get((wl, md.metric, an.baseline))
            rows = []
            for row in STAT_ROWS:
                label = row
                cells = []
                for v in an.variants:
                    s = an.summaries.get((wl, md.metric, v))
                    if s is None:
                        cells.append({"value": "-", "change": "", "cls": "missing"})
                        continue
                    if row == "Central":
                        label = s.central_kind
                    value = {"Min": s.min, "Central": s.central, "Stddev": s.stddev,
                             "CoeffVar": s.coeffvar, "Max": s.max}[row]
                    if v == an.baseline:
                        ch, cls = "", ""
                    elif row == "Central":
                        ch, cls = central_change(an, wl, md.metric, v)
                    else:
                        rc = row_change(row, base, s, md.better) if base else float("nan")
                        ch, cls = f"({rc:+.2f}%)" if finite(rc) else "(n/a)", ""
                    cells.append({"value": num(value), "change": ch, "cls": cls})
                rows.append({"label": label, "cells": cells})
            cov = [an.summaries.get((wl, md.metric, v)) for v in an.variants]
            tables.append({
                "metric": md.metric, "unit": md.unit, "better": md.better, "source": md.source,
                "role": md.role if md.role != "derived" else f"derived from {md.derived_from}",
                "rows": rows,
                "n": [f"{s.n_boots} / {s.n}" if s else "0" for s in cov],
                "cov_boot": [f"{s.cov_boot:.2f}" if s and finite(s.cov_boot) else "n/a"
                             for s in cov]})
        comps = [{
            "variant": c.variant, "metric": c.metric,
            "role": c.role if c.role != "derived" else "derived",
            "n": (f"{c.n_used_base}/{c.n_used_new}" if c.tested
                  else f"{c.n_boots_base}/{c.n_boots_new}")
                 + (f" (unpaired, not used: {', '.join(c.unpaired)})" if c.unpaired else ""),
            "runs": f"{c.n_runs_base}/{c.n_runs_new}",
            "pct": (_fmt_pct(c.pct) + "%") if c.tested else "n/t",
            "interval": c.interval(),
            "level": f"{100 * c.level:.1f}%" if finite(c.level) else "",
            "model": c.model, "p": _p(c.p), "q": _p(c.q), "family": c.family,
            "threshold": f"{c.min_effect_pct:.2f}%" if c.min_effect_pct else "none",
            "mde": f"\u00b1{c.mde_pct:.1f}%" if finite(c.mde_pct) else "n/a",
            "decision": c.decision(), "tested": c.tested,
            "cls": f"sig-{c.direction}" if c.significant else ("na" if not c.tested else ""),
        } for c in an.comparisons if c.workload == wl and c.role != "wrapper"]
        verdict = an.verdict(wl)
        sections.append({
            "name": wl, "anchor": f"wl{len(sections)}", "tables": tables, "comparisons": comps,
            "verdict": verdict, "has_sig": an.has_flag(wl),
            "primary": an.primaries.get(wl),
            "svg": distribution_svg(wl, metrics, an.variants) if metrics else "",
            "failed": [r for r in camp.failed if r["workload"] == wl],
            "without": [w for w in without_rows(an) if w["workload"] == wl],
            "aside": [a for a in aside_rows(an) if a["workload"] == wl],
        })
    return sections


def without_rows(an: Analysis) -> list[dict[str, Any]]:
    """The verdicts again without the outlier boots, one row per comparison they touch."""
    rows = []
    for c in an.comparisons:
        w = an.without.get((c.workload, c.metric, c.variant))
        if w is None:
            continue
        rows.append({"workload": c.workload, "metric": c.metric, "variant": c.variant,
                     "left_out": ", ".join(o.label for o in an.dropped_for(c)),
                     "with": (f"{c.pct:+.2f}% {c.interval()} "
                              + (c.direction if c.significant else "no clear change")),
                     "without": (f"{w.pct:+.2f}% {w.interval()} "
                                 + (w.direction if w.significant else "no clear change"))
                     if w.tested else f"not tested: {w.reason}",
                     "boots": w.boots_label(),
                     "cls": f"sig-{w.direction}" if w.significant else ""})
    return rows


def aside_rows(an: Analysis) -> list[dict[str, Any]]:
    """Runs set aside, one row per (boot, workload, run) with the metrics that set it aside."""
    rows: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for a in an.runs_aside:
        key = (a.variant, a.boot, a.workload, a.run)
        row = rows.setdefault(key, {"variant": a.variant, "boot": a.boot, "round": a.round,
                                    "workload": a.workload, "run": a.run, "metrics": []})
        row["metrics"].append(f"{a.metric} {num(a.value)} (boot median {num(a.boot_median)}, "
                              f"{a.z:.0f} robust SDs)")
    rank = {v: i for i, v in enumerate(an.variants)}
    return sorted(rows.values(), key=lambda r: (rank.get(r["variant"], 99), r["round"],
                                                r["boot"], r["workload"], r["run"]))


def noise_rows(an: Analysis) -> list[dict[str, Any]]:
    rows = []
    for (wl, name), vc in an.noise.items():
        md = an.metrics[(wl, name)]
        if md.role == "wrapper":       # hyperfine's wrapper time: provenance/overhead only
            continue
        need = an.boots_needed.get((wl, name), {})
        rng = an.boots_range.get((wl, name), {})

        def f(x: float, p: int = 2) -> str:
            return f"{x:.{p}f}" if finite(x) else "n/a"

        def n(e: str) -> str:
            if not need:
                return ""
            lo, hi = rng.get(e, (None, None))
            return (f"{need_text(need[e], vc)} [{need_text(lo, vc)}\u2013"
                    f"{need_text(hi, vc)}]")
        rows.append({"workload": wl, "metric": name, "role": md.role,
                     "boots": vc.n_boots, "runs": f(vc.runs_per_boot, 1),
                     "cov_w": f(vc.cov_within_pct), "cov_b": f(vc.cov_between_pct),
                     "ratio": f(vc.ratio, 1), "df": f(vc.df_boot, 0),
                     "n1": n("1"), "n3": n("3"),
                     "note": "; ".join(x for x in (vc.model, vc.note) if x)
                     if md.tested else f"{md.role}, not tested"})
    return rows


def _p(p: float) -> str:
    return f"{p:.3g}" if finite(p) else "n/a"


def tlb_tables(an: Analysis, camp: Campaign) -> list[dict[str, Any]]:
    ps = perf_summary(camp)
    cols = ["dTLB-loads", "dTLB-load-misses", "dTLB-miss-rate",
            "iTLB-loads", "iTLB-load-misses", "iTLB-miss-rate"]
    out = []
    for wl in an.workloads:
        per_var = ps.get(wl)
        if not per_var:
            continue
        base = per_var.get(an.baseline, {})
        extra = sorted({e for cells in per_var.values() for e in cells
                        if e not in cols and e not in TLB_EVENTS})
        rows = []
        for v in an.variants:
            cells = per_var.get(v)
            if cells is None:
                continue

            def cell(e: str) -> dict[str, str]:
                pc = cells.get(e)
                val = pc.mean if pc else None
                txt = (f"{val:.3f} %" if e.endswith("rate") and val is not None else count(val))
                b = base.get(e)
                ch = ""
                if v != an.baseline and val is not None and b is not None and b.mean:
                    ch = f"({pct_change(b.mean, val, 'lower'):+.2f}%)"
                return {"text": txt, "change": ch, "na": val is None}
            rows.append({"variant": v, "cells": [cell(e) for e in cols],
                         "extra": [cell(e) for e in extra]})
        out.append({"workload": wl, "cols": cols, "extra_cols": extra, "rows": rows})
    return out


VERSION_KEYS = {"QEMU": ("qemu_version", "qemu"), "libvirt": ("libvirt_version", "libvirt")}


def _str(v: Any) -> str:
    return "n/a" if v is None or v == "" else str(v)


def _versions(r: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for block in ("host", "tools"):
        for k in keys:
            v = r.get(block, {}).get(k)
            if v:
                return str(v)
    return None


def provenance(camp: Campaign, an: Analysis) -> dict[str, Any]:
    """Per kernel: release, build key, series versions and patch sha256s, Kconfig lines, config hash,
    the cmdline the guest saw (`guest.cmdline`; build.json has no cmdline), uname;
    host, accel, QEMU and libvirt versions where the results carry them; the
    binaries' sha256. Missing values read "n/a", never "None"."""
    kernels = {}
    for v in an.variants:
        rs = [r for r in camp.results if r["variant"] == v]
        k = next((r["kernel"] for r in rs if r["kernel"]), {})
        kernels[v] = {
            "release": _str(k.get("release")),
            "source": " ".join(x for x in (k.get("source_package"), k.get("source_version")) if x)
            or "n/a",
            # recorded since grouped v3; older builds say so instead of guessing
            "series_versions": ", ".join(f"{name} {ver}" for name, ver in (k.get("series_versions") or {}).items())
            or "series versions not recorded (built before kbuild recorded them)",
            "series": [{"name": f"{_str(p.get('series'))}/{_str(p.get('file'))}",
                        "sha256": _str(p.get("sha256"))} for p in k.get("series") or []],
            "kconfig": list(k.get("kconfig") or []),
            "config": f"{_str(k.get('config_profile'))}, sha256 {_str(k.get('config_sha256'))}",
            "compiler": _str(k.get("compiler")),
            "guest_cmdlines": sorted({r["guest"].get("cmdline") for r in rs
                                      if r["guest"].get("cmdline")}) or ["n/a"],
            "uname": sorted({" ".join(x for x in (r["guest"].get("uname_r"),
                                                  r["guest"].get("uname_v")) if x)
                             for r in rs if r["guest"].get("uname_r")}) or ["n/a"],
            "build_keys": sorted({_str(r["kernel"].get("key")) for r in rs}),
        }
    binaries: dict[str, set[str]] = {}
    argvs: dict[str, set[str]] = {}
    replaced = sorted({(r["variant"], _str(r["guest"].get("boot")), _str(r["host"].get("name")),
                        int(lost.get("boot", 0)), _str(lost.get("libvirt_state")),
                        _str(lost.get("console_log_campaign")))
                       for r in camp.results for lost in r["guest"].get("emulator_lost") or []})
    for r in camp.results:
        binaries.setdefault(r["workload"], set()).add(_str(r["binary"].get("sha256")))
        # the argv as the guest ran it (a list, never split by a shell),
        # quoted only for reading
        argvs.setdefault(r["workload"], set()).add(shlex.join(r["binary"].get("args") or []))

    def uniq(f) -> list[str]:  # type: ignore[no-untyped-def]
        return sorted({_str(f(r)) for r in camp.results}) or ["n/a"]
    order = sorted(camp.results, key=lambda r: (r.get("order_index") is None,
                                                r.get("order_index") or 0))
    dates = [d for r in camp.results for d in (r.get("started_at"), r.get("finished_at")) if d]
    return {
        "kernels": kernels,
        "binaries": {wl: sorted(s) for wl, s in sorted(binaries.items())},
        "argvs": {wl: sorted(s) for wl, s in sorted(argvs.items())},
        "accel": uniq(lambda r: r["host"].get("accel")),
        "host_cpu": uniq(lambda r: r["host"].get("cpu_model")),
        "host_kernel": uniq(lambda r: r["host"].get("kernel")),
        "hosts": uniq(lambda r: r["host"].get("name")),
        "versions": {name: uniq(lambda r, keys=keys: _versions(r, keys))
                     for name, keys in VERSION_KEYS.items()},
        "guest": uniq(lambda r: ", ".join(f"{k}={_str(r['guest'].get(k))}" for k in
                                          ("vcpus", "memory_mib", "machine", "cpu",
                                           "memory_backing", "vcpu_pinning"))),
        "tools": uniq(lambda r: f"{_str(r['tools'].get('hyperfine'))}; "
                                f"{_str(r['tools'].get('perf'))}"),
        "runner": uniq(lambda r: ", ".join(f"{k}={_str(r['runner'].get(k))}" for k in
                                           ("runs", "warmup", "timeout_s"))),
        "seeds": uniq(lambda r: r["campaign"].get("seed")),
        # boots that replaced one whose emulator ended while it booted
        "replaced_boots": [f"{v} boot {b} on {h} replaced boot {lb}: its QEMU ended while the kernel "
                           f"booted (libvirt: {st}; console {log})" for v, b, h, lb, st, log in replaced],
        "first": min(dates) if dates else "n/a", "last": max(dates) if dates else "n/a",
        "order": [{"order_index": _str(r.get("order_index")), "variant": r["variant"],
                   "workload": r["workload"], "block": r["block"], "status": r["status"],
                   "host": _str(r["host"].get("name")), "accel": _str(r["host"].get("accel")),
                   "started_at": _str(r.get("started_at")),
                   "finished_at": _str(r.get("finished_at")),
                   "file": r["_file"], "warnings": r["collect"]["warnings"]} for r in order],
    }


def tidy_rows(camp: Campaign) -> list[dict[str, Any]]:
    rows = []
    for r in camp.results:
        common = {"campaign": r["campaign"].get("id"), "variant": r["variant"],
                  "workload": r["workload"], "block": r["block"],
                  "order_index": r.get("order_index"), "host": r["host"].get("name"),
                  "accel": r["host"].get("accel")}
        for run in r["runs"]:
            base = dict(common, run_index=run["index"], exit_code=run["exit_code"],
                        included=run["included"] and r["status"] == "ok")
            rows.append(dict(base, source="hyperfine", metric="wall_s", value=run["wall_s"],
                             unit="s", better="lower", supported=run["wall_s"] is not None))
            for name, m in run["metrics"].items():
                rows.append(dict(base, source="harness", metric=name, value=m["value"],
                                 unit=m["unit"], better=m["better"],
                                 supported=m["value"] is not None))
            for name, p in run["perf"].items():
                rows.append(dict(base, source="perf", metric=name, value=p["value"],
                                 unit=p["unit"], better="lower", supported=p["supported"]))
    return rows


def csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row[k] is None else row[k]) for k in CSV_FIELDS})
    return buf.getvalue()


def failed_kernels(camp: Campaign) -> list[dict[str, Any]]:
    """Variants without a single good block (e.g. a kernel that panics at
    boot): named at the top of the report, with the first failure's log."""
    out = []
    for variant in sorted({r["variant"] for r in camp.results}):
        mine = [r for r in camp.results if r["variant"] == variant]
        if any(r["status"] == "ok" for r in mine):
            continue
        first = min(mine, key=lambda r: (r["block"], r["_file"]))["failure"] or {}
        out.append({"variant": variant, "blocks": len(mine),
                    "stages": sorted({(r["failure"] or {}).get("stage", "?") for r in mine}),
                    "reason": first.get("reason"), "console_log": first.get("console_log")})
    return out


def build_context(camp: Campaign, an: Analysis) -> dict[str, Any]:
    first = camp.results[0]["campaign"] if camp.results else {}
    tcg = any(r["host"].get("accel") == "tcg" for r in camp.results)
    excluded = [{"variant": r["variant"], "workload": r["workload"], "block": r["block"],
                 "index": run["index"], "exit_code": run["exit_code"],
                 "reason": run["exclude_reason"]}
                for r in camp.ok for run in r["runs"] if not run["included"]]
    return {
        "campaign": first, "generated_at": datetime.now(timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%SZ"), "version": __version__,
        "tcg": tcg, "tcg_banner": TCG_BANNER, "model_caveats": MODEL_CAVEATS,
        "baseline": an.baseline, "variants": an.variants,
        "n_comparisons": len(an.comparisons), "invalid": camp.invalid,
        "method_note": METHOD_NOTE, "noise_rows": noise_rows(an),
        "overhead": an.overhead, "wrapper_rows": wrapper_rows(an),
        "boots_per_kernel": boots_per_kernel(an), "plan_alpha": an.plan_alpha,
        "noise_bound": NOISE_UCB, "noise_range": NOISE_CI, "min_effect_pct": an.min_effect_pct,
        "aside_rows": aside_rows(an), "without_rows": without_rows(an),
        "failed": camp.failed, "excluded": excluded, "directmap_rows": directmap_rows(camp),
        "failed_kernels": failed_kernels(camp),
        # make doctor's verdict per host and the host noise per boot (provenance)
        "host_lines": doctor.host_lines(camp.results),
        "noise_boot_rows": hostnoise.boot_rows(camp.results, boot_id),
        "dm_fields": DM_FIELDS, "dm_labels": DM_LABELS, "n_results": len(camp.results),
    }


def wrapper_rows(an: Analysis) -> list[dict[str, Any]]:
    """hyperfine's wall_s per workload and kernel (Gmean of per-boot values): the
    runner wrapper's time, provenance only, never tested."""
    rows = []
    for (wl, name), md in an.metrics.items():
        if md.role != "wrapper":
            continue
        cells = []
        for v in an.variants:
            s = an.summaries.get((wl, name, v))
            cells.append("n/a" if s is None else f"{num(s.central)} s ({s.n_boots} boots)")
        rows.append({"workload": wl, "cells": cells})
    return rows


def boots_per_kernel(an: Analysis) -> dict[str, str]:
    """variant -> boots with a value (range over the workloads' primary metrics)."""
    out = {}
    for v in an.variants:
        ns = [s.n_boots for (wl, m, var), s in an.summaries.items()
              if var == v and an.primary_metric(wl) == m]
        out[v] = "0" if not ns else (str(min(ns)) if min(ns) == max(ns)
                                     else f"{min(ns)}-{max(ns)}")
    return out


def render_campaign(camp: Campaign, out_dir: str | Path | None = None,
                    min_effect_pct: float = 0.0) -> dict[str, Path]:
    """*min_effect_pct*: the user's practical threshold (kablab.report.stats.analyse)."""
    out = Path(out_dir or camp.root)
    an = analyse(camp, min_effect_pct=min_effect_pct)
    ctx = build_context(camp, an)
    sections = workload_sections(an, camp)
    ctx["verdict_matrix"] = verdict_matrix(an, {s["name"]: s["anchor"] for s in sections})
    ctx["tlb_matrix"] = tlb_matrix(camp, an)
    ctx["model_matrix"] = model_matrix(camp, an, ctx["tlb_matrix"])
    if ctx["model_matrix"] is not None:
        ctx["tcg_banner"] = MODEL_BANNER
        ctx["host_lines"] = doctor.host_lines(camp.results, modelled=True)
    ctx.update({"sections": sections, "forest": forest_svg(an),
                "tlb": tlb_tables(an, camp), "prov": provenance(camp, an),
                "verdicts": [(wl, an.verdict(wl)) for wl in an.workloads]})
    html = _env().get_template("report.html.j2").render(**ctx)
    rows = tidy_rows(camp)
    paths = {name: out / name for name in ("index.html", "summary.txt", "summary-lkp.txt",
                                          "results.csv", "results.json")}
    atomic_write_text(paths["index.html"], html)
    atomic_write_text(paths["summary.txt"], summary_text(an, ctx))
    atomic_write_text(paths["summary-lkp.txt"], lkp_text(an, ctx))
    atomic_write_text(paths["results.csv"], csv_text(rows))
    merged = {
        "schema_version": 1, "generated_at": ctx["generated_at"], "kablab_version": __version__,
        "campaign": ctx["campaign"], "baseline": an.baseline, "variants": an.variants,
        "workloads": an.workloads, "tcg": ctx["tcg"],
        "invalid_files": [{"path": f.path, "error": f.error} for f in camp.invalid],
        "failed_blocks": [{"variant": r["variant"], "workload": r["workload"],
                           "block": r["block"], "file": r["_file"], "failure": r["failure"]}
                          for r in camp.failed],
        "analysis": an.to_json(),
        "directmap": ctx["directmap_rows"],
        "tlb": {"rows": [{"workload": r["workload"], "measure": r["measure"],
                          "source": r["source"]} for r in ctx["tlb_matrix"]["rows"]],
                "comparisons": [dict(_clean(asdict(c)), n_boots=c.n_boots)
                                for c in ctx["tlb_matrix"]["comparisons"]]},
        "rows": rows,
        "results": [dict({k: v for k, v in r.items() if k != "_file"}, file=r["_file"])
                    for r in camp.results],
    }
    atomic_write_json(paths["results.json"], merged)
    return paths
