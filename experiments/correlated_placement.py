"""Stress test 1: correlated placement -- replicas on a datacenter with rack and region outages.

Study A gives every stage its own failure domain, independent of the others,
so the number of out stages is ``Binomial(L, q)``. On a real datacenter the
stages share racks and regions. This experiment places ``L x r`` replica
workers on a ``regions > racks > hosts`` layout (:func:`topologies.datacenter`)
with three policies (:func:`topologies.placement.place`):

``shared``  each stage's replicas in one rack (the study's design), racks grouped in regions;
``spread``  each stage's replicas in distinct regions;
``packed``  hosts filled rack by rack, so consecutive stages share racks.

and compares, for skip budgets ``s = 0..4``, the simulated drop rate with

* the *binomial law* a designer would use: each stage out with its own
  marginal probability ``q_j`` (exact, from its domain chain), stages
  independent (a Poisson-binomial; ``Binomial(L, q)`` when the ``q_j`` agree);
* the *exact conditional formula* :func:`sim.analytic.out_stage_distribution`,
  which conditions on the shared domains.

One simulation per placement gives every ``s`` at once: with ``s = L`` nothing
is dropped and the fraction of microbatches that skipped ``k`` stages is the law
of the number of out stages ``K``; the drop rate for budget ``s`` is ``P(K > s)``.

Run::

    dtsim run experiments/correlated_placement.py --quick
    python experiments/correlated_placement.py        # full run

Writes ``placement.png``, ``placement.csv`` and ``placement.md`` and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
import topologies
from sim import analytic
from sim.errors import check_choice, check_int, check_positive, check_probability
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import format_4g, judge_equal, rate_ci, write_tables
from sim.rng import Streams
from topologies.placement import place

# ----------------------------------------------------------------------------- parameters

NAME = "correlated_placement"

#: Skip budgets reported (each is a tail of the one simulated law of K).
SKIPS = (0, 1, 2, 3, 4)
#: The drop-rate target a designer must meet.
TARGET = 0.01
POLICIES = ("shared", "spread", "packed")


@dataclass(frozen=True)
class PlacementConfig:
    """One placement on a datacenter layout (validated on construction).

    Parameters
    ----------
    policy : {"shared", "spread", "packed"}
        Placement policy of :func:`topologies.placement.place`.
    stages, replicas : int
        ``L`` stages of ``r`` replicas each.
    regions, racks, hosts : int
        Layout size: regions, racks per region, hosts per rack.
    region_outage, rack_outage : float
        Unavailability of each region and each rack.
    availability : float
        Each worker's own availability ``a``.
    mean_downtime, domain_downtime : float
        Mean outage of a worker and of a domain (time units; one microbatch per unit).
    microbatches : int
        Microbatches per replication.
    """

    policy: str = "shared"
    stages: int = 12
    replicas: int = 3
    regions: int = 3
    racks: int = 4
    hosts: int = 4
    region_outage: float = 0.005
    rack_outage: float = 0.01
    availability: float = 0.9
    mean_downtime: float = 1.0
    domain_downtime: float = 1.0
    microbatches: int = 20_000

    def __post_init__(self) -> None:
        check_choice("policy", self.policy, POLICIES)
        check_probability("region_outage", self.region_outage)
        check_probability("rack_outage", self.rack_outage)
        check_positive("domain_downtime", self.domain_downtime)
        check_int("microbatches", self.microbatches, low=1)
        self.pipeline()  # validates the rest (layout size, placement feasibility)

    def placement(self) -> Any:
        """The :class:`topologies.placement.Placement` of this config."""
        layout = topologies.datacenter(self.regions, self.racks, self.hosts,
                                       region_outage=self.region_outage,
                                       rack_outage=self.rack_outage)
        return place(layout, self.stages, self.replicas, self.policy)

    def pipeline(self) -> PipelineConfig:
        """The snapshot pipeline with this placement and skip budget ``L`` (never drops)."""
        return PipelineConfig(
            stages=self.stages, placement=self.placement(), skip_budget=self.stages,
            availability=self.availability, mean_downtime=self.mean_downtime,
            domain_downtime=self.domain_downtime, microbatches=self.microbatches, rate=1.0,
        )


BASE = PlacementConfig()
FACTORS = {"policy": list(POLICIES)}
REPLICATIONS = 20
#: Metrics that are probabilities (drop rates (time-correlated outages: microbatches are not independent trials)): intervals inside [0, 1] in summary.csv.
RATES = {f"drop_s{s}": None for s in SKIPS}
SEED = 1
QUICK = {"BASE": {"microbatches": 2_000}, "REPLICATIONS": 3}


# ----------------------------------------------------------------------------- closed forms


def out_stage_laws(config: PlacementConfig) -> tuple[np.ndarray, np.ndarray]:
    """Law of the number of out stages: (exact, independent stages with exact marginals)."""
    pl = config.placement()
    exact = analytic.out_stage_distribution(pl.replica_domains, pl.domain_outage,
                                            config.availability)
    indep = np.array([1.0])
    for row in pl.replica_domains:
        q = float(analytic.out_stage_distribution([row], pl.domain_outage, config.availability)[1])
        indep = np.convolve(indep, [1.0 - q, q])
    return exact, indep


def tails(dist: np.ndarray) -> dict[int, float]:
    """``P(K > s)`` for each reported ``s``."""
    return {s: float(max(0.0, dist[s + 1:].sum())) for s in SKIPS}


# ----------------------------------------------------------------------------- model


def model(config: PlacementConfig, streams: Streams) -> dict[str, float]:
    """One replication: the drop rate for each skip budget ``s`` (from the law of ``K``)."""
    m = des_pipeline_model(config.pipeline(), streams)
    pk = np.array([m[f"skipped_{k}"] for k in range(config.stages + 1)])
    return {f"drop_s{s}": float(pk[s + 1:].sum()) for s in SKIPS} | {
        "mean_out_stages": float(np.dot(np.arange(pk.size), pk))}


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per (policy, s): simulated drop rate (95% CI), exact, binomial, ratios."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        exact, indep = (tails(d) for d in out_stage_laws(cfg))
        for s in SKIPS:
            # a rate: Wilson interval on the effective count, "below X" when no drop is seen
            e = rate_ci([r[f"drop_s{s}"] for r in recs])
            rows.append({
                "policy": cfg.policy, "skip_budget": s, "replications": len(recs),
                "drop": e.mean, "drop_low": e.low, "drop_high": e.high,
                "exact": exact[s], "binomial": indep[s],
                "exact_over_binomial": exact[s] / indep[s] if indep[s] > 0 else math.inf,
                "exact_in_interval": bool(judge_equal(e, exact[s]).holds),
                "binomial_in_interval": bool(judge_equal(e, indep[s]).holds),
                "_drop_text": e.text(lambda v: f"{v:.4%}"), "_kind": e.kind,
            })
    return rows


def choices(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per policy, the smallest skip budget meeting TARGET by each law (None: none of SKIPS)."""
    out = []
    for pol in POLICIES:
        rs = sorted((r for r in rows if r["policy"] == pol), key=lambda r: r["skip_budget"])
        if not rs:
            continue
        row: dict[str, Any] = {"policy": pol}
        for law in ("binomial", "exact", "drop"):
            ok = [r for r in rs if r[law] <= TARGET]
            row[law] = ok[0] if ok else None
        out.append(row)
    return out


