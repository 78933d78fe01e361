"""Cutting a chain of layers across unequal devices (sim.analytic.partition) against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sim import analytic
from sim.errors import ConfigError


def _costs(work, speeds, times):
    if times is not None:
        return [np.atleast_2d(np.asarray(t, dtype=float)) for t in times]
    return [(np.asarray(work, dtype=float) / s)[None, :] for s in speeds]


def _brute(work=None, speeds=None, *, times=None, memory=None, caps=None, allow_empty=True):
    """Least bottleneck over every cut (direct sums, no prefix sums), or inf if none fits."""
    cost = [[list(map(float, row)) for row in c] for c in _costs(work, speeds, times)]
    k, m = len(cost), len(cost[0][0])
    if memory is not None:
        per_device = not np.isscalar(memory[0])
        mems = [np.atleast_2d(np.asarray(memory[j] if per_device else memory, float)).tolist()
                for j in range(k)]
        capss = [np.atleast_1d(np.asarray(caps[j], float)).tolist() for j in range(k)]
    best = math.inf
    inner = (itertools.combinations_with_replacement(range(m + 1), k - 1) if allow_empty
             else itertools.combinations(range(1, m), k - 1))
    for mid in inner:
        cuts = (0, *mid, m)
        worst = 0.0
        for j in range(k):
            a, b = cuts[j], cuts[j + 1]
            if b > a and memory is not None and any(
                    sum(row[a:b]) > cap * (1 + 1e-12) for row, cap in zip(mems[j], capss[j], strict=True)):
                break
            worst = max(worst, max((sum(row[a:b]) for row in cost[j]), default=0.0))
        else:
            best = min(best, worst)
    return best


def _instances(n, seed, *, memory=False, integer=False):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        m, k = int(rng.integers(1, 8)), int(rng.integers(1, 5))
        work = (rng.integers(0, 6, m).astype(float) if integer else rng.exponential(1.0, m))
        speeds = rng.choice([0.5, 1.0, 2.0, 3.0], k) if integer else rng.lognormal(0, 0.6, k)
        if memory:
            mem = rng.integers(1, 5, m).astype(float)
            caps = rng.integers(2, 10, k).astype(float)
            yield work, speeds, mem, caps
        else:
            yield work, speeds, None, None


@pytest.mark.parametrize("memory", [False, True])
@pytest.mark.parametrize("integer", [False, True])
def test_greedy_equals_dp_equals_brute_force(memory, integer, n=60):
    """The greedy probe's exact search, the DP and every cut agree (with and without memory caps)."""
    checked = infeasible = 0
    for w, v, mem, caps in _instances(n, 1 + 2 * memory + integer, memory=memory, integer=integer):
        ref = _brute(w, v, memory=mem, caps=caps)
        if ref == math.inf:
            infeasible += 1
            for f in (analytic.greedy_partition, analytic.dp_partition):
                with pytest.raises(ConfigError, match="'caps' must be large enough"):
                    f(w, v, memory=mem, caps=caps)
            continue
        g = analytic.greedy_partition(w, v, memory=mem, caps=caps)
        d = analytic.dp_partition(w, v, memory=mem, caps=caps)
        assert g.bottleneck == pytest.approx(ref, rel=1e-12, abs=1e-15)
        assert d.bottleneck == pytest.approx(ref, rel=1e-12, abs=1e-15)
        assert max(analytic.block_times(g.cuts, w, v)) == pytest.approx(g.bottleneck, rel=1e-12)
        if mem is not None:  # the greedy's blocks fit their caps
            for j, (a, b) in enumerate(g.blocks):
                assert mem[a:b].sum() <= caps[j]
        checked += 1
    assert checked > n // 3 and (infeasible > 0 if memory else infeasible == 0)


@pytest.mark.slow
@pytest.mark.parametrize("memory", [False, True])
@pytest.mark.parametrize("integer", [False, True])
def test_greedy_equals_dp_equals_brute_force_many(memory, integer):
    """The same agreement on 2000 random instances per case."""
    test_greedy_equals_dp_equals_brute_force(memory, integer, n=2000)


