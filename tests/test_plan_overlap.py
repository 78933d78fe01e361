"""The closed form of a plan's gradient all-reduce overlapped with the backward pass (issue 35).

Exact reference: :func:`sim.analytic.training.overlapped_exposed_time` over the plan's
device programs (every pipeline's last backward passes release each stage's buckets; each
bucket's ring is the plan's closed-form ring of its size), as ``dtsim train --plan``'s exact
column (:func:`sim.engines.predictions` of the closed config) and the planner's time
(:func:`sim.profiles.build.explain_rows`). The DES runs the plan's buckets as flows over the
plan's network, where no two flows of these plans share a link: the two must agree to 1e-9.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from sim.analytic.training import (
    bucket_ready_times,
    overlapped_allreduce_end,
    overlapped_exposed_time,
    overlapped_stage_ends,
)
from sim.engines import predictions, select
from sim.errors import ConfigError
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan, explain_rows, plan_allreduce_time
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model
from sim.training.traffic import gradient_buckets

REL = 1e-9
KINDS = ("Titan-RTX", "RTX-3090", "RTX-2080")


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _closed_time(b) -> float:
    return predictions("training", b.config)["step_time_mean"]["value"]


def _des_time(b) -> float:
    return training_model(b.config, Streams(0).replication(0))["step_time_mean"]


def _random_plan(rng: np.random.Generator) -> tuple[Plan, dict]:
    """A plan of 1-4 stages of 2-4 replicas of mixed RTX kinds (one TP degree), a random cut
    of OPT-350's 26 layers, Megatron-LM with overlap_grad_reduce or PyTorch DDP (one stage),
    a random bucket and bucket rule through ``--sync``, blocking point-to-point (either with
    one stage)."""
    L = int(rng.integers(1, 5))
    dp = int(rng.integers(2, 5))
    tp = int(rng.choice([1, 2, 4]))
    mbs = int(rng.choice([1, 2, 4]))
    cuts = sorted(rng.choice(np.arange(1, 26), size=L - 1, replace=False).tolist())
    bounds = [0, *cuts, 26]
    stages = []
    for j in range(L):
        reps = tuple(ReplicaSpec(str(rng.choice(KINDS)), tp, gpus_per_node=tp,
                                 zone="us-central1-a") for _ in range(dp))
        stages.append(StageSpec(tuple(range(bounds[j], bounds[j + 1])), reps))
    per_pipe = int(rng.integers(L, 3 * L + 3))
    fw = (FrameworkSpec("ddp") if L == 1 and rng.random() < 0.5 else
          FrameworkSpec("megatron", options=(("overlap_grad_reduce", True),)))
    # point-to-point on FIFO channels (p2p overlap) with two stages or more: the closed form
    # of the channels and the network's differ by up to 3% with the all-reduce after the
    # backward pass too (not this closed form's); blocking is every pipeline framework's
    kw: dict = {"p2p": "blocking" if L > 1 else str(rng.choice(["blocking", "overlap"]))}
    if rng.random() < 0.7:  # a bucket of 1-60 MB, either rule
        kw["sync"] = (f"allreduce:overlap=backward,bucket_size={rng.uniform(1e6, 6e7):.6g},"
                      f"buckets={rng.choice(['ddp', 'megatron'])}")
    plan = Plan(tuple(stages), mbs, per_pipe * mbs * dp, model="OPT-350", framework=fw)
    return plan, kw


def test_the_law_is_max_plus_of_the_latest_release():
    """e_b = max(max_i r_ib, e_{b-1}) + T_b per stage; the exposed time is what passes the
    pipeline's end; a stage without buckets adds nothing."""
    passes = [[(1.0, 2.0), (1.5, 1.0)], [(0.0, 4.0)], []]
    buckets = [[(1.0, 0.4), (3.0, 0.1)], [(2.0, 1.0), (2.0, 0.5)], [(5.0, 9.0)]]
    ends = overlapped_stage_ends(passes, buckets)
    # stage 0: releases max(1.5, 1.875) = 1.875 and max(3.0, 2.5) = 3.0
    assert ends[0] == pytest.approx(max(3.0, 1.875 + 0.4) + 0.1)
    assert ends[1] == pytest.approx(max(4.0, 2.0 + 1.0) + 0.5)
    assert ends[2] == -math.inf
    assert overlapped_exposed_time(4.2, passes, buckets) == pytest.approx(0.3)
    assert overlapped_exposed_time(5.0, passes, buckets) == 0.0
    r = bucket_ready_times(1.0, 2.0, [1.0, 3.0])
    assert ends[0] == overlapped_allreduce_end([max(x, y) for x, y in zip(
        r, bucket_ready_times(1.5, 1.0, [1.0, 3.0]), strict=True)], [0.4, 0.1])
    with pytest.raises(ConfigError, match="^'buckets' must be 3 stages"):
        overlapped_stage_ends(passes, buckets[:2])


