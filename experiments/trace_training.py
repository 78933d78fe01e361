"""Study A's designs training on real preemption traces: what burstiness costs in samples per second.

The companion of ``trace_designs.py`` (drop rate in Study A's snapshot
model): here the pipeline *trains*. A SWARM-style pipeline of Study A's
``L = 48`` stages (replicas are servers, least-loaded routing, a forward
pass of 1 time unit and a backward of 2, a step of ``m = 128``
microbatches, a lost pass re-queued after a detection timeout of 1, a
recovering replica downloads its stage's weights for 5 time units) runs for
``horizon = 8000`` time units from a uniformly random start in the (looped)
trace, while its workers replay, in turn:

``trace``
    the trace itself, through the ``random`` mapping policy (the up set is
    uniform given the count), looped from a uniformly random start per
    replication. Study A's designs need more workers (96 to 240) than any
    trace's capacity (10 to 64), so the policy tiles: the cluster is
    ``ceil(workers / capacity)`` copies of the trace's cluster, copy ``k``
    shifted by ``k / copies`` of the span (bursts hit each copy at other
    times; within a copy they hit together).
``fitted``
    a fresh synthetic trace per replication from the trace's fitted bursty
    model (``sim.traces.fit_model``: Poisson events at the trace's rate,
    sizes from its empirical law, down times from its best-fitting law with
    the mean set by Little's law), through the same policy and tiling;
``independent``
    Study A's law: every worker alternates exponential up and down times with
    the trace's availability and (Little's law) mean down time, independently.

The three laws have the same long-run worker availability (in expectation
over the random start; exactly over whole spans of the trace), which the
table reports as measured.

Time: a simulated time unit is ``speedup = 5`` trace seconds (a forward
pass of 5 s, a weight download of 25 s), so a replication covers 40000
trace seconds (about 11 hours: aws-p3's whole span; a random window of the
longer traces). A stage with no live replica is skipped within
the skip budget (quality ``(1 - kappa)^k``, ``kappa = 0.1``), otherwise the
microbatch waits for it (``max_wait = inf``: no drops, the step stalls).

Measured per point (95% interval across replications): samples per time
unit per worker (``sps_worker``, one sample per microbatch), the
quality-weighted version (``qsps_worker``, Study A's goodput over its cost
in workers), stall and download time, mean quality.

Run::

    dtsim run experiments/trace_training.py --quick
    python experiments/trace_training.py                 # full run, about 10 minutes on 2 cores

Writes ``trace_training.png``, ``trace_training.csv`` and ``trace_training.md``
and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import sim.runner
from sim.errors import check_choice, check_int, check_positive
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams
from sim.traces import TraceReplay, load_trace, trace_stats
from sim.training import TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "trace_training"
LAWS = ("trace", "fitted", "independent")


@dataclass(frozen=True)
class TraceTraining:
    """One design training on one failure law derived from one trace.

    Parameters
    ----------
    trace : str
        A shipped trace name (one whose instances are lost and come back).
    law : {"trace", "fitted", "independent"}
        What the workers replay (see the module notes).
    policy : {"random", "domain"}
        Mapping policy for ``trace`` and ``fitted`` (tiled).
    stages, replicas, skip_budget : int
        Study A's ``L``, ``r``, ``s``.
    skip_penalty : float
        ``kappa``.
    microbatches : int
        Microbatches per step.
    speedup : float
        Trace seconds per simulated time unit.
    horizon : float
        Simulated time units per replication (from a uniformly random start in
        the looped trace).
    """

    trace: str = "aws-p3"
    law: str = "trace"
    policy: str = "random"
    stages: int = 48
    replicas: int = 2
    skip_budget: int = 4
    skip_penalty: float = 0.1
    microbatches: int = 128
    speedup: float = 5.0
    horizon: float = 8000.0

    def __post_init__(self) -> None:
        check_choice("law", self.law, LAWS)
        check_choice("policy", self.policy, ("random", "domain"))
        check_int("microbatches", self.microbatches, low=1)
        check_positive("speedup", self.speedup)
        check_positive("horizon", self.horizon)
        self.training()  # validates everything before any run

    def training(self) -> TrainingConfig:
        """The :class:`~sim.training.TrainingConfig` of this point."""
        common = dict(stages=self.stages, replicas=self.replicas, skip_budget=self.skip_budget,
                      skip_penalty=self.skip_penalty, microbatches=self.microbatches,
                      steps=10**9, schedule="swarm", routing="least-loaded", forward_time=1.0,
                      backward_ratio=2.0, sync="none", param_size=5.0, bandwidth=1.0,
                      detection_timeout=1.0, max_wait=math.inf, max_time=self.horizon)
        if self.law == "independent":
            st = _stats(self.trace)
            return TrainingConfig(availability=st["availability"],
                                  mean_downtime=_mean_down(self.trace) / self.speedup, **common)
        replay = TraceReplay(self.trace, policy=self.policy + "+tile", loop=True,
                             resample="offset", model=self.law, speedup=self.speedup)
        return TrainingConfig(failure_trace=replay, **common)


@cache
def _stats(name: str) -> dict[str, Any]:
    return trace_stats(load_trace(name))


def _mean_down(name: str) -> float:
    """Little's law: mean down time = capacity (1 - a) span / instances lost."""
    st = _stats(name)
    return st["nodes"] * (1 - st["availability"]) * st["duration"] / st["preempted_nodes"]


