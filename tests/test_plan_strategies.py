"""``dtsim train --plan P --strategy S``: each formation's step is the plan's own, re-planned
for it and run on the framework engine (sim.profiles.formations); exact against ``--plan``
runs of the edited plans and against a hand timeline on a scripted trace."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.profiles import load_profiles, read_plan
from sim.profiles.formations import PlanStepTimes
from sim.profiles.formats import plan_to_data

RUNS = "sim/profiles/data/runs/"
#: OPT-350 in 2 stages x 2 replicas of GH200 nodes (TP 4), 64 micro-batches of 1 a step
PLAN = RUNS + "clariden-OPT-350-N4_D2.json"
BIG = 1e9


def _json(capsys, argv):
    assert main(["train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _step(capsys, plan, *extra):
    """``dtsim train --plan`` (no strategy): its one failure-free iteration."""
    out = _json(capsys, ["--plan", plan, "--model", "OPT-350", "--steps", "1",
                         "--replications", "1", *extra])
    return out["step_time_mean"]


def _edited(tmp_path, name, **changes):
    """The shipped plan as a dtsim plan file with ``changes`` (stages, global batch)."""
    data = plan_to_data(read_plan(PLAN))
    data.update(changes)
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def _full_and_one_pipeline(tmp_path, capsys):
    """The step times of PLAN as written (two pipelines) and edited to one pipeline."""
    data = plan_to_data(read_plan(PLAN))
    one = [dict(s, replicas=[dict(s["replicas"][0], count=1)]) for s in data["stages"]]
    return _step(capsys, PLAN), _step(capsys, _edited(tmp_path, "one.json", stages=one))


def _timer(plan=PLAN, model="OPT-350"):
    p = read_plan(plan)
    return PlanStepTimes(p, load_profiles(models=(model,)), model, tuple(dict(
        schedule="1f1b", p2p=None, framework=None, network=True).items()))


def test_formations_are_the_plan_replanned_bit_for_bit(tmp_path, capsys):
    """The full formation (2 pipelines of 2) is ``--plan``'s iteration; one pipeline of 2 is
    ``--plan`` on the plan with one replica a stage (the same global batch of 64); two
    pipelines of one node are the plan's 26 layers as one stage, 2 replicas (the merged
    template of reconfiguration's min_nodes=1). Bit for bit: the same build, the same DES."""
    t = _timer()
    assert t.formation_time((2, 2)) == _step(capsys, PLAN)
    data = plan_to_data(read_plan(PLAN))
    one = [dict(s, replicas=[dict(s["replicas"][0], count=1)]) for s in data["stages"]]
    assert t.formation_time((2,)) == _step(capsys, _edited(tmp_path, "one.json", stages=one))
    merged = [dict(data["stages"][0], last_layer=25)]
    assert t.formation_time((1, 1)) == _step(capsys, _edited(tmp_path, "merged.json",
                                                             stages=merged))
    # 64 micro-batches over 3 pipelines of one node: each timed at the larger share, 22
    assert t.formation_time((1, 1, 1)) == _step(capsys, _edited(
        tmp_path, "merged3.json", global_batch_size=66,
        stages=[dict(merged[0], replicas=[dict(merged[0]["replicas"][0], count=3)])]))
    # one pipeline runs the 64 micro-batches alone: slower than two, faster than twice
    assert t.formation_time((2, 2)) < t.formation_time((2,)) < 2 * t.formation_time((2, 2))


