"""Fit a trace's up and down durations and its burst structure, and generate look-alikes.

Durations come from the slot patterns of a mapping policy
(:func:`sim.traces.replay.slot_patterns`; an event trace's up periods are
its nodes' lifetimes whatever the policy). A period that touches the end
of the span, or its start in a count trace (an event trace's joins at time
0 are observed), is right-censored (only a lower bound is seen);
zero-length periods (a dip and a replacement at one timestamp) are left out
and counted. Each of the exponential, Weibull and lognormal laws is fitted
by maximum likelihood with :class:`scipy.stats.CensoredData` (location 0),
and reported with its parameters, the log-likelihood, AIC ``2k - 2 log L``
and the Kolmogorov-Smirnov distance to the uncensored periods.

The burst structure is the law of the number of instances lost at one
preemption event: the empirical law, and a zero-truncated geometric fitted by
maximum likelihood (``P(K = k) = (1 - p)^(k - 1) p``, ``p = 1 / mean size``);
and, as a domain hierarchy with the failure model's domains (domain size,
domain outage fraction and length, own availability and outage length), by
:mod:`sim.traces.fit_domains`.

The generator (:class:`BurstyModel`) is a compound process: preemption
events arrive as a Poisson process of the trace's event rate (events over
the span; none while no instance is up); each removes ``min(K, up)`` instances, ``K``
drawn from the empirical size law; a lost instance comes back after a down
time from the best-fitting law (by AIC) whose mean is set by Little's law,
``mean_down = capacity (1 - availability) / loss rate``, so that the long-run
availability is the source's. :meth:`BurstyModel.independent` is the
burst-free comparison: each of ``capacity`` workers alternates exponential up
and down times with the same availability and mean down time.
"""

from __future__ import annotations

import heapq
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_int, check_positive, check_probability
from .model import AvailabilityTrace, count_trace
from .replay import slot_patterns
from .stats import preemption_events, trace_stats

__all__ = ["durations", "fit_durations", "fit_sizes", "BurstyModel", "fit_model",
           "fit_trace", "envelope"]

#: The fitted laws: name -> (scipy.stats distribution name, number of free parameters).
_LAW_NAMES = {"exponential": ("expon", 1), "weibull": ("weibull_min", 2), "lognormal": ("lognorm", 2)}


