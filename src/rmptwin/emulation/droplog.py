"""Ground truth from the user-space relays: dropped frames -> ``tables.DROP_SCHEMA`` rows,
per-direction totals -> ``tables.LINK_COUNT_SCHEMA`` rows.

A relay stores each dropped Ethernet frame's first bytes; naming happens here, after the
run, so the relay's hot loop never parses packets. The UDP payload is named with
``records.frame_names.describe`` (RMP, venue and MoldUDP64 frames), as the simulator names its
drops, so both backends label drops alike.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rmptwin.emulation.relay import DROP_RECORD, REASONS
from rmptwin.records.frame_names import describe
from rmptwin.records.tables import DROP_SCHEMA, LINK_COUNT_SCHEMA


@dataclass(frozen=True)
class DroppedFrame:
    t_ns: int
    link: str
    from_node: str
    to_node: str
    reason: str
    src_ip: str
    dst_ip: str
    dst_port: int
    payload: bytes   # UDP payload prefix, b"" when the frame is not IPv4/UDP
    copy: int = -1   # the link model's copy index (tables.DROP_SCHEMA), -1 when not counted


def parse_frame(frame: bytes) -> tuple[str, str, int, bytes]:
    """(src ip, dst ip, udp dst port, udp payload) of an Ethernet frame, or empties."""
    if len(frame) < 34:
        return "", "", -1, b""
    eth_type = struct.unpack_from("!H", frame, 12)[0]
    off = 14
    if eth_type == 0x8100 and len(frame) >= 38:
        eth_type = struct.unpack_from("!H", frame, 16)[0]
        off = 18
    if eth_type != 0x0800:
        return "", "", -1, b""
    ihl = (frame[off] & 0x0F) * 4
    proto = frame[off + 9]
    src = socket.inet_ntoa(frame[off + 12: off + 16])
    dst = socket.inet_ntoa(frame[off + 16: off + 20])
    if proto != 17 or len(frame) < off + ihl + 8:
        return src, dst, -1, b""
    dport = struct.unpack_from("!H", frame, off + ihl + 2)[0]
    return src, dst, dport, frame[off + ihl + 8:]


def read_drop_file(path: Path, link: str, a: str, b: str) -> list[DroppedFrame]:
    data = path.read_bytes() if path.exists() else b""
    out, pos = [], 0
    while pos + DROP_RECORD.size <= len(data):
        t_ns, d, reason, caplen, copy = DROP_RECORD.unpack_from(data, pos)
        pos += DROP_RECORD.size
        frame = data[pos: pos + caplen]
        pos += caplen
        src, dst, dport, payload = parse_frame(frame)
        frm, to = (a, b) if d == 0 else (b, a)
        out.append(DroppedFrame(t_ns, link, frm, to, REASONS[reason], src, dst, dport, payload, copy))
    return out


def drops_table(frames: list[DroppedFrame], ip_names: dict[str, str], group_names: dict[str, str]) -> pa.Table:
    cols: dict[str, list[Any]] = {f.name: [] for f in DROP_SCHEMA}
    for fr in sorted(frames, key=lambda f: (f.t_ns, f.link)):
        kind, src, src_seq, gseq = describe(fr.payload) if fr.payload else ("OTHER", "", -1, -1)
        cols["t_ns"].append(fr.t_ns)
        cols["link"].append(fr.link)
        cols["from_node"].append(fr.from_node)
        cols["to_node"].append(fr.to_node)
        cols["frame"].append(kind)
        cols["src"].append(src or ip_names.get(fr.src_ip, ""))
        cols["src_seq"].append(src_seq)
        cols["gseq"].append(gseq)
        cols["group"].append(group_names.get(fr.dst_ip, fr.dst_ip if fr.dst_ip.startswith("239.") else ""))
        cols["reason"].append(fr.reason)
        cols["copy"].append(fr.copy)
    return pa.Table.from_pydict(cols, schema=DROP_SCHEMA)


def counts_table(paths: list[Path], extra: Sequence[dict[str, Any]] = ()) -> pa.Table:
    """Link counts from the relays' ``counts.json`` files, plus ``extra`` records of that layout."""
    records = []
    for p in sorted(paths):
        try:
            records.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    cols: dict[str, list[Any]] = {f.name: [] for f in LINK_COUNT_SCHEMA}
    for c in [*records, *extra]:
        for d, (frm, to) in (("ab", (c["a"], c["b"])), ("ba", (c["b"], c["a"]))):
            s = c["directions"][d]
            cols["link"].append(c["link"])
            cols["from_node"].append(frm)
            cols["to_node"].append(to)
            cols["frame"].append("ALL")
            cols["packets"].append(int(s["packets"]))
            cols["dropped"].append(int(sum(s[r] for r in REASONS)))
    return pa.Table.from_pydict(cols, schema=LINK_COUNT_SCHEMA)


def read_access_reports(paths: list[Path], clock_shift_ns: int,
                        dilation: float = 1.0) -> tuple[list[DroppedFrame], list[dict[str, Any]]]:
    """The dropped frames and counts the nodes left for the access links they shaped
    (``node.hostlink``), times moved onto the relays' clock: from the nodes' virtual time
    (``dilation``: the run's time dilation factor) to wall ns, then by ``clock_shift_ns``."""
    frames: list[DroppedFrame] = []
    counts: list[dict[str, Any]] = []
    for p in paths:
        try:
            report = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        counts.append(report["counts"])
        frames.extend(DroppedFrame(round(d["t_ns"] * dilation) + clock_shift_ns, d["link"], d["from_node"], d["to_node"], d["reason"],
                                   d["src_ip"], d["dst_ip"], d["dst_port"], bytes.fromhex(d["payload"]),
                                   d.get("copy", -1))
                      for d in report["drops"])
    return frames, counts


def collect(state_dir: Path) -> tuple[pa.Table, pa.Table]:
    """(drops, counts) of a network from its state directory, also after it is down."""
    state_dir = Path(state_dir)
    wiring = json.loads((state_dir / "wiring.json").read_text())
    ip_names = {v[2]: name for name, v in wiring["hosts"].items()}
    frames: list[DroppedFrame] = []
    for cfg_path in sorted((state_dir / "links").glob("*.json")):
        if cfg_path.name.endswith(".counts.json"):
            continue
        cfg = json.loads(cfg_path.read_text())
        frames.extend(read_drop_file(Path(cfg["droplog"]), cfg["link"], cfg["a_node"], cfg["b_node"]))
    counts = counts_table(list((state_dir / "links").glob("*.counts.json")))
    return drops_table(frames, ip_names, wiring.get("group_names", {})), counts


def rebased(drops: pa.Table, clock_t0_ns: int, run_t0_ns: int, dilation: float = 1.0) -> pa.Table:
    """``drops`` with times counted from the run's t0 (the events' origin) instead of
    ``clock_t0_ns``, the origin the relays were given (the network's start, seconds earlier:
    without this, every drop looks tens of seconds later than its packet's send), and in the
    run's virtual time (wall ns divided by ``dilation``, the time dilation factor)."""
    if (clock_t0_ns == run_t0_ns and dilation == 1.0) or drops.num_rows == 0:
        return drops
    i = drops.schema.get_field_index("t_ns")
    shifted = pc.add(drops.column(i), pa.scalar(clock_t0_ns - run_t0_ns, pa.int64()))
    if dilation != 1.0:
        shifted = pc.cast(pc.floor(pc.divide(pc.cast(shifted, pa.float64()), dilation)), pa.int64())
    return drops.set_column(i, drops.schema.field(i), shifted)
