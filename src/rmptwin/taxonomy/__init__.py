"""The sequencer taxonomy (seed sequencer-taxonomy.txt) as pure sans-IO cores beside RMP.

Four total-order broadcast protocols, each a member core (receiver; the head of the
succession sequences) and a sender core, over one small versioned codec per protocol:

- ``ub``  unicast-broadcast: sender -> sequencer by unicast, the sequencer broadcasts it numbered;
- ``bb``  broadcast-broadcast with ISIS-style FIFO NAK repair: the sender broadcasts, the
  sequencer broadcasts the order;
- ``uub`` unicast-unicast-broadcast: the sender asks for a number, gets it, broadcasts;
- ``gup`` the Tandem global update protocol: one update at a time under the locker's lock.

Shared: delivery in gseq order, NAK repair of a receiver's losses, and the takeover of a
failed sequencer (locker) by its successor (``member``). Events are RMP's kinds (SEND,
DELIVER, NACK_SENT, RETX_SENT, CTRL_SENT, REFORM_START/DONE), so one definition of
agreement and latency serves every protocol.

In an experiment: hosts of role ``taxonomy_member`` receive, ``source`` hosts send the ticker
workload, and ``taxonomy: {protocol: ub|bb|uub|gup, sequencer: NAME}`` picks the protocol
and the first sequencer (the others follow in topology order). One role rather than
sender/sequencer/receiver roles because any member may become the sequencer.
"""

from __future__ import annotations

from rmptwin.taxonomy.bb import BbMember, BbSender
from rmptwin.taxonomy.config import PROTOCOLS, TaxonomyConfig
from rmptwin.taxonomy.gup import GupMember, GupSender
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore
from rmptwin.taxonomy.ub import UbMember, UbSender
from rmptwin.taxonomy.uub import UubMember, UubSender

MEMBERS: dict[str, type[MemberCore]] = {"ub": UbMember, "bb": BbMember, "uub": UubMember, "gup": GupMember}
SENDERS: dict[str, type[SenderCore]] = {"ub": UbSender, "bb": BbSender, "uub": UubSender, "gup": GupSender}


def make_member(name: str, config: TaxonomyConfig) -> MemberCore:
    return MEMBERS[config.protocol](name, config)


def make_sender(name: str, config: TaxonomyConfig) -> SenderCore:
    return SENDERS[config.protocol](name, config)


__all__ = ["MEMBERS", "PROTOCOLS", "SENDERS", "MemberCore", "SenderCore", "TaxonomyConfig", "make_member",
           "make_sender"]
