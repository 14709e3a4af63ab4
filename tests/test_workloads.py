"""Tests for workloads/: the build, the harness contract (docs/design.md
"Workload binaries and harness output") and every workload's CLI.

module-bpf-churn and secretmem-frag are never run for real on the host
(they load modules/BPF programs and change the direct map): only their
--help, usage errors and --dry-run paths are exercised here.
"""
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kablab.lab import bootrun

from kablab.results import collect, rawframe
from kablabtest import REPO as ROOT
from kablabtest import need, recorded_boot, run_playbook

WL = ROOT / "workloads"
BUILD = WL / "build"

ALL = sorted(p.name for p in WL.iterdir()
             if p.is_dir() and p.name not in ("lib", "build")
             and (p / f"{p.name}.c").is_file())
HOST_UNSAFE = {"module-bpf-churn", "secretmem-frag", "seccomp-stack"}

# small, fast parameters for the workloads that are safe on the host
HOST_SAFE = {
    "pipe-pingpong": ["--iterations", "200"],
    "unix-socket": ["--iterations", "200", "--msg-size", "128"],
    "pagecache-read": ["--size-mib", "4", "--iterations", "1"],  # + --dir
    "page-fault": ["--size-mib", "2", "--iterations", "2"],
    "fork-exec": ["--iterations", "10"],
    "syscall-mix": ["--iterations", "3000"],
    "hackbench": ["--groups", "1", "--fds", "4", "--loops", "10",
                  "--iterations", "1"],
    "fault-inject": ["--iterations", "1000"],
}
# options whose zero value is a usage error
SIZE_OPTS = {
    "pagecache-read": ["--size-mib"],
    "page-fault": ["--size-mib"],
    "unix-socket": ["--msg-size"],
    "syscall-mix": ["--read-bytes"],
    "hackbench": ["--groups", "--fds", "--loops", "--msg-size"],
    "secretmem-frag": ["--regions", "--region-kib", "--file-mib"],
    "module-bpf-churn": ["--pipes", "--pipe-kib"],
    "seccomp-stack": ["--filters", "--filter-len", "--procs", "--batch"],
    "pipe-pingpong": [],
    "fork-exec": [],
    "fault-inject": ["--hang-s"],
}
COMMON_BAD = [
    ["--no-such-option"],
    ["-z"],
    ["--seed"],
    ["--seed", "abc"],
    ["--seed", "-1"],
    ["--seed", "12x"],
    ["--iterations", "0"],
    ["--iterations", "-3"],
    ["--iterations", "1.5"],
    ["--duration-s", "0"],
    ["--duration-s", "-1"],
    ["--duration-s", "nan"],
    ["--duration-s", "soon"],
    ["stray-positional"],
]


def readme_template():
    """The worked example's C block from workloads/README.md."""
    text = (WL / "README.md").read_text()
    m = re.search(r"`workloads/getpid-loop/getpid-loop\.c`:\n\n```c\n(.*?)```",
                  text, re.S)
    assert m, "worked example not found in workloads/README.md"
    return m.group(1)