def __getattr__(name: str) -> Any:
    """``LAWS``: name -> (scipy distribution, free parameters), built on first use.

    scipy.stats is imported only when a fit is asked for, so that `import sim`
    (and every CLI start) stays light.
    """
    if name == "LAWS":
        from scipy import stats

        return {k: (getattr(stats, d), n) for k, (d, n) in _LAW_NAMES.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def durations(trace: AvailabilityTrace, *, policy: str = "recent",
              rng: np.random.Generator | None = None) -> dict[str, Any]:
    """Up and down periods of every slot under a mapping policy.

    Returns
    -------
    dict
        ``up`` and ``down``: arrays of complete periods (seconds, > 0);
        ``up_censored`` and ``down_censored``: periods touching the span's ends;
        ``zero_length``: periods of zero length left out.
    """
    pats = slot_patterns(trace, policy=policy, rng=rng)
    P = trace.end
    # An Oobleck trace's joins at time 0 are observed; a count trace's state at 0 is not, nor
    # an event log's (an instance whose first event is a preemption was up before the log).
    joins_seen = trace.nodes is not None and not trace.reuse and trace.format != "events"
    up, upc, down, downc = [], [], [], []
    zero = 0
    for pat in pats:
        t = 0.0
        for s, e in pat:
            if s > t:
                (upc if t == 0.0 and not joins_seen else up).append(s - t)
            elif s == t and t > 0.0:
                zero += 1  # up for no time between two outages
            if e > s:
                (downc if s == 0.0 or e >= P else down).append(e - s)
            elif s < P:
                zero += 1  # a dip and a replacement at one timestamp
            t = e
        if t < P:
            upc.append(P - t)
    return {"up": np.asarray(up), "up_censored": np.asarray(upc), "down": np.asarray(down),
            "down_censored": np.asarray(downc), "zero_length": zero}


def fit_durations(complete: np.ndarray, censored: np.ndarray | None = None) -> dict[str, Any] | None:
    """Fit the exponential, Weibull and lognormal laws to (right-censored) durations.

    Parameters
    ----------
    complete : numpy.ndarray
        Observed durations (> 0).
    censored : numpy.ndarray, optional
        Right-censored durations (lower bounds, > 0).

    Returns
    -------
    dict or None
        ``n``, ``censored``, ``laws`` (per law: ``mean``, ``shape`` (Weibull
        ``k`` or lognormal ``sigma``; None for the exponential), ``scale``,
        ``loglik``, ``aic``, ``ks``) and ``best`` (lowest AIC). None with fewer
        than two complete durations.
    """
    x = np.asarray(complete, dtype=float)
    c = np.zeros(0) if censored is None else np.asarray(censored, dtype=float)
    c = c[c > 0]
    if len(x) < 2:
        return None
    from scipy import stats

    data = stats.CensoredData(uncensored=x, right=c) if len(c) else x
    laws: dict[str, Any] = {}
    for name, (dname, k) in _LAW_NAMES.items():
        dist = getattr(stats, dname)
        with warnings.catch_warnings():  # scipy warns on near-identical data; the fit stands
            warnings.simplefilter("ignore", RuntimeWarning)
            params = dist.fit(data, floc=0)
        frozen = dist(*params)
        ll = float(np.sum(frozen.logpdf(x)) + (np.sum(frozen.logsf(c)) if len(c) else 0.0))
        shape = None if name == "exponential" else float(params[0])
        laws[name] = {
            "mean": float(frozen.mean()), "shape": shape, "scale": float(params[-1]),
            "loglik": ll, "aic": 2 * k - 2 * ll,
            "ks": float(stats.kstest(x, frozen.cdf).statistic),
        }
    best = min(laws, key=lambda n: laws[n]["aic"])
    return {"n": int(len(x)), "censored": int(len(c)), "laws": laws, "best": best}


def fit_sizes(sizes: np.ndarray) -> dict[str, Any]:
    """The law of preemption-event sizes: empirical, and a zero-truncated geometric (MLE).

    Returns
    -------
    dict
        ``events``, ``mean``, ``empirical`` (``{size: fraction}``),
        ``geometric_p``, ``geometric_loglik``, ``geometric_aic``,
        ``geometric_batch_fraction`` (``1 - p``, the predicted fraction of
        events of two or more), ``batch_fraction`` (observed).
    """
    s = np.asarray(sizes, dtype=np.int64)
    if len(s) == 0:
        return {"events": 0, "mean": None, "empirical": {}, "geometric_p": None,
                "geometric_loglik": None, "geometric_aic": None,
                "geometric_batch_fraction": None, "batch_fraction": 0.0}
    m = float(s.mean())
    p = 1.0 / m
    ll = float(np.sum((s - 1) * math.log1p(-p) if p < 1 else 0.0) + len(s) * math.log(p))
    vals, cnt = np.unique(s, return_counts=True)
    return {
        "events": int(len(s)), "mean": m,
        "empirical": {int(v): float(n / len(s)) for v, n in zip(vals, cnt, strict=True)},
        "geometric_p": p, "geometric_loglik": ll, "geometric_aic": 2 - 2 * ll,
        "geometric_batch_fraction": 1.0 - p, "batch_fraction": float(np.mean(s >= 2)),
    }


@dataclass(frozen=True)
class BurstyModel:
    """A fitted generator of count traces (see the module notes).

    Parameters
    ----------
    capacity : int
        Slots (>= 1).
    event_rate : float
        Preemption events per second (> 0; none while no instance is up);
        unused when ``independent``.
    sizes, probs : tuple
        Event-size law: ``P(K = sizes[i]) = probs[i]``.
    down_law : str
        Down-time law (a :data:`sim.failures.DISTRIBUTIONS` name).
    down_mean : float
        Mean down time in seconds (> 0).
    down_shape : float or None
        Weibull ``k`` or lognormal ``sigma``.
    up_mean : float or None
        Mean up time per worker, for the independent model only.
    independent : bool
        Each worker fails on its own at rate ``1 / up_mean`` (events of size 1).
    """

    capacity: int
    event_rate: float
    sizes: tuple[int, ...]
    probs: tuple[float, ...]
    down_law: str
    down_mean: float
    down_shape: float | None = None
    up_mean: float | None = None
    independent: bool = False

    def __post_init__(self) -> None:
        check_int("capacity", self.capacity, low=1)
        check_positive("event_rate", self.event_rate)
        check(len(self.sizes) == len(self.probs) and len(self.sizes) > 0, "sizes",
              "as many as probs (and at least one)", self.sizes)
        for p in self.probs:
            check_probability("probs", p)
        check(abs(sum(self.probs) - 1.0) < 1e-9, "probs", "summing to 1", self.probs)
        from ..failures import DISTRIBUTIONS  # sim.failures imports this package

        check(self.down_law in DISTRIBUTIONS, "down_law", "one of " + ", ".join(DISTRIBUTIONS),
              self.down_law)
        check_positive("down_mean", self.down_mean)
        if self.independent:
            check_positive("up_mean", self.up_mean)

    @property
    def availability(self) -> float:
        """Long-run availability the model is calibrated to (Little's law)."""
        if self.independent:
            return self.up_mean / (self.up_mean + self.down_mean)  # type: ignore[operator]
        m = float(np.dot(self.sizes, self.probs))
        return 1.0 - self.event_rate * m * self.down_mean / self.capacity

    def with_independent_outages(self) -> BurstyModel:
        """The burst-free model: exponential per-worker outages, same availability and mean down."""
        return independent_model(self.capacity, self.availability, self.down_mean)

    def generate(self, duration: float, *, rng: np.random.Generator,
                 start: int | None = None) -> AvailabilityTrace:
        """A synthetic count trace over ``[0, duration]`` seconds.

        The start is stationary for the down times: ``start`` instances up
        (default: the capacity times the availability, rounded), each down one
        returning after an equilibrium residual down time.
        """
        check_positive("duration", duration)
        C = self.capacity
        n = int(round(C * self.availability)) if start is None else check_int(
            "start", start, low=0, high=C)
        from ..failures import make_distribution

        down = make_distribution(self.down_law, self.down_mean, self.down_shape)
        returns = sorted(down.residual(rng) for _ in range(C - n))
        heapq.heapify(returns)
        sizes = np.asarray(self.sizes)
        probs = np.asarray(self.probs)
        times, counts = [0.0], [n]
        t = 0.0
        while True:
            rate = (n / self.up_mean if self.independent else self.event_rate) if n > 0 else 0.0
            t_ev = t + rng.exponential(1.0 / rate) if rate > 0 else math.inf
            t_ret = returns[0] if returns else math.inf
            t_next = min(t_ev, t_ret)
            if t_next > duration:
                break
            t = t_next
            if t_ev <= t_ret:
                k = 1 if self.independent else int(rng.choice(sizes, p=probs))
                k = min(k, n)
                n -= k
                for _ in range(k):
                    heapq.heappush(returns, t + down.sample(rng))
            else:
                heapq.heappop(returns)
                n += 1
            times.append(t)
            counts.append(n)
        return count_trace(times, counts, duration, format="synthetic", source="generated")


def independent_model(capacity: int, availability: float, down_mean: float) -> BurstyModel:
    """Independent exponential outages of ``capacity`` workers at the given availability."""
    a = check_probability("availability", availability, open_low=True, open_high=True)
    return BurstyModel(capacity, 1.0, (1,), (1.0,), "exponential", down_mean,
                       up_mean=a * down_mean / (1 - a), independent=True)


def fit_model(trace: AvailabilityTrace, *, policy: str = "recent",
              rng: np.random.Generator | None = None) -> BurstyModel:
    """Fit a :class:`BurstyModel` to a trace (see the module notes).

    Raises
    ------
    ConfigError
        When no instance is lost or none comes back (nothing stationary to fit).
    """
    st = trace_stats(trace)
    check(st["preempted_nodes"] > 0 and st["returns"] > 0, "trace",
          "a trace in which instances are lost and come back (to fit a generator)",
          trace.source)
    _, sizes = preemption_events(trace)
    vals, cnt = np.unique(sizes, return_counts=True)
    C = st["nodes"]
    loss_rate = st["preempted_nodes"] / trace.end
    down_mean = C * (1 - st["availability"]) / loss_rate
    d = durations(trace, policy=policy, rng=rng)
    fd = fit_durations(d["down"], d["down_censored"])
    law, shape = "exponential", None
    if fd is not None:
        law = fd["best"]
        shape = fd["laws"][law]["shape"]
    return BurstyModel(
        capacity=C, event_rate=len(sizes) / trace.end,
        sizes=tuple(int(v) for v in vals), probs=tuple(float(c / len(sizes)) for c in cnt),
        down_law=law, down_mean=float(down_mean), down_shape=shape,
    )


def fit_trace(trace: AvailabilityTrace, *, policy: str = "recent",
              rng: np.random.Generator | None = None) -> dict[str, Any]:
    """Everything ``dtsim trace fit`` reports.

    Returns
    -------
    dict
        ``policy``, ``up`` and ``down`` (from :func:`fit_durations`, or None),
        ``zero_length`` periods left out, ``sizes`` (:func:`fit_sizes`),
        ``interevent`` (the laws fitted to the times between preemption
        events), ``domains`` (the domain hierarchy of
        :func:`sim.traces.fit_domains.fit_domains` as a dict with its
        ``cluster_config``, or ``error``: why there is none), and
        ``generator`` (the :class:`BurstyModel` fields, or the reason there
        is none).
    """
    d = durations(trace, policy=policy, rng=rng)
    et, sizes = preemption_events(trace)
    gaps = np.diff(et)
    out: dict[str, Any] = {
        "source": trace.source, "format": trace.format, "policy": policy,
        "up": fit_durations(d["up"], d["up_censored"]),
        "down": fit_durations(d["down"], d["down_censored"]),
        "zero_length": d["zero_length"],
        "sizes": fit_sizes(sizes),
        "interevent": fit_durations(gaps[gaps > 0]),
    }
    from .fit_domains import fit_domains

    dom = fit_domains(trace)
    out["domains"] = dom.as_dict() if dom is not None else {
        "error": "no preemption event removes two or more instances (no domain structure)"}
    try:
        m = fit_model(trace, policy=policy, rng=rng)
        out["generator"] = {k: getattr(m, k) for k in (
            "capacity", "event_rate", "sizes", "probs", "down_law", "down_mean", "down_shape")}
        out["generator"]["availability"] = m.availability
    except ConfigError as exc:  # say why there is no generator
        out["generator"] = {"error": str(exc)}
    return out


def envelope(model: BurstyModel, duration: float, *, rng: np.random.Generator,
             samples: int = 200, points: int = 400,
             quantiles: tuple[float, float] = (0.05, 0.95)) -> dict[str, np.ndarray]:
    """Pointwise quantiles of the count of ``samples`` generated traces on a time grid.

    Returns
    -------
    dict
        ``t`` (grid, seconds), ``low``, ``mean``, ``high``.
    """
    grid = np.linspace(0.0, duration, points)
    rows = np.empty((samples, points))
    for i in range(samples):
        rows[i] = model.generate(duration, rng=rng).count_at(grid)
    return {"t": grid, "low": np.quantile(rows, quantiles[0], axis=0),
            "mean": rows.mean(axis=0), "high": np.quantile(rows, quantiles[1], axis=0)}
