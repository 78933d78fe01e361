"""The compiled async engine simulates the SimPy async engine's law (latency, churn, attacks,
adaptive clipping, trace churn, local training), and auto picks it where it answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim import engines
from sim.analytic.learning import async_training_mean
from sim.errors import ConfigError
from sim.gossip import GossipConfig, gossip_model
from sim.gossip import compiled as compiled_mod
from sim.gossip.compiled import HAVE_NUMBA
from sim.learning import (
    GossipTrainingConfig,
    LearningConfig,
    gossip_training_model,
    training_engine,
    training_objective,
)
from sim.rng import Streams
from sim.traces import TraceReplay, load_trace, trace_stats

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="needs the fast extra (numba)")

REPS = 160


def _values(cfg: GossipConfig, engine: str, seed: int, key: str, at: int,
            reps: int = REPS) -> np.ndarray:
    cfg = dataclasses.replace(cfg, engine=engine)
    vals = []
    for k in range(reps):
        m = gossip_model(cfg, Streams(seed).replication(k))
        series = m[key] if key != "honest_mean" else m[key][:, 0]
        vals.append(float(series[at]) if key != "disagreement" else
                    float(series[at] / series[0]))
    return np.array(vals)


def _stats(cfg: GossipConfig, engine: str, seed: int, key: str, at: int,
           reps: int = REPS) -> tuple[float, float]:
    v = _values(cfg, engine, seed, key, at, reps)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def _gcp(downtime: float = 2.0) -> TraceReplay:
    """gcp-a100 (the burstiest shipped trace), looped from a random start, mean down time scaled."""
    mean_down = trace_stats(load_trace("gcp-a100"))["mean_down"]
    return TraceReplay("gcp-a100", policy="random", loop=True, resample="offset",
                       speedup=mean_down / downtime)


CASES = {
    "latency": (dict(topology="complete", nodes=20, protocol="async", rounds=4, record_every=1,
                     size=0.0), "disagreement", 3),
    "churn": (dict(topology="complete", nodes=20, protocol="async", rounds=4, record_every=1,
                   availability=0.6, mean_downtime=0.5), "disagreement", 4),
    "stubborn-ring": (dict(topology="ring:n=16", protocol="async", rounds=12, record_every=4,
                           adversary="stubborn", num_adversaries=1, adversary_value=3.0),
                      "honest_mean", 3),
    "alie-clip": (dict(topology="complete", nodes=20, protocol="async", rounds=4, record_every=2,
                       adversary="alie", num_adversaries=2, clip=0.5, noise=0.2),
                  "disagreement", 2),
}

#: The newer pieces, each cross-checked more tightly (slow): adaptive clipping under attack,
#: churn replayed from a trace.
SLOW_CASES = {
    "adaptive-dissensus-ring": (dict(topology="ring:n=16", protocol="async", rounds=6,
                                     record_every=3, adversary="dissensus", adversary_nodes=(0, 8),
                                     adversary_value=3.0, adaptive_clip=True, latency=0.3),
                                "disagreement", 2),
    "adaptive-alie": (dict(topology="complete", nodes=20, protocol="async", rounds=4,
                           record_every=2, adversary="alie", num_adversaries=2, adaptive_clip=True,
                           noise=0.2, adversary_value=3.0), "disagreement", 2),
    "trace-gcp": (dict(topology="complete", nodes=64, protocol="async", rounds=4, record_every=2,
                       latency=0.0), "disagreement", 2),
}


def _case(kw: dict) -> GossipConfig:
    return GossipConfig(**kw, **({"failure_trace": _gcp()} if kw.get("nodes") == 64 else {}))


#: Left to the slow run: the stubborn ring, whose compiled run the default suite pins
#: (test_seeded_value_is_pinned) and whose law it checks on the exact capture rate
#: (test_gossip_kernel.py::test_stubborn_node_captures_the_honest_mean_at_the_exact_rate).
SLOW_REPEATS = ("stubborn-ring",)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_REPEATS
                                  else c for c in sorted(CASES)])
def test_compiled_matches_the_simpy_engine(case):
    """Mean of a recorded quantity agrees with the SimPy engine's within 4 standard errors."""
    kw, key, at = CASES[case]
    cfg = GossipConfig(**kw)
    m1, s1 = _stats(cfg, "des", 101, key, at)
    m2, s2 = _stats(cfg, "compiled", 202, key, at)
    assert abs(m1 - m2) <= 4 * math.hypot(s1, s2), (case, m1, m2, s1, s2)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SLOW_CASES))
