"""Pipelines on physical nodes share each NIC and node pair (the closed form against the DES).

The closed form of a plan on physical nodes (:func:`sim.profiles.build.build_plan`) times
each point-to-point transfer with the flows of every transfer that may cross the same NIC
direction and node pair at once, over every hop of every pipeline
(:func:`sim.profiles.build.p2p_shares`), and the tied rings of all pipelines and the
stages' gradient rings with those of the rings then running
(:func:`sim.profiles.build.nic_shares`); alike pipelines in lockstep whose transfers over a
NIC or node pair direction never meet in their timeline (:func:`sim.profiles.build.in_lockstep`)
count only their own hop's (:func:`sim.profiles.build.hop_shares`). The DES runs the plan's
flows max-min over :func:`sim.profiles.build.physical_network`. With alike pipelines in
lockstep, where no two transfers of one NIC direction meet and at most one stage's ring
leaves its nodes, the two agree to 1e-9; otherwise the closed form is an upper bound (on
random plans, also where a node sends two hops' transfers at once, which the own hop's
counts do not count and fall up to 13.7% under the DES). The old law (each transfer alone)
is rejected.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim.profiles.build as B
from sim.engines import predictions
from sim.errors import ConfigError
from sim.planner.fleets import parse_nodes
from sim.planner.models import ProfilePlanModel
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan, explain_rows, host_of, nic_shares
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model

REL = 1e-9
KINDS = ("Titan-RTX", "RTX-3090", "RTX-2080")
SAILOR = FrameworkSpec("sailor-deepspeed")


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


def _closed(b) -> float:
    return predictions("training", b.config)["step_time_mean"]["value"]


def _des(plan, prof) -> float:
    b = build_plan(plan, prof, network=True)
    return training_model(b.config, Streams(0).replication(0))["step_time_mean"]


def _small_plan() -> Plan:
    """Three stages, two pipelines: stage 0 on host a (2 RTX-3090), stages 1-2 on host b
    (4 RTX-2080); DeepSpeed."""
    def reps(gpu, g, host):
        return tuple(ReplicaSpec(gpu, 1, g, "us-central1-a", host=host) for _ in range(2))
    return Plan((StageSpec(tuple(range(0, 13)), reps("RTX-3090", 2, "a")),
                 StageSpec(tuple(range(13, 20)), reps("RTX-2080", 4, "b")),
                 StageSpec(tuple(range(20, 26)), reps("RTX-2080", 4, "b"))),
                1, 64, model="OPT-350")


def test_small_plan_closed_form_is_the_des(prof, tie):
    """Two pipelines a -> b -> b: hop 0's two transfers share a's NIC out, the pair and b's NIC
    in; the two tied rings a <-> b (of a tied OPT-350: the shipped one is untied) share them
    too; the DES over the physical nodes agrees."""
    prof = tie(prof, "OPT-350")
    plan = _small_plan()
    b = build_plan(plan, prof)
    closed, explained, des = _closed(b), explain_rows(b)["iteration"], _des(plan, prof)
    assert closed == pytest.approx(des, rel=REL)
    assert explained == pytest.approx(des, rel=REL)
    assert des == pytest.approx(20.0490, abs=1e-4)
    # hop 0 is timed at two flows per NIC direction and pair; hop 1 (inside b) alone
    alone = B.physical_pair_time(prof, (plan.stages[0].replicas[0], (0, 0)),
                                 (plan.stages[1].replicas[0], (1, 0)), 1.0e6, 1)
    two = B.physical_pair_time(prof, (plan.stages[0].replicas[0], (0, 0)),
                               (plan.stages[1].replicas[0], (1, 0)), 1.0e6, 1, 2, 2, 2)
    assert two > 1.5 * alone


def _alone(monkeypatch) -> None:
    """The old law: every transfer and ring timed as if alone (no shares)."""
    monkeypatch.setattr(B, "nic_shares", lambda edges: {})
    for name in ("p2p_shares", "hop_shares"):
        monkeypatch.setattr(B, name, lambda plan, *_: [
            [(None, None)] * plan.dp[0] for _ in range(len(plan.stages) - 1)])


def test_the_old_law_each_transfer_alone_is_rejected(prof, monkeypatch, tie):
    """Timing every transfer and ring as if alone (no shares) gives 13.58 s, 32% under the
    DES's 20.05 s (a tied OPT-350, as in test_small_plan_closed_form_is_the_des)."""
    prof = tie(prof, "OPT-350")
    plan = _small_plan()
    des = _des(plan, prof)
    _alone(monkeypatch)
    old = explain_rows(build_plan(plan, prof))["iteration"]
    assert old == pytest.approx(13.5755, abs=1e-3)
    assert old < 0.7 * des


