"""Smoke and unit tests of the gossip stress-test experiments (issue 8, experiments 7-10)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from sim import analytic
from sim.errors import ConfigError
from sim.runner import load_experiment, run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _run_quick(name, tmp_path, capsys):
    exp = load_experiment(EXPERIMENTS / f"{name}.py", quick=True)
    res = run_experiment(exp, out=tmp_path / name, executor="serial", progress=False)
    assert res.errors == 0
    return exp, res, tmp_path / name, capsys.readouterr().out


def _run_quick_without_figures(name, tmp_path, keep=None):
    """The --quick sweep without the analysis step (no figures, tables or printed finding);
    ``keep`` selects the points to run."""
    exp = load_experiment(EXPERIMENTS / f"{name}.py", quick=True)
    points = exp.points if keep is None else [p for p in exp.points if keep(p)]
    res = run_experiment(dataclasses.replace(exp, analyse=None, points=points), out=tmp_path / name,
                         executor="serial", progress=False)
    assert res.errors == 0
    return exp, res


# ----------------------------------------------------------------------------- 7 sparse graphs


def _check_sparse_rows(rows):
    complete = [r for r in rows if r["family"] == "complete"]
    for r in complete:
        assert r["rounds_spectral"] == pytest.approx(r["rounds_exact"], rel=0.02)
        assert 20 < r["rounds_sim"] < 32
    ring = [r for r in rows if r["family"] == "ring"]
    assert all(r["spectral_over_exact"] > 2.0 for r in ring)


def test_sparse_graphs_quick_matches_exact(tmp_path):
    """sparse_graphs --quick, its complete-graph and ring points (sweep only): the complete graph
    needs about 25 rounds, the ring's spectral prediction is more than twice the exact one."""
    exp, res = _run_quick_without_figures("sparse_graphs", tmp_path,
                                          keep=lambda p: p["family"] in ("complete", "ring"))
    assert {r["family"] for r in exp.module.point_table(res)} == {"complete", "ring"}
    _check_sparse_rows(exp.module.point_table(res))


@pytest.mark.slow  # the sweep and its checks stay in the default suite (above)
def test_sparse_graphs_quick_writes_figures_table_and_matches_exact(tmp_path, capsys):
    """sparse_graphs --quick writes its figures and table; the complete graph needs about 25 rounds."""
    exp, res, out, printed = _run_quick("sparse_graphs", tmp_path, capsys)
    for f in ("rounds.png", "decay.png", "rounds.csv", "rounds.md"):
        assert (out / f).exists(), f
    assert "rounds of n/2 edge steps to reduce E[D] by 1e6" in printed
    _check_sparse_rows(exp.module.point_table(res))


def test_exact_transitive_matches_the_general_recursion():
    """The eigenvalue recursion on edge-transitive graphs equals analytic.edge_gossip_disagreement."""
    import topologies

    mod = load_experiment(EXPERIMENTS / "sparse_graphs.py").module
    for spec, n in (("ring", 12), ("torus", 16), ("hypercube", 16)):
        G = nx.Graph(topologies.build(spec, nodes=n))
        ref = analytic.edge_gossip_disagreement(G, 600, record_every=30) / (n - 1)
        got = mod.exact_transitive(G, np.arange(0, 601, 30))
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_crossing_interpolates_on_the_log_scale():
    """crossing() finds 1e-6 between records on a log-linear decay and is nan when never reached."""
    mod = load_experiment(EXPERIMENTS / "sparse_graphs.py").module
    x = np.arange(0, 11, 2.0)
    y = 10.0 ** (-x)
    assert mod.crossing(x, y, 1e-5) == pytest.approx(5.0)
    assert math.isnan(mod.crossing(x, y, 1e-30))


def test_sparse_config_rejects_a_torus_that_is_not_square():
    """SparseConfig validates the node count of square families with the house message."""
    mod = load_experiment(EXPERIMENTS / "sparse_graphs.py").module
    with pytest.raises(ConfigError) as e:
        mod.SparseConfig(family="torus", nodes=20)
    assert str(e.value) == "'nodes' must be a square >= 9 for family torus: 20"


# ----------------------------------------------------------------------------- 8 async latency


def _check_async_rows(rows):
    inst = rows["async, wake 0.01/ms (instant)"]
    assert inst["t_sim_ms"] == pytest.approx(inst["t_closed_form_ms"], rel=0.15)
    geo = rows["async, wake 0.01/ms (geo latencies)"]
    assert geo["t_sim_ms"] > 1.3 * geo["t_closed_form_ms"]
    sync = rows["sync matchings (geo latencies)"]
    assert 150 < sync["round_ms"] <= 200


def test_async_latency_quick_sweep_matches_the_closed_form(tmp_path):
    """async_latency --quick (sweep only): instant async matches exp(-n lambda t/(n-1)); geo
    latencies are slower."""
    exp, res = _run_quick_without_figures("async_latency", tmp_path)
    _check_async_rows({r["variant"]: r for r in exp.module.table(res)})


