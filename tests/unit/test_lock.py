"""kablab.remote.lock: per-resource flock locks."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from kablab.remote.lock import BUSY, Busy, Lock, describe, read_info
from kablabtest import record_case
from kablabtest import REPO

PY = "/usr/bin/python3"


def lock_cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "kablab.remote.lock", *args], cwd=REPO, capture_output=True, text=True, timeout=60, **kw)


def sleeper(seconds: float = 60) -> subprocess.Popen:
    """A stand-in for a running campaign (the lock's owner)."""
    return subprocess.Popen(["sleep", str(seconds)])


def test_second_process_stops_at_once_naming_the_holder(tmp_path):
    f = tmp_path / "kernel-x.lock"
    first = subprocess.Popen([PY, "-m", "kablab.remote.lock", "run", "--lock", str(f), "--what", "kernel build x",
                              "--", "sleep", "30"], cwd=REPO)
    try:
        for _ in range(100):
            if read_info(f).get("pid") == first.pid:
                break
            time.sleep(0.05)
        started = time.monotonic()
        second = lock_cli("run", "--lock", str(f), "--what", "kernel build x", "--no-wait", "--", "true")
        assert time.monotonic() - started < 5
        assert second.returncode == BUSY
        info = read_info(f)
        assert f"kernel build x is in use by the run with pid {info['owner_pid']} started " in second.stderr
        assert info["owner_start"] in second.stderr and " ".join(info["command"]) in second.stderr
    finally:
        first.kill()
        first.wait()


def test_waiting_run_goes_after_the_first_and_never_overlaps(tmp_path):
    f, log = tmp_path / "k.lock", tmp_path / "log"
    script = f'echo start $$ >> {log}; sleep 3; echo end $$ >> {log}'
    runs = [subprocess.Popen([PY, "-m", "kablab.remote.lock", "run", "--lock", str(f), "--what", "k", "--",
                              "sh", "-c", script], cwd=REPO, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [r.communicate(timeout=60)[1] for r in runs]
    assert [r.returncode for r in runs] == [0, 0]
    lines = [l.split()[0] for l in log.read_text().splitlines()]
    assert lines == ["start", "end", "start", "end"]          # strictly one after the other
    assert any("kablab: waiting for the run with pid" in e for e in errs), errs
    record_case("two runs build the same kernel key", "two `kablab.remote.lock run` on one key (as kernel_build "
                "wraps each build)", "the second prints 'kablab: waiting for the run with pid N started T (...)' "
                "and starts when the first ends; it then finds the kernel built", "builds never overlap")


def test_wait_with_timeout_gives_up_busy(tmp_path):
    f = tmp_path / "k.lock"
    with Lock(f, "image key abc", owner=os.getpid()).acquire():
        with pytest.raises(Busy, match=r"image key abc is in use by the run with pid \d+ started "):
            Lock(f, "image key abc", owner=os.getpid()).acquire(wait=0.5)


def test_lock_of_a_killed_run_is_taken_over(tmp_path):
    f = tmp_path / "domains-kablab.lock"
    first = subprocess.Popen([PY, "-m", "kablab.remote.lock", "run", "--lock", str(f), "--what", "campaign",
                              "--", "sleep", "60"], cwd=REPO, start_new_session=True)
    for _ in range(100):
        if read_info(f).get("pid") == first.pid:
            break
        time.sleep(0.05)
    assert lock_cli("run", "--lock", str(f), "--what", "campaign", "--no-wait", "--", "true").returncode == BUSY
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    stale = read_info(f)
    assert stale["pid"] == first.pid                           # the body is stale, the flock is gone
    again = lock_cli("run", "--lock", str(f), "--what", "campaign", "--no-wait", "--", "true")
    assert again.returncode == 0, again.stderr
    assert read_info(f)["pid"] != first.pid
    record_case("stale lock (holder killed with SIGKILL)", "SIGKILL to the process group holding a lock",
                "nothing: the kernel released the flock; the next run takes it over at once",
                "the lock file's record names the new holder")


def test_hold_lasts_as_long_as_its_owner_and_is_reentrant(tmp_path):
    f = tmp_path / "domains-kablab.lock"
    owner = sleeper()
    try:
        held = lock_cli("hold", "--lock", str(f), "--what", "campaign on domains kablab-*", "--no-wait",
                        "--owner", str(owner.pid))
        assert held.returncode == 0, held.stderr
        info = read_info(f)
        assert info["owner_pid"] == owner.pid and info["command"][0] == "sleep"
        # the same owner again: fine; another owner: stops at once with the holder's pid and command
        assert lock_cli("hold", "--lock", str(f), "--what", "x", "--no-wait", "--owner", str(owner.pid)).returncode == 0
        other = sleeper()
        try:
            busy = lock_cli("hold", "--lock", str(f), "--what", "campaign on domains kablab-*", "--no-wait",
                            "--owner", str(other.pid))
            assert busy.returncode == BUSY
            assert f"campaign on domains kablab-* is in use by the run with pid {owner.pid} " \
                   f"started {info['owner_start']} (sleep 60)" in busy.stderr
        finally:
            other.kill()
            other.wait()
    finally:
        owner.kill()       # SIGKILL: the holder sees its owner go and lets the lock go
        owner.wait()
    nxt = sleeper()
    try:
        taken = lock_cli("hold", "--lock", str(f), "--what", "campaign", "--no-wait", "--owner", str(nxt.pid))
        assert taken.returncode == 0, taken.stderr
        assert read_info(f)["owner_pid"] == nxt.pid
        assert lock_cli("release", "--lock", str(f), "--owner", str(nxt.pid)).returncode == 0
        assert Lock(f, "t", owner=os.getpid()).acquire(wait=5).fd is not None
    finally:
        nxt.kill()
        nxt.wait()


def test_holder_killed_with_its_run_frees_the_lock(tmp_path):
    f = tmp_path / "l.lock"
    owner = sleeper()
    try:
        assert lock_cli("hold", "--lock", str(f), "--what", "c", "--owner", str(owner.pid)).returncode == 0
        os.kill(read_info(f)["pid"], signal.SIGKILL)
        time.sleep(0.2)
        assert Lock(f, "c", owner=os.getpid()).acquire().fd is not None
    finally:
        owner.kill()
        owner.wait()


def test_describe_without_a_body():
    assert describe({}) == "another process (no holder recorded)"
    assert describe({"what": "w", "owner_pid": 5, "owner_start": "T", "command": ["a", "b"]}) == \
        "the run with pid 5 started T (a b)"


def test_owner_is_the_parent_outside_ansible():
    assert lock_cli("owner").stdout.strip() == str(os.getpid())
