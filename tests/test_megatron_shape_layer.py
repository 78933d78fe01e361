"""A Megatron-LM launch line that builds another layer than a model given by its shape is
refused (usertrial16: ``--swiglu --ffn-hidden-size 11008``, ``--group-query-attention
--num-query-groups 8`` and ``--ffn-hidden-size 28672`` were read as the shape's layer, every
step time and byte the same as without them).

A shape is ``12 h^2 + 13 h`` a transformer layer (Narayanan et al. 2021): an MLP of two
``h x 4h`` matrices and keys and values for every head. Megatron-LM (d98e8a64dd) builds a gated
MLP with ``--swiglu`` or ``--quick-geglu`` (``gated_linear_unit``: argument_utils.py:314-326;
the first linear layer twice as wide, core/transformer/mlp.py:205-206), an MLP of
``--ffn-hidden-size`` (default ``4 h``, arguments.py:1320-1329), ``--num-query-groups``
key-value heads with ``--group-query-attention`` (argument_utils.py:330-333; argparse default 1,
transformer_config.py:175-177) and multi-latent attention (transformer_config.py:288).
"""

from __future__ import annotations

import json

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles
from sim.profiles.build import build_plan
from sim.profiles.formats import DATA_DIR
from sim.profiles.megatron_args import megatron_plan_from_text

ZONE = "us-central1-a"
SHAPE = {"layers": 2, "hidden": 1024, "heads": 16, "sequence": 512, "vocabulary": 1024,
         "tied": False}


def _profiles(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.json").write_text(json.dumps(
        {"model": "M", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": SHAPE}))
    return load_profiles(tmp_path)


def _launch(extra=""):
    return ("torchrun --nnodes 1 --nproc-per-node 2 pretrain_gpt.py "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
            f"--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --seq-length 512 "
            f"--micro-batch-size 1 --global-batch-size 1 --bf16 "
            f"--untie-embeddings-and-output-weights {extra}")


def _step(prof, extra=""):
    plan = megatron_plan_from_text(_launch(extra), "launch.sh", prof.model("M"), "A100-80", ZONE)
    return build_plan(plan, prof, steps=1)


@pytest.mark.parametrize("extra, named", [
    ("--swiglu", "--swiglu"),
    ("--swiglu --ffn-hidden-size 2816", "--swiglu"),
    ("--quick-geglu", "--quick-geglu"),
    ("--multi-latent-attention", "--multi-latent-attention"),
    ("--ffn-hidden-size 2816", "2816"),
    ("--group-query-attention --num-query-groups 4", "4"),
    ("--group-query-attention", "1"),  # argparse default 1: multi-query attention
])
def test_another_layer_than_the_shape_is_refused(tmp_path, extra, named):
    prof = _profiles(tmp_path)
    with pytest.raises(ConfigError) as e:
        _step(prof, extra)
    assert e.value.name == "plan"
    assert named in str(e.value)


@pytest.mark.parametrize("extra", [
    "--ffn-hidden-size 4096",                           # 4 h: the shape's MLP
    "--group-query-attention --num-query-groups 16",    # a group a head: every head its own
    "--num-query-groups 4",                             # read only with --group-query-attention
])
def test_the_shape_layer_spelled_out_runs_as_without(tmp_path, extra):
    prof = _profiles(tmp_path)
    base, spelled = _step(prof), _step(prof, extra)
    assert spelled.memory == base.memory
    assert spelled.stage_times == base.stage_times
    assert spelled.config == base.config


def test_a_measured_profile_is_what_was_measured():
    """OPT-350's profile was measured: the launch's MLP options are not checked against it."""
    prof = load_profiles(DATA_DIR)
    text = ("torchrun --nnodes 1 --nproc-per-node 2 pretrain_gpt.py "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 24 "
            "--micro-batch-size 2 --global-batch-size 2 --fp16 "
            "--untie-embeddings-and-output-weights --ffn-hidden-size 4096")
    plan = megatron_plan_from_text(text, "launch.sh", prof.model("OPT-350"), "RTX-3090", ZONE)
    assert build_plan(plan, prof, steps=1).memory