def run(name, *args, timeout=30, build=BUILD):
    return subprocess.run([str(build / name), *args], capture_output=True,
                          text=True, timeout=timeout)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def build_output():
    """One clean build per session; returns the make output."""
    subprocess.run(["make", "-C", str(WL), "clean"], check=True,
                   capture_output=True)
    p = subprocess.run(["nice", "make", "-C", str(WL)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def check_schema(doc, name, seed):
    assert set(doc) == {"workload", "seed", "params", "elapsed_s", "work", "metrics"}
    # every shipped workload and the README's example say what one run did
    assert set(doc["work"]) == {"amount", "unit"} and doc["work"]["amount"] > 0, doc["work"]
    assert isinstance(doc["work"]["unit"], str) and doc["work"]["unit"]
    assert doc["workload"] == name
    assert doc["seed"] == seed and isinstance(doc["seed"], int)
    assert isinstance(doc["params"], dict)
    for k, v in doc["params"].items():
        assert isinstance(k, str) and k
        assert v is None or isinstance(v, (int, float, str, bool)), (k, v)
    assert isinstance(doc["elapsed_s"], (int, float)) and doc["elapsed_s"] > 0
    assert isinstance(doc["metrics"], dict) and doc["metrics"]
    for k, m in doc["metrics"].items():
        assert set(m) == {"value", "unit", "better"}, k
        assert isinstance(m["value"], (int, float)) and not isinstance(m["value"], bool)
        assert math.isfinite(m["value"])
        assert isinstance(m["unit"], str) and m["unit"]
        assert m["better"] in ("higher", "lower")


def host_args(name, tmp_path):
    args = list(HOST_SAFE[name])
    if name == "pagecache-read":
        args += ["--dir", str(tmp_path)]
    return args


# ---------------------------------------------------------------- build

def test_discovered_workloads():
    assert {"pagecache-read", "pipe-pingpong", "unix-socket", "page-fault",
            "fork-exec", "syscall-mix", "hackbench", "secretmem-frag",
            "module-bpf-churn", "fault-inject"} <= set(ALL)
    assert set(ALL) == set(HOST_SAFE) | HOST_UNSAFE


def test_build_has_no_warnings(build_output):
    assert "warning" not in build_output.lower(), build_output
    assert "-Werror" in build_output and "-static" in build_output


@pytest.mark.parametrize("name", ALL)
def test_binary_is_static(build_output, name):
    out = subprocess.run(["readelf", "-lW", str(BUILD / name)],
                         capture_output=True, text=True, check=True).stdout
    assert "Program Headers" in out
    assert "INTERP" not in out
    assert "DYNAMIC" not in out


def test_sha256sums(build_output):
    lines = (BUILD / "SHA256SUMS").read_text().splitlines()
    sums = {}
    for line in lines:
        digest, name = line.split("  ", 1)
        sums[name] = digest
    assert sorted(sums) == ALL
    for name, digest in sums.items():
        assert sha256(BUILD / name) == digest, name
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"],
                           cwd=BUILD, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_new_workload_is_picked_up_and_build_is_deterministic(build_output, tmp_path):
    copy = tmp_path / "workloads"
    subprocess.run(["rsync", "-a", "--exclude", "build/", "--exclude", "*.ko",
                    f"{WL}/", f"{copy}/"], check=True)
    (copy / "getpid-loop").mkdir()
    (copy / "getpid-loop" / "getpid-loop.c").write_text(readme_template())
    (copy / "notes").mkdir()                 # a dir without notes/notes.c
    (copy / "notes" / "other.c").write_text("#error not a workload\n")
    p = subprocess.run(["nice", "make", "-C", str(copy)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning" not in (p.stdout + p.stderr).lower()
    names = [l.split("  ", 1)[1] for l in
             (copy / "build" / "SHA256SUMS").read_text().splitlines()]
    assert names == sorted(ALL + ["getpid-loop"])
    r = run("getpid-loop", "--json", "--iterations", "50", build=copy / "build")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    check_schema(doc, "getpid-loop", 1)
    assert doc["params"]["batch"] == 10 and doc["params"]["iterations"] == 50
    assert doc["metrics"]["calls_per_s"]["value"] > 0
    # same sources built in another directory: identical binaries
    for name in ALL:
        assert sha256(copy / "build" / name) == sha256(BUILD / name), name
    r = run("getpid-loop", "--batch", "0", build=copy / "build")
    assert r.returncode == 2 and "usage:" in r.stderr


# ---------------------------------------------------------------- host runs

@pytest.mark.parametrize("name", sorted(HOST_SAFE))
def test_json_run(build_output, name, tmp_path):
    args = host_args(name, tmp_path)
    docs = []
    for _ in range(2):
        r = run(name, "--json", "--seed", "7", *args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("\n") == 1 and r.stdout.endswith("}\n")
        doc = json.loads(r.stdout)
        check_schema(doc, name, 7)
        for k, m in doc["metrics"].items():
            assert m["value"] > 0, (k, m)
        docs.append(doc)
    assert docs[0]["params"] == docs[1]["params"]
    assert docs[0]["params"]["iterations"] == int(args[args.index("--iterations") + 1])
    if name == "pagecache-read":
        assert list(tmp_path.iterdir()) == []    # its file is gone


@pytest.mark.parametrize("name,key", [("pagecache-read", "rand_bytes_per_pass"),
                                      ("syscall-mix", "ops_getppid")])
def test_seed_changes_plan(build_output, name, key, tmp_path):
    args = host_args(name, tmp_path)
    vals = set()
    for seed in ("1", "2", "3"):
        r = run(name, "--json", "--seed", seed, *args)
        assert r.returncode == 0, r.stderr
        vals.add(json.loads(r.stdout)["params"][key])
    assert len(vals) > 1


def test_duration_bound(build_output):
    r = run("pipe-pingpong", "--json", "--duration-s", "0.3")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["params"]["duration_s"] == 0.3 and doc["params"]["iterations"] is None
    assert 0.25 < doc["elapsed_s"] < 5


def test_human_output(build_output):
    r = run("syscall-mix", "--iterations", "100")
    assert r.returncode == 0, r.stderr
    assert not r.stdout.lstrip().startswith("{")
    assert "ops_per_s" in r.stdout and "higher is better" in r.stdout


def test_fork_exec_other_program(build_output):
    true = shutil.which("true")
    r = run("fork-exec", "--json", "--iterations", "5", "--exec", true)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["params"]["exec"] == true


@pytest.mark.parametrize("name,args,msg", [
    ("pagecache-read", ["--dir", "/nonexistent/kablab", "--size-mib", "1"],
     "No such file or directory"),
    ("fork-exec", ["--exec", "/nonexistent/kablab"], "No such file or directory"),
    ("module-bpf-churn", ["--dry-run", "--module", "/nonexistent/x.ko"],
     "No such file or directory"),
])
def test_runtime_failure_exit_1(build_output, name, args, msg):
    r = run(name, "--json", *args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert msg in r.stderr and r.stdout == ""


# ---------------------------------------------------------------- all workloads

@pytest.mark.parametrize("name", ALL)
def test_dry_run(build_output, name):
    outs = []
    for seed in ("5", "5", "6"):
        r = run(name, "--json", "--dry-run", "--seed", seed)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["dry_run"] is True and doc["metrics"] == {} and doc["work"] is None
        assert doc["workload"] == name and doc["seed"] == int(seed)
        outs.append(doc["params"])
    assert outs[0] == outs[1]
    if name == "module-bpf-churn":
        assert outs[0]["plan_fnv64"] != outs[2]["plan_fnv64"]
        assert outs[0]["module_churn"].startswith("skipped")
        assert outs[0]["pipes_closed"] == 4000


@pytest.mark.parametrize("name", ALL)
def test_help(build_output, name):
    r = run(name, "--help")
    assert r.returncode == 0
    assert r.stdout.startswith(name + ":") and "usage:" in r.stdout
    for opt in ("--seed", "--json", "--duration-s", "--iterations"):
        assert opt in r.stdout
    for opt in SIZE_OPTS[name]:
        assert opt in r.stdout
    assert "--child" not in r.stdout


@pytest.mark.parametrize("name", ALL)
def test_bad_arguments_exit_2(build_output, name):
    cases = list(COMMON_BAD)
    for opt in SIZE_OPTS[name]:
        cases += [[opt, "0"], [opt, "-4"], [opt, "x"], [opt, ""]]
    for bad in cases:
        # --dry-run first: a parser bug must never run a kernel-touching
        # workload for real on the host
        r = run(name, "--dry-run", *bad)
        assert r.returncode == 2, (bad, r.returncode, r.stdout, r.stderr)
        assert "usage: " + name in r.stderr, bad
        assert r.stdout == "", bad


# ---------------------------------------------------------------- fault-inject and the guest runner

@pytest.mark.parametrize("how,code", [("segv", -11), ("abort", -6), ("exit", 1)])
def test_fault_inject_crashes_only_in_its_runs(build_output, how, code):
    args = ["--json", "--crash-runs", "2,4", "--crash-how", how]
    for n, want in [(None, 0), ("0", 0), ("1", 0), ("2", code), ("3", 0), ("4", code)]:
        env = {} if n is None else {"KABLAB_RUN": n}
        p = subprocess.run([str(BUILD / "fault-inject"), *args], capture_output=True, text=True,
                           env=env, timeout=30)
        assert p.returncode == want, (n, p.stderr)
        if want == 0:
            assert json.loads(p.stdout)["params"]["kablab_run"] == int(n or 0)
        else:
            assert p.stdout == "" and f"run {n} crashes ({how})" in p.stderr


@pytest.mark.parametrize("bad", ["x", "1,", ",1", "0", "-1", "1,,2", "2;3"])
def test_fault_inject_rejects_bad_run_lists(build_output, bad):
    r = run("fault-inject", "--crash-runs", bad)
    assert r.returncode == 2 and "--crash-runs" in r.stderr, (bad, r.stderr)


def test_fault_inject_hang_is_bounded(build_output):
    t0 = time.monotonic()
    p = subprocess.run([str(BUILD / "fault-inject"), "--hang-runs", "1", "--hang-s", "1"],
                       capture_output=True, text=True, env={"KABLAB_RUN": "1"}, timeout=30)
    assert p.returncode == 1 and "ran out without being stopped" in p.stderr
    assert 1 <= time.monotonic() - t0 < 20


GUEST_RUN = ROOT / "roles/workloads/files/kablab-guest-run"


def argv_file(path: Path, *argv: object) -> Path:
    """A block's command as kablab-guest-boot writes it: one argument per line."""
    path.write_text("".join(f"{a}\n" for a in argv))
    return path


def run_files(out: Path, n: int, kind: str) -> list[str]:
    return [(out / "files" / f"run-{i}.{kind}").read_text() for i in range(1, n + 1)]


def test_guest_runner_records_crashes_perf_stat_hides(build_output, tmp_path):
    """perf stat exits 0 when its child dies of a signal: the runner must
    still record run 2 as SIGSEGV, run 3 as exit 1 and run 4 (a hang) as
    killed by its timeout, and keep runs 1 and 5, each run in its own files."""
    need("perf", "hyperfine")
    out = tmp_path / "block"
    argv = argv_file(tmp_path / "argv", BUILD / "fault-inject", "--iterations", "1000", "--crash-runs", "2",
                     "--hang-runs", "4", "--hang-s", "60")
    p = subprocess.run(["sh", str(GUEST_RUN), str(out), "5", "1", "3", "task-clock", str(argv)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [int(rc) for rc in run_files(out, 5, "rc")] == [0, 139, 0, 137, 0]
    # its stdout carries the block's raw files, byte for byte (kablab/results/rawframe.py)
    frames = rawframe.parse(p.stdout)
    assert {"hyperfine.json", "meminfo.before", "meminfo.after", "vmstat.before", "vmstat.after"} <= set(frames)
    assert {f"run-{n}.{k}" for n in range(1, 6) for k in ("rc", "perf", "err")} <= set(frames)
    assert all(frames[f] == (out / "files" / f).read_bytes() for f in frames)
    p = subprocess.run(["sh", str(GUEST_RUN), str(tmp_path / "b2"), "3", "0", "3", "task-clock",
                        str(argv_file(tmp_path / "argv2", BUILD / "fault-inject", "--crash-runs", "3",
                                      "--crash-how", "exit"))],
                       capture_output=True, text=True, timeout=120)
    assert [int(rc) for rc in run_files(tmp_path / "b2", 3, "rc")] == [0, 0, 1]
    docs = run_files(out, 5, "json")
    assert docs[1] == "" and docs[3] == ""
    assert [json.loads(docs[i])["params"]["kablab_run"] for i in (0, 2, 4)] == [1, 3, 5]
    assert "fault-inject: run 2 crashes (segv)" in run_files(out, 5, "err")[1]


def test_guest_runner_passes_arguments_as_a_list(build_output, tmp_path):
    """An argument with spaces or shell characters reaches the workload as
    one argument, unparsed: here a --dir that exists only under that name."""
    need("perf", "hyperfine")
    odd = tmp_path / "a dir; with $(spaces) 'and' quotes"
    odd.mkdir()
    argv = argv_file(tmp_path / "argv", BUILD / "pagecache-read", "--size-mib", "1", "--iterations", "1",
                     "--dir", odd)
    p = subprocess.run(["sh", str(GUEST_RUN), str(tmp_path / "b"), "1", "0", "30", "task-clock", str(argv)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert run_files(tmp_path / "b", 1, "rc") == ["0\n"], run_files(tmp_path / "b", 1, "err")
    assert json.loads(run_files(tmp_path / "b", 1, "json")[0])["params"]["dir"] == str(odd)


def test_collector_reads_the_guest_runner_stream(build_output, tmp_path):
    """The raw contract end to end: what kablab-guest-run prints, saved as
    the run role saves it, is all the collector needs; a cut stream
    fails the block with the reason instead of losing it silently."""
    need("perf", "hyperfine")
    p = subprocess.run(["sh", str(GUEST_RUN), str(tmp_path / "guest"), "2", "0", "30", "task-clock",
                        str(argv_file(tmp_path / "argv", BUILD / "syscall-mix", "--seed", "1"))],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    meta = json.loads((ROOT / "tests/fixtures/raw-sample/meta.json").read_text())
    meta.update({"workload": "syscall-mix", "primary_metric": "ops_per_s",
                 "runner": {**meta["runner"], "runs": 2, "warmup": 0}})
    for name, text in (("good", p.stdout), ("cut", p.stdout[:len(p.stdout) // 2])):
        raw = tmp_path / name
        raw.mkdir()
        (raw / "meta.json").write_text(json.dumps(meta))
        (raw / collect.FRAMES).write_text(text)
        doc = collect.collect_to(raw, tmp_path / f"{name}.json")
        if name == "good":
            assert doc["status"] == "ok", doc["failure"]
            assert doc["primary_metric"] == "ops_per_s"
            assert [r["metrics"]["ops_per_s"]["value"] > 0 for r in doc["runs"]] == [True, True]
            assert [r["work"]["unit"] for r in doc["runs"]] == ["syscall", "syscall"]
            assert (raw / "run-2.perf").is_file()
        else:
            assert doc["status"] == "failed" and "the stream was cut" in doc["failure"]["reason"]


# ---------------------------------------------------------------- adding a workload (README recipe)

def readme_block(lang, after):
    """The fenced block of `lang` that follows the line containing `after` in workloads/README.md."""
    text = (WL / "README.md").read_text()
    m = re.search(re.escape(after) + r".*?\n\n```" + lang + r"\n(.*?)```", text, re.S)
    assert m, f"{after} not found in workloads/README.md"
    return m.group(1)


def test_workload_added_by_the_recipe_is_picked_up(build_output, tmp_path):
    """README "Adding a workload", done in a copy of the repository: the C
    file, the data-only role, one line in the list. Preflight loads it,
    builds it, dry-runs and prints the argv the guests will run; the guest
    runner, run here on that argv, measures it into the raw frame."""
    need("rsync", "perf", "hyperfine")
    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout
    subprocess.run(["rsync", "-a", "--from0", "--files-from=-", f"{ROOT}/", f"{repo}/"], input=files, check=True)
    # the built binaries, mtimes kept: make only builds the new one
    subprocess.run(["rsync", "-a", f"{BUILD}/", f"{repo}/workloads/build/"], check=True)
    (repo / "workloads/getpid-loop").mkdir()
    (repo / "workloads/getpid-loop/getpid-loop.c").write_text(readme_template())
    role = repo / "roles/workload_getpid_loop"
    (role / "defaults").mkdir(parents=True)
    (role / "meta").mkdir()
    (role / "defaults/main.yml").write_text(readme_block("yaml", "`roles/workload_getpid_loop/defaults/main.yml`"))
    (role / "meta/main.yml").write_text(readme_block("yaml", "`roles/workload_getpid_loop/meta/main.yml`"))
    workloads_yml = repo / "inventory/group_vars/all/workloads.yml"
    workloads_yml.write_text(workloads_yml.read_text().replace(
        "kablab_all_workloads:\n", "kablab_all_workloads:\n  - getpid-loop\n", 1))

    run = run_playbook("preflight.yml", "-e", f"kablab_publish_dir={tmp_path}/publish", cwd=repo, timeout=600)
    out = run.output
    assert run.rc == 0, out[-4000:]
    m = re.search(r"kablab: workload getpid-loop runs getpid-loop (.*?) \((\d+) runs", out)
    assert m, out[-4000:]
    argv = m.group(1).split()
    assert argv == ["--iterations", "200", "--seed", "1"]
    sums = (repo / "workloads/build/SHA256SUMS").read_text()
    assert "  getpid-loop\n" in sums

    # The guest runner, exactly as a guest runs it (2 runs, 0 warm-up, 60 s each).
    binary = repo / "workloads/build/getpid-loop"
    runner = subprocess.run([str(GUEST_RUN), str(tmp_path / "out"), "2", "0", "60", "task-clock",
                             str(argv_file(tmp_path / "argv", binary, *argv))],
                            capture_output=True, text=True, timeout=300)
    assert runner.returncode == 0, runner.stderr
    frames = rawframe.parse(runner.stdout)
    assert [frames[f"run-{n}.rc"] for n in (1, 2)] == [b"0\n", b"0\n"]
    docs = [json.loads(frames[f"run-{n}.json"]) for n in (1, 2)]
    assert [d["workload"] for d in docs] == ["getpid-loop", "getpid-loop"]
    assert all(d["params"]["iterations"] == 200 and d["metrics"]["calls_per_s"]["value"] > 0 for d in docs)


GUEST_BOOT = ROOT / "roles/workloads/files/kablab-guest-boot"


def guest_boot(port: Path, work: Path, specs: list[dict], sums: dict[str, str] | None = None) -> str:
    """Run kablab-guest-boot as the run stage does, from a copy of what a
    guest's config disk holds (the runner and the binaries side by side),
    its plan on stdin (it detaches), and wait for its last line in PORT,
    here a plain file."""
    config = work.parent / "config"
    config.mkdir(exist_ok=True)
    for f in [GUEST_BOOT, GUEST_RUN] + [BUILD / s["name"] for s in specs]:
        shutil.copy2(f, config / f.name)
    if sums is None:
        sums = dict(line.split()[::-1] for line in (BUILD / "SHA256SUMS").read_text().splitlines())
    plan = bootrun.guest_plan(specs, str(config), ["task-clock"], sums)
    port.write_text("")
    p = subprocess.run(["sh", str(config / GUEST_BOOT.name), str(port), str(work), "0"], input=plan,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    deadline = time.monotonic() + 240
    while not re.search(r"^kablab-boot (end|refused)", port.read_text(), re.M) and time.monotonic() < deadline:
        time.sleep(0.2)
    return port.read_text()


def test_guest_boot_runs_every_block_and_each_becomes_a_result(build_output, tmp_path):
    """One guest command runs the boot's blocks in order; its frames split
    into one valid result per workload; a stream cut in the second block
    (the guest lost there) keeps the first, fails the second with the
    watcher's reason and leaves the third for a fresh boot."""
    need("perf", "hyperfine")
    specs = [{"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 2, "warmup": 0, "timeout_s": 30,
              "primary_metric": "ops_per_s"},
             {"name": "fault-inject", "argv": ["--iterations", "1000", "--crash-runs", "2", "--seed", "1"],
              "runs": 3, "warmup": 1, "timeout_s": 30, "primary_metric": "ops_per_s"},
             {"name": "fork-exec", "argv": ["--seed", "1"], "runs": 2, "warmup": 0, "timeout_s": 30,
              "primary_metric": "execs_per_s"}]
    frames = guest_boot(tmp_path / "frames", tmp_path / "guest", specs)
    described = rawframe.parse(bootrun.split_frames(frames)["describe"])
    assert described["uname_r"].decode().strip() == os.uname().release
    assert described["hyperfine"].startswith(b"hyperfine ") and b"syscall-mix" in described["sha256"]
    assert [m.group(1) for m in re.finditer(r"^kablab-block (\S+) begin$", frames, re.M)] == \
        [s["name"] for s in specs]
    assert re.findall(r"^kablab-block \S+ end (\d+)$", frames, re.M) == ["0", "0", "0"]

    boot = recorded_boot(json.loads((ROOT / "tests/fixtures/guest-boot/boot-record.json").read_text()),
                         console_log_campaign="logs/stock-boot1.log")
    boot["campaign"]["variants"] = ["stock", "grouped"]
    boot["sha256"] = {s["name"]: "ab" * 32 for s in specs}
    camp = tmp_path / "campaign"
    out = bootrun.collect_boot(camp, boot, specs, frames, {"complete": True, "stopped": None, "blocks": {}})
    assert out == {"ok": ["syscall-mix", "fault-inject", "fork-exec"], "failed": [], "remaining": [], "errors": []}
    docs = {s["name"]: json.loads((camp / f"results/stock/{s['name']}-block0.json").read_text()) for s in specs}
    assert [r["included"] for r in docs["fault-inject"]["runs"]] == [True, False, True]
    assert docs["fork-exec"]["binary"]["args"] == ["--seed", "1"]
    assert docs["syscall-mix"]["campaign"]["variants"] == ["stock", "grouped"]

    cut = frames[:frames.index("kablab-block fault-inject begin") + 200]
    reason = "fault-inject did not end within 150 s: the guest is taken for hung"
    camp = tmp_path / "cut"
    out = bootrun.collect_boot(camp, boot, specs, cut,
                               {"complete": False, "blocks": {}, "stopped": {"block": "fault-inject", "reason": reason}})
    assert out == {"ok": ["syscall-mix"], "failed": ["fault-inject"], "remaining": ["fork-exec"], "errors": []}
    failed = json.loads((camp / "results/stock/fault-inject-block0.json").read_text())
    assert (failed["status"], failed["failure"]["stage"], failed["failure"]["reason"]) == ("failed", "run", reason)
    assert failed["failure"]["console_log"] == "logs/stock-boot1.log"
    assert not (camp / "results/stock/fork-exec-block0.json").exists()
    # a resumed campaign keeps the good result and moves the failed one aside
    assert bootrun.todo(camp, "stock", 0, [s["name"] for s in specs], "T1") == ["fault-inject", "fork-exec"]
    assert (camp / "attempts/T1/stock/fault-inject-block0.json").is_file()
    assert (camp / "attempts/T1/stock/fault-inject-block0").is_dir()


def test_guest_refuses_a_binary_that_is_not_the_one_built(build_output, tmp_path):
    """A binary on the config disk that differs from the controller's
    build: the guest describes itself, runs nothing and says why."""
    need("perf", "hyperfine")
    spec = {"name": "syscall-mix", "argv": ["--seed", "1"], "runs": 1, "warmup": 0, "timeout_s": 30}
    frames = guest_boot(tmp_path / "frames", tmp_path / "guest", [spec], {"syscall-mix": "0" * 64})
    split = bootrun.split_frames(frames)
    assert split["describe"] and split["blocks"] == {}
    assert split["refused"].startswith("a workload binary is not the one built on the controller")
    assert "syscall-mix: FAILED" in split["refused"]
