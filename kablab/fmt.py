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


def pct(v: float | None, width: int = 7) -> str:
    if not finite(v):
        return "n/a".rjust(width)
    return f"{v:{width}.2f}"


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
