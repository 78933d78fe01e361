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
events     a user's CSV event log with a header, read by the columns and  ISO-8601, or seconds
           words of ``events:worker=COL,time=COL,event=COL,down=W,up=W``  unless given
           (:mod:`sim.traces.events`)
=========  =============================================================  ==========================

Time units
----------
``time_unit`` applies only where the file cannot tell (bamboo, simgrid,
dtsim, an event log of numbers); giving it for another format is an error, never
silently ignored. A trace read in seconds for want of a unit has
``assumed_unit == "s"``, which the commands print.
A Bamboo file whose timestamps are all integers is read in seconds; one with
fractional timestamps (the shipped ``aws-p2-3day`` is in hours, 0 to 88.695)
needs ``time_unit``, unless its content is identical to a shipped trace, whose
listed unit is then used.

Errors
------
A file that breaks a rule raises one :class:`~sim.errors.ConfigError` naming
``trace``, the rule, and ``path:line`` with what was found; binary or
non-UTF-8 content is refused the same way, and so is a number in other
scripts' digits (numbers are ASCII ``0-9`` only, as :func:`sim.errors.ascii_float`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import re
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import ConfigError, check, check_choice, read_input_bytes
from .events import is_events_format, parse_events_spec, read_events
from .model import AvailabilityTrace, NodeSpan, count_trace

__all__ = ["FORMATS", "TIME_UNITS", "detect_format", "read_trace_file", "parse_trace_text",
           "unit_seconds", "check_format"]

FORMATS = ("bamboo", "gcloud", "oobleck", "skypilot", "simgrid", "dtsim", "events")
#: Accepted time units and their length in seconds.
TIME_UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0,
              "milliseconds": 1e-3, "seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
_UNIT_FREE = ("bamboo", "simgrid", "dtsim", "events")

# ASCII digits only: \d would also read other scripts' digits (float("\u0663") == 3.0),
# which no trace means; a line holding them is refused as malformed, naming path:line.
_NUM = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# counts of at most 18 digits: int() of thousands of digits raises past Python's limit
_BAMBOO = re.compile(rf"^\s*({_NUM})\s*,\s*([0-9]{{1,18}})\s*$")
_GCLOUD = re.compile(r"^\s*([0-9]{4}-[0-9]{2}-[0-9]{2})\s*,\s*([0-9]{1,2}:[0-9]{2}:[0-9]{2})\s*,"
                     r"\s*([0-9]{1,18})\s*$")
_OOBLECK = re.compile(rf"^\s*({_NUM})\s*,\s*(add|remove)\s*,\s*(\S+?)\s*$")
_SIMGRID = re.compile(rf"^\s*({_NUM})\s+({_NUM})\s*$")
_LOOP = re.compile(rf"^\s*LOOPAFTER\s+({_NUM})\s*$")


def check_format(fmt: object) -> str:
    """A ``--trace-format`` value: ``auto``, a reader's name, or ``events:key=value,...``
    (checked by :func:`sim.traces.events.parse_events_spec`)."""
    if is_events_format(fmt):
        parse_events_spec(fmt)  # type: ignore[arg-type]
        return str(fmt)
    return check_choice("trace_format", fmt, ("auto",) + FORMATS[:-1] + ("events[:key=value,...]",))


def unit_seconds(time_unit: str) -> float:
    """Seconds in one ``time_unit`` (``ms``, ``s``, ``min``, ``h`` or their long names)."""
    check_choice("time_unit", time_unit, TIME_UNITS)
    return TIME_UNITS[time_unit]


def _fail(rule: str, where: str, found: str) -> ConfigError:
    return ConfigError("trace", rule, f"{where} ({found})" if found else where)


def _lines(text: str) -> list[tuple[int, str]]:
    return [(i, ln) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]


