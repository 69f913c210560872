"""The RMP frames as data: type codes, the meaning of their fields, one frozen dataclass
per frame type (``Frame`` is their union) and the ring-lineage rules acks are judged by.

How a frame becomes bytes and back is ``rmp.wire`` (the codec), which re-exports every
name here: ``from rmptwin.rmp.wire import Ack`` and ``wire.Ack`` keep working.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

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
# Each frame's TYPE_NAME is a property, not a class attribute: mypyc, which compiles this
# module, makes a dataclass's class attributes (ClassVar or not) into fields.


@dataclass(frozen=True, slots=True)
class Data:
    """Source message (src, src_seq) on a stripe. ``acked_below``: every M < it has been
    acknowledged as far as the source knows (lets receivers spot a missed ack)."""

    stripe: int
    src: str
    src_seq: int
    acked_below: int
    payload: bytes

    @property
    def TYPE_NAME(self) -> str:
        return "DATA"


@dataclass(frozen=True, slots=True)
class Ack:
    """Token pass t: acknowledges ``msgs`` with global sequence numbers first_gseq.., is the
    ack to the previous site and passes the token to ``next_site``. No messages: a null token."""

    stripe: int
    epoch: int
    token: int
    first_gseq: int
    ts_ns: int
    token_site: str
    next_site: str
    msgs: tuple[tuple[str, int], ...] = ()
    stable: int = 0     # every ack up to this token is held by every ring member (0: none known)

    @property
    def TYPE_NAME(self) -> str:
        return "ACK" if self.msgs else "NULL_TOKEN"

    @property
    def last_gseq(self) -> int:
        """Last gseq it assigns (first_gseq - 1 for a null token)."""
        return self.first_gseq + len(self.msgs) - 1


@dataclass(frozen=True, slots=True)
class Nack:
    stripe: int
    epoch: int
    requester: str
    want: int
    lo: int
    hi: int
    src: str = ""

    @property
    def TYPE_NAME(self) -> str:
        return "NACK"


@dataclass(frozen=True, slots=True)
class Retx:
    """A retransmission: carries the original DATA or ACK/NULL_TOKEN frame."""

    stripe: int
    original: Data | Ack

    @property
    def TYPE_NAME(self) -> str:
        return "RETX"


@dataclass(frozen=True, slots=True)
class Report:
    stripe: int
    epoch: int
    reporter: str
    suspect: str
    reason: int
    token: int
    ring: str = ""

    @property
    def TYPE_NAME(self) -> str:
        return "REPORT"


@dataclass(frozen=True, slots=True)
class ReportAck:
    stripe: int
    epoch: int
    reporter: str

    @property
    def TYPE_NAME(self) -> str:
        return "REPORT_ACK"


@dataclass(frozen=True, slots=True)
class Invite:
    stripe: int
    epoch: int          # the epoch of the ring being formed
    reformer: str

    @property
    def TYPE_NAME(self) -> str:
        return "INVITE"


@dataclass(frozen=True, slots=True)
class Join:
    """Answer to an INVITE (or, with ``recovering``, a request to join). ``have`` is the last
    acknowledgement the member holds with all its messages (t_r - 1); ``next_gseq`` follows it."""

    stripe: int
    epoch: int
    member: str
    have: int
    next_gseq: int
    recovering: bool = False
    have_epoch: int = 0     # epoch of the ring that issued ack ``have``

    @property
    def TYPE_NAME(self) -> str:
        return "JOIN"


@dataclass(frozen=True, slots=True)
class JoinAck:
    stripe: int
    epoch: int
    member: str

    @property
    def TYPE_NAME(self) -> str:
        return "JOIN_ACK"


@dataclass(frozen=True, slots=True)
class NewRing:
    """A reformed ring. Members lacking acks up to ``last_t`` get them from ``recovery_site``;
    the token site sends ack last_t + 1 next. ``start_t`` is the policy's starting number."""

    stripe: int
    epoch: int
    start_t: int
    last_t: int
    next_gseq: int
    ts_ns: int
    token_site: str
    recovery_site: str
    members: tuple[str, ...] = field(default_factory=tuple)
    # recent rings as (epoch, first token it issued), oldest first, this one last: ack t
    # is valid only if issued by the ring whose range holds t (a receiver that slept
    # through a reformation may hold acks of a ring that was superseded below them)
    lineage: tuple[tuple[int, int], ...] = ()

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


@dataclass(frozen=True, slots=True)
class SecToken:
    """Secondary ring token numbered like the primary tokens: the holder has every ack and
    message up to ``token``."""

    stripe: int
    epoch: int
    ring: str
    token: int
    holder: str
    next_holder: str
    round: int

    @property
    def TYPE_NAME(self) -> str:
        return "SEC_TOKEN"


Frame = Data | Ack | Nack | Retx | Report | ReportAck | Invite | Join | JoinAck | NewRing | SecToken


def type_name(frame: Frame) -> str:
    return frame.TYPE_NAME
