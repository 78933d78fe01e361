"""Tests of ``dtsim design`` and ``dtsim pipeline``: study numbers, JSON keys, errors."""

from __future__ import annotations

import json

import pytest

from sim.cli import main


def run_json(capsys, *argv: str) -> dict:
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


def test_design_240_workers_without_skips(capsys):
    """L=48, a=0.9, target 1e-3, s=0: r=5, 240 workers."""
    out = run_json(capsys, "design", "--stages", "48", "--availability", "0.9",
                   "--skip-budget", "0", "--target-drop", "1e-3")
    assert out["feasible"] is True
    assert out["replicas"] == 5 and out["workers"] == 240
    assert out["drop_rate"] <= 1e-3
    assert out["floor"] == 0.0


def test_design_96_workers_with_four_skips(capsys):
    """L=48, a=0.9, target 1e-3, s=4: r=2, 96 workers (also at rho=1e-5)."""
    for rho in ("0", "1e-5"):
        out = run_json(capsys, "design", "--stages", "48", "--availability", "0.9",
                       "--domain-outage", rho, "--skip-budget", "4", "--target-drop", "1e-3")
        assert (out["replicas"], out["workers"]) == (2, 96)


def test_design_floor_infeasible(capsys):
    """rho=1e-3, s=0, target 1%: infeasible, floor 1-(1-rho)^48 = 4.69%."""
    out = run_json(capsys, "design", "--stages", "48", "--availability", "0.9",
                   "--domain-outage", "1e-3", "--skip-budget", "0", "--target-drop", "0.01")
    assert out["feasible"] is False
    assert out["replicas"] is None and out["workers"] is None
    assert out["floor"] == pytest.approx(1 - (1 - 1e-3) ** 48)
    assert round(100 * out["floor"], 2) == 4.69
    assert "4.69%" in out["reason"]


def test_design_one_skip_makes_r3_enough(capsys):
    """rho=1e-3, s=1, target 1%: r=3 (drop 0.424%)."""
    out = run_json(capsys, "design", "--domain-outage", "1e-3", "--skip-budget", "1",
                   "--target-drop", "0.01")
    assert out["replicas"] == 3
    assert round(100 * out["drop_rate"], 3) == 0.424


def test_design_cost_optimal(capsys):
    """--skip-penalty without --skip-budget returns the cost-optimal design keys."""
    out = run_json(capsys, "design", "--domain-outage", "1e-3", "--skip-penalty", "0.025")
    for key in ("replicas", "skip_budget", "cost", "noskip_replicas", "noskip_cost", "gain"):
        assert key in out
    assert out["replicas"] == 1 and out["skip_budget"] > 10
    assert round(out["gain"], 1) == 2.9
    big = run_json(capsys, "design", "--domain-outage", "1e-3", "--skip-penalty", "0.8")
    assert round(big["gain"], 2) == 1.08 and big["replicas"] == 2


def test_design_verify_simulates(capsys):
    """--verify reports a simulated drop rate whose interval contains the exact value."""
    out = run_json(capsys, "design", "--stages", "12", "--availability", "0.8",
                   "--skip-budget", "1", "--target-drop", "0.05", "--verify",
                   "--microbatches", "3000", "--replications", "6")
    low, high = out["simulated_drop_rate_ci"]
    assert low <= out["drop_rate"] <= high
    assert out["simulated_agrees"] is True
    assert out["simulated_method"] == "simulation"


def test_design_verify_rare_drop_uses_importance_sampling(capsys):
    """A drop rate too rare to simulate (1.5e-9) is verified by importance sampling, not 0 [0, 0]."""
    out = run_json(capsys, "design", "--skip-penalty", "0.1", "--verify",
                   "--microbatches", "2000", "--replications", "4")
    assert out["simulated_method"] == "importance sampling"
    low, high = out["simulated_drop_rate_ci"]
    assert 0 < low <= out["drop_rate"] <= high and high - low < 0.5 * out["drop_rate"]
    assert out["drop_rate"] == pytest.approx(1.4996e-09, rel=1e-3)


def test_design_text_output(capsys):
    """Without --json a readable table names the floor and the reason."""
    assert main(["design", "--domain-outage", "1e-3", "--target-drop", "0.01"]) == 0
    text = capsys.readouterr().out
    assert "feasible" in text and "no" in text and "4.69%" in text


@pytest.mark.parametrize("argv,message", [
    (("--target-drop", "1.5"), "'target_drop' must be in (0, 1): 1.5"),
    (("--target-drop", "0"), "'target_drop' must be in (0, 1): 0.0"),
    (("--stages", "0"), "'stages' must be an integer >= 1: 0"),
    (("--availability", "1.2"), "'availability' must be in [0, 1]: 1.2"),
    (("--skip-budget", "-1"), "'skip_budget' must be an integer in [0, 48]: -1"),
])
def test_design_bad_input(capsys, argv, message):
    """Bad input: one line naming the parameter and value, exit 2."""
    assert run_error(capsys, "design", *argv) == f"dtsim design: error: {message}"


