"""What a receiver's negative acknowledgements carry (seed 2.1): the ranges it lacks, and
the frames it holds that answer another's.

A NACK asks one channel for ``(want, lo, hi, src)`` ranges of at most ``MAX_RANGE``: acks
(``WANT_ACKS``, by token), the messages the first acks held name (``WANT_MSGS``, by source
and sequence), a hole in one source's waiting messages (``WANT_MSGS``, asked of the source)
or the ack of a message a source says was acknowledged (``WANT_ACK_OF``). Computed from the
receiver's stores alone; when to ask, whom, and reporting a silent server stay with
``receiver.StreamReceiver``.
"""

from __future__ import annotations

from rmptwin.rmp import wire

MAX_RANGE = 128        # most acks or messages one NACK asks for

Msg = tuple[str, int]   # (source, sequence)
Want = tuple[int, int, int, str]   # (want, lo, hi, src)


def missing_acks(t_r: int, top: int, acks: dict[int, wire.Ack]) -> list[Want]:
    """The acks from ``t_r`` up to ``top`` (at most MAX_RANGE of them) not held."""
    out: list[Want] = []
    lo = None
    for t in range(t_r, min(top, t_r + MAX_RANGE - 1) + 1):
        if t not in acks and lo is None:
            lo = t
        elif t in acks and lo is not None:
            out.append((wire.WANT_ACKS, lo, t - 1, ""))
            lo = None
    if lo is not None:
        out.append((wire.WANT_ACKS, lo, min(top, t_r + MAX_RANGE - 1), ""))
    return out


def missing_msgs(t_r: int, acks: dict[int, wire.Ack], msgs: dict[Msg, bytes]) -> list[Want]:
    """The messages the held acks from ``t_r`` on (32 of them at most) name and ``msgs`` lacks."""
    out: list[Want] = []
    lacking: dict[str, list[int]] = {}
    t = t_r
    while t in acks and t < t_r + 32:
        for m in acks[t].msgs:
            if m not in msgs:
                lacking.setdefault(m[0], []).append(m[1])
        t += 1
    for s, seqs in lacking.items():
        for lo, hi in _runs(sorted(set(seqs))):
            out.append((wire.WANT_MSGS, lo, hi, s))
    return out


def source_holes(s: str, waiting: dict[Msg, None], m_sr: dict[str, int], hint: dict[str, int],
                 msgs: dict[Msg, bytes], ack_of: dict[Msg, int]) -> list[Want]:
    """The holes below the highest of source ``s``'s messages waiting for an ack."""
    top = None   # the highest of s's messages waiting for an ack: a plain loop, no generator
    for src, q in waiting:
        if src == s and (top is None or q > top):
            top = q
    if top is None:
        top = 0
    lo = max(m_sr.get(s, 1), hint.get(s, 1))   # below the hint: acked, ask for acks
    holes = [q for q in range(lo, min(top, lo + MAX_RANGE)) if (s, q) not in msgs and (s, q) not in ack_of]
    return [(wire.WANT_MSGS, a, b, s) for a, b in _runs(holes)]


def missing_ack_of(m_sr: dict[str, int], hint: dict[str, int]) -> list[Want]:
    """Per source, the acks of its messages from M_{s,r} up to what it says was acknowledged."""
    out: list[Want] = []
    for s, below in hint.items():
        nxt = m_sr.get(s, 1)
        if below > nxt:
            out.append((wire.WANT_ACK_OF, nxt, min(below - 1, nxt + MAX_RANGE - 1), s))
    return out


def held_frames(n: wire.Nack, stripe: int, acks: dict[int, wire.Ack], msgs: dict[Msg, bytes],
                ack_of: dict[Msg, int]) -> list[wire.Data | wire.Ack]:
    """What we hold of what ``n`` asks for (at most MAX_RANGE), to send back as RETX."""
    frames: list[wire.Data | wire.Ack] = []
    if n.want == wire.WANT_ACKS:
        frames = [acks[t] for t in range(n.lo, min(n.hi, n.lo + MAX_RANGE - 1) + 1) if t in acks]
    elif n.want == wire.WANT_MSGS:
        for seq in range(n.lo, min(n.hi, n.lo + MAX_RANGE - 1) + 1):
            p = msgs.get((n.src, seq))
            if p is not None:
                frames.append(wire.Data(stripe, n.src, seq, 0, p))
    else:
        seen = set()
        for seq in range(n.lo, min(n.hi, n.lo + MAX_RANGE - 1) + 1):
            t = ack_of.get((n.src, seq))
            if t is not None and t not in seen and t in acks:
                seen.add(t)
                frames.append(acks[t])
    return frames


def _runs(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in seqs:
        if out and out[-1][1] + 1 == s:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out
