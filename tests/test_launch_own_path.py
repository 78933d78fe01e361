"""``$(realpath $0)`` in a launch file is the file's own path (user trial 10): DeepSpeedExamples'
``examples/ds_pretrain_gpt2_pipe.sh`` finds its ds_config by ``script_path=$(realpath $0)``,
``script_dir=$(dirname $script_path)``, ``config_json="$script_dir/ds_config.json"``; dtsim
refused it ("its eval runs a word dtsim does not evaluate: '$(dirname $script_path) (a command
substitution: never run)'")."""

from __future__ import annotations

import json

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles
from sim.profiles.deepspeed_args import deepspeed_plan_from_text
from sim.profiles.megatron_args import parse_launch

OWN = """script_path=$(realpath $0)
script_dir=$(dirname $script_path)
config_json="$script_dir/ds_config.json"
"""
LAUNCH = """mp_size=2
run_cmd="deepspeed --num_nodes 4 --num_gpus 4 pretrain_gpt2.py --model-parallel-size ${mp_size} \
 --pipe-parallel-size 4 --num-layers 24 --hidden-size 1024 --num-attention-heads 16 \
 --seq-length 2048 --max-position-embeddings 2048 --batch-size 2 --fp16 --deepspeed \
 --deepspeed_config ${config_json}"
echo ${run_cmd}
eval ${run_cmd}
"""
CONFIG = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 32, "fp16": {"enabled": True}}


@pytest.fixture(scope="module")
def tied(tie):
    return tie(load_profiles(models=("OPT-350",)), "OPT-350").model("OPT-350")


def _plan(folder, own, tied):
    (folder / "ds_config.json").write_text(json.dumps(CONFIG))
    (folder / "hostfile").write_text("".join(f"w{i} slots=4\n" for i in range(4)))
    launch = folder / "ds_pretrain_gpt2_pipe.sh"
    launch.write_text(own + LAUNCH)
    return deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090", "z")


def test_the_examples_own_folder_finds_its_ds_config(tmp_path, tied):
    plan = _plan(tmp_path, OWN, tied)
    assert plan == _plan(tmp_path, 'config_json="ds_config.json"\n', tied)
    assert (plan.microbatch_size, plan.global_batch_size, len(plan.stages)) == (2, 32, 4)
    assert plan.framework.version == "0.3.13"


@pytest.mark.parametrize("text, value", [
    ("d=$(dirname $(realpath $0))", "/work/examples"),
    ("d=`readlink -f $0`", "/work/examples/run.sh"),
    ("d=$(basename $(realpath $0))", "run.sh"),
    ("x=/a/b/\nd=$(dirname $x)", "/a"),
    ("x=file\nd=$(dirname $x)", "."),
])
def test_the_path_functions_it_gives(text, value):
    launch = parse_launch(text + "\ntorchrun pretrain_gpt.py --num-layers 2\n", "run.sh",
                          path="/work/examples/run.sh")
    assert launch.env["d"] == value


@pytest.mark.parametrize("text", [
    "d=$(dirname $0)",          # $0 alone: how it was invoked, unknown
    "d=$(realpath other.sh)",   # a path relative to an unknown folder
    "d=$(cat ds_config.json)",  # any other command: never run
    "d=$(dirname $1)",
])
def test_what_it_still_does_not_evaluate(tmp_path, tied, text):
    (tmp_path / "ds_config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "hostfile").write_text("".join(f"w{i} slots=4\n" for i in range(4)))
    launch = tmp_path / "run.sh"
    launch.write_text(text + '\nconfig_json="$d/ds_config.json"\n' + LAUNCH)
    with pytest.raises(ConfigError, match="command substitution: never run|does not evaluate"):
        deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090", "z")
