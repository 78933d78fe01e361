"""Tests of sim.adversaries: attackers, neighbourhood sums and clipping defences."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from sim.adversaries import (
    ALIE,
    AdaptiveClip,
    Dissensus,
    FixedClip,
    Neighbourhood,
    NoDefence,
    SignFlip,
    Stubborn,
    View,
    clip_rows,
    make_adversary,
    make_defence,
)
from sim.errors import ConfigError


def _view(x, honest, graph=None):
    x = np.asarray(x, dtype=float)
    honest = np.asarray(honest, dtype=bool)
    adj = None if graph is None else nx.to_scipy_sparse_array(graph, nodelist=range(len(honest)),
                                                              weight=None, format="csr")
    return View(x, honest, Neighbourhood(honest, adj))


def test_clip_rows_projects_on_the_ball():
    """Rows longer than tau are scaled to norm tau; shorter rows and tau = inf are untouched."""
    diff = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    out = clip_rows(diff, 1.0)
    np.testing.assert_allclose(out[0], [0.6, 0.8])
    np.testing.assert_allclose(out[1:], diff[1:])
    np.testing.assert_allclose(clip_rows(diff, math.inf), diff)
    np.testing.assert_allclose(clip_rows(diff, np.array([10.0, 0.25, 1.0]))[1], [0.15, 0.2])


def test_fixed_clip_clips_then_halves():
    """The trust-region step is clip(diff, tau) / 2, not clip(diff / 2, tau)."""
    v = _view(np.zeros((2, 1)), [True, True])
    step = FixedClip(1.0).step(v, np.array([[1.5]]), np.array([0]))
    assert step[0, 0] == pytest.approx(0.5)  # clip(diff/2, 1) would give 0.75
    assert NoDefence().step(v, np.array([[1.5]]), np.array([0]))[0, 0] == pytest.approx(0.75)


def test_stubborn_sends_b_to_everyone():
    """A stubborn attacker sends b in every coordinate to every peer."""
    v = _view(np.arange(8.0).reshape(4, 2), [False, True, True, True])
    out = Stubborn(7.5).send(v, np.array([0, 0]), np.array([1, 3]))
    np.testing.assert_array_equal(out, np.full((2, 2), 7.5))
    np.testing.assert_array_equal(Stubborn(7.5).initial_value(3), [7.5, 7.5, 7.5])


def test_alie_sends_mean_plus_z_std():
    """ALIE sends the honest mean plus z honest standard deviations, per coordinate."""
    x = np.array([[100.0], [1.0], [2.0], [3.0], [6.0]])
    v = _view(x, [False, True, True, True, True])
    out = ALIE(2.0).send(v, np.array([0]), np.array([2]))
    hx = x[1:, 0]
    assert out[0, 0] == pytest.approx(hx.mean() + 2.0 * hx.std())


def test_dissensus_pushes_peer_away_from_its_honest_neighbours():
    """After averaging with a dissensus value the peer is farther from its honest neighbours' mean."""
    g = nx.path_graph(4)  # 0 - 1 - 2 - 3, node 0 adversarial
    x = np.array([[0.0], [1.0], [3.0], [5.0]])
    v = _view(x, [False, True, True, True], g)
    sent = Dissensus(1.0).send(v, np.array([0]), np.array([1]))
    # node 1's only honest neighbour is node 2 (value 3): it is pushed to 1 - (3 - 1) = -1
    assert sent[0, 0] == pytest.approx(-1.0)
    new = x[1, 0] + (sent[0, 0] - x[1, 0]) / 2
    assert abs(new - 3.0) > abs(x[1, 0] - 3.0)


def test_signflip_sends_negated_peer_value():
    """Sign-flip sends -x_peer."""
    v = _view([[0.0, 0.0], [1.0, -2.0], [3.0, 4.0]], [False, True, True])
    np.testing.assert_array_equal(SignFlip().send(v, np.array([0]), np.array([1])), [[-1.0, 2.0]])


def test_neighbourhood_complete_matches_explicit_complete_graph():
    """The implicit complete graph gives the same honest sums as the built one."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 2))
    honest = np.array([False, True, True, False, True, True, True])
    implicit = Neighbourhood(honest)
    explicit = Neighbourhood(honest, nx.to_scipy_sparse_array(nx.complete_graph(7), format="csr"))
    peers = np.arange(7)
    for a, b in zip(implicit.honest_sums(x, peers), explicit.honest_sums(x, peers), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_array_equal(implicit.adversary_degree(peers), explicit.adversary_degree(peers))
    np.testing.assert_allclose(implicit.honest_sqdist(x, peers), explicit.honest_sqdist(x, peers))


def test_adaptive_clip_radius_is_the_oracle_rule():
    """tau_i = sqrt(sum over honest neighbours |x_j - x_i|^2 / a_i); no clipping without adversarial neighbours."""
    g = nx.Graph([(0, 1), (1, 2), (1, 3), (2, 3)])  # node 0 adversarial, neighbour of 1 only
    x = np.array([[50.0], [1.0], [2.0], [4.0]])
    v = _view(x, [False, True, True, True], g)
    tau = AdaptiveClip().radius(v, np.array([1, 2]))
    assert tau[0] == pytest.approx(math.sqrt((2 - 1) ** 2 + (4 - 1) ** 2))
    assert math.isinf(tau[1])


def test_make_adversary_and_defence():
    """Factories build the named kinds with their per-kind defaults."""
    assert make_adversary("none") is None
    assert make_adversary("stubborn").value == 10.0
    assert make_adversary("alie", -1.5).z == -1.5
    assert isinstance(make_adversary("signflip"), SignFlip)
    assert isinstance(make_defence(), NoDefence)
    assert isinstance(make_defence(0.5), FixedClip)
    assert isinstance(make_defence(None, adaptive=True), AdaptiveClip)


def test_bad_kind_and_radius_messages():
    """Unknown attacker kinds and negative radii fail with one exact line."""
    with pytest.raises(ConfigError) as e:
        make_adversary("byzantine")
    assert str(e.value) == ("'adversary' must be one of none, stubborn, alie, dissensus, signflip, ipm, "
                            "bitflip: "
                            "'byzantine'")
    with pytest.raises(ConfigError) as e:
        FixedClip(-1.0)
    assert str(e.value) == "'clip' must be >= 0: -1.0"


@pytest.mark.parametrize("graph", [None, nx.cycle_graph(20)], ids=["complete", "ring"])
def test_adaptive_radius_is_accurate_far_from_zero(graph):
    """The oracle radius keeps its accuracy near consensus far from 0 (no cancellation in sum |x_j - x_i|^2)."""
    rng = np.random.default_rng(5)
    x = 1000.0 + 1e-6 * rng.standard_normal((20, 2))
    honest = np.ones(20, dtype=bool)
    honest[[0, 7]] = False
    v = _view(x, honest, graph)
    peers = np.flatnonzero(honest)
    adj = (np.ones((20, 20)) - np.eye(20) if graph is None
           else nx.to_numpy_array(graph, nodelist=range(20)))
    exact = np.array([sum(float(np.sum((x[j] - x[i]) ** 2)) for j in range(20) if adj[i, j] and honest[j])
                      for i in peers])
    np.testing.assert_allclose(v.nbhd.honest_sqdist(x, peers), exact, rtol=1e-6)
