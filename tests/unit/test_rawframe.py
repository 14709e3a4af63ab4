"""kablab.results.rawframe: the guest runner's stream of raw files."""
from __future__ import annotations

import base64

import pytest

from kablab.results.rawframe import FrameError, unpack


def stream(*files: tuple[str, bytes], end: bool = True) -> str:
    lines = ["kablab-raw 1"] + [f"{n} {base64.b64encode(d).decode()}" for n, d in files]
    return "\n".join(lines + (["kablab-raw end"] if end else [])) + "\n"


def test_round_trip_keeps_bytes_and_empty_files(tmp_path):
    text = "ssh banner noise\n" + stream(("perf.csv", b"1,,task-clock\n"), ("stderr.log", b""),
                                         ("odd.bin", bytes(range(256))))
    assert unpack(text, tmp_path) == ["odd.bin", "perf.csv", "stderr.log"]
    assert (tmp_path / "odd.bin").read_bytes() == bytes(range(256))
    assert (tmp_path / "stderr.log").read_bytes() == b""


@pytest.mark.parametrize("text, msg", [
    ("", "no 'kablab-raw 1' header"),
    (stream(("a.json", b"{}"), end=False), "the stream was cut"),
    (stream(("../etc/passwd", b"x")), "bad or repeated file name"),
    (stream(("a", b"x"), ("a", b"y")), "bad or repeated file name"),
    ("kablab-raw 1\na.json ###\nkablab-raw end\n", "not base64"),
])
def test_bad_streams_say_why(text, msg, tmp_path):
    with pytest.raises(FrameError, match=msg):
        unpack(text, tmp_path)
    assert list(tmp_path.iterdir()) == []
