"""Tests of sim.gossip.engines: gossip's engines and references answer through sim.engines."""

from __future__ import annotations

import numpy as np
import pytest

from sim import analytic, engines
from sim.errors import ConfigError
from sim.gossip import (
    AsyncGossip,
    CompiledAsync,
    EdgeGossip,
    GossipConfig,
    GossipSystem,
    MatchingDES,
    MatchingVector,
    gossip_model,
    gossip_predictions,
)
from sim.gossip.compiled import HAVE_NUMBA
from sim.rng import Streams

_NUMBA = pytest.mark.skipif(not HAVE_NUMBA, reason="needs the fast extra (numba)")

_EDGE_DES = "edge: single-pair steps are simulated one at a time in order (there is no vectorised engine)"
_EDGE_COMPILED = ("edge: compiled edge steps: the DES engine's draws and arithmetic, bit for bit, "
                  "at machine speed")
_AUTO = ("auto: matching rounds are synchronous, so the vectorised engine computes the same rounds "
         "as the per-node DES (same matching, noise, adversaries, clipping and round time)")


@pytest.mark.parametrize(("kw", "engine", "reason"), [
    (dict(), "vector", _AUTO),
    (dict(engine="vector"), "vector", "requested: engine vector"),
    (dict(engine="des"), "des", "requested: engine des"),
    (dict(protocol="edge"), "compiled" if HAVE_NUMBA else "des",
     _EDGE_COMPILED if HAVE_NUMBA else _EDGE_DES),
    (dict(protocol="edge", engine="des"), "des", _EDGE_DES),
    pytest.param(dict(protocol="async"), "compiled",
                 "async: compiled event loop: the async law (Poisson clocks, exchanges in flight, "
                 "churn) at machine speed, with its own random numbers", marks=_NUMBA),
    (dict(protocol="async", engine="des"), "des",
     "async: every node a SimPy process on its Poisson clock, exchanges in flight, churn "
     "(any strategy, including a user's own)"),
])
def test_engine_and_reason_text(kw, engine, reason):
    """The engine chosen and the sentence dtsim gossip prints, exactly."""
    cfg = GossipConfig(**kw)
    assert cfg.resolved_engine == engine
    assert cfg.engine_reason == reason
    assert engines.select("gossip", cfg, cfg.engine).name == engine


@pytest.mark.parametrize(("kw", "cls"), [
    (dict(), MatchingVector), (dict(engine="des"), MatchingDES),
    (dict(protocol="edge", engine="des"), EdgeGossip),
    (dict(protocol="async", engine="des"), AsyncGossip),
    pytest.param(dict(protocol="async"), CompiledAsync, marks=_NUMBA),
])
def test_system_class_follows_the_selected_engine(kw, cls):
    """GossipSystem(config, streams) builds the class of the engine sim.engines selects."""
    assert type(GossipSystem(GossipConfig(**kw), Streams(0))) is cls


def test_vector_refused_outside_matching_names_the_rule():
    """The vector engine does not answer edge configs, and select() says why."""
    cfg = GossipConfig(protocol="edge")
    vector = next(e for e in engines.engines("gossip") if e.name == "vector")
    verdict = vector.applies(cfg)
    assert not verdict and "no vectorised engine" in verdict.reason
    with pytest.raises(ConfigError) as e:
        engines.select("gossip", cfg, "vector")
    assert ("use compiled" if HAVE_NUMBA else "use des") in str(e.value)


def test_registered_engine_runs_the_model():
    """Engine.run is one replication of gossip_model."""
    cfg = GossipConfig(nodes=8, rounds=5)
    eng = engines.select("gossip", cfg).engine
    a, b = eng.run(cfg, Streams(4).replication(0)), gossip_model(cfg, Streams(4).replication(0))
    np.testing.assert_array_equal(a["disagreement"], b["disagreement"])
    scalars = {k for k, v in a.items() if np.ndim(v) == 0}
    assert scalars <= set(eng.metrics)  # every scalar metric it returns is declared


def test_predictions_come_from_the_registered_references():
    """The capture law applies to one stubborn node on the complete graph; the notes say why others do not."""
    cfg = GossipConfig(nodes=10, protocol="edge", adversary="stubborn", rounds=20)
    table = engines.predictions("gossip", cfg)
    assert table["predicted_capture_rate"]["reference"] == "capture"
    assert table["predicted_capture_rate"]["value"] == analytic.capture_rate(10)
    assert table["creep_bound"]["value"] is None and "fixed clip" in table["creep_bound"]["note"]
    pred = gossip_predictions(cfg)
    assert list(pred) == ["predicted_capture_rate", "predicted_honest_mean"]
    for m in pred:
        np.testing.assert_array_equal(pred[m], table[m]["value"])
    t = cfg.record_steps().astype(float)
    np.testing.assert_array_equal(pred["predicted_honest_mean"],
                                  10.0 + (0.0 - 10.0) * analytic.capture_rate(10) ** t)


def test_sparse_stubborn_mean_uses_the_exact_recursion():
    """Stubborn nodes on a ring with edge: the first-moment recursion of sim.analytic, series by series."""
    cfg = GossipConfig(topology="ring:n=12", protocol="edge", adversary="stubborn", rounds=30,
                       record_every=10)
    hm = analytic.stubborn_honest_mean(cfg.network_graph, {0: cfg.value}, 0.0, 30, record_every=10)
    np.testing.assert_array_equal(gossip_predictions(cfg)["predicted_honest_mean"], np.asarray(hm, dtype=float))


def test_gossip_model_says_which_engine_ran():
    """gossip_model records the engine sim.engines.select chose (vector for matching) or the named one."""
    import numpy as np

    import sim

    auto = sim.replicate(sim.gossip_model, sim.GossipConfig(nodes=10), replications=2, seed=1)
    des = sim.replicate(sim.gossip_model, sim.GossipConfig(nodes=10, engine="des"), replications=2,
                        seed=1)
    assert [r["engine"] for r in auto] == ["vector"] * 2 and [r["engine"] for r in des] == ["des"] * 2
    edge = sim.replicate(sim.gossip_model, sim.GossipConfig(nodes=10, protocol="edge", rounds=5),
                         replications=1, seed=1)
    assert edge[0]["engine"] == sim.engines.select("gossip", sim.GossipConfig(
        nodes=10, protocol="edge", rounds=5)).name
    assert np.isfinite(auto[0]["final_disagreement"])
