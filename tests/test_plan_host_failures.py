"""Several replicas on one host under a step-level strategy: the host is the unit of failure.

A Megatron launch of TP 4 on 8-GPU nodes puts two replicas on a node, and a spot preemption
takes the instance, every replica on it (usertrial16, section 4). The job engine refused such
a plan; it now runs each replica as a worker and fails a host's workers together: a trace's
instance is a host (by name, or slot ``k`` on host ``k``), one availability process and one
spot slot a host (sim.training.config.host_groups).
"""

from __future__ import annotations

import json

import pytest

from sim.cli import main

REP = {"gpu": "GH-96", "tp": 1, "gpus_per_node": 4, "zone": "us-central1-a"}
BIG = 1e9


def _plan(tmp_path, hosts, name="plan.json"):
    """OPT-350 in 2 stages, ``len(hosts) // 2`` replicas each, replica i of stage j on
    ``hosts[j * r + i]`` (None: a node of its own)."""
    r = len(hosts) // 2
    stages = [{"first_layer": 0, "last_layer": 12,
               "replicas": [dict(REP, host=h) for h in hosts[:r]]},
              {"first_layer": 13, "last_layer": 25,
               "replicas": [dict(REP, host=h) for h in hosts[r:]]}]
    for st in stages:
        for x in st["replicas"]:
            if x["host"] is None:
                del x["host"]
    p = tmp_path / name
    p.write_text(json.dumps({"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 8,
                             "framework": "deepspeed", "stages": stages}))
    return str(p)


