"""Timelines: the events an engine records as it runs, written in the Trace Event Format.

A run's engines call an explicit recorder (house convention 9) at the points
where they already know a start or an end: a pass that ends, a transfer that
arrives, a worker that goes down or comes back, a step, a checkpoint, a
restart. The recorder they hold by default is :data:`NULL`, whose ``on`` is
False and whose hooks do nothing, so a run without a timeline pays one
attribute test per hook. :class:`Recorder` keeps what the hooks hand it, in
simulated seconds, and writes it as one JSON object of the Trace Event Format
(the format of Chrome's ``about:tracing``, Perfetto, PyTorch's profiler):

* ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``,
  timestamps and durations in microseconds (one simulated second is
  ``1e6``);
* a process (``pid``) per worker, device, node or host, one for the
  coordinator of the run (``trainer`` or ``job``) and one for the network's
  counters, each named by a ``process_name`` metadata event;
* a thread (``tid``) per stream of a process -- ``steps``, ``compute``,
  ``send``, ``receive``, ``collective``, ``checkpoint``, ``events`` -- named by
  ``thread_name``; where events of one stream overlap in time (a pipeline
  replica serving several micro-batches at once, a node receiving from two
  peers) they are spread over lanes ``compute``, ``compute 2``, ... so that the
  events of one thread never overlap (what the viewers need);
* complete events (``ph: "X"``) for passes, transfers, collective chunks,
  steps, checkpoints, restarts and down intervals; instant events
  (``ph: "i"``) for preemptions, notices, skips, drops; counter events
  (``ph: "C"``) for each link's utilisation.

The event vocabulary is in ``docs/timeline.md``. :func:`validate` checks a
file against the format (required fields per phase, types, no negative
duration, metadata for every process and thread used, no overlap on a
thread); :func:`read_timeline` reads one back for ``dtsim plot --timeline``.

Bounds: a window ``[t0, t1]`` keeps the events that intersect it (whole), and
``max_events`` caps what is kept: events recorded past the cap are counted by
category and reported (``otherData.left_out``, and an instant event where the
cap was reached), never silently dropped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import (
    ConfigError,
    ascii_float,
    check,
    check_int,
    check_replaceable,
    head_bytes,
    read_input_text,
    tail_bytes,
    write_atomic,
)

__all__ = ["NULL", "NullRecorder", "Recorder", "TimelineRequest", "parse_window",
           "timeline_request", "validate", "read_timeline", "DEFAULT_MAX_EVENTS",
           "RUN_LIMIT_FACTOR", "check_run_size", "STREAMS", "US", "Gantt", "GanttRow", "GanttBar",
           "GanttStep", "gantt", "KINDS", "CoordinatorView"]

#: Microseconds per simulated second (the format's unit).
US = 1e6
#: Events a timeline keeps by default (``--timeline-max-events``).
DEFAULT_MAX_EVENTS = 1_000_000
#: A run whose estimated events exceed this many times the cap is refused before work.
RUN_LIMIT_FACTOR = 50
#: Largest timeline file ``dtsim plot --timeline`` reads.
MAX_TIMELINE_BYTES = 1 << 30
#: Streams (threads) of a process, in display order; others sort after them.
STREAMS = ("steps", "compute", "send", "receive", "collective", "checkpoint", "events")
_STREAM_ORDER = {s: k for k, s in enumerate(STREAMS)}

# ----------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class TimelineRequest:
    """What ``--timeline FILE`` asks: the file, the window and the cap (values only).

    Attributes
    ----------
    path : str
        The JSON file written (an existing file is overwritten).
    window : tuple of float
        ``(t0, t1)`` in simulated time units; events intersecting it are kept.
    max_events : int
        Events kept at most (metadata aside); the rest are counted as left out.
    replication : int
        The replication recorded (``--timeline-replication``; 0, the seed's first, by default).
    """

    path: str
    window: tuple[float, float] = (0.0, math.inf)
    max_events: int = DEFAULT_MAX_EVENTS
    replication: int = 0

    def recorder(self, **kw: Any) -> Recorder:
        """A fresh recorder with this window and cap."""
        return Recorder(window=self.window, max_events=self.max_events, **kw)


def parse_window(text: Any, name: str = "timeline_window") -> tuple[float, float]:
    """``"T0:T1"`` as ``(t0, t1)``: finite ``0 <= T0 < T1`` (``T1`` may be ``inf``; either
    side may be left empty for ``0`` and ``inf``).

    Raises
    ------
    ConfigError
        ``'timeline_window' must be T0:T1 with 0 <= T0 < T1: <text>``.
    """
    rule = "T0:T1 with 0 <= T0 < T1 (simulated time units; T1 may be inf)"
    s = str(text).strip()
    lo, sep, hi = s.partition(":")
    check(sep == ":", name, rule, text)
    try:
        t0 = ascii_float(lo) if lo.strip() else 0.0
        t1 = ascii_float(hi) if hi.strip() else math.inf
    except ValueError:
        raise ConfigError(name, rule, text) from None
    check(math.isfinite(t0) and t0 >= 0 and not math.isnan(t1) and t1 > t0, name, rule, text)
    return (t0, t1)


#: What every timeline dtsim writes begins with, and what its ``otherData`` always holds (the
#: summary's time unit): a file holding both is dtsim's own, which a later run may replace.
TIMELINE_HEAD = b'{"traceEvents":[\n'
TIMELINE_MARK = b'"time_unit":"simulated seconds, written as microseconds (1 s = 1e6)"'


def is_timeline_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a timeline dtsim wrote (:data:`TIMELINE_HEAD` first,
    :data:`TIMELINE_MARK` in its last MiB, where ``otherData`` is)."""
    p = Path(path)
    return head_bytes(p, len(TIMELINE_HEAD)) == TIMELINE_HEAD and TIMELINE_MARK in tail_bytes(
        p, 2**20)


def timeline_request(path: Any, window: Any = None, max_events: Any = None, *,
                     overwrite: bool = False) -> TimelineRequest | None:
    """The request of the CLI options (None without ``--timeline``), checked before any work.

    Raises
    ------
    ConfigError
        ``'timeline'`` for a path that cannot be written (a folder, a device,
        an unwritable place) or a file there that is not a timeline dtsim wrote (unless
        ``overwrite``: ``--overwrite``), ``'timeline_window'`` for a bad window,
        ``'timeline_max_events'`` for a cap below 1, and either of the two
        bounds given without ``--timeline``.
    """
    if path is None:
        check(window is None, "timeline_window", "given only with --timeline", window)
        check(max_events is None, "timeline_max_events", "given only with --timeline",
              max_events)
        return None
    p = check_replaceable("timeline", path, overwrite=overwrite, ours=is_timeline_file,
                          kind="a timeline")
    w = parse_window(window) if window is not None else (0.0, math.inf)
    cap = DEFAULT_MAX_EVENTS if max_events is None else check_int(
        "timeline_max_events", max_events, low=1, high=10**8)
    return TimelineRequest(str(p), w, cap)


def check_run_size(request: TimelineRequest, estimate: float, what: str) -> None:
    """Refuse, before any work, a run too large for a timeline.

    ``estimate`` is the run's events (its passes, transfers, exchanges...);
    a run of more than :data:`RUN_LIMIT_FACTOR` times the cap would leave out
    nearly everything it records, so it is refused in one line.

    Raises
    ------
    ConfigError
        ``'timeline' must be a run of at most N events ...``.
    """
    limit = RUN_LIMIT_FACTOR * request.max_events
    if estimate > limit:
        raise ConfigError("timeline", f"a run of at most {limit:.4g} events ({RUN_LIMIT_FACTOR} x "
                          f"--timeline-max-events {request.max_events}; shorten the run or raise "
                          "the cap)", f"about {estimate:.3g} {what}")


# ----------------------------------------------------------------------------- the recorders


class NullRecorder:
    """The recorder engines hold when no timeline is asked: ``on`` is False, hooks do nothing.

    Engines test ``rec.on`` before a hook in their hot paths, so a run without
    a timeline pays one attribute test there; elsewhere they may call the
    hooks directly.
    """

    on = False


#: A flow network's resource names: ``nic:N``, ``egress:N``, ``ingress:N``, ``U->V``, ``U-V``.
_RESOURCE = re.compile(r"^(?:(nic:|egress:|ingress:)(\d+)|(\d+)(->|-)(\d+))$")


def _nothing(*_a: Any, **_k: Any) -> None:
    return None


#: The recorder of a run without a timeline.
NULL = NullRecorder()

# args templates: values are formatted with % (ints %d, floats %r, pre-encoded JSON %s)
_PASS = '{"stage":%d,"replica":%d,"microbatch":%d,"step":%s,"recompute":%s,"lost":%s}'
_DEVICE_PASS = '{"stage":%d,"replica":%d,"microbatch":%d,"step":%s,"chunk":%d,"lost":%s}'
_XFER = '{"bytes":%r,"source":%s,"destination":%s,"microbatch":%d,"step":%s,"stage":%d,"cut":%s}'
_RING = '{"bytes":%r,"source":%s,"destination":%s,"bucket":%d,"ring_step":%d,"rank":%d}'
_FLOW = '{"flow":%d,"bytes":%r,"source":%s,"destination":%s,"requested":%r,"cut":%s}'
_EXCH = '{"bytes":%r,"source":%s,"destination":%s}'
# a framework hop whose messages are more than its tensor: the sum, then the parts
_XFER_PARTS = _XFER[:-1] + ',"tensor":%r,"metadata":%r,"mask":%r}'
_SERVE = '{"stage":%d,"replica":%d,"microbatch":%d,"lost":%s}'
_JSON_TRUE, _JSON_FALSE = "true", "false"


def _b(x: bool) -> str:
    return _JSON_TRUE if x else _JSON_FALSE


#: The suffix of a pass's name when a failure (or its lost step) cut it: the viewer shows
#: the lost work by name, beside ``args.lost``.
LOST_SUFFIX = " (lost)"


def _pass_name(back: bool, lost: bool) -> str:
    """A compute pass's event name: ``forward``/``backward``, `` (lost)`` appended if lost."""
    return ("backward" if back else "forward") + (LOST_SUFFIX if lost else "")


#: Spans per formatting call when writing (bounds the memory of one call).
_CHUNK = 50_000


class _Table:
    """Complete events of one category and one args template, in columns.

    ``vals`` is flat: each event's args values, ``k`` of them (the template's
    fields), one event after the other. Columns of numbers and strings only,
    so a large timeline holds no object the garbage collector must visit
    again and again while the run goes on.
    """

    __slots__ = ("cat", "template", "k", "proc", "thread", "name", "t0", "t1", "vals")

    def __init__(self, cat: str, template: str) -> None:
        self.cat, self.template = cat, template
        self.k = template.replace("%%", "").count("%")
        self.proc: list[str] = []
        self.thread: list[str] = []
        self.name: list[str] = []
        self.t0: list[float] = []
        self.t1: list[float] = []
        self.vals: list[Any] = []

    def __len__(self) -> int:
        return len(self.t0)

    def columns(self) -> tuple[list[str], list[str], list[float], list[float]]:
        """Every event's process, stream, start and end (for the layout of threads)."""
        return self.proc, self.thread, self.t0, self.t1

    def add(self, proc: str, thread: str, name: str, t0: float, t1: float, vals: tuple) -> None:
        self.proc.append(proc)
        self.thread.append(thread)
        self.name.append(name)
        self.t0.append(t0)
        self.t1.append(t1)
        self.vals.extend(vals)

    def text(self, pids: list[int], tids: list[int], q: Any) -> Iterable[str]:
        """The events as JSON text, in chunks (one ``%`` of the repeated template a chunk)."""
        fmt = ('{"name":%s,"cat":"' + self.cat + '","ph":"X","ts":%.4f,"dur":%.4f,"pid":%d,'
               '"tid":%d,"args":' + self.template + "}")
        k, m = self.k, self.k + 5
        qnames = {n: q(n) for n in set(self.name)}
        n = len(self.t0)
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            ts = np.round(np.asarray(self.t0[a:b], dtype=float) * US, 4)
            end = np.round(np.asarray(self.t1[a:b], dtype=float) * US, 4)
            flat: list[Any] = [None] * ((b - a) * m)
            flat[0::m] = [qnames[x] for x in self.name[a:b]]
            flat[1::m] = ts.tolist()
            flat[2::m] = (end - ts).tolist()
            flat[3::m] = pids[a:b]
            flat[4::m] = tids[a:b]
            vals = self.vals[a * k:b * k]
            for j in range(k):
                flat[5 + j::m] = vals[j::k]
            yield ",\n".join([fmt] * (b - a)) % tuple(flat)


class _PassTable:
    """The training DES's completed passes (the hot path), as they were when each ended:
    one flat list of 7-tuples ``(replica, backward, microbatch id, step index, target,
    t0, work)`` (``step index`` -1: no step; ``target`` >= 0 on a forward: a recomputation).

    One ``list.extend`` per pass, of atoms and the replica (an object the engine keeps
    anyway): nothing is allocated that the garbage collector would have to visit while
    the run goes on. Written grouped by replica, thread, kind and flags, so that the
    event's constant parts (name, pid, tid, stage, replica, flags) are in the template
    and only the times, the micro-batch and the step are formatted per pass.
    """

    __slots__ = ("data", "microbatches", "replica_of")
    cat = "compute"

    def __init__(self) -> None:
        self.data: list[Any] = []
        self.microbatches = 1
        #: a replica's index in its stage where it is not ``rep.index`` (DiLoCo: a group's
        #: replicas are indexed in their group; the names and args give the system's index)
        self.replica_of: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.data) // 7

    def columns(self) -> tuple[list[str], list[str], Any, Any]:
        d = self.data
        t0 = np.asarray(d[5::7], dtype=float)
        return [r.name for r in d[0::7]], ["compute"] * len(t0), t0, t0 + np.asarray(d[6::7])

    def text(self, pids: list[int], tids: list[int], q: Any) -> Iterable[str]:
        d = self.data
        n = len(d) // 7
        t0 = np.asarray(d[5::7], dtype=float)
        ts = np.round(t0 * US, 4)
        dur = np.round((t0 + np.asarray(d[6::7], dtype=float)) * US, 4) - ts
        back = np.asarray(d[1::7], dtype=np.int64)
        step = np.asarray(d[3::7], dtype=np.int64)
        mbi = np.asarray(d[2::7], dtype=np.int64)
        mbi = np.where(step >= 0, mbi % self.microbatches, mbi)
        rc = ((np.asarray(d[4::7], dtype=np.int64) >= 0) & (back == 0)).astype(np.int64)
        # a pass's process and thread are its replica's (pid, tid): with the kind and flags,
        # they fix everything but its times, micro-batch and step
        code = (((np.asarray(pids, dtype=np.int64) * 65536 + np.asarray(tids, dtype=np.int64))
                 * 2 + back) * 2 + rc) * 2 + (step < 0)
        order = np.argsort(code, kind="stable")
        cuts = np.concatenate(([0], np.flatnonzero(np.diff(code[order])) + 1, [n]))
        for a, b in zip(cuts[:-1], cuts[1:]):  # noqa: B905
            k0 = int(order[a])
            r = d[7 * k0]
            nostep = bool(step[k0] < 0)
            head = ('{"name":"' + ("backward" if back[k0] else "forward") + '","cat":"compute",'
                    '"ph":"X","ts":%.4f,"dur":%.4f,"pid":' + str(pids[k0]) + ',"tid":'
                    + str(tids[k0]) + ',"args":{"stage":' + str(r.stage) + ',"replica":'
                    + str(self.replica_of.get(r, r.index)) + ',"microbatch":%d,"step":'
                    + ("null" if nostep else "%d")
                    + ',"recompute":' + ("true" if rc[k0] else "false") + ',"lost":false}}')
            m = 3 if nostep else 4
            for c0 in range(a, b, _CHUNK):
                c1 = min(b, c0 + _CHUNK)
                idx = order[c0:c1]
                flat: list[Any] = [None] * ((c1 - c0) * m)
                flat[0::m] = ts[idx].tolist()
                flat[1::m] = dur[idx].tolist()
                flat[2::m] = mbi[idx].tolist()
                if not nostep:
                    flat[3::m] = step[idx].tolist()
                yield ",\n".join([head] * (c1 - c0)) % tuple(flat)


