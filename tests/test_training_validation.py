"""The training DES against its exact references: each at two points, 4 sigma, a wrong model rejected.

Where a law has two points, the default suite runs one and -m slow runs the other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim import analytic
from sim.engines import predictions
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import summarize
from sim.rng import Streams
from sim.runner import replicate
from sim.training import TrainingConfig, TrainingSystem, training_model


def _est(cfg, metric, reps, seed=0):
    recs = replicate(training_model, cfg, replications=reps, seed=seed)
    assert not any(r.get("error") for r in recs), recs[0].get("error")
    return summarize(recs, [metric])[metric]


def _agrees(est, exact, wrong):
    """Within 4 standard errors of the exact value, and more than 4 from the wrong one."""
    assert est.se > 0
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    assert abs(est.mean - wrong) > 4 * est.se, (est, wrong)


# --------------------------------------------------------------------------- 1. GPipe and 1F1B


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("L,m,tf,B", [(4, 8, 1.0, 2.0), (6, 3, 0.5, 1.0), (8, 16, 0.25, 2.0)])
def test_schedule_step_time_and_bubble_exact(schedule, L, m, tf, B):
    """(m + L - 1)(t_f + t_b) and (L - 1)/(m + L - 1) exactly, every step, zero variance."""
    cfg = TrainingConfig(stages=L, microbatches=m, steps=4, schedule=schedule,
                         forward_time=tf, backward_ratio=B)
    sysm = TrainingSystem(cfg, Streams(0).replication(0))
    out = sysm.run()
    T = analytic.pipeline_step_time(L, m, tf, B * tf)
    assert sysm.trainer.step_times == pytest.approx([T] * 4, abs=1e-12)
    assert out["bubble_fraction"] == pytest.approx(analytic.pipeline_bubble_fraction(L, m), abs=1e-12)
    assert out["training_time"] == pytest.approx(4 * T, abs=1e-9)
    pred = predictions("training", cfg)
    assert pred["step_time_mean"]["value"] == pytest.approx(T)
    # wrong model: no pipelining (each microbatch crossing alone)
    assert abs(out["step_time_mean"] - m * L * (1 + B) * tf) > 1e-6


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("routing", ["round-robin", "least-loaded"])
@pytest.mark.parametrize("L,r,m", [(4, 2, 8), (5, 3, 9)])
def test_r_fixed_pipelines_split_the_step(schedule, routing, L, r, m):
    """r replicas per stage are r pipelines: (m/r + L - 1)(t_f + t_b), exactly."""
    cfg = TrainingConfig(stages=L, replicas=r, microbatches=m, steps=2, schedule=schedule,
                         routing=routing, sync="none")
    sysm = TrainingSystem(cfg, Streams(0).replication(0))
    out = sysm.run()
    T = analytic.pipeline_step_time(L, m // r, 1.0, 2.0)
    assert sysm.trainer.step_times == pytest.approx([T, T], abs=1e-12)
    assert out["bubble_fraction"] == pytest.approx(analytic.pipeline_bubble_fraction(L, m // r))
    assert predictions("training", cfg)["step_time_mean"]["value"] == pytest.approx(T)
    # wrong model: the replicas ignored (one pipeline of m)
    assert abs(out["step_time_mean"] - analytic.pipeline_step_time(L, m, 1.0, 2.0)) > 1.0


def test_1f1b_in_flight_at_most_L_minus_j_and_gpipe_holds_all():
    """1F1B holds at most L - j microbatches at stage j; GPipe holds all m at every stage."""
    L, m = 5, 12
    for schedule, expect in [("1f1b", [L - j for j in range(L)]), ("gpipe", [m] * L)]:
        cfg = TrainingConfig(stages=L, microbatches=m, steps=2, schedule=schedule)
        sysm = TrainingSystem(cfg, Streams(0).replication(0))
        sysm.run()
        peaks = [st[0].peak_in_flight for st in sysm.flow.stages]
        assert peaks == expect


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("L,m", [(1, 1), (3, 5)])
def test_forward_only_steps_finish(schedule, L, m):
    """With backward_ratio 0 a step is forwards only: (m + L - 1) t_f, and 1F1B no longer hangs.

    1F1B's hold at each forward pass used to be released only by a backward
    pass, so without one its limit was never freed (the run ended with "No
    scheduled events left" and ran forever with failures).
    """
    cfg = TrainingConfig(stages=L, microbatches=m, steps=3, schedule=schedule,
                         routing="round-robin", backward_ratio=0.0, sync="none")
    sysm = TrainingSystem(cfg, Streams(0).replication(0))
    sysm.run()
    T = analytic.pipeline_step_time(L, m, 1.0, 0.0)
    assert sysm.trainer.step_times == pytest.approx([T] * 3, abs=1e-12)


# --------------------------------------------------------------------------- 2. M/M/c


@pytest.mark.parametrize("c,lam,wrong,reps", [
    # slow: the Erlang C law and a rejected wrong model stay in the default suite at c = 3
    pytest.param(1, 0.7, 1.0 + 0.7 / (2 * 0.3), 16, marks=pytest.mark.slow),  # M/D/1
    (3, 2.4, 1.0 / (1.0 - 2.4 / 3), 6),      # three separate M/M/1 queues (no sharing)
])
def test_mmc_sojourn(c, lam, wrong, reps):
    """Mean sojourn of one stage of c replicas under queue routing equals the Erlang C formula."""
    cfg = TrainingConfig(stages=1, replicas=c, microbatches=100, steps=200, schedule="async",
                         routing="queue", backward_ratio=0, pass_time_distribution="exponential",
                         arrival="poisson", arrival_rate=lam)
    est = _est(cfg, "latency_mean", reps, seed=1)
    exact = analytic.mmc_sojourn(c, lam, 1.0)
    assert predictions("training", cfg)["latency_mean"]["value"] == pytest.approx(exact)
    assert est.half_width / exact < 0.05
    _agrees(est, exact, wrong)


# --------------------------------------------------------------------------- 3. saturated


SATURATED_POINTS = [
    # speeds, forward times (backward ratio 2: work 3 t_f)
    (((1.0, 3.0), (2.0, 2.0, 2.0), (6.0,)), (1 / 3, 0.4, 1 / 3)),   # bottleneck stage 0
    (((1.0, 3.0), (2.0, 2.0, 2.0), (5.0,)), (1 / 3, 2.5 / 3, 1 / 3)),  # bottleneck stage 1
]


def _equal_split(speeds, work):
    """Wrong model: every replica of a stage gets an equal share (the slowest sets the pace)."""
    return min(len(v) * min(v) / w for v, w in zip(speeds, work, strict=True))


@pytest.mark.parametrize("speeds,tf,reps", [
    # slow: the saturated law and the rejected equal split stay in the default suite (stage 1)
    pytest.param(*SATURATED_POINTS[0], 8, marks=pytest.mark.slow),
    (*SATURATED_POINTS[1], 4),
])
def test_saturated_weighted_throughput(speeds, tf, reps):
    """Async weighted routing saturates at min_j sum_i v_ij / w_j (steady window)."""
    cfg = TrainingConfig(stages=3, speeds=speeds, forward_time=tf, microbatches=100, steps=30,
                         schedule="async", routing="weighted")
    work = [3 * t for t in tf]
    exact = analytic.saturated_throughput(speeds, work)
    assert predictions("training", cfg)["throughput_steady"]["value"] == pytest.approx(exact)
    est = _est(cfg, "throughput_steady", reps, seed=2)
    assert est.half_width / exact < 0.01
    _agrees(est, exact, _equal_split(speeds, work))


def test_swarm_approaches_saturated_bound_as_m_grows():
    """SWARM steps stay below n/(n/X + D) per step and approach X as m grows."""
    speeds, tf = SATURATED_POINTS[1]
    work = [3 * t for t in tf]
    X = analytic.saturated_throughput(speeds, work)
    rates = []
    for m in (20, 400):
        cfg = TrainingConfig(stages=3, speeds=speeds, forward_time=tf, microbatches=m,
                             steps=max(2, 2000 // m), schedule="swarm", routing="weighted",
                             sync="none")
        est = _est(cfg, "throughput", 6, seed=3)
        assert est.mean <= analytic.finite_throughput_bound(speeds, work, m) + 4 * est.se
        rates.append(est.mean)
    assert rates[0] < rates[1] < X
    assert rates[1] > 0.9 * X


# --------------------------------------------------------------------------- 4. Daly


@pytest.mark.parametrize("tf,K,C,Q,M,N,reps", [
    (1.0, 5, 2.0, 1.0, 30.0, 50, 200),
    # slow: the same point at 400 replications (200 stay in the default suite)
    pytest.param(1.0, 5, 2.0, 1.0, 30.0, 50, 400, marks=pytest.mark.slow),
    # slow: the Daly law and the rejected failure-immune model stay in the default suite above
    pytest.param(0.5, 10, 1.0, 3.0, 10.0, 40, 500, marks=pytest.mark.slow),
])
def test_daly_checkpoint_segment_time(tf, K, C, Q, M, N, reps):
    """One preemptible worker: N steps take N/K Daly segments M e^{Q/M}(e^{(Kt+C)/M} - 1)."""
    cfg = TrainingConfig(stages=1, microbatches=1, steps=N, forward_time=tf, backward_ratio=2.0,
                         mtbf=M, replace_time=0.0, checkpoint_every=K, checkpoint_cost=C,
                         restart_cost=Q)
    t = 3 * tf
    exact = analytic.checkpoint_wall_time(N, t, K, C, Q, M)
    assert predictions("training", cfg)["training_time"]["value"] == pytest.approx(exact)
    est = _est(cfg, "training_time", reps, seed=4)
    assert est.half_width / exact < 0.05
    # wrong model: checkpoints and restarts immune to failures
    wrong = (N / K) * ((M + Q) * math.expm1(K * t / M) + C)
    _agrees(est, exact, wrong)


# --------------------------------------------------------------------------- 5. snapshot law


SNAPSHOT_POINTS = [
    dict(stages=8, replicas=2, availability=0.8, domain_outage=0.02, skip_budget=1,
         mean_downtime=5.0, domain_downtime=5.0, skip_penalty=0.1),
    dict(stages=12, replicas=3, availability=0.7, domain_outage=0.0, skip_budget=0,
         mean_downtime=10.0, domain_downtime=10.0),
]


@pytest.mark.parametrize("kw,reps", [(SNAPSHOT_POINTS[0], 6),
                                     pytest.param(SNAPSHOT_POINTS[1], 20, marks=pytest.mark.slow)])
def test_snapshot_law_and_study_a_des(kw, reps):
    """Zero-time crossings with failures: Study A's drop law, and today's DES path by path."""
    cfg = TrainingConfig(**kw, forward_time=0.0, backward_ratio=0, schedule="async",
                         routing="round-robin", arrival="fixed", arrival_rate=1.0,
                         microbatches=100, steps=30)
    L, r, s, a, rho = (kw["stages"], kw["replicas"], kw["skip_budget"], kw["availability"],
                       kw["domain_outage"])
    exact = analytic.drop_probability(L, r, s, a, rho)
    assert predictions("training", cfg)["drop_rate"]["value"] == pytest.approx(exact)
    recs = replicate(training_model, cfg, replications=reps, seed=5)
    est = summarize(recs, ["drop_rate", "mean_quality"])
    # wrong model: one replica fewer per stage
    _agrees(est["drop_rate"], exact, analytic.drop_probability(L, r - 1, s, a, rho))
    q = analytic.stage_outage(a, r, rho)
    mq = analytic.mean_quality_delivered(L, q, s, kw.get("skip_penalty", 0.0))
    assert abs(est["mean_quality"].mean - mq) <= 4 * est["mean_quality"].se + 1e-12
    # the same failure streams drive Study A's DES: the two agree path by path
    pc = PipelineConfig(**kw, microbatches=3000)
    old = replicate(des_pipeline_model, pc, replications=reps, seed=5)
    diff = np.array([x["drop_rate"] - y["drop_rate"] for x, y in zip(recs, old, strict=True)])
    assert abs(diff.mean()) <= max(4 * diff.std(ddof=1) / math.sqrt(len(diff)), 1e-3)


# the default suite's one check of the training DES's detection timeout (5 replications: the
# free-failover model is still rejected at z = 11.7); 10 replications in the slow run (z = 18)
@pytest.mark.parametrize("reps", [5, pytest.param(10, marks=pytest.mark.slow)])
def test_timed_failover_without_contention_matches_study_a_des(reps):
    """Forward-only crossings at a low rate (no queueing): Study A's timed DES, path by path."""
    kw = dict(stages=6, replicas=2, availability=0.8, skip_budget=1, mean_downtime=20.0,
              domain_downtime=20.0, detection_timeout=0.5)
    cfg = TrainingConfig(**kw, forward_time=1.0, backward_ratio=0, schedule="async",
                         routing="least-loaded", arrival="fixed", arrival_rate=0.05,
                         microbatches=100, steps=10)
    new = replicate(training_model, cfg, replications=reps, seed=7)
    old = replicate(des_pipeline_model, PipelineConfig(**kw, stage_time=1.0, arrival="fixed",
                                                   rate=0.05, microbatches=1000),
                    replications=reps, seed=7)
    free = replicate(des_pipeline_model, PipelineConfig(**{**kw, "detection_timeout": 0.0},
                                                    stage_time=1.0, arrival="fixed", rate=0.05,
                                                    microbatches=1000),
                     replications=reps, seed=7)
    for m in ("drop_rate", "latency_mean", "mean_skipped"):
        d = np.array([a[m] - b[m] for a, b in zip(new, old, strict=True)])
        se = d.std(ddof=1) / math.sqrt(len(d))
        assert abs(d.mean()) <= 4 * se + 1e-12, (m, d.mean(), se)
    # wrong model: free failover (no detection timeout) has a visibly shorter latency
    d = np.array([a["latency_mean"] - b["latency_mean"] for a, b in zip(new, free, strict=True)])
    assert d.mean() > 4 * d.std(ddof=1) / math.sqrt(len(d))
