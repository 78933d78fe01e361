"""Tests of the gossip CLI knobs: --adversary-nodes, --init-mean and --init-std against exact references."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cli import main


def _json(capsys, *args: str) -> dict:
    assert main(["gossip", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_adversary_nodes_place_the_stubborn_node(capsys):
    """A stubborn hub and a stubborn leaf of a star pull the honest mean as the exact recursion says."""
    common = ("--adversary", "stubborn", "--topology", "star", "--nodes", "8", "--protocol", "edge",
              "--rounds", "60", "--record-every", "20", "--replications", "40", "--init-mean", "2",
              "--seed", "3")
    out = {pos: _json(capsys, "--adversary-nodes", str(pos), *common) for pos in (0, 3)}
    for pos, d in out.items():
        sim_m, se, exact = d["honest_mean"][-1], d["honest_mean_se"][-1], d["predicted_honest_mean"][-1]
        assert abs(sim_m - exact) < 4 * se, (pos, sim_m, exact, se)
    # hub and leaf differ by far more than the error: a model ignoring the position fails
    hub, leaf = out[0], out[3]
    assert abs(hub["predicted_honest_mean"][-1] - leaf["predicted_honest_mean"][-1]) > \
        8 * max(hub["honest_mean_se"][-1], leaf["honest_mean_se"][-1])
    assert abs(leaf["honest_mean"][-1] - hub["predicted_honest_mean"][-1]) > 8 * leaf["honest_mean_se"][-1]


def test_bad_adversary_nodes_is_one_line_exit_2(capsys):
    """A malformed position list is the house one-liner and exit 2."""
    assert main(["gossip", "--adversary", "stubborn", "--adversary-nodes", "x,1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim gossip: error: 'adversary_nodes' must be a comma-separated list of node positions "
        "(integers) or of the graph's node names (unknown: x): 'x,1'")


def test_adversary_nodes_take_a_graph_files_node_names(tmp_path, capsys):
    """On an edge list with named hosts, --adversary-nodes names them (it refused every name,
    asking for integers, though the file's names are how the user knows the nodes): the run is
    the one of the positions those names have, bit for bit; an unknown name is refused."""
    f = tmp_path / "lab.edges"
    f.write_text("lab-a-01 lab-a-02 200us 10Gbit/s\nlab-a-02 lab-a-03 200us 10Gbit/s\n"
                 "lab-a-03 lab-b-01 12ms 800Mbps\nlab-b-01 lab-b-02 200us 10Gbit/s\n"
                 "lab-b-02 lab-a-01 12ms 800Mbps\n")
    common = ("--topology", str(f), "--adversary", "stubborn", "--adversary-value", "5",
              "--protocol", "edge", "--rounds", "30", "--replications", "3")
    by_name = _json(capsys, "--adversary-nodes", "lab-b-01,lab-a-02", *common)
    by_pos = _json(capsys, "--adversary-nodes", "3,1", *common)
    assert by_name["honest_mean"] == by_pos["honest_mean"]
    assert by_name["disagreement"] == by_pos["disagreement"]
    assert main(["gossip", *common, "--adversary-nodes", "lab-a-02,lab-c-09"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("dtsim gossip: error: 'adversary_nodes' must be a comma-separated list of "
                       "node positions (integers) or of the graph's node names (unknown: lab-c-09):"
                       " 'lab-a-02,lab-c-09'")


def test_init_mean_and_std_set_the_start(capsys):
    """--init-mean moves the exact capture curve's start; --init-std scales E[D(0)] = (n-1) S^2."""
    d = _json(capsys, "--nodes", "10", "--protocol", "edge", "--adversary", "stubborn",
              "--adversary-value", "5", "--init-mean", "-3", "--rounds", "90", "--record-every", "30",
              "--replications", "40", "--seed", "4")
    m, se, exact = (np.asarray(d[k]) for k in ("honest_mean", "honest_mean_se", "predicted_honest_mean"))
    assert abs(exact[0] + 3) < 1e-12 and np.all(np.abs(m[1:] - exact[1:]) < 4 * se[1:] + 1e-12)
    wrong = 5 + (0 - 5) * (1 - 1 / 90) ** 90  # the same law started at the default mean 0
    assert abs(m[-1] - wrong) > 8 * se[-1]
    d = _json(capsys, "--nodes", "50", "--init-std", "3", "--rounds", "2", "--replications", "30",
              "--seed", "5")
    D0, se0, exact0 = d["disagreement"][0], d["disagreement_se"][0], d["predicted_disagreement"][0]
    assert abs(exact0 - 49 * 9) < 1e-9 and abs(D0 - exact0) < 4 * se0
    assert abs(D0 - 49) > 8 * se0  # the default spread 1 is rejected


def _laplacian_harmonic(graph, values: dict[int, float]) -> np.ndarray:
    """Solve L_HH x_H = -L_HS b_S directly (independent of sim.analytic), honest nodes in order."""
    import networkx as nx

    L = nx.laplacian_matrix(graph, nodelist=sorted(graph.nodes())).toarray().astype(float)
    S = sorted(values)
    H = [v for v in sorted(graph.nodes()) if v not in values]
    b = np.array([values[s] for s in S])
    return np.linalg.solve(L[np.ix_(H, H)], -L[np.ix_(H, S)] @ b)


def test_disagreeing_stubborn_values_give_the_harmonic_extension():
    """Each honest node's expected value tends to the harmonic extension of per-node stubborn values."""
    import sim
    from sim import analytic
    from sim.gossip import GossipSystem

    cfg = sim.GossipConfig(topology="ring:n=10", protocol="edge", rounds=400, record_every=400,
                           adversary="stubborn", adversary_nodes=(0, 3, 7),
                           stubborn_values=(0.0, 10.0, -4.0))
    harmonic = _laplacian_harmonic(cfg.network_graph, {0: 0.0, 3: 10.0, 7: -4.0})
    assert np.allclose(harmonic, analytic.harmonic_extension(cfg.network_graph, cfg.stubborn_map))
    reps = 30
    final = np.empty((reps, 7))
    streams = sim.Streams(4)
    for k in range(reps):
        system = GossipSystem(cfg, streams.replication(k))
        system.run()
        final[k] = system.x[system.hidx, 0]
        assert np.array_equal(system.x[[0, 3, 7], 0], [0.0, 10.0, -4.0])  # stubborn rows never move
    m, se = final.mean(axis=0), final.std(axis=0, ddof=1) / np.sqrt(reps)
    z = (m - harmonic) / se
    assert np.all(np.abs(z) < 4), (m, harmonic, se)
    # a wrong model -- every honest node at the stubborn values' mean -- is rejected
    assert np.max(np.abs(m - np.mean([0.0, 10.0, -4.0])) / se) > 8


def test_fractional_async_horizon_matches_the_poisson_mixture_quick():
    """500 replications: the same Poisson-mixture law at t = 0.5, ..., 2.5 and the rounded
    horizons rejected by more than 6 SE."""
    _fractional_async_horizon(500)


@pytest.mark.slow  # the 500-replication version above stays in the default suite
def test_fractional_async_horizon_matches_the_poisson_mixture():
    """Async records at t = 0.5, 1, ..., 2.5 follow E[D(t)] = E[D(0)] exp(-n w t / (n - 1)) (instant exchanges)."""
    _fractional_async_horizon(1000)


def _fractional_async_horizon(reps: int) -> None:
    import sim
    from sim.results import ratio_ci

    n, w = 10, 1.0
    cfg = sim.GossipConfig(topology="complete", nodes=n, protocol="async", rounds=2.5,
                           record_every=0.5, latency=0.0, wake_rate=w)
    assert cfg.record_steps().tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    recs = sim.replicate(sim.gossip_model, cfg, replications=reps, seed=11)
    assert np.allclose(recs[0]["time"], cfg.record_steps())
    D = np.stack([r["disagreement"] for r in recs])
    # exchanges form a Poisson(n w t) count of uniform random-edge steps, each contracting
    # E[D] by 1 / (n - 1): E[D(t)] / E[D(0)] = exp(-n w t / (n - 1))
    for j, t in enumerate(cfg.record_steps()[1:], start=1):
        e = ratio_ci(D[:, j], D[:, 0], log=False)
        assert abs(e.mean - np.exp(-n * w * t / (n - 1))) < 4 * e.se, (t, e)
    # the horizon is not rounded: the law at t = 2 (or 3) is rejected at t = 2.5
    e = ratio_ci(D[:, -1], D[:, 0], log=False)
    for wrong in (2.0, 3.0):
        assert abs(e.mean - np.exp(-n * w * wrong / (n - 1))) > 6 * e.se


def test_fractional_times_are_refused_for_rounds_protocols(capsys):
    """--rounds 2.5 or --record-every 0.5 with matching/edge is one line, exit 2."""
    assert main(["gossip", "--rounds", "2.5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim gossip: error: 'rounds' must be an integer >= 1 with protocol matching "
        "(fractional times are for protocol async): 2.5")
    assert main(["gossip", "--protocol", "edge", "--record-every", "0.5"]) == 2
    assert "'record_every' must be an integer >= 1 with protocol edge" in capsys.readouterr().err


def test_an_engine_fallback_for_a_missing_numba_is_announced_before_the_run(monkeypatch, capsys):
    """Without numba, async gossip says on stderr that SimPy runs it before any replication."""
    import sim.commands.gossip as gcmd
    import sim.gossip.compiled as gcompiled
    from sim.cli import main

    real, seen = gcmd.replicate, []

    def spy(*a, **k):  # what stderr holds when the replications start
        seen.append(capsys.readouterr().err)
        return real(*a, **k)

    monkeypatch.setattr(gcmd, "replicate", spy)
    argv = ["gossip", "--protocol", "async", "--nodes", "12", "--rounds", "1",
            "--replications", "2", "--executor", "serial", "--json"]
    assert main(argv) == 0
    assert "numba is not installed" not in seen[-1] + capsys.readouterr().err
    monkeypatch.setattr(gcompiled, "HAVE_NUMBA", False)
    assert main(argv) == 0
    assert "dtsim gossip: note: numba is not installed, so the des engine runs this" in seen[-1]
    assert "numba" not in capsys.readouterr().err  # said once, before the run


def test_switches_that_gossip_are_named_on_stderr(capsys):
    """tree:racks=2,hosts=4 has 8 hosts and 3 switches (role=switch): gossip runs on the graph
    as it is, n = 11, every switch a peer holding a value. The run goes on, with one warning
    naming them (it was silent); a graph without switches warns about nothing."""
    d = _json(capsys, "--topology", "tree:racks=2,hosts=4", "--protocol", "edge", "--rounds",
              "5", "--replications", "2")
    assert d["nodes"] == 11
    assert main(["gossip", "--topology", "tree:racks=2,hosts=4", "--protocol", "edge",
                 "--rounds", "5", "--replications", "2"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dtsim gossip: warning: 3 of the 11 nodes of tree:racks=2,hosts=4 are "
                   "switches (role=switch: rack0, rack1, core): every node of the graph "
                   "gossips, holding a value, switches too; give the graph of the peers that "
                   "gossip"]
    assert main(["gossip", "--topology", "ring", "--nodes", "11", "--protocol", "edge",
                 "--rounds", "5", "--replications", "2"]) == 0
    assert capsys.readouterr().err == ""