def test_shares_count_flows_per_nic_direction_and_pair():
    s = nic_shares([("a", "b", 2), ("a", "b", 2), ("a", "c", 1), ("c", "b", 4), ("b", "b", 8)])
    assert s == {("a", "b"): (5, 4, 8), ("a", "c"): (5, 1, 1), ("c", "b"): (4, 4, 8)}
    with pytest.raises(ConfigError):  # a count below the transfer's own flows
        B.physical_pair_time(load_profiles(models=("OPT-350",)),
                             (ReplicaSpec("RTX-3090", 2, 8, "us-central1-a", host="x"), (0, 0)),
                             (ReplicaSpec("RTX-3090", 2, 8, "us-central1-a", host="y"), (1, 0)),
                             1e6, 2, 1, 2, 2)


def _random_plan(prof, rng, framework=None):
    """2-4 stages of 2-8 replicas of one RTX kind each (TP 1 or 2), nodes of 2, 4 or 8 GPUs,
    placed in the planner's rank order (:meth:`ProfilePlanModel.place`), on ``framework``."""
    L, dp, g = int(rng.integers(2, 5)), int(rng.integers(2, 9)), int(rng.choice([2, 4, 8]))
    kinds = [str(rng.choice(KINDS)) for _ in range(L)]
    tp = int(rng.choice([1, 2]))
    need: dict[str, int] = {}
    for k in kinds:
        need[k] = need.get(k, 0) + dp * tp
    fleet = parse_nodes(",".join(f"{k}:{g}x{-(-n // g)}" for k, n in need.items()),
                        prof.network)
    cuts = sorted(rng.choice(np.arange(1, 26), size=L - 1, replace=False).tolist())
    bounds = [0, *cuts, 26]
    stages = tuple(StageSpec(tuple(range(bounds[j], bounds[j + 1])),
                             tuple(ReplicaSpec(kinds[j], tp, zone="us-central1-a")
                                   for _ in range(dp))) for j in range(L))
    plan = Plan(stages, 1, int(rng.integers(L, 2 * L + 2)) * dp, model="OPT-350",
                framework=framework)
    return ProfilePlanModel(prof, prof.model("OPT-350"), fleet=fleet).place(plan)


def _law_holds(plan) -> tuple[bool, bool]:
    """(bound, exact): no NIC direction carries transfers of two hops (or two directions of
    one); exact besides: every pipeline's transfer over a hop is timed with the same counts
    (alike pipelines in lockstep), the tied rings too, and at most one stage's ring leaves
    its nodes (rings of several sizes end at different times: the closed form's phases are
    exact where each ring's steps scale alike)."""
    L, r = len(plan.stages), plan.dp[0]
    host = [[host_of(x, (j, i)) for i, x in enumerate(st.replicas)]
            for j, st in enumerate(plan.stages)]
    use: dict[tuple, set] = {}
    alike = True
    for j in range(L - 1):
        edges = [(host[j][i], host[j + 1][i], 1) for i in range(r)]
        for a, b, _ in edges:
            if a != b:
                use.setdefault(("out", a), set()).add(("act", j))
                use.setdefault(("in", b), set()).add(("act", j))
                use.setdefault(("out", b), set()).add(("grad", j))
                use.setdefault(("in", a), set()).add(("grad", j))
        s = nic_shares(edges)
        alike &= len({s.get((a, b)) for a, b, _ in edges}) == 1
    tied = nic_shares([(host[0][i], host[-1][i], 1) for i in range(r)])
    alike &= len({tied.get((host[0][i], host[-1][i])) for i in range(r)}) == 1
    spanning = sum(len(set(h)) > 1 for h in host)
    bound = all(len(v) == 1 for v in use.values())
    return bound, bound and alike and spanning <= 1


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2))])
def test_random_physical_plans_closed_form_against_des(prof, seed, tie):
    """Random alike-pipeline plans on physical nodes, on the Sailor artifact's engine (its
    barrier: every pipeline's tied ring at once, then every stage's ring at once), where no
    NIC direction carries two hops' transfers: closed form >= DES (max-min gives each flow
    at least the least capacity / count over its links), = DES where the law is exact. Seeds
    0 and 2 on a tied OPT-350 (tied rings), seed 1 on the shipped, untied one."""
    prof = prof if seed == 1 else tie(prof, "OPT-350")
    rng = np.random.default_rng(100 + seed)
    exact = bounded = 0
    while exact < 5 or bounded < 5:
        plan = _random_plan(prof, rng, SAILOR)
        bound, is_exact = _law_holds(plan)
        if not bound or (is_exact and exact >= 5) or (not is_exact and bounded >= 5):
            continue
        try:
            b = build_plan(plan, prof)
        except ConfigError:  # out of memory
            continue
        closed, des = explain_rows(b)["iteration"], _des(plan, prof)
        assert closed == pytest.approx(_closed(b), rel=REL)
        assert closed >= des * (1 - REL), (plan, closed, des)
        if is_exact:
            assert closed == pytest.approx(des, rel=REL), (plan, closed, des)
            exact += 1
        else:
            bounded += 1