def test_new_pieces_match_the_simpy_engine(case):
    """Adaptive clipping under attack and trace churn: E[log D(t)/D(0)] of compiled and SimPy agree
    within 4 SE (400 runs; on the log scale, since under dissensus D(t)/D(0) is heavy-tailed on
    both engines, with single runs past 100)."""
    kw, key, at = SLOW_CASES[case]
    cfg = _case(kw)
    a = np.log(_values(cfg, "des", 101, key, at, reps=400))
    b = np.log(_values(cfg, "compiled", 202, key, at, reps=400))
    se = math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(a.size)
    assert abs(a.mean() - b.mean()) <= 4 * se, (case, a.mean(), b.mean(), se)


def test_the_cross_check_can_fail():
    """Dropping the latency moves E[D(3)]/D(0) far outside the tolerance: the test has power."""
    kw, key, at = CASES["latency"]
    m1, s1 = _stats(GossipConfig(**kw), "des", 101, key, at)
    m2, s2 = _stats(GossipConfig(**kw, latency=0.0), "compiled", 202, key, at)
    assert abs(m1 - m2) > 6 * math.hypot(s1, s2)


@pytest.mark.slow
def test_the_new_cross_checks_can_fail():
    """Wrong models are rejected: no clip instead of the adaptive radius, exponential churn
    (same availability and mean down time) instead of the trace."""
    kw, key, at = SLOW_CASES["adaptive-dissensus-ring"]
    # without the clip D(t)/D(0) is heavy-tailed, so compare the laws on log D(t)/D(0)
    a = np.log(_values(GossipConfig(**kw), "des", 101, key, at, reps=400))
    b = np.log(_values(GossipConfig(**dict(kw, adaptive_clip=False)), "compiled", 202, key, at,
                       reps=400))
    se = math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(a.size)
    assert abs(a.mean() - b.mean()) > 4 * se, (a.mean(), b.mean(), se)
    kw, key, at = SLOW_CASES["trace-gcp"]
    m1, s1 = _stats(_case(kw), "des", 101, key, at, reps=400)
    a = trace_stats(load_trace("gcp-a100"))["availability"]
    expo = GossipConfig(**kw, availability=a, mean_downtime=2.0)
    m2, s2 = _stats(expo, "compiled", 202, key, at, reps=400)
    assert abs(m1 - m2) > 4 * math.hypot(s1, s2), (m1, m2)


@pytest.mark.slow
def test_trace_churn_over_several_trace_periods():
    """aws-p3 looped with a period of 4 time units over 12 (change times loaded in three chunks):
    E[log D(12)/D(0)] and E[exchanges] agree between engines within 4 SE (300 runs); without the
    churn the exchange count is rejected."""
    rep = TraceReplay("aws-p3", policy="random", loop=True, resample="offset",
                      speedup=40920.0 / 4)
    kw = dict(topology="complete", nodes=32, protocol="async", rounds=12, record_every=4,
              latency=0.0)

    def stats(cfg, engine, seed):
        c = dataclasses.replace(cfg, engine=engine)
        ms = [gossip_model(c, Streams(seed).replication(k)) for k in range(300)]
        return (np.array([math.log(m["disagreement"][3] / m["disagreement"][0]) for m in ms]),
                np.array([m["exchanges"] for m in ms], dtype=float))

    trace = GossipConfig(**kw, failure_trace=rep)
    (l1, e1), (l2, e2) = stats(trace, "des", 1), stats(trace, "compiled", 2)
    _, e3 = stats(GossipConfig(**kw), "compiled", 3)
    for a, b in ((l1, l2), (e1, e2)):
        se = math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(a.size)
        assert abs(a.mean() - b.mean()) <= 4 * se, (a.mean(), b.mean(), se)
    se = math.hypot(e1.std(ddof=1), e3.std(ddof=1)) / math.sqrt(e1.size)
    assert abs(e1.mean() - e3.mean()) > 4 * se


