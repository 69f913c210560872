"""Topology and experiment specifications (YAML in topologies/ and experiments/).

Every model forbids unknown fields, so a typo is an error and not a silently ignored
setting. ``load_topology`` / ``load_experiment`` turn any problem into one
``UserError`` line naming the file, the field, its line where known, and what is
expected.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import UserError
from .rmp.timing import token_passing_time_ms


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- links


class Bernoulli(_Model):
    """Independent loss with probability ``p`` per packet."""

    model: Literal["bernoulli"] = "bernoulli"
    p: float = Field(0.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        return self.p


class GilbertElliott(_Model):
    """Two-state burst loss: Good->Bad with ``p_gb``, Bad->Good with ``p_bg`` per packet."""

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p_gb: float = Field(ge=0.0, le=1.0)
    p_bg: float = Field(gt=0.0, le=1.0)
    loss_good: float = Field(0.0, ge=0.0, le=1.0)
    loss_bad: float = Field(1.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        """Stationary loss rate."""
        pi_bad = self.p_gb / (self.p_gb + self.p_bg)
        return (1 - pi_bad) * self.loss_good + pi_bad * self.loss_bad


LossModel = Annotated[Union[Bernoulli, GilbertElliott], Field(discriminator="model")]


def _coerce_loss(v):
    """A bare number means Bernoulli loss with that probability."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"model": "bernoulli", "p": v}
    return v


class LinkParams(_Model):
    delay_ms: float = Field(0.0, ge=0.0, description="one-way propagation delay")
    jitter_ms: float = Field(0.0, ge=0.0, description="uniform extra delay in [0, jitter] (no reordering)")
    loss: LossModel = Field(default_factory=Bernoulli)
    bandwidth_mbps: float | None = Field(None, gt=0.0, description="None: unlimited")
    queue_packets: int | None = Field(
        None, ge=1, description="None: sized from delay x bandwidth (at least 1000 packets)"
    )

    _coerce = field_validator("loss", mode="before")(_coerce_loss)

    def queue_limit(self, mtu_bytes: int = 1500) -> int:
        """Queue limit in packets: configured, else bandwidth-delay product with headroom.

        Long fat links must not drop what was never configured, so the default holds
        at least 2 x BDP and never fewer than 1000 packets.
        """
        if self.queue_packets is not None:
            return self.queue_packets
        if self.bandwidth_mbps is None:
            return 1000
        bdp_bytes = self.bandwidth_mbps * 1e6 / 8 * max(self.delay_ms + self.jitter_ms, 1.0) / 1e3
        return max(1000, math.ceil(2 * bdp_bytes / mtu_bytes))


class LinkSpec(LinkParams):
    a: str
    b: str

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


# ----------------------------------------------------------------------------- hosts

Grade = Literal["guaranteed", "best_effort"]


class _Host(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,9}$", description="short: it names Mininet interfaces")
    switch: str
    link: LinkParams = Field(default_factory=LinkParams, description="access link to its switch")


class SourceHost(_Host):
    role: Literal["source"]
    stripes: list[int] | None = Field(None, description="stripes it publishes on; None: all")


class PrimaryHost(_Host):
    """R_P: member of the primary token ring of each of its stripes."""

    role: Literal["primary"]
    regions: list[str] = Field(default_factory=list, description="regional groups it remulticasts to")
    stripes: list[int] | None = None


class SecondaryHost(_Host):
    """R_S: hears the same stream, NACKs its assigned R_P, passes a secondary token."""

    role: Literal["secondary"]
    primary: str = Field(description="the R_P it NACKs; that R_P is also in its secondary ring")
    ring: str = Field(description="secondary ring name (R_S of one ring share it)")
    regions: list[str] = Field(default_factory=list)
    stripes: list[int] | None = None


class RetransmitHost(_Host):
    """R_x: caches a regional remulticast and answers customers' re-requests."""

    role: Literal["retransmit"]
    regions: list[str] = Field(min_length=1)


class ReformationHost(_Host):
    role: Literal["reformation"]


