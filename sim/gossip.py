"""Pairwise gossip averaging on a networkx graph, timed in simulated wall clock.

Study B of ``SPEC.md`` as a simulation on any graph. Every node holds a vector
of dimension ``dim``; honest nodes start i.i.d. ``N(init_mean, init_std**2)``
per coordinate; adversaries (:mod:`sim.adversaries`) sit at chosen nodes and
never update. Three protocols, each advancing a SimPy clock:

``matching``
    Synchronous rounds. On the complete graph (``n`` even) a uniformly random
    perfect matching (a random permutation paired up); on any other graph a
    random maximal matching built greedily over the edges in uniformly random
    order (computed in parallel rounds of locally-minimal edges, which gives
    the same matching as the sequential greedy pass). Note that greedy random
    maximal matchings are not uniform over the set of maximal matchings
    (uniform sampling is intractable in general). A round lasts the slowest
    matched exchange, ``max(latency + size / bandwidth)`` over its edges
    (1 time unit on the complete graph). Two engines compute the same rounds
    (``engine``): ``vector``, numpy over all pairs at once, one SimPy timeout
    per round; and ``des``, every node a SimPy process and every exchange a
    message in flight for its edge's time, slower (about 10**3 times at
    ``n = 1000``) and there to cross-validate the vector engine. ``auto``
    picks ``vector``; with one seed both give the same trajectories.
``edge``
    One uniformly random edge per step. Steps are instantaneous exchanges at
    rate ``n / 2`` per time unit, i.e. a step lasts ``2 / n``: ``n / 2`` steps
    (as many exchanges as one perfect matching) take one time unit. The clock
    advances by one SimPy timeout per recorded chunk of steps.
``async``
    Every node is a SimPy process waking on its own Poisson clock (rate
    ``wake_rate``) and gossiping with a uniformly random neighbour; the
    exchange takes the edge's ``latency + size / bandwidth`` and the values in
    flight are the ones sent: at delivery each honest end moves toward the
    value its peer sent at the start, ``x_i += step(v_peer - x_i(now))``. With
    ``availability < 1`` each node is a worker of :mod:`sim.failures` going up
    and down; an offline node neither starts exchanges (its Poisson wake-ups
    while down are skipped, which by memorylessness pauses its clock) nor
    is chosen as a peer, and an exchange delivered to an offline node is lost
    at that end. ``rounds`` is then the simulated horizon.

    Speed (see :attr:`GossipSystem.async_path`): a wake is one SimPy timeout;
    random numbers come in per-node blocks drawn for all nodes at once from
    one stream per concern (``wake``, ``partners``, ``noise``); scalar values
    live in a list of floats; without churn, deliveries are queued with their
    due time and applied, in due order, by the next wake (or record) after it
    instead of by an event of their own -- nothing reads a value in between,
    so the trajectory is the same; ``D`` is computed at record times only.
    An exchange then costs about 1.6 wakes of a bare SimPy process among
    ``n = 1000`` (about 3 to 3.5 bare single-process timeouts).

Noise (``noise = s``): every honest node adds fresh ``N(0, s**2)`` per
coordinate before the averaging of each round (``matching``) or step
(``edge``); in ``async`` a node adds it when it wakes, before sending.

Records (every ``record_every`` rounds/steps, or time units for ``async``;
record 0 is the initial state) carry the simulated time, the exchange count,
the honest disagreement ``D = sum_honest |x_i - m|**2``, the honest mean ``m``,
``|m - m_0|``, and with a stubborn attacker at ``b`` the gap
``mean_c(m - b)``, the progress of ``m`` toward ``b`` along ``b - m_0`` and
whether every honest node is farther than ``tau`` from ``b``. Records live in
preallocated arrays.

The complete graph is never built: partners are drawn directly and
neighbourhood sums are O(1) per node, so the vectorised matching engine runs
``n = 10**5`` in milliseconds per round.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import networkx as nx
import numpy as np
import simpy
from simpy import Timeout

from .adversaries import (
    ADVERSARIES,
    DEFAULT_VALUES,
    AdaptiveClip,
    Adversary,
    Neighbourhood,
    NoDefence,
    Stubborn,
    View,
    make_adversary,
    make_defence,
)
from .errors import (
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)
from .results import Estimate, mean_ci
from .rng import Streams

__all__ = [
    "PROTOCOLS",
    "ASYNC_PATHS",
    "ENGINES",
    "GossipConfig",
    "GossipSystem",
    "Records",
    "gossip_model",
    "random_maximal_matching",
    "predictions",
    "summarize_runs",
]

PROTOCOLS = ("matching", "edge", "async")
#: Size of the complete graph when neither ``nodes`` nor the spec gives one.
DEFAULT_COMPLETE_NODES = 16
#: Implementation paths of the ``async`` protocol (see :attr:`GossipSystem.async_path`).
ASYNC_PATHS = ("auto", "merged", "events", "vector")
#: Engines of the ``matching`` protocol (see :attr:`GossipConfig.resolved_engine`).
ENGINES = ("auto", "des", "vector")
#: Largest ``n**2 * steps`` (disagreement) or ``n * steps`` (mean) for which the
#: exact recursions of :mod:`sim.analytic` are evaluated for a report.
_EXACT_BUDGET = 2e9


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class GossipConfig:
    """One gossip experiment, validated before anything runs.

    Parameters
    ----------
    topology : str
        Topology spec ``NAME[:key=value,...]`` from :mod:`topologies` (for
        example ``complete``, ``ring``, ``torus:dims=4x4``); a label only when
        ``graph`` is given.
    nodes : int or None
        Number of nodes ``n`` (adversaries included) for families sized by one
        number (``--nodes``); when neither it nor the spec gives a size, the
        complete graph has 16 nodes. A value that contradicts the size the spec
        gives is refused.
    protocol : {"matching", "edge", "async"}
    rounds : int
        Matching rounds, edge steps, or (``async``) simulated time units.
    noise : float
        Standard deviation ``s`` of the per-round noise (>= 0).
    dim : int
        Dimension of every node's value.
    adversary : {"none", "stubborn", "alie", "dissensus", "signflip"}
    num_adversaries : int or None
        Number of adversarial nodes (default 1 with an adversary, else 0).
    adversary_value : float or None
        ``b`` (stubborn), ``z`` (ALIE), ``eps`` (dissensus); per-kind default.
    adversary_nodes : tuple of int or None
        Positions (in the graph's node order) of the adversaries; default the
        first ``num_adversaries``.
    clip : float or None
        Fixed trust-region radius ``tau`` for honest nodes.
    adaptive_clip : bool
        Self-centred clipping with the ClippedGossip oracle radius.
    record_every : int
        Record every this many rounds/steps (time units for ``async``).
    burn_in : int
        Rounds/steps (time for ``async``) excluded from the noise-floor average.
    init_mean, init_std : float
        Honest initial values are i.i.d. ``N(init_mean, init_std**2)``.
    wake_rate : float
        Poisson wake-up rate of each node (``async``).
    size : float
        Message size; an exchange over an edge takes ``latency + size / bandwidth``.
    latency, bandwidth : float
        Defaults for edges without those attributes (1 and infinity).
    availability, mean_downtime : float
        Churn of nodes in ``async`` (:mod:`sim.failures`; availability 1 = none).
    topology_seed : int or None
        Seed of random topology families (the graph is fixed across replications).
    engine : {"auto", "des", "vector"}
        How ``matching`` rounds are computed: ``vector`` (numpy over all
        pairs at once), ``des`` (every node a SimPy process, every exchange a
        message in flight; slower, for cross-validation) or ``auto`` (see
        :attr:`resolved_engine`). ``edge`` and ``async`` have only their DES.
    graph : networkx.Graph or None
        A ready graph to use instead of building ``topology``.
    """

    topology: str = "complete"
    nodes: int | None = None
    protocol: str = "matching"
    rounds: int = 50
    noise: float = 0.0
    dim: int = 1
    adversary: str = "none"
    num_adversaries: int | None = None
    adversary_value: float | None = None
    adversary_nodes: tuple[int, ...] | None = None
    clip: float | None = None
    adaptive_clip: bool = False
    record_every: int = 1
    burn_in: int = 0
    init_mean: float = 0.0
    init_std: float = 1.0
    wake_rate: float = 1.0
    size: float = 1.0
    latency: float = 1.0
    bandwidth: float = math.inf
    availability: float = 1.0
    mean_downtime: float = 1.0
    topology_seed: int | None = None
    engine: str = "auto"
    graph: nx.Graph | None = field(default=None, repr=False, compare=False)
    _net: _Network | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice("protocol", self.protocol, PROTOCOLS)
        check_choice("engine", self.engine, ENGINES)
        if self.protocol != "matching":
            check(self.engine != "vector", "engine", f"des or auto for protocol {self.protocol}",
                  self.engine)
        check_int("rounds", self.rounds, low=1)
        check_nonnegative("noise", self.noise)
        check_int("dim", self.dim, low=1)
        check_choice("adversary", self.adversary, ADVERSARIES)
        if self.clip is not None:
            check_nonnegative("clip", self.clip)
        check(not (self.adaptive_clip and self.clip is not None), "clip",
              "unset when adaptive clipping is on", self.clip)
        check_int("record_every", self.record_every, low=1)
        check_int("burn_in", self.burn_in, low=0)
        check(math.isfinite(float(self.init_mean)), "init_mean", "finite", self.init_mean)
        check_nonnegative("init_std", self.init_std)
        check_positive("wake_rate", self.wake_rate)
        check_nonnegative("size", self.size)
        check_nonnegative("latency", self.latency)
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        check_probability("availability", self.availability, open_low=True)
        check_positive("mean_downtime", self.mean_downtime)
        if self.adversary_value is not None:
            check(math.isfinite(float(self.adversary_value)), "adversary_value", "finite",
                  self.adversary_value)
        net = _Network.build(self)
        object.__setattr__(self, "_net", net)
        n = net.n
        if self.protocol == "matching" and net.complete:
            check(n % 2 == 0, "nodes", "even for protocol matching on the complete graph", n)
        k = self.num_adversaries
        if self.adversary_nodes is not None:
            check(self.adversary != "none", "adversary_nodes", "unset without an adversary kind",
                  self.adversary_nodes)
            pos = tuple(check_int("adversary_nodes", p, low=0, high=n - 1) for p in self.adversary_nodes)
            check(len(set(pos)) == len(pos), "adversary_nodes", "distinct positions", self.adversary_nodes)
            check(k is None or k == len(pos), "num_adversaries",
                  f"equal to the number of adversary_nodes ({len(pos)})", k)
            check(len(pos) < n, "adversary_nodes", f"fewer than the {n} nodes", self.adversary_nodes)
            object.__setattr__(self, "adversary_nodes", pos)
            k = len(pos)
        if k is None:
            k = 0 if self.adversary == "none" else 1
        k = check_int("num_adversaries", k, low=0, high=n - 1)
        if self.adversary == "none":
            check(k == 0, "num_adversaries", "0 without an adversary kind", k)
        object.__setattr__(self, "num_adversaries", k)

    # -- derived ---------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of nodes, adversaries included."""
        assert self._net is not None
        return self._net.n

    @property
    def complete(self) -> bool:
        """True when the topology is the (implicit) complete graph."""
        assert self._net is not None
        return self._net.complete

    @property
    def adversary_positions(self) -> tuple[int, ...]:
        """Node positions of the adversaries."""
        if self.adversary_nodes is not None:
            return tuple(self.adversary_nodes)
        return tuple(range(int(self.num_adversaries or 0)))

    @property
    def honest_count(self) -> int:
        """Number of honest nodes."""
        return self.n - len(self.adversary_positions)

    @property
    def value(self) -> float:
        """The adversary parameter actually used (per-kind default when unset)."""
        return DEFAULT_VALUES[self.adversary] if self.adversary_value is None else float(self.adversary_value)

    @property
    def network_graph(self) -> nx.Graph:
        """The graph as networkx (the complete graph is built on demand)."""
        assert self._net is not None
        if self._net.graph is None:
            return nx.complete_graph(self.n)
        return self._net.graph

    @property
    def resolved_engine(self) -> str:
        """The engine that runs: ``"vector"`` or ``"des"``."""
        if self.protocol != "matching":
            return "des"
        return "vector" if self.engine == "auto" else self.engine

    @property
    def engine_reason(self) -> str:
        """One sentence saying why :attr:`resolved_engine` runs."""
        if self.protocol == "async":
            return ("async: only the per-node DES models Poisson clocks, exchanges in flight "
                    "and churn")
        if self.protocol == "edge":
            return ("edge: single-pair steps are simulated one at a time in order "
                    "(there is no vectorised engine)")
        if self.engine == "auto":
            return ("auto: matching rounds are synchronous, so the vectorised engine computes "
                    "the same rounds as the per-node DES (same matching, noise, adversaries, "
                    "clipping and round time)")
        return f"requested: engine {self.engine}"

    def record_steps(self) -> np.ndarray:
        """Round/step (or time) index of every record: 0, k, 2k, ..., and ``rounds``."""
        s = np.arange(0, self.rounds + 1, self.record_every, dtype=np.int64)
        if s[-1] != self.rounds:
            s = np.append(s, self.rounds)
        return s


@dataclass
class _Network:
    """The topology in arrays: node order, edge endpoints, per-edge exchange times."""

    n: int
    complete: bool
    graph: nx.Graph | None
    u: np.ndarray  # edge endpoints (positions), empty for the complete graph
    v: np.ndarray
    delay: np.ndarray  # latency + size / bandwidth per edge
    indptr: np.ndarray  # CSR neighbour lists (sparse graphs)
    indices: np.ndarray
    nbr_delay: np.ndarray
    complete_delay: float

    @classmethod
    def build(cls, cfg: GossipConfig) -> _Network:
        graph = cfg.graph
        complete = False
        lat, bw = cfg.latency, cfg.bandwidth
        if graph is not None and cfg.nodes is not None:
            check(cfg.nodes == graph.number_of_nodes(), "nodes",
                  f"unset or equal to the {graph.number_of_nodes()} nodes of the given graph",
                  cfg.nodes)
        if graph is None:
            if cfg.nodes is not None:
                check_int("nodes", cfg.nodes, low=2)
            family, params = _spec_family(cfg.topology)
            if family == "complete":
                from topologies import num_nodes

                nodes = cfg.nodes
                if nodes is None and "n" not in params:
                    nodes = DEFAULT_COMPLETE_NODES
                n = num_nodes(cfg.topology, nodes=nodes)
                check_int("nodes", n, low=2)
                lat = float(params.get("latency", lat))
                bw = float(params.get("bandwidth", bw))
                complete = True
            else:
                graph = _build_topology(cfg.topology, cfg.nodes, cfg.topology_seed)
        if complete:
            n = int(n)  # type: ignore[arg-type]
            empty = np.empty(0, dtype=np.int64)
            d = lat + (0.0 if math.isinf(bw) else cfg.size / bw)
            return cls(n, True, None, empty, empty, np.empty(0), empty, empty, np.empty(0), d)
        assert graph is not None
        check_int("nodes", graph.number_of_nodes(), low=2)
        check(nx.is_connected(graph) if not graph.is_directed() else nx.is_weakly_connected(graph),
              "topology", "a connected graph", cfg.topology)
        graph = nx.Graph(graph) if graph.is_directed() or graph.is_multigraph() else graph
        if nx.number_of_selfloops(graph):  # self-loops carry no exchange: drop them everywhere
            graph = graph.copy()
            graph.remove_edges_from(list(nx.selfloop_edges(graph)))
        nodes = list(graph.nodes())
        pos = {node: i for i, node in enumerate(nodes)}
        m = graph.number_of_edges()
        u = np.empty(m, dtype=np.int64)
        v = np.empty(m, dtype=np.int64)
        delay = np.empty(m)
        for k, (a, b, attrs) in enumerate(graph.edges(data=True)):
            u[k], v[k] = pos[a], pos[b]
            lat = float(attrs.get("latency", cfg.latency))
            bw = float(attrs.get("bandwidth", cfg.bandwidth))
            delay[k] = lat + (0.0 if math.isinf(bw) else cfg.size / bw)
        keep = u != v  # self-loops carry no exchange
        u, v, delay = u[keep], v[keep], delay[keep]
        n = len(nodes)
        src = np.concatenate([u, v])
        dst = np.concatenate([v, u])
        dd = np.concatenate([delay, delay])
        order = np.lexsort((dst, src))
        src, dst, dd = src[order], dst[order], dd[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        indptr = np.cumsum(indptr)
        return cls(n, False, graph, u, v, delay, indptr, dst, dd, 1.0)


def _spec_family(spec: str) -> tuple[str | None, dict[str, Any]]:
    """Family name of a topology spec (None for files and user builders) and its parameters."""
    check(isinstance(spec, str) and spec.strip() != "", "topology", "a non-empty spec string", spec)
    from topologies import parse_spec

    parsed = parse_spec(spec)
    return parsed.family, dict(parsed.params)


def _build_topology(spec: str, nodes: int | None, seed: int | None) -> nx.Graph:
    import topologies

    return topologies.build(spec, nodes=nodes, seed=seed)


# --------------------------------------------------------------------------- matchings


def random_maximal_matching(u: np.ndarray, v: np.ndarray, n: int, *,
                            rng: np.random.Generator) -> np.ndarray:
    """Indices of the edges of a random greedy maximal matching.

    Equivalent to scanning the edges in uniformly random order and keeping
    each edge whose endpoints are both still free, computed in parallel: in
    each pass every live edge whose random priority is the smallest at both of
    its endpoints joins the matching, and edges touching a matched node die.

    Parameters
    ----------
    u, v : ndarray of int
        Edge endpoints (positions in ``range(n)``).
    n : int
        Number of nodes.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int
        Indices into ``u``/``v`` of the matched edges.
    """
    m = u.size
    pri = rng.random(m)
    alive = np.ones(m, dtype=bool)
    matched = np.zeros(n, dtype=bool)
    chosen = []
    best = np.empty(n)
    while True:
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        p = pri[idx]
        uu, vv = u[idx], v[idx]
        best.fill(np.inf)
        np.minimum.at(best, uu, p)
        np.minimum.at(best, vv, p)
        win = (best[uu] == p) & (best[vv] == p)
        w = idx[win]
        chosen.append(w)
        matched[u[w]] = True
        matched[v[w]] = True
        alive[idx] = ~(matched[uu] | matched[vv])
    return np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)


# --------------------------------------------------------------------------- records


class Records:
    """Preallocated per-record arrays of one replication (see the module docstring)."""

    def __init__(self, steps: np.ndarray, dim: int, target: np.ndarray | None, tau: float | None) -> None:
        r = steps.size
        self.steps = steps
        self.time = np.full(r, np.nan)
        self.exchanges = np.zeros(r, dtype=np.int64)
        self.disagreement = np.full(r, np.nan)
        self.honest_mean = np.full((r, dim), np.nan)
        self.mean_shift = np.full(r, np.nan)
        self.target = target
        self.tau = tau
        self.gap = np.full(r, np.nan) if target is not None else None
        self.toward = np.full(r, np.nan) if target is not None else None
        self.far = np.zeros(r, dtype=bool) if target is not None else None
        self._m0: np.ndarray | None = None
        self._dir: np.ndarray | None = None
        self.filled = 0

    def record(self, k: int, time: float, exchanges: int, hx: np.ndarray) -> None:
        """Fill record ``k`` from the honest values ``hx`` (shape ``(h, d)``)."""
        m = hx.mean(axis=0)
        dev = hx - m
        self.time[k] = time
        self.exchanges[k] = exchanges
        self.disagreement[k] = float(np.einsum("ij,ij->", dev, dev))
        self.honest_mean[k] = m
        if self._m0 is None:
            self._m0 = m.copy()
            if self.target is not None:
                g = self.target - m
                norm = float(np.linalg.norm(g))
                self._dir = g / norm if norm > 0 else np.zeros_like(g)
        self.mean_shift[k] = float(np.linalg.norm(m - self._m0))
        if self.target is not None:
            self.gap[k] = float(np.mean(m - self.target))  # type: ignore[index]
            self.toward[k] = float((m - self._m0) @ self._dir)  # type: ignore[index, operator]
            if self.tau is not None:
                dist = np.sqrt(np.einsum("ij,ij->i", hx - self.target, hx - self.target))
                self.far[k] = bool(dist.min() > self.tau)  # type: ignore[index]
        self.filled = k + 1


# --------------------------------------------------------------------------- the system


class GossipSystem:
    """A built gossip system: values, adversaries, defence, clock and recorder.

    Build and wire everything in the constructor, then :meth:`run` once.

    Parameters
    ----------
    config : GossipConfig
    streams : Streams
        Streams ``init``, ``partners``, ``noise``, ``wake`` (one each, for all nodes) and
        ``failures:*`` are independent, so changing one concern never changes
        another's draws.
    path : {"auto", "merged", "events", "vector"}
        Implementation path of the ``async`` protocol (see :attr:`async_path`);
        ``auto`` takes the fastest that applies. The others exist to check the
        paths against each other; asking for one that does not apply raises
        :class:`~sim.errors.ConfigError`.
    """

    def __init__(self, config: GossipConfig, streams: Streams, *, path: str = "auto") -> None:
        check_choice("path", path, ASYNC_PATHS)
        self.cfg = config
        net = config._net
        assert net is not None
        self.net = net
        self.n = n = net.n
        self.d = d = config.dim
        self.env = simpy.Environment()
        self.rng_partners = streams.rng("partners")
        self.rng_noise = streams.rng("noise")
        self.streams = streams
        adv_pos = np.asarray(config.adversary_positions, dtype=np.int64)
        self.is_adv = np.zeros(n, dtype=bool)
        self.is_adv[adv_pos] = True
        self.honest = ~self.is_adv
        self.hidx = np.flatnonzero(self.honest)
        self.n_adv = int(adv_pos.size)
        init = streams.rng("init")
        self.x = config.init_mean + config.init_std * init.standard_normal((n, d))
        self.adversary: Adversary | None = make_adversary(config.adversary, config.value) if self.n_adv else None
        if self.adversary is not None:
            iv = self.adversary.initial_value(d)
            if iv is not None:
                self.x[adv_pos] = iv
        self.defence = make_defence(config.clip, config.adaptive_clip)
        if net.complete:
            self.nbhd = Neighbourhood(self.honest)
        else:
            g = net.graph
            assert g is not None
            adj = nx.to_scipy_sparse_array(g, nodelist=list(g.nodes()), weight=None, format="csr")
            self.nbhd = Neighbourhood(self.honest, adj)
        self.view = View(self.x, self.honest, self.nbhd)
        target = self.adversary.target(d) if self.adversary is not None else None
        self.records = Records(config.record_steps(), d, target, config.clip)
        self.exchanges = 0
        self._ran = False
        self._workers: list[Any] | None = None
        self._allow_scalar = path in ("auto", "merged", "events")
        self._allow_lazy = path in ("auto", "merged")
        self._lazy = False
        self._xs: list[float] | None = None
        self._async_path = ""
        self._stub_value = self.adversary.value if isinstance(self.adversary, Stubborn) else 0.0
        if config.protocol == "async":
            self._setup_async()  # wired now, started by run()
            check(path in ("auto", self.async_path), "path",
                  f"auto or {self.async_path} for this configuration", path)

    # -- shared pieces ------------------------------------------------------
    def _record(self, k: int) -> None:
        if self._lazy and self._queue:
            self._flush(self.env.now)
        if self._xs is not None:
            self.x[:, 0] = self._xs
        self.records.record(k, self.env.now, self.exchanges, self.x[self.hidx])

    def _add_noise(self) -> None:
        s = self.cfg.noise
        if s > 0:
            if self.n_adv:
                self.x[self.hidx] += s * self.rng_noise.standard_normal((self.hidx.size, self.d))
            else:
                self.x += s * self.rng_noise.standard_normal((self.n, self.d))

    def _pair_update(self, a: np.ndarray, b: np.ndarray) -> None:
        """Exchange over disjoint pairs ``(a[k], b[k])`` simultaneously."""
        x = self.x
        xa, xb = x[a], x[b]
        if self.n_adv == 0 and isinstance(self.defence, NoDefence):
            avg = (xa + xb) * 0.5
            x[a] = avg
            x[b] = avg
            return
        va, vb = xa, xb  # values sent by a (to b) and by b (to a)
        if self.n_adv:
            adv_a, adv_b = self.is_adv[a], self.is_adv[b]
            if adv_a.any():
                va = xa.copy()
                va[adv_a] = self.adversary.send(self.view, a[adv_a], b[adv_a])  # type: ignore[union-attr]
            if adv_b.any():
                vb = xb.copy()
                vb[adv_b] = self.adversary.send(self.view, b[adv_b], a[adv_b])  # type: ignore[union-attr]
        new_a = xa + self.defence.step(self.view, vb - xa, a)
        new_b = xb + self.defence.step(self.view, va - xb, b)
        if self.n_adv:
            new_a[adv_a] = xa[adv_a]
            new_b[adv_b] = xb[adv_b]
        x[a] = new_a
        x[b] = new_b

    # -- matching -----------------------------------------------------------
    def _matching_process(self):
        env, net, cfg = self.env, self.net, self.cfg
        steps = self.records.steps
        k = 1
        for r in range(1, cfg.rounds + 1):
            if net.complete:
                perm = self.rng_partners.permutation(self.n)
                a, b = perm[0::2], perm[1::2]
                duration = net.complete_delay
            else:
                e = random_maximal_matching(net.u, net.v, self.n, rng=self.rng_partners)
                a, b = net.u[e], net.v[e]
                duration = float(net.delay[e].max()) if e.size else 0.0
            yield env.timeout(duration)
            self._add_noise()
            self._pair_update(a, b)
            self.exchanges += int(a.size)
            if k < steps.size and steps[k] == r:
                self._record(k)
                k += 1

    # -- matching, per-node DES engine -----------------------------------------
    #
    # The same protocol as :meth:`_matching_process`, with every node a SimPy
    # process and every exchange a message in flight. A coordinator draws the
    # round's matching and noise exactly as the vectorised engine does (same
    # streams, same order), then runs three phases at the round's start: every
    # node adds its noise; every matched node computes what it sends (an
    # adversary's value, or its own) and its clipping radius from the state
    # after noise and before any update, and posts the message as a timeout
    # of the edge's exchange time; every node then waits for its partner's
    # message and moves toward it. The round ends with the last delivery, so
    # it lasts the slowest matched exchange, as in the vectorised engine.

    def _setup_matching_des(self) -> None:
        n, env = self.n, self.env
        self._partner = [-1] * n
        self._pdelay = [0.0] * n
        self._inbox: list[Any] = [None] * n
        self._noise_row = np.full(n, -1, dtype=np.int64)
        self._noise_row[self.hidx if self.n_adv else np.arange(n)] = np.arange(
            self.hidx.size if self.n_adv else n)
        self._round_noise: np.ndarray | None = None
        self._start = env.event()
        self._go = env.event()
        self._recv = env.event()
        self._done = env.event()
        self._matched = 0
        self._arrived = 0
        for i in range(n):
            env.process(self._des_node(i))

    def _des_coordinator(self):
        """Draw each round's matching and noise, drive the phases, record."""
        env, net, cfg = self.env, self.net, self.cfg
        steps = self.records.steps
        k = 1
        for r in range(1, cfg.rounds + 1):
            if net.complete:
                perm = self.rng_partners.permutation(self.n)
                a, b = perm[0::2], perm[1::2]
                dl = np.full(a.size, net.complete_delay)
            else:
                e = random_maximal_matching(net.u, net.v, self.n, rng=self.rng_partners)
                a, b, dl = net.u[e], net.v[e], net.delay[e]
            partner, pdelay = self._partner, self._pdelay
            for i in range(self.n):
                partner[i] = -1
            for p, q, t in zip(a.tolist(), b.tolist(), dl.tolist(), strict=True):
                partner[p], partner[q] = q, p
                pdelay[p] = pdelay[q] = t
            s = cfg.noise
            if s > 0:
                rows = self.hidx.size if self.n_adv else self.n
                self._round_noise = s * self.rng_noise.standard_normal((rows, self.d))
            self._matched, self._arrived = 2 * int(a.size), 0
            self._go, self._recv, self._done = env.event(), env.event(), env.event()
            start, self._start = self._start, env.event()
            start.succeed(r)
            yield start  # every node has added its noise
            self._go.succeed()
            yield self._go  # every matched node has posted its message
            self._recv.succeed()
            yield self._recv  # every matched node waits for its partner's message
            if self._matched:
                yield self._done  # the last delivery of the round
            self.exchanges += int(a.size)
            if k < steps.size and steps[k] == r:
                self._record(k)
                k += 1

    def _des_node(self, i: int):
        """Process of node ``i`` in the per-node matching engine."""
        env, x = self.env, self.x
        honest = bool(self.honest[i])
        row = int(self._noise_row[i])
        idx = np.array([i])
        adaptive = isinstance(self.defence, AdaptiveClip)
        fixed = self.cfg.clip if self.cfg.clip is not None else math.inf
        while True:
            yield self._start
            if honest and self._round_noise is not None:
                x[i] += self._round_noise[row]
            yield self._go
            j = self._partner[i]
            if j < 0:
                continue  # unmatched this round
            sent = self._sent(i, j)
            # the radius from the state after noise and before any update
            tau = float(self.defence.radius(self.view, idx)[0]) if honest and adaptive else fixed
            self._inbox[j] = env.timeout(self._pdelay[i], sent)
            yield self._recv
            received = yield self._inbox[i]
            if honest:
                diff = received - x[i]
                if tau < math.inf:
                    norm = math.sqrt(float(diff @ diff))
                    if norm > tau:
                        diff = diff * (tau / norm)
                x[i] += diff * 0.5
            self._arrived += 1
            if self._arrived == self._matched:
                self._done.succeed()

    # -- edge ---------------------------------------------------------------
    def _draw_edges(self, count: int) -> tuple[list[int], list[int]]:
        rng = self.rng_partners
        if self.net.complete:
            i = rng.integers(self.n, size=count)
            j = rng.integers(self.n - 1, size=count)
            j += j >= i
            return i.tolist(), j.tolist()
        e = rng.integers(self.net.u.size, size=count)
        return self.net.u[e].tolist(), self.net.v[e].tolist()

    def _edge_steps(self, count: int) -> None:
        """Run ``count`` single-edge steps (a scalar fast path where it applies)."""
        cfg = self.cfg
        ii, jj = self._draw_edges(count)
        adv = self.is_adv.tolist()
        tau = cfg.clip
        stub = self.adversary.value if isinstance(self.adversary, Stubborn) else None
        fast = self.d == 1 and not cfg.adaptive_clip and cfg.noise == 0
        if fast:
            xs = self.x[:, 0].tolist()
        for i, j in zip(ii, jj, strict=True):
            ai, aj = adv[i], adv[j]
            if not fast:
                self._add_noise()
                if not (ai and aj):
                    self._pair_update(np.array([i]), np.array([j]))
            elif not (ai or aj):
                xi, xj = xs[i], xs[j]
                diff = xj - xi
                if tau is not None:
                    diff = tau if diff > tau else (-tau if diff < -tau else diff)
                half = diff * 0.5
                xs[i] = xi + half
                xs[j] = xj - half
            elif ai and aj:
                continue
            elif stub is not None:
                h = j if ai else i
                xh = xs[h]
                diff = stub - xh
                if tau is not None:
                    diff = tau if diff > tau else (-tau if diff < -tau else diff)
                xs[h] = xh + diff * 0.5
            else:
                self.x[:, 0] = xs
                self._pair_update(np.array([i]), np.array([j]))
                xs = self.x[:, 0].tolist()
        if fast:
            self.x[:, 0] = xs
        self.exchanges += count

    def _edge_process(self):
        env = self.env
        steps = self.records.steps
        dt = 2.0 / self.n
        for k in range(1, steps.size):
            count = int(steps[k] - steps[k - 1])
            yield env.timeout(count * dt)
            self._edge_steps(count)
            self._record(k)

    # -- async --------------------------------------------------------------
    #
    # Speed. Each node is one SimPy process; a wake costs one timeout and an
    # exchange with a positive delay one more timeout carrying the values in
    # flight, whose callback applies the delivery (no process per exchange).
    # Random numbers come in blocks: each node holds a block of wake gaps, a
    # block of uniforms for the peer choice and (with noise) a block of
    # normals, drawn for all nodes at once at setup from the streams
    # ``wake``, ``partners`` and ``noise`` and refilled per node in chunks
    # from the same streams (the refill order is fixed by the event order, so
    # a seed still fixes every draw). With ``dim = 1`` and no omniscient
    # adversary or adaptive clip, values live in a Python list of floats
    # (the scalar path); otherwise each exchange goes through the vector code
    # shared with the other protocols. ``D`` and the means are computed only
    # at record times.

    def _setup_async(self) -> None:
        cfg, n, env = self.cfg, self.n, self.env
        self._workers = None
        if cfg.availability < 1.0:
            from .failures import FailureModel

            fm = FailureModel(env, self.streams)
            self._workers = [fm.add_worker(f"node{i}", availability=cfg.availability,
                                           mean_downtime=cfg.mean_downtime) for i in range(n)]
            fm.start()
        # a chunk covers the expected wakes of the horizon (plus slack), at most 64
        expect = cfg.wake_rate * cfg.rounds
        self._chunk = c = int(min(64, max(4, math.ceil(1.2 * expect + 3 * math.sqrt(expect) + 2))))
        self._mean_gap = 1.0 / cfg.wake_rate
        self._rng_wake = self.streams.rng("wake")
        gaps = self._rng_wake.exponential(self._mean_gap, size=(n, c)).tolist()
        self._direct_peers = self.net.complete and self._workers is None
        us = self._peer_block(np.arange(n), c)
        noisy = cfg.noise > 0
        zs: list[Any]
        if noisy:
            z = self.rng_noise.standard_normal(size=(n, c * self.d))
            zs = z.tolist() if self._scalar_ok else list(z.reshape(n, c, self.d))
        else:
            zs = [None] * n
        if not self.net.complete:
            self._csr_indices = self.net.indices.tolist()
            self._csr_delay = self.net.nbr_delay.tolist()
            self._csr_ptr = self.net.indptr.tolist()
        self._adv_list = self.is_adv.tolist()
        if self._scalar_ok:
            self._xs = []  # filled from ``x`` when the run starts
        delays = np.unique(self.net.nbr_delay) if not self.net.complete else [self.net.complete_delay]
        self._const_delay = float(delays[0]) if len(delays) == 1 else math.nan
        self._lazy = (self._scalar_ok and self._allow_lazy and self._workers is None
                      and float(np.min(delays)) > 0)
        if self._lazy:
            self._fifo = not math.isnan(self._const_delay)
            self._queue: Any = deque() if self._fifo else []
            self._seq = itertools.count()
            plain = self.net.complete and self.n_adv == 0 and cfg.clip is None
            node = self._async_merged_plain if plain else self._async_merged_node
            self._async_path = "merged"
        elif self._scalar_ok:
            node, self._async_path = self._async_scalar_node, "events"
        else:
            node, self._async_path = self._async_vector_node, "vector"
        # creating 1e5 processes would otherwise trigger a cascade of full
        # garbage collections (nothing created here is garbage)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            process = env.process
            for i in range(n):
                process(node(i, gaps[i], us[i], zs[i]))
        finally:
            if was_enabled:
                gc.enable()

    @property
    def async_path(self) -> str:
        """Implementation path of the ``async`` protocol (``""`` for the other protocols).

        ``merged``: scalar values, deliveries applied when next read (equal
        exchange times, no churn); ``events``: scalar values, one timeout per
        delivery; ``vector``: numpy rows through the shared adversary and
        defence code (any dimension, attack and clipping rule). All three give
        the same trajectories for the same seed where they apply (up to
        rounding).
        """
        return self._async_path

    @property
    def _scalar_ok(self) -> bool:
        """True when the async exchanges can run on Python floats (the scalar path)."""
        cfg = self.cfg
        return (self._allow_scalar and self.d == 1 and not cfg.adaptive_clip
                and cfg.adversary in ("none", "stubborn"))

    def _peer_block(self, nodes: np.ndarray, c: int) -> list[list[Any]]:
        """Peer draws of ``c`` wakes for each of ``nodes`` (stream ``partners``).

        On the complete graph without churn the peers themselves (uniform over
        the other nodes); otherwise uniforms in [0, 1) that :meth:`_pick`
        turns into an online neighbour.
        """
        rng = self.rng_partners
        if self._direct_peers:
            j = rng.integers(self.n - 1, size=(nodes.size, c))
            j += j >= nodes[:, None]
            return j.tolist()
        return rng.random(size=(nodes.size, c)).tolist()

    def _refill(self, i: int, with_noise: bool) -> tuple[list[float], list[Any], Any]:
        """Fresh blocks of wake gaps, peer draws and (scalar or vector) noise for node ``i``."""
        c = self._chunk
        gaps = self._rng_wake.exponential(self._mean_gap, size=c).tolist()
        us = self._peer_block(np.array([i]), c)[0]
        zs = None
        if with_noise:
            z = self.rng_noise.standard_normal(size=c * self.d)
            zs = z.tolist() if self._scalar_ok else z.reshape(c, self.d)
        return gaps, us, zs

    def _up(self, i: int) -> bool:
        return self._workers is None or self._workers[i].up

    def _pick(self, i: int, u: float) -> tuple[int, float] | None:
        """Peer of ``i`` and the exchange time, from one uniform ``u`` (None: nobody online).

        Uniform over the (online) neighbours: on the complete graph a rejection
        draw among the other nodes (falling back to a scan after 64 misses),
        on a sparse graph an index into the online neighbours.
        """
        workers = self._workers
        if self._direct_peers:
            return int(u), self.net.complete_delay
        if self.net.complete:
            n1 = self.n - 1
            j = int(u * n1)
            j += j >= i
            if workers is None or workers[j].up:
                return j, self.net.complete_delay
            rng = self.rng_partners
            for _ in range(64):
                j = int(rng.random() * n1)
                j += j >= i
                if workers[j].up:
                    return j, self.net.complete_delay
            cand = [j for j in range(self.n) if j != i and workers[j].up]
            if not cand:
                return None
            return cand[int(u * len(cand))], self.net.complete_delay
        lo, hi = self._csr_ptr[i], self._csr_ptr[i + 1]
        if hi == lo:
            return None
        idx = self._csr_indices
        if workers is None:
            k = lo + int(u * (hi - lo))
        else:
            ks = [k for k in range(lo, hi) if workers[idx[k]].up]
            if not ks:
                return None
            k = ks[int(u * len(ks))]
        return idx[k], self._csr_delay[k]

    def _async_scalar_node(self, i: int, gaps: list[float], us: list[float], zs: list[float] | None):
        """Process of node ``i`` on the scalar path (values in ``self._xs``)."""
        env = self.env
        timeout = env.timeout
        xs = self._xs
        adv = self._adv_list
        stub = self._stub_value
        deliver = self._deliver_scalar_event
        deliver_now = self._deliver_scalar
        fast_pick = self._direct_peers
        const_delay = self.net.complete_delay
        pick = self._pick
        workers = self._workers
        adv_i = adv[i]
        s = 0.0 if adv_i else self.cfg.noise
        c, k = len(gaps), 0
        while True:
            if k == c:
                gaps, us, zs = self._refill(i, zs is not None)
                k = 0
            yield timeout(gaps[k])
            u = us[k]
            kk = k
            k += 1
            if workers is not None and not workers[i].up:
                continue
            if fast_pick:
                j, delay = u, const_delay
            else:
                got = pick(i, u)
                if got is None:
                    continue
                j, delay = got
            if s:
                xs[i] += s * zs[kk]  # type: ignore[index]
            vi = stub if adv_i else xs[i]
            vj = stub if adv[j] else xs[j]
            if delay > 0:
                timeout(delay, (i, j, vi, vj)).callbacks.append(deliver)
            else:
                deliver_now(i, j, vi, vj)

    def _async_merged_node(self, i: int, gaps: list[float], us: list[Any], zs: list[float] | None):
        """Process of node ``i`` on the scalar path with deliveries merged into the next wake.

        Used without churn when exchanges take time: an exchange started at
        ``t`` is queued with its due time ``t + delay`` and the values sent,
        and is applied -- in due order, before anything else happens at a
        later time -- by whichever node wakes next (or by the recorder). No
        value is read between a delivery's due time and that moment, so the
        trajectories are those of one delivery event per exchange (the
        ``events`` path), at the cost of none. With one exchange time for
        every edge the queue is a FIFO; otherwise a heap. The node keeps its
        own clock ``now += gap``, the same float sum SimPy makes.
        """
        env = self.env
        timeout = env.timeout
        xs = self._xs
        adv = self._adv_list
        stub = self._stub_value
        queue = self._queue
        flush = self._flush
        fifo = self._fifo
        push = queue.append if fifo else partial(heapq.heappush, queue)
        seq = self._seq
        direct = self._direct_peers
        delay = self._const_delay
        pick = self._pick
        adv_i = adv[i]
        s = 0.0 if adv_i else self.cfg.noise
        now = env.now
        c, k = len(gaps), 0
        while True:
            if k == c:
                gaps, us, zs = self._refill(i, zs is not None)
                k = 0
            g = gaps[k]
            yield timeout(g)
            now += g
            if queue and queue[0][0] <= now:
                flush(now)
            if direct:
                j = us[k]
            else:
                got = pick(i, us[k])
                if got is None:
                    k += 1
                    continue
                j, delay = got
            if s:
                xs[i] += s * zs[k]  # type: ignore[index]
            k += 1
            vi = stub if adv_i else xs[i]
            vj = stub if adv[j] else xs[j]
            if fifo:
                push((now + delay, i, j, vi, vj))
            else:
                push((now + delay, next(seq), i, j, vi, vj))

    def _async_merged_plain(self, i: int, gaps: list[float], js: list[int], zs: list[float] | None):
        """:meth:`_async_merged_node` specialised to the complete graph, all honest, no clip.

        The hot path of the benchmark: the due deliveries are applied inline.
        """
        env = self.env
        xs = self._xs
        queue = self._queue
        push = queue.append
        pop = queue.popleft
        delay = self._const_delay
        s = self.cfg.noise
        now = env.now
        while True:
            for k in range(len(gaps)):
                g = gaps[k]
                yield Timeout(env, g)
                now += g
                if queue and queue[0][0] <= now:
                    m = len(queue)
                    while queue and queue[0][0] <= now:
                        _, a, b, va, vb = pop()
                        xs[a] = (xs[a] + vb) * 0.5
                        xs[b] = (xs[b] + va) * 0.5
                    self.exchanges += m - len(queue)
                if s:
                    xs[i] += s * zs[k]  # type: ignore[index]
                j = js[k]
                push((now + delay, i, j, xs[i], xs[j]))
            gaps, js, zs = self._refill(i, zs is not None)

    def _flush(self, now: float) -> None:
        """Apply, in due order, the queued deliveries due by ``now`` (merged path)."""
        queue, fifo = self._queue, self._fifo
        pop = queue.popleft if fifo else partial(heapq.heappop, queue)
        deliver = self._deliver_scalar
        while queue and queue[0][0] <= now:
            item = pop()
            if fifo:
                _, i, j, vi, vj = item
            else:
                _, _, i, j, vi, vj = item
            deliver(i, j, vi, vj)

    def _deliver_scalar_event(self, event: simpy.Event) -> None:
        i, j, vi, vj = event.value
        self._deliver_scalar(i, j, vi, vj)

    def _deliver_scalar(self, i: int, j: int, vi: float, vj: float) -> None:
        """Both ends move toward the value the other sent (honest and online ends only)."""
        xs, adv, tau, workers = self._xs, self._adv_list, self.cfg.clip, self._workers
        if not adv[i] and (workers is None or workers[i].up):
            diff = vj - xs[i]
            if tau is not None:
                diff = tau if diff > tau else (-tau if diff < -tau else diff)
            xs[i] += diff * 0.5
        if not adv[j] and (workers is None or workers[j].up):
            diff = vi - xs[j]
            if tau is not None:
                diff = tau if diff > tau else (-tau if diff < -tau else diff)
            xs[j] += diff * 0.5
        self.exchanges += 1

    def _async_vector_node(self, i: int, gaps: list[float], us: list[float], zs: np.ndarray | None):
        """Process of node ``i`` on the vector path (any dimension, adversary and defence)."""
        env = self.env
        timeout = env.timeout
        deliver = self._deliver_event
        pick = self._pick
        s = self.cfg.noise if self.honest[i] else 0.0
        c, k = len(gaps), 0
        while True:
            if k == c:
                gaps, us, zs = self._refill(i, zs is not None)
                k = 0
            yield timeout(gaps[k])
            u = us[k]
            kk = k
            k += 1
            if not self._up(i):
                continue
            got = pick(i, u)
            if got is None:
                continue
            j, delay = got
            if s:
                self.x[i] += s * zs[kk]  # type: ignore[index]
            v_ij, v_ji = self._sent(i, j), self._sent(j, i)
            if delay > 0:
                timeout(delay, (i, j, v_ij, v_ji)).callbacks.append(deliver)
            else:
                self._deliver(i, j, v_ij, v_ji)

    def _sent(self, src: int, dst: int) -> np.ndarray:
        if self.is_adv[src]:
            return self.adversary.send(self.view, np.array([src]), np.array([dst]))[0]  # type: ignore[union-attr]
        return self.x[src].copy()

    def _deliver_event(self, event: simpy.Event) -> None:
        self._deliver(*event.value)

    def _deliver(self, i: int, j: int, v_ij: np.ndarray, v_ji: np.ndarray) -> None:
        for dst, val in ((i, v_ji), (j, v_ij)):
            if self.honest[dst] and self._up(dst):
                idx = np.array([dst])
                self.x[dst] += self.defence.step(self.view, (val - self.x[dst])[None, :], idx)[0]
        self.exchanges += 1

    def _async_recorder(self):
        steps = self.records.steps
        for k in range(1, steps.size):
            yield self.env.timeout(float(steps[k] - steps[k - 1]))
            self._record(k)

    # -- run ----------------------------------------------------------------
    def run(self) -> Records:
        """Run the protocol to the horizon and return the filled records."""
        check(not self._ran, "system", "run once", "run()")
        self._ran = True
        if self._xs is not None:
            self._xs[:] = self.x[:, 0].tolist()
        self._record(0)
        proto = self.cfg.protocol
        if proto == "matching":
            if self.cfg.resolved_engine == "des":
                self._setup_matching_des()
                proc = self.env.process(self._des_coordinator())
            else:
                proc = self.env.process(self._matching_process())
        elif proto == "edge":
            proc = self.env.process(self._edge_process())
        else:
            proc = self.env.process(self._async_recorder())
        # An async run allocates an event per wake, which would trigger
        # collections that scan every node's process; none of what it creates
        # is cyclic garbage, so the collector is paused for the run.
        was_enabled = gc.isenabled()
        if proto == "async":
            gc.disable()
        try:
            self.env.run(until=proc)
        finally:
            if was_enabled:
                gc.enable()
        if self._xs is not None:
            self.x[:, 0] = self._xs
        return self.records


# --------------------------------------------------------------------------- the model


def gossip_model(config: GossipConfig, streams: Streams) -> dict[str, Any]:
    """One replication of a gossip experiment (for :func:`sim.runner.replicate`).

    Parameters
    ----------
    config : GossipConfig
    streams : Streams
        The replication's streams.

    Returns
    -------
    dict
        Flat scalar metrics -- ``final_disagreement``, ``noise_floor`` (mean ``D`` over records
        past ``burn_in``), ``capture_ratio`` (``gap[-1] / gap[0]``, stubborn),
        ``creep_per_step`` and ``creep_steps`` (progress of the honest mean
        toward ``b`` per round/step while every honest node stays farther than
        ``tau``, with a clip), ``exchanges``, ``sim_time`` -- and the series as
        numpy arrays: ``steps``, ``time``, ``exchange_counts``,
        ``disagreement``, ``honest_mean`` (shape ``(records, dim)``),
        ``mean_shift`` and, with a stubborn attacker, ``gap``, ``toward``,
        ``far``.
    """
    system = GossipSystem(config, streams)
    rec = system.run()
    D = rec.disagreement
    out: dict[str, Any] = {
        "n": config.n,
        "honest": config.honest_count,
        "exchanges": int(system.exchanges),
        "sim_time": float(rec.time[-1]),
        "final_disagreement": float(D[-1]),
    }
    post = (rec.steps >= config.burn_in) & (rec.steps > 0)
    out["noise_floor"] = float(D[post].mean()) if post.any() else math.nan
    if rec.gap is not None:
        out["capture_ratio"] = float(rec.gap[-1] / rec.gap[0]) if rec.gap[0] != 0 else math.nan
        if config.clip is not None and rec.far is not None:
            bad = np.flatnonzero(~rec.far)
            w = rec.steps.size - 1 if bad.size == 0 else int(bad[0]) - 1
            if w >= 1:
                out["creep_per_step"] = float(rec.toward[w] / rec.steps[w])  # type: ignore[index]
                out["creep_steps"] = int(rec.steps[w])
            else:
                out["creep_per_step"] = math.nan
                out["creep_steps"] = 0
    out.update({
        "steps": rec.steps.copy(),
        "time": rec.time,
        "exchange_counts": rec.exchanges,
        "disagreement": D,
        "honest_mean": rec.honest_mean,
        "mean_shift": rec.mean_shift,
    })
    if rec.gap is not None:
        out["gap"] = rec.gap
        out["toward"] = rec.toward
        out["far"] = rec.far
    return out


# --------------------------------------------------------------------------- exact predictions


def predictions(config: GossipConfig) -> dict[str, Any]:
    """Exact predictions that apply to ``config`` (from :mod:`sim.analytic`).

    Returns
    -------
    dict
        Any of: ``predicted_contraction`` (complete graph, all honest, no
        clip: per matching round, or per ``edge`` step without noise),
        ``predicted_noise_floor`` (same, with noise; summed over
        coordinates), ``predicted_disagreement`` (series at the record steps:
        matching on the complete graph, all honest, no clip, with or without noise; or
        ``edge`` on any graph, all honest, no noise, no clip),
        ``predicted_capture_rate`` (one stubborn node on the complete graph,
        ``edge`` per step or ``matching`` per round, no clip),
        ``predicted_honest_mean`` (stubborn nodes with ``edge``, no clip: the
        first-moment recursion, series of mean over coordinates), and
        ``creep_bound`` (one stubborn node on the complete graph with a fixed clip).
    """
    from . import analytic

    out: dict[str, Any] = {}
    n, d = config.n, config.dim
    steps = config.record_steps()
    proto = config.protocol
    k = len(config.adversary_positions)
    clipped = config.clip is not None or config.adaptive_clip
    var0 = config.init_std**2
    s = config.noise
    if proto == "matching" and config.complete and k == 0 and not clipped:
        c = float(analytic.matching_contraction(n))
        out["predicted_contraction"] = c
        if s > 0:
            out["predicted_noise_floor"] = float(analytic.noise_floor(n, s)) * d
        series = np.empty(steps.size)
        cur, r = (n - 1) * var0 * d, 0
        add = (n - 1) * s**2 * d
        for idx, st in enumerate(steps):
            while r < st:
                cur = c * (cur + add)
                r += 1
            series[idx] = cur
        out["predicted_disagreement"] = series
    t = steps.astype(float)
    if proto == "edge" and k == 0 and s == 0 and not clipped:
        if config.complete:
            # one random pair lowers D by (x_i - x_j)^2 / 2 and sum_{i<j} (x_i - x_j)^2 = n D,
            # so E[D'] = (1 - 1/(n-1)) D exactly (the complete-graph case of the recursion)
            out["predicted_contraction"] = 1.0 - 1.0 / (n - 1)
            out["predicted_disagreement"] = (n - 1) * var0 * d * (1.0 - 1.0 / (n - 1)) ** t
        elif n * n * config.rounds <= _EXACT_BUDGET:
            ed = analytic.edge_gossip_disagreement(config.network_graph, int(config.rounds),
                                                   record_every=config.record_every)
            out["predicted_disagreement"] = np.asarray(ed, dtype=float) * var0 * d
    if config.adversary == "stubborn" and k >= 1:
        b = config.value
        if config.complete and k == 1 and not clipped:
            if proto == "edge":
                out["predicted_capture_rate"] = float(analytic.capture_rate(n))
            elif proto == "matching":
                out["predicted_capture_rate"] = float(analytic.matching_capture_rate(n))
            if proto in ("edge", "matching"):
                r = out["predicted_capture_rate"]
                out["predicted_honest_mean"] = b + (config.init_mean - b) * r**t
        if config.complete and k == 1 and config.clip is not None:
            if proto == "edge":
                out["creep_bound"] = float(analytic.creep_bound(n, config.clip))
            elif proto == "matching":
                out["creep_bound"] = float(analytic.matching_creep(n, config.clip))
        if (proto == "edge" and not clipped and not config.complete
                and n * config.rounds <= _EXACT_BUDGET):
            G = config.network_graph
            nodes = list(G.nodes())
            stub = {nodes[p]: b for p in config.adversary_positions}
            hm = analytic.stubborn_honest_mean(G, stub, config.init_mean, int(config.rounds),
                                               record_every=config.record_every)
            out["predicted_honest_mean"] = np.asarray(hm, dtype=float)
    return out


# --------------------------------------------------------------------------- aggregation


def _series(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.stack([np.asarray(r[key], dtype=float) for r in records])


def _mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = a.mean(axis=0)
    se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0]) if a.shape[0] > 1 else np.full_like(m, np.nan)
    return m, se


