"""The step's small blocking collectives: the optimizer's one-value all-reduces over the
model-parallel group and DeepSpeed's loss all-reduce and broadcast (``step_collectives``).

Worked by hand on a network of one constant bandwidth ``B`` and latency ``l`` on every link,
where a ring all-reduce of ``S`` bytes over ``n`` nodes of ``t`` flows is ``2 (n - 1)`` steps of
``l + t (S / n) / B`` and a message of ``S`` bytes ``l + t S / B``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.engines import predictions
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model

Z = "us-central1-a"
B, LAT = 1e9, 5e-3


def one_link_profiles(bandwidth=B, latency=LAT):
    """The shipped OPT-350 profiles with every link of ``bandwidth`` and ``latency`` (this
    file's ``B`` and ``LAT`` by default; also tests/test_bf16_optimizer.py's and, at 1 Gbit/s
    and 10 ms, tests/test_partition_meta.py's)."""
    p = load_profiles(models=("OPT-350",))
    return replace(p, network=replace(p.network, links=tuple(
        replace(x, bandwidth=bandwidth, latency=latency) for x in p.network.links)))


@pytest.fixture(scope="module")
def prof():
    return one_link_profiles()


def _plan(L, r, tp=1, fw=None):
    cuts = [round(26 * k / L) for k in range(L + 1)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), tuple(
        ReplicaSpec("A100-40", tp, gpus_per_node=4, zone=Z) for _ in range(r)))
        for j in range(L)), 2, 2 * r * 4, model="OPT-350", framework=fw)


def _ring(n, size, flows=1):
    return 2 * (n - 1) * (LAT + flows * (size / n) / B)


def _tree(depth, size):
    """NCCL's tree all-reduce of a few bytes: up and down ``depth`` hops, one message each."""
    return 2 * depth * (LAT + size / B)


def _step(b):
    return predictions("training", b.config)["step_time_mean"]["value"]


def _opt(b):
    """Each stage's optimizer step as the profile gives it (its replicas' largest)."""
    return [max(t[2] for t in row) for row in b.stage_times]


