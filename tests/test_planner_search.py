"""The plan search (sim.planner.search): bounds never drop a best plan; cuts are the exact partition."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sim import analytic
from sim.errors import ConfigError
from sim.planner import PlanRequest, search_plans
from sim.profiles import (
    Fleet,
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    ModelProfile,
    NodeKind,
)


class ToyModel:
    """A stand-in for the closed form and the memory model (this file tests the search only).

    Iteration time: the 1F1B fill and drain over the stages' compute plus ``m - 1`` passes of
    the bottleneck stage, plus a data-parallel term growing with dp (so that wide plans are not
    free); memory: parameters x 16 bytes plus activations x the micro-batches 1F1B holds.
    """

    def __init__(self, model: ModelProfile, gpus: GPUCatalogue, sync: float = 0.01):
        self.model, self.gpus, self.sync = model, gpus, sync

    def memory_terms(self, gpu, tp, mbs, stage, stages, microbatches):
        held = min(stages - stage, microbatches)
        return ((1.0, tuple(s.params * 16 + s.activation_memory_bytes * mbs * held
                            for s in self.model.layer_sizes(tp))),)

    def memory_cap(self, gpu, tp):
        return self.gpus[gpu].memory_bytes

    def predict(self, plan):
        mbs, m, p = plan.microbatch_size, plan.microbatches, plan.pipeline_stages
        stage_times, peak = [], 0.0
        for j, st in enumerate(plan.stages):
            worst = 0.0
            for r in st.replicas:
                lt = self.model.layer_times(r.gpu, mbs, r.tp)
                worst = max(worst, sum(lt[i].forward + lt[i].backward for i in st.layers))
                ((fixed, per),) = self.memory_terms(r.gpu, r.tp, mbs, j, p, m)
                mem = fixed + sum(per[i] for i in st.layers)
                if mem > self.memory_cap(r.gpu, r.tp):
                    raise ConfigError("plan", "fits", j)
                peak = max(peak, mem)
            stage_times.append(worst)
        dp = plan.dp[0]
        t = sum(stage_times) + (m - 1) * max(stage_times) + self.sync * (dp - 1)
        return SimpleNamespace(iteration_time=t, peak_memory=peak)


def _model(n=8, speeds=(("fast", 1.0), ("slow", 2.0)), mbs=(1, 2, 4), tps=(1, 2), params=1000,
           cycle=3):
    """n layers, work 1 + (i % cycle); a GPU's time is work x its factor / tp^0.8, x mbs."""
    times = []
    for gpu, f in speeds:
        for b in mbs:
            for tp in tps:
                times.append(((gpu, b, tp), tuple(
                    LayerTimes(0.3 * (1 + i % cycle) * f * b / tp ** 0.8,
                               0.6 * (1 + i % cycle) * f * b / tp ** 0.8, 0.0) for i in range(n))))
    sizes = tuple((tp, tuple(LayerSizes(params // tp, 64.0, 200.0 / tp) for _ in range(n)))
                  for tp in tps)
    return ModelProfile("toy", n, tuple(times), sizes)


def _catalogue(mem=1e9):
    return GPUCatalogue((GPUType("fast", mem, price_per_hour=3.0),
                         GPUType("slow", mem, price_per_hour=1.0)))


def _fleet(fast=2, slow=2, gpn=2):
    return Fleet(((NodeKind("fast", gpn, "z"), fast), (NodeKind("slow", gpn, "z"), slow)))


@pytest.mark.parametrize("objective", ["time", "cost"])
@pytest.mark.parametrize("layouts", [("stage", "pipeline"), ("stage",)])
def test_bound_never_drops_a_best_plan(objective, layouts):
    """The pruned search keeps exactly the top plans of the exhaustive one."""
    model, cat = _model(n=6, mbs=(1, 2)), _catalogue()
    req = PlanRequest(16, objective=objective, top=5, layouts=layouts)
    pm = ToyModel(model, cat)
    pruned = search_plans(model, _fleet(1, 2), cat, req, pm)
    full = search_plans(model, _fleet(1, 2), cat, req, pm, prune=False)
    key = lambda r: [round(c.key(objective), 12) for c in r.candidates]  # noqa: E731
    assert key(pruned) == key(full)
    assert pruned.evaluated < full.evaluated  # the bound did prune
    assert len({c.layout for c in full.candidates}) >= 1


def test_cuts_are_the_exact_partition_of_each_stage_sequence():
    """Every plan's cut has the least compute bottleneck for its stages' GPU types (vs the DP)."""
    model, cat = _model(n=9, mbs=(2,)), _catalogue()
    res = search_plans(model, _fleet(1, 2), cat, PlanRequest(16, top=30), ToyModel(model, cat),
                       prune=False)
    checked = 0
    for c in res.candidates:
        plan = c.plan
        rows = [[[t.forward + t.backward for t in model.layer_times(r.gpu, plan.microbatch_size,
                                                                    r.tp)]
                 for r in dict.fromkeys(st.replicas)] for st in plan.stages]
        cut_times = analytic.block_times(
            [0, *[st.layers[-1] + 1 for st in plan.stages]], times=rows)
        # memory is loose here (1e9 bytes), so the DP without caps is the same problem
        assert max(cut_times) == pytest.approx(analytic.dp_partition(times=rows).bottleneck,
                                               rel=1e-12)
        checked += 1
    assert checked == len(res.candidates) > 10


def test_memory_caps_shape_the_cut():
    """With tight memory the first stage (which holds most micro-batches under 1F1B) gets fewer layers."""
    model = _model(n=8, speeds=(("fast", 1.0),), tps=(1,), params=10)
    loose = _catalogue(1e9)
    # a layer takes 160 B of parameters and 200 B per micro-batch held: stage 0 of 2 holds 2
    # (560 B a layer, at most 3 layers in 2001 B), stage 1 holds 1 (360 B, at most 5 layers)
    tight = GPUCatalogue((GPUType("fast", 2001, price_per_hour=3.0),
                          GPUType("slow", 1e9, price_per_hour=1.0)))
    fleet = Fleet(((NodeKind("fast", 1, "z"), 2),))
    req = PlanRequest(4, microbatch_sizes=(1,), max_stages=2, layouts=("stage",))
    free = search_plans(model, fleet, loose, req, ToyModel(model, loose), prune=False)
    capped = search_plans(model, fleet, tight, req, ToyModel(model, tight), prune=False)
    two = lambda r: [c.plan for c in r.candidates if c.plan.pipeline_stages == 2]  # noqa: E731
    assert [len(s.layers) for s in two(free)[0].stages] == [4, 4]
    sizes = [len(s.layers) for s in two(capped)[0].stages]
    assert sizes == [3, 5]
    for c in capped.candidates:  # every plan the search returns fits
        assert c.peak_memory <= tight["fast"].memory_bytes


def test_heterogeneous_stage_cut_follows_speed():
    """A fast and a slow GPU in one pipeline: the fast one takes about twice the work."""
    model, cat = _model(n=12, mbs=(1,), tps=(1,), cycle=1), _catalogue()
    fleet = Fleet(((NodeKind("fast", 1, "z"), 1), (NodeKind("slow", 1, "z"), 1)))
    res = search_plans(model, fleet, cat, PlanRequest(8, max_stages=2, layouts=("stage",)),
                       ToyModel(model, cat), prune=False)
    het = [c for c in res.candidates if {r.gpu for s in c.plan.stages for r in s.replicas}
           == {"fast", "slow"}]
    assert het
    for c in het:
        layers = {s.replicas[0].gpu: len(s.layers) for s in c.plan.stages}
        assert layers == {"fast": 8, "slow": 4}  # 12 equal layers split 2:1, in either order


@pytest.mark.parametrize("kwargs,message", [
    (dict(global_batch_size=0), "'global_batch_size' must be an integer >= 1: 0"),
    (dict(global_batch_size=8, objective="speed"),
     "'objective' must be one of time, throughput, cost: 'speed'"),
    (dict(global_batch_size=8, layouts=("ring",)),
     "'layouts' must be one of stage, pipeline: 'ring'"),
    (dict(global_batch_size=8, memory_fraction=0), "'memory_fraction' must be in (0, 1]: 0"),
    (dict(global_batch_size=8, tp=(0,)), "'tp' must be an integer >= 1: 0"),
    (dict(global_batch_size=8, prices=(("fast", -1.0),)), "'prices' must be > 0: -1.0"),
])
def test_request_refuses_bad_values(kwargs, message):
    """PlanRequest names the field, the rule and the value."""
    with pytest.raises(ConfigError) as exc:
        PlanRequest(**kwargs)
    assert str(exc.value) == message


def test_search_refuses_what_cannot_be_planned():
    """No GPU of a profiled type, no dividing micro-batch size, no price for samples per dollar."""
    model = _model()
    cat = GPUCatalogue((GPUType("fast", 1e9), GPUType("slow", 1e9), GPUType("other", 1e9)))
    pm = ToyModel(model, cat)
    with pytest.raises(ConfigError, match="'fleet' must be GPUs of a type the profile of toy"):
        search_plans(model, Fleet(((NodeKind("other", 1, "z"), 2),)), cat, PlanRequest(8), pm)
    with pytest.raises(ConfigError, match="'microbatch_sizes' must be a micro-batch size"):
        search_plans(model, _fleet(), cat, PlanRequest(3, microbatch_sizes=(2,)), pm)
    with pytest.raises(ConfigError) as exc:
        search_plans(model, _fleet(), cat, PlanRequest(8, objective="cost"), pm)
    assert str(exc.value) == ("'prices' must be a price for every GPU type of the fleet (the "
                              "catalogue's, or given: --price GPU=DOLLARS_PER_HOUR): 'fast, slow'")
    res = search_plans(model, _fleet(), cat, PlanRequest(8, objective="cost", prices=(
        ("fast", 2.0), ("slow", 1.0))), pm)
    assert res.best.samples_per_dollar > 0


def test_no_plan_names_the_option_that_left_every_plan_out():
    """A fleet that holds the model at the defaults, with every plan priced above
    --max-price-per-hour or none fitting --memory-fraction of the memory: the option is named,
    not the fleet ('fleet' must be GPUs enough to hold the model, which they are)."""
    model = _model()
    cat = GPUCatalogue((GPUType("fast", 1e9), GPUType("slow", 1e9)))
    pm = ToyModel(model, cat)
    prices = (("fast", 2.0), ("slow", 1.0))
    assert search_plans(model, _fleet(), cat, PlanRequest(8, prices=prices), pm).candidates
    with pytest.raises(ConfigError, match="^'max_price_per_hour' must be at least the price "):
        search_plans(model, _fleet(), cat, PlanRequest(8, prices=prices,
                                                       max_price_per_hour=1e-300), pm)
    with pytest.raises(ConfigError, match="^'memory_fraction' must be large enough that a "):
        search_plans(model, _fleet(), cat, PlanRequest(8, memory_fraction=1e-300), pm)


@pytest.mark.parametrize("objective, top", [("time", 1), ("time", 3), ("cost", 4)])
def test_only_the_top_plans_keep_their_predictions(monkeypatch, objective, top):
    """A ranked plan's prediction (with a plan's model: its build, in proportion to its
    replicas) is read again only for the plans returned: the search keeps it for at most
    2 x top of them (it kept every one: 1.9 GB peak RSS at GH-96:4x30000), and returns the
    same plans in the same order, ties included, each with its prediction."""
    from sim.planner import search as S

    made = []
    init = S._Search.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(S._Search, "__init__", spy)
    model, cat = _model(n=6, mbs=(1, 2)), _catalogue()
    req = PlanRequest(16, objective=objective, top=top)
    pm = ToyModel(model, cat)
    got = search_plans(model, _fleet(2, 2), cat, req, pm, prune=False)
    held = [c for c in made[-1].ranked if c.prediction is not None]
    assert len(made[-1].ranked) > 4 * top and len(held) <= 2 * top
    monkeypatch.setattr(S._Search, "_release", lambda self: None)  # every prediction kept
    kept = search_plans(model, _fleet(2, 2), cat, req, pm, prune=False)
    assert all(c.prediction is not None for c in made[-1].ranked)
    assert [(c.plan, c.layout, c.iteration_time) for c in got.candidates] == \
        [(c.plan, c.layout, c.iteration_time) for c in kept.candidates]
    assert all(c.prediction is not None for c in got.candidates) and len(got.candidates) == top
