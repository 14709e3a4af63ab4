"""kablab.remote.doctor: the host checks on captured (and labelled derived) trees."""
from __future__ import annotations

import json
import os

import pytest

from kablab.remote import doctor

HOSTS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hosts")


def host(name):
    root = os.path.join(HOSTS, name)
    return root, doctor.load_probe([os.path.join(root, "accel-probe.json")])


def verdicts(findings):
    return {f["check"]: f["verdict"] for f in findings}


def test_tcg_host_captured_here():
    root, probe = host("tcg-pvm-2cpu")
    f = doctor.run_checks(root, probe, "default", 2048, 2)
    assert verdicts(f) == {
        "accel": "invalidates", "vpmu": "invalidates", "thp": "ok", "backing": "adds noise",
        "nx_huge_pages": "ok", "cpufreq": "ok", "smt": "ok", "isolated": "adds noise", "numa": "ok"}
    assert doctor.invalidating(f) == ["accel", "vpmu"]
    assert doctor.summary(f) == doctor.TCG_SUMMARY
    assert "not supported" in f[1]["detail"]
    # every non-ok line names its fix
    assert all(x["fix"] for x in f if x["verdict"] != "ok")
    assert len([doctor.line(x) for x in f]) == len(doctor.CHECKS)


@pytest.mark.parametrize("backing,verdict", [
    ("default", "adds noise"),          # THP madvise: QEMU madvises its RAM
    ("memfd", "invalidates"),           # shmem THP never: 4k
    ("memfd-thp", "invalidates"),
    ("hugetlbfs-2M", "invalidates"),    # nothing reserved
    ("hugetlbfs-1G", "invalidates"),    # no 1G pool
    ("hugepages", "invalidates"),
])
def test_backing_on_the_captured_host(backing, verdict):
    root, _ = host("tcg-pvm-2cpu")
    assert doctor.check_backing(root, backing, 2048, 2)["verdict"] == verdict


def test_kvm_host_with_hugetlbfs():
    root, probe = host("kvm-hugetlbfs")
    pin = doctor.pick_cpus(root, 2)
    assert pin == ["1", "0"]  # isolated CPU first, distinct cores
    assert doctor.pick_placement(root, 2) == {"cpus": ["1", "0"], "node": 0}
    assert doctor.pick_placement(root, 3) == {"cpus": [], "node": None}
    assert doctor.main(["pick-cpus", "2", "--root", root]) == 0
    assert doctor.main(["pick-cpus", "3", "--root", root]) == 1
    f = doctor.run_checks(root, probe, "hugetlbfs-2M", 2048, 2, pin)
    assert doctor.invalidating(f) == []
    assert verdicts(f)["cpufreq"] == "ok"
    assert doctor.check_backing(root, "hugetlbfs-1G", 2048, 2)["verdict"] == "ok"
    # 4 GiB of 2M pages do not hold three 2 GiB guests
    short = doctor.check_backing(root, "hugetlbfs-2M", 2048, 3)
    assert short["verdict"] == "invalidates" and "nr_hugepages" in short["fix"]
    assert doctor.summary(f).startswith("KVM, host checks ok")


def test_kvm_host_with_itlb_multihit_and_nx_huge_pages():
    root, probe = host("kvm-itlb-multihit")
    f = doctor.run_checks(root, probe, "default", 2048, 2)
    v = verdicts(f)
    assert v["nx_huge_pages"] == "invalidates" and v["cpufreq"] == "adds noise"
    nx = f[doctor.CHECKS.index("nx_huge_pages")]
    assert "kernel-text" in nx["invalidates"] and "nx_huge_pages=off" in nx["fix"]
    assert "kernel-text iTLB differences hidden" in doctor.summary(f)
    assert doctor.unaccepted(f, "nx_huge_pages") == []
    assert doctor.unaccepted(f, ["accel"]) == ["nx_huge_pages"]
    # the same tree under TCG: nx_huge_pages does not apply
    assert doctor.check_nx_huge_pages(root, "tcg")["verdict"] == "ok"


