"""Bad input and faults cost a clear message and nothing else.

Every case records how it was injected, what the user saw and what was
kept; tests/conftest.py writes the table to docs/reliability.md."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kablabtest import (CACHE, PUBLISH, REPO, guest_images, kablab_leftovers, kernel_builds, playbook_argv,
                        record_case, run_playbook, start_command, stopped_on_error)

STOCK = {"name": "stock", "series": ["common"], "kconfig": [], "cmdline": ""}
XML_CMDLINE = "a</cmdline><on_poweroff>restart</on_poweroff><cmdline>"


def built_entries() -> set[str]:
    return {p.name for p in (CACHE / "kernels").glob("*") if p.is_dir()}


BAD_INPUT = [
    ("unknown variant", {"kablab_select_variants": ["nosuch"]},
     "kablab_select_variants must be a list (or comma-separated words), each one of ['stock', 'grouped', "
     "'split4k', 'jit2m'] (got ['nosuch'])"),
    ("unknown workload", {"kablab_workloads": ["nosuch"]},
     "kablab_workloads must be a list (or comma-separated words), each one of ['fault-inject', "),
    ("zero repetitions", {"kablab_runs": 0}, "kablab_runs must be an integer 1..1000 (got 0)"),
    ("negative blocks", {"kablab_blocks": -1}, "kablab_blocks must be an integer 1..1000 (got -1)"),
    ("unknown profile", {"kablab_profile": "nosuch"}, "kablab_profile must be one of ['smoke', 'full'] (got 'nosuch')"),
    ("unknown mode", {"kablab_mode": "nosuch"}, "kablab_mode must be one of ['ab', 'aa', 'slowdown'] (got 'nosuch')"),
    ("missing patch series", {"kablab_variants": [STOCK, {**STOCK, "name": "x", "series": ["common", "nosuch"]}]},
     "kablab_variants: series 'nosuch' has no directory (existing series: ['common', 'grouped', 'jit2m', 'split4k'])"),
    ("bad guest memory", {"guest_domain_memory_mib": 12}, "guest_domain_memory_mib must be an integer 256..262144 (got 12)"),
    ("bad vCPU count", {"guest_domain_vcpus": 0}, "guest_domain_vcpus must be an integer 1..64 (got 0)"),
    # inputs a new user tried that the first checks let through
    ("workload argument out of range", {"workload_syscall_mix_args": {"smoke": ["--read-bytes", "-5"]}},
     "workload_syscall_mix_args[smoke]: syscall-mix rejects its arguments ['--read-bytes', '-5', '--seed', '1']: "
     "syscall-mix: error: --read-bytes: '-5' is not a non-negative integer"),
    ("negative seed", {"kablab_seed": -1}, "kablab_seed must be an integer 0..18446744073709551615 (got -1)"),
    ("not a Kconfig line", {"kablab_variants": [STOCK, {**STOCK, "name": "x", "kconfig": ["NOT_A_CONFIG"]}]},
     "kablab_variants: variant 'x' kconfig line 'NOT_A_CONFIG' is not a Kconfig line; allowed: CONFIG_<SYMBOL>="),
    ("XML in a cmdline", {"kablab_variants": [STOCK, {**STOCK, "name": "x", "cmdline": XML_CMDLINE}]},
     f"kablab_variants: variant 'x' cmdline '{XML_CMDLINE}' is not a list of kernel parameters; "
     "allowed: kernel parameters separated by spaces, printable ASCII without <>&"),
]


@pytest.mark.parametrize("case,extra,message", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_fails_before_any_work(case, extra, message, tmp_path):
    before = built_entries()
    started = time.monotonic()
    run = run_playbook("site.yml", extra_vars={**extra, "kablab_reports_dir": str(tmp_path)}, timeout=600)
    took = time.monotonic() - started
    assert run.rc != 0
    assert message in run.output, run.output[-3000:]
    assert built_entries() == before
    assert not list(tmp_path.glob("*/results/*/*.json"))
    assert kablab_leftovers() == []
    assert took < 120, f"preflight took {took:.0f} s"
    record_case("bad input: " + case, f"`-e '{json.dumps(extra)}'`", message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
                "nothing built or booted")


def test_disk_nearly_full_fails_before_the_build(kernels, tmp_path):
    variant = {**STOCK, "name": "diskfull"}
    builds = kernel_builds()
    run = run_playbook("kernels.yml", extra_vars={"kablab_variants": [variant],
                                                  "kernel_build_min_free_gib": {"ci": 1000000, "distro": 1000000}})
    assert run.rc != 0
    assert "GiB free; building 1 variant(s) with the 'ci' config needs 1000000 GiB" in run.output, run.output[-3000:]
    assert kernel_builds() == builds
    assert not list((CACHE / "kernels").glob("diskfull-*"))
    assert kablab_leftovers() == []
    record_case("disk nearly full", "`kernel_build_min_free_gib` above the free space",
                "`<cache> has N GiB free; building 1 variant(s) ... needs M GiB`", "no tree, no cache entry")


# --------------------------------------------------------------- kernel build failure

def test_kernel_that_does_not_compile_names_the_error(kernels, tmp_path):
    """A series that applies but breaks the compile: the message carries the
    compiler's error and the log's tail, the log is kept beside the
    campaigns, and the cached kernels of the other variants stay valid."""
    patches = tmp_path / "kernel-patches"
    shutil.copytree(REPO / "kernel-patches", patches)
    source = (CACHE / "src/linux-source-6.1/mm/secretmem.c").read_text().splitlines()[:3]
    (patches / "broken").mkdir()
    (patches / "broken/0001-mm-secretmem-inject-a-build-failure.patch").write_text(
        "From: kablab tests <kablab@localhost>\nSubject: [PATCH] mm/secretmem: inject a build failure\n\n---\n"
        "--- a/mm/secretmem.c\n+++ b/mm/secretmem.c\n@@ -1,3 +1,4 @@\n"
        f" {source[0]}\n+#error \"kablab: injected build failure\"\n {source[1]}\n {source[2]}\n")
    stock_before = {p.name: (p / "build.json").stat().st_mtime for p in (CACHE / "kernels").glob("stock-*")}
    reports = tmp_path / "reports"
    run = run_playbook("kernels.yml", extra_vars={
        "kablab_variants": [STOCK, {**STOCK, "name": "brokenbuild", "series": ["common", "broken"]}],
        "kernel_build_patches_dir": str(patches), "kablab_reports_dir": str(reports)}, timeout=3600)
    assert run.rc != 0
    assert "variant brokenbuild: kernel build failed:" in run.output, run.output[-3000:]
    # the compiler's own line (JSON-escaped in Ansible's output)
    assert 'secretmem.c:2:2: error: #error \\"kablab: injected build failure\\"' in run.output
    assert "--- last lines of" in run.output
    kept = list((reports / "kernel-build-failures").glob("brokenbuild-*-build.log"))
    assert len(kept) == 1 and "injected build failure" in kept[0].read_text()
    assert f"full build log kept in {reports}/kernel-build-failures/{kept[0].name}" in run.output
    assert not list((CACHE / "kernels").glob("brokenbuild-*"))
    assert not list((CACHE / "trees").glob("brokenbuild-*"))
    # stock was cached before and is still the same, valid entry
    assert {p.name: (p / "build.json").stat().st_mtime for p in (CACHE / "kernels").glob("stock-*")} == stock_before
    again = run_playbook("kernels.yml", extra_vars={"kablab_variants": [STOCK]})
    assert again.rc == 0, again.output[-3000:]
    assert {p.name: (p / "build.json").stat().st_mtime for p in (CACHE / "kernels").glob("stock-*")} == stock_before
    assert kablab_leftovers() == []
    record_case("kernel does not build", "a series whose patch adds `#error` to mm/secretmem.c",
                '`variant brokenbuild: kernel build failed: mm/secretmem.c:2:2: error: #error ...` + the last 25 log lines',
                "full log in `reports/kernel-build-failures/`; no cache entry or tree; other variants' builds reused")


# --------------------------------------------------------------- one campaign, every run-time fault
#
# stock runs syscall-mix (good), fork-exec (its domain is suspended mid-run:
# a hung guest) and fault-inject (run 2 segfaults, run 4 hangs until the
# in-guest timeout kills it); "panicboot" is stock's kernel with an
# impossible root= and panics at boot. The first attempt is killed with
# SIGKILL as soon as a result exists; the second resumes it. While the
# second holds the domain prefix, a third campaign on the same cache is
# started and must stop at once.

PANIC = {**STOCK, "name": "panicboot", "build_from": "stock", "cmdline": "root=/dev/nonexistent"}
FAULT_WORKLOADS = ["syscall-mix", "fork-exec", "fault-inject"]
RUNS = 5
# fork-exec's runs take about 0.5 s under TCG; the hung-guest bound is
# (RUNS + warmup) x timeout + slack, kept short because the test waits it out.
FORK_EXEC_TIMEOUT_S, BLOCK_SLACK_S = 3, 15
HANG_BOUND_S = (RUNS + 1) * FORK_EXEC_TIMEOUT_S + BLOCK_SLACK_S


def fault_vars(reports: Path) -> dict:
    # Plain TCG (the path a KVM host takes too): the suite's campaign test
    # runs the TLB model, this one every fault without it.
    return {"kablab_profile": "smoke", "kablab_reports_dir": str(reports), "kablab_tlb_model": False,
            "kablab_variants": [STOCK, PANIC], "kablab_workloads": FAULT_WORKLOADS,
            "kablab_runs": RUNS, "kablab_warmup": 1, "kablab_blocks": 1,
            "workload_fault_inject_crash_runs": "2", "workload_fault_inject_hang_runs": "4",
            "workload_fault_inject_timeout_s": 10,
            "workload_fork_exec_timeout_s": FORK_EXEC_TIMEOUT_S, "run_block_slack_s": BLOCK_SLACK_S}


def start_site(extra: dict, log: Path) -> subprocess.Popen:
    # Output goes to a file: nobody reads a pipe while the test watches the
    # campaign, and a full pipe would block ansible-playbook.
    return start_command(playbook_argv("site.yml", extra_vars=extra), log)


def results_of(campaign: Path) -> list[Path]:
    return sorted((campaign / "results").glob("*/*.json"))


def frames_files(campaign_id: str) -> set[Path]:
    return set((PUBLISH / "logs" / campaign_id).glob("stock-boot*.frames"))


def block_running(campaign_id: str, workload: str, old: set[Path]) -> bool:
    """A stock boot not in OLD has begun WORKLOAD and not ended it (its
    frames file, written by the hypervisor as the guest prints)."""
    for f in frames_files(campaign_id) - old:
        text = f.read_text(errors="replace")
        if f"kablab-block {workload} begin" in text and f"kablab-block {workload} end" not in text:
            return True
    return False


def kill_booting_emulator(campaign_id: str, old: set[Path]) -> str | None:
    """SIGSEGV to the QEMU of a stock boot not in OLD while its kernel boots:
    what QEMU 7.2's TCG did by itself here, a few seconds into a boot.
    Returns the boot's console log name when the signal went out."""
    for log in sorted(set((PUBLISH / "logs" / campaign_id).glob("stock-boot*.log")) - old):
        text = log.read_text(errors="replace")
        # Forty lines in, libvirt has long finished starting the domain (a
        # QEMU killed during the start fails the start itself); init has
        # not run yet, and the readiness marker follows it within a second.
        if text.count("\n") < 40 or "Run /sbin/init" in text:
            continue
        try:
            pid = int(Path("/run/libvirt/qemu/kablab-stock.pid").read_text())
            if b"guest=kablab-stock" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            os.kill(pid, signal.SIGSEGV)
        except (OSError, ValueError):
            continue        # not started yet, or already gone: the next poll looks again
        return log.name
    return None


