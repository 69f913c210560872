"""Virtual time for an emulated run: what the network and the captures need at a time dilation
factor N (``core.host.TimeDilation``; the nodes dilate their own clocks and timers).

The emulated network runs on the wall clock, so what it is given is dilated: every delay,
jitter and reordering hold N times longer, every bandwidth N times smaller (a frame's
serialization then lasts N times longer; the queue's bandwidth-delay product, and so its
limit, is unchanged), a loss trace in time N times slower. Loss chances per frame, and a
Gilbert-Elliott chain (per frame), are not time: they stay. Seen from virtual time, each link
is the configured one. The node's own access link (``node.hostlink``) runs in the node's
virtual time and takes the configured parameters.

A capture is stamped by the kernel on the wall clock; ``rewrite_pcap_times`` puts it in virtual
time after the run (t0 + (t - t0) / N), so that Wireshark shows the run's own times. A link
measured on the wall clock (``rmptwin net selftest --tdf N``) is put in virtual time by
``virtual_figures``, the inverse of ``dilated_link``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from rmptwin.model import LinkParams, Topology, Trace

_MAGIC_US, _MAGIC_NS = 0xA1B2C3D4, 0xA1B23C4D
_RECORD = struct.Struct("<IIII")   # ts_sec, ts_frac, incl_len, orig_len


def dilated_link(params: LinkParams, factor: float) -> LinkParams:
    """``params`` as the wall clock must run them for virtual time at ``factor``."""
    if factor == 1.0:
        return params
    loss = params.loss
    if isinstance(loss, Trace) and loss.intervals_ms:
        loss = loss.model_copy(update={"intervals_ms": [(a * factor, b * factor) for a, b in loss.intervals_ms]})
    queue = params.queue_packets if params.queue_packets is not None else params.queue_limit()
    return params.model_copy(update={
        "delay_ms": params.delay_ms * factor, "jitter_ms": params.jitter_ms * factor, "loss": loss,
        "bandwidth_mbps": None if params.bandwidth_mbps is None else params.bandwidth_mbps / factor,
        "queue_packets": queue})


def dilated_topology(topo: Topology, factor: float) -> Topology:
    """Every switch link and access link of ``topo`` dilated (``dilated_link``)."""
    if factor == 1.0:
        return topo
    fields = list(LinkParams.model_fields)
    links = [lk.model_copy(update={f: getattr(d, f) for f in fields})
             for lk in topo.links for d in (dilated_link(lk, factor),)]
    hosts = [h.model_copy(update={"link": dilated_link(h.link, factor)}) for h in topo.hosts]
    return topo.model_copy(update={"links": links, "hosts": hosts})


@dataclass(frozen=True)
class LinkFigures:
    """What a probe measured of a link: loss fraction, delay and jitter in ms, rate in Mbit/s
    (None: not measured, e.g. the rate of a link without a bandwidth)."""

    loss: float
    delay_ms: float
    jitter_ms: float | None = None
    rate_mbps: float | None = None


def virtual_figures(wall: LinkFigures, factor: float) -> LinkFigures:
    """``wall``, measured on the wall clock of a network dilated at ``factor``, in virtual
    time: times divided by the factor, rates multiplied by it, the loss fraction (a chance per
    frame, not time) as it is. A link that ``dilated_link`` dilated then reads as configured."""
    if factor < 1.0:
        raise ValueError(f"time dilation factor {factor}: must be at least 1")
    return LinkFigures(loss=wall.loss, delay_ms=wall.delay_ms / factor,
                       jitter_ms=None if wall.jitter_ms is None else wall.jitter_ms / factor,
                       rate_mbps=None if wall.rate_mbps is None else wall.rate_mbps * factor)


def rewrite_pcap_times(path: Path, t0_unix_ns: int, factor: float) -> int:
    """Rewrite the timestamps of the classic pcap ``path`` in place into virtual time:
    t0 + (t - t0) / factor. Returns the number of records; a file that is not a classic
    little-endian pcap is left alone (0)."""
    if factor == 1.0:
        return 0
    data = bytearray(path.read_bytes())
    if len(data) < 24:
        return 0
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (_MAGIC_US, _MAGIC_NS):
        return 0
    unit = 1_000 if magic == _MAGIC_US else 1
    off, n = 24, 0
    while off + _RECORD.size <= len(data):
        sec, frac, incl, orig = _RECORD.unpack_from(data, off)
        t = sec * 1_000_000_000 + frac * unit
        v = t0_unix_ns + int((t - t0_unix_ns) / factor)
        _RECORD.pack_into(data, off, v // 1_000_000_000, (v % 1_000_000_000) // unit, incl, orig)
        off += _RECORD.size + incl
        n += 1
    path.write_bytes(bytes(data))
    return n
