"""Packet captures of a simulated run, laid out as the emulated run's tcpdump captures.

An emulated run (`rmptwin run --capture all`) leaves ``pcaps/<host>.pcap``: tcpdump on the
host's one interface, so what that host sent and what the network delivered to it, as
Ethernet frames in a classic (microsecond) pcap. ``HostCaptures`` writes the same for a
simulated run (`rmptwin sim --pcap`): one capture per host; a datagram the host sends at its
send time, one it receives at its arrival after the access link; hosts at
``groups.host_ip`` with the MAC the emulation gives them (``groups.host_mac``),
groups at ``groups.group_ip``, the port ``core.host`` gives the group or the bytes (the
nodes send from the socket bound to it, so source and destination ports are equal), TTL as
the nodes' sockets set it. So ``tshark -X lua_script:wireshark/rmp.lua`` and the customers'
wire check (``checkers.customers``) read both alike. What a link lost is missing from its
receivers' captures, as on the wire; the drop log says where it went.

``simulated_datagrams`` and ``write_pcap`` are the older, single-file form: every datagram
sent, in one capture (the dissector's tests write theirs with it).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rmptwin.core.groups import group_ip, host_ip, host_mac
from rmptwin.core.host import port_for_datagram, port_for_group
from rmptwin.core.sansio import Dest, Group
from rmptwin.model import LoadedExperiment
from rmptwin.sim.network import SimNetwork
from rmptwin.sim.simulate import SimResult, Simulation

_PCAP_HEADER = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
LINKTYPE_ETHERNET = 1
SNAPLEN = 262144        # tcpdump's default: the emulated captures' header says the same
MULTICAST_TTL = 32      # node.driver's IP_MULTICAST_TTL
UNICAST_TTL = 64        # Linux's default (net.ipv4.ip_default_ttl), which the nodes keep
# Records held before they are appended to their files, over all hosts: a long run's
# captures need not fit in memory, and a host's file is opened once per flush, never kept
# open (a topology of thousands of hosts would run out of file descriptors).
BUFFER_BYTES = 8 << 20

AppendFn = Callable[[str, bytes], None]   # (host name, bytes to append to its capture)


@dataclass(frozen=True, slots=True)
class Datagram:
    t_ns: int
    src_ip: str
    dst_ip: str
    port: int
    data: bytes


class _Addr:
    """An address as the frame builder wants it: IPv4 bytes, MAC, and the sum of its two
    16-bit words (the IPv4 header checksum adds them)."""

    __slots__ = ("ip", "mac", "words")

    def __init__(self, ip: str) -> None:
        self.ip = socket.inet_aton(ip)
        self.mac = _mac(self.ip)
        self.words = (self.ip[0] << 8 | self.ip[1]) + (self.ip[2] << 8 | self.ip[3])


def _mac(ip: bytes) -> bytes:
    if ip[0] >= 224:   # IPv4 multicast -> 01:00:5e + low 23 bits, as the kernel maps it
        return bytes([0x01, 0x00, 0x5E, ip[1] & 0x7F, ip[2], ip[3]])
    # a host: host_ip's low 3 bytes are its number, the one host_mac gives its MAC from
    return bytes.fromhex(host_mac(int.from_bytes(ip[1:], "big") - 1).replace(":", ""))


def _frame(src: _Addr, dst: _Addr, port: int, ttl: int, data: bytes) -> bytes:
    """The Ethernet frame of one UDP datagram (DF set and IP id 0, as Linux sends UDP with
    path MTU discovery; UDP checksum 0: none, as IPv4 allows)."""
    udp_len = 8 + len(data)
    total = 20 + udp_len
    s = 0x4500 + total + 0x4000 + (ttl << 8 | 17) + src.words + dst.words
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    ip = _IPV4.pack(0x45, 0, total, 0, 0x4000, ttl, 17, ~s & 0xFFFF, src.ip, dst.ip)
    return dst.mac + src.mac + b"\x08\x00" + ip + _UDP.pack(port, port, udp_len, 0) + data


def frame(d: Datagram) -> bytes:
    """The Ethernet frame carrying ``d``."""
    dst = _Addr(d.dst_ip)
    return _frame(_Addr(d.src_ip), dst, d.port, MULTICAST_TTL if dst.ip[0] >= 224 else UNICAST_TTL, d.data)


def pcap_header() -> bytes:
    """A classic pcap file's header: microsecond timestamps, Ethernet, as tcpdump -w writes."""
    return _PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET)