DOMAIN_LOCK = PUBLISH / "locks" / "domains-kablab.lock"


def lock_owner(path: Path) -> int:
    try:
        return json.loads(path.read_text() or "{}").get("owner_pid", 0)
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def fault_campaign(kernels, tmp_path_factory) -> dict:
    reports = tmp_path_factory.mktemp("fault-reports")
    extra = fault_vars(reports)
    first_log = reports.parent / "first-attempt.log"
    first = start_site(extra, first_log)
    deadline = time.time() + 1800
    killed_with = None
    # Killed in the middle of stock's boot: syscall-mix done in the guest,
    # fork-exec running, no result of that boot collected yet. The campaign
    # id is a hash of its inputs, so earlier runs' frames may be there.
    old = None
    with stopped_on_error([first]):
        while first.poll() is None and time.time() < deadline:
            latest = reports / "latest"
            if latest.exists():
                old = frames_files(latest.resolve().name) if old is None else old
                if block_running(latest.resolve().name, "fork-exec", old):
                    os.killpg(first.pid, signal.SIGKILL)
                    killed_with = len(results_of(latest.resolve()))
                    break
            time.sleep(0.5)
    first.wait(timeout=120)
    first_out = first_log.read_text()
    assert killed_with is not None, "the first attempt ended before it could be killed:\n" + first_out[-3000:]
    campaign = (reports / "latest").resolve()
    after_kill = {p.name: json.loads(p.read_text()) for p in results_of(campaign)}   # each parses

    old = frames_files(campaign.name)
    second_log = reports.parent / "second-attempt.log"
    second = start_site(extra, second_log)
    suspended = False
    emulator_killed = None
    third = None
    started = [second]
    with stopped_on_error(started):
        while second.poll() is None and time.time() < deadline + 1800:
            if third is None and lock_owner(DOMAIN_LOCK) == second.pid:
                third = {"builds": kernel_builds(), "images": guest_images(), "started": time.monotonic(),
                         "reports": reports.parent / "third-reports", "log": reports.parent / "third-attempt.log"}
                third["proc"] = start_site({**extra, "kablab_reports_dir": str(third["reports"])}, third["log"])
                started.append(third["proc"])
            if third is not None and "took" not in third and third["proc"].poll() is not None:
                third["took"] = time.monotonic() - third["started"]
                third["first_still_running"] = second.poll() is None
                third["after"] = (kernel_builds(), guest_images())
            if not suspended and block_running(campaign.name, "fork-exec", old):
                time.sleep(0.5)
                subprocess.run(["virsh", "-c", "qemu:///system", "suspend", "kablab-stock"], check=True,
                               capture_output=True)
                suspended = True
                logs_at_suspend = set((PUBLISH / "logs" / campaign.name).glob("stock-boot*.log"))
            # the boot that replaces the stopped one loses its emulator
            if suspended and emulator_killed is None:
                emulator_killed = kill_booting_emulator(campaign.name, logs_at_suspend)
            time.sleep(0.5)
    second.wait(timeout=120)
    if third is not None:
        third["proc"].wait(timeout=600)
        third["output"] = third["log"].read_text()
    out = second_log.read_text()
    assert second.returncode == 0, out[-5000:]
    return {"dir": campaign, "extra": extra, "killed_with": killed_with, "after_kill": after_kill,
            "suspended": suspended, "emulator_killed": emulator_killed, "output": out, "second_pid": second.pid,
            "third": third,
            "results": {f"{p.parent.name}/{p.stem}": json.loads(p.read_text()) for p in results_of(campaign)}}


