"""sim.profiles.estimates: times a profile does not hold, each by a stated rule, marked."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest

from sim.engines import predictions
from sim.errors import ConfigError
from sim.profiles import (
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    ModelProfile,
    ModelShape,
    NetworkProfile,
    Plan,
    Profiles,
    ReplicaSpec,
    StageSpec,
    load_profiles,
    model_from_data,
    model_to_data,
)
from sim.profiles.build import build_plan
from sim.profiles.estimates import ADAM_BYTES_PER_PARAM, Estimator, tp_collectives
from sim.rng import Streams
from sim.training import training_model

BW = 1e10  # the toy GPU's intra-node bandwidth, bytes/s


def _profiles(times, sizes=None, shape=None, **kw) -> Profiles:
    sizes = sizes if sizes is not None else ((1, tuple(LayerSizes(1000, 4.0e6, 1.0e6)
                                                         for _ in range(4))),)
    m = ModelProfile("M", 4, times, sizes, shape=shape, **kw)
    gpu = GPUType("G", 1e12, intra_node_bandwidth=BW, peak_flops=1e14, peak_flops_fp32=2e13,
                  memory_bandwidth=1e12)
    return Profiles((m,), GPUCatalogue((gpu,)), NetworkProfile(()))


def _row(f: float, b: float | None = None, o: float | None = 0.0) -> tuple[LayerTimes, ...]:
    return tuple(LayerTimes(f * (i + 1), None if b is None else b * (i + 1), o) for i in range(4))


def test_tp_derived_from_tp1_adds_megatrons_allreduces():
    """TP t from a TP-1 profile: the split compute / t plus the replicated work whole, plus 2
    all-reduces of b s h forward and 2 backward per transformer layer (1 forward in the
    embedding, 1 backward in the head), each a ring of 2 (t-1) steps of S/t bytes at the
    intra-node bandwidth."""
    p = _profiles(((("G", 2, 1), _row(1.0, 2.0, 0.5)),))
    e = Estimator(p, p.models[0])
    rows, notes = e.layer_times("G", 2, 4)
    rep = e.replicated_times("G", 2)
    S = 2 * 4.0e6  # two samples' hidden states, fp32 as profiled
    ar = 2 * 3 * (S / 4) / BW
    for i, r in enumerate(rows):
        nf, nb = tp_collectives(i, 4)
        rf, rb = rep[i]
        assert r.forward == pytest.approx((1.0 * (i + 1) - rf) / 4 + rf + nf * ar, rel=1e-12)
        assert r.backward == pytest.approx((2.0 * (i + 1) - rb) / 4 + rb + nb * ar, rel=1e-12)
    assert [tp_collectives(i, 4) for i in range(4)] == [(1, 0), (2, 2), (2, 2), (0, 1)]
    assert any("TP 4 derived from TP 1" in n and "estimated by roofline" in n for n in notes)
    # without an intra-node bandwidth or a memory bandwidth there is no rule: one line naming it
    bare = replace(p, gpus=GPUCatalogue((GPUType("G", 1e12, memory_bandwidth=1e12),)))
    with pytest.raises(ConfigError, match="'intra_node_bandwidth' must be given for G"):
        Estimator(bare, bare.models[0]).layer_times("G", 2, 4)
    blind = replace(p, gpus=GPUCatalogue((GPUType("G", 1e12, intra_node_bandwidth=BW),)))
    with pytest.raises(ConfigError, match="'memory_bandwidth' must be given for G in the GPU "
                       "catalogue .to estimate the work a TP group replicates"):
        Estimator(blind, blind.models[0]).layer_times("G", 2, 4)


def _hand_profile(memory_bandwidth: float = 1e12) -> Profiles:
    """Four layers (embedding, two transformer layers, head), fp32, 1e6 hidden values per sample
    (4e6 bytes), TP-1 times at micro-batch 2 in seconds."""
    rows = (LayerTimes(1e-3, 0.0, 0.0), LayerTimes(1e-3, 2e-3, 0.0),
            LayerTimes(1e-3, 2e-3, 0.0), LayerTimes(1.6e-5, 1e-3, 0.0))
    m = ModelProfile("M", 4, ((("G", 2, 1), rows),),
                     ((1, tuple(LayerSizes(1000, 4.0e6, 1.0e6) for _ in range(4))),))
    gpu = GPUType("G", 1e12, intra_node_bandwidth=BW, memory_bandwidth=memory_bandwidth)
    return Profiles((m,), GPUCatalogue((gpu,)), NetworkProfile(()))


def test_derived_tp_splits_only_what_megatron_splits_hand_worked():
    """A hand-worked example. Micro-batch 2: N = b s h = 2e6 values of 4 bytes, P = s h = 1e6,
    dropout masks 1 byte, memory bandwidth 1e12 B/s. A transformer layer's replicated work
    moves 10 N x 4 + 2 N = 8.4e7 bytes forward (R_f = 84 us) and 22 N x 4 + 2 N = 1.8e8
    backward (R_b = 180 us); with its TP-1 times 1 ms and 2 ms:

    - TP 2: all-reduce 2 (1) 4e6 / 1e10 = 0.8 ms; forward (1 - 0.084) / 2 + 0.084 + 2 x 0.8
      = 2.142 ms, backward (2 - 0.18) / 2 + 0.18 + 1.6 = 2.69 ms;
    - TP 4: all-reduce 2 (3) 2e6 / 1e10 = 1.2 ms; forward 0.916 / 4 + 0.084 + 2.4 = 2.713 ms,
      backward 1.82 / 4 + 0.18 + 2.4 = 3.035 ms.

    The embedding moves (8 N + 3 P) 4 + N = 7.8e7 bytes forward (78 us) and (4 N + P) 4 + N
    = 3.8e7 backward (38 us, more than its 0 profiled: clamped, said); the head's final layer
    norm 2 N x 4 = 1.6e7 forward (16 us, its whole TP-1 forward here: nothing left to split)
    and 5 N x 4 = 4e7 backward (40 us)."""
    p = _hand_profile()
    e = Estimator(p, p.models[0], tensor_parallel="derived")
    rep = e.replicated_times("G", 2)
    assert [x for pair in rep for x in pair] == pytest.approx(
        [78e-6, 38e-6, 84e-6, 180e-6, 84e-6, 180e-6, 16e-6, 40e-6], rel=1e-12)
    r2, n2 = e.layer_times("G", 2, 2)
    r4, n4 = e.layer_times("G", 2, 4)
    for rows in (r2, r4):
        assert rows[1] == rows[2]
    assert (r2[1].forward, r2[1].backward) == pytest.approx((2.142e-3, 2.69e-3), rel=1e-12)
    assert (r4[1].forward, r4[1].backward) == pytest.approx((2.713e-3, 3.035e-3), rel=1e-12)
    # the embedding: (1 - 0.078) / t + 0.078 ms and one all-reduce forward; its backward 0
    assert r2[0].forward == pytest.approx(0.922e-3 / 2 + 78e-6 + 0.8e-3, rel=1e-12)
    assert r4[0].forward == pytest.approx(0.922e-3 / 4 + 78e-6 + 1.2e-3, rel=1e-12)
    assert r2[0].backward == 0.0 and r4[0].backward == 0.0
    # the head: its forward all replicated (16 us at every t), its backward 40 us whole
    assert r2[3].forward == pytest.approx(16e-6, rel=1e-12)
    assert r4[3].forward == pytest.approx(16e-6, rel=1e-12)
    assert r4[3].backward == pytest.approx(0.96e-3 / 4 + 40e-6 + 1.2e-3, rel=1e-12)
    for n in (n2, n4):
        assert any("replicated estimate exceeds the TP-1 time of layer 0 backward" in x
                   for x in n)
        assert not any("layer 3 forward" in x for x in n)  # equal is not exceeding
    # TP 1 is the profile, unchanged
    assert e.layer_times("G", 2, 1) == (p.models[0].layer_times("G", 2, 1), ())


def test_derived_tp_adds_the_cross_entropys_three_fp32_allreduces_hand_worked():
    """The hand-worked profile with s = 1000 tokens a sample (h = 1000: 1e6 hidden values):
    the vocabulary-parallel cross entropy all-reduces b s = 2000 fp32 values (8000 bytes)
    three times in the last layer's forward pass. TP 2: each 2 (1) 4000 / 1e10 = 0.8 us, the
    head's forward 16 + 2.4 = 18.4 us; TP 4: each 2 (3) 2000 / 1e10 = 1.2 us, 16 + 3.6 =
    19.6 us. Nothing else moves; without a sequence length nothing is added and the note
    says so; a forward-only TP-2 row takes them out of the forward before doubling."""
    p = _hand_profile()
    bare = Estimator(p, p.models[0], tensor_parallel="derived")
    e = Estimator(p, p.models[0], tensor_parallel="derived", sequence=1000)
    for t, head in ((2, 18.4e-6), (4, 19.6e-6)):
        got, notes = e.layer_times("G", 2, t)
        was, was_notes = bare.layer_times("G", 2, t)
        assert got[3].forward == pytest.approx(head, rel=1e-12)
        assert was[3].forward == pytest.approx(16e-6, rel=1e-12)
        assert got[:3] == was[:3] and got[3].backward == was[3].backward
        assert any("cross entropy's 3 all-reduces of b s fp32 values at s = 1000" in n
                   for n in notes)
        assert any("not counted: no sequence length given" in n for n in was_notes)
    assert e.layer_times("G", 2, 1) == bare.layer_times("G", 2, 1)  # TP 1: no collective
    # a shape gives the sequence (its own, unless one is given)
    shaped = replace(p.models[0], shape=ModelShape(2, 1000, 10, 1000, 4000, tied=False))
    assert Estimator(p, shaped).sequence == 1000
    # forward-only at TP 2: the head's backward is 2 x (forward - its 3 all-reduces) + 1 ar
    fo = _profiles(((("G", 2, 2), _row(1e-3, None, 0.0)),),
                   sizes=((1, tuple(LayerSizes(1000, 4.0e6, 1.0e6) for _ in range(4))),
                          (2, tuple(LayerSizes(500, 4.0e6, 0.5e6) for _ in range(4)))))
    rows, _ = Estimator(fo, fo.models[0], sequence=1000).layer_times("G", 2, 2)
    ar = 2 * 1 * (2 * 4.0e6 / 2) / BW
    assert rows[3].backward == pytest.approx(2 * (4e-3 - 3 * 0.8e-6) + ar, rel=1e-12)


def test_replicated_work_is_counted_once_per_rank_not_divided():
    """The replicated time does not shrink with t: derived compute - (T1 - R) / t is R at every
    t, and R scales as 1 / memory bandwidth (the roofline)."""
    for mb in (1e12, 2e12):
        p = _hand_profile(mb)
        e = Estimator(p, p.models[0], tensor_parallel="derived")
        rep = e.replicated_times("G", 2)
        assert rep[1][0] == pytest.approx(8.4e7 / mb, rel=1e-12)
        for t in (2, 4, 8):
            ar = 2 * (t - 1) * (8e6 / t) / BW
            rows, _ = e.layer_times("G", 2, t)
            compute = rows[1].backward - 2 * ar
            assert compute - (2e-3 - rep[1][1]) / t == pytest.approx(rep[1][1], rel=1e-9)


def test_everything_split_rule_is_rejected():
    """The old rule (the whole TP-1 time / t) differs from the derived time by more than 20% of
    the compute at TP 4 on the hand-worked layer's backward (0.5 ms against 0.635 ms), far
    outside the 1e-12 the derived times are checked to."""
    p = _hand_profile()
    e = Estimator(p, p.models[0], tensor_parallel="derived")
    rows, _ = e.layer_times("G", 2, 4)
    ar = 2 * 3 * (8e6 / 4) / BW
    compute = rows[1].backward - 2 * ar
    old = 2e-3 / 4
    assert compute == pytest.approx(0.635e-3, rel=1e-12)
    assert abs(compute - old) / compute > 0.20
    assert compute != pytest.approx(old, rel=0.2)


def test_unprofiled_microbatch_is_linear_between_profiled_sizes_and_refused_far_out():
    """Between two profiled sizes the time is linear in the micro-batch size; beyond them it
    follows the nearest two, within half the smallest to twice the largest; further is refused."""
    p = _profiles(((("G", 2, 1), _row(1.0, 2.0)), (("G", 4, 1), _row(1.5, 3.5))))
    e = Estimator(p, p.models[0])
    rows, notes = e.layer_times("G", 3, 1)
    assert rows[0].forward == pytest.approx(1.25) and rows[0].backward == pytest.approx(2.75)
    assert "interpolated from the profiled sizes 2 and 4" in notes[-1]
    rows, notes = e.layer_times("G", 8, 1)  # 1.5 + 0.25 (8 - 4), from 4 and 2
    assert rows[0].forward == pytest.approx(2.5) and "extrapolated" in notes[-1]
    rows, _ = e.layer_times("G", 1, 1)  # 1.0 - 0.25 = 0.75, above proportional 0.5
    assert rows[0].forward == pytest.approx(0.75)
    for b in (9, 16):
        with pytest.raises(ConfigError, match=re.escape("or one within [1, 8] of them")):
            e.layer_times("G", b, 1)
    assert e.layer_times("G", 2, 1) == (p.models[0].layer_times("G", 2, 1), ())  # measured: as is


def test_a_tp_degree_with_no_tp1_to_derive_from_is_refused_naming_tp_at_every_size():
    """A profile with TP 4 only (as OPT-30 and LLAMA-3-8 on V100-16): TP 2 cannot be had at any
    micro-batch size, so the refusal names ``tp`` even where the size itself is unprofiled but
    estimable at TP 4 (it named ``microbatch_size`` there, sending the user to the wrong
    parameter); TP 4 at that size runs."""
    p = _profiles(((("G", 2, 4), _row(1.0, 2.0)), (("G", 4, 4), _row(1.5, 3.5))))
    e = Estimator(p, p.models[0])
    assert "interpolated" in e.layer_times("G", 3, 4)[1][-1]
    for b, tp in ((3, 2), (2, 2), (3, 8), (3, 1), (2, 1)):
        with pytest.raises(ConfigError, match=re.escape(
                "'tp' must be a TP degree the profile of M measured on G (4)")):
            e.layer_times("G", b, tp)


def test_forward_only_profile_takes_twice_the_forward_compute():
    """A forward-only row's backward is 2 x its forward compute (TP's forward all-reduces out,
    its backward ones in), its optimizer step Adam's 28 bytes per parameter at the memory
    bandwidth; the model file's [forward] rows round-trip."""
    p = _profiles(((("G", 2, 1), _row(1.0, None, None)),
                   (("G", 2, 2), _row(0.6, None, None))),
                  sizes=((1, tuple(LayerSizes(1000, 4.0e6, 1.0e6) for _ in range(4))),
                         (2, tuple(LayerSizes(500, 4.0e6, 0.5e6) for _ in range(4)))))
    m = p.models[0]
    assert m.forward_only
    e = Estimator(p, m)
    rows, notes = e.layer_times("G", 2, 1)
    assert [r.backward for r in rows] == pytest.approx([2.0 * (i + 1) for i in range(4)])
    assert rows[1].optimizer == pytest.approx(1000 * ADAM_BYTES_PER_PARAM / 1e12)
    assert any("backward = 2 x forward" in n for n in notes)
    rows2, _ = e.layer_times("G", 2, 2)
    ar = 2 * 1 * (2 * 4.0e6 / 2) / BW
    assert rows2[1].backward == pytest.approx(2 * (1.2 - 2 * ar) + 2 * ar)
    assert model_from_data(json.loads(json.dumps(model_to_data(m)))) == m
    full = e.completed()
    assert not full.forward_only and full.layer_times("G", 2, 2)[1].backward == rows2[1].backward


