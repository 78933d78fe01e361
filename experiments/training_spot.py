"""Spot against on-demand: samples per dollar, and the checkpoint interval against Young/Daly.

A 4-stage GPipe pipeline, one replica per stage, trains ``N`` steps on either
on-demand workers (never preempted, 3 $/h) or spot workers (1 $/h, preempted
after an exponential time of mean ``mtbf`` and replaced ``replace_time``
later, then downloading the stage's weights). A preempted stage has lost its
weights, so the step in progress is lost and training restarts from the last
checkpoint after the restart cost. Checkpoints every ``K`` steps cost ``C``.

Swept: the worker mtbf (``inf`` is on-demand) and ``K``. Measured: samples per
dollar and time to train; for each mtbf the measured best ``K`` against the
Young and Daly intervals ``sqrt(2 C M)`` and Daly's refinement, with ``M`` the
pipeline's mtbf (``mtbf / L``: any of the ``L`` workers stops it) and the
restart taken as replacement + download + restart cost (the formulas assume
instant repair; the point is how far they are from the measured optimum).

Run::

    dtsim run experiments/training_spot.py --quick
    python experiments/training_spot.py

Writes ``samples_per_dollar.png`` and ``interval.md``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.rng import Streams
from sim.training import TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "training_spot"

ON_DEMAND_PRICE = 3.0
SPOT_PRICE = 1.0

#: 4 stages, 8 microbatches of 1 s forward and 2 s backward per stage (a step
#: takes (8 + 3) x 3 = 33 s); checkpoint 20 s, restart 60 s, replacement 30 s,
#: weight download 30 s; 120 steps; 64 samples per microbatch.
BASE = TrainingConfig(
    stages=4, replicas=1, microbatches=8, steps=120, schedule="gpipe", routing="round-robin",
    forward_time=1.0, backward_ratio=2.0, param_size=30.0, bandwidth=1.0, sync="none",
    checkpoint_every=4, checkpoint_cost=20.0, restart_cost=60.0, replace_time=30.0,
    price=ON_DEMAND_PRICE, samples_per_microbatch=64.0,
)

MTBFS = (math.inf, 8000.0, 2000.0, 800.0)
INTERVALS = (1, 2, 3, 4, 6, 8, 12, 20, 40)


def _points(mtbfs, intervals) -> list[dict[str, Any]]:
    pts = []
    for M in mtbfs:
        for K in intervals if M < math.inf else (max(intervals),):
            pts.append(dict(mtbf=M, checkpoint_every=K,
                            price=ON_DEMAND_PRICE if M == math.inf else SPOT_PRICE))
    return pts


POINTS = _points(MTBFS, INTERVALS)
REPLICATIONS = 16
#: Metrics that are probabilities (a drop rate, whether the run finished, fractions of time): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "finished": None, "bubble_fraction": None, "utilisation": None}
#: Every other metric is a time, a count or a throughput: intervals cut at 0.
NONNEGATIVE = "*"
SEED = 15
QUICK = {
    "BASE": {"steps": 40},
    "POINTS": _points((math.inf, 2000.0), (1, 4, 20)),
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- model


def step_time(config: TrainingConfig) -> float:
    """The failure-free GPipe step time ``(m + L - 1)(t_f + t_b)``."""
    return analytic.pipeline_step_time(config.stages, config.microbatches,
                                       config.forward_time[0], config.backward_time[0])


def model(config: TrainingConfig, streams: Streams) -> dict[str, float]:
    """One replication, with the Young and Daly intervals (in steps) for the pipeline."""
    out = dict(training_model(config, streams))
    t = step_time(config)
    if config.mtbf < math.inf:
        M = config.mtbf / config.workers
        out["young_steps"] = analytic.young_interval(config.checkpoint_cost, M) / t
        out["daly_steps"] = analytic.daly_interval(config.checkpoint_cost, M) / t
    return out


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Samples per dollar against K per mtbf; measured best K against Young and Daly."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    for r in rows:
        r["workers_kind"] = "on-demand" if float(r["mtbf"]) == math.inf else f"spot mtbf {float(r['mtbf']):g}"
    plot_sweep(rows, "checkpoint_every", "samples_per_dollar", Path(out_dir) / "samples_per_dollar.png",
               group="workers_kind", xlabel="checkpoint every K steps", ylabel="samples per dollar",
               title="GPipe L=4 on spot vs on-demand workers")
    lines = ["| workers | best K (measured) | samples/$ at best (95% CI) | time to train at best | "
             "Young K | Daly K | on-demand samples/$ |", "|---|---|---|---|---|---|---|"]
    od = [r for r in rows if r["workers_kind"] == "on-demand"]
    od_spd = float(od[0]["samples_per_dollar_mean"]) if od else math.nan
    for kind in dict.fromkeys(r["workers_kind"] for r in rows):
        if kind == "on-demand":
            continue
        rs = [r for r in rows if r["workers_kind"] == kind]
        best = max(rs, key=lambda r: float(r["samples_per_dollar_mean"]))
        lines.append(
            f"| {kind} | {int(best['checkpoint_every'])} | {float(best['samples_per_dollar_mean']):.4g} "
            f"[{float(best['samples_per_dollar_low']):.4g}, {float(best['samples_per_dollar_high']):.4g}] | "
            f"{float(best['training_time_mean']):.4g} | {float(best['young_steps_mean']):.3g} | "
            f"{float(best['daly_steps_mean']):.3g} | {od_spd:.4g} |")
    text = "\n".join(lines) + "\n"
    (Path(out_dir) / "interval.md").write_text(text)
    print(text)


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
