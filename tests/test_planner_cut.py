"""The search's compiled cut (sim.planner.cut) is analytic.partition's greedy cut, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from test_planner_search import ToyModel, _catalogue, _fleet, _model

from sim.analytic.partition import greedy_partition_prefix, prefix_sums
from sim.planner import PlanRequest, search_plans
from sim.planner.cut import HAVE_NUMBA, RowBank, StageTable, greedy_cut_stages

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")


def _instance(rng: np.random.Generator) -> tuple[list, list, list]:
    """Devices with 1-3 layer-time rows and 1-3 memory rows each (caps from none to roomy)."""
    m = int(rng.integers(1, 30))
    k = int(rng.integers(1, 9))
    times, mem, caps = [], [], []
    for _ in range(k):
        times.append([prefix_sums(rng.choice([0.0, 0.5, 1.0, 2.5], m) * rng.uniform(0.5, 2))
                      for _ in range(int(rng.integers(1, 4)))])
        rows = [prefix_sums(rng.integers(0, 4, m).astype(float)) for _ in range(int(rng.integers(1, 4)))]
        mem.append(rows)
        caps.append([float(rng.integers(0, 3 * m // max(k, 1) + 4)) for _ in rows])
    return times, mem, caps


def test_compiled_cut_equals_the_greedy_partition_on_random_chains():
    """Random chains (ties, zero-time layers, tight and loose memory caps, infeasible ones):
    the same cuts and the same bottleneck, bit for bit, or both refuse."""
    rng = np.random.default_rng(12)
    refused = found = 0
    for _ in range(600):
        times, mem, caps = _instance(rng)
        m = len(times[0][0]) - 1
        bank, table = RowBank(m + 1, rows=2), StageTable(stages=2, entries=2)
        sids = []
        for rows, mrows, c in zip(times, mem, caps, strict=True):
            sids.append(table.add([bank.id(("t", tuple(r)), r) for r in rows],
                                  [bank.id(("m", tuple(r)), r) for r in mrows], c))
        cuts = np.empty(len(times) + 1, dtype=np.int64)
        got = greedy_cut_stages(bank.rows, table.bounds, table.crow, table.mrow, table.mcap,
                                np.array(sids, dtype=np.int64), m, cuts)
        want = greedy_partition_prefix(times, mem, caps)
        if want is None:
            assert got != got  # nan: no cut fits
            refused += 1
        else:
            assert got == want.bottleneck and tuple(cuts.tolist()) == want.cuts
            found += 1
    assert refused > 30 and found > 200


def test_search_with_the_compiled_cut_equals_the_python_cut():
    """The same plans, times and counters whichever cut the search runs."""
    from sim.planner import search as S

    model, cat = _model(n=9, mbs=(1, 2)), _catalogue(mem=4e5)
    req = PlanRequest(16, top=20)
    out = []
    for compiled in (True, False):
        s = S._Search(model, _fleet(2, 2), cat, req, ToyModel(model, cat), compiled_cut=compiled)
        assert (s._bank is not None) == compiled
        s.run()
        out.append((sorted((c.key("time"), repr(c.plan)) for c in s.best.values()),
                    s.evaluated, s.partitions, s.refused, s.skipped, s.groups, s.pruned))
    assert out[0] == out[1]
    assert out[0][2] > 50  # cuts made
    res = search_plans(model, _fleet(2, 2), cat, req, ToyModel(model, cat))
    assert [c.key("time") for c in res.candidates] == [k for k, _ in out[0][0][:20]]