def test_killed_campaign_resumes_to_a_full_set(fault_campaign):
    assert sorted(fault_campaign["results"]) == sorted(
        f"{v}/{w}-block0" for v in ("stock", "panicboot") for w in FAULT_WORKLOADS)
    tmp = list((fault_campaign["dir"] / "results").glob("*/.*"))
    assert all(p.suffix == ".tmp" for p in tmp)      # at most mkstemp leftovers, never a half result
    check = subprocess.run(["/usr/bin/python3", "-m", "kablab.results.load", str(fault_campaign["dir"])], cwd=REPO,
                           capture_output=True, text=True)
    assert check.returncode == 0 and "0 invalid" in check.stdout, check.stdout + check.stderr
    assert kablab_leftovers() == []
    # the killed run's domain lock was taken over, not reported as in use
    assert "is in use by the run with pid" not in fault_campaign["output"]
    record_case("interrupted campaign (kill -9)",
                "SIGKILL to the ansible-playbook process group while a boot runs its second workload",
                f"nothing at once; the re-run resumes ({fault_campaign['killed_with']} result(s) existed, "
                f"{len(fault_campaign['results'])} at the end), the killed boot's domain is removed first",
                "every result file parses (atomic writes); failed or partial blocks rerun, the old attempt in `attempts/`")
    record_case("stale lock of a killed campaign", "SIGKILL to a campaign holding the domain prefix lock",
                "nothing: the kernel drops its flock, the next `site.yml` takes the lock over and resumes",
                "the lock file names the new holder")


