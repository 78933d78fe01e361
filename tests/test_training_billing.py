"""Billing and availability: trace replay billed only while up, spot gaps, price series."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.rng import Streams
from sim.runner import replicate
from sim.training import TrainingConfig, training_model
from sim.training.billing import PriceSeries, read_price_series


def _trace(tmp_path, rows):
    p = tmp_path / "trace.csv"
    p.write_text("worker,start,end\n" + "".join(f"{w},{a},{b}\n" for w, a, b in rows))
    return str(p)


def test_trace_replay_bills_a_worker_only_while_up(tmp_path):
    """s0r1 is down [10, 60] in a replayed trace: it is billed wall - 50, the others wall."""
    trace = _trace(tmp_path, [("s0r1", 10.0, 60.0)])
    cfg = TrainingConfig(stages=2, replicas=2, microbatches=4, steps=10, schedule="swarm",
                         failure_trace=trace, price=3.6, hour=3600.0)
    m = training_model(cfg, Streams(0).replication(0))
    wall = m["training_time"]
    assert m["worker_hours"] == pytest.approx((4 * wall - 50.0) / 3600.0, rel=1e-12)
    assert m["cost"] == pytest.approx(3.6 * (4 * wall - 50.0) / 3600.0, rel=1e-12)


def test_spot_availability_counts_replacement_gaps():
    """mtbf 100, replace 25: a slot is present 100/125 = 0.8 of the time (was reported 1.0)."""
    cfg = TrainingConfig(stages=1, replicas=1, microbatches=4, steps=300, schedule="swarm",
                         mtbf=100.0, replace_time=25.0, max_wait=math.inf)  # ~35 preemptions
    recs = replicate(training_model, cfg, replications=6, seed=3)
    a = np.array([r["worker_availability"] for r in recs])
    se = a.std(ddof=1) / math.sqrt(len(a))
    assert abs(a.mean() - 0.8) < 4 * se + 1e-9
    assert abs(a.mean() - 1.0) > 4 * se  # the old value is rejected
    # billing agrees: a slot is billed exactly while present
    for r in recs:
        assert r["worker_hours"] * 3600.0 == pytest.approx(
            r["worker_availability"] * r["training_time"], rel=1e-9)


def test_price_series_is_integrated_over_billed_time(tmp_path):
    """Price 3 until t=100 then 1: two workers over a 270 s run pay 2 (300 + 170) / 3600."""
    p = tmp_path / "prices.csv"
    p.write_text("time,price\n0,3\n100,1\n")
    series = read_price_series(p)
    assert series.integral(150.0) == 350.0 and series.price_at(100.0) == 1.0
    cfg = TrainingConfig(stages=2, replicas=1, steps=10, price_series=series)
    m = training_model(cfg, Streams(0).replication(0))
    assert m["training_time"] == 270.0
    assert m["cost"] == pytest.approx(2 * (300.0 + 170.0) / 3600.0, rel=1e-12)
    with pytest.raises(ConfigError, match="'price' must be unset with a price series"):
        TrainingConfig(price=1.0, price_series=series)
    with pytest.raises(ConfigError, match="'price_series' must be a series starting at time 0"):
        PriceSeries((5.0,), (1.0,))


def test_quality_weighted_samples_per_dollar(tmp_path):
    """With skipping, samples per dollar weighted by quality: quality / delivered of it."""
    trace = _trace(tmp_path, [("s3r0", 2.0, 30.0), ("s3r1", 2.0, 30.0)])  # stage 3 out a while
    cfg = TrainingConfig(stages=8, replicas=2, schedule="swarm", routing="queue",
                         failure_trace=trace, skip_budget=2, skip_penalty=0.1, steps=3,
                         price=1.0)
    from sim.training import TrainingSystem

    system = TrainingSystem(cfg, Streams(18).replication(0))
    m = system.run()
    tr = system.trainer
    kept = [tr.kept[k] for k in range(tr.steps_done)]
    delivered, quality = sum(d for d, _ in kept), sum(q for _, q in kept)
    assert quality < delivered  # some microbatches skipped stage 3
    assert m["quality_samples_per_dollar"] == pytest.approx(
        m["samples_per_dollar"] * quality / delivered, rel=1e-12)
