"""Plans whose stage mixes TP degrees, as the Sailor artifact runs them (issue 35).

The artifact's data-parallel groups of a stage (``deepspeed/topology.py:82-99``): the stage's
largest TP degree ``T`` of groups, a rank of TP ``t`` in ``T / t`` of them, each reduced in
turn with what a rank of TP ``T`` holds (``deepspeed/engine.py:2614-2632``):
:func:`sim.training.config.dp_group_rounds`. Its pipeline groups are per pipeline
(``topology.py:103-127``): each pipeline's own largest TP degree.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sim.engines import predictions
from sim.errors import ConfigError
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan, pair_time, plan_allreduce_time
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model
from sim.training.config import dp_group_rounds

Z = "us-central1-a"


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _plan(tps, gpus=None, fw="sailor-deepspeed", mbs=2):
    """OPT-350 cut into ``len(tps)`` stages; ``tps[j][i]`` replica ``i``'s TP at stage ``j``."""
    L, r = len(tps), len(tps[0])
    cuts = [round(26 * k / L) for k in range(L + 1)]
    gpus = gpus or [["A100-40"] * r for _ in range(L)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), tuple(
        ReplicaSpec(gpus[j][i], tps[j][i], gpus_per_node=4, zone=Z) for i in range(r)))
        for j in range(L)), mbs, mbs * r * 4, model="OPT-350", framework=FrameworkSpec(fw))


