"""The flow-level network model (sim.network): routes, sharing, NICs, curves, solvers, service."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import simpy

import topologies
from sim.analytic import network as exact
from sim.errors import ConfigError
from sim.network import (
    BandwidthCurve,
    FlowEngine,
    LinkValue,
    Network,
    NetworkService,
    NetworkValue,
    NodeValue,
    build_network,
    maxmin_rates,
    parse_curve,
    simulate_flows,
)
from sim.network.collectives import bucket_sizes, ring_allreduce

REL = 1e-9


def close(a, b, rel=REL):
    return abs(a - b) <= rel * max(1.0, abs(b))


def star(k: int, *, lat: float = 0.0, nic: float | None = None, bw: float = math.inf,
         sharing: str = "split") -> nx.Graph:
    """Hosts 0..k-1 on one switch 's' (route latency 2 * lat between hosts)."""
    G = nx.Graph()
    for i in range(k):
        G.add_node(i)
        if nic is not None:
            G.nodes[i]["nic"] = nic
    G.add_node("s", role="switch")
    for i in range(k):
        G.add_edge(i, "s", latency=lat, bandwidth=bw, sharing=sharing)
    return G


def random_tree(rng: np.random.Generator, n: int, *, equal_latency: bool = False) -> nx.Graph:
    G = nx.Graph()
    G.add_node(0)
    for v in range(1, n):
        u = int(rng.integers(0, v))
        G.add_edge(u, v, bandwidth=float(rng.choice([10.0, 25.0, 40.0, 100.0, math.inf])),
                   latency=0.5 if equal_latency else float(rng.uniform(0, 2)),
                   sharing=str(rng.choice(["split", "shared"])))
    for v in range(n):
        if rng.random() < 0.3:
            G.nodes[v]["egress"] = float(rng.choice([15.0, 60.0]))
        if rng.random() < 0.3:
            G.nodes[v]["ingress"] = float(rng.choice([15.0, 60.0]))
    return G


def random_flows(rng: np.random.Generator, nodes: list, m: int, *, horizon: float = 5.0):
    out = []
    for _ in range(m):
        a, b = rng.choice(len(nodes), 2, replace=False)
        out.append((nodes[a], nodes[b], float(rng.uniform(1, 100)), float(rng.uniform(0, horizon))))
    return out


# ----------------------------------------------------------------------------- routes


def test_route_least_latency_then_fewest_hops_then_lexicographic():
    """Routes take least total latency, ties to fewest hops, then the smallest node sequence."""
    G = nx.Graph()
    G.add_nodes_from(["a", "b", "c", "d", "e"])
    G.add_edge("a", "b", latency=1.0, bandwidth=10.0)
    G.add_edge("b", "e", latency=1.0, bandwidth=10.0)  # a-b-e: 2.0 in 2 hops
    G.add_edge("a", "c", latency=0.5, bandwidth=10.0)
    G.add_edge("c", "d", latency=0.5, bandwidth=10.0)
    G.add_edge("d", "e", latency=1.0, bandwidth=10.0)  # a-c-d-e: 2.0 in 3 hops
    G.add_edge("a", "e", latency=2.5, bandwidth=10.0)  # direct: more latency
    net = Network(G)
    rt = net.route("a", "e")
    assert [net.nodes[i] for i in rt.nodes] == ["a", "b", "e"] and rt.latency == 2.0
    G.add_edge("c", "e", latency=1.5, bandwidth=10.0)  # a-c-e: 2.0 in 2 hops, c after b
    net = Network(G)
    assert [net.nodes[i] for i in net.route("a", "e").nodes] == ["a", "b", "e"]
    assert net.route("a", "a").resources == () and net.route("a", "a").latency == 0.0


def test_route_resources_include_nics_and_directions():
    """A route crosses the source's egress, each link's direction, the destination's ingress."""
    G = star(3, lat=0.25, bw=50.0)
    G.nodes[0]["egress"] = 7.0
    G.nodes[2]["nic"] = 9.0
    net = Network(G)
    names = [net.resource_names[r] for r in net.route(0, 2).resources]
    assert names == ["egress:0", "0->s", "s->2", "ingress:2"]
    assert net.route(0, 2).latency == 0.5
    shared = Network(star(2, bw=50.0, sharing="shared"))
    assert [shared.resource_names[r] for r in shared.route(1, 0).resources] == ["1-s", "0-s"]


