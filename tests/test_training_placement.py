"""Where a plan's gradient all-reduces start: after a barrier (the Sailor artifact's DeepSpeed)
or each stage when its own devices end their programs (upstream DeepSpeed, Megatron-LM).

The exact reference is a max-plus written here: DeepSpeed's blocking programs
evaluated pairing each send with its receive, each device's program end, then
per stage the (tied,) gradient all-reduce, (tied,) optimizer step in the
framework's order. The DES (closed-form traffic: no contention) and the
engines' closed form must give it to 1e-9 relative at random unequal
configurations; the barrier model must not where it cannot.
"""

from __future__ import annotations

import math
import random
import re

import pytest

from sim.analytic.placement import staged_step_end
from sim.engines import predictions
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.schedules import device_program


def _ends(L, mk, f, b, act, grad, begin=None):
    """Each device's program end: DeepSpeed's blocking 1F1B programs, a send and its receive
    both ending at ``max(free_sender, free_receiver) + d`` (written here, not the engine's);
    device ``j`` starts at ``begin[j]`` (0)."""
    progs = [device_program("1f1b", L, mk, j, blocking=True) for j in range(L)]
    pos, free = [0] * L, list(begin) if begin is not None else [0.0] * L
    moved = True
    while moved:
        moved = False
        for j in range(L):
            while pos[j] < len(progs[j]):
                op = progs[j][pos[j]]
                if op[0] in ("F", "B"):
                    free[j] += f[j] if op[0] == "F" else b[j]
                    pos[j] += 1
                    moved = True
                    continue
                kind, tag, h, i = op
                peer = 2 * h + 1 - j  # the other end of hop h
                want = ("recv" if kind == "send" else "send", tag, h, i)
                if pos[peer] < len(progs[peer]) and progs[peer][pos[peer]] == want:
                    t = max(free[j], free[peer]) + (act[h] if tag == "a" else grad[h])
                    free[j] = free[peer] = t
                    pos[j] += 1
                    pos[peer] += 1
                    moved = True
                    continue
                break
    assert all(pos[j] == len(progs[j]) for j in range(L))
    return free


