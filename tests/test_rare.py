"""Importance sampling and stratified estimates of rare drop probabilities against the exact tails."""

from __future__ import annotations

import numpy as np
import pytest

import sim.pipeline.rare as rare
import topologies
from sim import analytic
from sim.errors import ConfigError
from sim.pipeline import PipelineConfig
from sim.pipeline.rare import (
    exponential_tilt,
    importance_drop_probability,
    importance_from_config,
    poisson_binomial_tail,
    stratified_placement_probability,
)
from sim.rng import Streams
from topologies.placement import Placement, place


def rng(seed: int) -> np.random.Generator:
    return Streams(seed).rng("test")


def within(res, exact: float) -> bool:
    """Exact value within 4 SE of a stratified estimate, its upper end widened by the unvisited mass."""
    return res.estimate - 4 * res.se - 1e-9 * exact <= exact <= res.high + 2 * res.se


def packed(racks: int, per_rack: int, r: int, rho: float):
    """Several stages per rack: every replica of stage j in rack j // per_rack."""
    rd = [[(f"rack{j // per_rack}",)] * r for j in range(racks * per_rack)]
    return rd, {f"rack{i}": rho for i in range(racks)}


# (L, r, s, a, rho): exact tails from about 1e-3 down to about 1e-12
POINTS = [
    (48, 2, 3, 0.9, 0.0),      # 1.4e-3
    (48, 7, 0, 0.9, 0.0),      # 4.8e-6
    (48, 3, 3, 0.9, 1e-6),     # 1.9e-7 (with domains)
    (48, 3, 4, 0.9, 0.0),      # 1.7e-9
    (48, 6, 1, 0.9, 1e-6),     # 4.5e-9 (with domains)
    (48, 5, 2, 0.9, 0.0),      # 1.7e-11
    (48, 4, 3, 0.9, 1e-6),     # 2.0e-11 (with domains)
]


@pytest.mark.parametrize("L,r,s,a,rho", POINTS)
def test_uniform_matches_exact_tail(L, r, s, a, rho):
    """The tilted estimate agrees with P(Bin(L, q) > s) within 4 SE, with a 2% relative error."""
    exact = analytic.drop_probability(L, r, s, a, rho)
    res = importance_drop_probability(L, r, s, a, rho, rng=rng(1), target_rel_error=0.02)
    assert res.rel_error <= 0.02
    assert abs(res.estimate - exact) <= 4 * res.se, (res, exact)
    assert res.samples < 100_000 and res.ess > 500


def test_ten_percent_at_1e9_is_fast():
    """10% relative error at p about 1e-9 takes a few thousand draws and well under 2 s."""
    res = importance_drop_probability(48, 3, 4, 0.9, rng=rng(2), target_rel_error=0.1)
    assert res.rel_error <= 0.1 and res.samples <= 5000 and res.seconds < 2.0
    assert res.naive_samples > 1e10


def test_interval_covers_exact_value_most_of_the_time():
    """Over 40 seeds the 95% interval covers the exact 1e-9 tail at least 33 times."""
    exact = analytic.drop_probability(48, 3, 4, 0.9, 0.0)
    hits = sum(importance_drop_probability(48, 3, 4, 0.9, rng=rng(100 + i), samples=2000)
               .contains(exact) for i in range(40))
    assert hits >= 33


def test_wrong_likelihood_ratio_is_detected(monkeypatch):
    """Draws weighted by a wrong likelihood ratio (tilt or stratum probability) fall outside 4 SE."""
    exact = analytic.drop_probability(48, 3, 4, 0.9, 0.0)
    good = rare._tilted
    with monkeypatch.context() as mp:
        mp.setattr(rare, "_tilted", lambda p, theta: np.minimum(good(p, theta) * 1.5, 1.0))
        res = importance_drop_probability(48, 3, 4, 0.9, rng=rng(3), target_rel_error=0.02)
    assert abs(res.estimate - exact) > 4 * res.se
    # stratified: sampled strata weighted by 1.5 times their probability; 1 and 2 racks out
    # (sampled with enumerate_limit=1) carry nearly all of the 1.2e-4
    rd, do = packed(12, 4, 4, 1e-3)
    exact = analytic.exact_drop_probability(rd, do, 0.9, 4)
    right = stratified_placement_probability(rd, do, 0.9, 4, rng=rng(3), target_rel_error=0.02,
                                             enumerate_limit=1)
    assert within(right, exact), (right, exact)

    class Wrong(rare._Stratum):
        def __init__(self, m: int, mass: float) -> None:
            super().__init__(m, 1.5 * mass)

    monkeypatch.setattr(rare, "_Stratum", Wrong)
    res = stratified_placement_probability(rd, do, 0.9, 4, rng=rng(3), target_rel_error=0.02,
                                           enumerate_limit=1)
    assert not within(res, exact) and res.estimate > 1.1 * exact, (res, exact)


