"""Pipeline schedules as strategy objects the engine asks (never type-checks).

A schedule answers four questions:

``fixed_pipelines``
    Whether a microbatch keeps one pipeline (replica index) through the stages,
    routing choosing only its pipeline and any failover (GPipe, 1F1B), or is
    routed afresh at every stage (SWARM, async).
``step_barrier``
    Whether microbatches come in steps of ``m`` closed by the gradient sync
    and the optimizer step (all but async).
``phase_barrier``
    Whether every forward pass of a step ends before any backward pass starts
    (GPipe).
``forward_limit(stage, stages)``
    The most microbatches a replica of ``stage`` holds between its forward and
    backward pass (None: unbounded); 1F1B keeps ``L - j`` at stage ``j``, at
    most ``L`` (PipeDream-flush). Backward passes (and recomputations) always
    go before queued forward passes.
"""

from __future__ import annotations

__all__ = ["Schedule", "GPipe", "OneFOneB", "Swarm", "Async", "SCHEDULE_POLICIES"]


class Schedule:
    """Base schedule: the answers of SWARM (loosely coupled stages, one step barrier)."""

    name = "schedule"
    fixed_pipelines = False
    step_barrier = True
    phase_barrier = False

    def forward_limit(self, stage: int, stages: int) -> int | None:
        """Microbatches a replica of ``stage`` may hold between forward and backward."""
        return None


class GPipe(Schedule):
    """All forwards of a step, then all backwards, on fixed pipelines."""

    name = "gpipe"
    fixed_pipelines = True
    phase_barrier = True


class OneFOneB(Schedule):
    """One forward, one backward: at most ``L - j`` in flight at stage ``j``."""

    name = "1f1b"
    fixed_pipelines = True

    def forward_limit(self, stage: int, stages: int) -> int | None:
        return stages - stage


class Swarm(Schedule):
    """No fixed pipelines: each pass routed at its stage; one barrier per step."""

    name = "swarm"


class Async(Schedule):
    """No step barrier: microbatches flow continuously (steady-state throughput)."""

    name = "async"
    step_barrier = False


#: Schedule name -> class.
SCHEDULE_POLICIES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (GPipe, OneFOneB, Swarm, Async)
}
