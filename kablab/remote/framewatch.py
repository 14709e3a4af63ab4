"""Watch one boot's frames file until its blocks end, or the guest is lost;
and, before that, its console until the guest is up.

On the hypervisor (run as a standalone script, stdlib only)::

    framewatch.py ready CONSOLE --timeout S --uri URI --domain NAME
    framewatch.py FRAMES CONSOLE BLOCKS_JSON [--start-timeout S] [--poll S]
    framewatch.py console LOGDIR VARIANT [--since EPOCH]
    framewatch.py reserve LOGDIR VARIANT... [--running VARIANT...]

"reserve" gives each VARIANT's boot about to start its number N and
creates its console log <variant>-boot<N>.log, exclusively: two lanes
that start a boot of the same kernel at the same moment count the same
earlier logs, and only one of them may take the next number. A variant
whose domain still runs keeps its latest log. Prints {variant: N}.

"console" prints the newest console log of a boot that failed and its tail.
"ready" returns 0 when the console says KABLAB-GUEST-READY, 3 (printing the
panic line) when it shows a kernel panic, 4 (printing libvirt's state) when
the domain is no longer running or paused, 124 (printing the console's
tail) after the timeout.

FRAMES is the file the domain's frames channel writes (the guest's
kablab-guest-boot output, roles/workloads/files/kablab-guest-boot),
CONSOLE its serial console log. BLOCKS_JSON lists the blocks in the order
the guest runs them, each {"name", "timeout_s"}: the longest the whole
block may take as seen from here ((runs + warmup) x run timeout + slack).

It returns when the guest printed "kablab-boot end" (or refused to run,
"kablab-boot refused ..."), when a block runs past
its timeout or no block begins within --start-timeout of the previous one
(a hung or stopped guest), or as soon as the console shows a kernel panic.
It prints one JSON object: per block the hypervisor's UTC times of its
begin and end lines and its runner's exit status, "complete", and
"stopped" (null, or {"block", "reason", "console_tail"}) -- the reason a controller
records for the block that was in flight. The guest's clock is not used.
"""
import argparse
import collections
import datetime
import json
import os
import re
import sys
import time

BLOCK = re.compile(r"^kablab-block (\S+) (begin|end)(?: (-?\d+))?$")
BOOT_END = "kablab-boot end"
# The guest ran nothing: not the kernel or the binaries the campaign built.
REFUSED = "kablab-boot refused "
PANIC = re.compile(r"Kernel panic - not syncing[^\r\n]*")


def utc(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Watch:
    """The state of one boot's blocks, fed the frames file's new lines."""

    def __init__(self, blocks, start_timeout, now):
        self.timeouts = {b["name"]: float(b["timeout_s"]) for b in blocks}
        self.start_timeout = float(start_timeout)
        self.blocks = {}
        self.current = None
        self.last_event = now
        self.last_name = None
        self.complete = False
        self.stopped = None

    def line(self, text, now):
        if text == BOOT_END or text.startswith(REFUSED):
            self.complete = True
            self.current = None
            return
        m = BLOCK.match(text)
        if not m:
            return
        name, what, rc = m.group(1), m.group(2), m.group(3)
        if what == "begin":
            self.blocks[name] = {"began": utc(now), "began_s": now, "ended": None, "rc": None}
            self.current = name
        elif name in self.blocks:
            self.blocks[name].update(ended=utc(now), rc=int(rc) if rc is not None else None)
            self.current = None
            self.last_name = name
        self.last_event = now

    def check(self, now, panic=None):
        """Set self.stopped when the guest is to be taken for lost."""
        if self.complete or self.stopped:
            return
        if panic:
            where = f"while {self.current} ran" if self.current else "between blocks"
            self.stopped = {"block": self.current, "reason": f"the guest kernel panicked {where}: {panic}"}
        elif self.current is not None:
            limit = self.timeouts.get(self.current, self.start_timeout)
            if now - self.blocks[self.current]["began_s"] > limit:
                self.stopped = {"block": self.current,
                                "reason": f"{self.current} did not end within {limit:g} s "
                                          "((runs + warmup) x timeout + slack): the guest is taken for hung"}
        elif now - self.last_event > self.start_timeout:
            after = f"after {self.last_name} ended" if self.last_name else "after the blocks were started"
            self.stopped = {"block": None,
                            "reason": f"no block began within {self.start_timeout:g} s {after}: "
                                      "the guest runner stopped or the guest is hung"}

    def report(self):
        return {"blocks": {k: {x: v[x] for x in ("began", "ended", "rc")} for k, v in self.blocks.items()},
                "complete": self.complete, "stopped": self.stopped}


class Tail:
    """New complete lines of a file that is still being written."""

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, b""

    def lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *done, self.partial = data.split(b"\n")
        return [x.decode("utf-8", "replace").rstrip("\r") for x in done]


READY = "KABLAB-GUEST-READY"
# wait_ready's exit statuses: up, panicked, emulator gone, timed out.
UP, PANICKED, EMULATOR_LOST, TIMED_OUT = 0, 3, 4, 124


def domain_state(uri, domain):
    """virsh domstate --reason, or None when virsh fails (libvirtd busy or
    restarting: that proves nothing about the domain)."""
    import subprocess
    try:
        p = subprocess.run(["virsh", "-q", "-c", uri, "domstate", "--reason", domain],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def wait_ready(console, timeout, state=None, poll=0.2, state_every=2.0, clock=time.time, sleep=time.sleep):
    """Follow a guest's console until it says READY, panics, or times out;
    every state_every seconds ask state() (the domain's libvirt state):
    an emulator that died leaves a console that never changes, and without
    this the wait would sit out the whole timeout. Returns (status, what to
    print): the panic line, libvirt's state, or the console's tail."""
    tail = Tail(console)
    seen = collections.deque(maxlen=200)
    end, next_state = clock() + float(timeout), clock() + state_every
    while True:
        for line in tail.lines():
            seen.append(line)
            if READY in line:
                return UP, ""
            m = PANIC.search(line)
            if m:
                return PANICKED, m.group(0)
        now = clock()
        if now >= end:
            return TIMED_OUT, "\n".join(seen)[-1500:]
        if state is not None and now >= next_state:
            next_state = now + state_every
            st = state()
            if st is not None and not st.startswith(("running", "paused")):
                return EMULATOR_LOST, st
        sleep(poll)


def boot_logs(logdir, variant):
    """{N: path} of VARIANT's console logs <variant>-boot<N>.log in LOGDIR
    ({} when LOGDIR does not exist: the boot never got that far)."""
    if not os.path.isdir(logdir):
        return {}
    pattern = re.compile(re.escape(variant) + r"-boot([0-9]+)\.log")
    return {int(m.group(1)): os.path.join(logdir, m.group(0)) for m in map(pattern.fullmatch, os.listdir(logdir)) if m}


def newest_console(logdir, variant, since, size=4000):
    """{"path", "tail"} of VARIANT's newest console log in LOGDIR
    (<variant>-boot<N>.log) written since SINCE (epoch s), with its last
    SIZE bytes; {} when there is none (the boot never got that far)."""
    logs = [(os.path.getmtime(p), p) for p in boot_logs(logdir, variant).values() if os.path.getmtime(p) >= since]
    if not logs:
        return {}
    path = max(logs)[1]
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - size))
        return {"path": path, "tail": f.read().decode("utf-8", "replace")}


