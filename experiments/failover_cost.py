"""Stress test 4: failover costs time -- detection timeout and recompute.

Study A's failover is instant and free: a stage is usable whenever one of its
``r`` replicas is up. Here every stage computes for one time unit, and when the
serving replica fails mid-computation the microbatch notices only after a
``detection_timeout``, then recomputes the stage from scratch on another live
replica (or skips the stage if none is left). Microbatches run back to back
(the next enters when the previous leaves), so time lost to failover is
throughput lost. The skip budget is unlimited (``s = L``): an out stage is
skipped at a quality cost ``kappa``, never dropped. (With a finite budget and
back-to-back arrivals a microbatch dropped before any compute leaves at once
and the next one meets the same outage at the same instant, so per-microbatch
drop rates would be meaningless; with ``s = L`` every microbatch spends time.)

The closed form it departs from: the snapshot goodput
``E[(1 - kappa)**K ; K <= s] / (L t)`` (quality mass of Study A at
``q = (1 - a)**r`` times the ideal crossing rate) and the cost ``L r / mass``
of :func:`sim.analytic.design_cost`; per worker, ``mass / (L t L r)``.

Swept: replicas ``r`` and the detection timeout. Measured: goodput per worker
(quality-weighted microbatches per time unit per worker), p99 crossing
latency, and for each timeout the ``r`` beyond which another replica costs
more throughput per worker than it saves.

Run::

    dtsim run experiments/failover_cost.py --quick
    python experiments/failover_cost.py        # full run

Writes ``failover.png``, ``failover.csv`` and ``failover.md`` and prints the finding.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "failover_cost"

#: 16 stages of one time unit each, back to back; a = 0.9 with outages of 10
#: stage times (a replica fails about once per 90 time units of service);
#: every out stage skipped at a 50 % quality loss (closed-form optimum r = 2).
BASE = PipelineConfig(
    stages=16, replicas=2, skip_budget=16, skip_penalty=0.5, availability=0.9,
    mean_downtime=10.0, stage_time=1.0, arrival="back_to_back", microbatches=3_000,
    detection_timeout=0.0, records=True,
)
FACTORS = {
    "detection_timeout": [0.0, 2.0, 8.0, 32.0, 128.0],
    "replicas": [1, 2, 3, 4],
}
REPLICATIONS = 10
SEED = 4
QUICK = {
    "BASE": {"microbatches": 400},
    "FACTORS": {"detection_timeout": [0.0, 32.0], "replicas": [1, 2, 3]},
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- closed form


def snapshot_goodput(config: PipelineConfig) -> float:
    """Study A's goodput with free failover: ``E[(1-kappa)^K; K <= s] / (L t)``."""
    r = config.replicas[0]
    q = analytic.stage_outage(config.availability, r, config.domain_outage)
    mass = analytic.quality_mass(config.stages, q, config.skip_budget, config.skip_penalty,
                                 config.penalty)
    return mass / sum(config.stage_time)


# ----------------------------------------------------------------------------- model


def model(config: PipelineConfig, streams: Streams) -> dict[str, float]:
    """One replication: the pipeline metrics plus goodput per worker and the closed form."""
    m = des_pipeline_model(config, streams)
    return {
        "goodput": m["goodput"],
        "goodput_per_worker": m["goodput"] / config.workers,
        "snapshot_goodput_per_worker": snapshot_goodput(config) / config.workers,
        "mean_skipped": m["mean_skipped"],
        "latency_mean": m["latency_mean"],
        "latency_p99": m["latency_p99"],
        "failovers_per_microbatch": m["failovers_per_microbatch"],
    }


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per (timeout, r): simulated (95% CI) against the snapshot closed form."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        cf = snapshot_goodput(cfg) / cfg.workers
        row: dict[str, Any] = {"detection_timeout": cfg.detection_timeout,
                               "replicas": cfg.replicas[0], "replications": len(recs)}
        for key in ("goodput_per_worker", "goodput", "mean_skipped", "latency_mean", "latency_p99",
                    "failovers_per_microbatch"):
            e = mean_ci([r[key] for r in recs])
            row[key], row[f"{key}_low"], row[f"{key}_high"] = e.mean, e.low, e.high
        row["goodput_per_worker_cf"] = cf
        row["goodput_over_cf"] = row["goodput_per_worker"] / cf
        row["cf_in_interval"] = bool(row["goodput_per_worker_low"] <= cf
                                     <= row["goodput_per_worker_high"])
        rows.append(row)
    return rows


