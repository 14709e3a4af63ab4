"""Load and validate every result file of a campaign (CAMPAIGN/results/**/*.json).

Corrupt or schema-invalid files are reported by name and excluded; failed
blocks are kept so the report can show them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kablab.util import validation_errors


@dataclass
class InvalidFile:
    path: str          # relative to the campaign directory
    error: str


@dataclass
class Campaign:
    root: Path
    results: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[InvalidFile] = field(default_factory=list)
    override: list[str] = field(default_factory=list)   # variant order, baseline first

    @property
    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] == "ok"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] == "failed"]

    def variants(self) -> list[str]:
        """Variants in report order, baseline first.

        Order: `override` (set by `--variants`/`--baseline`) when given, else
        campaign.variants from meta.json when the runner provides it, else
        "stock" (the design's baseline) first and the others by name; without
        "stock", the variant of the earliest block (order_index) is the baseline.
        """
        names = sorted({r["variant"] for r in self.results})
        order: list[str] = []
        declared = self.override
        if not declared:
            for r in self.results:
                v = r.get("campaign", {}).get("variants")
                if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                    declared = v
                    break
        if declared:
            order = [v for v in declared if v in names]
        rest = [v for v in names if v not in order]
        if not order and rest:
            if "stock" in rest:
                first = "stock"
            else:
                first = min(self.results, key=lambda r: (r.get("order_index") is None,
                                                         r.get("order_index") or 0))["variant"]
            order = [first]
            rest.remove(first)
        return order + rest

    def workloads(self) -> list[str]:
        return sorted({r["workload"] for r in self.results})


def load_campaign(root: str | Path) -> Campaign:
    root = Path(root)
    camp = Campaign(root=root)
    for p in sorted((root / "results").glob("**/*.json")):
        rel = str(p.relative_to(root))
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            camp.invalid.append(InvalidFile(rel, f"cannot parse JSON: {e}"))
            continue
        errs = validation_errors(doc)
        if errs:
            more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
            camp.invalid.append(InvalidFile(rel, "schema: " + "; ".join(errs[:3]) + more))
            continue
        doc["_file"] = rel
        camp.results.append(doc)
    camp.results.sort(key=lambda r: (r["workload"], r["variant"], r["block"]))
    return camp


def check_files(paths: list[str]) -> list[str]:
    """Problems with the given result files (missing, unparseable, schema-invalid)."""
    problems = []
    for p in paths:
        try:
            doc = json.loads(Path(p).read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{p}: missing")
            continue
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"{p}: cannot parse JSON: {e}")
            continue
        errs = validation_errors(doc)
        if errs:
            problems.append(f"{p}: schema: {errs[0]}")
        elif doc.get("status") != "ok":
            # A failed block is not done: a resumed campaign runs it again
            # (the runner keeps the failed attempt under attempts/).
            problems.append(f"{p}: status {doc.get('status')}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """python3 -m kablab.results.load --check FILE...   (exit 0 when all exist, validate and are ok)
    python3 -m kablab.results.load CAMPAIGN_DIR         (list results, failures, invalid files)"""
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python3 -m kablab.results.load", description=main.__doc__)
    ap.add_argument("--check", action="store_true",
                    help="check that every PATH is an existing, schema-valid result file")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args(argv)
    if a.check:
        problems = check_files(a.paths)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    rc = 0
    for root in a.paths:
        camp = load_campaign(root)
        print(f"{root}: {len(camp.ok)} ok, {len(camp.failed)} failed, "
              f"{len(camp.invalid)} invalid; variants {camp.variants()}")
        for r in camp.failed:
            print(f"  failed {r['_file']}: {r['failure']['stage']}: {r['failure']['reason']}")
        for f in camp.invalid:
            print(f"  invalid {f.path}: {f.error}")
            rc = 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
