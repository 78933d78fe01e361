"""Gossip under churn from a real trace: contraction, noise floor and capture vs parametric churn.

``experiments/churn.py`` takes nodes offline with independent exponential
downtimes. Here the ``n`` nodes of async gossip on the complete graph (a
Poisson clock of rate ``wake_rate`` each; on waking a node adds its noise
and averages with a uniformly random online peer; instant exchanges) are the
worker slots of a real trace instead (``n`` = the trace's capacity, random
mapping policy, looped from a uniformly random start per replication). The
trace's time is scaled so that its mean down time (the renewal estimate of
``dtsim trace stats``) lasts ``downtime`` gossip time units. The
comparison, ``law = "exponential"``, is ``churn.py``'s model at the same
availability and mean down time.

Per replication, three independent runs:

* contraction: noiseless, ``E[D(t)] / E[D(0)]`` at ``t = contraction_time``,
  as a decay rate per time unit (no-churn closed form ``n lambda / (n - 1)``,
  with churn ``churn.py``'s online-pair rate
  ``n a lambda (1 - (1 - a)**(n-1)) / (n - 1)``);
* noise floor: noisy, the mean ``D`` after ``burn_in`` (closed form without
  churn ``(n - 1)(n - 2) s**2 / (2 n)``);
* capture: one node is stubborn at ``b`` (it counts among the ``n`` and is
  a slot of the trace like any other); the fraction of the honest mean's gap
  to ``b`` left at ``capture_time``.

Run::

    dtsim run experiments/trace_churn.py --quick
    python experiments/trace_churn.py                   # full run, a few minutes on 2 cores

Writes ``trace_churn.png``, ``trace_churn.csv`` and ``trace_churn.md`` and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.errors import check_choice, check_int, check_positive
from sim.gossip import GossipConfig, gossip_model
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams
from sim.traces import TraceReplay, load_trace, trace_stats

# ----------------------------------------------------------------------------- parameters

NAME = "trace_churn"


@cache
def _stats(name: str) -> dict[str, Any]:
    return trace_stats(load_trace(name))


@dataclass(frozen=True)
class TraceChurnConfig:
    """One trace, one churn law, one downtime scale.

    Parameters
    ----------
    trace : str
        A shipped trace name (its capacity is the number of nodes).
    law : {"trace", "exponential"}
        Churn from the trace, or exponential at its availability and mean down time.
    downtime : float
        The mean down time in gossip time units (the trace's is scaled to it).
    wake_rate, noise : float
        Poisson wake-up rate of a node; noise standard deviation of the floor run.
    contraction_time, floor_horizon, burn_in, capture_time : int
        Horizons of the three runs and the time left out of the floor average.
    stubborn_value : float
        ``b`` of the capture run (honest values start ``N(0, 1)``).
    """

    trace: str = "aws-p3"
    law: str = "trace"
    downtime: float = 2.0
    wake_rate: float = 1.0
    noise: float = 1.0
    contraction_time: int = 8
    floor_horizon: int = 400
    burn_in: int = 20
    capture_time: int = 200
    stubborn_value: float = 10.0

    def __post_init__(self) -> None:
        check_choice("law", self.law, ("trace", "exponential"))
        check_positive("downtime", self.downtime)
        check_int("capture_time", self.capture_time, low=1)
        for run in ("contraction", "floor", "capture"):
            self.gossip(run)

    @property
    def nodes(self) -> int:
        return int(_stats(self.trace)["nodes"])

    def replay(self) -> TraceReplay:
        """The trace, looped from a random start, its mean down time scaled to ``downtime``."""
        return TraceReplay(self.trace, policy="random", loop=True, resample="offset",
                           speedup=_stats(self.trace)["mean_down"] / self.downtime)

    def gossip(self, run: str) -> GossipConfig:
        """The :class:`~sim.gossip.GossipConfig` of the ``contraction``, ``floor`` or ``capture`` run."""
        st = _stats(self.trace)
        churn: dict[str, Any] = (
            {"failure_trace": self.replay()} if self.law == "trace"
            else {"availability": st["availability"], "mean_downtime": self.downtime})
        rounds = {"contraction": self.contraction_time, "floor": self.floor_horizon,
                  "capture": self.capture_time}[run]
        extra: dict[str, Any] = {}
        if run == "floor":
            extra = {"noise": self.noise, "burn_in": self.burn_in}
        if run == "capture":
            extra = {"adversary": "stubborn", "adversary_value": self.stubborn_value}
        return GossipConfig(topology="complete", nodes=self.nodes, protocol="async",
                            latency=0.0, wake_rate=self.wake_rate, rounds=rounds,
                            **churn, **extra)


BASE = TraceChurnConfig()
TRACES = ("aws-p3", "gcp-a100", "aws-p2-3day")
DOWNTIMES = (0.2, 2.0, 20.0)
POINTS = [{"trace": t, "law": law, "downtime": d}
          for t in TRACES for d in DOWNTIMES for law in ("trace", "exponential")]
REPLICATIONS = 12
SEED = 21
QUICK = {
    "BASE": {"floor_horizon": 60, "burn_in": 10, "capture_time": 40},
    "POINTS": [{"trace": "aws-p3", "law": law, "downtime": 2.0} for law in ("trace", "exponential")],
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- closed forms


#: Closed forms (derived here, checked by this experiment), from sim.analytic.
contraction_rate = analytic.churn_contraction_rate
async_noise_floor = analytic.async_noise_floor


# ----------------------------------------------------------------------------- model


def model(config: TraceChurnConfig, streams: Streams) -> dict[str, Any]:
    """One replication: contraction, floor and capture runs on independent streams."""
    c = gossip_model(config.gossip("contraction"), streams.child("contraction"))
    f = gossip_model(config.gossip("floor"), streams.child("floor"))
    k = gossip_model(config.gossip("capture"), streams.child("capture"))
    D = c["disagreement"]
    return {
        "ratio_end": float(D[-1] / D[0]),
        "noise_floor": float(f["noise_floor"]),
        "capture_left": float(k["capture_ratio"]),
    }


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per point: decay rate, floor and capture (95% CI) beside the closed forms."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        st = _stats(cfg.trace)
        n, t = cfg.nodes, cfg.contraction_time
        ratio = mean_ci([float(r["ratio_end"]) for r in recs])
        fl = mean_ci([float(r["noise_floor"]) for r in recs])
        cap = mean_ci([float(r["capture_left"]) for r in recs])

        def rate(x: float, t: int = t) -> float:
            return -math.log(x) / t if x > 0 else math.inf

        # the ratio spans decades: a 95% interval on the log scale (delta method), as churn.py
        w = (ratio.high - ratio.mean) / ratio.mean if ratio.mean > 0 else math.nan
        r_lo, r_hi = ratio.mean * math.exp(-w), ratio.mean * math.exp(w)
        rows.append({
            "trace": cfg.trace, "nodes": n, "availability": st["availability"],
            "batch_fraction": st["batch_fraction"], "downtime": cfg.downtime, "law": cfg.law,
            "replications": len(recs),
            "rate": rate(ratio.mean), "rate_low": rate(r_hi), "rate_high": rate(r_lo),
            "rate_closed_form": contraction_rate(n, st["availability"], cfg.wake_rate),
            "noise_floor": fl.mean, "noise_floor_low": fl.low, "noise_floor_high": fl.high,
            "floor_no_churn": async_noise_floor(n, cfg.noise),
            "capture_left": cap.mean, "capture_low": cap.low, "capture_high": cap.high,
        })
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure (three panels against the downtime scale), table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["trace", "nodes", "availability", "downtime", "law", "rate", "rate_low", "rate_high",
            "rate_closed_form", "noise_floor", "noise_floor_low", "noise_floor_high",
            "floor_no_churn", "capture_left", "capture_low", "capture_high"]
    text = write_tables(rows, cols, out_dir, NAME,
                        "Async gossip under churn from real traces vs exponential churn",
                        fmt=format_4g)
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    panels = []
    for key, ylabel, norm in (("rate", "decay rate / closed form", "rate_closed_form"),
                              ("noise_floor", "noise floor / no-churn floor", "floor_no_churn"),
                              ("capture", "gap to b left at capture_time", None)):
        series = []
        for i, t in enumerate(traces):
            for law, marker in (("trace", "o"), ("exponential", "s")):
                rs = sorted([r for r in rows if r["trace"] == t and r["law"] == law],
                            key=lambda r: r["downtime"])
                if not rs:
                    continue
                m = "capture_left" if key == "capture" else key
                lo = "capture_low" if key == "capture" else f"{key}_low"
                hi = "capture_high" if key == "capture" else f"{key}_high"
                d = [r[norm] if norm else 1.0 for r in rs]
                series.append({
                    "label": f"{t} ({law})" if key == "capture" else None, "x": [r["downtime"] for r in rs], "style": "points",
                    "marker": marker, "color": f"C{i}",
                    "mean": [r[m] / k for r, k in zip(rs, d, strict=True)],
                    "low": [r[lo] / k for r, k in zip(rs, d, strict=True)],
                    "high": [r[hi] / k for r, k in zip(rs, d, strict=True)]})
        panels.append({"series": series, "xlabel": "mean down time (gossip time units)",
                       "ylabel": ylabel, "logx": True, "logy": key != "rate",
                       "legend": "outside" if key == "capture" else None})
    plot_stress_panels(panels, out_dir / f"{NAME}.png",
                       caption="Async gossip on the complete graph, n = trace capacity; circles: "
                               "churn replayed from the trace (random policy); squares: exponential "
                               "churn at the same availability and mean down time (95% CI).")
    print(f"\n{NAME}: async gossip under trace churn vs exponential churn\n{text}\n")
    for t in traces:
        for d in sorted({r["downtime"] for r in rows if r["trace"] == t}):
            pair = {r["law"]: r for r in rows if r["trace"] == t and r["downtime"] == d}
            if len(pair) < 2:
                continue
            a, b = pair["trace"], pair["exponential"]
            print(f"  {t}, downtime {d:g}: rate {a['rate']:.3g} vs {b['rate']:.3g}; floor "
                  f"{a['noise_floor']:.3g} vs {b['noise_floor']:.3g}; gap left "
                  f"{a['capture_left']:.3g} vs {b['capture_left']:.3g} (trace vs exponential)")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
