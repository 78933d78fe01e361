"""Study A's designs on real preemption traces: what burstiness costs in drop rate.

Study A assumes every worker is up with probability ``a`` independently of
the others. Real spot and preemptible instances are lost in bursts (in the
EC2 p3 trace, 40 of 79 preemption events take two or more instances at once).
Here a pipeline of ``L = 8`` stages, each held by ``r`` replicas, with a skip
budget ``s`` (Study A's snapshot model: zero crossing time, drop at once),
receives ``microbatches`` evenly spaced microbatches per span of the trace,
for ``spans`` whole spans, while its workers replay, in turn:

``trace``
    the shipped trace itself, looped from a uniformly random start per
    replication, through a mapping policy: ``random`` (the up set is uniform
    given the count) or ``domain`` (the stages are the failure domains; a
    burst empties whole stages first). More workers than the trace's capacity
    tile it (copies shifted by a fraction of the span).
``fitted``
    a fresh synthetic trace per replication from the trace's fitted bursty
    model (Poisson events of the trace's rate, sizes from its empirical law,
    down times from its best-fitting law with the mean set by Little's law),
    same policy;
``independent``
    Study A's law: every worker alternates exponential up and down times with
    the trace's availability and mean down time, independently.

References (exact):

* ``independent``: ``P(Bin(L, q) > s)`` with ``q = (1 - a)**r`` (Study A,
  ``rho = 0``), ``a`` the trace's availability;
* ``trace`` with the ``random`` policy and ``L r`` at most the capacity ``C``:
  given ``c`` instances up, the ``L r`` workers hold a hypergeometric number
  ``u`` of them and the ``u`` are a uniform subset, so the drop probability is
  ``g(c) = sum_u Hyp(u; C, c, L r) h(u)`` with ``h(u)`` the chance that more
  than ``s`` stages hold none of ``u`` uniform up workers (counted exactly);
  over a whole loop from a uniform start, the expected drop rate is the
  time average of ``g(c(t))``.

Run::

    dtsim run experiments/trace_designs.py --quick
    python experiments/trace_designs.py                 # full run, a few minutes on 2 cores

Writes ``trace_designs.png``, ``trace_designs.csv`` and ``trace_designs.md``
and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

import sim.runner
from sim.errors import check_choice, check_int
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import format_4g, judge_equal, rate_ci, write_tables
from sim.rng import Streams
from sim.traces import TraceReplay, load_trace, trace_stats

# ----------------------------------------------------------------------------- parameters

NAME = "trace_designs"
LAWS = ("trace", "fitted", "independent")


@dataclass(frozen=True)
class TraceDesign:
    """One design on one failure law derived from one trace.

    Parameters
    ----------
    trace : str
        A shipped trace name.
    law : {"trace", "fitted", "independent"}
        What the workers replay (see the module notes).
    policy : {"random", "domain"}
        Mapping policy for ``trace`` and ``fitted`` (tiling when needed).
    stages, replicas, skip_budget : int
        Study A's ``L``, ``r``, ``s``.
    microbatches : int
        Microbatches per span of the trace, spread evenly.
    spans : int
        Spans of the trace (whole loops) per replication.
    """

    trace: str = "aws-p3"
    law: str = "trace"
    policy: str = "random"
    stages: int = 8
    replicas: int = 2
    skip_budget: int = 0
    microbatches: int = 2000
    spans: int = 4

    def __post_init__(self) -> None:
        check_choice("law", self.law, LAWS)
        check_choice("policy", self.policy, ("random", "domain"))
        check_int("microbatches", self.microbatches, low=1)
        check_int("spans", self.spans, low=1)
        self.pipeline()  # validates everything before any run

    def pipeline(self) -> PipelineConfig:
        """The :class:`~sim.pipeline.PipelineConfig` of this point."""
        st = _stats(self.trace)
        span = st["duration"]
        common = dict(stages=self.stages, replicas=self.replicas, skip_budget=self.skip_budget,
                      microbatches=self.microbatches * self.spans, rate=self.microbatches / span)
        if self.law == "independent":
            return PipelineConfig(availability=st["availability"],
                                  mean_downtime=_mean_down(self.trace), **common)
        replay = TraceReplay(self.trace, policy=self.policy + "+tile", loop=True,
                             resample="offset", model=self.law)
        return PipelineConfig(failure_trace=replay, **common)


@cache
def _stats(name: str) -> dict[str, Any]:
    return trace_stats(load_trace(name))


def _mean_down(name: str) -> float:
    """Little's law: mean down time = capacity (1 - a) span / instances lost."""
    st = _stats(name)
    return st["nodes"] * (1 - st["availability"]) * st["duration"] / st["preempted_nodes"]


