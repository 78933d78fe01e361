"""Megatron-LM's distributed optimizer pads each bucket of its buffer to ``lcm(d, 128)`` elements.

``_pad_end_of_bucket_if_needed`` (core_v0.9.0 ``param_and_grad_buffer.py:383-395``) and
``pad_bucket_end`` (d98e8a64dd ``core/optimizer/param_layout.py:29-44``): every bucket's end, so
the whole buffer, rounded up to a multiple of ``lcm(d, 128)``; the parameter and gradient buffers
are that long, the reduce-scatter and the all-gather move them whole, and rank ``r`` owns
``[r, r + 1) x padded / d`` of each bucket (``distrib_optimizer.py:178-185`` at core_v0.9.0), its
master weights and moments covering the parameters in that range only.

The hand example: LLaMA-2-7B's shape, 16 transformer layers a stage at TP 4, ``P = 805,519,360``
parameters a GPU (a multiple of 128, not of 3 x 128 = 384), over d = 3 replicas in bf16:
the buffer holds ``ceil(P / 384) x 384 = 805,519,488`` values (128 of padding), each rank's range
``268,506,496``; ranks 0 and 1 own that many parameters, rank 2 the last ``268,506,368``.
"""

from __future__ import annotations

import pytest
from test_megatron_dist_optimizer import (
    DO,
    P_HAND,
    B,
    Z,
    _hand_plan,
    _launch,
    prof,  # noqa: F401 (fixtures)
    slow,  # noqa: F401
)

from sim.engines import predictions
from sim.profiles.build import SCALAR_BYTES, build_plan, small_allreduce_time
from sim.profiles.megatron_args import megatron_plan_from_text
from sim.rng import Streams
from sim.training import training_model

N_HAND = 805_519_488  # ceil(805,519,360 / 384) x 384
EACH = 268_506_496  # N_HAND / 3
LAST = 268_506_368  # P_HAND - 2 x EACH


def test_the_buffer_and_shards_of_the_hand_example(prof):  # noqa: F811
    """bf16 over three replicas: weights 2N and gradients 4N of the padded buffer, the optimizer
    state 12 bytes for each parameter of the rank's shard (rank 2 owning 128 fewer); the model
    without padding (2P, 4P, 12P/3 on every rank) differs. Over 2 or 4 replicas lcm(d, 128) =
    128 divides P (and the embedding's 49,545,216): no padding, every rank P/d as before."""
    assert P_HAND % 128 == 0 and P_HAND % 384 == 256
    assert N_HAND % 384 == 0 and N_HAND - P_HAND == 128
    assert 3 * EACH == N_HAND and 2 * EACH + LAST == P_HAND
    for d in (2, 4):
        b = build_plan(_hand_plan(d=d, options=DO), prof, steps=1, check_memory=False)
        for g in b.memory[d:3 * d]:
            assert g.weights == 2 * P_HAND and g.optimizer == 12 * P_HAND / d
    b = build_plan(_hand_plan(d=3, options=DO), prof, steps=1, check_memory=False)
    for j in (1, 2):
        gs = b.memory[3 * j:3 * j + 3]
        for i, g in enumerate(gs):
            assert g.weights == 2 * N_HAND == 1_611_038_976
            assert g.gradients == 4 * N_HAND == 3_222_077_952
            assert g.optimizer == 12 * (EACH if i < 2 else LAST)
            assert g.grad_copy == 0.0
        assert [g.optimizer for g in gs] == [3_222_077_952, 3_222_077_952, 3_222_076_416]
        # 6N + 12 x 268,506,496 (ranks 0, 1) and 6N + 12 x 268,506,368 (rank 2); without the
        # padding 2P + 4P + 12P/3 = 10P = 8,055,193,600 on every rank
        assert gs[0].weights + gs[0].gradients + gs[0].optimizer == 8_055_194_880
        assert gs[2].weights + gs[2].gradients + gs[2].optimizer == 8_055_193_344
        assert 10 * P_HAND == 8_055_193_600


def test_the_collectives_move_the_padded_buffer(prof):  # noqa: F811
    """At 25 GB/s a GPU (4 flows of a 100 GB/s link), the reduce-scatter moves 2/3 of the fp32
    buffer of N values and the all-gather 2/3 of its bf16 one: 4 x (2/3) x 4N / B and
    4 x (2/3) x 2N / B, 0.08592207872 s and 0.04296103936 s; the unpadded P's differ (128
    values fewer: 0.0859220651 s and 0.0429610325 s)."""
    b = build_plan(_hand_plan(d=3, options=DO), prof, steps=1, check_memory=False)
    for j in (1, 2):
        rs, ag = b.allreduce_times[j], b.param_allgather_times[j]
        assert rs == pytest.approx(4 * (2 / 3) * 4 * N_HAND / B, rel=1e-12)
        assert ag == pytest.approx(4 * (2 / 3) * 2 * N_HAND / B, rel=1e-12)
        assert round(rs, 6) == 0.085922 and round(ag, 6) == 0.042961
        assert rs != pytest.approx(4 * (2 / 3) * 4 * P_HAND / B, rel=1e-12)
        assert ag != pytest.approx(4 * (2 / 3) * 2 * P_HAND / B, rel=1e-12)


