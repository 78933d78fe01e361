"""Sweeps: a model over points x replications, stored and resumed.

:func:`sweep` runs a model over *points* (a base config with some fields
replaced) times replications on any executor (:mod:`sim.runner.executors`).
Points come from ``factors`` (a grid: a dict ``field -> list of values``,
expanded as a cartesian product with the first factor varying slowest) or
from ``points`` (an explicit list of dicts). Each point becomes
``dataclasses.replace(base, **params)`` (or ``{**base, **params}`` for a dict
base), validated on the driver before anything runs, so bad input raises
:class:`~sim.errors.ConfigError` at once (a point's config refused names the point:
``'p' must be in [0, 1] (at point 1: p=1.5): 1.5``). :func:`replicate` is the sweep with
no factors. The streams of each task are described in :mod:`sim.runner.tasks`;
results are bit-identical on every executor, worker count and batch size.

With ``out`` set, every finished task is appended to the results store
(:mod:`sim.runner.store`) as soon as it completes, and re-running the same
sweep resumes: tasks already stored (same config hash, which covers the
config, the seed and the code version) are reused, the rest run. Nothing
stored is deleted; see :class:`SweepResult` for what a run reports.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_choice, check_int, check_output_dir
from ..progress import tracking, wanted
from ..results import (
    Estimate,
    _trials,
    check_fixed_metrics,
    check_nonnegative_metrics,
    check_rates,
    config_fixed_metrics,
    metric_estimate,
    summary_rows,
)
from .executors import EXECUTORS, ExecutorLost, check_workers, execute, open_executor
from .tasks import (
    RESERVED,
    Model,
    Task,
    at_point,
    batches,
    exception_line,
    expand_points,
    make_tasks,
    run_task,
    split_point,
)

__all__ = ["SweepResult", "sweep", "replicate", "code_change"]


@dataclass
class SweepResult:
    """What a sweep produced.

    Attributes
    ----------
    name : str
        Experiment name.
    points : list of dict
        The config parameters of each point, in point order.
    factors : list of str
        Names of the varied parameters.
    records : list of dict
        One flat record per task, sorted by point then replication.
    out : Path or None
        The results folder (when stored).
    ran, reused, errors : int
        Tasks run now, tasks taken from the store, tasks that failed.
    interrupted : bool
        True when the sweep stopped early (``fail_fast``).
    unused : int
        Valid stored records this run did not use (other configs, seeds, code
        or replications), kept in ``records.csv``.
    retried : int
        Stored failed tasks run again.
    set_aside : dict
        Damaged stored lines moved to ``records.damaged``, by reason.
    removed : int
        Stored records removed (only with ``prune``).
    repeated : int
        Stored records that repeat a task already stored (the first is used).
    manifest_damaged : str
        Why the folder's damaged ``manifest.json`` was set aside (empty when
        it was not).
    code_changed : str
        What changed in the code since the stored records were made (empty
        when nothing did or nothing was stored).
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
    unused: int = 0
    retried: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    repeated: int = 0
    manifest_damaged: str = ""
    code_changed: str = ""
    confidence: float = 0.95
    #: Metrics that are probabilities or rates, with their trials (see :func:`~sim.results.summary_rows`).
    rates: dict[str, Any] = field(default_factory=dict)
    #: Metrics that cannot be negative, or "*" (see :func:`~sim.results.summary_rows`).
    nonnegative: tuple[str, ...] | str = ()
    #: Per point, the metrics its config fixes with the reason (exact in the summary; see
    #: :func:`~sim.results.config_fixed_metrics`); empty when none or unknown.
    fixed: list[dict[str, str]] = field(default_factory=list)
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

    def summary(self, metrics: Sequence[str] | None = None, *, counts: bool = False) -> list[dict[str, Any]]:
        """One row per point: parameters, counts, and ``m_mean, m_se, m_low, m_high`` per metric ``m``.

        Metrics declared in :attr:`rates` get a rate's interval (inside
        ``[0, 1]``, "below X" with no event) and an ``m_kind`` column; the others
        a Student-t interval (cut at 0 for the :attr:`nonnegative` ones). A
        metric a point's config fixes (:attr:`fixed`) is exact there (``m_kind``
        ``exact``, no interval). With ``counts``, also ``m_n`` (values averaged) for
        each metric missing or NaN in some record (:func:`~sim.results.summary_rows`).
        """
        return summary_rows(
            self.records, self.points, metrics=list(metrics or self.metrics),
            confidence=self.confidence, counts=counts, rates=self.rates,
            nonnegative=self.nonnegative, fixed=self._fixed(),
        )

    def _fixed(self) -> list[dict[str, str]] | None:
        return self.fixed if len(self.fixed) == len(self.points) else None

    def estimates(self, point: int) -> dict[str, Estimate]:
        """Estimates with CI across replications of every metric at one point (as :meth:`summary`)."""
        fixed = (self._fixed() or [{}] * len(self.points))[point] if self.points else {}
        out = {}
        for m in self.metrics:
            use = [r for r in self.records_of(point) if _is_number(r.get(m))]
            vals = [float(r[m]) for r in use]
            if m in fixed:
                out[m] = metric_estimate(vals, self.confidence, fixed=fixed[m], name=m)
            elif m in self.rates:
                out[m] = metric_estimate(vals, self.confidence, rate=True,
                                         trials=_trials(self.rates[m], use, self.points[point]),
                                         name=m)
            else:
                out[m] = metric_estimate(vals, self.confidence, nonnegative=(
                    self.nonnegative == "*" or m in self.nonnegative), name=m)
        return out

    def point_records(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Each point's parameters with the records of its tasks that did not fail.

        Points where every task failed are skipped.
        """
        for i, params in enumerate(self.points):
            ok = self.records_of(i)
            if ok:
                yield params, ok

    def records_of(self, point: int) -> list[dict[str, Any]]:
        """Records of point ``point``'s tasks that did not fail, in replication order."""
        return [r for r in self.records if r["point"] == point and not r.get("error")]

    def failed(self) -> list[dict[str, Any]]:
        """Records of the tasks that failed."""
        return [r for r in self.records if r.get("error")]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


class _NoBar:
    """Stands in for a progress bar that is off (tqdm is not even imported)."""

    def update(self, n: int) -> None:  # noqa: D102
        pass

    def close(self) -> None:  # noqa: D102
        pass


def _progress(total: int, show: bool | None, desc: str):
    show = wanted(show)
    if not show or total == 0:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, disable=not show or total == 0, unit="task", desc=desc,
                file=sys.stderr, dynamic_ncols=True, leave=False)


