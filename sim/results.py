"""Tidy result records and confidence intervals across replications.

Results are flat ``dict`` records (one per replication or task) that load
straight into :class:`pandas.DataFrame` or a CSV file. Estimates carry a
confidence interval computed across independent replications (Student t), the
only honest interval when successive observations inside one run are
correlated in time.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from .errors import ConfigError, check_choice, check_probability

__all__ = [
    "Estimate",
    "mean_ci",
    "summarize",
    "write_csv",
    "read_csv",
    "to_cell",
    "from_cell",
    "summary_rows",
    "format_number",
    "format_4g",
    "markdown_table",
    "write_tables",
    "as_array",
    "crossing",
    "write_report",
    "text_table",
    "print_table",
    "to_jsonable",
]


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and a two-sided confidence interval."""

    mean: float
    se: float
    low: float
    high: float
    n: int
    confidence: float = 0.95
    #: NaN values left out of the mean (see :func:`mean_ci`); ``n`` counts the others.
    dropped: int = 0

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def contains(self, value: float) -> bool:
        """True when ``value`` lies inside the interval."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        text = f"{self.mean:.6g} [{self.low:.6g}, {self.high:.6g}]"
        return text + (f" ({self.dropped} NaN left out)" if self.dropped else "")


def mean_ci(values: Iterable[float], confidence: float = 0.95, *, nan: str = "omit") -> Estimate:
    """Mean of independent replications with a Student-t confidence interval.

    Parameters
    ----------
    values : iterable of float
        One value per independent replication.
    confidence : float
        Two-sided confidence level, in (0, 1).
    nan : {"omit", "raise"}
        What a NaN value does: ``"omit"`` leaves it out and counts it in
        :attr:`Estimate.dropped` (``str`` of the estimate says so); ``"raise"``
        refuses the values.

    Returns
    -------
    Estimate
        With ``se = std(ddof=1) / sqrt(n)`` and half-width ``t_{n-1} * se``.
        With one value the interval is infinite; with none, all fields are NaN.

    Raises
    ------
    ConfigError
        For a confidence outside (0, 1), an unknown ``nan``, or a NaN with
        ``nan="raise"``.
    """
    check_probability("confidence", confidence, open_low=True, open_high=True)
    check_choice("nan", nan, ("omit", "raise"))
    x = np.asarray(list(values), dtype=float)
    missing = np.isnan(x)
    dropped = int(missing.sum())
    if dropped and nan == "raise":
        raise ConfigError("values", "numbers without NaN (or pass nan='omit')",
                          f"{dropped} NaN of {x.size}")
    x = x[~missing]
    n = int(x.size)
    if n == 0:
        v = math.nan
        return Estimate(v, v, v, v, 0, confidence, dropped)
    m = float(x.mean())
    if n == 1:
        return Estimate(m, math.inf, -math.inf, math.inf, 1, confidence, dropped)
    se = float(x.std(ddof=1) / math.sqrt(n))
    h = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    return Estimate(m, se, m - h, m + h, n, confidence, dropped)


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
        skip = {"point", "replication", "seed", "wall_time"}
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


# --------------------------------------------------------------------------- cells


def to_cell(value: Any) -> Any:
    """A value fit for one CSV cell: a Python scalar, a string or None.

    numpy scalars become Python numbers; arrays, lists, tuples and dicts become
    compact JSON; anything else that is not a scalar becomes its ``str``.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, (np.ndarray, list, tuple, dict)):
        arr = value.tolist() if isinstance(value, np.ndarray) else value
        try:
            return json.dumps(arr, separators=(",", ":"), default=str)
        except ValueError:
            return str(arr)
    return str(value)


