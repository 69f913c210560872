"""Parameter points of a sweep: ``--set KEY=V1,V2`` parsed, crossed, applied to the experiment
and validated through the spec models, so that a bad key or value is one line before anything runs.

KEY is a dotted path into the experiment as its YAML spells it (``protocol.delta_a_ms``,
``workload.rate_per_source``, ``venue.rate``, ``faults.0.at_s``), or into its topology with a
``topology.`` prefix (``topology.links.0.loss``); ``topology`` alone swaps the topology file
(a path relative to the experiment file). Values are YAML scalars: ``150``, ``0.5``,
``event_driven``, ``null``.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from rmptwin.errors import UserError
from rmptwin.model import Experiment, LoadedExperiment, Topology, cross_check, load_topology


@dataclass(frozen=True)
class Point:
    """One assignment of every swept key, and the experiment it makes."""

    params: dict[str, Any]  # key -> value, in the order the keys were given
    loaded: LoadedExperiment

    @property
    def key(self) -> str:
        """The identity of the point in the sweep table (what resuming matches on)."""
        return json.dumps(self.params, sort_keys=True)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params.items()) or "base"


def parse_set(option: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> (KEY, [V1, V2, ...]) with each value read as a YAML scalar."""
    key, sep, values = option.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise UserError(f"--set {option!r}: expected KEY=V1,V2,... (e.g. protocol.delta_a_ms=100,200)")
    parsed = []
    for text in values.split(","):
        try:
            parsed.append(yaml.safe_load(text.strip()))
        except yaml.YAMLError:
            raise UserError(f"--set {key}: {text.strip()!r} is not a value") from None
    return key, parsed


def _walk_to_parent(doc: Any, parts: list[str], key: str, where: str, prefix: str = "") -> Any:
    node = doc
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, key, prefix + ".".join(parts[: i + 1]), where)
    return node


def _child(node: Any, part: str, key: str, path: str, where: str) -> Any:
    """``node``'s ``part``; ``path`` is the key up to ``part`` as the user spelled it."""
    if isinstance(node, dict):
        if part not in node:
            raise UserError(f"--set {key}: {where} has no field {path!r} (check its spelling)")
        if node[part] is None:
            raise UserError(f"--set {key}: {where} has no {path!r} section to change")
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, key, path)]
    parent = path.rpartition(".")[0]
    raise UserError(f"--set {key}: {where} has no field {path!r} ({parent} is a value, not a section)")


def _index(items: list[Any], part: str, key: str, path: str) -> int:
    """``part`` as an index into the list at ``path``'s parent, or one line naming the valid ones."""
    parent, n = path.rpartition(".")[0], len(items)
    valid = (f"{parent} is empty" if n == 0 else
             f"{parent} has {n} {'entry' if n == 1 else 'entries'}, so give an index from 0 to {n - 1}")
    if not part.isdigit():
        raise UserError(f"--set {key}: {part!r} is not an index into {parent}; {valid}")
    if int(part) >= n:
        raise UserError(f"--set {key}: index {part} is out of range; {valid}")
    return int(part)


def assign(doc: dict[str, Any], key: str, value: Any, where: str, prefix: str = "") -> None:
    """Set the dotted ``key`` in ``doc`` (a model dump, which holds every field) to ``value``.
    ``prefix``: what the user wrote before ``key`` (``topology.``), so that an error quotes the
    key as they typed it."""
    shown = prefix + key
    parts = key.split(".")
    parent = _walk_to_parent(doc, parts, shown, where, prefix)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        parent[last] = value
    elif isinstance(parent, list):
        parent[_index(parent, last, shown, shown)] = value
    else:
        raise UserError(f"--set {shown}: {where} has no field {shown!r} (check its spelling)")


def _check_file(key: str, inner: str, doc: dict[str, Any], other: dict[str, Any], where: str, meant: str) -> None:
    """A key (``inner`` once its ``topology.`` is taken off) whose first field is not ``doc``'s but
    the other file's: one line saying which key the user meant (``links.0.loss`` ->
    ``topology.links.0.loss``), not just that it is unknown."""
    head = inner.split(".")[0]
    if head not in doc and head in other:
        raise UserError(f"--set {key}: {where} has no field {head!r}; it is the "
                        f"{'topology' if meant.startswith('topology.') else 'experiment'}'s: did you mean {meant}?")


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg'].removeprefix('Value error, ')}"


TDF_RULE = "a time dilation factor is a number >= 1 or auto"


def time_dilation_value(value: Any, shown: str) -> float | Literal["auto"]:
    """``value`` as the experiment's ``time_dilation`` holds it: a finite number >= 1 or "auto",
    also given as text (``--tdf 2``, ``--tdf auto``); else a UserError, ``shown`` (what the user
    wrote: ``--tdf 0.5``) followed by the rule."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "auto":
            return "auto"
        try:
            value = float(text)
        except ValueError:
            raise UserError(f"{shown}: {TDF_RULE}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
        raise UserError(f"{shown}: {TDF_RULE}")
    return float(value)


def dilated(loaded: LoadedExperiment, time_dilation: float | str | None) -> LoadedExperiment:
    """``loaded`` at time dilation ``time_dilation`` (a number >= 1 or "auto", as if its YAML said
    so: ``--tdf``, the API's ``time_dilation``), validated; ``loaded`` itself for None."""
    if time_dilation is None:
        return loaded
    return make_point(loaded, {"time_dilation": time_dilation_value(time_dilation,
                                                                     f"time_dilation={time_dilation!r}")}).loaded


def make_point(base: LoadedExperiment, params: dict[str, Any]) -> Point:
    """The experiment with ``params`` applied, validated as a YAML file would be."""
    exp_doc = base.experiment.model_dump(mode="json")
    topo_doc = base.topology.model_dump(mode="json")
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    if "time_dilation" in params:   # one line with the rule, not pydantic's per-variant message
        time_dilation_value(params["time_dilation"], f"--set {shown}")
    for key, value in params.items():
        if key == "topology":
            topo_doc = load_topology(Path(base.path).parent / str(value)).model_dump(mode="json")
            exp_doc["topology"] = str(value)
    for key, value in params.items():
        if key.startswith("topology."):
            inner = key.removeprefix("topology.")
            _check_file(key, inner, topo_doc, exp_doc, "the topology", inner)
            assign(topo_doc, inner, copy.deepcopy(value), "the topology", prefix="topology.")
        elif key != "topology":
            _check_file(key, key, exp_doc, topo_doc, "the experiment", f"topology.{key}")
            assign(exp_doc, key, copy.deepcopy(value), "the experiment")
    try:
        exp = Experiment.model_validate(exp_doc)
        topo = Topology.model_validate(topo_doc)
    except ValidationError as e:
        raise UserError(f"--set {shown}: {_first_error(e)}") from None
    cross_check(Path(f"--set {shown}"), exp, topo)
    return Point(dict(params), LoadedExperiment(experiment=exp, topology=topo, path=base.path))


def make_points(base: LoadedExperiment, sets: dict[str, list[Any]]) -> list[Point]:
    """Every combination of the swept values (the cross product), each validated."""
    keys = list(sets)
    return [make_point(base, dict(zip(keys, combo))) for combo in itertools.product(*(sets[k] for k in keys))]


def parse_sets(options: list[str]) -> dict[str, list[Any]]:
    sets: dict[str, list[Any]] = {}
    for option in options:
        key, values = parse_set(option)
        if key in sets:
            raise UserError(f"--set {key}: given twice; list every value in one --set {key}=V1,V2")
        sets[key] = values
    return sets
