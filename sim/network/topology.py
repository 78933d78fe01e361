"""A network built from a topology: nodes, shared resources (links and NICs), routes.

The graph is the same as everywhere in dtsim (a spec or file through
:func:`topologies.build`, or any networkx graph). What the network reads:

edges
    ``latency`` (>= 0, default 1 as :func:`topologies.validate_graph` fills it),
    ``bandwidth`` (> 0, ``inf`` = never a bottleneck), optional
    ``bandwidth_curve`` (a :class:`~sim.network.curves.BandwidthCurve` or its
    text; then ``bandwidth`` stays unset) and ``sharing``:

    * ``"split"`` (the default): full duplex, each direction its own capacity,
      as Ethernet and InfiniBand links are and as the ring all-reduce law
      ``2 (k-1)/k S/B`` assumes (every rank sends and receives at full rate);
    * ``"shared"``: both directions share one capacity (SimGrid's SHARED link).
nodes
    optional NIC limits: ``egress`` and ``ingress`` (numbers > 0 or curves),
    ``nic`` for both at once, and ``nic_sharing`` (``"split"`` default: egress
    and ingress each have the capacity; ``"shared"``: one capacity for both).
    A NIC acts as a link that every flow leaving (egress) or entering (ingress)
    the node crosses; a flow only passing through a node does not cross it.

Routes: the path of least total latency (the latencies summed along the path),
ties to the fewest hops, then to the path whose sequence of node positions
(the order of ``G.nodes``) is lexicographically smallest. A flow from a node to
itself has an empty route (no latency, no resource: it finishes as it starts).
"""

from __future__ import annotations

import heapq
import math
import os
import re
import stat
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..errors import ConfigError, ascii_float, check, check_nonnegative, check_positive
from .curves import BandwidthCurve, Capacity, as_curve

__all__ = [
    "SHARINGS",
    "DEFAULT_SHARING",
    "NodeValue",
    "LinkValue",
    "NetworkValue",
    "Route",
    "Network",
    "build_network",
    "shared_network",
    "network_graph",
]

SHARINGS = ("split", "shared")
#: Links are full duplex unless an edge says ``sharing="shared"``.
DEFAULT_SHARING = "split"


#: Smallest capacity: the smallest normal double. Below it (1e-320) a share divides into
#: subnormals and the finish times become inf or NaN.
MIN_CAPACITY = sys.float_info.min


def _capacity(name: str, value: Any) -> Capacity:
    """A capacity: a number >= :data:`MIN_CAPACITY` (``inf`` allowed), a curve, or a curve's text."""
    if isinstance(value, BandwidthCurve):
        return value
    if isinstance(value, str):
        try:
            x = ascii_float(value)
        except ValueError:
            return as_curve(value, name)
        if value.strip().lower() in ("inf", "infinity"):
            return x
        value = x
    x = check_positive(name, value, allow_inf=True)
    check(x >= MIN_CAPACITY, name, f"a capacity >= {MIN_CAPACITY:.4g} (a normal double)", value)
    return x


@dataclass(frozen=True)
class NodeValue:
    """A node and its NIC limits (a value).

    Parameters
    ----------
    name : hashable
        The node (as in the graph).
    egress, ingress : float or BandwidthCurve
        Capacity of everything leaving / entering the node (inf: no limit).
    nic_sharing : {"split", "shared"}
        ``"shared"``: egress and ingress are one capacity (``egress``; then
        ``ingress`` must equal it or be inf).
    """

    name: Hashable
    egress: Capacity = math.inf
    ingress: Capacity = math.inf
    nic_sharing: str = DEFAULT_SHARING

    def __post_init__(self) -> None:
        object.__setattr__(self, "egress", _capacity("egress", self.egress))
        object.__setattr__(self, "ingress", _capacity("ingress", self.ingress))
        check(self.nic_sharing in SHARINGS, "nic_sharing", "one of " + ", ".join(SHARINGS),
              self.nic_sharing)
        if self.nic_sharing == "shared":
            check(self.ingress == math.inf or self.ingress == self.egress, "ingress",
                  "inf or equal to egress when nic_sharing is shared", self.ingress)