TRACES = ("aws-p2-3day", "aws-g4dn-24h", "aws-p2-19h", "gcp-a100", "aws-p3")
DESIGNS = ({"replicas": 1, "skip_budget": 2}, {"replicas": 2, "skip_budget": 0},
           {"replicas": 2, "skip_budget": 1}, {"replicas": 3, "skip_budget": 0})
BASE = TraceDesign()
POINTS = [{"trace": t, "law": law, "policy": pol, **d}
          for t in TRACES for d in DESIGNS
          for law, pol in (("trace", "random"), ("trace", "domain"), ("fitted", "random"),
                           ("fitted", "domain"), ("independent", "random"))]
REPLICATIONS = 30
#: Metrics that are probabilities (a per-microbatch rate (trace outages are correlated in time)): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None}
SEED = 15
QUICK = {
    "BASE": {"microbatches": 1000, "spans": 1},
    "POINTS": [{"trace": t, "law": law, "policy": "random", **d}
               for t in ("aws-p3", "gcp-a100") for d in DESIGNS[1:3] for law in LAWS],
    "REPLICATIONS": 4,
}


# ----------------------------------------------------------------------------- exact references


def independent_drop(cfg: TraceDesign) -> float:
    """``P(Bin(L, (1 - a)**r) > s)``: Study A with the trace's availability, ``rho = 0``."""
    q = (1 - _stats(cfg.trace)["availability"]) ** cfg.replicas
    return float(sps.binom.sf(cfg.skip_budget, cfg.stages, q))


def _stage_drop_given_up(L: int, r: int, s: int) -> np.ndarray:
    """``h(u)``: P(more than ``s`` of ``L`` stages of ``r`` hold none of ``u`` uniform up workers)."""
    W = L * r
    # ways[u][k]: choices of u up workers with exactly k empty stages
    ways = np.zeros((W + 1, L + 1))
    ways[0, 0] = 1.0
    for _ in range(L):
        new = np.zeros_like(ways)
        for j in range(r + 1):
            c = math.comb(r, j)
            if j == 0:
                new[:, 1:] += c * ways[:, :-1]
            else:
                new[j:, :] += c * ways[:W + 1 - j, :]
        ways = new
    total = np.array([math.comb(W, u) for u in range(W + 1)], dtype=float)
    return ways[:, s + 1:].sum(axis=1) / total


def trace_drop(cfg: TraceDesign) -> float | None:
    """Time average of ``g(c(t))`` (random policy, ``L r <= C``); None where it does not apply."""
    if cfg.law != "trace" or cfg.policy != "random":
        return None
    tr = load_trace(cfg.trace)
    C, W = tr.capacity, cfg.stages * cfg.replicas
    if W > C:
        return None
    h = _stage_drop_given_up(cfg.stages, cfg.replicas, cfg.skip_budget)
    u = np.arange(W + 1)
    g = np.array([float(np.dot(sps.hypergeom.pmf(u, C, c, W), h)) for c in range(C + 1)])
    dt = np.diff(np.append(tr.times, tr.end))
    return float(np.dot(dt, g[tr.counts]) / tr.end)


# ----------------------------------------------------------------------------- model


