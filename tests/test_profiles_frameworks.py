"""sim.profiles.frameworks: which framework ran a plan sets its transfers and collectives."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles, plan_from_data, plan_to_data, read_runs
from sim.profiles.build import build_plan, p2p_flows, pair_time
from sim.profiles.frameworks import FRAMEWORKS, FrameworkSpec, resolve


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


@pytest.fixture(scope="module")
def runs():
    return {r.name: r for r in read_runs()}


def test_every_fact_names_the_code_it_was_read_in():
    """Each value of the table carries its source: a file and line of the framework's code
    (PyTorch DDP's from its documented constructor)."""
    for fw in FRAMEWORKS.values():
        for name, fact in fw.facts().items():
            assert fact.source.startswith(fw.code) or fw.key == "sailor-deepspeed" and \
                fact.source.startswith(FRAMEWORKS["deepspeed"].code), (fw.key, name)
            if fw.key != "ddp" and name not in ("gather_bytes",):
                assert re.search(r"\.py:\d+", fact.source), (fw.key, name, fact.source)
        for opt, (_, src) in fw.options.items():
            assert src.startswith((fw.code, FRAMEWORKS["deepspeed"].code)), (fw.key, opt)


def test_value_sizes_follow_the_framework_and_precision():
    """DeepSpeed sends activations and tied gradients in the model's dtype and all-reduces in
    communication_data_type; Megatron-LM all-reduces bf16 gradients in fp32."""
    ds16 = resolve(FrameworkSpec("deepspeed", precision="fp16"), 4)
    assert (ds16.activation_bytes, ds16.tied_bytes, ds16.dp_bytes) == (2, 2, 2)
    bf = resolve(FrameworkSpec("deepspeed", precision="bf16"), 4)
    assert (bf.activation_bytes, bf.tied_bytes, bf.dp_bytes) == (2, 4, 2)  # _hp_grad is fp32
    fp32ar = resolve(FrameworkSpec("deepspeed", precision="fp16",
                                   options=(("communication_data_type", "fp32"),)), 4)
    assert (fp32ar.activation_bytes, fp32ar.tied_bytes, fp32ar.dp_bytes) == (2, 2, 4)
    assert "communication_data_type" in fp32ar.sources["dp_bytes"]
    meg = resolve(FrameworkSpec("megatron", precision="bf16"), 4)
    assert (meg.activation_bytes, meg.tied_bytes, meg.dp_bytes) == (2, 4, 4)
    acc = resolve(FrameworkSpec("megatron", precision="fp16",
                                options=(("accumulate_allreduce_grads_in_fp32", True),)), 4)
    assert (acc.dp_bytes, acc.tied_bytes) == (4, 4)
    ov = resolve(FrameworkSpec("megatron", options=(("overlap_grad_reduce", True),)), 4, dp=64)
    assert ov.allreduce == "overlap-backward" and ov.bucket_elements == 64_000_000
    assert resolve(None, 4).precision == "fp32" and resolve(None, 2).precision == "fp16"
    ds = resolve(None, 4)
    assert ds.framework.key == "deepspeed" and ds.p2p == "blocking" and ds.gathers == (1, 2)
    assert ds.bucket_elements == 500_000_000 and not ds.barrier
    sailor = resolve(FrameworkSpec("sailor-deepspeed"), 4)
    assert sailor.barrier and sailor.gathers == (1, 1) and sailor.gather_bytes == 4
    ddp = resolve(FrameworkSpec("ddp", precision="fp16"), 4)
    assert ddp.bucket_elements == 25 * 1024 * 1024 / 2 and ddp.allreduce == "overlap-backward"


def test_sailor_runs_name_their_framework(runs):
    """The artifact's run files ran its modified DeepSpeed 0.16.5."""
    assert {r.plan.framework for r in runs.values()} == {FrameworkSpec("sailor-deepspeed",
                                                                       "0.16.5")}


def test_fp16_plan_moves_half_the_bytes(prof, runs):
    """Named fp16 on DeepSpeed, a plan's activations, gradients and tied weights move 2 bytes a
    value (the profile measured fp32): each transfer is the curve's time of half the bytes."""
    run = runs["clariden-OPT-350-N4_D2"]
    m = prof.model("OPT-350")
    fp32 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed")), prof, steps=1)
    fp16 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed", precision="fp16")),
                      prof, steps=1, check_memory=False)
    a = run.plan.stages[0].replicas[0]
    size = run.plan.microbatch_size * m.layer_sizes(4)[11].activation_bytes
    half = pair_time(prof.network, (a, (0, 0)), (a, (1, 0)), size / 2 / 4, 4)
    assert fp16.transfer_times[0][0][0] == pytest.approx(half, rel=1e-12)
    assert fp16.transfer_times[0][0][0] < fp32.transfer_times[0][0][0]
    net16 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed", precision="fp16")),
                       prof, steps=1, check_memory=False, network=True).config
    net32 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed")), prof, steps=1,
                       network=True).config
    assert net16.allreduce_sizes == tuple(x / 2 for x in net32.allreduce_sizes)
    assert net16.tied_allreduce_size == net32.tied_allreduce_size / 2
    assert net16.bucket_size == 5e8 * 2 and net32.bucket_size == 5e8 * 4
    # the profile's own bytes for every collective instead (the ablation of tools/real_runs.py)
    same = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed", precision="fp16")),
                      prof, steps=1, check_memory=False, value_sizes="profile")
    assert same.transfer_times == fp32.transfer_times


