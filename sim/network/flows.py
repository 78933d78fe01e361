"""Flows on a network: the event-driven flow-level model (SimGrid's CM02 without its factors).

A flow ``(src, dst, size, start)`` first waits its route's total latency,
then moves at its max-min fair share of every resource on its route
(:mod:`sim.network.maxmin`); the shares are recomputed whenever a flow starts
moving or finishes. A flow of size 0, or whose route crosses no finite
resource, finishes when its latency is over.

:class:`FlowEngine` is the online state, advanced in time by its caller: the
batch function :func:`simulate_flows` and the SimPy service
(:class:`sim.network.service.NetworkService`) both drive it, or its compiled
twin :class:`sim.network.kernel.CompiledFlowEngine` (numba), which gives the
same numbers bit for bit.

Incremental solving (SimGrid's lazy and selective update): a start or a finish
re-solves only the connected component of flows that share resources with it,
directly or through other flows; a flow's remaining size is brought up to date
only when its rate changes (``remaining -= rate * elapsed`` once per rate
change, never per event), and its finish time sits in a heap until it is
superseded. ``incremental=False`` re-solves every flow at every event with the
textbook progressive filling and updates every remaining size (SimGrid's
"Full" update): the cross-check.

Weighting: ``"maxmin"`` (plain max-min fairness) or ``"rtt"`` (SimGrid CM02:
each flow's share is weighted by the inverse of its route latency, TCP's RTT
unfairness; a route of latency 0 weighs 1, as in SimGrid).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_choice, check_nonnegative
from ..timeline import NULL
from ..units import SIZE, TIME, parse_quantity
from .maxmin import maxmin_rates, waterfill
from .topology import Network, build_network

__all__ = ["WEIGHTINGS", "FlowEngine", "FlowResult", "simulate_flows", "Flow", "read_flows"]

WEIGHTINGS = ("maxmin", "rtt")
#: Engines of :func:`simulate_flows`.
ENGINES = ("auto", "python", "compiled")
#: ``engine="auto"`` runs the compiled loop from this many flows up.
COMPILED_FROM = 1000

#: Completions predicted within this relative distance of the current event are
#: taken with it (each at its own predicted time): no event for a remainder of
#: a few ulps.
TIE = 1e-12

_LATENCY, _ACTIVE, _DONE, _CANCELLED = 0, 1, 2, 3
_ACT, _FIN = 0, 1


@dataclass(frozen=True)
class Flow:
    """One flow: ``size`` from ``src`` to ``dst``, requested at ``start``."""

    src: Any
    dst: Any
    size: float
    start: float = 0.0


class FlowEngine:
    """The flows of one network and their progress (see the module docstring).

    Parameters
    ----------
    network : Network
    weighting : {"maxmin", "rtt"}
    incremental : bool
        Re-solve only the component touched by each change (default), or every
        flow at every event (the cross-check).
    recorder : sim.timeline.Recorder, optional
        Told of every finished or cancelled flow and of the links whose load changed.
    """

    def __init__(self, network: Network, *, weighting: str = "maxmin",
                 incremental: bool = True, recorder: Any = None) -> None:
        self.network = network
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.weighting = check_choice("weighting", weighting, WEIGHTINGS)
        self.incremental = bool(incremental)
        self.cap = network.capacity
        self.curve = network.curve
        self.res_flows: list[dict[int, None]] = [{} for _ in range(network.n_resources)]
        self.f_src: list[int] = []
        self.f_dst: list[int] = []
        self.f_size: list[float] = []
        self.f_start: list[float] = []
        self.f_res: list[tuple[int, ...]] = []
        self.f_coef: list[tuple[float, ...]] = []
        self.f_w: list[float] = []
        self.f_rem: list[float] = []
        self.f_rate: list[float] = []
        self.f_last: list[float] = []
        self.f_ver: list[int] = []
        self.f_state: list[int] = []
        self.finish: list[float] = []
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.now = 0.0
        self.active = 0
        self.events = 0

    # -- flows --------------------------------------------------------------------
    def add(self, src: Any, dst: Any, size: float, start: float | None = None) -> int:
        """Request a flow; its index. ``start`` defaults to the engine's time.

        Raises
        ------
        ConfigError
            ``'src'``/``'dst'`` not a node or not joined, ``'size'`` negative,
            ``'start'`` before the engine's time.
        """
        size, t = _check_flow(self.now, size, start)
        return self.add_checked(src, dst, size, t)

    def add_checked(self, src: Any, dst: Any, size: float, t: float) -> int:
        """:meth:`add` with ``size`` and ``t`` already checked (a float >= 0, a time >= now)."""
        rt = self.network.route(src, dst)
        coef = []
        for r in rt.resources:
            c = self.curve[r]
            coef.append(1.0 if c is None or size == 0 else 1.0 / c(size))
        w = 1.0
        if self.weighting == "rtt" and rt.latency > 0:
            w = rt.latency
        f = len(self.f_size)
        self.f_src.append(rt.src)
        self.f_dst.append(rt.dst)
        self.f_size.append(size)
        self.f_start.append(t)
        self.f_res.append(rt.resources)
        self.f_coef.append(tuple(coef))
        self.f_w.append(w)
        self.f_rem.append(size)
        self.f_rate.append(0.0)
        self.f_last.append(t)
        self.f_ver.append(0)
        self.f_state.append(_LATENCY)
        self.finish.append(math.nan)
        self._seq += 1
        heapq.heappush(self.heap, (t + rt.latency, self._seq, _ACT, f, 0))
        return f

    def cancel(self, f: int) -> None:
        """Withdraw flow ``f`` now (its share goes back to the others)."""
        st = self.f_state[f]
        if self.rec.on and st in (_LATENCY, _ACTIVE):
            self.rec.flow_done(self, f, self.now, cut=True)
        if st == _LATENCY:
            self.f_state[f] = _CANCELLED
        elif st == _ACTIVE:
            self.f_state[f] = _CANCELLED
            self.active -= 1
            changed = {}
            for r in self.f_res[f]:
                del self.res_flows[r][f]
                changed[r] = None
            self._resolve(changed, self.now)

    def moved(self, f: int, t: float) -> float:
        """What flow ``f`` has moved by time ``t`` (no earlier than its last rate change and
        no later than the next event): its size once done, none while it waits its latency
        (or withdrawn), else its size less what remains at its rate since the last change."""
        st = self.f_state[f]
        if st == _DONE:
            return self.f_size[f]
        if st != _ACTIVE:
            return 0.0
        return self.f_size[f] - max(0.0, self.f_rem[f] - self.f_rate[f] * (t - self.f_last[f]))

    def next_time(self) -> float:
        """Time of the next start or finish (inf when nothing is pending)."""
        heap = self.heap
        ver, state = self.f_ver, self.f_state
        while heap:
            t, _, kind, f, v = heap[0]
            if (kind == _FIN and (v != ver[f] or state[f] != _ACTIVE)) or (
                    kind == _ACT and state[f] != _LATENCY):
                heapq.heappop(heap)
                continue
            return t
        return math.inf

    def advance(self, until: float) -> list[int]:
        """Process every start and finish at times ``<= until``; the flows finished, in order."""
        out: list[int] = []
        while True:
            t = self.next_time()
            if t > until or t == math.inf:
                break
            out.extend(self._step())
        if until > self.now and until < math.inf:
            self.now = until
        return out

    def rates(self) -> dict[int, float]:
        """The rate of every flow moving now (its share after the last event)."""
        return {f: self.f_rate[f] for f, st in enumerate(self.f_state) if st == _ACTIVE}

    def advance_times(self, until: float) -> tuple[list[int], list[float]]:
        """:meth:`advance`, and the finish time of each flow it returns."""
        done = self.advance(until)
        finish = self.finish
        return done, [finish[f] for f in done]

    def exchange(self, a: Any, b: Any, size: float, t: float) -> list[int]:
        """:meth:`advance` to ``t``, then a flow of ``size`` each way between ``a`` and ``b``
        from ``t`` (``size`` a float >= 0, ``t`` >= now), for an engine whose flows all come
        so, in pairs: exchange ``k`` (the ``k``-th asked) is flows ``2 k`` (``a -> b``) and
        ``2 k + 1``, complete when both have arrived. The exchanges complete by ``t``, in the
        order their second flow arrived."""
        done = self.exchanges_done(t)
        self.add_checked(a, b, size, t)
        self.add_checked(b, a, size, t)
        return done

    def exchanger(self, size: float, a: Any) -> Callable[[Any, float], list[int]]:
        """:meth:`exchange` from ``a`` with ``size`` bound: ``f(b, t)``, for a hot loop."""
        size = float(size)
        return lambda b, t: self.exchange(a, b, size, t)

    def exchanges_done(self, until: float) -> list[int]:
        """:meth:`advance` to ``until`` on an engine of exchanges: those complete by then
        (as :meth:`exchange` reports them)."""
        if self.next_time() > until:
            if until > self.now:
                self.now = until
            return []
        done = self.advance(until)
        later = set(done)
        out = []
        for f in done:
            later.discard(f)
            p = f ^ 1
            if self.f_state[p] == _DONE and p not in later:  # the other arrived before
                out.append(f >> 1)
        return out

    def run(self) -> list[int]:
        """Process every pending event; the flows finished, in order."""
        return self.advance(math.inf)

    # -- events ---------------------------------------------------------------------
    def _step(self) -> list[int]:
        heap = self.heap
        T = heap[0][0]
        lim = T + abs(T) * TIE
        changed: dict[int, None] = {}
        done: list[int] = []
        pop = heapq.heappop
        res_flows, f_res, state = self.res_flows, self.f_res, self.f_state
        while heap and heap[0][0] <= lim:
            t, _, kind, f, v = pop(heap)
            if kind == _FIN:
                if v != self.f_ver[f] or state[f] != _ACTIVE:
                    continue
                state[f] = _DONE
                self.finish[f] = t
                self.active -= 1
                done.append(f)
                if self.rec.on:
                    self.rec.flow_done(self, f, t)
                for r in f_res[f]:
                    del res_flows[r][f]
                    changed[r] = None
            else:
                if state[f] != _LATENCY:
                    continue
                if not f_res[f] or self.f_size[f] == 0.0:
                    state[f] = _DONE
                    self.finish[f] = t
                    done.append(f)
                    if self.rec.on:
                        self.rec.flow_done(self, f, t)
                    continue
                state[f] = _ACTIVE
                self.active += 1
                self.f_last[f] = t
                for r in f_res[f]:
                    res_flows[r][f] = None
                    changed[r] = None
        self.now = max(self.now, T)
        self.events += 1
        if changed:
            self._resolve(changed, T)
        return done

    def _resolve(self, changed: dict[int, None], T: float) -> None:
        if not self.incremental:
            self._resolve_full(T)
            return
        res_flows, f_res = self.res_flows, self.f_res
        flows: dict[int, None] = {}
        seen: dict[int, None] = dict(changed)
        stack = list(changed)
        while stack:
            r = stack.pop()
            for f in res_flows[r]:
                if f not in flows:
                    flows[f] = None
                    for r2 in f_res[f]:
                        if r2 not in seen:
                            seen[r2] = None
                            stack.append(r2)
        if not flows:
            if self.rec.on:
                self.rec.link_load(self, seen, T)
            return
        rates = waterfill(list(flows), list(seen), self.cap, res_flows, f_res, self.f_coef,
                          self.f_w)
        self._apply(rates, T)
        if self.rec.on:
            self.rec.link_load(self, seen, T)

    def _apply(self, rates: dict[int, float], T: float) -> None:
        f_rate, f_rem, f_last, f_ver = self.f_rate, self.f_rem, self.f_last, self.f_ver
        heap = self.heap
        push = heapq.heappush
        for f, x in rates.items():
            old = f_rate[f]
            if x == old:
                continue
            rem = f_rem[f]
            if old > 0.0:
                rem -= old * (T - f_last[f])
                if rem < 0.0:
                    rem = 0.0
                f_rem[f] = rem
            f_last[f] = T
            f_rate[f] = x
            v = f_ver[f] + 1
            f_ver[f] = v
            self._seq += 1
            push(heap, (T + rem / x if x > 0.0 else math.inf, self._seq, _FIN, f, v))

    def _resolve_full(self, T: float) -> None:
        active = [f for f, s in enumerate(self.f_state) if s == _ACTIVE]
        f_rate, f_rem, f_last = self.f_rate, self.f_rem, self.f_last
        for f in active:  # every remaining size brought up to date at every event
            if f_rate[f] > 0.0:
                f_rem[f] = max(0.0, f_rem[f] - f_rate[f] * (T - f_last[f]))
            f_last[f] = T
        if not active:
            if self.rec.on:
                self.rec.link_load(self, range(len(self.cap)), T)
            return
        x = maxmin_rates([self.f_res[f] for f in active], self.cap,
                         coefficients=[self.f_coef[f] for f in active],
                         weights=[self.f_w[f] for f in active])
        for f in active:
            f_rate[f] = -1.0  # force a new finish entry for every flow
        self._apply({f: float(r) for f, r in zip(active, x, strict=True)}, T)
        if self.rec.on:
            self.rec.link_load(self, range(len(self.cap)), T)

    # -- results --------------------------------------------------------------------
    def utilisation(self, span: float) -> list[dict[str, Any]]:
        """Per resource: the bytes that crossed it and its mean utilisation over ``span``.

        A plain resource's utilisation is ``bytes / (capacity * span)``; a curve
        resource's is the time its flows occupied it, ``sum size / c(size)``,
        over ``span``. Finished flows only.
        """
        done = [f for f, st in enumerate(self.f_state) if st == _DONE]
        return link_utilisation(self.network, [self.f_size[f] for f in done],
                                [self.f_res[f] for f in done], [self.f_coef[f] for f in done],
                                span)


def _check_flow(now: float, size: Any, start: Any) -> tuple[float, float]:
    """A flow's size and start checked against the engine's time ``now`` (both engines)."""
    size = check_nonnegative("size", size)
    t = now if start is None else float(start)
    check(math.isfinite(t), "start", "a finite time", start)
    if t < now:
        check(now - t <= 1e-12 * max(1.0, abs(now)), "start",
              f"at or after the network's time {now!r}", start)
        t = now
    return size, t


def link_utilisation(net: Network, sizes: Sequence[float], routes: Sequence[Sequence[int]],
                     coefs: Sequence[Sequence[float]], span: float) -> list[dict[str, Any]]:
    """Per resource: the bytes the given (finished) flows carried and its mean utilisation."""
    R = net.n_resources
    carried = [0.0] * R
    busy = [0.0] * R
    for s, res, co in zip(sizes, routes, coefs, strict=True):
        for r, a in zip(res, co, strict=True):
            carried[r] += s
            busy[r] += s * a
    out = []
    for r in range(R):
        cap = net.capacity[r]
        curve = net.curve[r]
        u = busy[r] / (cap * span) if span > 0 else math.nan
        out.append({"link": net.resource_names[r],
                    "capacity": curve.text() if curve is not None else cap,
                    "bytes": carried[r], "utilisation": u})
    return out


@dataclass(frozen=True)
class FlowResult:
    """What :func:`simulate_flows` returns.

    Attributes
    ----------
    finish : numpy.ndarray
        Finish time of each flow, in the input order.
    links : list of dict
        Per finite resource: ``link`` (its name), ``capacity`` (number or curve
        text), ``bytes`` carried and ``utilisation`` over ``[first start, last finish]``.
    events : int
        Event times processed.
    """

    finish: np.ndarray
    links: list[dict[str, Any]]
    events: int


def _as_flows(flows: Iterable[Any]) -> list[Flow]:
    out = []
    for x in flows:
        if isinstance(x, Flow):
            out.append(x)
            continue
        try:
            src, dst, size, *rest = x
        except (TypeError, ValueError):
            raise ConfigError("flows", "(src, dst, size, start) rows", x) from None
        if len(rest) > 1:
            raise ConfigError("flows", "(src, dst, size, start) rows", x)
        out.append(Flow(src, dst, size, rest[0] if rest else 0.0))
    return out


def simulate_flows(network: Any, flows: Sequence[Any], *, weighting: str = "maxmin",
                   incremental: bool = True, engine: str = "auto",
                   recorder: Any = None) -> FlowResult:
    """Finish times of a set of flows on a network (the batch interface).

    Parameters
    ----------
    network : Network, NetworkValue, networkx.Graph or str
        Anything :func:`~sim.network.topology.build_network` takes.
    flows : sequence
        :class:`Flow` values or ``(src, dst, size, start)`` rows.
    weighting : {"maxmin", "rtt"}
    incremental : bool
        False re-solves everything at every event (the cross-check; Python only).
    engine : {"auto", "python", "compiled"}
        ``compiled`` runs the same model as one numba loop
        (:mod:`sim.network.kernel`); ``auto`` takes it when numba is installed,
        ``incremental`` is set and there are at least :data:`COMPILED_FROM`
        flows (below that, loading the compiled loop costs more than it saves),
        else the Python :class:`FlowEngine`.
    recorder : sim.timeline.Recorder, optional
        Records every flow and the links' utilisation (the Python engine only:
        ``compiled`` is refused with it, and ``auto`` takes the Python engine).

    Returns
    -------
    FlowResult

    Raises
    ------
    ConfigError
        Unknown node, negative size, start not finite or negative, a compiled
        engine without numba or with ``incremental=False``.
    """
    from .kernel import HAVE_NUMBA

    check_choice("engine", engine, ENGINES)
    if engine == "compiled":
        check(HAVE_NUMBA, "engine", "auto or python without numba (pip install 'dtsim[fast]')",
              engine)
        check(incremental, "engine", "python (or auto) with incremental=False", engine)
        check(recorder is None, "engine", "python (or auto) with a timeline recorder", engine)
    compiled = engine == "compiled" or (engine == "auto" and HAVE_NUMBA and incremental
                                        and len(flows) >= COMPILED_FROM and recorder is None)
    net = build_network(network)
    rows = _as_flows(flows)
    starts = [check_nonnegative("start", fl.start) for fl in rows]
    t0 = min(starts, default=0.0)
    if compiled:
        return _simulate_compiled(net, rows, starts, weighting)
    eng = FlowEngine(net, weighting=weighting, incremental=incremental, recorder=recorder)
    eng.now = t0
    for fl, s in zip(rows, starts, strict=True):
        eng.add(fl.src, fl.dst, fl.size, s)
    eng.run()
    finish = np.asarray(eng.finish, dtype=float)
    span = float(finish.max() - t0) if len(finish) else 0.0
    return FlowResult(finish, eng.utilisation(span), eng.events)


def flow_arrays(net: Network, rows: Sequence[Flow], starts: Sequence[float],
                weighting: str = "maxmin") -> dict[str, np.ndarray]:
    """The flat arrays :func:`sim.network.kernel.run_flows` takes (routes looked up here)."""
    check_choice("weighting", weighting, WEIGHTINGS)
    n = len(rows)
    ptr = np.zeros(n + 1, dtype=np.int64)
    res: list[int] = []
    coef: list[float] = []
    weight = np.ones(n)
    size = np.empty(n)
    lat = np.empty(n)
    curve = net.curve
    for f, fl in enumerate(rows):
        sz = check_nonnegative("size", fl.size)
        rt = net.route(fl.src, fl.dst)
        for r in rt.resources:
            res.append(r)
            c = curve[r]
            coef.append(1.0 if c is None or sz == 0 else 1.0 / c(sz))
        ptr[f + 1] = len(res)
        if weighting == "rtt" and rt.latency > 0:
            weight[f] = rt.latency
        size[f] = sz
        lat[f] = rt.latency
    return {"cap": np.asarray(net.capacity, dtype=float), "ptr": ptr,
            "res": np.asarray(res, dtype=np.int64), "coef": np.asarray(coef, dtype=float),
            "weight": weight, "size": size, "start": np.asarray(starts, dtype=float), "lat": lat}


#: The arrays of :func:`flow_arrays`, in the order :func:`sim.network.kernel.run_flows` takes them.
RUN_FLOWS_ARGS = ("cap", "ptr", "res", "coef", "weight", "size", "start", "lat")


def _simulate_compiled(net: Network, rows: Sequence[Flow], starts: Sequence[float],
                       weighting: str) -> FlowResult:
    from .kernel import run_flows

    a = flow_arrays(net, rows, starts, weighting)
    finish, events = run_flows(*[a[k] for k in RUN_FLOWS_ARGS])
    t0 = min(starts, default=0.0)
    span = float(finish.max() - t0) if len(finish) else 0.0
    return FlowResult(finish, _utilisation(net, a, span), int(events))


def _utilisation(net: Network, a: dict[str, np.ndarray], span: float) -> list[dict[str, Any]]:
    """Per resource: bytes carried and mean utilisation (as FlowEngine.utilisation)."""
    R = net.n_resources
    flow_of = np.repeat(np.arange(len(a["size"])), np.diff(a["ptr"]))
    sizes = a["size"][flow_of]
    carried = np.bincount(a["res"], weights=sizes, minlength=R) if len(a["res"]) else np.zeros(R)
    busy = np.bincount(a["res"], weights=sizes * a["coef"], minlength=R) if len(a["res"]) \
        else np.zeros(R)
    out = []
    for r in range(R):
        curve = net.curve[r]
        out.append({"link": net.resource_names[r],
                    "capacity": curve.text() if curve is not None else net.capacity[r],
                    "bytes": float(carried[r]),
                    "utilisation": float(busy[r] / (net.capacity[r] * span)) if span > 0
                    else math.nan})
    return out


def read_flows(path: Any, *, quantities: list[Any] | None = None) -> list[Flow]:
    """Read a flows CSV: header ``src,dst,size,start``, one flow a line.

    Node names are kept as text (:meth:`Network.node_index` matches them
    against the graph's labels). Sizes and starts are numbers >= 0: bytes and
    seconds, or with a unit (``2GB``, ``16Gbit``; ``10ms``), as :mod:`sim.units`
    reads them. ``quantities``, when given, receives each row's
    ``(size, start)`` :class:`~sim.units.Quantity` pair (how it was written).

    Raises
    ------
    ConfigError
        ``'flows'`` naming the file and line of a malformed row.
    """
    import csv
    import io

    from ..errors import read_csv_text

    text = read_csv_text("flows", path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    cols = [c.strip() for c in header] if header else []
    check(cols == ["src", "dst", "size", "start"], "flows",
          "a CSV file with the header src,dst,size,start", f"{path} (header: {','.join(cols)})")
    out = []
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{path}:{lineno}"
        check(len(row) == 4, "flows", "rows of 4 fields src,dst,size,start", where)
        src, dst = row[0].strip(), row[1].strip()
        check(bool(src) and bool(dst), "flows", "rows naming src and dst", where)
        try:
            sq, tq = parse_quantity(row[2], SIZE, "size"), parse_quantity(row[3], TIME, "start")
        except ConfigError as exc:
            raise ConfigError("flows", f"rows whose {exc.name} is {exc.rule}",
                              f"{where} ({row[2].strip()}, {row[3].strip()})") from None
        size, start = sq.value, tq.value
        if quantities is not None:
            quantities.append((sq, tq))
        check(math.isfinite(size) and size >= 0, "flows", "rows with a finite size >= 0",
              f"{where} (size {row[2].strip()})")
        check(math.isfinite(start) and start >= 0, "flows", "rows with a finite start >= 0",
              f"{where} (start {row[3].strip()})")
        out.append(Flow(src, dst, size, start))
    check(len(out) >= 1, "flows", "a CSV file with at least one flow", str(path))
    return out