def test_buckets_and_shards():
    """The cut and the ranks' parameters by hand: 100,000,001 values over d = 3 in buckets of
    4e7: 40,000,000 twice and 20,000,001, padded to 40,000,128 and 20,000,256 (multiples of
    384); each rank's range a third of each bucket."""
    from sim.profiles.build import dist_optimizer_buckets, dist_shard_elements

    cut = dist_optimizer_buckets(100_000_001, 3, 4e7)
    assert cut == ((40_000_000, 40_000_128), (40_000_000, 40_000_128), (20_000_001, 20_000_256))
    assert dist_optimizer_buckets(100_000_001, 3) == ((100_000_001, 100_000_128),)
    # per bucket a rank owns 13,333,376 (twice) and 6,666,752 of the range
    assert [dist_shard_elements(cut, 3, r) for r in range(3)] == [
        13_333_376 * 2 + 6_666_752, 13_333_376 * 2 + 6_666_752,
        (40_000_000 - 2 * 13_333_376) * 2 + (20_000_001 - 2 * 6_666_752)]
    assert sum(dist_shard_elements(cut, 3, r) for r in range(3)) == 100_000_001
    assert dist_optimizer_buckets(256, 2) == ((256, 256),)
    assert dist_optimizer_buckets(1, 1) == ((1, 128),)


def test_overlapped_buckets_are_each_padded(slow):  # noqa: F811
    """--overlap-grad-reduce over DP 3: the first stage's buckets (the embedding, 32,000 x
    4,096 / 4 word and 4,096 x 4,096 position values, and 16 layers: 855,064,576 values) are 21
    of 4e7 values and 15,064,576, each padded to a multiple of 384: 40,000,128 and 15,064,704
    values, 4 bytes each in the reduce-scatter."""
    m = slow.model("L7")
    plan = megatron_plan_from_text(_launch("--use-distributed-optimizer --overlap-grad-reduce",
                                           nodes=6, gbs=12), "x", m, "A100-80", Z)
    assert plan.dp == (3, 3)
    b = build_plan(plan, slow, steps=1, check_memory=False)
    sizes = [s for s, _ in b.bucket_times[0]]
    assert 32_000 * 4_096 // 4 + 4_096 * 4_096 + P_HAND == 855_064_576 == 21 * 40_000_000 + \
        15_064_576
    assert sizes == [4.0 * 40_000_128] * 21 + [4.0 * 15_064_704]
    # the last stage: one bucket (Megatron-LM's rule), its size a multiple of 384 values
    (last, _), = b.bucket_times[1]
    assert last % (4 * 384) == 0 and b.memory[3].gradients == last
    # the all-gather: bucket by bucket, 2/3 of each padded bucket in bf16 (10 us a message)
    want = sum(2 * (1e-5 + 4 * (2 * n / 3) / B) for n in [40_000_128] * 21 + [15_064_704])
    assert b.param_allgather_times[0] == pytest.approx(want, rel=1e-12)
    unpadded = sum(2 * (1e-5 + 4 * (2 * n / 3) / B) for n in [40_000_000] * 21 + [15_064_576])
    assert b.param_allgather_times[0] != pytest.approx(unpadded, rel=1e-12)


def test_step_time_exact_reference_over_three(slow):  # noqa: F811
    """One stage over five TP-4 replicas (10 us a message): the model's 1,693,360,128 values a
    GPU (a multiple of 384, not of lcm(5, 128) = 640) padded by 512 to 1,693,360,640; the
    reduce-scatter and all-gather move the padded buffer, in the closed form and in the DES
    over the network alike."""
    m = slow.model("L7")
    plan = megatron_plan_from_text(_launch("--use-distributed-optimizer", pp=1, nodes=5,
                                           gbs=10), "x", m, "A100-80", Z)
    b = build_plan(plan, slow, steps=1, check_memory=False)
    P = sum(s.params for s in m.layer_sizes(4))
    N = 1_693_360_640
    assert P == 1_693_360_128 and N % 640 == 0 and 0 < N - P < 640
    assert b.memory[0].weights == 2 * N and b.memory[0].gradients == 4 * N
    f, bwd, opt = b.stage_times[0][0]
    lat, n, t = 1e-5, 5, 4
    rs = (n - 1) * (lat + t * (4 * N / n) / B)
    ag = (n - 1) * (lat + t * (2 * N / n) / B)
    world = [(x, (0, i)) for i, x in enumerate(plan.stages[0].replicas)]
    norm = small_allreduce_time(slow.network, world, SCALAR_BYTES, slow)
    want = 2 * (f + bwd) + rs + opt / n + ag + norm
    step = predictions("training", b.config)["step_time_mean"]["value"]
    assert step == pytest.approx(want, rel=1e-12)
    rs0 = (n - 1) * (lat + t * (4 * P / n) / B)
    ag0 = (n - 1) * (lat + t * (2 * P / n) / B)
    assert step != pytest.approx(2 * (f + bwd) + rs0 + opt / n + ag0 + norm, rel=1e-12)
    net = build_plan(plan, slow, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(want, rel=1e-9)
