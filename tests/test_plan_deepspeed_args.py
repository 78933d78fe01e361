"""Megatron-LM v1.1.5 on DeepSpeed 0.3.13 as a plan (sim.profiles.deepspeed_args): the launch
line of DeepSpeedExamples' Megatron-LM-v1.1.5-3D_parallelism, its ds_config and hostfile read as
data, never run."""

from __future__ import annotations

import json
import re

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.profiles import load_profiles
from sim.profiles.deepspeed_args import deepspeed_plan_from_text, partition_balanced
from sim.profiles.megatron_args import is_megatron_launch

ZONE = "us-central1-a"

#: As the example's examples/ds_pretrain_gpt2_pipe.sh writes it (variables, continuations, an
#: option dtsim ignores set by $1), for the shipped OPT-350 shape (24 layers, 1024 x 2048).
SCRIPT = r"""#! /bin/bash
GPUS_PER_NODE=4
NNODES=4
DATA_PATH=$1
config_json="ds_config.json"
gpt_options=" \
        --model-parallel-size 2 \
        --pipe-parallel-size 4 \
        --num-layers 24 \
        --hidden-size 1024 \
        --num-attention-heads 16 \
        --seq-length 2048 \
        --max-position-embeddings 2048 \
        --batch-size 2 \
        --gas 8 \
        --train-iters 320000 \
        --lr 1.5e-4 \
        --fp16 \
        --fp32-allreduce
"
deepspeed_options=" \
                --deepspeed \
                --deepspeed_config ${config_json} \
            "
deepspeed --num_nodes ${NNODES} --num_gpus ${GPUS_PER_NODE} --master_port 9005 \
    pretrain_gpt2.py ${gpt_options} ${deepspeed_options} --data-path "$DATA_PATH"
"""
CONFIG = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8,
          "train_batch_size": 32, "gradient_clipping": 1.0, "steps_per_print": 10,
          "fp16": {"enabled": True, "loss_scale": 0, "loss_scale_window": 1000},
          "fp32_allreduce": True, "wall_clock_breakdown": True}
HOSTS = "worker-0 slots=4\nworker-1 slots=4\n\nworker-2 slots=4\nworker-3 slots=4\nworker-4 slots=8\n"

#: The same plan by hand. World 16 (the first 4 hosts, 4 GPUs each), PP 4, TP 2: DP 2; ranks
#: pipe, data, model: stage p is ranks 4p..4p+3, one host. type:transformer over 30 layer specs
#: (embedding, transpose, 24 transformer layers, transpose, LayerNorm, head, fp16_to_fp32):
#: boundaries 0, 8, 14, 20, 30, 6 transformer layers a stage; the tied OPT-350 profile's layer 0
#: the embedding, 1-24 the transformer layers, 25 the head. Batch 2 x 8 x DP 2 = 32.
HAND = """model = "OPT-350"
microbatch_size = 2
global_batch_size = 32
[framework]
name = "deepspeed"
version = "0.3.13"
precision = "fp16"
fp32_allreduce = true
seq_length = 2048
""" + "".join(f"""[[stages]]
first_layer = {a}
last_layer = {b}
replicas = [{{gpu = "RTX-3090", tp = 2, gpus_per_node = 4, zone = "{ZONE}", host = "worker-{p}", count = 2}}]
""" for p, (a, b) in enumerate([(0, 6), (7, 12), (13, 18), (19, 25)]))


def _write(folder, script=SCRIPT, config=CONFIG, hosts=HOSTS, name="launch.sh"):
    if config is not None:
        (folder / "ds_config.json").write_text(config if isinstance(config, str)
                                               else json.dumps(config))
    if hosts is not None:
        (folder / "hostfile").write_text(hosts)
    p = folder / name
    p.write_text(script)
    return p


@pytest.fixture(scope="module")
def tied(tie):
    return tie(load_profiles(models=("OPT-350",)), "OPT-350").model("OPT-350")