def test_plan_with_only_a_tp1_profile_runs_and_says_so(tmp_path):
    """A TP-2 plan on a profile measured at TP 1 builds, runs in the DES as in its closed form,
    and names every estimate."""
    p = _profiles(((("G", 2, 1), _row(0.01, 0.02, 0.001)),))
    rep = ReplicaSpec("G", 2, 2, "z")
    plan = Plan((StageSpec((0, 1, 2, 3), (rep,)),), 2, 8, model="M")
    b = build_plan(plan, p, steps=1, network=True)
    assert any("G TP 2 derived from TP 1" in n for n in b.estimates)
    assert any("sizes at TP 2 from TP 1" in n for n in b.estimates)
    closed = build_plan(plan, p, steps=1)
    t = training_model(b.config, Streams(0).replication(0))["step_time_mean"]
    assert t == pytest.approx(predictions("training", closed.config)["step_time_mean"]["value"],
                              rel=1e-9)


def test_shape_gives_the_profiles_parameters_and_a_lower_bound_on_its_times():
    """GPT-Neo-2.7's shape (32 layers, hidden 2560, 32 heads, sequence 2048, vocabulary 50304)
    gives the artifact's measured parameters per layer at TP 1; its roofline times at the
    GH200's datasheet peak are below every measured transformer layer's time."""
    prof = load_profiles(models=("GPT-Neo-2.7",))
    neo = prof.model("GPT-Neo-2.7")
    shape = ModelShape(32, 2560, 32, 2048, 50304)
    m = ModelProfile("Neo-shape", 34, (), (), shape=shape, tied_embeddings=True)
    got = m.layer_sizes(1)
    assert [s.params for s in got[:-1]] == [s.params for s in neo.layer_sizes(1)[:-1]]
    assert got[1].activation_bytes == neo.layer_sizes(1)[1].activation_bytes
    p = replace(prof, models=(m,))
    e = Estimator(p, m)
    for (_, b, tp) in neo.combinations("GH-96"):
        if tp != 1:
            continue
        est, notes = e.layer_times("GH-96", b, 1)
        meas = neo.layer_times("GH-96", b, 1)
        for i in range(1, 33):
            assert est[i].forward <= meas[i].forward and est[i].backward <= meas[i].backward
        assert "estimated from the model's shape" in notes[0]
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type with peak_flops"):
        Estimator(replace(p, gpus=GPUCatalogue((GPUType("X", 1e10),))), m).layer_times("X", 1, 1)
    data = model_to_data(m)
    assert model_from_data(json.loads(json.dumps(data))) == m
    assert math.isclose(shape.hidden / shape.heads, 80)