# ----------------------------------------------------------------------------- exact references


@pytest.mark.parametrize("k", [1, 2, 5])
def test_k_equal_flows_on_one_link_finish_at_latency_plus_k_s_over_b(k):
    """k equal flows on one link finish at latency + k S / B (a link each would give S / B)."""
    net = NetworkValue((LinkValue("a", "b", bandwidth=8.0, latency=0.75),))
    res = simulate_flows(net, [("a", "b", 12.0, 0.0)] * k)
    want = exact.equal_flows_finish(k, 12.0, 8.0, 0.75)
    assert all(close(t, want) for t in res.finish)
    if k > 1:
        assert not close(res.finish[0], 0.75 + 12.0 / 8.0)  # the no-sharing law fails


def test_dumbbell_rates_match_closed_form_and_flows_sized_by_them_finish_together():
    """Dumbbell: solver rates equal the closed form; flows sized rate * D all end at lat + D."""
    access = [3.0, 7.0, 20.0, 50.0, math.inf]
    C = 40.0
    want = exact.dumbbell_rates(access, C)
    G = nx.Graph()
    for i, a in enumerate(access):
        G.add_edge(f"h{i}", "L", bandwidth=a, latency=0.1)
        G.add_edge("R", f"d{i}", latency=0.1)
    G.add_edge("L", "R", bandwidth=C, latency=0.3)
    net = Network(G)
    routes = [net.route(f"h{i}", f"d{i}").resources for i in range(len(access))]
    got = maxmin_rates(routes, net.capacity)
    assert np.allclose(got, want, rtol=1e-12)
    assert abs(sum(want) - C) < 1e-12 and want[0] == 3.0 and want[1] == 7.0
    D = 2.5
    res = simulate_flows(net, [(f"h{i}", f"d{i}", want[i] * D, 0.0) for i in range(len(access))])
    assert all(close(t, 0.5 + D) for t in res.finish)
    equal = simulate_flows(net, [(f"h{i}", f"d{i}", C / 5 * D, 0.0) for i in range(5)])
    assert not all(close(t, 0.5 + D) for t in equal.finish)  # equal shares are not max-min


def test_parking_lot_rates_match_closed_form():
    """Parking lot: the long flow gets min C_j/(n_j+1), the short flows what each link leaves."""
    C = [30.0, 12.0, 50.0, 20.0]
    n = [1, 2, 0, 3]
    long, short = exact.parking_lot_rates(C, n)
    G = nx.path_graph(5)
    for j, c in enumerate(C):
        G.edges[j, j + 1].update(bandwidth=c, latency=0.2)
    net = Network(G)
    routes = [net.route(0, 4).resources]
    idx = []
    for j, k in enumerate(n):
        for _ in range(k):
            routes.append(net.route(j, j + 1).resources)
            idx.append(j)
    rates = maxmin_rates(routes, net.capacity)
    assert close(rates[0], long) and long == 4.0
    for r, j in zip(rates[1:], idx, strict=True):
        assert close(r, short[j])
    D = 3.0  # sized by the rates and moving together from 0.8: all end at 0.8 + D
    flows = [(0, 4, long * D, 0.0)] + [(j, j + 1, short[j] * D, 0.6) for j in idx]
    res = simulate_flows(net, flows)
    assert all(close(t, 0.8 + D) for t in res.finish)


@pytest.mark.parametrize("k,t,nb", [(2, 1, 1), (4, 1, 1), (4, 2, 1), (5, 4, 3), (3, 8, 2)])
def test_ring_allreduce_matches_closed_form_with_ranks_sharing_the_nic(k, t, nb):
    """Ring all-reduce of S per rank: 2(k-1)(n_b l + t S/(k B)); t ranks on one NIC are t x slower."""
    B, lat, S = 10.0, 0.05, 60.0
    env = simpy.Environment()
    svc = NetworkService(env, star(k, lat=lat / 2, nic=B))
    ev = ring_allreduce(svc, list(range(k)), S, ranks=t, bucket_size=S / nb)
    env.run(ev)
    want = exact.ring_allreduce_time(k, S, B, lat, ranks_per_nic=t, buckets=nb)
    assert close(env.now, want)
    if t > 1:  # a NIC per rank (no sharing) would be t times faster in the bandwidth term
        assert not close(env.now, exact.ring_allreduce_time(k, S, B, lat, buckets=nb))
    assert close(want, 2 * (k - 1) * (nb * lat + t * S / (k * B)))