def _reference(c, barrier, tied_first, opt_barrier=False, begin=None, per_stage=False):
    """The step time of ``c`` (a plan's times, blocking) by the max-plus above (stage ``j`` of
    every pipeline starting at ``begin[j]``, 0); with ``per_stage`` each stage's end."""
    L, r, m = c.stages, c.replicas[0], c.microbatches
    ends = [[0.0] * r for _ in range(L)]
    for k in range(r):
        f = [c.replica_times[j][k][0] for j in range(L)]
        b = [c.replica_times[j][k][1] for j in range(L)]
        act = [row[k][0] for row in c.transfer_times]
        grad = [row[k][1] for row in c.transfer_times]
        e = _ends(L, m // r, f, b, act, grad, begin)
        for j in range(L):
            ends[j][k] = e[j]
    a, o, t = c.allreduce_times, c.optimizer_times, c.tied_allreduce_time
    if barrier:  # every stage after every device, the tied all-reduce first (pipe_engine.py:318)
        T = max(max(row) for row in ends)
        if opt_barrier:  # then the overflow flag or gradient norm over every stage's reduction
            return T + t + max(a) + max(o)
        return T + t + max(x + y for x, y in zip(a, o, strict=True))
    start = [max(row) for row in ends]
    tied = t > 0 and L > 1
    if tied and tied_first:  # DeepSpeed: ReduceTiedGrads, ReduceGrads, OptimizerStep
        u = max(max(ends[0][k], ends[L - 1][k]) + t for k in range(r))
        start[0], start[L - 1] = max(start[0], u), max(start[L - 1], u)
    done = [start[j] + a[j] for j in range(L)]
    if tied and not tied_first:  # Megatron-LM: data-parallel, then the tied embedding
        done[0] = done[L - 1] = max(done[0], done[L - 1]) + t
    if opt_barrier:  # the gradient norm's all-reduce over the pipeline's stages first
        done = [max(done)] * L
    if per_stage:
        return [done[j] + o[j] for j in range(L)]
    return max(done[j] + o[j] for j in range(L))


def _config(rng, *, barrier, tied_first, opt_barrier=False, L=None, r=None, mk=None,
            **over):
    L = L or rng.randint(2, 5)
    r = r or rng.randint(1, 3)
    mk = mk or rng.randint(1, 6)
    u = lambda lo, hi: round(rng.uniform(lo, hi), 3)  # noqa: E731
    kw = dict(stages=L, replicas=(r,) * L, microbatches=mk * r, schedule="1f1b",
              routing="round-robin", p2p="blocking", steps=1,
              forward_time=(1.0,) * L, backward_times=(2.0,) * L,
              replica_times=tuple(tuple((u(0.2, 2.0), u(0.4, 4.0)) for _ in range(r))
                                  for _ in range(L)),
              transfer_times=tuple(tuple((u(0.0, 0.6), u(0.0, 0.6)) for _ in range(r))
                                   for _ in range(L - 1)),
              allreduce_times=tuple(u(0.0, 12.0) for _ in range(L)),
              optimizer_times=tuple(u(0.0, 1.0) for _ in range(L)),
              tied_allreduce_time=rng.choice([0.0, u(0.1, 3.0)]),
              allreduce_barrier=barrier, tied_first=tied_first,
              optimizer_barrier=opt_barrier)
    kw.update(over)
    return TrainingConfig(**kw)


def _des(c):
    return training_model(c, Streams(0).replication(0))["step_time_mean"]


@pytest.mark.parametrize("seed", range(12))
def test_des_and_closed_form_match_the_max_plus(seed):
    """At random unequal configurations, for each placement, tied order and optimizer barrier,
    the DES's step and the engines' closed form equal the max-plus of the device programs and
    collectives."""
    rng = random.Random(seed)
    for barrier, tied_first, ob in ((True, True, False), (True, True, True), (False, True, False),
                                    (False, False, False), (False, True, True),
                                    (False, False, True)):
        c = _config(random.Random(rng.random()), barrier=barrier, tied_first=tied_first,
                    opt_barrier=ob)
        want = _reference(c, barrier, tied_first, ob)
        assert _des(c) == pytest.approx(want, rel=1e-9)
        assert predictions("training", c)["step_time_mean"]["value"] == pytest.approx(
            want, rel=1e-9)


def test_barrier_differs_where_the_last_stage_need_not_wait():
    """A last stage with a large all-reduce and no tied weights starts it as soon as its own
    program ends, before stage 0's last backward pass: the barrier's step is longer by the
    time stage 0 runs after it; with DeepSpeed's tied all-reduce first the last stage waits
    for stage 0 again (its step is the barrier's), with Megatron-LM's after, it does not."""
    kw = dict(L=4, r=2, mk=4, allreduce_times=(0.1, 0.1, 0.1, 20.0),
              optimizer_times=(0.0,) * 4, tied_allreduce_time=0.0)
    bar = _config(random.Random(7), barrier=True, tied_first=True, **kw)
    free = _config(random.Random(7), barrier=False, tied_first=True, **kw)
    d_bar, d_free = _des(bar), _des(free)
    assert d_bar == pytest.approx(_reference(bar, True, True), rel=1e-9)
    assert d_free == pytest.approx(_reference(free, False, True), rel=1e-9)
    # the gap is what stage 0 runs after the last stage's end: several passes, not rounding
    assert d_bar - d_free > 2.0
    # a wrong model (the barrier) is rejected by the reference of the framework's placement
    assert _des(bar) != pytest.approx(_reference(free, False, True), rel=1e-3)
    tied = dict(kw, tied_allreduce_time=0.5)
    ds = _config(random.Random(7), barrier=False, tied_first=True, **tied)
    meg = _config(random.Random(7), barrier=False, tied_first=False, **tied)
    bar_t = _config(random.Random(7), barrier=True, tied_first=True, **tied)
    assert _des(ds) == pytest.approx(_des(bar_t), rel=1e-12)  # the tied all-reduce waits
    assert _des(meg) < _des(ds) - 2.0
    assert _des(meg) == pytest.approx(_reference(meg, False, False), rel=1e-9)


def test_overlapped_transfers_match_the_closed_form():
    """Without a barrier the run needs device programs: with transfers overlapped on FIFO
    channels (no network) it runs on the framework engine and gives the engines' closed form
    (program_makespan's device ends and staged_step_end)."""
    for seed in range(4):
        rng = random.Random(100 + seed)
        for tied_first in (True, False):
            c = _config(random.Random(rng.random()), barrier=False, tied_first=tied_first,
                        p2p="overlap")
            assert c.framework
            want = predictions("training", c)["step_time_mean"]["value"]
            assert _des(c) == pytest.approx(want, rel=1e-9)


def test_staged_step_end_formula():
    """staged_step_end on a hand case: stage 1 (no tied weights) ends early and reduces long."""
    ends = [[10.0, 9.0], [4.0, 5.0], [8.0, 7.0]]
    a, o = [1.0, 20.0, 2.0], [0.5, 0.5, 0.5]
    assert staged_step_end(ends, a, o) == 5.0 + 20.0 + 0.5
    # tied first: stages 0 and 2 reduce after max_k(max(e0k, e2k) + 3) = 13
    assert staged_step_end(ends, [1.0, 1.0, 2.0], o, 3.0) == 13.0 + 2.0 + 0.5
    # tied after: max(10 + 1, 8 + 2) + 3 = 14
    assert staged_step_end(ends, [1.0, 1.0, 2.0], o, 3.0, tied_first=False) == 14.5
    # optimizer barrier: every stage's optimizer step after max_j d_j = 25, the longest 0.5
    assert staged_step_end(ends, a, [0.5, 0.1, 2.0], optimizer_barrier=True) == 27.0
    assert staged_step_end(ends, a, [0.5, 0.1, 2.0]) == 25.1
    assert math.isclose(staged_step_end([[1.0]], [0.0], [0.0]), 1.0)


@pytest.mark.parametrize("over, msg", [
    (dict(allreduce_times=None, optimizer_times=None, tied_allreduce_time=0.0),
     "'allreduce_barrier' must be True without a plan's all-reduce (allreduce_times or "
     "allreduce_sizes): False"),
    (dict(allreduce_barrier=1), "'allreduce_barrier' must be True or False: 1"),
    (dict(tied="yes"), "'tied_first' must be True or False: 'yes'"),
    (dict(optimizer_barrier=None), "'optimizer_barrier' must be True or False: None"),
])
def test_bad_placement_is_one_line(over, msg):
    tied = over.pop("tied", True)
    with pytest.raises(ConfigError, match=re.escape(msg)):
        _config(random.Random(1), barrier=False, tied_first=tied, **over)


def test_the_framework_sets_the_placement(tie):
    """A plan's placement is its framework's (each value cited in sim.profiles.frameworks):
    the artifact's DeepSpeed has the barrier; upstream DeepSpeed and Megatron-LM do not, the
    tied all-reduce first in DeepSpeed, after in Megatron-LM, whose optimizer steps wait for
    the gradient norm over the pipeline (as DeepSpeed's in fp16 and bf16, the artifact's
    after its barrier too, not in fp32)."""
    from sim.profiles import load_profiles, read_runs
    from sim.profiles.build import build_plan
    from sim.profiles.frameworks import FrameworkSpec

    prof = tie(load_profiles(models=("OPT-350",)), "OPT-350")  # a tied model: a tied ring
    run = {r.name: r for r in read_runs()}["clariden-OPT-350-N8_D2"]
    want = {("sailor-deepspeed", None): (True, True, False),
            ("sailor-deepspeed", "fp16"): (True, True, True),
            ("sailor-deepspeed", "bf16"): (True, True, True),
            ("deepspeed", None): (False, True, False),
            ("deepspeed", "fp16"): (False, True, True),
            ("deepspeed", "bf16"): (False, True, True),
            ("megatron", None): (False, False, True)}
    for (fw, prec), (barrier, tied_first, ob) in want.items():
        c = build_plan(run.plan, prof, steps=1, check_memory=False,
                       framework=FrameworkSpec(fw, precision=prec)).config
        assert (c.allreduce_barrier, c.tied_first, c.optimizer_barrier) == (barrier, tied_first,
                                                                            ob)
        assert c.stages > 1 and c.tied_allreduce_time > 0


# Megatron-LM's placement in the default suite (the cheaper run); DeepSpeed's is slow.
@pytest.mark.parametrize("fw", ["megatron", pytest.param("deepspeed", marks=pytest.mark.slow)])
def test_a_lost_step_leaves_no_collective_behind(fw):
    """A framework run loses the step a failure hits and runs it again from scratch: over the
    network, with about a hundred restarts, every completed step still takes the failure-free
    step's time (a lost step's staged rings and optimizer steps are withdrawn, none ends a later
    step early or late), for each framework's placement."""
    from sim.profiles import load_profiles, read_runs
    from sim.profiles.build import build_plan
    from sim.profiles.frameworks import FrameworkSpec

    prof = load_profiles(models=("OPT-350",))
    run = {r.name: r for r in read_runs()}["clariden-OPT-350-N8_D2"]
    spec = FrameworkSpec(fw)
    clean = build_plan(run.plan, prof, steps=1, check_memory=False, network=True,
                       framework=spec).config
    want = training_model(clean, Streams(2).replication(0))["step_time_mean"]
    c = build_plan(run.plan, prof, steps=20, check_memory=False, network=True, framework=spec,
                   mtbf=30.0, replace_time=2.0, restart_cost=1.0, checkpoint_every=3,
                   checkpoint_cost=0.1).config
    assert not c.allreduce_barrier
    res = training_model(c, Streams(2).replication(0))
    assert res["restarts"] >= 50
    assert res["step_time_mean"] == pytest.approx(want, rel=1e-9)


def test_the_optimizer_waits_for_every_reduction_after_the_barrier_too():
    """The artifact's DeepSpeed in fp16 or bf16: after its barrier, each stage all-reduces its
    gradients, then every optimizer step waits for the overflow flag (or gradient norm) over
    the pipeline, so the step ends at ``T + t + max_j a_j + max_j o_j``, not ``T + t +
    max_j (a_j + o_j)``: at a point where the stage of the longest all-reduce has the shortest
    optimizer step the two differ by that step's difference, and the DES and the closed form
    give the first."""
    rng = random.Random(7)
    over = dict(L=3, r=2, allreduce_times=(9.0, 1.0, 1.0), optimizer_times=(0.1, 0.9, 0.2))
    c = _config(rng, barrier=True, tied_first=True, opt_barrier=True, **over)
    plain = _config(random.Random(7), barrier=True, tied_first=True, opt_barrier=False, **over)
    want = _reference(c, True, True, True)
    assert want - _reference(plain, True, True, False) == pytest.approx(0.8, rel=1e-12)
    assert _des(c) == pytest.approx(want, rel=1e-9)
    assert predictions("training", c)["step_time_mean"]["value"] == pytest.approx(want,
                                                                                 rel=1e-9)
    assert _des(plain) == pytest.approx(want - 0.8, rel=1e-9)


def test_the_step_barrier_adds_at_most_the_join_bound():
    """DeepSpeed starts a stage's next step once it and the last stages are done (the loss
    all-reduced among the last stages, then broadcast over each pipeline); the engines start
    every device together. Two steps by the max-plus, the second with DeepSpeed's starts: the
    barrier's second step is never shorter, and at most step_join_bound longer; where the
    bound is 0 the two are equal; at some random point the barrier is strictly longer (the
    bound is not vacuous). Megatron-LM's join (every stage of a pipeline) is the barrier."""
    from sim.analytic.placement import step_join_bound

    rng = random.Random(11)
    exact = strict = 0
    for _ in range(60):
        c = _config(random.Random(rng.random()), barrier=False, tied_first=True)
        e = _reference(c, False, True, per_stage=True)
        bound = step_join_bound(e, "last-stage")
        start = [max(x, e[-1]) for x in e]
        joined = max(_reference(c, False, True, begin=start, per_stage=True))
        barrier = max(e) + _reference(c, False, True)
        assert joined <= barrier + 1e-9
        assert joined >= barrier - bound - 1e-9
        if bound == 0:
            exact += 1
            assert joined == pytest.approx(barrier, rel=1e-12)
        elif joined < barrier - 1e-6:
            strict += 1
    assert exact >= 10 and strict >= 3, (exact, strict)
    assert step_join_bound([1.0, 5.0, 2.0], "pipeline") == 0.0
    assert step_join_bound([1.0, 5.0, 2.0], "last-stage") == 3.0
