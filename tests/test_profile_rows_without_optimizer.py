"""A model profile's ``[forward, backward]`` rows: the optimizer step estimated, not 0 s.

The format says a row is ``[forward(, backward(, optimizer))]``; a row of two took LayerTimes'
default optimizer step, 0 s, silently (usertrial13: a LLaMA-2-7B profile's iteration had no
optimizer step). It is now the estimate a forward-only row gets (Adam, 28 bytes a parameter at
the catalogue's memory bandwidth: ``sim.profiles.estimates``), named in the output.
"""

from __future__ import annotations

import json

import pytest

from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.estimates import ADAM_BYTES_PER_PARAM
from sim.profiles.formats import model_from_data, model_to_data

SHAPE = {"layers": 2, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 500}


def _doc(rows):
    return {"model": "M", "bytes_per_value": 2, "shape": SHAPE,
            "times": [{"gpu": "A100-80", "microbatch_size": 1, "tp": 1, "layers": rows}]}


def test_a_two_value_row_leaves_the_optimizer_to_the_estimate():
    m = model_from_data(_doc([["1ms", "2ms"]] * 4))
    assert all(r.optimizer is None and r.backward == 0.002 for r in m.times[0][1])
    assert model_from_data(model_to_data(m)) == m  # written back as [forward, backward]
    m3 = model_from_data(_doc([["1ms", "2ms", "0.5ms"]] * 4))
    assert all(r.optimizer == 0.0005 for r in m3.times[0][1])


@pytest.mark.parametrize("rows, given", [([["1ms", "2ms"]] * 4, False),
                                         ([["1ms", "2ms", "0.5ms"]] * 4, True)])
def test_the_plans_optimizer_step(tmp_path, rows, given):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.json").write_text(json.dumps(_doc(rows)))
    profiles = load_profiles(tmp_path)
    rep = ReplicaSpec("A100-80", 1, 8, "z", host="n0")
    plan = Plan((StageSpec((0, 1, 2, 3), (rep,)),), 1, 2, model="M")
    b = build_plan(plan, profiles, steps=1)
    params = sum(s.params for s in profiles.model("M").layer_sizes(1))
    adam = params * ADAM_BYTES_PER_PARAM / profiles.gpus["A100-80"].memory_bandwidth
    opt = b.stage_times[0][0][2]  # the stage's optimizer step
    if given:
        assert opt == pytest.approx(4 * 0.0005, rel=1e-12)
    else:  # before: 0.0
        assert opt == pytest.approx(adam, rel=1e-12) and adam > 0
        assert any("optimizer step from memory bandwidth" in e for e in b.estimates)
