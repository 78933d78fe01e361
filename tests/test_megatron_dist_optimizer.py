"""Megatron-LM's distributed optimizer (``--use-distributed-optimizer``), as its code runs it.

Each data-parallel rank keeps the fp32 master weights and Adam's moments of its ``1/d`` shard of
the parameters (Megatron-LM's ``dist_optimizer.md`` table: fp16 ``4 + 16/d`` bytes a parameter
against 20, bf16 ``6 + 12/d`` against 18, fp32 ``8 + 8/d`` against 16), reduce-scatters the
gradients instead of all-reducing them (``param_and_grad_buffer.py`` ``start_grad_sync``), steps
its shard, then all-gathers the parameters (``start_param_sync``), and reduces the gradient norm
over the whole world (``get_grad_stats_parallel_group``); every line is cited in
``sim.profiles.frameworks`` (``_MEG_DO_LINES``, ``_MEG_DO_MAIN``). The data-parallel group is DP x
CP in Megatron-LM; dtsim refuses context parallelism, so it is DP.

The hand example (LLaMA-2-7B's shape, 16 transformer layers a stage at TP 4, two replicas):
``P = 16 (12 h^2 + 13 h) / 4 = 805,519,360`` parameters a GPU; 18P = 14.50 GB of weights,
gradients and optimizer state against 12P = 9.666 GB sharded; over 25 GB/s a GPU the fp32
all-reduce takes 0.1289 s, the reduce-scatter 0.0644 s and the bf16 all-gather 0.0322 s.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pytest

from sim.cli import main
from sim.engines import predictions
from sim.network.collectives import bucket_sizes
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import SCALAR_BYTES, build_plan, small_allreduce_time
from sim.profiles.formats import DATA_DIR, network_from_data
from sim.profiles.frameworks import MEGATRON_TAGS, FrameworkSpec
from sim.profiles.megatron_args import megatron_plan_from_text
from sim.rng import Streams
from sim.training import training_model

Z = "us-central1-a"
SHAPE = {"layers": 32, "hidden": 4096, "heads": 32, "sequence": 4096, "vocabulary": 32000,
         "tied": False}
B = 100e9  # one link: 25 GB/s for each of a TP-4 replica's 4 flows (the hand example's)
P_HAND = 805_519_360
MEG_MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"
DO = (("use_distributed_optimizer", True),)


def _profiles(tmp_path_factory, shape=SHAPE, latency=0.0):
    d = tmp_path_factory.mktemp("l7")
    (d / "models").mkdir()
    (d / "models" / "l7.json").write_text(json.dumps(
        {"model": "L7", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": shape}))
    p = load_profiles(d)
    end = {"gpu": "A100-80", "zone": Z}
    return replace(p, network=network_from_data({"links": [
        {"src": end, "dst": end, "bandwidth": B, "latency": latency}]}))


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    return _profiles(tmp_path_factory)


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """The same with 10 us a message: a law that miscounts the ring's steps is off."""
    return _profiles(tmp_path_factory, latency=1e-5)


def _hand_plan(precision="bf16", options=(), d=2):
    """Embedding | 16 transformer layers | 16 | head, each stage ``d`` TP-4 replicas."""
    rep = ReplicaSpec("A100-80", 4, 8, Z)
    cuts = ((0,), tuple(range(1, 17)), tuple(range(17, 33)), (33,))
    return Plan(tuple(StageSpec(c, (rep,) * d) for c in cuts), 1, 8 * d, model="L7",
                framework=FrameworkSpec("megatron", precision=precision, options=options))


def _launch(extra="", pp=2, nodes=4, gbs=8):
    return (f"torchrun --nnodes {nodes} --nproc-per-node 4 pretrain_gpt.py "
            f"--tensor-model-parallel-size 4 --pipeline-model-parallel-size {pp} "
            "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
            f"--untie-embeddings-and-output-weights --micro-batch-size 1 --global-batch-size {gbs} "
            f"--bf16 {extra}\n")


def _step(build):
    return predictions("training", build.config)["step_time_mean"]["value"]


