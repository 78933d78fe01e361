"""Megatron-LM's gradients in GPU memory: its fp32 ``main_grad`` buffer under bf16 (usertrial13).

Megatron-LM allocates every parameter's gradient in its DDP buffer of ``grad_dtype``, fp32 when
``grad_reduce_in_fp32`` (bf16 sets ``accumulate_allreduce_grads_in_fp32``), the parameters' dtype
otherwise (``core/distributed/param_and_grad_buffer.py``, the citation in
``sim.profiles.frameworks``): 2 + 4 + 12 = 18 bytes a parameter in bf16 with Adam, Megatron-LM's
own table (``docs/source/api-guide/dist_optimizer.md:10`` at core_v0.9.0: bf16 parameters and
fp32 gradients, 18 bytes; 6 + 12/d distributed). dtsim counted the gradients at the model's 2.
"""

from __future__ import annotations

import json

import pytest

from sim.planner.models import ProfilePlanModel
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.frameworks import FrameworkSpec, resolve

SHAPE = {"layers": 4, "hidden": 512, "heads": 8, "sequence": 256, "vocabulary": 1000,
         "tied": False}


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("prof")
    (d / "models").mkdir()
    (d / "models" / "m.json").write_text(json.dumps(
        {"model": "M", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": SHAPE}))
    return load_profiles(d)


def _plan(fw, stages=2, tp=2):
    rep = ReplicaSpec("A100-80", tp, 8, "us-central1-a", host="n0")  # one node: NVLink
    cut = ((0, 1, 2), (3, 4, 5)) if stages == 2 else ((0, 1, 2, 3, 4, 5),)
    return Plan(tuple(StageSpec(c, (rep, rep)) for c in cut), 2, 16, model="M", framework=fw)


@pytest.mark.parametrize("precision, per_value", [("bf16", 4), ("fp16", 2)])
def test_megatron_gradients_in_the_buffers_dtype(profiles, precision, per_value):
    """bf16: 4 bytes a parameter of gradients beside 2 of weights (before: 2); fp16: 2."""
    fw = FrameworkSpec("megatron", precision=precision)
    b = build_plan(_plan(fw), profiles, steps=1)
    for g in b.memory:
        assert g.gradients == g.weights / 2 * per_value
        assert g.optimizer == g.weights / 2 * 12
    assert resolve(fw, 2).grad_bytes == (4 if precision == "bf16" else None)


def test_megatron_accumulate_in_fp32_option_and_other_frameworks(profiles):
    """fp16 with accumulate_allreduce_grads_in_fp32: the fp32 buffer too; DeepSpeed fp16 and
    PyTorch DDP keep the model's dtype."""
    acc = FrameworkSpec("megatron", precision="fp16",
                        options={"accumulate_allreduce_grads_in_fp32": True})
    assert resolve(acc, 2).grad_bytes == 4
    for fw in (FrameworkSpec("deepspeed", precision="fp16"), FrameworkSpec("ddp", precision="fp16")):
        assert resolve(fw, 2).grad_bytes is None


def test_planner_sums_count_the_fp32_gradients(profiles):
    """The search's memory sums are plan_memory's total on a one-stage bf16 plan."""
    fw = FrameworkSpec("megatron", precision="bf16")
    plan = _plan(fw, stages=1)
    b = build_plan(plan, profiles, steps=1)
    model = profiles.model("M")
    pm = ProfilePlanModel(profiles, model, framework=fw)
    g = b.memory[0]
    terms = pm.memory_terms(g.gpu, g.tp, 2, 0, 1, plan.microbatches)
    total = max(f + sum(per[i] for i in plan.stages[0].layers) for f, per in terms) \
        + profiles.gpus[g.gpu].overhead(g.tp)
    assert total == pytest.approx(g.total, rel=1e-12)


WIDE = {"layers": 4, "hidden": 2048, "heads": 16, "sequence": 8, "vocabulary": 1000,
        "tied": False}


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A model whose gradients outweigh its activations (a short sequence): the memory after
    the backward passes is the larger term, where an all-reduce's bucket would show."""
    d = tmp_path_factory.mktemp("wide")
    (d / "models").mkdir()
    (d / "models" / "m.json").write_text(json.dumps(
        {"model": "M", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": WIDE}))
    return load_profiles(d)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_megatron_reduces_its_gradients_in_place_no_flattened_bucket(wide, precision):
    """Megatron-LM all-reduces (or reduce-scatters) ``bucket.grad_data``, the buffer the
    gradients live in (``core/distributed/param_and_grad_buffer.py:730-731`` at d98e8a64dd,
    ``724-725`` at core_v0.19.0, ``267`` at core_v0.9.0): no copy. DeepSpeed's pipeline engine
    flattens up to 5e8 elements into a bucket of its own, which dtsim counted for Megatron
    too (megdistopt noticed): here 2 x P bytes above the activations. Now the GPU holds
    weights, gradients, optimizer state, then the larger of the activations (with buffers)
    and fp16's fp32 gradient copy alone; the planner's sums say the same."""
    meg = FrameworkSpec("megatron", precision=precision)
    plan = _plan(meg, stages=1)
    b = build_plan(plan, wide, steps=1)
    g = b.memory[0]
    P = g.weights / 2
    assert g.allreduce_bucket == 0.0
    assert g.grad_copy == (4 * P if precision == "fp16" else 0.0)
    assert g.activations + g.buffers < 2 * P  # the old bucket would have been the peak
    after = max(g.activations + g.buffers, g.grad_copy)
    assert g.total == pytest.approx(g.weights + g.gradients + g.optimizer + after + g.overhead,
                                    rel=1e-15)
    # DeepSpeed on the same plan keeps its flattened bucket (the stage's gradients, < 5e8)
    ds = build_plan(_plan(FrameworkSpec("deepspeed", precision="fp16"), stages=1), wide,
                    steps=1).memory[0]
    assert ds.allreduce_bucket == pytest.approx(2 * P, rel=1e-15)
    # the search's sums restate plan_memory
    pm = ProfilePlanModel(wide, wide.model("M"), framework=meg)
    terms = pm.memory_terms(g.gpu, g.tp, 2, 0, 1, plan.microbatches)
    total = max(f + sum(per[i] for i in plan.stages[0].layers) for f, per in terms) \
        + wide.gpus[g.gpu].overhead(g.tp)
    assert total == pytest.approx(g.total, rel=1e-12)
