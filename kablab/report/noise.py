"""The boots a campaign needs, from an earlier (A/A) campaign's measured noise
(the statistics: kablab/report/power.py).

Plan sizing from an A/A campaign (the two kernels are the same, so all
kernels are pooled):

    python3 -m kablab.report.noise CAMPAIGN_DIR --json            # per-metric table
    python3 -m kablab.report.noise CAMPAIGN_DIR --boots-for 3     # one number

    from kablab.report.noise import boots_needed
    boots_needed("reports/<aa-campaign>", 3.0)             # -> int or None
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from kablab.report.power import (ALPHA, EFFECTS_PCT, MAX_BOOTS, NOISE_CI, NOISE_UCB, POWER, VarComp, boots_for,
                                 boots_range, metric_noise, need_text, planning_alpha)

def noise_table(camp: Any, pooled: bool = True, effects: Sequence[float] = EFFECTS_PCT,
                power: float = POWER, alpha: float | None = None) -> dict[str, Any]:
    """The noise of one boot's value and the boots needed per (workload, metric)
    of a loaded campaign: all kernels pooled (kernel means and rounds removed;
    an A/A campaign), or the baseline only. Runs and boots are screened as the
    report screens them (kablab.report.robust): set-aside runs and outlier boots do not
    count as noise, and the table says how many there were.
    *alpha* defaults to planning_alpha(number of primary metrics)."""
    from kablab.report.stats import metric_data, screen_boots
    variants = camp.variants()
    mdata = metric_data(camp, variants[0] if variants else "")
    n_primary = sum(md.role == "primary" for md in mdata.values())
    if alpha is None:
        alpha = planning_alpha(n_primary)
    use = variants if pooled else variants[:1]
    outliers, drop = screen_boots(mdata)
    rows = []
    for (wl, name), md in mdata.items():
        vc = metric_noise(md, use, drop)
        rows.append(dict(
            workload=wl, metric=name, unit=md.unit, better=md.better, role=md.role,
            primary=md.role == "primary", derived_from=md.derived_from,
            scale=vc.scale, kernels=[v for v in use if md.boots.get(v)], n_boots=vc.n_boots,
            n_runs=vc.n_runs, runs_per_boot=_f(vc.runs_per_boot),
            sd_within=_f(vc.sd_within), sd_between=_f(vc.sd_between),
            sd_boot=_f(vc.sd_boot_est), df_boot=_f(vc.df_boot), model=vc.model,
            cov_within_pct=_f(vc.cov_within_pct), cov_between_pct=_f(vc.cov_between_pct),
            ratio=_f(vc.ratio), note=vc.note,
            runs_aside=sum(len(b.aside) for v in use for b in md.boots.get(v, [])),
            boots_needed={f"{e:g}": boots_for(vc, e, power, alpha) for e in effects},
            boots_needed_range={f"{e:g}": list(boots_range(vc, e, power, alpha))
                                for e in effects}))
    first = camp.results[0]["campaign"] if camp.results else {}
    return {"campaign": first.get("id"), "mode": first.get("mode"),
            "source": "all kernels pooled (kernel and round removed)" if pooled
            else f"baseline {variants[0] if variants else None}",
            "kernels": use, "alpha": alpha, "q": ALPHA, "n_primary": n_primary,
            "power": power, "noise_bound": NOISE_UCB, "noise_range": NOISE_CI,
            "design": "per-boot values paired by round; n boots per kernel",
            "outlier_boots": [o.evidence() for o in outliers],
            "metrics": rows}


def _f(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _load_noise(noise: Any) -> dict[str, Any]:
    if isinstance(noise, dict):
        return noise
    p = Path(noise)
    if p.is_dir():
        from kablab.results.load import load_campaign
        return noise_table(load_campaign(p))
    return json.loads(p.read_text(encoding="utf-8"))


def _row_varcomp(m: dict[str, Any]) -> VarComp:
    """A noise_table row back as a VarComp (rows without sd_boot/df_boot, from
    before boot_noise, size on the estimate)."""
    nan = float("nan")

    def g(k: str) -> float:
        v = m.get(k)
        return nan if v is None else float(v)
    return VarComp(m["n_boots"], m["n_runs"], g("runs_per_boot"), g("sd_within"),
                   g("sd_between"), m["scale"], sd_boot_est=g("sd_boot"), df_boot=g("df_boot"))


def boots_needed_by_metric(noise: Any, effect_pct: float, power: float = POWER,
                           alpha: float | None = None, runs: float | None = None,
                           metrics: str = "primary") -> dict[tuple[str, str], int | None]:
    """(workload, metric) -> boots per kernel to flag *effect_pct* % with *power*.

    *noise*: the dict printed by `python3 -m kablab.report.noise DIR --json`, a path to
    that JSON, or a campaign directory. *alpha*: two-sided level; default
    q / (number of primary metrics), the level at which the report's BH family
    flags one real change among them. *metrics*: "primary" (one per workload,
    the headline verdicts) or "tested" (primary and secondary). *runs*: runs
    per boot of the planned campaign (default: as measured).
    """
    doc = _load_noise(noise)
    if alpha is None:
        alpha = planning_alpha(sum(bool(m.get("primary")) for m in doc["metrics"]))
    out: dict[tuple[str, str], int | None] = {}
    for m in doc["metrics"]:
        if metrics == "primary" and not m.get("primary"):
            continue
        if metrics == "tested" and m.get("role") not in ("primary", "secondary"):
            continue
        out[(m["workload"], m["metric"])] = boots_for(_row_varcomp(m), effect_pct, power,
                                                      alpha, runs)
    return out


def boots_needed(noise: Any, effect_pct: float, power: float = POWER,
                 alpha: float | None = None, runs: float | None = None,
                 metrics: str = "primary") -> int | None:
    """Boots per kernel for a campaign that must flag a change of *effect_pct* %
    on every primary metric with probability *power*: the largest per-metric need
    (see boots_needed_by_metric), each sized on the upper 80 % confidence bound
    of its noise. Metrics whose noise is unknown are skipped; None when no
    metric's noise is known; ValueError when one needs more than MAX_BOOTS.
    """
    doc = _load_noise(noise)
    need = boots_needed_by_metric(doc, effect_pct, power, alpha, runs, metrics)
    rows = {(m["workload"], m["metric"]): m for m in doc["metrics"]}
    known = [n for k, n in need.items() if n is not None]
    beyond = [k for k, n in need.items()
              if n is None and math.isfinite(_row_varcomp(rows[k]).sd_boot(runs))]
    if beyond:
        wl, metric = beyond[0]
        raise ValueError(f"{wl} {metric} needs more than {MAX_BOOTS} boots per kernel to flag "
                         f"{effect_pct:g} % with {int(100 * power)} % power")
    return max(known) if known else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.report.noise", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("campaign_dir")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--baseline-only", action="store_true",
                    help="use the baseline's boots only (default: pool all kernels)")
    ap.add_argument("--boots-for", type=float, metavar="PCT",
                    help="print only the boots per kernel needed to flag PCT %% on every "
                    "primary metric (empty line when none can be sized)")
    ap.add_argument("--power", type=float, default=POWER)
    ap.add_argument("--runs", type=float, help="runs per boot of the planned campaign")
    a = ap.parse_args(argv)
    root = Path(a.campaign_dir)
    if not (root / "results").is_dir():
        print(f"kablab.report.noise: error: {root}/results is not a directory", file=sys.stderr)
        return 1
    from kablab.results.load import load_campaign
    table = noise_table(load_campaign(root), pooled=not a.baseline_only, power=a.power)
    if a.boots_for is not None:
        try:
            n = boots_needed(table, a.boots_for, a.power, runs=a.runs)
        except ValueError as e:
            print(f"kablab.report.noise: {e}", file=sys.stderr)
            return 1
        print("" if n is None else n)
        return 0
    if a.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"campaign {table['campaign']}: {table['source']}; boots per kernel for "
          f"{int(a.power * 100)} % power at alpha {table['alpha']:.3g} "
          f"(q {ALPHA} / {table['n_primary']} primary metrics), on the upper "
          f"{int(100 * NOISE_UCB)} % bound of the noise [the {int(100 * NOISE_CI)} % range]")
    for o in table["outlier_boots"]:
        print(f"outlier boot left out: {o}")
    print(f"{'workload':<20}{'metric':<22}{'role':<10}{'boots':>6}{'CoVw%':>7}{'CoVb%':>7}"
          f"{'df':>5}{'1%':>16}{'3%':>16}")
    for m in table["metrics"]:
        def f(x: float | None, w: int, p: int = 2) -> str:
            return ("n/a" if x is None else f"{x:.{p}f}").rjust(w)

        def n(e: str) -> str:
            vc = _row_varcomp(m)
            lo, hi = m["boots_needed_range"][e]
            return (f"{need_text(m['boots_needed'][e], vc)} [{need_text(lo, vc)}-"
                    f"{need_text(hi, vc)}]").rjust(16)
        print(f"{m['workload'][:19]:<20}{m['metric'][:21]:<22}{m['role'][:9]:<10}"
              f"{m['n_boots']:>6}{f(m['cov_within_pct'], 7)}{f(m['cov_between_pct'], 7)}"
              f"{f(m['df_boot'], 5, 0)}{n('1')}{n('3')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["boots_needed", "boots_needed_by_metric", "noise_table"]
