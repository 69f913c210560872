"""``--set KEY=VALUE`` for one run (`rmptwin sim`, `rmptwin run`): the experiment with a few
fields changed, through the sweep's own parsing and validation (``api.parse_sets``,
``api.with_overrides``), so that a student need not copy the YAML (a copy elsewhere would
break its relative topology path)."""

from __future__ import annotations

from rmptwin import api
from rmptwin.errors import UserError

SET_HELP = ("KEY=VALUE: change one field for this run, as `rmptwin sweep --set` names it (protocol.delta_a_ms=200, "
            "workload.duration_s=2, topology.links.0.loss=0.05); repeatable")


def apply_set_options(loaded: api.LoadedExperiment, options: list[str]) -> api.LoadedExperiment:
    """``loaded`` with every ``--set`` applied and validated as the YAML would be."""
    if not options:
        return loaded
    sets = api.parse_sets(options)
    for key, values in sets.items():
        if len(values) != 1:
            raise UserError(f"--set {key}: one value per run; `rmptwin sweep` runs several")
    return api.with_overrides(loaded, {k: v[0] for k, v in sets.items()})
