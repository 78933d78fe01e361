"""``if``/``elif``/``else``/``fi``, ``&&`` and ``||`` in a launch file (user trial 10): the
reader split the file into statements and read every assignment in it, so a branch that does
not run set what the launch says (``BIG=false; if [ "$BIG" = "true" ]; then mp_size=4; fi``
ran the plan at TP 4, silently). DeepSpeedExamples' ds_pretrain_gpt2_pipe.sh builds its options
in such blocks (``if [ "${PA_CPU}" = "true" ]; then chkp_opt="${chkp_opt} --checkpoint-in-cpu";
fi`` with ``PA_CPU=false``)."""

from __future__ import annotations

import json

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles
from sim.profiles.deepspeed_args import deepspeed_plan_from_text
from sim.profiles.megatron_args import parse_launch

RUN = "\ntorchrun pretrain_gpt.py --num-layers 2\n"


def _env(text):
    return parse_launch(text + RUN, "run.sh").env


@pytest.mark.parametrize("text, value", [
    ('B=false\nm=2\nif [ "${B}" = "true" ]; then\nm=4\nfi', "2"),
    ('B=true\nm=2\nif [ "${B}" = "true" ]; then\nm=4\nfi', "4"),
    ('B=false\nif [ "$B" = true ]; then m=4; else m=1; fi', "1"),
    ('B=x\nif [ "$B" == y ]; then m=4\nelif [ "$B" != y ]\nthen m=8\nelse m=1\nfi', "8"),
    ('B=y\nif [ "$B" == y ]; then m=4; elif [ "$B" != y ]; then m=8; else m=1; fi', "4"),
    ('E=\nm=2\n[ -z "$E" ] && m=4', "4"),
    ('E=x\nm=2\n[ -z "$E" ] && m=4', "2"),
    ('m=2\n[ -n "" ] || m=3', "3"),
    ('m=2\n[ ! a = a ] && m=5', "2"),
    ('B=false\nm=2\nif [ "$B" = true ]; then\n  if [ 1 = 1 ]; then m=4; fi\nfi', "2"),
    ("m=2\ncd /tmp && m=6", "6"),  # a command other than a test is taken to succeed
])
def test_the_branch_that_runs_sets_the_value(text, value):
    assert _env(text)["m"] == value


def test_the_examples_blocks():
    """The example's own blocks: PA_CPU=false leaves --checkpoint-in-cpu out."""
    env = _env('PA=true\nPA_CPU=false\nchkp_opt="--checkpoint-activations"\n'
               'if [ "${PA}" = "true" ]; then\nchkp_opt="${chkp_opt} \\\n  --partition-activations"'
               '\nfi\n\nif [ "${PA_CPU}" = "true" ]; then\nchkp_opt="${chkp_opt} \\\n'
               '  --checkpoint-in-cpu"\nfi')
    assert env["chkp_opt"].split() == ["--checkpoint-activations", "--partition-activations"]


def test_a_condition_it_cannot_evaluate_leaves_what_it_sets_unknown():
    env = _env('m=2\nk=1\nif [ -f big.flag ]; then\nm=4\nfi\n[ "$X" = 1 ] && k=2')
    assert "set under a condition dtsim does not evaluate: [ -f big.flag ]" in str(env["m"])
    assert "does not evaluate" in str(env["k"])  # $X unset: unknown
    with pytest.raises(ConfigError, match="launch runs whatever its conditions are"):
        parse_launch("if [ -f x ]; then\n torchrun pretrain_gpt.py --num-layers 2\nfi\n", "r")


@pytest.fixture(scope="module")
def tied(tie):
    return tie(load_profiles(models=("OPT-350",)), "OPT-350").model("OPT-350")


@pytest.mark.parametrize("big, tp", [("false", 2), ("true", 4)])
def test_the_plan_is_the_branch_that_runs(tmp_path, tied, big, tp):
    (tmp_path / "ds_config.json").write_text(json.dumps(
        {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 16 // tp * 2,
         "fp16": {"enabled": True}}))
    (tmp_path / "hostfile").write_text("".join(f"w{i} slots=4\n" for i in range(4)))
    launch = tmp_path / "run.sh"
    launch.write_text(f'BIG={big}\nmp_size=2\nif [ "${{BIG}}" = "true" ]; then\nmp_size=4\nfi\n'
                      "deepspeed pretrain_gpt2.py --model-parallel-size ${mp_size} "
                      "--pipe-parallel-size 4 --num-layers 24 --hidden-size 1024 --seq-length "
                      "2048 --batch-size 2 --fp16 --deepspeed --deepspeed_config ds_config.json\n")
    plan = deepspeed_plan_from_text(launch.read_text(), str(launch), tied, "RTX-3090", "z")
    assert {r.tp for st in plan.stages for r in st.replicas} == {tp}
