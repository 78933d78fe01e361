"""sim.profiles.build: a plan on the profiles as a TrainingConfig, its memory, its explanation."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
    read_plan,
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
    # Sailor's engine rebuilds the received activation by an fp32 all-gather over the TP group
    # (its deepspeed/pipe_engine.py:757): 1 of 2 halves of 2 x 2048 x 1024 x 4 bytes, over the
    # measured Titan-RTX pair curve
    half = 2 * prof.model("OPT-350").layer_sizes(2)[11].activation_bytes / 2
    gather = half / prof.intra_node_bandwidth("Titan-RTX", 2, half)[0]
    assert b.gather_times[1][0] == pytest.approx((gather, 0.0), rel=1e-12)
    assert c.replica_times[1][0] == (math.fsum(lt[x].forward for x in range(12, 26)) + gather,
                                     math.fsum(lt[x].backward for x in range(12, 26)))
    assert c.microbatches == 128 and c.p2p == "blocking" and c.schedule == "1f1b"
    assert b.behaviour.framework.key == "sailor-deepspeed" and b.behaviour.precision == "fp32"
    out = training_model(c, Streams(0).replication(0))
    assert out["step_time_mean"] == pytest.approx(
        predictions("training", c)["step_time_mean"]["value"], abs=1e-9)
    # regression pin of the deterministic prediction (docs/real_runs.md's table)
    assert out["step_time_mean"] == pytest.approx(121.040, abs=1e-3)


def test_transfers_and_allreduce_follow_the_curves(prof, runs, tie):
    """A hop is tp flows of the partition metadata (8 (7 + tp) bytes), then tp flows of 1/tp
    of the activation; the all-reduce is a bucketed ring; the artifact's OPT is untied (no
    tied all-reduce), a tied OPT-350's plan has one."""
    run = runs["clariden-OPT-350-N16_D4"]
    b = build_plan(run.plan, prof, steps=1)
    m = prof.model("OPT-350")
    a = run.plan.stages[0].replicas[0]
    size = 8 * m.layer_sizes(4)[4].activation_bytes
    assert b.transfer_times[0][0][0] == pytest.approx(
        prof.network.transfer_time(a.node, a.node, 8 * (7 + 4), 4)
        + prof.network.transfer_time(a.node, a.node, size / 4, 4))
    params = sum(m.layer_sizes(4)[x].params for x in run.plan.stages[1].layers)
    nodes = [(r, (1, i)) for i, r in enumerate(run.plan.stages[1].replicas)]
    n = len(nodes)
    step = prof.network.transfer_time(nodes[0][0].node, nodes[0][0].node, params * 4 / n, 4)
    assert b.allreduce_times[1] == pytest.approx(2 * (n - 1) * step)
    big = plan_allreduce_time(prof.network, nodes, [4] * n, 2.5 * BUCKET_ELEMENTS * 4)
    one = plan_allreduce_time(prof.network, nodes, [4] * n, BUCKET_ELEMENTS * 4)
    half = plan_allreduce_time(prof.network, nodes, [4] * n, 0.5 * BUCKET_ELEMENTS * 4)
    assert big == pytest.approx(2 * one + half)  # three buckets, one after the other
    assert b.tied_allreduce_time == 0 and b.config.tied_allreduce_time == 0
    t = build_plan(run.plan, tie(prof, "OPT-350"), steps=1)
    assert t.tied_allreduce_time > 0 and t.config.tied_allreduce_time == t.tied_allreduce_time


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
    assert lk.bandwidth(size) == pytest.approx(prof.network.link(a.node, z.node, 1).bandwidth(size))
    assert lk.reverse_bandwidth(size) == pytest.approx(
        prof.network.link(z.node, a.node, 1).bandwidth(size))
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
    """A GPU the profile lacks, layers not covering the model, a micro-batch size too far from
    the profiled ones, no memory, no model."""
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the profile of OPT-350"):
        build_plan(_plan("H100", 4, 4), prof)
    other = Profiles(prof.models, GPUCatalogue(prof.gpus.gpus[1:]), prof.network)
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the catalogue"):
        build_plan(_plan("GH-96", 4, 4), other)
    with pytest.raises(ConfigError, match=r"'layers' must be stages covering the model's layers "
                                          r"0\.\.25 exactly once: '0\.\.20'"):
        build_plan(_plan("GH-96", 4, 4, last=20), prof)
    derived = build_plan(_plan("GH-96", 8, 8), prof)  # TP 8 was not profiled: from TP 1
    assert any("GH-96 TP 8 derived from TP 1" in n for n in derived.estimates)
    with pytest.raises(ConfigError, match=r"'microbatch_size' must be a micro-batch size the "
                                          r"profile of OPT-350 measured on GH-96 at TP 4 "
                                          r"\(1, 2, 4, 8, 16, 32, 64, 128\) or one within "
                                          r"\[0\.5, 256\]"):
        build_plan(_plan("GH-96", 4, 4, mbs=512), prof)
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


