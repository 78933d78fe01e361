"""The gossip experiment as a value: :class:`GossipConfig` and its size function.

A config holds numbers, strings and tuples only, so it hashes the same in every
process. A graph passed in is kept as a :class:`GraphValue` (nodes and edges in
networkx's iteration order, with their numeric attributes). Validation needs the
number of nodes: :func:`network_size` gives it without building the complete
graph; other families are built once per process through the cache of
:func:`sim.gossip.network.topology_graph`, so a builder's own message reports a
bad spec exactly as before, and the built network is never stored on the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from ..adversaries import ADVERSARIES, DEFAULT_VALUES, SCOPED, SCOPES, alie_default_z
from ..errors import (
    ConfigError,
    check,
    check_choice,
    check_int,
    check_memory_terms,
    check_nonnegative,
    check_positive,
    check_probability,
    check_real,
)

__all__ = [
    "PROTOCOLS",
    "MIXINGS",
    "ROUND_PROTOCOLS",
    "ASYNC_PATHS",
    "ENGINES",
    "DEFAULT_COMPLETE_NODES",
    "GossipConfig",
    "GraphValue",
    "spec_family",
    "default_nodes",
    "network_size",
    "default_record_every",
    "EDGE_RECORD_FLOOR",
]

PROTOCOLS = ("matching", "edge", "async", "neighbourhood", "allreduce")
#: The synchronous round protocols (every node hears its whole neighbourhood at once).
ROUND_PROTOCOLS = ("neighbourhood", "allreduce")
#: Mixing weights of ``neighbourhood`` rounds (:mod:`sim.gossip.mixing`).
MIXINGS = ("metropolis", "uniform", "weight")
#: Size of the complete graph when neither ``nodes`` nor the spec gives one.
DEFAULT_COMPLETE_NODES = 16
#: Memory estimates (bytes, measured with tracemalloc, dim 1): a replication's
#: state per node, and one record row (time, exchanges, disagreement, mean...).
GOSSIP_BYTES_PER_NODE = 96
GOSSIP_BYTES_PER_ROW = 64
#: Implementation paths of the ``async`` protocol (see :attr:`AsyncGossip.async_path`).
ASYNC_PATHS = ("auto", "merged", "events", "vector")
#: The ``--engine`` vocabulary of gossip (the registered engines of :mod:`sim.gossip.engines`).
ENGINES = ("auto", "des", "vector", "compiled")

_ATTR_TYPES = (bool, int, float, str, np.integer, np.floating)
#: Fewest ``edge`` steps between two default records (a record reads every value).
EDGE_RECORD_FLOOR = 20_000


def default_record_every(protocol: str, n: int) -> int:
    """The record interval a config gets when it gives none.

    ``edge``: every ``max(2 n, 20000)`` steps. A record reads all ``n`` values
    and a step touches two, so recording every step costs ``O(n)`` times the
    run (an ``edge`` run of 3e5 steps at ``n = 1e4`` took 155 s and wrote 38 MB
    recorded every step); every ``2 n`` steps (each node in about four
    exchanges, four time units) keeps the records to a small fraction of the
    run, and the floor covers the fixed cost of a record at small ``n``
    (``dtsim bench`` measures the ratio). Every other protocol: every round or
    time unit (a round already touches every node).
    """
    return max(2 * n, EDGE_RECORD_FLOOR) if protocol == "edge" else 1


def _check_time(name: str, value: Any, *, positive: bool) -> int | float:
    """An async time (horizon, record interval, burn-in): a finite number, kept an int when integral."""
    v = check_positive(name, value) if positive else check_nonnegative(name, value)
    if isinstance(value, bool):  # check_* accept numbers only; a bool is refused there
        return v
    if isinstance(value, (int, np.integer)) or float(v).is_integer():
        return int(v)
    return float(v)


def _check_count(name: str, value: Any, low: int, protocol: str) -> int:
    """A round or step count: an integer (a fractional value is for async only, said so)."""
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and not float(value).is_integer():
        raise ConfigError(name, f"an integer >= {low} with protocol {protocol} (fractional times "
                          "are for protocol async)", value)
    return check_int(name, value, low=low)


@dataclass(frozen=True)
class GraphValue:
    """A given graph as a value: nodes and edges (with numeric attributes) in iteration order.

    Build with :meth:`from_networkx`; :meth:`to_networkx` gives back a graph whose
    node order and edge iteration order are those of the original.
    """

    nodes: tuple[Any, ...]
    edges: tuple[tuple[Any, Any, tuple[tuple[str, Any], ...]], ...]

    @classmethod
    def from_networkx(cls, graph: nx.Graph) -> GraphValue:
        """The value form of an undirected simple graph (attributes: numbers and strings)."""
        edges = tuple(
            (a, b, tuple(sorted((k, v.item() if isinstance(v, np.generic) else v)
                                for k, v in attrs.items() if isinstance(v, _ATTR_TYPES))))
            for a, b, attrs in graph.edges(data=True))
        return cls(tuple(graph.nodes()), edges)

    def to_networkx(self) -> nx.Graph:
        """The graph (same node order and edge iteration order as the original)."""
        g = nx.Graph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((a, b, dict(attrs)) for a, b, attrs in self.edges)
        return g

    @property
    def number_of_nodes(self) -> int:
        """Number of nodes."""
        return len(self.nodes)


def spec_family(spec: str) -> tuple[str | None, dict[str, Any]]:
    """Family name of a topology spec (None for files and user builders) and its parameters.

    Parameters
    ----------
    spec : str
        A topology spec ``NAME[:key=value,...]``, a graph file or ``module:function``.

    Returns
    -------
    tuple
        ``(family or None, params)``.

    Raises
    ------
    ConfigError
        ``'topology'`` for an empty or malformed spec.
    """
    check(isinstance(spec, str) and spec.strip() != "", "topology", "a non-empty spec string", spec)
    from topologies import parse_spec

    parsed = parse_spec(spec)
    return parsed.family, dict(parsed.params)


#: Largest magnitude of a node value (initial mean and spread, an attacker's value): the
#: disagreement sums squared distances between values over nodes, and (2 x 1e150)^2 times
#: a billion nodes is still a finite double, while 1e308 overflows at the first square.
MAX_VALUE = 1e150
_VALUE_RULE = (f"at most {MAX_VALUE:g} in magnitude (squared distances between node values "
               "must stay finite doubles)")


def default_nodes(topology: str, nodes: int | None) -> int | None:
    """``nodes``, or :data:`DEFAULT_COMPLETE_NODES` for a complete spec that gives no size."""
    if nodes is None:
        family, params = spec_family(topology)
        if family == "complete" and "n" not in params:
            return DEFAULT_COMPLETE_NODES
    return nodes


def _simple(graph: nx.Graph) -> nx.Graph:
    """The undirected simple graph gossip runs on (self-loops carry no exchange)."""
    graph = nx.Graph(graph) if graph.is_directed() or graph.is_multigraph() else graph
    if nx.number_of_selfloops(graph):
        graph = graph.copy()
        graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    return graph


def check_graph(graph: nx.Graph, nodes: int | None, topology: str) -> nx.Graph:
    """Validate a graph to gossip on; return its undirected simple form.

    Raises
    ------
    ConfigError
        ``'nodes'`` when it contradicts the graph or the graph has fewer than 2
        nodes, ``'topology'`` when the graph is not connected.
    """
    if nodes is not None:
        check(nodes == graph.number_of_nodes(), "nodes",
              f"unset or equal to the {graph.number_of_nodes()} nodes of the given graph", nodes)
    check_int("nodes", graph.number_of_nodes(), low=2)
    check(nx.is_connected(graph) if not graph.is_directed() else nx.is_weakly_connected(graph),
          "topology", "a connected graph", topology)
    return _simple(graph)


def network_size(topology: str, nodes: int | None, topology_seed: int | None,
                 graph: GraphValue | None = None) -> tuple[int, bool]:
    """``(n, complete)`` of a config's network, validating the spec.

    The complete graph is sized from its spec (never built). Any other spec is
    built once per process (cached by value), so the family's own checks run
    and report as they always have.
    """
    if graph is not None:
        return graph.number_of_nodes, False
    if nodes is not None:
        check_int("nodes", nodes, low=2)
    family, params = spec_family(topology)
    if family == "complete":
        from topologies import num_nodes, parse_spec
        from topologies._util import check_link
        from topologies.spec import as_typed, shown

        size = nodes
        if size is None and "n" not in params:
            size = DEFAULT_COMPLETE_NODES
        try:  # its link parameters as the builder checks them (it is never built)
            check_link(params.get("latency", 1.0), params.get("bandwidth", math.inf))
        except ConfigError as exc:  # bandwidth=0 divided a size by it: a traceback
            raise ConfigError("topology", f"a valid complete spec "
                              f"({as_typed(topology, params, exc)})",
                              shown(topology, parse_spec(topology))) from None
        return check_int("nodes", num_nodes(topology, nodes=size), low=2), True
    from .network import topology_graph

    return topology_graph(topology, nodes, topology_seed).number_of_nodes(), False


@dataclass(frozen=True)
class GossipConfig:
    """One gossip experiment, validated before anything runs (values only).

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
    protocol : {"matching", "edge", "async", "neighbourhood", "allreduce"}
        ``neighbourhood`` and ``allreduce``: synchronous rounds in which every
        node hears all its neighbours (all nodes) at once
        (:mod:`sim.gossip.rounds`).
    rounds : int or float
        Rounds, edge steps, or (``async``) simulated time units; only
        ``async`` takes a fractional horizon.
    noise : float
        Standard deviation ``s`` of the per-round noise (>= 0).
    dim : int
        Dimension of every node's value.
    adversary : {"none", "stubborn", "alie", "dissensus", "signflip", "ipm", "bitflip"}
        ``bitflip`` (an attacker that trains and aggregates, and sends minus
        its model) needs protocol ``neighbourhood`` or ``allreduce``.
    num_adversaries : int or None
        Number of adversarial nodes (default 1 with an adversary, else 0).
    adversary_value : float or None
        ``b`` (stubborn), ``z`` (ALIE), ``eps`` (dissensus, IPM); per-kind
        default (:attr:`value`).
    attack_scope : {"global", "local"}
        Where ALIE, IPM and dissensus read the honest values: all honest
        nodes (``global``, the default), or each target's neighbourhood, as the
        ClippedGossip authors' code computes them (``local``; see
        :mod:`sim.adversaries`).
    adversary_nodes : tuple of int or None
        Positions (in the graph's node order) of the adversaries; default the
        first ``num_adversaries``.
    stubborn_values : tuple of float or None
        One value ``b_k`` per stubborn node, in the order of
        :attr:`adversary_positions` (stubborn adversary only; instead of
        ``adversary_value``): disagreeing stubborn nodes, whose honest
        neighbours tend in expectation to the harmonic extension of the values.
    clip : float or None
        Fixed trust-region radius ``tau`` for honest nodes.
    adaptive_clip : bool
        Self-centred clipping with the ClippedGossip oracle radius.
    mixing : {"metropolis", "uniform", "weight"}
        Mixing weights of ``neighbourhood`` rounds: Metropolis
        ``1 / (1 + max(d_i, d_j))``, uniform ``1 / (1 + d_i)`` on each of
        node ``i``'s edges, or each edge's ``weight`` attribute (a topology
        file's), rows completed to stochastic by the self weight
        (:mod:`sim.gossip.mixing`). Other protocols take ``metropolis`` only.
    gossip_rounds : int
        Aggregation rounds per round of ``neighbourhood`` / ``allreduce``
        (after one node update): ``K`` gossip steps per gradient step.
    record_every : int, float or None
        Record every this many rounds/steps (time units for ``async``, where it
        may be fractional). None (the default) takes :func:`default_record_every`:
        every round or time unit, and for ``edge`` every ``max(2 n, 20000)``
        steps. It is resolved when the config is built, so
        :func:`dataclasses.replace` keeps the resolved interval (pass
        ``record_every=None`` to resolve it again).
    burn_in : int or float
        Rounds/steps (time for ``async``, fractional there too) excluded from
        the noise-floor average.
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
    failure_trace : sim.traces.TraceReplay or None
        Churn of nodes in ``async`` replayed from a real trace instead (node
        ``i`` is slot ``i``, or by name when the trace's instances are all named
        as the graph's nodes: :attr:`trace_names`; ``availability`` must then be 1).
    topology_seed : int or None
        Seed of random topology families (the graph is fixed across replications).
    engine : {"auto", "des", "vector", "compiled"}
        How ``matching`` rounds are computed: ``vector`` (numpy over all
        pairs at once), ``des`` (every node a SimPy process, every exchange a
        message in flight; slower, for cross-validation) or ``auto`` (see
        :attr:`resolved_engine`). ``edge`` has its DES and ``compiled``
        (:mod:`sim.gossip.edge_kernel`: the DES's numbers bit for bit, which
        ``auto`` picks); ``async`` has its DES and ``compiled``
        (:mod:`sim.gossip.compiled`: the same law at machine speed, its own
        random numbers), which ``auto`` picks when numba is installed and the
        strategies have compiled forms.
    graph : networkx.Graph, GraphValue or None
        A ready graph to use instead of building ``topology``; a networkx graph
        is validated and kept as its :class:`GraphValue`.
    contention : bool
        Exchanges share the graph's links and the nodes' NICs (:mod:`sim.network`:
        an exchange is a flow each way on the edge's route, max-min fair) when
        some bandwidth is finite or ``nic`` is given (async, matching,
        neighbourhood, allreduce); False (or nothing finite): each exchange
        takes ``latency + size / bandwidth`` on its own.
    nic : float or None
        With ``contention``: NIC capacity (egress and ingress each) of every node.
    network_weighting : {"maxmin", "rtt"}
        The network's sharing rule (plain max-min, or SimGrid CM02's 1/RTT).
    """

    topology: str = "complete"
    nodes: int | None = None
    protocol: str = "matching"
    rounds: int | float = 50
    noise: float = 0.0
    dim: int = 1
    adversary: str = "none"
    num_adversaries: int | None = None
    adversary_value: float | None = None
    adversary_nodes: tuple[int, ...] | None = None
    stubborn_values: tuple[float, ...] | None = None
    clip: float | None = None
    adaptive_clip: bool = False
    attack_scope: str = "global"
    mixing: str = "metropolis"
    gossip_rounds: int = 1
    record_every: int | float | None = None
    burn_in: int | float = 0
    init_mean: float = 0.0
    init_std: float = 1.0
    wake_rate: float = 1.0
    size: float = 1.0
    latency: float = 1.0
    bandwidth: float = math.inf
    availability: float = 1.0
    mean_downtime: float = 1.0
    failure_trace: Any = None
    topology_seed: int | None = None
    engine: str = "auto"
    graph: GraphValue | None = field(default=None, repr=False)
    contention: bool = True
    nic: float | None = None
    network_weighting: str = "maxmin"

    def __post_init__(self) -> None:
        check_choice("protocol", self.protocol, PROTOCOLS)
        check(isinstance(self.contention, bool), "contention", "True or False", self.contention)
        from ..network.flows import WEIGHTINGS

        check_choice("network_weighting", self.network_weighting, WEIGHTINGS)
        if self.nic is not None:
            object.__setattr__(self, "nic", check_positive("nic", self.nic, allow_inf=True))
            check(self.contention, "nic", "unset without contention (a NIC is shared only by "
                  "flows that contend)", self.nic)
            check(self.protocol != "edge", "nic", "unset with protocol edge (one exchange at a "
                  "time: nothing shares a NIC)", self.nic)
        check_choice("engine", self.engine, ENGINES)
        if self.protocol != "matching":
            check(self.engine != "vector", "engine", f"des or auto for protocol {self.protocol}",
                  self.engine)
        if self.protocol == "async":  # a simulated time: any positive number
            object.__setattr__(self, "rounds", _check_time("rounds", self.rounds, positive=True))
        else:
            _check_count("rounds", self.rounds, 1, self.protocol)
        check_nonnegative("noise", self.noise)
        check(self.noise <= MAX_VALUE, "noise", _VALUE_RULE, self.noise)  # a value it adds
        check_int("dim", self.dim, low=1)
        check_choice("adversary", self.adversary, ADVERSARIES)
        if self.clip is not None:
            check_nonnegative("clip", self.clip)
        check(not (self.adaptive_clip and self.clip is not None), "clip",
              "unset when adaptive clipping is on", self.clip)
        if self.protocol == "async":
            if self.record_every is not None:
                object.__setattr__(self, "record_every",
                                   _check_time("record_every", self.record_every, positive=True))
            object.__setattr__(self, "burn_in", _check_time("burn_in", self.burn_in, positive=False))
        else:
            if self.record_every is not None:
                _check_count("record_every", self.record_every, 1, self.protocol)
            _check_count("burn_in", self.burn_in, 0, self.protocol)
        # the noise floor averages what comes after the burn-in: some of the run must
        check(self.burn_in < self.rounds, "burn_in",
              f"less than rounds ({self.rounds:g}; the noise floor averages the rounds after "
              "it)", self.burn_in)
        check_real("init_mean", self.init_mean)
        check(abs(self.init_mean) <= MAX_VALUE, "init_mean", _VALUE_RULE, self.init_mean)
        check_nonnegative("init_std", self.init_std)
        check(self.init_std <= MAX_VALUE, "init_std", _VALUE_RULE, self.init_std)
        check_positive("wake_rate", self.wake_rate)
        check_nonnegative("size", self.size)
        check_nonnegative("latency", self.latency)
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        check_probability("availability", self.availability, open_low=True)
        check_positive("mean_downtime", self.mean_downtime)
        if self.failure_trace is not None:
            from ..traces import TraceReplay

            check(isinstance(self.failure_trace, TraceReplay), "failure_trace",
                  "a sim.traces.TraceReplay", self.failure_trace)
            check(self.protocol == "async", "failure_trace", "unset unless protocol is async",
                  self.failure_trace.trace)
            check(self.availability == 1.0, "availability",
                  "1 with failure_trace (the trace sets the churn)", self.availability)
        if self.adversary_value is not None:
            check_real("adversary_value", self.adversary_value)
            check(abs(self.adversary_value) <= MAX_VALUE, "adversary_value", _VALUE_RULE,
                  self.adversary_value)
        if self.graph is not None:
            g = self.graph
            if isinstance(g, nx.Graph):
                g = GraphValue.from_networkx(check_graph(g, self.nodes, self.topology))
            else:
                check(isinstance(g, GraphValue), "graph", "a networkx graph or a GraphValue",
                      type(g).__name__)
                _check_value(g, self.nodes, self.topology)
            object.__setattr__(self, "graph", g)
        n, complete = network_size(self.topology, self.nodes, self.topology_seed, self.graph)
        object.__setattr__(self, "_size", (n, complete))  # a cache of two values, not a field
        if self.record_every is None:
            object.__setattr__(self, "record_every", default_record_every(self.protocol, n))
        if self.failure_trace is not None:
            if self.trace_names is None:  # node i on slot i: at most the trace's slots
                self.failure_trace.check_workers(n, name="nodes")
            self.failure_trace.check_horizon(self.rounds, name="rounds")
        self._check_memory(n)
        if self.protocol == "matching" and complete:
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
        if self.stubborn_values is not None:
            check(self.adversary == "stubborn", "stubborn_values", "given only with adversary "
                  "stubborn", self.stubborn_values)
            check(self.adversary_value is None, "adversary_value", "unset with stubborn_values",
                  self.adversary_value)
            vals = self.stubborn_values
            check(isinstance(vals, (tuple, list)) and len(vals) == k, "stubborn_values",
                  f"one value per stubborn node ({k})", vals)
            vals = tuple(float(check_real("stubborn_values", v)) for v in vals)
            check(all(abs(v) <= MAX_VALUE for v in vals), "stubborn_values", _VALUE_RULE, vals)
            object.__setattr__(self, "stubborn_values", vals)
        self._check_byzantine(n, complete, k)
        if self.engine == "compiled":  # an engine named explicitly must answer, or say why not
            from .. import engines as registry

            registry.select("gossip", self, self.engine)

    def _check_byzantine(self, n: int, complete: bool, k: int) -> None:
        """Attack scope, bit-flip, mixing weights and gossip rounds (values and their protocol)."""
        check_choice("attack_scope", self.attack_scope, SCOPES)
        if self.attack_scope != "global":
            check(self.adversary in SCOPED, "attack_scope", f"global for adversary {self.adversary} "
                  "(local scope is for alie, ipm and dissensus; the reference bit-flip is adversary "
                  "bitflip)", self.attack_scope)
        rounds_protocol = self.protocol in ROUND_PROTOCOLS
        if self.adversary == "bitflip":
            check(rounds_protocol, "protocol", "neighbourhood or allreduce for adversary bitflip (a "
                  "bit-flip attacker trains and aggregates each round)", self.protocol)
        check_choice("mixing", self.mixing, MIXINGS)
        if self.mixing != "metropolis":
            check(self.protocol == "neighbourhood", "mixing", f"metropolis for protocol {self.protocol} "
                  "(mixing weights are used by protocol neighbourhood)", self.mixing)
        if self.mixing == "weight":
            check(not complete, "mixing", "metropolis or uniform on the implicit complete graph (it "
                  "has no edge attributes; give a graph file with weight on every edge)", self.mixing)
            from .mixing import check_weights
            from .network import build_gossip_graph

            net = build_gossip_graph(self)
            assert net.graph is not None
            check_weights(net.graph)
        check_int("gossip_rounds", self.gossip_rounds, low=1)
        if self.gossip_rounds != 1:
            check(rounds_protocol, "gossip_rounds", f"1 for protocol {self.protocol} (several gossip "
                  "rounds per step need protocol neighbourhood or allreduce)", self.gossip_rounds)
        if (self.adversary == "alie" and self.attack_scope == "local" and self.adversary_value is None
                and k > 0):
            z = alie_default_z(n, k)
            check(math.isfinite(z), "adversary_value", "given for adversary alie with attack_scope local "
                  f"here (the reference default z = Phi^-1((n - f - s) / (n - f)), s = floor(n / 2 + 1) "
                  f"- f, is {z} at n = {n}, f = {k})", self.adversary_value)

    # -- derived ---------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of nodes, adversaries included."""
        return self._size[0]

    @property
    def complete(self) -> bool:
        """True when the topology is the (implicit) complete graph."""
        return self._size[1]

    @property
    def trace_names(self) -> tuple[str | None, ...] | None:
        """The instance each node replays, by position (None: up throughout), when the failure
        trace's instances are all named as the graph's nodes (a graph file's own names; a
        family's integers never match); None when it is replayed slot by slot, node ``i`` on
        slot ``i`` (some named so and some not is refused:
        :meth:`sim.traces.TraceReplay.by_name`)."""
        ft = self.failure_trace
        if ft is None or ft.instances is None or (self.complete and self.graph is None):
            return None  # no trace, a count trace, or the implicit complete graph's 0..n-1
        return ft.by_name([(v,) for v in self.node_names()])

    def node_names(self) -> list[Any]:
        """The graph's node names in position order (node ``i`` is the ``i``-th): a graph
        file's own names, a family's integers."""
        if self.graph is not None:
            return list(self.graph.nodes)
        if self.complete:
            return list(range(self.n))
        from .network import topology_graph

        return list(topology_graph(self.topology, self.nodes, self.topology_seed).nodes())

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
    def averaging_only(self) -> bool:
        """True when every update is one pair moving symmetrically toward each other.

        Matching or edge gossip with no noise, no adversary and a fixed clip
        (or none): each exchange moves both nodes of a pair by the same amount,
        at most half their difference, so the disagreement ``D`` never grows,
        in every replication, and a contraction factor lies in ``[0, 1]``.
        (An adaptive clip moves the two by different amounts, and ``D`` may grow.)
        """
        return (self.protocol in ("matching", "edge") and self.noise == 0
                and self.adversary == "none" and not self.adaptive_clip)

    @property
    def value(self) -> float:
        """The adversary parameter actually used (per-kind default when unset).

        ALIE with ``attack_scope`` local defaults to the reference code's
        :func:`~sim.adversaries.alie_default_z` of ``n`` and the number of
        adversaries. With :attr:`stubborn_values`: their common value when they are all
        equal, else nan (no single ``b``; see :attr:`stubborn_map`).
        """
        if self.stubborn_values is not None:
            vals = set(self.stubborn_values)
            return self.stubborn_values[0] if len(vals) == 1 else math.nan
        if self.adversary_value is not None:
            return float(self.adversary_value)
        if self.adversary == "alie" and self.attack_scope == "local":
            return alie_default_z(self.n, len(self.adversary_positions))
        return DEFAULT_VALUES[self.adversary]

    @property
    def stubborn_map(self) -> dict[int, float]:
        """Position -> value of every stubborn node (empty for other adversaries)."""
        if self.adversary != "stubborn":
            return {}
        if self.stubborn_values is not None:
            return dict(zip(self.adversary_positions, self.stubborn_values, strict=True))
        return {p: self.value for p in self.adversary_positions}

    @property
    def disagreeing_stubborn(self) -> bool:
        """True when stubborn nodes hold different values (no single ``b``)."""
        return self.stubborn_values is not None and len(set(self.stubborn_values)) > 1

    @property
    def network_graph(self) -> nx.Graph:
        """The graph as (frozen) networkx; the complete graph is built on demand."""
        from .network import build_gossip_graph

        net = build_gossip_graph(self)
        return nx.complete_graph(self.n) if net.graph is None else net.graph

    @property
    def resolved_engine(self) -> str:
        """The engine that runs: ``"vector"``, ``"des"`` or ``"compiled"`` (see :func:`sim.gossip.engines.resolved_engine`)."""
        from .engines import resolved_engine

        return resolved_engine(self)

    @property
    def engine_reason(self) -> str:
        """One sentence saying why :attr:`resolved_engine` runs."""
        from .engines import engine_reason

        return engine_reason(self)

    def _check_memory(self, n: int) -> None:
        """Refuse sizes whose state and records cannot fit, naming the one that drives it."""
        rows = int(self.rounds // self.record_every) + 2
        d = self.dim
        check_memory_terms([
            ("nodes", self.nodes if self.nodes is not None else n, n * GOSSIP_BYTES_PER_NODE),
            ("rounds", self.rounds, rows * GOSSIP_BYTES_PER_ROW),
            ("dim", d, (n * 3 + rows) * 8 * (d - 1)),
        ])

    @property
    def record_bytes(self) -> int:
        """Memory of one replication's record (its series, one row per record step)."""
        rows = int(self.rounds // self.record_every) + 2
        return int(rows * (GOSSIP_BYTES_PER_ROW + 8 * (self.dim - 1)))

    def record_steps(self) -> np.ndarray:
        """Round/step (or time) index of every record: 0, k, 2k, ..., and ``rounds``.

        Integers (``int64``) when ``rounds`` and ``record_every`` are; with a
        fractional async horizon or interval, the times ``j * record_every``
        below ``rounds`` (as floats), then ``rounds``.
        """
        r, k = self.rounds, self.record_every
        if isinstance(r, int) and isinstance(k, int):
            s = np.arange(0, r + 1, k, dtype=np.int64)
            if s[-1] != r:
                s = np.append(s, r)
            return s
        m = int(math.floor(r / k + 1e-9))
        s = np.arange(m + 1, dtype=float) * k
        s = s[s < r * (1 - 1e-12)]
        return np.append(s, float(r))


def _check_value(value: GraphValue, nodes: int | None, topology: str) -> None:
    from .network import value_graph

    check_graph(value_graph(value), nodes, topology)
