"""sim.profiles.frameworks: which framework ran a plan sets its transfers and collectives."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles, plan_from_data, plan_to_data, read_runs
from sim.profiles.build import build_plan, p2p_flows, pair_time
from sim.profiles.frameworks import FRAMEWORKS, RELEASES, FrameworkSpec, resolve


@pytest.fixture(scope="module")
def prof():
    return load_profiles(models=("OPT-350",))


@pytest.fixture(scope="module")
def runs():
    return {r.name: r for r in read_runs()}


def test_every_fact_names_the_code_it_was_read_in():
    """Each value of the table carries its source: a file and line of the framework's code
    (PyTorch DDP's from its documented constructor)."""
    releases = [fw for versions in RELEASES.values() for fw in versions.values()]
    assert {(fw.key, fw.versions[0]) for fw in releases} >= {("deepspeed", "0.16.5"),
                                                             ("deepspeed", "0.3.13")}
    for fw in releases:
        assert RELEASES[fw.key][fw.versions[0]] is fw and fw.code.find(fw.versions[0]) > 0 \
            or fw.key == "ddp"
        for name, fact in fw.facts().items():
            assert fact.source.startswith(fw.code) or fw.key == "sailor-deepspeed" and \
                fact.source.startswith(FRAMEWORKS["deepspeed"].code), (fw.key, name)
            if fw.key != "ddp" and name not in ("gather_bytes",):
                assert re.search(r"\.py:\d+", fact.source), (fw.key, name, fact.source)
        for opt, (_, src) in fw.options.items():
            assert src.startswith((fw.code, FRAMEWORKS["deepspeed"].code)), (fw.key, opt)
        for opt, why in fw.lacks.items():  # an option of another release, refused with why
            # (the Sailor artifact's: of the upstream release its engine replaces)
            assert opt not in fw.options and (any(opt in other.options for other in
                                                  RELEASES[fw.key].values())
                                              or fw.key == "sailor-deepspeed"
                                              and opt in FRAMEWORKS["deepspeed"].options), \
                (fw.key, opt)
            assert re.search(r"\.py:\d+|config\.py", why), (fw.key, opt)


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
    value (the profile measured fp32): each transfer is the curve's time of half the bytes,
    after the partition metadata each TP rank sends first (7 + 4 int64 values at TP 4, in
    every precision)."""
    run = runs["clariden-OPT-350-N4_D2"]
    m = prof.model("OPT-350")
    fp32 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed")), prof, steps=1)
    fp16 = build_plan(replace(run.plan, framework=FrameworkSpec("deepspeed", precision="fp16")),
                      prof, steps=1, check_memory=False)
    a = run.plan.stages[0].replicas[0]
    size = run.plan.microbatch_size * m.layer_sizes(4)[11].activation_bytes
    half = pair_time(prof.network, (a, (0, 0)), (a, (1, 0)), size / 2 / 4, 4)
    meta = pair_time(prof.network, (a, (0, 0)), (a, (1, 0)), 8 * (7 + 4), 4)
    assert fp16.transfer_times[0][0][0] == pytest.approx(meta + half, rel=1e-12)
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


def test_tied_allreduce_is_the_word_embedding(prof, runs, tie):
    """The shipped models are untied as the Sailor artifact builds them (OPTModelPipe's head
    and GPTNeoModelPipe's last LayerNorm are LayerSpecs: sim.profiles.sailor.ties_embeddings):
    no tied weight, no tied all-reduce. Of a tied model the tied gradient is Megatron's word
    embedding (first layer less the position embedding, vocabulary x hidden / tp)."""
    neo = load_profiles(models=("GPT-Neo-2.7",)).model("GPT-Neo-2.7")
    opt = prof.model("OPT-350")
    assert not neo.tied_embeddings and not opt.tied_embeddings
    assert neo.tied_parameters(1) == 0 and opt.tied_parameters(4) == 0
    assert build_plan(runs["clariden-OPT-350-N4_D2"].plan, prof, steps=1,
                      network=True).config.tied_allreduce_size == 0
    tied_neo = tie(load_profiles(models=("GPT-Neo-2.7",)), "GPT-Neo-2.7").model("GPT-Neo-2.7")
    assert tied_neo.tied_parameters(1) == 50304 * 2560
    assert tied_neo.tied_parameters(4) == 50688 * 2560 // 4
    tied = tie(prof, "OPT-350")
    t_opt = tied.model("OPT-350")
    assert t_opt.tied_parameters(1) == 50304 * 1024 == t_opt.layer_sizes(1)[25].params - 2 * 1024
    b = build_plan(runs["clariden-OPT-350-N4_D2"].plan, tied, steps=1, network=True)
    assert b.config.tied_allreduce_size == t_opt.tied_parameters(4) * 4


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


def test_command_line_framework_takes_the_plan_tables_keys():
    """``--framework NAME[:key=value,...]`` is the plan file's table in one string: booleans
    and numbers typed, a version kept as text (0.20 is not 0.2), malformed text refused."""
    from sim.profiles.formats import framework_from_text

    assert framework_from_text("megatron") == FrameworkSpec("megatron")
    assert framework_from_text("megatron:precision=bf16, overlap_grad_reduce=true") == \
        FrameworkSpec("megatron", precision="bf16", options=(("overlap_grad_reduce", True),))
    assert framework_from_text("ddp:bucket_cap_mb=50").option("bucket_cap_mb") == 50
    assert framework_from_text("deepspeed:version=0.16.5,communication_data_type=fp32") == \
        FrameworkSpec("deepspeed", "0.16.5", options=(("communication_data_type", "fp32"),))
    behaviour = resolve(framework_from_text("megatron:overlap_grad_reduce=true"), 2)
    assert behaviour.allreduce == "overlap-backward"
    bad = [("megatron:bf16", "'framework' must be NAME[:key=value,...]"),
           ("megatron:overlap=true", "'framework_options' must be an option megatron has"),
           ("megatron:overlap_grad_reduce=yes", "'overlap_grad_reduce' must be one of"),
           ("ddp:bucket_cap_mb=1,bucket_cap_mb=2", "'framework' must be each key once"),
           ("megatron:name=ddp", "'framework' must be each key once"),
           ("deepspeed:version=0.20", "'framework_version' must be a version of deepspeed"),
           ("", "'framework' must be NAME[:key=value,...] text"),
           # a colon with no option after it, as a trailing comma
           ("megatron:", "'framework' must be NAME[:key=value,...] (a colon followed"),
           ("megatron: ", "'framework' must be NAME[:key=value,...] (a colon followed"),
           ("megatron:precision=bf16,", "'framework' must be NAME[:key=value,...] (each"),
           # a number is a plan file's (JSON's): not Python's int() and float() spellings
           ("ddp:bucket_cap_mb=1_000", "'bucket_cap_mb' must be a number > 0: '1_000'"),
           ("ddp:bucket_cap_mb=\u0663", "'bucket_cap_mb' must be a number > 0: '\u0663'"),
           ("ddp:bucket_cap_mb=nan", "'bucket_cap_mb' must be a number > 0: 'nan'"),
           ("ddp:bucket_cap_mb=Infinity", "'bucket_cap_mb' must be a number > 0: 'Infinity'"),
           ("ddp:bucket_cap_mb= 0x10", "'bucket_cap_mb' must be a number > 0: '0x10'"),
           ("ddp:bucket_cap_mb=-5", "'bucket_cap_mb' must be a number > 0: -5")]
    assert framework_from_text("ddp:bucket_cap_mb=1e3").option("bucket_cap_mb") == 1000.0
    assert framework_from_text("ddp:bucket_cap_mb=2.5").option("bucket_cap_mb") == 2.5
    for text, msg in bad:
        with pytest.raises(ConfigError, match=re.escape(msg)):
            framework_from_text(text)


def test_a_plan_files_table_and_the_command_line_read_spaces_alike():
    """One reading of a framework's words: spaces around a name, key or text value are not
    part of it, in a plan file's table as in ``--framework``'s text (``version= 0.14.4`` ran
    on the command line, a plan file's ``" 0.14.4"`` was refused as no version)."""
    from sim.profiles.formats import framework_from_data, framework_from_text

    want = FrameworkSpec("deepspeed", "0.14.4", "fp16", (("communication_data_type", "fp32"),))
    assert framework_from_text("deepspeed:version= 0.14.4 , precision=fp16,"
                               "communication_data_type=fp32 ") == want
    assert framework_from_data({"name": " deepspeed", "version": "0.14.4 ", " precision": "fp16",
                                "communication_data_type": "\tfp32"}) == want
    assert framework_from_data(" megatron ") == framework_from_text(" megatron") == \
        FrameworkSpec("megatron")
    with pytest.raises(ConfigError, match=re.escape("'framework' must be each key once at "
                                                    "framework: 'version'")):
        framework_from_data({"name": "deepspeed", "version": "0.14.4", "version ": "0.16.5"})


def test_a_release_of_a_table_read_for_a_major_line_is_that_table():
    """PyTorch DDP's table is read for its 2.x line (bucket_cap_mb 25, the 1 MiB first bucket):
    ddp:version=2.1 (and 2.4.1) is that table, where it was refused ('a version of ddp the table
    was read at (2.x)'); another major, a bare major, a fourth part or a tag's 'v' is not."""
    from sim.profiles.formats import framework_from_text
    from sim.profiles.frameworks import DDP, framework

    for v in ("2.x", "2.1", "2.4.1", "2.10"):
        assert framework("ddp", v) is DDP
        assert resolve(framework_from_text(f"ddp:version={v}"), 2) == \
            resolve(framework_from_text("ddp"), 2)
    for v in ("3.1", "2", "2.", "2.1.0.1", "v2.1", "2.a", "2.\u0664", " 2.1"):
        with pytest.raises(ConfigError, match=re.escape(
                "'framework_version' must be a version of ddp the table was read at (2.x (any "
                "2.N or 2.N.M as the release writes it")):
            framework("ddp", v)


def test_a_ddp_version_not_written_as_a_pytorch_release_is_refused():
    """'2.04' and a 20-digit minor were read as the 2.x table; PyTorch writes its releases
    without leading zeros (version.txt '2.4.1') and with a minor of 1 or 2 digits: each is one
    line naming framework_version, on the library reader and through the CLI's text; a
    release as written (and the digit bound's edge) still reads the table."""
    from sim.profiles.formats import framework_from_text
    from sim.profiles.frameworks import DDP, framework

    for v in ("2.0", "2.0.1", "2.100", "2.999.999"):
        assert framework("ddp", v) is DDP
    rule = ("'framework_version' must be a version of ddp the table was read at (2.x (any 2.N "
            "or 2.N.M as the release writes it: N and M of 1 to 3 digits, no leading zero)): ")
    for v in ("2.04", "2.4.01", "2.00", "2." + "1" * 20, "2.1000", "2.1.1000", "2.+4"):
        with pytest.raises(ConfigError) as e:
            framework("ddp", v)
        assert str(e.value) == rule + repr(v)
        with pytest.raises(ConfigError, match="framework_version"):
            resolve(framework_from_text(f"ddp:version={v}"), 2)


def test_command_line_framework_overrides_the_plans_table_key_by_key():
    """``dtsim train --plan P --framework TEXT``: the same framework and release keeps the
    plan's keys the text does not give (its precision was dropped before: fp16 plans ran in
    fp32 under ``--framework deepspeed:communication_data_type=fp16``); another framework or
    release keeps only the precision; the text's own errors come first."""
    from sim.profiles.formats import framework_from_text

    plan = FrameworkSpec("deepspeed", "0.16.5", "fp16", (("communication_data_type", "fp32"),))
    same = framework_from_text("deepspeed:pipe_partitioned=false", plan)
    assert same == FrameworkSpec("deepspeed", "0.16.5", "fp16", (
        ("communication_data_type", "fp32"), ("pipe_partitioned", False)))
    assert framework_from_text("deepspeed:communication_data_type=fp16", plan).option(
        "communication_data_type") == "fp16"
    assert framework_from_text("megatron", plan) == FrameworkSpec("megatron", precision="fp16")
    assert framework_from_text("deepspeed:version=0.3.13,seq_length=2048", plan) == \
        FrameworkSpec("deepspeed", "0.3.13", "fp16", (("seq_length", 2048),))
    assert framework_from_text("megatron:precision=bf16", plan).precision == "bf16"
    assert framework_from_text("megatron", FrameworkSpec("sailor-deepspeed", "0.16.5")) == \
        FrameworkSpec("megatron")
    with pytest.raises(ConfigError, match=re.escape("'framework_options' must be an option "
                                                    "megatron has")):
        framework_from_text("megatron:communication_data_type=fp16", plan)
    with pytest.raises(ConfigError, match=re.escape("'precision' must be")):
        framework_from_text("deepspeed:version=0.3.13", replace(plan, precision="bf16"))


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
    """On every shipped plan the first or the last stage ends the step (they hold the
    embedding and the head, the largest layers: their data-parallel all-reduces and optimizer
    steps are the longest), so DeepSpeed's join before the next step (after the last stages'
    loss broadcast, which every later stage waits on through stage 0's first activation)
    starts every stage as the engines' barrier does: the bound on what the barrier adds is 0
    for the artifact, upstream DeepSpeed and Megatron-LM (whose join is the pipeline's)."""
    from sim.profiles.build import explain_rows

    for name, run in runs.items():
        for fw in ("sailor-deepspeed", "deepspeed", "megatron"):
            x = explain_rows(build_plan(run.plan, prof, steps=1, check_memory=False,
                                        framework=FrameworkSpec(fw)))
            assert x["step_join_bound"] == 0.0, (name, fw)
            if len(x["stage_ends"]) > 1:
                ends = x["stage_ends"]
                assert max(ends[0], ends[-1]) == max(ends), (name, fw)


def _tp_plan(tps, fw, gpu="A100-40"):
    from sim.profiles import Plan, ReplicaSpec, StageSpec

    L = len(tps)
    cuts = [round(26 * k / L) for k in range(L + 1)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), tuple(
        ReplicaSpec(gpu, tps[j], gpus_per_node=tps[j], zone="us-central1-a") for _ in range(2)))
        for j in range(L)), 2, 16, model="OPT-350", framework=FrameworkSpec(fw))


