"""Trainers: what a step is, and what a drop, a blocked microbatch or a lost stage means.

:class:`StepTrainer` (GPipe, 1F1B, SWARM) runs ``N`` steps of ``m``
microbatches, each closed by the gradient all-reduce among the replicas of
each stage that took part and the optimizer step, with checkpoints every ``K``
steps and, under a restart model, restarts from the last checkpoint.
:class:`AsyncTrainer` feeds ``N m`` microbatches with no step barrier.

The trainer's coordinator is a generator method; a failure that loses the
step reaches it as ``process.interrupt(cause)`` with a frozen
:class:`~sim.training.replica.StageLost` or
:class:`~sim.training.replica.StepLost`, during work, checkpoint and restart
alike.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import simpy

from .replica import Aborted, Microbatch, StageLost, StepLost

__all__ = ["Trainer", "StepTrainer", "AsyncTrainer", "Step"]


class Step:
    """One attempt at a training step."""

    __slots__ = ("index", "remaining", "fwd_pending", "parked", "participants", "done",
                 "delivered", "quality", "fast")

    def __init__(self, index: int, m: int, stages: int) -> None:
        self.index = index
        self.remaining = m
        self.fwd_pending = m
        self.parked: list[Microbatch] = []
        self.participants: list[set] = [set() for _ in range(stages)]
        self.done: simpy.Event | None = None
        self.delivered = 0
        self.quality = 0.0
        self.fast: _FastestK | None = None


class _FastestK:
    """A fastest-k step's books: each pipeline's microbatches, finished ones, the first done."""

    __slots__ = ("total", "left", "fwd_left", "parked", "finished", "done", "cut", "mbs", "pipe")

    def __init__(self, pipes: int) -> None:
        self.pipe: dict[int, int] = {}  # id(microbatch) -> its pipeline, as routed at stage 0
        self.total = [0] * pipes  # microbatches routed to pipeline p
        self.left = [0] * pipes  # of them finished or dropped
        self.fwd_left = [0] * pipes  # forwards still to finish (GPipe's per-pipeline barrier)
        self.parked: list[list[Microbatch]] = [[] for _ in range(pipes)]
        self.finished: list[tuple[Microbatch, float]] = []
        self.done: list[int] = []  # pipelines in the order they finished
        self.cut = False
        self.mbs: list[Microbatch] = []


class Trainer:
    """Accounting shared by both trainers."""

    def __init__(self, config: Any, env: simpy.Environment, flow: Any, schedule: Any) -> None:
        self.c = config
        self.env = env
        self.flow = flow
        self.schedule = schedule
        self.quality_of = config.quality
        self.samples = 0.0
        self.attempted = 0
        self.delivered = 0
        self.dropped = 0
        self.quality_sum = 0.0
        self.latency_sum = 0.0
        self.skipped_sum = 0
        self.step_times: list[float] = []
        self.compute_time = 0.0
        self.compute_busy = 0.0
        self.compute_down = 0.0  # worker-time of the replicas not live in the compute phases
        self.phases: list[tuple[float, float]] = []  # each step's compute phase (start, end)
        self.finish_times: list[float] = []
        self.restarts = 0
        self.checkpoints = 0
        self.steps_done = 0
        self.proc: simpy.Process | None = None
        self.done = env.event()
        self.rec = flow.rec  # the timeline's recorder (sim.timeline; NULL: off)
        flow.trainer = self

    def worker_compute(self, workers: int, now: float) -> list[float]:
        """The ``workers`` workers' times in the steps' compute phases while live.

        A multiset, not indexed by worker: the workers with down spans come first (in the
        flow's order), then the ones always live; callers take its mean, min and max.

        ``compute_time`` less the part of the worker's spans not live (down, waiting for its
        replacement or fetching its weights: the flow's :class:`~sim.training.flow.DownClock`)
        that falls inside the compute phases, so ``sum`` is ``workers compute_time -
        compute_down`` (up to rounding). A worker that was always live has ``compute_time``
        itself (a run without failures: every worker, as before)."""
        spans = self.flow.down.spans_at(now)
        out = [self.compute_time] * workers
        if not spans or not self.phases:
            return out
        starts = [a for a, _b in self.phases]
        done = [0.0]  # compute-phase time before each phase's start
        for a, b in self.phases:
            done.append(done[-1] + (b - a))

        def before(t: float) -> float:  # compute-phase time in [0, t]
            k = bisect.bisect_right(starts, t) - 1
            if k < 0:
                return 0.0
            a, b = self.phases[k]
            return done[k] + min(t, b) - a

        for i, sp in enumerate(spans.values()):
            out[i] = self.compute_time - sum(before(b) - before(a) for a, b in sp)
        return out

    # hooks the flow calls ---------------------------------------------------------
    def participated(self, j: int, rep: Any) -> None:
        """``rep`` of stage ``j`` served a pass of the current step (sync participants)."""

    def all_live(self) -> None:
        """Every stage has a live replica again."""

    def stage_lost(self, j: int) -> None:
        """Stage ``j`` has no live replica left (its weights are gone)."""

    def replica_lost(self, rep: Any) -> None:
        """``rep``, live, went down (its stage may have other live replicas)."""

    def forward_done(self, mb: Microbatch) -> None:
        """``mb`` finished its forward pass at the last stage."""
        raise NotImplementedError  # pragma: no cover

    def finished(self, mb: Microbatch) -> None:
        """``mb`` finished (its backward pass at stage 0, or its last forward)."""
        raise NotImplementedError  # pragma: no cover

    def blocked(self, mb: Microbatch, j: int) -> None:
        """``mb`` met out stage ``j`` with no skip and no wait left."""
        raise NotImplementedError  # pragma: no cover

    def _delivered(self, mb: Microbatch, now: float | None = None) -> None:
        if now is None:
            now = self.env.now
        self.delivered += 1
        self.quality_sum += self.quality_of[mb.skipped]
        self.latency_sum += now - mb.t0
        self.skipped_sum += mb.skipped

    def _busy(self) -> float:
        return sum(r.busy_time for r in self.flow.replicas)


class StepTrainer(Trainer):
    """Steps of ``m`` microbatches with a barrier, sync, optimizer step, checkpoints."""

    def __init__(self, config: Any, env: simpy.Environment, flow: Any, schedule: Any) -> None:
        super().__init__(config, env, flow, schedule)
        self.step: Step | None = None
        self.kept: dict[int, tuple[int, float]] = {}
        self.restart_model = config.restart_cost is not None
        self.active = False
        self._pending = False
        self._live_ev: simpy.Event | None = None
        self.next_id = 0
        self._in_step: list[Microbatch] = []
        self.traffic = flow.traffic  # the run's one adapter from traffic to time
        self.track = self.traffic.track
        flow.track = self.track
        # progress bookkeeping for the stall watchdog (:class:`Stall`): the last time a
        # checkpoint completed or a step went beyond the best reached, and what the run
        # did since (restarts, time waiting for every stage to have a live replica)
        self.best = 0
        self.progress_t = 0.0
        self.stall_restarts = 0
        self.stall_wait = 0.0
        self.waiting_since: float | None = None
        self.out_since: dict[int, float] = {}
        self.all_live_t: float | None = None  # last time every stage had a live replica

    # hooks ------------------------------------------------------------------------------
    def participated(self, j: int, rep: Any) -> None:
        self.step.participants[j].add(rep)  # type: ignore[union-attr]

    def forward_done(self, mb: Microbatch) -> None:
        st = mb.step
        if not self.schedule.phase_barrier:
            self.flow.start_backward(mb)
            return
        if st.fast is not None:  # GPipe per pipeline: its backwards once its forwards are done
            self._fwd_left(st.fast, mb, park=True)
            return
        st.parked.append(mb)
        st.fwd_pending -= 1
        if st.fwd_pending == 0:
            self._release(st)

    def _release(self, st: Step) -> None:
        parked, st.parked = st.parked, []
        for mb in parked:
            self.flow.start_backward(mb)

    def finished(self, mb: Microbatch) -> None:
        st = mb.step
        if st.fast is not None:
            st.fast.finished.append((mb, self.env.now))
            self._pipe_left(st, mb)
            return
        self._delivered(mb)
        st.delivered += 1
        st.quality += self.quality_of[mb.skipped]
        self._left(st)

    def blocked(self, mb: Microbatch, j: int) -> None:
        if self.restart_model:
            self._interrupt(StepLost(j, mb.id, self.env.now))
            return
        mb.dead = True
        self.dropped += 1
        self.rec.drop(mb, j, self.env.now)
        self.flow.release(mb)
        st = mb.step
        if st.fast is not None:
            if self.schedule.phase_barrier and not mb.back and mb.target < 0:
                self._fwd_left(st.fast, mb, park=False)
            self._pipe_left(st, mb)
            return
        if self.schedule.phase_barrier and not mb.back and mb.target < 0:
            st.fwd_pending -= 1
            if st.fwd_pending == 0:
                self._release(st)
        self._left(st)

    # fastest k of n (sync_wait) ----------------------------------------------------------
    def _fwd_left(self, fk: _FastestK, mb: Microbatch, *, park: bool) -> None:
        p = fk.pipe.get(id(mb), -1)
        if p < 0:  # not routed at stage 0 (skipped it): in no pipeline's count
            if park:
                self.flow.start_backward(mb)
            return
        if park:
            fk.parked[p].append(mb)
        fk.fwd_left[p] -= 1
        if fk.fwd_left[p] == 0:
            parked, fk.parked[p] = fk.parked[p], []
            for x in parked:
                self.flow.start_backward(x)

    def _pipe_left(self, st: Step, mb: Microbatch) -> None:
        """``mb`` finished or was dropped: its pipeline may be done, and with it the step."""
        fk = st.fast
        p = fk.pipe.get(id(mb), -1)
        st.remaining -= 1
        if p >= 0:
            fk.left[p] += 1
            if fk.left[p] == fk.total[p]:
                fk.done.append(p)
                if len(fk.done) == self.c.sync_wait:
                    self._cut(st)
                    return
        self._left_fast(st)

    def _left_fast(self, st: Step) -> None:
        if st.remaining == 0 and st.done is not None and not st.done.triggered:
            st.done.succeed()

    def _cut(self, st: Step) -> None:
        """The K-th pipeline is done: the others' microbatches are dropped, their passes
        interrupted (stragglers ``cancel``) or left to finish for nothing (``drop``)."""
        fk = st.fast
        fk.cut = True
        left = {id(mb) for mb, _ in fk.finished}
        for mb in fk.mbs:
            if not mb.dead and id(mb) not in left:
                mb.dead = True
                self.dropped += 1
                self.flow.release(mb)
        if self.c.stragglers == "cancel":
            cause = Aborted(st.index, self.env.now)
            for rep in self.flow.replicas:
                rep.abort(cause)
        st.remaining = 0
        self._left_fast(st)

    def _close_fast(self, st: Step) -> set[int]:
        """Count the step's samples: the microbatches of its first K pipelines; the rest drop.
        The indices of those pipelines (the step's all-reduce is among them)."""
        fk = st.fast
        used = set(fk.done[: self.c.sync_wait])
        for mb, t in fk.finished:
            if fk.pipe.get(id(mb), -1) in used:
                self._delivered(mb, t)
                st.delivered += 1
                st.quality += self.quality_of[mb.skipped]
            else:
                self.dropped += 1
        return used

    def _left(self, st: Step) -> None:
        st.remaining -= 1
        if st.remaining == 0 and st.done is not None and not st.done.triggered:
            st.done.succeed()

    def stage_lost(self, j: int) -> None:
        self.out_since[j] = self.env.now
        if self.restart_model:
            self._interrupt(StageLost(j, self.env.now))

    def all_live(self) -> None:
        self.all_live_t = self.env.now
        ev = self._live_ev
        if ev is not None and not ev.triggered:
            self._live_ev = None
            ev.succeed()

    def _interrupt(self, cause: Any) -> None:
        if self.active and not self._pending:
            self._pending = True
            proc = self.proc
            if self.env.active_process is proc:
                # raised from the coordinator itself (releasing a step into an out
                # stage): deliver it at its next yield
                ev = self.env.timeout(0.0)
                ev.callbacks.append(lambda _e: proc.interrupt(cause) if proc.is_alive else None)
            else:
                proc.interrupt(cause)  # type: ignore[union-attr]

    # the coordinator ------------------------------------------------------------------
    def run(self):
        """Steps until ``N`` are done, with checkpoints and restarts."""
        c, env = self.c, self.env
        N, K = c.steps, c.checkpoint_every
        k = ckpt = self.steps_done = 0
        since = env.now  # work after this instant is lost by a restart
        if not self.flow.n_out:
            self.all_live_t = env.now
        self.active = True
        while k < N:
            try:
                self.kept[k] = yield from self._step(k)
                k += 1
                self.steps_done = k
                if k > self.best:
                    self.best = k
                    self._progress()
                if K and (k % K == 0 or k == N):
                    t_ck = env.now
                    write = self.traffic.checkpoint()
                    if write is None:
                        yield env.timeout(c.checkpoint_cost)
                        self.flow.lost["checkpoint"] += c.checkpoint_cost
                    else:  # the parameters cross the network to the checkpoint node
                        t0 = env.now
                        yield write
                        yield env.timeout(c.checkpoint_cost)
                        self.flow.lost["checkpoint"] += env.now - t0
                    self.checkpoints += 1
                    self.rec.checkpoint(t_ck, env.now, steps=k)
                    ckpt, since = k, env.now
                    self._progress()
            except simpy.Interrupt:
                self._pending = False
                self.rec.step_lost(env.now)
                self._abort()
                self.flow.lost["restart"] += env.now - since
                k = self.steps_done = ckpt
                t_re = env.now
                self.rec.restart_start(t_re)
                yield from self._restart()
                self.rec.restart(t_re, env.now, from_step=ckpt)
                since = env.now
        self.active = False
        self.done.succeed()

    def _progress(self) -> None:
        """A step beyond the best reached, or a checkpoint: the stall watchdog starts over."""
        self.progress_t = self.env.now
        self.stall_restarts = 0
        self.stall_wait = 0.0

    def _abort(self) -> None:
        st = self.step
        cause = Aborted(st.index if st is not None else -1, self.env.now)
        if st is not None:
            st.parked = []
        for mb in self._in_step:
            mb.dead = True
        self.traffic.cancel_step()
        self.flow.abort(cause)

    def _restart(self):
        """Wait for every stage to have a live replica, then pay the restart cost."""
        env = self.env
        while True:
            self.restarts += 1
            self.stall_restarts += 1
            t0 = env.now
            try:
                if self.flow.n_out:
                    self._live_ev = env.event()
                    self.waiting_since = env.now
                    try:
                        yield self._live_ev
                    finally:
                        self.stall_wait += env.now - self.waiting_since
                        self.waiting_since = None
                yield env.timeout(self.c.restart_cost)
                self.flow.lost["restart"] += env.now - t0
                return
            except simpy.Interrupt:
                self._pending = False
                self.flow.lost["restart"] += env.now - t0

    def _step(self, k: int):
        c, env, flow = self.c, self.env, self.flow
        m, L = c.microbatches, c.stages
        st = self.step = Step(k, m, L)
        t0 = env.now
        self.rec.step_start(k, t0)
        busy0 = self._busy()
        down0 = flow.down.at(t0)
        mbs = [Microbatch(self.next_id + i, st, L, t0) for i in range(m)]
        self.next_id += m
        self._in_step = mbs
        self.attempted += m
        flow.begin_step()
        fk = None
        if c.sync_wait is not None:
            fk = st.fast = _FastestK(c.replicas[0])
            fk.mbs = mbs
        for mb in mbs:
            flow.arrive_fwd(mb, 0)
            if fk is not None and mb.pipe >= 0:  # routed (positive pass times: none done yet)
                fk.pipe[id(mb)] = mb.pipe
                fk.total[mb.pipe] += 1
                fk.fwd_left[mb.pipe] += 1
        self.traffic.begin_sync(flow.stages, mbs)  # an overlapped all-reduce's counts
        if st.remaining:
            st.done = env.event()
            yield st.done
        t_compute = env.now
        self.compute_time += t_compute - t0
        self.phases.append((t0, t_compute))
        busy = self._busy() - busy0
        self.compute_busy += busy
        down = flow.down.at(t_compute) - down0
        self.compute_down += down
        if self.rec.on:  # counted now: a restart in the sync or optimizer step loses the step
            self.rec.step_computed(t_compute, busy=busy, workers=c.workers, down=down)
        used = self._close_fast(st) if fk is not None else None
        # the all-reduce and the optimizer step: (the closed form's all-reduce, the tail)
        sync, tail = yield from self.traffic.step_tail(st.participants, used)
        if self.rec.on:
            self.rec.step_end(k, t_compute, env.now, sync=sync, tail=tail, busy=busy,
                              workers=c.workers, down=down)
        self.step_times.append(env.now - t0)
        return st.delivered, st.quality


class AsyncTrainer(Trainer):
    """``N m`` microbatches with no step barrier: saturated, Poisson or evenly spaced."""

    def __init__(self, config: Any, env: simpy.Environment, flow: Any, schedule: Any,
                 rng: Any) -> None:
        super().__init__(config, env, flow, schedule)
        self.rng = rng
        self.total = config.steps * config.microbatches
        self.remaining = self.total

    def forward_done(self, mb: Microbatch) -> None:
        self.flow.start_backward(mb)

    def finished(self, mb: Microbatch) -> None:
        self._delivered(mb)
        self.finish_times.append(self.env.now)
        self._left()

    def blocked(self, mb: Microbatch, j: int) -> None:
        mb.dead = True
        self.dropped += 1
        self.rec.drop(mb, j, self.env.now)
        self.flow.release(mb)
        self._left()

    def _left(self) -> None:
        self.remaining -= 1
        self.steps_done = (self.total - self.remaining) // self.c.microbatches
        if self.remaining == 0:
            self.done.succeed()

    def run(self):
        """Release the microbatches; the run ends when the last one leaves."""
        c, env, flow, L = self.c, self.env, self.flow, self.c.stages
        self.attempted = self.total
        if c.arrival == "saturated":
            for i in range(self.total):
                flow.arrive_fwd(Microbatch(i, None, L, env.now), 0)
            return
        gap = 1.0 / c.arrival_rate
        for i in range(self.total):
            if i:
                yield env.timeout(float(self.rng.exponential(gap)) if c.arrival == "poisson"
                                  else gap)
            flow.arrive_fwd(Microbatch(i, None, L, env.now), 0)

    def step_times_async(self) -> list[float]:
        """Time between the completions of successive groups of ``m`` microbatches."""
        m = self.c.microbatches
        t = sorted(self.finish_times)
        marks = [0.0] + [t[i] for i in range(m - 1, len(t), m)]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def steady_throughput(finish_times: list[float], trim: float = 0.1) -> float:
    """Completions per time in ``(T1, T2]``, T1 and T2 the ``trim`` and ``1 - trim`` completions.

    Counting the completions in the half-open window (not the ranks between the
    two quantiles) keeps simultaneous completions from being counted at both ends.
    """
    t = sorted(finish_times)
    n = len(t)
    lo, hi = int(n * trim), n - 1 - int(n * trim)
    if hi <= lo or t[hi] <= t[lo]:
        return math.nan
    t1, t2 = t[lo], t[hi]
    return (bisect.bisect_right(t, t2) - bisect.bisect_right(t, t1)) / (t2 - t1)
