"""Training traffic to time: the one adapter every training engine hands its transfers to.

The engine (:class:`sim.training.system.TrainingSystem`, the queueing
pipeline) chooses it once per run with :func:`traffic_for` and gives it to its
flow; the flow and the trainer ask it for every byte the training system
moves, and never compute a transfer's time themselves:

* :class:`Traffic`, the closed form (no ``network``): a transfer of ``S``
  over a hop takes ``latency + S / bandwidth`` (the config's ``hop_times``),
  or a plan's own times (``transfer_times``, each hop's from the plan's
  bandwidth curves); the step's gradient all-reduce is the ring law
  :func:`sim.analytic.ring_allreduce_time` (or a plan's ``allreduce_times``);
* :class:`NetworkTraffic`, flows of :mod:`sim.network` (``network`` set):
  every transfer is ``t`` flows between the nodes of the two replicas (``t``
  the sender's tensor-parallel ranks), the all-reduce a ring of flows
  (:func:`sim.network.collectives.ring_allreduce`), weight downloads and
  checkpoint writes flows too.

What the engines ask (the same questions in both forms):

* the replica servers of :class:`~sim.training.flow.Flow`: :attr:`Traffic.hops`
  and :attr:`Traffic.hops_back`, the time between finishing a pass at one
  stage and being routed at the next (the closed form's hop; 0 over a
  network), and :meth:`NetworkTraffic.deliver`, the transfer to the replica
  routed to (over a network only: :attr:`Traffic.flows` says which);
* the framework devices of :class:`~sim.training.framework.FrameworkFlow`:
  :meth:`Traffic.send` (a hop's transfer overlapped with compute) and
  :meth:`Traffic.transfer` (a paired blocking send and receive);
* the trainer: :meth:`Traffic.step_tail` (the step's all-reduce and optimizer
  step, one call), :meth:`Traffic.checkpoint` and :meth:`Traffic.cancel_step`;
* the replicas: :meth:`Traffic.download` and :meth:`Traffic.replica_down`.

Over a network, ``p2p="overlap"``: the sender goes on with its next pass at
once and the microbatch joins the receiver's queue when it arrives.
``p2p="blocking"`` (NCCL send/recv): the transfer starts when the receiver is
not computing, and both replicas are held (no pass starts) until it ends; a
replica held by a send can start a receive meanwhile (Megatron and DeepSpeed
post them together), so two neighbours sending to each other do not deadlock.
A transfer cut by a failure at either end is withdrawn from the network, and
its microbatch is re-queued at the destination stage after the detection
timeout, to be sent again from the nearest live replica holding its data
(:meth:`sim.training.flow.Flow.requeue`).
"""

from __future__ import annotations

from typing import Any

import simpy

from ..analytic.training import ring_allreduce_time

__all__ = ["Traffic", "NetworkTraffic", "traffic_for"]


