"""One report over two campaigns' results, with the same statistics.

    python3 -m kablab.report.compare A_DIR B_DIR --out OUT_DIR [--baseline KERNEL]

E.g. the same kernels on two hosts, or before/after a patch revision. Kernels
are named `<campaign>:<variant>` where a variant name occurs in both campaigns
(campaign = its campaign id, else its directory name); other names stay. The
baseline is A's baseline unless --baseline names another kernel. Rounds (the
`block` term of the model) are not shared between campaigns: B's blocks are
renumbered after A's, so a kernel of B is compared with A's baseline by the
pooled two-sample test on per-boot values (kablab.report.stats).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from kablab.results.load import Campaign, InvalidFile, load_campaign
from kablab.report.render import render_campaign


def _name(camp: Campaign) -> str:
    ids = {r["campaign"].get("id") for r in camp.results} - {None}
    return ids.pop() if len(ids) == 1 else camp.root.name


def merge(a: Campaign, b: Campaign, out: Path) -> Campaign:
    na, nb = _name(a), _name(b)
    if na == nb:
        na, nb = f"A-{na}", f"B-{nb}"
    common = set(a.variants()) & set(b.variants())
    offset = 1 + max((r["block"] for r in a.results), default=-1)
    merged = Campaign(root=out)
    order: list[str] = []
    for camp, name, shift in ((a, na, 0), (b, nb, offset)):
        ren = {v: (f"{name}:{v}" if v in common else v) for v in camp.variants()}
        order += [ren[v] for v in camp.variants()]
        for r in camp.results:
            r = copy.deepcopy(r)
            r["variant"] = ren[r["variant"]]
            r["block"] += shift
            r["_file"] = f"{name}/{r['_file']}"
            r["campaign"] = {k: v for k, v in r["campaign"].items() if k != "variants"}
            r["campaign"]["id"] = f"{na} + {nb}"
            if r.get("boot") is not None:
                r["boot"] = f"{name}/{r['boot']}"
            merged.results.append(r)
        merged.invalid += [InvalidFile(f"{name}/{f.path}", f.error) for f in camp.invalid]
    merged.override = order
    return merged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kablab.report.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a_dir")
    ap.add_argument("b_dir")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--baseline", help="baseline kernel (default: A's baseline)")
    args = ap.parse_args(argv)
    camps = []
    for d in (args.a_dir, args.b_dir):
        if not (Path(d) / "results").is_dir():
            print(f"kablab.report.compare: error: {d}/results is not a directory", file=sys.stderr)
            return 1
        camps.append(load_campaign(d))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    camp = merge(camps[0], camps[1], out)
    if args.baseline:
        if args.baseline not in camp.override:
            print(f"kablab.report.compare: error: unknown kernel {args.baseline!r}; kernels: "
                  f"{', '.join(camp.override)}", file=sys.stderr)
            return 1
        camp.override = [args.baseline] + [v for v in camp.override if v != args.baseline]
    for f in camp.invalid:
        print(f"kablab.report.compare: warning: excluded invalid result {f.path}: {f.error}",
              file=sys.stderr)
    for p in render_campaign(camp, out).values():
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
