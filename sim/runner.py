"""Independent replications over any :mod:`concurrent.futures` executor.

A *model* is a top-level function ``model(config, streams) -> dict`` that
builds and runs one replication and returns flat metrics. :func:`run_one` is a
pure, picklable function of ``(model, config, seed, replication)``, so any
executor can run it: serially, on a local process pool, or on a Dask cluster
through ``distributed.Client.get_executor()``. Replication ``k`` always gets
``Streams(seed).replication(k)``, so results are identical whatever runs them.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from .errors import ConfigError, check, check_int
from .rng import Streams

__all__ = ["Model", "run_one", "replicate", "make_executor", "EXECUTORS"]

Model = Callable[[Any, Streams], Mapping[str, Any]]
EXECUTORS = ("serial", "local")


def run_one(model: Model, config: Any, seed: int, replication: int) -> dict[str, Any]:
    """Run replication ``replication`` of ``model`` and return its flat record.

    A model that raises is recorded with its error (``error`` holds the
    exception's one-line summary) rather than propagated, so one bad point
    never kills a sweep. :class:`~sim.errors.ConfigError` is re-raised: bad
    input is the caller's to report.
    """
    t0 = time.perf_counter()
    record: dict[str, Any] = {"replication": int(replication), "seed": int(seed)}
    try:
        metrics = model(config, Streams(seed).replication(replication))
        record.update(metrics)
        record["error"] = ""
    except ConfigError:
        raise
    except Exception as exc:  # recorded, not raised: see docstring
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = traceback.format_exc(limit=5)
    record["wall_time"] = time.perf_counter() - t0
    return record


def make_executor(executor: str | Executor | None, workers: int | None = None) -> Executor | None:
    """Return an executor for a name (``None`` means run serially in-process)."""
    if executor is None or isinstance(executor, Executor):
        return executor
    check(executor in EXECUTORS, "executor", "one of " + ", ".join(EXECUTORS), executor)
    if executor == "serial":
        return None
    n = (os.cpu_count() or 1) if workers is None else check_int("workers", workers, low=1)
    return ProcessPoolExecutor(max_workers=n)


def replicate(
    model: Model,
    config: Any,
    *,
    replications: int,
    seed: int,
    executor: str | Executor | None = "serial",
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """Run ``replications`` independent replications of ``model`` on ``config``.

    Parameters
    ----------
    model : callable
        Top-level (picklable) function ``model(config, streams) -> dict``.
    config : object
        A frozen, picklable configuration.
    replications : int
        Number of independent replications (>= 1).
    seed : int
        Root seed; replication ``k`` uses ``Streams(seed).replication(k)``.
    executor : {"serial", "local"} or Executor
        ``"local"`` is a process pool with ``workers`` processes (default: all
        cores); an Executor instance (for example a Dask client's
        ``get_executor()``) is used as given and not shut down.
    workers : int, optional
        Pool size for ``"local"``.

    Returns
    -------
    list of dict
        One record per replication, in replication order.
    """
    check_int("replications", replications, low=1)
    Streams(seed)  # validates the seed
    ex = make_executor(executor, workers)
    if ex is None:
        return [run_one(model, config, seed, k) for k in range(replications)]
    own = not isinstance(executor, Executor)
    try:
        futures = [ex.submit(run_one, model, config, seed, k) for k in range(replications)]
        return [f.result() for f in futures]
    finally:
        if own:
            ex.shutdown(cancel_futures=True)
