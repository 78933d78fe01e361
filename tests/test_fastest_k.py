"""Fastest k of n: order statistics, the training DES's sync_wait, and fastest-k SGD, each vs exact."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from sim import analytic
from sim.engines import predictions
from sim.errors import ConfigError
from sim.learning import (
    FastestKConfig,
    fastest_k_inclusion,
    fastest_k_model,
    speed_correlated_centers,
)
from sim.results import summarize
from sim.runner import replicate
from sim.training import TrainingConfig, training_model


def _agrees(est, exact, wrong):
    """Within 4 standard errors of the exact value, and more than 4 from the wrong one."""
    assert est.se > 0
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    assert abs(est.mean - wrong) > 4 * est.se, (est, wrong)


def _quantile_moment(dist, k, n, r=1):
    """E[X_(k:n)^r] = int F^-1(u)^r Beta(u; k, n-k+1) du (an independent computation)."""
    beta = stats.beta(k, n - k + 1)
    return integrate.quad(lambda u: dist.ppf(u) ** r * beta.pdf(u), 0, 1, limit=400)[0]


# --------------------------------------------------------------------------- order statistics


@pytest.mark.parametrize("k,n", [(1, 1), (1, 8), (3, 8), (8, 8), (5, 20)])
def test_exponential_order_statistics_are_harmonic_sums(k, n):
    """(H_n - H_{n-k})/mu and sum 1/i^2: equal to the quantile integrals and the quadrature."""
    m = analytic.exponential_order_statistic_mean(k, n, 2.0)
    assert m == pytest.approx(_quantile_moment(stats.expon(scale=2.0), k, n), rel=1e-7)
    assert m == pytest.approx(analytic.kth_smallest_mean(k, [stats.expon(scale=2.0)] * n), rel=1e-8)
    var = analytic.exponential_order_statistic_variance(k, n, 2.0)
    assert var == pytest.approx(_quantile_moment(stats.expon(scale=2.0), k, n, 2) - m * m, rel=1e-6)


@pytest.mark.parametrize("k,n,alpha", [(1, 8, 0.5), (6, 8, 0.5), (8, 8, 2.5), (4, 10, 1.2)])
def test_pareto_order_statistic_beta_form(k, n, alpha):
    """x_m B(n-k+1-1/alpha, k)/B(n-k+1, k): the quantile integral, finite when n-k+1 > 1/alpha."""
    d = stats.pareto(alpha, scale=1.5)
    got = analytic.pareto_order_statistic_moment(k, n, alpha, 1.5)
    assert got == pytest.approx(_quantile_moment(d, k, n), rel=1e-6)


def test_pareto_infinite_mean_is_refused():
    """Waiting for all of n Pareto(alpha <= 1) workers has no mean: one line naming k."""
    with pytest.raises(ConfigError) as exc:
        analytic.pareto_order_statistic_moment(8, 8, 0.8)
    assert str(exc.value) == ("'k' must be <= n + 1 - r/alpha = 7.75 for a finite moment of "
                              "order 1 (Pareto alpha 0.8: the mean is infinite): 8")
    assert math.isfinite(analytic.pareto_order_statistic_moment(7, 8, 0.8))  # 2 > 1.25


@pytest.mark.slow
def test_inclusion_probabilities():
    """Exponential rates: the first is i with probability mu_i / sum mu; every sum is k."""
    mus = [1.0, 2.0, 3.0, 4.0]
    d = [stats.expon(scale=1 / m) for m in mus]
    assert analytic.inclusion_probabilities(1, d) == pytest.approx(np.array(mus) / 10, rel=1e-8)
    pi2 = analytic.inclusion_probabilities(2, d)
    assert pi2.sum() == pytest.approx(2.0, rel=1e-9)
    # P(i in first 2) = sum_j P(j first) P(i first among the rest) + P(i first)
    direct = [mus[i] / 10 + sum(mus[j] / 10 * mus[i] / (10 - mus[j]) for j in range(4) if j != i)
              for i in range(4)]
    assert pi2 == pytest.approx(direct, rel=1e-8)


# --------------------------------------------------------------------------- the training DES


def _one_stage(n, K, steps=100, **kw):
    return TrainingConfig(stages=1, replicas=n, microbatches=n, backward_ratio=0.0, steps=steps,
                          pass_time_distribution=kw.pop("law", "exponential"), sync_wait=K,
                          **kw)


def _step_est(cfg, reps, seed):
    recs = replicate(training_model, cfg, replications=reps, seed=seed)
    assert not any(r.get("error") for r in recs)
    return summarize(recs, ["step_time_mean", "drop_rate"])


def test_sync_wait_step_is_the_kth_order_statistic():
    """n = 8, K = 2, exponential passes, stragglers cancelled: H_8 - H_6 per step.

    Wrong models rejected: waiting for all (H_8) and non-cancelled stragglers (the drop law).
    """
    cfg = _one_stage(8, 2)
    exact = analytic.exponential_order_statistic_mean(2, 8)
    p = predictions("training", cfg)
    assert p["step_time_mean"]["value"] == pytest.approx(exact)
    assert p["training_time"]["value"] == pytest.approx(100 * exact)
    est = _step_est(cfg, 20, seed=1)
    _agrees(est["step_time_mean"], exact, analytic.drop_stragglers_step_means(2, 8)[1])
    assert abs(est["step_time_mean"].mean - analytic.harmonic_number(8)) > 4 * est["step_time_mean"].se
    assert est["drop_rate"].mean == pytest.approx(6 / 8)  # the 6 stragglers' gradients


@pytest.mark.slow
def test_sync_wait_drop_stragglers_start_late():
    """Stragglers that finish their pass: the K-th of K Exp and n-K Gamma(2) from step 2 on."""
    cfg = _one_stage(8, 2, stragglers="drop")
    first, steady = analytic.drop_stragglers_step_means(2, 8)
    exact = (first + 99 * steady) / 100
    assert predictions("training", cfg)["step_time_mean"]["value"] == pytest.approx(exact)
    est = _step_est(cfg, 20, seed=2)
    _agrees(est["step_time_mean"], exact, first)


@pytest.mark.slow
def test_sync_wait_pareto_and_heterogeneous_speeds():
    """Pareto(2.5) passes (Beta form) and unequal speeds (quadrature); exponential laws rejected."""
    cfg = _one_stage(8, 6, law="pareto", pass_time_shape=2.5)
    exact = analytic.pareto_order_statistic_moment(6, 8, 2.5, 0.6)  # x_m = mean (a-1)/a
    assert predictions("training", cfg)["step_time_mean"]["value"] == pytest.approx(exact)
    _agrees(_step_est(cfg, 20, seed=3)["step_time_mean"], exact,
            analytic.exponential_order_statistic_mean(6, 8))
    speeds = ((0.5, 0.5, 1.0, 1.0, 2.0, 2.0),)
    cfg = TrainingConfig(stages=1, speeds=speeds, microbatches=6, backward_ratio=0.0, steps=100,
                         pass_time_distribution="exponential", sync_wait=3)
    exact = analytic.order_statistic_mean(3, 6, "exponential", speeds=speeds[0])
    assert predictions("training", cfg)["step_time_mean"]["value"] == pytest.approx(exact, rel=1e-9)
    mean_speed = sum(speeds[0]) / 6  # wrong model: every replica at the mean speed
    _agrees(_step_est(cfg, 20, seed=4)["step_time_mean"], exact,
            analytic.exponential_order_statistic_mean(3, 6, 1 / mean_speed))


def test_sync_wait_all_is_the_default_bit_for_bit():
    """sync_wait = n on 1F1B pipelines with random passes gives the default run's numbers."""
    kw = dict(stages=3, replicas=2, microbatches=6, steps=4, schedule="1f1b",
              pass_time_distribution="exponential", availability=0.95, mean_downtime=3.0)
    a = replicate(training_model, TrainingConfig(**kw), replications=3, seed=6)
    b = replicate(training_model, TrainingConfig(**kw, sync_wait=2), replications=3, seed=6)
    for x, y in zip(a, b, strict=True):
        for m in ("training_time", "throughput", "passes", "lost_lost_pass", "drop_rate"):
            assert x[m] == y[m] or (math.isnan(x[m]) and math.isnan(y[m])), m


