"""One host model for both drivers (``rmptwin.core.host``, ``rmptwin.core.nemesis``): the node
clock, the port rules, the release roles and the fault interpreter are written once, and the
simulator and the emulated runner each implement the same ``FaultTarget``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, RMP_PORT
from rmptwin.core.host import RELEASE_ROLES, NodeClock, port_for_datagram, port_for_group
from rmptwin.core.nemesis import FaultInterpreter, FaultTarget, steps
from rmptwin.core.striping import session_name
from rmptwin.errors import UserError
from rmptwin.model import Clock
from rmptwin.model.experiment import Fault
from rmptwin.rmp.moldudp64 import MoldPacket, MoldRequest, is_request

SRC = Path(__file__).resolve().parents[2] / "src" / "rmptwin"


# ---------------------------------------------------------------------------- the clock

@given(t=st.integers(0, 10**12), off=st.integers(-10**9, 10**9), ppm=st.floats(-1000, 1000))
def test_a_timer_never_fires_before_its_host_clock_reads_its_deadline(t, off, ppm):
    c = NodeClock(off, ppm)
    local = c.local(t)
    due = c.true(local)
    assert c.local(due) >= local, "at the true time a timer fires, the clock has reached the deadline"
    assert c.local(due - 1) < local, "and not one ns later than that"
    assert due <= t


def test_offset_and_drift_as_the_experiment_gives_them():
    c = NodeClock.of(Clock(offset_ms=3.0, drift_ppm=100.0))
    t = 2_000_000_000
    assert c.local(t) == t + 3_000_000 + 200_000
    assert c.true(c.local(t)) == t
    assert NodeClock.of(None).local(t) == t


def test_the_clock_nemesis_re_drifts_without_a_step_then_jumps():
    c = NodeClock.of(Clock(offset_ms=1.0, drift_ppm=10))
    at = c.local(2_000_000_000)
    c.change(2_000_000_000, jump_ns=5_000_000, drift_ppm=200)
    assert c.local(2_000_000_000) == at + 5_000_000
    assert c.local(3_000_000_000) - c.local(2_000_000_000) == 1_000_200_000
    c.change(3_000_000_000, jump_ns=None, drift_ppm=None)
    assert c.local(3_000_000_000) - c.local(2_000_000_000) == 1_000_200_000, "nothing asked, nothing changed"


# ---------------------------------------------------------------------------- ports and roles

def test_datagrams_go_to_the_port_of_their_kind():
    assert port_for_group("rmp/3") == RMP_PORT
    assert port_for_group("region/europe/3") == REGION_PORT
    assert port_for_datagram(bytes([0xA5, 1, 2, 3])) == RMP_PORT
    assert port_for_datagram(MoldRequest(session_name(1), 5, 3).encode()) == REREQUEST_PORT
    assert port_for_datagram(MoldPacket(session_name(1), 5, (b"x",)).encode()) == REGION_PORT
    assert port_for_datagram(MoldPacket(session_name(1), 5).encode()) == REGION_PORT  # heartbeat
    assert port_for_datagram(b"\x01\x02") == RMP_PORT


@given(st.binary(max_size=40))
def test_the_re_request_shape_has_one_definition(data):
    """The codec, the link model's keys and the port rules tell a re-request the same way."""
    assert is_request(data) == (port_for_datagram(data) == REREQUEST_PORT and data[:1] != b"\xa5")


