"""Smoke and unit tests of the pipeline stress-test experiments (issue 8, experiments 1-6).

The --quick runs are end-to-end re-runs (3-5 s each): one (heavy_tailed_repairs, the
cheapest) stays in the default suite, the others are slow; every experiment's helpers keep
their unit tests in the default suite.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from sim import analytic
from sim.errors import ConfigError
from sim.runner import load_experiment, run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _module(name):
    return load_experiment(EXPERIMENTS / f"{name}.py").module


def _run_quick(name, tmp_path, capsys):
    exp = load_experiment(EXPERIMENTS / f"{name}.py", quick=True)
    res = run_experiment(exp, out=tmp_path / name, executor="serial", progress=False)
    assert res.errors == 0
    return exp, res, tmp_path / name, capsys.readouterr().out


# ----------------------------------------------------------------------------- 1 correlated placement


@pytest.mark.slow  # an end-to-end --quick run; test_heavy_tailed_repairs_quick_... keeps one in default
def test_correlated_placement_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """correlated_placement --quick writes its figure and table; the binomial law misses shared tails."""
    exp, res, out, printed = _run_quick("correlated_placement", tmp_path, capsys)
    for f in ("placement.png", "placement.csv", "placement.md"):
        assert (out / f).exists(), f
    rows = exp.module.table(res)
    assert {r["policy"] for r in rows} == {"shared", "spread", "packed"}
    shared3 = next(r for r in rows if r["policy"] == "shared" and r["skip_budget"] == 3)
    assert shared3["exact_over_binomial"] > 100
    assert shared3["drop_low"] > shared3["binomial"]
    assert "the binomial law says s=2 meets 1%" in printed


def test_placement_laws_agree_without_shared_domains():
    """With no region or rack outages the exact law of out stages is the binomial law."""
    mod = _module("correlated_placement")
    cfg = replace(mod.BASE, region_outage=0.0, rack_outage=0.0, policy="packed")
    exact, indep = mod.out_stage_laws(cfg)
    q = (1 - cfg.availability) ** cfg.replicas
    np.testing.assert_allclose(exact, indep, atol=1e-14)
    np.testing.assert_allclose(exact, stats.binom.pmf(np.arange(cfg.stages + 1), cfg.stages, q),
                               atol=1e-14)


def test_placement_config_rejects_an_unknown_policy():
    """PlacementConfig names the bad policy with the house message."""
    mod = _module("correlated_placement")
    with pytest.raises(ConfigError) as e:
        mod.PlacementConfig(policy="random")
    assert str(e.value) == "'policy' must be one of shared, spread, packed: 'random'"


# ----------------------------------------------------------------------------- 2 time-correlated outages


@pytest.mark.slow  # an end-to-end --quick run; test_heavy_tailed_repairs_quick_... keeps one in default
def test_time_correlated_outages_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """time_correlated_outages --quick: windows and drop rates per downtime, long outages overdispersed."""
    exp, res, out, printed = _run_quick("time_correlated_outages", tmp_path, capsys)
    for f in ("windows.png", "windows.csv", "windows.md"):
        assert (out / f).exists(), f
    rows = exp.module.table(res)
    assert [r["mean_downtime"] for r in rows] == [0.3, 30.0]
    long = rows[-1]
    assert long["window_sd"] > 2 * long["window_sd_binomial"]
    assert "P(window > 2x)" in printed


def test_window_helpers():
    """window_drops counts drops per full window; the binomial window law is P(Bin(W,p) > 2pW)."""
    mod = _module("time_correlated_outages")
    delivered = np.array([True, False, False, True, True, True, False])
    assert mod.window_drops(delivered, 3).tolist() == [2, 0]
    assert mod.binomial_window_exceed(0.01, 100) == pytest.approx(stats.binom.sf(2, 100, 0.01))


# ----------------------------------------------------------------------------- 3 heavy-tailed repairs


def test_heavy_tailed_repairs_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """heavy_tailed_repairs --quick writes its figure and table and compares laws at equal means."""
    exp, res, out, printed = _run_quick("heavy_tailed_repairs", tmp_path, capsys)
    for f in ("repairs.png", "repairs.csv", "repairs.md"):
        assert (out / f).exists(), f
    rows = exp.module.table(res)
    assert [r["law"] for r in rows] == ["exponential", "lognormal s=1.5"]
    for r in rows:
        assert r["goodput_cf"] == pytest.approx(r["goodput"], rel=0.05)
    assert "P(window > 2x)" in printed


def test_coefficient_of_variation_of_the_laws():
    """The CV helper gives 1 for the exponential and the known Weibull / lognormal values."""
    mod = _module("heavy_tailed_repairs")
    assert mod.coefficient_of_variation("exponential", None) == 1.0
    assert mod.coefficient_of_variation("weibull", 1.0) == pytest.approx(1.0)
    assert mod.coefficient_of_variation("weibull", 0.5) == pytest.approx(math.sqrt(5))
    assert mod.coefficient_of_variation("lognormal", 1.5) == pytest.approx(math.sqrt(math.exp(2.25) - 1))


# ----------------------------------------------------------------------------- 4 failover cost


@pytest.mark.slow  # an end-to-end --quick run; test_heavy_tailed_repairs_quick_... keeps one in default
def test_failover_cost_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """failover_cost --quick: a long detection timeout costs goodput and raises p99 latency."""
    exp, res, out, printed = _run_quick("failover_cost", tmp_path, capsys)
    for f in ("failover.png", "failover.csv", "failover.md"):
        assert (out / f).exists(), f
    rows = {(r["detection_timeout"], r["replicas"]): r for r in exp.module.table(res)}
    fast, slow = rows[(0.0, 3)], rows[(32.0, 3)]
    assert fast["goodput_over_cf"] == pytest.approx(1.0, abs=0.03)
    assert slow["goodput_per_worker_high"] < 0.9 * slow["goodput_per_worker_cf"]
    assert slow["latency_p99"] > 2 * fast["latency_p99"]
    assert "best r for goodput per worker" in printed


def test_snapshot_goodput_is_quality_mass_over_crossing_time():
    """snapshot_goodput is Study A's quality mass over L times the stage time."""
    mod = _module("failover_cost")
    cfg = replace(mod.BASE, replicas=2)
    mass = analytic.quality_mass(16, 0.01, 16, 0.5)
    assert mod.snapshot_goodput(cfg) == pytest.approx(mass / 16.0)


