"""``dtsim plan --tp`` on a profile measured at TP 1 only: the degrees asked for are derived from
TP 1, as ``dtsim train --plan`` derives them, and ranked (usertrial13).

Before, ``--tp 2`` was refused ('tp' must be a TP degree the profile has times at) and the
default search ranked the TP-1 plans alone, while ``dtsim train --plan`` timed a TP-2 plan of the
same profile, faster than any of them.
"""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.profiles import load_profiles

SHAPE = {"layers": 4, "hidden": 512, "heads": 8, "sequence": 256, "vocabulary": 1000}


def _profiles(tmp_path):
    (tmp_path / "models").mkdir()
    rows = [["0.05ms", "0.1ms"]] + [["2ms", "4ms"]] * 4 + [["1ms", "2ms"]]
    doc = {"model": "M", "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": SHAPE,
           "times": [{"gpu": "A100-80", "microbatch_size": 1, "tp": 1, "layers": rows}]}
    (tmp_path / "models" / "m.json").write_text(json.dumps(doc))
    return str(tmp_path)


def test_plan_ranks_tp_degrees_derived_from_tp1(tmp_path, capsys):
    prof = _profiles(tmp_path)
    out = tmp_path / "best.json"
    code = main(["plan", "--model", "M", "--profiles", prof, "--nodes", "A100-80:8x1@z",
                 "--global-batch-size", "8", "--framework", "megatron:precision=bf16",
                 "--tp", "2,4", "--simulate", "0", "--json", "--quiet", "--out", str(out)])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert any("derived from the profile's TP 1 rows" in n for n in res["model_from_shape"])
    tps = {r["tp"] for p in res["plans"] for st in p["plan"]["stages"] for r in st["replicas"]}
    assert tps == {2, 4}
    # the rows searched are the ones dtsim train --plan derives (its Estimator, as build_plan
    # makes it): a profile holding them as measured rows is searched to the same numbers
    from sim.profiles.build import _estimator
    from sim.profiles.formats import model_to_data

    profiles = load_profiles(prof)
    mp = profiles.model("M")
    est = _estimator(profiles, mp, "profiled", 2, None)
    doc = model_to_data(mp)
    doc["times"] += [{"gpu": "A100-80", "microbatch_size": 1, "tp": t,
                      "layers": [[x.forward, x.backward, x.optimizer]
                                 for x in est.layer_times("A100-80", 1, t)[0]]} for t in (2, 4)]
    other = tmp_path / "given"
    (other / "models").mkdir(parents=True)
    (other / "models" / "m.json").write_text(json.dumps(doc))
    assert main(["plan", "--model", "M", "--profiles", str(other), "--nodes", "A100-80:8x1@z",
                 "--global-batch-size", "8", "--framework", "megatron:precision=bf16",
                 "--tp", "2,4", "--simulate", "0", "--json", "--quiet"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert [(p["plan"], p["predicted_iteration_time"], p["peak_memory"]) for p in res["plans"]] \
        == [(p["plan"], p["predicted_iteration_time"], p["peak_memory"]) for p in given["plans"]]
    assert out.exists()


def test_json_plans_name_their_framework_and_train_times_them_alike(tmp_path, capsys):
    """``dtsim plan --json``'s plans carry the framework they were searched on, as ``--out``
    writes it (before: none, so ``dtsim train --plan`` of one ran DeepSpeed's defaults and its
    closed form differed from the search's, 0.02737 s for 0.02753 s here); train's closed form of
    each is the search's prediction."""
    prof = _profiles(tmp_path)
    assert main(["plan", "--model", "M", "--profiles", prof, "--nodes", "A100-80:8x1@z",
                 "--global-batch-size", "8", "--framework", "megatron:precision=bf16",
                 "--simulate", "0", "--top", "3", "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["plans"]) == 3
    for k, p in enumerate(res["plans"]):
        assert p["plan"]["framework"] == {"name": "megatron", "precision": "bf16"}
        path = tmp_path / f"p{k}.json"
        path.write_text(json.dumps(p["plan"]))
        assert main(["train", "--plan", str(path), "--profiles", prof, "--steps", "1",
                     "--replications", "1", "--json"]) == 0
        train = json.loads(capsys.readouterr().out)
        assert train["predicted_step_time"] == pytest.approx(p["predicted_iteration_time"],
                                                             rel=1e-12)
        assert train["peak_memory"] == p["peak_memory"]
