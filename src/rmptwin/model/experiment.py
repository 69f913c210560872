"""An experiment: protocol parameters, workload, venue load, faults and clocks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rmptwin.core.timing import token_passing_time_ms
from rmptwin.model._base import _Model
from rmptwin.model.links import LossModel, _coerce_loss
from rmptwin.model.topology import Topology


class Protocol(_Model):
    token_mode: Literal["time_driven", "event_driven"] = "time_driven"
    dn_ms: float = Field(default=75.0, gt=0, description="deltaN: delay after which a message is presumed lost")
    k_r: int = Field(default=3, ge=1, description="request attempts before declaring a failure")
    x_ms: float = Field(default=0.0, ge=0, description="X: time to transmit a request and its response")
    p_ms: float = Field(default=10.0, ge=0, description="P: time to process a request and its response")
    tau_t_ms: float | None = Field(default=None, gt=0, description="token period; None: the seed's formula")
    tau_r_ms: float | None = Field(default=None, gt=0, description="request resend interval; None: 2 dN + X + P")
    delta_a_ms: float | None = Field(default=None, ge=0, description="delayed delivery; None: tau_t")
    k_p: int | None = Field(default=None, ge=1, description="NACK reduction request sets (seed 5.2); None: off")
    batch_limit: int = Field(default=256, ge=1, description="most source messages one ack may acknowledge")
    null_token_ms: float | None = Field(
        default=None, gt=0, description="event-driven idle interval before a null token; None: tau_t"
    )
    start_policy: Literal["ticker", "conservative"] = "ticker"
    stale_heartbeats: int = Field(
        default=3, ge=1, description="a customer that hears neither data nor a heartbeat from an R_T on a stripe for "
        "this many R_T heartbeat intervals raises a stale_feed alarm (and, if guaranteed, polls its R_x)")
    delivery: Literal["agreed", "safe"] = Field(
        default="agreed", description="agreed: deliver on acknowledgement (the seed's ticker); safe: only once the "
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


class EdgeStripes(_Model):
    """Narrow edge stripes (RMP seed 4.4): each R_T re-cuts its core stripe for customers."""

    line_kbps: float = Field(gt=0, description="the slowest customer line the edge stripes are sized for "
                             "(56: a 56 Kbps modem picks any one edge stripe)")
    related: Literal["adjacent"] = Field(
        default="adjacent", description="which stocks are related: adjacent symbol numbers (a sector is a run of "
        "consecutive numbers); each edge stripe takes the next symbols of its core stripe that fit the line")


class Workload(_Model):
    sources: list[str] | None = Field(default=None, description="source hosts; None: every source host")
    rate_per_source: float = Field(default=100.0, ge=0, description="messages per second per source")
    arrival: Literal["constant", "poisson"] = "poisson"
    message_bytes: int = Field(default=64, ge=16, le=1400)
    stripes: int = Field(default=1, ge=1)
    symbols: int = Field(default=20, ge=1, description="stocks; symbol i goes on stripe i mod stripes")
    start_s: float = Field(default=0.5, ge=0)
    duration_s: float = Field(default=5.0, gt=0, description="how long sources publish")
    edge_stripes: EdgeStripes | None = Field(
        default=None, description="re-cut each core stripe into narrow edge stripes at the R_T (seed 4.4); customers "
        "then join edge stripes: their `stripes` name edge stripe numbers (after the core ones)")


class Fault(_Model):
    """One fault of the schedule (a nemesis; ``rmptwin.core.nemesis`` expands each into timed steps,
    the same for both backends)."""

    at_s: float = Field(ge=0)
    action: Literal["crash", "recover", "link_down", "link_up", "loss", "partition", "heal", "pause", "clock",
                    "flap", "dup_reorder"] = Field(
        description="crash/recover: a node (kill -9; a new incarnation from its durable state); link_down/link_up/"
        "loss: a link; partition: the switches split into sets (groups) that cannot reach each other, healed after "
        "duration_s or by a heal; pause: a node stops for duration_s and resumes with its state (SIGSTOP/SIGCONT); "
        "clock: a node's clock jumps by jump_ms and/or its drift becomes drift_ppm; flap: a link goes down and up "
        "every period_ms for duration_s; dup_reorder: a link duplicates and/or reorders frames (for duration_s)")
    node: str | None = None
    link: str | None = Field(default=None, description="'a-b' as in the topology")
    loss: LossModel | None = None
    groups: list[list[str]] | None = Field(
        default=None, description="partition: sets of switches; the switches named in no set form one more set")
    duration_s: float | None = Field(default=None, gt=0, description="partition, pause, flap, dup_reorder: how long")
    jump_ms: float | None = Field(default=None, description="clock: step of the node's clock (negative: backwards)")
    drift_ppm: float | None = Field(default=None, description="clock: the node's new drift")
    period_ms: float | None = Field(default=None, gt=0, description="flap: time down, then time up, alternately")
    duplicate: float | None = Field(default=None, ge=0, le=1, description="dup_reorder: chance a frame arrives twice")
    reorder: float | None = Field(default=None, ge=0, le=1, description="dup_reorder: chance a frame is held back "
                                                                "(reorder_ms) and overtaken")
    reorder_ms: float = Field(default=20.0, ge=0, description="dup_reorder: how long a reordered frame is held back")
    member: int | None = Field(default=None, ge=0, description="pause of a sequencer host with sequencer: etcd: "
                                                               "only this etcd member (0-2) stops, not the host")

    _coerce = field_validator("loss", mode="before")(_coerce_loss)

    @model_validator(mode="after")
    def _target(self) -> Fault:
        a = self.action
        if a in ("crash", "recover", "pause", "clock") and not self.node:
            raise ValueError(f"{a} needs node")
        if a in ("link_down", "link_up", "loss", "flap", "dup_reorder") and not self.link:
            raise ValueError(f"{a} needs link")
        if a == "loss" and self.loss is None:
            raise ValueError("loss needs loss (a probability or a loss model)")
        if a == "partition":
            sets = [g for g in (self.groups or []) if g]
            if not sets:
                raise ValueError("partition needs groups: at least one set of switches (the rest form another)")
            named = [sw for g in sets for sw in g]
            if len(named) != len(set(named)):
                raise ValueError("partition: a switch is in two groups")
        if self.member is not None and a != "pause":
            raise ValueError("member is for pause (one etcd member of a sequencer host)")
        if a in ("pause", "flap") and self.duration_s is None:
            raise ValueError(f"{a} needs duration_s")
        if a == "flap" and self.period_ms is None:
            raise ValueError("flap needs period_ms")
        if a == "clock" and self.jump_ms is None and self.drift_ppm is None:
            raise ValueError("clock needs jump_ms or drift_ppm (or both)")
        if a == "dup_reorder" and not (self.duplicate or self.reorder):
            raise ValueError("dup_reorder needs duplicate or reorder (a probability above 0)")
        return self


class Clock(_Model):
    offset_ms: float = 0.0
    drift_ppm: float = 0.0


class VenueWorkload(_Model):
    """Exchange-venue load (issue: exchange venues). Unused by pure-RMP experiments."""

    rate: float = Field(default=1000.0, gt=0, description="requests per second over all gateways")
    symbols: list[str] = Field(default_factory=lambda: ["IBM"])
    sequencer: Literal["cas", "none", "etcd"] = Field(
        default="cas", description="cas: in-memory CAS sequencer host; etcd: in a real run the sequencer host runs a "
                           "3-member etcd cluster (the simulator models it as cas); none: arrival order (1 GW)")
    durable_history: bool = True
    checkpoint_every: int = Field(default=1000, ge=1)
    window: int = Field(default=1024, ge=1, description="sequencer sliding window (positions)")
    etcd_api: Literal["grpc", "json"] = Field(
        default="grpc", description="with sequencer: etcd, how the sequencer host's client asks etcd: grpc, its native "
                            "API (measured faster, docs/benchmarks.md), or json, its JSON gateway over HTTP/1.1")
    start_s: float = Field(default=0.5, ge=0)
    duration_s: float = Field(default=5.0, gt=0)
    tick: int = Field(default=100, ge=1, description="price tick in ticker units (price x 10,000): 100 = one cent")
    ev_service_us: float = Field(default=60.0, ge=0, description="mean EV execution time per request (exponential)")
    ev_replay_us: float = Field(
        default=1.0, ge=0, description="mean time a recovering EV takes to re-execute one request the history recorder "
        "already hardened (exponential): the matching alone, no per-message cost (the matching bench: ~0.6 us)")
    gw_fsync_us: float = Field(default=100.0, ge=0, description="gateway log fsync latency (group fsync)")
    hr_commit_us: float = Field(default=300.0, ge=0, description="history-recorder group-commit latency when durable")
    lookahead: int = Field(default=64, ge=1, description="positions an EV may order ahead of what it executed")
    standby: bool = Field(
        default=False,
        description="the topology's last venue host is a standby EV: it follows the live EVs' hardened order "
        "and executes it, silent, and is promoted when an EV crashes (no restart needed to stay at full strength); "
        "false: a crashed EV is only replaced by restarting it (recover)")
    malformed_fraction: float = Field(default=0.0, ge=0, le=1, description="share of deliberately bad orders")


class Security(_Model):
    """Seed 6 and 7.1: sealed sources, MACed control frames, regional re-encryption, graded repairs."""

    enabled: bool = Field(
        default=False, description="seal and authenticate the ticker (rmptwin.rmp.seal); off: in the clear")
    keys: str | None = Field(
        default=None, description="key file written by `rmptwin keys gen` (relative to the experiment file); None: "
        "$XDG_CONFIG_HOME/rmptwin/keys/<experiment name>.json (default ~/.config/...). Never inside results/")


class Orders(_Model):
    """Unified orders (seed 7.2; ``rmptwin.apps.unified_orders``): how offers enter, what traders decide."""

    entry: Literal["rmp", "direct"] = Field(
        default="rmp", description="rmp: traders -> their portal S_P -> the ring -> exchanges; direct: each trader "
        "sends its offer straight to the exchange by unicast (the unfair baseline)")
    portal_secret: str = Field(
        default="rmptwin-demo-portal-secret", min_length=8,
        description="key of the credentials: a trader's token is HMAC-SHA256(secret, account) (a demo value)")
    symbols: list[str] = Field(default_factory=lambda: ["IBM"], min_length=1,
                               description="listed stocks; symbol i goes on stripe i mod workload.stripes")
    decisions: int = Field(default=200, ge=1, description="paired decisions per pair of traders")
    start_s: float = Field(default=1.0, ge=0, description="when the first decision slot opens")
    interval_ms: float = Field(default=500.0, gt=0,
                               description="one decision per slot of this length, at a random instant")
    price: float = Field(default=100.0, gt=0, description="reference price of every offer")
    qty: int = Field(default=100, ge=1, description="shares per offer")
    rate_limit_per_s: float = Field(
        default=20.0, ge=0, description="offers per second an account may sustain at its portal; 0: no limit")
    burst: int = Field(default=5, ge=1, description="offers an idle account may send at once")

    @property
    def end_s(self) -> float:
        """When the last decision slot closes."""
        return self.start_s + self.decisions * self.interval_ms / 1000


class Taxonomy(_Model):
    """Sequencer taxonomy (seed sequencer-taxonomy; ``rmptwin.taxonomy``): which protocol the
    ``taxonomy_member`` hosts run. RMP and the CAS sequencer are compared through their own roles."""

    protocol: Literal["ub", "bb", "uub", "gup"] = Field(
        description="ub: unicast-broadcast; bb: broadcast-broadcast (ISIS FIFO NAK repair); "
                    "uub: unicast-unicast-broadcast; gup: Tandem global update protocol (locker)")
    sequencer: str | None = Field(default=None, description="member that sequences (holds the locker) first; None: the "
                                                     "first taxonomy_member; the others follow in topology order")
    heartbeat_ms: float = Field(default=10.0, gt=0, description="the sequencer's idle heartbeat")
    suspect_ms: float = Field(default=50.0, gt=0, description="silence after which members suspect the sequencer")
    nak_ms: float = Field(default=2.0, ge=0, description="how long a gap stands before it is NAKed")
    retry_ms: float = Field(default=20.0, gt=0, description="resend interval for anything unanswered")


class Floor(_Model):
    """The distributed trading floor (seed 7.3): its rule and its participants' orders."""

    rule: Literal["continuous", "second_price", "dutch"] = Field(
        default="continuous", description="continuous: price-time double auction with stop orders; second_price: "
        "single-round sealed high bid, the winner pays the second bid; dutch: descending clock (Amsterdam)")
    stripe: int = Field(default=0, ge=0, description="the stripe the floor's orders and reports travel on")
    symbols: int = Field(default=2, ge=1, description="stocks traded (F000, F001, ...)")
    order_rate: float = Field(default=2.0, ge=0, description="orders per second per participant (Poisson)")
    start_s: float = Field(default=0.5, ge=0, description="when participants start entering orders")
    duration_s: float = Field(default=5.0, gt=0, description="how long they enter orders")
    spread_ticks: int = Field(default=10, ge=1, description="limit prices lie within this many cents of the mid")
    stop_fraction: float = Field(default=0.1, ge=0, le=1, description="continuous: share of stop orders")
    market_fraction: float = Field(default=0.05, ge=0, le=1, description="continuous: share of market orders")
    sell_fraction: float = Field(default=0.2, ge=0, le=1,
                                 description="auctions: share of sell orders (each opens a lot)")
    round_passes: int = Field(default=4, ge=1, description="second_price: token passes a round stays open")
    dutch_start_ticks: int = Field(default=20, ge=1,
                                   description="dutch: the clock starts this many cents above the reserve")
    dutch_step_ticks: int = Field(default=1, ge=1, description="dutch: cents the clock falls per token pass")


