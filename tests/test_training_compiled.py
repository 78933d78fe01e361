"""The compiled training engine against the DES and the exact references.

* Without failures and with deterministic passes (no random draw at all) it
  reproduces the DES bit for bit, ties included: the same event order.
* With failures, heterogeneous speeds, exponential passes, domains, downloads,
  hops, skips and waits, its means agree with the DES's within 4 standard
  errors at several points, with tight intervals (slow), and a wrong model
  (no detection timeout) is rejected by the same test.
* The exact references it answers (saturated weighted throughput, M/M/c)
  hold at two points each, and a seeded run is pinned.

The default suite compiles nothing here: it runs the kernel's logic as plain
Python (``plain_python`` in ``conftest.py``: the bit-for-bit cases and the
seeded pin), and the refusals. The compiled binary (a cold compile costs about
90 s of CPU) is checked by the ``slow`` tests: the same bit-for-bit cases and
pin, the agreement in law with the DES and the exact references (which the
default suite checks on the DES in ``test_training_validation.py``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim import analytic
from sim.engines import predictions, select
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.compiled import HAVE_NUMBA, compiled_obstacle, compiled_training_model

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="needs numba (dtsim[fast])")

SPEEDS5 = ((1.0, 2.0), (1.0, 1.0, 0.5), (2.0, 1.0), (1.0, 1.0, 1.0), (0.7, 1.3))

EXACT_CASES = [
    dict(stages=6, replicas=3, microbatches=20, steps=3, schedule="swarm", routing="queue"),
    dict(stages=6, replicas=(2, 3, 1, 2, 3, 2), microbatches=17, steps=3, schedule="swarm",
         routing="least-loaded", latency=0.3),
    dict(stages=5, speeds=SPEEDS5, microbatches=13, steps=2, schedule="swarm",
         routing="round-robin", optimizer_time=1.5),
    dict(stages=5, speeds=SPEEDS5, microbatches=7, steps=5, schedule="async", routing="queue",
         latency=(0.1, 0.2, 0.0, 0.4)),
    dict(stages=5, replicas=2, microbatches=7, steps=5, schedule="async", routing="round-robin",
         arrival="fixed", arrival_rate=0.7),
    dict(stages=4, replicas=2, microbatches=8, steps=3, schedule="swarm", routing="least-loaded",
         backward_ratio=0),
]


def _same(a: float, b: float) -> bool:
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def _differences(des: dict, comp: dict) -> dict:
    return {k: (des[k], comp[k]) for k in des if not _same(des[k], comp[k])}


PIN = TrainingConfig(stages=8, replicas=3, microbatches=24, steps=3, schedule="swarm",
                     routing="weighted", speed_spread=0.3, availability=0.85, mean_downtime=10.0,
                     domain_outage=0.02, param_size=1.0, bandwidth=4.0, detection_timeout=0.5,
                     skip_budget=1, max_wait=3.0, sync="none")
EXACT_CONFIGS = [TrainingConfig(sync="none", **kw) for kw in EXACT_CASES]


@pytest.fixture(scope="module")
def plain_runs(plain_python):
    """The kernel as plain Python, in one fresh interpreter: each exact case, then PIN twice."""
    return plain_python([(compiled_training_model, (cfg, Streams(3)), {}) for cfg in EXACT_CONFIGS]
                        + [(compiled_training_model, (PIN, Streams(11)), {})] * 2)


def test_kernel_logic_reproduces_the_des_bit_for_bit(plain_runs):
    """The kernel's statements run as plain Python (numba's JIT off, nothing compiled): with
    nothing random, every metric of every case equals the DES's exactly (same event order, ties
    too). The compiled binary is held to the same in the slow test below."""
    for cfg, comp in zip(EXACT_CONFIGS, plain_runs[:len(EXACT_CONFIGS)], strict=True):
        assert not _differences(training_model(cfg, Streams(3), figures=False), comp), cfg


@pytest.mark.slow
@pytest.mark.parametrize("kw", EXACT_CASES)
def test_no_draws_reproduce_the_des_bit_for_bit(kw):
    """With nothing random, the compiled kernel's every metric equals the DES's exactly."""
    cfg = TrainingConfig(sync="none", **kw)
    assert not _differences(training_model(cfg, Streams(3), figures=False),
                            compiled_training_model(cfg, Streams(3)))


def _check_pin(m: dict) -> None:
    assert m["training_time"] == pytest.approx(350.70631970047896, rel=1e-12)
    assert (m["passes"], m["lost_passes"], m["recomputes"], m["skips"], m["waits"]) == \
        (1502.0, 83.0, 242.0, 55.0, 28.0)
    assert m["drop_rate"] == pytest.approx(1 / 72)
    assert m["lost_download"] == pytest.approx(64.27596582725937, rel=1e-12)


def test_seeded_regression_pin_of_the_kernel_logic(plain_runs):
    """The kernel as plain Python (nothing compiled), seeded, with every modelled feature, gives
    the pinned numbers twice (a change must be named)."""
    first, again = plain_runs[len(EXACT_CONFIGS):]
    _check_pin(first)
    assert all(_same(first[k], again[k]) for k in first)


@pytest.mark.slow
def test_seeded_regression_pin():
    """The compiled kernel gives the same pinned numbers as its plain-Python logic."""
    m = compiled_training_model(PIN, Streams(11))
    _check_pin(m)
    again = compiled_training_model(PIN, Streams(11))
    assert again == m or all(_same(m[k], again[k]) for k in m)


@pytest.mark.parametrize("change,why", [
    (dict(schedule="gpipe", routing="round-robin"), "fixed pipelines"),
    (dict(mtbf=100.0), "spot preemption"),
    (dict(restart_cost=1.0), "checkpoint and restart"),
    (dict(sync="allreduce", param_size=1.0), "all-reduce"),
    (dict(failure_distribution="weibull", failure_shape=0.7), "exponential up and down"),
    (dict(max_time=50.0), "max_time"),
    (dict(forward_time=0.0, backward_ratio=0.0), "positive forward times"),
    (dict(placement=(((("a",), ("b",)),) * 3, {"a": 0.1})), "placement"),
])
def test_refuses_what_it_does_not_model(change, why):
    """Each refused feature is named; auto stays on the DES; naming compiled is one ConfigError."""
    base = dict(stages=3, replicas=2, microbatches=4, steps=2, schedule="swarm", routing="queue",
                availability=0.9, sync="none")
    base.update(change)
    cfg = TrainingConfig(**base)
    reason = compiled_obstacle(cfg)
    assert reason is not None and why in reason
    assert select("training", cfg).name == "des"
    with pytest.raises(ConfigError, match="compiled: .*" + why):
        select("training", cfg, "compiled")


def test_auto_keeps_the_des_where_compiled_applies():
    """Its random numbers are its own, so auto does not move a seed's numbers."""
    cfg = TrainingConfig(stages=3, replicas=2, microbatches=4, steps=2, schedule="swarm",
                         routing="queue", sync="none")
    assert compiled_obstacle(cfg) is None
    assert select("training", cfg).name == "des"
    assert select("training", cfg, "compiled").name == "compiled"


