"""experiments/trace_training.py: its points are what it says, and --quick writes its outputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sim.rng import Streams
from sim.runner import load_experiment, run_experiment
from sim.traces import load_trace, trace_stats

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _module():
    return load_experiment(EXPERIMENTS / "trace_training.py").module


def test_the_three_laws_share_the_traces_availability_and_mean_down_time():
    """independent: the trace's a and Little's-law mean down (in time units); trace: tiled replay."""
    mod = _module()
    st = trace_stats(load_trace("aws-p3"))
    ind = replace(mod.BASE, trace="aws-p3", law="independent").training()
    assert ind.availability == st["availability"]
    little = st["nodes"] * (1 - st["availability"]) * st["duration"] / st["preempted_nodes"]
    assert ind.mean_downtime == pytest.approx(little / mod.BASE.speedup, rel=1e-12)
    tr = replace(mod.BASE, trace="aws-p3", law="trace").training()
    assert tr.failure_trace.policy == "random+tile" and tr.failure_trace.resample == "offset"
    assert tr.workers == 96 and tr.failure_trace.slots == 32


def test_trace_law_over_a_whole_span_replays_the_traces_availability_exactly():
    """96 workers = 3 copies of aws-p3's 32 slots over one whole span: availability exact."""
    mod = _module()
    P = load_trace("aws-p3").end
    cfg = replace(mod.BASE, trace="aws-p3", law="trace", horizon=P / mod.BASE.speedup)
    m = mod.model(cfg, Streams(3).replication(0))
    assert m["worker_availability"] == pytest.approx(trace_stats(load_trace("aws-p3"))
                                                     ["availability"], abs=1e-12)
    assert m["steps_done"] > 0


@pytest.mark.slow
def test_trace_training_quick(tmp_path, capsys):
    """trace_training --quick writes figure and tables and prints the finding."""
    exp = load_experiment(EXPERIMENTS / "trace_training.py", quick=True)
    res = run_experiment(exp, out=tmp_path / "tt", executor="serial", progress=False)
    assert res.errors == 0
    for f in ("trace_training.png", "trace_training.csv", "trace_training.md"):
        assert (tmp_path / "tt" / f).exists(), f
    rows = exp.module.table(res)
    assert len(rows) == 12 and all(r["sps_worker"] >= 0 for r in rows)
    assert "training throughput by failure law" in capsys.readouterr().out
