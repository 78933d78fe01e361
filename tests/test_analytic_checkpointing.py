"""The exact checkpoint interval (sim.analytic.checkpointing) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.special import lambertw

from sim import analytic
from sim.errors import ConfigError


def _numerical_optimum(C: float, R: float, M: float) -> float:
    """Minimiser of Daly's expected time per unit of work, by bounded scalar search."""
    return optimize.minimize_scalar(
        lambda tau: analytic.checkpoint_segment_time(tau, C, R, M) / tau,
        bounds=(1e-9 * M, M), method="bounded", options={"xatol": 1e-12 * M}).x


@pytest.mark.parametrize("C,M", [(1.0, 1000.0), (5.0, 200.0), (1.0, 10.0), (10.0, 10.0),
                                 (20.0, 10.0), (1e-3, 1e4)])
@pytest.mark.parametrize("R", [0.0, 3.0, 40.0])
def test_lambert_w_interval_is_the_minimiser_whatever_R(C, M, R):
    """tau* = (1 + W0(-e^{-1-C/M})) M minimises Phi(tau) at every restart cost."""
    tau = analytic.optimal_checkpoint_interval(C, M)
    assert tau == pytest.approx(_numerical_optimum(C, R, M), rel=1e-6)
    assert 0 < tau < M
    phi = analytic.checkpoint_time_per_work(tau, C, R, M)
    assert analytic.optimal_time_per_work(C, R, M) == pytest.approx(phi, rel=1e-12)
    for other in (0.9 * tau, 1.1 * tau):
        assert analytic.checkpoint_time_per_work(other, C, R, M) > phi


@pytest.mark.parametrize("eps", [1e-14, 1e-10, 1e-6, 1e-3, 0.05, 1.0, 5.0])
def test_fraction_solves_the_defining_equation(eps):
    """x* solves (1 - x) e^x = e^{-eps} to rounding, also where 1 + W loses its digits."""
    x = analytic.optimal_checkpoint_fraction(eps)
    # the residual over its derivative -x/(1 - x): x is right to about 1e-15
    assert abs((math.log1p(-x) + x + eps) * (1 - x) / x) < 4e-15
    if eps >= 1e-3:  # away from the branch point scipy's W is accurate: the same value
        assert x == pytest.approx(1 + lambertw(-math.exp(-1 - eps)).real, rel=1e-12)
    # the other real branch gives a negative interval
    assert 1 + lambertw(-math.exp(-1 - eps), -1).real < 0


@pytest.mark.parametrize("eps", [1e-4, 1e-3, 1e-2])
def test_young_and_daly_are_the_expansion(eps):
    """Young overshoots by sqrt(2 eps)/3 to first order; Daly agrees to O(eps^2)."""
    M = 1.0
    tau = analytic.optimal_checkpoint_interval(eps, M)
    young = analytic.young_interval(eps, M)
    daly = analytic.daly_interval(eps, M)
    assert young / tau - 1 == pytest.approx(math.sqrt(2 * eps) / 3, rel=0.15)
    assert abs(daly / tau - 1) < 2 * eps**1.5 + 1e-9
    assert analytic.daly_first_order_interval(eps, 0.0, M) == pytest.approx(young)


def test_daly_2006_figures():
    """Daly's three examples (C = 5, R = 10 min; M = 24 h, 6 h, 15 min: 117, 57, 9.1 min)."""
    got = [analytic.optimal_checkpoint_interval(5.0, M) for M in (24 * 60.0, 6 * 60.0, 15.0)]
    assert got == pytest.approx([117, 57, 9.1], rel=0.01)


@pytest.mark.parametrize("t,C,M", [(0.3, 2.0, 50.0), (1.0, 5.0, 1440.0), (7.0, 1.0, 10.0),
                                   (0.05, 0.5, 3.0), (100.0, 1.0, 1e4)])
def test_best_whole_steps_is_brute_force(t, C, M):
    """best_checkpoint_every is the argmin of Phi(K t) over every K (R plays no part)."""
    ks = np.arange(1, int(3 * M / t) + 2)
    phi = M * math.exp(2.0 / M) * np.expm1((ks * t + C) / M) / (ks * t)  # Phi(K t), R = 2
    assert analytic.best_checkpoint_every(t, C, M) == int(ks[int(np.argmin(phi))])


def test_best_whole_steps_beats_nearest_rounding():
    """Between sqrt(K(K+1)) and K + 1/2 the ceiling beats the nearest integer."""
    C, M = 1.0, 10.0
    tau = analytic.optimal_checkpoint_interval(C, M)
    t = tau / 2.48  # nearest integer 2; Phi is about symmetric in log tau: 3 is better
    assert analytic.best_checkpoint_every(t, C, M) == 3
    assert analytic.checkpoint_time_per_work(3 * t, C, 0, M) < \
        analytic.checkpoint_time_per_work(2 * t, C, 0, M)


@pytest.mark.parametrize("R", [0.0, 0.5, 5.0])
@pytest.mark.parametrize("e", [0.5, 0.8, 0.2])
def test_efficiency_wall(R, e):
    """At the returned n the best efficiency is e; at R = 0, n = (e - ln e - 1) M_w / C."""
    Mw, C = 5000.0, 2.0
    n = analytic.efficiency_wall(Mw, C, R, e)
    assert analytic.optimal_checkpoint_efficiency(C, R, Mw / n) == pytest.approx(e, rel=1e-9)
    if R == 0:
        assert n == pytest.approx((e - math.log(e) - 1) * Mw / C, rel=1e-12)
    else:
        assert n < analytic.efficiency_wall(Mw, C, 0.0, e)


def test_job_mtbf_adds_rates():
    """n equal workers: M/n; a flaky one dominates; never-failing workers add nothing."""
    assert analytic.job_mtbf([100.0] * 4) == pytest.approx(25.0)
    assert analytic.job_mtbf([100.0, 1.0]) == pytest.approx(100 / 101)
    assert analytic.job_mtbf([math.inf, 10.0]) == pytest.approx(10.0)


@pytest.mark.parametrize("call,msg", [
    (lambda: analytic.optimal_checkpoint_interval(0.0, 10.0), "'checkpoint_cost' must be > 0: 0.0"),
    (lambda: analytic.optimal_checkpoint_interval(1.0, -1.0), "'mtbf' must be > 0: -1.0"),
    (lambda: analytic.checkpoint_time_per_work(0.0, 1.0, 0.0, 5.0), "'interval' must be > 0: 0.0"),
    (lambda: analytic.optimal_time_per_work(1.0, -2.0, 5.0), "'restart_cost' must be >= 0: -2.0"),
    (lambda: analytic.best_checkpoint_every(0, 1.0, 5.0), "'step_time' must be > 0: 0"),
    (lambda: analytic.efficiency_wall(10.0, 1.0, 0.0, 1.0), "'efficiency' must be in (0, 1): 1.0"),
    (lambda: analytic.job_mtbf([math.inf]), "'worker_mtbfs' must be at least one finite MTBF: [inf]"),
])
def test_bad_inputs_name_the_parameter(call, msg):
    """Each refusal names the parameter, the rule and the value."""
    with pytest.raises(ConfigError) as exc:
        call()
    assert str(exc.value) == msg