def test_the_hand_example(prof):
    """16 layers a stage at TP 4 over two replicas: P = 805,519,360 a GPU; weights, gradients
    and optimizer state 18P = 14.50 GB, sharded 12P = 9.666 GB; at 25 GB/s a GPU the all-reduce
    0.1289 s becomes a reduce-scatter of 0.0644 s and, after the step, an all-gather of
    0.0322 s."""
    whole = build_plan(_hand_plan(), prof, steps=1, check_memory=False)
    shard = build_plan(_hand_plan(options=DO), prof, steps=1, check_memory=False)
    for j in (1, 2):
        g0, g1 = whole.memory[2 * j], shard.memory[2 * j]
        P = g0.weights / 2
        assert P == P_HAND
        assert g0.weights + g0.gradients + g0.optimizer == 18 * P
        assert g1.weights + g1.gradients + g1.optimizer == 12 * P
        assert round((18 * P) / 1e9, 2) == 14.50 and round((12 * P) / 1e9, 3) == 9.666
        assert g1.grad_copy == g0.grad_copy == 0.0  # bf16's main_grad is fp32: no copy
        # 4 flows of half the buffer a step: all-reduce 2 steps, reduce-scatter 1, all-gather 1
        assert whole.allreduce_times[j] == pytest.approx(2 * 4 * (4 * P / 2) / B, rel=1e-12)
        assert shard.allreduce_times[j] == pytest.approx(4 * (4 * P / 2) / B, rel=1e-12)
        assert shard.param_allgather_times[j] == pytest.approx(4 * (2 * P / 2) / B, rel=1e-12)
        assert round(whole.allreduce_times[j], 4) == 0.1289
        assert round(shard.allreduce_times[j], 4) == 0.0644
        assert round(shard.param_allgather_times[j], 4) == 0.0322
        # 0.75 of the all-reduce's bytes: the reduce-scatter of 4-byte gradients and the
        # all-gather of 2-byte parameters
        assert shard.allreduce_times[j] + shard.param_allgather_times[j] == \
            pytest.approx(0.75 * whole.allreduce_times[j], rel=1e-12)
    assert whole.param_allgather_times == ()


def test_step_time_exact_reference(slow):
    """A one-stage launch of two TP-4 replicas (two micro-batches each), 10 us a message: the
    step is the two forward and backward passes, then the reduce-scatter ((d - 1) steps of
    1/d of the fp32 gradients), the optimizer step on 1/d of the parameters, the all-gather of
    the bf16 parameters and the gradient norm's all-reduce over the world (dtsim's NCCL law
    for a scalar). The closed form and the DES over the network both give it; the model that
    keeps the all-reduce (2 (d - 1) steps) does not."""
    m = slow.model("L7")
    plan = megatron_plan_from_text(_launch("--use-distributed-optimizer", pp=1, nodes=2, gbs=4),
                                   "x", m, "A100-80", Z)
    assert plan.framework.options == DO
    b = build_plan(plan, slow, steps=1, check_memory=False)
    f, bwd, opt = b.stage_times[0][0]
    P = b.memory[0].weights / 2
    lat, n, t = 1e-5, 2, 4
    rs = (n - 1) * (lat + t * (4 * P / n) / B)
    ag = (n - 1) * (lat + t * (2 * P / n) / B)
    world = [(x, (0, i)) for i, x in enumerate(plan.stages[0].replicas)]
    norm = small_allreduce_time(slow.network, world, SCALAR_BYTES, slow)
    assert norm > 0 and b.optimizer_collective_time == norm  # one stage: before, none
    want = 2 * (f + bwd) + rs + opt / n + ag + norm
    assert _step(b) == pytest.approx(want, rel=1e-12)
    kept = 2 * (f + bwd) + 2 * rs + opt / n + ag + norm  # the all-reduce kept: wrong
    assert abs(kept - want) > 0.05 and _step(b) != pytest.approx(kept, rel=1e-6)
    net = build_plan(plan, slow, steps=1, check_memory=False, network=True)
    assert net.config.reduce_scatter
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(want, rel=1e-9)
    # without the option: the all-reduce, the whole step, no all-gather, no world reduction
    off = build_plan(megatron_plan_from_text(_launch(pp=1, nodes=2, gbs=4), "x", m, "A100-80", Z),
                     slow, steps=1, check_memory=False)
    assert _step(off) == pytest.approx(2 * (f + bwd) + 2 * rs + opt, rel=1e-12)


