"""Exact references for gossip *training* on quadratic objectives.

Every honest node ``i`` holds ``x_i`` in R^d and the separable quadratic

    f_i(x) = 1/2 sum_k a_ik (x_k - c_ik)^2,   a_ik > 0,

and takes local steps ``x <- x - eta (grad f_i(x) + sigma xi)`` with ``xi``
standard normal. ``H`` local steps are affine per coordinate:

    G_i(x) = g_i x + (1 - g_i) c_i + eta_i,   g_i = (1 - eta a_i)^H,
    Var(eta_i) = q_i = eta^2 sigma^2 sum_{h<H} (1 - eta a_i)^{2h},

so each protocol's update is an affine map with random coefficients and the
moments follow exact linear recursions (coordinates never mix, so every
coordinate has its own recursion). Adversaries enter only as stubborn nodes:
their rows are fixed at ``b`` (they never train and never move). Protocols,
in the order of updates that the simulation follows:

``matching``
    complete graph, ``n`` even; every honest node takes ``H`` local steps,
    then a uniformly random perfect matching averages pairs.
``edge``
    one uniformly random edge per step; its two ends take ``H`` local steps
    each, then average (a stubborn end sends ``b``). Any graph.
``allreduce``
    every honest node takes ``H`` local steps, then every node gets the exact
    mean of all values (stubborn nodes contribute ``b``).
``neighbourhood``
    every honest node takes ``H`` local steps, then hears every neighbour at
    once and mixes with Metropolis weights ``W_ij = 1 / (1 + max(d_i, d_j))``:
    ``x_i' = y_i + sum_j W_ij (y_j - y_i)``. Any graph.

Positions (``stubborn`` keys, rows of ``curvature`` and ``optimum``) are in
the order of ``G.nodes()`` (``0 .. n-1`` on the complete graph). The rows of
stubborn nodes in ``curvature`` and ``optimum`` are ignored.

Metrics, over the honest set ``H`` with mean ``m = (1/h) sum_{i in H} x_i``
and honest optimum ``x* = argmin sum_{i in H} f_i`` (per coordinate
``sum_i a_ik c_ik / sum_i a_ik``):

* ``consensus_distance`` ``(1/h) sum_{i in H} |x_i - m|^2`` (squared, as in
  Koloskova et al.);
* ``sq_distance_to_optimum`` ``|m - x*|^2``;
* ``loss`` ``F(m) - F(x*)`` with ``F = (1/h) sum_{i in H} f_i``, which equals
  ``sum_k (abar_k / 2) (m_k - x*_k)^2`` (``abar_k`` the honest mean curvature).

References
----------
.. [BGPS] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
   algorithms", IEEE Trans. Information Theory 52(6), 2006.
.. [ACFO] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
   and disagreement in social networks", Mathematics of Operations Research
   38(1), 2013.
.. [KLBJS] A. Koloskova, N. Loizou, S. Boreiri, M. Jaggi, S. U. Stich, "A
   unified theory of decentralized SGD with changing topology and local
   updates", ICML 2020.
.. [DiLoCo] A. Douillard et al., "DiLoCo: distributed low-communication
   training of language models", 2023; S. U. Stich, "Local SGD converges fast
   and communicates little", ICLR 2019.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import check, check_choice, check_int, check_nonnegative

__all__ = [
    "TRAINING_PROTOCOLS",
    "MAX_TRAINING_EXACT_NODES",
    "check_step_size",
    "local_gain",
    "local_noise_variance",
    "momentum_maps",
    "effective_gain",
    "honest_optimum",
    "diloco_fixed_point",
    "training_mean",
    "training_equilibrium",
    "stubborn_training_bias",
    "steps_to_equilibrium",
    "edge_training_moments",
    "metropolis_weights",
    "async_training_mean",
    "ipm_clip_fixed_point",
]

#: Protocols with an exact first moment on quadratics.
TRAINING_PROTOCOLS = ("matching", "edge", "allreduce", "neighbourhood")
#: Largest graph for :func:`edge_training_moments` (dense ``(n + 1)^2`` second
#: moments per coordinate and ``O(n m)`` work per step).
MAX_TRAINING_EXACT_NODES = 2000


# --------------------------------------------------------------------------- inputs


def check_step_size(curvature: Any, lr: Any, honest: np.ndarray | None = None) -> None:
    """Refuse a step size for which some local step diverges (``lr * a_ik >= 2``).

    Parameters
    ----------
    curvature : array_like, shape (n, d)
    lr : float
    honest : numpy.ndarray of bool, optional
        Rows to check (default: all).

    Raises
    ------
    ConfigError
        Naming the first offending node and coordinate.
    """
    a = np.asarray(curvature, dtype=float)
    rows = np.arange(a.shape[0]) if honest is None else np.flatnonzero(honest)
    prod = float(lr) * a[rows]
    bad = np.argwhere(prod >= 2.0)
    if bad.size:
        r, k = bad[0]
        raise_step(float(lr), int(rows[r]), int(k), float(prod[r, k]))


def raise_step(lr: float, node: int, dim: int, product: float) -> None:
    """Raise the one-line error of a divergent local step at ``node``, coordinate ``dim``."""
    check(False, "lr", f"< 2 / curvature at every honest node (node {node}, dim {dim} has "
          f"lr * curvature = {product:.6g})", lr)


@dataclass(frozen=True)
class _Setting:
    """Validated arrays of one quadratic training problem."""

    a: np.ndarray  # (n, d) curvatures (stubborn rows arbitrary)
    c: np.ndarray  # (n, d) optima
    honest: np.ndarray  # (n,) bool
    b: np.ndarray  # (n, d): stubborn values on stubborn rows, 0 elsewhere
    g: np.ndarray  # (n, d): (1 - eta a)^H on honest rows, 1 on stubborn rows
    q: np.ndarray  # (n, d): local noise variance on honest rows, 0 on stubborn rows
    eta: float = 0.0  # step size
    H: int = 1  # local steps per round

    @property
    def n(self) -> int:
        return int(self.a.shape[0])

    @property
    def d(self) -> int:
        return int(self.a.shape[1])


def _as_nd(name: str, value: Any, n: int | None = None) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    check(arr.ndim == 2 and arr.shape[0] >= 1 and arr.shape[1] >= 1, name,
          "an array of shape (nodes, dim)", arr.shape)
    if n is not None:
        check(arr.shape[0] == n, name, f"an array with one row per node ({n})", arr.shape)
    check(bool(np.all(np.isfinite(arr))), name, "finite", "non-finite entries")
    return arr


def _setting(curvature: Any, optimum: Any, lr: Any, local_steps: Any, *,
             stubborn: Mapping[int, Any] | None = None, grad_noise: Any = 0.0,
             n: int | None = None) -> _Setting:
    a = _as_nd("curvature", curvature, n)
    n = a.shape[0]
    c = _as_nd("optimum", optimum, n)
    check(c.shape == a.shape, "optimum", f"an array of shape {a.shape}", c.shape)
    eta = check_nonnegative("lr", lr)
    H = check_int("local_steps", local_steps, low=1)
    sigma = check_nonnegative("grad_noise", grad_noise)
    honest = np.ones(n, dtype=bool)
    b = np.zeros_like(a)
    for p, val in (stubborn or {}).items():
        pos = check_int("stubborn", p, low=0, high=n - 1)
        honest[pos] = False
        v = np.broadcast_to(np.asarray(val, dtype=float), (a.shape[1],))
        check(bool(np.all(np.isfinite(v))), "stubborn", "finite values", val)
        b[pos] = v
    check(bool(honest.any()), "stubborn", "leaving at least one honest node", sorted(stubborn or {}))
    check(bool(np.all(a[honest] > 0)), "curvature", "> 0 at every honest node",
          float(a[honest].min()))
    check_step_size(a, eta, honest)
    r = 1.0 - eta * a
    g = np.where(honest[:, None], r ** H, 1.0)
    r2 = r * r
    with np.errstate(divide="ignore", invalid="ignore"):
        geo = np.where(np.isclose(r2, 1.0), float(H), (1.0 - r2 ** H) / (1.0 - r2))
    q = np.where(honest[:, None], eta * eta * sigma * sigma * geo, 0.0)
    return _Setting(a, c, honest, b, g, q, float(eta), int(H))


# --------------------------------------------------------------------------- closed forms


def local_gain(curvature: Any, lr: float, local_steps: int) -> np.ndarray:
    """Contraction of ``H`` local steps toward the local optimum, per node and coordinate.

    Parameters
    ----------
    curvature : array_like, shape (n, d)
    lr : float
        Step size ``eta`` (``eta * a < 2``).
    local_steps : int
        ``H >= 1``.

    Returns
    -------
    numpy.ndarray
        :math:`g = (1 - \\eta a)^H`.

    Notes
    -----
    One step maps :math:`x \\mapsto (1 - \\eta a) x + \\eta a c`, so ``H`` steps
    give :math:`g x + (1 - g) c` with :math:`g = (1 - \\eta a)^H`.

    References
    ----------
    .. [1] S. U. Stich, "Local SGD converges fast and communicates little", 2019.
    """
    a = _as_nd("curvature", curvature)
    s = _setting(a, np.zeros_like(a), lr, local_steps)
    return s.g


def local_noise_variance(curvature: Any, lr: float, local_steps: int, grad_noise: float
                         ) -> np.ndarray:
    """Variance of the noise that ``H`` noisy local steps leave in the parameters.

    Parameters
    ----------
    curvature : array_like, shape (n, d)
    lr, local_steps, grad_noise : float, int, float
        ``eta``, ``H`` and the gradient-noise standard deviation ``sigma``.

    Returns
    -------
    numpy.ndarray
        :math:`q = \\eta^2 \\sigma^2 \\sum_{h=0}^{H-1} (1 - \\eta a)^{2h}`.

    Notes
    -----
    The noise of step ``h`` is contracted by the ``H - 1 - h`` steps after it.

    References
    ----------
    .. [1] A. Koloskova et al., "A unified theory of decentralized SGD with
       changing topology and local updates", 2020.
    """
    a = _as_nd("curvature", curvature)
    return _setting(a, np.zeros_like(a), lr, local_steps, grad_noise=grad_noise).q


def momentum_maps(curvature: Any, lr: float, local_steps: int, momentum: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``H`` heavy-ball steps on a quadratic as a 2 x 2 linear map, per node and coordinate.

    Parameters
    ----------
    curvature : array_like, shape (n, d)
    lr, local_steps, momentum : float, int, float
        ``eta``, ``H`` and ``beta`` in [0, 1).

    Returns
    -------
    tuple of numpy.ndarray
        ``(P_xx, P_xv, P_vx, P_vv)``, each ``(n, d)``: the deviation from the
        local optimum and the momentum buffer after ``H`` steps,
        :math:`(x' - c, v') = P\\,(x - c, v)` (in expectation: the gradient
        noise has mean zero).

    Notes
    -----
    One step of torch's SGD with momentum (no dampening, no Nesterov) on
    :math:`f(x) = \\tfrac{a}{2}(x - c)^2` is :math:`v' = \\beta v + a (x - c)`,
    :math:`x' = x - \\eta v'`, i.e.

    .. math:: \\begin{pmatrix} x' - c \\\\ v' \\end{pmatrix} =
              \\begin{pmatrix} 1 - \\eta a & -\\eta\\beta \\\\ a & \\beta \\end{pmatrix}
              \\begin{pmatrix} x - c \\\\ v \\end{pmatrix},

    and ``P`` is its ``H``-th power. At a fixed point of a protocol that does
    not exchange the buffers, ``v' = v``, so the buffer settles at
    :math:`v = P_{vx} (x - c) / (1 - P_{vv})` and the local steps act on
    ``x`` as the gain :func:`effective_gain`.

    References
    ----------
    .. [1] B. T. Polyak, "Some methods of speeding up the convergence of
       iteration methods", USSR Computational Mathematics and Mathematical
       Physics 4(5), 1964 (the heavy-ball method).
    .. [2] PyTorch, ``torch.optim.SGD`` (momentum buffer ``b = mu b + g``,
       step ``p = p - lr b``).
    """
    a = _as_nd("curvature", curvature)
    eta = check_nonnegative("lr", lr)
    H = check_int("local_steps", local_steps, low=1)
    beta = check_nonnegative("momentum", momentum)
    check(beta < 1.0, "momentum", "in [0, 1)", momentum)
    a11, a12, a21, a22 = 1.0 - eta * a, np.full_like(a, -eta * beta), a, np.full_like(a, beta)
    p11, p12, p21, p22 = a11.copy(), a12.copy(), a21.copy(), a22.copy()
    for _ in range(H - 1):
        p11, p12, p21, p22 = (a11 * p11 + a12 * p21, a11 * p12 + a12 * p22,
                              a21 * p11 + a22 * p21, a21 * p12 + a22 * p22)
    return p11, p12, p21, p22


