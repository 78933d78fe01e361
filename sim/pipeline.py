"""Study A as a discrete-event simulation: pipeline stages, replicas, failover, skipping.

A microbatch crosses ``L`` stages in order. Stage ``j`` is held by ``r_j``
replica workers placed in failure domains (by default the study's placement:
all replicas of a stage share one domain of unavailability ``rho``). Workers
and domains fail and recover as the renewal processes of
:mod:`sim.failures`, in their stationary regime from time 0.

On arrival at a stage, a live replica serves it for the stage's compute time,
then the activations travel to the next stage (``latency + size/bandwidth``).
If the serving replica fails during compute, the microbatch fails over to
another live replica after ``detection_timeout`` and recomputes (the time is
charged). If the stage is *out* (no live replica, which includes its domain
being out), the microbatch skips it while its skip budget ``s`` lasts,
losing quality, else waits up to ``max_wait`` for a replica to come back and is
dropped if none does.

With zero compute and transfer time and ``max_wait = 0`` every microbatch sees
a snapshot of the stationary system, so its drop probability is exactly
``P(Bin(L, q) > s)`` with ``q = rho + (1 - rho)(1 - a)**r``. Successive
microbatches are correlated in time (a worker stays down a while), which is
why intervals come from independent replications (:func:`sim.runner.replicate`).

Speed
-----
The state the microbatches read is maintained by ``on_change`` callbacks, never
polled: per stage an ordered set of live replicas (its size is the live count)
and the number of out stages. A crossing therefore costs O(1):

* zero compute and transfer time and ``max_wait = 0``: a microbatch is one
  look at the number of out stages (no SimPy event besides its arrival);
  with ``max_wait > 0`` or a trace, a plain loop over the stages;
* with compute time: at most one ``timeout`` per stage (compute and the
  transfer to the next stage merged; a failure during the transfer does not
  affect the microbatch), a failure reaching the microbatch as
  ``process.interrupt(Transition)`` from the failing worker's callback;
* lookahead: every component publishes the time of its next scheduled
  transition (``Component.next_own_change``), so a run of stages that cannot
  change before the microbatch is done with them is crossed with a single
  ``timeout``. The results are identical to the stage-by-stage path (a test
  pins this); when outages are long compared with a stage time, a whole
  pipeline crossing costs one or two SimPy events.

Replicas are not contended resources: a replica serves every microbatch that
reaches it at once (no queueing), so latency reflects compute, transfer,
failover and waiting only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from .errors import (
    ConfigError,
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)
from .failures import DISTRIBUTIONS, FailureModel, Transition
from .rng import Streams

__all__ = [
    "ARRIVALS",
    "PENALTIES",
    "STAGE_TIME_DISTRIBUTIONS",
    "DEFAULT_REPLICAS",
    "DomainPlacement",
    "PipelineConfig",
    "PipelineRun",
    "Pipeline",
    "quality_table",
    "default_placement",
    "as_placement",
    "layout_hop_times",
    "predicted_drop_rate",
    "run_pipeline",
    "pipeline_model",
    "BENCH_CONFIG",
    "measure_crossing_rate",
]

ARRIVALS = ("fixed", "poisson", "back_to_back")
PENALTIES = ("multiplicative", "additive")
STAGE_TIME_DISTRIBUTIONS = ("deterministic", "exponential", "weibull", "lognormal")

#: Replicas per stage when neither ``replicas`` nor a placement is given.
DEFAULT_REPLICAS = 3

_BLOCK = 4096  # random durations are drawn in blocks of this size
_ALWAYS = math.inf  # registered compute end when no transfer follows: any failure interrupts


# --------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class DomainPlacement:
    """Where each replica sits: its chain of failure domains, outermost first.

    Parameters
    ----------
    replica_domains : tuple of tuple of tuple of str
        ``replica_domains[j][i]`` is the domain chain of replica ``i`` of stage
        ``j``, for example ``("region0", "region0/rack1")``; an empty chain
        means the replica sits in no domain.
    domain_outage : dict
        Unavailability of each domain (domains not listed never fail).

    Notes
    -----
    This is the shape of :func:`sim.analytic.exact_drop_probability` and of a
    ``topologies.placement.Placement`` (any object with those two attributes is
    accepted by :func:`as_placement`).
    """

    replica_domains: tuple[tuple[tuple[str, ...], ...], ...]
    domain_outage: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rd = tuple(tuple(tuple(str(d) for d in chain) for chain in stage)
                   for stage in self.replica_domains)
        object.__setattr__(self, "replica_domains", rd)
        check(len(rd) >= 1, "placement", "at least one stage", len(rd))
        for stage in rd:
            check(len(stage) >= 1, "placement", "at least one replica per stage", stage)
        outage = {str(k): check_probability("domain_outage", v)
                  for k, v in dict(self.domain_outage).items()}
        object.__setattr__(self, "domain_outage", outage)
        parents: dict[str, str | None] = {}
        for stage in rd:
            for chain in stage:
                for depth, name in enumerate(chain):
                    parent = chain[depth - 1] if depth else None
                    check(parents.setdefault(name, parent) == parent, "placement",
                          "a consistent domain hierarchy (one parent per domain)", name)

    @property
    def replicas(self) -> tuple[int, ...]:
        """Replicas per stage."""
        return tuple(len(s) for s in self.replica_domains)

    def __hash__(self) -> int:
        return hash((self.replica_domains, tuple(sorted(self.domain_outage.items()))))


def default_placement(replicas: Sequence[int], domain_outage: float) -> DomainPlacement:
    """The study's placement: stage ``j``'s replicas all in domain ``stage{j}``."""
    return DomainPlacement(
        tuple(((f"stage{j}",),) * r for j, r in enumerate(replicas)),
        {f"stage{j}": domain_outage for j in range(len(replicas))},
    )


def as_placement(obj: Any) -> DomainPlacement:
    """Normalise a placement: a :class:`DomainPlacement`, any object with
    ``replica_domains`` and ``domain_outage`` attributes (a topologies
    ``Placement``), or a pair ``(replica_domains, domain_outage)``."""
    if isinstance(obj, DomainPlacement):
        return obj
    if hasattr(obj, "replica_domains") and hasattr(obj, "domain_outage"):
        return DomainPlacement(obj.replica_domains, dict(obj.domain_outage))
    if isinstance(obj, (tuple, list)) and len(obj) == 2 and isinstance(obj[1], dict):
        return DomainPlacement(obj[0], obj[1])
    raise ConfigError("placement", "a Placement or a (replica_domains, domain_outage) pair", obj)


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
        the mean is the natural constant.
    """
    size = check_nonnegative("transfer_size", transfer_size)
    out = []
    for a, b in zip(hosts[:-1], hosts[1:], strict=True):
        total = 0.0
        for u in a:
            for v in b:
                if u == v:
                    continue
                check(layout.has_edge(u, v), "topology", "a layout linking every pair of hosts",
                      f"no link {u}-{v}")
                e = layout.edges[u, v]
                bw = float(e.get("bandwidth", math.inf))
                total += float(e.get("latency", 0.0)) + (size / bw if size else 0.0)
        out.append(total / (len(a) * len(b)))
    return tuple(out)