@pytest.mark.parametrize("seed,plans", [(35, 8), pytest.param(36, 40, marks=pytest.mark.slow)])
def test_closed_form_equals_the_des_at_random_plans(prof, seed, plans):
    """DES over the plan's network (no two flows share a link) = the closed form, 1e-9, at
    random unequal plans (stages, DP degrees, mixed kinds, buckets, both bucket rules); the
    all-reduce after the backward pass (the same plan with sync
    allreduce) is the wrong model: it misses the DES by over 3% somewhere."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    seen_rules = set()
    for _ in range(plans):
        plan, kw = _random_plan(rng)
        net = build_plan(plan, prof, steps=1, network=True, check_memory=False, **kw)
        closed = build_plan(plan, prof, steps=1, check_memory=False, **kw)
        assert net.config.overlapped_sync and closed.bucket_times == net.bucket_times
        seen_rules.add(net.config.sync_spec.get("buckets"))
        got = _des_time(net)
        want = _closed_time(closed)
        assert got == pytest.approx(want, rel=REL)
        assert explain_rows(closed)["iteration"] == pytest.approx(want, rel=1e-12)
        late = build_plan(plan, prof, steps=1, check_memory=False,
                          **{**kw, "sync": "allreduce"})
        worst = max(worst, abs(_closed_time(late) - got) / got)
    assert seen_rules == {"ddp", "megatron"}
    assert worst > 0.03


def test_megatron_buckets_on_the_first_stage_only_and_ddps_first_bucket(prof):
    """Megatron-LM cuts the first stage's gradients into its bucket (4e7 elements at dp 2) and
    leaves one bucket on the others; DDP's last-released bucket is its 1 MiB first one. Each
    bucket's time is the plan's ring of its size among the stage's replicas."""
    gh = ReplicaSpec("RTX-3090", 2, gpus_per_node=2, zone="us-central1-a")
    ti = ReplicaSpec("Titan-RTX", 2, gpus_per_node=2, zone="us-central1-a")
    plan = Plan((StageSpec(tuple(range(13)), (gh, ti)), StageSpec(tuple(range(13, 26)), (ti, gh))),
                2, 16, model="OPT-350",
                framework=FrameworkSpec("megatron", options=(("overlap_grad_reduce", True),)))
    b = build_plan(plan, prof, steps=1, check_memory=False)
    assert b.config.allreduce_buckets == b.bucket_times
    first, second = b.bucket_times
    assert [s for s, _ in first] == gradient_buckets(sum(s for s, _ in first), 1.6e8,
                                                     rule="megatron")
    assert len(first) > 1 and len(second) == 1
    nodes = [(x, (1, i)) for i, x in enumerate(plan.stages[1].replicas)]
    assert second[0][1] == plan_allreduce_time(prof.network, nodes, [2, 2], second[0][0],
                                               math.inf, prof)
    got, want = _des_time(build_plan(plan, prof, steps=1, network=True,
                                     check_memory=False)), _closed_time(b)
    assert got == pytest.approx(want, rel=REL)
    ddp = replace(plan, stages=(StageSpec(tuple(range(26)), (gh, ti, gh)),),
                  global_batch_size=12, framework=FrameworkSpec("ddp"))
    d = build_plan(ddp, prof, steps=1, check_memory=False)
    assert d.bucket_times[0][-1][0] == 1024 * 1024
    assert _des_time(build_plan(ddp, prof, steps=1, network=True, check_memory=False)) == \
        pytest.approx(_closed_time(d), rel=REL)


