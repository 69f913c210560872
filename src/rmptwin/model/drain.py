"""How long a run must last for its work to finish: the workload's end plus the drain the
protocol's own timers need, so that a run is never cut off with messages unreleased and read as
"0 lost" (or as a loss).

``duration_s: auto`` (the default) is ``auto_duration_s``; an explicit ``duration_s`` shorter
than it gets the ``duration_vs_drain`` warning (``run_length_warnings``); a run that ends before
its drain anyway says so (``analysis.drain_state``). The figures are the worst case the seed's
timers allow, not a typical run, in ms (the protocol's own unit), after the last message:

- ``d``, the longest one-way delay from a source to any host (delay plus jitter of each link,
  along the least-delay path), for the message to reach the ring;
- the last token round: m passes (tau_t apart; null tokens of an event-driven ring), so that
  every site has acknowledged and, under safe delivery, the message is stable (2.1, 5);
- k_r repair rounds tau_r apart for a receiver that lost the message or its ack (5.1);
- Delta_A, after which an acknowledged message is released (5);
- a customer's repairs: the R_T's next heartbeat shows the gap (``rmp.remulticast``), then
  k_r requests tau_r apart, each path at most d;
- an exchange venue's gateways re-send an unanswered request after ``venue.gateway.REPLAY_NS``;
- a trading floor's auction rounds close token passes later: a Dutch clock's fall from its
  start to the reserve, a sealed-bid round's ``round_passes``.

With faults in the schedule, the run lasts until a ring could have recovered from a fault that
ends with the workload or the schedule, whichever is later (``recovery_s``).

Measured on every shipped experiment (simulated, seed 1, run 15 s past its workload), the last
message work came 0.00-0.47 of this figure after the workload's end: docs/validation.md.
"""

from __future__ import annotations

import math

from rmptwin.core.timing import MS
from rmptwin.model.experiment import Experiment
from rmptwin.model.role_checks import Finding
from rmptwin.model.topology import Topology
from rmptwin.model.tree import links_delay_ms, worst_delays_from
from rmptwin.rmp.remulticast import DEFAULT_HEARTBEAT_NS
from rmptwin.venue.gateway import REPLAY_NS

AUTO = "auto"


def workload_end_s(exp: Experiment, topo: Topology) -> float:
    """When the last piece of work starts: the ticker's last message, the venue's last request,
    the last unified-orders decision slot, the floor's last order."""
    ends = []
    if topo.hosts_with_role("source"):
        ends.append(exp.workload.start_s + exp.workload.duration_s)
    if exp.venue is not None:
        ends.append(exp.venue.start_s + exp.venue.duration_s)
    if exp.orders is not None:
        ends.append(exp.orders.end_s)
    if exp.floor is not None:
        ends.append(exp.floor.start_s + exp.floor.duration_s)
    return max(ends, default=exp.workload.start_s + exp.workload.duration_s)


def faults_end_s(exp: Experiment) -> float:
    """When the last fault of the schedule ends (0 without faults)."""
    return max((f.at_s + (f.duration_s or 0.0) for f in exp.faults), default=0.0)


def max_source_delay_ms(topo: Topology) -> float:
    """The longest one-way delay from a source (or, without one, any host) to any host, along
    the least-delay switch paths (``tree.worst_delays_from``), each access link included."""
    worst = 0.0
    for src in topo.hosts_with_role("source") or topo.hosts:
        far = worst_delays_from(topo, src.switch)
        out = links_delay_ms([src.link])
        worst = max(worst, max((out + far.get(h.switch, 0.0) + links_delay_ms([h.link]) for h in topo.hosts),
                               default=0.0))
    return worst


