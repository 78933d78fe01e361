"""Stress test 3: heavy-tailed repairs -- Weibull and lognormal outages at equal availability and mean.

Study A only needs each worker's availability ``a``. Here the up and down
durations of every worker follow an exponential, a Weibull (shape ``k < 1``)
or a lognormal law, always with the same mean downtime and the same
availability (the failure model draws up and down times from the same family,
each with its own mean; the process starts in its stationary regime). The
closed form it departs from is the binomial snapshot law
``P(drop) = P(Bin(L, q) > s)``, ``q = (1 - a)**r``, which depends on ``a``
only, and its window law ``Bin(W, p) / W`` for independent microbatches.

Measured per law: long-run drop rate, burstiness (standard deviation of the
drop rate over windows of ``W`` microbatches and the probability that a
window exceeds twice the target), and goodput (quality-weighted deliveries
per time unit, long-run and its worst 1 % window).

Run::

    dtsim run experiments/heavy_tailed_repairs.py --quick
    python experiments/heavy_tailed_repairs.py        # full run

Writes ``repairs.png``, ``repairs.csv`` and ``repairs.md`` and prints the finding.
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
from sim.pipeline import PipelineConfig, predicted_drop_rate, run_pipeline
from sim.results import format_4g, judge_equal, mean_ci, rate_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "heavy_tailed_repairs"

#: Window length W (microbatches) for the burstiness statistics.
WINDOW = 100

#: 16 stages x 2 replicas, a = 0.9, skip budget 1 with a 10 % quality loss per
#: skip: q = 0.01, target drop rate 1.09 %. One microbatch per time unit; mean
#: downtime 10 time units (outages last about ten microbatches).
BASE = PipelineConfig(
    stages=16, replicas=2, skip_budget=1, skip_penalty=0.1, availability=0.9,
    mean_downtime=10.0, microbatches=100_000, rate=1.0, records=True,
)

#: The laws: (label, distribution, shape); Weibull shape k (CV 2.24 at k=0.5,
#: 5.41 at k=0.3), lognormal sigma (CV 2.91 at 1.5, 7.32 at 2).
LAWS = [
    ("exponential", "exponential", None),
    ("weibull k=0.5", "weibull", 0.5),
    ("weibull k=0.3", "weibull", 0.3),
    ("lognormal s=1.5", "lognormal", 1.5),
    ("lognormal s=2", "lognormal", 2.0),
]
POINTS = [{"failure_distribution": d, "failure_shape": k} for _, d, k in LAWS]
REPLICATIONS = 20
#: Metrics that are probabilities (a drop rate and fractions of windows): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "window_over_2x": None, "window_over_5x": None}
SEED = 3
QUICK = {
    "BASE": {"microbatches": 4_000},
    "POINTS": [POINTS[0], POINTS[3]],
    "REPLICATIONS": 3,
}


def law_label(distribution: str, shape: float | None) -> str:
    """The label of a law of :data:`LAWS`."""
    return next((lab for lab, d, k in LAWS if d == distribution and k == shape), distribution)


def coefficient_of_variation(distribution: str, shape: float | None) -> float:
    """Coefficient of variation of the duration law (1 for the exponential)."""
    if distribution == "weibull":
        k = shape or 0.7
        g1, g2 = math.gamma(1 + 1 / k), math.gamma(1 + 2 / k)
        return math.sqrt(g2 / g1**2 - 1)
    if distribution == "lognormal":
        s = 1.0 if shape is None else shape
        return math.sqrt(math.exp(s * s) - 1)
    return 1.0


# ----------------------------------------------------------------------------- model


def model(config: PipelineConfig, streams: Streams) -> dict[str, Any]:
    """One replication: drop rate, goodput and window statistics (W = WINDOW)."""
    run = run_pipeline(config, streams)
    m, rec = run.metrics, run.records
    assert rec is not None, "the window statistics need config.records"
    p = predicted_drop_rate(config)
    n = rec["delivered"].size // WINDOW
    drops = (~rec["delivered"][: n * WINDOW]).reshape(n, WINDOW).sum(axis=1)
    good = rec["quality"][: n * WINDOW].reshape(n, WINDOW).mean(axis=1)  # per time unit
    rate = drops / WINDOW
    return {
        "drop_rate": m["drop_rate"],
        "goodput": m["goodput"],
        "window_sd": float(rate.std()),
        "window_over_2x": float(np.mean(rate > 2.0 * p)),
        "window_over_5x": float(np.mean(rate > 5.0 * p)),
        "window_goodput_p01": float(np.quantile(good, 0.01)),
    }


# ----------------------------------------------------------------------------- analysis


def references(config: PipelineConfig) -> dict[str, float]:
    """The closed forms: binomial drop rate, snapshot goodput and the independent window law."""
    p = predicted_drop_rate(config)
    q = analytic.stage_outage(config.availability, config.replicas[0], config.domain_outage)
    good = config.rate * analytic.quality_mass(config.stages, q, config.skip_budget,
                                               config.skip_penalty, config.penalty)
    return {
        "drop": p, "goodput": good,
        "window_sd": math.sqrt(p * (1 - p) / WINDOW),
        "over_2x": float(stats.binom.sf(math.floor(2 * p * WINDOW), WINDOW, p)),
        "over_5x": float(stats.binom.sf(math.floor(5 * p * WINDOW), WINDOW, p)),
    }


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per law: simulated (95% CI) and closed-form values."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        ref = references(cfg)
        row: dict[str, Any] = {
            "law": law_label(cfg.failure_distribution, cfg.failure_shape),
            "cv": coefficient_of_variation(cfg.failure_distribution, cfg.failure_shape),
            "replications": len(recs),
        }
        for key, metric, cf in (("drop", "drop_rate", "drop"), ("goodput", "goodput", "goodput"),
                                ("window_sd", "window_sd", "window_sd"),
                                ("over_2x", "window_over_2x", "over_2x"),
                                ("over_5x", "window_over_5x", "over_5x"),
                                ("goodput_p01", "window_goodput_p01", None)):
            vals = [r[metric] for r in recs]
            # probabilities (drop rate, window exceedances) get intervals inside [0, 1]
            e = rate_ci(vals) if key in ("drop", "over_2x", "over_5x") else mean_ci(vals)
            row[key], row[f"{key}_low"], row[f"{key}_high"] = e.mean, e.low, e.high
            if cf is not None:
                row[f"{key}_cf"] = ref[cf]
                row[f"{key}_in_interval"] = bool(judge_equal(e, ref[cf]).holds)
        rows.append(row)
    base = next((r for r in rows if r["law"] == "exponential"), None)
    for r in rows:
        r["over_2x_vs_exponential"] = r["over_2x"] / base["over_2x"] if base else math.nan
        r["over_5x_vs_exponential"] = (r["over_5x"] / base["over_5x"]
                                       if base and base["over_5x"] > 0 else math.nan)
    return rows


COLUMNS = ["law", "cv", "drop", "drop_low", "drop_high", "drop_cf", "goodput", "goodput_cf",
           "goodput_p01", "window_sd", "window_sd_cf", "over_2x", "over_2x_low", "over_2x_high",
           "over_2x_cf", "over_2x_vs_exponential", "over_5x", "over_5x_cf"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = "Heavy-tailed repairs: drop rate, burstiness, goodput at equal availability and mean"
    text = write_tables(rows, COLUMNS, out_dir, "repairs", title, fmt=format_4g)
    x = list(range(len(rows)))
    ticks = (x, [r["law"] for r in rows])

    def panel(key: str, ylabel: str, title: str, cf_label: str | None, logy: bool = False) -> dict:
        s = {"label": "simulated (95% CI)", "x": x, "style": "points",
             "mean": [r[key] for r in rows], "low": [r[f"{key}_low"] for r in rows],
             "high": [r[f"{key}_high"] for r in rows]}
        if cf_label:
            s |= {"ref_x": x, "ref_y": [r[f"{key}_cf"] for r in rows], "ref_label": cf_label}
        return {"xlabel": "up/down duration law (equal mean and availability)", "ylabel": ylabel,
                "title": title, "xticks": ticks, "series": [s], "logy": logy}

    plot_stress_panels(
        [panel("drop", "long-run drop rate", "Drop rate", "binomial P(Bin(L,q) > s)"),
         panel("over_2x", f"P({WINDOW}-microbatch window drop rate > 2 x target)",
               "Burstiness", "independent microbatches"),
         panel("goodput", "goodput (quality per time unit)", "Goodput", "snapshot rate x E[quality]"),
         panel("goodput_p01", "worst 1% window goodput", "Goodput in bad windows", None)],
        out_dir / "repairs.png",
        title=f"Heavy-tailed repairs (L={BASE.stages}, r={BASE.replicas[0]}, s={BASE.skip_budget}, "
              f"a={BASE.availability}, mean downtime {BASE.mean_downtime:g} microbatch intervals)",
        caption=f"Snapshot pipeline DES; points: simulation, 95% CI across "
                f"{rows[0]['replications'] if rows else 0} replications; dashed: the closed forms "
                "(binomial drop rate, its independent-window law, rate x quality mass).")
    print(f"\n{NAME}: drop rate, burstiness and goodput by outage law\n{text}\n")
    for r in rows:
        print(f"  {r['law']} (CV {r['cv']:.2f}): drop {r['drop']:.4%} [{r['drop_low']:.4%}, "
              f"{r['drop_high']:.4%}] vs binomial {r['drop_cf']:.4%} "
              f"({'inside' if r['drop_in_interval'] else 'OUTSIDE'}); goodput {r['goodput']:.4f} "
              f"[{r['goodput_low']:.4f}, {r['goodput_high']:.4f}] vs {r['goodput_cf']:.4f}; "
              f"worst-1% window goodput {r['goodput_p01']:.3f}; window sd {r['window_sd']:.4f} "
              f"(independent {r['window_sd_cf']:.4f}); P(window > 2x) {r['over_2x']:.4f} "
              f"[{r['over_2x_low']:.4f}, {r['over_2x_high']:.4f}] (independent {r['over_2x_cf']:.4f}, "
              f"x{r['over_2x_vs_exponential']:.2f} the exponential's); P(window > 5x) "
              f"{r['over_5x']:.4f} (independent {r['over_5x_cf']:.2g})")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
