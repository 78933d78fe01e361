"""Attacks against defences on a real learning task, in simulated wall clock.

Softmax regression on scikit-learn's bundled ``digits`` (8x8 images, 10
classes, 650 parameters), iid shards over ``n = 20`` nodes, 10 % adversaries
(2 nodes, placed at random). Every round each honest node takes ``H`` local
gradient steps (``step_time`` each; full local gradient plus ``N(0, 0.3^2)``
noise per coordinate, the stand-in for minibatch noise), then hears all its neighbours
(``latency + size / bandwidth``) and aggregates (``neighbourhood`` rounds):
plain Metropolis mixing, ClippedGossip with a fixed radius, with the oracle
adaptive radius, with the practical farthest-neighbour radius, a coordinate-wise
median or a trimmed mean. Attacks: none, stubborn (``b`` in every
coordinate), ALIE, IPM, sign-flip, dissensus and label flipping (a data attack
by nodes that otherwise follow the protocol). Graphs: complete, ring,
random 4-regular.

Measured: held-out test accuracy and the distance of the honest mean from the
honest optimum ``x*`` at four points of simulated time. Beside them, the
quantities of ClippedGossip's neighbourhood bound ``O(delta_max zeta^2 /
gamma^2)``: ``delta_max`` the largest Byzantine weight at an honest node,
``zeta^2 = (1/h) sum_i |grad f_i(x*)|^2`` the heterogeneity at the optimum and
``gamma`` the spectral gap of the mixing matrix (the bound is up to a
constant, so only its ordering across graphs is compared).

Run::

    dtsim run experiments/attacks_defences.py --quick
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import sim.runner
from sim.analytic.learning import metropolis_weights
from sim.gossip import GossipConfig
from sim.learning import (
    LearningConfig,
    place_adversaries,
    training_model,
    training_objective,
    with_learning,
)
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "attacks_defences"

BASE = {"graph": "complete", "attack": "none", "defence": "plain", "nodes": 20,
        "adversaries": 2, "rounds": 80, "lr": 0.1, "local_steps": 2, "grad_noise": 0.3, "step_time": 0.01,
        "latency": 0.05, "bandwidth": 20.0, "size": 1.0, "clip": 1.0, "trim": 1,
        "data": "digits", "objective_seed": 0}

FACTORS = {
    "graph": ["complete", "ring", "random_regular:degree=4"],
    "attack": ["none", "stubborn", "alie", "ipm", "signflip", "dissensus", "labelflip"],
    "defence": ["plain", "clip", "adaptive", "farthest", "median", "trimmed"],
}

REPLICATIONS = 3
#: Metrics that are probabilities (test accuracies: fractions of a test set): intervals inside [0, 1] in summary.csv.
RATES = {f"accuracy_{k}": None for k in range(1, 5)}
SEED = 17

QUICK = {
    "BASE": dict(BASE, rounds=60),
    "FACTORS": {"graph": ["complete", "ring"],
                "attack": ["none", "stubborn", "alie", "ipm", "labelflip"],
                "defence": ["plain", "clip", "adaptive", "farthest", "median", "trimmed"]},
    "REPLICATIONS": 2,
}

#: Adversary values: stubborn b, ALIE z, IPM eps, dissensus eps.
VALUES = {"stubborn": 10.0, "alie": 1.0, "ipm": 0.1, "dissensus": 1.0, "signflip": None}
#: Checkpoints, as fractions of the horizon.
CHECKPOINTS = (0.25, 0.5, 0.75, 1.0)


# ----------------------------------------------------------------------------- model


def config_of(p: dict[str, Any]):
    """The :class:`~sim.learning.TrainingConfig` of a point."""
    pos = place_adversaries(p["graph"], p["adversaries"], "random", nodes=p["nodes"],
                            topology_seed=0, seed=p["objective_seed"])
    attack, flip = p["attack"], p["attack"] == "labelflip"
    kind = "none" if attack in ("none", "labelflip") else attack
    d = p["defence"]
    link = f"latency={p['latency']},bandwidth={p['bandwidth']}"
    spec = p["graph"] + ("," if ":" in p["graph"] else ":") + link
    g = GossipConfig(topology=spec, nodes=p["nodes"], topology_seed=0,
                     protocol="neighbourhood", rounds=p["rounds"],
                     record_every=max(1, p["rounds"] // 20), adversary=kind,
                     adversary_nodes=pos if kind != "none" else None,
                     adversary_value=VALUES.get(kind), clip=p["clip"] if d == "clip" else None,
                     adaptive_clip=d == "adaptive", size=p["size"], init_std=0.0)
    lc = LearningConfig(objective="logistic", data=p["data"], lr=p["lr"],
                        local_steps=p["local_steps"], grad_noise=p["grad_noise"],
                        step_time=(p["step_time"],),
                        objective_seed=p["objective_seed"])
    rule = d if d in ("farthest", "median", "trimmed") else "none"
    return with_learning(g, lc, rule=rule, trim=p["trim"], flipped=pos if flip else ())


def bound_terms(cfg) -> dict[str, float]:
    """delta_max, zeta^2 and gamma of ClippedGossip's bound for the point's graph."""
    g = cfg.gossip
    G = g.network_graph
    W = metropolis_weights(G).toarray()
    np.fill_diagonal(W, 1.0 - W.sum(axis=1))
    honest = cfg.honest
    byz = ~honest
    delta = float(W[np.ix_(honest, byz)].sum(axis=1).max()) if byz.any() else 0.0
    lam = np.sort(np.abs(np.linalg.eigvalsh(W)))
    gamma = float(1.0 - lam[-2])
    obj = training_objective(cfg)
    xs = obj.optimum
    hidx = np.flatnonzero(honest)
    grads = obj.gradient(np.tile(xs, (hidx.size, 1)), hidx)
    zeta2 = float(np.mean(np.einsum("ij,ij->i", grads, grads)))
    return {"delta_max": delta, "zeta2": zeta2, "gamma": gamma,
            "bound": delta * zeta2 / gamma**2 if gamma > 0 else float("inf")}


def model(config: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """One replication: accuracy and distance to x* at the checkpoints, and the bound terms."""
    cfg = config_of(config)
    if not nx.is_connected(cfg.gossip.network_graph):  # pragma: no cover - fixed graphs
        raise ValueError("graph not connected")
    out = training_model(cfg, streams)
    steps, time = np.asarray(out["steps"]), np.asarray(out["time"])
    res: dict[str, Any] = {}
    for q, frac in enumerate(CHECKPOINTS, start=1):
        k = int(np.searchsorted(steps, frac * steps[-1]))
        res[f"time_{q}"] = float(time[k])
        res[f"accuracy_{q}"] = float(out["test_accuracy"][k])
        res[f"distance_{q}"] = float(out["distance_to_optimum"][k])
    res["accuracy_at_optimum"] = float(training_objective(cfg).test_accuracy(
        training_objective(cfg).optimum))
    res.update(bound_terms(cfg))
    return res


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Accuracy against simulated time per defence (one figure per graph and attack); a table."""
    from sim.plotting import plot_sweep
    from sim.results import write_csv

    rows = results.summary()
    out_dir = Path(out_dir)
    for graph in dict.fromkeys(r["graph"] for r in rows):
        for attack in dict.fromkeys(r["attack"] for r in rows):
            series = []
            for r in rows:
                if r["graph"] != graph or r["attack"] != attack:
                    continue
                for q in range(1, len(CHECKPOINTS) + 1):
                    series.append({"defence": r["defence"], "time": r[f"time_{q}_mean"],
                                   **{f"{m}_{s}": r[f"{m}_{q}_{s}"] for s in ("mean", "low", "high")
                                      for m in ("accuracy", "distance")}})
            name = graph.split(":")[0]
            plot_sweep(series, "time", "accuracy", out_dir / f"accuracy_{name}_{attack}.png",
                       group="defence", xlabel="simulated wall time",
                       ylabel="held-out test accuracy of the honest mean",
                       title=f"digits, n = 20, 10% adversaries: {attack} on {name}")
            plot_sweep(series, "time", "distance", out_dir / f"distance_{name}_{attack}.png",
                       group="defence", xlabel="simulated wall time", logy=True,
                       ylabel="|honest mean - x*|",
                       title=f"digits, n = 20, 10% adversaries: {attack} on {name}")
    last = len(CHECKPOINTS)
    table = [{"graph": r["graph"], "attack": r["attack"], "defence": r["defence"],
              "accuracy": r[f"accuracy_{last}_mean"], "accuracy_low": r[f"accuracy_{last}_low"],
              "accuracy_high": r[f"accuracy_{last}_high"],
              "distance": r[f"distance_{last}_mean"], "time": r[f"time_{last}_mean"],
              "accuracy_at_optimum": r["accuracy_at_optimum_mean"],
              "delta_max": r["delta_max_mean"], "zeta2": r["zeta2_mean"],
              "gamma": r["gamma_mean"], "bound": r["bound_mean"]} for r in rows]
    write_csv(table, out_dir / "final_table.csv")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
