"""Replications and parameter sweeps over any :mod:`concurrent.futures` executor.

Replications
------------
A *model* is a top-level function ``model(config, streams) -> dict`` that
builds and runs one replication and returns flat metrics. :func:`run_one` is a
pure, picklable function of ``(model, config, seed, replication)``, so any
executor can run it: serially, on a local process pool, or on a Dask cluster.
Replication ``k`` always gets ``Streams(seed).replication(k)``, so results are
identical whatever runs them. :func:`replicate` runs ``M`` replications.

Sweeps
------
:func:`sweep` runs a model over *points* (a base config with some fields
replaced) times replications. Points come from ``factors`` (a grid: a dict
``field -> list of values``, expanded as a cartesian product with the first
factor varying slowest) or from ``points`` (an explicit list of dicts). Each
point becomes ``dataclasses.replace(base, **params)`` (or ``{**base, **params}``
for a dict base), validated on the driver before anything runs, so bad input
raises :class:`~sim.errors.ConfigError` at once.

Every task (point ``i``, replication ``k``) has its own streams, addressed by
the point's identity rather than its position::

    Streams(seed).child("point", *key_words(point_key(params))).replication(k)

where :func:`point_key` is a stable hash of the point's parameters; a point with
no parameters (a sweep of the base config alone) uses
``Streams(seed).replication(k)``, exactly like :func:`replicate`. Adding,
removing or reordering points therefore never changes another point's draws,
and results are bit-identical on every executor and worker count.

Tasks may be *batched* (``batch`` replications of one point per executor call)
so that executor overhead stays small when a replication takes microseconds.

With ``out`` set, every finished task is appended to a durable results store
(:mod:`sim.store`) as soon as it completes; re-running the same sweep resumes:
tasks already in the store (same per-point config hash, which covers the
config, the seed and the code version) are not recomputed, and points whose
config changed are recomputed (their stale records are dropped, never mixed).

Experiment files
----------------
An experiment is a Python file ``experiments/NAME.py`` a user copies and
edits. It defines, at module level:

``NAME`` (str)
    The experiment's name; it owns its output folder (default ``out/NAME``,
    ``out/NAME_quick`` with ``--quick``).
``BASE``
    The base config: a frozen dataclass instance (or a dict).
``FACTORS`` (dict ``field -> list``) or ``POINTS`` (list of dicts)
    What varies. ``FACTORS = {}`` runs the base config alone.
``REPLICATIONS`` (int)
    Independent replications per point.
``model(config, streams) -> dict``
    A top-level function returning flat (scalar) metrics.
``QUICK`` (dict, optional)
    Overrides for ``--quick``: any of ``"BASE"`` (a config, or a dict of field
    overrides), ``"FACTORS"``, ``"POINTS"``, ``"REPLICATIONS"``, ``"BATCH"``.
``SEED`` (int, optional, default 0), ``BATCH`` (int, optional, default 1)
``analyse(results, out_dir)`` (optional)
    Draws figures and tables from a :class:`SweepResult` (the per-task
    ``records`` and the per-point ``summary()``); ``dtsim plot OUTDIR`` calls it
    again from the stored results without re-running anything.

and ends with::

    if __name__ == "__main__":
        sys.exit(sim.runner.main_for(__file__))

so that ``python experiments/NAME.py [options]`` is the same as ``dtsim run
experiments/NAME.py [options]``. The experiment's source travels with each
task (see :class:`ExperimentModel`), so Dask workers need ``sim`` installed but
not the experiment file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import pickle
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass, replace
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .errors import ConfigError, check, check_choice, check_int
from .results import Estimate, mean_ci, summary_rows, to_cell
from .rng import Streams

__all__ = [
    "Model",
    "EXECUTORS",
    "run_one",
    "replicate",
    "make_executor",
    "open_executor",
    "DaskExecutor",
    "canonical",
    "point_key",
    "key_words",
    "config_hash",
    "expand_points",
    "Task",
    "make_tasks",
    "task_streams",
    "run_batch",
    "SweepResult",
    "sweep",
    "Experiment",
    "ExperimentModel",
    "load_experiment",
    "load_module",
    "code_version",
    "experiment_code_hash",
    "run_experiment",
    "default_out",
    "main_for",
]

Model = Callable[[Any, Streams], Mapping[str, Any]]
EXECUTORS = ("serial", "local", "dask")

#: Columns every task record carries besides the point parameters and metrics.
META_COLUMNS = ("point", "replication", "seed", "point_key", "config_hash")
TAIL_COLUMNS = ("wall_time", "error")
RESERVED = frozenset(META_COLUMNS + TAIL_COLUMNS + ("traceback",))


# --------------------------------------------------------------------------- replications


def run_one(model: Model, config: Any, seed: int, replication: int) -> dict[str, Any]:
    """Run replication ``replication`` of ``model`` and return its flat record.

    Parameters
    ----------
    model : callable
        ``model(config, streams) -> dict``.
    config : object
        The configuration passed to ``model``.
    seed : int
        Root seed.
    replication : int
        Replication index; the model gets ``Streams(seed).replication(replication)``.

    Returns
    -------
    dict
        ``replication``, ``seed``, the metrics, ``error`` and ``wall_time``.

    Notes
    -----
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
        record["error"] = _one_line(exc)
        record["traceback"] = traceback.format_exc(limit=5)
    record["wall_time"] = time.perf_counter() - t0
    return record


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class DaskExecutor(Executor):
    """A :class:`concurrent.futures.Executor` on a Dask cluster it owns.

    Parameters
    ----------
    scheduler : str, optional
        Address of an existing scheduler (``tcp://host:8786``). Without it a
        ``LocalCluster`` of ``workers`` single-threaded worker processes is
        started and closed with the executor.
    workers : int, optional
        Workers of the local cluster (default: all cores).
    timeout : float
        Seconds to wait for the scheduler before giving up.
    retries : int
        Times a task is resubmitted when its worker dies or it fails to run.

    Raises
    ------
    ConfigError
        When dask.distributed is not installed or the scheduler is unreachable.
    """

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        *,
        timeout: float = 5.0,
        retries: int = 2,
    ) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - dask is a dev dependency
            raise ConfigError("executor", "installed to use dask (pip install 'dtsim[dask]')", "dask") from None
        self.cluster = None
        if scheduler:
            try:
                self.client = Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
            except Exception:
                raise ConfigError("scheduler", "a reachable Dask scheduler address", scheduler) from None
        else:
            import logging

            n = (os.cpu_count() or 1) if workers is None else check_int("workers", workers, low=1)
            self.cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True,
                dashboard_address=":0", silence_logs=logging.ERROR,
            )
            self.client = Client(self.cluster, set_as_default=False)
        self._ex = self.client.get_executor(pure=False, retries=retries)

    def submit(self, fn, /, *args, **kwargs) -> Future:  # noqa: D102
        return self._ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:  # noqa: D102
        try:
            self._ex.shutdown(wait=wait and not cancel_futures)
        finally:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