def test_a_shape_is_timed_once(monkeypatch):
    import sim.profiles.build as build

    calls = []
    real = build.build_plan
    monkeypatch.setattr(build, "build_plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    t = _timer()
    first = t.formation_time((2,))
    assert t.formation_time((2,)) == first
    assert len(calls) == 1


def test_checkpoint_restart_on_a_scripted_trace_by_hand(tmp_path, capsys):
    """2 x 2 GH200 nodes, checkpoint-restart every 2 steps (checkpoint 0.5 s, restart 3 s,
    boot 0), 5 steps; s1r1 gone for good at 4 s. T2 = the plan's iteration, T1 = one
    pipeline's (``--plan`` of the one-replica plan). By hand: steps 1, 2 at T2, 2 T2 (3.058),
    checkpoint to 2 T2 + 0.5; s1r1 lost mid step 3: back to 2 steps, restart to 7; one
    pipeline (s0r0 s1r0; s0r1 spare): steps 3, 4 to 7 + 2 T1, checkpoint, step 5, the final
    checkpoint: wall 7 + 3 T1 + 1, 1 restart, 3 checkpoints. Billing: s1r1 for its 4 s, the
    others for the wall, each 4 GPUs at the catalogue's GH-96 11.06 $/GPU-hour."""
    T2, T1 = _full_and_one_pipeline(tmp_path, capsys)
    assert 2 * T2 + 0.5 < 4.0 < 3 * T2 + 0.5  # the loss falls in step 3
    trace = tmp_path / "trace.csv"
    trace.write_text(f"worker,start,end\ns1r1,4.0,{BIG}\n")
    out = _json(capsys, ["--plan", PLAN, "--model", "OPT-350", "--steps", "5",
                         "--replications", "1", "--failure-trace", str(trace),
                         "--strategy", "checkpoint-restart:every=2,checkpoint=0.5,restart=3,"
                         "boot=0,settle=0"])
    wall = 7.0 + 3 * T1 + 1.0
    assert out["engine"] == "job"
    assert out["wall_time_mean"] == pytest.approx(wall, rel=1e-12)
    assert (out["restarts"], out["checkpoints"], out["steps"]) == (1.0, 3.0, 5)
    assert out["lost_time"]["work"] == pytest.approx(4.0 - (2 * T2 + 0.5), rel=1e-12)
    hours = (3 * wall + 4.0) / 3600
    assert out["worker_hours"] == pytest.approx(hours, rel=1e-12)
    assert out["cost"] == pytest.approx(hours * 4 * 11.06, rel=1e-12)
    assert out["samples_per_dollar"] == pytest.approx(5 * 64 / (hours * 4 * 11.06), rel=1e-12)
    assert out["samples_per_second"] == pytest.approx(5 * 64 / wall, rel=1e-12)
    # the exact reference is the strategy's replay on the same formations' times
    assert out["predicted_wall_time"] == pytest.approx(wall, rel=1e-12)


#: OPT-350 at TP 4 (the profile's fp32: 4 bytes a weight, Adam's 8 a parameter), per GPU:
#: layer 0 (embeddings) 15,073,280 parameters, layers 1-24 3,153,664 each, layer 25 12,978,176
#: (the head). Stage 0 holds layers 0-11, stage 1 layers 12-25.
STAGE0 = 15_073_280 + 11 * 3_153_664
STAGE1 = 13 * 3_153_664 + 12_978_176


def test_a_checkpoint_is_the_plans_bytes_over_the_bandwidth():
    """DeepSpeed's pipeline engine without bf16: data-parallel rank 0 of each stage writes its
    layers and its optimizer state, every TP rank its own (sim.profiles.formations); a
    restart reads the same on every node. The busiest node holds stage 1: 4 GPUs x (4 + 8)
    bytes x its parameters, whatever the number of pipelines."""
    assert (STAGE0, STAGE1) == (49_763_584, 53_975_808)
    t = _timer()
    assert t.checkpoint_rule() == "rank0"
    busiest = 4 * 12 * STAGE1  # 2,590,838,784 bytes
    assert t.checkpoint_bytes((2, 2)) == (busiest, busiest)
    assert t.checkpoint_bytes((2,)) == (busiest, busiest)
    from sim.profiles.formations import node_checkpoint_bytes

    nodes = node_checkpoint_bytes(t._build(2, 2, 32), t.profiles.model("OPT-350"))  # stage-major: s0r0 s0r1 s1r0 s1r1
    assert nodes == ((4 * 12 * STAGE0, 4 * 12 * STAGE0), (0.0, 4 * 12 * STAGE0),
                     (busiest, busiest), (0.0, busiest))


@pytest.mark.parametrize(("key", "rule"), [("deepspeed", "rank0-bf16"), ("megatron", "spread")])
def test_the_writers_of_bf16_and_megatron_by_hand(key, rule):
    """Two stages of 3 replicas at TP 2 in bf16. DeepSpeed's BF16_Optimizer: replica 0 writes
    its stage's bf16 weights (the flat buffer, 2 bytes an element) and its 1/3 partition of
    the fp32 master weights and Adam's moments (4 + 8 bytes an element); replicas 1 and 2
    their partitions alone; each node reads what it holds. Megatron-LM (fully parallel save
    over the data-parallel group): each node a third of the stage's state, its own whole
    state read. Per node: its 2 GPUs."""
    from test_step_collectives import _plan

    from sim.profiles.build import build_plan
    from sim.profiles.formations import checkpoint_rule, node_checkpoint_bytes
    from sim.profiles.frameworks import FrameworkSpec

    prof = load_profiles(models=("OPT-350",))
    plan = _plan(2, 3, tp=2, fw=FrameworkSpec(key, precision="bf16"))
    b = build_plan(plan, prof, steps=1, check_memory=False)
    assert checkpoint_rule(b) == rule
    sizes = prof.model("OPT-350").layer_sizes(2)
    got = node_checkpoint_bytes(b, prof.model("OPT-350"))
    for j, st in enumerate(plan.stages):
        P = sum(sizes[x].params for x in st.layers)
        if rule == "rank0-bf16":
            flat = -(-P // 6) * 6  # padded to a multiple of 2 x dp
            part = 2 * (flat // 3) * (4 + 8)
            whole = 2 * 2 * flat + part
            assert got[3 * j:3 * j + 3] == ((whole, whole), (part, whole), (part, whole))
        else:
            whole = 2 * P * (2 + 4 + 8)  # bf16 weights, fp32 master weights, Adam's moments
            assert got[3 * j:3 * j + 3] == ((whole / 3, whole),) * 3


@pytest.mark.parametrize("fw, per", [
    (("deepspeed", "fp16"), 2 + 4 + 8),  # fp16 layer files, FP16_Optimizer's fp32 master, Adam
    (("sailor-deepspeed", "fp16"), 2 + 4 + 8),
    (("megatron", "fp16"), 2 + 4 + 8),  # Float16Module, fp32_from_fp16_params, Adam
    (("deepspeed", "fp32"), 4 + 8),  # the profile's own precision: the memory model's terms
    (("ddp", "fp16"), 4 + 8),  # DDP: the memory model's terms
])
def test_a_16_bit_checkpoint_of_an_fp32_profile_holds_the_master_weights(fw, per):
    """OPT-350's profile is fp32 (4 bytes a weight, Adam's 8 a parameter). Trained in fp16,
    DeepSpeed writes fp16 layer files and FP16_Optimizer's state with its fp32 master copy
    (v0.16.4 runtime/fp16/fused_optimizer.py:447-448), Megatron-LM its Float16Module's fp16
    weights and fp32_from_fp16_params (core_v0.9.0 megatron/core/optimizer/optimizer.py:
    609-614): 14 bytes a parameter. They took the memory model's 4 + 8 = 12. Replica 0 of
    one stage (two replicas, TP 1 for DDP's one stage), per node."""
    from test_step_collectives import _plan

    from sim.profiles.build import build_plan
    from sim.profiles.formations import node_checkpoint_bytes
    from sim.profiles.frameworks import FrameworkSpec

    prof = load_profiles(models=("OPT-350",))
    mp = prof.model("OPT-350")
    assert (mp.bytes_per_value, mp.optimizer_bytes_per_param) == (4, 8)
    L, tp = (1, 1) if fw[0] == "ddp" else (2, 2)
    plan = _plan(L, 2, tp=tp, fw=FrameworkSpec(fw[0], precision=fw[1]))
    b = build_plan(plan, prof, steps=1, check_memory=False)
    got = node_checkpoint_bytes(b, mp)
    sizes = mp.layer_sizes(tp)
    for j, st in enumerate(plan.stages):
        whole = tp * (sum(sizes[x].params for x in st.layers) * per)
        assert got[2 * j][1] == whole
        assert got[2 * j][0] == (whole / 2 if fw[0] == "megatron" else whole)


def test_megatron_core_0_8_writes_from_data_parallel_rank_0():
    """Megatron Core 0.8.0 saves the legacy torch format by default (``--use-dist-ckpt`` off,
    tag core_v0.8.0 arguments.py:1317-1318; checkpointing.py:329-331, 374-377): data-parallel
    rank 0 of each stage alone writes its whole state, as DeepSpeed without bf16; 0.9.0 on
    saves torch_dist fully parallel (arguments.py:1425, 1441-1442), a third a node here. Two
    stages of 3 replicas at TP 2 in bf16; every node reads its own whole state."""
    from test_step_collectives import _plan

    from sim.profiles.build import build_plan
    from sim.profiles.formations import checkpoint_rule, node_checkpoint_bytes
    from sim.profiles.frameworks import FrameworkSpec

    prof = load_profiles(models=("OPT-350",))
    sizes = prof.model("OPT-350").layer_sizes(2)
    for version, rule in (("0.8.0", "rank0"), ("0.9.0", "spread")):
        plan = _plan(2, 3, tp=2, fw=FrameworkSpec("megatron", version=version,
                                                  precision="bf16"))
        b = build_plan(plan, prof, steps=1, check_memory=False)
        assert checkpoint_rule(b) == rule
        got = node_checkpoint_bytes(b, prof.model("OPT-350"))
        for j, st in enumerate(plan.stages):
            whole = 2 * (sum(sizes[x].params for x in st.layers) * (2 + 4 + 8))
            want = ((whole, whole), (0.0, whole), (0.0, whole)) if rule == "rank0" else \
                ((whole / 3, whole),) * 3
            assert got[3 * j:3 * j + 3] == want


def test_checkpoint_restart_with_a_bandwidth_on_a_scripted_trace_by_hand(tmp_path, capsys):
    """As the scripted run above with ``checkpoint_bandwidth=1GB/s``: a checkpoint takes
    C = 2,590,838,784 B / 1e9 B/s (the busiest node's bytes), a restart 3 s plus the same
    bytes read, R = C. s1r1 gone at 6.5 s, after the first checkpoint ends (2 T2 + C) and
    before the next (3 T2 + C): the restart runs 6.5 to 9.5 + R, then steps 3, 4 on one
    pipeline (T1 each), a checkpoint, step 5, the final checkpoint:
    wall = 9.5 + R + 3 T1 + 2 C."""
    C = 4 * 12 * STAGE1 / 1e9
    T2, T1 = _full_and_one_pipeline(tmp_path, capsys)
    assert 2 * T2 + C < 6.5 < 3 * T2 + C  # the loss falls in step 3
    trace = tmp_path / "trace.csv"
    trace.write_text(f"worker,start,end\ns1r1,6.5,{BIG}\n")
    out = _json(capsys, ["--plan", PLAN, "--model", "OPT-350", "--steps", "5",
                         "--replications", "1", "--failure-trace", str(trace),
                         "--strategy", "checkpoint-restart:every=2,restart=3,boot=0,"
                         "checkpoint_bandwidth=1GB/s,settle=0"])
    wall = 9.5 + C + 3 * T1 + 2 * C
    assert out["wall_time_mean"] == pytest.approx(wall, rel=1e-12)
    assert (out["restarts"], out["checkpoints"], out["steps"]) == (1.0, 3.0, 5)
    assert out["lost_time"]["checkpoint"] == pytest.approx(3 * C, rel=1e-12)
    assert out["lost_time"]["work"] == pytest.approx(6.5 - (2 * T2 + C), rel=1e-12)
    assert out["samples_per_second"] == pytest.approx(5 * 64 / wall, rel=1e-12)
    cost = out["checkpoint_cost"]
    assert (cost["checkpoint"], cost["restart"]) == (C, 3.0 + C)
    assert cost["bytes_written"] == cost["bytes_read"] == 4 * 12 * STAGE1
    assert out["predicted_wall_time"] is None  # the replay takes given times only


def test_a_shape_in_fp16_checkpoints_fourteen_bytes_a_parameter(tmp_path, capsys):
    """A model given by its shape (4 layers, hidden 256, vocabulary 1000, sequence 128) on
    DeepSpeed 0.3.13 in fp16, 4 stages of 4 V100 replicas: data-parallel rank 0 of each stage
    writes its fp16 weights, fp32 master copy and Adam's two moments, 2 + 4 + 8 = 14 bytes a
    parameter; stage 0 (embeddings 1000 x 256 + 128 x 256 = 288,768 and a layer 12 x 256^2 +
    13 x 256 = 789,760) writes 15,099,392 B, at 2 GB/s 7.549696 ms. It said 7,549,696 B: the
    shape's parameters counted off the fp32 profile's 4 bytes a value, when the build had sized
    the run's weights at 2. The same plan with its hosts (four replicas a host) runs a strategy,
    but not with checkpoint_bandwidth: a host writes its replicas' bytes over one link, which
    the per-node bytes do not sum (docs/strategies.md)."""
    from test_launch_mixed_gpus import GPUS, HAND, LAUNCH, LINKS, SHAPE

    (tmp_path / "prof" / "models").mkdir(parents=True)
    (tmp_path / "prof" / "gpus.json").write_text(json.dumps(GPUS))
    (tmp_path / "prof" / "models" / "gpt2.json").write_text(json.dumps(SHAPE))
    (tmp_path / "fleet.json").write_text(json.dumps({"nodes": [
        {"gpu": "V100", "gpus_per_node": 4, "zone": "z", "count": 4}], "links": LINKS}))
    plan = json.loads(json.dumps(HAND))
    for st in plan["stages"]:
        for r in st["replicas"]:
            r["gpu"] = "V100"
    (tmp_path / "hosts.json").write_text(json.dumps(plan))
    for st in plan["stages"]:
        for r in st["replicas"]:
            del r["host"]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    argv = ["--model", "gpt2", "--profiles", str(tmp_path / "prof"), "--fleet",
            str(tmp_path / "fleet.json"), "--steps", "20", "--replications", "1", "--strategy",
            "checkpoint-restart:every=5,checkpoint_bandwidth=2GB/s"]
    cost = _json(capsys, ["--plan", str(tmp_path / "plan.json"), *argv])["checkpoint_cost"]
    written = 14 * (288_768 + 789_760)
    assert cost["bytes_written"] == cost["bytes_read"] == written == 15_099_392
    assert cost["checkpoint"] == written / 2e9 and cost["writers"] == "rank0"
    assert main(["train", "--plan", str(tmp_path / "hosts.json"), *argv]) == 2
    assert "'checkpoint_bandwidth' must be unset when a plan's host holds several replicas" \
        in capsys.readouterr().err
    (tmp_path / "ds_config.json").write_text(json.dumps(
        {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": True}}))
    (tmp_path / "hostfile").write_text("p3-a slots=4\np3-b slots=4\np3-c slots=4\n"
                                       "g4dn-0 slots=4\n")
    (tmp_path / "launch.sh").write_text(LAUNCH)
    assert main(["train", "--plan", str(tmp_path / "launch.sh"), "--gpu", "V100", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'checkpoint_bandwidth' must be unset" in err


def test_without_a_bandwidth_the_run_says_the_cost_is_the_artifacts(capsys):
    out = _json(capsys, ["--plan", PLAN, "--model", "OPT-350", "--steps", "1",
                         "--replications", "1", "--strategy", "checkpoint-restart"])
    cost = out["checkpoint_cost"]
    assert (cost["checkpoint"], cost["restart"], cost["every"]) == (15.8, 55.5, 10)
    assert "not this plan's bytes" in cost["source"] and "bandwidth" not in cost


def test_the_checkpoint_line_names_a_chosen_interval(capsys):
    """checkpoint-restart's interval=overhead chooses its interval from each checkpoint's
    stall (CheckFreq), adaptive from ``every`` at first: the cost line said "every 10 steps"
    for both (the default ``every``), and the JSON's ``every`` 10, though an overhead run
    checkpointed far less often."""
    base = ["--plan", PLAN, "--model", "OPT-350", "--steps", "1", "--replications", "1",
            "--strategy"]
    over = _json(capsys, [*base, "checkpoint-restart:interval=overhead"])["checkpoint_cost"]
    assert (over["every"], over["interval"]) == (None, "overhead")
    adapt = _json(capsys, [*base, "checkpoint-restart:interval=adaptive,every=7"])
    assert (adapt["checkpoint_cost"]["every"], adapt["checkpoint_cost"]["interval"]) == \
        (7, "adaptive")
    fixed = _json(capsys, [*base, "checkpoint-restart"])["checkpoint_cost"]
    assert fixed["every"] == 10 and "interval" not in fixed
    assert main(["train", *base, "checkpoint-restart:interval=overhead,"
                 "checkpoint_bandwidth=1GB/s"]) == 0
    text = capsys.readouterr().out
    assert "at the interval=overhead rule" in text and "every 10 steps" not in text
    assert main(["train", *base, "checkpoint-restart:interval=adaptive"]) == 0
    assert "every 10 steps at first (interval=adaptive)" in capsys.readouterr().out


def test_reconfiguration_with_a_template_out_of_memory_waits(tmp_path, capsys):
    """GPT-Neo-2.7 on V100-16 nodes (TP 4): 2 stages fit, all 34 layers on one node do not.
    reconfiguration:min_nodes=1 may form a 1-node template, but that re-partition cannot
    run: after one node is lost the job has no formation and stops with its reason."""
    stages = [{"first_layer": 0, "last_layer": 16, "replicas": [
                  {"gpu": "V100-16", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}]},
              {"first_layer": 17, "last_layer": 33, "replicas": [
                  {"gpu": "V100-16", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}]}]
    plan = tmp_path / "neo.json"
    plan.write_text(json.dumps({"microbatch_size": 1, "global_batch_size": 4,
                                "model": "GPT-Neo-2.7", "stages": stages}))
    t = _timer(str(plan), "GPT-Neo-2.7")
    assert t.formation_time((2,)) > 0
    assert t.formation_time((1,)) is None
    trace = tmp_path / "trace.csv"
    trace.write_text(f"worker,start,end\ns1r0,1.0,{BIG}\n")
    out = _json(capsys, ["--plan", str(plan), "--steps", "1000", "--replications", "1",
                         "--failure-trace", str(trace),
                         "--strategy", "reconfiguration:min_nodes=1,boot=0"])
    assert out["finished"] == 0
    assert "no step can finish" in out["stall_reason"]


@pytest.mark.parametrize(("argv", "message"), [
    # swarm runs a plan as SWARM's stages and pools (tests/test_plan_swarm.py); this plan's
    # TP-4 replicas it refuses
    (["--strategy", "swarm"], "'tp' must be 1 with --strategy swarm (a SWARM server runs its "
     "stage on one device"),
    (["--strategy", "checkpoint-restart", "--step-times", "x.csv"],
     "'step_times' must be given only without --plan"),
    (["--preemption-notice", "aws", "--failure-trace", "aws-p3"],
     "'preemption_notice' must be 0 without a strategy (a strategy decides what a notice is "
     "for): 'aws'"),
    (["--strategy", "checkpoint-restart:checkpoint_bandwidth=0"],
     "'checkpoint_bandwidth' must be a rate > 0 in bytes per second"),
    (["--strategy", "checkpoint-restart:checkpoint_bandwidth=-2GB/s"],
     "'checkpoint_bandwidth' must be a rate >= 0"),
    (["--strategy", "redundancy:checkpoint_bandwidth=2GB"],
     "'checkpoint_bandwidth' must be a rate, not a size"),
    (["--strategy", "checkpoint-restart:checkpoint_bandwidth=2GB/s,checkpoint=3"],
     "'checkpoint' must be unset (or --checkpoint-cost unset) with checkpoint_bandwidth"),
    (["--strategy", "reconfiguration:checkpoint_bandwidth=2GB/s"],
     "'checkpoint_bandwidth' must be given only with every > 0"),
])
def test_what_cannot_apply_is_refused_in_one_line(capsys, argv, message):
    assert main(["train", "--plan", PLAN, "--model", "OPT-350", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_bandwidth_without_a_plan_is_refused(capsys):
    assert main(["train", "--strategy", "checkpoint-restart:checkpoint_bandwidth=2GB/s"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'checkpoint_bandwidth' must be given only with --plan" in err and "\n" not in err


def test_a_plan_of_mixed_nodes_is_refused_with_a_strategy(capsys):
    assert main(["train", "--plan", RUNS + "mit-N2_D2.json", "--model", "OPT-350",
                 "--strategy", "redundancy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'plan' must be a plan whose replicas are all one node kind" in err
    assert "RTX-3090 TP 2, Titan-RTX TP 2" in err


def test_the_plan_options_time_the_formations(capsys):
    """``--sync`` (and any option that shapes the plan's build) times every formation: with
    no failure, one step of a strategy run is ``--plan``'s with the same option, bit for bit,
    and differs from the default sync's (overlapped buckets end sooner)."""
    sync = ("--sync", "allreduce:overlap=backward")
    run = _json(capsys, ["--plan", PLAN, "--model", "OPT-350", "--steps", "1",
                         "--replications", "1", "--strategy", "checkpoint-restart:every=1000", *sync])
    assert run["engine"] == "job"
    assert run["step_time_mean"] == _step(capsys, PLAN, *sync)
    assert run["step_time_mean"] != _step(capsys, PLAN)


#: OPT-350 as a Megatron-LM launch line on RTX-3090 nodes of 2 GPUs (TP 2, PP 2, DP 2):
#: torchrun's hosts n0..n3 hold one replica each
LAUNCH = ("torchrun --nnodes {nodes} --nproc-per-node {per} pretrain_gpt.py "
          "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 24 "
          "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
          "--untie-embeddings-and-output-weights --micro-batch-size 2 --global-batch-size 16\n")


def test_a_launch_line_of_one_replica_a_host_runs_a_strategy(tmp_path, capsys):
    """A launch line names its hosts (``n0``, ``n1``, ...); where each holds one replica the
    host is the replica's node of its own, which a strategy takes (it was refused, saying to
    delete host keys a launch line has not). With every node up, one step of the strategy
    run is ``--plan``'s iteration, bit for bit; two replicas a host too (they were refused:
    the host now fails whole, tests/test_plan_host_failures.py)."""
    launch = tmp_path / "launch.sh"
    launch.write_text(LAUNCH.format(nodes=4, per=2))
    base = ["--plan", str(launch), "--gpu", "RTX-3090", "--model", "OPT-350", "--steps", "1",
            "--replications", "1"]
    plain = _json(capsys, base)["step_time_mean"]
    run = _json(capsys, [*base, "--strategy", "reconfiguration"])
    assert run["step_time_mean"] == plain
    # two replicas a host (each host a unit of failure): the plan's iteration, bit for bit
    launch.write_text(LAUNCH.format(nodes=2, per=4))
    plain = _json(capsys, base)["step_time_mean"]
    run = _json(capsys, [*base, "--strategy", "checkpoint-restart"])
    assert run["step_time_mean"] == plain and run["failure_hosts"] == 2
