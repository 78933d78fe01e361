"""Tests of the pipeline DES: validation against the exact laws, timing, failover, errors."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from sim.errors import ConfigError
from sim.pipeline import (
    Pipeline,
    PipelineConfig,
    des_pipeline_model,
    layout_hop_times,
    quality_table,
    run_pipeline,
)
from sim.results import mean_ci, summarize
from sim.rng import Streams
from sim.runner import replicate
from topologies.placement import Placement, from_value, shared_per_stage


def exact_tail(L: int, r: int, s: int, a: float, rho: float) -> float:
    """P(Bin(L, q) > s), written out here independently of sim.analytic."""
    q = rho + (1 - rho) * (1 - a) ** r
    return float(stats.binom.sf(s, L, q))


def estimate(cfg: PipelineConfig, metric: str, *, replications: int = 10, seed: int = 1):
    recs = replicate(des_pipeline_model, cfg, replications=replications, seed=seed)
    assert not any(r["error"] for r in recs), recs[0]["error"]
    return summarize(recs, [metric])[metric]


# --------------------------------------------------------------------------- validation


VALIDATION_POINTS = [
    # (L, r, s, a, rho)
    (8, 1, 0, 0.9, 0.0),      # s = 0, no domain outage: 1 - a**L
    # s >= 1 and rho > 0 (slow: test_vector.py::test_des_rate_matches_but_bursts_do_not checks
    # the DES at L=12, r=2, s=1, a=0.8, rho=0.02 against the tail in the default suite, and
    # test_wrong_model_is_rejected_at_validation_point runs this point)
    pytest.param(12, 2, 1, 0.8, 0.01, marks=pytest.mark.slow),
    pytest.param(20, 3, 2, 0.7, 0.02, marks=pytest.mark.slow),  # s = 2, rho > 0, r = 3
]


@pytest.mark.parametrize("L,r,s,a,rho", VALIDATION_POINTS)
def test_drop_rate_matches_binomial_tail(L, r, s, a, rho):
    """Snapshot model: simulated drop rate = P(Bin(L,q) > s) within 4 SE, interval tight."""
    cfg = PipelineConfig(stages=L, replicas=r, skip_budget=s, availability=a, domain_outage=rho,
                         microbatches=4000, rate=4.0, mean_downtime=1.0, domain_downtime=2.0)
    est = estimate(cfg, "drop_rate")
    exact = exact_tail(L, r, s, a, rho)
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    assert est.half_width < 0.25 * exact, (est, exact)


def test_wrong_model_is_rejected_at_validation_point():
    """A run at the validation point L=12, r=2, s=1, a=0.8, rho=0.01 rejects the tail without
    the shared domain (the test can fail)."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                         domain_outage=0.01, microbatches=4000, rate=2.0)
    # 6 replications (10 before): the wrong tail 14 se away, the exact one 0.9 se
    # (10: 20.5 and 0.35 se)
    est = estimate(cfg, "drop_rate", replications=6)
    wrong = exact_tail(12, 2, 1, 0.8, 0.0)
    assert abs(est.mean - wrong) > 4 * est.se


@pytest.mark.slow
def test_study_point_r3_s1():
    """L=48, a=0.9, rho=1e-3, r=3, s=1: drop 0.424% reproduced within 4 SE (slow)."""
    cfg = PipelineConfig(stages=48, replicas=3, skip_budget=1, availability=0.9,
                         domain_outage=1e-3, microbatches=20000, rate=4.0)
    est = estimate(cfg, "drop_rate", replications=12)
    exact = exact_tail(48, 3, 1, 0.9, 1e-3)
    assert abs(est.mean - exact) <= 4 * est.se
    assert est.half_width < 0.25 * exact


def test_mean_quality_matches_exact():
    """kappa > 0: mean quality of delivered = E[(1-kappa)^K; K<=s] / P(K<=s)."""
    L, r, s, a, kappa = 12, 1, 3, 0.85, 0.3
    cfg = PipelineConfig(stages=L, replicas=r, skip_budget=s, availability=a,
                         skip_penalty=kappa, microbatches=4000, rate=2.0)
    est = estimate(cfg, "mean_quality")
    q = 1 - a
    k = np.arange(s + 1)
    pk = stats.binom.pmf(k, L, q)
    exact = float(((1 - kappa) ** k * pk).sum() / pk.sum())
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    no_skip_quality = 1.0
    assert abs(est.mean - no_skip_quality) > 4 * est.se


