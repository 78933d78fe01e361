"""Statistics of an availability trace, following the shipped traces' conventions exactly.

- ``duration``: from the first to the last timestamp (seconds);
- ``nodes`` (capacity): the largest number of instances up at once;
- ``mean_available``: the time-average number up; ``availability`` = that / capacity;
- a preemption event is a time at which the count falls (count trace) or at
  which one or more nodes are removed (event trace); its size is the number
  lost at that time (every fall recorded at the timestamp, so a dip and a
  replacement written at one timestamp count one event of the dip's size).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from .model import AvailabilityTrace

__all__ = ["preemption_events", "integral", "trace_stats"]


def preemption_events(trace: AvailabilityTrace) -> tuple[np.ndarray, np.ndarray]:
    """Times and sizes of the preemption events (one per timestamp with a fall).

    Returns
    -------
    times, sizes : numpy.ndarray
        Event times (seconds, increasing) and the number of instances lost at each.
    """
    t, c = trace.times, trace.counts
    fall = np.zeros(len(c), dtype=np.int64)
    fall[1:] = np.maximum(c[:-1] - c[1:], 0)
    idx = np.nonzero(fall)[0]
    if len(idx) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    ut, inv = np.unique(t[idx], return_inverse=True)
    sizes = np.zeros(len(ut), dtype=np.int64)
    np.add.at(sizes, inv, fall[idx])
    return ut, sizes


def integral(trace: AvailabilityTrace) -> float:
    """Instance-seconds up over the span: the integral of the count."""
    dt = np.diff(np.append(trace.times, trace.end))
    return float(np.dot(dt, trace.counts))


def _rises(trace: AvailabilityTrace) -> int:
    c = trace.counts
    return int(np.maximum(c[1:] - c[:-1], 0).sum())


def trace_stats(trace: AvailabilityTrace) -> dict[str, Any]:
    """The statistics ``dtsim trace stats`` prints.

    Returns
    -------
    dict
        ``format``, ``nodes`` (capacity), ``duration`` (s), ``mean_available``,
        ``availability``, ``preemption_events``, ``preempted_nodes``,
        ``batch_fraction`` (events removing two or more at once / events),
        ``preemptions_per_hour`` (events per hour of span),
        ``preempted_nodes_per_hour``, ``event_sizes`` (``{size: events}``),
        ``mean_event_size``, ``node_ids`` (distinct named nodes, event traces),
        ``mean_up`` and ``mean_down`` (seconds; below), ``returns`` (instances
        coming up after the start).

    Notes
    -----
    ``mean_up`` is the total instance-time up divided by the number of
    instances lost, and ``mean_down`` the total slot-time down (capacity times
    span minus the time up) divided by the number of instances coming back:
    the renewal estimates of mean up and down time of one of ``capacity``
    worker slots, which do not depend on which slot a mapping policy takes
    down (every policy loses and returns the same numbers at the same times).
    For an event trace a slot's up periods are its nodes' lifetimes. ``None``
    when nothing was lost (or nothing came back).
    """
    cap = trace.capacity
    span = trace.span
    up = integral(trace)
    et, sizes = preemption_events(trace)
    n_ev = int(len(sizes))
    lost = int(sizes.sum())
    returns = _rises(trace)
    down = cap * span - up
    hours = span / 3600.0
    out: dict[str, Any] = {
        "format": trace.format,
        "source": trace.source,
        "nodes": cap,
        "duration": span,
        "mean_available": up / span,
        "availability": up / (span * cap) if cap else math.nan,
        "preemption_events": n_ev,
        "preempted_nodes": lost,
        "batch_fraction": float(np.mean(sizes >= 2)) if n_ev else 0.0,
        "preemptions_per_hour": n_ev / hours,
        "preempted_nodes_per_hour": lost / hours,
        "event_sizes": {int(k): int(v) for k, v in sorted(Counter(sizes.tolist()).items())},
        "mean_event_size": lost / n_ev if n_ev else None,
        "node_ids": len({s.node for s in trace.nodes}) if trace.nodes is not None else None,
        "mean_up": up / lost if lost else None,
        "mean_down": down / returns if returns else None,
        "returns": returns,
    }
    if trace.assumed_unit is not None:
        out["time_unit_assumed"] = trace.assumed_unit
    if trace.loop_after is not None:
        out["loop_after"] = trace.loop_after
    return out
