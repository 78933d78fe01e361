"""Stress test 8: asynchrony and heterogeneous link latencies on a geo layout.

Study B's matching rounds are synchronous and exchanges are instant. Here 32
nodes sit in 4 regions (8 hosts each) with a measured-looking inter-region
latency matrix (70 to 200 ms; 0.5 ms inside a region), every pair may gossip,
and time is simulated wall clock in milliseconds:

``matching``
    synchronous random perfect matchings; a round lasts its slowest exchange
    (nearly always the 200 ms link). Per round ``E[D'] = (n-2)/(2(n-1)) D``
    exactly, so ``E[D]`` falls by 10**6 in 19 rounds; in wall clock
    ``E[D(t)] ~ D(0) c**(t / T)`` with ``T`` the mean round duration.
``async``
    every node wakes on a Poisson clock (``wake_rate`` per ms), picks a
    uniformly random peer and exchanges; the exchange takes the link's latency
    and each end moves half-way toward the value its peer *sent* (stale by the
    latency). With instant exchanges a wake is a uniformly random pair, so
    ``E[D(t)] = D(0) exp(-n lambda t / (n - 1))`` exactly -- checked here on
    the same layout with every latency set to 0.

Output: ``D(t) / D(0)`` against wall clock for each variant with 95% bands and
the closed forms, the time to cut ``E[D]`` by 10**6, exchanges per node per
ms, and the drift of the honest mean (stale exchanges no longer conserve it).

Run::

    dtsim run experiments/async_latency.py --quick
    python experiments/async_latency.py              # full run, about a minute on 2 cores

Writes ``wallclock.png``, ``time_to_1e6.png``, ``async.csv`` and ``async.md``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim import analytic
from sim.gossip import GossipConfig, gossip_model
from sim.results import as_array, crossing, format_4g, mean_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "async_latency"
#: One-way latency (ms) between us-east, us-west, eu, asia; 0.5 ms inside a region.
LATENCY = "0/70/80/180;70/0/140/110;80/140/0/200;180/110/200/0"
GEO = f"geo:latency_matrix={LATENCY},hosts=8,intra_region_latency=0.5"
GEO_INSTANT = "geo:regions=4,hosts=8,inter_region_latency=0,intra_region_latency=0"
N = 32
FACTOR = 1e-6
HORIZON_MS = 10_000
WAKE_RATES = (0.0025, 0.01, 0.04)  # per node per ms; 0.0025 as many exchanges per node as the matchings

BASE = GossipConfig(topology=GEO, protocol="async", rounds=HORIZON_MS, record_every=25, size=0.0,
                    wake_rate=0.01)
POINTS = (
    [{"protocol": "matching", "rounds": 40, "record_every": 1}]
    + [{"wake_rate": w} for w in WAKE_RATES]
    + [{"topology": GEO_INSTANT, "wake_rate": 0.01}]
)
REPLICATIONS = 30
SEED = 8
QUICK = {"BASE": {"rounds": 4000}, "POINTS": [POINTS[0], {"wake_rate": 0.01},
                                              {"topology": GEO_INSTANT, "wake_rate": 0.01}],
         "REPLICATIONS": 4}


# ----------------------------------------------------------------------------- closed forms


def async_instant_time(n: int, wake_rate: float, factor: float = FACTOR) -> float:
    """Time for ``exp(-n lambda t / (n - 1))`` to reach ``factor`` (instant exchanges)."""
    return -math.log(factor) * (n - 1) / (n * wake_rate)


def matching_rounds(n: int, factor: float = FACTOR) -> float:
    """Real-valued rounds for ``((n-2)/(2(n-1)))**r`` to reach ``factor``."""
    return math.log(factor) / math.log(analytic.matching_contraction(n))


# ----------------------------------------------------------------------------- model


def model(config: GossipConfig, streams: Streams) -> dict[str, Any]:
    """One replication: ``D(t)/D(0)`` against wall clock, time to 1e-6, exchange rate, mean drift."""
    out = gossip_model(config, streams)
    D = np.asarray(out["disagreement"], dtype=float)
    t = np.asarray(out["time"], dtype=float)
    n = config.n
    res = {
        "time_to_factor": crossing(t, D / D[0], FACTOR),
        "exchanges_per_node_ms": 2.0 * float(out["exchanges"]) / (n * float(t[-1])),
        "drift": float(out["mean_shift"][-1]),
        "ratio": (D / (n - 1)).tolist(),
        "time": t.tolist(),
    }
    if config.protocol == "matching":
        res["round_ms"] = float(t[-1]) / float(config.rounds)
    return res


# ----------------------------------------------------------------------------- analysis


def _label(cfg: GossipConfig) -> str:
    if cfg.protocol == "matching":
        return "sync matchings (geo latencies)"
    lat = "instant" if cfg.topology == GEO_INSTANT else "geo latencies"
    return f"async, wake {cfg.wake_rate:g}/ms ({lat})"


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per variant: times to 1e-6 (simulated, closed form), exchange rate, drift."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        n = cfg.n
        R = np.stack([as_array(r["ratio"]) for r in recs])
        T = np.stack([as_array(r["time"]) for r in recs])
        x = T.mean(axis=0)
        ests = [mean_ci(R[:, j]) for j in range(R.shape[1])]
        mean = np.array([e.mean for e in ests])
        w = np.array([(e.high - e.mean) / e.mean if e.mean > 0 else 0.0 for e in ests])
        low, high = mean * np.exp(-w), mean * np.exp(w)  # log-scale 95% interval of the mean
        t_sim = crossing(x, mean, FACTOR)
        t_lo, t_hi = crossing(x, low, FACTOR), crossing(x, high, FACTOR)
        per_run = mean_ci([float(r["time_to_factor"]) for r in recs
                           if math.isfinite(float(r["time_to_factor"]))])
        msgs = mean_ci([float(r["exchanges_per_node_ms"]) for r in recs])
        drift = mean_ci([float(r["drift"]) for r in recs])
        if cfg.protocol == "matching":
            rnd = mean_ci([float(r["round_ms"]) for r in recs])
            cf = matching_rounds(n) * rnd.mean
            cf_note = f"19.05 rounds x mean round {rnd.mean:.1f} ms"
            ref = (np.arange(R.shape[1]) * rnd.mean,
                   analytic.matching_contraction(n) ** np.arange(R.shape[1]))
        else:
            rnd = None
            cf = async_instant_time(n, cfg.wake_rate)
            cf_note = "instant-exchange exp(-n lambda t/(n-1))"
            ref = (x, np.exp(-n * cfg.wake_rate * x / (n - 1)))
        rows.append({
            "variant": _label(cfg), "protocol": cfg.protocol,
            "wake_rate": cfg.wake_rate if cfg.protocol == "async" else math.nan,
            "replications": len(recs),
            "t_sim_ms": t_sim, "t_sim_low": t_lo, "t_sim_high": t_hi,
            "t_closed_form_ms": cf, "closed_form": cf_note,
            "sim_over_cf": t_sim / cf if math.isfinite(t_sim) else math.nan,
            "cf_in_interval": bool(t_lo <= cf <= t_hi) if math.isfinite(t_hi) else False,
            "per_run_t_ms": per_run.mean,
            "exchanges_per_node_ms": msgs.mean,
            "round_ms": rnd.mean if rnd is not None else math.nan,
            "drift": drift.mean, "drift_low": drift.low, "drift_high": drift.high,
            "_x": x, "_mean": mean, "_low": low, "_high": high, "_ref": ref,
        })
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figures, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["variant", "t_sim_ms", "t_sim_low", "t_sim_high", "t_closed_form_ms", "sim_over_cf",
            "per_run_t_ms", "exchanges_per_node_ms", "round_ms", "drift"]
    title = "Async vs synchronous gossip on a geo layout (times in ms)"
    text = write_tables(rows, cols, out_dir, "async", title, fmt=format_4g)
    series = []
    for i, r in enumerate(rows):
        series.append({"label": r["variant"], "x": r["_x"], "mean": r["_mean"], "low": r["_low"],
                       "high": r["_high"], "color": f"C{i}", "ref_x": r["_ref"][0], "ref_y": r["_ref"][1]})
    plot_stress_panels(
        [{"series": series, "xlabel": "simulated wall clock (ms)", "ylabel": "E[D(t)] / E[D(0)]",
          "logy": True, "hline": FACTOR, "title": f"Gossip on a 4-region geo layout, n={N}",
          "ylim": (FACTOR * 1e-4, 3.0)}],
        out_dir / "wallclock.png",
        caption="Lines with bands: simulated mean ratio (95% CI, log scale). Dashed, same colour: closed forms "
                "-- exp(-n lambda t/(n-1)) for async (exact only with instant exchanges), "
                "((n-2)/(2(n-1)))^(t/T) for matchings with T the mean simulated round duration.")
    geo = [r for r in rows if r["protocol"] == "async" and "instant" not in r["variant"]]
    inst = [r for r in rows if r["protocol"] == "async" and "instant" in r["variant"]]
    sync = [r for r in rows if r["protocol"] == "matching"]
    ts = []
    for rs, lab, col, mk in ((geo, "async, geo latencies", "C0", "o"), (inst, "async, instant exchanges", "C2", "^")):
        if rs:
            ts.append({"label": f"{lab}: simulated (95% CI)", "x": [r["exchanges_per_node_ms"] for r in rs],
                       "style": "points", "marker": mk, "mean": [r["t_sim_ms"] for r in rs],
                       "low": [r["t_sim_low"] for r in rs], "high": [r["t_sim_high"] for r in rs], "color": col,
                       "ref_x": [r["exchanges_per_node_ms"] for r in rs],
                       "ref_y": [r["t_closed_form_ms"] for r in rs], "ref_style": "none", "ref_marker": "_",
                       "ref_label": f"{lab}: instant-exchange closed form"})
    ticks = sorted({float(f"{r['exchanges_per_node_ms']:.1g}") for r in rows})
    if sync:
        ts.append({"label": "sync matchings: simulated (95% CI)", "x": [sync[0]["exchanges_per_node_ms"]],
                   "style": "points", "marker": "s", "mean": [sync[0]["t_sim_ms"]],
                   "low": [sync[0]["t_sim_low"]], "high": [sync[0]["t_sim_high"]], "color": "C3"})
    plot_stress_panels(
        [{"series": ts, "xlabel": "exchanges per node per ms (both ends count)", "ylabel": "ms to cut E[D] by 1e6",
          "logx": True, "logy": True, "title": "Time to 1e-6 vs exchange rate",
          "xticks": (ticks, [f"{t:g}" for t in ticks]), "rotate": False}],
        out_dir / "time_to_1e6.png",
        caption="Async points at wake rates " + ", ".join(f"{w:g}" for w in WAKE_RATES)
                + " per ms (geo latencies) and one instant-exchange point; bars: crossings of the 95% band.")
    print(f"\n{NAME}: time to cut E[D] by 1e6 on a 4-region geo layout (n={N}, ms)\n{text}\n")
    for r in rows:
        print(f"  {r['variant']}: {r['t_sim_ms']:.0f} ms [{r['t_sim_low']:.0f}, {r['t_sim_high']:.0f}] vs "
              f"{r['closed_form']} {r['t_closed_form_ms']:.0f} ms (ratio {r['sim_over_cf']:.2f}, "
              f"{'inside' if r['cf_in_interval'] else 'OUTSIDE'}); {r['exchanges_per_node_ms']:.4f} exchanges/node/ms; "
              f"mean drift {r['drift']:.2e}")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