def test_a_tp_degree_must_divide_the_shapes_heads():
    """A model given by its shape has heads: a TP group splits them evenly (Megatron-LM's
    attention), so TP 3 of 32 heads is refused in one line; TP 2 builds; the planner offers
    only dividing degrees. A Sailor profile (no shape) has no heads to check."""
    prof = load_profiles(models=("GPT-Neo-2.7",))
    m = ModelProfile("Neo-shape", 34, (), (), shape=ModelShape(32, 2560, 32, 2048, 50304),
                     tied_embeddings=True)
    p = replace(prof, models=(m,))

    def plan(tp: int) -> Plan:
        rep = ReplicaSpec("GH-96", tp, gpus_per_node=4, zone="us-central1-a")
        return Plan((StageSpec(tuple(range(34)), (rep,)),), 1, 4, model="Neo-shape")

    assert build_plan(plan(2), p, steps=1, check_memory=False).config.stages == 1
    with pytest.raises(ConfigError, match=r"^'tp' must be a divisor of the model's heads "
                       r"\(32\): 3$"):
        build_plan(plan(3), p, steps=1, check_memory=False)
    assert prof.model("GPT-Neo-2.7").shape is None
    from sim.planner import PlanRequest
    from sim.planner.fleets import parse_nodes
    from sim.planner.models import ProfilePlanModel
    from sim.planner.search import _Search

    neo = prof.model("GPT-Neo-2.7")
    five = replace(neo, shape=ModelShape(32, 2560, 5, 2048, 50304, tied=False))  # 5 heads: TP 1 only
    fleet = parse_nodes("GH-96:4x2@us-central1-a", prof.network)
    for model, want in ((neo, {1, 2, 4}), (five, {1})):
        q = replace(prof, models=(model,))
        s = _Search(model, fleet, q.gpus, PlanRequest(8), ProfilePlanModel(q, model))
        (t,) = s.types
        assert {tp for b in s.mbs_options() for tp in s.tp_options(t, b)} == want


