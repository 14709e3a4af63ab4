"""Headless Chromium: the report renders, has tables and SVG, runs no script.

Chromium 156 logs every console message (console.error and uncaught
exceptions alike) on stderr as `INFO:CONSOLE(...)` / `:CONSOLE:` lines when
started with --enable-logging=stderr --v=0; "ERROR:CONSOLE" never appears,
so we grep for ":CONSOLE" and "Uncaught". dbus errors on stderr are noise.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import run_chromium

WINDOW = "--window-size=1280,4000"


def test_screenshot_png(rendered: Path, tmp_path: Path) -> None:
    shot = rendered / "screenshot.png"
    p = run_chromium(f"--screenshot={shot}", WINDOW, (rendered / "index.html").as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


def test_dump_dom_and_console(rendered: Path) -> None:
    p = run_chromium("--enable-logging=stderr", "--v=0", "--dump-dom",
                     (rendered / "index.html").as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert dom.count("<table") >= 10
    assert dom.count("<svg") >= 5
    assert "Emulated CPU (TCG)" in dom
    # the workload name is text, no script element was injected
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert not re.search(r"<script\b", dom, re.I)
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    assert console == []


def test_console_detection_works(tmp_path: Path) -> None:
    """Guard the grep above: a page with a JS error must be caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefined_fn();</script></body></html>")
    p = run_chromium("--enable-logging=stderr", "--v=0", "--dump-dom", bad.as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    assert any("Uncaught" in ln and ":CONSOLE" in ln for ln in p.stderr.splitlines())
