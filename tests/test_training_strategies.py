"""The fault-tolerance strategies: deterministic replays exact, against hand timelines and
sim.analytic's replays; the engines chosen; refusals."""

from __future__ import annotations

import math
import re

import pytest

from sim import analytic
from sim.engines import select
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.strategies import (
    CheckpointRestart,
    Reconfiguration,
    Redundancy,
    StepTimes,
    job_model,
    make_strategy,
    strategy_quantities,
)

BIG = 1e9  # a removed worker never comes back within a run


def _removals(tmp_path, rows, stages, replicas):
    """A named CSV trace removing worker k (stage-major index) at t for good."""
    names = [f"s{j}r{i}" for j in range(stages) for i in range(replicas)]
    p = tmp_path / "removals.csv"
    p.write_text("worker,start,end\n" + "".join(f"{names[w]},{t},{BIG}\n" for t, w in rows))
    return str(p)


def _run(cfg):
    sel = select("training", cfg)
    return sel.name, sel.engine.run(cfg, Streams(0).replication(0))


def _table(per, pairs):
    return StepTimes(per, tuple(c for c, _ in pairs), tuple(t for _, t in pairs))


# ----------------------------------------------------------------------------- checkpoint-restart

CR_TIMES = _table("pipelines", [(1, 18.0), (2, 10.0), (3, 8.0)])
CR_REMOVALS = [(12.0, 5), (52.0, 4), (75.0, 1)]


@pytest.mark.parametrize("settle, wall, restarts, lost", [
    (0.0, 136.0, 3.0, 12.0 + 3.0 + (10.0 + 8.0)),  # 1.5 steps; 3 s of step 4; 4 and 8 s
    (None, 249.0, 1.0, 8.0 + 4.0),  # Varuna's default: 1.5 steps, once
])
def test_checkpoint_restart_replay_is_exact(tmp_path, settle, wall, restarts, lost):
    """6 workers (w = 3 stage + replica) as 3 pipelines of 2, pipeline i = (s0ri, s1ri) =
    (w0 w3), (w1 w4), (w2 w5); K=3, C=2, R=5, N=6. By hand, settle=0: w5 lost at 12 (step 2)
    rolls back to 0; restart to 17 on (w0 w3), (w1 w4), w2 spare (10 s steps): steps at 27,
    37, 47, checkpoint to 49; w4 lost at 52 (step 4) rolls back to 3; restart to 57 on
    (w0 w3), (w1 w2): steps at 67; w1 lost at 75 (step 5) rolls back to 3; restart to 80 on
    (w0 w3), w2 spare (18 s): steps at 98, 116, 134, the checkpoint after the last step to
    136. Wall time 136, 3 restarts, 2 checkpoints.

    With Varuna's manager's 120 s sleep after a failure (the default ``settle``,
    ``vmss_scripts/morph_server.py:177``): w5 lost at 12 rolls back to 0; the manager sleeps
    12-132 (w4 at 52 and w1 at 75 go meanwhile: no job runs, nothing is lost); the relaunch
    132-137 forms (w0 w3), w2 spare (18 s steps): steps at 155, 173, 191, checkpoint to 193,
    steps at 211, 229, 247, the last checkpoint to 249. Wall time 249, 1 restart, 2
    checkpoints (the code before it restarted at once: 136).

    (Before issue 33 the workers were in stage-major order, so w4 was the spare at 52 and the
    run had 2 restarts, and no checkpoint followed the last step: 134.)"""
    extra = "" if settle is None else f",settle={settle:g}"
    cfg = TrainingConfig(stages=2, replicas=3, steps=6, step_times=CR_TIMES,
                         failure_trace=_removals(tmp_path, CR_REMOVALS, 2, 3),
                         strategy="checkpoint-restart:every=3,checkpoint=2,restart=5,boot=0"
                                  + extra)
    engine, m = _run(cfg)
    assert engine == "job"
    assert CheckpointRestart().settle == 120.0
    assert m["training_time"] == wall
    assert (m["restarts"], m["checkpoints"]) == (restarts, 2.0)
    assert m["lost_work"] == lost
    ref = [analytic.replay_checkpoint_restart(
        n0=6, removals=CR_REMOVALS, stages=2, replicas=3, steps=6,
        step_time=lambda sizes, held: CR_TIMES.lookup(len(sizes)), every=3, checkpoint=2.0,
        restart=5.0, settle=z) for z in (0.0, 120.0)]
    assert ref == [136.0, 249.0]  # the replay without the sleep is the other model


def test_checkpoint_restart_sleep_is_inside_the_stall_window(tmp_path):
    """(lead, named fix) The job watchdog's window is 1000 x (K steps + checkpoint + restart);
    Varuna's sleep before a relaunch (``settle``) was not in it, so a sleep longer than the
    window stopped the run as stalled during the sleep (here 5e4 s against 1000 x (3 x 10 +
    2 + 5)-ish, the steps' failure-free window). Counted with the restart, the run ends as
    the exact replay with that sleep says: w5 lost at 12, the sleep to 50012, the relaunch
    on (w0 w3), w2 spare, six 18 s steps and two checkpoints."""
    cfg = TrainingConfig(stages=2, replicas=3, steps=6, step_times=CR_TIMES,
                         failure_trace=_removals(tmp_path, CR_REMOVALS, 2, 3),
                         strategy="checkpoint-restart:every=3,checkpoint=2,restart=5,boot=0,"
                                  "settle=5e4")
    engine, m = _run(cfg)
    assert engine == "job" and m["finished"] == 1 and not m.get("stall_reason")
    ref = analytic.replay_checkpoint_restart(
        n0=6, removals=CR_REMOVALS, stages=2, replicas=3, steps=6,
        step_time=lambda sizes, held: CR_TIMES.lookup(len(sizes)), every=3, checkpoint=2.0,
        restart=5.0, settle=5e4)
    assert m["training_time"] == ref == 12.0 + 5e4 + 5.0 + 6 * 18.0 + 2 * 2.0


def test_checkpoint_restart_waits_then_says_why(tmp_path):
    """Fewer ready workers than a pipeline needs, for good: the job stops with the reason."""
    cfg = TrainingConfig(stages=2, replicas=1, steps=6, step_times=CR_TIMES, stall_limit=500.0,
                         failure_trace=_removals(tmp_path, [(5.0, 0)], 2, 1),
                         strategy="checkpoint-restart:boot=0")
    _, m = _run(cfg)
    assert m["finished"] == 0
    assert m["stall_reason"].startswith("no step can finish: checkpoint-restart needs 2 ready "
                                        "workers and 1 are ready now")


