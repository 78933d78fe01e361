"""Points, tasks and the one task function executors run.

A *model* is a top-level function ``model(config, streams) -> dict`` that
builds and runs one replication and returns flat metrics. A sweep's points
are a base config with some fields replaced (:func:`expand_points`,
:func:`make_tasks`); each (point, replication) is a :class:`Task`. Tasks of
one point travel in batches through :func:`run_batch`, the only function an
executor runs, which calls :func:`run_task` for each. Every record has one
format: the :data:`META_COLUMNS`, the point's parameters, the metrics, then
``wall_time`` and ``error`` (and, in memory only, ``traceback``).

Streams
-------
Task (point ``i``, replication ``k``) draws from
``Streams(seed).child("point", *key_words(point_key(params))).replication(k)``,
addressed by the point's parameters rather than its position, and a point
with no parameters from ``Streams(seed).replication(k)`` (so
:func:`~sim.runner.replicate` is the sweep with no factors).

Two keys of a point are run settings, not config fields (:data:`RUN_KEYS`):
``"replications"`` (this point's replication count, instead of the sweep's)
and ``"seed_offset"``. A point with a ``seed_offset`` draws from
``Streams(seed + seed_offset).replication(k)``: the seed arithmetic the two
study files used before they were experiment files, kept so that their tables
stay bit-identical. New experiments should not need it.
"""

from __future__ import annotations

import itertools
import math
import pickle
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from .. import progress
from ..errors import ConfigError, check, check_int, check_memory
from ..rng import Streams
from .identity import config_hash, key_words, point_key

__all__ = [
    "Model",
    "META_COLUMNS",
    "TAIL_COLUMNS",
    "RESERVED",
    "RUN_KEYS",
    "Task",
    "expand_points",
    "split_point",
    "make_tasks",
    "task_streams",
    "run_task",
    "run_batch",
    "run_one",
    "batches",
    "exception_line",
    "at_point",
]

Model = Callable[[Any, Streams], Mapping[str, Any]]

#: Columns every task record carries besides the point parameters and metrics.
META_COLUMNS = ("point", "replication", "seed", "point_key", "config_hash")
TAIL_COLUMNS = ("wall_time", "error")
RUN_KEYS = ("replications", "seed_offset")
RESERVED = frozenset(META_COLUMNS + TAIL_COLUMNS + ("traceback", "checksum"))


def exception_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


#: Bytes a finished replication's record (and its future) holds, unless the
#: config says more through a ``record_bytes`` attribute (series records do).
RECORD_BYTES = 4096
#: Bytes of one point of a sweep (its parameters and config) and of one task.
POINT_BYTES, TASK_BYTES = 2048, RECORD_BYTES + 1024


