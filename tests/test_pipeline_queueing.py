"""The queueing pipeline (replicas as servers): M/M/c and Jackson references, the snapshot law, the CLI."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from sim import analytic, engines
from sim.errors import ConfigError
from sim.pipeline import PipelineConfig, des_pipeline_model, pipeline_model, queueing_model
from sim.rng import Streams


def _replicate(model, cfg, reps, seed):
    """Per-replication metrics of ``reps`` independent replications."""
    return [model(cfg, Streams(seed).replication(k)) for k in range(reps)]


def _mean_se(records, key):
    x = np.array([r[key] for r in records])
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x)))


def _mm(stages, replicas, rate, stage_time, **kw):
    return PipelineConfig(stages=stages, replicas=replicas, queueing=True, arrival="poisson",
                          rate=rate, stage_time=stage_time,
                          stage_time_distribution="exponential", availability=1.0, **kw)


# all slow: test_tandem_is_jackson keeps M/M/1 and M/M/2 stations (sojourn, Erlang C waits,
# busy fractions, the predicted value) in the default suite
@pytest.mark.parametrize("c, rate, mu", [pytest.param(1, 0.6, 1.0, marks=pytest.mark.slow),
                                         pytest.param(2, 1.4, 1.0, marks=pytest.mark.slow),
                                         pytest.param(3, 2.4, 1.0, marks=pytest.mark.slow)])
def test_one_stage_is_mmc(c, rate, mu):
    """One stage of c replicas, Poisson arrivals, exponential passes, one FIFO: the M/M/c sojourn."""
    cfg = _mm(1, c, rate, 1.0 / mu, microbatches=8000)
    recs = _replicate(queueing_model, cfg, 24, seed=10 + c)
    m, se = _mean_se(recs, "latency_mean")
    exact = analytic.mmc_sojourn(c, rate, mu)
    assert engines.predictions("pipeline", cfg, ["latency_mean"])["latency_mean"]["value"] == exact
    assert se < 0.02 * exact  # a tight interval
    assert abs(m - exact) < 4 * se, (m, se, exact)
    # wrong models are rejected: no queueing (the pass time alone), one server fewer or more
    assert abs(m - 1.0 / mu) > 8 * se
    if c > 1:
        assert abs(m - analytic.mmc_sojourn(c + 1, rate, mu)) > 4 * se
    util, _ = _mean_se(recs, "utilisation")
    assert util == pytest.approx(rate / (c * mu), rel=0.03)


def test_speed_scales_the_service_rate():
    """A replica of speed 2 serves at twice the rate: M/M/1 with mu = 2 / stage_time."""
    cfg = _mm(1, 1, 1.2, 1.0, microbatches=8000, speeds=((2.0,),))
    # 8 replications (24 before): se 1.2 % of the exact value, z = 0.05; the M/M/1 at speed 1
    # is 85 se away (24: se 0.9 %, z = 0.07, wrong 113 se away)
    recs = _replicate(queueing_model, cfg, 8, seed=3)
    m, se = _mean_se(recs, "latency_mean")
    exact = analytic.mmc_sojourn(1, 1.2, 2.0)
    assert abs(m - exact) < 4 * se and se < 0.02 * exact
    assert abs(m - analytic.mmc_sojourn(1, 0.6, 1.0)) > 4 * se or exact == analytic.mmc_sojourn(1, 0.6, 1.0)


# the default point runs 12 replications (24 before): se 1.5 % of the exact sojourn, z = 0.84;
# no queueing 34 se away, one wait only 18 se away; per-station waits |z| <= 1.14
# (24: se 0.9 %, z = -0.57, wrongs 51 and 26 se away); the slow point keeps 24
@pytest.mark.parametrize("replicas, rate, stage_time, latency, reps", [
    pytest.param((1, 2, 3), 0.8, (1.0, 2.0, 3.0), 0.0, 24, marks=pytest.mark.slow),
    ((2, 1, 2, 1), 0.6, (2.0, 1.0, 2.5, 0.8), (0.5, 0.0, 0.25), 12),
])
def test_tandem_is_jackson(replicas, rate, stage_time, latency, reps):
    """L stages in tandem, no failures: the sum of the per-stage M/M/c sojourns plus the hops."""
    L = len(replicas)
    cfg = _mm(L, replicas, rate, stage_time, latency=latency, microbatches=6000)
    recs = _replicate(queueing_model, cfg, reps, seed=20 + L)
    m, se = _mean_se(recs, "latency_mean")
    mus = [1.0 / t for t in stage_time]
    hops = cfg.hop_times
    exact = analytic.tandem_sojourn(replicas, rate, mus, hops)
    assert engines.predictions("pipeline", cfg, ["latency_mean"])["latency_mean"]["value"] \
        == pytest.approx(exact)
    assert se < 0.02 * exact
    assert abs(m - exact) < 4 * se, (m, se, exact)
    # wrong models: no queueing at all, and the stations' waits counted once only (the slowest)
    no_queue = sum(stage_time) + sum(hops)
    assert abs(m - no_queue) > 8 * se
    worst = max(analytic.mmc_sojourn(c, rate, mu) for c, mu in zip(replicas, mus, strict=True))
    assert abs(m - (worst + sum(stage_time) - max(stage_time) + sum(hops))) > 4 * se
    # per station: the Erlang C wait in queue and the busy fraction rate / (c mu), as Ciw reports
    waits = analytic.tandem_waits(replicas, rate, mus)
    for j, (c, mu) in enumerate(zip(replicas, mus, strict=True)):
        w, w_se = _mean_se(recs, f"wait_stage{j}")
        assert abs(w - waits[j]) < 4 * w_se, (j, w, w_se, waits[j])
        if c > 1:  # one server fewer (M/M/(c-1)) waits visibly longer
            assert rate >= (c - 1) * mu \
                or abs(w - analytic.tandem_waits([c - 1], rate, [mu])[0]) > 4 * w_se
        u, u_se = _mean_se(recs, f"utilisation_stage{j}")
        assert abs(u - rate / (c * mu)) < 4 * u_se + 0.005 * u, (j, u, u_se)


def test_zero_time_crossing_with_failures_keeps_the_snapshot_law():
    """Queueing changes nothing without contention: zero stage time, failures, the binomial drop rate."""
    cfg = PipelineConfig(stages=8, replicas=2, skip_budget=1, availability=0.7,
                         domain_outage=0.02, mean_downtime=0.5, domain_downtime=0.5,
                         arrival="poisson", rate=4.0, microbatches=2000, queueing=True)
    # 6 replications (12 before): se 2.3 % of the exact value, z = -0.50; without the domains
    # 10.6 se away, a replica more 33 se away (12: z = -0.72, wrongs 13.5 and 42 se away)
    recs = _replicate(queueing_model, cfg, 6, seed=5)
    m, se = _mean_se(recs, "drop_rate")
    exact = analytic.drop_probability(8, 2, 1, 0.7, 0.02)
    pred = engines.predictions("pipeline", cfg, ["drop_rate"])["drop_rate"]
    assert pred["value"] == pytest.approx(exact)
    assert se < 0.1 * exact
    assert abs(m - exact) < 4 * se, (m, se, exact)
    assert abs(m - analytic.drop_probability(8, 2, 1, 0.7, 0.0)) > 4 * se  # without the domains
    assert abs(m - analytic.drop_probability(8, 3, 1, 0.7, 0.02)) > 4 * se  # a replica more


@pytest.mark.slow  # a cross-check against the DES; the queueing engine's drop rate with failures
# is checked against the snapshot law by test_zero_time_crossing_with_failures_keeps_the_snapshot_law
def test_light_load_with_failures_matches_the_no_queueing_des():
    """At very light load with failures the queueing engine's drop rate is the DES's and the snapshot law's."""
    base = PipelineConfig(stages=6, replicas=2, skip_budget=1, availability=0.8,
                          mean_downtime=5.0, stage_time=0.05, detection_timeout=0.1,
                          arrival="poisson", rate=0.2, microbatches=2000)
    q = _replicate(queueing_model, dataclasses.replace(base, queueing=True), 10, seed=7)
    d = _replicate(des_pipeline_model, base, 10, seed=8)
    (mq, sq), (md, sd) = _mean_se(q, "drop_rate"), _mean_se(d, "drop_rate")
    assert abs(mq - md) < 4 * math.hypot(sq, sd), (mq, sq, md, sd)
    # the latency too, within the little queueing left (a replica is busy ~1% of the time)
    (mq, sq), (md, sd) = _mean_se(q, "latency_mean"), _mean_se(d, "latency_mean")
    assert sq < 0.002 * mq and abs(mq - md) < 0.005 * md, (mq, sq, md, sd)
    # and both are near the snapshot law (the crossing is short against the outages)
    m, se = _mean_se(q, "drop_rate")
    exact = analytic.drop_probability(6, 2, 1, 0.8, 0.0)
    assert se < 0.15 * exact and abs(m - exact) < 4 * se
    assert abs(m - analytic.drop_probability(6, 2, 0, 0.8, 0.0)) > 4 * se  # no skip budget