def test_megatron_sends_the_whole_tensor_from_every_tp_rank(prof, runs):
    """Megatron-LM without sequence parallelism does not partition the pipeline's tensors:
    a TP-4 stage sends 4 flows of the whole activation, and no all-gather follows."""
    run = runs["clariden-OPT-350-N4_D2"]
    b = build_plan(replace(run.plan, framework=FrameworkSpec("megatron")), prof, steps=1)
    assert p2p_flows(b.behaviour, 100.0, 4) == (100.0, 4)
    a = run.plan.stages[0].replicas[0]
    size = run.plan.microbatch_size * prof.model("OPT-350").layer_sizes(4)[11].activation_bytes
    assert b.transfer_times[0][0][0] == pytest.approx(
        pair_time(prof.network, (a, (0, 0)), (a, (1, 0)), size, 4), rel=1e-12)
    assert all(g == (0.0, 0.0) for row in b.gather_times for g in row)
    ds = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed")), prof, steps=1)
    assert ds.gather_times[0][0][1] > 0 and ds.gather_times[1][0][0] > 0  # 2 and 1 all-gathers
    assert ds.gather_times[0][0][1] == pytest.approx(2 * ds.gather_times[1][0][0], rel=1e-12)


def test_tied_allreduce_is_the_word_embedding(prof, runs):
    """The tied gradient is Megatron's word embedding (first layer less the position embedding,
    vocabulary x hidden / tp), for GPT-Neo as for OPT (whose profile lists it in the last layer)."""
    neo = load_profiles(models=("GPT-Neo-2.7",)).model("GPT-Neo-2.7")
    assert neo.tied_parameters(1) == 50304 * 2560 and neo.tied_parameters(4) == 50688 * 2560 // 4
    opt = prof.model("OPT-350")
    assert opt.tied_parameters(1) == 50304 * 1024 == opt.layer_sizes(1)[25].params - 2 * 1024
    b = build_plan(runs["clariden-OPT-350-N4_D2"].plan, prof, steps=1, network=True)
    assert b.config.tied_allreduce_size == opt.tied_parameters(4) * 4


