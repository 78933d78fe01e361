"""``dtsim train --plan P --strategy swarm``: the plan's stages and replicas as SWARM's stages and
peer pools on the training DES's swarm schedule (sim.profiles.swarm). Exact against closed forms
of the plan's own pieces, beside the plain run where the two must agree and where SWARM's wiring
must differ, and on a scripted and a spot trace."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.profiles import load_profiles, read_plan
from sim.profiles.build import build_plan
from sim.training import TrainingConfig

BIG = 1e9
ZONE = "us-central1-a"


def _rep(gpu, count=1, **kw):
    return {"gpu": gpu, "tp": 1, "gpus_per_node": 1, "zone": ZONE, "count": count, **kw}


def _write(tmp_path, name, stages, gbs=16):
    """OPT-350 with micro-batches of 1 and a global batch of ``gbs`` (``gbs / r`` a pipeline)."""
    p = tmp_path / name
    p.write_text(json.dumps({"model": "OPT-350", "microbatch_size": 1,
                             "global_batch_size": gbs, "stages": stages}))
    return str(p)


def _two(tmp_path, first, second, name="two.json"):
    """Layers 0-11 and 12-25 (stage 1 is the heavier) with the given replicas."""
    return _write(tmp_path, name, [{"first_layer": 0, "last_layer": 11, "replicas": first},
                                   {"first_layer": 12, "last_layer": 25, "replicas": second}])


def _run(capsys, plan, *extra, steps=1):
    assert main(["train", "--plan", plan, "--steps", str(steps), "--replications", "1",
                 *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _pieces(plan):
    """The plan's own pieces, as its plain run has them (its closed-form times)."""
    return build_plan(read_plan(plan), load_profiles(models=("OPT-350",)), model="OPT-350")


def _pipeline(b, per_peer):
    """SWARM's step on two equal pools of ``b``'s plan, stage 1 the bottleneck, each of its
    peers serving ``per_peer`` micro-batches: the first forward and hop, stage 1 busy for
    every micro-batch's forward and backward (the last stage runs a backward as soon as its
    forward ends), the last gradient's hop and stage 0's backward, then every stage's
    all-reduce and optimizer step after the barrier (the slowest). Exact while stage 0 keeps
    ahead: ``f0 + b0 <= f1 + b1``."""
    (f0, b0, o0), (f1, b1, o1) = b.stage_times[0][0], b.stage_times[1][0]
    h, g = b.transfer_times[0][0]
    a0, a1 = b.allreduce_times
    assert f0 + b0 <= f1 + b1  # the condition
    return f0 + h + per_peer * (f1 + b1) + g + b0 + max(a0 + o0, a1 + o1)


def test_equal_pools_run_the_closed_form(tmp_path, capsys):
    """Two stages of two equal A100 peers, 16 micro-batches a step: every routing gives each
    peer 8 and the step is the closed form of the plan's own pass, hop and all-reduce times,
    bit for bit up to rounding. The wrong models it rejects: the plan's fixed program
    (DeepSpeed's blocking sends, 1.4649 s against 1.4285 s) and one pool taken as one peer."""
    plan = _two(tmp_path, [_rep("A100-40", 2)], [_rep("A100-40", 2)])
    b = _pieces(plan)
    exact = _pipeline(b, 8)
    for routing in ("round-robin", "queue", "least-loaded"):
        got = _run(capsys, plan, "--strategy", "swarm", "--routing", routing, steps=2)
        assert got["step_time_mean"] == pytest.approx(exact, rel=1e-12), routing
        assert got["strategy"] == "swarm" and got["p2p"] == "overlap"
    plain = _run(capsys, plan)["step_time_mean"]
    assert abs(plain - exact) > 1e-2 * exact
    assert abs(_pipeline(b, 16) - exact) > 0.5 * exact