def test_skip_distribution_matches_binomial_pmf():
    """Fraction delivered with k skips = P(K = k) for k <= s."""
    L, s, a = 10, 2, 0.85
    cfg = PipelineConfig(stages=L, replicas=1, skip_budget=s, availability=a,
                         microbatches=4000, rate=2.0)
    recs = replicate(des_pipeline_model, cfg, replications=8, seed=3)
    for k in range(s + 1):
        est = mean_ci([r[f"skipped_{k}"] for r in recs])
        exact = stats.binom.pmf(k, L, 1 - a)
        assert abs(est.mean - exact) <= 4 * est.se, (k, est, exact)


def test_shared_domain_placement_is_not_binomial():
    """Two stages in one domain: drop = 1-(1-rho)a^2, not the independent law."""
    rho, a = 0.2, 0.9
    pl = Placement(((("d",),), (("d",),)), {"d": rho})
    cfg = PipelineConfig(stages=2, placement=pl, availability=a, microbatches=4000, rate=2.0)
    est = estimate(cfg, "drop_rate")
    shared = 1 - (1 - rho) * a * a
    independent = 1 - ((1 - rho) * a) ** 2
    assert abs(est.mean - shared) <= 4 * est.se
    assert abs(est.mean - independent) > 4 * est.se


def test_failover_detection_timeout_lowers_goodput():
    """A nonzero detection timeout lowers goodput (back-to-back, compute time)."""
    base = dict(stages=8, replicas=2, availability=0.8, mean_downtime=5.0, skip_budget=1,
                stage_time=1.0, arrival="back_to_back", microbatches=1500)
    g0 = estimate(PipelineConfig(detection_timeout=0.0, **base), "goodput", replications=6)
    g1 = estimate(PipelineConfig(detection_timeout=2.0, **base), "goodput", replications=6)
    assert g0.mean - g1.mean > 4 * math.hypot(g0.se, g1.se), (g0, g1)


# --------------------------------------------------------------------------- timing semantics


def test_deterministic_latency_without_failures():
    """a=1: latency = sum of compute + hops exactly; goodput = 1/latency back to back."""
    cfg = PipelineConfig(stages=4, replicas=1, availability=1.0, stage_time=1.0, latency=0.5,
                         arrival="back_to_back", microbatches=50)
    m = des_pipeline_model(cfg, Streams(0))
    assert m["drop_rate"] == 0.0
    assert m["latency_mean"] == pytest.approx(5.5)
    assert m["latency_p50"] == pytest.approx(5.5)
    assert m["latency_p99"] == pytest.approx(5.5)
    assert m["goodput"] == pytest.approx(1 / 5.5)
    assert m["failovers_per_microbatch"] == 0.0
    assert m["worker_time"] == pytest.approx(4 * 50 * 5.5)


def test_transfer_uses_bandwidth_and_per_hop_latency():
    """Hop time = latency_j + size/bandwidth, one value per hop."""
    cfg = PipelineConfig(stages=3, replicas=1, availability=1.0, latency=(1.0, 2.0),
                         transfer_size=4.0, bandwidth=2.0, microbatches=5, rate=0.1)
    assert cfg.hop_times == (3.0, 4.0)
    m = des_pipeline_model(cfg, Streams(0))
    assert m["latency_mean"] == pytest.approx(7.0)


def test_failures_during_compute_fail_over():
    """Workers failing during compute cause failovers; none when a = 1."""
    base = dict(stages=6, replicas=3, mean_downtime=2.0, stage_time=1.0, microbatches=500,
                skip_budget=6)
    m = des_pipeline_model(PipelineConfig(availability=0.7, **base), Streams(2))
    assert m["failovers_per_microbatch"] > 0.1
    m1 = des_pipeline_model(PipelineConfig(availability=1.0, **base), Streams(2))
    assert m1["failovers_per_microbatch"] == 0.0


