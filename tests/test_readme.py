"""Every command and `-e` example README.md shows, run the way a user types
it (a shell splits the line; make hands ARGS to ansible-playbook; every
`-e key=value` arrives as a string).

Campaign examples go through preflight (every input checked, every
workload dry-run, the hosts checked, the lock taken and given back); the
campaign itself is tests/test_campaign.py's. A README command no test runs
fails test_every_readme_command_is_run."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kablabtest import CACHE, REPO, run_playbook

README = (REPO / "README.md").read_text(encoding="utf-8")
# Commands that need what a whole test file builds: the test that runs each.
RUN_ELSEWHERE = {
    "make smoke": "tests/test_campaign.py (the suite's campaign, over two hosts)",
    "ansible-playbook playbooks/site.yml": "tests/test_campaign.py::test_readme_commands_are_the_tested_ones",
    "make test": ".ci/run",
    "ansible-playbook playbooks/site.yml --tags run,report": "tests/test_campaign.py::test_stages_run_alone",
    "scripts/bench-tlbmodel --replay": "tests/test_tlbmodel_boot.py::bench",
}
# Lines of README that are commands: fenced sh blocks, and inline code that
# starts with a command.
COMMAND_START = ("make ", "ansible-playbook ", "python3 -m ", "scripts/")


def readme_commands() -> list[str]:
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.splitlines():
            cmd = line.split("  #")[0].strip()
            if cmd and not cmd.startswith("#"):
                found.append(cmd)
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    for span in re.findall(r"`([^`\n]+)`", prose.replace("\n", " ")):
        span = " ".join(span.split())
        if span.startswith(COMMAND_START) and not span.endswith("/") and span not in found:
            found.append(span)
    return found


def make_argv(cmd: str) -> tuple[str, dict[str, str]]:
    """`make TARGET VAR=value ...` -> (target, {VAR: value}) as make reads it."""
    words = shlex.split(cmd)
    assert words[0] == "make", cmd
    target = words[1] if len(words) > 1 and "=" not in words[1] else "all"
    assigns = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return target, assigns


CAMPAIGNS = [c for c in readme_commands() if c.split()[:2] in (["make", "smoke"], ["make", "full"])
             and c not in RUN_ELSEWHERE]


def test_readme_has_campaign_examples():
    assert len(CAMPAIGNS) >= 4, CAMPAIGNS


@pytest.mark.parametrize("cmd", CAMPAIGNS)
def test_campaign_example_passes_preflight(cmd, tmp_path):
    """The example's ARGS, split as the shell and make split them, go to
    preflight with the target's profile: smoke warns about this TCG host and
    passes; full refuses unless it accepts what this host invalidates."""
    target, assigns = make_argv(cmd)
    args = shlex.split(assigns.get("ARGS", ""))
    run = run_playbook("preflight.yml", "-e", f"kablab_profile={target}", *args,
                       "-e", "guest_domain_prefix=kablab-readme", "-e", f"kablab_reports_dir={tmp_path}",
                       timeout=600)
    if target == "full" and "accel" not in assigns.get("ARGS", ""):
        assert run.rc != 0 and "would invalidate results" in run.output, run.output[-3000:]
        assert "must be" not in run.output, run.output[-3000:]
    else:
        assert run.rc == 0, run.output[-3000:]


@pytest.mark.parametrize("cmd", [c for c in readme_commands() if c.startswith("make doctor")])
def test_doctor_example(cmd, tmp_path):
    target, assigns = make_argv(cmd)
    p = subprocess.run(["make", target, *(f"{k}={v}" for k, v in assigns.items())], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "summary: " in p.stdout and "accel" in p.stdout


def synthetic(tmp_path: Path, name: str) -> Path:
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import make_campaign as mc
    from kablab.results.load import load_campaign
    from kablab.report.render import render_campaign
    camp = mc.synthetic_campaign(tmp_path / name, seed=3, boots=3, runs=3, variants=("stock", "split4k"))
    render_campaign(load_campaign(camp))
    return camp


def test_compare_examples(tmp_path):
    """Each `make compare` the README shows, its A and B two real report
    directories (synthetic campaigns rendered), OUT in the test's directory."""
    cmds = [c for c in readme_commands() if c.startswith("make compare")]
    assert cmds
    a, b = synthetic(tmp_path, "a"), synthetic(tmp_path, "b")
    for i, cmd in enumerate(cmds):
        _, assigns = make_argv(cmd)
        assert {"A", "B"} <= set(assigns) <= {"A", "B", "OUT"}, cmd
        out = tmp_path / f"cmp{i}"
        p = subprocess.run(["make", "compare", f"A={a}", f"B={b}", f"OUT={out}"], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        assert (out / "index.html").is_file() and (out / "summary.txt").is_file()


def test_noise_example(tmp_path):
    (cmd,) = [c for c in readme_commands() if c.startswith("python3 -m kablab.report.noise")]
    camp = synthetic(tmp_path, "aa")
    p = subprocess.run(["/usr/bin/python3", "-m", "kablab.report.noise", str(camp)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert cmd.split()[:3] == ["python3", "-m", "kablab.report.noise"]
    assert p.returncode == 0 and "syscall-mix" in p.stdout, p.stdout + p.stderr


def test_kernels_and_cache_prune_examples(kernels):
    """`make kernels` reuses what the suite built; `make cache-prune
    ARGS=--check` lists and removes nothing."""
    before = sorted(p.name for p in (CACHE / "kernels").iterdir())
    for cmd in [c for c in readme_commands() if c.startswith(("make kernels", "make cache-prune"))]:
        target, assigns = make_argv(cmd)
        p = subprocess.run(["make", target, *(f"{k}={v}" for k, v in assigns.items())], cwd=REPO,
                           capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, cmd + "\n" + p.stdout[-3000:] + p.stderr[-2000:]
        if target == "cache-prune":
            assert "--check" in assigns.get("ARGS", ""), "the README shows the listing form"
    assert sorted(p.name for p in (CACHE / "kernels").iterdir()) == before


def test_every_readme_command_is_run():
    """A command the README shows is run here or named in RUN_ELSEWHERE."""
    here = set(CAMPAIGNS)
    prefixes = ("make doctor", "make compare", "python3 -m kablab.report.noise", "make kernels", "make cache-prune",
                "make reliability-doc", "make check")
    for cmd in readme_commands():
        assert cmd in RUN_ELSEWHERE or cmd in here or cmd.startswith(prefixes), \
            f"README shows `{cmd}` and no test runs it"
    for cmd, where in RUN_ELSEWHERE.items():
        assert cmd in readme_commands(), f"RUN_ELSEWHERE names `{cmd}`, which the README no longer shows"
        path = where.split(" ")[0].split("::")[0]
        assert (REPO / path).exists(), where
        if "::" in where:
            assert f"def {where.split('::')[1]}(" in (REPO / path).read_text(), where


def test_make_check_is_a_part_of_make_test():
    """`make check` is the inner loop: its lint and its tests are make
    test's (which .ci/run runs), so the suite runs it too."""
    makefile = (REPO / "Makefile").read_text()
    fast = re.search(r"^FAST_TESTS := (.*)$", makefile, re.M).group(1).split()
    assert all((REPO / t).exists() and t.startswith("tests") for t in fast), fast
    assert re.search(r"^check: lint$", makefile, re.M) and re.search(r"^test: setup lint$", makefile, re.M)


def test_reliability_doc_example(tmp_path):
    """`make reliability-doc` copies the suite's table over the tracked file
    (here in a copy of the Makefile and the two files)."""
    (tmp_path / "build").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "Makefile").write_text((REPO / "Makefile").read_text())
    (tmp_path / "build/reliability.md").write_text("# Reliability: fault cases\n| case |\n")
    (tmp_path / "docs/reliability.md").write_text("old\n")
    p = subprocess.run(["make", "reliability-doc"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "docs/reliability.md").read_text().startswith("# Reliability")
