"""Wait until the controller has seen the IGMP joins a run or a probe needs.

A fixed pause after the receivers join is a guess about the machine: under a VM's emulated
CPU a report reaches the controller seconds later than here, and a sender that starts
before the tree includes a receiver makes that receiver's first datagrams look lost. The
controller's state file lists each group's members as it learns them; this waits for the
ones wanted. When no join has come for ``query_after_s`` while some are missing, a report
was lost: the controller, the network's IGMP querier, is asked to query every host port
(at most that often), and each host answers with every group it holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Membership(Protocol):
    """A running network whose controller reports group members (``EmulatedNetwork``)."""

    def controller_state(self) -> dict[str, Any]: ...

    def request_igmp_query(self) -> None: ...


@dataclass
class JoinWait:
    """What a wait found: the (group ip, host) joins still missing when it ended, and how
    many general queries it asked the controller for."""
    missing: set[tuple[str, str]] = field(default_factory=set)
    queries: int = 0


def wait_for_joins(controller_state: Callable[[], dict[str, Any]], request_query: Callable[[], None],
                   want: Iterable[tuple[str, str]], *, timeout_s: float, query_after_s: float,
                   on_progress: Callable[[int, int], None] | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> JoinWait:
    """Poll ``controller_state()`` until every (group ip, host name) in ``want`` is a member.
    ``on_progress(joined, wanted)`` is called on every poll."""
    wanted = set(want)
    found = JoinWait(missing=wanted)
    deadline = clock() + timeout_s
    quiet_since = clock()
    while clock() < deadline:
        groups = controller_state().get("groups", {})
        missing = {(ip, n) for ip, n in wanted if n not in groups.get(ip, {}).get("members", ())}
        if missing != found.missing:
            found.missing, quiet_since = missing, clock()
        if on_progress is not None:
            on_progress(len(wanted) - len(missing), len(wanted))
        if not missing:
            return found
        if clock() - quiet_since > query_after_s:
            request_query()
            found.queries += 1
            quiet_since = clock()
        sleep(0.2)
    return found
