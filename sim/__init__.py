"""dtsim: a discrete-event simulator of decentralised training on unreliable workers.

The public API in one screen:

Seeds and errors
    Streams, ConfigError
Failure model
    FailureModel, Domain, Worker, Transition, GroupMonitor, ClusterConfig,
    failures_model, make_distribution, read_trace
Real preemption traces (:mod:`sim.traces`)
    TraceReplay, load_trace, trace_stats, fit_trace
Study A: pipelines of unreliable stages
    PipelineConfig, pipeline_model, run_pipeline, simulate_stylised,
    importance_drop_probability
Study B: gossip averaging
    GossipConfig, gossip_model, make_adversary, make_defence
Replications, sweeps and results
    replicate, run_one, sweep, SweepResult, run_experiment, Estimate, mean_ci,
    summarize
Which engine or closed form answers a config
    the module :mod:`sim.engines` (``engines.select(family, config)``,
    ``engines.predictions(family, config)``)
The training pipeline and gossip training
    :mod:`sim.training` (``TrainingConfig``, ``training_model``) and
    :mod:`sim.learning` (``LearningConfig``, objectives, ``LocalSGD``), imported
    on demand
Exact references
    the module :mod:`sim.analytic` (``from sim import analytic``)
"""

import importlib
from typing import Any

from .errors import ConfigError
from .rng import Streams

# The rest of the public API is imported when first used (PEP 562), so that
# ``import sim`` -- and every ``dtsim`` command that stops at bad input --
# does not pay for scipy, networkx and every engine up front.
_LAZY: dict[str, tuple[str, str | None]] = {
    "analytic": (".analytic", None),
    "engines": (".engines", None),
    "make_adversary": (".adversaries", "make_adversary"),
    "make_defence": (".adversaries", "make_defence"),
    **{name: (".failures", name) for name in (
        "ClusterConfig", "Domain", "FailureModel", "GroupMonitor", "Transition", "Worker",
        "failures_model", "make_distribution", "read_trace")},
    "GossipConfig": (".gossip", "GossipConfig"),
    "gossip_model": (".gossip", "gossip_model"),
    "PipelineConfig": (".pipeline", "PipelineConfig"),
    "pipeline_model": (".pipeline", "pipeline_model"),
    "run_pipeline": (".pipeline", "run_pipeline"),
    "importance_drop_probability": (".pipeline.rare", "importance_drop_probability"),
    "simulate_stylised": (".pipeline.vector", "simulate_stylised"),
    "Estimate": (".results", "Estimate"),
    "mean_ci": (".results", "mean_ci"),
    "summarize": (".results", "summarize"),
    **{name: (".runner", name) for name in (
        "SweepResult", "replicate", "run_experiment", "run_one", "sweep")},
    **{name: (".traces", name) for name in ("TraceReplay", "fit_trace", "load_trace",
                                            "trace_stats")},
}


def __getattr__(name: str) -> Any:
    """Import a public name of the package on first use (see ``_LAZY``)."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "engines",
    "ConfigError",
    "Streams",
    "FailureModel",
    "Domain",
    "Worker",
    "Transition",
    "GroupMonitor",
    "ClusterConfig",
    "failures_model",
    "make_distribution",
    "read_trace",
    "TraceReplay",
    "load_trace",
    "trace_stats",
    "fit_trace",
    "PipelineConfig",
    "pipeline_model",
    "run_pipeline",
    "simulate_stylised",
    "importance_drop_probability",
    "GossipConfig",
    "gossip_model",
    "make_adversary",
    "make_defence",
    "replicate",
    "run_one",
    "sweep",
    "SweepResult",
    "run_experiment",
    "analytic",
    "Estimate",
    "mean_ci",
    "summarize",
]