# ----------------------------------------------------------------------------- fast scanning
# A trace of a million lines parsed line by line in Python takes minutes; these
# helpers check and split the whole text with one compiled pattern each (C
# speed) and convert the numbers with numpy (the same IEEE doubles as
# float()). They apply to "plain" text: ASCII with \n or \r\n line breaks.
# Other text (any of the line breaks str.splitlines() also knows, non-ASCII
# digits) goes through the line-by-line readers below, which define the
# behaviour; the fast readers give the same traces and the same errors.

#: ASCII whitespace other than space, tab, \n and \r\n (line breaks of str.splitlines()
#: or whitespace of \s that the plain patterns do not expect).
_ODD_BREAK = re.compile(r"\r(?!\n)|[\v\f\x1c\x1d\x1e\x1f]")
_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_NUMP = rf"({_NUM})"  # _NUM, captured
_W = r"[ \t]*"         # whitespace inside a plain line
_END = r"[ \t\r]*$"    # the end of a plain line (\r of a \r\n break included)
_BLANK_LINES = re.compile(r"^[ \t]*(?:\n|\Z)", re.M)


def _plain(text: str) -> bool:
    """True for ASCII text whose only line breaks are \\n and \\r\\n."""
    if not text.isascii() or any(c in text for c in "\v\f\x1c\x1d\x1e\x1f"):
        return False
    return "\r" not in text or text.count("\r") == text.count("\r\n")


def _only(text: str, chars: str) -> bool:
    """True when ``text`` holds no character outside ``chars`` (C speed)."""
    return not text.translate(str.maketrans("", "", chars))


def _after_delimiter(text: str, chars: str, delimiter: str) -> bool:
    """True when one of ``chars`` follows a ``delimiter`` on its line (one delimiter a line)."""
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    hits = np.flatnonzero(np.isin(b, np.frombuffer(chars.encode("ascii"), dtype=np.uint8)))
    if not len(hits):
        return False
    delims = np.flatnonzero(b == ord(delimiter))
    breaks = np.flatnonzero(b == ord("\n"))
    last_delim = np.searchsorted(delims, hits) - 1
    last_break = np.searchsorted(breaks, hits) - 1
    line_start = np.where(last_break >= 0, breaks[np.maximum(last_break, 0)], -1)
    after = (last_delim >= 0) & (delims[np.maximum(last_delim, 0)] > line_start)
    return bool(after.any())


class _Scan:
    """The non-blank lines of a plain text matched against one line pattern (multiline)."""

    def __init__(self, text: str, where: str, body: str, skip: str = "") -> None:
        self.text, self.where = text, where
        self.line = re.compile(rf"^{_W}{body}{_END}", re.M)
        # the first non-blank line that is not a data line (nor a ``skip`` line)
        self.bad = re.compile(rf"^(?!{_END})(?!{_W}{body}{_END}){skip}.*$", re.M)
        self._starts: list[int] | None = None

    def first_bad(self) -> tuple[str, str] | None:
        """``(where, stripped line)`` of the first line that does not match, or None."""
        m = self.bad.search(self.text)
        if m is None:
            return None
        return self.where_at(m.start()), m.group().strip()

    def rows(self) -> list[tuple[str, ...]]:
        """The groups of every data line, in order."""
        return self.line.findall(self.text)

    def where_at(self, pos: int) -> str:
        return f"{self.where}:{self.text.count(chr(10), 0, pos) + 1}"

    def where_of(self, k: int) -> str:
        """``path:line`` of data line ``k`` (0-based)."""
        for i, m in enumerate(self.line.finditer(self.text)):
            if i == k:
                return self.where_at(m.start())
        raise IndexError(k)  # pragma: no cover


def _first_line(text: str) -> tuple[int, str] | None:
    """``(line number, line)`` of the first non-blank line (as :func:`_lines` numbers it)."""
    m = re.search(r"\S", text)
    if m is None:
        return None
    starts = [b.end() for b in _BREAKS.finditer(text, 0, m.start())]
    start = starts[-1] if starts else 0
    nxt = _BREAKS.search(text, m.start())
    return len(starts) + 1, text[start:nxt.start() if nxt else len(text)]


