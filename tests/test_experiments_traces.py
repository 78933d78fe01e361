"""The trace experiments: quick runs write their outputs; their exact references are right."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.runner import load_experiment, run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _module(name):
    return load_experiment(EXPERIMENTS / f"{name}.py").module


@pytest.mark.slow
def test_trace_designs_quick(tmp_path, capsys):
    """trace_designs --quick writes figure and tables; its exact references lie in the intervals."""
    exp = load_experiment(EXPERIMENTS / "trace_designs.py", quick=True)
    res = run_experiment(exp, out=tmp_path / "td", executor="serial", progress=False)
    assert res.errors == 0
    for f in ("trace_designs.png", "trace_designs.csv", "trace_designs.md"):
        assert (tmp_path / "td" / f).exists(), f
    rows = exp.module.table(res)
    checks = [r for r in rows if r["exact_in_interval"] is not None]
    assert len(checks) == 8
    assert sum(r["exact_in_interval"] for r in checks) >= 7  # 95% intervals, 8 of them
    assert "exact references inside the 95% interval" in capsys.readouterr().out
    # drop rates are probabilities: rate_ci intervals inside [0, 1], longer away from 0
    # (a symmetric Student-t interval, as before, fails the second check)
    for r in rows:
        assert 0 <= r["drop_low"] <= r["drop_rate"] <= r["drop_high"] <= 1, r
        if 0 < r["drop_rate"] < 0.5:
            assert r["drop_high"] - r["drop_rate"] > r["drop_rate"] - r["drop_low"], r


@pytest.mark.parametrize("L,r,s", [(3, 2, 0), (3, 2, 1), (2, 3, 0), (4, 1, 2)])
def test_stage_drop_given_up_by_enumeration(L, r, s):
    """h(u) equals brute-force enumeration of every set of u up workers."""
    mod = _module("trace_designs")
    h = mod._stage_drop_given_up(L, r, s)
    W = L * r
    for u in range(W + 1):
        sets = list(itertools.combinations(range(W), u))
        drops = sum(sum(all(w not in up for w in range(j * r, j * r + r)) for j in range(L)) > s
                    for up in sets)
        assert h[u] == pytest.approx(drops / len(sets), abs=1e-14)


def test_trace_drop_of_a_full_trace_is_zero_and_independent_is_study_a():
    """With every instance up no stage is out; the independent reference is P(Bin(L, q) > s)."""
    from scipy import stats

    mod = _module("trace_designs")
    cfg = replace(mod.BASE, trace="aws-p3", replicas=2, skip_budget=1, law="independent")
    a = mod._stats("aws-p3")["availability"]
    assert mod.independent_drop(cfg) == pytest.approx(stats.binom.sf(1, 8, (1 - a) ** 2))
    h = mod._stage_drop_given_up(8, 2, 1)
    assert h[16] == 0.0 and h[0] == 1.0
    assert math.isfinite(mod.trace_drop(replace(cfg, law="trace")))
    assert mod.trace_drop(replace(cfg, law="trace", policy="domain")) is None
    assert np.all(np.diff(h) <= 1e-15)  # more workers up never drops more


def test_trace_design_rejects_bad_values():
    """A bad law is the house's one-line error."""
    mod = _module("trace_designs")
    with pytest.raises(ConfigError, match="'law' must be one of trace, fitted, independent: 'bursty'"):
        replace(mod.BASE, law="bursty")


@pytest.mark.slow
def test_trace_churn_quick(tmp_path, capsys):
    """trace_churn --quick writes its figure and tables and compares the two churn laws."""
    exp = load_experiment(EXPERIMENTS / "trace_churn.py", quick=True)
    res = run_experiment(exp, out=tmp_path / "tc", executor="serial", progress=False)
    assert res.errors == 0
    for f in ("trace_churn.png", "trace_churn.csv", "trace_churn.md"):
        assert (tmp_path / "tc" / f).exists(), f
    rows = exp.module.table(res)
    assert {r["law"] for r in rows} == {"trace", "exponential"}
    assert "(trace vs exponential)" in capsys.readouterr().out


def test_trace_churn_scales_the_trace_to_the_downtime():
    """The replay's speed-up makes the trace's mean down time last ``downtime`` time units."""
    mod = _module("trace_churn")
    cfg = replace(mod.BASE, downtime=4.0)
    st = mod._stats(cfg.trace)
    assert cfg.replay().speedup == pytest.approx(st["mean_down"] / 4.0)
    assert cfg.gossip("capture").adversary == "stubborn" and cfg.nodes == st["nodes"]
    with pytest.raises(ConfigError, match="'law' must be one of trace, exponential: 'weibull'"):
        replace(mod.BASE, law="weibull")
