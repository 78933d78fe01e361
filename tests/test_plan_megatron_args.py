"""A Megatron-LM launch line as a plan (sim.profiles.megatron_args): read, never run."""

from __future__ import annotations

import re

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.profiles import load_profiles, read_plan
from sim.profiles.formats import DATA_DIR
from sim.profiles.megatron_args import (
    is_megatron_launch,
    megatron_plan_from_text,
    parse_launch,
)

ZONE = "us-central1-a"

#: A launch script as Megatron-LM's examples write them: variables, an array, continuations,
#: comments, a positional parameter and a command substitution in values dtsim ignores. The
#: shipped OPT-350 is untied (its head has a weight of its own, as the Sailor artifact's
#: OPTModelPipe builds it), so the launch unties too (Megatron-LM's GPT ties by default).
SCRIPT = r"""#!/bin/bash
# OPT-350M on 2 nodes of 4 GPUs
set -euo pipefail
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
NNODES=2
DATA_PATH=$1            # the caller's: a value dtsim ignores
DISTRIBUTED_ARGS=(
    --nnodes $NNODES
    --nproc_per_node $GPUS_PER_NODE   # torchrun's other spelling
    --master-addr localhost --master-port 6000
)
GPT_ARGS="--num-layers 24 --hidden-size 1024 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048"
mkdir -p logs
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    $GPT_ARGS \
    --untie-embeddings-and-output-weights \
    --micro-batch-size 2 --global-batch-size 16 \
    --lr 0.00015 --train-iters 500000 --clip-grad 1.0 \
    --data-path "$DATA_PATH" --save "ckpt-$(date +%s)" \
    --fp16 --overlap-grad-reduce --accumulate-allreduce-grads-in-fp32
"""

#: The same plan written by hand in dtsim's format.
HAND = f"""model = "OPT-350"
microbatch_size = 2
global_batch_size = 16
[framework]
name = "megatron"
version = "0.20.0"
precision = "fp16"
overlap_grad_reduce = true
accumulate_allreduce_grads_in_fp32 = true
[[stages]]
first_layer = 0
last_layer = 12
replicas = [{{gpu = "RTX-3090", tp = 2, gpus_per_node = 4, zone = "{ZONE}", host = "n0", count = 2}}]
[[stages]]
first_layer = 13
last_layer = 25
replicas = [{{gpu = "RTX-3090", tp = 2, gpus_per_node = 4, zone = "{ZONE}", host = "n1", count = 2}}]
"""

BASE = ("torchrun --nnodes {nodes} --nproc-per-node {per} pretrain_gpt.py "
        "--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} "
        "--num-layers {layers} --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
        "--untie-embeddings-and-output-weights --micro-batch-size 2 --global-batch-size {gbs} "
        "{extra}\n")


def _line(nodes=2, per=4, tp=2, pp=2, layers=24, gbs=16, extra=""):
    return BASE.format(nodes=nodes, per=per, tp=tp, pp=pp, layers=layers, gbs=gbs, extra=extra)


@pytest.fixture(scope="module")
def opt():
    return load_profiles(models=("OPT-350",)).model("OPT-350")


def test_a_launch_script_is_the_plan_megatron_runs(opt):
    """Stages, layers, replicas on hosts in Megatron-LM's rank order, framework and batch."""
    plan = megatron_plan_from_text(SCRIPT, "launch.sh", opt, "RTX-3090", ZONE)
    assert [(st.layers[0], st.layers[-1]) for st in plan.stages] == [(0, 12), (13, 25)]
    assert [[r.host for r in st.replicas] for st in plan.stages] == [["n0", "n0"], ["n1", "n1"]]
    assert {(r.gpu, r.tp, r.gpus_per_node, r.zone) for st in plan.stages for r in st.replicas} \
        == {("RTX-3090", 2, 4, ZONE)}
    assert (plan.microbatch_size, plan.global_batch_size, plan.model) == (2, 16, "OPT-350")
    fw = plan.framework
    assert (fw.name, fw.version, fw.precision) == ("megatron", "0.20.0", "fp16")
    assert dict(fw.options) == {"overlap_grad_reduce": True,
                                "accumulate_allreduce_grads_in_fp32": True}
    # the options dtsim ignores (learning rate, data, checkpoints) leave the plan as it is
    bare = megatron_plan_from_text(_line(extra="--fp16 --overlap-grad-reduce "
                                         "--accumulate-allreduce-grads-in-fp32"),
                                   "x", opt, "RTX-3090", ZONE)
    assert bare == plan


def test_rank_order_tp_then_dp_then_pp(opt):
    """TP 1, PP 2, DP 4 on 4 nodes of 2: stage 0 is ranks 0-3 (n0, n0, n1, n1), stage 1 4-7."""
    plan = megatron_plan_from_text(_line(nodes=4, per=2, tp=1, pp=2, gbs=16), "x", opt,
                                   "RTX-3090")
    assert [[r.host for r in st.replicas] for st in plan.stages] == [
        ["n0", "n0", "n1", "n1"], ["n2", "n2", "n3", "n3"]]
    assert plan.framework.precision == "fp32" and plan.framework.options == ()
    assert all(r.zone == "default" for st in plan.stages for r in st.replicas)