def test_plan_files_name_their_framework(tmp_path):
    """A plan's framework (a name, or a table with version, precision and options) round-trips;
    unknown frameworks, versions, precisions and options are refused in one line."""
    doc = {"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 8,
           "framework": {"name": "deepspeed", "version": "0.16.5", "precision": "fp16",
                         "communication_data_type": "fp32"},
           "stages": [{"first_layer": 0, "last_layer": 25,
                       "replicas": [{"gpu": "GH-96", "tp": 4, "gpus_per_node": 4,
                                     "zone": "us-central1-a"}]}]}
    plan = plan_from_data(json.loads(json.dumps(doc)))
    assert plan.framework == FrameworkSpec("deepspeed", "0.16.5", "fp16",
                                           (("communication_data_type", "fp32"),))
    assert plan_from_data(plan_to_data(plan)) == plan
    assert plan_from_data({**doc, "framework": "megatron"}).framework == FrameworkSpec("megatron")
    bad = [({"framework": "horovod"}, "'framework' must be one of deepspeed"),
           ({"framework": {"name": "deepspeed", "version": "0.9"}},
            "'framework_version' must be a version of deepspeed"),
           ({"framework": {"name": "deepspeed", "precision": "fp8"}},
            "'precision' must be one of fp32, fp16, bf16"),
           ({"framework": {"name": "megatron", "communication_data_type": "fp32"}},
            "'framework_options' must be an option megatron has"),
           ({"framework": {"name": "deepspeed", "communication_data_type": "fp64"}},
            "'communication_data_type' must be one of fp32, fp16, bf16"),
           ({"framework": 3}, "'framework' must be a name or a table"),
           ({"frameworks": "deepspeed"}, "'plan' must be a table of model, microbatch_size, global_batch_size, stages, framework (no other key)")]
    for extra, msg in bad:
        with pytest.raises(ConfigError, match=re.escape(msg)):
            plan_from_data({**doc, **extra})


def test_framework_p2p_maps_to_the_adapters_modes(prof, runs):
    """Every framework's point-to-point is one the traffic adapter runs as the framework does:
    blocking (DeepSpeed's order, or Megatron-LM's with batched pairs), or overlapped on FIFO
    channels (never the max-min 'shared' comparison); its sync
    overlaps the backward pass exactly when the framework does; a plan over the network holds
    channels exactly when it overlaps its transfers."""
    import simpy

    from sim.training.traffic import traffic_for

    for fw in FRAMEWORKS.values():
        assert fw.p2p.value in ("blocking", "overlap", "batched")
        assert (fw.p2p.value == "batched") == (fw.key == "megatron")
        fb = resolve(FrameworkSpec(fw.key), 4)
        assert ("overlap=backward" in fb.sync) == (fb.allreduce == "overlap-backward")
        assert fb.sync == "allreduce" or fb.sync.endswith(f"buckets={fw.bucket_rule.value}")
    run = runs["mit-N2_D1"]
    for p2p in (None, "overlap", "batched"):
        b = build_plan(run.plan, prof, steps=1, network=True, p2p=p2p)
        t = traffic_for(b.config, simpy.Environment())
        assert b.config.p2p == (p2p or "blocking") and b.config.sync == "allreduce"
        assert (t.channels is not None) == (p2p == "overlap")


def test_on_the_shipped_plans_the_step_barrier_is_the_frameworks_join(prof, runs):
    """On every shipped plan the last stage ends the step (its tied and data-parallel
    all-reduces are the longest), so DeepSpeed's join before the next step (after the last
    stages' loss broadcast) starts every stage with the last one, as the engines' barrier
    does: the bound on what the barrier adds is 0 for the artifact, upstream DeepSpeed and
    Megatron-LM (whose join is the pipeline's)."""
    from sim.profiles.build import explain_rows

    for name, run in runs.items():
        for fw in ("sailor-deepspeed", "deepspeed", "megatron"):
            x = explain_rows(build_plan(run.plan, prof, steps=1, check_memory=False,
                                        framework=FrameworkSpec(fw)))
            assert x["step_join_bound"] == 0.0, (name, fw)
            if len(x["stage_ends"]) > 1:
                assert x["stage_ends"][-1] == max(x["stage_ends"]), (name, fw)
