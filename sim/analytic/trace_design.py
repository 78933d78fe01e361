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
           "trace_min_replicas", "trace_optimal_design", "hypergeom_pmf"]


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
    # the binomials of small numbers once; C(m r, u) once per (m, u): the same integers as
    # summing C(n, i) C((n - i) r, u) directly, L times fewer big-integer binomials
    small = [[math.comb(n, i) for i in range(n + 1)] for n in range(L + 1)]
    for u in range(W + 1):
        total = math.comb(W, u)
        ways = [math.comb(m * r, u) for m in range(L + 1)]
        for k in range(L + 1):
            n = L - k
            row = small[n]
            covered = sum((-1) ** i * row[i] * ways[n - i] for i in range(n + 1))
            out[u, k] = small[L][k] * covered / total
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
    given_u = empty_stage_law(L, r)
    law = np.zeros(L + 1)
    for c, frac in _count_law(times, counts, end).items():
        law += frac * (hypergeom_pmf(C, c, W) @ given_u)
    return law


#: Population above which :func:`hypergeom_pmf` sums logarithms instead of asking scipy,
#: whose ``hypergeom.pmf`` takes seconds per call at 10^9 slots (and cannot be interrupted).
HYPERGEOM_DIRECT = 10**6


def hypergeom_pmf(population: int, successes: int, draws: int) -> np.ndarray:
    """``P(u)``, ``u = 0 .. draws``: successes among ``draws`` taken without replacement.

    Parameters
    ----------
    population, successes, draws : int
        ``C`` slots of which ``c`` are up; ``W`` workers drawn.

    Notes
    -----
    ``P(u) = C(c, u) C(C - c, W - u) / C(C, W)``. Up to
    :data:`HYPERGEOM_DIRECT` slots scipy's ``hypergeom.pmf`` answers; beyond,
    each binomial is a sum of ``log((n - i) / (i + 1))`` over its ``k`` terms,
    so the time is ``O(W)`` whatever ``C`` (relative error about ``W`` ulps of
    ``W log C``; ``tests/test_analytic_trace_design.py`` compares both).
    """
    C, c, W = int(population), int(successes), int(draws)
    if C <= HYPERGEOM_DIRECT:
        from scipy import stats as sps  # on first use: keeps every CLI start light

        return sps.hypergeom.pmf(np.arange(W + 1), C, c, W)
    u = np.arange(W + 1)
    fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1.0, W + 1)))))

    def falling(n: int) -> np.ndarray:
        """``log(n (n-1) ... (n-k+1))`` for ``k = 0 .. W`` (``-inf`` once a factor is 0)."""
        terms = float(n) - np.arange(W, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.where(terms > 0, np.log(np.maximum(terms, 1.0)), -np.inf)
        return np.concatenate(([0.0], np.cumsum(logs)))

    a, b = falling(c), falling(C - c)
    with np.errstate(invalid="ignore"):
        logp = (a[u] - fact[u]) + (b[W - u] - fact[W - u]) - (falling(C)[W] - fact[W])
    return np.where(np.isfinite(logp), np.exp(logp), 0.0)


def trace_drop_probability(times: Sequence[float], counts: Sequence[int], end: float, slots: int,
                           stages: int, replicas: int, skip_budget: int) -> float:
    """``P(K > s)`` averaged over the trace (Study A's drop rate under the ``random`` policy)."""
    s = check_int("skip_budget", skip_budget, low=0, high=stages)
    law = trace_skipped_distribution(times, counts, end, slots, stages, replicas)
    return float(max(law[s + 1:].sum(), 0.0))


def _trace_args(trace: Any) -> tuple[np.ndarray, np.ndarray, float, int]:
    from ..traces import trace_slots

    return trace.times, trace.counts, float(trace.end), trace_slots(trace)


def _law_work(L: int, r: int) -> float:
    """Big-integer products :func:`empty_stage_law` computes for ``L`` stages of ``r`` replicas."""
    return (L * r + 1.0) * (L + 1) * (L + 2) / 2


def _search_work(L: int, top: int) -> float:
    """``sum(_law_work(L, r) for r in 1 .. top)`` in closed form."""
    return (L + 1) * (L + 2) / 2 * (L * top * (top + 1) / 2 + top)


def check_trace_search(stages: int, slots: int, top: int) -> None:
    """Refuse, before any work, a search whose largest law cannot fit in memory.

    The law at ``r`` is a table of ``(L r + 1) x (L + 1)`` doubles and its
    integers have up to ``L r`` bits (``C(L r, u)``), so a trace of ``C``
    slots searched up to ``r = C // L`` needs about ``C L`` doubles.

    Raises
    ------
    ConfigError
        ``'failure_trace'`` with the memory the search would need.
    """
    from ..errors import ConfigError, available_memory, format_bytes

    L, W = stages, stages * top
    need = (W + 1.0) * (L + 1) * 8 * 3 + (L + 1) * W / 8 * 2
    avail = available_memory()
    if need > avail:
        raise ConfigError("failure_trace", f"a trace whose exact law fits in memory: r up to "
                          f"{top} over {L} stages ({W} of its {slots} slots) needs about "
                          f"{format_bytes(need)}, {format_bytes(avail)} available (--max-replicas "
                          "bounds r)", f"{slots} slots")


def trace_min_replicas(trace: Any, stages: int, skip_budget: int, target_drop: float, *,
                       max_replicas: int | None = None) -> Design:
    """Fewest replicas whose drop rate under ``trace`` (``random`` policy) is at most the target.

    ``trace`` is an :class:`~sim.traces.AvailabilityTrace`; ``r`` goes up to
    ``C // L`` (every worker replays its own slot), or ``max_replicas`` when
    that is smaller. The floor is the drop rate at the largest ``r`` searched
    when no ``r`` reaches the target, else nan (not computed: the search stops
    at the first ``r`` that does).
    The search shows a progress bar on a terminal (:func:`sim.progress.bar`)
    and is refused up front when its largest law cannot fit in memory
    (:func:`check_trace_search`).
    """
    from .. import progress

    L = check_int("stages", stages, low=1)
    times, counts, end, C = _trace_args(trace)
    rmax = C // L
    if rmax < 1:
        return Design(False, None, None, 1.0, 1.0,
                      f"the trace has {C} slots, fewer than the {L} stages: no design fits it")
    top = rmax if max_replicas is None else min(rmax, check_int("max_replicas", max_replicas,
                                                                low=1))
    check_trace_search(L, C, top)
    drop = 1.0
    with progress.bar(_search_work(L, top), "exact law, r = 1, 2, ...", unit="op") as bar:
        for r in range(1, top + 1):
            drop = trace_drop_probability(times, counts, end, C, L, r, skip_budget)
            bar.update(_law_work(L, r))
            if drop <= target_drop:  # the floor (r = C // L) is not computed: nan
                return Design(True, r, L * r, drop, math.nan, "")
    if top < rmax:
        return Design(False, None, None, drop, drop,
                      f"target_drop {target_drop:g} needs more than max_replicas={top} replicas "
                      f"(drop rate {drop:.4g} at r={top})")
    return Design(False, None, None, drop, drop,
                  f"r={rmax} uses all {C} of the trace's slots and still drops {drop:.4g} "
                  f"> target_drop {target_drop:g}")


def trace_optimal_design(trace: Any, stages: int, skip_penalty: float,
                         penalty: Any = "multiplicative", *,
                         max_replicas: int | None = None) -> OptimalDesign:
    """Cost-optimal ``(r, s)`` under ``trace`` (``random`` policy): ``L r / E[q(K); K <= s]``.

    The same rule as :func:`sim.analytic.optimal_design` (ties to the fewest
    workers, then the smallest ``s``), with ``K``'s law averaged over the trace
    and ``r`` up to ``C // L`` (or ``max_replicas``); a progress bar and the
    memory check as in :func:`trace_min_replicas`.
    """
    from .. import progress

    L = check_int("stages", stages, low=1)
    times, counts, end, C = _trace_args(trace)
    rmax = C // L
    check(rmax >= 1, "stages", f"at most the trace's {C} slots", stages)
    if max_replicas is not None:
        rmax = min(rmax, check_int("max_replicas", max_replicas, low=1))
    check_trace_search(L, C, rmax)
    ks = np.arange(L + 1)
    w = _quality_weights(ks, skip_penalty, penalty)
    costs = np.empty((rmax, L + 1))
    with progress.bar(_search_work(L, rmax), "exact law, r = 1, 2, ...", unit="op") as bar:
        for r in range(1, rmax + 1):
            mass = np.cumsum(trace_skipped_distribution(times, counts, end, C, L, r) * w)
            with np.errstate(divide="ignore"):
                costs[r - 1] = np.where(mass > 0, L * r / np.where(mass > 0, mass, 1.0), np.inf)
            bar.update(_law_work(L, r))
    return _pick_optimal(costs)
