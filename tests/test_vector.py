"""The vectorised snapshot engine against the exact laws and against the pipeline DES."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sim import analytic
from sim.errors import ConfigError
from sim.pipeline import PipelineConfig, SkipPenalty, choose_engine, des_pipeline_model
from sim.pipeline.engines import VectorEngine, vector_pipeline_model
from sim.pipeline.vector import placement_arrays, simulate_placement, simulate_stylised
from sim.results import summarize
from sim.rng import Streams
from sim.runner import replicate
from topologies.placement import Placement


def vector_engine_applies(cfg: PipelineConfig) -> tuple[bool, str]:
    verdict = VectorEngine().applies(cfg)
    return verdict.ok, verdict.reason


def select_engine(cfg: PipelineConfig, engine: str) -> tuple[str, str]:
    sel, reason = choose_engine(cfg, engine)
    return sel.name, reason


def rng(seed: int) -> np.random.Generator:
    return Streams(seed).rng("test")


def packed(racks: int, per_rack: int, r: int, rho: float):
    """Several stages per rack: every replica of stage j in rack j // per_rack."""
    rd = [[(f"rack{j // per_rack}",)] * r for j in range(racks * per_rack)]
    return rd, {f"rack{i}": rho for i in range(racks)}


@pytest.mark.parametrize("L,r,s,a,rho", [
    (48, 3, 0, 0.9, 1e-3),    # the shared-domain floor point
    (48, 3, 1, 0.9, 1e-3),    # s >= 1 with rho > 0
    (48, 2, 4, 0.9, 0.0),     # the 96-worker design
    (12, 1, 2, 0.7, 0.05),    # large q: a non-inversion binomial path
])
def test_drop_rate_matches_binomial_tail(L, r, s, a, rho):
    """Simulated drop rate agrees with P(Bin(L, q) > s) within 4 standard errors."""
    res = simulate_stylised(L, r, s, a, rho, microbatches=2_000_000, rng=rng(1))
    exact = analytic.drop_probability(L, r, s, a, rho)
    assert abs(res.drop_rate - exact) <= 4 * math.sqrt(exact * (1 - exact) / res.microbatches)
    assert res.microbatches == 2_000_000 and res.out_histogram.sum() == 2_000_000


def test_out_histogram_is_binomial():
    """The number of out stages follows Binomial(L, q) bin by bin (4 SE each)."""
    L, r, a, rho = 24, 2, 0.8, 0.01
    res = simulate_stylised(L, r, 3, a, rho, microbatches=1_000_000, rng=rng(2))
    q = analytic.stage_outage(a, r, rho)
    pmf = stats.binom.pmf(np.arange(L + 1), L, q)
    n = res.microbatches
    for k in range(L + 1):
        if pmf[k] * n > 20:
            se = math.sqrt(pmf[k] * (1 - pmf[k]) / n)
            assert abs(res.out_histogram[k] / n - pmf[k]) <= 4 * se, k


def test_wrong_outage_law_would_fail():
    """At the test points a model ignoring the shared domain is many SE away (tests have power)."""
    res = simulate_stylised(48, 3, 1, 0.9, 1e-3, microbatches=2_000_000, rng=rng(1))
    wrong = analytic.drop_probability(48, 3, 1, 0.9, 0.0)
    assert abs(res.drop_rate - wrong) > 10 * res.drop_rate_se()


def test_per_stage_replicas_match_exact_distribution():
    """Different replicas per stage: K is Poisson-binomial, as the exact placement law says."""
    reps = [1, 2, 3, 4] * 6
    res = simulate_stylised(24, reps, 2, 0.8, 0.01, microbatches=1_000_000, rng=rng(3))
    placement = [[(f"d{j}",)] * r for j, r in enumerate(reps)]
    dist = analytic.out_stage_distribution(placement, {f"d{j}": 0.01 for j in range(24)}, 0.8)
    exact = float(dist[3:].sum())
    assert abs(res.drop_rate - exact) <= 4 * math.sqrt(exact * (1 - exact) / res.microbatches)


def test_mean_quality_matches_exact():
    """Mean quality of delivered microbatches with kappa > 0 agrees with E[(1-k)^K; K<=s]/P(K<=s)."""
    L, r, s, a, rho, kappa = 48, 2, 4, 0.9, 0.0, 0.2
    res = simulate_stylised(L, r, s, a, rho, kappa, microbatches=1_000_000, rng=rng(4))
    q = analytic.stage_outage(a, r, rho)
    exact = analytic.mean_quality_delivered(L, q, s, kappa)
    k = np.arange(s + 1)
    w = res.skip_histogram / res.delivered
    qual = (1 - kappa) ** k
    sd = math.sqrt(float(np.dot(w, (qual - np.dot(w, qual)) ** 2)))
    assert abs(res.mean_quality - exact) <= 4 * sd / math.sqrt(res.delivered)
    assert abs(res.mean_quality - 1.0) > 20 * sd / math.sqrt(res.delivered)