def test_the_artifact_sends_once_per_pipeline_group(prof):
    """The Sailor artifact runs stages of different TP degrees: a pipeline has as many groups
    as its largest TP degree T, and a rank of a stage of TP t sends each part once per group
    it is in (T / t groups: deepspeed/topology.py:103-127, pipe_engine.py:1069-1071,
    1123-1125), so a hop's activation moves T / t_sender times the tensor and its gradient
    T / t_receiver times; upstream DeepSpeed (one TP degree: pipe_groups False) is the rule
    once. With TP 1, 4, 1 on A100-40s: the artifact's activation of hop 0 is 4 messages of
    the tensor one after the other (the TP-1 rank sends its groups in turn:
    pipe_engine.py:1069-1071), its gradient of hop 1 too, the others once; the DES over the
    plan network equals the closed form (1e-9) and the step is longer than the once-rule's by
    more than 5%."""
    from sim.profiles.build import pair_time

    steps = {}
    for fw in ("sailor-deepspeed", "deepspeed"):
        plan = _tp_plan((1, 4, 1), fw)
        b, closed = _closed_form_equals_des(plan, prof)
        steps[fw] = closed
        mp = prof.model("OPT-350")
        size = 2 * mp.layer_sizes(1)[plan.stages[0].layers[-1]].activation_bytes
        times = b.transfer_times
        reps = [(plan.stages[j].replicas[0], (j, 0)) for j in range(3)]
        many = 4 if fw == "sailor-deepspeed" else 1
        # the partition metadata before each message: the artifact's at TP 1 too (7 + 1
        # int64 values), upstream's only from the TP-4 stage (7 + 4)
        one = 8 * (7 + 1) if fw == "sailor-deepspeed" else 0
        four = pair_time(prof.network, reps[1], reps[0], 8 * (7 + 4), 4, prof)
        assert times[0][0][0] == pytest.approx(many * (
            pair_time(prof.network, reps[0], reps[1], one, 1, prof)
            + pair_time(prof.network, reps[0], reps[1], size, 1, prof)), rel=1e-12)
        assert times[1][0][1] == pytest.approx(many * (
            pair_time(prof.network, reps[2], reps[1], one, 1, prof)
            + pair_time(prof.network, reps[2], reps[1], size, 1, prof)), rel=1e-12)
        assert times[0][0][1] == pytest.approx(
            four + pair_time(prof.network, reps[1], reps[0], size / 4, 4, prof), rel=1e-12)
    assert steps["sailor-deepspeed"] > 1.05 * steps["deepspeed"]
    # one TP degree everywhere: one group per rank, the same transfers as upstream DeepSpeed
    same = [build_plan(_tp_plan((2, 2, 2), fw), prof, steps=1, check_memory=False,
                       network=True).config for fw in ("sailor-deepspeed", "deepspeed")]
    assert same[0].gradient_transfer_sizes is None
    assert same[0].transfer_sizes == same[1].transfer_sizes