def from_cell(text: str) -> Any:
    """Inverse of :func:`to_cell` for a cell read back from CSV (JSON stays text)."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def summary_rows(
    records: Sequence[Mapping[str, Any]],
    points: Sequence[Mapping[str, Any]],
    *,
    metrics: Sequence[str],
    confidence: float = 0.95,
    counts: bool = False,
) -> list[dict[str, Any]]:
    """Per-point summary of task records: one row per point.

    Parameters
    ----------
    records : list of dict
        Task records carrying ``point`` (the point index) and ``error``.
    points : list of dict
        Parameters of each point, in index order.
    metrics : list of str
        Metrics to estimate.
    confidence : float
        Level of the intervals.
    counts : bool
        Add ``m_n`` columns (see Returns).

    Returns
    -------
    list of dict
        ``point``, the point's parameters, ``replications`` (tasks without
        error), ``errors``, then for each metric ``m``: ``m_mean``, ``m_se``,
        ``m_low`` and ``m_high`` (Student-t interval across replications),
        and, with ``counts``, ``m_n`` (the number of values averaged) for
        every metric that is missing or NaN in some record of a point.
    """
    by_point: dict[int, list[Mapping[str, Any]]] = {i: [] for i in range(len(points))}
    for r in records:
        by_point.setdefault(int(r["point"]), []).append(r)
    rows, n_values = [], []
    short: set[str] = set()
    for i, params in enumerate(points):
        recs = by_point[i]
        ok = [r for r in recs if not r.get("error")]
        row: dict[str, Any] = {"point": i}
        row.update({k: to_cell(v) for k, v in params.items()})
        row["replications"] = len(ok)
        row["errors"] = len(recs) - len(ok)
        n_of = {}
        for m in metrics:
            vals = [float(r[m]) for r in ok if _numeric(r.get(m))]
            e = mean_ci(vals, confidence)
            row[f"{m}_mean"], row[f"{m}_se"] = e.mean, e.se
            row[f"{m}_low"], row[f"{m}_high"] = e.low, e.high
            n_of[m] = e.n
            if e.n != len(ok):
                short.add(m)
        rows.append(row)
        n_values.append(n_of)
    # A metric averaged over fewer values than the point's replications somewhere (missing or
    # NaN in some records) gets an ``m_n`` column: the count actually averaged, on every row.
    for row, n_of in zip(rows, n_values, strict=True) if counts else ():
        for m in metrics:
            if m in short:
                row[f"{m}_n"] = n_of[m]
    return rows


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


# --------------------------------------------------------------------------- report


def format_number(x: Any) -> str:
    """Compact text for a number in a table (4 significant digits, ``nan`` kept)."""
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    # Near +-1 (rates such as 1 - 1/(n(n-1))) keep 4 significant digits of the gap to 1.
    gap = abs(1.0 - abs(v))
    digits = 4 + max(0, math.ceil(-math.log10(gap)) - 1) if 0 < gap < 0.01 else 4
    return f"{v:.{digits}g}"


def format_4g(x: Any) -> str:
    """Plain text for a table cell: floats to 4 significant digits, anything else by ``str``.

    Unlike :func:`format_number`, booleans stay ``True``/``False``, None stays ``None`` and
    every non-finite float (``inf`` included) is written ``nan``; the stress experiments'
    tables use it.
    """
    if isinstance(x, float):
        return "nan" if not math.isfinite(x) else f"{x:.4g}"
    return str(x)


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: Callable[[Any], str] = format_number,
) -> str:
    """A Markdown table of some columns of ``rows``.

    Parameters
    ----------
    rows : list of dict
        One table line each; every row holds every column.
    columns : list of str
        Keys shown, in order (also the header).
    fmt : callable, optional
        Text of one cell (default :func:`format_number`).

    Returns
    -------
    str
        Header, separator and one line per row, joined by newlines (no final newline).
    """
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_tables(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    out_dir: str | Path,
    stem: str,
    title: str,
    fmt: Callable[[Any], str] = format_number,
) -> str:
    """Write ``rows`` as ``stem.csv`` (all public keys) and ``stem.md`` (a titled Markdown table).

    Parameters
    ----------
    rows : list of dict
        The table; keys starting with ``_`` (plot data) are left out of the CSV.
    columns : list of str
        Columns of the Markdown table.
    out_dir : path
        Folder of both files (created if needed).
    stem : str
        File name without extension.
    title : str
        First-level heading of the Markdown file.
    fmt : callable, optional
        Text of one Markdown cell (default :func:`format_number`).

    Returns
    -------
    str
        The Markdown table (without the heading), for printing.
    """
    out_dir = Path(out_dir)
    write_csv([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
              out_dir / f"{stem}.csv")
    text = markdown_table(rows, columns, fmt)
    (out_dir / f"{stem}.md").write_text(f"# {title}\n\n{text}\n")
    return text


def as_array(value: Any) -> np.ndarray:
    """A list-valued metric as a float array (stored results hold it as JSON text)."""
    return np.asarray(json.loads(value) if isinstance(value, str) else value, dtype=float)


def crossing(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, level: float) -> float:
    """First ``x`` where a decaying curve ``y`` falls to ``level``.

    Parameters
    ----------
    x, y : array-like
        The curve, ``x`` increasing.
    level : float
        The level (> 0).

    Returns
    -------
    float
        Interpolated log-linearly between the last point above ``level`` and
        the first at or below it (``x[0]`` when ``y[0]`` is already there);
        nan when ``y`` never reaches ``level``.
    """
    y = np.asarray(y, dtype=float)
    below = np.flatnonzero(y <= level)
    if below.size == 0:
        return math.nan
    k = int(below[0])
    if k == 0:
        return float(x[0])
    y0, y1 = y[k - 1], max(y[k], 1e-300)
    if not (y0 > 0):
        return float(x[k])
    f = (math.log(y0) - math.log(level)) / (math.log(y0) - math.log(y1))
    return float(x[k - 1] + f * (x[k] - x[k - 1]))


def _estimate_text(est: Any) -> str:
    if isinstance(est, Estimate):
        return f"{format_number(est.mean)} [{format_number(est.low)}, {format_number(est.high)}]"
    return format_number(est)


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_report(
    studies: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    title: str = "dtsim reproduction report",
    preamble: str = "",
) -> Path:
    """Write a Markdown report with one claims table per study and its figures.

    Parameters
    ----------
    studies : list of dict
        Each with ``title`` (str), ``rows`` (list of claim rows: dicts with
        ``claim``, ``exact``, ``estimate`` (an :class:`Estimate`, a number or
        None) and ``agrees`` (bool), optionally ``note``, listed under the
        table), ``figures`` (list of image paths, embedded
        relative to the report) and optionally ``error`` (a study that failed
        to run) and ``note`` (a line of text under the title).
    path : path
        The report file (``report.md``); its folder is created.
    title : str
        First heading.
    preamble : str
        Text under the title (for example the command and seed).

    Returns
    -------
    Path
        The file written (atomically).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n_claims = sum(len(s.get("rows", ())) for s in studies)
    n_bad = sum(1 for s in studies for r in s.get("rows", ()) if not r.get("agrees"))
    n_failed = sum(1 for s in studies if s.get("error"))
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    if n_bad == 0 and n_failed == 0:
        lines.append(f"All {n_claims} claims agree under the rule above.")
    else:
        lines.append(f"**{n_bad} of {n_claims} claims disagree; {n_failed} studies failed to run.**")
    lines.append("")
    for s in studies:
        lines += [f"## {s['title']}", ""]
        if s.get("note"):
            lines += [str(s["note"]), ""]
        if s.get("error"):
            lines += [f"**The study failed to run:** `{_md(s['error'])}`", ""]
        rows = s.get("rows", ())
        if rows:
            lines += ["| claim | exact | simulated (95% CI) | agrees |", "|---|---|---|---|"]
            for r in rows:
                agrees = "yes" if r.get("agrees") else "**no**"
                lines.append(f"| {_md(r.get('claim', ''))} | {_md(format_number(r.get('exact')))} | "
                             f"{_md(_estimate_text(r.get('estimate')))} | {agrees} |")
            lines.append("")
            notes = [(r.get("claim", ""), r.get("note")) for r in rows if r.get("note")]
            if notes:
                lines += ["Notes:", ""] + [f"- *{_md(c)}*: {_md(n)}" for c, n in notes] + [""]
        for fig in s.get("figures", ()):
            rel = os.path.relpath(Path(fig).resolve(), path.parent.resolve())
            lines += [f"![{Path(fig).stem}]({Path(rel).as_posix()})", ""]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)
    return path


def text_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain aligned text table (header, dashes, one line per row)."""
    header = tuple(map(str, header))
    cols = list(zip(*([header] + [tuple(map(str, r)) for r in rows]), strict=True))
    widths = [max(len(c) for c in col) for col in cols]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    return "\n".join(lines)


def print_table(rows: Sequence[Sequence[Any]], header: Sequence[str], file: Any = None) -> None:
    """Print :func:`text_table` (to ``file``, default stdout)."""
    print(text_table(rows, header), file=file)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses, estimates and non-finite floats for JSON."""
    if isinstance(obj, Estimate):
        return [to_jsonable(obj.low), to_jsonable(obj.high)]
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
        return to_jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
