"""Megatron-LM's non-interleaved 1F1B with its batched send/receive pairs (issue 35, item 2).

Exact reference: an independent max-plus of the device programs written here (a recursion
over each command's completion, matching each transfer's two ends by key), not
:func:`sim.analytic.training.program_makespan`'s trace. A call's transfers each start at the
later post of their two parties' calls and take their own time; the call ends with its
last. The DES (the framework engine, transfers as their times) and the closed form must equal
it to 1e-9 at random unequal configurations, and DeepSpeed's ``TrainSchedule`` order (separate
blocking sends and receives) is the wrong model, off by a stated margin. Over a plan's network
(no two flows of these plans share a link) the DES equals the closed form.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from sim.analytic.training import program_makespan
from sim.engines import predictions
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan, explain_rows
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.schedules import deepspeed_program, device_program, megatron_program

REL = 1e-9


def _reference(programs, forward, backward, activation, gradient) -> float:
    """Max-plus of ``programs`` by recursion: ``done(d, n)`` of each command; a transfer ends at
    ``max(post at its sender, post at its receiver) + its time``, a post being the previous
    command's completion; a call ends with its last transfer. A cycle is a deadlock."""
    where: dict[tuple, dict[str, tuple[int, int]]] = {}
    for d, prog in enumerate(programs):
        for n, op in enumerate(prog):
            if op[0] == "sendrecv":
                ends = [("send", op[1:4]), ("recv", op[4:7])]
            elif op[0] in ("send", "recv"):
                ends = [(op[0], op[1:4])]
            else:
                continue
            for role, key in ends:
                assert role not in where.setdefault(tuple(key), {})
                where[tuple(key)][role] = (d, n)
    memo: dict[tuple[int, int], float] = {}
    busy: set[tuple[int, int]] = set()

    def done(d: int, n: int) -> float:
        if n < 0:
            return 0.0
        if (d, n) in memo:
            return memo[(d, n)]
        if (d, n) in busy:
            raise RuntimeError("deadlock")
        busy.add((d, n))
        op = programs[d][n]
        if op[0] in ("F", "B"):
            t = done(d, n - 1) + (forward if op[0] == "F" else backward)[d]
        else:
            keys = [op[1:4], op[4:7]] if op[0] == "sendrecv" else [op[1:4]]
            t = 0.0
            for tag, h, i in keys:
                (ds, ns), (dr, nr) = where[(tag, h, i)]["send"], where[(tag, h, i)]["recv"]
                t = max(t, max(done(ds, ns - 1), done(dr, nr - 1))
                        + (activation if tag == "a" else gradient)[h])
        busy.discard((d, n))
        memo[(d, n)] = t
        return t

    return max(done(d, len(p) - 1) for d, p in enumerate(programs))


def _draw(rng: np.random.Generator) -> tuple[int, int, list, list, list, list]:
    L = int(rng.integers(2, 6))
    m = int(rng.integers(1, 9))
    f = [float(x) for x in rng.uniform(0.1, 3.0, L)]
    b = [float(x) for x in rng.uniform(0.1, 4.0, L)]
    a = [float(x) for x in rng.uniform(0.0, 1.5, L - 1)]
    g = [float(x) for x in rng.uniform(0.0, 1.5, L - 1)]
    return L, m, f, b, a, g


def test_programs_follow_megatron_and_are_deadlock_free():
    """Every stage count 1-6 and micro-batch count 1-12 (m < L too): each transfer has one
    sender and one receiver end, the batched pairs are send-next + receive-next or
    send-previous + receive-previous, no call goes to a missing neighbour, and the programs
    finish in both evaluations."""
    for L in range(1, 7):
        for m in range(1, 13):
            progs = [megatron_program(L, m, j) for j in range(L)]
            for j, prog in enumerate(progs):
                assert [op[:1] + op[2:] for op in prog if op[0] in "FB"] == \
                    [(k, i) for k, i in _order(L, m, j)]
                for op in prog:
                    if op[0] == "sendrecv":  # one peer per batch (Megatron's two-way calls)
                        assert (op[1], op[4]) in (("a", "g"), ("g", "a")) and op[2] == op[5]
                        assert op[2] == (j if op[1] == "a" else j - 1)
                    if op[0] in ("send", "recv", "sendrecv"):
                        assert 0 <= op[2] < L - 1
            ones = [1.0] * L
            hop = [0.25] * (L - 1)
            assert program_makespan(progs, ones, ones, hop, hop, blocking=True) == \
                pytest.approx(_reference(progs, ones, ones, hop, hop), abs=1e-12)


def _order(L: int, m: int, j: int) -> list[tuple[str, int]]:
    from sim.training.schedules import megatron_1f1b_order

    return megatron_1f1b_order(L, m, j)


