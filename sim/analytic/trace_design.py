"""Study A's design laws when the workers replay a count trace (``random`` policy).

A count trace says how many of its ``C`` slots are up at each time, ``c(t)``.
Under the ``random`` mapping policy (:mod:`sim.traces.replay`) the set of up
slots is uniform given the count, so ``W = L r <= C`` workers (slots
``0 .. W-1``) hold a hypergeometric number ``u`` of the ``c(t)`` up slots,
and those ``u`` are a uniform subset of the ``W`` workers. The number ``K``
of stages with no up replica then has, at time ``t``,

.. math::

    P(K = k \\mid c) = \\sum_u \\mathrm{Hyp}(u; C, c, W)\\, P(K = k \\mid u),
    \\qquad
    P(K = k \\mid u) = \\binom{L}{k} \\frac{E(L - k, u)}{\\binom{W}{u}},

where ``E(n, u)`` counts the ways to choose ``u`` workers among ``n``
stages of ``r`` replicas leaving no stage empty (inclusion-exclusion:
``E(n, u) = sum_i (-1)^i C(n, i) C((n - i) r, u)``). A microbatch arriving
at a uniformly random time (or at a uniformly random offset of a looped
replay) sees the time average of this law over the trace's span; Study A's
drop rate and quality-weighted goodput follow from it as from the binomial
law (no shared domains: ``rho = 0``).

References
----------
Study A, docs/studies.md; the replay policies, :mod:`sim.traces.replay`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import check, check_int
from .pipeline import Design, OptimalDesign, _pick_optimal, _quality_weights

__all__ = ["empty_stage_law", "trace_skipped_distribution", "trace_drop_probability",
           "trace_min_replicas", "trace_optimal_design"]


def empty_stage_law(stages: int, replicas: int) -> np.ndarray:
    """``P(K = k | u)``: stages left with no up replica when ``u`` of ``L r`` workers are up.

    Parameters
    ----------
    stages, replicas : int
        ``L`` stages of ``r`` replicas each.

    Returns
    -------
    numpy.ndarray
        Shape ``(L r + 1, L + 1)``: row ``u`` is the law of ``K`` given ``u``
        uniformly chosen up workers.

    Notes
    -----
    Counted exactly in integers:
    ``#{K = k, u up} = C(L, k) sum_i (-1)^i C(L - k, i) C((L - k - i) r, u)``.
    """
    L = check_int("stages", stages, low=1)
    r = check_int("replicas", replicas, low=1)
    W = L * r
    out = np.zeros((W + 1, L + 1))
    for u in range(W + 1):
        total = math.comb(W, u)
        for k in range(L + 1):
            n = L - k
            covered = sum((-1) ** i * math.comb(n, i) * math.comb((n - i) * r, u)
                          for i in range(n + 1))
            out[u, k] = math.comb(L, k) * covered / total
    return out


def _count_law(times: Sequence[float], counts: Sequence[int], end: float) -> dict[int, float]:
    """Fraction of ``[0, end]`` spent at each count."""
    t = np.asarray(times, dtype=float)
    c = np.asarray(counts, dtype=np.int64)
    dt = np.diff(np.append(t, float(end)))
    out: dict[int, float] = {}
    for ci, di in zip(c.tolist(), dt.tolist(), strict=True):
        if di > 0:
            out[ci] = out.get(ci, 0.0) + di / float(end)
    return out


def trace_skipped_distribution(times: Sequence[float], counts: Sequence[int], end: float,
                               slots: int, stages: int, replicas: int) -> np.ndarray:
    """Time-averaged law of ``K`` (stages with no up replica) under the ``random`` policy.

    Parameters
    ----------
    times, counts, end
        The count step function: ``counts[i]`` up on ``[times[i], times[i+1])``,
        the last on ``[times[-1], end]``.
    slots : int
        The trace's slots ``C`` (at least every count).
    stages, replicas : int
        ``L`` and ``r``; ``L r <= C``.

    Returns
    -------
    numpy.ndarray
        ``P(K = k)``, ``k = 0 .. L``.
    """
    L = check_int("stages", stages, low=1)
    r = check_int("replicas", replicas, low=1)
    C = check_int("slots", slots, low=1)
    W = L * r
    check(W <= C, "replicas", f"at most {C // L} (the trace's {C} slots over {L} stages)",
          replicas)
    check(int(np.max(counts)) <= C, "slots", f"at least the largest count {int(np.max(counts))}",
          slots)
    from scipy import stats as sps  # on first use: keeps every CLI start light

    given_u = empty_stage_law(L, r)
    u = np.arange(W + 1)
    law = np.zeros(L + 1)
    for c, frac in _count_law(times, counts, end).items():
        law += frac * (sps.hypergeom.pmf(u, C, c, W) @ given_u)
    return law


def trace_drop_probability(times: Sequence[float], counts: Sequence[int], end: float, slots: int,
                           stages: int, replicas: int, skip_budget: int) -> float:
    """``P(K > s)`` averaged over the trace (Study A's drop rate under the ``random`` policy)."""
    s = check_int("skip_budget", skip_budget, low=0, high=stages)
    law = trace_skipped_distribution(times, counts, end, slots, stages, replicas)
    return float(max(law[s + 1:].sum(), 0.0))


def _trace_args(trace: Any) -> tuple[np.ndarray, np.ndarray, float, int]:
    from ..traces import trace_slots

    return trace.times, trace.counts, float(trace.end), trace_slots(trace)


def trace_min_replicas(trace: Any, stages: int, skip_budget: int, target_drop: float) -> Design:
    """Fewest replicas whose drop rate under ``trace`` (``random`` policy) is at most the target.

    ``trace`` is an :class:`~sim.traces.AvailabilityTrace`; ``r`` goes up to
    ``C // L`` (every worker replays its own slot). The floor is the drop rate
    at that largest ``r``.
    """
    L = check_int("stages", stages, low=1)
    times, counts, end, C = _trace_args(trace)
    rmax = C // L
    if rmax < 1:
        return Design(False, None, None, 1.0, 1.0,
                      f"the trace has {C} slots, fewer than the {L} stages: no design fits it")
    drop = 1.0
    for r in range(1, rmax + 1):
        drop = trace_drop_probability(times, counts, end, C, L, r, skip_budget)
        if drop <= target_drop:
            return Design(True, r, L * r, drop, drop, "")
    return Design(False, None, None, drop, drop,
                  f"r={rmax} uses all {C} of the trace's slots and still drops {drop:.4g} "
                  f"> target_drop {target_drop:g}")


def trace_optimal_design(trace: Any, stages: int, skip_penalty: float,
                         penalty: Any = "multiplicative") -> OptimalDesign:
    """Cost-optimal ``(r, s)`` under ``trace`` (``random`` policy): ``L r / E[q(K); K <= s]``.

    The same rule as :func:`sim.analytic.optimal_design` (ties to the fewest
    workers, then the smallest ``s``), with ``K``'s law averaged over the trace
    and ``r`` up to ``C // L``.
    """
    L = check_int("stages", stages, low=1)
    times, counts, end, C = _trace_args(trace)
    rmax = C // L
    check(rmax >= 1, "stages", f"at most the trace's {C} slots", stages)
    ks = np.arange(L + 1)
    w = _quality_weights(ks, skip_penalty, penalty)
    costs = np.empty((rmax, L + 1))
    for r in range(1, rmax + 1):
        mass = np.cumsum(trace_skipped_distribution(times, counts, end, C, L, r) * w)
        with np.errstate(divide="ignore"):
            costs[r - 1] = np.where(mass > 0, L * r / np.where(mass > 0, mass, 1.0), np.inf)
    return _pick_optimal(costs)