def test_one_definition_of_each_host_rule():
    """RELEASE_ROLES, the port rules and the clock live in core.host and nowhere else."""
    defined = {}
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            names += [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []
            for n in names:
                if n in ("RELEASE_ROLES", "port_for_group", "port_for_datagram", "LocalClock", "NodeClock"):
                    defined.setdefault(n, []).append(str(path.relative_to(SRC)))
    assert defined == {n: ["core/host.py"] for n in ("RELEASE_ROLES", "port_for_group", "port_for_datagram",
                                                      "NodeClock")}
    assert RELEASE_ROLES == ("primary", "secondary")


# ---------------------------------------------------------------------------- the fault interpreter

class Recorder:
    """A FaultTarget that writes down what it is asked."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        if name not in FaultTarget.__dict__:
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, *args))


class Topo:
    switches = ["s1", "s2", "s3"]
    links = [type("L", (), {"name": n, "a": a, "b": b})() for n, a, b in
             (("s1-s2", "s1", "s2"), ("s2-s3", "s2", "s3"), ("s1-h1", "s1", "h1"))]


def _faults(*raw: dict) -> list:
    return steps([Fault.model_validate(f) for f in raw])


def test_every_unit_in_a_step_is_ns_and_each_step_is_one_call():
    rec = Recorder()
    interp = FaultInterpreter(Topo(), rec)
    for s in _faults({"at_s": 1, "action": "clock", "node": "h1", "jump_ms": 2.5},
                     {"at_s": 2, "action": "dup_reorder", "link": "s1-s2", "duplicate": 0.1, "reorder": 0.2,
                      "reorder_ms": 15, "duration_s": 1},
                     {"at_s": 4, "action": "partition", "groups": [["s3"]], "duration_s": 1},
                     {"at_s": 6, "action": "pause", "node": "h1", "duration_s": 0.5}):
        interp.apply(s.at_ns, s)
    assert rec.calls == [
        ("clock", 1_000_000_000, "h1", 2_500_000, None),
        ("set_chaos", 2_000_000_000, "s1-s2", 0.1, 0.2, 15_000_000),
        ("set_chaos", 3_000_000_000, "s1-s2", 0.0, 0.0, 0),
        ("set_link", 4_000_000_000, "s2-s3", False),
        ("set_link", 5_000_000_000, "s2-s3", True),
        ("pause", 6_000_000_000, "h1", None),
        ("resume", 6_500_000_000, "h1", None),
    ]


def test_a_heal_restores_only_what_the_partitions_cut():
    rec = Recorder()
    interp = FaultInterpreter(Topo(), rec)
    for s in _faults({"at_s": 1, "action": "partition", "groups": [["s3"]]},
                     {"at_s": 2, "action": "partition", "groups": [["s2", "s3"]]},
                     {"at_s": 3, "action": "heal"}):
        interp.apply(s.at_ns, s)
    assert [c for c in rec.calls if c[0] == "set_link"] == [
        ("set_link", 1_000_000_000, "s2-s3", False), ("set_link", 2_000_000_000, "s1-s2", False),
        ("set_link", 3_000_000_000, "s2-s3", True), ("set_link", 3_000_000_000, "s1-s2", True)]
    assert interp.cut == []


def test_an_unknown_action_is_one_clear_error():
    from rmptwin.core.nemesis import Step
    with pytest.raises(UserError, match="'melt'"):
        FaultInterpreter(Topo(), Recorder()).apply(0, Step(0, "melt"))


@pytest.mark.parametrize("backend", ["rmptwin.sim.simulate:Simulation", "rmptwin.emulation.emulate:EmulatedRun"])
def test_both_backends_implement_the_fault_target(backend):
    import importlib
    mod, cls = backend.split(":")
    impl = getattr(importlib.import_module(mod), cls)
    for name, proto in inspect.getmembers(FaultTarget, inspect.isfunction):
        if name.startswith("_"):
            continue
        got = getattr(impl, name, None)
        assert got is not None, f"{cls} has no {name}"
        assert list(inspect.signature(got).parameters) == list(inspect.signature(proto).parameters), name


def test_the_simulator_reads_no_runtime_and_interprets_no_fault_itself():
    for path in (SRC / "sim").glob("*.py"):
        assert "rmptwin.node" not in path.read_text(), path.name
    for path in (SRC / "sim" / "simulate.py", SRC / "emulation" / "emulate.py"):
        assert "partition_links" not in path.read_text(), f"{path.name} cuts partitions itself"
