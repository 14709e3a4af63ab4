"""Inline SVG plots (matplotlib, Agg/SVG backend, text kept as escaped SVG text)."""

from __future__ import annotations

import io
import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from kablab.report.stats import Analysis, Comparison, MetricData  # noqa: E402

matplotlib.rcParams.update({
    "svg.fonttype": "none",        # real <text>, small files
    "svg.hashsalt": "kablab",      # deterministic ids
    "text.parse_math": False,      # workload names are data, not mathtext
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
})

# Kernels never get green or red (those mean better/worse in the tables).
COLORS = ["#4c72b0", "#dd8452", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    s = buf.getvalue()
    # drop the XML declaration / DOCTYPE so the SVG can be inlined in HTML
    s = s[s.index("<svg"):]
    s = re.sub(r"<metadata>.*?</metadata>", "", s, flags=re.S)
    return s


def distribution_svg(workload: str, metrics: list[MetricData], variants: list[str]) -> str:
    """Per-kernel box plot of the per-boot values (the tested unit: the geometric
    mean of a boot's runs, arithmetic when a value is <= 0) with one point per
    boot; one panel per metric of the workload."""
    n = len(metrics)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.3 * nrows), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, md in zip(axes.flat, metrics):
        present = [v for v in variants if md.boots.get(v)]
        log = all(x > 0 for bs in md.boots.values() for b in bs for x in b.runs)
        data = [[math.exp(b.value(True)) if log else b.value(False) for b in md.boots[v]]
                for v in present]
        if data:
            ax.boxplot(data, widths=0.5, showfliers=False,
                       medianprops={"color": "black"})
            for i, (v, vals) in enumerate(zip(present, data), 1):
                x = i + rng.uniform(-0.12, 0.12, len(vals))
                ax.plot(x, vals, "o", ms=3.5, alpha=0.75,
                        color=COLORS[variants.index(v) % len(COLORS)])
            ax.set_xticks(range(1, len(present) + 1), present)
        role = "" if md.role in ("primary", "secondary") else f", {md.role}"
        ax.set_title(f"{md.metric} [{md.unit}] ({md.better} is better{role})", fontsize=8.5)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(f"{workload}: one point per boot", fontsize=10)
    fig.tight_layout()
    return _svg(fig)


def forest_svg(an: Analysis) -> str:
    """% change (positive = better) with the deciding interval for every tested comparison."""
    comps: list[Comparison] = [c for c in an.comparisons
                               if c.tested and math.isfinite(c.pct)]
    if not comps:
        return ""
    h = max(2.0, 0.28 * len(comps) + 1.0)
    fig, ax = plt.subplots(figsize=(9, h))
    labels = []
    for y, c in enumerate(reversed(comps)):
        color = COLORS[an.variants.index(c.variant) % len(COLORS)]
        lo = c.lo if math.isfinite(c.lo) else c.pct
        hi = c.hi if math.isfinite(c.hi) else c.pct
        ax.errorbar([c.pct], [y], xerr=[[c.pct - lo], [hi - c.pct]], fmt="o",
                    mfc=color if c.significant else "white", color=color, capsize=3)
        labels.append(f"{c.workload[:40]} | {c.metric} | {c.variant}"
                      + (" *" if c.significant else "") + ("" if c.primary else " (2nd)"))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel(f"% change vs {an.baseline} (positive = better), FCR-adjusted interval; "
                  "filled = flagged")
    fig.tight_layout()
    return _svg(fig)