def test_equal_deterministic_servers_wait_only_at_the_first():
    """L equal deterministic stations: M/D/1 waits at the first (Pollaczek-Khinchine), none after.

    The DES (no queueing) gives the bare crossing time L t.
    """
    rho, L = 0.7, 4
    base = PipelineConfig(stages=L, replicas=1, availability=1.0, stage_time=1.0,
                          arrival="poisson", rate=rho, microbatches=6000)
    # 8 replications (16 before): se 0.6 % of the exact value, z = -0.35; waiting at every
    # station 110 se away (16: se 0.4 %, z = 0.75, 159 se away)
    recs = _replicate(queueing_model, dataclasses.replace(base, queueing=True), 8, 1)
    m, se = _mean_se(recs, "latency_mean")
    exact = L + rho / (2 * (1 - rho))  # departures of a D server are >= t apart: no later wait
    assert abs(m - exact) < 4 * se and se < 0.02 * exact, (m, se, exact)
    assert abs(m - (L + L * rho / (2 * (1 - rho)))) > 8 * se  # waiting at every station
    d = _mean_se(_replicate(des_pipeline_model, base, 2, 1), "latency_mean")
    assert d[0] == pytest.approx(L)


def test_engines_split_by_queueing():
    """Queueing configs go to the queueing engine only; the others never do (auto included)."""
    plain = PipelineConfig(stages=4, stage_time=1.0)
    queued = dataclasses.replace(plain, queueing=True)
    assert engines.select("pipeline", plain).name == "des"
    assert engines.select("pipeline", queued).name == "queueing"
    assert engines.select("pipeline", PipelineConfig(stages=4)).name != "queueing"
    for name in ("des", "vector", "markov"):
        with pytest.raises(ConfigError, match="queueing is on"):
            engines.select("pipeline", dataclasses.replace(queued, stage_time=0.0), name)
    with pytest.raises(ConfigError, match="queueing is off"):
        engines.select("pipeline", plain, "queueing")
    with pytest.raises(ConfigError, match=r"^'queueing' must be False for the no-queueing DES"):
        des_pipeline_model(queued, Streams(0))
    # the public model function chooses as the CLI does: queueing for a queueing config
    assert pipeline_model(queued, Streams(0))["engine"] == "queueing"
    with pytest.raises(ConfigError, match=r"^'queueing' must be True for the queueing engine"):
        queueing_model(plain, Streams(0))


