"""The compiled flow engine (sim.network.kernel) gives the Python engine's numbers, bit for bit.

The default suite runs the loop's logic as plain Python (numba's JIT off, in one fresh
interpreter: ``plain_python`` in ``conftest.py``; calling ``run_flows.py_func`` here would
still compile the heap helpers it calls, about 5 s of CPU); the slow tests run the binary."""

from __future__ import annotations

import numpy as np
import pytest
from test_network import random_flows, random_tree

from sim.network import simulate_flows
from sim.network.kernel import HAVE_NUMBA


def _tree_case():
    rng = np.random.default_rng(21)
    G = random_tree(rng, 10)
    return G, random_flows(rng, list(G.nodes), 30)


def _curve_case():
    import networkx as nx

    from sim.network import BandwidthCurve

    cur = BandwidthCurve.table([(1.0, 2.0), (100.0, 20.0)])
    G = nx.Graph()
    G.add_edge("a", "s", bandwidth_curve=cur, latency=0.1)
    G.add_edge("b", "s", bandwidth=15.0, latency=0.2, sharing="shared")
    G.add_edge("c", "s", latency=0.05)
    G.nodes["c"]["nic"] = BandwidthCurve.polylog2((0.5, 3.0), size_unit=10.0)
    rng = np.random.default_rng(4)
    flows = [(str(rng.choice(["a", "b", "c"])), "s", float(rng.uniform(1, 90)),
              float(rng.uniform(0, 5))) for _ in range(25)]
    return G, [(s, d, z, t) if s != "a" else ("a", "c", z, t) for s, d, z, t in flows]


#: (case, weighting) of the plain-Python checks: a random tree with NICs under both weightings,
#: curve links and NICs under max-min.
PLAIN = (("tree", "maxmin"), ("tree", "rtt"), ("curves", "maxmin"))
_CASES = {"tree": _tree_case, "curves": _curve_case}


@pytest.fixture(scope="module")
def plain_finish(plain_python):
    """The loop's finish times as plain Python, for every case of PLAIN, in one interpreter."""
    # the compiled engine's path (flow arrays, then the loop), its loop uncompiled
    calls = [(simulate_flows, _CASES[c](), {"weighting": w, "engine": "compiled"})
             for c, w in PLAIN]
    return {key: out.finish for key, out in zip(PLAIN, plain_python(calls), strict=True)}


@pytest.mark.parametrize("weighting", ["maxmin", "rtt"])
def test_kernel_logic_as_plain_python_equals_the_engine(weighting, plain_finish):
    """The loop's own logic (run uncompiled) equals FlowEngine on a random tree with NICs."""
    G, flows = _tree_case()
    want = simulate_flows(G, flows, weighting=weighting, engine="python").finish
    np.testing.assert_array_equal(plain_finish["tree", weighting], want)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("seed", range(10))
def test_compiled_kernel_equals_the_engine(seed):
    """Compiled: the Python engine's finish times, events and link loads exactly, random trees."""
    rng = np.random.default_rng(400 + seed)
    G = random_tree(rng, int(rng.integers(5, 30)))
    flows = random_flows(rng, list(G.nodes), int(rng.integers(20, 300)), horizon=30.0)
    for weighting in ("maxmin", "rtt"):
        want = simulate_flows(G, flows, weighting=weighting, engine="python")
        got = simulate_flows(G, flows, weighting=weighting, engine="compiled")
        np.testing.assert_array_equal(got.finish, want.finish)
        assert got.events == want.events and got.links == want.links


def test_kernel_logic_with_curves_equals_the_engine(plain_finish):
    """Curve links and NICs (coefficients 1 / c(s)) in the loop's logic, run uncompiled."""
    G, flows = _curve_case()
    want = simulate_flows(G, flows, engine="python").finish
    np.testing.assert_array_equal(plain_finish["curves", "maxmin"], want)


def _online_ops(rng: np.random.Generator, nodes: list, n: int) -> list[tuple]:
    """A random sequence of requests (sizes 0 included), cancels and advances."""
    ops: list[tuple] = []
    t, added = 0.0, 0
    for _ in range(n):
        u = rng.random()
        if u < 0.5:
            a, b = rng.choice(len(nodes), 2, replace=False)
            size = 0.0 if rng.random() < 0.05 else float(rng.uniform(0.1, 50))
            ops.append(("add", nodes[a], nodes[b], size, t))
            added += 1
        elif u < 0.6 and added:
            ops.append(("cancel", int(rng.integers(added))))
        else:
            t += float(rng.exponential(1.0))
            ops.append(("advance", t))
    return ops


def _drive(engine, ops: list[tuple]) -> list:
    """Every answer of ``engine`` to ``ops``: flows finished (with times), next event, time."""
    out = []
    for op in ops:
        if op[0] == "add":
            out.append(engine.add(*op[1:]))
        elif op[0] == "cancel":
            engine.advance(engine.now)
            engine.cancel(op[1])
        else:
            out.append(engine.advance_times(op[1]))
        out.append((engine.next_time(), engine.now, engine.rates()))
    engine.run()
    out.append((list(engine.finish), engine.events, engine.utilisation(10.0)))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("seed", range(6))
def test_compiled_online_engine_answers_as_the_python_engine(seed):
    """Requests, cancels and advances in any order: every answer equal, bit for bit (the arenas
    start at two flows, so they grow many times on the way)."""
    from sim.network import FlowEngine, build_network
    from sim.network.kernel import CompiledFlowEngine

    rng = np.random.default_rng(900 + seed)
    G = random_tree(rng, int(rng.integers(4, 20)))
    ops = _online_ops(rng, list(G.nodes), 300)
    net = build_network(G)
    for weighting in ("maxmin", "rtt"):
        a = _drive(FlowEngine(net, weighting=weighting), ops)
        b = _drive(CompiledFlowEngine(net, weighting=weighting, flows=2), ops)
        fa, fb = a.pop()[0], b.pop()[0]
        assert np.array_equal(np.asarray(fa), np.asarray(fb), equal_nan=True)
        assert a == b


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
def test_compiled_exchanges_answer_as_the_python_engine():
    """Exchanges (a flow each way, complete when both arrived): the same completions, in the
    same order, from both engines, on a ring with NICs; every one of them completes."""
    from sim.network import FlowEngine, build_network
    from sim.network.kernel import CompiledFlowEngine

    net = build_network("ring:n=12,latency=0.05,bandwidth=20", nic=4.0)
    rng = np.random.default_rng(3)
    times = np.cumsum(rng.exponential(0.05, 2000)).tolist()
    pairs = [(int(i), int((i + rng.choice([1, 11])) % 12)) for i in rng.integers(0, 12, 2000)]
    got = []
    for eng in (FlowEngine(net), CompiledFlowEngine(net, flows=2)):
        ex = {a: eng.exchanger(1.0, a) for a in range(12)}
        done = [list(ex[a](b, t)) for (a, b), t in zip(pairs, times, strict=True)]
        done.append(list(eng.exchanges_done(times[-1] + 100.0)))
        got.append(done)
    assert got[0] == got[1]
    flat = [k for d in got[0] for k in d]
    assert sorted(flat) == list(range(2000))
