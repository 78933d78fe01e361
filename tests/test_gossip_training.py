"""Gossip training through the engines' node-update hook, against the exact references."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.gossip import GossipConfig, gossip_model
from sim.learning import (
    GossipTrainingConfig,
    LearningConfig,
    LocalSGD,
    gossip_training_model,
    place_adversaries,
    summarize_training,
    with_learning,
)
from sim.rng import Streams
from sim.runner import replicate

TOL = 4.0


def _quad(**kw):
    base = dict(objective="quadratic", lr=0.2, local_steps=2, curvature_spread=0.5,
                optimum_spread=2.0)
    base.update(kw)
    return LearningConfig(**base)


def _run(cfg, reps, seed=3):
    recs = replicate(gossip_training_model, cfg, replications=reps, seed=seed)
    return recs, summarize_training(recs, cfg)


def _z(recs, key, exact, idx):
    a = np.stack([np.asarray(r[key], dtype=float).reshape(len(r["steps"]), -1)[:, 0] for r in recs])
    m, se = a.mean(axis=0)[idx], a.std(axis=0, ddof=1)[idx] / np.sqrt(a.shape[0])
    return np.max(np.abs(m - np.asarray(exact)[idx]) / se)


@pytest.mark.parametrize("protocol,topology,rounds,every,reps", [
    ("matching", "complete", 30, 5, 30),
    # slow: edge training on a sparse graph stays in the default suite (second moment below)
    pytest.param("edge", "ring", 100, 20, 250, marks=pytest.mark.slow),
    ("neighbourhood", "ring", 30, 5, 30),
])
def test_first_moment_with_a_stubborn_node(protocol, topology, rounds, every, reps):
    """E[honest mean] with a stubborn node, training (H = 2): simulated = exact, lr = 0 rejected."""
    g = GossipConfig(topology=topology, nodes=10, protocol=protocol, rounds=rounds,
                     adversary="stubborn", adversary_value=4.0, record_every=every)
    cfg = GossipTrainingConfig(g, _quad())
    recs, s = _run(cfg, reps)
    idx = np.arange(1, len(s["steps"]))
    assert _z(recs, "honest_mean", s["predicted_honest_mean"], idx) < TOL
    wrong = GossipTrainingConfig(g, _quad(lr=0.0))
    from sim.learning import training_predictions

    assert _z(recs, "honest_mean", training_predictions(wrong)["predicted_honest_mean"], idx) > 10


def _second_moment_edge_sparse(reps: int, precise: bool) -> None:
    g = GossipConfig(topology="random_regular:degree=3", nodes=10, topology_seed=2, protocol="edge",
                     rounds=120, record_every=30, init_mean=1.0)
    cfg = GossipTrainingConfig(g, _quad(grad_noise=1.0, optimum_spread=0.5))
    recs, s = _run(cfg, reps)
    idx = np.arange(1, len(s["steps"]))
    for key in ("consensus_distance", "sq_distance_to_optimum", "loss"):
        assert _z(recs, key, s["predicted_" + key], idx) < TOL, key
    if precise:
        rel = s["consensus_distance_se"][-1] / s["consensus_distance"][-1]
        assert rel < 0.05
    quiet = GossipTrainingConfig(g, _quad(grad_noise=0.0, optimum_spread=0.5))
    from sim.learning import training_predictions

    pq = training_predictions(quiet)["predicted_consensus_distance"]
    assert _z(recs, "consensus_distance", pq, idx) > 6


def test_second_moment_edge_sparse_graph_with_gradient_noise_quick():
    """Random-edge training on a 3-regular graph with gradient noise, 50 replications:
    E[consensus], E[|m - x*|^2] and the loss exact within 4 SE; the noiseless law rejected."""
    _second_moment_edge_sparse(50, precise=False)


@pytest.mark.slow  # the 50-replication version above stays in the default suite
def test_second_moment_edge_sparse_graph_with_gradient_noise():
    """Random-edge training on a 3-regular graph with gradient noise: E[consensus], E[|m - x*|^2]
    (300 replications, the consensus distance's SE below 5 %)."""
    _second_moment_edge_sparse(300, precise=True)


def _diloco_by_allreduce(reps: int, wrong_se: float) -> None:
    g = GossipConfig(topology="complete", nodes=8, protocol="allreduce", rounds=60, record_every=10)
    cfg = GossipTrainingConfig(g, _quad(lr=0.3, local_steps=5, grad_noise=0.5))
    recs, s = _run(cfg, reps)
    fp = s["predicted_fixed_point"][0]
    a = np.array([r["honest_mean"][-1, 0] for r in recs])
    se = a.std(ddof=1) / np.sqrt(a.size)
    assert abs(a.mean() - fp) < TOL * se
    assert abs(a.mean() - s["optimum"][0]) > wrong_se * se
    np.testing.assert_allclose(s["predicted_honest_mean"][-1], fp, rtol=1e-9)


def test_diloco_fixed_point_by_allreduce_quick():
    """allreduce after H = 5 local steps (100 replications) settles at sum w c / sum w within
    4 SE; the optimum is more than 6 SE away."""
    _diloco_by_allreduce(100, 6.0)


@pytest.mark.slow  # the 100-replication version above stays in the default suite
def test_diloco_fixed_point_by_allreduce():
    """allreduce after H = 5 local steps settles at sum w c / sum w, not at the optimum."""
    _diloco_by_allreduce(200, 10.0)


@pytest.mark.parametrize("protocol,topology,extra", [
    ("matching", "complete", {}),
    ("matching", "ring", {"engine": "des"}),
    ("edge", "ring", {"noise": 0.1}),
    ("async", "ring", {"latency": 0.3}),
    ("neighbourhood", "torus:dims=3x4", {}),
])
def test_lr_zero_is_todays_averaging_bit_for_bit(protocol, topology, extra):
    """lr = 0 with an objective gives exactly today's gossip trajectories at the same seed."""
    g = GossipConfig(topology=topology, nodes=None if "torus" in topology else 12,
                     protocol=protocol, rounds=20, adversary="stubborn", **extra)
    lc = _quad(lr=0.0, grad_noise=1.0, step_time=(1.0,))
    t = gossip_training_model(GossipTrainingConfig(g, lc), Streams(5).replication(1))
    b = gossip_model(g, Streams(5).replication(1))
    for key in ("time", "disagreement", "honest_mean", "gap"):
        np.testing.assert_array_equal(t[key], b[key])


def test_lr_zero_through_the_hook_keeps_the_vector_path_bit_for_bit():
    """A training update that runs (not skipped) at lr = 0 leaves matching rounds bit-identical."""

    class Forced(LocalSGD):
        def is_identity(self) -> bool:
            return False

    g = GossipConfig(topology="complete", nodes=16, protocol="matching", rounds=15, dim=3)
    from sim.learning import training_objective

    cfg = GossipTrainingConfig(g, _quad(lr=0.0, grad_noise=0.5, local_steps=3))
    up = Forced(training_objective(cfg), 0.0, 3, 0.5)
    got = gossip_model(g, Streams(9).replication(0), update=up)
    ref = gossip_model(g, Streams(9).replication(0))
    np.testing.assert_array_equal(got["honest_mean"], ref["honest_mean"])
    np.testing.assert_array_equal(got["disagreement"], ref["disagreement"])
    assert up.steps_taken == 15 * 16 * 3


def test_async_steps_at_each_nodes_pace_and_converges():
    """async: local steps follow step_time; without adversaries the mean nears the honest optimum."""
    g = GossipConfig(topology="complete", nodes=8, protocol="async", rounds=120, record_every=20,
                     latency=0.2)
    lc = _quad(lr=0.1, local_steps=1, step_time=(0.5,) * 4 + (1.0,) * 4)
    out = gossip_training_model(GossipTrainingConfig(g, lc), Streams(1).replication(0))
    assert out["local_steps"] == 4 * 240 + 4 * 120
    assert out["distance_to_optimum"][-1] < 0.1 * out["distance_to_optimum"][0]


def test_label_flipping_nodes_train_but_are_not_counted(monkeypatch):
    """Flippers follow the protocol; records and the optimum are over the other nodes."""
    pytest.importorskip("sklearn")
    lc = LearningConfig(objective="logistic", data="iris", lr=0.1, local_steps=1)
    g = GossipConfig(topology="complete", nodes=8, protocol="matching", rounds=20, record_every=5)
    cfg = with_learning(g, lc, flipped=(0, 1))
    assert cfg.gossip.dim == 15 and int(cfg.honest.sum()) == 6
    out = gossip_training_model(cfg, Streams(2).replication(0))
    assert out["honest"] == 6
    assert out["test_accuracy"][-1] > 0.5
    s = summarize_training([out, gossip_training_model(cfg, Streams(2).replication(1))], cfg)
    assert s["objective"]["nodes"][0]["flipped"] is True
    assert not any(k.startswith("predicted_") for k in s)


def test_robust_rules_resist_a_stubborn_node_on_neighbourhood_rounds():
    """Median and trimmed mean keep the honest mean near x*; plain mixing is dragged toward b."""
    g = GossipConfig(topology="complete", nodes=10, protocol="neighbourhood", rounds=40,
                     adversary="stubborn", adversary_value=50.0, record_every=10)
    res = {}
    for rule in ("none", "median", "trimmed", "farthest"):
        out = gossip_training_model(GossipTrainingConfig(g, _quad(), rule=rule), Streams(4).replication(0))
        res[rule] = out["distance_to_optimum"][-1]
    assert res["none"] > 3.0
    assert res["median"] < 1.0 and res["trimmed"] < 1.0 and res["farthest"] < res["none"] / 2


def test_placement_rules():
    """first, random (seeded) and highest-degree placement of adversaries."""
    assert place_adversaries("ring", 2, "first", nodes=10) == (0, 1)
    r = place_adversaries("ring", 3, "random", nodes=10, seed=4)
    assert r == place_adversaries("ring", 3, "random", nodes=10, seed=4) and len(set(r)) == 3
    star = place_adversaries("star", 1, "degree", nodes=9)
    assert star == (0,)


def test_training_config_refusals():
    """Bad combinations are refused in one line before anything runs."""
    g = GossipConfig(topology="ring", nodes=8, protocol="edge", rounds=10)
    with pytest.raises(ConfigError, match=r"^'rule' must be none for protocol edge"):
        GossipTrainingConfig(g, _quad(), rule="median")
    with pytest.raises(ConfigError, match=r"'lr' must be < 2 / curvature at every honest node \(node"):
        GossipTrainingConfig(g, _quad(lr=1.9))
    with pytest.raises(ConfigError, match="labelflip needs the logistic task"):
        GossipTrainingConfig(g, _quad(), flipped=(1,))
    with pytest.raises(ConfigError, match=r"^'objective' must be quadratic or logistic"):
        GossipTrainingConfig(g, LearningConfig())
    with pytest.raises(ConfigError, match=r"^'adversary_nodes' must be an integer in \[0, 7\]: 9$"):
        dataclasses.replace(g, adversary="stubborn", adversary_nodes=(9,))


def test_ipm_sends_a_negative_multiple_of_the_honest_mean():
    """IPM sends -eps times the honest mean to every peer, on any protocol."""
    from sim.adversaries import Neighbourhood, View, make_adversary

    x = np.array([[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]])
    honest = np.array([True, True, False])
    view = View(x, honest, Neighbourhood(honest))
    sent = make_adversary("ipm", 0.5).send(view, np.array([2, 2]), np.array([0, 1]))
    np.testing.assert_allclose(sent, [[-1.0, -1.5], [-1.0, -1.5]])
    g = GossipConfig(topology="ring", nodes=8, protocol="edge", rounds=50, adversary="ipm")
    out = gossip_training_model(GossipTrainingConfig(g, _quad()), Streams(1).replication(0))
    assert np.isfinite(out["loss"]).all()


def test_final_intervals_stay_in_each_metrics_range(capsys):
    """Two replications of logistic gossip training (ring of 6, 2 rounds, seed 0): the test
    accuracy's Student-t interval was [-0.56, 0.94], below 0 for a fraction of the test set
    (and [0.09, 1.16], past 1, on a user's graph). Cut to [0, 1], and the norms at 0; the mean
    and the standard error are unchanged."""
    import json

    from sim.cli import main

    assert main(["gossip", "--topology", "ring:n=6", "--protocol", "neighbourhood",
                 "--objective", "logistic", "--data", "digits", "--rounds", "2",
                 "--replications", "2", "--seed", "0", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    lo, hi = d["final_test_accuracy_ci"]
    assert lo == 0.0 and 0.0 < hi <= 1.0
    acc = d["test_accuracy"][-1]
    assert acc - 12.7 * d["test_accuracy_se"][-1] < 0  # the uncut interval went below 0
    for m in ("distance_to_optimum", "sq_distance_to_optimum", "consensus_distance"):
        assert d[f"final_{m}_ci"][0] >= 0.0, m