# ----------------------------------------------------------------------------- redundancy

RD_TIMES = _table("pipelines", [(1, 16.0), (2, 10.0)])
RD_REMOVALS = [(15.0, 1), (50.0, 0), (52.0, 2)]


def _rd_replay(removals, **kw):
    """Bamboo's replay (the exact reference) of the 3 x 2 redundancy runs over RD_TIMES:
    slowdown 1.5, rebalance 4, restart 6, threshold 0.05, no overhead."""
    return analytic.replay_redundancy(
        n0=6, removals=removals, stages=3, replicas=2, steps=5,
        step_time=lambda sizes, held: RD_TIMES.lookup(len(sizes)),
        overhead=lambda sizes, t: 0.0, slowdown=1.5, rebalance=4.0, restart=6.0,
        threshold=0.05, **kw)


def test_redundancy_replay_is_exact(tmp_path):
    """2 rings of 3 (w0 w1 w2, w3 w4 w5), 10 s steps, slowdown 1.5, rebalance 4, restart 6, no
    checkpoint, N=5. By hand: w1 lost at 15 (mid step 2): w2 takes stage 1 over, the rest of
    the step runs 1.5x slower, to 22.5; 2 of 5 active overloaded > 5%: rebalance to 26.5,
    one ring (w0 w2 w3, 16 s): step 3 at 42.5; w0 lost at 50 (taken over by w2), w2 lost at
    52 while running two stages: fatal, back to step 0; restart to 58 on w3 w4 w5: five
    steps, 138."""
    cfg = TrainingConfig(stages=3, replicas=2, steps=5, step_times=RD_TIMES,
                         failure_trace=_removals(tmp_path, RD_REMOVALS, 3, 2),
                         strategy="redundancy:every=0,rebalance=4,restart=6,boot=0")
    engine, m = _run(cfg)
    assert engine == "job"
    assert m["training_time"] == 138.0
    assert (m["fatal_failures"], m["rebalances"], m["restarts"]) == (1.0, 1.0, 1.0)
    ref = _rd_replay(RD_REMOVALS)
    assert ref == 138.0


@pytest.mark.parametrize("every,at,old", [(0, 15.0, 74.5), (1, 23.0, 82.0)])
def test_redundancy_two_losses_at_one_instant_are_both_lost(tmp_path, every, at, old):
    """Ring 0 = (s0r0 s1r0 s2r0) loses its stage-0 and stage-1 nodes at the same instant:
    stage 0's copy is on the stage-1 node, so the pair is fatal, as two adjacent losses a
    moment apart are. 10 s steps (two rings), rebalance 4, restart 6, N=5. Mid step 2 (at
    15, no checkpoint): back to step 0, restart to 21 on one ring (16 s; 4 workers left):
    five steps, 101. During the checkpoint after step 2 (every step, 2 s: steps end 10, 22,
    checkpoints 12, 24; at 23): back to step 1, restart to 29, four steps of 16 + 2: 101.
    The replay used to lose only the first node and drop the second silently: a takeover,
    the step (or checkpoint) ran on, rebalance, one ring: 74.5 and 82."""
    rows = [(at, 0), (at, 2)]  # s0r0 and s1r0 (stage-major indices, replicas=2)
    spec = f"redundancy:every={every},checkpoint=2,rebalance=4,restart=6,boot=0"
    cfg = TrainingConfig(stages=3, replicas=2, steps=5, step_times=RD_TIMES,
                         failure_trace=_removals(tmp_path, rows, 3, 2), strategy=spec)
    engine, m = _run(cfg)
    assert engine == "job"
    assert m["training_time"] == 101.0
    assert (m["fatal_failures"], m["rebalances"], m["restarts"]) == (1.0, 0.0, 1.0)
    ref = _rd_replay(rows, every=every, checkpoint=2.0)
    assert ref == 101.0 != old


def test_redundancy_runs_on_degraded_when_a_rebalance_forms_nothing(tmp_path):
    """2 rings of 3, 10 s steps, and no step time for one ring (a table of 2 pipelines only,
    as eager Bamboo's copy leaves fewer pipelines no room in GPU memory): s1r0 lost at 15
    (mid step 2), s0r0 takes stage 1 over, the rest of the step at 1.5x to 22.5. Bamboo's
    rule asks for a rebalance (2 of 5 active overloaded > 5%), but the 5 workers form
    nothing: the job runs on degraded, steps 3-5 of 15 s, to 67.5. It tore the rings down
    and waited for a worker that never came (the engine stalled, the replay said inf)."""
    table = _table("pipelines", [(2, 10.0)])
    rows = [(15.0, 2)]  # s1r0 (stage-major index, replicas=2)
    cfg = TrainingConfig(stages=3, replicas=2, steps=5, step_times=table,
                         failure_trace=_removals(tmp_path, rows, 3, 2), stall_limit=500.0,
                         strategy="redundancy:every=0,rebalance=4,restart=6,boot=0")
    engine, m = _run(cfg)
    assert engine == "job"
    assert m["training_time"] == 67.5
    assert (m["fatal_failures"], m["rebalances"], m["degraded_time"]) == (0.0, 0.0, 52.5)
    ref = analytic.replay_redundancy(
        n0=6, removals=rows, stages=3, replicas=2, steps=5,
        step_time=lambda sizes, held: table.lookup(len(sizes)),
        overhead=lambda sizes, t: 0.0, slowdown=1.5, rebalance=4.0, restart=6.0,
        threshold=0.05)
    assert ref == 67.5


def test_redundancy_two_adjacent_losses_are_fatal():
    """Losing a node and then the node holding its copy is fatal; a non-adjacent one is not."""
    from sim.training.strategies.redundancy import Rings

    r = Rings(((0, 1, 2, 3),), 4)
    assert r.lose(1) == "takeover" and r.overloaded() == 1  # node 0 runs stages 0 and 1
    assert r.lose(3) == "takeover"  # stage 3's copy was on node 2
    assert r.lose(0) == "fatal"  # node 0 ran two stages