def test_the_launch_is_the_plan_deepspeed_runs(tmp_path, tied):
    """Stages, layers per stage, replicas on the hostfile's hosts in DeepSpeed's rank order,
    TP, micro-batch, global batch, precision and the 0.3.13 framework."""
    launch = _write(tmp_path)
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090", ZONE)
    assert [(st.layers[0], st.layers[-1]) for st in plan.stages] == [
        (0, 6), (7, 12), (13, 18), (19, 25)]
    assert [len(st.layers) for st in plan.stages] == [1 + 6, 6, 6, 6 + 1]
    assert [[r.host for r in st.replicas] for st in plan.stages] == [
        ["worker-0"] * 2, ["worker-1"] * 2, ["worker-2"] * 2, ["worker-3"] * 2]
    assert {(r.gpu, r.tp, r.gpus_per_node, r.zone) for st in plan.stages for r in st.replicas} \
        == {("RTX-3090", 2, 4, ZONE)}
    assert (plan.microbatch_size, plan.global_batch_size, plan.model) == (2, 32, "OPT-350")
    fw = plan.framework
    assert (fw.name, fw.version, fw.precision) == ("deepspeed", "0.3.13", "fp16")
    assert dict(fw.options) == {"fp32_allreduce": True, "seq_length": 2048}


def test_rank_order_pipe_data_model_and_uneven_hosts(tmp_path, tied):
    """TP 1, PP 2, DP 4 over hosts of 2, 4 and 2 GPUs: stage 0 is ranks 0-3 (a, a, b, b),
    stage 1 ranks 4-7 (b, b, c, c); each replica's gpus_per_node is its host's. fp32, no
    fp32_allreduce; the batch worked out from micro x gas (config.py:706-710)."""
    script = ("deepspeed -H hosts.txt pretrain_gpt2.py --pipe-parallel-size 2 --num-layers 24 "
              "--seq-length 2048 --hidden-size 1024 --batch-size 1 --deepspeed "
              "--deepspeed_config=ds_config.json\n")
    (tmp_path / "hosts.txt").write_text("a slots=2\nb slots=4\nc slots=2\n")
    launch = _write(tmp_path, script, {"train_micro_batch_size_per_gpu": 1,
                                       "gradient_accumulation_steps": 4}, hosts=None)
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090")
    assert [[(r.host, r.gpus_per_node) for r in st.replicas] for st in plan.stages] == [
        [("a", 2), ("a", 2), ("b", 4), ("b", 4)], [("b", 4), ("b", 4), ("c", 2), ("c", 2)]]
    assert [len(st.layers) for st in plan.stages] == [13, 13]
    assert (plan.microbatch_size, plan.global_batch_size) == (1, 16)
    assert plan.framework.precision == "fp32"
    assert dict(plan.framework.options) == {"seq_length": 2048}


def test_include_exclude_and_no_hostfile(tmp_path, tied):
    """--include picks hosts and slots of the hostfile; without a hostfile --num_gpus on
    localhost."""
    base = ("pretrain_gpt2.py --model-parallel-size 2 --pipe-parallel-size 2 --num-layers 24 "
            "--seq-length 2048 --hidden-size 1024 --batch-size 2 --deepspeed "
            "--deepspeed_config ds_config.json\n")
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}
    launch = _write(tmp_path, "deepspeed --include 'worker-1@worker-4:0,1,2,3' " + base, cfg)
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090")
    assert [[r.host for r in st.replicas] for st in plan.stages] == [["worker-1"] * 2,
                                                                     ["worker-4"] * 2]
    assert plan.global_batch_size == 8  # world 4 + 4, DP 2
    launch = _write(tmp_path, "deepspeed --exclude worker-0@worker-1@worker-2@worker-3 " + base,
                    cfg)
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090")
    assert [[(r.host, r.gpus_per_node) for r in st.replicas] for st in plan.stages] == [
        [("worker-4", 8)] * 2, [("worker-4", 8)] * 2]
    local = tmp_path / "local"
    local.mkdir()
    launch = _write(local, "deepspeed --num_gpus 4 " + base, cfg, hosts=None)
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090")
    assert [[r.host for r in st.replicas] for st in plan.stages] == [["localhost"]] * 2


