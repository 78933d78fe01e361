"""Stages of replica servers and the movement of microbatches between them.

:class:`ReplicaFlow` holds the replicas of every stage, their live sets (kept by
events from the replicas, never polled) and the stage queues, and moves each
microbatch: routing at a stage, forward to the next stage after the hop time,
backward in reverse on the replica that did the forward pass, and the failure
rules:

* a pass lost to a failure (and every pass queued at the failed replica) is
  re-queued at its stage after the detection timeout;
* a backward pass whose replica lost the activations (it failed since) first
  recomputes the forward passes from the last stage still holding them;
* at a stage with no live replica a pass (a forward, or a recomputation for a
  backward) skips it while the skip budget lasts (the stage acts as the
  identity both ways, at the quality penalty), else waits up to ``max_wait``
  for a replica to come back, else the trainer is told (drop, or lose the step).

What a step is, and what a drop or a lost stage means, is the trainer's
(:mod:`sim.training.trainer`).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
import simpy

from ..timeline import NULL
from .config import TrainingConfig, replica_name
from .replica import Aborted, Microbatch, Replica
from .routing import SharedQueue, Uniforms, make_routing

__all__ = ["ReplicaFlow", "LOST_CAUSES", "DownClock", "live_idle_share"]

#: Causes of lost time (see :func:`sim.training.trainer.training_metrics`).
LOST_CAUSES = ("lost_pass", "recompute", "reroute", "download", "stall", "restart", "checkpoint")

_BLOCK = 4096


class DownClock:
    """Worker-time of the replicas that are not live (down, or up and fetching their
    weights), kept as its own sum from the live-set changes: ``bubble_fraction`` takes it
    out of the worker-time it divides by. It stays exactly 0.0 while every replica is live,
    so a run without failures reports the same floats as without the clock."""

    __slots__ = ("n", "since", "total", "spans", "open")

    def __init__(self) -> None:
        self.n = 0  # replicas not live
        self.since = 0.0  # when n last changed
        self.total = 0.0  # worker-time not live up to `since`
        self.spans: dict[Any, list[tuple[float, float]]] = {}  # each one's closed spans
        self.open: dict[Any, float] = {}  # since when each one not live now is

    def change(self, now: float, d: int, who: Any = ()) -> None:
        """``d`` more replicas (``-1``: one fewer) are not live from ``now``; ``who`` are
        they (their spans not live: :meth:`spans_at`, for ``compute_utilisation``)."""
        if self.n:
            self.total += self.n * (now - self.since)
        self.since = now
        self.n += d
        for w in who:
            if d > 0:
                self.open[w] = now
            else:
                a = self.open.pop(w, None)
                if a is not None:
                    self.spans.setdefault(w, []).append((a, now))

    def spans_at(self, now: float) -> dict[Any, list[tuple[float, float]]]:
        """Each replica's spans not live up to ``now`` (the open ones end at ``now``)."""
        out = {w: list(v) for w, v in self.spans.items()}
        for w, a in self.open.items():
            out.setdefault(w, []).append((a, now))
        return out

    def at(self, now: float) -> float:
        """Worker-time not live from the start to ``now``."""
        return self.total + self.n * (now - self.since) if self.n else self.total


def live_idle_share(busy: float, worker_time: float, down: float) -> float:
    """``bubble_fraction``: the idle share ``1 - busy / (worker_time - down)`` of the live
    workers' time (``worker_time`` of every worker, ``down`` the part not live, a
    :class:`DownClock`'s); NaN when no worker was live (every one down throughout), where
    there is no idle share (and the ratio would divide by zero).

    ``busy`` never exceeds the live time in exact arithmetic (a worker is busy only while
    live), so a share below 0 by at most :data:`IDLE_RESIDUE` is the rounding of the two
    sums (a one-stage run without a bubble gave -4.1e-14 after 96 steps) and is 0: a
    fraction below 0 was refused by an experiment declaring it a rate or ``NONNEGATIVE``
    (user trial 15). A larger negative share is kept, to show."""
    live = worker_time - down
    if not live > 0:
        return math.nan
    share = 1.0 - busy / live
    return 0.0 if -IDLE_RESIDUE <= share < 0.0 else share


#: The largest rounding residue below 0 that :func:`live_idle_share` reads as no idle time:
#: the relative error of summing ``n`` pass times is at most about ``n`` ulps (2.2e-16 each),
#: 1e-9 for 4.5e6 passes; the residues seen are 1e-16 to 6e-12 (a Gantt title's, sim/plotting.py).
IDLE_RESIDUE = 1e-9