@dataclass(frozen=True)
class LinkValue:
    """A link between two nodes (a value).

    Parameters
    ----------
    u, v : hashable
        Its end nodes.
    bandwidth : float or BandwidthCurve
        Capacity (> 0; inf: never a bottleneck), or a curve of message size.
    latency : float
        Latency (>= 0).
    sharing : {"split", "shared"}
        Full duplex (each direction its own capacity) or one capacity for both.
    reverse_bandwidth : float, BandwidthCurve or None
        With ``split``: the capacity of the ``v -> u`` direction when it differs
        from ``u -> v`` (measured pair curves are per ordered pair); None: the same.
    """

    u: Hashable
    v: Hashable
    bandwidth: Capacity = math.inf
    latency: float = 0.0
    sharing: str = DEFAULT_SHARING
    reverse_bandwidth: Capacity | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "bandwidth", _capacity("bandwidth", self.bandwidth))
        object.__setattr__(self, "latency", check_nonnegative("latency", self.latency))
        check(self.sharing in SHARINGS, "sharing", "one of " + ", ".join(SHARINGS), self.sharing)
        check(self.u != self.v, "links", "between two different nodes", (self.u, self.v))
        if self.reverse_bandwidth is not None:
            check(self.sharing == "split", "reverse_bandwidth",
                  "unset on a shared link (one capacity for both directions)",
                  self.reverse_bandwidth)
            object.__setattr__(self, "reverse_bandwidth",
                               _capacity("reverse_bandwidth", self.reverse_bandwidth))


@dataclass(frozen=True)
class NetworkValue:
    """A network as a value (for configs): nodes with NICs and links.

    ``nodes`` may list only the nodes that have NIC limits; every end of a link
    is a node. Build it with :meth:`Network.value` from a built network, or by
    hand; :func:`build_network` turns it into a :class:`Network`.
    """

    links: tuple[LinkValue, ...]
    nodes: tuple[NodeValue, ...] = ()

    def __post_init__(self) -> None:
        links = tuple(x if isinstance(x, LinkValue) else LinkValue(*x) for x in self.links)
        nodes = tuple(x if isinstance(x, NodeValue) else NodeValue(*x) for x in self.nodes)
        check(len(links) >= 1, "network", "given at least one link", self.links)
        names = [n.name for n in nodes]
        check(len(set(names)) == len(names), "network", "a value listing each node once", names)
        seen = set()
        for lk in links:
            key = frozenset((lk.u, lk.v))
            check(key not in seen, "network", "a value listing each link once", (lk.u, lk.v))
            seen.add(key)
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "nodes", nodes)


@dataclass(frozen=True)
class Route:
    """The path of a flow: its nodes, the resources it crosses in order, its total latency."""

    src: int
    dst: int
    nodes: tuple[int, ...]
    resources: tuple[int, ...]
    latency: float
    hops: int = field(default=0)


def network_graph(value: NetworkValue) -> nx.Graph:
    """The networkx graph of a :class:`NetworkValue` (attributes as :class:`Network` reads them)."""
    G = nx.Graph(name="network")
    for nd in value.nodes:
        G.add_node(nd.name, egress=nd.egress, ingress=nd.ingress, nic_sharing=nd.nic_sharing)
    for lk in value.links:
        attrs: dict[str, Any] = {"latency": lk.latency, "sharing": lk.sharing}
        if isinstance(lk.bandwidth, BandwidthCurve):
            attrs["bandwidth"] = math.inf
            attrs["bandwidth_curve"] = lk.bandwidth
        else:
            attrs["bandwidth"] = lk.bandwidth
        if lk.reverse_bandwidth is not None:  # the capacity into each end, per direction
            attrs["bandwidth_into"] = {lk.v: lk.bandwidth, lk.u: lk.reverse_bandwidth}
        G.add_edge(lk.u, lk.v, **attrs)
    return G