def test_ring_allreduce_rings_and_buckets_are_flows():
    """One bucket is 2(k-1) steps of k flows per rank; buckets cut the size, the last one short."""
    assert bucket_sizes(10.0, 4.0) == [4.0, 4.0, 2.0]
    assert bucket_sizes(10.0, math.inf) == [10.0] and bucket_sizes(0.0, 1.0) == []
    env = simpy.Environment()
    svc = NetworkService(env, star(3, nic=5.0))
    env.run(ring_allreduce(svc, [0, 1, 2], 10.0, ranks=2, bucket_size=4.0))
    assert svc.transfers == 2 * 3 * (2 * 2) * 3  # ranks * buckets * steps * participants


@pytest.mark.parametrize("m", [1, 3, 6])
def test_star_exchanges_with_the_hub_share_its_nic(m):
    """m exchanges with a star's hub (a flow each way) end at l + m S / B_hub."""
    B, S, lat = 20.0, 30.0, 0.4
    G = nx.star_graph(m)  # hub 0, leaves 1..m
    for u, v in G.edges:
        G.edges[u, v].update(latency=lat, bandwidth=math.inf)
    G.nodes[0]["nic"] = B
    flows = [f for leaf in range(1, m + 1) for f in ((0, leaf, S, 0.0), (leaf, 0, S, 0.0))]
    res = simulate_flows(G, flows)
    want = exact.star_exchange_time(m, S, B, lat)
    assert all(close(t, want) for t in res.finish)
    if m > 1:
        assert not close(res.finish[0], lat + S / B)


# ----------------------------------------------------------------------------- sharing rules


def test_shared_link_halves_opposite_flows_split_link_does_not():
    """Opposite flows share a 'shared' link's one capacity; a 'split' link gives each its own."""
    for sharing, want in (("shared", 0.5 + 2 * 10 / 5), ("split", 0.5 + 10 / 5)):
        G = nx.Graph()
        G.add_edge("a", "b", bandwidth=5.0, latency=0.5, sharing=sharing)
        res = simulate_flows(G, [("a", "b", 10.0, 0.0), ("b", "a", 10.0, 0.0)])
        assert all(close(t, want) for t in res.finish)


def test_nic_shared_and_split():
    """A node's NIC limits everything leaving/entering it; nic_sharing=shared puts both on one."""
    G = star(3)
    G.nodes[0]["nic"] = 4.0
    flows = [(0, 1, 8.0, 0.0), (2, 0, 8.0, 0.0)]
    assert all(close(t, 2.0) for t in simulate_flows(G, flows).finish)
    G.nodes[0]["nic_sharing"] = "shared"
    assert all(close(t, 4.0) for t in simulate_flows(G, flows).finish)
    net = build_network(star(3, bw=math.inf), nic=2.0)
    assert close(simulate_flows(net, [(0, 1, 4.0, 0.0)]).finish[0], 2.0)


def test_latency_phase_takes_no_bandwidth_and_zero_size_finishes_after_latency():
    """A flow in its latency phase leaves the link to others; size 0 ends after the latency."""
    G = nx.Graph()
    G.add_edge("a", "m", bandwidth=10.0, latency=0.0)
    G.add_edge("m", "b", latency=3.0)
    G.add_edge("m", "c", latency=0.0)
    res = simulate_flows(G, [("a", "c", 20.0, 0.0), ("a", "b", 10.0, 0.0), ("a", "b", 0.0, 1.0)])
    # the a->b flow waits 3: a->c runs alone at 10 for 2 units and is done before
    assert close(res.finish[0], 2.0) and close(res.finish[1], 4.0) and close(res.finish[2], 4.0)