def test_redundancy_copies_each_stage_on_its_predecessor_as_bamboo():
    """Bamboo's node of stage s holds stage s + 1 (mod L) and runs its forwards
    (get_redundant_stage_ids, (stage_id + 1) % num_stages; EagerRecoverySchedule): a lost
    stage passes to its predecessor's node, and the redundant forwards a node runs are its
    successor's. One pipeline of 3, 8 micro-batches, forward (1, 2, 4), backward (2, 4, 8),
    a 100 s step: idle 76, 52, 4; the last node runs stage 0's 8 forwards (8 s): 4 s over
    its idle time. dtsim held the copy on the successor: node 2 ran stage 1's (16 s): 12."""
    from types import SimpleNamespace

    from sim.training.strategies.redundancy import Redundancy, Rings

    r = Rings(((0, 1, 2),), 3)
    assert r.lose(1) == "takeover" and r.holder[0] == [0, 0, 2]
    assert r.lose(0) == "fatal"  # stage 0's copy was on node 2, stage 1's only on node 0
    job = SimpleNamespace(config=SimpleNamespace(
        stages=3, microbatches=8, forward_time=(1.0, 2.0, 4.0), backward_time=(2.0, 4.0, 8.0),
        step_times=None))
    f = SimpleNamespace(pipelines=((0, 1, 2),), step_time=100.0)
    assert Redundancy(mode="eager").rc_overhead(job, f) == 4.0


# ----------------------------------------------------------------------------- reconfiguration

RC_TIMES = _table("pipelines", [(1, 18.0), (2, 10.0), (3, 8.0)])
RC_REMOVALS = [(12.0, 5), (30.0, 4), (40.0, 0), (60.0, 1)]


def test_reconfiguration_replay_is_exact(tmp_path):
    """6 workers as 3 pipelines of 2 in pipeline order, (w0 w3), (w1 w4), (w2 w5) (8 s),
    reconfigure 1, restart 7, no checkpoint, N=6. By hand: w5 lost at 12 drops step 2;
    re-formed by 13 as (w0 w3), (w1 w4) (10 s, w2 spare): steps at 23; w4 lost at 30 drops
    step 3; by 31 (w0 w3), (w1 w2): w0 lost at 40 drops step 3; by 41 one pipeline (w3 w1,
    18 s; w2 spare): step 3 at 59; w1 lost at 60 leaves stage 1 with no holder: back to
    step 0, restart to 67 on (w3 w2): six steps of 18, 175."""
    cfg = TrainingConfig(stages=2, replicas=3, steps=6, step_times=RC_TIMES,
                         failure_trace=_removals(tmp_path, RC_REMOVALS, 2, 3),
                         strategy="reconfiguration:reconfigure=1,restart=7,boot=0")
    engine, m = _run(cfg)
    assert engine == "job"
    assert m["training_time"] == 175.0
    assert (m["reconfigurations"], m["fatal_failures"]) == (3.0, 1.0)
    ref = analytic.replay_reconfiguration(
        n0=6, removals=RC_REMOVALS, stages=2, steps=6,
        step_time=lambda sizes, held: RC_TIMES.lookup(len(sizes)), work=(3.0, 3.0),
        reconfigure=1.0, restart=7.0)
    assert ref == 175.0


def test_reconfiguration_survives_while_every_stage_has_a_holder():
    """Two pipelines: one loss per stage is survivable; both holders of a stage is not."""
    from sim.training.strategies.reconfiguration import Coverage

    c = Coverage(((0, 1), (2, 3)), (1.0, 1.0))
    assert c.lose(0) is False and c.lose(3) is False
    assert c.lose(2) is True  # stage 0 had holders 0 and 2


# ----------------------------------------------------------------------------- swarm (the DES)


def test_swarm_replay_is_exact(tmp_path):
    """1 stage, 2 replicas, 4 forward passes of 1 per step, queue routing; r1 lost for good at
    0.5: its pass re-queued behind mb2 and mb3, r0 alone ends step 1 at 4, then 4 per step."""
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=4, steps=3, schedule="swarm",
                         routing="queue", backward_ratio=0.0, strategy="swarm",
                         failure_trace=_removals(tmp_path, [(0.5, 1)], 1, 2))
    engine, m = _run(cfg)
    assert engine == "des"
    assert m["training_time"] == 12.0 and m["lost_passes"] == 1.0


# ----------------------------------------------------------------------------- derived step times


def test_derived_step_time_is_the_schedule_law():
    """No table: a step of P pipelines of depth L is the DES's (m/P + L - 1)(tf + tb), and a
    pipeline of n < L nodes holds the stages merged (here 2 per node)."""
    from sim.training.strategies import derived_step_time

    cfg = TrainingConfig(stages=4, replicas=2, microbatches=8, schedule="gpipe",
                         strategy="checkpoint-restart")
    assert derived_step_time(cfg, (4, 4)) == (4 + 3) * 3.0
    assert derived_step_time(cfg, (4,)) == (8 + 3) * 3.0
    assert derived_step_time(cfg, (2,)) == (8 + 1) * 6.0


# ----------------------------------------------------------------------------- config


def test_strategy_spec_and_refusals():
    """name:key=value specs parse into the strategy objects; what they cannot run is refused."""
    s = make_strategy("checkpoint-restart:every=20,interval=adaptive")
    assert isinstance(s, CheckpointRestart) and (s.every, s.interval) == (20, "adaptive")
    assert isinstance(make_strategy("redundancy"), Redundancy)
    assert isinstance(make_strategy("reconfiguration:min_nodes=2"), Reconfiguration)
    with pytest.raises(ConfigError, match="'strategy' must be one of swarm, checkpoint-restart, redundancy, reconfiguration"):
        make_strategy("bogus")
    with pytest.raises(ConfigError, match="'strategy' must be a parameter of redundancy"):
        make_strategy("redundancy:every=2,nope=1")
    with pytest.raises(ConfigError, match="'checkpoint_every' must be 0 with strategy"):
        TrainingConfig(strategy="checkpoint-restart", checkpoint_every=2, restart_cost=1.0)
    with pytest.raises(ConfigError, match="'schedule' must be swarm with --strategy swarm"):
        TrainingConfig(strategy="swarm")
    with pytest.raises(ConfigError, match="'skip_budget' must be 0 with strategy redundancy"):
        TrainingConfig(strategy="redundancy", skip_budget=1)
    with pytest.raises(ConfigError, match="'notice' must be 0 without preemptions"):
        TrainingConfig(strategy="redundancy", notice=120.0)
    with pytest.raises(ConfigError, match="'step_times' must be given only with a step-level"):
        TrainingConfig(step_times=CR_TIMES)


