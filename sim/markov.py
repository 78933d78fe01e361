"""Exact, vectorised sampling of two-state Markov components at given times.

A worker or a failure domain whose up and down times are exponential is a
two-state continuous-time Markov chain. Observed only at arrival times
``t_1 < t_2 < ...`` (the snapshot pipeline looks at the states when a
microbatch arrives and nothing else), its states form a discrete-time Markov
chain whose kernel over a gap ``g`` is

    P(up at t + g | up at t)   = pi + (1 - pi) lam,
    P(up at t + g | down at t) = pi (1 - lam),      lam = exp(-g (alpha + beta)),

with ``pi`` the availability, ``alpha = 1 / mean_up`` and ``beta = 1 / mean_down``.
That kernel is the mixture "keep the state with probability ``lam``, else draw
it afresh from the stationary law", so a whole path is two arrays of uniforms:
refresh flags and fresh values; the state at step ``k`` is the fresh value
drawn at the last refresh at or before ``k``. The running maximum of the
refresh indices finds it, vectorised over time and components at once. The law
of the sampled path is exactly that of the continuous-time process seen at the
arrival times, however often the components flip between arrivals, so the cost
is independent of the failure rate (a discrete-event simulation pays for every
transition).
"""

from __future__ import annotations

import numpy as np

__all__ = ["keep_probability", "sample_states"]


def keep_probability(availability: np.ndarray, mean_downtime: np.ndarray,
                     gaps: np.ndarray) -> np.ndarray:
    """``lam = exp(-g / (a d))``: probability the mixture kernel keeps the state over a gap.

    Parameters
    ----------
    availability : numpy.ndarray
        ``(c,)`` stationary up probabilities ``a`` of the components.
    mean_downtime : numpy.ndarray
        ``(c,)`` mean down times ``d`` (> 0).
    gaps : numpy.ndarray
        ``(m,)`` gaps between successive observation times.

    Returns
    -------
    numpy.ndarray
        ``(m, c)``.

    Notes
    -----
    ``alpha + beta = (1 - a) / (a d) + 1 / d = 1 / (a d)`` because
    ``mean_up = a d / (1 - a)``. A component with ``a = 0`` is always down and
    ``lam = 0``; with ``a = 1`` it is always up (the fresh draws are all up), so
    ``lam`` does not matter.
    """
    a = np.asarray(availability, dtype=float)
    d = np.asarray(mean_downtime, dtype=float)
    with np.errstate(divide="ignore"):
        rate = np.where(a > 0, 1.0 / (np.where(a > 0, a, 1.0) * d), np.inf)
    return np.exp(-np.outer(np.asarray(gaps, dtype=float), rate))


def sample_states(availability: np.ndarray, mean_downtime: np.ndarray, gaps: np.ndarray,
                  *, rng: np.random.Generator, start: np.ndarray | None = None) -> np.ndarray:
    """Up states of independent exponential two-state components at successive times.

    Parameters
    ----------
    availability, mean_downtime : numpy.ndarray
        ``(c,)`` per component.
    gaps : numpy.ndarray
        ``(m,)``: ``gaps[0]`` is the time from the previous observation (whose
        states are ``start``) to the first row; later entries are the gaps
        between rows.
    rng : numpy.random.Generator
    start : numpy.ndarray of bool, optional
        ``(c,)`` states at the previous observation. None draws the first row
        from the stationary law (an exact stationary start) and ignores
        ``gaps[0]``.

    Returns
    -------
    numpy.ndarray
        ``(m, c)`` booleans, True where the component is up.
    """
    a = np.asarray(availability, dtype=float)
    m, c = len(gaps), a.size
    lam = keep_probability(a, mean_downtime, gaps)
    refresh = rng.random((m, c)) >= lam
    fresh = rng.random((m, c)) < a
    if start is None:
        refresh[0] = True
    rows = np.where(refresh, np.arange(m)[:, None], -1)
    last = np.maximum.accumulate(rows, axis=0)
    up = np.take_along_axis(fresh, np.maximum(last, 0), axis=0)
    if start is not None:
        never = last < 0
        if never.any():
            up = np.where(never, np.broadcast_to(np.asarray(start, dtype=bool), (m, c)), up)
    return up