def test_heterogeneous_replicas_match_exact():
    """Different replicas per stage (one tilt, several binomial groups) agree with the exact law."""
    reps = [3, 4] * 24
    rd = [[(f"d{j}",)] * r for j, r in enumerate(reps)]
    do = {f"d{j}": 1e-7 for j in range(48)}
    exact = analytic.exact_drop_probability(rd, do, 0.9, 3)
    res = importance_drop_probability(48, reps, 3, 0.9, 1e-7, rng=rng(4), target_rel_error=0.02)
    assert abs(res.estimate - exact) <= 4 * res.se, (res, exact)


@pytest.mark.parametrize("limit", [20_000, 1])
@pytest.mark.parametrize("racks,per_rack,r,a,rho,s", [
    (12, 4, 3, 0.9, 1e-3, 4),     # 5.8e-4
    (12, 4, 4, 0.9, 1e-5, 4),     # 5.3e-7
    (12, 4, 3, 0.9, 1e-5, 6),     # 8.1e-9
    (12, 4, 4, 0.9, 1e-6, 5),     # 1.8e-10
    (12, 4, 3, 0.9, 1e-7, 7),     # 8.2e-13
])
def test_shared_domains_match_exact(limit, racks, per_rack, r, a, rho, s):
    """Stages sharing racks, strata summed or sampled: the exact conditional law, not the binomial."""
    rd, do = packed(racks, per_rack, r, rho)
    exact = analytic.exact_drop_probability(rd, do, a, s)
    res = stratified_placement_probability(rd, do, a, s, rng=rng(5), target_rel_error=0.02,
                                           enumerate_limit=limit)
    assert res.rel_error <= 0.02
    assert within(res, exact), (res, exact)
    binom = analytic.drop_probability(racks * per_rack, r, s, a, rho)
    if abs(binom - exact) > 0.2 * exact:
        assert abs(res.estimate - binom) > 4 * res.se + 0.1 * exact


@pytest.mark.parametrize("limit", [20_000, 1])
def test_hierarchical_placement_matches_exact(limit):
    """Region > rack chains with replicas spread over regions agree with the exact law."""
    rd = [[("r0", f"r0/k{j % 4}"), ("r1", f"r1/k{j % 4}")] for j in range(16)]
    do = {"r0": 1e-4, "r1": 1e-4, **{f"r{g}/k{i}": 1e-3 for g in range(2) for i in range(4)}}
    exact = analytic.exact_drop_probability(rd, do, 0.9, 2)
    res = stratified_placement_probability(rd, do, 0.9, 2, rng=rng(6), target_rel_error=0.02,
                                           enumerate_limit=limit)
    assert within(res, exact), (res, exact)
    assert res.contains(exact)


def test_two_racks_out_at_once_regression():
    """Packed 2x8x9 datacenter, a=0.97, s=4: the interval contains the exact 3.19e-4 (a tilt said 2.14e-4)."""
    pl = place(topologies.datacenter(2, 8, 9), 48, 3, "packed")
    exact = analytic.exact_drop_probability(pl.replica_domains, pl.domain_outage, 0.97, 4)
    assert exact == pytest.approx(3.19e-4, rel=2e-3)
    cfg = PipelineConfig(stages=48, placement=Placement(pl.replica_domains, pl.domain_outage),
                         skip_budget=4, availability=0.97)
    res = importance_from_config(cfg, rng=rng(11), target_rel_error=0.03)
    assert res.contains(exact), (res, exact)
    assert abs(res.estimate - 2.14e-4) > 0.3 * exact
    sampled = stratified_placement_probability(pl.replica_domains, pl.domain_outage, 0.97, 4,
                                               rng=rng(12), target_rel_error=0.03,
                                               enumerate_limit=1)
    assert sampled.samples > 0 and sampled.contains(exact), (sampled, exact)
    assert "importance_placement_probability" not in rare.__all__
    assert not hasattr(rare, "importance_placement_probability")


