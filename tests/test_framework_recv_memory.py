"""Received inputs as each DeepSpeed release allocates them (issue 35), hand-worked in bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan, plan_memory, recv_memory
from sim.profiles.frameworks import DEEPSPEED_TAGS, RELEASES, FrameworkSpec
from sim.profiles.values import ModelShape

MIB = 2 ** 20


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _plan(tp, cuts=(0, 9, 17, 26), framework=None):
    """OPT-350 (26 layers) in 3 stages at one TP degree, 2 replicas on A100-40s, micro-batch 2,
    global batch 16: m = 4 micro-batches a pipeline. Every layer's output is 2048 x 1024 fp32
    values a sample (8 MiB; llm_info.json's OPT-350), so one micro-batch's input A = 16 MiB."""
    stages = tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), tuple(
        ReplicaSpec("A100-40", tp, gpus_per_node=tp, zone="us-central1-a") for _ in range(2)))
        for j in range(len(cuts) - 1))
    return Plan(stages, 2, 16, model="OPT-350", framework=framework or FrameworkSpec("deepspeed"))


def _buffers(prof, tp, version, options=()):
    fw = FrameworkSpec("deepspeed", version, options=options)
    built = build_plan(_plan(tp, framework=fw), prof, steps=1, check_memory=False)
    return [g.buffers / MIB for g in built.memory]


def test_upstream_deepspeed_holds_its_received_inputs_as_allocated(prof):
    """Upstream DeepSpeed 0.9.0 to 0.16.5 (``runtime/pipe/engine.py`` at each tag): one receive
    buffer kept across steps, the received clone kept per micro-batch in flight, and at TP 1 the
    forward pass's clone of it beside (the first layer's input); with TP > 1 partitioned the
    buffer holds the 1/t part and the slot the rebuilt whole input (no second clone). In flight
    n = min(L - j, m) = 2, 1 at stages 1, 2 (the schedule sends the previous gradient before it
    receives, schedule.py:216), A = 16 MiB:

    * TP 1: stage 1 A + 2 x 2 A = 80 MiB, stage 2 A + 2 x 1 A = 48 MiB (main counted
      max(2, n) A = 32 and 32);
    * TP 2: stage 1 A/2 + 2 A = 40 MiB, stage 2 A/2 + A = 24 MiB;
    * TP 2 with pipe_partitioned off (0.12.3 on): as TP 1, 80 and 48 MiB.

    Stage 0 receives nothing. 0.3.13 and the Sailor artifact's engine keep their slots:
    0.3.13 max(2, min(L - j + 1, m)) A = 48, 32 MiB plus its masks (28, 28, 20 MiB), the
    artifact max(2, n) A = 32, 32 MiB."""
    for version in ("0.16.5", "0.16.4", "0.12.2", "0.9.0"):
        assert _buffers(prof, 1, version) == [0, 0, 80, 80, 48, 48], version
        assert _buffers(prof, 2, version) == [0, 0, 40, 40, 24, 24], version
    for version in ("0.16.4", "0.12.3"):
        assert _buffers(prof, 2, version, (("grad_partitioned", False),
                                           ("pipe_partitioned", False))) == \
            [0, 0, 80, 80, 48, 48], version
    assert _buffers(prof, 1, "0.3.13", (("seq_length", 2048),)) == [28, 28, 76, 76, 52, 52]
    sailor = build_plan(_plan(1, framework=FrameworkSpec("sailor-deepspeed")), prof, steps=1,
                        check_memory=False)
    assert [g.buffers / MIB for g in sailor.memory] == [0, 0, 32, 32, 32, 32]
    # every tag from 0.9.0 to 0.16.4 reads the same code, each at its own lines
    assert all(fw.recv_inputs.value == "clone" for fw in DEEPSPEED_TAGS.values())
    assert "engine.py:1119 (one receive buffer" in DEEPSPEED_TAGS["0.16.4"].recv_inputs.source
    assert "engine.py:1007 (one receive buffer" in DEEPSPEED_TAGS["0.9.0"].recv_inputs.source
    assert RELEASES["deepspeed"]["0.3.13"].recv_inputs is None
    assert RELEASES["sailor-deepspeed"]["0.16.5"].recv_inputs is None


def test_a_shape_estimated_layer_holds_its_input_once(prof):
    """A model sized from its shape (Korthikanti et al. 2022, eq. 2: s h (10 + 24/t + ...)
    bytes a sample in fp16) counts the first LayerNorm's input, 2 s h bytes (s h x 4 here,
    fp32), in its activations: the whole received input of one micro-batch. Where that input is
    the first layer's (partitioned: the rebuilt input; unpartitioned: the forward pass's
    clone), it is not counted again. OPT-350 with sizes profiled at TP 1 only and its shape
    (24 layers, h 1024, 16 heads, s 2048), DeepSpeed 0.16.4 (A = 16 MiB, n = 2, 1):

    * TP 2 from the shape, partitioned: the buffer's part alone, A/2 = 8 MiB at stages 1, 2;
      unpartitioned: A + n A = 48, 32 MiB;
    * TP 1 profiled (a layer's measured memory excludes its input): 80, 48 MiB as before;
    * a last stage holding the head alone (layer 25: its memory is the logits) keeps the whole
      count: partitioned A/2 + A = 24 MiB, unpartitioned A + 2 A = 48 MiB."""
    model = prof.model("OPT-350")
    shaped = replace(model, sizes=tuple((t, r) for t, r in model.sizes if t == 1),
                     shape=ModelShape(24, 1024, 16, 2048, 50272, tied=False))
    assert shaped.shape_sized(2) and not shaped.shape_sized(1)
    # the shape's transformer layer at TP 2 holds its input: 2 s h x 2 (fp32) of its s h (10 ...)
    s, h = 2048, 1024
    assert shaped.layer_sizes(2)[1].activation_memory_bytes == \
        s * h * (10 + 24 / 2 + 5 * 16 * s / (h * 2)) * 2
    assert shaped.layer_sizes(2)[1].activation_bytes == s * h * 4 == 8 * MIB

    def held(tp, partitioned, cuts=(0, 9, 17, 26)):
        return [g.buffers / MIB for g in plan_memory(_plan(tp, cuts), shaped, prof.gpus,
                                                     recv_clones=True, partitioned=partitioned)]
    assert held(2, True) == [0, 0, 8, 8, 8, 8]
    assert held(2, False) == [0, 0, 48, 48, 32, 32]
    assert held(1, True) == held(1, False) == [0, 0, 80, 80, 48, 48]
    assert held(2, True, (0, 9, 25, 26)) == [0, 0, 8, 8, 24, 24]
    assert held(2, False, (0, 9, 25, 26)) == [0, 0, 48, 48, 48, 48]
    # the rule by itself: received bytes, in flight, TP, partitioned, in the activations
    assert recv_memory(16.0, 2, 2, True, False) == 8 + 32
    assert recv_memory(16.0, 2, 1, True, False) == 16 + 64  # TP 1 never partitions
    assert recv_memory(16.0, 2, 1, False, True) == 16 + 32
