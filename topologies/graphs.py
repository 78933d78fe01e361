"""Gossip graph families, one networkx-style builder each.

Every builder returns an undirected :class:`networkx.Graph` on the integer
nodes ``0 .. n-1`` (``n`` counts every node), with node attribute
``domain=()`` (gossip graphs carry no failure domains) and edge attributes
``latency`` and ``bandwidth``. Sizes are checked, randomness comes only from
an integer ``seed`` turned into a :class:`numpy.random.Generator`, and the
sparse families are assembled from numpy edge arrays so that ``n = 10**5``
builds in seconds. Random families are always connected: a draw that is not is
replaced by one from a derived seed, a few times, before giving up with a
:class:`~sim.errors.ConfigError`.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from sim.errors import ConfigError, check, check_choice, check_int, check_probability

from ._util import (
    attempt_generators,
    check_edges,
    check_link,
    check_size,
    edges_connected,
    graph_from_edges,
    isqrt_exact,
    not_connected,
)

__all__ = [
    "complete",
    "ring",
    "path",
    "star",
    "torus",
    "hypercube",
    "random_regular",
    "erdos_renyi",
    "watts_strogatz",
    "barabasi_albert",
    "expander",
    "parse_dims",
]

INF = math.inf


# --------------------------------------------------------------------------- deterministic


def complete(n: int, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Complete graph on ``n`` nodes.

    Parameters
    ----------
    n : int
        Number of nodes (>= 2).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
        ``n (n - 1) / 2`` edges. Building refuses sizes beyond the edge limit
        (``topologies._util.MAX_EDGES``); gossip on the complete graph has a
        vectorised engine that needs no edges, so ask the spec instead
        (:func:`topologies.is_complete`).
    """
    n = check_size("n", n, 2)
    lat, bw = check_link(latency, bandwidth)
    check_edges("n", n, n * (n - 1) / 2)
    u, v = np.triu_indices(n, 1)
    return graph_from_edges(n, u, v, latency=lat, bandwidth=bw, name=f"complete(n={n})")


def ring(n: int, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Cycle on ``n`` nodes: node ``i`` is linked to ``i + 1 mod n``.

    Parameters
    ----------
    n : int
        Number of nodes (>= 3).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 3)
    lat, bw = check_link(latency, bandwidth)
    u = np.arange(n)
    return graph_from_edges(n, u, (u + 1) % n, latency=lat, bandwidth=bw, name=f"ring(n={n})")


def path(n: int, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Path on ``n`` nodes ``0 - 1 - ... - n-1``.

    Parameters
    ----------
    n : int
        Number of nodes (>= 2).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 2)
    lat, bw = check_link(latency, bandwidth)
    u = np.arange(n - 1)
    return graph_from_edges(n, u, u + 1, latency=lat, bandwidth=bw, name=f"path(n={n})")


def star(n: int, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Star on ``n`` nodes: hub ``0`` linked to the ``n - 1`` leaves.

    Unlike :func:`networkx.star_graph`, ``n`` counts every node, the hub included.

    Parameters
    ----------
    n : int
        Number of nodes (>= 2).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 2)
    lat, bw = check_link(latency, bandwidth)
    leaves = np.arange(1, n)
    return graph_from_edges(n, np.zeros_like(leaves), leaves, latency=lat, bandwidth=bw,
                            name=f"star(n={n})")