def test_rings_of_different_sizes_advance_in_phases(prof):
    """Two stages' rings crossing one NIC: the small one ends first and the large one goes on
    with the NIC to itself (the law of concurrent_allreduce_times), between the rings alone
    and both counted all the time."""
    h = ("n0", "n1")
    rings = [[(ReplicaSpec("RTX-3090", 1, 4, "us-central1-a", host=h[i % 2]), (j, i))
              for i in range(2)] for j in range(2)]
    sizes = [4.0e8, 1.0e8]
    ends = B.concurrent_allreduce_times(prof.network, rings, sizes, float("inf"), prof)
    alone = [B.plan_allreduce_time(prof.network, r, [1, 1], s, float("inf"), prof)
             for r, s in zip(rings, sizes, strict=True)]
    both = nic_shares((host_of(*r[i]), host_of(*r[1 - i]), 1) for r in rings for i in range(2))
    shared = [B.plan_allreduce_time(prof.network, r, [1, 1], s, float("inf"), prof, both)
              for r, s in zip(rings, sizes, strict=True)]
    assert ends[1] == pytest.approx(shared[1], rel=1e-12)  # the small one: shared all along
    assert alone[0] < ends[0] < shared[0]
    # the large one: shared until the small one ends, then alone for what is left
    assert ends[0] == pytest.approx(ends[1] + (1 - ends[1] / shared[0]) * alone[0], rel=1e-12)


def test_pruned_search_on_physical_nodes_keeps_the_top_plans(prof, monkeypatch):
    """Sharing only lengthens a transfer or ring (every count is at least its own flows), so
    the search's bounds (each alone) stay lower bounds: the pruned search on a physical fleet
    keeps the exhaustive search's top 5, whose best shares NICs (8% dearer than alone)."""
    from sim.planner import PlanRequest, search_plans

    model = prof.model("OPT-350")
    fleet = parse_nodes("RTX-2080:4x2,Titan-RTX:4x1", prof.network)
    req = PlanRequest(64, microbatch_sizes=(1,), top=5)
    pruned = search_plans(model, fleet, prof.gpus, req, ProfilePlanModel(prof, model, fleet=fleet))
    full = search_plans(model, fleet, prof.gpus, req, ProfilePlanModel(prof, model, fleet=fleet),
                        prune=False)
    key = lambda r: [round(c.key("time"), 12) for c in r.candidates]  # noqa: E731
    assert key(pruned) == key(full) and len(key(full)) == 5
    assert pruned.evaluated < full.evaluated
    best = full.candidates[0]
    _alone(monkeypatch)  # the old law: each alone
    alone = ProfilePlanModel(prof, model, fleet=fleet).predict(best.plan).iteration_time
    assert best.prediction.iteration_time > 1.05 * alone


