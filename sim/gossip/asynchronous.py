"""The ``async`` protocol: every node on its own Poisson clock.

A node wakes at rate ``wake_rate`` and gossips with a uniformly random (online)
neighbour; the exchange takes the edge's ``latency + size / bandwidth`` and the
values in flight are the ones sent: at delivery each honest end moves toward
the value its peer sent at the start. With ``availability < 1`` each node is a
worker of :mod:`sim.failures` going up and down; an offline node neither starts
exchanges (its wake-ups while down are skipped, which by memorylessness pauses
its clock) nor is chosen as a peer, and an exchange delivered to an offline
node is lost at that end. ``rounds`` is the simulated horizon. A node's noise is
added when it wakes, before sending; a node update advances both ends to the
current time when an exchange starts, and the receiving end before a delivery.

Speed. On the ``events`` and ``vector`` paths every node is a SimPy process and
a wake is one SimPy timeout; on the ``merged`` path, whose only other process
is the recorder, the wakes between two records run in one loop over a heap of
the nodes' next wake times (the order and the times SimPy would give the
processes, see :meth:`AsyncGossip._plain_wakes`). Random numbers come in per-node blocks
drawn for all nodes at once from one stream per concern (``wake``,
``partners``, ``noise``) and refilled per node from the same streams (the
refill order is fixed by the event order, so a seed fixes every draw). One node
loop serves three paths (:attr:`AsyncGossip.async_path`): ``merged`` and
``events`` keep scalar values in a list of floats and exchange through the
scalar kernel; ``vector`` keeps numpy rows and exchanges through the vector
kernel (any dimension, attack, defence and node update). On ``merged`` (no
churn, every exchange taking time) deliveries are queued with their due time and
applied, in due order, by the next wake (or record) after it instead of by an
event of their own -- nothing reads a value in between, so the trajectory is
that of ``events``. The all-honest, unclipped complete graph has its own
merged loop with the averaging inline (the benchmark's hot path). With
exchanges as flows on a network (contention), ``merged`` keeps the flows in a
flow engine (:func:`sim.network.service.flow_engine`) advanced to each wake
and record, and delivers the exchanges complete by then in the order their
second flow arrived (:meth:`~sim.network.kernel.CompiledFlowEngine.exchange`),
where ``events`` asks :class:`~sim.network.NetworkService` for an event per
flow: the same trajectory, without a SimPy event per flow. With a timeline
(``--timeline``) exchanges on a network take ``events``, whose Python flow
engine records every flow and link load (the compiled engine records none).
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections import deque
from typing import Any

import numpy as np

from ..errors import check
from .async_draws import AsyncDraws
from .state import GossipSystem

__all__ = ["AsyncGossip"]


class AsyncGossip(GossipSystem):
    """Nodes on Poisson clocks, exchanges in flight, optional churn (see the module docstring)."""

    pause_gc = True

    def __init__(self, *args: Any, path: str = "auto", **kwargs: Any) -> None:
        super().__init__(*args, path=path, **kwargs)
        cfg, n, env, net = self.cfg, self.n, self.env, self.net
        if cfg.failure_trace is not None:  # churn replayed from a real trace
            from ..failures import FailureModel
            from ..traces import attach

            fm = FailureModel(env, self.streams)
            self._workers = attach(fm, cfg.failure_trace, [(f"node{i}", None) for i in range(n)],
                                   streams=self.streams, names=cfg.trace_names)
            fm.start()
        elif cfg.availability < 1.0:
            from ..failures import FailureModel

            fm = FailureModel(env, self.streams)
            self._workers = [fm.add_worker(f"node{i}", availability=cfg.availability,
                                           mean_downtime=cfg.mean_downtime) for i in range(n)]
            fm.start()
        scalar = path in ("auto", "merged", "events") and self.scalar_ok()
        self._scalar = scalar
        self._draws = draws = AsyncDraws(self, scalar, self._workers)
        gaps, us, zs = draws.initial(cfg.noise > 0)
        self._direct_peers = draws.direct
        if scalar:
            self._scalar_values = []  # filled from ``x`` when the run starts
            self._exchange = self.scalar_kernel()
        delays = np.unique(net.nbr_delay) if not net.complete else [net.complete_delay]
        self._const_delay = float(delays[0]) if len(delays) == 1 else math.nan
        # exchanges that share links and NICs: flows on the network, delivered as they arrive
        from .network import flow_network

        flows = flow_network(cfg)
        self._service: Any = None
        self._flows: Any = None  # the merged path's flow engine (exchanges on a network)
        merge = scalar and path in ("auto", "merged") and self._workers is None
        # with a timeline, exchanges on a network take the events path: its flow engine
        # (the Python one) records every flow and link load as it goes
        if flows is not None and merge and not self.rec.on:
            from ..network import build_network
            from ..network.service import flow_engine

            # room for the flows a run asks (two per wake), up to a million at first, and
            # for their routes (both ways of every edge, or of as many pairs as flows)
            expect = 2.2 * n * float(cfg.wake_rate) * float(cfg.rounds) + 64
            pairs = n * (n - 1) if net.complete else int(net.indices.size)
            self._flows = flow_engine(build_network(flows), weighting=cfg.network_weighting,
                                      flows=int(min(expect, 1e6)),
                                      routes=int(min(pairs, expect, 1e5)))
            self._flows.now = float(env.now)
            self._pending: dict[int, tuple] = {}  # exchange (its number) -> what it carries
            self._number = itertools.count()  # the engine numbers exchanges in the order asked
            self._exchangers = [self._flows.exchanger(float(cfg.size), i) for i in range(n)]
        elif flows is not None:
            from ..network import NetworkService

            self._service = NetworkService(env, flows, weighting=cfg.network_weighting,
                                           recorder=self.rec)
        self._lazy = merge and (self._flows is not None
                                or (self._service is None and float(np.min(delays)) > 0))
        self._fifo = not math.isnan(self._const_delay)
        self._queue: Any = deque() if self._fifo else []
        self._seq = itertools.count()
        self._last = np.zeros(n) if self._updating else None
        self._wakes: Any = None  # the merged path's wake loop (a heap of node clocks)
        if self._lazy:
            self._path = "merged"
            # every node's next wake, its blocks and its place in them
            start = env.now
            self._clock = [(start + gaps[i][0], i) for i in range(n)]
            heapq.heapify(self._clock)
            self._gaps, self._us, self._zs, self._k = gaps, us, zs, [0] * n
            if self._flows is not None:
                self._wakes = self._flow_wakes
            elif net.complete and self.n_adv == 0 and self.defence.plain():
                self._wakes = self._plain_wakes
            else:
                self._wakes = self._merged_wakes
        else:
            self._path = "events" if scalar else "vector"
            # creating 1e5 processes would otherwise trigger a cascade of full
            # garbage collections (nothing created here is garbage)
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                for i in range(n):
                    env.process(self._node(i, gaps[i], us[i], zs[i]))
            finally:
                if was_enabled:
                    gc.enable()
        check(path in ("auto", self._path), "path", f"auto or {self._path} for this configuration", path)

    @property
    def async_path(self) -> str:
        """Implementation path: ``merged``, ``events`` or ``vector`` (see the module docstring).

        All three give the same trajectories for the same seed where they
        apply (up to rounding).
        """
        return self._path

    # -- the node loops -------------------------------------------------------
    def _node(self, i: int, gaps: list[float], us: list[Any], zs: Any):
        """SimPy process of node ``i`` (the ``events`` and ``vector`` paths)."""
        env = self.env
        timeout = env.timeout
        x = self._scalar_values if self._scalar else self.x
        workers = self._workers
        direct, const_delay = self._direct_peers, self.net.complete_delay
        pick, refill = self._draws.pick, self._draws.refill
        sent = self._sent_scalar if self._scalar else self._sent_vector
        post = self._post_event if self._service is None else self._post_flows
        advance = self._advance if self._updating else None
        s = 0.0 if self.is_adv[i] else self.cfg.noise
        exch = self.rec.exchange if self.rec.on and self._service is None else None
        size = float(self.cfg.size)
        now = env.now
        c, k = len(gaps), 0
        while True:
            if k == c:
                gaps, us, zs = refill(i, zs is not None)
                k = 0
            g = gaps[k]
            yield timeout(g)
            now += g
            u = us[k]
            kk = k
            k += 1
            if workers is not None and not workers[i].up:
                continue
            if direct:
                j, delay = u, const_delay
            else:
                got = pick(i, u)
                if got is None:
                    continue
                j, delay = got
            if advance is not None:
                advance(i, now)
                advance(j, now)
            if s:
                x[i] += s * zs[kk]  # type: ignore[index]
            if exch is not None:
                exch(i, j, now, now + delay, size)
            post(now, i, j, sent(i, j), sent(j, i), delay)

    # The merged path has no process per node: its only other process is the recorder,
    # so the wakes before a record run in one loop over a heap of the nodes' next wake
    # times, in time order, exactly as SimPy would run the nodes' processes (a node's
    # wake times are the same sums ``t + gap``; two wakes at one float time, or a wake
    # at a record's time, have probability zero). A node's blocks are refilled right
    # after its last wake of a block, as its process did.
    def _plain_wakes(self, until: float) -> None:
        """The wakes before ``until`` on the complete graph, all honest, plain averaging.

        The hot path of the benchmark: the due deliveries are applied inline.
        """
        clock = self._clock
        t, i = clock[0]
        if t >= until:
            return
        xs, queue = self._scalar_values, self._queue
        push, pop, replace = queue.append, queue.popleft, heapq.heapreplace
        gaps, js, zs, ks = self._gaps, self._us, self._zs, self._k
        refill, c = self._draws.refill, self._draws.chunk
        delay = self._const_delay
        s = self.cfg.noise
        noisy = s > 0
        exch = self.rec.exchange if self.rec.on else None
        size = float(self.cfg.size)
        delivered = 0
        while t < until:
            if queue and queue[0][0] <= t:
                m = len(queue)
                while queue and queue[0][0] <= t:
                    _, a, b, va, vb = pop()
                    xs[a] = (xs[a] + vb) * 0.5  # type: ignore[index]
                    xs[b] = (xs[b] + va) * 0.5  # type: ignore[index]
                delivered += m - len(queue)
            k = ks[i]
            j = js[i][k]
            if noisy:
                xs[i] += s * zs[i][k]  # type: ignore[index]
            if exch is not None:
                exch(i, j, t, t + delay, size)
            push((t + delay, i, j, xs[i], xs[j]))  # type: ignore[index]
            k += 1
            if k == c:
                gaps[i], js[i], zs[i] = refill(i, noisy)
                k = 0
            ks[i] = k
            replace(clock, (t + gaps[i][k], i))
            t, i = clock[0]
        self.exchanges += delivered

    def _merged_wakes(self, until: float) -> None:
        """The wakes before ``until`` on the merged path (any graph, attack or defence):
        deliveries queued with their due time and applied by the next wake or record."""
        clock = self._clock
        t, i = clock[0]
        if t >= until:
            return
        x, queue, flush = self._scalar_values, self._queue, self._flush
        replace = heapq.heapreplace
        gaps, us, zs, ks = self._gaps, self._us, self._zs, self._k
        draws = self._draws
        pick, refill, c = draws.pick, draws.refill, draws.chunk
        direct, const_delay = self._direct_peers, self.net.complete_delay
        sent, post = self._sent_scalar, self._post_merged
        noise, adv = self.cfg.noise, self._adv_list
        noisy = noise > 0
        exch = self.rec.exchange if self.rec.on else None
        size = float(self.cfg.size)
        while t < until:
            if queue and queue[0][0] <= t:
                flush(t)
            k = ks[i]
            u = us[i][k]
            if direct:
                got: Any = (u, const_delay)
            else:
                got = pick(i, u)
            if got is not None:
                j, delay = got
                if noisy and not adv[i]:
                    x[i] += noise * zs[i][k]  # type: ignore[index]
                if exch is not None:
                    exch(i, j, t, t + delay, size)
                post(t, i, j, sent(i, j), sent(j, i), delay)
            k += 1
            if k == c:
                gaps[i], us[i], zs[i] = refill(i, noisy)
                k = 0
            ks[i] = k
            replace(clock, (t + gaps[i][k], i))
            t, i = clock[0]

    def _flow_wakes(self, until: float) -> None:
        """The wakes before ``until`` on the merged path with exchanges as flows on a network.

        At each wake the flow engine is advanced to it, the exchanges whose two
        flows have arrived by then are delivered in the order of their arrival
        (as the events path would deliver them), and the new exchange is a flow
        each way from the wake (one call, :meth:`CompiledFlowEngine.exchange
        <sim.network.kernel.CompiledFlowEngine.exchange>`). A record advances the
        engine too, so nothing is read before what arrived is delivered.
        """
        clock = self._clock
        t, i = clock[0]
        if t >= until:
            return
        x = self._scalar_values
        replace = heapq.heapreplace
        gaps, us, zs, ks = self._gaps, self._us, self._zs, self._k
        exchangers = self._exchangers
        pending, number, kernel = self._pending, self._number, self._exchange
        take = pending.pop
        draws = self._draws
        pick, refill, c = draws.pick, draws.refill, draws.chunk
        direct = self._direct_peers
        sent = self._sent_scalar if self.n_adv else None  # all honest: each sends its value
        noise, adv = self.cfg.noise, self._adv_list
        noisy = noise > 0
        delivered = 0
        while t < until:
            k = ks[i]
            u = us[i][k]
            j = u if direct else pick(i, u)
            if j is not None:
                if not direct:
                    j = j[0]
                # the engine was last advanced to a time <= t, so t is a valid start
                done = exchangers[i](j, t)
                if done:  # delivered in the order they arrived (as _arrived does)
                    for f in done:
                        kernel(x, *take(f))
                    delivered += len(done)
                if noisy and not adv[i]:
                    x[i] += noise * zs[i][k]  # type: ignore[index]
                pending[next(number)] = ((i, j, x[i], x[j]) if sent is None  # type: ignore[index]
                                         else (i, j, sent(i, j), sent(j, i)))
            k += 1
            if k == c:
                gaps[i], us[i], zs[i] = refill(i, noisy)
                k = 0
            ks[i] = k
            replace(clock, (t + gaps[i][k], i))
            t, i = clock[0]
        self.exchanges += delivered

    def _flush_flows(self, now: float) -> None:
        """Advance the flow engine to ``now`` and deliver what arrived (a record)."""
        self._arrived(self._flows.exchanges_done(now))

    def _arrived(self, done: list[int]) -> None:
        """Deliver, in order, the exchanges ``done`` (by number)."""
        pending, deliver = self._pending, self._deliver
        for f in done:
            deliver(*pending.pop(f))

    # -- what is sent, posted and delivered -------------------------------------
    def _sent_scalar(self, src: int, dst: int) -> float:
        return self._constant if self._adv_list[src] else self._scalar_values[src]  # type: ignore[return-value, index]

    def _sent_vector(self, src: int, dst: int) -> np.ndarray:
        if not self._adv_list[src]:
            return self.x[src].copy()
        s = np.array([src])
        return self.sent(s, np.array([dst]), self.x[s])[0]

    def _post_merged(self, now: float, i: int, j: int, vi: Any, vj: Any, delay: float) -> None:
        if self._fifo:
            self._queue.append((now + delay, i, j, vi, vj))
        else:
            heapq.heappush(self._queue, (now + delay, next(self._seq), i, j, vi, vj))

    def _post_event(self, now: float, i: int, j: int, vi: Any, vj: Any, delay: float) -> None:
        if delay > 0:
            self.env.timeout(delay, (i, j, vi, vj)).callbacks.append(self._deliver_event)
        else:
            self._deliver(i, j, vi, vj)

    def _post_flows(self, now: float, i: int, j: int, vi: Any, vj: Any, delay: float) -> None:
        """A flow each way on the network; the exchange is delivered when both have arrived."""
        size = float(self.cfg.size)
        svc = self._service
        left = [2]

        def arrived(_ev: Any) -> None:
            left[0] -= 1
            if left[0] == 0:
                self._deliver(i, j, vi, vj)

        ev_ij, ev_ji = svc.transfer(i, j, size), svc.transfer(j, i, size)
        ev_ij.callbacks.append(arrived)
        ev_ji.callbacks.append(arrived)
        if self.rec.on:
            self.rec.exchange_flows(ev_ij, ev_ji, i, j, now, size)

    def _deliver_event(self, event: Any) -> None:
        self._deliver(*event.value)

    def _deliver(self, i: int, j: int, vi: Any, vj: Any) -> None:
        """Both honest, online ends move toward the value the other sent."""
        if self._scalar:
            self._exchange(self._scalar_values, i, j, vi, vj)  # type: ignore[arg-type]
        else:
            workers = self._workers
            for dst, val in ((i, vj), (j, vi)):
                if self.honest[dst] and (workers is None or workers[dst].up):
                    if self._last is not None:
                        self._advance(dst, self.env.now)
                    self.receive(np.array([dst]), val[None, :])
        self.exchanges += 1

    def _flush(self, now: float) -> None:
        """Apply, in due order, the queued deliveries due by ``now`` (merged path)."""
        queue, fifo = self._queue, self._fifo
        pop = queue.popleft if fifo else (lambda: heapq.heappop(queue))
        while queue and queue[0][0] <= now:
            item = pop()
            self._deliver(*(item[1:] if fifo else item[2:]))

    def _advance(self, i: int, now: float) -> None:
        """The node update's local work of node ``i`` since it last ran."""
        if self.honest[i]:
            last = self._last
            self.update.advance(self.x, i, now - last[i], rng=self.rng_update)  # type: ignore[index, arg-type]
            last[i] = now  # type: ignore[index]

    # -- run ------------------------------------------------------------------
    def record(self, k: int) -> None:
        if self._queue:
            self._flush(self.env.now)
        if self._flows is not None:
            self._flush_flows(self.env.now)
        if self._last is not None:  # a node update: every honest node's local work up to now
            now = self.env.now
            for i in self.hidx.tolist():
                self._advance(i, now)
        super().record(k)

    def process(self):
        """The recorder: records at the record times until the horizon (on the merged path,
        running the nodes' wakes before each record first)."""
        env, steps, wakes = self.env, self.records.steps, self._wakes
        for k in range(1, steps.size):
            # to the record's absolute time (a sum of fractional intervals would drift)
            delay = float(steps[k]) - env.now
            if wakes is not None:
                wakes(env.now + delay)  # the time SimPy gives the record: now + delay
            yield env.timeout(delay)
            self.record(k)