def test_dp_group_rounds_follow_the_artifacts_groups():
    """The rounds and rings of a stage's all-reduce, against the groups the artifact builds
    (topology.py:88-97: group i takes rank i // (T / t) of a replica of TP t), each rank
    reducing its groups one after the other: an independent schedule of the groups."""
    for tps in [(2, 2), (1, 2), (1, 4), (1, 2, 4), (4, 2, 2, 1), (2, 4), (4, 4, 1), (1,)]:
        T = max(tps)
        groups = [[(x, i // (T // t)) for x, t in enumerate(tps)] for i in range(T)]
        # each rank's groups in order: a group starts when each member ended its previous one
        end: dict = {}
        ends = []
        for g in groups:
            start = max(end.get(m, 0) for m in g)
            ends.append(start + 1)
            for m in g:
                end[m] = start + 1
        rounds, rings = dp_group_rounds(tps)
        assert rounds == max(ends), tps
        assert all(ends.count(k) == rings for k in range(1, rounds + 1)), tps
        assert rounds * rings == T


def test_mixed_stage_all_reduce_by_hand(prof):
    """One stage of two A100-40 replicas, TP 1 and TP 4: four groups (rank 0 of the TP-1
    replica in all, one rank of the TP-4 replica in each), reduced one after the other, each
    what a TP-4 rank holds: 4 rounds of one ring of params(4) x 4 bytes, its one flow between
    the two VMs on the curve of a 1-GPU and a 4-GPU VM. Naive readings of the refused plan give
    other numbers: the TP-1 replica's view (one ring of its own params(1)), or the TP-4
    replica's (its four rings at once, as if both were TP 4)."""
    plan = _plan([[1, 4]])
    b = build_plan(plan, prof, steps=1, check_memory=False)
    mp = prof.model("OPT-350")
    S = sum(x.params for x in mp.layer_sizes(4)) * 4.0
    one, four = plan.stages[0].replicas
    a = prof.network.link(one.node, four.node, 1, 4)
    z = prof.network.link(four.node, one.node, 4, 1)
    half = S / 2  # a ring of two: 2 steps of S / 2 per GPU (one bucket: S < 5e8 x 4 bytes)
    step = max(a.latency + half / a.bandwidth_at(half), z.latency + half / z.bandwidth_at(half))
    assert b.allreduce_times[0] == pytest.approx(4 * 2 * step, rel=1e-12)
    ring = [(x, (0, i)) for i, x in enumerate(plan.stages[0].replicas)]
    bucket = 500_000_000 * 4.0
    tp1_view = plan_allreduce_time(prof.network, ring, [1, 1],
                                   sum(x.params for x in mp.layer_sizes(1)) * 4.0, bucket, prof)
    tp4_view = plan_allreduce_time(prof.network, [(replace(x, tp=4), w) for x, w in ring],
                                   [4, 4], S, bucket, prof)
    assert b.allreduce_times[0] > 1.1 * tp1_view and b.allreduce_times[0] > 2.5 * tp4_view
    # the flattened bucket of a group is what a TP-4 rank holds, on the TP-1 replica too
    assert b.memory[0].allreduce_bucket == pytest.approx(S, rel=1e-12)
    assert b.memory[0].gradients == pytest.approx(sum(x.params for x in mp.layer_sizes(1)) * 4)
    # the DES over the plan's network, one step, agrees
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    closed = predictions("training", b.config)["step_time_mean"]["value"]
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(closed, rel=1e-9)


def test_pipeline_groups_are_each_pipelines_own(prof):
    """Pipeline 0 all TP 1, pipeline 1 TP 1, 4, 1: the artifact counts each pipeline's own
    largest TP degree (topology.py:105-111), so pipeline 0 sends every tensor once and
    pipeline 1 sends its TP-1 parts four times; the old whole-plan largest TP would have made
    pipeline 0 send four times too."""
    plan = _plan([[1, 1], [1, 4], [1, 1]])
    b = build_plan(plan, prof, steps=1, check_memory=False)
    mp = prof.model("OPT-350")
    size = 2 * mp.layer_sizes(1)[plan.stages[0].layers[-1]].activation_bytes
    rep = lambda j, i: (plan.stages[j].replicas[i], (j, i))  # noqa: E731
    t = b.transfer_times
    assert t[0][0][0] == pytest.approx(pair_time(prof.network, rep(0, 0), rep(1, 0), size, 1,
                                                 prof), rel=1e-12)
    assert t[0][1][0] == pytest.approx(pair_time(prof.network, rep(0, 1), rep(1, 1), 4 * size,
                                                 1, prof), rel=1e-12)
    assert t[0][1][1] == pytest.approx(pair_time(prof.network, rep(1, 1), rep(0, 1), size / 4,
                                                 4, prof), rel=1e-12)
    assert t[1][1][1] == pytest.approx(pair_time(prof.network, rep(2, 1), rep(1, 1), 4 * size,
                                                 1, prof), rel=1e-12)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True).config
    assert net.hop_size(0, 0) == pytest.approx(size) and net.hop_size(0, 1) == \
        pytest.approx(4 * size)
    assert net.hop_size(1, 1, grad=True) == pytest.approx(4 * size)
    closed = predictions("training", b.config)["step_time_mean"]["value"]
    assert training_model(net, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(closed, rel=1e-9)


def test_des_equals_closed_form_at_random_mixed_plans(prof):
    """At random plans of 2-4 stages and 2-4 pipelines, stages mixing TP 1, 2, 4 and GPU
    kinds (the first and last stage one TP degree: OPT-350 ties its embeddings), the DES over
    the plan's network and the closed form agree (1e-9) on a step."""
    rnd = random.Random(35)
    kinds = ["A100-40", "GH-96", "V100-16"]
    seen_rounds = set()
    for _ in range(12):
        L, r = rnd.randint(2, 4), rnd.randint(2, 4)
        ends = rnd.choice([1, 2, 4])
        tps = [[ends] * r if j in (0, L - 1) else [rnd.choice([1, 2, 4]) for _ in range(r)]
               for j in range(L)]
        gpus = [[rnd.choice(kinds) for _ in range(r)] for _ in range(L)]
        plan = _plan(tps, gpus)
        seen_rounds.update(dp_group_rounds(row)[0] for row in tps)
        b = build_plan(plan, prof, steps=1, check_memory=False)
        net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
        closed = predictions("training", b.config)["step_time_mean"]["value"]
        des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
        assert des == pytest.approx(closed, rel=1e-9), (tps, gpus)
    assert {1, 2, 4} <= seen_rounds


def test_what_stays_refused(prof):
    """Other frameworks build one model-parallel degree for every rank; degrees that do not
    divide the stage's largest leave groups without a rank; a mixed stage on named hosts is
    not timed; the artifact's all-reduce of a mixed stage is never overlapped."""
    with pytest.raises(ConfigError, match="'plan' must be one TP degree per stage .stage 1. "
                                          "with framework deepspeed"):
        build_plan(_plan([[2, 2], [1, 2], [2, 2]], fw="deepspeed"), prof, check_memory=False)
    with pytest.raises(ConfigError, match="divide its largest"):
        build_plan(_plan([[2, 2], [2, 3], [2, 2]]), prof, check_memory=False)
    with pytest.raises(ConfigError, match="'sync' must be the framework's all-reduce after"):
        build_plan(_plan([[2, 2], [1, 2], [2, 2]]), prof, check_memory=False,
                   sync="allreduce:overlap=backward")
    hosted = Plan((StageSpec(tuple(range(26)), (
        ReplicaSpec("A100-40", 1, 4, Z, host="a"), ReplicaSpec("A100-40", 2, 4, Z, host="b"))),),
        2, 8, model="OPT-350", framework=FrameworkSpec("sailor-deepspeed"))
    with pytest.raises(ConfigError, match="on named hosts"):
        build_plan(hosted, prof, check_memory=False)