def test_sync_wait_on_pipelines_counts_k_pipelines():
    """Multi-stage GPipe, K = 2 of 4 pipelines: each step keeps 2 pipelines' microbatches."""
    cfg = TrainingConfig(stages=3, replicas=4, microbatches=8, steps=5, schedule="gpipe",
                         pass_time_distribution="exponential", sync_wait=2)
    recs = replicate(training_model, cfg, replications=2, seed=7)
    for r in recs:
        assert r["samples"] == 5 * 2 * 2  # steps x K pipelines x 2 microbatches each
        assert r["drop_rate"] == pytest.approx(0.5)


@pytest.mark.parametrize("kw,msg", [
    (dict(sync_wait=0), "'sync_wait' must be an integer in [1, 4]: 0"),
    (dict(sync_wait=5), "'sync_wait' must be an integer in [1, 4]: 5"),
    (dict(sync_wait=2, schedule="swarm"), "'sync_wait' must be set only with schedule gpipe or"),
    (dict(stragglers="drop"), "'stragglers' must be cancel (the default) unless sync_wait is set"),
    (dict(pass_time_distribution="pareto"), "'pass_time_shape' must be given for a Pareto law"),
    (dict(pass_time_distribution="pareto", pass_time_shape=0.9),
     "'pass_time_shape' must be > 1 for a Pareto law (its mean is infinite at alpha <= 1): 0.9"),
])
def test_bad_fastest_k_configs(kw, msg):
    """Each refusal names the field, the rule and the value."""
    with pytest.raises(ConfigError) as exc:
        TrainingConfig(stages=2, replicas=4, **kw)
    assert str(exc.value).startswith(msg)