class Traffic:
    """Training traffic by the closed form (a config without ``network``).

    Parameters
    ----------
    config : TrainingConfig
    env : simpy.Environment

    Attributes
    ----------
    flows : bool
        False here: a point-to-point transfer is a time between stages, spent
        before the microbatch is routed at the next stage (True over a
        network: a transfer between the nodes of two replicas, once routed).
    hops, hops_back : tuple of float
        Per hop ``j -> j+1``: the activation's (gradient's) time between
        stages (the slowest pipeline's with a plan's ``transfer_times``).
    track : bool
        The step's all-reduce needs each stage's participants (a sync with
        parameters or latency).
    download_time : float
        A recovering replica's weight download when :meth:`download` gives no event.
    """

    flows = False

    def __init__(self, config: Any, env: simpy.Environment) -> None:
        c = self.config = config
        self.env = env
        self.track = c.sync == "allreduce" and (c.param_size > 0 or c.mean_latency > 0)
        self.hops: tuple[float, ...] = c.hop_times
        self.hops_back: tuple[float, ...] = c.hop_times_back
        self.download_time: float = c.download_time
        self.flow: Any = None
        self._xfer: Any = None

    def attach(self, flow: Any, replicas: list[Any] | None = None) -> None:
        """The engine's flow (its live replicas: downloads and checkpoints read them);
        ``replicas``: its replica servers, when transfers go replica to replica."""
        self.flow = flow

    # -- point to point ---------------------------------------------------------------
    def _hop_time(self, s: int, k: int, grad: bool) -> float:
        """Hop ``s`` of pipeline ``k`` (activation, or gradient back) in the closed form."""
        x = self._xfer
        if x is None:
            x = self._xfer = self.config.pipeline_transfer_times
        return x[s][k][1 if grad else 0]

    def begin_step(self) -> None:
        """A framework step launches its programs (over a network: its transfers are tracked)."""

    def send(self, s: int, k: int, grad: bool, arrived: Any) -> None:
        """Hop ``s`` of pipeline ``k`` overlapped with compute: ``arrived()`` when it is there
        (at once for a hop of no time)."""
        d = self._hop_time(s, k, grad)
        if d <= 0.0:
            arrived()
            return
        t = self.env.timeout(d)
        t.callbacks.append(lambda _e: arrived())

    def transfer(self, s: int, k: int, grad: bool) -> simpy.Event:
        """Hop ``s`` of pipeline ``k`` as a paired blocking send and receive: the event of its end."""
        return self.env.timeout(self._hop_time(s, k, grad))

    def replica_down(self, rep: Any) -> list[Any]:
        """``rep`` failed: the transfers cut (none in the closed form)."""
        return []

    def download(self, rep: Any) -> simpy.Event | None:
        """``rep``'s weight download, or None to take :attr:`download_time`."""
        return None

    def cancel(self, ev: simpy.Event) -> None:  # pragma: no cover - no event is handed out
        """Withdraw a transfer (a download cut by a failure)."""

    # -- the step's end -----------------------------------------------------------------
    def closed_tail(self) -> float:
        """The time after the all-reduce: the optimizer step, or a plan's per-stage all-reduce
        and optimizer step (the slowest stage) after its tied all-reduce."""
        c = self.config
        tail = c.optimizer_time
        if c.allreduce_times is not None:  # a plan's per-stage all-reduce and optimizer step
            opt = c.optimizer_times or (0.0,) * c.stages
            tail = c.tied_allreduce_time + max(a + o for a, o in zip(c.allreduce_times, opt,
                                                                      strict=True))
        return tail

    def step_tail(self, participants: list[set], used: int | None = None):
        """The step's end (a generator): the gradient all-reduce among each stage's live
        participants (or, fastest ``K`` of ``n``, among the ``used`` pipelines), then the
        optimizer step.

        The ring law :func:`sim.analytic.ring_allreduce_time` of ``param_size`` over
        ``bandwidth`` and the mean latency; the stages' rings at once (the slowest).
        """
        c = self.config
        sync = 0.0
        if used is not None:
            if self.track and used > 1:  # the ring among the K pipelines the step waited for
                sync = ring_allreduce_time(used, c.param_size, c.bandwidth, c.mean_latency)
        elif self.track:
            lat, P, W = c.mean_latency, c.param_size, c.bandwidth
            for reps in participants:
                n = sum(1 for r in reps if r.live)
                if n > 1:
                    sync = max(sync, ring_allreduce_time(n, P, W, lat))
        tail = self.closed_tail()
        if sync + tail > 0:
            yield self.env.timeout(sync + tail)

    def checkpoint(self) -> simpy.Event | None:
        """The checkpoint's write, or None (only its ``checkpoint_cost``)."""
        return None

    def cancel_step(self) -> None:
        """The step was lost: withdraw its transfers and collectives still moving."""


