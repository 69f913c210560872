"""wireshark/rmp.lua decodes what the project sends exactly as the project's own decoders do.

A pcap is written (rmptwin.sim.pcap) from every RMP and venue frame kind made by the
project's encoders (with and without the control MAC) and from the datagrams of short
simulated runs (a token-site crash with reformation; a venue failover); tshark decodes it
with the dissector, and every frame must be decoded, none malformed, and every field
equal to what rmp.wire.decode / venue.wire.decode read from the same bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, RMP_PORT, group_ip, host_ip, rmp_group
from rmptwin.model.loading import load_experiment
from rmptwin.model.overrides import make_point
from rmptwin.rmp import wire
from rmptwin.rmp.seal import MAC_BYTES, KeySet, Sealer
from rmptwin.sim.pcap import Datagram, simulated_datagrams, write_pcap
from rmptwin.venue import wire as vw

REPO = Path(__file__).resolve().parents[2]
DISSECTOR = REPO / "wireshark" / "rmp.lua"
TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")

CODES = {name: code for code, name in wire.TYPE_NAMES.items()}


# ----------------------------------------------------------------------------- frames


def rmp_frames() -> list:
    """One frame of every kind, with values as a ring sends them."""
    data = wire.Data(1, "src1", 4711, 4700, bytes(range(64)))
    ack = wire.Ack(1, 3, 812, 90_001, 40_600_000_000, "rp2", "rp3",
                   (("src1", 4698), ("src2", 77), ("src1", 4699)), 809)
    null = wire.Ack(0, 3, 813, 90_004, 40_650_000_000, "rp3", "rp1", (), 810)
    return [
        data, ack, null,
        wire.Nack(1, 3, "rs-eu-2", wire.WANT_MSGS, 4690, 4699, "src1"),
        wire.Nack(1, 3, "rp1", wire.WANT_ACKS, 800, 811, ""),
        wire.Nack(0, 3, "rs-asia-1", wire.WANT_ACK_OF, 12, 12, "src2"),
        wire.Retx(1, data), wire.Retx(1, ack), wire.Retx(0, null),
        wire.Report(1, 3, "src1", "rp2", wire.REASON_NO_ACK, 812, ""),
        wire.Report(0, 2, "rs-eu-1", "rs-eu-2", wire.REASON_SECONDARY, 700, "eu"),
        wire.ReportAck(1, 3, "src1"),
        wire.Invite(1, 4, "xr1"),
        wire.Join(1, 4, "rp1", 811, 90_004, False, 3),
        wire.Join(1, 4, "rp2", 650, 80_000, True, 2),
        wire.JoinAck(1, 4, "rp2"),
        wire.NewRing(1, 4, 812, 811, 90_004, 41_000_000_000, "rp3", "rp1", ("rp1", "rp3", "rp4"),
                     ((2, 1), (3, 600), (4, 812))),
        wire.SecToken(1, 3, "eu", 812, "rs-eu-1", "rs-eu-2", 17),
    ]


def venue_frames() -> list[bytes]:
    order = vw.Order(vw.NEW, 0, 1, "IBM", (3 << 40) | 12, 100, 1_234_500)
    req = vw.Request(2, 41, 1_500_000_000, order)
    req2 = vw.Request(1, 7, 1_500_100_000, vw.Order(vw.CANCEL, 0, 0, "MSFT", (1 << 40) | 5, 0, 0))
    return [
        vw.order_frame(12, 1_499_000_000, order),
        vw.order_ack_frame(12, vw.ACCEPTED, 41),
        vw.order_ack_frame(13, vw.REJECTED, 0, "unknown symbol"),
        vw.request_frame(req),
        vw.propose_frame(1, 900, [(2, 41), (1, 7)]),
        vw.decide_frame(vw.WON, 900, 902, [(2, 41), (1, 7)]),
        vw.store_frame(1, [(900, req, [(1 << 40, 2 << 40, 1_234_500, 50, 0)]), (901, req2, [])]),
        vw.hardened_frame(901, [(900, req), (901, req2)]),
        vw.complete_frame(vw.T_COMPLETE, 41, 900, 1),
        vw.complete_frame(vw.T_DONE, 12, 900, 1),
        *vw.ckpt_frames(vw.T_CKPT_STORE, 1024, bytes(range(256)) * 6),
        vw.ckpt_req_frame(1),
        *vw.ckpt_frames(vw.T_CKPT_PART, 1024, b"book"),
        vw.range_frame(vw.T_HARDENED_REQ, 880, 901),
        vw.range_frame(vw.T_RESEND_REQ, 30, 41),
    ]


def encoder_datagrams() -> list[Datagram]:
    sealer = Sealer(KeySet(control=bytes(range(32))))
    out = []
    for i, f in enumerate(rmp_frames()):
        data = wire.encode(f)
        dst = group_ip(rmp_group(f.stripe))
        out.append(Datagram(i * 1_000_000, host_ip(i % 5), dst, RMP_PORT, data))
        if not isinstance(f, wire.Data):   # security on: every control frame carries a MAC
            out.append(Datagram(i * 1_000_000 + 1000, host_ip(i % 5), dst, RMP_PORT, sealer.mac_control(data)))
    for i, data in enumerate(venue_frames()):
        out.append(Datagram(10**9 + i * 1_000_000, host_ip(10), host_ip(11), RMP_PORT, data))
    return out


def sim_datagrams() -> list[Datagram]:
    """Short simulated runs: a token-site crash and rejoin; a venue failover (lower rate)."""
    ring = simulated_datagrams(load_experiment(REPO / "experiments" / "line3-crash.yaml"))
    base = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    venue = simulated_datagrams(make_point(base, {"venue.rate": 100, "duration_s": 4.5,
                                                  "venue.duration_s": 3.5}).loaded)
    # every RMP and MoldUDP64 datagram of the ring; of the venue's, the first 20 of each type
    per_type: dict[int, int] = defaultdict(int)
    kept = []
    for d in venue:
        per_type[d.data[1]] += 1
        if per_type[d.data[1]] <= 20:
            kept.append(d)
    return ring + kept


# ----------------------------------------------------------------------------- expected fields


def _hex(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def _rmp_frame_fields(f, body: bytes, out: list) -> None:
    code = CODES[wire.type_name(f)]
    out += [("magic", wire.MAGIC), ("version", wire.VERSION), ("type", code), ("length", len(body) - 5)]
    if isinstance(f, wire.Data):
        out += [("stripe", f.stripe), ("src", f.src), ("src_seq", f.src_seq), ("acked_below", f.acked_below)]
        if f.payload:
            out.append(("payload", _hex(f.payload)))
    elif isinstance(f, wire.Ack):
        out += [("stripe", f.stripe), ("epoch", f.epoch), ("token", f.token), ("first_gseq", f.first_gseq),
                ("ts_ns", f.ts_ns), ("stable", f.stable), ("token_site", f.token_site),
                ("next_site", f.next_site), ("msg_count", len(f.msgs)), ("last_gseq", f.last_gseq)]
        for i, (src, seq) in enumerate(f.msgs):
            out += [("msg.src", src), ("msg.src_seq", seq), ("msg.gseq", f.first_gseq + i)]
    elif isinstance(f, wire.Retx):
        out.append(("stripe", f.stripe))
        _rmp_frame_fields(f.original, wire.encode(f.original), out)
    elif isinstance(f, wire.NewRing):
        out += [(k, getattr(f, k)) for k in ("stripe", "epoch", "start_t", "last_t", "next_gseq", "ts_ns",
                                             "token_site", "recovery_site")]
        out += [("member_count", len(f.members))] + [("members", m) for m in f.members]
        out.append(("lineage_count", len(f.lineage)))
        for epoch, first in f.lineage:
            out += [("lineage.epoch", epoch), ("lineage.first_token", first)]
    else:
        names = {wire.Nack: ("stripe", "epoch", "requester", "want", "lo", "hi", "src"),
                 wire.Report: ("stripe", "epoch", "reporter", "suspect", "reason", "token", "ring"),
                 wire.ReportAck: ("stripe", "epoch", "reporter"),
                 wire.Invite: ("stripe", "epoch", "reformer"),
                 wire.Join: ("stripe", "epoch", "member", "have", "next_gseq", "recovering", "have_epoch"),
                 wire.JoinAck: ("stripe", "epoch", "member"),
                 wire.SecToken: ("stripe", "epoch", "ring", "token", "holder", "next_holder", "round")}[type(f)]
        out += [(k, int(getattr(f, k)) if isinstance(getattr(f, k), bool) else getattr(f, k)) for k in names]


def rmp_fields(data: bytes) -> list[tuple[str, object]]:
    """What the project's decoder reads from an RMP datagram, as (field, value) pairs."""
    mac = data[2] != wire.DATA and len(data) == wire.HEADER_SIZE + int.from_bytes(data[3:5], "big") + MAC_BYTES
    body = data[:-MAC_BYTES] if mac else data
    out: list = []
    _rmp_frame_fields(wire.decode(body), body, out)
    out.append(("mac_present", int(mac)))
    if mac:
        out.append(("mac", _hex(data[-MAC_BYTES:])))
    return [(f"rmptwin.{k}", v) for k, v in out]


