"""kablab.lab.validate: the preflight checks, and the domain XML template's
escaping."""
from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import jinja2
import pytest
import yaml

from kablabtest import REPO
from kablab.lab.validate import (check_cmdline, check_kconfig_line, check_variants, input_errors,
                             workload_argv, workload_spec,
                             workload_dry_run)

BUILD = REPO / "workloads" / "build"
STOCK = {"name": "stock", "series": ["common"], "kconfig": [], "cmdline": ""}
XML_CMDLINE = "a</cmdline><on_poweroff>restart</on_poweroff><cmdline>"


@pytest.mark.parametrize("line", ["CONFIG_X=y", "CONFIG_X=m", "CONFIG_X=n", "CONFIG_NR_CPUS=64", "CONFIG_A=-1",
                                  "CONFIG_B=0x1000", 'CONFIG_S="a b"', 'CONFIG_S=""', 'CONFIG_S="q\\"x"',
                                  "# CONFIG_DEBUG_INFO is not set", "CONFIG_VMALLOC_GROUP_PAGES=y"])
def test_kconfig_lines(line):
    assert check_kconfig_line(line)


@pytest.mark.parametrize("line", ["NOT_A_CONFIG", "CONFIG_X", "CONFIG_X=yes", "CONFIG_X=y # c", "config_x=y",
                                  "CONFIG_X=y\nCONFIG_Y=y", 'CONFIG_S="open', "#CONFIG_X is not set",
                                  "CONFIG_=y", "CONFIG X=y", "", 5, None])
def test_not_kconfig_lines(line):
    assert not check_kconfig_line(line)


@pytest.mark.parametrize("cmdline", ["", "nohugepages_mapping", "init_on_free=1 mitigations=off",
                                     "a=b,c:d/e.f", "  spaced   out "])
def test_good_cmdlines(cmdline):
    assert check_cmdline(cmdline)


@pytest.mark.parametrize("cmdline", [XML_CMDLINE, "a&b", "a'b", 'a="b c"', "a>b", "tab\there", "new\nline",
                                     "é=1", "\x7f", None, ["a"]])
def test_bad_cmdlines(cmdline):
    assert not check_cmdline(cmdline)


def test_variant_messages_name_the_variable_the_value_and_what_is_allowed():
    bad = [STOCK, {**STOCK, "name": "x", "kconfig": ["NOT_A_CONFIG"], "cmdline": XML_CMDLINE}]
    k, c = check_variants(bad)
    assert k.startswith("kablab_variants: variant 'x' kconfig line 'NOT_A_CONFIG' is not a Kconfig line; allowed: ")
    assert "CONFIG_<SYMBOL>=<y|m|n|number|" in k
    assert c.startswith(f"kablab_variants: variant 'x' cmdline '{XML_CMDLINE}' is not a list of kernel parameters")
    assert "without <>&" in c
    assert check_variants([STOCK, {**STOCK, "kconfig": "CONFIG_X=y"}]) == [
        "kablab_variants: variant 'stock' kconfig must be a list of lines (got 'CONFIG_X=y')"]
    assert check_variants("x") and check_variants(["x"])


def test_input_errors_lists_each_message_once():
    bad = {**STOCK, "kconfig": ["NOPE"]}
    errs = input_errors([bad, bad])
    assert len(errs) == 1 and "'NOPE' is not a Kconfig line" in errs[0]
    assert input_errors([STOCK]) == []


@pytest.fixture(scope="module")
def binaries():
    import subprocess
    subprocess.run(["make", "-s", "-C", str(REPO / "workloads")], check=True, capture_output=True)
    return BUILD


def test_workload_dry_run_returns_the_binarys_own_message(binaries):
    assert workload_dry_run(binaries / "syscall-mix", ["--iterations", "10", "--seed", "1"], "v") is None
    msg = workload_dry_run(binaries / "syscall-mix", ["--read-bytes", "-5", "--seed", "1"],
                           "workload_syscall_mix_args[smoke]")
    assert msg.startswith("workload_syscall_mix_args[smoke]: syscall-mix rejects its arguments")
    assert "syscall-mix: error: --read-bytes: '-5' is not a non-negative integer" in msg


def test_workload_dry_run_stands_in_for_the_guest_module_path(binaries):
    args = ["--module", "/run/kablab/config/variant/kablab_churn.ko", "--pipes", "1000", "--seed", "1"]
    assert workload_dry_run(binaries / "module-bpf-churn", args, "v") is None
    assert "--bpf-progs" in workload_dry_run(binaries / "module-bpf-churn", args + ["--bpf-progs", "x"], "v")


