"""Readers of public availability-trace formats, detected by content or named.

=========  =============================================================  ==========================
format     lines                                                          time unit
=========  =============================================================  ==========================
bamboo     ``t,count``: a step function, each change written twice         seconds or hours (see
           (``t,old`` then ``t,new``)                                     below)
gcloud     ``YYYY-MM-DD, HH:MM:SS, count``: samples; a count holds        wall clock
           until the next sample
oobleck    ``time_ms,add|remove,nodeID``: one line per node joining or    milliseconds
           leaving
skypilot   JSON ``{"metadata": {"gap_seconds": g}, "data": [counts]}``:   ``gap_seconds``
           ``data[i]`` holds from ``i g`` to ``(i + 1) g``; the span
           ends at the last sample, ``(n - 1) g``
simgrid    ``date value`` state-profile lines (``value`` = instances up,  seconds unless given
           0 or 1 for one host), optional ``LOOPAFTER x``: the last
           value holds ``x`` and the profile repeats
dtsim      CSV ``worker,start,end[,state]`` of per-worker down intervals  seconds unless given
           (:func:`sim.failures.read_trace`); up outside them, span
           from 0 to the last interval's end
=========  =============================================================  ==========================

Time units
----------
``time_unit`` applies only where the file cannot tell (bamboo, simgrid,
dtsim); giving it for another format is an error, never silently ignored.
A Bamboo file whose timestamps are all integers is read in seconds; one with
fractional timestamps (the shipped ``aws-p2-3day`` is in hours, 0 to 88.695)
needs ``time_unit``, unless its content is identical to a shipped trace, whose
listed unit is then used.

Errors
------
A file that breaks a rule raises one :class:`~sim.errors.ConfigError` naming
``trace``, the rule, and ``path:line`` with what was found; binary or
non-UTF-8 content is refused the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import ConfigError, check, check_choice
from .model import AvailabilityTrace, NodeSpan, count_trace

__all__ = ["FORMATS", "TIME_UNITS", "detect_format", "read_trace_file", "parse_trace_text",
           "unit_seconds"]

FORMATS = ("bamboo", "gcloud", "oobleck", "skypilot", "simgrid", "dtsim")
#: Accepted time units and their length in seconds.
TIME_UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0,
              "milliseconds": 1e-3, "seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
_UNIT_FREE = ("bamboo", "simgrid", "dtsim")

_NUM = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_BAMBOO = re.compile(rf"^\s*({_NUM})\s*,\s*(\d+)\s*$")
_GCLOUD = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})\s*,\s*(\d{1,2}:\d{2}:\d{2})\s*,\s*(\d+)\s*$")
_OOBLECK = re.compile(rf"^\s*({_NUM})\s*,\s*(add|remove)\s*,\s*(\S+?)\s*$")
_SIMGRID = re.compile(rf"^\s*({_NUM})\s+({_NUM})\s*$")
_LOOP = re.compile(rf"^\s*LOOPAFTER\s+({_NUM})\s*$")


def unit_seconds(time_unit: str) -> float:
    """Seconds in one ``time_unit`` (``ms``, ``s``, ``min``, ``h`` or their long names)."""
    check_choice("time_unit", time_unit, TIME_UNITS)
    return TIME_UNITS[time_unit]


def _fail(rule: str, where: str, found: str) -> ConfigError:
    return ConfigError("trace", rule, f"{where} ({found})" if found else where)


def _lines(text: str) -> list[tuple[int, str]]:
    return [(i, ln) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]


def detect_format(text: str, where: str = "<text>") -> str:
    """The format of a trace's text, from its first non-empty line (see the module table)."""
    lines = _lines(text)
    if not lines:
        raise _fail("a non-empty trace file", where, "no data lines")
    lineno, first = lines[0]
    s = first.strip()
    if s.startswith("{"):
        return "skypilot"
    if _GCLOUD.match(s):
        return "gcloud"
    if _OOBLECK.match(s):
        return "oobleck"
    if _BAMBOO.match(s):
        return "bamboo"
    if _SIMGRID.match(s) or _LOOP.match(s):
        return "simgrid"
    cols = {c.strip().lower() for c in s.split(",")}
    if {"worker", "start", "end"} <= cols:
        return "dtsim"
    raise _fail("a trace in a known format (" + ", ".join(FORMATS) + ")", f"{where}:{lineno}",
                s[:60])


