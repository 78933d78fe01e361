"""The built network of a gossip config: node order, edges, exchange times, matchings.

:func:`build_gossip_graph` is the build step after validation: it turns a
:class:`~sim.gossip.config.GossipConfig` (values only) into a :class:`GossipGraph`
of arrays, cached per process by the values that determine it, so the
replications of one config in one process build it once. The complete graph is
never built: its partners are drawn directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from .config import GraphValue, check_graph

if TYPE_CHECKING:
    from .config import GossipConfig

__all__ = ["GossipGraph", "build_gossip_graph", "topology_graph", "value_graph", "random_maximal_matching",
           "flow_network"]


@dataclass(frozen=True)
class GossipGraph:
    """The topology in arrays: node order, edge endpoints, per-edge exchange times.

    Attributes
    ----------
    n : int
    complete : bool
        The implicit complete graph (``graph`` is None and the edge arrays empty).
    graph : networkx.Graph or None
        The undirected simple graph (frozen).
    u, v, delay : ndarray
        Edge endpoints (positions) and ``latency + size / bandwidth`` per edge.
    indptr, indices, nbr_delay : ndarray
        CSR neighbour lists and exchange times, sorted by (source, target).
    complete_delay : float
        Exchange time on the complete graph (1.0 otherwise, unused).
    """

    n: int
    complete: bool
    graph: nx.Graph | None
    u: np.ndarray
    v: np.ndarray
    delay: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    nbr_delay: np.ndarray
    complete_delay: float


@lru_cache(maxsize=8)
def topology_graph(topology: str, nodes: int | None, seed: int | None) -> nx.Graph:
    """The validated simple graph a (non-complete) spec builds, once per process (frozen)."""
    import topologies

    return nx.freeze(check_graph(topologies.build(topology, nodes=nodes, seed=seed), None, topology))


@lru_cache(maxsize=8)
def value_graph(value: GraphValue) -> nx.Graph:
    """The graph of a :class:`GraphValue`, once per process (frozen)."""
    return nx.freeze(value.to_networkx())


def _readonly(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


@lru_cache(maxsize=8)
def _build(topology: str, nodes: int | None, seed: int | None, graph: GraphValue | None,
           latency: float, bandwidth: float, size: float) -> GossipGraph:
    empty = np.empty(0, dtype=np.int64)
    if graph is None:
        from .config import spec_family

        family, params = spec_family(topology)
        if family == "complete":
            from .config import network_size

            n, _ = network_size(topology, nodes, seed)
            lat = float(params.get("latency", latency))
            bw = float(params.get("bandwidth", bandwidth))
            d = lat + (0.0 if math.isinf(bw) else size / bw)
            return GossipGraph(n, True, None, empty, empty, np.empty(0), empty, empty, np.empty(0), d)
        g = topology_graph(topology, nodes, seed)
    else:
        g = value_graph(graph)
    nodes_list = list(g.nodes())
    pos = {node: i for i, node in enumerate(nodes_list)}
    m = g.number_of_edges()
    u = np.empty(m, dtype=np.int64)
    v = np.empty(m, dtype=np.int64)
    delay = np.empty(m)
    for k, (a, b, attrs) in enumerate(g.edges(data=True)):
        u[k], v[k] = pos[a], pos[b]
        lat = float(attrs.get("latency", latency))
        bw = float(attrs.get("bandwidth", bandwidth))
        delay[k] = lat + (0.0 if math.isinf(bw) else size / bw)
    n = len(nodes_list)
    src = np.concatenate([u, v])
    dst = np.concatenate([v, u])
    dd = np.concatenate([delay, delay])
    order = np.lexsort((dst, src))
    src, dst, dd = src[order], dst[order], dd[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, src + 1, 1)
    indptr = np.cumsum(indptr)
    _readonly(u, v, delay, indptr, dst, dd)
    return GossipGraph(n, False, g, u, v, delay, indptr, dst, dd, 1.0)


def build_gossip_graph(config: GossipConfig) -> GossipGraph:
    """Build (or fetch from this process's cache) the network of a validated config.

    Parameters
    ----------
    config : GossipConfig

    Returns
    -------
    GossipGraph
        Arrays are read-only and the graph frozen: engines share them.
    """
    return _build(config.topology, config.nodes, config.topology_seed, config.graph,
                  float(config.latency), float(config.bandwidth), float(config.size))


@lru_cache(maxsize=8)
def _flows(topology: str, nodes: int | None, seed: int | None, graph: GraphValue | None,
           latency: float, bandwidth: float, nic: float | None) -> object | None:
    from ..network import Network as FlowNetwork

    if graph is None:
        from .config import spec_family

        family, params = spec_family(topology)
        if family == "complete":
            import topologies

            from .config import network_size

            n, _ = network_size(topology, nodes, seed)
            g = topologies.complete(n, latency=float(params.get("latency", latency)),
                                    bandwidth=float(params.get("bandwidth", bandwidth)))
        else:
            g = topology_graph(topology, nodes, seed)
    else:
        g = value_graph(graph)
    # positions as node labels (the gossip engines' indices), the config's link defaults filled
    G = nx.Graph()
    pos = {node: i for i, node in enumerate(g.nodes())}
    G.add_nodes_from(range(len(pos)))
    for a, b, attrs in g.edges(data=True):
        G.add_edge(pos[a], pos[b], latency=float(attrs.get("latency", latency)),
                   bandwidth=float(attrs.get("bandwidth", bandwidth)),
                   **{k: attrs[k] for k in ("sharing", "bandwidth_curve") if k in attrs})
    for node, attrs in g.nodes(data=True):
        for k in ("egress", "ingress", "nic", "nic_sharing"):
            if k in attrs:
                G.nodes[pos[node]][k] = attrs[k]
    net = FlowNetwork(G, name=topology, nic=nic)
    return net if net.finite else None


def _anything_finite(config: GossipConfig) -> bool:
    """Whether some link or NIC of the config's graph has a finite capacity (no build)."""
    if config.nic is not None:
        return True
    default = float(config.bandwidth)
    if config.graph is None:
        from .config import spec_family

        family, params = spec_family(config.topology)
        if family == "complete":
            return not math.isinf(float(params.get("bandwidth", default)))
        g = topology_graph(config.topology, config.nodes, config.topology_seed)
    else:
        g = value_graph(config.graph)
    if any(float(bw) < math.inf for _, _, bw in g.edges(data="bandwidth", default=default)):
        return True
    if any(c is not None for _, _, c in g.edges(data="bandwidth_curve")):
        return True
    return any(k in attrs for _, attrs in g.nodes(data=True) for k in ("nic", "egress", "ingress"))


def flow_network(config: GossipConfig) -> object | None:
    """The :class:`sim.network.Network` exchanges share, or None when they share nothing.

    None without ``contention``, for the ``edge`` protocol (one exchange at a
    time), for messages of size 0 (they occupy no link: each exchange takes its
    route's latency, shared or not), and when no link bandwidth is finite and no
    NIC is given (then every exchange takes ``latency + size / bandwidth`` as
    without contention).
    """
    if (not config.contention or config.protocol == "edge" or float(config.size) == 0.0
            or not _anything_finite(config)):
        return None
    return _flows(config.topology, config.nodes, config.topology_seed, config.graph,
                  float(config.latency), float(config.bandwidth),
                  None if config.nic is None else float(config.nic))


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
