"""The compiled async engine simulates the SimPy async engine's law (latency, churn, attacks)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim import engines
from sim.errors import ConfigError
from sim.gossip import GossipConfig, gossip_model
from sim.gossip.compiled import HAVE_NUMBA
from sim.rng import Streams

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="needs the fast extra (numba)")

REPS = 160


def _stats(cfg: GossipConfig, engine: str, seed: int, key: str, at: int) -> tuple[float, float]:
    cfg = dataclasses.replace(cfg, engine=engine)
    vals = []
    for k in range(REPS):
        m = gossip_model(cfg, Streams(seed).replication(k))
        series = m[key] if key != "honest_mean" else m[key][:, 0]
        vals.append(float(series[at]) if key != "disagreement" else
                    float(series[at] / series[0]))
    v = np.array(vals)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


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


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_matches_the_simpy_engine(case):
    """Mean of a recorded quantity agrees with the SimPy engine's within 4 standard errors."""
    kw, key, at = CASES[case]
    cfg = GossipConfig(**kw)
    m1, s1 = _stats(cfg, "des", 101, key, at)
    m2, s2 = _stats(cfg, "compiled", 202, key, at)
    assert abs(m1 - m2) <= 4 * math.hypot(s1, s2), (case, m1, m2, s1, s2)


def test_the_cross_check_can_fail():
    """Dropping the latency moves E[D(3)]/D(0) far outside the tolerance: the test has power."""
    kw, key, at = CASES["latency"]
    m1, s1 = _stats(GossipConfig(**kw), "des", 101, key, at)
    m2, s2 = _stats(GossipConfig(**kw, latency=0.0), "compiled", 202, key, at)
    assert abs(m1 - m2) > 6 * math.hypot(s1, s2)


def test_seeded_value_is_pinned():
    """A fixed seed gives a fixed number (regression pin of the compiled loop)."""
    cfg = GossipConfig(topology="ring:n=16", protocol="async", rounds=5, engine="compiled",
                       adversary="stubborn", num_adversaries=1, adversary_value=2.0)
    a = gossip_model(cfg, Streams(7).replication(0))
    b = gossip_model(cfg, Streams(7).replication(0))
    assert a["disagreement"].tolist() == b["disagreement"].tolist()
    assert a["exchanges"] == PINNED_EXCHANGES
    assert a["final_disagreement"] == pytest.approx(PINNED_D, rel=1e-12)


def test_compiled_is_named_not_automatic_and_explains_refusals():
    """auto keeps the SimPy engine; compiled refuses adaptive clipping and other protocols."""
    cfg = GossipConfig(nodes=20, protocol="async", rounds=2)
    assert engines.select("gossip", cfg).name == "des"
    with pytest.raises(ConfigError, match="compiled: defence AdaptiveClip has no fixed radius"):
        GossipConfig(nodes=20, protocol="async", rounds=2, engine="compiled",
                     adversary="alie", num_adversaries=1, adaptive_clip=True)
    with pytest.raises(ConfigError,
                       match="compiled: runs the async and edge protocols only, not neighbourhood"):
        GossipConfig(nodes=20, protocol="neighbourhood", rounds=2, engine="compiled")


PINNED_EXCHANGES = 59
PINNED_D = 4.228919524344501
