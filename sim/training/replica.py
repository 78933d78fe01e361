"""Replicas as servers, the spot preemption process, and the interrupt causes.

A :class:`Replica` serves one pass at a time from its queues (backward passes
and recomputations first, then forward passes, then the stage's shared FIFO),
taking ``t / speed`` for a pass of nominal time ``t``. Its state is driven by
the failure model's worker (``fm_up``) and by its spot slot (``spot_up``):
going down interrupts the pass or weight download in progress with the
failure's cause; coming back up it first downloads its stage's weights (unless its
flow's ``skip_download`` says its DiLoCo group's model fetch brings them), then
serves. The engine (:class:`sim.training.system.TrainingSystem`) is told of
every completed and lost pass and of every live/down change.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy
from simpy.events import NORMAL, URGENT

from ..failures import failure_timeout

__all__ = ["Failed", "Aborted", "StageLost", "StepLost", "Refetch", "WorkerState", "Replica",
           "SpotSlot", "Microbatch"]


@dataclass(frozen=True)
class Failed:
    """A replica went down (worker failure, domain outage, or spot preemption)."""

    replica: str
    time: float
    preempted: bool = False


@dataclass(frozen=True)
class Aborted:
    """The pass belongs to a step lost to a restart."""

    step: int
    time: float


@dataclass(frozen=True)
class StageLost:
    """Every replica of a stage is down: the stage's current weights are gone."""

    stage: int
    time: float


@dataclass(frozen=True)
class StepLost:
    """A microbatch met an out stage with no skip and no wait left."""

    stage: int
    microbatch: int
    time: float


@dataclass(frozen=True)
class Refetch:
    """A weight download in progress is cut, not by a failure: the worker's DiLoCo group will
    fetch the model (an outer step fired while it was down), which brings its weights."""

    group: int
    time: float


class WorkerState:
    """A worker's up/down state machine, shared by every training engine's workers.

    A worker is up while its failure-model worker is up (``fm_up``) and its
    spot slot holds an instance (``spot_up``). :meth:`set_state` applies one
    transition and calls :meth:`went_down` (with the failure's cause) or
    :meth:`came_up` when the worker's up state changes; the subclass (a
    replica server, a framework device, a step-level job's worker) says what
    that means and holds ``fm_up``, ``spot_up`` and ``name``.
    """

    __slots__ = ()

    fm_up: bool
    spot_up: bool
    name: str

    @property
    def up(self) -> bool:
        """The worker is up (failure model) and present (spot)."""
        return self.fm_up and self.spot_up

    def worker_changed(self, comp: Any, up: bool, now: float) -> None:
        """A failure-model component's change callback: this worker went up or down."""
        self.set_state(fm_up=up, cause=Failed(self.name, now))

    def set_state(self, *, fm_up: bool | None = None, spot_up: bool | None = None,
                  cause: Any = None) -> None:
        """Apply a failure-model or spot transition."""
        was = self.fm_up and self.spot_up
        if fm_up is not None:
            self.fm_up = fm_up
        if spot_up is not None:
            self.spot_up = spot_up
        now = self.fm_up and self.spot_up
        if was and not now:
            self.went_down(cause)
        elif now and not was:
            self.came_up()

    def went_down(self, cause: Any) -> None:  # pragma: no cover - every subclass says
        raise NotImplementedError

    def came_up(self) -> None:  # pragma: no cover - every subclass says
        raise NotImplementedError


class _Signal(simpy.Event):
    """A triggered event (its outcome set, as ``Timeout`` sets it) that its owner schedules.

    A server owns two and schedules each again once it has been processed, with
    ``env.schedule(event, priority, delay)`` after setting ``callbacks``: its work
    event (the pass or download in hand, NORMAL priority after the work's
    duration, where a process's ``timeout`` would be scheduled) and its wake-up
    (NORMAL, no delay, where a process's idle event would be triggered; the
    delay is left at SimPy's default ``0``, as ``succeed()`` and ``interrupt()``
    leave it, so the clock's type is the same too). A
    failure is delivered by a fresh one at URGENT priority carrying the
    ``cause``, as
    ``process.interrupt`` schedules SimPy's ``Interruption``. SimPy's own
    ``Timeout`` and ``Interruption`` set the outcome the same way (their
    ``__init__`` inlines ``Event.__init__``), so each lands at the same point
    of the event order as the generator process's event would, without an
    allocation per pass.
    """

    cause: Any = None

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.callbacks = []
        self._value = None
        self._ok = True