def make_executor(
    executor: str | Executor | None,
    workers: int | None = None,
    *,
    scheduler: str | None = None,
) -> Executor | None:
    """Return an executor for a name (``None`` means run serially in-process).

    Parameters
    ----------
    executor : {"serial", "local", "dask"}, Executor or None
        An Executor instance is returned as given.
    workers : int, optional
        Processes of the local pool or workers of a local Dask cluster
        (default: all cores).
    scheduler : str, optional
        Dask scheduler address (only with ``"dask"``).

    Returns
    -------
    Executor or None
        The caller owns a created executor and must shut it down.
    """
    if executor is None or isinstance(executor, Executor):
        return executor
    check_choice("executor", executor, EXECUTORS)
    if workers is not None:
        check_int("workers", workers, low=1)
    if scheduler and executor != "dask":
        raise ConfigError("scheduler", "used with the dask executor only, not with", executor)
    if executor == "serial":
        return None
    if executor == "dask":
        return DaskExecutor(scheduler, workers)
    return ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                               initializer=_die_with_parent)


def _die_with_parent() -> None:
    """Pool-worker initializer: on Linux, exit when the driver dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - best effort
        pass


@contextmanager
def open_executor(
    executor: str | Executor | None,
    workers: int | None = None,
    *,
    scheduler: str | None = None,
) -> Iterator[Executor | None]:
    """Context manager around :func:`make_executor` that shuts down what it created."""
    ex = make_executor(executor, workers, scheduler=scheduler)
    own = ex is not None and not isinstance(executor, Executor)
    try:
        yield ex
    except BaseException:
        if own:
            ex.shutdown(wait=False, cancel_futures=True)
            own = False
        raise
    finally:
        if own:
            ex.shutdown()


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
    executor : {"serial", "local", "dask"} or Executor
        ``"local"`` is a process pool with ``workers`` processes (default: all
        cores); ``"dask"`` a local Dask cluster; an Executor instance (for
        example a Dask client's ``get_executor()``) is used as given and not
        shut down.
    workers : int, optional
        Pool size for ``"local"`` and ``"dask"``.

    Returns
    -------
    list of dict
        One record per replication, in replication order.
    """
    check_int("replications", replications, low=1)
    Streams(seed)  # validates the seed
    with open_executor(executor, workers) as ex:
        if ex is None:
            return [run_one(model, config, seed, k) for k in range(replications)]
        futures = [ex.submit(run_one, model, config, seed, k) for k in range(replications)]
        return [f.result() for f in futures]