def test_config_refuses_queueing_fields_without_it():
    """routing and speeds need queueing; speeds must match the replicas."""
    with pytest.raises(ConfigError, match=r"^'routing' must be unset \(queue\) without queueing: 'weighted'$"):
        PipelineConfig(routing="weighted")
    with pytest.raises(ConfigError, match=r"^'speeds' must be unset without queueing"):
        PipelineConfig(stages=1, speeds=((1.0,),))
    with pytest.raises(ConfigError, match=r"^'speeds' must be one speed per replica \(2 per stage\): '1 per stage'$"):
        PipelineConfig(stages=2, replicas=2, queueing=True, speeds=((1.0,), (1.0,)))
    with pytest.raises(ConfigError, match=r"^'speeds' must be > 0"):
        PipelineConfig(stages=1, queueing=True, speeds=((0.0,),))
    with pytest.raises(ConfigError, match=r"^'trace' must be False with queueing"):
        PipelineConfig(queueing=True, trace=True)
    assert PipelineConfig(stages=2, queueing=True, speeds=((1.0, 2.0), (3.0,))).replicas == (2, 1)


@pytest.mark.parametrize("routing", ["queue", "least-loaded", "weighted", "round-robin"])
def test_routings_run_and_the_shared_queue_is_best(routing):
    """Every routing runs; with equal servers the shared FIFO has the least latency (M/M/2)."""
    cfg = _mm(1, 2, 1.4, 1.0, microbatches=4000, routing=routing)
    recs = _replicate(queueing_model, cfg, 8, seed=2)
    m, se = _mean_se(recs, "latency_mean")
    exact = analytic.mmc_sojourn(2, 1.4, 1.0)
    if routing == "queue":
        assert abs(m - exact) < 4 * se
    else:
        assert m > exact
    if routing == "weighted":  # random split: two independent M/M/1 queues at rate 0.7
        assert abs(m - analytic.mmc_sojourn(1, 0.7, 1.0)) < 4 * se