#: The shipped traces whose instances come back (the synthetic ones never replace a lost node:
#: no down time, no generator to fit, no independent law at the same mean down time).
TRACES = ("aws-p2-3day", "aws-g4dn-24h", "aws-p2-19h", "gcp-a100", "aws-p3")
#: Study A's designs at L = 48: 240 workers (r = 5, s = 0), the floor-beating r = 3, s = 1
#: (144), and 96 workers (r = 2, s = 4).
DESIGNS = ({"replicas": 5, "skip_budget": 0}, {"replicas": 3, "skip_budget": 1},
           {"replicas": 2, "skip_budget": 4})
BASE = TraceTraining()
POINTS = [{"trace": t, "law": law, **d} for t in TRACES for d in DESIGNS for law in LAWS]
REPLICATIONS = 8
#: Metrics that are probabilities (a fraction of time): intervals inside [0, 1] in summary.csv.
RATES = {"worker_availability": None}
#: Every other metric is a time, a count or a throughput: intervals cut at 0.
NONNEGATIVE = "*"
SEED = 15
QUICK = {
    "BASE": {"horizon": 2000.0},
    "POINTS": [{"trace": t, "law": law, **d}
               for t in ("aws-p3", "gcp-a100") for d in DESIGNS[::2] for law in LAWS],
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- model


def model(config: TraceTraining, streams: Streams) -> dict[str, Any]:
    """One replication: the training DES on the point's failure law, over the point's horizon."""
    c = config.training()
    m = training_model(c, streams)
    W = c.workers
    return {"sps_worker": m["samples_per_second"] / W, "qsps_worker": m["goodput"] / W,
            "samples_per_time": m["samples_per_second"], "worker_availability": m["worker_availability"],
            "lost_stall": m["lost_stall"], "lost_download": m["lost_download"],
            "mean_quality": m["mean_quality"], "steps_done": m["steps_done"]}


# ----------------------------------------------------------------------------- analysis


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per point: per-worker throughput and goodput (95% CI), availability, losses."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        e = {k: mean_ci([float(r[k]) for r in recs], lower=0.0)  # all non-negative
             for k in ("sps_worker", "qsps_worker", "worker_availability", "lost_stall",
                       "lost_download", "mean_quality")}
        st = _stats(cfg.trace)
        rows.append({
            "trace": cfg.trace, "availability": st["availability"],
            "batch_fraction": st["batch_fraction"],
            "design": f"r={cfg.replicas} s={cfg.skip_budget}",
            "workers": cfg.stages * cfg.replicas,
            "law": cfg.law if cfg.law == "independent" else f"{cfg.law} ({cfg.policy})",
            "replications": len(recs),
            "worker_availability": e["worker_availability"].mean,
            "sps_worker": e["sps_worker"].mean, "sps_low": e["sps_worker"].low,
            "sps_high": e["sps_worker"].high,
            "qsps_worker": e["qsps_worker"].mean, "qsps_low": e["qsps_worker"].low,
            "qsps_high": e["qsps_worker"].high,
            "mean_quality": e["mean_quality"].mean,
            "stall_per_time": e["lost_stall"].mean / cfg.horizon,
            "download_per_time": e["lost_download"].mean / cfg.horizon,
            "_cfg": cfg,
        })
    ind = {(r["trace"], r["design"]): r for r in rows if r["law"] == "independent"}
    for r in rows:
        base = ind.get((r["trace"], r["design"]))
        r["vs_independent"] = (r["qsps_worker"] / base["qsps_worker"]
                               if base is not None and base["qsps_worker"] > 0 else math.nan)
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure (quality-weighted samples per time unit per worker, a panel per trace), table, finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["trace", "availability", "batch_fraction", "design", "workers", "law",
            "worker_availability", "sps_worker", "sps_low", "sps_high", "qsps_worker",
            "qsps_low", "qsps_high", "vs_independent", "mean_quality", "stall_per_time",
            "download_per_time"]
    title = ("Study A's designs training on real traces: samples per time unit per worker "
             "by failure law (L = 48, SWARM, 1 time unit = 5 trace seconds)")
    text = write_tables(rows, cols, out_dir, NAME, title, fmt=format_4g)
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    designs = list(dict.fromkeys(r["design"] for r in rows))
    laws = list(dict.fromkeys(r["law"] for r in rows))
    panels = []
    for t in traces:
        series = []
        last = t == traces[-1]
        for i, law in enumerate(laws):
            rs = {r["design"]: r for r in rows if r["trace"] == t and r["law"] == law}
            ds = [d for d in designs if d in rs]
            if not ds:
                continue
            xs = [designs.index(d) + (i - (len(laws) - 1) / 2) * 0.12 for d in ds]
            series.append({"label": law if last else None, "x": xs, "style": "points",
                           "color": f"C{i}", "mean": [1e3 * rs[d]["qsps_worker"] for d in ds],
                           "low": [1e3 * rs[d]["qsps_low"] for d in ds],
                           "high": [1e3 * rs[d]["qsps_high"] for d in ds]})
        st = _stats(t)
        panels.append({"series": series, "xlabel": "design",
                       "ylabel": "quality-weighted samples / 1000 time units / worker",
                       "title": f"{t}: a={st['availability']:.3f}, bursts {st['batch_fraction']:.2f}",
                       "xticks": (list(range(len(designs))), designs),
                       "legend": "outside" if last else None})
    plot_stress_panels(panels, out_dir / f"{NAME}.png", ncols=min(3, len(panels)),
                       caption="L = 48, SWARM, m = 128; points: training DES, 95% CI across "
                               "replications (random windows of the looped trace, tiled "
                               "copies).")
    print(f"\n{NAME}: training throughput by failure law\n{text}\n")
    for t in traces:
        for law in laws:
            rs = [r for r in rows if r["trace"] == t and r["law"] == law]
            if not rs:
                continue
            best = max(rs, key=lambda r: r["qsps_worker"])
            vs = ", ".join(f"{r['design']}: {r['vs_independent']:.3g}x" for r in rs
                           if law != "independent")
            print(f"  {t} {law}: best {best['design']} ({1e3 * best['qsps_worker']:.3g} per 1000 "
                  f"time units per worker)" + (f"; vs independent {vs}" if vs else ""))


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
