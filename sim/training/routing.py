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
the time from its choice to the completion, and the micro-batch).

A policy with ``per_microbatch = True`` keeps a state per trainer: the flow asks it
``choose_for(live, uniform, mb)`` (the micro-batch ``mb`` names its trainer), sets its
``trainers`` (the micro-batches of a step), and tells it ``failed(replica, mb)`` when a
pass of ``mb`` is lost at ``replica``; it runs on the swarm schedule only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["speed_rows", "Routing", "SharedQueue", "LeastLoaded", "Weighted", "RoundRobin",
           "LeastAssignedTime", "TrainerBalancer", "SWARM_ROUTING", "ROUTING_POLICIES", "Uniforms", "make_routing"]

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
    #: True: one state per trainer (``choose_for``, ``failed``; module notes)
    per_microbatch = False

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

    def settled(self, rep: Any, interval: float, mb: Any = None) -> None:
        """A forward pass this policy sent to ``rep`` completed ``interval`` after the choice:
        one update of its average (performance_ema.py:32-35)."""
        e = self.table.get(rep)
        if e is None or e[2] != rep.epoch:
            return
        e[3] = self.ALPHA * interval / self.samples + (1.0 - self.ALPHA) * e[3]
        e[4] += 1


class _Books:
    """One trainer's balancer at one stage (balancer.py:27-31): its heap of ``(key, tie,
    order, replica)`` entries, the entry each replica holds now (``uid_to_queue``; an entry
    in the heap that is not one is stale) and each replica's throughput average
    ``[ema seconds per sample, updates, samples per second]`` (``throughputs``)."""

    __slots__ = ("heap", "entry", "ema", "order", "used")

    def __init__(self) -> None:
        self.heap: list[tuple[float, float, int, Any]] = []
        self.entry: dict[Any, tuple[float, float, int, Any]] = {}
        self.ema: dict[Any, list] = {}
        self.order = 0  # the heap's last resort on equal (key, tie): never compares replicas
        self.used = False  # its first use is the info call


