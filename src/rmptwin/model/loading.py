"""Reading spec YAML: one ``UserError`` line per problem, and JSON Schemas for editors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rmptwin.core.striping import serves_stripe
from rmptwin.errors import UserError
from rmptwin.model.experiment import Experiment, LoadedExperiment
from rmptwin.model.hosts import ROLES
from rmptwin.model.role_checks import Finding, experiment_errors, topology_errors
from rmptwin.model.topology import Topology
from rmptwin.model.traces import fill_traces


def _line_index(text: str) -> dict[tuple[str | int, ...], int]:
    """Map each YAML path (tuple of keys/indices) to its 1-based line number."""
    lines: dict[tuple[str | int, ...], int] = {}

    def walk(node: Any, path: tuple[str | int, ...]) -> None:   # node: a yaml Node
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                lines[path + (key,)] = k.start_mark.line + 1
                walk(v, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, path + (i,))

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return lines
    if root is not None:
        walk(root, ())
    return lines


def read_yaml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"{path}{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a YAML mapping at the top level")
    return data, text


def _quoted_value_line(text: str, msg: str) -> int | None:
    """The line of the first YAML scalar equal to a value the message quotes ('s9'): where a
    whole-model check (an unknown switch, a duplicate name) points, rather than line 1."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    scalars: dict[str, int] = {}
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            line = node.start_mark.line + 1
            scalars[node.value] = min(line, scalars.get(node.value, line))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(v for _, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    for quoted in re.findall(r"'([^']+)'", msg):
        if quoted in scalars:
            return scalars[quoted]
    return None


def _validation_message(path: Path, text: str, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p in ROLES + ("bernoulli", "gilbert_elliott", "trace")))
    lines = _line_index(text)
    line = None
    for cut in range(len(loc), 0, -1):
        if loc[:cut] in lines:
            line = lines[loc[:cut]]
            break
    if line is None:
        line = _quoted_value_line(text, first["msg"])
    field = ".".join(str(p) for p in loc) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field (check its spelling)"
    elif first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        field += "." + first["ctx"]["discriminator"].strip("'")
        msg = f"unknown or missing; expected one of: {first['ctx'].get('expected_tags', '')}"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    where = f":{line}" if line else ""
    return f"{path}{where}: {field}: {msg}{more}"


# Top-level fields only one kind of file has: a wrong kind of file is named as such, not
# reported as a list of missing fields.
_TOPOLOGY_ONLY = ("switches", "links", "hosts")
_EXPERIMENT_ONLY = ("topology", "protocol", "workload")


def _wrong_kind(path: Path, data: dict[str, Any], expected: str) -> None:
    if expected == "experiment" and "topology" not in data and any(k in data for k in _TOPOLOGY_ONLY):
        raise UserError(f"{path}: this is a topology file; give an experiment (a YAML whose 'topology:' names "
                        "a topology file, e.g. experiments/quickstart.yaml)")
    if expected == "topology" and any(k in data for k in _EXPERIMENT_ONLY) and "switches" not in data:
        raise UserError(f"{path}: this is an experiment file; give a topology (the file its 'topology:' names)")


def load_topology(path: str | Path) -> Topology:
    path = Path(path)
    data, text = read_yaml(path)
    _wrong_kind(path, data, "topology")
    fill_traces(data, path)
    try:
        topo = Topology.model_validate(data)
    except ValidationError as e:
        raise UserError(_validation_message(path, text, e)) from None
    _reject_first(path, text, topology_errors(topo))
    return topo


def load_experiment(path: str | Path) -> LoadedExperiment:
    path = Path(path)
    data, text = read_yaml(path)
    _wrong_kind(path, data, "experiment")
    fill_traces(data, path)
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as e:
        raise UserError(_validation_message(path, text, e)) from None
    topo_path = (path.parent / exp.topology).resolve()
    if not topo_path.is_file():
        line = _line_index(text).get(("topology",))
        raise UserError(f"{path}{f':{line}' if line else ''}: topology: {exp.topology!r} names no file "
                        f"({topo_path}; a relative path is read from the experiment's directory)")
    topo = load_topology(topo_path)
    cross_check(path, exp, topo)
    loaded = LoadedExperiment(experiment=exp, topology=topo, path=path.resolve())
    from rmptwin.model.queries import customer_stripes  # queries import this package: at call time
    _reject_first(path, text, experiment_errors(exp, topo, lambda h: customer_stripes(h, loaded)))
    return loaded


def finding_line(path: Path, text: str, finding: Finding) -> str:
    """``file:line: field: problem`` of a ``role_checks`` finding."""
    lines = _line_index(text)
    line = next((lines[finding.path[:cut]] for cut in range(len(finding.path), 0, -1)
                 if finding.path[:cut] in lines), None)
    where = f":{line}" if line else ""
    return f"{path}{where}: {finding.field}: {finding.message}"


def _reject_first(path: Path, text: str, findings: list[Finding]) -> None:
    if findings:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise UserError(finding_line(path, text, findings[0]) + more)


