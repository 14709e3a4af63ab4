"""Did each round's boots run together? The model pairs boots by round number
(the result's `block`) and removes what differs between rounds; that removes
drift only when a round's boots ran next to each other. A block re-run after
later rounds (a resumed campaign) or a plan run kernel after kernel keeps its
round number but not its time.

Per host (boots on different hosts run side by side, and the host term is the
model's business) the results are put in the order they started (`started_at`,
then `order_index`); a boot is out of order when it started after a boot of a
later round that shares a kernel with its own round (rounds of merged campaigns,
kablab.report.compare, share none and are not compared).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

SHOW = 3        # out-of-order boots named in the warning


def _when(r: dict[str, Any]) -> tuple[int, float, int]:
    s = r.get("started_at")
    t = float("nan")
    if isinstance(s, str):
        try:
            t = datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    oi = r.get("order_index")
    return (0, t, oi if isinstance(oi, int) else 0) if t == t else (1, 0.0, oi or 0)


def _clock(r: dict[str, Any]) -> str:
    s = r.get("started_at")
    return s[11:16] if isinstance(s, str) and len(s) >= 16 else f"#{r.get('order_index')}"


def round_warnings(results: list[dict[str, Any]], boot_id: Callable[[dict[str, Any]], str]
                   ) -> list[str]:
    """One line per host whose rounds did not run together (empty: all did)."""
    kernels: dict[int, set[str]] = {}
    for r in results:
        kernels.setdefault(r["block"], set()).add(r["variant"])
    hosts: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        hosts.setdefault(str(r.get("host", {}).get("name") or "?"), []).append(r)
    out = []
    for host, rs in sorted(hosts.items()):
        first: dict[tuple[str, str], dict[str, Any]] = {}
        for r in sorted(rs, key=_when):
            first.setdefault((r["variant"], boot_id(r)), r)
        seen: list[dict[str, Any]] = []
        late = []
        for r in first.values():
            later = [s for s in seen if s["block"] > r["block"]
                     and kernels[s["block"]] & kernels[r["block"]]]
            if later:
                top = max(later, key=lambda s: s["block"])
                late.append(f"{r['variant']} {boot_id(r)} of round {r['block']} started at "
                            f"{_clock(r)}, after round {top['block']}'s {top['variant']} boot "
                            f"({_clock(top)})")
            seen.append(r)
        if late:
            more = f"; and {len(late) - SHOW} more" if len(late) > SHOW else ""
            out.append(f"host {host}: {len(late)} of {len(first)} boots ran after a later "
                       f"round's: " + "; ".join(late[:SHOW]) + more)
    return out