# --------------------------------------------------------------------------- config


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


def quality_table(stages: int, skip_penalty: float,
                  penalty: str | Callable[[int], float] = "multiplicative") -> tuple[float, ...]:
    """Quality kept by a microbatch that skipped ``k`` stages, for ``k = 0..stages``.

    Parameters
    ----------
    stages : int
    skip_penalty : float
        ``kappa`` in [0, 1].
    penalty : {"multiplicative", "additive"} or callable
        ``(1 - kappa)**k``, ``max(0, 1 - kappa k)``, or ``penalty(k)`` (a
        picklable, top-level function returning a number in [0, 1]).

    Returns
    -------
    tuple of float
    """
    kappa = check_probability("skip_penalty", skip_penalty)
    if callable(penalty):
        out = []
        for k in range(stages + 1):
            try:
                v = float(penalty(k))
            except Exception as exc:  # a user function that fails is bad input
                raise ConfigError("penalty", "a function k -> quality in [0, 1]",
                                  f"{getattr(penalty, '__name__', penalty)} ({exc})") from None
            check(0.0 <= v <= 1.0, "penalty", "a function k -> quality in [0, 1]",
                  f"{getattr(penalty, '__name__', penalty)}({k}) = {v}")
            out.append(v)
        return tuple(out)
    check_choice("penalty", penalty, PENALTIES)
    if penalty == "multiplicative":
        return tuple((1.0 - kappa) ** k for k in range(stages + 1))
    return tuple(max(0.0, 1.0 - kappa * k) for k in range(stages + 1))


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
        How quality falls with skips (see :func:`quality_table`).
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
    placement : DomainPlacement, topologies Placement, pair, or None
        Failure domains of each replica; ``None`` is the study's placement.
        When given it fixes ``replicas`` (which must then be ``None`` or agree
        with it) and ``domain_outage`` is ignored.
    records : bool
        Keep per-microbatch records in preallocated arrays.
    trace : bool
        Keep an event trace ``(time, microbatch, event, stage, replica)``.
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

    def __post_init__(self) -> None:
        L = check_int("stages", self.stages, low=1)
        if self.placement is not None:
            pl = as_placement(self.placement)
            check(len(pl.replica_domains) == L, "placement", f"{L} stages (one per stage)",
                  len(pl.replica_domains))
            object.__setattr__(self, "placement", pl)
            if self.replicas is not None:
                given = _per_stage("replicas", self.replicas, L, _count)
                check(given == pl.replicas, "replicas",
                      f"unset or the placement's replica counts ({_counts_text(pl.replicas)})",
                      self.replicas)
            object.__setattr__(self, "replicas", pl.replicas)
        else:
            reps = DEFAULT_REPLICAS if self.replicas is None else self.replicas
            object.__setattr__(self, "replicas", _per_stage("replicas", reps, L, _count))
        check_int("skip_budget", self.skip_budget, low=0, high=L)
        check_probability("availability", self.availability)
        check_probability("domain_outage", self.domain_outage)
        quality_table(L, self.skip_penalty, self.penalty)  # validates both
        check_positive("mean_downtime", self.mean_downtime)
        check_positive("domain_downtime", self.domain_downtime)
        check_choice("failure_distribution", self.failure_distribution, DISTRIBUTIONS)
        if self.failure_shape is not None:
            check_positive("failure_shape", self.failure_shape)
        object.__setattr__(self, "stage_time",
                           _per_stage("stage_time", self.stage_time, L, check_nonnegative))
        check_choice("stage_time_distribution", self.stage_time_distribution,
                     STAGE_TIME_DISTRIBUTIONS)
        if self.stage_time_shape is not None:
            check_positive("stage_time_shape", self.stage_time_shape)
        object.__setattr__(self, "latency",
                           _per_stage("latency", self.latency, L, check_nonnegative, max(L - 1, 0)))
        check_nonnegative("transfer_size", self.transfer_size)
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        check_int("microbatches", self.microbatches, low=1)
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
        if self.arrival == "back_to_back":
            check(not self.instant, "arrival",
                  "fixed or poisson when stage_time, latency and transfer_size are all 0",
                  self.arrival)

    # -- derived -------------------------------------------------------------
    @property
    def quality(self) -> tuple[float, ...]:
        """Quality kept after ``k`` skips, ``k = 0..L``."""
        return quality_table(self.stages, self.skip_penalty, self.penalty)

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
    def domain_placement(self) -> DomainPlacement:
        """The placement used (the study's when none was given)."""
        if self.placement is not None:
            return self.placement
        return default_placement(self.replicas, self.domain_outage)  # type: ignore[arg-type]