def render_domain(cmdline: str, name: str = "kablab-stock", log: str = "/l\"og", **more) -> str:
    import os
    import re
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "roles/guest_domain/templates"),
                             undefined=jinja2.StrictUndefined)
    env.filters["to_uuid"] = lambda s: str(uuid.uuid5(uuid.NAMESPACE_URL, s))
    env.filters["basename"] = os.path.basename
    env.filters["regex_replace"] = lambda s, a, b: re.sub(a, b, s)
    env.filters["bool"] = lambda v: str(v).lower() in ("true", "1", "yes", "on")   # Ansible's, as it reads strings
    role_vars = yaml.safe_load((REPO / "roles/guest_domain/vars/main.yml").read_text())
    return env.get_template("domain.xml.j2").render(**{
        **role_vars,
        "ansible_managed": "managed", "guest_domain_accel_result": {"domain_type": "qemu", "accel": "tcg"},
        "guest_domain_memory_mib": 2048, "guest_domain_memory_backing": "default", "guest_domain_vcpus": 2,
        "guest_domain_vcpu_pinning": ["0"], "guest_domain_machine": "pc", "guest_domain_disk_cache": "writeback",
        "_dom": {"name": name, "kernel": "/k/bz<Image", "cmdline": cmdline, "overlay": "/o'v", "config_disk": "/c&d",
                 "log": log, "port": 10022, "variant": "split4k"}, **more})


def test_domain_xml_tlb_plugin():
    """kablab_tlb_model: shared memfd memory and -plugin with this kernel's root, one file per boot."""
    xml = render_domain("console=ttyS0", log="/var/lib/kablab/logs/c/split4k-boot2.log",
                        guest_domain_memory_backing="memfd", guest_domain_tlb_plugin="/b/libkablab-tlb.so",
                        guest_domain_tlb_plugin_published="/p/libkablab-tlb.so",
                        guest_domain_tlb_roots={"split4k": "0x1c0a000"}, guest_domain_tlb_dir="/p/c",
                        guest_domain_tlb_plugin_args="l1d_4k=64:4")
    root = ET.fromstring(xml)
    assert root.find("memoryBacking/source").get("type") == "memfd"
    assert root.find("memoryBacking/access").get("mode") == "shared"
    ns = "{http://libvirt.org/schemas/domain/qemu/1.0}"
    args = [a.get("value") for a in root.iter(ns + "arg")]
    i = args.index("-plugin")
    assert args[i + 1] == "/p/libkablab-tlb.so,root=0x1c0a000,out=/p/c/split4k-boot2.jsonl,l1d_4k=64:4"
    assert "-netdev" in args                   # the network stays
    assert "-icount" not in args
    icount = ET.fromstring(render_domain("console=ttyS0", guest_domain_memory_backing="memfd",
                                         guest_domain_tlb_plugin="/b/libkablab-tlb.so",
                                         guest_domain_tlb_plugin_published="/p/libkablab-tlb.so",
                                         guest_domain_tlb_roots={"split4k": "0x1"}, guest_domain_tlb_dir="/p/c",
                                         guest_domain_tlb_plugin_args="", guest_domain_tlb_icount=True))
    args = [a.get("value") for a in icount.iter(ns + "arg")]
    assert args[args.index("-icount") + 1] == "shift=0"
    plain = ET.fromstring(render_domain("console=ttyS0"))
    assert plain.find("memoryBacking") is None
    assert "-plugin" not in [a.get("value") for a in plain.iter(ns + "arg")]


def test_domain_xml_escapes_every_value():
    xml = render_domain("console=ttyS0 " + XML_CMDLINE, name="kablab-a&b")
    root = ET.fromstring(xml)
    assert root.find("os/cmdline").text == "console=ttyS0 " + XML_CMDLINE
    assert root.find("on_poweroff").text == "destroy" and len(root.findall("on_poweroff")) == 1
    assert root.find("name").text == "kablab-a&b"
    assert root.find("os/kernel").text == "/k/bz<Image"
    assert [d.find("source").get("file") for d in root.findall("devices/disk")] == ["/o'v", "/c&d"]
    assert root.find("devices/serial/source").get("path") == "/l\"og"


def _settings(name: str) -> dict:
    """A workload role's defaults as the load entry point reads them."""
    import yaml
    return yaml.safe_load((REPO / "roles" / f"workload_{name.replace('-', '_')}" / "defaults/main.yml").read_text())


