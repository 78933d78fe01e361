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
    (1 time unit on the complete graph), and is one SimPy timeout.
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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import simpy

from .adversaries import (
    ADVERSARIES,
    DEFAULT_VALUES,
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
    "GossipConfig",
    "GossipSystem",
    "Records",
    "gossip_model",
    "random_maximal_matching",
    "predictions",
    "summarize_runs",
]

PROTOCOLS = ("matching", "edge", "async")
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
        number; required for ``complete`` unless the spec gives ``n``.
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
    graph : networkx.Graph or None
        A ready graph to use instead of building ``topology``.
    """

    topology: str = "complete"
    nodes: int | None = 16
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
    graph: nx.Graph | None = field(default=None, repr=False, compare=False)
    _net: _Network | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice("protocol", self.protocol, PROTOCOLS)
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
        if graph is None:
            if cfg.nodes is not None:
                check_int("nodes", cfg.nodes, low=2)
            family, params = _spec_family(cfg.topology)
            if family == "complete":
                from topologies import num_nodes

                n = num_nodes(cfg.topology, nodes=cfg.nodes)
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
        Streams ``init``, ``partners``, ``noise``, ``wake`` (per node) and
        ``failures:*`` are independent, so changing one concern never changes
        another's draws.
    """

    def __init__(self, config: GossipConfig, streams: Streams) -> None:
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

    # -- shared pieces ------------------------------------------------------
    def _record(self, k: int) -> None:
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
    def _setup_async(self) -> None:
        cfg = self.cfg
        self._workers = None
        if cfg.availability < 1.0:
            from .failures import FailureModel

            fm = FailureModel(self.env, self.streams)
            self._workers = [fm.add_worker(f"node{i}", availability=cfg.availability,
                                           mean_downtime=cfg.mean_downtime) for i in range(self.n)]
            fm.start()
        self._nodes = [_AsyncNode(self, i, self.streams.rng("wake", i)) for i in range(self.n)]
        for node in self._nodes:
            self.env.process(node.run())

    def _up(self, i: int) -> bool:
        return self._workers is None or self._workers[i].up

    def _pick_peer(self, i: int, rng: np.random.Generator) -> tuple[int, float] | None:
        net = self.net
        if net.complete:
            if self._workers is None:
                j = int(rng.integers(self.n - 1))
                return j + (j >= i), net.complete_delay
            cand = [j for j in range(self.n) if j != i and self._workers[j].up]
            if not cand:
                return None
            return cand[int(rng.integers(len(cand)))], net.complete_delay
        lo, hi = int(net.indptr[i]), int(net.indptr[i + 1])
        if hi == lo:
            return None
        if self._workers is None:
            k = lo + int(rng.integers(hi - lo))
        else:
            ks = [k for k in range(lo, hi) if self._workers[int(net.indices[k])].up]
            if not ks:
                return None
            k = ks[int(rng.integers(len(ks)))]
        return int(net.indices[k]), float(net.nbr_delay[k])

    def _sent(self, src: int, dst: int) -> np.ndarray:
        if self.is_adv[src]:
            return self.adversary.send(self.view, np.array([src]), np.array([dst]))[0]  # type: ignore[union-attr]
        return self.x[src].copy()

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
        self._record(0)
        proto = self.cfg.protocol
        if proto == "matching":
            proc = self.env.process(self._matching_process())
        elif proto == "edge":
            proc = self.env.process(self._edge_process())
        else:
            self._setup_async()
            proc = self.env.process(self._async_recorder())
        self.env.run(until=proc)
        return self.records


class _AsyncNode:
    """One node of the ``async`` protocol: a Poisson clock and its exchanges."""

    def __init__(self, system: GossipSystem, i: int, rng: np.random.Generator) -> None:
        self.sys = system
        self.i = i
        self.rng = rng

    def run(self):
        sys, i, rng = self.sys, self.i, self.rng
        env = sys.env
        mean_gap = 1.0 / sys.cfg.wake_rate
        noisy = sys.cfg.noise > 0 and sys.honest[i]
        while True:
            yield env.timeout(float(rng.exponential(mean_gap)))
            if not sys._up(i):
                continue
            pick = sys._pick_peer(i, rng)
            if pick is None:
                continue
            j, delay = pick
            if noisy:
                sys.x[i] += sys.cfg.noise * rng.standard_normal(sys.d)
            v_ij, v_ji = sys._sent(i, j), sys._sent(j, i)
            if delay <= 0:
                sys._deliver(i, j, v_ij, v_ji)
            else:
                env.process(self._exchange(j, delay, v_ij, v_ji))

    def _exchange(self, j: int, delay: float, v_ij: np.ndarray, v_ji: np.ndarray):
        yield self.sys.env.timeout(delay)
        self.sys._deliver(self.i, j, v_ij, v_ji)


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
