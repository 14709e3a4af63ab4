"""Number formatting shared by the text and HTML reports."""

from __future__ import annotations

import math

STAT_ROWS = ("Min", "Central", "Stddev", "CoeffVar", "Max")


def finite(v: float | None) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def num(v: float | None, width: int = 0) -> str:
    """mmtests-like value: 2 decimals, 4 for small values, exponent for huge ones."""
    if not finite(v):
        s = "nan"
    elif v != 0 and (abs(v) >= 1e7 or abs(v) < 1e-3):
        s = f"{v:.4e}"
    elif abs(v) < 10:
        s = f"{v:.4f}"
    else:
        s = f"{v:.2f}"
    return s.rjust(width) if width else s


def pct(v: float | None, width: int = 7, sign: str = "") -> str:
    """A % change in at most WIDTH columns: 2 decimals, fewer as it grows, an
    exponent past that (a tiny baseline Stddev turns a small change into
    thousands of %, and the text reports have fixed columns). sign="+" shows it."""
    if not finite(v):
        return "n/a".rjust(width)
    for spec in (".2f", ".1f", ".0f", ".0e"):
        s = f"{v:{sign}{width}{spec}}"
        if len(s) <= width:
            return s
    return s


def count(v: float | None) -> str:
    """Counter value for the perf tables: "not supported" when perf reported
    <not supported>/<not counted> (never 0)."""
    if v is None:
        return "not supported"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def trunc(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(0, width - 1)] + "~"
