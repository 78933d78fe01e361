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
from simpy.events import Event, Timeout

from ..timeline import NULL
from .flows import FlowEngine
from .topology import Network, build_network

__all__ = ["NetworkService", "flow_engine"]


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
    engine : {"auto", "python", "compiled"}
        The flow engine: :class:`~sim.network.kernel.CompiledFlowEngine` or
        :class:`~sim.network.flows.FlowEngine` (the same numbers, bit for bit);
        ``auto`` takes the compiled one when numba is installed, ``incremental``
        is set and no recorder is on (only the Python engine records flows and
        link loads for the timeline; ``compiled`` is refused with one).
    recorder : sim.timeline.Recorder, optional
        Records the links' utilisation (and the collectives' chunks) as it changes.

    A transfer that moves nothing through a finite resource (size 0, or a
    route of infinite links) is a plain timeout of its latency in both modes,
    so a network with no finite bandwidth gives the same events either way.

    Attributes
    ----------
    engine : FlowEngine or CompiledFlowEngine
        The flow state (finish times, utilisation).
    transfers : int
        Transfers requested.
    """

    def __init__(self, env: simpy.Environment, network: Any, *, weighting: str = "maxmin",
                 incremental: bool = True, contention: bool = True,
                 engine: str = "auto", recorder: Any = None) -> None:
        self.env = env
        self.network: Network = build_network(network)
        self.contention = bool(contention)
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.engine = flow_engine(self.network, weighting=weighting, incremental=incremental,
                                  engine=engine, recorder=self.rec)
        self.engine.now = float(env.now)
        self._add, self._next_time = self.engine.add, self.engine.next_time
        self._advance = self.engine.advance_times
        self._routes: dict[Any, Any] = {}
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
        rt = self._routes.get((src, dst))
        if rt is None:
            rt = self._routes[(src, dst)] = self.network.route(src, dst)
        if size == 0 or not rt.resources or not self.contention:
            net = self.network
            d = rt.latency
            if size > 0 and rt.resources:
                d += size / min(net.capacity[r] if net.curve[r] is None else net.curve[r](size)
                                for r in rt.resources)
            return self.env.timeout(d, value=self.env.now + d)
        env = self.env
        f = self._add(src, dst, size, env.now)
        ev = Event(env)
        ev.flow = f  # type: ignore[attr-defined]
        self._events[f] = ev
        t = self._next_time()
        if t < self._wake_at:
            self._wake_up(t)
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

    def moved(self, ev: simpy.Event, size: float, t0: float) -> float:
        """What the transfer ``ev`` of ``size``, started at ``t0``, has moved by now (before
        it is withdrawn): all of it once arrived; a flow, what the flow engine has moved; a
        transfer without sharing (a timeout), ``size`` at an even rate over its delay."""
        if ev.triggered:
            return size
        f = getattr(ev, "flow", None)
        if f is None:
            d = getattr(ev, "_delay", 0.0)
            return size * min(1.0, (self.env.now - t0) / d) if d > 0 else size
        return self.engine.moved(f, self.env.now)

    def _schedule(self) -> None:
        t = self._next_time()
        if t < self._wake_at:
            self._wake_up(t)

    def _wake_up(self, t: float) -> None:
        """One pending wake-up, at the network's next event ``t`` (an earlier one supersedes
        the one pending, which then fires to nothing)."""
        self._wake_at = t
        self._gen += 1
        ev = Timeout(self.env, max(0.0, t - self.env.now), (self._gen, t))
        ev.callbacks.append(self._wake)

    def _wake(self, ev: simpy.Event) -> None:
        gen, t = ev.value
        if gen != self._gen:
            return
        self._wake_at = math.inf
        done, finish = self._advance(t)
        events = self._events
        for f, tf in zip(done, finish, strict=True):
            e = events.pop(f, None)
            if e is not None:
                e.succeed(tf)
        self._schedule()


def flow_engine(network: Network, *, weighting: str = "maxmin", incremental: bool = True,
                engine: str = "auto", flows: int = 1024, routes: int = 16,
                recorder: Any = None) -> Any:
    """A flow engine for ``network``: compiled or Python (see :class:`NetworkService`);
    ``flows`` and ``routes`` (ordered pairs of endpoints): how many to make room for at
    first (the compiled engine grows as needed);
    ``recorder`` (a :class:`sim.timeline.Recorder` that is on) takes the Python engine."""
    from ..errors import check, check_choice
    from .kernel import HAVE_NUMBA, CompiledFlowEngine

    check_choice("engine", engine, ("auto", "python", "compiled"))
    recording = recorder is not None and recorder.on
    if engine == "compiled":
        check(HAVE_NUMBA, "engine", "auto or python without numba (pip install 'dtsim[fast]')",
              engine)
        check(incremental, "engine", "python (or auto) with incremental=False", engine)
        check(not recording, "engine", "python (or auto) with a timeline recorder", engine)
    if engine == "compiled" or (engine == "auto" and HAVE_NUMBA and incremental
                                and not recording):
        return CompiledFlowEngine(network, weighting=weighting, flows=flows, routes=routes)
    return FlowEngine(network, weighting=weighting, incremental=incremental, recorder=recorder)
