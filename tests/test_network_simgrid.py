"""dtsim's flow-level model against SimGrid (CM02) and an independent event simulation (slow).

Set DTSIM_NETWORK_TABLE=FILE to also write the comparison table (docs/network.md).
"""

from __future__ import annotations

import math
import os

import networkx as nx
import numpy as np
import pytest

import topologies
from sim.network import build_network, simulate_flows
from sim.network.simgrid import simgrid_available, simgrid_finish_times

pytestmark = pytest.mark.slow

ROWS: list[str] = []
REL = 1e-9


def _need_simgrid():
    if not simgrid_available():
        pytest.skip("SimGrid's Python bindings are not importable")


def switched_platform(rng: np.random.Generator, *, equal_latency: bool) -> tuple[nx.Graph, list]:
    """Random switches in a tree, hosts on them, random bandwidths, sharing and NICs.

    Equal latency: only host access links carry latency (the same on each), so
    every route between two hosts has the same total latency.
    """
    n_sw = int(rng.integers(1, 6))
    n_h = int(rng.integers(3, 10))
    G = nx.Graph()
    bws = [5.0, 10.0, 25.0, 40.0, 100.0, math.inf]
    for s in range(1, n_sw):
        G.add_edge(f"s{int(rng.integers(0, s))}", f"s{s}", bandwidth=float(rng.choice(bws)),
                   latency=0.0 if equal_latency else float(rng.uniform(0.01, 2.0)),
                   sharing=str(rng.choice(["split", "shared"])))
    for h in range(n_h):
        G.add_edge(f"h{h}", f"s{int(rng.integers(0, n_sw))}", bandwidth=float(rng.choice(bws)),
                   latency=0.25 if equal_latency else float(rng.uniform(0.01, 2.0)),
                   sharing=str(rng.choice(["split", "shared"])))
        if rng.random() < 0.4:
            G.nodes[f"h{h}"]["egress"] = float(rng.choice([8.0, 30.0]))
        if rng.random() < 0.4:
            G.nodes[f"h{h}"]["ingress"] = float(rng.choice([8.0, 30.0]))
    for s in range(n_sw):
        G.nodes[f"s{s}"]["role"] = "switch"
    hosts = [f"h{h}" for h in range(n_h)]
    m = int(rng.integers(10, 50))
    flows = []
    for _ in range(m):
        a, b = rng.choice(n_h, 2, replace=False)
        flows.append((hosts[a], hosts[b], int(rng.integers(1, 2000)), float(rng.uniform(0, 20))))
    return G, flows


def _relerr(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _row(kind: str, seed: int, G: nx.Graph, flows: list, err: float) -> None:
    ROWS.append(f"| {kind} | {seed} | {G.number_of_nodes()} | {G.number_of_edges()} | "
                f"{len(flows)} | {err:.1e} |")


@pytest.mark.parametrize("seed", range(25))
def test_equal_latency_platforms_equal_simgrid(seed):
    """Equal route latencies: dtsim's plain max-min equals SimGrid CM02 to 1e-9."""
    _need_simgrid()
    rng = np.random.default_rng(1000 + seed)
    G, flows = switched_platform(rng, equal_latency=True)
    got = simulate_flows(G, flows).finish
    sg, _ = simgrid_finish_times(G, flows)
    err = _relerr(got, sg)
    _row("equal latency, maxmin vs SimGrid", seed, G, flows, err)
    assert err <= REL


@pytest.mark.parametrize("seed", range(10))
def test_mixed_latency_platforms_rtt_weighting_equals_simgrid(seed):
    """Mixed latencies: weighting='rtt' equals SimGrid CM02; plain max-min does not."""
    _need_simgrid()
    rng = np.random.default_rng(2000 + seed)
    G, flows = switched_platform(rng, equal_latency=False)
    sg, _ = simgrid_finish_times(G, flows)
    got = simulate_flows(G, flows, weighting="rtt").finish
    err = _relerr(got, sg)
    plain = _relerr(simulate_flows(G, flows).finish, sg)
    _row("mixed latency, rtt vs SimGrid", seed, G, flows, err)
    _row("mixed latency, maxmin vs SimGrid (differs)", seed, G, flows, plain)
    assert err <= REL


def test_rtt_weighting_changes_finish_times_where_latencies_differ():
    """Across the mixed platforms, plain max-min and SimGrid's RTT weighting differ somewhere."""
    _need_simgrid()
    worst = 0.0
    for seed in range(5):
        rng = np.random.default_rng(2000 + seed)
        G, flows = switched_platform(rng, equal_latency=False)
        sg, _ = simgrid_finish_times(G, flows)
        worst = max(worst, _relerr(simulate_flows(G, flows).finish, sg))
    assert worst > 1e-3


@pytest.mark.parametrize("seed", range(20))
def test_mixed_latency_trees_equal_an_independent_event_simulation(seed):
    """Random trees with mixed latencies: dtsim equals a max-min simulation written in a test."""
    from test_network import _independent_maxmin_sim, random_flows, random_tree

    rng = np.random.default_rng(3000 + seed)
    G = random_tree(rng, int(rng.integers(5, 14)))
    flows = random_flows(rng, list(G.nodes), int(rng.integers(10, 30)))
    err = _relerr(simulate_flows(G, flows).finish, _independent_maxmin_sim(G, flows))
    _row("mixed latency, maxmin vs independent simulation", seed, G, flows, err)
    assert err <= 1e-8  # the independent simulation decides completions at 1e-9 of a size


def test_ten_thousand_flows_on_a_two_level_tree_equal_simgrid():
    """10^4 staggered flows on 1000 hosts (40 racks): SimGrid's finish times to 1e-9."""
    _need_simgrid()
    G = topologies.build("tree:racks=40,hosts=25,host_latency=0.05,uplink_latency=0")
    net = build_network(G)
    rng = np.random.default_rng(7)
    n = 10_000
    src = rng.integers(0, 1000, n)
    dst = (src + rng.integers(1, 1000, n)) % 1000
    size = rng.integers(1, 100, n)
    start = rng.uniform(0, 100, n)
    flows = list(zip(src.tolist(), dst.tolist(), size.tolist(), start.tolist(), strict=True))
    got = simulate_flows(net, flows).finish
    sg, _ = simgrid_finish_times(net, flows)
    err = _relerr(got, sg)
    _row("two-level tree, 1000 hosts, 10^4 flows", 7, G, flows, err)
    assert err <= REL


def teardown_module(module):
    path = os.environ.get("DTSIM_NETWORK_TABLE")
    if path and ROWS:
        with open(path, "w") as fh:
            fh.write("| comparison | seed | nodes | edges | flows | max relative error |\n")
            fh.write("|---|---|---|---|---|---|\n")
            fh.write("\n".join(ROWS) + "\n")
