"""The nodes' event loop (node.event_loop): uvloop when asked and installed, the stdlib's loop
otherwise; the run records which, a rerun repeats it, and a bad name is one line. The driver
on uvloop never hands a timer to its core before the deadline, though libuv fires early."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.node import event_loop
from rmptwin.node.driver import NodeDriver
from rmptwin.node.eventlog import EventWriter
from rmptwin.runner.rerun import replay_from_manifest
from tests.conftest import REPO

uvloop = pytest.importorskip("uvloop")   # locked: present wherever provision.sh ran


@pytest.fixture(autouse=True)
def stdlib_policy_after():
    yield
    asyncio.set_event_loop_policy(None)


def _loop_module() -> str:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__
    return asyncio.run(which())


def test_uvloop_is_used_when_asked_and_the_stdlib_loop_otherwise():
    assert event_loop.install("uvloop") == "uvloop" and _loop_module().startswith("uvloop")
    assert event_loop.install("asyncio") == "asyncio" and _loop_module().startswith("asyncio")


def test_without_uvloop_the_stdlib_loop_runs_and_says_so(monkeypatch):
    monkeypatch.setattr(event_loop.importlib.util, "find_spec", lambda name: None)
    assert event_loop.install("uvloop") == "asyncio" and _loop_module().startswith("asyncio")


def test_an_unknown_loop_is_refused():
    with pytest.raises(ValueError, match="uvloop or asyncio"):
        event_loop.install("tokio")


def _manifest(**extra):
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    return {**loaded.to_manifest(), "seed": 1, "backend": "emulation", "nodes": "ns", "impair": "relay", **extra}


def test_a_rerun_repeats_the_recorded_loop_and_names_a_bad_one():
    assert replay_from_manifest(_manifest(event_loop="asyncio"), "m.json").event_loop == "asyncio"
    assert replay_from_manifest(_manifest(), "m.json").event_loop is None   # recorded before the option
    with pytest.raises(UserError, match="event_loop: expected one of uvloop, asyncio, got 'tokio'"):
        replay_from_manifest(_manifest(event_loop="tokio"), "m.json")


class TimerCore:
    """A core that asks for a timer a few ms ahead, again and again, and notes when it fired."""

    def __init__(self, every_ns: int, count: int) -> None:
        self.every, self.left, self.deadline = every_ns, count, None
        self.fired: list[tuple[int, int]] = []   # (deadline, the time the core was handed)

    def receive_datagram(self, data, src, now):
        """Nothing arrives."""

    def datagrams_to_send(self, now):
        return []

    def get_timer(self):
        return self.deadline

    def handle_timer(self, now):
        self.fired.append((self.deadline, now))
        self.left -= 1
        self.deadline = None if self.left == 0 else now + self.every

    def next_event(self):
        return None

    def groups(self):
        return frozenset()


@pytest.mark.parametrize("loop", event_loop.EVENT_LOOPS)
def test_no_timer_reaches_the_core_early_on_either_loop(loop, tmp_path):
    event_loop.install(loop)
    core = TimerCore(every_ns=1_700_000, count=60)
    log = EventWriter(str(tmp_path / "events.jsonl"))

    async def main() -> NodeDriver:
        driver = NodeDriver(core, "n", "source", {"n": "127.0.0.1"}, time.time_ns(), log)
        core.deadline = driver.true_now() + core.every
        driver.start(asyncio.get_running_loop())
        while core.left:
            await asyncio.sleep(0.01)
        return driver

    driver = asyncio.run(main())
    log.close()
    assert len(core.fired) == 60 and all(now >= deadline for deadline, now in core.fired)
    assert driver.lateness.summary_ms()["n"] == 60   # each fire timed, none re-armed in a loop


def test_a_typo_in_the_loop_is_one_line_before_anything_runs():
    from rmptwin.emulation.run_facts import check_arguments
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    with pytest.raises(UserError, match="--event-loop: unknown event loop 'uvlop'; choose uvloop or asyncio"):
        check_arguments(loaded, "docker", None, "uvlop")
