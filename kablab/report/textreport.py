"""Fixed-width text reports: summary.txt (mmtests compare-kernels) and
summary-lkp.txt (LKP/0-day `value ±stddev% | %change | value ±stddev% | metric`).

Every line is at most WIDTH columns.
"""

from __future__ import annotations

import textwrap
from typing import Any

from kablab.report.fmt import STAT_ROWS, finite, num, pct, trunc
from kablab.report.panels import model_matrix_text, tlb_matrix_text, verdict_matrix_text
from kablab.results.rawparse import DIRECTMAP_SHOWN
from kablab.report.stats import Analysis, Comparison, Summary

WIDTH = 100
LABEL = 31          # "Gmean    metric-name" column
CELL = 22           # "     812.50 (   5.82%)"


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False) or [""]


def _stat(s: Summary, row: str) -> float:
    return {"Min": s.min, "Central": s.central, "Stddev": s.stddev, "CoeffVar": s.coeffvar,
            "Max": s.max}[row]


def row_change(row: str, base: Summary, new: Summary, better: str) -> float:
    """% change of one statistic row, positive = better (Stddev/CoeffVar: lower is better)."""
    from kablab.report.stats import pct_change
    b, v = _stat(base, row), _stat(new, row)
    return pct_change(b, v, "lower" if row in ("Stddev", "CoeffVar") else better)


def _central_cell(an: Analysis, workload: str, metric: str, variant: str) -> str:
    c = an.comparison(workload, metric, variant)
    if c is None or not (c.n_boots_base and c.n_boots_new):
        return "(    n/a )"
    if not c.tested:
        return "(    n/t )"
    mark = ("*", "*") if c.significant else ("(", ")")
    return f"{mark[0]}{pct(c.pct, 7, '+')}%{mark[1]}"