def test_buckets_and_the_grad_norm_over_the_world(slow):
    """With --overlap-grad-reduce each bucket (max(4e7, 1e6 d) elements on the first stage,
    one elsewhere) is reduce-scattered, half its ring, and the all-gather runs bucket by
    bucket (each its latency); of bf16's three one-value all-reduces the gradient norm goes
    over every rank, the update flag and the norm's maximum over the model-parallel group."""
    m = slow.model("L7")
    on = build_plan(megatron_plan_from_text(_launch(
        "--use-distributed-optimizer --overlap-grad-reduce"), "x", m, "A100-80", Z),
        slow, steps=1, check_memory=False)
    off = build_plan(megatron_plan_from_text(_launch("--overlap-grad-reduce"), "x", m,
                                             "A100-80", Z), slow, steps=1, check_memory=False)
    assert len(on.bucket_times[0]) > 1 and len(on.bucket_times[1]) == 1
    for row_on, row_off in zip(on.bucket_times, off.bucket_times, strict=True):
        assert [s for s, _ in row_on] == [s for s, _ in row_off]
        for (_, a), (_, b) in zip(row_on, row_off, strict=True):
            assert a == pytest.approx(b / 2, rel=1e-12)
    P0 = on.memory[0].weights / 2
    cuts = bucket_sizes(2 * P0, 40_000_000 * 2.0)
    assert on.param_allgather_times[0] == pytest.approx(
        sum(1e-5 + 4 * (c / 2) / B for c in cuts), rel=1e-12)
    P1 = on.memory[2].weights / 2
    assert on.param_allgather_times[1] == pytest.approx(1e-5 + 4 * (2 * P1 / 2) / B, rel=1e-12)
    plan = megatron_plan_from_text(_launch("--use-distributed-optimizer"), "x", m, "A100-80", Z)
    world = [(x, (j, i)) for j, st in enumerate(plan.stages) for i, x in enumerate(st.replicas)]
    pipes = max(small_allreduce_time(slow.network, [(plan.stages[j].replicas[i], (j, i))
                                                    for j in range(2)], SCALAR_BYTES, slow)
                for i in range(2))
    assert on.optimizer_collective_time == pytest.approx(
        small_allreduce_time(slow.network, world, SCALAR_BYTES, slow) + 2 * pipes, rel=1e-12)
    assert off.optimizer_collective_time == pytest.approx(3 * pipes, rel=1e-12)


@pytest.mark.parametrize("precision, d, resident, copy", [
    ("fp16", 2, 4 + 12 / 2, 4 / 2), ("fp16", 4, 4 + 12 / 4, 4 / 4),
    ("bf16", 2, 6 + 12 / 2, 0), ("bf16", 4, 6 + 12 / 4, 0),
    ("fp32", 2, 8 + 8 / 2, 0), ("fp32", 4, 8 + 8 / 4, 0)])
def test_memory_per_parameter_per_precision(prof, precision, d, resident, copy):
    """Megatron-LM's table, 4 + 16/d, 6 + 12/d and 8 + 8/d bytes a parameter: fp16's 16/d is
    12/d of master weights and moments plus 4/d of the fp32 gradient copy its step makes
    (distrib_optimizer.py's shard_model_grad.float()), held after the backward passes until the
    next step's zero_grad, so counted beside the activations, not with them."""
    b = build_plan(_hand_plan(precision, DO, d), prof, steps=1, check_memory=False)
    for g in b.memory[d:3 * d]:  # the two middle stages
        P = P_HAND
        assert g.weights + g.gradients + g.optimizer == pytest.approx(resident * P, rel=1e-15)
        assert g.grad_copy == pytest.approx(copy * P, rel=1e-15)
        assert g.total == g.weights + g.gradients + g.optimizer + max(
            g.activations + g.buffers, g.allreduce_bucket, g.grad_copy) + g.overhead