def predicted_drop_rate(config: PipelineConfig) -> float:
    """Exact snapshot drop probability for the config's placement and parameters.

    Uses :func:`sim.analytic.drop_probability` (``P(Bin(L, q) > s)``) for the
    study's placement with equal replicas, and
    :func:`sim.analytic.exact_drop_probability` (conditioning on shared
    domains) otherwise. It is the exact answer of the simulation when
    ``config.instant`` and ``max_wait == 0``; otherwise it is the snapshot
    reference.
    """
    from . import analytic

    reps = config.replicas
    if config.placement is None and len(set(reps)) == 1:  # type: ignore[arg-type]
        return float(analytic.drop_probability(config.stages, reps[0], config.skip_budget,  # type: ignore[index]
                                               config.availability, config.domain_outage))
    pl = config.domain_placement
    return float(analytic.exact_drop_probability(
        [list(s) for s in pl.replica_domains], dict(pl.domain_outage),
        config.availability, config.skip_budget))


# --------------------------------------------------------------------------- simulation


class _UnitDraws:
    """Unit-mean random durations drawn in blocks (scale by the stage's mean)."""

    def __init__(self, kind: str, shape: float | None, rng: np.random.Generator) -> None:
        self.kind, self.rng = kind, rng
        if kind == "weibull":
            k = 0.7 if shape is None else shape
            self._draw = lambda n: rng.weibull(k, n) / math.gamma(1.0 + 1.0 / k)
        elif kind == "lognormal":
            sig = 1.0 if shape is None else shape
            self._draw = lambda n: rng.lognormal(-sig * sig / 2.0, sig, n)
        else:
            self._draw = lambda n: rng.exponential(1.0, n)
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self._draw(_BLOCK).tolist()
        return self._buf.pop()


