"""A user's adversary, defence and node update, defined here (outside the package), run on every engine.

Nothing in ``sim`` is edited or type-checks these classes: the engines ask them
through the public methods of :class:`~sim.adversaries.Adversary`,
:class:`~sim.adversaries.Defence` and :class:`~sim.gossip.NodeUpdate`, fast
paths included.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

from sim import analytic
from sim.adversaries import Adversary, Defence
from sim.errors import ConfigError
from sim.gossip import GossipConfig, GossipSystem, NodeUpdate, gossip_model
from sim.gossip.compiled import HAVE_NUMBA
from sim.rng import Streams
from sim.runner import replicate

# --------------------------------------------------------------------------- the user's strategies


class Beacon(Adversary):
    """Sends one constant to everyone, and says so (so the scalar fast paths can send it)."""

    def __init__(self, b: float) -> None:
        self.b = float(b)

    def send(self, view, senders, peers):
        return np.full((len(peers), view.x.shape[1]), self.b)

    def constant(self) -> float:
        return self.b

    def target(self, dim):
        return np.full(dim, self.b)


class Mirror(Adversary):
    """Sends every peer its own value: a node that is asked on every exchange and never moves anyone."""

    def send(self, view, senders, peers):
        return view.x[peers].copy()


class Freeze(Defence):
    """Honest nodes never move; counts how often each form of the rule is asked."""

    def __init__(self) -> None:
        self.vector_calls = 0
        self.scalar_calls = 0

    def move(self, diff, tau):
        self.vector_calls += 1
        return np.zeros_like(diff)

    def scalar_move(self):
        def still(diff: float) -> float:
            self.scalar_calls += 1
            return 0.0

        return still


class Pull(NodeUpdate):
    """Local steps toward ``c``: ``x += eta (c - x)`` per round; ``1 - exp(-eta t)`` of the gap over time ``t``."""

    def __init__(self, c: float, eta: float) -> None:
        self.c, self.eta = c, eta
        self.calls: list[np.ndarray] = []
        self.elapsed: dict[int, float] = {}

    def is_identity(self) -> bool:
        return False

    def local_steps(self, x, nodes, *, rng):
        self.calls.append(np.array(nodes))
        x[nodes] += self.eta * (self.c - x[nodes])

    def advance(self, x, node, elapsed, *, rng):
        assert elapsed >= 0
        self.elapsed[node] = self.elapsed.get(node, 0.0) + elapsed
        x[node] += (1.0 - math.exp(-self.eta * elapsed)) * (self.c - x[node])


# --------------------------------------------------------------------------- every engine and path

#: (label, config keywords, the async path it must take with a constant attacker).
CASES = [
    ("matching-vector", dict(protocol="matching", engine="vector"), ""),
    ("matching-vector-2d", dict(protocol="matching", engine="vector", dim=2), ""),
    ("matching-des", dict(protocol="matching", engine="des"), ""),
    ("matching-sparse", dict(protocol="matching", topology="ring:n=12", nodes=None), ""),
    ("edge-scalar", dict(protocol="edge", rounds=120), ""),
    ("edge-scalar-clip", dict(protocol="edge", rounds=120, clip=0.5), ""),
    ("edge-vector-2d", dict(protocol="edge", rounds=120, dim=2), ""),
    ("edge-vector-noise", dict(protocol="edge", rounds=120, noise=0.1), ""),
    ("async-merged", dict(protocol="async", rounds=6, engine="des"), "merged"),
    ("async-merged-sparse", dict(protocol="async", rounds=6, topology="torus:dims=3x4", nodes=None,
                                 engine="des"), "merged"),
    ("async-events-churn", dict(protocol="async", rounds=6, availability=0.7, engine="des"), "events"),
    ("async-vector-2d", dict(protocol="async", rounds=6, dim=2, clip=0.4, engine="des"), "vector"),
]
_IDS = [c[0] for c in CASES]
#: The compiled async engine, for the strategies that have a compiled form.
COMPILED = [] if not HAVE_NUMBA else [
    ("async-compiled", dict(protocol="async", rounds=6, engine="compiled"), "compiled"),
    ("async-compiled-sparse-churn", dict(protocol="async", rounds=6, topology="torus:dims=3x4",
                                         nodes=None, availability=0.7, engine="compiled"), "compiled"),
    ("async-compiled-2d-clip", dict(protocol="async", rounds=6, dim=2, clip=0.4,
                                    engine="compiled"), "compiled"),
]


def _cfg(kw, **extra) -> GossipConfig:
    base = dict(nodes=12, rounds=15, record_every=3, adversary="stubborn", adversary_value=4.0,
                num_adversaries=2)
    base.update(kw)
    base.update(extra)
    return GossipConfig(**base)


def _run(cfg, seed=3, **strategies):
    system = GossipSystem(cfg, Streams(seed).replication(1), **strategies)
    x0 = system.x.copy()
    rec = system.run()
    return system, rec, x0


@pytest.mark.parametrize(("label", "kw", "path"), CASES + COMPILED,
                         ids=_IDS + [c[0] for c in COMPILED])
def test_constant_adversary_is_stubborn_bit_for_bit(label, kw, path):
    """A user's constant sender gives the built-in stubborn node's trajectories, on its fast path."""
    cfg = _cfg(kw)
    ref, ref_rec, _ = _run(cfg)
    mine, rec, _ = _run(cfg, adversary=Beacon(4.0))
    assert mine.async_path == ref.async_path == path
    assert ref.exchanges > 0 and mine.exchanges == ref.exchanges
    for key in ("disagreement", "honest_mean", "gap", "toward", "time", "exchanges"):
        np.testing.assert_array_equal(getattr(rec, key), getattr(ref_rec, key), err_msg=key)
    np.testing.assert_array_equal(mine.x[mine.honest], ref.x[ref.honest])


@pytest.mark.parametrize(("label", "kw", "path"), CASES, ids=_IDS)
def test_adversary_asked_on_every_exchange(label, kw, path):
    """An adversary without a constant runs on the vector paths; sending peers their own value moves nobody."""
    extra = {}
    if kw["protocol"] == "async":  # instantaneous exchanges, so what is sent is still current
        extra = dict(latency=0.0, topology=kw.get("topology", "complete").replace("3x4", "3x4,latency=0"))
    cfg = _cfg(kw, noise=0.0, **extra)
    system, rec, x0 = _run(cfg, adversary=Mirror())
    if cfg.protocol == "async":
        assert system.async_path == "vector"
    h = system.honest
    # no honest node ever moves toward an adversary, so the honest sum is that of honest-only averaging
    np.testing.assert_allclose(system.x[h].sum(axis=0), x0[h].sum(axis=0), rtol=0, atol=1e-10)
    stub, _, _ = _run(cfg)  # while the stubborn node at 4 drags it up
    assert stub.x[h].sum() > x0[h].sum() + 0.1


@pytest.mark.parametrize(("label", "kw", "path"), CASES, ids=_IDS)
def test_freezing_defence_freezes_honest_values(label, kw, path):
    """A defence that zeroes every move leaves every honest value where it started, fast paths included."""
    cfg = _cfg(kw, noise=0.0)
    freeze = Freeze()
    system, rec, x0 = _run(cfg, defence=freeze)
    h = system.honest
    assert system.exchanges > 0
    np.testing.assert_array_equal(system.x[h], x0[h])
    np.testing.assert_array_equal(rec.honest_mean, np.broadcast_to(x0[h].mean(axis=0), rec.honest_mean.shape))
    scalar = cfg.dim == 1 and cfg.protocol in ("edge", "async")
    assert (freeze.scalar_calls > 0) == scalar  # the scalar fast path asked the scalar rule
    assert (freeze.vector_calls > 0) == (not scalar)
    if path:
        assert system.async_path == path
    plain, _, _ = _run(cfg)
    assert not np.array_equal(plain.x[h], x0[h])


@pytest.mark.parametrize(("protocol", "steps", "rate"), [
    ("edge", 90, analytic.capture_rate(10)),
    ("matching", 18, analytic.matching_capture_rate(10)),
])
def test_constant_adversary_follows_the_exact_capture_law(protocol, steps, rate):
    """One user Beacon at b on the complete graph: E[m_t - b] = r**t (m_0 - b), as for a stubborn node."""
    cfg = GossipConfig(nodes=10, protocol=protocol, rounds=steps, record_every=steps,
                       adversary="stubborn", adversary_value=10.0)
    reps = {"edge": 400, "matching": 100}[protocol]
    recs = replicate(partial(gossip_model, adversary=Beacon(10.0)), cfg, replications=reps, seed=21)
    ratio = np.array([r["gap"][-1] / r["gap"][0] for r in recs])
    se = ratio.std(ddof=1) / math.sqrt(ratio.size)
    exact = rate**steps
    assert abs(ratio.mean() - exact) < 4 * se, (ratio.mean(), exact, se)
    n = 10
    wrong = (1.0 - 1.0 / n**2 if protocol == "edge" else 1.0 - 1.0 / (2 * n)) ** steps
    assert abs(ratio.mean() - wrong) > 4 * se  # n in place of n - 1 is rejected
    assert abs(ratio.mean() - 1.0) > 4 * se  # and so is "no effect"


# --------------------------------------------------------------------------- the node-update hook


def test_node_update_runs_where_the_protocol_says_matching():
    """Matching: every honest node, once per round, after the noise and before the averaging; vector and DES agree."""
    kw = dict(nodes=10, rounds=8, protocol="matching", adversary="stubborn", adversary_value=3.0,
              noise=0.3, clip=0.7)
    out = {}
    for engine in ("vector", "des"):
        pull = Pull(c=-2.0, eta=0.3)
        system, rec, _ = _run(GossipConfig(engine=engine, **kw), update=pull)
        assert len(pull.calls) == 8
        for nodes in pull.calls:
            np.testing.assert_array_equal(nodes, system.hidx)
        out[engine] = (rec, system)
    np.testing.assert_array_equal(out["vector"][0].disagreement, out["des"][0].disagreement)
    np.testing.assert_array_equal(out["vector"][1].x, out["des"][1].x)


def test_node_update_mean_law_on_matching():
    """All honest, plain averaging keeps the mean, so the pull alone moves it: m_t - c = (1 - eta)**t (m_0 - c)."""
    cfg = GossipConfig(nodes=16, rounds=10, protocol="matching")
    system, rec, _ = _run(cfg, update=Pull(c=5.0, eta=0.2))
    m = rec.honest_mean[:, 0]
    np.testing.assert_allclose(m - 5.0, (m[0] - 5.0) * 0.8 ** rec.steps, rtol=1e-12, atol=1e-12)


def test_node_update_runs_on_the_pair_for_edge():
    """Edge: the update runs once per step on the chosen pair's honest ends (never on an adversary)."""
    cfg = GossipConfig(nodes=6, rounds=50, protocol="edge", adversary="stubborn", num_adversaries=1)
    pull = Pull(c=0.0, eta=0.1)
    system, _, _ = _run(cfg, update=pull)
    assert 35 <= len(pull.calls) <= 50  # steps with the stubborn node's only end honest still count
    for nodes in pull.calls:
        assert 1 <= nodes.size <= 2 and system.honest[nodes].all()


