"""Stress test 10: churn -- honest nodes go offline; contraction and noise floor vs availability.

Study B assumes every node is always there. Here each of ``n`` honest nodes
runs ``async`` gossip (a Poisson clock of rate ``wake_rate``; on waking it adds
its noise, then averages with a uniformly random *online* peer; exchanges are
instantaneous) and is a worker of the failure model, up a fraction
``availability`` of the time with exponential downtimes of mean
``mean_downtime``. An offline node neither wakes nor is chosen; its value is
frozen and still counts in the disagreement ``D``.

The closed forms this departs from (no churn, derived like Study B's):

* contraction: a wake is a uniformly random pair, so
  ``E[D(t)] = D(0) exp(-n lambda t / (n - 1))``; with churn independent of the
  values, only online pairs exchange, at total rate
  ``n a lambda (1 - (1 - a)**(n-1))``, giving the rate
  ``r(a) = n a lambda (1 - (1 - a)**(n-1)) / (n - 1)`` per time unit;
* noise floor: per wake ``E[D'] = (1 - 1/(n-1)) D + (n-2) s**2 / (2n)``, so
  ``D* = (n - 1)(n - 2) s**2 / (2 n)`` (half the matching floor: one noisy node
  per exchange, not two), whatever the availability.

Both hold when downtimes are short against a node's wake interval (the
``mean_downtime = 0.02`` points). With longer downtimes the nodes that were just
offline are the stale ones, so online pairs are closer than average and each
exchange contracts less; with downtimes long against the averaging,
contraction stalls at the rate the nodes come back, and the floor rises
because the consensus random-walks away from the frozen values.

Run::

    dtsim run experiments/churn.py --quick
    python experiments/churn.py                   # full run, a few minutes on 2 cores

Writes ``churn.png``, ``churn.csv`` and ``churn.md`` and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim import analytic
from sim.errors import check_int, check_positive
from sim.gossip import GossipConfig, gossip_model
from sim.results import as_array, format_4g, mean_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "churn"


@dataclass(frozen=True)
class ChurnConfig:
    """One availability / downtime point; two runs per replication (contraction, floor).

    Parameters
    ----------
    nodes : int
        Honest nodes ``n`` on the complete graph.
    wake_rate : float
        Poisson wake-up rate ``lambda`` of each online node.
    availability : float
        Fraction of time a node is online, in (0, 1].
    mean_downtime : float
        Mean (exponential) offline period.
    noise : float
        Noise standard deviation ``s`` of the floor run.
    contraction_time : int
        Horizon of the noiseless run; ``D`` is recorded every time unit.
    floor_horizon, burn_in : int
        Horizon of the noisy run and the time excluded from its average.
    """

    nodes: int = 32
    wake_rate: float = 1.0
    availability: float = 1.0
    mean_downtime: float = 1.0
    noise: float = 1.0
    contraction_time: int = 8
    floor_horizon: int = 400
    burn_in: int = 20

    def __post_init__(self) -> None:
        check_int("nodes", self.nodes, low=3)
        check_positive("noise", self.noise)
        check_int("contraction_time", self.contraction_time, low=1)
        check_int("floor_horizon", self.floor_horizon, low=2)
        check_int("burn_in", self.burn_in, low=0, high=self.floor_horizon - 1)
        self.gossip(noisy=False)
        self.gossip(noisy=True)

    def gossip(self, *, noisy: bool) -> GossipConfig:
        """The :class:`~sim.gossip.GossipConfig` of the contraction or the floor run."""
        return GossipConfig(
            topology="complete", nodes=self.nodes, protocol="async", latency=0.0,
            wake_rate=self.wake_rate, availability=self.availability,
            mean_downtime=self.mean_downtime,
            rounds=self.floor_horizon if noisy else self.contraction_time,
            noise=self.noise if noisy else 0.0, burn_in=self.burn_in if noisy else 0,
        )


BASE = ChurnConfig()
AVAILABILITY = (0.9, 0.7, 0.5)
DOWNTIME = (0.2, 2.0, 20.0)
#: Very fast churn: 25 to 50 failure events per node per time unit, so a shorter floor run.
FAST = {"mean_downtime": 0.02, "floor_horizon": 100}
POINTS = [{"availability": 1.0}] + [{"availability": a, **FAST} for a in AVAILABILITY] + [
    {"availability": a, "mean_downtime": mu} for mu in DOWNTIME for a in AVAILABILITY
]
REPLICATIONS = 20
SEED = 10
QUICK = {
    "BASE": {"floor_horizon": 120, "burn_in": 10},
    "POINTS": [{"availability": 1.0}, {"availability": 0.5, "mean_downtime": 0.02, "floor_horizon": 30},
               {"availability": 0.5, "mean_downtime": 20.0}],
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- closed forms


#: Closed forms (derived here, checked by this experiment), from sim.analytic.
contraction_rate = analytic.churn_contraction_rate
async_noise_floor = analytic.async_noise_floor


# ----------------------------------------------------------------------------- model


def model(config: ChurnConfig, streams: Streams) -> dict[str, Any]:
    """One replication: a noiseless run (contraction) and a noisy run (floor), independent streams."""
    n = config.nodes
    c = gossip_model(config.gossip(noisy=False), streams.child("contraction"))
    D = np.asarray(c["disagreement"], dtype=float)
    f = gossip_model(config.gossip(noisy=True), streams.child("floor"))
    return {
        "ratio_end": float(D[-1] / (n - 1)),
        "ratio": (D / (n - 1)).tolist(),
        "noise_floor": float(f["noise_floor"]),
        "exchanges_per_time": float(f["exchanges"]) / config.floor_horizon,
    }


# ----------------------------------------------------------------------------- analysis


def _log_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and a 95% interval on the log scale (delta method), for ratios spanning decades."""
    e = mean_ci(values)
    w = (e.high - e.mean) / e.mean if e.mean > 0 else math.nan
    return e.mean, e.mean * math.exp(-w), e.mean * math.exp(w)


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per point: contraction rate and noise floor, simulated (95% CI) and closed form."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        n, t = cfg.nodes, cfg.contraction_time
        m, lo, hi = _log_interval(np.array([float(r["ratio_end"]) for r in recs]))
        rate_cf = contraction_rate(n, cfg.availability, cfg.wake_rate)
        fl = mean_ci([float(r["noise_floor"]) for r in recs])
        fl_cf = async_noise_floor(n, cfg.noise)
        R = np.stack([as_array(r["ratio"]) for r in recs])
        rate = -math.log(m) / t
        rows.append({
            "availability": cfg.availability,
            "mean_downtime": cfg.mean_downtime if cfg.availability < 1 else 0.0,
            "replications": len(recs),
            "rate": rate, "rate_low": -math.log(hi) / t, "rate_high": -math.log(lo) / t,
            "rate_closed_form": rate_cf, "rate_over_cf": rate / rate_cf,
            "rate_cf_in_interval": bool(-math.log(hi) / t <= rate_cf <= -math.log(lo) / t),
            "noise_floor": fl.mean, "noise_floor_low": fl.low, "noise_floor_high": fl.high,
            "noise_floor_closed_form": fl_cf, "floor_over_cf": fl.mean / fl_cf,
            "floor_cf_in_interval": bool(fl.low <= fl_cf <= fl.high),
            "_curve": R.mean(axis=0), "_rate_cf": rate_cf, "_t": np.arange(R.shape[1], dtype=float),
        })
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["availability", "mean_downtime", "rate", "rate_low", "rate_high", "rate_closed_form",
            "rate_over_cf", "noise_floor", "noise_floor_low", "noise_floor_high",
            "noise_floor_closed_form", "floor_over_cf"]
    title = "Churn: contraction rate and noise floor vs availability"
    text = write_tables(rows, cols, out_dir, "churn", title, fmt=format_4g)
    full = [r for r in rows if r["availability"] == 1.0]
    downs = sorted({r["mean_downtime"] for r in rows if r["availability"] < 1})
    rate_s, floor_s = [], []
    agrid = np.linspace(min(r["availability"] for r in rows), 1.0, 50)
    n, lam, s = BASE.nodes, BASE.wake_rate, BASE.noise
    for i, mu in enumerate(downs):
        rs = sorted([r for r in rows if r["mean_downtime"] == mu], key=lambda r: r["availability"])
        x = [r["availability"] for r in rs]
        rate_s.append({"label": f"mean downtime {mu:g}", "x": x, "style": "points", "color": f"C{i}",
                       "mean": [r["rate"] for r in rs], "low": [r["rate_low"] for r in rs],
                       "high": [r["rate_high"] for r in rs]})
        floor_s.append({"label": f"mean downtime {mu:g}", "x": x, "style": "points", "color": f"C{i}",
                        "mean": [r["noise_floor"] for r in rs], "low": [r["noise_floor_low"] for r in rs],
                        "high": [r["noise_floor_high"] for r in rs]})
    for r in full:
        rate_s.append({"label": "no churn", "x": [1.0], "style": "points", "marker": "s", "color": "k",
                       "mean": [r["rate"]], "low": [r["rate_low"]], "high": [r["rate_high"]]})
        floor_s.append({"label": "no churn", "x": [1.0], "style": "points", "marker": "s", "color": "k",
                        "mean": [r["noise_floor"]], "low": [r["noise_floor_low"]],
                        "high": [r["noise_floor_high"]]})
    rate_s.append({"label": None, "x": [], "mean": [], "color": "k", "ref_x": agrid,
                   "ref_y": [contraction_rate(n, a, lam) for a in agrid],
                   "ref_label": "closed form n a lambda (1-(1-a)^(n-1)) / (n-1)"})
    floor_s.append({"label": None, "x": [], "mean": [], "color": "k", "ref_x": [agrid[0], 1.0],
                    "ref_y": [async_noise_floor(n, s)] * 2, "ref_label": "closed form (n-1)(n-2)s^2/(2n)"})
    plot_stress_panels(
        [{"series": rate_s, "xlabel": "availability a", "ylabel": "decay rate of E[D] per time unit",
          "title": f"Contraction (from E[D(t)]/E[D(0)] at t={BASE.contraction_time})"},
         {"series": floor_s, "xlabel": "availability a", "ylabel": "stationary E[D]",
          "title": f"Noise floor (s={s:g})"}],
        out_dir / "churn.png",
        caption=f"Async gossip on the complete graph, n={n}, wake rate {lam:g}, instant exchanges; nodes "
                "offline per the failure model (exponential downtimes). Points: simulation (95% CI across "
                "replications); black: the no-churn closed forms with the online-pair rate.")
    print(f"\n{NAME}: contraction rate and noise floor vs availability (n={n})\n{text}\n")
    for r in rows:
        tag = "no churn" if r["availability"] == 1 else f"a={r['availability']:g}, downtime {r['mean_downtime']:g}"
        print(f"  {tag}: rate {r['rate']:.3f} [{r['rate_low']:.3f}, {r['rate_high']:.3f}] vs "
              f"{r['rate_closed_form']:.3f} ({'inside' if r['rate_cf_in_interval'] else 'OUTSIDE'}); "
              f"floor {r['noise_floor']:.2f} [{r['noise_floor_low']:.2f}, {r['noise_floor_high']:.2f}] vs "
              f"{r['noise_floor_closed_form']:.2f} ({'inside' if r['floor_cf_in_interval'] else 'OUTSIDE'})")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
