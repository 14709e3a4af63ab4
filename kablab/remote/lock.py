"""Per-resource locks: fcntl.flock on a file per cache entry or
domain prefix, so two runs never build the same kernel or image key at once
and two campaigns never drive the same domains.

The kernel releases a flock when its holder dies, so a lock left by a killed
run is free again at once; the file's JSON body (holder pid, owner pid,
start time, command) is only there to name the running campaign in a
message, and is overwritten by the next holder.

    python3 -m kablab.remote.lock run  --lock F --what W [--wait S|--no-wait] -- CMD...
        hold the lock while CMD runs (a kernel build); exit with CMD's code
    python3 -m kablab.remote.lock hold --lock F --what W [--wait S|--no-wait] [--owner PID]
        hold the lock for the life of the owner process (default: the
        ansible-playbook this runs under) in a detached process; returns once
        it is held. Re-entrant: the same owner holding it already is fine.
    python3 -m kablab.remote.lock owner
        print the pid of the ansible-playbook this runs under (to pass as
        --owner from an async task, whose process has left that tree)
    python3 -m kablab.remote.lock release --lock F [--owner PID]
        give up a lock held by `hold` for this owner (optional: the holder
        also exits when its owner does)

Exit codes: 0 held/done, 75 busy (--no-wait, or --wait timed out), 2 usage.
"""
from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import select
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BUSY = 75      # EX_TEMPFAIL


class Busy(Exception):
    """The lock is held by someone else; str() names them."""


def _proc_cmdline(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def _proc_start(pid: int) -> str:
    """The process's start time (UTC, ISO 8601), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        btime = next(int(l.split()[1]) for l in Path("/proc/stat").read_text().splitlines() if l.startswith("btime"))
        t = btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration):
        t = time.time()
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return 0


def find_owner(pid: int | None = None) -> int:
    """The outermost ancestor running ansible-playbook (Ansible's workers are
    forks of it, with the same command line), else our parent."""
    pid = pid or os.getpid()
    owner, p = 0, _ppid(pid)
    while p > 1:
        if any(os.path.basename(a) == "ansible-playbook" for a in _proc_cmdline(p)[:2]):
            owner = p
        p = _ppid(p)
    return owner or os.getppid()


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is dead for our purpose
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except OSError:
        return False


def read_info(path: str | Path) -> dict:
    try:
        return json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def describe(info: dict) -> str:
    if not info:
        return "another process (no holder recorded)"
    cmd = " ".join(info.get("command") or []) or "?"
    return f"the run with pid {info.get('owner_pid', info.get('pid'))} started {info.get('owner_start', '?')} ({cmd})"


class Lock:
    """An exclusive flock on `path`; the body names the holder."""

    def __init__(self, path: str | Path, what: str, owner: int | None = None):
        self.path = Path(path)
        self.what = what
        self.owner = owner or find_owner()
        self.fd: int | None = None

    def _try(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        self.fd = fd
        info = {"what": self.what, "pid": os.getpid(), "owner_pid": self.owner,
                "owner_start": _proc_start(self.owner), "command": _proc_cmdline(self.owner),
                "locked_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return True

    def acquire(self, wait: float | None = 0, on_wait=None) -> "Lock":
        """wait: 0 = stop at once, None = forever, else seconds. Raises Busy."""
        started = time.monotonic()
        deadline = None if wait is None else started + wait
        told = False
        while not self._try():
            info = read_info(self.path)
            # The holder is exiting (its owner died): its flock goes within
            # moments, so a dead owner is always waited for briefly.
            owner_dead = info.get("owner_pid") and not alive(int(info["owner_pid"]))
            grace = 10 if owner_dead else 0
            if deadline is not None and time.monotonic() >= deadline + grace:
                raise Busy(f"{self.what} is in use by {describe(info)}; lock {self.path}")
            # The holder writes its record just after it takes the flock:
            # an empty record is only worth naming once it stays empty.
            if on_wait and not told and not owner_dead and (info or time.monotonic() - started > 1):
                on_wait(f"kablab: waiting for {describe(info)} (lock {self.path})")
                told = True
            time.sleep(0.2)
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _wait_arg(ns) -> float | None:
    return 0 if ns.no_wait else (None if ns.wait <= 0 else ns.wait)


def cmd_run(ns) -> int:
    import subprocess
    cmd = ns.cmd[1:] if ns.cmd[:1] == ["--"] else ns.cmd
    if not cmd:
        print("kablab.remote.lock run: no command given", file=sys.stderr)
        return 2
    try:
        lock = Lock(ns.lock, ns.what, ns.owner).acquire(_wait_arg(ns), lambda m: print(m, file=sys.stderr, flush=True))
    except Busy as e:
        print(f"kablab: {e}", file=sys.stderr)
        return BUSY
    with lock:
        return subprocess.call(cmd)


def _watch(owner: int) -> None:
    """Return when `owner` exits."""
    try:
        fd = os.pidfd_open(owner)
    except (AttributeError, OSError):
        while alive(owner):
            time.sleep(0.2)
        return
    select.select([fd], [], [])
    os.close(fd)


def cmd_hold(ns) -> int:
    owner = ns.owner or find_owner()
    info = read_info(ns.lock)
    if info.get("owner_pid") == owner and info.get("owner_start") == _proc_start(owner) \
            and alive(int(info.get("pid", 0))):
        return 0                      # this run holds it already (re-entrant)
    r, w = os.pipe()
    if os.fork():                     # parent: report what the holder found
        os.close(w)
        msg = os.read(r, 65536).decode()
        if msg == "ok":
            return 0
        print(msg or "kablab: the lock holder died", file=sys.stderr)
        return BUSY
    os.close(r)
    os.setsid()                       # survives the task, and a kill of the run's process group
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        lock = Lock(ns.lock, ns.what, owner).acquire(_wait_arg(ns))
    except Busy as e:
        os.write(w, f"kablab: {e}".encode())
        os._exit(BUSY)
    except OSError as e:
        os.write(w, f"kablab: cannot lock {ns.lock}: {e}".encode())
        os._exit(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.write(w, b"ok")
    os.close(w)
    _watch(owner)
    lock.release()
    os._exit(0)


def cmd_release(ns) -> int:
    owner = ns.owner or find_owner()
    info = read_info(ns.lock)
    if info.get("owner_pid") == owner and alive(int(info.get("pid", 0))):
        try:
            os.kill(int(info["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(50):
            if not alive(int(info["pid"])):
                break
            time.sleep(0.1)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m kablab.remote.lock", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("run", "hold", "release"):
        s = sub.add_parser(name)
        s.add_argument("--lock", required=True, help="the lock file")
        s.add_argument("--owner", type=int, default=0, help="pid whose life the lock lasts (default: ansible-playbook)")
        if name != "release":
            s.add_argument("--what", required=True, help="what the lock guards, for messages")
            g = s.add_mutually_exclusive_group()
            g.add_argument("--wait", type=float, default=0, help="seconds to wait (default 0 = forever)")
            g.add_argument("--no-wait", action="store_true", help="stop at once when held")
        if name == "run":
            s.add_argument("cmd", nargs=argparse.REMAINDER)
    sub.add_parser("owner")
    ns = p.parse_args(argv)
    if ns.mode == "owner":
        print(find_owner())
        return 0
    return {"run": cmd_run, "hold": cmd_hold, "release": cmd_release}[ns.mode](ns)


if __name__ == "__main__":
    sys.exit(main())
