"""The os-ken shim turns policy diffs into well-formed OpenFlow 1.3 messages.

A recording datapath with os-ken's real OpenFlow 1.3 parser serialises every message,
so a match or instruction os-ken cannot encode fails here rather than on a switch.
"""

from __future__ import annotations

import sys

from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser
from test_flows import make_wiring  # tests/controllers is on sys.path (rootdir conftest)

from rmptwin.core.groups import group_ip, rmp_group
from rmptwin.emulation.flows import Policy, SwitchState, diff

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "controllers"))
from rmptwin_controller import apply_diff, clear_switch


class RecordingDatapath:
    def __init__(self) -> None:
        self.id = 1
        self.ofproto = ofproto_v1_3
        self.ofproto_parser = ofproto_v1_3_parser
        self.xid = 0
        self.sent = []

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)
        return self.xid

    def send_msg(self, msg):
        msg.datapath = self
        msg.serialize()
        self.sent.append(msg)


def _kinds(msgs):
    out = []
    for m in msgs:
        name = type(m).__name__
        cmd = getattr(m, "command", None)
        out.append((name, cmd))
    return out


def test_join_then_leave_messages_are_valid_and_ordered():
    w = make_wiring()
    pol = Policy(w)
    dp = RecordingDatapath()
    clear_switch(dp)
    base = pol.switch_state("s1")
    apply_diff(dp, diff(SwitchState(), base), SwitchState())
    n_base = len(dp.sent)
    kinds = _kinds(dp.sent)
    # Meters and groups go before any flow that refers to them.
    first_flow = next(i for i, k in enumerate(kinds) if k[0] == "OFPFlowMod" and i >= 3)
    assert all(k[0] in ("OFPMeterMod", "OFPGroupMod") for k in kinds[3:first_flow])
    ip = group_ip(rmp_group(0))
    pol.set_member(ip, "h4", True)
    joined = pol.switch_state("s1")
    apply_diff(dp, diff(base, joined), base)
    added = _kinds(dp.sent[n_base:])
    # Trees through s1 towards h4's s4: h1's own (rooted here) and h2's (s2-s1-s5-s4, 7 ms).
    k = 2
    assert added == [("OFPGroupMod", ofproto_v1_3.OFPGC_ADD)] * k + [("OFPFlowMod", ofproto_v1_3.OFPFC_ADD)] * k
    by_src = {m.match["ipv4_src"]: m for m in dp.sent[n_base + k:]}
    own = by_src[w.hosts["h1"].ip]
    assert own.match["ipv4_dst"] == ip and own.match["in_port"] == w.hosts["h1"].port
    assert isinstance(own.instructions[0], ofproto_v1_3_parser.OFPInstructionMeter)
    transit = by_src[w.hosts["h2"].ip]
    assert transit.match["in_port"] == w.links["s1"]["s2"]
    assert not any(isinstance(i, ofproto_v1_3_parser.OFPInstructionMeter) for i in transit.instructions)
    n = len(dp.sent)
    pol.set_member(ip, "h4", False)
    apply_diff(dp, diff(joined, pol.switch_state("s1")), joined)
    assert _kinds(dp.sent[n:]) == [("OFPFlowMod", ofproto_v1_3.OFPFC_DELETE_STRICT)] * k + \
        [("OFPGroupMod", ofproto_v1_3.OFPGC_DELETE)] * k
