"""Local training steps: the node update that makes gossip values train.

:class:`LocalSGD` applies ``H`` steps ``x <- x - eta (grad f_i(x) + sigma xi)``
to the rows of the nodes that train, all rows at once per step, drawing
``xi`` (standard normal, one per row and coordinate and step) from the
generator it was given (the ``gradnoise`` stream). It asks its objective for
gradients (:meth:`~sim.learning.objectives.Objective.gradient`) and never
checks its type. With momentum ``beta > 0`` each node keeps a buffer ``v``
(zero at the start, never exchanged) and steps as torch's SGD does (heavy
ball, no dampening): ``v <- beta v + g; x <- x - eta v`` with ``g`` the noisy
gradient; the nodes it is told are *plain* (adversaries and label flippers,
as the reference code's Byzantine workers) take plain SGD steps.

:func:`training_metrics` turns the honest rows into the series the gossip
records carry: ``loss``, ``distance_to_optimum`` (``|m - x*|``),
``sq_distance_to_optimum`` (``|m - x*|^2``), ``consensus_distance``
(``(1/h) sum_H |x_i - m|^2``) and ``test_accuracy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LocalSGD", "training_metrics", "METRICS"]

#: Per-record training series (``test_accuracy`` is NaN without a test set).
METRICS = ("loss", "distance_to_optimum", "sq_distance_to_optimum", "consensus_distance",
           "test_accuracy")


class LocalSGD:
    """``H`` noisy gradient steps on each training node's own objective (the node update).

    It answers the gossip engines' node-update hook (:mod:`sim.gossip.update`):
    :meth:`local_steps` once per communication on the nodes that communicate
    (``matching``: every honest node per round; ``edge``: the two ends), and
    :meth:`advance` for ``async``, where every node steps continuously, one
    step per ``step_time[i]``, and the steps completed since the node was last
    brought up to date are applied when its value is read or changed.

    Parameters
    ----------
    objective : Objective
        Anything with ``gradient(x, nodes)``.
    lr : float
        ``eta``.
    local_steps : int
        ``H``.
    grad_noise : float
        ``sigma``.
    step_time : array_like, optional
        Time of one local step of every node (``async``; default 1).
    train : array_like of bool, optional
        Nodes that train at all (default every node the engine passes).
    momentum : float, optional
        ``beta`` in ``[0, 1)`` (default 0: plain SGD).
    plain : array_like of bool, optional
        Nodes that step without momentum (default none).
    """

    def __init__(self, objective: Any, lr: float, local_steps: int, grad_noise: float, *,
                 step_time: Any = None, train: Any = None, momentum: float = 0.0,
                 plain: Any = None) -> None:
        self.objective = objective
        self.lr = float(lr)
        self.local_steps_per_round = int(local_steps)
        self.grad_noise = float(grad_noise)
        self.step_time = None if step_time is None else np.asarray(step_time, dtype=float)
        self.train = None if train is None else np.asarray(train, dtype=bool)
        self.momentum = float(momentum)
        self.plain = None if plain is None else np.asarray(plain, dtype=bool)
        self._buffer: np.ndarray | None = None
        self._phase: np.ndarray | None = None
        self.steps_taken = 0

    @property
    def buffer(self) -> np.ndarray | None:
        """The momentum buffers ``v`` by node (rows of nodes that never stepped are 0), or None."""
        return self._buffer

    def _grow(self, nodes: np.ndarray, d: int) -> np.ndarray:
        """The buffer, with a (zero) row for every node in ``nodes``."""
        need = int(nodes.max()) + 1 if nodes.size else 0
        buf = self._buffer
        if buf is None or buf.shape[0] < need:
            grown = np.zeros((max(need, 0 if buf is None else buf.shape[0]), d))
            if buf is not None:
                grown[:buf.shape[0]] = buf
            self._buffer = buf = grown
        return buf

    def compute_time(self, nodes: np.ndarray) -> float:
        """Time of one round of ``H`` local steps on ``nodes``: the slowest node's ``H * step_time``."""
        if self.step_time is None or not len(nodes):
            return 0.0
        return float(self.local_steps_per_round * np.max(self.step_time[np.asarray(nodes)]))

    def is_identity(self) -> bool:
        """True with ``lr = 0``: every step is ``x - 0 * (...) = x``, so engines may skip it."""
        return self.lr == 0.0

    def compiled_form(self, n: int) -> dict[str, Any] | None:
        """What the compiled async engine needs to take these steps itself, if it can.

        It can when the objective declares a compiled form (quadratics:
        :meth:`~sim.learning.objectives.Quadratic.compiled_form`),
        :meth:`advance` is this class's own and there is no momentum (its
        buffers are not compiled). Softmax regression has none (its
        gradient loops over each node's data shard), so it runs on the SimPy
        engine.

        Returns
        -------
        dict or None
            ``lr``, ``grad_noise``, ``step_time`` and ``train`` per node,
            ``curvature`` and ``optimum`` ``(n, d)``.
        """
        ask = getattr(self.objective, "compiled_form", None)
        form = ask() if callable(ask) else None
        own = type(self).advance is LocalSGD.advance and type(self).steps is LocalSGD.steps
        if form is None or form[0] != "quadratic" or not own or self.momentum != 0.0:
            return None
        st = np.ones(n) if self.step_time is None else np.broadcast_to(self.step_time, (n,))
        train = np.ones(n, dtype=bool) if self.train is None else self.train
        return {"lr": self.lr, "grad_noise": self.grad_noise, "step_time": np.array(st, dtype=float),
                "train": np.array(train, dtype=bool), "curvature": form[1], "optimum": form[2]}

    def add_steps(self, count: int) -> None:
        """Count ``count`` local steps taken for this update by an engine that took them itself."""
        self.steps_taken += int(count)

    def steps(self, x: np.ndarray, nodes: np.ndarray, count: int | np.ndarray | None = None, *,
              rng: np.random.Generator) -> np.ndarray:
        """Return the rows ``x`` (of ``nodes``) after ``count`` (default ``H``) local steps each.

        ``count`` may differ per row; the noise of step ``h`` is drawn for the
        rows still stepping, in row order. ``x`` is not modified.
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        H = self.local_steps_per_round if count is None else count
        eta, sigma, obj = self.lr, self.grad_noise, self.objective
        y = np.array(x, dtype=float, copy=True)
        counts = np.broadcast_to(np.asarray(H, dtype=np.int64), (y.shape[0],))
        top = int(counts.max()) if counts.size else 0
        beta = self.momentum
        if beta != 0.0:
            buf = self._grow(nodes, y.shape[1])
            heavy = np.ones(nodes.size, dtype=bool) if self.plain is None else ~self.plain[nodes]
        for h in range(top):
            rows = np.flatnonzero(counts > h) if counts.min() <= h else slice(None)
            yr = y[rows]
            g = obj.gradient(yr, nodes[rows])
            if sigma > 0:
                g = g + sigma * rng.standard_normal(yr.shape)
            if beta != 0.0:
                nr, hv = nodes[rows], heavy[rows]
                v = buf[nr]
                v[hv] = beta * v[hv] + g[hv]  # torch SGD: buf.mul_(beta).add_(g)
                buf[nr[hv]] = v[hv]
                g = np.where(hv[:, None], v, g)
            y[rows] = yr - eta * g
        self.steps_taken += int(counts.sum())
        return y

    def local_steps(self, x: np.ndarray, nodes: np.ndarray, *, rng: np.random.Generator) -> None:
        """Hook: ``H`` local steps on the rows ``x[nodes]``, in place."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if self.train is not None:
            nodes = nodes[self.train[nodes]]
        if nodes.size:
            x[nodes] = self.steps(x[nodes], nodes, rng=rng)

    def advance(self, x: np.ndarray, node: int, elapsed: float, *,
                rng: np.random.Generator) -> None:
        """Hook (``async``): the local steps node ``node`` completed in ``elapsed`` time units."""
        if self.train is not None and not self.train[node]:
            return
        st = self.step_time
        if self._phase is None:
            self._phase = np.zeros(x.shape[0])
        t = float(st[node]) if st is not None else 1.0
        done = self._phase[node] + elapsed
        k = int(done // t)
        self._phase[node] = done - k * t
        if k:
            x[node] = self.steps(x[node][None, :], np.array([node]), k, rng=rng)[0]


def training_metrics(objective: Any, hx: np.ndarray) -> dict[str, float]:
    """The training series of one record from the honest rows ``hx`` (shape ``(h, d)``).

    Parameters
    ----------
    objective : Objective
    hx : numpy.ndarray

    Returns
    -------
    dict
        One float per name in :data:`METRICS`.
    """
    m = hx.mean(axis=0)
    dev = hx - m
    gap = m - objective.optimum
    sq = float(gap @ gap)
    acc = objective.test_accuracy(m)
    return {
        "loss": float(objective.loss(m)),
        "distance_to_optimum": float(np.sqrt(sq)),
        "sq_distance_to_optimum": sq,
        "consensus_distance": float(np.einsum("ij,ij->", dev, dev)) / hx.shape[0],
        "test_accuracy": float("nan") if acc is None else float(acc),
    }