def test_cli_queueing_json_and_refusals(tmp_path, capsys):
    """--queueing reports latency_mean_ci and the exact value; its flags are refused without it."""
    from sim.cli import main

    speeds = tmp_path / "speeds.csv"
    speeds.write_text("stage,replica,speed\n0,0,1\n0,1,1\n")
    rc = main(["pipeline", "--queueing", "--stages", "1", "--speeds", str(speeds), "--arrival",
               "poisson", "--rate", "1.2", "--stage-time", "1", "--stage-time-distribution",
               "exponential", "--availability", "1", "--microbatches", "2000",
               "--replications", "4", "--seed", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["engine"] == "queueing" and out["routing"] == "queue"
    assert out["predicted_latency_mean"] == pytest.approx(analytic.mmc_sojourn(2, 1.2, 1.0))
    lo, hi = out["latency_mean_ci"]
    assert lo < out["latency_mean"] < hi
    for argv, line in [
        (["--routing", "weighted"], "'routing' must be given only with --queueing: 'weighted'"),
        (["--speeds", str(speeds)], f"'speeds' must be given only with --queueing: '{speeds}'"),
    ]:
        assert main(["pipeline", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"dtsim pipeline: error: {line}"]
    priced = tmp_path / "priced.csv"
    priced.write_text("stage,replica,speed,price\n0,0,1,2\n")
    assert main(["pipeline", "--queueing", "--stages", "1", "--speeds", str(priced)]) == 2
    assert "'speeds' must be a CSV file without a price column" in capsys.readouterr().err


def test_queueing_defaults_are_a_queueing_networks(capsys):
    """--queueing alone: no failures and waiting, not Study A's a = 0.9 and drop; said in the output."""
    from sim.cli import main

    argv = ["pipeline", "--queueing", "--stages", "2", "--replicas", "2", "--stage-time", "1",
            "--arrival", "poisson", "--rate", "1", "--microbatches", "300", "--replications", "3"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["drop_rate_ci"] == [0.0, 0.0] and out["failovers_per_microbatch"] == 0.0
    assert len(out["wait_stage"]) == len(out["utilisation_stage_ci"]) == 2
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "availability 1 (the --queueing default: no failures)" in text
    assert "waits until it is back (the --queueing default" in text
    # failures asked for: microbatches wait (none dropped, exactly), unless --max-wait 0
    assert main([*argv, "--availability", "0.8", "--mean-downtime", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["drop_rate_ci"] == [0.0, 0.0] and out["failovers_per_microbatch"] > 0
    assert main([*argv, "--availability", "0.8", "--mean-downtime", "2", "--max-wait", "0",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["drop_rate"] > 0