def test_failover_charges_recompute_and_detection():
    """Trace: a failure is followed by failover after the detection timeout, recomputed."""
    cfg = PipelineConfig(stages=4, replicas=3, availability=0.6, mean_downtime=3.0,
                         stage_time=1.0, detection_timeout=0.25, skip_budget=4,
                         microbatches=300, trace=True, rate=0.5)
    run = run_pipeline(cfg, Streams(5))
    tr = run.trace
    fails = [i for i, e in enumerate(tr) if e[2] == "fail"]
    assert fails
    assert {e[4] for e in tr} <= {-1, 0, 1, 2}  # replica index within its stage
    for i in fails:
        t, mb, _, j, _ = tr[i]
        nxt = next(e for e in tr[i + 1:] if e[1] == mb)
        assert nxt[0] == pytest.approx(t + 0.25)
        assert nxt[2] in ("failover", "skip", "drop", "wait", "serve")


@pytest.mark.parametrize("stage_time_distribution", ["deterministic", "exponential"])
def test_failovers_counted_for_dropped_microbatches(stage_time_distribution):
    """Failures met before a drop count as failovers; the traced path gives the same records."""
    base = dict(stages=8, replicas=1, availability=0.7, stage_time=0.5, rate=3.0,
                stage_time_distribution=stage_time_distribution, mean_downtime=0.7,
                skip_budget=2, max_wait=0.4, domain_outage=0.1, microbatches=500,
                records=True)
    traced = run_pipeline(PipelineConfig(trace=True, **base), Streams(0))
    fails = np.zeros(500, dtype=int)
    for e in traced.trace:
        if e[2] == "fail":
            fails[e[1]] += 1
    dropped_after_fail = (~traced.records["delivered"]) & (fails > 0)
    assert dropped_after_fail.sum() > 10
    assert np.array_equal(traced.records["failovers"], fails)
    fast = run_pipeline(PipelineConfig(**base), Streams(0))
    for key in traced.records:
        assert np.array_equal(fast.records[key], traced.records[key], equal_nan=key in (
            "arrival", "finish")), key


def test_waiting_for_recovery_lowers_drop_rate():
    """max_wait > 0 lets microbatches wait for a replica: fewer drops, some waits."""
    base = dict(stages=10, replicas=1, availability=0.9, microbatches=3000, rate=1.0)
    d0 = des_pipeline_model(PipelineConfig(**base), Streams(4))
    d1 = des_pipeline_model(PipelineConfig(max_wait=1.0, **base), Streams(4))
    assert d1["drop_rate"] < 0.7 * d0["drop_rate"]
    assert d1["waits_per_microbatch"] > 0
    inf = des_pipeline_model(PipelineConfig(max_wait=math.inf, **base), Streams(4))
    assert inf["drop_rate"] == 0.0


def test_waiting_with_compute_time():
    """Waiting also works for microbatches in flight (compute time, budget spent)."""
    cfg = PipelineConfig(stages=6, replicas=1, availability=0.8, stage_time=0.5,
                         max_wait=math.inf, microbatches=300, rate=1.0)
    m = des_pipeline_model(cfg, Streams(6))
    assert m["drop_rate"] == 0.0
    assert m["waits_per_microbatch"] > 0


def test_poisson_arrivals_span():
    """Poisson arrivals at rate 2: simulated time about N/2."""
    cfg = PipelineConfig(stages=4, replicas=2, microbatches=4000, arrival="poisson", rate=2.0)
    m = des_pipeline_model(cfg, Streams(7))
    assert m["simulated_time"] == pytest.approx(2000, rel=0.08)


def test_random_stage_times_mean():
    """Exponential compute times: mean latency = L * mean stage time (a = 1)."""
    cfg = PipelineConfig(stages=5, replicas=1, availability=1.0, stage_time=2.0,
                         stage_time_distribution="exponential", microbatches=4000, rate=1.0)
    m = des_pipeline_model(cfg, Streams(8))
    se = math.sqrt(5 * 4.0 / 4000)
    assert abs(m["latency_mean"] - 10.0) < 4 * se


