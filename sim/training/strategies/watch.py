"""The job engine's stall watchdog: a job that cannot progress stops and says why.

As :mod:`sim.training.stall` does for the training DES: with no progress (no
new step completed, no checkpoint; a step done again after a rollback is not
new) for ``stall_limit`` (default 1000 failure-free intervals: ``K`` steps of
the full configuration's step time plus a checkpoint and a restart (with Varuna's
manager's sleep before it, checkpoint-restart's ``settle``), ``K`` the
strategy's checkpoint interval, at most the steps to do, or 1 when it loses
only the step in progress), the run stops with a one-line reason: too few
ready workers to form the strategy's smallest configuration, or failures
more frequent than an interval takes.
"""

from __future__ import annotations

import math
from typing import Any

from ..instant import STOP
from .steptime import is_table

__all__ = ["JobWatchdog"]


def _g(x: float, unit: str) -> str:
    return f"{x:.4g}{unit}"


class JobWatchdog:
    """Ends a job (``event``) after ``limit`` simulated time without progress."""

    def __init__(self, job: Any) -> None:
        self.job = job
        c = job.config
        s = c.strategy
        L, r = c.stages, max(c.replicas)
        full = job.step_time((L,) * min(r, c.workers // L), c.workers) if c.workers >= L else None
        every = min(getattr(s, "every", 0) or 1, max(c.steps, 1))  # none after the last step
        extra = sum(float(getattr(s, k, 0.0) or 0.0)
                    for k in ("checkpoint", "restart", "reconfigure", "rebalance", "sleep"))
        self.scale = math.inf if full is None else every * full + extra
        self.limit = float(c.stall_limit) if c.stall_limit is not None else 1000.0 * self.scale
        self.event = job.env.event()
        self.fired = False
        if self.limit < math.inf:
            self._arm(0.0)

    def _arm(self, since: float) -> None:
        # once every other event of that instant is done (the training DES's watchdog)
        env = self.job.env
        self.job.instant.after(max(since + self.limit - env.now, 0.0), self._check, STOP)

    def _check(self, _ev: Any = None) -> None:
        job = self.job
        if self.event.triggered or job.done.triggered:
            return
        if job.env.now - job.progress_t >= self.limit * (1 - 1e-12):
            self.fired = True
            self.event.succeed()
        else:
            self._arm(job.progress_t)

    def need(self) -> int:
        """The fewest ready workers the strategy can run on."""
        c, s = self.job.config, self.job.config.strategy
        n = c.stages
        low = getattr(s, "min_nodes", None)
        if s.name == "reconfiguration" and low is not None:
            n = low
        st = c.step_times
        if is_table(st):
            n = max(n, st.smallest if st.per == "workers" else st.smallest * c.stages)
        return n

    def diagnose(self) -> str:
        """Why the job made no progress since its last one: one line."""
        job = self.job
        c = job.config
        u = " s" if c.hour == 3600.0 else ""
        now = job.env.now
        window = now - job.progress_t
        what = "no step can finish" if job.steps == 0 or self.fired else \
            f"no progress in the last {_g(window, u)}"
        ready = len(job.ready_workers())
        need = self.need()
        name = c.strategy.name
        if job.formation is None and ready < need:
            alive = sum(1 for w in job.workers if w.alive)
            return (f"{what}: {name} needs {need} ready workers and {ready} are ready now "
                    f"({alive} of {len(job.workers)} up); {_g(job.counts['wait_time'], u)} "
                    "went to waiting for workers in the run")
        st = c.step_times
        if job.formation is None and ready >= need and getattr(st, "per", None) == "formation" \
                and c.strategy.formation(job, job.ready_workers()) is None:
            copy = ", with Bamboo's eager copy" if getattr(c.strategy, "mode", None) == "eager" \
                else ""
            return (f"{what}: {name} can form nothing of the {ready} ready workers that fits "
                    f"in GPU memory (the plan re-planned for them{copy})")
        failures = job.counts["losses"]
        if failures:
            mean = now / failures
            return (f"{what}: a worker is lost every {_g(mean, u)} on average ({failures:.0f} "
                    f"in {_g(now, u)}) and an interval takes {_g(self.scale, u)} without "
                    f"failures ({name})")
        return f"{what}: no step completed in the last {_g(window, u)}"