def _power_ci(est: Estimate, power: float) -> Estimate:
    """Transform an estimate of ``c**k`` into one of ``c`` (monotone map)."""
    def f(v: float) -> float:
        return math.copysign(abs(v) ** power, v) if math.isfinite(v) else v
    return Estimate(f(est.mean), est.se * power * abs(est.mean) ** (power - 1) if est.mean else math.nan,
                    f(est.low), f(est.high), est.n, est.confidence)


def summarize_runs(records: Sequence[Mapping[str, Any]], config: GossipConfig) -> dict[str, Any]:
    """Aggregate replications of :func:`gossip_model` into the ``dtsim gossip`` report.

    Parameters
    ----------
    records : sequence of dict
        Replication records (records with an ``error`` are skipped).
    config : GossipConfig

    Returns
    -------
    dict
        Series ``steps``, ``time``, ``disagreement`` (+ ``_se``), ``honest_mean``
        (+ ``_se``; a list per record when ``dim > 1``), ``mean_shift``;
        ``contraction_per_round`` (geometric mean of successive ratios of the
        mean disagreement over the records from 0 while it stays above
        ``max(1e-12 D[0], 10 x predicted noise floor)``; with noise it is
        slightly biased up) with ``contraction_per_round_ci`` (from the
        per-replication ratios ``D[j] / D[0]``, unbiased for ``c**t``);
        ``noise_floor`` + ``noise_floor_ci`` (with noise); with a stubborn
        attacker ``capture_rate`` + ``capture_rate_ci`` (per round/step factor
        of ``E[m - b]``) and with a clip ``creep_per_step`` + ``creep_per_step_ci``;
        and every entry of :func:`predictions`.
    """
    ok = [r for r in records if not r.get("error")]
    check(bool(ok), "replications", "at least one that ran", [r.get("error") for r in records])
    steps = np.asarray(ok[0]["steps"])
    k = config.record_every
    out: dict[str, Any] = {"n": config.n, "honest": config.honest_count, "replications": len(ok),
                           "steps": steps}
    time = _series(ok, "time")
    out["time"] = time.mean(axis=0)
    D = _series(ok, "disagreement")
    Dm, Dse = _mean_se(D)
    out["disagreement"], out["disagreement_se"] = Dm, Dse
    hm = np.stack([np.asarray(r["honest_mean"], dtype=float) for r in ok])
    hmm, hmse = _mean_se(hm)
    if config.dim == 1:
        hmm, hmse = hmm[:, 0], hmse[:, 0]
    out["honest_mean"], out["honest_mean_se"] = hmm, hmse
    out["mean_shift"] = _series(ok, "mean_shift").mean(axis=0)
    out["exchanges"] = float(np.mean([r["exchanges"] for r in ok]))
    pred = predictions(config)
    # Contraction: the geometric mean of successive ratios of the mean
    # disagreement over the records before the floor (it telescopes to
    # (Dm[j] / Dm[0]) ** (1 / steps[j])); its interval comes from the
    # per-replication ratios D[j'] / D[0], unbiased for c ** steps[j'] since
    # E[D' | x] = c D, at the last record j' where Dm is still above 1e-3 Dm[0]
    # (deeper ratios are dominated by rare replications at small n).
    floor = pred.get("predicted_noise_floor", 0.0)
    thresh = max(Dm[0] * 1e-12, 10.0 * floor, 1e-300)
    good = (Dm[1:] > thresh) & (np.diff(steps) == k)
    prefix = int(np.argmin(good)) if not good.all() else good.size  # contiguous from record 0
    if config.protocol != "async" and prefix >= 1 and Dm[0] > 0:
        out["contraction_per_round"] = float((Dm[prefix] / Dm[0]) ** (1.0 / steps[prefix]))
        j = max(1, int(np.sum(Dm[1:prefix + 1] >= 1e-3 * Dm[0])))
        est = mean_ci(D[:, j] / D[:, 0])
        out["contraction_per_round_ci"] = _power_ci(est, 1.0 / float(steps[j]))
        out["contraction_steps"] = int(steps[j])
    if config.noise > 0:
        est = mean_ci([r["noise_floor"] for r in ok])
        out["noise_floor"] = est.mean
        out["noise_floor_ci"] = est
    if "gap" in ok[0]:
        gap = _series(ok, "gap")
        g = gap.mean(axis=0)
        rel = g / g[0] if g[0] != 0 else np.full_like(g, np.nan)
        idx = np.flatnonzero((rel >= 0.05) & (steps > 0))
        if idx.size and config.protocol != "async":
            t = int(idx[-1])
            out["capture_rate"] = float(rel[t] ** (1.0 / steps[t]))
            est = mean_ci(gap[:, t] / gap[:, 0])
            out["capture_rate_ci"] = _power_ci(est, 1.0 / float(steps[t]))
            out["capture_steps"] = int(steps[t])
        if config.clip is not None:
            far = np.stack([np.asarray(r["far"], dtype=bool) for r in ok]).all(axis=0)
            bad = np.flatnonzero(~far)
            w = steps.size - 1 if bad.size == 0 else int(bad[0]) - 1
            if w >= 1:
                toward = _series(ok, "toward")
                est = mean_ci(toward[:, w] / steps[w])
                out["creep_per_step"] = est.mean
                out["creep_per_step_ci"] = est
                out["creep_steps"] = int(steps[w])
    out.update(pred)
    return out
