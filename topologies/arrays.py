"""Numpy views of a built topology, for vectorised engines on large graphs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

__all__ = ["EdgeArrays", "edge_arrays"]


@dataclass(frozen=True)
class EdgeArrays:
    """A graph as index arrays: node ``nodes[k]`` has index ``k``.

    Attributes
    ----------
    nodes : list
        Node labels in index order (``list(G.nodes)``).
    u, v : numpy.ndarray
        Endpoint indices of every undirected edge (``u[e] < v[e]``), int64.
    latency, bandwidth : numpy.ndarray
        The edges' attributes, float.
    """

    nodes: list[Any]
    u: np.ndarray
    v: np.ndarray
    latency: np.ndarray
    bandwidth: np.ndarray

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @property
    def m(self) -> int:
        """Number of edges."""
        return len(self.u)

    def degrees(self) -> np.ndarray:
        """Degree of every node, by index."""
        return np.bincount(np.concatenate([self.u, self.v]), minlength=self.n)


def edge_arrays(G: nx.Graph) -> EdgeArrays:
    """Index arrays of a graph's edges and their ``latency``/``bandwidth`` attributes.

    Parameters
    ----------
    G : networkx.Graph
        A built (validated) topology.

    Returns
    -------
    EdgeArrays
        Missing attributes read as latency 1.0 and bandwidth inf.
    """
    nodes = list(G.nodes)
    index = {x: k for k, x in enumerate(nodes)}
    m = G.number_of_edges()
    u = np.empty(m, dtype=np.int64)
    v = np.empty(m, dtype=np.int64)
    lat = np.empty(m, dtype=float)
    bw = np.empty(m, dtype=float)
    for e, (a, b, d) in enumerate(G.edges(data=True)):
        i, j = index[a], index[b]
        u[e], v[e] = (i, j) if i < j else (j, i)
        lat[e] = d.get("latency", 1.0)
        bw[e] = d.get("bandwidth", np.inf)
    return EdgeArrays(nodes, u, v, lat, bw)