def _numbers_in_order(times: list[float], where_of: list[str]) -> None:
    for k in range(1, len(times)):
        if times[k] < times[k - 1]:
            raise _fail("a trace with non-decreasing times", where_of[k],
                        f"{times[k]:g} after {times[k - 1]:g}")


def _finite_time(v: float, where: str) -> float:
    if not (math.isfinite(v) and v >= 0):
        raise _fail("a trace with finite times >= 0", where, f"{v:g}")
    return v


def _positive_span(times, end: float, where: str) -> None:
    if not end > times[0]:
        raise _fail("a trace spanning a positive time", where,
                    f"first and last timestamps {times[0]:g}, {end:g}")


def _bamboo(text: str, where: str, scale: float | None) -> AvailabilityTrace:
    ts, cs, locs, raw = [], [], [], []
    for lineno, ln in _lines(text):
        m = _BAMBOO.match(ln)
        if not m:
            raise _fail("a Bamboo count trace of t,count lines (count an integer >= 0)",
                        f"{where}:{lineno}", ln.strip()[:60])
        raw.append(m.group(1))
        ts.append(_finite_time(float(m.group(1)), f"{where}:{lineno}"))
        cs.append(int(m.group(2)))
        locs.append(f"{where}:{lineno}")
    _numbers_in_order(ts, locs)
    if scale is None:
        if any(not float(r).is_integer() for r in raw):
            raise ConfigError("time_unit", "given (s or h) for a Bamboo trace with fractional "
                              "timestamps", where)
        scale = 1.0
    t = np.asarray(ts) * scale
    _positive_span(t, t[-1], where)
    return count_trace(t, cs, t[-1], format="bamboo", source=where)


def _gcloud(text: str, where: str) -> AvailabilityTrace:
    ts, cs, locs = [], [], []
    for lineno, ln in _lines(text):
        m = _GCLOUD.match(ln)
        if not m:
            raise _fail("a Google Cloud trace of 'YYYY-MM-DD, HH:MM:SS, count' lines",
                        f"{where}:{lineno}", ln.strip()[:60])
        try:
            dt = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise _fail("a Google Cloud trace with valid dates and times", f"{where}:{lineno}",
                        ln.strip()[:60]) from None
        ts.append((dt - datetime(1970, 1, 1)).total_seconds())
        cs.append(int(m.group(3)))
        locs.append(f"{where}:{lineno}")
    _numbers_in_order(ts, locs)
    t = np.asarray(ts)
    _positive_span(t, t[-1], where)
    return count_trace(t, cs, t[-1], format="gcloud", source=where)


def _oobleck(text: str, where: str) -> AvailabilityTrace:
    events: list[tuple[float, str, str]] = []
    locs: list[str] = []
    for lineno, ln in _lines(text):
        m = _OOBLECK.match(ln)
        if not m:
            raise _fail("an Oobleck event trace of time_ms,add|remove,nodeID lines",
                        f"{where}:{lineno}", ln.strip()[:60])
        t = _finite_time(float(m.group(1)), f"{where}:{lineno}") * 1e-3
        events.append((t, m.group(2), m.group(3)))
        locs.append(f"{where}:{lineno}")
    _numbers_in_order([e[0] for e in events], locs)
    up: dict[str, float] = {}
    seen: set[str] = set()
    spans: list[NodeSpan] = []
    # Group by timestamp: removals first, then additions.
    times, counts = [], []
    k = 0
    while k < len(events):
        t = events[k][0]
        j = k
        while j < len(events) and events[j][0] == t:
            j += 1
        group = list(range(k, j))
        removes = [g for g in group if events[g][1] == "remove"]
        adds = [g for g in group if events[g][1] == "add"]
        for g in removes:
            node = events[g][2]
            if node not in up:
                raise _fail("an Oobleck trace that removes only nodes that are up", locs[g], node)
            spans.append(NodeSpan(node, up.pop(node), t))
        if removes:
            times.append(t)
            counts.append(len(up))
        for g in adds:
            node = events[g][2]
            if node in seen:
                raise _fail("an Oobleck trace that adds each node ID once", locs[g], node)
            seen.add(node)
            up[node] = t
        if adds:
            times.append(t)
            counts.append(len(up))
        k = j
    for node, start in up.items():
        spans.append(NodeSpan(node, start, None))
    t_arr = np.asarray(times)
    _positive_span(t_arr, t_arr[-1], where)
    t0 = t_arr[0]
    shifted = tuple(NodeSpan(s.node, s.start - t0, None if s.end is None else s.end - t0)
                    for s in sorted(spans, key=lambda s: (s.start, s.node)))
    return count_trace(t_arr, counts, t_arr[-1], format="oobleck", source=where,
                       nodes=shifted, reuse=False)


