"""Workers that fail and recover, in a hierarchy of correlated failure domains.

Every *component* (a domain such as a region, rack or host, or a worker) has
its own up/down process: an alternating renewal process whose up and down
durations come from a pluggable duration law (exponential, Weibull,
lognormal, Pareto, deterministic, or one added by :func:`register_distribution`) or
from a replayed trace. The same laws, at mean 1, give the pipeline its random
compute times. A component is
*effectively* up when it and every ancestor domain are up, so a domain outage
takes down every worker below it at the same instant, and they come back only
when both they and the domain are up.

Components announce effective transitions as SimPy events
(:meth:`Component.next_transition`) and through callbacks
(:meth:`Component.on_change`); nothing polls. The cause carried by a transition
is a frozen :class:`Transition`, suitable for ``process.interrupt(cause)``.

Stationary start
----------------
Each process starts in its stationary regime: up with probability
``mean_up / (mean_up + mean_down)``, and the time to the first transition drawn
from the *equilibrium* (residual-life) distribution of the current phase. For
an alternating renewal process this makes the state at every time ``t >= 0``
distributed as in the long run, for every distribution offered here (not only
the exponential), so availability is right from time 0 and no warm-up is
needed. Residual lives are sampled exactly as ``U * X~`` with ``U`` uniform and
``X~`` the length-biased duration: ``Gamma(1 + 1/k)``-based for Weibull,
``lognormal(mu + sigma**2, sigma)`` for lognormal, Pareto of tail index
``alpha - 1`` (same scale) for Pareto, the constant itself for
deterministic. A replayed trace starts at trace time 0 as recorded (no
stationarity claim).

A failure closes its instant
----------------------------
A component goes down at SimPy priority :data:`LATE`, after every URGENT and
NORMAL event of its instant (:func:`failure_timeout`): a pass, a step, an
outer sync or a transfer that ends at exactly the failure's time ``t`` is done
before the failure takes effect, and what that work starts at ``t`` is cut by
it. It is the rule of ``--max-time T`` (work ending at ``T`` counts,
:mod:`sim.training.instant`), which runs after the failures of ``T`` as well;
the learners engine orders its events the same way
(:mod:`sim.training.learners`). Without it the order of a failure and a pass
ending at the same time was the order their events were scheduled in, so a
trace with whole-second times and 3 s steps lost a step or kept it depending
on history. Recoveries keep SimPy's NORMAL priority.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import simpy

from .errors import (
    ConfigError,
    ascii_float,
    check,
    check_choice,
    check_int,
    check_memory_terms,
    check_positive,
    check_probability,
    read_csv_text,
)
from .rng import Streams

#: SimPy priority of a component's going down: after URGENT (0) and NORMAL (1), so every
#: other event of its instant, the work ending then included, is done first (the module).
LATE = 2


def failure_timeout(env: simpy.Environment, delay: float) -> simpy.Event:
    """A timeout of ``delay`` at priority :data:`LATE` (a failure's time: the module)."""
    ev = simpy.Event(env)
    ev._ok = True  # triggered, as simpy's Timeout sets it, and scheduled at LATE
    ev._value = None
    env.schedule(ev, LATE, delay)
    return ev

__all__ = [
    "LATE",
    "failure_timeout",
    "CycleRates",
    "cycle_rates",
    "DISTRIBUTIONS",
    "Distribution",
    "Exponential",
    "Weibull",
    "LogNormal",
    "Pareto",
    "Deterministic",
    "make_distribution",
    "register_distribution",
    "unregister_distribution",
    "distribution_names",
    "check_distribution",
    "check_law",
    "check_shape",
    "Transition",
    "Component",
    "Domain",
    "Worker",
    "FailureModel",
    "GroupMonitor",
    "Trace",
    "read_trace",
    "up_down_means",
    "ClusterConfig",
    "layout_domains",
    "failures_model",
]

#: The built-in up/down duration laws (:func:`register_distribution` adds more).
DISTRIBUTIONS = ("exponential", "weibull", "lognormal", "deterministic", "pareto")
#: Memory of one simulated worker or domain (its SimPy process and state), measured.
BYTES_PER_PROCESS = 3_300


# --------------------------------------------------------------------------- distributions
#
# A duration law is any object with a ``mean``, ``sample(rng, size=None)`` (one
# duration, or an array of ``size``) and ``residual(rng)`` (one draw of the
# equilibrium residual life, for the stationary start). The same objects give
# the failure processes their durations and the pipeline its unit-mean compute
# times (``make_distribution(kind, 1.0, shape).sample(rng, n)``).


@dataclass(frozen=True)
class Exponential:
    """Exponential durations with the given mean (memoryless)."""

    mean: float

    def __post_init__(self) -> None:
        check_positive("mean", self.mean)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One duration (a float), or an array of ``size`` durations."""
        if size is None:
            return float(rng.exponential(self.mean))
        return rng.exponential(self.mean, size)

    def residual(self, rng: np.random.Generator) -> float:
        """Equilibrium residual life (for the exponential, the law itself)."""
        return float(rng.exponential(self.mean))


@dataclass(frozen=True)
class Weibull:
    """Weibull durations with the given mean and shape ``k`` (k < 1: heavy tail)."""

    mean: float
    shape: float = 0.7

    def __post_init__(self) -> None:
        check_positive("mean", self.mean)
        check_shape("shape", "weibull", self.shape)

    @property
    def scale(self) -> float:
        """``mean / Gamma(1 + 1/k)``."""
        return self.mean / math.gamma(1.0 + 1.0 / self.shape)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One duration (a float), or an array of ``size`` durations.

        The array is ``mean * (W / Gamma(1 + 1/k))``, the single draw
        ``(mean / Gamma(1 + 1/k)) * W``: the same law, each rounded as its
        callers (the pipeline's unit-mean compute times, the failure processes)
        always rounded it, so no number moves.
        """
        if size is None:
            return float(self.scale * rng.weibull(self.shape))
        return self.mean * (rng.weibull(self.shape, size) / math.gamma(1.0 + 1.0 / self.shape))

    def residual(self, rng: np.random.Generator) -> float:
        """Equilibrium residual life: ``U`` times the length-biased duration."""
        # Length-biased Weibull: (X/scale)**k ~ Gamma(1 + 1/k, 1).
        g = rng.gamma(1.0 + 1.0 / self.shape)
        return float(rng.random() * self.scale * g ** (1.0 / self.shape))


@dataclass(frozen=True)
class LogNormal:
    """Lognormal durations with the given mean and log-scale ``sigma``."""

    mean: float
    sigma: float = 1.0

    def __post_init__(self) -> None:
        check_positive("mean", self.mean)
        check_shape("sigma", "lognormal", self.sigma)

    @property
    def mu(self) -> float:
        """``log(mean) - sigma**2 / 2``."""
        return math.log(self.mean) - self.sigma**2 / 2

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One duration (a float), or an array of ``size`` durations."""
        if size is None:
            return float(rng.lognormal(self.mu, self.sigma))
        return rng.lognormal(self.mu, self.sigma, size)

    def residual(self, rng: np.random.Generator) -> float:
        """Equilibrium residual life: ``U`` times the length-biased duration."""
        # Length-biased lognormal(mu, s) is lognormal(mu + s**2, s).
        return float(rng.random() * rng.lognormal(self.mu + self.sigma**2, self.sigma))


@dataclass(frozen=True)
class Deterministic:
    """Every duration equals ``mean``."""

    mean: float

    def __post_init__(self) -> None:
        check_positive("mean", self.mean)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """``mean`` (or an array of ``size`` copies)."""
        if size is None:
            return self.mean
        return np.full(size, float(self.mean))

    def residual(self, rng: np.random.Generator) -> float:
        """Equilibrium residual life: uniform on ``[0, mean]``."""
        return float(rng.random() * self.mean)


@dataclass(frozen=True)
class Pareto:
    """Pareto (type I) durations with the given mean and tail index ``alpha > 1``.

    ``P(X > x) = (x_m / x)**alpha`` for ``x >= x_m = mean (alpha - 1) / alpha``.
    The mean is finite only for ``alpha > 1`` (the variance only for
    ``alpha > 2``), so a law given by its mean needs ``alpha > 1``; the order
    statistics of ``n`` draws have finite means under weaker conditions
    (:func:`sim.analytic.order_statistic_mean`).
    """

    mean: float
    shape: float

    def __post_init__(self) -> None:
        check_positive("mean", self.mean)
        check(isinstance(self.shape, (int, float)) and not isinstance(self.shape, bool)
              and math.isfinite(self.shape) and self.shape > 1, "shape",
              "> 1 for a Pareto law (its mean is infinite at alpha <= 1)", self.shape)

    @property
    def scale(self) -> float:
        """``x_m = mean (alpha - 1) / alpha``, the least duration."""
        return self.mean * (self.shape - 1.0) / self.shape

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One duration (a float), or an array of ``size`` durations (``x_m (1 + Lomax)``)."""
        if size is None:
            return float(self.scale * (1.0 + rng.pareto(self.shape)))
        return self.scale * (1.0 + rng.pareto(self.shape, size))

    def residual(self, rng: np.random.Generator) -> float:
        """Equilibrium residual life: ``U`` times the length-biased duration."""
        # Length-biased Pareto(alpha, x_m) (density x f(x) / mean) is Pareto(alpha - 1, x_m).
        return float(rng.random() * self.scale * (1.0 + rng.pareto(self.shape - 1.0)))


def _pareto(mean: float, shape: float | None) -> Pareto:
    check(shape is not None, "shape", "given for a Pareto law (its tail index alpha > 1)", shape)
    return Pareto(mean, shape)  # type: ignore[arg-type]


Distribution = Exponential | Weibull | LogNormal | Pareto | Deterministic

#: Name -> ``factory(mean, shape)`` of every duration law (built-in and registered).
_LAWS: dict[str, Callable[[float, float | None], Any]] = {
    "exponential": lambda mean, shape: Exponential(mean),
    "weibull": lambda mean, shape: Weibull(mean, 0.7 if shape is None else shape),
    "lognormal": lambda mean, shape: LogNormal(mean, 1.0 if shape is None else shape),
    "deterministic": lambda mean, shape: Deterministic(mean),
    "pareto": _pareto,
}


def register_distribution(name: str, factory: Callable[[float, float | None], Any]) -> None:
    """Add a duration law usable by name wherever a distribution is asked for.

    Parameters
    ----------
    name : str
        The law's name (``failure_distribution``, ``distribution``,
        ``stage_time_distribution``, ``--distribution``).
    factory : callable
        ``factory(mean, shape)`` returning an object with ``mean``,
        ``sample(rng, size=None)`` and ``residual(rng)`` (see
        :class:`Weibull`); ``shape`` is None when not given.

    Notes
    -----
    The registry lives in the process: a process pool started afterwards
    sees the law when the module that registers it is imported by the task
    (the experiment file or the model's module).
    """
    check(isinstance(name, str) and name != "" and ":" not in name, "name",
          "a non-empty name without ':'", name)
    check(callable(factory), "factory", "a callable factory(mean, shape)", factory)
    _LAWS[name] = factory


def unregister_distribution(name: str) -> None:
    """Remove a law added by :func:`register_distribution` (built-in laws stay).

    Parameters
    ----------
    name : str
    """
    check(name not in DISTRIBUTIONS, "name", "a law added by register_distribution", name)
    _LAWS.pop(name, None)


def distribution_names() -> tuple[str, ...]:
    """Every duration law's name, built-in ones first."""
    return tuple(_LAWS)


def check_distribution(name: str, value: Any) -> str:
    """Check that ``value`` names a duration law (the one rule for every config)."""
    return check_choice(name, value, distribution_names())


#: Largest lognormal sigma: ``exp(sigma**2 / 2)``, the mean over the median (and the
#: length-biased law's factor), must be a finite double (sigma**2 / 2 < log(max float)).
MAX_LOGNORMAL_SIGMA = math.sqrt(2.0 * math.log(sys.float_info.max))


def check_shape(name: str, kind: str, shape: Any) -> float:
    """Check a law's shape: > 0, and small or large enough for the law's moments to be doubles.

    A Weibull shape ``k`` needs ``Gamma(1 + 1/k)`` finite (``k`` above about
    0.0058); a lognormal ``sigma`` needs ``exp(sigma**2 / 2)`` finite (at most
    :data:`MAX_LOGNORMAL_SIGMA`, about 37.7). Otherwise every replication
    would fail with an overflow.

    Raises
    ------
    ConfigError
        Naming ``name``.
    """
    v = check_positive(name, shape)
    if kind == "weibull":
        try:
            math.gamma(1.0 + 1.0 / v)
        except OverflowError:
            raise ConfigError(name, "a Weibull shape k with Gamma(1 + 1/k) finite (k above "
                              "about 0.0058)", shape) from None
    elif kind == "lognormal" and v > MAX_LOGNORMAL_SIGMA:
        raise ConfigError(name, f"a lognormal sigma of at most {MAX_LOGNORMAL_SIGMA:.4g} "
                          "(exp(sigma^2 / 2) must be finite)", shape)
    return v


def make_distribution(kind: str, mean: float, shape: float | None = None) -> Any:
    """Build a duration distribution by name.

    Parameters
    ----------
    kind : str
        ``"exponential"``, ``"weibull"``, ``"lognormal"``, ``"deterministic"``,
        ``"pareto"``, or a name added by :func:`register_distribution`.
    mean : float
        Mean duration (> 0).
    shape : float, optional
        Weibull shape ``k`` (default 0.7), lognormal ``sigma`` (default 1.0) or
        Pareto tail index ``alpha`` (> 1, no default); ignored by the others.

    Returns
    -------
    object
        A duration law (``mean``, ``sample``, ``residual``).
    """
    check_distribution("distribution", kind)
    return _LAWS[kind](mean, shape)


def check_law(kind_name: str, kind: str, shape_name: str, shape: float | None) -> Any:
    """Check that ``kind`` and ``shape`` make a duration law, naming the config's fields.

    Builds the law at mean 1 (:func:`make_distribution`), so a shape the law
    refuses (a Pareto tail index <= 1 or none) is refused before any
    simulation, as ``'shape_name' must be ...``; a given shape first passes
    :func:`check_shape` (Weibull and lognormal shapes whose moments overflow).
    """
    check_distribution(kind_name, kind)
    if shape is not None:
        check_shape(shape_name, kind, shape)
    try:
        return make_distribution(kind, 1.0, shape)
    except ConfigError as exc:
        if exc.name == "shape":
            raise ConfigError(shape_name, exc.rule, exc.value) from None
        raise


def up_down_means(availability: float, mean_downtime: float, *, name: str = "availability") -> tuple[float, float]:
    """Mean up and down times from availability ``a`` and mean downtime ``d``.

    ``mean_up = a d / (1 - a)``. ``a = 1`` gives an infinite up time (never
    fails); ``a = 0`` gives an infinite down time (never recovers).
    """
    a = check_probability(name, availability)
    d = check_positive("mean_downtime", mean_downtime)
    if a == 1.0:
        return math.inf, d
    if a == 0.0:
        return d, math.inf
    return a * d / (1.0 - a), d


#: The most up/down transitions of workers and domains a discrete-event run may expect to
#: simulate (per replication): the pipeline DES handles about 70,000 a second on this
#: project's 2-core machine (48 stages x 3 replicas, hop latency 1000: 1.6e6 in 23 s), so 1e8
#: is about 25 minutes of CPU; a run past it is a runaway, refused before any work.
MAX_TRANSITIONS = 1e8


class CycleRates(NamedTuple):
    """Failure cycles a unit of time (each two up/down transitions), by source: the workers'
    availability model, the failure domains, the spot slots."""

    workers: float
    domains: float
    spot: float

    @property
    def total(self) -> float:
        """All cycles a unit of time (the correctly rounded sum)."""
        return math.fsum(self)


def cycle_rates(*, workers: float = 0, availability: float = 1.0, mean_downtime: float = 1.0,
                domain_outages: Iterable[float] = (), domain_downtime: float = 1.0,
                domain_copies: float = 1, spot: float = 0, mtbf: float = math.inf,
                replace_time: float = 0.0) -> CycleRates:
    """The one rate rule of :data:`MAX_TRANSITIONS` budgets: failure cycles a unit of time.

    A worker of availability ``0 < a < 1`` cycles every ``mean_downtime / (1 - a)`` (its mean
    up plus down time, :func:`up_down_means`), ``workers`` of them; a domain of unavailability
    ``0 < u < 1`` every ``domain_downtime / u``, each of ``domain_outages`` counted
    ``domain_copies`` times (the pipeline study's one value for its per-stage domains); a spot
    slot every ``mtbf + replace_time``, ``spot`` of them. Availability 0 or 1 (an outage 0 or
    1) never changes state. Expected transitions over a length ``t``: ``2 * total * t``.
    The caller names the parameter to blame (its own config's)."""
    w = 0.0
    if 0.0 < availability < 1.0:
        w = workers * (1.0 - availability) / mean_downtime
    d = domain_copies * sum(u / domain_downtime for u in domain_outages if 0.0 < u < 1.0)
    s = spot / (mtbf + replace_time) if spot and mtbf < math.inf else 0.0
    return CycleRates(w, d, s)


def check_transitions(n: float, name: str, value: Any, length: str) -> None:
    """Refuse a run expecting more than :data:`MAX_TRANSITIONS` up/down transitions (``n``),
    naming the parameter that drives them (a downtime or an mtbf must be large enough, the rest
    small).

    Parameters
    ----------
    n : float
        The expected transitions: 2 x failures per unit time x the run's length.
    name, value : str, Any
        The parameter to name and its value as given.
    length : str
        What the run's length is, in words (``"the horizon"``).
    """
    if n > MAX_TRANSITIONS:
        if isinstance(value, tuple) and len(set(value)) == 1:
            value = value[0]
        how = "large" if name.endswith("downtime") or name == "mtbf" else "small"
        raise ConfigError(name, f"{how} enough that the simulation expects at most "
                          f"{MAX_TRANSITIONS:.0e} worker and domain up/down transitions (2 x "
                          f"failures per unit time x {length}: {n:.2g} here)", value)


# --------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class Trace:
    """Replayed outage intervals: ``intervals[worker] = ((start, end), ...)`` of downtime."""

    intervals: dict[str, tuple[tuple[float, float], ...]]
    path: str = ""

    @property
    def workers(self) -> list[str]:
        return list(self.intervals)


def _read_trace_fast(text: str, path: str | Path) -> Trace | None:
    """:func:`read_trace` of a valid file at C speed (csv.reader, numpy); None otherwise.

    Anything unusual -- a row with a missing or extra cell, a value that is
    not a number, a bad state, time or name, overlapping intervals -- returns
    None, and the row-by-row reader then names the first problem exactly.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header or not {"worker", "start", "end"} <= set(header):
        return None
    rows = [r for r in reader if r]  # DictReader skips empty rows too
    width = len(header)
    if not rows or any(len(r) != width for r in rows):
        return None
    col = {name: header.index(name) for name in ("worker", "start", "end", "state")
           if name in header}
    # DictReader keeps the last of repeated column names
    col = {name: width - 1 - header[::-1].index(name) for name in col}
    iw, i_s, i_e = col["worker"], col["start"], col["end"]
    if not text.isascii() and not all(r[i_s].isascii() and r[i_e].isascii() for r in rows):
        return None  # numpy reads other scripts' digits as float() does: the row reader refuses
    try:
        start = np.array([r[i_s] for r in rows], dtype=float)
        end = np.array([r[i_e] for r in rows], dtype=float)
    except ValueError:
        return None
    if not np.all(np.isfinite(start) & np.isfinite(end) & (start >= 0) & (start < end)):
        return None
    names = [r[iw].strip() for r in rows]
    if "" in names:
        return None
    down = np.ones(len(rows), dtype=bool)
    if "state" in col:
        i_st = col["state"]
        raw = [r[i_st] for r in rows]
        states = {v: (v or "down").strip().lower() for v in set(raw)}
        if not set(states.values()) <= {"up", "down"}:
            return None
        down = np.array([states[v] == "down" for v in raw], dtype=bool)
    # workers in order of first appearance (the dict order of the row-by-row reader)
    uniq, first, code = np.unique(np.array(names, dtype=object), return_index=True,
                                  return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    wc = rank[code]
    d_w, d_s, d_e = wc[down], start[down], end[down]
    idx = np.lexsort((d_e, d_s, d_w))  # per worker, intervals sorted as tuples are
    d_w, d_s, d_e = d_w[idx], d_s[idx], d_e[idx]
    same = d_w[1:] == d_w[:-1]
    if np.any(same & (d_s[1:] < d_e[:-1])):
        return None  # overlapping intervals of one worker
    bounds = np.searchsorted(d_w, np.arange(len(order) + 1))
    pairs = list(zip(d_s.tolist(), d_e.tolist(), strict=True))
    out = {str(uniq[order[k]]): tuple(pairs[bounds[k]:bounds[k + 1]]) for k in range(len(order))}
    return Trace(out, str(path))


def read_trace(path: str | Path, *, text: str | None = None) -> Trace:
    """Read a CSV trace of per-worker down intervals.

    The file has a header with columns ``worker,start,end`` and optionally
    ``state`` (``down``, the default, or ``up``; rows marked ``up`` only
    document up periods, which are implied between down intervals). A worker
    is up outside its down intervals; after its last interval it stays up.
    The file is read by :func:`sim.errors.read_csv_text` (a regular file of
    at most :data:`sim.errors.MAX_INPUT_BYTES`).

    Parameters
    ----------
    path : path
        The file (named in errors).
    text : str, optional
        Its text, when already read.

    Raises
    ------
    ConfigError
        Naming ``trace``, when the file is missing, unreadable or malformed
        (with the line number and what is wrong).
    """
    p = Path(path)
    if text is None:
        text = read_csv_text("trace", p)
    fast = _read_trace_fast(text, path)
    if fast is not None:
        return fast
    fh = io.StringIO(text, newline="")
    per: dict[str, list[tuple[float, float]]] = {}
    with fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        check({"worker", "start", "end"} <= cols, "trace",
              "a CSV file with columns worker,start,end", f"{path} (columns: {sorted(cols)})")
        for lineno, row in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            state = (row.get("state") or "down").strip().lower()
            check(state in ("up", "down"), "trace", "a CSV file whose state is up or down", f"{where} ({state})")
            try:
                start, end = ascii_float(row["start"]), ascii_float(row["end"])
            except (TypeError, ValueError):
                raise ConfigError("trace", "a CSV file of numeric start,end",
                                  f"{where} ({row['start']!r}, {row['end']!r})") from None
            check(math.isfinite(start) and math.isfinite(end) and 0 <= start < end, "trace",
                  "a CSV file with 0 <= start < end", f"{where} ({start}, {end})")
            worker = (row["worker"] or "").strip()
            check(worker != "", "trace", "a CSV file with a worker name on every row", where)
            if state == "down":
                per.setdefault(worker, []).append((start, end))
            else:
                per.setdefault(worker, [])
    check(bool(per), "trace", "a CSV file with at least one interval", str(path))
    out: dict[str, tuple[tuple[float, float], ...]] = {}
    for w, ivs in per.items():
        ivs.sort()
        for (s0, e0), (s1, _) in zip(ivs, ivs[1:], strict=False):
            check(s1 >= e0, "trace", "a CSV file without overlapping intervals per worker",
                  f"{path} (worker {w}: [{s0}, {e0}] overlaps [{s1}, ...])")
        out[w] = tuple(ivs)
    return Trace(out, str(path))


# --------------------------------------------------------------------------- components


@dataclass(frozen=True)
class Transition:
    """An effective up/down transition of a component (an interrupt cause)."""

    component: str
    up: bool
    time: float


class Component:
    """A failure domain or worker: an own up/down process under a parent domain.

    Attributes
    ----------
    name : str
    parent : Domain or None
    own_up : bool
        State of this component's own process.
    up : bool
        Effective state: own state and every ancestor up.
    """

    kind = "component"

    def __init__(self, model: FailureModel, name: str, parent: Domain | None) -> None:
        self.model = model
        self.env = model.env
        self.name = name
        self.parent = parent
        self.children: list[Component] = []
        self.own_up = True
        self.up = True
        self._callbacks: list[Callable[[Component, bool, float], None]] = []
        self._own_callbacks: list[Callable[[Component, bool, float], None]] = []
        self._event: simpy.Event | None = None
        self._since = 0.0
        self.up_time = 0.0
        self.own_up_time = 0.0
        self._own_since = 0.0
        self.transitions = 0  # effective transitions
        self.own_transitions = 0
        # Time of the next *scheduled* own transition (inf: none; 0: not known
        # yet). Set by the driving process; lets a reader know for certain
        # that nothing changes before then (the pipeline's lookahead).
        self.next_own_change = 0.0
        if parent is not None:
            parent.children.append(self)

    # -- observation -------------------------------------------------------
    def next_transition(self) -> simpy.Event:
        """An event that fires with a :class:`Transition` at the next effective change."""
        if self._event is None or self._event.triggered:
            self._event = self.env.event()
        return self._event

    def on_change(self, callback: Callable[[Component, bool, float], None]) -> None:
        """Call ``callback(component, up, time)`` at every effective transition."""
        self._callbacks.append(callback)

    def on_own_change(self, callback: Callable[[Component, bool, float], None]) -> None:
        """Call ``callback(component, own_up, time)`` at every change of its own state (its
        own process, whatever its ancestors do: a replayed trace's preemptions, say)."""
        self._own_callbacks.append(callback)

    def ancestors(self) -> list[Domain]:
        """Domains above this component, nearest first."""
        out = []
        p = self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out

    def availability(self, now: float | None = None) -> float:
        """Fraction of ``[0, now]`` this component was effectively up."""
        t = self.env.now if now is None else now
        if t <= 0:
            return float(self.up)
        return (self.up_time + (t - self._since if self.up else 0.0)) / t

    def own_availability(self, now: float | None = None) -> float:
        """Fraction of ``[0, now]`` this component's own process was up."""
        t = self.env.now if now is None else now
        if t <= 0:
            return float(self.own_up)
        return (self.own_up_time + (t - self._own_since if self.own_up else 0.0)) / t

    # -- state changes -----------------------------------------------------
    def _set_own(self, up: bool) -> None:
        if up == self.own_up:
            return
        now = self.env.now
        if self.own_up:
            self.own_up_time += now - self._own_since
        self._own_since = now
        self.own_up = up
        self.own_transitions += 1
        for cb in self._own_callbacks:
            cb(self, up, now)
        self._refresh()

    def _refresh(self) -> None:
        up = self.own_up and (self.parent is None or self.parent.up)
        if up == self.up:
            return
        now = self.env.now
        if self.up:
            self.up_time += now - self._since
        self._since = now
        self.up = up
        self.transitions += 1
        for child in self.children:
            child._refresh()
        if self._callbacks or self._event is not None:
            cause = Transition(self.name, up, now)
            for cb in self._callbacks:
                cb(self, up, now)
            if self._event is not None and not self._event.triggered:
                ev, self._event = self._event, None
                ev.succeed(cause)

    def _init_state(self, own_up: bool) -> None:
        self.own_up = own_up
        self.up = own_up and (self.parent is None or self.parent.up)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {'up' if self.up else 'down'}>"


class Domain(Component):
    """A failure domain (region, rack, host...); its outage downs everything below."""

    kind = "domain"


class Worker(Component):
    """A worker (leaf of the hierarchy)."""

    kind = "worker"


class _Renewal:
    """The alternating up/down renewal process driving one component."""

    def __init__(self, comp: Component, up: Any | None, down: Any | None,
                 rng: np.random.Generator) -> None:
        # ``up is None``: never fails; ``down is None``: never recovers.
        self.comp, self.up, self.down, self.rng = comp, up, down, rng

    def initial_state(self) -> bool:
        if self.up is None:
            return True
        if self.down is None:
            return False
        p_up = self.up.mean / (self.up.mean + self.down.mean)
        return bool(self.rng.random() < p_up)

    def run(self, env: simpy.Environment):
        comp = self.comp
        phase = self.up if comp.own_up else self.down
        if phase is None:
            comp.next_own_change = math.inf
            return
        delay = phase.residual(self.rng)
        comp.next_own_change = env.now + delay
        yield failure_timeout(env, delay) if comp.own_up else env.timeout(delay)
        while True:
            comp._set_own(not comp.own_up)
            phase = self.up if comp.own_up else self.down
            if phase is None:
                comp.next_own_change = math.inf
                return
            delay = phase.sample(self.rng)
            comp.next_own_change = env.now + delay
            # going down closes its instant (the module); coming up is a NORMAL event
            yield failure_timeout(env, delay) if comp.own_up else env.timeout(delay)


class _Replay:
    """Replays a worker's down intervals from a trace (consumed lazily, so it may be endless)."""

    def __init__(self, comp: Component, intervals: Iterable[tuple[float, float]]) -> None:
        self.comp = comp
        self._it = iter(intervals)
        self._first = next(self._it, None)

    def initial_state(self) -> bool:
        return not (self._first is not None and self._first[0] <= 0.0)

    def run(self, env: simpy.Environment):
        iv = self._first
        while iv is not None:
            start, end = iv
            if start > env.now:
                self.comp.next_own_change = start
                yield failure_timeout(env, start - env.now)  # after the rest of its instant
            self.comp._set_own(False)
            self.comp.next_own_change = end
            # max: a zero-length outage right after a wait whose sum rounded past it
            yield env.timeout(max(end - env.now, 0.0))
            self.comp._set_own(True)
            iv = next(self._it, None)
        self.comp.next_own_change = math.inf


class FailureModel:
    """A hierarchy of domains and workers with their up/down processes.

    Build and wire first (:meth:`add_domain`, :meth:`add_worker`), then
    :meth:`start` the processes (desmod's elaborate phase); then ``env.run``.

    Parameters
    ----------
    env : simpy.Environment
    streams : Streams
        Component ``c`` draws from ``streams.rng("failures:" + c)`` only, so
        adding a component never changes another's draws.

    Examples
    --------
    >>> import simpy
    >>> env = simpy.Environment()
    >>> fm = FailureModel(env, Streams(1))
    >>> rack = fm.add_domain("rack0", unavailability=0.01, mean_downtime=5.0)
    >>> w = fm.add_worker("w0", rack, availability=0.9, mean_downtime=2.0)
    >>> fm.start(); env.run(until=100.0)
    """

    def __init__(self, env: simpy.Environment, streams: Streams) -> None:
        self.env = env
        self.streams = streams
        self.components: dict[str, Component] = {}
        self._drivers: list[Any] = []
        self._on_start: list[Callable[[], None]] = []
        self._started = False

    @property
    def domains(self) -> list[Domain]:
        return [c for c in self.components.values() if isinstance(c, Domain)]

    @property
    def workers(self) -> list[Worker]:
        return [c for c in self.components.values() if isinstance(c, Worker)]

    def _add(self, cls: type[Component], name: str, parent: Domain | str | None) -> Component:
        check(not self._started, "model", "modified before start()", name)
        check(name not in self.components, "name", "unique among components", name)
        if isinstance(parent, str):
            check(parent in self.components and isinstance(self.components[parent], Domain),
                  "parent", "an existing domain", parent)
            parent = self.components[parent]  # type: ignore[assignment]
        comp = cls(self, name, parent)  # type: ignore[arg-type]
        self.components[name] = comp
        return comp

    def _renewal(self, comp: Component, p_up: float, mean_downtime: float, distribution: str,
                 shape: float | None, *, name: str) -> _Renewal:
        mean_up, mean_down = up_down_means(p_up, mean_downtime, name=name)
        up = None if math.isinf(mean_up) else make_distribution(distribution, mean_up, shape)
        down = None if math.isinf(mean_down) else make_distribution(distribution, mean_down, shape)
        return _Renewal(comp, up, down, self.streams.rng("failures:" + comp.name))

    def add_domain(
        self,
        name: str,
        parent: Domain | str | None = None,
        *,
        unavailability: float = 0.0,
        mean_downtime: float = 1.0,
        distribution: str = "exponential",
        shape: float | None = None,
    ) -> Domain:
        """Add a failure domain that is out a fraction ``unavailability`` of the time."""
        u = check_probability("domain_outage", unavailability)
        comp = self._add(Domain, name, parent)
        self._drivers.append(self._renewal(comp, 1.0 - u, mean_downtime, distribution, shape,
                                           name="domain_outage"))
        return comp  # type: ignore[return-value]

    def add_placement_domains(self, placement: Any, *, mean_downtime: float = 1.0,
                              distribution: str = "exponential",
                              shape: float | None = None) -> None:
        """Add every domain on the replicas' chains of a placement, outermost first.

        Parameters
        ----------
        placement : topologies.placement.Placement
            ``replica_domains[j][i]`` is the chain of replica ``i`` of stage
            ``j``; ``domain_outage`` the unavailability of each domain (0 when
            not listed).
        mean_downtime, distribution, shape
            The outage law of every domain.
        """
        for stage in placement.replica_domains:
            for chain in stage:
                for depth, name in enumerate(chain):
                    if name not in self.components:
                        self.add_domain(name, chain[depth - 1] if depth else None,
                                        unavailability=placement.domain_outage.get(name, 0.0),
                                        mean_downtime=mean_downtime, distribution=distribution,
                                        shape=shape)

    def add_worker(
        self,
        name: str,
        parent: Domain | str | None = None,
        *,
        availability: float = 1.0,
        mean_downtime: float = 1.0,
        distribution: str = "exponential",
        shape: float | None = None,
        trace: Iterable[tuple[float, float]] | None = None,
    ) -> Worker:
        """Add a worker up a fraction ``availability`` of the time (or replaying ``trace``).

        ``trace`` is any iterable of sorted, disjoint ``(start, end)`` down
        intervals, read lazily (an endless one replays a looped trace).
        """
        comp = self._add(Worker, name, parent)
        if trace is not None:
            self._drivers.append(_Replay(comp, trace))
        else:
            self._drivers.append(self._renewal(comp, availability, mean_downtime, distribution,
                                               shape, name="availability"))
        return comp  # type: ignore[return-value]

    def start(self) -> None:
        """Draw stationary initial states (top-down) and start every process."""
        check(not self._started, "model", "started once", "start()")
        self._started = True
        by_comp = {d.comp: d for d in self._drivers}
        # Parents before children, so effective states are consistent.
        order = sorted(self.components.values(), key=lambda c: len(c.ancestors()))
        for comp in order:
            comp._init_state(by_comp[comp].initial_state())
        for hook in self._on_start:
            hook()
        for d in self._drivers:
            self.env.process(d.run(self.env))


class GroupMonitor:
    """Joint outage of a group of components, tracked through callbacks.

    Records the time spent with exactly ``k`` members down (``time_down[k]``),
    so the fraction of time all are down is ``time_down[-1] / now``.
    """

    def __init__(self, members: Iterable[Component]) -> None:
        self.members = list(members)
        check(bool(self.members), "members", "a non-empty group", self.members)
        self.env = self.members[0].env
        self.time_down = np.zeros(len(self.members) + 1)
        self.outages = 0  # number of entries into the all-down state
        self._reset()
        model = self.members[0].model
        if not model._started:  # initial states are drawn by start(): count again then
            model._on_start.append(self._reset)
        for m in self.members:
            m.on_change(self._changed)

    def _reset(self) -> None:
        self.down = sum(not m.up for m in self.members)
        self._since = self.env.now

    def _changed(self, comp: Component, up: bool, now: float) -> None:
        self.time_down[self.down] += now - self._since
        self._since = now
        self.down += -1 if up else 1
        if self.down == len(self.members):
            self.outages += 1

    def fractions(self, now: float | None = None) -> np.ndarray:
        """Fraction of ``[0, now]`` spent with exactly k members down, k = 0..size."""
        t = self.env.now if now is None else now
        out = self.time_down.copy()
        out[self.down] += t - self._since
        return out / t if t > 0 else out

    def all_down_fraction(self, now: float | None = None) -> float:
        """Fraction of time every member was down at once."""
        return float(self.fractions(now)[-1])


# --------------------------------------------------------------------------- the cluster model


#: What a failure trace is asked here (:class:`sim.traces.TraceReplay` answers all of
#: it). The replay is asked, never type-checked, so this floor does not import the
#: traces package above it.
_REPLAY_ANSWERS = ("check_workers", "check_horizon", "exact_availability", "worker_intervals",
                   "by_name")


def _answers_as_replay(obj: Any) -> bool:
    """True when ``obj`` has the methods and ``fixed_paths`` that a failure trace is asked."""
    return hasattr(obj, "fixed_paths") and all(
        callable(getattr(obj, name, None)) for name in _REPLAY_ANSWERS)


@dataclass(frozen=True)
class ClusterConfig:
    """Workers spread round-robin over flat failure domains (the ``dtsim failures`` model).

    Parameters
    ----------
    workers : int
        Number of workers (>= 1).
    domains : int
        Number of failure domains (>= 1); worker ``i`` sits in domain ``i % domains``.
    availability : float
        Each worker's own availability ``a`` in [0, 1].
    mean_downtime : float
        Mean length of a worker outage (> 0).
    domain_outage : float
        Each domain's unavailability ``rho`` in [0, 1].
    domain_mean_downtime : float
        Mean length of a domain outage (> 0).
    distribution : str
        Up/down duration law for workers and domains.
    shape : float or None
        Weibull shape or lognormal sigma.
    horizon : float
        Simulated time per replication (> 0).
    trace : str or None
        CSV trace to replay instead of the renewal processes for workers
        (workers take the trace's workers in order).
    failure_trace : sim.traces.TraceReplay or None
        A real trace (any format, shipped or by path) replayed as the workers'
        own up/down states through its mapping policy; worker ``i``'s domain
        for the ``domain`` policy is ``i % domains``. A trace whose instances
        are all named as the workers ``worker{i}`` is replayed by name
        (:attr:`trace_names`). Not with ``trace``.
    topology : str or None
        A layout spec (``datacenter:regions=2,racks=4,hosts=4,rack_outage=1e-3``,
        ``geo:...``, a graph file whose nodes carry ``domain`` chains): nested
        failure domains instead of the flat ones. Worker ``i`` sits on host
        ``i`` under the host's chain of domains (outermost first), each domain
        out a fraction ``unavailability`` of the time as the layout says, with
        ``domain_mean_downtime``; ``workers`` must equal the layout's hosts, and
        ``domains`` and ``domain_outage`` are not used (the layout replaces
        them; ``dtsim failures`` refuses them with ``--topology``). Random
        layouts are built with seed 0. Not with a trace.
    """

    workers: int = 16
    domains: int = 4
    availability: float = 0.9
    mean_downtime: float = 1.0
    domain_outage: float = 0.01
    domain_mean_downtime: float = 5.0
    distribution: str = "exponential"
    shape: float | None = None
    horizon: float = 10_000.0
    trace: str | None = None
    failure_trace: Any = None
    _trace: Trace | None = field(default=None, repr=False, compare=False)
    topology: str | None = None

    def __post_init__(self) -> None:
        check_int("workers", self.workers, low=1)
        check_int("domains", self.domains, low=1)
        check_memory_terms([("workers", self.workers, self.workers * BYTES_PER_PROCESS),
                            ("domains", self.domains, self.domains * BYTES_PER_PROCESS)])
        check_memory_terms([("workers", self.workers, self.workers * BYTES_PER_PROCESS),
                            ("domains", self.domains, self.domains * BYTES_PER_PROCESS)])
        check_probability("availability", self.availability)
        check_positive("mean_downtime", self.mean_downtime)
        check_probability("domain_outage", self.domain_outage)
        check_positive("domain_mean_downtime", self.domain_mean_downtime)
        check_distribution("distribution", self.distribution)
        if self.shape is not None:
            check_shape("shape", self.distribution, self.shape)
        check_law("distribution", self.distribution, "shape", self.shape)
        check_positive("horizon", self.horizon)
        if self.trace is not None:
            tr = read_trace(self.trace)
            check(len(tr.workers) >= self.workers, "workers",
                  f"at most the trace's {len(tr.workers)} workers", self.workers)
            object.__setattr__(self, "_trace", tr)
        if self.failure_trace is not None:
            check(_answers_as_replay(self.failure_trace), "failure_trace",
                  "a sim.traces.TraceReplay", self.failure_trace)
            check(self.trace is None, "trace", "unset with failure_trace (one trace at a time)",
                  self.trace)
            if self.trace_names is None:  # slot k on worker k: at most the trace's slots
                self.failure_trace.check_workers(self.workers)
            self.failure_trace.check_horizon(self.horizon)
        if self.topology is not None:
            check(isinstance(self.topology, str) and self.topology != "", "topology",
                  "a layout spec such as datacenter:regions=2,racks=4,hosts=4", self.topology)
            check(self.trace is None and self.failure_trace is None, "topology",
                  "unset with a failure trace (the trace gives each worker's outages)", self.topology)
            chains, _ = self.layout_domains()
            check(all(chains), "topology", "a layout whose hosts sit in failure domains "
                  "(datacenter, geo, or a graph file with domain chains)", self.topology)
            check(self.workers == len(chains), "workers",
                  f"the layout's {len(chains)} hosts (one worker per host)", self.workers)
        check_transitions(*self.expected_transitions(), "the horizon")

    def expected_transitions(self) -> tuple[float, str, Any]:
        """The up/down transitions a replication can expect to simulate over the horizon, and
        the parameter that drives them: every worker alternates up and down with a mean cycle
        ``mean_downtime / (1 - a)``, every domain ``domain_mean_downtime / rho``, two transitions
        a cycle. A trace is not counted (its rows are its transitions). The parameter named is
        the one furthest from the default cluster (16 workers, horizon 10,000, outages of mean
        1): the horizon, the workers, or the downtime of whichever outages dominate when it is
        below 1 (short cycles)."""
        if self.trace is not None or self.failure_trace is not None:
            return 0.0, "trace", None
        if self.topology is not None:
            chains, unavail = self.layout_domains()
            rhos = [unavail.get(d, 0.0) for d in {d for c in chains for d in c}]
        else:
            rhos = [self.domain_outage] * self.domains
        workers, domains, _ = cycle_rates(
            workers=self.workers, availability=self.availability,
            mean_downtime=self.mean_downtime, domain_outages=rhos,
            domain_downtime=self.domain_mean_downtime)
        n = 2.0 * (workers + domains) * self.horizon
        # the factor furthest from the default cluster (16 workers, horizon 10,000, outages of
        # mean 1) is named: how many times it multiplies the transitions
        blame = [(self.horizon / 1e4, "horizon", self.horizon)]
        if self.workers > 16 and workers > domains:
            blame.append((self.workers / 16, "workers", self.workers))
        if domains > workers and self.domain_mean_downtime < 1.0:
            blame.append((1.0 / self.domain_mean_downtime, "domain_mean_downtime",
                          self.domain_mean_downtime))
        if domains <= workers and self.mean_downtime < 1.0:
            blame.append((1.0 / self.mean_downtime, "mean_downtime", self.mean_downtime))
        _, name, value = max(blame, key=lambda b: b[0])
        return n, name, value

    @property
    def trace_names(self) -> tuple[str | None, ...] | None:
        """The instance each worker replays (None: up throughout) when the failure trace's
        instances are all named as the workers ``worker{i}``; None when it is replayed slot
        by slot (none named so; some named so and some not is refused by the replay's
        ``by_name``, :meth:`sim.traces.TraceReplay.by_name`)."""
        if self.failure_trace is None:
            return None
        return self.failure_trace.by_name([(f"worker{i}",) for i in range(self.workers)])

    def layout_domains(self) -> tuple[list[tuple[str, ...]], dict[str, float]]:
        """The nested domains of :attr:`topology` (see :func:`layout_domains`)."""
        return layout_domains(str(self.topology))

    @property
    def workers_per_domain(self) -> list[int]:
        return [len(range(d, self.workers, self.domains)) for d in range(self.domains)]

    def fixed_metrics(self) -> dict[str, str]:
        """The metrics of :func:`failures_model` this config fixes, each with the reason.

        Workers never change state with availability 0 or 1, and replay the
        same paths in every replication from a CSV trace or a
        :class:`~sim.traces.TraceReplay` with :attr:`~sim.traces.TraceReplay.fixed_paths`
        (their mean availability alone is fixed when the replay covers every
        slot over whole periods, whatever the policy:
        :meth:`~sim.traces.TraceReplay.exact_availability`). Domains never
        change state when every outage is 0 (or 1). A quantity of the workers
        alone, or of the domains alone, is then the same in every replication,
        and one of both when both are (see :func:`sim.results.fixed_ci`).
        """
        workers = ""
        if self.failure_trace is not None:
            if self.failure_trace.fixed_paths:
                workers = "every replication replays the same trace (policy recent, no resampling)"
        elif self.trace is not None:
            workers = "every replication replays the same CSV trace"
        elif self.availability in (0.0, 1.0):
            workers = f"workers never change state (availability {self.availability:g})"
        if self.topology is not None:
            chains, unavail = self.layout_domains()
            outages = {unavail.get(d, 0.0) for c in chains for d in c}
            levels = max(len(c) for c in chains)
        else:
            outages, levels = {self.domain_outage}, 0
        domains = ("" if not outages <= {0.0, 1.0} else "no domain outages (domain outage 0)"
                   if outages == {0.0} else "domains never change state (domain outages 0 or 1)")
        out: dict[str, str] = {}
        if workers:
            out.update(worker_availability=workers, worker_transitions=workers)
        elif self.failure_trace is not None and \
                self.failure_trace.exact_availability(self.workers, self.horizon) is not None:
            out["worker_availability"] = ("the replay covers every trace slot over whole periods: "
                                          "the workers' mean up-fraction is the trace's")
        if domains:
            out["domain_unavailability"] = domains
            out.update({f"domain_unavailability_level{k}": domains for k in range(levels)})
        if workers and domains:
            both = f"{workers}; {domains}"
            out.update(effective_availability=both, joint_outage=both)
            out.update({f"joint_outage_level{k}": both for k in range(levels)})
        elif domains and "worker_availability" in out:  # up including domains: the own mean
            out["effective_availability"] = f"{out['worker_availability']}; {domains}"
        return out


def layout_domains(topology: str) -> tuple[list[tuple[str, ...]], dict[str, float]]:
    """Each host's chain of failure domains (outermost first) and each domain's unavailability.

    Parameters
    ----------
    topology : str
        A layout spec for :func:`topologies.build` (random layouts with seed 0).

    Returns
    -------
    (list of tuple of str, dict of str to float)
        Chains in host order (the nodes that are not switches, ``role="switch"``, sorted
        where their labels compare); unavailability 0 for a domain the layout does not list.
    """
    import topologies

    G = topologies.build(topology, seed=0)
    hosts = [v for v, role in G.nodes(data="role") if role != "switch"]  # switches hold none
    try:
        hosts = sorted(hosts)
    except TypeError:  # labels of several types: the graph's order
        pass
    chains = [tuple(str(d) for d in G.nodes[v].get("domain", ())) for v in hosts]
    info = G.graph.get("domains", {}) or {}
    unavail = {d: float(info.get(d, {}).get("unavailability", 0.0)) for c in chains for d in c}
    return chains, unavail


def build_cluster(config: ClusterConfig, env: simpy.Environment, streams: Streams) -> FailureModel:
    """Build (but do not start) the failure model of a :class:`ClusterConfig`."""
    fm = FailureModel(env, streams)
    if config.topology is not None:  # nested domains from a layout, outermost first
        chains, unavail = config.layout_domains()
        for i, chain in enumerate(chains):
            for depth, name in enumerate(chain):
                if name not in fm.components:
                    fm.add_domain(name, chain[depth - 1] if depth else None,
                                  unavailability=unavail[name],
                                  mean_downtime=config.domain_mean_downtime,
                                  distribution=config.distribution, shape=config.shape)
            fm.add_worker(f"worker{i}", chain[-1], availability=config.availability,
                          mean_downtime=config.mean_downtime,
                          distribution=config.distribution, shape=config.shape)
        return fm
    doms = [
        fm.add_domain(f"domain{d}", unavailability=config.domain_outage,
                      mean_downtime=config.domain_mean_downtime,
                      distribution=config.distribution, shape=config.shape)
        for d in range(config.domains)
    ]
    names = config._trace.workers if config._trace is not None else None
    replay = None
    if config.failure_trace is not None:
        replay = config.failure_trace.worker_intervals(
            config.workers, streams=streams, domain_of=[i % config.domains for i in range(config.workers)],
            names=config.trace_names)
    for i in range(config.workers):
        dom = doms[i % config.domains]
        if replay is not None:
            fm.add_worker(f"worker{i}", dom, trace=replay[i])
        elif names is not None:
            fm.add_worker(f"worker{i}", dom, trace=config._trace.intervals[names[i]])  # type: ignore[union-attr]
        else:
            fm.add_worker(f"worker{i}", dom, availability=config.availability,
                          mean_downtime=config.mean_downtime,
                          distribution=config.distribution, shape=config.shape)
    return fm


def failures_model(config: ClusterConfig, streams: Streams) -> dict[str, float]:
    """One replication of the cluster: measured availabilities and joint outages.

    Returns
    -------
    dict
        ``worker_availability`` (mean own up-fraction over workers),
        ``effective_availability`` (up including domains),
        ``domain_unavailability`` (mean over domains), ``joint_outage`` (mean
        over domains of the fraction of time all its workers were down),
        ``worker_transitions`` (own transitions per worker per unit time).
        With nested domains (``topology``) a domain's workers are all the
        workers below it, and each level ``k`` of the chains (0 outermost)
        also has ``joint_outage_level{k}`` and ``domain_unavailability_level{k}``
        (means over that level's domains; exact values from
        :func:`sim.analytic.nested_domain_outages`).
    """
    env = simpy.Environment()
    fm = build_cluster(config, env, streams)
    domains = fm.domains
    if config.topology is None:
        groups = [GroupMonitor([c for c in d.children]) for d in domains if d.children]
    else:  # nested: the workers anywhere below each domain
        below = {d.name: [w for w in fm.workers if d.name in _chain_names(w)] for d in domains}
        groups = [GroupMonitor(below[d.name]) for d in domains if below[d.name]]
    fm.start()
    env.run(until=config.horizon)
    t = config.horizon
    workers = fm.workers
    out = {
        "worker_availability": float(np.mean([w.own_availability(t) for w in workers])),
        "effective_availability": float(np.mean([w.availability(t) for w in workers])),
        "domain_unavailability": float(np.mean([1.0 - d.availability(t) for d in domains])),
        "joint_outage": float(np.mean([g.all_down_fraction(t) for g in groups])),
        "worker_transitions": float(np.mean([w.own_transitions for w in workers]) / t),
    }
    if config.topology is not None:  # per level (depth in the chains), outermost first
        chains, _ = config.layout_domains()
        depth = {d: k for c in chains for k, d in enumerate(c)}
        named = [d for d in domains if below[d.name]]
        for k in range(max(len(c) for c in chains)):
            level = [g.all_down_fraction(t) for d, g in zip(named, groups, strict=True)
                     if depth[d.name] == k]
            out[f"joint_outage_level{k}"] = float(np.mean(level))
            out[f"domain_unavailability_level{k}"] = float(np.mean(
                [1.0 - d.availability(t) for d in domains if depth[d.name] == k]))
    return out


def _chain_names(component: Component) -> set[str]:
    """Names of a component's ancestors (its domains)."""
    names, p = set(), component.parent
    while p is not None:
        names.add(p.name)
        p = p.parent
    return names
