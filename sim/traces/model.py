"""The one in-memory form of an availability trace.

Every reader produces an :class:`AvailabilityTrace`: a count step function
(how many instances were up, from each change time to the next) over a span,
plus, when the file names its nodes, each node's up periods.

Conventions (those of the shipped traces' README, held exactly):

- times are seconds from the trace's first timestamp, so ``times[0] == 0``;
  the span runs from the first to the last timestamp (``end``), except that a
  SimGrid profile with ``LOOPAFTER x`` spans one period, its last value held
  for ``x`` before the profile repeats;
- ``counts[i]`` holds on ``[times[i], times[i+1])`` and the last one on
  ``[times[-1], end]``; consecutive points with the same count are merged, but
  two changes at one timestamp are kept (a count that falls and rises again
  within a file's time resolution is a preemption and a replacement, and both
  count, though the dip lasts no time);
- in an event trace the removals at one timestamp come before the additions
  at that timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["NodeSpan", "AvailabilityTrace", "count_trace"]


class NodeSpan(NamedTuple):
    """One up period of a named node: up on ``[start, end)`` (``end`` None: up at the trace end).

    A named tuple (immutable, compared by value): a trace of a million spans
    is built at C speed.
    """

    node: str
    start: float
    end: float | None


@dataclass(frozen=True, eq=False)
class AvailabilityTrace:
    """A count step function over ``[0, end]`` with optional node identity.

    Attributes
    ----------
    times : numpy.ndarray
        Change times in seconds from the first timestamp (non-decreasing, ``times[0] == 0``).
    counts : numpy.ndarray
        Instances up from ``times[i]`` on (integers >= 0).
    end : float
        End of the span in seconds (> 0).
    format : str
        The reader that produced it (``bamboo``, ``gcloud``, ``oobleck``, ``skypilot``,
        ``simgrid``, ``dtsim``, or ``synthetic`` for a generated trace).
    source : str
        File path or shipped name.
    nodes : tuple of NodeSpan or None
        Up periods of named nodes when the file has identity (event traces, dtsim CSV).
    reuse : bool
        True when a node name can come back after going down (dtsim CSV: a name is a
        worker); False when a replacement joins under a new name (Oobleck).
    loop_after : float or None
        SimGrid ``LOOPAFTER``: the profile repeats with period ``end``.
    assumed_unit : str or None
        ``"s"`` when the file does not say its time unit and none was given, so its
        numbers were read as seconds (a Bamboo file of integer times, a SimGrid
        profile, a dtsim CSV, an event log of numeric times): said in the output,
        since hours read as seconds would otherwise pass silently. None otherwise.
    """

    times: np.ndarray
    counts: np.ndarray
    end: float
    format: str
    source: str = ""
    nodes: tuple[NodeSpan, ...] | None = None
    reuse: bool = False
    loop_after: float | None = None
    assumed_unit: str | None = None

    @property
    def span(self) -> float:
        """Length of the trace in seconds."""
        return float(self.end)

    @property
    def capacity(self) -> int:
        """The largest number of instances up at once."""
        return int(self.counts.max())

    def count_at(self, t: float | np.ndarray) -> np.ndarray:
        """Instances up at time(s) ``t`` (after every change at ``t``), ``0 <= t <= end``."""
        idx = np.searchsorted(self.times, t, side="right") - 1
        return self.counts[np.clip(idx, 0, None)]

    def __repr__(self) -> str:
        return (f"<AvailabilityTrace {self.format} {self.source!r}: {len(self.times)} points, "
                f"span {self.end:g} s, capacity {self.capacity}>")


def count_trace(times, counts, end: float, *, format: str, source: str = "",
                nodes: tuple[NodeSpan, ...] | None = None, reuse: bool = False,
                loop_after: float | None = None) -> AvailabilityTrace:
    """Normalise raw ``(time, count)`` points into an :class:`AvailabilityTrace`.

    Points are taken in order; a point repeating the count in force is dropped
    (the Bamboo files write every change twice, ``t,old`` then ``t,new``), so
    what is left is one point per change, two at a timestamp where the count
    moved twice. Times are shifted so that the first is 0.

    Parameters
    ----------
    times, counts : sequence
        Raw points in file order (times non-decreasing, in seconds).
    end : float
        Span end in the same clock as ``times`` (before the shift).
    format, source, nodes, reuse, loop_after
        As on :class:`AvailabilityTrace` (``nodes`` already shifted).
    """
    t = np.asarray(times, dtype=float)
    try:
        c = np.asarray(counts, dtype=np.int64)
    except OverflowError:  # a count no machine has: bad input, one line
        from ..errors import ConfigError

        raise ConfigError("trace", "a trace whose counts are below 2^63", source) from None
    t0 = t[0]
    keep = np.ones(len(c), dtype=bool)
    keep[1:] = c[1:] != c[:-1]
    tt = t[keep] - t0
    cc = c[keep]
    tt.setflags(write=False)
    cc.setflags(write=False)
    return AvailabilityTrace(tt, cc, float(end - t0), format, source, nodes, reuse, loop_after)
