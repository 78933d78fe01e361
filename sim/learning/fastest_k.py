"""SGD that waits for the fastest k of n workers, on a quadratic whose data may correlate with speed.

Each step every worker ``i`` draws a time ``X_i / v_i`` (``X_i`` from a
duration law of :mod:`sim.failures`, ``v_i`` its speed) and a stochastic
gradient ``a (x - c_i) + xi_i`` of its data's loss ``a/2 (x - c_i)^2``
(``xi_i ~ N(0, noise)``); the step uses the first ``k`` gradients to
arrive, averaged plainly (``estimator="mean"``, biased towards the fast
workers' data when speed and data correlate) or weighted by the inverse of
each worker's probability of being among the first ``k``
(``estimator="ht"``, Horvitz-Thompson: unbiased), and takes the ``k``-th time
as its duration. The exact references are in :mod:`sim.analytic.fastest_k`
and :mod:`sim.analytic.order_statistics`.

:func:`fastest_k_model` is a model for :func:`sim.runner.replicate`: streams
``times`` (worker times) and ``noise`` (gradient noise), independent.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import check, check_choice, check_int, check_nonnegative, check_positive
from ..failures import check_law, make_distribution

__all__ = ["ESTIMATORS", "FastestKConfig", "fastest_k_model", "fastest_k_inclusion",
           "speed_correlated_centers"]

ESTIMATORS = ("mean", "ht")


@dataclass(frozen=True)
class FastestKConfig:
    """Fastest-k SGD on a scalar quadratic (validated on construction; values only).

    Parameters
    ----------
    workers : int
        ``n``.
    k : int
        Gradients per step, ``1 <= k <= n``.
    steps : int
        SGD steps.
    lr, curvature : float
        Step size :math:`\\eta` and curvature ``a`` (``0 < eta a < 2``).
    noise : float
        Minibatch gradient noise variance :math:`\\sigma^2` (>= 0).
    x0 : float
        Starting point.
    centers : tuple of float or None
        Each worker's optimum :math:`c_i` (None: all 0, the same data everywhere).
    speeds : tuple of float or None
        Each worker's speed :math:`v_i` (None: all 1).
    law, shape, mean_time
        The time law (:func:`sim.failures.make_distribution`: exponential,
        weibull, lognormal, pareto, deterministic), its shape, and its mean.
    estimator : {"mean", "ht"}
        Plain mean of the ``k`` gradients, or Horvitz-Thompson.
    record : tuple of int
        Steps after which the iterate, its squared error and the time are
        recorded (``x@t``, ``err2@t``, ``time@t``; default: the last step).
    target : float or None
        Squared error whose first passage time ``time_to_target`` is recorded.
    """

    workers: int = 16
    k: int = 16
    steps: int = 100
    lr: float = 0.1
    curvature: float = 1.0
    noise: float = 0.0
    x0: float = 1.0
    centers: tuple[float, ...] | None = None
    speeds: tuple[float, ...] | None = None
    law: str = "exponential"
    shape: float | None = None
    mean_time: float = 1.0
    estimator: str = "mean"
    record: tuple[int, ...] | None = None
    target: float | None = None

    def __post_init__(self) -> None:
        n = check_int("workers", self.workers, low=1)
        check_int("k", self.k, low=1, high=n)
        check_int("steps", self.steps, low=1)
        a = check_positive("curvature", self.curvature)
        eta = check_positive("lr", self.lr)
        check(eta * a < 2.0, "lr", f"< 2 / curvature ({2.0 / a:g}) for a stable step", self.lr)
        check_nonnegative("noise", self.noise)
        x0 = float(self.x0)
        check(math.isfinite(x0), "x0", "a finite number", self.x0)
        for name in ("centers", "speeds"):
            v = getattr(self, name)
            if v is not None:
                check(isinstance(v, (list, tuple)) and len(v) == n, name,
                      f"one value per worker ({n})", v)
                conv = check_positive if name == "speeds" else (
                    lambda nm, x: float(x) if math.isfinite(float(x)) else check(False, nm, "finite", x))
                object.__setattr__(self, name, tuple(float(conv(name, x)) for x in v))
        if self.shape is not None:
            check_positive("shape", self.shape)
        check_law("law", self.law, "shape", self.shape)
        check_positive("mean_time", self.mean_time)
        check_choice("estimator", self.estimator, ESTIMATORS)
        rec = (self.steps,) if self.record is None else tuple(self.record)
        for t in rec:
            check_int("record", t, low=0, high=self.steps)
        object.__setattr__(self, "record", tuple(sorted(set(rec))))
        if self.target is not None:
            check_positive("target", self.target)

    @property
    def optimum(self) -> float:
        """``x* = mean(c_i)``."""
        return 0.0 if self.centers is None else float(np.mean(self.centers))


def speed_correlated_centers(speeds: tuple[float, ...], slope: float) -> tuple[float, ...]:
    """Data that correlate with speed: ``c_i = slope (log v_i - mean log v)`` (mean 0)."""
    lv = np.log(np.asarray(speeds, dtype=float))
    return tuple(float(x) for x in slope * (lv - lv.mean()))


@functools.lru_cache(maxsize=256)
def _inclusion(k: int, law: str, shape: float | None, mean: float,
               speeds: tuple[float, ...]) -> np.ndarray:
    from ..analytic.order_statistics import _scaled, inclusion_probabilities, law_distribution

    n = len(speeds)
    if len(set(speeds)) == 1:
        return np.full(n, k / n)
    if law == "exponential" and k == 1:  # the first of independent exponentials: rate shares
        v = np.asarray(speeds)
        return v / v.sum()
    base = law_distribution(law, mean, shape)
    return inclusion_probabilities(k, [_scaled(base, 1.0 / v) for v in speeds])


def fastest_k_inclusion(config: FastestKConfig) -> np.ndarray:
    """``pi_i`` of the config: each worker's probability of being among the first ``k``."""
    c = config
    speeds = c.speeds if c.speeds is not None else (1.0,) * c.workers
    return _inclusion(c.k, c.law, c.shape, c.mean_time, speeds)


