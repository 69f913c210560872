"""The exchange venue under nemeses: four scenarios on a venue experiment,
each a fault schedule the checkers judge (0 trades lost, CAS history linearizable, EV states
equal) and whose outage ``checkers.probe_checker.venue_outage_ms`` measures.

- ``ev_kill9``: an EV is killed (SIGKILL) and a new incarnation started 1.5 s later;
- ``ev_partition``: the EV's switch is cut off from the rest (the sequencer host and its etcd
  members, the gateways, the history recorder) for 1 s; the topology puts that EV alone
  on a switch of its own (``isolated_ev``) so a switch partition can separate it;
- ``etcd_member_pause``: one of the sequencer host's three etcd members is stopped (SIGSTOP)
  for 2 s (the simulator's in-memory sequencer has no members: there the fault is logged only);
- ``gateway_restart``: a gateway is killed and restarted 1 s later from its durable log.
"""

from __future__ import annotations

from typing import Any

from rmptwin.model import LoadedExperiment, Topology

SCENARIOS = ("ev_kill9", "ev_partition", "etcd_member_pause", "gateway_restart")
EV_SWITCH = "s_ev"


def isolated_ev(loaded: LoadedExperiment, ev: str) -> LoadedExperiment:
    """``loaded`` with ``ev`` moved to a switch of its own, linked to its old one."""
    topo = loaded.topology.model_dump(mode="json")
    host = next(h for h in topo["hosts"] if h["name"] == ev)
    topo["switches"].append(EV_SWITCH)
    topo["links"].append({"a": host["switch"], "b": EV_SWITCH, "delay_ms": 0.02})
    host["switch"] = EV_SWITCH
    return loaded.model_copy(update={"topology": Topology.model_validate(topo)})


def scenario(loaded: LoadedExperiment, name: str,
             at_s: float = 2.0) -> tuple[LoadedExperiment, list[dict[str, Any]]]:
    """(the experiment to run, its fault schedule) of one scenario on a venue experiment."""
    from rmptwin.chaos.campaign import with_faults

    topo = loaded.topology
    ev = topo.hosts_with_role("venue")[-1].name
    gw = topo.hosts_with_role("gateway")[0].name
    seq = topo.hosts_with_role("sequencer")[0].name
    if name == "ev_kill9":
        faults = [{"at_s": at_s, "action": "crash", "node": ev}, {"at_s": at_s + 1.5, "action": "recover", "node": ev}]
    elif name == "ev_partition":
        loaded = isolated_ev(loaded, ev)
        faults = [{"at_s": at_s, "action": "partition", "groups": [[EV_SWITCH]], "duration_s": 1.0}]
    elif name == "etcd_member_pause":
        faults = [{"at_s": at_s, "action": "pause", "node": seq, "member": 0, "duration_s": 2.0}]
    elif name == "gateway_restart":
        faults = [{"at_s": at_s, "action": "crash", "node": gw}, {"at_s": at_s + 1.0, "action": "recover", "node": gw}]
    else:
        raise ValueError(f"unknown venue scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    return with_faults(loaded, faults), faults
