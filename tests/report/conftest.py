"""Shared fixtures: a generated campaign (tests/fixtures/make_campaign.py) rendered once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(FIXTURES))

import make_campaign  # noqa: E402

from kablab.load import load_campaign  # noqa: E402
from kablab.render import render_campaign  # noqa: E402


@pytest.fixture(scope="session")
def campaign_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fixture campaign, collected but not rendered."""
    return make_campaign.make_campaign(tmp_path_factory.mktemp("campaign") / "20261203-fixture1")


@pytest.fixture(scope="session")
def rendered(campaign_raw: Path) -> Path:
    render_campaign(load_campaign(campaign_raw))
    return campaign_raw


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def run_chromium(*args: str, timeout: int = 90) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="kablab-chromium-")
    try:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
