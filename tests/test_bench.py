"""Smoke tests of the benchmark pieces and of ``dtsim bench`` (tiny sizes, no timing assertions)."""

from __future__ import annotations

import json
import math

import pytest

from sim import bench
from sim.bench import gossip as bench_gossip
from sim.bench import pipeline as bench_pipeline
from sim.bench import sweep as bench_sweep
from sim.bench import timing as bench_timing
from sim.cli import main

TINY = {
    "simpy": {"events": 2000, "repeats": 1},
    "pipeline": {"microbatches": 30, "repeats": 1},
    "async_gossip": {"nodes": 40, "horizon": 2, "repeats": 1},
    "matching": {"sizes": (100, 1000), "updates": 2e3, "repeats": 1},
    "stylised": {"microbatches": 20_000, "repeats": 1},
    "rare": {"repeats": 1},
    "sweep": {"tasks": 2, "workers": 1, "microbatches": 5, "dask": False, "repeats": 1},
    "memory": {"gossip_nodes": 20, "gossip_horizon": 1, "pipeline_small": 10,
               "pipeline_large": 100, "traced_large": 100, "compiled_nodes": 50,
               "compiled_horizons": (1, 3)},
}


@pytest.fixture
def tiny(monkeypatch):
    """Shrink every part so a whole run takes seconds."""
    monkeypatch.setitem(bench.SIZES, "quick", TINY)


def positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_simpy_and_des_rates_are_positive():
    """The yardstick, pipeline and async gossip parts return positive rates."""
    assert positive(bench_timing.bench_simpy(**TINY["simpy"])["simpy_timeouts_per_s"])
    p = bench_pipeline.bench_pipeline(**TINY["pipeline"])
    assert positive(p["pipeline_crossings_per_s"]) and p["pipeline_microbatches"] == 30
    assert positive(bench_gossip.bench_async_gossip(**TINY["async_gossip"])["async_exchanges_per_s"])


def test_matching_reports_every_size():
    """The matching part reports the engine and numpy rates and their ratio for each size."""
    m = bench_gossip.bench_matching(**TINY["matching"])
    for n in (100, 1000):
        assert positive(m[f"matching_updates_per_s_n{n}"])
        assert positive(m[f"numpy_updates_per_s_n{n}"])
        assert m[f"matching_vs_numpy_n{n}"] == pytest.approx(
            m[f"matching_updates_per_s_n{n}"] / m[f"numpy_updates_per_s_n{n}"])


def test_stylised_and_rare_agree_with_exact():
    """The stylised and importance-sampling parts measure correct answers, not just speed."""
    s = bench_pipeline.bench_stylised(microbatches=400_000, repeats=1)
    se = math.sqrt(s["stylised_exact"] / 400_000)
    assert abs(s["stylised_drop_rate"] - s["stylised_exact"]) <= 4 * se
    r = bench_pipeline.bench_rare(repeats=1)
    assert r["rare_rel_error"] <= 0.1 and r["rare_shared_rel_error"] <= 0.1
    assert abs(r["rare_estimate"] / r["rare_exact"] - 1) < 0.4
    assert abs(r["rare_shared_estimate"] / r["rare_shared_exact"] - 1) < 0.4


def test_sweep_part_runs_runner_and_plain_pool():
    """The sweep part times serial, runner and plain pool runs of the same tasks."""
    s = bench_sweep.bench_sweep(**TINY["sweep"])
    for key in ("sweep_serial_s", "sweep_local_s", "sweep_plain_pool_s", "sweep_local_vs_plain"):
        assert positive(s[key]), key
    assert "sweep_dask_s" not in s


def test_memory_subprocess_reports_peak():
    """A memory script runs in a fresh interpreter and reports its peak RSS."""
    from sim.bench.memory import _peak_rss

    r = _peak_rss("pipeline", microbatches=50, traced=True)
    assert r["peak_mib"] > 10 and r["microbatches"] == 50 and r["traced_peak_mib"] > 0


def test_targets_evaluate_and_flag_unmeasured():
    """Targets are met, missed, or None when the figure is absent."""
    rows = {r["key"]: r["met"] for r in bench.check_targets(
        {"stylised_trials_per_s": 2e7, "rare_seconds": 5.0})}
    assert rows["stylised_trials_per_s"] is True
    assert rows["rare_seconds"] is False
    assert rows["pipeline_crossings_per_timeout"] is None


def test_run_bench_ratios_and_jsonl(tiny, tmp_path):
    """run_bench adds ratios to the yardstick; append_jsonl appends one line per run."""
    res = bench.run_bench(quick=True, parts=["stylised", "pipeline"])
    assert res["stylised_trials_per_timeout"] == pytest.approx(
        res["stylised_trials_per_s"] / res["simpy_timeouts_per_s"])
    assert "pipeline_crossings_per_timeout" in res and "part_seconds_stylised" in res
    path = tmp_path / "b.jsonl"
    bench.append_jsonl(path, res)
    bench.append_jsonl(path, {"x": math.nan})
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1]) == {"x": None}
    assert json.loads(lines[0])["stylised_trials_per_s"] == res["stylised_trials_per_s"]