@pytest.mark.slow  # the sweep and its checks stay in the default suite (above)
def test_async_latency_quick_instant_exchanges_match_the_closed_form(tmp_path, capsys):
    """async_latency --quick: instant async matches exp(-n lambda t/(n-1)); geo latencies are slower."""
    exp, res, out, printed = _run_quick("async_latency", tmp_path, capsys)
    for f in ("wallclock.png", "time_to_1e6.png", "async.csv", "async.md"):
        assert (out / f).exists(), f
    _check_async_rows({r["variant"]: r for r in exp.module.table(res)})
    assert "time to cut E[D] by 1e6" in printed


# ----------------------------------------------------------------------------- 9 stronger adversaries


def _check_stronger_tables(creep, attacks):
    for r in creep:
        assert abs(r["creep_per_step"] - r["degree_weighted"]) < 4 * r["creep_se"], r
        if r["graph"] == "complete":
            assert abs(r["creep_per_step"] - r["k_tau_over_n_n1"]) < 4 * r["creep_se"], r
        else:
            assert r["sim_over_k_bound"] > 1.5, r
    for r in attacks:
        if r["defence"] == "clip":
            assert r["drift_within_bound"], r


def test_stronger_adversaries_quick_sweep_creep_generalises_on_the_complete_graph_only(tmp_path):
    """stronger_adversaries --quick (sweep only): k tau/(n(n-1)) holds on the complete graph, not
    with attackers on hubs."""
    exp, res = _run_quick_without_figures("stronger_adversaries", tmp_path)
    _check_stronger_tables(*exp.module.tables(res))


@pytest.mark.slow  # the sweep and its checks stay in the default suite (above)
def test_stronger_adversaries_quick_creep_generalises_on_the_complete_graph_only(tmp_path, capsys):
    """stronger_adversaries --quick: k tau/(n(n-1)) holds on the complete graph, not with attackers on hubs."""
    exp, res, out, printed = _run_quick("stronger_adversaries", tmp_path, capsys)
    for f in ("creep.png", "attacks.png", "creep.csv", "attacks.csv", "creep.md", "attacks.md"):
        assert (out / f).exists(), f
    _check_stronger_tables(*exp.module.tables(res))


def test_degree_weighted_creep_reduces_to_k_tau_on_the_complete_graph():
    """(sum_a h_a / m) tau / (2h) equals k tau / (n (n-1)) on the complete graph."""
    from dataclasses import replace

    mod = load_experiment(EXPERIMENTS / "stronger_adversaries.py").module
    cfg = replace(mod.BASE, adversary="stubborn", num_adversaries=3, clip=0.4)
    assert mod.creep_degree_weighted(cfg) == pytest.approx(mod.creep_k(cfg.n, 3, 0.4))


# ----------------------------------------------------------------------------- 10 churn


def _check_churn_rows(rows):
    fast = next(r for r in rows if r["availability"] == 0.5 and r["mean_downtime"] == 0.02)
    slow = next(r for r in rows if r["availability"] == 0.5 and r["mean_downtime"] == 20.0)
    assert fast["rate"] == pytest.approx(fast["rate_closed_form"], rel=0.2)
    assert slow["rate_high"] < 0.6 * slow["rate_closed_form"]


def test_churn_quick_sweep_fast_churn_keeps_the_closed_forms_slow_churn_breaks_them(tmp_path):
    """churn --quick (sweep only): 0.02-unit downtimes keep the online-pair rate; 20-unit
    downtimes stall contraction."""
    exp, res = _run_quick_without_figures("churn", tmp_path)
    _check_churn_rows(exp.module.table(res))


@pytest.mark.slow  # the sweep and its checks stay in the default suite (above)
def test_churn_quick_fast_churn_keeps_the_closed_forms_slow_churn_breaks_them(tmp_path, capsys):
    """churn --quick: 0.02-unit downtimes keep the online-pair rate; 20-unit downtimes stall contraction."""
    exp, res, out, printed = _run_quick("churn", tmp_path, capsys)
    for f in ("churn.png", "churn.csv", "churn.md"):
        assert (out / f).exists(), f
    _check_churn_rows(exp.module.table(res))
    assert "contraction rate and noise floor vs availability" in printed


def test_churn_closed_forms():
    """The async noise floor and online-pair contraction rate have their stated values."""
    mod = load_experiment(EXPERIMENTS / "churn.py").module
    assert mod.async_noise_floor(32, 1.0) == pytest.approx(31 * 30 / 64)
    assert mod.contraction_rate(32, 1.0, 1.0) == pytest.approx(32 / 31)
    assert mod.contraction_rate(2, 0.5, 1.0) == pytest.approx(2 * 0.5 * 0.5)


def test_churn_config_rejects_a_burn_in_past_the_horizon():
    """ChurnConfig checks burn_in against floor_horizon with the house message."""
    mod = load_experiment(EXPERIMENTS / "churn.py").module
    with pytest.raises(ConfigError) as e:
        mod.ChurnConfig(floor_horizon=10, burn_in=10)
    assert str(e.value).startswith("'burn_in' must be")
