"""The training DES's behaviour: failover, recompute, download, skip, wait, restart, spot, routing."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, TrainingSystem, read_speeds, training_model
from sim.training.routing import LeastLoaded, RoundRobin, Uniforms, Weighted


def _run(cfg, seed=0):
    s = TrainingSystem(cfg, Streams(seed).replication(0))
    return s, s.run()


def _trace(tmp_path, rows):
    p = tmp_path / "trace.csv"
    p.write_text("worker,start,end\n" + "".join(f"{w},{a},{b}\n" for w, a, b in rows))
    return str(p)


def test_same_seed_same_numbers_and_streams_independent():
    """A replication is a function of its seed; another seed draws other failures."""
    cfg = TrainingConfig(stages=4, replicas=2, microbatches=8, steps=5, schedule="swarm",
                         routing="weighted", availability=0.9, mean_downtime=5.0,
                         detection_timeout=0.2, skip_budget=1)
    a, b = training_model(cfg, Streams(3)), training_model(cfg, Streams(3))
    assert a == b
    assert training_model(cfg, Streams(4)) != a


def test_bubble_fraction_is_the_idle_share_of_the_live_workers(tmp_path):
    """One stage, 2 replicas, 4 forward-only passes of 1 s, s0r1 down [0, 1) then fetching its
    weights (2 B at 2 B/s) [1, 2): round-robin routes the 4 passes at time 0 to the one live
    replica, s0r0, which serves them [0, 4] (the step's compute phase). Busy 4 of the 2 x 4 worker-time of the compute
    phase, of which 2 is s0r1's not live: the bubble is 1 - 4 / (8 - 2) = 1/3 (s0r1 live and
    idle [2, 4]), not the 1 - 4 / 8 = 1/2 that counted s0r1's down time as idle. Without the
    failure the one stage has no bubble: both replicas serve 2 passes [0, 2]."""
    trace = _trace(tmp_path, [("s0r1", 0.0, 1.0)])
    kw = dict(stages=1, replicas=2, microbatches=4, steps=1, backward_ratio=0.0,
              forward_time=1.0, param_size=2.0, bandwidth=2.0)
    s, m = _run(TrainingConfig(**kw, failure_trace=trace))
    assert [r.busy_time for r in s.flow.replicas] == [4.0, 0.0]
    assert s.trainer.compute_time == 4.0 and m["lost_download"] == 1.0
    assert m["bubble_fraction"] == pytest.approx(1 / 3, abs=1e-15)
    assert s.trainer.compute_down == 2.0
    p, plain = _run(TrainingConfig(**kw))
    assert plain["bubble_fraction"] == 0.0 and p.trainer.compute_time == 2.0


@pytest.mark.parametrize("sync", ["allreduce", "diloco:every=48"])
def test_bubble_fraction_without_a_bubble_is_zero_not_a_rounding_residue(sync):
    """(user trial 15) One stage, three replicas, no failure: no bubble, but ``1 - busy /
    live`` rounded to -4.1e-14 (data parallel) and -1.3e-15 (DiLoCo) after 96 steps, and an
    experiment declaring ``bubble_fraction`` a rate or NONNEGATIVE refused its summary. A
    real idle share is untouched (1/3 above); a residue is 0."""
    cfg = TrainingConfig(stages=1, replicas=3, microbatches=3, steps=96, forward_time=0.3,
                         param_size=1e9, bandwidth=1e8, latency=0.1, sync=sync)
    m = training_model(cfg, Streams(0).replication(0))
    assert m["bubble_fraction"] == 0.0


def test_live_idle_share_keeps_a_share_below_zero_that_is_no_rounding():
    """Only a residue within IDLE_RESIDUE is read as 0; a busy time beyond the live time by
    more (a bug to show) stays negative, and no live time is NaN."""
    from sim.training.flow import IDLE_RESIDUE, live_idle_share

    assert live_idle_share(1.0 + 1e-12, 1.0, 0.0) == 0.0
    assert live_idle_share(1.0 + 10 * IDLE_RESIDUE, 1.0, 0.0) < 0.0
    assert live_idle_share(1.0, 4.0, 1.0) == pytest.approx(2 / 3, abs=1e-15)
    assert math.isnan(live_idle_share(0.0, 1.0, 1.0))


@pytest.mark.parametrize("schedule", ["gpipe", "async"])
def test_bubble_fraction_is_nan_when_no_worker_is_ever_live(tmp_path, schedule):
    """The one replica is down over the whole run (its 2 micro-batches wait 2 at the out
    stage, then are dropped): no live worker-time, so no idle share of it: NaN (as the
    Gantt's None). It raised ZeroDivisionError (busy 0 over 0 live worker-time), which
    failed the replication; before the live share it was 1."""
    trace = _trace(tmp_path, [("s0r0", 0.0, 100.0)])
    s, m = _run(TrainingConfig(stages=1, replicas=1, microbatches=2, steps=2, forward_time=1.0,
                               max_wait=2.0, max_time=50.0, schedule=schedule,
                               failure_trace=trace))
    assert m["drop_rate"] == 1.0 and m["training_time"] > 0
    assert math.isnan(m["bubble_fraction"])


def test_compute_utilisation_leaves_out_a_workers_time_not_live(tmp_path):
    """(user trial 5) compute_utilisation credited every worker with the whole of each step's
    compute phase, a down one too: on the run above s0r1 (down [0, 1), fetching its weights
    [1, 2)) was 'computing' [0, 4] like s0r0, and with frequent preemptions a one-stage run
    reported 0.846 where its workers were busy 0.578 of the time (no bubble). A worker's
    compute phases count only while it is live: s0r0 4 of the run's wall, s0r1 2 (the
    DownClock's compute_down, 2, taken from its own share); without failures unchanged."""
    trace = _trace(tmp_path, [("s0r1", 0.0, 1.0)])
    kw = dict(stages=1, replicas=2, microbatches=4, steps=1, backward_ratio=0.0,
              forward_time=1.0, param_size=2.0, bandwidth=2.0)
    s = TrainingSystem(TrainingConfig(**kw, failure_trace=trace), Streams(0).replication(0))
    s.figures = True  # as training_model asks
    m = s.run()
    wall = m["training_time"]
    assert s.trainer.compute_time == 4.0 and s.trainer.compute_down == 2.0
    assert (m["compute_utilisation_min"], m["compute_utilisation_max"]) == (2.0 / wall, 4.0 / wall)
    assert m["compute_utilisation"] == pytest.approx(3.0 / wall, rel=1e-15)
    plain = training_model(TrainingConfig(**kw), Streams(0).replication(0))
    assert plain["compute_utilisation"] == plain["compute_utilisation_min"] == 2.0 / plain[
        "training_time"]
    # frequent preemptions on one stage (no bubble): the live workers' compute is their busy time
    spot = training_model(TrainingConfig(stages=1, replicas=2, microbatches=4, steps=100,
                                         backward_ratio=0.0, forward_time=1.0, param_size=1e9,
                                         bandwidth=1e9, mtbf=50.0, replace_time=200.0),
                          Streams(3).replication(0))
    assert spot["preemptions"] >= 1 and spot["bubble_fraction"] == 0.0
    assert spot["compute_utilisation"] == pytest.approx(spot["utilisation"], rel=1e-12)
    assert spot["compute_utilisation_min"] < spot["compute_utilisation_max"]
    # DiLoCo, 2 groups of 2 pipelines, s0r1 (group 0) not live [0, 2): group 0 goes on with
    # s0r0; its compute phases are 10 s (the first 4 s, s0r0 alone), group 1's 8 s, in a
    # 15 s run. Each worker's own: (2 x 10 - 2 + 2 x 8) / (4 x 15), not (2 x 10 + 2 x 8) / 60;
    # and goodput (merged compute of the live workers) no more than it
    dl = training_model(TrainingConfig(**dict(kw, replicas=4, microbatches=8, steps=4),
                                       sync="diloco:every=2,groups=2", failure_trace=trace),
                        Streams(0).replication(0))
    assert dl["training_time"] == 15.0
    assert dl["compute_utilisation"] == pytest.approx(34.0 / 60.0, rel=1e-15)
    assert (dl["compute_utilisation_min"], dl["compute_utilisation_max"]) == (8.0 / 15.0,
                                                                              10.0 / 15.0)
    assert dl["goodput_fraction"] == pytest.approx(34.0 / 60.0, rel=1e-15)


def test_lost_backward_pass_recomputes_from_last_holder(tmp_path):
    """A replica failing mid-backward loses the pass; the forward is recomputed on a live peer."""
    trace = _trace(tmp_path, [("s1r0", 2.5, 3.0)])
    cfg = TrainingConfig(stages=2, replicas=2, microbatches=2, steps=1, schedule="gpipe",
                         failure_trace=trace, param_size=4.0, bandwidth=8.0)
    s, m = _run(cfg)
    assert m["lost_passes"] == 1 and m["recomputes"] == 1
    assert m["lost_lost_pass"] == pytest.approx(0.5)   # backward of mb0 at s1r0 from 2 to 2.5
    assert m["lost_recompute"] == pytest.approx(1.0)   # its forward again, on s1r1
    assert m["lost_download"] == pytest.approx(0.5)    # s1r0 back at 3 fetches 4 / 8
    assert m["drop_rate"] == 0 and m["throughput"] > 0
    # mb0 recomputes forward on s1r1 after mb1's backward there: 2+2 (mb1 bwd) ... end
    assert m["training_time"] == pytest.approx(s.env.now)


def test_out_stage_is_skipped_within_budget_with_penalty(tmp_path):
    """With its only replica down, a stage is skipped and each microbatch keeps (1 - kappa)."""
    trace = _trace(tmp_path, [("s1r0", 0.0, 1e6)])
    cfg = TrainingConfig(stages=3, microbatches=4, steps=2, schedule="swarm", routing="weighted",
                         failure_trace=trace, skip_budget=1, skip_penalty=0.2)
    _, m = _run(cfg)
    assert m["skips"] == 8 and m["drop_rate"] == 0
    assert m["mean_quality"] == pytest.approx(0.8)


def test_wait_then_drop_without_restart_model(tmp_path):
    """No budget: a microbatch waits max_wait at the out stage, then is dropped."""
    trace = _trace(tmp_path, [("s1r0", 0.0, 1e6)])
    cfg = TrainingConfig(stages=2, microbatches=3, steps=2, schedule="swarm", routing="weighted",
                         failure_trace=trace, max_wait=2.0)
    _, m = _run(cfg)
    assert m["drop_rate"] == 1.0 and m["waits"] == 6
    assert m["lost_stall"] == pytest.approx(12.0)
    assert m["throughput"] == 0.0


def test_wait_resumes_when_the_stage_comes_back(tmp_path):
    """A waiting microbatch resumes as soon as a replica is live again."""
    trace = _trace(tmp_path, [("s1r0", 0.0, 1.5)])
    cfg = TrainingConfig(stages=2, microbatches=1, steps=1, schedule="swarm", routing="weighted",
                         failure_trace=trace, max_wait=10.0)
    _, m = _run(cfg)
    assert m["drop_rate"] == 0 and m["lost_stall"] == pytest.approx(0.5)
    assert m["training_time"] == pytest.approx(1.5 + 1 + 2 + 2)


def test_restart_from_checkpoint_exact_timeline(tmp_path):
    """A failure in step 3 rolls back to the checkpoint after step 2 and pays the restart."""
    trace = _trace(tmp_path, [("s0r0", 8.0, 9.0)])
    cfg = TrainingConfig(stages=1, microbatches=1, steps=4, schedule="gpipe",
                         failure_trace=trace, checkpoint_every=2, checkpoint_cost=1.0,
                         restart_cost=2.0)
    _, m = _run(cfg)
    # steps 0-1 [0, 6], checkpoint [6, 7], step 2 lost at 8, back at 9, restart [9, 11],
    # steps 2-3 [11, 17], checkpoint [17, 18]
    assert m["training_time"] == pytest.approx(18.0)
    assert m["restarts"] == 1 and m["checkpoints"] == 2
    assert m["lost_restart"] == pytest.approx(1.0 + 3.0)
    assert m["throughput"] == pytest.approx(4 / 18)


def test_spot_preemptions_are_not_billed_while_replaced():
    """Preempted slots are unbilled until replaced: billed hours below workers x time."""
    cfg = TrainingConfig(stages=3, replicas=2, microbatches=8, steps=20, schedule="swarm",
                         routing="least-loaded", mtbf=30.0, replace_time=5.0, price=2.0,
                         hour=1.0, param_size=1.0, bandwidth=2.0)
    _, m = _run(cfg)
    assert m["preemptions"] > 0 and m["lost_download"] > 0
    assert m["worker_hours"] < m["workers"] * m["training_time"]
    assert m["cost"] == pytest.approx(2.0 * m["worker_hours"])
    assert m["samples_per_dollar"] == pytest.approx(m["samples"] / m["cost"])


def test_sync_all_reduce_adds_ring_time():
    """A step adds the ring all-reduce among the replicas of each stage that took part."""
    base = TrainingConfig(stages=2, replicas=2, microbatches=4, steps=3, schedule="gpipe",
                          routing="round-robin", sync="none")
    _, m0 = _run(base)
    _, m1 = _run(dataclasses.replace(base, sync="allreduce", param_size=8.0, bandwidth=4.0,
                                     latency=0.5))
    ring = 2 * (2 - 1) * (0.5 + 8.0 / (2 * 4.0))  # 2 (k - 1)(latency + P / (k W)), k = 2
    hops = 2 * 0.5  # the latency also delays the activations forward and the gradients back
    assert m1["step_time_mean"] - m0["step_time_mean"] == pytest.approx(ring + hops)


def test_async_step_time_is_time_per_m_completions():
    """Async with no barrier: step times are the gaps between every m-th completion."""
    cfg = TrainingConfig(stages=2, microbatches=5, steps=4, schedule="async", routing="queue")
    s, m = _run(cfg)
    assert len(s.trainer.step_times_async()) == 4
    assert m["step_time_mean"] == pytest.approx(m["training_time"] / 4)


class _R:
    def __init__(self, index, speed, load=0):
        self.index, self.speed, self.load = index, speed, load


def test_routing_policies():
    """Least-loaded takes the shortest queue, round-robin cycles, weighted follows speed."""
    live = [_R(0, 1.0, 3), _R(1, 3.0, 1), _R(2, 1.0, 2)]
    assert LeastLoaded().choose(live, None).index == 1
    rr = RoundRobin()
    assert [rr.choose(live, None).index for _ in range(4)] == [0, 1, 2, 0]
    u = Uniforms(np.random.default_rng(0))
    w = Weighted()
    picks = np.array([w.choose(live, u).index for _ in range(20_000)])
    share = (picks == 1).mean()
    assert abs(share - 0.6) < 4 * np.sqrt(0.6 * 0.4 / 20_000)


def test_read_speeds_and_config_checks(tmp_path):
    """The speeds file sets replicas and speeds; a contradicting --replicas is refused."""
    p = tmp_path / "s.csv"
    p.write_text("stage,replica,speed\n0,0,1.5\n0,1,0.5\n1,0,2\n")
    speeds, prices = read_speeds(p, 2)
    assert speeds == ((1.5, 0.5), (2.0,)) and prices is None
    cfg = TrainingConfig(stages=2, speeds=speeds)
    assert cfg.replicas == (2, 1) and cfg.workers == 3
    with pytest.raises(ConfigError, match=r"'replicas' must be unset or the speeds'/placement's "
                                          r"counts \(2, 1\): 3"):
        TrainingConfig(stages=2, speeds=speeds, replicas=3)


def test_max_time_stops_a_run_that_would_not_finish():
    """A restart loop that rarely completes a step stops at max_time, unfinished."""
    cfg = TrainingConfig(stages=5, microbatches=2, steps=5, schedule="1f1b", domain_outage=0.05,
                         mtbf=20.0, restart_cost=2.0, checkpoint_every=3, checkpoint_cost=1.0,
                         backward_ratio=0.0, forward_time=0.5, latency=0.1, max_time=500.0)
    s, m = _run(cfg, seed=974)
    assert s.env.now == 500.0
    assert m["finished"] == 0.0 and m["steps_done"] < 5 and np.isnan(m["training_time"])
    assert m["restarts"] > 10


@pytest.mark.parametrize("schedule, stages, micro, wall",
                         [("gpipe", 1, 1, 6.0), ("1f1b", 2, 2, 18.0), ("swarm", 2, 2, 18.0)])
def test_a_run_that_ends_exactly_at_max_time_is_finished(schedule, stages, micro, wall):
    """``max_time`` is inclusive: what happens at exactly ``T`` happens. Two steps, no failures,
    passes of 1 + 2: one stage, one micro-batch: steps end at 3 and 6; two stages, two
    micro-batches: 9 a step (1f1b at the last stage F1 [1, 2), B1 [2, 4), F2, B2 [5, 7), the
    first stage's B2 [7, 9)). Bounded at that wall time, the run finishes there, its figures
    those of the unbounded run (it used to stop before the last step's end, unfinished)."""
    def run(**kw):
        s = TrainingSystem(TrainingConfig(stages=stages, microbatches=micro, steps=2,
                                          forward_time=1.0, schedule=schedule, **kw),
                           Streams(0).replication(0))
        return s.env, s.run()

    _, free = run()
    assert free["training_time"] == wall
    env, m = run(max_time=wall)
    assert env.now == wall
    assert m["finished"] == 1.0 and m["steps_done"] == 2 and m["training_time"] == wall
    for key in ("throughput", "utilisation", "bubble_fraction", "worker_hours", "passes"):
        assert m[key] == free[key], key


def test_step_released_into_an_out_stage_restarts(tmp_path):
    """A step whose first stage is out at release loses the step from the coordinator itself."""
    trace = _trace(tmp_path, [("s0r0", 0.0, 4.0)])
    cfg = TrainingConfig(stages=2, microbatches=2, steps=1, schedule="gpipe",
                         failure_trace=trace, restart_cost=1.0)
    _, m = _run(cfg)
    # lost at 0, stage 0 back at 4, restart [4, 5], the step (2 + 1) x 3 = 9: done at 14
    assert m["restarts"] == 1 and m["training_time"] == pytest.approx(14.0)


def test_zero_time_fixed_program_has_no_throughput():
    """Every pass 0 s and no transfer: the step takes 0 s, so its throughput is not measured
    (the DES says None); the closed form divided by the 0 s step (a ZeroDivisionError)."""
    from sim.engines import predictions

    cfg = TrainingConfig(stages=4, microbatches=8, steps=3, forward_time=0.0)
    pred = predictions("training", cfg)
    assert pred["step_time_mean"]["value"] == 0.0
    assert math.isnan(pred["throughput"]["value"])
    rec = training_model(cfg, Streams(0).replication(0))
    assert rec["step_time_mean"] == 0.0 and math.isnan(rec["throughput"])
