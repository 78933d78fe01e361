"""Example sweep: joint outage of a failure domain's workers, simulated vs exact.

Workers fail and recover (exponential up/down times) inside flat failure
domains that have their own outages. All ``r`` workers of a domain are down
together a fraction ``rho + (1 - rho) (1 - a)**r`` of the time (``a`` worker
availability, ``rho`` domain unavailability). This sweep measures that fraction
over a grid of ``a`` and ``rho`` and compares it with the formula.

Run it (a copy of this file is the template for a new experiment)::

    dtsim run experiments/example_sweep.py --quick
    python experiments/example_sweep.py --quick --executor serial
    dtsim plot out/example_sweep_quick

See docs/experiments.md for what an experiment file defines.
"""

from __future__ import annotations

import sys
from pathlib import Path

import sim.runner
from sim.failures import ClusterConfig, failures_model
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "example_sweep"

#: 12 workers in 4 domains: r = 3 workers per domain.
BASE = ClusterConfig(
    workers=12, domains=4, availability=0.9, mean_downtime=1.0,
    domain_outage=0.02, domain_mean_downtime=2.0, horizon=10_000.0,
)

FACTORS = {
    "availability": [0.6, 0.7, 0.8, 0.9],
    "domain_outage": [0.0, 0.02, 0.05],
}

REPLICATIONS = 20
#: Metrics that are probabilities (fractions of time): intervals inside [0, 1] in summary.csv.
RATES = {m: None for m in ("worker_availability", "effective_availability", "domain_unavailability", "joint_outage")}
#: Metrics the model computes from the config alone: exact in summary.csv, with no interval.
FIXED = {"exact_joint_outage": "the closed form of the point's config"}
SEED = 0

QUICK = {
    "BASE": {"horizon": 2_000.0},
    "FACTORS": {"availability": [0.7, 0.9], "domain_outage": [0.0, 0.05]},
    "REPLICATIONS": 5,
}


# ----------------------------------------------------------------------------- model


def exact_joint_outage(config: ClusterConfig) -> float:
    """``rho + (1 - rho) (1 - a)**r`` for the domains of ``config`` (r workers each)."""
    r = config.workers // config.domains
    rho, a = config.domain_outage, config.availability
    return rho + (1 - rho) * (1 - a) ** r


def model(config: ClusterConfig, streams: Streams) -> dict[str, float]:
    """One replication: the failure model's measurements plus the exact reference."""
    out = dict(failures_model(config, streams))
    out["exact_joint_outage"] = exact_joint_outage(config)
    return out


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Joint outage against availability, one line per domain outage, exact dashed."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    plot_sweep(
        rows, "availability", "joint_outage", Path(out_dir) / "joint_outage.png",
        group="domain_outage", exact="exact_joint_outage_mean", logy=True,
        ylabel="fraction of time all r workers of a domain are down",
        title="Joint outage: simulated (95% CI) vs exact (dashed)",
    )


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
