"""Reconfiguration from pipeline templates (Oobleck): re-form the survivors, lose one step.

The job runs pipelines instantiated from templates, one per node count from
``min_nodes`` (default the config's depth ``L``) to ``L``: a pipeline of
``n`` nodes holds the config's ``L`` stages merged into ``n`` contiguous
groups (:func:`~sim.training.strategies.steptime.merge_stages`). From ``N``
ready workers it forms the best set: for each number of pipelines ``P``
between ``ceil(N / L)`` and ``N // min_nodes``, ``N`` split as evenly as the
templates allow, the one with the shortest step (ties: more pipelines, more
copies of each stage); with a step-time table by workers held, the most
pipelines (every worker is used, the table gives the time).

After a loss the job drops the step in progress and re-forms from the
workers that are ready (spares first, then anyone who joined since) at cost
``reconfigure``; a loss during the reconfiguration starts it over. Every
stage of the model is held by one node of each pipeline, so a loss is
survivable while each stage keeps a live holder in some pipeline; when the
losses since the last formation have taken every holder of a stage, the
state is gone: the job rolls back to its last checkpoint (every ``every``
steps at cost ``checkpoint``; ``every=0``: none, back to step 0) and restarts
(cost ``restart``). Workers that join are used at the next reconfiguration
(``grow=True``: the job also reconfigures at a step end when they would add a
pipeline).

A preemption notice (``notice="drain"``): the job reconfigures without the
leaving node at the last step end from which that completes before the preemption
(not at all when the job ends by then),
losing no step.

Defaults, from the Oobleck artifact's Oobleck simulator (SymbioticLab/Oobleck,
branch ``sosp23-artifact``, ``tools/simulator/oobleck_simulator.py``, MIT):
a reconfiguration of 2 s (its BERT-large rendezvous; 3, 6 and 10 s for its
larger models), templates of at least ``L`` nodes (its 12-stage target), no
reconfiguration when nodes join, a node ready 45 s after it is added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import check_choice, check_int, check_nonnegative
from .base import Formation, register_strategy
from .common import JobStrategy, RunState, check_rate
from .job import Lost
from .steptime import merge_stages, stage_work

__all__ = ["Reconfiguration", "Coverage"]


class Coverage:
    """Which node of each pipeline holds each stage, and which holders are lost."""

    def __init__(self, pipelines: tuple[tuple[int, ...], ...], work: tuple[float, ...]) -> None:
        L = len(work)
        self.holders: list[list[int]] = [[] for _ in range(L)]  # stage -> its holders
        self.where: dict[int, list[int]] = {}
        for pipe in pipelines:
            sizes = merge_stages(work, len(pipe)) if len(pipe) < L else (1,) * L
            j = 0
            for w, n in zip(pipe, sizes, strict=True):
                for s in range(j, j + n):
                    self.holders[s].append(w)
                    self.where.setdefault(w, []).append(s)
                j += n
        self.dead: set[int] = set()

    def lose(self, w: int) -> bool:
        """Node ``w`` is lost; True when some stage now has no live holder (the state is gone)."""
        if w not in self.where:
            return False
        self.dead.add(w)
        return any(all(h in self.dead for h in self.holders[s]) for s in self.where[w])


@register_strategy
@dataclass(frozen=True)
class Reconfiguration(JobStrategy):
    """Oobleck's re-forming from pipeline templates (module notes).

    Parameters
    ----------
    reconfigure : float
        Time of a reconfiguration (default 2 s, the artifact's BERT-large).
    min_nodes : int or None
        Nodes of the smallest template (None: the config's depth ``L``).
    every : int
        Steps between checkpoints for a lost state (0, the default: none).
    checkpoint : float
        Time of a checkpoint (default 15.8 s, as checkpoint-restart's).
    restart : float
        Time of the restart after a lost state (default 55.5 s, as checkpoint-restart's).
    grow : bool
        Reconfigure at a step end when joined workers would add a pipeline.
    notice : {"drain", "ignore"}
    boot : float
        Default 45 s.
    checkpoint_bandwidth : float or None
        With ``--plan``: each node's write and read rate to the checkpoint storage (bytes
        per second; a unit: ``2GB/s``). A checkpoint then takes the most bytes a node of the
        formation writes over it and a restart ``restart`` plus the most bytes a node reads
        (:mod:`sim.profiles.formations`); None (default): ``checkpoint`` and ``restart``.
    """

    name = "reconfiguration"
    times = ("boot", "reconfigure", "checkpoint", "restart")
    rates = ("checkpoint_bandwidth",)
    reconfigure: float = 2.0
    min_nodes: int | None = None
    every: int = 0
    checkpoint: float = 15.8
    restart: float = 55.5
    grow: bool = False
    notice: str = "drain"
    boot: float = 45.0
    checkpoint_bandwidth: float | None = None

    def check_params(self) -> None:
        check_nonnegative("reconfigure", self.reconfigure)
        if self.min_nodes is not None:
            check_int("min_nodes", self.min_nodes, low=1)
        check_int("every", self.every, low=0)
        check_nonnegative("checkpoint", self.checkpoint)
        check_nonnegative("restart", self.restart)
        check_choice("notice", self.notice, ("drain", "ignore"))
        if self.checkpoint_bandwidth is not None:
            check_rate("checkpoint_bandwidth", self.checkpoint_bandwidth)

    def check(self, config: Any) -> None:
        super().check(config)
        if self.min_nodes is not None:
            check_int("min_nodes", self.min_nodes, low=1, high=config.stages)

    # -- formation ------------------------------------------------------------------
    def smallest(self, config: Any) -> int:
        return config.stages if self.min_nodes is None else self.min_nodes

    @staticmethod
    def split(N: int, P: int) -> tuple[int, ...]:
        """``N`` nodes over ``P`` pipelines as evenly as possible, larger first."""
        q, r = divmod(N, P)
        return tuple([q + 1] * r + [q] * (P - r))

    def formation(self, job: Any, ready: list[int]) -> Formation | None:
        c = job.config
        st = job.run_state
        leaving = st.leaving if st is not None else {}
        ready = [w for w in ready if w not in leaving]
        L, N = c.stages, len(ready)
        low = self.smallest(c)
        hi_p = N // low
        lo_p = max(1, math.ceil(N / L))
        if hi_p < lo_p:
            if N < low:
                return None
            hi_p = lo_p = N // low  # templates cannot use all: pipelines of L, the rest spare
        best = None
        table = c.step_times
        options = range(hi_p, lo_p - 1, -1)  # more pipelines first: ties keep them
        if table is not None and table.per == "workers":
            options = range(hi_p, hi_p - 1, -1)
        for P in options:
            used = min(N, P * L)
            sizes = self.split(used, P)
            t = job.step_time(sizes, N)
            if t is not None and (best is None or t < best[0] * (1 - 1e-12)):
                best = (t, sizes)
        if best is None:
            return None
        t, sizes = best
        pipes, k = [], 0
        for n in sizes:
            pipes.append(tuple(ready[k:k + n]))
            k += n
        return Formation(tuple(pipes), tuple(ready[k:]), N, t)

    def participants(self, job: Any, f: Formation) -> frozenset[int]:
        return frozenset(f.workers)

    def form(self, job: Any, st: RunState):
        f = yield from self.reform(job, st, "reconfigurations", self.reconfigure)
        work = stage_work(job.config)
        st.extra["coverage"] = Coverage(f.pipelines, work)
        st.participants = frozenset(f.workers)
        return

    # -- steps ------------------------------------------------------------------------
    def step(self, job: Any, st: RunState):
        f = job.formation
        t = f.step_time
        st.step_end = job.env.now + t
        causes = yield from job.wait(t)
        st.step_end = math.inf
        if causes is not None:
            self._broken(job, st, job.waited, causes)
            return
        job.step_done(t)
        if job.done.triggered:
            return
        if self.every and (job.steps - job.committed >= self.every or job.steps >= job.N):
            ok = yield from self.checkpoint_blocking(job, st, self.checkpoint_time(job))
            if not ok:
                self._broken(job, st, 0.0, [])
                return
            if job.done.triggered:  # the checkpoint after the last step
                return
        drain = self.drain_due(job, st, f.step_time, self.reconfigure)
        grow = False
        if self.grow:
            ready = job.ready_workers()
            spare = [w for w in ready if w not in st.participants]
            grow = bool(spare) and (len(f.pipelines) < len(ready) // self.smallest(job.config))
        if drain or grow:
            job.counts["notices_used"] += len(drain)
            job.formation = None  # reconfigure at this step end, no step lost

    def _broken(self, job: Any, st: RunState, elapsed: float, causes: list[Any]) -> None:
        """A participant was lost: lose the step (or everything since the checkpoint)."""
        if st.extra.get("fatal"):
            job.rollback(elapsed)
            job.counts["fatal_failures"] += 1
        else:
            job.abort(elapsed)
        job.formation = None

    # -- events -----------------------------------------------------------------------
    def lost(self, job: Any, w: Any) -> None:
        st = job.run_state
        if st is None:
            return
        st.leaving.pop(w.index, None)
        cov: Coverage | None = st.extra.get("coverage")
        gone = cov is not None and cov.lose(w.index)
        if gone and not st.extra.get("fatal"):
            if job.formation is None:  # lost while re-forming: the restart rolls back now
                job.rollback(0.0)
                job.counts["fatal_failures"] += 1
            st.extra["fatal"] = True
        if w.index in st.participants:
            job.interrupt(Lost(w.index, job.env.now))

    def noticed(self, job: Any, w: Any, at: float) -> None:
        st = job.run_state
        if st is None or self.notice == "ignore" or w.index not in st.participants:
            return
        st.leaving[w.index] = at
