"""A user's own event log: a CSV with a header, read by the column names and event words given.

The format is named on the command line as ``--trace-format events[:key=value,...]`` (the
house's ``NAME[:key=value,...]`` spec), the file stays ``--failure-trace FILE``:

==========  =============================================  ===============================
key         what                                           default
==========  =============================================  ===============================
worker      the column naming the instance                 ``worker``
time        the column of times                            ``time``
event       the column of event words                      ``event``
down        words that take the instance down (``a/b``)    ``down``
up          words that bring it (back) up (``a/b``)        ``up``
ignore      words of rows to skip (``pending/stopping``)   none
start       time zero (a time as the column writes it)     the first event
end         the end of the span (likewise)                 the last event
==========  =============================================  ===============================

Rules (docs/traces.md says them to users):

- Column names are matched exactly (surrounding spaces stripped); event words
  ignoring case and surrounding spaces. A word in two lists is refused, and a
  row whose word is in none is refused naming its line.
- Times are all ISO-8601 (``2024-03-01T12:00:05Z``, ``+02:00`` offsets, or all
  without an offset, read as one clock) or all numbers: epoch seconds, or
  ``--time-unit``'s unit. Offsets are converted to one clock; a log mixing
  times with and without an offset, or ISO times and numbers, is refused.
  Differences are exact (integer microseconds, decimal numbers) and rounded
  once to seconds.
- Rows are taken in time order whatever their order in the file; at one
  timestamp the ``down`` events come before the ``up`` events (as in an
  Oobleck trace), so the result does not depend on row order.
- Before its first event an instance is in the other state: up from time zero
  if its first event is ``down``, down until it if it is ``up`` (not yet
  launched). A repeated event (``down`` while down) changes nothing. An
  instance down at the last event stays down to the end of the span.
- The result is an event trace with identity (as Oobleck's): its capacity
  (the most instances up at once) is the number of worker slots; instances
  take slots in the order they first come up (time, then file order), a
  returning instance takes back its own slot when that is still down, and
  otherwise a joining instance takes a down slot by the mapping policy's
  return rule. Worker ``k`` replays slot ``k``.

Nothing in the file is run or evaluated: the cells are text compared with the words given.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal

import numpy as np

from ..errors import ConfigError, check
from .model import AvailabilityTrace, NodeSpan, count_trace

__all__ = ["EventSpec", "parse_events_spec", "is_events_format", "read_events"]

_KEYS = ("worker", "time", "event", "down", "up", "ignore", "start", "end")
_SPEC_RULE = "events[:key=value,...] with keys " + ", ".join(_KEYS)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_EXACT = Context(prec=80, Emax=MAX_EMAX, Emin=MIN_EMIN)  # no overflow: inf is refused after


@dataclass(frozen=True)
class EventSpec:
    """The columns and words of an event log (``events[:key=value,...]``)."""

    worker: str = "worker"
    time: str = "time"
    event: str = "event"
    down: tuple[str, ...] = ("down",)
    up: tuple[str, ...] = ("up",)
    ignore: tuple[str, ...] = ()
    start: str | None = None
    end: str | None = None

    def __post_init__(self) -> None:
        for k in ("worker", "time", "event"):
            check(isinstance(getattr(self, k), str) and getattr(self, k).strip() != "",
                  "trace_format", f"a column name for {k}=", getattr(self, k))
        check(len({self.worker, self.time, self.event}) == 3, "trace_format",
              "three different columns for worker=, time= and event=",
              f"{self.worker}, {self.time}, {self.event}")
        seen: dict[str, str] = {}
        for k in ("down", "up", "ignore"):
            for w in getattr(self, k):
                check(w.strip() != "", "trace_format", f"non-empty words in {k}=", w)
                key = w.strip().casefold()
                check(key not in seen, "trace_format",
                      "each event word in one of down=, up=, ignore= (ignoring case)",
                      f"{w} in {seen.get(key)}= and {k}=")
                seen[key] = k
        check(bool(self.down) and bool(self.up), "trace_format",
              "an events spec with down= and up= words", f"down={self.down}, up={self.up}")

    def kind(self, word: str) -> str | None:
        """``down``, ``up``, ``ignore`` or None for a cell's word."""
        key = word.strip().casefold()
        for k in ("down", "up", "ignore"):
            if key in (w.strip().casefold() for w in getattr(self, k)):
                return k
        return None


def is_events_format(fmt: object) -> bool:
    """Whether a ``--trace-format`` value names the event-log reader."""
    return isinstance(fmt, str) and (fmt == "events" or fmt.startswith("events:"))


