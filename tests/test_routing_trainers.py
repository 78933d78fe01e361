"""``trainer-balancer`` routing: SWARM's client balancer, one a trainer at each stage
(yandex-research/swarm at f66855f: ``swarm/train_pipeline.py:31-45``,
``swarm/pipeline/src/moe/client/balancer.py:76-143``, ``balanced_expert.py:41, 52, 85, 121``),
hand-worked."""

from __future__ import annotations

import pytest

from sim.errors import ConfigError
from sim.pipeline import PipelineConfig
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.compiled import compiled_obstacle
from sim.training.replica import Aborted, Failed
from sim.training.routing import TrainerBalancer, make_routing
from sim.training.system import TrainingSystem


class Rep:
    def __init__(self, name: str) -> None:
        self.name, self.epoch, self.load, self.speed, self.index = name, 0, 0, 1.0, 0

    def __repr__(self) -> str:
        return self.name


class Mb:
    def __init__(self, id_: int) -> None:
        self.id = id_


def draws(*xs: float):
    it = iter(xs)
    return lambda: next(it)


def run_scripted(routing: str, ties: tuple[float, ...]) -> dict:
    """One stage of a 1 s and a 4 s replica, two micro-batches a step (two trainers), three
    steps, forward only, the routing's draws scripted."""
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=2, steps=3, forward_time=1.0,
                         speeds=((1.0, 0.25),), backward_ratio=0.0, schedule="swarm",
                         sync="none", routing=routing)
    system = TrainingSystem(cfg, Streams(0))
    system.flow.uniform = draws(*ties)
    return system.run()


def test_two_trainers_by_hand_and_the_one_router_is_not_it():
    """Replicas A (1 s) and B (4 s); the draws, in the order the balancers take them.

    Trainer 0 at t = 0 (micro-batch 0): A and B enter at 0 (ties .1, .2); its info call takes
    A (key 1.0, tie .5) and measures it at 0 s (average 0 s a sample, one update: 1e20
    samples/s); the forward goes to B (0 < 1; key 1.0 guessed, tie .3): 0 -> 4.
    Trainer 1 (micro-batch 1): A and B enter at 0 (ties .6, .4); info takes B (key 1.0, tie
    .9), the forward A (key 1.0, tie .8): 0 -> 1. Step 1 ends at 4.
    Step 2 (t = 4): trainer 0's keys A 1.0 (.5) and B 1.0 (.3): B again, though it measured
    B at 4 s (key 1 + 4 = 5): 4 -> 8; trainer 1's B 1.0 (.9), A 1.0 (.8): A (key 2): 4 -> 5.
    Step 2 ends at 8.
    Step 3 (t = 8): trainer 0's A 1.0 < B 5.0: A (its info measure makes the guess 1e-20
    s: key stays 1.0): 8 -> 9; trainer 1's B 1.0 (.9) < A 2.0: B (1e-20 s too): 8 -> 12.
    12 s in all.

    One router for the stage (least-assigned-time), the same draws: A and B enter at 0 (ties
    .1, .2); micro-batch 0 to A (key 1, tie .5), micro-batch 1 to B (key 1, tie .3): 4 s.
    Measured A 1 s, B 4 s. Step 2: B (tie .3 < .5, key 5), then A (key 2): 4 s. Step 3: A
    (key 3), A again (3 < 5): 1 + 1 = 2 s. 10 s in all."""
    ties = (0.1, 0.2, 0.5, 0.3, 0.6, 0.4, 0.9, 0.8, 0.7, 0.75, 0.65, 0.85)
    got = run_scripted("trainer-balancer", ties)
    assert got["training_time"] == pytest.approx(12.0, abs=1e-12)
    assert got["step_time_mean"] == pytest.approx(4.0, abs=1e-12)
    wrong = run_scripted("least-assigned-time", ties)
    assert wrong["training_time"] == pytest.approx(10.0, abs=1e-12)


def test_info_call_stale_entries_bans_and_returns_by_hand():
    """One trainer's balancer, replicas a, b, c, one sample a micro-batch."""
    p = make_routing("trainer-balancer")
    assert isinstance(p, TrainerBalancer)
    p.trainers = 1
    a, b, c = Rep("a"), Rep("b"), Rep("c")
    u = draws(0.1, 0.2, 0.05, 0.9, 0.7, 0.8, 0.6, 0.65, 0.3, 0.55, 0.5, 0.45, 0.99, 0.4)
    one = 1.0 / (0.1 / (1.0 - 0.9))  # the samples/s of one measure of 1 s (bias-corrected)
    # a, b, c enter at 0 (ties .1 .2 .05); the info call takes c (key 1.0, tie .9) and
    # measures it at 0 s: one update, 0 s a sample, 1e20 samples/s
    m = Mb(0)
    assert p.choose_for([a, b, c], u, m) is a  # the forward: a (0, .1) -> (1.0, .7)
    bk = p.books[0]
    assert bk.entry[c][:2] == (1.0, 0.9) and bk.ema[c][:2] == [0.0, 1]
    assert bk.ema[c][2] == 1.0 / 1e-20
    p.settled(a, 1.0, m)
    assert bk.ema[a][2] == one
    m = Mb(1)
    assert p.choose_for([a, b, c], u, m) is b  # b (0, .2) -> (1.0, .8)
    p.settled(b, 1.0, m)
    assert p.choose_for([a, b, c], u, Mb(2)) is a  # a (1, .7) -> (1 + 1/one, .6)
    assert p.choose_for([a, b, c], u, Mb(3)) is b  # b (1, .8) -> (1 + 1/one, .65)
    m = Mb(4)
    assert p.choose_for([a, b, c], u, m) is c  # c (1, .9) -> (1 + 1e-20 = 1.0, .3)
    p.failed(c, m)  # its pass lost: c banned, its heap entry (1.0, .3) left stale
    assert c not in bk.entry and c not in bk.ema
    p.settled(c, 1.0, m)  # a late completion of the banned call updates nothing
    assert c not in bk.ema
    # c live again: it enters on top of the heap, the stale (1.0, .3) of its own ban, below
    # every current key (a and b at 2.0): tie .55, a fresh average. The pops: the stale entry
    # (skipped), then c (1.0 guessed: key 2.0, tie .5)
    assert p.choose_for([a, b, c], u, Mb(5)) is c
    assert bk.entry[c][:2] == (2.0, 0.5) and bk.ema[c][1] == 0
    # a and b hold 1 + 1/one = 2.0 (rounded): entering at the least live key, c would be at 3.0
    assert bk.entry[a][0] == bk.entry[b][0] == 1.0 + 1.0 / one == 2.0
    # b down: c (2.0, .5) is the least (a .6, b .65): key 3.0, tie .45
    assert p.choose_for([a, c], u, Mb(6)) is c
    assert p.choose_for([a, c], u, Mb(7)) is a  # a (2.0, .6): key 3.0, tie .99
    # b (2.0, .65) is the least now and not live: dropped (the reference finds it expired,
    # or its call fails and bans it); c (3.0, .45) is next
    assert p.choose_for([a, c], u, Mb(8)) is c
    assert b not in bk.entry and b not in bk.ema