def code_change(before: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> str:
    """Which parts of a :func:`~sim.runner.code_version` differ, in words (empty if none)."""
    if not before or not now:
        return ""
    parts = []
    if before.get("package") != now.get("package"):
        parts.append(f"dtsim version {before.get('package')} -> {now.get('package')}")
    if before.get("sim") != now.get("sim"):
        parts.append("the sim/topologies sources")
    if before.get("experiment") != now.get("experiment"):
        parts.append("the experiment file's code")
    old, new = before.get("modules") or {}, now.get("modules") or {}
    for m in sorted(set(old) | set(new)):
        if old.get(m) != new.get(m):
            what = "added" if m not in old else "no longer imported" if m not in new else "changed"
            parts.append(f"module {m} ({what})")
    return ", ".join(parts)


def fixed_declaration(fixed: Any, name: str = "fixed"
                      ) -> dict[str, str] | Callable[[Any], Mapping[str, str]]:
    """A ``FIXED`` declaration as given: a function of a point's config, returned as it is
    (:func:`point_fixed` calls it on each point), or a dict (metric -> reason) or None,
    checked now (:func:`~sim.results.check_fixed_metrics`, naming ``name``)."""
    if callable(fixed) and not isinstance(fixed, Mapping):
        return fixed
    return check_fixed_metrics(fixed, name)


def point_fixed(fixed: Any, configs: Sequence[Any], name: str = "fixed",
                params: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, str]]:
    """What a ``FIXED`` declaration says each point's model computes from its config alone.

    Parameters
    ----------
    fixed : dict, callable or None
        A dict (metric -> reason, every point: :func:`~sim.results.check_fixed_metrics`)
        or a function of a point's config returning such a dict for that point:
        for a model that builds its own config from a dict point, e.g.
        ``def FIXED(config): return build(config).fixed_metrics()`` with the
        :class:`~sim.training.TrainingConfig` the model runs.
    configs : sequence
        The points' configs.
    name : str
        The parameter named in an error (a function: its own name, e.g. ``FIXED``).
    params : sequence of dict, optional
        The points' factor values: a function's refusal of a config it builds at a point
        then names that point (as a refusal when the point's config is built does).

    Returns
    -------
    list of dict
        One declaration per point.

    Raises
    ------
    ConfigError
        For a declaration (or a function's return at a point) that is not a
        dict of metric name -> reason, naming the point.
    """
    declared = fixed_declaration(fixed, name)
    if not callable(declared):
        return [declared] * len(configs)
    name = getattr(fixed, "__name__", name)
    out = []
    for i, c in enumerate(configs):
        try:
            got = fixed(c)
        except ConfigError as exc:  # the point's own refusal (a config it builds): say which
            if params is None or not params[i]:
                raise
            raise at_point(exc, i, params[i]) from None
        except (Exception, SystemExit) as exc:  # (audit6) a traceback, or a silent exit
            what = (f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit)
                    else f"it raised {exception_line(exc)}")
            raise ConfigError(f"{name}(config) of point {i}", "a function of a point's config "
                              f"that returns a dict of metric name -> reason ({what})",
                              c) from None
        out.append(check_fixed_metrics(None if got is None else (
            dict(got) if isinstance(got, Mapping) else got), f"{name}(config) of point {i}"))
    return out


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
    prune: bool = False,
    rates: Mapping[str, Any] | None = None,
    nonnegative: Any = None,
    fixed: Mapping[str, str] | Callable[[Any], Mapping[str, str]] | None = None,
) -> SweepResult:
    """Run ``model`` over points x replications on an executor.

    Parameters
    ----------
    model : callable
        Top-level ``model(config, streams) -> dict`` (or an :class:`~sim.runner.ExperimentModel`).
    base : dataclass instance or dict
        The base config; each point replaces some of its fields.
    factors, points
        The grid or the explicit points (see :func:`~sim.runner.expand_points`);
        a point may carry the run settings of :data:`~sim.runner.RUN_KEYS`.
    replications : int
        Replications per point.
    seed : int
        Root seed (see :mod:`sim.runner.tasks` for the stream of each task).
    executor : {"serial", "local", "dask"} or Executor
        Where tasks run; results are identical on all of them.
    workers : int, optional
        Processes (local) or workers (local Dask cluster); default every CPU
        this process may use, and at most that many (more is refused before
        anything starts); with ``scheduler``, at most the cluster's threads.
    scheduler : str, optional
        Address of an existing Dask scheduler (with ``executor="dask"``).
    out : path, optional
        Results folder; tasks are stored as they finish and a re-run resumes.
        Storing needs configs of values only (their hash must be stable).
    name : str
        Experiment name, checked against the folder's manifest.
    code : str
        Code version; part of each point's config hash.
    info : dict, optional
        Extra manifest entries (for example the experiment file and its
        ``code_version``).
    fail_fast : bool
        Stop at the first task that fails.
    progress : bool or None
        Show a progress bar (None: only when stderr is a terminal).
    batch : int
        Replications of one point run per executor call.
    prune : bool
        After a complete run, remove from ``records.csv`` every record this
        run did not use (the only way records are ever removed).
    rates : dict, optional
        Metrics that are probabilities or rates, with their trials: their
        summary intervals come from :func:`~sim.results.rate_ci` (see
        :func:`~sim.results.summary_rows`).
    nonnegative : sequence of str or "*", optional
        Metrics that cannot be negative (or ``"*"``: every metric not a rate);
        their summary intervals are cut at 0.
    fixed : dict or callable, optional
        Metrics the model computes from the config alone (metric -> reason):
        exact at every point, as are those each point's config declares
        (:func:`~sim.results.config_fixed_metrics`); or a function of a
        point's config returning that dict for the point (:func:`point_fixed`),
        called on every point before anything runs.

    Returns
    -------
    SweepResult

    Raises
    ------
    ConfigError
        Bad input, before anything runs (including a config that cannot be
        hashed stably when ``out`` is given).
    ExecutorLost
        The Dask scheduler went away; finished tasks are stored.
    """
    from .store import Store

    check(callable(model), "model", "a callable model(config, streams) -> dict of metrics",
          model)
    check_int("batch", batch, low=1)
    rates = check_rates(rates)
    nonnegative = check_nonnegative_metrics(nonnegative)
    params = expand_points(factors, points)
    configs, tasks = make_tasks(base, params, replications=replications, seed=seed, code=code,
                                identify=out is not None)
    point_params = [split_point(p)[0] for p in params]
    factor_names = list(dict.fromkeys(k for p in point_params for k in p))
    # Validate the executor choice and the worker count before touching the store.
    if not (executor is None or isinstance(executor, Executor)):
        check_choice("executor", executor, EXECUTORS)
        check_workers(executor, workers, scheduler=scheduler)
        if scheduler and executor != "dask":
            raise ConfigError("scheduler", "used with the dask executor only, not with", executor)
    for cfg in configs:  # every task is sent pickled, even to the serial executor
        try:
            pickle.dumps(cfg)
        except Exception as exc:
            raise ConfigError("base", f"picklable, with every point's values "
                              f"({exception_line(exc)})", type(cfg).__name__) from None
    if out is not None:  # before any work: a folder that cannot be written is refused now
        check_output_dir("out", out)
    if scheduler and executor == "dask":
        # reach the cluster (and check --workers against it) before any file is written
        with open_executor(executor, workers, scheduler=scheduler) as remote:
            return sweep(model, base, factors=factors, points=points, replications=replications,
                         seed=seed, executor=remote, out=out, name=name, code=code, info=info,
                         fail_fast=fail_fast, progress=progress, batch=batch, prune=prune,
                         rates=rates, nonnegative=nonnegative, fixed=fixed)

    # what each point's config fixes, and what the caller says the model computes from it
    declared = point_fixed(fixed, configs, params=point_params)
    fixed_at = [{**config_fixed_metrics(c), **d} for c, d in zip(configs, declared, strict=True)]
    store = None
    done: dict[tuple[int, int], dict[str, Any]] = {}
    changed = ""
    if out is not None:
        store = Store.open(out, name=name, code=code, create=True)
        try:
            done = store.reconcile(tasks)
            changed = code_change(store.previous.get("code_version"), (info or {}).get("code_version"))
            store.write_manifest(point_params, tasks, seed=seed, replications=replications, info=info,
                                 fixed=fixed_at)
        except BaseException:
            store.close()
            raise
    pending = [t for t in tasks if t.key not in done]

    fresh: dict[tuple[int, int], dict[str, Any]] = {}
    bar = _progress(len(pending), progress, name)
    partial: list[Any] = [None]  # the in-replication tracker of serial runs (sim.progress)
    # the declared rates and non-negative metrics must be metrics the model returns, never
    # ignored: each must be among the metrics of the records without error (stored ones
    # included). Points may return different metrics (an experiment in parts), so a name not
    # yet seen is refused once every point has a record and none has it (at once when every
    # point returns the same metrics as the first). A point whose every task failed may be
    # the one that returns it: the run then ends as a run with failed tasks, which it names
    unchecked = [bool(rates) or bool(nonnegative and nonnegative != "*")]
    returned: set[str] = set()
    points_seen: set[int] = set()
    n_points = len({t.point for t in tasks})

    def check_declared(records: Iterable[Mapping[str, Any]]) -> None:
        for r in records:
            if not r.get("error"):
                returned.update(k for k in r if k not in RESERVED and k not in factor_names)
                points_seen.add(r["point"])
        if not returned:
            return
        missing = [(what, m) for what, names in (
            ("rates", list(rates)), ("nonnegative", [] if nonnegative == "*" else list(nonnegative)))
            for m in names if m not in returned]
        if not missing:
            unchecked[0] = False
            return
        if len(points_seen) == n_points:
            what, m = missing[0]
            raise ConfigError(what, "names of metrics the model returns ("
                              + ", ".join(sorted(returned)) + ")", m)

    if unchecked[0] and done:
        check_declared(done.values())

    def accept(records: list[dict[str, Any]]) -> bool:
        if store is not None:
            store.append(records)
        if unchecked[0]:
            check_declared(records)
        stop = False
        for r in records:
            tb = r.pop("traceback", None)
            if r["error"]:
                stop = stop or fail_fast
                if store is not None and tb:
                    store.log_error(r, tb)
            fresh[(r["point"], r["replication"])] = r
        if partial[0] is not None:
            partial[0].settle(len(records))
        else:
            bar.update(len(records))
        return stop

    def finish() -> SweepResult:
        result = _finish(store, name, point_params, factor_names, tasks, done, fresh, rates,
                         nonnegative, fixed_at)
        result.ran, result.reused = len(fresh), len(done)
        result.errors = len(result.failed())
        result.code_changed = changed if done or (store is not None and store.unused) else ""
        if store is not None:
            result.unused, result.retried = store.unused, store.retried
            result.set_aside = dict(store.set_aside)
            result.repeated, result.manifest_damaged = store.repeated, store.manifest_damaged
        return result

    interrupted = False
    try:
        if pending:
            groups = batches(pending, batch)
            with open_executor(executor, workers, scheduler=scheduler) as ex:
                if ex is None:  # in this process: engines move the bar within a replication
                    if not isinstance(bar, _NoBar):  # fractions of a task: one decimal
                        bar.bar_format = ("{l_bar}{bar}| {n:.1f}/{total_fmt} "
                                          "[{elapsed}<{remaining}, {rate_fmt}]")
                    with tracking(None if isinstance(bar, _NoBar) else bar) as part:
                        partial[0] = part
                        interrupted = _serial(model, configs, groups, accept)
                else:
                    payloads = [pickle.dumps((configs[b[0].point], b)) for b in groups]
                    interrupted = execute(model, payloads, groups, ex, accept)
    except (KeyboardInterrupt, ExecutorLost):
        # Every finished task is already on disk; leave a matching summary.
        if store is not None:
            finish()
            store.close()
        raise
    except BaseException:
        if store is not None:
            store.close()
        raise
    finally:
        bar.close()

    if unchecked[0] and not interrupted:
        check_declared(())
    try:
        result = finish()
        result.interrupted = interrupted
        if store is not None:
            if prune and not interrupted:
                result.removed = store.prune((t.config_hash, t.replication) for t in tasks)
            result.unused = max(0, result.unused - result.removed)
    finally:
        if store is not None:
            store.close()
    return result


