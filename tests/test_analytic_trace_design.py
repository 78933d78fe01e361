"""Study A's laws on a count trace under the random policy (sim.analytic.trace_design)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sim import analytic
from sim.traces import load_trace


def test_empty_stage_law_matches_enumeration():
    """P(K = k | u) equals the count over every choice of u up workers (L=3, r=2)."""
    L, r = 3, 2
    law = analytic.empty_stage_law(L, r)
    workers = [(j, i) for j in range(L) for i in range(r)]
    for u in range(L * r + 1):
        counts = np.zeros(L + 1)
        for up in itertools.combinations(workers, u):
            counts[L - len({j for j, _ in up})] += 1
        assert law[u] == pytest.approx(counts / math.comb(L * r, u), abs=1e-15)


def test_constant_full_trace_never_drops_and_one_slot_short_is_hypergeometric():
    """All slots up: K = 0. One of C slots down all the time: a stage of r=1 is out
    with probability W/C, and P(K=1) = W/C exactly."""
    t, c = np.array([0.0]), np.array([8])
    assert analytic.trace_drop_probability(t, c, 10.0, 8, 4, 2, 0) == 0.0
    law = analytic.trace_skipped_distribution(t, np.array([7]), 10.0, 8, 4, 1)
    assert law[1] == pytest.approx(4 / 8) and law[0] == pytest.approx(4 / 8)


def test_burstiness_costs_replicas_on_gcp_a100():
    """On gcp-a100 (a = 0.895), L=8 s=1 to 1%: the trace needs r=3, independence says r=2."""
    tr = load_trace("gcp-a100")
    d = analytic.trace_min_replicas(tr, 8, 1, 1e-2)
    assert (d.feasible, d.replicas) == (True, 3)
    assert d.drop_rate == pytest.approx(0.008097192542664283, rel=1e-12)
    assert analytic.min_replicas(8, 0.8954, 0.0, 1, 1e-2).replicas == 2


def test_too_few_slots_is_infeasible_with_a_reason():
    """aws-p3 has 32 slots: L=8 s=1 at 2% would need more than r=4."""
    d = analytic.trace_min_replicas(load_trace("aws-p3"), 8, 1, 2e-2)
    assert not d.feasible and "uses all 32 of the trace's slots" in d.reason