def _skypilot(text: str, where: str) -> AvailabilityTrace:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail("valid JSON", f"{where}:{exc.lineno}", exc.msg) from None
    rule = 'a SkyPilot trace {"metadata": {"gap_seconds": g > 0}, "data": [counts >= 0]}'
    if not (isinstance(doc, dict) and isinstance(doc.get("metadata"), dict)
            and isinstance(doc.get("data"), list)):
        raise _fail(rule, f"{where}:1", "missing metadata or data")
    g = doc["metadata"].get("gap_seconds")
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not (math.isfinite(g) and g > 0):
        raise _fail(rule, f"{where}:1", f"gap_seconds {g!r}")
    data = doc["data"]
    for i, v in enumerate(data):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise _fail(rule, f"{where}:1", f"data[{i}] = {v!r}")
    if len(data) < 2:
        raise _fail("a trace spanning a positive time", where, f"{len(data)} samples")
    t = np.arange(len(data), dtype=float) * float(g)
    return count_trace(t, data, t[-1], format="skypilot", source=where)


def _simgrid(text: str, where: str, scale: float) -> AvailabilityTrace:
    ts, cs, locs = [], [], []
    loop = None
    for lineno, ln in _lines(text):
        if ln.lstrip().startswith("#"):
            continue
        lm = _LOOP.match(ln)
        if lm:
            if loop is not None:
                raise _fail("a SimGrid profile with at most one LOOPAFTER", f"{where}:{lineno}",
                            ln.strip())
            loop = float(lm.group(1))
            if not (math.isfinite(loop) and loop >= 0):
                raise _fail("a SimGrid profile with LOOPAFTER >= 0", f"{where}:{lineno}",
                            ln.strip())
            continue
        m = _SIMGRID.match(ln)
        if not m:
            raise _fail("a SimGrid state profile of 'date value' lines", f"{where}:{lineno}",
                        ln.strip()[:60])
        if loop is not None:
            raise _fail("a SimGrid profile with LOOPAFTER after the last date", f"{where}:{lineno}",
                        ln.strip()[:60])
        v = float(m.group(2))
        if not (v >= 0 and v.is_integer()):
            raise _fail("a SimGrid state profile whose values are integers >= 0 (instances up)",
                        f"{where}:{lineno}", m.group(2))
        ts.append(_finite_time(float(m.group(1)), f"{where}:{lineno}"))
        cs.append(int(v))
        locs.append(f"{where}:{lineno}")
    if not ts:
        raise _fail("a SimGrid profile with at least one date", where, "none")
    _numbers_in_order(ts, locs)
    t = np.asarray(ts) * scale
    end = t[-1] + (loop * scale if loop is not None else 0.0)
    _positive_span(t, end, where)
    return count_trace(t, cs, end, format="simgrid", source=where,
                       loop_after=None if loop is None else loop * scale)