class Recorder(NullRecorder):
    """Keeps the events an engine hands it; writes them in the Trace Event Format.

    Parameters
    ----------
    window : (float, float)
        Events intersecting ``[t0, t1]`` are kept (whole); the rest are counted.
    max_events : int
        Events kept at most; the ones past the cap are counted by category.
    flows : bool
        Whether a flow engine's own flows are recorded (``dtsim network``), or
        only its links' utilisation (engines that record their transfers
        themselves).

    Notes
    -----
    The hooks take the engine's own objects and times; nothing here schedules
    an event, draws a number or changes an engine's state, so a run with a
    recorder gives the same numbers as a run without one.
    """

    on = True

    def __init__(self, *, window: tuple[float, float] = (0.0, math.inf),
                 max_events: int = DEFAULT_MAX_EVENTS, flows: bool = False) -> None:
        self.t_lo, self.t_hi = float(window[0]), float(window[1])
        self.max_events = int(max_events)
        self.flows = flows
        self.n = 0
        #: complete events by (category, args template), in columns (see :class:`_Table`)
        self._tables: dict[tuple[str, str], _Table] = {}
        self._passes = _PassTable()
        self._tables[("compute", "pass")] = self._passes  # type: ignore[assignment]
        self._i: list[tuple] = []  # (proc, thread, name, cat, t, args dict)
        self._c: list[tuple] = []  # (proc, name, t, value)
        self.left_out: dict[str, int] = {}
        self.left_from = math.inf
        self.outside = 0
        self._procs: dict[str, int] = {}
        self._json: dict[str, str] = {}
        self.microbatches = 1
        self.env: Any = None
        self.node_proc: dict[Any, str] = {}
        #: a replica's network node (written as the process's ``process_labels``)
        self.proc_node: dict[str, Any] = {}
        self._down: dict[str, tuple[float, str]] = {}
        self._spot: dict[str, float] = {}
        #: workers that went down (failure model) and spot preemptions, whole run (window
        #: and cap aside): what the command says of the recorded replication
        self.failures = {"down": 0, "preempted": 0}
        self._steps: dict[str, tuple[int, float]] = {}  # the step open on each coordinator
        #: its compute phase's args, once its passes have ended (step_computed)
        self._computed: dict[str, dict[str, Any]] = {}
        self._restart: float | None = None
        self._links: dict[int, float] = {}
        self._gossip_names: list[str] | None = None  # gossip's processes, by node position
        self._gossip_labels: list[str] | None = None  # a graph's own labels, by position
        self.meta: dict[str, Any] = {}

    # -- generic ------------------------------------------------------------------------
    def declare(self, names: Iterable[str]) -> None:
        """Give these processes the next pids, in this order (the rest come as first seen)."""
        for n in names:
            if n not in self._procs:
                self._procs[n] = len(self._procs) + 1

    def _keep(self, cat: str, t0: float, t1: float) -> bool:
        if t1 < self.t_lo or t0 > self.t_hi:
            self.outside += 1
            return False
        if self.n >= self.max_events:
            self.left_out[cat] = self.left_out.get(cat, 0) + 1
            if t0 < self.left_from:
                self.left_from = t0
            return False
        self.n += 1
        return True

    def _table(self, cat: str, template: str) -> _Table:
        t = self._tables.get((cat, template))
        if t is None:
            t = self._tables[(cat, template)] = _Table(cat, template)
        return t

    def span(self, proc: str, thread: str, name: str, cat: str, t0: float, t1: float,
             args: dict[str, Any] | None = None) -> None:
        """A complete event ``[t0, t1]`` on ``proc``'s ``thread`` (times in simulated units)."""
        if self._keep(cat, t0, t1):
            self._table(cat, "%s").add(proc, thread, name, t0, t1, (_args(args),))

    def _span(self, proc: str, thread: str, name: str, cat: str, t0: float, t1: float,
              template: str, values: tuple) -> None:
        if self._keep(cat, t0, t1):
            self._table(cat, template).add(proc, thread, name, t0, t1, values)

    def instant(self, proc: str, thread: str, name: str, cat: str, t: float,
                args: dict[str, Any] | None = None) -> None:
        """An instant event at ``t`` on ``proc``'s ``thread``."""
        if self._keep(cat, t, t):
            self._i.append((proc, thread, name, cat, t, args))

    def counter(self, proc: str, name: str, t: float, value: float) -> None:
        """A counter sample: ``name``'s ``value`` from ``t`` on (a series of ``proc``)."""
        if self._keep("network", t, t):
            self._c.append((proc, name, t, value))

    def _q(self, s: Any) -> str:
        """``s`` as a JSON string literal (cached: names repeat)."""
        out = self._json.get(s)
        if out is None:
            out = self._json[s] = json.dumps(str(s))
        return out

    # -- failures (the failure model's own transitions, through its listeners) -----------
    def watch_failures(self, workers: Sequence[Any], env: Any, names: Sequence[str] | None = None,
                       thread: str = "compute") -> None:
        """Record every down interval of ``workers`` (failure-model components, started):
        ``down`` spans (``cat`` failure) from their :meth:`~sim.failures.Component.on_change`
        transitions; one already down now opens its interval now."""
        self.env = env
        now = float(env.now)
        for k, w in enumerate(workers):
            name = names[k] if names is not None else w.name
            if not w.up:
                self._down[name] = (now, _cause(w))
                self.failures["down"] += 1
            w.on_change(self._changed(name, thread))

    def _changed(self, name: str, thread: str):
        def cb(comp: Any, up: bool, now: float) -> None:
            if not up:
                if name not in self._down:
                    self.failures["down"] += 1
                self._down[name] = (now, _cause(comp))
                return
            start = self._down.pop(name, None)
            if start is not None:
                self.span(name, thread, "down", "failure", start[0], now, {"cause": start[1]})
        return cb

    def watch_spot(self, listeners: list[Any], name: str, env: Any) -> None:
        """Record the preemptions of a spot slot (its ``listeners``: False at a preemption,
        True at the replacement): an instant ``preempted`` and a ``replacing`` span."""
        self.env = env

        def cb(up: bool) -> None:
            now = float(env.now)
            if not up:
                self._spot[name] = now
                self.failures["preempted"] += 1
                self.instant(name, "compute", "preempted", "preemption", now)
                return
            t0 = self._spot.pop(name, None)
            if t0 is not None:
                self.span(name, "compute", "replacing", "failure", t0, now)
        listeners.append(cb)

    def close(self, now: float) -> None:
        """The run ended at ``now``: intervals still open (down, replacing) end here, marked open."""
        for name, (t0, cause) in sorted(self._down.items()):
            self.span(name, "compute", "down", "failure", t0, now, {"cause": cause, "open": True})
        self._down.clear()
        for name, t0 in sorted(self._spot.items()):
            self.span(name, "compute", "replacing", "failure", t0, now, {"open": True})
        self._spot.clear()
        for proc, (k, t0) in self._steps.items():
            self.span(proc, "steps", f"step {k}", "step", t0, now,
                      {"step": k, "open": True, **self._computed.get(proc, {})})
        self._steps.clear()
        self._computed.clear()
        if self._restart is not None:
            self.span("trainer", "checkpoint", "restart", "restart", self._restart, now,
                      {"open": True})
            self._restart = None

    # -- the training DES (sim.training) ----------------------------------------------------
    def start_training(self, system: Any) -> None:
        """Wire to a built, started :class:`~sim.training.TrainingSystem` (the DES or the
        framework engine): its processes (``trainer``, then every replica stage-major), its
        workers' down intervals and its spot slots' preemptions (through their listeners)."""
        c = system.config
        self.env = system.env
        self.microbatches = self._passes.microbatches = c.microbatches
        reps = system.flow.replicas
        self.declare(["trainer", *(r.name for r in reps)])
        if c.network_nodes is not None:
            nodes: dict[Any, list[str]] = {}
            for r in reps:
                nodes.setdefault(c.network_nodes[r.stage][r.index], []).append(r.name)
                self.proc_node[r.name] = c.network_nodes[r.stage][r.index]
            self.node_proc = {n: "+".join(v) for n, v in nodes.items()}
        self.watch_failures(system.workers, system.env, [r.name for r in reps])
        for slot in system.spots:
            self.watch_spot(slot.listeners, slot.replica.name, system.env)
        self.meta.update(engine="training DES" if not c.framework else "training framework "
                         "engine", schedule=c.schedule, stages=c.stages,
                         microbatches=c.microbatches, steps=c.steps)

    def pass_done(self, rep: Any, mb: Any, t0: float, work: float) -> None:
        """A replica completed a pass of ``work`` started at ``t0`` (forward or backward)."""
        if self.n < self.max_events and t0 <= self.t_hi and t0 + work >= self.t_lo:
            self.n += 1
            st = mb.step
            self._passes.data.extend((rep, mb.back, mb.id, -1 if st is None else st.index,
                                      mb.target, t0, work))
        else:
            self._keep("compute", t0, t0 + work)  # counted: outside the window, or past the cap

    def pass_lost(self, rep: Any, mb: Any, t0: float, t1: float) -> None:
        """A replica's pass was interrupted at ``t1`` (a failure, or its step was lost)."""
        st = mb.step
        self._span(rep.name, "compute", _pass_name(mb.back, True), "compute", t0, t1,
                   _PASS, (rep.stage, self._passes.replica_of.get(rep, rep.index),
                           mb.id % self.microbatches if st is not None
                           else mb.id, "null" if st is None else st.index,
                           _b(mb.target >= 0 and not mb.back), _JSON_TRUE))

    def download(self, rep: Any, t0: float, t1: float, *, cut: bool = False) -> None:
        """A replica's weight download (after it came back), complete or cut by a failure
        (one of no time, without weights to move, is no event)."""
        if t1 <= t0:
            return
        self.span(rep.name, "receive", "weight download", "restart", t0, t1,
                  {"stage": rep.stage, "replica": self._passes.replica_of.get(rep, rep.index),
                   "cut": cut})

    def skip(self, mb: Any, stage: int, t: float, proc: str = "trainer") -> None:
        """A micro-batch skipped an out stage (``proc``: its coordinator)."""
        st = mb.step
        self.instant(proc, "events", "skip", "skip", t,
                     {"stage": stage, "microbatch": mb.id % self.microbatches if st is not None
                      else mb.id, "step": None if st is None else st.index})

    def drop(self, mb: Any, stage: int, t: float, proc: str = "trainer") -> None:
        """A micro-batch met an out stage with no skip and no wait left."""
        st = mb.step
        self.instant(proc, "events", "drop", "skip", t,
                     {"stage": stage, "microbatch": mb.id % self.microbatches if st is not None
                      else mb.id, "step": None if st is None else st.index})

    def notice(self, proc: str, t: float, at: float | None = None) -> None:
        """A preemption notice reached ``proc`` at ``t`` (for a preemption at ``at``)."""
        self.instant(proc, "compute", "preemption notice", "preemption", t,
                     None if at is None else {"at": at})

    def step_start(self, k: int, t: float, proc: str = "trainer") -> None:
        """Coordinator ``proc`` starts step ``k`` (an attempt: a restart may lose it)."""
        self._steps[proc] = (k, t)
        self._computed.pop(proc, None)

    def step_computed(self, t_compute: float, *, busy: float, workers: int, down: float = 0.0,
                      proc: str = "trainer") -> None:
        """The open step's passes ended at ``t_compute``: its compute phase (``busy``,
        ``workers``, ``down`` as :meth:`step_end` writes them), which the engine's
        ``bubble_fraction`` counts whatever follows; written on the step's event if a restart
        loses it in its sync or optimizer step (:meth:`step_lost`) or the run ends there."""
        args: dict[str, Any] = {"compute_end": t_compute, "busy": busy, "workers": workers}
        if down > 0:
            args["down"] = down
        self._computed[proc] = args

    def step_end(self, k: int, t_compute: float, t: float, *, sync: float = 0.0,
                 tail: float = 0.0, busy: float | None = None, workers: int | None = None,
                 down: float = 0.0, proc: str = "trainer") -> None:
        """Step ``k`` ended at ``t`` (its passes at ``t_compute``, then sync and optimizer);
        ``down``: worker-time of its workers not live in its compute phase (written when > 0)."""
        opened = self._steps.pop(proc, None)
        self._computed.pop(proc, None)
        t0 = opened[1] if opened is not None else t_compute
        args: dict[str, Any] = {"step": k, "compute_end": t_compute}
        if busy is not None:
            args["busy"] = busy
            args["workers"] = workers
            if down > 0:
                args["down"] = down
        self.span(proc, "steps", f"step {k}", "step", t0, t, args)
        if t > t_compute:
            self.span(proc, "collective", "gradient sync", "collective", t_compute, t,
                      {"step": k, "allreduce": sync, "optimizer": tail})

    def step_lost(self, t: float, proc: str = "trainer") -> None:
        """The step in progress was lost at ``t`` (a restart from the last checkpoint, a
        DiLoCo group down); lost after its passes, its event carries its compute phase
        (:meth:`step_computed`)."""
        opened = self._steps.pop(proc, None)
        computed = self._computed.pop(proc, {})
        if opened is not None:
            k, t0 = opened
            self.span(proc, "steps", f"step {k} (lost)", "step", t0, t,
                      {"step": k, "lost": True, **computed})

    def checkpoint(self, t0: float, t1: float, proc: str = "trainer", **args: Any) -> None:
        """A checkpoint from ``t0`` to ``t1``."""
        self.span(proc, "checkpoint", "checkpoint", "checkpoint", t0, t1, args or None)

    def restart_start(self, t: float) -> None:
        """The coordinator starts a restart at ``t`` (closed by :meth:`restart`, or by
        :meth:`close` if the run ends first)."""
        self._restart = t

    def restart(self, t0: float, t1: float, proc: str = "trainer", **args: Any) -> None:
        """A restart (waiting for the workers, then its cost) from ``t0`` to ``t1``."""
        self._restart = None
        self.span(proc, "checkpoint", "restart", "restart", t0, t1, args or None)

    # -- training traffic (sim.training.traffic, sim.network) ---------------------------------
    def hop(self, src: str, dst: str, name: str, sent: float, t0: float | None, t1: float,
            size: float, mb: int, step: int | None, stage: int, *, cut: bool = False,
            parts: tuple[float, float, float] | None = None) -> None:
        """A point-to-point transfer of a micro-batch's activations or gradients (``name``)
        from process ``src`` to ``dst``, handed to the traffic at ``sent``, moving from ``t0``
        (when it left its FIFO channel's queue; None: it never did) to ``t1`` (its arrival,
        or the failure that cut it): a ``transfer`` span on both ends, and the wait in the
        channel, if any, as a ``queue`` span on the sender (a wait the file cannot show, under
        its 0.1 ns, is none: the float residue of two ways to one time). ``parts``: the
        tensor, metadata and mask bytes ``size`` sums, named in the span's args."""
        vals = (size, self._q(src), self._q(dst), mb, "null" if step is None else step, stage,
                _b(cut))
        fmt = _XFER
        if parts is not None:
            fmt, vals = _XFER_PARTS, (*vals, *parts)
        q1 = t1 if t0 is None else t0
        if q1 > sent and round(q1 * US, 4) > round(sent * US, 4):
            self._span(src, "send", f"{name} (queued)", "queue", sent, q1, fmt, vals)
        if t0 is not None:
            self._span(src, "send", name, "transfer", t0, t1, fmt, vals)
            self._span(dst, "receive", name, "transfer", t0, t1, fmt, vals)

    def p2p(self, x: Any, t1: float, *, cut: bool = False) -> None:
        """A transfer between two replica servers arrived (or was cut) at ``t1``: ``x`` (the
        adapter's) was handed over at ``x.t_sent`` and moved from ``x.t0`` (None: it was
        still queued in its channel)."""
        mb = x.mb
        st = mb.step
        self.hop(x.src.name, x.dst.name, "gradient" if mb.back else "activation", x.t_sent,
                 x.t0, t1, x.size, mb.id % self.microbatches if st is not None else mb.id,
                 None if st is None else st.index, x.dest_stage, cut=cut)

    def bucket(self, reps: Sequence[Any], stage: int, b: int, size: float, step: int | None,
               t0: float, t1: float) -> None:
        """Bucket ``b`` of stage ``stage``'s gradient all-reduce overlapped with the backward
        pass (``size`` per rank) ran from ``t0`` to ``t1`` among replicas ``reps``."""
        n = len(reps)
        for r in reps:
            self.span(r.name, "collective", "all-reduce bucket", "collective", t0, t1,
                      {"bytes": size, "bucket": b, "stage": stage, "participants": n,
                       "step": step})

    def ring_chunk(self, src: Any, dst: Any, size: float, bucket: int, step: int, rank: int,
                   t0: float, t1: float) -> None:
        """One chunk of a ring all-reduce moved from node ``src`` to node ``dst``."""
        a, b = self.node_proc.get(src, f"host {src}"), self.node_proc.get(dst, f"host {dst}")
        self._span(a, "collective", "all-reduce chunk", "collective", t0, t1, _RING,
                   (size, self._q(a), self._q(b), bucket, step, rank))

    def flow_done(self, engine: Any, f: int, t: float, *, cut: bool = False) -> None:
        """A flow of a flow engine finished (or was cut) at ``t`` (``dtsim network``)."""
        if not self.flows:
            return
        net = engine.network
        a = self.node_proc.get(net.nodes[engine.f_src[f]], f"host {net.nodes[engine.f_src[f]]}")
        b = self.node_proc.get(net.nodes[engine.f_dst[f]], f"host {net.nodes[engine.f_dst[f]]}")
        vals = (f, engine.f_size[f], self._q(a), self._q(b), engine.f_start[f], _b(cut))
        t0 = engine.f_start[f]
        self._span(a, "send", f"flow {f}", "transfer", t0, t, _FLOW, vals)
        self._span(b, "receive", f"flow {f}", "transfer", t0, t, _FLOW, vals)

    def link_load(self, engine: Any, resources: Iterable[int], t: float) -> None:
        """The rates on ``resources`` changed at ``t``: a counter sample of each one's
        utilisation (the sum of its flows' rates over its capacity) where it changed."""
        cap, res_flows, f_res, f_coef, f_rate = (engine.cap, engine.res_flows, engine.f_res,
                                                  engine.f_coef, engine.f_rate)
        names = engine.network.resource_names
        last = self._links
        for r in resources:
            c = cap[r]
            if not (c > 0 and math.isfinite(c)):
                continue
            load = 0.0
            for f in res_flows[r]:
                for rr, a in zip(f_res[f], f_coef[f], strict=True):
                    if rr == r:
                        load += f_rate[f] * a
                        break
            u = load / c
            if last.get(r) != u:
                last[r] = u
                self.counter("network", self._link_name(str(names[r])), t, u)

    def _link_name(self, name: str) -> str:
        """A flow network's resource name with gossip's node positions (its flow network's
        nodes) as the graph's own labels (``eu-a->sw-eu``, not ``2->0``)."""
        labels = self._gossip_labels
        if labels is None:
            return name
        m = _RESOURCE.match(name)
        if m is None:
            return name
        kind, node, a, sep, b = m.groups()
        if kind:
            return f"{kind}{labels[int(node)]}"
        return f"{labels[int(a)]}{sep}{labels[int(b)]}"

    # -- the framework engine (sim.training.framework) ----------------------------------------
    def device_pass(self, dev: Any, back: bool, stage: int, chunk: int, mb: Any, t0: float,
                    t1: float, *, lost: bool = False) -> None:
        """A framework device's compute pass (a model ``stage``, ``chunk`` of the device)."""
        st = mb.step
        self._span(dev.name, "compute", _pass_name(back, lost), "compute", t0, t1,
                   _DEVICE_PASS, (stage, dev.index, mb.id % self.microbatches,
                                  "null" if st is None else st.index, chunk, _b(lost)))

    def device_gather(self, dev: Any, stage: int, mb: Any, t0: float, t1: float, *,
                      lost: bool = False) -> None:
        """A framework device's all-gather of its output before it receives the gradient
        (DeepSpeed 0.3.13), on its compute thread."""
        st = mb.step
        self._span(dev.name, "compute", "all-gather" + (LOST_SUFFIX if lost else ""), "compute",
                   t0, t1, _DEVICE_PASS, (stage, dev.index, mb.id % self.microbatches,
                                          "null" if st is None else st.index, 0, _b(lost)))

    def framework_hop(self, flow: Any, grad: bool, hop: int, i: int, k: int, sent: float,
                      t0: float | None, t1: float, *, cut: bool = False) -> None:
        """A framework transfer over ``hop`` (between model stages ``hop`` and ``hop + 1``) of
        pipeline ``k``'s ``i``-th micro-batch, activation or gradient (``grad``), handed over
        at ``sent`` and moving from ``t0`` (None: still queued) to ``t1`` (its arrival, or
        the lost step that ``cut`` it)."""
        L = flow.L
        a, b = (hop + 1, hop) if grad else (hop, hop + 1)
        src, dst = flow.stages[a % L][k].name, flow.stages[b % L][k].name
        # the tensor (the gradient's own size) and the messages of their own sent with it:
        # the partition metadata before each part, with an activation the masks after them
        tensor, meta, mask = flow.config.hop_bytes(hop, k, grad)
        st = flow.trainer.step
        self.hop(src, dst, "gradient" if grad else "activation", sent, t0, t1,
                 float(tensor + meta + mask), k + i * flow.r, None if st is None else st.index,
                 b, cut=cut,
                 parts=(float(tensor), float(meta), float(mask)) if meta or mask else None)

    # -- Study A's pipeline DES (sim.pipeline.des) ---------------------------------------------
    def serve(self, mb: int, stage: int, replica: int, t0: float, compute: float, hop: float,
              *, lost_at: float | None = None) -> None:
        """A pipeline replica served micro-batch ``mb`` (its compute, then the hop onward)."""
        proc = f"s{stage}r{replica}"
        t1 = t0 + compute if lost_at is None else lost_at
        if compute > 0 or lost_at is not None:
            self._span(proc, "compute", _pass_name(False, lost_at is not None), "compute", t0, t1,
                       _SERVE, (stage, replica, mb, _b(lost_at is not None)))
        if hop > 0 and lost_at is None:
            self._span(proc, "send", "activation", "transfer", t1, t1 + hop, _SERVE,
                       (stage, replica, mb, _JSON_FALSE))

    def start_pipeline(self, pipe: Any) -> None:
        """Wire to a built, started :class:`~sim.pipeline.des.Pipeline`: its processes
        (``pipeline``, then every replica worker ``s{j}r{i}``) and down intervals."""
        c = pipe.config
        self.env = pipe.env
        self.declare(["pipeline", *(w.name for w in pipe.workers)])
        self.watch_failures(pipe.workers, pipe.env)
        self.meta.update(engine="pipeline DES", stages=c.stages, microbatches=c.microbatches)

    def snapshot_skips(self, pipe: Any, mb: int, t: float) -> None:
        """A zero-time crossing at ``t``: a ``skip`` at each of the first ``s`` out stages it
        meets (the pipeline's live sets now, the state the crossing reads)."""
        k = 0
        for j, live in enumerate(pipe.live):
            if not live:
                if k == pipe.s:
                    return
                k += 1
                self.pipeline_event("skip", mb, j, t)

    def pipeline_event(self, name: str, mb: int, stage: int | None, t: float) -> None:
        """An instant of the pipeline DES: ``failover``, ``skip``, ``wait`` or ``drop``."""
        self.instant("pipeline", "events", name, "skip" if name != "failover" else "failure", t,
                     {"microbatch": mb, "stage": stage})

    # -- DiLoCo (sim.training.outer) -----------------------------------------------------------
    def start_diloco(self, system: Any) -> None:
        """Wire to a built :class:`~sim.training.outer.DilocoSystem`: its processes (``outer``,
        then each group's coordinator ``group g``, then every replica stage-major), its
        workers' down intervals and its spot slots' preemptions."""
        c, spec = system.config, system.spec
        self.env = system.env
        self.microbatches = self._passes.microbatches = c.microbatches
        reps = system.reps
        seen: dict[int, int] = {}  # stage-major: a stage's replicas in the system's order
        for r in reps:
            self._passes.replica_of[r] = seen[r.stage] = seen.get(r.stage, -1) + 1
        self.declare(["outer", *(f"group {g}" for g in range(system.M)),
                      *(r.name for r in reps)])
        if c.network_nodes is not None:
            nodes: dict[Any, list[str]] = {}
            for r in reps:
                nodes.setdefault(system.node_of(r), []).append(r.name)
                self.proc_node[r.name] = system.node_of(r)
            self.node_proc = {n: "+".join(v) for n, v in nodes.items()}
        self.watch_failures(system.workers, system.env, [r.name for r in reps])
        for slot in system.spots:
            self.watch_spot(slot.listeners, slot.replica.name, system.env)
        self.meta.update(engine="training DES (DiLoCo)", schedule=c.schedule, stages=c.stages,
                         microbatches=c.microbatches, steps=c.steps, groups=system.M,
                         every=spec.every, fragments=spec.fragments, overlap=spec.overlap,
                         coordinators={f"group {tr.group}": [r.name for r in tr.flow.replicas]
                                       for tr in system.trainers})

    def outer_sync(self, key: int, fragment: int, groups: Sequence[int],
                   replicas: Sequence[Any], sizes: Sequence[float], t0: float,
                   t1: float, payloads: Sequence[float] | None = None, *,
                   aborted: bool = False) -> None:
        """An outer all-reduce (round or step ``key``, fragment ``fragment``) among
        ``groups`` ran from ``t0`` to ``t1``: a span on ``outer`` and on each of its
        ``replicas``' collective stream (``sizes``: each stage's part, in size units;
        ``payloads``: the same on the wire, after ``bits`` and ``topk``; ``aborted``: a
        member went down during it, at ``t1``, and it stopped there)."""
        wire = sizes if payloads is None else payloads
        args = {"key": key, "fragment": fragment, "groups": list(groups),
                "bytes": float(sum(sizes)), "payload": float(sum(wire))}
        tail = ""
        if aborted:
            args["aborted"] = True
            tail = " aborted"
        self.span("outer", "collective", f"outer sync {key}{tail}", "collective", t0, t1, args)
        for r in replicas:
            a = {"key": key, "fragment": fragment, "stage": r.stage,
                 "bytes": sizes[r.stage], "payload": wire[r.stage]}
            if aborted:
                a["aborted"] = True
            self.span(r.name, "collective", f"outer all-reduce{tail}", "collective", t0, t1, a)

    def outer_wait(self, group: int, t0: float, t1: float) -> None:
        """Group ``group`` waited for an outer sync (or its round) from ``t0`` to ``t1``."""
        if t1 > t0:
            self.span(f"group {group}", "collective", "outer wait", "collective", t0, t1,
                      {"group": group})

    def group_download(self, group: int, missed: int | None, t0: float, t1: float, *,
                       cut: bool = False, open: bool = False) -> None:  # noqa: A002
        """Group ``group`` fetched the model (``missed`` None) or ``missed`` outer steps
        (``cut``: a failure stopped it; ``open``: the run ended first)."""
        args: dict[str, Any] = {"group": group, "missed": missed, "cut": cut}
        if open:
            args["open"] = True
        self.span(f"group {group}", "receive", "model download" if missed is None else
                  "outer steps download", "restart", t0, t1, args)

    def group_lost(self, group: int, t: float) -> None:
        """Group ``group`` lost a stage at ``t``: it leaves its round."""
        self.instant(f"group {group}", "events", "group lost", "failure", t, {"group": group})

    # -- gossip (sim.gossip) -------------------------------------------------------------------
    def exchange(self, i: int, j: int, t0: float, t1: float, size: float) -> None:
        """Node ``i`` started an exchange with ``j`` at ``t0``; it is delivered at ``t1``."""
        names = self._gossip_names
        a, b = (f"node {i}", f"node {j}") if names is None else (names[i], names[j])
        vals = (size, self._q(a), self._q(b))
        self._span(a, "send", "exchange", "transfer", t0, t1, _EXCH, vals)
        self._span(b, "receive", "exchange", "transfer", t0, t1, _EXCH, vals)

    def exchange_flows(self, ev_ij: Any, ev_ji: Any, i: int, j: int, t0: float,
                       size: float) -> None:
        """An exchange as two flows on a network (``i`` to ``j`` and back), each recorded on
        both ends when it arrives (callbacks that read the clock)."""
        for ev, a, b in ((ev_ij, i, j), (ev_ji, j, i)):
            def done(_e: Any, a: int = a, b: int = b) -> None:
                self.exchange(a, b, t0, float(self.env.now), size)
            ev.callbacks.append(done)

    def start_gossip(self, system: Any) -> None:
        """Wire to a built gossip engine (``async`` or ``edge``): a process per node, and the
        nodes' down intervals under churn."""
        self.env = system.env
        # a graph's own node labels name its processes and links (a graph file's hosts),
        # positions where the labels are the positions
        g = system.net.graph
        labels = list(g.nodes()) if g is not None else list(range(system.n))
        if labels != list(range(system.n)):
            self._gossip_labels = [str(x) for x in labels]
        self._gossip_names = [f"node {x}" for x in labels]
        self.declare(self._gossip_names)
        if system._workers is not None:
            self.watch_failures(system._workers, system.env, self._gossip_names)
        c = system.cfg
        self.meta.update(engine=f"gossip {c.protocol} DES", nodes=system.n, rounds=c.rounds)

    def edge_steps(self, ii: Sequence[int], jj: Sequence[int], t0: float, dt: float) -> None:
        """The edge protocol's steps, each ``dt`` long, in order from ``t0``."""
        for k, (i, j) in enumerate(zip(ii, jj, strict=True)):
            s = t0 + k * dt
            self.exchange(i, j, s, s + dt, 0.0)

    # -- the step-level job engine (sim.training.strategies.job) ------------------------------
    def start_job(self, job: Any) -> None:
        """Wire to a built, started :class:`~sim.training.strategies.JobSystem`: its
        processes (``job``, then every worker), down intervals and spot preemptions."""
        c = job.config
        self.env = job.env
        self.microbatches = c.microbatches
        self.declare(["job", *(w.name for w in job.workers)])
        self.watch_failures(job.fm_workers, job.env, [w.name for w in job.workers])
        for w, listeners in zip(job.workers, job._spot_listeners, strict=True):
            if c.mtbf < math.inf:
                self.watch_spot(listeners, w.name, job.env)
        self.meta.update(engine="step-level job engine", strategy=job.strategy.describe(),
                         stages=c.stages, steps=c.steps)

    def job_step(self, job: Any, t0: float, t1: float) -> None:
        """A step of the job completed on its formation's workers."""
        k = job.steps
        self.span("job", "steps", f"step {k}", "step", t0, t1, {"step": k})
        f = job.formation
        if f is None:
            return
        for p, pipe in enumerate(f.pipelines):
            for s, w in enumerate(pipe):
                self._span(job.workers[w].name, "compute", "step", "compute", t0, t1, _SERVE,
                           (s, p, k, _JSON_FALSE))

    def job_lost(self, t0: float, t1: float, work: float, step: int) -> None:
        """The job lost ``work`` (the steps since the last commit and the one in progress,
        ``step``: the Gantt chart labels the loss by it)."""
        self.span("job", "steps", "lost step", "step", t0, t1,
                  {"step": step, "lost": True, "work": work})

    def job_hold(self, kind: str, t0: float, t1: float, ok: bool) -> None:
        """A restart or checkpoint of the job (``ok`` False: a participant was lost meanwhile)."""
        if t1 <= t0:
            return
        self.span("job", "checkpoint", kind, "checkpoint" if kind == "checkpoint" else "restart",
                  t0, t1, {"completed": ok})

    def job_wait(self, t0: float, t1: float) -> None:
        """The job waited for enough ready workers."""
        self.span("job", "steps", "waiting for workers", "restart", t0, t1)

    # -- writing -------------------------------------------------------------------------------
    def _layout(self) -> tuple[dict[tuple[str, str], int], np.ndarray, np.ndarray]:
        """Every span's thread group (its process and stream) and lane, in table order.

        Within a group the spans are taken by start; each goes to the first
        lane free at its start, so that no two spans of one lane (one thread
        of the file) overlap.

        Returns
        -------
        (groups, gid, lane)
            ``groups`` maps (process, stream) to its group index; ``gid`` and
            ``lane`` hold every span's group and lane, the tables one after
            the other in :attr:`_tables` order.
        """
        groups: dict[tuple[str, str], int] = {}
        gl, t0l, t1l = [], [], []
        for T in self._tables.values():
            proc, thread, a, b = T.columns()
            for key in dict.fromkeys(zip(proc, thread, strict=True)):
                groups.setdefault(key, len(groups))
            gl.append(np.fromiter(map(groups.__getitem__, zip(proc, thread, strict=True)),
                                  dtype=np.int64, count=len(a)))
            t0l.append(np.asarray(a, dtype=float))
            t1l.append(np.asarray(b, dtype=float))
        if not gl:
            return groups, np.zeros(0, np.int64), np.zeros(0, np.int64)
        gid = np.concatenate(gl)
        t0 = np.concatenate(t0l)
        t1 = np.concatenate(t1l)
        order = np.lexsort((t1, t0, gid))
        sg, s0, s1 = gid[order], t0[order], t1[order]
        lane_sorted = np.zeros(len(order), dtype=np.int64)
        cuts = np.flatnonzero(np.diff(sg)) + 1
        bounds = np.concatenate(([0], cuts, [len(sg)]))
        for a, b in zip(bounds[:-1], bounds[1:]):  # noqa: B905
            if b - a < 2:
                continue
            reach = np.maximum.accumulate(s1[a:b - 1])
            if np.all(s0[a + 1:b] >= reach):
                continue  # one lane: nothing overlaps (the usual case)
            ends: list[float] = []
            for k in range(a, b):
                x0 = s0[k]
                for lane, end in enumerate(ends):
                    if end <= x0:
                        ends[lane] = s1[k]
                        lane_sorted[k] = lane
                        break
                else:
                    lane_sorted[k] = len(ends)
                    ends.append(s1[k])
        lane = np.empty_like(lane_sorted)
        lane[order] = lane_sorted
        return groups, gid, lane

    def lines(self, other: dict[str, Any] | None = None) -> Iterable[str]:
        """The JSON text of the timeline, in pieces (see :meth:`write`).

        Timestamps and durations are in microseconds rounded to 1e-4 (0.1 ns of
        simulated time; a span's duration is the difference of its rounded
        ends, so spans that touch in the run touch in the file). Events come
        in no particular order (the format sets none; viewers sort).
        """
        groups, gid, lane = self._layout()
        nlanes = np.zeros(len(groups), dtype=np.int64)
        if len(gid):
            np.maximum.at(nlanes, gid, lane + 1)
        procs = dict(self._procs)
        for p, _ in groups:
            procs.setdefault(p, len(procs) + 1)
        for e in self._i:
            procs.setdefault(e[0], len(procs) + 1)
        for e in self._c:
            procs.setdefault(e[0], len(procs) + 1)
        threads: dict[str, set[tuple[str, int]]] = {}
        for (p, s), g in groups.items():
            threads.setdefault(p, set()).update((s, k) for k in range(int(nlanes[g])))
        for e in self._i:
            threads.setdefault(e[0], set()).add((e[1], 0))
        note_proc = None
        if self.left_out:
            note_proc = "timeline"
            procs.setdefault(note_proc, len(procs) + 1)
            threads.setdefault(note_proc, set()).add(("events", 0))
        tids: dict[tuple[str, str, int], int] = {}
        meta = []
        q = self._q
        for p, pid in sorted(procs.items(), key=lambda kv: kv[1]):
            meta.append(f'{{"name":"process_name","ph":"M","ts":0,"pid":{pid},'
                        f'"args":{{"name":{q(p)}}}}}')
            meta.append(f'{{"name":"process_sort_index","ph":"M","ts":0,"pid":{pid},'
                        f'"args":{{"sort_index":{pid}}}}}')
            if p in self.proc_node:  # the network node a replica runs on (a named host)
                meta.append(f'{{"name":"process_labels","ph":"M","ts":0,"pid":{pid},'
                            f'"args":{{"labels":{q(str(self.proc_node[p]))}}}}}')
            for k, (s, ln) in enumerate(sorted(threads.get(p, ()), key=lambda sl: (
                    _STREAM_ORDER.get(sl[0], len(STREAMS)), sl[0], sl[1]))):
                tid = k + 1
                tids[(p, s, ln)] = tid
                label = s if ln == 0 else f"{s} {ln + 1}"
                meta.append(f'{{"name":"thread_name","ph":"M","ts":0,"pid":{pid},"tid":{tid},'
                            f'"args":{{"name":{q(label)}}}}}')
                meta.append(f'{{"name":"thread_sort_index","ph":"M","ts":0,"pid":{pid},'
                            f'"tid":{tid},"args":{{"sort_index":{tid}}}}}')
        yield '{"traceEvents":[\n'
        yield ",\n".join(meta)
        # every span's pid and tid, from its group and lane (vectorised)
        width = int(nlanes.max()) if len(nlanes) else 0
        pid_of = np.zeros(len(groups), dtype=np.int64)
        tid_of = np.zeros((len(groups), max(width, 1)), dtype=np.int64)
        for (p, s), g in groups.items():
            pid_of[g] = procs[p]
            for ln in range(int(nlanes[g])):
                tid_of[g, ln] = tids[(p, s, ln)]
        pids = pid_of[gid].tolist()
        tidl = tid_of[gid, lane].tolist()
        at = 0
        for T in self._tables.values():
            n = len(T)
            if n == 0:
                continue
            for piece in T.text(pids[at:at + n], tidl[at:at + n], q):
                yield ",\n"
                yield piece
            at += n
        body = []
        for p, s, name, cat, t, args in self._i:
            body.append(f'{{"name":{q(name)},"cat":"{cat}","ph":"i","s":"t",'
                        f'"ts":{round(t * US, 4):.4f},"pid":{procs[p]},"tid":{tids[(p, s, 0)]},'
                        f'"args":{_args(args)}}}')
        for p, name, t, v in self._c:
            body.append(f'{{"name":{q(name)},"cat":"network","ph":"C","ts":{round(t * US, 4):.4f},'
                        f'"pid":{procs[p]},"args":{{"utilisation":{v!r}}}}}')
        if note_proc is not None:
            total = sum(self.left_out.values())
            note = _args({"left_out": dict(sorted(self.left_out.items())),
                          "max_events": self.max_events})
            body.append(f'{{"name":{q(f"cap reached: {total} events left out")},'
                        f'"cat":"timeline","ph":"i","s":"g","ts":{round(self.left_from * US, 4):.4f},'
                        f'"pid":{procs[note_proc]},"tid":{tids[(note_proc, "events", 0)]},'
                        f'"args":{note}}}')
        if body:
            yield ",\n"
            yield ",\n".join(body)
        od = dict(self.meta)
        od.update(self.summary())
        if other:
            od.update(other)
        yield f'\n],"displayTimeUnit":"ms","otherData":{_args(od)}}}\n'

    def summary(self) -> dict[str, Any]:
        """What was kept and what was not: ``events``, ``left_out`` (by category), the time
        the cap was reached, ``outside_window``, ``window`` and ``max_events``."""
        return {"time_unit": "simulated seconds, written as microseconds (1 s = 1e6)",
                "events": self.n, "max_events": self.max_events,
                "window": [self.t_lo, None if math.isinf(self.t_hi) else self.t_hi],
                "outside_window": self.outside,
                "left_out": dict(sorted(self.left_out.items())),
                "left_out_from": None if math.isinf(self.left_from) else self.left_from}

    def to_json(self, other: dict[str, Any] | None = None) -> str:
        """The whole file as one string."""
        return "".join(self.lines(other))

    def write(self, path: str | os.PathLike[str], other: dict[str, Any] | None = None) -> Path:
        """Write the timeline to ``path`` (replaced atomically, its folder made if missing); the
        path.

        A write that fails or a crash midway leaves the file that was there whole (an error,
        not a torn file): :func:`sim.errors.write_atomic`.
        """
        return write_atomic(path, self.lines(other))

    def trace(self, other: dict[str, Any] | None = None) -> dict[str, Any]:
        """The timeline as the parsed JSON object (what :meth:`write` writes)."""
        return json.loads(self.to_json(other))


