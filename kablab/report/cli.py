"""Render the report of a campaign directory.

    PYTHONPATH=. python3 -m kablab.report CAMPAIGN_DIR

Reads CAMPAIGN_DIR/results/**/*.json and writes index.html, summary.txt,
summary-lkp.txt, results.csv and results.json into CAMPAIGN_DIR (atomically).
Invalid result files are named in the report and excluded; exit status is 0
when a report was written (even with failed blocks), 1 when nothing could be.

Beside them, report-inputs.sha256 holds the hash of what the report was
made from: the result files, the options, the result schema and the
package's code and template. When it matches and every output is there,
nothing is rendered again ("up to date"); --force renders all the same.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Iterable

from kablab.util import SCHEMA_PATH, atomic_write_text

# What render_campaign writes, and the hash of its inputs beside them.
OUTPUTS = ("index.html", "summary.txt", "summary-lkp.txt", "results.csv", "results.json")
INPUTS_FILE = "report-inputs.sha256"
# The code that makes the report: the whole package (statistics, loader,
# renderers, template) and the schema the loader checks results against.
PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _code_files(package_dir: Path) -> list[Path]:
    return sorted(p for p in package_dir.rglob("*")
                  if p.is_file() and p.suffix in (".py", ".j2") and "__pycache__" not in p.parts)


def inputs_digest(root: Path, options: Iterable[str], package_dir: Path = PACKAGE_DIR,
                  schema: Path = SCHEMA_PATH) -> str:
    """sha256 over everything a rendering reads: each result file (name and
    bytes), the options, the schema and every source file of the package."""
    h = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data)

    for p in sorted((root / "results").glob("**/*.json")):
        add("result:" + str(p.relative_to(root)), p.read_bytes())
    add("options", "\0".join(options).encode())
    add("schema", schema.read_bytes())
    for p in _code_files(package_dir):
        add("code:" + str(p.relative_to(package_dir)), p.read_bytes())
    return h.hexdigest()


def up_to_date(out: Path, digest: str) -> bool:
    """The report in *out* was made from these inputs and is complete."""
    try:
        recorded = (out / INPUTS_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return recorded == digest and all((out / name).is_file() for name in OUTPUTS)


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
    ap.add_argument("--force", action="store_true",
                    help="render even when the report is up to date with its inputs")
    args = ap.parse_args(argv)
    if not (args.min_effect >= 0 and args.min_effect < float("inf")):
        ap.error(f"--min-effect must be a number >= 0, got {args.min_effect}")
    root = Path(args.campaign_dir)
    if not (root / "results").is_dir():
        print(f"kablab.report: error: {root}/results is not a directory", file=sys.stderr)
        return 1
    out = Path(args.out_dir) if args.out_dir else root
    options = [f"baseline={args.baseline or ''}", f"variants={args.variants or ''}",
               f"min_effect={args.min_effect!r}"]
    digest = inputs_digest(root, options)
    if not args.force and up_to_date(out, digest):
        print(f"kablab.report: up to date: {out / 'index.html'} (its inputs are unchanged; --force renders again)")
        return 0
    # Imported here: the statistics and plotting stack take seconds to load,
    # and an up-to-date report needs none of it.
    from kablab.results.load import load_campaign
    from kablab.report.render import render_campaign
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
    # Written last: a rendering cut short leaves the old hash or none, so
    # the next run renders again.
    atomic_write_text(out / INPUTS_FILE, digest + "\n")
    for p in paths.values():
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
