"""Inputs the framework engine (DeepSpeed's blocking order, Megatron-LM's batched pairs) gets
from ``dtsim train`` without a plan, and ``dtsim plan --out``'s reproduction command: found by
a review of issue 35's change as a user would run it.

* ``--sync-wait`` on the framework engine crashed mid-run (``'Device' object has no attribute
  'abort'``, exit 1): a framework's pipeline waits for every replica of a stage, as the
  plan path says; it is now refused in one line.
* ``--backward-ratio 0`` (a forward-only pipeline) ran DeepSpeed's and Megatron-LM's training
  programs with zero-time backward passes and timed gradient transfers: a 3-stage pipeline at
  0.5 s per hop took 25.5 s (blocking) and 19 s (batched) a step, against the forward-only
  11 s of ``--p2p overlap``; it is now refused in one line.
* A step-level strategy (its own restart model) with failures on the framework engine was
  refused as ``'restart_cost' must be given`` even with ``--restart-cost`` (which the strategy
  takes): the job engine runs the failures from the framework engine's failure-free steps.
* ``dtsim plan --out`` printed ``dtsim train --plan FILE --model M`` without the ``--p2p``,
  ``--schedule`` and ``--profiles`` the plans were searched with, so the command simulated
  another program (e.g. DeepSpeed's order for plans searched with ``--p2p batched``).
"""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.training import TrainingConfig

BASE = dict(stages=3, latency=0.5, schedule="1f1b", steps=2)


@pytest.mark.parametrize("p2p", ["blocking", "batched"])
def test_sync_wait_on_the_framework_engine_is_refused(p2p):
    with pytest.raises(ConfigError, match="'sync_wait' must be unset with p2p"):
        TrainingConfig(**BASE, replicas=2, p2p=p2p, sync_wait=1)


