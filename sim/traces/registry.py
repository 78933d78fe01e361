"""The shipped traces, by name, and :func:`load_trace` for a name or a path.

The files live in ``sim/traces/data`` with their licences and an attribution
README (Bamboo, uclasystem/bamboo; Oobleck, SymbioticLab/Oobleck; both MIT).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .model import AvailabilityTrace
from .readers import decode, parse_trace_text, read_bytes, read_trace_file, trace_digest

__all__ = ["ShippedTrace", "SHIPPED", "shipped_names", "shipped_path", "load_trace",
           "trace_bytes"]


@dataclass(frozen=True)
class ShippedTrace:
    """A trace shipped with dtsim: its file, format, time unit and provenance."""

    name: str
    file: str
    format: str
    time_unit: str | None
    source: str
    description: str


_BAMBOO = "Bamboo artifact (uclasystem/bamboo, MIT)"
_OOBLECK = "Oobleck artifact (SymbioticLab/Oobleck, sosp23-artifact, MIT)"

SHIPPED: dict[str, ShippedTrace] = {t.name: t for t in (
    ShippedTrace("aws-p2-3day", "aws-p2-3day.csv", "bamboo", "h", _BAMBOO,
                 "EC2 p2.xlarge spot instances, 2020-11-20 to 2020-11-23 (times in hours)"),
    ShippedTrace("aws-g4dn-24h", "aws-g4dn-24h.csv", "bamboo", "s", _BAMBOO,
                 "EC2 g4dn.xlarge spot instances, us-east-1c, 2020-11-20 19:30 to 11-21 22:00"),
    ShippedTrace("aws-p2-19h", "aws-p2-19h.csv", "bamboo", "s", _BAMBOO,
                 "EC2 p2.xlarge spot instances, us-east-1e, 2020-11-23 17:00 to 11-24 07:00"),
    ShippedTrace("gcp-a100", "gcp-a100.txt", "gcloud", None, _BAMBOO,
                 "Google Cloud a100x1 preemptible VMs, us-east1-b, 2021-12-11 to 12-12"),
    ShippedTrace("aws-p3", "aws-p3.csv", "oobleck", None, _OOBLECK,
                 "EC2 p3 spot instances, node add/remove events (177 node IDs)"),
    ShippedTrace("synthetic-10m", "synthetic-10m.csv", "oobleck", None, _OOBLECK,
                 "synthetic: a failure about every 10 minutes"),
    ShippedTrace("synthetic-6h", "synthetic-6h.csv", "oobleck", None, _OOBLECK,
                 "synthetic: a failure about every 6 hours"),
)}


def shipped_names() -> list[str]:
    """Names of the shipped traces, in listing order."""
    return list(SHIPPED)


def shipped_path(name: str) -> Path:
    """Path of a shipped trace's file."""
    return Path(str(resources.files("sim.traces") / "data" / SHIPPED[name].file))


@functools.lru_cache(maxsize=1)
def known_units() -> dict[str, str]:
    """``sha256 -> time unit`` of the shipped files whose format cannot tell its unit."""
    out = {}
    for t in SHIPPED.values():
        if t.time_unit is not None:
            out[trace_digest(shipped_path(t.name).read_bytes())] = t.time_unit
    return out


def trace_bytes(trace: str) -> bytes:
    """The bytes of a shipped trace (by name) or of a file (by path)."""
    return read_bytes(shipped_path(trace) if trace in SHIPPED else trace)


def load_trace(trace: str, *, format: str = "auto",
               time_unit: str | None = None) -> AvailabilityTrace:
    """Load a shipped trace by name, or any trace file by path.

    Parameters
    ----------
    trace : str
        A name from :data:`SHIPPED` (``dtsim trace list``) or a file path.
    format : str
        ``auto`` or a reader name (see :mod:`sim.traces.readers`).
    time_unit : str, optional
        Where the file cannot tell; a shipped trace carries its own.

    Raises
    ------
    ConfigError
        For an unknown name that is no readable file, or a malformed file.
    """
    if trace in SHIPPED:
        meta = SHIPPED[trace]
        data = shipped_path(trace).read_bytes()
        fmt = meta.format if format == "auto" else format
        unit = meta.time_unit if time_unit is None else time_unit
        return parse_trace_text(decode(data, trace), format=fmt, time_unit=unit, where=trace,
                                path=str(shipped_path(trace)))
    return read_trace_file(trace, format=format, time_unit=time_unit)
