"""Routing within a stage: which live replica serves a microbatch's pass.

A policy is a strategy object the engine asks, never type-checks: one instance
per stage, called as ``policy.choose(live, rng)`` with the stage's live
replicas (each has ``speed`` and ``load``, the passes queued at it plus the one
in service) and a uniform draw source; it returns one of them, or ``None`` to
put the pass in the stage's shared FIFO queue (served by whichever live replica
is free first). A user's subclass of :class:`Routing` plugs in through
:data:`ROUTING_POLICIES`. A policy that learns from completions also has
``bind(samples)`` (told the samples of a micro-batch once) and
``settled(replica, interval)`` (told, as each forward pass it routed completes,
the time from its choice to the completion).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["speed_rows", "Routing", "SharedQueue", "LeastLoaded", "Weighted", "RoundRobin",
           "LeastAssignedTime", "ROUTING_POLICIES", "Uniforms", "make_routing"]

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


class LeastAssignedTime(Routing):
    """SWARM's client balancer: the live replica with the least expected time assigned so far.

    yandex-research/swarm at f66855f, ``swarm/pipeline/src/moe/client/balancer.py``:
    each replica has a key, the sum of the expected times of the passes this router has
    sent it (never lowered when a pass completes, :101-129); the pass goes to the least key,
    ties broken by a uniform draw made when the key was set (:84, :126). The chosen key
    grows by the pass's expected time: ``task_size`` over the replica's measured throughput,
    or ``initial_throughput * task_size`` (1.0 s per sample, :22) before any measurement
    (:122-125). The throughput is a bias-corrected exponential moving average of seconds per
    sample, ``alpha = 0.1`` (``swarm/pipeline/src/optim/performance_ema.py:14-38``), fed the
    time from the choice to the completion over ``task_size`` (:53-59, the EMA is paused so
    the time counts from the call's start, balancer.py:81, 131). A replica the router meets
    for the first time, or again after a failure (a new ``epoch``; the reference bans the
    failed peer and adds it afresh when it announces itself again, :57-59, 90-98), enters
    at the least key of the live replicas with a fresh average (:81-86). A forward pass's
    ``task_size`` is its micro-batch's samples (balanced_expert.py:65). The DHT refresh
    period (a peer is seen up to 30 s late) is not modelled: a replica is eligible as soon
    as it is live, as under every routing here.
    """

    name = "least-assigned-time"
    #: The reference's defaults (balancer.py:22, performance_ema.py:14).
    INITIAL_SECONDS_PER_SAMPLE = 1.0
    ALPHA = 0.1
    EPS = 1e-20

    def __init__(self) -> None:
        self.samples = 1.0
        # replica -> [key, tie, epoch, ema seconds per sample, updates]
        self.table: dict[Any, list] = {}

    def bind(self, samples: float) -> None:
        """The samples of one micro-batch (the reference's forward ``task_size``)."""
        self.samples = float(samples)

    def expected(self, rep: Any) -> float:
        """The expected time of a forward pass at ``rep`` (balancer.py:122-125)."""
        e = self.table[rep]
        if e[4] == 0:
            return self.INITIAL_SECONDS_PER_SAMPLE * self.samples
        adjusted = e[3] / (1.0 - (1.0 - self.ALPHA) ** e[4])
        return self.samples / (1.0 / max(adjusted, self.EPS))

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        table = self.table
        fresh = [r for r in live if r not in table or table[r][2] != r.epoch]
        if fresh:
            known = [table[r][0] for r in live if r in table and table[r][2] == r.epoch]
            base = min(known) if known else 0.0
            for r in fresh:
                table[r] = [base, uniform(), r.epoch, 0.0, 0]
        best = live[0]
        bk = table[best]
        for r in live:
            e = table[r]
            if e[0] < bk[0] or (e[0] == bk[0] and e[1] < bk[1]):
                best, bk = r, e
        bk[0] += self.expected(best)
        bk[1] = uniform()
        return best

    def settled(self, rep: Any, interval: float) -> None:
        """A forward pass this policy sent to ``rep`` completed ``interval`` after the choice:
        one update of its average (performance_ema.py:32-35)."""
        e = self.table.get(rep)
        if e is None or e[2] != rep.epoch:
            return
        e[3] = self.ALPHA * interval / self.samples + (1.0 - self.ALPHA) * e[3]
        e[4] += 1


#: Routing name -> policy class (a new policy is added here by its name).
ROUTING_POLICIES: dict[str, type[Routing]] = {
    cls.name: cls for cls in (SharedQueue, LeastLoaded, Weighted, RoundRobin, LeastAssignedTime)
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
