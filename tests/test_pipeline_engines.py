"""The pipeline family's engines, references and comparison records (sim.pipeline.engines, .compare)."""

from __future__ import annotations

import numpy as np
import pytest

from sim import analytic, engines
from sim.errors import ConfigError
from sim.pipeline import (
    PipelineConfig,
    SkipPenalty,
    choose_engine,
    comparison_rows,
    estimate_drop_rate,
    simulate,
    snapshot_exact,
    snapshot_of,
    snapshot_predictions,
)
from sim.pipeline.engines import TIMED_METRICS, VectorEngine
from sim.results import summarize
from sim.runner import replicate
from topologies.placement import Placement


def packed(racks: int, per_rack: int, r: int, rho: float) -> Placement:
    return Placement([[(f"rack{j // per_rack}",)] * r for j in range(racks * per_rack)],
                     {f"rack{i}": rho for i in range(racks)})


def test_one_vocabulary_fastest_first():
    """--engine's names come from the registry; the rare-event engine is a family of its own."""
    assert engines.engine_names("pipeline") == ("auto", "vector", "markov", "des", "queueing")
    assert [e.name for e in engines.engines("pipeline_rare")] == ["importance"]
    assert set(TIMED_METRICS).isdisjoint(VectorEngine.metrics)


def test_reasons_printed_by_the_cli():
    """auto gives the fastest engine's verdict; a named DES says it was asked for."""
    _, why = choose_engine(PipelineConfig(), "auto")
    assert why.startswith("auto: snapshot model: zero crossing time")
    sel, why = choose_engine(PipelineConfig(stage_time=1.0), "auto")
    assert sel.name == "des"
    assert why == "auto: stage_time, latency or transfer_size is nonzero (the crossing takes time)"
    sel, why = choose_engine(PipelineConfig(), "des")
    assert (sel.name, why) == ("des", "asked for the discrete-event simulation")
    with pytest.raises(ConfigError) as info:
        choose_engine(PipelineConfig(max_wait=1.0), "vector")
    assert str(info.value) == ("'engine' must be des for this configuration (max_wait > 0 "
                               "(a microbatch may wait for a recovery)): 'vector'")


def test_references_by_placement_and_timing():
    """Binomial for the study's placement, the conditional law for shared racks, none when timed."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8, domain_outage=0.01)
    p = engines.predictions("pipeline", cfg)
    assert p["drop_rate"]["reference"] == "binomial"
    assert p["drop_rate"]["value"] == analytic.drop_probability(12, 2, 1, 0.8, 0.01)
    q = analytic.stage_outage(0.8, 2, 0.01)
    assert p["mean_quality"]["value"] == analytic.mean_quality_delivered(12, q, 1, 0.0)
    shared = PipelineConfig(stages=12, placement=packed(4, 3, 2, 0.03), skip_budget=2,
                            availability=0.8)
    ps = engines.predictions("pipeline", shared, ["drop_rate", "mean_quality"])
    rd, do = shared.domain_placement.replica_domains, shared.domain_placement.domain_outage
    assert ps["drop_rate"]["reference"] == "placement_exact"
    assert ps["drop_rate"]["value"] == analytic.exact_drop_probability(rd, do, 0.8, 2)
    assert ps["mean_quality"]["value"] is None
    timed = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                           domain_outage=0.01, stage_time=1.0, max_wait=2.0)
    assert not snapshot_exact(timed)
    assert engines.predictions("pipeline", timed)["drop_rate"]["value"] is None
    snap = snapshot_of(timed)
    assert snap.instant and snap.max_wait == 0 and snap.stages == timed.stages
    assert snapshot_predictions(timed)["drop_rate"]["value"] == p["drop_rate"]["value"]


def test_too_wide_placement_has_no_exact_value():
    """A placement whose stages depend on too many shared domains at once: null, with the reason."""
    rd = [[(f"d{(j + i) % 40}",) for i in range(30)] for j in range(40)]
    cfg = PipelineConfig(stages=40, placement=(rd, {f"d{i}": 0.01 for i in range(40)}))
    p = engines.predictions("pipeline", cfg, ["drop_rate"])["drop_rate"]
    assert p["value"] is None and p["note"].startswith("placement_exact: 'replica_domains' must be")


def test_cost_reference_matches_simulation():
    """Workers per quality mass, simulated by the vector engine, match the design cost (not the additive one)."""
    cfg = PipelineConfig(stages=24, replicas=2, skip_budget=3, availability=0.85,
                         skip_penalty=0.2, microbatches=50_000)
    exact = engines.predictions("pipeline", cfg, ["cost"])["cost"]["value"]
    assert exact == analytic.design_cost(24, 2, 3, 0.85, 0.0, 0.2)
    recs = replicate(VectorEngine().run, cfg, replications=10, seed=4)
    mass = summarize(recs, ["quality_mass"])["quality_mass"]
    cost = cfg.workers / mass.mean
    se = cfg.workers * mass.se / mass.mean ** 2
    assert abs(cost - exact) <= 4 * se
    wrong = analytic.design_cost(24, 2, 3, 0.85, 0.0, 0.2, penalty="additive")
    assert abs(cost - wrong) > 4 * se


def test_comparison_rows_carry_the_verdict():
    """The record's rows: exact value, interval and agrees; a timed run has no verdict."""
    cfg = PipelineConfig(stages=12, replicas=2, skip_budget=1, availability=0.8,
                         domain_outage=0.01, microbatches=20_000)
    rows = comparison_rows(simulate(cfg, replications=4, seed=1, engine="auto"))
    assert [r.quantity for r in rows] == ["drop rate", "mean quality (delivered)"]
    assert rows[0].agrees is True and rows[0].exact_applies
    timed = PipelineConfig(stages=6, replicas=2, availability=0.8, stage_time=0.5,
                           mean_downtime=2.0, microbatches=300)
    rows = comparison_rows(simulate(timed, replications=2, seed=1))
    assert [r.quantity for r in rows] == ["drop rate", "mean quality (delivered)", "goodput"]
    assert all(r.agrees is None and not r.exact_applies for r in rows)
    assert rows[0].exact == analytic.drop_probability(6, 2, 0, 0.8, 0.0)


