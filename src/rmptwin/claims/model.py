"""A seed claim as a file (experiments/claims/<name>.yaml): what the seed says and its figure,
the sweep that measures it, and the rule that gives the verdict. Adding a claim is adding a file.

    claim: Fair when Delta_A >= tau_t           # the claim, in one line
    source: RMP seed, section 5.1               # where the seed says it
    quote: "... when Delta_A > tau_t, just one token transfer time."
    seed_figure: spread 0 for Delta_A >= tau_t  # the seed's number, as it gives it
    experiment: ../../labs/fairness-delta-a/fairness.yaml   # relative to the claim file
    sets: {protocol.delta_a_ms: [0, 50, 143, 200]}          # as `rmptwin sweep --set`
    seeds: 3
    probes: [rmp]                               # sweeps.probes: extra figures per run
    emulated: {sets: {...}, seeds: 1}           # the smaller sweep `rmptwin claims --emulated` runs
                                                # ({not_applicable: why} where it cannot run emulated;
                                                # late_timers_cannot_pass: why an overloaded run's
                                                # "holds" still stands)
    verdict: {kind: zero_from, metric: fairness_spread_ms.p99, param: protocol.delta_a_ms, threshold: 143,
              tolerance: runtime.load.timer_lateness_p99_ms}    # 0 up to the run's measured timer lateness
    note: what the reader should know about how we measured it

The verdict kinds are in ``claims.verdicts``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rmptwin.errors import UserError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Trend(_Strict):
    metric: str
    param: str
    direction: Literal["up", "down"]


class Verdict(_Strict):
    kind: Literal["formula", "within", "at_most", "at_least", "zero_from", "trend"]
    metric: str | None = Field(None, description="a sweep column, or an expression over `vars` and `constants`")
    vars: dict[str, str] = Field(default_factory=dict, description="expression name -> sweep column")
    constants: dict[str, float] = Field(default_factory=dict)
    expect: str | None = Field(None, description="formula: the seed's expression over vars and constants")
    rel_tol: float = 0.1
    low: float | None = None
    high: float | None = None
    bound: float | None = None
    bounds: dict[str, float] | None = Field(None, description="at_most/at_least per value of `param`")
    param: str | None = None
    threshold: float | None = None
    trends: list[Trend] = Field(default_factory=list)
    tolerance: str | None = Field(None, description="zero_from: a sweep column of what counts as 0 per run, e.g. "
                                  "an emulated run's measured timer lateness; 0 where the sweep has no such column")
    also: list[str] = Field(default_factory=list, description="more sweep columns to show beside the metric")


class Emulated(_Strict):
    sets: dict[str, list[Any]] | None = None   # None: the simulated sweep's
    seeds: int = 1
    not_applicable: str | None = Field(None, description="why this claim cannot run emulated on one machine "
                                       "(the row says 'not applicable' and this reason)")
    late_timers_cannot_pass: str | None = Field(
        None, description="why timers firing late cannot make this claim hold where it does not (its figure "
        "counts what must never happen or what must all arrive, not when): an overloaded emulated sweep that "
        "holds is then judged, its lateness shown; one that does not hold stays not judged")


class Claim(_Strict):
    claim: str
    source: str
    quote: str
    seed_figure: str
    experiment: str
    sets: dict[str, list[Any]]
    seeds: int = Field(2, ge=1)
    probes: list[str] = Field(default_factory=list)
    emulated: Emulated | None = None
    verdict: Verdict
    partial: str | None = Field(None, description="what the sweep does not measure: caps the verdict at 'partly'")
    note: str = ""
    order: int = 100
    path: Path | None = None

    @property
    def name(self) -> str:
        return self.path.stem if self.path else "claim"

    @property
    def experiment_path(self) -> Path:
        assert self.path is not None   # load_claim sets it
        return (self.path.parent / self.experiment).resolve()


def load_claim(path: Path) -> Claim:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UserError(f"{path}: cannot read ({str(e).splitlines()[0]})") from None
    try:
        return Claim.model_validate({**(data or {}), "path": path})
    except ValidationError as e:
        first = e.errors()[0]
        raise UserError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def load_claims(directory: Path, only: str | None = None) -> list[Claim]:
    files = sorted(directory.glob("*.yaml"))
    if only:
        files = [f for f in files if f.stem == only]
        if not files:
            names = ", ".join(sorted(f.stem for f in directory.glob("*.yaml")))
            raise UserError(f"--only {only}: no such claim in {directory}; choose from {names}")
    return sorted((load_claim(f) for f in files), key=lambda c: (c.order, c.name))