def test_fp16_fp32_gradient_copy_without_the_distributed_optimizer(tmp_path_factory):
    """Named fix (Megatron fp16 memory): Megatron-LM's fp16 optimizer step copies every
    gradient to fp32 (optimizer.py:1097 at d98e8a64dd, main_grad.float()), 4 bytes a parameter
    held until the next step's zero_grad (training.py:3044): its table's 20 bytes, where dtsim
    counted 16. On a short sequence, where the activations are smaller than the copy, the copy
    sets the peak: 20 bytes a parameter; bf16 (fp32 main_grad, no copy) stays at 18."""
    short = dict(SHAPE, layers=4, sequence=128)
    p = _profiles(tmp_path_factory, short)
    rep = ReplicaSpec("A100-80", 4, 8, Z)
    plan = Plan((StageSpec(tuple(range(6)), (rep, rep)),), 1, 2, model="L7",
                framework=FrameworkSpec("megatron", precision="fp16"))
    g = build_plan(plan, p, steps=1, check_memory=False).memory[0]
    P = g.weights / 2
    assert g.grad_copy == 4 * P > g.activations + g.buffers
    assert g.total == 20 * P + g.overhead
    bf = build_plan(replace(plan, framework=FrameworkSpec("megatron", precision="bf16")), p,
                    steps=1, check_memory=False).memory[0]
    assert bf.grad_copy == 0 and bf.weights + bf.gradients + bf.optimizer == 18 * P
    acc = FrameworkSpec("megatron", precision="fp16",
                        options=(("accumulate_allreduce_grads_in_fp32", True),))
    assert build_plan(replace(plan, framework=acc), p, steps=1,
                      check_memory=False).memory[0].grad_copy == 0  # main_grad already fp32


def _cli(argv, capsys):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_a_launch_line_names_the_sharding(tmp_path, capsys):
    """The launch flag is read, not refused: the run's JSON names the optimizer's sharding and
    its memory shows the optimizer state halved over DP 2 (the shipped OPT-350, fp16)."""
    base = ("torchrun --nnodes 2 --nproc-per-node 4 pretrain_gpt.py --tensor-model-parallel-size "
            "2 --pipeline-model-parallel-size 2 --num-layers 24 --hidden-size 1024 "
            "--num-attention-heads 16 --seq-length 2048 --untie-embeddings-and-output-weights "
            "--micro-batch-size 2 --global-batch-size 16 --fp16 {}\n")
    outs = []
    for extra in ("", "--use-distributed-optimizer"):
        launch = tmp_path / f"l{len(outs)}.sh"
        launch.write_text(base.format(extra))
        code, out, err = _cli(["train", "--plan", str(launch), "--model", "OPT-350", "--gpu",
                               "RTX-3090", "--zone", Z, "--steps", "1", "--replications", "1",
                               "--json"], capsys)
        assert code == 0, err
        outs.append(json.loads(out))
    assert "optimizer_sharding" not in outs[0]["framework"]
    assert outs[1]["framework"]["optimizer_sharding"].startswith("distributed")
    for a, b in zip(outs[0]["memory"], outs[1]["memory"], strict=True):
        assert b["optimizer"] == a["optimizer"] / 2 and b["weights"] == a["weights"]


