"""Study A: a pipeline of unreliable stages with replicas, failover and skipping.

A microbatch crosses ``L`` stages in order; stage ``j`` is held by ``r_j``
replica workers in failure domains; an out stage is skipped while the skip
budget lasts, else the microbatch waits or is dropped.

Modules
-------
config
    :class:`PipelineConfig` (values only; the placement in its value form). The
    quality kept after ``k`` skips, :class:`SkipPenalty`, is a value of
    :mod:`sim.analytic.penalty` (the closed forms and the training pipeline
    share it), re-exported here.
des
    The discrete-event engine (:class:`Pipeline`, :func:`run_pipeline`;
    :func:`des_pipeline_model` runs it as a model).
vector
    The snapshot engine (vectorised Monte Carlo, any placement).
rare
    The importance-sampling engine (rare snapshot drop probabilities).
engines
    The engines and exact references, registered with :mod:`sim.engines`
    (family ``"pipeline"``), the snapshot rule, and :func:`pipeline_model`:
    one replication on the fastest engine that answers a config (as
    ``dtsim pipeline --engine auto``), saying which it used.
compare
    Simulated against exact: the comparison records and the rare-event rule.
design
    The fewest replicas for a target, or the cost-optimal design, and its check.
queueing
    The queueing engine (``queueing=True``: replicas are servers with queues,
    the training system's server model) and its exact reference (M/M/c
    stations in tandem).
"""

from .compare import (  # noqa: I001  (after .engines: the references are registered)
    RESOLVABLE_DROPS,
    Comparison,
    comparison_rows,
    estimate_drop_rate,
    estimate_importance,
    importance_applies,
    predicted_drop_rate,
    simulate,
)
from .config import (
    ARRIVALS,
    DEFAULT_REPLICAS,
    STAGE_TIME_DISTRIBUTIONS,
    PipelineConfig,
    layout_hop_times,
    on_layout,
    quality_table,
    stage_time_laws,
)
from .des import Pipeline, PipelineRun, run_pipeline
from .engines import (
    DESEngine,
    ImportanceEngine,
    VectorEngine,
    choose_engine,
    des_pipeline_model,
    pipeline_model,
    snapshot_exact,
    snapshot_of,
    snapshot_predictions,
    vector_pipeline_model,
)
from .markov import MarkovEngine, markov_run, snapshot_out_stages
from .queueing import QueueingEngine, QueueingPipeline, TandemReference, queueing_model
from ..analytic.penalty import PENALTIES, SkipPenalty

__all__ = [
    "ARRIVALS",
    "PENALTIES",
    "STAGE_TIME_DISTRIBUTIONS",
    "DEFAULT_REPLICAS",
    "PipelineConfig",
    "SkipPenalty",
    "quality_table",
    "stage_time_laws",
    "layout_hop_times",
    "on_layout",
    "Pipeline",
    "PipelineRun",
    "run_pipeline",
    "pipeline_model",
    "des_pipeline_model",
    "DESEngine",
    "VectorEngine",
    "ImportanceEngine",
    "MarkovEngine",
    "markov_run",
    "snapshot_out_stages",
    "choose_engine",
    "snapshot_exact",
    "snapshot_of",
    "snapshot_predictions",
    "vector_pipeline_model",
    "RESOLVABLE_DROPS",
    "Comparison",
    "comparison_rows",
    "simulate",
    "estimate_importance",
    "estimate_drop_rate",
    "importance_applies",
    "predicted_drop_rate",
    "QueueingEngine",
    "QueueingPipeline",
    "TandemReference",
    "queueing_model",
]