# --------------------------------------------------------------------------- training

#: Async training with one stubborn node and instant exchanges (the exact first moment applies).
TRAIN = dict(topology="complete", nodes=10, protocol="async", rounds=4, record_every=1,
             latency=0.0, adversary="stubborn", num_adversaries=1, adversary_value=4.0,
             init_std=0.0)
LEARN = LearningConfig(objective="quadratic", lr=0.2, grad_noise=0.5, curvature_spread=0.5,
                       optimum_spread=1.0, step_time=(0.37,))


def _train_means(engine: str, seed: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    tc = GossipTrainingConfig(GossipConfig(**TRAIN, engine=engine), LEARN)
    v = np.array([gossip_training_model(tc, Streams(seed).replication(k))["honest_mean"][:, 0]
                  for k in range(reps)])
    return v.mean(axis=0), v.std(axis=0, ddof=1) / math.sqrt(reps)


def _exact(step_time: float = 0.37, wake_rate: float = 1.0) -> np.ndarray:
    obj = training_objective(GossipTrainingConfig(GossipConfig(**TRAIN), LEARN))
    ex = async_training_mean(obj.curvature, obj.centres, LEARN.lr, step_time, [0, 1, 2, 3, 4],
                             stubborn={0: 4.0}, wake_rate=wake_rate)
    return ex.mean(axis=1)[:, 0]


@pytest.mark.slow
def test_training_matches_the_exact_async_first_moment():
    """Both engines' E[honest mean](t), t = 1..4, match async_training_mean within 4 SE (2000 runs);
    half the local steps, or exchanges at twice the rate, are rejected."""
    exact = _exact()
    for engine, seed in (("des", 31), ("compiled", 32)):
        m, se = _train_means(engine, seed, 2000)
        assert np.all(np.abs(m[1:] - exact[1:]) <= 4 * se[1:]), (engine, m, exact, se)
        for wrong in (_exact(step_time=0.74), _exact(wake_rate=2.0)):
            assert np.max(np.abs(m[1:] - wrong[1:]) / se[1:]) > 4, (engine, m, wrong)


def test_training_compiled_against_the_exact_first_moment_quick():
    """The compiled engine's E[honest mean](4) is within 4 SE of the exact value (300 runs), and
    a doubled exchange rate is rejected."""
    m, se = _train_means("compiled", 33, 300)
    exact, wrong = _exact(), _exact(wake_rate=2.0)
    assert abs(m[4] - exact[4]) <= 4 * se[4], (m, exact, se)
    assert abs(m[4] - wrong[4]) > 4 * se[4]


@pytest.mark.slow
def test_training_with_latency_matches_the_simpy_engine():
    """With exchanges in flight on a ring and gradient noise, consensus distance and the honest
    mean agree between engines within 4 SE (400 runs)."""
    g = dict(topology="ring:n=12", protocol="async", rounds=6, record_every=3, latency=0.3,
             dim=2, noise=0.1)
    lc = LearningConfig(objective="quadratic", lr=0.3, grad_noise=1.0, curvature_spread=0.5,
                        step_time=(0.25,) * 6 + (0.5,) * 6)
    out = {}
    for engine, seed in (("des", 41), ("compiled", 42)):
        tc = GossipTrainingConfig(GossipConfig(**g, engine=engine), lc)
        runs = [gossip_training_model(tc, Streams(seed).replication(k)) for k in range(400)]
        out[engine] = {key: np.array([r[key][-1] if key != "honest_mean" else r[key][-1, 0]
                                      for r in runs])
                       for key in ("consensus_distance", "honest_mean")}
    for key in ("consensus_distance", "honest_mean"):
        a, b = out["des"][key], out["compiled"][key]
        se = math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(a.size)
        assert abs(a.mean() - b.mean()) <= 4 * se, (key, a.mean(), b.mean(), se)


def test_logistic_training_stays_on_the_simpy_engine():
    """Softmax regression has no compiled form: auto runs the SimPy engine and says why; naming
    compiled is refused before any work."""
    pytest.importorskip("sklearn")
    from sim.learning import with_learning

    lc = LearningConfig(objective="logistic", data="iris", lr=0.1, step_time=(1.0,))
    tc = with_learning(GossipConfig(topology="complete", nodes=8, protocol="async", rounds=2), lc)
    name, why = training_engine(tc)
    assert name == "des"
    assert "compiled: node update LocalSGD has no compiled form" in why
    quad = GossipTrainingConfig(GossipConfig(topology="complete", nodes=8, protocol="async", rounds=2),
                          LEARN)
    assert training_engine(quad)[0] == "compiled"
    with pytest.raises(ConfigError) as e:
        with_learning(GossipConfig(topology="complete", nodes=8, protocol="async", rounds=2,
                                   engine="compiled"), lc)
    assert str(e.value) == ("'engine' must be des or auto for objective logistic (compiled: local "
                            "steps are compiled on quadratic objectives only): 'compiled'")


# --------------------------------------------------------------------------- pins and selection


def test_seeded_value_is_pinned():
    """A fixed seed gives a fixed number (regression pin of the compiled loop)."""
    cfg = GossipConfig(topology="ring:n=16", protocol="async", rounds=5, engine="compiled",
                       adversary="stubborn", num_adversaries=1, adversary_value=2.0)
    a = gossip_model(cfg, Streams(7).replication(0))
    b = gossip_model(cfg, Streams(7).replication(0))
    assert a["disagreement"].tolist() == b["disagreement"].tolist()
    assert a["exchanges"] == PINNED_EXCHANGES
    assert a["final_disagreement"] == pytest.approx(PINNED_D, rel=1e-12)


def test_seeded_values_of_the_new_pieces_are_pinned():
    """Adaptive clipping under dissensus, trace churn and local training: fixed seeds, fixed numbers."""
    kw, _, _ = SLOW_CASES["adaptive-dissensus-ring"]
    a = gossip_model(GossipConfig(**kw, engine="compiled"), Streams(7).replication(0))
    t = gossip_model(dataclasses.replace(_case(SLOW_CASES["trace-gcp"][0]), engine="compiled"),
                     Streams(7).replication(0))
    tc = GossipTrainingConfig(GossipConfig(**TRAIN, engine="compiled"), LEARN)
    r = gossip_training_model(tc, Streams(7).replication(0))
    got = (a["exchanges"], a["final_disagreement"], t["exchanges"], t["final_disagreement"],
           r["exchanges"], r["local_steps"], float(r["honest_mean"][-1, 0]))
    assert got[0] == PIN_NEW[0] and got[2] == PIN_NEW[2] and got[4:6] == PIN_NEW[4:6], got
    np.testing.assert_allclose([got[1], got[3], got[6]], [PIN_NEW[1], PIN_NEW[3], PIN_NEW[6]],
                               rtol=1e-12)


def test_auto_picks_compiled_for_async_and_explains_refusals():
    """auto runs async on the compiled engine; compiled refuses other protocols and user strategies."""
    cfg = GossipConfig(nodes=20, protocol="async", rounds=2)
    assert engines.select("gossip", cfg).name == "compiled"
    assert cfg.resolved_engine == "compiled"
    adaptive = GossipConfig(nodes=20, protocol="async", rounds=2, engine="compiled",
                            adversary="alie", num_adversaries=1, adaptive_clip=True)
    assert adaptive.resolved_engine == "compiled"
    assert GossipConfig(nodes=20, protocol="async", rounds=2, engine="des").resolved_engine == "des"
    with pytest.raises(ConfigError,
                       match="compiled: runs the async and edge protocols only, not neighbourhood"):
        GossipConfig(nodes=20, protocol="neighbourhood", rounds=2, engine="compiled")


def test_without_numba_auto_falls_back_and_says_so(monkeypatch):
    """Where numba is missing, auto runs the SimPy engine and the printed reason says why."""
    monkeypatch.setattr(compiled_mod, "HAVE_NUMBA", False)
    cfg = GossipConfig(nodes=20, protocol="async", rounds=2)
    assert cfg.resolved_engine == "des"
    assert cfg.engine_reason.endswith("(compiled: needs numba (pip install 'dtsim[fast]'))")


PINNED_EXCHANGES = 59
PINNED_D = 4.228919524344501
PIN_NEW = (73, 13.934937727028691, 223, 4.009908478530848, 47, 90, 1.072579067076816)
