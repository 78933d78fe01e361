"""Stress test 2: time-correlated outages -- same availability, longer and longer downtimes.

Study A treats each microbatch as an independent snapshot of the workers. In
time a worker that was down for the previous microbatch is likely still down,
so successive microbatches see correlated states. This experiment keeps the
availability ``a`` (hence the per-microbatch drop probability) fixed and moves
the mean downtime from much shorter to much longer than the time ``T`` between
microbatches (one microbatch per time unit, each crossing the snapshot
pipeline instantly, as in the study).

The closed form it departs from: ``P(drop) = P(Bin(L, q) > s)`` with
``q = (1 - a)**r`` for every microbatch, independently. It predicts the long-run
drop rate *and* (by independence) the drop rate over a window of ``W``
microbatches, ``Bin(W, p) / W``.

Finding shape: the long-run mean stays at the binomial value at every
downtime (the closed form holds outside its no-time-correlation assumption),
but the windows do not: with long downtimes drops come in bursts, and the
chance that a window of ``W`` microbatches exceeds twice the target drop rate
departs from the binomial window law.

Run::

    dtsim run experiments/time_correlated_outages.py --quick
    python experiments/time_correlated_outages.py        # full run

Writes ``windows.png``, ``windows.csv`` and ``windows.md`` and prints the finding.
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
from sim.pipeline import PipelineConfig, predicted_drop_rate, run_pipeline
from sim.results import as_array, format_4g, judge_equal, mean_ci, rate_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "time_correlated_outages"

#: Window length W (microbatches) for the burstiness statistics.
WINDOW = 100

#: 16 stages x 2 replicas, a = 0.9, no domain outages, skip budget 1: q = 0.01 and
#: a target (binomial) drop rate of 1.09 %. One microbatch per time unit (T = 1).
BASE = PipelineConfig(
    stages=16, replicas=2, skip_budget=1, availability=0.9, domain_outage=0.0,
    mean_downtime=1.0, microbatches=20_000, rate=1.0, records=True,
)

#: Mean downtime in units of T, and microbatches per replication: short downtimes
#: mix fast (fewer microbatches needed, many failure events each), long ones slowly.
POINTS = [
    {"mean_downtime": 0.1, "microbatches": 5_000},
    {"mean_downtime": 0.3, "microbatches": 10_000},
    {"mean_downtime": 1.0, "microbatches": 20_000},
    {"mean_downtime": 3.0, "microbatches": 50_000},
    {"mean_downtime": 10.0, "microbatches": 50_000},
    {"mean_downtime": 30.0, "microbatches": 100_000},
    {"mean_downtime": 100.0, "microbatches": 100_000},
]
REPLICATIONS = 20
#: Metrics that are probabilities (a drop rate and fractions of windows (correlated in time)): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "window_over_2x": None, "window_zero": None}
SEED = 2
QUICK = {
    "POINTS": [{"mean_downtime": 0.3, "microbatches": 2_000},
               {"mean_downtime": 30.0, "microbatches": 5_000}],
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- window statistics


def window_drops(delivered: np.ndarray, window: int) -> np.ndarray:
    """Drops in each full window of ``window`` consecutive microbatches (arrival order)."""
    n = delivered.size // window
    return (~delivered[: n * window]).reshape(n, window).sum(axis=1)


def binomial_window_exceed(p: float, window: int, factor: float = 2.0) -> float:
    """``P(Bin(W, p) > factor p W)``: a window's drop rate above ``factor`` times the target,
    if microbatches were independent (the closed form's window law)."""
    return float(stats.binom.sf(math.floor(factor * p * window), window, p))


def window_model(config: PipelineConfig, streams: Streams) -> dict[str, Any]:
    """One replication: drop rate, goodput and the window statistics (W = WINDOW).

    Returns
    -------
    dict
        ``drop_rate``, ``exact_drop_rate`` (binomial), ``goodput``, ``window_sd``
        (standard deviation of the window drop rate), ``window_over_2x``
        (fraction of windows above twice the exact rate), ``window_zero``
        (fraction with no drop), ``window_goodput_p01`` (1st percentile of the
        window quality mass), and ``window_hist`` (a list: windows with
        ``0..W`` drops).
    """
    run = run_pipeline(config, streams)
    m = run.metrics
    rec = run.records
    assert rec is not None, "the window statistics need config.records"
    p = predicted_drop_rate(config)
    drops = window_drops(rec["delivered"], WINDOW)
    n = drops.size * WINDOW
    qual = rec["quality"][:n].reshape(-1, WINDOW).mean(axis=1)
    rate = drops / WINDOW
    return {
        "drop_rate": m["drop_rate"],
        "exact_drop_rate": p,
        "goodput": m["goodput"],
        "quality_mass": m["quality_mass"],
        "window_sd": float(rate.std()),
        "window_over_2x": float(np.mean(rate > 2.0 * p)),
        "window_zero": float(np.mean(drops == 0)),
        "window_goodput_p01": float(np.quantile(qual, 0.01)),
        "window_hist": np.bincount(drops, minlength=WINDOW + 1).tolist(),
    }


def model(config: PipelineConfig, streams: Streams) -> dict[str, Any]:
    """One replication (see :func:`window_model`)."""
    return window_model(config, streams)


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per downtime: drop rate and window statistics, simulated (95% CI) vs binomial."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        p = predicted_drop_rate(cfg)
        # probabilities: intervals inside [0, 1], "below X" when nothing is seen
        d = rate_ci([r["drop_rate"] for r in recs])
        ov = rate_ci([r["window_over_2x"] for r in recs])
        sd = mean_ci([r["window_sd"] for r in recs])
        hists = [as_array(r["window_hist"]) for r in recs]
        hist = np.sum(hists, axis=0)
        bin_ov = binomial_window_exceed(p, WINDOW)
        cut5 = math.floor(5 * p * WINDOW)  # windows with more drops than this are over 5x
        ov5 = rate_ci([h[cut5 + 1:].sum() / h.sum() for h in hists])
        bin_ov5 = binomial_window_exceed(p, WINDOW, 5.0)
        rows.append({
            "mean_downtime": cfg.mean_downtime,
            "microbatches": cfg.microbatches, "replications": len(recs),
            "drop_rate": d.mean, "drop_low": d.low, "drop_high": d.high,
            "drop_binomial": p, "drop_in_interval": bool(judge_equal(d, p).holds),
            "window_sd": sd.mean, "window_sd_low": sd.low, "window_sd_high": sd.high,
            "window_sd_binomial": math.sqrt(p * (1 - p) / WINDOW),
            "over_2x": ov.mean, "over_2x_low": ov.low, "over_2x_high": ov.high,
            "over_2x_binomial": bin_ov,
            "over_2x_ratio": ov.mean / bin_ov,
            "over_2x_in_interval": bool(judge_equal(ov, bin_ov).holds),
            "over_5x": ov5.mean, "over_5x_low": ov5.low, "over_5x_high": ov5.high,
            "over_5x_binomial": bin_ov5,
            "sd_ratio": sd.mean / math.sqrt(p * (1 - p) / WINDOW),
            "window_zero": float(np.mean([r["window_zero"] for r in recs])),
            "_hist": hist / hist.sum(),
        })
    return rows


COLUMNS = ["mean_downtime", "drop_rate", "drop_low", "drop_high", "drop_binomial",
           "window_sd", "window_sd_binomial", "over_2x", "over_2x_low", "over_2x_high",
           "over_2x_binomial", "over_2x_ratio", "over_5x", "over_5x_low", "over_5x_high",
           "over_5x_binomial", "sd_ratio", "window_zero"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = f"Time-correlated outages: drop rate and {WINDOW}-microbatch windows"
    text = write_tables(rows, COLUMNS, out_dir, "windows", title, fmt=format_4g)
    x = [r["mean_downtime"] for r in rows]
    p = rows[0]["drop_binomial"] if rows else math.nan
    mean_panel = {
        "xlabel": "mean downtime / time between microbatches", "ylabel": "long-run drop rate",
        "logx": True, "title": "Long-run drop rate",
        "series": [{"label": "simulated (95% CI)", "x": x, "style": "points",
                    "mean": [r["drop_rate"] for r in rows], "low": [r["drop_low"] for r in rows],
                    "high": [r["drop_high"] for r in rows],
                    "ref_x": x, "ref_y": [r["drop_binomial"] for r in rows],
                    "ref_label": "binomial P(Bin(L,q) > s)"}],
    }
    over_panel = {
        "xlabel": "mean downtime / time between microbatches",
        "ylabel": f"P(drop rate of a {WINDOW}-microbatch window > 2 x target)",
        "logx": True, "title": "Bursts: windows over twice the target",
        "series": [{"label": "simulated (95% CI)", "x": x, "style": "points",
                    "mean": [r["over_2x"] for r in rows], "low": [r["over_2x_low"] for r in rows],
                    "high": [r["over_2x_high"] for r in rows],
                    "ref_x": x, "ref_y": [r["over_2x_binomial"] for r in rows],
                    "ref_label": "independent microbatches: P(Bin(W,p) > 2pW)"}],
    }
    k = np.arange(WINDOW + 1)
    ccdf_series = []
    for i, r in enumerate(rows):
        h = r["_hist"]
        tail = h[::-1].cumsum()[::-1]  # P(drops >= k)
        ccdf_series.append({"label": f"downtime {r['mean_downtime']:g}", "x": k / WINDOW,
                            "mean": tail, "color": f"C{i}"})
    if rows:
        ref = stats.binom.sf(k - 1, WINDOW, p)
        keep = ref > 1e-7  # beyond, the binomial tail is invisible on any sensible axis
        ccdf_series.append({"label": None, "x": [], "mean": [], "color": "k",
                            "ref_x": (k / WINDOW)[keep], "ref_y": ref[keep],
                            "ref_label": "binomial window law"})
    ccdf_panel = {"xlabel": f"drop rate over a window of {WINDOW} microbatches",
                  "ylabel": "P(window drop rate >= x)", "logy": True,
                  "title": "Window drop-rate distribution", "series": ccdf_series}
    plot_stress_panels(
        [mean_panel, over_panel, ccdf_panel], out_dir / "windows.png",
        title=f"Time-correlated outages at a fixed availability (L={BASE.stages}, r={BASE.replicas[0]}, "
              f"s={BASE.skip_budget}, a={BASE.availability})",
        caption=f"Snapshot pipeline DES, exponential up/down times, one microbatch per time unit. Points: "
                f"simulation, 95% CI across {rows[0]['replications'] if rows else 0} replications; dashed: "
                "the binomial closed form (mean) and its window law for independent microbatches.")
    print(f"\n{NAME}: drop rate and {WINDOW}-microbatch windows vs mean downtime "
          f"(target p = {p:.4%})\n{text}\n")
    for r in rows:
        print(f"  downtime {r['mean_downtime']:g}: drop {r['drop_rate']:.4%} "
              f"[{r['drop_low']:.4%}, {r['drop_high']:.4%}] vs binomial {r['drop_binomial']:.4%} "
              f"({'inside' if r['drop_in_interval'] else 'OUTSIDE'}); "
              f"P(window > 2x) {r['over_2x']:.4f} [{r['over_2x_low']:.4f}, {r['over_2x_high']:.4f}] "
              f"vs independent {r['over_2x_binomial']:.4f} (x{r['over_2x_ratio']:.2f}, "
              f"{'inside' if r['over_2x_in_interval'] else 'OUTSIDE'}); P(window > 5x) "
              f"{r['over_5x']:.4f} [{r['over_5x_low']:.4f}, {r['over_5x_high']:.4f}] vs independent "
              f"{r['over_5x_binomial']:.2g}; window sd {r['window_sd']:.4f} = {r['sd_ratio']:.2f}x "
              f"independent; windows with no drop {r['window_zero']:.3f}")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