def effective_gain(curvature: Any, lr: float, local_steps: int, momentum: float) -> np.ndarray:
    """The gain of ``H`` heavy-ball steps on ``x`` once the momentum buffer has settled.

    Returns
    -------
    numpy.ndarray, shape (n, d)
        :math:`g = P_{xx} + P_{xv} P_{vx} / (1 - P_{vv})` (:func:`momentum_maps`):
        at any fixed point the local steps map ``x`` to :math:`g x + (1 - g) c`.
        With ``momentum = 0`` this is :func:`local_gain`; with ``H = 1``,
        :math:`1 - g = \\eta a / (1 - \\beta)` (the effective step
        :math:`\\eta / (1 - \\beta)`).
    """
    p11, p12, p21, p22 = momentum_maps(curvature, lr, local_steps, momentum)
    return p11 + p12 * p21 / (1.0 - p22)


def honest_optimum(curvature: Any, optimum: Any, honest: Any = None) -> np.ndarray:
    """Minimiser of the sum of the honest nodes' quadratics.

    Parameters
    ----------
    curvature, optimum : array_like, shape (n, d)
    honest : array_like of bool, optional
        Honest rows (default all).

    Returns
    -------
    numpy.ndarray, shape (d,)
        :math:`x^*_k = \\sum_{i \\in H} a_{ik} c_{ik} / \\sum_{i \\in H} a_{ik}`.

    Notes
    -----
    The gradient of :math:`\\sum_{i\\in H} f_i` is
    :math:`\\sum_i a_{ik} (x_k - c_{ik})`, zero at the curvature-weighted mean.

    References
    ----------
    .. [1] A. Koloskova et al., "A unified theory of decentralized SGD with
       changing topology and local updates", 2020.
    """
    a = _as_nd("curvature", curvature)
    c = _as_nd("optimum", optimum, a.shape[0])
    h = np.ones(a.shape[0], dtype=bool) if honest is None else np.asarray(honest, dtype=bool)
    check(h.shape == (a.shape[0],) and bool(h.any()), "honest", "a mask with a True entry", h)
    check(bool(np.all(a[h] > 0)), "curvature", "> 0 at every honest node", float(a[h].min()))
    return (a[h] * c[h]).sum(axis=0) / a[h].sum(axis=0)