def test_records_and_trace():
    """Records fill preallocated arrays consistent with the metrics; trace lists events."""
    cfg = PipelineConfig(stages=6, replicas=1, skip_budget=1, availability=0.85,
                         microbatches=500, records=True, trace=True, skip_penalty=0.5)
    run = run_pipeline(cfg, Streams(9))
    rec = run.records
    assert rec is not None and len(rec["arrival"]) == 500
    assert run.metrics["drop_rate"] == pytest.approx(1 - rec["delivered"].mean())
    assert run.metrics["mean_quality"] == pytest.approx(rec["quality"][rec["delivered"]].mean())
    kinds = {e[2] for e in run.trace}
    assert {"arrive", "serve", "deliver"} <= kinds


def test_trace_path_matches_fast_path():
    """Tracing (per-stage loop) and the O(1) path give identical outcomes."""
    base = dict(stages=10, replicas=1, skip_budget=1, availability=0.85, microbatches=1000)
    a = des_pipeline_model(PipelineConfig(**base), Streams(10))
    b = run_pipeline(PipelineConfig(trace=True, **base), Streams(10)).metrics
    assert a["drop_rate"] == b["drop_rate"] and a["mean_skipped"] == b["mean_skipped"]


def test_same_seed_same_result():
    """A replication is a pure function of (config, seed, replication)."""
    cfg = PipelineConfig(stages=6, replicas=2, stage_time=0.5, availability=0.8,
                         stage_time_distribution="lognormal", microbatches=300)
    assert des_pipeline_model(cfg, Streams(3).replication(1)) == des_pipeline_model(
        cfg, Streams(3).replication(1))
    assert des_pipeline_model(cfg, Streams(3).replication(1)) != des_pipeline_model(
        cfg, Streams(3).replication(2))


def test_memory_does_not_grow_with_microbatches():
    """Records off: peak memory of 20000 microbatches is about that of 2000."""

    def peak(n: int) -> int:
        cfg = PipelineConfig(stages=4, replicas=1, availability=0.9, microbatches=n)
        tracemalloc.start()
        des_pipeline_model(cfg, Streams(0))
        _, p = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return p

    small, big = peak(2000), peak(20000)
    assert big < small + 200_000


def test_per_stage_replicas_and_workers():
    """Replicas may differ per stage; workers and worker_time count them."""
    cfg = PipelineConfig(stages=3, replicas=(1, 2, 3), microbatches=10)
    assert cfg.replicas == (1, 2, 3) and cfg.workers == 6
    m = des_pipeline_model(cfg, Streams(0))
    assert m["workers"] == 6 and m["worker_time"] == pytest.approx(6 * m["simulated_time"])


def test_quality_tables():
    """Multiplicative, additive and user-supplied penalties."""
    assert quality_table(3, 0.5) == (1.0, 0.5, 0.25, 0.125)
    assert quality_table(3, 0.4, "additive") == pytest.approx((1.0, 0.6, 0.2, 0.0))
    assert quality_table(2, 0.0, _half_if_any) == (1.0, 0.5, 0.5)


def _half_if_any(k: int) -> float:
    return 1.0 if k == 0 else 0.5


def test_placements_normalise():
    """Placements: the study's default, pairs in either value form; no duck typing."""
    pl = shared_per_stage((2, 1), 0.1)
    assert pl.replica_domains == ((("stage0",), ("stage0",)), (("stage1",),))
    assert pl.domain_outage == {"stage0": 0.1, "stage1": 0.1}

    rd = [[("r0", "r0/k0")], [("r0", "r0/k1")]]
    outage = {"r0": 0.0, "r0/k0": 0.1}
    p2 = from_value((rd, outage))
    assert p2.replicas == (1, 1)
    assert from_value(p2.value()) == p2
    cfg = PipelineConfig(stages=2, placement=(rd, outage), microbatches=20)
    assert cfg.replicas == (1, 1)
    assert cfg.placement == p2.value() and cfg.domain_placement == p2
    assert hash(cfg) == hash(PipelineConfig(stages=2, placement=p2, microbatches=20))
    assert des_pipeline_model(cfg, Streams(0))["microbatches"] == 20

    class Obj:
        replica_domains = rd
        domain_outage = outage

    with pytest.raises(ConfigError) as info:
        PipelineConfig(stages=2, placement=Obj())
    assert str(info.value).startswith(
        "'placement' must be a Placement or a (replica_domains, domain_outage) pair: ")