class Microbatch:
    """A microbatch's progress: stage, direction, holders of its activations, skips."""

    __slots__ = ("id", "step", "stage", "back", "target", "skipped", "holders", "t0",
                 "dead", "pipe", "waiting", "at", "ready")

    def __init__(self, id_: int, step: Any, stages: int, t0: float) -> None:
        self.id = id_
        self.step = step
        self.stage = 0
        self.back = False
        self.target = -1  # >= 0 while recomputing forwards up to that stage
        self.skipped = 0
        self.holders: list[Any] = [None] * stages  # (replica, epoch) per stage, None: skipped
        self.t0 = t0
        self.dead = False
        self.pipe = -1
        self.waiting = False
        self.at: Any = None  # with a network: the replica holding its latest data
        self.ready = t0  # when its forward pass at ``stage`` was queued (for the queue time)


class Replica(WorkerState):
    """One replica server of one stage.

    Attributes
    ----------
    stage, index : int
    speed : float
    live : bool
        Up and holding its stage's weights (it may be routed to).
    epoch : int
        Incremented at every failure: activations held under an older epoch are gone.
    load : int
        Passes queued at it plus the one in service (kept up to date, not computed).
    busy_time : float
        Time spent in passes (completed or lost).
    passes : int
        Passes completed.
    queue_time : float
        Time the completed forward passes waited in a queue at this stage before this
        replica started them (from when each was queued at the live stage).

    Notes
    -----
    The server is a state machine run by the callbacks of the events it waits on
    (no generator process): an idle wake-up, the weight download, the pass in
    service. It takes the steps a generator process would take, at the same
    points of the event order: each timeout is scheduled where a process would
    yield it, a wake-up where a process's idle event would be triggered, and a
    failure reaches it through an URGENT event scheduled when the failure
    happens, as ``process.interrupt`` does. What this saves, per pass, is the
    process machinery (resuming a generator, the active-process bookkeeping).

    The common completion (no sync tracking, no recomputation, the next stage
    reached with no transfer time and routed afresh) is handled inline by
    :meth:`_on_pass`, with the next stage's live set, queue, idle set and
    routing policy wired by :meth:`wire`; every other case goes through
    :meth:`sim.training.flow.ReplicaFlow.pass_done`, which does the same thing the
    general way.
    """

    __slots__ = (
        "system", "env", "stage", "index", "speed", "name", "hi", "lo", "shared", "idle",
        "limit", "in_flight", "peak_in_flight", "load", "fm_up", "spot_up", "loaded", "live",
        "epoch", "current", "busy_time", "passes", "queue_time", "fwd_work", "bwd_work", "draw",
        "_waiting", "_in_timeout", "_downloading", "_work_ev", "_wake_ev", "_t0", "_work",
        "_schedule", "_shi", "_slo",
        "_on_up_cbs", "_on_work_cbs", "_on_pass_cbs", "_on_downloaded_cbs", "_on_interrupt_cb",
        "_inline", "_fwd_kind", "_next_live", "_next_lo", "_next_idle", "_next_policy",
        "_next_stage", "_prev_stage", "_uniform", "ordered", "owed", "held", "gate", "_net_dl",
        "_hold",
        "bwd_hook", "rec", "settle",
    )

    def __init__(self, system: Any, stage: int, index: int, speed: float, name: str,
                 shared: tuple[deque, deque], limit: int | None, idle: dict) -> None:
        self.system = system
        self.env: simpy.Environment = system.env
        self.stage, self.index, self.speed, self.name = stage, index, speed, name
        self.hi: deque = deque()
        self.lo: deque = deque()
        self.shared = shared
        self._shi, self._slo = shared  # the stage's urgent and forward queues
        self.idle = idle  # the stage's live replicas waiting for work (an ordered set)
        self.limit = limit
        self.in_flight = 0
        self.peak_in_flight = 0
        self.load = 0  # passes queued here plus the one in service
        self.fm_up = True
        self.spot_up = True
        self.loaded = True
        self.live = False
        self.epoch = 0
        self.current: Microbatch | None = None
        self.busy_time = 0.0
        self.passes = 0
        self.queue_time = 0.0
        # the pass times of this replica's stage at its speed (a draw scales them)
        self.fwd_work = system.work[stage][index][0] / speed
        self.bwd_work = system.work[stage][index][1] / speed
        self.ordered = False  # 1F1B's fixed order (set by the flow)
        self.owed = 0  # forwards still owed to this replica in the step (fixed order)
        self.settle: Any = None  # the stage policy's ``settled`` when it learns from completions
        self.draw = system.draw
        self._in_timeout = False  # a pass or download is in hand and not yet interrupted
        self._downloading = False
        self._t0 = 0.0
        self._work = 0.0
        self._schedule = self.env.schedule
        self._work_ev = _Signal(self.env)  # the pass or download in hand
        self._wake_ev = _Signal(self.env)
        # callbacks lists made once (the events take them again and again)
        self._waiting: list | None = None  # what to wake (for work, or up), None: not waiting
        self._on_up_cbs = [self._on_up]
        self._on_work_cbs = [self._on_work]
        self._on_pass_cbs = [self._on_pass]
        self._on_downloaded_cbs = [self._on_downloaded]
        self._on_interrupt_cb = self._on_interrupt
        self._inline = False
        self._fwd_kind = 2
        self._next_live: list = []
        self._next_lo: deque | None = None
        self._next_idle: dict | None = None
        self._next_policy: Any = None
        self._next_stage = -1
        self._prev_stage = -1
        self._uniform: Any = None
        self.held = 0  # blocking transfers this replica takes part in (no pass starts meanwhile)
        self.gate: Any = None  # blocking transfers: asked before each pass, True to wait
        self._net_dl: Any = None  # a weight download over the network in progress
        self._hold: Any = None  # its group's model fetch that a copy ended before waits for
        #: told (replica, work) as each backward pass starts (an overlapped all-reduce)
        self.bwd_hook: Any = None
        self.rec = system.rec  # the timeline's recorder (sim.timeline; NULL: off)

    def wire(self, *, inline: bool, fwd_kind: int, next_live: list, next_lo: deque | None,
             next_idle: dict | None, next_policy: Any, prev_stage: int, uniform: Any) -> None:
        """Wire the inline completion path (called by the flow before the run starts).

        Parameters
        ----------
        inline : bool
            Whether completions may be handled inline at all (not while the
            trainer tracks each stage's participants).
        fwd_kind : int
            After a forward pass: 0 the next stage is reached at once and routed
            afresh (inline); 1 it is reached at once on a fixed pipeline
            (``ReplicaFlow.arrive_fwd``); 2 otherwise (``ReplicaFlow.forward_next``).
        next_live, next_lo, next_idle, next_policy
            The next stage's live replicas, shared forward queue, idle set and
            routing policy (None for a policy that always answers the shared queue).
        prev_stage : int
            The previous stage when it is reached at once after a backward pass, else -1.
        uniform : callable
            The flow's uniform draws (for the routing policy).
        """
        self._inline = inline
        self._fwd_kind = fwd_kind
        self._next_live, self._next_lo, self._next_idle = next_live, next_lo, next_idle
        self._next_policy = next_policy
        self._next_stage = self.stage + 1
        self._prev_stage = prev_stage
        self._uniform = uniform

    # -- state ---------------------------------------------------------------------
    def went_down(self, cause: Any) -> None:
        """The worker went down: its activations are gone and the work in hand is interrupted."""
        was_live = self.live
        self.live = False
        self.loaded = False
        self.epoch += 1
        self.in_flight = 0
        self.system.replica_down(self, was_live)
        if self._in_timeout:
            self._interrupt(cause)

    def came_up(self) -> None:
        """The worker came back: resume the server (it downloads its weights first)."""
        self.wake()

    def push(self, mb: Microbatch, urgent: bool) -> None:
        """Queue ``mb`` here (backward passes and recomputations are urgent) and wake."""
        (self.hi if urgent else self.lo).append(mb)
        self.load += 1
        cbs = self._waiting
        if cbs is not None:
            self._waiting = None
            self.idle.pop(self, None)
            ev = self._wake_ev
            ev.callbacks = cbs
            self._schedule(ev, NORMAL)

    def wake(self) -> None:
        """Resume the server if it waits for work or for coming up."""
        cbs = self._waiting
        if cbs is not None:
            self._waiting = None
            self.idle.pop(self, None)
            ev = self._wake_ev
            ev.callbacks = cbs
            self._schedule(ev, NORMAL)

    def abort(self, cause: Aborted) -> None:
        """Interrupt the pass in service if its microbatch is dead."""
        if self._in_timeout and self.current is not None and self.current.dead:
            self._interrupt(cause)

    def cut_download(self, cause: Refetch) -> None:
        """Cut the weight download in progress, if any: the replica asks its flow's
        ``skip_download`` again (it skips it now, or downloads afresh)."""
        if self._downloading and self._in_timeout:
            self._interrupt(cause)

    def drain(self) -> list[Microbatch]:
        """Empty the private queues (the replica went down); what they held."""
        out = list(self.hi) + list(self.lo)
        self.hi.clear()
        self.lo.clear()
        self.load = 1 if self.current is not None else 0
        return out

    # -- the server -------------------------------------------------------------------
    def start(self) -> None:
        """Start serving (what the server does at time 0: wait, or look for work)."""
        self._outer()

    def _outer(self) -> None:
        """The server's top level: wait while down, download the weights, else serve."""
        while True:
            if not (self.fm_up and self.spot_up):
                self._waiting = self._on_up_cbs
                return
            if not self.loaded:
                skip = self.system.skip_download
                if skip is not None and skip(self):  # its group's model fetch brings them
                    self.loaded = True
                    self.system.replica_live(self)
                    continue
                self._t0 = self.env.now
                self._in_timeout = True
                self._downloading = True
                dl = self.system.traffic.download(self)
                if dl is not None:  # over the network: its arrival ends the download
                    self._net_dl = dl
                    dl.callbacks.append(self._on_net_downloaded)
                    return
                ev = self._work_ev
                ev.callbacks = self._on_downloaded_cbs
                self.env.schedule(ev, NORMAL, self.system.download_time)
                return
            if self._serve():
                return

    def _serve(self, now: float | None = None) -> bool:
        """Start the next pass while live; True once waiting (for work or a pass), False if not live.

        ``now`` is the current time when the caller knows it (a pass that just
        ended at ``t0 + work``, the very sum SimPy's clock holds), else read from
        the environment.

        The next pass comes from the replica's own urgent queue, the stage's urgent
        queue, then, within the forward limit, its own and the stage's forward
        queues (dead microbatches dropped on the way).
        """
        gate = self.gate
        if gate is not None and gate(self):  # held by a blocking transfer: it resumes us
            return True
        hi = self.hi
        while self.live:  # the hot loop: one timeout per pass
            if self.ordered and not self.system.disturbed:
                mb = self._fixed_next()
            elif hi:
                mb = hi.popleft()
                if mb.dead:
                    self.load -= 1
                    continue
            elif (shi := self._shi):
                mb = shi.popleft()
                if mb.dead:
                    continue
                self.load += 1
            elif (limit := self.limit) is not None and self.in_flight >= limit:
                mb = None
            elif (lo := self.lo):
                mb = lo.popleft()
                if mb.dead:
                    self.load -= 1
                    continue
            elif (slo := self._slo):
                mb = slo.popleft()
                if mb.dead:
                    continue
                self.load += 1
            else:
                mb = None
            if mb is None:
                self._waiting = self._on_work_cbs
                self.idle[self] = None
                return True
            work = self.bwd_work if mb.back else self.fwd_work
            draw = self.draw
            if draw is not None:
                work *= draw()
            if self.bwd_hook is not None and mb.back:
                self.bwd_hook(self, work)
            if work <= 0.0:  # a zero-time pass cannot be interrupted: no event
                self.load -= 1
                if self.settle is not None and not mb.back:
                    self.settle(self, self.env.now - mb.ready, mb)
                self.system.pass_done(self, mb, 0.0)
                continue
            self.current = mb
            self._t0 = self.env.now if now is None else now
            self._work = work
            self._in_timeout = True
            ev = self._work_ev
            ev.callbacks = self._on_pass_cbs
            self._schedule(ev, NORMAL, work)
            return True
        return False

    def _fixed_next(self) -> Microbatch | None:
        """The next pass in the fixed order, or None to wait for it (dead ones dropped).

        A forward while fewer than the limit are in flight and forwards remain
        owed (or queued), else a backward; the replica waits for the kind whose
        turn it is even when the other is queued. Recomputations go first.
        """
        hi, lo = self.hi, self.lo
        while True:
            if hi and hi[0].target >= 0:
                mb = hi.popleft()
            elif self.in_flight < self.limit and (self.owed > 0 or lo):  # type: ignore[operator]
                if not lo:
                    return None
                mb = lo.popleft()
            else:
                if not hi:
                    return None
                mb = hi.popleft()
            if mb.dead:
                self.load -= 1
                continue
            return mb

    def _on_up(self, _ev: Any) -> None:
        self._outer()

    def _on_work(self, _ev: Any) -> None:
        if not self._serve():
            self._outer()

    def _held(self) -> bool:
        """Whether the weights just copied wait for the DiLoCo group's model fetch in progress
        (the flow's ``hold_download``): the peer they came from streams what it receives, so
        the copy holds the fetched model when that fetch ends (:meth:`_on_hold`), not before."""
        hold = self.system.hold_download
        ev = None if hold is None else hold(self)
        if ev is None or ev.processed:
            return False
        self._hold = ev
        ev.callbacks.append(self._on_hold)
        return True

    def _on_hold(self, ev: Any) -> None:
        if ev is not self._hold:  # cut meanwhile (a failure, or an outer step): not ours
            return
        self._hold = None
        self._downloaded()

    def _on_net_downloaded(self, ev: Any) -> None:
        if ev is not self._net_dl:  # cut by a failure (and withdrawn): not ours any more
            return
        self._net_dl = None
        if self._held():
            return
        self._downloaded()

    def _downloaded(self) -> None:
        """Its weights are in (its own download ended, or the group's fetch it was held
        for): the download's time counts as lost, and it is live."""
        self._in_timeout = False
        self._downloading = False
        system = self.system
        system.lost["download"] += self.env.now - self._t0
        self.rec.download(self, self._t0, self.env.now)
        self.loaded = True
        system.replica_live(self)
        self._outer()

    def resume(self) -> None:
        """Serve again after a blocking transfer released this replica."""
        if not self._serve():
            self._outer()

    def _on_downloaded(self, _ev: Any) -> None:
        if self._held():
            return
        self._in_timeout = False
        self._downloading = False
        system = self.system
        system.lost["download"] += system.download_time
        self.rec.download(self, self._t0, self.env.now)
        self.loaded = True
        system.replica_live(self)
        self._outer()

    def _on_pass(self, _ev: Any) -> None:
        """The pass in service is done: move the microbatch on, start the next pass."""
        self._in_timeout = False
        mb = self.current
        self.current = None
        self.load -= 1
        work = self._work
        self.busy_time += work
        if self.rec.on:
            self.rec.pass_done(self, mb, self._t0, work)
        if not mb.back:  # type: ignore[union-attr]
            self.queue_time += self._t0 - mb.ready  # type: ignore[union-attr]
            if self.settle is not None:  # from the routing choice (mb.ready) to now
                self.settle(self, self.env.now - mb.ready, mb)  # type: ignore[union-attr]
        if not self._inline or mb.target >= 0:  # type: ignore[union-attr]
            self.system.pass_done(self, mb, work)
        elif mb.back:  # type: ignore[union-attr]
            # ReplicaFlow.pass_done's backward branch, then ReplicaFlow.arrive_back when it holds
            self.passes += 1
            if self.in_flight > 0:
                self.in_flight -= 1
            j = self._prev_stage
            if j < 0:
                self.system.backward_next(mb, self.stage)
            elif not mb.dead:  # type: ignore[union-attr]
                mb.stage = j  # type: ignore[union-attr]
                h = mb.holders[j]  # type: ignore[union-attr]
                if h is not None and h[0].live and h[0].epoch == h[1]:
                    h[0].push(mb, True)
                else:
                    self.system.arrive_back(mb, j)
        else:
            # ReplicaFlow.pass_done's forward branch, then ReplicaFlow.arrive_fwd when routed afresh
            self.passes += 1
            mb.holders[self.stage] = (self, self.epoch)  # type: ignore[union-attr]
            n = self.in_flight + 1
            self.in_flight = n
            if n > self.peak_in_flight:
                self.peak_in_flight = n
            kind = self._fwd_kind
            if kind == 0:
                if not mb.dead:  # type: ignore[union-attr]
                    j = self._next_stage
                    mb.stage = j  # type: ignore[union-attr]
                    mb.ready = self.env.now  # type: ignore[union-attr]
                    live = self._next_live
                    if not live:
                        self.system.out_stage(mb, j)
                    else:
                        policy = self._next_policy
                        rep = None if policy is None else policy.choose(live, self._uniform)
                        if rep is None:
                            self._next_lo.append(mb)  # type: ignore[union-attr]
                            idle = self._next_idle
                            if idle:
                                next(iter(idle)).wake()
                        else:
                            rep.push(mb, False)
            elif kind == 1:
                self.system.arrive_fwd(mb, self._next_stage)
            else:
                self.system.forward_next(mb, self.stage)
        if not self._serve(self._t0 + work):  # the clock: SimPy scheduled this pass at t0 + work
            self._outer()

    def _interrupt(self, cause: Any) -> None:
        """Deliver ``cause`` to the pass or download in hand, as ``process.interrupt`` would.

        A second failure before the interrupt lands does not interrupt again;
        the work's event is replaced (the old one stays scheduled, with no callback).
        """
        self._in_timeout = False
        self._hold = None  # a copy waiting for its group's fetch: cut with it
        dl = self._net_dl
        if dl is not None:  # a network download: withdrawn, its arrival ignored
            self._net_dl = None
            self.system.traffic.cancel(dl)
        ev = _Signal(self.env)
        ev.callbacks.append(self._on_interrupt_cb)
        ev.cause = cause
        self._work_ev.callbacks = []
        self._work_ev = _Signal(self.env)
        self.env.schedule(ev, URGENT)

    def _on_interrupt(self, ev: _Signal) -> None:
        env = self.env
        if self._downloading:
            self._downloading = False
            self.system.lost["download"] += env.now - self._t0
            self.rec.download(self, self._t0, env.now, cut=True)
            self._outer()
            return
        mb = self.current
        self.current = None
        self.load -= 1
        self.busy_time += env.now - self._t0
        self.rec.pass_lost(self, mb, self._t0, env.now)
        self.system.pass_lost(self, mb, ev.cause, env.now - self._t0)
        if not self._serve():
            self._outer()


