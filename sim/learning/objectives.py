"""Local objectives of the gossip nodes, as strategy objects the engines ask.

An :class:`Objective` holds the local loss ``f_i`` of every node and answers,
for rows of parameters and the nodes that own them, the local gradients; for
the honest set, the optimum ``x* = argmin sum_{i in H} f_i``, the loss gap
``F(m) - F(x*)`` of a point ``m`` with ``F = (1/h) sum_{i in H} f_i``, and, for
a classification task, the test accuracy. A user's objective needs only those
methods (:meth:`Objective.gradient`, :meth:`Objective.loss`,
:attr:`Objective.optimum`, :meth:`Objective.test_accuracy`,
:meth:`Objective.describe`); nothing checks its type.

:class:`Quadratic`
    ``f_i(x) = 1/2 sum_k a_ik (x_k - c_ik)^2``; exact references in
    :mod:`sim.analytic.learning`.
:class:`SoftmaxRegression`
    multinomial logistic regression on one node's shard of a real dataset
    (:mod:`sim.learning.data`), mean cross-entropy plus ``l2/2 |W|^2``;
    parameters are the ``(features + 1) x classes`` weight matrix (bias row
    last) flattened row-major.

References
----------
.. [1] A. Koloskova et al., "A unified theory of decentralized SGD with
   changing topology and local updates", ICML 2020.
.. [2] C. M. Bishop, "Pattern recognition and machine learning", 2006,
   section 4.3.4 (multiclass logistic regression and its gradient).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analytic.learning import honest_optimum
from ..errors import check, read_csv_text
from .data import Dataset

__all__ = [
    "Objective",
    "Quadratic",
    "SoftmaxRegression",
    "draw_quadratic",
    "quadratic_from_table",
    "read_objective_file",
]


class Objective:
    """Interface of a node objective (subclass it, or supply the same methods)."""

    name: str = ""
    dim: int = 0

    def gradient(self, x: np.ndarray, nodes: np.ndarray) -> np.ndarray:  # pragma: no cover
        """``grad f_nodes[r](x[r])`` for every row ``r`` (shape as ``x``)."""
        raise NotImplementedError

    @property
    def optimum(self) -> np.ndarray:  # pragma: no cover - interface
        """The honest optimum ``x*``, shape ``(dim,)``."""
        raise NotImplementedError

    def loss(self, m: np.ndarray) -> float:  # pragma: no cover - interface
        """``F(m) - F(x*)``, ``F`` the mean honest objective."""
        raise NotImplementedError

    def test_accuracy(self, m: np.ndarray) -> float | None:
        """Held-out accuracy of the model ``m`` (None without a test set)."""
        return None

    def describe(self) -> dict[str, Any]:  # pragma: no cover - interface
        """A JSON-ready summary of the objective as used."""
        raise NotImplementedError


# --------------------------------------------------------------------------- quadratic


class Quadratic(Objective):
    """Separable quadratics ``f_i(x) = 1/2 sum_k a_ik (x_k - c_ik)^2``.

    Parameters
    ----------
    curvature, optimum : numpy.ndarray, shape (n, d)
        ``a_ik > 0`` and ``c_ik`` per node (rows of adversaries are kept but
        never used by the metrics).
    honest : numpy.ndarray of bool, shape (n,)
    """

    name = "quadratic"

    def __init__(self, curvature: np.ndarray, optimum: np.ndarray, honest: np.ndarray) -> None:
        self.curvature = np.asarray(curvature, dtype=float)
        self.centres = np.asarray(optimum, dtype=float)
        self.honest = np.asarray(honest, dtype=bool)
        self.dim = int(self.curvature.shape[1])
        self._opt = honest_optimum(self.curvature, self.centres, self.honest)
        self._abar = self.curvature[self.honest].mean(axis=0)

    def gradient(self, x: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """``a_i * (x - c_i)`` row by row."""
        return self.curvature[nodes] * (x - self.centres[nodes])

    @property
    def optimum(self) -> np.ndarray:
        """``sum_H a c / sum_H a`` per coordinate."""
        return self._opt

    def loss(self, m: np.ndarray) -> float:
        """``sum_k abar_k / 2 (m_k - x*_k)^2`` (equal to ``F(m) - F(x*)``)."""
        dev = np.asarray(m, dtype=float) - self._opt
        return float(0.5 * np.sum(self._abar * dev * dev))

    def smoothness(self) -> np.ndarray:
        """Per node and coordinate, the curvature (the step-size bound is ``2 / a``)."""
        return self.curvature

    def compiled_form(self) -> tuple[str, np.ndarray, np.ndarray] | None:
        """``("quadratic", curvature, optimum)`` for the compiled async engine.

        ``None`` when a subclass computes its gradient otherwise (it then runs
        on the SimPy engine).
        """
        if type(self).gradient is not Quadratic.gradient:
            return None
        return ("quadratic", self.curvature, self.centres)

    def describe(self) -> dict[str, Any]:
        """Per-node curvature and optimum as used (null for adversaries)."""
        rows = [
            {"curvature": self.curvature[i].tolist(), "optimum": self.centres[i].tolist()}
            if self.honest[i] else None
            for i in range(self.curvature.shape[0])
        ]
        return {"kind": "quadratic", "nodes": rows}


def draw_quadratic(n: int, dim: int, *, curvature_spread: float, optimum_spread: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw curvatures ``a_ik ~ U[1 - s_a, 1 + s_a]`` and optima ``c_ik ~ N(0, s_c^2)``.

    Parameters
    ----------
    n, dim : int
    curvature_spread : float
        ``s_a`` in [0, 1).
    optimum_spread : float
        ``s_c >= 0``: the heterogeneity.
    rng : numpy.random.Generator

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``(curvature, optimum)``, each of shape ``(n, dim)``.
    """
    a = 1.0 + curvature_spread * rng.uniform(-1.0, 1.0, size=(n, dim))
    c = optimum_spread * rng.standard_normal((n, dim))
    return a, c


