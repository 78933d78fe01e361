"""Where tasks run: serially, on a local process pool, or on a Dask cluster.

:func:`execute` feeds batches of tasks to any :class:`concurrent.futures.Executor`
and survives the faults a long sweep meets:

* a local pool worker that dies (killed, out of memory, ``os._exit``) breaks
  the pool; a fresh pool is started and the batches that were in flight are
  retried one at a time, so the batch that kills its process is found; after
  :data:`CRASH_RETRIES` further deaths it is recorded as failed with a
  one-line cause and every other batch still runs;
* on Dask, a task whose worker dies too often ends in ``KilledWorker``
  (``distributed.scheduler.allowed-failures``, set to :data:`CRASH_RETRIES`
  on a local cluster); Dask also blames the tasks queued on the dying
  worker, so each such batch is run again alone, and only one that ends in
  ``KilledWorker`` alone is recorded as failed, in the same way;
* a lost Dask scheduler stops the sweep with :class:`ExecutorLost`, one line;
  every finished task is already stored, so running the same command resumes.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigError, SimulationError, check_choice, check_int
from .tasks import Model, Task, run_batch

__all__ = [
    "EXECUTORS",
    "CRASH_RETRIES",
    "DaskExecutor",
    "ExecutorLost",
    "make_executor",
    "check_workers",
    "usable_cpus",
    "open_executor",
    "execute",
    "crashed_records",
]

EXECUTORS = ("serial", "local", "dask")
#: Times a batch whose process dies is retried before it is recorded as failed.
CRASH_RETRIES = 2


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask; else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_workers(executor: Any, workers: Any, *, scheduler: str | None = None) -> int | None:
    """Refuse a worker count the machine does not have, before any process starts.

    A local process pool or a local Dask cluster gets at most
    :func:`usable_cpus` workers (a larger count forks processes that only
    compete for the same CPUs, and ran a machine out of memory at 100,000).
    With a remote scheduler the cluster's own count is checked when it is
    reached (:class:`DaskExecutor`).

    Returns
    -------
    int or None
        ``workers`` as an int (None when not given).

    Raises
    ------
    ConfigError
        ``'workers' must be an integer in [1, <CPUs>] (the CPUs this machine has): <N>``.
    """
    if workers is None:
        return None
    n = check_int("workers", workers, low=1)
    local = executor in ("local", "dask") and not scheduler
    if local:
        cap = usable_cpus()
        if n > cap:
            raise ConfigError("workers", f"an integer in [1, {cap}] (the CPUs this machine has)", n)
    return n


class ExecutorLost(SimulationError):
    """The executor went away (a Dask scheduler lost); finished tasks are stored."""


def check_reachable(scheduler: str, timeout: float) -> None:
    """Refuse a scheduler address that is malformed or where no scheduler answers.

    A plain TCP connect (a refused port or an unknown host fails at once), then
    one connection with distributed's handshake, bounded by ``timeout``: a
    Client that cannot reach its scheduler keeps retrying in the background and
    then blocks the interpreter's exit for twice its timeout, with a traceback.

    Raises
    ------
    ConfigError
        ``'scheduler' must be a reachable Dask scheduler address: <address>``.
    """
    import asyncio
    import socket

    rule = "a reachable Dask scheduler address"
    try:
        from distributed.comm import connect, parse_address, parse_host_port

        scheme, loc = parse_address(scheduler)
        host, port = parse_host_port(loc, default_port=8786) if scheme in ("tcp", "tls") \
            else (None, None)
    except Exception:
        raise ConfigError("scheduler", rule, scheduler) from None
    if host is not None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError:
            raise ConfigError("scheduler", rule, scheduler) from None

    async def probe() -> None:
        comm = await connect(scheduler, timeout=timeout)
        await comm.close()

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout + 1.0))
    except Exception:
        raise ConfigError("scheduler", rule, scheduler) from None


class DaskExecutor(Executor):
    """A :class:`concurrent.futures.Executor` on a Dask cluster it owns.

    Parameters
    ----------
    scheduler : str, optional
        Address of an existing scheduler (``tcp://host:8786``). Without it a
        ``LocalCluster`` of ``workers`` single-threaded worker processes is
        started and closed with the executor.
    workers : int, optional
        Workers of the local cluster (default: every CPU this process may
        use, and at most that many); with ``scheduler``, at most the worker
        threads the cluster reports (it sets the tasks kept in flight).
    timeout : float
        Seconds to wait for the scheduler before giving up.
    retries : int
        Times a task that raises inside Dask is resubmitted.

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
            import dask
            from distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - dask is a dev dependency
            raise ConfigError("executor", "installed to use dask (pip install 'dtsim[dask]')", "dask") from None
        import logging

        self.cluster = None
        # Dask (and tornado, asyncio under it) log a lost worker or scheduler as tracebacks
        # on stderr; the sweep reports those faults itself, in one line each (levels
        # restored on shutdown, unless the scheduler was lost and Dask may still log).
        self._levels = {}
        roots = ("distributed", "tornado", "asyncio")
        for name in [*roots, *logging.root.manager.loggerDict]:
            if name.split(".")[0] in roots:
                log = logging.getLogger(name)
                self._levels[name] = log.level
                log.setLevel(logging.CRITICAL)
        self.lost = False
        if scheduler:
            try:
                check_reachable(scheduler, timeout)
            except ConfigError:
                self._restore_logs()
                raise
            try:
                self.client = Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
            except Exception:
                self._restore_logs()
                raise ConfigError("scheduler", "a reachable Dask scheduler address", scheduler) from None
            try:
                threads = sum(self.client.nthreads().values())
            except Exception:
                threads = 0
            if workers is not None and check_int("workers", workers, low=1) > threads:
                self.client.close()
                self._restore_logs()
                raise ConfigError("workers", f"an integer in [1, {threads}] (the worker threads "
                                  f"the cluster at {scheduler} reports)", workers)
            # tasks in flight follow the count asked for, else the cluster's
            self._max_workers = workers or max(1, threads)
        else:
            n = usable_cpus() if workers is None else check_workers("dask", workers)
            self._max_workers = n
            with dask.config.set({"distributed.scheduler.allowed-failures": CRASH_RETRIES}):
                self.cluster = LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.CRITICAL,
                )
            self.client = Client(self.cluster, set_as_default=False)
        self._ex = self.client.get_executor(pure=False, retries=retries)

    def submit(self, fn, /, *args, **kwargs) -> Future:  # noqa: D102
        return self._ex.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:  # noqa: D102
        try:
            self._ex.shutdown(wait=wait and not cancel_futures)
        except Exception:  # a lost scheduler: nothing left to shut down
            pass
        finally:
            try:
                self.client.close()
            except Exception:  # a lost scheduler: nothing left to close
                pass
            finally:
                try:
                    if self.cluster is not None:
                        self.cluster.close()
                except Exception:
                    # The local cluster's teardown can trip over a worker its nanny is still
                    # restarting after a task killed it (distributed's AsyncProcess.join:
                    # "can only join a started process"); every result is stored by now and
                    # the daemon worker processes end with this one.
                    pass
                finally:
                    if not self.lost:  # Dask's reconnect attempts would log tracebacks
                        self._restore_logs()

    def _restore_logs(self) -> None:
        import logging

        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)


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