def test_uneven_first_and_last_stages(opt):
    """--decoder-first/last-pipeline-num-layers: the first 3, the middle 7 each, as
    get_num_layers_to_build; the embedding with the first stage, the head with the last."""
    plan = megatron_plan_from_text(_line(nodes=1, per=4, tp=1, pp=4, gbs=8, extra=(
        "--decoder-first-pipeline-num-layers 3")), "x", opt, "RTX-3090")
    assert [len(st.layers) for st in plan.stages] == [1 + 3, 7, 7, 7 + 1]
    plan = megatron_plan_from_text(_line(nodes=1, per=4, tp=1, pp=4, gbs=8, extra=(
        "--decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 5")), "x", opt,
        "RTX-3090")
    assert [len(st.layers) for st in plan.stages] == [1 + 5, 7, 7, 5 + 1]
    with pytest.raises(ConfigError, match="left after the first/last stage"):
        megatron_plan_from_text(_line(nodes=1, per=4, tp=1, pp=4, gbs=8, extra=(
            "--decoder-first-pipeline-num-layers 4")), "x", opt, "RTX-3090")


def test_world_size_without_torchrun(opt):
    """``python pretrain_gpt.py`` reads WORLD_SIZE (Megatron-LM's default 1): one node."""
    text = "WORLD_SIZE=4\n" + _line(tp=2, pp=2, gbs=8).replace(
        "torchrun --nnodes 2 --nproc-per-node 4", "python")
    plan = megatron_plan_from_text(text, "x", opt, "RTX-3090")
    assert [[r.host for r in st.replicas] for st in plan.stages] == [["n0"], ["n0"]]


def test_detection_cannot_misfire(tmp_path, opt):
    """No .json/.toml file is a launch line; a text file with a marker is (read_plan reads it)."""
    launch = tmp_path / "launch.sh"
    launch.write_text(SCRIPT)
    assert read_plan(launch, "OPT-350", gpu="RTX-3090", zone=ZONE) \
        == megatron_plan_from_text(SCRIPT, str(launch), opt, "RTX-3090", ZONE)
    for p in sorted((DATA_DIR / "runs").glob("*.json")):
        assert not is_megatron_launch(p)
    assert is_megatron_launch("launch.sh", "torchrun pretrain_gpt.py --num-layers 2")
    assert is_megatron_launch("launch", "x --tensor-model-parallel-size 2")
    assert not is_megatron_launch("launch.sh", "echo hello")
    assert not is_megatron_launch("plan.toml", "# --tensor-model-parallel-size 2")


