"""1F1B in the frameworks' fixed order, interleaved 1F1B, blocking point-to-point: the engines
against the exact max-plus completion of the device programs."""

from __future__ import annotations

import numpy as np
import pytest

from sim import analytic
from sim.analytic.training import program_makespan
from sim.engines import predictions
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, TrainingSystem, training_model
from sim.training.compiled import compiled_obstacle
from sim.training.schedules import (
    deepspeed_program,
    device_program,
    interleaved_order,
    megatron_1f1b_order,
)

ISSUE = dict(stages=4, microbatches=6, steps=2, forward_time=(2.9, 0.6, 1.1, 1.8),
             backward_ratio=1.5)


def _step(cfg: TrainingConfig, seed: int = 0) -> float:
    return training_model(cfg, Streams(seed).replication(0))["step_time_mean"]


def test_issue_example_fixed_order_and_dynamic_rule():
    """Issue 22's example: 43.55 in the fixed order (max-plus), 52.30 under the dynamic rule."""
    tf = list(ISSUE["forward_time"])
    tb = [1.5 * t for t in tf]
    progs = [device_program("1f1b", 4, 6, j) for j in range(4)]
    exact = program_makespan(progs, tf, tb, [0.0] * 3, [0.0] * 3)
    assert exact == pytest.approx(43.55, abs=1e-9)
    assert _step(TrainingConfig(schedule="1f1b", **ISSUE)) == pytest.approx(exact, abs=1e-9)
    assert _step(TrainingConfig(schedule="1f1b-dynamic", **ISSUE)) == pytest.approx(52.30,
                                                                                   abs=1e-9)
    pred = predictions("training", TrainingConfig(schedule="1f1b", **ISSUE))["step_time_mean"]
    assert pred["value"] == pytest.approx(43.55, abs=1e-9)


def test_orders_follow_megatron_and_deepspeed():
    """Warm-up min(L - j - 1, m) forwards, alternation, cool-down; DeepSpeed computes the same order."""
    for L, m in [(4, 6), (4, 2), (1, 3), (6, 11)]:
        for j in range(L):
            order = megatron_1f1b_order(L, m, j)
            w = min(L - j - 1, m)
            assert [k for k, _ in order[:w]] == ["F"] * w
            assert sorted(i for k, i in order if k == "F") == list(range(m))
            held = peak = 0
            for k, _ in order:
                held += 1 if k == "F" else -1
                peak = max(peak, held)
            assert peak == min(L - j, m)
            ds = [(op[0], op[2]) for op in deepspeed_program(L, m, j) if op[0] in ("F", "B")]
            assert ds == order
    assert interleaved_order(2, 2, 2, 0)[:4] == [("F", 0, 0), ("F", 0, 1), ("F", 1, 0),
                                                 ("F", 1, 1)]


def _random_config(rng: np.random.Generator, schedule: str, p2p: str) -> TrainingConfig:
    L = int(rng.integers(2, 6))
    r = int(rng.integers(1, 4)) if not (schedule == "gpipe" and p2p == "overlap") else 1
    v = int(rng.integers(2, 4)) if schedule == "interleaved" else 1
    per = L * int(rng.integers(1, 3)) if schedule == "interleaved" else int(rng.integers(1, 9))
    lat = (float(rng.uniform(0, 0.4)) if schedule == "interleaved"
           else tuple(float(x) for x in rng.uniform(0, 0.4, L - 1)))
    return TrainingConfig(stages=L, replicas=r, microbatches=r * per, steps=2, schedule=schedule,
                          forward_time=tuple(float(x) for x in rng.uniform(0.1, 3.0, L)),
                          backward_times=tuple(float(x) for x in rng.uniform(0.1, 4.0, L)),
                          latency=lat, p2p=p2p, virtual_stages=v, sync="none",
                          speeds=tuple(tuple(float(x) for x in rng.uniform(0.5, 2.0, r))
                                       for _ in range(L)))


@pytest.mark.parametrize("schedule,p2p,n", [
    ("1f1b", "overlap", 20), ("1f1b", "blocking", 20), ("interleaved", "overlap", 6),
    ("gpipe", "blocking", 4),
    pytest.param("interleaved", "overlap", 40, marks=pytest.mark.slow),
    pytest.param("gpipe", "blocking", 40, marks=pytest.mark.slow)])
def test_engines_exact_against_max_plus(schedule, p2p, n):
    """Random unequal configurations (stage times, backward times, speeds, transfer times,
    pipelines): the engine's step time and bubble equal the max-plus completion of its programs."""
    rng = np.random.default_rng({"1f1b": 11, "interleaved": 12, "gpipe": 13}[schedule]
                                + (p2p == "blocking") + 7 * (n > 20))
    for _ in range(n):
        cfg = _random_config(rng, schedule, p2p)
        pred = predictions("training", cfg)
        assert pred["step_time_mean"]["reference"] == "schedule"
        out = training_model(cfg, Streams(1).replication(0))
        assert out["step_time_mean"] == pytest.approx(pred["step_time_mean"]["value"], abs=1e-9)
        assert out["bubble_fraction"] == pytest.approx(pred["bubble_fraction"]["value"],
                                                       abs=1e-9)


