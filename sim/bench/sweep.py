"""``dtsim bench`` part ``sweep`` (g): :func:`sim.runner.sweep` on local workers and a Dask
cluster, beside a plain ``ProcessPoolExecutor`` and plain Dask submission of the same tasks."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..errors import check, check_int
from .pipeline import pipeline_bench_config

__all__ = ["sweep_task_config", "bench_sweep"]


# --------------------------------------------------------------------------- (g) sweeps


def sweep_task_config(microbatches: int) -> Any:
    """The equal task of the sweep benchmark (a pipeline DES replication)."""
    return pipeline_bench_config(microbatches)


def _plain_run(ex: Any, model: Callable, cfg: Any, tasks: int, seed: int) -> float:
    from ..runner import run_one

    t0 = time.perf_counter()
    futures = [ex.submit(run_one, model, cfg, seed, k) for k in range(tasks)]
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def bench_sweep(tasks: int = 20, workers: int = 2, microbatches: int = 2500,
                dask: bool = True, repeats: int = 2) -> dict[str, float]:
    """Sweep speedup over serial: the runner vs a plain executor, locally and on Dask.

    Parameters
    ----------
    tasks : int
        Equal tasks (replications of one pipeline config).
    workers : int
        Worker processes.
    microbatches : int
        Size of each task (see :func:`sweep_task_config`).
    dask : bool
        Also measure a ``workers``-worker Dask ``LocalCluster`` (started
        before the clock starts).
    repeats : int
        Runner and plain runs alternate this many times; the best of each counts.

    Returns
    -------
    dict
        ``sweep_serial_s``, ``sweep_task_s``, ``sweep_local_s``, ``sweep_plain_pool_s``,
        ``sweep_local_speedup``, ``sweep_plain_pool_speedup``,
        ``sweep_local_vs_plain`` (runner speedup / plain speedup), and with Dask
        ``sweep_dask_s``, ``sweep_plain_dask_s``, ``sweep_dask_speedup``,
        ``sweep_plain_dask_speedup``, ``sweep_dask_vs_plain``. Local pools are
        created inside the timed region for both (equal start-up cost).
    """
    from ..pipeline import des_pipeline_model as pipeline_model
    from ..runner import sweep

    tasks = check_int("tasks", tasks, low=1)
    workers = check_int("workers", workers, low=1)
    cfg = sweep_task_config(microbatches)
    out: dict[str, float] = {"sweep_tasks": float(tasks), "sweep_workers": float(workers)}

    def runner_time(executor: Any) -> float:
        t0 = time.perf_counter()
        res = sweep(pipeline_model, cfg, replications=tasks, seed=5, executor=executor)
        dt = time.perf_counter() - t0
        check(res.errors == 0, "sweep", "free of task errors", res.errors)
        return dt

    serial = runner_time("serial")
    out["sweep_serial_s"] = serial
    out["sweep_task_s"] = serial / tasks

    def local_runner() -> float:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as ex:
            runner_time(ex)
        return time.perf_counter() - t0

    def local_plain() -> float:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as ex:
            _plain_run(ex, pipeline_model, cfg, tasks, 5)
        return time.perf_counter() - t0

    plain_times, local_times = [], []
    for _ in range(repeats):  # interleaved, best of each: the least disturbed by other load
        plain_times.append(local_plain())
        local_times.append(local_runner())
    local, plain = min(local_times), min(plain_times)
    out.update(sweep_local_s=local, sweep_plain_pool_s=plain,
               sweep_local_speedup=serial / local, sweep_plain_pool_speedup=serial / plain,
               sweep_local_vs_plain=plain / local)
    if dask:
        try:
            from ..runner import DaskExecutor
            dex = DaskExecutor(workers=workers)
        except Exception as exc:  # dask missing or failing: say so, do not fake it
            out["sweep_dask_error"] = f"{type(exc).__name__}: {exc}"  # type: ignore[assignment]
            return out
        try:
            _plain_run(dex, pipeline_model, sweep_task_config(20), 2 * workers, 0)  # warm up
            d_plain, d_runner = [], []
            for _ in range(repeats):
                d_plain.append(_plain_run(dex, pipeline_model, cfg, tasks, 5))
                d_runner.append(runner_time(dex))
        finally:
            dex.shutdown()
        dr, dp = min(d_runner), min(d_plain)
        out.update(sweep_dask_s=dr, sweep_plain_dask_s=dp,
                   sweep_dask_speedup=serial / dr, sweep_plain_dask_speedup=serial / dp,
                   sweep_dask_vs_plain=dp / dr)
    return out