def test_partition_balanced_is_deepspeeds(tied):
    """type:transformer boundaries, checked by hand against runtime/utils.py:378-395."""
    w = [0, 0] + [1] * 24 + [0, 0, 0, 0]
    assert partition_balanced(w, 4) == [0, 8, 14, 20, 30]
    assert partition_balanced(w, 5) == [0, 7, 12, 17, 22, 30]  # 5, 5, 5, 5, 4
    assert partition_balanced([0, 1, 1], 4) == [0, 1, 2, 3, 3]  # fewer items than stages


def test_detection(tmp_path):
    """A v1.1.5 + DeepSpeed launch is a launch plan; a modern Megatron-LM one stays the other
    reader's."""
    assert is_megatron_launch("x.sh", "deepspeed train.py --deepspeed")
    assert is_megatron_launch("x.sh", "python x.py --pipe-parallel-size 2")
    assert not is_megatron_launch("x.json", "deepspeed train.py --pipe-parallel-size 2")
    assert not is_megatron_launch("x.sh", "echo hello")


def _cli(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_equals_the_hand_written_plan_bit_for_bit(tmp_path, capsys, tied_profiles_folder):
    launch = _write(tmp_path)
    hand = tmp_path / "hand.toml"
    hand.write_text(HAND)
    common = ["--steps", "1", "--replications", "1", "--json", "--profiles",
              str(tied_profiles_folder)]
    code, a, err = _cli(["train", "--plan", str(launch), "--gpu", "RTX-3090", "--zone", ZONE,
                         "--model", "OPT-350", *common], capsys)
    assert code == 0, err
    code, b, err = _cli(["train", "--plan", str(hand), *common], capsys)
    assert code == 0, err
    assert a == b and '"step_time_mean"' in a


def _bad(text="", cfg=CONFIG, hosts=HOSTS):
    """A refused case: the script, the ds_config (None: no file) and the hostfile (None: none)."""
    return (text or SCRIPT), cfg, hosts


@pytest.mark.parametrize("case, message", [
    (_bad(cfg=None), "'plan' must be a readable ds_config"),
    (_bad(cfg="{"), "'plan' must be a ds_config in JSON"),
    (_bad(cfg={**CONFIG, "train_batch_size": 30}),
     r"train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
     r"data-parallel size \(2 x 8 x 2.*: 30"),
    (_bad(SCRIPT.replace("--batch-size 2", "--batch-size 4")), "--batch-size equal to the ds_"),
    (_bad(SCRIPT.replace("NNODES=4", "NNODES=$2")), r"--num_nodes.*\$2"),
    (_bad(SCRIPT.replace("--model-parallel-size 2", "").replace(
        "pretrain_gpt2.py", "pretrain_gpt2.py --model-parallel-size $1")),
     r"a value dtsim can read for --model-parallel-size .*: '\$1'"),
    (_bad(SCRIPT.replace("--model-parallel-size 2", "--model-parallel-size $1")),
     r"a word dtsim does not evaluate cannot stand for options: '\$1'"),
    (_bad(hosts="a slots=4\n"), "divisible by PP x TP"),
    (_bad(SCRIPT.replace("--num_nodes ${NNODES} --num_gpus ${GPUS_PER_NODE}", ""), hosts=None),
     "a world size the launch says: without a hostfile"),
    (_bad(hosts=None), "--num_nodes at most 1 without a hostfile"),
    (_bad(SCRIPT.replace("--num_nodes", "-H nodes.txt --num_nodes")),
     "the hostfile --hostfile names \\(nodes.txt\\)"),
    (_bad(SCRIPT.replace("--fp16 ", "--checkpoint-activations --fp16 ")),
     "--checkpoint-activations sets activation checkpointing"),
    (_bad(SCRIPT.replace("--fp16 ", "")), "--fp16 given as the ds_config's fp16.enabled"),
    (_bad(SCRIPT.replace("--pipe-parallel-size 4", "--pipe-parallel-size 0")),
     "--pipe-parallel-size >= 1"),
    (_bad(SCRIPT.replace("--deepspeed_config ${config_json}", "")), "one ds_config"),
    (_bad(cfg={**CONFIG, "zero_optimization": {"stage": 1}}), "ZeRO"),
    (_bad(cfg={**CONFIG, "zero_optimization": {"stage": 4}}), "zero_optimization.stage at most 3"),
    (_bad(cfg={**CONFIG, "zero_optimization": {"stage": None}}), "zero_optimization.stage a number"),
    (_bad(cfg={**CONFIG, "zero_optimization": {"stage": "0"}}), "zero_optimization.stage a number"),
    (_bad(cfg={**CONFIG, "zero_optimization": None}), "zero_optimization a table"),
    (_bad(cfg={**CONFIG, "pipeline": None}), "pipeline a table"),
    (_bad(SCRIPT.replace("--batch-size", "--batch_size")), "spelled as Megatron-LM v1.1.5"),
    (_bad(SCRIPT.replace("--num_nodes", "--nodes")), "an option of DeepSpeed 0.3.13's launcher"),
    (_bad(SCRIPT.replace("--model-parallel-size", "--tensor-model-parallel-size")),
     "--tensor-model-parallel-size is a later Megatron-LM's; v1.1.5 has --model-parallel-size"),
    (_bad(hosts="a slots=4\na slots=4\n"), "a hostfile without duplicate hosts"),
    (_bad(hosts="a slots=4\n# b slots=4\n"), "a hostfile line 'NAME slots=N'"),
    (_bad(SCRIPT.replace("pretrain_gpt2.py", "pretrain_bert.py")),
     r"a launch of pretrain_gpt2.py .*BertModel.*: 'pretrain_bert.py'"),
])
def test_refusals_are_one_line_exit_2(tmp_path, capsys, tied_profiles_folder, case, message):
    script, cfg, hosts = case
    launch = _write(tmp_path, script, cfg, hosts)
    code, out, err = _cli(["train", "--plan", str(launch), "--model", "OPT-350", "--gpu",
                           "RTX-3090", "--steps", "1", "--json", "--profiles",
                           str(tied_profiles_folder)], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]


def test_the_profile_must_tie_as_gpt2modelpipe_does(tmp_path):
    untied = load_profiles(models=("OPT-350",)).model("OPT-350")
    launch = _write(tmp_path)
    with pytest.raises(ConfigError, match="ties its embedding and output weights, as "
                       "GPT2ModelPipe does"):
        deepspeed_plan_from_text(launch.read_text(), str(launch), untied, "RTX-3090")


def test_eval_of_a_run_cmd_string(tmp_path, tied, capsys):
    """The example's scripts build ``run_cmd="deepspeed ... pretrain_gpt2.py ${full_options}"``
    and ``eval ${run_cmd}``: read as the command eval would run; a word in it dtsim does not
    evaluate (``mp_size=$1``) is refused naming it."""
    direct = _write(tmp_path, SCRIPT)
    want = deepspeed_plan_from_text(direct.read_text(), str(direct), tied, "RTX-3090", ZONE)
    head, _, tail = SCRIPT.partition("deepspeed --num_nodes")
    cmd = "deepspeed --num_nodes" + tail.replace("\\\n", "").replace('"$DATA_PATH"', "x")
    text = head + f'run_cmd="{cmd.strip()}"\necho ${{run_cmd}}\neval ${{run_cmd}}\n'
    launch = _write(tmp_path, text, name="eval.sh")
    assert deepspeed_plan_from_text(text, str(launch), tied, "RTX-3090", ZONE) == want
    launch.write_text(text.replace("--model-parallel-size 2", "--model-parallel-size $1"))
    with pytest.raises(ConfigError, match=r"its eval runs a word dtsim does not evaluate: '\$1'"):
        deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090", ZONE)


@pytest.mark.parametrize("zero", [{"stage": 0}, {"stage": -1}, {"stage": -0.5}, {"stage": False},
                                  {}, False])
def test_a_zero_stage_at_most_0_runs_without_zero(tmp_path, tied, zero):
    """DeepSpeed 0.3.13 turns ZeRO on for ``stage > 0`` only (runtime/config.py:612-614; the
    stage read as given, config_utils.py:23-24): -1, -0.5 or false run as stage 0, the plan
    of the ds_config without the key."""
    want = deepspeed_plan_from_text(_write(tmp_path).read_text(), str(tmp_path / "launch.sh"),
                                    tied, "RTX-3090", ZONE)
    launch = _write(tmp_path, config={**CONFIG, "zero_optimization": zero})
    assert deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090",
                                    ZONE) == want