# The null recorder answers every hook of the recorder with a no-op (a class attribute: the
# lookup an engine pays when no timeline is asked is a plain one).
for _name, _hook in list(vars(Recorder).items()):
    if callable(_hook) and not _name.startswith("_") and _name not in vars(NullRecorder):
        setattr(NullRecorder, _name, _nothing)
del _name, _hook


class CoordinatorView:
    """The run's recorder as one of several coordinators sees it (a DiLoCo group's trainer):
    its steps, skips and drops on process ``proc`` instead of ``trainer``, every other hook
    the recorder's own.

    Parameters
    ----------
    recorder : Recorder
        The run's recorder (on).
    proc : str
        The coordinator's process (declared by the engine's ``start_*`` hook).
    """

    on = True

    def __init__(self, recorder: Recorder, proc: str) -> None:
        self._rec = recorder
        self.proc = proc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rec, name)

    def step_start(self, k: int, t: float) -> None:
        self._rec.step_start(k, t, proc=self.proc)

    def step_end(self, k: int, t_compute: float, t: float, **kw: Any) -> None:
        self._rec.step_end(k, t_compute, t, proc=self.proc, **kw)

    def step_computed(self, t_compute: float, **kw: Any) -> None:
        self._rec.step_computed(t_compute, proc=self.proc, **kw)

    def step_lost(self, t: float) -> None:
        self._rec.step_lost(t, proc=self.proc)

    def skip(self, mb: Any, stage: int, t: float) -> None:
        self._rec.skip(mb, stage, t, proc=self.proc)

    def drop(self, mb: Any, stage: int, t: float) -> None:
        self._rec.drop(mb, stage, t, proc=self.proc)