def test_tied_embeddings_need_one_tp_degree_at_both_ends(prof, tie):
    """The tied all-reduce pairs TP rank k of the first stage with rank k of the last
    (DeepSpeed's module.py _index_tied_modules): a plan of a tied model whose first and last
    stage differ in TP is refused in one line (the DES and the closed form disagreed on it).
    The shipped OPT-350 is untied as the artifact builds it: the same plan runs."""
    with pytest.raises(ConfigError, match=re.escape("'plan' must be one TP degree at the "
                                                    "first and last stage")):
        build_plan(_tp_plan((1, 2), "sailor-deepspeed"), tie(prof, "OPT-350"), steps=1,
                   check_memory=False)
    b = build_plan(_tp_plan((1, 2), "sailor-deepspeed"), prof, steps=1, check_memory=False)
    assert b.tied_allreduce_time == 0.0 and b.tied_allreduce_times == ()


def _closed_form_equals_des(plan, prof):
    """``plan``'s build and closed-form step time, asserting the DES over the plan's network
    gives the same step (1e-9)."""
    from sim.engines import predictions
    from sim.rng import Streams
    from sim.training import training_model

    b = build_plan(plan, prof, steps=1, check_memory=False)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    closed = predictions("training", b.config)["step_time_mean"]["value"]
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(closed, rel=1e-9)
    return b, closed


def _ds(tps, version):
    # 0.3.13's hops carry the 2048 x 2048 mask of the OPT-350 runs' sequence (--seq-length 2048)
    opts = (("seq_length", 2048),) if version == "0.3.13" else ()
    return replace(_tp_plan(tps, "deepspeed"), framework=FrameworkSpec("deepspeed", version,
                                                                       options=opts))


MASK = 2 * 2048 * 2048  # 0.3.13's 1 x 1 x 2048 x 2048 mask as sent, in fp16: 8 MiB


def test_deepspeed_0313_partitions_the_activation_but_not_its_gradient(prof):
    """DeepSpeed 0.3.13 (tag v0.3.13, runtime/pipe/engine.py:106-107): with TP > 1 each rank
    sends 1/t of the activation and the receiver all-gathers it (493-499), but the gradient
    goes back whole from every TP rank (is_grad_partitioned = False; 843-850, 920-939), and
    the backward pass runs one all-gather (the sender's output, 910-915) where 0.16.5 runs two.
    Hand-worked on OPT-350 at micro-batch 2 (fp32): the hop's activation is 2 x 2048 x 1024
    x 4 = 16 MiB; at TP t both releases send it as t flows of 16/t MiB; the gradient is t
    flows of 16/t MiB under 0.16.5 and t flows of 16 MiB under 0.3.13 (32 MiB moved at TP 2,
    64 MiB at TP 4); after them 0.3.13's ranks each send the 8 MiB mask, a blocking message
    of its own (engine.py:520, 788-792); one all-gather of 16 MiB over t GPUs is (t - 1) 16/t MiB over the
    node's curve. Each time is exact (1e-12)."""
    from sim.profiles.build import allgather_time

    size = 2 * 2048 * 1024 * 4
    assert 2 * prof.model("OPT-350").layer_sizes(2)[12].activation_bytes == size
    for t in (2, 4):
        got = {}
        for v in ("0.16.5", "0.3.13"):
            b = build_plan(_ds((t, t), v), prof, steps=1, check_memory=False)
            n = build_plan(_ds((t, t), v), prof, steps=1, check_memory=False,
                           network=True).config
            fb = b.behaviour
            assert fb.framework.versions == (v,) and fb.partitioned
            assert fb.gradient_partitioned == (v == "0.16.5")
            assert fb.gathers == ((1, 2) if v == "0.16.5" else (1, 1))
            a, c = (_ds((t, t), v).stages[j].replicas[0] for j in (0, 1))
            # each partitioned tensor after its metadata, 7 + t int64 values from each rank:
            # the activation in both releases, the gradient in 0.16.5 only; 0.3.13's ranks
            # then each send the mask, a message of its own
            meta = pair_time(prof.network, (a, (0, 0)), (c, (1, 0)), 8 * (7 + t), t, prof)
            mask = 0.0 if v == "0.16.5" else pair_time(prof.network, (a, (0, 0)), (c, (1, 0)),
                                                       MASK, t, prof)
            assert b.transfer_times[0][0][0] == pytest.approx(meta + pair_time(
                prof.network, (a, (0, 0)), (c, (1, 0)), size / t, t, prof) + mask, rel=1e-12)
            per_flow = size / t if v == "0.16.5" else size
            assert b.transfer_times[0][0][1] == pytest.approx(
                (meta if v == "0.16.5" else 0.0)
                + pair_time(prof.network, (c, (1, 0)), (a, (0, 0)), per_flow, t, prof), rel=1e-12)
            assert n.meta_sizes == (8 * (7 + t),)
            assert n.gradient_meta_sizes == (None if v == "0.16.5" else (0.0,))
            assert n.transfer_sizes == (size,)
            assert n.mask_sizes == (None if v == "0.16.5" else (t * MASK,))
            # None: as the activation's
            assert (n.gradient_transfer_sizes or n.transfer_sizes) == \
                ((size,) if v == "0.16.5" else (t * size,))
            one = allgather_time(prof, "A100-40", t, size)
            bw, _ = prof.intra_node_bandwidth("A100-40", t, size / t)
            assert one == pytest.approx((t - 1) * size / t / bw, rel=1e-12)
            assert b.gather_times[1][0][0] == pytest.approx(one, rel=1e-12)
            assert b.gather_times[0][0][1] == pytest.approx(fb.gathers[1] * one, rel=1e-12)
            got[v] = b.transfer_times[0][0][1]
        assert got["0.3.13"] > 1.5 * got["0.16.5"]


def test_deepspeed_0313_plan_des_equals_closed_form(prof):
    """A 0.3.13 plan (TP 2, three stages; TP 4, two), the DES over the plan's network (each
    gradient t flows of the whole tensor) equals the closed form (1e-9), and its step is
    longer than 0.16.5's: the whole gradients cost more than the all-gather 0.3.13 saves."""

    for tps in ((2, 2, 2), (4, 4)):
        step = {}
        for v in ("0.16.5", "0.3.13"):
            step[v] = _closed_form_equals_des(_ds(tps, v), prof)[1]
        assert step["0.3.13"] > 1.02 * step["0.16.5"], tps


def test_deepspeed_0313_transfer_order_gives_the_same_steps():
    """0.3.13's TrainSchedule posts each step's two transfers the other way round from 0.16.5's
    (schedule.py:206-219 at v0.3.13): both are between the same two stages, each holding both,
    so with nothing between them the exact makespan of the blocking programs is the same in
    either order (the engines run 0.16.5's unless 0.3.13's all-gather sits between them:
    test_deepspeed_0313_program_gathers_before_the_gradient_receive); at random times over 2-5 stages and 1-7 micro-batches they agree to 1e-12,
    though the programs differ."""
    import random

    from sim.analytic.training import program_makespan
    from sim.training.schedules import deepspeed_program

    rng = random.Random(7)
    for L in (2, 3, 4, 5):
        for m in (1, 2, 3, 7):
            new = [deepspeed_program(L, m, j) for j in range(L)]
            old = [deepspeed_program(L, m, j, order="0.3.13") for j in range(L)]
            assert old != new or m == 1
            for _ in range(3):
                f, b = [rng.uniform(.5, 2) for _ in range(L)], [rng.uniform(1, 4) for _ in range(L)]
                a, g = [rng.uniform(0, 1) for _ in range(L - 1)], [rng.uniform(0, 3)
                                                                   for _ in range(L - 1)]
                assert program_makespan(old, f, b, a, g, blocking=True) == pytest.approx(
                    program_makespan(new, f, b, a, g, blocking=True), rel=1e-12)


