"""Tidy result records and confidence intervals across replications.

Results are flat ``dict`` records (one per replication or task) that load
straight into :class:`pandas.DataFrame` or a CSV file. Estimates carry a
confidence interval computed across independent replications, the only honest
interval when successive observations inside one run are correlated in time:

- :func:`mean_ci` -- Student t, for means of roughly symmetric quantities;
- :func:`log_mean_ci` -- for means of positive, right-skewed quantities
  (noise floors), an interval on the log scale;
- :func:`skewed_ratio_ci` -- for quantities that are products of many random
  factors (disagreement after many steps, its ratio to the start): the ratio
  of means with a log-scale delta-method interval whose upper end reaches at
  least as far as the logs' spread;
- :func:`lognormal_mean_ci` -- Cox's interval for a log-normal mean (biased
  when the law is not log-normal);
- :func:`proportion_ci` and :func:`rate_ci` -- probabilities (drop rates,
  outage fractions), intervals that stay in ``[0, 1]``; with no event seen, a
  one-sided upper bound ("below X");
- :func:`ratio_ci` -- a ratio of two means (contraction, capture) by the delta
  method, estimate and interval from the same replications;
- :func:`power_ci` -- an interval carried through ``v -> v ** p``;
- :func:`fixed_ci` -- a quantity the config fixes (the same value in every
  replication, or a rate of an event that cannot happen): exact, no interval;
- :func:`within` -- an interval cut to the range its quantity cannot leave.

An interval comes only from variation that exists. A config says which of its
model's metrics it fixes (its ``fixed_metrics()`` method, read by
:func:`config_fixed_metrics`); :func:`summarize`, :func:`summary_rows` and the
sweeps then print those as exact (``0.75 (exact)``), and refuse a declaration
that the replications contradict.

Claims are judged by :class:`Verdict` objects that state their rule:
:func:`judge_equal`, :func:`judge_bound` and :func:`judge_optimal`.
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

from .errors import ConfigError, check_choice, check_probability, write_atomic

__all__ = [
    "Estimate",
    "mean_ci",
    "log_mean_ci",
    "lognormal_mean_ci",
    "skewed_ratio_ci",
    "proportion_ci",
    "rate_ci",
    "ratio_ci",
    "power_ci",
    "fixed_ci",
    "within",
    "config_fixed_metrics",
    "Verdict",
    "judge_equal",
    "judge_bound",
    "judge_optimal",
    "summarize",
    "write_csv",
    "read_csv",
    "to_cell",
    "from_cell",
    "summary_rows",
    "check_rates",
    "check_fixed_metrics",
    "metric_estimate",
    "format_number",
    "format_interval",
    "estimate_text",
    "format_4g",
    "markdown_table",
    "write_tables",
    "as_array",
    "crossing",
    "write_report",
    "is_report_file",
    "text_table",
    "print_table",
    "to_jsonable",
]


#: Kinds of interval an :class:`Estimate` carries.
INTERVAL_KINDS = ("two-sided", "upper", "none", "exact")

#: Relative and absolute tolerance of "the same value" for an exact estimate (rounding only).
EXACT_RTOL, EXACT_ATOL = 1e-9, 1e-12


@dataclass(frozen=True)
class Estimate:
    """An estimate with its standard error and a confidence interval.

    Attributes
    ----------
    mean : float
        The point estimate (a mean, a proportion or a ratio of means).
    se : float
        Its standard error (nan when none can be computed).
    low, high : float
        The interval. For ``kind == "upper"`` (no event seen) ``low`` is 0 and
        ``high`` a one-sided upper bound; for ``kind == "none"`` both are nan.
    n : int
        Replications (or trials) the estimate rests on.
    confidence : float
        Level of the interval.
    missing : int
        Values that were NaN and left out (counted, never silently dropped).
    kind : {"two-sided", "upper", "none", "exact"}
        ``"upper"``: nothing was observed, the interval is ``[0, high)``, printed
        "below X"; ``"none"``: too few replications for any interval;
        ``"exact"``: the config fixes the value (every replication gives it; a
        rate of an event that cannot happen is 0), ``low == high == mean``,
        printed "X (exact)" (:func:`fixed_ci`).
    method : str
        How the interval was made (``"t"``, ``"log-t"``, ``"wilson"``,
        ``"wilson-neff"``, ``"upper-bound"``, ``"ratio-delta"``, ...).
    """

    mean: float
    se: float
    low: float
    high: float
    n: int
    confidence: float = 0.95
    #: NaN values left out (see :func:`mean_ci`); ``n`` counts the others.
    dropped: int = 0
    kind: str = "two-sided"
    method: str = "t"

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def has_interval(self) -> bool:
        """False when there is no interval (one replication, or no data)."""
        return self.kind != "none" and not (math.isnan(self.low) or math.isnan(self.high))

    def contains(self, value: float) -> bool:
        """True when ``value`` lies inside the interval (``[0, high)`` for an upper bound).

        For an exact estimate, when ``value`` equals it up to rounding
        (:data:`EXACT_RTOL`, :data:`EXACT_ATOL`). Always False when there is no
        interval: use :func:`judge_equal` for a verdict that says so.
        """
        if not self.has_interval:
            return False
        if self.kind == "exact":
            return math.isclose(value, self.mean, rel_tol=EXACT_RTOL, abs_tol=EXACT_ATOL)
        if self.kind == "upper":
            return 0.0 <= value < self.high
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, fmt: Callable[[Any], str] | None = None) -> str:
        """The estimate as text: ``m [low, high]``, ``below X``, ``m (exact)`` or ``m (no interval, n = 1)``.

        Values left out as NaN are said: ``m [low, high] (2 NaN left out)``.

        Parameters
        ----------
        fmt : callable, optional
            Text of one number (default ``'{:.6g}'``).
        """
        f = fmt or (lambda v: f"{v:.6g}")
        note = f" ({self.dropped} NaN left out)" if self.dropped else ""
        if self.kind == "upper":
            return f"below {f(self.high)}{note}"
        if self.kind == "exact":
            return f"{f(self.mean)} (exact){note}"
        if not self.has_interval:
            return f"{f(self.mean)} (no interval, n = {self.n}){note}"
        return f"{f(self.mean)} [{f(self.low)}, {f(self.high)}]{note}"

    def __str__(self) -> str:
        return self.text()


def _clean(values: Iterable[float]) -> tuple[np.ndarray, int]:
    x = np.asarray(list(values), dtype=float)
    bad = np.isnan(x)
    return x[~bad], int(bad.sum())


# The quantiles come from scipy.special, which scipy.stats' norm.ppf and t.ppf call (ndtri and
# stdtrit: the same values, bit for bit, for every confidence in (0, 1)), imported on first use and
# without scipy.stats' import (about 2 s of CPU on a small machine): `import sim` and every CLI
# start stay light.
def _z(confidence: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2))


def _t(confidence: float, df: float) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + confidence / 2))


def _empty(n: int, confidence: float, missing: int, method: str, mean: float = math.nan) -> Estimate:
    nan = math.nan
    return Estimate(mean, nan, nan, nan, n, confidence, missing, "none", method)


def mean_ci(values: Iterable[float], confidence: float = 0.95, *, nan: str = "omit",
            lower: float | None = None, upper: float | None = None) -> Estimate:
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
    lower : float or None
        The least value the quantity can take (0 for a throughput or a time).
        An interval end below it is cut there (method ``"t-cut"``): the true
        mean is never below ``lower``, so cutting keeps the coverage and the
        interval stays inside the quantity's range.
    upper : float or None
        The largest value the quantity can take (1 for a fraction of time): an interval
        end above it is cut there, as ``lower`` cuts below.

    Returns
    -------
    Estimate
        With ``se = std(ddof=1) / sqrt(n)`` and half-width ``t_{n-1} * se``.
        With one value there is no interval (``kind == "none"``, ``low`` and
        ``high`` nan); with none, every number is nan.

    Raises
    ------
    ConfigError
        For a confidence outside (0, 1), an unknown ``nan``, or a NaN with
        ``nan="raise"``.
    """
    check_probability("confidence", confidence, open_low=True, open_high=True)
    check_choice("nan", nan, ("omit", "raise"))
    x, missing = _clean(values)
    if missing and nan == "raise":
        raise ConfigError("values", "numbers without NaN (or pass nan='omit')",
                          f"{missing} NaN of {x.size + missing}")
    n = int(x.size)
    if n == 0:
        return _empty(0, confidence, missing, "t")
    # an infinite value (or a sum beyond the doubles) gives an infinite or NaN mean and no
    # finite interval: the result says so, numpy need not warn on stderr
    with np.errstate(over="ignore", invalid="ignore"):
        m = float(x.mean())
        if n == 1:
            return _empty(1, confidence, missing, "t", m)
        se = float(x.std(ddof=1) / math.sqrt(n))
    h = _t(confidence, n - 1) * se
    lo, hi = m - h, m + h
    cut_lo = lower is not None and lo < lower
    cut_hi = upper is not None and hi > upper
    if cut_lo or cut_hi:
        return Estimate(m, se, float(lower) if cut_lo else lo, float(upper) if cut_hi else hi,
                        n, confidence, missing, "two-sided", "t-cut")
    return Estimate(m, se, lo, hi, n, confidence, missing, "two-sided", "t")


