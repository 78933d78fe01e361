"""The pipeline's configuration: a frozen dataclass of values, validated on construction.

:class:`PipelineConfig` holds numbers, strings and tuples only. A placement is
stored in its value form (``(replica_domains, ((domain, outage), ...))``); the
:class:`topologies.placement.Placement` it describes is built after validation
by :attr:`PipelineConfig.domain_placement`, never stored on the config.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from topologies.placement import Placement, from_value, shared_per_stage

from ..analytic.penalty import PENALTIES, SkipPenalty, quality_table
from ..errors import (
    TIME_LIMIT,
    ConfigError,
    check,
    check_choice,
    check_int,
    check_memory,
    check_nonnegative,
    check_positive,
    check_probability,
    check_time_terms,
)
from ..failures import (
    MAX_TRANSITIONS,
    check_distribution,
    check_law,
    check_shape,
    check_transitions,
    cycle_rates,
    distribution_names,
)

__all__ = [
    "ARRIVALS",
    "PENALTIES",
    "STAGE_TIME_DISTRIBUTIONS",
    "stage_time_laws",
    "DEFAULT_REPLICAS",
    "PipelineConfig",
    "quality_table",
    "MAX_TRANSITIONS",
    "layout_hop_times",
    "on_layout",
]

ARRIVALS = ("fixed", "poisson", "back_to_back")

#: The built-in compute-time laws: constant, or a unit-mean duration law of
#: :mod:`sim.failures` (a law added there by ``register_distribution`` is accepted too).
STAGE_TIME_DISTRIBUTIONS = ("deterministic", "exponential", "weibull", "lognormal")


def stage_time_laws() -> tuple[str, ...]:
    """Every accepted ``stage_time_distribution``: "deterministic", then every duration law."""
    return ("deterministic", *(n for n in distribution_names() if n != "deterministic"))

#: Memory estimates (bytes, measured with tracemalloc): a config's per-stage tuples;
#: the DES's state per stage and per replica worker; per-microbatch records.
CONFIG_BYTES_PER_STAGE = 48
DES_BYTES_PER_STAGE = 2_500
DES_BYTES_PER_WORKER = 3_300
RECORD_BYTES_PER_MICROBATCH = 40

#: Replicas per stage when neither ``replicas`` nor a placement is given.
DEFAULT_REPLICAS = 3


def layout_hop_times(layout: Any, hosts: Sequence[Sequence[Any]],
                     transfer_size: float = 0.0) -> tuple[float, ...]:
    """Transfer time of each hop ``j -> j+1`` from a layout's links.

    Parameters
    ----------
    layout : networkx.Graph
        A layout (for example ``topologies.build("datacenter:...")``) whose edges
        carry ``latency`` and ``bandwidth``.
    hosts : sequence of sequence
        ``hosts[j]``: the layout nodes of stage ``j``'s replicas (a placement's ``hosts``).
    transfer_size : float
        Activation size sent per hop (>= 0).

    Returns
    -------
    tuple of float
        For each hop, ``latency + size/bandwidth`` averaged over every pair of
        a replica of stage ``j`` and a replica of stage ``j+1`` (zero for a
        pair on the same host); the serving replica is whichever is live, so
        the mean is the natural constant. Two hosts without a link of their
        own (a ``tree`` layout's, through its switches) are joined by the
        route of least total latency, as the placement's
        :attr:`~topologies.placement.Placement.stage_latency` takes it: its
        latencies add, and its bandwidth is the least on it.
    """
    size = check_nonnegative("transfer_size", transfer_size)
    out = []
    for a, b in zip(hosts[:-1], hosts[1:], strict=True):
        total = 0.0
        for u in a:
            for v in b:
                if u == v:
                    continue
                if layout.has_edge(u, v):
                    route = [u, v]
                else:
                    try:
                        route = nx.shortest_path(layout, u, v, weight="latency")
                    except (nx.NetworkXNoPath, nx.NodeNotFound):
                        raise ConfigError("topology", "a layout linking every pair of hosts "
                                          "(by a link or a route)",
                                          f"no route from {u!r} to {v!r}") from None
                edges = [layout.edges[x, y] for x, y in zip(route[:-1], route[1:], strict=True)]
                bw = min(float(e.get("bandwidth", math.inf)) for e in edges)
                total += sum(float(e.get("latency", 0.0)) for e in edges) + \
                    (size / bw if size else 0.0)
        out.append(total / (len(a) * len(b)))
    return tuple(out)


def _per_stage(name: str, value: Any, stages: int, conv: Callable[[str, Any], Any],
               count: int | None = None) -> tuple:
    """A scalar or one value per stage (``count`` values), each checked by ``conv``."""
    n = stages if count is None else count
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = tuple(value)
        what = "stage" if count is None else "hop"
        check(len(vals) == n, name, f"one value or {n} values (one per {what})", value)
        return tuple(conv(name, v) for v in vals)
    v = conv(name, value)
    return (v,) * n


def _count(name: str, value: Any) -> int:
    return check_int(name, value, low=1)


def _counts_text(counts: Sequence[int]) -> str:
    """``(3, 3, 3)`` -> ``"3 per stage"``; unequal counts as a comma list."""
    if len(set(counts)) == 1:
        return f"{counts[0]} per stage"
    return ",".join(map(str, counts))


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline experiment (validated on construction).

    Parameters
    ----------
    stages : int
        Number of stages ``L`` (>= 1).
    replicas : int, tuple of int or None
        Replicas per stage ``r`` (>= 1), one value or one per stage. ``None``
        (the default) means :data:`DEFAULT_REPLICAS` per stage, or the
        placement's counts when a placement is given; a value given together
        with a placement must equal the placement's counts (it is never
        silently overridden).
    skip_budget : int
        Stages a microbatch may skip, ``0 <= s <= L``.
    availability : float
        Each worker's own availability ``a``.
    domain_outage : float
        Unavailability ``rho`` of each stage's shared domain (default placement).
    skip_penalty : float
        Quality lost per skip, ``kappa`` in [0, 1].
    penalty : {"multiplicative", "additive"} or callable
        How quality falls with skips (see :class:`~sim.analytic.penalty.SkipPenalty`).
    mean_downtime : float
        Mean worker outage length (> 0).
    domain_downtime : float
        Mean domain outage length (> 0).
    failure_distribution : str
        Up/down duration law of workers and domains (see :mod:`sim.failures`).
    failure_shape : float or None
        Weibull shape or lognormal sigma of the failure law.
    stage_time : float or tuple of float
        Mean compute time per stage (>= 0; zero is the study's snapshot model).
    stage_time_distribution : str
        ``deterministic`` (constant), ``exponential``, ``weibull`` or ``lognormal``.
    stage_time_shape : float or None
        Weibull shape or lognormal sigma of the compute time.
    latency : float or tuple of float
        Transfer latency per hop between consecutive stages (``L - 1`` hops).
    transfer_size : float
        Activation size sent per hop (>= 0).
    bandwidth : float
        Link bandwidth (> 0, may be ``inf``); a hop takes ``latency + size/bandwidth``.
    microbatches : int
        Microbatches per replication (>= 1).
    arrival : {"fixed", "poisson", "back_to_back"}
        Arrivals every ``1/rate``, as a Poisson process of ``rate``, or each
        microbatch entering when the previous one leaves. Beware that with
        ``back_to_back`` a microbatch dropped (or skipping every stage) in zero
        time lets the next one enter at the same instant, where it meets the
        same outage: per-microbatch drop rates are then not comparable with
        the snapshot law. Use ``fixed`` or ``poisson`` to measure drop rates.
    rate : float
        Arrival rate (> 0) for ``fixed`` and ``poisson``.
    max_wait : float
        How long a microbatch waits at an out stage when its budget is spent
        (>= 0, may be ``inf``; 0 is the study's rule: drop at once).
    detection_timeout : float
        Time to detect a failed replica before failing over (>= 0).
    placement : Placement, pair, or None
        Failure domains of each replica; ``None`` is the study's placement.
        A :class:`topologies.placement.Placement` or a pair
        ``(replica_domains, domain_outage)`` is accepted and stored in its value
        form (:meth:`~topologies.placement.Placement.value`). When given it
        fixes ``replicas`` (which must then be ``None`` or agree with it) and
        ``domain_outage`` is ignored.
    records : bool
        Keep per-microbatch records in preallocated arrays.
    trace : bool
        Keep an event trace ``(time, microbatch, event, stage, replica)``.
    failure_trace : sim.traces.TraceReplay or None
        Replay a real preemption trace as the workers' own up/down states
        (``availability``, ``mean_downtime``, ``failure_distribution`` and
        ``failure_shape`` then do not apply to workers; domains keep their
        own outages). Workers take trace slots in stage order (stage ``j``'s
        replicas are slots ``j r .. j r + r - 1``), and the ``domain`` policy's
        domains are the stages; a trace whose instances are all named as the
        workers ``s{j}r{i}`` or their hosts is replayed by name (:attr:`trace_names`). A run that outlasts a trace that does not loop
        stops with :class:`sim.traces.TraceEnded`.
    queueing : bool
        Replicas are servers (:mod:`sim.pipeline.queueing`): each serves one
        pass at a time, taking ``stage_time / speed``, and microbatches wait
        in queues, routed by ``routing``; off (the default), a replica serves
        every microbatch that reaches it at once.
    routing : {"queue", "least-loaded", "weighted", "round-robin"}
        With ``queueing``: one shared FIFO per stage, join the shortest queue,
        random in proportion to speed, or in turn (see
        :mod:`sim.training.routing`); only the default ``"queue"`` without it.
    speeds : tuple of tuple of float or None
        With ``queueing``: ``speeds[j][i]`` of each replica (> 0; default all
        1). It fixes ``replicas`` (which must then be unset or agree).
    network, network_nodes, nic, contention, p2p, network_weighting
        With ``queueing``: the network the hops cross (``transfer_size`` a
        microbatch, as flows that share its links), as in
        :class:`sim.training.TrainingConfig`; ``latency`` and ``bandwidth``
        then stay unset, and ``routing`` picks a replica (not ``queue``).
    """

    stages: int = 48
    replicas: int | tuple[int, ...] | None = None
    skip_budget: int = 0
    availability: float = 0.9
    domain_outage: float = 0.0
    skip_penalty: float = 0.0
    penalty: str | Callable[[int], float] = "multiplicative"
    mean_downtime: float = 1.0
    domain_downtime: float = 1.0
    failure_distribution: str = "exponential"
    failure_shape: float | None = None
    stage_time: float | tuple[float, ...] = 0.0
    stage_time_distribution: str = "deterministic"
    stage_time_shape: float | None = None
    latency: float | tuple[float, ...] = 0.0
    transfer_size: float = 0.0
    bandwidth: float = math.inf
    microbatches: int = 10_000
    arrival: str = "fixed"
    rate: float = 1.0
    max_wait: float = 0.0
    detection_timeout: float = 0.0
    placement: Any = None
    records: bool = False
    trace: bool = False
    failure_trace: Any = None
    queueing: bool = False
    routing: str = "queue"
    speeds: tuple[tuple[float, ...], ...] | None = None
    network: Any = None
    network_nodes: Any = None
    nic: Any = None
    contention: bool = True
    p2p: str = "overlap"
    network_weighting: str = "maxmin"

    def __post_init__(self) -> None:
        L = check_int("stages", self.stages, low=1)
        check_memory("stages", L, L * CONFIG_BYTES_PER_STAGE)  # before the per-stage tuples
        self._check_queueing(L)
        if self.placement is not None:
            pl = from_value(self.placement)
            check(len(pl.replica_domains) == L, "placement", f"{L} stages (one per stage)",
                  len(pl.replica_domains))
            object.__setattr__(self, "placement", pl.value())
            if self.replicas is not None:
                given = _per_stage("replicas", self.replicas, L, _count)
                check(given == pl.replicas, "replicas",
                      f"unset or the placement's replica counts ({_counts_text(pl.replicas)})",
                      self.replicas)
            object.__setattr__(self, "replicas", pl.replicas)
        else:
            reps = DEFAULT_REPLICAS if self.replicas is None else self.replicas
            if self.replicas is None and self.speeds is not None:
                reps = tuple(len(row) for row in self.speeds)
            object.__setattr__(self, "replicas", _per_stage("replicas", reps, L, _count))
        if self.speeds is not None:
            counts = tuple(len(row) for row in self.speeds)
            check(counts == self.replicas, "speeds",
                  f"one speed per replica ({_counts_text(self.replicas)})",  # type: ignore[arg-type]
                  _counts_text(counts))
        check_int("skip_budget", self.skip_budget, low=0, high=L)
        check_probability("availability", self.availability)
        check_probability("domain_outage", self.domain_outage)
        self.skip_law.table(L)  # validates kappa, the form, and a user function's values
        check_positive("mean_downtime", self.mean_downtime)
        check_positive("domain_downtime", self.domain_downtime)
        check_distribution("failure_distribution", self.failure_distribution)
        if self.failure_shape is not None:
            check_shape("failure_shape", self.failure_distribution, self.failure_shape)
        check_law("failure_distribution", self.failure_distribution, "failure_shape",
                  self.failure_shape)
        object.__setattr__(self, "stage_time",
                           _per_stage("stage_time", self.stage_time, L, check_nonnegative))
        check_choice("stage_time_distribution", self.stage_time_distribution, stage_time_laws())
        if self.stage_time_shape is not None:
            check_shape("stage_time_shape", self.stage_time_distribution, self.stage_time_shape)
        if self.stage_time_distribution != "deterministic":
            check_law("stage_time_distribution", self.stage_time_distribution, "stage_time_shape",
                      self.stage_time_shape)
        object.__setattr__(self, "latency",
                           _per_stage("latency", self.latency, L, check_nonnegative, max(L - 1, 0)))
        check_nonnegative("transfer_size", self.transfer_size)
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        check_int("microbatches", self.microbatches, low=1)
        if self.records:
            check_memory("microbatches", self.microbatches,
                         self.microbatches * RECORD_BYTES_PER_MICROBATCH)
        check_choice("arrival", self.arrival, ARRIVALS)
        check_positive("rate", self.rate)
        check_nonnegative("max_wait", self.max_wait, allow_inf=True)
        if self.max_wait == math.inf and self.skip_budget < L:
            # A microbatch waiting forever at a stage that never recovers would
            # never leave, and the run would never end.
            pl = self.domain_placement
            dead = {d for d, u in pl.domain_outage.items() if u == 1.0}
            stuck = self.availability == 0.0 or any(
                all(dead.intersection(chain) for chain in stage) for stage in pl.replica_domains)
            check(not stuck, "max_wait",
                  "finite when a stage never recovers (availability 0 or a domain outage of 1)",
                  self.max_wait)
        check_nonnegative("detection_timeout", self.detection_timeout)
        # times whose run would overflow to inf: each micro-batch crosses every stage and hop
        st = self.stage_time if isinstance(self.stage_time, tuple) else (self.stage_time,) * L
        lat = self.latency if isinstance(self.latency, tuple) else (self.latency,) * max(L - 1, 0)
        hop = self.transfer_size / self.bandwidth if self.bandwidth < math.inf else 0.0
        terms = [("stage_time", sum(st), self.stage_time),
                 ("latency", sum(lat), self.latency),
                 ("+bandwidth" if self.transfer_size and (L - 1) * self.microbatches * L
                  / self.bandwidth > TIME_LIMIT else "transfer_size", (L - 1) * hop,
                  self.bandwidth if self.transfer_size and (L - 1) * self.microbatches * L
                  / self.bandwidth > TIME_LIMIT else self.transfer_size),
                 ("detection_timeout", L * self.detection_timeout, self.detection_timeout),
                 ("mean_downtime", self.mean_downtime, self.mean_downtime),
                 ("domain_downtime", self.domain_downtime, self.domain_downtime),
                 ("+rate", 1.0 / self.rate, self.rate)]
        if self.max_wait < math.inf:
            terms.append(("max_wait", L * self.max_wait, self.max_wait))
        check_time_terms(float(self.microbatches) * L, terms, "micro-batches x stages")
        if self.arrival == "back_to_back":
            check(not self.instant, "arrival",
                  "fixed or poisson when stage_time, latency and transfer_size are all 0",
                  self.arrival)
        if self.failure_trace is not None:
            from ..traces import TraceReplay

            check(isinstance(self.failure_trace, TraceReplay), "failure_trace",
                  "a sim.traces.TraceReplay", self.failure_trace)
            if self.arrival == "fixed":
                last = self.microbatches / self.rate  # microbatch k arrives at (k + 1) / rate
                check(last < self.failure_trace.duration, "microbatches",
                      f"arriving before the failure trace ends (at {self.failure_trace.duration:g}; "
                      "or loop it)", self.microbatches)
        self._check_network()
        if self.failure_trace is not None and self.trace_names is None:
            self.failure_trace.check_workers(self.workers)  # slot k on worker k

    @property
    def trace_names(self) -> tuple[str | None, ...] | None:
        """The instance each worker replays (stage-major; None: up throughout) when the
        failure trace's instances are named as the workers ``s{j}r{i}`` or their hosts
        (``network_nodes``), as in :attr:`sim.training.TrainingConfig.trace_names`; None
        when it is replayed slot by slot (some named so and some not is refused)."""
        if self.failure_trace is None:
            return None
        from ..training.config import stage_workers

        return self.failure_trace.by_name(stage_workers(self.replicas, self.network_nodes))  # type: ignore[arg-type]

    def _check_network(self) -> None:
        """The network fields: validated through the flow's config, nodes stored as resolved."""
        if self.network is None:
            for name, default in (("network_nodes", None), ("nic", None), ("contention", True),
                                  ("p2p", "overlap"), ("network_weighting", "maxmin")):
                check(getattr(self, name) == default, name,
                      f"{'unset' if default is None else default} without a network",
                      getattr(self, name))
            return
        check(self.latency == (0.0,) * len(self.latency), "latency",  # type: ignore[arg-type]
              "0 (unset) with a network (its links set the transfer times)", self.latency)
        check(self.bandwidth == math.inf, "bandwidth",
              "inf (unset) with a network (its links set the transfer times)", self.bandwidth)
        if self.p2p == "blocking":
            moving = (self.availability < 1 or any(
                u > 0 for u in self.domain_placement.domain_outage.values())
                or self.failure_trace is not None)
            check(not moving, "p2p", "overlap when workers can fail (blocking transfers are "
                  "modelled without failures)", self.p2p)
        from .queueing import _flow_config

        object.__setattr__(self, "network_nodes", _flow_config(self).network_nodes)

    def _check_queueing(self, L: int) -> None:
        """The server model's fields: ``queueing``, ``routing``, ``speeds`` (before the replicas)."""
        check(isinstance(self.queueing, bool), "queueing", "True or False", self.queueing)
        if not self.queueing:
            check(self.routing == "queue", "routing", "unset (queue) without queueing",
                  self.routing)
            check(self.speeds is None, "speeds", "unset without queueing", self.speeds)
            check(self.network is None, "network", "unset without queueing (the no-queueing "
                  "engines time a hop by its own link)", self.network)
            return
        from ..training.routing import ROUTING_POLICIES, speed_rows

        # a balancer a trainer needs the swarm schedule's trainers: the pipeline has none
        check_choice("routing", self.routing, tuple(
            n for n, cls in ROUTING_POLICIES.items() if not getattr(cls, "per_microbatch", False)))
        check(not self.records, "records", "False with queueing (per-microbatch records are "
              "the no-queueing DES's)", self.records)
        check(not self.trace, "trace", "False with queueing (the event log is the "
              "no-queueing DES's)", self.trace)
        if self.speeds is not None:
            rows = speed_rows(self.speeds, L, "speeds")
            object.__setattr__(self, "speeds", tuple(tuple(float(v) for v in r) for r in rows))

    # -- derived -------------------------------------------------------------
    @property
    def skip_law(self) -> SkipPenalty:
        """The skip penalty as a value object."""
        return SkipPenalty(self.skip_penalty, self.penalty)

    @property
    def quality(self) -> tuple[float, ...]:
        """Quality kept after ``k`` skips, ``k = 0..L``."""
        return self.skip_law.table(self.stages)

    @property
    def hop_times(self) -> tuple[float, ...]:
        """Transfer time of each hop ``j -> j+1``."""
        extra = self.transfer_size / self.bandwidth if self.transfer_size else 0.0
        return tuple(lat + extra for lat in self.latency)  # type: ignore[union-attr]

    @property
    def instant(self) -> bool:
        """True when crossing the pipeline takes no simulated time (the snapshot model)."""
        return not any(self.stage_time) and not any(self.hop_times)  # type: ignore[arg-type]

    @property
    def workers(self) -> int:
        """Total number of replica workers."""
        return int(sum(self.replicas))  # type: ignore[arg-type]

    @property
    def study_placement(self) -> bool:
        """True for the study's placement: no placement given, one domain per stage."""
        return self.placement is None

    @property
    def domain_placement(self) -> Placement:
        """The placement used, built from the stored value (the study's when none was given)."""
        if self.placement is not None:
            return from_value(self.placement)
        return shared_per_stage(self.replicas, self.domain_outage)  # type: ignore[arg-type]

    def _domain_outages(self) -> Iterable[float]:
        """Every domain's unavailability, without building the study's placement (whose size
        is the number of replicas: a billion replicas would be a billion tuples)."""
        if self.placement is None:
            return (float(self.domain_outage),)  # type: ignore[arg-type]
        return self.domain_placement.domain_outage.values()

    def expected_transitions(self) -> tuple[float, str, Any]:
        """The up/down transitions of workers and domains the DES can expect to simulate, and
        the parameter that drives them (for :data:`MAX_TRANSITIONS`).

        Every worker (and every domain with an outage) alternates up and down for the whole run,
        a mean cycle of ``mean_downtime / (1 - a)`` (``domain_downtime / rho``), two
        transitions each; the run lasts at least its arrivals plus one crossing
        (``microbatches / rate`` + the stage and hop times), or ``microbatches`` crossings one
        after the other with ``back_to_back`` arrivals. A replayed trace is not counted (its
        transitions are its rows). The parameter named is the one furthest from the study's run
        (48 stages x 3 replicas, 10,000 arrivals a unit apart, outages of mean 1): the largest
        term of the run's length, the replicas (or stages), or a downtime below 1.
        """
        if self.failure_trace is not None:
            return 0.0, "failure_trace", None
        # the study's placement has a domain per stage (``_domain_outages`` gives its one value)
        per = self.stages if self.placement is None else 1
        workers, domains, _ = cycle_rates(
            workers=self.workers, availability=self.availability,
            mean_downtime=self.mean_downtime, domain_outages=self._domain_outages(),
            domain_downtime=self.domain_downtime, domain_copies=per)
        rate = workers + domains
        if rate == 0.0:
            return 0.0, "availability", self.availability
        # stage_time and latency are per-stage / per-hop tuples once the config is built
        hop = self.transfer_size / self.bandwidth if self.transfer_size else 0.0
        cross = [("stage_time", math.fsum(self.stage_time), self.stage_time),  # type: ignore[arg-type]
                 ("latency", math.fsum(self.latency), self.latency),  # type: ignore[arg-type]
                 ("transfer_size", (self.stages - 1) * hop, self.transfer_size)]
        if self.arrival == "back_to_back":
            terms = [(n, self.microbatches * t, v) for n, t, v in cross]
        else:
            terms = [("microbatches", self.microbatches / self.rate, self.microbatches)] + cross
        length = math.fsum(t for _, t, _ in terms)
        # the factor furthest from the study's run (48 stages x 3 replicas, 10,000 arrivals a
        # unit apart, outages of 1) is named: how many times it multiplies the transitions
        name, span, value = max(terms, key=lambda t: t[1])
        blame = [(span / 1e4, name, value)]
        if self.workers > 144 and rate - domains > domains:
            many = "stages" if self.stages > 48 and max(self.replicas) <= 3 else "replicas"
            blame.append((self.workers / 144, many, getattr(self, many)))
        if domains > rate - domains and self.domain_downtime < 1.0:
            blame.append((1.0 / self.domain_downtime, "domain_downtime", self.domain_downtime))
        elif domains <= rate - domains and self.mean_downtime < 1.0:
            blame.append((1.0 / self.mean_downtime, "mean_downtime", self.mean_downtime))
        _, name, value = max(blame, key=lambda b: b[0])
        if isinstance(value, tuple) and len(set(value)) == 1:
            value = value[0]
        return 2.0 * rate * length, name, value

    def check_des_budget(self) -> None:
        """Refuse a run the DES could not finish in reasonable time: more than
        :data:`MAX_TRANSITIONS` expected up/down transitions (:meth:`expected_transitions`)."""
        check_transitions(*self.expected_transitions(), "the run's length")

    @property
    def failures(self) -> bool:
        """True when a worker or a domain can be out (availability below 1, an outage, a trace)."""
        return (self.availability < 1.0 or self.failure_trace is not None
                or any(u > 0 for u in self._domain_outages()))

    def random_sources(self) -> tuple[str, ...]:
        """What makes one replication differ from another under this config (empty: nothing).

        A new random element of the model (a law, a draw, a random policy)
        adds its condition here, so that :meth:`fixed_metrics` stays true.
        """
        out = []
        if self.failure_trace is not None:
            if not self.failure_trace.fixed_paths:
                out.append("a trace replayed with resampling or a random policy")
        elif 0.0 < self.availability < 1.0:
            out.append("worker failures")
        if any(0.0 < u < 1.0 for u in self._domain_outages()):
            out.append("domain outages")
        if any(self.stage_time) and self.stage_time_distribution != "deterministic":  # type: ignore[arg-type]
            out.append(f"{self.stage_time_distribution} stage times")
        if self.arrival == "poisson":
            out.append("Poisson arrivals")
        if self.queueing and self.routing == "weighted" and any(
                r > 1 for r in self.replicas):  # type: ignore[union-attr]
            out.append("weighted (random) routing")
        return tuple(out)

    def fixed_metrics(self) -> dict[str, str]:
        """The metrics of the pipeline engines this config fixes, each with the reason.

        Without failures nothing is ever out, so nothing is dropped, skipped,
        failed over or waited for: the drop rate is 0, the delivered rate and
        the quality 1, and those counts 0. With nothing random at all
        (:meth:`random_sources` empty) every metric is the same in every
        replication (see :func:`sim.results.fixed_ci`).
        """
        from .engines import SNAPSHOT_METRICS, TIMED_METRICS

        skipped = [f"skipped_{k}" for k in range(self.skip_budget + 1)]
        if not self.random_sources():
            why = ("nothing random: deterministic failures (or none), stage times, arrivals "
                   "and routing")
            stations = [f"{m}_stage{j}" for j in range(self.stages)
                        for m in ("wait", "utilisation")] if self.queueing else []
            return dict.fromkeys((*SNAPSHOT_METRICS, *TIMED_METRICS, "utilisation", *skipped,
                                  *stations), why)
        out = {"microbatches": "the config's microbatches", "workers": "the config's workers"}
        if all(q == 1.0 for q in self.quality[: self.skip_budget + 1]):
            out["mean_quality"] = ("no skip costs quality (skip budget 0, or no penalty within "
                                   "it)")
        if self.skip_budget == 0:
            out["mean_skipped"] = "no stage may be skipped (skip budget 0)"
        if self.max_wait == math.inf:  # every stage recovers (a config that never does is refused)
            out.update(dict.fromkeys(("drop_rate", "delivered_rate"),
                                     "a microbatch waits for an out stage (max_wait inf): none "
                                     "is dropped"))
        if not self.failures:
            why = "no failures (availability 1, no domain outage, no trace)"
            out.update(dict.fromkeys(("drop_rate", "delivered_rate", "mean_quality",
                                      "quality_mass", "mean_skipped", "stage_crossings",
                                      "failovers_per_microbatch", "waits_per_microbatch",
                                      *skipped), why))
        return out


def on_layout(config: PipelineConfig, topology: str, policy: str = "shared", *, seed: int = 0,
              layout_latency: bool = True) -> tuple[PipelineConfig, Placement]:
    """Place a pipeline's replicas on a layout: the config with that placement, and the placement.

    Parameters
    ----------
    config : PipelineConfig
        The pipeline (its ``stages`` and ``replicas`` are placed).
    topology : str
        A layout spec for :func:`topologies.build` (``datacenter:regions=2,...``,
        a graph file, ``module:function``).
    policy : str
        A placement policy of :func:`topologies.placement.place`.
    seed : int
        Seeds random layouts and the ``random`` policy (stream ``placement``).
    layout_latency : bool
        Whether the layout's link latencies become the hop latencies
        (:func:`layout_hop_times`, the activation size folded in).

    Returns
    -------
    (PipelineConfig, Placement)
        The config stores the placement's value form; the placement is for display.
    """
    import topologies
    from topologies.placement import place

    from ..rng import Streams

    layout = topologies.build(topology, seed=seed)
    placement = place(layout, config.stages, list(config.replicas),  # type: ignore[arg-type]
                      policy, rng=Streams(seed).rng("placement"))
    kw: dict[str, Any] = {"placement": placement}
    if layout_latency:
        hops = layout_hop_times(layout, placement.hosts, config.transfer_size)
        kw.update(latency=hops if hops else 0.0, transfer_size=0.0)
    return dataclasses.replace(config, **kw), placement
