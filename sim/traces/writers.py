"""Write an :class:`AvailabilityTrace` in any of the formats the readers take.

The writers exist so that every reader can be checked by a round trip
(write, read back, compare) and so that a generated or bootstrapped trace
can be saved and replayed by path. Each writes what its format can say:

- ``bamboo``: ``t,count`` with every change written twice (``t,old``,
  ``t,new``) and a closing line at the span's end, times in ``time_unit``;
- ``gcloud``: a sample at every change and at the end, dated from ``origin``
  (times must be whole seconds);
- ``skypilot``: the count every ``gap`` seconds (every change must fall on
  the grid, and no two at one time);
- ``simgrid``: ``date value`` at every change, ``LOOPAFTER`` when the trace
  loops, else a closing line at the end;
- ``oobleck``: the node events of a trace with identity (no reuse), in ms;
- ``dtsim``: per-worker down intervals, from the trace's own workers or from
  a mapping policy's slots (zero-length outages cannot be written and are
  left out).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from ..errors import check, check_choice, check_positive
from .model import AvailabilityTrace
from .readers import FORMATS, unit_seconds

__all__ = ["write_trace", "format_trace"]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def format_trace(trace: AvailabilityTrace, format: str, *, time_unit: str = "s",
                 gap: float | None = None, origin: str = "2000-01-01 00:00:00",
                 policy: str = "recent") -> str:
    """The text of ``trace`` in ``format`` (see the module notes).

    Raises
    ------
    ConfigError
        When the format cannot hold the trace (say, node events without identity).
    """
    check_choice("trace_format", format, FORMATS)
    t, c, end = trace.times, trace.counts, trace.end
    if format == "bamboo":
        k = unit_seconds(time_unit)
        lines = [f"{_num(t[0] / k)},{c[0]}"]
        for i in range(1, len(t)):
            lines += [f"{_num(t[i] / k)},{c[i - 1]}", f"{_num(t[i] / k)},{c[i]}"]
        if end > t[-1]:
            lines.append(f"{_num(end / k)},{c[-1]}")
        return "\n".join(lines) + "\n"
    if format == "gcloud":
        check(bool(np.all(np.mod(np.append(t, end), 1.0) == 0)), "trace",
              "whole seconds for the gcloud format", trace.source)
        t0 = datetime.strptime(origin, "%Y-%m-%d %H:%M:%S")
        pts = list(zip(t.tolist(), c.tolist(), strict=True))
        if end > t[-1]:
            pts.append((end, int(c[-1])))
        return "".join(f"{(t0 + timedelta(seconds=s)).strftime('%Y-%m-%d, %H:%M:%S')}, {n}\n"
                       for s, n in pts)
    if format == "skypilot":
        g = check_positive("gap", gap)
        steps = np.append(t, end) / g
        check(bool(np.all(steps == np.round(steps))) and len(np.unique(t)) == len(t), "trace",
              f"changes on a grid of {g:g} s, one at a time, for the skypilot format",
              trace.source)
        grid = np.arange(int(round(end / g)) + 1) * g
        return json.dumps({"metadata": {"gap_seconds": g},
                           "data": [int(v) for v in trace.count_at(grid)]}) + "\n"
    if format == "simgrid":
        k = unit_seconds(time_unit)
        lines = [f"{_num(s / k)} {n}" for s, n in zip(t.tolist(), c.tolist(), strict=True)]
        if trace.loop_after is not None:
            lines.append(f"LOOPAFTER {_num(trace.loop_after / k)}")
        elif end > t[-1]:
            lines.append(f"{_num(end / k)} {c[-1]}")
        return "\n".join(lines) + "\n"
    if format == "oobleck":
        check(trace.nodes is not None and not trace.reuse, "trace",
              "an event trace with node identity (no reuse) for the oobleck format", trace.source)
        ev = []
        for sp in trace.nodes:  # type: ignore[union-attr]
            ev.append((sp.start, 1, sp.node))
            if sp.end is not None:
                ev.append((sp.end, 0, sp.node))
        ev.sort(key=lambda e: (e[0], e[1]))
        return "".join(f"{_num(s * 1000.0)},{'add' if kind else 'remove'},{node}\n"
                       for s, kind, node in ev)
    # dtsim
    from .replay import slot_patterns

    k = unit_seconds(time_unit)
    pats = slot_patterns(trace, policy=policy)
    names = (list(dict.fromkeys(sp.node for sp in trace.nodes))  # type: ignore[union-attr]
             if trace.reuse and trace.nodes is not None else [f"w{i}" for i in range(len(pats))])
    rows = ["worker,start,end,state"]
    for name, pat in zip(names, pats, strict=True):
        rows.append(f"{name},0,{_num(end / k)},up")  # every worker named, even one never down
        rows += [f"{name},{_num(s / k)},{_num(e / k)},down" for s, e in pat if e > s]
    return "\n".join(rows) + "\n"


def write_trace(trace: AvailabilityTrace, path: str | Path, format: str, **kw) -> Path:
    """Write ``trace`` to ``path`` in ``format`` (options as for :func:`format_trace`)."""
    from ..errors import write_atomic

    p = Path(path)
    write_atomic(p, format_trace(trace, format, **kw))  # (smallfix8) atomic, links kept
    return p