def log_mean_ci(values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Mean of a positive, right-skewed quantity with an interval on the log scale.

    Parameters
    ----------
    values : iterable of float
        One non-negative value per independent replication (NaNs counted in
        ``dropped`` and left out).
    confidence : float
        Two-sided confidence level.

    Returns
    -------
    Estimate
        ``mean`` and ``se`` as :func:`mean_ci`; the interval
        ``mean * exp(-+ t_{n-1} se / mean)`` is positive and longer above the
        mean than below it. No interval with fewer than two values.

    Raises
    ------
    ValueError
        When a value is negative.

    Notes
    -----
    The delta method gives ``se(log m) = se(m) / m``; a symmetric interval for
    ``log E[X]`` mapped back is the interval above. The sample mean of a
    right-skewed quantity falls below the true mean more often than above it,
    so a symmetric t-interval misses above more often than below; the log
    interval moves its ends up and keeps them positive.

    References
    ----------
    .. [1] X.-H. Zhou and S. Gao, "Confidence intervals for the log-normal
       mean", Statistics in Medicine 16 (1997) 783-790.
    """
    x, missing = _clean(values)
    if np.any(x < 0):
        raise ValueError(f"log_mean_ci needs non-negative values: {float(x.min())!r}")
    n = int(x.size)
    if n < 2:
        return _empty(n, confidence, missing, "log-t", float(x.mean()) if n else math.nan)
    m = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(n))
    if m == 0.0:
        return Estimate(0.0, 0.0, 0.0, 0.0, n, confidence, missing, "two-sided", "log-t")
    w = _t(confidence, n - 1) * se / m
    return Estimate(m, se, m * math.exp(-w), m * math.exp(w), n, confidence, missing,
                    "two-sided", "log-t")


def lognormal_mean_ci(values: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Mean of a positive quantity that is close to log-normal (Cox's method).

    Parameters
    ----------
    values : iterable of float
        One positive value per independent replication (NaNs counted in
        ``dropped`` and left out).
    confidence : float
        Two-sided confidence level.

    Returns
    -------
    Estimate
        ``mean = exp(m + s**2 / 2)`` with ``m`` and ``s**2`` the mean and
        variance (ddof 1) of the logs, and the interval
        ``exp(m + s**2/2 -+ z sqrt(s**2/n + s**4 / (2 (n - 1))))``; ``se`` by the
        delta method. No interval with fewer than two values.

    Raises
    ------
    ValueError
        When a value is not positive.

    Notes
    -----
    Disagreement after ``t`` gossip steps is the start times a product of
    ``t`` random contraction factors, so its logarithm is close to normal and
    its spread across 20 replications is large (a standard deviation of the
    log near 1 on a ring): the sample mean then misses the rare large
    replications and a t- or log-t interval lies below the true mean far more
    often than above it. Cox's interval works on the logs, where the rare
    replications weigh little. It is the exact-size interval only for a
    log-normal law, and its estimate is biased otherwise (measured: the
    contraction at n = 10 from 1000 replications, 0.4634 [0.4485, 0.4787] for
    the exact 0.4444); dtsim prints :func:`skewed_ratio_ci` instead.

    References
    ----------
    .. [1] C. E. Land, "An evaluation of approximate confidence interval
       estimation methods for lognormal means", Technometrics 14 (1972)
       145-158 (the method attributed to Cox).
    .. [2] X.-H. Zhou and S. Gao, "Confidence intervals for the log-normal
       mean", Statistics in Medicine 16 (1997) 783-790.
    """
    x, missing = _clean(values)
    if np.any(x <= 0):
        raise ValueError(f"lognormal_mean_ci needs positive values: {float(x.min())!r}")
    n = int(x.size)
    if n < 2:
        return _empty(n, confidence, missing, "cox", float(x[0]) if n else math.nan)
    ly = np.log(x)
    m, s2 = float(ly.mean()), float(ly.var(ddof=1))
    centre = m + s2 / 2
    sd = math.sqrt(s2 / n + s2 * s2 / (2 * (n - 1)))
    z = _z(confidence)
    est = math.exp(centre)
    return Estimate(est, est * sd, math.exp(centre - z * sd), math.exp(centre + z * sd), n,
                    confidence, missing, "two-sided", "cox")


def skewed_ratio_ci(numerator: Iterable[float], denominator: Iterable[float] | None = None,
                    confidence: float = 0.95) -> Estimate:
    """A mean (or ratio of means) of a positive, heavily skewed quantity, consistently.

    Parameters
    ----------
    numerator : iterable of float
        Per-replication values ``Y_i`` (positive).
    denominator : iterable of float, optional
        Paired ``X_i`` (positive); without it the estimate is ``mean(Y)``.
    confidence : float
        Level.

    Returns
    -------
    Estimate
        ``mean = R = mean(Y) / mean(X)`` (the ratio of means: consistent
        whatever the law). The lower end is the delta method's on the log
        scale, ``R exp(-t_{n-1} se(R) / R)`` (:func:`ratio_ci`); the upper end
        is ``R exp(w)`` with ``w`` the larger of the delta-method half-width
        ``t_{n-1} se(R) / R`` and the half-width from the spread of the logs of
        ``Y_i / X_i``, ``z sqrt(s^2/n + s^4 / (2 (n - 1)))`` (Cox's). No
        interval with fewer than two pairs; with a non-positive ratio, the
        delta-method interval alone.

    Notes
    -----
    For products of random contraction factors (gossip disagreement after
    many steps) the sample mean misses the rare large replications, and its
    delta-method standard error is small exactly then, so that interval lies
    below the true mean too often. The spread of the logs does not shrink in
    those samples, so it bounds the upper end. The failure is one-sided: a
    sample that holds a rare large replication has a large mean *and* a large
    delta-method standard error, so the delta method's lower end needs no
    guard. Widening both ends (as dtsim did before) over-covered at n = 10,
    where the per-replication log ratios are left-skewed (skewness about -1,
    not log-normal) and Cox's width is about 1.3 times the actual spread of
    ``log R``: over 2000 seeds the symmetric guard covered 97.3 % (0.75 %
    missing below), the one-sided guard 96.0 % (2.0 % above, 2.1 % below).
    Cox's log-normal estimate itself is not used: it is biased when the law
    is not log-normal (on the contraction at n = 10 with 1000 replications it
    gave 0.4634 [0.4485, 0.4787] for the exact 0.4444). Coverage is measured
    in ``docs/calibration.md``.

    References
    ----------
    .. [1] W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley, 1977 (ratio estimator).
    .. [2] C. E. Land, "An evaluation of approximate confidence interval
       estimation methods for lognormal means", Technometrics 14 (1972) 145-158.
    """
    y = np.asarray(list(numerator), dtype=float)
    xd = np.ones_like(y) if denominator is None else np.asarray(list(denominator), dtype=float)
    base = ratio_ci(y, xd, confidence, log=True)
    if not base.has_interval or not base.mean > 0:
        return Estimate(base.mean, base.se, base.low, base.high, base.n, confidence, base.dropped,
                        base.kind, "log-max")
    ok = ~(np.isnan(y) | np.isnan(xd))
    r = y[ok] / xd[ok]
    w = math.log(base.high / base.mean)
    if np.all(r > 0):
        s2 = float(np.log(r).var(ddof=1))
        n = r.size
        z = _z(confidence)
        w = max(w, z * math.sqrt(s2 / n + s2 * s2 / (2 * (n - 1))))
    return Estimate(base.mean, base.se, base.low, base.mean * math.exp(w), base.n,
                    confidence, base.dropped, "two-sided", "log-max")


def _wilson(p: float, n_eff: float, z: float) -> tuple[float, float]:
    z2 = z * z
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = z * math.sqrt(p * (1 - p) / n_eff + z2 / (4 * n_eff * n_eff)) / (1 + z2 / n_eff)
    return max(0.0, centre - half), min(1.0, centre + half)


def _upper_bound(n_eff: float, confidence: float) -> float:
    # P(no event in n_eff independent trials) = (1 - p)^n_eff <= 1 - confidence
    return float(1.0 - (1.0 - confidence) ** (1.0 / n_eff))


def proportion_ci(events: int, trials: int, confidence: float = 0.95) -> Estimate:
    """A probability from ``events`` in ``trials`` independent trials (Wilson score interval).

    Parameters
    ----------
    events : int
        Trials in which the event happened.
    trials : int
        Independent trials (> 0).
    confidence : float
        Level.

    Returns
    -------
    Estimate
        ``mean = events / trials``, ``se = sqrt(p (1 - p) / trials)``, the
        Wilson interval (inside ``[0, 1]``, longer towards 1/2). With no event,
        ``kind == "upper"`` and ``high = 1 - (1 - confidence) ** (1 / trials)``
        (a one-sided bound, about ``3 / trials`` at 95 %), printed "below X".

    Notes
    -----
    The Wilson interval is the set of ``p`` that a score test at the level
    does not reject: ``|p_hat - p| <= z sqrt(p (1 - p) / N)``.

    References
    ----------
    .. [1] E. B. Wilson, "Probable inference, the law of succession, and
       statistical inference", JASA 22 (1927) 209-212.
    .. [2] L. D. Brown, T. T. Cai and A. DasGupta, "Interval estimation for a
       binomial proportion", Statistical Science 16 (2001) 101-133.
    """
    if trials <= 0 or events < 0 or events > trials:
        raise ValueError(f"proportion_ci needs 0 <= events <= trials, trials > 0: {events}, {trials}")
    p = events / trials
    se = math.sqrt(p * (1 - p) / trials)
    if events == 0:
        return Estimate(0.0, 0.0, 0.0, _upper_bound(trials, confidence), int(trials), confidence,
                        0, "upper", "upper-bound")
    z = _z(confidence)
    lo, hi = _wilson(p, float(trials), z)
    return Estimate(p, se, lo, hi, int(trials), confidence, 0, "two-sided", "wilson")


def rate_ci(values: Iterable[float], trials: int | Sequence[int] | None = None,
            confidence: float = 0.95) -> Estimate:
    """A probability estimated by per-replication rates (a drop rate, an outage fraction).

    Parameters
    ----------
    values : iterable of float
        One rate in ``[0, 1]`` per independent replication (NaNs counted in
        ``dropped`` and left out).
    trials : int or sequence of int, optional
        Trials behind each rate, **only when the trials inside a replication
        are independent** (the stylised snapshot model). It gives the bound
        when no event is seen (and the count when every rate is equal);
        without it each replication counts as one trial for the bound (valid
        whatever the correlation inside a replication).
    confidence : float
        Level.

    Returns
    -------
    Estimate
        ``mean`` the mean rate, ``se`` its standard error across
        replications, ``n`` the replications and a Wilson interval on the
        effective number of independent trials (below). When every rate is
        0, ``kind == "upper"`` with ``high = 1 - (1 - confidence) ** (1 / N)``,
        ``N`` the total trials (or the replications). With one replication and
        some events, no interval.

    Notes
    -----
    The effective number of independent trials is
    ``n_eff = p (1 - p) / se**2`` (Kish's design effect): the count for which
    a binomial proportion has the variance the replications show, floored at
    the replications. It is not capped at the total trials: a cap would widen
    only the intervals whose sample variance came out low (over-covering). The interval is Wilson's at ``p`` with ``n_eff`` trials
    and the Student-t quantile with ``R - 1`` degrees of freedom, so it stays
    in ``[0, 1]`` and is longer on the side away from 0 and 1 (Korn and
    Graubard). A rate that is zero in every replication bounds ``p``: for a
    rate ``X`` in ``[0, 1]``, ``P(X > 0) >= E[X]``, so ``P(all R zero) <=
    (1 - p) ** R``.

    References
    ----------
    .. [1] L. Kish, *Survey Sampling*, Wiley, 1965 (design effect).
    .. [2] E. L. Korn and B. I. Graubard, "Confidence intervals for proportions
       with small expected number of positive counts estimated from survey
       data", Survey Methodology 24 (1998) 193-201.
    """
    x, missing = _clean(values)
    if np.any((x < 0) | (x > 1)):
        raise ValueError("rate_ci needs rates in [0, 1]")
    r = int(x.size)
    if r == 0:
        return _empty(0, confidence, missing, "wilson-neff")
    if trials is None:
        total = None
    else:
        t_arr = np.broadcast_to(np.asarray(trials, dtype=float), (r,)) if np.ndim(trials) == 0 \
            else np.asarray(trials, dtype=float)[: r]
        total = float(t_arr.sum())
    p = float(x.mean())
    if p == 0.0:
        n_b = total if total else float(r)
        return Estimate(0.0, 0.0, 0.0, _upper_bound(n_b, confidence), r, confidence, missing,
                        "upper", "upper-bound")
    if r == 1:
        return _empty(1, confidence, missing, "wilson-neff", p)
    se = float(x.std(ddof=1) / math.sqrt(r))
    # Capping n_eff at the true count would widen only the intervals whose sample variance
    # came out low, and over-cover; the trials serve when the variance is 0 (and the bound).
    n_eff = p * (1 - p) / se**2 if se > 0 else (total or float(r))
    n_eff = max(n_eff, float(r))
    lo, hi = _wilson(p, n_eff, _t(confidence, r - 1))
    return Estimate(p, se, lo, hi, r, confidence, missing, "two-sided", "wilson-neff")


def ratio_ci(numerator: Iterable[float], denominator: Iterable[float], confidence: float = 0.95,
             *, log: bool = True) -> Estimate:
    """A ratio of two means, ``mean(Y) / mean(X)``, with a delta-method interval.

    Parameters
    ----------
    numerator, denominator : iterable of float
        Paired per-replication values ``Y_i`` and ``X_i`` (a pair with a NaN
        is left out and counted in ``dropped``).
    confidence : float
        Level.
    log : bool
        Build the interval on the log scale (positive ratios: it stays
        positive and is longer above); otherwise symmetric.

    Returns
    -------
    Estimate
        ``mean = R = mean(Y) / mean(X)`` and ``se`` from the delta method;
        no interval with fewer than two pairs.

    Notes
    -----
    ``se(R)**2 = var(Y - R X) / (n mean(X)**2)`` (first-order Taylor expansion
    of ``R`` around the means); the t quantile has ``n - 1`` degrees of
    freedom. The log interval is ``R exp(-+ t se / R)``. Estimate and interval
    use the same replications and the same horizon.

    References
    ----------
    .. [1] W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley, 1977,
       section 6.4 (the ratio estimator and its variance).
    """
    y = np.asarray(list(numerator), dtype=float)
    xd = np.asarray(list(denominator), dtype=float)
    if y.shape != xd.shape:
        raise ValueError(f"ratio_ci needs paired values: {y.size} and {xd.size}")
    bad = np.isnan(y) | np.isnan(xd)
    y, xd, missing = y[~bad], xd[~bad], int(bad.sum())
    n = int(y.size)
    if n == 0 or xd.mean() == 0:
        return _empty(n, confidence, missing, "ratio-delta")
    ratio = float(y.mean() / xd.mean())
    if n == 1:
        return _empty(1, confidence, missing, "ratio-delta", ratio)
    se = float(np.std(y - ratio * xd, ddof=1) / (math.sqrt(n) * abs(xd.mean())))
    t = _t(confidence, n - 1)
    if log and ratio > 0:
        w = t * se / ratio
        lo, hi = ratio * math.exp(-w), ratio * math.exp(w)
    else:
        lo, hi = ratio - t * se, ratio + t * se
    return Estimate(ratio, se, lo, hi, n, confidence, missing, "two-sided", "ratio-delta")


def power_ci(est: Estimate, exponent: float) -> Estimate:
    """Carry an estimate of ``v`` to one of ``v ** exponent`` (``v >= 0``, ``exponent > 0``).

    Parameters
    ----------
    est : Estimate
        For example a ratio ``E[D(t)] / E[D(0)] = c ** t``.
    exponent : float
        For example ``1 / t``, giving the per-round factor ``c``.

    Returns
    -------
    Estimate
        Every end mapped (a monotone map keeps the coverage); ``se`` by the
        delta method; ``kind`` and ``method`` kept.
    """
    if exponent <= 0:
        raise ValueError(f"power_ci needs a positive exponent: {exponent!r}")

    def f(v: float) -> float:
        return max(v, 0.0) ** exponent if math.isfinite(v) else v

    se = est.se * exponent * est.mean ** (exponent - 1) if est.mean > 0 else math.nan
    return Estimate(f(est.mean), se, f(est.low), f(est.high), est.n, est.confidence, est.dropped,
                    est.kind, est.method)


def fixed_ci(values: Iterable[float], reason: str, confidence: float = 0.95, *,
             name: str = "value") -> Estimate:
    """A quantity the config fixes: the one value every replication gives, with no interval.

    Parameters
    ----------
    values : iterable of float
        One value per replication (NaNs counted in ``dropped`` and left out).
    reason : str
        Why the config fixes it, in words (kept in :attr:`Estimate.method` as
        ``"exact: <reason>"``), e.g. ``"no failures (availability 1)"``.
    confidence : float
        Carried for the record (an exact value needs no level).
    name : str
        The metric, named in the error.

    Returns
    -------
    Estimate
        ``kind == "exact"``, ``mean == low == high`` the common value and
        ``se == 0``; with no value, every number nan.

    Raises
    ------
    SimulationError
        When the values differ beyond rounding (:data:`EXACT_RTOL`,
        :data:`EXACT_ATOL`): the declaration that the config fixes the
        quantity is wrong, and an interval made up for it would hide that.

    Notes
    -----
    A t- or Wilson interval over replications that all give the same value
    says nothing about variation that does not exist: a Wilson interval on
    ten identical availabilities of 0.75 is [0.40, 0.93], and a rate that no
    replication can see is "below 1 - 0.05**(1/R)". Both describe a sampling
    experiment the config rules out, so the value is printed as exact.
    """
    x, missing = _clean(values)
    method = f"exact: {reason}"
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan, math.nan, 0, confidence, missing, "none",
                        method)
    lo, hi = float(x.min()), float(x.max())
    if not math.isclose(lo, hi, rel_tol=EXACT_RTOL, abs_tol=EXACT_ATOL):
        from .errors import SimulationError

        raise SimulationError(f"'{name}' is fixed by the config ({reason}) but its replications "
                              f"differ: {lo!r} to {hi!r} (a wrong declaration; please report it)")
    m = float(x.mean())  # as mean_ci and rate_ci compute it: a fixed metric's value is unchanged
    return Estimate(m, 0.0, m, m, int(x.size), confidence, missing, "exact", method)


