"""experiments/diloco_zones.py: its step times, and the bandwidths of its table meet their targets."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dz():
    spec = importlib.util.spec_from_file_location("diloco_zones",
                                                  ROOT / "experiments" / "diloco_zones.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_step_times_are_six_n_tokens_over_64_h100_at_40_percent(dz):
    """6 N 2^19 / (64 * 989e12 * 0.4): 0.1242 s at 1B, 1.242 s at 10B, 12.42 s at 100B (to 4 digits)."""
    assert dz.step_time(1e9) == pytest.approx(0.124247, rel=1e-5)
    assert dz.step_time(1e11) == pytest.approx(100 * dz.step_time(1e9))


@pytest.mark.parametrize("method", ["dp", "dp-overlap", "diloco", "streaming",
                                    "streaming-overlap", "streaming-4bit"])
def test_each_bandwidth_needed_gives_its_utilisation(dz, method):
    """At the bandwidth the table gives, the closed-form utilisation is the target (or no
    bandwidth does it: the latency alone exceeds the budget, and even an infinite link
    falls short)."""
    for params in dz.MODELS.values():
        for u in dz.TARGETS:
            B = dz.bandwidth_needed(method, params, u)
            if math.isinf(B):
                assert dz.utilisation(method, params, 1e30) < u
            else:
                assert dz.utilisation(method, params, B) == pytest.approx(u, rel=1e-9)
                assert dz.utilisation(method, params, 0.9 * B) < u


def test_4bit_streaming_needs_a_quarter_of_16bit_overlapped_streaming(dz):
    """Same latency, a quarter of the payload: the bandwidth term is a quarter."""
    a = dz.bandwidth_needed("streaming-overlap", 1e11, 0.95)
    b = dz.bandwidth_needed("streaming-4bit", 1e11, 0.95)
    assert b == pytest.approx(a / 4, rel=1e-9)


def test_dp_overlap_des_equals_its_exact_value_above_the_old_lower_bound(dz):
    """dp-overlap is the DES of --sync allreduce:overlap=backward: at its 95 % bandwidth for
    100B (12 buckets) the simulated utilisation is the max-plus value, 0.95; the exposed tail
    is above the bound max(0, T_ar - T_b) (the last bucket's ring is always exposed), and
    one bucket is no overlap at all (dp's time)."""
    p = dz.MODELS["100B"]
    B = dz.bandwidth_needed("dp-overlap", p, 0.95)
    exposed, n = dz.dp_overlap_best(p, B)
    assert n == 12
    got = dz._des("dp-overlap", p, bandwidth=B, steps=4)
    assert got["des_utilisation"] == pytest.approx(0.95, rel=1e-12)
    assert got["exact_run_utilisation"] == pytest.approx(0.95, rel=1e-12)
    T = dz.step_time(p)
    ar = dz.AD.outer_sync_time(dz.ZONES, 2 * p, B, dz.LATENCY)
    assert exposed > dz.AD.overlap_backward_exposed(ar, 2 * T / 3) + 0.5
    assert dz.dp_overlap_exposed(p, B, 1) == pytest.approx(ar, rel=1e-12)


def test_a_copy_with_other_zones_says_so_in_its_tables(dz, tmp_path, capsys, monkeypatch):
    """(user trial 3) A user copies the script and sets ``ZONES, LATENCY = 8, 0.05``: the
    numbers follow, but the table titles and figure said "4 zones, 0.1 s apart" and "4 zones'
    quadratics" (literals). They now name the script's own values."""
    monkeypatch.setattr(dz, "ZONES", 8)
    monkeypatch.setattr(dz, "LATENCY", 0.05)
    row = {"part": "bandwidth", "model": "10B", "method": "diloco", "target": 0.95,
           "step_time_s_mean": 1.242, "bandwidth_gbps_mean": 48.0, "des_utilisation_mean": 0.95,
           "exact_run_utilisation_mean": 0.95, "buckets_mean": math.nan}
    learn = {"part": "learning", "method": "diloco", "initial_loss_mean": 35.5,
             "final_loss_mean": 0.03, "wall_hours_mean": 1.0}
    for k in range(len(dz.LOSS_TARGETS)):
        learn.update({f"hours_to_loss{k}_mean": 0.04, f"steps_to_loss{k}_mean": 100.0})

    class Result:
        def summary(self):
            return [row, learn]
    dz.analyse(Result(), tmp_path)
    out = capsys.readouterr().out
    assert "(8 zones, 0.05 s apart;" in out and "on 8 zones' quadratics" in out
    assert "4 zones" not in out


def test_a_copy_sweeping_other_models_runs_every_part(dz, monkeypatch):
    """(user trial 4) A copy edited to MODELS = {'1B': 1e9} (the README's 'edit the parameters
    at the top') failed every task of its regions, trace and learning parts with KeyError:
    '10B' (they looked their models up in MODELS). They name theirs in SIZES now: the same
    numbers as the file's own MODELS, whatever MODELS holds."""
    want = dz._learning("diloco")
    monkeypatch.setattr(dz, "MODELS", {"1B": 1e9})
    assert dz.size("10B") == 1e10 and dz.size(dz.TRACE_MODEL) == 1e10
    assert dz._learning("diloco") == want
    assert dz.model({"part": "bandwidth", "model": "1B", "method": "dp", "target": 0.5},
                    None)["step_time_s"] == dz.step_time(1e9)


def test_a_copy_with_its_own_models_and_targets_keeps_each_part_in_its_quick_run(tmp_path):
    """(user trial 5) A copy edited to SIZES = {'1.3B': 1.3e9}, REGION_MODELS = ('1.3B',) and
    TARGETS = (0.9,) ran --quick with no bandwidth point and no regions point: QUICK kept the
    targets 0.5 and 0.95 and the model '1B' by name. Quick keeps the lowest target and the
    highest up to 95 %, and the first region model; the shipped file keeps its quick points."""
    from sim.runner import load_experiment

    shipped = load_experiment(ROOT / "experiments" / "diloco_zones.py", quick=True)
    parts = [(p["part"], p.get("model"), p.get("target")) for p in shipped.point_list()]
    assert sorted({t for part, _m, t in parts if part == "bandwidth"}) == [0.5, 0.95]
    assert {m for part, m, _t in parts if part == "regions"} == {"1B"}
    src = (ROOT / "experiments" / "diloco_zones.py").read_text()
    for old, new in (('SIZES = {"1B": 1e9, "10B": 1e10, "100B": 1e11}', 'SIZES = {"1.3B": 1.3e9}'),
                     ('("1B", "10B"), "10B"', '("1.3B",), "1.3B"'),
                     ("TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)", "TARGETS = (0.9,)"),
                     ('LEARN_MODEL = (0.2, 0.05), 10.0, "10B"', 'LEARN_MODEL = (0.2, 0.05), 10.0, "1.3B"')):
        assert old in src, old
        src = src.replace(old, new)
    f = tmp_path / "my_zones.py"
    f.write_text(src)
    quick = load_experiment(f, quick=True)
    parts = [(p["part"], p.get("model"), p.get("target")) for p in quick.point_list()]
    assert {(m, t) for part, m, t in parts if part == "bandwidth"} == {("1.3B", 0.9)}
    assert {m for part, m, _t in parts if part == "regions"} == {"1.3B"}
