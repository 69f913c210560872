"""manifest.json's environment (rmptwin.rundir.provenance): complete, well-typed, cheap, never failing."""

from __future__ import annotations

import time
from types import SimpleNamespace

from rmptwin.emulation import run_facts as emulated
from rmptwin.rundir import provenance

X86_CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n"
ARM_CPUINFO = ("processor\t: 0\nBogoMIPS\t: 48.00\nCPU implementer\t: 0x41\n\n"
               "Hardware\t: BCM2835\nModel\t: Raspberry Pi 4\n")
MEMINFO = "MemTotal:       24684096 kB\nMemFree:         1234 kB\n"


def _is(value, *types) -> bool:
    return value is None or isinstance(value, types)


def test_a_simulated_runs_environment_has_every_field_well_typed_and_emulation_fields_na():
    started = time.perf_counter()
    rec = provenance.collect()
    assert time.perf_counter() - started < 1.0, "collecting provenance must stay cheap"
    env, versions = rec["environment"], rec["versions"]
    if (provenance.REPO / ".git").exists():
        assert isinstance(rec["git_commit"], str) and len(rec["git_commit"]) == 40
        assert isinstance(env["git_dirty"], bool)
    assert isinstance(env["kernel"], str) and env["kernel"]
    assert _is(env["sch_netem"], bool)
    assert isinstance(env["cpu_count"], int) and env["cpu_count"] >= 1
    assert isinstance(env["cpus_usable"], int) and 1 <= env["cpus_usable"] <= env["cpu_count"]
    assert _is(env["cpu_model"], str) and isinstance(env["memory_total_mb"], int) and env["memory_total_mb"] > 0
    assert {env[k] for k in provenance.EMULATION_FIELDS} == {"n/a"}
    for name in ("rmptwin", "python", "pyarrow", "pydantic", "os-ken", "pyspark", "mininet", "openvswitch", "java"):
        assert name in versions and _is(versions[name], str)
    assert versions["python"].count(".") == 2 and versions["pydantic"]
    # Every locked package, by its name in requirements.lock, with the version the venv has.
    assert set(env["packages"]) == set(provenance.locked_names()) and len(env["packages"]) > 10
    assert env["packages"]["pydantic"] == versions["pydantic"]
    assert all(_is(v, str) for v in env["packages"].values())


def test_missing_tools_are_recorded_as_null_and_never_fail(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git, ovs-vsctl or java
    rec = provenance.collect()
    assert rec["git_commit"] is None and rec["environment"]["git_dirty"] is None
    assert rec["versions"]["openvswitch"] is None and rec["versions"]["java"] is None


def test_an_emulated_runs_fields_come_from_the_network_it_used(monkeypatch):
    ids = {"rmptwin-node:0123456789ab": "sha256:feed"}
    monkeypatch.setattr(emulated, "image_id", ids.get)
    monkeypatch.setattr(emulated, "has_netem", lambda: False)
    monkeypatch.setattr(emulated.os, "geteuid", lambda: 0)
    docker = SimpleNamespace(impair="relay", env=SimpleNamespace(datapath="user"), image="rmptwin-node:0123456789ab")
    facts = emulated.emulation_facts("docker", docker)
    assert facts == {"node_mode": "docker", "impair_backend": "relay", "datapath": "user",
                     "node_image": "rmptwin-node:0123456789ab", "node_image_id": "sha256:feed", "sch_netem": False}
    ns = emulated.emulation_facts("ns", SimpleNamespace(impair="netem", env=SimpleNamespace(datapath="kernel")))
    assert ns["node_image"] == ns["node_image_id"] == "n/a" and ns["datapath"] == "kernel"
    flat = emulated.emulation_facts("flat", SimpleNamespace(impair="none"))  # FlatNetwork: no switches
    assert flat == {"node_mode": "flat", "impair_backend": "none", "datapath": "n/a", "node_image": "n/a",
                    "node_image_id": "n/a", "sch_netem": False}
    env = provenance.collect(facts)["environment"]
    assert all(env[k] == facts[k] for k in provenance.EMULATION_FIELDS)
    assert env["sch_netem"] is False   # the backend tried netem for real: its answer, not the files'
    assert "sch_netem" in provenance.collect()["environment"]


def test_cpu_model_and_memory_are_read_from_proc_formats():
    assert provenance.cpu_model(X86_CPUINFO) == "AMD EPYC 7B13"
    assert provenance.cpu_model(ARM_CPUINFO) == "Raspberry Pi 4"
    assert provenance.memory_total_mb(MEMINFO) == 24105
    assert provenance.memory_total_mb("") is None


def test_locked_names_read_pins_with_hashes_extras_and_comments(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# generated\nnumpy==2.4.6 \\\n    --hash=sha256:abc\n"
                    "uvicorn[standard]==0.30.0\noslo.config==10.7.0  # via os-ken\n\n--index-url x\n")
    assert provenance.locked_names(lock) == ["numpy", "uvicorn", "oslo.config"]


def test_differences_name_what_changed_and_ignore_what_the_old_manifest_never_recorded():
    then = {"git_commit": "a" * 40, "versions": {"java": "17.0.1", "python": "3.11.2"},
            "environment": {"kernel": "6.1.0", "cpu_count": 2, "packages": {"numpy": "2.0", "rich": "15.0.0"}}}
    now = {"git_commit": "b" * 40, "versions": {"java": "17.0.15", "python": "3.11.2", "pyspark": "4.3.0"},
           "environment": {"kernel": "6.1.0", "cpu_count": 4, "sch_netem": True,
                           "packages": {"numpy": "2.4.6", "rich": "15.0.0"}}}
    assert provenance.differences(then, now) == [
        "git commit differs (aaaaaaaaaaaa -> bbbbbbbbbbbb)", "cpu count differs (2 -> 4)",
        "java differs (17.0.1 -> 17.0.15)", "1 locked package(s) differ (numpy 2.0 -> 2.4.6)"]
    assert provenance.differences(now, now) == []