def test_a_shapes_tie_is_one_fact_with_tied_embeddings():
    """A profile's shape ``tied`` (sizes: a tied head has no weight of its own) and its
    ``tied_embeddings`` (traffic: the tied gradient's all-reduce, and whether a Megatron-LM
    launch without --untie-embeddings-and-output-weights matches) were read apart with opposite
    defaults: a shape-only profile was sized tied and run untied, and ``"tied": true`` in the
    shape left the model untied (its launch refused). Either key now sets both, they must
    agree, and with neither the model is untied (its head's V h parameters counted)."""
    shape = {"layers": 2, "hidden": 64, "heads": 4, "sequence": 32, "vocabulary": 1000}
    plain = model_from_data({"model": "S", "shape": shape})
    assert not plain.tied_embeddings and not plain.shape.tied
    assert plain.layer_sizes(1)[-1].params == 2 * 64 + 1000 * 64
    for doc in ({"model": "S", "shape": {**shape, "tied": True}},
                {"model": "S", "tied_embeddings": True, "shape": shape},
                {"model": "S", "tied_embeddings": True, "shape": {**shape, "tied": True}}):
        m = model_from_data(doc)
        assert m.tied_embeddings and m.shape.tied and m.layer_sizes(1)[-1].params == 2 * 64
        assert m.tied_parameters(1) == 1000 * 64
    with pytest.raises(ConfigError, match=r"^'model' must be tied_embeddings equal to the "
                       r"shape's tied at model \(both say"):
        model_from_data({"model": "S", "tied_embeddings": False, "shape": {**shape, "tied": True}})
    with pytest.raises(ConfigError, match=r"^'tied_embeddings' must be the model shape's tied "
                       r"\(true\)"):
        ModelProfile("S", 4, (), (), shape=ModelShape(2, 64, 4, 32, 1000))


def test_a_shapes_tied_weight_is_its_word_embedding_without_the_positions():
    """(review10) The tied all-reduce of a model given by its shape moves the word embedding,
    V h / tp parameters on a GPU: the first layer's learned positions (s h, replicated over
    TP) are not tied (DeepSpeed ties ``word_embeddings_weight``, a Sailor profile's
    tied_params are the first layer less s h: sim.profiles.sailor). They were counted: 1000 x
    64 + 32 x 64 = 66,048 for 64,000 at TP 1, 18,048 for 16,000 at TP 4."""
    from sim.profiles.build import tied_bytes
    from sim.profiles.frameworks import resolve

    shape = {"layers": 2, "hidden": 64, "heads": 4, "sequence": 32, "vocabulary": 1000,
             "tied": True}
    m = model_from_data({"model": "S", "shape": shape})
    for tp in (1, 2, 4):
        first = m.layer_sizes(tp)[0]
        sailor_rule = first.params - round(first.activation_bytes / m.bytes_per_value)
        assert m.tied_parameters(tp) == sailor_rule == 1000 * 64 // tp
    fb = resolve(None, m.bytes_per_value)
    assert tied_bytes(m, fb, 4) == 16000 * fb.tied_bytes