def drain_s(exp: Experiment, topo: Topology) -> float:
    """Seconds from the last piece of work until every receiver and customer has released or
    repaired it, by the protocol's timers (module docstring)."""
    p = exp.protocol
    d = max_source_delay_ms(topo)
    m = len(topo.hosts_with_role("primary"))
    ms = 0.0
    if m:
        token_pass = p.tau_t if p.token_mode == "time_driven" else p.null_token
        ms = d + m * token_pass + p.k_r * p.tau_r + p.delta_a
        if topo.hosts_with_role("customer"):
            ms += DEFAULT_HEARTBEAT_NS / MS + d + p.k_r * p.tau_r
        if exp.floor is not None and exp.floor.rule == "dutch":
            ms += math.ceil(exp.floor.dutch_start_ticks / exp.floor.dutch_step_ticks) * token_pass
        elif exp.floor is not None and exp.floor.rule == "second_price":
            ms += exp.floor.round_passes * token_pass
    if exp.venue is not None and topo.hosts_with_role("venue"):
        ms = max(ms, REPLAY_NS / MS + 2 * d)
    return ms / 1000.0


def recovery_s(exp: Experiment, topo: Topology) -> float:
    """Seconds a ring needs, by its own timers, to recover from a fault that ends as the workload
    does: the worst case the seed's protocol allows (sections 2.1 and 5.1), not a typical one.

    - detection: the token site's slot, then k_r + 1 sends of the pass tau_r apart (the twin's
      site reports after k_r + 1): tau_t + (k_r + 1) tau_r;
    - reformation: k_r invitations tau_r apart and the last invitee's answer: (k_r + 1) tau_r;
    - the new ring's first round, m tau_t (under safe delivery nothing is stable before it);
    - Delta_A, after which an acknowledged message is released;
    - a customer's repair: its feed watch finds a silent R_T after ``stale_heartbeats``
      heartbeats and asks its R_x instead, then k_r requests tau_r apart;
    - and the paths: a message to the new token site, its ack to every receiver, the R_T's
      remulticast to a customer, each at most d (module docstring).

    For quickstart (tau_t 300 ms, tau_r 370 ms, k_r 3, m 6, Delta_A 1.5 s, d 156 ms, 3
    heartbeats of 250 ms) that is 8.89 s.
    """
    p = exp.protocol
    m = len(topo.hosts_with_role("primary"))
    if not m:
        return 0.0   # no ring to re-form: a venue's own drain (drain_s) covers its failover
    detection = p.tau_t + (p.k_r + 1) * p.tau_r
    reformation = (p.k_r + 1) * p.tau_r
    customers = 0.0
    if topo.hosts_with_role("customer"):
        customers = p.stale_heartbeats * DEFAULT_HEARTBEAT_NS / MS + p.k_r * p.tau_r
    paths = 3 * max_source_delay_ms(topo)
    return (detection + reformation + m * p.tau_t + p.delta_a + customers + paths) / 1000.0


def fault_drain_s(exp: Experiment, topo: Topology) -> float:
    """What a run needs after its last fault or message: the longer of the drain and the recovery."""
    return max(drain_s(exp, topo), recovery_s(exp, topo))


def tenth_up(seconds: float) -> float:
    """``seconds`` rounded up to 0.1 s (float noise below 1e-6 s ignored): how run lengths are given."""
    return math.ceil(round(seconds * 10, 6)) / 10


def auto_duration_s(exp: Experiment, topo: Topology) -> float:
    """The run length ``duration_s: auto`` stands for, rounded up to 0.1 s."""
    end = workload_end_s(exp, topo) + drain_s(exp, topo)
    if exp.faults:
        end = max(workload_end_s(exp, topo), faults_end_s(exp)) + fault_drain_s(exp, topo)
    return tenth_up(end)


def run_length_warnings(exp: Experiment, topo: Topology) -> list[Finding]:
    """``duration_vs_drain``: an explicit duration_s that ends the run before its work can."""
    if exp.duration_s == AUTO:
        return []
    need = auto_duration_s(exp, topo)
    if float(exp.duration_s) >= need:
        return []
    work = workload_end_s(exp, topo)
    why = (f"the workload ends at {work:g} s and the protocol's timers need {need - work:.1f} s more "
           f"(Delta_A, the last token round, k_r repair rounds{', recovery from the faults' if exp.faults else ''})")
    return [Finding(("duration_s",), "duration_s",
                    f"{exp.duration_s:g} s ends the run before its work: {why}, {need:g} s in all; messages still "
                    f"unreleased at the end are reported as ended_before_drain (duration_s: auto runs {need:g} s)",
                    key="duration_vs_drain")]
