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

from . import analytic, engines
from .adversaries import make_adversary, make_defence
from .errors import ConfigError
from .failures import (
    ClusterConfig,
    Domain,
    FailureModel,
    GroupMonitor,
    Transition,
    Worker,
    failures_model,
    make_distribution,
    read_trace,
)
from .gossip import GossipConfig, gossip_model
from .pipeline import PipelineConfig, pipeline_model, run_pipeline
from .pipeline.rare import importance_drop_probability
from .pipeline.vector import simulate_stylised
from .results import Estimate, mean_ci, summarize
from .rng import Streams
from .runner import SweepResult, replicate, run_experiment, run_one, sweep
from .traces import TraceReplay, fit_trace, load_trace, trace_stats

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