def test_rtt_weighting_matches_simgrid_cm02_on_a_worked_case():
    """weighting='rtt' weights shares by 1/route latency (SimGrid CM02's values, run once)."""
    G = nx.Graph()
    G.add_edge("a", "s", bandwidth=100.0, latency=0.5, sharing="shared")
    G.add_edge("s", "b", latency=0.0)
    G.add_edge("s", "c", bandwidth=50.0, latency=0.5)
    flows = [("a", "b", 100.0, 0.0), ("a", "c", 100.0, 0.0), ("a", "b", 50.0, 1.0)]
    # SimGrid 3.32 (CM02, TCP-gamma 0, no cross-traffic) printed these finish times
    simgrid = [1.9166666666666665, 3.583333333333333, 2.4166666666666665]
    got = simulate_flows(G, flows, weighting="rtt").finish
    assert all(close(a, b) for a, b in zip(got, simgrid, strict=True))
    plain = simulate_flows(G, flows).finish
    assert close(plain[0], 2.25) and not close(plain[0], simgrid[0])


# ----------------------------------------------------------------------------- curves


def test_polylog2_curve_is_sailors_polynomial_and_table_is_log_linear():
    """polylog2 = polyval(c, log2(s / unit)) * bw_unit (Sailor's fit); table log-linear, flat ends."""
    c = (-0.0024414231124647644, 0.1408627339370467, 1.116822757126346)
    cur = BandwidthCurve.polylog2(c, size_unit=1e6, bandwidth_unit=1e9)
    for s in (1e5, 3e7, 2e9):
        assert close(cur(s), float(np.polyval(c, np.log2(s / 1e6))) * 1e9, 1e-14)
    assert parse_curve(cur.text()) == cur
    tab = BandwidthCurve.table([(1e3, 1.0), (1e5, 3.0)])
    assert tab(10.0) == 1.0 and tab(1e9) == 3.0 and close(tab(1e4), 2.0, 1e-14)
    assert parse_curve("table:1000=1/100000=3") == tab
    with pytest.raises(ConfigError, match="'curve' must be positive at every flow size"):
        BandwidthCurve.polylog2((-1.0, 0.0, 1.0))(8.0)


def test_fitted_curve_is_used_where_its_time_grows_and_at_the_nearest_end_outside():
    """A curve with a fitted range is clamped to the part of it where it is positive and
    size / bandwidth does not decrease (s0 = a root of ln2 p - p'), never refused inside it."""
    # the Sailor artifact's GH200 4-flow fit: -9.77 GB/s at 2**16 bytes, the start of its range
    c = (-0.65351182, 11.42553946, 45.25031399)
    cur = BandwidthCurve.polylog2(c, size_unit=1e6, bandwidth_unit=1e9, min_size=2**16,
                                  max_size=2**30)
    assert float(np.polyval(c, np.log2(2**16 / 1e6))) < 0
    s0 = cur.valid_min_size
    x0 = np.log2(s0 / 1e6)
    a, b, _ = c  # at s0 the time's slope in log2(size) is zero: ln2 p(x0) = p'(x0)
    assert close(np.log(2) * np.polyval(c, x0), 2 * a * x0 + b, 1e-9)
    assert 2**16 < s0 < 2**19
    assert cur(10240.0) == cur(s0) == cur(2**16) > 0  # the nearest valid end, not a refusal
    sizes = np.geomspace(1.0, 2**32, 4001)
    times = np.array([s / cur(float(s)) for s in sizes])
    assert (np.diff(times) >= 0).all()  # a larger message never arrives sooner
    assert cur(2**31) == cur(2**30) and close(cur(1e8), np.polyval(c, np.log2(100.0)) * 1e9,
                                              1e-14)
    ok = BandwidthCurve.polylog2((-0.05, 1.0, 10.0), size_unit=1e6, bandwidth_unit=1e9,
                                 min_size=2**16, max_size=2**30)
    assert ok.valid_min_size == 2**16  # a fit valid over its whole range keeps its range
    assert cur.peak_above(0.0) >= max(cur(float(s)) for s in sizes)
    with pytest.raises(ConfigError, match="'curve' must be positive, with a time"):
        BandwidthCurve.polylog2((-1.0,), min_size=1.0, max_size=2.0)  # negative everywhere
    with pytest.raises(ConfigError, match="'curve' must be positive, with a time"):
        BandwidthCurve.polylog2((1.0, 0.0, 0.0), min_size=2.0, max_size=4.0)  # time falls
    with pytest.raises(ConfigError, match="'curve' must be positive at every flow size"):
        BandwidthCurve.polylog2((1.0, -1.0), size_unit=1e6)(1e6)  # no fitted range: no clamp