def test_the_des_refuses_the_closed_forms_buckets(prof):
    """A plan's closed config carries its buckets' times (allreduce_buckets); the DES times a
    plan's buckets over its network and refuses it in one line, naming the field."""
    plan, kw = _random_plan(np.random.default_rng(3))
    c = build_plan(plan, prof, steps=1, check_memory=False, **kw).config
    assert c.allreduce_buckets is not None
    with pytest.raises(ConfigError, match="^'allreduce_buckets' must be unset to simulate"):
        training_model(c, Streams(0))
    with pytest.raises(ConfigError, match="engine"):
        select("training", c, "des")
    with pytest.raises(ConfigError, match="^'allreduce_buckets' must be given only with"):
        replace(c, sync="allreduce")


@pytest.mark.parametrize("fw", ["ddp", "megatron-overlap"])
def test_the_planner_times_overlapping_frameworks_by_this_closed_form(prof, fw):
    """dtsim plan searches plans of DDP and of Megatron-LM with overlap_grad_reduce: each
    ranked plan's time is the closed form (the exact column of dtsim train --plan), the best
    one's DES over its network equals it, and the bound (no all-reduce after the pipeline)
    drops no best plan. The top 60 hold overlapped plans for both (under Megatron-LM the
    untied OPT-350's first data-parallel plan ranks 43rd on this fleet)."""
    from sim.planner import PlanRequest, search_plans
    from sim.planner.fleets import parse_nodes
    from sim.planner.models import ProfilePlanModel, simulate_plan

    spec = (FrameworkSpec("ddp") if fw == "ddp" else
            FrameworkSpec("megatron", options=(("overlap_grad_reduce", True),)))
    model = prof.model("OPT-350")
    fleet = parse_nodes("RTX-3090:2x2,Titan-RTX:2x1", prof.network)
    pm = ProfilePlanModel(prof, model, framework=spec)
    req = PlanRequest(16, microbatch_sizes=(1, 2), top=60)
    res = search_plans(model, fleet, prof.gpus, req, pm)
    full = search_plans(model, fleet, prof.gpus, req, pm, prune=False)
    assert [c.iteration_time for c in res.candidates] == [c.iteration_time
                                                           for c in full.candidates]
    overlapped = 0
    for c in res.candidates:
        b = c.prediction.build
        assert b.behaviour.allreduce == "overlap-backward"
        assert c.iteration_time == pytest.approx(_closed_time(b), rel=1e-12)
        overlapped += any(b.bucket_times)
    assert overlapped > 0
    best = res.best
    sim = simulate_plan(pm, best.plan, steps=1)
    assert sim["iteration_time"] == pytest.approx(best.iteration_time, rel=REL)