def test_no_probe_record_yet():
    # before the first boot probe the accelerator is unknown, and so is the vPMU
    accel = doctor.check_accel(None)
    assert accel["verdict"] == "unknown" and "accelerator unknown" in accel["detail"]
    root, _ = host("tcg-pvm-2cpu")
    f = doctor.run_checks(root, None)
    assert doctor.summary(f).startswith("accelerator unknown (no boot probe yet)")
    assert "KVM" not in doctor.summary(f)


def test_without_a_vpmu_the_fix_names_the_model():
    root, probe = host("tcg-pvm-2cpu")
    vpmu = doctor.run_checks(root, probe)[doctor.CHECKS.index("vpmu")]
    assert vpmu["verdict"] == "invalidates" and "kablab_tlb_model" in vpmu["fix"]


def test_cpulist_and_bracketed():
    assert doctor.cpulist("0-2,5\n") == [0, 1, 2, 5]
    assert doctor.cpulist("") == []
    assert doctor.bracketed("always [madvise] never") == "madvise"


def test_cli_writes_json(tmp_path):
    root, _ = host("tcg-pvm-2cpu")
    out = tmp_path / "doctor.json"
    assert doctor.main(["check", "--root", root, "--probe", os.path.join(root, "accel-probe.json"),
                        "--accept", "accel", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["invalidates"] == ["accel", "vpmu"] and doc["accepted"] == ["accel"]


def test_cli_keeps_its_record_beside_the_findings_on_stdout(tmp_path, capsys):
    """--record as host_doctor calls it (with --json -): the same document
    on stdout and in the record; a host without the record's directory yet
    still gets its findings."""
    root, _ = host("tcg-pvm-2cpu")
    record = tmp_path / "doctor.json"
    argv = ["check", "--root", root, "--probe", os.path.join(root, "accel-probe.json"), "--json", "-"]
    assert doctor.main(argv + ["--record", str(record)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(record.read_text())
    assert doctor.main(argv + ["--record", str(tmp_path / "none/doctor.json")]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["invalidates"] == ["accel", "vpmu"] and "not recorded" in out.err


def test_capture_round_trip(tmp_path):
    root, probe = host("tcg-pvm-2cpu")
    assert doctor.capture(root, str(tmp_path)) > 20
    assert verdicts(doctor.run_checks(str(tmp_path), probe)) == verdicts(doctor.run_checks(root, probe))


def test_backing_shortfall_only_where_guests_cannot_start(capsys):
    root, _ = host("tcg-pvm-2cpu")                # THP madvise, no hugetlb pages reserved
    assert doctor.backing_shortfall(root, "default", 2048, 2) is None
    assert doctor.backing_shortfall(root, "memfd", 2048, 2) is None
    why = doctor.backing_shortfall(root, "hugetlbfs-2M", 2048, 2)
    assert why.startswith("hugetlbfs-2M: 0 free 2M pages") and "echo 2048 > " in why
    assert "no 1G hugetlb pool" in doctor.backing_shortfall(root, "hugetlbfs-1G", 2048, 1)
    assert "0 free 2M pages" in doctor.backing_shortfall(root, "hugepages", 256, 1)
    kvm, _ = host("kvm-hugetlbfs")                # 4 GiB of 2M pages reserved
    assert doctor.backing_shortfall(kvm, "hugetlbfs-2M", 2048, 2) is None
    assert "guests need 6144 MiB" in doctor.backing_shortfall(kvm, "hugetlbfs-2M", 2048, 3)
    assert doctor.main(["fits", "hugetlbfs-2M", "2048", "2", "--root", kvm]) == 0
    assert doctor.main(["fits", "hugetlbfs-2M", "2048", "3", "--root", kvm]) == 1
    assert "guest_domain_memory_backing=hugetlbfs-2M: " in capsys.readouterr().err