def test_curve_link_is_time_shared_at_the_curve_of_each_size():
    """On a curve link a flow of size s alone moves at c(s); k equal flows at c(s)/k each."""
    cur = BandwidthCurve.table([(1.0, 2.0), (1024.0, 12.0)])
    net = NetworkValue((LinkValue("a", "b", bandwidth=cur, latency=0.25),))
    s = 32.0
    assert close(simulate_flows(net, [("a", "b", s, 0.0)]).finish[0], 0.25 + s / cur(s))
    res = simulate_flows(net, [("a", "b", s, 0.0)] * 3)
    assert all(close(t, 0.25 + 3 * s / cur(s)) for t in res.finish)
    # two sizes: each occupies r / c(s) of the link; max-min in rate gives both r = 1/(1/c1+1/c2)
    s2 = 512.0
    r = 1.0 / (1.0 / cur(s) + 1.0 / cur(s2))
    res = simulate_flows(net, [("a", "b", s, 0.0), ("a", "b", s2, 0.0)])
    assert close(res.finish[0], 0.25 + s / r)
    nic = NetworkValue((LinkValue("a", "b"),), (NodeValue("a", egress=cur),))
    assert close(simulate_flows(nic, [("a", "b", s, 0.0)]).finish[0], s / cur(s))


# ----------------------------------------------------------------------------- solvers


@pytest.mark.parametrize("seed", range(3))
def test_incremental_and_full_resolve_agree_on_random_trees(seed):
    """The component-only re-solve equals the full re-solve (other algorithm) to 1e-9."""
    rng = np.random.default_rng(seed)
    G = random_tree(rng, 12)
    flows = random_flows(rng, list(G.nodes), 25)
    for weighting in ("maxmin", "rtt"):
        a = simulate_flows(G, flows, weighting=weighting).finish
        b = simulate_flows(G, flows, weighting=weighting, incremental=False).finish
        assert np.allclose(a, b, rtol=REL, atol=0)


def _engines():
    from sim.network.kernel import HAVE_NUMBA, CompiledFlowEngine

    return [FlowEngine, CompiledFlowEngine] if HAVE_NUMBA else [FlowEngine]


@pytest.mark.parametrize("seed", range(4))
def test_shares_after_every_event_equal_a_full_progressive_filling(seed):
    """Random arrivals and departures (finishes and cancels) on random trees with NICs, curve
    links, both weightings: after every event the incremental shares equal a from-scratch
    progressive filling of the flows moving then (maxmin_rates), to 1e-12 relative."""
    rng = np.random.default_rng(700 + seed)
    G = random_tree(rng, int(rng.integers(5, 16)))
    u, v = next(iter(G.edges))
    G.edges[u, v]["bandwidth_curve"] = BandwidthCurve.table([(1.0, 5.0), (60.0, 40.0)])
    del G.edges[u, v]["bandwidth"]
    net = build_network(G)
    nodes = list(G.nodes)
    for weighting in ("maxmin", "rtt"):
        for cls in _engines():
            eng = cls(net, weighting=weighting)
            flows: list[tuple] = []
            t, checked = 0.0, 0
            for _ in range(150):
                r = rng.random()
                if r < 0.45:
                    a, b = rng.choice(len(nodes), 2, replace=False)
                    size = float(rng.uniform(1, 60))
                    flows.append((nodes[a], nodes[b], size))
                    eng.add(nodes[a], nodes[b], size, t)
                elif r < 0.55 and flows:
                    eng.cancel(int(rng.integers(len(flows))))
                else:
                    t = min(eng.next_time(), t + float(rng.exponential(0.5)))
                    eng.advance(t)
                got = eng.rates()
                if not got:
                    continue
                moving = sorted(got)
                routes, coefs, weights = [], [], []
                for f in moving:
                    s, d, size = flows[f]
                    rt = net.route(s, d)
                    routes.append(rt.resources)
                    coefs.append([1.0 if net.curve[x] is None else 1.0 / net.curve[x](size)
                                  for x in rt.resources])
                    weights.append(rt.latency if weighting == "rtt" and rt.latency > 0 else 1.0)
                want = maxmin_rates(routes, net.capacity, coefficients=coefs, weights=weights)
                np.testing.assert_allclose([got[f] for f in moving], want, rtol=1e-12, atol=0)
                checked += 1
            assert checked > 50


