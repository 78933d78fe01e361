"""Fault-tolerance strategies of real systems compared on the same traces, and the artifacts.

How do SWARM's rewiring, Varuna/CheckFreq's checkpoint-restart, Bamboo's
redundant computation and Oobleck's reconfiguration compare, in samples per
second and per dollar, when their workers are preempted by the same traces?

Section ``traces`` and ``mtbf``: one workload for every strategy (dtsim's
model). A pipeline of ``L = 6`` stages, 30 workers (5 pipelines), a step of
30 microbatches of 8 samples, a stage's forward pass 1 s and backward 2 s;
the step-level strategies take their steps from the training DES without
failures (GPipe: ``(6 + 5)(1 + 2) = 33`` s on 5 pipelines), SWARM runs on the
DES itself (swarm schedule, SWARM's routing: a balancer a trainer at each
stage, each micro-batch of a step a trainer's, ``trainer-balancer``, least-loaded
until 2026-12-08; a lost pass re-queued after 1 s, a stage with no live replica
waited for). A worker that comes up
downloads its weights for 45 s (the artifacts' instance start-up) before it
takes work. Every worker costs 0.91 $ per hour while its instance exists
(the Oobleck artifact's p3 spot price; a worker that a trace has down is not
billed). Strategies run with their defaults (their papers' and artifacts'
values, see ``sim.training.strategies``), Oobleck's templates down to 3 nodes
(a node holds at most two stages); checkpoint-restart grows as Varuna's job
morphing does (a poll every 5 minutes; before 2026-12-07 it waited for the next
failure's restart, as the Oobleck artifact's Varuna simulator does).

* ``traces``: the workers replay each shipped trace once, from its start to
  its end (``recent`` policy, one slot per worker): a deterministic replay,
  one replication, no interval (``aws-p3``, ``synthetic-10m``,
  ``synthetic-6h``, ``gcp-a100``); SWARM's replay draws its routing's ties,
  one draw (seeds 0-2 differ by up to 2%).
* ``mtbf``: every worker is preempted after an exponential time of mean
  ``mtbf`` (30, 5 and 1 hour: the 30 workers lose one every hour, 10 minutes,
  2 minutes) and replaced 10 minutes later, over 6 hours; 95% intervals
  across replications.

Section ``oobleck``: the Oobleck artifact's BERT-large scenario (SOSP 2023,
SymbioticLab/Oobleck branch ``sosp23-artifact``, ``tools/simulator``, MIT):
30 nodes replaying ``synthetic-10m`` and ``synthetic-6h`` (its ``10m.csv`` and
``6h.csv``: one node removed every 10 minutes, or 6 hours), its measured
throughput by node count for Oobleck, Varuna and Bamboo as step times (8192
samples a step), its costs (Oobleck: a 2 s reconfiguration; Varuna: a 15.8 s
checkpoint every 10 steps, a 55.5 s restart, no growing when nodes join; Bamboo: a
76 s rebalance, a 30 s restart, a 1.5x slowdown) and its 45 s node start-up,
12-stage pipelines.
What its simulators print for the 10-minute trace (run for issue 33; they are
the simulators' outputs, not figures published in the paper): 282.1 samples/s
Oobleck, 173.5 Varuna, 69.84 Bamboo. Section ``bamboo``: Bamboo's own simulator
(uclasystem/bamboo, ``project_pactum/simulation``, MIT) for GPT-2 with 12
stages on ``aws-p3``: 32 samples a step of 1.008 to 1.200 s by number of
pipelines, a 20 s rebalance, a 30 s restart; its simulator reports 23.7
samples/s.
Both artifact sections state their throughput the artifacts' way as well
(samples over the time from the first step's start to the last step's end).

Run::

    dtsim run experiments/fault_tolerance.py --quick
    python experiments/fault_tolerance.py            # full run, about a minute (32 s of CPU)

Writes ``fault_tolerance.png``, ``fault_tolerance.csv`` and ``fault_tolerance.md``
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
from sim.errors import check_choice, check_positive
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams
from sim.traces import TraceReplay, load_trace, trace_stats
from sim.training import TrainingConfig
from sim.training.routing import SWARM_ROUTING
from sim.training.strategies import StepTimes

# ----------------------------------------------------------------------------- parameters

NAME = "fault_tolerance"
SECTIONS = ("traces", "mtbf", "oobleck", "bamboo")
STRATEGIES = ("swarm", "checkpoint-restart", "redundancy", "reconfiguration")
TRACES = ("aws-p3", "synthetic-10m", "synthetic-6h", "gcp-a100")
MTBFS = (108_000.0, 18_000.0, 3_600.0)
PRICE = 0.91  # $ per node-hour: the Oobleck artifact's p3 spot price

#: The Oobleck artifact's BERT-large throughput (samples/s) at 30, 29, ..., 15 nodes (MIT,
#: SymbioticLab/Oobleck sosp23-artifact tools/simulator/{oobleck,varuna,bamboo}_simulator.py).
OOBLECK_TPUT = (368.2457947, 362.2151579, 328.35419, 327.7784909, 329.1392983, 307.2134406,
                304.4540075, 278.5264442, 285.8442276, 260.3144683, 261.6788898, 243.5568988,
                228.0545262, 209.2082907, 214.8045205, 192.304776)
VARUNA_TPUT = (343.1328746, 331.6951121, 329.5800552, 326.5438348, 306.0386227, 298.3794267,
               290.038974, 280.0744467, 267.8972968, 255.720147, 243.5429971, 232.9541711,
               222.3653452, 211.7765192, 202.5688445, 193.3611697)
BAMBOO_TPUT = (119.2546584,) + (99.37888199,) * 6 + (74.53416149,) * 6 + (49.68944099,) * 3
BERT_SAMPLES = 8192  # samples per step
#: Bamboo's own simulator, GPT-2 with 12 stages: step time (s) by pipelines, 32 samples a step.
GPT2_STEP = {1: 1.200, 2: 1.085, 3: 1.046, 4: 1.008}
GPT2_SAMPLES = 32
#: What the artifacts' simulators print (samples/s; the ``published`` column of the tables):
#: the Oobleck artifact's on synthetic-10m, Bamboo's on aws-p3. Not figures of the papers.
PUBLISHED = {("oobleck", "synthetic-10m", "reconfiguration"): 282.0,
             ("oobleck", "synthetic-10m", "checkpoint-restart"): 174.0,
             ("oobleck", "synthetic-10m", "redundancy"): 70.0,
             ("bamboo", "aws-p3", "redundancy"): 23.7}


def _bert_table(tput: tuple[float, ...]) -> StepTimes:
    """Step times (s) of 8192 samples by node count, 15..30 nodes (30 and more: the 30's)."""
    counts = tuple(range(15, 31))
    return StepTimes("workers", counts, tuple(BERT_SAMPLES / t for t in reversed(tput)))


@dataclass(frozen=True)
class FaultTolerance:
    """One strategy in one scenario.

    Parameters
    ----------
    section : {"traces", "mtbf", "oobleck", "bamboo"}
    strategy : str
        A strategy name (``sim.training.strategies``).
    trace : str
        A shipped trace (sections traces, oobleck, bamboo).
    mtbf : float
        Per-worker mean time to preemption (section mtbf).
    variant : str
        ``"artifact"`` (the artifact's semantics where dtsim's default differs:
        for Bamboo, no rollback after a fatal loss) or ``"dtsim"`` (dtsim's
        defaults); ``"-"`` where there is one.
    horizon : float
        Simulated seconds (section mtbf; the traces run their whole span).
    fraction : float
        Fraction of a trace's span replayed (1: all of it; quick runs less).
    """

    section: str = "traces"
    strategy: str = "checkpoint-restart"
    trace: str = "aws-p3"
    mtbf: float = 18_000.0
    variant: str = "-"
    horizon: float = 21_600.0
    fraction: float = 1.0

    def __post_init__(self) -> None:
        check_choice("section", self.section, SECTIONS)
        check_choice("strategy", self.strategy, STRATEGIES)
        check_choice("variant", self.variant, ("-", "artifact", "dtsim"))
        check_positive("horizon", self.horizon)
        check_positive("fraction", self.fraction)
        self.training()  # validates everything before any run

    def fixed_metrics(self) -> dict[str, str]:
        """Every metric, outside section ``mtbf``: the trace is replayed once from its start
        (no resampling) on deterministic times, so every replication is the same run and the
        tables give its value with no interval (:func:`sim.results.fixed_ci` raises if two
        replications ever differ). Not SWARM's: its routing draws ties (a balancer a trainer
        at each stage, ``trainer-balancer``), so its one replay is one draw."""
        if self.section == "mtbf" or self.strategy == "swarm":  # SWARM's routing draws ties
            return {}
        why = f"one replay of {self.trace} from its start on deterministic times"
        return dict.fromkeys(METRICS, why)

    # -- the configs -------------------------------------------------------------------
    def training(self) -> TrainingConfig:
        """The :class:`~sim.training.TrainingConfig` of this point."""
        if self.section in ("traces", "mtbf"):
            return self._common()
        if self.section == "oobleck":
            return self._oobleck()
        return self._bamboo()

    def _span(self, name: str) -> float:
        return load_trace(name).end * self.fraction

    def _common(self) -> TrainingConfig:
        swarm = self.strategy == "swarm"
        strategy = {"swarm": "swarm", "checkpoint-restart": "checkpoint-restart:boot=0",
                    "redundancy": "redundancy:boot=0",
                    "reconfiguration": "reconfiguration:boot=0,min_nodes=3"}[self.strategy]
        kw: dict[str, Any] = dict(
            stages=6, replicas=5, microbatches=30, samples_per_microbatch=8.0, steps=10**9,
            forward_time=1.0, backward_ratio=2.0, sync="none", param_size=45.0, bandwidth=1.0,
            price=PRICE, strategy=strategy,
            schedule="swarm" if swarm else "gpipe",
            routing=SWARM_ROUTING if swarm else "round-robin",
            detection_timeout=1.0 if swarm else 0.0, max_wait=math.inf if swarm else 0.0,
            stall_limit=math.inf)
        if self.section == "traces":
            kw.update(failure_trace=TraceReplay(self.trace), max_time=self._span(self.trace))
        else:
            kw.update(mtbf=self.mtbf, replace_time=600.0, max_time=self.horizon)
        return TrainingConfig(**kw)

    def _artifact(self, strategy: str, table: StepTimes, stages: int,
                  replicas: tuple[int, ...], samples: float) -> TrainingConfig:
        return TrainingConfig(
            stages=stages, replicas=replicas, microbatches=1, samples_per_microbatch=samples,
            steps=10**9, step_times=table, strategy=strategy, price=PRICE,
            failure_trace=TraceReplay(self.trace), max_time=self._span(self.trace),
            stall_limit=math.inf)

    def _oobleck(self) -> TrainingConfig:
        replicas = (3,) * 6 + (2,) * 6  # 30 nodes, pipelines of 12
        if self.strategy == "reconfiguration":
            # Oobleck's BERT-large templates go down to a few nodes: min_nodes 2 (see notes)
            return self._artifact("reconfiguration:reconfigure=2,min_nodes=2,boot=45",
                                  _bert_table(OOBLECK_TPUT), 12, replicas, BERT_SAMPLES)
        if self.strategy == "checkpoint-restart":
            # the artifact's Varuna simulator does not grow (its traces only remove nodes)
            return self._artifact("checkpoint-restart:every=10,checkpoint=15.8,restart=55.5,"
                                  "boot=45,grow=false", _bert_table(VARUNA_TPUT), 12,
                                  replicas, BERT_SAMPLES)
        keep = "every=1,checkpoint=0" if self.variant == "artifact" else "every=10,checkpoint=15.8"
        return self._artifact(f"redundancy:rebalance=76,restart=30,slowdown=1.5,boot=45,{keep}",
                              _bert_table(BAMBOO_TPUT), 12, replicas, BERT_SAMPLES)

    def _bamboo(self) -> TrainingConfig:
        table = StepTimes("pipelines", tuple(GPT2_STEP), tuple(GPT2_STEP.values()))
        keep = "every=1,checkpoint=0" if self.variant == "artifact" else "every=10,checkpoint=15.8"
        replicas = (3,) * 8 + (2,) * 4  # the trace's 32 nodes, pipelines of 12
        return self._artifact(f"redundancy:rebalance=20,restart=30,slowdown=1.5,boot=45,{keep}",
                              table, 12, replicas, GPT2_SAMPLES)


POINTS = (
    [{"section": "traces", "trace": t, "strategy": s, "replications": 1}
     for t in TRACES for s in STRATEGIES]
    + [{"section": "mtbf", "mtbf": m, "strategy": s} for m in MTBFS for s in STRATEGIES]
    + [{"section": "oobleck", "trace": t, "strategy": s, "replications": 1,
        "variant": "artifact" if s == "redundancy" else "-"}
       for t in ("synthetic-10m", "synthetic-6h")
       for s in ("reconfiguration", "checkpoint-restart", "redundancy")]
    + [{"section": "oobleck", "trace": t, "strategy": "redundancy", "variant": "dtsim",
        "replications": 1} for t in ("synthetic-10m", "synthetic-6h")]
    + [{"section": "bamboo", "trace": "aws-p3", "strategy": "redundancy", "variant": v,
        "replications": 1} for v in ("artifact", "dtsim")]
)
BASE = FaultTolerance()
#: What one replication returns: the engine's metrics it keeps, then the experiment's own.
ENGINE_METRICS = ("samples_per_second", "samples_per_dollar", "steps_done", "worker_availability",
                  "worker_hours", "cost", "lost_lost_pass", "lost_restart", "lost_checkpoint",
                  "lost_stall", "preemptions")
METRICS = ENGINE_METRICS + ("samples", "artifact_window_sps", "fatal_failures", "wall")
REPLICATIONS = 8
#: Fractions of time: intervals inside [0, 1].
RATES = {"worker_availability": None}
#: Every other metric is a time, a count, a throughput or a price: intervals cut at 0.
NONNEGATIVE = "*"
SEED = 23
QUICK = {
    "BASE": {"horizon": 7_200.0, "fraction": 0.25},
    "POINTS": (
        [{"section": "traces", "trace": t, "strategy": s, "replications": 1}
         for t in ("aws-p3", "synthetic-10m") for s in STRATEGIES]
        + [{"section": "mtbf", "mtbf": 3_600.0, "strategy": s} for s in STRATEGIES]
        + [{"section": "oobleck", "trace": "synthetic-10m", "strategy": s, "replications": 1,
            "variant": "artifact" if s == "redundancy" else "-"}
           for s in ("reconfiguration", "checkpoint-restart", "redundancy")]
        + [{"section": "bamboo", "trace": "aws-p3", "strategy": "redundancy",
            "variant": "artifact", "replications": 1}]
    ),
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- model


def model(config: FaultTolerance, streams: Streams) -> dict[str, Any]:
    """One replication: the strategy's engine on the point's scenario."""
    from sim.engines import select

    c = config.training()
    m = select("training", c).engine.run(c, streams)
    out = {k: m[k] for k in ENGINE_METRICS}
    wall = c.max_time
    out["samples"] = m["samples"]
    # the artifacts' window: from the first step's start to the last step's end
    first, last = m.get("first_step_start", math.nan), m.get("last_step_end", math.nan)
    out["artifact_window_sps"] = (m["samples"] / (last - first)
                                  if last == last and first == first and last > first else math.nan)
    out["fatal_failures"] = float(m.get("fatal_failures", math.nan))
    out["wall"] = wall
    return out


# ----------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Estimate:
    """A value and its interval (equal bounds: exact)."""

    mean: float
    low: float
    high: float


@cache
def _stats(name: str) -> dict[str, Any]:
    return trace_stats(load_trace(name))


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per point: samples/s and samples/$ (an interval, or the replay's exact value)."""
    rows = []
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        e = {k: mean_ci([float(r[k]) for r in recs], lower=0.0)
             for k in ("samples_per_second", "samples_per_dollar", "worker_availability",
                       "artifact_window_sps", "lost_lost_pass", "lost_restart",
                       "lost_checkpoint", "lost_stall")}
        if cfg.section != "mtbf" and cfg.strategy != "swarm":
            # one deterministic replay: the value is exact, no interval
            e = {k: Estimate(v.mean, v.mean, v.mean) for k, v in e.items()}
        elif cfg.section != "mtbf":  # SWARM's one replay draws its routing's ties: no interval
            e = {k: Estimate(v.mean, math.nan, math.nan) for k, v in e.items()}
        where = (cfg.trace if cfg.section != "mtbf" else f"mtbf {cfg.mtbf / 3600:g} h")
        rows.append({
            "section": cfg.section, "scenario": where, "strategy": cfg.strategy,
            "variant": cfg.variant, "replications": len(recs),
            "availability": e["worker_availability"].mean,
            "samples_per_second": e["samples_per_second"].mean,
            "sps_low": e["samples_per_second"].low, "sps_high": e["samples_per_second"].high,
            "samples_per_dollar": e["samples_per_dollar"].mean,
            "spd_low": e["samples_per_dollar"].low, "spd_high": e["samples_per_dollar"].high,
            "artifact_window_sps": e["artifact_window_sps"].mean,
            "published": PUBLISHED.get((cfg.section, cfg.trace, cfg.strategy))
            if cfg.variant in ("-", "artifact") else None,
            "lost_work": e["lost_lost_pass"].mean, "restart_time": e["lost_restart"].mean,
            "checkpoint_time": e["lost_checkpoint"].mean, "waiting": e["lost_stall"].mean,
        })
    return rows


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure (samples/s and samples/$ per scenario and strategy), table, the finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    cols = ["section", "scenario", "strategy", "variant", "replications", "availability",
            "samples_per_second", "sps_low", "sps_high", "samples_per_dollar", "spd_low",
            "spd_high", "artifact_window_sps", "published", "lost_work", "restart_time",
            "checkpoint_time", "waiting"]
    title = ("Fault-tolerance strategies on the same traces: samples/s and samples/$ "
             "(traces and artifacts: one deterministic replay, exact, SWARM's one replay with "
             "its routing's draws, no interval; mtbf: 95% CI)")
    text = write_tables(rows, cols, out_dir, NAME, title, fmt=format_4g)
    panels = []
    for section, metric, ylabel in (("traces", "samples_per_second", "samples / s"),
                                    ("traces", "samples_per_dollar", "samples / $"),
                                    ("mtbf", "samples_per_second", "samples / s"),
                                    ("mtbf", "samples_per_dollar", "samples / $")):
        rs = [r for r in rows if r["section"] == section]
        scen = list(dict.fromkeys(r["scenario"] for r in rs))
        if not rs:
            continue
        series = []
        lo, hi = ("sps_low", "sps_high") if metric == "samples_per_second" else ("spd_low",
                                                                                 "spd_high")
        for i, s in enumerate(STRATEGIES):
            pts = {r["scenario"]: r for r in rs if r["strategy"] == s}
            xs = [scen.index(k) + (i - 1.5) * 0.12 for k in scen if k in pts]
            ks = [k for k in scen if k in pts]
            series.append({"label": s if metric == "samples_per_second" else None, "x": xs,
                           "style": "points", "color": f"C{i}",
                           "mean": [pts[k][metric] for k in ks],
                           "low": [pts[k][lo] for k in ks], "high": [pts[k][hi] for k in ks]})
        panels.append({"series": series, "xlabel": section, "ylabel": ylabel,
                       "title": f"{section}: {ylabel}", "xticks": (list(range(len(scen))), scen),
                       "legend": "outside" if metric == "samples_per_second" else None})
    if panels:
        plot_stress_panels(panels, out_dir / f"{NAME}.png", ncols=2,
                           caption="30 workers, L = 6, 0.91 $ per node-hour; traces: one "
                                   "replay (SWARM's draws its routing's ties); mtbf: 95% CI "
                                   "across replications.")
    print(f"\n{NAME}: strategies on the same traces\n{text}\n")
    for section in ("traces", "mtbf"):
        scen = list(dict.fromkeys(r["scenario"] for r in rows if r["section"] == section))
        for k in scen:
            rs = [r for r in rows if r["section"] == section and r["scenario"] == k]
            best = max(rs, key=lambda r: r["samples_per_dollar"])
            order = ", ".join(f"{r['strategy']} {r['samples_per_second']:.3g}/s "
                              f"{r['samples_per_dollar']:.4g}/$" for r in rs)
            print(f"  {section} {k}: best per dollar {best['strategy']}; {order}")
    for r in rows:
        if r["section"] in ("oobleck", "bamboo"):
            pub = (f", the artifact's simulator {r['published']:g}" if r["published"]
                   else "")
            print(f"  {r['section']} {r['scenario']} {r['strategy']} ({r['variant']}): "
                  f"{r['samples_per_second']:.4g} samples/s over the run, "
                  f"{r['artifact_window_sps']:.4g} in the artifact's window{pub}")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