def test_deepspeed_versions_and_their_options():
    """``version = "0.3.13"`` (plan file or ``--framework deepspeed:version=0.3.13``) picks the
    0.3.13 table; the default stays 0.16.5. 0.3.13's fp32_allreduce all-reduces in fp32; its
    fp16 sends 2 bytes a value; 0.16.5's options and bf16 are refused for it with the reason."""
    from sim.profiles.formats import framework_from_text

    assert resolve(None, 4).framework.versions == ("0.16.5",)
    spec = framework_from_text("deepspeed:version=0.3.13,fp32_allreduce=true,precision=fp16")
    assert spec == FrameworkSpec("deepspeed", "0.3.13", "fp16", (("fp32_allreduce", True),))
    fb = resolve(spec, 4)
    assert (fb.activation_bytes, fb.tied_bytes, fb.dp_bytes) == (2, 2, 4)
    assert "fp32_allreduce" in fb.sources["dp_bytes"] and "v0.3.13" in fb.sources["gathers"]
    plain = resolve(FrameworkSpec("deepspeed", "0.3.13"), 2)
    assert plain.precision == "fp16" and plain.dp_bytes == 2 and plain.optimizer_barrier
    assert not resolve(FrameworkSpec("deepspeed", "0.3.13"), 4).optimizer_barrier
    bad = [(dict(version="0.3.13", precision="bf16"),
            "'precision' must be one of fp32, fp16 with deepspeed 0.3.13"),
           (dict(version="0.3.13", options=(("communication_data_type", "fp32"),)),
            "'framework_options' must be an option deepspeed 0.3.13 has (fp32_allreduce, seq_length; "
            "communication_data_type: DeepSpeed 0.3.13's runtime/config.py reads no such key"),
           (dict(version="0.3.13", options=(("pipe_partitioned", False),)),
            "pipe_partitioned: DeepSpeed 0.3.13 always partitions with TP > 1"),
           (dict(options=(("fp32_allreduce", True),)),
            "'framework_options' must be an option deepspeed 0.16.5 has (communication_data_type"
            ", pipe_partitioned, grad_partitioned; fp32_allreduce: DeepSpeed 0.16.5's "
            "runtime/config.py reads no "
            "such key (0.3.13's: version=0.3.13)"),
           (dict(version="0.3.12"), "'framework_version' must be a version of deepspeed the "
            "table was read at (0.16.5, 0.3.13, each tagged release 0.9.0 to 0.16.4)")]
    for kw, msg in bad:
        with pytest.raises(ConfigError, match=re.escape(msg)):
            FrameworkSpec("deepspeed", **kw)


@pytest.mark.parametrize("value", [False, True])
def test_the_artifact_refuses_pipe_partitioned(value):
    """The Sailor artifact's engine reads ``pipeline.pipe_partitioned`` (pipe_engine.py:162-164)
    and never uses it: every stage but the last partitions its output (772-788) and every
    gradient (1101-1102) whatever it says. So the option, which upstream 0.16.5 honours, is
    refused for sailor-deepspeed in one line naming it and why (off, dtsim had timed whole
    tensors from every TP rank the engine never sends; on, it would say nothing); its
    communication_data_type, which the artifact's engine.py casts to (2480), stays."""
    from sim.profiles.formats import framework_from_text

    msg = ("'framework_options' must be an option sailor-deepspeed 0.16.5 has "
           "(communication_data_type; pipe_partitioned: the Sailor artifact's engine reads the "
           "key (deepspeed/pipe_engine.py:162-164) but never uses it")
    with pytest.raises(ConfigError, match=re.escape(msg) + r".*: 'pipe_partitioned'$"):
        FrameworkSpec("sailor-deepspeed", options=(("pipe_partitioned", value),))
    with pytest.raises(ConfigError, match=re.escape(msg)):
        framework_from_text(f"sailor-deepspeed:pipe_partitioned={str(value).lower()}")
    assert resolve(FrameworkSpec("sailor-deepspeed", options=(
        ("communication_data_type", "fp32"),)), 2).dp_bytes == 4
    assert FrameworkSpec("deepspeed", options=(("pipe_partitioned", value),))  # upstream's


def test_the_artifact_runs_tp_1_2_4_only(prof):
    """The Sailor artifact's Megatron-DeepSpeed asserts every replica's TP degree is 1, 2 or 4
    (core/parallel_state.py:112-114): a TP-8 plan under sailor-deepspeed is refused in one line
    naming 'tp', the place, the rule's source and the value; upstream DeepSpeed and Megatron-LM
    run it. The planner searches only the framework's degrees: on one 8-GPU V100 node the
    artifact's plans are TP 1, 2, 4 and a request for TP 8 is refused, upstream DeepSpeed's
    include TP 8."""
    from sim.planner import PlanRequest, search_plans
    from sim.planner.fleets import parse_nodes
    from sim.planner.models import ProfilePlanModel

    plan = _tp_plan((8, 8), "sailor-deepspeed", gpu="V100-16")
    with pytest.raises(ConfigError, match=r"^'tp' must be 1, 2 or 4 with framework "
                       r"sailor-deepspeed, at stage 0 replica 0 \(a Sailor plan's "
                       r"tmp_per_stage\[0\]\[0\]; .*megatron/core/parallel_state\.py:112-114"
                       r".*\): 8$"):
        build_plan(plan, prof, steps=1, check_memory=False)
    for fw in ("deepspeed", "megatron"):
        b = build_plan(plan, prof, steps=1, check_memory=False, framework=FrameworkSpec(fw))
        assert b.behaviour.tp_degrees is None and b.transfer_times
    model = prof.model("OPT-350")
    fleet = parse_nodes("V100-16:8x1@us-central1-a", prof.network)
    seen = {}
    for fw in ("deepspeed", "sailor-deepspeed"):
        pm = ProfilePlanModel(prof, model, framework=FrameworkSpec(fw))
        res = search_plans(model, fleet, prof.gpus, PlanRequest(16, top=50), pm)
        seen[fw] = {x.tp for c in res.candidates for st in c.plan.stages for x in st.replicas}
    assert seen == {"deepspeed": {1, 2, 4, 8}, "sailor-deepspeed": {1, 2, 4}}
    with pytest.raises(ConfigError, match=r"'tp' must be .* and the framework runs \(1, 2, 4\)"):
        search_plans(model, fleet, prof.gpus, PlanRequest(16, tp=(8,)), ProfilePlanModel(
            prof, model, framework=FrameworkSpec("sailor-deepspeed")))