def test_every_device_holding_a_layer_needs_the_dp():
    """allow_empty=False: the DP equals brute force over non-empty cuts; idling a device can be better."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        m = int(rng.integers(2, 8))
        k = int(rng.integers(1, min(m, 4) + 1))
        w, v = rng.exponential(1.0, m), rng.lognormal(0, 0.8, k)
        d = analytic.dp_partition(w, v, allow_empty=False)
        assert d.bottleneck == pytest.approx(_brute(w, v, allow_empty=False), rel=1e-12)
        assert min(d.sizes) >= 1
    # a slow middle device: leaving it idle halves... the greedy idles it, the non-empty DP cannot
    w, v = [1, 1, 5, 5], [10, 1, 10]
    assert analytic.greedy_partition(w, v).bottleneck == pytest.approx(0.7)
    assert analytic.greedy_partition(w, v).sizes == (3, 0, 1)
    assert analytic.dp_partition(w, v, allow_empty=False).bottleneck == pytest.approx(1.0)


def test_per_device_times_and_replica_rows():
    """General costs (a row of layer times per device, several rows = replicas, the longest counts)."""
    rng = np.random.default_rng(11)
    for _ in range(50):
        m, k = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        times = [rng.exponential(1.0, (int(rng.integers(1, 3)), m)) for _ in range(k)]
        mem = [rng.integers(1, 4, (int(rng.integers(1, 3)), m)).astype(float) for _ in range(k)]
        caps = [rng.integers(3, 9, x.shape[0]).astype(float) for x in mem]
        ref = _brute(times=times, memory=mem, caps=caps)
        if ref == math.inf:
            continue
        g = analytic.greedy_partition(times=times, memory=mem, caps=caps)
        d = analytic.dp_partition(times=times, memory=mem, caps=caps)
        assert g.bottleneck == pytest.approx(ref, rel=1e-12)
        assert d.bottleneck == pytest.approx(ref, rel=1e-12)


def test_bounds_hold_on_random_instances():
    """W/V <= T* <= W/V + (k - 1) w_max / V < W/V + k w_max / V on random instances."""
    rng = np.random.default_rng(3)
    for _ in range(150):
        m, k = int(rng.integers(1, 9)), int(rng.integers(1, 6))
        w, v = rng.exponential(1.0, m), rng.lognormal(0, 1.0, k)
        lo, hi = analytic.bottleneck_bounds(w, v)
        t = analytic.greedy_partition(w, v).bottleneck
        assert lo * (1 - 1e-12) <= t <= hi * (1 + 1e-12)
        assert t < w.sum() / v.sum() + k * w.max() / v.sum()


def test_bounds_are_tight_where_the_study_says():
    """Lower bound attained by a proportional cut on layer boundaries; upper by one layer on k devices."""
    w, v = [1.0] * 12, [1.0, 2.0, 3.0, 6.0]  # proportional cut 1, 2, 3, 6 layers
    lo, hi = analytic.bottleneck_bounds(w, v)
    assert analytic.greedy_partition(w, v).bottleneck == pytest.approx(lo) == pytest.approx(1.0)
    for k in (2, 3, 5):  # one layer on k equal devices: T* = w = W/V + (k-1) w/V exactly
        lo, hi = analytic.bottleneck_bounds([2.0], [1.0] * k)
        assert analytic.greedy_partition([2.0], [1.0] * k).bottleneck == pytest.approx(hi) == 2.0
    # with m >= k layers the upper bound is approached: one layer of 1 then k - 1 of eps
    for eps in (1e-2, 1e-4):
        k = 4
        w = [1.0] + [eps] * (k - 1)
        t = analytic.greedy_partition(w, [1.0] * k).bottleneck
        assert t == pytest.approx(analytic.bottleneck_bounds(w, [1.0] * k)[1], abs=2 * eps)
    # read with m = layers, W/V + m w_max / V is no bound when the devices outnumber the layers
    assert analytic.greedy_partition([1.0], [1.0] * 3).bottleneck > 1 / 3 + 1 * 1.0 / 3


def test_memory_caps_void_the_upper_bound():
    """A cap that forces layers onto a slow device breaks W/V + (k - 1) w_max / V."""
    w, v = [1.0] * 4, [10.0, 1.0]
    lo, hi = analytic.bottleneck_bounds(w, v)
    t = analytic.greedy_partition(w, v, memory=[1.0] * 4, caps=[1.0, 10.0]).bottleneck
    assert t == pytest.approx(3.0) and t > hi


@pytest.mark.parametrize("speeds", [(1, 2, 3, 6), (1, 1, 2, 4), (2, 3, 5, 10), (1, 5)])
def test_speed_blind_cost_exact_at_divisible_points(speeds):
    """Equal-work blocks cost exactly v_mean / v_min when both cuts are exact, in any device order."""
    V = sum(speeds)
    k = len(speeds)
    m = V * k  # m equal layers: k | m and every m v_j / V = k v_j is an integer
    w = [1.0] * m
    exact = analytic.speed_blind_cost(speeds)
    v = np.array(speeds, float)
    for order in itertools.islice(itertools.permutations(range(k)), 6):
        blind = analytic.speed_blind_partition(w, v[list(order)])
        opt = analytic.greedy_partition(w, v[list(order)])  # W/V in every order here
        assert blind.sizes == (m // k,) * k
        assert blind.bottleneck / opt.bottleneck == pytest.approx(exact, rel=1e-12)
    # the neighbouring formulas are wrong here
    wrong = {"v_max/v_min": v.max() / v.min(), "v_mean/v_harmonic": v.mean() * np.mean(1 / v)}
    for name, value in wrong.items():
        assert value != pytest.approx(exact, rel=0.05), name


def test_speed_blind_cost_is_the_limit_with_many_layers():
    """With many small layers the discrete ratio tends to v_mean / v_min (bounded by the bounds)."""
    rng = np.random.default_rng(5)
    v = rng.lognormal(0, 0.5, 6)
    exact = analytic.speed_blind_cost(v)
    errs = []
    for m in (30, 300, 3000):
        w = rng.uniform(0.5, 1.5, m)
        ratio = analytic.speed_blind_partition(w, v).bottleneck / analytic.greedy_partition(w, v).bottleneck
        errs.append(abs(ratio / exact - 1))
    assert errs[-1] < 2e-3 and errs[-1] < errs[0]


def test_best_order_equals_brute_force_over_orders_and_cuts(n=15):
    """best_device_order is the least over all permutations; the swap search is a local optimum above it."""
    rng = np.random.default_rng(9)
    gaps = []
    for _ in range(n):
        m, k = int(rng.integers(2, 6)), int(rng.integers(2, 5))
        w, v = rng.exponential(1.0, m), rng.choice([1.0, 2.0, 3.5], k)
        mem, caps = rng.integers(1, 4, m).astype(float), rng.choice([3.0, 6.0, 20.0], k)
        ref = min(_brute(w, v[list(p)], memory=mem, caps=caps[list(p)])
                  for p in itertools.permutations(range(k)))
        if ref == math.inf:
            continue
        best = analytic.best_device_order(w, v, memory=mem, caps=caps)
        assert best.bottleneck == pytest.approx(ref, rel=1e-12)
        o = list(best.order)
        assert _brute(w, v[o], memory=mem, caps=caps[o]) == pytest.approx(ref, rel=1e-12)
        swap = analytic.swap_device_order(w, v, memory=mem, caps=caps)
        assert swap.bottleneck >= best.bottleneck * (1 - 1e-12)
        gaps.append(swap.bottleneck / best.bottleneck - 1)
    assert len(gaps) > n // 2


@pytest.mark.slow
def test_best_order_equals_brute_force_many():
    """The same on 400 random instances."""
    test_best_order_equals_brute_force_over_orders_and_cuts(n=400)


@pytest.mark.parametrize("call,message", [
    (lambda: analytic.greedy_partition([1, -1], [1]),
     "'work' must be a non-empty sequence of finite numbers >= 0: [1, -1]"),
    (lambda: analytic.greedy_partition([1, 1], [1, 0]),
     "'speeds' must be a non-empty sequence of finite numbers > 0: [1, 0]"),
    (lambda: analytic.greedy_partition([1, 1], [1], memory=[1, 1]),
     "'caps' must be given with memory: None"),
    (lambda: analytic.greedy_partition([1, 1], [1, 1], memory=[1, 1], caps=[1]),
     "'caps' must be a non-empty sequence of finite numbers >= 0 of length 2: [1]"),
    (lambda: analytic.greedy_partition([3, 1], [1], memory=[3, 1], caps=[2]),
     "'caps' must be large enough to hold the model on these devices (no cut fits the memory "
     "caps at any bottleneck): [[2.0]]"),
    (lambda: analytic.dp_partition([1], [1, 1], allow_empty=False),
     "'allow_empty' must be True when devices (2) outnumber layers (1): False"),
    (lambda: analytic.block_times((0, 3), [1, 1], [1]),
     "'cuts' must be 2 non-decreasing integers from 0 to 2: (0, 3)"),
    (lambda: analytic.best_device_order([1] * 3, [1, 2, 3, 4, 5, 6, 7, 8], max_orders=100),
     "'max_orders' must be >= the 40320 distinct device orders: 100"),
])
def test_bad_input_is_one_line(call, message):
    """Malformed chains, speeds, caps and cuts are refused with the field, the rule and the value."""
    with pytest.raises(ConfigError) as exc:
        call()
    assert str(exc.value) == message


def test_prefix_fast_path_equals_the_validated_one():
    """greedy_partition_prefix (prepared prefix sums, no checks) gives greedy_partition's cut."""
    rng = np.random.default_rng(13)
    for _ in range(40):
        m, k = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        times = [rng.exponential(1.0, (int(rng.integers(1, 3)), m)) for _ in range(k)]
        mem = [rng.integers(1, 4, (1, m)).astype(float) for _ in range(k)]
        caps = [rng.integers(2, 12, 1).astype(float) for _ in range(k)]
        fast = analytic.greedy_partition_prefix(
            [[analytic.prefix_sums(r) for r in t] for t in times],
            [[analytic.prefix_sums(r) for r in x] for x in mem], [list(c) for c in caps])
        try:
            slow = analytic.greedy_partition(times=times, memory=mem, caps=caps)
        except ConfigError:
            assert fast is None
            continue
        assert fast == slow
