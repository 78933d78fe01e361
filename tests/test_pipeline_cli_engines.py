"""``dtsim pipeline --engine`` and ``--method importance``: engines, rare drops, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

import topologies
from sim import analytic
from sim.cli import main
from sim.pipeline import PipelineConfig, estimate_importance, simulate
from sim.pipeline.rare import stratified_placement_probability
from sim.rng import Streams
from topologies.placement import Placement, place
from topologies.placement import shared_per_stage as default_placement

TIMED = ("goodput", "goodput_ci", "latency_mean", "latency_p50", "latency_p99",
         "failovers_per_microbatch", "simulated_time", "worker_time",
         "stage_crossings_per_second")


def run_json(capsys, *args: str) -> dict:
    assert main(["pipeline", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys, *args: str) -> str:
    assert main(["pipeline", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


# ----------------------------------------------------------------------------- engines


def test_auto_picks_vector_for_the_snapshot_model(capsys):
    """Zero crossing time: auto runs the vector engine, says so, and leaves timed metrics null."""
    out = run_json(capsys, "--skip-budget", "1", "--microbatches", "20000", "--seed", "3")
    assert out["engine"] == "vector" and out["engine_reason"].startswith("auto: snapshot model")
    assert out["method"] == "simulate"
    for key in TIMED:
        assert out[key] is None, key
    lo, hi = out["drop_rate_ci"]
    exact = analytic.drop_probability(48, 3, 1, 0.9, 0.0)
    assert out["predicted_drop_rate"] == pytest.approx(exact)
    assert lo <= exact <= hi and hi - lo < 0.5 * exact


def test_auto_picks_des_when_the_crossing_takes_time(capsys):
    """A nonzero stage time sends auto to the DES, whose latency and goodput are reported."""
    out = run_json(capsys, "--stage-time", "0.1", "--microbatches", "200", "--replications", "2")
    assert out["engine"] == "des"
    assert out["engine_reason"] == ("auto: stage_time, latency or transfer_size is nonzero "
                                    "(the crossing takes time)")
    assert out["latency_mean"] > 0 and out["goodput"] > 0
    assert out["failovers_per_microbatch"] is not None


@pytest.mark.slow
def test_des_and_vector_agree_with_the_exact_tail():
    """Both engines' drop-rate intervals contain the exact tail, and the same config answers both."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                         domain_outage=0.01, microbatches=4000, mean_downtime=0.2,
                         domain_downtime=0.2)
    exact = analytic.drop_probability(12, 2, 1, 0.8, 0.01)
    des = simulate(cfg, replications=6, seed=2, engine="des")
    vec = simulate(cfg, replications=6, seed=2, engine="vector")
    assert des["engine"] == "des" and vec["engine"] == "vector"
    for out in (des, vec):
        e = out["drop_rate_ci"]
        assert e.low - e.half_width <= exact <= e.high + e.half_width, (out["engine"], e, exact)
    # a wrong model (no shared domain) is far outside the vector interval
    wrong = analytic.drop_probability(12, 2, 1, 0.8, 0.0)
    assert not vec["drop_rate_ci"].contains(wrong)


def test_plain_text_names_the_engine(capsys):
    """The text output says which engine ran and what the vector engine does not answer."""
    assert main(["pipeline", "--microbatches", "2000", "--replications", "2"]) == 0
    text = capsys.readouterr().out
    assert "engine: vector (auto: snapshot model" in text
    assert "not answered by the vector engine (use --engine des)" in text
    assert main(["pipeline", "--engine", "des", "--microbatches", "300", "--replications", "2",
                 "--stages", "4"]) == 0
    text = capsys.readouterr().out
    assert "engine: des (asked for the discrete-event simulation)" in text
    assert "latency mean" in text


def test_trace_runs_the_des(capsys, tmp_path):
    """--event-log with auto uses the DES (the log is the DES's) and says why."""
    out = run_json(capsys, "--stages", "4", "--microbatches", "50", "--replications", "1",
                   "--event-log", str(tmp_path / "t.csv"))
    assert out["engine"] == "des"
    assert out["engine_reason"] == "auto: --event-log needs the discrete-event simulation"
    assert (tmp_path / "t.csv").read_text().startswith("time,microbatch,event,stage,replica")


