"""The compiled batch loop (sim.network.kernel) gives the Python engine's finish times."""

from __future__ import annotations

import numpy as np
import pytest
from test_network import random_flows, random_tree

from sim.network import build_network, simulate_flows
from sim.network.flows import _as_flows, flow_arrays
from sim.network.kernel import HAVE_NUMBA, run_flows

KEYS = ("cap", "ptr", "res", "coef", "weight", "size", "act", "order")


def _kernel(G, flows, weighting, compiled):
    net = build_network(G)
    rows = _as_flows(flows)
    a = flow_arrays(net, rows, [f.start for f in rows], weighting)
    fn = run_flows if compiled else getattr(run_flows, "py_func", run_flows)
    return fn(*[a[k] for k in KEYS])[0]


@pytest.mark.parametrize("weighting", ["maxmin", "rtt"])
def test_kernel_logic_as_plain_python_equals_the_engine(weighting):
    """The loop's own logic (run uncompiled) equals FlowEngine on a random tree with NICs."""
    rng = np.random.default_rng(21)
    G = random_tree(rng, 10)
    flows = random_flows(rng, list(G.nodes), 30)
    want = simulate_flows(G, flows, weighting=weighting, engine="python").finish
    got = _kernel(G, flows, weighting, compiled=False)
    assert np.allclose(got, want, rtol=1e-12, atol=0)


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


def test_kernel_logic_with_curves_equals_the_engine():
    """Curve links and NICs (coefficients 1 / c(s)) in the loop's logic, run uncompiled."""
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
    flows = [(s, d, z, t) if s != "a" else ("a", "c", z, t) for s, d, z, t in flows]
    want = simulate_flows(G, flows, engine="python").finish
    got = _kernel(G, flows, "maxmin", compiled=False)
    assert np.allclose(got, want, rtol=1e-12, atol=0)