class TrainerBalancer(Routing):
    """SWARM's client balancer as its trainers run it: one a trainer at each stage.

    yandex-research/swarm at f66855f. Each trainer process builds one
    ``BalancedRemoteExpert`` a stage (``swarm/train_pipeline.py:31-45``), each with its own
    ``ExpertBalancer`` (``moe/client/balanced_expert.py:41``), and runs one micro-batch at a
    time (batch 1, no accumulation: ``swarm/setup_and_launch_trainer.sh:21-25``). Here the
    swarm schedule's ``m`` micro-batches in flight at once are ``m`` trainers: micro-batch
    ``k`` of every step is trainer ``k``'s (``id % m``), routed by trainer ``k``'s balancer
    at the moment it reaches the stage (``balanced_expert.py:121``).

    A balancer's rule is :class:`LeastAssignedTime`'s (the least key, ties to the smaller
    draw, the key grows by the expected time, never lowered; ``balancer.py:101-129``), over
    the trainer's own calls and measurements only, with these of its facts:

    * its first use is the ``info`` call (``balanced_expert.py:52, 81-89``): one choice of
      task size 1 (the chosen key grows by 1.0 s), measured as a call without compute or
      payload (interval 0: dtsim times no control message), its average's first update;
    * replicas enter at the key on top of the heap (``balancer.py:83``), stale entries
      included; a replica popped while not live is dropped (the reference finds it expired,
      or its call fails and it is banned: ``:112-120, 140-143``) and enters afresh when live
      again; a trainer whose pass is lost at a replica bans it (its entry and average
      forgotten, its heap entry left stale: ``:90-98``); a replica that failed and came
      back unnoticed keeps its entry (``_add_expert`` only refreshes a known uid, ``:79, 87``);
    * the average is updated when the forward pass completes, with the time from the choice
      (``performance_ema.py:53-59``), over the micro-batch's samples (``balanced_expert.py:65``).

    The backward pass stays on the replica that ran the forward pass (the swarm schedule's),
    so only forward passes are routed and measured (the reference's stateless backward is a
    balancer call of 2.5 times the task: ``balanced_expert.py:31, 75, 143-147``).
    """

    name = "trainer-balancer"
    per_microbatch = True
    #: The reference's defaults: balancer.py:22, performance_ema.py:14, balanced_expert.py:85.
    INITIAL_SECONDS_PER_SAMPLE = 1.0
    ALPHA = 0.1
    EPS = 1e-20
    INFO_TASK = 1.0

    def __init__(self) -> None:
        self.samples = 1.0
        self.trainers = 1
        self.books: dict[int, _Books] = {}
        # trainer -> (micro-batch, the average its forward pass in flight will update)
        self.pending: dict[int, tuple[Any, list]] = {}

    def bind(self, samples: float) -> None:
        """The samples of one micro-batch (a forward call's ``task_size``)."""
        self.samples = float(samples)

    def expected(self, ema: list, task: float) -> float:
        """The expected time of a call of ``task`` samples (balancer.py:122-125)."""
        if ema[1] == 0:
            return self.INITIAL_SECONDS_PER_SAMPLE * task
        return task / ema[2]

    def _update(self, ema: list, interval: float, task: float) -> None:
        """One update of an average (performance_ema.py:32-37)."""
        a = self.ALPHA
        ema[0] = a * interval / task + (1.0 - a) * ema[0]
        ema[1] += 1
        adjusted = ema[0] / (1.0 - (1.0 - a) ** ema[1])
        ema[2] = 1.0 / max(adjusted, self.EPS)

    def _use(self, b: _Books, live: Sequence[Any], uniform: Callable[[], float],
             task: float) -> tuple[Any, list]:
        """Pop the least entry still current and live, re-key it (balancer.py:109-129)."""
        heap = b.heap
        while True:
            e = heapq.heappop(heap)
            rep = e[3]
            if b.entry.get(rep) is not e:  # stale: banned or dropped
                continue
            if rep not in live:  # gone or leaving: dropped
                del b.entry[rep]
                del b.ema[rep]
                continue
            ema = b.ema[rep]
            new = (e[0] + self.expected(ema, task), uniform(), b.order, rep)
            b.order += 1
            heapq.heappush(heap, new)
            b.entry[rep] = new
            return rep, ema

    def choose(self, live: Sequence[Any], uniform: Callable[[], float]) -> Any:
        raise TypeError("trainer-balancer routes a micro-batch: choose_for(live, uniform, mb)")

    def choose_for(self, live: Sequence[Any], uniform: Callable[[], float], mb: Any) -> Any:
        """The replica of ``live`` (non-empty) for ``mb``'s forward pass, by its trainer's balancer."""
        k = mb.id % self.trainers
        b = self.books.get(k)
        if b is None:
            b = self.books[k] = _Books()
        heap, entry = b.heap, b.entry
        for rep in live:  # the live replicas it does not hold enter on top (balancer.py:76-86)
            if rep not in entry:
                e = (heap[0][0] if heap else 0.0, uniform(), b.order, rep)
                b.order += 1
                heapq.heappush(heap, e)
                entry[rep] = e
                b.ema[rep] = [0.0, 0, self.EPS]
        if not b.used:  # the info call (balanced_expert.py:52, 85)
            b.used = True
            _rep, ema = self._use(b, live, uniform, self.INFO_TASK)
            self._update(ema, 0.0, self.INFO_TASK)
        rep, ema = self._use(b, live, uniform, self.samples)
        self.pending[k] = (mb, ema)
        return rep

    def settled(self, rep: Any, interval: float, mb: Any = None) -> None:
        """``mb``'s forward pass at ``rep`` completed ``interval`` after the choice: one update
        of the average taken at the choice (a ban meanwhile leaves it orphaned, as there)."""
        k = mb.id % self.trainers
        p = self.pending.get(k)
        if p is None or p[0] is not mb:
            return
        del self.pending[k]
        self._update(p[1], interval, self.samples)

    def failed(self, rep: Any, mb: Any) -> None:
        """A pass of ``mb`` at ``rep`` was lost: its trainer bans ``rep`` (balancer.py:90-98)."""
        k = mb.id % self.trainers
        b = self.books.get(k)
        if b is not None and b.entry.pop(rep, None) is not None:
            del b.ema[rep]
        p = self.pending.get(k)
        if p is not None and p[0] is mb:
            del self.pending[k]


#: Routing name -> policy class (a new policy is added here by its name).
ROUTING_POLICIES: dict[str, type[Routing]] = {
    cls.name: cls for cls in (SharedQueue, LeastLoaded, Weighted, RoundRobin, LeastAssignedTime,
                              TrainerBalancer)
}

#: ``--strategy swarm``'s routing unless one is given: SWARM's balancer, one a trainer at each
#: stage (until 2026-12-08 the swarm schedule's default, round-robin, which SWARM never runs).
SWARM_ROUTING = TrainerBalancer.name


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
