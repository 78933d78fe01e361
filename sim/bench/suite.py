"""Benchmarks measured side by side in one run, as ratios to a bare SimPy yardstick.

Machines differ and a shared machine is noisy, so absolute rates mean little;
what ``dtsim bench`` reports are the figures of one run *and* their ratios to
the bare SimPy rate measured in the same run. The parts:

a. ``simpy``: bare SimPy ``timeout`` events per second (the yardstick).
b. ``pipeline``: stage crossings per second of the pipeline DES
   (:mod:`sim.pipeline`), 48 stages, failing workers, failover (nonzero
   detection timeout) and skipping on.
c. ``async_gossip``: exchanges per second of the ``async`` gossip DES
   (:mod:`sim.gossip`, its merged path: a heap of the nodes' clocks), next to
   the wakes per second of as many bare SimPy processes that do nothing but
   wake (the floor of a design with a SimPy process per node).
d. ``matching``: node updates per second of the vectorised complete-graph
   matching gossip at ``n = 1e3 .. 1e6`` and of a bare numpy
   permute-and-average of the same size, and of the per-node DES engine of
   the same protocol at ``n = 1e3``.
e. ``stylised``: microbatch trials per second of the vectorised snapshot
   engine (:mod:`sim.pipeline.vector`).
f. ``rare``: time for the rare-event estimators (:mod:`sim.pipeline.rare`) to reach a
   10% relative error at a drop probability of about 1e-9: exponential
   tilting for independent stages, the stratified estimator for stages
   sharing racks.
g. ``sweep``: speedup over serial of 20 equal tasks on 2 local workers through
   :func:`sim.runner.sweep`, next to a plain ``ProcessPoolExecutor`` running
   the same tasks, and the same on a 2-worker Dask ``LocalCluster``.
h. ``memory``: peak resident memory (``ru_maxrss`` of a fresh subprocess) of a
   1e5-node ``async`` gossip run and of pipeline runs of 1e4 and 1e6
   microbatches with per-microbatch records off (the difference is the
   growth), and the ``tracemalloc`` peak of the pipeline run alone at 1e4 and
   1e5 (``--quick``) or 1e6 microbatches, which sees growth the RSS of the
   imports would hide.

i. ``machine``: the compiled async gossip engine (:mod:`sim.gossip.compiled`)
   against a plain C loop of the same job (``benchmarks/async_gossip.c``,
   compiled here with ``cc -O2`` when a C compiler is present, else not
   measured), without and with latency at ``n = 1000``, side by side; and a
   large run (``n = 1e6`` with latency and churn) for its peak memory.
j. ``highflip``: the pipeline whose workers flip state often (L = 60, r = 4,
   a = 0.6, mean downtime 1, zero stage time): stage crossings per second of
   the DES and of the exact Markov engine (:mod:`sim.pipeline.markov`).
k. ``training``: passes per second of the contended training pipeline
   (:mod:`sim.training`, 48 stages x 8 replicas with failures), per bare timeout.
l. ``gossip_training``: CPU cost per local step of async gossip training
   (:mod:`sim.learning`).
m. ``recording``: run time of a compiled ``edge`` run (and of a compiled
   ``async`` one) with the default record interval over the same run with
   records at the start and the horizon only.
n. ``peersim``: PeerSim 1.0.5, built and timed by ``benchmarks/peersim.sh``
   from a source tree given with ``--peersim DIR`` (java and javac needed),
   side by side with dtsim's compiled ``edge`` engine (cycle-driven averaging,
   complete graph, ``n = 1e5, 1e6``) and compiled ``async`` engine without and
   with delay (event-driven averaging, ``n = 1e4``): exchanges per second of
   each and their ratios dtsim / PeerSim. Without ``--peersim`` the part says
   it was skipped; its targets are then not measured.
p. ``plans``: real plans simulated per second: each shipped run's plan
   (:mod:`sim.profiles`) built from the profiles and simulated for one
   failure-free iteration in the training DES (``dtsim train --plan``), and
   the same plans' exact step time from the max-plus evaluation of their
   device programs (what a planner ranks candidates with).
r. ``timeline``: the cost of ``--timeline`` (:mod:`sim.timeline`): CPU time of a
   run that records its events and writes them as Trace Event Format JSON over
   the same run without, for the training DES's benchmark run
   (:data:`sim.bench.training.BENCH_CONFIG`, about 1.1e5 events: its passes,
   down intervals, downloads) and a 4-stage 1F1B run of 1e5 passes (the
   tightest event loop: 2 us a pass).
s. ``learners``: DiLoCo's outer loop over 10^6 chips in 40 learners with
   per-chip failures (:mod:`sim.training.learners`, the event-aggregated
   engine): 1 simulated day (``--quick``) or 30, in a fresh interpreter:
   events per CPU second, wall and CPU seconds, peak resident memory.

Every rate is the best of a few repeats (the least disturbed by other load).
Each part is measured by one module of :mod:`sim.bench` (:data:`MEASURED_BY`);
:func:`run_bench` runs them and returns one flat dict; :data:`TARGETS` lists the
targets of issue 7 and :func:`check_targets` evaluates them.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from ..errors import check
from .gossip import MATCHING_SIZES

__all__ = [
    "PARTS",
    "MEASURED_BY",
    "SIZES",
    "Target",
    "TARGETS",
    "run_bench",
    "check_targets",
    "append_jsonl",
    "is_bench_history",
]

PARTS = ("simpy", "pipeline", "async_gossip", "matching", "stylised", "rare", "sweep", "memory",
         "machine", "highflip", "training", "gossip_training", "recording", "peersim", "plans",
         "network", "planner", "timeline", "learners")


# --------------------------------------------------------------------------- the suite


#: Sizes of every part for ``--quick`` and for the full run.
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "quick": {
        "simpy": {"events": 200_000, "repeats": 3},
        "pipeline": {"microbatches": 2000, "repeats": 2},
        "async_gossip": {"nodes": 1000, "horizon": 60, "repeats": 3},
        "matching": {"updates": 2e6, "repeats": 2},
        "stylised": {"microbatches": 10_000_000, "repeats": 2},
        "rare": {"repeats": 5},
        "sweep": {"tasks": 20, "workers": 2, "microbatches": 2500},
        "memory": {"gossip_nodes": 100_000, "gossip_horizon": 2, "pipeline_small": 10_000,
                   "pipeline_large": 1_000_000, "traced_large": 100_000},
        "machine": {"nodes": 1000, "horizon": 2000, "repeats": 2, "big_nodes": 1_000_000,
                    "big_horizon": 5},
        "highflip": {"microbatches": 300, "markov_microbatches": 30_000, "repeats": 2},
        "training": {"repeats": 1, "scale_steps": 1000},
        "gossip_training": {"repeats": 1},
        "recording": {"edge_nodes": (1000, 10_000), "edge_steps": 1_000_000, "async_nodes": 10_000,
                      "async_horizon": 30, "repeats": 3},
        "peersim": {"repeats": 2, "edge_steps": 5_000_000, "async_horizon": 100},
        "plans": {"repeats": 1},
        "network": {"flows": 10_000, "repeats": 1, "steps": 8, "horizon": 20.0},
        "planner": {"repeats": 1},
        "timeline": {"repeats": 2},
        "learners": {"days": 1.0, "repeats": 1},
    },
    "full": {
        "simpy": {"events": 1_000_000, "repeats": 5},
        "pipeline": {"microbatches": 10_000, "repeats": 3},
        "async_gossip": {"nodes": 1000, "horizon": 100, "repeats": 3},
        "matching": {"updates": 2e7, "repeats": 3},
        "stylised": {"microbatches": 100_000_000, "repeats": 3},
        "rare": {"repeats": 21},
        "sweep": {"tasks": 20, "workers": 2, "microbatches": 15000, "repeats": 3},
        "memory": {"gossip_nodes": 100_000, "gossip_horizon": 5, "pipeline_small": 10_000,
                   "pipeline_large": 1_000_000, "traced_large": 1_000_000},
        "machine": {"nodes": 1000, "horizon": 20_000, "repeats": 3, "big_nodes": 1_000_000,
                    "big_horizon": 115},  # about 1.0e8 exchanges at a = 0.9
        "highflip": {"microbatches": 1000, "markov_microbatches": 100_000, "repeats": 2},
        "training": {"repeats": 2},
        "gossip_training": {"repeats": 2},
        "recording": {"edge_nodes": (1000, 10_000), "edge_steps": 3_000_000, "async_nodes": 10_000,
                      "async_horizon": 100, "repeats": 5},
        "peersim": {"repeats": 3, "edge_steps": 20_000_000, "async_horizon": 200},
        "plans": {"repeats": 3},
        "network": {"flows": 10_000, "repeats": 3, "steps": 20, "horizon": 40.0},
        "planner": {"repeats": 2},
        "timeline": {"repeats": 5},
        "learners": {"days": 30.0, "repeats": 1},
    },
}

#: The module of :mod:`sim.bench` that measures each part, and the function that
#: runs it. A part's module is imported when the part runs, so that ``dtsim``
#: starts without the simulators it measures.
MEASURED_BY: dict[str, tuple[str, str]] = {
    "simpy": ("timing", "bench_simpy"), "pipeline": ("pipeline", "bench_pipeline"),
    "async_gossip": ("gossip", "bench_async_gossip"), "matching": ("gossip", "bench_matching"),
    "stylised": ("pipeline", "bench_stylised"), "rare": ("pipeline", "bench_rare"),
    "sweep": ("sweep", "bench_sweep"), "memory": ("memory", "bench_memory"),
    "machine": ("machine", "bench_machine"), "highflip": ("pipeline", "bench_highflip"),
    "training": ("training", "bench_training"),
    "gossip_training": ("learning", "bench_gossip_training"),
    "recording": ("gossip", "bench_recording"), "peersim": ("peersim", "bench_peersim"),
    "plans": ("plans", "bench_plans"), "network": ("network", "bench_network"),
    "planner": ("planner", "bench_planner"), "timeline": ("timeline", "bench_timeline"),
    "learners": ("learners", "bench_learners"),
}


def _part(name: str) -> Callable[..., dict[str, Any]]:
    """The function that runs part ``name`` (its module imported now)."""
    module, function = MEASURED_BY[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)


#: Figures divided by the yardstick (``<figure>_per_timeout``).
_RATIOS = ("pipeline_crossings_per_s", "async_exchanges_per_s", "async_bare_wakes_per_s",
           "stylised_trials_per_s", "training_passes_per_s", "compiled_training_passes_per_s",
           "plans_simulated_per_s",
           *(f"matching_updates_per_s_n{n}" for n in MATCHING_SIZES),
           *(f"numpy_updates_per_s_n{n}" for n in MATCHING_SIZES))


@dataclass(frozen=True)
class Target:
    """A target of issue 7: ``key op value`` (op is ``>=`` or ``<=``)."""

    key: str
    op: str
    value: float
    text: str

    def met(self, results: Mapping[str, Any]) -> bool | None:
        """True/False, or None when the figure was not measured."""
        v = results.get(self.key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            return None
        return v >= self.value if self.op == ">=" else v <= self.value


TARGETS: tuple[Target, ...] = (
    Target("pipeline_crossings_per_timeout", ">=", 0.5,
           "pipeline DES: >= 0.5 stage crossings per bare SimPy timeout"),
    Target("async_exchanges_per_timeout", ">=", 0.3,
           "async gossip DES: >= 0.3 exchanges per bare SimPy timeout"),
    Target("matching_round_ms_n100000", "<=", 10.0,
           "vectorised matching at n=1e5: <= 10 ms per round"),
    Target("matching_vs_numpy_n100000", ">=", 0.5,
           "vectorised matching at n=1e5: >= 0.5 of bare numpy permute-and-average"),
    Target("stylised_trials_per_s", ">=", 1e7,
           "vectorised stylised pipeline: >= 1e7 microbatch trials/s"),
    Target("rare_seconds", "<=", 2.0,
           "importance sampling: 10% relative error at p ~ 1e-9 within 2 s"),
    Target("sweep_local_vs_plain", ">=", 0.9,
           "sweep, 2 local workers: speedup within 10% of a plain ProcessPoolExecutor"),
    Target("sweep_dask_vs_plain", ">=", 0.9,
           "sweep, 2-worker Dask LocalCluster: speedup within 10% of plain Dask submission"),
    Target("mem_async_gossip_peak_mib", "<=", 2048.0,
           "memory: 1e5-node async gossip run under 2 GiB peak"),
    Target("mem_pipeline_growth_mib", "<=", 16.0,
           "memory: pipeline DES peak RSS does not grow, 1e4 -> 1e6 microbatches (records off)"),
    Target("mem_pipeline_traced_growth_mib", "<=", 1.0,
           "memory: pipeline DES traced allocations do not grow with microbatches (records off)"),
    Target("compiled_vs_c", ">=", 0.25,
           "compiled async gossip, no latency, n=1000: >= 0.25 of the C loop's rate"),
    Target("compiled_vs_c_latency", ">=", 0.3,
           "compiled async gossip, latency 1, n=1000: >= 0.3 of the C loop's rate"),
    Target("mem_compiled_horizon_ratio", "<=", 1.1,
           "memory independent of the horizon: compiled async gossip, n=1e5, horizon 30 / 1 "
           "peak RSS <= 1.1"),
    Target("mem_compiled_big_peak_mib", "<=", 2048.0,
           "compiled async gossip, n=1e6 with latency and churn: under 2 GiB peak"),
    Target("highflip_markov_vs_des", ">=", 50.0,
           "high-flip pipeline: the exact Markov engine >= 50x the DES's crossings/s"),
    Target("training_best_passes_per_timeout", ">=", 0.3,
           "contended training pipeline, fastest engine (compiled, else DES): >= 0.3 passes "
           "per bare SimPy timeout"),
    Target("recording_edge_ratio_n10000", "<=", 1.2,
           "default records of a compiled edge run, n=1e4: <= 1.2x the run without them"),
    Target("edge_vs_peersim_n100000", ">=", 1.0,
           "compiled edge vs PeerSim cycle-driven averaging, complete graph, n=1e5: ahead"),
    Target("edge_vs_peersim_n1000000", ">=", 1.0,
           "compiled edge vs PeerSim cycle-driven averaging, complete graph, n=1e6: ahead"),
    Target("async_vs_peersim", ">=", 1.0,
           "compiled async vs PeerSim event-driven averaging, n=1e4, no delay: ahead"),
    Target("async_delay_vs_peersim", ">=", 1.0,
           "compiled async vs PeerSim event-driven averaging, n=1e4, delay 0.1: ahead"),
    Target("compiled_training_passes_per_s", ">=", 1e6,
           "contended training pipeline, compiled engine: >= 1e6 passes/s"),
    Target("timeline_ratio_bench", "<=", 2.0,
           "--timeline on the training DES's benchmark run (1.1e5 events): the recorded run "
           "and its file in under 2x the run's CPU time (issue 36)"),
    Target("network_vs_simgrid", ">=", 0.5,
           "flow-level network, 1e4 staggered flows on a 1000-host two-level tree: >= 0.5 of "
           "SimGrid's flows/s on the same flows (issue 21)"),
)


def check_targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Evaluate :data:`TARGETS` on a result dict.

    Returns
    -------
    list of dict
        ``key``, ``value``, ``op``, ``target``, ``met`` (None when not measured), ``text``.
    """
    return [{"key": t.key, "value": results.get(t.key), "op": t.op, "target": t.value,
             "met": t.met(results), "text": t.text} for t in TARGETS]