class SpotSlot:
    """A preemptible worker slot: preempted after Exp(mtbf), replaced ``replace_time`` later."""

    def __init__(self, replica: Replica, mtbf: float, replace_time: float,
                 rng: np.random.Generator) -> None:
        self.replica, self.mtbf, self.replace_time, self.rng = replica, mtbf, replace_time, rng
        self.unbilled = 0.0  # time without a worker (not paid for), gaps closed so far
        self.preemptions = 0
        self._gap_start: float | None = None
        #: called with False at a preemption and True at the replacement (billing clocks)
        self.listeners: list[Any] = []
        #: called with the time of the next preemption as soon as it is drawn (notices)
        self.on_draw: list[Any] = []

    def unbilled_until(self, now: float) -> float:
        """Time without a worker up to ``now`` (an open replacement gap included)."""
        return self.unbilled + (now - self._gap_start if self._gap_start is not None else 0.0)

    def run(self, env: simpy.Environment):
        """Preempt and replace, for ever."""
        rep = self.replica
        while True:
            d = float(self.rng.exponential(self.mtbf))
            for cb in self.on_draw:
                cb(env.now + d)
            yield failure_timeout(env, d)  # after every other event of its instant
            self.preemptions += 1
            for cb in self.listeners:
                cb(False)
            rep.set_state(spot_up=False, cause=Failed(rep.name, env.now, preempted=True))
            self._gap_start = env.now
            yield env.timeout(self.replace_time)
            self.unbilled += env.now - self._gap_start
            self._gap_start = None
            for cb in self.listeners:
                cb(True)
            rep.set_state(spot_up=True)
