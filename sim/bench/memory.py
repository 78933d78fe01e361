"""``dtsim bench`` part ``memory`` (h): peak resident memory of fresh subprocesses, and the
``tracemalloc`` peak of the pipeline alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

__all__ = ["bench_memory", "bench_compiled_memory"]


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
    from ..gossip.compiled import HAVE_NUMBA

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