# --------------------------------------------------------------------------- fastest-k SGD


def test_fastest_k_sgd_second_moment_and_step_time():
    """E[(x_t - x*)^2] of K = 4 of 16 with noise and data spread; noise not divided by K rejected."""
    centers = tuple(np.linspace(-1.5, 1.5, 16))
    spread = float(np.var(centers))
    cfg = FastestKConfig(workers=16, k=4, steps=40, lr=0.1, noise=2.0, x0=3.0, centers=centers,
                         record=(10, 40))
    recs = replicate(fastest_k_model, cfg, replications=400, seed=1)
    est = summarize(recs, ["err2@10", "err2@40", "step_time_mean"])
    for t in (10, 40):
        exact = analytic.sgd_mse(t, 4, 16, 0.1, 1.0, 2.0, 9.0, spread)
        wrong = analytic.sgd_mse(t, 1, 16, 0.1, 1.0, 2.0, 9.0, spread * 15 / 16 * 4 / 12 * 4)
        _agrees(est[f"err2@{t}"], exact, wrong if t == 40 else exact * 1.5)
    _agrees(est["step_time_mean"], analytic.exponential_order_statistic_mean(4, 16), 1.0)


@pytest.mark.parametrize("k", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_selection_bias_and_horvitz_thompson(k):
    """Fast workers' data pull the plain mean to sum pi c / K; HT weights remove the bias."""
    speeds = tuple(np.linspace(0.5, 2.0, 8))
    centers = speed_correlated_centers(speeds, 1.0)
    out = {}
    for estimator in ("mean", "ht"):
        cfg = FastestKConfig(workers=8, k=k, steps=60, lr=0.1, x0=0.0, speeds=speeds,
                             centers=centers, estimator=estimator, record=(60,))
        pi = fastest_k_inclusion(cfg)
        exact = analytic.fastest_k_mean_iterate(60, 0.0, 0.1, 1.0, centers, pi, estimator)
        out[estimator] = (summarize(replicate(fastest_k_model, cfg, replications=200, seed=2),
                                    ["x@60"])["x@60"], exact)
    bias, ht_bias = analytic.fastest_k_bias(centers, fastest_k_inclusion(cfg))
    assert bias > 0.1 and abs(ht_bias) < 1e-12
    # each estimator's mean iterate is the other's wrong model
    _agrees(out["mean"][0], out["mean"][1], out["ht"][1])
    _agrees(out["ht"][0], out["ht"][1], out["mean"][1])


def test_time_to_accuracy_has_a_minimum_and_an_interior_k():
    """With noise, k below the floor's minimum never reaches the target; the best k is inside."""
    n, kw = 32, dict(lr=0.1, curvature=1.0, noise=32.0, initial=10.0, target=0.1)
    kmin = analytic.min_k_for_accuracy(n, kw["lr"], 1.0, kw["noise"], kw["target"])
    rows, best, speedup = analytic.fastest_k_sweep(n, **kw)
    assert (kmin, best) == (17, 18) and speedup > 3
    assert all(math.isinf(r.time) for r in rows[: kmin - 1])
    T = rows[best - 1].steps
    assert analytic.sgd_mse(T, best, n, 0.1, 1.0, 32.0, 10.0) <= 0.1
    assert analytic.sgd_mse(T - 1, best, n, 0.1, 1.0, 32.0, 10.0) > 0.1
    steps, lr = analytic.best_lr(best, n, 1.0, 32.0, 10.0, 0.1)
    assert steps <= T and analytic.sgd_mse(steps, best, n, lr, 1.0, 32.0, 10.0) <= 0.1