class CustomerHost(_Host):
    role: Literal["customer"]
    regions: list[str] = Field(min_length=1, description="regional groups it listens to (overlap allowed)")
    grade: Grade = "guaranteed"
    retransmit: str | None = Field(None, description="R_x it re-requests from (guaranteed grade)")
    stripes: list[int] | None = Field(None, description="stripes it joins; None: all")


class GatewayHost(_Host):
    role: Literal["gateway"]


class VenueHost(_Host):
    role: Literal["venue"]


class SequencerHost(_Host):
    role: Literal["sequencer"]


class HistoryHost(_Host):
    role: Literal["history"]


class ClientHost(_Host):
    role: Literal["client"]
    gateway: str | None = None


HostSpec = Annotated[
    Union[
        SourceHost, PrimaryHost, SecondaryHost, RetransmitHost, ReformationHost, CustomerHost,
        GatewayHost, VenueHost, SequencerHost, HistoryHost, ClientHost,
    ],
    Field(discriminator="role"),
]

ROLES = (
    "source", "primary", "secondary", "retransmit", "reformation", "customer",
    "gateway", "venue", "sequencer", "history", "client",
)


# ----------------------------------------------------------------------------- topology


class Topology(_Model):
    name: str
    switches: list[str] = Field(min_length=1)
    regions: dict[str, list[str]] = Field(default_factory=dict, description="region -> its switches")
    links: list[LinkSpec] = Field(default_factory=list)
    hosts: list[HostSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> "Topology":
        sw = set(self.switches)
        if len(sw) != len(self.switches):
            raise ValueError("switch names must be unique")
        for region, members in self.regions.items():
            for s in members:
                if s not in sw:
                    raise ValueError(f"region {region!r} names unknown switch {s!r}")
        seen_links = set()
        for link in self.links:
            for end in (link.a, link.b):
                if end not in sw:
                    raise ValueError(f"link {link.name} names unknown switch {end!r}")
            key = frozenset((link.a, link.b))
            if link.a == link.b or key in seen_links:
                raise ValueError(f"link {link.name} is a self-loop or a duplicate")
            seen_links.add(key)
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be unique")
        if set(names) & sw:
            raise ValueError("a host and a switch share a name")
        by_name = {h.name: h for h in self.hosts}
        for h in self.hosts:
            if h.switch not in sw:
                raise ValueError(f"host {h.name} is attached to unknown switch {h.switch!r}")
            for r in getattr(h, "regions", []):
                if r not in self.regions:
                    raise ValueError(f"host {h.name} names unknown region {r!r}")
            if isinstance(h, SecondaryHost) and not isinstance(by_name.get(h.primary), PrimaryHost):
                raise ValueError(f"secondary {h.name}: primary {h.primary!r} is not a primary host")
            if isinstance(h, CustomerHost) and h.retransmit is not None:
                if not isinstance(by_name.get(h.retransmit), RetransmitHost):
                    raise ValueError(f"customer {h.name}: retransmit {h.retransmit!r} is not a retransmit host")
        if not _connected(self.switches, self.links):
            raise ValueError("the switches do not form one connected network")
        return self

    def hosts_with_role(self, role: str) -> list:
        return [h for h in self.hosts if h.role == role]

    def host(self, name: str):
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def link(self, a: str, b: str) -> LinkSpec:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError(f"{a}-{b}")


def _connected(switches: list[str], links: list[LinkSpec]) -> bool:
    adj: dict[str, set[str]] = {s: set() for s in switches}
    for link in links:
        adj[link.a].add(link.b)
        adj[link.b].add(link.a)
    seen, todo = {switches[0]}, [switches[0]]
    while todo:
        for n in adj[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return len(seen) == len(switches)


# ----------------------------------------------------------------------------- experiment


class Protocol(_Model):
    token_mode: Literal["time_driven", "event_driven"] = "time_driven"
    dn_ms: float = Field(75.0, gt=0, description="deltaN: delay after which a message is presumed lost")
    k_r: int = Field(3, ge=1, description="request attempts before declaring a failure")
    x_ms: float = Field(0.0, ge=0, description="X: time to transmit a request and its response")
    p_ms: float = Field(10.0, ge=0, description="P: time to process a request and its response")
    tau_t_ms: float | None = Field(None, gt=0, description="token period; None: the seed's formula")
    tau_r_ms: float | None = Field(None, gt=0, description="request resend interval; None: 2 dN + X + P")
    delta_a_ms: float | None = Field(None, ge=0, description="delayed delivery; None: tau_t")
    k_p: int | None = Field(None, ge=1, description="NACK reduction request sets (seed 5.2); None: off")
    batch_limit: int = Field(256, ge=1, description="most source messages one ack may acknowledge")
    null_token_ms: float | None = Field(
        None, gt=0, description="event-driven idle interval before a null token; None: tau_t"
    )
    start_policy: Literal["ticker", "conservative"] = "ticker"
    delivery: Literal["agreed", "safe"] = Field(
        "agreed", description="agreed: deliver on acknowledgement (the seed's ticker); safe: only once the "
        "token has gone round the ring since (stable), with rings formed from a majority of the primaries")

    @property
    def tau_t(self) -> float:
        if self.tau_t_ms is not None:
            return self.tau_t_ms
        return token_passing_time_ms(self.dn_ms, self.k_r, self.x_ms, self.p_ms)

    @property
    def tau_r(self) -> float:
        return self.tau_r_ms if self.tau_r_ms is not None else 2 * self.dn_ms + self.x_ms + self.p_ms

    @property
    def delta_a(self) -> float:
        return self.delta_a_ms if self.delta_a_ms is not None else self.tau_t

    @property
    def null_token(self) -> float:
        return self.null_token_ms if self.null_token_ms is not None else self.tau_t


class Workload(_Model):
    sources: list[str] | None = Field(None, description="source hosts; None: every source host")
    rate_per_source: float = Field(100.0, ge=0, description="messages per second per source")
    arrival: Literal["constant", "poisson"] = "poisson"
    message_bytes: int = Field(64, ge=16, le=1400)
    stripes: int = Field(1, ge=1)
    symbols: int = Field(20, ge=1, description="stocks; symbol i goes on stripe i mod stripes")
    start_s: float = Field(0.5, ge=0)
    duration_s: float = Field(5.0, gt=0, description="how long sources publish")


class Fault(_Model):
    at_s: float = Field(ge=0)
    action: Literal["crash", "recover", "link_down", "link_up", "loss"]
    node: str | None = None
    link: str | None = Field(None, description="'a-b' as in the topology")
    loss: LossModel | None = None

    _coerce = field_validator("loss", mode="before")(_coerce_loss)

    @model_validator(mode="after")
    def _target(self) -> "Fault":
        if self.action in ("crash", "recover") and not self.node:
            raise ValueError(f"{self.action} needs node")
        if self.action in ("link_down", "link_up", "loss") and not self.link:
            raise ValueError(f"{self.action} needs link")
        if self.action == "loss" and self.loss is None:
            raise ValueError("loss needs loss (a probability or a loss model)")
        return self


class Clock(_Model):
    offset_ms: float = 0.0
    drift_ppm: float = 0.0


class VenueWorkload(_Model):
    """Exchange-venue load (issue: exchange venues). Unused by pure-RMP experiments."""

    rate: float = Field(1000.0, gt=0, description="requests per second over all gateways")
    symbols: list[str] = Field(default_factory=lambda: ["IBM"])
    sequencer: Literal["cas", "none", "etcd"] = Field(
        "cas", description="cas: in-memory CAS sequencer host; etcd: in a real run the sequencer host runs a "
                           "3-member etcd cluster (the simulator models it as cas); none: arrival order (1 GW)")
    durable_history: bool = True
    checkpoint_every: int = Field(1000, ge=1)
    window: int = Field(1024, ge=1, description="sequencer sliding window (positions)")
    start_s: float = Field(0.5, ge=0)
    duration_s: float = Field(5.0, gt=0)
    tick: int = Field(100, ge=1, description="price tick in ticker units (price x 10,000): 100 = one cent")
    ev_service_us: float = Field(60.0, ge=0, description="mean EV execution time per request (exponential)")
    gw_fsync_us: float = Field(100.0, ge=0, description="gateway log fsync latency (group fsync)")
    hr_commit_us: float = Field(300.0, ge=0, description="history-recorder group-commit latency when durable")
    lookahead: int = Field(64, ge=1, description="positions an EV may order ahead of what it executed")
    malformed_fraction: float = Field(0.0, ge=0, le=1, description="share of deliberately bad orders")


class Experiment(_Model):
    name: str
    description: str = ""
    topology: str = Field(description="topology YAML, relative to the experiment file")
    seed: int = 1
    backend: Literal["sim", "emulation"] = "sim"
    duration_s: float = Field(10.0, gt=0, description="total run time, including the drain after the workload")
    protocol: Protocol = Field(default_factory=Protocol)
    workload: Workload = Field(default_factory=Workload)
    venue: VenueWorkload | None = None
    faults: list[Fault] = Field(default_factory=list)
    clocks: dict[str, Clock] = Field(default_factory=dict)


class LoadedExperiment(BaseModel):
    """An experiment with its topology resolved and cross-checked."""

    model_config = ConfigDict(frozen=True)
    experiment: Experiment
    topology: Topology
    path: Path

    def to_manifest(self) -> dict:
        return {
            "experiment": self.experiment.model_dump(mode="json"),
            "topology": self.topology.model_dump(mode="json"),
            "experiment_file": str(self.path),
        }


# ----------------------------------------------------------------------------- loading


def _line_index(text: str) -> dict[tuple, int]:
    """Map each YAML path (tuple of keys/indices) to its 1-based line number."""
    lines: dict[tuple, int] = {}

    def walk(node, path):
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


def _read_yaml(path: Path) -> tuple[dict, str]:
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


def _validation_message(path: Path, text: str, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p in ROLES + ("bernoulli", "gilbert_elliott")))
    lines = _line_index(text)
    line = None
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            line = lines[loc[:cut]]
            break
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


def load_topology(path: str | Path) -> Topology:
    path = Path(path)
    data, text = _read_yaml(path)
    try:
        return Topology.model_validate(data)
    except ValidationError as e:
        raise UserError(_validation_message(path, text, e)) from None


def load_experiment(path: str | Path) -> LoadedExperiment:
    path = Path(path)
    data, text = _read_yaml(path)
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as e:
        raise UserError(_validation_message(path, text, e)) from None
    topo = load_topology((path.parent / exp.topology).resolve())
    _cross_check(path, exp, topo)
    return LoadedExperiment(experiment=exp, topology=topo, path=path.resolve())


def _cross_check(path: Path, exp: Experiment, topo: Topology) -> None:
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
    for n in exp.clocks:
        if n not in names:
            raise UserError(f"{path}: clocks.{n}: unknown host")
    for h in topo.hosts:
        for k in getattr(h, "stripes", None) or []:
            if k >= exp.workload.stripes:
                raise UserError(
                    f"{path}: host {h.name} names stripe {k} but workload.stripes is {exp.workload.stripes}"
                )


def json_schemas() -> dict[str, dict]:
    """One standalone JSON Schema (draft 2020-12) per YAML kind, for editors.

    ``schemas/<kind>.schema.json`` are these, as ``rmptwin schema <kind>`` prints them. Two
    fixes make a schema accept what the loader accepts: a bare number is a loss
    (``_coerce_loss`` makes it Bernoulli before validation, where pydantic's schema cannot
    see it), and a tagged union's tag is required even where it has a default (pydantic
    needs the tag to pick the variant).
    """
    bare_loss = {"type": "number", "minimum": 0, "maximum": 1, "description": "Bernoulli loss probability"}

    def tagged_unions(node):
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
            "$comment": f"Generated from rmptwin.spec.{model.__name__}: regenerate with "
                        f"`rmptwin schema {kind} > schemas/{kind}.schema.json`.",
            **body,
        }
    return schemas