@dataclass
class PipelineRun:
    """What one replication produced.

    Attributes
    ----------
    metrics : dict
        Flat metrics (see :func:`pipeline_model`).
    records : dict of numpy arrays or None
        Per-microbatch ``arrival``, ``finish``, ``skipped``, ``quality``,
        ``delivered``, ``failovers`` (when ``config.records``).
    trace : list of tuple or None
        ``(time, microbatch, event, stage, replica)`` (when ``config.trace``);
        events are arrive, serve, fail, failover, skip, wait, drop, deliver;
        ``replica`` is the index within the stage (-1 when not applicable).
    """

    metrics: dict[str, float]
    records: dict[str, np.ndarray] | None = None
    trace: list[tuple[float, int, str, int, int]] | None = None


class _LatencyHistogram:
    """Log-binned latency histogram (400 bins a decade): quantiles within 0.3%, constant memory."""

    PER_DECADE = 400
    LOW = -9  # 1e-9

    def __init__(self) -> None:
        self.nbins = self.PER_DECADE * 21
        self.counts = [0] * (self.nbins + 2)  # [0] zero, [-1] overflow
        self.n = 0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, x: float) -> None:
        self.n += 1
        if x < self.lo:
            self.lo = x
        if x > self.hi:
            self.hi = x
        if x <= 0.0:
            self.counts[0] += 1
            return
        b = int((math.log10(x) - self.LOW) * self.PER_DECADE) + 1
        self.counts[min(max(b, 1), self.nbins + 1)] += 1

    def quantile(self, p: float) -> float:
        if self.n == 0:
            return math.nan
        target = p * self.n
        cum = np.cumsum(self.counts)
        b = int(np.searchsorted(cum, target, side="left"))
        if b == 0:
            v = 0.0
        else:
            v = 10.0 ** (self.LOW + (b - 0.5) / self.PER_DECADE)
        return float(min(max(v, self.lo), self.hi))


