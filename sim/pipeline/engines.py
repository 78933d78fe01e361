"""The pipeline family's engines and exact references, registered with :mod:`sim.engines`.

Engines (family ``"pipeline"``, fastest first under ``--engine auto``):

``vector``
    :class:`VectorEngine`, the snapshot Monte Carlo of :mod:`sim.pipeline.vector`:
    exactly where the DES's long-run drop rate, skip distribution and mean
    quality equal the snapshot model's.
``des``
    :class:`DESEngine`, the discrete-event simulation of :mod:`sim.pipeline.des`:
    every configuration.

The rare-event estimator is family ``"pipeline_rare"``
(:class:`ImportanceEngine`): it answers one metric, the snapshot drop
probability, with its own interval from independent draws rather than from
replications, so it is never an ``auto`` choice for a replication; it applies
where the vector engine does.

References (family ``"pipeline"``), exact only for a snapshot crossing (zero
crossing time and ``max_wait = 0``, see :func:`snapshot_exact`):

``binomial``
    ``P(Bin(L, q) > s)`` for the study's placement with equal replicas.
``placement_exact``
    The exact conditional law for any other placement (shared domains;
    :func:`sim.analytic.exact_drop_probability`), where the enumeration is
    feasible.
``quality_closed_form``
    Mean quality of delivered microbatches, quality mass per microbatch and
    the design cost ``L r / E[quality(K); K <= s]`` (study's placement, equal
    replicas).

:func:`snapshot_predictions` evaluates them on the snapshot of a config (the
same placement with the crossing made instant): the value a timed
simulation is compared with as a reference rather than as an exact answer.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from .. import engines
from ..engines import Applies, Engine, Reference, Selection
from ..errors import ConfigError
from ..rng import Streams
from .config import PipelineConfig
from .des import des_pipeline_model
from .vector import StylisedResult, simulate_placement, simulate_stylised

__all__ = [
    "FAMILY",
    "RARE_FAMILY",
    "DESEngine",
    "VectorEngine",
    "ImportanceEngine",
    "BinomialDrop",
    "PlacementExactDrop",
    "QualityClosedForm",
    "snapshot_exact",
    "snapshot_of",
    "snapshot_predictions",
    "choose_engine",
    "pipeline_model",
    "des_pipeline_model",
    "vector_pipeline_model",
]

FAMILY = "pipeline"
RARE_FAMILY = "pipeline_rare"

#: What the snapshot model answers (the vector engine's metrics; ``skipped_k`` too).
SNAPSHOT_METRICS = ("microbatches", "drop_rate", "delivered_rate", "mean_quality",
                    "quality_mass", "mean_skipped", "stage_crossings")
#: Why the no-queueing engines refuse a config with ``queueing`` on.
QUEUEING_REFUSAL = "queueing is on (replicas are servers: the queueing engine answers it)"
#: Metrics that need simulated time (the DES's alone).
TIMED_METRICS = ("goodput", "throughput", "latency_mean", "latency_p50", "latency_p99",
                 "failovers_per_microbatch", "waits_per_microbatch", "simulated_time",
                 "workers", "worker_time")


# --------------------------------------------------------------------------- engines


class DESEngine(Engine):
    """The discrete-event simulation: answers every pipeline configuration."""

    name = "des"
    family = FAMILY
    speed = 100
    metrics = SNAPSHOT_METRICS + TIMED_METRICS
    #: The reason printed when this engine is asked for by name.
    requested = "asked for the discrete-event simulation"
    records = True

    def applies(self, config: PipelineConfig) -> Applies:
        """Without queueing, always: the DES models timing, failover, waiting and time correlation."""
        if config.queueing:
            return Applies(False, QUEUEING_REFUSAL)
        return Applies(True, "the discrete-event simulation answers every configuration")

    def run(self, config: PipelineConfig, streams: Streams, *,
            recorder: Any = None) -> dict[str, float]:
        """One replication (:func:`sim.pipeline.des_pipeline_model`)."""
        config.check_des_budget()
        return des_pipeline_model(config, streams, recorder=recorder)


class VectorEngine(Engine):
    """The snapshot Monte Carlo, exactly where it answers the DES's question.

    Notes
    -----
    Required: zero compute time and zero transfer time (so the crossing is a
    snapshot and no failure can happen during service, hence no failover),
    ``max_wait = 0`` (an out stage past the budget drops at once), and
    arrivals chosen independently of the failure process (fixed or Poisson),
    so each microbatch sees the stationary state and the drop *rate* agrees
    with any up/down duration law, except deterministic durations with fixed
    arrivals (both periodic: the arrivals may sample one phase of the failure
    cycle forever, so a run's long-run rate need not be the snapshot
    average; refused). The time correlation of successive microbatches
    (burstiness of drops) is not reproduced; latency, goodput and failovers
    are not answered.
    """

    name = "vector"
    family = FAMILY
    speed = 10
    metrics = SNAPSHOT_METRICS

    def applies(self, config: PipelineConfig) -> Applies:
        """Whether the snapshot model answers ``config``, with the first assumption that fails."""
        if config.queueing:
            return Applies(False, QUEUEING_REFUSAL)
        if not config.instant:
            return Applies(False, "stage_time, latency or transfer_size is nonzero "
                                  "(the crossing takes time)")
        if config.max_wait != 0:
            return Applies(False, "max_wait > 0 (a microbatch may wait for a recovery)")
        if config.failure_trace is not None:
            return Applies(False, "failures are replayed from a trace (not stationary)")
        if config.arrival not in ("fixed", "poisson"):
            return Applies(False, f"arrival {config.arrival!r} may depend on the failure process")
        if config.failure_distribution == "deterministic" and config.arrival == "fixed":
            return Applies(False, "deterministic up/down durations with fixed arrivals (arrivals "
                                  "can lock to the failure phase, so one run's rate is not the "
                                  "snapshot average)")
        return Applies(True, "snapshot model: zero crossing time, max_wait 0, stationary "
                             "independent outages, arrivals independent of failures (drop rate "
                             "matches; burstiness in time does not)")

    def run(self, config: PipelineConfig, streams: Streams) -> dict[str, float]:
        """One replication: ``config.microbatches`` independent snapshots from stream ``vector``."""
        return vector_pipeline_model(config, streams)


def pipeline_model(config: PipelineConfig, streams: Streams, *, engine: str = "auto") -> dict[str, Any]:
    """One replication on the fastest engine that answers ``config``, as ``dtsim pipeline`` chooses.

    A model for :func:`sim.runner.replicate`. The engine comes from
    :func:`choose_engine` (:func:`sim.engines.select`): under ``auto`` the
    fastest registered engine whose verdict applies (the vector engine for a
    snapshot config, in milliseconds where the DES takes about a minute), or
    the one named with ``engine`` (bind it with :func:`functools.partial`).

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams
    engine : str
        ``"auto"`` or the name of a pipeline engine (``des``, ``vector``, ...).

    Returns
    -------
    dict
        The chosen engine's metrics (see :func:`des_pipeline_model`,
        :func:`vector_pipeline_model`; an engine that does not answer a metric
        leaves it out) and ``engine``, its name.

    Raises
    ------
    ConfigError
        For an unknown engine or a named one that does not answer ``config``.
    """
    sel, _ = choose_engine(config, engine)
    out = dict(sel.engine.run(config, streams))
    out["engine"] = sel.name
    return out


def vector_pipeline_model(config: PipelineConfig, streams: Streams) -> dict[str, float]:
    """One replication of the snapshot model for a pipeline config (the vector engine).

    A model for :func:`sim.runner.replicate`: draws ``config.microbatches``
    independent snapshots from the stream ``vector`` and returns the metrics of
    :func:`sim.pipeline.pipeline_model` that the snapshot model answers:
    ``microbatches``, ``drop_rate``, ``delivered_rate``, ``mean_quality``,
    ``quality_mass``, ``mean_skipped``, ``skipped_k`` (``k = 0..s``) and
    ``stage_crossings``.

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams

    Returns
    -------
    dict

    Raises
    ------
    ConfigError
        Where :class:`VectorEngine` does not apply.
    """
    choose_engine(config, VectorEngine.name)
    rng = streams.rng("vector")
    quality = np.asarray(config.quality, dtype=float)
    if config.study_placement:
        res = simulate_stylised(config.stages, config.replicas, config.skip_budget,
                                config.availability, config.domain_outage,
                                microbatches=config.microbatches, rng=rng)
    else:
        pl = config.domain_placement
        res = simulate_placement(pl.replica_domains, pl.domain_outage, config.availability,
                                 config.skip_budget, microbatches=config.microbatches, rng=rng)
    res = StylisedResult(res.microbatches, res.out_histogram, res.skip_budget, quality)
    return res.metrics()


class ImportanceEngine(Engine):
    """Importance sampling of the snapshot drop probability (rare drops).

    Applies exactly where :class:`VectorEngine` does: the estimate is the
    snapshot drop probability, which is the pipeline's long-run drop rate
    there and nowhere else.
    """

    name = "importance"
    family = RARE_FAMILY
    speed = 10
    metrics = ("drop_rate",)

    def applies(self, config: PipelineConfig) -> Applies:
        """The vector engine's verdict."""
        return VectorEngine().applies(config)

    def run(self, config: PipelineConfig, streams: Streams) -> dict[str, float]:
        """The estimate from stream ``importance`` (10 000 draws)."""
        from .rare import importance_from_config

        res = importance_from_config(config, rng=streams.rng("importance"))
        return {"drop_rate": res.estimate, "drop_rate_low": res.low, "drop_rate_high": res.high}