class _Exponentials:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self.rng.exponential(1.0, _BLOCK).tolist()
        return self._buf.pop()


class _Draws:
    """Unit-mean factors from a duration law of :mod:`sim.failures`, drawn in blocks."""

    def __init__(self, law: Any, rng: np.random.Generator) -> None:
        self.law = law
        self.rng = rng
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self.law.sample(self.rng, _BLOCK).tolist()
        return self._buf.pop()


def _unit_draws(c: TrainingConfig, streams: Any) -> Any:
    """The config's pass-time law as unit-mean factors from stream ``pass_time`` (None: constant)."""
    kind = c.pass_time_distribution
    if kind == "exponential":
        return _Exponentials(streams.rng("pass_time"))
    if kind == "deterministic":
        return None
    from ..failures import make_distribution

    return _Draws(make_distribution(kind, 1.0, c.pass_time_shape), streams.rng("pass_time"))


class ReplicaFlow:
    """The stages, their replicas and queues, and the microbatch movements.

    ``unit_draws`` (a callable returning unit-mean factors) replaces the
    config's ``pass_time_distribution`` as the law of the pass times; the
    queueing pipeline (:mod:`sim.pipeline.queueing`) passes its stage-time law.
    """

    def __init__(self, config: TrainingConfig, env: simpy.Environment, streams: Any,
                 schedule: Any, speeds: tuple[tuple[float, ...], ...],
                 unit_draws: Any = None, *, traffic: Any, recorder: Any = None) -> None:
        c = self.config = config
        self.env = env
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.trainer: Any = None
        self.L = L = c.stages
        self.s = c.skip_budget
        self.fwd = c.forward_time
        self.bwd = c.backward_time
        self.has_back = c.has_backward
        # every byte moved is the traffic adapter's (sim.training.traffic): the hops' times
        # between stages, and over a network the transfers between replicas (``net``)
        self.traffic = traffic
        self.hops = traffic.hops
        self.hops_back = traffic.hops_back
        # p2p overlap without a network: a fixed pipeline's hop is a FIFO channel between two
        # replicas (where routing picks the receiver on arrival, each transfer is on its own)
        self.fifo = traffic.fifo and not traffic.flows
        self.det = c.detection_timeout
        self.max_wait = c.max_wait
        self.download_time = traffic.download_time
        self.fixed = bool(schedule.fixed_pipelines)
        self.lost = dict.fromkeys(LOST_CAUSES, 0.0)
        # unit-mean factors of the pass times: the caller's law, else the config's
        self.draw = unit_draws if unit_draws is not None else _unit_draws(c, streams)
        self.shared = [(deque(), deque()) for _ in range(L)]
        self.idle: list[dict[Replica, None]] = [{} for _ in range(L)]
        # Without backward passes a microbatch is held nowhere between passes, so
        # a schedule's forward limit (1F1B's) has nothing to bound: the hold taken
        # at each forward pass is never released by a backward one.
        limits = [schedule.forward_limit(j, L) if self.has_back else None for j in range(L)]
        # each replica's nominal (forward, backward) time: its own, or its stage's
        rt = c.replica_times
        self.work = [[rt[j][i] if rt is not None else (self.fwd[j], self.bwd[j])
                      for i in range(len(speeds[j]))] for j in range(L)]
        # 1F1B in the framework's fixed order: each replica serves the kind whose turn it
        # is (Replica._fixed_next), knowing the forwards still owed to it this step
        self.ordered = bool(schedule.fixed_order) and self.has_back
        self.disturbed = False
        self.stages: list[list[Replica]] = [
            [Replica(self, j, i, speeds[j][i], replica_name(j, i), self.shared[j],
                     limits[j], self.idle[j]) for i in range(len(speeds[j]))]
            for j in range(L)]
        self.replicas = [r for st in self.stages for r in st]
        self.live: list[list[Replica]] = [[] for _ in range(L)]
        self.n_out = L
        self.policies = [make_routing(c.routing) for _ in range(L)]
        for p in self.policies:  # a policy that learns from completions (routing module notes)
            bind = getattr(p, "bind", None)
            if bind is not None:
                bind(c.samples_per_microbatch)
            if getattr(p, "per_microbatch", False):  # a state per trainer: micro-batch k of a step
                p.trainers = c.microbatches
        self.uniform = Uniforms(streams.rng("routing"))
        self.track = False  # set by a trainer that needs each stage's participants
        # fastest-k steps kill microbatches whose passes may still be in service
        # (stragglers "drop"): completions go the general way, which skips them
        self.general = getattr(c, "sync_wait", None) is not None
        self.waiters: list[list[tuple[Microbatch, float]]] = [[] for _ in range(L)]
        self.lost_passes = self.reroutes = 0
        self.skips = self.waits = self.recomputes = 0
        self.retired: set[Replica] = set()  # replicas draining before an announced preemption
        self.down = DownClock()  # worker-time of the replicas not live (bubble_fraction)
        #: asked as a replica comes back (DiLoCo's groups): True when its group will fetch the
        #: model across the WAN tier, which is then its only download (None: always download)
        self.skip_download: Any = None
        #: asked as a replica's download ends (DiLoCo's groups): the event of its group's model
        #: fetch in progress, which the copy (from a peer receiving it) ends with, or None
        self.hold_download: Any = None
        # transfers between replicas (over a network), or None: each hop a time between stages
        self.net: Any = traffic if traffic.flows else None
        self.activation_size = c.activation_size
        traffic.attach(self, self.replicas)

    def start(self) -> None:
        """Live sets from the replicas' initial states; start the servers."""
        for st in self.stages:
            for rep in st:
                rep.loaded = rep.live = rep.up
                if rep.live:
                    self.live[rep.stage].append(rep)
        self.n_out = sum(1 for lv in self.live if not lv)
        out = [rep for rep in self.replicas if not rep.live]
        self.down.change(self.env.now, len(out), out)
        self._wire()
        for rep in self.replicas:
            rep.start()

    def _wire(self) -> None:
        """Give each replica what its inline completion path needs (:meth:`Replica.wire`)."""
        L, hops = self.L, self.hops
        if not self.fixed:  # every forward pass is routed: its policy learns from completions
            for rep in self.replicas:
                rep.settle = getattr(self.policies[rep.stage], "settled", None)
        if self.net is not None:  # every movement goes through the network: no inline path
            for rep in self.replicas:
                rep.ordered = self.ordered  # 1F1B's fixed order holds over a network too
                rep.wire(inline=False, fwd_kind=2, next_live=[], next_lo=None, next_idle=None,
                         next_policy=None, prev_stage=-1, uniform=self.uniform)
            return
        # A policy whose choose is the shared queue's own always answers the shared
        # queue: asked once here, not at every pass.
        shared_only = [type(p).choose is SharedQueue.choose and "choose" not in vars(p)
                       for p in self.policies]
        back = self.hops_back
        # the fixed order counts every forward; fastest-k books each pass
        inline = not self.track and not self.ordered and not self.general
        for rep in self.replicas:
            j = rep.stage
            nxt = j + 1
            rep.ordered = self.ordered
            if nxt < L and hops[j] <= 0.0:
                # a policy per trainer is asked with the micro-batch: ReplicaFlow.arrive_fwd
                kind = 1 if self.fixed or getattr(self.policies[nxt], "per_microbatch", False) else 0
                rep.wire(inline=inline, fwd_kind=kind, next_live=self.live[nxt],
                         next_lo=self.shared[nxt][1], next_idle=self.idle[nxt],
                         next_policy=None if shared_only[nxt] else self.policies[nxt],
                         prev_stage=j - 1 if j > 0 and back[j - 1] <= 0.0 else -1,
                         uniform=self.uniform)
            else:
                rep.wire(inline=inline, fwd_kind=2, next_live=[], next_lo=None,
                         next_idle=None, next_policy=None,
                         prev_stage=j - 1 if j > 0 and back[j - 1] <= 0.0 else -1,
                         uniform=self.uniform)

    def begin_step(self) -> None:
        """A step starts: no forward owed yet; the fixed order holds while every replica is live."""
        if self.ordered:
            for rep in self.replicas:
                rep.owed = 0
            self.disturbed = any(not rep.live for rep in self.replicas)

    def _disturb(self) -> None:
        """A failure breaks the fixed order until the step ends: every replica takes what is
        queued, backward passes first (the recovery is dtsim's failover and recomputation,
        which a framework's fixed program would not survive)."""
        if not self.disturbed:
            self.disturbed = True
            for rep in self.replicas:
                rep.wake()

    @property
    def passes(self) -> int:
        """Passes completed, over every replica."""
        return sum(r.passes for r in self.replicas)

    # -- replica events ------------------------------------------------------------
    def replica_live(self, rep: Replica) -> None:
        """A replica finished downloading its weights and may be routed to."""
        rep.live = True
        self.down.change(self.env.now, -1, (rep,))
        j = rep.stage
        live = self.live[j]
        live.append(rep)
        live.sort(key=lambda r: r.index)
        if len(live) == 1:
            self.n_out -= 1
            tokens, self.waiters[j] = self.waiters[j], []
            now = self.env.now
            for mb, since in tokens:
                mb.waiting = False
                self.lost["stall"] += now - since
                self.arrive_fwd(mb, j)
            if self.n_out == 0:
                self.trainer.all_live()

    def cut_downloads(self, cause: Any) -> None:
        """Cut the weight downloads in progress (``cause``): each replica asks
        :attr:`skip_download` again (DiLoCo: its group will fetch the model)."""
        for rep in self.replicas:
            rep.cut_download(cause)

    def replica_down(self, rep: Replica, was_live: bool) -> None:
        """A replica went down: its queued passes are re-queued; the stage may be lost."""
        j = rep.stage
        out = False
        if was_live:
            self.down.change(self.env.now, 1, (rep,))
            if self.trainer is not None:
                self.trainer.replica_lost(rep)
        if self.ordered:
            self._disturb()
        self.idle[j].pop(rep, None)
        if self.net is not None:  # its transfers in flight are cut: retried from elsewhere
            for x in self.net.replica_down(rep):
                if not x.mb.dead:
                    x.mb.stage = x.dest_stage
                    self.requeue(x.mb)
        if rep in self.retired:  # it was draining: no longer in the live set; take shared work again
            self.retired.discard(rep)
            rep._shi, rep._slo = self.shared[j]
            rep.idle = self.idle[j]
        elif was_live:
            self.live[j].remove(rep)
            out = not self.live[j]
            if out:
                self.n_out += 1
        queued = rep.drain()
        for mb in queued:  # their calls at ``rep`` failed
            self._failed(rep, mb)
        if out:
            for q in self.shared[j]:
                queued.extend(q)
                q.clear()
        for mb in queued:
            if not mb.dead:
                self.requeue(mb)
        if out:
            self.trainer.stage_lost(j)

    def retire(self, rep: Replica) -> bool:
        """``rep`` announced its preemption: no new pass is routed to it, and it takes none
        from its stage's queues, but it finishes the passes it holds (backward passes of the
        microbatches whose activations it keeps included). False, and nothing changes, when
        it is not live or is its stage's last live replica (it serves until it goes)."""
        j = rep.stage
        live = self.live[j]
        if rep not in live or len(live) < 2:
            return False
        live.remove(rep)
        self.idle[j].pop(rep, None)
        rep._shi, rep._slo = deque(), deque()
        rep.idle = {}
        self.retired.add(rep)
        self.rec.notice(rep.name, self.env.now)
        return True

    # -- passes ----------------------------------------------------------------------
    def pass_done(self, rep: Replica, mb: Microbatch, work: float) -> None:
        """``rep`` completed ``mb``'s pass: move the microbatch on."""
        rep.passes += 1
        if mb.dead:  # a straggler's pass of a fastest-k step already closed: thrown away
            self.lost["lost_pass"] += work
            return
        j = mb.stage
        if self.track:
            self.trainer.participated(j, rep)
        if self.net is not None:
            mb.at = rep
        if not mb.back:
            if mb.target >= 0:
                self.lost["recompute"] += work
            elif self.ordered and rep.owed > 0:
                rep.owed -= 1
            mb.holders[j] = (rep, rep.epoch)
            rep.in_flight += 1
            if rep.in_flight > rep.peak_in_flight:
                rep.peak_in_flight = rep.in_flight
            if mb.target == j:
                mb.target = -1
                mb.back = True
                rep.push(mb, True)
            elif j + 1 < self.L and self.hops[j] <= 0.0:
                self.arrive_fwd(mb, j + 1)
            else:
                self.forward_next(mb, j)
        else:
            if rep.in_flight > 0:
                rep.in_flight -= 1
            if j > 0 and self.hops_back[j - 1] <= 0.0:
                self.arrive_back(mb, j - 1)
            else:
                self.backward_next(mb, j)

    def pass_lost(self, rep: Replica, mb: Microbatch, cause: Any, elapsed: float) -> None:
        """``rep`` lost ``mb``'s pass (``cause`` is a frozen dataclass)."""
        self.lost_passes += 1
        self.lost["lost_pass"] += elapsed
        if not isinstance(cause, Aborted):  # a step given up is no failed call
            self._failed(rep, mb)
        if not mb.dead:
            self.requeue(mb)

    def _failed(self, rep: Replica, mb: Microbatch) -> None:
        """``mb``'s pass at ``rep`` was lost: a policy per trainer is told (its trainer's call
        failed: SWARM bans the peer)."""
        failed = getattr(self.policies[rep.stage], "failed", None)
        if failed is not None:
            failed(rep, mb)

    def requeue(self, mb: Microbatch) -> None:
        """Re-queue ``mb`` at its stage once the failure is detected."""
        self.reroutes += 1
        self.lost["reroute"] += self.det
        self.later(self.det, self.arrive_back if mb.back else self.arrive_fwd, mb, mb.stage)

    # -- movements -------------------------------------------------------------------
    def later(self, dt: float, fn: Any, mb: Microbatch, j: int) -> None:
        """Call ``fn(mb, j)`` after ``dt`` (at once when 0)."""
        if dt <= 0.0:
            fn(mb, j)
            return
        ev = self.env.timeout(dt)
        ev.callbacks.append(lambda _e: fn(mb, j))

    def forward_next(self, mb: Microbatch, j: int) -> None:
        """``mb`` finished its forward pass at ``j``: on to ``j + 1``, or tell the trainer."""
        if j + 1 == self.L:
            if self.has_back:
                self.trainer.forward_done(mb)
            else:
                self.trainer.finished(mb)
            return
        d = self.hops[j]  # over a network: 0 (arrive_fwd sends, once routed)
        if d > 0.0 and self.fifo and mb.pipe >= 0:  # the pipeline's channel j -> j+1
            d = self.traffic.channel_delay((mb.pipe, j, j + 1), d)
        self.later(d, self.arrive_fwd, mb, j + 1)

    def start_backward(self, mb: Microbatch) -> None:
        """Begin ``mb``'s backward passes at the last stage."""
        mb.back = True
        self.arrive_back(mb, self.L - 1)

    def backward_next(self, mb: Microbatch, j: int) -> None:
        """``mb`` finished its backward pass at ``j``: on to ``j - 1``, or done."""
        if j == 0:
            self.trainer.finished(mb)
            return
        d = self.hops_back[j - 1]
        if d > 0.0 and self.fifo and mb.pipe >= 0:  # the pipeline's channel j -> j-1
            d = self.traffic.channel_delay((mb.pipe, j, j - 1), d)
        self.later(d, self.arrive_back, mb, j - 1)

    def arrive_fwd(self, mb: Microbatch, j: int) -> None:
        """``mb`` needs a forward pass (or a recomputation) at stage ``j``."""
        if mb.dead:
            return
        mb.stage = j
        mb.ready = self.env.now
        if mb.target >= 0 and mb.holders[j] is None:  # skipped the first time: pass through
            self.forward_next(mb, j)
            return
        live = self.live[j]
        if not live:
            self.out_stage(mb, j)
            return
        rep = None
        if self.fixed:
            if mb.pipe >= 0:
                st = self.stages[j]
                pref = st[mb.pipe % len(st)]
                if pref.live:
                    rep = pref
            if rep is None:
                rep = self.policies[j].choose(live, self.uniform)
                if mb.pipe < 0 and rep is not None:
                    mb.pipe = rep.index
                    if self.ordered:  # the forwards this micro-batch owes along its pipeline
                        for st in self.stages:
                            st[rep.index % len(st)].owed += 1
        else:
            policy = self.policies[j]
            if getattr(policy, "per_microbatch", False):
                rep = policy.choose_for(live, self.uniform, mb)
            else:
                rep = policy.choose(live, self.uniform)
        if rep is None:
            self.shared[j][0 if mb.target >= 0 else 1].append(mb)
            idle = self.idle[j]
            if idle:
                next(iter(idle)).wake()
        elif self.net is not None:
            self._send(mb, rep, self._source_below(mb, j), j, mb.target >= 0)
        else:
            rep.push(mb, mb.target >= 0)

    def arrive_back(self, mb: Microbatch, j: int) -> None:
        """``mb`` needs its backward pass at stage ``j``, on the replica holding its activations."""
        if mb.dead:
            return
        mb.stage = j
        h = mb.holders[j]
        if h is None:  # skipped going forward
            self.backward_next(mb, j)
            return
        rep, epoch = h
        if rep.live and rep.epoch == epoch:
            if self.net is not None:
                src = mb.at
                self._send(mb, rep, src if src is not None and src.live else None, j, True)
                return
            rep.push(mb, True)
            return
        i = j - 1
        while i >= 0 and not self._holds(mb.holders[i]):
            i -= 1
        self.recomputes += 1
        mb.back = False
        mb.target = j
        if self.net is not None:  # recompute from the highest stage still holding activations
            mb.at = mb.holders[i][0] if i >= 0 else None
        if i >= 0:
            d = self.hops[i]
            if d > 0.0 and self.fifo and mb.pipe >= 0:
                d = self.traffic.channel_delay((mb.pipe, i, i + 1), d)
            self.later(d, self.arrive_fwd, mb, i + 1)
        else:
            self.arrive_fwd(mb, 0)

    # -- network mode ----------------------------------------------------------------
    def _source_below(self, mb: Microbatch, j: int) -> Any:
        """Where ``mb``'s input to stage ``j`` is: the replica of its last pass if live, else the
        live holder of the highest stage below ``j``, else None (the input data, no transfer)."""
        src = mb.at
        if src is not None and src.live:
            return src
        for i in range(j - 1, -1, -1):
            h = mb.holders[i]
            if h is not None and h[0].live and h[0].epoch == h[1]:
                return h[0]
        return None

    def _send(self, mb: Microbatch, rep: Replica, src: Any, j: int, urgent: bool) -> None:
        """Move ``mb``'s data from replica ``src`` to ``rep`` (stage ``j``), then queue it there."""
        if src is None or src is rep:
            rep.push(mb, urgent)
            return
        epoch = rep.epoch
        self.net.deliver(src, rep, self.activation_size, mb, j,
                         lambda: self._landed(mb, rep, epoch, j, urgent))

    def _landed(self, mb: Microbatch, rep: Replica, epoch: int, j: int, urgent: bool) -> None:
        if mb.dead:
            return
        if rep.live and rep.epoch == epoch:
            mb.stage = j
            rep.push(mb, urgent)
        else:  # pragma: no cover - a failure at the receiver cuts the transfer first
            mb.stage = j
            self.requeue(mb)

    @staticmethod
    def _holds(h: Any) -> bool:
        return h is not None and h[0].live and h[0].epoch == h[1]

    def out_stage(self, mb: Microbatch, j: int) -> None:
        """Stage ``j`` has no live replica: skip, wait, or tell the trainer."""
        if mb.skipped < self.s:  # skipped as the identity, forward and backward
            mb.skipped += 1
            self.skips += 1
            mb.holders[j] = None
            self.rec.skip(mb, j, self.env.now)
            if mb.target == j:  # the backward it was recomputing for: skip that too
                mb.target = -1
                mb.back = True
                self.backward_next(mb, j)
            else:
                self.forward_next(mb, j)
            return
        if self.max_wait > 0:
            self.waits += 1
            mb.waiting = True
            token = (mb, self.env.now)
            self.waiters[j].append(token)
            if self.max_wait < float("inf"):
                ev = self.env.timeout(self.max_wait)
                ev.callbacks.append(lambda _e: self._expire(j, token))
            return
        self.trainer.blocked(mb, j)

    def _expire(self, j: int, token: tuple[Microbatch, float]) -> None:
        waiting = self.waiters[j]
        for k, t in enumerate(waiting):
            if t is token:
                del waiting[k]
                mb = token[0]
                mb.waiting = False
                self.lost["stall"] += self.max_wait
                if not mb.dead:
                    self.trainer.blocked(mb, j)
                return

    def release(self, mb: Microbatch) -> None:
        """``mb`` leaves early (dropped): free the places it held under 1F1B."""
        for h in mb.holders:
            if h is not None and h[0].epoch == h[1] and h[0].in_flight > 0:
                h[0].in_flight -= 1
                h[0].wake()

    def abort(self, cause: Any) -> None:
        """Every microbatch is dead: interrupt passes in service, forget waiters and holdings."""
        for rep in self.replicas:
            rep.abort(cause)
            rep.in_flight = 0
        for j in range(self.L):
            self.waiters[j] = []
