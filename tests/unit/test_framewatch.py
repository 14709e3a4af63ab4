"""kablab/remote/framewatch.py: when the hypervisor takes a boot's guest for lost."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from kablab.remote import framewatch
from kablab.remote.framewatch import Watch

SCRIPT = Path(__file__).resolve().parents[2] / "kablab/remote/framewatch.py"
BLOCKS = [{"name": "syscall-mix", "timeout_s": 10}, {"name": "fork-exec", "timeout_s": 60}]


def test_complete_boot_keeps_host_times_and_exit_codes():
    w = Watch(BLOCKS, 30, now=0)
    for t, line in ((1, "kablab-block syscall-mix begin"), (2, "kablab-raw 1"), (5, "kablab-block syscall-mix end 0"),
                    (6, "kablab-block fork-exec begin"), (9, "kablab-block fork-exec end 0"), (9, "kablab-boot end")):
        w.line(line, t)
        w.check(t)
    r = w.report()
    assert r["complete"] and r["stopped"] is None
    assert r["blocks"]["fork-exec"] == {"began": "1970-01-01T00:00:06Z", "ended": "1970-01-01T00:00:09Z", "rc": 0}


def test_block_past_its_timeout_is_taken_for_hung():
    w = Watch(BLOCKS, 30, now=0)
    w.line("kablab-block syscall-mix begin", 1)
    w.check(11)
    assert w.stopped is None
    w.check(11.5)
    assert w.stopped["block"] == "syscall-mix"
    assert w.stopped["reason"].startswith("syscall-mix did not end within 10 s")


def test_no_next_block_and_panic():
    w = Watch(BLOCKS, 30, now=0)
    w.line("kablab-block syscall-mix begin", 1)
    w.line("kablab-block syscall-mix end 0", 2)
    w.check(31)
    assert w.stopped is None
    w.check(33)
    assert w.stopped == {"block": None, "reason": "no block began within 30 s after syscall-mix ended: "
                                                  "the guest runner stopped or the guest is hung"}
    w = Watch(BLOCKS, 30, now=0)
    w.line("kablab-block fork-exec begin", 1)
    w.check(2, panic="Kernel panic - not syncing: Fatal exception")
    assert w.stopped["block"] == "fork-exec"
    assert w.stopped["reason"].endswith("panicked while fork-exec ran: Kernel panic - not syncing: Fatal exception")


def test_script_follows_a_file_being_written(tmp_path):
    """As the run stage runs it: the frames grow while it watches; the
    console's panic line stops it at once, with the console's tail."""
    frames, console = tmp_path / "f", tmp_path / "c"
    frames.write_text("")
    console.write_text("booting\n")

    def guest():
        time.sleep(0.5)
        with frames.open("a") as f:
            f.write("kablab-block syscall-mix begin\nkablab-raw 1\n")
            f.flush()
            time.sleep(0.5)
            f.write("kablab-raw end\nkablab-block syscall-mix end 0\nkablab-block fork-exec begin\n")
        time.sleep(0.5)
        with console.open("a") as c:
            c.write("[ 9.1] Kernel panic - not syncing: Attempted to kill init!\n")

    th = threading.Thread(target=guest)
    th.start()
    p = subprocess.run([sys.executable, str(SCRIPT), str(frames), str(console), json.dumps(BLOCKS),
                        "--start-timeout", "20", "--poll", "0.05"], capture_output=True, text=True, timeout=60)
    th.join()
    r = json.loads(p.stdout)
    assert r["blocks"]["syscall-mix"]["rc"] == 0 and r["blocks"]["fork-exec"]["ended"] is None
    assert r["stopped"]["block"] == "fork-exec"
    assert "Attempted to kill init" in r["stopped"]["reason"]
    assert "booting" in r["stopped"]["console_tail"]


class Clock:
    """A clock the wait's sleeps advance, so a 300 s timeout takes no time."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_wait_ready_sees_the_marker_a_panic_a_lost_emulator_and_the_timeout(tmp_path):
    console = tmp_path / "console.log"
    console.write_text("[    0.0] Linux version 6.1\n")
    clock = Clock()
    appended = []

    def state():  # the guest prints its marker while the wait runs
        if not appended:
            appended.append(1)
            with console.open("a") as f:
                f.write("KABLAB-GUEST-READY\n")
        return "running (booted)"
    assert framewatch.wait_ready(console, 300, state, clock=clock, sleep=clock.sleep) == (0, "")
    console.write_text("x\n[ 1.2] Kernel panic - not syncing: VFS: Unable to mount root fs\n")
    assert framewatch.wait_ready(console, 300, lambda: "running", clock=clock, sleep=clock.sleep) == \
        (3, "Kernel panic - not syncing: VFS: Unable to mount root fs")
    console.write_text("booting\n")
    assert framewatch.wait_ready(console, 300, lambda: "shut off (crashed)", clock=clock, sleep=clock.sleep) == \
        (4, "shut off (crashed)")
    # a virsh that fails says nothing: the wait goes on to its timeout
    start = clock.t
    assert framewatch.wait_ready(console, 30, lambda: None, clock=clock, sleep=clock.sleep) == (124, "booting")
    assert 30 <= clock.t - start < 31


