"""The exact checkpoint interval of a training config, and checkpoint_every auto, against the DES."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim import analytic
from sim.engines import predictions
from sim.errors import ConfigError
from sim.results import summarize
from sim.runner import replicate
from sim.training import TrainingConfig, training_model
from sim.training.checkpointing import (
    auto_checkpoint_every,
    failure_free_step_time,
    job_failure_rate,
)

#: A spot pipeline of 4 single-replica stages: the job fails at 4/mtbf (M = 10), C = M.
SPOT = dict(stages=4, microbatches=1, forward_time=0.25, backward_ratio=0.0, mtbf=40.0,
            replace_time=0.0, checkpoint_cost=10.0, restart_cost=1.0, steps=56)


def _wall(cfg, reps, seed):
    recs = replicate(training_model, cfg, replications=reps, seed=seed)
    assert not any(r.get("error") for r in recs)
    return summarize(recs, ["training_time"])["training_time"]


def test_predicted_interval_uses_the_job_rate():
    """tau* of L single-replica spot stages is the Lambert-W optimum at M = mtbf / L."""
    cfg = TrainingConfig(**SPOT, checkpoint_every=8)
    p = predictions("training", cfg)["checkpoint_interval"]
    assert p["value"] == pytest.approx(analytic.optimal_checkpoint_interval(10.0, 10.0))
    assert p["reference"] == "checkpoint_interval"
    assert failure_free_step_time(cfg) == pytest.approx(1.0)
    assert auto_checkpoint_every(cfg) == analytic.best_checkpoint_every(1.0, 10.0, 10.0) == 8


def test_job_rate_sums_workers_domains_and_spot():
    """Workers' up times a d/(1-a), stage domains' (1-u) D/u and spot preemptions add up."""
    cfg = TrainingConfig(stages=3, availability=0.99, mean_downtime=2.0, domain_outage=0.01,
                         domain_downtime=5.0, mtbf=500.0, restart_cost=1.0)
    expect = 3 / 500 + 3 * (0.01 / (0.99 * 2.0)) + 3 * (0.01 / (0.99 * 5.0))
    assert job_failure_rate(cfg) == pytest.approx(expect)


@pytest.mark.parametrize("kw,why", [
    (dict(replicas=2), "needs one replica per stage"),
    (dict(restart_cost=None), "needs the restart model"),
    (dict(mtbf=math.inf), "needs a failure model"),
    (dict(availability=0.9, failure_distribution="weibull"), "needs exponential up times"),
    (dict(pass_time_distribution="exponential"), "needs deterministic step times"),
])
def test_interval_refused_where_failures_are_not_poisson(kw, why):
    """The reference says why not; auto is refused with the same reason."""
    cfg = TrainingConfig(**{**SPOT, **kw})
    p = predictions("training", cfg)["checkpoint_interval"]
    assert p["value"] is None and why in p["note"]
    with pytest.raises(ConfigError, match="'checkpoint_every' must be auto only where the exact"):
        auto_checkpoint_every(cfg)


def test_time_to_train_at_k_star_is_daly_at_the_job_mtbf():
    """At K* the DES's time to train is Daly's law at M = mtbf / L, not at one worker's mtbf."""
    k = auto_checkpoint_every(TrainingConfig(**SPOT))
    cfg = TrainingConfig(**{**SPOT, "steps": 24}, checkpoint_every=k)
    est = _wall(cfg, 60, seed=11)
    exact = analytic.checkpoint_wall_time(24, 1.0, k, 10.0, 1.0, 10.0)
    assert predictions("training", cfg)["training_time"]["value"] is None  # Daly: one worker only
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    wrong = analytic.checkpoint_wall_time(24, 1.0, k, 10.0, 1.0, 40.0)
    assert abs(est.mean - wrong) > 4 * est.se


@pytest.mark.slow
def test_exact_interval_beats_young_in_the_des():
    """At C = M, Young's K (14) trains slower than K* (8) by more than 4 SE of the paired difference.

    Both K run on the same seeds (the same failure streams), and each matches Daly's law at
    the job MTBF M = mtbf / L within 4 SE.
    """
    k_star = auto_checkpoint_every(TrainingConfig(**SPOT))
    k_young = round(analytic.young_interval(10.0, 10.0))  # 14 steps of time 1
    assert (k_star, k_young) == (8, 14)
    walls = {}
    for k in (k_star, k_young):
        cfg = TrainingConfig(**SPOT, checkpoint_every=k)
        recs = replicate(training_model, cfg, replications=400, seed=11)
        walls[k] = np.array([r["training_time"] for r in recs])
        exact = analytic.checkpoint_wall_time(56, 1.0, k, 10.0, 1.0, 10.0)
        se = walls[k].std(ddof=1) / math.sqrt(len(walls[k]))
        assert abs(walls[k].mean() - exact) <= 4 * se, (k, walls[k].mean(), se, exact)
    d = walls[k_young] - walls[k_star]
    assert d.mean() > 4 * d.std(ddof=1) / math.sqrt(len(d)), (d.mean(), d.std(ddof=1))


def test_auto_is_the_config_with_that_k():
    """checkpoint_every auto gives bit for bit the run of the explicit K it picks."""
    cfg = TrainingConfig(**SPOT)
    k = auto_checkpoint_every(cfg)
    a = replicate(training_model, dataclasses.replace(cfg, checkpoint_every=k), replications=2,
                  seed=5)
    b = replicate(training_model, TrainingConfig(**SPOT, checkpoint_every=k), replications=2,
                  seed=5)
    assert [r["training_time"] for r in a] == [r["training_time"] for r in b]