def _serial(model: Model, configs: Sequence[Any], groups: list[list[Task]], accept) -> bool:
    resolve = getattr(model, "resolve", None)
    fn = resolve() if callable(resolve) else model
    for g in groups:
        if accept([run_task(fn, configs[t.point], t) for t in g]):
            return True
    return False


def _finish(store, name, params, factor_names, tasks, done, fresh, rates=None,
            nonnegative=(), fixed=None) -> SweepResult:
    records = []
    for t in tasks:
        r = fresh.get(t.key) or done.get(t.key)
        if r is not None:
            records.append(r)
    if store is not None:
        records = store.normalise(records)
        result = SweepResult(name, params, factor_names, records, out=store.path, rates=rates or {},
                             nonnegative=nonnegative, fixed=list(fixed or []))
        store.write_summary(result)
        return result
    return SweepResult(name, params, factor_names, records, rates=rates or {},
                       nonnegative=nonnegative, fixed=list(fixed or []))


def replicate(
    model: Model,
    config: Any,
    *,
    replications: int,
    seed: int,
    executor: str | Executor | None = "serial",
    workers: int | None = None,
    batch: int | None = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """Run ``replications`` independent replications of ``model`` on ``config``.

    The sweep with no factors: replication ``k`` draws from
    ``Streams(seed).replication(k)`` on every executor.

    Parameters
    ----------
    model : callable
        Top-level (picklable) function ``model(config, streams) -> dict``.
    config : object
        A frozen, picklable configuration.
    replications : int
        Number of independent replications (>= 1).
    seed : int
        Root seed.
    executor : {"serial", "local", "dask"} or Executor
        ``"local"`` is a process pool with ``workers`` processes (default: all
        cores); ``"dask"`` a local Dask cluster; an Executor instance (for
        example a Dask client's ``get_executor()``) is used as given and not
        shut down.
    workers : int, optional
        Pool size for ``"local"`` and ``"dask"``.
    batch : int, optional
        Replications per executor call (default: about four calls per worker).
    progress : bool or None
        Show a progress bar (None: only when stderr is a terminal).

    Returns
    -------
    list of dict
        One record per replication, in replication order (the sweep record
        format: ``point`` is 0, metrics as the model returned them).
    """
    check_int("replications", replications, low=1)
    if batch is None:
        n = workers or getattr(executor, "_max_workers", None) or 4
        batch = max(1, replications // (4 * n))
    res = sweep(model, config, factors={}, replications=replications, seed=seed,
                executor=executor, workers=workers, batch=batch, progress=progress,
                name="replicate")
    return res.records
