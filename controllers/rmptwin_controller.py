"""os-ken app: the multicast-tree controller's OpenFlow 1.3 shim (Faucet style).

All decisions live in ``rmptwin.emulation.flows.Policy``; this module only translates
switch connections and IGMP packet-ins into policy calls, and the policy's desired state
into flow, group and meter messages. It writes the installed trees to
``$RMPTWIN_STATE_DIR/controller.json`` for `rmptwin net trees`. It is also the network's
IGMP querier (``flows.igmp_general_query``): it asks every host port of a switch when the
switch connects, and every host port of every switch when the runner asks by creating
``$RMPTWIN_STATE_DIR/igmp-query`` (joins still missing: a report was lost).

Environment: RMPTWIN_WIRING (wiring.json written by EmulatedNetwork), RMPTWIN_STATE_DIR.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from rmptwin.emulation.flows import QUERY_REQUEST, Diff, Policy, SwitchState, Wiring, diff, igmp_general_query

QUERY_POLL_S = 0.5               # how often the request file (EmulatedNetwork.request_igmp_query) is looked for


def apply_diff(dp, d: Diff, old: SwitchState) -> None:
    """Send ``d`` to datapath ``dp`` as OpenFlow 1.3 messages, dependencies first."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    for m in d.add_meters:
        cmd = ofp.OFPMC_MODIFY if m.meter_id in old.meters else ofp.OFPMC_ADD
        dp.send_msg(parser.OFPMeterMod(dp, command=cmd, flags=ofp.OFPMF_PKTPS | ofp.OFPMF_BURST,
                                       meter_id=m.meter_id,
                                       bands=[parser.OFPMeterBandDrop(rate=m.rate_pps, burst_size=m.burst)]))
    for g, cmd in [(g, ofp.OFPGC_ADD) for g in d.add_groups] + [(g, ofp.OFPGC_MODIFY) for g in d.modify_groups]:
        buckets = [parser.OFPBucket(actions=[parser.OFPActionOutput(p)]) for p in g.ports]
        dp.send_msg(parser.OFPGroupMod(dp, cmd, ofp.OFPGT_ALL, g.group_id, buckets))
    for f in d.delete_flows:
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE_STRICT, priority=f.priority,
                                      match=parser.OFPMatch(**dict(f.match)),
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
    for f in d.add_flows:
        actions = []
        for a in f.actions:
            if a[0] == "output":
                actions.append(parser.OFPActionOutput(a[1]))
            elif a[0] == "group":
                actions.append(parser.OFPActionGroup(a[1]))
            elif a[0] == "controller":
                actions.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
        inst = []
        if f.meter is not None:
            inst.append(parser.OFPInstructionMeter(f.meter, ofp.OFPIT_METER))
        if actions:
            inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_ADD, priority=f.priority,
                                      match=parser.OFPMatch(**dict(f.match)), instructions=inst))
    for gid in d.delete_groups:
        dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, gid, []))


def send_query(dp, ports: list[int]) -> None:
    """The general query out of each of ``ports`` (packet-outs from the controller)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    frame = igmp_general_query()
    for port in ports:
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(port)], data=frame))


def clear_switch(dp) -> None:
    """Start from nothing: a reconnecting switch may hold a previous run's entries."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                  out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))
    dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, ofp.OFPG_ALL, []))
    dp.send_msg(parser.OFPMeterMod(dp, command=ofp.OFPMC_DELETE, flags=0, meter_id=ofp.OFPM_ALL))


class RmptwinController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wiring = Wiring.load(os.environ["RMPTWIN_WIRING"])
        self.state_dir = Path(os.environ.get("RMPTWIN_STATE_DIR", "."))
        self.policy = Policy(self.wiring)
        self.switch_of = self.wiring.switch_of_dpid
        self.datapaths: dict[str, object] = {}
        self.installed: dict[str, SwitchState] = {}
        self.igmp_seen = 0
        self.queries = 0           # general queries sent, one per host port
        self.lock = threading.Lock()
        self.write_state()
        hub.spawn(self.query_requests)

    def query(self, switch: str) -> None:
        ports = self.wiring.host_ports(switch)
        send_query(self.datapaths[switch], ports)
        self.queries += len(ports)

    def query_requests(self) -> None:
        """Each time the runner creates the request file: a query on every connected switch."""
        request = self.state_dir / QUERY_REQUEST
        while True:
            hub.sleep(QUERY_POLL_S)
            if not request.exists():
                continue
            request.unlink(missing_ok=True)
            with self.lock:
                for switch in sorted(self.datapaths):
                    self.query(switch)
                self.write_state()

    def sync(self, switch: str) -> None:
        dp = self.datapaths[switch]
        old = self.installed.get(switch, SwitchState())
        new = self.policy.switch_state(switch)
        d = diff(old, new)
        if not d.empty():
            apply_diff(dp, d, old)
            dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
        self.installed[switch] = new

    def write_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "updated_ns": time.time_ns(),
            "switches": sorted(self.datapaths),
            "expected_switches": sorted(self.wiring.dpids),
            "igmp_seen": self.igmp_seen,
            "igmp_queries": self.queries,
            "groups": self.policy.trees(),
        }
        tmp = self.state_dir / "controller.json.tmp"
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_dir / "controller.json")

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dp = ev.msg.datapath
        switch = self.switch_of.get(dp.id)
        if switch is None:
            self.logger.warning("unknown datapath %s connected; ignored", dp.id)
            return
        with self.lock:
            clear_switch(dp)
            self.datapaths[switch] = dp
            self.installed[switch] = SwitchState()
            self.sync(switch)
            # After its flows (the barrier in sync orders them first): a switch that reconnects
            # may have missed reports while it was away.
            self.query(switch)
            self.write_state()

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        switch = self.switch_of.get(msg.datapath.id)
        if switch is None:
            return
        with self.lock:
            self.igmp_seen += 1
            changed = self.policy.igmp(switch, msg.match["in_port"], bytes(msg.data))
            if changed:
                for s in sorted(self.datapaths):
                    self.sync(s)
            self.write_state()