def diloco_fixed_point(curvature: Any, optimum: Any, lr: float, local_steps: int,
                       honest: Any = None) -> np.ndarray:
    """Fixed point of local steps followed by exact averaging (local SGD, DiLoCo-style).

    Parameters
    ----------
    curvature, optimum : array_like, shape (n, d)
    lr : float
        ``eta > 0`` with ``eta a < 2``.
    local_steps : int
        ``H``.
    honest : array_like of bool, optional
        The nodes that train and are averaged (default all).

    Returns
    -------
    numpy.ndarray, shape (d,)
        :math:`\\sum_i w_i c_i / \\sum_i w_i` per coordinate,
        :math:`w_i = 1 - (1 - \\eta a_i)^H`.

    Notes
    -----
    After averaging every node holds ``x``; the next round gives
    :math:`x' = \\frac1h \\sum_i [g_i x + (1 - g_i) c_i]`, whose fixed point is
    :math:`x = \\sum_i (1 - g_i) c_i / \\sum_i (1 - g_i)`. With ``H = 1``,
    :math:`w_i = \\eta a_i` and the fixed point is the true optimum
    :func:`honest_optimum`; as ``H`` grows :math:`w_i \\to 1` and it tends to the
    unweighted mean of the :math:`c_i`. Gradient noise does not move it (the
    noise has mean zero and the map is affine).

    References
    ----------
    .. [1] A. Douillard et al., "DiLoCo: distributed low-communication training
       of language models", 2023.
    .. [2] S. U. Stich, "Local SGD converges fast and communicates little", 2019.
    """
    a = _as_nd("curvature", curvature)
    c = _as_nd("optimum", optimum, a.shape[0])
    check(float(lr) > 0, "lr", "> 0 for a fixed point of local steps", lr)
    h = np.ones(a.shape[0], dtype=bool) if honest is None else np.asarray(honest, dtype=bool)
    stub = {int(p): 0.0 for p in np.flatnonzero(~h)}
    s = _setting(a, c, lr, local_steps, stubborn=stub)
    w = 1.0 - s.g[h]
    return (w * c[h]).sum(axis=0) / w.sum(axis=0)


# --------------------------------------------------------------------------- first moment


def _graph_edges(G: Any) -> tuple[int, np.ndarray, np.ndarray]:
    check(isinstance(G, nx.Graph) and not G.is_directed(), "graph", "an undirected networkx graph",
          type(G).__name__)
    pos = {v: k for k, v in enumerate(G.nodes())}
    pairs = [(pos[u], pos[v]) for u, v in G.edges() if u != v]
    check(len(pairs) >= 1, "graph", "a graph with at least one edge", G.number_of_edges())
    ij = np.array(pairs, dtype=np.int64)
    return len(pos), ij[:, 0].copy(), ij[:, 1].copy()