def _first_decrease(t: np.ndarray) -> int | None:
    """Index ``k`` of the first ``t[k] < t[k - 1]`` (None when non-decreasing)."""
    if len(t) < 2:
        return None
    d = np.flatnonzero(t[1:] < t[:-1])
    return int(d[0]) + 1 if len(d) else None


def _first_bad_time(t: np.ndarray) -> int | None:
    """Index of the first time that is not finite and >= 0 (None when all are)."""
    d = np.flatnonzero(~(np.isfinite(t) & (t >= 0)))
    return int(d[0]) if len(d) else None


def _columns(text: str, ncols: int, delimiter: str | None) -> list[np.ndarray] | None:
    """The ``ncols`` columns of doubles of a checked plain text (numpy's C reader).

    A cell reads as ``float(cell)`` would. None when numpy cannot read the
    text as ``ncols`` numeric columns: the caller then looks for the line at fault.
    """
    body = text.replace("\r\n", "\n")
    if "\n\n" in body or "\n " in body or "\n\t" in body or body[:1] in (" ", "\t", "\n"):
        body = _BLANK_LINES.sub("", body)  # numpy's reader does not skip blank lines
    try:
        a = np.loadtxt(io.StringIO(body), delimiter=delimiter, comments=None, dtype=float,
                       ndmin=2)
    except ValueError:
        return None
    if a.shape[1] != ncols:
        return None
    return [a[:, k].copy() for k in range(ncols)]


def detect_format(text: str, where: str = "<text>") -> str:
    """The format of a trace's text, from its first non-empty line (see the module table)."""
    found = _first_line(text)
    if found is None:
        raise _fail("a non-empty trace file", where, "no data lines")
    lineno, first = found
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
    if {"worker", "time", "event"} <= {c.strip() for c in s.split(",")}:
        return "events"
    raise _fail("a trace in a known format (" + ", ".join(FORMATS[:-1]) + "; a CSV event log "
                "of your own: --trace-format events:worker=COL,time=COL,event=COL,down=WORD,"
                "up=WORD)", f"{where}:{lineno}", s[:60])


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


_BAMBOO_RULE = "a Bamboo count trace of t,count lines (count an integer >= 0)"


def _bamboo_fast(text: str, where: str, scale: float | None) -> AvailabilityTrace | None:
    # Within these characters a time cell that float() reads is exactly a _NUM, and a
    # count cell without . e E + - that numpy reads is exactly [0-9]+ (with spaces around).
    cols = None
    if _only(text, "0123456789.eE+-, \t\r\n") and not _after_delimiter(text, ".eE+-", ","):
        cols = _columns(text, 2, ",")
    scan = _Scan(text, where, rf"{_NUMP}{_W},{_W}([0-9]+)")
    if cols is None:
        bad = scan.first_bad()
        if bad is not None:
            raise _fail(_BAMBOO_RULE, bad[0], bad[1][:60])
        return None
    t, cf = cols
    if len(cf) and cf.max() >= 2.0**53:  # beyond exact doubles: the line reader decides
        return None
    k = _first_bad_time(t)
    if k is not None:
        raise _fail("a trace with finite times >= 0", scan.where_of(k), f"{t[k]:g}")
    k = _first_decrease(t)
    if k is not None:
        raise _fail("a trace with non-decreasing times", scan.where_of(k),
                    f"{t[k]:g} after {t[k - 1]:g}")
    if scale is None:
        if np.any(t != np.trunc(t)):
            raise ConfigError("time_unit", "given (s or h) for a Bamboo trace with fractional "
                              "timestamps", where)
        scale = 1.0
    t = t * scale
    _positive_span(t, t[-1], where)
    return count_trace(t, cf.astype(np.int64), t[-1], format="bamboo", source=where)