def _record(t_ns: int, raw: bytes) -> bytes:
    return _RECORD.pack(t_ns // 1_000_000_000, (t_ns // 1000) % 1_000_000, len(raw), len(raw)) + raw


def write_pcap(path: str | Path, datagrams: list[Datagram]) -> Path:
    """A classic (libpcap, microsecond) capture file of ``datagrams``."""
    parts = [pcap_header()]
    parts += [_record(d.t_ns, frame(d)) for d in datagrams]
    path = Path(path)
    path.write_bytes(b"".join(parts))
    return path


class HostCaptures:
    """Every host's capture of a simulated run, appended through ``append(host, bytes)`` as
    the run goes on (``close`` writes the rest). Timestamps are true run time: the epoch is
    the run's start, so a frame's ``frame.time_epoch`` is the ``t_ns`` of the events table
    (an emulated capture's clock is the wall clock, t0 in its manifest)."""

    def __init__(self, net: SimNetwork, append: AppendFn, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.names = list(net.host_names)
        self._index = net.host_index
        self._append = append
        self._limit = buffer_bytes
        self._hosts = [_Addr(host_ip(i)) for i in range(len(self.names))]
        self._groups: dict[str, tuple[_Addr, int]] = {}
        self._buf: list[list[bytes]] = [[] for _ in self.names]
        self._held = 0
        header = pcap_header()
        for name in self.names:   # an idle host still has its (empty) capture, as tcpdump leaves one
            append(name, header)
        net.tap = self._sent
        net.arrival_tap = self._arrived

    def _group(self, name: str) -> tuple[_Addr, int]:
        g = self._groups.get(name)
        if g is None:
            g = self._groups[name] = (_Addr(group_ip(name)), port_for_group(name))
        return g

    def _add(self, host: int, t: int, raw: bytes) -> None:
        rec = _record(t, raw)
        self._buf[host].append(rec)
        self._held += len(rec)
        if self._held >= self._limit:
            self.flush()

    def _sent(self, t: int, sender: int, data: bytes, dest: Dest) -> None:
        if isinstance(dest, Group):
            addr, port = self._group(dest.name)
            self._add(sender, t, _frame(self._hosts[sender], addr, port, MULTICAST_TTL, data))
            return
        dst = self._index.get(dest.node)
        # An unknown host: the node's send fails, nothing leaves. Itself: the loopback
        # interface carries it, not the one tcpdump captures.
        if dst is None or dst == sender:
            return
        self._add(sender, t, _frame(self._hosts[sender], self._hosts[dst], port_for_datagram(data), UNICAST_TTL, data))

    def _arrived(self, t: int, sender: int, data: bytes, group: str, hosts: list[int]) -> None:
        src = self._hosts[sender]
        if group:
            addr, port = self._group(group)
            raw = _frame(src, addr, port, MULTICAST_TTL, data)   # one frame for every member reached now
            for h in hosts:
                self._add(h, t, raw)
            return
        for h in hosts:
            if h != sender:   # a datagram to itself went over loopback (see _sent)
                self._add(h, t, _frame(src, self._hosts[h], port_for_datagram(data), UNICAST_TTL, data))

    def flush(self) -> None:
        for i, buf in enumerate(self._buf):
            if buf:
                self._append(self.names[i], b"".join(buf))
                buf.clear()
        self._held = 0

    def close(self) -> None:
        self.flush()


def simulate_with_pcaps(loaded: LoadedExperiment, seed: int | None, append: AppendFn,
                        progress: Callable[[int], None] | None = None) -> SimResult:
    """``sim.simulate.simulate``, with every host's capture written through ``append``.
    The run itself is unchanged: the captures only watch the network."""
    sim = Simulation(loaded, seed)
    captures = HostCaptures(sim.net, append)
    result = sim.run(progress)
    captures.close()
    return result


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
