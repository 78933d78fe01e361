"""Pieces the step-level strategies share: the job coordinator loop, pipelines of depth L,
waiting for workers, blocking checkpoints, and what each strategy keeps per run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .base import Formation, Strategy
from .job import Joined, Lost, Notice

__all__ = ["JobStrategy", "RunState", "depth_pipelines", "check_rate"]


def check_rate(name: str, value: Any) -> None:
    """Refuse a rate that is not a finite number > 0 (bytes per second)."""
    from ...errors import check

    check(isinstance(value, (int, float)) and not isinstance(value, bool)
          and 0 < value < math.inf, name, "a rate > 0 in bytes per second, or with a unit "
          "(2GB/s, 10Gbit/s), or none", value)


class RunState:
    """What a strategy keeps for one run (the strategy itself is a frozen value)."""

    def __init__(self) -> None:
        self.started = False
        self.participants: frozenset[int] = frozenset()
        self.step_end = math.inf
        self.leaving: dict[int, float] = {}  # announced preemptions among the participants
        self.emergency = False
        self.failures = 0  # losses that interrupted the job (the measured failure rate)
        self.extra: dict[str, Any] = {}


def depth_pipelines(job: Any, ready: list[int], *, table_all: bool = True) -> Formation | None:
    """``P = min(n // L, r)`` pipelines of the config's depth ``L`` from ``n`` ready workers
    (in pipeline order, JobSystem.ready_workers), the rest spares; None when no pipeline fits or the step-time table
    has no entry that small."""
    c = job.config
    L = c.stages
    P = min(len(ready) // L, max(c.replicas))
    if P == 0:
        return None
    pipes = tuple(tuple(ready[p * L:(p + 1) * L]) for p in range(P))
    spares = tuple(ready[P * L:])
    held = len(ready)
    t = job.step_time((L,) * P, held)
    if t is None:
        return None
    return Formation(pipes, spares, held, t)


@dataclass(frozen=True)
class JobStrategy(Strategy):
    """A strategy run by the job engine: the coordinator loop and shared phases.

    Subclasses define ``formation(job, ready)``, ``step(job, state)`` and the event
    hooks ``lost``, ``joined``, ``noticed``.
    """

    # -- what a checkpoint and a restart cost ---------------------------------------------
    def check_bandwidth(self, config: Any) -> None:
        """Refuse a ``checkpoint_bandwidth`` that cannot apply: without a plan (the bytes are
        the plan's), with no checkpoints (``every=0``), or beside a ``checkpoint`` time."""
        from ...errors import check

        bw = getattr(self, "checkpoint_bandwidth", None)
        if bw is None:
            return
        check(hasattr(config.step_times, "checkpoint_bytes"), "checkpoint_bandwidth",
              "given only with --plan (the checkpoint's bytes are the plan's; without a plan "
              "give the checkpoint's time, checkpoint=)", bw)
        check(self.every > 0, "checkpoint_bandwidth", f"given only with every > 0 ({self.name} "
              "with every=0 takes no checkpoint)", bw)
        default = type(self)().checkpoint
        check(self.checkpoint == default, "checkpoint", "unset (or --checkpoint-cost unset) with "
              "checkpoint_bandwidth (the checkpoint's time is then the plan's bytes over it)",
              self.checkpoint)

    def drain_due(self, job: Any, st: RunState, step: float, cost: float) -> list[int]:
        """The leaving participants to re-form without at this step end (``cost``: the
        re-formation), none until the last step end from which it still ends before a
        preemption: one more ``step`` (and the checkpoint due after it) would not leave that
        time. Draining at the first step end gave up the leaving nodes' last steps, up to
        the notice's length, for nothing (module notes of the strategies). Nor when the next
        step is the last and it (with its checkpoint) ends by the preemption: the job is done
        before the node leaves (a re-formation then only slowed the last step)."""
        now = job.env.now
        fits = {w: at for w, at in st.leaving.items() if w in st.participants and now + cost <= at}
        every = getattr(self, "every", 0)
        nxt = job.steps + 1
        span = step + (self.checkpoint_time(job) if every and (nxt - job.committed >= every
                                                               or nxt >= job.N) else 0.0)
        ends = now + span if nxt >= job.N else math.inf  # when the job ends, if no one leaves
        if any(now + span + cost > at and ends > at for at in fits.values()):
            return list(fits)
        return []

    def checkpoint_time(self, job: Any) -> float:
        """A checkpoint of the current formation: ``checkpoint``, or with ``checkpoint_bandwidth``
        the most bytes a node of the formation writes over it (the nodes write at once, each at
        that rate: :meth:`sim.profiles.formations.PlanStepTimes.checkpoint_bytes`)."""
        bw = getattr(self, "checkpoint_bandwidth", None)
        if bw is None:
            return self.checkpoint
        return job.config.step_times.checkpoint_bytes(job.formation.sizes)[0] / bw

    def restart_time(self, job: Any, f: Formation) -> float:
        """A restart into formation ``f``: ``restart``, and with ``checkpoint_bandwidth`` plus
        the most bytes a node of ``f`` reads of the checkpoint over it."""
        bw = getattr(self, "checkpoint_bandwidth", None)
        if bw is None:
            return self.restart
        return self.restart + job.config.step_times.checkpoint_bytes(f.sizes)[1] / bw

    @property
    def checkpoints(self) -> bool:
        """Whether the strategy takes checkpoints (then one follows the last step too)."""
        return bool(getattr(self, "every", 0))

    def check(self, config: Any) -> None:
        from ...errors import check

        check(config.schedule != "async", "strategy",
              f"a schedule with a step barrier (gpipe, 1f1b, swarm) for {self.name}",
              config.schedule)
        self.check_bandwidth(config)

    # -- the job asks ---------------------------------------------------------------
    def lost(self, job: Any, w: Any) -> None:
        st = job.run_state
        if st is not None and w.index in st.participants:
            st.leaving.pop(w.index, None)
            job.interrupt(Lost(w.index, job.env.now))

    def joined(self, job: Any, w: Any) -> None:
        """A worker became ready: used at the next formation (the artifacts' rule)."""

    def step_samples(self, job: Any) -> float:
        """The samples a step of the running formation trains: the global batch."""
        return job.samples_per_step

    def noticed(self, job: Any, w: Any, at: float) -> None:
        """A participant will be preempted at ``at``."""

    # -- the coordinator ---------------------------------------------------------------
    def coordinate(self, job: Any):
        """Form a configuration, run steps, until the job is done."""
        job.run_state = st = RunState()
        while not job.done.triggered:
            if job.formation is None:
                yield from self.form(job, st)
                continue
            yield from self.step(job, st)

    def formation(self, job: Any, ready: list[int]) -> Formation | None:
        raise NotImplementedError  # pragma: no cover

    def participants(self, job: Any, f: Formation) -> frozenset[int]:
        """Workers whose loss interrupts the job: the formation's, and with a step-time table
        by workers held, every worker held (the table counts them)."""
        st = job.config.step_times
        if st is not None and st.per == "workers":
            return frozenset(f.workers) | frozenset(f.spares)
        return frozenset(f.workers)

    def wait_for_workers(self, job: Any) -> Any:
        """Wait until a formation is possible; the formation."""
        while True:
            f = self.formation(job, job.ready_workers())
            if f is not None:
                return f
            yield from job.wait_event(job.change())
            job.rec.job_wait(job.env.now - job.waited, job.env.now)
            job.lost["stall"] += job.waited
            job.counts["wait_time"] += job.waited

    def pay(self, job: Any, st: RunState, f: Formation, cost: float, kind: str):
        """Pay a formation cost with ``f``'s participants: True when it ran through, False
        when a participant was lost (the caller starts over)."""
        st.participants = self.participants(job, f)
        ok = yield from self.hold(job, cost, "restart")
        return ok

    def reform(self, job: Any, st: RunState, count: str, cost: float):
        """Wait for workers and pay the cost of (re)forming the job; the formation.

        After a fatal loss (``st.extra["fatal"]``) the cost is :meth:`restart_time` and a
        restart is counted; after any other loss once the job has started it is ``cost``
        and ``job.counts[count]`` is counted; the first formation is free. A loss while
        paying starts over (a fatal loss stays fatal)."""
        while True:
            f = yield from self.wait_for_workers(job)
            fatal = st.extra.pop("fatal", False)
            if fatal:
                job.restarts += 1
                pay = self.restart_time(job, f)
            elif st.started:
                job.counts[count] += 1
                pay = cost
            else:
                pay = 0.0
            ok = yield from self.pay(job, st, f, pay, "restart")
            if not ok:
                st.extra["fatal"] = fatal or st.extra.get("fatal", False)
                continue
            st.started = True
            job.formation = f
            return f

    def checkpoint_blocking(self, job: Any, st: RunState, cost: float):
        """A blocking checkpoint of ``cost``: True when it completed (and committed)."""
        ok = yield from self.hold(job, cost, "checkpoint")
        if ok:
            job.commit()
        return ok

    def hold(self, job: Any, duration: float, kind: str):
        """Spend ``duration`` (accounted as lost time ``kind``) unless a participant is lost:
        True when it ran through. Other interruptions (notices) do not cut it short."""
        left = duration
        t0 = job.env.now
        while left > 0:
            causes = yield from job.wait(left)
            job.lost[kind] += job.waited
            left -= job.waited
            if causes is None:
                break
            if any(isinstance(c, Lost) for c in causes):
                job.rec.job_hold(kind, t0, job.env.now, False)
                return False
        job.rec.job_hold(kind, t0, job.env.now, True)
        return True

    @staticmethod
    def losses(causes: list[Any] | None) -> list[Lost]:
        return [c for c in (causes or []) if isinstance(c, Lost)]

    @staticmethod
    def notices(causes: list[Any] | None) -> list[Notice]:
        return [c for c in (causes or []) if isinstance(c, Notice)]

    @staticmethod
    def joins(causes: list[Any] | None) -> list[Joined]:
        return [c for c in (causes or []) if isinstance(c, Joined)]