def _git_commit() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        p = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=5, check=False)
        return p.stdout.strip()
    except Exception:  # no git: the record simply lacks the commit
        return ""


def run_bench(quick: bool = False, parts: Iterable[str] | None = None,
              progress: Callable[[str, float], None] | None = None,
              peersim: str | None = None) -> dict[str, Any]:
    """Run the benchmark suite and return one flat record.

    Parameters
    ----------
    quick : bool
        Smaller sizes (the whole suite in well under 3 minutes).
    parts : iterable of str, optional
        Subset of :data:`PARTS` (default all). The yardstick ``simpy`` always runs.
    progress : callable, optional
        Called as ``progress(part, seconds)`` after each part.
    peersim : str, optional
        The PeerSim source the ``peersim`` part builds (:func:`bench_peersim`;
        without it the part is skipped).

    Returns
    -------
    dict
        Metadata (``timestamp``, ``quick``, ``commit``, ``python``, ``numpy``,
        ``simpy``, ``cpus``), every figure of the parts run, each rate's
        ``<name>_per_timeout`` ratio to the yardstick (with ``_per_s`` dropped
        from the name), ``part_seconds_<part>`` (wall time of each part) and
        ``<part>_error`` when a part fails.
    """
    from .. import __version__

    chosen = list(PARTS) if parts is None else list(dict.fromkeys(["simpy", *parts]))
    for p in chosen:
        check(p in PARTS, "parts", "names from " + ", ".join(PARTS), p)
    sizes = SIZES["quick" if quick else "full"]
    out: dict[str, Any] = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(quick), "version": __version__, "commit": _git_commit(),
        "python": platform.python_version(), "numpy": np.__version__,
        "simpy": getattr(simpy, "__version__", ""), "cpus": os.cpu_count() or 0,
        "machine": platform.machine(),
    }
    t_all = time.perf_counter()
    for p in chosen:
        t0 = time.perf_counter()
        try:
            extra = {"peersim": peersim} if p == "peersim" else {}
            out.update(_part(p)(**sizes[p], **extra))
        except Exception as exc:  # a missing or failing part is reported, never faked
            out[f"{p}_error"] = f"{type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t0
        out[f"part_seconds_{p}"] = dt
        if progress is not None:
            progress(p, dt)
    yard = out.get("simpy_timeouts_per_s")
    if yard:
        for key in _RATIOS:
            if isinstance(out.get(key), float):
                out[key.replace("_per_s", "_per_timeout")] = out[key] / yard
    # issue 14's figure is the contended pipeline's, on the fastest engine that runs it
    # (the compiled loop when numba is installed, else the DES); both stay in the table
    training = [out[k] for k in ("training_passes_per_timeout",
                                 "compiled_training_passes_per_timeout")
                if isinstance(out.get(k), float)]
    if training:
        out["training_best_passes_per_timeout"] = max(training)
    out["total_seconds"] = time.perf_counter() - t_all
    out["targets_met"] = sum(1 for r in check_targets(out) if r["met"])
    out["targets_missed"] = [r["key"] for r in check_targets(out) if r["met"] is False]
    out["targets_unmeasured"] = [r["key"] for r in check_targets(out) if r["met"] is None]
    return out


#: Keys every record of :func:`run_bench` holds: a file whose first line is a JSON object with
#: them is a bench history dtsim wrote, to which a run appends.
BENCH_KEYS = ("timestamp", "version", "python", "cpus")


def is_bench_history(path: str | Path) -> bool:
    """Whether the first line of ``path`` is a record of :func:`run_bench` (:data:`BENCH_KEYS`)."""
    with Path(path).open("rb") as fh:
        first = fh.readline(2**20)
    try:
        doc = json.loads(first)
    except ValueError:
        return False
    return isinstance(doc, dict) and all(k in doc for k in BENCH_KEYS)


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> Path:
    """Append ``record`` as one JSON line (non-finite numbers become null): the whole line in
    one write at the file's end (``O_APPEND``), after a newline if the file's last line was
    left without one (a run killed mid-write: the torn line stays on its own, the record is
    not glued to it).

    Parameters
    ----------
    path : str or Path
        The file (parents are created).
    record : mapping

    Returns
    -------
    Path
    """
    from ..results import to_jsonable

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(to_jsonable(dict(record)), allow_nan=False) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            line = b"\n" + line
        view = memoryview(line)
        while view:  # a regular file takes it whole; a short write goes on from where it stopped
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