def choose_engine(config: PipelineConfig, engine: str = "auto") -> tuple[Selection, str]:
    """The engine that runs ``config`` and the one-line reason the CLI prints.

    Parameters
    ----------
    config : PipelineConfig
    engine : str
        ``"auto"`` or an engine name of family ``"pipeline"``.

    Returns
    -------
    (Selection, str)
        The selection of :func:`sim.engines.select`, and its reason: under
        ``auto`` the fastest engine's verdict (why it was, or was not, used);
        for a named engine its ``requested`` text, else its own verdict.

    Raises
    ------
    ConfigError
        For an unknown engine (as :func:`sim.engines.select`), or a named
        engine that does not apply: ``'engine' must be des for this
        configuration (<its reason>): 'vector'``.
    """
    for e in engines.engines(FAMILY):
        if e.name != engine:
            continue
        verdict = e.applies(config)
        if not verdict:
            fit = [x.name for x in engines.engines(FAMILY) if x.name != engine and x.applies(config)]
            raise ConfigError("engine", f"{' or '.join(fit) or 'another engine'} for this "
                              f"configuration ({verdict.reason})", engine)
    sel = engines.select(FAMILY, config, engine)
    if sel.name == DESEngine.name:
        config.check_des_budget()  # before any work: a run past it would not end in hours
    if engine == "auto":
        return sel, "auto: " + sel.considered[0][2]
    reason = getattr(type(sel.engine), "requested", None) or sel.reason.removeprefix("requested: ")
    return sel, reason