def test_boot_panic_marks_the_variant_failed(fault_campaign):
    camp = fault_campaign["dir"]
    for w in FAULT_WORKLOADS:
        r = fault_campaign["results"][f"panicboot/{w}-block0"]
        assert r["status"] == "failed" and r["failure"]["stage"] == "boot"
        # the panic was seen while waiting, not after the boot timeout
        assert r["failure"]["reason"].startswith("kablab-panicboot panicked at boot: Kernel panic - not syncing: VFS")
        assert "Kernel panic - not syncing" in r["failure"]["console_tail"]
        log = camp / r["failure"]["console_log"]
        assert log.is_file() and "Kernel panic - not syncing" in log.read_text(errors="replace")
    html = (camp / "index.html").read_text()
    box = html[html.index('id="failed-kernels"'):]
    assert "<b>panicboot</b>: 3 block(s) failed at boot" in box[:box.index("</div>")]
    assert fault_campaign["results"]["stock/syscall-mix-block0"]["status"] == "ok"
    assert kablab_leftovers() == []
    record_case("guest kernel panics at boot", "variant `build_from: stock`, cmdline `root=/dev/nonexistent`",
                "boot fails as soon as the console says `Kernel panic - not syncing` (no wait for the timeout), "
                "reason 'kablab-panicboot panicked at boot: Kernel panic - not syncing: VFS: ...'; "
                "report: 'panicboot: 3 block(s) failed at boot' at the top + console tail per block",
                "console log in `reports/<id>/logs/`; the other variants run and report")