@pytest.mark.parametrize("fw, n", [
    (FrameworkSpec("deepspeed", precision="fp16"), 2),  # overflow flag, gradient norm
    (FrameworkSpec("deepspeed", precision="bf16"), 1),  # gradient norm
    (FrameworkSpec("deepspeed", version="0.3.13", precision="fp16",
                   options=(("seq_length", 128),)), 2),
    (FrameworkSpec("megatron", precision="fp16"), 4),  # found_inf, norm, update flag, norm max
    (FrameworkSpec("megatron", precision="bf16"), 3),
    (FrameworkSpec("megatron", version="0.10.0", precision="fp16"), 2),  # no train_step's two
])
def test_optimizer_allreduces_over_the_pipeline_by_hand(prof, fw, n):
    """Three stages, one pipeline, TP 2: ``n`` one-value (4-byte) all-reduces, each on NCCL's
    tree over the three stage nodes (its tuner's pick for 3 nodes; 0 <- 2 <- 1, depth 2):
    ``n x 4 (l + 4 / B)``, added to every stage's optimizer step (every stage waits for
    them), and to the step."""
    b = build_plan(_plan(3, 1, tp=2, fw=fw), prof, steps=1, check_memory=False)
    hand = n * _tree(2, 4.0)
    assert hand > 0.019
    # DeepSpeed's loss broadcast from the last stage reaches stage 0 over one link, two flows
    loss = LAT + 2 * 8.0 / B if fw.framework.key == "deepspeed" else 0.0
    o = _opt(b)
    assert b.config.optimizer_times == pytest.approx(
        (o[0] + hand, o[1] + hand, o[2] + hand + loss), rel=1e-12)
    # the step: the phase, the largest reduction, then the collectives and each stage's
    # optimizer step (the last stage's with the loss's)
    less = replace(b.config, optimizer_times=tuple(o))
    gap = _step(b) - predictions("training", less)["step_time_mean"]["value"]
    assert gap == pytest.approx(hand + max(o[0], o[1], o[2] + loss) - max(o), rel=1e-9)
    assert b.optimizer_collective_time == pytest.approx(hand, rel=1e-12)
    assert b.loss_time == pytest.approx(loss, rel=1e-12)
    # the DES over the plan's network agrees with the closed form
    net = build_plan(_plan(3, 1, tp=2, fw=fw), prof, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(_step(b), rel=1e-9)


def test_no_optimizer_allreduce_in_fp32_deepspeed_or_on_one_stage(prof):
    """DeepSpeed in fp32 clips only when asked (off by default): no collective; a one-stage
    plan's model-parallel group is its TP group inside one node: none timed."""
    b = build_plan(_plan(3, 1, fw=FrameworkSpec("deepspeed", precision="fp32")), prof, steps=1,
                   check_memory=False)
    assert b.config.optimizer_times[:2] == tuple(_opt(b)[:2])
    assert b.optimizer_collective_time == 0.0
    one = build_plan(_plan(1, 2, tp=2, fw=FrameworkSpec("megatron", precision="fp16")), prof,
                     steps=1, check_memory=False)
    assert one.optimizer_collective_time == 0.0
    assert one.loss_time == 0.0  # Megatron-LM: no loss broadcast over the pipeline


def test_deepspeed_loss_all_reduce_and_broadcast_by_hand(prof):
    """DeepSpeed fp32, three stages, two pipelines, TP 1: the last stages all-reduce the loss
    (4 bytes, a ring of 2: ``2 (l + 2 / B)``), then each broadcasts ``[loss, mean]`` (8 bytes)
    over its pipeline, reaching stage 0 over the link back to it (``l + 8 / B``): the last
    stage's step ends that much later."""
    b = build_plan(_plan(3, 2, fw=FrameworkSpec("deepspeed", precision="fp32")), prof, steps=1,
                   check_memory=False)
    hand = _ring(2, 4.0) + LAT + 8.0 / B
    opt = _opt(b)
    assert b.config.optimizer_times == pytest.approx((opt[0], opt[1], opt[2] + hand), rel=1e-12)
    assert b.loss_time == pytest.approx(hand, rel=1e-12)
    # one pipeline: the broadcast alone
    one = build_plan(_plan(3, 1, fw=FrameworkSpec("deepspeed", precision="fp32")), prof,
                     steps=1, check_memory=False)
    assert one.loss_time == pytest.approx(LAT + 8.0 / B, rel=1e-12)
    # the Sailor artifact's engine aggregates the loss as DeepSpeed does; after its barrier
    # stage j ends at a_j + o_j (its all-reduce, its optimizer step), the last one later
    s = build_plan(_plan(3, 2, fw=FrameworkSpec("sailor-deepspeed")), prof, steps=1,
                   check_memory=False)
    assert s.loss_time == pytest.approx(hand, rel=1e-12)
    less = replace(s.config, optimizer_times=tuple(_opt(s)))
    ends = [a + o for a, o in zip(s.allreduce_times, _opt(s), strict=True)]
    expect = max(ends[0], ends[1], ends[2] + hand) - max(ends)
    assert expect > 0
    assert _step(s) - predictions("training", less)["step_time_mean"]["value"] == \
        pytest.approx(expect, abs=1e-12)


@pytest.mark.parametrize("r, steps, flows", [
    (4, 6, 1),  # NCCL's ring over 4 nodes of one rank: 6 steps of l + 2 (4 / 4) / B
    (3, 4, 2),  # its tree over 3 (depth 2): 4 hops, each the replica's 2 messages at once
    (2, 2, 1),  # its ring over 2: 2 steps of l + 2 (4 / 2) / B
])
def test_deepspeed_loss_all_reduce_one_rank_a_node_at_tp_2(prof, r, steps, flows):
    """DeepSpeed's loss all-reduce runs over its data-parallel group, one TP rank of each
    replica (runtime/pipe/topology.py: ranks differing in the data axis alone): at TP 2,
    ``r`` nodes of one rank each to NCCL's tuner (the ring on 2 and 4, the tree on 3), the
    replica's two groups at once. It took the replica's TP ranks as the group's: the tree on
    4 nodes (4 hops, not the ring's 6) and one message a tree hop."""
    b = build_plan(_plan(3, r, tp=2, fw=FrameworkSpec("deepspeed", precision="fp32")), prof,
                   steps=1, check_memory=False)
    per = 2 * 4.0 / r if flows == 1 else 2 * 4.0  # bytes a step or hop: two groups at once
    hand = steps * (LAT + per / B) + LAT + 2 * 8.0 / B
    assert b.loss_time == pytest.approx(hand, rel=1e-12)
