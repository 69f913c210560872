"""The frozen config every taxonomy core takes (built by ``rmptwin.factories.taxonomy_factory``)."""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("ub", "bb", "uub", "gup")


@dataclass(frozen=True, slots=True)
class TaxonomyConfig:
    """One group's protocol and timing.

    ``members`` are the receivers in succession order: ``members[0]`` sequences (or holds the
    locker), ``members[1]`` takes over when it fails, and so on. ``senders`` publish.
    """

    protocol: str
    members: tuple[str, ...]
    senders: tuple[str, ...] = ()
    group: str = "taxo/0"
    heartbeat_ns: int = 10_000_000     # the sequencer's idle heartbeat
    suspect_ns: int = 50_000_000       # silence after which a member suspects the sequencer
    nak_ns: int = 2_000_000            # how long a gap may stand before it is NAKed
    retry_ns: int = 20_000_000         # resend interval for anything unanswered
    max_retries: int = 3               # unanswered resends before a member is presumed failed
    nak_span: int = 64                 # most gseqs one NAK asks for

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r}: one of {', '.join(PROTOCOLS)}")
        if not self.members:
            raise ValueError("a taxonomy group needs at least one member")