def test_dynamic_rule_and_overlapped_transfers_are_other_models():
    """The neighbouring models fail the same check: the dynamic rule, and overlapped transfers
    where DeepSpeed blocks."""
    rng = np.random.default_rng(11)
    worse = 0
    for _ in range(20):
        cfg = _random_config(rng, "1f1b", "overlap")
        dyn = TrainingConfig(**{**cfg.__dict__, "schedule": "1f1b-dynamic"})
        worse += abs(_step(dyn, 1) - predictions("training", cfg)["step_time_mean"]["value"]) > 1e-6
    assert worse >= 5
    cfg = TrainingConfig(**{**ISSUE, "latency": 0.5, "schedule": "1f1b"})
    blocking = TrainingConfig(**{**cfg.__dict__, "p2p": "blocking"})
    assert _step(blocking) > _step(cfg) + 1.0


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 3, 8), (2, 2, 6), (8, 2, 16), (3, 4, 3)])
def test_interleaved_bubble_exact(p, v, m):
    """Equal stages, no transfer: T = (m + (p - 1)/v)(t_f + t_b), bubble ratio (p - 1)/(v m)."""
    cfg = TrainingConfig(stages=p, microbatches=m, steps=3, schedule="interleaved",
                         virtual_stages=v, forward_time=1.0, backward_ratio=2.0)
    sysm = TrainingSystem(cfg, Streams(0).replication(0))
    sysm.run()
    ideal = m * 3.0
    for T in sysm.trainer.step_times:
        assert (T - ideal) / ideal == pytest.approx(analytic.interleaved_bubble_ratio(p, v, m),
                                                    abs=1e-12)
    if v > 1:  # one chunk per device is the plain 1F1B bubble, (p - 1)/m: more
        assert (sysm.trainer.step_times[0] - ideal) / ideal < (p - 1) / m - 1e-9


def test_fixed_order_in_flight_and_failures_finish():
    """1F1B holds min(L - j, m) at stage j; with failures the fixed order yields to recovery and
    every run ends; a framework run with failures restarts from its checkpoint."""
    cfg = TrainingConfig(stages=5, microbatches=3, steps=2, schedule="1f1b")
    sysm = TrainingSystem(cfg, Streams(0).replication(0))
    sysm.run()
    assert [st[0].peak_in_flight for st in sysm.flow.stages] == [3, 3, 3, 2, 1]
    for seed in range(4):
        m = training_model(TrainingConfig(
            stages=4, replicas=2, microbatches=8, steps=4, schedule="1f1b",
            forward_time=(2.0, 0.5, 1.0, 1.5), availability=0.9, mean_downtime=5.0,
            detection_timeout=0.5, skip_budget=1, max_wait=5.0, latency=0.1), Streams(seed).replication(0))
        assert m["finished"] == 1.0 and m["recomputes"] + m["skips"] > 0
        m = training_model(TrainingConfig(
            stages=3, replicas=2, microbatches=6, steps=3, schedule="1f1b", p2p="blocking",
            forward_time=(2.0, 0.5, 1.0), mtbf=200.0, replace_time=3.0, restart_cost=2.0,
            checkpoint_every=1, checkpoint_cost=0.5, latency=0.2), Streams(seed).replication(0))
        assert m["finished"] == 1.0 and m["restarts"] == m["preemptions"]


def test_framework_configs_refuse_what_they_do_not_model():
    """One line each: skipping, failures without a restart model, blocking swarm, bad splits."""
    with pytest.raises(ConfigError, match="'skip_budget' must be 0 with p2p blocking"):
        TrainingConfig(schedule="1f1b", p2p="blocking", skip_budget=1)
    with pytest.raises(ConfigError, match="'p2p' must be overlap unless schedule is gpipe or 1f1b"):
        TrainingConfig(schedule="swarm", routing="queue", p2p="blocking")
    with pytest.raises(ConfigError, match="'microbatches' must be a multiple of stages x replicas"):
        TrainingConfig(schedule="interleaved", stages=4, microbatches=6, virtual_stages=2)
    with pytest.raises(ConfigError, match="'virtual_stages' must be 1 unless schedule is interleaved"):
        TrainingConfig(schedule="1f1b", virtual_stages=2)
    with pytest.raises(ConfigError, match="'backward_ratio' must be left at its default"):
        TrainingConfig(backward_ratio=1.0, backward_times=(1.0,) * 4)
    cfg = TrainingConfig(schedule="swarm", routing="queue", backward_times=2.0)
    assert cfg.backward_time == (2.0,) * 4
    assert compiled_obstacle(cfg) in ("per-stage backward times run on the DES",
                                      "needs numba (pip install 'dtsim[fast]')")


@pytest.mark.parametrize("schedule,p2p,r", [("1f1b", "blocking", 2), ("1f1b", "overlap", 2),
                                            ("interleaved", "overlap", 2),
                                            ("gpipe", "blocking", 2)])
def test_step_tail_sync_and_optimizer_exact(schedule, p2p, r):
    """The ring all-reduce among the pipelines and the optimizer step close the step exactly."""
    cfg = TrainingConfig(stages=3, replicas=r, microbatches=6 * r, steps=2, schedule=schedule,
                         forward_time=(1.0, 2.0, 0.5), p2p=p2p, latency=0.1, param_size=5.0,
                         bandwidth=2.0, optimizer_time=0.3,
                         virtual_stages=2 if schedule == "interleaved" else 1)
    pred = predictions("training", cfg)["step_time_mean"]["value"]
    assert _step(cfg) == pytest.approx(pred, abs=1e-9)
    no_sync = TrainingConfig(**{**cfg.__dict__, "sync": "none"})
    assert _step(no_sync) < pred - 1.0  # 2 (r - 1)(0.1 + 5 / (2 r)) = 2.7 of it is the ring