def test_strategy_times_take_units():
    """A strategy's times read a unit (seconds): checkpoint=2min is checkpoint=120, restart=1h
    is 3600, boot=500ms 0.5; its counts and factors do not (every=2min, slowdown=2min are
    refused as before), nor a size or a negative time; strategy_quantities lists what was given
    with a unit (the CLI's --hour check)."""
    s = make_strategy("checkpoint-restart:checkpoint=2min,restart=1h,boot=500ms,copy=1.5s,"
                      "snapshot=overlapped")
    assert (s.checkpoint, s.restart, s.boot, s.copy) == (120.0, 3600.0, 0.5, 1.5)
    assert make_strategy("redundancy:rebalance=20s,restart=0.5min") == \
        make_strategy("redundancy:rebalance=20,restart=30")
    assert make_strategy("reconfiguration:reconfigure=2000ms").reconfigure == 2.0
    assert [(k, q.value) for k, q in strategy_quantities(
        "checkpoint-restart:every=5,checkpoint=2min,restart=55.5")] == [("checkpoint", 120.0)]
    assert strategy_quantities("swarm") == [] and strategy_quantities(None) == []
    for spec, msg in [("checkpoint-restart:every=2min", "'every' must be an integer: '2min'"),
                      ("redundancy:slowdown=2min", "'slowdown' must be a number: '2min'"),
                      ("checkpoint-restart:checkpoint=2GB", "'checkpoint' must be a time, not"),
                      ("checkpoint-restart:checkpoint=-1min", "'checkpoint' must be a time >= 0"),
                      ("checkpoint-restart:checkpoint=2parsec", "'checkpoint' must be a time")]:
        with pytest.raises(ConfigError, match=re.escape(msg)):
            make_strategy(spec)


def test_no_strategy_keeps_the_des():
    """Without a strategy nothing changes: the DES runs (its numbers are pinned elsewhere)."""
    cfg = TrainingConfig(stages=2, replicas=1, steps=2)
    assert select("training", cfg).name == "des"
    assert training_model(cfg, Streams(0))["training_time"] == 2 * (8 + 1) * 3.0
    assert math.isnan(job_model(TrainingConfig(stages=2, replicas=1, steps=2,
                                               strategy="checkpoint-restart:boot=0"),
                                Streams(0))["bubble_fraction"])


# ----------------------------------------------------------------------------- statistical


@pytest.mark.slow
def test_shrinking_checkpoint_restart_matches_the_extended_daly_law():
    """6 workers failing for good (M=300), every worker held, steps slower as they go
    (table by workers), K=5, C=1, R=2, N=30: P(finish) and E[time | finish] from 2000
    replications match checkpoint_restart_shrink; Daly at a constant T(6), rate 6/M, is
    rejected."""
    import numpy as np

    from sim.runner import replicate

    times = {2: 8.0, 3: 6.0, 4: 5.0, 5: 4.5, 6: 4.0}
    table = StepTimes("workers", tuple(times), tuple(times.values()))
    cfg = TrainingConfig(stages=1, replicas=6, steps=30, step_times=table, mtbf=300.0,
                         replace_time=1e12, stall_limit=2000.0,
                         strategy="checkpoint-restart:every=5,checkpoint=1,restart=2,boot=0,"
                                  "settle=0")  # the law's restart: no sleep before it
    p, m = analytic.checkpoint_restart_shrink(steps=30, every=5, checkpoint=1.0, restart=2.0,
                                              mtbf=300.0, step_time=times.get, workers=6)
    recs = replicate(job_model, cfg, replications=2000, seed=5)
    fin = np.array([r["finished"] for r in recs])
    t = np.array([r["training_time"] for r in recs])[fin == 1]
    se_p = math.sqrt(p * (1 - p) / len(fin))
    se_t = t.std(ddof=1) / math.sqrt(len(t))
    assert abs(fin.mean() - p) < 4 * se_p
    assert abs(t.mean() - m) < 4 * se_t
    wrong = analytic.checkpoint_wall_time(30, 4.0, 5, 1.0, 2.0, 300.0 / 6)
    assert abs(t.mean() - wrong) > 4 * se_t


@pytest.mark.slow
def test_redundancy_fatal_first_losses_match_the_exact_probability():
    """2 rings of 4, 10 s steps, M=200, slowdown 1.5, spares at once, rebalance 0: the share
    of first losses that turn fatal (about 2600 windows) matches fatal_loss_probability; the
    model without the slowdown of the rest of the step is rejected."""
    from sim.runner import replicate

    L, P, T, s, M = 4, 2, 10.0, 1.5, 200.0
    table = StepTimes("pipelines", (1, 2), (T, T))
    cfg = TrainingConfig(stages=L, replicas=P, steps=2000, step_times=table, mtbf=M,
                         replace_time=0.0, stall_limit=1e9,
                         strategy="redundancy:every=1,checkpoint=0,rebalance=0,restart=0,"
                                  "boot=0,overhead=0")
    recs = replicate(job_model, cfg, replications=4, seed=5)
    fatal = sum(r["fatal_failures"] for r in recs)
    windows = sum(r["takeover_windows"] for r in recs)
    share = fatal / windows
    se = math.sqrt(share * (1 - share) / windows)
    exact = analytic.fatal_loss_probability(stages=L, pipelines=P, mtbf=M, step=T, slowdown=s,
                                            rebalance=0.0)
    assert abs(share - exact) < 4 * se
    wrong = analytic.fatal_loss_probability(stages=L, pipelines=P, mtbf=M, step=T,
                                            slowdown=1.0, rebalance=0.0)
    assert abs(share - wrong) > 4 * se


def test_swarm_notice_drains_the_leaving_replica(tmp_path):
    """A notice 2 s ahead retires replica 1 before its preemption at 5.5: it takes no new pass,
    so none is lost; without the notice the pass it holds at 5.5 is lost and re-queued."""
    from sim.traces import TraceReplay

    p = tmp_path / "events.csv"  # Oobleck event format, milliseconds
    p.write_text("0,add,n1\n0,add,n2\n5500,remove,n2\n60000,add,n3\n")
    base = dict(stages=1, replicas=2, microbatches=4, steps=4, schedule="swarm",
                routing="queue", backward_ratio=0.0, strategy="swarm",
                failure_trace=TraceReplay(str(p)))
    with_notice = training_model(TrainingConfig(**base, notice=2.0), Streams(0).replication(0))
    without = training_model(TrainingConfig(**base), Streams(0).replication(0))
    assert without["lost_passes"] == 1.0 and with_notice["lost_passes"] == 0.0
    assert with_notice["notices_used"] == 1.0
    # retired at 3.5, replica 0 alone from step 3 (t = 4): 4 + 4 s
    assert with_notice["training_time"] == 12.0


