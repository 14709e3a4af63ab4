"""kablab.report.noise: an A/A campaign's variance components size the next campaign."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import make_campaign as mc
from kablab.report.noise import boots_needed, boots_needed_by_metric, main
from kablabtest import ANSIBLE_ENV, REPO



@pytest.fixture(scope="module")
def aa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mc.synthetic_campaign(tmp_path_factory.mktemp("aa") / "c", seed=11, boots=12, runs=5,
                                 sd_between=0.02, sd_within=0.01,
                                 variants=("stock", "stock-aa"), mode="aa")


def test_cli_json_recovers_the_variance_components(aa: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(aa), "--json"]) == 0          # python3 -m kablab.report.noise DIR --json
    stdout = capsys.readouterr().out
    doc = json.loads(stdout)
    assert doc["kernels"] == ["stock", "stock-aa"] and doc["mode"] == "aa"
    # one real change among the 3 primary metrics is flagged by BH at q / 3
    assert doc["n_primary"] == 3 and doc["alpha"] == pytest.approx(0.05 / 3)
    rows = {(m["workload"], m["metric"]): m for m in doc["metrics"]}
    for key in (("hackbench", "time_s"), ("pipe-pingpong", "round_trips_per_s"),
                ("pipe-pingpong", "rtt_p99_us"), ("syscall-mix", "ops_per_s")):
        m = rows[key]
        assert m["n_boots"] == 24 and m["runs_per_boot"] == 5
        assert 1.2 < m["cov_between_pct"] < 2.9, m
        assert 0.8 < m["cov_within_pct"] < 1.2, m
        assert m["ratio"] > 1
        n1, n3 = m["boots_needed"]["1"], m["boots_needed"]["3"]
        assert n3 is not None and (n1 is None or n1 > n3)
    assert rows[("syscall-mix", "ns_per_op")]["role"] == "derived"
    assert rows[("hackbench", "time_s")]["primary"] is True
    assert rows[("hackbench", "wall_s")]["role"] == "wrapper"

    # the function main wires into the plan: same answer from dir, JSON dict or JSON file
    n = boots_needed(doc, 3.0)
    assert isinstance(n, int) and n >= 2
    f = aa / "noise.json"
    f.write_text(stdout)
    assert boots_needed(str(f), 3.0) == n == boots_needed(aa, 3.0)
    per = boots_needed_by_metric(doc, 3.0)
    assert set(per) == {("hackbench", "time_s"), ("pipe-pingpong", "round_trips_per_s"),
                        ("syscall-mix", "ops_per_s")}
    assert n == max(v for v in per.values() if v is not None)
    assert boots_needed(doc, 3.0, runs=50) <= n
    assert boots_needed(doc, 3.0, alpha=0.05) <= n
    assert boots_needed(doc, 10.0) <= n


def test_cli_boots_for_and_text(aa: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(aa), "--boots-for", "3"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(boots_needed(aa, 3.0))
    assert main([str(aa)]) == 0
    text = capsys.readouterr().out
    assert "time_s" in text and "CoVb%" in text
    assert main([str(aa / "nope")]) == 1


def _inventory_blocks(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible", "localhost", "-m", "ansible.builtin.debug", "-a", "var=kablab_blocks",
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=120, env=ANSIBLE_ENV)


def test_noise_from_sizes_the_campaign_through_the_inventory(aa: Path) -> None:
    """-e kablab_noise_from=<aa campaign> raises the boots per kernel of the
    real inventory to what the A/A noise needs for a 3 % change."""
    need = boots_needed(aa, 3.0)
    assert need and need > 3
    plain = _inventory_blocks()
    sized = _inventory_blocks("-e", f"kablab_noise_from={aa}")
    assert plain.returncode == 0 and sized.returncode == 0, plain.stdout + sized.stdout + sized.stderr
    assert '"kablab_blocks": "3"' in plain.stdout or '"kablab_blocks": 3' in plain.stdout, plain.stdout
    assert f'"kablab_blocks": "{need}"' in sized.stdout or f'"kablab_blocks": {need}' in sized.stdout, sized.stdout
    bad = _inventory_blocks("-e", f"kablab_noise_from={aa}/results")
    assert "is not a campaign directory" in bad.stdout + bad.stderr


def test_a_metric_beyond_max_boots_is_an_error_not_a_silent_skip() -> None:
    """A campaign that cannot be sized says so (kablab_noise_from fails with the
    reason) instead of falling back to the profile's boots."""
    row = {"workload": "w", "metric": "m", "primary": True, "role": "primary", "n_boots": 10,
           "n_runs": 50, "runs_per_boot": 5, "sd_within": 0.01, "sd_between": 0.5,
           "scale": "log", "sd_boot": 0.5, "df_boot": 9}
    with pytest.raises(ValueError, match="w m needs more than 10000 boots"):
        boots_needed({"metrics": [row]}, 0.5)
    assert boots_needed({"metrics": [row]}, 50.0) is not None
