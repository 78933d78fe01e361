"""The plan search on large fleets: what it works out once, and what a fleet larger than the
global batch can use leaves unchanged (counted, not timed)."""

from __future__ import annotations

import gc

import pytest

from sim.planner import PlanRequest, search_plans
from sim.planner.fleets import parse_nodes
from sim.planner.models import ProfilePlanModel
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.estimates import Estimator


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _model(prof):
    return Estimator(prof, prof.model("OPT-350")).completed()  # as dtsim plan searches it


def _plan(cuts, reps, mbs=1, gbs=96):
    return Plan(tuple(StageSpec(tuple(range(a, b)), tuple(reps[j]))
                      for j, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))),
                mbs, gbs, model="OPT-350")


def test_the_search_runs_without_a_collection_and_restores_the_collector(prof):
    """A search keeps every ranked plan's build: the full collections its allocations
    triggered rescanned them (half the CPU time of GH-96:4x1000 at a global batch of 1024).
    None runs during the search now, and the collector is as it was after it (off stays off)."""
    model = _model(prof)
    fleet = parse_nodes("GH-96:4x16@us-central1-a", prof.network)
    req = PlanRequest(global_batch_size=64, top=3)
    seen = []

    def count(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        res = search_plans(model, fleet, prof.gpus, req, ProfilePlanModel(prof, model,
                                                                          fleet=fleet))
    finally:
        gc.callbacks.remove(count)
    assert res.evaluated > 20  # a search that allocates enough to trigger collections
    assert seen == []
    assert gc.isenabled()
    gc.disable()
    try:
        search_plans(model, fleet, prof.gpus, req, ProfilePlanModel(prof, model, fleet=fleet))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_plan_shape_is_placed_once_and_as_before(prof, monkeypatch):
    """Plans of one shape (each stage's replica kinds in rank order), whatever their cut or
    micro-batch size, are placed once on the fleet's nodes, where a fresh model places them;
    a stage of mixed kinds (the pipeline layout) and another order of them are other shapes."""
    model = _model(prof)
    fleet = parse_nodes("GH-96:4x6@us-central1-a,RTX-3090:2x4", prof.network)
    gh = ReplicaSpec("GH-96", 2, gpus_per_node=2, zone="us-central1-a")
    gh1 = ReplicaSpec("GH-96", 1, gpus_per_node=1, zone="us-central1-a")
    rtx = ReplicaSpec("RTX-3090", 2, gpus_per_node=2, zone=fleet.nodes[1][0].zone)
    shapes = [[[gh] * 3, [gh] * 3, [gh1] * 3],
              [[gh, rtx, gh], [gh, rtx, gh], [gh, rtx, gh]],
              [[rtx, gh, gh], [rtx, gh, gh], [rtx, gh, gh]]]
    plans = [_plan(cuts, reps, mbs)
             for reps in shapes for cuts, mbs in (((0, 9, 18, 26), 1), ((0, 8, 17, 26), 2))]
    pm = ProfilePlanModel(prof, model, fleet=fleet)
    calls = []
    first_fit = ProfilePlanModel._first_fit

    def counted(self, plan):
        calls.append(plan)
        return first_fit(self, plan)

    monkeypatch.setattr(ProfilePlanModel, "_first_fit", counted)
    placed = [pm.place(p) for p in plans]
    assert len(calls) == len(shapes)  # once a shape
    fresh = [ProfilePlanModel(prof, model, fleet=fleet).place(p) for p in plans]
    assert placed == fresh
    for p, q in zip(plans, placed, strict=True):
        assert [st.layers for st in q.stages] == [st.layers for st in p.stages]
        assert [[(r.gpu, r.tp) for r in st.replicas] for st in q.stages] == \
            [[(r.gpu, r.tp) for r in st.replicas] for st in p.stages]
    hosts = [tuple(r.host for st in q.stages for r in st.replicas) for q in placed]
    assert hosts[0] == hosts[1] and hosts[2] == hosts[3] and hosts[4] == hosts[5]
    assert hosts[2] != hosts[4]  # the same kinds in another rank order sit elsewhere
    # two TP-2 GH-96 replicas a node, then TP 1 on the next free ones (rank order: stage first)
    assert hosts[0] == tuple(f"GH-96@us-central1-a#{n}" for n in (0, 0, 1, 1, 2, 2, 3, 3, 3))


def test_a_fleet_beyond_what_the_batch_uses_builds_the_same_plans(prof):
    """A search grows with the plans a fleet holds under the global batch (``dp <= gbs / mbs``,
    ``mbs dp`` dividing it; at most a layer a stage), not with the fleet: once the fleet holds
    the widest and deepest of them, 10^9 nodes build the same plans, as many, and rank them
    alike. (A guard: this already held before the collector was paused.)"""
    model = _model(prof)
    gbs, layers = 8, model.layers
    req = PlanRequest(global_batch_size=gbs, tp=(4,), microbatch_sizes=(1, 2), top=5)
    out = []
    for count in (layers * gbs, 999_999_999):  # TP 4: a replica a node
        fleet = parse_nodes(f"GH-96:4x{count}@us-central1-a", prof.network)
        pm = ProfilePlanModel(prof, model, fleet=fleet)
        built = []
        build = pm.build

        def counted(plan, _build=build, _built=built, **kw):
            _built.append((plan.dp[0], plan.microbatch_size, plan.pipeline_stages))
            return _build(plan, **kw)

        pm.build = counted
        res = search_plans(model, fleet, prof.gpus, req, pm)
        out.append((res, built))
    (small, built_small), (huge, built_huge) = out
    assert built_small == built_huge and len(built_small) > 10
    for dp, mbs, p in built_huge:  # every replica used: the batch splits over them all
        assert gbs % (mbs * dp) == 0 and p <= layers
    assert (small.evaluated, small.partitions, small.groups, small.groups_pruned, small.refused,
            small.skipped) == (huge.evaluated, huge.partitions, huge.groups, huge.groups_pruned,
                               huge.refused, huge.skipped)
    assert [(c.plan, c.iteration_time, c.peak_memory) for c in small.candidates] == \
        [(c.plan, c.iteration_time, c.peak_memory) for c in huge.candidates]
    assert max(c.gpus for c in huge.candidates) <= gbs * layers * 4
