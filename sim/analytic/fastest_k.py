"""SGD that waits for the fastest k of n workers: exact time to accuracy, bias and its removal.

The model (a quadratic, so every moment is exact):

* ``n`` workers; worker ``i`` holds data whose loss is
  :math:`f_i(x) = \\frac{a}{2}(x - c_i)^2`, so the objective
  :math:`f = \\frac1n \\sum_i f_i` has its optimum at :math:`x^* = \\bar c`;
  the data's *spread* is :math:`\\zeta^2 = \\frac1n \\sum_i (c_i - \\bar c)^2`
  (0: every worker holds the same distribution);
* each step, every worker computes a stochastic gradient
  :math:`g_i = a (x - c_i) + \\xi_i`, :math:`\\xi_i \\sim N(0, \\sigma^2)`
  independent (minibatch noise, ``noise`` = :math:`\\sigma^2`), taking a time
  drawn from its law; the step uses the first ``k`` to arrive, the set ``S``;
* the update is :math:`x \\leftarrow x - \\eta \\hat g` with the plain mean
  :math:`\\hat g = \\frac1k \\sum_{i \\in S} g_i` or the Horvitz-Thompson mean
  :math:`\\hat g = \\frac1n \\sum_{i \\in S} g_i / \\pi_i` (:math:`\\pi_i` the
  probability that ``i`` is in ``S``, :func:`sim.analytic.inclusion_probabilities`).

**Equal speeds** (i.i.d. times): ``S`` is a uniformly random ``k``-subset, the
two estimators coincide, and with :math:`e_t = x_t - x^*`

.. math::
    E[e_{t+1}^2] = (1 - \\eta a)^2 E[e_t^2] + \\eta^2 v_k, \\qquad
    v_k = \\frac{\\sigma^2}{k} + a^2 \\zeta^2 \\frac{n - k}{k (n - 1)}

(the mean of ``k`` of the ``n`` data points drawn without replacement has
variance :math:`\\zeta^2 (n-k) / (k (n-1))`; every cross term has mean 0).
So :math:`E[e_t^2] = F_k + (1-\\eta a)^{2t} (E_0 - F_k)` with the floor
:math:`F_k = \\eta v_k / (a (2 - \\eta a))` (:func:`sgd_mse`). The accuracy
``target`` is reached at the first step ``T_k`` with :math:`E[e_T^2] \\le`
``target`` (:func:`sgd_steps_to_accuracy`), which needs :math:`F_k <` target:
a **minimum k** (:func:`min_k_for_accuracy`). The steps take the ``k``-th
order statistic of the workers' times, independent from step to step and of
the gradients, so the expected time to accuracy is exactly

.. math:: \\mathcal T(k) = T_k \\, (E[X_{(k:n)}] + c)

(``c`` a fixed time per step, e.g. the all-reduce; :func:`time_to_accuracy`).
``T_k`` falls with ``k`` and :math:`E[X_{(k:n)}]` rises: an **interior
optimum** (:func:`fastest_k_sweep`). Joint tuning of ``k`` and
:math:`\\eta` (:func:`best_lr`) takes, for each ``k``, the step size with the
fewest steps.

**Speeds that differ** make ``S`` favour the fast workers: worker ``i`` is in
``S`` with probability :math:`\\pi_i`. Then
:math:`E[\\hat g \\mid x] = a (x - \\sum_i \\pi_i c_i / k)` for the plain mean,
whose fixed point is biased by :math:`\\sum_i \\pi_i c_i / k - \\bar c` when the
data correlate with speed, while the Horvitz-Thompson mean gives
:math:`E[\\hat g \\mid x] = a (x - \\bar c)`: unbiased
(:func:`fastest_k_bias`, :func:`fastest_k_mean_iterate`).

References
----------
.. [Dutta] S. Dutta, G. Joshi, S. Ghosh, P. Dube, P. Nagpurkar, "Slow and
   stale gradients can win the race: error-runtime trade-offs in distributed
   SGD", AISTATS 2018 (K-sync SGD: error against wall-clock runtime).
.. [HT] D. G. Horvitz, D. J. Thompson, "A generalization of sampling without
   replacement from a finite universe", JASA 47(260), 1952.
.. [Cochran] W. G. Cochran, "Sampling Techniques", 3rd ed., Wiley 1977,
   theorem 2.2 (the variance of a mean sampled without replacement).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import check, check_int, check_nonnegative, check_positive
from .order_statistics import order_statistic_mean

__all__ = [
    "fastest_k_gradient_variance",
    "sgd_noise_floor",
    "sgd_mse",
    "sgd_steps_to_accuracy",
    "min_k_for_accuracy",
    "time_to_accuracy",
    "FastestKRow",
    "fastest_k_sweep",
    "best_lr",
    "fastest_k_bias",
    "fastest_k_mean_iterate",
]


def _common(k: int, n: int, lr: float, curvature: float, noise: float, spread: float):
    n = check_int("n", n, low=1)
    k = check_int("k", k, low=1, high=n)
    a = check_positive("curvature", curvature)
    eta = check_positive("lr", lr)
    check(eta * a < 2.0, "lr", f"< 2 / curvature ({2.0 / a:g}) for a stable step", lr)
    s2 = check_nonnegative("noise", noise)
    z2 = check_nonnegative("spread", spread)
    return k, n, eta, a, s2, z2


def fastest_k_gradient_variance(k: int, n: int, noise: float, spread: float = 0.0,
                                curvature: float = 1.0) -> float:
    """Variance of the mean of the first ``k`` of ``n`` gradients (equal speeds).

    Notes
    -----
    .. math:: v_k = \\frac{\\sigma^2}{k} + a^2 \\zeta^2 \\frac{n - k}{k (n - 1)}

    References
    ----------
    [Cochran]_.
    """
    n = check_int("n", n, low=1)
    k = check_int("k", k, low=1, high=n)
    s2 = check_nonnegative("noise", noise)
    z2 = check_nonnegative("spread", spread)
    a = check_positive("curvature", curvature)
    data = a * a * z2 * (n - k) / (k * (n - 1)) if n > 1 else 0.0
    return s2 / k + data


def sgd_noise_floor(k: int, n: int, lr: float, curvature: float, noise: float,
                    spread: float = 0.0) -> float:
    """``F_k = eta v_k / (a (2 - eta a))``: the stationary ``E[(x - x*)^2]``."""
    k, n, eta, a, s2, z2 = _common(k, n, lr, curvature, noise, spread)
    return eta * fastest_k_gradient_variance(k, n, s2, z2, a) / (a * (2.0 - eta * a))


def sgd_mse(steps: int | Sequence[int], k: int, n: int, lr: float, curvature: float,
            noise: float, initial: float, spread: float = 0.0) -> Any:
    """``E[(x_t - x*)^2]`` after ``t`` steps (a float, or an array for a sequence of ``t``).

    Parameters
    ----------
    steps : int or sequence of int
        ``t >= 0``.
    k, n : int
        Wait for the first ``k`` of ``n``.
    lr, curvature, noise : float
        :math:`\\eta`, ``a``, :math:`\\sigma^2`.
    initial : float
        :math:`E_0 = (x_0 - x^*)^2` (>= 0).
    spread : float
        :math:`\\zeta^2` of the workers' data.

    Notes
    -----
    .. math:: E[e_t^2] = F_k + (1 - \\eta a)^{2t} (E_0 - F_k)

    References
    ----------
    [Dutta]_.
    """
    k, n, eta, a, s2, z2 = _common(k, n, lr, curvature, noise, spread)
    e0 = check_nonnegative("initial", initial)
    F = sgd_noise_floor(k, n, eta, a, s2, z2)
    rho = (1.0 - eta * a) ** 2
    t = np.asarray(steps, dtype=float)
    out = F + rho**t * (e0 - F)
    return float(out) if out.ndim == 0 else out


def sgd_steps_to_accuracy(k: int, n: int, lr: float, curvature: float, noise: float,
                          initial: float, target: float, spread: float = 0.0) -> float:
    """The first step ``T`` with ``E[(x_T - x*)^2] <= target`` (``inf`` if never).

    Notes
    -----
    Finite iff :math:`E_0 \\le` target or :math:`F_k <` target; then
    :math:`T = \\lceil \\ln\\frac{\\epsilon - F_k}{E_0 - F_k} / \\ln (1-\\eta a)^2 \\rceil`
    (checked against :func:`sgd_mse` at ``T`` and ``T - 1``).
    """
    k, n, eta, a, s2, z2 = _common(k, n, lr, curvature, noise, spread)
    e0 = check_nonnegative("initial", initial)
    eps = check_positive("target", target)
    if e0 <= eps:
        return 0.0
    F = sgd_noise_floor(k, n, eta, a, s2, z2)
    rho = (1.0 - eta * a) ** 2
    if F > eps or (F == eps and rho > 0):
        return math.inf
    if rho == 0.0:
        return 1.0
    T = max(1, math.ceil(math.log((eps - F) / (e0 - F)) / math.log(rho)))
    mse = lambda t: F + rho**t * (e0 - F)  # noqa: E731
    while T > 1 and mse(T - 1) <= eps:  # rounding of the logarithms: the first such step
        T -= 1
    while mse(T) > eps:
        T += 1
    return float(T)


def min_k_for_accuracy(n: int, lr: float, curvature: float, noise: float, target: float,
                       spread: float = 0.0) -> int | None:
    """The least ``k`` whose noise floor is below ``target`` (None: not even ``k = n``)."""
    n = check_int("n", n, low=1)
    for k in range(1, n + 1):
        if sgd_noise_floor(k, n, lr, curvature, noise, spread) < target:
            return k
    return None


def time_to_accuracy(k: int, n: int, *, lr: float, curvature: float, noise: float,
                     initial: float, target: float, spread: float = 0.0,
                     law: str = "exponential", shape: float | None = None, mean: float = 1.0,
                     overhead: float = 0.0) -> float:
    """Expected wall time to accuracy of fastest-k SGD: ``T_k (E[X_(k:n)] + c)``.

    Parameters
    ----------
    k, n : int
    lr, curvature, noise, initial, target, spread : float
        See :func:`sgd_mse`.
    law, shape, mean : str, float, float
        The workers' i.i.d. time law (:func:`sim.analytic.order_statistic_mean`).
    overhead : float
        Fixed time per step ``c`` (>= 0), e.g. the all-reduce.

    Returns
    -------
    float
        ``inf`` below the minimum ``k``.

    References
    ----------
    [Dutta]_.
    """
    T = sgd_steps_to_accuracy(k, n, lr, curvature, noise, initial, target, spread)
    c = check_nonnegative("overhead", overhead)
    if math.isinf(T):
        return math.inf
    return T * (order_statistic_mean(k, n, law, shape, mean) + c)


@dataclass(frozen=True)
class FastestKRow:
    """One ``k`` of a sweep: steps, mean step time, time to accuracy (inf below the minimum k)."""

    k: int
    steps: float
    step_time: float
    time: float


def fastest_k_sweep(n: int, *, lr: float, curvature: float, noise: float, initial: float,
                    target: float, spread: float = 0.0, law: str = "exponential",
                    shape: float | None = None, mean: float = 1.0, overhead: float = 0.0
                    ) -> tuple[list[FastestKRow], int, float]:
    """Time to accuracy for every ``k``; the best ``k`` and its speed-up over ``k = n``.

    Returns
    -------
    (rows, best_k, speedup)
        ``speedup`` is ``time(n) / time(best_k)`` (``inf`` when ``k = n``
        never reaches the target but some ``k`` does is impossible: the floor
        falls with ``k``; NaN when no ``k`` reaches it).
    """
    n = check_int("n", n, low=1)
    rows = []
    for k in range(1, n + 1):
        T = sgd_steps_to_accuracy(k, n, lr, curvature, noise, initial, target, spread)
        m = order_statistic_mean(k, n, law, shape, mean) + overhead
        rows.append(FastestKRow(k, T, m, T * m if math.isfinite(T) else math.inf))
    times = [r.time for r in rows]
    best = min(range(n), key=lambda i: times[i])
    if math.isinf(times[best]):
        return rows, n, math.nan
    return rows, best + 1, times[-1] / times[best]


def best_lr(k: int, n: int, curvature: float, noise: float, initial: float, target: float,
            spread: float = 0.0) -> tuple[float, float]:
    """The step size with the fewest steps to accuracy for this ``k``: ``(steps, lr)``.

    Notes
    -----
    :math:`\\min_\\eta E[e_T^2](\\eta)` falls with ``T``, so the least ``T`` is
    found by bisection on ``T``, each test a bounded scalar minimisation over
    :math:`\\eta \\in (0, 2/a)`; the ``lr`` returned is that minimiser at the
    least ``T`` (any step size in an interval around it reaches the target
    in ``T`` steps too).
    """
    n = check_int("n", n, low=1)
    k = check_int("k", k, low=1, high=n)
    a = check_positive("curvature", curvature)
    e0 = check_nonnegative("initial", initial)
    eps = check_positive("target", target)
    if e0 <= eps:
        return 0.0, 1.0 / a

    from scipy import optimize  # on first use: keeps every CLI start light

    def best_at(T: int) -> tuple[float, float]:
        f = lambda lr: sgd_mse(T, k, n, lr, a, noise, e0, spread)  # noqa: E731
        r = optimize.minimize_scalar(f, bounds=(1e-12 / a, (2.0 - 1e-12) / a), method="bounded",
                                     options={"xatol": 1e-12 / a})
        return float(r.fun), float(r.x)

    lo, hi = 1, 1
    while best_at(hi)[0] > eps:
        lo, hi = hi, hi * 2
        if hi > 2**40:
            return math.inf, math.nan
    while lo < hi:
        mid = (lo + hi) // 2
        if best_at(mid)[0] <= eps:
            hi = mid
        else:
            lo = mid + 1
    return float(hi), best_at(hi)[1]


def fastest_k_bias(centers: Sequence[float], inclusion: Sequence[float]) -> tuple[float, float]:
    """Fixed points of fastest-k SGD, minus the optimum: ``(plain mean, Horvitz-Thompson)``.

    Parameters
    ----------
    centers : sequence of float
        :math:`c_i`, each worker's optimum.
    inclusion : sequence of float
        :math:`\\pi_i` (summing to ``k``), from :func:`sim.analytic.inclusion_probabilities`.

    Returns
    -------
    (bias_mean, bias_ht)
        :math:`\\sum_i \\pi_i c_i / \\sum_i \\pi_i - \\bar c` and 0 (the HT fixed
        point is the optimum, to rounding).

    References
    ----------
    [HT]_.
    """
    c = np.asarray(centers, dtype=float)
    p = np.asarray(inclusion, dtype=float)
    check(c.shape == p.shape and c.ndim == 1 and c.size >= 1, "inclusion",
          f"one probability per worker ({c.size})", list(inclusion))
    check(bool(np.all(p > 0)) and bool(np.all(p <= 1 + 1e-12)), "inclusion",
          "probabilities in (0, 1]", list(inclusion))
    xbar = float(c.mean())
    return float((p * c).sum() / p.sum()) - xbar, float((c * p / p).mean()) - xbar


def fastest_k_mean_iterate(steps: int | Sequence[int], x0: float, lr: float, curvature: float,
                           centers: Sequence[float], inclusion: Sequence[float],
                           estimator: str = "mean") -> Any:
    """``E[x_t]`` of fastest-k SGD, exactly, for either estimator.

    Notes
    -----
    .. math:: E[x_t] = \\tilde c + (1 - \\eta a)^t (x_0 - \\tilde c)

    with :math:`\\tilde c = \\sum_i \\pi_i c_i / k` (plain mean) or
    :math:`\\bar c` (Horvitz-Thompson): the conditional expected step is affine
    in ``x`` with slope :math:`\\eta a` for both (for HT,
    :math:`E[\\sum_{i \\in S} 1/(n \\pi_i)] = 1`), so the mean follows it exactly.

    References
    ----------
    [HT]_.
    """
    a = check_positive("curvature", curvature)
    eta = check_positive("lr", lr)
    c = np.asarray(centers, dtype=float)
    p = np.asarray(inclusion, dtype=float)
    check(estimator in ("mean", "ht"), "estimator", "one of mean, ht", estimator)
    target = float((p * c).sum() / p.sum()) if estimator == "mean" else float(c.mean())
    t = np.asarray(steps, dtype=float)
    out = target + (1.0 - eta * a) ** t * (float(x0) - target)
    return float(out) if out.ndim == 0 else out
