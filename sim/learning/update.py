"""Local training steps: the node update that makes gossip values train.

:class:`LocalSGD` applies ``H`` steps ``x <- x - eta (grad f_i(x) + sigma xi)``
to the rows of the nodes that train, all rows at once per step, drawing
``xi`` (standard normal, one per row and coordinate and step) from the
generator it was given (the ``gradnoise`` stream). It asks its objective for
gradients (:meth:`~sim.learning.objectives.Objective.gradient`) and never
checks its type.

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
    """``H`` noisy gradient steps on each training node's own objective.

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
    rng : numpy.random.Generator
        Source of the gradient noise.
    """

    def __init__(self, objective: Any, lr: float, local_steps: int, grad_noise: float,
                 rng: np.random.Generator) -> None:
        self.objective = objective
        self.lr = float(lr)
        self.local_steps = int(local_steps)
        self.grad_noise = float(grad_noise)
        self.rng = rng
        self.steps_taken = 0

    def steps(self, x: np.ndarray, nodes: np.ndarray, count: int | None = None) -> np.ndarray:
        """Return ``x`` (rows of ``nodes``) after ``count`` (default ``H``) local steps.

        ``x`` is not modified. With one row and ``count`` steps the draws are
        the same as ``count`` calls of one step.
        """
        H = self.local_steps if count is None else int(count)
        eta, sigma, obj = self.lr, self.grad_noise, self.objective
        y = np.array(x, dtype=float, copy=True)
        for _ in range(H):
            g = obj.gradient(y, nodes)
            if sigma > 0:
                g = g + sigma * self.rng.standard_normal(y.shape)
            y -= eta * g
        self.steps_taken += H * int(y.shape[0])
        return y

    def apply(self, x: np.ndarray, nodes: np.ndarray, count: int | None = None) -> None:
        """Train the rows ``x[nodes]`` in place (``count`` steps, default ``H``)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if nodes.size:
            x[nodes] = self.steps(x[nodes], nodes, count)


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