def _independent_maxmin_sim(G: nx.Graph, flows) -> list[float]:
    """A plain max-min event simulation written here (networkx paths, dict filling)."""

    def key(u, v, data):
        return (u, v) if data.get("sharing", "split") == "split" else frozenset((u, v))
    cap = {}
    routes = []
    for s, d, size, start in flows:
        path = nx.shortest_path(G, s, d)  # a tree: the one path
        lat = 0.0
        rr = []
        for u, v in zip(path, path[1:], strict=False):
            data = G.edges[u, v]
            lat += data["latency"]
            if data["bandwidth"] < math.inf:
                rr.append(key(u, v, data))
                cap[key(u, v, data)] = data["bandwidth"]
        for node, attr, rkey in ((s, "egress", ("out", s)), (d, "ingress", ("in", d))):
            if attr in G.nodes[node]:
                rr.append(rkey)
                cap[rkey] = G.nodes[node][attr]
        routes.append((rr, start + lat, size))
    t = 0.0
    rem = [size for _, _, size in routes]
    done = [math.nan] * len(routes)
    while any(math.isnan(x) for x in done):
        act = [i for i, (_, t0, _) in enumerate(routes) if t0 <= t + 1e-15 and math.isnan(done[i])]
        for i in act:
            if not routes[i][0] or rem[i] == 0:
                done[i] = max(t, routes[i][1])
        act = [i for i in act if math.isnan(done[i])]
        rate = {}
        left = dict(cap)
        free = set(act)
        while free:
            lv = {r: left[r] / sum(1 for i in free if r in routes[i][0])
                  for r in left if any(r in routes[i][0] for i in free)}
            r0 = min(lv, key=lv.get)
            for i in [i for i in free if r0 in routes[i][0]]:
                rate[i] = lv[r0]
                free.discard(i)
                for r in routes[i][0]:
                    left[r] -= lv[r0]
            del left[r0]
        nxt = min([routes[i][1] for i, d in enumerate(done) if math.isnan(d) and routes[i][1] > t]
                  + [t + rem[i] / rate[i] for i in act], default=math.inf)
        for i in act:
            rem[i] -= rate[i] * (nxt - t)
            if rem[i] <= 1e-9 * routes[i][2]:
                done[i] = nxt
        t = nxt
    return done


@pytest.mark.parametrize("seed", range(3))
def test_matches_an_independent_event_simulation_on_random_trees_with_mixed_latencies(seed):
    """dtsim equals a max-min event simulation written in this test (mixed latencies)."""
    rng = np.random.default_rng(100 + seed)
    G = random_tree(rng, 9)
    flows = random_flows(rng, list(G.nodes), 15)
    got = simulate_flows(G, flows).finish
    want = _independent_maxmin_sim(G, flows)
    assert np.allclose(got, want, rtol=1e-8, atol=0)


def test_remaining_sizes_do_not_drift_over_many_flows():
    """400 staggered flows on one link: each finishes at its exact processor-sharing time."""
    rng = np.random.default_rng(5)
    n = 400
    sizes = rng.uniform(1, 10, n)
    starts = np.sort(rng.uniform(0, 600, n))  # load 0.52: about one flow at a time
    net = NetworkValue((LinkValue("a", "b", bandwidth=7.0),))
    got = simulate_flows(net, [("a", "b", s, t) for s, t in zip(sizes, starts, strict=True)]).finish
    # processor sharing on one server, by exact event stepping in fractions-free form
    t, active, want, k = 0.0, {}, np.empty(n), 0
    while k < n or active:
        nxt_arr = starts[k] if k < n else math.inf
        if active:
            f = min(active, key=active.get)
            dt = active[f] * len(active) / 7.0
        else:
            dt = math.inf
        if nxt_arr - t < dt:
            for g in active:
                active[g] -= (nxt_arr - t) * 7.0 / len(active)
            t = nxt_arr
            active[k] = sizes[k]
            k += 1
        else:
            t += dt
            gone = active.pop(f)
            for g in active:
                active[g] -= gone
            want[f] = t
    assert np.allclose(got, want, rtol=1e-9, atol=0)


