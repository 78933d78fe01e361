"""Tests of the closed forms and exact recursions in sim.analytic.

Every function is checked against brute force: direct enumeration of all
worker/domain states or of all pairs/matchings, explicit averaging matrices
for small graphs, or seeded Monte Carlo within 4 standard errors.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import analytic as A
from sim.errors import ConfigError
from sim.rng import Streams

# --------------------------------------------------------------------------- helpers


def _rng(name: str, seed: int = 2026) -> np.random.Generator:
    return Streams(seed).rng(name)


def _enumerate_pipeline(L: int, r: int, a: float, rho: float) -> np.ndarray:
    """P(#out stages = k) by enumerating every domain and worker state."""
    dist = np.zeros(L + 1)
    for bits in itertools.product((0, 1), repeat=L * (r + 1)):
        p, out = 1.0, 0
        for j in range(L):
            dom_up = bits[j * (r + 1)]
            workers = bits[j * (r + 1) + 1:(j + 1) * (r + 1)]
            p *= (1 - rho) if dom_up else rho
            for w in workers:
                p *= a if w else (1 - a)
            out += not (dom_up and any(workers))
        dist[out] += p
    return dist


def _brute_placement(rd, outage, avail, s=None):
    """Out-stage distribution (or drop probability if ``s`` is given) by enumerating all states."""
    doms = sorted({d for stage in rd for ch in stage for d in ch})
    reps = [(j, i, tuple(ch)) for j, stage in enumerate(rd) for i, ch in enumerate(stage)]
    if not isinstance(avail, list):
        avail = [[avail] * len(stage) for stage in rd]
    dist = np.zeros(len(rd) + 1)
    for ds in itertools.product((0, 1), repeat=len(doms)):
        up = dict(zip(doms, ds, strict=True))
        pd = math.prod((1 - outage.get(d, 0.0)) if up[d] else outage.get(d, 0.0) for d in doms)
        if pd == 0:
            continue
        for ws in itertools.product((0, 1), repeat=len(reps)):
            pw = math.prod(avail[j][i] if w else 1 - avail[j][i]
                           for w, (j, i, _) in zip(ws, reps, strict=True))
            nout = 0
            for j in range(len(rd)):
                alive = any(w and all(up[d] for d in ch)
                            for w, (jj, _, ch) in zip(ws, reps, strict=True) if jj == j)
                nout += not alive
            dist[nout] += pd * pw
    return dist if s is None else float(dist[s + 1:].sum())


def _edge_matrices(G, stubborn=()):
    """Explicit per-edge update matrices (stubborn rows left at identity)."""
    nodes = list(G.nodes())
    idx = {v: k for k, v in enumerate(nodes)}
    n = len(nodes)
    stub = {idx[v] for v in stubborn}
    mats = []
    for u, v in G.edges():
        i, j = idx[u], idx[v]
        A_ = np.eye(n)
        for a_, b_ in ((i, j), (j, i)):
            if a_ not in stub:
                A_[a_, a_] = 0.5
                A_[a_, b_] = 0.5
        mats.append(A_)
    return mats


def _perfect_matchings(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for k in range(len(rest)):
        for m in _perfect_matchings(rest[:k] + rest[k + 1:]):
            yield [(first, rest[k])] + m


def _disagreement(x):
    return float(((x - x.mean()) ** 2).sum())


def _clip(d, tau):
    return d if abs(d) <= tau else math.copysign(tau, d)


# =========================================================================== Study A


@pytest.mark.parametrize("r,a,rho", [(1, 0.9, 0.0), (2, 0.7, 0.05), (3, 0.5, 0.2)])
def test_stage_outage_matches_enumeration(r, a, rho):
    """q = rho + (1-rho)(1-a)^r equals the enumerated probability that a stage is out."""
    dist = _enumerate_pipeline(1, r, a, rho)
    assert A.stage_outage(a, r, rho) == pytest.approx(dist[1], rel=1e-12)


@pytest.mark.parametrize("L,r,a,rho,s", [(3, 2, 0.7, 0.05, 0), (3, 2, 0.6, 0.1, 1),
                                         (2, 3, 0.5, 0.0, 0), (4, 1, 0.8, 0.02, 2)])
def test_drop_probability_matches_enumeration(L, r, a, rho, s):
    """P(Bin(L,q) > s) equals direct enumeration of all worker and domain states."""
    dist = _enumerate_pipeline(L, r, a, rho)
    assert A.drop_probability(L, r, s, a, rho) == pytest.approx(dist[s + 1:].sum(), rel=1e-12)
    q = A.stage_outage(a, r, rho)
    assert A.drop_probability_q(L, q, s) == pytest.approx(dist[s + 1:].sum(), rel=1e-12)


def test_drop_probability_far_tail_is_accurate():
    """The binomial tail is accurate to ~1e-12 relative far below 1e-15 (no 1 - cdf cancellation)."""
    L, s = 48, 4
    q = A.stage_outage(0.9, 4, 0.0)  # 1e-4
    qf = Fraction(q)
    exact = sum(math.comb(L, k) * qf**k * (1 - qf) ** (L - k) for k in range(s + 1, L + 1))
    got = A.drop_probability(L, 4, s, 0.9, 0.0)
    assert float(exact) < 1e-13
    assert got == pytest.approx(float(exact), rel=1e-12)


def test_drop_probability_monte_carlo():
    """Seeded snapshots of workers and domains reproduce the drop law within 4 standard errors."""
    L, r, a, rho, s, N = 10, 2, 0.7, 0.05, 1, 200_000
    rng = _rng("mc-drop")
    dom_down = rng.random((N, L)) < rho
    all_down = (rng.random((N, L, r)) >= a).all(axis=2)
    drops = ((dom_down | all_down).sum(axis=1) > s).astype(float)
    p = A.drop_probability(L, r, s, a, rho)
    se = math.sqrt(p * (1 - p) / N)
    assert abs(drops.mean() - p) < 4 * se
    # a model that forgot the shared domain would fail here
    wrong = A.drop_probability(L, r, s, a, 0.0)
    assert abs(drops.mean() - wrong) > 4 * se


def test_floor_drop_rate_is_the_limit():
    """The floor is 1-(1-rho)^L, the s=0 limit of the drop rate as r grows (4.69% at L=48, rho=1e-3)."""
    assert A.floor_drop_rate(48, 1e-3) == pytest.approx(1 - 0.999**48, rel=1e-13)
    assert round(100 * A.floor_drop_rate(48, 1e-3), 2) == 4.69
    assert A.drop_probability(48, 200, 0, 0.5, 1e-3) == pytest.approx(A.floor_drop_rate(48, 1e-3), rel=1e-12)
    assert A.floor_drop_rate(5, 0.0) == 0.0 and A.floor_drop_rate(5, 1.0) == 1.0


def test_skipped_distribution_matches_enumeration():
    """P(K=k) for k <= s matches enumeration and sums to the delivery probability."""
    L, r, a, rho, s = 3, 2, 0.6, 0.1, 2
    dist = _enumerate_pipeline(L, r, a, rho)
    q = A.stage_outage(a, r, rho)
    got = A.skipped_distribution(L, q, s)
    assert got.shape == (s + 1,)
    np.testing.assert_allclose(got, dist[: s + 1], rtol=1e-12)
    assert got.sum() == pytest.approx(1 - A.drop_probability_q(L, q, s), rel=1e-12)
    assert A.skipped_distribution(2, q, 4)[3:].tolist() == [0.0, 0.0]


def test_quality_mass_laws():
    """E[quality(K); K<=s] matches explicit sums for the multiplicative, additive and callable laws."""
    L, q, s, kappa = 6, 0.2, 3, 0.3
    pk = [math.comb(L, k) * q**k * (1 - q) ** (L - k) for k in range(s + 1)]
    mult = sum(p * (1 - kappa) ** k for k, p in enumerate(pk))
    add = sum(p * max(0.0, 1 - kappa * k) for k, p in enumerate(pk))
    assert A.quality_mass(L, q, s, kappa) == pytest.approx(mult, rel=1e-12)
    assert A.quality_mass(L, q, s, kappa, penalty="additive") == pytest.approx(add, rel=1e-12)
    assert A.quality_mass(L, q, s, kappa, penalty=lambda k: (1 - kappa) ** k) == pytest.approx(mult, rel=1e-12)
    # with no budget limit the multiplicative mass is the generating function (1 - kappa q)^L
    assert A.quality_mass(L, q, L, kappa) == pytest.approx((1 - kappa * q) ** L, rel=1e-12)


def test_mean_quality_delivered():
    """Mean delivered quality is the quality mass over P(K <= s); nan when nothing is delivered."""
    L, q, s, kappa = 8, 0.3, 2, 0.25
    mass = A.quality_mass(L, q, s, kappa)
    assert A.mean_quality_delivered(L, q, s, kappa) == pytest.approx(
        mass / A.skipped_distribution(L, q, s).sum(), rel=1e-12)
    assert math.isnan(A.mean_quality_delivered(3, 1.0, 1, 0.5))


def test_design_cost_formula():
    """cost(r, s) = L r / E[(1-kappa)^K; K <= s]."""
    q = A.stage_outage(0.8, 2, 0.01)
    expected = 10 * 2 / A.quality_mass(10, q, 3, 0.2)
    assert A.design_cost(10, 2, 3, 0.8, 0.01, 0.2) == pytest.approx(expected, rel=1e-12)
    assert A.design_cost(3, 1, 0, 0.0, 0.0, 0.5) == math.inf


@pytest.mark.parametrize("rho,s,target,r,workers", [
    (1e-5, 0, 1e-3, 5, 240),
    (0.0, 0, 1e-3, 5, 240),
    (1e-5, 4, 1e-3, 2, 96),
    (0.0, 4, 1e-3, 2, 96),
    (1e-3, 1, 0.01, 3, 144),
])
def test_min_replicas_study_numbers(rho, s, target, r, workers):
    """Study A: 240 workers (r=5, s=0) fall to 96 (r=2, s=4) at a=0.9; s=1, rho=1e-3 needs r=3."""
    d = A.min_replicas(48, 0.9, rho, s, target)
    assert (d.feasible, d.replicas, d.workers, d.reason) == (True, r, workers, "")
    assert d.drop_rate <= target < A.drop_probability(48, r - 1, s, 0.9, rho)


def test_min_replicas_drop_at_rho_1e3():
    """With s=1, a=0.9, rho=1e-3 the drop rate at r=3 is 0.424%."""
    d = A.min_replicas(48, 0.9, 1e-3, 1, 0.01)
    assert round(100 * d.drop_rate, 3) == 0.424


def test_min_replicas_infeasible_floor():
    """At L=48, rho=1e-3, s=0 no r reaches 1%: infeasible, floor 4.69%, reason names the floor."""
    d = A.min_replicas(48, 0.9, 1e-3, 0, 0.01)
    assert not d.feasible and d.replicas is None and d.workers is None
    assert round(100 * d.floor, 2) == 4.69
    assert d.drop_rate == pytest.approx(A.drop_probability(48, 64, 0, 0.9, 1e-3))
    assert d.reason == ("the shared-domain floor P(Bin(48, 0.001) > 0) = 0.04689 (4.69%) is not below "
                        "target_drop 0.01; no number of replicas reaches it")


def test_min_replicas_infeasible_cap():
    """When the floor is below the target but r is capped, the reason names the cap."""
    d = A.min_replicas(48, 0.5, 0.0, 0, 1e-6, max_replicas=4)
    assert not d.feasible
    assert d.drop_rate == pytest.approx(A.drop_probability(48, 4, 0, 0.5, 0.0))
    assert d.reason.startswith("target_drop 1e-06 needs more than max_replicas=4 replicas")


@pytest.mark.parametrize("kappa,penalty", [(0.05, "multiplicative"), (0.3, "multiplicative"),
                                           (0.1, "additive"), (0.6, "additive")])
def test_optimal_design_matches_grid_search(kappa, penalty):
    """optimal_design finds the minimum of design_cost over the whole (r, s) grid."""
    L, a, rho = 12, 0.8, 1e-3
    grid = {(r, s): A.design_cost(L, r, s, a, rho, kappa, penalty)
            for r in range(1, 7) for s in range(L + 1)}
    best = min(grid.values())
    noskip = min(grid[(r, 0)] for r in range(1, 7))
    d = A.optimal_design(L, a, rho, kappa, penalty, max_replicas=6)
    assert d.cost == pytest.approx(best, rel=1e-9)
    assert grid[(d.replicas, d.skip_budget)] == pytest.approx(best, rel=1e-9)
    assert d.noskip_cost == pytest.approx(noskip, rel=1e-12)
    assert d.gain == pytest.approx(noskip / best, rel=1e-9)


def test_optimal_design_max_skip():
    """max_skip bounds the searched skip budgets."""
    d = A.optimal_design(48, 0.9, 0.0, 0.01, max_skip=3)
    assert d.skip_budget <= 3


def test_study_a_kappa_sweep_reproduces_gains():
    """The documented sweep gives gain ~2.9x at small kappa down to ~1.08x, from skipping to replication."""
    cfg = A.STUDY_A_KAPPA_SWEEP
    sweep = A.kappa_sweep(cfg["stages"], cfg["availability"], cfg["domain_outage"],
                          cfg["skip_penalties"], cfg["penalty"], cfg["max_replicas"])
    gains = [d.gain for _, d in sweep]
    assert round(gains[0], 1) == 2.9 and round(gains[-1], 2) == 1.08
    assert all(g1 > g2 for g1, g2 in zip(gains, gains[1:], strict=False))
    first, last = sweep[0][1], sweep[-1][1]
    assert first.replicas == 1 and first.skip_budget >= 15  # skip-heavy
    assert last.replicas == 2 and last.skip_budget <= 8  # more replication, fewer skips
    assert all(d.noskip_replicas == 3 for _, d in sweep)
    assert [k for k, _ in A.kappa_sweep()] == list(cfg["skip_penalties"])


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 60), r=st.integers(1, 8), s=st.integers(0, 10),
       a=st.floats(0.0, 1.0), rho=st.floats(0.0, 1.0))
