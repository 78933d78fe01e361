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
    pipeline 1 sends its TP-1 parts four times, one after the other (pipe_group_chains); the
    old whole-plan largest TP would have made pipeline 0 send four times too. Each message
    is the sending rank's partition metadata (8 (7 + t) bytes), then its part
    (pipe_engine.py:1069-1071, 1123-1125)."""
    plan = _plan([[1, 1], [1, 4], [1, 1]])
    b = build_plan(plan, prof, steps=1, check_memory=False)
    mp = prof.model("OPT-350")
    size = 2 * mp.layer_sizes(1)[plan.stages[0].layers[-1]].activation_bytes
    rep = lambda j, i: (plan.stages[j].replicas[i], (j, i))  # noqa: E731

    def msg(x, y, part, t):  # one group's message from a rank of TP t: metadata, then part
        return pair_time(prof.network, x, y, 8 * (7 + t), 1, prof) + \
            pair_time(prof.network, x, y, part, 1, prof)
    t = b.transfer_times
    assert t[0][0][0] == pytest.approx(msg(rep(0, 0), rep(1, 0), size, 1), rel=1e-12)
    assert t[0][1][0] == pytest.approx(4 * msg(rep(0, 1), rep(1, 1), size, 1), rel=1e-12)
    assert t[0][1][1] == pytest.approx(4 * msg(rep(1, 1), rep(0, 1), size / 4, 4), rel=1e-12)
    assert t[1][1][1] == pytest.approx(4 * msg(rep(2, 1), rep(1, 1), size, 1), rel=1e-12)
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
    """Other frameworks build one model-parallel degree for every rank; a degree other than 1,
    2 and 4 (which all divide the stage's largest, as the artifact's groups need) the artifact
    refuses; a mixed stage on named hosts is not timed; the artifact's all-reduce of a mixed
    stage is never overlapped."""
    with pytest.raises(ConfigError, match="'plan' must be one TP degree per stage .stage 1. "
                                          "with framework deepspeed"):
        build_plan(_plan([[2, 2], [1, 2], [2, 2]], fw="deepspeed"), prof, check_memory=False)
    with pytest.raises(ConfigError, match=r"'tp' must be 1, 2 or 4 with framework "
                                          r"sailor-deepspeed, at stage 1 replica 1 .*: 3$"):
        build_plan(_plan([[2, 2], [2, 3], [2, 2]]), prof, check_memory=False)
    with pytest.raises(ConfigError, match="'sync' must be the framework's all-reduce after"):
        build_plan(_plan([[2, 2], [1, 2], [2, 2]]), prof, check_memory=False,
                   sync="allreduce:overlap=backward")
    hosted = Plan((StageSpec(tuple(range(26)), (
        ReplicaSpec("A100-40", 1, 4, Z, host="a"), ReplicaSpec("A100-40", 2, 4, Z, host="b"))),),
        2, 8, model="OPT-350", framework=FrameworkSpec("sailor-deepspeed"))
    with pytest.raises(ConfigError, match="on named hosts"):
        build_plan(hosted, prof, check_memory=False)


def _group_schedule(T, ts, tr, message):
    """A hop's messages worked in the artifact's order: group ``g`` goes from sending rank
    ``g // (T / ts)`` to receiving rank ``g // (T / tr)`` (topology.py:103-127), and a rank
    sends (receives) its groups one after the other, each blocking (pipe_engine.py:1069-1071,
    1150-1162): a message starts once the rank pair's earlier messages have arrived. The
    messages ready at one moment start together and share the link (``message(n)``: the time
    of ``n`` alike messages at once, each its metadata, then its part). Returns the hop's time
    and each batch's size."""
    done, now, batches = set(), 0.0, []
    while len(done) < T:
        ready = [g for g in range(T) if g not in done and all(
            h in done for h in range(g) if h // (T // ts) == g // (T // ts)
            or h // (T // tr) == g // (T // tr))]
        now += message(len(ready))
        done.update(ready)
        batches.append(len(ready))
    return now, batches


@pytest.mark.parametrize("ts,tr", [(2, 1), (4, 1), (1, 2), (4, 2)])
@pytest.mark.parametrize("latency", [None, 2e-3])
def test_a_hop_moves_its_groups_messages_in_group_order(prof, ts, tr, latency):
    """Two stages of one pipeline, TP ``ts`` then ``tr`` (A100-40 VMs of 4 GPUs): the artifact's
    ``T = max(ts, tr)`` pipeline groups each move one message, the activation's part
    ``S / ts`` (the gradient's ``S / tr``), in the serial order above: TP 2 -> 1 two messages
    one after the other into the one receiving rank, 4 -> 1 four, 1 -> 2 the one sending rank's
    two in turn, 4 -> 2 two chains at once of two each. The closed form and the DES over the
    plan's network (one transfer run alone) give that hop time to 1e-9, on the shipped curves
    (no latency) and with a 2 ms latency on every link. Each message is the sending rank's
    partition metadata (8 (7 + t) bytes), then its part (pipe_engine.py:1069-1071, 1123-1125).

    The old model (every sending rank's T / t parts as one flow, all the ranks at once), on
    the shipped curves: the same where each sending rank is in one group (alike messages one
    after the other end when they would sharing the link), and short by 6-13% where a sending
    rank is in several (a larger message rides a faster point of the curve): the activation
    of 1 -> 2 and the gradients of 2 -> 1, 4 -> 1 and 4 -> 2. With the latency it is short on
    every transfer by at least the ``T / k - 1`` latencies of the messages in turn."""
    import simpy

    from sim.profiles.build import p2p_flows
    from sim.training.traffic import traffic_for

    if latency is not None:
        prof = replace(prof, network=replace(prof.network, links=tuple(
            replace(x, latency=latency) for x in prof.network.links)))
    plan = _plan([[ts], [tr]])
    b = build_plan(plan, prof, steps=1, check_memory=False)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    mp = prof.model("OPT-350")
    S = 2 * mp.layer_sizes(ts)[plan.stages[0].layers[-1]].activation_bytes
    (a,), (z,) = (st.replicas for st in plan.stages)
    T = max(ts, tr)
    for grad, (x, y, tx, ty) in ((False, (a, z, ts, tr)), (True, (z, a, tr, ts))):
        link = prof.network.link(x.node, y.node, tx, ty)
        m, mb = S / tx, 8 * (7 + tx)
        hand, batches = _group_schedule(T, ts, tr, lambda n, link=link, m=m, mb=mb: (
            link.latency + n * mb / link.bandwidth_at(mb))
            + (link.latency + n * m / link.bandwidth_at(m)))
        assert batches == [min(ts, tr)] * (T // min(ts, tr))
        closed = b.transfer_times[0][0][grad]
        env = simpy.Environment()
        ev = traffic_for(net.config, env).transfer(0, 0, grad)
        env.run(ev)
        assert closed == pytest.approx(hand, rel=1e-9) and env.now == pytest.approx(hand,
                                                                                  rel=1e-9)
        # the model before the group order, which sent no metadata: against the parts alone
        closed -= sum(link.latency + n * mb / link.bandwidth_at(mb) for n in batches)
        old = pair_time(prof.network, (x, (int(grad), 0)), (y, (1 - int(grad), 0)),
                        *p2p_flows(b.behaviour, S * T / tx, tx), prof)
        turns = len(batches) - 1  # messages that wait for the one before
        if latency is not None:
            assert closed - old >= turns * latency * (1 - 1e-9) > 0
            if T == tx:
                assert closed - old == pytest.approx(turns * latency, rel=1e-9)
        elif T == tx:  # a sending rank in one group: its part alone, as the old model had it
            assert closed == pytest.approx(old, rel=1e-12)
        else:  # in T / tx groups: T / tx messages of S / tx in turn, not one flow of T S / tx^2
            assert closed > 1.06 * old, (ts, tr, grad, closed, old)


def test_pipeline_groups_on_physical_nodes(prof):
    """Two pipelines of TP 1, 2, 1 on named hosts (RTX-3090 node a, RTX-2080 node b, RTX-3090
    node c): hop 0's activation is each pipeline's TP-1 rank sending the tensor twice in turn
    (T = 2 groups), one flow of each pipeline at a time out of a, over a -> b and into b, so
    two messages timed at two flows per NIC direction and pair; its gradient two halves in
    turn into the TP-1 rank; each message after its sending rank's partition metadata
    (8 (7 + t) bytes). The DES over the physical nodes equals the closed form (1e-9)."""
    from sim.profiles.build import physical_pair_time

    def reps(gpu, tp, host):
        return tuple(ReplicaSpec(gpu, tp, 4, Z, host=host) for _ in range(2))
    plan = Plan((StageSpec(tuple(range(0, 9)), reps("RTX-3090", 1, "a")),
                 StageSpec(tuple(range(9, 17)), reps("RTX-2080", 2, "b")),
                 StageSpec(tuple(range(17, 26)), reps("RTX-3090", 1, "c"))),
                1, 16, model="OPT-350", framework=FrameworkSpec("sailor-deepspeed"))
    b = build_plan(plan, prof, check_memory=False)
    net = build_plan(plan, prof, check_memory=False, network=True)
    S = prof.model("OPT-350").layer_sizes(1)[8].activation_bytes
    a0, b0 = (plan.stages[0].replicas[0], (0, 0)), (plan.stages[1].replicas[0], (1, 0))
    assert b.transfer_times[0][0][0] == pytest.approx(2 * (
        physical_pair_time(prof, a0, b0, 8 * (7 + 1), 1, 2, 2, 2)
        + physical_pair_time(prof, a0, b0, S, 1, 2, 2, 2)), rel=1e-12)
    assert b.transfer_times[0][0][1] == pytest.approx(2 * (
        physical_pair_time(prof, b0, a0, 8 * (7 + 2), 1, 2, 2, 2)
        + physical_pair_time(prof, b0, a0, S / 2, 1, 2, 2, 2)), rel=1e-12)
    closed = predictions("training", b.config)["step_time_mean"]["value"]
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(closed, rel=1e-9)