def test_additive_and_callable_penalties():
    """Quality tables for the additive rule and a user function."""
    k = np.arange(5)
    assert np.allclose(SkipPenalty(0.3, "additive").weights(k), [1, 0.7, 0.4, 0.1, 0.0])
    assert np.allclose(SkipPenalty(0.0, lambda k: 1 / (1 + k)).weights(k[:4]),
                       [1, 1 / 2, 1 / 3, 1 / 4])
    assert SkipPenalty(0.3, "additive").table(4) == pytest.approx((1, 0.7, 0.4, 0.1, 0.0))


def test_packed_placement_matches_exact_and_not_binomial():
    """Stages sharing racks: the simulated rate agrees with the exact conditional law, not the binomial."""
    rd, do = packed(12, 4, 3, 1e-2)
    # 100000 microbatches (400000 before): z = -0.05, the binomial law 97 se away
    # (400000: z = 0.29, 195 se away)
    res = simulate_placement(rd, do, 0.9, 2, microbatches=100_000, rng=rng(5))
    exact = analytic.exact_drop_probability(rd, do, 0.9, 2)
    binom = analytic.drop_probability(48, 3, 2, 0.9, 1e-2)
    se = res.drop_rate_se()
    assert abs(res.drop_rate - exact) <= 4 * se
    assert abs(res.drop_rate - binom) > 10 * se


def test_hierarchical_placement_with_per_replica_availability():
    """Region > rack chains and per-replica availability agree with the exact law."""
    rd = [[("r0", f"r0/k{j % 2}"), ("r1", f"r1/k{j % 3}")] for j in range(8)]
    do = {"r0": 0.05, "r1": 0.02, **{f"r0/k{i}": 0.1 for i in range(2)},
          **{f"r1/k{i}": 0.03 for i in range(3)}}
    avail = [[0.8, 0.9]] * 8
    res = simulate_placement(rd, do, avail, 1, microbatches=400_000, rng=rng(6))
    exact = analytic.exact_drop_probability(rd, do, avail, 1)
    assert abs(res.drop_rate - exact) <= 4 * res.drop_rate_se()


def test_placement_arrays_shapes():
    """A compiled placement pads chains and replica lists."""
    pa = placement_arrays([[("a",), ("a", "a/b")], [()]], {"a": 0.1, "a/b": 0.2, "z": 0.0}, 0.9)
    assert pa.domains == ("a", "a/b")
    assert pa.stage_workers.shape == (2, 2) and pa.worker_chain.shape == (3, 2)
    out = pa.out_stages(np.array([[True, False]]), np.array([[False, False, True]]))
    assert out.tolist() == [2]


def test_chunking_keeps_exact_count():
    """A total that is not a multiple of the chunk is simulated exactly."""
    res = simulate_stylised(8, 1, 0, 0.5, microbatches=1001, rng=rng(7), chunk=100)
    assert res.microbatches == 1001 and int(res.out_histogram.sum()) == 1001


def test_bad_input_messages():
    """Bad input raises ConfigError with the house template."""
    with pytest.raises(ConfigError, match=r"^'stages' must be an integer >= 1: 0$"):
        simulate_stylised(0, 1, 0, 0.9, microbatches=10, rng=rng(0))
    with pytest.raises(ConfigError, match=r"^'skip_budget' must be an integer in \[0, 4\]: 5$"):
        simulate_stylised(4, 1, 5, 0.9, microbatches=10, rng=rng(0))
    with pytest.raises(ConfigError, match=r"^'availability' must be in \[0, 1\]: 1.5$"):
        simulate_stylised(4, 1, 0, 1.5, microbatches=10, rng=rng(0))
    with pytest.raises(ConfigError, match=r"^'microbatches' must be an integer >= 1: 0$"):
        simulate_stylised(4, 1, 0, 0.5, microbatches=0, rng=rng(0))
    with pytest.raises(ConfigError, match=r"^'replicas' must be one value or 4 values \(one per stage\): \[1, 2\]$"):
        simulate_stylised(4, [1, 2], 0, 0.5, microbatches=10, rng=rng(0))


def test_engine_applies_only_to_snapshot_configs():
    """The vector engine answers only zero-time, max_wait-0 configurations."""
    assert vector_engine_applies(PipelineConfig())[0]
    ok, why = vector_engine_applies(PipelineConfig(stage_time=1.0))
    assert not ok and "stage_time" in why
    ok, why = vector_engine_applies(PipelineConfig(max_wait=2.0))
    assert not ok and "max_wait" in why
    ok, why = vector_engine_applies(PipelineConfig(failure_distribution="deterministic"))
    assert not ok and "phase" in why
    assert vector_engine_applies(PipelineConfig(failure_distribution="deterministic",
                                                arrival="poisson"))[0]
    with pytest.raises(ConfigError, match=r"^'engine' must be des for this configuration \(max_wait > 0"):
        vector_pipeline_model(PipelineConfig(max_wait=2.0), Streams(0))


