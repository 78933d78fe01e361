"""The exact best checkpoint interval of a training config, and ``checkpoint_every="auto"``.

The training system under a restart model (``restart_cost`` given) is the
model of :mod:`sim.analytic.checkpointing` when its failures, while the job
runs, are a Poisson process: every worker a single point of failure (one
replica per stage, so any worker's failure loses the stage and with it the
step), and every failure clock exponential (spot preemptions, exponential
up times of workers and of their domains; no trace). After a restart every
component is up again and, the clocks being memoryless, the job's time to
its next failure is again exponential with the sum of the rates
(:func:`job_failure_rate`), whatever the restart period cost (waiting for a
replacement, a repair, a weight download, then ``restart_cost``). The
optimum interval ``tau*`` depends only on that rate and on the checkpoint
cost; the whole number of steps is the better of the floor and the ceiling
of ``tau*`` over the failure-free step time (:func:`auto_checkpoint_every`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..analytic.checkpointing import best_checkpoint_every, optimal_checkpoint_interval
from ..errors import ConfigError
from ..failures import up_down_means

__all__ = ["job_failure_rate", "checkpoint_interval_obstacle", "predicted_interval",
           "failure_free_step_time", "auto_checkpoint_every", "with_auto_checkpoint"]


def job_failure_rate(c: Any) -> float:
    """Failures per time unit of the running job: the sum of every component's rate.

    Parameters
    ----------
    c : TrainingConfig
        With one replica per stage and exponential failure clocks (see
        :func:`checkpoint_interval_obstacle`).

    Returns
    -------
    float
        ``sum_w 1/mtbf + sum_w 1/up_w + sum_d 1/up_d`` over the workers ``w``
        and the failure domains ``d`` above them, with ``up`` the mean up time
        ``a d / (1 - a)`` of :func:`sim.failures.up_down_means` (0 where a
        component never fails).
    """
    rate = 0.0
    if c.mtbf < math.inf:
        rate += c.workers / c.mtbf
    if c.availability < 1.0:
        up, _ = up_down_means(c.availability, c.mean_downtime)
        rate += c.workers / up
    pl = c.domain_placement
    used = {d for stage in pl.replica_domains for chain in stage for d in chain}
    for d in sorted(used):
        u = pl.domain_outage.get(d, 0.0)
        if u > 0.0:
            up, _ = up_down_means(1.0 - u, c.domain_downtime, name="domain_outage")
            rate += 1.0 / up
    return rate


def checkpoint_interval_obstacle(c: Any) -> str | None:
    """Why the exact interval is not the optimum for ``c`` (None: it is)."""
    checks = (
        (c.strategy is not None and getattr(c.strategy, "engine", None) == "job",
         "needs the built-in restart model, not a step-level strategy"),
        (c.notice > 0, "needs no preemption notice"),
        (c.schedule == "async", "needs a step barrier (gpipe, 1f1b, swarm)"),
        (c.restart_cost is None, "needs the restart model (restart_cost)"),
        (not c.failures, "needs a failure model (mtbf, availability < 1 or domain outages)"),
        (c.failure_trace is not None, "needs Poisson failures (a replayed trace is not)"),
        ((c.availability < 1.0 or any(u > 0 for u in c.domain_placement.domain_outage.values()))
         and c.failure_distribution != "exponential",
         f"needs exponential up times (Poisson failures), not {c.failure_distribution}"),
        (any(r != 1 for r in c.replicas),
         "needs one replica per stage (every failure loses the step)"),
        (c.pass_time_distribution != "deterministic" or c.speed_spread > 0,
         "needs deterministic step times (deterministic passes, given speeds)"),
    )
    for bad, why in checks:
        if bad:
            return why
    return None


def failure_free_step_time(c: Any) -> float:
    """The time of one step of ``c`` with its failures and checkpoints taken away.

    Deterministic for the configs :func:`checkpoint_interval_obstacle` accepts
    (deterministic passes, one replica per stage): one step of the training DES
    gives it exactly, whatever the schedule, transfers, sync and optimizer time.
    """
    from ..rng import Streams
    from .system import TrainingSystem  # the system imports this module's package

    free = dataclasses.replace(c, steps=1, availability=1.0, domain_outage=0.0, placement=None,
                               mtbf=math.inf, failure_trace=None, checkpoint_every=0,
                               restart_cost=None, max_time=math.inf)
    sysm = TrainingSystem(free, Streams(0).replication(0))
    sysm.run()
    return float(sysm.trainer.step_times[0])


def auto_checkpoint_every(c: Any) -> int:
    """``checkpoint_every="auto"``: the whole number of steps nearest the exact optimum in cost.

    Returns
    -------
    int
        :func:`sim.analytic.best_checkpoint_every` of the failure-free step time,
        the checkpoint cost and the job's MTBF ``1 / job_failure_rate``: the
        floor or the ceiling of ``tau* / t`` (at least 1), whichever has the
        lower exact expected time per step.

    Raises
    ------
    ConfigError
        Naming ``checkpoint_every`` when the exact interval does not apply
        (the reason in the rule), or ``checkpoint_cost`` when it is 0.
    """
    why = checkpoint_interval_obstacle(c)
    if why is not None:
        raise ConfigError("checkpoint_every", f"auto only where the exact interval applies ({why})",
                          "auto")
    if not c.checkpoint_cost > 0:
        raise ConfigError("checkpoint_cost", "> 0 with checkpoint_every auto (with free "
                          "checkpoints every step is best)", c.checkpoint_cost)
    t = failure_free_step_time(c)
    if not t > 0:
        raise ConfigError("checkpoint_every", "auto only with a positive step time", "auto")
    return best_checkpoint_every(t, c.checkpoint_cost, 1.0 / job_failure_rate(c))


def with_auto_checkpoint(c: Any) -> Any:
    """``c`` with ``checkpoint_every`` set by :func:`auto_checkpoint_every`."""
    return dataclasses.replace(c, checkpoint_every=auto_checkpoint_every(c))


def predicted_interval(c: Any) -> float:
    """``tau*`` of ``c`` in time units (:func:`sim.analytic.optimal_checkpoint_interval`)."""
    return optimal_checkpoint_interval(c.checkpoint_cost, 1.0 / job_failure_rate(c))
