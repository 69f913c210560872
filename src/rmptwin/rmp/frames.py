"""The RMP frames as data: type codes, the meaning of their fields, one class per frame
type (``Frame`` is their union) and the ring-lineage rules acks are judged by.

Frames are values: compared, hashed, printed and pickled by their fields. They are read-only
to mypy and, compiled, at run time; interpreted they are not frozen (see "frames" below).

How a frame becomes bytes and back is ``rmp.wire`` (the codec), which re-exports every
name here: ``from rmptwin.rmp.wire import Ack`` and ``wire.Ack`` keep working.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Final

# frame type codes
DATA, ACK, NULL_TOKEN, NACK, RETX, REPORT, REPORT_ACK, INVITE, JOIN, JOIN_ACK, NEW_RING, SEC_TOKEN = range(1, 13)
TYPE_NAMES = {
    DATA: "DATA", ACK: "ACK", NULL_TOKEN: "NULL_TOKEN", NACK: "NACK", RETX: "RETX", REPORT: "REPORT",
    REPORT_ACK: "REPORT_ACK", INVITE: "INVITE", JOIN: "JOIN", JOIN_ACK: "JOIN_ACK", NEW_RING: "NEW_RING",
    SEC_TOKEN: "SEC_TOKEN",
}

# what a NACK asks for
WANT_ACKS = 1      # acks with token numbers lo..hi
WANT_MSGS = 2      # source messages (src, lo..hi)
WANT_ACK_OF = 3    # the acks that acknowledged (src, lo..hi)

# why a failure is reported
REASON_NO_ACK = 1          # a source got no acknowledgement
REASON_TOKEN_LOST = 2      # the next site never accepted the token
REASON_NO_ANSWER = 3       # a retransmission server did not answer
REASON_MISSING_TOKEN = 4   # time-driven: the scheduled token pass never came
REASON_SECONDARY = 5       # a secondary ring member stopped passing its token
REASON_JOIN = 6            # not a failure: a host (suspect) asks to join the ring
REASONS = {REASON_NO_ACK, REASON_TOKEN_LOST, REASON_NO_ANSWER, REASON_MISSING_TOKEN, REASON_SECONDARY, REASON_JOIN}


# ----------------------------------------------------------------------------- frames
# Plain classes with their ``__init__`` written out, not frozen dataclasses: mypyc leaves a
# dataclass's generated ``__init__`` interpreted (1.25 us a frame in either build), and every
# datagram sent or received makes one. Fields are ``Final``: mypy holds every caller to them
# and the compiled build refuses an assignment at run time; interpreted, ``__slots__`` alone
# keeps the shape (no code assigns a field). ``_Frame`` gives them what the dataclass did:
# equality and hash by value (same type, equal fields), a repr naming each field, copy and
# pickle by the constructor. ``TYPE_NAME`` and the field list are per class, ClassVar or
# property: mypyc makes any other class-body assignment an instance attribute.


class _Frame:
    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()     # the constructor's parameters, in order

    def _values(self) -> tuple[object, ...]:
        """The fields in ``_FIELDS`` order: what equality, hash, repr and pickling use."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, _Frame):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._FIELDS, self._values()))
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[type[_Frame], tuple[object, ...]]:
        return type(self), self._values()


class Data(_Frame):
    """Source message (src, src_seq) on a stripe. ``acked_below``: every M < it has been
    acknowledged as far as the source knows (lets receivers spot a missed ack)."""

    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "src", "src_seq", "acked_below", "payload")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, src: str, src_seq: int, acked_below: int, payload: bytes) -> None:
        self.stripe: Final = stripe
        self.src: Final = src
        self.src_seq: Final = src_seq
        self.acked_below: Final = acked_below
        self.payload: Final = payload

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.src, self.src_seq, self.acked_below, self.payload

    @property
    def TYPE_NAME(self) -> str:
        return "DATA"


class Ack(_Frame):
    """Token pass t: acknowledges ``msgs`` with global sequence numbers first_gseq.., is the
    ack to the previous site and passes the token to ``next_site``. No messages: a null token.
    ``stable``: every ack up to this token is held by every ring member (0: none known)."""

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "stripe", "epoch", "token", "first_gseq", "ts_ns", "token_site", "next_site", "msgs", "stable")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, token: int, first_gseq: int, ts_ns: int, token_site: str,
                 next_site: str, msgs: tuple[tuple[str, int], ...] = (), stable: int = 0) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.token: Final = token
        self.first_gseq: Final = first_gseq
        self.ts_ns: Final = ts_ns
        self.token_site: Final = token_site
        self.next_site: Final = next_site
        self.msgs: Final = msgs
        self.stable: Final = stable

    def _values(self) -> tuple[object, ...]:
        return (self.stripe, self.epoch, self.token, self.first_gseq, self.ts_ns, self.token_site, self.next_site,
                self.msgs, self.stable)

    @property
    def TYPE_NAME(self) -> str:
        return "ACK" if self.msgs else "NULL_TOKEN"

    @property
    def last_gseq(self) -> int:
        """Last gseq it assigns (first_gseq - 1 for a null token)."""
        return self.first_gseq + len(self.msgs) - 1


class Nack(_Frame):
    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "requester", "want", "lo", "hi", "src")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, requester: str, want: int, lo: int, hi: int, src: str = "") -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.requester: Final = requester
        self.want: Final = want
        self.lo: Final = lo
        self.hi: Final = hi
        self.src: Final = src

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.requester, self.want, self.lo, self.hi, self.src

    @property
    def TYPE_NAME(self) -> str:
        return "NACK"