def _old_p2p_shares(plan, p2p):
    """The rule before p2p_shares: a transfer counted with every pipeline's transfer over its
    own hop in its own direction only (nic_shares of that hop's edges)."""
    L, r = len(plan.stages), plan.dp[0]
    host = [[host_of(x, (j, i)) for i, x in enumerate(st.replicas)]
            for j, st in enumerate(plan.stages)]
    tp = [st.replicas[0].tp for st in plan.stages]
    out = []
    for j in range(L - 1):
        fwd = nic_shares((host[j][i], host[j + 1][i], tp[j]) for i in range(r))
        bwd = nic_shares((host[j + 1][i], host[j][i], tp[j + 1]) for i in range(r))
        out.append([(fwd.get((host[j][i], host[j + 1][i])), bwd.get((host[j + 1][i], host[j][i])))
                    for i in range(r)])
    return out


def _two_stages_on_a_node() -> Plan:
    """Stage 0 on hosts a (pipelines 0-1) and c (2-3), stage 1 on c (0-1) and b (2-3), stage 2
    on d: host c holds stage 0 of pipelines 2-3 and stage 1 of pipelines 0-1, so hop 0's
    activations (to b) and hop 1's (to d) both leave its NIC."""
    def st(layers, gpu, hosts):
        return StageSpec(layers, tuple(ReplicaSpec(gpu, 1, 4, "us-central1-a", host=h)
                                       for h in hosts))
    return Plan((st(tuple(range(0, 9)), "RTX-3090", "aacc"),
                 st(tuple(range(9, 18)), "RTX-3090", "ccbb"),
                 st(tuple(range(18, 26)), "RTX-3090", "dddd")), 1, 32, model="OPT-350")


def test_transfers_of_two_hops_leaving_one_nic_are_counted():
    """Host c sends hop 0's activations of pipelines 2-3 (to b), hop 0's gradients of
    pipelines 0-1 (to a) and hop 1's activations of pipelines 0-1 (to d). A device's gradient
    back and activation forward (stage 1 of pipelines 0-1 on c) never run at once under
    blocking or batched transfers, so each pipeline puts at most one flow on c's sending
    direction: 4 for each of them (the old rule: 2, its own hop and direction only); with
    overlapped transfers both count (6). Into c: hop 0's activations from a, hop 0's
    gradients from b and hop 1's from d, again one per pipeline."""
    plan = _two_stages_on_a_node()
    blocking = B.p2p_shares(plan, "blocking")
    assert B.p2p_shares(plan, "batched") == blocking
    overlap = B.p2p_shares(plan, "overlap")
    old = _old_p2p_shares(plan, "blocking")
    # [hop][pipeline] -> (activation, gradient), each (out, pair, into)
    assert blocking[0][2][0] == (4, 2, 2) and old[0][2][0] == (2, 2, 2)  # c -> b
    assert blocking[0][0][1] == (4, 2, 2) and old[0][0][1] == (2, 2, 2)  # c -> a
    assert blocking[1][0][0] == (4, 2, 4) and old[1][0][0] == (2, 2, 4)  # c -> d
    assert blocking[0][0][0] == (2, 2, 4) and old[0][0][0] == (2, 2, 2)  # a -> c
    assert overlap[0][2][0] == (6, 2, 4) and overlap[0][0][0] == (2, 2, 6)
    assert blocking[1][2] == old[1][2] == ((2, 2, 4), (4, 2, 2))  # b <-> d: one hop each way


def test_random_physical_plans_never_below_the_des(prof, monkeypatch):
    """40 random plans on physical nodes (no filter: nodes may send or receive transfers of
    two hops at once), Sailor's engine: the closed form is never below the DES and equals it
    where the old law was exact, and wherever the old rule (each transfer counted with its own
    hop's transfers only, hop_shares) gave the DES; that rule is below the DES on some of
    them by more than 10%."""
    rng = np.random.default_rng(100)
    plans = []
    while len(plans) < 40:
        plan = _random_plan(prof, rng, SAILOR)
        try:
            b = build_plan(plan, prof)
        except ConfigError:  # out of memory
            continue
        plans.append((plan, explain_rows(b)["iteration"], _des(plan, prof)))
    shared = 0
    for plan, closed, des in plans:
        # 1e-5: a curve link shared by messages of two sizes (the DES's time fractions
        # r / c(s), sim.network.curves) is not counted; 1.3e-6 on one plan of seed 101
        assert closed >= des * (1 - 1e-5), (plan, closed, des)
        bound, exact = _law_holds(plan)
        shared += not bound
        if exact:
            assert closed == pytest.approx(des, rel=REL)
    assert shared >= 20
    assert all(B.hop_shares(p) == _old_p2p_shares(p, None) for p, _, _ in plans)
    monkeypatch.setattr(B, "in_lockstep", lambda *a: True)  # the old rule: hop_shares always
    olds = [explain_rows(build_plan(p, prof))["iteration"] for p, _, _ in plans]
    exact = 0
    for (plan, closed, des), old in zip(plans, olds, strict=True):
        if old == pytest.approx(des, rel=REL):
            assert closed == pytest.approx(des, rel=REL), (plan, closed, old, des)
            exact += 1
    assert exact >= 30
    assert min(old / d - 1 for old, (_, _, d) in zip(olds, plans, strict=True)) < -0.10


