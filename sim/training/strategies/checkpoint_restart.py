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
checkpoint earlier than the DES. A worker ready before a restart ends joins that
restart's formation.

Growing (``grow=True``, the default: Varuna's job morphing). Varuna's manager
polls the machines available every ``poll`` seconds (300 s) and, when they form a
larger configuration than the one running, signals the workers, which checkpoint
at the end of their step and exit; the manager then relaunches the job on the
machines available. Here: at each poll (``k poll`` from the run's start, ``k >= 1``;
none during a restart or while the job waits) at which the ready workers form more
pipelines than the formation running, the job, at the first step end at or after
the poll, checkpoints (cost ``checkpoint``; a periodic one due at that step end is
the same checkpoint; overlapped: until it is durable) and restarts (cost
``restart``, counted in ``restarts`` and in ``reconfigurations``) with the workers
ready then, losing no step. ``grow=False``: workers that join are used
at the next restart (a failure's), the Oobleck artifact's Varuna simulator
(``simulate_should_reconfigure`` returns False: ``varuna_simulator.py:1370-1371``). Sources (microsoft/varuna at
a2145cc): ``vmss_scripts/continuous_poll.py:23-38`` sends ``morph`` when the
available machines differ from the running ones (its loop, ``time.sleep(5*60)``,
is commented out at 55-57; it ran at lines 65-67 of commit eb0f729);
``vmss_scripts/morph_server.py:197-231`` morphs when the best configuration of the
machines available has another world size (pipelines x stages) or a running machine
is gone, unless a morph, restart or preemption is under way; the signal sets a flag
the training loop checks after each iteration, which checkpoints and exits
(``examples/Megatron-LM/megatron.patch:380-384, 651-653``; ``docs/morphing.rst:19-20``);
``morph_server.py:157-161`` then relaunches (``start_remote``, as after a failure).

The manager's sleep (``settle``, grow only): after a failure its manager sleeps 120 s
("wait for transient errors to pass", ``vmss_scripts/morph_server.py:177``; the packaged
``varuna/morph_server.py:155`` sleeps 60 s) before it relaunches on the machines available
then; a morph relaunches at once (``vmss_scripts/morph_server.py:157-163``). Here each loss
that interrupts the job (during a step, a checkpoint or a restart) is followed by ``settle``
(restart time) before the job forms from the workers ready then and pays ``restart``; a
loss during the sleep interrupts nothing (no job runs). The Oobleck artifact's simulator
(``grow=False``) has no manager and no sleep. The pipeline depth of a relaunch: the
released launcher needs ``--nstages`` (``varuna/run_varuna.py:131-132``,
``varuna/launcher.py:125``), a relaunch reuses the saved launch command
(``run_varuna.py:148-155``, ``--resume`` from ``varuna/morph_server.py:76-77``) and the
launcher takes ``gpus_available // nstages`` replicas (``launcher.py:23``): the depth
``L`` is kept, as here. ``AutoConfig`` (documented for a launch without ``--nstages``,
``docs/morphing.rst:30-33``) is not reachable in that code (``launcher.py:81`` calls it
without the ``profile_folder`` that ``auto_config.py:9-10`` requires).

The interval: ``interval="fixed"`` (every ``every`` steps), ``"adaptive"``
(re-chosen after each failure from the measured failure rate: the whole
number of steps closest in cost to the exact optimum of
:mod:`sim.analytic.checkpointing`), or
``"overhead"`` (CheckFreq's policy: the fewest steps between checkpoints
that keep the blocking part of a checkpoint within ``overhead_bound`` of
the time computing).

A preemption notice (``notice="checkpoint"``), growing (Varuna's manager,
``vmss_scripts/morph_server.py`` at a2145cc): the notice of a worker the job runs on
(``listen_preemption.py:37``, the preemption's ``NotBefore``) makes the manager sleep until
``lead`` (60 s) before the preemption (``morph_server.py:125-127``; at once if the notice is
shorter), then signal the workers (``:129``), which checkpoint at the end of their step and
exit (the flag of ``megatron.patch:380-384, 651-653``). After that checkpoint the manager
sleeps 120 s ("wait for scheduled event to occur", ``:151``; here ``settle``) and relaunches
on the machines available then (``:152-155``); no step runs meanwhile. A loss before the
checkpoint is done is a failure whose relaunch comes ``settle`` after the later of the loss
and the signal (the failure's message waits for the manager's lock, held through that sleep,
and then takes the preemption's branch, ``:149``). Neither relaunch counts towards the
restart limit below. One preemption at a time (``:115``: another notice meanwhile is not
taken; the notifier repeats it every 5 s, ``listen_preemption.py:41-44``, so here a notice
still pending when a formation starts is taken then), none while a morph is under way, and a
poll's morph is not taken while one is (``:227``).
``grow=False``: the job checkpoints at the last step end from which the checkpoint still
completes before the preemption (after the current step if only that fits), or at once
(dropping the step in progress) if only that fits, so the preemption loses only the step in
progress (dtsim's own rule; the Oobleck artifact's simulator has no notices).

The restart limit (grow, ``window``): the manager counts a failure's relaunch as consecutive
when it comes less than 300 s after the previous one (``morph_server.py:183-188``; the count
starts at 0, the previous relaunch 2 h before the start, ``:25-26``); at a failure after 3
consecutive relaunches it relaunches nothing, resets the count and waits (``:167-173``) for
the next poll's morph, which finds nothing running and relaunches at once on the machines
available (``:232-237``; no sleep). Here: at a failure's relaunch (after ``settle``) the count
goes up when the relaunch is less than ``window`` after the previous failure's relaunch, else
to 0; a failure with a count of 3 resets it and holds the job until the first poll (``k
poll``) after it at which the ready workers form a configuration, then pays ``restart``
(restart time; ``window=0`` switches the limit off). The job never gives up: the hold ends at
a poll. The packaged ``varuna/morph_server.py`` has no limit and sleeps 30 s before the
preemption (``:113``), 120 s after its checkpoint (``:137``) and 60 s after a failure (``:155``).

Samples (grow): Varuna's launcher gives each of the ``D`` data-parallel replicas ``B // D`` of
the global batch ``B`` (``varuna/launcher.py:53-54, 238, 244``; ``varuna.py:136``), so a step
of ``D`` pipelines trains ``D (B // D)`` samples: the remainder is not trained and the global
batch shrinks when a relaunch changes ``D``. The step's time is the formation's as before.

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

from ...errors import (
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)
from .base import register_strategy
from .common import JobStrategy, RunState, check_rate, depth_pipelines
from .job import Notice

__all__ = ["CheckpointRestart"]

INTERVALS = ("fixed", "adaptive", "overhead")
SNAPSHOTS = ("blocking", "overlapped")
NOTICE_USES = ("checkpoint", "ignore")
#: Varuna's manager polls the available machines every 5 minutes (module notes).
POLL = 300.0
#: Varuna's manager sleeps 120 s after a failure before it relaunches (module notes).
SETTLE = 120.0
#: Varuna's manager signals the workers 60 s before a notified preemption (module notes).
LEAD = 60.0
#: Varuna's manager holds a failure's relaunch after 3 consecutive relaunches (module notes).
RESTART_LIMIT = 3
#: ... each less than 300 s after the previous one (module notes).
WINDOW = 300.0
#: CheckFreq's bound on the checkpoint's overhead (``overhead_bound``'s default).
OVERHEAD_BOUND = 0.035


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
    grow : bool
        Varuna's job morphing: checkpoint and restart at a poll when the ready workers
        form more pipelines (module notes; default True). False: the Oobleck artifact's
        Varuna simulator, joined workers wait for the next failure's restart.
    poll : float
        Time between the manager's polls of the available machines (default 300 s,
        Varuna's ``continuous_poll.py``); given only with ``grow``.
    settle : float
        (grow) The manager's sleep after a failure before it relaunches the job (default
        120 s, Varuna's ``morph_server.py``: module notes); given only with ``grow``. Also the
        sleep after a notice's checkpoint (120 s there too).
    lead : float
        (grow) How long before a notified preemption the manager signals the workers to
        checkpoint and stop (default 60 s, Varuna's ``morph_server.py``); given only with
        ``grow`` and a preemption notice.
    window : float
        (grow) A failure's relaunch less than ``window`` after the previous one is consecutive;
        after 3 the next failure waits for a poll (default 300 s, Varuna's ``morph_server.py``;
        0: no limit); given only with ``grow``.
    """

    name = "checkpoint-restart"
    times = ("boot", "checkpoint", "restart", "copy", "poll", "settle", "lead", "window")
    rates = ("checkpoint_bandwidth",)
    #: (audit 8) each given where it does nothing is refused, at its default value too
    #: (``grow=false,poll=300`` was taken and ignored): :meth:`Strategy.check_inert`
    only_when = {"copy": ("snapshot", "overlapped", "0 unless snapshot is overlapped"),
                 "poll": ("grow", True), "settle": ("grow", True), "window": ("grow", True),
                 "lead": (("grow", "notice"), (True, "checkpoint")),
                 "overhead_bound": ("interval", "overhead")}
    every: int = 10
    checkpoint: float = 15.8
    restart: float = 55.5
    interval: str = "fixed"
    overhead_bound: float = OVERHEAD_BOUND
    snapshot: str = "blocking"
    copy: float = 0.0
    notice: str = "checkpoint"
    boot: float = 45.0
    checkpoint_bandwidth: float | None = None
    grow: bool = True
    poll: float = POLL
    settle: float = SETTLE
    lead: float = LEAD
    window: float = WINDOW

    def check_params(self) -> None:
        check_int("every", self.every, low=1)
        check_nonnegative("checkpoint", self.checkpoint)
        check_nonnegative("restart", self.restart)
        check_choice("interval", self.interval, INTERVALS)
        check_probability("overhead_bound", self.overhead_bound, open_low=True)
        check_choice("snapshot", self.snapshot, SNAPSHOTS)
        check_nonnegative("copy", self.copy)
        check_choice("notice", self.notice, NOTICE_USES)
        if self.checkpoint_bandwidth is not None:
            check_rate("checkpoint_bandwidth", self.checkpoint_bandwidth)
        check(isinstance(self.grow, bool), "grow", "true or false", self.grow)
        check_positive("poll", self.poll)
        check_nonnegative("settle", self.settle)
        check_nonnegative("lead", self.lead)
        check_nonnegative("window", self.window)

    @property
    def sleep(self) -> float:
        """The manager's sleep before a relaunch after a failure: ``settle`` when growing, else
        none (the stall watchdog's window and the runaway check count it with the restart)."""
        return self.settle if self.grow else 0.0

    def check_last(self, config: Any) -> None:
        super().check_last(config)  # notice without a preemption notice
        check(config.notice > 0 or (not self.given("lead") and self.lead == LEAD), "lead",
              "unset without a preemption notice (--preemption-notice: when the manager "
              "signals before the preemption)", self.lead)
        if self.grow:  # poll and settle: a run that is its polls, or its sleep
            self._check_polls(config)

    def _check_polls(self, config: Any) -> None:
        """(audit 8) A poll so short the run would be its polls is refused before any work:
        the manager polls every ``poll`` while a formation runs, one event each, so
        ``poll=1e-300`` never left its first instant (``at + poll == at``) and ``poll=1e-4``
        took minutes for 20 steps. At most :data:`sim.failures.MAX_TRANSITIONS` polls (the
        failures' own budget) over ``max_time`` or :data:`~sim.training.stall.STALL_FACTOR`
        times the steps' failure-free time (the full formation's step, as the watchdog's)."""
        from ...failures import MAX_TRANSITIONS
        from ..stall import STALL_FACTOR
        from .steptime import formation_time

        L, r, W = config.stages, max(config.replicas), config.workers
        t = formation_time(config, (L,) * min(r, W // L), W) if W >= L else None
        if t is None or not t > 0:
            return
        length = min(config.max_time, STALL_FACTOR * config.steps * t)
        n = length / self.poll
        check(n <= MAX_TRANSITIONS, "poll", f"long enough for at most {MAX_TRANSITIONS:.0e} "
              f"polls over the run (max_time, else {STALL_FACTOR:g} x its {config.steps} steps "
              f"of {t:.4g} failure-free): {n:.2g} here with poll", self.poll)

    # -- formation ------------------------------------------------------------------
    def formation(self, job: Any, ready: list[int]) -> Any:
        return depth_pipelines(job, ready)

    def form(self, job: Any, st: RunState):
        """Wait for enough workers, then restart (free the first time); a loss restarts it.
        After a loss (not a morph) the manager first sleeps ``settle`` (grow)."""
        while True:
            counted = False
            if st.extra.pop("settle", False):
                start = st.extra.pop("settle_from", None)  # a preemption under way (grow)
                if start is None and self._too_many(st):
                    yield from self._hold(job, st)
                else:
                    yield from self._settle(job, st, start)
                    counted = start is None
            elif st.extra.pop("preempted", False):  # after a notice's checkpoint (grow)
                yield from self._settle(job, st)
            f = yield from self.wait_for_workers(job)
            if counted:
                self._count_relaunch(job, st)
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
                st.extra.pop("morph", None)  # a poll before the restart found the old formation
                self._arm_poll(job, st)
                self._pending_notices(job, st)
                return
            st.extra["settle"] = True  # a loss during the relaunch: the manager sleeps again

    def _settle(self, job: Any, st: RunState, start: float | None = None):
        """(grow) Varuna's manager sleeps ``settle`` after a failure (from ``start`` if later:
        the end of its sleep before a notified preemption), whatever happens meanwhile, then
        relaunches on the machines available (accounted as restart time)."""
        if not self.grow or (self.settle <= 0 and (start is None or start <= job.env.now)):
            return
        st.participants = frozenset()  # no job runs: a loss meanwhile interrupts nothing
        t0 = job.env.now
        end = max(t0, start if start is not None else t0) + self.settle
        while job.env.now < end:  # an interruption (none expected) does not cut it short
            yield from job.wait(end - job.env.now)
        job.lost["restart"] += job.env.now - t0
        job.rec.job_hold("restart", t0, job.env.now, True)

    # -- the restart limit (grow) ------------------------------------------------------
    def _too_many(self, st: RunState) -> bool:
        """(grow) Whether Varuna's manager holds this failure's relaunch: 3 consecutive
        relaunches before it (the count is then reset, ``morph_server.py:167-173``)."""
        if not self.grow or self.window <= 0 or st.extra.get("consecutive", 0) < RESTART_LIMIT:
            return False
        st.extra["consecutive"] = 0
        return True

    def _count_relaunch(self, job: Any, st: RunState) -> None:
        """(grow) A failure's relaunch now: consecutive when less than ``window`` after the
        previous one (``morph_server.py:183-188``)."""
        if not self.grow:
            return
        now = job.env.now
        last = st.extra.get("last_relaunch", -math.inf)
        st.extra["consecutive"] = (st.extra.get("consecutive", 0) + 1
                                   if now - last < self.window else 0)
        st.extra["last_relaunch"] = now

    def _hold(self, job: Any, st: RunState):
        """(grow) Too many consecutive restarts: nothing runs until the first poll after now at
        which the ready workers form a configuration (its morph relaunches at once, no sleep);
        accounted as restart time."""
        st.participants = frozenset()  # no job runs: a loss meanwhile interrupts nothing
        t0 = job.env.now
        while True:
            # a poll finds a configuration only once the ready workers form one: wait for
            # that (a worker ready or lost), not poll by poll (a short poll over a long
            # outage was a runaway: poll=0.01 over 5e3 s without workers, 5e5 wake-ups)
            while self.formation(job, job.ready_workers()) is None:
                yield from job.wait_event(job.change())
            at = (math.floor(job.env.now / self.poll) + 1) * self.poll
            while job.env.now < at:
                yield from job.wait(at - job.env.now)
            if self.formation(job, job.ready_workers()) is not None:
                break
        job.lost["restart"] += job.env.now - t0
        job.rec.job_hold("restart", t0, job.env.now, True)

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
        st.extra["settle"] = True  # the manager sleeps before the relaunch (grow)
        signal = st.extra.pop("signal", None)
        if signal is not None:  # a preemption under way: its branch, after its sleep (grow)
            st.extra["settle_from"] = signal
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

    # -- growing (Varuna's morph) --------------------------------------------------------
    def _arm_poll(self, job: Any, st: RunState) -> None:
        """(grow) The manager's next poll, the first ``k poll`` after now, for this formation."""
        if not self.grow:
            return
        at = (math.floor(job.env.now / self.poll) + 1) * self.poll
        self._schedule_poll(job, st, job.formation, at)

    def _schedule_poll(self, job: Any, st: RunState, f: Any, at: float) -> None:
        st.extra["next_poll"] = at
        ev = job.env.timeout(max(at - job.env.now, 0.0))
        ev.callbacks.append(lambda _e: self._poll(job, st, f, at))

    def _poll(self, job: Any, st: RunState, f: Any, at: float) -> None:
        """A poll at ``at``: a morph is due when the workers ready now form more pipelines
        than ``f``, the formation running (none while the job re-forms or waits)."""
        if st.extra.get("next_poll") != at or job.formation is not f:
            return  # seen already at a step end of its instant, or the job is re-forming
        g = self.formation(job, job.ready_workers())
        if g is not None and len(g.pipelines) > len(f.pipelines) and "signal" not in st.extra:
            st.extra["morph"] = True  # not while a preemption is under way (morph_server.py:227)
        self._schedule_poll(job, st, f, at + self.poll)

    def _morph_due(self, job: Any, st: RunState) -> bool:
        """(grow) At a step end: whether a poll since the last one asked for a morph (a poll
        at this very instant is taken now, whatever the order of the instant's events)."""
        if not self.grow:
            return False
        at = st.extra.get("next_poll")
        if at is not None and at <= job.env.now:
            self._poll(job, st, job.formation, at)
        return bool(st.extra.pop("morph", False))

    def after_step(self, job: Any, st: RunState):
        last = job.steps >= job.N  # the run ends with a checkpoint of its last steps
        morph = not last and self._morph_due(job, st)
        signal = st.extra.get("signal", math.inf)
        preempt = not last and signal <= job.env.now  # Varuna's notice: checkpoint and stop
        due = job.steps - job.committed >= self.current_interval(job, st) or last or morph \
            or preempt
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
        if ok and (last or morph or preempt) and self.snapshot == "overlapped":  # durable
            steps = job.steps
            causes = yield from job.wait_event(st.extra["write"])
            ok = not self.losses(causes) and job.committed >= steps
        if not ok:
            self._failed(job, st, 0.0)
        elif morph:  # Varuna's morph: relaunch with the workers ready, no step lost
            job.counts["reconfigurations"] += 1
            job.formation = None
        elif preempt:  # the workers exit; the manager sleeps, then relaunches (grow)
            job.counts["notices_used"] += 1
            st.extra.pop("signal", None)
            st.extra["preempted"] = True
            job.formation = None

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
        if self.grow:
            self._signal(job, st, at)
            return
        need = self._notice_need(job)
        now = job.env.now
        if st.step_end + need <= at:
            st.emergency = True  # checkpoint after this step, or a later one that fits
            st.extra["notice_at"] = min(at, st.extra.get("notice_at", math.inf))
        elif job.steps > job.committed and now + need <= at and st.step_end < math.inf:
            job.interrupt(Notice(w.index, at, now))  # drop the step, checkpoint now

    def _signal(self, job: Any, st: RunState, at: float) -> None:
        """(grow) Varuna's manager takes a notice of a preemption at ``at``: it signals the
        workers ``lead`` before it (at once if later), unless a preemption or a morph is under
        way or this one was taken (``morph_server.py:115, 122-129``)."""
        if "signal" in st.extra or "morph" in st.extra \
                or at <= st.extra.get("handled", -math.inf):
            return
        st.extra["handled"] = at
        st.extra["signal"] = max(job.env.now, at - self.lead)

    def _pending_notices(self, job: Any, st: RunState) -> None:
        """(grow) A formation starts: a notice of one of its workers still ahead is taken now
        (Varuna's notifier repeats it every 5 s, ``listen_preemption.py:41-44``)."""
        if not self.grow or self.notice == "ignore":
            return
        now = job.env.now
        ahead = [at for k in st.participants
                 if (at := job.workers[k].leaving) is not None and at > now]
        if ahead:  # the first preemption (one at a time: the others wait for the relaunch)
            self._signal(job, st, min(ahead))

    def step_samples(self, job: Any) -> float:
        """(grow) The samples a step of the running formation trains: ``D (B // D)`` on ``D``
        pipelines (Varuna's launcher, module notes); else the global batch."""
        B = job.samples_per_step
        if not self.grow:
            return B
        D = len(job.formation.pipelines)
        return D * (B // D)
