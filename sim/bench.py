"""Benchmarks measured side by side in one run, as ratios to a bare SimPy yardstick.

Machines differ and a shared machine is noisy, so absolute rates mean little;
what ``dtsim bench`` reports are the figures of one run *and* their ratios to
the bare SimPy rate measured in the same run. The parts:

a. ``simpy``: bare SimPy ``timeout`` events per second (the yardstick).
b. ``pipeline``: stage crossings per second of the pipeline DES
   (:mod:`sim.pipeline`), 48 stages, failing workers, failover (nonzero
   detection timeout) and skipping on.
c. ``async_gossip``: exchanges per second of the per-node SimPy ``async``
   gossip (:mod:`sim.gossip`), next to the wakes per second of as many bare
   SimPy processes that do nothing but wake (the floor of any per-node design).
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
r. ``learners``: DiLoCo's outer loop over 10^6 chips in 40 learners with
   per-chip failures (:mod:`sim.training.learners`, the event-aggregated
   engine): 1 simulated day (``--quick``) or 30, in a fresh interpreter:
   events per CPU second, wall and CPU seconds, peak resident memory.

Every rate is the best of a few repeats (the least disturbed by other load).
:func:`run_bench` returns one flat dict; :data:`TARGETS` lists the targets of
issue 7 and :func:`check_targets` evaluates them.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from .errors import check, check_int
from .rng import Streams

#: Clock of the single-process figures (a)-(f): CPU time of this process, so that
#: other jobs on a shared machine do not slow one side of a ratio and not the other.
#: The sweep speedups (g) use wall time, which is what parallelism buys.
_cpu_clock = time.process_time

__all__ = [
    "PARTS",
    "Target",
    "TARGETS",
    "bench_simpy",
    "bench_pipeline",
    "bench_async_gossip",
    "bench_matching",
    "bench_stylised",
    "bench_rare",
    "bench_sweep",
    "bench_memory",
    "bench_machine",
    "bench_highflip",
    "bench_training",
    "bench_gossip_training",
    "bench_recording",
    "bench_peersim",
    "bench_plans",
    "run_bench",
    "check_targets",
    "append_jsonl",
    "MATCHING_SIZES",
]

PARTS = ("simpy", "pipeline", "async_gossip", "matching", "stylised", "rare", "sweep", "memory",
         "machine", "highflip", "training", "gossip_training", "recording", "peersim", "plans",
         "network", "planner", "learners")
MATCHING_SIZES = (1_000, 10_000, 100_000, 1_000_000)


def _best_rate(fn: Callable[[], tuple[float, float]], repeats: int) -> tuple[float, float]:
    """Run ``fn() -> (work, seconds)`` ``repeats`` times; the best rate and its seconds."""
    best, secs = 0.0, math.nan
    for _ in range(repeats):
        work, dt = fn()
        if dt > 0 and work / dt > best:
            best, secs = work / dt, dt
    return best, secs


# --------------------------------------------------------------------------- (a) yardstick


def bench_simpy(events: int = 200_000, repeats: int = 3) -> dict[str, float]:
    """Bare SimPy rate: one process yielding ``events`` timeouts of 1.

    Parameters
    ----------
    events : int
        Timeouts per repeat.
    repeats : int
        Best of this many repeats.

    Returns
    -------
    dict
        ``simpy_timeouts_per_s``.
    """
    def once() -> tuple[float, float]:
        env = simpy.Environment()

        def loop():
            timeout = env.timeout
            for _ in range(events):
                yield timeout(1.0)

        env.process(loop())
        t0 = _cpu_clock()
        env.run()
        return events, _cpu_clock() - t0

    rate, _ = _best_rate(once, repeats)
    return {"simpy_timeouts_per_s": rate}


# --------------------------------------------------------------------------- (b) pipeline DES


def pipeline_bench_config(microbatches: int) -> Any:
    """The pipeline of the crossing benchmark.

    48 stages of 2 replicas (96 workers of availability 0.9, outages of mean
    20 stage times), shared stage domains (``rho = 1e-3``), skip budget 2,
    compute time 1 per stage, failover after a detection timeout of 0.5, one
    arrival per time unit.
    """
    from .pipeline import PipelineConfig

    return PipelineConfig(stages=48, replicas=2, skip_budget=2, availability=0.9,
                          domain_outage=1e-3, stage_time=1.0, detection_timeout=0.5,
                          mean_downtime=20.0, domain_downtime=20.0, microbatches=microbatches,
                          rate=1.0)


def bench_pipeline(microbatches: int = 4000, repeats: int = 2) -> dict[str, float]:
    """Stage crossings per second of the pipeline DES (see :func:`pipeline_bench_config`).

    Parameters
    ----------
    microbatches : int
        Microbatches per repeat.
    repeats : int
        Best of this many repeats (each with its own replication streams).

    Returns
    -------
    dict
        ``pipeline_crossings_per_s``, ``pipeline_failovers_per_microbatch``,
        ``pipeline_mean_skipped``, ``pipeline_microbatches``.
    """
    from .pipeline import des_pipeline_model as pipeline_model

    cfg = pipeline_bench_config(microbatches)
    extra: dict[str, float] = {}
    rep = iter(range(repeats))

    def once() -> tuple[float, float]:
        t0 = _cpu_clock()
        m = pipeline_model(cfg, Streams(0).replication(next(rep)))
        dt = _cpu_clock() - t0
        extra.update(pipeline_failovers_per_microbatch=m["failovers_per_microbatch"],
                     pipeline_mean_skipped=m["mean_skipped"], pipeline_drop_rate=m["drop_rate"])
        return m["stage_crossings"], dt

    rate, _ = _best_rate(once, repeats)
    return {"pipeline_crossings_per_s": rate, "pipeline_microbatches": float(microbatches), **extra}


# --------------------------------------------------------------------------- (c) async gossip


def bench_async_gossip(nodes: int = 1000, horizon: int = 30, repeats: int = 2) -> dict[str, float]:
    """Exchanges per second of the per-node SimPy ``async`` gossip on the complete graph.

    Exchanges take the default latency 1, so about ``nodes`` of them are still
    in flight at the horizon and not counted; a horizon of tens of time units
    keeps that (and the start of ``nodes`` processes) to a few percent.

    Parameters
    ----------
    nodes : int
        Nodes, each a SimPy process waking at rate 1.
    horizon : int
        Simulated time units (about ``nodes * horizon`` exchanges).
    repeats : int
        Best of this many repeats.

    Returns
    -------
    dict
        ``async_exchanges_per_s``, ``async_nodes``, ``async_build_s`` (wiring
        the system: random blocks, processes) and ``async_path`` (the
        implementation path, see :attr:`sim.gossip.GossipSystem.async_path`);
        ``async_bare_wakes_per_s``, the rate of ``nodes`` bare SimPy processes
        that only wake on their Poisson clocks (the floor of any per-node
        design: with ``nodes`` timeouts pending, SimPy's heap makes a wake
        cost about two bare timeouts), and ``async_exchanges_per_bare_wake``.
    """
    from .gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=nodes, protocol="async", rounds=horizon,
                       record_every=horizon, engine="des")
    rep = iter(range(repeats))
    info: dict[str, Any] = {}

    def once() -> tuple[float, float]:
        t0 = _cpu_clock()
        system = GossipSystem(cfg, Streams(0).replication(next(rep)))
        t1 = _cpu_clock()
        system.run()
        info.update(async_build_s=t1 - t0, async_path=system.async_path)
        return system.exchanges, _cpu_clock() - t1

    rate, _ = _best_rate(once, repeats)
    wake_rate, _ = _best_rate(lambda: _bare_wakes(nodes, horizon), repeats)
    return {"async_exchanges_per_s": rate, "async_nodes": float(nodes), **info,
            "async_bare_wakes_per_s": wake_rate, "async_exchanges_per_bare_wake": rate / wake_rate}


def _bare_wakes(nodes: int, horizon: float) -> tuple[float, float]:
    """``nodes`` SimPy processes waking at rate 1 and doing nothing else: (wakes, seconds)."""
    env = simpy.Environment()
    gaps = np.random.default_rng(nodes).exponential(1.0, size=(nodes, int(2 * horizon) + 20))

    def node(row: list[float]):
        timeout = env.timeout
        for g in row:
            yield timeout(g)

    for row in gaps.tolist():
        env.process(node(row))
    wakes = int(np.sum(np.cumsum(gaps, axis=1) <= horizon))
    t0 = _cpu_clock()
    env.run(until=horizon)
    return wakes, _cpu_clock() - t0


# --------------------------------------------------------------------------- (d) matching gossip


def bench_matching(sizes: Iterable[int] = MATCHING_SIZES, updates: float = 4e6,
                   repeats: int = 2, des_sizes: Iterable[int] = (1000,),
                   des_rounds: int = 5) -> dict[str, float]:
    """Node updates per second of vectorised matching gossip vs bare numpy, per size.

    Parameters
    ----------
    sizes : iterable of int
        Node counts (even).
    updates : float
        About this many node updates per measurement (at least 3 rounds).
    repeats : int
        Best of this many repeats.
    des_sizes : iterable of int
        Sizes at which the per-node DES engine of the same protocol is also
        timed (``des_rounds`` rounds), to show what vectorising buys.

    Returns
    -------
    dict
        For each ``n``: ``matching_updates_per_s_n{n}``, ``matching_round_ms_n{n}``,
        ``numpy_updates_per_s_n{n}``, ``matching_vs_numpy_n{n}`` (ratio of the
        two rates). The numpy reference does, per round, a random permutation,
        a pairing of its halves, and the average written to both ends. For each
        DES size: ``matching_des_updates_per_s_n{n}`` and
        ``matching_vector_vs_des_n{n}`` (how many times faster the vector engine is).
    """
    out: dict[str, float] = {}
    for n in sizes:
        n = check_int("nodes", n, low=2)
        rounds = max(3, int(updates // n))
        sim_rate = _matching_rate(n, rounds, repeats)
        np_rate = _numpy_rate(n, rounds, repeats)
        out[f"matching_updates_per_s_n{n}"] = sim_rate
        out[f"matching_round_ms_n{n}"] = 1e3 * n / sim_rate
        out[f"numpy_updates_per_s_n{n}"] = np_rate
        out[f"matching_vs_numpy_n{n}"] = sim_rate / np_rate
    for n in des_sizes:
        n = check_int("nodes", n, low=2)
        des_rate = _matching_rate(n, des_rounds, 1, engine="des")
        out[f"matching_des_updates_per_s_n{n}"] = des_rate
        vec = out.get(f"matching_updates_per_s_n{n}") or _matching_rate(n, des_rounds, repeats)
        out[f"matching_vector_vs_des_n{n}"] = vec / des_rate
    return out


def _matching_rate(n: int, rounds: int, repeats: int, engine: str = "vector") -> float:
    """Node updates/s of :class:`sim.gossip.GossipSystem` matching rounds (complete graph)."""
    from .gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=n, protocol="matching", rounds=rounds,
                       record_every=rounds, engine=engine)
    rep = iter(range(repeats))

    def once() -> tuple[float, float]:
        system = GossipSystem(cfg, Streams(1).replication(next(rep)))
        t0 = _cpu_clock()
        system.run()
        return float(n * rounds), _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


def _numpy_rate(n: int, rounds: int, repeats: int) -> float:
    """Node updates/s of a bare numpy permute-pair-average round of ``n`` values."""
    rng = np.random.default_rng(n)

    def once() -> tuple[float, float]:
        x = rng.standard_normal((n, 1))
        t0 = _cpu_clock()
        for _ in range(rounds):
            perm = rng.permutation(n)
            a, b = perm[0::2], perm[1::2]
            avg = (x[a] + x[b]) * 0.5
            x[a] = avg
            x[b] = avg
        return float(n * rounds), _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


# --------------------------------------------------------------------------- (e) stylised


def bench_stylised(microbatches: int = 20_000_000, repeats: int = 2) -> dict[str, float]:
    """Microbatch trials per second of :func:`sim.pipeline.vector.simulate_stylised`.

    The study's point ``L = 48, r = 3, s = 1, a = 0.9, rho = 1e-3``.

    Returns
    -------
    dict
        ``stylised_trials_per_s``, ``stylised_drop_rate``, ``stylised_exact``.
    """
    from .analytic import drop_probability
    from .pipeline.vector import simulate_stylised

    rng = Streams(2).rng("bench")
    res: dict[str, float] = {}

    def once() -> tuple[float, float]:
        t0 = _cpu_clock()
        r = simulate_stylised(48, 3, 1, 0.9, 1e-3, microbatches=microbatches, rng=rng)
        dt = _cpu_clock() - t0
        res["stylised_drop_rate"] = r.drop_rate
        return microbatches, dt

    rate, _ = _best_rate(once, repeats)
    return {"stylised_trials_per_s": rate, **res,
            "stylised_exact": drop_probability(48, 3, 1, 0.9, 1e-3)}


# --------------------------------------------------------------------------- (f) rare events


def bench_rare(repeats: int = 5) -> dict[str, float]:
    """Rare-event estimators to a 10% relative error at drop probabilities near 1e-9.

    Independent stages: ``L = 48, r = 3, s = 4, a = 0.9`` (exact 1.65e-9),
    exponential tilting (:func:`sim.pipeline.rare.importance_drop_probability`);
    shared racks: 12 racks of 4 stages, ``r = 3, s = 6, a = 0.9, rho = 1e-5``
    (exact 8.1e-9), the stratified estimator
    (:func:`sim.pipeline.rare.stratified_placement_probability`, default settings,
    which sum this layout's strata exactly). Median time over ``repeats`` seeds.

    Returns
    -------
    dict
        ``rare_seconds``, ``rare_samples``, ``rare_estimate``, ``rare_rel_error``,
        ``rare_exact``, ``rare_naive_samples``, and the same with ``rare_shared_``,
        plus ``rare_shared_enumerated`` (domain configurations summed exactly).
        ``rare_shared_naive_samples`` is the plain Monte Carlo draws for the
        relative error reached, or for 10% when the estimate is tighter (an
        exact sum has no sampling error).
    """
    from .analytic import drop_probability, exact_drop_probability
    from .pipeline.rare import importance_drop_probability, stratified_placement_probability

    out: dict[str, float] = {}
    runs = [importance_drop_probability(48, 3, 4, 0.9, 0.0, rng=Streams(3).rng("rare", i),
                                        target_rel_error=0.1) for i in range(repeats)]
    runs.sort(key=lambda r: r.seconds)
    mid = runs[len(runs) // 2]
    out.update(rare_seconds=mid.seconds, rare_samples=float(mid.samples),
               rare_estimate=mid.estimate, rare_rel_error=mid.rel_error,
               rare_exact=drop_probability(48, 3, 4, 0.9, 0.0), rare_naive_samples=mid.naive_samples)
    rd = [[(f"rack{j // 4}",)] * 3 for j in range(48)]
    do = {f"rack{i}": 1e-5 for i in range(12)}
    runs = [stratified_placement_probability(rd, do, 0.9, 6, rng=Streams(3).rng("rare_shared", i),
                                             target_rel_error=0.1) for i in range(repeats)]
    runs.sort(key=lambda r: r.seconds)
    mid = runs[len(runs) // 2]
    p, rel = mid.estimate, max(mid.rel_error, 0.1)
    naive = (1.0 - p) / (p * rel * rel) if p > 0 and math.isfinite(rel) else math.nan
    out.update(rare_shared_seconds=mid.seconds, rare_shared_samples=float(mid.samples),
               rare_shared_estimate=mid.estimate, rare_shared_rel_error=mid.rel_error,
               rare_shared_exact=exact_drop_probability(rd, do, 0.9, 6),
               rare_shared_naive_samples=naive,
               rare_shared_enumerated=float(mid.enumerated))
    return out


# --------------------------------------------------------------------------- (g) sweeps


def sweep_task_config(microbatches: int) -> Any:
    """The equal task of the sweep benchmark (a pipeline DES replication)."""
    return pipeline_bench_config(microbatches)


def _plain_run(ex: Any, model: Callable, cfg: Any, tasks: int, seed: int) -> float:
    from .runner import run_one

    t0 = time.perf_counter()
    futures = [ex.submit(run_one, model, cfg, seed, k) for k in range(tasks)]
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def bench_sweep(tasks: int = 20, workers: int = 2, microbatches: int = 2500,
                dask: bool = True, repeats: int = 2) -> dict[str, float]:
    """Sweep speedup over serial: the runner vs a plain executor, locally and on Dask.

    Parameters
    ----------
    tasks : int
        Equal tasks (replications of one pipeline config).
    workers : int
        Worker processes.
    microbatches : int
        Size of each task (see :func:`sweep_task_config`).
    dask : bool
        Also measure a ``workers``-worker Dask ``LocalCluster`` (started
        before the clock starts).
    repeats : int
        Runner and plain runs alternate this many times; the best of each counts.

    Returns
    -------
    dict
        ``sweep_serial_s``, ``sweep_task_s``, ``sweep_local_s``, ``sweep_plain_pool_s``,
        ``sweep_local_speedup``, ``sweep_plain_pool_speedup``,
        ``sweep_local_vs_plain`` (runner speedup / plain speedup), and with Dask
        ``sweep_dask_s``, ``sweep_plain_dask_s``, ``sweep_dask_speedup``,
        ``sweep_plain_dask_speedup``, ``sweep_dask_vs_plain``. Local pools are
        created inside the timed region for both (equal start-up cost).
    """
    from .pipeline import des_pipeline_model as pipeline_model
    from .runner import sweep

    tasks = check_int("tasks", tasks, low=1)
    workers = check_int("workers", workers, low=1)
    cfg = sweep_task_config(microbatches)
    out: dict[str, float] = {"sweep_tasks": float(tasks), "sweep_workers": float(workers)}

    def runner_time(executor: Any) -> float:
        t0 = time.perf_counter()
        res = sweep(pipeline_model, cfg, replications=tasks, seed=5, executor=executor)
        dt = time.perf_counter() - t0
        check(res.errors == 0, "sweep", "free of task errors", res.errors)
        return dt

    serial = runner_time("serial")
    out["sweep_serial_s"] = serial
    out["sweep_task_s"] = serial / tasks

    def local_runner() -> float:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as ex:
            runner_time(ex)
        return time.perf_counter() - t0

    def local_plain() -> float:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as ex:
            _plain_run(ex, pipeline_model, cfg, tasks, 5)
        return time.perf_counter() - t0

    plain_times, local_times = [], []
    for _ in range(repeats):  # interleaved, best of each: the least disturbed by other load
        plain_times.append(local_plain())
        local_times.append(local_runner())
    local, plain = min(local_times), min(plain_times)
    out.update(sweep_local_s=local, sweep_plain_pool_s=plain,
               sweep_local_speedup=serial / local, sweep_plain_pool_speedup=serial / plain,
               sweep_local_vs_plain=plain / local)
    if dask:
        try:
            from .runner import DaskExecutor
            dex = DaskExecutor(workers=workers)
        except Exception as exc:  # dask missing or failing: say so, do not fake it
            out["sweep_dask_error"] = f"{type(exc).__name__}: {exc}"  # type: ignore[assignment]
            return out
        try:
            _plain_run(dex, pipeline_model, sweep_task_config(20), 2 * workers, 0)  # warm up
            d_plain, d_runner = [], []
            for _ in range(repeats):
                d_plain.append(_plain_run(dex, pipeline_model, cfg, tasks, 5))
                d_runner.append(runner_time(dex))
        finally:
            dex.shutdown()
        dr, dp = min(d_runner), min(d_plain)
        out.update(sweep_dask_s=dr, sweep_plain_dask_s=dp,
                   sweep_dask_speedup=serial / dr, sweep_plain_dask_speedup=serial / dp,
                   sweep_dask_vs_plain=dp / dr)
    return out


# --------------------------------------------------------------------------- (h) memory

_MEMORY_SCRIPTS = {
    "baseline": """
        import sim.gossip, sim.pipeline
        """,
    "async_gossip": """
        from sim.gossip import GossipConfig, GossipSystem
        from sim.rng import Streams
        cfg = GossipConfig(topology="complete", nodes={nodes}, protocol="async",
                           rounds={horizon}, record_every={horizon}, engine="des")
        system = GossipSystem(cfg, Streams(0).replication(0))
        system.run()
        extra = {{"exchanges": system.exchanges}}
        """,
    "pipeline": """
        import tracemalloc
        from sim.pipeline import PipelineConfig
        from sim.pipeline import des_pipeline_model as pipeline_model
        from sim.rng import Streams
        cfg = PipelineConfig(stages=48, replicas=3, skip_budget=1, availability=0.9,
                             domain_outage=1e-3, microbatches={microbatches}, rate=1000.0,
                             records=False)
        if {traced}:
            tracemalloc.start()
        m = pipeline_model(cfg, Streams(0).replication(0))
        traced = tracemalloc.get_traced_memory()[1] / 2**20 if {traced} else None
        extra = {{"drop_rate": m["drop_rate"], "microbatches": m["microbatches"],
                  "traced_peak_mib": traced}}
        """,
    "compiled_big": """
        from sim.gossip import GossipConfig, GossipSystem
        from sim.rng import Streams
        cfg = GossipConfig(topology="complete", nodes={nodes}, protocol="async",
                           rounds={horizon}, record_every={horizon}, latency=1.0,
                           availability=0.9, mean_downtime=1.0, engine="compiled")
        system = GossipSystem(cfg, Streams(0).replication(0))
        system.run()
        extra = {{"exchanges": system.exchanges}}
        """,
}


def _peak_rss(kind: str, timeout: float = 900.0, **params: Any) -> dict[str, float]:
    """Run one memory script in a fresh interpreter; its peak RSS in MiB and wall time."""
    body = textwrap.dedent(_MEMORY_SCRIPTS[kind]).format(**params)
    code = ("import json, resource, time\nt0 = time.perf_counter()\nextra = {}\n" + body +
            "\nprint(json.dumps({'peak_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
            " / 1024, 'seconds': time.perf_counter() - t0, **extra}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory benchmark {kind} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_compiled_memory(nodes: int = 100_000, horizons: tuple[int, int] = (1, 30)
                          ) -> dict[str, float]:
    """Peak RSS of the compiled async engine at two horizons, side by side (fresh subprocesses).

    Complete graph, latency 1, exponential churn (availability 0.9), two
    records per run; only the horizon differs, so a ratio near 1 says the
    engine's memory does not grow with it (issue 17 measured 338 against 700
    MiB for the SimPy engine at n = 1e5, horizons 1 and 30).

    Returns
    -------
    dict
        ``mem_compiled_h{h}_mib`` and ``mem_compiled_h{h}_exchanges`` for each
        horizon, ``mem_compiled_horizon_ratio`` (long over short) and
        ``mem_compiled_horizon_nodes``; nothing without numba.
    """
    from .gossip.compiled import HAVE_NUMBA

    if not HAVE_NUMBA:
        return {}
    out: dict[str, float] = {"mem_compiled_horizon_nodes": float(nodes)}
    peaks = []
    for h in horizons:
        r = _peak_rss("compiled_big", nodes=int(nodes), horizon=int(h))
        out[f"mem_compiled_h{h}_mib"] = r["peak_mib"]
        out[f"mem_compiled_h{h}_exchanges"] = float(r["exchanges"])
        peaks.append(r["peak_mib"])
    out["mem_compiled_horizon_ratio"] = peaks[-1] / peaks[0]
    return out


def bench_memory(gossip_nodes: int = 100_000, gossip_horizon: int = 2,
                 pipeline_small: int = 10_000, pipeline_large: int = 1_000_000,
                 traced_large: int = 100_000, compiled_nodes: int = 100_000,
                 compiled_horizons: tuple[int, int] = (1, 30)) -> dict[str, float]:
    """Peak memory of big runs, each in a fresh subprocess.

    Parameters
    ----------
    gossip_nodes, gossip_horizon : int
        The ``async`` gossip run (complete graph, latency 1).
    pipeline_small, pipeline_large : int
        Microbatches of the two pipeline runs whose peak RSS is compared (48
        stages, snapshot crossing, 1000 arrivals per time unit, records off).
    traced_large : int
        Microbatches of the pipeline run whose Python allocations are traced
        (``tracemalloc`` peak, compared with ``pipeline_small`` traced the same
        way; tracing slows the run about fivefold).

    Returns
    -------
    dict
        ``mem_baseline_mib`` (peak RSS of an interpreter with sim imported),
        ``mem_async_gossip_peak_mib``, ``mem_async_gossip_exchanges``,
        ``mem_pipeline_small_peak_mib``, ``mem_pipeline_large_peak_mib``,
        ``mem_pipeline_growth_mib`` (RSS, large minus small),
        ``mem_pipeline_traced_small_mib``, ``mem_pipeline_traced_large_mib``,
        ``mem_pipeline_traced_growth_mib`` (tracemalloc peaks of the run alone)
        and the microbatch counts; and :func:`bench_compiled_memory` at
        ``compiled_nodes`` and ``compiled_horizons``.
    """
    base = _peak_rss("baseline")
    gos = _peak_rss("async_gossip", nodes=int(gossip_nodes), horizon=int(gossip_horizon))
    small = _peak_rss("pipeline", microbatches=int(pipeline_small), traced=False)
    large = _peak_rss("pipeline", microbatches=int(pipeline_large), traced=False)
    t_small = _peak_rss("pipeline", microbatches=int(pipeline_small), traced=True)
    t_large = _peak_rss("pipeline", microbatches=int(traced_large), traced=True)
    return {
        "mem_baseline_mib": base["peak_mib"],
        "mem_async_gossip_nodes": float(gossip_nodes),
        "mem_async_gossip_peak_mib": gos["peak_mib"],
        "mem_async_gossip_exchanges": float(gos["exchanges"]),
        "mem_async_gossip_seconds": gos["seconds"],
        "mem_pipeline_small_microbatches": float(pipeline_small),
        "mem_pipeline_large_microbatches": float(pipeline_large),
        "mem_pipeline_small_peak_mib": small["peak_mib"],
        "mem_pipeline_large_peak_mib": large["peak_mib"],
        "mem_pipeline_growth_mib": large["peak_mib"] - small["peak_mib"],
        "mem_pipeline_large_seconds": large["seconds"],
        "mem_pipeline_traced_large_microbatches": float(traced_large),
        "mem_pipeline_traced_small_mib": t_small["traced_peak_mib"],
        "mem_pipeline_traced_large_mib": t_large["traced_peak_mib"],
        "mem_pipeline_traced_growth_mib": t_large["traced_peak_mib"] - t_small["traced_peak_mib"],
        **bench_compiled_memory(int(compiled_nodes), tuple(compiled_horizons)),  # type: ignore[arg-type]
    }


# --------------------------------------------------------------------------- (i) against the machine

_C_SOURCE = Path(__file__).resolve().parent.parent / "benchmarks" / "async_gossip.c"


def _c_reference() -> Path | None:
    """The C reference loop, compiled once per source version (None: no compiler or source)."""
    import hashlib
    import shutil
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not _C_SOURCE.exists():
        return None
    tag = hashlib.sha256(_C_SOURCE.read_bytes()).hexdigest()[:12]
    exe = Path(tempfile.gettempdir()) / f"dtsim-async-gossip-{tag}"
    if not exe.exists():
        tmp = exe.with_suffix(".tmp")
        subprocess.run([cc, "-O2", "-o", str(tmp), str(_C_SOURCE), "-lm"], check=True,
                       capture_output=True, timeout=120)
        tmp.replace(exe)
    return exe


def _c_rate(exe: Path, nodes: int, horizon: float, latency: float, repeats: int) -> float:
    best = 0.0
    for k in range(repeats):
        out = subprocess.run([str(exe), str(nodes), str(horizon), str(latency), str(k + 1)],
                             capture_output=True, text=True, check=True, timeout=600)
        best = max(best, float(json.loads(out.stdout)["exchanges_per_s"]))
    return best


def _compiled_rate(nodes: int, horizon: float, latency: float, repeats: int) -> float:
    from .gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=nodes, protocol="async", rounds=int(horizon),
                       record_every=int(horizon), latency=latency, engine="compiled")
    GossipSystem(GossipConfig(topology="complete", nodes=10, protocol="async", rounds=1,
                              latency=latency, engine="compiled"), Streams(0)).run()  # compile
    rep = iter(range(repeats))

    def once() -> tuple[float, float]:
        system = GossipSystem(cfg, Streams(0).replication(next(rep)))
        t0 = _cpu_clock()
        system.run()
        return system.exchanges, _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


def bench_machine(nodes: int = 1000, horizon: int = 2000, repeats: int = 3,
                  big_nodes: int = 1_000_000, big_horizon: int = 10) -> dict[str, float]:
    """The compiled async gossip engine as a fraction of a plain C loop, and its memory at scale.

    Parameters
    ----------
    nodes, horizon : int
        Complete graph of ``nodes`` nodes waking at rate 1 for ``horizon`` time
        units (about ``nodes * horizon`` exchanges), for both loops.
    repeats : int
        Best of this many runs of each.
    big_nodes, big_horizon : int
        The large run (latency 1, churn at availability 0.9), in a fresh
        subprocess for its peak RSS.

    Returns
    -------
    dict
        ``c_async_per_s`` and ``c_async_latency_per_s`` (absent without a C
        compiler), ``compiled_async_per_s``, ``compiled_async_latency_per_s``,
        their ratios ``compiled_vs_c`` and ``compiled_vs_c_latency``, and
        ``mem_compiled_big_peak_mib``, ``mem_compiled_big_exchanges``,
        ``mem_compiled_big_seconds``.
    """
    out: dict[str, float] = {}
    out["compiled_async_per_s"] = _compiled_rate(nodes, horizon, 0.0, repeats)
    out["compiled_async_latency_per_s"] = _compiled_rate(nodes, horizon, 1.0, repeats)
    exe = _c_reference()
    if exe is not None:
        out["c_async_per_s"] = _c_rate(exe, nodes, horizon, 0.0, repeats)
        out["c_async_latency_per_s"] = _c_rate(exe, nodes, horizon, 1.0, repeats)
        out["compiled_vs_c"] = out["compiled_async_per_s"] / out["c_async_per_s"]
        out["compiled_vs_c_latency"] = (out["compiled_async_latency_per_s"]
                                        / out["c_async_latency_per_s"])
    big = _peak_rss("compiled_big", nodes=int(big_nodes), horizon=int(big_horizon))
    out.update(mem_compiled_big_nodes=float(big_nodes), mem_compiled_big_peak_mib=big["peak_mib"],
               mem_compiled_big_exchanges=float(big["exchanges"]),
               mem_compiled_big_seconds=big["seconds"])
    return out


# --------------------------------------------------------------------------- (j) high-flip pipeline


def highflip_config(microbatches: int) -> Any:
    """The pipeline whose workers flip often: L = 60, r = 4, a = 0.6, downtime 1, s = 2."""
    from .pipeline import PipelineConfig

    return PipelineConfig(stages=60, replicas=4, availability=0.6, mean_downtime=1.0,
                          skip_budget=2, microbatches=microbatches)


def bench_highflip(microbatches: int = 1000, markov_microbatches: int = 100_000,
                   repeats: int = 2) -> dict[str, float]:
    """Stage crossings per second of the DES and of the exact Markov engine on the high-flip pipeline.

    Returns
    -------
    dict
        ``highflip_des_crossings_per_s``, ``highflip_markov_crossings_per_s``
        and their ratio ``highflip_markov_vs_des`` (the target is at least 50).
    """
    from .pipeline import des_pipeline_model as pipeline_model
    from .pipeline import markov_run

    def des() -> tuple[float, float]:
        t0 = _cpu_clock()
        m = pipeline_model(highflip_config(microbatches), Streams(0))
        return m["stage_crossings"], _cpu_clock() - t0

    def fast() -> tuple[float, float]:
        t0 = _cpu_clock()
        m = markov_run(highflip_config(markov_microbatches), Streams(0)).metrics
        return m["stage_crossings"], _cpu_clock() - t0

    d = _best_rate(des, repeats)[0]
    f = _best_rate(fast, repeats)[0]
    return {"highflip_des_crossings_per_s": d, "highflip_markov_crossings_per_s": f,
            "highflip_markov_vs_des": f / d}


# --------------------------------------------------------------------------- (k, l) training


def bench_training(repeats: int = 2, scale_steps: int = 10_000) -> dict[str, float]:
    """Passes per second of the contended training DES and compiled engine, and the scale point.

    The DES's rate is divided by the yardstick (``training_passes_per_timeout``);
    the compiled engine's is absolute (:func:`sim.training.bench.measure_compiled_pass_rate`),
    with the scale point of :func:`sim.training.bench.measure_scale` (``scale_steps``
    steps). Without numba the compiled figures are absent.
    """
    from .training.bench import measure_compiled_pass_rate, measure_pass_rate, measure_scale
    from .training.compiled import HAVE_NUMBA

    res = measure_pass_rate(repeats=repeats)
    res.pop("simpy_timeouts_per_s", None)  # the suite's own yardstick divides
    res.pop("training_passes_per_bare_timeout", None)
    if HAVE_NUMBA:
        res.update(measure_compiled_pass_rate(repeats=repeats + 1))
        res["compiled_training_vs_des"] = (res["compiled_training_passes_per_s"]
                                           / res["training_passes_per_s"])
        res.update(measure_scale(scale_steps))
    return res


def bench_gossip_training(repeats: int = 2) -> dict[str, float]:
    """CPU cost per local step of async gossip training (:func:`sim.learning.bench.bench_async_training`).

    The SimPy engine's figures, and the compiled engine's with the prefix
    ``async_training_compiled_`` (when numba is installed).
    """
    from .gossip.compiled import HAVE_NUMBA
    from .learning.bench import bench_async_training

    out = {k: v for k, v in bench_async_training(repeats=repeats, engine="des").items()
           if isinstance(v, (int, float))}
    if HAVE_NUMBA:
        bench_async_training(nodes=10, horizon=1, dim=2, repeats=1, engine="compiled")  # compile
        comp = bench_async_training(repeats=repeats, engine="compiled")
        out.update({k.replace("async_training_", "async_training_compiled_"): v
                    for k, v in comp.items() if isinstance(v, (int, float))
                    and k.startswith("async_training_")})
    return out


def bench_plans(repeats: int = 2) -> dict[str, float]:
    """Real plans per CPU second: built and simulated (the DES), and evaluated exactly.

    The 17 shipped runs' plans (:func:`sim.profiles.read_runs`), each built by
    :func:`sim.profiles.build.build_plan` and simulated for one failure-free
    iteration by the training DES; and the same plans' exact step times
    (:func:`sim.engines.predictions`, the max-plus program evaluation).
    """
    from .engines import predictions
    from .profiles import load_profiles, read_runs
    from .profiles.build import build_plan
    from .rng import Streams
    from .training import training_model

    runs = read_runs()
    prof = load_profiles(models=tuple(sorted({r.plan.model for r in runs})))  # type: ignore[type-var]

    def sim_once() -> tuple[float, float]:
        t0 = _cpu_clock()
        for r in runs:
            b = build_plan(r.plan, prof, steps=1, check_memory=False)
            training_model(b.config, Streams(0).replication(0))
        return float(len(runs)), _cpu_clock() - t0

    builds = [build_plan(r.plan, prof, steps=1, check_memory=False).config for r in runs]

    def exact_once() -> tuple[float, float]:
        t0 = _cpu_clock()
        for c in builds:
            predictions("training", c, ["step_time_mean"])
        return float(len(builds)), _cpu_clock() - t0

    rate, _ = _best_rate(sim_once, repeats)
    exact, _ = _best_rate(exact_once, repeats)
    micro = sum(c.microbatches for c in builds) / len(builds)
    return {"plans_simulated_per_s": rate, "plans_exact_per_s": exact,
            "plans_count": float(len(runs)), "plans_mean_microbatches": micro}


# --------------------------------------------------------------------------- (m) recording


def _run_seconds(cfg: Any, repeats: int, clock: Callable[[], float] = _cpu_clock) -> float:
    """Best time of ``GossipSystem(cfg).run()`` over ``repeats`` runs (the build not counted)."""
    from .gossip import GossipSystem

    best = math.inf
    for k in range(repeats):
        system = GossipSystem(cfg, Streams(0).replication(k))
        t0 = clock()
        system.run()
        best = min(best, clock() - t0)
    return best


def bench_recording(edge_nodes: tuple[int, ...] = (1000, 10_000), edge_steps: int = 3_000_000,
                    async_nodes: int = 10_000, async_horizon: int = 100,
                    repeats: int = 5) -> dict[str, float]:
    """Cost of the default records: run time with them over run time without (start and end only).

    Parameters
    ----------
    edge_nodes, edge_steps : tuple of int, int
        Compiled ``edge`` runs on the complete graph (the default interval is
        ``max(2 n, 20000)`` steps, :func:`sim.gossip.config.default_record_every`).
    async_nodes, async_horizon : int
        A compiled ``async`` run without latency (the default interval is one time unit).
    repeats : int
        Best of this many runs of each (the two settings alternate).

    Returns
    -------
    dict
        ``recording_edge_ratio_n{n}`` and ``recording_edge_seconds_n{n}`` (with
        the default records), ``recording_async_ratio`` and
        ``recording_async_seconds``; a ratio of 1 means records cost nothing.
    """
    import dataclasses

    from .gossip import GossipConfig, GossipSystem

    GossipSystem(GossipConfig(nodes=10, protocol="edge", rounds=10), Streams(0)).run()  # compile
    out: dict[str, float] = {}
    for n in edge_nodes:
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=edge_steps)
        bare = dataclasses.replace(cfg, record_every=edge_steps)
        with_rec, without = math.inf, math.inf
        for _ in range(repeats):  # alternate, so a burst of load hits both
            with_rec = min(with_rec, _run_seconds(cfg, 1))
            without = min(without, _run_seconds(bare, 1))
        out[f"recording_edge_ratio_n{n}"] = with_rec / without
        out[f"recording_edge_seconds_n{n}"] = with_rec
    cfg = GossipConfig(nodes=async_nodes, protocol="async", rounds=async_horizon, latency=0.0,
                       engine="compiled")
    bare = dataclasses.replace(cfg, record_every=async_horizon)
    with_rec, without = math.inf, math.inf
    for _ in range(repeats):
        with_rec = min(with_rec, _run_seconds(cfg, 1))
        without = min(without, _run_seconds(bare, 1))
    out["recording_async_ratio"] = with_rec / without
    out["recording_async_seconds"] = with_rec
    return out


# --------------------------------------------------------------------------- (n) PeerSim

_PEERSIM_SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "peersim.sh"
#: ``benchmarks/peersim.sh`` cases: (case, nodes) -> the key of its rate here.
_PEERSIM_CASES = {("cycle_complete", 100_000): "peersim_cycle_per_s_n100000",
                  ("cycle_complete", 1_000_000): "peersim_cycle_per_s_n1000000",
                  ("event_nodelay", 10_000): "peersim_event_per_s",
                  ("event_delay10", 10_000): "peersim_event_delay_per_s"}


def peersim_skip_reason(peersim: str | None) -> str | None:
    """Why the ``peersim`` part cannot run (None: it can)."""
    import shutil

    if peersim is None:
        return "needs --peersim DIR"
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "needs java and javac on PATH"
    if not _PEERSIM_SCRIPT.exists():
        return f"needs {_PEERSIM_SCRIPT}"
    return None


def _exchange_rate(cfg: Any, repeats: int) -> float:
    """Best exchanges per wall-clock second of ``GossipSystem(cfg).run()``."""
    from .gossip import GossipSystem

    best = 0.0
    for k in range(repeats):
        system = GossipSystem(cfg, Streams(0).replication(k))
        t0 = time.perf_counter()
        system.run()
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, system.exchanges / dt)
    return best


def bench_peersim(peersim: str | None = None, repeats: int = 3, edge_steps: int = 20_000_000,
                  async_nodes: int = 10_000, async_horizon: int = 200) -> dict[str, Any]:
    """PeerSim's averaging and dtsim's compiled engines, exchanges per second, side by side.

    Parameters
    ----------
    peersim : str or None
        A PeerSim 1.0.5 source tree or a git repository holding it (see
        ``benchmarks/peersim.sh``); None skips the part.
    repeats : int
        Best of this many runs on each side (PeerSim's rate is the difference
        of two runs that differ only in cycles, so JVM start-up cancels).
    edge_steps : int
        Steps of each compiled ``edge`` run (complete graph, ``n = 1e5, 1e6``).
    async_nodes, async_horizon : int
        The compiled ``async`` runs (complete graph, wake rate 1), without
        delay and with a delay of 0.1 time unit (PeerSim's 10% of a cycle).

    Returns
    -------
    dict
        ``peersim_skipped`` (the reason) when it does not run; otherwise
        PeerSim's ``peersim_cycle_per_s_n{n}``, ``peersim_event_per_s``,
        ``peersim_event_delay_per_s``, dtsim's ``dtsim_edge_per_s_n{n}``,
        ``dtsim_async_per_s``, ``dtsim_async_delay_per_s`` (wall clock on both
        sides, as PeerSim times itself) and the ratios ``edge_vs_peersim_n{n}``,
        ``async_vs_peersim``, ``async_delay_vs_peersim`` (dtsim / PeerSim;
        ahead means above 1).
    """
    why = peersim_skip_reason(peersim)
    if why is not None:
        return {"peersim_skipped": why}
    from .gossip import GossipConfig, GossipSystem

    proc = subprocess.run(["bash", str(_PEERSIM_SCRIPT), str(peersim), str(repeats)],
                          capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"benchmarks/peersim.sh failed (exit {proc.returncode}): {tail}")
    out: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            key = _PEERSIM_CASES.get((rec["case"], int(rec["nodes"])))
            if key is not None and rec.get("exchanges_per_s"):
                out[key] = float(rec["exchanges_per_s"])
    GossipSystem(GossipConfig(nodes=10, protocol="edge", rounds=10), Streams(0)).run()  # compile
    GossipSystem(GossipConfig(nodes=10, protocol="async", rounds=1, latency=0.1,
                              engine="compiled"), Streams(0)).run()
    for n in (100_000, 1_000_000):
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=edge_steps, record_every=edge_steps)
        out[f"dtsim_edge_per_s_n{n}"] = _exchange_rate(cfg, repeats)
    for key, lat in (("dtsim_async_per_s", 0.0), ("dtsim_async_delay_per_s", 0.1)):
        cfg = GossipConfig(nodes=async_nodes, protocol="async", rounds=async_horizon,
                           record_every=async_horizon, latency=lat, engine="compiled")
        out[key] = _exchange_rate(cfg, repeats)
    for ours, theirs, ratio in (
            ("dtsim_edge_per_s_n100000", "peersim_cycle_per_s_n100000", "edge_vs_peersim_n100000"),
            ("dtsim_edge_per_s_n1000000", "peersim_cycle_per_s_n1000000",
             "edge_vs_peersim_n1000000"),
            ("dtsim_async_per_s", "peersim_event_per_s", "async_vs_peersim"),
            ("dtsim_async_delay_per_s", "peersim_event_delay_per_s", "async_delay_vs_peersim")):
        if out.get(theirs):
            out[ratio] = out[ours] / out[theirs]
    return out


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
        "learners": {"days": 30.0, "repeats": 1},
    },
}

_FUNCS: dict[str, Callable[..., dict[str, float]]] = {
    "simpy": bench_simpy, "pipeline": bench_pipeline, "async_gossip": bench_async_gossip,
    "matching": bench_matching, "stylised": bench_stylised, "rare": bench_rare,
    "sweep": bench_sweep, "memory": bench_memory, "machine": bench_machine,
    "highflip": bench_highflip, "training": bench_training,
    "gossip_training": bench_gossip_training, "recording": bench_recording,
    "peersim": bench_peersim, "plans": bench_plans,
    "network": lambda **kw: _network_part(**kw),
    "planner": lambda **kw: _planner_part(**kw),
    "learners": lambda **kw: _learners_part(**kw),
}


def _learners_part(**kw: Any) -> dict[str, Any]:
    """(issue 37) DiLoCo over 10^6 chips in 40 learners, per-chip failures: the learners
    engine's events per CPU second, wall and CPU time and peak memory
    (:func:`sim.training.learners.bench_learners`)."""
    from .training.learners import bench_learners

    return bench_learners(**kw)


def _planner_part(**kw: Any) -> dict[str, Any]:
    """The plan search on a 64-GPU mixed fleet (:func:`sim.planner.bench.bench_planner`)."""
    from .planner.bench import bench_planner

    return bench_planner(**kw)


def _network_part(**kw: Any) -> dict[str, Any]:
    """The flow-level network: flows/s beside SimGrid, and the cost of contention
    (:func:`sim.network.bench.bench_network`)."""
    from .network.bench import bench_network

    return bench_network(**kw)

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
        root = Path(__file__).resolve().parent.parent
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
    from . import __version__

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
            out.update(_FUNCS[p](**sizes[p], **extra))
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


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> Path:
    """Append ``record`` as one JSON line (non-finite numbers become null).

    Parameters
    ----------
    path : str or Path
        The file (parents are created).
    record : mapping

    Returns
    -------
    Path
    """
    from .results import to_jsonable

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(to_jsonable(dict(record)), allow_nan=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path