@pytest.mark.parametrize("args, message", [
    (["--engine", "gpu"], "'engine' must be one of auto, vector, markov, des, queueing: 'gpu'"),
    (["--method", "exact"], "'method' must be one of simulate, importance: 'exact'"),
    (["--engine", "vector", "--stage-time", "1"],
     "'engine' must be des for this configuration (stage_time, latency or transfer_size is "
     "nonzero (the crossing takes time)): 'vector'"),
    (["--engine", "vector", "--max-wait", "2"],
     "'engine' must be des for this configuration (max_wait > 0 (a microbatch may wait for a "
     "recovery)): 'vector'"),
    (["--engine", "vector", "--event-log", "x.csv"],
     "'event_log' must be unset with --engine vector (it has no event log): 'x.csv'"),
    (["--samples", "100"], "'samples' must be given only with --method importance: 100"),
    (["--target-rel-error", "0.1"],
     "'target_rel_error' must be given only with --method importance: 0.1"),
])
def test_bad_engine_and_method_messages(capsys, args, message):
    """Unknown engines and methods, and options without their method: one line, exit 2."""
    assert run_error(capsys, *args) == f"dtsim pipeline: error: {message}"


# ----------------------------------------------------------------------------- importance


# (availability, replicas, skip budget, rho): exact tails from about 1e-3 down to about 1e-12
TAIL_POINTS = [
    (0.9, 3, 1, 0.0),     # 1.1e-3
    (0.93, 3, 2, 0.0),    # 6.9e-7
    (0.9, 3, 4, 0.0),     # 1.7e-9
    (0.9, 4, 2, 1e-5),    # 2.3e-8, with a shared domain per stage
    (0.91, 3, 5, 0.0),    # 1.8e-12
]


@pytest.mark.parametrize("a, r, s, rho", TAIL_POINTS)
def test_importance_matches_the_exact_tail(capsys, a, r, s, rho):
    """The CLI's estimate is within 4 standard errors of the exact tail, at 5% relative error."""
    out = run_json(capsys, "--method", "importance", "--availability", str(a), "--replicas",
                   str(r), "--skip-budget", str(s), "--domain-outage", str(rho),
                   "--target-rel-error", "0.05", "--seed", "11")
    exact = analytic.drop_probability(48, r, s, a, rho)
    assert out["predicted_drop_rate"] == pytest.approx(exact, rel=1e-9)
    assert out["rel_error"] <= 0.05
    assert abs(out["drop_rate"] - exact) <= 4 * out["standard_error"]
    assert out["agrees"] is True
    lo, hi = out["drop_rate_ci"]
    assert lo < out["drop_rate"] < hi
    # a wrong model one skip away is orders of magnitude off
    assert abs(analytic.drop_probability(48, r, s + 1, a, rho) - out["drop_rate"]) \
        > 4 * out["standard_error"]


def test_importance_json_keys(capsys):
    """--method importance prints the documented keys; plain MC would need ~1e12 draws at 1e-9."""
    out = run_json(capsys, "--method", "importance", "--skip-budget", "4", "--seed", "5")
    for key in ("drop_rate", "drop_rate_ci", "predicted_drop_rate", "rel_error",
                "effective_sample_size", "samples", "method", "seed", "estimator", "engine"):
        assert key in out, key
    assert out["method"] == "importance" and out["seed"] == 5 and out["samples"] == 10_000
    assert out["engine"] is None
    assert out["effective_sample_size"] > 100
    assert out["naive_samples"] > 1e11


def test_importance_samples_budget(capsys):
    """--samples fixes the number of draws when no target is given."""
    out = run_json(capsys, "--method", "importance", "--skip-budget", "2", "--samples", "3000")
    assert out["samples"] == 3000


def test_importance_text_output(capsys):
    """The text output shows the exact value, the interval and the relative error."""
    assert main(["pipeline", "--method", "importance", "--skip-budget", "4"]) == 0
    text = capsys.readouterr().out
    assert "method: importance sampling of the snapshot drop probability" in text
    assert "estimator: exponential tilting of the stage outages" in text
    assert "1.65204e-09" in text and "relative error" in text


PACKED = "datacenter:regions=2,racks=8,hosts=9"
WIDE = "datacenter:regions=4,racks=20,hosts=2,rack_outage=1e-2,region_outage=1e-4"
TINY = "datacenter:regions=2,racks=8,hosts=9,region_outage=1e-13,rack_outage=1e-6"


@pytest.mark.parametrize("topology, s, a", [
    (PACKED, 2, 0.9),     # 1.6e-2
    (PACKED, 4, 0.97),    # 3.2e-4: two racks out at once matter (a per-domain tilt misses them)
    (WIDE, 2, 0.9),       # 5.7e-4, sampled strata
    pytest.param(WIDE, 8, 0.9, marks=pytest.mark.slow),  # 3.1e-4, sampled strata (WIDE s=2 in default)
    (TINY, 5, 0.95),      # 1.2e-10
    (TINY, 8, 0.95),      # 2.0e-13
])
def test_importance_with_shared_domains_matches_exact(capsys, topology, s, a):
    """On packed layouts the estimate agrees with the exact conditional law, not the binomial."""
    out = run_json(capsys, "--method", "importance", "--topology", topology, "--placement",
                   "packed", "--skip-budget", str(s), "--availability", str(a),
                   "--target-rel-error", "0.05", "--seed", "2")
    exact = out["predicted_drop_rate"]
    assert exact is not None and out["agrees"] is True
    lo, hi = out["drop_rate_ci"]
    assert lo <= exact <= hi
    assert out["rel_error"] <= 0.05
    assert (hi - lo) <= 0.25 * exact
    cfg = PipelineConfig(stages=48, replicas=3, skip_budget=s, availability=a)
    layout = topologies.build(topology)
    pl = place(layout, 48, 3, "packed")
    assert exact == pytest.approx(analytic.exact_drop_probability(
        pl.replica_domains, pl.domain_outage, a, s), rel=1e-9)
    assert cfg.workers == out["workers"]


