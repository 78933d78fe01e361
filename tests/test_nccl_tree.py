"""The step's one-value all-reduces as NCCL runs them: the tree NCCL builds over ``n`` nodes
(``src/graph/trees.cc``, ``ncclGetBtree``), the algorithm its tuner picks for a few bytes
(``src/graph/tuning.cc`` at v2.21.5-1) and the time of the chosen one on the plan's links."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.analytic import network as analytic
from sim.engines import predictions
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model

B, LAT = 1e9 / 8, 10e-3  # 1 Gbit/s, 10 ms
A, Bz = "us-central1-a", "us-central1-b"


def test_tree_shape_by_hand():
    """The trees.cc illustration (14 ranks): 1, 3 -> 2; 5, 7 -> 6; 9, 11 -> 10; 2, 6 -> 4;
    10, 13 -> 12; 4, 12 -> 8; 8 -> 0. Depths for 2..16 nodes worked from the parent rule
    (lowest set bit ``b`` of the rank: parent ``(r ^ b) | 2b``, else ``r ^ b``): the root
    has one child, the largest power of two below ``n``, so the depth is ``ceil(log2 n)``."""
    assert analytic.nccl_tree_parents(14) == (-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12)
    assert analytic.nccl_tree_parents(3) == (-1, 2, 0)  # 2 -> 0 (4 out of range), 1 -> 2
    assert analytic.nccl_tree_parents(5) == (-1, 2, 4, 2, 0)  # 4 -> 0 (8 out of range)
    depths = {2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 3, 8: 3,
              9: 4, 10: 4, 11: 4, 12: 4, 13: 4, 14: 4, 15: 4, 16: 4}
    assert {n: analytic.nccl_tree_depth(n) for n in range(2, 17)} == depths
    assert analytic.nccl_tree_depth(1) == 0


@pytest.mark.parametrize("intra, overhead", [(1.0, 1.0), (0.6, 1.0), (1.0, 2.0), (0.6, 2.0)])
def test_tuner_pick_for_four_bytes(intra, overhead):
    """LL latencies, v2.21.5-1 tuning.cc, ``N`` nodes of ``p`` ranks: ring
    ``6.6 + (2 (Np - 1) - 2N) max(i, o) + 5.4 N``, tree ``6.8 + 2 ((p - 1) i + 5 log2i N)``.
    With one rank a node, ring ``6.6 - 2 o + 5.4 N`` against ``6.8 + 10 log2i N``: the ring on
    2 nodes (15.4 < 16.8 us at o = 1) and 4 (26.2 < 26.8), the tree on 3 (20.8 > 16.8) and
    from 5 on (31.6 > 26.8); with more ranks a node the ring's ``2 N (p - 1)`` intra-node
    steps lose from 2 nodes on. The same pick for either CPU (o) and intra-node link (i)."""
    for p in (1, 2, 4, 8):
        for n in range(1, 17):
            want = "ring" if n == 1 or (p == 1 and n in (2, 4)) else "tree"
            assert analytic.nccl_small_allreduce_algorithm(n, n * p, intra=intra, overhead=overhead) \
                == want, (n, p)


@pytest.fixture(scope="module")
def prof():
    """Every link 1 Gbit/s; 10 ms within a zone, 30 ms between zones."""
    p = load_profiles(models=("OPT-350",))
    return replace(p, network=replace(p.network, links=tuple(
        replace(x, bandwidth=B, latency=LAT if x.src[1] == x.dst[1] else 3 * LAT)
        for x in p.network.links)))


DS16 = FrameworkSpec("deepspeed", precision="fp16")


def _plan(zones, tp=1, fw=DS16):
    L = len(zones)
    cuts = [round(26 * k / L) for k in range(L + 1)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), (
        ReplicaSpec("A100-40", tp, gpus_per_node=4, zone=z),)) for j, z in enumerate(zones)),
        2, 8, model="OPT-350", framework=fw)


def test_eight_stages_tree_not_ring(prof):
    """8 stages, one rank each, every link 10 ms: NCCL's tree (depth 3) takes 2 x 3 hops of
    ``l + 4 / B`` per all-reduce (60 ms), where a ring takes 14 steps of ``l + (4 / 8) / B``
    (140 ms); DeepSpeed fp16 runs two. The DES over the plan's network agrees."""
    b = build_plan(_plan([A] * 8), prof, steps=1, check_memory=False)
    tree = 2 * (2 * 3 * (LAT + 4 / B))
    ring = 2 * (14 * (LAT + 0.5 / B))
    assert b.optimizer_collective_time == pytest.approx(tree, rel=1e-12)
    assert ring - tree > 0.15
    net = build_plan(_plan([A] * 8), prof, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(predictions("training", b.config)["step_time_mean"]["value"],
                                rel=1e-9)
    # Megatron-LM fp16's four
    m = build_plan(_plan([A] * 8, fw=FrameworkSpec("megatron", precision="fp16")), prof,
                   steps=1, check_memory=False)
    assert m.optimizer_collective_time == pytest.approx(4 * 2 * 3 * (LAT + 4 / B), rel=1e-12)


def test_tree_takes_its_slowest_path(prof):
    """Stage 7 in another zone (30 ms to the others): its path 7 -> 6 -> 4 -> 0 is
    30 + 10 + 10 ms up and again down, the slowest (1 -> 2 -> 4 -> 0: 30 ms); a ring would
    pay the 30 ms link at each of its 14 steps."""
    b = build_plan(_plan([A] * 7 + [Bz]), prof, steps=1, check_memory=False)
    assert b.optimizer_collective_time == pytest.approx(
        2 * 2 * (5 * LAT + 3 * 4 / B), rel=1e-12)
    # stage 5 instead: its path 5 -> 6 -> 4 -> 0 is 30 + 10 + 10 ms, and 7 -> 6 is 10 ms
    c = build_plan(_plan([A] * 5 + [Bz] + [A] * 2), prof, steps=1, check_memory=False)
    assert c.optimizer_collective_time == pytest.approx(
        2 * 2 * (5 * LAT + 3 * 4 / B), rel=1e-12)
    # stage 6: 6 -> 4 is 30 ms, and both its children's links (5, 7 -> 6) too: 70 ms a way
    d = build_plan(_plan([A] * 6 + [Bz, A]), prof, steps=1, check_memory=False)
    assert d.optimizer_collective_time == pytest.approx(
        2 * 2 * (7 * LAT + 3 * 4 / B), rel=1e-12)


def test_four_nodes_ring_unless_tp(prof):
    """NCCL's tuner keeps the ring on 4 nodes of one rank (26.2 < 26.8 us): 6 steps of
    ``l + (4 / 4) / B``; at TP 2 (8 ranks) the tree, depth 2: 4 hops of ``l + 4 / B``."""
    one = build_plan(_plan([A] * 4), prof, steps=1, check_memory=False)
    assert one.optimizer_collective_time == pytest.approx(2 * 6 * (LAT + 1 / B), rel=1e-12)
    two = build_plan(_plan([A] * 4, tp=2), prof, steps=1, check_memory=False)
    assert two.optimizer_collective_time == pytest.approx(2 * 4 * (LAT + 4 / B), rel=1e-12)


def _hosted(hosts, tp=1, fw=DS16):
    """One pipeline, stage ``j`` on physical node ``hosts[j]`` (4-GPU A100-40 nodes, zone A)."""
    L = len(hosts)
    cuts = [round(26 * k / L) for k in range(L + 1)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), (
        ReplicaSpec("A100-40", tp, gpus_per_node=4, zone=A, host=h),)) for j, h in
        enumerate(hosts)), 2, 8, model="OPT-350", framework=fw)