@pytest.mark.parametrize("every, cost, end, checkpoints", [
    # steps at 10..90 (9); at 80 a step and a 5 s checkpoint still fit before 100 (95), at 90
    # not: checkpoint 90-95, step 10 95-100 lost at 100, restart 100-101, steps 10-12 at
    # 111, 121, 131, the last checkpoint 131-136 (before: at once after the step ending at
    # 80, 80-85, so step 9, done at 95, was lost too: 146)
    (100, 5.0, 136.0, 2.0),
    # a periodic checkpoint due at 80 (every 8) while the notice's waits: 80-84, step 9
    # 84-94, the notice's 94-98, step 10 98-100 lost, restart 100-101, steps 10-12, the
    # last checkpoint 131-135 (before: the periodic one was the notice's, 145)
    (8, 4.0, 135.0, 3.0),
])
def test_checkpoint_restart_uses_a_notice_to_checkpoint(tmp_path, every, cost, end, checkpoints):
    """Notice 25 s ahead of a removal at 100 (step 10 s), ``grow=false`` (dtsim's own rule; a
    growing job follows Varuna's manager, the next test): the job checkpoints at the last step
    end from which the checkpoint still ends before the preemption, so the loss at 100 rolls
    back only the step in progress (it checkpointed after the first step end, and lost every
    step done after that checkpoint: more than without the notice)."""
    from sim.traces import TraceReplay

    p = tmp_path / "events.csv"
    p.write_text("0,add,n1\n0,add,n2\n100000,remove,n2\n1000000,add,n3\n")
    table = StepTimes("workers", (1, 2), (10.0, 10.0))
    cfg = TrainingConfig(stages=1, replicas=2, steps=12, step_times=table, notice=25.0,
                         failure_trace=TraceReplay(str(p)),
                         strategy=f"checkpoint-restart:every={every},checkpoint={cost},"
                                  "restart=1,boot=0,grow=false")
    _, m = _run(cfg)
    assert m["notices_used"] == 1.0 and m["checkpoints"] == checkpoints
    assert m["training_time"] == end
    assert m["lost_work"] == (5.0 if every == 100 else 2.0)  # the step in progress only


@pytest.mark.parametrize("notice, removal, steps, end, lost_restart", [
    # notice at 75 of a removal at 100: the manager signals at once (75 > 100 - 60); the
    # step ending at 80 is the 8th: checkpoint 80-85, the workers exit; the manager sleeps
    # 85-205 (n2 goes at 100: nothing runs); the relaunch 205-206 on n1; steps 9-12 at 216,
    # .., 246, the last checkpoint to 251 (before: checkpoint 90-95, step 10 lost at 100,
    # sleep 100-220, restart to 221, steps to 251, checkpoint to 256)
    (25.0, 100, 12, 251.0, 121.0),
    # notice 120 s ahead of a removal at 205 (at 85): the manager sleeps to 145 (60 s before),
    # signals; the step ending at 150 (the 15th) checkpoints 150-155; sleep to 275, restart
    # to 276, steps 16-20 to 326, the last checkpoint to 331
    (120.0, 205, 20, 331.0, 121.0),
])
def test_checkpoint_restart_notice_follows_varunas_manager(tmp_path, notice, removal, steps, end,
                                                           lost_restart):
    """(named fix: the notice path of a growing checkpoint-restart) Varuna's manager
    (``vmss_scripts/morph_server.py`` at a2145cc) sleeps until 60 s before the notified
    preemption (``:125-127``), signals the workers, which checkpoint at their step end and
    exit; 120 s after that checkpoint (``:151``) it relaunches on the machines available.
    Two workers of one stage (10 s a step, alone or not), K=100, C=5, R=1, boot 0."""
    from sim.traces import TraceReplay

    p = tmp_path / "events.csv"
    p.write_text(f"0,add,n1\n0,add,n2\n{removal * 1000},remove,n2\n1000000000,add,n3\n")
    table = StepTimes("workers", (1, 2), (10.0, 10.0))
    cfg = TrainingConfig(stages=1, replicas=2, steps=steps, step_times=table, notice=notice,
                         failure_trace=TraceReplay(str(p)),
                         strategy="checkpoint-restart:every=100,checkpoint=5,restart=1,boot=0")
    _, m = _run(cfg)
    assert m["training_time"] == end
    assert m["notices_used"] == 1.0 and m["checkpoints"] == 2.0 and m["restarts"] == 1.0
    assert m["lost_work"] == 0.0  # nothing runs after the notice's checkpoint
    assert abs(m["lost_restart"] - lost_restart) <= 1e-12


def test_checkpoint_restart_loss_before_the_notice_checkpoint_waits_for_the_signal(tmp_path):
    """A loss without a notice (a crash) before the notice's checkpoint: its message waits for
    Varuna's manager's lock, held through the sleep to 60 s before the preemption, then takes
    the preemption's branch: the relaunch is 120 s after the signal (``morph_server.py:125-129,
    149-155``). s0r1 (w1) is noticed at 100 of its preemption at 300 (signal at 240); s0r0
    crashes at 150 (step 15, no checkpoint yet: rollback to 0) and is back at 200; the manager
    sleeps to 240 + 120 = 360; the relaunch 360-361 on s0r0 (w1 gone at 300); 20 steps of 10 s
    to 561, the last checkpoint to 566. (Before: sleep 150-270, relaunch 270-271 on both,
    s0r1 lost at 300 mid-step, sleep 300-420, relaunch to 421, 20 steps and the checkpoint to
    626.) A named CSV trace gives no notices and the spot model's (MTBF 1e15 s, seed 0) none
    in the run: the notice is given to the engine directly."""
    from sim.training.strategies.job import JobSystem

    p = tmp_path / "crash.csv"
    p.write_text(f"worker,start,end\ns0r0,150,200\ns0r1,300,{BIG}\n")
    cfg = TrainingConfig(stages=1, replicas=2, steps=20, step_times=_table("workers", [
        (1, 10.0), (2, 10.0)]), notice=200.0, mtbf=1e15, failure_trace=str(p),
        strategy="checkpoint-restart:every=100,checkpoint=5,restart=1,boot=0")
    job = JobSystem(cfg, Streams(0).replication(0))
    job._notice_at(job.workers[1], 300.0)
    m = job.run()
    assert m["preemptions"] == 0.0
    assert m["training_time"] == 566.0 and m["restarts"] == 1.0
    assert m["lost_work"] == 150.0 and m["lost_restart"] == 240.0 - 150.0 + 120.0 + 1.0