def test_poisson_binomial_tail_is_exact():
    """Row-wise tails equal the binomial sf for equal q and stay accurate at 1e-15."""
    from scipy import stats
    q = np.array([[0.1] * 10, [1e-4] * 10])
    tail = poisson_binomial_tail(q, 2)
    assert np.allclose(tail, stats.binom.sf(2, 10, [0.1, 1e-4]), rtol=1e-10)


def test_tilt_puts_mean_at_budget_plus_one():
    """The exponential tilt makes the tilted mean number of out stages s + 1."""
    q = np.full(48, 1e-3)
    theta = exponential_tilt(q, 5.0)
    assert np.isclose(rare._tilted(q, theta).sum(), 5.0)
    assert exponential_tilt(q, 0.01) == 0.0


def test_impossible_drop_is_zero():
    """With perfect workers and no domain outages the estimate is exactly 0."""
    res = importance_drop_probability(10, 2, 1, 1.0, 0.0, rng=rng(7), samples=100)
    assert res.estimate == 0.0 and res.high == 0.0


def test_from_config_uses_the_placement():
    """importance_from_config handles the study's placement and shared domains."""
    cfg = PipelineConfig(stages=48, replicas=3, skip_budget=4, availability=0.9)
    res = importance_from_config(cfg, rng=rng(8), target_rel_error=0.05)
    assert res.contains(analytic.drop_probability(48, 3, 4, 0.9)) or \
        abs(res.estimate - analytic.drop_probability(48, 3, 4, 0.9)) <= 4 * res.se
    rd, do = packed(12, 4, 3, 1e-3)
    cfg = PipelineConfig(stages=48, placement=Placement(rd, do), skip_budget=4)
    res = importance_from_config(cfg, rng=rng(9), target_rel_error=0.05)
    exact = analytic.exact_drop_probability(rd, do, 0.9, 4)
    assert within(res, exact), (res, exact)
    assert res.tilt == 0.0 and res.enumerated > 0  # the stratified estimator


def test_bad_input_messages():
    """Bad input raises ConfigError with the house template."""
    with pytest.raises(ConfigError, match=r"^'target_rel_error' must be > 0: 0$"):
        importance_drop_probability(4, 1, 0, 0.9, rng=rng(0), target_rel_error=0)
    with pytest.raises(ConfigError, match=r"^'samples' must be an integer >= 2: 1$"):
        importance_drop_probability(4, 1, 0, 0.9, rng=rng(0), samples=1)
    rd, do = packed(2, 2, 2, 0.1)
    with pytest.raises(ConfigError, match=r"^'enumerate_limit' must be an integer >= 1: 0$"):
        stratified_placement_probability(rd, do, 0.9, 1, rng=rng(0), enumerate_limit=0)
    with pytest.raises(ConfigError, match=r"^'skip_budget' must be an integer in \[0, 4\]: 5$"):
        stratified_placement_probability(rd, do, 0.9, 5, rng=rng(0))


def test_tight_upper_end_is_rounding_not_lost_mass():
    """Racks of 4 stages, s=4: the strata left unvisited drop surely, so the upper end is exact up to rounding."""
    rd, do = packed(12, 4, 4, 1e-5)
    exact = analytic.exact_drop_probability(rd, do, 0.9, 4)
    res = stratified_placement_probability(rd, do, 0.9, 4, rng=rng(5), target_rel_error=0.02,
                                           enumerate_limit=1)
    # truncation: three racks out (mass C(12,3) 1e-15) is not visited; it is 4e-7 of the value
    lost = exact - res.estimate
    assert 0.9 * 220 * 1e-15 < lost < 1.1 * 220 * 1e-15
    # every unvisited configuration drops, so estimate + unvisited mass is the exact value
    assert res.high - res.estimate == pytest.approx(lost, rel=1e-6)
    assert res.contains(exact)
    # visiting every stratum leaves only rounding
    full = stratified_placement_probability(rd, do, 0.9, 4, rng=rng(5), target_rel_error=0.02,
                                            enumerate_limit=1, tail_tolerance=1e-15)
    assert full.estimate == pytest.approx(exact, rel=1e-12)
    assert full.contains(exact)