def record_bytes(config: Any) -> int:
    """Memory one replication's record of ``config`` takes (see :data:`RECORD_BYTES`)."""
    extra = getattr(config, "record_bytes", 0)
    return RECORD_BYTES + (int(extra) if isinstance(extra, (int, float)) else 0)


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
    n = math.prod(len(v) for v in values)
    check_memory("factors", f"a grid of {n} points", n * POINT_BYTES)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def split_point(point: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """A point's config parameters and its run settings (:data:`RUN_KEYS`)."""
    params = {k: v for k, v in point.items() if k not in RUN_KEYS}
    settings = {}
    for k in RUN_KEYS:
        if k in point:
            settings[k] = check_int(f"points[{k!r}]", point[k], low=1 if k == "replications" else 0)
    return params, settings


def _base_fields(base: Any) -> set[str] | None:
    if is_dataclass(base) and not isinstance(base, type):
        return {f.name for f in fields(base)}
    if isinstance(base, Mapping):
        return None
    raise ConfigError("base", "a dataclass instance or a dict", type(base).__name__)


def at_point(exc: ConfigError, point: int, params: Mapping[str, Any]) -> ConfigError:
    """``exc``, a refusal of the config of point ``point`` (``params`` its factor values), with
    the point named in its rule: ``'p' must be in [0, 1] (at point 1: p=1.5): 1.5``."""
    at = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return ConfigError(exc.name, f"{exc.rule} (at point {point}: {at})", exc.value)


def _make_config(base: Any, params: Mapping[str, Any], point: int = 0) -> Any:
    if not params:
        return base
    known = _base_fields(base)
    for name in params:
        check(name not in RESERVED, "factors", "names other than " + ", ".join(sorted(RESERVED)), name)
        if known is not None:
            check(name in known, "factors", f"fields of {type(base).__name__}", name)
    if known is None:
        return {**base, **params}
    try:
        return replace(base, **params)
    except ConfigError as exc:  # the config's own refusal of this point's values: say which
        raise at_point(exc, point, params) from None


@dataclass(frozen=True)
class Task:
    """One unit of work: replication ``replication`` of point ``point``.

    ``seed`` is the root seed of the task's streams (the sweep's seed plus the
    point's ``seed_offset``, if any); ``point_stream`` says whether the
    streams are addressed by ``point_key`` (see the module docstring).
    ``config_hash`` is empty when the sweep stores nothing.
    """

    point: int
    replication: int
    seed: int
    params: dict[str, Any]
    point_key: str
    config_hash: str
    point_stream: bool = True

    @property
    def key(self) -> tuple[int, int]:
        """Position in the sweep: ``(point, replication)``."""
        return (self.point, self.replication)


def task_streams(seed: int, params: Mapping[str, Any], replication: int,
                 point_stream: bool = True) -> Streams:
    """The streams of replication ``replication`` at the point ``params``.

    ``Streams(seed).replication(k)`` for the empty point (as
    :func:`~sim.runner.replicate`) or a point with a ``seed_offset``
    (``point_stream=False``, ``seed`` already offset), else
    ``Streams(seed).child("point", *key_words(point_key(params))).replication(k)``.
    """
    if not params or not point_stream:
        return Streams(seed).replication(replication)
    return Streams(seed).child("point", *key_words(point_key(params))).replication(replication)


def make_tasks(
    base: Any,
    point_params: Sequence[Mapping[str, Any]],
    *,
    replications: int,
    seed: int,
    code: str = "",
    identify: bool = True,
) -> tuple[list[Any], list[Task]]:
    """Configs of the points and their tasks (points x replications, point-major).

    Parameters
    ----------
    base : dataclass instance or dict
    point_params : list of dict
        Points, possibly with :data:`RUN_KEYS`.
    replications : int
        Replications of a point without its own ``"replications"``.
    seed : int
        Root seed.
    code : str
        Code version, part of each config hash.
    identify : bool
        Compute config hashes (needed to store the results); raises
        :class:`~sim.errors.ConfigError` when a config cannot be hashed.

    Returns
    -------
    configs, tasks

    Raises
    ------
    ConfigError
        When a point is not a valid config (the config's refusal, naming the point and
        its values: :func:`at_point`), or two points are the same.
    """
    check_int("replications", replications, low=1)
    check_memory("replications", replications,
                 len(point_params) * replications * (TASK_BYTES + record_bytes(base)))
    Streams(seed)
    configs, tasks = [], []
    seen: dict[tuple[str, int, bool], int] = {}
    for i, point in enumerate(point_params):
        params, settings = split_point(point)
        cfg = _make_config(base, params, i)
        configs.append(cfg)
        stream_seed = int(seed) + settings.get("seed_offset", 0)
        point_stream = "seed_offset" not in settings
        try:
            pk = point_key(params)
            ch = config_hash(cfg, stream_seed, code) if identify else ""
        except RecursionError:  # a value that contains itself (BASE["x"] = BASE)
            raise ConfigError("base", "a config of values without cycles (a value in it "
                              "contains itself, or nests thousands deep)",
                              type(cfg).__name__) from None
        ident = (ch or pk, stream_seed, point_stream)
        if identify:
            check(ident not in seen, "points", f"distinct (point {seen.get(ident)} repeats at {i})",
                  point)
            seen[ident] = i
        for k in range(settings.get("replications", replications)):
            tasks.append(Task(i, k, stream_seed, dict(params), pk, ch, point_stream))
    return configs, tasks


def run_task(model: Model, config: Any, task: Task) -> dict[str, Any]:
    """Run one task and return its record (the one record format).

    A model that raises (or calls ``sys.exit``) is recorded with its error
    (``error`` holds the exception's one-line summary, ``traceback`` the
    traceback) rather than propagated, so one bad task never kills a sweep;
    :class:`~sim.errors.ConfigError` is re-raised: bad input is the caller's
    to report.
    """
    record: dict[str, Any] = {
        "point": task.point, "replication": task.replication, "seed": task.seed,
        "point_key": task.point_key, "config_hash": task.config_hash,
    }
    record.update(task.params)
    t0 = time.perf_counter()
    progress.begin()
    try:
        metrics = model(config, task_streams(task.seed, task.params, task.replication,
                                             task.point_stream))
        if not isinstance(metrics, Mapping):
            raise TypeError(f"model returned {type(metrics).__name__}, not a dict of metrics")
        clash = sorted(set(map(str, metrics)) & (RESERVED | set(task.params)))
        if clash:
            raise ValueError(f"model returned reserved metric names {clash}")
        for k, v in metrics.items():
            record[str(k)] = v
        record["error"] = ""
    except ConfigError as exc:  # bad input is the caller's to report (one line, exit 2)
        if not task.params:
            raise
        # a config the model builds from the point (a TrainingConfig inside model): say which
        raise at_point(exc, task.point, task.params) from None
    except (Exception, SystemExit) as exc:  # recorded, one bad task never kills a sweep
        # (a model calling sys.exit fails its task alone: in this process it would end the
        # run without a word, in a pool worker the whole pool)
        for k in list(record):
            if k not in META_COLUMNS and k not in task.params:
                del record[k]
        record["error"] = (f"SystemExit: the model called sys.exit({exc.code!r})"
                           if isinstance(exc, SystemExit) else exception_line(exc))
        record["traceback"] = traceback.format_exc(limit=8)
    record["wall_time"] = time.perf_counter() - t0
    return record


def run_batch(model: Model, payload: bytes) -> list[dict[str, Any]]:
    """Run a batch of tasks of one point; the function executors run.

    Parameters
    ----------
    model : callable or ExperimentModel
        The model (an object with a ``resolve()`` method, such as
        :class:`~sim.runner.ExperimentModel`, is resolved first, which loads
        the experiment's classes before the payload is unpickled).
    payload : bytes
        ``pickle.dumps((config, tasks))``.

    Returns
    -------
    list of dict
        One record per task, in order.
    """
    resolve = getattr(model, "resolve", None)
    fn = resolve() if callable(resolve) else model
    config, tasks = pickle.loads(payload)
    return [run_task(fn, config, t) for t in tasks]


def run_one(model: Model, config: Any, seed: int, replication: int) -> dict[str, Any]:
    """Replication ``replication`` of ``model`` at ``config`` (streams ``Streams(seed).replication(k)``).

    The record of :func:`run_task` for the sweep with no factors.
    """
    return run_task(model, config, Task(0, int(replication), int(seed), {}, point_key({}), ""))


def batches(tasks: Sequence[Task], size: int) -> list[list[Task]]:
    """Consecutive tasks of one point, at most ``size`` per batch."""
    out: list[list[Task]] = []
    for t in tasks:
        if out and len(out[-1]) < size and out[-1][0].point == t.point:
            out[-1].append(t)
        else:
            out.append([t])
    return out
