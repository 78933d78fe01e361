"""Heterogeneous speeds: throughput under each routing policy against the saturated bound.

Eight stages of four replicas each train with no step barrier (async) from an
unbounded supply of microbatches. Replica speeds are lognormal of mean 1 with
spread ``sigma`` (one fixed table per ``sigma``, drawn once from the
experiment's seed), so a stage's capacity is its summed speed over the
per-microbatch work, and the pipeline's is the least of them (SWARM's
``min_j sum_i v_ij / w_j``, :func:`sim.analytic.saturated_throughput`). Each
routing policy (one shared queue, least-loaded, weighted by speed, round
robin) is run at each spread; the measured steady throughput (between the
first and last 10 % of completions) is compared with the bound.

Run::

    dtsim run experiments/training_heterogeneous.py --quick
    python experiments/training_heterogeneous.py

Writes ``throughput_vs_spread.png`` and ``routing.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.rng import Streams
from sim.training import PAIRS, TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "training_heterogeneous"
SEED = 16
STAGES, REPLICAS = 8, 4
SPREADS = (0.0, 0.3, 0.6, 1.0)


def speed_table(sigma: float) -> tuple[tuple[float, ...], ...]:
    """Speeds ``[j][i]``, lognormal of mean 1 and spread ``sigma`` (one fixed draw per ``sigma``)."""
    rng = Streams(SEED).rng("speed_table", int(round(sigma * 1000)))
    v = rng.lognormal(-sigma * sigma / 2.0, sigma, (STAGES, REPLICAS)) if sigma else \
        [[1.0] * REPLICAS] * STAGES
    return tuple(tuple(round(float(x), 6) for x in row) for row in v)


#: Forward 1/3 s and backward 2/3 s per stage (work 1 s per microbatch per
#: stage at speed 1); 20 steps of 100 microbatches, all available at once.
BASE = TrainingConfig(
    stages=STAGES, replicas=REPLICAS, microbatches=100, steps=20, schedule="async",
    routing="weighted", forward_time=1 / 3, backward_ratio=2.0,
)


def _points(spreads) -> list[dict[str, Any]]:
    return [dict(speeds=speed_table(s), routing=r) for s in spreads for r in PAIRS["async"]]


POINTS = _points(SPREADS)
REPLICATIONS = 6
#: Metrics that are probabilities (a drop rate, whether the run finished, fractions of time): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "finished": None, "bubble_fraction": None, "utilisation": None}
#: Every other metric is a time, a count or a throughput: intervals cut at 0.
NONNEGATIVE = "*"
QUICK = {
    "BASE": {"steps": 6},
    "POINTS": _points((0.0, 0.6)),
    "REPLICATIONS": 2,
}


# ----------------------------------------------------------------------------- model


def sigma_of(config: TrainingConfig) -> float:
    """The spread whose table the config's speeds are."""
    for s in SPREADS:
        if config.speeds == speed_table(s):
            return s
    return float("nan")


def model(config: TrainingConfig, streams: Streams) -> dict[str, float]:
    """One replication, with the saturated bound and the spread."""
    out = dict(training_model(config, streams))
    work = [t * (1 + config.backward_ratio) for t in config.forward_time]
    out["bound"] = analytic.saturated_throughput(config.speeds, work)
    out["spread"] = sigma_of(config)
    out["fraction_of_bound"] = out["throughput_steady"] / out["bound"]
    return out


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Steady throughput against the spread, one line per routing policy, bound dashed."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    for r in rows:
        r["spread"] = r["spread_mean"]
    plot_sweep(rows, "spread", "throughput_steady", Path(out_dir) / "throughput_vs_spread.png",
               group="routing", exact="bound_mean", xlabel="speed spread sigma (lognormal)",
               ylabel="steady throughput (microbatches / s)",
               title="Async 8x4: routing vs saturated bound (dashed)")
    lines = ["| spread | routing | bound | steady throughput (95% CI) | fraction of bound |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {float(r['spread']):g} | {r['routing']} | {float(r['bound_mean']):.4g} | "
                     f"{float(r['throughput_steady_mean']):.4g} [{float(r['throughput_steady_low']):.4g}, "
                     f"{float(r['throughput_steady_high']):.4g}] | "
                     f"{float(r['fraction_of_bound_mean']):.3f} |")
    text = "\n".join(lines) + "\n"
    (Path(out_dir) / "routing.md").write_text(text)
    print(text)


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
