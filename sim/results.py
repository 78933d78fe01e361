"""Tidy result records and confidence intervals across replications.

Results are flat ``dict`` records (one per replication or task) that load
straight into :class:`pandas.DataFrame` or a CSV file. Estimates carry a
confidence interval computed across independent replications (Student t), the
only honest interval when successive observations inside one run are
correlated in time.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["Estimate", "mean_ci", "summarize", "write_csv", "read_csv"]


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a two-sided confidence interval."""

    mean: float
    se: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def contains(self, value: float) -> bool:
        """True when ``value`` lies inside the interval."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.mean:.6g} [{self.low:.6g}, {self.high:.6g}]"


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Mean of independent replications with a Student-t confidence interval.

    Parameters
    ----------
    values : iterable of float
        One value per independent replication (NaNs are ignored).
    confidence : float
        Two-sided confidence level.

    Returns
    -------
    Estimate
        With ``se = std(ddof=1) / sqrt(n)`` and half-width ``t_{n-1} * se``.
        With one value the interval is infinite; with none, all fields are NaN.
    """
    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return Estimate(nan, nan, nan, nan, 0, confidence)
    m = float(x.mean())
    if n == 1:
        return Estimate(m, math.inf, -math.inf, math.inf, 1, confidence)
    se = float(x.std(ddof=1) / math.sqrt(n))
    h = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    return Estimate(m, se, m - h, m + h, n, confidence)


def summarize(
    records: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> dict[str, Estimate]:
    """Estimate each numeric metric across replication records.

    Records carrying an ``error`` are skipped. When ``metrics`` is None every
    numeric field except ``replication`` and ``seed`` is summarised.
    """
    ok = [r for r in records if not r.get("error")]
    if metrics is None:
        skip = {"replication", "seed", "wall_time"}
        metrics = [
            k for k, v in (ok[0].items() if ok else [])
            if k not in skip and isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, bool)
        ]
    return {m: mean_ci([float(r[m]) for r in ok if r.get(m) is not None], confidence) for m in metrics}


def write_csv(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write records as CSV (union of keys, in first-seen order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for r in records:
        for k in r:
            if k not in fields:
                fields.append(k)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in records:
            w.writerow(r)
    return path


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Read records written by :func:`write_csv`, converting numbers back."""

    def conv(v: str) -> Any:
        if v == "":
            return None
        for t in (int, float):
            try:
                return t(v)
            except ValueError:
                pass
        return v

    with Path(path).open(newline="") as fh:
        return [{k: conv(v) for k, v in row.items()} for row in csv.DictReader(fh)]
