"""The compiled batch loop (sim.network.kernel) gives the Python engine's finish times.

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
    assert np.allclose(plain_finish["tree", weighting], want, rtol=1e-12, atol=0)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("seed", range(10))
def test_compiled_kernel_equals_the_engine(seed):
    """Compiled: equal to the Python engine to 1e-12 on random trees, both weightings."""
    rng = np.random.default_rng(400 + seed)
    G = random_tree(rng, int(rng.integers(5, 30)))
    flows = random_flows(rng, list(G.nodes), int(rng.integers(20, 300)), horizon=30.0)
    for weighting in ("maxmin", "rtt"):
        want = simulate_flows(G, flows, weighting=weighting, engine="python").finish
        got = simulate_flows(G, flows, weighting=weighting, engine="compiled").finish
        assert np.allclose(got, want, rtol=1e-12, atol=0)


def test_kernel_logic_with_curves_equals_the_engine(plain_finish):
    """Curve links and NICs (coefficients 1 / c(s)) in the loop's logic, run uncompiled."""
    G, flows = _curve_case()
    want = simulate_flows(G, flows, engine="python").finish
    assert np.allclose(plain_finish["curves", "maxmin"], want, rtol=1e-12, atol=0)
