"""Transfers of the training system over a network (``TrainingConfig.network``).

With a network every byte the training system moves is a flow of
:mod:`sim.network` between the nodes of the replicas involved:

* a microbatch's activations (forward) and gradients (backward) between two
  stages: ``t`` flows of ``activation_size / t`` from the sender's node to the
  receiver's (``t`` the sender's tensor-parallel ranks);
* the gradient all-reduce of every stage at the end of a step: a ring over
  the nodes of the stage's live participants, ``t`` rings of
  ``param_size / t`` in buckets (:func:`sim.network.collectives.ring_allreduce`),
  every stage at once;
* the weight download of a replica that comes back (or replaces a preempted
  one): ``param_size`` from the node of the stage's lowest-index live replica,
  else from ``checkpoint_node``, else it takes the config's ``download_time``;
* a checkpoint with ``checkpoint_node``: every stage writes ``param_size``
  from its lowest-index live replica to that node, all at once.

``p2p="overlap"``: the sender goes on with its next pass at once and the
microbatch joins the receiver's queue when it arrives. ``p2p="blocking"``
(NCCL send/recv): the transfer starts when the receiver is not computing, and
both replicas are held (no pass starts) until it ends; a replica held by a
send can start a receive meanwhile (Megatron and DeepSpeed post them together),
so two neighbours sending to each other do not deadlock.

A transfer cut by a failure at either end is withdrawn from the network, and
its microbatch is re-queued at the destination stage after the detection
timeout, to be sent again from the nearest live replica holding its data
(:meth:`sim.training.flow.Flow.requeue`).
"""

from __future__ import annotations

from typing import Any

import simpy

from ..network.collectives import ring_allreduce
from ..network.service import NetworkService
from ..timeline import NULL
from .config import network_of

__all__ = ["Transfers", "P2P"]


