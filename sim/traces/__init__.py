"""Real preemption traces: readers, statistics, trace -> workers policies, fits, a generator.

- :func:`load_trace` reads a shipped trace by name (:data:`SHIPPED`, ``dtsim
  trace list``) or any supported file by path (:mod:`sim.traces.readers`:
  Bamboo, Google Cloud, Oobleck, SkyPilot JSON, SimGrid profiles, dtsim CSV)
  into one :class:`AvailabilityTrace` (a count step function, with node
  identity when the file has it).
- :func:`trace_stats` follows the shipped traces' conventions exactly.
- :class:`TraceReplay` (a value-only config) turns a trace into per-worker
  down intervals under a mapping policy, with speed-up, window, looping,
  tiling and resampled replications (:mod:`sim.traces.replay`);
  :func:`attach` adds replayed workers to any :class:`sim.failures.FailureModel`.
- :func:`fit_trace` fits durations and burst sizes with scipy.stats;
  :func:`fit_model` gives a :class:`BurstyModel` that generates look-alikes;
  :func:`fit_domains` fits the bursts as a domain hierarchy of
  :mod:`sim.failures` (its ``cluster_config()`` plugs into ``ClusterConfig``).
"""

from .fit import (
    BurstyModel,
    envelope,
    fit_durations,
    fit_model,
    fit_sizes,
    fit_trace,
    independent_model,
)
from .fit_domains import DomainFit, cluster_trace, fit_domains
from .model import AvailabilityTrace, NodeSpan, count_trace
from .readers import FORMATS, TIME_UNITS, detect_format, parse_trace_text, read_trace_file
from .registry import SHIPPED, load_trace, shipped_names, shipped_path
from .replay import (
    POLICIES,
    RESAMPLING,
    TraceEnded,
    TraceReplay,
    attach,
    block_bootstrap,
    end_guard,
    slot_patterns,
    trace_slots,
)
from .stats import integral, preemption_events, trace_stats
from .writers import format_trace, write_trace

__all__ = [
    "AvailabilityTrace", "NodeSpan", "count_trace",
    "FORMATS", "TIME_UNITS", "detect_format", "parse_trace_text", "read_trace_file",
    "SHIPPED", "load_trace", "shipped_names", "shipped_path",
    "POLICIES", "RESAMPLING", "TraceReplay", "block_bootstrap", "slot_patterns", "trace_slots",
    "TraceEnded", "attach", "end_guard",
    "integral", "preemption_events", "trace_stats", "format_trace", "write_trace",
    "BurstyModel", "envelope", "fit_durations", "fit_model", "fit_sizes", "fit_trace",
    "independent_model", "DomainFit", "fit_domains", "cluster_trace",
]