def test_pipeline_json_keys(capsys):
    """dtsim pipeline --json has the documented keys and a sane interval."""
    out = run_json(capsys, "pipeline", "--stages", "10", "--replicas", "2", "--skip-budget", "1",
                   "--availability", "0.8", "--domain-outage", "0.01", "--skip-penalty", "0.2",
                   "--microbatches", "2000", "--replications", "4", "--seed", "3",
                   "--engine", "des")
    for key in ("drop_rate", "drop_rate_ci", "predicted_drop_rate", "workers", "mean_quality",
                "goodput", "latency_mean", "latency_p99", "mean_skipped", "simulated_time",
                "seed"):
        assert key in out, key
    low, high = out["drop_rate_ci"]
    assert low <= out["drop_rate"] <= high
    assert out["workers"] == 20 and out["seed"] == 3
    assert out["simulated_time"] == pytest.approx(4 * 2000)


def test_pipeline_text_and_timing(capsys):
    """Text output with compute time runs and reports latency."""
    assert main(["pipeline", "--stages", "6", "--replicas", "2", "--stage-time", "0.5",
                 "--detection-timeout", "0.1", "--microbatches", "200", "--replications",
                 "2"]) == 0
    text = capsys.readouterr().out
    assert "drop rate" in text and "latency mean" in text


def test_pipeline_per_stage_replicas(capsys):
    """--replicas accepts one count per stage."""
    out = run_json(capsys, "pipeline", "--stages", "3", "--replicas", "1,2,3",
                   "--microbatches", "100", "--replications", "2")
    assert out["workers"] == 6


@pytest.mark.parametrize("argv,message", [
    (("--stages", "0"), "'stages' must be an integer >= 1: 0"),
    (("--replicas", "0"), "'replicas' must be an integer >= 1: 0"),
    (("--skip-budget", "49"), "'skip_budget' must be an integer in [0, 48]: 49"),
    (("--availability", "-0.1"), "'availability' must be in [0, 1]: -0.1"),
    (("--domain-outage", "2"), "'domain_outage' must be in [0, 1]: 2.0"),
    (("--stage-time", "-1"), "'stage_time' must be >= 0: -1.0"),
    (("--microbatches", "0"), "'microbatches' must be an integer >= 1: 0"),
    (("--replications", "0"), "'replications' must be an integer >= 1: 0"),
])
def test_pipeline_bad_input(capsys, argv, message):
    """Bad input: one line naming the parameter and value, exit 2."""
    assert run_error(capsys, "pipeline", *argv) == f"dtsim pipeline: error: {message}"


def test_pipeline_topology_placement(capsys):
    """--topology with --placement packed uses the layout's domains; the exact law is conditional."""
    out = run_json(capsys, "pipeline", "--stages", "4", "--replicas", "2", "--topology",
                   "datacenter:regions=1,racks=2,hosts=4,rack_outage=0.05,region_outage=0",
                   "--placement", "packed", "--no-layout-latency", "--show-placement",
                   "--availability", "0.8", "--microbatches", "3000", "--replications", "6",
                   "--rate", "2")
    low, high = out["drop_rate_ci"]
    assert low <= out["predicted_drop_rate"] <= high
    assert out["exact_applies"] is True
    assert len(out["placement"]) == 4 and out["placement"][0][0][1] == "region0/rack0"


def test_pipeline_topology_latency(capsys):
    """Without --no-layout-latency the layout's link latencies time the hops."""
    out = run_json(capsys, "pipeline", "--stages", "3", "--replicas", "1", "--topology",
                   "datacenter:regions=1,racks=3,hosts=1,intra_rack_latency=0.1,"
                   "inter_rack_latency=2,rack_outage=0,region_outage=0",
                   "--availability", "1", "--microbatches", "10", "--replications", "2")
    assert out["latency_mean"] == pytest.approx(4.0)
    assert out["exact_applies"] is False


def test_pipeline_event_log_file(capsys, tmp_path):
    """--event-log writes replication 0's event log as CSV."""
    path = tmp_path / "trace.csv"
    out = run_json(capsys, "pipeline", "--stages", "4", "--replicas", "2", "--stage-time", "1",
                   "--availability", "0.7", "--microbatches", "50", "--replications", "2",
                   "--event-log", str(path))
    lines = path.read_text().splitlines()
    assert out["event_log_file"] == str(path)
    assert lines[0] == "time,microbatch,event,stage,replica"
    assert any(",serve," in line for line in lines) and any(",deliver," in line for line in lines)


def test_design_on_a_trace_answers_exactly_beside_independence(capsys):
    """dtsim design --failure-trace: the trace's exact law (random policy) and the binomial one."""
    out = run_json(capsys, "design", "--stages", "8", "--skip-budget", "1", "--target-drop",
                   "1e-2", "--failure-trace", "gcp-a100")
    assert out["law"] == "trace (random policy, exact)" and out["slots"] == 64
    assert (out["replicas"], out["independent_replicas"]) == (3, 2)
    err = run_error(capsys, "design", "--failure-trace", "gcp-a100", "--trace-policy", "recent")
    assert err.endswith("'trace_policy' must be random for dtsim design (the exact law needs "
                        "the up set uniform given the count, each worker on its own slot): "
                        "'recent'")


@pytest.mark.slow
def test_design_on_a_trace_verified_by_replaying_it(capsys):
    """The chosen design, simulated replaying gcp-a100, drops at the exact rate."""
    out = run_json(capsys, "design", "--stages", "8", "--skip-budget", "1", "--target-drop",
                   "2e-2", "--failure-trace", "gcp-a100", "--verify", "--replications", "20",
                   "--microbatches", "5000")
    assert out["simulated_agrees"] is True
    low, high = out["simulated_drop_rate_ci"][:2]
    assert low <= out["drop_rate"] <= high
