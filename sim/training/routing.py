"""Routing within a stage: which live replica serves a microbatch's pass.

A policy is a strategy object the engine asks, never type-checks: one instance
per stage, called as ``policy.choose(live, rng)`` with the stage's live
replicas (each has ``speed`` and ``load``, the passes queued at it plus the one
in service) and a uniform draw source; it returns one of them, or ``None`` to
put the pass in the stage's shared FIFO queue (served by whichever live replica
is free first). A user's subclass of :class:`Routing` plugs in through
:data:`ROUTING_POLICIES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["speed_rows", "Routing", "SharedQueue", "LeastLoaded", "Weighted", "RoundRobin",
           "ROUTING_POLICIES", "Uniforms", "make_routing"]

_BLOCK = 4096


class Uniforms:
    """Uniform(0, 1) draws from one generator, in blocks."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self.rng.random(_BLOCK).tolist()
        return self._buf.pop()


class Routing:
    """Base policy: subclasses implement :meth:`choose`."""

    name = "routing"

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        """The replica of ``live`` (non-empty) to serve the pass, or None for the shared queue."""
        raise NotImplementedError  # pragma: no cover


class SharedQueue(Routing):
    """One FIFO queue per stage, served by whichever live replica is free."""

    name = "queue"

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        return None


class LeastLoaded(Routing):
    """Join the replica with the fewest passes queued or in service (first on ties)."""

    name = "least-loaded"

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        best, load = None, 1 << 62
        for r in live:
            n = r.load
            if n < load:
                if n == 0:
                    return r
                best, load = r, n
        return best


class Weighted(Routing):
    """A random live replica, with probability in proportion to its speed."""

    name = "weighted"

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        if len(live) == 1:
            return live[0]
        total = 0.0
        for r in live:
            total += r.speed
        x = uniform() * total
        for r in live:
            x -= r.speed
            if x < 0.0:
                return r
        return live[-1]


class RoundRobin(Routing):
    """The live replicas in turn (a counter per stage over the replica indices)."""

    name = "round-robin"

    def __init__(self) -> None:
        self.next = 0

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        n = self.next
        best = None
        for r in live:  # the first live replica at index >= n, else wrap around
            if r.index >= n:
                best = r
                break
        if best is None:
            best = live[0]
        self.next = best.index + 1
        return best


#: Routing name -> policy class (a new policy is added here by its name).
ROUTING_POLICIES: dict[str, type[Routing]] = {
    cls.name: cls for cls in (SharedQueue, LeastLoaded, Weighted, RoundRobin)
}


def make_routing(name: str) -> Routing:
    """A fresh policy instance for one stage."""
    return ROUTING_POLICIES[name]()


def speed_rows(speeds: Any, stages: int, value_name: str = "speed") -> tuple[tuple[Any, ...], ...]:
    """Validate per-replica speeds: one non-empty row per stage, every speed > 0.

    Parameters
    ----------
    speeds : sequence of sequences
        ``speeds[j][i]``, the speed of replica ``i`` of stage ``j``.
    stages : int
        The number of stages ``L``.
    value_name : str
        The parameter named when a single speed is not positive.

    Returns
    -------
    tuple of tuples
        The rows, each speed as :func:`sim.errors.check_positive` returns it.

    Raises
    ------
    ConfigError
        In one line, naming ``speeds`` (or ``value_name`` for a bad value).
    """
    from ..errors import check, check_positive

    check(isinstance(speeds, (list, tuple)) and len(speeds) == stages, "speeds",
          f"one row per stage ({stages})", speeds)
    rows = []
    for j, row in enumerate(speeds):
        check(isinstance(row, (list, tuple)) and len(row) >= 1, "speeds",
              f"at least one speed for stage {j}", row)
        rows.append(tuple(check_positive(value_name, v) for v in row))
    return tuple(rows)