def within(est: Estimate, low: float = -math.inf, high: float = math.inf) -> Estimate:
    """``est`` with its interval cut to ``[low, high]``, the range its quantity cannot leave.

    Parameters
    ----------
    est : Estimate
    low, high : float
        The quantity's range (a contraction factor that averaging cannot
        raise: ``[0, 1]``).

    Returns
    -------
    Estimate
        The same estimate, each end of its interval moved inside the range
        (``"-cut"`` added to the method when one moved). The true value lies
        in the range, so cutting keeps the coverage.
    """
    if not est.has_interval or est.kind == "exact":
        return est
    lo, hi = max(est.low, low), min(est.high, high)
    if (lo, hi) == (est.low, est.high):
        return est
    method = est.method if est.method.endswith("-cut") else est.method + "-cut"
    return Estimate(est.mean, est.se, lo, hi, est.n, est.confidence, est.dropped, est.kind, method)


def config_fixed_metrics(config: Any) -> dict[str, str]:
    """The metrics ``config`` fixes, each with the reason: its ``fixed_metrics()``, or none.

    A config class declares what its model cannot vary under it (a worker
    availability of 1 with no failures, a drop rate of 0 when nothing fails,
    every metric when nothing is random) in a method ``fixed_metrics() ->
    dict[str, str]``; a config without one (a plain dict) fixes nothing.
    """
    get = getattr(config, "fixed_metrics", None)
    if get is None or isinstance(config, Mapping):
        return {}
    return dict(get())


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """The judgement of one claim, with the rule that made it.

    Attributes
    ----------
    holds : bool or None
        True or False; None when the claim cannot be judged (no interval, no
        exact value).
    rule : str
        The rule, in words, a reader can apply to the numbers printed.
    """

    holds: bool | None
    rule: str

    @property
    def word(self) -> str:
        """``yes``, ``no`` or ``not judged``."""
        return "not judged" if self.holds is None else ("yes" if self.holds else "no")

    def __bool__(self) -> bool:
        return bool(self.holds)

    def __str__(self) -> str:
        return f"{self.word} ({self.rule})"


