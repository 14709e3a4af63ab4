"""The guest runner's output: every raw file of a block in one text stream.

The guest runner (roles/workloads/files/kablab-guest-run) prints, on
its stdout and nothing else:

    kablab-raw 1
    <file name> <base64 of the file's bytes>
    ...
    kablab-raw end

one line per raw file that exists (a missing file is simply absent: the
collector says which ones it needed). kablab-guest-boot sends it, block by
block, through the domain's frames channel to the hypervisor
(kablab/lab/bootrun.py splits the blocks), so there is no archive, fetch or
unpack step per block; `unpack` writes the files into the raw directory
on the controller, each atomically.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from kablab.util import atomic_write_bytes

HEADER = "kablab-raw 1"
TRAILER = "kablab-raw end"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class FrameError(ValueError):
    """The stream is not a complete kablab-raw stream."""


def parse(text: str) -> dict[str, bytes]:
    """File name -> content. Raises FrameError on a truncated or foreign stream."""
    lines = text.splitlines()
    try:
        start = lines.index(HEADER)
    except ValueError:
        raise FrameError("no 'kablab-raw 1' header: the guest runner printed no raw files") from None
    try:
        end = lines.index(TRAILER, start)
    except ValueError:
        raise FrameError(f"no 'kablab-raw end' after {len(lines) - start - 1} line(s): "
                         "the stream was cut") from None
    files: dict[str, bytes] = {}
    for n, line in enumerate(lines[start + 1:end], start + 2):
        name, _, data = line.partition(" ")
        if not NAME.match(name) or name in files:
            raise FrameError(f"line {n}: bad or repeated file name {name[:60]!r}")
        try:
            files[name] = base64.b64decode(data, validate=True)
        except binascii.Error as e:
            raise FrameError(f"line {n} ({name}): not base64: {e}") from None
    return files


def unpack(text: str, raw_dir: str | Path) -> list[str]:
    """Write every file of the stream into RAW_DIR; returns their names."""
    files = parse(text)
    for name, data in files.items():
        atomic_write_bytes(Path(raw_dir) / name, data)
    return sorted(files)