@pytest.mark.parametrize("stages, strategy", [
    (1, "reconfiguration:reconfigure=2,boot=0"),
    (2, "redundancy:every=0,rebalance=2,boot=0,mode=lazy"),
])
def test_a_drain_waits_for_the_last_step_end_before_the_preemption(tmp_path, stages, strategy):
    """Notice 25 s ahead of a removal at 100 (2 pipelines: 10 s a step, 1: 20 s): the job
    re-forms without the leaving node (2 s) at the last step end from which that still ends
    before 100: at 90, not at 80 (90 + 2 <= 100 < 90 + 10 + 2). Steps 1-9 at 10..90, the
    re-formation 90-92, steps 10-12 on one pipeline at 112, 132, 152. It drained at 80
    before, giving up a step of two pipelines for one of one: 162."""
    from sim.traces import TraceReplay

    p = tmp_path / "events.csv"
    nodes = "".join(f"0,add,n{i}\n" for i in range(2 * stages))
    p.write_text(nodes + "100000,remove,n1\n1000000,add,n9\n")
    table = StepTimes("pipelines", (1, 2), (20.0, 10.0))
    cfg = TrainingConfig(stages=stages, replicas=2, steps=12, step_times=table, notice=25.0,
                         failure_trace=TraceReplay(str(p)), strategy=strategy)
    _, m = _run(cfg)
    assert m["notices_used"] == 1.0 and m["lost_work"] == 0.0
    assert m["training_time"] == 152.0


@pytest.mark.parametrize("stages, strategy, at, end", [
    (1, "reconfiguration:reconfigure=2,boot=0", 101, 100.0),
    (2, "redundancy:every=0,rebalance=2,boot=0,mode=lazy", 101, 100.0),
    (1, "reconfiguration:reconfigure=2,boot=0", 100, 100.0),
    # a checkpoint every 5 steps (3 s) and after the last: steps to 50, checkpoint 50-53,
    # steps 6-9 to 93, step 10 to 103, its checkpoint to 106. A preemption at 107 comes after
    # the end; at 105 inside the last checkpoint (93 + 10 + 3 > 105): the drain at 93 is
    # needed, 93-95, step 10 on one pipeline to 115, its checkpoint to 118
    (1, "reconfiguration:reconfigure=2,boot=0,every=5,checkpoint=3", 107, 106.0),
    (1, "reconfiguration:reconfigure=2,boot=0,every=5,checkpoint=3", 105, 118.0),
])
def test_no_drain_when_the_job_ends_before_the_preemption(tmp_path, stages, strategy, at, end):
    """10 steps of 10 s on 2 pipelines, notice 25 s ahead of a removal at 101: the last step
    ends at 100, before the preemption, so the job ends there with no re-formation. It
    re-formed at 90 (90 + 10 + 2 > 101) and ran the last step on one pipeline: 112. At 100 the
    step ending at the removal's instant is done first. With a checkpoint due after the last
    step the job ends once it is written."""
    from sim.traces import TraceReplay

    p = tmp_path / "events.csv"
    nodes = "".join(f"0,add,n{i}\n" for i in range(2 * stages))
    p.write_text(nodes + f"{at * 1000},remove,n1\n1000000,add,n9\n")
    table = StepTimes("pipelines", (1, 2), (20.0, 10.0))
    cfg = TrainingConfig(stages=stages, replicas=2, steps=10, step_times=table, notice=25.0,
                         failure_trace=TraceReplay(str(p)), strategy=strategy)
    _, m = _run(cfg)
    assert m["lost_work"] == 0.0
    assert m["training_time"] == end
    assert m["notices_used"] == (1.0 if end > 106 else 0.0)


def test_training_model_runs_a_step_level_strategy_on_its_job_engine(tmp_path):
    """An experiment's ``model`` calling ``training_model`` (as the experiment template does)
    with a step-level strategy and a step-time table got the DES, which ignored both: every
    strategy gave the same numbers, a GPipe step of the default 1 s forward passes. It runs the
    job engine now, as ``dtsim train`` and ``sim.engines.select`` do: a 10 s step table over
    100 s with no failure and no checkpoint does 10 steps."""
    from sim.training.strategies import StepTimes

    base = dict(stages=2, replicas=1, microbatches=4, steps=10**6, max_time=100.0,
                step_times=StepTimes("pipelines", (1,), (10.0,)), stall_limit=math.inf)
    runs = {}
    for spec in ("checkpoint-restart:boot=0,every=1000", "redundancy:boot=0,every=0",
                 "reconfiguration:boot=0"):
        cfg = TrainingConfig(**base, strategy=spec)
        got = training_model(cfg, Streams(0).replication(0))
        assert got == select("training", cfg).engine.run(cfg, Streams(0).replication(0))
        runs[spec] = got["steps_done"]
    assert set(runs.values()) == {10.0}, runs