def test_one_stage_agrees_with_the_plain_run(tmp_path, capsys):
    """One stage of two peers: no wiring to choose, so SWARM's step is the plain run's data
    parallelism, less only the framework's collectives SWARM does not run (the loss's
    all-reduce and broadcast, the model-parallel one-value all-reduces)."""
    plan = _write(tmp_path, "one.json", [{"first_layer": 0, "last_layer": 25,
                                          "replicas": [_rep("A100-40", 2)]}])
    b = _pieces(plan)
    # round-robin: the plain run's split, 8 a peer (SWARM's balancers a trainer split at random)
    swarm = _run(capsys, plan, "--strategy", "swarm", "--routing", "round-robin")["step_time_mean"]
    plain = _run(capsys, plan)["step_time_mean"]
    (f, bw, o), _ = b.stage_times[0]
    assert swarm == pytest.approx(8 * (f + bw) + b.allreduce_times[0] + o, rel=1e-12)
    assert b.loss_time > 0
    assert plain - swarm == pytest.approx(b.loss_time + b.optimizer_collective_time, abs=1e-12)


def test_crossed_pools_beat_every_fixed_pipeline(tmp_path, capsys):
    """Stage 0 holds an A100 and a V100, stage 1 a V100 and an A100: each of the plan's two
    pipelines holds a V100 stage, so no fixed-pipeline schedule beats 8 micro-batches on its
    V100 stage; SWARM's pools, routed by a shared queue, let the A100s take more. Its step
    lies between the pooled bound (the bottleneck pool's rate) and that fixed bound, and the
    plan's own run lies above the fixed bound. The hop meets A100-A100 pairs the plan has not
    (5.5 ms against 7.9 ms): the slowest is taken and said."""
    plan = _two(tmp_path, [_rep("A100-40"), _rep("V100-16")], [_rep("V100-16"), _rep("A100-40")],
                "crossed.json")
    b = _pieces(plan)
    work = [[f + bw for f, bw, _ in row] for row in b.stage_times]
    tail = max(a + max(o for _, _, o in row)
               for a, row in zip(b.allreduce_times, b.stage_times, strict=True))
    fixed = 8 * max(max(work[0][i], work[1][i]) for i in range(2))
    pooled = min(16 / sum(1 / w for w in row) for row in work)
    got = _run(capsys, plan, "--strategy", "swarm", "--routing", "queue")
    assert pooled + tail <= got["step_time_mean"] < fixed
    assert _run(capsys, plan)["step_time_mean"] > fixed
    assert any("every hop takes the slowest pair's time" in e for e in got["estimates"])


def test_a_peer_gone_leaves_its_pool_to_serve_the_batch(tmp_path, capsys):
    """A trace with s1r1 absent the whole run: SWARM routes every pass of stage 1 to s1r0, with
    no restart, and each step is the closed form with that peer serving all 16 micro-batches
    (the plan's all-reduce times kept)."""
    plan = _two(tmp_path, [_rep("A100-40", 2)], [_rep("A100-40", 2)])
    trace = tmp_path / "trace.csv"
    trace.write_text(f"worker,start,end\ns1r1,0.0,{BIG}\n")
    got = _run(capsys, plan, "--strategy", "swarm", "--failure-trace", str(trace), steps=3)
    assert got["finished"] == 1.0 and got["restarts"] == 0 and got["drop_rate"] == 0
    assert got["step_time_mean"] == pytest.approx(_pipeline(_pieces(plan), 16), rel=1e-12)


def test_spot_trace_runs_on_the_pools(tmp_path, capsys):
    """The shipped AWS p3 spot trace with AWS's two-minute notice: the plan trains to the end
    on its pools; the steps with every peer up take the failure-free step, the others longer."""
    plan = _two(tmp_path, [_rep("A100-40", 2)], [_rep("A100-40", 2)])
    # round-robin: every step with every peer up is the same (SWARM's balancers a trainer
    # split each step at random)
    free = _run(capsys, plan, "--strategy", "swarm", "--routing", "round-robin")["step_time_mean"]
    got = _run(capsys, plan, "--strategy", "swarm", "--routing", "round-robin",
               "--failure-trace", "aws-p3", "--preemption-notice", "aws", steps=2000)
    assert got["finished"] == 1.0 and got["steps_done"] == 2000
    assert got["worker_availability"] < 0.99
    assert got["step_time_p50"] == pytest.approx(free, rel=1e-9)
    assert got["step_time_mean"] > 1.05 * free