def test_stopped_guest_is_bounded_destroyed_and_replaced(fault_campaign):
    assert fault_campaign["suspended"], "the test never saw fork-exec start in stock"
    r = fault_campaign["results"]["stock/fork-exec-block0"]
    assert r["status"] == "failed" and r["failure"]["stage"] == "run"
    assert r["failure"]["reason"].startswith(f"fork-exec did not end within {HANG_BOUND_S} s"), r["failure"]
    assert "the guest is taken for hung" in r["failure"]["reason"]
    # the next workload ran in a fresh boot of the same kernel
    nxt = fault_campaign["results"]["stock/fault-inject-block0"]
    assert nxt["status"] == "ok"
    # a second console log of stock: the stopped domain was destroyed and booted again
    logs = sorted(p.name for p in (fault_campaign["dir"] / "logs").glob("stock-boot*.log"))
    assert len(logs) >= 2, logs
    assert kablab_leftovers() == []
    record_case("guest hangs (stopped domain)", "`virsh suspend kablab-stock` while fork-exec runs",
                "the hypervisor's frame watcher fails the block after (runs + warmup) x timeout + slack "
                f"(here {HANG_BOUND_S} s): 'fork-exec did not end within {HANG_BOUND_S} s ...: "
                "the guest is taken for hung'",
                "the domain is destroyed and booted afresh; the workloads after it run there")