@pytest.mark.parametrize("p2p", ["blocking", "batched"])
def test_sync_wait_cli_one_line_exit_2(p2p, capsys):
    code = main(["train", "--stages", "3", "--latency", "0.5", "--schedule", "1f1b", "--p2p",
                 p2p, "--replicas", "2", "--sync-wait", "1", "--steps", "2",
                 "--replications", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'sync_wait' must be" in err[0]


@pytest.mark.parametrize("p2p", ["blocking", "batched"])
def test_forward_only_on_the_framework_engine_is_refused(p2p):
    with pytest.raises(ConfigError, match="'backward_ratio' must be > 0 with p2p"):
        TrainingConfig(**BASE, p2p=p2p, backward_ratio=0.0)
    with pytest.raises(ConfigError, match="'backward_times' must be"):
        TrainingConfig(**BASE, p2p=p2p, backward_times=(0.0, 0.0, 0.0))
    # the overlapped engine runs it forward-only, as before
    TrainingConfig(**BASE, p2p="overlap", backward_ratio=0.0)


@pytest.mark.parametrize("p2p", ["blocking", "batched"])
def test_job_strategy_with_failures_runs_on_the_framework_engine(p2p, capsys):
    """The strategy's restart model is its own: no framework restart_cost asked for; the run
    uses the framework engine's failure-free step (45 s blocking, 38.5 s batched here)."""
    c = TrainingConfig(**BASE, p2p=p2p, availability=0.99, mean_downtime=5.0,
                       strategy="checkpoint-restart:every=2,restart=1")
    assert c.framework and c.failures and c.restart_cost is None
    code = main(["train", "--stages", "3", "--latency", "0.5", "--schedule", "1f1b", "--p2p",
                 p2p, "--steps", "4", "--replications", "2", "--availability", "0.99",
                 "--strategy", "checkpoint-restart:every=2", "--restart-cost", "1", "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert res["steps_done"] == pytest.approx(4.0)


def test_plan_out_command_names_the_search_options(tmp_path, capsys):
    out = tmp_path / "best.json"
    code = main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--top", "1", "--simulate", "0", "--p2p", "batched",
                 "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    line = next(x for x in text.splitlines() if "written to" in x)
    stages = len(json.loads(out.read_text())["stages"])
    # the searched --p2p, unless the plan has one stage (dtsim train refuses --p2p for it)
    assert ("--p2p batched" in line) == (stages > 1)
    assert "--schedule" not in line  # the default 1f1b needs no flag
    one = tmp_path / "one.json"
    assert main(["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x1@us-central1-a",
                 "--global-batch-size", "64", "--top", "1", "--simulate", "0", "--p2p",
                 "batched", "--out", str(one)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "written to" in x)
    assert len(json.loads(one.read_text())["stages"]) == 1 and "--p2p" not in line
    two = tmp_path / "two.json"  # 11 GB GPUs cannot hold OPT-350 whole: two stages or more
    assert main(["plan", "--model", "OPT-350", "--nodes", "RTX-2080:4x1@us-central1-a",
                 "--global-batch-size", "64", "--top", "1", "--simulate", "0", "--p2p",
                 "batched", "--out", str(two)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "written to" in x)
    assert len(json.loads(two.read_text())["stages"]) > 1 and "--p2p batched" in line
    code = main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--top", "1", "--simulate", "0", "--schedule",
                 "gpipe", "--out", str(out)])
    line = next(x for x in capsys.readouterr().out.splitlines() if "written to" in x)
    assert code == 0 and "--schedule gpipe" in line and "--p2p" not in line


@pytest.mark.parametrize("p2p", ["batched", "overlap"])
def test_exact_agreement_verdict_is_relative(p2p, capsys):
    """A deterministic run equal to the exact form up to rounding agrees at any scale: at
    10^4 s passes the step (about 3.6e5 s) differs from the closed form by an ulp or so, which
    the table's absolute 1e-12 called 'NO' (sim.results.EXACT_RTOL is the house's rounding)."""
    assert main(["train", "--schedule", "1f1b", "--p2p", p2p, "--stages", "5",
                 "--forward-time", "1e4", "--latency", "0.3", "--steps", "3",
                 "--replications", "1"]) == 0
    rows = [x for x in capsys.readouterr().out.splitlines()
            if x.startswith(("step time", "time to train"))]
    assert len(rows) == 2 and all(r.rstrip().endswith("yes") for r in rows), rows


def test_planner_keeps_a_plans_own_frameworks_p2p():
    """A plan model of the default framework (DeepSpeed, blocking) predicting a plan that names
    Megatron-LM ran it in DeepSpeed's order: build() passed the model's framework's p2p as an
    override. Only an explicit p2p overrides; the plan's framework sets it otherwise (as
    dtsim train --plan does). Two stages of mixed RTX, 5 micro-batches per pipeline."""
    from sim.planner.models import ProfilePlanModel, simulate_plan
    from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
    from sim.profiles.build import build_plan, explain_rows
    from sim.profiles.frameworks import FrameworkSpec

    prof = load_profiles(models=("OPT-350",))
    reps = tuple(ReplicaSpec(k, 1, gpus_per_node=1, zone="us-central1-a")
                 for k in ("RTX-3090", "Titan-RTX"))
    plan = Plan((StageSpec(tuple(range(10)), reps), StageSpec(tuple(range(10, 26)), reps[::-1])),
                2, 20, model="OPT-350", framework=FrameworkSpec("megatron", precision="fp16"))
    want = explain_rows(build_plan(plan, prof))["iteration"]
    pm = ProfilePlanModel(prof, prof.model("OPT-350"))
    assert pm.build(plan).config.p2p == "batched"
    assert pm.predict(plan).iteration_time == pytest.approx(want, rel=1e-12)
    sim = simulate_plan(pm, plan, steps=1)
    assert sim["iteration_time"] == pytest.approx(want, rel=1e-9)
    # an explicit override still applies
    forced = ProfilePlanModel(prof, prof.model("OPT-350"), p2p="blocking")
    assert forced.build(plan).config.p2p == "blocking"
    assert forced.predict(plan).iteration_time > want * 1.001


@pytest.mark.parametrize("p2p", ["batched", "blocking"])
def test_timeline_cuts_the_transfers_of_a_lost_step(p2p, tmp_path):
    """docs/timeline.md: a transfer runs 'to its arrival, or to the failure that cut it'
    (``cut``). On the framework engine a transfer moving when a failure lost the step was
    drawn to the arrival it never had (after the failure, across the restart: 48 such spans
    at this seed), never cut. Now every transfer that starts inside a lost step ends by the
    step's end, and those moving at the failure are cut there."""
    out = tmp_path / "t.json"
    assert main(["train", "--stages", "4", "--schedule", "1f1b", "--p2p", p2p, "--latency", "3",
                 "--steps", "4", "--replications", "1", "--availability", "0.99",
                 "--mean-downtime", "5", "--restart-cost", "2", "--timeline", str(out),
                 "--quiet"]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    lost = [(e["ts"], e["ts"] + e["dur"]) for e in ev
            if e.get("cat") == "step" and e["args"].get("lost")]
    hops = [e for e in ev if e.get("cat") == "transfer"]
    assert lost and hops
    inside = [(e, b) for e in hops for a, b in lost if a <= e["ts"] < b]
    assert inside
    assert all(e["ts"] + e["dur"] <= b + 1e-3 for e, b in inside)
    cut = [e for e in hops if e["args"]["cut"]]
    assert cut and all(any(abs(e["ts"] + e["dur"] - b) < 1e-3 for _, b in lost) for e in cut)
