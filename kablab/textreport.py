"""Fixed-width text reports: summary.txt (mmtests compare-kernels) and
summary-lkp.txt (LKP/0-day `value ±stddev% | %change | value ±stddev% | metric`).

Every line is at most WIDTH columns.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .fmt import finite, num, pct, trunc
from .stats import Analysis, Summary

WIDTH = 100
LABEL = 31          # "Hmean    metric-name" column
CELL = 22           # "     812.50 (   5.82%)"


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False) or [""]


def _stat(s: Summary, row: str) -> float:
    return {"Min": s.min, "Central": s.central, "Stddev": s.stddev, "CoeffVar": s.coeffvar,
            "Max": s.max}[row]


def row_change(row: str, base: Summary, new: Summary, better: str) -> float:
    """% change of one statistic row, positive = better (Stddev/CoeffVar: lower is better)."""
    from .stats import pct_change
    b, v = _stat(base, row), _stat(new, row)
    return pct_change(b, v, "lower" if row in ("Stddev", "CoeffVar") else better)


def comparison_lines(an: Analysis, workload: str) -> list[str]:
    lines: list[str] = []
    per_chunk = max(1, (WIDTH - LABEL) // CELL)
    others = an.variants[1:]
    chunks = [others[i:i + per_chunk - 1] for i in range(0, max(len(others), 1), per_chunk - 1)] \
        if per_chunk > 1 else [[]]
    metrics = [md for (wl, _), md in an.metrics.items() if wl == workload]
    for chunk in chunks:
        cols = [an.baseline] + chunk
        lines.append(" " * LABEL + "".join(trunc(v, CELL - 1).rjust(CELL) for v in cols))
        for md in metrics:
            base = an.summaries.get((workload, md.metric, an.baseline))
            for row in ("Min", "Central", "Stddev", "CoeffVar", "Max"):
                label_stat = row
                cells = []
                for v in cols:
                    s = an.summaries.get((workload, md.metric, v))
                    if s is None:
                        cells.append("-".rjust(CELL))
                        continue
                    if row == "Central":
                        label_stat = s.central_kind
                    value = _stat(s, row)
                    if v == an.baseline:
                        ch, sig = 0.0, False
                    else:
                        ch = row_change(row, base, s, md.better) if base else float("nan")
                        c = an.comparison(workload, md.metric, v)
                        sig = row == "Central" and c is not None and c.significant
                    mark = ("*", "*") if sig else ("(", ")")
                    cells.append(f"{num(value, 11)} {mark[0]}{pct(ch)}%{mark[1]}".rjust(CELL))
                label = f"{label_stat:<9}{trunc(md.metric, LABEL - 10)}"
                lines.append(f"{label:<{LABEL}}" + "".join(cells))
        lines.append("")
    return lines


def summary_text(an: Analysis, ctx: dict[str, Any]) -> str:
    out: list[str] = []
    camp = ctx["campaign"]
    out.append(trunc(f"kablab comparison - campaign {camp.get('id')} (profile "
                     f"{camp.get('profile')}, seed {camp.get('seed')})", WIDTH))
    if ctx["tcg"]:
        out += _wrap("!! " + ctx["tcg_banner"], "   ")
    out += _wrap(f"Baseline: {an.baseline}. Columns: value (x.xx%) = change of that "
                 "statistic vs the baseline, positive = better (Stddev/CoeffVar: lower = "
                 "better). Amean for times, Hmean for rates (units ending /s).")
    out += _wrap(f"*x.xx%* = significant: bootstrap 95% CI of the % change excludes 0 AND "
                 f"Welch's t-test p < 0.05 after Holm correction over all "
                 f"{len(an.comparisons)} comparisons of this report. Mann-Whitney U "
                 "(Holm-corrected) is given beside it below.")
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
            for c in [c for c in an.comparisons if c.workload == wl]:
                ci = (f"[{c.ci_lo:+.2f}, {c.ci_hi:+.2f}]" if finite(c.ci_lo) else "[n/a]")
                wp = f"{c.welch_p_holm:.3g}" if finite(c.welch_p_holm) else "n/a"
                mp = f"{c.mw_p_holm:.3g}" if finite(c.mw_p_holm) else "n/a"
                out += _wrap(f"  {c.variant} {c.metric}: {c.pct:+.2f}% CI95 {ci} "
                             f"Welch p(Holm) {wp}  MW p(Holm) {mp}"
                             + ("  SIGNIFICANT" if c.significant else ""), "    ")
        else:
            out.append("  no successful runs")
        out += _wrap("Verdict: " + "; ".join(an.verdict(wl)), "  ")
        fails = [r for r in ctx["failed"] if r["workload"] == wl]
        for r in fails:
            f = r["failure"]
            out += _wrap(f"  FAILED {r['variant']} block {r['block']} at {f['stage']}: "
                         f"{f['reason']}", "    ")
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
    out.append("")
    out.append("== TLB counters (perf stat means; n/a = not supported, no PMU) ".ljust(WIDTH, "="))
    out.append(f"{'workload':<22}{'kernel':<10}{'dTLB-loads':>13}{'dTLB-misses':>13}{'rate':>8}"
               f"{'iTLB-loads':>13}{'iTLB-misses':>13}{'rate':>8}")
    for t in ctx.get("tlb", []):
        for r in t["rows"]:
            c = [x["text"].replace("n/a (no PMU)", "n/a").replace(" %", "%") for x in r["cells"]]
            out.append(trunc(f"{trunc(t['workload'], 21):<22}{trunc(r['variant'], 9):<10}"
                             f"{c[0]:>13}{c[1]:>13}{c[2]:>8}{c[3]:>13}{c[4]:>13}{c[5]:>8}",
                             WIDTH))
    out.append("")
    out.append("== direct map (after block; cost = (level2+level3 splits) x 4 KiB) ".ljust(
        WIDTH, "="))
    out.append(f"{'workload':<22}{'kernel':<10}{'blk':>4}{'4k kB':>11}{'2M kB':>11}"
               f"{'1G kB':>11}{'l2spl':>7}{'l3spl':>7}{'PT kB':>8}{'cost KiB':>9}")
    for d in ctx["directmap_rows"]:
        a = d["after"]

        def g(k: str, w: int) -> str:
            v = a.get(k)
            return ("n/a" if v is None else str(v)).rjust(w)
        cost = "n/a" if d["cost_after_kib"] is None else str(d["cost_after_kib"])
        out.append(trunc(f"{trunc(d['workload'], 21):<22}{trunc(d['variant'], 9):<10}"
                         f"{d['block']:>4}{g('DirectMap4k', 11)}{g('DirectMap2M', 11)}"
                         f"{g('DirectMap1G', 11)}{g('direct_map_level2_splits', 7)}"
                         f"{g('direct_map_level3_splits', 7)}{g('PageTables', 8)}{cost:>9}",
                         WIDTH))
    return "\n".join(line.rstrip() for line in out) + "\n"


def lkp_text(an: Analysis, ctx: dict[str, Any]) -> str:
    """LKP/0-day style: one section per non-baseline kernel vs the baseline.

    %change here is the raw (new - old) / old, as LKP prints it; a trailing
    `*` marks a significant change (same rule as summary.txt).
    """
    out: list[str] = []
    camp = ctx["campaign"]
    out.append(trunc(f"kablab LKP-style comparison - campaign {camp.get('id')}", WIDTH))
    if ctx["tcg"]:
        out += _wrap("!! " + ctx["tcg_banner"], "   ")
    out += _wrap("%change is raw (new - old) / old like LKP (NOT better-adjusted); "
                 "* = significant (bootstrap CI excludes 0 and Holm-corrected Welch p < 0.05).")
    name_w = WIDTH - 52
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
            raw = (n.central - b.central) / abs(b.central) * 100 if b.central else float("nan")

            def sd(s: Summary) -> str:
                return f"{s.coeffvar:3.0f}%" if finite(s.coeffvar) else " n/a"
            star = "*" if c is not None and c.significant else " "
            ch = f"{raw:+.1f}%" if finite(raw) else "n/a"
            out.append(f"{num(b.central, 10)} \u00b1{sd(b)}  {ch:>9}{star} "
                       f"{num(n.central, 10)} \u00b1{sd(n)}  {trunc(f'{wl}.{metric}', name_w)}")
    return "\n".join(line.rstrip() for line in out) + "\n"