@pytest.mark.parametrize("fw", ["deepspeed", "megatron"])
def test_the_explained_iteration_is_the_des_without_a_barrier(prof, fw):
    """Upstream DeepSpeed and Megatron-LM (no barrier before the all-reduces: each stage's
    collectives from its own devices' program ends, sim.analytic.placement): dtsim plan's
    iteration (explain_rows) equals the closed form of the device programs and the DES over
    the plan's network at random plans of 2-4 stages, 1e-9."""
    rng = np.random.default_rng(4242)
    staged = 0
    for _ in range(6):
        plan, kw = _random_plan(rng)
        plan = replace(plan, framework=FrameworkSpec(fw))
        kw = {"p2p": "blocking"}
        closed = build_plan(plan, prof, steps=1, check_memory=False, **kw)
        if closed.config.stages < 2:
            continue
        assert not closed.config.allreduce_barrier
        staged += 1
        x = explain_rows(closed)
        assert x["placement"] == "per stage"
        want = _closed_time(closed)
        assert x["iteration"] == pytest.approx(want, rel=1e-12)
        net = build_plan(plan, prof, steps=1, network=True, check_memory=False, **kw)
        assert _des_time(net) == pytest.approx(want, rel=REL)
    assert staged >= 3


@pytest.mark.parametrize("fw", ["deepspeed", "megatron"])
def test_the_planner_without_a_barrier_prunes_no_best_plan(prof, fw):
    """Upstream DeepSpeed and Megatron-LM (no barrier): the planner's ranked times are the
    per-stage closed form, the pruned search keeps the unpruned top 5 (its tail bound drops
    the gradient all-reduce: a stage that ends before stage 0 reduces meanwhile), and the
    best plan's DES over its network equals its time."""
    from sim.planner import PlanRequest, search_plans
    from sim.planner.fleets import parse_nodes
    from sim.planner.models import ProfilePlanModel, simulate_plan

    model = prof.model("OPT-350")
    fleet = parse_nodes("RTX-3090:2x2,Titan-RTX:2x1", prof.network)
    pm = ProfilePlanModel(prof, model, framework=FrameworkSpec(fw))
    req = PlanRequest(16, microbatch_sizes=(1, 2), top=5)
    res = search_plans(model, fleet, prof.gpus, req, pm)
    full = search_plans(model, fleet, prof.gpus, req, pm, prune=False)
    assert [c.iteration_time for c in res.candidates] == [c.iteration_time
                                                           for c in full.candidates]
    for c in res.candidates:
        b = c.prediction.build
        assert c.iteration_time == pytest.approx(_closed_time(b), rel=1e-12)
    assert any(not c.prediction.build.config.allreduce_barrier for c in full.candidates)
    for c in full.candidates:  # the tail bound is one: iteration - pipeline phase >= it
        x = explain_rows(c.prediction.build)
        kinds = tuple(r for st in c.plan.stages for r in st.replicas)
        bound = pm.tail_bound(kinds, len(c.plan.stages[0].replicas), len(c.plan.stages))
        assert bound <= x["iteration"] - x["pipeline_time"] + 1e-12
    sim = simulate_plan(pm, res.best.plan, steps=1)
    assert sim["iteration_time"] == pytest.approx(res.best.iteration_time, rel=REL)


