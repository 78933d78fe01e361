"""Checkpoint and restart (Varuna, CheckFreq): roll back to the last checkpoint and re-form.

Every ``every`` steps the job writes a checkpoint of cost ``checkpoint``
(blocking; with ``snapshot="overlapped"`` only a copy of cost ``copy``
blocks, and the write runs beside the training, durable ``checkpoint`` later).
Any loss of a worker the job runs on loses the step in progress and every
step since the last durable checkpoint (a loss during a checkpoint, or
during its background write, loses that checkpoint too). After a restart of
cost ``restart`` the job resumes from the checkpoint with the workers that are
ready, in the largest configuration they form: ``P = n // L`` pipelines of the
config's depth ``L`` (fewer data-parallel replicas; a stage with no worker
left is taken by a spare; with fewer than ``L`` ready workers the job waits).
A loss during the restart starts it over. A checkpoint follows the last step
too (the run is done when it completes), as in the training DES and in
Megatron-LM's ``pretrain``, which saves after its last iteration unless that
one was just saved; before issue 33 the run ended with its last step, one
checkpoint earlier than the DES. Workers that join while the job runs are
used at the next restart, and a worker ready before a restart ends joins that
restart's formation.

The interval: ``interval="fixed"`` (every ``every`` steps), ``"adaptive"``
(re-chosen after each failure from the measured failure rate: the whole
number of steps closest in cost to the exact optimum of
:mod:`sim.analytic.checkpointing`), or
``"overhead"`` (CheckFreq's policy: the fewest steps between checkpoints
that keep the blocking part of a checkpoint within ``overhead_bound`` of
the time computing).

A preemption notice (``notice="checkpoint"``): when a worker the job runs on
announces its preemption, the job checkpoints at the last step end from which
the checkpoint still completes before the preemption (after the current step
if only that fits), or at once (dropping the step in progress) if only that
fits, so the preemption loses only the step in progress (checkpointing after
the first step end lost every step done after it, more than no notice did).

Defaults (seconds; BERT-large on EC2 p3 spot instances, 30 nodes): from the
Oobleck artifact's Varuna simulator (SymbioticLab/Oobleck, branch
``sosp23-artifact``, ``tools/simulator/varuna_simulator.py``, MIT): a
checkpoint every 10 steps costing 15.8 s; a restart of 55.5 s (its 71.3 s
rendezvous at 30 nodes less the 15.8 s it deducts for the checkpoint); a
node ready 45 s after it is added (``boot``, its instance creation time).
CheckFreq (Mohan, Phanishayee, Chidambaram, FAST 2021) bounds the checkpoint
overhead within 3.5 % (``overhead_bound``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import check, check_choice, check_int, check_nonnegative, check_probability
from .base import register_strategy
from .common import JobStrategy, RunState, check_rate, depth_pipelines
from .job import Notice

__all__ = ["CheckpointRestart"]

INTERVALS = ("fixed", "adaptive", "overhead")
SNAPSHOTS = ("blocking", "overlapped")
NOTICE_USES = ("checkpoint", "ignore")


@register_strategy
@dataclass(frozen=True)
class CheckpointRestart(JobStrategy):
    """Checkpoint every K steps; any loss rolls back to the checkpoint and restarts.

    Parameters
    ----------
    every : int
        Steps between checkpoints (>= 1; with ``interval="adaptive"`` the first
        interval). Default 10 (Oobleck artifact, Varuna).
    checkpoint : float
        Time of a checkpoint (default 15.8 s, the artifact's BERT-large value).
    restart : float
        Time of a restart (default 55.5 s, the artifact's at 30 nodes).
    interval : {"fixed", "adaptive", "overhead"}
        How the interval is chosen (module notes).
    overhead_bound : float
        CheckFreq's bound on the checkpoint overhead (default 0.035).
    snapshot : {"blocking", "overlapped"}
        Overlapped: CheckFreq's two-phase checkpoint (``copy`` blocks, the
        write of ``checkpoint`` runs beside the training).
    copy : float
        The blocking copy of an overlapped checkpoint (default 0: ideal overlap).
    notice : {"checkpoint", "ignore"}
        What a preemption notice does.
    boot : float
        Time from a worker coming up to it being ready (default 45 s, the
        artifacts' instance creation time).
    checkpoint_bandwidth : float or None
        With ``--plan``: each node's write and read rate to the checkpoint storage (bytes
        per second; a unit: ``2GB/s``). A checkpoint then takes the most bytes a node of the
        formation writes over it and a restart ``restart`` plus the most bytes a node reads
        (:mod:`sim.profiles.formations`); None (default): ``checkpoint`` and ``restart``.
    """

    name = "checkpoint-restart"
    times = ("boot", "checkpoint", "restart", "copy")
    rates = ("checkpoint_bandwidth",)
    every: int = 10
    checkpoint: float = 15.8
    restart: float = 55.5
    interval: str = "fixed"
    overhead_bound: float = 0.035
    snapshot: str = "blocking"
    copy: float = 0.0
    notice: str = "checkpoint"
    boot: float = 45.0
    checkpoint_bandwidth: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("every", self.every, low=1)
        check_nonnegative("checkpoint", self.checkpoint)
        check_nonnegative("restart", self.restart)
        check_choice("interval", self.interval, INTERVALS)
        check_probability("overhead_bound", self.overhead_bound, open_low=True)
        check_choice("snapshot", self.snapshot, SNAPSHOTS)
        check_nonnegative("copy", self.copy)
        check(self.snapshot == "overlapped" or self.copy == 0, "copy",
              "0 unless snapshot is overlapped", self.copy)
        check_choice("notice", self.notice, NOTICE_USES)
        if self.checkpoint_bandwidth is not None:
            check_rate("checkpoint_bandwidth", self.checkpoint_bandwidth)

    # -- formation ------------------------------------------------------------------
    def formation(self, job: Any, ready: list[int]) -> Any:
        return depth_pipelines(job, ready)

    def form(self, job: Any, st: RunState):
        """Wait for enough workers, then restart (free the first time); a loss restarts it."""
        while True:
            f = yield from self.wait_for_workers(job)
            if st.started:
                job.restarts += 1
            ok = yield from self.pay(job, st, f, self.restart_time(job, f) if st.started else 0.0,
                                     "restart")
            if ok:
                # a worker ready before the restart ends joins it (it waited for the next
                # restart before issue 33, so a replacement that arrived during the restart
                # left the job one pipeline short until the next failure)
                g = self.formation(job, job.ready_workers())
                if g is not None and g.held > f.held:
                    f = g
                    st.participants = self.participants(job, f)
                st.started = True
                job.formation = f
                st.extra.setdefault("interval", self.every)
                st.extra.pop("write", None)
                return

    # -- steps ------------------------------------------------------------------------
    def blocking_part(self, job: Any) -> float:
        return self.copy if self.snapshot == "overlapped" else self.checkpoint_time(job)

    def current_interval(self, job: Any, st: RunState) -> int:
        """Steps between checkpoints now."""
        if self.interval == "fixed":
            return self.every
        t = job.formation.step_time
        if self.interval == "overhead":  # CheckFreq: stall <= bound x compute
            return max(1, math.ceil(self.blocking_part(job) / (self.overhead_bound * t) - 1e-12))
        return st.extra.get("interval", self.every)

    def _adapt(self, job: Any, st: RunState) -> None:
        """After a failure: the interval for the measured failure rate (adaptive)."""
        if self.interval != "adaptive" or job.formation is None:
            return
        M = job.env.now / st.failures
        t = job.formation.step_time
        C = self.blocking_part(job) or 1e-12
        from ...analytic import best_checkpoint_every  # the exact optimum (issue 26)

        st.extra["interval"] = max(1, int(best_checkpoint_every(t, C, M)))

    def step(self, job: Any, st: RunState):
        f = job.formation
        t = f.step_time
        st.step_end = job.env.now + t
        causes = yield from job.wait(t)
        st.step_end = math.inf
        if causes is None:
            job.step_done(t)
            if not job.done.triggered:
                yield from self.after_step(job, st)
            return
        if self.losses(causes):
            self._failed(job, st, job.waited)
            return
        # a notice that leaves no time to finish this step: drop it, checkpoint what is done
        job.abort(job.waited)
        ok = yield from self.checkpoint_now(job, st, emergency=True)
        if not ok:
            self._failed(job, st, 0.0)

    def _failed(self, job: Any, st: RunState, elapsed: float) -> None:
        job.rollback(elapsed)
        st.failures += 1
        # adapt with the failed formation's step time, before it is dissolved (after it,
        # _adapt found no formation and 'adaptive' kept 'every' for the whole run)
        self._adapt(job, st)
        job.formation = None
        st.leaving.clear()
        st.emergency = False
        st.extra.pop("notice_at", None)

    def _notice_need(self, job: Any) -> float:
        """Time from a checkpoint's start to it being durable."""
        c = self.checkpoint_time(job)
        return c if self.snapshot == "blocking" else self.copy + c

    def after_step(self, job: Any, st: RunState):
        last = job.steps >= job.N  # the run ends with a checkpoint of its last steps
        due = job.steps - job.committed >= self.current_interval(job, st) or last
        # a notice's checkpoint waits for the last step end from which it still ends before
        # the preemption (checkpointing at once lost every step done after it to the
        # preemption: more work than without the notice)
        later = (st.emergency and not last and job.env.now + job.formation.step_time
                 + self._notice_need(job) <= st.extra.get("notice_at", -math.inf))
        if not (due or (st.emergency and not later)):
            return
        ok = yield from self.checkpoint_now(job, st, emergency=st.emergency and not later)
        if later and ok:  # a periodic checkpoint: the notice's comes later if one still fits
            if job.env.now + job.formation.step_time + self._notice_need(job) \
                    <= st.extra["notice_at"]:
                st.emergency = True
            else:  # this one was the last that fits: it is the notice's
                job.counts["notices_used"] += 1
                st.extra.pop("notice_at", None)
        if ok and last and self.snapshot == "overlapped":  # done when the write is durable
            causes = yield from job.wait_event(st.extra["write"])
            ok = not self.losses(causes) and job.committed >= job.N
        if not ok:
            self._failed(job, st, 0.0)

    def checkpoint_now(self, job: Any, st: RunState, *, emergency: bool):
        """Checkpoint the steps done: False when a participant was lost meanwhile."""
        st.emergency = False
        if emergency:
            job.counts["notices_used"] += 1
            st.extra.pop("notice_at", None)
        if self.snapshot == "blocking":
            ok = yield from self.checkpoint_blocking(job, st, self.checkpoint_time(job))
            return ok
        write = st.extra.get("write")
        if write is not None and not write.triggered:  # one write at a time (CheckFreq)
            t0 = job.env.now
            causes = yield from job.wait_event(write)
            job.lost["checkpoint"] += job.env.now - t0
            if self.losses(causes):
                return False
        ok = yield from self.hold(job, self.copy, "checkpoint")
        if not ok:
            return False
        self._background_write(job, st)
        return True

    def _background_write(self, job: Any, st: RunState) -> None:
        """The overlapped write: durable ``checkpoint`` later unless the job failed meanwhile."""
        env = job.env
        steps, formation = job.steps, job.formation
        ev = env.timeout(self.checkpoint_time(job))
        st.extra["write"] = ev
        t0 = env.now

        def done(_e: Any) -> None:
            ok = job.formation is formation and job.steps >= steps and job.committed < steps
            job.rec.checkpoint(t0, env.now, proc="job", background=True, committed=ok)
            if ok:
                job.commit(steps)
        ev.callbacks.append(done)

    # -- events -----------------------------------------------------------------------
    def noticed(self, job: Any, w: Any, at: float) -> None:
        st = job.run_state
        if st is None or self.notice == "ignore" or w.index not in st.participants or job.formation is None:
            return
        need = self._notice_need(job)
        now = job.env.now
        if st.step_end + need <= at:
            st.emergency = True  # checkpoint after this step, or a later one that fits
            st.extra["notice_at"] = min(at, st.extra.get("notice_at", math.inf))
        elif job.steps > job.committed and now + need <= at and st.step_end < math.inf:
            job.interrupt(Notice(w.index, at, now))  # drop the step, checkpoint now
