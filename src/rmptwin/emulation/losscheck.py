"""What an impaired link lost, checked the same way on either impairment backend.

The user-space relay writes a per-packet drop log; netem keeps none, only its qdisc's
counters. So the tests establish *which* packets were lost from sequence numbers the
traffic itself carries (probe sequence numbers; a source's message numbers in the event
log), and check that against the link's own record: its counters on both backends, and
on the relay also its per-packet log. Everything here is a pure function of what was
measured, unit-tested on synthetic input; reading ``tc`` and the relays is the caller's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from rmptwin.core.groups import rmp_group


@dataclass(frozen=True)
class LinkCount:
    """Packets one direction of an impaired link took in and dropped (any reason)."""

    entered: int
    dropped: int

    def __sub__(self, before: LinkCount) -> LinkCount:
        return LinkCount(self.entered - before.entered, self.dropped - before.dropped)


def netem_count(tc_json: str) -> LinkCount:
    """The netem qdisc's counters from ``tc -s -j qdisc show dev IF``: what it sent, dropped
    and still holds entered it."""
    start = tc_json.find("[")       # past any warning a shell put before the JSON
    qdiscs = [q for q in json.loads(tc_json[start:] if start >= 0 else "[]") if q.get("kind") == "netem"]
    if not qdiscs:
        raise ValueError("no netem qdisc on this interface")
    q = qdiscs[0]
    return LinkCount(int(q["packets"]) + int(q["drops"]) + int(q.get("qlen", 0)), int(q["drops"]))


def relay_count(counts: pa.Table, link: str, from_node: str) -> LinkCount:
    """One direction's totals from a ``LINK_COUNT_SCHEMA`` table (the relays' counts)."""
    rows = [r for r in counts.to_pylist() if r["link"] == link and r["from_node"] == from_node]
    if not rows:
        raise ValueError(f"no counts for link {link} from {from_node}")
    return LinkCount(sum(r["packets"] for r in rows), sum(r["dropped"] for r in rows))


def misses_explained(missed: set[int], probes_sent: int, link: LinkCount, logged: set[int] | None = None) -> list[str]:
    """Why the link's record does not account for exactly the probes a receiver missed;
    [] when it does.

    ``missed``: probe sequence numbers sent across the link and never received. ``link``:
    the link direction's counters over the probe run; every probe entered it, anything
    more is other traffic (ARP, IGMP), which may explain extra drops but never fewer.
    ``logged``: the probes in the relay's per-packet drop log, None where there is none
    (netem). A run that lost nothing proves nothing, so it is a problem too.
    """
    problems = []
    if not missed:
        problems.append(f"none of {probes_sent} probes was lost: the configured loss did not happen")
    if link.entered < probes_sent:
        problems.append(f"{probes_sent} probes were sent across the link but only {link.entered} packets entered it")
    others = max(0, link.entered - probes_sent)
    if link.dropped < len(missed):
        problems.append(f"the receiver missed {len(missed)} probes but the link dropped only {link.dropped} "
                        "packets: the rest were lost elsewhere")
    elif link.dropped > len(missed) + others:
        problems.append(f"the link dropped {link.dropped} packets, more than the {len(missed)} missed probes "
                        f"and the {others} other packets that crossed it")
    if logged is not None and logged != missed:
        problems.append(f"the drop log and the receiver disagree: logged but received {sorted(logged - missed)[:5]}, "
                        f"missed but not logged {sorted(missed - logged)[:5]}")
    return problems


def repaired_first_copies(events: pa.Table) -> set[tuple[str, str, int, int]]:
    """(receiver, source, stripe, source sequence number) of every message a receiver first
    got as a repair: the source's own multicast copy never reached it, so a link on the
    way lost it (the run's per-packet loss, read from the event log alone)."""
    recv = events.filter(pc.equal(events["kind"], "recv"))
    rows = recv.select(["node", "src", "src_seq", "detail"]).to_pylist()
    out = set()
    for r in rows:
        detail = json.loads(r["detail"] or "{}")
        if detail.get("repair"):
            out.add((r["node"], r["src"], int(detail.get("stripe", 0)), int(r["src_seq"])))
    return out


def repairs_without_a_drop(repaired: set[tuple[str, str, int, int]], drops: pa.Table) -> set[tuple[str, str, int, int]]:
    """The repaired first copies of which no link dropped the source's data frame
    (``DROP_SCHEMA`` rows; a stripe's data travels in its global group)."""
    rows = drops.select(["frame", "src", "src_seq", "group"]).to_pylist()
    dropped = {(r["src"], r["group"], r["src_seq"]) for r in rows if r["frame"] == "DATA"}
    return {m for m in repaired if (m[1], rmp_group(m[2]), m[3]) not in dropped}