def _bamboo(text: str, where: str, scale: float | None) -> AvailabilityTrace:
    if _plain(text):
        fast = _bamboo_fast(text, where, scale)
        if fast is not None:
            return fast
    ts, cs, locs, raw = [], [], [], []
    for lineno, ln in _lines(text):
        m = _BAMBOO.match(ln)
        if not m:
            raise _fail(_BAMBOO_RULE, f"{where}:{lineno}", ln.strip()[:60])
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


_GCLOUD_RULE = "a Google Cloud trace of 'YYYY-MM-DD, HH:MM:SS, count' lines"


def _gcloud_fast(text: str, where: str) -> AvailabilityTrace | None:
    scan = _Scan(text, where, rf"([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}){_W},{_W}([0-9]{{1,2}}:[0-9]{{2}}:[0-9]{{2}})"
                 rf"{_W},{_W}([0-9]+)")
    bad = scan.first_bad()
    if bad is not None:
        raise _fail(_GCLOUD_RULE, bad[0], bad[1][:60])
    if re.search(r"(?m)^[ \t]*0000-", text):
        return None  # year 0: numpy takes it, datetime does not; the line-by-line reader names it
    days, clocks, raw_c = zip(*scan.rows(), strict=True)
    stamps = [f"{d}T{c:0>8}" for d, c in zip(days, clocks, strict=True)]
    try:
        t = np.array(stamps, dtype="datetime64[s]").astype(np.int64).astype(float)
    except ValueError:
        return None  # an invalid date: the line-by-line reader names it
    k = _first_decrease(t)
    if k is not None:
        raise _fail("a trace with non-decreasing times", scan.where_of(k),
                    f"{t[k]:g} after {t[k - 1]:g}")
    _positive_span(t, t[-1], where)
    try:
        counts = np.array(raw_c, dtype=np.int64)
    except OverflowError:
        return None
    return count_trace(t, counts, t[-1], format="gcloud", source=where)


def _gcloud(text: str, where: str) -> AvailabilityTrace:
    if _plain(text):
        fast = _gcloud_fast(text, where)
        if fast is not None:
            return fast
    ts, cs, locs = [], [], []
    for lineno, ln in _lines(text):
        m = _GCLOUD.match(ln)
        if not m:
            raise _fail(_GCLOUD_RULE, f"{where}:{lineno}", ln.strip()[:60])
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


_OOBLECK_RULE = "an Oobleck event trace of time_ms,add|remove,nodeID lines"


def _oobleck(text: str, where: str) -> AvailabilityTrace:
    if _plain(text):
        scan = _Scan(text, where, rf"{_NUMP}{_W},{_W}(add|remove){_W},{_W}([^ \t\r\n]+)")
        bad = scan.first_bad()
        if bad is not None:
            raise _fail(_OOBLECK_RULE, bad[0], bad[1][:60])
        raw_t, ops, ids = zip(*scan.rows(), strict=True)
        t = np.array(raw_t, dtype=float)
        k = _first_bad_time(t)
        if k is not None:
            raise _fail("a trace with finite times >= 0", scan.where_of(k), f"{t[k]:g}")
        t = t * 1e-3
        k = _first_decrease(t)
        if k is not None:
            raise _fail("a trace with non-decreasing times", scan.where_of(k),
                        f"{t[k]:g} after {t[k - 1]:g}")
        fast = _oobleck_fast(t, ops, ids, where)
        if fast is not None:
            return fast
        return _oobleck_trace(list(zip(t.tolist(), ops, ids, strict=True)), where, scan.where_of)
    events: list[tuple[float, str, str]] = []
    locs: list[str] = []
    for lineno, ln in _lines(text):
        m = _OOBLECK.match(ln)
        if not m:
            raise _fail(_OOBLECK_RULE, f"{where}:{lineno}", ln.strip()[:60])
        t = _finite_time(float(m.group(1)), f"{where}:{lineno}") * 1e-3
        events.append((t, m.group(2), m.group(3)))
        locs.append(f"{where}:{lineno}")
    _numbers_in_order([e[0] for e in events], locs)
    return _oobleck_trace(events, where, locs.__getitem__)