def comparison_lines(an: Analysis, workload: str) -> list[str]:
    lines: list[str] = []
    per_chunk = max(1, (WIDTH - LABEL) // CELL)
    others = an.variants[1:]
    chunks = [others[i:i + per_chunk - 1] for i in range(0, max(len(others), 1), per_chunk - 1)] \
        if per_chunk > 1 else [[]]
    metrics = [md for (wl, _), md in an.metrics.items()
               if wl == workload and md.role != "wrapper"]
    for chunk in chunks:
        cols = [an.baseline] + chunk
        lines.append(" " * LABEL + "".join(trunc(v, CELL - 1).rjust(CELL) for v in cols))
        for md in metrics:
            base = an.summaries.get((workload, md.metric, an.baseline))
            for row in STAT_ROWS + ("Boots",):
                label_stat = row
                cells = []
                for v in cols:
                    s = an.summaries.get((workload, md.metric, v))
                    if s is None:
                        cells.append("-".rjust(CELL))
                        continue
                    if row == "Boots":
                        cells.append(f"{s.n_boots:>11} {f'{s.n} runs':>10}".rjust(CELL))
                        continue
                    if row == "Central":
                        label_stat = s.central_kind
                    value = _stat(s, row)
                    if v == an.baseline:
                        ch = " " * 10
                    elif row == "Central":
                        ch = _central_cell(an, workload, md.metric, v)
                    else:
                        rc = row_change(row, base, s, md.better) if base else float("nan")
                        ch = f"({pct(rc)}%)"
                    cells.append(f"{num(value, 11)} {ch}".rjust(CELL))
                label = f"{label_stat:<9}{trunc(md.metric, LABEL - 10)}"
                lines.append(f"{label:<{LABEL}}" + "".join(cells))
        lines.append("")
    return lines


def comparison_detail(c: Comparison, head: str | None = None) -> str:
    head = head or f"  {c.variant} {c.metric} [{c.role if c.role != 'derived' else 'derived'}]: "
    if not c.tested:
        return head + f"not tested: {c.reason}"
    lvl = f"{100 * c.level:.1f}%"
    thr = f", threshold {c.min_effect_pct:.2f}%" if c.min_effect_pct else ""
    return (head + f"{c.pct:+.2f}% {c.interval()} ({lvl} interval) p {c.p:.3g} q {c.q:.3g} "
            f"{c.boots_label(names=True)}{thr} -> "
            + (c.direction.upper() if c.significant else c.reason))


def summary_text(an: Analysis, ctx: dict[str, Any]) -> str:
    out: list[str] = []
    camp = ctx["campaign"]
    out.append(trunc(f"kablab comparison - campaign {camp.get('id')} (profile "
                     f"{camp.get('profile')}, seed {camp.get('seed')})", WIDTH))
    if ctx["tcg"] or ctx.get("model_matrix") is not None:
        out += _wrap("!! " + ctx["tcg_banner"], "   ")
    for h in ctx.get("host_lines", []):
        out += _wrap(f"host {h['host']}: {h['summary']}", "   ")
    out += _wrap(f"Baseline: {an.baseline}. Boots per kernel: " + ", ".join(
        f"{v} {n}" for v, n in ctx["boots_per_kernel"].items()) + ".")
    # which build of which series version each column is, so that an old
    # campaign is not read as the current series'
    out += _wrap("Kernels: " + "; ".join(
        f"{v} build {'/'.join(k['build_keys'])} ({k['series_versions']})"
        for v, k in ctx["prov"]["kernels"].items()) + ".", "  ")
    out.append("")
    mm = ctx.get("model_matrix")
    if mm is not None:
        out.append("== modelled TLB verdicts ".ljust(WIDTH, "="))
        out += model_matrix_text(mm, WIDTH)
        out += _wrap(ctx["model_caveats"], "  ")
        out.append("")
        out += directmap_lines(ctx["directmap_rows"])
        out.append("")
    out.append(("== time verdicts (emulated) " if mm is not None else "== verdicts ").ljust(WIDTH, "="))
    out += verdict_matrix_text(ctx["verdict_matrix"], WIDTH)
    out.append("")
    if mm is None:
        out += directmap_lines(ctx["directmap_rows"])
        out.append("")
    out += _wrap("Method: " + ctx["method_note"])
    out += _wrap("Tables: Min/Stddev/CoeffVar/Max are over all runs, descriptive only, (x.xx%) vs "
                 "the baseline with positive = better; Gmean is the tested quantity (geometric "
                 "mean of per-boot geometric means), *x.xx%* = flagged, (n/t) = not tested.")
    if ctx["invalid"]:
        out.append("")
        out.append("INVALID RESULT FILES (excluded):")
        for f in ctx["invalid"]:
            out += _wrap(f"  {f.path}: {f.error}", "    ")
    for wl in an.workloads:
        out.append("")
        out.append(trunc(f"== workload: {wl} ", WIDTH).ljust(WIDTH, "=")[:WIDTH])
        if any(w == wl for (w, _) in an.metrics):
            out += comparison_lines(an, wl)
            for c in [c for c in an.comparisons if c.workload == wl and c.role != "wrapper"]:
                out += _wrap(comparison_detail(c), "    ")
                w = an.without.get((c.workload, c.metric, c.variant))
                if w is not None:
                    left = ", ".join(o.label for o in an.dropped_for(c))
                    out += _wrap(comparison_detail(w, f"    without {left}: "), "      ")
        else:
            out.append("  no successful runs")
        out += _wrap("Verdict: " + "; ".join(an.verdict(wl)), "  ")
        fails = [r for r in ctx["failed"] if r["workload"] == wl]
        for r in fails:
            f = r["failure"]
            out += _wrap(f"  FAILED {r['variant']} block {r['block']} at {f['stage']}: "
                         f"{f['reason']}", "    ")
    out += noise_lines(an, ctx)
    out += aside_lines(ctx)
    out.append("")
    out.append("== failed blocks ".ljust(WIDTH, "="))
    if not ctx["failed"]:
        out.append("  none")
    for k in ctx.get("failed_kernels", []):
        out += _wrap(f"  KERNEL {k['variant']}: all {k['blocks']} block(s) failed at "
                     f"{', '.join(k['stages'])}" + (f"; console log {k['console_log']}"
                                                    if k["console_log"] else ""), "    ")
    for r in ctx["failed"]:
        f = r["failure"]
        out += _wrap(f"  {r['variant']} / {r['workload']} / block {r['block']}: stage "
                     f"{f['stage']}, exit {f.get('exit_code')}: {f['reason']}", "    ")
        for key in ("stderr_tail", "console_tail"):
            if f.get(key):
                out.append(f"    {key}:")
                for ln in f[key].splitlines()[-5:]:
                    out.append(trunc("      " + ln, WIDTH))
    replaced = ctx.get("prov", {}).get("replaced_boots", [])
    if replaced:
        out.append("")
        out.append("== boots booted once more ".ljust(WIDTH, "="))
        for line in replaced:
            out += _wrap("  " + line, "    ")
    out.append("")
    out.append("== TLB misses ".ljust(WIDTH, "="))
    out += tlb_matrix_text(ctx["tlb_matrix"], WIDTH)
    out.append("")
    return "\n".join(line.rstrip() for line in out) + "\n"


def aside_lines(ctx: dict[str, Any]) -> list[str]:
    """Runs set aside (kablab.report.robust), as failed runs are listed."""
    rows = ctx.get("aside_rows", [])
    if not rows:
        return []
    out = ["", "== runs set aside ".ljust(WIDTH, "=")]
    out += _wrap("A run more than 5 robust SDs from its boot's median is set aside; its boot's "
                 "value is the geometric mean of the runs it keeps.")
    for r in rows:
        out += _wrap(f"  {r['variant']} {r['boot']} (round {r['round']}) {r['workload']} run "
                     f"{r['run']}: " + "; ".join(r["metrics"]), "    ")
    return out


def directmap_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Direct map per boot, after boot -> after the workload set; page-table cost =
    (ceil(DirectMap4k / 2048 kB) + ceil(DirectMap2M / 1048576 kB)) x 4 KiB."""
    out = ["== direct map per boot (after boot -> after workloads) ".ljust(WIDTH, "=")]
    out += _wrap("PT cost = (ceil(DirectMap4k/2048 kB) + ceil(DirectMap2M/1048576 kB)) x 4 KiB: "
                 "one page table per 2 MiB of 4k mappings and one per 1 GiB of 2M mappings "
                 "(not in PageTables:); /GiB = per GiB of guest RAM.")
    out.append(f"{'kernel':<12}{'boot':<9}" + "".join(f"{label:>{w}}" for _, _, label, w in DIRECTMAP_SHOWN)
               + f"{'PT KiB':>12}{'/GiB':>6}")
    if not rows:
        out.append("  no direct-map state recorded")

    def g(d: dict[str, Any], k: str, w: int) -> str:
        b, a = d["before"].get(k), d["after"].get(k)
        s = "n/a" if b is None else str(b)
        if a != b:
            s += "->" + ("n/a" if a is None else str(a))
        return s.rjust(w)
    for d in rows:
        cb, ca = d["cost_before_kib"], d["cost_after_kib"]
        cost = "n/a" if cb is None else str(cb)
        if ca != cb:
            cost += "->" + ("n/a" if ca is None else str(ca))
        pg = d["cost_per_gib_after_kib"]
        out.append(trunc(f"{trunc(d['variant'], 11):<12}{trunc(d['boot'], 8):<9}"
                         + "".join(g(d, f, w) for f, _, _, w in DIRECTMAP_SHOWN)
                         + f"{cost:>12}{'n/a' if pg is None else f'{pg:.0f}':>6}", WIDTH))
    return out


def noise_lines(an: Analysis, ctx: dict[str, Any]) -> list[str]:
    out = ["", "== noise and power (all kernels, kernel and round removed) ".ljust(WIDTH, "=")]
    out += _wrap("CoV within a boot and between boots (round-adjusted; set-aside runs and "
                 "outlier boots left out), df = degrees of freedom of the boot-level noise, "
                 "boots per kernel to flag 1 % / 3 % with 80 % power when it is the one real "
                 f"change among the primary metrics (alpha {an.plan_alpha:.3g}), sized on the "
                 f"upper {int(100 * ctx['noise_bound'])} % confidence bound of the noise "
                 f"[range over its {int(100 * ctx['noise_range'])} % interval]. Size a campaign "
                 "from an A/A one with `python3 -m kablab.report.noise <campaign> --json`.")
    out.append(f"{'workload':<18}{'metric':<20}{'role':<10}{'boots':>5}{'CoVw%':>6}{'CoVb%':>6}"
               f"{'df':>4}{'n(1%) [range]':>16}{'n(3%) [range]':>15}")
    for r in ctx["noise_rows"]:
        out.append(trunc(f"{trunc(r['workload'], 17):<18}{trunc(r['metric'], 19):<20}"
                         f"{trunc(r['role'], 9):<10}{r['boots']:>5}{r['cov_w']:>6}"
                         f"{r['cov_b']:>6}{r['df']:>4}{r['n1'].replace(chr(8211), '-'):>16}"
                         f"{r['n3'].replace(chr(8211), '-'):>15}", WIDTH))
    if ctx.get("overhead"):
        out.append("")
        out += _wrap("Runner overhead (hyperfine wall_s - harness elapsed_s, median per run; "
                     "wall_s is the wrapper's time and is not tested):")
        for wl, per in ctx["overhead"].items():
            out += _wrap(f"  {wl}: " + ", ".join(
                f"{v} {d['median_ms']:.1f} ms ({d['median_pct_of_wall']:.1f}%)"
                for v, d in per.items()), "    ")
    for c in an.comparisons:
        if c.role == "wrapper":
            out += _wrap(f"{c.workload}:" + comparison_detail(c), "    ")
    return out


def lkp_text(an: Analysis, ctx: dict[str, Any]) -> str:
    """LKP/0-day style: one section per non-baseline kernel vs the baseline.

    %change here is the raw (new - old) / old of the tested quantity (per-boot
    Gmean) as estimated by the model, as LKP prints it; `*` marks a flagged
    change, n/t a comparison that was not tested (same rule as summary.txt);
    %stddev is the CoV of the per-boot values.
    """
    out: list[str] = []
    camp = ctx["campaign"]
    out.append(trunc(f"kablab LKP-style comparison - campaign {camp.get('id')}", WIDTH))
    if ctx["tcg"] or ctx.get("model_matrix") is not None:
        out += _wrap("!! " + ctx["tcg_banner"], "   ")
    out += _wrap("%change is raw (new - old) / old like LKP (NOT better-adjusted) of the "
                 "per-boot geometric means; %stddev = CoV between boots; * = flagged (see "
                 "summary.txt: the deciding interval excludes 0); "
                 "n/t = not tested (reason in summary.txt).")
    for v in an.variants[1:]:
        out.append("")
        out.append(f"{trunc(an.baseline, 16):>16} {trunc(v, 27):>27}")
        out.append("---------------- ---------------------------")
        out.append("         %stddev     %change         %stddev")
        out.append("             \\          |                \\")
        for (wl, metric), md in an.metrics.items():
            b = an.summaries.get((wl, metric, an.baseline))
            n = an.summaries.get((wl, metric, v))
            if b is None or n is None:
                continue
            c = an.comparison(wl, metric, v)
            raw = float("nan")
            if c is not None and c.tested:
                raw = c.pct if c.better == "higher" else -c.pct

            def sd(s: Summary) -> str:
                return f"{s.cov_boot:3.0f}%" if finite(s.cov_boot) else " n/a"
            star = "*" if c is not None and c.significant else " "
            ch = f"{raw:+.1f}%" if finite(raw) else "n/t"
            head = (f"{num(b.central, 10)} \u00b1{sd(b)}  {ch:>9}{star} "
                    f"{num(n.central, 10)} \u00b1{sd(n)}  ")
            out.append(head + trunc(f"{wl}.{metric}", WIDTH - len(head)))
    return "\n".join(line.rstrip() for line in out) + "\n"