def fastest_k_model(config: FastestKConfig, streams: Any) -> dict[str, float]:
    """One replication of fastest-k SGD: iterate, squared error and time at the recorded steps.

    Returns
    -------
    dict
        ``x@t``, ``err2@t`` (``(x_t - x*)^2``), ``time@t`` (wall time of the
        first ``t`` steps) for each recorded ``t``; ``step_time_mean``;
        ``time_to_target`` (first time the squared error is at most
        ``target``; NaN when not reached or no target).
    """
    c = config
    n, k, T = c.workers, c.k, c.steps
    law = make_distribution(c.law, c.mean_time, c.shape)
    speeds = np.ones(n) if c.speeds is None else np.asarray(c.speeds)
    centers = np.zeros(n) if c.centers is None else np.asarray(c.centers)
    times = law.sample(streams.rng("times"), T * n).reshape(T, n) / speeds
    if k < n:
        order = np.argpartition(times, k - 1, axis=1)
        chosen = order[:, :k]
        step = np.take_along_axis(times, order[:, k - 1:k], axis=1)[:, 0]
    else:
        chosen = np.broadcast_to(np.arange(n), (T, n))
        step = times.max(axis=1)
    xi = streams.rng("noise").standard_normal((T, k)) * math.sqrt(c.noise)
    if c.estimator == "ht":
        w = 1.0 / (n * fastest_k_inclusion(c))[chosen]  # 1 / (n pi_i) of each chosen worker
    else:
        w = np.full((T, k), 1.0 / k)
    # g_hat = sum_S w_i (a (x - c_i) + xi_i) = A_t x - B_t
    A = (c.curvature * w.sum(axis=1)).tolist()  # plain floats: records hold numbers, not numpy
    B = (w * (c.curvature * centers[chosen] - xi)).sum(axis=1).tolist()
    xstar = c.optimum
    rec = set(c.record)
    out: dict[str, float] = {}
    x = float(c.x0)
    clock = np.concatenate([[0.0], np.cumsum(step)]).tolist()
    hit = math.nan
    target = c.target
    if 0 in rec:
        out.update({"x@0": x, "err2@0": (x - xstar) ** 2, "time@0": 0.0})
    if target is not None and (x - xstar) ** 2 <= target:
        hit = 0.0
    eta = c.lr
    for t in range(T):
        x -= eta * (A[t] * x - B[t])
        if t + 1 in rec:
            out.update({f"x@{t + 1}": x, f"err2@{t + 1}": (x - xstar) ** 2,
                        f"time@{t + 1}": clock[t + 1]})
        if target is not None and math.isnan(hit) and (x - xstar) ** 2 <= target:
            hit = clock[t + 1]
    out["step_time_mean"] = float(step.mean())
    out["time_to_target"] = hit
    return out
