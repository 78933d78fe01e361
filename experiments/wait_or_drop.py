"""Stress test 5: waiting instead of dropping -- the drop rate vs latency trade-off of max_wait.

Study A drops a microbatch at once when it meets an out stage with its skip
budget spent. Here it may wait up to ``max_wait`` for a replica of that stage
to come back (and is dropped only if none does); every stage it reaches later
is seen as it is then. The closed form it departs from is the study's
``P(drop) = P(Bin(L, q) > s)`` (``max_wait = 0``) and its zero latency.

A first-order approximation for exponential downtimes of mean ``mu`` and no
shared domains: a stage whose ``r`` replicas are all down gets one back after
an ``Exp(r / mu)`` time (memoryless), so if the other stages' states are frozen
while the microbatch waits, a microbatch meeting ``K = k`` out stages must
survive ``j = max(k - s, 0)`` independent waits:

    P(drop) ~ sum_k P(K = k) [1 - (1 - exp(-r w / mu))**j]
    E[latency | delivered] ~ sum_k P(K = k) S_k j m(w) / sum_k P(K = k) S_k

with ``S_k = (1 - exp(-r w / mu))**j`` and ``m(w) = E[X | X <= w]`` for
``X ~ Exp(r / mu)``. It ignores stages that fail or recover during the waits,
so it is good for ``w`` small against the mean up time.

Run::

    dtsim run experiments/wait_or_drop.py --quick
    python experiments/wait_or_drop.py        # full run

Writes ``wait.png``, ``wait.csv`` and ``wait.md`` and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

import sim.runner
from sim import analytic
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import format_4g, judge_equal, mean_ci, rate_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "wait_or_drop"

#: The snapshot pipeline (instant crossings) of 16 stages x 2 replicas, a = 0.9,
#: exponential outages of mean 1 time unit, one microbatch per time unit.
BASE = PipelineConfig(
    stages=16, replicas=2, skip_budget=0, availability=0.9, mean_downtime=1.0,
    microbatches=20_000, rate=1.0, records=True,
)
FACTORS = {
    "skip_budget": [0, 1],
    "max_wait": [0.0, 0.03, 0.1, 0.3, 1.0, 3.0],
}
REPLICATIONS = 10
#: Metrics that are probabilities (a per-microbatch rate): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None}
#: Latencies and waits per microbatch cannot be negative: intervals cut at 0.
NONNEGATIVE = "*"
SEED = 5
QUICK = {
    "BASE": {"microbatches": 2_000},
    "FACTORS": {"skip_budget": [0], "max_wait": [0.0, 0.1, 1.0]},
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- closed forms


def approx_wait(config: PipelineConfig, max_wait: float | None = None) -> tuple[float, float]:
    """First-order ``(drop rate, mean latency of delivered)`` with waiting (module docstring).

    Exact at ``max_wait = 0`` (the binomial law and zero latency).
    """
    w = config.max_wait if max_wait is None else max_wait
    L, s, r = config.stages, config.skip_budget, config.replicas[0]
    q = analytic.stage_outage(config.availability, r, config.domain_outage)
    k = np.arange(L + 1)
    pk = stats.binom.pmf(k, L, q)
    j = np.maximum(k - s, 0)
    lam = r / config.mean_downtime
    if w <= 0:
        ok = (j == 0).astype(float)
        return float(np.dot(pk, 1 - ok)), 0.0
    c = 1.0 if math.isinf(w) else -math.expm1(-lam * w)
    mean_wait = 1 / lam if math.isinf(w) else 1 / lam - w * math.exp(-lam * w) / c
    ok = c ** j
    drop = float(np.dot(pk, 1 - ok))
    lat = float(np.dot(pk * ok, j * mean_wait) / np.dot(pk, ok))
    return drop, lat


# ----------------------------------------------------------------------------- model


def model(config: PipelineConfig, streams: Streams) -> dict[str, float]:
    """One replication: drop rate and latency of delivered microbatches (exact quantiles)."""
    m = des_pipeline_model(config, streams)
    return {
        "drop_rate": m["drop_rate"],
        "latency_mean": m["latency_mean"],
        "latency_p99": m["latency_p99"],
        "waits_per_microbatch": m["waits_per_microbatch"],
    }


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per (s, max_wait): simulated (95% CI) against the binomial law and the approximation."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        drop_a, lat_a = approx_wait(cfg)
        row: dict[str, Any] = {"skip_budget": cfg.skip_budget, "max_wait": cfg.max_wait,
                               "replications": len(recs)}
        for key in ("drop_rate", "latency_mean", "latency_p99", "waits_per_microbatch"):
            vals = [r[key] for r in recs]
            e = rate_ci(vals) if key == "drop_rate" else mean_ci(vals)  # a probability: inside [0, 1]
            row[key], row[f"{key}_low"], row[f"{key}_high"] = e.mean, e.low, e.high
            if key == "drop_rate":
                drop_est = e
        row["drop_binomial"] = approx_wait(cfg, 0.0)[0]
        row["drop_approx"] = drop_a
        row["latency_mean_approx"] = lat_a
        row["drop_approx_in_interval"] = bool(judge_equal(drop_est, drop_a).holds)
        row["latency_approx_in_interval"] = bool(
            row["latency_mean_low"] <= lat_a <= row["latency_mean_high"])
        row["drop_reduction"] = row["drop_binomial"] / row["drop_rate"] if row["drop_rate"] > 0 else math.inf
        rows.append(row)
    return rows


COLUMNS = ["skip_budget", "max_wait", "drop_rate", "drop_rate_low", "drop_rate_high",
           "drop_binomial", "drop_approx", "drop_reduction", "latency_mean", "latency_mean_low",
           "latency_mean_high", "latency_mean_approx", "latency_p99", "waits_per_microbatch"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = "Waiting instead of dropping: drop rate vs latency"
    text = write_tables(rows, COLUMNS, out_dir, "wait", title, fmt=format_4g)
    drop_s, trade_s = [], []
    for i, s in enumerate(sorted({r["skip_budget"] for r in rows})):
        rs = sorted((r for r in rows if r["skip_budget"] == s and r["max_wait"] > 0),
                    key=lambda r: r["max_wait"])
        zero = next((r for r in rows if r["skip_budget"] == s and r["max_wait"] == 0), None)
        if not rs:
            continue
        x = [r["max_wait"] for r in rs]
        grid = np.geomspace(min(x), max(x), 40)
        cfg = replace(BASE, skip_budget=s)
        approx = [approx_wait(cfg, w) for w in grid]
        drop_s.append({"label": f"s={s} simulated (95% CI)", "x": x, "style": "points",
                       "color": f"C{i}", "mean": [r["drop_rate"] for r in rs],
                       "low": [r["drop_rate_low"] for r in rs], "high": [r["drop_rate_high"] for r in rs],
                       "ref_x": grid, "ref_y": [a[0] for a in approx],
                       "ref_label": f"s={s} first-order approximation"})
        if zero is not None:
            drop_s.append({"label": None, "x": [], "mean": [], "color": f"C{i}",
                           "ref_x": [min(x), max(x)], "ref_y": [zero["drop_binomial"]] * 2,
                           "ref_style": ":", "ref_label": f"s={s} binomial (max_wait = 0)"})
        trade_s.append({"label": f"s={s}: mean latency", "x": [r["latency_mean"] for r in rs],
                        "style": "points", "color": f"C{i}", "mean": [r["drop_rate"] for r in rs],
                        "low": [r["drop_rate_low"] for r in rs], "high": [r["drop_rate_high"] for r in rs],
                        "ref_x": [a[1] for a in approx], "ref_y": [a[0] for a in approx],
                        "ref_label": f"s={s} approximation"})
        trade_s.append({"label": f"s={s}: p99 latency", "x": [r["latency_p99"] for r in rs],
                        "style": "points", "marker": "s", "color": f"C{i + 2}",
                        "mean": [r["drop_rate"] for r in rs]})
    plot_stress_panels(
        [{"xlabel": "max_wait (mean downtimes)", "ylabel": "drop rate", "logx": True, "logy": True,
          "title": "Drop rate vs how long a microbatch may wait", "series": drop_s},
         {"xlabel": "latency of delivered microbatches (mean downtimes)", "ylabel": "drop rate",
          "logx": True, "logy": True, "title": "Trade-off (points: max_wait values)", "series": trade_s}],
        out_dir / "wait.png",
        title=f"Waiting instead of dropping (L={BASE.stages}, r={BASE.replicas[0]}, a={BASE.availability}, "
              f"exponential outages of mean {BASE.mean_downtime:g})",
        caption=f"Snapshot pipeline DES with max_wait; points: simulation, 95% CI across "
                f"{rows[0]['replications'] if rows else 0} replications; dashed: first-order approximation "
                "(frozen other stages, Exp(r/mu) recovery); dotted: the binomial law at max_wait = 0.")
    print(f"\n{NAME}: drop rate vs latency as max_wait grows\n{text}\n")
    for r in rows:
        print(f"  s={r['skip_budget']}, max_wait {r['max_wait']:g}: drop {r['drop_rate']:.4%} "
              f"[{r['drop_rate_low']:.4%}, {r['drop_rate_high']:.4%}] (binomial at 0: "
              f"{r['drop_binomial']:.4%}, approximation {r['drop_approx']:.4%}, "
              f"{'inside' if r['drop_approx_in_interval'] else 'OUTSIDE'}); mean latency "
              f"{r['latency_mean']:.4f} [{r['latency_mean_low']:.4f}, {r['latency_mean_high']:.4f}] "
              f"(approximation {r['latency_mean_approx']:.4f}); p99 {r['latency_p99']:.3f}")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
