"""A pcap of what the simulator's hosts send, for Wireshark (``wireshark/rmp.lua``).

One record per datagram a core sends, at its send time, before any link: Ethernet, IPv4
and UDP headers built as the emulation would address the datagram (hosts at
``groups.host_ip``, groups at ``groups.group_ip``, the port ``core.host`` gives its
group or bytes). It shows what the protocol says, not what a link lost or delayed (the drop
log has that).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from rmptwin.core.groups import group_ip, host_ip
from rmptwin.core.host import port_for_datagram, port_for_group
from rmptwin.core.sansio import Dest, Group
from rmptwin.model import LoadedExperiment
from rmptwin.sim.simulate import Simulation

_PCAP_HEADER = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
LINKTYPE_ETHERNET = 1


@dataclass(frozen=True, slots=True)
class Datagram:
    t_ns: int
    src_ip: str
    dst_ip: str
    port: int
    data: bytes


def _mac(ip: str) -> bytes:
    b = socket.inet_aton(ip)
    if b[0] >= 224:   # IPv4 multicast -> 01:00:5e + low 23 bits
        return bytes([0x01, 0x00, 0x5E, b[1] & 0x7F, b[2], b[3]])
    return bytes([0x02, 0x00]) + b   # locally administered, one per host address


def _checksum(header: bytes) -> int:
    s: int = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(d: Datagram) -> bytes:
    """The Ethernet frame carrying ``d`` (UDP checksum 0: none, as IPv4 allows)."""
    udp = _UDP.pack(d.port, d.port, 8 + len(d.data), 0) + d.data
    src, dst = socket.inet_aton(d.src_ip), socket.inet_aton(d.dst_ip)
    ip = _IPV4.pack(0x45, 0, 20 + len(udp), 0, 0x4000, 32, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return _mac(d.dst_ip) + _mac(d.src_ip) + b"\x08\x00" + ip + udp


def write_pcap(path: str | Path, datagrams: list[Datagram]) -> Path:
    """A classic (libpcap, microsecond) capture file of ``datagrams``."""
    parts = [_PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)]
    for d in datagrams:
        raw = frame(d)
        parts.append(_RECORD.pack(d.t_ns // 1_000_000_000, (d.t_ns // 1000) % 1_000_000, len(raw), len(raw)))
        parts.append(raw)
    path = Path(path)
    path.write_bytes(b"".join(parts))
    return path


def simulated_datagrams(loaded: LoadedExperiment, seed: int | None = None) -> list[Datagram]:
    """Run ``loaded`` in the simulator and return every datagram its hosts sent, in order."""
    sim = Simulation(loaded, seed)
    net = sim.net
    ips = [host_ip(i) for i in range(len(net.host_names))]
    sent: list[Datagram] = []

    def record(t: int, sender: int, data: bytes, dest: Dest) -> None:
        if isinstance(dest, Group):
            sent.append(Datagram(t, ips[sender], group_ip(dest.name), port_for_group(dest.name), bytes(data)))
        else:
            dst = net.host_index.get(dest.node)
            if dst is not None:
                sent.append(Datagram(t, ips[sender], ips[dst], port_for_datagram(data), bytes(data)))

    net.tap = record
    sim.run()
    return sent