#: The process pools dtsim made (``--executor local``, a broken pool's replacement): only
#: their workers are stopped on Ctrl-C; a caller's own pool is left usable.
_OWN_POOLS: weakref.WeakSet = weakref.WeakSet()


def _pool(workers: int) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_die_with_parent)
    _OWN_POOLS.add(pool)
    return pool


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
        (default: every CPU this process may use; at most that many, see
        :func:`check_workers`); with a remote scheduler, at most the
        cluster's worker threads, and the tasks kept in flight follow it.
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
    check_workers(executor, workers, scheduler=scheduler)
    if scheduler and executor != "dask":
        raise ConfigError("scheduler", "used with the dask executor only, not with", executor)
    if executor == "serial":
        return None
    if executor == "dask":
        return DaskExecutor(scheduler, workers)
    return _pool(workers or usable_cpus())


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


def crashed_records(batch: Sequence[Task], cause: str) -> list[dict[str, Any]]:
    """Failed records for a batch whose process died: ``error`` holds ``cause``."""
    out = []
    for t in batch:
        r: dict[str, Any] = {"point": t.point, "replication": t.replication, "seed": t.seed,
                             "point_key": t.point_key, "config_hash": t.config_hash, **t.params,
                             "error": cause, "wall_time": 0.0}
        out.append(r)
    return out