class Experiment(_Model):
    name: str
    description: str = ""
    topology: str = Field(description="topology YAML, relative to the experiment file")
    seed: int = 1
    backend: Literal["sim", "emulation"] = "sim"
    duration_s: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        default="auto", description="total run time, including the drain after the workload; auto: the workload's "
        "end plus the drain the protocol's timers need (model.drain), and recovery time when faults are scheduled")
    time_dilation: Annotated[float, Field(ge=1.0)] | Literal["auto"] = Field(
        default=1.0, description="emulated runs: one second of run time lasts this many wall seconds for "
        "every node, link, workload and fault (virtual time: each process gets this many times the CPU per run "
        "second); auto: the smallest factor this host's calibration predicts on time (rmptwin plan); the "
        "simulator's time is virtual already and ignores it")
    protocol: Protocol = Field(default_factory=Protocol)
    workload: Workload = Field(default_factory=Workload)
    venue: VenueWorkload | None = None
    faults: list[Fault] = Field(default_factory=list)
    clocks: dict[str, Clock] = Field(default_factory=dict)
    taxonomy: Taxonomy | None = Field(default=None, description="sequencer-taxonomy protocol of taxonomy_member hosts")
    security: Security = Field(default_factory=Security)
    orders: Orders | None = Field(default=None, description="unified-orders workload (traders, portals, exchanges)")
    floor: Floor | None = Field(
        default=None, description="distributed trading floor (participant hosts; every primary arbitrates)")