def cross_check(path: Path, exp: Experiment, topo: Topology) -> None:  # noqa: C901 - one check per cross-reference a user can get wrong, each one line
    names = {h.name for h in topo.hosts}
    link_names = {lk.name for lk in topo.links} | {f"{lk.b}-{lk.a}" for lk in topo.links}
    sources = {h.name for h in topo.hosts_with_role("source")}
    for s in exp.workload.sources or []:
        if s not in sources:
            raise UserError(f"{path}: workload.sources: {s!r} is not a source host of {topo.name}")
    for i, f in enumerate(exp.faults):
        if f.node and f.node not in names:
            raise UserError(f"{path}: faults.{i}.node: unknown host {f.node!r}")
        if f.link and f.link not in link_names:
            raise UserError(f"{path}: faults.{i}.link: unknown link {f.link!r} (write it as 'a-b')")
        if f.member is not None:
            host = next((h for h in topo.hosts if h.name == f.node), None)
            if host is None or host.role != "sequencer" or exp.venue is None or exp.venue.sequencer != "etcd":
                raise UserError(f"{path}: faults.{i}.member: only a sequencer host of a 'sequencer: etcd' venue "
                                f"runs etcd members")
        for sw in [sw for g in (f.groups or []) for sw in g]:
            if sw not in topo.switches:
                raise UserError(f"{path}: faults.{i}.groups: unknown switch {sw!r}")
    for n in exp.clocks:
        if n not in names:
            raise UserError(f"{path}: clocks.{n}: unknown host")
    for h in topo.hosts:
        if h.role == "customer" and exp.workload.edge_stripes is not None:
            continue   # a customer names edge stripes, numbered after the core ones (spec.queries.customer_stripes checks)
        for k in getattr(h, "stripes", None) or []:
            if k >= exp.workload.stripes:
                raise UserError(
                    f"{path}: host {h.name} names stripe {k} but workload.stripes is {exp.workload.stripes}"
                )
    _check_floor_primaries(path, exp, topo)
    _check_standby(path, exp, topo)


def _check_standby(path: Path, exp: Experiment, topo: Topology) -> None:
    """A standby EV (the last venue host) needs a live EV beside it and the HR's multicasts to follow."""
    if exp.venue is None or not exp.venue.standby:
        return
    if len(topo.hosts_with_role("venue")) < 2:
        raise UserError(f"{path}: venue.standby: the last venue host stands by, so the topology needs at least "
                        f"two venue hosts ({topo.name} has {len(topo.hosts_with_role('venue'))})")
    if not topo.hosts_with_role("history"):
        raise UserError(f"{path}: venue.standby: a standby EV follows the history recorder's HARDENED "
                        f"multicasts, and {topo.name} has no history host")


def _check_floor_primaries(path: Path, exp: Experiment, topo: Topology) -> None:
    """A participant's ``primary`` must be an R_P of the floor's ring (the primaries serving
    the floor's stripe). A missing ``floor:`` section, a stripe out of range or a floor with
    no primaries are the floor factory's errors (``factories.floor.floor_spec``)."""
    fl = exp.floor
    if fl is None or fl.stripe >= exp.workload.stripes:
        return
    ring = [h.name for h in topo.hosts_with_role("primary") if serves_stripe(h.stripes, fl.stripe)]
    for h in topo.hosts_with_role("participant"):
        if ring and h.primary is not None and h.primary not in ring:
            raise UserError(f"{path}: participant {h.name}: primary {h.primary!r} is not a primary of the "
                            f"floor's ring (stripe {fl.stripe}); use one of: {', '.join(ring)}, or leave it "
                            "out for the first")


def json_schemas() -> dict[str, dict[str, Any]]:
    """One standalone JSON Schema (draft 2020-12) per YAML kind, for editors.

    ``schemas/<kind>.schema.json`` are these, as ``rmptwin schema <kind>`` prints them. Two
    fixes make a schema accept what the loader accepts: a bare number is a loss
    (``_coerce_loss`` makes it Bernoulli before validation, where pydantic's schema cannot
    see it), and a tagged union's tag is required even where it has a default (pydantic
    needs the tag to pick the variant).
    """
    bare_loss = {"type": "number", "minimum": 0, "maximum": 1, "description": "Bernoulli loss probability"}

    def tagged_unions(node: Any) -> Iterator[dict[str, Any]]:   # node: JSON Schema data
        if isinstance(node, dict) and "discriminator" in node:
            yield node["discriminator"]
        for child in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
            yield from tagged_unions(child)

    schemas = {}
    for kind, model, where in (("topology", Topology, "topologies"), ("experiment", Experiment, "experiments")):
        body = model.model_json_schema()
        defs = body.get("$defs", {})
        for union in list(tagged_unions(body)):
            for ref in union["mapping"].values():
                variant = defs[ref.removeprefix("#/$defs/")]
                required = variant.get("required", [])
                if union["propertyName"] not in required:
                    variant["required"] = [union["propertyName"], *required]
        for definition in defs.values():
            loss = definition.get("properties", {}).get("loss")
            if loss is not None:
                keep = {k: loss.pop(k) for k in ("title", "default", "description") if k in loss}
                definition["properties"]["loss"] = {"anyOf": [bare_loss, *loss.pop("anyOf", [loss])], **keep}
        body.pop("title", None)
        schemas[kind] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:rmptwin:schema:{kind}",
            "title": f"rmptwin {kind}",
            "description": f"An rmptwin {kind} file ({where}/*.yaml).",
            "$comment": f"Generated from rmptwin.model.{model.__name__}: regenerate with "
                        f"`rmptwin schema {kind} > schemas/{kind}.schema.json`.",
            **body,
        }
    return schemas
