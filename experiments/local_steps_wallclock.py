"""Local steps in wall clock: which H reaches a target loss first?

Every node trains a heterogeneous quadratic (``d = 10``, curvatures in
[0.5, 1.5], optima ``N(0, 1)``, start at 3 in every coordinate) with noisy
gradients (``sigma = 0.3``); a local step takes ``step_time`` and an exchange
``latency + size / bandwidth`` (here 0.1 and 0.5 + 1/1, so one exchange costs
15 local steps). Two protocols:

``allreduce``
    synchronous local SGD (DiLoCo-style): ``H`` local steps, then an exact
    all-reduce; a round lasts ``H * step_time`` plus one exchange. Larger ``H``
    means fewer, cheaper-per-step communications but a biased fixed point
    ``sum w c / sum w``, ``w = 1 - (1 - eta a)^H`` (exact, reported as
    ``floor_loss``);
``async``
    every node steps continuously and gossips with a random peer at rate
    ``1 / (H step_time)`` (once per ``H`` local steps on average); exchanges
    are in flight for their link time.

With and without an adversary (one stubborn node at ``b = 3``), each with plain
averaging or a defence (``robust``: a trimmed mean for ``allreduce``, a fixed
clip for ``async``). Measured per replication: the
first simulated time at which the honest mean's loss ``F(m) - F(x*)`` falls
below ``TARGET`` (the horizon if never, with ``reached = 0``). The target sits
between the DiLoCo floor of moderate ``H`` and that of large ``H``, so that
neither extreme of ``H`` wins by default.

Run::

    dtsim run experiments/local_steps_wallclock.py --quick
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

NAME = "local_steps_wallclock"

BASE = {"protocol": "allreduce", "local_steps": 1, "adversary": "none", "defence": "plain",
        "nodes": 16, "dim": 10,
        "lr": 0.05, "grad_noise": 0.3, "step_time": 0.1, "latency": 0.5, "bandwidth": 1.0,
        "size": 1.0, "horizon": 300.0, "b": 3.0, "clip": 0.5, "trim": 1, "init_mean": 3.0,
        "objective_seed": 0}

FACTORS = {
    "protocol": ["allreduce", "async"],
    "local_steps": [1, 2, 4, 8, 16, 32, 64],
    "adversary": ["none", "stubborn"],
    "defence": ["plain", "robust"],
}

REPLICATIONS = 10
#: Metrics that are probabilities (whether a replication reached the target: a probability): intervals inside [0, 1] in summary.csv.
RATES = {"reached": None}
SEED = 18
#: Target loss F(m) - F(x*) (the start is about 45).
TARGET = 0.005

QUICK = {
    "BASE": dict(BASE, horizon=150.0),
    "FACTORS": {"protocol": ["allreduce", "async"], "local_steps": [1, 4, 16, 64],
                "adversary": ["none", "stubborn"], "defence": ["plain", "robust"]},
    "REPLICATIONS": 4,
}


# ----------------------------------------------------------------------------- model


def config_of(p: dict[str, Any]) -> GossipTrainingConfig:
    """The :class:`~sim.learning.GossipTrainingConfig` of a point."""
    H, st = p["local_steps"], p["step_time"]
    link = p["latency"] + p["size"] / p["bandwidth"]
    stub = p["adversary"] == "stubborn"
    robust = p["defence"] == "robust"
    # every exchange on its own link (latency + size / bandwidth): this experiment's law
    # (issue 21's contention, on by default, would share the pairs' links and NICs)
    common = dict(topology=f"complete:latency={p['latency']},bandwidth={p['bandwidth']}",
                  contention=False,
                  nodes=p["nodes"], dim=p["dim"], size=p["size"], init_mean=p["init_mean"],
                  init_std=0.0, adversary="stubborn" if stub else "none",
                  adversary_value=p["b"] if stub else None)
    if p["protocol"] == "allreduce":
        rounds = max(1, int(math.ceil(p["horizon"] / (H * st + link))))
        g = GossipConfig(protocol="allreduce", rounds=rounds, record_every=1, **common)
        rule = "trimmed" if robust else "none"
    else:
        g = GossipConfig(protocol="async", rounds=int(p["horizon"]), record_every=1,
                         wake_rate=1.0 / (H * st), clip=p["clip"] if robust else None, **common)
        rule = "none"
    lc = LearningConfig(objective="quadratic", lr=p["lr"], local_steps=H,
                        grad_noise=p["grad_noise"], curvature_spread=0.5, optimum_spread=1.0,
                        step_time=(st,), objective_seed=p["objective_seed"])
    return GossipTrainingConfig(g, lc, rule=rule, trim=p["trim"])


def model(config: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """One replication: the time to reach the target loss, and the exact DiLoCo floor."""
    cfg = config_of(config)
    out = gossip_training_model(cfg, streams)
    loss, time = np.asarray(out["loss"]), np.asarray(out["time"])
    hit = np.flatnonzero(loss <= TARGET)
    obj = training_objective(cfg)
    fp = L.diloco_fixed_point(obj.curvature, obj.centres, config["lr"], config["local_steps"],
                              honest=cfg.honest)
    return {
        "time_to_target": float(time[hit[0]]) if hit.size else float(time[-1]),
        "reached": float(hit.size > 0),
        "final_loss": float(loss[-1]),
        "floor_loss": float(obj.loss(fp)),
        "local_steps_taken": out["local_steps"],
        "exchanges": out["exchanges"],
    }


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Time to target against H, one line per protocol and adversary; the best H of each."""
    from sim.plotting import plot_sweep
    from sim.results import write_csv

    rows = [dict(r, case=f"{r['protocol']}, {r['adversary']}, {r['defence']}")
            for r in results.summary()]
    out_dir = Path(out_dir)
    plot_sweep(rows, "local_steps", "time_to_target", out_dir / "time_to_target.png",
               group="case", logy=True, xlabel="local steps per communication H",
               ylabel=f"simulated time to loss <= {TARGET} (horizon if never)",
               title="local steps in wall clock (step 0.1, exchange 1.5)")
    plot_sweep(rows, "local_steps", "final_loss", out_dir / "final_loss.png", group="case",
               logy=True, xlabel="local steps per communication H",
               ylabel="loss at the horizon", title="final loss (DiLoCo floor: floor_loss)")
    best = []
    for case in dict.fromkeys(r["case"] for r in rows):
        sel = [r for r in rows if r["case"] == case and r["reached_mean"] == 1.0]
        b = min(sel, key=lambda r: r["time_to_target_mean"]) if sel else None
        best.append({"case": case, "best_H": b["local_steps"] if b else None,
                     "time": b["time_to_target_mean"] if b else None,
                     "time_low": b["time_to_target_low"] if b else None,
                     "time_high": b["time_to_target_high"] if b else None})
    write_csv(best, out_dir / "best_H.csv")
    write_csv([{k: r[k] for k in ("case", "local_steps", "time_to_target_mean",
                                  "time_to_target_low", "time_to_target_high", "reached_mean",
                                  "final_loss_mean", "floor_loss_mean")} for r in rows],
              out_dir / "table.csv")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
