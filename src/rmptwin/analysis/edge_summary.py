"""The edge-stripe section of summary.json (RMP seed 4.4; ``rmp.edge_stripes``): present only
when the experiment has ``workload.edge_stripes``.

``edge``:
- ``stripes``: edge stripes in all; ``line_kbps``: the line they are sized for;
  ``largest_stripe_kbps``: the busiest edge stripe's measured rate (messages released on it
  over the publishing time, each costing ``edge_stripes.message_bits`` without the headroom);
- ``customers``: per customer: ``line_kbps`` (its access link), ``stripes`` (the edge stripes
  it joined), ``received_kbps`` (the distinct messages it received over the publishing time,
  each at its wire size: payload, length, one packet header), ``within_line``,
  ``received`` and ``released`` (messages on its stripes), ``complete`` (it received every
  message released on each of its stripes; guaranteed grade is required to, best effort not);
- ``all_within_line``, ``none_starving`` (every customer received messages on every stripe it
  joined), ``guaranteed_complete`` (every guaranteed customer complete on every stripe it
  joined), ``broker_everything``: the customers that joined every edge stripe got every
  message of every one.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmptwin.analysis.stripe_delivery import rt_names, stripe_delivery
from rmptwin.model import LoadedExperiment
from rmptwin.model.queries import customer_stripes, edge_plan
from rmptwin.rmp.edge_stripes import PACKET_OVERHEAD


def summarize(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    plan = edge_plan(loaded)
    if plan is None:
        return {}
    w = loaded.experiment.workload
    assert w.edge_stripes is not None   # edge_plan is None without it
    wire_bits = (w.message_bytes + 2 + PACKET_OVERHEAD) * 8
    seconds = w.duration_s
    d = stripe_delivery(df, rt_names(loaded.topology))
    released = d.released
    every = set(plan.ids())
    customers: dict[str, dict[str, Any]] = {}
    for c in loaded.topology.hosts_with_role("customer"):
        mine = customer_stripes(c, loaded)
        n_got = sum(len(d.received_on(c.name, s) & released.get(s, set())) for s in mine)
        n_rel = sum(len(released.get(s, set())) for s in mine)
        line = c.link.bandwidth_mbps * 1000 if c.link.bandwidth_mbps is not None else None
        kbps = n_got * wire_bits / seconds / 1000
        customers[c.name] = {
            "grade": c.grade, "line_kbps": line, "stripes": mine, "received": n_got, "released": n_rel,
            "received_kbps": round(kbps, 3), "within_line": line is None or kbps <= line,
            "starving": any(not d.received_on(c.name, s) for s in mine),
            "complete": d.complete(c.name, mine),
            "all_stripes": set(mine) == every,
        }
    # released also holds the core stripes' messages (RELEASE): the edge stripes are plan.ids()
    largest = max((len(released.get(s, ())) for s in every), default=0) * wire_bits / seconds / 1000
    return {"edge": {
        "stripes": len(every), "line_kbps": w.edge_stripes.line_kbps, "largest_stripe_kbps": round(largest, 3),
        "customers": {n: {k: v for k, v in c.items() if k != "all_stripes"} for n, c in customers.items()},
        "all_within_line": all(c["within_line"] for c in customers.values()),
        "none_starving": not any(c["starving"] for c in customers.values()),
        "guaranteed_complete": all(c["complete"] for c in customers.values() if c["grade"] == "guaranteed"),
        "broker_everything": any(c["all_stripes"] for c in customers.values())
        and all(c["complete"] for c in customers.values() if c["all_stripes"]),
    }}


def headline(summary: dict[str, Any]) -> list[tuple[str, object]]:
    e = summary.get("edge")
    if not e:
        return []
    per = ", ".join(f"{n} {c['received_kbps']:.1f}/{c['line_kbps']:g} kbps on {len(c['stripes'])}"
                    for n, c in e["customers"].items())
    return [("edge stripes", f"{e['stripes']} of ≤ {e['line_kbps']:g} kbps (largest {e['largest_stripe_kbps']:.1f})"),
            ("edge customers", per),
            ("edge verdict", f"within line {e['all_within_line']}, none starving {e['none_starving']}, "
                             f"guaranteed complete {e['guaranteed_complete']}, broker all {e['broker_everything']}")]
