"""kablab.lab.kbuild: what a kernel build computes, apart from running make.

roles/kernel_build/files/kablab-kernel-build is the glue that copies trees,
applies patches and runs make; everything it decides comes from here:

* the build key: a hash of what determines the built kernel (see
  key_inputs), so kernels/<variant>-<key>/ is reused as is;
* the donor: the finished build whose object dir a new build starts from, so
  kbuild recompiles only what the two differ in (never part of the key: a
  build from a donor is the same kernel);
* build.json, the record of a finished build, written atomically.

    python3 -m kablab.lab.kbuild key  OPTIONS   the key, its inputs and the cache dir (JSON)
    python3 -m kablab.lab.kbuild settings OPTIONS --mode build|config
                                            the same, plus the patch list and the
                                            donor, as shell assignments for the glue
    python3 -m kablab.lab.kbuild record OPTIONS --out DIR --tree T --release R
                                   --start EPOCH [--key KEY] [--donor-name NAME]
                                            write DIR/build.json; print the summary
    python3 -m kablab.lab.kbuild trim-modules OPTIONS --tree T
                                            before olddefconfig: every module of
                                            T/_build/.config off but the profile's
                                            keep list (configs/<profile>.modules)
    python3 -m kablab.lab.kbuild check-trim OPTIONS --tree T
                                            after it: no built-in of a core
                                            directory went with the modules

OPTIONS are the glue's: --cache --source --source-version --patches --variant
--series a,b --profile ci|distro [--kconfig LINE]... [--jobs N] [--donor auto|none].
Bad input exits 2 with one "ERROR: ..." line naming it.

This module uses only the standard library: the glue runs it with
/usr/bin/python3 and PYTHONPATH set to the repository.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kablab.lab.inputs import VARIANT_NAME
from kablab.util import atomic_write_json

# Bump when the build procedure changes what it produces (make targets or
# variables, the config steps, what the result directory holds): every key
# changes and every kernel is rebuilt. Edits that do not change the output
# (messages, comments, refactors of the glue) leave it alone, so they cost
# no rebuild. History: 1 = the first key without the script's own hash.
BUILD_RECIPE_VERSION = 1

KEY_HEX_DIGITS = 16
SOURCE_PACKAGE = "linux-source-6.1"
DISTRO_BASE_CONFIG = Path("/usr/src/linux-config-6.1/config.amd64_none_amd64.xz")
PROFILES = ("ci", "distro")
VARIANT_RE = re.compile(VARIANT_NAME)
# A Kconfig fragment line that sets something; the rest (comments, blank
# lines) does not reach .config.
_CONFIG_LINE = re.compile(r"CONFIG_\w+=.*|# CONFIG_\w+ is not set")


# Kconfig files whose options decide how the kernel itself behaves
# (scheduler, preemption, HZ, memory management, mitigations, block layer,
# locking, security): a module trim may take none of their built-ins that
# the modules file does not name. lib/ and crypto/ are left out: what the
# trim takes there is library code only the trimmed drivers call.
CORE_KCONFIG_DIRS = ("arch", "block", "init", "kernel", "mm", "security", "virt")
_KCONFIG_DEF = re.compile(r"^\s*(?:menu)?config\s+(\w+)\s*$", re.M)
_MODULE_LINE = re.compile(r"^CONFIG_(\w+)=m$", re.M)
# A format-patch Subject: "[PATCH v3 1/3] ..." is version 3, "[PATCH 1/2]" version 1.
_SUBJECT = re.compile(r"^Subject: \[(?:RFC )?PATCH(?: v(\d+))?[ \]]", re.M)
_BUILTIN_LINE = re.compile(r"^CONFIG_(\w+)=y$", re.M)


class InputError(ValueError):
    """A build input is wrong; str() says which and how to fix it."""


@dataclass
class Spec:
    """One variant's build, as the glue's options give it."""
    cache: Path
    source: Path
    source_version: str
    patches: Path
    variant: str
    series: list[str]
    profile: str
    kconfig: list[str] = field(default_factory=list)

    @property
    def fragment(self) -> Path:
        return self.patches / "configs" / f"{self.profile}.config"

    @property
    def modules_file(self) -> Path:
        """The modules the profile keeps (one symbol per line, # comments);
        when it exists every other module of the base config is trimmed."""
        return self.patches / "configs" / f"{self.profile}.modules"

    @property
    def base_config(self) -> Path | None:
        """The file the base config comes from; None: make tinyconfig."""
        return DISTRO_BASE_CONFIG if self.profile == "distro" else None


def check(spec: Spec) -> None:
    """Raise InputError for the first input that cannot build."""
    if not VARIANT_RE.fullmatch(spec.variant):
        raise InputError(f"variant name '{spec.variant}' must match {VARIANT_NAME}")
    if spec.profile not in PROFILES:
        raise InputError(f"unknown config profile '{spec.profile}' (allowed: {', '.join(PROFILES)})")
    if not spec.source.is_dir():
        raise InputError(f"source tree {spec.source} does not exist (run the kernels playbook's kernel_source role)")
    base = spec.base_config
    if base is not None and not base.is_file():
        raise InputError(f"profile {spec.profile} needs {base} (apt-get install linux-config-6.1)")
    if not spec.fragment.is_file():
        raise InputError(f"config fragment {spec.fragment} is missing")
    if spec.modules_file.is_file():
        modules_policy(spec.modules_file)
    series_versions(spec)


def patch_files(spec: Spec) -> list[Path]:
    """Every series directory in order, its format-patch files sorted, cover
    letters (0000-*) left out: the order the glue applies them in."""
    files = []
    for s in spec.series:
        d = spec.patches / s
        if not d.is_dir():
            raise InputError(f"variant {spec.variant}: series '{s}' has no directory {d}")
        files += sorted(p for p in d.glob("*.patch") if not p.name.startswith("0000-"))
    return files


def series_versions(spec: Spec) -> dict[str, str]:
    """Each series' version ("v3") as its patches' Subject lines give it. The
    report names it beside the build key, so that an A/B of an old series is
    never read as the current one's. A series whose patches disagree, or a
    patch without a [PATCH ...] subject, is an InputError."""
    versions: dict[str, str] = {}
    for p in patch_files(spec):
        m = _SUBJECT.search(p.read_text(errors="replace"))
        if m is None:
            raise InputError(f"{p}: no 'Subject: [PATCH ...]' line (make patches with git format-patch)")
        v = f"v{m[1] or 1}"
        first = versions.setdefault(p.parent.name, v)
        if v != first:
            raise InputError(f"series {p.parent.name}: {p.name} is {v} but the patches before it are {first}")
    return versions


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def series_record(spec: Spec) -> list[dict]:
    """build.json's "series": each applied patch with its content hash."""
    return [{"series": p.parent.name, "file": p.name, "sha256": sha256_file(p)} for p in patch_files(spec)]


def fragment_lines(path: Path) -> list[str]:
    """The lines of a Kconfig fragment that set something, in order (a later
    line for the same symbol wins in merge_config, so order matters)."""
    return [s for s in (line.strip() for line in path.read_text().splitlines()) if _CONFIG_LINE.fullmatch(s)]


def modules_policy(path: Path) -> tuple[list[str], list[str]]:
    """A modules file: "SYM" keeps module SYM, "!SYM" accepts that the core
    built-in SYM goes with the trimmed modules; "#" starts a comment (the
    reason). Returns (kept, accepted), each in file order."""
    kept: list[str] = []
    accepted: list[str] = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        into = accepted if line.startswith("!") else kept
        sym = line.lstrip("!").strip().removeprefix("CONFIG_")
        if not re.fullmatch(r"[A-Z0-9_]+", sym):
            raise InputError(f"{path}:{n}: '{raw.strip()}' is not a Kconfig symbol (SYM or !SYM)")
        into.append(sym)
    return kept, accepted


def trim_modules(config: str, keep: list[str]) -> tuple[str, list[str]]:
    """CONFIG_X=m becomes '# CONFIG_X is not set' for every X not in KEEP;
    returns the new .config text and the trimmed symbols (sorted)."""
    trimmed = []

    def off(m: re.Match) -> str:
        if m[1] in keep:
            return m[0]
        trimmed.append(m[1])
        return f"# CONFIG_{m[1]} is not set"
    return _MODULE_LINE.sub(off, config), sorted(trimmed)


def builtins(config: str) -> set[str]:
    return set(_BUILTIN_LINE.findall(config))


def kconfig_homes(tree: Path) -> dict[str, str]:
    """Each Kconfig symbol -> the path (relative to TREE) of a Kconfig file
    that defines it; the first one found wins for symbols defined twice."""
    homes: dict[str, str] = {}
    for f in sorted(tree.rglob("Kconfig*")):
        if "_build" in f.relative_to(tree).parts or not f.is_file():
            continue
        for sym in _KCONFIG_DEF.findall(f.read_text(errors="replace")):
            homes.setdefault(sym, str(f.relative_to(tree)))
    return homes


def trim_losses(before: str, after: str, homes: dict[str, str]) -> dict[str, list[str]]:
    """The built-ins of BEFORE that AFTER lacks, split into "core" (defined
    under CORE_KCONFIG_DIRS: kernel behaviour) and "drivers" (options of the
    trimmed modules and the libraries they select, which go with them)."""
    lost = sorted(builtins(before) - builtins(after))
    core = [s for s in lost if homes.get(s, "").split("/", 1)[0] in CORE_KCONFIG_DIRS]
    return {"core": core, "drivers": [s for s in lost if s not in core]}


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise InputError(f"cannot read the toolchain version with {' '.join(argv)}: {e}") from e
    return out.splitlines()[0].strip() if out.strip() else ""


def toolchain() -> dict[str, str]:
    """The compiler and linker the build uses, as their --version names them
    (the Debian package version is part of it)."""
    return {"compiler": _first_line(["gcc", "--version"]), "linker": _first_line(["ld", "--version"])}


def key_inputs(spec: Spec, tools: dict[str, str]) -> list[str]:
    """Everything that determines the built kernel, one line each:

    variant (it is in LOCALVERSION), Debian source version, config profile
    and base config, the fragment's effective lines (comments do not count),
    each patch by series/file and content hash in apply order, each variant
    Kconfig line, compiler and linker versions, and BUILD_RECIPE_VERSION for
    the procedure itself. The glue script's text is deliberately not an
    input: a new message or comment there must not rebuild every kernel."""
    lines = [f"variant={spec.variant}", f"source={spec.source_version}"]
    base = spec.base_config
    lines.append(f"profile={spec.profile} base={base or 'tinyconfig'}")
    if base is not None:
        lines.append(f"base-config {sha256_file(base)}")
    frag = hashlib.sha256("\n".join(fragment_lines(spec.fragment)).encode()).hexdigest()
    lines.append(f"fragment {frag}")
    if spec.modules_file.is_file():
        kept, accepted = modules_policy(spec.modules_file)
        lines.append(f"modules trimmed, kept: {' '.join(kept) or 'none'}; accepted: {' '.join(accepted) or 'none'}")
    lines += [f"patch {s['series']}/{s['file']} {s['sha256']}" for s in series_record(spec)]
    lines += [f"kconfig {line}" for line in spec.kconfig]
    lines += [f"compiler={tools['compiler']}", f"linker={tools['linker']}",
              f"recipe={BUILD_RECIPE_VERSION}"]
    return lines


def build_key(inputs: list[str]) -> str:
    return hashlib.sha256("".join(f"{line}\n" for line in inputs).encode()).hexdigest()[:KEY_HEX_DIGITS]


def describe(spec: Spec, tools: dict[str, str] | None = None) -> dict:
    """The key JSON: key, name, cache dir, whether it is built, inputs."""
    check(spec)
    inputs = key_inputs(spec, tools or toolchain())
    key = build_key(inputs)
    name = f"{spec.variant}-{key}"
    out = spec.cache / "kernels" / name
    return {"variant": spec.variant, "key": key, "name": name, "dir": str(out),
            "cached": (out / "build.json").is_file(), "inputs": inputs}


def _signature(series: list[dict], kconfig: list[str]) -> set[str]:
    """What a build's object dir depends on beyond profile and source: the
    patches it applied and its Kconfig lines."""
    return ({f"patch {s['series']}/{s['file']} {s['sha256']}" for s in series}
            | {f"kconfig {line}" for line in kconfig})


def choose_donor(kernels: Path, profile: str, source_version: str,
                 series: list[dict], kconfig: list[str]) -> tuple[str, Path] | None:
    """The finished build whose object dir is closest to this build's: same
    profile and source version, object dir still present, fewest patches and
    Kconfig lines differing; the newest wins a tie. None: start empty."""
    wanted = _signature(series, kconfig)
    best = None
    for record in kernels.glob("*/build.json"):
        if record.parent.name.endswith(".tmp"):
            continue
        try:
            b = json.loads(record.read_text())
            if (b["config_profile"], b["source_version"]) != (profile, source_version):
                continue
            tree = Path(b["tree"])
            if not (tree / "_build" / ".config").is_file():
                continue
            have = _signature(b["series"], b["kconfig"])
            rank = (len(wanted ^ have), -record.stat().st_mtime)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a usable donor; the entry itself is checked by cache_prune
        if best is None or rank < best[0]:
            best = (rank, record.parent.name, tree)
    return (best[1], best[2]) if best else None


TRIM_RECORD = "kablab-modules-trim.json"


def trim_config(spec: Spec, tree: Path) -> dict:
    """trim-modules: rewrite TREE/_build/.config (merged, not yet through
    olddefconfig) with only the kept modules; keep the config as it was
    beside it and return the trim record."""
    config = tree / "_build" / ".config"
    before = config.read_text()
    keep, accepted = modules_policy(spec.modules_file)
    text, trimmed = trim_modules(before, keep)
    (tree / "_build" / ".config.before-trim").write_text(before)
    config.write_text(text)
    record = {"modules_file": spec.modules_file.name, "kept": keep, "accepted_losses": accepted,
              "trimmed": len(trimmed)}
    atomic_write_json(tree / "_build" / TRIM_RECORD, record)
    return record


def check_trim(tree: Path) -> dict:
    """check-trim: after olddefconfig, the built-ins the trim took. A core
    one is an InputError naming it (keep the module that selects it);
    driver options are counted in the trim record."""
    build = tree / "_build"
    record = json.loads((build / TRIM_RECORD).read_text())
    losses = trim_losses((build / ".config.before-trim").read_text(), (build / ".config").read_text(),
                         kconfig_homes(tree))
    unaccepted = [s for s in losses["core"] if s not in record["accepted_losses"]]
    if unaccepted:
        raise InputError(f"trimming modules turned off {len(unaccepted)} built-in option(s) of core "
                         f"directories: {', '.join(unaccepted)}; in kernel-patches/configs/"
                         f"{record['modules_file']}, keep the module that selects each (SYM) or accept "
                         f"the loss with a reason (!SYM)")
    record["core_builtins_lost"] = losses["core"]
    record["builtins_lost_with_drivers"] = len(losses["drivers"])
    record["modules_left"] = len(_MODULE_LINE.findall((build / ".config").read_text()))
    atomic_write_json(build / TRIM_RECORD, record)
    return record


def build_record(spec: Spec, *, key: str, tree: str, release: str, config: Path, tools: dict[str, str],
                 seconds: float, donor: str | None, now: datetime.datetime | None = None) -> dict:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    trim = Path(tree) / "_build" / TRIM_RECORD
    return {
        "variant": spec.variant,
        "key": key,
        "tree": tree,
        "objdir": f"{tree}/_build",
        "source_package": SOURCE_PACKAGE,
        "source_version": spec.source_version,
        "release": release,
        "uname_v_prefix": f"#{key}",
        "series": series_record(spec),
        "series_versions": series_versions(spec),
        "config_profile": spec.profile,
        "config_sha256": sha256_file(config),
        "kconfig": list(spec.kconfig),
        "modules_trim": json.loads(trim.read_text()) if trim.is_file() else None,
        "compiler": tools["compiler"],
        "linker": tools["linker"],
        "recipe": BUILD_RECIPE_VERSION,
        "build_seconds": round(seconds, 1),
        "donor": donor or None,
        "built_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def shell_assignments(values: dict) -> str:
    """bash assignments (lists become arrays), every value quoted for eval."""
    out = []
    for k, v in values.items():
        if isinstance(v, (list, tuple)):
            out.append(f"{k}=({' '.join(shlex.quote(str(x)) for x in v)})")
        else:
            out.append(f"{k}={shlex.quote('' if v is None else str(v))}")
    return "\n".join(out) + "\n"


def settings(spec: Spec, mode: str, donor: str, jobs: int | None, tools: dict[str, str] | None = None) -> dict:
    """What the glue needs for one build or config check."""
    d = describe(spec, tools)
    chosen = None
    if mode == "build" and donor == "auto":
        chosen = choose_donor(spec.cache / "kernels", spec.profile, spec.source_version,
                              series_record(spec), spec.kconfig)
    return {
        "key": d["key"], "name": d["name"], "out": d["dir"], "cached": int(d["cached"]), "cache": str(spec.cache),
        "variant": spec.variant, "source": str(spec.source),
        "patches": str(spec.patches), "base_config": str(spec.base_config or ""),
        "fragment": str(spec.fragment),
        "modules_file": str(spec.modules_file) if spec.modules_file.is_file() else "",
        "jobs": jobs or len(os.sched_getaffinity(0)),
        "patch_files": [str(p) for p in patch_files(spec)], "kconfig": list(spec.kconfig),
        "donor_name": chosen[0] if chosen else "", "donor_tree": str(chosen[1]) if chosen else "",
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m kablab.lab.kbuild", description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["key", "settings", "record", "trim-modules", "check-trim"])
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--source", type=Path, required=True)
    p.add_argument("--source-version", required=True)
    p.add_argument("--patches", type=Path, required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--series", default="", help="comma-separated series directories, in apply order")
    p.add_argument("--profile", required=True)
    p.add_argument("--kconfig", action="append", default=[])
    p.add_argument("--jobs", type=int)
    p.add_argument("--donor", choices=["auto", "none"], default="auto")
    p.add_argument("--mode", choices=["build", "config"], default="build")
    # record
    p.add_argument("--out", type=Path)
    p.add_argument("--tree")
    p.add_argument("--release")
    p.add_argument("--start", type=float)
    p.add_argument("--donor-name", default="")
    p.add_argument("--key", help="the key the glue built under (default: computed again)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    # Absolute paths: the glue applies patches and builds from inside the tree.
    spec = Spec(cache=a.cache.absolute(), source=a.source.absolute(), source_version=a.source_version,
                patches=a.patches.absolute(),
                variant=a.variant, series=[s for s in a.series.split(",") if s], profile=a.profile,
                kconfig=a.kconfig)
    try:
        if a.command == "key":
            print(json.dumps(describe(spec)))
        elif a.command == "settings":
            sys.stdout.write(shell_assignments(settings(spec, a.mode, a.donor, a.jobs)))
        elif a.command in ("trim-modules", "check-trim"):
            if a.tree is None:
                raise InputError(f"{a.command} needs --tree")
            if a.command == "trim-modules":
                r = trim_config(spec, Path(a.tree))
                print(f"kablab: {r['trimmed']} module(s) trimmed, kept: {' '.join(r['kept']) or 'none'}")
            else:
                r = check_trim(Path(a.tree))
                print(f"kablab: after the trim: {r['modules_left']} module(s); {len(r['core_builtins_lost'])} core "
                      f"built-in(s) went, each accepted in {r['modules_file']}; "
                      f"{r['builtins_lost_with_drivers']} driver option(s) went with their modules")
        else:
            missing = [o for o in ("out", "tree", "release", "start") if getattr(a, o) is None]
            if missing:
                raise InputError(f"record needs --{', --'.join(missing)}")
            tools = toolchain()
            key = a.key or build_key(key_inputs(spec, tools))
            seconds = time.time() - a.start
            atomic_write_json(a.out / "build.json", build_record(
                spec, key=key, tree=a.tree, release=a.release, config=a.out / "config", tools=tools,
                seconds=seconds, donor=a.donor_name))
            print(f"kablab: built {spec.variant}-{key} ({a.release}) in {seconds:.0f} s")
    except InputError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