def test_what_a_hop_carries_per_framework(prof):
    """Per micro-batch a pipeline hop carries the activation alone under DeepSpeed 0.16.5, the
    Sailor artifact (its models read the mask from args.attn_mask: train_llm.py:89-105) and
    Megatron-LM (p2p_communication.py:494-514: one tensor); under DeepSpeed 0.3.13 with
    Megatron-LM v1.1.5's GPT2ModelPipe also the 1 x 1 x seq x seq mask cast to fp16, whole
    from every TP rank (engine.py:520, 776-792), each rank's a message of its own after its
    part (the output tuple sent item by item, 788-792), and never with the gradient
    (822-830). Hand-worked on OPT-350 at micro-batch 2 (fp32), two stages of TP t: the
    activation is 16 MiB, the mask 2 x 2048^2 = 8 MiB. At TP 2 the activation flows are
    2 x 8 MiB (0.16.5, Sailor, 0.3.13), 2 x 16 MiB (Megatron); at TP 1 one flow of 16 MiB;
    0.3.13's masks then t flows of 8 MiB. The gradient: 2 x 8 MiB (0.16.5, Sailor),
    2 x 16 MiB (Megatron and 0.3.13), 16 MiB at TP 1. The DES over the plan's network equals
    the closed form with the mask (1e-9), and the step is longer than without it."""

    mib = 1024 * 1024
    want = {("deepspeed", 2): ((8, 2), (8, 2)), ("sailor-deepspeed", 2): ((8, 2), (8, 2)),
            ("megatron", 2): ((16, 2), (16, 2)), ("0.3.13", 2): ((8, 2), (16, 2)),
            ("deepspeed", 1): ((16, 1), (16, 1)), ("sailor-deepspeed", 1): ((16, 1), (16, 1)),
            ("megatron", 1): ((16, 1), (16, 1)), ("0.3.13", 1): ((16, 1), (16, 1))}
    size = 16 * mib
    for (fw, t), (fwd, bwd) in want.items():
        plan = _ds((t, t), "0.3.13") if fw == "0.3.13" else _tp_plan((t, t), fw)
        b = build_plan(plan, prof, steps=1, check_memory=False)
        assert p2p_flows(b.behaviour, size, t) == (fwd[0] * mib, fwd[1]), (fw, t)
        assert p2p_flows(b.behaviour, size, t, gradient=True) == (bwd[0] * mib, bwd[1]), (fw, t)
        n = build_plan(plan, prof, steps=1, check_memory=False, network=True).config
        assert n.transfer_sizes == (fwd[0] * fwd[1] * mib,), (fw, t)
        assert (n.gradient_transfer_sizes or n.transfer_sizes) == (bwd[0] * bwd[1] * mib,)
        assert b.behaviour.mask_bytes == (8 * mib if fw == "0.3.13" else 0.0)
        assert n.mask_sizes == ((8 * t * mib,) if fw == "0.3.13" else None)
    # DES = closed form on a 0.3.13 plan with the mask (TP 2, three stages); against the same
    # plan with a 1 x 1 mask (seq_length 1: 2 bytes a hop) the 8 MiB mask lengthens the step
    steps = {}
    for seq in (2048, 1):
        plan = replace(_ds((2, 2, 2), "0.3.13"), framework=FrameworkSpec(
            "deepspeed", "0.3.13", options=(("seq_length", seq),)))
        steps[seq] = _closed_form_equals_des(plan, prof)[1]
    assert steps[2048] > 1.01 * steps[1]


def test_deepspeed_0313_keeps_the_masks_in_memory(prof, runs):
    """DeepSpeed 0.3.13 with GPT2ModelPipe holds a 1 x 1 x seq x seq bool mask (seq^2 bytes) in
    each input buffer (stage 0's loaded batches, engine.py:625-638; a later stage's received
    ones cast back to bool, 886-891, 898), one more per micro-batch in flight where the forward
    pass's clone (488, kept in the output buffer, 523) does not replace the received one (a
    later stage with TP > 1 does, 499-504), and after the first stage the fp16 receive buffer
    (866: 2 seq^2). Hand-worked at seq 2048 (4 MiB a mask): the deepest shipped plan (4 stages
    of TP 4, 32 micro-batches; input buffers max(2, min(L - j + 1, m)) = 5, 4, 3, 2; in
    flight 4, 3, 2, 1) holds 5 + 4 = 9, 4 + 2 = 6, 3 + 2 = 5 and 2 + 2 = 4 masks' worth, 36, 24,
    20 and 16 MiB; three TP-1 stages, 4 micro-batches: 4 + 3 = 7, 3 + 2 + 2 = 7, 2 + 1 + 2 = 5
    (28, 28, 20 MiB). A plan's memory adds them to its buffers (0.16.5: no mask; its received inputs, recv_memory)."""
    from sim.profiles.build import mask_memory, plan_memory

    mib, model = 2 ** 20, prof.model("OPT-350")
    deepest = max(runs.values(), key=lambda r: r.plan.pipeline_stages).plan
    assert (deepest.pipeline_stages, deepest.microbatches) == (4, 32)
    assert {x.tp for st in deepest.stages for x in st.replicas} == {4}
    assert [mask_memory(2048, j, 4, 32, 4, 1) / mib for j in range(4)] == [36, 24, 20, 16]
    assert [mask_memory(2048, j, 3, 4, 1, 1) / mib for j in range(3)] == [28, 28, 20]
    assert mask_memory(None, 1, 3, 4, 1, 1) == 0.0
    base = plan_memory(deepest, model, prof.gpus, pipe_buffers=1)
    masked = plan_memory(deepest, model, prof.gpus, pipe_buffers=1, mask_sequence=2048)
    assert [(b.buffers - a.buffers) / mib for a, b in zip(base, masked, strict=True)] == \
        [36] * 4 + [24] * 4 + [20] * 4 + [16] * 4
    plan = _ds((1, 1, 1), "0.3.13")  # 2 replicas, micro-batch 2, global batch 16: m = 4
    built = build_plan(plan, prof, steps=1, check_memory=False)
    plain = build_plan(replace(plan, framework=FrameworkSpec("deepspeed", "0.16.5")), prof,
                       steps=1, check_memory=False)
    held = plan_memory(plan, model, prof.gpus, pipe_buffers=1)
    assert [(g.buffers - h.buffers) / mib for g, h in zip(built.memory, held, strict=True)] \
        == [28, 28, 28, 28, 20, 20]
    assert [g.buffers for g in plain.memory] == \
        [g.buffers for g in plan_memory(plan, model, prof.gpus, recv_clones=True)]


def test_the_mask_needs_its_sequence(prof):
    """0.3.13's mask is sized by the framework option seq_length or the model profile's shape;
    with neither a plan with a pipeline hop is refused in one line, a one-stage plan runs
    (no hop); the two must agree; seq_length is a positive integer, an option 0.3.13 has
    (0.16.5 sends no mask and has no such option)."""
    from sim.profiles.build import plan_behaviour
    from sim.profiles.values import ModelShape

    bare = replace(_ds((2, 2), "0.3.13"), framework=FrameworkSpec("deepspeed", "0.3.13"))
    with pytest.raises(ConfigError, match=re.escape(
            "'seq_length' must be given for deepspeed 0.3.13, whose every pipeline hop carries "
            "a seq x seq attention mask (framework option seq_length=S, or a model profile "
            "with a shape): None")):
        build_plan(bare, prof, steps=1, check_memory=False)
    one = replace(_tp_plan((2,), "deepspeed"), framework=FrameworkSpec("deepspeed", "0.3.13"))
    assert build_plan(one, prof, steps=1, check_memory=False).behaviour.mask_bytes is None
    shaped = replace(prof.model("OPT-350"), shape=ModelShape(24, 1024, 16, 2048, 50272, tied=False))
    fb = plan_behaviour(bare, shaped)
    assert (fb.mask_bytes, fb.sequence) == (2 * 2048 ** 2, 2048)
    assert plan_behaviour(_ds((2, 2), "0.3.13"), shaped).mask_bytes == 2 * 2048 ** 2
    with pytest.raises(ConfigError, match=re.escape(
            "'seq_length' must be the model shape's sequence (2048): 1024")):
        resolve(FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 1024),)), 4,
                sequence=2048)
    with pytest.raises(ConfigError, match=re.escape("'seq_length' must be an integer >= 1")):
        resolve(FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 2048.5),)), 4)
    with pytest.raises(ConfigError, match=re.escape("'seq_length' must be a number > 0")):
        FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 0),))
    with pytest.raises(ConfigError, match=re.escape(
            "'framework_options' must be an option deepspeed has")):
        FrameworkSpec("deepspeed", options=(("seq_length", 2048),))
    assert resolve(FrameworkSpec("deepspeed"), 4, sequence=2048).mask_bytes == 0.0


