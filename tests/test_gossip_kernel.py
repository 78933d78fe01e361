"""The compiled async gossip loop against exact laws of asynchronous averaging."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.gossip.kernel import ADV_CONSTANT, HAVE_NUMBA, run_async, stream_states

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="needs the fast extra (numba)")


def _run(n, times, *, seed, x0=None, delay=0.0, stubborn=None, tau=math.inf, availability=1.0):
    rng = np.random.default_rng([seed, 0])
    x = rng.standard_normal((n, 1)) if x0 is None else x0.copy()
    honest = np.ones(n, dtype=bool)
    kind = np.zeros(n, dtype=np.int64)
    const = np.zeros((n, 1))
    if stubborn is not None:
        honest[0] = False
        kind[0] = ADV_CONSTANT
        const[0] = stubborn
        x[0] = stubborn
    st = stream_states([np.random.default_rng([seed, k + 1]) for k in range(4)])
    return run_async(x, honest, kind, np.zeros(n), const, np.full(n, tau),
                     record_times=np.asarray(times, dtype=float), states=st,
                     complete_delay=delay, availability=availability)


def test_contraction_without_latency_is_the_poisson_mixture_of_edge_steps():
    """E[D(t)]/D(0) = exp(-n t / (n - 1)) on the complete graph (rate-1 clocks), at 4 sigma."""
    n, t = 16, 2.0
    r = np.array([(o := _run(n, [0.0, t], seed=s))["disagreement"][1] / o["disagreement"][0]
                  for s in range(600)])
    exact = math.exp(-n * t / (n - 1))
    se = r.std(ddof=1) / math.sqrt(r.size)
    assert abs(r.mean() - exact) <= 4 * se, (r.mean(), exact, se)
    # one exchange per wake pair would be twice as fast: rejected
    assert abs(r.mean() - math.exp(-2 * n * t / (n - 1))) > 10 * se


def test_stubborn_node_captures_the_honest_mean_at_the_exact_rate():
    """E[m(t) - b] = (m0 - b) exp(-t / (n - 1)) with rate-1 clocks, at 4 sigma."""
    # A wake picks a uniform ordered pair; it contains the stubborn node with probability
    # 2/n, so at total rate 2, and then moves the honest mean by (b - x_h) / (2 (n - 1)).
    n, t, b = 10, 3.0, 5.0
    x0 = np.zeros((n, 1))
    m = np.array([_run(n, [0.0, t], seed=s, x0=x0, stubborn=b)["honest_mean"][1, 0]
                  for s in range(800)])
    exact = b + (0.0 - b) * math.exp(-t / (n - 1))
    se = m.std(ddof=1) / math.sqrt(m.size)
    assert abs(m.mean() - exact) <= 4 * se, (m.mean(), exact, se)


def test_latency_delivers_every_exchange_and_stays_in_the_hull():
    """With latency, delivered + in flight = the Poisson number of wakes; values stay in the hull."""
    n, horizon = 50, 20.0
    x0 = np.random.default_rng(4).uniform(-1, 1, (n, 1))
    x = x0.copy()
    honest = np.ones(n, dtype=bool)
    st = stream_states([np.random.default_rng([3, k]) for k in range(4)])
    out = run_async(x, honest, np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros((n, 1)),
                    np.full(n, math.inf), record_times=np.linspace(0, horizon, 5), states=st,
                    complete_delay=0.7)
    started = out["exchanges"][-1] + out["in_flight"]
    assert abs(started - n * horizon) <= 4 * math.sqrt(n * horizon)
    assert out["in_flight"] > 0 and np.all(np.diff(out["exchanges"]) >= 0)
    assert x.min() >= x0.min() and x.max() <= x0.max()
    assert out["disagreement"][-1] < 1e-2 * out["disagreement"][0]


def test_same_seed_same_numbers():
    """A seeded run is reproducible bit for bit."""
    a = _run(30, [0.0, 5.0], seed=9, delay=0.3, availability=0.8)
    b = _run(30, [0.0, 5.0], seed=9, delay=0.3, availability=0.8)
    assert a["disagreement"].tolist() == b["disagreement"].tolist()


def _changes_run(chunks, *, seed=5, n=20, horizon=10.0, churn=True):
    from sim.gossip.kernel import AsyncLoop

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1))
    times = [np.sort(rng.uniform(0, horizon, 6)) for _ in range(n)]
    times[0] = np.array([0.0])  # node 0 goes down at 0 and never returns
    st = stream_states([np.random.default_rng([seed, k]) for k in range(5)])
    loop = AsyncLoop(x, np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n),
                     np.zeros((n, 1)), np.full(n, math.inf), states=st, complete_delay=0.3,
                     changes=churn)
    prev = -1.0  # the first chunk includes changes at time 0
    for t in chunks:
        if churn:
            loop.load_changes(t, [c[(c > prev) & (c <= t)] for c in times])
        loop.advance(t)
        prev = t
    return x, loop


def test_change_times_loaded_in_chunks_give_the_same_run():
    """Up/down change times given in several chunks give the run of giving them at once, bit for
    bit; a node down from time 0 never moves; without the changes the run differs."""
    x1, a = _changes_run([10.0])
    x2, b = _changes_run([2.5, 5.0, 7.5, 10.0])
    np.testing.assert_array_equal(x1, x2)
    assert a.exchanges == b.exchanges > 0 and a.in_flight == b.in_flight
    np.testing.assert_array_equal(a.up, b.up)
    x0 = np.random.default_rng(5).standard_normal((20, 1))
    assert x1[0, 0] == x0[0, 0]  # offline throughout: neither chosen nor moved
    x3, c = _changes_run([10.0], churn=False)
    assert c.exchanges > a.exchanges and x3[0, 0] != x0[0, 0]