def _json(capsys, argv):
    assert main(["train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _step(capsys, plan):
    return _json(capsys, ["--plan", plan, "--model", "OPT-350", "--steps", "1",
                          "--replications", "1"])["step_time_mean"]


CR = "checkpoint-restart:every=2,checkpoint=0.5,restart=3,boot=0,settle=0"


def test_a_hosts_outage_takes_both_its_replicas_by_hand(tmp_path, capsys):
    """s0r0 and s0r1 on host a, s1r0 on b, s1r1 on c; a trace takes host a down for good
    mid step 3. T2 = the plan's iteration (``--plan``), T1 = one pipeline's (the plan with
    one replica a stage, on a and b). By hand: steps 1, 2 at T2, checkpoint to 2 T2 + 0.5;
    at t = 2.5 T2 + 0.5 both of a's workers are lost at once: back to 2 steps, restart to
    t + 3; one pipeline of the two left (b, c): steps 3, 4 at T1, checkpoint, step 5, the
    final checkpoint: wall t + 3 + 3 T1 + 1, 1 restart, 3 checkpoints, 2 losses. Billing: a's
    two workers for t each, b's and c's for the wall, 1 GPU each at GH-96's 11.06 $/GPU-h."""
    plan = _plan(tmp_path, ["a", "a", "b", "c"])
    T2 = _step(capsys, plan)
    T1 = _step(capsys, _plan(tmp_path, ["a", "b"], "one.json"))
    t = 2.5 * T2 + 0.5
    trace = tmp_path / "trace.csv"
    trace.write_text(f"worker,start,end\na,{t!r},{BIG}\n")
    out = _json(capsys, ["--plan", plan, "--model", "OPT-350", "--steps", "5",
                         "--replications", "1", "--failure-trace", str(trace),
                         "--strategy", CR])
    wall = t + 3.0 + 3 * T1 + 1.0
    assert out["engine"] == "job"
    assert out["trace_instances"] == {"s0r0": "a", "s0r1": "a", "s1r0": None, "s1r1": None}
    assert out["wall_time_mean"] == pytest.approx(wall, rel=1e-12)
    assert (out["restarts"], out["checkpoints"], out["steps"]) == (1.0, 3.0, 5)
    assert out["strategy_counts"]["losses"] == 2.0
    assert out["lost_time"]["work"] == pytest.approx(t - (2 * T2 + 0.5), rel=1e-12)
    hours = (2 * wall + 2 * t) / 3600
    assert out["worker_hours"] == pytest.approx(hours, rel=1e-12)
    assert out["cost"] == pytest.approx(hours * 11.06, rel=1e-12)
    # the exact reference replays the host's removal on both its workers
    assert out["predicted_wall_time"] == pytest.approx(wall, rel=1e-12)


@pytest.mark.parametrize("strategy", ["checkpoint-restart", "redundancy:mode=lazy",
                                      "reconfiguration:every=2,grow=true"])
def test_a_trace_by_host_name_is_the_trace_by_host_slot(tmp_path, capsys, strategy):
    """The same outages named by host (replayed by name) and unnamed in the order of the
    hosts' first workers (slot k on host k): the same run, both of a host's workers down
    and back together (b holds s0r1 and s1r0; each outage ends within the run)."""
    plan = _plan(tmp_path, ["a", "b", "b", "c"])
    named = tmp_path / "named.csv"
    named.write_text("worker,start,end\na,100,150\nb,300,400\nc,500,520\n")
    slots = tmp_path / "slots.csv"
    slots.write_text("worker,start,end\nx0,100,150\nx1,300,400\nx2,500,520\n")
    argv = ["--plan", plan, "--model", "OPT-350", "--steps", "400", "--replications", "1",
            "--strategy", strategy]
    a = _json(capsys, [*argv, "--failure-trace", str(named)])
    b = _json(capsys, [*argv, "--failure-trace", str(slots)])
    assert a["trace_instances"] == {"s0r0": "a", "s0r1": "b", "s1r0": "b", "s1r1": "c"}
    for k in ("wall_time_mean", "steps_done", "lost_time", "worker_availability",
              "strategy_counts", "cost"):
        assert a[k] == b[k], k
    # a, b (two workers), c: four workers lost
    assert a["strategy_counts"]["losses"] == 4.0


def test_the_spot_model_preempts_a_host_not_each_replica(tmp_path, capsys):
    """--mtbf is each spot instance's: four replicas on one host are one slot, preempted
    after an exponential time of mean M = 60 s and replaced R = 10 s later. Preemptions by
    T = 2000 s: E N = sum_k P(Gamma(k, M) <= T - (k - 1) R) = 28.58 (a renewal count);
    a slot a replica would give four times as many. 40 replications, 4 standard errors."""
    from scipy import stats

    plan = _plan(tmp_path, ["a", "a", "a", "a"])
    n = 40
    out = _json(capsys, ["--plan", plan, "--model", "OPT-350", "--steps", "100000",
                         "--max-time", "2000", "--mtbf", "60", "--replace-time", "10",
                         "--replications", str(n), "--strategy", "redundancy:mode=lazy"])
    assert out["failure_hosts"] == 1
    T, M, R = 2000.0, 60.0, 10.0
    mean = sum(stats.gamma.cdf(T - (k - 1) * R, k, scale=M) for k in range(1, 200))
    # the count's variance, the renewal's asymptote: T var(X) / E(X)^3 (cycle X = exp + R)
    se = (T * M**2 / (M + R) ** 3 / n) ** 0.5
    assert abs(out["preemptions"] - mean) < 4 * se, (out["preemptions"], mean, se)


@pytest.mark.parametrize(("hosts", "fatal"), [(["a", "b", "a", "c"], 1.0),
                                              (["a", "a", "b", "c"], 0.0)])
def test_bamboo_a_host_of_two_adjacent_stages_loses_the_copy_too(tmp_path, capsys, hosts,
                                                                 fatal):
    """Bamboo's copy of stage j + 1 is on stage j's node (``get_redundant_stage_ids``,
    ``(stage_id + 1) % num_stages``, uclasystem/bamboo
    ``external/deepspeed/deepspeed/runtime/pipe/redundancy.py``). A host holding stages 0 and
    1 of one pipeline (s0r0, s1r0) loses stage 1 and its copy at once: fatal. A host holding
    stage 0 of both pipelines (s0r0, s0r1) loses two stages whose copies are on b and c:
    two takeovers, nothing fatal."""
    plan = _plan(tmp_path, hosts)
    trace = tmp_path / "trace.csv"
    trace.write_text("worker,start,end\na,100,150\n")
    out = _json(capsys, ["--plan", plan, "--model", "OPT-350", "--steps", "400",
                         "--replications", "1", "--failure-trace", str(trace),
                         "--strategy", "redundancy:mode=lazy"])
    counts = out["strategy_counts"]
    assert counts["losses"] == 2.0
    assert counts["fatal_failures"] == fatal
    assert out["restarts"] == fatal  # a fatal failure rolls back and restarts
    assert counts["lost_work"] > 0 if fatal else counts["lost_work"] == 0
