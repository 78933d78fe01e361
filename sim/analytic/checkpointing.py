"""The exact optimum checkpoint interval under Poisson failures, its cost, and its limits.

Pure functions of their arguments, beside Young's and Daly's approximations
(:func:`sim.analytic.young_interval`, :func:`sim.analytic.daly_interval`) and
Daly's expected segment time (:func:`sim.analytic.checkpoint_segment_time`),
which they reuse.

The cost function
-----------------
A job does work in segments of ``tau`` (time units of failure-free work),
each followed by a checkpoint of cost ``C``. Failures arrive as a Poisson
process of rate ``lambda = 1/M`` at all times (during work, checkpoint and
restart alike); a failure loses the segment in progress (its work and its
checkpoint) and is followed by a restart of cost ``R``, itself lost and
begun again if a failure strikes during it; then the segment is attempted
again from its start. The expected time to complete one segment is Daly's

.. math:: E[T_{seg}](\\tau) = M e^{R/M}\\left(e^{(\\tau + C)/M} - 1\\right)

(a geometric number ``e^{(tau+C)/M} - 1`` of failed attempts, each costing
its expected truncated run ``M - (tau + C)/(e^{(tau+C)/M} - 1)`` plus a full
restart period of expected length ``M (e^{R/M} - 1)``, plus the successful
attempt ``tau + C``; the terms collect to the form above). The quantity a
checkpoint interval should minimise is the expected wall time per unit of
work,

.. math:: \\Phi(\\tau) = \\frac{E[T_{seg}](\\tau)}{\\tau}
          = M e^{R/M} \\frac{e^{(\\tau + C)/M} - 1}{\\tau}

(:func:`checkpoint_time_per_work`): ``N`` units of work take ``N Phi(tau)``
in expectation. ``e^{R/M}`` is a constant factor, so **the minimiser does not
depend on R**. Setting :math:`\\Phi'(\\tau) = 0` with :math:`x = \\tau/M`,
:math:`\\varepsilon = \\lambda C`:

.. math:: (1 - x)\\, e^{x} = e^{-\\varepsilon}
   \\iff (x - 1) e^{x - 1} = -e^{-1-\\varepsilon}
   \\iff x = 1 + W\\left(-e^{-1-\\varepsilon}\\right).

The argument lies in :math:`(-1/e, 0)`, where the Lambert function has two
real branches: the principal branch :math:`W_0 \\in (-1, 0)` gives
``0 < x < 1``, the positive interval; :math:`W_{-1} < -1` gives ``x < 0``.
So

.. math:: \\tau^* = \\frac{1 + W_0\\left(-e^{-1-\\lambda C}\\right)}{\\lambda}

(:func:`optimal_checkpoint_interval`), always below the MTBF ``M``. It is the
unique minimiser: :math:`\\tau^2 \\Phi'(\\tau) \\propto (\\tau/M - 1)
e^{(\\tau+C)/M} + 1`, which increases in ``tau`` (its derivative is
:math:`(\\tau/M^2) e^{(\\tau + C)/M} > 0`), so :math:`\\Phi` falls, then
rises: it is unimodal, and the best whole number of steps per segment is the
floor or the ceiling of ``tau*/t`` (:func:`best_checkpoint_every`). At the
optimum :math:`e^{(\\tau^*+C)/M} = 1/(1 - x^*)`, so the least time per unit of
work and the efficiency are

.. math:: \\Phi(\\tau^*) = \\frac{e^{R/M}}{1 - x^*}
          = \\frac{e^{\\lambda R}}{-W_0(-e^{-1-\\lambda C})}, \\qquad
          \\eta^* = -W_0(-e^{-1-\\lambda C})\\, e^{-\\lambda R}

(:func:`optimal_time_per_work`, :func:`optimal_checkpoint_efficiency`).

Young's and Daly's intervals are the first terms of the expansion of
:math:`\\tau^*` in :math:`\\sqrt{C/M}`: with :math:`p = \\sqrt{2(1 - e^{-\\varepsilon})}`,
:math:`1 + W_0 = p - p^2/3 + 11 p^3/72 - \\dots`, i.e.
:math:`\\tau^* = \\sqrt{2CM} - 2C/3 + \\sqrt{2CM}\\, C/(18 M) + O(C^2/M)`:
Young's :math:`\\sqrt{2CM}` is the first term (it overshoots, by
``sqrt(2C/M)/3`` relatively), Daly's higher-order interval the first three.

A synchronous job of ``n`` workers stops when any of them fails: with
independent Poisson failures its rate is the sum of theirs
(:func:`job_mtbf`), so ``n`` equal workers of MTBF ``M_w`` run a job of MTBF
``M_w / n``. Its best efficiency falls with ``n``: at ``R = 0`` it reaches
``e`` at :math:`n = (e - \\ln e - 1) M_w / C` (:func:`efficiency_wall`; 50 %
at :math:`n = (\\ln 2 - 1/2) M_w / C`).

References
----------
.. [Young] J. W. Young, "A first order approximation to the optimum
   checkpoint interval", Communications of the ACM 17(9), 1974.
.. [Daly] J. T. Daly, "A higher order estimate of the optimum checkpoint
   interval for restart dumps", Future Generation Computer Systems 22(3),
   2006 (the expected segment time; its first-order interval
   ``sqrt(2 C (M + R))`` and the perturbation solution of the same optimum).
.. [LambertW] R. M. Corless, G. H. Gonnet, D. E. G. Hare, D. J. Jeffrey,
   D. E. Knuth, "On the Lambert W function", Advances in Computational
   Mathematics 5, 1996 (the branches and the series at the branch point).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import check, check_nonnegative, check_positive, check_probability
from .training import checkpoint_segment_time

__all__ = [
    "optimal_checkpoint_fraction",
    "optimal_checkpoint_interval",
    "checkpoint_time_per_work",
    "checkpoint_efficiency",
    "optimal_time_per_work",
    "optimal_checkpoint_efficiency",
    "best_checkpoint_every",
    "daly_first_order_interval",
    "job_mtbf",
    "efficiency_wall",
]


def _series(eps: float) -> float:
    """``1 + W0(-exp(-1 - eps))`` from its series at the branch point (small ``eps``)."""
    p = math.sqrt(-2.0 * math.expm1(-eps))
    return p - p**2 / 3 + 11 * p**3 / 72 - 43 * p**4 / 540 + 769 * p**5 / 17280


def optimal_checkpoint_fraction(cost_over_mtbf: float) -> float:
    """``x* = tau*/M = 1 + W0(-exp(-1 - C/M))``, the optimum interval in units of the MTBF.

    Parameters
    ----------
    cost_over_mtbf : float
        ``epsilon = lambda C = C / M`` (> 0).

    Returns
    -------
    float
        In ``(0, 1)``.

    Notes
    -----
    Computed from :func:`scipy.special.lambertw` (principal branch) and
    refined by Newton steps on the defining equation
    :math:`\\ln(1 - x) + x + \\varepsilon = 0`: near the branch point
    (``epsilon`` below about 1e-6) ``1 + W`` loses digits to cancellation
    (and ``lambertw`` returns NaN at ``epsilon = 1e-16``), so there the start
    is the branch-point series :math:`p - p^2/3 + 11p^3/72 - \\dots` with
    :math:`p = \\sqrt{2(1 - e^{-\\varepsilon})}`. The result solves the
    equation to rounding.

    References
    ----------
    [LambertW]_.
    """
    eps = check_positive("cost_over_mtbf", cost_over_mtbf)
    if eps < 1e-3:
        x = _series(eps)
    else:
        from scipy.special import lambertw  # on first use: keeps every CLI start light

        x = 1.0 + float(lambertw(-math.exp(-1.0 - eps), 0).real)
    if x < 0.9:  # Newton on g(x) = log(1 - x) + x + eps, well conditioned away from x = 1
        for _ in range(8):
            g = math.log1p(-x) + x + eps
            step = g / (1.0 - 1.0 / (1.0 - x))
            x -= step
            if abs(step) <= 4e-16 * x:
                break
    return x


def optimal_checkpoint_interval(checkpoint_cost: float, mtbf: float) -> float:
    """The exact optimum work between checkpoints under Poisson failures.

    Parameters
    ----------
    checkpoint_cost : float
        Checkpoint time ``C`` (> 0).
    mtbf : float
        Mean time between failures of the job ``M = 1/lambda`` (> 0).

    Returns
    -------
    float
        ``tau*``, in the time units of ``C`` and ``M`` (work between two
        checkpoints, as for :func:`sim.analytic.young_interval`); below ``M``.

    Notes
    -----
    .. math:: \\tau^* = \\frac{1 + W_0\\left(-e^{-1-\\lambda C}\\right)}{\\lambda}

    the minimiser of the expected wall time per unit of work
    (:func:`checkpoint_time_per_work`), whatever the restart cost ``R``
    (the module docstring derives it). The principal branch :math:`W_0` is the
    one that gives a positive interval.

    References
    ----------
    [Daly]_ (the cost function), [LambertW]_.
    """
    C = check_positive("checkpoint_cost", checkpoint_cost)
    M = check_positive("mtbf", mtbf)
    return M * optimal_checkpoint_fraction(C / M)


def checkpoint_time_per_work(interval: float, checkpoint_cost: float, restart_cost: float,
                             mtbf: float) -> float:
    """Expected wall time per unit of work, checkpointing every ``tau`` of work.

    Parameters
    ----------
    interval : float
        Work between checkpoints ``tau`` (> 0).
    checkpoint_cost, restart_cost : float
        ``C`` and ``R`` (>= 0).
    mtbf : float
        ``M`` (> 0).

    Returns
    -------
    float
        :math:`\\Phi(\\tau) \\ge 1` (1 only with no failures cost at all).

    Notes
    -----
    .. math:: \\Phi(\\tau) = \\frac{M e^{R/M}\\left(e^{(\\tau + C)/M} - 1\\right)}{\\tau}

    Daly's expected segment time (:func:`sim.analytic.checkpoint_segment_time`)
    over the segment's work.

    References
    ----------
    [Daly]_.
    """
    tau = check_positive("interval", interval)
    return checkpoint_segment_time(tau, checkpoint_cost, restart_cost, mtbf) / tau


def checkpoint_efficiency(interval: float, checkpoint_cost: float, restart_cost: float,
                          mtbf: float) -> float:
    """Useful fraction of wall time, ``1 / Phi(tau)`` (see :func:`checkpoint_time_per_work`)."""
    return 1.0 / checkpoint_time_per_work(interval, checkpoint_cost, restart_cost, mtbf)


def optimal_time_per_work(checkpoint_cost: float, restart_cost: float, mtbf: float) -> float:
    """The least expected wall time per unit of work, ``Phi(tau*)``.

    Notes
    -----
    .. math:: \\Phi(\\tau^*) = \\frac{e^{R/M}}{1 - \\tau^*/M}
              = \\frac{e^{\\lambda R}}{-W_0\\left(-e^{-1-\\lambda C}\\right)}

    from the optimality condition :math:`e^{(\\tau^* + C)/M} = 1/(1 - \\tau^*/M)`.

    References
    ----------
    [Daly]_, [LambertW]_.
    """
    C = check_positive("checkpoint_cost", checkpoint_cost)
    R = check_nonnegative("restart_cost", restart_cost)
    M = check_positive("mtbf", mtbf)
    return math.exp(R / M) / (1.0 - optimal_checkpoint_fraction(C / M))


def optimal_checkpoint_efficiency(checkpoint_cost: float, restart_cost: float, mtbf: float) -> float:
    """The best useful fraction of wall time, :math:`-W_0(-e^{-1-\\lambda C}) e^{-\\lambda R}`."""
    return 1.0 / optimal_time_per_work(checkpoint_cost, restart_cost, mtbf)


def best_checkpoint_every(step_time: float, checkpoint_cost: float, mtbf: float) -> int:
    """The whole number of steps between checkpoints with the least expected time per step.

    Parameters
    ----------
    step_time : float
        Failure-free time of one step ``t`` (> 0): the work of a step.
    checkpoint_cost, mtbf : float
        ``C`` (> 0) and ``M`` (> 0).

    Returns
    -------
    int
        ``K >= 1``.

    Notes
    -----
    :math:`\\Phi` is unimodal in the work ``K t`` (module docstring), so the
    best whole ``K`` is ``floor(tau*/t)`` or ``ceil(tau*/t)`` (at least 1):
    the one with the smaller :math:`\\Phi(K t)`, the smaller ``K`` on a tie.
    It does not depend on the restart cost (a constant factor of
    :math:`\\Phi`). Rounding ``tau*/t`` to the nearest integer can pick the
    worse of the two: :math:`\\Phi` rises faster below ``tau*`` (as ``C/tau``)
    than above it (as ``tau/(2M)``).

    References
    ----------
    [Daly]_.
    """
    t = check_positive("step_time", step_time)
    C = check_positive("checkpoint_cost", checkpoint_cost)
    M = check_positive("mtbf", mtbf)
    ratio = optimal_checkpoint_interval(C, M) / t
    lo = max(1, math.floor(ratio))
    hi = max(1, math.ceil(ratio))
    if hi == lo:
        return lo
    cost = lambda k: math.expm1((k * t + C) / M) / (k * t)  # noqa: E731  (Phi without M e^{R/M})
    return lo if cost(lo) <= cost(hi) else hi


def daly_first_order_interval(checkpoint_cost: float, restart_cost: float, mtbf: float) -> float:
    """Daly's first-order interval ``sqrt(2 C (M + R))`` (Young's when ``R = 0``).

    Notes
    -----
    .. math:: \\tau_{Daly,1} = \\sqrt{2 C (M + R)}

    References
    ----------
    [Daly]_.
    """
    C = check_positive("checkpoint_cost", checkpoint_cost)
    R = check_nonnegative("restart_cost", restart_cost)
    M = check_positive("mtbf", mtbf)
    return math.sqrt(2.0 * C * (M + R))


def job_mtbf(worker_mtbfs: Sequence[float]) -> float:
    """MTBF of a synchronous job that stops when any worker fails: ``1 / sum_i 1/M_i``.

    Parameters
    ----------
    worker_mtbfs : sequence of float
        Each worker's MTBF (> 0; ``inf``: never fails), at least one finite.

    Notes
    -----
    The superposition of independent Poisson processes is Poisson with the
    sum of the rates: :math:`M_{job} = 1 / \\sum_i M_i^{-1}`; ``n`` equal
    workers give ``M / n``.
    """
    vals = [check_positive("worker_mtbf", m, allow_inf=True) for m in worker_mtbfs]
    check(len(vals) >= 1, "worker_mtbfs", "at least one worker", list(worker_mtbfs))
    rate = sum(1.0 / m for m in vals)
    check(rate > 0, "worker_mtbfs", "at least one finite MTBF", list(worker_mtbfs))
    return 1.0 / rate


def efficiency_wall(worker_mtbf: float, checkpoint_cost: float, restart_cost: float = 0.0,
                    efficiency: float = 0.5) -> float:
    """Workers ``n`` at which a synchronous job's best efficiency falls to ``efficiency``.

    Parameters
    ----------
    worker_mtbf : float
        MTBF ``M_w`` of one worker (> 0); the job's MTBF is ``M_w / n``.
    checkpoint_cost, restart_cost : float
        ``C`` (> 0) and ``R`` (>= 0) of the job.
    efficiency : float
        Target ``e`` in (0, 1).

    Returns
    -------
    float
        The real ``n`` with :func:`optimal_checkpoint_efficiency` ``(C, R, M_w / n) = e``
        (it decreases in ``n``); may be below 1 (no job of one worker reaches ``e``).

    Notes
    -----
    At ``R = 0`` in closed form: :math:`-W_0 = e` gives
    :math:`n = (e - \\ln e - 1) M_w / C` (for 50 %, :math:`(\\ln 2 - 1/2) M_w/C
    \\approx 0.1931 M_w/C`); with ``R > 0`` the root is found numerically.

    References
    ----------
    [LambertW]_.
    """
    Mw = check_positive("worker_mtbf", worker_mtbf)
    C = check_positive("checkpoint_cost", checkpoint_cost)
    R = check_nonnegative("restart_cost", restart_cost)
    e = check_probability("efficiency", efficiency, open_low=True, open_high=True)
    n0 = (e - math.log(e) - 1.0) * Mw / C
    if R == 0:
        return n0
    from scipy.optimize import brentq

    f = lambda n: optimal_checkpoint_efficiency(C, R, Mw / n) - e  # noqa: E731
    return float(brentq(f, n0 * 1e-12, n0, xtol=1e-12 * n0, rtol=1e-14))
