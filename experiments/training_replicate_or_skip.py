"""Replicate or skip, in samples per second: Study A's designs as a training system.

Study A ranks pipeline designs by drop rate and by workers per unit of
quality-weighted goodput, ``cost(r, s) = L r / E[(1 - kappa)**K ; K <= s]``, in
a snapshot with free, instant failover and no compute time. Here the same
designs train in simulated wall clock (:mod:`sim.training`): replicas are
servers (so a replica adds capacity), SWARM steps of ``m`` microbatches with
least-loaded routing, backward passes on the forward replica, a detection
timeout before a lost pass is re-queued, recomputation of lost activations, a
weight download by every recovering replica, and Study A's skip rule (drop
beyond the budget, no waiting).

Designs (``L = 48``, ``a = 0.9``):

* the drop-target pair at ``rho = 1e-5``: ``r = 5, s = 0`` (240 workers) and
  ``r = 2, s = 4`` (96 workers), with ``r = 3, s = 0`` for comparison, at
  ``kappa = 0.05``;
* the kappa sweep at ``rho = 1e-3``: for each kappa, Study A's cost-optimal
  design and the best no-skip design (``r = 3``).

Measured: quality-weighted samples per second per worker
(``goodput_per_worker``), next to the snapshot's quality mass per worker
(``snapshot_per_worker = mass / (L r)``, the inverse of Study A's cost) and the
drop rates; ``analyse`` ranks the designs of each group both ways.

Run::

    dtsim run experiments/training_replicate_or_skip.py --quick
    python experiments/training_replicate_or_skip.py

Writes ``goodput_per_worker.png`` and ``ranking.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.rng import Streams
from sim.training import TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "training_replicate_or_skip"

#: 48 stages of 1 s forward and 2 s backward per microbatch; workers up 90 % of
#: the time with outages of 50 s; a lost pass is noticed after 2 s; a recovering
#: replica downloads 20 units of weights at 2 units/s (10 s); activations take
#: 0.05 s per hop; 64 microbatches per step; all-reduce of the weights per stage.
BASE = TrainingConfig(
    stages=48, replicas=3, microbatches=64, steps=8, schedule="swarm", routing="least-loaded",
    forward_time=1.0, backward_ratio=2.0, availability=0.9, mean_downtime=50.0,
    domain_outage=1e-3, domain_downtime=50.0, detection_timeout=2.0, param_size=20.0,
    bandwidth=2.0, latency=0.05, sync="allreduce", skip_budget=0, skip_penalty=0.05,
)


def _points() -> list[dict[str, Any]]:
    pts = [dict(domain_outage=1e-5, skip_penalty=0.05, replicas=r, skip_budget=s)
           for r, s in ((5, 0), (2, 4), (3, 0))]
    sweep = analytic.kappa_sweep(**analytic.STUDY_A_KAPPA_SWEEP)
    for kappa, opt in sweep:
        for r, s in ((opt.replicas, opt.skip_budget), (opt.noskip_replicas, 0)):
            pts.append(dict(domain_outage=1e-3, skip_penalty=kappa, replicas=r, skip_budget=s))
    return pts


POINTS = _points()
REPLICATIONS = 6
#: Metrics that are probabilities (drop rates, whether the run finished, fractions of time): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "finished": None, "bubble_fraction": None, "utilisation": None, "snapshot_drop_rate": None}
#: Every other metric is a time, a count or a throughput: intervals cut at 0.
NONNEGATIVE = "*"
SEED = 14
QUICK = {
    "BASE": {"steps": 2, "microbatches": 32},
    "POINTS": [p for p in POINTS if p["skip_penalty"] in (0.05, 0.8)],
    "REPLICATIONS": 2,
}


# ----------------------------------------------------------------------------- model


def snapshot(config: TrainingConfig) -> tuple[float, float]:
    """Study A's drop rate and quality mass per worker for the config's design."""
    r = config.replicas[0]
    q = analytic.stage_outage(config.availability, r, config.domain_outage)
    mass = analytic.quality_mass(config.stages, q, config.skip_budget, config.skip_penalty,
                                 config.penalty)
    drop = analytic.drop_probability_q(config.stages, q, config.skip_budget)
    return drop, mass / (config.stages * r)


def model(config: TrainingConfig, streams: Streams) -> dict[str, float]:
    """One replication: the training metrics plus the snapshot references."""
    out = dict(training_model(config, streams))
    out["goodput_per_worker"] = out["goodput"] / out["workers"]
    drop, per_worker = snapshot(config)
    out["snapshot_drop_rate"] = drop
    out["snapshot_per_worker"] = per_worker
    return out


# ----------------------------------------------------------------------------- analysis


def _group(row: dict[str, Any]) -> str:
    if float(row["domain_outage"]) < 1e-4:
        return "drop target (rho 1e-5)"
    return f"kappa {float(row['skip_penalty']):g}"


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Per group: the ranking by simulated goodput per worker against the snapshot's."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        row["design"] = f"r={row['replicas']}, s={row['skip_budget']}"
        row["kind"] = "no skip" if int(row["skip_budget"]) == 0 else "skip"
        groups.setdefault(_group(row), []).append(row)
    lines = ["| group | design | workers | drop (snapshot) | drop (simulated) | "
             "snapshot mass/worker | goodput/worker (95% CI) | rank snapshot | rank simulated |",
             "|---|---|---|---|---|---|---|---|---|"]
    flips = []
    for g, rs in groups.items():
        by_snap = sorted(rs, key=lambda r: -float(r["snapshot_per_worker_mean"]))
        by_sim = sorted(rs, key=lambda r: -float(r["goodput_per_worker_mean"]))
        by_drop = sorted(rs, key=lambda r: float(r["snapshot_drop_rate_mean"]))
        if [r["design"] for r in by_sim] != [r["design"] for r in by_drop]:
            flips.append(f"{g}: by drop rate {', '.join(r['design'] for r in by_drop)}; by "
                         f"goodput per worker {', '.join(r['design'] for r in by_sim)}")
        for r in rs:
            lines.append(
                f"| {g} | {r['design']} | {float(r['workers_mean']):.0f} | "
                f"{float(r['snapshot_drop_rate_mean']):.3g} | {float(r['drop_rate_mean']):.3g} | "
                f"{float(r['snapshot_per_worker_mean']):.4g} | "
                f"{float(r['goodput_per_worker_mean']):.4g} [{float(r['goodput_per_worker_low']):.4g}, "
                f"{float(r['goodput_per_worker_high']):.4g}] | {by_snap.index(r) + 1} | "
                f"{by_sim.index(r) + 1} |")
    text = "\n".join(lines) + "\n\nRanking departures from the drop-rate ranking:\n\n" + (
        "\n".join(f"- {f}" for f in flips) if flips else "- none") + "\n"
    (Path(out_dir) / "ranking.md").write_text(text)
    sweep = [r for r in rows if float(r["domain_outage"]) >= 1e-4]
    plot_sweep(sweep, "skip_penalty", "goodput_per_worker",
               Path(out_dir) / "goodput_per_worker.png", group="kind",
               xlabel="skip penalty kappa", ylabel="quality-weighted samples / s / worker",
               title="SWARM training, L=48, a=0.9: cost-optimal skip design vs no-skip r=3")
    print(text)


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