def reserve(logdir, variant, running=False):
    """The boot number of VARIANT's next boot, its console log created
    (O_EXCL) so no other boot takes it; a running domain's latest."""
    n = max(boot_logs(logdir, variant), default=0)
    if running and n:
        return n
    while True:
        n += 1
        try:
            os.close(os.open(os.path.join(logdir, f"{variant}-boot{n}.log"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return n
        except FileExistsError:
            continue


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["reserve"]:
        ap = argparse.ArgumentParser(prog="framewatch.py reserve",
                                     description="Number the boots about to start and create their console logs")
        ap.add_argument("logdir")
        ap.add_argument("variants", nargs="+")
        ap.add_argument("--running", nargs="*", default=[])
        a = ap.parse_args(argv[1:])
        print(json.dumps({v: reserve(a.logdir, v, v in a.running) for v in a.variants}))
        return 0
    if argv[:1] == ["console"]:
        ap = argparse.ArgumentParser(prog="framewatch.py console",
                                     description="The newest console log of a variant and its tail (JSON)")
        ap.add_argument("logdir")
        ap.add_argument("variant")
        ap.add_argument("--since", type=float, default=0.0)
        a = ap.parse_args(argv[1:])
        print(json.dumps(newest_console(a.logdir, a.variant, a.since)))
        return 0
    if argv[:1] == ["ready"]:
        ap = argparse.ArgumentParser(prog="framewatch.py ready",
                                     description="Wait for a guest's readiness marker on its console: "
                                                 "exit 0 up, 3 panicked, 4 its emulator ended, 124 timed out")
        ap.add_argument("console")
        ap.add_argument("--timeout", type=float, required=True)
        ap.add_argument("--uri", required=True)
        ap.add_argument("--domain", required=True)
        a = ap.parse_args(argv[1:])
        status, text = wait_ready(a.console, a.timeout, lambda: domain_state(a.uri, a.domain))
        if text:
            print(text)
        return status
    ap = argparse.ArgumentParser(prog="framewatch.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("frames")
    ap.add_argument("console")
    ap.add_argument("blocks", help="JSON list of {name, timeout_s}, in run order")
    ap.add_argument("--start-timeout", type=float, default=120.0,
                    help="longest wait for the next block to begin (s)")
    ap.add_argument("--poll", type=float, default=0.2)
    a = ap.parse_args(argv)
    w = Watch(json.loads(a.blocks), a.start_timeout, time.time())
    frames, console = Tail(a.frames), Tail(a.console)
    console_tail = collections.deque(maxlen=30)
    while True:
        now = time.time()
        for text in frames.lines():
            w.line(text, now)
        new = console.lines()
        console_tail.extend(new)
        panic = next((m.group(0) for m in map(PANIC.search, new) if m), None)
        w.check(now, panic)
        if w.complete or w.stopped:
            break
        time.sleep(a.poll)
    if w.stopped:
        w.stopped["console_tail"] = "\n".join(console_tail)[-4000:]
    json.dump(w.report(), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
