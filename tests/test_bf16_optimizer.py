"""DeepSpeed's BF16_Optimizer, what the pipeline engine builds for bf16 (0.9.0 to 0.16.5): the
fp32 master weights and optimizer state partitioned over the data-parallel group, the updated
bf16 weights all-gathered over it after every optimizer step (``bf16_allgather_times``,
``bf16_optimizer_memory``).

Worked by hand on a network of one constant bandwidth ``B`` and latency ``l`` on every link,
where a ring all-gather of ``r`` partitions of ``p`` bytes, ``t`` flows a node, is ``r - 1``
steps of ``l + t p / B``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_step_collectives import LAT, B, Z, _plan, one_link_profiles

from sim.engines import predictions
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.frameworks import DEEPSPEED_TAGS, FrameworkSpec, resolve
from sim.rng import Streams
from sim.training import training_model


@pytest.fixture(scope="module")
def prof():
    return one_link_profiles()  # every link B and LAT, as the step collectives' tests


def _params(prof, plan, tp):
    sizes = prof.model("OPT-350").layer_sizes(tp)
    return [sum(sizes[x].params for x in st.layers) for st in plan.stages]


def _flat(P, r):
    """The flat bf16 buffer: P padded up to a multiple of 2 r (nccl_start_alignment_factor x dp)."""
    return math.ceil(P / (2 * r)) * 2 * r


def _step(b):
    return predictions("training", b.config)["step_time_mean"]["value"]


BF16 = FrameworkSpec("deepspeed", precision="bf16")


def test_bf16_allgather_after_the_step_by_hand(prof):
    """Two stages, three pipelines, TP 2, DeepSpeed 0.16.5 bf16: after its optimizer step each
    stage all-gathers its flat bf16 weights over its 3 replicas, one all_gather_into_tensor:
    ``2 (l + 2 x 2 flat / 3 / B)`` (2 steps, 2 flows of a partition's bf16 bytes), added to
    its optimizer step after the gradient norm's all-reduce; the DES agrees."""
    plan = _plan(2, 3, tp=2, fw=BF16)
    b = build_plan(plan, prof, steps=1, check_memory=False)
    hand = [2 * (LAT + 2 * (2.0 * _flat(P, 3) / 3) / B) for P in _params(prof, plan, 2)]
    assert min(hand) > 0.2  # a quarter of OPT-350's 0.35e9 bf16 values over 1 GB/s
    o = [max(t[2] for t in row) for row in b.stage_times]
    coll, loss = b.optimizer_collective_time, b.loss_time
    assert coll > 0 and loss > 0
    assert b.config.optimizer_times == pytest.approx(
        (o[0] + coll + hand[0], o[1] + coll + loss + hand[1]), rel=1e-12)
    assert b.bf16_allgather_times == pytest.approx(tuple(hand), rel=1e-12)
    # the DES over the plan's network agrees with the closed form
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(_step(b), rel=1e-9)
    # fp16 (the fused optimizer, unpartitioned) and one pipeline: no all-gather
    fp16 = build_plan(_plan(2, 3, tp=2, fw=FrameworkSpec("deepspeed", precision="fp16")),
                      prof, steps=1, check_memory=False)
    assert not any(fp16.bf16_allgather_times)
    one = build_plan(_plan(2, 1, tp=2, fw=BF16), prof, steps=1, check_memory=False)
    assert not any(one.bf16_allgather_times)


def test_bf16_allgather_in_shards_before_all_gather_into_tensor(prof):
    """Up to 0.12.3 ``all_gather_dp_groups`` all-gathers ``max(1, flat // bucket)`` shards of
    ``partition // shards`` elements (made even), the last the remainder (``runtime/utils.py``;
    the bucket ``allgather_bucket_size``, 5e8): with a bucket of 1e6 elements, one stage of
    three replicas at TP 1, each shard ``2 (l + 2 x shard / B)``."""
    from sim.profiles.build import bf16_allgather_times

    fw = FrameworkSpec("deepspeed", "0.12.3", "bf16")
    fb = resolve(fw, 4)
    assert fb.bf16_allgather == 5e8
    assert resolve(FrameworkSpec("deepspeed", "0.12.4", "bf16"), 4).bf16_allgather == math.inf
    plan = _plan(1, 3, fw=fw)
    P = _params(prof, plan, 1)[0]
    flat = _flat(P, 3)
    part = flat // 3
    shards = flat // 1_000_000
    each = part // shards - (part // shards) % 2
    last = part - (shards - 1) * each
    assert shards > 100 and last > each
    hand = (shards - 1) * 2 * (LAT + 2.0 * each / B) + 2 * (LAT + 2.0 * last / B)
    got = bf16_allgather_times(plan, prof.network, replace(fb, bf16_allgather=1e6), [P], prof)
    assert got == pytest.approx((hand,), rel=1e-12)
    # at 5e8 (a stage below 1e9 elements): one shard, as the whole
    one = bf16_allgather_times(plan, prof.network, fb, [P], prof)
    assert one == pytest.approx((2 * (LAT + 2.0 * part / B),), rel=1e-12)


def test_bf16_optimizer_memory_by_hand(prof):
    """A rank of a stage of ``P`` parameters over ``r = 3`` replicas under BF16_Optimizer: the
    flat bf16 weights ``2 flat``, the bf16 gradients ``2 P`` and the fp32 ones ``4 flat``, and
    its partition's fp32 master weights and Adam moments ``(flat / 3) (4 + 8)`` (the fp32
    profile's 8 bytes are the moments); fp16 keeps the profile's terms, whole."""
    plan = _plan(2, 3, tp=2, fw=BF16)
    b = build_plan(plan, prof, steps=1, check_memory=False)
    fp16 = build_plan(_plan(2, 3, tp=2, fw=FrameworkSpec("deepspeed", precision="fp16")), prof,
                      steps=1, check_memory=False)
    for g, h in zip(b.memory, fp16.memory, strict=True):
        P = _params(prof, plan, 2)[g.stage]
        flat = _flat(P, 3)
        assert (g.weights, g.gradients, g.optimizer) == (2.0 * flat, 2.0 * P + 4.0 * flat,
                                                          flat // 3 * 12.0)
        assert (h.weights, h.gradients, h.optimizer) == (4.0 * P, 4.0 * P, 8.0 * P)
        assert g.total - h.total == pytest.approx(
            (2 * flat + 2 * P + 4 * flat + flat // 3 * 12) - 16 * P, rel=1e-12)
    # one replica: the whole state on the rank (fp32 master and moments, 12 bytes)
    one = build_plan(_plan(2, 1, tp=2, fw=BF16), prof, steps=1, check_memory=False)
    P = _params(prof, plan, 2)[0]
    assert one.memory[0].optimizer == _flat(P, 1) * 12.0


def test_every_deepspeed_tag_builds_the_bf16_optimizer():
    """Every release 0.9.0 to 0.16.4 selects BF16_Optimizer for bf16 without ZeRO and cites
    it at its own tag; all_gather_into_tensor from 0.12.4, shards before."""
    for v, fw in DEEPSPEED_TAGS.items():
        c = fw.bf16_optimizer
        assert c is not None and c.source.startswith(f"microsoft/DeepSpeed v{v} (tag v{v})"), v
        new = tuple(map(int, v.split("."))) >= (0, 12, 4)
        assert c.value == (math.inf if new else 5e8), v
        assert ("all_gather_into_tensor" in c.source) == new, v
    assert resolve(FrameworkSpec("deepspeed", "0.3.13", "fp16"), 4).bf16_allgather is None
    assert resolve(FrameworkSpec("sailor-deepspeed", precision="bf16"), 4).bf16_allgather is None


def test_bf16_allgather_on_physical_nodes_is_half_the_ring(prof):
    """One stage of OPT-350 (407,431,168 parameters, a multiple of 2 r = 4: no padding) on two
    RTX-3090 nodes of named hosts, DeepSpeed 0.16.5 bf16: its gradient all-reduce moves the
    same 2-byte values over the same ring (one bucket, under 5e8 elements), so the all-gather
    is half of it exactly, ``r - 1`` of its ``2 (r - 1)`` steps."""
    base = load_profiles(models=("OPT-350",))
    reps = tuple(ReplicaSpec("RTX-3090", 1, 2, Z, host=h) for h in "ab")
    plan = Plan((StageSpec(tuple(range(26)), reps),), 1, 64, model="OPT-350", framework=BF16)
    b = build_plan(plan, base, check_memory=False)
    assert plan.physical and _params(base, plan, 1) == [407_431_168]
    assert b.allreduce_times[0] > 7.0
    assert b.config.optimizer_times[0] == pytest.approx(
        b.stage_times[0][0][2] + b.loss_time + b.allreduce_times[0] / 2, rel=1e-12)
    assert b.bf16_allgather_times == (b.allreduce_times[0] / 2,)


def test_bf16_gradient_all_reduce_is_one_collective_of_the_flat_buffer():
    """With BF16_Optimizer the pipeline engine all-reduces the optimizer's fp32 flat gradient
    buffer, one tensor, which DeepSpeed's ``allreduce_no_retain`` never splits (0.16.5
    ``runtime/pipe/engine.py:303-304``, ``runtime/engine.py:2523-2534``): one ring of the
    stage's 2-byte values whatever its size, not ``MEMORY_OPT_ALLREDUCE_SIZE`` (5e8-element)
    buckets. LLaMA-3-8 on one stage at TP 2 (4.4e9 values a GPU), two replicas: ``2 (l + 2 x
    (2 P / 2) / B)``; it paid ``2 l`` per bucket, nine of them. fp16 keeps its buckets."""
    base = load_profiles(models=("LLAMA-3-8",))
    prof = replace(base, network=replace(base.network, links=tuple(
        replace(x, bandwidth=B, latency=LAT) for x in base.network.links)))
    model = prof.model("LLAMA-3-8")
    reps = tuple(ReplicaSpec("A100-40", 2, gpus_per_node=4, zone=Z) for _ in range(2))
    stage = StageSpec(tuple(range(model.layers)), reps)
    b = build_plan(Plan((stage,), 1, 16, model="LLAMA-3-8", framework=BF16), prof, steps=1,
                   check_memory=False)
    P = sum(x.params for x in model.layer_sizes(2))
    assert P > 8 * 5e8
    assert b.allreduce_times[0] == pytest.approx(2 * (LAT + 2 * (2.0 * P / 2) / B), rel=1e-12)
    fp16 = build_plan(Plan((stage,), 1, 16, model="LLAMA-3-8",
                           framework=FrameworkSpec("deepspeed", precision="fp16")), prof,
                      steps=1, check_memory=False)
    buckets = math.ceil(P / 5e8)
    assert fp16.allreduce_times[0] == pytest.approx(
        2 * (buckets * LAT + 2 * (2.0 * P / 2) / B), rel=1e-12)