def parse_events_spec(text: str) -> EventSpec:
    """The :class:`EventSpec` of ``events[:key=value,...]`` (one ConfigError line if malformed).

    Words of ``down``, ``up`` and ``ignore`` are separated by ``/``
    (``down=preempted/terminated``); a value runs to the next comma.
    """
    check(is_events_format(text), "trace_format", _SPEC_RULE, text)
    _, colon, rest = text.partition(":")
    check(not colon or rest.strip() != "", "trace_format",
          _SPEC_RULE + " (a colon followed by at least one key=value)", text)
    kw: dict[str, object] = {}
    for part in (p.strip() for p in rest.split(",")) if colon else ():
        key, eq, val = part.partition("=")
        key, val = key.strip(), val.strip()
        check(bool(eq and key and val), "trace_format", _SPEC_RULE + " (each option key=value)",
              part)
        check(key in _KEYS, "trace_format", "a key of events (" + ", ".join(_KEYS) + ")", key)
        check(key not in kw, "trace_format", "each key once", key)
        kw[key] = tuple(w.strip() for w in val.split("/")) if key in ("down", "up",
                                                                     "ignore") else val
    return EventSpec(**kw)  # type: ignore[arg-type]


def _fail(rule: str, where: str, found: str = "") -> ConfigError:
    return ConfigError("trace", rule, f"{where} ({found})" if found else where)


class _Clock:
    """Times of one log: all numbers or all ISO-8601, with or without offsets, never mixed.

    :meth:`read` gives an exact value (a Decimal of the column's unit, or integer
    microseconds); :meth:`seconds` the difference of two in seconds, rounded once.
    """

    def __init__(self, scale: Decimal | None) -> None:
        self.kind: str | None = None  # "number", "naive", "aware"
        self.first = ""
        self.scale = scale

    def _kind_of(self, cell: str) -> tuple[str, object] | None:
        if _NUMBER.fullmatch(cell):
            return "number", Decimal(cell)
        if not cell.isascii():
            return None
        try:
            d = datetime.fromisoformat(cell)
        except ValueError:
            return None
        if d.tzinfo is None:
            return "naive", (d - _EPOCH) // _MICRO
        return "aware", (d - _EPOCH_UTC) // _MICRO

    def read(self, cell: str, where: str) -> object:
        got = self._kind_of(cell.strip())
        if got is None:
            raise _fail("an event log whose times are ISO-8601 (2024-03-01T12:00:05Z) or "
                        "numbers (epoch seconds)", where, repr(cell))
        kind, value = got
        if self.kind is None:
            self.kind, self.first = kind, cell.strip()
        elif kind != self.kind:
            words = {"number": "numbers", "naive": "ISO-8601 without an offset",
                     "aware": "ISO-8601 with an offset (Z, +02:00)"}
            raise _fail(f"an event log whose times are all {words[self.kind]}, as its first "
                        f"({self.first})", where, repr(cell))
        return value

    def seconds(self, a: object, b: object) -> float:
        """``a - b`` in seconds."""
        if self.kind == "number":
            d = _EXACT.subtract(a, b)  # type: ignore[arg-type]
            if self.scale is not None:
                d = _EXACT.multiply(d, self.scale)
            return float(d)
        return (a - b) / 1_000_000  # type: ignore[operator]  # int / int: rounded once


def _bound(clock: _Clock, key: str, text: str) -> object:
    """``start=`` or ``end=`` read in the log's clock (named as the spec's key when not)."""
    try:
        return clock.read(text, key)
    except ConfigError:
        raise ConfigError("trace_format", f"{'an' if key == 'end' else 'a'} {key}= time "
                          "written as the log's times are "
                          f"(as its first, {clock.first})", text) from None


