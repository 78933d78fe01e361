"""Runs that cannot progress stop and say why (sim.training.stall)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sim.rng import Streams
from sim.traces import TraceReplay
from sim.training import TrainingConfig, training_model
from sim.training.stall import interval_time, nominal_step_time, stall_limit

#: The issue's example: 48 x 2 workers on aws-p3, tiled and looped, a restart model whose
#: restart waits for every stage to have a live replica (it never has, on this replay).
LIVELOCK = TrainingConfig(
    stages=48, replicas=2, skip_budget=16, skip_penalty=0.1, schedule="swarm",
    failure_trace=TraceReplay("aws-p3", policy="recent+tile", loop=True), price=3.06, steps=4,
    checkpoint_every=2, checkpoint_cost=1, restart_cost=1)


def _run(cfg, seed=0):
    return training_model(cfg, Streams(seed).replication(0))


def test_livelock_example_says_why_at_max_time():
    """With max_time 3000 the run ends with no step and a one-line reason naming the wait."""
    m = _run(dataclasses.replace(LIVELOCK, max_time=3000.0))
    assert m["finished"] == 0 and m["steps_done"] == 0
    why = m["stall_reason"]
    assert "\n" not in why
    assert why.startswith("no step can finish: a restart waits for a live replica at every "
                          "stage at once")
    assert "--strategy checkpoint-restart" in why


def test_livelock_without_max_time_stops_at_the_stall_limit():
    """Without max_time the run stops after stall_limit time without progress, not never."""
    m = _run(dataclasses.replace(LIVELOCK, stall_limit=20_000.0))
    assert m["finished"] == 0 and math.isnan(m["training_time"])
    assert "a restart waits for a live replica" in m["stall_reason"]
    # cost and throughput are over the time run: 96 workers billed over ~20000 s
    assert m["worker_hours"] > 0


def test_restarts_faster_than_an_interval_are_named_with_their_rate():
    """One worker preempted every 5 s on average, a checkpoint interval of 48 s: the reason
    gives the mean time between restarts (near the mtbf) and the interval."""
    cfg = TrainingConfig(stages=1, replicas=1, microbatches=8, steps=4, schedule="swarm",
                         mtbf=5.0, checkpoint_every=2, checkpoint_cost=0.0, restart_cost=0.0,
                         stall_limit=2000.0)
    m = _run(cfg)
    why = m["stall_reason"]
    assert why.startswith("no step can finish: a restart is needed every ")
    mean = float(why.split("every ")[1].split(" ")[0])
    assert 4.0 < mean < 6.0  # ~400 restarts: sd 0.25
    assert "a checkpoint interval takes 48 s without failures (2 steps of 24" in why


def test_default_limit_is_a_thousand_failure_free_intervals():
    """The limit is 1000 (K t + C + R), t the failure-free step time ((m+L-1)(tf+tb) here)."""
    cfg = TrainingConfig(stages=4, replicas=1, microbatches=8, steps=20, schedule="gpipe",
                         mtbf=800.0, checkpoint_every=4, checkpoint_cost=5.0, restart_cost=10.0)
    assert nominal_step_time(cfg) == 33.0
    assert interval_time(cfg)[0] == 4 * 33.0 + 5.0
    assert stall_limit(cfg) == 1000 * (4 * 33.0 + 5.0 + 10.0)
    assert stall_limit(dataclasses.replace(cfg, stall_limit=math.inf)) == math.inf


def test_watchdog_changes_no_number_of_a_run_that_progresses():
    """A run that finishes gives the same metrics with the watchdog on and off."""
    cfg = TrainingConfig(stages=4, replicas=2, steps=20, mtbf=800.0, replace_time=30.0,
                         checkpoint_every=4, checkpoint_cost=5.0, restart_cost=10.0, price=3.0)
    on = _run(cfg, 16)
    off = _run(dataclasses.replace(cfg, stall_limit=math.inf), 16)
    assert on == off and on["finished"] == 1 and "stall_reason" not in on


def test_stall_limit_must_be_positive():
    """A non-positive stall limit is refused naming the field."""
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="'stall_limit' must be"):
        TrainingConfig(stall_limit=0.0)


def test_a_step_ending_at_the_stall_limit_is_progress(tmp_path):
    """One replica, 3 s steps, ``max_wait`` inf, stall limit 7: steps end at 3 and 6; the
    worker is down over [7, 10) (step 3's pass lost after 1 s, the microbatch waits), the
    pass runs again over [10, 13) and step 3 ends at 13 = 6 + 7, the limit's very end. The
    watchdog looks after the rest of its instant (as ``max_time`` does): the step is
    progress, the run finishes at 13, not stalled. It used to look first (its timer was
    scheduled at 7, the pass's at 10): the run finished at 13 and said it had stalled ('no
    progress in the last 0 s')."""
    p = tmp_path / "down.csv"
    p.write_text("worker,start,end\ns0r0,7,10\n")
    out = training_model(TrainingConfig(stages=1, replicas=1, microbatches=1, steps=3,
                                        forward_time=3.0, backward_ratio=0.0,
                                        failure_trace=str(p), max_wait=math.inf,
                                        stall_limit=7.0), Streams(0).replication(0))
    assert out["finished"] == 1.0 and out["training_time"] == 13.0
    assert out["lost_lost_pass"] == 1.0
    assert "stall_reason" not in out