@pytest.mark.parametrize("replicas, method", [(1, "simulation"), (4, "importance sampling")])
def test_rare_event_rule(replicas, method):
    """Fewer than 30 drops expected: the estimate comes from importance sampling, and agrees."""
    cfg = PipelineConfig(stages=12, replicas=replicas, availability=0.9, microbatches=2000,
                         rate=4.0)
    res = estimate_drop_rate(cfg, replications=2, seed=3)
    exact = analytic.drop_probability(12, replicas, 0, 0.9)
    assert res["method"] == method and res["exact"] == exact
    assert res["agrees"] and res["estimate"].contains(exact)


def test_skip_penalty_one_law_two_evaluations():
    """The simulation's table and the closed forms' weights are the same law (to the last bit or so)."""
    for form in ("multiplicative", "additive"):
        law = SkipPenalty(0.37, form)
        np.testing.assert_allclose(law.table(60), law.weights(np.arange(61)), rtol=1e-14, atol=0)
    assert SkipPenalty(0.1).table(2) == (1.0, 0.9, 0.81)
    with pytest.raises(ConfigError) as info:
        SkipPenalty(0.1, "linear")
    assert str(info.value) == "'penalty' must be one of multiplicative, additive: 'linear'"
    with pytest.raises(ConfigError) as info:
        SkipPenalty(1.5)
    assert str(info.value) == "'skip_penalty' must be in [0, 1]: 1.5"


def test_importance_engine_is_the_cli_estimate():
    """The registered rare-event engine draws from stream 'importance' exactly as --method importance."""
    from sim.pipeline import ImportanceEngine, estimate_importance
    from sim.rng import Streams

    cfg = PipelineConfig(stages=48, replicas=3, skip_budget=4)
    run = ImportanceEngine().run(cfg, Streams(2))
    cli = estimate_importance(cfg, seed=2)
    assert run["drop_rate"] == cli["drop_rate"]
    assert [run["drop_rate_low"], run["drop_rate_high"]] == cli["drop_rate_ci"]
    assert run["drop_rate_low"] <= analytic.drop_probability(48, 3, 4, 0.9) <= run["drop_rate_high"]
    assert not ImportanceEngine().applies(PipelineConfig(stage_time=1.0))


def test_on_layout_places_and_takes_link_latencies():
    """on_layout stores the placement's value and the layout's hop latencies (or not)."""
    from sim.pipeline import on_layout

    base = PipelineConfig(stages=4, replicas=2)
    cfg, pl = on_layout(base, "datacenter:regions=2,racks=2,hosts=4", "spread", seed=1)
    assert cfg.placement == pl.value() and cfg.replicas == (2, 2, 2, 2)
    assert len(cfg.latency) == 3 and not cfg.instant
    snap, _ = on_layout(base, "datacenter:regions=2,racks=2,hosts=4", "spread", seed=1,
                        layout_latency=False)
    assert snap.instant and snap.placement == cfg.placement