def test_cli_json_and_out_file(tiny, tmp_path, capsys):
    """``dtsim bench --quick --json --out FILE`` prints one object and appends it to FILE."""
    out = tmp_path / "bench.jsonl"
    rc = main(["bench", "--quick", "--json", "--parts", "stylised,rare", "--out", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert rc == (1 if any(t["met"] is False for t in printed["targets"]) else 0)
    stored = json.loads(out.read_text().splitlines()[-1])
    assert printed["stylised_trials_per_s"] == stored["stylised_trials_per_s"]
    assert {t["key"] for t in printed["targets"]} == {t.key for t in bench.TARGETS}


def test_cli_table(tiny, capsys):
    """The text output shows the figures and the targets table."""
    assert main(["bench", "--quick", "--parts", "stylised", "--out", "-"]) in (0, 1)
    text = capsys.readouterr().out
    assert "(e) stylised vector trials" in text and "per SimPy timeout" in text
    assert "not measured" in text


def test_cli_exits_1_when_a_target_is_missed(tiny, monkeypatch, capsys):
    """A missed target makes ``dtsim bench`` exit 1 and name it; all met (or unmeasured) exits 0."""
    from sim.commands import bench as cmd

    def fake(met):
        return lambda res: [{"key": "k", "value": 1.0, "op": ">=", "target": 2.0, "met": met,
                             "text": "a target"}]

    monkeypatch.setattr(cmd, "check_targets", fake(False))
    assert main(["bench", "--quick", "--parts", "stylised", "--out", "-"]) == 1
    assert "1 target(s) missed: k" in capsys.readouterr().err
    assert main(["bench", "--quick", "--json", "--parts", "stylised", "--out", "-"]) == 1
    capsys.readouterr()
    monkeypatch.setattr(cmd, "check_targets", fake(None))
    assert main(["bench", "--quick", "--parts", "stylised", "--out", "-"]) == 0


def test_cli_bad_part(capsys):
    """An unknown part is one line and exit 2."""
    assert main(["bench", "--parts", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("dtsim bench: error: 'parts' must be names from "
                   + ", ".join(bench.PARTS) + ": 'nope'")


def test_peersim_part_is_skipped_without_a_source(capsys):
    """Without --peersim the part says why it did not run, and its targets are not measured."""
    res = bench.run_bench(quick=True, parts=["peersim"])
    assert res["peersim_skipped"] == "needs --peersim DIR" and "peersim_error" not in res
    rows = {r["key"]: r["met"] for r in bench.check_targets(res)}
    assert rows["edge_vs_peersim_n100000"] is None and rows["async_vs_peersim"] is None


def test_cli_peersim_refusals(tmp_path, capsys):
    """--peersim needs its part and an existing directory: one line, exit 2, before any work."""
    assert main(["bench", "--parts", "stylised", "--peersim", str(tmp_path), "--out", "-"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim bench: error: 'peersim' must be given only with the peersim part in --parts: "
        f"'{tmp_path}'")
    missing = tmp_path / "nope"
    assert main(["bench", "--parts", "peersim", "--peersim", str(missing), "--out", "-"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim bench: error: 'peersim' must be a PeerSim 1.0.5 source directory or git "
        f"repository: '{missing}'")


def test_recording_part_reports_ratios():
    """The recording part times compiled edge and async runs with and without default records."""
    pytest.importorskip("numba")
    res = bench_gossip.bench_recording(edge_nodes=(100,), edge_steps=50_000, async_nodes=100,
                                async_horizon=5, repeats=1)
    assert positive(res["recording_edge_ratio_n100"]) and positive(res["recording_async_ratio"])


def test_append_jsonl_keeps_a_record_off_a_torn_last_line(tmp_path):
    """(smallfix7) A file whose last line was left without its newline (a run killed
    mid-write): the next record starts on a line of its own (it was glued to the torn one,
    losing both to a reader of lines); a whole file gets no blank line."""
    path = tmp_path / "b.jsonl"
    path.write_text('{"a": 1}\n{"b": 2')
    bench.append_jsonl(path, {"c": 3})
    assert path.read_text().splitlines() == ['{"a": 1}', '{"b": 2', '{"c": 3}']
    bench.append_jsonl(path, {"d": 4})
    assert path.read_text().endswith('{"c": 3}\n{"d": 4}\n')
    fresh = tmp_path / "sub" / "new.jsonl"
    bench.append_jsonl(fresh, {"e": 5})
    assert fresh.read_text() == '{"e": 5}\n'