def test_workload_spec_is_args_then_always_then_seed():
    s = {"workload_syscall_mix_args": {"smoke": ["--iterations", 10]}, "workload_syscall_mix_timeout_s": "30",
         "workload_syscall_mix_primary_metric": "ops_per_s"}
    assert workload_spec("syscall-mix", "smoke", 3, s, 5, 0) == {
        "name": "syscall-mix", "var": "workload_syscall_mix_args[smoke]", "argv": ["--iterations", "10", "--seed", "3"],
        "timeout_s": 30, "primary_metric": "ops_per_s", "model_measure": "direct-map dTLB walks",
        "runs": 5, "warmup": 0, "prepare": "", "error": None}
    assert workload_argv("syscall-mix", "smoke", 3, s)["argv"] == ["--iterations", "10", "--seed", "3"]
    m = workload_spec("module-bpf-churn", "smoke", 1, {**_settings("module-bpf-churn"),
                                                       "workload_module_bpf_churn_guest_ko": "/g/k.ko"})
    assert m["argv"][-4:] == ["--module", "/g/k.ko", "--seed", "1"] and m["prepare"] == "kmod"
    f = workload_spec("fault-inject", "smoke", 1, {**_settings("fault-inject"),
                                                   "workload_fault_inject_crash_runs": "2",
                                                   "workload_fault_inject_runs": 4})
    assert f["argv"] == ["--crash-runs", "2", "--crash-how", "segv", "--hang-runs", "none", "--hang-s", "120",
                         "--seed", "1"]
    assert (f["runs"], f["timeout_s"]) == (4, 60)
    ss = workload_spec("seccomp-stack", "smoke", 1, _settings("seccomp-stack"))
    assert ss["model_measure"] == ["kernel iTLB walks", "kernel iTLB L1 misses"] and ss["error"] is None
    for bad in ([], ["kernel iTLB walks", "iTLB walks"], "iTLB walks"):
        assert "model_measure must be one of" in workload_spec(
            "seccomp-stack", "smoke", 1, {**_settings("seccomp-stack"),
                                          "workload_seccomp_stack_model_measure": bad})["error"]


def test_workload_spec_names_the_bad_variable():
    s = {"workload_syscall_mix_args": {"smoke": []}, "workload_syscall_mix_timeout_s": 30,
         "workload_syscall_mix_primary_metric": "ops_per_s"}
    assert "no entry for profile 'full'" in workload_spec("syscall-mix", "full", 1, s)["error"]
    assert "must be a list of strings" in workload_spec(
        "syscall-mix", "smoke", 1, {**s, "workload_syscall_mix_args": {"smoke": "--iterations 5"}})["error"]
    assert workload_spec("syscall-mix", "smoke", 1, {**s, "workload_syscall_mix_timeout_s": 0})["error"] == \
        "workload_syscall_mix_timeout_s must be an integer >= 1 (got 0)"
    assert workload_spec("syscall-mix", "smoke", 1, {**s, "workload_syscall_mix_runs": "x"})["error"].startswith(
        "workload_syscall_mix_runs must be an integer >= 1")
    assert "names a setting that is not defined" in workload_spec(
        "syscall-mix", "smoke", 1, {**s, "workload_syscall_mix_args_always": ["{nope}"]})["error"]
    assert "primary_metric" in workload_spec(
        "syscall-mix", "smoke", 1, {**s, "workload_syscall_mix_primary_metric": ""})["error"]


def test_every_workload_role_is_valid_data():
    roles = sorted((REPO / "roles").glob("workload_*"))
    names = [r.name[len("workload_"):].replace("_", "-") for r in roles]
    assert len(names) >= 10
    for name in names:
        settings = {k: v for k, v in _settings(name).items() if "{{" not in str(v)}
        for profile in ("smoke", "full"):
            assert workload_spec(name, profile, 1, settings)["error"] is None, name


def test_workload_args_cli_prints_every_rejection(binaries):
    import json
    import subprocess
    plan = [{"name": "syscall-mix", "var": "a[smoke]", "argv": ["--read-bytes", "-5"]},
            {"name": "syscall-mix", "var": "b[smoke]", "argv": ["--iterations", "5"]},
            {"name": "page-fault", "error": "workload_page_fault_args: bad"}]
    run = subprocess.run(["/usr/bin/python3", "-m", "kablab.lab.validate", "workload-args", "--bin", str(binaries),
                          json.dumps(plan)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.splitlines()[0].startswith("a[smoke]: syscall-mix rejects")
    assert run.stderr.splitlines()[1] == "workload_page_fault_args: bad"
