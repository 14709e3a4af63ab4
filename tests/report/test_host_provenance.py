"""make doctor's findings and the host noise in the results' provenance reach
the report's first screen (host line beside the verdicts) and a per-boot
table. The injected values come from the captured trees of this host
(tests/fixtures/hosts/tcg-pvm-2cpu, tests/fixtures/hostnoise)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from kablab.remote import doctor, hostnoise
from kablab.results.load import load_campaign
from kablab.report.render import render_campaign

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def tcg_doctor() -> dict:
    root = FIX / "hosts" / "tcg-pvm-2cpu"
    probe = doctor.load_probe([str(root / "accel-probe.json")])
    findings = doctor.run_checks(str(root), probe, "default", 2048, 2)
    return doctor.provenance({"findings": findings, "summary": doctor.summary(findings),
                              "accepted": [], "backing": "default"})


def captured_noise() -> dict:
    a, b = (hostnoise.sample(str(FIX / "hostnoise" / s)) for s in "ab")
    a["t"], b["t"] = 0.0, 3.0
    return hostnoise.between(a, b)


def test_host_line_and_noise_per_boot(campaign_raw: Path, tmp_path: Path) -> None:
    camp = tmp_path / "c"
    shutil.copytree(campaign_raw, camp)
    doc_prov, noise = tcg_doctor(), captured_noise()
    for f in (camp / "results").glob("*/*.json"):
        r = json.loads(f.read_text(encoding="utf-8"))
        r["host"].update(doctor=doc_prov, noise=noise)
        f.write_text(json.dumps(r), encoding="utf-8")
    loaded = load_campaign(camp)
    assert not loaded.invalid, loaded.invalid  # the schema takes both blocks
    render_campaign(loaded)
    html = (camp / "index.html").read_text(encoding="utf-8")
    line = html.index('class="note host-line"')
    assert html.index('id="verdicts"') < line < html.index('id="verdict-matrix"')
    assert doctor.TCG_SUMMARY in html[line:line + 400]
    assert 'data-invalidates="accel,vpmu"' in html
    table = html[html.index('id="host-noise"'):]
    table = table[:table.index("</table>")]
    boots = {(r["variant"], r.get("block")) for r in loaded.results}
    assert table.count("<tr data-variant=") == len(boots)
    assert f"<td class=\"num\">{noise['loadavg1']}</td>" in table
    txt = (camp / "summary.txt").read_text(encoding="utf-8")
    assert "host " in txt and "TCG: timings emulated" in txt


def test_results_without_findings_render_without_host_line(rendered: Path) -> None:
    html = (rendered / "index.html").read_text(encoding="utf-8")
    assert 'class="note host-line"' not in html and 'id="host-noise"' not in html


def test_results_before_the_first_probe_validate(campaign_raw: Path, tmp_path: Path) -> None:
    """A campaign whose preflight ran before any boot probe records the
    accelerator (and the vPMU) as unknown; its results stay schema-valid."""
    from kablab.util import validation_errors
    root = FIX / "hosts" / "tcg-pvm-2cpu"
    findings = doctor.run_checks(str(root), None, "default", 2048, 2)
    prov = doctor.provenance({"findings": findings, "summary": doctor.summary(findings),
                              "accepted": [], "backing": "default"})
    assert prov["checks"]["accel"]["verdict"] == "unknown"
    f = next((campaign_raw / "results").glob("*/*.json"))
    r = json.loads(f.read_text(encoding="utf-8"))
    r["host"]["doctor"] = prov
    assert validation_errors(r) == []
