"""kablab.lab.kbuild: the build key, the donor choice and build.json, on the real
kernel-patches/ series and build records taken from a real cache
(tests/fixtures/kbuild/*.build.json)."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kablab.lab import kbuild
from kablab.lab.kbuild import Spec
from kablabtest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "kbuild"
GLUE = Path("roles/kernel_build/files/kablab-kernel-build")
TOOLS = {"compiler": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0", "linker": "GNU ld (GNU Binutils for Debian) 2.40"}
# The variants of inventory/group_vars/all/variants.yml.
VARIANTS = {"stock": (["common"], []),
            "grouped": (["common", "grouped"], ["CONFIG_VMALLOC_GROUP_PAGES=y"]),
            "split4k": (["common", "split4k"], []),
            "jit2m": (["common", "jit2m"], ["CONFIG_BPF_PROG_PACK_PMD=y"])}

# The records of builds of today's patches and config (ci.config with
# seccomp filters and the page-table dump, jit2m's series), recorded from
# those builds: the cache snapshot above predates both.
CURRENT_RECORD = {v: f"{v}-{key}.build.json" for v, key in (
    ("stock", "4930831e807dfd87"), ("grouped", "7fc595e7e19534de"), ("split4k", "42ace255cab89b5f"),
    ("jit2m", "9343beb39f40ce57"))}

def spec(variant: str = "grouped", patches: Path = REPO / "kernel-patches", source: Path = REPO,
         cache: Path = Path("/nonexistent-cache"), **kw) -> Spec:
    series, kconfig = VARIANTS.get(variant, (["common"], []))
    args = {"series": series, "kconfig": kconfig, "source_version": "6.1.192-3", "profile": "ci", **kw}
    return Spec(cache=cache, source=source, patches=patches, variant=variant, **args)


def key(s: Spec, tools: dict = TOOLS) -> str:
    return kbuild.build_key(kbuild.key_inputs(s, tools))


@pytest.fixture()
def patches(tmp_path: Path) -> Path:
    """A scratch copy of the real kernel-patches/ to edit."""
    return Path(shutil.copytree(REPO / "kernel-patches", tmp_path / "kernel-patches"))


# --- the key -----------------------------------------------------------------

def test_key_inputs_name_every_real_patch_in_apply_order():
    inputs = kbuild.key_inputs(spec("grouped"), TOOLS)
    patch_lines = [line.split()[1] for line in inputs if line.startswith("patch ")]
    assert patch_lines == ["common/0001-mm-secretmem-make-it-on-by-default.patch",
                           "grouped/0001-mm-vmalloc-group-pages-of-permissioned-vmallocs-on-t.patch",
                           "grouped/0002-mm-vmalloc-count-what-the-grouped-page-cache-does.patch",
                           "grouped/0003-x86-module-Group-module_alloc-pages-on-the-direct-ma.patch"]
    assert "kconfig CONFIG_VMALLOC_GROUP_PAGES=y" in inputs
    assert f"recipe={kbuild.BUILD_RECIPE_VERSION}" in inputs
    assert not any("cover-letter" in line for line in inputs)
    # the glue script is not an input
    assert not any("kablab-kernel-build" in line or line.startswith("builder=") for line in inputs)


def test_patch_hashes_match_the_real_build_records():
    """The series part of a real build.json is what the key hashed."""
    for variant in VARIANTS:
        recorded = json.loads((FIXTURES / CURRENT_RECORD.get(variant, f"{variant}.build.json")).read_text())["series"]
        assert kbuild.series_record(spec(variant)) == recorded


def test_key_is_stable_and_differs_per_variant():
    keys = {v: key(spec(v)) for v in VARIANTS}
    assert keys == {v: key(spec(v)) for v in VARIANTS}
    assert len(set(keys.values())) == len(VARIANTS)
    assert all(len(k) == kbuild.KEY_HEX_DIGITS and int(k, 16) >= 0 for k in keys.values())


def test_what_determines_the_kernel_changes_the_key(patches):
    base = key(spec("split4k", patches))
    victim = sorted((patches / "split4k").glob("0002-*.patch"))[0]
    victim.write_text(victim.read_text().replace("nohugepages_mapping", "nohugepages_map", 1))
    assert key(spec("split4k", patches)) != base, "a patch's content"
    victim.write_text((REPO / "kernel-patches" / "split4k" / victim.name).read_text())
    assert key(spec("split4k", patches)) == base

    frag = patches / "configs" / "ci.config"
    frag.write_text(frag.read_text().replace("CONFIG_NR_CPUS=8", "CONFIG_NR_CPUS=4"))
    assert key(spec("split4k", patches)) != base, "a config fragment option"
    frag.write_text((REPO / "kernel-patches" / "configs" / "ci.config").read_text())

    changed = {
        "a variant Kconfig line": spec("split4k", patches, kconfig=["CONFIG_X86_DIRECT_MAP_4K=y"]),
        "the series list": spec("split4k", patches, series=["common"]),
        "the series order": spec("split4k", patches, series=["split4k", "common"]),
        "the source version": spec("split4k", patches, source_version="6.1.193-1"),
        "the variant name (LOCALVERSION)": spec("split4kb", patches, series=["common", "split4k"]),
        "the profile": spec("split4k", patches, profile="distro"),
    }
    for what, s in changed.items():
        if s.profile == "distro" and not kbuild.DISTRO_BASE_CONFIG.is_file():
            continue  # the distro base config is not installed here
        assert key(s) != base, what
    assert key(spec("split4k", patches), {**TOOLS, "compiler": "gcc (Debian 12.2.0-14+deb12u2) 12.2.0"}) != base
    assert key(spec("split4k", patches), {**TOOLS, "linker": "GNU ld (GNU Binutils for Debian) 2.41"}) != base


def test_recipe_version_bump_changes_the_key(monkeypatch):
    base = key(spec("stock"))
    monkeypatch.setattr(kbuild, "BUILD_RECIPE_VERSION", kbuild.BUILD_RECIPE_VERSION + 1)
    assert key(spec("stock")) != base


def test_fragment_comments_and_blank_lines_do_not_change_the_key(patches):
    base = key(spec("stock", patches))
    frag = patches / "configs" / "ci.config"
    frag.write_text("# a comment explaining the choice\n\n" + frag.read_text().replace("\n", "\n\n", 3) + "# end\n")
    assert key(spec("stock", patches)) == base
    assert kbuild.fragment_lines(frag) == kbuild.fragment_lines(REPO / "kernel-patches" / "configs" / "ci.config")
    assert "CONFIG_NR_CPUS=8" in kbuild.fragment_lines(frag)


def test_a_cover_letter_edit_does_not_change_the_key(patches):
    base = key(spec("grouped", patches))
    cover = patches / "grouped" / "0000-cover-letter.patch"
    cover.write_text(cover.read_text() + "\nAnother paragraph of the cover letter.\n")
    assert key(spec("grouped", patches)) == base


def _glue_key(repo: Path, tmp: Path) -> str:
    """The key as the Ansible task gets it: through the glue script of repo."""
    out = subprocess.run(
        [str(repo / GLUE), "key", "--cache", str(tmp / "cache"), "--source", str(tmp),
         "--source-version", "6.1.192-3", "--patches", str(repo / "kernel-patches"), "--variant", "split4k",
         "--series", "common,split4k", "--profile", "ci", "--jobs", "2", "--donor", "auto"],
        capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(out)["key"]


def test_cosmetic_glue_edits_keep_the_key_patch_edits_do_not(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "kablab", repo / "kablab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "kernel-patches", repo / "kernel-patches")
    (repo / GLUE).parent.mkdir(parents=True)
    shutil.copy2(REPO / GLUE, repo / GLUE)
    base = _glue_key(repo, tmp_path)
    assert base == key(spec("split4k", repo / "kernel-patches"), kbuild.toolchain())

    glue = repo / GLUE
    text = glue.read_text()
    glue.write_text(text.replace("set -euo pipefail", "# a new comment\nset -euo pipefail", 1)
                    .replace('echo "kablab: applied $rel"', 'echo "kablab: applied patch $rel"'))
    assert glue.read_text() != text
    assert _glue_key(repo, tmp_path) == base

    patch = sorted((repo / "kernel-patches" / "split4k").glob("0001-*.patch"))[0]
    patch.write_text(patch.read_text().replace("\n+", "\n+\t/* kablab */\n+", 1))
    assert _glue_key(repo, tmp_path) != base


@pytest.mark.parametrize("change, message", [
    ({"variant": "Bad"}, "variant name 'Bad' must match"),
    ({"profile": "tiny"}, "unknown config profile 'tiny'"),
    ({"source": Path("/nonexistent-source")}, "source tree /nonexistent-source does not exist"),
    ({"series": ["common", "nosuch"]}, "series 'nosuch' has no directory"),
])
def test_bad_inputs_are_named(change, message):
    s = spec("stock")
    for k, v in change.items():
        setattr(s, k, v)
    with pytest.raises(kbuild.InputError, match=message):
        kbuild.describe(s, TOOLS)


def test_series_versions_come_from_the_patch_subjects(patches):
    assert {v: kbuild.series_versions(spec(v)) for v in VARIANTS} == {
        "stock": {"common": "v1"}, "grouped": {"common": "v1", "grouped": "v3"},
        "split4k": {"common": "v1", "split4k": "v1"}, "jit2m": {"common": "v1", "jit2m": "v1"}}
    # one patch of a series resent as v4 alone is a mixed series: named, before any work
    victim = sorted((patches / "grouped").glob("0002-*.patch"))[0]
    victim.write_text(victim.read_text().replace("[PATCH v3 2/3]", "[PATCH v4 2/3]", 1))
    with pytest.raises(kbuild.InputError, match=f"series grouped: {victim.name} is v4 but the patches "
                                                "before it are v3"):
        kbuild.describe(spec("grouped", patches), TOOLS)
    victim.write_text(victim.read_text().replace("Subject: [PATCH v4 2/3]", "Subject: vmalloc", 1))
    with pytest.raises(kbuild.InputError, match="no 'Subject: \\[PATCH ...\\]' line"):
        kbuild.describe(spec("grouped", patches), TOOLS)


def test_cli_bad_input_exits_2_with_one_error_line(tmp_path):
    proc = subprocess.run(["/usr/bin/python3", "-m", "kablab.lab.kbuild", "key", "--cache", str(tmp_path),
                           "--source", str(tmp_path), "--source-version", "1", "--patches",
                           str(REPO / "kernel-patches"), "--variant", "stock", "--series", "common,nosuch",
                           "--profile", "ci"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ERROR: variant stock: series 'nosuch' has no directory")


# --- the donor ---------------------------------------------------------------

def _cache_with_real_records(tmp_path: Path, variants=("stock", "grouped", "split4k")) -> Path:
    """kernels/<name>/build.json as a real cache holds them, each tree with
    an object dir; mtimes in the order the real builds were made."""
    kernels = tmp_path / "kernels"
    for i, v in enumerate(variants):
        record = json.loads((FIXTURES / CURRENT_RECORD.get(v, f"{v}.build.json")).read_text())
        tree = tmp_path / "trees" / f"{v}-{record['key']}"
        (tree / "_build").mkdir(parents=True)
        (tree / "_build" / ".config").write_text("CONFIG_64BIT=y\n")
        record["tree"] = str(tree)
        path = kernels / f"{v}-{record['key']}" / "build.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return kernels


def _donor(kernels: Path, variant: str, series=None, kconfig=None, profile="ci", version="6.1.192-3"):
    s = spec(variant)
    if series is not None:
        s.series = series
    found = kbuild.choose_donor(kernels, profile, version, kbuild.series_record(s),
                                s.kconfig if kconfig is None else kconfig)
    return found and found[0].split("-")[0]


def test_donor_is_the_closest_finished_build(tmp_path):
    kernels = _cache_with_real_records(tmp_path)
    # a variant already built (another key) takes its own previous build
    assert _donor(kernels, "grouped") == "grouped"
    assert _donor(kernels, "split4k") == "split4k"
    # grouped without its Kconfig line is one line from grouped, four from split4k
    assert _donor(kernels, "grouped", kconfig=[]) == "grouped"
    # a new variant with both series and grouped's Kconfig line: grouped
    # differs by 2 (split4k's patches), split4k by 4 (grouped's 3 + the line)
    both = ["common", "grouped", "split4k"]
    assert _donor(kernels, "both", series=both, kconfig=["CONFIG_VMALLOC_GROUP_PAGES=y"]) == "grouped"
    # without the line both differ by 3: the newer build (split4k) wins
    assert _donor(kernels, "both", series=both, kconfig=[]) == "split4k"


def test_donor_ties_go_to_the_newest(tmp_path):
    kernels = _cache_with_real_records(tmp_path)
    # common alone: stock differs by 0; without stock, grouped (3 patches +
    # 1 line) and split4k (2 patches) -> split4k
    assert _donor(kernels, "stock") == "stock"
    shutil.rmtree(next(kernels.glob("stock-*")))
    assert _donor(kernels, "stock") == "split4k"
    # two records equally close: the newer one
    rec = json.loads(next(kernels.glob("split4k-*/build.json")).read_text())
    twin = kernels / "split4k-00000000000000aa" / "build.json"
    twin.parent.mkdir()
    twin.write_text(json.dumps(rec))
    os.utime(twin, (1_800_000_000, 1_800_000_000))
    assert kbuild.choose_donor(kernels, "ci", "6.1.192-3", kbuild.series_record(spec("stock")), [])[0] == twin.parent.name


def test_unusable_records_are_never_donors(tmp_path):
    kernels = _cache_with_real_records(tmp_path, ("stock",))
    [stock] = kernels.glob("stock-*")
    assert _donor(kernels, "stock") == "stock"
    assert _donor(kernels, "stock", profile="distro") is None
    assert _donor(kernels, "stock", version="6.1.193-1") is None
    # a killed build (*.tmp), a torn record, a record without fields
    for name, text in (("stock-1.tmp", (stock / "build.json").read_text()), ("stock-2", "{"), ("stock-3", "{}")):
        (kernels / name).mkdir()
        (kernels / name / "build.json").write_text(text)
        os.utime(kernels / name / "build.json", (1_900_000_000, 1_900_000_000))
    assert _donor(kernels, "stock") == "stock"
    # its object dir was pruned
    (Path(json.loads((stock / "build.json").read_text())["tree"]) / "_build" / ".config").unlink()
    assert _donor(kernels, "stock") is None
    assert kbuild.choose_donor(tmp_path / "no-kernels", "ci", "6.1.192-3", [], []) is None


def test_settings_name_the_donor_only_for_a_build(tmp_path):
    kernels = _cache_with_real_records(tmp_path)
    s = spec("split4k", cache=tmp_path)
    build = kbuild.settings(s, "build", "auto", 2, TOOLS)
    assert build["donor_name"].startswith("split4k-") and build["donor_tree"].startswith(str(tmp_path / "trees"))
    assert kbuild.settings(s, "build", "none", 2, TOOLS)["donor_name"] == ""
    assert kbuild.settings(s, "config", "auto", 2, TOOLS)["donor_name"] == ""
    # the cache holds the record of a build of today's split4k patches, under the key computed here
    assert build["out"] == str(kernels / build["name"]) and build["cached"] == 1
    assert build["name"] == "split4k-" + json.loads((FIXTURES / CURRENT_RECORD["split4k"]).read_text())["key"]
    assert build["patch_files"] == [str(p) for p in kbuild.patch_files(s)]


def test_shell_assignments_survive_bash_eval():
    values = {"key": "0123", "empty": None, "kconfig": ["CONFIG_A=y", "it's \"quoted\" $(x) `y`", ""],
              "none": []}
    script = kbuild.shell_assignments(values) + 'printf "%s|" "$key" "$empty" "${#kconfig[@]}" "${kconfig[@]}" "${#none[@]}"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == "0123||3|CONFIG_A=y|it's \"quoted\" $(x) `y`||0|"


# --- build.json --------------------------------------------------------------

def test_build_record_has_the_real_records_fields(tmp_path):
    config = tmp_path / "config"
    config.write_text("CONFIG_64BIT=y\n")
    real = json.loads((FIXTURES / CURRENT_RECORD["grouped"]).read_text())
    s = spec("grouped", source_version=real["source_version"])
    record = kbuild.build_record(s, key=real["key"], tree=real["tree"], release=real["release"], config=config,
                                 tools=TOOLS, seconds=12.34, donor="stock-328b24f0b83f5df3",
                                 now=datetime.datetime(2026, 12, 5, 9, 0, tzinfo=datetime.timezone.utc))
    # the real record's fields, "seeded_from" renamed "donor", plus linker, recipe, the
    # distro profile's module trim (null for ci) and the series versions
    assert set(record) == (set(real) - {"seeded_from"}) | {"donor", "linker", "recipe", "modules_trim",
                                                           "series_versions"}
    assert record["modules_trim"] is None
    same = ("variant", "key", "tree", "objdir", "source_package", "source_version", "release",
            "uname_v_prefix", "series", "config_profile", "kconfig", "compiler")
    assert {k: record[k] for k in same} == {k: real[k] for k in same}
    assert record["build_seconds"] == 12.3 and record["donor"] == "stock-328b24f0b83f5df3"
    assert record["built_at"] == "2026-12-05T09:00:00Z"
    assert record["config_sha256"] == kbuild.sha256_file(config)
    assert kbuild.build_record(s, key="k", tree="t", release="r", config=config, tools=TOOLS, seconds=1,
                               donor="")["donor"] is None


def test_records_are_written_whole_or_not_at_all(tmp_path):
    """build.json and the trim record go through kablab.util.atomic_write_json."""
    path = tmp_path / "build.json"
    kbuild.atomic_write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    with pytest.raises(TypeError):
        kbuild.atomic_write_json(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["build.json"]


def test_record_cli_writes_build_json(tmp_path):
    out = tmp_path / "kernels" / "stock-x.tmp"
    out.mkdir(parents=True)
    (out / "config").write_text("CONFIG_64BIT=y\n")
    proc = subprocess.run(
        ["/usr/bin/python3", "-m", "kablab.lab.kbuild", "record", "--cache", str(tmp_path), "--source", str(REPO),
         "--source-version", "6.1.192-3", "--patches", str(REPO / "kernel-patches"), "--variant", "stock",
         "--series", "common", "--profile", "ci", "--out", str(out), "--key", "0123456789abcdef",
         "--tree", "/t/stock-0123456789abcdef", "--release", "6.1.192-kablab-stock", "--start", "0",
         "--donor-name", ""], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kablab: built stock-0123456789abcdef (6.1.192-kablab-stock) in ")
    record = json.loads((out / "build.json").read_text())
    assert record["key"] == "0123456789abcdef" and record["donor"] is None
    assert record["series"] == json.loads((FIXTURES / CURRENT_RECORD["stock"]).read_text())["series"]
    assert sorted(p.name for p in out.iterdir()) == ["build.json", "config"]


# --- the distro profile's module trim ---------------------------------------

# Lines of Debian's config.amd64_none_amd64 (linux-config-6.1) and what
# olddefconfig made of them once every module but KVM was off.
DEBIAN_LINES = """CONFIG_PREEMPT_NOTIFIERS=y
CONFIG_KVM=m
CONFIG_KVM_INTEL=m
CONFIG_8139TOO=m
CONFIG_8139TOO_8129=y
CONFIG_HMM_MIRROR=y
CONFIG_BTREE=y
CONFIG_MITIGATION_VMSCAPE=y
CONFIG_HZ_250=y
"""
HOMES = {"PREEMPT_NOTIFIERS": "init/Kconfig", "KVM": "arch/x86/kvm/Kconfig", "KVM_INTEL": "arch/x86/kvm/Kconfig",
         "8139TOO": "drivers/net/ethernet/realtek/Kconfig", "8139TOO_8129": "drivers/net/ethernet/realtek/Kconfig",
         "HMM_MIRROR": "mm/Kconfig", "BTREE": "lib/Kconfig", "MITIGATION_VMSCAPE": "arch/x86/Kconfig",
         "HZ_250": "kernel/Kconfig.hz"}


def test_the_distro_modules_file_keeps_kvm_and_names_every_accepted_loss():
    kept, accepted = kbuild.modules_policy(REPO / "kernel-patches/configs/distro.modules")
    assert kept == ["KVM", "KVM_INTEL", "KVM_AMD", "VIRTIO_BALLOON", "IOSCHED_BFQ"]
    assert "HMM_MIRROR" in accepted and "PREEMPT_NOTIFIERS" not in accepted


def test_a_modules_file_line_that_is_no_symbol_is_named(tmp_path):
    f = tmp_path / "distro.modules"
    f.write_text("KVM   # fine\n!HMM_MIRROR\nkvm-intel\n")
    with pytest.raises(kbuild.InputError, match=r"distro.modules:3: 'kvm-intel' is not a Kconfig symbol"):
        kbuild.modules_policy(f)


def test_trim_turns_off_every_module_but_the_kept_ones():
    text, trimmed = kbuild.trim_modules(DEBIAN_LINES, ["KVM"])
    assert trimmed == ["8139TOO", "KVM_INTEL"]
    assert "CONFIG_KVM=m\n" in text and "# CONFIG_KVM_INTEL is not set\n" in text
    assert "# CONFIG_8139TOO is not set\n" in text
    assert kbuild.builtins(text) == kbuild.builtins(DEBIAN_LINES)   # olddefconfig's job, not the trim's


def test_losses_split_core_built_ins_from_what_goes_with_the_drivers():
    after = "CONFIG_HZ_250=y\nCONFIG_KVM=m\n"
    losses = kbuild.trim_losses(DEBIAN_LINES, after, HOMES)
    assert losses == {"core": ["HMM_MIRROR", "MITIGATION_VMSCAPE", "PREEMPT_NOTIFIERS"],
                      "drivers": ["8139TOO_8129", "BTREE"]}


def test_check_trim_names_an_unaccepted_core_loss_and_records_the_rest(tmp_path, patches):
    tree = tmp_path / "tree"
    (tree / "_build").mkdir(parents=True)
    for sym, home in HOMES.items():
        kconfig = tree / home
        kconfig.parent.mkdir(parents=True, exist_ok=True)
        with kconfig.open("a") as f:
            f.write(f"config {sym}\n\tbool\n")
    (patches / "configs" / "distro.modules").write_text("KVM\n!HMM_MIRROR\n!MITIGATION_VMSCAPE\n")
    s = spec("stock", patches, profile="distro")
    (tree / "_build" / ".config").write_text(DEBIAN_LINES)
    record = kbuild.trim_config(s, tree)
    assert record == {"modules_file": "distro.modules", "kept": ["KVM"],
                      "accepted_losses": ["HMM_MIRROR", "MITIGATION_VMSCAPE"], "trimmed": 2}
    # what olddefconfig leaves: PREEMPT_NOTIFIERS went with KVM_INTEL's select
    (tree / "_build" / ".config").write_text("CONFIG_HZ_250=y\nCONFIG_KVM=m\n")
    with pytest.raises(kbuild.InputError, match=r"turned off 1 built-in option\(s\) of core directories: "
                                                r"PREEMPT_NOTIFIERS; in kernel-patches/configs/distro.modules"):
        kbuild.check_trim(tree)
    (tree / "_build" / ".config").write_text("CONFIG_HZ_250=y\nCONFIG_KVM=m\nCONFIG_PREEMPT_NOTIFIERS=y\n")
    record = kbuild.check_trim(tree)
    assert (record["core_builtins_lost"], record["builtins_lost_with_drivers"], record["modules_left"]) == (
        ["HMM_MIRROR", "MITIGATION_VMSCAPE"], 2, 1)
    assert json.loads((tree / "_build" / kbuild.TRIM_RECORD).read_text()) == record


def test_the_modules_file_is_a_key_input_of_the_distro_profile_only(patches):
    if not kbuild.DISTRO_BASE_CONFIG.is_file():
        pytest.skip("linux-config-6.1 is not installed")   # installed by make setup
    distro, ci = spec("stock", patches, profile="distro"), spec("stock", patches)
    before = (key(distro), key(ci))
    with (patches / "configs" / "distro.modules").open("a") as f:
        f.write("VIRTIO_NET\n")
    assert key(distro) != before[0] and key(ci) == before[1]
    assert any(line.endswith("VIRTIO_BALLOON IOSCHED_BFQ VIRTIO_NET; accepted: BLK_MQ_RDMA BLK_MQ_STACKING "
                             "BLOCK_HOLDER_DEPRECATED GENERIC_IRQ_CHIP GENERIC_IRQ_INJECTION HMM_MIRROR "
                             "MAPPING_DIRTY_HELPERS VMAP_PFN KVM_AMD_SEV KVM_EXTERNAL_WRITE_TRACKING "
                             "PM_GENERIC_DOMAINS PM_GENERIC_DOMAINS_SLEEP X86_PMEM_LEGACY_DEVICE")
               for line in kbuild.key_inputs(distro, TOOLS))
