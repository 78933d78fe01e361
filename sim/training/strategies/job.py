"""The step-level job engine: workers that come and go, a coordinator that a strategy runs.

Checkpoint-restart, redundancy and reconfiguration decide what a failure
costs per step: a loss loses the step in progress (or every step since the
last checkpoint), a takeover slows the steps down, a reconfiguration pauses
the job. :class:`JobSystem` runs them as SimPy processes:

* the workers are the config's ``L r`` workers (``s{j}r{i}``), failing and
  recovering by the same failure model as the training DES
  (:func:`sim.training.system.build_failures`: the same streams, so a seed
  gives both engines the same failures), preempted and replaced by the spot
  model (stream ``spot``, as the DES's spot slots draw it);
* a worker that comes up is *ready* after the strategy's ``boot`` plus the
  config's weight download time (at time 0: after ``boot``);
* before a preemption (a replayed trace's or the spot model's, not a crash)
  a worker may give a notice ``config.notice`` ahead (AWS 120 s, GCP 30 s);
* the strategy's :meth:`coordinate` generator runs the job over the
  primitives below, and the job asks the strategy at every worker event
  (``lost``, ``joined``, ``noticed``) whether to interrupt it.

Metrics are the training DES's (:data:`sim.training.METRICS`; the per
microbatch ones are NaN here), with billing as the DES bills (a worker
replaying a trace only while up, a spot slot only while present), plus
:data:`JOB_METRICS`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from ...failures import failure_timeout
from ...rng import Streams
from ...timeline import NULL
from ..billing import Presence
from ..config import host_groups, replica_name
from ..flow import LOST_CAUSES
from ..instant import InstantEnd
from ..replica import WorkerState
from ..system import METRICS, build_failures, training_record
from .steptime import formation_time

__all__ = ["JobSystem", "JobWorker", "Lost", "Joined", "Notice", "JOB_METRICS", "job_model"]

#: Metrics of the job engine beyond :data:`sim.training.METRICS`.
JOB_METRICS = ("lost_work", "wait_time", "reconfigurations", "rebalances",
               "fatal_failures", "takeover_windows", "degraded_time", "losses", "notices_used",
               "first_step_start", "last_step_end")


@dataclass(frozen=True)
class Lost:
    """A worker the job ran on (or was forming with) went down."""

    worker: int
    time: float


@dataclass(frozen=True)
class Notice:
    """A worker will be preempted at ``at`` (a notice ahead of it)."""

    worker: int
    at: float
    time: float


@dataclass(frozen=True)
class Joined:
    """A worker became ready."""

    worker: int
    time: float


class JobWorker(WorkerState):
    """One worker: alive (up and present), ready (booted), its pending preemption."""

    __slots__ = ("system", "index", "name", "stage", "replica", "fm_up", "spot_up", "ready",
                 "boot_ev", "leaving", "presence")

    def __init__(self, system: JobSystem, index: int, stage: int, replica: int) -> None:
        self.system = system
        self.index, self.stage, self.replica = index, stage, replica
        self.name = replica_name(stage, replica)
        self.fm_up = True
        self.spot_up = True  # present: its spot slot holds an instance
        self.ready = False
        self.boot_ev: Any = None
        self.leaving: float | None = None  # time of an announced preemption
        self.presence: Presence | None = None

    @property
    def alive(self) -> bool:
        return self.fm_up and self.spot_up

    def went_down(self, cause: Any) -> None:
        self.system._lost(self)

    def came_up(self) -> None:
        self.system._came_up(self)


class JobSystem:
    """One replication of a step-level strategy, built and wired (see the module notes).

    Attributes the strategies use
    -----------------------------
    env, config, strategy, workers, N (steps to do), steps (done), committed
    (durable: a rollback returns here), formation (the one running, or None),
    and the accounting counters.
    """

    def __init__(self, config: Any, streams: Streams, *, recorder: Any = None) -> None:
        c = self.config = config
        self.strategy = c.strategy
        env = self.env = simpy.Environment()
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        L = c.stages
        slots = [(replica_name(j, i), j, i) for j in range(L) for i in range(c.replicas[j])]
        self.workers = [JobWorker(self, k, j, i) for k, (_, j, i) in enumerate(slots)]
        # the unit of failure is the host: its workers go down and come back together
        self.hosts = host_groups(c)
        self.host_of = [0] * len(slots)
        for h, ks in enumerate(self.hosts):
            for k in ks:
                self.host_of[k] = h
        self.failure_model, host_fw = build_failures(env, c, streams,
                                                     [slots[ks[0]] for ks in self.hosts])
        self.fm_workers = [host_fw[h] for h in self.host_of]
        for w, fw in zip(self.workers, self.fm_workers, strict=True):
            fw.on_change(w.worker_changed)
        self._spot_rngs = ([streams.rng("spot", slots[ks[0]][1], slots[ks[0]][2])
                            for ks in self.hosts] if c.mtbf < math.inf else [])
        self.traced = c.failure_trace is not None and not isinstance(c.failure_trace, str)
        self.join_delay = self.strategy.boot + c.download_time
        self.N = c.steps
        self.steps = 0
        self.committed = 0
        self.formation: Any = None
        self.run_state: Any = None  # the strategy's per-run state (set by its coordinator)
        self.proc: simpy.Process | None = None
        self.done = env.event()
        self.instant = InstantEnd(env)  # the run's end and the watchdog's: after their instant
        self.events: list[Any] = []  # causes not yet seen by the coordinator
        self._pending = False
        self._change: simpy.Event | None = None
        # accounting
        self.step_times: list[float] = []
        self.work_since_commit = 0.0
        self.lost = dict.fromkeys(LOST_CAUSES, 0.0)
        self.counts = dict.fromkeys(JOB_METRICS, 0.0)
        self.counts["first_step_start"] = self.counts["last_step_end"] = math.nan
        self.restarts = 0
        self.checkpoints = 0
        self.preemptions = 0
        self.progress_t = 0.0
        self.reached = 0  # the most steps ever done: a step re-done after a rollback is no progress
        self.samples_per_step = c.microbatches * c.samples_per_microbatch
        self.short: list[float] = []  # per step kept: samples below the global batch
        self._step_cache: dict[tuple, float | None] = {}

    # -- worker events (JobWorker.set_state's transitions) ---------------------------------
    def _lost(self, w: JobWorker) -> None:
        w.leaving = None
        if w.boot_ev is not None:
            w.boot_ev.callbacks.clear()
            w.boot_ev = None
        was_ready, w.ready = w.ready, False
        if was_ready:
            self.counts["losses"] += 1
            self.strategy.lost(self, w)
            self._changed()

    def _came_up(self, w: JobWorker) -> None:
        self._boot(w, self.join_delay)
        self._schedule_notice(w)

    def _boot(self, w: JobWorker, delay: float) -> None:
        if delay <= 0:
            self._ready(w)
            return
        ev = self.env.timeout(delay)
        ev.callbacks.append(lambda _e: self._ready(w))
        w.boot_ev = ev

    def _ready(self, w: JobWorker) -> None:
        w.boot_ev = None
        if not w.alive or w.ready:
            return
        w.ready = True
        self.strategy.joined(self, w)
        self._changed()

    def _changed(self) -> None:
        ev = self._change
        if ev is not None and not ev.triggered:
            self._change = None
            ev.succeed()

    def change(self) -> simpy.Event:
        """An event that fires at the next ready or lost worker."""
        if self._change is None or self._change.triggered:
            self._change = self.env.event()
        return self._change

    # -- notices --------------------------------------------------------------------
    def _schedule_notice(self, w: JobWorker) -> None:
        """After the replay has set the worker's next own change, announce a trace preemption."""
        if self.config.notice <= 0 or not self.traced:
            return
        ev = self.env.timeout(0.0)
        ev.callbacks.append(lambda _e: self._trace_notice(w))

    def _trace_notice(self, w: JobWorker) -> None:
        fw = self.fm_workers[w.index]
        t = fw.next_own_change
        if not w.alive or not (0 < t < math.inf):
            return
        self._notice_at(w, t)

    def _notice_at(self, w: JobWorker, at: float) -> None:
        delay = max(at - self.config.notice - self.env.now, 0.0)
        ev = self.env.timeout(delay)
        ev.callbacks.append(lambda _e: self._notify(w, at))

    def _notify(self, w: JobWorker, at: float) -> None:
        if not w.alive or at <= self.env.now:
            return
        self.rec.notice(w.name, self.env.now, at)
        w.leaving = at
        self.strategy.noticed(self, w, at)

    # -- the spot model ---------------------------------------------------------------
    def _spot(self, host: list[JobWorker], rng: np.random.Generator):
        """One host's spot slot: its instance preempted (every worker on it) and replaced."""
        c, env = self.config, self.env
        while True:
            d = float(rng.exponential(c.mtbf))
            if c.notice > 0:
                for w in host:
                    self._notice_at(w, env.now + d)
            yield failure_timeout(env, d)  # after every other event of its instant
            self.preemptions += 1
            for w in host:
                for cb in self._spot_listeners[w.index]:
                    cb(False)
                w.set_state(spot_up=False)
            yield env.timeout(c.replace_time)
            for w in host:
                for cb in self._spot_listeners[w.index]:
                    cb(True)
                w.set_state(spot_up=True)

    # -- primitives for the coordinator ----------------------------------------------
    def ready_workers(self) -> list[int]:
        """Indices of the ready workers in pipeline order: ``s0r0, s1r0, .., s0r1, s1r1, ..``.

        A formation cuts this list into pipelines, so with every worker up pipeline
        ``i`` holds ``s{j}r{i}`` (a trace naming ``s0r0`` and ``s1r0`` names two nodes
        of one pipeline); the workers were stage-major before (``s0r0, s0r1, ..``),
        which put ``s0r0`` and ``s0r1`` in pipeline 0.
        """
        return [w.index for w in self._pipeline_order if w.ready]

    @functools.cached_property
    def _pipeline_order(self) -> list[JobWorker]:
        return sorted(self.workers, key=lambda w: (w.replica, w.stage))

    def interrupt(self, cause: Any) -> None:
        """Queue ``cause`` for the coordinator and interrupt it (once until it looks)."""
        self.events.append(cause)
        proc = self.proc
        if self._pending or proc is None or not proc.is_alive:
            return
        self._pending = True
        if self.env.active_process is proc:
            ev = self.env.timeout(0.0)
            ev.callbacks.append(lambda _e: proc.interrupt(cause) if proc.is_alive else None)
        else:
            proc.interrupt(cause)

    def take_events(self) -> list[Any]:
        """The causes queued since the coordinator last looked (and re-arm interrupts)."""
        out, self.events = self.events, []
        self._pending = False
        return out

    def wait(self, duration: float):
        """Wait ``duration`` (a generator); None when it ran through, else the causes that
        interrupted it (the time waited is in ``self.waited``)."""
        t0 = self.env.now
        try:
            yield self.env.timeout(duration)
            self.waited = self.env.now - t0
            return None
        except simpy.Interrupt:
            self.waited = self.env.now - t0
            return self.take_events()

    def wait_event(self, event: simpy.Event):
        """Wait for ``event``; None when it fired, else the interrupting causes."""
        t0 = self.env.now
        try:
            yield event
            self.waited = self.env.now - t0
            return None
        except simpy.Interrupt:
            self.waited = self.env.now - t0
            return self.take_events()

    def step_time(self, sizes: tuple[int, ...], held: int) -> float | None:
        """A step's time with pipelines of ``sizes`` nodes and ``held`` workers (None: the
        step-time table has no entry that small)."""
        key = (sizes, held)
        if key not in self._step_cache:
            self._step_cache[key] = formation_time(self.config, sizes, held)
        return self._step_cache[key]

    def step_done(self, duration: float) -> None:
        """A step completed (it took ``duration`` of compute)."""
        if not self.step_times:
            self.counts["first_step_start"] = self.env.now - duration
        self.counts["last_step_end"] = self.env.now
        self.rec.job_step(self, self.env.now - duration, self.env.now)
        self.steps += 1
        self.short.append(self.samples_per_step - self.strategy.step_samples(self))
        self.step_times.append(duration)
        self.work_since_commit += duration
        if self.steps > self.reached:  # new work, not a step redone after a rollback
            self.reached = self.steps
            self._progressed()
        if self.steps >= self.N and not self.done.triggered and not self.final_checkpoint:
            self.done.succeed()

    @property
    def final_checkpoint(self) -> bool:
        """Whether the run ends with a checkpoint of its last steps (the strategy checkpoints
        at all, and the last steps are not yet durable): then the run is done when that
        checkpoint completes (:meth:`commit`), as the training DES does and as Megatron-LM's
        ``pretrain`` saves after its last iteration unless that one was just saved."""
        return self.strategy.checkpoints and self.committed < self.N

    def commit(self, upto: int | None = None) -> None:
        """Steps up to ``upto`` (default: every step done) are durable (a checkpoint completed)."""
        k = self.steps if upto is None else upto
        self.committed = k
        after = self.steps - k
        self.work_since_commit = float(sum(self.step_times[-after:])) if after > 0 else 0.0
        self.checkpoints += 1
        self._progressed()
        if self.committed >= self.N and not self.done.triggered:
            self.done.succeed()

    def rollback(self, elapsed: float) -> None:
        """Lose every step since the last commit and ``elapsed`` of the one in progress."""
        self.rec.job_lost(self.env.now - elapsed, self.env.now, self.work_since_commit + elapsed,
                          self.steps)
        self.lost["lost_pass"] += self.work_since_commit + elapsed
        self.counts["lost_work"] += self.work_since_commit + elapsed
        self.steps = self.committed
        del self.short[self.committed:]
        self.work_since_commit = 0.0

    def abort(self, elapsed: float) -> None:
        """Lose only ``elapsed`` of the step in progress."""
        self.rec.job_lost(self.env.now - elapsed, self.env.now, elapsed, self.steps)
        self.lost["lost_pass"] += elapsed
        self.counts["lost_work"] += elapsed

    def _progressed(self) -> None:
        self.progress_t = self.env.now

    # -- run --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Start everything, run until ``N`` steps are done (or max_time); the metrics."""
        c, env = self.config, self.env
        self.failure_model.start()
        for w, fw in zip(self.workers, self.fm_workers, strict=True):
            w.fm_up = fw.up
        self._wire_presence()
        if self.rec.on:  # the timeline: processes, down intervals, preemptions (listeners only)
            self.rec.start_job(self)
        for w in self.workers:
            if w.alive:
                self._boot(w, self.strategy.boot)
                self._schedule_notice(w)
        for ks, rng in zip(self.hosts, self._spot_rngs, strict=False):
            env.process(self._spot([self.workers[k] for k in ks], rng))
        self.proc = env.process(self.strategy.coordinate(self))
        ends = [self.done]
        stop = c.max_time
        if stop < math.inf and not isinstance(c.failure_trace, (str, type(None))):
            stop = min(stop, c.failure_trace.duration)
        if stop < math.inf:  # inclusive: every event at exactly stop happens first
            ends.append(self.instant.stop_at(stop))
        from .watch import JobWatchdog

        watch = JobWatchdog(self)
        if watch.limit < math.inf:
            ends.append(watch.event)
        idle = False
        try:
            env.run(until=ends[0] if len(ends) == 1 else env.any_of(ends))
        except RuntimeError as exc:  # nothing will ever happen again: the job cannot progress
            if "No scheduled events left" not in str(exc):
                raise
            idle = True
        self.rec.close(env.now)
        out = self.metrics()
        if idle:
            out["stall_reason"] = ("no step can finish and nothing is left to happen: "
                                   + watch.diagnose().split(": ", 1)[-1])
        elif watch.fired or (not self.done.triggered
                             and env.now - self.progress_t >= watch.scale):
            out["stall_reason"] = watch.diagnose()
        return out

    def _wire_presence(self) -> None:
        c = self.config
        named = isinstance(c.failure_trace, str)
        from ...failures import read_trace

        listed = set(read_trace(c.failure_trace).intervals) if named else set()
        self._spot_listeners: list[list[Any]] = [[] for _ in self.workers]
        for w, fw in zip(self.workers, self.fm_workers, strict=True):
            tb = c.failure_trace is not None and (not named or w.name in listed)
            p = Presence(self.env, fw.own_up, trace_billed=tb, bill=True,
                         avail=c.mtbf < math.inf, series=c.price_series)
            fw.on_own_change(p.own)
            self._spot_listeners[w.index].append(p.spot)
            w.presence = p

    def metrics(self) -> dict[str, Any]:
        """The run's metrics (:data:`sim.training.METRICS` and :data:`JOB_METRICS`)."""
        c, env = self.config, self.env
        wall = env.now
        nan = math.nan
        finished = self.done.triggered
        steps = self.steps
        samples = steps * self.samples_per_step
        if any(self.short):  # a strategy whose steps train fewer (Varuna's B // D per replica)
            samples -= math.fsum(self.short)
        delivered = steps * c.microbatches
        hours = [w.presence.bill.total(wall) / c.hour for w in self.workers]  # type: ignore[union-attr]
        series_cost = None
        if c.price is None and c.price_series is not None:
            series_cost = float(sum(w.presence.bill.priced(wall) for w in self.workers)) / c.hour  # type: ignore[union-attr]
        if c.mtbf < math.inf:
            avail = float(np.mean([w.presence.avail.total(wall) / wall if wall > 0  # type: ignore[union-attr]
                                   else float(w.alive) for w in self.workers]))
        else:
            avail = float(np.mean([fw.own_availability(wall) for fw in self.fm_workers]))
        out: dict[str, Any] = training_record(
            c, wall=wall, finished=finished, delivered=delivered, quality=delivered,
            samples=samples, quality_samples=samples, step_times=self.step_times,
            steps_done=float(steps), hours=hours, series_cost=series_cost, availability=avail,
            lost=self.lost, measured={
                "throughput_steady": nan, "bubble_fraction": nan, "utilisation": nan,
                "latency_mean": nan,
                "drop_rate": nan,  # no microbatch is dropped here: a lost step is counted as work
                "mean_quality": 1.0 if delivered else nan,
                "mean_skipped": 0.0 if delivered else nan,
                "passes": nan, "lost_passes": nan, "reroutes": nan, "recomputes": nan,
                "skips": 0.0, "waits": 0.0,
                "restarts": float(self.restarts), "checkpoints": float(self.checkpoints),
                "preemptions": float(self.preemptions)})
        for k in JOB_METRICS:
            out[k] = float(self.counts[k])
        return {k: out[k] for k in (*METRICS, *JOB_METRICS)}


def job_model(config: Any, streams: Streams, *, recorder: Any = None) -> dict[str, Any]:
    """One replication of a step-level strategy as flat metrics (a model for ``replicate``);
    ``recorder`` (a :class:`sim.timeline.Recorder`) records its events as it runs."""
    return JobSystem(config, streams, recorder=recorder).run()
