"""A model given by its shape says its position embedding (usertrial16: a LLaMA launch's
``--position-embedding-type rope`` was ignored and the shape kept a learned ``s x h`` table on
every TP rank: 16.8 million parameters a rank at LLaMA-2-7B's ``s = h = 4096``, 4 % of a TP-8
first stage's).

Megatron-LM (d98e8a64dd) keeps a learned position table only for ``learned_absolute``, its
default (megatron/training/arguments.py:2397; core/models/common/embeddings/
language_model_embedding.py:47, 71: a plain ``torch.nn.Embedding``, whole on every TP rank);
``rope`` and ``none`` keep none. Hand example: ``V = 1024, h = 1024, s = 512`` at TP 2: the
embedding holds ``1024 * 1024 / 2 + 512 * 1024 = 1,048,576`` parameters learned, ``524,288``
with rope.
"""

from __future__ import annotations

import json

import pytest

from sim.errors import ConfigError
from sim.profiles import load_profiles
from sim.profiles.build import build_plan
from sim.profiles.formats import model_from_data, model_to_data
from sim.profiles.megatron_args import megatron_plan_from_text
from sim.profiles.values import ModelShape, shape_sizes

ZONE = "us-central1-a"
SHAPE = {"layers": 2, "hidden": 1024, "heads": 16, "sequence": 512, "vocabulary": 1024,
         "tied": False}


def test_hand_example_embedding_parameters():
    learned = ModelShape(**SHAPE)
    rope = ModelShape(**SHAPE, position_embedding="rope")
    assert shape_sizes(learned, 2, 2)[0].params == 1_048_576
    assert shape_sizes(rope, 2, 2)[0].params == 524_288
    assert shape_sizes(ModelShape(**SHAPE, position_embedding="none"), 2, 2)[0].params \
        == 524_288
    # every other layer the same
    assert shape_sizes(learned, 2, 2)[1:] == shape_sizes(rope, 2, 2)[1:]


def test_the_profile_reads_and_writes_it():
    doc = {"model": "M", "bytes_per_value": 2, "shape": {**SHAPE, "position_embedding": "rope"}}
    m = model_from_data(doc)
    assert m.shape.position_embedding == "rope"
    assert model_from_data(model_to_data(m)).shape == m.shape
    # the default is not written: a learned shape's profile is written as before
    assert "position_embedding" not in model_to_data(model_from_data(
        {"model": "M", "bytes_per_value": 2, "shape": SHAPE}))["shape"]
    with pytest.raises(ConfigError) as e:
        model_from_data({"model": "M", "bytes_per_value": 2,
                         "shape": {**SHAPE, "position_embedding": "alibi"}})
    assert e.value.name == "position_embedding"


def _profiles(tmp_path, positions=None):
    shape = dict(SHAPE, **({"position_embedding": positions} if positions else {}))
    (tmp_path / "models").mkdir(parents=True)
    (tmp_path / "models" / "m.json").write_text(json.dumps(
        {"model": "M", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": shape}))
    return load_profiles(tmp_path)


def _build(prof, extra=""):
    text = ("torchrun --nnodes 1 --nproc-per-node 2 pretrain_gpt.py "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
            "--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --seq-length 512 "
            "--micro-batch-size 1 --global-batch-size 1 --bf16 "
            f"--untie-embeddings-and-output-weights {extra}")
    plan = megatron_plan_from_text(text, "launch.sh", prof.model("M"), "A100-80", ZONE)
    return build_plan(plan, prof, steps=1)


def test_a_rope_launch_on_a_rope_shape_holds_no_table(tmp_path):
    learned = _build(_profiles(tmp_path / "a"))
    rope = _build(_profiles(tmp_path / "b", "rope"), "--position-embedding-type rope")
    # bf16, Adam, not distributed: 18 bytes a parameter (weights 2, fp32 gradients 4,
    # master weights and moments 12): the table's 512 x 1024 parameters fewer
    assert learned.memory[0].weights - rope.memory[0].weights == 2 * 512 * 1024
    assert learned.memory[0].activations == rope.memory[0].activations


@pytest.mark.parametrize("positions, extra, got", [
    (None, "--position-embedding-type rope", "rope"),
    ("rope", "", "learned_absolute"),  # Megatron-LM's default
    ("rope", "--position-embedding-type none", "none"),
])
def test_launch_and_shape_disagreeing_is_refused(tmp_path, positions, extra, got):
    with pytest.raises(ConfigError) as e:
        _build(_profiles(tmp_path, positions), extra)
    assert e.value.name == "plan" and e.value.value == got