class Pipeline:
    """A built pipeline: failure model wired to per-stage live sets, ready to run.

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams
        Failures draw from ``failures:*`` streams, arrivals from ``arrivals``,
        compute times from ``stage_time``.
    env : simpy.Environment, optional

    Notes
    -----
    Build and wire happen in the constructor; :meth:`run` starts the failure
    processes and the arrivals, and runs until every microbatch has left.
    """

    def __init__(self, config: PipelineConfig, streams: Streams,
                 env: simpy.Environment | None = None) -> None:
        self.config = c = config
        self.env = env if env is not None else simpy.Environment()
        self.streams = streams
        L = c.stages
        self.L = L
        self.s = c.skip_budget
        self.quality = c.quality
        # -- build the failure model from the placement -------------------------
        pl = c.domain_placement
        fm = FailureModel(self.env, streams)
        self.failure_model = fm
        for stage in pl.replica_domains:
            for chain in stage:
                for depth, name in enumerate(chain):
                    if name not in fm.components:
                        fm.add_domain(name, chain[depth - 1] if depth else None,
                                      unavailability=pl.domain_outage.get(name, 0.0),
                                      mean_downtime=c.domain_downtime,
                                      distribution=c.failure_distribution,
                                      shape=c.failure_shape)
        self.workers: list[Any] = []
        self.worker_stage: list[int] = []
        self.stage_workers: list[list[int]] = []
        for j, stage in enumerate(pl.replica_domains):
            ids = []
            for i, chain in enumerate(stage):
                w = fm.add_worker(f"s{j}r{i}", chain[-1] if chain else None,
                                  availability=c.availability, mean_downtime=c.mean_downtime,
                                  distribution=c.failure_distribution, shape=c.failure_shape)
                ids.append(len(self.workers))
                self.workers.append(w)
                self.worker_stage.append(j)
            self.stage_workers.append(ids)
        # -- wire: live sets, out count, recovery events, serving registries ---
        self.live: list[dict[int, None]] = [{} for _ in range(L)]
        self.n_out = 0
        self._recovered: list[simpy.Event | None] = [None] * L
        self.serving: list[dict[Any, float]] = [{} for _ in self.workers]
        for idx, w in enumerate(self.workers):
            w.on_change(self._callback(idx, self.worker_stage[idx]))
        # -- per-stage timing ---------------------------------------------------
        self.stage_time = c.stage_time
        hops = c.hop_times
        self.hop = tuple(hops) + (0.0,)
        self._draw = None
        if c.stage_time_distribution != "deterministic" and any(c.stage_time):  # type: ignore[arg-type]
            self._draw = _UnitDraws(c.stage_time_distribution, c.stage_time_shape,
                                    streams.rng("stage_time"))
        # -- accumulators -------------------------------------------------------
        self.finished = 0
        self.dropped = 0
        self.skip_hist = [0] * (L + 1)
        self.quality_sum = 0.0
        self.latency_sum = 0.0
        self.failovers = 0
        self.waits = 0
        self.crossings = 0
        self.latency_hist = _LatencyHistogram()
        n = c.microbatches
        self.rec: dict[str, np.ndarray] | None = None
        if c.records:
            self.rec = {
                "arrival": np.full(n, np.nan), "finish": np.full(n, np.nan),
                "skipped": np.zeros(n, dtype=np.int32), "quality": np.zeros(n),
                "delivered": np.zeros(n, dtype=bool), "failovers": np.zeros(n, dtype=np.int32),
            }
        self.trace: list[tuple[float, int, str, int, int]] | None = [] if c.trace else None
        self.done = self.env.event()
        # -- lookahead: the components whose transitions can change each stage --
        self.lookahead = True
        self._next_change = [0.0] * L
        self._stage_components: list[list[Any]] = []
        for ids in self.stage_workers:
            comps: dict[str, Any] = {}
            for idx in ids:
                w = self.workers[idx]
                comps[w.name] = w
                for d in w.ancestors():
                    comps[d.name] = d
            self._stage_components.append(list(comps.values()))

    # -- failure callbacks --------------------------------------------------------
    def _callback(self, idx: int, j: int) -> Callable[[Any, bool, float], None]:
        live = self.live[j]
        serving = self.serving[idx]

        def changed(comp: Any, up: bool, now: float) -> None:
            if up:
                live[idx] = None
                if len(live) == 1:
                    self.n_out -= 1
                    ev = self._recovered[j]
                    if ev is not None:
                        self._recovered[j] = None
                        ev.succeed()
            else:
                del live[idx]
                if not live:
                    self.n_out += 1
                if serving:
                    cause = None
                    for proc, end in list(serving.items()):
                        if end > now:
                            if cause is None:
                                cause = Transition(comp.name, False, now)
                            proc.interrupt(cause)
        return changed

    def _recovery(self, j: int) -> simpy.Event:
        ev = self._recovered[j]
        if ev is None:
            ev = self._recovered[j] = self.env.event()
        return ev

    # -- outcomes -------------------------------------------------------------------
    def _finish(self, mb: int, t0: float, k: int, failovers: int, delivered: bool) -> None:
        now = self.env.now
        self.finished += 1
        self.failovers += failovers
        if delivered:
            q = self.quality[k]
            self.skip_hist[k] += 1
            self.quality_sum += q
            lat = now - t0
            self.latency_sum += lat
            self.latency_hist.add(lat)
        else:
            self.dropped += 1
            q = 0.0
        if self.rec is not None:
            r = self.rec
            r["arrival"][mb] = t0
            r["finish"][mb] = now
            r["skipped"][mb] = k
            r["quality"][mb] = q
            r["delivered"][mb] = delivered
            r["failovers"][mb] = failovers
        if self.trace is not None:
            self.trace.append((now, mb, "deliver" if delivered else "drop", -1, -1))
        if self.finished == self.config.microbatches:
            self.done.succeed()

    # -- microbatches ---------------------------------------------------------------
    def _instant(self, mb: int, t0: float) -> tuple[int, int] | None:
        """Cross a zero-time pipeline now; returns ``(stage, skipped)`` if it must wait."""
        if self.config.max_wait == 0 and self.trace is None:
            k = self.n_out  # the number of out stages: skipped, or dropped past s
            self.crossings += self.L
            self._finish(mb, t0, min(k, self.s), 0, k <= self.s)
            return None
        live, s, tr = self.live, self.s, self.trace
        k = 0
        for j in range(self.L):
            if live[j]:
                if tr is not None:
                    tr.append((t0, mb, "serve", j, next(iter(live[j])) - self.stage_workers[j][0]))
                continue
            if k < s:
                k += 1
                if tr is not None:
                    tr.append((t0, mb, "skip", j, -1))
                continue
            if self.config.max_wait > 0:
                self.crossings += j
                return j, k
            self.crossings += j
            self._finish(mb, t0, k, 0, False)
            return None
        self.crossings += self.L
        self._finish(mb, t0, k, 0, True)
        return None

    def _run(self, mb: int, t0: float, j0: int, k: int):
        """The microbatch process from stage ``j0`` with ``k`` skips so far.

        Lookahead first: consecutive stages whose components (workers and their
        domains) have no transition scheduled before the microbatch is done
        with them are crossed with a single ``timeout`` (their outcome is
        certain). A stage that may change is served with one ``timeout``,
        registered for an interrupt; anything else (stage out, a failure during
        compute, tracing) goes to :meth:`_stage`.
        """
        env = self.env
        proc = env.active_process
        timeout = env.timeout
        live_all, serving, L = self.live, self.serving, self.L
        stage_time, hop, draw = self.stage_time, self.hop, self._draw
        fast = self.trace is None
        lookahead = fast and self.lookahead
        nxt, comps, s = self._next_change, self._stage_components, self.s
        if draw is not None:
            # Draw this microbatch's compute times now, in stage order, so the
            # stream is consumed identically with or without lookahead (which
            # looks at later stages early) and whatever else is in flight.
            stage_time = list(stage_time)
            for i in range(j0, L):
                if stage_time[i]:
                    stage_time[i] *= draw()
            draw = None
        failovers = 0
        j = j0
        while j < L:
            compute = stage_time[j]
            if draw is not None and compute:
                compute *= draw()
            if lookahead:
                # Cross stages j, j+1, ... in one timeout while none of their
                # components has a transition scheduled before the microbatch
                # is done with that stage: the outcome is then certain now.
                now = env.now
                t = now
                jj = j
                c = compute
                while True:
                    nx = nxt[jj]
                    if nx <= now:  # a component changed since cached: recompute
                        nx = math.inf
                        for comp in comps[jj]:
                            if comp.next_own_change < nx:
                                nx = comp.next_own_change
                        nxt[jj] = nx
                    if live_all[jj]:
                        if nx <= t + c:
                            break
                        t = t + (c + hop[jj])
                    elif k < s and nx > t:
                        k += 1
                    else:
                        break
                    jj += 1
                    if jj == L:
                        break
                    c = stage_time[jj]
                    if draw is not None and c:
                        c *= draw()
                if jj > j:
                    if t > now:
                        yield timeout(t - now)
                    j = jj
                    if j == L:
                        break
                    compute = c
            live = live_all[j]
            if live and fast:
                if compute > 0.0:
                    reg = serving[next(iter(live))]
                    h = hop[j]
                    reg[proc] = env.now + compute if h else _ALWAYS
                    try:
                        yield timeout(compute + h)
                    except simpy.Interrupt:
                        del reg[proc]
                        failovers += 1
                        k, status = yield from self._stage(mb, j, k, proc, compute, True)
                        failovers += abs(status) >> 1
                        if status < 0:
                            self.crossings += j - j0
                            self._finish(mb, t0, k, failovers, False)
                            return
                        j += 1
                        continue
                    del reg[proc]
                elif hop[j] > 0.0:
                    yield timeout(hop[j])
                j += 1
                continue
            k, status = yield from self._stage(mb, j, k, proc, compute, False)
            failovers += abs(status) >> 1
            if status < 0:
                self.crossings += j - j0
                self._finish(mb, t0, k, failovers, False)
                return
            j += 1
        self.crossings += L - j0
        self._finish(mb, t0, k, failovers, True)

    def _stage(self, mb: int, j: int, k: int, proc: Any, compute: float, failed: bool):
        """General handling of stage ``j``: skip, wait, drop, serve with failover, trace.

        Returns ``(k, status)``: ``status`` is ``-(2 * failovers + 1)`` when
        dropped, otherwise ``2 * failovers + 1`` (served, or skipped with ``k``
        incremented); ``failovers`` counts the failures met here either way.
        """
        env = self.env
        live = self.live[j]
        tr = self.trace
        detect = self.config.detection_timeout
        max_wait = self.config.max_wait
        dur = compute + self.hop[j]
        failovers = 0
        while True:
            if failed:  # the serving replica failed during compute
                failed = False
                if detect > 0:
                    yield env.timeout(detect)
                if tr is not None and live:
                    tr.append((env.now, mb, "failover", j, -1))
            if not live:
                if k < self.s:
                    if tr is not None:
                        tr.append((env.now, mb, "skip", j, -1))
                    return k + 1, 2 * failovers + 1
                if max_wait > 0:
                    self.waits += 1
                    if tr is not None:
                        tr.append((env.now, mb, "wait", j, -1))
                    ev = self._recovery(j)
                    if max_wait == math.inf:
                        yield ev
                    else:
                        yield ev | env.timeout(max_wait)
                if not live:
                    return k, -(2 * failovers + 1)
            w = next(iter(live))
            if tr is not None:
                tr.append((env.now, mb, "serve", j, w - self.stage_workers[j][0]))
            if compute <= 0.0:
                if dur > 0.0:
                    yield env.timeout(dur)
                return k, 2 * failovers + 1
            reg = self.serving[w]
            reg[proc] = env.now + compute
            try:
                yield env.timeout(dur)
            except simpy.Interrupt:
                del reg[proc]
                failovers += 1
                failed = True
                if tr is not None:
                    tr.append((env.now, mb, "fail", j, w - self.stage_workers[j][0]))
                continue
            del reg[proc]
            return k, 2 * failovers + 1

    def _arrivals(self):
        env, c = self.env, self.config
        n = c.microbatches
        tr = self.trace
        if c.arrival == "back_to_back":
            for mb in range(n):
                if tr is not None:
                    tr.append((env.now, mb, "arrive", -1, -1))
                yield from self._run(mb, env.now, 0, 0)
            return
        gap = 1.0 / c.rate
        poisson = c.arrival == "poisson"
        gaps: list[float] = []
        rng = self.streams.rng("arrivals") if poisson else None
        instant = c.instant
        for mb in range(n):
            if poisson:
                if not gaps:
                    gaps = rng.exponential(gap, _BLOCK).tolist()  # type: ignore[union-attr]
                yield env.timeout(gaps.pop())
            else:
                yield env.timeout(gap)
            t0 = env.now
            if tr is not None:
                tr.append((t0, mb, "arrive", -1, -1))
            if instant:
                wait = self._instant(mb, t0)
                if wait is not None:
                    env.process(self._run(mb, t0, wait[0], wait[1]))
            else:
                env.process(self._run(mb, t0, 0, 0))

    def run(self) -> PipelineRun:
        """Start the failure processes and arrivals; run until every microbatch left."""
        self.failure_model.start()
        for j, ids in enumerate(self.stage_workers):
            live = self.live[j]
            for idx in ids:
                if self.workers[idx].up:
                    live[idx] = None
        self.n_out = sum(1 for live in self.live if not live)
        self.env.process(self._arrivals())
        self.env.run(until=self.done)
        return PipelineRun(self.metrics(), self.rec, self.trace)

    def metrics(self) -> dict[str, float]:
        """Flat metrics of the run so far (see :func:`pipeline_model`)."""
        c = self.config
        n = max(self.finished, 1)
        delivered = self.finished - self.dropped
        t = self.env.now
        out: dict[str, float] = {
            "microbatches": float(self.finished),
            "drop_rate": self.dropped / n,
            "delivered_rate": delivered / n,
            "mean_quality": self.quality_sum / delivered if delivered else math.nan,
            "quality_mass": self.quality_sum / n,
            "goodput": self.quality_sum / t if t > 0 else math.nan,
            "throughput": delivered / t if t > 0 else math.nan,
            "mean_skipped": (sum(k * h for k, h in enumerate(self.skip_hist)) / delivered
                             if delivered else math.nan),
            "failovers_per_microbatch": self.failovers / n,
            "waits_per_microbatch": self.waits / n,
            "stage_crossings": float(self.crossings),
            "simulated_time": t,
            "workers": float(c.workers),
            "worker_time": c.workers * t,
        }
        if self.rec is not None and delivered:
            d = self.rec["delivered"]
            lat = (self.rec["finish"] - self.rec["arrival"])[d]
            out["latency_mean"] = float(lat.mean())
            out["latency_p50"] = float(np.quantile(lat, 0.5))
            out["latency_p99"] = float(np.quantile(lat, 0.99))
        else:
            h = self.latency_hist
            out["latency_mean"] = self.latency_sum / delivered if delivered else math.nan
            out["latency_p50"] = h.quantile(0.5)
            out["latency_p99"] = h.quantile(0.99)
        for k in range(self.s + 1):
            out[f"skipped_{k}"] = self.skip_hist[k] / n
        return out


