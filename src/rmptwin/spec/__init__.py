"""Topology and experiment specifications (YAML in topologies/ and experiments/).

Every model forbids unknown fields, so a typo is an error and not a silently ignored
setting. ``load_topology`` / ``load_experiment`` turn any problem into one
``UserError`` line naming the file, the field, its line where known, and what is
expected.

``links`` (loss models, link parameters), ``hosts`` (one model per role), ``topology``,
``experiment`` and ``loading`` (YAML to models, JSON Schemas); this module re-exports
what callers use.
"""

from .experiment import (
    Clock,
    Experiment,
    Fault,
    LoadedExperiment,
    Protocol,
    VenueWorkload,
    Workload,
)
from .hosts import (
    ROLES,
    ClientHost,
    CustomerHost,
    GatewayHost,
    Grade,
    HistoryHost,
    HostSpec,
    PrimaryHost,
    ReformationHost,
    RetransmitHost,
    SecondaryHost,
    SequencerHost,
    SourceHost,
    VenueHost,
)
from .links import Bernoulli, GilbertElliott, LinkParams, LinkSpec, LossModel
from .loading import (
    cross_check,
    json_schemas,
    load_experiment,
    load_topology,
    read_yaml,
)
from .topology import Topology

__all__ = [
    "Bernoulli", "ClientHost", "Clock", "CustomerHost", "Experiment", "Fault", "GatewayHost",
    "GilbertElliott", "Grade", "HistoryHost", "HostSpec", "LinkParams", "LinkSpec", "LoadedExperiment",
    "LossModel", "PrimaryHost", "Protocol", "ROLES", "ReformationHost", "RetransmitHost",
    "SecondaryHost", "SequencerHost", "SourceHost", "Topology", "VenueHost", "VenueWorkload", "Workload",
    "cross_check", "json_schemas", "load_experiment", "load_topology", "read_yaml",
]