class _P2P:
    """One transfer between two replica servers: its flows, ends, and what to do on arrival."""

    __slots__ = ("src", "dst", "events", "left", "on_arrival", "mb", "dest_stage", "started",
                 "size", "owner")

    def __init__(self, owner: NetworkTraffic, src: Any, dst: Any, size: float, mb: Any,
                 dest_stage: int, on_arrival: Any) -> None:
        self.owner = owner
        self.src, self.dst, self.size = src, dst, size
        self.mb = mb
        self.dest_stage = dest_stage
        self.on_arrival = on_arrival
        self.events: list[simpy.Event] = []
        self.left = 0
        self.started = False

    def start(self) -> None:
        o = self.owner
        self.started = True
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


class NetworkTraffic(Traffic):
    """Training traffic as flows on a network (a config with ``network``).

    Parameters
    ----------
    config : TrainingConfig
    env : simpy.Environment
    network : sim.network.Network
        The built network of ``config.network`` (:func:`sim.network.shared_network`).

    Attributes
    ----------
    service : sim.network.NetworkService
        The replication's network service (every flow of the run).
    """

    flows = True

    def __init__(self, config: Any, env: simpy.Environment, network: Any) -> None:
        super().__init__(config, env)
        from ..network.service import NetworkService

        c = config
        self.network = network
        self.service = NetworkService(env, network, weighting=c.network_weighting,
                                      contention=c.contention)
        self.nodes = c.network_nodes
        tp = c.tensor_parallel
        self.tp = [row[0] for row in tp] if isinstance(tp, tuple) else [tp] * c.stages
        self.blocking = c.p2p == "blocking"
        # the time between stages is none: a transfer is a flow once the receiver is routed
        self.hops = self.hops_back = (0.0,) * max(c.stages - 1, 0)
        self.inflight: dict[Any, list[_P2P]] = {}
        self.pending: dict[Any, list[_P2P]] = {}
        self._moving: list[simpy.Event] = []  # the step's transfers and collectives in flight

    def attach(self, flow: Any, replicas: list[Any] | None = None) -> None:
        self.flow = flow
        if replicas is None:
            return
        self.inflight = {rep: [] for rep in replicas}
        self.pending = {rep: [] for rep in replicas}
        if self.blocking:
            for rep in replicas:
                rep.gate = self.gate

    def node_of(self, rep: Any) -> Any:
        """The network node of replica (or device) ``rep``."""
        return self.nodes[rep.stage][rep.index]

    # -- point to point between replica servers (Flow) -----------------------------------
    def deliver(self, src: Any, dst: Any, size: float, mb: Any, dest_stage: int,
                on_arrival: Any) -> _P2P:
        """Move ``size`` from replica ``src`` to replica ``dst``; ``on_arrival()`` when done."""
        x = _P2P(self, src, dst, size, mb, dest_stage, on_arrival)
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

    def _begin(self, x: _P2P) -> None:
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

    def arrived(self, x: _P2P) -> None:
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

    def replica_down(self, rep: Any) -> list[_P2P]:
        """``rep`` failed: its transfers in flight are cut; the ones cut (to re-queue)."""
        cut = self.inflight[rep]
        self.inflight[rep] = []
        for x in cut:
            other = x.dst if x.src is rep else x.src
            if x in self.inflight[other]:
                self.inflight[other].remove(x)
            x.cancel()
        return cut

    # -- point to point of framework devices (FrameworkFlow) -----------------------------
    def begin_step(self) -> None:
        self._moving = []

    def _hop_flows(self, s: int, k: int, grad: bool) -> simpy.Event:
        """Hop ``s`` of pipeline ``k``: the sender's ``t`` ranks send ``1/t`` of the
        micro-batch's activation (or gradient) each; fires when all arrived."""
        c = self.config
        a, b = (s + 1, s) if grad else (s, s + 1)
        t = self.tp[a]
        size = (c.transfer_sizes[s] if c.transfer_sizes is not None else c.activation_size) / t
        src, dst = self.nodes[a][k], self.nodes[b][k]
        evs = [self.service.transfer(src, dst, size) for _ in range(t)]
        self._moving.extend(evs)
        return simpy.AllOf(self.env, evs)

    def send(self, s: int, k: int, grad: bool, arrived: Any) -> None:
        self._hop_flows(s, k, grad).callbacks.append(lambda _e: arrived())

    def transfer(self, s: int, k: int, grad: bool) -> simpy.Event:
        return self._hop_flows(s, k, grad)

    # -- weights ---------------------------------------------------------------------------
    def download(self, rep: Any) -> simpy.Event | None:
        """``rep``'s weight download: ``param_size`` from the node of the stage's
        lowest-index live replica, else from ``checkpoint_node``; None (the config's
        ``download_time``) without either."""
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

    def cancel(self, ev: simpy.Event) -> None:
        self.service.cancel(ev)

    def checkpoint(self) -> simpy.Event | None:
        """Every stage writes its parameters from its lowest-index live replica to
        ``checkpoint_node``, all at once; None without one."""
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

    # -- the step's end -----------------------------------------------------------------
    def _rings(self, participants: list[list[Any]]) -> simpy.Event | None:
        """Every stage's ring all-reduce of ``param_size`` at once; None when nothing moves."""
        from ..network.collectives import ring_allreduce

        c = self.config
        events = []
        self._moving = []
        for j, reps in enumerate(participants):
            if len(reps) < 2:
                continue
            t = self.tp[j]
            ev = ring_allreduce(self.service, [self.node_of(r) for r in reps],
                                c.param_size / t, ranks=t, bucket_size=c.bucket_size)
            if not ev.triggered:
                events.append(ev)
                self._moving.append(ev)
        if not events:
            return None
        return simpy.AllOf(self.env, events)

    def _plan_collectives(self):
        """A plan's collectives: the tied all-reduce, then every stage's gradient ring and
        its optimizer step (the stages at once)."""
        from ..network.collectives import ring_allreduce

        c, env = self.config, self.env
        L = c.stages
        nodes = self.nodes
        r = c.replicas[0]
        if c.tied_allreduce_size and L > 1:
            t = self.tp[0]
            evs = [ring_allreduce(self.service, [nodes[0][k], nodes[L - 1][k]],
                                  c.tied_allreduce_size, ranks=t, bucket_size=c.bucket_size)
                   for k in range(r)]
            self._moving.extend(evs)
            yield simpy.AllOf(env, evs)
        opt = c.optimizer_times or (0.0,) * L

        def stage(j: int):
            if r > 1 and c.allreduce_sizes[j] > 0:
                ev = ring_allreduce(self.service, list(nodes[j]), c.allreduce_sizes[j],
                                    ranks=self.tp[j], bucket_size=c.bucket_size)
                self._moving.append(ev)
                yield ev
            if opt[j] > 0:
                yield env.timeout(opt[j])

        yield simpy.AllOf(env, [env.process(stage(j)) for j in range(L)])
        self._moving = []

    def step_tail(self, participants: list[set], used: int | None = None):
        """The step's end as flows: each stage's ring all-reduce among its live participants
        (:func:`sim.network.collectives.ring_allreduce`, ``t`` rings of ``param_size / t``
        in buckets), or a plan's collectives (its sizes); then the optimizer step."""
        if self.track:
            ring = self._rings([sorted((r for r in reps if r.live), key=lambda r: r.index)
                                for reps in participants])
            if ring is not None:
                yield ring
        if self.config.allreduce_sizes is not None:
            yield from self._plan_collectives()
        tail = self.closed_tail()
        if tail > 0:
            yield self.env.timeout(tail)

    def cancel_step(self) -> None:
        for ev in self._moving:
            ring = getattr(ev, "ring", None)
            if ring is not None:
                ring.cancel()
            elif not ev.triggered:
                self.service.cancel(ev)
        self._moving = []


def traffic_for(config: Any, env: simpy.Environment) -> Traffic:
    """The adapter of a run: :class:`NetworkTraffic` over ``config.network`` (built and kept by
    :func:`sim.network.shared_network`), else the closed form :class:`Traffic`."""
    if config.network is None:
        return Traffic(config, env)
    from ..network import shared_network

    return NetworkTraffic(config, env, shared_network(config.network, nic=config.nic))