def test_layout_latency_is_not_used_by_importance(capsys):
    """With a topology, importance uses its failure domains only and says so."""
    assert main(["pipeline", "--method", "importance", "--topology", PACKED, "--placement",
                 "packed", "--skip-budget", "4"]) == 0
    text = capsys.readouterr().out
    assert "(layout failure domains; link latencies not used)" in text
    assert "domain configurations summed exactly" in text


def test_wide_placement_without_exact_reference(capsys):
    """A placement too wide for exact enumeration still gets an estimate; exact is null."""
    out = run_json(capsys, "--method", "importance", "--topology",
                   "datacenter:regions=4,racks=20,hosts=2", "--placement", "spread",
                   "--skip-budget", "3", "--target-rel-error", "0.05")
    assert out["predicted_drop_rate"] is None and out["agrees"] is None
    assert out["drop_rate"] > 0 and out["rel_error"] <= 0.05


@pytest.mark.parametrize("args, message", [
    (["--stage-time", "0.5"],
     "'method' must be simulate for this configuration (stage_time, latency or transfer_size "
     "is nonzero (the crossing takes time)): 'importance'"),
    (["--max-wait", "1"],
     "'method' must be simulate for this configuration (max_wait > 0 (a microbatch may wait "
     "for a recovery)): 'importance'"),
    (["--arrival", "back_to_back"],
     "'arrival' must be fixed or poisson when stage_time, latency and transfer_size are all 0: "
     "'back_to_back'"),
    (["--engine", "des"],
     "'engine' must be auto with --method importance (it draws snapshots itself): 'des'"),
    (["--replications", "5"],
     "'replications' must be unset with --method importance (its draws are independent; use "
     "--samples): 5"),
    (["--microbatches", "100"],
     "'microbatches' must be unset with --method importance (use --samples): 100"),
    (["--executor", "local"], "'executor' must be serial with --method importance: 'local'"),
    (["--event-log", "t.csv"],
     "'event_log' must be unset with --method importance (it has no event log): 't.csv'"),
    (["--samples", "1"], "'samples' must be an integer >= 2: 1"),
    (["--target-rel-error", "0"], "'target_rel_error' must be > 0: 0.0"),
])
def test_importance_refuses_what_it_cannot_honour(capsys, args, message):
    """--method importance with options it would ignore or cannot answer: one line, exit 2."""
    assert run_error(capsys, "--method", "importance", *args) == f"dtsim pipeline: error: {message}"


def test_estimate_importance_is_reproducible():
    """One seed gives one estimate (the draws come from the 'importance' stream)."""
    cfg = PipelineConfig(skip_budget=3)
    a = estimate_importance(cfg, seed=4, samples=2000)
    b = estimate_importance(cfg, seed=4, samples=2000)
    c = estimate_importance(cfg, seed=5, samples=2000)
    assert a["drop_rate"] == b["drop_rate"] != c["drop_rate"]


# ----------------------------------------------------------------------------- stratified estimator


def packed_racks(racks: int, per_rack: int, r: int, rho: float):
    """Every replica of stage j in rack j // per_rack."""
    rd = [[(f"rack{j // per_rack}",)] * r for j in range(racks * per_rack)]
    return rd, {f"rack{i}": rho for i in range(racks)}


@pytest.mark.parametrize("limit", [20_000, 1])
@pytest.mark.parametrize("racks, per_rack, r, a, rho, s", [
    (12, 4, 4, 0.9, 1e-3, 4),     # 5.8e-4
    (12, 4, 4, 0.9, 1e-5, 6),     # 8.1e-9
    (12, 4, 3, 0.9, 1e-7, 7),     # 8.2e-13
])
def test_stratified_matches_exact(racks, per_rack, r, a, rho, s, limit):
    """Summed exactly or sampled (limit 1), the stratified estimate agrees with the exact law."""
    rd, do = packed_racks(racks, per_rack, r, rho)
    exact = analytic.exact_drop_probability(rd, do, a, s)
    res = stratified_placement_probability(rd, do, a, s, rng=Streams(7).rng("t"),
                                           target_rel_error=0.05, enumerate_limit=limit)
    assert abs(res.estimate - exact) <= 4 * res.se + (res.high - res.estimate), (res, exact)
    assert res.rel_error <= 0.05
    binom = analytic.drop_probability(racks * per_rack, r, s, a, rho)
    assert abs(res.estimate - binom) > 4 * res.se + 0.05 * exact