def test_explain_says_which_micro_batch_count_is_per_pipeline(capsys):
    """The shipped clariden-OPT-350-N8_D2 plan, 2 pipelines: --explain's header names pipeline
    0's 32 micro-batches as a part of the step's m=64 (the run line's m), not a bare "32
    micro-batches" next to "m=64"."""
    plan = str(Path(__file__).parents[1] / "sim/profiles/data/runs/clariden-OPT-350-N8_D2.json")
    cmd = ["train", "--plan", plan, "--model", "OPT-350", "--steps", "1", "--replications", "1",
           "--explain"]
    assert main(cmd + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mk, m = out["explain"]["microbatches"], out["microbatches"]
    assert (mk, m) == (32, 64)
    assert main(cmd) == 0
    text = capsys.readouterr().out
    assert (f"pipeline 0, which runs {mk} of the step's m={m} micro-batches; seconds" in text
            and f", m={m}, N=1;" in text)


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


def test_gpt_neo_on_gh200_in_the_artifacts_format_runs(tmp_path, tie):
    """Issue 35's refused plan: GPT-Neo-2.7 in 2 stages of 2 TP-4 GH200 replicas, micro-batch 8,
    as a Sailor plan_config. The artifact's GPT-Neo is untied (GPTNeoModelPipe ends with a
    LayerNorm LayerSpec): no tied all-reduce. Tied (a profile with tied_embeddings), its
    all-reduce is the word embedding (before: the profile's last layer, 5120 values, 10 KB, which
    met the curve's negative fit); the DES gives the closed form's step either way."""
    r = [[[["GH-96", 4, "us-central1-a"]], 4]] * 2
    doc = {"zone": "us-central1-a", "pipeline_list": [{
        "num_stages": 2, "layers_per_stage": [list(range(17)), list(range(17, 34))],
        "tmp_per_stage": [r, r], "dp": [2, 2]}], "mbs": 8, "gbs": 64}
    path = tmp_path / "clariden-GPT-NEO-N4_D2.json"
    path.write_text(json.dumps(doc))
    shipped = load_profiles(models=("GPT-Neo-2.7",))
    run_plan = read_plan(path, "GPT-Neo-2.7")
    for neo, size in ((shipped, 0), (tie(shipped, "GPT-Neo-2.7"), 50688 * 2560 // 4 * 4)):
        b = build_plan(run_plan, neo, steps=1, network=True)
        assert b.config.tied_allreduce_size == size
        closed = build_plan(run_plan, neo, steps=1)
        t = training_model(b.config, Streams(0).replication(0))["step_time_mean"]
        assert t == pytest.approx(
            predictions("training", closed.config)["step_time_mean"]["value"], rel=1e-9)


def test_tp8_over_two_stages_shares_the_largest_measured_flow_count(tmp_path):
    """Issue 35: a TP-8 plan over 2 stages of 8-GPU GH200 nodes needs 8 concurrent flows per
    hop, which the network never measured (1, 2, 4). Upstream DeepSpeed runs it: each hop's 8
    flows of 1/8 of the activation (DeepSpeed partitions it) share the 4-flow curve, max-min
    fair, so the hop takes ``8 S / B_4(S)``, after the 8 ranks' partition metadata (8 (7 + 8)
    bytes each) the same way; the DES over that link gives the closed form's
    step; the estimate is named; a count below every measured one is still refused in one
    line. The Sailor artifact, which the plan's format names, refuses TP 8 (its
    Megatron-DeepSpeed's core/parallel_state.py:112-114 asserts 1, 2 or 4)."""
    from dataclasses import replace as replace_field

    from sim.profiles.build import pair_link
    from sim.profiles.frameworks import FrameworkSpec

    r = [[[["GH-96", 8, "us-central1-a"]], 8]]
    doc = {"zone": "us-central1-a", "pipeline_list": [{
        "num_stages": 2, "layers_per_stage": [list(range(13)), list(range(13, 26))],
        "tmp_per_stage": [r, r], "dp": [1, 1]}], "mbs": 2, "gbs": 16}
    path = tmp_path / "gh-tp8.json"
    path.write_text(json.dumps(doc))
    prof = load_profiles(models=("OPT-350",))
    plan = read_plan(path, "OPT-350")
    with pytest.raises(ConfigError, match=r"^'tp' must be 1, 2 or 4 with framework "
                       r"sailor-deepspeed, at stage 0 replica 0 \(a Sailor plan's "
                       r"tmp_per_stage\[0\]\[0\]; .*core/parallel_state\.py:112-114.*\): 8$"):
        build_plan(plan, prof, steps=1)
    plan = replace_field(plan, framework=FrameworkSpec("deepspeed"))
    b = build_plan(plan, prof, steps=1)
    rep = plan.stages[0].replicas[0]
    four = prof.network.link(rep.node, rep.node, 4)
    with pytest.raises(ConfigError, match="flows given: 1, 2, 4"):
        prof.network.link(rep.node, rep.node, 8)
    assert pair_link(prof.network, (rep, (0, 0)), (rep, (1, 0))) is four
    size = 2 * b.behaviour.activation_bytes / prof.model("OPT-350").bytes_per_value * \
        prof.model("OPT-350").layer_sizes(8)[12].activation_bytes
    meta = 8 * (7 + 8)
    assert b.transfer_times[0][0][0] == pytest.approx(
        four.latency + 8 * meta / four.bandwidth_at(meta)
        + four.latency + 8 * (size / 8) / four.bandwidth_at(size / 8), rel=1e-12)
    assert any("8/8 flows" in e and "4/4-flow curve" in e for e in b.estimates)
    net = build_plan(plan, prof, steps=1, network=True)
    t = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert t == pytest.approx(predictions("training", b.config)["step_time_mean"]["value"],
                              rel=1e-9)
    # an unmeasured combination inside the measured range is not extrapolated (RTX: 1, 2, 4, 8
    # at both ends, only equal counts measured)
    titan = ReplicaSpec("Titan-RTX", 2, 8, "us-central1-a")
    assert prof.network.shared_link(titan.node, titan.node, 2, 4) is None
    # no count at or below the plan's measured: still refused, naming the network
    only8 = type(prof.network)(tuple(x for x in prof.network.links if x.src_flows >= 4))
    assert only8.shared_link(rep.node, rep.node, 2) is None
    with pytest.raises(ConfigError, match="'network' must be"):
        pair_link(only8, (replace_tp(rep, 2), (0, 0)), (replace_tp(rep, 2), (1, 0)))


def replace_tp(rep, tp):
    """``rep`` at TP ``tp``."""
    from dataclasses import replace

    return replace(rep, tp=tp)


@pytest.mark.slow
def test_every_plan_a_user_can_write_from_the_shipped_profiles_runs():
    """1,616 plans in the artifact's format (4 models, every profiled GPU type, micro-batch size
    and TP degree, unprofiled sizes between them, 1-4 stages, 1-2 replicas, two-type pipelines;
    stages whose replicas differ in TP): each runs, or is refused for not fitting in GPU
    memory, or (every TP-8 plan, and only those) for a TP degree the artifact does not run
    (its Megatron-DeepSpeed asserts 1, 2 or 4: core/parallel_state.py:112-114)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "real_runs.py"
    spec = importlib.util.spec_from_file_location("dtsim_real_runs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.check_user_plans()
    assert res["plans"] >= 1616 and res["refused_other"] == []
    assert res["refused_tp"] == sum("-tp8-" in name for name, _, _ in mod.user_plans())
    assert res["ran"] > 600 and res["with_estimates"] > 100


def test_replicas_on_named_hosts_share_the_node(prof):
    """Replicas on one host all-reduce over its intra-node link; between hosts a flow takes the
    least of its GPU's curve, the node NICs' and the pair's shares; the DES equals the closed
    form, and two pipelines crossing one NIC at once slow each other (in both)."""
    z = "us-central1-a"

    def plan(shared: bool, dp: int = 2) -> Plan:
        a = tuple(ReplicaSpec("RTX-3090", 1, 2, z, host="A" if shared else f"A{i}")
                  for i in range(dp))
        b = tuple(ReplicaSpec("Titan-RTX", 1, 2, z, host="B" if shared else f"B{i}")
                  for i in range(dp))
        return Plan((StageSpec(tuple(range(13)), a), StageSpec(tuple(range(13, 26)), b)), 2,
                    16 * dp, model="OPT-350")

    shared = build_plan(plan(True), prof, steps=1, check_memory=False)
    params = sum(prof.model("OPT-350").layer_sizes(1)[x].params for x in range(13)) * 4
    bw = prof.intra_node_bandwidth("RTX-3090", 2, params / 2)[0]
    assert shared.allreduce_times[0] == pytest.approx(2 * (params / 2) / bw, rel=1e-12)
    own = build_plan(plan(False), prof, steps=1, check_memory=False)
    assert own.allreduce_times[0] > 100 * shared.allreduce_times[0]  # over the 1 Gbit network
    size = 2 * prof.model("OPT-350").layer_sizes(1)[12].activation_bytes
    a, b = plan(False).stages[0].replicas[0], plan(False).stages[1].replicas[0]
    net = prof.network
    rate = min(net.link(a.node, a.node, 1, 1).bandwidth(size),
               net.link(a.node, a.node, 2, 2).bandwidth(size),
               net.link(a.node, b.node, 2, 2).bandwidth(size),
               net.link(b.node, b.node, 2, 2).bandwidth(size),
               net.link(b.node, b.node, 1, 1).bandwidth(size))
    assert own.transfer_times[0][0][0] == pytest.approx(size / rate, rel=1e-12)
    one = build_plan(plan(True, dp=1), prof, steps=1, check_memory=False, network=True)
    closed = build_plan(plan(True, dp=1), prof, steps=1, check_memory=False)
    t1 = training_model(one.config, Streams(0).replication(0))["step_time_mean"]
    assert t1 == pytest.approx(predictions("training", closed.config)["step_time_mean"]["value"],
                               rel=1e-9)
    two = build_plan(plan(True), prof, steps=1, check_memory=False, network=True)
    t2 = training_model(two.config, Streams(0).replication(0))["step_time_mean"]
    # the two pipelines' transfers cross A's and B's NICs at once: the closed form counts both
    # (nic_shares), slower than one pipeline's alone on hosts of its own, and the DES agrees
    assert shared.transfer_times[0][0][0] > 1.05 * own.transfer_times[0][0][0]
    assert t2 == pytest.approx(predictions("training", shared.config)["step_time_mean"]["value"],
                               rel=1e-9)
    with pytest.raises(ConfigError, match="'host' must be one node kind"):
        Plan((StageSpec((0,), (ReplicaSpec("RTX-3090", 1, 2, z, host="A"),
                                ReplicaSpec("Titan-RTX", 1, 2, z, host="A"))),), 1, 2)
    with pytest.raises(ConfigError, match=r"'host' must be hosts whose replicas' TP degrees sum "
                                          r"to at most gpus_per_node \(2\): 'A: 3 GPUs'"):
        Plan((StageSpec((0,), (ReplicaSpec("RTX-3090", 2, 2, z, host="A"),
                                ReplicaSpec("RTX-3090", 1, 2, z, host="A"))),), 1, 2)


def _ddp_plan(**fw) -> Plan:
    gh = ReplicaSpec(gpu="GH-96", tp=4, gpus_per_node=4, zone="us-central1-a")
    from sim.profiles.frameworks import FrameworkSpec

    return Plan(stages=(StageSpec(tuple(range(26)), (gh,) * 3),), microbatch_size=2,
                global_batch_size=24, model="OPT-350",
                framework=FrameworkSpec("ddp", options=tuple(fw.items())))


@pytest.mark.parametrize("cap", [None, 100])
def test_ddp_plan_overlaps_its_allreduce_with_the_backward_pass_in_ddps_buckets(prof, cap):
    """The framework sets the sync (PyTorch DDP: its gradients in 25 MiB buckets, the first
    1 MiB, released as the last backward pass produces them). Exact reference: a one-stage plan's
    step is its replicas' passes, then each bucket's ring (the plan's closed-form ring over the
    pair curve, which the network reproduces) starting once produced and once the one before is
    done, then the optimizer step; the wrong models (the all-reduce after the backward pass, or
    Megatron-LM's equal buckets) are rejected."""
    from sim.training.traffic import DDP_FIRST_BUCKET_BYTES, gradient_buckets

    plan = _ddp_plan(**({} if cap is None else {"bucket_cap_mb": cap}))
    b = build_plan(plan, prof, steps=1, network=True)
    c = b.config
    rule = "allreduce:overlap=backward" + ("" if cap is None else
                                           f",bucket_size={cap * 1024 * 1024}") + ",buckets=ddp"
    assert c.sync == rule and b.behaviour.framework.key == "ddp"
    size = c.allreduce_sizes[0]
    bucket = None if cap is None else cap * 1024 * 1024
    sizes = gradient_buckets(size, bucket, rule="ddp")
    assert len(sizes) > 2 and (cap is not None or sizes[-1] == DDP_FIRST_BUCKET_BYTES)
    f, bw, opt = b.stage_times[0][0]
    m = c.microbatches // 3
    nodes = [(x, (0, i)) for i, x in enumerate(plan.stages[0].replicas)]

    def ring(s: float) -> float:
        return plan_allreduce_time(prof.network, nodes, [4] * 3, s, math.inf, prof)

    def step(buckets: list[float]) -> float:
        start, end, acc = m * (f + bw) - bw, 0.0, 0.0
        for k, s in enumerate(buckets):
            acc += s
            ready = start + bw * (acc / size if k < len(buckets) - 1 else 1.0)
            end = max(end, ready) + ring(s)
        return end + opt

    got = training_model(c, Streams(0).replication(0))["step_time_mean"]
    assert got == pytest.approx(step(sizes), rel=1e-9)
    after = m * (f + bw) + ring(size) + opt
    assert got < after - 0.1 * ring(size)
    equal = gradient_buckets(size, bucket or 25 * 1024 * 1024, rule="megatron")
    assert not step(equal) == pytest.approx(got, rel=1e-6)


def test_the_framework_sets_the_sync_and_a_given_sync_overrides_it(prof, runs):
    """Megatron-LM with overlap_grad_reduce: buckets of max(4e7, 1e6 dp) elements, Megatron's rule;
    without: after the last backward pass in one bucket; --sync overrides either; sync none is
    refused in one line; the closed form of the overlapped all-reduce is the DES's step."""
    from dataclasses import replace

    from sim.profiles.frameworks import FrameworkSpec

    run = runs["clariden-OPT-350-N8_D4"]
    ov = replace(run.plan, framework=FrameworkSpec("megatron",
                                                   options=(("overlap_grad_reduce", True),)))
    b = build_plan(ov, prof, steps=1, network=True)
    assert b.config.sync == ("allreduce:overlap=backward,bucket_size=160000000,buckets=megatron")
    assert b.config.bucket_size == math.inf
    plain = build_plan(replace(run.plan, framework=FrameworkSpec("megatron")), prof, steps=1,
                       network=True)
    assert plain.config.sync == "allreduce" and plain.config.bucket_size == math.inf
    forced = build_plan(run.plan, prof, steps=1, network=True,
                        sync="allreduce:overlap=backward")
    assert forced.config.sync == b.config.sync  # DeepSpeed forced to: Megatron's default bucket
    off = build_plan(ov, prof, steps=1, network=True, sync="allreduce")
    assert off.config.sync == "allreduce" and off.config.bucket_size == math.inf
    t = {k: training_model(x.config, Streams(0).replication(0))["step_time_mean"]
         for k, x in (("overlap", b), ("after", plain), ("off", off))}
    assert t["off"] == t["after"] and t["overlap"] < t["after"]
    with pytest.raises(ConfigError, match="^'sync' must be allreduce"):
        build_plan(run.plan, prof, steps=1, network=True, sync="none")
    closed = build_plan(ov, prof, steps=1)  # the closed form of the overlapped buckets
    assert predictions("training", closed.config)["step_time_mean"]["value"] == pytest.approx(
        t["overlap"], rel=1e-9)


def test_user_plans_have_the_replicas_their_names_say():
    """Each plan of ``tools/real_runs.py --user-plans`` named ``-D{dp}`` has ``dp`` replicas at
    every stage (the 2-stage, 2-replica plans were written with one replica: a list of as many
    replicas as stages was read as one node kind per stage), and a two-type pipeline one."""
    import importlib.util
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "real_runs.py"
    spec = importlib.util.spec_from_file_location("dtsim_real_runs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = set()
    for name, _, doc in mod.user_plans():
        pipe = doc["pipeline_list"][0]
        hit = re.search(r"-S(\d+)-D(\d+)$", name)
        want = int(hit.group(2)) if hit else 1  # the two-type pipelines: one replica per stage
        assert pipe["num_stages"] == len(pipe["tmp_per_stage"])
        assert [len(st) for st in pipe["tmp_per_stage"]] == [want] * pipe["num_stages"], name
        assert pipe["dp"] == [want] * pipe["num_stages"], name
        if hit:
            seen.add((int(hit.group(1)), want))
    assert (2, 2) in seen