def test_a_replica_back_unnoticed_keeps_its_key():
    """A replica that failed and came back while this trainer never met it down keeps its
    entry (the reference's ``_add_expert`` only refreshes a uid it holds, balancer.py:79, 87)."""
    p = TrainerBalancer()
    a, b = Rep("a"), Rep("b")
    u = draws(0.1, 0.2, 0.3, 0.4, 0.5)
    m = Mb(0)
    assert p.choose_for([a, b], u, m) is b  # info -> a (key 1, tie .3), forward b (key 1, .4)
    p.settled(b, 3.0, m)
    b.epoch = 1  # failed and back, never popped while down
    before = p.books[0].entry[b]
    assert p.choose_for([a, b], u, Mb(1)) is a  # (1.0, .3) < (1.0, .4)
    assert p.books[0].entry[b] is before and p.books[0].ema[b][1] == 1


def test_a_lost_pass_bans_the_replica_for_its_trainer_only():
    """The DES tells the policy of a pass lost: the trainer whose pass it was forgets the
    replica; a stage of two replicas, one failing for good at t = 0.5 with two trainers
    each holding a pass there."""
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=4, steps=1, forward_time=1.0,
                         backward_ratio=0.0, schedule="swarm", sync="none",
                         routing="trainer-balancer", detection_timeout=0.0)
    system = TrainingSystem(cfg, Streams(0))
    flow = system.flow
    pol = flow.policies[0]
    seen = []
    real = pol.failed

    def spy(rep, mb):
        seen.append((rep.name, mb.id))
        real(rep, mb)
    pol.failed = spy  # type: ignore[method-assign]
    lost = flow.stages[0][0]
    system.env.timeout(0.5).callbacks.append(
        lambda _e: lost.set_state(fm_up=False, cause=Failed(lost.name, 0.5)))
    system.run()
    assert seen and all(name == lost.name for name, _ in seen)
    for _name, k in seen:
        assert lost not in pol.books[k % 4].entry


def test_refusals():
    with pytest.raises(ConfigError, match="'routing' must be one of queue, least-loaded, "
                       "weighted, round-robin, least-assigned-time with schedule async: "
                       "'trainer-balancer'"):
        TrainingConfig(schedule="async", routing="trainer-balancer")
    with pytest.raises(ConfigError, match="'routing' must be one of least-loaded, weighted, "
                       "round-robin with schedule gpipe: 'trainer-balancer'"):
        TrainingConfig(schedule="gpipe", routing="trainer-balancer")
    with pytest.raises(ConfigError, match="'routing' must be one of queue, least-loaded, "
                       "weighted, round-robin, least-assigned-time: 'trainer-balancer'"):
        PipelineConfig(queueing=True, routing="trainer-balancer")
    cfg = TrainingConfig(stages=2, replicas=2, schedule="swarm", routing="trainer-balancer")
    assert "trainer-balancer routing" in compiled_obstacle(cfg)
    assert cfg.random_sources() == ("trainer-balancer routing's random tie-breaks",)


def test_one_replica_a_stage_is_the_plain_run():
    """With one replica a stage there is nothing to choose: the run is least-loaded's."""
    kw = dict(stages=3, replicas=1, microbatches=4, steps=3, schedule="swarm")
    a = training_model(TrainingConfig(routing="trainer-balancer", **kw), Streams(0))
    b = training_model(TrainingConfig(routing="least-loaded", **kw), Streams(0))
    assert a["training_time"] == b["training_time"]


def test_a_pass_aborted_with_its_step_bans_nothing():
    """A restart aborts the step's passes: no call failed, so no trainer bans the replica;
    a replica's failure does."""
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=2, steps=1, forward_time=1.0,
                         backward_ratio=0.0, schedule="swarm", sync="none",
                         routing="trainer-balancer")
    system = TrainingSystem(cfg, Streams(0))
    flow = system.flow
    rep = flow.stages[0][0]
    mb = Mb(0)
    mb.dead = True  # (not re-queued)
    seen = []
    flow.policies[0].failed = lambda r, m: seen.append((r, m))  # type: ignore[method-assign]
    flow.pass_lost(rep, mb, Aborted(0, 0.0), 0.5)
    assert seen == []
    flow.pass_lost(rep, mb, Failed(rep.name, 0.5), 0.5)
    assert seen == [(rep, mb)]
