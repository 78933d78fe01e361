"""``dtsim bench`` parts of Study A's pipeline (:mod:`sim.pipeline`): the DES (b), the
vectorised snapshot engine (e), the rare-event estimators (f) and the high-flip
pipeline on the DES and the exact Markov engine (j)."""

from __future__ import annotations

import math
from typing import Any

from ..rng import Streams
from .timing import _best_rate, _cpu_clock

__all__ = ["pipeline_bench_config", "bench_pipeline", "bench_stylised", "bench_rare", "highflip_config", "bench_highflip"]


# --------------------------------------------------------------------------- (b) pipeline DES


def pipeline_bench_config(microbatches: int) -> Any:
    """The pipeline of the crossing benchmark.

    48 stages of 2 replicas (96 workers of availability 0.9, outages of mean
    20 stage times), shared stage domains (``rho = 1e-3``), skip budget 2,
    compute time 1 per stage, failover after a detection timeout of 0.5, one
    arrival per time unit.
    """
    from ..pipeline import PipelineConfig

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
    from ..pipeline import des_pipeline_model as pipeline_model

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


# --------------------------------------------------------------------------- (e) stylised


def bench_stylised(microbatches: int = 20_000_000, repeats: int = 2) -> dict[str, float]:
    """Microbatch trials per second of :func:`sim.pipeline.vector.simulate_stylised`.

    The study's point ``L = 48, r = 3, s = 1, a = 0.9, rho = 1e-3``.

    Returns
    -------
    dict
        ``stylised_trials_per_s``, ``stylised_drop_rate``, ``stylised_exact``.
    """
    from ..analytic import drop_probability
    from ..pipeline.vector import simulate_stylised

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
    from ..analytic import drop_probability, exact_drop_probability
    from ..pipeline.rare import importance_drop_probability, stratified_placement_probability

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


# --------------------------------------------------------------------------- (j) high-flip pipeline


def highflip_config(microbatches: int) -> Any:
    """The pipeline whose workers flip often: L = 60, r = 4, a = 0.6, downtime 1, s = 2."""
    from ..pipeline import PipelineConfig

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
    from ..pipeline import des_pipeline_model as pipeline_model
    from ..pipeline import markov_run

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
