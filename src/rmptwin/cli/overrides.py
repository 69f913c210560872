"""``--set KEY=VALUE`` for one run (`rmptwin sim`, `rmptwin run`): the experiment with a few
fields changed, through the sweep's own parsing and validation (``api.parse_sets``,
``api.with_overrides``), so that a student need not copy the YAML (a copy elsewhere would
break its relative topology path). And ``--tdf N|auto``, the time dilation factor of the
emulated runs of `run`, `sweep`, `claims` and `chaos` (``tdf_option``, ``parse_tdf``)."""

from __future__ import annotations

from typing import Any, Literal

import typer

from rmptwin import api
from rmptwin.errors import UserError
from rmptwin.model.overrides import time_dilation_value

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


TDF_HELP = ("time dilation factor of the emulated runs: a number >= 1 (a run second lasts N wall seconds) or auto "
            "(the smallest this host needs); default: {default}")


def tdf_option(default: str = "the experiment's time_dilation") -> Any:
    """``--tdf N|auto`` for a command that runs emulated: its value goes to ``parse_tdf``."""
    return typer.Option(None, "--tdf", metavar="N|auto", help=TDF_HELP.format(default=default))


def parse_tdf(text: str | None, sets: list[str] | None = None) -> float | Literal["auto"] | None:
    """``--tdf``'s value as the experiment's ``time_dilation`` holds it (None: not given, the
    experiment's own); one line saying what to fix for anything else, or for ``--tdf`` beside a
    ``--set time_dilation=`` among ``sets``."""
    if text is None:
        return None
    value = time_dilation_value(text, f"--tdf {text}")
    if any(s.partition("=")[0].strip() == "time_dilation" for s in sets or ()):
        raise UserError(f"--tdf {text} and --set time_dilation both given: give one")
    return value


def parse_factors(text: str, option: str = "--measure") -> list[float | Literal["auto"]]:
    """``1,2,auto`` as time dilation factors, each checked by the rule ``--tdf`` follows."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UserError(f"{option} {text!r}: name the factors, e.g. {option} 1,2,auto")
    return [time_dilation_value(p, f"{option} {text}: time dilation factor {p}") for p in parts]
