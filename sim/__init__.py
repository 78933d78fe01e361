"""dtsim: a discrete-event simulator of decentralised training on unreliable workers.

The public API in one screen:

Seeds and errors
    Streams, ConfigError
Failure model
    FailureModel, Domain, Worker, Transition, GroupMonitor, ClusterConfig,
    failures_model, make_distribution, read_trace
Replications and results
    replicate, run_one, Estimate, mean_ci, summarize
"""

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
from .results import Estimate, mean_ci, summarize
from .rng import Streams
from .runner import replicate, run_one

__version__ = "0.1.0"

__all__ = [
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
    "replicate",
    "run_one",
    "Estimate",
    "mean_ci",
    "summarize",
]
