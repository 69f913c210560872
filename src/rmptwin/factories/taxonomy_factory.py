"""Sequencer-taxonomy factories: ``taxonomy_member`` hosts, and ``source`` hosts when the
experiment has a ``taxonomy:`` section (``factories.SECTION_FACTORIES``)."""

from __future__ import annotations

import random

from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, SourceHost, TaxonomyMemberHost
from rmptwin.taxonomy import TaxonomyConfig, make_member, make_sender
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore


def taxonomy_config(loaded: LoadedExperiment) -> TaxonomyConfig:
    tx = loaded.experiment.taxonomy
    if tx is None:
        raise UserError(f"{loaded.path}: the topology has taxonomy_member hosts but the experiment has no "
                        "'taxonomy:' section (add taxonomy: {protocol: ub})")
    members = [h.name for h in loaded.topology.hosts_with_role("taxonomy_member")]
    if not members:
        raise UserError(f"{loaded.path}: taxonomy: needs taxonomy_member hosts in the topology")
    first = tx.sequencer or members[0]
    if first not in members:
        raise UserError(f"{loaded.path}: taxonomy.sequencer {first!r} is not a taxonomy_member host "
                        f"(members: {', '.join(members)})")
    i = members.index(first)
    return TaxonomyConfig(
        protocol=tx.protocol, members=tuple(members[i:] + members[:i]),
        senders=tuple(h.name for h in loaded.topology.hosts_with_role("source")),
        heartbeat_ns=round(tx.heartbeat_ms * 1e6), suspect_ns=round(tx.suspect_ms * 1e6),
        nak_ns=round(tx.nak_ms * 1e6), retry_ns=round(tx.retry_ms * 1e6))


def build_member(host: TaxonomyMemberHost, loaded: LoadedExperiment, rng: random.Random, *,
                 recovering: bool = False) -> MemberCore:
    if recovering:
        raise UserError(f"host {host.name}: a taxonomy member cannot recover (crash faults only); "
                        "drop its 'recover' fault")
    return make_member(host.name, taxonomy_config(loaded))


def build_sender(host: SourceHost, loaded: LoadedExperiment, rng: random.Random, *,
                 recovering: bool = False) -> SenderCore:
    """A ``source`` host of an experiment with a ``taxonomy:`` section (``SECTION_FACTORIES``)."""
    return make_sender(host.name, taxonomy_config(loaded))