# --------------------------------------------------------------------------- references


def snapshot_exact(config: PipelineConfig) -> Applies:
    """Whether the snapshot law is the DES's law for ``config`` (zero crossing time, no waiting).

    Returns
    -------
    Applies
    """
    if config.failure_trace is not None:
        return Applies(False, "failures replayed from a trace have no closed form")
    if config.instant and config.max_wait == 0:
        return Applies(True, "zero crossing time and max_wait 0: each microbatch sees a snapshot")
    return Applies(False, "snapshot reference; timing changes the law")


def snapshot_of(config: PipelineConfig) -> PipelineConfig:
    """The same pipeline and placement with an instant crossing and no waiting.

    Returns
    -------
    PipelineConfig
        ``config`` itself when it is already a snapshot configuration.
    """
    if snapshot_exact(config):
        return config
    arrival = "fixed" if config.arrival == "back_to_back" else config.arrival
    return dataclasses.replace(config, stage_time=0.0, latency=0.0, transfer_size=0.0,
                               max_wait=0.0, arrival=arrival)


def _binomial_case(config: PipelineConfig) -> bool:
    return config.study_placement and len(set(config.replicas)) == 1  # type: ignore[arg-type]


def _study_applies(config: PipelineConfig, law: str) -> Applies:
    """A closed form of Study A: exact for a snapshot crossing, study's placement, equal replicas."""
    exact = snapshot_exact(config)
    if not exact:
        return exact
    if not _binomial_case(config):
        return Applies(False, "a placement is given or replicas differ between stages")
    return Applies(True, law)


@functools.lru_cache(maxsize=128)
def _placement_drop(value: Any, availability: float, skip_budget: int) -> tuple[float | None, str]:
    """Exact drop probability of a placement value, or None and why it is out of reach."""
    from topologies.placement import from_value

    from .. import analytic

    pl = from_value(value)
    try:
        return float(analytic.exact_drop_probability(
            [list(s) for s in pl.replica_domains], dict(pl.domain_outage), availability,
            skip_budget)), "exact law conditioning on the shared failure domains"
    except ConfigError as exc:
        return None, str(exc)