def _workers_of(pool: Any, known: dict[int, Any]) -> None:
    """Remember the pool's worker processes (a broken pool forgets them)."""
    for pid, p in list((getattr(pool, "_processes", None) or {}).items()):
        known[pid] = p


def _terminate_workers(pool: Any) -> None:
    """SIGTERM every live worker process of a local pool (on Ctrl-C: the tasks in flight are lost
    as with a kill, every finished one is stored)."""
    for p in list((getattr(pool, "_processes", None) or {}).values()):
        if p.is_alive():
            p.terminate()


def _exit_cause(known: dict[int, Any], wait_s: float = 3.0) -> str:
    import time

    # The broken pool reaps its workers in its own thread: give it a moment. Every decision
    # reads one snapshot of the exit codes: the pool's thread terminates the other workers
    # (SIGTERM) and reaps the dead one while we look, so the dead one's code can appear
    # between two reads; judging "all have exited" on a later read than the codes kept
    # reported a bystander's SIGTERM for a task that died by SIGKILL.
    deadline = time.monotonic() + wait_s
    while True:
        exits = [getattr(p, "exitcode", None) for p in list(known.values())]
        codes = [c for c in exits if c not in (None, 0)]
        if any(c != -15 for c in codes) or time.monotonic() > deadline:
            break
        if all(c is not None for c in exits):
            break
        for p in list(known.values()):
            if getattr(p, "exitcode", 0) is None:
                try:
                    p.join(0.05)
                except (AssertionError, OSError, ValueError):
                    pass
    # The pool terminates its other workers (SIGTERM) once one dies: report the one that died.
    codes.sort(key=lambda c: c == -15)
    if not codes:
        return "its worker process died"
    code = codes[0]
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"its worker process was killed by signal {-code} ({name})"
    return f"its worker process exited with status {code}"


def _is_killed_worker(exc: BaseException) -> bool:
    return type(exc).__name__ == "KilledWorker"


def _is_dask_status_race(exc: BaseException) -> bool:
    """A Dask task that finished, then lost its result before the executor read its status.

    distributed's ``ClientExecutor`` gathers a finished task's value, then reads the
    future's status again; when the worker holding the result died in between (killed
    by the next task), the status is no longer "finished" and ``_cascade_future``
    unpacks the value as an error triple, raising ``ValueError`` instead of the result.
    """
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_cascade_future" and isinstance(exc, ValueError):
            return True
        tb = tb.tb_next
    return False


def _is_lost(exc: BaseException) -> bool:
    if isinstance(exc, (CancelledError, TimeoutError, OSError)):
        return True
    return type(exc).__name__ in ("CommClosedError", "FutureCancelledError")