def test_ready_command_exit_status(tmp_path):
    console = tmp_path / "console.log"
    console.write_text("KABLAB-GUEST-READY\n")
    script = SCRIPT
    p = subprocess.run([sys.executable, str(script), "ready", str(console), "--timeout", "5",
                        "--uri", "qemu:///nowhere", "--domain", "none"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_console_command_finds_the_newest_log_of_the_pass(tmp_path):
    """The run role's rescue: the newest console log this pass wrote for the
    variant, and its tail (here a real panicboot console's last lines)."""
    import os
    panic = ("[    6.061353]  driver: virtio_blk\r\n"
             "[    6.062301] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\r\n")
    for name, mtime in (("stock-boot1.log", 100), ("stock-boot2.log", 200), ("stock-x-boot9.log", 300),
                        ("stock-boot2.frames", 300)):
        (tmp_path / name).write_bytes((("x" * 5000 + panic) if name == "stock-boot2.log" else "old\n").encode())
        os.utime(tmp_path / name, (mtime, mtime))
    p = subprocess.run([sys.executable, str(SCRIPT), "console", str(tmp_path), "stock", "--since", "150"],
                       capture_output=True, text=True, timeout=30)
    got = json.loads(p.stdout)
    assert got["path"] == str(tmp_path / "stock-boot2.log")
    assert got["tail"].endswith(panic) and len(got["tail"]) == 4000
    # nothing written since the pass started: no log to blame
    assert framewatch.newest_console(str(tmp_path), "stock", 250) == {}
    assert framewatch.newest_console(str(tmp_path / "none"), "stock", 0) == {}


def test_reserve_numbers_each_boot_once_even_when_lanes_race(tmp_path):
    """framewatch.py reserve: the next number after the variant's logs (a
    fault campaign's log directory, /var/lib/kablab/logs/20261207-2f1413b4),
    its log created; a running domain keeps its latest; two lanes starting
    split4k at once (test_campaign's resumed run, 2026-12-07: both took
    split4k-boot11 and the second domain could not open its log) get two."""
    for n in ["panicboot-boot1.log", "panicboot-boot2.log", "stock-x-boot1.log"] + [
            f"stock-boot{i}.log" for i in range(1, 9)]:
        (tmp_path / n).write_text("")
    out = subprocess.run([sys.executable, framewatch.__file__, "reserve", str(tmp_path), "stock", "grouped",
                          "--running", "grouped"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"stock": 9, "grouped": 1}
    assert (tmp_path / "stock-boot9.log").exists() and (tmp_path / "grouped-boot1.log").exists()
    assert framewatch.reserve(str(tmp_path), "stock", running=True) == 9
    assert framewatch.reserve(str(tmp_path), "stock-x") == 2
    numbers: list[int] = []
    barrier = threading.Barrier(8)

    def lane() -> None:
        barrier.wait()
        numbers.append(framewatch.reserve(str(tmp_path), "split4k"))
    threads = [threading.Thread(target=lane) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(1, 9))
