"""kablab.lab.kcache: the kernel cache index, for Ansible's filters.

* kernel_entries: what the kernel_build role publishes per variant (the
  kablab_kernels fact and kernels/manifest-<profile>.json);
* merge_manifest: a manifest after a run (earlier runs' variants stay);
* prune_decision: what cache_prune removes and keeps;
* du_freed: the bytes that removal frees, from du's output.

The tasks only find and read files (find, slurp, du) and hand their contents
here; nothing in this module touches the cache.
"""
from __future__ import annotations

import posixpath
from itertools import groupby


def kernel_entries(variants: list[dict], keys: list[dict], records: list[dict]) -> dict[str, dict]:
    """variant name -> {dir, bzimage, release, modules_dir, cmdline, build}.

    keys are the `kablab-kernel-build key` outputs of the variants that are
    built, records their build.json, in the same order. A variant with
    build_from boots the kernel of the variant it names, with its own cmdline.
    """
    by_name = {v["name"]: v for v in variants}
    out: dict[str, dict] = {}
    for key, record in zip(keys, records, strict=True):
        name = key["variant"]
        if record.get("variant") != name:
            raise ValueError(f"{key['dir']}/build.json is variant {record.get('variant')!r}, not {name!r}")
        d = key["dir"]
        out[name] = {
            "dir": d,
            "bzimage": f"{d}/bzImage",
            "release": record["release"],
            "modules_dir": f"{d}/modules/lib/modules/{record['release']}",
            "cmdline": by_name[name]["cmdline"],
            "build": record,
        }
    for v in variants:
        if "build_from" in v:
            if v["build_from"] not in out:
                raise ValueError(f"{v['name']}: build_from {v['build_from']!r} is not a variant built in this run")
            out[v["name"]] = {**out[v["build_from"]], "cmdline": v["cmdline"]}
    return out


def build_times(keys: list[dict], records: list[dict]) -> list[str]:
    """One line per variant: how long its build took and from what, and
    whether this run built it or found it in the cache (keys: the
    `kablab-kernel-build key` outputs as computed before the builds)."""
    lines = []
    for key, rec in zip(keys, records, strict=True):
        donor = rec.get("donor")
        trim = rec.get("modules_trim") or {}
        how = f"objects from {donor}" if donor else "from scratch"
        if trim:
            how += f", {trim.get('trimmed')} modules trimmed"
        when = "reused from the cache" if key.get("cached") else "built by this run"
        lines.append(f"{key['variant']}-{rec.get('key')} ({rec.get('config_profile')}): "
                     f"{rec.get('build_seconds')} s, {how}; {when}")
    return lines


def merge_manifest(old: dict | None, kernels: dict[str, dict]) -> dict[str, dict]:
    """The manifest keeps the variants of earlier runs (a campaign with its
    own variant list must not take the default variants' kernels away from
    the next one); this run's variants replace their namesakes. Sorted, so
    the file changes only when an entry does."""
    merged = {**(old or {}), **kernels}
    return {k: merged[k] for k in sorted(merged)}


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def prune_decision(cache_dir: str, record_paths: list[str], records: list[dict], manifests: list[dict],
               stale_candidates: list[str], keep: int) -> dict:
    """What goes from the cache.

    record_paths/records: each finished build's kernels/<name>/build.json and
    its content (*.tmp entries already left out); manifests: the contents of
    every kernels/manifest-*.json; stale_candidates: entries of trees/ and
    kernels/ older than the stale age; keep: builds kept per variant and
    config profile, newest first.

    Returns {builds, in_use, old, stale, paths, kept}: old are the build
    names that go (beyond the newest `keep` of their group and named by no
    manifest, which is what the next campaign boots); stale the unowned trees
    and *.tmp entries; paths everything to remove, every kernel before any
    tree, so an interrupted prune leaves an unowned tree, never a kernel
    whose tree (a later build's donor) is gone.
    """
    if int(keep) < 1:
        raise ValueError(f"keep must be at least 1, not {keep}")
    kernels_dir, trees_dir = f"{cache_dir}/kernels", f"{cache_dir}/trees"
    builds = sorted(({"name": posixpath.basename(posixpath.dirname(p)),
                      "group": f"{r['variant']}/{r['config_profile']}",
                      "built_at": r["built_at"]} for p, r in zip(record_paths, records, strict=True)),
                    key=lambda b: (b["group"], b["name"]))
    in_use = sorted({posixpath.basename(e["dir"].rstrip("/")) for m in manifests for e in m.values()})
    old = []
    for _, group in groupby(builds, key=lambda b: b["group"]):
        newest_first = sorted(group, key=lambda b: b["built_at"], reverse=True)
        old += [b["name"] for b in newest_first[int(keep):] if b["name"] not in in_use]
    owned_trees = {f"{trees_dir}/{b['name']}" for b in builds}
    # In kernels/ only *.tmp is a leftover; everything in trees/ that no
    # finished build owns is one.
    stale = [p for p in stale_candidates
             if (_under(p, trees_dir) or p.endswith(".tmp")) and p not in owned_trees]
    return {
        "builds": builds,
        "in_use": in_use,
        "old": old,
        "stale": stale,
        "paths": [f"{kernels_dir}/{n}" for n in old] + [f"{trees_dir}/{n}" for n in old] + stale,
        "kept": sorted(b["name"] for b in builds if b["name"] not in old),
    }


def du_freed(du_lines: list[str], paths: list[str]) -> int:
    """Bytes freed by removing paths, from `du -sb SRC PATH...`: du counts a
    hard-linked file once, under the first argument naming it, so listing
    the pristine source first leaves only what removal frees in the paths'
    totals; the source's own line is not one of paths and is not added."""
    wanted = set(paths)
    total = 0
    for line in du_lines:
        size, _, path = line.partition("\t")
        if path in wanted:
            total += int(size)
    return total