# ----------------------------------------------------------------------------- 5 wait or drop


@pytest.mark.slow  # an end-to-end --quick run; test_heavy_tailed_repairs_quick_... keeps one in default
def test_wait_or_drop_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """wait_or_drop --quick: waiting lowers the drop rate below the binomial value, at a latency cost."""
    exp, res, out, printed = _run_quick("wait_or_drop", tmp_path, capsys)
    for f in ("wait.png", "wait.csv", "wait.md"):
        assert (out / f).exists(), f
    rows = {r["max_wait"]: r for r in exp.module.table(res)}
    assert rows[0.0]["latency_mean"] == 0.0
    assert rows[1.0]["drop_rate_high"] < 0.5 * rows[1.0]["drop_binomial"]
    assert rows[1.0]["latency_p99"] > 0.0
    assert "max_wait" in printed


def test_wait_approximation_limits():
    """approx_wait is the binomial law at max_wait 0 and never drops with an infinite wait."""
    mod = _module("wait_or_drop")
    cfg = mod.BASE
    drop0, lat0 = mod.approx_wait(cfg, 0.0)
    assert drop0 == pytest.approx(analytic.drop_probability(16, 2, 0, 0.9, 0.0))
    assert lat0 == 0.0
    drop_inf, lat_inf = mod.approx_wait(cfg, math.inf)
    assert drop_inf == 0.0
    q = 0.01
    mean_k = sum(k * stats.binom.pmf(k, 16, q) for k in range(17))
    assert lat_inf == pytest.approx(mean_k * 0.5)  # each wait Exp(r/mu) = Exp(2), mean 1/2


# ----------------------------------------------------------------------------- 6 skip penalty forms


@pytest.mark.slow  # an end-to-end --quick run; test_heavy_tailed_repairs_quick_... keeps one in default
def test_skip_penalty_forms_quick_writes_figure_table_and_finding(tmp_path, capsys):
    """skip_penalty_forms --quick: simulated costs near exact; threshold moves the optimum."""
    exp, res, out, printed = _run_quick("skip_penalty_forms", tmp_path, capsys)
    for f in ("penalties.png", "penalties.csv", "penalties.md"):
        assert (out / f).exists(), f
    rows = exp.module.table(res)
    assert len(rows) == 6
    for r in rows:
        assert r["cost"] == pytest.approx(r["exact_cost"], rel=0.05)
    thr = next(r for r in rows if r["form"] == "threshold" and r["kappa"] == 0.4)
    assert (thr["replicas"], thr["skip_budget"]) == (2, 1)
    assert "gain over no-skip" in printed


def test_threshold_penalty():
    """Threshold keeps full quality up to k* = floor(log 0.5 / log(1 - kappa)) skips, then 0."""
    mod = _module("skip_penalty_forms")
    t = mod.Threshold(0.1)
    assert t.max_skips == 6  # 0.9**6 = 0.531, 0.9**7 = 0.478
    assert [t(k) for k in (0, 6, 7)] == [1.0, 1.0, 0.0]
    assert mod.Threshold(0.5).max_skips == 1  # exactly at the threshold counts
    assert mod.Threshold(0.8).max_skips == 0
    o = mod.optimum("threshold", 0.8)
    assert (o.skip_budget, o.gain) == (0, 1.0)