def model(config: TraceDesign, streams: Streams) -> dict[str, Any]:
    """One replication: the pipeline DES on the point's failure law."""
    m = des_pipeline_model(config.pipeline(), streams)
    return {"drop_rate": m["drop_rate"], "mean_skipped": m["mean_skipped"]}


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per point: drop rate (95% CI), its exact reference where there is one."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        # a rate: Wilson interval on the effective count, "below X" when no drop is seen
        e = rate_ci([float(r["drop_rate"]) for r in recs])
        ref = independent_drop(cfg) if cfg.law == "independent" else trace_drop(cfg)
        st = _stats(cfg.trace)
        rows.append({
            "trace": cfg.trace, "availability": st["availability"],
            "batch_fraction": st["batch_fraction"],
            "design": f"r={cfg.replicas} s={cfg.skip_budget}",
            "workers": cfg.stages * cfg.replicas,
            "law": cfg.law if cfg.law == "independent" else f"{cfg.law} ({cfg.policy})",
            "replications": len(recs),
            "drop_rate": e.mean, "drop_low": e.low, "drop_high": e.high,
            # no drop in any replication says nothing about a small exact value
            "exact": ref, "exact_in_interval": None if ref is None or e.mean == 0 else bool(
                judge_equal(e, ref).holds),
            "over_binomial": e.mean / independent_drop(cfg) if independent_drop(cfg) > 0 else math.nan,
            "_cfg": cfg,
        })
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure (drop rate per law, one panel per trace), table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["trace", "availability", "batch_fraction", "design", "workers", "law", "drop_rate",
            "drop_low", "drop_high", "exact", "over_binomial"]
    title = "Study A's designs on real traces: drop rate by failure law (L = 8)"
    text = write_tables(rows, cols, out_dir, NAME, title, fmt=format_4g)
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    silent = [t for t in traces if all(r["drop_rate"] == 0 for r in rows if r["trace"] == t)]
    drawn = [t for t in traces if t not in silent]
    designs = list(dict.fromkeys(r["design"] for r in rows))
    laws = list(dict.fromkeys(r["law"] for r in rows))
    panels = []
    for t in drawn:
        series = []
        last = t == drawn[-1]  # one legend, right of the last panel
        for i, law in enumerate(laws):
            rs = {r["design"]: r for r in rows if r["trace"] == t and r["law"] == law}
            xs = [k + (i - (len(laws) - 1) / 2) * 0.12 for k, d in enumerate(designs) if d in rs]
            ds = [d for d in designs if d in rs]
            if not ds:
                continue
            s = {"label": law if last else None, "x": xs, "style": "points", "color": f"C{i}",
                 "mean": [max(rs[d]["drop_rate"], 1e-5) for d in ds],
                 "low": [max(rs[d]["drop_low"], 1e-5) for d in ds],
                 "high": [max(rs[d]["drop_high"], 1e-5) for d in ds]}
            ex = [(x, rs[d]["exact"]) for x, d in zip(xs, ds, strict=True) if rs[d]["exact"]]
            if ex:
                s.update(ref_x=[x for x, _ in ex], ref_y=[max(y, 1e-5) for _, y in ex],
                         ref_label=f"exact ({law})" if last else None, ref_style="none",
                         ref_marker="x")
            series.append(s)
        st = _stats(t)
        panels.append({"series": series, "xlabel": "design", "ylabel": "drop rate", "logy": True,
                       "title": f"{t}: a={st['availability']:.3f}, bursts {st['batch_fraction']:.2f}",
                       "xticks": (list(range(len(designs))), designs),
                       "legend": "outside" if last else None})
    plot_stress_panels(panels, out_dir / f"{NAME}.png", ncols=min(3, len(panels)),
                       caption="L = 8 stages; points: pipeline DES, 95% CI across replications "
                               "(drop rates below 1e-5 drawn at 1e-5); x: exact references."
                               + (f" Not drawn (no drop under any law): {', '.join(silent)}."
                                  if silent else ""))
    print(f"\n{NAME}: drop rate by failure law\n{text}\n")
    for t in traces:
        ind = {r["design"]: r for r in rows if r["trace"] == t and r["law"] == "independent"}
        for law in laws:
            if law == "independent":
                continue
            rs = [r for r in rows if r["trace"] == t and r["law"] == law]
            if not rs:
                continue
            best = min(rs, key=lambda r: r["drop_rate"])
            ratios = ", ".join(f"{r['design']}: {r['drop_rate']:.3g} vs {ind[r['design']]['drop_rate']:.3g}"
                               for r in rs if r["design"] in ind)
            print(f"  {t} {law}: best {best['design']} ({best['drop_rate']:.3g}); vs independent {ratios}")
    checks = [r for r in rows if r["exact_in_interval"] is not None]
    inside = sum(bool(r["exact_in_interval"]) for r in checks)
    print(f"  exact references inside the 95% interval: {inside} of {len(checks)} (points with "
          "no drop at all left out)")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