def test_the_planner_finds_plans_that_fit_only_sharded(tmp_path, capsys):
    """dtsim plan reads the option: a model whose one transformer layer at TP 4 needs 18 bytes
    a parameter more than a GH-96 holds has no plan on 16 nodes, and with the optimizer sharded
    (6 + 12/d, d >= 2) it has."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.json").write_text(json.dumps({
        "model": "W", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": {
            "layers": 2, "hidden": 49152, "heads": 384, "sequence": 128, "vocabulary": 1000,
            "tied": False}}))
    shutil.copy(DATA_DIR / "bandwidths.json", tmp_path)
    argv = ["plan", "--profiles", str(tmp_path), "--model", "W", "--nodes",
            "GH-96:4x16@us-central1-a", "--global-batch-size", "16", "--simulate", "0",
            "--top", "1", "--framework"]
    code, out, err = _cli([*argv, "megatron:precision=bf16"], capsys)
    assert code == 2 and "'fleet' must be GPUs enough to hold W" in err
    code, out, err = _cli([*argv, "megatron:precision=bf16,use_distributed_optimizer=true"],
                          capsys)
    assert code == 0, err
    # sharded over d >= 2 replicas (d = 2 since Megatron-LM's in-place all-reduce has no
    # flattened bucket to hold; 4 before)
    assert re.search(r"\*\s+1\s+\S+\s+\d+x[2-9]\d*\s", out), out


@pytest.mark.parametrize("extra, framework, message", [
    ("--overlap-param-gather --overlap-grad-reduce", None,
     r"'plan' must be --overlap-param-gather only with --use-distributed-optimizer .*"
     r"arguments\.py:1024-1029"),
    ("--overlap-param-gather --use-distributed-optimizer", None,
     r"'plan' must be --overlap-param-gather only with --overlap-grad-reduce"),
    ("--overlap-param-gather-with-optimizer-step", None, r"'plan' must be .*interleaved"),
    ("", "megatron:overlap_param_gather=true,overlap_grad_reduce=true",
     r"'overlap_param_gather' must be true only with use_distributed_optimizer=true"),
    ("", "megatron:overlap_param_gather=true,use_distributed_optimizer=true",
     r"'overlap_param_gather' must be true only with overlap_grad_reduce=true"),
    # allowed by Megatron-LM, not modelled: each stage's first forward pass waits for its
    # all-gather (the forward pre-hook; align_param_gather off without interleaving)
    ("--overlap-param-gather --use-distributed-optimizer --overlap-grad-reduce", None,
     r"'plan' must be a Megatron-LM run dtsim models: --overlap-param-gather makes each "
     r"stage's first forward pass wait .*arguments\.py:1013"),
    ("", "megatron:overlap_param_gather=true,use_distributed_optimizer=true,"
     "overlap_grad_reduce=true", r"'overlap_param_gather' must be false: with it each stage's "
     r"first forward pass waits"),
])
def test_refusals(tmp_path, capsys, extra, framework, message):
    """Megatron-LM's asserts (training/arguments.py:1024-1029 at d98e8a64dd) as one-line
    refusals, exit 2, from a launch line or a plan's framework keys; and --overlap-param-gather
    where Megatron-LM runs it: on the non-interleaved schedule each stage's first forward pass
    starts and waits for its all-gather after receiving its input (not an overlap dtsim can
    time as the step's end)."""
    launch = tmp_path / "launch.sh"
    launch.write_text("torchrun --nnodes 2 --nproc-per-node 4 pretrain_gpt.py "
                      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                      "--num-layers 24 --untie-embeddings-and-output-weights "
                      f"--micro-batch-size 2 --global-batch-size 16 --fp16 {extra}\n")
    argv = ["train", "--plan", str(launch), "--model", "OPT-350", "--gpu", "RTX-3090",
            "--zone", Z, "--steps", "1", "--json"]
    if framework:
        argv += ["--framework", framework]
    code, out, err = _cli(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), err


def test_releases_offering_the_option():
    """core 0.9.0 to 0.19.0 and 0.20.0 offer both options (each citing its own lines; the second
    for Megatron-LM's asserts and its refusal); 0.8.0, whose all-gather lives in
    distrib_optimizer.py (from zero_grad) and was not read, does not."""
    for v, fw in MEGATRON_TAGS.items():
        has = {"use_distributed_optimizer", "overlap_param_gather"} <= set(fw.options)
        assert has == (v != "0.8.0"), v
        if has:
            assert f"core_v{v}" in fw.options["use_distributed_optimizer"][1]
    FrameworkSpec("megatron", "0.9.0", "bf16", DO)
    with pytest.raises(Exception, match="'framework_options' must be an option megatron has"):
        FrameworkSpec("megatron", "0.8.0", "bf16", DO)


@pytest.mark.slow  # reads 23 revisions of the framework's repository
@pytest.mark.skipif(not __import__("os").path.isdir(MEG_MIRROR),
                    reason="needs an NVIDIA/Megatron-LM clone with its core_v tags")
def test_cited_lines_hold_in_megatron():
    """Every line the distributed optimizer's facts cite holds, at its tag (and at d98e8a64dd
    for 0.20.0), the code it was read in (``_MEG_DO_ANCHORS``), as tools/framework_lines.py
    finds it; the 0.20.0 table's assert lines are those the launch reader cites."""
    import importlib.util
    import pathlib

    from sim.profiles.frameworks import _MEG_DO_ANCHORS, _MEG_DO_LINES, _MEG_DO_MAIN

    path = pathlib.Path(__file__).resolve().parents[1] / "tools" / "framework_lines.py"
    spec = importlib.util.spec_from_file_location("framework_lines", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)  # type: ignore[union-attr]
    for version, lines in _MEG_DO_LINES.items():
        assert tool.lines("megatron-do", MEG_MIRROR, version) == lines, version
    main_lines = tool.lines("megatron-do", MEG_MIRROR, "0.20.0", tag="d98e8a64dd")
    assert dict(zip((a[0] for a in _MEG_DO_ANCHORS), main_lines, strict=True)) == _MEG_DO_MAIN
    # the launch reader's refusal cites the assert's lines
    assert (_MEG_DO_MAIN["opg_if"], _MEG_DO_MAIN["opg_assert"]) == (1024, 1029)


def test_checkpoint_bytes_hold_the_whole_optimizer_state(prof):
    """A strategy's checkpoint (sim.profiles.formations, Megatron's fully parallel torch_dist
    save) writes the whole optimizer state over the data-parallel group, though each rank
    holds 1/d of it; a restart reads the rank's weights and its own shard. Without the option
    the bytes are as before (each node 1/d of weights and optimizer, reading all of it)."""
    from sim.profiles.formations import node_checkpoint_bytes

    m = prof.model("L7")
    for d in (2, 4):
        whole = build_plan(_hand_plan(d=d), prof, steps=1, check_memory=False)
        shard = build_plan(_hand_plan(options=DO, d=d), prof, steps=1, check_memory=False)
        a, b = node_checkpoint_bytes(whole, m), node_checkpoint_bytes(shard, m)
        for g, (w0, r0), (w1, r1) in zip(shard.memory, a, b, strict=True):
            assert w1 == pytest.approx(w0, rel=1e-15)  # the same checkpoint, spread alike
            assert r0 == g.tp * (g.weights + g.optimizer * d)
            assert r1 == g.tp * (g.weights + g.optimizer) < r0


def test_the_planner_bound_stays_below_the_reduce_scatter(slow):
    """The search's lower bound on a stage's gradient sync (ProfilePlanModel.allreduce_bound,
    which prunes plans) counts the reduce-scatter's d - 1 steps under the distributed optimizer:
    at most the time the plan is given, which the all-reduce's 2 (d - 1) would exceed."""
    from sim.planner.models import ProfilePlanModel

    plan = _hand_plan(options=DO)
    b = build_plan(plan, slow, steps=1, check_memory=False)
    pm = ProfilePlanModel(slow, slow.model("L7"), framework=plan.framework)
    size = 4.0 * P_HAND
    bound = pm.allreduce_bound((plan.stages[1].replicas[0],), 2, size)
    assert 0 < bound <= b.allreduce_times[1]
    whole = ProfilePlanModel(slow, slow.model("L7"), framework=FrameworkSpec(
        "megatron", precision="bf16"))
    assert whole.allreduce_bound((plan.stages[1].replicas[0],), 2, size) > b.allreduce_times[1]