def _oobleck_fast(t: np.ndarray, ops: tuple[str, ...], ids: tuple[str, ...],
                  where: str) -> AvailabilityTrace | None:
    """:func:`_oobleck_trace` of valid events, vectorised; None when an event breaks a rule.

    Valid: every node added once, and removed at most once, at a later time
    than its addition (removals at a timestamp come before additions).
    """
    is_add = np.array([o == "add" for o in ops], dtype=bool)
    ids_arr = np.array(ids, dtype=object)
    add_ids, rem_ids = ids_arr[is_add], ids_arr[~is_add]
    t_add_of = dict(zip(add_ids.tolist(), t[is_add].tolist(), strict=True))
    if len(t_add_of) != len(add_ids) or len(set(rem_ids.tolist())) != len(rem_ids):
        return None
    t_rem = t[~is_add]
    try:
        t_add_rem = np.array([t_add_of[x] for x in rem_ids.tolist()], dtype=float)
    except KeyError:
        return None  # a node removed that was never added
    if np.any(t_add_rem >= t_rem):
        return None  # removed before it was added, or at the same timestamp
    # counts: per timestamp, the count after its removals, then after its additions
    uniq, first = np.unique(t, return_index=True)
    g = np.searchsorted(uniq, t)
    adds = np.bincount(g, weights=is_add, minlength=len(uniq)).astype(np.int64)
    rems = np.bincount(g, weights=~is_add, minlength=len(uniq)).astype(np.int64)
    before = np.concatenate(([0], np.cumsum(adds - rems)[:-1]))
    times = np.repeat(uniq, 2)
    counts = np.column_stack((before - rems, before - rems + adds)).ravel()
    keep = np.column_stack((rems > 0, adds > 0)).ravel()
    t_arr, counts = times[keep], counts[keep]
    _positive_span(t_arr, t_arr[-1], where)
    t0 = t_arr[0]
    # one up span per node added: from its addition to its removal (None: up at the end)
    end_of = dict(zip(rem_ids.tolist(), t_rem.tolist(), strict=True))
    a_start = t[is_add]
    name_rank = np.empty(len(add_ids), dtype=np.int64)
    name_rank[np.argsort(add_ids, kind="stable")] = np.arange(len(add_ids))
    order = np.lexsort((name_rank, a_start))
    nodes = add_ids[order].tolist()
    starts = (a_start[order] - t0).tolist()
    ends = [None if (e := end_of.get(x)) is None else e - t0 for x in nodes]
    shifted = _spans(nodes, starts, ends)
    return count_trace(t_arr, counts, t_arr[-1], format="oobleck", source=where,
                       nodes=shifted, reuse=False)


def _spans(nodes: list[str], starts: list[float], ends: list[float | None]) -> tuple[NodeSpan, ...]:
    """NodeSpans made at C speed (``tuple.__new__`` over the zipped fields)."""
    return tuple(map(functools.partial(tuple.__new__, NodeSpan), zip(nodes, starts, ends,
                                                                     strict=True)))


def _oobleck_trace(events: list[tuple[float, str, str]], where: str, where_of) -> AvailabilityTrace:
    """The trace of checked ``(time s, add|remove, node)`` events (``where_of(k)``: event k's line)."""
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
                raise _fail("an Oobleck trace that removes only nodes that are up", where_of(g),
                            node)
            spans.append(NodeSpan(node, up.pop(node), t))
        if removes:
            times.append(t)
            counts.append(len(up))
        for g in adds:
            node = events[g][2]
            if node in seen:
                raise _fail("an Oobleck trace that adds each node ID once", where_of(g), node)
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
    except RecursionError:  # [[[[...]]]] thousands deep: bad input, not a crash
        raise _fail("valid JSON", f"{where}:1", "nested too deeply") from None
    rule = 'a SkyPilot trace {"metadata": {"gap_seconds": g > 0}, "data": [counts >= 0]}'
    if not (isinstance(doc, dict) and isinstance(doc.get("metadata"), dict)
            and isinstance(doc.get("data"), list)):
        raise _fail(rule, f"{where}:1", "missing metadata or data")
    g = doc["metadata"].get("gap_seconds")
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not (math.isfinite(g) and g > 0):
        raise _fail(rule, f"{where}:1", f"gap_seconds {g!r}")
    data = doc["data"]
    # every sample an int >= 0, checked at C speed; else find the first that is not
    if not (data and set(map(type, data)) == {int} and min(data) >= 0):
        for i, v in enumerate(data):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise _fail(rule, f"{where}:1", f"data[{i}] = {v!r}")
    if len(data) < 2:
        raise _fail("a trace spanning a positive time", where, f"{len(data)} samples")
    t = np.arange(len(data), dtype=float) * float(g)
    return count_trace(t, data, t[-1], format="skypilot", source=where)


