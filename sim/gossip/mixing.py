"""Mixing weights of neighbourhood rounds: Metropolis, uniform, or given on the edges.

A node ``i`` of a ``neighbourhood`` round mixes as ``x_i' = x_i + sum_j W_ij
(v_j - x_i)`` (through its defence), so only the off-diagonal weights matter;
the self weight ``W_ii = 1 - sum_j W_ij`` completes the row to stochastic.

``metropolis``
    ``W_ij = 1 / (1 + max(d_i, d_j))`` (symmetric, doubly stochastic; the
    default, and ClippedGossip's ``gossip_avg`` and ``scp`` weights).
``uniform``
    ``W_ij = 1 / (1 + d_i)`` on each of node ``i``'s edges: every value node
    ``i`` holds or hears counts alike (the reference code's ``DeMean``); row
    stochastic, symmetric only on regular graphs.
``weight``
    ``W_ij = W_ji = w_e``, the edge attribute ``weight`` of a topology file
    (an edge list line ``u v weight=0.25``): the reference code's two-cliques
    graph with Byzantine weights scaled by ``delta`` or its dumbbell are
    written this way. Every edge needs a weight ``>= 0`` and every row's
    weights must sum to at most 1 (checked by :func:`check_weights`).

On a regular graph Metropolis and uniform weights coincide.

References
----------
.. [1] L. Xiao, S. Boyd, "Fast linear iterations for distributed averaging",
   Systems & Control Letters 53, 2004 (Metropolis weights).
.. [2] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022 (the weights of their experiments).
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError, check_choice

__all__ = ["ROW_TOLERANCE", "check_weights", "slot_weights", "weight_matrix", "mixing_weights"]

#: How far above 1 a row of given weights may sum (rounding of decimal weights in a file).
ROW_TOLERANCE = 1e-12


def _edge_weight(a: Any, b: Any, attrs: dict[str, Any]) -> float:
    w = attrs.get("weight")
    if w is None:
        raise ConfigError("weight", "on every edge with mixing weight (an edge attribute weight=W)",
                          f"edge ({a}, {b}) has none")
    if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
        raise ConfigError("weight", "a number >= 0 on every edge", f"edge ({a}, {b}) has {w!r}")
    w = float(w)
    if not math.isfinite(w) or w < 0:
        raise ConfigError("weight", "a number >= 0 on every edge", f"edge ({a}, {b}) has {w!r}")
    return w


def check_weights(graph: nx.Graph) -> None:
    """Refuse edge weights that are missing, negative, or whose row sums exceed 1.

    Raises
    ------
    ConfigError
        ``'weight'``, naming the edge or the node.
    """
    sums: dict[Any, float] = {v: 0.0 for v in graph.nodes()}
    for a, b, attrs in graph.edges(data=True):
        w = _edge_weight(a, b, attrs)
        sums[a] += w
        sums[b] += w
    for v, total in sums.items():
        if total > 1.0 + ROW_TOLERANCE:
            raise ConfigError("weight", "edge weights summing to at most 1 at every node (the self "
                              "weight 1 - sum completes the row)", f"node {v}'s sum to {total:.6g}")


def slot_weights(net: Any, kind: str) -> np.ndarray:
    """``W_ij`` for every CSR slot of a built network (aligned with ``net.indices``).

    Parameters
    ----------
    net : sim.gossip.network.Network
        A network that is not the implicit complete graph.
    kind : {"metropolis", "uniform", "weight"}

    Returns
    -------
    numpy.ndarray
        One weight per slot ``(i, indices[k])``, rows in ``indptr`` order.
    """
    check_choice("mixing", kind, ("metropolis", "uniform", "weight"))
    deg = np.diff(net.indptr)
    src = np.repeat(np.arange(net.n), deg)
    dst = net.indices
    if kind == "metropolis":
        return 1.0 / (1.0 + np.maximum(deg[src], deg[dst]))
    if kind == "uniform":
        return 1.0 / (1.0 + deg[src].astype(float))
    g = net.graph
    w = np.array([_edge_weight(a, b, attrs) for a, b, attrs in g.edges(data=True)], dtype=float)
    s = np.concatenate([net.u, net.v])
    d = np.concatenate([net.v, net.u])
    order = np.lexsort((d, s))  # the order of the network's CSR slots
    return np.concatenate([w, w])[order]


def weight_matrix(net: Any, kind: str) -> sp.csr_array:
    """The off-diagonal mixing weights of a built network as an ``n x n`` sparse matrix."""
    return sp.csr_array((slot_weights(net, kind), net.indices, net.indptr), shape=(net.n, net.n))


def mixing_weights(G: nx.Graph, kind: str = "metropolis") -> sp.csr_matrix:
    """The off-diagonal mixing weights of a graph, in the order of ``G.nodes()``.

    Parameters
    ----------
    G : networkx.Graph
    kind : {"metropolis", "uniform", "weight"}

    Returns
    -------
    scipy.sparse.csr_matrix
        ``W_ij`` for ``i != j`` (the self weight is ``1 - sum_j W_ij``).
    """
    check_choice("mixing", kind, ("metropolis", "uniform", "weight"))
    pos = {v: k for k, v in enumerate(G.nodes())}
    n = len(pos)
    edges = [(pos[a], pos[b], attrs) for a, b, attrs in G.edges(data=True) if a != b]
    i = np.array([e[0] for e in edges], dtype=np.int64)
    j = np.array([e[1] for e in edges], dtype=np.int64)
    deg = np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
    if kind == "metropolis":
        w = 1.0 / (1.0 + np.maximum(deg[i], deg[j]))
        wi = wj = w
    elif kind == "uniform":
        wi = 1.0 / (1.0 + deg[i].astype(float))  # W_ij, i's share
        wj = 1.0 / (1.0 + deg[j].astype(float))  # W_ji
    else:
        check_weights(G)
        wi = wj = np.array([float(e[2]["weight"]) for e in edges], dtype=float)
    return sp.coo_matrix((np.concatenate([wi, wj]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                         shape=(n, n)).tocsr()