COLUMNS = ["policy", "skip_budget", "drop", "drop_low", "drop_high", "exact", "binomial",
           "exact_over_binomial", "exact_in_interval", "binomial_in_interval"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = "Correlated placement: drop rate vs skip budget, simulated vs exact vs binomial"
    text = write_tables(rows, COLUMNS, out_dir, "placement", title, fmt=format_4g)
    panels = []
    for pol in POLICIES:
        rs = [r for r in rows if r["policy"] == pol]
        if not rs:
            continue
        x = [r["skip_budget"] for r in rs]
        panels.append({
            "xlabel": "skip budget s", "ylabel": "drop rate P(K > s)", "logy": True,
            "title": f"{pol} placement", "hline": TARGET,
            "series": [
                {"label": "simulated (95% CI)", "x": x, "style": "points", "color": "C0",
                 "mean": [r["drop"] for r in rs], "low": [r["drop_low"] for r in rs],
                 "high": [r["drop_high"] for r in rs], "kinds": [r["_kind"] for r in rs],
                 "ref_x": x, "ref_y": [r["exact"] for r in rs], "ref_style": "-",
                 "ref_label": "exact (conditions on shared domains)"},
                {"label": None, "x": [], "mean": [], "color": "C3", "ref_x": x,
                 "ref_y": [r["binomial"] for r in rs],
                 "ref_label": "binomial law (independent stages)"},
            ],
        })
    c = BASE
    plot_stress_panels(
        panels, out_dir / "placement.png",
        title=f"Correlated placement: L={c.stages}, r={c.replicas}, datacenter {c.regions} regions x "
              f"{c.racks} racks x {c.hosts} hosts, region outage {c.region_outage:g}, "
              f"rack outage {c.rack_outage:g}, a={c.availability}",
        caption=f"Snapshot pipeline DES; points: simulation, 95% CI across "
                f"{rows[0]['replications'] if rows else 0} replications (triangles: no drop seen, 95% upper bound); solid: exact law of the out stages; dashed red: binomial law with each stage's "
                f"exact marginal; dotted: the {TARGET:.0%} target.")
    print(f"\n{NAME}: drop rate by placement and skip budget (target {TARGET:.0%})\n{text}\n")
    for r in rows:
        print(f"  {r['policy']:6s} s={r['skip_budget']}: simulated {r['_drop_text']}, "
              f"exact {r['exact']:.4%} "
              f"({'inside' if r['exact_in_interval'] else 'OUTSIDE'}), binomial {r['binomial']:.4%} "
              f"({'inside' if r['binomial_in_interval'] else 'OUTSIDE'}); exact/binomial "
              f"{r['exact_over_binomial']:.3g}")
    for ch in choices(rows):
        b, e = ch["binomial"], ch["exact"]
        if b is None:
            continue
        what = (f"smallest s meeting {TARGET:.0%} exactly: s={e['skip_budget']}" if e is not None
                else f"no s <= {SKIPS[-1]} meets {TARGET:.0%} exactly")
        print(f"  {ch['policy']}: the binomial law says s={b['skip_budget']} meets {TARGET:.0%} "
              f"(binomial {b['binomial']:.4%}); there the exact drop is {b['exact']:.4%} and the "
              f"simulated {b['_drop_text']} "
              f"(x{b['exact_over_binomial']:.3g}); {what}")

if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
