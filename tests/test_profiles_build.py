"""sim.profiles.build: a plan on the profiles as a TrainingConfig, its memory, its explanation."""

from __future__ import annotations

import json
import math

import pytest

from sim.cli import main
from sim.engines import predictions
from sim.errors import ConfigError
from sim.profiles import (
    GPUCatalogue,
    Plan,
    Profiles,
    ReplicaSpec,
    StageSpec,
    load_profiles,
    read_runs,
)
from sim.profiles.build import BUCKET_ELEMENTS, build_plan, explain_rows, plan_allreduce_time
from sim.rng import Streams
from sim.training import training_model


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


@pytest.fixture(scope="module")
def runs():
    return {r.name: r for r in read_runs()}


def test_plan_config_from_the_profile(prof, runs):
    """Stage times are the layers' sums at the replica's GPU, mbs and TP; the DES runs the plan."""
    run = runs["mit-N2_D1"]
    b = build_plan(run.plan, prof, steps=1)
    c = b.config
    lt = prof.model("OPT-350").layer_times("Titan-RTX", 2, 2)
    assert c.replica_times[1][0] == (math.fsum(lt[x].forward for x in range(12, 26)),
                                     math.fsum(lt[x].backward for x in range(12, 26)))
    assert c.microbatches == 128 and c.p2p == "blocking" and c.schedule == "1f1b"
    out = training_model(c, Streams(0).replication(0))
    assert out["step_time_mean"] == pytest.approx(
        predictions("training", c)["step_time_mean"]["value"], abs=1e-9)
    # regression pin of the deterministic prediction (docs/real_runs.md's table)
    assert out["step_time_mean"] == pytest.approx(122.7296, abs=1e-3)


def test_transfers_and_allreduce_follow_the_curves(prof, runs):
    """A hop is tp flows of 1/tp of the activation; the all-reduce is a bucketed ring."""
    run = runs["clariden-OPT-350-N16_D4"]
    b = build_plan(run.plan, prof, steps=1)
    m = prof.model("OPT-350")
    a = run.plan.stages[0].replicas[0]
    size = 8 * m.layer_sizes(4)[4].activation_bytes
    assert b.transfer_times[0][0][0] == pytest.approx(
        prof.network.transfer_time(a.node, a.node, size / 4, 4))
    params = sum(m.layer_sizes(4)[x].params for x in run.plan.stages[1].layers)
    nodes = [(r, (1, i)) for i, r in enumerate(run.plan.stages[1].replicas)]
    n = len(nodes)
    step = prof.network.transfer_time(nodes[0][0].node, nodes[0][0].node, params * 4 / n, 4)
    assert b.allreduce_times[1] == pytest.approx(2 * (n - 1) * step)
    big = plan_allreduce_time(prof.network, nodes, [4] * n, 2.5 * BUCKET_ELEMENTS * 4)
    one = plan_allreduce_time(prof.network, nodes, [4] * n, BUCKET_ELEMENTS * 4)
    half = plan_allreduce_time(prof.network, nodes, [4] * n, 0.5 * BUCKET_ELEMENTS * 4)
    assert big == pytest.approx(2 * one + half)  # three buckets, one after the other
    assert b.tied_allreduce_time > 0 and b.config.tied_allreduce_time == b.tied_allreduce_time


def test_each_direction_takes_its_own_curve(prof, runs):
    """The artifact's curves are per ordered pair: the activation goes RTX-3090 -> Titan-RTX on
    that curve, its gradient comes back on the Titan-RTX -> RTX-3090 one, and the network link
    carries the second as its reverse bandwidth; a pair measured one way only is symmetric."""
    from sim.profiles.build import pair_link, plan_network

    a, z = (ReplicaSpec("RTX-3090", 1, 1, "us-central1-a"),
            ReplicaSpec("Titan-RTX", 1, 1, "us-central1-a"))
    plan = Plan(stages=(StageSpec(layers=tuple(range(12)), replicas=(a,)),
                        StageSpec(layers=tuple(range(12, 26)), replicas=(z,))),
                microbatch_size=2, global_batch_size=8, model="OPT-350")
    b = build_plan(plan, prof, steps=1, check_memory=False)
    size = 2 * prof.model("OPT-350").layer_sizes(1)[11].activation_bytes
    there = prof.network.transfer_time(a.node, z.node, size, 1)
    back = prof.network.transfer_time(z.node, a.node, size, 1)
    assert there != pytest.approx(back, rel=1e-3)  # the two directions were measured apart
    assert b.transfer_times[0][0] == pytest.approx((there, back))
    (lk,) = plan_network(plan, prof.network, tied=False).links
    assert (lk.u, lk.v) == ("s0r0", "s1r0") and lk.reverse_bandwidth is not None
    assert lk.bandwidth(size) == pytest.approx(prof.network.link(a.node, z.node, 1).curve.at(size))
    assert lk.reverse_bandwidth(size) == pytest.approx(
        prof.network.link(z.node, a.node, 1).curve.at(size))
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)  # the DES sees both
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(predictions("training", b.config)["step_time_mean"]["value"], abs=1e-9)
    titan, rtx2080 = (ReplicaSpec("Titan-RTX", 2, 2, "us-central1-a"),
                      ReplicaSpec("RTX-2080", 2, 2, "us-central1-a"))
    with pytest.raises(ConfigError):
        prof.network.link(rtx2080.node, titan.node, 2)
    assert pair_link(prof.network, (rtx2080, (1, 0)), (titan, (0, 0))) is \
        prof.network.link(titan.node, rtx2080.node, 2)