def _pct(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def judge_equal(est: Estimate, exact: float | None) -> Verdict:
    """Judge "the simulation agrees with the exact value".

    Parameters
    ----------
    est : Estimate
    exact : float or None

    Returns
    -------
    Verdict
        Rule: the exact value lies in the interval; for an upper bound (no
        event seen), the exact value lies below the bound; for a value the
        config fixes (``kind == "exact"``), the two are equal up to rounding;
        not judged with no interval (one replication) or no exact value.
    """
    c = _pct(est.confidence)
    if exact is None or (isinstance(exact, float) and math.isnan(exact)):
        return Verdict(None, "no exact value")
    if not est.has_interval:
        return Verdict(None, f"no interval from {est.n} replication(s)")
    if est.kind == "upper":
        return Verdict(est.contains(exact), f"no event seen: exact below the one-sided {c} bound")
    if est.kind == "exact":
        return Verdict(est.contains(exact), "the config fixes the value (the same in every "
                       "replication): equal to the exact value up to rounding")
    return Verdict(est.contains(exact), f"exact inside the {c} interval")


def judge_bound(est: Estimate, bound: float, *, claim: str = "at most",
                mode: str = "not rejected") -> Verdict:
    """Judge an inequality claim, "the quantity is at most (or at least) ``bound``".

    Parameters
    ----------
    est : Estimate
        The simulated quantity.
    bound : float
        The claimed bound.
    claim : {"at most", "at least"}
    mode : {"not rejected", "confirmed"}
        ``"not rejected"``: the claim fails only when the whole interval lies
        on the wrong side of the bound (the data reject it); ``"confirmed"``:
        the claim holds only when the whole interval lies on its side (the
        data show it).

    Returns
    -------
    Verdict
        With the rule in words; not judged with no interval.
    """
    if claim not in ("at most", "at least"):
        raise ValueError(f"'claim' must be 'at most' or 'at least': {claim!r}")
    if mode not in ("not rejected", "confirmed"):
        raise ValueError(f"'mode' must be 'not rejected' or 'confirmed': {mode!r}")
    c = _pct(est.confidence)
    if not est.has_interval:
        return Verdict(None, f"no interval from {est.n} replication(s)")
    if mode == "confirmed":
        side = "at or below" if claim == "at most" else "at or above"
        ok = est.high <= bound if claim == "at most" else est.low >= bound
        return Verdict(bool(ok), f"claim '{'<=' if claim == 'at most' else '>='} bound' holds only "
                                 f"if the whole {c} interval lies {side} the bound")
    if claim == "at most":
        ok = est.low <= bound
        rule = f"claim '<= bound' fails only if the whole {c} interval lies above the bound"
    else:
        ok = est.high >= bound
        rule = f"claim '>= bound' fails only if the whole {c} interval lies below the bound"
    return Verdict(bool(ok), rule)


def judge_optimal(chosen: str, costs: Mapping[str, Estimate], *, sense: str = "min") -> Verdict:
    """Judge "design ``chosen`` is optimal" against its simulated neighbours.

    Parameters
    ----------
    chosen : str
        Label of the design claimed optimal (a key of ``costs``).
    costs : mapping of str to Estimate
        Simulated cost (or value) of the chosen design and of every
        neighbouring design, each with an interval.
    sense : {"min", "max"}
        Whether lower (``min``) or higher is better.

    Returns
    -------
    Verdict
        Rule: the claim fails when some neighbour's interval lies wholly on
        the better side of the chosen design's interval (the data show a
        better neighbour); the rule names the neighbours and any that beat it.
        Not judged if an interval is missing.
    """
    if chosen not in costs:
        raise ValueError(f"'chosen' must be a key of costs: {chosen!r}")
    if sense not in ("min", "max"):
        raise ValueError(f"'sense' must be 'min' or 'max': {sense!r}")
    mine = costs[chosen]
    others = {k: e for k, e in costs.items() if k != chosen}
    names = ", ".join(others) or "none"
    c = _pct(mine.confidence)
    if not mine.has_interval or not all(e.has_interval for e in others.values()):
        return Verdict(None, f"an interval is missing (neighbours {names})")
    if sense == "min":
        better = [k for k, e in others.items() if e.high < mine.low]
    else:
        better = [k for k, e in others.items() if e.low > mine.high]
    rule = (f"fails if a neighbour's {c} interval lies wholly {'below' if sense == 'min' else 'above'}"
            f" the chosen design's; neighbours simulated: {names}")
    if better:
        rule += f"; better: {', '.join(better)}"
    return Verdict(not better, rule)


def summarize(
    records: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
    *,
    lower: float | None = None,
    rates: Iterable[str] = (),
    fixed: Mapping[str, str] | None = None,
    fractions: Iterable[str] = (),
) -> dict[str, Estimate]:
    """Estimate each numeric metric across replication records.

    Records carrying an ``error`` are skipped. When ``metrics`` is None every
    numeric field except ``replication`` and ``seed`` is summarised.

    Parameters
    ----------
    records : sequence of dict
    metrics : sequence of str, optional
    confidence : float
    lower : float, optional
        Passed to :func:`mean_ci` (0 when every metric is non-negative).
    rates : iterable of str
        Metrics that are probabilities or fractions: :func:`rate_ci`'s interval
        (inside ``[0, 1]``, "below X" when no replication saw the event).
    fixed : mapping of str to str, optional
        Metrics the config fixes, each with the reason (a config's
        ``fixed_metrics()``, :func:`config_fixed_metrics`): :func:`fixed_ci`,
        printed exact. Names not among ``metrics`` are ignored.
    fractions : iterable of str
        Metrics that are fractions of a whole (a compute utilisation) summarised by
        :func:`mean_ci`: their interval is also cut at 1 (``upper``).

    Raises
    ------
    ConfigError
        ``'metrics'`` naming a metric no record (without error) carries.
    SimulationError
        When every record carries an error (the first is named), or a metric
        declared ``fixed`` differs between the records (:func:`fixed_ci`).
    """
    ok = [r for r in records if not r.get("error")]
    if records and not ok:  # nothing to summarise: say why, never a table of NaN
        from .errors import SimulationError

        raise SimulationError.from_records(list(records))  # type: ignore[misc]
    if metrics is not None:
        known = {k for r in ok for k in r}
        missing = [m for m in metrics if m not in known]
        if missing:
            raise ConfigError("metrics", "names of metrics the records carry ("
                              + ", ".join(sorted(k for k in known if k not in
                                                 ("point", "replication", "seed", "wall_time",
                                                  "error", "point_key", "config_hash")))
                              + ")", missing[0])
    if metrics is None:
        skip = {"point", "replication", "seed", "wall_time"}
        metrics = [
            k for k, v in (ok[0].items() if ok else [])
            if k not in skip and isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, bool)
        ]
    rates = set(rates)
    fractions = set(fractions)
    fixed = dict(fixed or {})
    out = {}
    for m in metrics:
        vals = [float(r[m]) for r in ok if r.get(m) is not None]
        if m in fixed:
            out[m] = fixed_ci(vals, fixed[m], confidence, name=m)
        elif m in rates:
            out[m] = rate_ci(vals, None, confidence)
        else:
            out[m] = mean_ci(vals, confidence, lower=lower,
                             upper=1.0 if m in fractions else None)
    return out