def run_pipeline(config: PipelineConfig, streams: Streams) -> PipelineRun:
    """Build, wire and run one replication; metrics plus optional records and trace.

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams
        The replication's streams.

    Returns
    -------
    PipelineRun
    """
    return Pipeline(config, streams).run()


def pipeline_model(config: PipelineConfig, streams: Streams) -> dict[str, float]:
    """One replication of the pipeline as flat metrics (a model for :func:`sim.runner.replicate`).

    Returns
    -------
    dict
        ``drop_rate``, ``delivered_rate``, ``mean_quality`` (of delivered),
        ``quality_mass`` (quality per microbatch offered), ``goodput``
        (quality-weighted deliveries per unit simulated time), ``throughput``,
        ``mean_skipped``, ``skipped_k`` (fraction delivered with ``k`` skips,
        ``k = 0..s``), ``latency_mean``, ``latency_p50``, ``latency_p99``
        (of delivered; the quantiles come from a log-binned histogram, within
        0.3 %, unless ``config.records`` makes them exact), ``failovers_per_microbatch``, ``waits_per_microbatch``,
        ``stage_crossings``, ``simulated_time``, ``workers``, ``worker_time``.
    """
    return run_pipeline(config, streams).metrics


#: The benchmark pipeline: 48 stages x 2 replicas (96 failing workers, a = 0.9,
#: outages of 50 time units), unit compute time, one microbatch per time unit
#: (48 in flight), failover with a detection timeout and a skip budget of 2.
BENCH_CONFIG = PipelineConfig(
    stages=48, replicas=2, availability=0.9, mean_downtime=50.0, domain_downtime=50.0,
    stage_time=1.0, rate=1.0, skip_budget=2, detection_timeout=0.5, microbatches=5_000,
)


def measure_crossing_rate(config: PipelineConfig = BENCH_CONFIG, *, seed: int = 0,
                          lookahead: bool = True) -> dict[str, float]:
    """Stage crossings per second of wall time of one run of the DES.

    Parameters
    ----------
    config : PipelineConfig
        The pipeline to time (default :data:`BENCH_CONFIG`).
    seed : int
        Root seed.
    lookahead : bool
        Cross several stages per ``timeout`` when no transition can intervene
        (the default); False times the one-timeout-per-stage path.

    Returns
    -------
    dict
        ``stage_crossings``, ``seconds`` (wall time of build and run),
        ``crossings_per_second``, ``failovers_per_microbatch``,
        ``mean_skipped``, ``microbatches``.
    """
    import time

    t0 = time.perf_counter()
    p = Pipeline(config, Streams(seed))
    p.lookahead = lookahead
    m = p.run().metrics
    dt = time.perf_counter() - t0
    return {
        "stage_crossings": m["stage_crossings"],
        "seconds": dt,
        "crossings_per_second": m["stage_crossings"] / dt if dt > 0 else math.nan,
        "failovers_per_microbatch": m["failovers_per_microbatch"],
        "mean_skipped": m["mean_skipped"],
        "microbatches": m["microbatches"],
    }