def test_drop_probability_properties(L, r, s, a, rho):
    """Probabilities lie in [0, 1]; drop falls with r and s and rises with rho; never below the floor."""
    p = A.drop_probability(L, r, s, a, rho)
    assert 0.0 <= p <= 1.0
    assert A.drop_probability(L, r + 1, s, a, rho) <= p + 1e-15
    assert A.drop_probability(L, r, s + 1, a, rho) <= p + 1e-15
    assert A.drop_probability(L, r, s, a, min(1.0, rho + 0.01)) >= p - 1e-15
    assert p >= A.drop_probability_q(L, rho, s) - 1e-15
    assert 0.0 <= A.quality_mass(L, A.stage_outage(a, r, rho), s, 0.2) <= 1.0


def test_quality_mass_stays_a_probability_at_a_tiny_outage():
    """The binomial pmf's float sum passes 1 by an ulp at L 24, q 8.9e-18 (1 + 2.1e-16, an
    example hypothesis drew); the expected quality is at most 1 there, and equals the
    closed form (1 - kappa q)^L's 1.0 to the ulp."""
    m = A.quality_mass(24, 8.9e-18, 1, 0.2)
    assert 0.0 <= m <= 1.0
    assert m == pytest.approx((1 - 0.2 * 8.9e-18) ** 24, rel=1e-15)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 8), s=st.integers(0, 3), a=st.floats(0.0, 1.0), rho=st.floats(0.0, 0.5),
       reps=st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_exact_placement_properties(L, s, a, rho, reps):
    """Exact placement drop lies in [0, 1] and equals the binomial law with one private domain per stage."""
    r = reps[0]
    rd = [[(f"d{j}",)] * r for j in range(L)]
    p = A.exact_drop_probability(rd, {f"d{j}": rho for j in range(L)}, a, s)
    assert 0.0 <= p <= 1.0
    assert p == pytest.approx(A.drop_probability(L, r, s, a, rho), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("call,message", [
    (lambda: A.stage_outage(1.5, 2), "'availability' must be in [0, 1]: 1.5"),
    (lambda: A.stage_outage(0.9, 0), "'replicas' must be an integer >= 1: 0"),
    (lambda: A.stage_outage(0.9, 2, -0.1), "'domain_outage' must be in [0, 1]: -0.1"),
    (lambda: A.drop_probability(0, 2, 0, 0.9), "'stages' must be an integer >= 1: 0"),
    (lambda: A.drop_probability(4, 2, -1, 0.9), "'skip_budget' must be an integer >= 0: -1"),
    (lambda: A.drop_probability(4, 2, 1.5, 0.9), "'skip_budget' must be an integer >= 0: 1.5"),
    (lambda: A.quality_mass(4, 0.1, 1, 2.0), "'skip_penalty' must be in [0, 1]: 2.0"),
    (lambda: A.quality_mass(4, 0.1, 1, 0.2, penalty="linear"),
     "'penalty' must be one of multiplicative, additive: 'linear'"),
    (lambda: A.quality_mass(4, 0.1, 1, 0.2, penalty=lambda k: 2.0),
     "'penalty' must be a function k -> quality in [0, 1]: '<lambda>(0) = 2.0'"),
    (lambda: A.min_replicas(48, 0.9, 0.0, 0, 0.0), "'target_drop' must be in (0, 1]: 0.0"),
    (lambda: A.min_replicas(48, 0.9, 0.0, 0, 0.1, max_replicas=0),
     "'max_replicas' must be an integer >= 1: 0"),
    (lambda: A.noise_floor(6, -1.0), "'noise' must be >= 0: -1.0"),
    (lambda: A.matching_contraction(5), "'nodes' must be an even integer >= 2: 5"),
    (lambda: A.capture_rate(1), "'nodes' must be an integer >= 2: 1"),
    (lambda: A.creep_bound(5, -0.5), "'tau' must be >= 0: -0.5"),
])
def test_error_messages(call, message):
    """Bad input raises ConfigError with the exact one-line message."""
    with pytest.raises(ConfigError) as ei:
        call()
    assert str(ei.value) == message


# ============================================================== placement, exact


_PACKED = [[("reg0", "rack0"), ("reg0", "rack0")],
           [("reg0", "rack0"), ("reg0", "rack1")],
           [("reg0", "rack1"), ("reg1", "rack2")]]
_PACKED_OUT = {"reg0": 0.1, "reg1": 0.2, "rack0": 0.05, "rack1": 0.1, "rack2": 0.3}


@pytest.mark.parametrize("s", [0, 1, 2])
def test_exact_drop_packed_matches_enumeration(s):
    """Stages sharing racks and a region: the conditional formula equals full enumeration."""
    got = A.exact_drop_probability(_PACKED, _PACKED_OUT, 0.7, s)
    assert got == pytest.approx(_brute_placement(_PACKED, _PACKED_OUT, 0.7, s), rel=1e-12)


def test_exact_drop_private_trees_and_odd_shapes():
    """Private domain trees, a domain at two places in one stage and per-replica availability are exact."""
    rd = [[("r0",), ("r0", "h1"), ("r0", "h1")],  # private tree: r0 > (replica, h1 > 2 replicas)
          [("x", "h2"), ("h2",)],  # h2 sits at two places inside the stage
          [("shared",), ()],  # a replica in no domain
          [("p2", "shared")]]  # shared domain below a private one
    out = {"r0": 0.1, "h1": 0.3, "x": 0.15, "h2": 0.25, "shared": 0.2, "p2": 0.05}
    avail = [[0.6, 0.7, 0.8], [0.5, 0.9], [0.7, 0.4], [0.85]]
    brute = _brute_placement(rd, out, avail)
    np.testing.assert_allclose(A.out_stage_distribution(rd, out, avail), brute, rtol=1e-12, atol=1e-16)
    for s in range(4):
        assert A.exact_drop_probability(rd, out, avail, s) == pytest.approx(brute[s + 1:].sum(), rel=1e-12)


def test_exact_drop_non_adjacent_sharing_matches_enumeration():
    """Domains shared by non-adjacent stages (opened early, closed late in the sweep) are exact."""
    rd = [[("a", "x"), ("b",)], [("c",), ("c", "y")], [("b", "c")], [("a",), ("z",)]]
    out = {"a": 0.2, "b": 0.1, "c": 0.3, "x": 0.25, "y": 0.5, "z": 0.4}
    brute = _brute_placement(rd, out, 0.6)
    np.testing.assert_allclose(A.out_stage_distribution(rd, out, 0.6), brute, rtol=1e-12, atol=1e-16)


_POOL = ["r0", "r1", "k0", "k1"]


@settings(max_examples=40, deadline=None)
@given(stages=st.lists(st.lists(st.lists(st.sampled_from(_POOL), max_size=3), min_size=1, max_size=2),
                       min_size=1, max_size=3),
       us=st.lists(st.sampled_from([0.0, 0.1, 0.35, 1.0]), min_size=4, max_size=4),
       a=st.sampled_from([0.0, 0.4, 0.9, 1.0]))
def test_exact_placement_random_layouts_match_enumeration(stages, us, a):
    """Random small placements (shared, nested, repeated, never- or always-failing domains) are exact."""
    rd = [[tuple(ch) for ch in stage] for stage in stages]
    out = dict(zip(_POOL, us, strict=True))
    np.testing.assert_allclose(A.out_stage_distribution(rd, out, a), _brute_placement(rd, out, a),
                               rtol=1e-10, atol=1e-14)


def test_out_stage_distribution_sums_to_one_and_missing_domains_never_fail():
    """The out-stage distribution sums to 1; a domain absent from domain_outage never fails."""
    dist = A.out_stage_distribution(_PACKED, {"rack0": 0.05}, 0.7)
    assert dist.shape == (4,) and dist.sum() == pytest.approx(1.0, rel=1e-12)
    assert A.exact_drop_probability(_PACKED, {"rack0": 0.05}, 0.7, 1) == pytest.approx(
        _brute_placement(_PACKED, {"rack0": 0.05}, 0.7, 1), rel=1e-12)


def test_packed_differs_from_binomial_law():
    """When stages share racks the exact drop differs from the binomial law with the same marginal q."""
    L, r, u, a = 8, 2, 0.05, 0.8
    rd = [[(f"rack{j // 4}",)] * r for j in range(L)]  # four stages per rack
    exact = A.exact_drop_probability(rd, {"rack0": u, "rack1": u}, a, 1)
    binomial = A.drop_probability(L, r, 1, a, u)
    assert abs(exact - binomial) > 0.1 * binomial
    assert exact == pytest.approx(u * (2 - u) + (1 - u) ** 2 * A.drop_probability(L, r, 1, a, 0.0), rel=1e-9)


def test_exact_drop_large_layered_placement_monte_carlo():
    """A 6-region x 4-rack layout with stages straddling racks (30 shared domains) is exact (4 SE)."""
    regions, racks, L, a, s, N = 6, 4, 24, 0.8, 3, 200_000
    out = {f"g{g}": 0.02 for g in range(regions)}
    out |= {f"g{g}/k{k}": 0.05 for g in range(regions) for k in range(racks)}
    rack_list = [(f"g{g}", f"g{g}/k{k}") for g in range(regions) for k in range(racks)]
    rd = [[rack_list[j], rack_list[(j + 1) % len(rack_list)]] for j in range(L)]
    dist = A.out_stage_distribution(rd, out, a)
    assert dist.sum() == pytest.approx(1.0, rel=1e-12)
    rng = _rng("mc-layered")
    up = {d: rng.random(N) >= u for d, u in out.items()}
    nout = np.zeros(N, dtype=int)
    for stage in rd:
        alive = np.zeros(N, dtype=bool)
        for ch in stage:
            rep = rng.random(N) < a
            for d in ch:
                rep &= up[d]
            alive |= rep
        nout += ~alive
    p = dist[s + 1:].sum()
    assert abs((nout > s).mean() - p) < 4 * math.sqrt(p * (1 - p) / N)


def test_exact_drop_monte_carlo():
    """Seeded snapshots of a shared-rack placement agree with the exact formula within 4 standard errors."""
    rd, out, a, s, N = _PACKED, _PACKED_OUT, 0.7, 1, 200_000
    rng = _rng("mc-placement")
    doms = sorted(out)
    up = {d: rng.random(N) >= out[d] for d in doms}
    nout = np.zeros(N, dtype=int)
    for stage in rd:
        alive = np.zeros(N, dtype=bool)
        for ch in stage:
            rep = rng.random(N) < a
            for d in ch:
                rep &= up[d]
            alive |= rep
        nout += ~alive
    p = A.exact_drop_probability(rd, out, a, s)
    drops = nout > s
    assert abs(drops.mean() - p) < 4 * math.sqrt(p * (1 - p) / N)


def test_placement_errors():
    """Too many joint domain states, malformed placements and bad availabilities give one-line errors."""
    k = A.MAX_ENUMERATED_DOMAINS + 1  # every stage has a replica in every domain
    rd = [[(f"d{i}",) for i in range(k)] for _ in range(3)]
    with pytest.raises(ConfigError) as ei:
        A.exact_drop_probability(rd, {f"d{i}": 0.1 for i in range(k)}, 0.9, 0)
    assert str(ei.value) == ("'replica_domains' must be a placement whose stages, taken in order, depend "
                             "on at most 18 shared failure domains at once (exact enumeration is 2^k): 19")
    with pytest.raises(ConfigError) as ei:
        A.exact_drop_probability([[("a",)], []], {"a": 0.1}, 0.9, 0)
    assert str(ei.value) == ("'replica_domains' must be a non-empty list of stages, each a non-empty "
                             "list of replica domain chains: []")
    with pytest.raises(ConfigError) as ei:
        A.exact_drop_probability([[("a",)]], {"a": 1.2}, 0.9, 0)
    assert str(ei.value) == "'domain_outage' must be in [0, 1]: 1.2"
    with pytest.raises(ConfigError) as ei:
        A.exact_drop_probability([[("a",), ("b",)]], {"a": 0.1}, [[0.9]], 0)
    assert str(ei.value) == ("'availability' must be a probability, or a list of lists of probabilities "
                             "shaped like replica_domains: [0.9]")


# =========================================================================== Study B


@pytest.mark.parametrize("n", [4, 6, 8])
def test_matching_contraction_by_enumeration(n):
    """Averaging over every perfect matching contracts D by exactly (n-2)/(2(n-1))."""
    x = _rng("match", n).normal(size=n)
    ds = []
    for m in _perfect_matchings(list(range(n))):
        y = x.copy()
        for i, j in m:
            y[i] = y[j] = (x[i] + x[j]) / 2
        ds.append(_disagreement(y))
    assert np.mean(ds) == pytest.approx(A.matching_contraction(n) * _disagreement(x), rel=1e-12)


def test_rounds_to_reduce():
    """The smallest t with c^t <= factor; about 20 rounds to 1e-6 at any large n."""
    for n in (4, 10, 1000, 10**6):
        c, t = A.matching_contraction(n), A.rounds_to_reduce(n)
        assert c**t <= 1e-6 < c ** (t - 1)
    assert A.rounds_to_reduce(10**6) == 20
    assert A.rounds_to_reduce(2) == 1


def test_noise_floor_monte_carlo():
    """Noise then matching: stationary E[D] after averaging is (n-1)(n-2)s^2/n, before 2(n-1)^2 s^2/n."""
    n, s, R, burn = 6, 1.5, 10_000, 40
    rng = _rng("noise-floor")
    x = np.zeros((R, n))
    rows = np.arange(R)[:, None]
    for _ in range(burn):
        x += rng.normal(0, s, size=x.shape)
        before = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        perm = np.argsort(rng.random((R, n)), axis=1)
        a_, b_ = perm[:, 0::2], perm[:, 1::2]
        avg = (x[rows, a_] + x[rows, b_]) / 2
        x[rows, a_] = avg
        x[rows, b_] = avg
    after = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    for sample, expect in ((after, A.noise_floor(n, s)), (before, A.noise_floor_before_averaging(n, s))):
        se = sample.std(ddof=1) / math.sqrt(R)
        assert abs(sample.mean() - expect) < 4 * se
    # the "measured right after the noise" reading would fail for the after-averaging sample
    se = after.std(ddof=1) / math.sqrt(R)
    assert abs(after.mean() - A.noise_floor_before_averaging(n, s)) > 4 * se


@pytest.mark.parametrize("n", [3, 5, 8])
def test_capture_rate_by_enumeration(n):
    """Over every pair, one stubborn node moves E[m - b] by exactly the factor 1 - 1/(n(n-1))."""
    rng = _rng("capture", n)
    x = rng.normal(size=n)
    b = 3.0
    x[0] = b  # node 0 is stubborn
    means = []
    for i, j in itertools.combinations(range(n), 2):
        y = x.copy()
        for p, q in ((i, j), (j, i)):
            if p != 0:
                y[p] = (x[p] + x[q]) / 2
        means.append(y[1:].mean())
    assert np.mean(means) - b == pytest.approx(A.capture_rate(n) * (x[1:].mean() - b), rel=1e-12)


@pytest.mark.parametrize("n", [4, 6])
def test_matching_capture_rate_by_enumeration(n):
    """Over every perfect matching, E[m - b] shrinks by 1 - 1/(2(n-1)) per round."""
    x = _rng("mcapture", n).normal(size=n)
    b = -2.0
    x[0] = b
    means = []
    for m in _perfect_matchings(list(range(n))):
        y = x.copy()
        for i, j in m:
            for p, q in ((i, j), (j, i)):
                if p != 0:
                    y[p] = (x[p] + x[q]) / 2
        means.append(y[1:].mean())
    assert np.mean(means) - b == pytest.approx(A.matching_capture_rate(n) * (x[1:].mean() - b), rel=1e-12)


@pytest.mark.parametrize("far", [True, False])
def test_creep_bounds_by_enumeration(far):
    """With clip(diff, tau)/2 the honest mean creeps tau/(n(n-1)) per pair step, tau/(2(n-1)) per matching, at most."""
    n, tau, b = 6, 0.4, 10.0
    rng = _rng("creep")
    x = rng.normal(size=n) if far else b - rng.uniform(0.05, 0.3, size=n)  # near: all within tau
    x[0] = b

    def step(pairs):
        y = x.copy()
        for i, j in pairs:
            for p, q in ((i, j), (j, i)):
                if p != 0:
                    y[p] = x[p] + _clip(x[q] - x[p], tau) / 2
        return y[1:].mean() - x[1:].mean()

    pair = np.mean([step([e]) for e in itertools.combinations(range(n), 2)])
    match = np.mean([step(m) for m in _perfect_matchings(list(range(n)))])
    if far:
        assert pair == pytest.approx(A.creep_bound(n, tau), rel=1e-12)
        assert match == pytest.approx(A.matching_creep(n, tau), rel=1e-12)
    else:
        assert 0 < pair < A.creep_bound(n, tau) and 0 < match < A.matching_creep(n, tau)


def test_complete_graph_honest_mean():
    """The closed form on the complete graph equals the first-moment recursion (edge) and matching law."""
    n, b, m0 = 7, 2.0, -1.0
    G = nx.complete_graph(n)
    closed = A.complete_graph_honest_mean(n, b, m0, 50)
    rec = A.stubborn_honest_mean(G, {0: b}, m0, 50)
    np.testing.assert_allclose(closed, rec, rtol=1e-12)
    mt = A.complete_graph_honest_mean(8, b, m0, 3, protocol="matching")
    np.testing.assert_allclose(mt - b, (m0 - b) * A.matching_capture_rate(8) ** np.arange(4), rtol=1e-12)
    vec = A.complete_graph_honest_mean(n, np.array([1.0, 2.0]), np.zeros(2), 4)
    assert vec.shape == (5, 2)


# ============================================================== gossip on any graph


_GRAPHS = {
    "ring": lambda: nx.cycle_graph(7),
    "path": lambda: nx.path_graph(6),
    "star": lambda: nx.star_graph(5),
    "torus": lambda: nx.grid_2d_graph(3, 3, periodic=True),
    "er": lambda: nx.gnp_random_graph(8, 0.5, seed=3),
    "multigraph": lambda: nx.MultiGraph([(0, 1), (0, 1), (1, 2), (2, 0), (2, 3)]),
}


@pytest.mark.parametrize("name", list(_GRAPHS))
def test_edge_gossip_disagreement_matches_explicit_matrices(name):
    """The second-moment recursion equals the average of explicit W_e Sigma W_e products."""
    G = _GRAPHS[name]()
    n = G.number_of_nodes()
    Z = _rng("sigma0", n).normal(size=(n, n))
    sigma0 = Z @ Z.T + np.outer(np.arange(n), np.arange(n))
    mats = _edge_matrices(G)
    S, want = sigma0.copy(), []
    P = np.eye(n) - 1.0 / n
    for t in range(13):
        if t % 3 == 0 or t == 12:
            want.append(np.trace(P @ S))
        S = sum(W @ S @ W for W in mats) / len(mats)
    got = A.edge_gossip_disagreement(G, 12, sigma0=sigma0, record_every=3)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert A.edge_gossip_disagreement(G, 0)[0] == pytest.approx(n - 1)


def test_edge_gossip_disagreement_monte_carlo():
    """Seeded random-edge gossip on a torus and a ring agrees with the exact E[D(t)] within 4 SE."""
    for G in (nx.grid_2d_graph(4, 4, periodic=True), nx.cycle_graph(10)):
        nodes = list(G.nodes())
        idx = {v: k for k, v in enumerate(nodes)}
        E = np.array([(idx[u], idx[v]) for u, v in G.edges()])
        n, R, T = len(nodes), 20_000, 60
        rng = _rng("mc-edge", n)
        x = rng.normal(size=(R, n))
        rows = np.arange(R)
        for _ in range(T):
            e = E[rng.integers(len(E), size=R)]
            avg = (x[rows, e[:, 0]] + x[rows, e[:, 1]]) / 2
            x[rows, e[:, 0]] = avg
            x[rows, e[:, 1]] = avg
        D = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        exact = A.edge_gossip_disagreement(G, T)[-1]
        se = D.std(ddof=1) / math.sqrt(R)
        assert abs(D.mean() - exact) < 4 * se
        # the spectral bound lambda_2(E[W])^t (n-1) is far off at this point
        assert (1 - A.spectral_gap(G)) ** T * (n - 1) - exact > 4 * se


def test_expected_averaging_matrix_and_spectra():
    """E[W] = mean of W_e; the Fiedler value matches networkx; the gap is lambda_2(L)/(2m)."""
    G = nx.gnp_random_graph(9, 0.4, seed=5)
    mats = _edge_matrices(G)
    EW = A.expected_averaging_matrix(G)
    np.testing.assert_allclose(EW.toarray(), sum(mats) / len(mats), atol=1e-14)
    lam = nx.algebraic_connectivity(G, method="tracemin_lu", tol=1e-12, seed=0)
    assert A.fiedler_value(G) == pytest.approx(lam, rel=1e-8)
    assert A.spectral_gap(G) == pytest.approx(1 - np.sort(np.linalg.eigvalsh(EW.toarray()))[-2], rel=1e-10)
    big = nx.cycle_graph(2500)
    assert A.fiedler_value(big) == pytest.approx(2 * (1 - math.cos(2 * math.pi / 2500)), rel=1e-6)


@pytest.mark.parametrize("G", [nx.cycle_graph(5), nx.star_graph(3), nx.path_graph(4)])
def test_edge_gossip_rate_matches_explicit_operator(G):
    """The rate is the top eigenvalue of mean_e W_e (x) W_e on the disagreement subspace (explicit n^2 matrix)."""
    n = G.number_of_nodes()
    mats = _edge_matrices(G)
    M = sum(np.kron(W, W) for W in mats) / len(mats)
    P = np.eye(n) - 1.0 / n
    PP = np.kron(P, P)
    top = np.linalg.eigvals(PP @ M @ PP).real.max()
    assert A.edge_gossip_rate(G) == pytest.approx(top, rel=1e-10)


@pytest.mark.parametrize("G", [
    nx.cycle_graph(30),
    # slow: the same checks on the ring of 30 stay in the default suite
    pytest.param(nx.random_regular_graph(3, 24, seed=2), marks=pytest.mark.slow),
    pytest.param(nx.grid_2d_graph(5, 5, periodic=True), marks=pytest.mark.slow),
], ids=["ring30", "random-regular24", "torus5x5"])
def test_edge_gossip_rate_lanczos_and_bounds(G):
    """On larger graphs the Lanczos rate matches the recursion's decay and lies in [lambda_2^2, lambda_2]."""
    rho = A.edge_gossip_rate(G)
    d = A.edge_gossip_disagreement(G, 6000, record_every=3000)
    assert (d[2] / d[1]) ** (1 / 3000) == pytest.approx(rho, rel=1e-9)
    lam2 = 1 - A.spectral_gap(G)
    assert lam2**2 - 1e-12 <= rho <= lam2 + 1e-12
    # sparse graphs: about twice as fast in the exponent as the bound
    assert 1.7 < math.log(rho) / math.log(lam2) <= 2.0 + 1e-9
    assert A.edge_gossip_rate(G, method="bound") == pytest.approx(lam2)


def test_edge_gossip_rate_complete_graph():
    """On the complete graph the exact rate is the bound, 1 - 1/(n-1)."""
    K = nx.complete_graph(12)
    assert A.edge_gossip_rate(K) == pytest.approx(1 - 1 / 11, rel=1e-10)


def test_edge_gossip_size_limit():
    """Beyond MAX_EXACT_NODES the exact recursion refuses (memory) and points to the spectral rate."""
    G = nx.path_graph(A.MAX_EXACT_NODES + 1)
    with pytest.raises(ConfigError) as ei:
        A.edge_gossip_disagreement(G, 1)
    assert str(ei.value) == (
        "'nodes' must be at most 10000 for the exact second-moment recursion (O(n^2) memory; "
        "use edge_gossip_rate() or spectral_gap() instead): 10001")
    lam2 = 1 - A.spectral_gap(G)
    assert A.edge_gossip_rate(G) == pytest.approx(lam2)


def test_graph_errors():
    """Directed graphs, self-loops and edgeless graphs are refused with one line."""
    cases = [
        (lambda: A.edge_gossip_disagreement(nx.DiGraph([(0, 1)]), 3), "'graph' must be an undirected graph: 'DiGraph'"),
        (lambda: A.spectral_gap(nx.Graph([(0, 1), (1, 1)])), "'graph' must be a graph without self-loops: 1"),
        (lambda: A.fiedler_value(nx.empty_graph(3)), "'graph' must be a graph with at least one edge: 0"),
        (lambda: A.edge_gossip_rate(nx.path_graph(3), method="fast"), "'method' must be one of auto, exact, bound: 'fast'"),
        (lambda: A.edge_gossip_disagreement(nx.path_graph(3), -1), "'steps' must be an integer >= 0: -1"),
    ]
    for call, message in cases:
        with pytest.raises(ConfigError) as ei:
            call()
        assert str(ei.value) == message


@pytest.mark.parametrize("name", ["ring", "star", "torus", "er"])
def test_stubborn_expectation_matches_explicit_matrices(name):
    """The first-moment recursion equals products of the explicit averaged update matrices."""
    G = _GRAPHS[name]()
    nodes = list(G.nodes())
    stub = {nodes[0]: 2.0, nodes[-1]: -1.0}
    mats = _edge_matrices(G, stub)
    EA = sum(mats) / len(mats)
    x = _rng("x0", len(nodes)).normal(size=len(nodes))
    for v, b in stub.items():
        x[nodes.index(v)] = b
    honest = [k for k, v in enumerate(nodes) if v not in stub]
    want = []
    for t in range(11):
        if t % 5 == 0 or t == 10:
            want.append(x[honest])
        x = EA @ x
    x0 = {v: x0v for v, x0v in zip(nodes, _rng("x0", len(nodes)).normal(size=len(nodes)), strict=True)}
    got = A.stubborn_honest_expectation(G, stub, 10, x0=x0, record_every=5)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(A.stubborn_honest_mean(G, stub, x0, 10, record_every=5),
                               np.array(want).mean(axis=1), rtol=1e-12, atol=1e-14)
    # the list form (stubborn values read from x0) gives the same
    x0_all = dict(x0) | stub
    np.testing.assert_allclose(A.stubborn_honest_mean(G, list(stub), x0_all, 10, record_every=5),
                               np.array(want).mean(axis=1), rtol=1e-12, atol=1e-14)


def test_stubborn_vector_values():
    """Vector stubborn values: each coordinate follows the scalar recursion."""
    G = nx.cycle_graph(6)
    b = np.array([1.0, -3.0])
    vec = A.stubborn_honest_mean(G, {0: b}, None, 20)
    assert vec.shape == (21, 2)
    for c in range(2):
        np.testing.assert_allclose(vec[:, c], A.stubborn_honest_mean(G, {0: b[c]}, None, 20), rtol=1e-12)
    h = A.harmonic_extension(G, {0: b, 3: -b})
    assert h.shape == (4, 2)
    start = A.stubborn_honest_mean(G, {0: b}, np.array([0.5, -0.5]), 3)
    np.testing.assert_allclose(start[0], [0.5, -0.5])
    np.testing.assert_allclose(start[:, 1], A.stubborn_honest_mean(G, {0: -3.0}, -0.5, 3), rtol=1e-12)


def test_stubborn_honest_mean_monte_carlo():
    """Seeded random-edge gossip with two stubborn nodes follows the exact honest mean within 4 SE."""
    G = nx.random_regular_graph(3, 12, seed=4)
    nodes = list(G.nodes())
    stub = {nodes[0]: 5.0, nodes[1]: -1.0}
    idx = {v: k for k, v in enumerate(nodes)}
    E = np.array([(idx[u], idx[v]) for u, v in G.edges()])
    honest = np.array([v not in stub for v in nodes])
    R, T = 20_000, 40
    rng = _rng("mc-stub")
    x = np.zeros((R, len(nodes)))
    for v, b in stub.items():
        x[:, idx[v]] = b
    rows = np.arange(R)
    for _ in range(T):
        e = E[rng.integers(len(E), size=R)]
        xi, xj = x[rows, e[:, 0]].copy(), x[rows, e[:, 1]].copy()
        avg = (xi + xj) / 2
        x[rows, e[:, 0]] = np.where(honest[e[:, 0]], avg, xi)
        x[rows, e[:, 1]] = np.where(honest[e[:, 1]], avg, xj)
    m = x[:, honest].mean(axis=1)
    exact = A.stubborn_honest_mean(G, stub, 0.0, T)[-1]
    assert abs(m.mean() - exact) < 4 * m.std(ddof=1) / math.sqrt(R)
    assert abs(exact) > 0.1  # a model without the stubborn pull (mean 0) would fail


def test_harmonic_extension():
    """The harmonic extension is the limit of the recursion and averages each honest node's neighbours."""
    G = nx.grid_2d_graph(4, 4)
    stub = {(0, 0): 1.0, (3, 3): -2.0}
    h = A.harmonic_extension(G, stub)
    honest = A.honest_nodes(G, stub)
    val = dict(zip(honest, h, strict=True)) | stub
    for v in honest:
        assert val[v] == pytest.approx(np.mean([val[u] for u in G[v]]), rel=1e-10)
    limit = A.stubborn_honest_expectation(G, stub, 40_000, record_every=40_000)[-1]
    np.testing.assert_allclose(limit, h, rtol=1e-8)
    with pytest.raises(ConfigError) as ei:
        A.harmonic_extension(nx.Graph([(0, 1), (2, 3)]), {0: 1.0})
    assert str(ei.value) == "'stubborn' must be a set with a node in every connected component: ['2', '3']"


def test_edge_gossip_honest_disagreement_matches_explicit_matrices():
    """Honest disagreement with stubborn rows fixed equals explicit A_e Sigma A_e^T averages."""
    G = nx.gnp_random_graph(7, 0.5, seed=8)
    nodes = list(G.nodes())
    stub = {nodes[1]: 1.0, nodes[4]: -0.5}
    mats = _edge_matrices(G, stub)
    n = len(nodes)
    honest = [k for k, v in enumerate(nodes) if v not in stub]
    x0 = np.array([0.3 * k for k in range(n)])
    for v, b in stub.items():
        x0[nodes.index(v)] = b
    S = np.outer(x0, x0)
    S[honest, honest] += 0.5
    h = len(honest)
    C = np.zeros((n, n))
    C[np.ix_(honest, honest)] = np.eye(h) - 1.0 / h
    want = []
    for t in range(9):
        if t % 4 == 0 or t == 8:
            want.append(np.trace(C @ S))
        S = sum(M @ S @ M.T for M in mats) / len(mats)
    x0_honest = x0[honest]
    got = A.edge_gossip_honest_disagreement(G, stub, 8, x0=x0_honest, honest_variance=0.5, record_every=4)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_edge_gossip_honest_disagreement_monte_carlo():
    """With two disagreeing stubborn nodes the honest disagreement settles at the exact positive level (4 SE)."""
    G = nx.cycle_graph(8)
    stub = {0: 1.0, 4: -1.0}
    honest = np.array([v not in stub for v in G.nodes()])
    E = np.array(list(G.edges()))
    R, T = 20_000, 200
    rng = _rng("mc-stub-d")
    x = rng.normal(size=(R, 8))
    x[:, 0], x[:, 4] = 1.0, -1.0
    rows = np.arange(R)
    for _ in range(T):
        e = E[rng.integers(len(E), size=R)]
        xi, xj = x[rows, e[:, 0]].copy(), x[rows, e[:, 1]].copy()
        avg = (xi + xj) / 2
        x[rows, e[:, 0]] = np.where(honest[e[:, 0]], avg, xi)
        x[rows, e[:, 1]] = np.where(honest[e[:, 1]], avg, xj)
    xh = x[:, honest]
    D = ((xh - xh.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    exact = A.edge_gossip_honest_disagreement(G, stub, T)[-1]
    assert abs(D.mean() - exact) < 4 * D.std(ddof=1) / math.sqrt(R)
    assert exact > 0.5  # opinions never settle


@pytest.mark.slow
@pytest.mark.parametrize("G,lam2", [
    (nx.cycle_graph(100_000), 2 * (1 - math.cos(2 * math.pi / 100_000))),
    (nx.grid_2d_graph(300, 300, periodic=True), 2 * (1 - math.cos(2 * math.pi / 300))),
])
def test_spectral_rate_at_scale(G, lam2):
    """At 10^5 nodes the Fiedler value (shift-invert) is exact to 1e-6 and the rate falls back to the bound."""
    assert A.fiedler_value(G) == pytest.approx(lam2, rel=1e-6)
    assert A.edge_gossip_rate(G) == pytest.approx(1 - lam2 / (2 * G.number_of_edges()), rel=1e-12)


@pytest.mark.slow
def test_fiedler_value_expander_at_scale():
    """A random 4-regular graph of 10^5 nodes (Lanczos path) has lambda_2 near 4 - 2 sqrt(3)."""
    G = nx.random_regular_graph(4, 100_000, seed=1)
    lam = A.fiedler_value(G)
    assert 0.5 < lam < 4 - 2 * math.sqrt(3) + 1e-3


def test_fiedler_value_kept_beside_networkx():
    """Why fiedler_value is not networkx.algebraic_connectivity: the same value, but tighter on rings.

    Both agree to 1e-8 (networkx is the cross-check), yet on a ring of 2500 nodes
    networkx's default (tracemin_pcg, tol 1e-8) is 50x further from the closed form
    2 (1 - cos(2 pi / n)) than the dense eigvalsh used here, and switching would move
    the printed spectral bounds of experiments/sparse_graphs.py in their last digits.
    """
    G = nx.cycle_graph(2500)
    exact = 2 * (1 - math.cos(2 * math.pi / 2500))
    ours = A.fiedler_value(G)
    theirs = nx.algebraic_connectivity(G, seed=0)
    assert ours == pytest.approx(theirs, rel=1e-8)
    assert abs(ours - exact) / exact < 1e-10
    assert abs(theirs - exact) > 50 * abs(ours - exact)