# ----------------------------------------------------------------------------- SimPy service


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_service_equals_batch_on_random_flows(engine):
    """Transfers asked from SimPy processes finish when the batch interface says (either
    flow engine)."""
    from sim.network.kernel import HAVE_NUMBA

    if engine == "compiled" and not HAVE_NUMBA:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(11)
    G = random_tree(rng, 10)
    flows = sorted(random_flows(rng, list(G.nodes), 30), key=lambda f: f[3])
    want = simulate_flows(G, flows).finish
    env = simpy.Environment()
    svc = NetworkService(env, G, engine=engine)
    assert type(svc.engine).__name__ == ("FlowEngine" if engine == "python"
                                         else "CompiledFlowEngine")
    got = {}

    def one(i, s, d, size, start):
        yield env.timeout(start)
        t = yield svc.transfer(s, d, size)
        got[i] = (t, env.now)

    for i, f in enumerate(flows):
        env.process(one(i, *f))
    env.run()
    for i, w in enumerate(want):
        assert close(got[i][0], w) and close(got[i][1], w)


def test_service_cancel_returns_the_share():
    """A cancelled transfer never fires and its share goes back to the others at once."""
    env = simpy.Environment()
    svc = NetworkService(env, NetworkValue((LinkValue("a", "b", bandwidth=10.0),)))
    a = svc.transfer("a", "b", 20.0)
    b = svc.transfer("a", "b", 20.0)

    def stop():
        yield env.timeout(1.0)
        svc.cancel(b)

    env.process(stop())
    env.run()
    assert a.triggered and not b.triggered and close(a.value, 2.5)


def test_engine_refuses_bad_flows_in_one_line():
    """Unknown nodes, no route, negative sizes: one ConfigError line naming the parameter."""
    G = nx.Graph()
    G.add_edge("a", "b", bandwidth=1.0)
    eng = FlowEngine(Network(G))
    with pytest.raises(ConfigError, match="'src' must be a node of the network"):
        eng.add("nope", "a", 1.0)
    with pytest.raises(ConfigError, match="'size' must be >= 0"):
        eng.add("a", "b", -1.0)
    with pytest.raises(ConfigError, match="'topology' must be a connected graph"):
        Network(nx.union(G, nx.Graph([("x", "y")])))  # no route between the parts
    with pytest.raises(ConfigError, match="'topology' must be a graph whose edge sharing"):
        Network(nx.Graph([("a", "b", {"sharing": "half"})]))
    with pytest.raises(ConfigError, match="'nic' must be > 0"):
        Network(nx.Graph([("a", "b")]), nic=-1.0)
    with pytest.raises(ConfigError, match="'nic' must be a curve 'polylog2:"):
        Network(nx.Graph([("a", "b")]), nic="fast")
    bad = nx.Graph([("a", "b")])
    bad.nodes["a"]["egress"] = 0.0
    with pytest.raises(ConfigError, match="'topology' must be a graph whose node egress values are"
                                          r" > 0 \(node 'a' has 0.0\)"):
        Network(bad)


def test_network_value_round_trip_and_tree_family():
    """A built network's value builds the same network; tree:... has shared uplinks."""
    G = topologies.build("tree:racks=3,hosts=2,host_latency=0.1,uplink_latency=1")
    assert G.number_of_nodes() == 3 * 2 + 3 + 1
    net = build_network(G, nic=50.0)
    again = build_network(net.value())
    assert again.value() == net.value()
    rt = net.route(0, 5)
    assert close(rt.latency, 2.2) and len(rt.resources) == 6  # egress, 4 links, ingress
    flows = [(0, 4, 10.0, 0.0), (1, 5, 10.0, 0.0)]
    assert np.allclose(simulate_flows(net, flows).finish, simulate_flows(again, flows).finish)


def test_tree_routes_by_common_ancestor_equal_dijkstra():
    """On a tree the route by lowest common ancestor is Dijkstra's (nodes, resources, latency)."""
    rng = np.random.default_rng(8)
    T = nx.random_labeled_tree(25, seed=8)
    for u, v in T.edges:
        T.edges[u, v].update(latency=float(rng.uniform(0, 1)), bandwidth=5.0)
    fast, slow = Network(T), Network(T)
    assert fast._parent is not None
    slow._parent = None  # force Dijkstra
    for a in range(25):
        for b in range(25):
            r1, r2 = fast.route(a, b), slow.route(a, b)
            assert (r1.nodes, r1.resources, r1.latency) == (r2.nodes, r2.resources, r2.latency)