def write_csv(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write records as CSV (union of keys, in first-seen order)."""
    from .errors import replace_atomic

    path = Path(path)
    fields: list[str] = []
    for r in records:
        for k in r:
            if k not in fields:
                fields.append(k)

    def write(target: Path) -> None:
        with target.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            for r in records:
                w.writerow(r)

    # (smallfix8) the one atomic write: a crash leaves no torn table, a link stays a link
    replace_atomic(path, write)
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
    if isinstance(value, np.floating):  # before float: np.float64 is a float subclass, whose
        return float(value)             # repr in numpy 2 is 'np.float64(x)', read back as text
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


def check_rates(rates: Mapping[str, Any] | None, name: str = "rates") -> dict[str, Any]:
    """Validate a declaration of which metrics are probabilities (see :func:`summary_rows`).

    Parameters
    ----------
    rates : mapping or None
        Metric name -> ``None``, a positive int or a field name (str).
    name : str
        The parameter named in the error (``RATES`` in an experiment file).

    Returns
    -------
    dict
        The declaration as a plain dict (empty for None).

    Raises
    ------
    ConfigError
        For anything else.
    """
    if rates is None:
        return {}
    if not isinstance(rates, Mapping):
        raise ConfigError(name, "a dict of metric name -> None, a trial count or a field name", rates)
    for k, v in rates.items():
        ok = v is None or (isinstance(v, str) and v != "") or (
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1)
        if not isinstance(k, str) or not ok:
            raise ConfigError(name, "a dict of metric name -> None, a trial count (int >= 1) or a "
                              "field name", f"{k!r}: {v!r}")
    return dict(rates)


def check_nonnegative_metrics(names: Any, name: str = "nonnegative") -> tuple[str, ...] | str:
    """Validate a declaration of metrics that cannot be negative (see :func:`summary_rows`).

    Parameters
    ----------
    names : None, "*" or sequence of str
        Metric names, or ``"*"`` for every metric not declared a rate.
    name : str
        The parameter named in the error (``NONNEGATIVE`` in an experiment file).

    Returns
    -------
    tuple of str or "*"
        The declaration (an empty tuple for None).

    Raises
    ------
    ConfigError
        For anything else.
    """
    if names is None:
        return ()
    if names == "*":
        return "*"
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(name, 'a sequence of metric names, or "*" for every metric', names)
    return tuple(names)


def check_fixed_metrics(fixed: Any, name: str = "fixed") -> dict[str, str]:
    """Validate a declaration of metrics fixed at every point: metric name -> reason (text).

    Parameters
    ----------
    fixed : mapping or None
        For example ``{"exact_joint_outage": "computed from the config"}``.
    name : str
        The parameter named in the error (``FIXED`` in an experiment file).

    Returns
    -------
    dict
        The declaration (empty for None).

    Raises
    ------
    ConfigError
        For anything but a dict of non-empty strings.
    """
    if fixed is None:
        return {}
    if not isinstance(fixed, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in fixed.items()):
        raise ConfigError(name, "a dict of metric name -> the reason the config fixes it (text)",
                          fixed)
    return dict(fixed)


def _is_nonnegative(metric: str, declared: tuple[str, ...] | str) -> bool:
    return declared == "*" or metric in declared


def metric_estimate(values: Sequence[float], confidence: float = 0.95, *,
                    rate: bool = False, trials: Any = None, nonnegative: bool = False,
                    fixed: str | None = None, name: str = "value") -> Estimate:
    """The estimate of one metric across replications: a rate's (:func:`rate_ci`) or a mean's.

    Parameters
    ----------
    values : sequence of float
        One value per replication.
    confidence : float
        Level.
    rate : bool
        The metric is a probability or a rate in ``[0, 1]``: a Wilson interval on the
        effective trials (inside ``[0, 1]``; "below X" with no event).
    trials : None, int or sequence of int
        Independent trials behind each rate (see :func:`rate_ci`); ignored for a mean.
    nonnegative : bool
        The metric cannot be negative (a time, a count, a throughput): its
        t-interval is cut at 0 (:func:`mean_ci` with ``lower=0``).
    fixed : str, optional
        Why the config fixes the metric: :func:`fixed_ci` (exact, no interval).
    name : str
        The metric, named in :func:`fixed_ci`'s error and in the refusal of a value out of a
        declared range (which did not say which metric it was: user trial 15).

    Returns
    -------
    Estimate

    Raises
    ------
    ConfigError
        When a declared rate has a value outside ``[0, 1]``, or a declared
        non-negative metric a negative value.
    SimulationError
        When a metric declared fixed differs between replications.
    """
    if fixed is not None:
        return fixed_ci(values, fixed, confidence, name=name)
    if not rate:
        if nonnegative:
            x = np.asarray(values, dtype=float)
            bad = x[~np.isnan(x) & (x < 0)]
            if bad.size:
                raise ConfigError("nonnegative", f"metrics whose values are >= 0 ('{name}' "
                                  "is not)", float(bad[0]))
            return mean_ci(values, confidence, lower=0.0)
        return mean_ci(values, confidence)
    x = np.asarray(values, dtype=float)
    bad = x[~np.isnan(x) & ((x < 0) | (x > 1))]
    if bad.size:
        raise ConfigError("rates", f"metrics whose values lie in [0, 1] ('{name}' is not)",
                          float(bad[0]))
    return rate_ci(x, trials, confidence)


def summary_rows(
    records: Sequence[Mapping[str, Any]],
    points: Sequence[Mapping[str, Any]],
    *,
    metrics: Sequence[str],
    confidence: float = 0.95,
    counts: bool = False,
    rates: Mapping[str, Any] | None = None,
    nonnegative: Any = None,
    fixed: Sequence[Mapping[str, str]] | None = None,
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
    rates : mapping, optional
        The metrics that are probabilities or rates in ``[0, 1]`` (a drop
        rate, an outage fraction), each mapped to the independent trials
        behind one replication's rate: ``None`` (the trials inside a
        replication may be correlated: each replication counts as one trial
        for the no-event bound), an int, or the name of a record field or a
        point parameter holding the count. See :func:`rate_ci`.
    nonnegative : sequence of str or "*", optional
        Metrics that cannot be negative (times, counts, throughputs), or
        ``"*"`` for every metric that is not a declared rate: their
        t-intervals are cut at 0 (:func:`mean_ci`'s ``lower``), which keeps
        the coverage and the interval inside the quantity's range.
    fixed : sequence of mapping, optional
        One per point: the metrics that point's config fixes, each with the
        reason (:func:`config_fixed_metrics`): exact, ``m_low == m_high ==
        m_mean`` and ``m_kind`` ``exact`` (:func:`fixed_ci`).

    Returns
    -------
    list of dict
        ``point``, the point's parameters, ``replications`` (tasks without
        error), ``errors``, then for each metric ``m``: ``m_mean``, ``m_se``,
        ``m_low`` and ``m_high`` (Student-t interval across replications; for
        a declared rate, :func:`rate_ci`'s, inside ``[0, 1]``), a column
        ``m_kind`` for a declared rate or a metric some point fixes:
        ``two-sided``, ``upper`` when no event was seen and the interval is
        the one-sided bound ``[0, m_high)``, "below m_high", or ``exact`` where
        the point's config fixes it), and, with ``counts``, ``m_n`` (the
        number of values averaged) for every metric that is missing or NaN in
        some record of a point.

    Raises
    ------
    ConfigError
        When a declared rate has a value outside ``[0, 1]`` or its trial count
        names no field of the records or points, or a declared non-negative
        metric has a negative value.
    SimulationError
        When a metric a point's config fixes differs between its replications.
    """
    rates = check_rates(rates)
    nonneg = check_nonnegative_metrics(nonnegative)
    fixed_at = [dict(f) for f in fixed] if fixed is not None else [{} for _ in points]
    if len(fixed_at) != len(points):
        raise ValueError(f"summary_rows needs one fixed-metrics mapping per point: "
                         f"{len(fixed_at)} for {len(points)}")
    kinds = set(rates) | {m for f in fixed_at for m in f}
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
            use = [r for r in ok if _numeric(r.get(m))]
            vals = [float(r[m]) for r in use]
            if m in fixed_at[i]:
                e = metric_estimate(vals, confidence, fixed=fixed_at[i][m],
                                    name=f"{m}' at point '{i}")
            elif m in rates:
                e = metric_estimate(vals, confidence, rate=True,
                                    trials=_trials(rates[m], use, params),
                                    name=f"{m}' at point '{i}")
            else:
                e = metric_estimate(vals, confidence, nonnegative=_is_nonnegative(m, nonneg),
                                    name=f"{m}' at point '{i}")
            row[f"{m}_mean"], row[f"{m}_se"] = e.mean, e.se
            row[f"{m}_low"], row[f"{m}_high"] = e.low, e.high
            if m in kinds:
                row[f"{m}_kind"] = e.kind
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


def _trials(spec: Any, records: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> Any:
    """The trial counts a rate declaration names, for :func:`rate_ci` (aligned with the values)."""
    if spec is None or not isinstance(spec, str):
        return spec
    if spec in params and _numeric(params[spec]):
        return int(params[spec])
    if records and all(_numeric(r.get(spec)) for r in records):
        return [int(r[spec]) for r in records]
    if not records:
        return None
    raise ConfigError("rates", "trial counts naming a numeric record field or point parameter", spec)


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


# --------------------------------------------------------------------------- report


def format_number(x: Any) -> str:
    """Compact text for a number in a table (4 significant digits, ``nan`` kept).

    Within 0.01 of 1 the 4 digits go to the gap: ``0.997443`` is ``1 - 0.002557``
    (and ``1.0004`` is ``1 + 0.0004``).
    """
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
    # One format, 4 significant digits; near +-1 (rates such as 1 - 1/(n(n-1))) they go to the
    # gap to 1, written as such: 0.999899 is "1 - 0.000101".
    d = abs(v) - 1.0
    if 0 < abs(d) < 0.01:
        text = f"1 {'+' if d > 0 else '-'} {abs(d):.4g}"
        return text if v > 0 else f"-({text})"
    return f"{v:.4g}"


def _near_one(x: Any) -> bool:
    try:
        d = abs(abs(float(x)) - 1.0)
    except (TypeError, ValueError):
        return False
    return 0 < d < 0.01


def format_interval(mean: Any, low: Any, high: Any) -> str:
    """``mean [low, high]`` in one number format for all three.

    The gap form of :func:`format_number` (``1 - 0.002557``) is used only when
    every one of the three is within 0.01 of 1 (a capture factor
    ``1 - 1/(n(n-1))`` and its interval); otherwise all three are written with
    4 significant digits, so an interval never mixes the forms
    (``1.069 [0.9974, 1.141]``, not ``1.069 [1 - 0.002557, 1.141]``).
    """
    vals = (mean, low, high)
    if all(_near_one(v) for v in vals):
        m, lo, hi = (format_number(v) for v in vals)
    else:
        m, lo, hi = (_plain_number(v) for v in vals)
    return f"{m} [{lo}, {hi}]"


def _plain_number(x: Any) -> str:
    """:func:`format_number` without the gap form near 1."""
    text = format_number(x)
    if not _near_one(x):
        return text
    return f"{float(x):.4g}"


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
    write_atomic(out_dir / f"{stem}.md", f"# {title}\n\n{text}\n")
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


def estimate_text(est: Any) -> str:
    """A claim's estimate as the report and ``dtsim reproduce`` print it.

    A two-sided interval in one number format (:func:`format_interval`); an
    exact value, a one-sided bound or a mean without an interval as
    :meth:`Estimate.text` writes it; anything else by :func:`format_number`.
    """
    if isinstance(est, Estimate):
        if est.kind != "two-sided" or not est.has_interval:
            return est.text(format_number)
        return format_interval(est.mean, est.low, est.high)
    return format_number(est)


def _row_verdict(row: Mapping[str, Any]) -> Verdict:
    """A claim row's verdict: its ``verdict``, else ``agrees`` with its ``rule``."""
    v = row.get("verdict")
    if isinstance(v, Verdict):
        return v
    return Verdict(bool(row.get("agrees")), str(row.get("rule") or "exact inside the 95% interval"))


def _ruled(row: Mapping[str, Any]) -> bool:
    return any(k in row for k in ("verdict", "rule", "params"))


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
        table; a row with ``params`` (its parameters, as text) or ``verdict``
        (a :class:`Verdict`; or ``agrees`` with ``rule``) makes the study's
        table state each row's parameters, verdict and rule), ``figures`` (list of image paths, embedded
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
    n_failed = sum(1 for s in studies if s.get("error"))
    ruled = any(_ruled(r) for s in studies for r in s.get("rows", ()))
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    if ruled:
        verdicts = [_row_verdict(r) for s in studies for r in s.get("rows", ())]
        n_no = sum(v.holds is False for v in verdicts)
        n_open = sum(v.holds is None for v in verdicts)
        if n_no == 0 and n_open == 0 and n_failed == 0:
            lines.append(f"All {n_claims} claims hold, each under the rule stated in its row.")
        else:
            lines.append(f"**{n_no} of {n_claims} claims do not hold and {n_open} could not be "
                         f"judged (rules in each row); {n_failed} studies failed to run.**")
    else:
        n_bad = sum(1 for s in studies for r in s.get("rows", ()) if not r.get("agrees"))
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
        if rows and any(_ruled(r) for r in rows):
            lines += ["| claim | parameters | exact | simulated (95% CI) | holds | rule |",
                      "|---|---|---|---|---|---|"]
            for r in rows:
                v = _row_verdict(r)
                word = v.word if v.holds else f"**{v.word}**"
                lines.append(f"| {_md(r.get('claim', ''))} | {_md(r.get('params', ''))} | "
                             f"{_md(format_number(r.get('exact')))} | "
                             f"{_md(estimate_text(r.get('estimate')))} | {word} | {_md(v.rule)} |")
            lines.append("")
        elif rows:
            lines += ["| claim | exact | simulated (95% CI) | agrees |", "|---|---|---|---|"]
            for r in rows:
                agrees = "yes" if r.get("agrees") else "**no**"
                lines.append(f"| {_md(r.get('claim', ''))} | {_md(format_number(r.get('exact')))} | "
                             f"{_md(estimate_text(r.get('estimate')))} | {agrees} |")
            lines.append("")
            notes = [(r.get("claim", ""), r.get("note")) for r in rows if r.get("note")]
            if notes:
                lines += ["Notes:", ""] + [f"- *{_md(c)}*: {_md(n)}" for c, n in notes] + [""]
        for fig in s.get("figures", ()):
            rel = os.path.relpath(Path(fig).resolve(), path.parent.resolve())
            lines += [f"![{Path(fig).stem}]({Path(rel).as_posix()})", ""]
    write_atomic(path, "\n".join(lines))  # (smallfix8) the one atomic write (links kept)
    return path


def is_report_file(path: str | Path) -> bool:
    """Whether ``path`` begins with the heading :func:`write_report` writes by default (``# dtsim
    reproduction report``): a report ``dtsim reproduce`` wrote, which a later run replaces."""
    with Path(path).open("rb") as fh:
        return fh.readline(256) == b"# dtsim reproduction report\n"


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