def _order(o: vw.Order) -> list:
    return [("order.action", o.action), ("order.kind", o.kind), ("order.side", o.side), ("order.symbol", o.symbol),
            ("order.oid", o.oid), ("order.qty", o.qty), ("order.price", o.price), ("order.spare", o.spare)]


def _request(r: vw.Request) -> list:
    return [("gw", r.gw), ("gw_seq", r.gw_seq), ("t_ns", r.t_ns)] + _order(r.order)


def _keys(keys) -> list:
    return [("count", len(keys))] + [x for gw, seq in keys for x in (("gw", gw), ("gw_seq", seq))]


def venue_fields(data: bytes) -> list[tuple[str, object]]:
    """What the project's venue decoder reads from a venue datagram."""
    ftype, v = vw.decode(data)
    out = [("version", vw.VERSION), ("type", ftype), ("length", len(data) - 6)]
    if ftype == vw.T_ORDER:
        out += [("client_seq", v[0]), ("t_ns", v[1])] + _order(v[2])
    elif ftype == vw.T_ORDER_ACK:
        out += [("client_seq", v[0]), ("status", v[1]), ("gw_seq", v[2]), ("reason", v[3])]
    elif ftype == vw.T_REQUEST:
        out += _request(v)
    elif ftype == vw.T_PROPOSE:
        out += [("ev", v[0]), ("n", v[1])] + _keys(v[2])
    elif ftype == vw.T_DECIDE:
        out += [("status", v[0]), ("n", v[1]), ("next", v[2])] + _keys(v[3])
    elif ftype == vw.T_STORE:
        out += [("ev", v[0]), ("count", len(v[1]))]
        for n, req, trades in v[1]:
            out += [("n", n), ("trade_count", len(trades))] + _request(req)
            for t in trades:
                out += list(zip(("trade.taker", "trade.maker", "trade.price", "trade.qty", "trade.taker_side"), t))
    elif ftype == vw.T_HARDENED:
        out += [("upto", v[0]), ("count", len(v[1]))]
        for n, req in v[1]:
            out += [("n", n)] + _request(req)
    elif ftype in (vw.T_COMPLETE, vw.T_DONE):
        out += list(zip(("seq", "n", "trades"), v))
    elif ftype in (vw.T_CKPT_STORE, vw.T_CKPT_PART):
        out += list(zip(("n", "part", "parts"), v[:3])) + ([("data", _hex(v[3]))] if v[3] else [])
    elif ftype == vw.T_CKPT_REQ:
        out.append(("ev", v))
    else:
        out += list(zip(("first", "last"), v))
    return [(f"rmptwin_venue.{k}", val) for k, val in out]


