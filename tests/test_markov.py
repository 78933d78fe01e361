"""Exact two-state Markov sampling at arrival times, against its kernel and the pipeline DES."""

from __future__ import annotations

import numpy as np
import pytest

from sim import engines
from sim.markov import sample_states
from sim.pipeline import PipelineConfig, markov_run, run_pipeline
from sim.rng import Streams


def _lag1(up: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = up[:-1], up[1:]
    n_up = x.sum(0)
    n_dn = (~x).sum(0)
    return (y & x).sum(0) / n_up, (y & ~x).sum(0) / n_dn, n_up, n_dn


def test_kernel_and_stationary_law():
    """Up fraction is a; P(up|up) and P(up|down) over a gap g are the exact kernel, at 4 sigma."""
    a = np.array([0.6, 0.9, 0.3, 0.95])
    d = np.array([1.0, 5.0, 0.2, 40.0])
    g = 0.7
    up = sample_states(a, d, np.full(100_000, g), rng=np.random.default_rng(3))
    lam = np.exp(-g / (a * d))
    puu, pud, n_up, n_dn = _lag1(up)
    exact_uu, exact_ud = a + (1 - a) * lam, a * (1 - lam)
    assert np.all(np.abs(puu - exact_uu) <= 4 * np.sqrt(exact_uu * (1 - exact_uu) / n_up))
    assert np.all(np.abs(pud - exact_ud) <= 4 * np.sqrt(exact_ud * (1 - exact_ud) / n_dn))
    # a memoryless snapshot (lam = 0) would give P(up|up) = a: rejected for the slow components
    assert np.all(np.abs(puu - a)[[1, 3]] > 10 * np.sqrt(a * (1 - a) / n_up)[[1, 3]])
    # the stationary fraction (long-run correlation makes the se larger: widen by the chain's factor)
    se = np.sqrt(a * (1 - a) / up.shape[0] * (1 + lam) / (1 - lam))
    assert np.all(np.abs(up.mean(0) - a) <= 4 * se)


def test_blocks_carry_the_state():
    """Sampling in blocks with the carried state has the same lag-1 law across the block edge."""
    # 20000 independent components of one law, each sampled in two blocks of one row (one
    # call per block, not 20000 calls of one component each: the same sample, 100x faster)
    n = 20_000
    a, d = np.full(n, 0.5), np.full(n, 10.0)
    rng = np.random.default_rng(5)
    x = sample_states(a, d, np.ones(1), rng=rng)[-1]
    y = sample_states(a, d, np.ones(1), rng=rng, start=x)[0]
    lam = np.exp(-1 / 5.0)
    p = (y & x).sum() / x.sum()
    exact = 0.5 + 0.5 * lam
    se = np.sqrt(exact * (1 - exact) / x.sum())
    assert abs(p - exact) <= 4 * se, (p, exact, se)
    assert abs(p - 0.5) > 10 * se  # a block that forgot the state would start stationary: P = a


@pytest.mark.parametrize("placement", [pytest.param(None, marks=pytest.mark.slow), "shared-racks"])
def test_snapshot_pipeline_matches_the_des_with_time_correlation(placement):
    """Drop rate and back-to-back drop probability equal the DES's (a = 0.6, downtime 1, shared domains)."""
    kw = dict(stages=12, replicas=2, skip_budget=1, availability=0.6, mean_downtime=1.0,
              domain_downtime=3.0, microbatches=3000, rate=2.0, records=True)
    if placement:
        # stages 0-3, 4-7, 8-11 share a rack each, every rack out 5 % of the time
        chains = tuple(tuple((f"rack{j // 4}",) for _ in range(2)) for j in range(12))
        kw["placement"] = (chains, {"rack0": 0.05, "rack1": 0.05, "rack2": 0.05})
    else:
        kw["domain_outage"] = 0.02
    cfg = PipelineConfig(**kw)
    # 8 replications each (12 before; the DES takes all the time) at shared-racks: z = 2.15 for
    # the drop rate, 1.81 for the joint, the memoryless joint 15.5 se below
    # (12: z = 1.11 and 0.84, memoryless 13.8 se below); the slow point keeps 12
    reps = 8 if placement else 12
    des = []
    for k in range(reps):
        rec = run_pipeline(cfg, Streams(11).replication(k)).records
        des.append(~rec["delivered"])
    fast = [~markov_run(cfg, Streams(13).replication(k)).records["delivered"]
            for k in range(reps)]

    def stats(runs):
        p = np.array([r.mean() for r in runs])
        p2 = np.array([(r[1:] & r[:-1]).mean() for r in runs])
        return p.mean(), p.std(ddof=1) / np.sqrt(len(p)), p2.mean(), p2.std(ddof=1) / np.sqrt(len(p2))

    m1, s1, j1, t1 = stats(des)
    m2, s2, j2, t2 = stats(fast)
    assert abs(m1 - m2) <= 4 * np.hypot(s1, s2), (m1, m2)
    assert abs(j1 - j2) <= 4 * np.hypot(t1, t2), (j1, j2)
    # the memoryless snapshot would put the joint at p^2: far below what both engines see
    assert j2 - m2 ** 2 > 8 * t2


def test_markov_engine_metrics_match_the_des():
    """Poisson arrivals: drop rate, skips and goodput agree with the DES at 4 sigma; timing is exact."""
    cfg = PipelineConfig(stages=10, replicas=2, skip_budget=2, availability=0.7, mean_downtime=2.0,
                         domain_outage=0.03, domain_downtime=4.0, skip_penalty=0.2,
                         arrival="poisson", rate=1.5, microbatches=4000)
    sel = engines.select("pipeline", cfg, "markov")
    des = [run_pipeline(cfg, Streams(21).replication(k)).metrics for k in range(10)]
    fast = [sel.engine.run(cfg, Streams(22).replication(k)) for k in range(10)]
    for key in ("drop_rate", "mean_skipped", "quality_mass", "goodput", "skipped_0"):
        a = np.array([m[key] for m in des])
        b = np.array([m[key] for m in fast])
        se = np.hypot(a.std(ddof=1), b.std(ddof=1)) / np.sqrt(len(a))
        assert abs(a.mean() - b.mean()) <= 4 * se, (key, a.mean(), b.mean(), se)
    assert {m["stage_crossings"] for m in fast} == {float(10 * 4000)}
    assert all(m["latency_mean"] == 0.0 and m["failovers_per_microbatch"] == 0.0 for m in fast)


def test_markov_engine_refuses_what_it_does_not_answer():
    """Timed crossings, waiting and non-exponential laws are refused with the reason."""
    assert not engines.select("pipeline", PipelineConfig(stages=4, microbatches=10),
                              "auto").name == "markov"  # the vector engine is faster there
    for kw, reason in [({"stage_time": 1.0}, "crossing takes time"),
                       ({"max_wait": 1.0}, "max_wait > 0"),
                       ({"failure_distribution": "weibull", "failure_shape": 0.7},
                        "not exponential")]:
        verdict = engines.engines("pipeline")[1].applies(PipelineConfig(stages=4, **kw))
        assert not verdict and reason in verdict.reason
