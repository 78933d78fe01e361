"""Gossip exchanges as flows that share links and NICs (GossipConfig.contention, nic)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.analytic import network as exact
from sim.engines import select
from sim.errors import ConfigError
from sim.gossip.config import GossipConfig
from sim.gossip.model import gossip_model
from sim.rng import Streams


def test_neighbourhood_round_on_a_star_is_limited_by_the_hub_nic():
    """A round on a star: the hub sends and receives n-1 messages: l + (n-1) S / B_hub."""
    n, S, B, lat, rounds = 7, 2.0, 4.0, 0.1, 5
    cfg = GossipConfig(topology=f"star:n={n},latency={lat}", protocol="neighbourhood",
                       rounds=rounds, size=S, nic=B)
    out = gossip_model(cfg, Streams(0))
    per_round = exact.star_exchange_time(n - 1, S, B, lat)
    assert out["sim_time"] == pytest.approx(rounds * per_round, rel=1e-12)
    assert per_round > lat + S / B  # an exchange alone would be n-1 times faster


def test_async_exchanges_at_a_busy_hub_cannot_exceed_its_nic():
    """Async on a star: every exchange moves S through the hub's NIC, so at most B T / S finish."""
    n, S, B, T = 9, 1.0, 2.0, 12.0
    base = dict(topology=f"star:n={n},latency=0.05,bandwidth=100", protocol="async",
                rounds=T, size=S, wake_rate=1.0, engine="des")
    shared = gossip_model(GossipConfig(**base, nic=B), Streams(3))
    alone = gossip_model(GossipConfig(**base, contention=False), Streams(3))
    assert shared["exchanges"] <= B * T / S
    assert alone["exchanges"] > 1.5 * B * T / S  # no sharing: the wakes' rate (about n per unit)


def test_nothing_finite_gives_the_same_numbers_with_contention_on_and_off():
    """Infinite links and no NIC: contention on and off give the same numbers, bit for bit."""
    for proto, rounds in (("async", 8.0), ("matching", 10), ("neighbourhood", 6)):
        base = GossipConfig(topology="ring:n=10,latency=0.3", protocol=proto, rounds=rounds,
                            noise=0.5, engine="des")
        on = gossip_model(base, Streams(9))
        off = gossip_model(dataclasses.replace(base, contention=False), Streams(9))
        assert on.keys() == off.keys()
        for k in on:
            a, b = np.asarray(on[k]), np.asarray(off[k])
            same = np.array_equal(a, b, equal_nan=a.dtype.kind == "f") if a.dtype.kind in "fiub" \
                else on[k] == off[k]
            assert same, k


def test_matching_rounds_as_flows_take_the_nic_time():
    """Matching DES with NICs: a round lasts l + S / min(link, NIC) (one exchange per node)."""
    cfg = GossipConfig(topology="ring:n=8,latency=0.2,bandwidth=10", protocol="matching",
                       rounds=4, size=3.0, nic=2.0)
    out = gossip_model(cfg, Streams(1))
    assert out["sim_time"] == pytest.approx(4 * (0.2 + 3.0 / 2.0), rel=1e-12)


def test_engines_leave_contention_to_the_des():
    """Vector matching and the compiled async loop refuse shared exchanges; auto picks the DES."""
    m = GossipConfig(topology="ring:n=8,bandwidth=10", protocol="matching", rounds=4, nic=2.0)
    assert select("gossip", m).name == "des"
    a = GossipConfig(topology="ring:n=8,bandwidth=10", protocol="async", rounds=4.0, nic=2.0)
    assert select("gossip", a).name == "des"
    with pytest.raises(ConfigError, match="'nic' must be unset with protocol edge"):
        GossipConfig(protocol="edge", nic=1.0)
    with pytest.raises(ConfigError, match="'nic' must be unset without contention"):
        GossipConfig(protocol="async", rounds=2.0, nic=1.0, contention=False)


def test_zero_size_messages_share_nothing_so_the_fast_engines_still_answer():
    """Messages of size 0 occupy no link: on a geo layout with finite bandwidths, matching
    rounds keep the vector engine and its numbers bit for bit (contention on or off)."""
    geo = "geo:regions=3,hosts=4,inter_region_latency=50,intra_region_latency=1"
    on = GossipConfig(topology=geo, protocol="matching", rounds=6, size=0.0)
    off = dataclasses.replace(on, contention=False)
    assert select("gossip", on).name == select("gossip", off).name == "vector"
    a, b = gossip_model(on, Streams(3)), gossip_model(off, Streams(3))
    assert np.array_equal(a["disagreement"], b["disagreement"])
    assert np.array_equal(a["mean_shift"], b["mean_shift"])
    # with a size the exchanges do share the inter-region links: the DES runs them
    assert select("gossip", dataclasses.replace(on, size=1.0)).name == "des"


_FLOW_CASES = {
    "ring-nic": dict(topology="ring:n=24,latency=0.05,bandwidth=20", size=1.0, nic=4.0,
                     noise=0.1),
    "complete-nic": dict(nodes=12, nic=2.0),
    "torus-stubborn": dict(topology="torus:dims=4x4", nic=3.0, size=2.0, adversary="stubborn",
                           num_adversaries=2, adversary_value=3.0, clip=0.5, noise=0.2),
    "ring-rtt": dict(topology="ring:n=16,latency=0.05,bandwidth=20", nic=5.0,
                     network_weighting="rtt"),
}


@pytest.mark.parametrize("case", sorted(_FLOW_CASES))
def test_async_merged_path_on_a_network_equals_the_events_path(case):
    """Exchanges as flows: advancing the flow engine at each wake (merged) delivers what the
    events path delivers (an event per flow), bit for bit: values, records, exchange counts."""
    from sim.gossip import GossipSystem

    cfg = GossipConfig(protocol="async", engine="des", rounds=8, record_every=1,
                       **_FLOW_CASES[case])
    runs = {}
    for path in ("merged", "events"):
        system = GossipSystem(cfg, Streams(3).replication(1), path=path)
        assert system.async_path == path
        runs[path] = (system.run(), system)
    (a, sa), (b, sb) = runs["merged"], runs["events"]
    assert sb.exchanges > 30
    assert sa.exchanges == sb.exchanges
    np.testing.assert_array_equal(a.exchanges, b.exchanges)
    np.testing.assert_array_equal(a.disagreement, b.disagreement)
    np.testing.assert_array_equal(sa.x, sb.x)


def test_async_merged_path_gives_the_same_numbers_on_either_flow_engine(monkeypatch):
    """The merged path on the Python flow engine (as without numba) and on the compiled one."""
    import sim.network.kernel as kernel
    from sim.gossip import GossipSystem

    cfg = GossipConfig(protocol="async", engine="des", rounds=8, record_every=2,
                       **_FLOW_CASES["ring-nic"])
    compiled = GossipSystem(cfg, Streams(5))
    want = compiled.run()
    monkeypatch.setattr(kernel, "HAVE_NUMBA", False)
    python = GossipSystem(cfg, Streams(5))
    assert type(python._flows).__name__ == "FlowEngine"
    got = python.run()
    assert python.exchanges == compiled.exchanges > 30
    np.testing.assert_array_equal(got.disagreement, want.disagreement)
    np.testing.assert_array_equal(python.x, compiled.x)
