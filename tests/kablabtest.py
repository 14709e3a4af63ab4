"""Helpers shared by the tests: run the lab's playbooks exactly as a user does."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KABLAB_CACHE_DIR", Path.home() / ".cache" / "kablab"))
# guest_domain_publish_dir's default: kernels, overlays and console logs libvirt reads
PUBLISH = Path("/var/lib/kablab")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass
class PlaybookRun:
    rc: int
    output: str

    def recap(self) -> dict[str, dict[str, int]]:
        return {
            m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
            for m in RECAP.findall(self.output)
        }


# Ansible's output as the tests read it: no colour codes.
ANSIBLE_ENV = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


def playbook_argv(playbook: str | Path, *args: str, extra_vars: dict | None = None) -> list[str]:
    """ansible-playbook's argv for one of the lab's playbooks (a bare name
    is playbooks/<name>) or a playbook file, with -e JSON last."""
    play = str(playbook) if "/" in str(playbook) else f"playbooks/{playbook}"
    return ["ansible-playbook", play, *args] + (["-e", json.dumps(extra_vars)] if extra_vars else [])


def run_command(argv: list[str], cwd: Path = REPO, env: dict | None = None, timeout: int = 3600) -> PlaybookRun:
    """A command as a user types it (ansible-playbook, make), output kept for asserts."""
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**ANSIBLE_ENV, **(env or {})})
    return PlaybookRun(proc.returncode, proc.stdout + proc.stderr)


def run_playbook(playbook: str | Path, *args: str, extra_vars: dict | None = None,
                 env: dict | None = None, timeout: int = 3600, cwd: Path = REPO) -> PlaybookRun:
    """Run ansible-playbook from the repo root; output is kept for asserts."""
    return run_command(playbook_argv(playbook, *args, extra_vars=extra_vars), cwd, env, timeout)


def start_command(argv: list[str], log: Path, cwd: Path = REPO) -> subprocess.Popen:
    """A command left running in its own session (a test may signal it),
    its output to LOG: nobody reads a pipe while the test watches, and a
    full pipe would block it."""
    with log.open("w") as out:
        return subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, env=ANSIBLE_ENV)


@contextmanager
def stopped_on_error(procs: list[subprocess.Popen]) -> Iterator[None]:
    """A test that fails while it watches the campaigns it started (each in
    its own session) stops them: left running, one would hold the domains'
    lock against the next test. PROCS is read at the failure, so a campaign
    started inside the block can be appended to it."""
    try:
        yield
    except BaseException:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=120)
        raise


def kablab_leftovers() -> list[str]:
    """Domains, overlays and config disks, QEMU processes and forwarded ports a
    kablab run could leave."""
    left = []
    domains_dir = PUBLISH / "domains"
    if domains_dir.is_dir():
        left += [f"domain dir {d}" for d in domains_dir.iterdir() if d.name.startswith("kablab")]
    names = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True).stdout.split()
    left += [f"domain {n}" for n in names if n.startswith("kablab")]
    procs = subprocess.run(["pgrep", "-af", "qemu-system.*kablab"], capture_output=True, text=True).stdout
    left += [f"process {p}" for p in procs.splitlines() if p.strip()]
    ports = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    left += [f"port {l.split()[3]}" for l in ports.splitlines() if "qemu" in l]
    return left


# --- tools: the suite installs what it needs (make setup / host_setup), so a
# missing one is a broken setup and fails the test; it never skips it ---
def need(*tools: str) -> None:
    """Fail the calling test, naming every tool of `tools` not on PATH."""
    import shutil
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        import pytest
        pytest.fail(f"missing tool(s) {missing}: install them (make setup installs the lab's tools)",
                    pytrace=False)


# --- what a run built: unchanged mtimes mean nothing was built again ---
def kernel_builds() -> dict[str, float]:
    """Every cached kernel build (kernels/<entry>/build.json) and its mtime."""
    return {p.parent.name: p.stat().st_mtime for p in (CACHE / "kernels").glob("*/build.json")}


def guest_images() -> dict[str, float]:
    """Every file of the cached guest images and its mtime."""
    return {str(p): p.stat().st_mtime for p in (CACHE / "images").rglob("*") if p.is_file()}


# --- direct kernel boots (test_kernels.py, test_grouped.py) ---
def boot(kernel: str, cmdline: str, init: str, tmp_path: Path, files: list[str] = (),
         timeout: int = 240) -> str:
    """Boot a kernel straight into `init` (scripts/kablab-qemu-boot, no libvirt);
    returns the console log."""
    script = tmp_path / "init.sh"
    script.write_text(init)
    log = tmp_path / "console.log"
    cmd = [str(REPO / "scripts/kablab-qemu-boot"), "--kernel", kernel, "--init", str(script),
           "--append", cmdline, "--timeout", str(timeout), "--log", str(log)]
    for f in files:
        cmd += ["--file", f]
    subprocess.run(cmd, check=False, timeout=timeout + 60)
    return log.read_text(errors="replace")


def meminfo(console: str) -> dict[str, int]:
    """The KABLAB-MEMINFO lines a boot's init printed (kB)."""
    return {m[0]: int(m[1]) for m in re.findall(r"KABLAB-MEMINFO (\w+):\s+(\d+) kB", console)}