def test_cli_engine_compiled_refusal(capsys):
    from sim.cli import main

    assert main(["train", "--schedule", "gpipe", "--engine", "compiled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fixed pipelines" in err[0]


@pytest.mark.slow
def test_cli_engine_compiled(capsys):
    from sim.cli import main

    argv = ["train", "--stages", "3", "--replicas", "2", "--microbatches-per-step", "4",
            "--steps", "2", "--schedule", "swarm", "--routing", "queue", "--sync", "none",
            "--replications", "2", "--json"]
    assert main([*argv, "--engine", "compiled"]) == 0
    assert '"engine": "compiled"' in capsys.readouterr().out


# --------------------------------------------------------------------------- exact references

SATURATED_POINTS = [
    (((1.0, 3.0), (2.0, 2.0, 2.0), (6.0,)), (1 / 3, 0.4, 1 / 3)),     # bottleneck stage 0
    (((1.0, 3.0), (2.0, 2.0, 2.0), (5.0,)), (1 / 3, 2.5 / 3, 1 / 3)),  # bottleneck stage 1
]


def _mean_se(values):
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


@pytest.mark.slow
@pytest.mark.parametrize("speeds,tf", SATURATED_POINTS)
def test_saturated_weighted_throughput(speeds, tf):
    """Async weighted routing saturates at min_j sum_i v_ij / w_j; equal shares are rejected."""
    # Exponential passes: the steady window's count/time estimator has an O(1/n) bias (its
    # ends are completions), which deterministic passes, whose spread is O(1/n) too, would
    # resolve at this precision; with random passes the spread is O(1/sqrt(n)).
    cfg = TrainingConfig(stages=3, speeds=speeds, forward_time=tf, microbatches=100, steps=100,
                         schedule="async", routing="weighted", pass_time_distribution="exponential")
    work = [3 * t for t in tf]
    exact = analytic.saturated_throughput(speeds, work)
    wrong = min(len(v) * min(v) / w for v, w in zip(speeds, work, strict=True))
    assert predictions("training", cfg)["throughput_steady"]["value"] == pytest.approx(exact)
    mean, se = _mean_se([compiled_training_model(cfg, Streams(2).replication(k))
                         ["throughput_steady"] for k in range(16)])
    assert 4 * se / exact < 0.01
    assert abs(mean - exact) <= 4 * se and abs(mean - wrong) > 4 * se


@pytest.mark.slow
@pytest.mark.parametrize("c,lam,wrong", [
    (1, 0.7, 1.0 + 0.7 / (2 * 0.3)),      # M/D/1
    (3, 2.4, 1.0 / (1.0 - 2.4 / 3)),      # three separate M/M/1 queues
])
def test_mmc_sojourn(c, lam, wrong):
    """One stage of c replicas, queue routing, Poisson arrivals: the Erlang C mean sojourn."""
    cfg = TrainingConfig(stages=1, replicas=c, microbatches=100, steps=200, schedule="async",
                         routing="queue", backward_ratio=0, pass_time_distribution="exponential",
                         arrival="poisson", arrival_rate=lam)
    exact = analytic.mmc_sojourn(c, lam, 1.0)
    mean, se = _mean_se([compiled_training_model(cfg, Streams(1).replication(k))
                         ["latency_mean"] for k in range(32)])
    assert 4 * se / exact < 0.05
    assert abs(mean - exact) <= 4 * se and abs(mean - wrong) > 4 * se


# --------------------------------------------------------------------------- against the DES

POINTS = {
    "swarm-queue": TrainingConfig(
        stages=8, replicas=3, microbatches=24, steps=3, schedule="swarm", routing="queue",
        availability=0.85, mean_downtime=10.0, detection_timeout=0.5, skip_budget=1,
        max_wait=3.0, sync="none"),
    "swarm-weighted-hetero": TrainingConfig(
        stages=6, replicas=3, microbatches=16, steps=10, schedule="swarm", routing="weighted",
        speed_spread=0.5, pass_time_distribution="exponential", availability=0.85,
        mean_downtime=5.0, domain_outage=0.05, domain_downtime=3.0, param_size=1.0,
        bandwidth=2.0, latency=0.2, detection_timeout=0.3, skip_budget=1, max_wait=2.0,
        sync="none", optimizer_time=0.5),
    "async-least-loaded": TrainingConfig(
        stages=6, replicas=(2, 3, 2, 3, 2, 3), microbatches=10, steps=6, schedule="async",
        routing="least-loaded", speeds=((1, 2), (1, 1, .5), (2, 1), (1, 1, 1), (.7, 1.3),
                                        (1, 2, 1)),
        availability=0.8, mean_downtime=4.0, detection_timeout=1.0, max_wait=math.inf,
        sync="none", param_size=0.5, bandwidth=1.0),
    "async-poisson-rr": TrainingConfig(
        stages=5, replicas=3, microbatches=10, steps=8, schedule="async", routing="round-robin",
        arrival="poisson", arrival_rate=0.6, pass_time_distribution="exponential",
        availability=0.9, mean_downtime=3.0, detection_timeout=0.2, skip_budget=2,
        skip_penalty=0.1, max_wait=1.0, sync="none"),
}
METRICS = ("training_time", "throughput", "step_time_mean", "latency_mean", "lost_passes",
           "recomputes", "skips", "waits", "drop_rate", "lost_stall", "lost_download",
           "utilisation", "bubble_fraction", "compute_utilisation")
REPS = 400


def _samples(fn, cfg, seed, reps=REPS):
    rows = [fn(cfg, Streams(seed).replication(k)) for k in range(reps)]
    return {m: np.array([r[m] for r in rows], dtype=float) for m in METRICS}


def _z(a, b):
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return (b.mean() - a.mean()) / se if se > 0 else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("point", list(POINTS))
def test_agrees_with_the_des(point):
    """Every metric's mean within 4 standard errors of the DES's (independent seeds)."""
    cfg = POINTS[point]
    des = _samples(training_model, cfg, 5)
    comp = _samples(compiled_training_model, cfg, 6)
    for m in ("training_time", "throughput", "step_time_mean"):
        v = des[m]
        assert 4 * v.std(ddof=1) / math.sqrt(v.size) / abs(v.mean()) < 0.05, m  # tight
    assert des["lost_passes"].mean() > 20  # failures matter here
    for m in METRICS:  # the table behind the figures in docs/training_engine.md (pytest -s)
        print(f"{point} {m}: des {des[m].mean():.5g} compiled {comp[m].mean():.5g} "
              f"z {_z(des[m], comp[m]):+.2f}")
    bad = {m: _z(des[m], comp[m]) for m in METRICS if abs(_z(des[m], comp[m])) > 4}
    assert not bad


@pytest.mark.slow
def test_a_wrong_model_is_rejected():
    """The same test rejects the compiled engine without the detection timeout."""
    cfg = dataclasses.replace(POINTS["swarm-queue"], detection_timeout=2.0)
    des = _samples(training_model, cfg, 5)
    wrong = _samples(compiled_training_model,
                     dataclasses.replace(cfg, detection_timeout=0.0), 6)
    z_wrong = _z(des["training_time"], wrong["training_time"])
    right = _samples(compiled_training_model, cfg, 6)
    z_right = _z(des["training_time"], right["training_time"])
    print(f"power: training_time z without the detection timeout {z_wrong:+.2f}, with {z_right:+.2f}")
    assert abs(z_wrong) > 4 and abs(z_right) <= 4


@pytest.mark.slow
def test_bench_compiled_rate_is_measured():
    """The bench's compiled rate is a real run's passes per CPU second."""
    from sim.bench.training import measure_compiled_pass_rate

    cfg = dataclasses.replace(PIN, speed_spread=0.0)
    res = measure_compiled_pass_rate(cfg, repeats=1)
    assert res["compiled_training_passes_per_s"] > 0 and res["compiled_training_passes"] > 0


@pytest.mark.slow
def test_bench_scale_point_runs_in_a_fresh_process():
    """The scale point (a few steps here) reports its steps, wall time and peak RSS."""
    from sim.bench.training import measure_scale

    scale = measure_scale(steps=3)
    assert scale["training_scale_steps"] == 3
    assert scale["training_scale_seconds"] > 0 and scale["training_scale_peak_mib"] > 0
    assert scale["training_scale_lost_passes"] >= 0
