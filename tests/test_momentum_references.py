"""Exact references of momentum gossip training and of IPM against a clip, against the simulation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.analytic.learning import effective_gain, ipm_clip_fixed_point, momentum_maps, training_mean
from sim.gossip import GossipConfig
from sim.learning import (
    GossipTrainingConfig,
    LearningConfig,
    gossip_training_model,
    summarize_training,
    training_predictions,
)
from sim.rng import Streams
from sim.runner import replicate

TOL = 4.0


def test_momentum_maps_are_torch_heavy_ball_steps():
    """H steps of v = beta v + g; x -= lr v on a quadratic equal the 2 x 2 map (and its settled gain)."""
    a, c, eta, beta, H = np.array([[0.7, 1.3]]), np.array([[2.0, -1.0]]), 0.3, 0.8, 5
    x, v = np.array([[0.5, 0.4]]), np.array([[0.1, -0.2]])
    y, w = x.copy(), v.copy()
    for _ in range(H):
        w = beta * w + a * (y - c)
        y = y - eta * w
    p11, p12, p21, p22 = momentum_maps(a, eta, H, beta)
    np.testing.assert_allclose(c + p11 * (x - c) + p12 * v, y, atol=1e-13)
    np.testing.assert_allclose(p21 * (x - c) + p22 * v, w, atol=1e-13)
    g1 = effective_gain(a, eta, 1, beta)
    np.testing.assert_allclose(1.0 - g1, eta * a / (1.0 - beta), atol=1e-14)


@pytest.mark.parametrize("topology,protocol,extra", [
    ("erdos_renyi:n=12,p=0.4", "neighbourhood", {"gossip_rounds": 2}),
    pytest.param("star:n=9", "neighbourhood", {"mixing": "uniform"}, marks=pytest.mark.slow),
    pytest.param("complete", "allreduce", {"gossip_rounds": 3}, marks=pytest.mark.slow),
])
def test_momentum_first_moment_equals_deterministic_rounds(topology, protocol, extra):
    """Synchronous rounds without noise are deterministic: the exact mean is the run, to 1e-12."""
    g = GossipConfig(topology=topology, nodes=10 if topology == "complete" else None,
                     topology_seed=1 if "erdos" in topology else None, protocol=protocol, rounds=40,
                     adversary="stubborn", adversary_value=3.0, adversary_nodes=(1, 4),
                     init_std=0.0, init_mean=1.0, record_every=5, **extra)
    tc = GossipTrainingConfig(g, LearningConfig(objective="quadratic", lr=0.1, local_steps=2,
                                          curvature_spread=0.5, optimum_spread=2.0, momentum=0.8))
    rep = summarize_training(replicate(gossip_training_model, tc, replications=1, seed=1), tc)
    sim_m, exact = np.asarray(rep["honest_mean"]).ravel(), np.asarray(rep["predicted_honest_mean"]).ravel()
    assert np.max(np.abs(sim_m - exact)) < 1e-12
    plain = GossipTrainingConfig(g, dataclasses.replace(tc.learning, momentum=0.0))
    wrong = np.asarray(training_predictions(plain)["predicted_honest_mean"]).ravel()
    assert np.max(np.abs(sim_m - wrong)) > 0.05  # the recursion without momentum is another run


@pytest.mark.slow
def test_momentum_first_moment_matching_statistical():
    """Random matchings with momentum and gradient noise: E[honest mean] within 4 SE of the exact one."""
    g = GossipConfig(topology="complete", nodes=10, protocol="matching", rounds=24, record_every=4,
                     adversary="stubborn", adversary_value=4.0)
    lc = LearningConfig(objective="quadratic", lr=0.15, local_steps=2, curvature_spread=0.5,
                        optimum_spread=2.0, grad_noise=0.5, momentum=0.7)
    tc = GossipTrainingConfig(g, lc)
    recs = replicate(gossip_training_model, tc, replications=300, seed=5)
    a = np.stack([np.asarray(r["honest_mean"], dtype=float).reshape(-1) for r in recs])
    m, se = a.mean(axis=0)[1:], a.std(axis=0, ddof=1)[1:] / np.sqrt(a.shape[0])
    exact = np.asarray(training_predictions(tc)["predicted_honest_mean"]).ravel()[1:]
    assert np.max(np.abs(m - exact) / se) < TOL
    plain = training_mean("matching", *_arrays(tc), lc.lr, lc.local_steps, g.rounds,
                          stubborn={0: 4.0}, record_every=4).mean(axis=1).ravel()[1:]
    assert np.max(np.abs(m - plain) / se) > 3 * TOL  # ignoring momentum is rejected


def _arrays(tc):
    from sim.learning import training_objective

    obj = training_objective(tc)
    return obj.curvature, obj.centres


@pytest.mark.slow
def test_momentum_first_moment_edge_statistical():
    """Random single edges with momentum: E[honest mean] within 4 SE of the exact (x, v) recursion."""
    g = GossipConfig(topology="ring:n=8", protocol="edge", rounds=200, record_every=40,
                     adversary="stubborn", adversary_value=3.0)
    lc = LearningConfig(objective="quadratic", lr=0.15, local_steps=2, curvature_spread=0.5,
                        optimum_spread=2.0, grad_noise=0.3, momentum=0.6)
    tc = GossipTrainingConfig(g, lc)
    recs = replicate(gossip_training_model, tc, replications=400, seed=8)
    a = np.stack([np.asarray(r["honest_mean"], dtype=float).reshape(-1) for r in recs])
    m, se = a.mean(axis=0)[1:], a.std(axis=0, ddof=1)[1:] / np.sqrt(a.shape[0])
    exact = np.asarray(training_predictions(tc)["predicted_honest_mean"]).ravel()[1:]
    assert np.max(np.abs(m - exact) / se) < TOL
    import networkx as nx

    plain = training_mean("edge", *_arrays(tc), lc.lr, lc.local_steps, g.rounds, graph=nx.cycle_graph(8),
                          stubborn={0: 3.0}, record_every=40).mean(axis=1).ravel()[1:]
    assert np.max(np.abs(m - plain) / se) > 3 * TOL


# ----------------------------------------------------------------------------- IPM against a clip


def _ipm_config(beta, H, noise, rounds=300, reps_spread=0.1):
    rng = np.random.default_rng(0)
    table = tuple((i, 0, 1.0, float(3.0 + reps_spread * rng.standard_normal())) for i in range(2, 10))
    g = GossipConfig(topology="complete", nodes=10, protocol="neighbourhood", rounds=rounds,
                     adversary="ipm", adversary_value=0.5, num_adversaries=2, clip=0.5,
                     init_mean=3.0, init_std=0.0, record_every=rounds // 10)
    lc = LearningConfig(objective="quadratic", lr=0.1, local_steps=H, grad_noise=noise, momentum=beta,
                        objective_table=table)
    return GossipTrainingConfig(g, lc)


@pytest.mark.parametrize("beta,H", [(0.9, 1), pytest.param(0.0, 2, marks=pytest.mark.slow)])
def test_ipm_clip_fixed_point_is_where_deterministic_training_settles(beta, H):
    """Without noise the run converges to the exact piecewise-affine fixed point (and its closed form)."""
    tc = _ipm_config(beta, H, 0.0, rounds=400)
    out = gossip_training_model(tc, Streams(0).replication(0))
    pred = training_predictions(tc)["predicted_ipm_fixed_point"][0]
    assert abs(float(out["honest_mean"][-1][0]) - pred) < 1e-9
    a = np.ones(8)
    c = np.array([row[3] for row in tc.learning.objective_table])
    fp = ipm_clip_fixed_point(a, c, 0.1, H, 10, 0.5, 0.5, momentum=beta)
    assert fp["closed_form"] == pytest.approx(pred, abs=1e-12)
    assert fp["clipped_attack"].all() and fp["margin"] > 0.2


@pytest.mark.slow
def test_ipm_clip_fixed_point_under_gradient_noise():
    """With noise, the time-averaged honest mean of many runs sits on the exact fixed point (4 SE);
    the unclipped IPM fixed point and the fixed point that ignores momentum are rejected."""
    tc = _ipm_config(0.9, 1, 0.05, rounds=200)
    recs = replicate(gossip_training_model, tc, replications=40, seed=2)
    tail = np.array([np.asarray(r["honest_mean"], dtype=float).ravel()[-5:].mean() for r in recs])
    m, se = tail.mean(), tail.std(ddof=1) / np.sqrt(tail.size)
    pred = training_predictions(tc)["predicted_ipm_fixed_point"][0]
    assert abs(m - pred) / se < TOL
    c = np.array([row[3] for row in tc.learning.objective_table]).mean()
    F = 2 * 1.5 / 10
    unclipped = (1 - F) * c  # g = 0 here: momentum 0.9 and lr a = 0.1 give 1 - g = 1
    no_momentum = c - 2 * 0.5 / (10 * 0.1)
    assert abs(m - unclipped) / se > 10 * TOL and abs(m - no_momentum) / se > 10 * TOL
