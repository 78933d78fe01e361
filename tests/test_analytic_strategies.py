"""Exact references of the fault-tolerance strategies (sim.analytic.strategies)."""

from __future__ import annotations

import itertools
import math

import pytest

from sim import analytic


def test_linear_partition_least_largest_group():
    """Contiguous groups of least largest sum, every group non-empty."""
    assert analytic.linear_partition([1, 1, 1, 1], 2) == (2, 2)
    assert analytic.linear_partition([4, 1, 1, 1, 1], 2) == (1, 4)
    assert analytic.linear_partition([1, 2, 3], 3) == (1, 1, 1)
    work = [3, 1, 4, 1, 5, 9, 2, 6]
    for k in range(1, 9):
        sizes = analytic.linear_partition(work, k)
        assert sum(sizes) == 8 and min(sizes) >= 1

        def largest(sz):
            out, i = 0, 0
            for s in sz:
                out, i = max(out, sum(work[i:i + s])), i + s
            return out
        best = min(largest(c) for c in _compositions(8, k))
        assert largest(sizes) == best


def _compositions(n, k):
    for cuts in itertools.combinations(range(1, n), k - 1):
        b = (0, *cuts, n)
        yield tuple(b[i + 1] - b[i] for i in range(k))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7])
def test_no_adjacent_pair_laws_match_enumeration(k):
    """Path and ring probabilities of no two adjacent failures equal the sums over subsets."""
    p = 0.3
    path = cycle = 0.0
    for bits in itertools.product((0, 1), repeat=k):
        w = math.prod(p if b else 1 - p for b in bits)
        if not any(bits[i] and bits[i + 1] for i in range(k - 1)):
            path += w
            if not (k > 2 and bits[0] and bits[-1]):
                cycle += w
    assert analytic.no_adjacent_pair_path(k, p) == pytest.approx(path, rel=1e-12)
    assert analytic.no_adjacent_pair_cycle(k, p) == pytest.approx(cycle, rel=1e-12)


def test_fatal_probability_small_rate_limit():
    """As failures get rare, P(fatal) -> 2 E[V] / M: the two neighbours, over the mean window."""
    L, P, T, s, M = 6, 2, 10.0, 1.5, 1e7
    p = analytic.fatal_loss_probability(stages=L, pipelines=P, mtbf=M, step=T, slowdown=s,
                                        rebalance=3.0)
    mean_window = T / 2 * s + 3.0  # the phase is uniform when failures are rare
    assert p == pytest.approx(2 * mean_window / M, rel=1e-4)


def test_shrink_reduces_to_daly_for_one_segment_without_shrinking():
    """One segment (N = K, its checkpoint after the last step), a step time that does not
    depend on the workers, and no floor: E[time; finish] is Daly's law with rate n/M summed
    over the shrinking restarts; with a huge mtbf it is N t + C."""
    p, m = analytic.checkpoint_restart_shrink(steps=10, every=10, checkpoint=1.0, restart=2.0,
                                              mtbf=1e12, step_time=lambda n: 3.0, workers=4)
    assert p == pytest.approx(1.0) and m == pytest.approx(31.0)
    p, m = analytic.checkpoint_restart_shrink(steps=10, every=5, checkpoint=1.0, restart=2.0,
                                              mtbf=1e12, step_time=lambda n: 3.0, workers=4)
    assert m == pytest.approx(32.0, rel=1e-5)  # two checkpoints: between and at the end


def test_shrink_probability_of_finishing_with_one_worker():
    """One worker whose step time exists only while it lives: P(finish) = e^{-W/M}."""
    p, m = analytic.checkpoint_restart_shrink(steps=4, every=4, checkpoint=0.0, restart=0.0,
                                              mtbf=50.0, step_time=lambda n: 5.0 if n >= 1
                                              else None, workers=1)
    assert p == pytest.approx(math.exp(-20.0 / 50.0))
    assert m == pytest.approx(20.0)