@pytest.mark.parametrize("fw", ["sailor", "megatron", "megatron-overlap", "gpipe"])
def test_busiest_device_bound_is_below_the_pipeline_phase(prof, fw):
    """The search's bound read off a build (pipeline_busy_bound: the busiest device's compute
    and blocking transfers, NIC sharing included) is never above the pipeline phase
    explain_rows evaluates, on random physical plans of each point-to-point mode (65-99% of
    it on these). Counting Megatron-LM's batched pairs as two blocking transfers each (the
    longer is right: they run at once) passes the phase on some: that rule is rejected."""
    import dataclasses

    from sim.planner.models import pipeline_busy_bound

    spec = {"sailor": SAILOR, "gpipe": SAILOR, "megatron": FrameworkSpec("megatron"),
            "megatron-overlap": FrameworkSpec("megatron",
                                              options=(("overlap_grad_reduce", True),))}[fw]
    rng = np.random.default_rng(7)
    done = wrong = 0
    while done < 12:
        plan = _random_plan(prof, rng, spec)
        try:
            b = build_plan(plan, prof, schedule="gpipe" if fw == "gpipe" else "1f1b")
        except ConfigError:
            continue
        done += 1
        bound, phase = pipeline_busy_bound(b), explain_rows(b)["pipeline_time"]
        assert 0.5 * phase < bound <= phase, (plan, bound, phase)
        assert b.config.p2p == ("batched" if fw.startswith("megatron") else "blocking")
        if b.config.p2p == "batched":
            as_blocking = dataclasses.replace(b, config=dataclasses.replace(b.config,
                                                                            p2p="blocking"))
            wrong += pipeline_busy_bound(as_blocking) > phase
    assert wrong >= (3 if fw.startswith("megatron") else 0)


def test_pruned_megatron_search_on_physical_nodes_keeps_the_top_plans(prof):
    """Megatron-LM with overlap_grad_reduce on a physical fleet: the pruned search, which
    skips plans whose busiest device already passes the top-th before evaluating their
    programs, keeps the exhaustive search's top 5, and skips some that way."""
    from sim.planner import PlanRequest, search_plans

    model = prof.model("OPT-350")
    fleet = parse_nodes("RTX-2080:4x2,Titan-RTX:4x1", prof.network)
    spec = FrameworkSpec("megatron", options=(("overlap_grad_reduce", True),))
    req = PlanRequest(64, microbatch_sizes=(1,), top=5)

    def pm():
        return ProfilePlanModel(prof, model, fleet=fleet, framework=spec)
    pruned = search_plans(model, fleet, prof.gpus, req, pm())
    full = search_plans(model, fleet, prof.gpus, req, pm(), prune=False)
    key = lambda r: [(round(c.key("time"), 12), c.plan) for c in r.candidates]  # noqa: E731
    assert key(pruned) == key(full) and len(key(full)) == 5
    plain = pm()
    plain.predict_unless = None  # the search without the build's bound
    without = search_plans(model, fleet, prof.gpus, req, plain)
    assert key(without) == key(full)
    assert pruned.evaluated < without.evaluated and pruned.skipped > without.skipped


def _rules(plan, prof, monkeypatch, p2p=None):
    """Whether ``plan``'s pipelines run in lockstep apart (None: no NIC direction carries two
    kinds of transfer, so the two rules agree), its closed form, the old rule's (hop_shares
    always) and the upper bound's (p2p_shares where two kinds cross one direction), and the
    DES."""
    orig, seen = B.in_lockstep, []
    with monkeypatch.context() as m:
        m.setattr(B, "in_lockstep", lambda *a: seen.append(orig(*a)) or seen[-1])
        closed = explain_rows(build_plan(plan, prof, p2p=p2p))["iteration"]
        m.setattr(B, "in_lockstep", lambda *a: True)
        old = explain_rows(build_plan(plan, prof, p2p=p2p))["iteration"]
        m.setattr(B, "in_lockstep", lambda *a: False)
        bound = explain_rows(build_plan(plan, prof, p2p=p2p))["iteration"]
    des = training_model(build_plan(plan, prof, network=True, p2p=p2p).config,
                         Streams(0).replication(0))["step_time_mean"]
    assert len(seen) == bool(B.crossing_kinds(plan))
    return (seen[0] if seen else None), closed, old, bound, des