def read_events(text: str, spec: EventSpec, where: str, *,
                time_unit: str | None = None) -> AvailabilityTrace:
    """The :class:`AvailabilityTrace` of an event log's text (see the module notes).

    Parameters
    ----------
    text : str
        The file's text (decoded).
    spec : EventSpec
    where : str
        The file, named in errors as ``file:line``.
    time_unit : str, optional
        Unit of numeric times (default seconds); refused with ISO-8601 times.

    Raises
    ------
    ConfigError
        One line naming the file and line and the rule broken.
    """
    from .readers import TIME_UNITS

    scale = None if time_unit is None else Decimal(repr(TIME_UNITS[time_unit]))
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise _fail("a non-empty trace file", where, "no data lines") from None
    except csv.Error as exc:
        raise _fail("a CSV event log", f"{where}:1", str(exc)) from None
    names = [h.strip() for h in header]
    cols = {}
    for key in ("worker", "time", "event"):
        col = getattr(spec, key)
        if col not in names:
            raise _fail(f"an event log with a column {col!r} ({key}= of --trace-format)",
                        f"{where}:1", "columns: " + ", ".join(names)[:200])
        # (audit 8) a column named twice: which one the log means is unknown (the first was
        # read silently)
        if names.count(col) > 1:
            raise _fail(f"an event log with one column {col!r} ({key}= of --trace-format)",
                        f"{where}:1", f"{names.count(col)} columns named {col!r}")
        cols[key] = names.index(col)
    need = max(cols.values()) + 1
    clock = _Clock(scale)
    rows: list[tuple[object, int, int, str, str]] = []  # (time, 0 down / 1 up, row, worker, where)
    try:
        for row in reader:
            line = f"{where}:{reader.line_num}"
            if not row or all(c.strip() == "" for c in row):
                continue
            if len(row) > len(names) and any(c.strip() for c in row[len(names):]):
                # (audit 8) more cells than the header names: a comma in a cell, columns
                # shifted (the cells past the header were dropped silently)
                raise _fail(f"an event log row of at most the header's {len(names)} cells",
                            line, ",".join(row)[:60])
            if len(row) < need:
                raise _fail(f"an event log row with the {spec.worker!r}, {spec.time!r} and "
                            f"{spec.event!r} cells", line, ",".join(row)[:60])
            word = row[cols["event"]]
            kind = spec.kind(word)
            if kind is None:
                raise _fail("an event log whose events are down (" + "/".join(spec.down)
                            + ") or up (" + "/".join(spec.up) + ")"
                            + (" or ignored (" + "/".join(spec.ignore) + ")" if spec.ignore
                               else ""), line, repr(word.strip()))
            if kind == "ignore":
                continue
            worker = row[cols["worker"]].strip()
            if worker == "":
                raise _fail(f"an event log with an instance in {spec.worker!r} on every row",
                            line)
            t = clock.read(row[cols["time"]], line)
            rows.append((t, 0 if kind == "down" else 1, len(rows), worker, line))
    except csv.Error as exc:
        raise _fail("a CSV event log", f"{where}:{reader.line_num}", str(exc)) from None
    if not rows:
        raise _fail("an event log with at least one down or up event", where, "none")
    if time_unit is not None and clock.kind != "number":
        raise ConfigError("time_unit", "unset for an event log of ISO-8601 times (they give "
                          "their own unit)", time_unit)
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    first, last = rows[0], rows[-1]
    t0 = first[0] if spec.start is None else _bound(clock, "start", spec.start)
    t_end = last[0] if spec.end is None else _bound(clock, "end", spec.end)
    if first[0] < t0:  # type: ignore[operator]
        raise _fail("an event log whose events are at or after start=", first[4],
                    f"{clock.seconds(t0, first[0]):g} s before {spec.start}")
    if last[0] > t_end:  # type: ignore[operator]
        raise _fail("an event log whose events are at or before end=", last[4],
                    f"{clock.seconds(last[0], t_end):g} s after {spec.end}")
    end = clock.seconds(t_end, t0)
    if not math.isfinite(end):
        raise _fail("a trace with finite times", where, f"a span of {end:g} s")
    if not end > 0:
        raise _fail("a trace spanning a positive time", where,
                    f"first and last times {clock.seconds(rows[0][0], t0):g}, {end:g} s")
    # walk the events in time order: up spans per instance
    up_since: dict[str, float] = {}
    known: set[str] = set()
    spans: list[tuple[float, int, str, float | None]] = []  # (start, first-up rank, node, end)
    rank: dict[str, int] = {}
    prev: tuple[object, float] | None = None
    for t_raw, kind, _, worker, line in rows:
        t = clock.seconds(t_raw, t0)
        # (audit 8) two times made one by rounding to seconds from a far time zero (start=-1e300
        # put a launch and a preemption at one instant: a KeyError in the replay)
        if prev is not None and t_raw != prev[0] and t == prev[1]:
            raise _fail("an event log whose different times stay different in seconds from its "
                        "time zero (start=, else its first event)", line, f"{t:g} s as the "
                        "row before")
        prev = (t_raw, t)
        if worker not in known:
            known.add(worker)
            if kind == 0 and t > 0:  # first seen going down: up from time zero
                rank.setdefault(worker, len(rank))
                spans.append((0.0, rank[worker], worker, t))
            elif kind == 1:
                rank.setdefault(worker, len(rank))
                up_since[worker] = t
            continue
        if kind == 0 and worker in up_since:
            s = up_since.pop(worker)
            spans.append((s, rank[worker], worker, t))
        elif kind == 1 and worker not in up_since:
            rank.setdefault(worker, len(rank))
            up_since[worker] = t
    for worker, s in up_since.items():
        spans.append((s, rank[worker], worker, None))
    spans.sort(key=lambda x: (x[0], x[1]))
    nodes = tuple(NodeSpan(w, s, e) for s, _, w, e in spans)
    # the count: at each timestamp the removals, then the additions
    changes: dict[float, list[int]] = {}
    for sp in nodes:
        changes.setdefault(sp.start, [0, 0])[1] += 1
        if sp.end is not None:
            changes.setdefault(sp.end, [0, 0])[0] += 1
    times: list[float] = []
    counts: list[int] = []
    c = 0
    for t in sorted(changes):
        rem, add = changes[t]
        if rem:
            c -= rem
            times.append(t)
            counts.append(c)
        if add:
            c += add
            times.append(t)
            counts.append(c)
    if not times or times[0] > 0:  # nothing up at time zero: the count starts at 0
        times.insert(0, 0.0)
        counts.insert(0, 0)
    if max(counts) == 0:
        raise _fail("an event log with an instance up at some time", where, "none ever up")
    tr = count_trace(np.asarray(times), counts, end, format="events", source=where,
                     nodes=nodes, reuse=False)
    if time_unit is None and clock.kind == "number":
        tr = dataclasses.replace(tr, assumed_unit="s")
    return tr