def test_layout_hop_times():
    """Hop times average latency + size/bandwidth over replica pairs of a layout."""
    import networkx as nx

    G = nx.complete_graph(3)
    nx.set_edge_attributes(G, 1.0, "latency")
    nx.set_edge_attributes(G, 2.0, "bandwidth")
    assert layout_hop_times(G, [[0], [1, 0]], transfer_size=2.0) == (1.0,)


def test_layout_hop_times_through_switches():
    """A tree's hosts are linked only through their switches: a hop between racks takes the
    route's latencies added and its least bandwidth (host link 0.05 + uplink 0.5, twice each
    way; 100 B/s at the host links: 1.1 + 50 / 100 = 1.6), one inside a rack 0.1 + 0.5. Before,
    every such placement was refused ('no link 0-4')."""
    import topologies

    G = topologies.build("tree:racks=2,hosts=4")
    assert layout_hop_times(G, [[0], [4]], transfer_size=50.0) == pytest.approx((1.6,))
    assert layout_hop_times(G, [[0], [1]], transfer_size=50.0) == pytest.approx((0.6,))
    assert layout_hop_times(G, [[0], [1, 4]]) == pytest.approx(((0.1 + 1.1) / 2,))
    G.remove_edge("core", "rack1")
    with pytest.raises(ConfigError, match="no route from 0 to 4"):
        layout_hop_times(G, [[0], [4]])


def test_pipeline_builds_before_running():
    """Pipeline wires live sets at start; the out count matches the worker states."""
    p = Pipeline(PipelineConfig(stages=5, replicas=1, availability=0.5, microbatches=5),
                 Streams(1))
    p.run()
    assert p.n_out == sum(1 for j in range(5) if not any(
        p.workers[i].up for i in p.stage_workers[j]))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs,message", [
    (dict(stages=0), "'stages' must be an integer >= 1: 0"),
    (dict(replicas=0), "'replicas' must be an integer >= 1: 0"),
    (dict(stages=3, replicas=(1, 2)), "'replicas' must be one value or 3 values (one per stage): (1, 2)"),
    (dict(skip_budget=-1), "'skip_budget' must be an integer in [0, 48]: -1"),
    (dict(stages=4, skip_budget=5), "'skip_budget' must be an integer in [0, 4]: 5"),
    (dict(availability=1.5), "'availability' must be in [0, 1]: 1.5"),
    (dict(domain_outage=-0.1), "'domain_outage' must be in [0, 1]: -0.1"),
    (dict(skip_penalty=2), "'skip_penalty' must be in [0, 1]: 2"),
    (dict(stage_time=-1.0), "'stage_time' must be >= 0: -1.0"),
    (dict(latency=-0.5), "'latency' must be >= 0: -0.5"),
    (dict(mean_downtime=0), "'mean_downtime' must be > 0: 0"),
    (dict(microbatches=0), "'microbatches' must be an integer >= 1: 0"),
    (dict(rate=0), "'rate' must be > 0: 0"),
    (dict(max_wait=-1), "'max_wait' must be >= 0: -1"),
    (dict(max_wait=math.inf, availability=0.0),
     "'max_wait' must be finite when a stage never recovers (availability 0 or a domain "
     "outage of 1): inf"),
    (dict(stages=2, max_wait=math.inf, domain_outage=1.0),
     "'max_wait' must be finite when a stage never recovers (availability 0 or a domain "
     "outage of 1): inf"),
    (dict(detection_timeout=-2), "'detection_timeout' must be >= 0: -2"),
    (dict(arrival="burst"), "'arrival' must be one of fixed, poisson, back_to_back: 'burst'"),
    (dict(penalty="linear"), "'penalty' must be one of multiplicative, additive: 'linear'"),
    (dict(arrival="back_to_back"),
     "'arrival' must be fixed or poisson when stage_time, latency and transfer_size are all 0: "
     "'back_to_back'"),
    (dict(stages=3, placement=Placement(((("d",),),), {})),
     "'placement' must be 3 stages (one per stage): 1"),
])
def test_bad_input_messages(kwargs, message):
    """Bad config values raise ConfigError with the exact one-line message."""
    with pytest.raises(ConfigError) as info:
        PipelineConfig(**kwargs)
    assert str(info.value) == message