def recorded_boot(record: dict, **guest) -> dict:
    """The run role's --boot for a boot, from the record a real boot wrote
    (tests/fixtures/guest-boot/boot-record.json): the inverse of
    kablab.lab.bootrun.boot_record, so a test feeds collect what the run role
    would have."""
    from kablab.lab.bootrun import GUEST_KEYS
    g = record["guest"]
    return {"campaign": record["campaign"],
            "entry": {"variant": record["variant"], "block": record["block"], "order_index": record["order_index"],
                      "host": record["host"]["name"]},
            "host": {k: record["host"][k] for k in ("name", "lane", "cpu_model", "kernel", "doctor")},
            "guest": {**{k: g[k] for k in GUEST_KEYS if k in g},
                      "console_log_campaign": f"logs/{record['variant']}-boot{g['boot']}.log", **guest},
            "config": {**{k: v for k, v in g.items() if k not in GUEST_KEYS}, "accel": record["host"]["accel"],
                       "tlb_model": None},
            "kernel": record["kernel"], "sha256": {}, "perf_events": ["task-clock"], "noise": record["host"]["noise"]}


# --- reliability table, filled by tests/test_faults.py; conftest.py writes it
# here after a whole-suite run (never over the tracked docs/reliability.md) ---
RELIABILITY_BUILD = REPO / "build" / "reliability.md"
_CASES: list[dict] = []


def record_case(case: str, injected: str, seen: str, kept: str) -> None:
    """Called by a fault test after its assertions passed."""
    _CASES.append({"case": case, "injected": injected, "seen": seen, "kept": kept})




# --- headless Chromium (report tests): shared by tests/report and tests/test_campaign.py ---
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
FIRST_SCREEN = "--window-size=1280,900"
# Injected into a COPY of the report (the report itself runs no script): records the
# first screen's geometry and the panels' content in <body data-probe="JSON">.
PROBE_JS = """<script>
(function () {
  // the first matrix: the modelled verdicts in a TLB-model campaign, else the time verdicts
  var t = document.getElementById('model-matrix') || document.getElementById('verdict-matrix');
  var r = t ? t.getBoundingClientRect() : null;
  var cells = function (sel) {
    return Array.prototype.map.call(document.querySelectorAll(sel + ' tr'), function (tr) {
      return Array.prototype.map.call(tr.cells, function (c) { return c.innerText.trim(); });
    });
  };
  var dm = Array.prototype.map.call(
    document.querySelectorAll('#direct-map tr[data-variant]'),
    function (tr) { return Object.assign({}, tr.dataset); });
  var prov = document.getElementById('provenance');
  var provText = '';
  for (var n = prov; n; n = n.nextElementSibling) { provText += n.innerText + '\\n'; }
  document.body.setAttribute('data-probe', JSON.stringify({
    top: r && r.top, bottom: r && r.bottom, height: window.innerHeight,
    visible: !!(t && t.offsetParent !== null), first: t ? t.id : null,
    matrix: t ? cells('#' + t.id) : [], dm: dm, provenance: provText,
    text: document.body.innerText}));
})();
</script>"""


