"""Replications and parameter sweeps over any :mod:`concurrent.futures` executor.

The package, one concern per module:

``tasks``
    points, tasks, streams and the one task function (:func:`run_batch`)
    executors run; the one record format.
``executors``
    serial, local process pool and Dask; pool-crash recovery, a task that
    kills its process recorded as failed, a lost scheduler reported.
``identity``
    stable hashes of configs, points and code (including the user's own
    modules an experiment imports).
``store``
    the append-only results folder (records, manifest, summary).
``sweep``
    :func:`sweep` (points x replications, stored and resumed) and
    :func:`replicate` (the sweep with no factors).
``experiments``
    experiment files (one format, studies included) and :func:`run_experiment`.

Replication ``k`` of a point always draws the same streams, so results are
bit-identical on every executor, worker count and batch size.
"""

from .executors import (
    CRASH_RETRIES,
    EXECUTORS,
    DaskExecutor,
    ExecutorLost,
    make_executor,
    open_executor,
)
from .experiments import (
    Experiment,
    ExperimentModel,
    check_results_folder,
    default_out,
    exec_module,
    find_studies,
    load_experiment,
    load_module,
    run_experiment,
    study_marker,
)
from .identity import (
    canonical,
    code_version,
    config_hash,
    experiment_code_hash,
    key_words,
    point_key,
    sources_hash,
    user_modules,
)
from .store import Store, read_manifest, read_records
from .sweep import SweepResult, code_change, replicate, sweep
from .tasks import (
    META_COLUMNS,
    RESERVED,
    RUN_KEYS,
    Model,
    Task,
    expand_points,
    make_tasks,
    run_batch,
    run_one,
    run_task,
    task_streams,
)

__all__ = [
    "Model", "EXECUTORS", "CRASH_RETRIES", "META_COLUMNS", "RESERVED", "RUN_KEYS",
    "run_one", "run_task", "run_batch", "replicate", "make_executor", "open_executor",
    "DaskExecutor", "ExecutorLost", "canonical", "point_key", "key_words", "config_hash",
    "expand_points", "Task", "make_tasks", "task_streams", "SweepResult", "sweep", "code_change",
    "Experiment", "ExperimentModel", "exec_module", "load_experiment", "load_module",
    "code_version", "sources_hash", "user_modules", "experiment_code_hash", "run_experiment", "check_results_folder",
    "default_out", "study_marker", "find_studies", "Store", "read_manifest", "read_records",
]
