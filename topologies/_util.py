"""Helpers shared by the builders: checks, seeded generators, fast graph assembly."""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from sim.errors import ConfigError, check, check_int, check_nonnegative, check_positive

__all__ = [
    "MAX_EDGES",
    "check_link",
    "check_size",
    "generator",
    "attempt_generators",
    "edges_connected",
    "graph_from_edges",
    "isqrt_exact",
]

#: Largest number of edges a builder materialises (about 1 GB of networkx dicts).
MAX_EDGES = 5_000_000

#: How many derived seeds a random builder tries before giving up on connectivity.
CONNECT_ATTEMPTS = 10


def check_link(latency: Any, bandwidth: Any, *, prefix: str = "") -> tuple[float, float]:
    """Validate a link's ``latency`` (>= 0) and ``bandwidth`` (> 0, ``inf`` allowed)."""
    lat = check_nonnegative(f"{prefix}latency", latency)
    bw = check_positive(f"{prefix}bandwidth", bandwidth, allow_inf=True)
    return lat, bw


def check_size(name: str, value: Any, low: int) -> int:
    """An integer size parameter ``>= low``."""
    return check_int(name, value, low=low)


def check_edges(name: str, value: Any, edges: float) -> None:
    """Refuse to materialise more than :data:`MAX_EDGES` edges."""
    check(edges <= MAX_EDGES, name, f"small enough for at most {MAX_EDGES} edges "
          f"(this would make {int(edges)})", value)


def generator(seed: Any, attempt: int = 0) -> np.random.Generator:
    """A numpy Generator from an integer seed (``attempt`` > 0 derives a new stream).

    A :class:`numpy.random.Generator` passed as ``seed`` is used as it is (every
    attempt then continues the same stream), so scripts can hand a builder a
    stream from :class:`sim.rng.Streams`.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    s = check_int("seed", seed, low=0)
    entropy = s if attempt == 0 else [s, attempt]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def attempt_generators(seed: Any):
    """Yield ``(attempt, Generator)`` for the derived-seed retries of a random builder."""
    for attempt in range(CONNECT_ATTEMPTS):
        yield attempt, generator(seed, attempt)


def edges_connected(n: int, u: np.ndarray, v: np.ndarray) -> bool:
    """True when the graph on ``range(n)`` with edges ``(u, v)`` is connected."""
    if n <= 1:
        return True
    if len(u) < n - 1:
        return False
    m = coo_matrix((np.ones(len(u), dtype=np.int8), (u, v)), shape=(n, n))
    k, _ = connected_components(m, directed=False)
    return k == 1


def graph_from_edges(
    n: int,
    u: np.ndarray,
    v: np.ndarray,
    *,
    latency: float,
    bandwidth: float,
    name: str,
    **graph_attrs: Any,
) -> nx.Graph:
    """A graph on nodes ``0..n-1`` with ``domain=()`` and uniform link attributes."""
    if isinstance(graph_attrs.get("seed"), np.random.Generator):
        graph_attrs["seed"] = None  # drawn from a caller's stream: no integer seed to record
    G = nx.Graph(name=name, **graph_attrs)
    G.add_nodes_from(range(n), domain=())
    G.add_edges_from(zip(np.asarray(u).tolist(), np.asarray(v).tolist(), strict=True),
                     latency=float(latency), bandwidth=float(bandwidth))
    return G


def isqrt_exact(n: int) -> int | None:
    """The integer square root of ``n`` when ``n`` is a perfect square, else None."""
    r = math.isqrt(n)
    return r if r * r == n else None


def not_connected(name: str, value: Any, what: str) -> ConfigError:
    """The error a random builder raises when no attempt gave a connected graph."""
    return ConfigError(name, f"large enough for a connected {what} "
                       f"(no connected draw in {CONNECT_ATTEMPTS} derived seeds)", value)