def execute(
    model: Model,
    payloads: Sequence[bytes],
    tasks: Sequence[Sequence[Task]],
    ex: Executor | None,
    accept: Callable[[list[dict[str, Any]]], bool],
    *,
    window: int | None = None,
) -> bool:
    """Run batches on ``ex`` (None: in this process), handing each batch's records to ``accept``.

    Parameters
    ----------
    model : callable
        Passed to :func:`~sim.runner.run_batch` with each payload.
    payloads : list of bytes
        ``pickle.dumps((config, batch))`` per batch.
    tasks : list of list of Task
        The batches (to record a batch that kills its process).
    ex : Executor or None
    accept : callable
        Called with each finished batch's records; returning True stops the
        run early (``fail_fast``).
    window : int, optional
        Batches in flight at once (default: four per worker).

    Returns
    -------
    bool
        True when stopped early by ``accept``.

    Raises
    ------
    ExecutorLost
        When the Dask scheduler is lost.
    """
    if ex is None:
        for p in payloads:
            if accept(run_batch(model, p)):
                return True
        return False
    is_pool = isinstance(ex, ProcessPoolExecutor)
    workers = getattr(ex, "_max_workers", None) or usable_cpus()
    size = window or 4 * workers
    queue = list(range(len(payloads)))  # batches not yet submitted, in order
    suspects: list[int] = []  # batches in flight when a pool broke: run one at a time
    deaths = dict.fromkeys(range(len(payloads)), 0)
    races = dict.fromkeys(range(len(payloads)), 0)  # Dask results lost as they were read
    current, owned = ex, None
    procs: dict[int, Any] = {}  # worker processes of the current pool, by pid
    try:
        while queue or suspects:
            alone = bool(suspects)
            futures: dict[Future, int] = {}
            if alone:
                i = suspects[0]
                futures[current.submit(run_batch, model, payloads[i])] = i
                _workers_of(current, procs)
                suspects.pop(0)
            try:
                while futures or (queue and not alone):
                    while not alone and queue and len(futures) < size:
                        i = queue[0]  # leaves the queue only once submitted
                        futures[current.submit(run_batch, model, payloads[i])] = i
                        _workers_of(current, procs)
                        queue.pop(0)
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for f in finished:
                        i = futures.pop(f)
                        try:
                            records = f.result()
                        except BrokenProcessPool:
                            futures[f] = i  # handled below with the rest in flight
                            raise
                        except Exception as exc:
                            if _is_dask_status_race(exc) and races[i] < CRASH_RETRIES:
                                races[i] += 1  # it finished: run it again, nothing was stored
                                queue.insert(0, i)
                                continue
                            if not _is_killed_worker(exc):
                                raise
                            if not alone:
                                # Dask blames every task queued on a dying worker: run this
                                # one again alone to tell the culprit from the bystanders.
                                if i not in suspects:
                                    suspects.append(i)
                                continue
                            records = crashed_records(
                                tasks[i], f"task killed its worker process {CRASH_RETRIES + 1} "
                                "times (Dask KilledWorker); not retried")
                        if accept(records):
                            for g in futures:
                                g.cancel()
                            return True
            except BrokenProcessPool:
                if not is_pool:
                    raise
                _workers_of(current, procs)
                cause = _exit_cause(procs)
                in_flight = sorted(set(futures.values()))
                if alone and not in_flight:  # broke on submit: run the suspect again
                    pass
                elif alone:
                    i = in_flight[0]
                    deaths[i] += 1
                    if deaths[i] > CRASH_RETRIES:
                        if accept(crashed_records(
                                tasks[i], f"task killed its process {deaths[i]} times ({cause}); "
                                "not retried")):
                            return True
                    else:
                        suspects.insert(0, i)
                else:
                    suspects.extend(i for i in in_flight if i not in suspects)
                if owned is not None:
                    owned.shutdown(wait=False, cancel_futures=True)
                current = owned = _pool(workers)
                procs = {}
            except BaseException as exc:
                for g in futures:
                    g.cancel()
                if is_pool and isinstance(exc, KeyboardInterrupt) and current in _OWN_POOLS:
                    # Ctrl-C stops now: a worker would finish its task (and the one queued
                    # behind it) first, whose records this run no longer takes (a pool the
                    # caller passed is theirs: its workers are left to finish, it stays usable)
                    _terminate_workers(current)
                if not is_pool and _is_lost(exc) and not isinstance(exc, KeyboardInterrupt):
                    if isinstance(current, DaskExecutor):
                        current.lost = True
                    raise ExecutorLost(
                        f"lost the Dask scheduler ({' '.join(type(exc).__name__.split())}); every "
                        "finished task is stored: run the same command to resume") from None
                raise
    finally:
        if owned is not None:
            owned.shutdown(wait=False, cancel_futures=True)
    return False