@pytest.mark.skipif(not HAVE_NUMBA, reason="needs the fast extra (numba)")
def test_strategies_without_compiled_forms_fall_back_to_the_simpy_engine():
    """Under auto a user's sender, defence or update with no compiled form runs on the SimPy engine;
    naming compiled with one is refused with the reason."""
    cfg = _cfg(dict(protocol="async", rounds=4))
    assert GossipSystem(cfg, Streams(0)).async_path == "compiled"
    for strategy in (dict(adversary=Mirror()), dict(defence=Freeze()), dict(update=Idle())):
        assert GossipSystem(cfg, Streams(0), **strategy).async_path in ("merged", "events", "vector")
    named = _cfg(dict(protocol="async", rounds=4, engine="compiled"))
    with pytest.raises(ConfigError) as e:
        GossipSystem(named, Streams(0), defence=Freeze())
    assert str(e.value) == ("'engine' must be des or auto for this configuration (compiled: "
                            "defence Freeze has no compiled form): 'compiled'")


def test_node_update_runs_continuously_for_async():
    """Async: a node's local work covers the time up to each of its exchanges, and it pulls values to c."""
    cfg = GossipConfig(nodes=12, rounds=8, record_every=8, protocol="async", engine="des")
    pull = Pull(c=3.0, eta=1.0)
    system, rec, x0 = _run(cfg, update=pull)
    assert system.async_path == "vector"
    assert set(pull.elapsed) == set(range(12))
    assert all(0 < t <= 8 for t in pull.elapsed.values())
    assert abs(rec.honest_mean[-1, 0] - 3.0) < 0.05 * abs(rec.honest_mean[0, 0] - 3.0) + 1e-9