def test_reverse_bandwidth_gives_each_direction_its_capacity():
    """A split link with reverse_bandwidth: u->v at bandwidth, v->u at reverse (curves too)."""
    v = NetworkValue((LinkValue("a", "b", bandwidth=10.0, reverse_bandwidth=2.0),))
    assert simulate_flows(v, [("a", "b", 10.0, 0.0), ("b", "a", 10.0, 0.0)]).finish.tolist() \
        == [1.0, 5.0]
    assert build_network(v).value() == v
    cur = BandwidthCurve.table([(1.0, 1.0), (100.0, 5.0)])
    w = NetworkValue((LinkValue("a", "b", bandwidth=cur, reverse_bandwidth=3.0),))
    assert simulate_flows(w, [("a", "b", 100.0, 0.0), ("b", "a", 9.0, 0.0)]).finish.tolist() \
        == [20.0, 3.0]
    with pytest.raises(ConfigError, match="'reverse_bandwidth' must be unset on a shared link"):
        LinkValue("a", "b", sharing="shared", reverse_bandwidth=1.0)


def test_direct_edge_shortcut_equals_dijkstra():
    """A direct edge of at most twice the least latency is the route Dijkstra finds too."""
    rng = np.random.default_rng(12)
    G = nx.gnp_random_graph(14, 0.6, seed=12)
    for u, v in G.edges:
        G.edges[u, v].update(latency=float(rng.choice([0.5, 0.7, 1.0, 1.5])), bandwidth=5.0)
    fast = Network(G)
    slow = Network(G)
    slow._min_latency = -1.0  # no shortcut
    slow._parent = None
    for a in range(14):
        for b in range(14):
            r1, r2 = fast.route(a, b), slow.route(a, b)
            assert (r1.nodes, r1.resources, r1.latency) == (r2.nodes, r2.resources, r2.latency)


def test_ring_steps_time_times_equal_buckets_once():
    # Each full bucket of a bucketed ring all-reduce takes the same step time: timed once,
    # added one by one up to 2^20 buckets (the order the ring runs them), one product beyond
    # (a tied vocabulary of 1e15 once stalled `dtsim plan`: 1e8 buckets summed in Python).
    calls = []

    def tau(chunk):
        calls.append(chunk)
        return 1e-3 + chunk / 1e9

    k = 4
    small = exact.ring_steps_time(k, 10.5 * 8.0, 8.0, tau)
    assert len(calls) == 2
    assert math.isclose(small, 2 * (k - 1) * (10 * tau(2.0) + tau(1.0)), rel_tol=1e-14)
    calls.clear()
    q = 3 * (1 << 20)
    big = exact.ring_steps_time(k, q * 8.0 + 4.0, 8.0, tau)
    assert len(calls) == 2  # one full bucket, the remainder: not one call a bucket
    assert math.isclose(big, 2 * (k - 1) * (q * tau(2.0) + tau(1.0)), rel_tol=1e-12)


@pytest.mark.parametrize("size, bucket, buckets", [(1.0, 0.1, 10), (0.7, 0.1, 7), (2.2, 0.2, 11),
                                                   (0.3, 0.1, 3), (84.0, 8.0, 11),
                                                   (10.0, math.inf, 1), (1e-300, 1e300, 1)])
def test_ring_steps_time_takes_the_buckets_the_ring_cuts(size, bucket, buckets):
    """(review10) ``ring_steps_time`` pays the buckets :func:`bucket_sizes` cuts (the
    network's rings'): ceil(S / b), the last one the remainder. It subtracted a bucket at a
    time while something was left, and 1.0 - 10 x 0.1 leaves 1.4e-16: an eleventh bucket of
    no size, its 2 (k - 1) steps paid (a step of 1: 22 for 20; 0.7 in 0.1: 8 for 7; 2.2 in
    0.2: 12 for 11)."""
    from sim.network.collectives import bucket_sizes

    assert len(bucket_sizes(size, bucket)) == buckets
    assert exact.ring_steps_time(2, size, bucket, lambda chunk: 1.0) == 2 * buckets