# --------------------------------------------------------------------------- identities


def _canon(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        out = {"__type__": type(obj).__qualname__}
        out.update({f.name: _canon(getattr(obj, f.name)) for f in fields(obj)})
        return out
    if isinstance(obj, Mapping):
        return {str(k): _canon(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canon(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_canon(v) for v in obj), key=repr)
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return {"__float__": repr(float(obj))}
    if isinstance(obj, np.ndarray):
        return {"__array__": obj.dtype.str, "shape": list(obj.shape), "data": _canon(obj.tolist())}
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, Enum):
        return f"{type(obj).__qualname__}.{obj.name}"
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '')}:{obj.__qualname__}"
    return repr(obj)


def canonical(obj: Any) -> str:
    """A stable text form of a config or parameter dict, for hashing.

    Dataclasses (by class name and fields), mappings (key order ignored),
    sequences, numbers (``1`` and ``1.0`` differ), strings, arrays, paths and
    enums are handled; anything else falls back to ``repr``, which must then be
    stable across processes.
    """
    return json.dumps(_canon(obj), sort_keys=True, separators=(",", ":"))


def _hash(text: str, nbytes: int = 8) -> str:
    return hashlib.blake2b(text.encode(), digest_size=nbytes).hexdigest()


def point_key(params: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit identity of a point's parameters (the stream address)."""
    return _hash(canonical(dict(params)))


def key_words(key: str) -> tuple[int, int]:
    """The two 32-bit integers of a :func:`point_key`, used as spawn-key entries."""
    return int(key[:8], 16), int(key[8:16], 16)


def config_hash(config: Any, seed: int, code: str = "") -> str:
    """Hash of everything a task's result depends on: config, seed and code version."""
    return _hash(canonical({"config": config, "seed": int(seed), "code": code}))


# --------------------------------------------------------------------------- points and tasks


def _base_fields(base: Any) -> set[str] | None:
    if is_dataclass(base) and not isinstance(base, type):
        return {f.name for f in fields(base)}
    if isinstance(base, Mapping):
        return None
    raise ConfigError("base", "a dataclass instance or a dict", type(base).__name__)


def expand_points(
    factors: Mapping[str, Sequence[Any]] | None = None,
    points: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Points of a sweep: the grid of ``factors`` or the explicit ``points``.

    Parameters
    ----------
    factors : dict, optional
        ``name -> non-empty list of values``; the cartesian product in dict
        order, first factor varying slowest. ``{}`` gives one empty point.
    points : list of dict, optional
        Explicit points (mutually exclusive with ``factors``).

    Returns
    -------
    list of dict
    """
    if factors is not None and points is not None:
        raise ConfigError("points", "given without factors (give one of them), not", "both")
    if points is not None:
        check(isinstance(points, Sequence) and len(points) > 0, "points", "a non-empty list of dicts", points)
        out = []
        for p in points:
            check(isinstance(p, Mapping), "points", "a non-empty list of dicts", p)
            out.append({str(k): v for k, v in p.items()})
        return out
    factors = {} if factors is None else factors
    check(isinstance(factors, Mapping), "factors", "a dict of name -> list of values", factors)
    names = list(factors)
    values = []
    for name in names:
        v = factors[name]
        ok = isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
        check(ok, f"factors[{name!r}]", "a non-empty list of values", v)
        values.append(list(v))
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _make_config(base: Any, params: Mapping[str, Any]) -> Any:
    known = _base_fields(base)
    for name in params:
        check(name not in RESERVED, "factors", "names other than " + ", ".join(sorted(RESERVED)), name)
        if known is not None:
            check(name in known, "factors", f"fields of {type(base).__name__}", name)
    if known is None:
        return {**base, **params}
    return replace(base, **params)


@dataclass(frozen=True)
class Task:
    """One unit of work: replication ``replication`` of point ``point``."""

    point: int
    replication: int
    seed: int
    params: dict[str, Any]
    point_key: str
    config_hash: str

    @property
    def key(self) -> tuple[str, int]:
        """Identity in the results store: ``(config_hash, replication)``."""
        return (self.config_hash, self.replication)


def task_streams(seed: int, params: Mapping[str, Any], replication: int) -> Streams:
    """The streams of replication ``replication`` at the point ``params``.

    ``Streams(seed).replication(k)`` for the empty point (as :func:`replicate`),
    else ``Streams(seed).child("point", *key_words(point_key(params))).replication(k)``.
    """
    if not params:
        return Streams(seed).replication(replication)
    return Streams(seed).child("point", *key_words(point_key(params))).replication(replication)


def make_tasks(
    base: Any,
    point_params: Sequence[Mapping[str, Any]],
    *,
    replications: int,
    seed: int,
    code: str = "",
) -> tuple[list[Any], list[Task]]:
    """Configs of the points and their tasks (points x replications, point-major).

    Raises :class:`~sim.errors.ConfigError` when a point is not a valid config.
    """
    check_int("replications", replications, low=1)
    Streams(seed)
    configs, tasks = [], []
    for i, params in enumerate(point_params):
        cfg = _make_config(base, params)
        configs.append(cfg)
        pk, ch = point_key(params), config_hash(cfg, seed, code)
        for k in range(replications):
            tasks.append(Task(i, k, int(seed), dict(params), pk, ch))
    return configs, tasks


def _run_task(model: Model, config: Any, task: Task) -> dict[str, Any]:
    record: dict[str, Any] = {
        "point": task.point, "replication": task.replication, "seed": task.seed,
        "point_key": task.point_key, "config_hash": task.config_hash,
    }
    for k, v in task.params.items():
        record[k] = to_cell(v)
    t0 = time.perf_counter()
    try:
        metrics = model(config, task_streams(task.seed, task.params, task.replication))
        if not isinstance(metrics, Mapping):
            raise TypeError(f"model returned {type(metrics).__name__}, not a dict of metrics")
        clash = sorted(set(map(str, metrics)) & (RESERVED | set(task.params)))
        if clash:
            raise ValueError(f"model returned reserved metric names {clash}")
        for k, v in metrics.items():
            record[str(k)] = to_cell(v)
        record["error"] = ""
    except Exception as exc:  # recorded, one bad task never kills a sweep
        for k in list(record):
            if k not in META_COLUMNS and k not in task.params:
                del record[k]
        record["error"] = _one_line(exc)
        record["traceback"] = traceback.format_exc(limit=8)
    record["wall_time"] = time.perf_counter() - t0
    return record


def run_batch(model: Model, payload: bytes) -> list[dict[str, Any]]:
    """Run a batch of tasks of one point; the function executors run.

    Parameters
    ----------
    model : callable or ExperimentModel
        The model (an :class:`ExperimentModel` is resolved first, which loads
        the experiment's classes before the payload is unpickled).
    payload : bytes
        ``pickle.dumps((config, tasks))``.

    Returns
    -------
    list of dict
        One record per task, in order.
    """
    fn = model.resolve() if isinstance(model, ExperimentModel) else model
    config, tasks = pickle.loads(payload)
    return [_run_task(fn, config, t) for t in tasks]


# --------------------------------------------------------------------------- results


@dataclass
class SweepResult:
    """What a sweep produced.

    Attributes
    ----------
    name : str
        Experiment name.
    points : list of dict
        The parameters of each point, in point order.
    factors : list of str
        Names of the varied parameters.
    records : list of dict
        One flat record per task, sorted by point then replication.
    out : Path or None
        The results folder (when stored).
    ran, reused, errors : int
        Tasks run now, tasks taken from the store, tasks that raised.
    interrupted : bool
        True when the sweep stopped early (``fail_fast``).
    stale : int
        Stored records dropped because their config, seed or code changed
        (or they had failed and were retried).
    """

    name: str
    points: list[dict[str, Any]]
    factors: list[str]
    records: list[dict[str, Any]]
    out: Path | None = None
    ran: int = 0
    reused: int = 0
    errors: int = 0
    interrupted: bool = False
    stale: int = 0
    confidence: float = 0.95
    _metrics: list[str] | None = field(default=None, repr=False)

    @property
    def metrics(self) -> list[str]:
        """Names of the numeric metrics (in first-seen order)."""
        if self._metrics is None:
            skip = RESERVED | set(self.factors)
            names: list[str] = []
            for r in self.records:
                if r.get("error"):
                    continue
                for k, v in r.items():
                    if k not in skip and k not in names and _is_number(v):
                        names.append(k)
            self._metrics = names
        return self._metrics

    def summary(self, metrics: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """One row per point: parameters, counts, and ``m_mean, m_se, m_low, m_high`` per metric ``m``."""
        return summary_rows(
            self.records, self.points, metrics=list(metrics or self.metrics),
            confidence=self.confidence,
        )

    def estimates(self, point: int) -> dict[str, Estimate]:
        """Estimates (mean with CI across replications) of every metric at one point."""
        ok = self._ok_records(point)
        return {m: mean_ci([r[m] for r in ok if _is_number(r.get(m))], self.confidence)
                for m in self.metrics}

    def point_records(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Each point's parameters with the records of its tasks that did not raise.

        Points where every task raised are skipped.
        """
        for i, params in enumerate(self.points):
            ok = self._ok_records(i)
            if ok:
                yield params, ok

    def _ok_records(self, point: int) -> list[dict[str, Any]]:
        return [r for r in self.records if r["point"] == point and not r.get("error")]

    def failed(self) -> list[dict[str, Any]]:
        """Records of the tasks that raised."""
        return [r for r in self.records if r.get("error")]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _batches(tasks: Sequence[Task], batch: int) -> list[list[Task]]:
    out: list[list[Task]] = []
    for t in tasks:
        if out and len(out[-1]) < batch and out[-1][0].point == t.point:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def _progress(total: int, show: bool | None, desc: str):
    from tqdm import tqdm

    if show is None:
        show = sys.stderr.isatty()
    return tqdm(total=total, disable=not show or total == 0, unit="task", desc=desc,
                file=sys.stderr, dynamic_ncols=True, leave=False)


def sweep(
    model: Model,
    base: Any,
    *,
    factors: Mapping[str, Sequence[Any]] | None = None,
    points: Sequence[Mapping[str, Any]] | None = None,
    replications: int,
    seed: int = 0,
    executor: str | Executor | None = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    out: str | Path | None = None,
    name: str = "sweep",
    code: str = "",
    info: Mapping[str, Any] | None = None,
    fail_fast: bool = False,
    progress: bool | None = False,
    batch: int = 1,
) -> SweepResult:
    """Run ``model`` over points x replications on an executor.

    Parameters
    ----------
    model : callable
        Top-level ``model(config, streams) -> dict`` (or an :class:`ExperimentModel`).
    base : dataclass instance or dict
        The base config; each point replaces some of its fields.
    factors, points
        The grid or the explicit points (see :func:`expand_points`).
    replications : int
        Replications per point.
    seed : int
        Root seed (see the module docstring for the stream of each task).
    executor : {"serial", "local", "dask"} or Executor
        Where tasks run; results are identical on all of them.
    workers : int, optional
        Processes (local) or workers (local Dask cluster); default all cores.
    scheduler : str, optional
        Address of an existing Dask scheduler (with ``executor="dask"``).
    out : path, optional
        Results folder; tasks are stored as they finish and a re-run resumes.
    name : str
        Experiment name, checked against the folder's manifest.
    code : str
        Code version; part of each point's config hash.
    info : dict, optional
        Extra manifest entries (for example the experiment file).
    fail_fast : bool
        Stop at the first task that raises.
    progress : bool or None
        Show a progress bar (None: only when stderr is a terminal).
    batch : int
        Replications of one point run per executor call.

    Returns
    -------
    SweepResult
    """
    from .store import Store

    check_int("batch", batch, low=1)
    params = expand_points(factors, points)
    factor_names = list(dict.fromkeys(k for p in params for k in p))
    configs, tasks = make_tasks(base, params, replications=replications, seed=seed, code=code)
    # Validate the executor choice before touching the store.
    if not (executor is None or isinstance(executor, Executor)):
        check_choice("executor", executor, EXECUTORS)

    store = None
    done: dict[tuple[str, int], dict[str, Any]] = {}
    if out is not None:
        store = Store.open(out, name=name, code=code, create=True)
        store.write_manifest(params, tasks, seed=seed, replications=replications, info=info)
        done = store.reconcile(tasks)
    pending = [t for t in tasks if t.key not in done]
    reused = len(tasks) - len(pending)

    fresh: dict[tuple[str, int], dict[str, Any]] = {}
    interrupted = False
    n_err = 0
    bar = _progress(len(pending), progress, name)

    def accept(records: list[dict[str, Any]]) -> bool:
        nonlocal n_err
        if store is not None:
            store.append(records)
        stop = False
        for r in records:
            tb = r.pop("traceback", None)
            if r["error"]:
                n_err += 1
                stop = stop or fail_fast
                if store is not None and tb:
                    store.log_error(r, tb)
            fresh[(r["config_hash"], r["replication"])] = r
        bar.update(len(records))
        return stop

    try:
        batches = _batches(pending, batch)
        if batches:
            with open_executor(executor, workers, scheduler=scheduler) as ex:
                interrupted = _execute(model, configs, batches, ex, accept)
    except KeyboardInterrupt:
        # Every finished task is already on disk; leave a matching summary.
        if store is not None:
            _finish(store, name, params, factor_names, tasks, done, fresh)
        raise
    except BaseException:
        if store is not None:
            store.close()
        raise
    finally:
        bar.close()

    result = _finish(store, name, params, factor_names, tasks, done, fresh)
    result.ran, result.reused, result.interrupted = len(fresh), reused, interrupted
    result.errors = len(result.failed())
    result.stale = store.dropped if store is not None else 0
    return result


def _execute(
    model: Model,
    configs: Sequence[Any],
    batches: list[list[Task]],
    ex: Executor | None,
    accept: Callable[[list[dict[str, Any]]], bool],
) -> bool:
    """Run the batches; returns True when stopped early by ``accept``."""
    payloads = [pickle.dumps((configs[b[0].point], b)) for b in batches]
    if ex is None:
        for p in payloads:
            if accept(run_batch(model, p)):
                return True
        return False
    todo = dict(enumerate(payloads))
    current, owned, attempts = ex, None, 0
    try:
        while todo:
            futures = {current.submit(run_batch, model, p): i for i, p in todo.items()}
            try:
                while futures:
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for f in finished:
                        i = futures.pop(f)
                        records = f.result()
                        del todo[i]
                        if accept(records):
                            for g in futures:
                                g.cancel()
                            return True
            except BrokenProcessPool:
                # A pool worker died (killed, out of memory): start a fresh pool
                # and resubmit what did not finish, twice at most.
                attempts += 1
                if attempts > 2:
                    raise
                n = current._max_workers  # type: ignore[attr-defined]
                if owned is not None:
                    owned.shutdown(wait=False, cancel_futures=True)
                current = owned = ProcessPoolExecutor(max_workers=n, initializer=_die_with_parent)
            except BaseException:
                for g in futures:
                    g.cancel()
                raise
    finally:
        if owned is not None:
            owned.shutdown(wait=False, cancel_futures=True)
    return False


def _finish(store, name, params, factor_names, tasks, done, fresh) -> SweepResult:
    records = []
    for t in tasks:
        r = fresh.get(t.key) or done.get(t.key)
        if r is not None:
            records.append(r)
    if store is not None:
        records = store.normalise(records)
        result = SweepResult(name, params, factor_names, records, out=store.path)
        store.write_summary(result)
        store.close()
        return result
    return SweepResult(name, params, factor_names, records)


# --------------------------------------------------------------------------- experiments


class ExperimentModel:
    """Picklable reference to a model defined in an experiment file.

    Carries the file's source, so a worker (a spawned process or a remote Dask
    worker) can load the module under the same name before it unpickles any
    config class the module defines.
    """

    def __init__(self, module_name: str, path: str, source: str, attr: str = "model") -> None:
        self.module_name = module_name
        self.path = path
        self.source = source
        self.attr = attr

    def resolve(self) -> Model:
        """The model function (loading the experiment module if needed)."""
        mod = sys.modules.get(self.module_name)
        if mod is None:
            mod = _exec_module(self.module_name, self.path, self.source)
        return getattr(mod, self.attr)

    def __call__(self, config: Any, streams: Streams) -> Mapping[str, Any]:
        return self.resolve()(config, streams)

    def __repr__(self) -> str:
        return f"ExperimentModel({self.path!r}, {self.attr!r})"


def _exec_module(module_name: str, path: str, source: str) -> ModuleType:
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    mod.__file__ = path
    sys.modules[module_name] = mod
    try:
        exec(compile(source, path, "exec"), mod.__dict__)  # noqa: S102
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return mod


def load_module(path: str | Path, *, prefix: str = "dtsim_experiment") -> ModuleType:
    """Import a Python file by path under a name derived from its content.

    Raises
    ------
    ConfigError
        When the file does not exist or fails to import.
    """
    p = Path(path)
    check(p.is_file() and p.suffix == ".py", "experiment", "an existing .py file", str(path))
    source = p.read_text()
    stem = "".join(c if c.isalnum() else "_" for c in p.stem)
    name = f"{prefix}_{stem}_{_hash(source, 6)}"
    if name in sys.modules:
        return sys.modules[name]
    try:
        return _exec_module(name, str(p.resolve()), source)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError("experiment", f"importable ({_one_line(exc)})", str(path)) from None


#: Top-level names of an experiment file that act only through the config, the
#: task list or the figures, so they are left out of its code hash.
PARAMETER_NAMES = frozenset(
    {"NAME", "BASE", "FACTORS", "POINTS", "REPLICATIONS", "QUICK", "SEED", "BATCH", "analyse"}
)
#: Sources that only present results; editing them does not invalidate stored results.
_PRESENTATION = ("commands", "cli.py", "__main__.py", "plotting.py")


def experiment_code_hash(source: str) -> str:
    """Hash of an experiment file's code, parameters excluded.

    The file's syntax tree (so comments and formatting do not count) without
    the docstring, the ``if __name__ == "__main__"`` block, ``analyse`` and the
    top-level assignments of :data:`PARAMETER_NAMES`: those reach the results
    only through each point's config, which is hashed separately. Changing a
    factor value therefore recomputes only the affected points, while editing
    the model recomputes them all.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _hash(source)
    body = []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id in PARAMETER_NAMES for t in targets):
                continue
        if isinstance(node, ast.FunctionDef) and node.name in PARAMETER_NAMES:
            continue
        if isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
            continue
        body.append(node)
    return _hash("\n".join(ast.dump(n) for n in body))


def _sources_hash() -> str:
    h = hashlib.blake2b(digest_size=8)
    sim_root = Path(__file__).resolve().parent
    roots = [sim_root, sim_root.parent / "topologies"]
    for root in roots:
        if not root.is_dir():
            continue
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root)
            if root == sim_root and rel.parts[0] in _PRESENTATION:
                continue
            h.update(f"{root.name}/{rel.as_posix()}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def code_version(path: str | Path | None = None) -> dict[str, str]:
    """The code a sweep's results depend on.

    Returns
    -------
    dict
        ``package`` (the dtsim version), ``sim`` (hash of the ``sim`` and
        ``topologies`` sources, presentation modules -- CLI, plotting --
        excluded) and, with ``path``, ``experiment`` (:func:`experiment_code_hash`
        of the file).

    Notes
    -----
    The environment variable ``DTSIM_CODE_PIN``, when set, replaces the
    sources hash: for tests, or to keep stored results across edits known not
    to change them (at your own risk).
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        pkg = version("dtsim")
    except PackageNotFoundError:  # pragma: no cover
        pkg = "unknown"
    out = {"package": pkg, "sim": os.environ.get("DTSIM_CODE_PIN") or _sources_hash()}
    if path is not None:
        out["experiment"] = experiment_code_hash(Path(path).read_text())
    return out


@dataclass(frozen=True)
class Experiment:
    """An experiment file, loaded (see the module docstring for what it defines)."""

    name: str
    path: Path
    base: Any
    factors: Mapping[str, Sequence[Any]] | None
    points: Sequence[Mapping[str, Any]] | None
    replications: int
    model: ExperimentModel
    seed: int = 0
    batch: int = 1
    quick: bool = False
    analyse: Callable[[SweepResult, Path], None] | None = None
    module: ModuleType | None = field(default=None, repr=False, compare=False)

    def point_list(self) -> list[dict[str, Any]]:
        """The points, expanded."""
        return expand_points(self.factors, self.points)


_QUICK_KEYS = ("BASE", "FACTORS", "POINTS", "REPLICATIONS", "BATCH", "SEED")


def load_experiment(path: str | Path, *, quick: bool = False) -> Experiment:
    """Load and check an experiment file.

    Parameters
    ----------
    path : path
        ``experiments/NAME.py``.
    quick : bool
        Apply the file's ``QUICK`` overrides.

    Returns
    -------
    Experiment

    Raises
    ------
    ConfigError
        When the file is missing, fails to import or lacks the definitions.
    """
    mod = load_module(path)
    need = ["NAME", "BASE", "REPLICATIONS", "model"]
    missing = [n for n in need if not hasattr(mod, n)]
    if not (hasattr(mod, "FACTORS") or hasattr(mod, "POINTS")):
        missing.append("FACTORS or POINTS")
    check(not missing, "experiment", "a file defining " + ", ".join(missing), str(path))
    check(callable(mod.model), "experiment", "a file defining model(config, streams)", str(path))
    check(not (hasattr(mod, "FACTORS") and hasattr(mod, "POINTS")), "experiment",
          "a file defining FACTORS or POINTS, not both", str(path))
    settings = {
        "BASE": mod.BASE,
        "FACTORS": getattr(mod, "FACTORS", None),
        "POINTS": getattr(mod, "POINTS", None),
        "REPLICATIONS": mod.REPLICATIONS,
        "BATCH": getattr(mod, "BATCH", 1),
        "SEED": getattr(mod, "SEED", 0),
    }
    if quick:
        q = getattr(mod, "QUICK", {}) or {}
        check(isinstance(q, Mapping), "QUICK", "a dict of overrides", q)
        for k, v in q.items():
            check(k in _QUICK_KEYS, "QUICK", "keyed by " + ", ".join(_QUICK_KEYS), k)
            if k == "BASE" and isinstance(v, Mapping) and not isinstance(settings["BASE"], Mapping):
                v = replace(settings["BASE"], **v)
            if k == "FACTORS":
                settings["POINTS"] = None
            if k == "POINTS":
                settings["FACTORS"] = None
            settings[k] = v
    name = mod.NAME
    check(isinstance(name, str) and name.strip() != "", "NAME", "a non-empty string", name)
    analyse = getattr(mod, "analyse", None)
    p = Path(mod.__file__)
    return Experiment(
        name=name, path=p, base=settings["BASE"], factors=settings["FACTORS"],
        points=settings["POINTS"],
        replications=check_int("REPLICATIONS", settings["REPLICATIONS"], low=1),
        model=ExperimentModel(mod.__name__, str(p), p.read_text() if p.is_file() else "", "model"),
        seed=settings["SEED"], batch=check_int("BATCH", settings["BATCH"], low=1),
        quick=quick, analyse=analyse if callable(analyse) else None, module=mod,
    )


def default_out(exp: Experiment) -> Path:
    """``out/NAME`` (``out/NAME_quick`` for quick runs), relative to the working directory."""
    return Path("out") / (exp.name + ("_quick" if exp.quick else ""))


def run_experiment(
    exp: Experiment | str | Path,
    *,
    quick: bool = False,
    out: str | Path | None = None,
    seed: int | None = None,
    executor: str | Executor | None = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    fail_fast: bool = False,
    progress: bool | None = None,
    batch: int | None = None,
    analyse: bool = True,
) -> SweepResult:
    """Run an experiment into its results folder, resuming, then analyse it.

    Parameters
    ----------
    exp : Experiment or path
        The experiment (a path is loaded with ``quick``).
    quick, out, seed, executor, workers, scheduler, fail_fast, progress, batch
        As for :func:`sweep`; ``seed`` and ``batch`` default to the file's.
    analyse : bool
        Call the experiment's ``analyse(results, out)`` afterwards.

    Returns
    -------
    SweepResult
    """
    if not isinstance(exp, Experiment):
        exp = load_experiment(exp, quick=quick)
    out_dir = Path(out) if out is not None else default_out(exp)
    version = code_version(exp.path)
    code = canonical(version)
    result = sweep(
        exp.model, exp.base, factors=exp.factors, points=exp.points,
        replications=exp.replications, seed=exp.seed if seed is None else seed,
        executor=executor, workers=workers, scheduler=scheduler, out=out_dir,
        name=exp.name, code=code, fail_fast=fail_fast, progress=progress,
        batch=exp.batch if batch is None else batch,
        info={"file": str(exp.path), "quick": exp.quick, "code_version": version},
    )
    if analyse and exp.analyse is not None and not result.interrupted:
        exp.analyse(result, out_dir)
    return result


def main_for(path: str | Path, argv: Sequence[str] | None = None) -> int:
    """Run the experiment file ``path`` with the ``dtsim run`` options.

    Use at the end of an experiment script::

        if __name__ == "__main__":
            sys.exit(sim.runner.main_for(__file__))
    """
    from .cli import main

    args = list(sys.argv[1:] if argv is None else argv)
    return main(["run", str(path), *args])