def test_memory_terms(prof, runs):
    """Weights, gradients, Adam state, activations in flight, buffers and overhead per GPU."""
    run = runs["clariden-OPT-350-N16_D4"]
    b = build_plan(run.plan, prof, steps=1)
    m = prof.model("OPT-350")
    g = next(x for x in b.memory if x.stage == 1)
    sizes = m.layer_sizes(4)
    P = sum(sizes[x].params for x in run.plan.stages[1].layers)
    assert (g.weights, g.gradients, g.optimizer) == (4 * P, 4 * P, 8 * P)
    act = 8 * sum(sizes[x].activation_memory_bytes for x in run.plan.stages[1].layers)
    assert g.activations == 3 * act  # 1F1B: L - j = 3 micro-batches in flight at stage 1 of 4
    assert g.buffers == 3 * 8 * sizes[4].activation_bytes
    assert g.overhead == prof.gpus["GH-96"].overhead(4)
    assert b.peak_memory == max(x.total for x in b.memory)
    gp = build_plan(run.plan, prof, steps=1, schedule="gpipe", check_memory=False)
    assert next(x for x in gp.memory if x.stage == 1).activations == 32 * act


def _plan(gpu: str, tp: int, gpn: int, last: int = 25, mbs: int = 2) -> Plan:
    r = ReplicaSpec(gpu, tp, gpn, "us-central1-a")
    return Plan((StageSpec(tuple(range(0, last + 1)), (r,)),), mbs, 4 * mbs, model="OPT-350")


def test_plans_refuse_in_one_line(prof):
    """A GPU the profile lacks, layers not covering the model, a TP without profile, no memory."""
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the profile of OPT-350"):
        build_plan(_plan("H100", 4, 4), prof)
    other = Profiles(prof.models, GPUCatalogue(prof.gpus.gpus[1:]), prof.network)
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the catalogue"):
        build_plan(_plan("GH-96", 4, 4), other)
    with pytest.raises(ConfigError, match=r"'layers' must be stages covering the model's layers "
                                          r"0\.\.25 exactly once: '0\.\.20'"):
        build_plan(_plan("GH-96", 4, 4, last=20), prof)
    with pytest.raises(ConfigError, match="'tp' must be a TP degree the profile of OPT-350 "
                                          "measured on GH-96"):
        build_plan(_plan("GH-96", 8, 8), prof)
    with pytest.raises(ConfigError, match=r"'plan' must be a plan that fits in GPU memory: "
                                          r"'stage 0 on RTX-2080 \(replica 0, TP 2\) needs"):
        build_plan(_plan("RTX-2080", 2, 8, mbs=8), prof)
    with pytest.raises(ConfigError, match="'model' must be given"):
        build_plan(Plan(_plan("GH-96", 4, 4).stages, 2, 8), prof)


def test_explain_adds_up(prof, runs):
    """Compute, point-to-point and bubble fill the pipeline phase; the tail completes the step."""
    b = build_plan(runs["mit-N2_D1"].plan, prof, steps=1)
    x = explain_rows(b)
    for s in x["stages"]:
        assert s["compute"] + s["p2p"] + s["bubble"] == pytest.approx(x["pipeline_time"])
    assert x["iteration"] == pytest.approx(predictions("training", b.config)["step_time_mean"]
                                           ["value"])


def _two_stage_plan(tmp_path, global_batch_size: int):
    """A plan file: OPT-350 in two stages (layers 0-11, 12-25), one TP-4 GH-96 replica each."""
    plan = tmp_path / "p.json"
    r = [{"gpu": "GH-96", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}]
    plan.write_text(json.dumps({"model": "OPT-350", "microbatch_size": 8,
                                "global_batch_size": global_batch_size,
                                "stages": [{"first_layer": 0, "last_layer": 11, "replicas": r},
                                           {"first_layer": 12, "last_layer": 25,
                                            "replicas": r}]}))
    return plan