def _bench_six_by_four(prof, framework=None) -> Plan:
    """The bench fleet's (sim.bench.planner.MIXED_64) 6 stages of 4 RTX-2080s (layers 4, 4, 5,
    4, 5, 4), placed in rank order: stages 2k and 2k + 1 on RTX-2080 node k."""
    from sim.bench.planner import MIXED_64

    fleet = parse_nodes(MIXED_64, prof.network)
    bounds = np.cumsum([0, 4, 4, 5, 4, 5, 4]).tolist()
    stages = tuple(StageSpec(tuple(range(bounds[j], bounds[j + 1])),
                             tuple(ReplicaSpec("RTX-2080", 1, zone="us-central1-a")
                                   for _ in range(4))) for j in range(6))
    plan = Plan(stages, 1, 256, model="OPT-350", framework=framework)
    return ProfilePlanModel(prof, prof.model("OPT-350"), fleet=fleet).place(plan)


def test_bench_fleet_six_stages_of_four_is_the_des(prof, monkeypatch):
    """The bench fleet's 6 x 4 RTX-2080 plan (DeepSpeed): each node sends one hop's
    activations and another's gradients, which its alike pipelines in lockstep never send at
    once, so each transfer's own hop's counts are exact: the closed form is the DES's 11.795 s
    (the upper bound, counting the two hops as meeting: 13.296 s, which put the plan below
    others in dtsim plan; 12.087 and 13.588 s while OPT-350 was tied)."""
    plan = _bench_six_by_four(prof)
    assert [len({x.host for x in st.replicas}) for st in plan.stages] == [1] * 6
    assert len({x.host for st in plan.stages for x in st.replicas}) == 3
    lock, closed, old, bound, des = _rules(plan, prof, monkeypatch)
    assert lock and closed == old
    assert closed == pytest.approx(des, rel=REL)
    assert des == pytest.approx(11.7947, abs=1e-3)  # untied OPT-350 (12.087 s when tied)
    assert bound == pytest.approx(13.2958, abs=1e-3)


def _paired_plan(prof, rng, framework):
    """3-6 stages of 2 or 4 replicas of one RTX kind (TP 1 or 2), in nodes of two stages' GPUs
    (rank order: stages 2k and 2k + 1 share node k), so each node sends one hop's activations
    and another's gradients (and receives two hops' too): alike pipelines."""
    L = int(rng.integers(3, 7))
    dp, tp = [(2, 1), (4, 1), (2, 2)][int(rng.integers(3))]
    kind = str(rng.choice(KINDS))
    fleet = parse_nodes(f"{kind}:{2 * dp * tp}x{-(-L // 2)}", prof.network)
    cuts = sorted(rng.choice(np.arange(1, 26), size=L - 1, replace=False).tolist())
    bounds = [0, *cuts, 26]
    stages = tuple(StageSpec(tuple(range(bounds[j], bounds[j + 1])),
                             tuple(ReplicaSpec(kind, tp, zone="us-central1-a")
                                   for _ in range(dp))) for j in range(L))
    plan = Plan(stages, 1, int(rng.integers(L, 2 * L + 2)) * dp, model="OPT-350",
                framework=framework)
    return ProfilePlanModel(prof, prof.model("OPT-350"), fleet=fleet).place(plan)


@pytest.mark.parametrize("mode", [pytest.param("sailor", marks=pytest.mark.slow),
                                  pytest.param("sailor-overlap", marks=pytest.mark.slow),
                                  "megatron"])  # the cheapest in the default suite