# ----------------------------------------------------------------------------- tshark


def tshark_packets(pcap: Path) -> list[list[tuple[str, object]]]:
    """Every packet's tshark JSON layers as (key, value) pairs in order (duplicate keys kept)."""
    proc = subprocess.run(
        [TSHARK, "-n", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}", "-T", "json",
         "-d", f"udp.port=={REGION_PORT},moldudp64", "-d", f"udp.port=={REREQUEST_PORT},moldudp64"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Lua" not in proc.stderr, proc.stderr   # the script loaded without error
    return [dict(p)["_source"] for p in json.loads(proc.stdout, object_pairs_hook=list)]


def _flatten(pairs, out: list) -> list:
    for k, v in pairs:
        if isinstance(v, list) and v and isinstance(v[0], tuple):
            out.append((k, None))
            _flatten(v, out)
        elif isinstance(v, list):   # a list of subtrees under one key
            for item in v:
                _flatten(item, out) if isinstance(item, list) else out.append((k, item))
        else:
            out.append((k, v))
    return out


def decoded_fields(source) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(protocols, field -> values in order, problems) of one packet's tshark layers."""
    layers = dict(source)["layers"]
    flat = _flatten(layers, [])
    fields = defaultdict(list)
    for k, v in flat:
        if k.startswith(("rmptwin.", "rmptwin_venue.")) and v is not None:
            fields[k].append(v)
    protos = dict(flat).get("frame.protocols", "").split(":")
    problems = [f"{k}={v}" for k, v in flat if k.startswith(("_ws.expert", "_ws.malformed", "_ws.lua.error"))]
    return protos, fields, problems


def _expected(data: bytes) -> dict[str, list[str]]:
    pairs = rmp_fields(data) if data[0] == wire.MAGIC else venue_fields(data)
    out = defaultdict(list)
    for k, v in pairs:
        out[k].append(v)
    return out


def _normal(key: str, values: list) -> list:
    return [int(str(v), 0) if key == "rmptwin.magic" else str(v) for v in values]


def check_decoded(datagrams: list[Datagram], tmp_path: Path, name: str) -> dict[str, int]:
    pcap = write_pcap(tmp_path / f"{name}.pcap", datagrams)
    packets = tshark_packets(pcap)
    assert len(packets) == len(datagrams)
    kinds: dict[str, int] = defaultdict(int)
    for i, (d, source) in enumerate(zip(datagrams, packets), 1):
        protos, got, problems = decoded_fields(source)
        assert not problems, f"packet {i}: {problems}"
        if d.port != RMP_PORT:
            assert "moldudp64" in protos, f"packet {i}: {protos}"
            kinds["MOLD"] += 1
            continue
        want = _expected(d.data)
        proto = "rmptwin" if d.data[0] == wire.MAGIC else "rmptwin_venue"
        assert proto in protos, f"packet {i} not decoded as {proto}: {protos}"
        assert {k: _normal(k, v) for k, v in got.items()} == {k: _normal(k, v) for k, v in want.items()}, \
            f"packet {i}"
        kinds[(wire.TYPE_NAMES[d.data[2]] if proto == "rmptwin" else vw.TYPE_NAMES[d.data[1]])] += 1
    return kinds


def test_every_frame_kind_decodes_as_the_project_decodes_it(tmp_path):
    kinds = check_decoded(encoder_datagrams(), tmp_path, "encoded")
    assert set(kinds) == set(wire.TYPE_NAMES.values()) | set(vw.TYPE_NAMES.values())


def test_simulated_runs_decode_frame_by_frame(tmp_path):
    kinds = check_decoded(sim_datagrams(), tmp_path, "simulated")
    # the crash run shows the ring's whole life: tokens, repairs, a failure report, reformation
    for k in ("DATA", "ACK", "NULL_TOKEN", "NACK", "RETX", "REPORT", "INVITE", "JOIN", "NEW_RING", "MOLD",
              "REQUEST", "PROPOSE", "DECIDE", "HARDENED", "DONE"):
        assert kinds.get(k), f"no {k} in the simulated runs: {dict(kinds)}"


def test_malformed_frames_are_flagged(tmp_path):
    """The check above can fail: frames the project's decoder rejects get an expert error."""
    ack = wire.encode(rmp_frames()[1])
    bad = [ack[:-3],                                     # truncated inside a message entry
           ack[:2] + bytes([3]) + ack[3:],               # NULL_TOKEN carrying messages
           wire.encode(wire.Nack(0, 1, "rp1", 9, 5, 6, "")),   # unknown NACK kind
           ack + b"\0\0",                                # stray bytes
           vw.range_frame(vw.T_RESEND_REQ, 1, 2)[:-1] + b""]
    bad[-1] = bad[-1][:2] + (len(bad[-1]) - 6).to_bytes(4, "big") + bad[-1][6:]   # venue range one byte short
    for b in bad[:-1]:
        with pytest.raises(wire.WireError):
            wire.decode(b)
    with pytest.raises(vw.VenueWireError):
        vw.decode(bad[-1])
    pcap = write_pcap(tmp_path / "bad.pcap", [Datagram(i, host_ip(0), host_ip(1), RMP_PORT, b)
                                              for i, b in enumerate(bad)])
    for i, source in enumerate(tshark_packets(pcap)):
        _, _, problems = decoded_fields(source)
        assert any("_ws.expert" in p for p in problems), f"bad frame {i} not flagged"


def test_heuristic_finds_frames_on_other_ports(tmp_path):
    frames = [wire.encode(f) for f in rmp_frames()] + venue_frames()
    pcap = write_pcap(tmp_path / "other-port.pcap",
                      [Datagram(i, host_ip(0), host_ip(1), 40_000, d) for i, d in enumerate(frames)])
    for i, (d, source) in enumerate(zip(frames, tshark_packets(pcap))):
        _, got, problems = decoded_fields(source)
        assert not problems
        assert {k: _normal(k, v) for k, v in got.items()} == {k: _normal(k, v) for k, v in _expected(d).items()}, i