def test_a_bucket_whose_count_cannot_fit_in_memory_is_refused(prof):
    """A bucket so small that an all-reduce's buckets cannot be held (the DES's rule for
    ``bucket_size``) is refused in one line naming what set it, before the ring law sums the
    buckets one by one: ``ddp:bucket_cap_mb=1e-300`` used to loop for ever (each bucket too
    small to lower the bytes left), in build_plan and in the planner's bounds alike."""
    from sim.planner.models import ProfilePlanModel

    tiny = FrameworkSpec("ddp", options=(("bucket_cap_mb", 1e-300),))
    plan = replace(_tp_plan((1,), "ddp"), framework=tiny)
    rule = re.escape("must be large enough for the buckets of an all-reduce to fit in memory (")
    with pytest.raises(ConfigError, match="'bucket_cap_mb' " + rule):
        build_plan(plan, prof, steps=1, check_memory=False)
    with pytest.raises(ConfigError, match="'bucket_cap_mb' " + rule):
        ProfilePlanModel(prof, prof.model("OPT-350"), framework=tiny)
    with pytest.raises(ConfigError, match="'bucket_size' " + rule):
        build_plan(_tp_plan((1,), "deepspeed"), prof, steps=1, check_memory=False,
                   sync="allreduce:bucket_size=1e-200")
    fine = replace(plan, framework=FrameworkSpec("ddp", options=(("bucket_cap_mb", 25),)))
    assert build_plan(fine, prof, steps=1, check_memory=False).config.sync.startswith(
        "allreduce:overlap=backward")


DS_MIRROR = "/work/.mirror/microsoft+DeepSpeed/repo"


