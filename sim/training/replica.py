"""Replicas as servers, the spot preemption process, and the interrupt causes.

A :class:`Replica` serves one pass at a time from its queues (backward passes
and recomputations first, then forward passes, then the stage's shared FIFO),
taking ``t / speed`` for a pass of nominal time ``t``. Its state is driven by
the failure model's worker (``fm_up``) and by its spot slot (``spot_up``):
going down interrupts the pass or weight download in progress with the
failure's cause; coming back up it first downloads its stage's weights, then
serves. The engine (:class:`sim.training.system.TrainingSystem`) is told of
every completed and lost pass and of every live/down change.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

__all__ = ["Failed", "Aborted", "StageLost", "StepLost", "Replica", "SpotSlot", "Microbatch"]


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


class Microbatch:
    """A microbatch's progress: stage, direction, holders of its activations, skips."""

    __slots__ = ("id", "step", "stage", "back", "target", "skipped", "holders", "t0",
                 "dead", "pipe", "waiting")

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


class Replica:
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
    """

    def __init__(self, system: Any, stage: int, index: int, speed: float, name: str,
                 shared: tuple[deque, deque], limit: int | None, idle: dict) -> None:
        self.system = system
        self.env: simpy.Environment = system.env
        self.stage, self.index, self.speed, self.name = stage, index, speed, name
        self.hi: deque = deque()
        self.lo: deque = deque()
        self.shared = shared
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
        self._idle: simpy.Event | None = None
        self._in_timeout = False
        self.proc: simpy.Process | None = None
        # the pass times of this replica's stage at its speed (a draw scales them)
        self.fwd_work = system.fwd[stage] / speed
        self.bwd_work = system.bwd[stage] / speed
        self.draw = system.draw

    @property
    def up(self) -> bool:
        """The worker is up (failure model) and present (spot)."""
        return self.fm_up and self.spot_up

    # -- state ---------------------------------------------------------------------
    def set_state(self, *, fm_up: bool | None = None, spot_up: bool | None = None,
                  cause: Any = None) -> None:
        """Apply a failure-model or spot transition; going down interrupts the work in hand."""
        was = self.fm_up and self.spot_up
        if fm_up is not None:
            self.fm_up = fm_up
        if spot_up is not None:
            self.spot_up = spot_up
        now = self.fm_up and self.spot_up
        if was and not now:
            was_live = self.live
            self.live = False
            self.loaded = False
            self.epoch += 1
            self.in_flight = 0
            self.system.replica_down(self, was_live)
            if self._in_timeout:
                self._in_timeout = False
                self.proc.interrupt(cause)  # type: ignore[union-attr]
        elif now and not was:
            self.wake()

    def push(self, mb: Microbatch, urgent: bool) -> None:
        """Queue ``mb`` here (backward passes and recomputations are urgent) and wake."""
        (self.hi if urgent else self.lo).append(mb)
        self.load += 1
        ev = self._idle
        if ev is not None:
            self._idle = None
            self.idle.pop(self, None)
            ev.succeed()

    def wake(self) -> None:
        """Resume the server if it waits for work or for coming up."""
        ev = self._idle
        if ev is not None:
            self._idle = None
            self.idle.pop(self, None)
            ev.succeed()

    def abort(self, cause: Aborted) -> None:
        """Interrupt the pass in service if its microbatch is dead."""
        if self._in_timeout and self.current is not None and self.current.dead:
            self._in_timeout = False
            self.proc.interrupt(cause)  # type: ignore[union-attr]

    def drain(self) -> list[Microbatch]:
        """Empty the private queues (the replica went down); what they held."""
        out = list(self.hi) + list(self.lo)
        self.hi.clear()
        self.lo.clear()
        self.load = 1 if self.current is not None else 0
        return out

    def take(self) -> Microbatch | None:
        """The next pass to serve (dead microbatches are dropped on the way)."""
        hi = self.hi
        while hi:
            mb = hi.popleft()
            if not mb.dead:
                return mb
            self.load -= 1
        shi, slo = self.shared
        while shi:
            mb = shi.popleft()
            if not mb.dead:
                self.load += 1
                return mb
        if self.limit is not None and self.in_flight >= self.limit:
            return None
        lo = self.lo
        while lo:
            mb = lo.popleft()
            if not mb.dead:
                return mb
            self.load -= 1
        while slo:
            mb = slo.popleft()
            if not mb.dead:
                self.load += 1
                return mb
        return None

    # -- the server process ---------------------------------------------------------
    def serve(self):
        """Serve passes while live; download weights after every recovery."""
        env, system = self.env, self.system
        timeout = env.timeout
        take = self.take
        pass_done = system.pass_done
        draw = self.draw
        fwd_work, bwd_work = self.fwd_work, self.bwd_work
        while True:
            if not (self.fm_up and self.spot_up):
                self._idle = env.event()
                yield self._idle
                continue
            if not self.loaded:
                dt = system.download_time
                t0 = env.now
                self._in_timeout = True
                try:
                    yield timeout(dt)
                except simpy.Interrupt:
                    system.lost["download"] += env.now - t0
                    continue
                self._in_timeout = False
                system.lost["download"] += dt
                self.loaded = True
                system.replica_live(self)
                continue
            hi, shi = self.hi, self.shared[0]
            while self.live:  # the hot loop: one timeout per pass
                if hi and not hi[0].dead:  # fast path: a backward pass waits here
                    mb = hi.popleft()
                elif shi and not shi[0].dead and not hi:
                    mb = shi.popleft()
                    self.load += 1
                else:
                    mb = take()
                if mb is None:
                    self._idle = env.event()
                    self.idle[self] = None
                    yield self._idle
                    continue
                work = bwd_work if mb.back else fwd_work
                if draw is not None:
                    work *= draw()
                if work <= 0.0:  # a zero-time pass cannot be interrupted: no event
                    self.load -= 1
                    pass_done(self, mb, 0.0)
                    continue
                self.current = mb
                t0 = env.now
                self._in_timeout = True
                try:
                    yield timeout(work)
                except simpy.Interrupt as it:
                    self.current = None
                    self.load -= 1
                    self.busy_time += env.now - t0
                    system.pass_lost(self, mb, it.cause, env.now - t0)
                    continue
                self._in_timeout = False
                self.current = None
                self.load -= 1
                self.busy_time += work
                pass_done(self, mb, work)


class SpotSlot:
    """A preemptible worker slot: preempted after Exp(mtbf), replaced ``replace_time`` later."""

    def __init__(self, replica: Replica, mtbf: float, replace_time: float,
                 rng: np.random.Generator) -> None:
        self.replica, self.mtbf, self.replace_time, self.rng = replica, mtbf, replace_time, rng
        self.unbilled = 0.0  # time without a worker (not paid for), gaps closed so far
        self.preemptions = 0
        self._gap_start: float | None = None

    def unbilled_until(self, now: float) -> float:
        """Time without a worker up to ``now`` (an open replacement gap included)."""
        return self.unbilled + (now - self._gap_start if self._gap_start is not None else 0.0)

    def run(self, env: simpy.Environment):
        """Preempt and replace, for ever."""
        rep = self.replica
        while True:
            yield env.timeout(float(self.rng.exponential(self.mtbf)))
            self.preemptions += 1
            rep.set_state(spot_up=False, cause=Failed(rep.name, env.now, preempted=True))
            self._gap_start = env.now
            yield env.timeout(self.replace_time)
            self.unbilled += env.now - self._gap_start
            self._gap_start = None
            rep.set_state(spot_up=True)