# --------------------------------------------------------------------------- a new protocol


class Alternating(GossipSystem):
    """A protocol written here: rounds alternate the two perfect matchings ``(2k, 2k+1)`` and ``(2k+1, 2k+2)``
    of the ring order, through the shared noise, node-update and exchange kernels."""

    def process(self):
        n, steps, k = self.n, self.records.steps, 1
        even = np.arange(0, n - 1, 2)
        odd = np.arange(1, n - 1, 2)
        for r in range(1, self.cfg.rounds + 1):
            a = even if r % 2 else odd
            yield self.env.timeout(1.0)
            self.add_noise()
            self.local_steps(self.hidx)
            self.exchange_pairs(a, a + 1)
            self.exchanges += int(a.size)
            if k < steps.size and steps[k] == r:
                self.record(k)
                k += 1


def _alternating_matrix(n: int, rounds: int) -> np.ndarray:
    """The product of the rounds' averaging matrices."""
    W = np.eye(n)
    for r in range(1, rounds + 1):
        M = np.eye(n)
        for i in range(0 if r % 2 else 1, n - 1, 2):
            M[[i, i, i + 1, i + 1], [i, i + 1, i, i + 1]] = 0.5
        W = M @ W
    return W


def test_a_new_protocol_runs_on_the_shared_kernels():
    """A GossipSystem subclass with its own process() is exact, and takes the user's strategies."""
    cfg = GossipConfig(nodes=10, rounds=7, dim=2)
    system = Alternating(cfg, Streams(1).replication(0))
    x0 = system.x.copy()
    rec = system.run()
    np.testing.assert_allclose(system.x, _alternating_matrix(10, 7) @ x0, rtol=0, atol=1e-12)
    assert rec.disagreement[-1] < 0.5 * rec.disagreement[0]
    frozen = Alternating(cfg, Streams(1).replication(0), defence=Freeze())
    frozen.run()
    np.testing.assert_array_equal(frozen.x, x0)
    stub = GossipConfig(nodes=10, rounds=7, adversary="stubborn", adversary_value=4.0)
    a = Alternating(stub, Streams(2).replication(0))
    b = Alternating(stub, Streams(2).replication(0), adversary=Beacon(4.0))
    np.testing.assert_array_equal(a.run().gap, b.run().gap)


class Idle(NodeUpdate):
    """An update that engines must call (not the identity) but that changes nothing."""

    def is_identity(self) -> bool:
        return False


@pytest.mark.parametrize(("label", "kw", "path"), CASES, ids=_IDS)
def test_an_idle_update_reduces_to_averaging(label, kw, path):
    """With an update that does nothing, every engine gives the averaging trajectories (its vector path)."""
    cfg = _cfg(kw)
    ref, ref_rec, _ = _run(cfg)
    mine, rec, _ = _run(cfg, update=Idle())
    if cfg.protocol == "async":
        assert mine.async_path == "vector"
    assert mine.exchanges == ref.exchanges
    np.testing.assert_allclose(rec.disagreement, ref_rec.disagreement, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mine.x[mine.honest], ref.x[ref.honest], rtol=1e-9, atol=1e-12)