def _framework_lines():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "framework_lines.py"
    spec = importlib.util.spec_from_file_location("dtsim_framework_lines", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # re-reads 42 tags of the framework's repository (about 20 s)
@pytest.mark.skipif(not __import__("os").path.isdir(DS_MIRROR),
                    reason="needs a microsoft/DeepSpeed clone with its release tags")
def test_deepspeed_tags_cite_the_line_each_fact_was_read_at():
    """Every line a DeepSpeed 0.9.0 .. 0.16.4 table cites holds, at that tag, the code its fact
    was read in (``_DS_ANCHORS``: the nth occurrence of it in the file), and code a release
    lacks (line 0) is absent from it: re-read from the repository, tag by tag
    (``tools/framework_lines.py``)."""
    from sim.profiles.frameworks import _DS_ANCHORS, _DS_LINES

    tool = _framework_lines()
    for version, lines in _DS_LINES.items():
        assert tool.lines("deepspeed", DS_MIRROR, version) == lines, version
        at = dict(zip((a[0] for a in _DS_ANCHORS), lines, strict=True))
        # the bf16 default is communication_data_type's own branch (0.9.2 on)
        assert at["cdt_bf16"] == 0 or 0 < at["cdt_bf16"] - at["cdt"] < 12, version


def test_a_deepspeed_release_gets_its_own_table():
    """``version = "0.14.4"`` (or any tag from 0.9.0 to 0.16.4) picks that release's table: each
    fact cites its own tag's line; 0.14.4's values are 0.16.5's, 0.12.2's too but without the
    pipe_partitioned key (added in 0.12.3) and with communication_data_type spelled ``bfp16``
    for bf16 (until 0.14.1); 0.9.1 all-reduces bf16 gradients in fp32."""
    from sim.profiles.formats import framework_from_text
    from sim.profiles.frameworks import DEEPSPEED, DEEPSPEED_TAGS

    assert list(DEEPSPEED_TAGS)[0] == "0.9.0" and list(DEEPSPEED_TAGS)[-1] == "0.16.4"
    assert len(DEEPSPEED_TAGS) == 42
    spec = framework_from_text("deepspeed:version=0.14.4")
    fw = spec.framework
    assert fw is RELEASES["deepspeed"]["0.14.4"] and fw.versions == ("0.14.4",)
    for name, fact in fw.facts().items():
        assert fact.value == DEEPSPEED.facts()[name].value, name
        assert fact.source.startswith("microsoft/DeepSpeed v0.14.4 (tag v0.14.4)"), name
    assert "runtime/pipe/engine.py:76 (enable_backward_allreduce" in fw.allreduce.source
    assert set(fw.options) == set(DEEPSPEED.options) and fw.precisions == DEEPSPEED.precisions
    old = RELEASES["deepspeed"]["0.12.2"]
    assert "pipe_partitioned" in old.lacks and "pipe_partitioned" in \
        RELEASES["deepspeed"]["0.12.3"].options
    fb = resolve(FrameworkSpec("deepspeed", "0.12.6", "bf16",
                               (("communication_data_type", "bfp16"),)), 4)
    assert fb.dp_bytes == 2 and "config.py:241-" in fb.sources["dp_bytes"]
    bf16 = {v: resolve(FrameworkSpec("deepspeed", v, "bf16"), 4)
            for v in ("0.9.0", "0.9.1", "0.9.2", "0.16.4")}
    assert {v: fb.dp_bytes for v, fb in bf16.items()} == {"0.9.0": 4, "0.9.1": 4, "0.9.2": 2,
                                                         "0.16.4": 2}
    assert all(fb.tied_bytes == 4 and fb.activation_bytes == 2 for fb in bf16.values())
    bad = [(dict(version="0.12.2", options=(("pipe_partitioned", False),)),
            "pipe_partitioned: DeepSpeed 0.12.2 always partitions with TP > 1 "
            "(runtime/pipe/engine.py:135;"),
           (dict(version="0.14.0", options=(("communication_data_type", "bf16"),)),
            "'communication_data_type' must be one of fp32, fp16, bfp16: 'bf16'"),
           (dict(version="0.14.1", options=(("communication_data_type", "bfp16"),)),
            "'communication_data_type' must be one of fp32, fp16, bf16: 'bfp16'"),
           (dict(version="0.9.3", options=(("fp32_allreduce", True),)),
            "fp32_allreduce: DeepSpeed 0.9.3's runtime/config.py reads no such key"),
           (dict(version="v0.14.4"), "'framework_version' must be a version of deepspeed the "
            "table was read at (0.16.5, 0.3.13, each tagged release 0.9.0 to 0.16.4)"),
           (dict(version="0.14"), "'framework_version' must be a version of deepspeed"),
           (dict(version="0.8.3"), "'framework_version' must be a version of deepspeed"),
           (dict(version="0.16.6"), "'framework_version' must be a version of deepspeed")]
    for kw, msg in bad:
        with pytest.raises(ConfigError, match=re.escape(msg)):
            FrameworkSpec("deepspeed", **kw)


def test_a_release_before_092_all_reduces_bf16_gradients_in_fp32(prof, runs):
    """DeepSpeed 0.9.1's communication_data_type has no bf16 default (runtime/engine.py:773 at
    v0.9.1): a bf16 plan all-reduces its bf16 optimizer's fp32 gradients as they are, 4 bytes a
    value where 0.9.2 on (and 0.16.5) cast them to bf16, 2. On a shipped plan (OPT-350, two
    stages of two TP-4 replicas): each stage's all-reduce is twice 0.16.5's bytes, one collective
    of the flat buffer (BF16_Optimizer's), and its time the ring's over those bytes; every pipeline transfer is
    0.16.5's. 0.14.4 gives 0.16.5's plan exactly."""
    from sim.profiles.build import plan_allreduce_time

    plan = runs["clariden-OPT-350-N4_D2"].plan
    built = {v: build_plan(replace(plan, framework=FrameworkSpec("deepspeed", v, "bf16")), prof,
                           steps=1, check_memory=False) for v in ("0.16.5", "0.14.4", "0.9.1")}
    net = {v: build_plan(replace(plan, framework=FrameworkSpec("deepspeed", v, "bf16")), prof,
                         steps=1, check_memory=False, network=True).config
           for v in ("0.16.5", "0.9.1")}
    assert net["0.9.1"].allreduce_sizes == tuple(2 * x for x in net["0.16.5"].allreduce_sizes)
    # BF16_Optimizer's fp32 flat buffer is one tensor, all-reduced whole (no 5e8-value buckets)
    assert net["0.9.1"].bucket_size == net["0.16.5"].bucket_size == math.inf
    for j, st in enumerate(plan.stages):
        ring = [(x, (j, i)) for i, x in enumerate(st.replicas)]
        want = plan_allreduce_time(prof.network, ring, [x.tp for x in st.replicas],
                                   net["0.9.1"].allreduce_sizes[j], math.inf, prof)
        assert built["0.9.1"].allreduce_times[j] == pytest.approx(want, rel=1e-12)
        assert built["0.9.1"].allreduce_times[j] > built["0.16.5"].allreduce_times[j]
    assert built["0.9.1"].transfer_times == built["0.16.5"].transfer_times
    assert built["0.14.4"].transfer_times == built["0.16.5"].transfer_times
    assert built["0.14.4"].allreduce_times == built["0.16.5"].allreduce_times


MEG_MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"


@pytest.mark.slow  # re-reads 22 tags of the framework's repository
@pytest.mark.skipif(not __import__("os").path.isdir(MEG_MIRROR),
                    reason="needs an NVIDIA/Megatron-LM clone with its core_v tags")
def test_megatron_tags_cite_the_line_each_fact_was_read_at():
    """Every line a Megatron-LM core 0.8.0 .. 0.19.0 table cites holds, at tag core_vX, the code
    its fact was read in (``_MEG_ANCHORS``: its first occurrence after the place it follows),
    code a release lacks (line 0) is absent, and the tag's package_info is that version."""
    import subprocess

    from sim.profiles.frameworks import _MEG_ANCHORS, _MEG_LINES

    tool = _framework_lines()
    for version, lines in _MEG_LINES.items():
        info = subprocess.run(["git", "-C", MEG_MIRROR, "show",
                               f"core_v{version}:megatron/core/package_info.py"],
                              capture_output=True, text=True, check=True).stdout
        major, minor, patch = version.split(".")
        # core_v0.19.0's package_info already says 0.19.1 (5be9626, the bump, is in the tag;
        # the wheel takes its version from the git tag since 2f5c62c, #4212)
        patch = "1" if version == "0.19.0" else patch
        assert re.search(rf"^MAJOR = {major}\nMINOR = {minor}\nPATCH = {patch}$", info,
                         re.M), version
        assert tool.lines("megatron", MEG_MIRROR, version) == lines, version
        at = dict(zip((a[0] for a in _MEG_ANCHORS), lines, strict=True))
        # the DP all-reduce before the word embedding's (tied_first False), batch_p2p_comm
        # set in one of the two places
        assert at["finish"] < (at["emb"] or at["emb_old"]), version
        assert bool(at["arg_batch"]) != bool(at["arg_batch_u"]), version


def test_a_megatron_release_gets_its_own_table(prof):
    """``megatron:version=0.13.1`` (or 0.9.0, any Megatron Core release tag from 0.8.0 to 0.19.0)
    picks that release's table, every fact citing its tag's line, its values 0.20.0's (read tag
    by tag) but one: before 0.11.0 the pipeline's join is the optimizer step's norm all-reduce
    (no logical_and or norm maximum after it yet: two one-value all-reduces fewer), so a plan
    whose links have no latency is 0.20.0's in every time but those all-reduces'."""
    from sim.profiles.formats import framework_from_text
    from sim.profiles.frameworks import MEGATRON, MEGATRON_TAGS

    assert list(MEGATRON_TAGS) == ["0.8.0", "0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.12.1",
                                   "0.12.2", "0.12.3", "0.13.0", "0.13.1", "0.14.0", "0.15.0",
                                   "0.15.1", "0.15.2", "0.15.3", "0.16.0", "0.16.1", "0.17.0",
                                   "0.17.1", "0.18.0", "0.18.2", "0.19.0"]
    old = ("0.8.0", "0.9.0", "0.10.0")  # train_step reduces no update flag or norm after
    for v, fw in MEGATRON_TAGS.items():
        assert RELEASES["megatron"][v] is fw
        for name, fact in fw.facts().items():
            if name == "optimizer_allreduces" and v in old:
                assert fact.value == {p: n - 2 for p, n in MEGATRON.facts()[name].value.items()}
                continue
            assert fact.value == MEGATRON.facts()[name].value, (v, name)
            assert fact.source.startswith(f"NVIDIA/Megatron-LM core_v{v} (tag core_v{v})")
        # attention_backend came with core 0.11.0 (transformer_config.py:51 there): before it
        # the release lacks the option, and Transformer Engine picks its backend itself;
        # core_v0.8.0's distributed optimizer all-gathers from zero_grad: not read, not offered
        old_attn = v in ("0.8.0", "0.9.0", "0.10.0")
        lacks = {"use_distributed_optimizer", "overlap_param_gather"} if v == "0.8.0" else set()
        assert set(fw.options) | ({"attention_backend"} if old_attn else set()) == \
            set(MEGATRON.options) - lacks and fw.precisions == MEGATRON.precisions
        assert ("attention_backend" in fw.lacks) == old_attn
    assert "logical_and" not in MEGATRON_TAGS["0.10.0"].step_join.source
    assert "training/training.py:1422 (optimizer.step()), then 1427 (logical_and" in \
        MEGATRON_TAGS["0.13.1"].step_join.source
    spec = framework_from_text("megatron:version=0.13.1,overlap_grad_reduce=true")
    assert spec.framework is MEGATRON_TAGS["0.13.1"]
    assert resolve(spec, 4, dp=2).sync == resolve(FrameworkSpec(
        "megatron", options=(("overlap_grad_reduce", True),)), 4, dp=2).sync
    base = _tp_plan((2, 2), "megatron")
    old = replace(base, framework=FrameworkSpec("megatron", "0.9.0"))
    a = build_plan(base, prof, steps=1, check_memory=False)
    b = build_plan(old, prof, steps=1, check_memory=False)
    assert b.behaviour.framework.versions == ("0.9.0",)
    assert (a.transfer_times, a.allreduce_times) == (b.transfer_times, b.allreduce_times)
    for bad in ("core_v0.9.0", "0.7.0", "0.13", "0.14.0rc1", "0.20.1"):
        with pytest.raises(ConfigError, match=re.escape(
                "'framework_version' must be a version of megatron the table was read at "
                "(0.20.0, each tagged release 0.8.0 to 0.19.0)")):
            FrameworkSpec("megatron", bad)


def test_deepspeed_0313_program_gathers_before_the_gradient_receive():
    """DeepSpeed 0.3.13 (tag v0.3.13) all-gathers a stage's partitioned output in
    _exec_recv_grads (runtime/pipe/engine.py:908-918) before the blocking receive of its
    gradient (920-939), and its TrainSchedule issues RecvGrad after the step's SendActivation
    (schedule.py:214-219): worked out from schedule.py:189-237 for 2 stages and 3 micro-batches,
    stage 0 runs F0, send a0 (step 1), F1 (2), send a1, G0, recv g0, B0 (3), F2 (4), send a2,
    G1, recv g1, B1 (5), G2, recv g2, B2 (7); stage 1 recv a0, F0 (1), B0 (2), recv a1,
    send g0, F1 (3), B1 (4), recv a2, send g1, F2 (5), B2 (6), send g2 (7). The DES and the
    closed form run it (and the compiled evaluation equals the plain one)."""
    from sim.analytic.training import program_makespan
    from sim.training.schedules import deepspeed_program, device_program

    s0 = [("F", 0, 0), ("send", "a", 0, 0), ("F", 0, 1), ("send", "a", 0, 1), ("G", 0, 0),
          ("recv", "g", 0, 0), ("B", 0, 0), ("F", 0, 2), ("send", "a", 0, 2), ("G", 0, 1),
          ("recv", "g", 0, 1), ("B", 0, 1), ("G", 0, 2), ("recv", "g", 0, 2), ("B", 0, 2)]
    s1 = [("recv", "a", 0, 0), ("F", 0, 0), ("B", 0, 0), ("recv", "a", 0, 1),
          ("send", "g", 0, 0), ("F", 0, 1), ("B", 0, 1), ("recv", "a", 0, 2),
          ("send", "g", 0, 1), ("F", 0, 2), ("B", 0, 2), ("send", "g", 0, 2)]
    assert [deepspeed_program(2, 3, j, order="0.3.13", recv_gather=True) for j in (0, 1)] == \
        [s0, s1]
    assert device_program("1f1b", 2, 3, 0, blocking=True, recv_gather=True) == s0
    with pytest.raises(ValueError):
        device_program("gpipe", 2, 3, 0, blocking=True, recv_gather=True)
    # the compiled trace (at least 200 commands) and the plain one agree exactly
    progs = [device_program("1f1b", 3, 40, j, blocking=True, recv_gather=True) for j in range(3)]
    args = ([1.0, 1.5, 1.25], [2.0, 2.5, 3.0], [0.5, 0.25], [0.75, 0.5])
    fast = program_makespan(progs, *args, blocking=True, gather=[0.3, 0.7, 0.0])
    assert fast == program_makespan(progs, *args, blocking=True, gather=[0.3, 0.7, 0.0],
                                    finish={})
    assert fast > program_makespan([deepspeed_program(3, 40, j) for j in range(3)],
                                   args[0], [2.3, 3.2, 3.0], *args[2:], blocking=True)


def test_deepspeed_0313_gather_before_the_receive_hand_worked():
    """2 stages, 3 micro-batches, stage 0's passes 1 and 1 (forward, backward), stage 1's 1
    and 2, each hop's activation and gradient 0.5, stage 0's all-gather before each receive 1.
    Hand-worked in DeepSpeed 0.3.13's program (above): F0 [0, 1], a0 [1, 1.5]; stage 0 F1
    [1.5, 2.5], stage 1 F0 B0 [1.5, 4.5]; a1 [4.5, 5]; G0 [5, 6] while stage 1 waits in its
    send; g0 [6, 6.5]; stage 0 B0 F2 [6.5, 8.5], stage 1 F1 B1 [6.5, 9.5]; a2 [9.5, 10];
    G1 [10, 11]; g1 [11, 11.5]; stage 0 B1 G2 [11.5, 13.5], stage 1 F2 B2 [11.5, 14.5];
    g2 [14.5, 15]; B2 [15, 16]: 16. With the all-gather inside the backward pass (stage 0's
    backward 2) in the 0.16.5 order, as dtsim had it: 15 (g0 [4.5, 5], a1 [5, 5.5], B0
    [5.5, 7.5], F2 [7.5, 8.5], g1 [8.5, 9], a2 [9, 9.5], B1 [9.5, 11.5], stage 1 F2 B2
    [9.5, 12.5], g2 [12.5, 13], B2 [13, 15]). The DES and the closed form give 16 exactly."""
    from sim.analytic.training import program_makespan
    from sim.engines import predictions
    from sim.rng import Streams
    from sim.training import TrainingConfig, training_model
    from sim.training.schedules import deepspeed_program

    c = TrainingConfig(stages=2, replicas=1, microbatches=3, steps=1, schedule="1f1b",
                       p2p="blocking", replica_times=(((1.0, 1.0),), ((1.0, 2.0),)),
                       transfer_times=(((0.5, 0.5),),), recv_gather_times=((1.0,), (0.0,)),
                       sync="none")
    assert predictions("training", c)["step_time_mean"]["value"] == 16.0
    assert training_model(c, Streams(0).replication(0))["step_time_mean"] == 16.0
    old = [deepspeed_program(2, 3, j) for j in (0, 1)]
    assert program_makespan(old, [1.0, 1.0], [2.0, 2.0], [0.5], [0.5], blocking=True) == 15.0
    with pytest.raises(ConfigError, match="'recv_gather_times' must be 0 at the last stage"):
        replace(c, recv_gather_times=((1.0,), (0.5,)))
    with pytest.raises(ConfigError, match="'recv_gather_times' must be given only with"):
        replace(c, p2p="overlap")


def test_deepspeed_0313_plan_gathers_before_the_gradient_receive(prof):
    """A 0.3.13 plan of two TP-2 stages (OPT-350 on A100-40s, micro-batch 2, 3 micro-batches):
    its pipeline phase is the hand-written max-plus recursion of 0.3.13's program over the
    build's pieces (the passes, stage 0's all-gather G = its backward all-gather, the hop's
    activation a and gradient g), the DES over the plan's network equals the closed form, and
    the phase is longer than with G inside the backward pass in 0.16.5's order (dtsim before
    issue 35's fix), by one G at this point: stage 1 waits in its gradient send for G at
    micro-batches 0 and 1."""
    from sim.analytic.training import program_makespan
    from sim.profiles import Plan, ReplicaSpec, StageSpec
    from sim.profiles.build import explain_rows
    from sim.training.schedules import deepspeed_program

    fw = FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 2048),))
    plan = Plan(tuple(StageSpec(layers, (ReplicaSpec("A100-40", 2, gpus_per_node=2,
                                                     zone="us-central1-a"),))
                      for layers in (tuple(range(13)), tuple(range(13, 26)))), 2, 6,
                model="OPT-350", framework=fw)
    b, closed = _closed_form_equals_des(plan, prof)
    (f0, bg0, _), (f1, b1, _) = b.stage_times[0][0], b.stage_times[1][0]
    G = b.gather_times[0][0][1]
    assert G > 0 and b.gather_times[1][0][1] == 0.0
    b0 = bg0 - G  # the backward pass alone
    a, g = b.transfer_times[0][0]
    t = f0 + a                                  # F0, a0
    s0, s1 = t + f0, t + f1 + b1                # stage 0 F1; stage 1 F0 B0
    t = max(s0, s1) + a                         # a1
    t = max(t + G, t) + g                       # G0 while stage 1 waits in send g0; g0
    s0, s1 = t + b0 + f0, t + f1 + b1           # B0 F2; F1 B1
    t = max(s0, s1) + a                         # a2
    t = max(t + G, t) + g                       # G1; g1
    s0, s1 = t + b0 + G, t + f1 + b1            # B1 G2; F2 B2
    want = max(s0, s1) + g + b0                 # g2, B2
    e = explain_rows(b)
    assert e["pipeline_time"] == pytest.approx(want, rel=1e-12)
    old = program_makespan([deepspeed_program(2, 3, j) for j in (0, 1)], [f0, f1], [bg0, b1],
                           [a], [g], blocking=True)
    assert e["pipeline_time"] == pytest.approx(old + G, rel=1e-9)  # by one G at this point
    assert e["stages"][0]["backward"] == pytest.approx(bg0, rel=1e-12)  # with its all-gather
    # on physical nodes (each replica a host of its own: a stage's activation and gradient
    # leave one NIC), the lockstep check reads the same programs: the DES over the hosts'
    # network equals the closed form
    from sim.profiles.build import crossing_kinds

    hosted = replace(_ds((2, 2, 2), "0.3.13"), stages=tuple(
        StageSpec(st.layers, tuple(replace(x, host=f"s{j}r{i}") for i, x in enumerate(st.replicas)))
        for j, st in enumerate(_ds((2, 2, 2), "0.3.13").stages)))
    assert crossing_kinds(hosted)
    assert _closed_form_equals_des(hosted, prof)[0].config.recv_gather_times is not None


