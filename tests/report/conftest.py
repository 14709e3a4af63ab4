"""Shared fixtures: a generated campaign (tests/fixtures/make_campaign.py) rendered once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kablabtest import REPO  # tests/ is on the path (tests/conftest.py)

FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(FIXTURES))

import kablabtest  # noqa: E402
import make_campaign  # noqa: E402

from kablab.results.load import load_campaign  # noqa: E402
from kablab.report.render import render_campaign  # noqa: E402


@pytest.fixture(scope="session")
def campaign_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fixture campaign, collected but not rendered."""
    return make_campaign.make_campaign(tmp_path_factory.mktemp("campaign") / "20261203-fixture1")


@pytest.fixture(scope="session")
def rendered(campaign_raw: Path) -> Path:
    render_campaign(load_campaign(campaign_raw))
    return campaign_raw


# One Chromium helper for the whole suite (tests/kablabtest.py); a missing
# browser fails the test: host_setup installs it.
run_chromium = kablabtest.run_chromium