def test_infinite_wait_allowed_where_every_stage_recovers():
    """max_wait = inf runs to the end when stages recover, or when the budget skips them all."""
    m = des_pipeline_model(PipelineConfig(stages=3, replicas=1, availability=0.5, max_wait=math.inf,
                                      microbatches=50), Streams(0))
    assert m["drop_rate"] == 0.0 and m["microbatches"] == 50
    m = des_pipeline_model(PipelineConfig(stages=3, replicas=1, availability=0.0, max_wait=math.inf,
                                      skip_budget=3, microbatches=5), Streams(0))
    assert m["mean_skipped"] == 3.0


def test_zero_times_are_valid():
    """Zero compute and transfer time is the study's snapshot model (valid)."""
    cfg = PipelineConfig(stage_time=0.0, latency=0.0)
    assert cfg.instant


def test_packed_placement_matches_exact_conditional_formula():
    """Packed layout (stages share racks): drop = exact conditional law, not the binomial law."""
    import topologies
    from sim import analytic
    from sim.pipeline import predicted_drop_rate
    from topologies.placement import place

    layout = topologies.build("datacenter:regions=1,racks=2,hosts=4,rack_outage=0.05,"
                              "region_outage=0")
    pl = place(layout, 4, 2, "packed")
    cfg = PipelineConfig(stages=4, placement=pl, availability=0.8, microbatches=4000, rate=2.0)
    exact = predicted_drop_rate(cfg)
    assert exact == pytest.approx(analytic.exact_drop_probability(
        [list(s) for s in pl.replica_domains], pl.domain_outage, 0.8, 0))
    binomial = analytic.drop_probability(4, 2, 0, 0.8, 0.05)
    # 6 replications (10 before): z = 0.84, the binomial law 9.5 se away (10: z = 0.82, 16 se)
    est = estimate(cfg, "drop_rate", replications=6)
    assert abs(est.mean - exact) <= 4 * est.se, (est, exact)
    assert not est.contains(binomial) and abs(est.mean - binomial) > 4 * est.se


@pytest.mark.parametrize("kwargs", [
    dict(stages=24, replicas=2, availability=0.9, stage_time=1.0, rate=1.0, mean_downtime=20.0,
         skip_budget=2, detection_timeout=0.5),
    dict(stages=12, replicas=2, availability=0.8, stage_time=1.0, latency=0.1, rate=1.0,
         mean_downtime=3.0, skip_budget=1, detection_timeout=0.5, max_wait=1.0, domain_outage=0.05),
    dict(stages=10, replicas=2, availability=0.7, stage_time=0.5,
         stage_time_distribution="exponential", arrival="back_to_back", mean_downtime=2.0,
         skip_budget=3, detection_timeout=0.3, max_wait=0.5, failure_distribution="weibull"),
    dict(stages=10, replicas=2, availability=0.7, stage_time=0.5,
         stage_time_distribution="exponential", rate=2.0, mean_downtime=2.0,
         skip_budget=3, detection_timeout=0.3),  # random compute times, several in flight
])
def test_lookahead_gives_identical_results(kwargs):
    """Crossing several stages in one timeout (lookahead) changes nothing but speed."""
    cfg = PipelineConfig(microbatches=600, records=True, **kwargs)
    runs = []
    for lookahead in (False, True):
        p = Pipeline(cfg, Streams(11))
        p.lookahead = lookahead
        runs.append(p.run())
    a, b = runs
    assert a.metrics.keys() == b.metrics.keys()
    for key in a.metrics:
        assert a.metrics[key] == pytest.approx(b.metrics[key], rel=1e-9, abs=1e-12), key
    assert np.array_equal(a.records["skipped"], b.records["skipped"])
    assert np.allclose(a.records["finish"], b.records["finish"], rtol=1e-12)
    assert a.metrics["failovers_per_microbatch"] > 0


def test_latency_quantiles_from_histogram_match_records():
    """Constant-memory latency quantiles agree with exact ones from records within 0.5%."""
    base = dict(stages=5, replicas=2, availability=0.8, stage_time=1.0,
                stage_time_distribution="exponential", microbatches=3000, skip_budget=5)
    hist = des_pipeline_model(PipelineConfig(**base), Streams(12))
    exact = des_pipeline_model(PipelineConfig(records=True, **base), Streams(12))
    assert hist["latency_mean"] == pytest.approx(exact["latency_mean"], rel=1e-9)
    for key in ("latency_p50", "latency_p99"):
        assert hist[key] == pytest.approx(exact[key], rel=5e-3), key