def _simgrid_fast(text: str, where: str, scale: float) -> AvailabilityTrace | None:
    """A valid plain profile at C speed; None for anything else (the line reader then runs)."""
    loop_line = rf"{_W}LOOPAFTER[ \t]+{_NUMP}{_END}"
    scan = _Scan(text, where, rf"{_NUMP}[ \t]+{_NUMP}",
                 skip=rf"(?!{_W}#)(?!{loop_line})")
    if scan.first_bad() is not None:
        return None
    loops = list(re.finditer(rf"(?m)^{loop_line}", text))
    loop = None
    if loops:
        if len(loops) > 1 or scan.line.search(text, loops[0].end()) is not None:
            return None
        loop = float(loops[0].group(1))
        if not (math.isfinite(loop) and loop >= 0):
            return None
    data = re.sub(rf"(?m)^(?:{_W}#.*|{loop_line})\n?", "", text.replace("\r\n", "\n"))
    if data.strip() == "":
        return None
    cols = _columns(data, 2, None)
    if cols is None:
        return None
    t, v = cols
    if (not np.all((v >= 0) & (v == np.trunc(v)) & (v < 2.0**63))
            or _first_bad_time(t) is not None or _first_decrease(t) is not None):
        return None
    t = t * scale
    end = t[-1] + (loop * scale if loop is not None else 0.0)
    _positive_span(t, end, where)
    return count_trace(t, v.astype(np.int64), end, format="simgrid", source=where,
                       loop_after=None if loop is None else loop * scale)


def _simgrid(text: str, where: str, scale: float) -> AvailabilityTrace:
    if _plain(text):
        fast = _simgrid_fast(text, where, scale)
        if fast is not None:
            return fast
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