def test_pipeline_model_chooses_the_fastest_engine_and_says_which():
    """sim.pipeline_model runs where --engine auto would (vector on a snapshot config) and names it."""
    import sim
    from sim.pipeline import des_pipeline_model, vector_pipeline_model
    from sim.rng import Streams

    snap = sim.PipelineConfig(stages=8, replicas=2, availability=0.9, microbatches=500)
    timed = sim.PipelineConfig(stages=8, replicas=2, availability=0.9, microbatches=500,
                               stage_time=1.0)
    s = Streams(3).replication(0)
    auto = sim.pipeline_model(snap, s)
    assert auto["engine"] == sim.engines.select("pipeline", snap).name == "vector"
    assert {k: v for k, v in auto.items() if k != "engine"} == vector_pipeline_model(snap, s)
    # a named engine gives that engine's numbers, bit for bit
    des = sim.pipeline_model(snap, s, engine="des")
    assert des.pop("engine") == "des" and des == des_pipeline_model(snap, s)
    assert sim.pipeline_model(timed, s)["engine"] == sim.engines.select("pipeline", timed).name


def test_des_transitions_budget_counts_what_the_des_simulates(monkeypatch):
    """A run of the DES simulates every worker's and domain's up/down process for the whole run:
    the transitions it makes match :meth:`PipelineConfig.expected_transitions` (2 x failures per
    unit time x the run's length) to within 4 standard errors, and a config expecting more than
    MAX_TRANSITIONS is refused in one line naming what drives it, before any work; a snapshot
    config with short outages runs on the vector engine (nothing simulated per transition)."""
    import sim.pipeline.des as des
    from sim.pipeline.config import MAX_TRANSITIONS
    from sim.rng import Streams

    seen = []
    build = des.build_pipeline_failures

    def spy(*a, **k):
        out = build(*a, **k)
        seen.append(out[0])
        return out
    monkeypatch.setattr(des, "build_pipeline_failures", spy)
    # 4 stages x 3 replicas, a = 0.8, downtime 0.5: 12 x 0.2 / 0.5 = 4.8 failures per unit time,
    # plus 4 domains (rho 0.1, downtime 2: 0.05 each); length 400 arrivals + 4 x 2 + 3 x 5
    cfg = PipelineConfig(stages=4, replicas=3, availability=0.8, mean_downtime=0.5,
                         domain_outage=0.1, domain_downtime=2.0, stage_time=2.0, latency=5.0,
                         microbatches=400, max_wait=1.0)
    n, name, _ = cfg.expected_transitions()
    assert n == pytest.approx(2 * (12 * 0.2 / 0.5 + 4 * 0.1 / 2.0) * (400 + 8 + 15), rel=1e-12)
    assert name == "mean_downtime"  # below its default: the short cycles drive the count
    counts = []
    for rep in range(12):
        seen.clear()
        out = des.des_pipeline_model(cfg, Streams(11).replication(rep))
        comps = seen[0].components.values() if hasattr(seen[0], "components") else None
        assert comps is not None
        # per unit of the run's own length (it may outlast the estimate's lower bound)
        counts.append(sum(c.own_transitions for c in comps) / out["simulated_time"])
    rate = np.mean(counts)
    se = np.std(counts, ddof=1) / np.sqrt(len(counts))
    expected = n / (400 + 8 + 15)
    assert abs(rate - expected) < 4 * se + 1e-9, (rate, expected, se)
    # the wrong count (workers only, one transition per cycle) is rejected
    assert abs(rate - expected / 2) > 4 * se
    # refused past the budget, naming the parameter that drives it
    with pytest.raises(ConfigError, match="'latency' must be small enough that the simulation expects"):
        choose_engine(PipelineConfig(latency=1e6))
    with pytest.raises(ConfigError, match="'mean_downtime' must be large enough"):
        choose_engine(PipelineConfig(mean_downtime=1e-5, stage_time=0.01))
    with pytest.raises(ConfigError, match="'domain_downtime' must be large enough"):
        choose_engine(PipelineConfig(domain_outage=0.1, domain_downtime=1e-6, stage_time=1.0))
    assert PipelineConfig(latency=1e6).expected_transitions()[0] > MAX_TRANSITIONS
    # the snapshot model with short outages runs on the vector engine: not refused
    sel, _ = choose_engine(PipelineConfig(mean_downtime=1e-7))
    assert sel.name == "vector"
    with pytest.raises(ConfigError, match="'mean_downtime'"):
        choose_engine(PipelineConfig(mean_downtime=1e-7), "des")