def test_real_runs_allreduce_variants_run_the_0313_all_gather(prof):
    """tools/real_runs.py's all-reduce placements evaluate a build's own device programs: on a
    0.3.13 plan with TP > 1 (two TP-2 stages of two pipelines on A100-40s) they hold the
    all-gather before each gradient receive, so the per-stage placement (0.3.13's own: no
    barrier, the tied all-reduce first, fp32 without an optimizer barrier) is the engines'
    closed form exactly. (It built the programs without it, as if the gather were not there:
    3 G shorter here, 4 micro-batches a pipeline, G 9.2e-5 s.)"""
    import importlib.util
    from pathlib import Path

    from sim.engines import predictions

    path = Path(__file__).resolve().parents[1] / "tools" / "real_runs.py"
    spec = importlib.util.spec_from_file_location("dtsim_real_runs_0313", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    b = build_plan(_ds((2, 2), "0.3.13"), prof, steps=1, check_memory=False)
    c = b.config
    assert c.recv_gather_times is not None and c.recv_gather_times[0][0] > 0
    assert not c.allreduce_barrier and c.tied_first and not c.optimizer_barrier
    closed = predictions("training", c)["step_time_mean"]["value"]
    assert mod.allreduce_variants(b)["stage"] == pytest.approx(closed, rel=1e-12)
