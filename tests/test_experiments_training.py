"""The training experiments run --quick, write their figures and tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sim.runner import load_experiment, run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.mark.parametrize("name,files", [
    # slow: the same quick run and output check stay in the default suite with training_spot
    pytest.param("training_replicate_or_skip", ("goodput_per_worker.png", "ranking.md"),
                 marks=pytest.mark.slow),
    ("training_spot", ("samples_per_dollar.png", "interval.md")),
])
def test_quick_run_writes_figure_and_table(tmp_path, capsys, name, files):
    """Each training experiment runs in quick mode without a failed task and writes its outputs."""
    exp = load_experiment(EXPERIMENTS / f"{name}.py", quick=True)
    res = run_experiment(exp, out=tmp_path / name, executor="serial", progress=False)
    assert res.errors == 0
    for f in files:
        assert (tmp_path / name / f).exists(), f
    capsys.readouterr()


def _check_heterogeneous(res):
    rows = {(round(float(r["spread_mean"]), 3), r["routing"]): r for r in res.summary()}
    assert float(rows[(0.6, "weighted")]["fraction_of_bound_mean"]) > 0.97
    assert float(rows[(0.6, "round-robin")]["fraction_of_bound_mean"]) < 0.6


def test_heterogeneous_sweep_weighted_reaches_bound_round_robin_does_not(tmp_path):
    """training_heterogeneous --quick (sweep only, no figures): at spread 0.6, weighted routing is
    within 3% of the bound; round robin below 60%."""
    exp = load_experiment(EXPERIMENTS / "training_heterogeneous.py", quick=True)
    res = run_experiment(dataclasses.replace(exp, analyse=None), out=tmp_path / "h",
                         executor="serial", progress=False)
    assert res.errors == 0
    _check_heterogeneous(res)


@pytest.mark.slow  # the sweep and its check stay in the default suite (above)
def test_heterogeneous_weighted_reaches_bound_round_robin_does_not(tmp_path, capsys):
    """At spread 0.6, weighted routing is within 3% of the bound; round robin below 60%."""
    exp = load_experiment(EXPERIMENTS / "training_heterogeneous.py", quick=True)
    res = run_experiment(exp, out=tmp_path / "h", executor="serial", progress=False)
    for f in ("throughput_vs_spread.png", "routing.md"):
        assert (tmp_path / "h" / f).exists(), f
    _check_heterogeneous(res)
    capsys.readouterr()


def test_fault_tolerance_trace_replays_are_exact_and_mtbf_points_have_intervals(tmp_path):
    """fault_tolerance: a trace replayed once from its start is the same run in every replication,
    so its metrics are declared fixed (exact, no interval; fixed_ci raises if two replications
    ever differ), while a point under a random MTBF keeps its Student-t interval."""
    exp = load_experiment(EXPERIMENTS / "fault_tolerance.py", quick=True)
    points = ({"section": "traces", "trace": "synthetic-10m", "strategy": "checkpoint-restart",
               "fraction": 0.1, "replications": 2},
              {"section": "mtbf", "mtbf": 3_600.0, "strategy": "redundancy",
               "horizon": 3_600.0, "replications": 3})
    res = run_experiment(dataclasses.replace(exp, analyse=None, factors=None, points=points),
                         out=tmp_path / "ft", executor="serial", progress=False)
    assert res.errors == 0
    trace, mtbf = res.summary()
    assert trace["samples_per_second_kind"] == "exact"
    assert trace["samples_per_second_low"] == trace["samples_per_second_high"] \
        == trace["samples_per_second_mean"] > 0
    assert mtbf.get("samples_per_second_kind", "two-sided") != "exact"
    assert mtbf["samples_per_second_low"] < mtbf["samples_per_second_high"]


def test_fault_tolerance_swarm_routes_by_trainer_and_its_replay_is_not_declared_exact():
    """SWARM's points route by its balancers a trainer (trainer-balancer), whose ties are drawn:
    its trace replay is one draw, not a fixed value (fixed_ci would raise on two replications)."""
    exp = load_experiment(EXPERIMENTS / "fault_tolerance.py", quick=True)
    swarm = dataclasses.replace(exp.base, section="traces", trace="synthetic-10m",
                                strategy="swarm")
    assert swarm.training().routing == "trainer-balancer"
    assert swarm.fixed_metrics() == {}
    other = dataclasses.replace(swarm, strategy="redundancy")
    assert other.fixed_metrics()