def _placement_value(config: PipelineConfig) -> Any:
    return config.placement if config.placement is not None else config.domain_placement.value()


class BinomialDrop(Reference):
    """``P(Bin(L, q) > s)``, ``q = rho + (1 - rho)(1 - a)**r`` (study's placement, equal replicas)."""

    name = "binomial"
    family = FAMILY
    metrics = ("drop_rate",)

    def applies(self, config: PipelineConfig) -> Applies:
        """Exact for a snapshot crossing on the study's placement with equal replicas."""
        return _study_applies(config, "P(Bin(L, q) > s), q = rho + (1 - rho)(1 - a)^r")

    def predict(self, config: PipelineConfig) -> dict[str, float]:
        """``{"drop_rate": P(Bin(L, q) > s)}`` (:func:`sim.analytic.drop_probability`)."""
        from .. import analytic

        return {"drop_rate": float(analytic.drop_probability(
            config.stages, config.replicas[0], config.skip_budget,  # type: ignore[index]
            config.availability, config.domain_outage))}


class PlacementExactDrop(Reference):
    """The exact drop probability of any placement (:func:`sim.analytic.exact_drop_probability`)."""

    name = "placement_exact"
    family = FAMILY
    metrics = ("drop_rate",)

    def applies(self, config: PipelineConfig) -> Applies:
        """Exact for a snapshot crossing on any other placement, where enumeration is feasible."""
        exact = snapshot_exact(config)
        if not exact:
            return exact
        if _binomial_case(config):
            return Applies(False, "the binomial law answers the study's placement")
        value, note = _placement_drop(_placement_value(config), config.availability,
                                      config.skip_budget)
        return Applies(value is not None, note)

    def predict(self, config: PipelineConfig) -> dict[str, float]:
        """``{"drop_rate": P(#out stages > s)}``."""
        value, _ = _placement_drop(_placement_value(config), config.availability,
                                   config.skip_budget)
        return {"drop_rate": value}  # type: ignore[dict-item]


class QualityClosedForm(Reference):
    """Mean quality of delivered microbatches, quality per microbatch and design cost (study's placement)."""

    name = "quality_closed_form"
    family = FAMILY
    metrics = ("mean_quality", "quality_mass", "cost")

    def applies(self, config: PipelineConfig) -> Applies:
        """Exact for a snapshot crossing on the study's placement with equal replicas."""
        return _study_applies(config, "E[quality(K) | K <= s], K ~ Bin(L, q); "
                                      "cost L r / E[quality(K); K <= s]")

    def predict(self, config: PipelineConfig) -> dict[str, float]:
        """:func:`sim.analytic.mean_quality_delivered`, :func:`~sim.analytic.quality_mass`, :func:`~sim.analytic.design_cost`.

        ``cost`` is workers per unit of quality-weighted goodput, ``workers / quality_mass``
        in the simulation's terms.
        """
        from .. import analytic

        q = analytic.stage_outage(config.availability, config.replicas[0],  # type: ignore[index]
                                  config.domain_outage)
        args = (config.stages, q, config.skip_budget, config.skip_penalty)
        return {
            "mean_quality": float(analytic.mean_quality_delivered(*args, penalty=config.penalty)),
            "quality_mass": float(analytic.quality_mass(*args, penalty=config.penalty)),
            "cost": float(analytic.design_cost(
                config.stages, config.replicas[0], config.skip_budget,  # type: ignore[index]
                config.availability, config.domain_outage, config.skip_penalty,
                penalty=config.penalty)),
        }


def snapshot_predictions(config: PipelineConfig, metrics: Any = None) -> dict[str, dict[str, Any]]:
    """The references' values for the snapshot of ``config`` (:func:`snapshot_of`).

    Returns
    -------
    dict
        As :func:`sim.engines.predictions`, for ``snapshot_of(config)``.
    """
    return engines.predictions(FAMILY, snapshot_of(config), metrics)


for _obj in (DESEngine(), VectorEngine(), ImportanceEngine(), BinomialDrop(),
             PlacementExactDrop(), QualityClosedForm()):
    engines.register(_obj)
