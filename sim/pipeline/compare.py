"""Simulated against exact: the pipeline's comparison records and the rare-event rule.

:func:`simulate` runs replications on the engine :func:`~sim.pipeline.engines.choose_engine`
picks and returns one record (the payload ``dtsim pipeline --json`` prints):
estimates with intervals, the exact or reference values from
:func:`sim.engines.predictions`, and whether they are exact.
:func:`comparison_rows` turns it into one row per quantity with the verdict.
:func:`estimate_importance` is the same for the importance-sampling estimate,
and :func:`estimate_drop_rate` is the rule that falls back to importance
sampling when plain simulation cannot resolve a drop rate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, SimulationError, check_int, check_memory_terms, check_positive
from ..results import Estimate, metric_estimate, summarize
from ..rng import Streams
from .config import DES_BYTES_PER_STAGE, DES_BYTES_PER_WORKER, PipelineConfig
from .engines import RARE_FAMILY, choose_engine, snapshot_exact, snapshot_predictions

__all__ = [
    "RESOLVABLE_DROPS",
    "Comparison",
    "simulate",
    "comparison_rows",
    "importance_applies",
    "estimate_importance",
    "estimate_drop_rate",
    "predicted_drop_rate",
]

#: Below this many expected drops, :func:`estimate_drop_rate` uses importance sampling.
RESOLVABLE_DROPS = 30


def predicted_drop_rate(config: PipelineConfig) -> float:
    """The exact snapshot drop probability for the config's placement and parameters.

    The binomial law for the study's placement with equal replicas, the exact
    conditional law (shared domains) otherwise. It is the exact answer of the
    simulation when the crossing is a snapshot
    (:func:`~sim.pipeline.engines.snapshot_exact`); otherwise it is the
    snapshot reference.

    Returns
    -------
    float

    Raises
    ------
    ConfigError
        When the placement is too wide for the exact enumeration.
    """
    p = snapshot_predictions(config, ["drop_rate"])["drop_rate"]
    if p["value"] is None:
        raise ConfigError("placement", "a placement the exact law can enumerate", p["note"])
    return float(p["value"])


def _reference(config: PipelineConfig, metric: str) -> float | None:
    value = snapshot_predictions(config, [metric])[metric]["value"]
    return None if value is None else float(value)


def simulate(cfg: PipelineConfig, *, replications: int, seed: int, executor: Any = "serial",
             workers: int | None = None, engine: str = "des",
             records_out: list | None = None, model: Any = None) -> dict[str, Any]:
    """Run the replications and return the comparison record (intervals as Estimates).

    Parameters
    ----------
    cfg : PipelineConfig
    replications : int
        Independent replications (the intervals are across them).
    seed : int
        Root seed.
    executor, workers
        As for :func:`sim.runner.replicate`.
    engine : str
        ``"auto"`` or a pipeline engine's name (see
        :func:`~sim.pipeline.engines.choose_engine`); a named engine that does
        not apply is a :class:`~sim.errors.ConfigError`.
    records_out : list, optional
        Receives the replications' records.
    model : callable, optional
        Replaces the selected engine's ``run`` (a wrapper of it that records
        replication 0's timeline).

    Returns
    -------
    dict
        ``engine`` and ``engine_reason`` say which engine ran; ``drop_rate_ci``,
        ``mean_quality_ci``, ``goodput_ci`` are Estimates; ``predicted_*`` the
        reference values (exact when ``exact_applies``); the metrics the
        engine does not report (goodput, latency, failovers, simulated and
        worker time, with the vector engine) are None.
    """
    from ..runner import replicate

    sel, reason = choose_engine(cfg, engine)
    if sel.engine.name in ("des", "queueing"):  # they build every stage and replica worker
        reps = cfg.replicas
        check_memory_terms([
            ("stages", cfg.stages, cfg.stages * DES_BYTES_PER_STAGE),
            ("replicas", reps[0] if len(set(reps)) == 1 else reps,  # type: ignore[arg-type,index]
             cfg.workers * DES_BYTES_PER_WORKER),
        ])
    t0 = time.perf_counter()
    records = replicate(sel.engine.run if model is None else model, cfg,
                        replications=replications, seed=seed, executor=executor, workers=workers)
    wall = time.perf_counter() - t0
    if records_out is not None:
        records_out.extend(records)
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    fixed = cfg.fixed_metrics()  # what the config fixes is exact, with no interval
    # every pipeline metric is a count, a time, a rate or a fraction (none below 0); busy
    # fractions are fractions of time, inside [0, 1]
    busy = ["utilisation", *(f"utilisation_stage{j}" for j in range(cfg.stages))]
    est = summarize(records, fixed=fixed, lower=0.0, rates=busy)
    reported = set(sel.engine.metrics)
    timed = "simulated_time" in reported
    crossings = sum(r["stage_crossings"] for r in records)
    busy = sum(r["wall_time"] for r in records)
    n_total = cfg.microbatches * replications

    def mean(key: str) -> float | None:
        return est[key].mean if key in reported else None

    out = {
        "method": "simulate",
        "engine": sel.name,
        "engine_reason": reason,
        "drop_rate": est["drop_rate"].mean,
        # a probability: Wilson on the effective count, inside [0, 1], "below X" if none dropped;
        # the vector engine draws every microbatch independently, so its trials count in the bound
        "drop_rate_ci": metric_estimate([r["drop_rate"] for r in records], rate=True,
                                        trials=cfg.microbatches if sel.name == "vector" else None,
                                        fixed=fixed.get("drop_rate"), name="drop_rate"),
        "predicted_drop_rate": _reference(cfg, "drop_rate"),
        "exact_applies": bool(snapshot_exact(cfg)),
        "workers": cfg.workers,
        "mean_quality": est["mean_quality"].mean,
        "mean_quality_ci": est["mean_quality"],
        "predicted_mean_quality": _reference(cfg, "mean_quality"),
        "goodput": mean("goodput"),
        "goodput_ci": est["goodput"] if "goodput" in reported else None,
        "latency_mean": mean("latency_mean"),
        "latency_p50": mean("latency_p50"),
        "latency_p99": mean("latency_p99"),
        "mean_skipped": est["mean_skipped"].mean,
        "skipped_distribution": [est[f"skipped_{k}"].mean for k in range(cfg.skip_budget + 1)],
        "failovers_per_microbatch": mean("failovers_per_microbatch"),
        "worker_time": est["worker_time"].mean * replications if "worker_time" in reported else None,
        "simulated_time": est["simulated_time"].mean * replications if timed else None,
        "microbatches": cfg.microbatches,
        "replications": replications,
        "stage_crossings_per_second": crossings / busy if timed and busy > 0 else None,
        "microbatches_per_second": n_total / busy if busy > 0 else None,
        "wall_time": wall,
        "seed": seed,
    }
    if cfg.queueing:  # the server model: the latency includes queueing, with its interval
        from .. import engines
        from .queueing import stage_waits_reference

        p = engines.predictions("pipeline", cfg, ["latency_mean"])["latency_mean"]
        # per station, what a queueing peer (Ciw) reports: waits in queue and busy fractions
        L = cfg.stages
        waits = [est[f"wait_stage{j}"] for j in range(L)]
        busy = [est[f"utilisation_stage{j}"] for j in range(L)]
        out.update(routing=cfg.routing, latency_mean_ci=est["latency_mean"],
                   predicted_latency_mean=p["value"],
                   latency_reference=(f"{p['reference']}: {p['note']}" if p["value"] is not None
                                      else p["note"]),
                   utilisation=est["utilisation"].mean, utilisation_ci=est["utilisation"],
                   wait_stage=[e.mean for e in waits], wait_stage_ci=waits,
                   predicted_wait_stage=stage_waits_reference(cfg),
                   utilisation_stage=[e.mean for e in busy], utilisation_stage_ci=busy)
    return out


@dataclass(frozen=True)
class Comparison:
    """One quantity, simulated against its exact (or reference) value.

    Attributes
    ----------
    quantity : str
    exact : float or None
        The reference value (None: no reference).
    estimate : Estimate
        The simulated estimate with its interval.
    exact_applies : bool
        Whether ``exact`` is the exact answer (else a reference only).
    agrees : bool or None
        Whether the interval holds the exact value; None without an exact value.
    unit : str
        The quantity's unit (times are in the unit of ``stage_time`` and ``1 / rate``).
    """

    quantity: str
    exact: float | None
    estimate: Estimate
    exact_applies: bool
    agrees: bool | None
    unit: str = ""


def comparison_rows(record: dict[str, Any]) -> list[Comparison]:
    """The rows of a :func:`simulate` record: drop rate, mean quality, goodput.

    Returns
    -------
    list of Comparison
        Quantities the engine did not estimate are left out.
    """
    out = []
    for label, key, exact, unit in [
            ("drop rate", "drop_rate", record["predicted_drop_rate"], "fraction of microbatches"),
            ("mean quality (delivered)", "mean_quality", record["predicted_mean_quality"],
             "quality kept per delivered microbatch"),
            ("goodput", "goodput", None, "quality delivered per time unit")]:
        e = record[key + "_ci"]
        if e is None:
            continue
        ok = record["exact_applies"]
        agrees = None if exact is None or not ok else bool(e.contains(exact))
        out.append(Comparison(label, exact, e, bool(ok), agrees, unit))
    if record.get("latency_mean_ci") is not None:  # queueing: exact only where a reference is
        exact = record["predicted_latency_mean"]
        e = record["latency_mean_ci"]
        out.append(Comparison("latency mean", exact, e, exact is not None,
                              None if exact is None else bool(e.contains(exact)), "time units"))
    return out


def importance_applies(cfg: PipelineConfig) -> None:
    """Raise :class:`~sim.errors.ConfigError` unless importance sampling answers ``cfg``.

    The estimator computes the snapshot drop probability, which is the
    pipeline's long-run drop rate exactly where the vector engine applies.
    """
    from .. import engines

    verdict = engines.engines(RARE_FAMILY)[0].applies(cfg)
    if not verdict:
        raise ConfigError("method", f"simulate for this configuration ({verdict.reason})",
                          "importance")


def estimate_importance(cfg: PipelineConfig, *, seed: int, samples: int | None = None,
                        target_rel_error: float | None = None) -> dict[str, Any]:
    """Importance-sampling estimate of the drop probability against the exact value.

    One code path, :func:`sim.pipeline.rare.importance_from_config`: the
    study's placement uses exponential tilting of the stage outages; a
    placement with shared domains uses
    :func:`sim.pipeline.rare.stratified_placement_probability`.

    Parameters
    ----------
    cfg : PipelineConfig
        A snapshot configuration (see :func:`importance_applies`).
    seed : int
        Root seed; the draws come from ``Streams(seed).rng("importance")``.
    samples : int, optional
        Draws to make (default 10 000), or with ``target_rel_error`` the most
        draws (default 10**7).
    target_rel_error : float, optional
        Stop once the relative standard error is at most this.

    Returns
    -------
    dict
        ``method`` ("importance"), ``drop_rate``, ``drop_rate_ci`` (95%,
        ``[low, high]``), ``predicted_drop_rate`` (exact, or None where the
        placement is too wide for exact enumeration), ``agrees`` (the exact
        value lies in the interval, None without it), ``rel_error``,
        ``standard_error``, ``effective_sample_size``, ``samples``,
        ``enumerated``, ``hits``, ``estimator``, ``tilt``, ``naive_samples``,
        ``target_rel_error``, ``workers``, ``wall_time``, ``seed``.

    Raises
    ------
    ConfigError
        When the configuration is not a snapshot one, or for a bad budget.
    """
    from .rare import importance_from_config

    importance_applies(cfg)
    if samples is not None:
        check_int("samples", samples, low=2)
    if target_rel_error is not None:
        check_positive("target_rel_error", target_rel_error)
    rng = Streams(seed).rng("importance")
    # the estimator's libraries (imported on first use elsewhere), loaded before the clock starts:
    # wall_time is the estimate's, not the import's
    from scipy import optimize, stats  # noqa: F401

    t0 = time.perf_counter()
    res = importance_from_config(cfg, rng=rng, samples=samples,
                                 target_rel_error=target_rel_error)
    estimator = ("exponential tilting of the stage outages" if cfg.study_placement else
                 "stratified by the number of domains out per class (small strata "
                 "summed exactly, the others sampled)")
    wall = time.perf_counter() - t0
    exact = _reference(cfg, "drop_rate")
    return {
        "method": "importance",
        "estimator": estimator,
        "engine": None,
        "engine_reason": "importance sampling of the snapshot drop probability",
        "drop_rate": res.estimate,
        "drop_rate_ci": [res.low, res.high],
        "predicted_drop_rate": exact,
        "agrees": None if exact is None else bool(res.contains(exact)),
        "rel_error": res.rel_error,
        "standard_error": res.se,
        "effective_sample_size": res.ess,
        "samples": res.samples,
        "enumerated": res.enumerated,
        "hits": res.hits,
        "tilt": res.tilt,
        "naive_samples": res.naive_samples,
        "target_rel_error": target_rel_error,
        "workers": cfg.workers,
        "wall_time": wall,
        "seed": seed,
    }


def estimate_drop_rate(cfg: PipelineConfig, *, replications: int, seed: int,
                       executor: Any = "serial", workers: int | None = None) -> dict[str, Any]:
    """The drop rate by simulation, or by importance sampling when too rare to resolve.

    Simulates ``replications`` replications (``engine="des"``); when the exact
    drop rate times the microbatches simulated is below
    :data:`RESOLVABLE_DROPS` (fewer drops expected than plain simulation
    resolves), the estimate is replaced by importance sampling to a 5%
    relative error from stream ``verify-importance``.

    Parameters
    ----------
    cfg : PipelineConfig
        A snapshot configuration with an exact drop rate.
    replications, seed, executor, workers
        As for :func:`simulate`.

    Returns
    -------
    dict
        ``estimate`` (an Estimate), ``method`` ("simulation" or "importance
        sampling"), ``exact``, ``agrees``, ``microbatches`` (simulated),
        ``mean_quality`` and ``mean_quality_ci`` (from the simulation).
    """
    from .rare import importance_from_config

    sim = simulate(cfg, replications=replications, seed=seed, executor=executor,
                   workers=workers)
    est = sim["drop_rate_ci"]
    method = "simulation"
    exact = sim["predicted_drop_rate"]
    if exact * cfg.microbatches * replications < RESOLVABLE_DROPS:
        res = importance_from_config(cfg, rng=Streams(seed).rng("verify-importance"),
                                     target_rel_error=0.05)
        est = Estimate(res.estimate, res.se, res.low, res.high, res.samples)
        method = "importance sampling"
    return {
        "estimate": est,
        "method": method,
        "exact": exact,
        # one replication has no interval: no verdict rather than "agrees"
        "agrees": (bool(est.contains(exact)) if math.isfinite(est.low) and math.isfinite(est.high)
                   else None),
        "microbatches": cfg.microbatches * replications,
        "mean_quality": sim["mean_quality"],
        "mean_quality_ci": sim["mean_quality_ci"],
    }