class _FirstMoment:
    """The exact map ``E[x_H'] = M E[x_H] + v`` of one protocol, coordinate by coordinate.

    With ``momentum > 0`` the state is ``(x_H, v_H)`` (:meth:`step_state`);
    ``weights`` (off-diagonal mixing weights of ``neighbourhood``, default
    Metropolis) and ``rounds`` (aggregations per step, ``neighbourhood`` and
    ``allreduce``) generalise the mixing.
    """

    def __init__(self, protocol: str, s: _Setting, G: Any = None, *, momentum: float = 0.0,
                 weights: Any = None, rounds: int = 1) -> None:
        self.protocol = check_choice("protocol", protocol, TRAINING_PROTOCOLS)
        self.s = s
        self.hidx = np.flatnonzero(s.honest)
        self.sidx = np.flatnonzero(~s.honest)
        h = self.hidx.size
        self.beta = float(momentum)
        self.K = check_int("gossip_rounds", rounds, low=1)
        check(self.K == 1 or protocol in ("neighbourhood", "allreduce"), "gossip_rounds",
              f"1 for protocol {protocol}", rounds)
        check(weights is None or protocol == "neighbourhood", "weights",
              f"None for protocol {protocol} (mixing weights are for neighbourhood)", "given")
        self.custom = weights is not None or self.K != 1
        self._G, self._weights = G, weights
        if self.beta:
            hi = self.hidx
            P = momentum_maps(s.a[hi], s.eta, s.H, self.beta)
            self.P = P
        if protocol == "edge" and self.beta:
            n, i, j = _graph_edges(G)
            self.ei, self.ej, self.m = i, j, i.size
            self.deg = np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
        if protocol == "edge":
            check(G is not None, "graph", "a networkx graph for protocol edge", G)
            n, i, j = _graph_edges(G)
            check(n == s.n, "curvature", f"one row per graph node ({n})", s.n)
            self.M: list[sp.csr_matrix] = []
            self.v = np.empty((h, s.d))
            local = np.full(n, -1, dtype=np.int64)
            local[self.hidx] = np.arange(h)
            m = i.size
            for k in range(s.d):
                g, a_c = s.g[:, k], (1.0 - s.g[:, k]) * s.c[:, k]
                rows, cols, vals = [], [], []
                const = np.zeros(n)
                for p, qn in ((i, j), (j, i)):
                    hp = s.honest[p]
                    p_, q_ = p[hp], qn[hp]
                    hq = s.honest[q_]
                    rows += [local[p_], local[p_[hq]]]
                    cols += [local[p_], local[q_[hq]]]
                    vals += [(g[p_] / 2.0 - 1.0) / m, g[q_[hq]] / 2.0 / m]
                    drive = np.where(hq, a_c[q_] / 2.0, s.b[q_, k] / 2.0)
                    np.add.at(const, p_, (a_c[p_] / 2.0 + drive) / m)
                R = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                  shape=(h, h)).tocsr()
                self.M.append((sp.identity(h, format="csr") + R).tocsr())
                self.v[:, k] = const[self.hidx]
        elif protocol == "neighbourhood":
            check(G is not None, "graph", "a networkx graph for protocol neighbourhood", G)
            n, i, j = _graph_edges(G)
            check(n == s.n, "curvature", f"one row per graph node ({n})", s.n)
            W = metropolis_weights(G) if weights is None else sp.csr_matrix(weights)
            check(W.shape == (n, n), "weights", f"an ({n}, {n}) matrix", W.shape)
            self.W_HH = W[self.hidx][:, self.hidx].tocsr()
            self.W_HS_b = W[self.hidx][:, self.sidx] @ s.b[self.sidx]
            self.w_self = 1.0 - np.asarray(W.sum(axis=1)).ravel()[self.hidx]
            self.A = (sp.diags(self.w_self) + self.W_HH).tocsr()
        elif protocol == "matching":
            check(s.n % 2 == 0, "nodes", "even for protocol matching on the complete graph", s.n)
            self.beta_m = 1.0 / (2.0 * (s.n - 1))
            self.alpha = 0.5 - self.beta_m
        self.bsum = s.b[self.sidx].sum(axis=0)

    def step(self, x: np.ndarray) -> np.ndarray:
        """``E[x_H]`` one step later from ``x`` (shape ``(h, d)``; no momentum)."""
        s, hi = self.s, self.hidx
        if self.protocol == "edge":
            out = np.empty_like(x)
            for k in range(s.d):
                out[:, k] = self.M[k] @ x[:, k] + self.v[:, k]
            return out
        y = s.g[hi] * x + (1.0 - s.g[hi]) * s.c[hi]
        return self.mix(y)

    def mix(self, y: np.ndarray) -> np.ndarray:
        """The synchronous protocols' averaging of the post-local values ``y`` (honest rows)."""
        s = self.s
        if self.protocol == "neighbourhood":
            if not self.custom:
                return self.w_self[:, None] * y + self.W_HH @ y + self.W_HS_b
            for _ in range(self.K):
                y = self.A @ y + self.W_HS_b
            return y
        total = y.sum(axis=0) + self.bsum
        if self.protocol == "allreduce":
            X = total / s.n
            for _ in range(self.K - 1):
                X = (self.hidx.size * X + self.bsum) / s.n
            return np.broadcast_to(X, y.shape).copy()
        return self.alpha * y + self.beta_m * total

    def step_state(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(E[x_H], E[v_H])`` one step later, with momentum buffers ``v`` (shape ``(h, d)``)."""
        s, hi = self.s, self.hidx
        p11, p12, p21, p22 = self.P
        c = s.c[hi]
        e = x - c
        y = c + p11 * e + p12 * v
        w = p21 * e + p22 * v
        if self.protocol != "edge":
            return self.mix(y), w
        n = s.n
        yf = s.b.copy()  # what each end holds after its local steps (a stubborn end: b)
        yf[hi] = y
        xf = np.zeros((n, s.d))
        xf[hi] = x
        i, j = self.ei, self.ej
        acc = np.zeros((n, s.d))
        np.add.at(acc, i, (yf[i] + yf[j]) / 2.0 - xf[i])
        np.add.at(acc, j, (yf[i] + yf[j]) / 2.0 - xf[j])
        x_new = x + acc[hi] / self.m
        v_new = v + (self.deg[hi] / self.m)[:, None] * (w - v)
        return x_new, v_new

    def equilibrium(self) -> np.ndarray:
        """The fixed point of :meth:`step` (shape ``(h, d)``).

        With momentum the buffers settle where the local steps return them
        unchanged, so the fixed point is the one without momentum at the
        effective gain (:func:`effective_gain`).
        """
        s, hi = self.s, self.hidx
        if self.beta:
            p11, p12, p21, p22 = self.P
            g_eff = s.g.copy()
            g_eff[hi] = p11 + p12 * p21 / (1.0 - p22)
            s2 = _Setting(s.a, s.c, s.honest, s.b, g_eff, s.q, s.eta, s.H)
            return _FirstMoment(self.protocol, s2, self._G, weights=self._weights,
                                rounds=self.K).equilibrium()
        g, c = s.g[hi], s.c[hi]
        if self.custom:
            return self._custom_equilibrium(g, c)
        if self.protocol == "edge":
            out = np.empty((hi.size, s.d))
            for k in range(s.d):
                A = (sp.identity(hi.size, format="csc") - self.M[k]).tocsc()
                if hi.size == s.n and np.allclose(g[:, k], 1.0):
                    _singular()
                out[:, k] = spla.spsolve(A, self.v[:, k])
            return out
        if self.protocol == "neighbourhood":
            out = np.empty((hi.size, s.d))
            for k in range(s.d):
                M = (sp.diags(self.w_self) + self.W_HH) @ sp.diags(g[:, k])
                v = (sp.diags(self.w_self) + self.W_HH) @ ((1.0 - g[:, k]) * c[:, k]) \
                    + self.W_HS_b[:, k]
                if hi.size == s.n and np.allclose(g[:, k], 1.0):
                    _singular()
                out[:, k] = spla.spsolve((sp.identity(hi.size) - M).tocsc(), v)
            return out
        if self.protocol == "allreduce":
            den = s.n - g.sum(axis=0)
            if np.any(den <= 1e-300):
                _singular()
            x = ((1.0 - g) * c).sum(axis=0) + self.bsum
            return np.broadcast_to(x / den, (hi.size, s.d)).copy()
        al, be = self.alpha, self.beta_m
        den = 1.0 - be * (g / (1.0 - al * g)).sum(axis=0)
        if np.any(den <= 1e-300):
            _singular()
        S = (((1.0 - g) * c) / (1.0 - al * g)).sum(axis=0) + self.bsum
        S = S / den
        return (al * (1.0 - g) * c + be * S) / (1.0 - al * g)

    def _custom_equilibrium(self, g: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Fixed point with given weights or several aggregations per step (``neighbourhood``, ``allreduce``)."""
        s, h = self.s, self.hidx.size
        if self.protocol == "allreduce":
            rho = h / s.n
            S = sum(rho ** k for k in range(self.K - 1))
            lead = rho ** (self.K - 1) / s.n
            den = 1.0 - lead * g.sum(axis=0)
            if np.any(den <= 1e-300):
                _singular()
            X = (lead * (((1.0 - g) * c).sum(axis=0) + self.bsum) + self.bsum * S / s.n) / den
            return np.broadcast_to(X, (h, s.d)).copy()
        A = self.A
        M = sp.identity(h, format="csr")
        bK = np.zeros((h, s.d))
        for _ in range(self.K):
            bK = A @ bK + self.W_HS_b
            M = (A @ M).tocsr()
        out = np.empty((h, s.d))
        for k in range(s.d):
            if h == s.n and np.allclose(g[:, k], 1.0):
                _singular()
            lhs = (sp.identity(h) - M @ sp.diags(g[:, k])).tocsc()
            out[:, k] = spla.spsolve(lhs, M @ ((1.0 - g[:, k]) * c[:, k]) + bK[:, k])
        return out


def metropolis_weights(G: nx.Graph) -> sp.csr_matrix:
    """Metropolis mixing weights ``W_ij = 1 / (1 + max(d_i, d_j))`` on the edges of ``G``.

    Parameters
    ----------
    G : networkx.Graph

    Returns
    -------
    scipy.sparse.csr_matrix
        Off-diagonal weights in the order of ``G.nodes()`` (the self weight is
        ``1 - sum_j W_ij``; ``W`` is symmetric and doubly stochastic).

    Notes
    -----
    On a regular graph of degree ``d`` every weight is ``1 / (d + 1)``.

    References
    ----------
    .. [1] L. Xiao, S. Boyd, "Fast linear iterations for distributed
       averaging", Systems & Control Letters 53, 2004.
    """
    n, i, j = _graph_edges(G)
    deg = np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
    w = 1.0 / (1.0 + np.maximum(deg[i], deg[j]))
    return sp.coo_matrix((np.concatenate([w, w]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                         shape=(n, n)).tocsr()


def _singular() -> None:
    check(False, "lr", "> 0 (or a stubborn node present) for the equilibrium to be unique", 0.0)


def _x0(x0: Any, s: _Setting) -> np.ndarray:
    h = int(s.honest.sum())
    if x0 is None:
        return np.zeros((h, s.d))
    arr = np.asarray(x0, dtype=float)
    if arr.ndim == 0:
        return np.full((h, s.d), float(arr))
    if arr.ndim == 1 and arr.shape == (s.d,):
        return np.broadcast_to(arr, (h, s.d)).copy()
    arr = arr.reshape(arr.shape[0], -1)
    if arr.shape == (s.n, s.d):
        return arr[s.honest].copy()
    check(arr.shape == (h, s.d), "x0", f"a scalar, a ({s.d},) vector, or an array of shape "
          f"({s.n}, {s.d}) or ({h}, {s.d})", arr.shape)
    return arr.copy()


def _points(steps: Any, record_every: Any) -> np.ndarray:
    T = check_int("steps", steps, low=0)
    k = check_int("record_every", record_every, low=1)
    pts = np.arange(0, T + 1, k, dtype=np.int64)
    if pts[-1] != T:
        pts = np.append(pts, T)
    return pts


def training_mean(protocol: str, curvature: Any, optimum: Any, lr: float, local_steps: int,
                  steps: int, *, graph: nx.Graph | None = None,
                  stubborn: Mapping[int, Any] | None = None, x0: Any = None,
                  record_every: int = 1, momentum: float = 0.0, weights: Any = None,
                  gossip_rounds: int = 1) -> np.ndarray:
    """Exact expected parameters of every honest node under gossip training.

    Parameters
    ----------
    protocol : {"matching", "edge", "allreduce", "neighbourhood"}
        ``matching``: complete graph of ``n = len(curvature)`` nodes (even),
        one random perfect matching per step; ``edge``: one random edge of
        ``graph`` per step; ``allreduce``: exact mean per step;
        ``neighbourhood``: Metropolis mixing over ``graph`` per step.
    curvature, optimum : array_like, shape (n, d)
        ``a_ik`` and ``c_ik`` (rows of stubborn nodes are ignored).
    lr : float
        Step size ``eta``; ``eta * a_ik < 2`` at every honest node.
    local_steps : int
        ``H``, local steps per communication.
    steps : int
        Rounds (``matching``, ``allreduce``) or single-edge steps (``edge``).
    graph : networkx.Graph, optional
        The graph (``edge`` only).
    stubborn : dict, optional
        ``{position: b}``, ``b`` a scalar or a ``(d,)`` vector.
    x0 : scalar, (d,) or (n, d) or (h, d) array, optional
        Expected initial honest values (default 0).
    record_every : int, optional
        Record every this many steps; ``steps`` is always included.
    momentum : float, optional
        Heavy-ball ``beta`` of the honest nodes' local steps (buffers start at
        0 and stay at their node; :func:`momentum_maps`).
    weights : sparse matrix, optional
        Off-diagonal mixing weights of ``neighbourhood`` (default Metropolis).
    gossip_rounds : int, optional
        Aggregations per step (``neighbourhood``, ``allreduce``).

    Returns
    -------
    numpy.ndarray, shape (T, h, d)
        :math:`E[x_i(t)]` for the honest nodes in position order.

    Notes
    -----
    One step is :math:`x' = W\\,G(x)` with :math:`G` the local steps of the
    nodes that train in that step and :math:`W` the averaging; both are affine
    in ``x`` and independent of it and of each other's noise, so

    .. math:: E[x_{t+1}] = E[W\\,G](E[x_t]).

    ``matching``: :math:`E[x_i'] = \\tfrac12 y_i + \\tfrac{1}{2(n-1)}\\sum_{j\\ne i} y_j`,
    :math:`y_i = g_i x_i + (1-g_i) c_i` (``y = b`` at a stubborn node).
    ``edge``: for the drawn edge ``(i, j)`` both ends become
    :math:`(y_i + y_j)/2`, so
    :math:`E[x_i'] = x_i + \\frac1m \\sum_{j \\sim i} [(y_i + y_j)/2 - x_i]`.
    ``allreduce``: :math:`x_i' = \\frac1n \\sum_j y_j`. ``neighbourhood``:
    :math:`x_i' = y_i + \\sum_j W_{ij} (y_j - y_i)` (deterministic ``W``).
    Gradient noise has mean zero and does not enter. With momentum the state
    of a node is :math:`(x_i, v_i)` and its ``H`` local steps are the linear
    map of :func:`momentum_maps` on :math:`(x_i - c_i, v_i)`, so the same
    argument gives :math:`E[(x, v)_{t+1}] = E[W\\,G](E[(x, v)_t])` with the
    buffers untouched by the averaging (``edge``: a node's buffer moves only
    when one of its edges is drawn, :math:`E[v_i'] = v_i + (d_i / m)(w_i - v_i)`).

    References
    ----------
    .. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
       algorithms", 2006.
    .. [2] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
       and disagreement in social networks", 2013.
    .. [3] A. Koloskova et al., "A unified theory of decentralized SGD with
       changing topology and local updates", 2020.
    """
    s = _setting(curvature, optimum, lr, local_steps, stubborn=stubborn)
    fm = _FirstMoment(protocol, s, graph, momentum=momentum, weights=weights,
                      rounds=gossip_rounds)
    x = _x0(x0, s)
    v = np.zeros_like(x)
    pts = _points(steps, record_every)
    out = np.empty((pts.size,) + x.shape)
    t, r = 0, 0
    while True:
        if t == pts[r]:
            out[r] = x
            r += 1
            if r == pts.size:
                return out
        if fm.beta:
            x, v = fm.step_state(x, v)
        else:
            x = fm.step(x)
        t += 1


def training_equilibrium(protocol: str, curvature: Any, optimum: Any, lr: float,
                         local_steps: int, *, graph: nx.Graph | None = None,
                         stubborn: Mapping[int, Any] | None = None, momentum: float = 0.0,
                         weights: Any = None, gossip_rounds: int = 1) -> np.ndarray:
    """Long-run expected parameters of every honest node (the fixed point of the first moment).

    Parameters
    ----------
    protocol, curvature, optimum, lr, local_steps, graph, stubborn, momentum, weights, gossip_rounds
        As in :func:`training_mean`.

    Returns
    -------
    numpy.ndarray, shape (h, d)
        :math:`E[x_i(\\infty)]` for the honest nodes in position order.

    Raises
    ------
    ConfigError
        When the fixed point is not unique (``lr = 0`` and no stubborn node:
        plain averaging keeps any consensus).

    Notes
    -----
    ``edge``: the sparse solve :math:`(I - M_{HH}) x_H = v_H` of the map of
    :func:`training_mean`. ``matching``: with :math:`\\beta = 1/(2(n-1))`,
    :math:`\\alpha = 1/2 - \\beta` and :math:`S = \\sum_j y_j`, each honest node
    satisfies :math:`x_i = (\\alpha (1-g_i) c_i + \\beta S)/(1 - \\alpha g_i)`, and
    summing gives :math:`S = [\\sum_{i\\in H} (1-g_i) c_i/(1-\\alpha g_i) + \\sum_{s} b_s]
    / [1 - \\beta \\sum_{i \\in H} g_i/(1 - \\alpha g_i)]`. ``allreduce``:
    :math:`x = [\\sum_H (1-g_i) c_i + \\sum_S b_s] / (n - \\sum_H g_i)`; without
    stubborn nodes this is :func:`diloco_fixed_point`. With stubborn nodes
    and ``lr = 0`` the ``edge`` value is the harmonic extension of [2]_.

    References
    ----------
    .. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
       algorithms", 2006.
    .. [2] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
       and disagreement in social networks", 2013.
    """
    s = _setting(curvature, optimum, lr, local_steps, stubborn=stubborn)
    return _FirstMoment(protocol, s, graph, momentum=momentum, weights=weights,
                        rounds=gossip_rounds).equilibrium()


def stubborn_training_bias(protocol: str, curvature: Any, optimum: Any, lr: float,
                           local_steps: int, stubborn: Mapping[int, Any], *,
                           graph: nx.Graph | None = None, momentum: float = 0.0,
                           gossip_rounds: int = 1) -> dict[str, np.ndarray]:
    """Equilibrium bias of the honest mean that stubborn nodes cause in gossip training.

    Parameters
    ----------
    protocol, curvature, optimum, lr, local_steps, graph
        As in :func:`training_mean`.
    stubborn : dict
        ``{position: b}``.

    Returns
    -------
    dict
        ``honest_mean`` (the long-run expected honest mean, shape ``(d,)``),
        ``optimum`` (the honest optimum :func:`honest_optimum`), ``bias``
        (their difference), ``clean_mean`` (the long-run honest mean with the
        stubborn nodes removed from the graph's exchanges, i.e. the same
        protocol among the honest nodes only) and ``attack_bias``
        (``honest_mean - clean_mean``: the part the attack causes).

    Notes
    -----
    The long-run value is :func:`training_equilibrium`. Training keeps every
    honest node pulled toward its own optimum, so the honest mean settles at a
    point between ``x*`` and ``b`` instead of being captured (with ``lr = 0`` it
    is captured: :math:`E[m] \\to b`). ``clean_mean`` uses the same protocol on
    the honest nodes alone (``edge`` and ``neighbourhood``: the graph with the
    stubborn nodes deleted, Metropolis weights on it; it must stay connected;
    ``matching`` needs an even honest count).

    References
    ----------
    .. [1] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
       and disagreement in social networks", 2013.
    """
    check(bool(stubborn), "stubborn", "at least one stubborn node", stubborn)
    eq = training_equilibrium(protocol, curvature, optimum, lr, local_steps, graph=graph,
                              stubborn=stubborn, momentum=momentum, gossip_rounds=gossip_rounds)
    a = _as_nd("curvature", curvature)
    c = _as_nd("optimum", optimum, a.shape[0])
    honest = np.ones(a.shape[0], dtype=bool)
    honest[list(int(p) for p in stubborn)] = False
    xs = honest_optimum(a, c, honest)
    m = eq.mean(axis=0)
    out = {"honest_mean": m, "optimum": xs, "bias": m - xs}
    clean: np.ndarray | None = None
    if float(lr) > 0:
        if protocol in ("edge", "neighbourhood"):
            assert graph is not None
            nodes = list(graph.nodes())
            keep = [nodes[p] for p in np.flatnonzero(honest)]
            sub = graph.subgraph(keep)
            if nx.is_connected(sub) and sub.number_of_edges() > 0:
                clean = training_equilibrium(protocol, a[honest], c[honest], lr, local_steps,
                                             graph=nx.Graph(sub), momentum=momentum,
                                             gossip_rounds=gossip_rounds).mean(axis=0)
        elif protocol == "allreduce" or int(honest.sum()) % 2 == 0:
            clean = training_equilibrium(protocol, a[honest], c[honest], lr,
                                         local_steps, momentum=momentum,
                                         gossip_rounds=gossip_rounds).mean(axis=0)
    nan = np.full(a.shape[1], np.nan)
    out["clean_mean"] = nan if clean is None else clean
    out["attack_bias"] = nan if clean is None else m - clean
    return out


def steps_to_equilibrium(protocol: str, curvature: Any, optimum: Any, lr: float,
                         local_steps: int, *, graph: nx.Graph | None = None,
                         stubborn: Mapping[int, Any] | None = None, x0: Any = None,
                         tol: float = 0.01, max_steps: int = 10**7, momentum: float = 0.0,
                         weights: Any = None, gossip_rounds: int = 1) -> int:
    """Steps until the expected honest mean is within ``tol`` of its way to equilibrium.

    Parameters
    ----------
    protocol, curvature, optimum, lr, local_steps, graph, stubborn, x0, momentum, weights, gossip_rounds
        As in :func:`training_mean`.
    tol : float, optional
        Relative tolerance (default 0.01).
    max_steps : int, optional
        Give up (return ``-1``) after this many steps.

    Returns
    -------
    int
        The first ``t`` with
        :math:`|E[m_t] - m_\\infty| \\le tol\\, |E[m_0] - m_\\infty|` (Euclidean
        norms over coordinates), or ``-1``.

    Notes
    -----
    Iterates the exact first-moment map of :func:`training_mean` from ``x0``
    toward :func:`training_equilibrium`.

    References
    ----------
    .. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
       algorithms", 2006.
    """
    s = _setting(curvature, optimum, lr, local_steps, stubborn=stubborn)
    fm = _FirstMoment(protocol, s, graph, momentum=momentum, weights=weights,
                      rounds=gossip_rounds)
    target = fm.equilibrium().mean(axis=0)
    x = _x0(x0, s)
    v = np.zeros_like(x)
    d0 = float(np.linalg.norm(x.mean(axis=0) - target))
    T = check_int("max_steps", max_steps, low=1)
    if d0 == 0.0:
        return 0
    for t in range(1, T + 1):
        if fm.beta:
            x, v = fm.step_state(x, v)
        else:
            x = fm.step(x)
        if float(np.linalg.norm(x.mean(axis=0) - target)) <= tol * d0:
            return t
    return -1


# --------------------------------------------------------------------------- second moment


def edge_training_moments(graph: nx.Graph, curvature: Any, optimum: Any, lr: float,
                          local_steps: int, steps: int, *, grad_noise: float = 0.0,
                          noise: float = 0.0, init_mean: float = 0.0, init_std: float = 1.0,
                          stubborn: Mapping[int, Any] | None = None,
                          record_every: int = 1) -> dict[str, np.ndarray]:
    """Exact first and second moments of random-edge gossip training on any graph.

    Parameters
    ----------
    graph : networkx.Graph
        Undirected graph, at most :data:`MAX_TRAINING_EXACT_NODES` nodes; one
        uniformly random edge per step.
    curvature, optimum : array_like, shape (n, d)
        ``a_ik`` and ``c_ik`` in the order of ``graph.nodes()``.
    lr, local_steps : float, int
        ``eta`` and ``H``.
    steps : int
        Single-edge steps.
    grad_noise : float, optional
        ``sigma``, the standard deviation of the noise added to every local gradient.
    noise : float, optional
        Gossip noise ``s``: every honest node adds ``N(0, s^2)`` per coordinate
        at the start of each step (as the simulator's ``noise``).
    init_mean, init_std : float, optional
        Honest starts i.i.d. ``N(init_mean, init_std^2)`` per coordinate.
    stubborn : dict, optional
        ``{position: b}``.
    record_every : int, optional

    Returns
    -------
    dict of numpy.ndarray
        ``steps`` (the record points), ``honest_mean`` ``(T, d)``,
        ``consensus_distance``, ``sq_distance_to_optimum`` and ``loss``
        ``(T,)``, all expectations, and ``optimum`` ``(d,)``.

    Notes
    -----
    With the augmented state :math:`z = (x, 1)` one step is
    :math:`z' = \\tilde A_e z + u_e` with :math:`\\tilde A_e` the affine map of
    the drawn edge (local steps of both ends, then their average; a stubborn
    end is fixed at ``b``) and :math:`u_e` the averaged local noise
    :math:`(\\eta_i + \\eta_j)/2` on both ends. The second moment
    :math:`Z = E[z z^T]` then obeys the Boyd-style recursion with drift and noise

    .. math:: Z_{t+1} = \\frac1m \\sum_e \\bigl[\\tilde A_e (Z_t + N_s) \\tilde A_e^T
              + E[u_e u_e^T]\\bigr],

    :math:`N_s = s^2` on the honest diagonal. Writing :math:`\\tilde A_e = I + R_e`
    with :math:`R_e` nonzero on the two rows of the edge only, a step costs
    one sparse-dense product :math:`\\bar R Z` (:math:`\\bar R = \\sum_e R_e`)
    and a 3x3 quadratic form per edge. Then, with :math:`w = 1_H / h`,
    :math:`E[\\text{consensus}] = \\frac1h(\\mathrm{tr} Z_{HH} - h\\, w^T Z_{HH} w)`
    and :math:`E[(m - x^*)^2] = w^T Z_{HH} w - 2 x^* w^T Z_{H,1} + x^{*2}`, per
    coordinate.

    References
    ----------
    .. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
       algorithms", 2006.
    .. [2] A. Koloskova et al., "A unified theory of decentralized SGD with
       changing topology and local updates", 2020.
    """
    n, ei, ej = _graph_edges(graph)
    check(n <= MAX_TRAINING_EXACT_NODES, "nodes",
          f"at most {MAX_TRAINING_EXACT_NODES} for the exact second-moment recursion", n)
    s = _setting(curvature, optimum, lr, local_steps, stubborn=stubborn, grad_noise=grad_noise, n=n)
    s_noise = check_nonnegative("noise", noise)
    mu0 = float(init_mean)
    check(np.isfinite(mu0), "init_mean", "finite", init_mean)
    sd0 = check_nonnegative("init_std", init_std)
    pts = _points(steps, record_every)
    hon = s.honest
    hidx = np.flatnonzero(hon)
    h = hidx.size
    xs = honest_optimum(s.a, s.c, hon)
    abar = s.a[hon].mean(axis=0)
    m = ei.size
    N = n + 1
    out_mean = np.empty((pts.size, s.d))
    out_cons = np.zeros(pts.size)
    out_sq = np.zeros(pts.size)
    out_loss = np.zeros(pts.size)
    cidx = np.full(m, n, dtype=np.int64)
    idx3 = np.stack([ei, ej, cidx], axis=1)  # (m, 3) support columns of R_e
    for k in range(s.d):
        g = s.g[:, k]
        ac = (1.0 - g) * s.c[:, k]
        # rows of R_e (for end i and end j) over the columns (i, j, const)
        hi_, hj_ = hon[ei], hon[ej]
        ci = ac[ei] / 2.0 + np.where(hj_, ac[ej] / 2.0, 0.0)
        cj = ac[ej] / 2.0 + np.where(hi_, ac[ei] / 2.0, 0.0)
        ri = np.stack([g[ei] / 2.0 - 1.0, g[ej] / 2.0, ci], axis=1) * hi_[:, None]
        rj = np.stack([g[ei] / 2.0, g[ej] / 2.0 - 1.0, cj], axis=1) * hj_[:, None]
        r = np.stack([ri, rj], axis=1)  # (m, 2, 3)
        rows = np.concatenate([np.repeat(ei, 3), np.repeat(ej, 3)])
        cols = np.concatenate([idx3.ravel(), idx3.ravel()])
        Rbar = sp.coo_matrix((np.concatenate([ri.ravel(), rj.ravel()]), (rows, cols)),
                             shape=(N, N)).tocsr()
        # noise: (q_i + q_j)/4 on the 2x2 block of an honest pair, q_i/4 at an honest end
        qi, qj = s.q[ei, k], s.q[ej, k]
        both = hi_ & hj_
        qbar = np.zeros((N, N))
        qq = (qi + qj) / 4.0
        for a_, b_ in ((ei, ei), (ej, ej), (ei, ej), (ej, ei)):
            np.add.at(qbar, (a_[both], b_[both]), qq[both])
        only_i, only_j = hi_ & ~hj_, hj_ & ~hi_
        np.add.at(qbar, (ei[only_i], ei[only_i]), qi[only_i] / 4.0)
        np.add.at(qbar, (ej[only_j], ej[only_j]), qj[only_j] / 4.0)
        qbar /= m
        mu = np.where(hon, mu0, s.b[:, k])
        Z = np.empty((N, N))
        Z[:n, :n] = np.outer(mu, mu)
        Z[np.flatnonzero(hon), np.flatnonzero(hon)] += sd0 * sd0
        Z[:n, n] = mu
        Z[n, :n] = mu
        Z[n, n] = 1.0
        blk_r = np.stack([ei, ei, ej, ej], axis=1).ravel()
        blk_c = np.stack([ei, ej, ei, ej], axis=1).ravel()
        t, rec = 0, 0
        while True:
            if t == pts[rec]:
                ZH = Z[np.ix_(hidx, hidx)]
                tot = ZH.sum() / (h * h)
                mean_k = Z[hidx, n].mean()
                out_mean[rec, k] = mean_k
                out_cons[rec] += (np.trace(ZH) - h * tot) / h
                sq = tot - 2.0 * xs[k] * mean_k + xs[k] ** 2
                out_sq[rec] += sq
                out_loss[rec] += abar[k] / 2.0 * sq
                rec += 1
                if rec == pts.size:
                    break
            if s_noise > 0:
                Z[hidx, hidx] += s_noise * s_noise
            RZ = Rbar @ Z
            Z3 = Z[idx3[:, :, None], idx3[:, None, :]]  # (m, 3, 3)
            blk = np.einsum("eap,epq,ebq->eab", r, Z3, r)  # (m, 2, 2) = R_e Z R_e^T
            Znew = Z + (RZ + RZ.T) / m + qbar
            np.add.at(Znew, (blk_r, blk_c), blk.reshape(-1) / m)
            Z = (Znew + Znew.T) * 0.5
            t += 1
    return {"steps": pts, "honest_mean": out_mean, "consensus_distance": out_cons,
            "sq_distance_to_optimum": out_sq, "loss": out_loss, "optimum": xs}


def async_training_mean(curvature: Any, optimum: Any, lr: float, step_time: Any,
                        times: Any, *, graph: nx.Graph | None = None, wake_rate: float = 1.0,
                        stubborn: Mapping[int, Any] | None = None,
                        x0: Any = None) -> np.ndarray:
    """Exact expected parameters of every honest node under async gossip training.

    Every node wakes on its own Poisson clock of rate ``wake_rate`` and
    averages with a uniformly random neighbour, instantly (no latency, no
    churn, no clipping); every honest node ``i`` takes one local step
    ``x <- x - eta (grad f_i(x) + sigma xi)`` at each multiple of its
    ``step_time[i]`` (the continuous local work of the ``async`` protocol).
    Stubborn nodes hold ``b``.

    Parameters
    ----------
    curvature, optimum : array_like, shape (n, d)
        ``a_ik`` and ``c_ik`` (rows of stubborn nodes are ignored).
    lr : float
        ``eta``, with ``eta * a_ik < 2`` at every honest node.
    step_time : float or array_like, shape (n,)
        Time of one local step of every node (> 0).
    times : array_like
        Non-decreasing times at which to report.
    graph : networkx.Graph, optional
        The graph (positions in ``G.nodes()`` order); default the complete graph.
    wake_rate : float
        ``w``, the clock rate of every node.
    stubborn : dict, optional
        ``{position: b}``.
    x0 : scalar, (d,) or (n, d) or (h, d) array, optional
        Expected initial honest values (default 0).

    Returns
    -------
    numpy.ndarray, shape (len(times), h, d)
        :math:`E[x_i(t)]` for the honest nodes in position order.

    Notes
    -----
    The edge ``{i, j}`` carries an exchange at rate
    :math:`r_{ij} = w (1/d_i + 1/d_j)` (either end wakes and picks the other),
    and an exchange moves each honest end half-way to the other's value, so
    between local steps

    .. math:: \\frac{d}{dt} E[x_i] = \\sum_{j \\sim i} \\frac{r_{ij}}{2} (E[x_j] - E[x_i]),

    a linear system :math:`\\dot m = -L m` with stubborn rows fixed, solved
    exactly by the matrix exponential. A local step at node ``i`` is affine,
    :math:`E[x_i] \\leftarrow (1 - \\eta a_i) E[x_i] + \\eta a_i c_i`
    (gradient noise has mean zero), so the first moment alternates the two
    exactly. On the complete graph :math:`r_{ij}/2 = w / (n - 1)`.

    References
    ----------
    .. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
       algorithms", 2006 (the asynchronous time model: one Poisson clock per node).
    .. [2] A. Koloskova et al., "A unified theory of decentralized SGD with
       changing topology and local updates", 2020.
    """
    from scipy.linalg import expm

    s = _setting(curvature, optimum, lr, 1, stubborn=stubborn)
    n, d = s.n, s.d
    eta = float(lr)
    w = check_nonnegative("wake_rate", wake_rate)
    st = np.broadcast_to(np.asarray(step_time, dtype=float), (n,))
    check(bool(np.all(st > 0)), "step_time", "> 0 at every node", float(st.min()))
    ts = np.asarray(times, dtype=float).ravel()
    check(bool(np.all(np.diff(ts) >= 0)) and (ts.size == 0 or ts[0] >= 0), "times",
          "non-decreasing and >= 0", ts.tolist()[:4])
    if graph is None:
        A = np.full((n, n), w / (n - 1))
        np.fill_diagonal(A, 0.0)
    else:
        m, i, j = _graph_edges(graph)
        check(m == n, "curvature", f"one row per graph node ({m})", n)
        deg = np.bincount(np.concatenate([i, j]), minlength=n).astype(float)
        r = 0.5 * w * (1.0 / deg[i] + 1.0 / deg[j])
        A = np.zeros((n, n))
        A[i, j] = r
        A[j, i] = r
    G = A - np.diag(A.sum(axis=1))
    G[~s.honest] = 0.0  # stubborn rows never move
    cache: dict[float, np.ndarray] = {}

    def flow(x: np.ndarray, dt: float) -> np.ndarray:
        if dt <= 0:
            return x
        E = cache.get(dt)
        if E is None:
            E = cache[dt] = expm(G * dt)
        return E @ x

    x = np.zeros((n, d))
    x[s.honest] = _x0(x0, s)
    x[~s.honest] = s.b[~s.honest]
    hon = np.flatnonzero(s.honest)
    T = float(ts.max()) if ts.size else 0.0
    # local-step times of every honest node up to T, merged with the report times
    ev: list[tuple[float, int, int]] = []
    for node in hon:
        k = np.arange(1, int(np.floor(T / st[node])) + 2)
        ev.extend((float(k_ * st[node]), 0, int(node)) for k_ in k if k_ * st[node] <= T)
    ev.extend((float(t), 1, r_) for r_, t in enumerate(ts))  # a step due at t comes first
    ev.sort()
    out = np.empty((ts.size, hon.size, d))
    now = 0.0
    for t, kind, who in ev:
        x = flow(x, round(t - now, 12))
        now = t
        if kind == 1:
            out[who] = x[hon]
        else:
            x[who] = (1.0 - eta * s.a[who]) * x[who] + eta * s.a[who] * s.c[who]
    return out


# --------------------------------------------------------------------------- IPM against a clip


def _clip_scalar(d: np.ndarray, tau: float) -> np.ndarray:
    return np.sign(d) * np.minimum(np.abs(d), tau)


def _ipm_round(u: np.ndarray, n: int, f: int, eps: float, tau: float) -> np.ndarray:
    """One aggregation of the honest values ``u`` (h,) against ``f`` IPM attackers, clipped at ``tau``."""
    diff = u[None, :] - u[:, None]  # [i, j] = u_j - u_i (0 on the diagonal)
    honest_pull = _clip_scalar(diff, tau).sum(axis=1)
    attack = -eps * u.mean()
    return u + (honest_pull + f * _clip_scalar(attack - u, tau)) / n


def _ipm_affine(u: np.ndarray, n: int, f: int, eps: float, tau: float
                ) -> tuple[np.ndarray, np.ndarray, float]:
    """The affine piece ``u' = A u + b`` of one aggregation at ``u``, and how far ``u`` is from its edges."""
    h = u.size
    diff = u[None, :] - u[:, None]
    lin = np.abs(diff) <= tau
    np.fill_diagonal(lin, True)
    A = np.eye(h)
    b = np.zeros(h)
    L = lin.astype(float)
    np.fill_diagonal(L, 0.0)
    A += (L - np.diag(L.sum(axis=1))) / n
    b += (np.where(lin, 0.0, np.sign(diff)) * tau).sum(axis=1) / n
    d_att = -eps * u.mean() - u
    lin_a = np.abs(d_att) <= tau
    A[lin_a] += f / n * (-eps / h)
    A[lin_a, lin_a] -= f / n
    b[~lin_a] += f / n * np.sign(d_att[~lin_a]) * tau
    off = ~np.eye(h, dtype=bool)
    margin = min(float(np.min(np.abs(np.abs(diff[off]) - tau))) if h > 1 else math.inf,
                 float(np.min(np.abs(np.abs(d_att) - tau))))
    return A, b, margin


def ipm_clip_fixed_point(curvature: Any, optimum: Any, lr: float, local_steps: int, n: int,
                         eps: float, tau: float, *, momentum: float = 0.0, gossip_rounds: int = 1,
                         max_rounds: int = 200_000) -> dict[str, Any]:
    """Fixed point of gossip training on the complete graph against IPM attackers and a fixed clip.

    ``h`` honest nodes (the rows of ``curvature`` and ``optimum``, dimension 1)
    and ``f = n - h`` IPM attackers on the complete graph; every round each
    honest node takes ``H`` local steps (heavy ball ``beta``), then
    ``gossip_rounds`` times aggregates with weights ``1 / n`` through the
    clip: ``x_i += (1 / n) [sum_{honest j} clip(x_j - x_i, tau) + f clip(-eps
    xbar - x_i, tau)]``, ``xbar`` the honest mean (the IPM value, the same with
    attack scope local or global on the complete graph).

    Parameters
    ----------
    curvature, optimum : array_like, shape (h,) or (h, 1)
        The honest nodes' quadratics.
    lr, local_steps : float, int
    n : int
        Every node, attackers included (``n > h``).
    eps, tau : float
        IPM's ``eps`` and the clipping radius.
    momentum : float, optional
    gossip_rounds : int, optional
    max_rounds : int, optional
        Budget of the search for the linear piece the fixed point lies on.

    Returns
    -------
    dict
        ``x`` (h,) the honest values at the fixed point, ``mean`` their mean,
        ``margin`` the smallest distance of a clip decision from its radius
        there (``|d| - tau``, in absolute value; the value is the expected
        state's limit under gradient noise as long as the noise never moves a
        decision across it), ``clipped_attack`` (bool per node: the attacker's
        difference is clipped) and ``closed_form`` (the special case below,
        NaN where it does not hold).

    Notes
    -----
    Once the momentum buffers settle the local steps map ``x`` to
    :math:`y = g x + (1 - g) c` with :math:`g` the :func:`effective_gain`. In
    dimension 1 each clip is either linear or the constant :math:`\\pm\\tau`,
    so the round map is affine on each piece of a finite partition: the map is
    iterated until the piece holding its limit is found, then the fixed point
    of that piece's affine map is solved exactly and checked to lie on it.

    Special case, in closed form: equal curvatures (so equal :math:`g`), all
    honest differences within :math:`\\tau`, the attacker's difference
    :math:`-\\epsilon \\bar y - y_i` clipped with the same sign :math:`s` at
    every node, one gossip round: the honest pulls cancel in the mean and the
    attackers move it by :math:`s f \\tau / n` per round, so

    .. math:: \\bar x^* = \\bar c + \\frac{s f \\tau}{n (1 - g)},

    independent of ``eps``: the clip caps IPM's pull, and the training pull
    :math:`1 - g` (:math:`\\eta a / (1 - \\beta)` for ``H = 1``) holds it.
    Without the clip the unclipped IPM fixed point depends on ``eps``.

    References
    ----------
    .. [1] C. Xie, O. Koyejo, I. Gupta, "Fall of empires: breaking Byzantine-tolerant
       SGD by inner product manipulation", UAI 2020.
    .. [2] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
       learning via ClippedGossip", 2022 (self-centred clipping with a fixed
       radius).
    """
    a = np.asarray(curvature, dtype=float).reshape(-1)
    c = np.asarray(optimum, dtype=float).reshape(-1)
    check(a.size == c.size and a.size >= 1, "optimum", f"one value per honest node ({a.size})",
          c.size)
    h = a.size
    n = check_int("n", n, low=h + 1)
    f = n - h
    tau = check_nonnegative("tau", tau)
    eps = float(eps)
    K = check_int("gossip_rounds", gossip_rounds, low=1)
    check(float(lr) > 0, "lr", "> 0 (the training pull holds the fixed point)", lr)
    check_step_size(a[:, None], lr)
    p11, p12, p21, p22 = (m[:, 0] for m in momentum_maps(a[:, None], lr, local_steps, momentum))
    g = p11 + p12 * p21 / (1.0 - p22)

    def mix(u: np.ndarray) -> np.ndarray:
        for _ in range(K):
            u = _ipm_round(u, n, f, eps, tau)
        return u

    def solve(x: np.ndarray) -> tuple[np.ndarray, float]:
        """The fixed point of the affine piece at the rounds of state ``x``, and its margin."""
        u = g * x + (1.0 - g) * c
        M, bK = np.eye(h), np.zeros(h)
        for _ in range(K):
            A, b, _ = _ipm_affine(u, n, f, eps, tau)
            M, bK = A @ M, A @ bK + b
            u = A @ u + b
        xs = np.linalg.solve(np.eye(h) - M * g[None, :], M @ ((1.0 - g) * c) + bK)
        u, margin = g * xs + (1.0 - g) * c, math.inf
        for _ in range(K):
            A2, b2, m2 = _ipm_affine(u, n, f, eps, tau)
            margin = min(margin, m2)
            u = A2 @ u + b2
        return xs, margin

    x, v = c.copy(), np.zeros(h)
    done, budget = 0, check_int("max_rounds", max_rounds, low=1)
    xs, margin = solve(x)
    while done < budget:
        step = min(1000, budget - done)
        for _ in range(step):
            e = x - c
            y = c + p11 * e + p12 * v
            v = p21 * e + p22 * v
            x = mix(y)
        done += step
        xs, margin = solve(x)
        if np.allclose(mix(g * xs + (1.0 - g) * c), xs, rtol=0, atol=1e-12 * max(1.0, np.abs(xs).max())):
            break
    else:
        check(False, "max_rounds", "enough rounds to find the fixed point's linear piece", max_rounds)
    u = g * xs + (1.0 - g) * c
    clipped = np.abs(-eps * u.mean() - u) > tau
    closed = math.nan
    s = np.sign(-eps * u.mean() - u)
    diff = u[None, :] - u[:, None]
    if (K == 1 and np.allclose(a, a[0]) and bool(clipped.all()) and np.all(s == s[0])
            and bool(np.all(np.abs(diff) <= tau))):
        closed = float(c.mean() + s[0] * f * tau / (n * (1.0 - g[0])))
    return {"x": xs, "mean": float(xs.mean()), "margin": margin, "clipped_attack": clipped,
            "closed_form": closed}