def _cli(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_equals_the_hand_written_plan_bit_for_bit(tmp_path, capsys):
    """dtsim train --plan launch.sh --gpu --model gives the same JSON as the plan in dtsim's format."""
    launch = tmp_path / "launch.sh"
    launch.write_text(SCRIPT)
    hand = tmp_path / "hand.toml"
    hand.write_text(HAND)
    code, a, err = _cli(["train", "--plan", str(launch), "--gpu", "RTX-3090", "--zone", ZONE,
                         "--model", "OPT-350", "--steps", "1", "--replications", "1", "--json"],
                        capsys)
    assert code == 0, err
    code, b, err = _cli(["train", "--plan", str(hand), "--steps", "1", "--replications", "1",
                         "--json"], capsys)
    assert code == 0, err
    assert a == b and '"step_time_mean"' in a


@pytest.mark.parametrize("text, extra, message", [
    (_line(nodes=1, per=3), [], "divisible by TP x PP"),
    (_line(layers=12), [], "--num-layers equal to the transformer layers of the model profile"),
    (_line().replace("--seq-length 2048", "--seq-length 1024"), [],
     r"--seq-length x --hidden-size equal to the values .* \(2097152\).*: 1048576"),
    (_line(extra="--sequence-parallel"), [], "--sequence-parallel sets sequence parallelism"),
    (_line(extra="--context-parallel-size 2"), [], "context parallelism"),
    (_line(extra="--expert-model-parallel-size 2"), [], "expert parallelism"),
    (_line(extra="--num-layers-per-virtual-pipeline-stage 6"), [], "interleaved schedule"),
    (_line(extra="--overlap-param-gather --overlap-grad-reduce"), [],
     "--overlap-param-gather only with --use-distributed-optimizer"),
    (_line(extra="--overlap-param-gather-with-optimizer-step"), [], "interleaved schedule"),
    (_line().replace("--tensor-model-parallel-size", "--tensor_model_parallel_size"), [],
     "spelled as Megatron-LM defines it"),
    (_line().replace("--untie-embeddings-and-output-weights ", ""), [],
     "given for OPT-350, whose profile does not tie its embedding"),
    (_line(extra="--fp16 --bf16"), [], "at most one of --fp16 and --bf16"),
    (_line(gbs=15), [], "global batch size divisible"),
    (_line(nodes=2, per=1, tp=2, pp=1, gbs=2), [], "a TP group across two nodes"),
    (_line().replace("--num-layers 24", "--num-layers $LAYERS"), [], r"\$LAYERS"),
    (_line().replace("--num-layers 24", "$GPT_ARGS"), [], r"\$GPT_ARGS"),
    (_line() + _line(), [], "one command running a .py script"),
    (_line(), ["--gpu", "H100"], "'gpu' must be a GPU of the catalogue"),
])
def test_refusals_are_one_line_exit_2(tmp_path, capsys, text, extra, message):
    launch = tmp_path / "launch.sh"
    launch.write_text(text)
    argv = ["train", "--plan", str(launch), "--model", "OPT-350", "--steps", "1", "--json"]
    argv += extra if "--gpu" in extra else ["--gpu", "RTX-3090", *extra]
    code, out, err = _cli(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]


def test_the_launch_ties_as_the_profile_does(opt, tie):
    """Megatron-LM's GPT ties its output layer to the embedding unless
    --untie-embeddings-and-output-weights (arguments.py:2460): a launch of a tied profile must
    leave the flag out, one of an untied profile (the shipped OPT-350) must give it."""
    tied = tie(load_profiles(models=("OPT-350",)), "OPT-350").model("OPT-350")
    untied_line = _line()
    tied_line = untied_line.replace("--untie-embeddings-and-output-weights ", "")
    assert megatron_plan_from_text(tied_line, "x", tied, "RTX-3090") == \
        megatron_plan_from_text(untied_line, "x", opt, "RTX-3090")
    with pytest.raises(ConfigError, match="absent for OPT-350, whose profile ties its embedding"):
        megatron_plan_from_text(untied_line, "x", tied, "RTX-3090")
    with pytest.raises(ConfigError, match="given for OPT-350, whose profile does not tie"):
        megatron_plan_from_text(tied_line, "x", opt, "RTX-3090")


def test_gpu_is_needed_and_only_with_a_launch_plan(tmp_path, capsys):
    launch = tmp_path / "launch.sh"
    launch.write_text(_line())
    code, _, err = _cli(["train", "--plan", str(launch), "--model", "OPT-350"], capsys)
    assert code == 2 and "'gpu' must be given (--gpu NAME)" in err
    code, _, err = _cli(["train", "--plan", str(launch), "--gpu", "RTX-3090"], capsys)
    assert code == 2 and "'model' must be given (--model NAME)" in err
    run = DATA_DIR / "runs" / "mit-N2_D1.json"
    code, _, err = _cli(["train", "--plan", str(run), "--model", "OPT-350", "--gpu", "RTX-3090"],
                        capsys)
    assert code == 2 and "'gpu' must be given only with a Megatron-LM launch plan" in err
    code, _, err = _cli(["train", "--gpu", "RTX-3090"], capsys)
    assert code == 2 and "'gpu'" in err and "with --plan" in err


def test_the_file_is_data_nothing_in_it_runs(tmp_path, capsys, opt):
    """Command substitutions and backticks are never run: refused where they would set what
    dtsim models, left unknown where they are the value of an option it ignores."""
    ran = tmp_path / "ran"
    touch = f"touch {ran}"
    ignored = _line(extra=f'--save "$({touch})" --load `{touch}` --data-path $({touch}; rm -rf /)')
    plan = megatron_plan_from_text(ignored, "x", opt, "RTX-3090")
    assert len(plan.stages) == 2
    read = tmp_path / "read.sh"
    read.write_text(f"LAYERS=$({touch})\nOUT=`{touch}`\n"
                    + _line().replace("--num-layers 24", "--num-layers $LAYERS"))
    code, _, err = _cli(["train", "--plan", str(read), "--model", "OPT-350", "--gpu", "RTX-3090",
                         "--steps", "1"], capsys)
    assert code == 2 and "command substitution: never run" in err and len(err.splitlines()) == 1
    read.write_text(_line().replace("--micro-batch-size 2", f"--micro-batch-size `{touch}`"))
    code, _, err = _cli(["train", "--plan", str(read), "--model", "OPT-350", "--gpu", "RTX-3090",
                         "--steps", "1"], capsys)
    assert code == 2 and "never run" in err
    assert not ran.exists()


def test_parse_launch_words():
    """The shell reader: continuations, comments, quotes, ${X:-d}, arrays, += and export."""
    text = ('echo "running pretrain_gpt.py"\necho pretrain_bert.py\n'
            'export A=1 # c\nB="x y"\nC=( --p 1\n  --q "two words" )\nC+=( --r )\n'
            'python -u pretrain_gpt.py --a ${A} --b "$B" ${C[@]} --d ${D:-7} \\\n --e\n')
    launch = parse_launch(text)
    assert launch.launcher == ("python", "-u") and launch.script == "pretrain_gpt.py"
    assert launch.args == ("--a", "1", "--b", "x y", "--p", "1", "--q", "two words", "--r",
                           "--d", "7", "--e")