def test_stages_sharing_a_host_are_one_nccl_node(prof):
    """Stages 0, 1 on node x and 2, 3 on node y, TP 1: NCCL counts 2 nodes of 2 ranks
    (``init.cc`` 1110-1148), and its tuner picks the tree (LL: ring ``6.6 + (2 x 3 - 2 x 2)
    + 2 x 2 x 2.7 = 19.4`` us, tree ``6.8 + 2 ((4 / 2 - 1) + log2i(2) x 5) = 18.8``); the tree
    joins x's first rank (stage 0, the root) and y's (stage 2), stage 1 chained below stage 0
    and stage 3 below stage 2 over the intra-node link. Reduce: the slowest of 1 -> 0 and
    3 -> 2 -> 0, ``4 / I + l + 4 / B``; the broadcast back the same: DeepSpeed fp16's two
    all-reduces take ``2 x 2 (l + 4 / B + 4 / I)``, ``I`` the A100's intra-node bandwidth at
    4 bytes. Before, each stage was a node of its own: 4 nodes of one rank, the ring
    (26.2 < 26.8 us), 6 steps of the slowest link, ``l + (4 / 4) / B``: 60 ms against 20."""
    from sim.profiles.build import intra_bandwidth

    rep = ReplicaSpec("A100-40", 1, gpus_per_node=4, zone=A, host="x")
    I = intra_bandwidth(prof, rep, 1, 4.0)  # noqa: E741
    assert analytic.nccl_small_allreduce_algorithm(2, 4) == "tree"
    b = build_plan(_hosted(["x", "x", "y", "y"]), prof, steps=1, check_memory=False)
    hand = 2 * 2 * (LAT + 4 / B + 4 / I)
    assert b.optimizer_collective_time == pytest.approx(hand, rel=1e-12)
    assert 2 * 6 * (LAT + 1 / B) - hand > 0.039  # the old count's ring
    # the DES over the plan's physical network agrees with the closed form
    net = build_plan(_hosted(["x", "x", "y", "y"]), prof, steps=1, check_memory=False,
                     network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(predictions("training", b.config)["step_time_mean"]["value"],
                                rel=1e-9)
    # a node to each stage, named: as without hosts (4 nodes of one rank, the ring)
    own = build_plan(_hosted(["w", "x", "y", "z"]), prof, steps=1, check_memory=False)
    assert own.optimizer_collective_time == pytest.approx(2 * 6 * (LAT + 1 / B), rel=1e-12)
    # three stages on one node: NCCL's ring on one node, 4 steps of (4 / 3) bytes inside it
    one = build_plan(_hosted(["x", "x", "x"]), prof, steps=1, check_memory=False)
    I3 = intra_bandwidth(prof, rep, 1, 4 / 3)
    assert one.optimizer_collective_time == pytest.approx(2 * 4 * (4 / 3) / I3, rel=1e-12)


def test_a_ring_across_shared_hosts_counts_the_tuners_steps(prof):
    """The ring over nodes of several ranks (which the tuner does not pick for a few bytes
    on 2 or more nodes, timed all the same): ``2 N`` of its ``2 (R - 1)`` steps cross
    between nodes (``tuning.cc`` 158-162, 248), the others inside one. Stages x, x, y, y:
    ``2 x 2`` steps of ``l + 1 / B``, 2 of ``1 / I``; the ring order is node by node
    (stages 0, 2, 1, 3 on x, y, x, y run as x: 0, 1 then y: 2, 3)."""
    from sim.profiles.build import _shared_host_allreduce_time, intra_bandwidth

    rep = ReplicaSpec("A100-40", 1, gpus_per_node=4, zone=A, host="x")
    I = intra_bandwidth(prof, rep, 1, 1.0)  # noqa: E741
    nodes = [(ReplicaSpec("A100-40", 1, gpus_per_node=4, zone=A, host=h), (j, 0))
             for j, h in enumerate("xyxy")]
    t = _shared_host_allreduce_time(prof.network, nodes, [[0, 2], [1, 3]], 4.0, "ring", prof)
    assert t == pytest.approx(4 * (LAT + 1 / B) + 2 * 1 / I, rel=1e-12)


DS32 = FrameworkSpec("deepspeed", precision="fp32")


def _dp_hosted(last_hosts, first_hosts, tp=2, fw=DS32):
    """Two stages of ``len(last_hosts)`` replicas at TP ``tp`` (4-GPU A100-40 nodes, zone A):
    stage 0's replica ``i`` on ``first_hosts[i]``, stage 1's on ``last_hosts[i]``."""
    def stage(layers, hosts):
        return StageSpec(layers, tuple(ReplicaSpec("A100-40", tp, gpus_per_node=4, zone=A,
                                                   host=h) for h in hosts))
    r = len(last_hosts)
    return Plan((stage(tuple(range(13)), first_hosts), stage(tuple(range(13, 26)),
                 last_hosts)), 2, 2 * r * 4, model="OPT-350", framework=fw)


def test_loss_all_reduce_of_data_parallel_ranks_on_shared_hosts(prof):
    """DeepSpeed fp32, two stages of four replicas at TP 2, the last stage's replicas 0, 1 on
    node a and 2, 3 on node b (stage 0's on c, c, d, d). The loss all-reduce runs on each of
    the two data-parallel groups (``runtime/pipe/topology.py``: one TP rank of each replica):
    4 ranks on 2 NCCL nodes (``init.cc`` 1110-1148), so the tuner's LL latencies (ring
    ``6.6 + (6 - 4) + 4 x 2.7 = 19.4`` us, tree ``6.8 + 2 ((4 / 2 - 1) + 5) = 18.8``) pick the
    tree (``tuning.cc`` 158-162, 248-252): a's chain 1 -> 0, b's 3 -> 2, b's first rank below
    a's (``connect.cc`` 50-59, 134-160). Both groups run at once: each hop carries 2 messages
    of 4 bytes, inside a node 2 flows at ``I`` (the A100's per-flow intra-node rate with 2
    flows), between nodes ``l + 2 x 4 / B``. Reduce, the slowest of 1 -> 0 and 3 -> 2 -> 0:
    ``4 / I + l + 8 / B``; the broadcast back the same. Then each last replica sends
    ``[loss, mean]`` (8 bytes, 2 flows) to its stage 0 over another node: ``l + 16 / B``.

    Neither half alone gives this: with every replica a node (the data-parallel fix alone) 4
    nodes of one rank, the ring, 6 steps of ``l + 2 (4 / 4) / B``; with the model-parallel
    rank count (the shared-host fix alone) 8 ranks on 2 nodes, the tree with one message a
    hop, ``2 (l + 4 / B + 4 / I1)``."""
    from sim.profiles.build import intra_bandwidth

    assert analytic.nccl_small_allreduce_algorithm(2, 4) == "tree"
    assert analytic.nccl_small_allreduce_algorithm(4, 4) == "ring"
    rep = ReplicaSpec("A100-40", 2, gpus_per_node=4, zone=A, host="a")
    I2 = intra_bandwidth(prof, rep, 2, 4.0)
    plan = _dp_hosted("aabb", "ccdd")
    b = build_plan(plan, prof, steps=1, check_memory=False)
    allreduce = 2 * (4 / I2 + LAT + 8 / B)
    hand = allreduce + LAT + 16 / B
    assert b.loss_time == pytest.approx(hand, rel=1e-12)
    assert b.optimizer_collective_time == 0.0  # fp32: no clipping, no overflow check
    assert abs(6 * (LAT + 2 / B) - allreduce) > 0.019  # each half alone, told apart
    I1 = intra_bandwidth(prof, rep, 1, 4.0)
    assert abs(2 * (LAT + 4 / B + 4 / I1) - allreduce) > 1e-8
    # the hosts interleaved (a, b, a, b): the same two nodes, chains 2 -> 0 and 3 -> 1
    inter = build_plan(_dp_hosted("abab", "cdcd"), prof, steps=1, check_memory=False)
    assert inter.loss_time == pytest.approx(hand, rel=1e-12)
    # two replicas on one node: NCCL's ring on one node (both groups at once), 2 steps of
    # 2 flows of 4 / 2 bytes inside it
    one = build_plan(_dp_hosted("aa", "cd"), prof, steps=1, check_memory=False)
    ring = 2 * 2 / intra_bandwidth(prof, rep, 2, 2.0)
    assert one.loss_time == pytest.approx(ring + LAT + 16 / B, rel=1e-12)
    # the DES over the plan's physical network agrees with the closed form
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(predictions("training", b.config)["step_time_mean"]["value"],
                                rel=1e-9)
