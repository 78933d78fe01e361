"""Region-pair tables: a latency and a bandwidth for every pair of regions (the ``geo`` layout).

A table is a CSV file (``topologies/data/README.md`` describes the format)
or the name of a shipped one (:data:`PRESETS`: measurements between cloud
regions published by DT-FM, MIT licence). :func:`read_region_pairs` reads
either into a :class:`RegionPairs` value. Its ``latency`` and ``bandwidth``
columns take plain numbers (seconds, bytes per second) or numbers with a unit
(``40ms``, ``10Gbit/s``: :mod:`sim.units`), as every link of
:mod:`topologies` does; ``latency_ms`` and ``bandwidth_gbps`` name their unit
and take plain numbers.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import ConfigError, check, read_csv_text
from sim.units import RATE, TIME, has_unit, parse

__all__ = ["PRESETS", "RegionPairs", "read_region_pairs", "DATA"]

#: The folder of the shipped tables.
DATA = Path(__file__).resolve().parent / "data"
#: Shipped tables by name (see ``topologies/data/README.md`` for the sources).
PRESETS = {"dtfm-world": "regions-dtfm-world.csv", "dtfm-us": "regions-dtfm-us.csv"}
#: Unit columns: name -> factor to the simulator's units (seconds, bytes per second).
_UNITS = {"latency": 1.0, "latency_ms": 1e-3, "bandwidth": 1.0, "bandwidth_gbps": 1e9 / 8}
#: What each column holds (its values may carry a unit in the columns without one in their name).
_KINDS = {"latency": TIME, "latency_ms": TIME, "bandwidth": RATE, "bandwidth_gbps": RATE}


def _value(text: str, col: str, where: str) -> float:
    """A table value in seconds or bytes per second: a plain number times the column's
    factor, or (``latency`` and ``bandwidth`` columns) a number with a unit
    (:mod:`sim.units`: ``40ms``, ``10Gbit/s``)."""
    t = text.strip()
    if has_unit(t):
        check(_UNITS[col] == 1.0, "pairs", f"plain numbers in {col} (its unit is in its name)",
              where)
        try:
            return parse(t, _KINDS[col], col)
        except ConfigError as exc:
            raise ConfigError("pairs", f"{col} values that are {exc.rule}", where) from None
    try:
        return float(t) * _UNITS[col]
    except ValueError:
        raise ConfigError("pairs", "numeric latency and bandwidth", where) from None


@dataclass(frozen=True)
class RegionPairs:
    """A region-pair table (values only).

    Attributes
    ----------
    names : tuple of str
        Regions, in the order they first appear.
    latency, bandwidth : tuple of tuple of float
        Symmetric ``k x k`` matrices (diagonal: inside a region, NaN when the
        table does not say).
    source : str
        The preset name or the file path.
    with_units : bool
        Whether its values were written in stated units (columns ``latency_ms`` and
        ``bandwidth_gbps``, or values such as ``40ms``), not as plain numbers in the
        simulator's units (what the mixed-units warning of :mod:`sim.units` asks).
    """

    names: tuple[str, ...]
    latency: tuple[tuple[float, ...], ...]
    bandwidth: tuple[tuple[float, ...], ...]
    source: str
    with_units: bool = False

    def select(self, names: tuple[str, ...]) -> RegionPairs:
        """The table restricted to ``names`` (in that order)."""
        missing = [n for n in names if n not in self.names]
        check(not missing, "names", f"regions of {self.source} ({'/'.join(self.names)})",
              "/".join(names))
        idx = [self.names.index(n) for n in names]
        lat = np.asarray(self.latency)[np.ix_(idx, idx)]
        bw = np.asarray(self.bandwidth)[np.ix_(idx, idx)]
        return RegionPairs(tuple(names), tuple(map(tuple, lat.tolist())),
                           tuple(map(tuple, bw.tolist())), self.source, self.with_units)


def read_region_pairs(spec: Any) -> RegionPairs:
    """Read a region-pair table: a shipped name (:data:`PRESETS`) or a CSV path.

    Raises
    ------
    ConfigError
        Naming ``pairs``: a missing file, a bad header, a malformed or
        negative value, a pair given twice, a pair missing.
    """
    check(isinstance(spec, (str, Path)) and str(spec).strip() != "", "pairs",
          "a shipped table (" + ", ".join(PRESETS) + ") or a CSV file of region pairs", spec)
    name = str(spec).strip()
    path = DATA / PRESETS[name] if name in PRESETS else Path(name)
    try:
        text = read_csv_text("pairs", path)
    except ConfigError as exc:
        raise ConfigError("pairs", "a shipped table (" + ", ".join(PRESETS) + ") or a CSV "
                          "file of region pairs", name) from exc
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = [h.strip() for h in next(reader, [])]
    lat_col = next((h for h in header if h in ("latency", "latency_ms")), None)
    bw_col = next((h for h in header if h in ("bandwidth", "bandwidth_gbps")), None)
    rule = "a CSV with columns a,b,latency,bandwidth (or latency_ms,bandwidth_gbps)"
    check(header[:2] == ["a", "b"] and lat_col is not None and bw_col is not None, "pairs",
          rule, f"{name} (header {','.join(header)})")
    il, ib = header.index(lat_col), header.index(bw_col)
    names: list[str] = []
    table: dict[tuple[str, str], tuple[float, float]] = {}
    with_units = _UNITS[lat_col] != 1.0 or _UNITS[bw_col] != 1.0
    for lineno, row in enumerate(reader, start=2):
        if not row or not any(x.strip() for x in row):
            continue
        where = f"{name} (row {lineno - 1}: {','.join(row)})"
        check(len(row) == len(header), "pairs", rule, where)
        a, b = row[0].strip(), row[1].strip()
        check(a != "" and b != "", "pairs", "rows naming two regions", where)
        lat = _value(row[il], lat_col, where)
        bw = _value(row[ib], bw_col, where)
        with_units = with_units or has_unit(row[il].strip()) or has_unit(row[ib].strip())
        check(math.isfinite(lat) and lat >= 0, "pairs", "latencies >= 0", where)
        check(bw > 0, "pairs", "bandwidths > 0 (inf allowed)", where)
        key = (a, b) if a <= b else (b, a)
        check(key not in table, "pairs", "each pair of regions once", where)
        table[key] = (lat, bw)
        for x in (a, b):
            if x not in names:
                names.append(x)
    k = len(names)
    check(k >= 1, "pairs", "at least one region", name)
    lat_m = np.full((k, k), math.nan)
    bw_m = np.full((k, k), math.nan)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            key = (a, b) if a <= b else (b, a)
            v = table.get(key)
            if v is None:
                check(i == j, "pairs", "every pair of the regions it names",
                      f"{name} ({a}-{b} missing)")
                continue
            lat_m[i, j], bw_m[i, j] = v
    return RegionPairs(tuple(names), tuple(map(tuple, lat_m.tolist())),
                       tuple(map(tuple, bw_m.tolist())), name, with_units)