def run_chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """chromium --headless with a throw-away profile; None-safe for a missing binary
    is the caller's business (shutil.which("chromium"))."""
    import shutil
    import tempfile
    exe = shutil.which("chromium")
    if exe is None:
        raise FileNotFoundError("chromium not installed (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="kablab-chromium-")
    try:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def console_lines(stderr: str) -> list[str]:
    """Console messages and uncaught exceptions Chromium logged (see test_browser.py)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def report_probe(index_html: Path, workdir: Path) -> dict:
    """Open a copy of a rendered report with PROBE_JS in headless Chromium (first
    screen FIRST_SCREEN) and return what the probe saw."""
    import html as htmlmod
    workdir.mkdir(parents=True, exist_ok=True)
    probe = workdir / "probe.html"
    text = index_html.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", PROBE_JS + "</body>"), encoding="utf-8")
    p = run_chromium(FIRST_SCREEN, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    m = re.search(r'data-probe="([^"]*)"', p.stdout)
    if p.returncode != 0 or not m:
        raise AssertionError(f"probe failed (rc {p.returncode}): {p.stderr[-2000:]}")
    return json.loads(htmlmod.unescape(m.group(1)))


def report_screenshot(index_html: Path, png: Path) -> subprocess.CompletedProcess[str]:
    """The first screen of a report as PNG (kept as a test artifact), console logged."""
    return run_chromium(FIRST_SCREEN, "--enable-logging=stderr", "--v=0",
                        f"--screenshot={png}", index_html.as_uri())


def build_guest_tool(out_dir: Path, name: str) -> Path:
    """A static helper from tests/guest-tools/<name>.c, built the way the workloads are."""
    out = out_dir / name
    subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(REPO / "tests/guest-tools" / f"{name}.c")], check=True)
    return out


def build_kmod(kernel: dict, dest: Path, src_dir: Path, name: str) -> Path:
    """A guest-only test module (src_dir: its Kbuild, Makefile and source)
    built against a kernel of the manifest, outside the kernel tree."""
    import shutil
    src = dest / name
    shutil.copytree(src_dir, src)
    subprocess.run(["make", "-s", f"KDIR={kernel['build']['tree']}", "KOBJ=_build"], cwd=src, check=True,
                   capture_output=True)
    return src / f"{name}.ko"


PMD_PIN_DIR = REPO / "tests/guest-tools/pmd-pin"
# The fragmented regime on demand, for a busybox init that has /lib/kablab_pmd_pin.ko
# (build_kmod(kernel, dir, PMD_PIN_DIR, "kablab_pmd_pin")): the module keeps one
# page of every free 2 MB block, so none is left and compaction cannot empty
# those (each holds a pinned unmovable page); blocks that movable pages used at
# the time of the scan it can still empty. What is freed after its scan (the
# insmod itself, the module's init memory) can make a whole block again, as seen
# once in CI: the init scans again, at most five times, while /proc/buddyinfo
# shows a free block of order 9 or more. The caches are dropped first, so that
# less is freed after the scan. Prints KABLAB-PIN-RC, KABLAB-PIN (one line per
# scan) and KABLAB-BUDDY lines.
PMD_PIN_SH = r"""
sync
echo 3 > /proc/sys/vm/drop_caches
insmod /lib/kablab_pmd_pin.ko
echo "KABLAB-PIN-RC $?"
for i in 1 2 3 4 5; do
    awk '{ for (f = 14; f <= NF; f++) n += $f } END { exit n > 0 ? 0 : 1 }' /proc/buddyinfo || break
    sleep 0.2
    echo 1 > /sys/module/kablab_pmd_pin/parameters/repin
done
dmesg | grep 'kablab_pmd_pin: pinned' | sed 's/.*kablab_pmd_pin: /KABLAB-PIN /'
sed 's/^/KABLAB-BUDDY /' /proc/buddyinfo
"""


def free_pmd_blocks(console: str) -> int:
    """Free blocks of order >= 9 (2 MB) in the KABLAB-BUDDY lines (/proc/buddyinfo)."""
    total = 0
    for line in re.findall(r"KABLAB-BUDDY (Node .*)", console):
        counts = [int(c) for c in line.split()[4:]]
        total += sum(c << (order - 9) for order, c in enumerate(counts) if order >= 9)
    return total