def test_dtsim_train_plan_exact_column_counts_each_pipelines_tied_ring(tmp_path, capsys,
                                                                        tied_profiles_folder):
    """Upstream DeepSpeed (no barrier, the tied all-reduce first), pipelines whose first and
    last stages are different GPU kinds (so their tied rings differ): dtsim train --plan's
    exact column, its --explain iteration and the DES over the plan's network agree (each
    pipeline's tied ring from its own devices' ends; taking the slowest for every pipeline
    put the exact column 2.75% above the DES)."""
    import json

    from sim.cli import main
    from sim.profiles.formats import plan_to_data

    kinds = [["RTX-2080", "RTX-2080"], ["RTX-3090", "RTX-2080"], ["Titan-RTX", "RTX-2080"],
             ["Titan-RTX", "RTX-3090"]]
    cuts = [(0, 7), (8, 9), (10, 16), (17, 25)]
    stages = tuple(StageSpec(tuple(range(a, b + 1)), tuple(
        ReplicaSpec(g, 4, gpus_per_node=4, zone="us-central1-a") for g in row))
        for (a, b), row in zip(cuts, kinds, strict=True))
    plan = Plan(stages, 2, 20, model="OPT-350", framework=FrameworkSpec("deepspeed"))
    tied = load_profiles(tied_profiles_folder)  # a tied model (the shipped OPT-350 is untied)
    closed = build_plan(plan, tied, steps=1, check_memory=False)
    assert len(set(closed.tied_allreduce_times)) == 2  # the two pipelines' tied rings differ
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan_to_data(plan)))
    assert main(["train", "--plan", str(f), "--steps", "1", "--explain", "--json",
                 "--replications", "1", "--profiles", str(tied_profiles_folder)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predicted_step_time"] == pytest.approx(out["step_time_mean"], rel=REL)
    assert out["explain"]["iteration"] == pytest.approx(out["step_time_mean"], rel=REL)
    assert out["step_time_mean"] == pytest.approx(_closed_time(closed), rel=REL)


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
def test_the_artifacts_optimizer_waits_for_every_stage_in_half_precision(prof, prec):
    """The Sailor artifact's DeepSpeed in fp16 or bf16 (the barrier, then each stage's
    all-reduce, then every optimizer step after the overflow flag or gradient norm over the
    pipeline): dtsim plan's iteration (explain_rows), the closed form and the DES over the
    plan's network agree at random plans of 2-4 stages (1e-9); the tail is the longest
    all-reduce plus the longest optimizer step."""
    rng = np.random.default_rng(77)
    seen = 0
    for _ in range(6):
        plan, _kw = _random_plan(rng)
        plan = replace(plan, framework=FrameworkSpec("sailor-deepspeed", precision=prec))
        closed = build_plan(plan, prof, steps=1, check_memory=False, p2p="blocking")
        c = closed.config
        if c.stages < 2:
            continue
        assert c.allreduce_barrier and c.optimizer_barrier
        seen += 1
        x = explain_rows(closed)
        assert x["placement"] == "barrier"
        tail = (closed.tied_allreduce_time + max(closed.allreduce_times)
                + max(closed.optimizer_times))
        assert x["iteration"] == pytest.approx(x["pipeline_time"] + tail, rel=1e-12)
        want = _closed_time(closed)
        assert x["iteration"] == pytest.approx(want, rel=1e-12)
        net = build_plan(plan, prof, steps=1, network=True, check_memory=False, p2p="blocking")
        assert _des_time(net) == pytest.approx(want, rel=REL)
    assert seen >= 3


def test_explain_says_how_much_the_step_barrier_can_add(prof, capsys):
    """dtsim train --plan --explain: each stage's end, the framework's join between steps
    (DeepSpeed: after the last stages' loss broadcast; Megatron-LM: every stage of the
    pipeline) and the bound on what the engines' step barrier adds: max_j e_j - max(e_0,
    e_{L-1}) for DeepSpeed, printed where it is not 0; 0 for Megatron-LM."""
    from sim.commands.train import _print_explain

    rng = np.random.default_rng(99)
    printed = 0
    for _ in range(12):
        plan, _kw = _random_plan(rng)
        for fw in ("deepspeed", "megatron", "sailor-deepspeed"):
            b = build_plan(replace(plan, framework=FrameworkSpec(fw)), prof, steps=1,
                           check_memory=False, p2p="blocking")
            x = explain_rows(b)
            e = x["stage_ends"]
            assert len(e) == b.config.stages and max(e) == pytest.approx(x["iteration"],
                                                                         rel=1e-12)
            want = 0.0 if fw == "megatron" else max(e) - max(e[0], e[-1])
            assert x["step_join"] == ("pipeline" if fw == "megatron" else "last-stage")
            assert x["step_join_bound"] == pytest.approx(want, abs=1e-15)
            if x["step_join_bound"] > 0:
                _print_explain(x, b.config.microbatches)
                assert "may be up to" in capsys.readouterr().out
                printed += 1
    assert printed >= 1
