"""Collective operations as flows on the network: the ring all-reduce and all-gather.

:func:`ring_allreduce` runs the ring all-reduce of NCCL and Horovod (a
reduce-scatter, then an all-gather, each ``k - 1`` steps) as flows on a
:class:`~sim.network.service.NetworkService`:

* ``k`` participants in the ring order given; participant ``i`` sends to
  ``i + 1`` (mod ``k``) at every step a chunk of ``bucket / k``;
* each participant runs ``ranks`` rings at once (the tensor-parallel ranks of
  one node, each reducing its own shard of ``size``, all sending through the
  node's NIC), so a step of one participant is ``ranks`` concurrent flows;
* the gradients are reduced in buckets of at most ``bucket_size`` (per rank;
  DeepSpeed's ``reduce_bucket_size``, PyTorch DDP's ``bucket_cap_mb``), one
  after the other: each bucket is its own ring, with its own ``2 (k - 1)``
  steps of flows;
* a participant starts its step ``s`` send when its step ``s - 1`` send and
  its step ``s - 1`` receive are both done (the chunk it forwards is the one
  it just received and reduced), and its next bucket when it has finished the
  current one; nothing waits for a global barrier.

With ``k`` equal participants, route latency ``l`` and NIC bandwidth ``B`` as
the only limit, every step takes ``l + ranks * c / B`` for a chunk ``c`` per
rank, so the whole takes ``2 (k - 1) (n_b l + ranks * S / (k B))`` for ``S``
bytes per rank in ``n_b`` buckets (:func:`sim.analytic.network.ring_allreduce_time`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import simpy

from ..errors import check, check_int, check_nonnegative, check_positive
from ..timeline import NULL

__all__ = ["ring_allreduce", "ring_allgather", "bucket_sizes"]


def bucket_sizes(size: float, bucket_size: float) -> list[float]:
    """``size`` cut into buckets of ``bucket_size`` (the last one the remainder; inf: one bucket)."""
    size = check_nonnegative("param_size", size)
    b = check_positive("bucket_size", bucket_size, allow_inf=True)
    if size == 0:
        return []
    if b >= size:
        return [size]
    n = math.ceil(size / b)
    out = [b] * (n - 1)
    out.append(size - b * (n - 1))
    if out[-1] <= 0:  # rounding made the last bucket empty
        out.pop()
    return out


class _Ring:
    """The state of one all-reduce: ``ranks`` rings over ``k`` participants, bucket by bucket."""

    def __init__(self, service: Any, nodes: Sequence[Any], buckets: list[float], ranks: int,
                 done: simpy.Event, *, gather: bool = False, scatter: bool = False) -> None:
        self.service = service
        self.nodes = list(nodes)
        self.k = len(self.nodes)
        self.buckets = buckets
        self.ranks = ranks
        # an all-reduce: 2 (k - 1) steps of a chunk of bucket / k; an all-gather (issue 37):
        # k - 1 steps of the whole block; a reduce-scatter: the all-reduce's first k - 1 steps
        self.steps = (self.k - 1) if gather or scatter else 2 * (self.k - 1)
        self.div = 1 if gather else self.k
        self.done = done
        # per (rank ring r, participant i): bucket index, step, send done, receive done
        n = ranks * self.k
        self.bucket = [0] * n
        self.step = [0] * n
        self.sent = [False] * n
        self.recv = [0] * n  # chunks received and not yet forwarded (the sender may run ahead)
        self.t_sent = [0.0] * n  # when each one's send in flight started (the timeline's)
        self.rec = getattr(service, "rec", NULL)  # the timeline's recorder (sim.timeline)
        self.finished = 0
        self.total = n
        self.flows: list[simpy.Event] = []
        self.sends: list[tuple[int, float, float]] = []  # each flow's (sender, size, start)

    def start(self) -> None:
        for r in range(self.ranks):
            for i in range(self.k):
                self._send(r, i)

    def _send(self, r: int, i: int) -> None:
        q = r * self.k + i
        b = self.bucket[q]
        chunk = self.buckets[b] / self.div
        ev = self.service.transfer(self.nodes[i], self.nodes[(i + 1) % self.k], chunk)
        self.t_sent[q] = self.service.env.now
        step = self.step[q]
        ev.callbacks.append(lambda _e: self._arrived(r, i, b, step))
        self.flows.append(ev)
        self.sends.append((i, chunk, self.t_sent[q]))

    def _arrived(self, r: int, i: int, b: int, step: int) -> None:
        """The step ``step`` chunk of bucket ``b`` from ``i`` reached ``i + 1``."""
        k = self.k
        j = (i + 1) % k
        qi, qj = r * k + i, r * k + j
        rec = self.rec
        if rec.on:
            rec.ring_chunk(self.nodes[i], self.nodes[j], self.buckets[b] / k, b, step, r,
                           self.t_sent[qi], self.service.env.now)
        self.sent[qi] = True
        self.recv[qj] += 1
        self._advance(r, i)
        self._advance(r, j)

    def _advance(self, r: int, i: int) -> None:
        q = r * self.k + i
        if not (self.sent[q] and self.recv[q] > 0):
            return
        self.sent[q] = False
        self.recv[q] -= 1
        self.step[q] += 1
        if self.step[q] == self.steps:
            self.step[q] = 0
            self.bucket[q] += 1
            if self.bucket[q] == len(self.buckets):
                self.finished += 1
                if self.finished == self.total:
                    self.done.succeed()
                return
        self._send(r, i)

    def bytes_sent(self) -> list[float]:
        """What each participant has sent so far (its flows arrived, and the part of those
        moving that has moved: :meth:`sim.network.service.NetworkService.moved`)."""
        out = [0.0] * self.k
        for ev, (i, size, t0) in zip(self.flows, self.sends, strict=True):
            out[i] += self.service.moved(ev, size, t0)
        return out

    def cancel(self) -> None:
        for ev in self.flows:
            if not ev.triggered:
                self.service.cancel(ev)


def ring_allreduce(service: Any, nodes: Sequence[Any], size: float, *, ranks: int = 1,
                   bucket_size: float = math.inf, scatter: bool = False) -> simpy.Event:
    """Start a ring all-reduce on the network; the event fires when every participant is done.

    Parameters
    ----------
    service : NetworkService
    nodes : sequence
        The participants' nodes, in ring order (``k >= 1``; with ``k = 1``
        nothing moves and the event fires at once).
    size : float
        Bytes each rank reduces (its shard of the gradients).
    ranks : int
        Rings run at once by every participant (its tensor-parallel ranks).
    bucket_size : float
        Per-rank bucket (inf: the whole ``size`` in one bucket).
    scatter : bool
        A ring reduce-scatter instead: each bucket's first ``k - 1`` steps only (each rank
        ends with its ``1/k`` reduced: Megatron-LM's distributed optimizer).

    Returns
    -------
    simpy.Event
        Its ``ring`` attribute holds the state (``cancel()`` withdraws every
        flow still moving).
    """
    ranks = check_int("ranks", ranks, low=1)
    nodes = list(nodes)
    check(len(nodes) >= 1, "nodes", "at least one participant", nodes)
    env = service.env
    done = env.event()
    buckets = bucket_sizes(size, bucket_size)
    ring = _Ring(service, nodes, buckets, ranks, done, scatter=scatter)
    done.ring = ring  # type: ignore[attr-defined]
    if len(nodes) == 1 or not buckets:
        done.succeed()
        return done
    ring.start()
    return done


def ring_allgather(service: Any, nodes: Sequence[Any], size: float, *, ranks: int = 1,
                   bucket_size: float = math.inf) -> simpy.Event:
    """Start a ring all-gather on the network: each participant's block of ``size`` reaches all.

    ``k - 1`` steps; at each, participant ``i`` sends the block it received
    last (its own first) to ``i + 1``, with the same per-participant progress
    rule as :func:`ring_allreduce` (the all-gather half of the ring, with
    whole blocks: how sparse top-k payloads are gathered, issue 37). With
    ``k`` equal participants and the NIC as the only limit it takes
    ``(k - 1)(n_b l + ranks * S / B)`` (:func:`sim.analytic.network.ring_allgather_time`).

    Parameters
    ----------
    service : NetworkService
    nodes : sequence
        Participants in ring order (``k = 1``: nothing moves).
    size : float
        Each rank's block.
    ranks, bucket_size
        As :func:`ring_allreduce`.

    Returns
    -------
    simpy.Event
        With the state on its ``ring`` attribute (``cancel()``).
    """
    ranks = check_int("ranks", ranks, low=1)
    nodes = list(nodes)
    check(len(nodes) >= 1, "nodes", "at least one participant", nodes)
    done = service.env.event()
    buckets = bucket_sizes(size, bucket_size)
    ring = _Ring(service, nodes, buckets, ranks, done, gather=True)
    done.ring = ring  # type: ignore[attr-defined]
    if len(nodes) == 1 or not buckets:
        done.succeed()
        return done
    ring.start()
    return done
