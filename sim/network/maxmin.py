"""Max-min fair rates: progressive filling, and the water-filling the incremental engine uses.

The problem (SimGrid's lmm system, Bertsekas and Gallager's max-min fairness):
flow ``f`` has a weight ``w_f`` (1 for plain max-min) and crosses resources
``r`` with coefficients ``a_rf`` (1 on a plain link; ``1 / c_r(s_f)`` on a
curve link, whose capacity is then 1: the flow occupies that fraction of the
link's time per unit of rate). The constraints are ``sum_f a_rf x_f <= C_r``.
Progressive filling raises a common level ``t`` with ``x_f = t / w_f`` for
every flow not yet fixed; when a resource fills, its flows are fixed at the
level reached; repeat until every flow is fixed. The result is the weighted
max-min fair allocation: no flow's rate (times its weight) can grow without
lowering that of a flow whose rate times weight is no larger.

Two implementations, kept apart on purpose so that each checks the other:

* :func:`maxmin_rates`, the textbook loop (every round computes every
  resource's level and fixes the flows of those at the minimum), vectorised
  with numpy; used by the full re-solve;
* :func:`waterfill`, a heap of resource levels (a resource's level only rises
  as flows elsewhere are fixed below it, so stale heap entries are skipped);
  ``O(nnz log R)``, used by the incremental engine on one component.

References
----------
.. [BG] D. Bertsekas and R. Gallager, *Data Networks*, 2nd ed., Prentice Hall
   1992, section 6.5.2 (max-min fairness, progressive filling).
.. [SG] H. Casanova, A. Giersch, A. Legrand, M. Quinson, F. Suter, "Versatile,
   Scalable, and Accurate Simulation of Distributed Applications and
   Platforms", JPDC 74(10), 2014 (SimGrid's lmm solver, lazy and selective
   update).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["maxmin_rates", "waterfill"]


def maxmin_rates(routes: Sequence[Sequence[int]], capacity: Sequence[float], *,
                 coefficients: Sequence[Sequence[float]] | None = None,
                 weights: Sequence[float] | None = None) -> np.ndarray:
    """Weighted max-min fair rates by progressive filling (the textbook loop).

    Parameters
    ----------
    routes : sequence of sequence of int
        The resources each flow crosses (indices into ``capacity``).
    capacity : sequence of float
        Capacity of each resource (finite, > 0).
    coefficients : sequence of sequence of float, optional
        ``a_rf`` beside each route entry (default 1).
    weights : sequence of float, optional
        ``w_f`` (default 1): the flow's rate is the level over its weight.

    Returns
    -------
    numpy.ndarray
        Rate of each flow; ``inf`` for a flow that crosses no resource.

    Notes
    -----
    Ties are fixed together: every resource whose level is within a relative
    ``1e-12`` of the minimum fills in the same round.
    """
    n = len(routes)
    cap = np.asarray(capacity, dtype=float)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    rows, cols, vals = [], [], []
    for f, rt in enumerate(routes):
        co = coefficients[f] if coefficients is not None else None
        for k, r in enumerate(rt):
            rows.append(r)
            cols.append(f)
            vals.append(1.0 if co is None else float(co[k]))
    R = len(cap)
    A = np.zeros((R, n))
    np.add.at(A, (np.asarray(rows, dtype=int), np.asarray(cols, dtype=int)), np.asarray(vals))
    rate = np.full(n, math.inf)
    free = np.array([len(rt) > 0 for rt in routes], dtype=bool)
    rem = cap.copy()
    open_ = np.ones(R, dtype=bool)
    while free.any():
        den = A[:, free] @ (1.0 / w[free])
        use = open_ & (den > 0)
        if not use.any():  # pragma: no cover - a free flow always crosses an open resource
            break
        level = np.full(R, math.inf)
        level[use] = np.maximum(rem[use], 0.0) / den[use]
        t = level.min()
        full = use & (level <= t * (1 + 1e-12))
        fix = free & (A[full].sum(axis=0) > 0)
        rate[fix] = t / w[fix]
        rem -= A[:, fix] @ rate[fix]
        free &= ~fix
        open_ &= ~full
    return rate


def waterfill(flows: Sequence[int], resources: Sequence[int], cap: Sequence[float],
              res_flows: Sequence[dict], f_res: Sequence[tuple[int, ...]],
              f_coef: Sequence[tuple[float, ...]], f_w: Sequence[float]) -> dict[int, float]:
    """Max-min fair rates of one component by water-filling with a heap of levels.

    Parameters
    ----------
    flows : sequence of int
        The component's flows (each crosses at least one resource).
    resources : sequence of int
        The resources they cross (every resource of every flow listed).
    cap : sequence of float
        Capacity of every resource (indexed by resource).
    res_flows : sequence of dict
        The flows on each resource (keys; only the component's flows are on
        the component's resources).
    f_res, f_coef, f_w
        Per flow: resources, coefficients, weight.

    Returns
    -------
    dict
        Flow -> rate.
    """
    rem: dict[int, float] = {}
    den: dict[int, float] = {}
    cnt: dict[int, int] = {}
    for r in resources:
        rem[r] = cap[r]
        den[r] = 0.0
        cnt[r] = 0
    for f in flows:
        iw = 1.0 / f_w[f]
        for r, a in zip(f_res[f], f_coef[f], strict=True):
            den[r] += a * iw
            cnt[r] += 1
    heap = [(rem[r] / den[r], r) for r in resources if cnt[r] > 0]
    heapq.heapify(heap)
    rate: dict[int, float] = {}
    push = heapq.heappush
    pop = heapq.heappop
    while heap:
        lvl, r = pop(heap)
        if cnt[r] <= 0 or rem[r] / den[r] != lvl:
            continue  # filled already, or a stale level (a newer, higher one is queued)
        cnt[r] = 0
        touched: dict[int, None] = {}
        for f in res_flows[r]:
            if f in rate:
                continue
            w = f_w[f]
            x = lvl / w
            rate[f] = x
            iw = 1.0 / w
            for r2, a in zip(f_res[f], f_coef[f], strict=True):
                if cnt[r2] > 0:
                    rem[r2] -= a * x
                    den[r2] -= a * iw
                    cnt[r2] -= 1
                    touched[r2] = None
        for r2 in touched:
            c = cnt[r2]
            if c > 0:
                d = den[r2]
                if d <= 0.0:  # rounding left nothing in the denominator: recompute it
                    d = 0.0
                    for f in res_flows[r2]:
                        if f not in rate:
                            for rr, a in zip(f_res[f], f_coef[f], strict=True):
                                if rr == r2:
                                    d += a / f_w[f]
                    den[r2] = d
                rm = rem[r2]
                push(heap, ((rm if rm > 0.0 else 0.0) / d, r2))
                if rm < 0.0:
                    rem[r2] = 0.0
    return rate