def _cause(comp: Any) -> str:
    """What took a failure-model component down: itself, or the nearest domain that is down."""
    if not comp.own_up:
        return comp.name
    p = comp.parent
    while p is not None:
        if not p.up and (p.parent is None or p.parent.up):
            return p.name
        p = p.parent
    return comp.name


def _args(d: Any) -> str:
    if d is None:
        return "{}"
    return json.dumps(d, separators=(",", ":"), allow_nan=False, default=_plain)


def _plain(v: Any) -> Any:
    """numpy scalars and other numbers as plain JSON values."""
    if hasattr(v, "item"):
        return v.item()
    return str(v)


# ----------------------------------------------------------------------------- validation

#: The phases the format defines: duration (B, E), complete (X), instant (i; I is its old
#: name), counter (C), async (b, n, e), flow (s, t, f), sample (P), object (N, O, D),
#: metadata (M), memory dump (V, v), mark (R), clock sync (c), context ("(", ")").
_PHASES = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M",
           "V", "v", "R", "c", "(", ")"}
_METADATA = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
             "thread_name": "name", "thread_sort_index": "sort_index"}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate(obj: Any, *, overlap: bool = True) -> list[str]:
    """Check a parsed timeline against the Trace Event Format; the problems found (empty: valid).

    What is checked (the format's definition: Trace Event Format, Google,
    the JSON Object Format and the event phases):

    * the object has ``traceEvents``, a list (or the file is the bare list of
      the JSON Array Format); ``displayTimeUnit``, if given, is ``"ms"`` or
      ``"ns"``; ``otherData``, if given, an object;
    * every event is an object with a string ``ph`` of a known phase, a string
      ``name`` and an integer ``pid``; ``ts`` a finite number (metadata may
      leave it out); ``cat``, if given, a string; ``args``, if given, an object;
    * duration and complete events (``B``, ``E``, ``X``) and thread-scoped
      instants carry an integer ``tid``; ``X`` a finite ``dur >= 0``; every
      ``E`` closes a ``B`` of its thread with a timestamp not after it;
    * instants: ``s`` (scope), if given, is ``g``, ``p`` or ``t``;
    * counters (``C``): ``args`` an object of finite numbers, at least one;
    * metadata (``M``): ``process_name``/``thread_name`` with ``args.name`` a
      string, ``process_labels`` with ``args.labels`` a string, the sort
      indexes with ``args.sort_index`` an integer; thread metadata with a ``tid``;
    * every process used by an event has a ``process_name`` and every thread
      used (``pid``, ``tid``) a ``thread_name``;
    * with ``overlap``: complete events of one thread are nested or disjoint
      (what the viewers need to draw them), never partly overlapping (to a
      picosecond and a relative 1e-12: ``ts + dur`` rounds).

    Parameters
    ----------
    obj : object
        The parsed JSON.
    overlap : bool
        Check the nesting of complete events.

    Returns
    -------
    list of str
        One line per problem (at most 50).
    """
    errs: list[str] = []

    def bad(msg: str) -> None:
        if len(errs) < 50:
            errs.append(msg)

    if isinstance(obj, list):
        events = obj
    elif isinstance(obj, dict):
        events = obj.get("traceEvents")
        if not isinstance(events, list):
            return ["the object has no 'traceEvents' list"]
        unit = obj.get("displayTimeUnit", "ms")
        if unit not in ("ms", "ns"):
            bad(f"displayTimeUnit must be 'ms' or 'ns', not {unit!r}")
        if "otherData" in obj and not isinstance(obj["otherData"], dict):
            bad("otherData must be an object")
    else:
        return [f"a timeline is a JSON object or array, not {type(obj).__name__}"]
    named_p: set[int] = set()
    named_t: set[tuple[int, int]] = set()
    used_p: dict[int, int] = {}
    used_t: dict[tuple[int, int], int] = {}
    spans: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    open_b: dict[tuple[int, int], list[float]] = {}
    for k, e in enumerate(events):
        where = f"event {k}"
        if not isinstance(e, dict):
            bad(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in _PHASES:
            bad(f"{where}: ph {ph!r} is not a phase of the format")
            continue
        if not isinstance(e.get("name"), str):
            bad(f"{where} ({ph}): name must be a string")
        pid = e.get("pid")
        if not _int(pid):
            bad(f"{where} ({ph}): pid must be an integer, not {pid!r}")
            continue
        if "cat" in e and not isinstance(e["cat"], str):
            bad(f"{where}: cat must be a string")
        if "args" in e and not isinstance(e["args"], dict):
            bad(f"{where}: args must be an object")
        ts = e.get("ts")
        if ph != "M" or "ts" in e:
            if not _num(ts):
                bad(f"{where} ({ph}): ts must be a finite number, not {ts!r}")
                continue
        tid = e.get("tid")
        if ph == "M":
            key = _METADATA.get(e.get("name"))  # type: ignore[arg-type]
            if key is None:
                bad(f"{where}: metadata name {e.get('name')!r} is not one of the format's")
                continue
            a = e.get("args")
            v = a.get(key) if isinstance(a, dict) else None
            if (key == "sort_index" and not _int(v)) or (key != "sort_index"
                                                         and not isinstance(v, str)):
                bad(f"{where}: {e['name']} needs args.{key}")
            if e["name"].startswith("thread_"):
                if not _int(tid):
                    bad(f"{where}: {e['name']} needs an integer tid")
                elif e["name"] == "thread_name":
                    named_t.add((pid, tid))
            elif e["name"] == "process_name":
                named_p.add(pid)
            continue
        used_p.setdefault(pid, k)
        if ph == "C":
            a = e.get("args")
            if not isinstance(a, dict) or not a or not all(_num(v) for v in a.values()):
                bad(f"{where} (C): args must hold at least one finite number, all numbers")
            continue
        scope = e.get("s", "t") if ph in "iI" else "t"
        if ph in "iI" and scope not in ("g", "p", "t"):
            bad(f"{where} (i): s must be g, p or t, not {scope!r}")
            continue
        needs_tid = ph in "BEX" or (ph in "iI" and scope == "t")
        if needs_tid:
            if not _int(tid):
                bad(f"{where} ({ph}): tid must be an integer, not {tid!r}")
                continue
            used_t.setdefault((pid, tid), k)
        if ph == "X":
            dur = e.get("dur")
            if not _num(dur) or dur < 0:
                bad(f"{where} (X): dur must be a finite number >= 0, not {dur!r}")
                continue
            spans.setdefault((pid, tid), []).append((float(ts), float(ts) + float(dur), k))
        elif ph == "B":
            open_b.setdefault((pid, tid), []).append(float(ts))
        elif ph == "E":
            stack = open_b.get((pid, tid))
            if not stack:
                bad(f"{where} (E): no B open on pid {pid} tid {tid}")
            elif stack.pop() > ts:
                bad(f"{where} (E): ends before its B")
    for pid, k in used_p.items():
        if pid not in named_p:
            bad(f"pid {pid} (event {k}) has no process_name metadata")
    for (pid, tid), k in used_t.items():
        if (pid, tid) not in named_t:
            bad(f"pid {pid} tid {tid} (event {k}) has no thread_name metadata")
    if overlap:
        for (pid, tid), ss in spans.items():
            ss.sort(key=lambda s: (s[0], -s[1]))
            stack: list[float] = []
            for a, b, k in ss:
                tol = 1e-6 + 1e-12 * abs(a)  # ts + dur rounds: an end may pass a start by an ulp
                while stack and stack[-1] <= a + tol:
                    stack.pop()
                if stack and b > stack[-1] + tol:
                    bad(f"event {k} (X) on pid {pid} tid {tid} overlaps an event it is not "
                        "nested in")
                    break
                stack.append(b)
    return errs


def read_timeline(path: str | os.PathLike[str], name: str = "timeline") -> dict[str, Any]:
    """Read and check a timeline file; the parsed JSON object.

    Raises
    ------
    ConfigError
        ``'timeline' must be a Trace Event Format file ...`` naming the first
        problem (not JSON, not the format, a file too large to read).
    """
    text = read_input_text(name, path, limit=MAX_TIMELINE_BYTES)
    rule = "a Trace Event Format JSON file (dtsim ... --timeline FILE)"
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ConfigError(name, rule, f"{path} (not JSON: {exc})") from None
    if isinstance(obj, list):
        obj = {"traceEvents": obj}
    errs = validate(obj)
    if errs:
        raise ConfigError(name, rule, f"{path} ({errs[0]})")
    return obj


# ----------------------------------------------------------------------------- the Gantt chart's data


@dataclass
class GanttBar:
    """One complete event on a row: ``[start, end]`` in simulated seconds, its kind."""

    start: float
    end: float
    kind: str
    name: str
    lost: bool = False
    lane: int = 0


#: A node written as a plain integer (a family's host index): not shown beside a row's name.
_INT_TEXT = re.compile(r"-?\d+")


@dataclass
class GanttRow:
    """One stream of one process (a device's ``compute``, ``send``...): its bars, in
    ``lanes`` sub-rows where the file spread overlapping events over threads ``send``,
    ``send 2``..., and its instants."""

    label: str
    pid: int
    tid: int
    bars: list[GanttBar]
    marks: list[tuple[float, str, str]]  # (time, category, name)
    lanes: int = 1


@dataclass
class GanttStep:
    """One step of the coordinator: its span, the end of its passes, its bubble fraction."""

    step: int
    start: float
    compute_end: float | None
    end: float
    lost: bool
    busy: float | None
    workers: int | None
    bubble: float | None
    #: worker-time of the step's workers not live (down, or fetching weights) in its compute phase
    down: float = 0.0


@dataclass
class Gantt:
    """What ``dtsim plot --timeline`` draws, read from the events alone (see :func:`gantt`)."""

    title: str
    rows: list[GanttRow]
    steps: list[GanttStep]
    bubble: float | None
    counters: dict[str, list[tuple[float, float]]]
    rows_left_out: int
    left_out: int
    unit: str = "s"


#: Bar kinds in legend order.
KINDS = ("forward", "backward", "recompute", "step", "transfer", "queue", "collective",
         "checkpoint", "restart", "failure", "other")


def _kind(e: dict[str, Any]) -> str:
    cat = e.get("cat", "")
    if cat == "compute":
        name = e.get("name", "")
        if name.endswith(LOST_SUFFIX):
            name = name[:-len(LOST_SUFFIX)]
        if name == "backward":
            return "backward"
        if name == "forward":
            return "recompute" if (e.get("args") or {}).get("recompute") else "forward"
        if name == "all-gather":  # a framework device's (DeepSpeed 0.3.13): a TP collective
            return "collective"
        return "step"
    return cat if cat in KINDS else "other"


def gantt(obj: dict[str, Any], *, max_rows: int = 80) -> Gantt:
    """The rows, bars, steps and bubble fractions of a timeline (a validated object).

    A row per thread of a process (``s0r1 compute``, ``s0r1 send``...) that has
    a complete or instant event, in process then thread order; the
    coordinator's ``step`` events are not a row but the steps, each with its
    bubble fraction ``1 - busy / (workers (compute_end - start) - down)`` where
    ``busy`` is the time of the compute events inside its compute phase,
    ``workers`` the step's own count (all the coordinator's workers; else the
    processes with a compute row) and ``down`` the step's worker-time of workers
    not live (down, or fetching their weights) in the phase, so the bubble is the
    live workers' idle share, as the engine's ``bubble_fraction``;
    the overall bubble is that ratio over the steps whose passes ended (a step
    lost afterwards, in its sync or optimizer step, included: the engine's
    ``bubble_fraction`` when nothing was left out). A run of several
    coordinators (DiLoCo's groups) names each one's processes in
    ``otherData.coordinators``: a step's busy time is that of its own
    coordinator's processes, and the steps shown are the first coordinator's
    (the overall bubble is over every coordinator's). Counters become series.
    """
    ev = obj["traceEvents"]
    pname: dict[int, str] = {}
    tname: dict[tuple[int, int], str] = {}
    plabel: dict[int, Any] = {}
    psort: dict[int, int] = {}
    tsort: dict[tuple[int, int], int] = {}
    for e in ev:
        if e.get("ph") != "M":
            continue
        n, a = e.get("name"), e.get("args", {})
        if n == "process_name":
            pname[e["pid"]] = a["name"]
        elif n == "process_labels":
            plabel[e["pid"]] = a["labels"]
        elif n == "thread_name":
            tname[(e["pid"], e["tid"])] = a["name"]
        elif n == "process_sort_index":
            psort[e["pid"]] = a["sort_index"]
        elif n == "thread_sort_index":
            tsort[(e["pid"], e["tid"])] = a["sort_index"]
    rows: dict[tuple[int, str], GanttRow] = {}
    steps: list[GanttStep] = []
    counters: dict[str, list[tuple[float, float]]] = {}
    compute: list[tuple[float, float, int]] = []
    compute_procs: set[int] = set()
    step_pid: list[int] = []

    def row(pid: int, tid: int) -> tuple[GanttRow, int]:
        stream, lane = _lane(tname.get((pid, tid), str(tid)))
        r = rows.get((pid, stream))
        if r is None:
            name = pname.get(pid, pid)
            host = plabel.get(pid)
            # a named host, unless it is the process's own name (a plan's replica without a
            # host is a node of its own named as the replica: "s0r0 @s0r0" said nothing more)
            if isinstance(host, str) and not _INT_TEXT.fullmatch(host) and host != name:
                name = f"{name} @{host}"
            r = rows[(pid, stream)] = GanttRow(f"{name} {stream}", pid, tid, [], [])
        r.tid = min(r.tid, tid)
        r.lanes = max(r.lanes, lane + 1)
        return r, lane

    for e in ev:
        ph = e.get("ph")
        if ph == "X":
            t0 = e["ts"] / US
            t1 = (e["ts"] + e["dur"]) / US
            a = e.get("args") or {}
            if e.get("cat") == "step":
                k = a.get("step", -1)
                steps.append(GanttStep(int(k) if isinstance(k, int) else -1, t0,
                                       a.get("compute_end"), t1, bool(a.get("lost")),
                                       None, a.get("workers"), None,
                                       float(a.get("down") or 0.0)))
                step_pid.append(e["pid"])
                continue
            kind = _kind(e)
            r, lane = row(e["pid"], e["tid"])
            r.bars.append(GanttBar(t0, t1, kind, e.get("name", ""), bool(a.get("lost")), lane))
            if e.get("cat") == "compute":
                compute.append((t0, t1, e["pid"]))
                compute_procs.add(e["pid"])
        elif ph in ("i", "I") and e.get("cat") != "timeline":
            row(e["pid"], e["tid"])[0].marks.append((e["ts"] / US, e.get("cat", ""),
                                                     e.get("name", "")))
        elif ph == "C":
            for k, v in (e.get("args") or {}).items():
                counters.setdefault(e["name"] if len(e["args"]) == 1 else f"{e['name']} {k}",
                                    []).append((e["ts"] / US, float(v)))
    other = obj.get("otherData") or {}
    coord = other.get("coordinators")
    # each coordinator's processes (pids), when the run names them; else every process
    owns: dict[int, set[int]] | None = None
    if isinstance(coord, dict) and coord:
        by_name = {v: k for k, v in pname.items()}
        owns = {by_name[c]: {by_name[p] for p in procs if p in by_name}
                for c, procs in coord.items() if c in by_name and isinstance(procs, list)}
    compute.sort()
    tot_busy = tot_cap = 0.0
    for s, pid in zip(steps, step_pid, strict=True):
        if s.compute_end is None:  # (a step lost after its passes: its compute phase counts)
            continue
        lo, hi = s.start, s.compute_end
        eps = 1e-9 * max(1.0, abs(hi))
        mine = owns.get(pid) if owns is not None else None
        busy = sum(b - a for a, b, p in compute if a >= lo - eps and b <= hi + eps
                   and (mine is None or p in mine))
        w = s.workers if isinstance(s.workers, int) and s.workers > 0 else len(compute_procs)
        s.busy = busy
        cap = w * (hi - lo) - s.down  # the live workers' time in the compute phase
        if hi > lo and w and cap > 0:
            s.bubble = 1.0 - busy / cap
            tot_busy += busy
            tot_cap += cap
    if owns:  # the first coordinator's steps are the ones drawn, and every one's lost steps
        # (user trial 15: a DiLoCo run's plot said "only the lost steps' starts drawn" and
        # drew group 0's lost step alone, leaving out the other groups')
        first = min(owns, key=lambda p: (psort.get(p, p), p))
        steps = [s for s, pid in zip(steps, step_pid, strict=True) if pid == first or s.lost]
    steps.sort(key=lambda s: (s.start, s.end))
    ordered = sorted(rows.values(), key=lambda r: (psort.get(r.pid, r.pid), r.pid,
                                                   tsort.get((r.pid, r.tid), r.tid), r.tid))
    left = other.get("left_out") or {}
    nleft = sum(v for v in left.values() if isinstance(v, int)) if isinstance(left, dict) else 0
    gen = other.get("generator", "dtsim")
    bits = [str(gen) + (f" ({other['engine']})" if other.get("engine") else "")]
    for key in ("schedule", "strategy"):
        if other.get(key):
            bits.append(str(other[key]))
    if other.get("stages"):
        bits.append(f"{other['stages']} stages")
    if other.get("microbatches") and other.get("steps"):
        bits.append(f"{other['microbatches']} micro-batches per step")
    if other.get("replication") is not None:
        bits.append(f"replication {other['replication']} (seed {other.get('seed')})")
    return Gantt(", ".join(bits), ordered[:max_rows], steps,
                 1.0 - tot_busy / tot_cap if tot_cap > 0 else None, counters,
                 max(0, len(ordered) - max_rows), nleft, str(other.get("unit", "s")))


def _lane(thread: str) -> tuple[str, int]:
    """``"send 3"`` -> ``("send", 2)``: the stream and the lane of a thread's name."""
    base, _, last = thread.rpartition(" ")
    if base and last.isdigit() and int(last) >= 2:
        return base, int(last) - 1
    return thread, 0
