"""The training part of a gossip config (values only) and the build of its objective.

:class:`LearningConfig` holds numbers, strings and tuples; the objective
(curvatures and optima, or a dataset partitioned across nodes) is built from
it by :func:`build_objective` after validation, from streams of its own seed
``objective_seed``: the objective is the same in every replication (the exact
references are conditional on it), while the gradient noise comes from each
replication's ``gradnoise`` stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analytic.learning import raise_step
from ..errors import (
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
)
from ..rng import Streams
from .data import DATASETS, PARTITIONS, load_dataset, partition, require_sklearn
from .objectives import Quadratic, SoftmaxRegression, draw_quadratic, quadratic_from_table

__all__ = ["OBJECTIVES", "DATASET_SHAPES", "LearningConfig", "build_objective"]

OBJECTIVES = ("none", "quadratic", "logistic")
#: (features, classes) of every dataset: the parameter dimension is
#: ``(features + 1) * classes`` (known without loading the data).
DATASET_SHAPES = {"digits": (64, 10), "iris": (4, 3), "breast_cancer": (30, 2), "wine": (13, 3)}


@dataclass(frozen=True)
class LearningConfig:
    """Local training on the gossip nodes.

    Parameters
    ----------
    objective : {"none", "quadratic", "logistic"}
        ``none``: values do not train (plain averaging).
    lr : float
        Step size ``eta >= 0``.
    local_steps : int
        ``H >= 1`` local steps per communication.
    grad_noise : float
        ``sigma``: standard deviation of the noise added to each gradient coordinate.
    curvature_spread : float
        Curvatures ``a_ik ~ U[1 - s, 1 + s]``, ``s`` in [0, 1) (quadratic).
    optimum_spread : float
        Optima ``c_ik ~ N(0, s^2)`` (quadratic): the heterogeneity.
    objective_table : tuple of (node, dim, curvature, optimum), optional
        Quadratic read from a CSV (:func:`~sim.learning.objectives.read_objective_file`)
        instead of drawn.
    step_time : tuple of float
        Time of one local step: one value for all nodes or one per node.
        ``matching`` and ``allreduce`` rounds last ``H * max step_time`` plus
        the exchange; ``async`` nodes step continuously at this pace.
    data : str
        Dataset of the logistic task (:data:`~sim.learning.data.DATASETS`).
    partition : {"iid", "dirichlet"}
    alpha : float
        Dirichlet concentration (> 0).
    l2 : float
        Ridge coefficient of the logistic task (> 0).
    test_fraction : float
        Held-out share of the dataset, in (0, 1).
    objective_seed : int
        Seed of the objective's draws (curvatures, optima, split, partition).
    momentum : float
        Heavy-ball momentum ``beta`` in [0, 1) of the honest nodes' local
        steps, as torch's SGD: ``v <- beta v + g; x <- x - lr v`` (the buffer
        stays at its node; adversaries and label flippers step without it, as
        the reference code's Byzantine workers do).
    """

    objective: str = "none"
    lr: float = 0.0
    local_steps: int = 1
    grad_noise: float = 0.0
    curvature_spread: float = 0.0
    optimum_spread: float = 1.0
    objective_table: tuple[tuple[int, int, float, float], ...] | None = None
    step_time: tuple[float, ...] = (0.0,)
    data: str = "digits"
    partition: str = "iid"
    alpha: float = 1.0
    l2: float = 1e-3
    test_fraction: float = 0.25
    objective_seed: int = 0
    momentum: float = 0.0

    def __post_init__(self) -> None:
        check_choice("objective", self.objective, OBJECTIVES)
        check_nonnegative("lr", self.lr)
        check_int("local_steps", self.local_steps, low=1)
        check_nonnegative("grad_noise", self.grad_noise)
        cs = check_nonnegative("curvature_spread", self.curvature_spread)
        check(cs < 1.0, "curvature_spread", "in [0, 1) (curvatures stay positive)", self.curvature_spread)
        check_nonnegative("optimum_spread", self.optimum_spread)
        st = tuple(float(check_nonnegative("step_time", v)) for v in tuple(self.step_time))
        check(len(st) >= 1, "step_time", "one value or one per node", self.step_time)
        object.__setattr__(self, "step_time", st)
        check_choice("data", self.data, DATASETS)
        check_choice("partition", self.partition, PARTITIONS)
        check_positive("alpha", self.alpha)
        check_positive("l2", self.l2)
        check(0.0 < float(self.test_fraction) < 1.0, "test_fraction", "in (0, 1)", self.test_fraction)
        check_int("objective_seed", self.objective_seed, low=0)
        mom = check_nonnegative("momentum", self.momentum)
        check(mom < 1.0, "momentum", "in [0, 1)", self.momentum)
        if self.objective_table is not None:
            check(self.objective == "quadratic", "objective_file", "given only with objective quadratic",
                  self.objective)
            rows = tuple((int(a), int(b), float(c), float(d)) for a, b, c, d in self.objective_table)
            object.__setattr__(self, "objective_table", rows)
        if self.objective == "logistic":
            require_sklearn()

    @property
    def trains(self) -> bool:
        """True when the nodes train (an objective is set)."""
        return self.objective != "none"

    def dimension(self, dim: int) -> int:
        """Parameter dimension: the dataset's for logistic, else ``dim``."""
        if self.objective == "logistic":
            f, c = DATASET_SHAPES[self.data]
            return (f + 1) * c
        return dim

    def node_step_times(self, n: int) -> np.ndarray:
        """Step time of every node."""
        st = np.asarray(self.step_time, dtype=float)
        return np.full(n, st[0]) if st.size == 1 else st

    def validate_for(self, n: int, dim: int, honest: np.ndarray, protocol: str) -> None:
        """Checks that need the graph size, the dimension and the honest set.

        Raises
        ------
        ConfigError
            ``step_time`` of the wrong length or zero under ``async``; an
            objective file missing honest nodes or dims; a step size that
            diverges at some honest node (quadratic).
        """
        if not self.trains:
            return
        st = self.step_time
        check(len(st) in (1, n), "step_time", f"one value or one per node ({n})", len(st))
        if protocol == "async":
            check(min(st) > 0, "step_time", "> 0 for protocol async with training", min(st))
        if self.objective == "logistic":
            f, c = DATASET_SHAPES[self.data]
            check(dim in (1, (f + 1) * c), "dim", f"1 or {(f + 1) * c} for data {self.data} "
                  "(set by the dataset)", dim)
            return
        a, _ = self.quadratic_arrays(n, dim, honest)
        prod = self.lr * a
        bad = np.argwhere((prod >= 2.0) & honest[:, None])
        if bad.size:
            i, k = (int(v) for v in bad[0])
            raise_step(self.lr, i, k, float(prod[i, k]))

    def quadratic_arrays(self, n: int, dim: int, honest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Curvature and optimum ``(n, dim)`` as used (read or drawn)."""
        if self.objective_table is not None:
            return quadratic_from_table(self.objective_table, n, dim, honest)
        rng = Streams(self.objective_seed).rng("objective")
        return draw_quadratic(n, dim, curvature_spread=self.curvature_spread,
                              optimum_spread=self.optimum_spread, rng=rng)


def build_objective(cfg: LearningConfig, n: int, dim: int, honest: np.ndarray,
                    flipped: np.ndarray | None = None) -> Any:
    """The objective of ``cfg`` for ``n`` nodes (``None`` when nothing trains).

    Parameters
    ----------
    cfg : LearningConfig
    n, dim : int
    honest : numpy.ndarray of bool
        Nodes counted in the metrics and the optimum.
    flipped : numpy.ndarray of bool, optional
        Nodes that train on flipped labels (logistic only).

    Raises
    ------
    ConfigError
        A logistic step size above the smoothness bound of some honest node.
    """
    if not cfg.trains:
        return None
    if cfg.objective == "quadratic":
        a, c = cfg.quadratic_arrays(n, dim, honest)
        return Quadratic(a, c, honest)
    streams = Streams(cfg.objective_seed)
    data = load_dataset(cfg.data, test_fraction=cfg.test_fraction, rng=streams.rng("split"))
    shards = partition(data.y_train, n, kind=cfg.partition, alpha=cfg.alpha,
                       rng=streams.rng("partition"))
    obj = SoftmaxRegression(data, shards, honest, l2=cfg.l2, flipped=flipped)
    L = obj.smoothness()[:, 0]
    prod = cfg.lr * L
    bad = np.flatnonzero((prod >= 2.0) & (honest | (obj.flipped if flipped is not None else False)))
    if bad.size:
        i = int(bad[0])
        check(False, "lr", f"< 2 / L at every training node (node {i} has lr * L = {prod[i]:.6g}, "
              "L the smoothness bound of its local loss)", cfg.lr)
    return obj