class Network:
    """A built network: node indices, resources and routes (see the module docstring).

    Parameters
    ----------
    graph : networkx.Graph
        Validated by :func:`topologies.validate_graph` (a copy is read; the
        graph is not changed).
    name : str or None
        What to call it in messages.
    nic : float, BandwidthCurve or None
        NIC capacity (egress and ingress each) of every node that sets none of
        ``nic``, ``egress``, ``ingress`` and is not a switch (``role="switch"``).

    Attributes
    ----------
    nodes : list
        Node labels in graph order; a node's index is its position.
    capacity : list of float
        Per resource: the capacity (for a curve resource 1.0, the whole of its time).
    curve : list of BandwidthCurve or None
        Per resource: its curve, or None for a plain capacity.
    resource_names : list of str
        ``"u->v"`` (a direction of a split link), ``"u-v"`` (a shared link),
        ``"egress:u"``, ``"ingress:u"``, ``"nic:u"``.
    """

    def __init__(self, graph: nx.Graph, *, name: str | None = None, nic: Any = None) -> None:
        import topologies

        label = name if name is not None else str(graph.graph.get("spec") or graph.name or "graph")
        G = graph.copy()
        topologies.validate_graph(G, name=label)
        self.label = label
        #: How the link quantities were given (``topologies.validate_graph``'s ``units``).
        self.units: dict[str, tuple[Any, Any]] = dict(G.graph.get("units") or {})
        self.nodes: list[Hashable] = list(G.nodes)
        #: The nodes that are not switches (``role="switch"``), in graph order.
        self.hosts: list[Hashable] = [n for n, r in G.nodes(data="role") if r != "switch"]
        self.index: dict[Hashable, int] = {n: i for i, n in enumerate(self.nodes)}
        self.capacity: list[float] = []
        self.curve: list[BandwidthCurve | None] = []
        self.resource_names: list[str] = []
        self.egress = [-1] * len(self.nodes)
        self.ingress = [-1] * len(self.nodes)
        default_nic = None if nic is None else _capacity("nic", nic)
        for i, (node, data) in enumerate(G.nodes(data=True)):
            if default_nic is not None and data.get("role") != "switch" and not any(
                    k in data for k in ("nic", "egress", "ingress")):
                data = {**data, "nic": default_nic}
            self._nic(i, node, data, label)
        # adjacency: i -> [(j, latency, resource of i->j or -1)], neighbours in graph order
        self.adj: list[list[tuple[int, float, int]]] = [[] for _ in self.nodes]
        #: (i, j) -> (latency, resource of the direction i -> j or -1)
        self.link_of: dict[tuple[int, int], tuple[float, int]] = {}
        for u, v, data in G.edges(data=True):
            self._edge(u, v, data, label)
        for row in self.adj:
            row.sort(key=lambda t: t[0])
        #: the least edge latency: a direct edge of at most twice it is the route (every
        #: other path has two hops or more, so at least that latency, and more hops)
        self._min_latency = min((w for w, _r in self.link_of.values()), default=0.0)
        # a tree (one path between any two nodes): routes by the lowest common ancestor
        self._parent: list[int] | None = None
        self._depth: list[int] | None = None
        if len(self.link_of) == 2 * (len(self.nodes) - 1):
            parent, depth = [-1] * len(self.nodes), [0] * len(self.nodes)
            order = [0]
            seen = {0}
            for u in order:
                for v, _w, _r in self.adj[u]:
                    if v not in seen:
                        seen.add(v)
                        parent[v], depth[v] = u, depth[u] + 1
                        order.append(v)
            self._parent, self._depth = parent, depth
        #: True when some resource is finite (else no transfer ever waits for another)
        self.finite = bool(self.capacity)
        self._trees: dict[int, dict[int, tuple[float, int, int]]] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        self._names: dict[str, int] | None = None

    # -- building -------------------------------------------------------------------
    def _add_resource(self, cap: Capacity, name: str) -> int:
        """A resource for ``cap`` (-1 when it can never be a bottleneck: infinite, no curve)."""
        if isinstance(cap, BandwidthCurve):
            self.capacity.append(1.0)
            self.curve.append(cap)
        elif cap < math.inf:
            self.capacity.append(float(cap))
            self.curve.append(None)
        else:
            return -1
        self.resource_names.append(name)
        return len(self.capacity) - 1

    def _nic(self, i: int, node: Hashable, data: Mapping[str, Any], label: str) -> None:
        try:
            nic = data.get("nic")
            eg = data.get("egress", nic if nic is not None else math.inf)
            ing = data.get("ingress", nic if nic is not None else math.inf)
            nv = NodeValue(node, eg, ing, str(data.get("nic_sharing", DEFAULT_SHARING)))
        except ConfigError as exc:
            raise ConfigError("topology", f"a graph whose node {exc.name} values are "
                              f"{exc.rule} (node {node!r} has {exc.value!r})", label) from None
        if nv.nic_sharing == "shared":
            r = self._add_resource(nv.egress, f"nic:{node}")
            self.egress[i] = self.ingress[i] = r
        else:
            self.egress[i] = self._add_resource(nv.egress, f"egress:{node}")
            self.ingress[i] = self._add_resource(nv.ingress, f"ingress:{node}")

    def _edge(self, u: Hashable, v: Hashable, data: Mapping[str, Any], label: str) -> None:
        try:
            bw: Capacity = float(data["bandwidth"])
            if data.get("bandwidth_curve") is not None:
                check(bw == math.inf, "bandwidth", "unset (inf) on an edge with a bandwidth_curve",
                      bw)
                bw = as_curve(data["bandwidth_curve"], "bandwidth_curve")
            lk = LinkValue(u, v, bw, float(data["latency"]),
                           str(data.get("sharing", DEFAULT_SHARING)))
        except ConfigError as exc:
            raise ConfigError("topology", f"a graph whose edge {exc.name} values are "
                              f"{exc.rule} (edge ({u!r}, {v!r}) has {exc.value!r})", label) from None
        i, j = self.index[u], self.index[v]
        into = data.get("bandwidth_into")
        if lk.sharing == "shared":
            r = self._add_resource(lk.bandwidth, f"{u}-{v}")
            rf = rb = r
        elif into is not None:  # a capacity per direction (the value form's reverse_bandwidth)
            rf = self._add_resource(into[v], f"{u}->{v}")
            rb = self._add_resource(into[u], f"{v}->{u}")
        else:
            rf = self._add_resource(lk.bandwidth, f"{u}->{v}")
            rb = self._add_resource(lk.bandwidth, f"{v}->{u}")
        self.adj[i].append((j, lk.latency, rf))
        self.adj[j].append((i, lk.latency, rb))
        self.link_of[(i, j)] = (lk.latency, rf)
        self.link_of[(j, i)] = (lk.latency, rb)

    # -- lookups --------------------------------------------------------------------
    @property
    def n_resources(self) -> int:
        """Number of resources (finite links, link directions and NICs)."""
        return len(self.capacity)

    def node_index(self, node: Any, name: str = "node") -> int:
        """The index (position) of ``node``: a graph label, or its text as read from a file.

        Raises
        ------
        ConfigError
            ``name`` when no node has that label or text, or when two nodes
            have the same text (the integer 1 and the string ``"1"``), so a
            name read from a file cannot say which.
        """
        if self._names is None:
            names: dict[str, int] = {}
            for k, n in enumerate(self.nodes):
                names[str(n)] = -1 if str(n) in names else k
            self._names = names
        if isinstance(node, str) and self._names.get(node) == -1:
            raise ConfigError(name, f"a node name that only one node of the network has "
                              f"({self.label} has two nodes whose name reads {node!r})", node)
        try:
            if node in self.index:
                return self.index[node]
        except TypeError:  # an unhashable value is no label
            pass
        if isinstance(node, str) and node in self._names:
            return self._names[node]
        raise ConfigError(name, f"a node of the network ({self.label}, "
                          f"{len(self.nodes)} nodes)", node)

    def _tree(self, s: int) -> dict[int, tuple[float, int, int]]:
        """Best (latency, hops, predecessor) from ``s`` to every node.

        Dijkstra on (latency, hops); a tie in both goes to the predecessor whose
        own path is lexicographically smaller (nodes of equal (latency, hops)
        cannot improve each other, latencies being >= 0).
        """
        tree = self._trees.get(s)
        if tree is not None:
            return tree
        best: dict[int, tuple[float, int, int]] = {s: (0.0, 0, -1)}
        heap = [(0.0, 0, s)]
        done: set[int] = set()
        adj = self.adj
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            lat, hops, u = pop(heap)
            if u in done:
                continue
            done.add(u)
            for v, w, _r in adj[u]:
                if v in done:
                    continue
                key = (lat + w, hops + 1)
                old = best.get(v)
                if old is None or key < old[:2] or (
                        key == old[:2] and self._path(best, u) < self._path(best, old[2])):
                    best[v] = (key[0], key[1], u)
                    push(heap, (key[0], key[1], v))
        self._trees[s] = best
        return best

    def _tree_path(self, i: int, j: int) -> tuple[int, ...]:
        """The path from ``i`` to ``j`` in a tree (up to their lowest common ancestor, down)."""
        parent, depth = self._parent, self._depth
        up: list[int] = [i]
        down: list[int] = [j]
        a, b = i, j
        while depth[a] > depth[b]:  # type: ignore[index]
            a = parent[a]  # type: ignore[index]
            up.append(a)
        while depth[b] > depth[a]:  # type: ignore[index]
            b = parent[b]  # type: ignore[index]
            down.append(b)
        while a != b:
            a, b = parent[a], parent[b]  # type: ignore[index]
            up.append(a)
            down.append(b)
        down.pop()  # the common ancestor is already the last of ``up``
        return tuple(up + down[::-1])

    @staticmethod
    def _path(best: dict[int, tuple[float, int, int]], v: int) -> tuple[int, ...]:
        out = []
        while v >= 0:
            out.append(v)
            v = best[v][2]
        return tuple(reversed(out))

    def route(self, src: Any, dst: Any) -> Route:
        """The route from node ``src`` to node ``dst`` (labels, or their text: :meth:`node_index`).

        Raises
        ------
        ConfigError
            ``'src'`` / ``'dst'`` when it is not a node, ``'dst'`` when no path
            joins them.
        """
        return self.route_between(self.node_index(src, "src"), self.node_index(dst, "dst"))

    def route_between(self, i: int, j: int) -> Route:
        """The route between the nodes at positions ``i`` and ``j`` (of :attr:`nodes`).

        Raises
        ------
        ConfigError
            ``'dst'`` when no path joins them.
        """
        key = (i, j)
        r = self._routes.get(key)
        if r is not None:
            return r
        if i == j:
            r = Route(i, j, (i,), (), 0.0, 0)
        else:
            direct = self.link_of.get((i, j))
            if direct is not None and direct[0] <= 2.0 * self._min_latency:
                path, lat, hops = (i, j), 0.0 + direct[0], 1
            elif self._parent is not None:  # the one path of a tree
                path = self._tree_path(i, j)
                lat = 0.0
                for a, b in zip(path, path[1:], strict=False):
                    lat += self.link_of[(a, b)][0]
                hops = len(path) - 1
            else:
                found = self._tree(i).get(j)
                if found is None:
                    raise ConfigError("dst", f"a node reachable from {self.nodes[i]!r}",
                                      self.nodes[j])
                lat, hops, _ = found
                path = self._path(self._trees[i], j)
            res: list[int] = []
            if self.egress[i] >= 0:
                res.append(self.egress[i])
            link_of = self.link_of
            for a, b in zip(path, path[1:], strict=False):
                rr = link_of[(a, b)][1]
                if rr >= 0:
                    res.append(rr)
            if self.ingress[j] >= 0 and self.ingress[j] not in res:
                res.append(self.ingress[j])
            r = Route(i, j, path, tuple(res), lat, hops)
        self._routes[key] = r
        return r

    def _cap(self, r: int) -> Capacity:
        """The capacity of resource ``r`` as given (a number or a curve; inf for -1)."""
        if r < 0:
            return math.inf
        c = self.curve[r]
        return c if c is not None else self.capacity[r]

    def value(self) -> NetworkValue:
        """This network as a :class:`NetworkValue` (for a config)."""
        nodes = []
        for i, n in enumerate(self.nodes):
            e, g = self.egress[i], self.ingress[i]
            if e < 0 and g < 0:
                continue
            cap = lambda r: (math.inf if r < 0 else  # noqa: E731
                             (self.curve[r] if self.curve[r] is not None else self.capacity[r]))
            shared = e >= 0 and e == g
            nodes.append(NodeValue(n, cap(e), math.inf if shared else cap(g),
                                   "shared" if shared else "split"))
        links = []
        seen = set()
        for i, row in enumerate(self.adj):
            for j, lat, r in row:
                if (j, i) in seen:
                    continue
                seen.add((i, j))
                back = self.link_of[(j, i)][1]
                shared = r >= 0 and r == back
                cap = self._cap(r)
                rev = None if shared or self._cap(back) == cap else self._cap(back)
                links.append(LinkValue(self.nodes[i], self.nodes[j], cap, lat,
                                       "shared" if shared else "split", rev))
        return NetworkValue(tuple(links), tuple(nodes))


