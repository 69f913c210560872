"""`rmptwin sim --pcap` (and ``api.simulate(pcap=True)``) writes one capture per host under
pcaps/, laid out as an emulated run's tcpdump captures, and its packets are the run's own:

- one classic pcap per topology host (tcpdump's header: microsecond, Ethernet), listed in the
  manifest, frames in time order, IPv4 and UDP headers well formed, addressed as the emulated
  hosts are (host_ip, host_mac, group_ip, the port rules);
- what a source's capture says it sent equals its send and src_retx events (DATA frames);
- per host and frame type, what it sent equals what its access link was offered and what it
  received what its access link carried to it (links/counts.parquet);
- the customers checker's wire check reads the captures and agrees;
- tshark with wireshark/rmp.lua (the command docs/wireshark.md gives) decodes the frames;
- the command line writes them with --pcap, and without it the run's other files are
  byte-identical and there is no pcaps/;
- a rerun writes the same captures, byte for byte; a failed run leaves none.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from rmptwin import api
from rmptwin.checkers.suite import check_run
from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, RMP_PORT, group_ip, host_ip, region_group, rmp_group
from rmptwin.records.frame_names import describe
from rmptwin.rundir.run import RunDir
from rmptwin.runner import pipeline

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "experiments" / "quickstart.yaml"
RMPTWIN = REPO / ".venv" / "bin" / "rmptwin"
DISSECTOR = REPO / "wireshark" / "rmp.lua"
TSHARK = shutil.which("tshark")
# A quickstart cut short: a second of trading from 0.5 s, drained until 4 s, when every
# guaranteed customer holds every release (a fraction of a second of CPU).
SHORT = {"duration_s": 4.0, "workload.duration_s": 1.0}
SHORT_SETS = [f"--set={k}={v}" for k, v in SHORT.items()]


def read_pcap(path: Path) -> tuple[tuple[int, ...], list[tuple[int, bytes]]]:
    """The file header's fields and every (t_us, frame) of a classic little-endian pcap."""
    data = path.read_bytes()
    header = struct.unpack_from("<IHHiIII", data)
    frames, off = [], 24
    while off < len(data):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, off)
        assert incl == orig, f"{path.name}: truncated record at {off}"
        frames.append((sec * 1_000_000 + usec, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    assert off == len(data)
    return header, frames


def udp(frame: bytes) -> tuple[str, str, int, int, int, bytes]:
    """(src ip, dst ip, ttl, src port, dst port, payload) of an Ethernet/IPv4/UDP frame; the
    IPv4 header's checksum and lengths are checked on the way."""
    assert frame[12:14] == b"\x08\x00"
    ip = frame[14:34]
    assert ip[0] == 0x45 and ip[9] == 17
    s = sum(struct.unpack("!10H", ip))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    assert s == 0xFFFF, "IPv4 header checksum"
    total = struct.unpack("!H", ip[2:4])[0]
    assert total == len(frame) - 14
    sport, dport, ulen, _ = struct.unpack("!HHHH", frame[34:42])
    assert ulen == total - 20
    return socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), ip[8], sport, dport, frame[42:]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return api.simulate(QUICKSTART, out=tmp_path_factory.mktemp("sim-pcap") / "run", overrides=SHORT, pcap=True)


@pytest.fixture(scope="module")
def captures(run):
    """host -> (header, [(t_us, frame)])."""
    return {p.stem: read_pcap(p) for p in run.dir.pcap_files()}


def test_one_capture_per_host_in_tcpdumps_layout(run, captures):
    hosts = [h.name for h in run.experiment.topology.hosts]
    assert sorted(captures) == sorted(hosts)
    assert [run.dir.pcap_path(h) for h in sorted(hosts)] == run.dir.pcap_files()
    assert run.manifest["pcaps"] == [f"{h}.pcap" for h in sorted(hosts)]
    for name, (header, frames) in captures.items():
        # tcpdump -w: magic a1b2c3d4 (microseconds), version 2.4, snaplen 262144, LINKTYPE_ETHERNET
        assert header == (0xA1B2C3D4, 2, 4, 0, 0, 262144, 1), name
        assert frames, f"{name} neither sent nor received anything"
        times = [t for t, _ in frames]
        assert times == sorted(times), name
        assert times[-1] <= SHORT["duration_s"] * 1e6


def test_frames_are_addressed_as_the_emulation_addresses_them(run, captures):
    topo = run.experiment.topology
    ips = {h.name: host_ip(i) for i, h in enumerate(topo.hosts)}
    stripes = range(run.experiment.experiment.workload.stripes)
    groups = {group_ip(g): g for g in {*(rmp_group(k) for k in stripes),
                                       *(region_group(r, k) for r in topo.regions for k in stripes)}}
    mac_of = {ip: b"\x02\x00\x00" + socket.inet_aton(ip)[1:] for ip in ips.values()}
    try:   # the emulated hosts' MACs (importing the topology needs Mininet's modules, not a network)
        from rmptwin.emulation.topo import host_mac
        assert [bytes.fromhex(host_mac(i).replace(":", "")) for i in range(len(topo.hosts))] == list(mac_of.values())
    except ImportError:
        pass
    ports = Counter()
    for name, (_, frames) in captures.items():
        for _, frame in frames:
            src, dst, ttl, sport, dport, payload = udp(frame)
            assert src in mac_of and frame[6:12] == mac_of[src]
            assert sport == dport in (RMP_PORT, REGION_PORT, REREQUEST_PORT)
            assert src == ips[name] or dst in (ips[name], *groups), f"{name}: {src} -> {dst} is not its traffic"
            if dst in groups:
                assert ttl == 32 and frame[:3] == b"\x01\x00\x5e"
                assert dport == (RMP_PORT if groups[dst] in map(rmp_group, stripes) else REGION_PORT)
            else:
                assert ttl == 64 and frame[:6] == mac_of[dst]
            ports[dport] += 1
    assert ports[RMP_PORT] and ports[REGION_PORT]   # the ring and the customers' remulticast


def _sent_and_received(run, captures) -> tuple[Counter, Counter]:
    """(host, frame type) -> frames it sent, and frames it received, by its capture."""
    ips = {host_ip(i): h.name for i, h in enumerate(run.experiment.topology.hosts)}
    sent, received = Counter(), Counter()
    for name, (_, frames) in captures.items():
        for _, frame in frames:
            src, _dst, _ttl, _sport, _dport, payload = udp(frame)
            (sent if ips[src] == name else received)[(name, describe(payload)[0])] += 1
    return sent, received


def test_a_sources_capture_holds_every_datagram_it_sent(run, captures):
    events = run.events()
    sent, _ = _sent_and_received(run, captures)
    sources = [h.name for h in run.experiment.topology.hosts if h.role == "source"]
    assert sources
    for src in sources:
        mine = events[events.node == src]
        published = int((mine.kind == "send").sum()) + int((mine.kind == "src_retx").sum())
        assert published > 20
        assert sent[(src, "DATA")] == published, src


def test_every_hosts_capture_agrees_with_its_access_link_counts(run, captures):
    """The link counts are the network's own tally: a host's capture sent what its access
    link was offered towards the switch and received what it carried towards the host
    (offered minus dropped), frame type by frame type; save the few frames still on their
    way when the run ends (the ring passes its token to the last instant), which the link
    counted and nobody received, as tcpdump stopped at the end would not."""
    sent, received = _sent_and_received(run, captures)
    counts = run.counts()
    hosts = {h.name: h.switch for h in run.experiment.topology.hosts}
    up, down = Counter(), Counter()
    for r in counts.itertuples():
        if r.from_node in hosts and r.to_node == hosts[r.from_node]:
            up[(r.from_node, r.frame)] += r.packets
        elif r.to_node in hosts and r.from_node == hosts[r.to_node]:
            down[(r.to_node, r.frame)] += r.packets - r.dropped
    assert sum(up.values()) > 300 and sum(down.values()) > sum(up.values())
    assert +sent == +up
    assert not received - down
    assert sum((down - received).values()) <= 3
    assert sum(received.values()) == run.stats["deliveries"]   # every delivery the simulator counted
    assert len(run.drops()) > 0   # lossy links: a dropped frame is in no receiver's capture


def test_the_customers_wire_check_reads_the_captures(run, tmp_path):
    verdict = {v.checker: v for v in check_run(run.dir)}["customers"]
    assert verdict.status == "ok" and "wire: 9 pcap(s)" in verdict.note, verdict
    # ... and it reads them: a guaranteed customer whose capture lost its frames fails it
    copy = RunDir(shutil.copytree(run.dir.path, tmp_path / "copy"))
    customer = next(h.name for h in run.experiment.topology.hosts if h.role == "customer" and h.grade == "guaranteed")
    data = copy.pcap_path(customer).read_bytes()
    copy.pcap_path(customer).write_bytes(data[:24])
    verdict = {v.checker: v for v in check_run(copy)}["customers"]
    assert verdict.status == "violation" and "on the wire" in verdict.violation.message, verdict


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
def test_tshark_and_the_dissector_decode_a_capture(run, captures):
    """The command docs/wireshark.md gives, on one source's capture: every frame on the RMP
    port decoded by the dissector, its DATA frames those the source sent, MoldUDP64 decoded
    by Wireshark's own dissector."""
    src = next(h.name for h in run.experiment.topology.hosts if h.role == "source")
    path = run.dir.pcap_path(src)
    cmd = [TSHARK, "-X", f"lua_script:{DISSECTOR}", "-r", str(path),
           "-d", f"udp.port=={REGION_PORT},moldudp64", "-d", f"udp.port=={REREQUEST_PORT},moldudp64",
           "-T", "fields", "-E", "separator=|", "-e", "frame.protocols", "-e", "udp.dstport", "-e", "rmptwin.type",
           "-e", "rmptwin.src", "-e", "_ws.expert"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    assert len(out) == len(captures[src][1])
    data_frames, kinds = 0, Counter()
    for line in out:
        protocols, port, kind, frame_src, expert = line.split("|")
        assert not expert, line
        if int(port) == RMP_PORT:
            assert "rmptwin" in protocols.split(":"), line
            kinds[kind] += 1
            data_frames += kind == "1" and frame_src == src
        else:
            assert "moldudp64" in protocols.split(":"), line
    sent, _ = _sent_and_received(run, captures)
    assert data_frames == sent[(src, "DATA")] > 0
    assert len(kinds) >= 2   # DATA it sent, tokens (ACK or NULL_TOKEN) it heard


def test_the_command_line_writes_captures_and_nothing_else_changes(tmp_path):
    with_pcap, without = tmp_path / "pcap", tmp_path / "plain"
    printed = {}
    for out, extra in ((with_pcap, ["--pcap"]), (without, [])):
        proc = subprocess.run([str(RMPTWIN), "sim", str(QUICKSTART), *SHORT_SETS, "--out", str(out), *extra],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        printed[out] = proc.stdout
    a, b = RunDir(with_pcap), RunDir(without)
    hosts = [h["name"] for h in a.read_manifest()["topology"]["hosts"]]
    assert sorted(p.stem for p in a.pcap_files()) == sorted(hosts)
    assert all(read_pcap(p)[1] for p in a.pcap_files())
    assert not b.pcaps_dir.exists() and "pcaps" not in b.read_manifest()
    # the summary says where they are and how to open them; a run without them says nothing
    line = next(ln for ln in printed[with_pcap].splitlines() if ln.startswith("captures:"))
    assert f"captures: {len(hosts)} in {a.pcaps_dir} (tshark -X lua_script:wireshark/rmp.lua -r FILE" in line
    assert "captures:" not in printed[without]
    for f in (*a.event_files(), a.drops_path, a.counts_path, a.summary_path):
        twin = b.path / f.relative_to(a.path)
        assert f.read_bytes() == twin.read_bytes(), f.name
    ma, mb = a.read_manifest(), b.read_manifest()
    for m in (ma, mb):
        m.pop("created_utc")
    assert ma.pop("pcaps") == [f"{h}.pcap" for h in sorted(hosts)]
    assert json.dumps(ma, sort_keys=True) == json.dumps(mb, sort_keys=True)


def test_a_rerun_writes_the_same_captures_byte_for_byte(run, tmp_path):
    again = api.rerun(run, out=tmp_path / "again")
    assert api.replay_of(run).pcap and again.manifest["pcaps"] == run.manifest["pcaps"]
    assert [p.name for p in again.dir.pcap_files()] == [p.name for p in run.dir.pcap_files()]
    for p in run.dir.pcap_files():
        assert again.dir.pcap_path(p.stem).read_bytes() == p.read_bytes(), p.name


def test_a_failed_run_leaves_no_captures(tmp_path, monkeypatch):
    def half_a_run(loaded, seed, append, progress=None):
        append("rpny", b"half a capture")
        raise RuntimeError("the simulator failed")

    monkeypatch.setattr(pipeline, "simulate_with_pcaps", half_a_run)
    out = tmp_path / "run"
    with pytest.raises(RuntimeError):
        api.simulate(QUICKSTART, out=out, overrides=SHORT, pcap=True)
    assert not out.exists()


def test_the_emulated_backend_refuses_the_simulators_flag(tmp_path):
    with pytest.raises(api.UserError, match="--capture"):
        pipeline.run_experiment(api.load_experiment(QUICKSTART), "emulation", out=tmp_path / "run", pcap=True)
