"""Study B: what can one stubborn node do to gossip averaging? (closed forms of :mod:`sim.gossip`)

Everything here is a pure function of its arguments (no simulation, no random
numbers), validated under the CLI's parameter names (``'nodes'``,
``'noise'``, ``'tau'``).

The complete graph, matching and random-edge gossip
    :func:`matching_contraction`, :func:`rounds_to_reduce`, :func:`noise_floor`,
    :func:`noise_floor_before_averaging`, :func:`capture_rate`,
    :func:`matching_capture_rate`, :func:`creep_bound`, :func:`matching_creep`,
    :func:`complete_graph_honest_mean`.
Random-edge gossip on any graph
    :func:`edge_gossip_disagreement`, :func:`edge_gossip_honest_disagreement`,
    :func:`edge_gossip_rate`, :func:`expected_averaging_matrix`,
    :func:`spectral_gap`, :func:`fiedler_value`, :func:`stubborn_honest_mean`,
    :func:`stubborn_honest_expectation`, :func:`harmonic_extension`,
    :func:`honest_nodes`.
Async gossip under churn
    :func:`churn_contraction_rate`, :func:`async_noise_floor`.

References
----------
.. [B] "What can one stubborn node do to gossip averaging?" (Study B;
   ``docs/studies.md`` restates it with the readings that make its constants
   exact).
.. [BGPS] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
   algorithms", IEEE Trans. Information Theory 52(6), 2006.
.. [ACFO] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
   and disagreement in social networks", Mathematics of Operations Research
   38(1), 2013.
.. [HKJ] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ..errors import (
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_probability,
)

__all__ = [
    # the complete graph
    "matching_contraction",
    "rounds_to_reduce",
    "noise_floor",
    "noise_floor_before_averaging",
    "capture_rate",
    "matching_capture_rate",
    "creep_bound",
    "matching_creep",
    "complete_graph_honest_mean",
    # any graph
    "MAX_EXACT_NODES",
    "MAX_EXACT_RATE_NODES",
    "expected_averaging_matrix",
    "fiedler_value",
    "spectral_gap",
    "edge_gossip_rate",
    "edge_gossip_disagreement",
    "edge_gossip_honest_disagreement",
    "honest_nodes",
    "stubborn_honest_expectation",
    "stubborn_honest_mean",
    "harmonic_extension",
    # async gossip under churn
    "churn_contraction_rate",
    "async_noise_floor",
]

#: Largest graph for the exact second-moment recursion: it keeps dense
#: ``n x n`` matrices (about three of them, 8 bytes per entry; 10^4 nodes is
#: about 2.4 GB). Beyond this use :func:`edge_gossip_rate` or :func:`spectral_gap`.
MAX_EXACT_NODES = 10_000

#: Largest graph for which :func:`edge_gossip_rate` computes the exact rate by
#: default (a Lanczos iteration on ``n x n`` matrices: about 0.1 s for a ring of
#: 100 nodes, 8 s for 200); beyond it returns the spectral bound.
MAX_EXACT_RATE_NODES = 256


def _even_nodes(n: Any) -> int:
    n = check_int("nodes", n, low=2)
    check(n % 2 == 0, "nodes", "an even integer >= 2", n)
    return n


def matching_contraction(n: int) -> float:
    """Expected contraction of disagreement per random perfect-matching round.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).

    Returns
    -------
    float
        ``(n - 2) / (2 (n - 1))``.

    Notes
    -----
    Averaging a pair lowers :math:`D = \\sum_i (x_i - \\bar x)^2` by
    :math:`(x_i - x_j)^2 / 2`; each pair is matched with probability
    :math:`1/(n-1)` and :math:`\\sum_{i<j} (x_i - x_j)^2 = n D`, so exactly

    .. math:: E[D' \\mid D] = \\frac{n - 2}{2 (n - 1)} D .

    References
    ----------
    Study B ("What can one stubborn node do to gossip averaging?"), docs/studies.md.
    """
    n = _even_nodes(n)
    return (n - 2) / (2 * (n - 1))


def rounds_to_reduce(n: int, factor: float = 1e-6) -> int:
    """Matching rounds until expected disagreement falls by ``factor``.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    factor : float, optional
        Target ratio ``E[D_t] / D_0`` in (0, 1) (default 1e-6).

    Returns
    -------
    int
        The smallest ``t`` with :math:`c^t \\le` ``factor``, ``c`` the
        :func:`matching_contraction` (about 20 for 1e-6 at any large ``n``).

    Notes
    -----
    .. math:: t = \\lceil \\ln(\\mathrm{factor}) / \\ln c \\rceil, \\quad c = \\frac{n-2}{2(n-1)}

    References
    ----------
    Study B, docs/studies.md.
    """
    c = matching_contraction(n)
    f = check_probability("factor", factor, open_low=True, open_high=True)
    if c == 0.0:
        return 1
    t = math.ceil(math.log(f) / math.log(c) - 1e-12)
    return max(t, 1)


def noise_floor(n: int, noise: float) -> float:
    """Stationary expected disagreement with per-round noise, measured after averaging.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    noise : float
        Standard deviation ``s`` of the fresh ``N(0, s^2)`` noise each node
        adds every round, before the matching averages.

    Returns
    -------
    float
        ``(n - 1)(n - 2) s^2 / n``.

    Notes
    -----
    Noise adds :math:`(n-1)s^2` to :math:`E[D]`, then the matching multiplies
    by :math:`c = (n-2)/(2(n-1))`; the fixed point of
    :math:`D \\mapsto c (D + (n-1) s^2)` is

    .. math:: D^* = \\frac{c (n-1) s^2}{1 - c} = \\frac{(n-1)(n-2)}{n} s^2 .

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    s = check_nonnegative("noise", noise)
    return (n - 1) * (n - 2) * s * s / n


def noise_floor_before_averaging(n: int, noise: float) -> float:
    """Stationary expected disagreement measured right after the noise, before averaging.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    noise : float
        Noise standard deviation ``s``.

    Returns
    -------
    float
        ``2 (n - 1)^2 s^2 / n``.

    Notes
    -----
    .. math:: D^* + (n - 1) s^2 = \\frac{2 (n-1)^2}{n} s^2

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    s = check_nonnegative("noise", noise)
    return 2 * (n - 1) ** 2 * s * s / n


def capture_rate(n: int) -> float:
    """Per-step contraction of ``E[m - b]`` with one stubborn node, single random pair.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (>= 2).

    Returns
    -------
    float
        ``1 - 1 / (n (n - 1))``.

    Notes
    -----
    Each honest node meets the stubborn one with probability
    :math:`2/(n(n-1))` and then moves the honest mean by
    :math:`(b - x_i) / (2(n-1))`; honest-honest pairs keep the mean, so

    .. math:: E[m' - b] = \\Bigl(1 - \\frac{1}{n (n - 1)}\\Bigr) (m - b).

    References
    ----------
    Study B, docs/studies.md; [ACFO] (stubborn agents in gossip).
    """
    n = check_int("nodes", n, low=2)
    return 1.0 - 1.0 / (n * (n - 1))


def matching_capture_rate(n: int) -> float:
    """Per-round contraction of ``E[m - b]`` with one stubborn node, random perfect matching.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (even, >= 2).

    Returns
    -------
    float
        ``1 - 1 / (2 (n - 1))``.

    Notes
    -----
    The stubborn node is matched to each honest node with probability
    :math:`1/(n-1)`, which moves the honest mean by :math:`(b - x_i)/(2(n-1))`:

    .. math:: E[m' - b] = \\Bigl(1 - \\frac{1}{2 (n - 1)}\\Bigr) (m - b).

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    return 1.0 - 1.0 / (2 * (n - 1))


def creep_bound(n: int, tau: float) -> float:
    """Largest expected per-step move of the honest mean under a trust-region clip.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (>= 2).
    tau : float
        Clip radius (> 0); an honest node moves by ``clip(x_peer - x_self, tau) / 2``.

    Returns
    -------
    float
        ``tau / (n (n - 1))`` per single-pair step.

    Notes
    -----
    An honest node meets the stubborn one with probability
    :math:`2/(n(n-1))` and then moves by at most :math:`\\tau/2`, i.e. the mean
    by at most :math:`\\tau/(2(n-1))`; summed over the :math:`n-1` honest nodes

    .. math:: |E[m' - m]| \\le \\frac{\\tau}{n (n - 1)},

    with equality while every honest node is farther than ``tau`` from ``b``.

    References
    ----------
    Study B, docs/studies.md; [HKJ] (ClippedGossip, self-centred clipping).
    """
    n = check_int("nodes", n, low=2)
    t = check_nonnegative("tau", tau)
    return t / (n * (n - 1))


def matching_creep(n: int, tau: float) -> float:
    """Per-round creep of the honest mean under a clip, random perfect matching.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (even, >= 2).
    tau : float
        Clip radius.

    Returns
    -------
    float
        ``tau / (2 (n - 1))``; exact while every honest node is farther than
        ``tau`` from the stubborn value.

    Notes
    -----
    The stubborn node's partner moves by exactly :math:`\\tau/2` towards it:

    .. math:: E[m' - m] = \\frac{\\tau}{2 (n - 1)}

    References
    ----------
    Study B, docs/studies.md; [HKJ].
    """
    n = _even_nodes(n)
    t = check_nonnegative("tau", tau)
    return t / (2 * (n - 1))


def complete_graph_honest_mean(n: int, stubborn_value: float | np.ndarray, honest_mean0: float | np.ndarray,
                               steps: int, *, protocol: str = "edge") -> np.ndarray:
    """Exact expected honest mean, one stubborn node on the complete graph.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included.
    stubborn_value : float or array
        The stubborn value ``b`` (scalar or a vector of dimension ``d``).
    honest_mean0 : float or array
        Initial honest mean ``m_0`` (same shape as ``b``).
    steps : int
        Steps (``edge``: single random pairs) or rounds (``matching``).
    protocol : {"edge", "matching"}, optional

    Returns
    -------
    numpy.ndarray
        ``E[m_t]`` for ``t = 0..steps``, shape ``(steps + 1,)`` or ``(steps + 1, d)``.

    Notes
    -----
    .. math:: E[m_t] = b + \\gamma^t (m_0 - b), \\quad
              \\gamma = 1 - \\frac{1}{n(n-1)} \\text{ (edge)}, \\;
              1 - \\frac{1}{2(n-1)} \\text{ (matching)}

    References
    ----------
    Study B, docs/studies.md.
    """
    proto = check_choice("protocol", protocol, ["edge", "matching"])
    g = capture_rate(n) if proto == "edge" else matching_capture_rate(n)
    T = check_int("steps", steps, low=0)
    b = np.asarray(stubborn_value, dtype=float)
    m0 = np.asarray(honest_mean0, dtype=float)
    f = g ** np.arange(T + 1, dtype=float)
    f = f.reshape((-1,) + (1,) * np.broadcast(b, m0).ndim)
    return b + f * (m0 - b)


# ============================================================== gossip on any graph


@dataclass(frozen=True)
class _Edges:
    nodes: list[Hashable]
    i: np.ndarray
    j: np.ndarray

    @property
    def n(self) -> int:
        return len(self.nodes)

    @property
    def m(self) -> int:
        return int(self.i.size)

    def laplacian(self) -> sp.csr_matrix:
        n = self.n
        deg = np.bincount(self.i, minlength=n) + np.bincount(self.j, minlength=n)
        rows = np.concatenate([self.i, self.j, np.arange(n)])
        cols = np.concatenate([self.j, self.i, np.arange(n)])
        data = np.concatenate([-np.ones(2 * self.m), deg.astype(float)])
        return sp.csr_matrix((data, (rows, cols)), shape=(n, n))


def _edges(G: Any) -> _Edges:
    check(isinstance(G, nx.Graph), "graph", "a networkx graph", type(G).__name__)
    check(not G.is_directed(), "graph", "an undirected graph", type(G).__name__)
    nodes = list(G.nodes())
    check(len(nodes) >= 2, "nodes", "an integer >= 2", len(nodes))
    index = {v: k for k, v in enumerate(nodes)}
    pairs = [(index[u], index[v]) for u, v in G.edges()]
    for a, b in pairs:
        check(a != b, "graph", "a graph without self-loops", nodes[a])
    check(len(pairs) >= 1, "graph", "a graph with at least one edge", G.number_of_edges())
    ij = np.array(pairs, dtype=np.int64)
    return _Edges(nodes, ij[:, 0].copy(), ij[:, 1].copy())


def _check_exact_size(n: int) -> None:
    check(n <= MAX_EXACT_NODES, "nodes",
          f"at most {MAX_EXACT_NODES} for the exact second-moment recursion (O(n^2) memory; "
          "use edge_gossip_rate() or spectral_gap() instead)", n)


def expected_averaging_matrix(G: nx.Graph) -> sp.csr_matrix:
    """Expected averaging matrix of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one edge is drawn uniformly per step.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``E[W] = I - L / (2 m)`` in the order of ``G.nodes()``.

    Notes
    -----
    :math:`W_e = I - (e_i - e_j)(e_i - e_j)^T / 2` and
    :math:`\\sum_e (e_i - e_j)(e_i - e_j)^T = L`, so

    .. math:: E[W] = \\frac{1}{m} \\sum_e W_e = I - \\frac{L}{2m}.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    return (sp.identity(e.n, format="csr") - e.laplacian() / (2.0 * e.m)).tocsr()


def fiedler_value(G: nx.Graph) -> float:
    """Algebraic connectivity: the second smallest eigenvalue of the graph Laplacian.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph (unweighted; parallel edges count).

    Returns
    -------
    float
        :math:`\\lambda_2(L)`; 0 for a disconnected graph.

    Notes
    -----
    Dense ``eigvalsh`` up to 2000 nodes. Beyond: if the Laplacian has a
    narrow band after reverse Cuthill-McKee reordering (rings, tori, paths),
    Lanczos on :math:`P (L + \\delta I)^{-1} P` with a sparse LU
    (shift-invert, accurate for tiny :math:`\\lambda_2`); otherwise Lanczos
    (``scipy.sparse.linalg.eigsh``) on :math:`P(cI - L)P` with :math:`c = 2 d_{max} \\ge \\lambda_{max}(L)` and
    :math:`P = I - J/n`: its top eigenvalue is :math:`c - \\lambda_2(L)`, so the
    absolute accuracy is about :math:`10^{-13} c` (seconds for 10^5 nodes).

    References
    ----------
    .. [1] M. Fiedler, "Algebraic connectivity of graphs", 1973.
    """
    e = _edges(G)
    if e.n <= 2000:
        lam = np.linalg.eigvalsh(e.laplacian().toarray())
        return float(max(lam[1], 0.0))
    if not nx.is_connected(G):
        return 0.0
    L = e.laplacian()
    c = 2.0 * float(L.diagonal().max())  # >= lambda_max(L)
    perm = reverse_cuthill_mckee(L, symmetric_mode=True)
    Lp = L[perm][:, perm].tocoo()
    if int(np.abs(Lp.row - Lp.col).max()) * e.n <= 2 * 10**8:
        # narrow band after reordering (rings, tori, paths): shift-invert with a sparse LU
        delta = 1e-6 * c
        lu = spla.splu((L + delta * sp.identity(e.n)).tocsc())

        def inverse(v: np.ndarray) -> np.ndarray:  # P (L + delta I)^-1 P
            w = lu.solve(v.ravel() - v.mean())
            return w - w.mean()

        op = spla.LinearOperator((e.n, e.n), matvec=inverse, dtype=float)
        v0 = np.cos(np.arange(e.n) * 2.399963229728653)
        top = spla.eigsh(op, k=1, which="LA", v0=v0, tol=1e-12, maxiter=100_000,
                         return_eigenvectors=False)
        return float(max(1.0 / top[0] - delta, 0.0))

    def shifted(v: np.ndarray) -> np.ndarray:  # P (cI - L) P, P = I - J/n
        v = v.ravel() - v.mean()
        w = c * v - L @ v
        return w - w.mean()

    op = spla.LinearOperator((e.n, e.n), matvec=shifted, dtype=float)
    v0 = np.cos(np.arange(e.n) * 2.399963229728653)  # deterministic, not constant
    top = spla.eigsh(op, k=1, which="LA", v0=v0, tol=1e-13, ncv=64, maxiter=100_000,
                     return_eigenvectors=False)
    return float(max(c - top[0], 0.0))


def spectral_gap(G: nx.Graph) -> float:
    """Spectral gap ``1 - lambda_2(E[W])`` of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.

    Returns
    -------
    float
        :math:`\\lambda_2(L) / (2m)`.

    Notes
    -----
    .. math:: 1 - \\lambda_2(E[W]) = \\frac{\\lambda_2(L)}{2m}

    and :math:`E[D(t)] \\le \\lambda_2(E[W])^t D(0)` [1]_. On sparse graphs
    (ring, torus, random regular) the exact :math:`E[D(t)]` decays about twice
    as fast in the exponent; see :func:`edge_gossip_rate`.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    return fiedler_value(G) / (2.0 * e.m)


def _second_moment_step(S: np.ndarray, K: sp.csr_matrix, e: _Edges, honest: np.ndarray | None
                        ) -> np.ndarray:
    """One step of ``Sigma' = mean_e A_e Sigma A_e^T`` (stubborn rows of ``A_e`` are identity)."""
    m = e.m
    w = (S[e.i, e.i] + S[e.j, e.j] - 2.0 * S[e.i, e.j]) / (4.0 * m)
    out = K @ S
    out += out.T.copy()
    out *= -1.0 / (2.0 * m)
    out += S
    if honest is None:
        out[np.diag_indices(e.n)] += np.bincount(e.i, w, e.n) + np.bincount(e.j, w, e.n)
        np.subtract.at(out, (e.i, e.j), w)
        np.subtract.at(out, (e.j, e.i), w)
        return out
    hi, hj = honest[e.i], honest[e.j]
    diag = np.bincount(e.i, w * hi, e.n) + np.bincount(e.j, w * hj, e.n)
    out[np.diag_indices(e.n)] += diag
    both = hi & hj
    np.subtract.at(out, (e.i[both], e.j[both]), w[both])
    np.subtract.at(out, (e.j[both], e.i[both]), w[both])
    return out


def _record_points(steps: int, record_every: int) -> np.ndarray:
    pts = np.arange(0, steps + 1, record_every, dtype=np.int64)
    if pts[-1] != steps:
        pts = np.append(pts, steps)
    return pts


def _steps_every(steps: Any, record_every: Any) -> tuple[int, int]:
    return check_int("steps", steps, low=0), check_int("record_every", record_every, low=1)


def edge_gossip_disagreement(G: nx.Graph, steps: int, *, sigma0: np.ndarray | None = None,
                             record_every: int = 1) -> np.ndarray:
    """Exact expected disagreement of random-edge gossip on any graph.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; each step averages the endpoints of one uniformly
        random edge.
    steps : int
        Number of single-edge steps.
    sigma0 : array_like, optional
        Second moment :math:`E[x_0 x_0^T]` of the start, ``n x n`` in the order
        of ``G.nodes()``. Default: the identity (i.i.d. ``N(0, 1)`` values).
        For a deterministic start ``x0`` pass ``np.outer(x0, x0)``.
    record_every : int, optional
        Record every ``k`` steps (default 1).

    Returns
    -------
    numpy.ndarray
        :math:`E[D(t)]` at ``t = 0, k, 2k, ...`` and at ``t = steps`` (always
        included), ``D = sum_i (x_i - mean(x))^2``.

    Raises
    ------
    ConfigError
        If the graph has more than :data:`MAX_EXACT_NODES` nodes (the
        recursion stores dense ``n x n`` matrices); use
        :func:`edge_gossip_rate` or :func:`spectral_gap` then.

    Notes
    -----
    :math:`W_e = I - v v^T/2`, :math:`v = e_i - e_j`, is a projection, so

    .. math:: \\Sigma_{t+1} = \\frac{1}{m} \\sum_e W_e \\Sigma_t W_e
              = \\Sigma_t - \\frac{L \\Sigma_t + \\Sigma_t L}{2m}
                + \\frac{1}{4m} L_w(\\Sigma_t),
              \\qquad E[D(t)] = \\mathrm{tr}\\bigl((I - J/n) \\Sigma_t\\bigr)

    where :math:`L_w` is the Laplacian with edge weights
    :math:`w_e = \\Sigma_{ii} + \\Sigma_{jj} - 2 \\Sigma_{ij}`. No :math:`W_e` is
    formed: a step costs one sparse-dense product, :math:`O(n m + n^2)`.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    _check_exact_size(e.n)
    T, k = _steps_every(steps, record_every)
    n = e.n
    if sigma0 is None:
        S = np.eye(n)
    else:
        S = np.array(sigma0, dtype=float)
        check(S.shape == (n, n), "sigma0", f"an array of shape ({n}, {n})", S.shape)
        S = (S + S.T) / 2.0
    # Iterate on P Sigma P (P = I - J/n): the map commutes with it and the trace is unchanged,
    # so E[D] keeps its relative accuracy instead of cancelling against the consensus part.
    S = S - S.mean(axis=0, keepdims=True)
    S = S - S.mean(axis=1, keepdims=True)
    K = e.laplacian()
    pts = _record_points(T, k)
    out = np.empty(pts.size)
    t, r = 0, 0
    while True:
        if t == pts[r] or t % 8 == 0:  # re-project: rounding leaks out of the subspace
            S = S - S.mean(axis=0, keepdims=True)
            S = S - S.mean(axis=1, keepdims=True)
            S = (S + S.T) / 2.0
        if t == pts[r]:
            out[r] = np.trace(S)
            r += 1
            if r == pts.size:
                break
        S = _second_moment_step(S, K, e, None)
        t += 1
    return out


def _stubborn_split(G: nx.Graph, stubborn: Any, x0: Any) -> tuple[_Edges, np.ndarray, np.ndarray, np.ndarray]:
    """Edges, honest mask, stubborn values ``(n, d)`` and honest starts ``(n, d)`` (rows in node order)."""
    e = _edges(G)
    index = {v: k for k, v in enumerate(e.nodes)}
    if isinstance(stubborn, Mapping):
        stub = dict(stubborn)
    else:
        check(isinstance(stubborn, Iterable) and not isinstance(stubborn, str), "stubborn",
              "a mapping node -> value, or a list of nodes whose values are in x0", stubborn)
        names = list(stubborn)
        check(isinstance(x0, Mapping) and all(v in x0 for v in names), "stubborn",
              "a mapping node -> value, or a list of nodes whose values are in x0", names)
        stub = {v: x0[v] for v in names}
    check(len(stub) >= 1, "stubborn", "at least one stubborn node", stub)
    for v in stub:
        check(v in index, "stubborn", "nodes of the graph", v)
    check(len(stub) < e.n, "stubborn", "fewer nodes than the graph has", len(stub))
    vals = [np.asarray(b, dtype=float) for b in stub.values()]
    shape = vals[0].shape
    check(len(shape) <= 1 and all(v.shape == shape for v in vals) and all(np.isfinite(v).all() for v in vals),
          "stubborn", "finite values, all scalars or all vectors of one dimension", shape)
    d = 1 if shape == () else shape[0]
    honest = np.ones(e.n, dtype=bool)
    B = np.zeros((e.n, d))
    for v, b in zip(stub, vals, strict=True):
        honest[index[v]] = False
        B[index[v]] = b.reshape(d)
    X = np.zeros((e.n, d))
    hidx = np.nonzero(honest)[0]
    if x0 is None:
        pass
    elif isinstance(x0, Mapping):
        for v in (e.nodes[i] for i in hidx):
            if v in x0:
                xv = np.asarray(x0[v], dtype=float)
                check(xv.size in (1, d) and np.isfinite(xv).all(), "x0",
                      f"finite values of dimension {d}", x0[v])
                X[index[v]] = np.broadcast_to(xv.reshape(-1), (d,))
    else:
        xa = np.asarray(x0, dtype=float)
        h = hidx.size
        same = d > 1 and xa.shape == (d,) and d != h  # one vector for every honest node
        ok = xa.ndim == 0 or same or xa.shape in ((h,), (h, d)) or (d == 1 and xa.shape == (h, 1))
        check(ok and np.isfinite(xa).all(), "x0",
              f"a scalar, a mapping node -> value, or an array of shape ({h},) or ({h}, {d}) "
              "over the honest nodes", xa.shape)
        X[hidx] = np.broadcast_to(xa if (xa.ndim == 0 or same) else xa.reshape((h, -1)), (h, d))
    return e, honest, B, X


def honest_nodes(G: nx.Graph, stubborn: Iterable[Hashable]) -> list[Hashable]:
    """The honest nodes in the order used by the stubborn-node functions.

    Parameters
    ----------
    G : networkx.Graph
    stubborn : iterable of nodes (a dict's keys are its nodes)

    Returns
    -------
    list
        Nodes of ``G`` not in ``stubborn``, in ``G.nodes()`` order.
    """
    s = set(stubborn)
    return [v for v in G.nodes() if v not in s]


def _reduce_dim(arr: np.ndarray, scalar: bool) -> np.ndarray:
    return arr[..., 0] if scalar else arr


def _is_scalar_values(stubborn: Any, x0: Any) -> bool:
    if isinstance(stubborn, Mapping):
        vals = list(stubborn.values())
    else:
        vals = [x0[v] for v in stubborn] if isinstance(x0, Mapping) else [0.0]
    return np.asarray(vals[0]).ndim == 0 if vals else True


def stubborn_honest_expectation(G: nx.Graph, stubborn: Mapping[Hashable, Any] | Iterable[Hashable],
                                steps: int, *, x0: Any = None, record_every: int = 1) -> np.ndarray:
    """Exact expected value of every honest node under random-edge gossip with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict or iterable
        ``{node: b}`` (``b`` a scalar or a vector of dimension ``d``), or a
        list of nodes whose values are read from ``x0``.
    steps : int
        Number of single-edge steps.
    x0 : scalar, dict or array, optional
        Initial honest values: a scalar for all, ``{node: value}`` (missing
        honest nodes start at 0; stubborn entries are used only when
        ``stubborn`` is a list), or an array over :func:`honest_nodes`.
        Default 0.
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        Shape ``(T, h)`` for scalar values or ``(T, h, d)`` for vectors, rows
        at the recorded steps, columns in :func:`honest_nodes` order.

    Notes
    -----
    An honest endpoint of the drawn edge moves half-way to the other
    endpoint; stubborn nodes never move. With the Laplacian :math:`L` split
    into honest (H) and stubborn (S) blocks,

    .. math:: E[x_H(t+1)] = E[x_H(t)] - \\frac{L_{HH} E[x_H(t)] + L_{HS} b_S}{2m}.

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    .. [2] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    scalar = _is_scalar_values(stubborn, x0)
    e, honest, B, X = _stubborn_split(G, stubborn, x0)
    T, k = _steps_every(steps, record_every)
    L = e.laplacian()
    hidx = np.nonzero(honest)[0]
    sidx = np.nonzero(~honest)[0]
    LHH = L[hidx][:, hidx].tocsr()
    drive = L[hidx][:, sidx] @ B[sidx]
    x = X[hidx].copy()
    pts = _record_points(T, k)
    out = np.empty((pts.size,) + x.shape)
    t, r = 0, 0
    two_m = 2.0 * e.m
    while True:
        if t == pts[r]:
            out[r] = x
            r += 1
            if r == pts.size:
                break
        x = x - (LHH @ x + drive) / two_m
        t += 1
    return _reduce_dim(out, scalar)


def stubborn_honest_mean(G: nx.Graph, stubborn: Mapping[Hashable, Any] | Iterable[Hashable],
                         x0: Any = None, steps: int = 0, record_every: int = 1) -> np.ndarray:
    """Exact expected honest mean under random-edge gossip with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict or iterable
        ``{node: b}``, or a list of nodes whose (fixed) values are in ``x0``.
    x0 : scalar, dict or array, optional
        Initial honest values (see :func:`stubborn_honest_expectation`); default 0.
    steps : int
        Number of single-edge steps.
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        :math:`E[\\bar x_H(t)]`, shape ``(T,)`` (scalars) or ``(T, d)``.

    Notes
    -----
    The mean over honest nodes of the first-moment recursion

    .. math:: E[x_H(t+1)] = E[x_H(t)] - \\frac{L_{HH} E[x_H(t)] + L_{HS} b_S}{2m},

    which tends to the mean of the :func:`harmonic_extension`. On the
    complete graph with one stubborn node it is
    :math:`b + (1 - 1/(n(n-1)))^t (m_0 - b)` (:func:`capture_rate`).

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    ex = stubborn_honest_expectation(G, stubborn, steps, x0=x0, record_every=record_every)
    return ex.mean(axis=1)


def harmonic_extension(G: nx.Graph, stubborn: Mapping[Hashable, Any]) -> np.ndarray:
    """Long-run expected honest values with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.
    stubborn : dict
        ``{node: b}``, scalars or vectors of one dimension.

    Returns
    -------
    numpy.ndarray
        :math:`x_H^* = -L_{HH}^{-1} L_{HS} b_S`, shape ``(h,)`` or ``(h, d)``,
        in :func:`honest_nodes` order.

    Raises
    ------
    ConfigError
        If some connected component has no stubborn node (no limit exists
        independent of the start).

    Notes
    -----
    The fixed point of the first-moment recursion: each honest value is the
    average of its neighbours',

    .. math:: L_{HH} x_H^* + L_{HS} b_S = 0 .

    With stubborn nodes that disagree the values themselves never settle;
    only their expectations converge.

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    check(isinstance(stubborn, Mapping), "stubborn", "a mapping node -> value", stubborn)
    scalar = _is_scalar_values(stubborn, None)
    e, honest, B, _ = _stubborn_split(G, stubborn, None)
    stub_set = set(stubborn)
    for comp in nx.connected_components(G):
        check(bool(comp & stub_set), "stubborn", "a set with a node in every connected component",
              sorted(map(str, comp))[:5])
    L = e.laplacian()
    hidx = np.nonzero(honest)[0]
    sidx = np.nonzero(~honest)[0]
    LHH = L[hidx][:, hidx].tocsc()
    rhs = -(L[hidx][:, sidx] @ B[sidx])
    x = spla.splu(LHH).solve(rhs)
    return _reduce_dim(np.asarray(x).reshape(hidx.size, -1), scalar)


def edge_gossip_honest_disagreement(G: nx.Graph, stubborn: Mapping[Hashable, Any], steps: int, *,
                                    x0: Any = None, honest_variance: float = 1.0,
                                    record_every: int = 1) -> np.ndarray:
    """Exact expected disagreement among honest nodes, with stubborn nodes held fixed.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict
        ``{node: b}``, scalars or vectors of dimension ``d``.
    steps : int
        Number of single-edge steps.
    x0 : scalar, dict or array, optional
        Mean of the initial honest values (default 0), as for
        :func:`stubborn_honest_expectation`.
    honest_variance : float, optional
        Initial honest values are ``x0 + N(0, honest_variance)``, independent
        across nodes and coordinates (default 1; 0 for a deterministic start).
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        :math:`E[D_H(t)]`, :math:`D_H = \\sum_{i \\in H} \\|x_i - \\bar x_H\\|^2`
        (summed over coordinates).

    Notes
    -----
    Stubborn rows stay fixed, so a step is :math:`x' = A_e x` with
    :math:`A_e = I - P v v^T / 2`, :math:`P` the projection on honest
    coordinates, and

    .. math:: \\Sigma' = \\Sigma - \\frac{P L \\Sigma + \\Sigma L P}{2m}
              + \\frac{1}{4m} P L_w(\\Sigma) P,
              \\qquad E[D_H] = \\mathrm{tr}\\bigl(P (I - J_H/h) P\\, \\Sigma\\bigr)

    per coordinate, started from :math:`\\Sigma_0 = E[x_0 x_0^T]` with the
    stubborn values in it. With disagreeing stubborn nodes :math:`E[D_H]`
    tends to a positive constant.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    .. [2] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    check(isinstance(stubborn, Mapping), "stubborn", "a mapping node -> value", stubborn)
    e, honest, B, X = _stubborn_split(G, stubborn, x0)
    _check_exact_size(e.n)
    var = check_nonnegative("honest_variance", honest_variance)
    T, k = _steps_every(steps, record_every)
    K = sp.diags(honest.astype(float)) @ e.laplacian()
    K = K.tocsr()
    hidx = np.nonzero(honest)[0]
    h = hidx.size
    pts = _record_points(T, k)
    total = np.zeros(pts.size)
    for c in range(B.shape[1]):
        # D_H is invariant under a common shift of all values; centring on the stubborn
        # values keeps the recursion away from cancellation when they agree.
        shift = B[~honest, c].mean()
        mean0 = np.where(honest, X[:, c], B[:, c]) - shift
        S = np.outer(mean0, mean0)
        S[hidx, hidx] += var
        t, r = 0, 0
        while True:
            if t % 8 == 0:
                S = (S + S.T) / 2.0  # the step is exact for symmetric matrices; keep it so
            if t == pts[r]:
                sub = S[np.ix_(hidx, hidx)]
                total[r] += np.trace(sub) - sub.sum() / h
                r += 1
                if r == pts.size:
                    break
            S = _second_moment_step(S, K, e, honest)
            t += 1
    return total


def _rate_operator(e: _Edges) -> spla.LinearOperator:
    n = e.n
    K = e.laplacian()

    def mv(v: np.ndarray) -> np.ndarray:
        S = v.reshape(n, n)
        S = (S + S.T) / 2.0
        S = S - S.mean(axis=0, keepdims=True)
        S = S - S.mean(axis=1, keepdims=True)
        R = _second_moment_step(S, K, e, None)
        R = R - R.mean(axis=0, keepdims=True)
        R = R - R.mean(axis=1, keepdims=True)
        return R.reshape(-1)

    return spla.LinearOperator((n * n, n * n), matvec=mv, dtype=float)


def edge_gossip_rate(G: nx.Graph, *, method: str = "auto") -> float:
    """Asymptotic per-step decay factor of the expected disagreement of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.
    method : {"auto", "exact", "bound"}, optional
        ``exact``: leading eigenvalue of the second-moment map on the
        disagreement subspace (Lanczos on ``n x n`` matrices, up to
        :data:`MAX_EXACT_NODES`); ``bound``: the spectral bound
        :math:`\\lambda_2(E[W])`; ``auto`` (default): exact up to
        :data:`MAX_EXACT_RATE_NODES` nodes, the bound beyond.

    Returns
    -------
    float
        ``rho`` with :math:`E[D(t)] \\approx C \\rho^t` for large ``t``.

    Notes
    -----
    The map :math:`\\mathcal M(\\Sigma) = \\frac1m \\sum_e W_e \\Sigma W_e` is
    self-adjoint and positive for the Frobenius inner product and commutes
    with :math:`\\Sigma \\mapsto P\\Sigma P`, :math:`P = I - J/n`, so the
    exact rate is its largest eigenvalue on :math:`\\{P \\Sigma P\\}`. Always

    .. math:: \\lambda_2(E[W])^2 \\le \\rho \\le \\lambda_2(E[W]) = 1 - \\frac{\\lambda_2(L)}{2m};

    on the complete graph :math:`\\rho = \\lambda_2(E[W]) = 1 - 1/(n-1)`, while
    on sparse graphs (ring, torus, random regular) :math:`\\rho` is close to
    :math:`\\lambda_2(E[W])^2`: the disagreement decays about twice as fast in
    the exponent as the bound suggests.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    kind = check_choice("method", method, ["auto", "exact", "bound"])
    e = _edges(G)
    if kind == "bound" or (kind == "auto" and e.n > MAX_EXACT_RATE_NODES):
        return 1.0 - spectral_gap(G)
    _check_exact_size(e.n)
    n = e.n
    if n <= 16:
        # dense eigen-decomposition of the map on symmetric matrices (small graphs)
        basis = np.eye(n * n)
        op = _rate_operator(e)
        M = np.column_stack([op.matvec(basis[:, c]) for c in range(n * n)])
        return float(np.linalg.eigvalsh((M + M.T) / 2.0)[-1])
    v0 = np.eye(n) - 1.0 / n
    val = spla.eigsh(_rate_operator(e), k=1, which="LA", v0=v0.reshape(-1), tol=1e-12,
                     return_eigenvectors=False)
    return float(val[0])


# ============================================================== async gossip under churn


def churn_contraction_rate(n: int, availability: float, wake_rate: float) -> float:
    """Decay rate of ``E[D]`` per time unit of async gossip on the complete graph under churn.

    Parameters
    ----------
    n : int
        Nodes.
    availability : float
        Stationary probability ``a`` that a node is online.
    wake_rate : float
        Poisson clock rate ``lambda`` of each node.

    Returns
    -------
    float

    Notes
    -----
    ``n a lambda (1 - (1 - a)**(n - 1)) / (n - 1)``: online nodes wake at total
    rate ``n a lambda``, find an online partner unless all ``n - 1`` others are
    down, and each completed exchange contracts ``E[D]`` by ``1 / (n - 1)`` of
    itself (the edge-gossip step on the complete graph). Derived here and
    checked by simulation (``experiments/churn.py``) in the fast-churn regime,
    where the online set seen by successive exchanges is close to independent.

    References
    ----------
    Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans.
    Inf. Theory 52(6), 2006 (the per-exchange contraction).
    """
    a = availability
    return n * a * wake_rate * (1.0 - (1.0 - a) ** (n - 1)) / (n - 1)


def async_noise_floor(n: int, noise: float) -> float:
    """Stationary ``E[D]`` of noisy async gossip on the complete graph, instant exchanges.

    Notes
    -----
    ``(n - 1)(n - 2) s**2 / (2 n)``: each wake adds ``N(0, s**2)`` to the waking
    node before its exchange; balancing the injected disagreement against the
    per-exchange contraction ``1 / (n - 1)`` gives the floor. Derived here and
    checked by simulation (``experiments/churn.py``).
    """
    return (n - 1) * (n - 2) * noise**2 / (2 * n)