def test_adaptive_checkpoint_interval_adapts_after_a_failure(tmp_path):
    """``interval=adaptive`` re-chooses the interval after each failure from the measured rate;
    it dissolved the formation before asking its step time, found none, and kept ``every`` for
    the whole run (the same numbers as ``fixed``). Hand-worked: 2 x 2 workers, steps of 6 s
    (two pipelines) or 10 s (one), a 3 s checkpoint every 5 steps, a 20 s restart; a node lost
    at 100 s. Checkpoints at 30, 63, 96; the failure at 100 gives M = 100 s, so the exact
    interval at t = 6, C = 3 is k = best_checkpoint_every(6, 3, 100) = 4 steps; from 120 one
    pipeline runs cycles of 4 x 10 + 3 = 43 s: 20 of them by 980, then 2 steps by 1000. So
    97 steps and 3 + 20 checkpoints (fixed: 98 and 19)."""
    from sim.analytic import best_checkpoint_every
    from sim.traces import TraceReplay
    from sim.training.strategies import StepTimes

    p = tmp_path / "events.csv"  # Oobleck event format, milliseconds
    p.write_text("0,add,n1\n0,add,n2\n0,add,n3\n0,add,n4\n100000,remove,n2\n2000000,remove,n1\n")
    k = int(best_checkpoint_every(6.0, 3.0, 100.0))
    assert k == 4
    base = dict(stages=2, replicas=2, microbatches=4, steps=10**6, max_time=1000.0,
                step_times=StepTimes("pipelines", (1, 2), (10.0, 6.0)),
                failure_trace=TraceReplay(str(p)), stall_limit=math.inf)
    spec = "checkpoint-restart:every=5,checkpoint=3,restart=20,boot=0,settle=0"
    fixed = training_model(TrainingConfig(**base, strategy=spec), Streams(0).replication(0))
    adaptive = training_model(TrainingConfig(**base, strategy=spec + ",interval=adaptive"),
                              Streams(0).replication(0))
    assert (fixed["steps_done"], fixed["checkpoints"]) == (98.0, 19.0)
    cycles = int((1000 - 120) // (k * 10 + 3))
    assert cycles == 20
    assert (adaptive["steps_done"], adaptive["checkpoints"]) == (15 + k * cycles + 2, 3 + cycles)


@pytest.mark.parametrize("strategy, removals, wall", [
    ("checkpoint-restart", [(24.0, 5)], 93.0),
    ("checkpoint-restart", [(26.0, 5)], 63.0),
    ("reconfiguration", [(16.0, 5)], 57.0),
    ("redundancy", [(10.0, 1)], 77.0),
    ("redundancy", [(15.0, 1), (26.5, 0)], 86.5),
])
def test_a_removal_as_a_step_or_phase_ends_comes_after_it(tmp_path, strategy, removals, wall):
    """The scenarios above with a removal at exactly the end of a step or phase: the work
    ending then is done, what starts then is cut at once (:data:`sim.failures.LATE`), in the
    job engine and in the replays (which left such a removal undefined and skipped it).
    Checkpoint-restart (8 s steps at 8, 16, 24, checkpoint to 26): w5 lost at 24 cuts the
    checkpoint: back to 0, restart to 29 on two pipelines (10 s), steps to 59, checkpoint to
    61, steps to 91, checkpoint to 93; lost at 26, the checkpoint is done: back to 3, restart
    to 31, steps to 61, checkpoint to 63. Reconfiguration (8 s): w5 lost at 16 after step 2,
    re-formed by 17 as two pipelines, four steps of 10: 57. Redundancy (10 s): w1 lost at 10
    after step 1, step 2 all taken over (1.5 x 10) to 25, rebalance to 29, one ring (16 s)
    for steps 3-5: 77; w0 lost at 26.5 as the rebalance (after w1 at 15) ends: step 3 taken
    over at once, 24 s to 50.5, rebalance to 54.5, steps 4-5: 86.5. The job engine used to
    take the removal first (95, 67, 78, 78.5 where it moved), the replays ignored it."""
    if strategy == "checkpoint-restart":
        L, r, N, times = 2, 3, 6, CR_TIMES
        spec = "checkpoint-restart:every=3,checkpoint=2,restart=5,boot=0,settle=0"
        ref = analytic.replay_checkpoint_restart(
            n0=6, removals=removals, stages=2, replicas=3, steps=6,
            step_time=lambda sizes, held: CR_TIMES.lookup(len(sizes)), every=3,
            checkpoint=2.0, restart=5.0)
    elif strategy == "reconfiguration":
        L, r, N, times = 2, 3, 6, RC_TIMES
        spec = "reconfiguration:reconfigure=1,restart=7,boot=0"
        ref = analytic.replay_reconfiguration(
            n0=6, removals=removals, stages=2, steps=6,
            step_time=lambda sizes, held: RC_TIMES.lookup(len(sizes)), work=(3.0, 3.0),
            reconfigure=1.0, restart=7.0)
    else:
        L, r, N, times = 3, 2, 5, RD_TIMES
        spec = "redundancy:every=0,rebalance=4,restart=6,boot=0"
        ref = _rd_replay(removals)
    cfg = TrainingConfig(stages=L, replicas=r, steps=N, step_times=times,
                         failure_trace=_removals(tmp_path, removals, L, r), strategy=spec)
    engine, m = _run(cfg)
    assert engine == "job"
    assert m["training_time"] == wall
    assert ref == wall


def test_a_step_ending_at_the_job_stall_limit_is_progress(tmp_path):
    """One worker, 3 s steps, reconfiguration's boot (45): steps end at 48, 51, 54. With a stall
    limit of 48 the first step ends at the limit's very end: the watchdog looks after the
    rest of its instant (as ``max_time`` does), sees it, and the job finishes at 54. It used
    to look first (its timer scheduled at 0): stopped at 48, unfinished, 'no step completed
    in the last 0 s'."""
    p = tmp_path / "late.csv"
    p.write_text("worker,start,end\ns0r0,1000,1001\n")  # a trace: the job engine, no failure
    cfg = TrainingConfig(stages=1, replicas=1, microbatches=1, steps=3, forward_time=3.0,
                         backward_ratio=0.0, failure_trace=str(p), stall_limit=48.0,
                         strategy="reconfiguration")
    engine, m = _run(cfg)
    assert engine == "job" and Reconfiguration().boot == 45.0
    assert m["finished"] == 1.0 and m["training_time"] == 54.0
    assert "stall_reason" not in m


# ----------------------------------------------------------------------------- growing (Varuna)

@pytest.mark.parametrize("spec, wall, restarts, checkpoints, morphs", [
    # steps of 20 s from 30 end at 50, 70, ..; the poll at 60 finds w3 ready (since 40) and
    # 2 pipelines: at the step end at 70 a checkpoint 70-72 (2 steps durable), a restart
    # 72-77, 18 steps of 10 s to 257, the last checkpoint to 259
    ("settle=0,poll=60", 259.0, 2.0, 2.0, 1.0),
    # overlapped: the morph's copy 70-71 blocks and the job waits for the write, durable at
    # 73, before the restart 73-78; 18 steps to 258, the last copy and write to 261
    ("settle=0,poll=60,snapshot=overlapped,copy=1", 261.0, 2.0, 2.0, 1.0),
    # a poll at exactly a step end (50) is taken at that step end: checkpoint 50-52, restart
    # 52-57, 19 steps to 247, the last checkpoint to 249
    ("settle=0,poll=50", 249.0, 2.0, 2.0, 1.0),
    # the poll at 35 finds w3 down (3 ready workers, one pipeline); the next, at 70, is at a
    # step end: as poll=60 (Varuna's manager decides at the poll, not at the step end: 249)
    ("settle=0,poll=35", 259.0, 2.0, 2.0, 1.0),
    # the default poll, 300 s (Varuna's): steps at 50, .., 290, 310; the poll at 300 finds 2
    # pipelines: at 310 (14 steps) a checkpoint to 312, a restart to 317, 6 steps to 377, the
    # last checkpoint to 379 (the code before this rule: 432, the old rule below)
    ("settle=0", 379.0, 2.0, 2.0, 1.0),
    # Varuna's manager sleeps 120 s after the failure (the default settle): 25-145, by when
    # w3 is back; the restart 145-150 forms 2 pipelines, 20 steps of 10 s to 350, the last
    # checkpoint to 352; the polls find nothing larger: no morph (a morph has no sleep)
    ("poll=60", 352.0, 1.0, 1.0, 0.0),
    # the old rule (the Oobleck artifact's Varuna simulator): w3 waits for a failure's
    # restart, none comes: 20 steps of 20 s from 30 to 430, the last checkpoint to 432
    ("grow=false", 432.0, 1.0, 1.0, 0.0),
])
def test_checkpoint_restart_grows_at_the_poll_when_a_worker_returns(tmp_path, spec, wall,
                                                                    restarts, checkpoints,
                                                                    morphs):
    """Varuna's job morphing. 2 pipelines of 2, (w0 w2) and (w1 w3) (w = 2 stage + replica),
    a step 10 s on two pipelines and 20 s on one, K=100, C=2, R=5, N=20, boot 0. By hand: w3
    is lost at 25 (step 3 of 2 pipelines), the job rolls back to 0 and (settle=0) restarts
    25-30 on (w0 w2), w1 spare; w3 is back and ready at 40."""
    p = tmp_path / "back.csv"
    p.write_text("worker,start,end\ns1r1,25,40\n")
    table = _table("pipelines", [(1, 20.0), (2, 10.0)])
    cfg = TrainingConfig(stages=2, replicas=2, steps=20, step_times=table,
                         failure_trace=str(p),
                         strategy="checkpoint-restart:every=100,checkpoint=2,restart=5,boot=0,"
                                  + spec)
    _, m = _run(cfg)
    assert m["training_time"] == wall
    assert (m["restarts"], m["checkpoints"], m["reconfigurations"]) == (restarts, checkpoints,
                                                                         morphs)
    assert m["lost_work"] == 25.0  # steps 1-2 and 5 s of step 3: a morph loses no step


@pytest.mark.parametrize("window, wall, lost_restart", [
    # relaunches at 15, 45, 75, 105 (each less than 300 s after the last: counts 0, 1, 2, 3);
    # the failure at 135 finds 3: nothing is relaunched until the poll at 300, the restart
    # 300-305, 30 steps of 10 s to 605, the last checkpoint to 607
    ("", 607.0, 4 * 5.0 + (300.0 - 135.0) + 5.0),
    # window=0: no limit, the relaunch at 135 (restart to 140, steps to 440, checkpoint 442)
    (",window=0", 442.0, 5 * 5.0),
])
def test_checkpoint_restart_holds_after_three_quick_restarts(tmp_path, window, wall,
                                                             lost_restart):
    """(named fix: Varuna's restart limit) ``vmss_scripts/morph_server.py:167-173, 183-188``:
    a failure after 3 consecutive relaunches (each less than 300 s after the previous) is
    not relaunched; the next poll's morph relaunches the job (``:232-237``). One stage, s0r0
    and s0r1 (10 s a step on both, 20 s alone); s0r1 is down 15-19, 45-49, 75-79, 105-109,
    135-139 (each loss rolls back to 0: K=100, C=2, R=5, settle=0, boot 0; it is back, and
    joins, before each restart ends)."""
    p = tmp_path / "flaky.csv"
    p.write_text("worker,start,end\n" + "".join(f"s0r1,{t},{t + 4}\n"
                                                 for t in (15, 45, 75, 105, 135)))
    table = _table("pipelines", [(1, 20.0), (2, 10.0)])
    cfg = TrainingConfig(stages=1, replicas=2, steps=30, step_times=table, failure_trace=str(p),
                         strategy="checkpoint-restart:every=100,checkpoint=2,restart=5,boot=0,"
                                  "settle=0" + window)
    _, m = _run(cfg)
    assert m["training_time"] == wall and m["restarts"] == 5.0
    assert m["finished"] == 1.0 and "stall_reason" not in m
    assert abs(m["lost_restart"] - lost_restart) <= 1e-12
    assert CheckpointRestart().window == 300.0


def test_checkpoint_restart_trains_b_over_d_per_replica(tmp_path):
    """(named fix: Varuna's samples) Varuna's launcher gives each of ``D`` replicas ``B // D``
    samples (``varuna/launcher.py:53-54, 238``): B = 10 on 3 pipelines trains 9 a step, on 2
    trains 10. One stage, 3 replicas, 10 s a step, K=2, C=2, R=5, settle=0: steps at 10, 20,
    checkpoint 20-22; s0r2 removed at 25 (step 3): rollback to 2; restart 25-30 on 2
    pipelines; steps at 40, 50, the checkpoint to 52. Samples 2 x 9 + 2 x 10 = 38 (before:
    40); the artifact's simulator (grow=false) keeps the global batch."""
    table = _table("pipelines", [(1, 10.0), (2, 10.0), (3, 10.0)])
    base = dict(stages=1, replicas=3, steps=4, microbatches=10, samples_per_microbatch=1.0,
                step_times=table, failure_trace=_removals(tmp_path, [(25.0, 2)], 1, 3))
    _, m = _run(TrainingConfig(**base, strategy="checkpoint-restart:every=2,checkpoint=2,"
                                                "restart=5,boot=0,settle=0"))
    assert m["training_time"] == 52.0 and m["steps_done"] == 4.0
    assert m["samples"] == 38.0
    assert abs(m["samples_per_second"] - 38.0 / 52.0) <= 1e-12
    _, m = _run(TrainingConfig(**base, strategy="checkpoint-restart:every=2,checkpoint=2,"
                                                "restart=5,boot=0,grow=false"))
    assert m["training_time"] == 52.0 and m["samples"] == 40.0


def test_checkpoint_restart_grow_is_the_default_and_poll_needs_it():
    """Varuna grows (the default); ``poll`` only with ``grow``; refusals name the parameter."""
    s = make_strategy("checkpoint-restart")
    assert (s.grow, s.poll) == (True, 300.0)
    assert make_strategy("checkpoint-restart:poll=2min").poll == 120.0
    assert make_strategy("checkpoint-restart:settle=1min").settle == 60.0
    for spec, name in (("checkpoint-restart:grow=maybe", "grow"),
                       ("checkpoint-restart:poll=0", "poll"),
                       ("checkpoint-restart:poll=-5", "poll"),
                       ("checkpoint-restart:poll=inf", "poll"),
                       ("checkpoint-restart:grow=false,poll=60", "poll"),
                       ("checkpoint-restart:settle=-1", "settle"),
                       ("checkpoint-restart:settle=inf", "settle"),
                       ("checkpoint-restart:grow=false,settle=60", "settle"),
                       ("checkpoint-restart:lead=-1", "lead"),
                       ("checkpoint-restart:lead=inf", "lead"),
                       ("checkpoint-restart:grow=false,lead=30", "lead"),
                       ("checkpoint-restart:window=-1", "window"),
                       ("checkpoint-restart:window=nan", "window"),
                       ("checkpoint-restart:grow=false,window=300", "window")):
        with pytest.raises(ConfigError, match=f"'{name}' must be"):
            make_strategy(spec)
    with pytest.raises(ConfigError, match="'grow' must be"):
        CheckpointRestart(grow="yes")