@pytest.mark.parametrize(("stages", "extra", "message"), [
    ([[_rep("A100-40", 2)], [_rep("A100-40", 2)]], ("--p2p", "overlap"),
     "'p2p' must be given only without --strategy swarm with --plan (SWARM's peers send "
     "activations beside their compute: p2p overlap): 'overlap'"),
    ([[_rep("A100-40", 2)], [_rep("A100-40", 2)]], ("--sync", "allreduce"),
     "'sync' must be given only without --strategy swarm with --plan"),
    ([[_rep("A100-40", 2)], [_rep("A100-40", 2)]], ("--explain",),
     "'explain' must be given only without --strategy swarm (it breaks a fixed device "
     "program's iteration down; SWARM routes every pass afresh): True"),
    ([[_rep("A100-40", 2)], [_rep("A100-40", 2)]], ("--schedule", "gpipe"),
     "'schedule' must be swarm with --strategy swarm: 'gpipe'"),
    ([[_rep("A100-40", 2)], [dict(_rep("A100-40", 2), tp=2, gpus_per_node=2)]], (),
     "'tp' must be 1 with --strategy swarm (a SWARM server runs its stage on one device, "
     "--device cuda:0: yandex-research/swarm f66855f swarm/setup_and_launch_server.sh:24-30; "
     "stage 1 replica 0): 2"),
    ([[dict(_rep("A100-40", 2), gpus_per_node=2, host="n0")],
      [dict(_rep("A100-40", 2), gpus_per_node=2, host="n1")]], (),
     "'plan' must be a plan without named hosts with --strategy swarm (SWARM wires any peer "
     "to any peer; peers sharing a host's NICs are not modelled; stage 0 replica 0): 'n0'"),
])
def test_what_swarm_has_no_meaning_for_is_refused(tmp_path, capsys, stages, extra, message):
    """Each in one line, exit 2, before any run."""
    plan = _two(tmp_path, *stages)
    assert main(["train", "--plan", plan, "--steps", "1", "--strategy", "swarm", *extra]) == 2
    assert message in capsys.readouterr().err


def test_routing_needs_swarm_with_a_plan(tmp_path, capsys):
    """A plan's pipelines are fixed unless it runs as SWARM: --routing is refused there."""
    plan = _two(tmp_path, [_rep("A100-40", 2)], [_rep("A100-40", 2)])
    assert main(["train", "--plan", plan, "--steps", "1", "--routing", "queue"]) == 2
    assert ("'routing' must be given only without --plan, or with --plan and --strategy swarm"
            in capsys.readouterr().err)


def test_plan_times_on_swarm_need_a_strategy():
    """Per-replica times on the swarm schedule are a plan run as SWARM (a strategy set), which
    no reference or compiled engine answers; without a strategy they stay refused."""
    times = (((1.0, 2.0), (1.0, 2.0)), ((3.0, 1.0), (3.0, 1.0)))
    with pytest.raises(ConfigError, match="'replica_times' must be unset unless schedule is "
                       "gpipe, 1f1b, 1f1b-dynamic or interleaved, or swarm with a strategy"):
        TrainingConfig(stages=2, replicas=2, schedule="swarm", replica_times=times)
    cfg = TrainingConfig(stages=2, replicas=2, schedule="swarm", replica_times=times,
                         strategy="swarm")
    assert cfg.replica_times == times


def test_spot_model_with_checkpoints_runs_the_des_restart_model(tmp_path, capsys):
    """The spot model with the DES's restart model (checkpoints, restarts): the watchdog's
    failure-free step keeps the strategy (the plan's times need it) and is the plan's step."""
    from sim.profiles.swarm import swarm_plan_config
    from sim.training.stall import nominal_step_time

    plan = _two(tmp_path, [_rep("A100-40", 2)], [_rep("A100-40", 2)])
    got = _run(capsys, plan, "--strategy", "swarm", "--mtbf", "100", "--replace-time", "20",
               "--restart-cost", "10", "--checkpoint-every", "5", steps=200)
    assert got["finished"] == 1.0 and got["preemptions"] > 0 and got["restarts"] > 0
    p, profiles = read_plan(plan), load_profiles(models=("OPT-350",))

    def rebuild(q):
        return build_plan(q, profiles, model="OPT-350")
    cfg, notes = swarm_plan_config(p, rebuild(p), rebuild, routing="round-robin",
                                   strategy="swarm", steps=200, mtbf=100.0, replace_time=20.0,
                                   restart_cost=10.0, checkpoint_every=5)
    assert notes == ()
    assert nominal_step_time(cfg) == pytest.approx(_pipeline(_pieces(plan), 8), rel=1e-12)
