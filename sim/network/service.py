"""The network as a SimPy service: ``transfer(src, dst, size) -> event`` on the environment's clock.

An engine holds one :class:`NetworkService` per replication and asks it for
every transfer; the event fires when the flow has arrived (its value is the
finish time). The service keeps one pending wake-up in the environment, at the
network's next start or finish, so a transfer costs the flow-level model's
work and a few SimPy events, whatever else is happening.
"""

from __future__ import annotations

import math
from typing import Any

import simpy

from ..timeline import NULL
from .flows import FlowEngine
from .topology import Network, build_network

__all__ = ["NetworkService"]


class NetworkService:
    """Transfers on a network, in a SimPy environment.

    Parameters
    ----------
    env : simpy.Environment
    network : Network or anything build_network takes
    weighting : {"maxmin", "rtt"}
    contention : bool
        False: every transfer is alone on its route and takes its latency plus
        ``size`` over the route's bottleneck at that size (no sharing).
    recorder : sim.timeline.Recorder, optional
        Records the links' utilisation (and the collectives' chunks) as it changes.

    A transfer that moves nothing through a finite resource (size 0, or a
    route of infinite links) is a plain timeout of its latency in both modes,
    so a network with no finite bandwidth gives the same events either way.

    Attributes
    ----------
    engine : FlowEngine
        The flow state (finish times, utilisation).
    transfers : int
        Transfers requested.
    """

    def __init__(self, env: simpy.Environment, network: Any, *, weighting: str = "maxmin",
                 incremental: bool = True, contention: bool = True,
                 recorder: Any = None) -> None:
        self.env = env
        self.network: Network = build_network(network)
        self.contention = bool(contention)
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.engine = FlowEngine(self.network, weighting=weighting, incremental=incremental,
                                 recorder=self.rec)
        self.engine.now = float(env.now)
        self._events: dict[int, simpy.Event] = {}
        self._wake_at = math.inf
        self._gen = 0
        self.transfers = 0

    def transfer(self, src: Any, dst: Any, size: float) -> simpy.Event:
        """Start moving ``size`` from ``src`` to ``dst`` now; the event fires on arrival.

        Parameters
        ----------
        src, dst : node labels (or indices) of the network
        size : float
            >= 0.

        Returns
        -------
        simpy.Event
            Succeeds with the arrival time.
        """
        self.transfers += 1
        net = self.network
        rt = net.route(src, dst)
        if size == 0 or not rt.resources or not self.contention:
            d = rt.latency
            if size > 0 and rt.resources:
                d += size / min(net.capacity[r] if net.curve[r] is None else net.curve[r](size)
                                for r in rt.resources)
            return self.env.timeout(d, value=self.env.now + d)
        f = self.engine.add(src, dst, size, self.env.now)
        ev = self.env.event()
        ev.flow = f  # type: ignore[attr-defined]
        self._events[f] = ev
        self._schedule()
        return ev

    def cancel(self, ev: simpy.Event) -> None:
        """Withdraw the transfer of ``ev`` (if it has not arrived); the event never fires."""
        f = getattr(ev, "flow", None)
        if f is None:  # a timeout (no sharing): it fires, to nobody
            if ev.callbacks:
                ev.callbacks.clear()
            return
        if self._events.pop(f, None) is None:
            return
        self.engine.advance(self.env.now)
        self.engine.cancel(f)
        self._schedule()

    def _schedule(self) -> None:
        t = self.engine.next_time()
        if t >= self._wake_at:
            return
        self._wake_at = t
        self._gen += 1
        gen = self._gen
        ev = self.env.timeout(max(0.0, t - self.env.now))
        ev.callbacks.append(lambda _e: self._wake(gen, t))

    def _wake(self, gen: int, t: float) -> None:
        if gen != self._gen:
            return
        self._wake_at = math.inf
        eng = self.engine
        done = eng.advance(t)
        events = self._events
        finish = eng.finish
        for f in done:
            ev = events.pop(f, None)
            if ev is not None:
                ev.succeed(finish[f])
        self._schedule()