class LoadedExperiment(BaseModel):
    """An experiment with its topology resolved and cross-checked."""

    model_config = ConfigDict(frozen=True)
    experiment: Experiment
    topology: Topology
    path: Path

    @property
    def duration_s(self) -> float:
        """How long the run lasts, in s: the experiment's ``duration_s``, or for ``auto`` the
        workload's end plus the drain its protocol needs (``model.drain.auto_duration_s``)."""
        d = self.experiment.duration_s
        if d == "auto":
            from rmptwin.model.drain import auto_duration_s  # drain reads this module: at call time
            return auto_duration_s(self.experiment, self.topology)
        return d

    @property
    def time_dilation(self) -> float:
        """The time dilation factor an emulated run runs at; ``auto`` must have been planned
        first (``with_time_dilation``: the runner asks ``planning`` for the number)."""
        f = self.experiment.time_dilation
        if f == "auto":
            raise ValueError("time_dilation auto: plan the run first (planning.plan_run), then with_time_dilation")
        return f

    def with_time_dilation(self, factor: float) -> LoadedExperiment:
        """This experiment at time dilation ``factor`` (what ``auto`` resolved to)."""
        return self.model_copy(update={"experiment": self.experiment.model_copy(update={"time_dilation": factor})})

    def to_manifest(self) -> dict[str, Any]:
        """What a run ran, ``auto`` resolved: a rerun lasts as long as the run did."""
        return {
            "experiment": {**self.experiment.model_dump(mode="json"), "duration_s": self.duration_s},
            "topology": self.topology.model_dump(mode="json"),
            "experiment_file": str(self.path),
        }

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any], path: Path | None = None) -> LoadedExperiment:
        """The experiment a manifest (``to_manifest``, a run's or a sweep task's) resolved;
        ``path`` where it says none."""
        return cls(experiment=Experiment.model_validate(manifest["experiment"]),
                   topology=Topology.model_validate(manifest["topology"]),
                   path=Path(manifest.get("experiment_file") or path or "manifest"))