def test_cli_plan_json_and_explain(tmp_path, capsys):
    """dtsim train --plan: step_time_mean (s) and peak_memory (bytes) in --json; --explain prints."""
    plan = _two_stage_plan(tmp_path, global_batch_size=64)
    cmd = ["train", "--plan", str(plan), "--steps", "1", "--replications", "1"]
    assert main(cmd + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step_time_mean"] > 0 and out["peak_memory"] > 1e9 and out["p2p"] == "blocking"
    assert main(cmd + ["--explain"]) == 0
    text = capsys.readouterr().out
    assert "where an iteration's time goes" in text and "all-reduce" in text
    assert main(cmd + ["--stages", "3"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "'stages' must be given only without --plan (the plan and the profiles set it): 3")


@pytest.mark.parametrize("name,p2p", [("clariden-OPT-350-N4_D2", "blocking"),
                                      ("clariden-OPT-350-N4_D2", "overlap"),
                                      ("mit-N2_D2", "blocking"), ("mit-N2_D1", "blocking")])
def test_plan_over_the_network_equals_its_closed_form(prof, runs, name, p2p):
    """With every transfer and all-reduce as flows of sim.network, a plan whose transfers never
    share a link takes exactly its closed-form step (the curves' B_t / t per flow)."""
    run = runs[name]
    closed = build_plan(run.plan, prof, p2p=p2p, steps=1)
    net = build_plan(run.plan, prof, p2p=p2p, steps=1, network=True)
    assert net.config.network is not None and net.config.allreduce_sizes is not None
    out = training_model(net.config, Streams(0).replication(0))
    assert out["step_time_mean"] == pytest.approx(
        predictions("training", closed.config)["step_time_mean"]["value"], abs=1e-9)


def test_overlapped_transfers_queue_on_the_slow_link(prof, runs):
    """Overlapped activations that cross the 1 Gbit/s link faster than it moves them queue on
    their channel, each at the whole link: the network run is the closed form's FIFO max-plus
    (1e-9); with each on a connection of its own (p2p shared) they share the link max-min and
    the run is slower."""
    run = runs["mit-N2_D1"]
    closed = build_plan(run.plan, prof, p2p="overlap", steps=1)
    net = build_plan(run.plan, prof, p2p="overlap", steps=1, network=True)
    exact = predictions("training", closed.config)["step_time_mean"]["value"]
    out = training_model(net.config, Streams(0).replication(0))
    assert out["step_time_mean"] == pytest.approx(exact, rel=1e-9)
    shared = build_plan(run.plan, prof, p2p="shared", steps=1, network=True)
    assert training_model(shared.config, Streams(0).replication(0))["step_time_mean"] > \
        exact + 0.05


def test_plan_over_the_network_restarts_after_failures(prof, runs):
    """Preemptions lose the step, its flows are withdrawn, and the run restarts and finishes."""
    run = runs["clariden-OPT-350-N4_D2"]
    b = build_plan(run.plan, prof, steps=3, network=True, mtbf=5.0, replace_time=0.5,
                   restart_cost=0.2, checkpoint_every=1, checkpoint_cost=0.1)
    out = training_model(b.config, Streams(0).replication(0))
    assert out["finished"] == 1.0 and out["restarts"] >= 1
    closed = build_plan(run.plan, prof, steps=3, mtbf=5.0, replace_time=0.5, restart_cost=0.2,
                        checkpoint_every=1, checkpoint_cost=0.1)
    assert training_model(closed.config, Streams(0).replication(0))["training_time"] == \
        pytest.approx(out["training_time"], abs=1e-9)  # nothing contends: the same run


def test_cli_plan_under_a_failure_trace_with_checkpoints_and_prices(tmp_path, capsys):
    """Everything dtsim train does applies on top of a real plan: stage 1's node is down for
    [1, 2) s in the second step, which is lost; the job restarts from the checkpoint after step
    1 once the node is back (+ restart 0.2 s) and finishes in 2.2 + 2 T + 0.2 (T the plan's step,
    0.1 s checkpoints). --price is per GPU-hour: a TP-4 replica costs 4 times it."""
    plan = _two_stage_plan(tmp_path, global_batch_size=32)
    trace = tmp_path / "down.csv"
    trace.write_text("worker,start,end\ns1r0,1.0,2.0\n")
    cmd = ["train", "--plan", str(plan), "--steps", "3", "--replications", "1", "--json"]
    assert main(cmd) == 0
    T = json.loads(capsys.readouterr().out)["step_time_mean"]
    assert T + 0.1 < 1.0 < 2 * T + 0.1  # the outage starts inside the second step
    assert main(cmd + ["--failure-trace", str(trace), "--checkpoint-every", "1",
                       "--checkpoint-cost", "0.1", "--restart-cost", "0.2", "--price", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["wall_time_mean"] == pytest.approx(2.2 + 2 * T + 0.2, abs=1e-9)
    assert out["lost_time"]["checkpoint"] == pytest.approx(0.3, abs=1e-12)
    # each TP-4 replica is billed 4 x 2 per hour while its instance exists; the trace's node is
    # gone (not billed) for its 1 s outage (sim.training.billing)
    assert out["cost"] == pytest.approx(2 * 4 * (2 * out["wall_time_mean"] - 1.0) / 3600,
                                        rel=1e-9)