def test_alike_pipelines_whose_transfers_never_meet_are_exact(prof, monkeypatch, mode):
    """15 random plans of alike pipelines with two stages per node (blocking, overlapped on
    channels, Megatron-LM's batched pairs). Where no two transfers crossing one NIC or node
    pair direction overlap in the pipeline's timeline (in_lockstep), the own hop's counts
    give the DES to 1e-9, where the upper bound was above it by 0.4% or more on at least 5;
    elsewhere the closed form is the upper bound, never below the DES, and the own hop's
    counts (transfers that do meet, not counted) fall more than 0.1% under the DES on one at
    least: the check is needed."""
    fw, p2p = {"sailor": (SAILOR, None), "sailor-overlap": (SAILOR, "overlap"),
               "megatron": (FrameworkSpec("megatron"), None)}[mode]
    rng = np.random.default_rng(5)
    done = tighter = needed = 0
    while done < 15:
        plan = _paired_plan(prof, rng, fw)
        try:
            build_plan(plan, prof, p2p=p2p)
        except ConfigError:  # out of memory
            continue
        done += 1
        lock, closed, old, bound, des = _rules(plan, prof, monkeypatch, p2p)
        assert closed >= des * (1 - REL), (plan, closed, des)
        if lock is not False:
            assert closed == old == pytest.approx(des, rel=REL), (plan, closed, des)
            tighter += bound > 1.004 * des
        else:
            assert closed == bound
            needed += old < des * (1 - 1e-3)
    assert tighter >= 5 and needed >= 1, (tighter, needed)


def test_program_spans_are_the_transfers_times():
    """program_makespan's spans: every transfer's (start, end), ``end - start`` its time;
    under blocking no two transfers of one device overlap, on channels no two of one pair
    and direction."""
    from sim.analytic.training import program_makespan
    from sim.training.schedules import device_program

    f, b, act, grad = [1.0, 1.5, 0.7], [2.0, 2.5, 1.1], [0.3, 0.9], [0.4, 0.2]
    for blocking, batched in ((True, False), (True, True), (False, False)):
        progs = [device_program("1f1b", 3, 5, j, blocking=blocking, batched=batched)
                 for j in range(3)]
        spans: dict = {}
        T = program_makespan(progs, f, b, act, grad, blocking=blocking, spans=spans)
        assert T == program_makespan(progs, f, b, act, grad, blocking=blocking)
        assert len(spans) == 2 * 2 * 5
        for (tag, h, _i), (t0, t1) in spans.items():
            assert t1 - t0 == pytest.approx((act if tag == "a" else grad)[h], rel=1e-12)
            assert 0 <= t0 and t1 <= T
        for h in range(2):  # one pair and direction: one after the other
            for tag in "ag":
                xs = sorted(v for k, v in spans.items() if k[:2] == (tag, h))
                assert all(x[1] <= y[0] for x, y in zip(xs, xs[1:], strict=False))
        if blocking and not batched:  # device 1 holds hops 0 and 1: one transfer at a time
            xs = sorted(spans.values())
            assert all(x[1] <= y[0] for x, y in zip(xs, xs[1:], strict=False))


@pytest.mark.parametrize("p2p", ["blocking", "batched", "overlap", "shared"])
def test_transfer_spans_compiled_are_the_spans(p2p):
    """transfer_spans (the compiled loop on a long trace: 40 micro-batches over 4 stages) gives
    every transfer's kind, start and end as program_makespan's spans do."""
    from sim.analytic.training import program_makespan, transfer_spans
    from sim.training.schedules import device_program, p2p_program

    blocking, batched = p2p_program(p2p)
    f, b, act, grad = [1.0, 1.5, 0.7, 1.2], [2.0, 2.5, 1.1, 2.3], [0.3, 0.9, 0.5], [0.4, 0.2, 1.3]
    progs = [device_program("1f1b", 4, 40, j, blocking=blocking, batched=batched)
             for j in range(4)]
    kw = dict(blocking=blocking, channels=p2p == "overlap")
    spans: dict = {}
    program_makespan(progs, f, b, act, grad, spans=spans, **kw)
    kind, t0, t1 = transfer_spans(progs, f, b, act, grad, **kw)
    want = sorted((2 * h + (tag == "g"), x, y) for (tag, h, _), (x, y) in spans.items())
    assert len(want) == 2 * 3 * 40
    assert sorted(zip(kind.tolist(), t0.tolist(), t1.tolist(), strict=True)) == want


