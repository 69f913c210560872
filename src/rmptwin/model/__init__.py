"""Topology and experiment specifications (YAML in topologies/ and experiments/).

Every model forbids unknown fields, so a typo is an error and not a silently ignored
setting. ``load_topology`` / ``load_experiment`` turn any problem into one
``UserError`` line naming the file, the field, its line where known, and what is
expected.

``links`` (loss models, link parameters), ``hosts`` (one model per role), ``topology``,
``experiment`` and ``loading`` (YAML to models, JSON Schemas); this module re-exports
what callers use.
"""

from rmptwin.model.experiment import (
    Clock,
    Experiment,
    Fault,
    Floor,
    LoadedExperiment,
    Orders,
    Protocol,
    Security,
    Taxonomy,
    VenueWorkload,
    Workload,
)
from rmptwin.model.hosts import (
    ROLES,
    AttackerHost,
    BrokerHost,
    ClientHost,
    CustomerHost,
    ExchangeHost,
    GatewayHost,
    Grade,
    HistoryHost,
    HostSpec,
    ParticipantHost,
    PortalHost,
    PrimaryHost,
    ReformationHost,
    RetransmitHost,
    SecondaryHost,
    SequencerHost,
    SourceHost,
    TaxonomyMemberHost,
    TraderHost,
    VenueHost,
)
from rmptwin.model.links import Bernoulli, GilbertElliott, LinkParams, LinkSpec, LossModel, Trace
from rmptwin.model.loading import (
    cross_check,
    json_schemas,
    load_experiment,
    load_topology,
    read_yaml,
)
from rmptwin.model.topology import Topology

__all__ = [
    "BrokerHost", "ExchangeHost", "Orders", "PortalHost", "TraderHost",
    "AttackerHost", "Bernoulli", "ClientHost", "Clock", "CustomerHost", "Experiment", "Fault", "GatewayHost",
    "GilbertElliott", "Grade", "HistoryHost", "HostSpec", "LinkParams", "LinkSpec", "LoadedExperiment",
    "LossModel", "PrimaryHost", "Protocol", "ROLES", "ReformationHost", "RetransmitHost",
    "SecondaryHost", "Security", "SequencerHost", "SourceHost", "Topology", "VenueHost", "VenueWorkload", "Workload",
    "Taxonomy", "TaxonomyMemberHost", "Trace",
    "Floor", "ParticipantHost",
    "cross_check", "json_schemas", "load_experiment", "load_topology", "read_yaml",
]
