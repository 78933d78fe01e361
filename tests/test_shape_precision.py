"""A model given by its shape alone is sized in the precision its run trains in (user trial 10:
GPT-2 medium in fp16 on DeepSpeed 0.3.13, a shape without ``bytes_per_value``)."""

from __future__ import annotations

import pytest

from sim.profiles import ModelProfile, ModelShape, gpus_from_data
from sim.profiles.build import build_plan
from sim.profiles.frameworks import FrameworkSpec
from sim.profiles.values import NetworkProfile, Plan, Profiles, ReplicaSpec, StageSpec

S, H, A, V = 1024, 1024, 16, 50257
SHAPE = ModelShape(layers=4, hidden=H, heads=A, sequence=S, vocabulary=V, tied=True)
GPUS = gpus_from_data({"gpus": [{"name": "T4", "memory_bytes": "16GB", "overhead_bytes": "3GB",
                                 "overhead_tp1_bytes": "2GB", "intra_node_bandwidth": "15.75GB/s",
                                 "peak_flops": 65e12, "peak_flops_fp32": 8.1e12,
                                 "memory_bandwidth": "320GB/s"}]})


def _profiles(**model):
    return Profiles(models=(ModelProfile(name="gpt2", layers=6, times=(), sizes=(),
                                         tied_embeddings=True, shape=SHAPE, **model),),
                    gpus=GPUS, network=NetworkProfile(links=()))


def _plan(precision):
    rep = ReplicaSpec(gpu="T4", tp=1, gpus_per_node=4, zone="z", host="n0")
    return Plan(stages=(StageSpec(layers=tuple(range(6)), replicas=(rep,)),),
                microbatch_size=2, global_batch_size=8, model="gpt2",
                framework=FrameworkSpec("deepspeed", "0.3.13", precision,
                                        (("seq_length", S),)))


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_a_shape_is_sized_in_the_runs_precision(precision):
    """fp16: the default shape (4-byte values, 8 optimizer bytes) held fp32 activations, twice
    Korthikanti et al.'s ``s h (10 + 24/t + 5 a s / (h t))`` bytes a sample of 2-byte ones."""
    got = build_plan(_plan(precision), _profiles())
    vb = 2 if precision == "fp16" else 4
    per_layer = S * H * (10 + 24 + 5 * A * S / H) * vb / 2  # eq. 2 in 2-byte values, t = 1
    emb, head = S * H * vb, S * V * vb                     # the lookup's output, the logits
    mem = got.memory[0]
    assert mem.activations == 2 * (emb + 4 * per_layer + head)  # micro-batch 2, 1 in flight
    params = V * H + S * H + 4 * (12 * H * H + 13 * H) + 2 * H
    assert mem.weights == mem.gradients == params * vb
    assert mem.weights + mem.gradients + mem.optimizer == 16 * params  # ZeRO's 16 B/param
    # the same as a shape that says its precision; the times do not move
    said = build_plan(_plan(precision), _profiles(bytes_per_value=vb,
                                                  optimizer_bytes_per_param=16 - 2 * vb))
    assert said.memory == got.memory and said.stage_times == got.stage_times


def test_a_measured_profile_keeps_its_precision():
    m = ModelProfile(name="gpt2", layers=6, times=(), sizes=(), tied_embeddings=True,
                     shape=SHAPE)
    assert m.trained_at(2).bytes_per_value == 2 and m.trained_at(4) is m
    assert m.trained_at(2).optimizer_bytes_per_param == 12.0


def test_a_shapes_tp_time_names_its_all_reduces():
    """At TP 2 a shape's times hold the layer's FLOPs over 2 GPUs plus Megatron-LM's TP
    all-reduces over the node's link; the note named neither (only "estimated from the
    model's shape"), so --explain did not say where the PCIe time came from."""
    from sim.profiles.estimates import Estimator

    prof = _profiles()
    est = Estimator(prof, prof.models[0], value_bytes=2)
    rows, notes = est.layer_times("T4", 2, 2)
    b = 2
    ring = 2 * (2 - 1) * (b * S * H * 2 / 2) / 15.75e9           # one all-reduce of b s h fp16
    flops = (24 * b * S * H * H + 4 * b * S * S * H) / 2         # split over TP 2
    assert rows[1].forward == pytest.approx(flops / 65e12 + 2 * ring, rel=1e-12)
    assert rows[1].backward == pytest.approx(2 * flops / 65e12 + 2 * ring, rel=1e-12)
    assert "TP all-reduces" in notes[0] and "catalogue (T4" in notes[0]
    assert "cross entropy's 3 of b s fp32 values at s = 1024" in notes[0]
    _, one = est.layer_times("T4", 2, 1)
    assert "all-reduces" not in one[0]