class Retx(_Frame):
    """A retransmission: carries the original DATA or ACK/NULL_TOKEN frame."""

    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "original")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, original: Data | Ack) -> None:
        self.stripe: Final = stripe
        self.original: Final = original

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.original

    @property
    def TYPE_NAME(self) -> str:
        return "RETX"


class Report(_Frame):
    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "reporter", "suspect", "reason", "token", "ring")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, reporter: str, suspect: str, reason: int, token: int,
                 ring: str = "") -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.reporter: Final = reporter
        self.suspect: Final = suspect
        self.reason: Final = reason
        self.token: Final = token
        self.ring: Final = ring

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.reporter, self.suspect, self.reason, self.token, self.ring

    @property
    def TYPE_NAME(self) -> str:
        return "REPORT"


class ReportAck(_Frame):
    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "reporter")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, reporter: str) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.reporter: Final = reporter

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.reporter

    @property
    def TYPE_NAME(self) -> str:
        return "REPORT_ACK"


class Invite(_Frame):
    """``epoch``: the epoch of the ring being formed."""

    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "reformer")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, reformer: str) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.reformer: Final = reformer

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.reformer

    @property
    def TYPE_NAME(self) -> str:
        return "INVITE"


class Join(_Frame):
    """Answer to an INVITE (or, with ``recovering``, a request to join). ``have`` is the last
    acknowledgement the member holds with all its messages (t_r - 1); ``next_gseq`` follows it.
    ``have_epoch``: epoch of the ring that issued ack ``have``."""

    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "member", "have", "next_gseq", "recovering", "have_epoch")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, member: str, have: int, next_gseq: int, recovering: bool = False,
                 have_epoch: int = 0) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.member: Final = member
        self.have: Final = have
        self.next_gseq: Final = next_gseq
        self.recovering: Final = recovering
        self.have_epoch: Final = have_epoch

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.member, self.have, self.next_gseq, self.recovering, self.have_epoch

    @property
    def TYPE_NAME(self) -> str:
        return "JOIN"


class JoinAck(_Frame):
    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "member")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, member: str) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.member: Final = member

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.member

    @property
    def TYPE_NAME(self) -> str:
        return "JOIN_ACK"


class NewRing(_Frame):
    """A reformed ring. Members lacking acks up to ``last_t`` get them from ``recovery_site``;
    the token site sends ack last_t + 1 next. ``start_t`` is the policy's starting number.

    ``lineage``: recent rings as (epoch, first token it issued), oldest first, this one last:
    ack t is valid only if issued by the ring whose range holds t (a receiver that slept
    through a reformation may hold acks of a ring that was superseded below them)."""

    _FIELDS: ClassVar[tuple[str, ...]] = (
        "stripe", "epoch", "start_t", "last_t", "next_gseq", "ts_ns", "token_site", "recovery_site", "members",
        "lineage")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, start_t: int, last_t: int, next_gseq: int, ts_ns: int,
                 token_site: str, recovery_site: str, members: tuple[str, ...] = (),
                 lineage: tuple[tuple[int, int], ...] = ()) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.start_t: Final = start_t
        self.last_t: Final = last_t
        self.next_gseq: Final = next_gseq
        self.ts_ns: Final = ts_ns
        self.token_site: Final = token_site
        self.recovery_site: Final = recovery_site
        self.members: Final = members
        self.lineage: Final = lineage

    def _values(self) -> tuple[object, ...]:
        return (self.stripe, self.epoch, self.start_t, self.last_t, self.next_gseq, self.ts_ns, self.token_site,
                self.recovery_site, self.members, self.lineage)

    @property
    def TYPE_NAME(self) -> str:
        return "NEW_RING"


def lineage_epoch(lineage: Iterable[tuple[int, int]], token: int) -> int | None:
    """The epoch whose ring issued ``token`` by ``lineage``; None if older than it records."""
    found = None
    for epoch, first in lineage:
        if first <= token:
            found = epoch
        else:
            break
    return found


def superseded(lineage: Iterable[tuple[int, int]], epoch: int, token: int) -> bool:
    """Whether ack ``token`` of ring ``epoch`` is one ``lineage`` shows another ring replaced."""
    owner = lineage_epoch(lineage, token)
    return owner is not None and owner != epoch


class SecToken(_Frame):
    """Secondary ring token numbered like the primary tokens: the holder has every ack and
    message up to ``token``."""

    _FIELDS: ClassVar[tuple[str, ...]] = ("stripe", "epoch", "ring", "token", "holder", "next_holder", "round")
    __slots__ = _FIELDS

    def __init__(self, stripe: int, epoch: int, ring: str, token: int, holder: str, next_holder: str,
                 round: int) -> None:
        self.stripe: Final = stripe
        self.epoch: Final = epoch
        self.ring: Final = ring
        self.token: Final = token
        self.holder: Final = holder
        self.next_holder: Final = next_holder
        self.round: Final = round

    def _values(self) -> tuple[object, ...]:
        return self.stripe, self.epoch, self.ring, self.token, self.holder, self.next_holder, self.round

    @property
    def TYPE_NAME(self) -> str:
        return "SEC_TOKEN"


Frame = Data | Ack | Nack | Retx | Report | ReportAck | Invite | Join | JoinAck | NewRing | SecToken


def type_name(frame: Frame) -> str:
    return frame.TYPE_NAME