def _dtsim(path: str, where: str, scale: float) -> AvailabilityTrace:
    from ..failures import read_trace

    tr = read_trace(path)
    end = max((e for ivs in tr.intervals.values() for _, e in ivs), default=0.0) * scale
    if not end > 0:
        raise _fail("a trace spanning a positive time", where, "no intervals")
    spans: list[NodeSpan] = []
    changes: list[tuple[float, int]] = []
    for w, raw in tr.intervals.items():
        merged: list[list[float]] = []
        for s, e in raw:  # adjacent down intervals of one worker are one outage
            if merged and s * scale <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e * scale)
            else:
                merged.append([s * scale, e * scale])
        t = 0.0
        for s, e in merged:
            if s > t:
                spans.append(NodeSpan(w, t, s))
            t = e
            changes.append((s, -1))
            changes.append((e, +1))
        spans.append(NodeSpan(w, t, None))
    n = len(tr.intervals)
    # Count after every change at a time: downs before ups at one timestamp.
    changes.sort(key=lambda x: (x[0], x[1]))
    times, counts = [0.0], [n - sum(1 for s, d in changes if s == 0.0 and d < 0)]
    c = n
    for s, d in changes:
        c += d
        if s == 0.0 and d < 0:
            continue
        times.append(s)
        counts.append(c)
    spans_t = tuple(sp for sp in sorted(spans, key=lambda s: (s.start, s.node))
                    if (sp.end is None and sp.start < end) or (sp.end or 0.0) > sp.start)
    return count_trace(times, counts, end, format="dtsim", source=where, nodes=spans_t, reuse=True)


def parse_trace_text(text: str, *, format: str = "auto", time_unit: str | None = None,
                     where: str = "<text>", path: str | None = None) -> AvailabilityTrace:
    """Parse a trace's text (see the module table); ``where`` names it in errors."""
    fmt = detect_format(text, where) if format == "auto" else check_choice(
        "trace_format", format, ("auto",) + FORMATS)
    if time_unit is not None:
        unit_seconds(time_unit)
        check(fmt in _UNIT_FREE, "time_unit",
              f"unset for a {fmt} trace (its file gives the unit)", time_unit)
    scale = None if time_unit is None else TIME_UNITS[time_unit]
    if fmt == "bamboo":
        return _bamboo(text, where, scale)
    if fmt == "gcloud":
        return _gcloud(text, where)
    if fmt == "oobleck":
        return _oobleck(text, where)
    if fmt == "skypilot":
        return _skypilot(text, where)
    if fmt == "simgrid":
        return _simgrid(text, where, 1.0 if scale is None else scale)
    if path is None:
        raise ConfigError("trace", "a file path for the dtsim format", where)
    return _dtsim(path, where, 1.0 if scale is None else scale)


def read_bytes(path: str | Path) -> bytes:
    """A trace file's bytes; one ConfigError line if it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError("trace", "a readable file or a shipped trace name",
                          f"{path} ({exc.strerror})") from None


def decode(data: bytes, where: str) -> str:
    """UTF-8 text of a trace file; binary or non-UTF-8 content is one ConfigError line."""
    if b"\x00" in data:
        raise _fail("a text file", where, f"binary content, NUL byte at offset {data.index(0)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _fail("a UTF-8 text file", f"{where}:{line}",
                    f"byte 0x{data[exc.start]:02x} at offset {exc.start}") from None


def digest(data: bytes) -> str:
    """SHA-256 of a trace file's content (its identity in configs and the results store)."""
    return hashlib.sha256(data).hexdigest()


def read_trace_file(path: str | Path, *, format: str = "auto", time_unit: str | None = None,
                    known_units: dict[str, str] | None = None) -> AvailabilityTrace:
    """Read a trace file of any supported format.

    Parameters
    ----------
    path : str or Path
    format : str
        ``auto`` (detect from content) or one of :data:`FORMATS`.
    time_unit : str, optional
        Unit of the file's times where the format cannot tell (see the module notes).
    known_units : dict, optional
        ``sha256 -> unit``; a file identical to one takes its unit (default:
        the shipped traces').

    Raises
    ------
    ConfigError
        One line naming the file, the line and the rule broken.
    """
    data = read_bytes(path)
    where = str(path)
    text = decode(data, where)
    if known_units is None:
        from .registry import known_units as shipped_units

        known_units = shipped_units()
    if time_unit is None and known_units:
        unit = known_units.get(digest(data))
        if unit is not None:
            fmt = detect_format(text, where) if format == "auto" else format
            if fmt in _UNIT_FREE:
                time_unit = unit
    return parse_trace_text(text, format=format, time_unit=time_unit, where=where, path=str(path))
