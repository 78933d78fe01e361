"""The planner's memory sums under DeepSpeed's BF16_Optimizer: plan_memory's, at every dp."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from sim.errors import ConfigError
from sim.planner import PlanRequest
from sim.planner.fleets import parse_nodes
from sim.planner.models import ProfilePlanModel
from sim.planner.search import _Search
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import bf16_flat_elements, build_plan
from sim.profiles.frameworks import FrameworkSpec

BF16 = FrameworkSpec("deepspeed", precision="bf16")  # DeepSpeed 0.16.5: BF16_Optimizer


@pytest.fixture(scope="module")
def opt():
    profiles = load_profiles(models=("OPT-350",))
    return profiles, profiles.model("OPT-350")


def _plans(model, gpu, tp, mbs):
    """Small plans: 1 to 3 stages at a few cuts, 1 to 4 replicas a stage."""
    n = model.layers
    for p in (1, 2, 3):
        for cuts in itertools.combinations((5, 9, 13, 20), p - 1):
            b = (0, *cuts, n)
            for r in (1, 2, 3, 4):
                rep = ReplicaSpec(gpu, tp, tp, "us-central1-a")
                stages = tuple(StageSpec(tuple(range(b[i], b[i + 1])), (rep,) * r)
                               for i in range(p))
                yield Plan(stages, mbs, mbs * r * 4, model=model.name, framework=BF16)


def test_memory_terms_equal_plan_memory_bf16(opt):
    """On every GPU of small bf16 plans (r = 1 to 4, 1 to 3 stages) the sums are plan_memory's
    total plus exactly the padding they reserve and the flat buffer did not use."""
    profiles, model = opt
    pm = ProfilePlanModel(profiles, model, framework=BF16)
    state = model.optimizer_bytes_per_param - (4.0 if model.bytes_per_value == 2 else 0.0)
    seen = set()
    for gpu, tp, mbs in (("GH-96", 4, 8), ("RTX-3090", 2, 2), ("Titan-RTX", 2, 4)):
        for plan in _plans(model, gpu, tp, mbs):
            b = build_plan(plan, profiles, steps=1, check_memory=False)
            for g in b.memory:
                st = plan.stages[g.stage]
                r = len(st.replicas)
                # as the search asks (dp only of a model whose memory depends on it)
                args = (g.gpu, g.tp, mbs, g.stage, plan.pipeline_stages, plan.microbatches)
                terms = (pm.memory_terms(*args, dp=r) if getattr(pm, "memory_dp", False)
                         else pm.memory_terms(*args))
                total = max(f + sum(per[i] for i in st.layers) for f, per in terms) \
                    + profiles.gpus[g.gpu].overhead(g.tp)
                P = sum(model.layer_sizes(g.tp)[i].params for i in st.layers)
                per_flat = 6.0 + (4.0 + state) / r
                unused = (2 * r - 1 - (bf16_flat_elements(P, r) - P)) * per_flat
                assert total - unused == pytest.approx(g.total, rel=1e-12, abs=0)
                assert g.total <= total <= g.total * (1 + 1e-7)
                seen.add((r, bf16_flat_elements(P, r) > P))
    assert {r for r, _ in seen} == {1, 2, 3, 4} and (3, True) in seen  # padding met too


def _search(profiles, model, gpu, pm, compiled):
    fleet = parse_nodes(f"{gpu}:8x4@us-central1-a", profiles.network)
    req = PlanRequest(global_batch_size=64)
    return _Search(model, fleet, profiles.gpus, req, pm, compiled_cut=compiled)


@pytest.mark.parametrize("compiled", [False, True])
def test_bf16_cut_neither_overfills_nor_prunes(opt, compiled):
    """RTX-2080 (11 GiB), micro-batch 1: one replica at bf16 needs 20 bytes a parameter, not the
    old rule's 16 (the cut proposed a 1-stage TP 2 plan the engine refuses), eight need 9.5
    (the old rule pruned every 2-stage TP 1 plan: this one fits)."""
    profiles, model = opt
    pm = ProfilePlanModel(profiles, model, framework=BF16)
    s = _search(profiles, model, "RTX-2080", pm, compiled)
    t = next(x for x in s.types if x.gpu == "RTX-2080")
    rep = ReplicaSpec("RTX-2080", 2, 2, "us-central1-a")
    with pytest.raises(ConfigError, match="fits in GPU memory"):
        build_plan(Plan((StageSpec(tuple(range(model.layers)), (rep,)),), 1, 8,
                        model=model.name, framework=BF16), profiles, steps=1)
    assert s.plan([[(t, 2)]], 1, 8) is None
    made = s.plan([[(t, 1)] * 8] * 2, 1, 8)
    assert made is not None
    b = build_plan(replace(made[0], framework=BF16), profiles, steps=1)  # fits: no ConfigError
    assert b.peak_memory <= profiles.gpus["RTX-2080"].memory_bytes
