"""Render the report of a campaign directory.

    PYTHONPATH=. python3 -m kablab.report CAMPAIGN_DIR

Reads CAMPAIGN_DIR/results/**/*.json and writes index.html, summary.txt,
summary-lkp.txt, results.csv and results.json into CAMPAIGN_DIR (atomically).
Invalid result files are named in the report and excluded; exit status is 0
when a report was written (even with failed blocks), 1 when nothing could be.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kablab.results.load import load_campaign
from kablab.report.render import render_campaign


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("campaign_dir")
    ap.add_argument("-o", "--out-dir", help="write outputs here instead of CAMPAIGN_DIR")
    ap.add_argument("--baseline", help="baseline variant (default: campaign.variants[0] "
                    "from meta.json, else stock)")
    ap.add_argument("--variants", help="comma-separated variant order, baseline first")
    ap.add_argument("--min-effect", type=float, default=0.0, metavar="PCT",
                    help="practical threshold: flag a change only when it also exceeds PCT %% "
                    "(default: none; the interval carries the noise)")
    args = ap.parse_args(argv)
    if not (args.min_effect >= 0 and args.min_effect < float("inf")):
        ap.error(f"--min-effect must be a number >= 0, got {args.min_effect}")
    root = Path(args.campaign_dir)
    if not (root / "results").is_dir():
        print(f"kablab.report: error: {root}/results is not a directory", file=sys.stderr)
        return 1
    camp = load_campaign(root)
    if args.variants:
        camp.override = [v for v in args.variants.split(",") if v]
    if args.baseline:
        camp.override = [args.baseline] + [v for v in (camp.override or camp.variants())
                                           if v != args.baseline]
    unknown = set(camp.override) - {r["variant"] for r in camp.results}
    if unknown and camp.results:
        print(f"kablab.report: warning: unknown variant(s) {sorted(unknown)} ignored",
              file=sys.stderr)
    for f in camp.invalid:
        print(f"kablab.report: warning: excluded invalid result {f.path}: {f.error}",
              file=sys.stderr)
    for r in camp.failed:
        print(f"kablab.report: failed block {r['variant']}/{r['workload']}/{r['block']} at "
              f"{r['failure']['stage']}: {r['failure']['reason']}", file=sys.stderr)
    paths = render_campaign(camp, args.out_dir, min_effect_pct=args.min_effect)
    for p in paths.values():
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