def test_emulator_lost_at_boot_boots_once_more(fault_campaign):
    killed = fault_campaign["emulator_killed"]
    assert killed, "the test never saw the replacement boot of stock start"
    out = fault_campaign["output"]
    assert "kablab-stock stopped while it booted (libvirt: shut off (crashed))" in out, out[-3000:]
    # the lost boot's console log is kept, and the workloads ran in the next boot
    logs = sorted(p.name for p in (fault_campaign["dir"] / "logs").glob("stock-boot*.log"))
    assert killed in logs and logs[-1] != killed, logs
    after = fault_campaign["results"]["stock/fault-inject-block0"]
    assert after["status"] == "ok" and f"stock-boot{after['guest']['boot']}.log" not in (killed, logs[0])
    # the results of the next boot name the lost one, and the report says so
    lost_boot = int(killed.removeprefix("stock-boot").removesuffix(".log"))
    assert after["guest"]["emulator_lost"] == [{"boot": lost_boot, "libvirt_state": "shut off (crashed)",
                                                "console_log_campaign": f"logs/{killed}"}]
    html = (fault_campaign["dir"] / "index.html").read_text()
    row = html[html.index('id="replaced-boots"'):]
    assert (f"stock boot {after['guest']['boot']} on {after['host']['name']} replaced boot {lost_boot}: its QEMU ended "
            f"while the kernel booted (libvirt: shut off (crashed); console logs/{killed})") in row[:row.index("</tr>")]
    text = (fault_campaign["dir"] / "summary.txt").read_text()
    assert "== boots booted once more" in text and f"replaced boot {lost_boot}: its QEMU" in text, text[-3000:]
    assert kablab_leftovers() == []
    record_case("emulator dies while the guest boots", "SIGSEGV to the QEMU process of a booting stock domain",
                "within 2 s: 'kablab-stock stopped while it booted (libvirt: shut off (crashed)): its emulator "
                "ended, not the guest kernel'; the variant boots once more (a second loss fails the boot); "
                "the report's provenance lists the boot under 'boots booted once more'",
                "the lost boot's console log; the workloads run in the next boot, whose results name the lost "
                "one (`guest.emulator_lost`)")


def test_crashed_and_hung_runs_are_excluded(fault_campaign):
    r = fault_campaign["results"]["stock/fault-inject-block0"]
    runs = r["runs"]
    assert len(runs) == RUNS
    assert [x["included"] for x in runs] == [True, False, True, False, True]
    # the run's own status (run-N.rc), not the wrapper's exit 1 that hyperfine saw
    assert (runs[1]["exit_code"], runs[1]["exclude_reason"]) == (139, "exit code 139 (SIGSEGV)")
    assert (runs[3]["exit_code"], runs[3]["exclude_reason"]) == (137, "exit code 137 (SIGKILL)")
    merged = json.loads((fault_campaign["dir"] / "results.json").read_text())
    rows = [x for x in merged["rows"] if x["workload"] == "fault-inject" and x["variant"] == "stock"]
    assert rows and {x["run_index"] for x in rows if x["included"]} == {0, 2, 4}, rows[:3]
    html = (fault_campaign["dir"] / "index.html").read_text()
    assert runs[1]["exclude_reason"] in html
    # each run's own files, unjoined (raw/<variant>/<block>/run-N.*, N from 1)
    raw = fault_campaign["dir"] / "raw/stock/fault-inject-block0"
    crashed = (raw / "run-2.err").read_text()
    assert "fault-inject: run 2 crashes (segv)" in crashed and "Segmentation fault" in crashed
    # the timeout kills the run's whole process group: its status is the
    # runner's, and its stderr ends where it hung
    assert (raw / "run-4.rc").read_text().strip() == "137"
    assert "fault-inject: run 4 hangs" in (raw / "run-4.err").read_text()
    assert kablab_leftovers() == []
    record_case("workload crashes (signal)", "fault-inject `--crash-runs 2` (raise SIGSEGV)",
                "run 2 listed under 'Excluded runs' as 'exit code 139 (SIGSEGV)'; 'Segmentation fault' in its stderr (run-2.err)",
                "the run's stderr in raw/; the other runs are the statistics")
    record_case("guest hangs (workload never returns)", "fault-inject `--hang-runs 4`, per-run timeout 10 s",
                "run 4 killed in the guest after 10 s: 'exit code 137 (SIGKILL)', its stderr (run-4.err) ends at the hang, excluded", "the block and guest go on")