def build_network(spec: Any, *, nodes: int | None = None, seed: int | None = None,
                  nic: Any = None) -> Network:
    """A :class:`Network` from a topology spec or file, a networkx graph, a value or a Network.

    Parameters
    ----------
    spec : str, networkx.Graph, NetworkValue or Network
        A spec as everywhere (``topologies.build``), a graph file, a graph, or a value.
    nodes, seed : int or None
        As for :func:`topologies.build`.
    nic : float, BandwidthCurve or None
        A NIC for every host that has none (see :class:`Network`).
    """
    if isinstance(spec, Network):
        check(nic is None, "nic", "unset when the network is already built", nic)
        return spec
    if isinstance(spec, NetworkValue):
        return Network(network_graph(spec), name="network value", nic=nic)
    if isinstance(spec, nx.Graph):
        return Network(spec, nic=nic)
    import topologies

    G = topologies.build(spec, nodes=nodes, seed=seed)
    return Network(G, name=str(G.graph.get("spec", spec)), nic=nic)


_SHARED: dict[Any, Network] = {}
#: The separators of a spec's text (``geo:pairs=data/pairs.csv,hosts=2``), to find the files it names.
_SPEC_WORDS = re.compile(r"[,;=:\s]+")


def _file_stamps(spec: Any) -> tuple[tuple[str, int, int], ...]:
    """Size and modification time of every file a spec text names (a graph file, a ``pairs``
    table): a kept network is built again once its file is edited (a Dask worker or a
    Python session lives across runs)."""
    if not isinstance(spec, str) or len(spec) > 4096:
        return ()
    out = []
    for word in dict.fromkeys((spec.strip(), *_SPEC_WORDS.split(spec))):
        if not word:
            continue
        try:
            st = os.stat(word)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((word, st.st_size, st.st_mtime_ns))
    return tuple(out)
#: Networks :func:`shared_network` keeps before it starts over (a sweep over many networks).
SHARED_KEEP = 32


def shared_network(spec: Any, *, nic: Any = None) -> Network:
    """:func:`build_network` of a value, built once per process for each ``(spec, nic)`` and kept.

    ``spec`` is a value that hashes (a topology spec or graph file, a
    :class:`NetworkValue`). The routes a network computes are cached on it, so
    the runs and checks that ask for the same network share them. This is the
    one place a network built from a configuration's value is kept: a
    configuration holds the value, never the network.

    Raises
    ------
    ConfigError
        As :func:`build_network`.
    """
    key = (spec, nic, _file_stamps(spec))
    net = _SHARED.get(key)
    if net is None:
        net = build_network(spec, nic=nic)
        if len(_SHARED) > SHARED_KEEP:
            _SHARED.clear()
        _SHARED[key] = net
    return net