def best_replicas(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per timeout, the r maximising goodput per worker, simulated and by the closed form.

    ``clear`` says whether the simulated best beats the next r by more than both intervals
    (the upper end of the runner-up below the lower end of the best).
    """
    out = []
    for t in sorted({r["detection_timeout"] for r in rows}):
        rs = sorted((r for r in rows if r["detection_timeout"] == t), key=lambda r: r["replicas"])
        sim_best = max(rs, key=lambda r: r["goodput_per_worker"])
        cf_best = max(rs, key=lambda r: r["goodput_per_worker_cf"])
        others = [r for r in rs if r is not sim_best]
        runner = max(others, key=lambda r: r["goodput_per_worker"]) if others else None
        clear = bool(runner is None or runner["goodput_per_worker_high"] < sim_best["goodput_per_worker_low"])
        out.append({"detection_timeout": t, "best_r_sim": sim_best["replicas"],
                    "best_r_closed_form": cf_best["replicas"], "clear": clear,
                    "runner_up_r": runner["replicas"] if runner else None})
    return out


COLUMNS = ["detection_timeout", "replicas", "goodput_per_worker", "goodput_per_worker_low",
           "goodput_per_worker_high", "goodput_per_worker_cf", "goodput_over_cf", "mean_skipped",
           "latency_mean", "latency_p99", "latency_p99_low", "latency_p99_high",
           "failovers_per_microbatch"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = "Failover costs time: goodput per worker and p99 latency vs r and detection timeout"
    text = write_tables(rows, COLUMNS, out_dir, "failover", title, fmt=format_4g)
    timeouts = sorted({r["detection_timeout"] for r in rows})
    reps = sorted({r["replicas"] for r in rows})
    ticks = (list(range(len(timeouts))), [f"{t:g}" for t in timeouts])
    ratio, good, lat = [], [], []
    for i, t in enumerate(timeouts):
        rs = sorted((r for r in rows if r["detection_timeout"] == t), key=lambda r: r["replicas"])
        good.append({"label": f"timeout {t:g}", "x": [r["replicas"] for r in rs], "style": "points",
                     "color": f"C{i}", "mean": [r["goodput_per_worker"] for r in rs],
                     "low": [r["goodput_per_worker_low"] for r in rs],
                     "high": [r["goodput_per_worker_high"] for r in rs]})
    for i, rep in enumerate(reps):
        rs = sorted((r for r in rows if r["replicas"] == rep), key=lambda r: r["detection_timeout"])
        x = [timeouts.index(r["detection_timeout"]) + 0.06 * (i - 1.5) for r in rs]
        s = {"label": f"r={rep}", "x": x, "style": "points", "color": f"C{i}"}
        cf = [r["goodput_per_worker_cf"] for r in rs]
        ratio.append(s | {"mean": [r["goodput_per_worker"] / c for r, c in zip(rs, cf, strict=True)],
                          "low": [r["goodput_per_worker_low"] / c for r, c in zip(rs, cf, strict=True)],
                          "high": [r["goodput_per_worker_high"] / c for r, c in zip(rs, cf, strict=True)]})
        lat.append(s | {"mean": [r["latency_p99"] for r in rs],
                        "low": [r["latency_p99_low"] for r in rs],
                        "high": [r["latency_p99_high"] for r in rs]})
    if rows:
        rs = sorted((r for r in rows if r["detection_timeout"] == timeouts[0]),
                    key=lambda r: r["replicas"])
        good.append({"label": None, "x": [], "mean": [], "color": "k",
                     "ref_x": [r["replicas"] for r in rs],
                     "ref_y": [r["goodput_per_worker_cf"] for r in rs],
                     "ref_label": "closed form: quality mass / (L t L r)"})
        lat.append({"label": None, "x": [], "mean": [], "color": "k",
                    "ref_x": [0, len(timeouts) - 1], "ref_y": [sum(BASE.stage_time)] * 2,
                    "ref_label": "closed form: L t (no failover time)"})
    plot_stress_panels(
        [{"xlabel": "detection timeout (stage times)", "ylabel": "goodput per worker / closed form",
          "title": "Goodput per worker relative to the closed form", "series": ratio, "hline": 1.0,
          "xticks": ticks},
         {"xlabel": "replicas per stage r", "ylabel": "goodput per worker (quality / time / worker)",
          "title": "Goodput per worker: which r pays", "series": good},
         {"xlabel": "detection timeout (stage times)", "ylabel": "p99 crossing latency (time units)",
          "title": "p99 latency of delivered microbatches", "series": lat, "logy": True,
          "xticks": ticks}],
        out_dir / "failover.png",
        title=f"Failover costs time (L={BASE.stages}, stage time 1, back to back, a={BASE.availability}, "
              f"mean downtime {BASE.mean_downtime:g}, s=L, kappa={BASE.skip_penalty})",
        caption=f"Pipeline DES with compute time, detection timeout and recompute on failover. Points: "
                f"simulation, 95% CI across {rows[0]['replications'] if rows else 0} replications; black "
                "dashed and the dotted line at 1: the snapshot closed form with free, instant failover.")
    print(f"\n{NAME}: goodput per worker and p99 latency vs r and detection timeout\n{text}\n")
    for r in rows:
        print(f"  timeout {r['detection_timeout']:g}, r={r['replicas']}: goodput/worker "
              f"{r['goodput_per_worker']:.5f} [{r['goodput_per_worker_low']:.5f}, "
              f"{r['goodput_per_worker_high']:.5f}] vs closed form {r['goodput_per_worker_cf']:.5f} "
              f"({r['goodput_over_cf']:.3f}x, {'inside' if r['cf_in_interval'] else 'OUTSIDE'}); "
              f"p99 latency {r['latency_p99']:.1f} [{r['latency_p99_low']:.1f}, {r['latency_p99_high']:.1f}]; "
              f"skipped stages {r['mean_skipped']:.3f}; failovers/microbatch {r['failovers_per_microbatch']:.3f}")
    for b in best_replicas(rows):
        print(f"  timeout {b['detection_timeout']:g}: best r for goodput per worker: simulated "
              f"r={b['best_r_sim']} ({'clear of' if b['clear'] else 'within the intervals of'} "
              f"r={b['runner_up_r']}), closed form r={b['best_r_closed_form']}")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