def read_objective_file(path: str) -> tuple[tuple[int, int, float, float], ...]:
    """Read a CSV ``node,dim,curvature,optimum`` into a tuple of rows (a config value).

    Parameters
    ----------
    path : str

    Returns
    -------
    tuple of (int, int, float, float)

    Raises
    ------
    ConfigError
        A missing file, a missing header column, or a row that does not parse.
    """
    text = read_csv_text("objective_file", path)  # a regular file, bounded (sim.errors)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    header = rows[0].keys() if rows else []
    need = ("node", "dim", "curvature", "optimum")
    check(bool(rows) and all(k in header for k in need), "objective_file",
          "a CSV with columns node,dim,curvature,optimum and at least one row", path)
    out = []
    for k, r in enumerate(rows, start=2):
        try:
            out.append((int(r["node"]), int(r["dim"]), float(r["curvature"]), float(r["optimum"])))
        except (TypeError, ValueError):
            check(False, "objective_file", "integer node and dim and numeric curvature and optimum "
                  f"(line {k})", path)
    return tuple(out)


def quadratic_from_table(table: Sequence[tuple[int, int, float, float]], n: int, dim: int,
                         honest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Curvature and optimum arrays from ``(node, dim, curvature, optimum)`` rows.

    Every honest node needs a row for every coordinate ``0 .. dim-1``; rows of
    adversarial nodes may be absent (they are unused).

    Raises
    ------
    ConfigError
        Rows outside the graph or the dimension, duplicates, non-finite
        values, or a missing (honest node, dim).
    """
    a = np.full((n, dim), np.nan)
    c = np.full((n, dim), np.nan)
    for node, k, cur, opt in table:
        check(0 <= node < n, "objective_file", f"node ids in 0..{n - 1}", node)
        check(0 <= k < dim, "objective_file", f"dims in 0..{dim - 1} (dim = {dim})", k)
        check(math.isnan(a[node, k]), "objective_file", "one row per (node, dim)", (node, k))
        check(math.isfinite(cur) and cur > 0, "objective_file", "curvature > 0 (finite)",
              (node, k, cur))
        check(math.isfinite(opt), "objective_file", "finite optimum", (node, k, opt))
        a[node, k], c[node, k] = cur, opt
    missing = np.argwhere(np.isnan(a) & np.asarray(honest, dtype=bool)[:, None])
    if missing.size:
        node, k = (int(v) for v in missing[0])
        check(False, "objective_file", f"a row for every honest node and dim ({missing.shape[0]} "
              f"missing, first node {node} dim {k})", "incomplete")
    a[np.isnan(a)] = 1.0
    c[np.isnan(c)] = 0.0
    return a, c


# --------------------------------------------------------------------------- softmax regression


class SoftmaxRegression(Objective):
    """Multinomial logistic regression, one shard of a real dataset per node.

    Parameters
    ----------
    dataset : Dataset
    shards : list of numpy.ndarray
        Training-sample indices of every node.
    honest : numpy.ndarray of bool
    l2 : float
        Ridge coefficient (> 0 makes ``x*`` unique).
    flipped : numpy.ndarray of bool, optional
        Nodes whose labels are flipped ``y -> C - 1 - y`` (the label-flipping
        data attack); they train on the flipped labels.

    Notes
    -----
    With logits :math:`Z = X_i W`, probabilities :math:`P = \\mathrm{softmax}(Z)`
    and one-hot labels :math:`Y`,
    :math:`f_i(W) = -\\frac{1}{N_i} \\sum \\log P_{y} + \\frac{\\ell_2}{2} |W|^2`
    and :math:`\\nabla f_i = X_i^T (P - Y) / N_i + \\ell_2 W`. The Hessian is
    bounded by :math:`\\lambda_{max}(X_i^T X_i)/(2 N_i) + \\ell_2` (the softmax
    Jacobian has norm at most 1/2), the smoothness used to refuse divergent
    step sizes.
    """

    name = "logistic"

    def __init__(self, dataset: Dataset, shards: Sequence[np.ndarray], honest: np.ndarray, *,
                 l2: float, flipped: np.ndarray | None = None) -> None:
        self.data = dataset
        self.honest = np.asarray(honest, dtype=bool)
        self.l2 = float(l2)
        C = dataset.classes
        self.classes = C
        self.p = dataset.features + 1
        self.dim = self.p * C
        Xb = np.hstack([dataset.X_train, np.ones((dataset.X_train.shape[0], 1))])
        flip = np.zeros(len(shards), dtype=bool) if flipped is None else np.asarray(flipped, bool)
        self.flipped = flip
        self.X: list[np.ndarray] = []
        self.Y: list[np.ndarray] = []
        for i, s in enumerate(shards):
            y = dataset.y_train[s]
            if flip[i]:
                y = C - 1 - y
            self.X.append(Xb[s])
            self.Y.append(np.eye(C)[y])
        self.sizes = np.array([s.size for s in shards], dtype=np.int64)
        self.Xtest = np.hstack([dataset.X_test, np.ones((dataset.X_test.shape[0], 1))])
        self._opt, self._fopt = self._solve()

    def _node_loss_grad(self, w: np.ndarray, i: int) -> tuple[float, np.ndarray]:
        W = w.reshape(self.p, self.classes)
        X, Y = self.X[i], self.Y[i]
        val = 0.5 * self.l2 * float(np.sum(W * W))
        grad = self.l2 * W
        if X.shape[0]:
            Z = X @ W
            Z -= Z.max(axis=1, keepdims=True)
            E = np.exp(Z)
            S = E.sum(axis=1, keepdims=True)
            P = E / S
            val += float(-(np.sum(Y * Z) - np.sum(np.log(S)))) / X.shape[0]
            grad = grad + X.T @ (P - Y) / X.shape[0]
        return val, grad.reshape(-1)

    def _mean_honest(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        idx = np.flatnonzero(self.honest)
        tot, g = 0.0, np.zeros(self.dim)
        for i in idx:
            v, gi = self._node_loss_grad(w, int(i))
            tot += v
            g += gi
        return tot / idx.size, g / idx.size

    def _solve(self) -> tuple[np.ndarray, float]:
        from scipy.optimize import minimize  # on first use: keeps every CLI start light

        res = minimize(self._mean_honest, np.zeros(self.dim), jac=True, method="L-BFGS-B",
                       options={"maxiter": 5000, "gtol": 1e-10, "ftol": 1e-15})
        return res.x, float(res.fun)

    def gradient(self, x: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Full local gradient of every row's node."""
        out = np.empty_like(x)
        for r, i in enumerate(np.asarray(nodes).tolist()):
            out[r] = self._node_loss_grad(x[r], i)[1]
        return out

    @property
    def optimum(self) -> np.ndarray:
        """The honest optimum (L-BFGS on the mean honest objective)."""
        return self._opt

    def loss(self, m: np.ndarray) -> float:
        """``F(m) - F(x*)``."""
        return self._mean_honest(np.asarray(m, dtype=float))[0] - self._fopt

    def test_accuracy(self, m: np.ndarray) -> float:
        """Share of held-out samples whose arg-max class under ``m`` is right."""
        W = np.asarray(m, dtype=float).reshape(self.p, self.classes)
        return float(np.mean(np.argmax(self.Xtest @ W, axis=1) == self.data.y_test))

    def smoothness(self) -> np.ndarray:
        """Per node, the smoothness bound of its local loss, shape ``(n, 1)``."""
        L = np.empty((len(self.X), 1))
        for i, X in enumerate(self.X):
            lam = float(np.linalg.eigvalsh(X.T @ X)[-1]) / X.shape[0] if X.shape[0] else 0.0
            L[i, 0] = 0.5 * lam + self.l2
        return L

    def describe(self) -> dict[str, Any]:
        """Dataset, shard sizes and label counts per node (null for adversaries)."""
        rows = []
        for i, (Y, size) in enumerate(zip(self.Y, self.sizes, strict=True)):
            if not self.honest[i] and not self.flipped[i]:
                rows.append(None)
                continue
            rows.append({"samples": int(size), "labels": Y.sum(axis=0).astype(int).tolist(),
                         "flipped": bool(self.flipped[i])})
        return {"kind": "logistic", "data": self.data.name, "classes": self.classes,
                "features": self.data.features, "l2": self.l2,
                "train": int(self.data.y_train.size), "test": int(self.data.y_test.size),
                "nodes": rows}