def test_vector_model_keys_are_pipeline_keys():
    """vector_pipeline_model returns a subset of des_pipeline_model's keys."""
    cfg = PipelineConfig(stages=6, replicas=2, skip_budget=1, microbatches=200)
    v = vector_pipeline_model(cfg, Streams(0).replication(0))
    d = des_pipeline_model(cfg, Streams(0).replication(0))
    assert set(v) <= set(d)
    assert {"drop_rate", "mean_quality", "mean_skipped", "skipped_0", "skipped_1"} <= set(v)


def _des_vs_vector(cfg: PipelineConfig, replications: int, seed: int) -> tuple[dict, dict]:
    recs = replicate(des_pipeline_model, cfg, replications=replications, seed=seed)
    est = summarize(recs, ["drop_rate", "mean_skipped", "mean_quality"])
    big = PipelineConfig(**{**cfg.__dict__, "microbatches": 2_000_000})
    vec = vector_pipeline_model(big, Streams(seed).replication(0))
    for key in ("drop_rate", "mean_skipped", "mean_quality"):
        e = est[key]
        assert abs(e.mean - vec[key]) <= 4 * e.se + 1e-12, (key, e, vec[key])
    return est, vec


# Both slow (peer cross-checks of the DES against the vector engine, 10-15 s each): each engine
# is checked against the exact laws in the default suite (here: test_drop_rate_matches_binomial_tail,
# test_mean_quality_matches_exact, test_packed_placement_matches_exact_and_not_binomial,
# test_des_rate_matches_but_bursts_do_not; the DES in test_pipeline.py, and with a non-exponential
# user law in test_extension.py::test_new_law_runs_in_the_pipeline_des).
@pytest.mark.parametrize("extra", [
    pytest.param({}, marks=pytest.mark.slow),  # exponential
    pytest.param({"failure_distribution": "weibull", "failure_shape": 0.7, "arrival": "poisson"},
                 marks=pytest.mark.slow),
])
def test_vector_engine_agrees_with_des(extra):
    """The DES drop rate, skips and quality agree with the vector engine (any up/down law)."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                         domain_outage=0.02, skip_penalty=0.3, mean_downtime=0.5,
                         domain_downtime=0.5, microbatches=1500, **extra)
    est, vec = _des_vs_vector(cfg, 20, 11)
    assert est["drop_rate"].half_width < 0.25 * vec["drop_rate"]


@pytest.mark.slow  # see above; packed placements: test_packed_placement_matches_exact_and_not_binomial
def test_vector_engine_agrees_with_des_on_packed_placement():
    """On a placement whose stages share racks the DES and the vector engine agree."""
    rd, do = packed(4, 3, 2, 0.03)
    cfg = PipelineConfig(stages=12, placement=Placement(rd, do), skip_budget=2,
                         availability=0.8, mean_downtime=0.5, domain_downtime=0.5,
                         microbatches=1500)
    est, vec = _des_vs_vector(cfg, 20, 12)
    exact = analytic.exact_drop_probability(rd, do, 0.8, 2)
    assert abs(vec["drop_rate"] - exact) <= 4 * math.sqrt(exact * (1 - exact) / 2_000_000)


def test_select_engine():
    """auto picks vector only for snapshot configs; vector where it does not apply is an error."""
    assert select_engine(PipelineConfig(), "auto")[0] == "vector"
    assert select_engine(PipelineConfig(stage_time=1.0), "auto")[0] == "des"
    assert select_engine(PipelineConfig(), "des")[0] == "des"
    with pytest.raises(ConfigError, match=r"^'engine' must be des for this configuration \(stage_time"):
        select_engine(PipelineConfig(stage_time=1.0), "vector")
    with pytest.raises(ConfigError, match=r"^'engine' must be one of auto, vector, markov, des, queueing: 'gpu'$"):
        select_engine(PipelineConfig(), "gpu")


def test_des_rate_matches_but_bursts_do_not():
    """With long outages the DES mean drop rate still matches; its spread across runs is far wider."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                         domain_outage=0.02, mean_downtime=20.0, domain_downtime=20.0,
                         microbatches=2000)
    recs = replicate(des_pipeline_model, cfg, replications=30, seed=13)
    est = summarize(recs, ["drop_rate"])["drop_rate"]
    exact = analytic.drop_probability(12, 2, 1, 0.8, 0.02)
    assert abs(est.mean - exact) <= 4 * est.se
    binomial_sd = math.sqrt(exact * (1 - exact) / cfg.microbatches)
    des_sd = est.se * math.sqrt(est.n)
    assert des_sd > 3 * binomial_sd