def _dtsim(path: str, where: str, scale: float, text: str | None = None) -> AvailabilityTrace:
    from ..failures import read_trace

    tr = read_trace(path, text=text)
    workers = list(tr.intervals)
    n = len(workers)
    lens = np.array([len(tr.intervals[w]) for w in workers], dtype=np.int64)
    flat = [iv for w in workers for iv in tr.intervals[w]]
    s = np.array([iv[0] for iv in flat], dtype=float) * scale
    e = np.array([iv[1] for iv in flat], dtype=float) * scale
    end = float(e.max()) if len(e) else 0.0
    if not end > 0:
        raise _fail("a trace spanning a positive time", where, "no intervals")
    w = np.repeat(np.arange(n), lens)
    # adjacent down intervals of one worker are one outage: a new outage starts where the
    # worker is up again (the intervals are sorted and do not overlap, so a merged
    # outage ends where its last interval ends)
    same = np.zeros(len(s), dtype=bool)
    same[1:] = w[1:] == w[:-1]
    prev_end = np.zeros(len(s))
    prev_end[1:] = e[:-1]
    new = ~(same & (s <= prev_end))
    group = np.cumsum(new) - 1
    ms, mw = s[new], w[new]
    me = np.zeros(len(ms))
    np.maximum.at(me, group, e)
    # up spans: from 0 (or the end of the worker's last outage) to each outage's start,
    # and from the last outage's end on
    m_same = np.zeros(len(ms), dtype=bool)
    m_same[1:] = mw[1:] == mw[:-1]
    up_from = np.where(m_same, np.concatenate(([0.0], me[:-1])), 0.0)
    keep = ms > up_from
    last_end = np.zeros(n)
    last_end[mw] = me  # the last outage of each worker wins
    span_w = np.concatenate((mw[keep], np.arange(n)))
    span_s = np.concatenate((up_from[keep], last_end))
    span_e = np.concatenate((ms[keep], np.full(n, np.nan)))
    open_end = np.isnan(span_e)
    alive = np.where(open_end, span_s < end, span_e > span_s)
    names = np.array(workers, dtype=object)
    name_rank = np.empty(n, dtype=np.int64)
    name_rank[np.argsort(names, kind="stable")] = np.arange(n)
    order = np.lexsort((name_rank[span_w], span_s))
    order = order[alive[order]]
    spans_t = _spans([workers[k] for k in span_w[order].tolist()], span_s[order].tolist(),
                     [None if b != b else b for b in span_e[order].tolist()])
    # count after every change: downs before ups at one timestamp
    ct = np.concatenate((ms, me))
    cd = np.concatenate((np.full(len(ms), -1), np.full(len(me), 1)))
    o = np.lexsort((cd, ct))
    ct, cd = ct[o], cd[o]
    c = n + np.cumsum(cd)
    zero_down = (ct == 0.0) & (cd < 0)
    times = np.concatenate(([0.0], ct[~zero_down]))
    counts = np.concatenate(([n - int(zero_down.sum())], c[~zero_down]))
    return count_trace(times, counts, end, format="dtsim", source=where, nodes=spans_t, reuse=True)


def parse_trace_text(text: str, *, format: str = "auto", time_unit: str | None = None,
                     where: str = "<text>", path: str | None = None) -> AvailabilityTrace:
    """Parse a trace's text (see the module table); ``where`` names it in errors."""
    fmt = detect_format(text, where) if format == "auto" else check_format(format)
    if time_unit is not None:
        unit_seconds(time_unit)
        check(fmt in _UNIT_FREE or is_events_format(fmt), "time_unit",
              f"unset for a {fmt} trace (its file gives the unit)", time_unit)
    if is_events_format(fmt):
        return read_events(text, parse_events_spec(fmt), where, time_unit=time_unit)
    tr = _parse(text, fmt, where, path, None if time_unit is None else TIME_UNITS[time_unit])
    if time_unit is None and fmt in _UNIT_FREE:  # read as seconds: say so in the output
        tr = dataclasses.replace(tr, assumed_unit="s")
    return tr


def _parse(text: str, fmt: str, where: str, path: str | None,
           scale: float | None) -> AvailabilityTrace:
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
    return _dtsim(path, where, 1.0 if scale is None else scale, text=text)


def read_bytes(path: str | Path) -> bytes:
    """A trace file's bytes; one ConfigError line if it cannot be read.

    A regular file of at most :data:`~sim.errors.MAX_INPUT_BYTES` (256 MiB):
    a FIFO, a device or a folder is refused at once, without reading.
    """
    return read_input_bytes("trace", path, rule="a readable file or a shipped trace name")


def decode(data: bytes, where: str) -> str:
    """UTF-8 text of a trace file; binary or non-UTF-8 content is one ConfigError line."""
    if b"\x00" in data:
        raise _fail("a text file", where, f"binary content, NUL byte at offset {data.index(0)}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _fail("a UTF-8 text file", f"{where}:{line}",
                    f"byte 0x{data[exc.start]:02x} at offset {exc.start}") from None


def trace_digest(data: bytes) -> str:
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
        unit = known_units.get(trace_digest(data))
        if unit is not None:
            fmt = detect_format(text, where) if format == "auto" else format
            if fmt in _UNIT_FREE:
                time_unit = unit
    return parse_trace_text(text, format=format, time_unit=time_unit, where=where, path=str(path))