def test_closed_form_and_des_equal_the_reference_and_deepspeeds_order_is_rejected():
    """60 random unequal configurations (2-5 stages, 1-8 micro-batches, per-stage forward and
    backward times, per-hop activation and gradient times): the DES (framework engine,
    transfers as their times) = program_makespan = the reference, 1e-9; the compiled loop too
    (from 200 commands); DeepSpeed's order on the same inputs differs somewhere by > 5%."""
    rng = np.random.default_rng(2147)
    worst = worst_des = gap = 0.0
    for _ in range(60):
        L, m, f, b, a, g = _draw(rng)
        progs = [device_program("1f1b", L, m, j, blocking=True, batched=True) for j in range(L)]
        ref = _reference(progs, f, b, a, g)
        got = program_makespan(progs, f, b, a, g, blocking=True)
        worst = max(worst, abs(got - ref) / ref)
        cfg = TrainingConfig(stages=L, microbatches=m, steps=2, schedule="1f1b", p2p="batched",
                             forward_time=tuple(f), backward_times=tuple(b), sync="none",
                             transfer_times=tuple(((x, y),) for x, y in zip(a, g, strict=True)))
        pred = predictions("training", cfg)["step_time_mean"]
        assert pred["reference"] == "schedule"
        assert pred["value"] == pytest.approx(ref, rel=REL)
        des = training_model(cfg, Streams(3).replication(0))["step_time_mean"]
        worst_des = max(worst_des, abs(des - ref) / ref)
        ds = program_makespan([deepspeed_program(L, m, j) for j in range(L)], f, b, a, g,
                              blocking=True)
        gap = max(gap, abs(ds - ref) / ref)
    assert worst < REL and worst_des < REL
    assert gap > 0.05
    # the compiled loop (numba, from 200 commands) evaluates the batched pairs the same
    L, m = 5, 40
    f, b = [1.0, 1.3, 0.7, 1.1, 0.9], [2.2, 1.9, 2.5, 1.6, 2.0]
    a, g = [0.3, 0.8, 0.1, 0.5], [0.6, 0.2, 0.9, 0.4]
    progs = [megatron_program(L, m, j) for j in range(L)]
    assert sum(map(len, progs)) >= 200
    ends: list[float] = []
    assert program_makespan(progs, f, b, a, g, blocking=True, ends=ends) == \
        pytest.approx(_reference(progs, f, b, a, g), rel=1e-12)
    assert max(ends) == pytest.approx(_reference(progs, f, b, a, g), rel=1e-12)


def test_deepspeeds_order_is_longer_at_a_stated_point():
    """Equal stages (forward 1, backward 2, every hop 0.5 each way), 4 stages, 8 micro-batches:
    Megatron-LM's batched pairs overlap the two directions of a hop, 42.5; DeepSpeed's
    separate blocking sends and receives take 49.0 (15% longer)."""
    L, m = 4, 8
    ones, twos, hop = [1.0] * L, [2.0] * L, [0.5] * (L - 1)
    meg = program_makespan([megatron_program(L, m, j) for j in range(L)], ones, twos, hop, hop,
                           blocking=True)
    ds = program_makespan([deepspeed_program(L, m, j) for j in range(L)], ones, twos, hop, hop,
                          blocking=True)
    assert meg == pytest.approx(42.5, abs=1e-12) == _reference(
        [megatron_program(L, m, j) for j in range(L)], ones, twos, hop, hop)
    assert ds == pytest.approx(49.0, abs=1e-12)


KINDS = ("Titan-RTX", "RTX-3090", "RTX-2080")


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _plan(rng: np.random.Generator) -> Plan:
    """A Megatron-LM plan of 2-4 stages of 1-3 replicas of mixed RTX kinds (one TP degree)."""
    L = int(rng.integers(2, 5))
    dp = int(rng.integers(1, 4))
    tp = int(rng.choice([1, 2]))
    mbs = int(rng.choice([1, 2, 4]))
    cuts = sorted(rng.choice(np.arange(1, 26), size=L - 1, replace=False).tolist())
    bounds = [0, *cuts, 26]
    stages = tuple(StageSpec(tuple(range(bounds[j], bounds[j + 1])), tuple(
        ReplicaSpec(str(rng.choice(KINDS)), tp, gpus_per_node=tp, zone="us-central1-a")
        for _ in range(dp))) for j in range(L))
    m = int(rng.integers(1, 2 * L + 3))  # m < L too
    return Plan(stages, mbs, m * mbs * dp, model="OPT-350", framework=FrameworkSpec("megatron"))


def test_plans_run_megatrons_order_over_the_network(prof):
    """A plan of framework megatron runs the batched programs (p2p batched): the DES over the
    plan's network (a pair's two flows at once, opposite directions of a link) equals the
    closed form (dtsim train --plan's exact column) and dtsim plan's iteration at random plans,
    1e-9; --p2p blocking keeps DeepSpeed's order, longer on some plan."""
    rng = np.random.default_rng(2416)
    longer = 0
    for _ in range(6):
        plan = _plan(rng)
        closed = build_plan(plan, prof, steps=1, check_memory=False)
        assert closed.config.p2p == "batched"
        want = predictions("training", closed.config)["step_time_mean"]["value"]
        assert explain_rows(closed)["iteration"] == pytest.approx(want, rel=1e-12)
        net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
        got = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
        assert got == pytest.approx(want, rel=REL)
        old = build_plan(plan, prof, steps=1, check_memory=False, p2p="blocking")
        assert old.config.p2p == "blocking"
        longer += predictions("training", old.config)["step_time_mean"]["value"] > want * 1.001
    assert longer >= 1


def test_batched_needs_1f1b():
    """One line each: batched with another schedule, in the config and in a plan."""
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="^'p2p' must be overlap, blocking or shared unless "
                       "schedule is 1f1b"):
        TrainingConfig(stages=2, microbatches=2, schedule="gpipe", p2p="batched")
    stages = (StageSpec(tuple(range(13)), (ReplicaSpec("RTX-3090", 1),)),
              StageSpec(tuple(range(13, 26)), (ReplicaSpec("RTX-3090", 1),)))
    plan = Plan(stages, 1, 4, model="OPT-350", framework=FrameworkSpec("megatron"))
    with pytest.raises(ConfigError, match="^'schedule' must be 1f1b with Megatron-LM's batched"):
        build_plan(plan, load_profiles(models=("OPT-350",)), schedule="gpipe",
                   check_memory=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
