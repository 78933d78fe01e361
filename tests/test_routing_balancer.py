"""``least-assigned-time`` routing: SWARM's client balancer (yandex-research/swarm at f66855f,
``swarm/pipeline/src/moe/client/balancer.py:101-129``), hand-worked."""

from __future__ import annotations

import pytest

from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.compiled import compiled_obstacle
from sim.training.routing import LeastAssignedTime, LeastLoaded, make_routing


class Rep:
    def __init__(self, name: str) -> None:
        self.name, self.epoch, self.load, self.speed, self.index = name, 0, 0, 1.0, 0


def draws(*xs: float):
    it = iter(xs)
    return lambda: next(it)


def test_keys_ties_and_the_bias_corrected_average_by_hand():
    """Keys start at 0 with 1 s per sample before any measurement, ties go to the smaller
    draw made when a key was set, and the estimate is the bias-corrected EMA (alpha 0.1)."""
    p = make_routing("least-assigned-time")
    assert isinstance(p, LeastAssignedTime)
    p.bind(2.0)  # two samples a micro-batch: the first guess is 2 s
    a, b = Rep("a"), Rep("b")
    u = draws(0.3, 0.7, 0.5, 0.1, 0.9, 0.4, 0.2, 0.6)
    assert p.choose([a, b], u) is a  # both enter at 0: ties 0.3 (a) < 0.7 (b); a -> 2, tie 0.5
    assert p.choose([a, b], u) is b  # 0 < 2; b -> 2, tie 0.1
    assert (p.table[a][0], p.table[b][0]) == (2.0, 2.0)
    p.settled(a, 3.0)  # ema 0.1 * 3 / 2 = 0.15 s/sample, corrected / (1 - 0.9) = 1.5
    assert p.expected(a) == pytest.approx(3.0, rel=1e-15)
    p.settled(a, 5.0)  # ema 0.1 * 2.5 + 0.9 * 0.15 = 0.385, corrected / 0.19
    assert p.expected(a) == pytest.approx(2.0 * 0.385 / 0.19, rel=1e-15)
    assert p.choose([a, b], u) is b  # keys 2 and 2: tie 0.1 (b) < 0.5 (a); b -> 4 (no measure)
    assert p.table[b][0] == 4.0
    assert p.choose([a, b], u) is a  # 2 < 4; a -> 2 + 4.0526...
    assert p.table[a][0] == pytest.approx(2.0 + 2.0 * 0.385 / 0.19, rel=1e-15)
    # the key is never lowered when a pass completes (least-loaded would see an idle b)
    p.settled(b, 1.0)
    assert p.table[b][0] == 4.0
    # b fails and comes back (a new epoch): it enters afresh at the least live key (a's 6.05,
    # tie 0.2 drawn now), its average forgotten
    b.epoch = 1
    assert p.choose([a, b], u) is b  # a's tie 0.4 (drawn at its last choice) > b's 0.2
    assert p.table[b][0] == pytest.approx(2.0 + 2.0 * 0.385 / 0.19 + 2.0, rel=1e-15)
    assert p.table[b][4] == 0


def test_a_fast_replica_measured_takes_more_than_least_loaded_gives_it():
    """One stage, replicas of 1 s and 10 s, four micro-batches a step, two steps, forward only.

    Step 1 (t = 0): both enter at key 0 with 1 s guessed, so each gets two passes whatever the
    draws: the fast one is done at 2, the slow one at 20. Measured from the choice: the fast
    one 1 and 2 s (EMA 1.526 s), the slow one 10 and 20 s (15.26 s); keys 2 and 2. Step 2
    (t = 20): the first choice is a tie, then the slow one's key (2 + 15.26) stays above the
    fast one's three (3.53, 5.05, 6.58): three passes on the fast one (3 s), one on the slow
    one (10 s). 20 + 10 = 30 s. Least-loaded splits two and two both steps: 40 s."""
    kw = dict(stages=1, replicas=2, microbatches=4, steps=2, forward_time=1.0,
              speeds=((1.0, 0.1),), backward_ratio=0.0, schedule="swarm", sync="none")
    for seed in (0, 1, 2):
        got = training_model(TrainingConfig(routing="least-assigned-time", **kw), Streams(seed))
        assert got["training_time"] == 30.0
        assert got["step_time_mean"] == 15.0  # steps of 20 and 10
    wrong = training_model(TrainingConfig(routing="least-loaded", **kw), Streams(0))
    assert wrong["training_time"] == 40.0


def test_the_interval_counts_the_queue_from_the_choice():
    """One replica, three micro-batches chosen at 0: each forward is measured from its
    choice, so the queue counts (1, 2, 3 s), not from the start of its service (1, 1, 1)."""
    p = LeastAssignedTime()
    seen = []
    real = p.settled

    def spy(rep, interval, mb=None):
        seen.append(interval)
        real(rep, interval, mb)
    p.settled = spy  # type: ignore[method-assign]
    cfg = TrainingConfig(stages=1, replicas=1, microbatches=3, steps=1, forward_time=1.0,
                         backward_ratio=0.0, schedule="swarm", sync="none",
                         routing="least-assigned-time")
    from sim.training.system import TrainingSystem

    system = TrainingSystem(cfg, Streams(0))
    system.flow.policies[0] = p
    for rep in system.flow.replicas:
        rep.settle = p.settled
    system.run()
    assert seen == [1.0, 2.0, 3.0]  # all three chosen at 0 on the one replica, queued


def test_refused_with_fixed_pipelines_and_not_compiled():
    with pytest.raises(ConfigError, match="'routing' must be one of least-loaded, weighted, "
                       "round-robin with schedule gpipe: 'least-assigned-time'"):
        TrainingConfig(schedule="gpipe", routing="least-assigned-time")
    cfg = TrainingConfig(stages=2, replicas=2, schedule="swarm", routing="least-assigned-time")
    assert "least-assigned-time routing" in compiled_obstacle(cfg)


def test_least_loaded_is_not_the_balancer():
    """The wrong model (the replica with the fewest passes queued, what a client does not see)
    picks the idle replica the balancer passes over."""
    a, b = Rep("a"), Rep("b")
    p = LeastAssignedTime()
    u = draws(0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    assert [p.choose([a, b], u) for _ in range(3)] == [a, b, a]  # keys 2 and 1
    a.load, b.load = 0, 1
    assert LeastLoaded().choose([a, b], u) is a
    assert p.choose([a, b], u) is b


def test_ties_make_the_routing_random():
    """Equal keys go to a draw (fresh replicas all enter at the least key), so a run with more
    than one replica a stage is random: its replications are not declared the same run."""
    cfg = TrainingConfig(stages=2, replicas=(1, 3), microbatches=5, schedule="swarm",
                         routing="least-assigned-time")
    assert cfg.random_sources() == ("least-assigned-time routing's random tie-breaks",)
    one = TrainingConfig(stages=2, replicas=1, schedule="swarm", routing="least-assigned-time")
    assert one.random_sources() == ()