def parse_dims(dims: Any, name: str = "dims") -> tuple[int, ...]:
    """Torus side lengths from a tuple, an int, or a string such as ``"8x8"``.

    Parameters
    ----------
    dims : int, str or sequence of int
        Side lengths, each >= 2 (``"8x8x4"``, ``(8, 8)`` or ``16``).
    name : str
        Parameter name used in error messages.

    Returns
    -------
    tuple of int
    """
    rule = "side lengths >= 2 such as 8x8 (any number of dimensions)"
    if isinstance(dims, str):
        parts = dims.lower().replace("/", "x").split("x")
        # ASCII digits: str.isdigit also takes '\u00b2' (which int() refuses) and '\u0664'
        check(all(p.strip().isascii() and p.strip().isdigit() for p in parts), name, rule, dims)
        out = tuple(int(p) for p in parts)
    elif isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        out = (int(dims),)
    else:
        try:
            out = tuple(dims)
        except TypeError:
            raise ConfigError(name, rule, dims) from None
        check(len(out) > 0 and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                   for d in out), name, rule, dims)
        out = tuple(int(d) for d in out)
    check(len(out) > 0 and all(d >= 2 for d in out), name, rule, dims)
    return out


def torus(dims: Any, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Torus (periodic grid) with any number of dimensions.

    Node ``i`` is the row-major index of its coordinates; it is linked to its
    ``+1`` and ``-1`` neighbours (mod the side) along every axis, so a side of
    length 2 contributes one edge instead of two.

    Parameters
    ----------
    dims : tuple of int or str
        Side lengths, e.g. ``(8, 8)`` or ``"8x8"``; a single int is a ring.
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
        ``prod(dims)`` nodes; ``G.graph["dims"]`` holds the sides.
    """
    sides = parse_dims(dims)
    lat, bw = check_link(latency, bandwidth)
    n = math.prod(sides)
    check_edges("dims", dims, n * len(sides))
    idx = np.arange(n).reshape(sides)
    us, vs = [], []
    for axis, side in enumerate(sides):
        nb = np.roll(idx, -1, axis=axis)
        if side == 2:  # the +1 and -1 neighbours coincide: keep one copy
            keep = np.take(idx, 0, axis=axis) if idx.ndim else idx
            us.append(np.ravel(keep))
            vs.append(np.ravel(np.take(nb, 0, axis=axis)))
        else:
            us.append(idx.ravel())
            vs.append(nb.ravel())
    label = "x".join(map(str, sides))
    return graph_from_edges(n, np.concatenate(us), np.concatenate(vs), latency=lat,
                            bandwidth=bw, name=f"torus(dims={label})", dims=sides)


def hypercube(dim: int, *, latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """Hypercube on ``2**dim`` nodes; nodes differing in one bit are linked.

    Parameters
    ----------
    dim : int
        Dimension (>= 1).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    dim = check_int("dim", dim, low=1, high=24)
    lat, bw = check_link(latency, bandwidth)
    n = 1 << dim
    check_edges("dim", dim, n * dim / 2)
    nodes = np.arange(n)
    us, vs = [], []
    for b in range(dim):
        low = nodes[(nodes >> b) & 1 == 0]
        us.append(low)
        vs.append(low | (1 << b))
    return graph_from_edges(n, np.concatenate(us), np.concatenate(vs), latency=lat,
                            bandwidth=bw, name=f"hypercube(dim={dim})")


# --------------------------------------------------------------------------- random


def _regular_pairing(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """A simple ``d``-regular edge list: configuration-model pairing, then switchings.

    The random pairing of ``n d`` stubs leaves O(d**2) self-loops and repeated
    edges on average, whatever ``n``; each is removed by a random switching
    with another edge ``{x, y}``: ``{u, v}, {x, y} -> {u, x}, {v, y}``, which
    keeps every degree (McKay and Wormald's repair). None when it gets stuck.
    """
    stubs = np.repeat(np.arange(n, dtype=np.int64), d)
    rng.shuffle(stubs)
    a, b = stubs[0::2].copy(), stubs[1::2].copy()
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keys = lo * n + hi
    m = len(keys)
    bad = lo == hi
    order = np.argsort(keys, kind="stable")
    dup = np.zeros(m, dtype=bool)
    dup[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    bad |= dup
    if not bad.any():
        return a, b
    good = ~bad
    keyset = set(keys[good].tolist())
    for i in np.flatnonzero(bad).tolist():
        u, v = int(a[i]), int(b[i])
        for _ in range(10_000):
            j = int(rng.integers(m))
            if not good[j]:
                continue
            x, y = int(a[j]), int(b[j])
            if rng.random() < 0.5:
                x, y = y, x
            if u == x or v == y:
                continue
            k1 = min(u, x) * n + max(u, x)
            k2 = min(v, y) * n + max(v, y)
            if k1 == k2 or k1 in keyset or k2 in keyset:
                continue
            keyset.discard(min(x, y) * n + max(x, y))
            keyset.add(k1)
            keyset.add(k2)
            a[i], b[i], a[j], b[j] = u, x, v, y
            good[i] = True
            break
        else:
            return None
    return a, b


def _regular_edges(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """Edges of a random ``d``-regular graph (dense degrees via the complement)."""
    if d > (n - 1) // 2 and n <= 4096:
        comp = n - 1 - d
        adj = np.ones((n, n), dtype=bool)
        np.fill_diagonal(adj, False)
        if comp > 0:
            pair = _regular_pairing(n, comp, rng)
            if pair is None:
                return None
            adj[pair[0], pair[1]] = False
            adj[pair[1], pair[0]] = False
        u, v = np.nonzero(np.triu(adj, 1))
        return u, v
    return _regular_pairing(n, d, rng)


def random_regular(n: int, *, degree: int = 4, seed: int = 0, latency: float = 1.0,
                   bandwidth: float = INF) -> nx.Graph:
    """Connected random ``degree``-regular graph on ``n`` nodes.

    Drawn by the configuration model with switchings to remove loops and
    repeated edges (approximately uniform over simple regular graphs, like
    :func:`networkx.random_regular_graph`, but vectorised: 10**5 nodes take
    well under a second).

    Parameters
    ----------
    n : int
        Number of nodes (> degree; ``n * degree`` even).
    degree : int
        Degree of every node (>= 1).
    seed : int or numpy.random.Generator
        Seed of the draw; a disconnected draw is redrawn from derived seeds.
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 2)
    degree = check_int("degree", degree, low=1, high=n - 1)
    check(n * degree % 2 == 0, "n", f"such that n * degree is even (degree={degree})", n)
    lat, bw = check_link(latency, bandwidth)
    check_edges("n", n, n * degree / 2)
    for attempt, rng in attempt_generators(seed):
        e = _regular_edges(n, degree, rng)
        if e is not None and edges_connected(n, *e):
            return graph_from_edges(n, *e, latency=lat, bandwidth=bw,
                                    name=f"random_regular(n={n}, degree={degree})",
                                    seed=seed, attempt=attempt)
    raise not_connected("degree", degree, f"{degree}-regular graph on {n} nodes")


def _pair_from_index(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Map linear indices of the strict upper triangle (row-major) to pairs ``i < j``."""
    k = k.astype(np.int64)
    b = 2 * n - 1
    i = np.floor((b - np.sqrt(b * b - 8.0 * k)) / 2).astype(np.int64)
    i = np.clip(i, 0, n - 2)

    def offset(r):
        return r * (2 * n - r - 1) // 2

    i = np.where(offset(i) > k, i - 1, i)
    i = np.where(offset(i + 1) <= k, i + 1, i)
    j = k - offset(i) + i + 1
    return i, j


def erdos_renyi(n: int, *, p: float | None = None, seed: int = 0, latency: float = 1.0,
                bandwidth: float = INF) -> nx.Graph:
    """Connected Erdős–Rényi graph G(n, p).

    The number of edges is drawn as Binomial(n (n - 1) / 2, p) and the edges
    as a uniform sample of that many distinct pairs, which is exactly G(n, p).
    Draws that are not connected are replaced by draws from derived seeds.

    Parameters
    ----------
    n : int
        Number of nodes (>= 2).
    p : float or None
        Edge probability in (0, 1]; None means ``2 ln(n) / n`` (capped at 1),
        twice the connectivity threshold.
    seed : int or numpy.random.Generator
        Seed of the draw (a Generator is used as it is).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
        ``G.graph["p"]`` holds the edge probability used.
    """
    n = check_size("n", n, 2)
    if p is None:
        p = min(1.0, 2 * math.log(n) / n)
    p = check_probability("p", p, open_low=True)
    lat, bw = check_link(latency, bandwidth)
    pairs = n * (n - 1) // 2
    check_edges("p", p, pairs * p)
    for attempt, rng in attempt_generators(seed):
        m = int(rng.binomial(pairs, p))
        k = rng.choice(pairs, size=m, replace=False) if m < pairs else np.arange(pairs)
        u, v = _pair_from_index(np.asarray(k), n)
        if edges_connected(n, u, v):
            return graph_from_edges(n, u, v, latency=lat, bandwidth=bw,
                                    name=f"erdos_renyi(n={n}, p={p:.6g})", p=p, seed=seed,
                                    attempt=attempt)
    raise not_connected("p", p, f"G(n={n}, p)")


def _ws_edges(n: int, k: int, p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Ring lattice with ``k/2`` neighbours per side, each edge's far end rewired w.p. ``p``."""
    base = np.arange(n, dtype=np.int64)
    u = np.tile(base, k // 2)
    v = np.concatenate([(base + j) % n for j in range(1, k // 2 + 1)])
    rewire = rng.random(len(u)) < p
    pending = np.flatnonzero(rewire)
    v_new = v.copy()
    for _ in range(1000):
        if pending.size == 0:
            break
        v_new[pending] = rng.integers(n, size=pending.size)
        lo, hi = np.minimum(u, v_new), np.maximum(u, v_new)
        keys = lo * n + hi
        # unchanged edges win ties; among rewired edges the earliest index wins
        order = np.lexsort((np.arange(len(keys)), rewire, keys))
        dup = np.zeros(len(keys), dtype=bool)
        dup[order[1:]] = keys[order[1:]] == keys[order[:-1]]
        conflict = (lo == hi) | dup
        pending = np.flatnonzero(conflict & rewire)
    return u, v_new


def watts_strogatz(n: int, *, k: int = 4, p: float = 0.1, seed: int = 0, latency: float = 1.0,
                   bandwidth: float = INF) -> nx.Graph:
    """Connected Watts–Strogatz small-world graph.

    A ring lattice where every node is linked to its ``k / 2`` nearest
    neighbours on each side; each lattice edge ``(i, i + j)`` has its far end
    replaced, with probability ``p``, by a uniform node (redrawn while that
    makes a loop or a repeated edge). Disconnected draws are redrawn from
    derived seeds.

    Parameters
    ----------
    n : int
        Number of nodes (> k).
    k : int
        Even lattice degree (>= 2).
    p : float
        Rewiring probability in [0, 1].
    seed : int or numpy.random.Generator
        Seed of the draw (a Generator is used as it is).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 3)
    k = check_int("k", k, low=2, high=n - 1)
    check(k % 2 == 0, "k", "an even integer", k)
    p = check_probability("p", p)
    lat, bw = check_link(latency, bandwidth)
    check_edges("n", n, n * k / 2)
    for attempt, rng in attempt_generators(seed):
        u, v = _ws_edges(n, k, p, rng)
        if edges_connected(n, u, v):
            return graph_from_edges(n, u, v, latency=lat, bandwidth=bw,
                                    name=f"watts_strogatz(n={n}, k={k}, p={p:g})", seed=seed,
                                    attempt=attempt)
    raise not_connected("p", p, f"Watts-Strogatz graph (n={n}, k={k})")


def barabasi_albert(n: int, *, m: int = 2, seed: int = 0, latency: float = 1.0,
                    bandwidth: float = INF) -> nx.Graph:
    """Barabási–Albert preferential-attachment graph (always connected).

    Starts from a star on ``m + 1`` nodes (as :func:`networkx.barabasi_albert_graph`);
    each new node links to ``m`` distinct existing nodes drawn with probability
    proportional to their degree.

    Parameters
    ----------
    n : int
        Number of nodes (> m).
    m : int
        Edges added per new node (>= 1).
    seed : int or numpy.random.Generator
        Seed of the draw (a Generator is used as it is).
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    n = check_size("n", n, 2)
    m = check_int("m", m, low=1, high=n - 1)
    lat, bw = check_link(latency, bandwidth)
    check_edges("n", n, n * m)
    rng = next(attempt_generators(seed))[1]
    n_edges = m + (n - m - 1) * m
    us = np.empty(n_edges, dtype=np.int64)
    vs = np.empty(n_edges, dtype=np.int64)
    us[:m] = 0
    vs[:m] = np.arange(1, m + 1)
    ends = np.empty(2 * n_edges, dtype=np.int64)  # every edge end: degree-weighted urn
    ends[0:2 * m:2] = 0
    ends[1:2 * m:2] = np.arange(1, m + 1)
    n_ends = 2 * m
    e = m
    buf = rng.random(4096)
    pos = 0
    for src in range(m + 1, n):
        chosen: set[int] = set()
        while len(chosen) < m:
            if pos == len(buf):
                buf = rng.random(4096)
                pos = 0
            chosen.add(int(ends[int(buf[pos] * n_ends)]))
            pos += 1
        for t in chosen:
            us[e], vs[e] = src, t
            e += 1
            ends[n_ends] = t
            ends[n_ends + 1] = src
            n_ends += 2
    return graph_from_edges(n, us, vs, latency=lat, bandwidth=bw,
                            name=f"barabasi_albert(n={n}, m={m})", seed=seed)


def expander(n: int, *, kind: str = "random_regular", degree: int = 8, seed: int = 0,
             latency: float = 1.0, bandwidth: float = INF) -> nx.Graph:
    """An expander family on ``n`` nodes.

    ``kind="random_regular"`` (default) is a connected random ``degree``-regular
    graph, an expander with high probability (its second adjacency eigenvalue
    is close to the Ramanujan bound ``2 sqrt(degree - 1)``, Friedman 2008).
    ``kind="margulis"`` is the Margulis–Gabber–Galil graph on the
    ``sqrt(n) x sqrt(n)`` torus (:func:`networkx.margulis_gabber_galil_graph`),
    deterministic, made simple by dropping self-loops and merging parallel
    edges (so degrees are at most 8 and ``degree``/``seed`` are unused).

    Parameters
    ----------
    n : int
        Number of nodes (a perfect square for ``margulis``).
    kind : {"random_regular", "margulis"}
        Construction.
    degree : int
        Degree for ``random_regular`` (>= 3).
    seed : int or numpy.random.Generator
        Seed for ``random_regular``.
    latency, bandwidth : float
        Attributes of every edge.

    Returns
    -------
    networkx.Graph
    """
    kind = check_choice("kind", kind, ["random_regular", "margulis"])
    if kind == "random_regular":
        check_int("degree", degree, low=3)
        G = random_regular(n, degree=degree, seed=seed, latency=latency, bandwidth=bandwidth)
        G.graph["name"] = f"expander(n={n}, kind=random_regular, degree={degree})"
        return G
    n = check_size("n", n, 4)
    side = isqrt_exact(n)
    check(side is not None, "n", "a perfect square for kind=margulis", n)
    lat, bw = check_link(latency, bandwidth)
    check_edges("n", n, 4 * n)
    M = nx.margulis_gabber_galil_graph(side)
    index = {node: i for i, node in enumerate(sorted(M.nodes))}
    pairs = {(min(index[a], index[b]), max(index[a], index[b])) for a, b in M.edges() if a != b}
    arr = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    return graph_from_edges(n, arr[:, 0], arr[:, 1], latency=lat, bandwidth=bw,
                            name=f"expander(n={n}, kind=margulis)")