@pytest.mark.parametrize("microbatches", [3, 40])
def test_transfers_meet_is_the_spans_overlapping(microbatches):
    """transfers_meet (compiled on the long trace, Python on the short one) says whether two
    transfers of one group of kinds overlap, as pairwise checks of program_makespan's spans
    do, under every p2p mode and for single kinds and pairs of kinds."""
    import itertools

    from sim.analytic.training import program_makespan, transfers_meet
    from sim.training.schedules import device_program, p2p_program

    f, b, act, grad = [1.0, 1.5, 0.7, 1.2], [2.0, 2.5, 1.1, 2.3], [0.3, 0.9, 0.5], [0.4, 0.2, 1.3]
    seen = set()
    for p2p in ("blocking", "batched", "overlap", "shared"):
        blocking, batched = p2p_program(p2p)
        progs = [device_program("1f1b", 4, microbatches, j, blocking=blocking, batched=batched)
                 for j in range(4)]
        kw = dict(blocking=blocking, channels=p2p == "overlap")
        spans: dict = {}
        program_makespan(progs, f, b, act, grad, spans=spans, **kw)
        for group in [(k,) for k in range(6)] + list(itertools.combinations(range(6), 2)):
            xs = [v for (tag, h, _), v in spans.items() if 2 * h + (tag == "g") in group]
            want = any(max(x[0], y[0]) < min(x[1], y[1]) for x, y in itertools.combinations(xs, 2))
            assert transfers_meet(progs, f, b, act, grad, (group,), **kw) == want, (p2p, group)
            for _ in range(2):  # its trace kept under a key, then found by it
                assert transfers_meet(progs, f, b, act, grad, (group,), key=(p2p, microbatches),
                                      **kw) == want
            seen.add(want)
    assert seen == {True, False}


def test_link_latency_is_paid_once_between_two_nodes(prof):
    """A measured link's latency is the whole GPU-to-GPU path's: the closed form pays the
    largest latency of the links a transfer crosses once (``physical_pair_time``), and the DES
    over :func:`sim.profiles.build.physical_network` must too. Every link of the shipped
    network given 1 ms of latency: the two agree (they did without latencies, the shipped
    curves having none). Before the fix the DES's route paid it three times (a's NIC, the
    pair link and b's NIC), 2 ms more per transfer: 16.640 s against the closed form's
    16.512 s."""
    from dataclasses import replace

    slow = replace(prof, network=type(prof.network)(tuple(
        replace(x, latency=1e-3) for x in prof.network.links)))
    plan = _small_plan()
    fast_closed, fast_des = _closed(build_plan(plan, prof)), _des(plan, prof)
    closed, des = _closed(build_plan(plan, slow)), _des(plan, slow)
    assert fast_closed == pytest.approx(fast_des, rel=REL)
    assert closed > fast_closed + 0.01  # the latency counts
    assert closed == pytest.approx(des, rel=REL)


def test_placement_keeps_a_fleets_nodes_as_runs_first_fit_in_rank_order(prof):
    """audit4: the planner placed replicas on a list of every node of the fleet (copied for
    each plan): a fleet of 10^12 nodes raised MemoryError (10^9: 15 GB and a hang). Nodes are
    runs now; first fit in rank order is the same: RTX-3090 nodes of 4 GPUs (3 of them) then
    of 8, a TP-8 replica skips the 4-GPU nodes (node 3), TP-2 replicas fill node 0 then 1,
    a TP-4 one takes node 2 (nodes 0 and 1 are full), the last TP-2 node 4 (3 is full)."""
    from sim.profiles import Fleet, NodeKind

    z = "us-central1-a"
    fleet = Fleet(((NodeKind("RTX-3090", 4, z), 3), (NodeKind("RTX-3090", 8, z), 10**12)),
                  prof.network)
    reps = [("RTX-3090", t) for t in (8, 2, 2, 2, 2, 4, 2)]
    plan = Plan((StageSpec(tuple(range(26)), tuple(ReplicaSpec(g, t, zone=z) for g, t in reps)),),
                1, 7, model="OPT-350")
    placed = ProfilePlanModel(prof, prof.model("OPT-350"), fleet=fleet).place(plan)
    got = [(r.host, r.gpus_per_node) for r in placed.stages[0].replicas]
    want = [3, 0, 0, 1, 1, 2, 4]
    assert got == [(f"RTX-3090@{z}#{n}", 8 if n >= 3 else 4) for n in want]