def test_unequal_replicas_prediction_and_simulation():
    """r_j = (1, 2, 3): exact drop = 1 - prod(1 - q_j), matched by simulation."""
    from sim.pipeline import predicted_drop_rate

    a, rho = 0.8, 0.02
    cfg = PipelineConfig(stages=3, replicas=(1, 2, 3), availability=a, domain_outage=rho,
                         microbatches=4000, rate=4.0)
    exact = 1 - np.prod([1 - (rho + (1 - rho) * (1 - a) ** r) for r in (1, 2, 3)])
    assert predicted_drop_rate(cfg) == pytest.approx(exact, rel=1e-12)
    est = estimate(cfg, "drop_rate")
    assert abs(est.mean - exact) <= 4 * est.se


def test_additive_penalty_mean_quality():
    """Additive penalty: mean quality = E[max(0, 1 - kappa K); K<=s] / P(K<=s)."""
    L, s, a, kappa = 10, 3, 0.85, 0.3
    cfg = PipelineConfig(stages=L, replicas=1, skip_budget=s, availability=a, skip_penalty=kappa,
                         penalty="additive", microbatches=3000, rate=4.0)
    est = estimate(cfg, "mean_quality", replications=8)
    k = np.arange(s + 1)
    pk = stats.binom.pmf(k, L, 1 - a)
    exact = float((np.maximum(0, 1 - kappa * k) * pk).sum() / pk.sum())
    assert abs(est.mean - exact) <= 4 * est.se


def test_config_with_placement_is_stored_as_values_and_hashes_alike():
    """A placement is stored as values: a config built again from them hashes the same."""
    import topologies
    from sim.runner import config_hash

    layout = topologies.build("datacenter:regions=2,racks=2,hosts=4")
    cfg = PipelineConfig(stages=4, placement=topologies.place(layout, 4, 2, "packed"))
    assert isinstance(cfg.placement, tuple)
    again = PipelineConfig(stages=4, placement=cfg.placement)
    assert again == cfg and config_hash(again, 1) == config_hash(cfg, 1)


@pytest.mark.slow  # a fresh interpreter (~3 s); the value form is checked in the test above, and
# config_hash across processes by test_gossip_config.py::test_config_hash_is_the_same_in_two_processes
def test_config_with_placement_hashes_alike_in_two_processes():
    """A placement is stored as values, so the config's hash is the same in another process."""
    import os
    import subprocess
    import sys

    import topologies
    from sim.runner import config_hash

    make = ("topologies.place(topologies.build('datacenter:regions=2,racks=2,hosts=4'), 4, 2, "
            "'packed')")
    code = ("import topologies\nfrom sim.pipeline import PipelineConfig\n"
            "from sim.runner import config_hash\n"
            f"print(config_hash(PipelineConfig(stages=4, placement={make}), 1))\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env=env).stdout.strip()
    layout = topologies.build("datacenter:regions=2,racks=2,hosts=4")
    cfg = PipelineConfig(stages=4, placement=topologies.place(layout, 4, 2, "packed"))
    assert isinstance(cfg.placement, tuple)
    assert config_hash(cfg, 1) == other


def test_what_a_config_fixes_never_builds_the_studys_placement(monkeypatch):
    """random_sources / fixed_metrics / failures read the study's one outage, not a placement
    of every replica (a billion replicas once took 24 GB here before the engine started)."""
    import sim.pipeline.config as config_module

    def refuse(*_a, **_k):
        raise AssertionError("the study's placement was built")

    cfg = PipelineConfig(stages=4, replicas=10**9, domain_outage=0.01)
    monkeypatch.setattr(config_module, "shared_per_stage", refuse)
    assert cfg.failures and "domain outages" in cfg.random_sources()
    assert "drop_rate" not in cfg.fixed_metrics()
    calm = PipelineConfig(stages=4, replicas=10**9, availability=1.0, domain_outage=0.0)
    assert not calm.failures and calm.random_sources() == ()
    assert "drop_rate" in calm.fixed_metrics()