def test_stratified_finds_pairs_of_domains():
    """Two racks out at once matter here; sampled strata still cover the exact value."""
    pl = place(topologies.datacenter(2, 8, 9), 48, 3, "packed")
    exact = analytic.exact_drop_probability(pl.replica_domains, pl.domain_outage, 0.97, 4)
    strat = stratified_placement_probability(pl.replica_domains, pl.domain_outage, 0.97, 4,
                                             rng=Streams(1).rng("t"), enumerate_limit=1,
                                             target_rel_error=0.05)
    assert strat.contains(exact), (strat, exact)
    assert strat.samples > 0 and strat.rel_error <= 0.05


def test_stratified_folds_private_domains():
    """A domain holding one worker is folded exactly: host outages equal lower availability."""
    rd = [[("rack0", f"h{j}{i}") for i in range(2)] for j in range(6)]
    do = {"rack0": 1e-3, **{f"h{j}{i}": 0.05 for j in range(6) for i in range(2)}}
    exact = analytic.exact_drop_probability(rd, do, 0.9, 1)
    res = stratified_placement_probability(rd, do, 0.9, 1, rng=Streams(0).rng("t"))
    assert res.samples == 0 and res.enumerated >= 2
    assert res.estimate == pytest.approx(exact, rel=1e-9)


# ----------------------------------------------------------------------------- replicas vs placement


def test_explicit_replicas_conflicting_with_a_placement_are_refused():
    """replicas given with a placement of other counts is an error, never silently overridden."""
    pl = default_placement([2] * 4, 0.01)
    with pytest.raises(ValueError) as info:
        PipelineConfig(stages=4, placement=pl, replicas=3)
    assert str(info.value) == ("'replicas' must be unset or the placement's replica counts "
                               "(2 per stage): 3")
    pl2 = Placement(default_placement([2, 3, 2, 2], 0.01).replica_domains, {})
    with pytest.raises(ValueError) as info:
        PipelineConfig(stages=4, placement=pl2, replicas=(2, 2, 2, 2))
    assert str(info.value) == ("'replicas' must be unset or the placement's replica counts "
                               "(2,3,2,2): (2, 2, 2, 2)")


def test_replicas_unset_or_matching_take_the_placement():
    """Unset replicas take the placement's counts; matching ones are accepted; default is 3."""
    pl = default_placement([2, 3, 2, 2], 0.01)
    assert PipelineConfig(stages=4, placement=pl).replicas == (2, 3, 2, 2)
    assert PipelineConfig(stages=4, placement=pl, replicas=(2, 3, 2, 2)).replicas == (2, 3, 2, 2)
    assert PipelineConfig(stages=4).replicas == (3, 3, 3, 3)
    import dataclasses
    cfg = PipelineConfig(stages=4, placement=pl)
    assert dataclasses.replace(cfg, microbatches=5).replicas == (2, 3, 2, 2)


def test_cli_replicas_with_topology_place_that_many(capsys):
    """--replicas with --topology places exactly that many per stage (no override)."""
    out = run_json(capsys, "--method", "importance", "--topology", PACKED, "--placement",
                   "packed", "--replicas", "2", "--skip-budget", "2", "--show-placement")
    assert out["workers"] == 96
    assert all(len(stage) == 2 for stage in out["placement"])
    assert np.isfinite(out["drop_rate"])


@pytest.mark.slow
def test_interval_coverage_over_seeds():
    """Over 60 seeds the 95% intervals cover the exact value about 95% of the time (both estimators)."""
    cfg = PipelineConfig(skip_budget=4)
    exact = analytic.drop_probability(48, 3, 4, 0.9, 0.0)
    covered = sum(estimate_importance(cfg, seed=k, samples=2000)["agrees"] for k in range(60))
    assert covered >= 51, covered  # binomial(60, 0.95): P(< 52) is about 1%
    pl = place(topologies.datacenter(4, 20, 2, rack_outage=1e-2, region_outage=1e-4), 48, 3,
               "packed")
    exact = analytic.exact_drop_probability(pl.replica_domains, pl.domain_outage, 0.9, 8)
    hits = 0
    for k in range(60):
        res = stratified_placement_probability(pl.replica_domains, pl.domain_outage, 0.9, 8,
                                               rng=Streams(k).rng("t"), samples=2000)
        hits += res.contains(exact)
    assert hits >= 51, hits