def test_corrupt_result_is_named_and_excluded(fault_campaign, tmp_path):
    camp = tmp_path / fault_campaign["dir"].name
    shutil.copytree(fault_campaign["dir"], camp, symlinks=True, ignore=shutil.ignore_patterns("ssh"))
    victim = camp / "results/stock/syscall-mix-block0.json"
    victim.write_text(victim.read_text()[:200])
    run = run_playbook("report.yml", extra_vars={"kablab_reports_dir": str(tmp_path),
                                                 "kablab_campaign_id": camp.name})
    assert run.rc == 0, run.output[-3000:]
    html = (camp / "index.html").read_text()
    box = html[html.index('id="invalid-files"'):]
    assert "results/stock/syscall-mix-block0.json" in box[:box.index("</div>")]
    merged = json.loads((camp / "results.json").read_text())
    assert [f["path"] for f in merged["invalid_files"]] == ["results/stock/syscall-mix-block0.json"]
    assert not [x for x in merged["rows"] if x["workload"] == "syscall-mix" and x["variant"] == "stock"]
    check = subprocess.run(["/usr/bin/python3", "-m", "kablab.results.load", "--check", str(victim)], cwd=REPO,
                           capture_output=True, text=True)
    assert check.returncode != 0      # a resumed campaign measures the block again
    record_case("corrupt result file", "a result JSON truncated to 200 bytes, then `playbooks/report.yml`",
                "report renders; 'Invalid result files' names `results/stock/syscall-mix-block0.json` and why",
                "the file is excluded from every table; a resume measures that block again")


# --------------------------------------------------------------- two campaigns, one cache

def test_second_campaign_stops_at_once_and_the_first_completes(fault_campaign):
    """A campaign holds the domain prefix for its whole run: a second one in
    the same cache (here: started while the fault campaign's resume runs)
    stops at once naming it (pid, start time, command), and the first
    finishes with every result."""
    third = fault_campaign["third"]
    assert third is not None, "the resumed fault campaign never held the domain lock"
    assert third["proc"].returncode != 0
    assert third["first_still_running"], "the first campaign ended before the second one was checked"
    msg = f"kablab: campaign on domains kablab-* is in use by the run with pid {fault_campaign['second_pid']} started "
    assert msg in third["output"], third["output"][-3000:]
    assert "playbooks/site.yml" in third["output"][third["output"].index(msg):]
    # it stopped before building anything (the first campaign builds nothing either: all cached)
    assert third["after"] == (third["builds"], third["images"])
    assert not list(third["reports"].glob("*/results/*/*.json"))
    assert third["took"] < 120, f"the second campaign took {third['took']:.0f} s to stop"
    # the first one completed: every block has its result (test_killed_campaign_resumes_to_a_full_set
    # checks each of them)
    assert len(fault_campaign["results"]) == 2 * len(FAULT_WORKLOADS)
    assert kablab_leftovers() == []
    record_case("second campaign on the same domains", "`site.yml` started while another campaign runs "
                "(same cache, same domain prefix)",
                "it stops at once: 'kablab: campaign on domains kablab-* is in use by the run with pid N "
                "started T (ansible-playbook playbooks/site.yml ...)'",
                "the first campaign runs on and completes with every result")
