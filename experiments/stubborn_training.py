"""What one stubborn node does to gossip *training* (not averaging).

Study B's stubborn node captures gossip averaging: the honest mean goes to
``b`` at rate ``1 - 1/(n (n - 1))`` per random pair. When the values train --
every honest node pulls toward its own optimum ``c_i`` between exchanges
(``H`` local steps of size ``eta`` on ``f_i(x) = a_i/2 (x - c_i)^2``) -- capture
becomes a biased equilibrium. This sweep measures, by simulation of random-edge
gossip training with one stubborn node at ``b``, the long-run honest mean and
its bias from the honest optimum ``x*``, beside the exact equilibrium
(:func:`sim.analytic.learning.stubborn_training_bias`), the exact number of
steps to get within 1 % of it, and Study B's number of steps for averaging
to be 99 % captured; with a clip radius (not affine, no exact value) the
simulation alone answers.

Each replication runs ``3 x`` the exact steps to equilibrium (without clip) and
averages the honest mean over the last third (the stationary part), so the
"bias" metrics are time averages of one stationary run; their interval is
across replications.

Run::

    dtsim run experiments/stubborn_training.py --quick
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim.analytic import learning as L
from sim.gossip import GossipConfig
from sim.learning import (
    GossipTrainingConfig,
    LearningConfig,
    gossip_training_model,
    training_objective,
)
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "stubborn_training"

#: One point: graph, size, step size, local steps, clip radius (None: no clip).
BASE = {"graph": "complete", "nodes": 10, "lr": 0.1, "local_steps": 1, "clip": None,
        "b": 5.0, "curvature_spread": 0.5, "optimum_spread": 1.0, "objective_seed": 0}

FACTORS = {
    "graph": ["complete", "ring", "random_regular:degree=4"],
    "nodes": [10, 30],
    "lr": [0.02, 0.1, 0.3],
    "local_steps": [1, 4],
    "clip": [None, 1.0],
}

REPLICATIONS = 40
SEED = 16

QUICK = {
    "FACTORS": {"graph": ["complete", "ring", "random_regular:degree=4"], "nodes": [10],
                "lr": [0.1, 0.3], "local_steps": [1, 4], "clip": [None, 1.0]},
    "REPLICATIONS": 20,
}


# ----------------------------------------------------------------------------- model


def _configs(p: dict[str, Any], rounds: int = 1) -> GossipTrainingConfig:
    g = GossipConfig(topology=p["graph"], nodes=p["nodes"], topology_seed=0, protocol="edge",
                     rounds=rounds, adversary="stubborn", adversary_value=p["b"],
                     clip=p["clip"], record_every=max(1, rounds // 30), init_mean=0.0)
    lc = LearningConfig(objective="quadratic", lr=p["lr"], local_steps=p["local_steps"],
                        curvature_spread=p["curvature_spread"],
                        optimum_spread=p["optimum_spread"], objective_seed=p["objective_seed"])
    return GossipTrainingConfig(g, lc)


def exact(p: dict[str, Any]) -> dict[str, float]:
    """The exact equilibrium, its bias, the steps to reach it, and Study B's capture steps."""
    cfg = _configs(p)
    obj = training_objective(cfg)
    G = cfg.gossip.network_graph
    stub = {0: p["b"]}
    out = L.stubborn_training_bias("edge", obj.curvature, obj.centres, p["lr"], p["local_steps"],
                                   stub, graph=G)
    steps = L.steps_to_equilibrium("edge", obj.curvature, obj.centres, p["lr"], p["local_steps"],
                                   graph=G, stubborn=stub, x0=0.0, tol=0.01)
    n = p["nodes"]
    return {
        "exact_mean": float(out["honest_mean"][0]),
        "exact_bias": float(out["bias"][0]),
        "exact_attack_bias": float(out["attack_bias"][0]),
        "exact_steps": int(steps),
        "optimum": float(out["optimum"][0]),
        "averaging_mean": float(p["b"]),  # lr = 0: captured (Study B)
        "capture_steps_99": float(math.log(0.01) / math.log(1 - 1 / (n * (n - 1)))),
    }


def model(config: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """One replication: the stationary honest mean and bias, with the exact values."""
    ex = exact(config)
    rounds = 3 * max(ex["exact_steps"], 10)
    cfg = _configs(config, rounds)
    out = gossip_training_model(cfg, streams)
    steps = out["steps"]
    tail = steps >= 2 * rounds // 3
    m = float(np.asarray(out["honest_mean"])[tail, 0].mean())
    res = dict(ex)
    res.update({
        "stationary_mean": m,
        "stationary_bias": m - ex["optimum"],
        "final_mean": float(np.asarray(out["honest_mean"])[-1, 0]),
        "stationary_consensus": float(np.asarray(out["consensus_distance"])[tail].mean()),
        "rounds": rounds,
    })
    return res


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Bias against lr (per H and graph) with the exact value; a table of agreement."""
    from sim.plotting import plot_sweep
    from sim.results import write_csv

    rows = results.summary()
    out_dir = Path(out_dir)
    for clip in sorted({r["clip"] for r in rows}, key=lambda v: (v is not None, v or 0)):
        for H in sorted({r["local_steps"] for r in rows}):
            sel = [dict(r, graph_n=f"{r['graph']} n={r['nodes']}") for r in rows
                   if r["clip"] == clip and r["local_steps"] == H]
            plot_sweep(sel, "lr", "stationary_bias",
                       out_dir / f"bias_H{H}_clip{clip}.png", group="graph_n",
                       exact=None if clip is not None else "exact_bias_mean",
                       ylabel="stationary honest mean - x* (b - x* ~ 5)",
                       title=f"one stubborn node at b = 5, H = {H}, clip = {clip} "
                             "(dashed: exact)")
    table = []
    for r in rows:
        ex = r["exact_bias_mean"]
        lo, hi = r["stationary_bias_low"], r["stationary_bias_high"]
        table.append({
            "graph": r["graph"], "n": r["nodes"], "lr": r["lr"], "H": r["local_steps"],
            "clip": r["clip"], "exact_bias": ex, "sim_bias": r["stationary_bias_mean"],
            "sim_low": lo, "sim_high": hi,
            "agrees": (lo <= ex <= hi) if r["clip"] is None else "",
            "exact_steps": r["exact_steps_mean"], "capture_steps_99": r["capture_steps_99_mean"],
            "averaging_bias": r["averaging_mean_mean"] - r["optimum_mean"],
        })
    write_csv(table, out_dir / "bias_table.csv")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
