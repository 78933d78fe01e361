"""Runs that cannot progress: the stall watchdog and its one-line diagnosis.

A step-barrier run under a restart model can lose every step it starts (a
restart is needed more often than a checkpoint interval takes), and a restart
that waits for every stage to have a live replica can wait for ever when a
replayed trace keeps a stage's workers down. Without ``max_time`` such a run
would go on for ever. :class:`Watchdog` stops a run that has made no progress
(no checkpoint completed and no step beyond the best one reached) for
``stall_limit`` simulated time units, and :func:`diagnose` says why in one
line, from what the trainer saw since its last progress.

The default limit is 1000 times the time one checkpoint interval takes
without failures (``K`` steps of the failure-free step time plus the
checkpoint and the restart; all ``N`` steps without checkpoints): a run that
finishes a checkpoint interval in less than that, on average, is never
stopped. At Daly's law (:func:`sim.analytic.checkpoint_segment_time`) an
interval takes ``M e^{R/M} (e^{W/M} - 1)`` on average with a restart every
``M``; it exceeds ``1000 W`` only once ``W/M`` is above about 9, where
``e^9 = 8100`` restarts would be expected per completed interval.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import simpy

from ..rng import Streams
from .instant import STOP

__all__ = ["STALL_FACTOR", "nominal_step_time", "interval_time", "stall_limit",
           "needs_watchdog", "Watchdog", "diagnose"]

#: The default stall limit, in failure-free checkpoint intervals.
STALL_FACTOR = 1000.0


def nominal_step_time(config: Any) -> float:
    """The time of one step of ``config`` without failures (deterministic passes).

    One step of the training DES with every failure, preemption, trace and
    restart model removed, the passes at their nominal (mean) times and the
    speeds at their given values (1 when drawn): the step time a run would
    see if nothing failed.
    """
    try:
        return _nominal_cached(config)
    except TypeError:  # a config holding something unhashable: compute it afresh
        return _nominal(config)


@functools.lru_cache(maxsize=64)
def _nominal_cached(config: Any) -> float:
    return _nominal(config)


def _nominal(config: Any) -> float:
    from .system import TrainingSystem

    c = config
    # a DES strategy stays (a plan run as SWARM needs it: sim.profiles.swarm); without a notice
    # it changes nothing in a failure-free step
    des = getattr(c.strategy, "engine", None) == "des"
    free = dataclasses.replace(
        c, availability=1.0, domain_outage=0.0, placement=None, failure_trace=None,
        mtbf=math.inf, replace_time=0.0, restart_cost=None, checkpoint_every=0,
        checkpoint_cost=0.0, steps=1, max_time=math.inf, pass_time_distribution="deterministic",
        speed_spread=0.0, stall_limit=None, max_wait=0.0, strategy=c.strategy if des else None,
        step_times=None,
        notice=0.0,
        replicas=c.replicas if c.speeds is None else None)
    system = TrainingSystem(free, Streams(0).replication(0))
    system.run()
    return float(system.env.now)


def interval_time(config: Any) -> tuple[float, str]:
    """Failure-free time from one checkpoint to the next, and how it is made up (words)."""
    c = config
    t = nominal_step_time(c)
    K = c.checkpoint_every
    if K:
        steps = min(K, c.steps)
        w = steps * t + c.checkpoint_cost
        how = f"{steps} steps of {t:.4g} and a checkpoint of {c.checkpoint_cost:.4g}"
    else:
        w = c.steps * t
        how = f"all {c.steps} steps of {t:.4g} (no checkpoints)"
    return w, how


def stall_limit(config: Any) -> float:
    """Simulated time without progress after which a run is stopped (inf: never)."""
    if config.stall_limit is not None:
        return float(config.stall_limit)
    w, _ = interval_time(config)
    return STALL_FACTOR * (w + (config.restart_cost or 0.0))


def needs_watchdog(config: Any) -> bool:
    """Whether a run of ``config`` can stall for ever: a step barrier, failures, and a
    restart model or an unbounded wait at out stages."""
    c = config
    return (c.schedule != "async" and c.failures
            and (c.restart_cost is not None or c.max_wait == math.inf)
            and stall_limit(c) < math.inf)


class Watchdog:
    """Ends the run (``event``) after ``limit`` simulated time without progress.

    It checks only when the limit would be reached from the last progress it
    knows of, so it adds one event per limit, never one per step. It checks once
    every other event of that instant is done (``instant``, the run's
    :class:`~sim.training.instant.InstantEnd`, the one its ``max_time`` end uses: two
    would step behind each other for ever), as ``max_time`` ends a run: a step ending
    at the limit's very end is progress.
    """

    def __init__(self, env: simpy.Environment, trainer: Any, limit: float,
                 instant: Any) -> None:
        self.env, self.trainer, self.limit, self.instant = env, trainer, limit, instant
        self.event = env.event()
        self.fired = False
        self._arm(trainer.progress_t)

    def _arm(self, since: float) -> None:
        self.instant.after(max(since + self.limit - self.env.now, 0.0), self._check, STOP)

    def _check(self, _ev: Any = None) -> None:
        tr = self.trainer
        if self.event.triggered or tr.done.triggered:
            return
        if self.env.now - tr.progress_t >= self.limit * (1 - 1e-12):
            self.fired = True
            self.event.succeed()
        else:
            self._arm(tr.progress_t)


def _g(x: float, unit: str = "") -> str:
    return f"{x:.4g}{unit}"


def diagnose(system: Any) -> str:
    """Why the run made no progress since its last one: one line.

    Cases, in order: a restart waiting for every stage to have a live replica
    (named: the stage out longest, and since when); restarts more frequent
    than a checkpoint interval (the mean time between restarts against the
    failure-free interval, and Daly's expected interval time at that rate);
    microbatches waiting at an out stage (no restart model, ``max_wait``
    unbounded).
    """
    c, tr, flow, env = system.config, system.trainer, system.flow, system.env
    u = " s" if c.hour == 3600.0 else ""  # times in seconds unless the hour says otherwise
    now = env.now
    window = now - tr.progress_t
    waited = tr.stall_wait + (now - tr.waiting_since if tr.waiting_since is not None else 0.0)
    out = [j for j in range(c.stages) if not flow.live[j]]
    since = {j: tr.out_since.get(j, 0.0) for j in out}
    longest = min(out, key=lambda j: (since[j], j)) if out else None
    what = "no step can finish" if tr.best == 0 or window >= stall_limit(c) * (1 - 1e-12) \
        else f"no progress in the last {_g(window, u)}"
    if tr.restart_model and (tr.waiting_since is not None or waited >= 0.5 * window) \
            and longest is not None:
        last = tr.all_live_t
        when = "has not happened in the run" if last is None else \
            f"last happened at t={_g(last, u)}"
        return (f"{what}: a restart waits for a live replica at every stage at once, which "
                f"{when} (now stage {longest} has none, since t={_g(since[longest], u)}); "
                f"{_g(waited, u)} of the last {_g(window, u)} went to that wait "
                "(--strategy checkpoint-restart re-forms the pipelines from the workers that "
                "are up)")
    if tr.restart_model and tr.stall_restarts > 0:
        w, how = interval_time(c)
        mean = window / tr.stall_restarts
        from ..analytic.training import checkpoint_segment_time

        try:
            expected = checkpoint_segment_time(w, 0.0, c.restart_cost or 0.0, mean)
        except OverflowError:
            expected = math.inf
        return (f"{what}: a restart is needed every {_g(mean, u)} on average "
                f"({tr.stall_restarts} in the last {_g(window, u)}) and a checkpoint interval "
                f"takes {_g(w, u)} without failures ({how}); at that rate an interval would "
                f"take {_g(expected, u)} on average (Daly)")
    if longest is not None:
        return (f"{what}: microbatches wait at stage {longest}, which has had no live "
                f"replica since t={_g(since[longest])} (max_wait is unbounded)")
    return f"{what}: no step completed in the last {_g(window, u)}"
