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

* the replica servers of :class:`~sim.training.flow.ReplicaFlow`: :attr:`Traffic.hops`
  and :attr:`Traffic.hops_back`, the time between finishing a pass at one
  stage and being routed at the next (the closed form's hop; 0 over a
  network), and :meth:`NetworkTraffic.deliver`, the transfer to the replica
  routed to (over a network only: :attr:`Traffic.flows` says which);
* the framework devices of :class:`~sim.training.framework.FrameworkFlow`:
  :meth:`Traffic.send` (a hop's transfer overlapped with compute) and
  :meth:`Traffic.transfer` (a paired blocking send and receive);
* the trainer: :meth:`Traffic.step_tail` (the step's all-reduce and optimizer
  step, one call), :meth:`Traffic.checkpoint` and :meth:`Traffic.cancel_step`;
  without a barrier (a plan's ``allreduce_barrier`` False) the framework
  devices start their stage's collectives themselves: :meth:`Traffic.launch`
  and :meth:`Traffic.program_done`, and the step's tail waits for them;
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
(:meth:`sim.training.flow.ReplicaFlow.requeue`).
"""

from __future__ import annotations

import math
from typing import Any

import simpy

from ..analytic.network import ring_allreduce_time, ring_bytes_sent
from ..analytic.placement import barrier_tail
from ..network.channels import Channels
from ..network.collectives import bucket_sizes
from ..timeline import NULL
from .config import dp_group_rounds, pipe_group_chains

__all__ = ["Traffic", "NetworkTraffic", "WanTraffic", "traffic_for", "gradient_buckets",
           "DDP_BUCKET_BYTES", "DDP_FIRST_BUCKET_BYTES"]

#: PyTorch DDP's gradient bucket: ``bucket_cap_mb=25`` in
#: ``torch/nn/parallel/distributed.py`` (``DistributedDataParallel.__init__``:
#: ``bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)``).
DDP_BUCKET_BYTES = 25 * 1024 * 1024
#: DDP's first bucket (``dist._DEFAULT_FIRST_BUCKET_BYTES``, 1 MiB: ``_ddp_init_helper``
#: cuts the parameters in registration order with limits ``[first, cap]``, then reverses
#: the buckets "to approximate the order in which their gradients are produced").
DDP_FIRST_BUCKET_BYTES = 1024 * 1024


def gradient_buckets(size: float, bucket: float | None, *, rule: str = "ddp",
                     first_stage: bool = True) -> list[float]:
    """A replica's gradients of ``size`` (per rank) cut into buckets, in the order the
    backward pass produces them (from the stage's output end to its input end).

    Parameters
    ----------
    size : float
    bucket : float or None
        The bucket (``--sync allreduce:bucket_size=B``); None: the framework's default.
    rule : {"ddp", "megatron"}
        ``ddp`` (PyTorch DDP's ``Reducer``, dtsim's plain configs): the
        parameters are cut in registration (forward) order, the first bucket
        :data:`DDP_FIRST_BUCKET_BYTES` and the others :data:`DDP_BUCKET_BYTES`
        by default (``bucket`` each when given), then reversed; ``megatron``
        (a plan: Megatron-LM's ``DistributedDataParallel`` with
        ``overlap_grad_reduce``): cut in production order into ``bucket``
        (the plan builder gives Megatron's default, ``max(4e7, 1e6 dp)``
        values), and one bucket on every pipeline stage but the first
        (``megatron/core/distributed/distributed_data_parallel.py``: "Turn off
        bucketing if we are on a pipeline stage that is not the first").
    first_stage : bool
        The stage is the pipeline's first (``megatron``).
    """
    if size <= 0:
        return []
    if rule == "megatron":
        if not first_stage or bucket is None:
            return [size]
        return bucket_sizes(size, bucket)
    if bucket is not None:
        return bucket_sizes(size, bucket)[::-1]
    if size <= DDP_FIRST_BUCKET_BYTES:
        return [size]
    return ([DDP_FIRST_BUCKET_BYTES] + bucket_sizes(size - DDP_FIRST_BUCKET_BYTES,
                                                    DDP_BUCKET_BYTES))[::-1]


class _Reduce:
    """One stage's overlapped all-reduce in a step: buckets released when every participant
    has produced them, reduced one after the other (one communicator: in order)."""

    __slots__ = ("stage", "reps", "sizes", "fracs", "ready", "next", "busy", "done", "dead", "t0")

    def __init__(self, env: simpy.Environment, stage: int, reps: list[Any],
                 sizes: list[float]) -> None:
        self.stage, self.reps, self.sizes = stage, reps, sizes
        total = sum(sizes)
        acc, fracs = 0.0, []
        for b in sizes:
            acc += b
            fracs.append(acc / total)
        if fracs:
            fracs[-1] = 1.0  # the last bucket is ready as the pass ends, exactly
        self.fracs = fracs
        self.ready = [0] * len(sizes)
        self.next = 0
        self.busy = False
        self.dead = False
        self.t0 = 0.0  # when the bucket in flight started (the timeline's)
        self.done = env.event()
        if not sizes or not reps:
            self.done.succeed()


class Traffic:
    """Training traffic by the closed form (a config without ``network``).

    Parameters
    ----------
    config : TrainingConfig
    env : simpy.Environment
    recorder : sim.timeline.Recorder, optional
        The timeline's recorder: told of each framework transfer (from when it leaves its
        FIFO channel's queue to its arrival, and the wait before), and of each bucket of an
        overlapped all-reduce (default: none; the numbers are the same either way).

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
    sent : dict
        Size units each replica sent in the step-end gradient all-reduces (the ring
        law's :func:`sim.analytic.network.ring_bytes_sent`; node totals, every rank).
    """

    flows = False

    def __init__(self, config: Any, env: simpy.Environment, *, recorder: Any = None) -> None:
        c = self.config = config
        self.env = env
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.track = c.ring_sync
        self.hops: tuple[float, ...] = c.hop_times
        self.hops_back: tuple[float, ...] = c.hop_times_back
        self.download_time: float = c.download_time
        self.flow: Any = None
        self._xfer: Any = None
        # overlapped transfers on FIFO channels (p2p "overlap"): when each channel is free
        self.fifo = c.p2p == "overlap"
        self._free: dict[Any, float] = {}
        # the gradient all-reduce overlapped with the backward pass (sync overlap=backward)
        spec = c.sync_spec
        self.overlap = spec.get("overlap") == "backward"
        self.bucket = spec.get("bucket_size")
        self._left: dict[Any, int] = {}
        self._reduces: list[_Reduce] = []
        #: the bucket of an all-reduce that does not overlap (per rank; inf: one)
        self.ring_bucket = self.bucket if self.bucket is not None else c.bucket_size
        self.sent: dict[Any, float] = {}
        # a plan's collectives without a barrier (allreduce_barrier False): each stage's start
        # as its devices' programs end (launch, program_done); a lost step's are left behind
        self.staged = not c.allreduce_barrier
        self._gen = 0
        self._ends: dict[tuple[int, int], simpy.Event] = {}
        # the timeline's framework hops still moving: a lost step cuts them (cancel_step)
        self._open_hops: dict[int, tuple] = {}
        self._hop_ids = 0
        self._staged: list[simpy.Process] = []

    def attach(self, flow: Any, replicas: list[Any] | None = None) -> None:
        """The engine's flow (its live replicas: downloads and checkpoints read them);
        ``replicas``: its replica servers (they report their backward passes to an
        overlapped all-reduce; over a network, transfers go replica to replica)."""
        self.flow = flow
        if replicas is not None and self.overlap:
            for rep in replicas:
                rep.bwd_hook = self.backward_started

    # -- what each replica sends in the all-reduces (issue 37) ---------------------------
    def _ranks(self, j: int) -> int:
        """Ranks a replica of stage ``j`` runs its rings with (1 in the closed form)."""
        return 1

    def _count_ring(self, reps: Any, size: float, scatter: bool = False) -> None:
        """Each of the ``n`` members of a ring all-reduce of ``size`` (a node's total) sends
        ``2 (n - 1) size / n`` (``scatter``, a reduce-scatter: half of it)."""
        reps = list(reps)
        if len(reps) < 2 or size <= 0:
            return
        x = ring_bytes_sent(len(reps), size)
        if scatter:
            x /= 2
        for rep in reps:
            self.sent[rep] = self.sent.get(rep, 0.0) + x

    def sent_by(self, replicas: Any) -> list[float]:
        """Size units each of ``replicas`` sent in the step-end all-reduces; NaN for a plan's
        closed form (its all-reduce times carry no sizes)."""
        dflt = math.nan if self.config.allreduce_times is not None else 0.0
        return [self.sent.get(rep, dflt) for rep in replicas]

    # -- point to point ---------------------------------------------------------------
    def _hop_time(self, s: int, k: int, grad: bool) -> float:
        """Hop ``s`` of pipeline ``k`` (activation, or gradient back) in the closed form."""
        x = self._xfer
        if x is None:
            x = self._xfer = self.config.pipeline_transfer_times
        return x[s][k][1 if grad else 0]

    def channel_delay(self, channel: Any, d: float) -> float:
        """The delay of a transfer of time ``d`` sent now on ``channel`` (FIFO, p2p
        ``overlap``): ``d`` when the channel is free, else the wait for the transfers
        before it, then ``d``; the channel is then busy until it arrives."""
        now = self.env.now
        free = self._free.get(channel, now)
        delay = (free - now) + d if free > now else d
        self._free[channel] = now + delay
        return delay

    def begin_step(self) -> None:
        """A framework step launches its programs (over a network: its transfers are tracked)."""

    def send(self, s: int, k: int, grad: bool, arrived: Any, i: int | None = None) -> None:
        """Hop ``s`` of pipeline ``k`` overlapped with compute: ``arrived()`` when it is there
        (at once for a hop of no time on a free channel). p2p ``overlap``: one at a time per
        sending and receiving device (the channel ``(k, sender, receiver)``). ``i``: the
        pipeline's micro-batch it carries (the timeline's; None: not recorded)."""
        d = self._hop_time(s, k, grad)
        now = t0 = self.env.now
        if self.fifo:
            L = self.config.stages
            a, b = (s + 1, s) if grad else (s, s + 1)
            ch = (k, a % L, b % L)
            if self.rec.on:  # it leaves the queue when the transfers before it have arrived
                free = self._free.get(ch, now)
                if free > now:
                    t0 = free
            d = self.channel_delay(ch, d)
        if d <= 0.0:
            arrived()
            return
        t = self.env.timeout(d)
        t.callbacks.append(lambda _e: arrived())
        if i is not None and self.rec.on:
            self._record_hop(t, s, k, grad, i, now, t0)

    def transfer(self, s: int, k: int, grad: bool, i: int | None = None) -> simpy.Event:
        """Hop ``s`` of pipeline ``k`` as a paired blocking send and receive: the event of its
        end (``i``: as :meth:`send`)."""
        t = self.env.timeout(self._hop_time(s, k, grad))
        if i is not None and self.rec.on:
            now = self.env.now
            self._record_hop(t, s, k, grad, i, now, now)
        return t

    def _record_hop(self, ev: simpy.Event, s: int, k: int, grad: bool, i: int, sent: float,
                    t0: float | list) -> None:
        """Record a framework hop on the timeline when ``ev`` (its arrival) fires: handed over
        at ``sent``, moving from ``t0`` (a one-item list: set when it left its channel)."""
        rec, env, flow = self.rec, self.env, self.flow
        key = self._hop_ids
        self._hop_ids += 1
        self._open_hops[key] = (grad, s, i, k, sent, t0)

        def arrived(_e: Any) -> None:
            if self._open_hops.pop(key, None) is not None:  # not cut by a lost step before
                rec.framework_hop(flow, grad, s, i, k, sent, _start(t0), env.now)

        ev.callbacks.append(arrived)

    def replica_down(self, rep: Any) -> list[Any]:
        """``rep`` failed: the transfers cut (none in the closed form)."""
        return []

    def download(self, rep: Any) -> simpy.Event | None:
        """``rep``'s weight download, or None to take :attr:`download_time`."""
        return None

    def cancel(self, ev: simpy.Event) -> None:  # pragma: no cover - no event is handed out
        """Withdraw a transfer (a download cut by a failure)."""

    # -- a plan's collectives without a barrier ------------------------------------------
    def launch(self, pipes: list[int]) -> None:
        """A framework step's programs start on pipelines ``pipes``. Without a barrier
        (``allreduce_barrier`` False: upstream DeepSpeed, Megatron-LM) every stage's
        collectives are set up now and start as its devices end their programs
        (:meth:`program_done`): pipeline ``k``'s tied all-reduce joins its first and last
        stage, before the stages' gradient all-reduces (``tied_first``, DeepSpeed's
        ``ReduceTiedGrads`` then ``ReduceGrads``) or after them (Megatron-LM); each stage's
        gradient all-reduce starts when all its replicas are ready, then its optimizer step
        (``optimizer_barrier``: once every stage has reduced its gradients)."""
        if not self.staged:
            return
        env, L = self.env, self.config.stages
        self._gen += 1
        gen = self._gen
        self._pipes = list(pipes)
        self._ends = {(j, k): env.event() for j in range(L) for k in pipes}
        self._dp_done = [env.event() for _ in range(L)]
        self._reduced = [env.event() for _ in range(L)]
        self._tied: list[simpy.Process] = []
        if L > 1 and self._has_tied():
            self._tied = [env.process(self._staged_tied(k, gen)) for k in pipes]
        self._staged = [env.process(self._staged_stage(j, gen)) for j in range(L)]

    def program_done(self, dev: Any) -> None:
        """Device ``dev`` (stage ``dev.stage``, pipeline ``dev.index``) ended its program."""
        if self.staged:
            ev = self._ends.get((dev.stage, dev.index))
            if ev is not None and not ev.triggered:
                ev.succeed()

    def _has_tied(self) -> bool:
        """The plan has a tied all-reduce (closed form: its time)."""
        return self.config.tied_allreduce_time > 0

    def _tied_ring(self, k: int) -> simpy.Event | None:
        """Pipeline ``k``'s tied all-reduce between its first and last stage (closed form)."""
        c = self.config
        t = c.tied_allreduce_time if c.tied_allreduce_times is None else c.tied_allreduce_times[k]
        return self.env.timeout(t) if t > 0 else None

    def _dp_ring(self, j: int) -> simpy.Event | None:
        """Stage ``j``'s gradient all-reduce among its replicas (closed form: the plan's
        time)."""
        t = self.config.allreduce_times[j]
        return self.env.timeout(t) if t > 0 else None

    def _staged_tied(self, k: int, gen: int):
        """Pipeline ``k``'s tied all-reduce, once both its ends are ready."""
        c, env, L = self.config, self.env, self.config.stages
        if c.tied_first:
            yield simpy.AllOf(env, [self._ends[(0, k)], self._ends[(L - 1, k)]])
        else:
            yield simpy.AllOf(env, [self._dp_done[0], self._dp_done[L - 1]])
        if gen != self._gen:
            return
        ev = self._tied_ring(k)
        if ev is not None:
            yield ev

    def _staged_stage(self, j: int, gen: int):
        """Stage ``j``: (tied,) gradient all-reduce, (tied,) optimizer step, no barrier."""
        c, env, L = self.config, self.env, self.config.stages
        tied = self._tied if j in (0, L - 1) else []
        yield simpy.AllOf(env, [self._ends[(j, k)] for k in self._pipes])
        if tied and c.tied_first:
            yield simpy.AllOf(env, tied)
        if gen != self._gen:
            return
        if self.overlap:  # its buckets went as its last backward passes produced them
            red = self._reduces[j] if j < len(self._reduces) else None
            if red is not None and not red.done.processed:
                yield red.done
        else:
            ev = self._dp_ring(j)
            if ev is not None:
                yield ev
        if gen != self._gen:
            return
        self._dp_done[j].succeed()
        if tied and not c.tied_first:
            yield simpy.AllOf(env, tied)
            if gen != self._gen:
                return
        if c.optimizer_barrier:  # the gradient norm over the pipeline: every stage reduced
            self._reduced[j].succeed()
            yield simpy.AllOf(env, self._reduced)
            if gen != self._gen:
                return
        opt = c.optimizer_times[j] if c.optimizer_times else 0.0
        if opt > 0:
            yield env.timeout(opt)

    def _staged_tail(self):
        """Wait for every stage's collectives and optimizer step (a generator; its value is
        the step's ``(sync, tail)`` for the timeline: the time after the passes)."""
        t0 = self.env.now
        procs = [p for p in self._staged if not p.processed]
        if procs:
            yield simpy.AllOf(self.env, procs)
        self._staged = []
        return 0.0, self.env.now - t0

    # -- the gradient all-reduce overlapped with the backward pass ------------------------
    def _bucket_rule(self, j: int) -> tuple[str, bool]:
        """The bucket rule of ``sync`` (``buckets``; unset: Megatron-LM's for a plan, PyTorch
        DDP's otherwise) and whether stage ``j`` is the pipeline's first."""
        rule = self.config.sync_spec.get("buckets")
        if rule is None:
            rule = "megatron" if self.config.allreduce_sizes is not None else "ddp"
        return rule, j == 0

    def _stage_size(self, j: int) -> float:
        """The gradients one rank of stage ``j`` all-reduces."""
        return self.config.param_size

    def begin_sync(self, stages: list[list[Any]], mbs: list[Any]) -> None:
        """A step's micro-batches are routed (fixed pipelines): count each replica's backward
        passes; its last one releases its buckets (``overlap=backward``)."""
        if not self.overlap:
            return
        for red in self._reduces:
            red.dead = True
        left: dict[Any, int] = {}
        for mb in mbs:
            if mb.pipe < 0:
                continue
            for st in stages:
                rep = st[mb.pipe % len(st)]
                left[rep] = left.get(rep, 0) + 1
        self._left = left
        self._reduces = []
        for j, st in enumerate(stages):
            reps = [r for r in st if left.get(r, 0) > 0]
            rule, first = self._bucket_rule(j)
            sizes = (gradient_buckets(self._stage_size(j), self.bucket, rule=rule,
                                      first_stage=first) if len(reps) > 1 else [])
            self._reduces.append(_Reduce(self.env, j, reps, sizes))

    def backward_started(self, rep: Any, work: float) -> None:
        """``rep`` starts a backward pass of ``work``; its last of the step produces the
        stage's gradients at an even rate over the pass, bucket after bucket."""
        n = self._left.get(rep)
        if not n:
            return
        n -= 1
        self._left[rep] = n
        if n:
            return
        red = self._reduces[rep.stage]
        if red.done.triggered:
            return
        env = self.env
        for b, f in enumerate(red.fracs):
            t = env.timeout(work * f)
            t.callbacks.append(lambda _e, b=b: self._ready(red, b))

    def _ready(self, red: _Reduce, b: int) -> None:
        if red.dead:
            return
        red.ready[b] += 1
        self._pump(red)

    def _pump(self, red: _Reduce) -> None:
        """Start the next bucket once every participant has it and the one before is done."""
        if red.busy or red.dead or red.next >= len(red.sizes):
            return
        if red.ready[red.next] < len(red.reps):
            return
        red.busy = True
        red.t0 = self.env.now
        self._count_ring(red.reps, red.sizes[red.next] * self._ranks(red.stage),
                         self.config.reduce_scatter)
        ev = self._bucket_ring(red, red.sizes[red.next])
        ev.callbacks.append(lambda _e: self._bucket_done(red))

    def _bucket_ring(self, red: _Reduce, size: float) -> simpy.Event:
        """One bucket's ring all-reduce: the ring law (closed form)."""
        c = self.config
        return self.env.timeout(ring_allreduce_time(len(red.reps), size, c.bandwidth,
                                                    c.mean_latency))

    def _bucket_done(self, red: _Reduce) -> None:
        if red.dead:
            return
        if self.rec.on:
            st = self.flow.trainer.step
            self.rec.bucket(red.reps, red.stage, red.next, red.sizes[red.next],
                            None if st is None else st.index, red.t0, self.env.now)
        red.busy = False
        red.next += 1
        if red.next == len(red.sizes):
            red.done.succeed()
        else:
            self._pump(red)

    def _overlapped(self):
        """Wait for every stage's overlapped all-reduce (a generator)."""
        evs = [red.done for red in self._reduces if not red.done.processed]
        if evs:
            yield simpy.AllOf(self.env, evs)

    # -- the step's end -----------------------------------------------------------------
    def closed_tail(self) -> float:
        """The time after the all-reduce: the optimizer step, or a plan's per-stage all-reduce
        and optimizer step (the slowest stage) after its tied all-reduce."""
        c = self.config
        tail = c.optimizer_time
        if c.allreduce_times is not None:  # a plan's per-stage all-reduce and optimizer step
            tail = barrier_tail(c.allreduce_times, c.optimizer_times or (0.0,) * c.stages,
                                c.tied_allreduce_time, optimizer_barrier=c.optimizer_barrier)[0]
        return tail

    def step_tail(self, participants: list[set], used: set[int] | None = None):
        """The step's end (a generator): the gradient all-reduce among each stage's live
        participants (or, fastest ``K`` of ``n``, among the ``used`` pipelines: their
        indices), then the optimizer step.

        The ring law :func:`sim.analytic.ring_allreduce_time` of ``param_size`` over
        ``bandwidth`` and the mean latency; the stages' rings at once (the slowest).

        The generator's value (what ``yield from`` gives) is ``(sync, tail)``: the
        all-reduce's closed-form time after the passes (0 when it overlapped the backward
        pass) and the time after it (:meth:`closed_tail`), which the timeline records.
        """
        c = self.config
        if self.staged:
            return (yield from self._staged_tail())
        if self.overlap:
            yield from self._overlapped()
            tail = self.closed_tail()
            if tail > 0:
                yield self.env.timeout(tail)
            return 0.0, tail
        sync = 0.0
        nb = 1 if self.bucket is None else max(len(bucket_sizes(c.param_size, self.bucket)), 1)
        if used is not None:
            if self.track and len(used) > 1:  # the ring among the K pipelines the step waited for
                sync = ring_allreduce_time(len(used), c.param_size, c.bandwidth, c.mean_latency,
                                           buckets=nb)
                for st in self.flow.stages:
                    self._count_ring([r for r in st if r.index in used], c.param_size)
        elif self.track:
            lat, P, W = c.mean_latency, c.param_size, c.bandwidth
            for reps in participants:
                live = [r for r in reps if r.live]
                self._count_ring(live, P)
                if len(live) > 1:
                    sync = max(sync, ring_allreduce_time(len(live), P, W, lat, buckets=nb))
        tail = self.closed_tail()
        if sync + tail > 0:
            yield self.env.timeout(sync + tail)
        return sync, tail

    def checkpoint(self) -> simpy.Event | None:
        """The checkpoint's write, or None (only its ``checkpoint_cost``)."""
        return None

    def cancel_step(self) -> None:
        """The step was lost: withdraw its transfers and collectives still moving."""
        for red in self._reduces:
            red.dead = True
        self._reduces = []
        self._left = {}
        self._free = {}  # the lost step's transfers no longer hold their channels
        self._gen += 1  # the lost step's staged collectives stop where they are
        self._staged = []
        self._ends = {}
        # the lost step's framework hops still moving end here, cut (docs/timeline.md)
        hops, self._open_hops = self._open_hops, {}
        for grad, s, i, k, sent, t0 in hops.values():
            self.rec.framework_hop(self.flow, grad, s, i, k, sent, _start(t0), self.env.now,
                                   cut=True)


def _start(t0: float | list) -> float:
    """When a recorded hop started moving: ``t0``, or the item of the one-item list set when it
    left its channel (:meth:`Traffic._record_hop`)."""
    return t0[0] if isinstance(t0, list) else t0


class _P2P:
    """One transfer between two replica servers: its flows, ends, and what to do on arrival."""

    __slots__ = ("src", "dst", "events", "left", "on_arrival", "mb", "dest_stage", "started",
                 "size", "owner", "t_sent", "t0")

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
        self.t_sent = 0.0  # the timeline's: when it started, and when it left its channel
        self.t0: float | None = None

    def start(self) -> None:
        o = self.owner
        self.started = True
        t = o.tp[self.src.stage]
        a, b = o.node_of(self.src), o.node_of(self.dst)
        self.left = t
        ch = o.channels if not o.blocking else None
        self.t_sent = now = o.env.now
        moved = None
        if ch is None:
            self.t0 = now
        elif o.rec.on:  # it moves when the first of its ranks leaves its channel's queue
            moved = self._moved
        for r in range(t):
            if ch is not None:  # rank r's stream from src to dst: FIFO
                ev = ch.send((self.src, self.dst, r), a, b, self.size / t, started=moved)
            else:
                ev = o.service.transfer(a, b, self.size / t)
            ev.callbacks.append(self._one)
            self.events.append(ev)

    def _moved(self) -> None:
        if self.t0 is None:
            self.t0 = self.owner.env.now

    def _one(self, _ev: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.owner.arrived(self)

    def cancel(self) -> None:
        for ev in self.events:
            if not ev.processed:
                ev.callbacks = [] if ev.callbacks is not None else None
                self.owner.cancel(ev)


class NetworkTraffic(Traffic):
    """Training traffic as flows on a network (a config with ``network``).

    Parameters
    ----------
    config : TrainingConfig
    env : simpy.Environment
    network : sim.network.Network
        The built network of ``config.network`` (:func:`sim.network.shared_network`).
    recorder : sim.timeline.Recorder, optional
        As :class:`Traffic`'s; also told of each transfer between replica servers and,
        through the service, of every all-reduce chunk and the links' utilisation.
    service : sim.network.NetworkService, optional
        A service to put the flows on, shared with other adapters of the replication
        (DiLoCo's groups and its WAN tier, :class:`WanTraffic`: their traffic shares the
        links); default: a service of its own on ``network``.

    Attributes
    ----------
    service : sim.network.NetworkService
        The replication's network service (every flow of the run).
    """

    flows = True

    def __init__(self, config: Any, env: simpy.Environment, network: Any,
                 service: Any = None, *, recorder: Any = None) -> None:
        super().__init__(config, env, recorder=recorder)
        from ..network.service import NetworkService

        c = config
        self.network = network
        self.service = service if service is not None else NetworkService(
            env, network, weighting=c.network_weighting, contention=c.contention,
            recorder=recorder)
        # p2p "overlap": one stream per sender, receiver and rank (sim.network.channels)
        self.channels = Channels(self.service) if self.fifo else None
        self.nodes = c.network_nodes
        tp = c.tensor_parallel
        self.tp = [row[0] for row in tp] if isinstance(tp, tuple) else [tp] * c.stages
        # per stage, per replica (a plan's stage may mix TP degrees: the Sailor artifact's), and
        # per stage its all-reduce's (rounds, rings at once): dp_group_rounds
        self.tp_rows = tp if isinstance(tp, tuple) else tuple((tp,) * r for r in c.replicas)
        self.rounds = [dp_group_rounds(row) for row in self.tp_rows]
        # per pipeline its pipeline groups (the Sailor artifact's: its largest TP degree), or
        # None: each sender rank sends once (pipe_groups False)
        self.groups = [max(row[k] for row in self.tp_rows) for k in range(c.replicas[0])] \
            if c.pipe_groups else None
        self.blocking = c.p2p == "blocking"
        # the time between stages is none: a transfer is a flow once the receiver is routed
        self.hops = self.hops_back = (0.0,) * max(c.stages - 1, 0)
        self.inflight: dict[Any, list[_P2P]] = {}
        self.pending: dict[Any, list[_P2P]] = {}
        self._moving: list[simpy.Event] = []  # the step's transfers and collectives in flight
        self._lost = 0  # steps lost (cancel_step): a grouped hop's later messages never start

    def attach(self, flow: Any, replicas: list[Any] | None = None) -> None:
        super().attach(flow, replicas)
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

    def _ranks(self, j: int) -> int:
        return self.tp[j]

    # -- point to point between replica servers (ReplicaFlow) -----------------------------------
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
        if self.rec.on:
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

    def replica_down(self, rep: Any) -> list[_P2P]:
        """``rep`` failed: its transfers in flight are cut; the ones cut (to re-queue)."""
        cut = self.inflight[rep]
        self.inflight[rep] = []
        for x in cut:
            other = x.dst if x.src is rep else x.src
            if x in self.inflight[other]:
                self.inflight[other].remove(x)
            if x.started and self.rec.on:
                self.rec.p2p(x, self.env.now, cut=True)
            x.cancel()
        return cut

    # -- point to point of framework devices (FrameworkFlow) -----------------------------
    def begin_step(self) -> None:
        self._moving = []

    def _hop_flows(self, s: int, k: int, grad: bool, fifo: bool,
                   i: int | None = None) -> simpy.Event:
        """Hop ``s`` of pipeline ``k``: the sender's ``t`` ranks send ``1/t`` of the
        micro-batch's activation (or gradient) each (``fifo``: each rank on its channel to
        the receiver); fires when all arrived. ``i``: as :meth:`Traffic.send`."""
        c = self.config
        a, b = (s + 1, s) if grad else (s, s + 1)
        t = self.tp_rows[a][k]  # the sender's ranks (a stage's replicas may differ)
        src, dst = self.nodes[a][k], self.nodes[b][k]
        if self.groups is not None and not t == self.tp_rows[b][k] == self.groups[k]:
            return self._group_flows(s, k, grad, fifo, i, a, b, src, dst)
        size = c.hop_size(s, k, grad) / t
        meta = c.meta_size(s, k, grad)  # each rank's message before its part (DeepSpeed's)
        mask = 0.0 if grad else c.mask_size(s, k) / t  # each rank's message after its part
        ch = self.channels if fifo else None
        now = self.env.now
        moved: list = [now]  # the timeline's: when it moves (its first rank leaves its channel)
        started = None
        if i is not None and self.rec.on and ch is not None:
            moved[0] = None
            env = self.env

            def started() -> None:
                if moved[0] is None:
                    moved[0] = env.now
        if ch is not None:  # a rank's metadata first on its channel, its part queued after
            if meta > 0:    # it, then its mask
                self._moving.extend(ch.send((k, a, b, r), src, dst, meta, started=started)
                                    for r in range(t))
            evs = [ch.send((k, a, b, r), src, dst, size, started=started) for r in range(t)]
            self._moving.extend(evs)
            if mask > 0:  # the hop has arrived with its masks
                evs = [ch.send((k, a, b, r), src, dst, mask, started=started) for r in range(t)]
                self._moving.extend(evs)
        elif meta > 0 or mask > 0:  # each rank's blocking sends one after the other
            sizes = (meta,) * (meta > 0) + (size,) + (mask,) * (mask > 0)
            evs = [self._messages(src, dst, sizes) for _ in range(t)]
        else:
            evs = [self.service.transfer(src, dst, size) for _ in range(t)]
            self._moving.extend(evs)
        ev = simpy.AllOf(self.env, evs)
        if i is not None and self.rec.on:
            self._record_hop(ev, s, k, grad, i, now, moved)
        return ev

    def _messages(self, src: Any, dst: Any, sizes: tuple[float, ...],
                  after: list[simpy.Event] | None = None) -> simpy.Event:
        """Messages of ``sizes`` from ``src`` to ``dst`` one after the other (each a blocking
        send of one rank), the first once ``after`` have all arrived; the event of the last
        one's arrival. A step lost meanwhile (:meth:`cancel_step`) starts no more of them."""
        env, gen = self.env, self._lost
        if not after:  # the first starts now, as a hop's single transfer would
            first = self.service.transfer(src, dst, sizes[0])
            self._moving.append(first)
            if len(sizes) == 1:
                return first
            after, sizes = [first], sizes[1:]

        def run():
            yield simpy.AllOf(env, after)
            for x in sizes:
                if self._lost != gen:  # the step was lost meanwhile: nothing more moves
                    return
                ev = self.service.transfer(src, dst, x)
                self._moving.append(ev)
                yield ev
        return env.process(run())

    def _group_flows(self, s: int, k: int, grad: bool, fifo: bool, i: int | None, a: int,
                     b: int, src: Any, dst: Any) -> simpy.Event:
        """:meth:`_hop_flows` of a hop of the Sailor artifact's pipeline groups whose ranks are
        in more than one (``pipe_groups``, stages of different TP degrees in the pipeline).

        The pipeline's ``T`` groups each move one message of ``hop_size / T`` from the
        sender's rank ``g // (T / t_a)`` to the receiver's rank ``g // (T / t_b)``
        (``deepspeed/topology.py:103-127``); a rank sends (receives) its groups' messages in
        group order, each blocking (``deepspeed/pipe_engine.py:1069-1071``, ``1123-1125``,
        ``1150-1162``, ``1215-1220``): message ``g`` starts when the previous message of its
        sending rank and of its receiving rank have arrived (so also with ``p2p`` shared,
        each hop on connections of its own). With ``fifo`` channels (``p2p`` overlap, no
        framework's here) each of the hop's :func:`~sim.training.config.pipe_group_chains`
        chains queues its messages in order on a channel of its own."""
        c, env = self.config, self.env
        T = self.groups[k]  # type: ignore[index]
        ta, tb = self.tp_rows[a][k], self.tp_rows[b][k]
        size = c.hop_size(s, k, grad) / T
        # each group's message is the sending rank's metadata, then its part (DeepSpeed's
        # partition metadata: pipe_engine.py:1069-1071, 1123-1125), or the part alone; then
        # a mask where the framework sends one (0.3.13's, which has no groups: none here)
        meta = c.meta_size(s, k, grad)
        mask = 0.0 if grad else c.mask_size(s, k) / ta  # a rank's mask after each part
        sizes = (meta,) * (meta > 0) + (size,) + (mask,) * (mask > 0)
        now = env.now
        moved: list = [now]
        started = None
        if fifo and self.channels is not None:
            chains, n = pipe_group_chains(T, ta, tb)
            if i is not None and self.rec.on:
                moved[0] = None

                def started() -> None:
                    if moved[0] is None:
                        moved[0] = env.now
            evs = []
            for x in range(chains):
                for _ in range(n):
                    for y in sizes:
                        ev = self.channels.send((k, a, b, "group", x), src, dst,  # type: ignore
                                                y, started=started)
                        self._moving.append(ev)
                    evs.append(ev)  # the last message's arrival
        else:
            last: dict[tuple[str, int], simpy.Event] = {}
            evs = []
            for g in range(T):
                ends = (("a", g // (T // ta)), ("b", g // (T // tb)))
                ev = self._messages(src, dst, sizes, [last[e] for e in ends if e in last])
                for e in ends:
                    last[e] = ev
                evs.append(ev)
        ev = simpy.AllOf(env, evs)
        if i is not None and self.rec.on:
            self._record_hop(ev, s, k, grad, i, now, moved)
        return ev

    def send(self, s: int, k: int, grad: bool, arrived: Any, i: int | None = None) -> None:
        self._hop_flows(s, k, grad, True, i).callbacks.append(lambda _e: arrived())

    def transfer(self, s: int, k: int, grad: bool, i: int | None = None) -> simpy.Event:
        return self._hop_flows(s, k, grad, False, i)

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
        ch = self.channels
        if ch is not None and ch.holds(ev):
            ch.cancel(ev)
        else:
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

    # -- the overlapped all-reduce as flows ------------------------------------------------
    def _stage_size(self, j: int) -> float:
        c = self.config
        if c.allreduce_sizes is not None:
            return c.allreduce_sizes[j]
        return c.param_size / self.tp[j]

    def _bucket_ring(self, red: _Reduce, size: float) -> simpy.Event:
        """One bucket's ring all-reduce among the stage's participants: ``t`` rings of
        ``size`` per rank (:func:`sim.network.collectives.ring_allreduce`)."""
        from ..network.collectives import ring_allreduce

        ev = ring_allreduce(self.service, [self.node_of(r) for r in red.reps], size,
                            ranks=self.tp[red.stage], scatter=self.config.reduce_scatter)
        self._moving.append(ev)
        return ev

    # -- a plan's collectives without a barrier, as flows ----------------------------------
    def _has_tied(self) -> bool:
        return self.config.tied_allreduce_size > 0

    def _tied_ring(self, k: int) -> simpy.Event | None:
        from ..network.collectives import ring_allreduce

        c, L = self.config, self.config.stages
        t = self.tp[0]
        st = self.flow.stages
        self._count_ring([st[0][k], st[L - 1][k]], c.tied_allreduce_size * t)
        ev = ring_allreduce(self.service, [self.nodes[0][k], self.nodes[L - 1][k]],
                            c.tied_allreduce_size, ranks=t, bucket_size=self.ring_bucket)
        self._moving.append(ev)
        return ev

    def _dp_ring(self, j: int) -> simpy.Event | None:
        c = self.config
        if c.replicas[0] < 2 or c.allreduce_sizes[j] <= 0:
            return None
        return self._stage_allreduce(j)

    def _stage_allreduce(self, j: int) -> simpy.Event:
        """Stage ``j``'s gradient all-reduce of a plan (``allreduce_sizes[j]`` per rank and
        group): ``t`` rings at once (one TP degree), or where its replicas' TP degrees differ
        the Sailor artifact's groups, ``rounds`` times ``rings`` rings one round after the
        other (:func:`sim.training.config.dp_group_rounds`)."""
        from ..network.collectives import ring_allreduce

        c = self.config
        rounds, rings = self.rounds[j]
        size = c.allreduce_sizes[j]
        # every replica's ranks send a ring's share of each of the T groups (T = rounds x rings)
        self._count_ring(self.flow.stages[j], size * rounds * rings, c.reduce_scatter)
        if rounds == 1:
            ev = ring_allreduce(self.service, list(self.nodes[j]), size, ranks=rings,
                                bucket_size=self.ring_bucket, scatter=c.reduce_scatter)
            self._moving.append(ev)
            return ev

        def run():
            for _ in range(rounds):
                ev = ring_allreduce(self.service, list(self.nodes[j]), size, ranks=rings,
                                    bucket_size=self.ring_bucket, scatter=c.reduce_scatter)
                self._moving.append(ev)
                yield ev
        return self.env.process(run())

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
            self._count_ring(reps, c.param_size)
            t = self.tp[j]
            ev = ring_allreduce(self.service, [self.node_of(r) for r in reps],
                                c.param_size / t, ranks=t, bucket_size=self.ring_bucket)
            if not ev.triggered:
                events.append(ev)
                self._moving.append(ev)
        if not events:
            return None
        return simpy.AllOf(self.env, events)

    def _plan_collectives(self):
        """A plan's collectives: the tied all-reduce, then every stage's gradient ring and
        its optimizer step (the stages at once). Overlapped with the backward pass
        (``overlap=backward``, Megatron-LM's order: ``finalize_model_grads`` waits for the
        data-parallel buckets, then all-reduces the tied embedding), the stages' buckets
        first, then the tied all-reduce, then the optimizer steps."""
        from ..network.collectives import ring_allreduce

        c, env = self.config, self.env
        L = c.stages
        nodes = self.nodes
        r = c.replicas[0]
        if self.overlap:
            yield from self._overlapped()
        if c.tied_allreduce_size and L > 1:
            t = self.tp[0]
            st = self.flow.stages
            for k in range(r):
                self._count_ring([st[0][k], st[L - 1][k]], c.tied_allreduce_size * t)
            evs = [ring_allreduce(self.service, [nodes[0][k], nodes[L - 1][k]],
                                  c.tied_allreduce_size, ranks=t, bucket_size=self.ring_bucket)
                   for k in range(r)]
            self._moving.extend(evs)
            yield simpy.AllOf(env, evs)
        opt = c.optimizer_times or (0.0,) * L
        # the optimizer step waits for every stage's ring where the framework all-reduces a
        # gradient norm or overflow flag over the pipeline (optimizer_barrier)
        reduced = [env.event() for _ in range(L)] if c.optimizer_barrier else None

        def stage(j: int):
            if r > 1 and c.allreduce_sizes[j] > 0 and not self.overlap:
                yield self._stage_allreduce(j)
            if reduced is not None:
                reduced[j].succeed()
                yield simpy.AllOf(env, reduced)
            if opt[j] > 0:
                yield env.timeout(opt[j])

        yield simpy.AllOf(env, [env.process(stage(j)) for j in range(L)])
        self._moving = []

    def step_tail(self, participants: list[set], used: int | None = None):
        """The step's end as flows: each stage's ring all-reduce among its live participants
        (:func:`sim.network.collectives.ring_allreduce`, ``t`` rings of ``param_size / t``
        in buckets), or a plan's collectives (its sizes); then the optimizer step. Its value
        is ``(0.0, tail)`` (the flows' time is theirs: the timeline records their chunks).
        Without a barrier, the stages' collectives started as their programs ended
        (:meth:`Traffic.launch`): wait for them."""
        if self.staged:
            return (yield from self._staged_tail())
        if self.overlap and self.config.allreduce_sizes is None:
            yield from self._overlapped()
        elif self.track:
            ring = self._rings([sorted((r for r in reps if r.live), key=lambda r: r.index)
                                for reps in participants])
            if ring is not None:
                yield ring
        if self.config.allreduce_sizes is not None:
            yield from self._plan_collectives()
        tail = self.closed_tail()
        if tail > 0:
            yield self.env.timeout(tail)
        return 0.0, tail

    def cancel_step(self) -> None:
        super().cancel_step()
        self._lost += 1
        for ev in self._moving:
            ring = getattr(ev, "ring", None)
            if ring is not None:
                ring.cancel()
            elif not ev.triggered:
                self.cancel(ev)
        self._moving = []


class WanTraffic:
    """DiLoCo's traffic between groups (issue 37): the outer all-reduce of the groups'
    pseudo-gradients and the model downloads, across the WAN tier.

    The outer loop (:class:`sim.training.outer.OuterLoop`) says what moves (the
    groups of a sync and their live replicas, each stage's part of the fragment,
    who downloads from whom); this says how long it takes, and counts what each
    replica sends:

    * closed form (no ``network``): every link the config's ``bandwidth`` and
      ``latency``; a sync takes :func:`sim.analytic.diloco.outer_sync_time`
      (the ring law :func:`sim.analytic.network.ring_allreduce_time` across the
      groups, or its all-gather half for top-k, then the all-gather inside each
      group), the stages at once; a download
      :func:`sim.analytic.diloco.model_download_time` (a shard a receiver, then
      their all-gather), the stages at once;
    * over a network: flows on one :class:`~sim.network.service.NetworkService`
      (:attr:`service`, which the groups' own adapters share: every byte of the
      run on the same links): node ``i`` of every group of the sync runs a ring
      all-reduce (dense) or all-gather (top-k) of its shard with its
      counterparts (:mod:`sim.network.collectives`), the stages at once, then
      each group all-gathers its averaged shards; a download is a flow of a
      shard from each receiver's counterpart (its source) to it, then a ring
      all-gather of the shards among the receivers.

    Parameters
    ----------
    config : TrainingConfig
        The DiLoCo run's config (``sync = "diloco:..."``).
    env : simpy.Environment
    node_of : callable
        The network node of a replica of the run.
    recorder : sim.timeline.Recorder, optional
        The timeline's recorder: the network service's link loads (the outer loop
        records the syncs and downloads themselves).

    Attributes
    ----------
    service : sim.network.NetworkService or None
        None in the closed form.
    wan, inside : dict
        Size units each replica sent over the WAN tier (outer syncs, downloads) and
        inside its group (the outer sync's all-gather of averaged shards).
    """

    def __init__(self, config: Any, env: simpy.Environment, node_of: Any, *,
                 recorder: Any = None) -> None:
        c = self.config = config
        self.env = env
        self.node_of = node_of
        self.spec = c.diloco
        self.service: Any = None
        if c.network is not None:
            from ..network import shared_network
            from ..network.service import NetworkService

            # with a timeline the service records each link's load as it changes
            self.service = NetworkService(env, shared_network(c.network, nic=c.nic),
                                          weighting=c.network_weighting,
                                          contention=c.contention, recorder=recorder)
        tp = c.tensor_parallel
        self.tp = [row[0] for row in tp] if isinstance(tp, tuple) else [tp] * c.stages
        self.wan: dict[Any, float] = {}
        self.inside: dict[Any, float] = {}
        # each download's flows and rings still moving, and its cut (None: no all-gather)
        self._fetches: dict[Any, tuple[list[simpy.Event], simpy.Event | None]] = {}
        # each download's bytes counted at its start, for a cut to count what moved by then:
        # its start, each WAN shard (source, bytes, flow or None, its phase's time) and each
        # stage's all-gather (receivers, bytes each, its shards' time, its own time)
        self._fetch_sent: dict[Any, tuple[float, list[tuple], list[tuple]]] = {}
        # over a network: each outer sync's end -> (its stage processes, their rings so far)
        self._syncs: dict[simpy.Event, tuple[list[Any], list[simpy.Event]]] = {}
        # in the closed form: each outer sync's end -> (its start, each stage's bytes counted);
        # over a network: its end -> each stage's bytes counted
        self._closed: dict[simpy.Event, tuple[float, list[tuple]]] = {}
        self._counted: dict[simpy.Event, list[tuple]] = {}

    def _done(self) -> simpy.Event:
        ev = self.env.event()
        ev.succeed()
        return ev

    def _count_sync(self, live: list[list[Any]], kj: int, S: float) -> tuple[float, float]:
        """What each of the ``kj`` ring nodes of every group sends
        (:func:`sim.analytic.diloco.outer_bytes_sent`): counted, and returned (WAN, inside)."""
        from ..analytic.diloco import outer_bytes_sent

        spec = self.spec
        wan, inside = outer_bytes_sent(len(live), S, bits=spec.bits,
                                       value_bits=self.config.value_bits, topk=spec.topk,
                                       nodes_per_group=kj)
        for reps in live:
            for rep in reps[:kj]:
                self.wan[rep] = self.wan.get(rep, 0.0) + wan
                self.inside[rep] = self.inside.get(rep, 0.0) + inside
        return wan, inside

    def outer_sync(self, stages: list[list[list[Any]]], sizes: list[float]) -> simpy.Event:
        """An outer all-reduce among the groups of a sync: the event of its end.

        Parameters
        ----------
        stages : list
            ``stages[j][g]``: the live replicas of stage ``j`` in the ``g``-th group of the
            sync (``k_j``, the fewest of them, take part in each group); ``stages[j]``
            None: stage ``j`` holds none of the fragment and takes no part (no ring, no
            latency).
        sizes : list of float
            Stage ``j``'s part of the fragment (``value_bits`` a value).
        """
        from ..analytic.diloco import outer_sync_time

        env, c, spec = self.env, self.config, self.spec
        n = next((len(live) for live in stages if live is not None), 0)
        if n < 2 or not any(S for live, S in zip(stages, sizes, strict=True)
                            if live is not None) and c.mean_latency == 0:
            return self._done()
        if self.service is None:
            T = 0.0
            sent = []  # each stage's (senders, WAN, inside, ring time, time): for an abort
            for live, S in zip(stages, sizes, strict=True):
                kj = 0 if live is None else min(len(x) for x in live)
                if kj == 0:
                    continue
                Tj = outer_sync_time(n, S, c.bandwidth, c.mean_latency, bits=spec.bits,
                                     value_bits=c.value_bits, topk=spec.topk,
                                     nodes_per_group=kj)
                # its ring across the groups alone (the first term: each of the kj rings
                # carries 1/kj of the payload), the in-group all-gather after it
                Tr = Tj if kj == 1 else outer_sync_time(
                    n, S / kj, c.bandwidth, c.mean_latency, bits=spec.bits,
                    value_bits=c.value_bits, topk=spec.topk)
                T = max(T, Tj)
                sent.append(([rep for reps in live for rep in reps[:kj]],
                             *self._count_sync(live, kj, S), Tr, Tj))
            ev = env.timeout(T)
            self._closed[ev] = (env.now, sent)
            ev.callbacks.append(lambda e: self._closed.pop(e, None))
            return ev
        procs: list[Any] = []
        rings: list[simpy.Event] = []
        counted = []  # each stage's (senders, WAN, inside) counted: an abort counts the flows
        for j, (live, S) in enumerate(zip(stages, sizes, strict=True)):
            kj = 0 if live is None else min(len(x) for x in live)
            if kj == 0 or (S == 0 and c.mean_latency == 0):
                continue
            counted.append(([rep for reps in live for rep in reps[:kj]],
                            *self._count_sync(live, kj, S)))
            procs.append(env.process(self._stage_rings(j, live, kj, S, rings)))
        if not procs:
            return self._done()
        ev = simpy.AllOf(env, procs)
        self._syncs[ev] = (procs, rings)
        self._counted[ev] = counted
        ev.callbacks.append(lambda e: (self._syncs.pop(e, None), self._counted.pop(e, None)))
        return ev

    def abort_sync(self, ev: simpy.Event) -> None:
        """Abort the outer sync whose end is ``ev`` (a member of it went down): over a network
        its rings' flows still moving are withdrawn and its stages stop; in the closed form
        nothing moves (its end just comes to nothing: the caller no longer listens), and
        each stage's bytes count up to the abort only: the closed form's time has a node
        send at an even rate over each phase, its WAN bytes over the ring across the
        groups, then its in-group bytes over the all-gather, so the share of each phase
        elapsed; over a network, what its flows moved until now
        (:meth:`sim.network.collectives._Ring.bytes_sent`). A bug fix: an aborted try counted
        its bytes in full."""
        closed = self._closed.pop(ev, None)
        if closed is not None:  # the part of each stage's bytes not sent by now: not counted
            t0, sent = closed
            el = self.env.now - t0
            for reps, wan, inside, Tr, Tj in sent:
                out = 1.0 - min(1.0, el / Tr) if Tr > 0 else 0.0
                Tg = Tj - Tr
                left = 1.0 - min(1.0, max(0.0, el - Tr) / Tg) if Tg > 0 else float(el < Tr)
                for rep in reps:
                    self.wan[rep] -= out * wan
                    self.inside[rep] -= left * inside
        procs, rings = self._syncs.pop(ev, ([], []))
        counted = self._counted.pop(ev, None)
        if counted is not None:  # over a network: what its flows moved until now, not more
            for reps, wan, inside in counted:
                for rep in reps:
                    self.wan[rep] -= wan
                    self.inside[rep] -= inside
            for ring in rings:
                tier = self.wan if ring.tier == "wan" else self.inside  # type: ignore[attr-defined]
                for rep, x in zip(ring.senders, ring.ring.bytes_sent(),  # type: ignore[attr-defined]
                                  strict=True):
                    tier[rep] += x
        for ring in rings:
            ring.ring.cancel()  # type: ignore[attr-defined]
        for proc in procs:
            if proc.is_alive:
                proc.interrupt("aborted")

    def _stage_rings(self, j: int, live: list[list[Any]], kj: int, S: float,
                     rings: list[simpy.Event]):
        """Stage ``j`` over the network: ``kj`` rings across the groups (each of ``t`` rank
        rings), then each group's all-gather of its averaged shards."""
        from ..analytic.diloco import payload_size
        from ..network.collectives import ring_allgather, ring_allreduce

        c, spec, env, service = self.config, self.spec, self.env, self.service
        nodes = [[self.node_of(rep) for rep in reps[:kj]] for reps in live]
        t = self.tp[j]
        dense = payload_size(S, bits=spec.bits, value_bits=c.value_bits)
        sparse = (None if spec.topk is None else
                  payload_size(S, bits=spec.bits, value_bits=c.value_bits, topk=spec.topk))
        evs = []
        for i in range(kj):
            ring = [nd[i] for nd in nodes]
            if sparse is None:
                evs.append(ring_allreduce(service, ring, dense / kj / t, ranks=t))
            else:
                evs.append(ring_allgather(service, ring, sparse / kj / t, ranks=t))
            evs[-1].senders, evs[-1].tier = [reps[i] for reps in live], "wan"
        rings.extend(evs)  # (aborted: abort_sync counts what they sent, withdraws their flows)
        try:
            yield simpy.AllOf(env, evs)
            if kj > 1:
                block = dense if sparse is None else min(len(live) * sparse, dense)
                gathers = [ring_allgather(service, nd, block / kj / t, ranks=t)
                           for nd in nodes]
                for g_ev, reps in zip(gathers, live, strict=True):
                    g_ev.senders, g_ev.tier = reps[:kj], "inside"
                rings.extend(gathers)
                yield simpy.AllOf(env, gathers)
        except simpy.Interrupt:  # the sync was aborted (abort_sync): its flows are withdrawn
            return

    def fetch(self, key: Any, pairs: list[list[tuple[Any, Any]]],
              sizes: list[float]) -> simpy.Event | None:
        """A group's download: stage ``j``'s ``k = len(pairs[j])`` receivers each fetch a
        shard ``sizes[j] / k`` from their source (a replica: the counterpart in a group
        holding the model; or None: from ``checkpoint_node`` over a network, else
        ``latency + shard / bandwidth``), the ``k`` at once, then all-gather the shards among
        themselves (:func:`sim.analytic.diloco.model_download_time`; over a network a flow
        each, then a ring all-gather of :mod:`sim.network.collectives`, the stages at once);
        the event of its end (None: nothing moves). Its flows are kept under ``key`` until
        :meth:`fetched` or :meth:`cancel_fetch`. Every receiver used to fetch the whole
        ``sizes[j]`` from one source replica (``k`` copies across the WAN, out of one node)."""
        from ..analytic.diloco import model_download_time
        from ..analytic.network import ring_bytes_sent

        env, c = self.env, self.config
        shards: dict[int, list] = {}  # stage -> its [source, bytes, flow, T1]: flows set below
        gathers: dict[int, list] = {}  # stage -> [receivers, bytes each, T1, T2, its ring]
        for j, (row, S) in enumerate(zip(pairs, sizes, strict=True)):
            k = len(row)
            inside = ring_bytes_sent(k, S / k, gather=True) if k else 0.0
            # the closed form's phases: the shards, then the all-gather on the WAN's links
            T1 = c.mean_latency + S / k / c.bandwidth if k else 0.0
            T2 = model_download_time(S, c.bandwidth, c.mean_latency, nodes_per_group=k) - T1 \
                if k else 0.0
            for src, dst in row:
                if src is not None:  # the source sends its shard to its counterpart
                    self.wan[src] = self.wan.get(src, 0.0) + S / k
                    shards.setdefault(j, []).append([src, S / k, None, T1])
                if inside:  # each receiver passes shards on around its group's ring
                    self.inside[dst] = self.inside.get(dst, 0.0) + inside
            if inside:
                gathers[j] = [[dst for _src, dst in row], inside, T1, T2, None]
        self._fetch_sent[key] = (env.now, [x for row in shards.values() for x in row],
                                 list(gathers.values()))
        if self.service is None:
            return env.timeout(max((model_download_time(S, c.bandwidth, c.mean_latency,
                                                        nodes_per_group=len(row))
                                    for row, S in zip(pairs, sizes, strict=True) if row),
                                   default=c.mean_latency))
        stages = [(j, row, S) for j, (row, S) in enumerate(zip(pairs, sizes, strict=True))
                  if row and S]
        if not stages:
            return None
        moving: list[simpy.Event] = []
        parts = []
        for j, row, S in stages:
            k = len(row)
            evs = []
            flows = iter(shards.get(j, []))  # its WAN shards counted above, in row order
            for src, dst in row:
                a = self.node_of(src) if src is not None else c.checkpoint_node
                if a is None:
                    evs.append(env.timeout(c.mean_latency + S / k / c.bandwidth))
                else:
                    evs.append(self.service.transfer(a, self.node_of(dst), S / k))
                if src is not None:
                    next(flows)[2] = evs[-1]
            moving.extend(evs)
            parts.append((j, [dst for _src, dst in row], S, evs))
        if all(len(dsts) == 1 for _j, dsts, _S, _evs in parts):  # no all-gather: the flows'
            self._fetches[key] = (moving, None)
            return simpy.AllOf(env, moving)
        end, cut = env.event(), env.event()
        left = [len(parts)]
        for j, dsts, S, evs in parts:
            env.process(self._gather(j, dsts, S, evs, moving, cut, end, left, gathers.get(j)))
        self._fetches[key] = (moving, cut)
        return end

    def _gather(self, j: int, dsts: list[Any], S: float, evs: list[simpy.Event],
                moving: list[simpy.Event], cut: simpy.Event, end: simpy.Event,
                left: list[int], sent: list | None = None):
        """Stage ``j`` of a download over the network: once its shards are in, its receivers'
        ring all-gather of them (``t`` rank rings); ``end`` once every stage's is done, never
        once ``cut`` (:meth:`cancel_fetch`)."""
        from ..network.collectives import ring_allgather

        yield simpy.AllOf(self.env, evs) | cut
        k = len(dsts)
        if k > 1 and not cut.triggered:
            t = self.tp[j]
            ring = ring_allgather(self.service, [self.node_of(d) for d in dsts], S / k / t,
                                  ranks=t)
            if sent is not None:  # for a cut to count what it moved
                sent[4] = ring
            moving.append(ring)
            yield ring | cut
        if cut.triggered:
            return
        left[0] -= 1
        if not left[0]:
            end.succeed()

    def fetched(self, key: Any) -> None:
        """The download under ``key`` is done."""
        self._fetches.pop(key, None)
        self._fetch_sent.pop(key, None)

    def cancel_fetch(self, key: Any) -> None:
        """Withdraw the flows of the download under ``key`` still moving (its group failed):
        its end never comes. Its bytes count up to the cut only, as an aborted outer sync's
        (:meth:`abort_sync`): over a network what each flow and all-gather moved by now
        (:meth:`sim.network.service.NetworkService.moved`,
        :meth:`sim.network.collectives._Ring.bytes_sent`); in the closed form each phase at an
        even rate, the shards over ``l + S / (k B)``, then the all-gather over the rest of
        :func:`sim.analytic.diloco.model_download_time`. A bug fix: a cut download counted its
        bytes in full."""
        counted = self._fetch_sent.pop(key, None)
        if counted is not None:
            t0, shards, gathers = counted
            el = self.env.now - t0
            for src, x, ev, T1 in shards:
                if self.service is not None:
                    done = x if ev is None else self.service.moved(ev, x, t0)
                else:
                    done = x * min(1.0, el / T1) if T1 > 0 else x
                self.wan[src] -= x - done
            for dsts, x, T1, T2, ring in gathers:
                if self.service is not None:
                    done = [0.0] * len(dsts) if ring is None else ring.ring.bytes_sent()
                else:
                    f = min(1.0, max(0.0, el - T1) / T2) if T2 > 0 else float(el >= T1)
                    done = [x * f] * len(dsts)
                for dst, y in zip(dsts, done, strict=True):
                    self.inside[dst] -= x - y
        moving, cut = self._fetches.pop(key, ([], None))
        for ev in moving:
            ring = getattr(ev, "ring", None)
            if ring is not None:
                ring.cancel()
            elif not ev.triggered:
                self.service.cancel(ev)
        if cut is not None and not cut.triggered:
            cut.succeed()


def traffic_for(config: Any, env: simpy.Environment, *, service: Any = None,
                recorder: Any = None) -> Traffic:
    """The adapter of a run: :class:`NetworkTraffic` over ``config.network`` (built and kept by
    :func:`sim.network.shared_network`; on ``service`` when given, shared with other
    adapters), else the closed form :class:`Traffic`; ``recorder`` (a
    :class:`sim.timeline.Recorder`) records the run's traffic as it moves."""
    if config.network is None:
        return Traffic(config, env, recorder=recorder)
    if service is not None:
        return NetworkTraffic(config, env, service.network, service, recorder=recorder)
    from ..network import shared_network

    return NetworkTraffic(config, env, shared_network(config.network, nic=config.nic),
                          recorder=recorder)