class P2P:
    """One transfer between two replicas: its flows, ends, and what to do on arrival."""

    __slots__ = ("src", "dst", "events", "left", "on_arrival", "mb", "dest_stage", "started",
                 "size", "owner", "t0")

    def __init__(self, owner: Transfers, src: Any, dst: Any, size: float, mb: Any,
                 dest_stage: int, on_arrival: Any) -> None:
        self.owner = owner
        self.src, self.dst, self.size = src, dst, size
        self.mb = mb
        self.dest_stage = dest_stage
        self.on_arrival = on_arrival
        self.events: list[simpy.Event] = []
        self.left = 0
        self.started = False
        self.t0 = 0.0

    def start(self) -> None:
        o = self.owner
        self.started = True
        self.t0 = o.env.now
        t = o.tp[self.src.stage]
        a, b = o.node_of(self.src), o.node_of(self.dst)
        self.left = t
        for _ in range(t):
            ev = o.service.transfer(a, b, self.size / t)
            ev.callbacks.append(self._one)
            self.events.append(ev)

    def _one(self, _ev: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.owner.arrived(self)

    def cancel(self) -> None:
        for ev in self.events:
            if not ev.processed:
                ev.callbacks = [] if ev.callbacks is not None else None
                self.owner.service.cancel(ev)


class Transfers:
    """The training system's side of the network: nodes, ranks, the service, transfers in flight.

    Parameters
    ----------
    config : TrainingConfig
        With ``network`` set.
    env : simpy.Environment
    replicas : list of Replica
    """

    def __init__(self, config: Any, env: simpy.Environment, replicas: list[Any], *,
                 recorder: Any = None) -> None:
        c = self.config = config
        self.env = env
        self.network = network_of(c)
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.service = NetworkService(env, self.network, weighting=c.network_weighting,
                                      contention=c.contention, recorder=self.rec)
        self.nodes = c.network_nodes
        tp = c.tensor_parallel
        self.tp = [row[0] for row in tp] if isinstance(tp, tuple) else [tp] * c.stages
        self.blocking = c.p2p == "blocking"
        self.inflight: dict[Any, list[P2P]] = {rep: [] for rep in replicas}
        self.pending: dict[Any, list[P2P]] = {rep: [] for rep in replicas}
        self.flow: Any = None  # set by the flow
        self._rings: list[Any] = []
        if self.blocking:
            for rep in replicas:
                rep.gate = self.gate

    def node_of(self, rep: Any) -> Any:
        """The network node of replica ``rep``."""
        return self.nodes[rep.stage][rep.index]

    # -- point to point ----------------------------------------------------------------
    def p2p(self, src: Any, dst: Any, size: float, mb: Any, dest_stage: int,
            on_arrival: Any) -> P2P:
        """Move ``size`` from replica ``src`` to replica ``dst``; ``on_arrival()`` when done."""
        x = P2P(self, src, dst, size, mb, dest_stage, on_arrival)
        self.inflight[src].append(x)
        self.inflight[dst].append(x)
        if not self.blocking:
            x.start()
            return x
        src.held += 1
        if not dst._in_timeout:  # not computing: the rendezvous is now
            self._begin(x)
        else:
            self.pending[dst].append(x)
        return x

    def _begin(self, x: P2P) -> None:
        dst = x.dst
        if dst._waiting is not None:  # idle, waiting for work: it is taken for the receive
            dst._waiting = None
            dst.idle.pop(dst, None)
        dst.held += 1
        x.start()

    def gate(self, rep: Any) -> bool:
        """Blocking mode, asked before a replica starts a pass: True while it must wait."""
        pend = self.pending[rep]
        if pend:
            self.pending[rep] = []
            for x in pend:
                self._begin(x)
        return rep.held > 0

    def arrived(self, x: P2P) -> None:
        self.rec.p2p(x, self.env.now)
        self.inflight[x.src].remove(x)
        self.inflight[x.dst].remove(x)
        if self.blocking:
            for rep in (x.src, x.dst):
                rep.held -= 1
        x.on_arrival()
        if self.blocking:
            for rep in (x.src, x.dst):
                if rep.held == 0:
                    rep.resume()

    def replica_down(self, rep: Any) -> list[P2P]:
        """``rep`` failed: its transfers in flight are cut; the ones cut (to re-queue)."""
        cut = self.inflight[rep]
        self.inflight[rep] = []
        for x in cut:
            other = x.dst if x.src is rep else x.src
            if x in self.inflight[other]:
                self.inflight[other].remove(x)
            if x.started:
                self.rec.p2p(x, self.env.now, cut=True)
            x.cancel()
        return cut

    # -- collectives -------------------------------------------------------------------
    def allreduce(self, participants: list[list[Any]]) -> simpy.Event | None:
        """Every stage's ring all-reduce at once; None when nothing moves."""
        c = self.config
        events = []
        self._rings = []
        for j, reps in enumerate(participants):
            if len(reps) < 2:
                continue
            t = self.tp[j]
            ev = ring_allreduce(self.service, [self.node_of(r) for r in reps],
                                c.param_size / t, ranks=t, bucket_size=c.bucket_size)
            if not ev.triggered:
                events.append(ev)
                self._rings.append(ev.ring)
        if not events:
            return None
        return simpy.AllOf(self.env, events)

    def cancel_collectives(self) -> None:
        """The step was lost: withdraw the flows of its all-reduce still moving."""
        for ring in self._rings:
            ring.cancel()
        self._rings = []

    def download(self, rep: Any) -> simpy.Event | None:
        """``rep``'s weight download, or None to take the config's ``download_time``."""
        c = self.config
        if not c.param_size:
            return None
        peers = [r for r in self.flow.live[rep.stage] if r is not rep]
        if peers:
            src = self.node_of(peers[0])
        elif c.checkpoint_node is not None:
            src = c.checkpoint_node
        else:
            return None
        return self.service.transfer(src, self.node_of(rep), c.param_size)

    def checkpoint(self) -> simpy.Event | None:
        """Every stage writes its parameters to ``checkpoint_node``; None without one."""
        c = self.config
        if c.checkpoint_node is None or not c.param_size:
            return None
        events = []
        for j in range(c.stages):
            live = self.flow.live[j]
            if live:
                events.append(self.service.transfer(self.node_of(live[0]), c.checkpoint_node,
                                                    c.param_size))
        return simpy.AllOf(self.env, events) if events else None
