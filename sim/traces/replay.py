"""From a trace to workers: mapping policies, windows, speed-up, looping, tiling, resampling.

A count trace says how many instances were up, not which. A *slot* is one
of the trace's instance positions (``capacity`` of them; for a dtsim CSV, one
per named worker). A mapping policy decides which slots go down when the
count falls and which come back when it rises:

``recent``
    the slot that came up most recently leaves first (ties: the highest slot
    index); the slot down longest comes back first (ties: the lowest index).
``random``
    a uniformly random up slot leaves, a uniformly random down slot returns
    (draws from the replication's ``trace:policy`` stream). The up set is then
    uniform given the count at every time, so a worker's availability equals the
    trace's in expectation whatever subset of workers is replayed.
``domain``
    whole failure domains first: the leaving slot is taken from the domain with
    the fewest slots up, the most recent in it first (ties between domains
    broken at random, ``trace:policy`` stream); the slot down longest comes
    back first, as under ``recent`` (a domain emptied by a burst returns in the
    order it left; capacity is neither hoarded by nor steered to a domain). Worker ``i``'s domain is given by the model (``i % domains`` in
    ``dtsim failures``, its stage in ``dtsim pipeline``); slots beyond the
    workers repeat that layout as further domains of the same shape, so spare
    slots do not shield the workers.

An event trace (Oobleck) has identity: a removed node's slot goes down; a node
that joins takes a down slot by the policy's return rule (the replacement
takes the slot of the worker it replaces: with ``recent``, of the one lost
longest ago); a node that returns under its own name (an event log, never an
Oobleck trace) takes back its own slot if it is still down. A dtsim CSV maps
its workers to slots by their first up period, ties by name.

Worker ``i`` replays slot ``i``. More workers than slots are refused unless
the policy ends in ``+tile``: worker ``i`` then replays slot ``i % S`` of copy
``i // S`` of the trace, copy ``m`` of ``k = ceil(n / S)`` shifted by
``m P / k`` (``P`` the span) and wrapping around the span.

Time: simulated time ``tau`` replays trace time ``start + speedup * tau``.
Without ``loop`` the replay ends at ``(P - start) / speedup``; with it every
slot repeats its pattern with period ``P`` (a slot jumps back to its state at
the trace's start, so a count trace that ends higher than it starts has a
preemption at the seam). A dtsim CSV keeps its own rule: after the last
interval every worker stays up.

Replications from one trace (``resample``): ``none`` (every replication the
same replay), ``offset`` (replication ``k`` starts at a uniformly random
offset in ``[0, P)``, with looping), ``block`` (a moving-block bootstrap: the
count function is rebuilt, over the same span, from blocks of ``block``
seconds whose starts are uniform in ``[0, P - block]``, then mapped by the
policy; node identity is not kept).

Exactness: with ``n`` equal to the number of slots, no resampling, and a
simulated horizon of whole periods, the workers' mean up-fraction is
exactly the trace's availability (count integral over capacity times span),
for every policy. With fewer workers than slots the replayed workers are
slots ``0 .. n-1``: under ``recent`` these are the most stable (above the
trace's availability), under ``random`` they match it only in expectation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from ..errors import SimulationError, check, check_choice, check_nonnegative, check_positive
from ..rng import Streams
from .model import AvailabilityTrace
from .readers import TIME_UNITS, check_format, trace_digest
from .registry import load_trace, trace_bytes

__all__ = ["POLICIES", "RESAMPLING", "MODELS", "TraceReplay", "slot_patterns", "slot_nodes",
           "node_patterns",
           "block_bootstrap",
           "trace_slots", "TraceEnded", "end_guard", "attach"]

POLICIES = ("recent", "random", "domain")
RESAMPLING = ("none", "offset", "block")
#: What is replayed: the trace itself, or a fresh look-alike from its fitted bursty model.
MODELS = ("trace", "fitted")

Interval = tuple[float, float]


def trace_slots(trace: AvailabilityTrace) -> int:
    """Worker slots of a trace: its capacity, or its named workers for a dtsim CSV."""
    if trace.reuse and trace.nodes is not None:
        return len({s.node for s in trace.nodes})
    return trace.capacity


class _Slots:
    """Slot states while a trace is walked: who is up, since when, in which domain."""

    def __init__(self, n: int, domain: Sequence[int], policy: str,
                 rng: np.random.Generator | None) -> None:
        self.n, self.domain, self.policy, self.rng = n, list(domain), policy, rng
        self.up = [False] * n
        self.since = [0.0] * n
        self.order = [0] * n  # tie-breaker: sequence number of the last change
        self.seq = 0
        self.down: list[list[Interval]] = [[] for _ in range(n)]

    def _stamp(self, i: int, t: float) -> None:
        self.since[i] = t
        self.seq += 1
        self.order[i] = self.seq

    def set_up(self, i: int, t: float) -> None:
        if t > 0.0 or self.since[i] > 0.0:
            self.down[i].append((self.since[i], t))
        self.up[i] = True
        self._stamp(i, t)

    def set_down(self, i: int, t: float) -> None:
        self.up[i] = False
        self._stamp(i, t)

    def _domain_counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for i in range(self.n):
            out[self.domain[i]] = out.get(self.domain[i], 0) + self.up[i]
        return out

    def _tie(self, doms: list[int]) -> int:
        if len(doms) == 1 or self.rng is None:
            return doms[0]
        return doms[int(self.rng.integers(len(doms)))]

    def pick_leaving(self) -> int:
        ups = [i for i in range(self.n) if self.up[i]]
        if self.policy == "random":
            return int(ups[int(self.rng.integers(len(ups)))])  # type: ignore[union-attr]
        if self.policy == "domain":
            counts = self._domain_counts()
            low = min(c for c in counts.values() if c > 0)
            dom = self._tie(sorted(d for d, c in counts.items() if c == low))
            ups = [i for i in ups if self.domain[i] == dom]
        return max(ups, key=lambda i: (self.order[i], i))

    def pick_returning(self) -> int:
        downs = [i for i in range(self.n) if not self.up[i]]
        if self.policy == "random":
            return int(downs[int(self.rng.integers(len(downs)))])  # type: ignore[union-attr]
        return min(downs, key=lambda i: (self.order[i], i))  # down longest first

    def finish(self, end: float) -> list[tuple[Interval, ...]]:
        for i in range(self.n):
            if not self.up[i]:
                self.down[i].append((self.since[i], end))
        return [tuple(d) for d in self.down]


def slot_patterns(trace: AvailabilityTrace, *, policy: str = "recent",
                  domain_of: Sequence[int] | None = None,
                  rng: np.random.Generator | None = None,
                  slots: int | None = None) -> list[tuple[Interval, ...]]:
    """Down intervals of every slot over the trace's span ``[0, end]``.

    Parameters
    ----------
    trace : AvailabilityTrace
    policy : {"recent", "random", "domain"}
        See the module notes.
    domain_of : sequence of int, optional
        Failure domain of each slot (``domain``); slots beyond it repeat the
        layout as further domains. Default: one domain.
    rng : numpy.random.Generator, optional
        Needed by ``random``; breaks ties between domains for ``domain``
        (without it, the lowest domain).
    slots : int, optional
        Number of slots, at least the trace's (a generated or bootstrapped
        trace keeps its source's slots even if its count never reaches them).

    Returns
    -------
    list of tuple
        ``patterns[slot]`` = sorted ``(start, end)`` down intervals; a slot
        down at time 0 has an interval starting at 0; a zero-length interval is
        a preemption and a replacement at one timestamp.
    """
    check_choice("trace_policy", policy, POLICIES)
    check(policy != "random" or rng is not None, "rng", "given for the random policy", None)
    n = trace_slots(trace)
    if slots is not None:
        check(slots >= n, "slots", f"at least the trace's {n}", slots)
        n = slots
    if domain_of:
        layout = list(domain_of)[:n]
        m, width = len(layout), max(layout) + 1
        dom = [layout[i % m] + (i // m) * width for i in range(n)]
    else:
        dom = [0] * n
    end = trace.end
    if trace.reuse and trace.nodes is not None:  # dtsim CSV: one slot per named worker
        return list(node_patterns(trace).values())
    slots = _Slots(n, dom, policy, rng)
    if trace.nodes is not None:  # event trace: removals by identity, joins by the policy
        _walk_nodes(trace, slots)
        return slots.finish(end)
    c0 = int(trace.counts[0])
    if policy == "random" and c0:
        for i in sorted(rng.choice(n, size=c0, replace=False).tolist()):  # type: ignore[union-attr]
            slots.set_up(int(i), 0.0)
    else:
        for _ in range(c0):
            slots.set_up(slots.pick_returning(), 0.0)
    prev = c0
    for t, c in zip(trace.times[1:].tolist(), trace.counts[1:].tolist(), strict=True):
        for _ in range(prev - c):
            slots.set_down(slots.pick_leaving(), t)
        for _ in range(c - prev):
            slots.set_up(slots.pick_returning(), t)
        prev = c
    return slots.finish(end)


def node_patterns(trace: AvailabilityTrace) -> dict[str, tuple[Interval, ...]]:
    """Down intervals of every named instance of a trace with identity over ``[0, end]``, by
    name in the order of first appearance: the complement of its up periods (down before its
    first up and after its last down). Empty for a count trace."""
    end = trace.end
    ups: dict[str, list[Interval]] = {}
    for sp in trace.nodes or ():
        ups.setdefault(sp.node, []).append((sp.start, end if sp.end is None else sp.end))
    out = {}
    for name, spans in ups.items():
        spans.sort()
        downs, t = [], 0.0
        for s, e in spans:
            if s > t:
                downs.append((t, s))
            t = max(t, e)
        if t < end:
            downs.append((t, end))
        out[name] = tuple(downs)
    return out


def _walk_nodes(trace: AvailabilityTrace, slots: _Slots) -> list[list[str]]:
    """Walk an event trace's nodes through ``slots``; the nodes each slot held, in order.

    A removed node's slot goes down; a joining node takes back its own slot when
    it held one that is still down (an event log's instance that returns; an
    Oobleck trace adds each node once), else a down slot by the policy's return rule.
    """
    events: list[tuple[float, int, int, str]] = []
    for k, sp in enumerate(trace.nodes or ()):
        events.append((sp.start, 1, k, sp.node))
        if sp.end is not None:
            events.append((sp.end, 0, k, sp.node))
    events.sort()
    where: dict[str, int] = {}
    last: dict[str, int] = {}
    held: list[list[str]] = [[] for _ in range(slots.n)]
    for t, kind, _, node in events:
        if kind == 0:
            i = last[node] = where.pop(node)
            slots.set_down(i, t)
        else:
            i = last.get(node, -1)
            if i < 0 or slots.up[i]:
                i = slots.pick_returning()
            where[node] = i
            if not held[i] or held[i][-1] != node:
                held[i].append(node)
            slots.set_up(i, t)
    return held


def slot_nodes(trace: AvailabilityTrace, *, policy: str = "recent",
               rng: np.random.Generator | None = None) -> list[list[str]] | None:
    """The nodes each worker slot of an event trace held, in order (None without identity,
    and for a dtsim CSV, whose slots are its named workers)."""
    if trace.nodes is None or trace.reuse:
        return None
    return _walk_nodes(trace, _Slots(trace_slots(trace), [0] * trace_slots(trace), policy, rng))


#: The most blocks a block bootstrap of a trace's span may take (:class:`TraceReplay`).
MAX_BLOCKS = 1e7


def block_bootstrap(trace: AvailabilityTrace, block: float, *,
                    rng: np.random.Generator) -> AvailabilityTrace:
    """A moving-block bootstrap of a trace's count function over the same span.

    Blocks of ``block`` seconds (the last one cut at the span's end) are copied
    from starts drawn uniformly in ``[0, end - block]`` and laid end to end.
    The result is a count trace (format ``bootstrap``) without node identity.
    """
    from .model import count_trace

    P = trace.end
    check(0 < block <= P, "trace_block", f"in (0, {P:g}] (the trace's span in seconds)", block)
    times: list[float] = []
    counts: list[int] = []
    t = 0.0
    while t < P:
        length = min(block, P - t)
        s = float(rng.uniform(0.0, P - block)) if P > block else 0.0
        i0 = int(np.searchsorted(trace.times, s, side="right")) - 1
        last = t + length >= P  # the span is closed: keep changes at its very end
        i1 = int(np.searchsorted(trace.times, s + length, side="right" if last else "left"))
        times.append(t)
        counts.append(int(trace.counts[i0]))
        for j in range(i0 + 1, i1):
            times.append(t + float(trace.times[j]) - s)
            counts.append(int(trace.counts[j]))
        t += length
    return count_trace(times, counts, P, format="bootstrap", source=f"{trace.source} (bootstrap)")


@functools.lru_cache(maxsize=32)
def _parse_cached(key: str, trace: str, format: str, time_unit: str | None) -> AvailabilityTrace:
    """:func:`load_trace`, cached per content (``key``, its SHA-256), name, format and unit."""
    return load_trace(trace, format=format, time_unit=time_unit)


@functools.lru_cache(maxsize=32)
def _fit_cached(key: str, trace: str, format: str, time_unit: str | None) -> Any:
    from .fit import fit_model

    return fit_model(_parse_cached(key, trace, format, time_unit), policy="recent")


@dataclass(frozen=True)
class TraceReplay:
    """How to replay a trace as worker failures (a value-only config).

    Parameters
    ----------
    trace : str
        A shipped name (``dtsim trace list``) or a file path.
    format : str
        ``auto`` (detect) or a reader name.
    time_unit : str or None
        Unit of the file's times where the format cannot tell.
    policy : str
        ``recent``, ``random`` or ``domain``, optionally with ``+tile``.
    speedup : float
        Trace seconds per simulated time unit (> 0).
    start : float
        Trace time (seconds) replayed at simulated time 0, in ``[0, span)``.
    loop : bool
        Repeat the trace (each slot's pattern) with period = span.
    resample : {"none", "offset", "block"}
        How replications differ (see the module notes).
    block : float or None
        Block length in trace seconds for ``resample="block"``.
    model : {"trace", "fitted"}
        ``fitted`` replays, in each replication, a new synthetic trace of the
        same span drawn from the trace's fitted :class:`~sim.traces.BurstyModel`
        (durations fitted under the ``recent`` policy; stream ``trace:generate``).

    Attributes
    ----------
    digest : str
        SHA-256 of the trace file's content (so a config's identity covers the data).
    """

    trace: str
    format: str = "auto"
    time_unit: str | None = None
    policy: str = "recent"
    speedup: float = 1.0
    start: float = 0.0
    loop: bool = False
    resample: str = "none"
    block: float | None = None
    model: str = "trace"
    digest: str = field(default="", compare=True)

    def __post_init__(self) -> None:
        check(isinstance(self.trace, str) and self.trace != "", "failure_trace",
              "a shipped trace name or a file path", self.trace)
        check_format(self.format)
        if self.time_unit is not None:
            check_choice("time_unit", self.time_unit, TIME_UNITS)
        leave, _ = self.policy_parts
        check_choice("trace_policy", leave, POLICIES)
        check(self.policy.count("+") <= 1 and self.policy.split("+")[1:] in ([], ["tile"]),
              "trace_policy", "recent, random or domain, optionally followed by +tile",
              self.policy)
        check_positive("trace_speedup", self.speedup)
        check_nonnegative("trace_start", self.start)
        check_choice("trace_resample", self.resample, RESAMPLING)
        if self.resample == "offset":
            check(self.loop, "trace_loop", "set with resample offset (offsets wrap around)",
                  self.loop)
        if self.resample == "block":
            check(self.block is not None, "trace_block", "given with resample block", self.block)
        if self.block is not None:
            check(self.resample == "block", "trace_block", "unset unless resample is block",
                  self.block)
            check_positive("trace_block", self.block)
        check_choice("trace_model", self.model, MODELS)
        object.__setattr__(self, "digest", trace_digest(trace_bytes(self.trace)))
        tr = self.load()  # validates the file now, before any work
        if self.model == "fitted":
            check(self.resample != "block", "trace_resample",
                  "none or offset with the fitted model (each replication is a new trace)",
                  self.resample)
            self.fitted()  # refuses a trace with nothing stationary to fit
        check(self.start < tr.end, "trace_start", f"below the trace's span ({tr.end:g} s)",
              self.start)
        if self.block is not None:
            check(self.block <= tr.end, "trace_block",
                  f"at most the trace's span ({tr.end:g} s)", self.block)
            # block_bootstrap lays the span's blocks end to end one by one (about 8 us each on
            # this project's 2-core machine: 1e7 blocks, 80 s a replication; 1e-300 s ran for ever)
            check(tr.end / self.block <= MAX_BLOCKS, "trace_block", f"at least the trace's span "
                  f"over {MAX_BLOCKS:.0e} ({tr.end / MAX_BLOCKS:.3g} s: at most {MAX_BLOCKS:.0e} "
                  "blocks a replication)", self.block)

    @property
    def policy_parts(self) -> tuple[str, bool]:
        """The mapping policy's name and whether it tiles."""
        name, _, mod = str(self.policy).partition("+")
        return name, mod == "tile"

    @property
    def fixed_paths(self) -> bool:
        """True when every replication replays the same down intervals for every worker.

        That is the trace itself (not the fitted model), without resampling,
        under the ``recent`` policy (``random`` draws which slot leaves,
        ``domain`` breaks ties between domains at random).
        """
        return self.model == "trace" and self.resample == "none" and self.policy_parts[0] == "recent"

    def load(self) -> AvailabilityTrace:
        """The parsed trace (cached per content, format and unit)."""
        return _parse_cached(self.digest, self.trace, self.format, self.time_unit)

    def fitted(self) -> Any:
        """The trace's fitted :class:`~sim.traces.BurstyModel` (cached)."""
        return _fit_cached(self.digest, self.trace, self.format, self.time_unit)

    @property
    def slots(self) -> int:
        """Worker slots the trace offers (see :func:`trace_slots`)."""
        return trace_slots(self.load())

    @property
    def open_end(self) -> bool:
        """True for a dtsim CSV: after its last interval every worker stays up."""
        tr = self.load()
        return bool(tr.reuse and tr.nodes is not None)

    @property
    def duration(self) -> float:
        """Simulated time the replay covers (``inf`` with looping or an open end)."""
        if self.loop or self.open_end:
            return math.inf
        return (self.load().end - self.start) / self.speedup

    @property
    def instances(self) -> tuple[str, ...] | None:
        """The trace's instance names in order of first appearance (None for a count trace)."""
        tr = self.load()
        if tr.nodes is None:
            return None
        return tuple(dict.fromkeys(sp.node for sp in tr.nodes))

    def by_name(self, workers: Sequence[Sequence[Any]]) -> tuple[str | None, ...] | None:
        """The instance each worker replays when the trace's instances are named as the run's
        workers or hosts; None (slot ``k`` on worker ``k``) when none is.

        ``workers[k]`` are worker ``k``'s names (its own, its host's; names that are not
        text never match). A trace whose every instance name is among them is replayed by
        name: a worker replays the instance named as it (its first name that is one), or none
        (up throughout) if the trace has no instance of its names. Some of the instances
        named so and some not is refused in one line, and so is a replay that keeps no names
        (``model="fitted"``, ``resample="block"``) or that names a mapping policy (``random``,
        ``domain``, ``+tile``: a worker replays its own instance) of a trace named so.
        """
        inst = self.instances
        if inst is None:  # a count trace: no names
            return None
        known = {n for names in workers for n in names if isinstance(n, str)}
        hit = [n for n in inst if n in known]
        if not hit:
            return None
        miss = [n for n in inst if n not in known]
        check(not miss, "failure_trace", "a trace whose instances are all named as workers or "
              "hosts of the run (replayed by name) or none of them (replayed slot by slot)",
              f"{self.trace} ({len(hit)} of {len(inst)} instances named so, e.g. {hit[0]}; "
              f"not {', '.join(miss[:3])}{', ...' if len(miss) > 3 else ''})")
        check(self.model == "trace", "trace_model", "trace when its instances are named as the "
              "run's workers or hosts (replayed by name; a fitted trace has no names)",
              self.model)
        check(self.resample != "block", "trace_resample", "none or offset when the trace's "
              "instances are named as the run's workers or hosts (replayed by name; a block "
              "bootstrap keeps no names)", self.resample)
        check(not self.policy_parts[1], "trace_policy", "without +tile when the trace's "
              "instances are named as the run's workers or hosts (replayed by name: a worker "
              "replays its own instance, no copy of the trace is tiled)", self.policy)
        check(self.policy_parts[0] == "recent", "trace_policy", "recent (the default) when "
              "the trace's instances are named as the run's workers or hosts (replayed by name: "
              "a worker replays its own instance, no policy maps slots to workers)", self.policy)
        have = set(inst)
        return tuple(next((n for n in names if isinstance(n, str) and n in have), None)
                     for names in workers)

    def check_workers(self, workers: int, *, name: str = "workers") -> None:
        """Refuse more workers than slots unless the policy tiles."""
        if not self.policy_parts[1]:
            check(workers <= self.slots, name,
                  f"at most the trace's {self.slots} worker slots (or a +tile policy)", workers)

    def check_horizon(self, horizon: float, *, name: str = "horizon") -> None:
        """Refuse a simulated horizon beyond the replay's end."""
        d = self.duration
        check(horizon <= d * (1 + 1e-12), name,
              f"at most the trace's {d:g} simulated time units (or --trace-loop)", horizon)

    def exact_availability(self, workers: int, horizon: float) -> float | None:
        """The workers' mean up-fraction over ``[0, horizon]`` when the replay fixes it exactly.

        That is the trace's availability (count integral over slots times span)
        when every slot is replayed once (``workers`` equal to :attr:`slots`,
        or a whole multiple with ``+tile``), without resampling, over the whole
        trace from its start or over whole loops. None otherwise.
        """
        from .stats import integral

        tr = self.load()
        S, P = self.slots, tr.end
        copies, rem = divmod(workers, S)
        if (rem or (copies > 1 and not self.policy_parts[1]) or self.resample == "block"
                or self.model == "fitted"):
            return None
        span = horizon * self.speedup
        loops = span / P
        whole = (self.start == 0.0 and math.isclose(span, P, rel_tol=1e-12)) or (
            (self.loop or copies > 1 or self.resample == "offset")
            and math.isclose(loops, round(loops), rel_tol=1e-12) and round(loops) >= 1)
        if not whole:
            return None
        return integral(tr) / (S * P)

    def worker_intervals(self, workers: int, *, streams: Streams,
                         domain_of: Sequence[int] | None = None,
                         names: Sequence[str | None] | None = None) -> list[Iterator[Interval]]:
        """Down intervals in simulated time, one lazy iterator per worker.

        Parameters
        ----------
        workers : int
            Number of workers (checked against :attr:`slots`).
        streams : Streams
            The replication's streams: ``trace:policy`` for the random policy,
            ``trace:resample`` for offsets and blocks.
        domain_of : sequence of int, optional
            Failure domain of each worker (``domain`` policy).
        names : sequence of str or None, optional
            The instance each worker replays by name (:meth:`by_name`; None: up throughout);
            not given: slot ``k`` on worker ``k`` by the policy.

        Returns
        -------
        list of iterator
            Sorted, disjoint ``(start, end)`` intervals (``end`` may be ``inf``
            at an open end); zero-length ones are instantaneous outages.
        """
        if names is not None:
            check(len(names) == workers, "names", f"one per worker ({workers})", len(names))
            return self._named_intervals(names, streams)
        self.check_workers(workers)
        tr = self.load()
        leave, tile = self.policy_parts
        start = self.start
        if self.model == "fitted":
            tr = self.fitted().generate(tr.end, rng=streams.rng("trace:generate"))
        if self.resample == "block":
            tr = block_bootstrap(tr, float(self.block), rng=streams.rng("trace:resample"))  # type: ignore[arg-type]
        elif self.resample == "offset":
            start = float(streams.rng("trace:resample").uniform(0.0, tr.end))
        rng = streams.rng("trace:policy") if leave in ("random", "domain") else None
        S = self.slots  # the source's slots, also for a generated or bootstrapped trace
        dom = None if domain_of is None else list(domain_of)[:S]
        patterns = slot_patterns(tr, policy=leave, domain_of=dom, rng=rng, slots=S)
        P = tr.end
        copies = max(1, math.ceil(workers / S)) if tile else 1
        out = []
        for w in range(workers):
            m, slot = divmod(w, S)
            offset = (start + m * P / copies) % P if copies > 1 else start
            out.append(_replay(patterns[slot], P, offset, self.speedup,
                               loop=self.loop or copies > 1))
        return out


    def _named_intervals(self, names: Sequence[str | None],
                         streams: Streams) -> list[Iterator[Interval]]:
        """Each worker's instance's own down intervals (none for None), in simulated time."""
        tr = self.load()
        start = self.start
        if self.resample == "offset":
            start = float(streams.rng("trace:resample").uniform(0.0, tr.end))
        patterns = node_patterns(tr)
        return [_replay(patterns[n] if n is not None else (), tr.end, start, self.speedup,
                        loop=self.loop) for n in names]


def _replay(pattern: tuple[Interval, ...], P: float, offset: float, speedup: float, *,
            loop: bool) -> Iterator[Interval]:
    """Down intervals of one slot in simulated time, starting at trace time ``offset``.

    Without ``loop`` only the window ``[offset, P]`` is replayed; with it the
    pattern repeats with period ``P`` and an outage across the seam is one.
    """

    def raw() -> Iterator[Interval]:
        k = 0
        while True:
            base = k * P - offset
            for s, e in pattern:
                if base + e < 0 or (base + e == 0 and e > s):
                    continue  # over before simulated time 0
                yield max(base + s, 0.0) / speedup, (base + e) / speedup
            if not loop or not pattern:
                return
            k += 1

    pending: Interval | None = None
    for s, e in raw():
        if s == e == 0.0:
            continue  # a dip at the very start: the state at 0 is after every change at 0
        if pending is not None and s <= pending[1]:
            pending = (pending[0], max(pending[1], e))
            continue
        if pending is not None:
            yield pending
        pending = (s, e)
    if pending is not None:
        yield pending


class TraceEnded(SimulationError):
    """A simulation ran past the end of a replayed trace that does not loop."""


def end_guard(env: simpy.Environment, replay: TraceReplay):
    """A SimPy process that raises :class:`TraceEnded` once the run passes the replay's end
    (none if it never ends).

    Start it with ``env.process(end_guard(env, replay))`` next to the replayed
    workers, so that a run needing more time than the trace has stops with one
    clear line instead of silently keeping the last state. The trace covers its
    last instant (a run bounded at its duration is inclusive, its rows at the end
    included): the guard fires at the first time after it, ``nextafter(d)``.
    """
    d = replay.duration
    if math.isinf(d):
        return
    delay = math.nextafter(d, math.inf) - env.now
    while env.now + delay <= d:
        delay = math.nextafter(delay, math.inf)
    yield env.timeout(delay)
    raise TraceEnded(f"the failure trace {replay.trace!r} ended at simulated time {d:g}; "
                     "pass --trace-loop (trace_loop) or simulate less")


def attach(model: Any, replay: TraceReplay, workers: Sequence[tuple[str, Any]], *,
           streams: Streams, domain_of: Sequence[int] | None = None,
           names: Sequence[str | None] | None = None) -> list[Any]:
    """Add replayed workers to a :class:`sim.failures.FailureModel` (the plug-in API).

    Parameters
    ----------
    model : FailureModel
        Not started yet.
    replay : TraceReplay
    workers : sequence of (name, parent)
        The workers to add, in slot order (``parent`` a domain, its name, or None).
    streams : Streams
        The replication's streams.
    domain_of : sequence of int, optional
        Failure domain of each worker for the ``domain`` policy.
    names : sequence of str or None, optional
        The instance each worker replays by name (:meth:`TraceReplay.by_name`).

    Returns
    -------
    list of Worker
        The added workers; a guard process ends the run with :class:`TraceEnded`
        if it outlasts a trace that does not loop.
    """
    ivs = replay.worker_intervals(len(workers), streams=streams, domain_of=domain_of,
                                  names=names)
    out = [model.add_worker(name, parent, trace=iv)
           for (name, parent), iv in zip(workers, ivs, strict=True)]
    model.env.process(end_guard(model.env, replay))
    return out
