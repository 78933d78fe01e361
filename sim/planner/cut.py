"""The plan search's cuts, compiled: :func:`sim.analytic.partition.greedy_partition_prefix` on arrays.

The search cuts the layers of tens of thousands of candidate pipelines
(:meth:`sim.planner.search._Search.cut`); each cut is the exact greedy
bottleneck partition of :mod:`sim.analytic.partition` (Nicol's probe and
its parametric search), which in Python costs about half a millisecond.
:func:`greedy_cut` is the same algorithm, statement for statement, compiled
with numba over a bank of prefix-sum rows (every row the search has made,
one per GPU type, micro-batch size and TP degree for the layer times, one
per memory constraint for the memory): the same comparisons of the same
differences of the same sums, so the same cuts and bottlenecks, bit for bit
(``tests/test_planner_cut.py`` checks it against the Python one).
Without numba the search calls the Python one.
"""

from __future__ import annotations

import math

import numpy as np

from ..xoshiro import HAVE_NUMBA, jit

__all__ = ["HAVE_NUMBA", "RowBank", "StageTable", "greedy_cut", "greedy_cut_stages"]


class RowBank:
    """Prefix-sum rows of one length in one growing 2-D array, each with an id."""

    def __init__(self, length: int, rows: int = 64) -> None:
        self.rows = np.empty((rows, length))
        self.n = 0
        self._ids: dict = {}

    def id(self, key: object, row: list[float]) -> int:
        """The id of ``row`` (stored under ``key`` the first time)."""
        k = self._ids.get(key)
        if k is None:
            if self.n == self.rows.shape[0]:
                grown = np.empty((2 * self.n, self.rows.shape[1]))
                grown[: self.n] = self.rows
                self.rows = grown
            self.rows[self.n] = row
            k = self._ids[key] = self.n
            self.n += 1
        return k


class StageTable:
    """Stages of cuts, each its layer-time rows, memory rows and caps (bank ids), in flat
    growing arrays: a cut then names its stages by id (:func:`greedy_cut_stages`)."""

    def __init__(self, stages: int = 64, entries: int = 256) -> None:
        self.bounds = np.zeros((stages, 4), dtype=np.int64)  # crow from, to; mrow from, to
        self.crow = np.zeros(entries, dtype=np.int64)
        self.mrow = np.zeros(entries, dtype=np.int64)
        self.mcap = np.zeros(entries)
        self.n = 0
        self._nc = self._nm = 0

    def add(self, crow: list[int], mrow: list[int], mcap: list[float]) -> int:
        """A new stage: its id."""
        if self.n == self.bounds.shape[0]:
            self.bounds = np.concatenate([self.bounds, np.zeros_like(self.bounds)])
        for name, used, more in (("crow", self._nc, len(crow)), ("mrow", self._nm, len(mrow)),
                                 ("mcap", self._nm, len(mcap))):
            arr = getattr(self, name)
            if used + more > arr.shape[0]:
                grown = np.zeros(max(2 * arr.shape[0], used + more), dtype=arr.dtype)
                grown[:used] = arr[:used]
                setattr(self, name, grown)
        c, q = self._nc, self._nm
        self.crow[c:c + len(crow)] = crow
        self.mrow[q:q + len(mrow)] = mrow
        self.mcap[q:q + len(mcap)] = mcap
        self.bounds[self.n] = (c, c + len(crow), q, q + len(mrow))
        self._nc += len(crow)
        self._nm += len(mrow)
        self.n += 1
        return self.n - 1


@jit
def greedy_cut_stages(bank, bounds, crow_all, mrow_all, mcap_all, sids, m, cuts):
    """:func:`greedy_cut` of the stages ``sids`` of a :class:`StageTable`."""
    k = sids.shape[0]
    nc = 0
    nm = 0
    for j in range(k):
        s = sids[j]
        nc += bounds[s, 1] - bounds[s, 0]
        nm += bounds[s, 3] - bounds[s, 2]
    crow = np.empty(nc, np.int64)
    mrow = np.empty(nm, np.int64)
    mcap = np.empty(nm)
    cptr = np.empty(k + 1, np.int64)
    mptr = np.empty(k + 1, np.int64)
    cptr[0] = 0
    mptr[0] = 0
    for j in range(k):
        s = sids[j]
        c = cptr[j]
        for q in range(bounds[s, 0], bounds[s, 1]):
            crow[c] = crow_all[q]
            c += 1
        cptr[j + 1] = c
        c = mptr[j]
        for q in range(bounds[s, 2], bounds[s, 3]):
            mrow[c] = mrow_all[q]
            mcap[c] = mcap_all[q]
            c += 1
        mptr[j + 1] = c
    return greedy_cut(bank, crow, cptr, mrow, mptr, mcap, m, cuts)


@jit
def _last(bank, r, a, limit, m):
    """The largest ``b`` in ``[a, m]`` with ``row[b] - row[a] <= limit`` (_Chain._last)."""
    base = bank[r, a]
    x = base + limit
    lo, hi = a, m + 1  # bisect.bisect_right(row, x, lo=a)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < bank[r, mid]:
            hi = mid
        else:
            lo = mid + 1
    b = lo - 1
    if b < a:
        b = a
    while b < m and bank[r, b + 1] - base <= limit:
        b += 1
    while b > a and bank[r, b] - base > limit:
        b -= 1
    return b


@jit
def _memory_end(bank, mrow, mptr, mcap, j, a, m):
    b = m
    for q in range(mptr[j], mptr[j + 1]):
        x = _last(bank, mrow[q], a, mcap[q], m)
        if q == mptr[j] or x < b:
            b = x
    return b


@jit
def _block(bank, crow, cptr, j, a, b):
    if b <= a:
        return 0.0
    best = -math.inf
    for q in range(cptr[j], cptr[j + 1]):
        x = bank[crow[q], b] - bank[crow[q], a]
        if q == cptr[j] or x > best:
            best = x
    return best


@jit
def _probe(bank, crow, cptr, mrow, mptr, mcap, m, T, j, a, ends):
    """Greedy ends of devices ``j..k-1`` from layer ``a`` at bottleneck ``T`` into ``ends[j:]``;
    whether they reach the end of the chain (_Chain.probe)."""
    k = cptr.shape[0] - 1
    for d in range(j, k):
        if a < m:
            b = _memory_end(bank, mrow, mptr, mcap, d, a, m)
            for q in range(cptr[d], cptr[d + 1]):
                x = _last(bank, crow[q], a, T, m)
                if x < b:
                    b = x
            a = b
        ends[d] = a
    return a == m


@jit
def greedy_cut(bank, crow, cptr, mrow, mptr, mcap, m, cuts):
    """The greedy bottleneck cut (greedy_partition_prefix) of the devices whose layer-time rows
    are ``bank[crow[cptr[j]:cptr[j+1]]]`` and memory rows ``bank[mrow[mptr[j]:mptr[j+1]]]``
    (caps ``mcap``), ``m`` layers: its bottleneck, the ``k + 1`` cuts written to ``cuts``;
    nan when no cut fits (the greedy probe at an unbounded bottleneck falls short)."""
    k = cptr.shape[0] - 1
    ends = np.empty(k, np.int64)
    got = np.empty(k, np.int64)
    if not _probe(bank, crow, cptr, mrow, mptr, mcap, m, math.inf, 0, 0, ends):
        return math.nan
    zero = np.empty(k, np.int64)
    cuts[0] = 0
    if _probe(bank, crow, cptr, mrow, mptr, mcap, m, 0.0, 0, 0, zero):
        for d in range(k):
            cuts[d + 1] = zero[d]
    else:
        for d in range(k):
            cuts[d + 1] = ends[d]
        hi = 0.0
        for d in range(k):
            x = _block(bank, crow, cptr, d, cuts[d], cuts[d + 1])
            if d == 0 or x > hi:
                hi = x
        lo = 0.0
        path = np.empty(k + 1, np.int64)
        path[0] = 0
        for j in range(k):
            a = path[j]
            # _device_step: where device j ends for every T in (lo, hi)
            bmax = _memory_end(bank, mrow, mptr, mcap, j, a, m)
            x0, x1 = a, bmax + 1  # the first b with block > lo
            while x0 < x1:
                mid = (x0 + x1) // 2
                if _block(bank, crow, cptr, j, a, mid) > lo:
                    x1 = mid
                else:
                    x0 = mid + 1
            left = x0
            x0, x1 = left, bmax + 1  # the first b with block >= hi
            while x0 < x1:
                mid = (x0 + x1) // 2
                if _block(bank, crow, cptr, j, a, mid) >= hi:
                    x1 = mid
                else:
                    x0 = mid + 1
            right = x0
            x0, x1 = left, right  # the first feasible b
            found = False
            while x0 < x1:
                mid = (x0 + x1) // 2
                if _probe(bank, crow, cptr, mrow, mptr, mcap, m,
                          _block(bank, crow, cptr, j, a, mid), j, a, ends):
                    x1 = mid
                    found = True
                    for d in range(j, k):
                        got[d] = ends[d]
                else:
                    x0 = mid + 1
            end = x0 - 1
            if found and x0 < right:
                for d in range(j):
                    cuts[d + 1] = path[d + 1]
                for d in range(j, k):
                    cuts[d + 1] = got[d]
                hi = _block(bank, crow, cptr, j, a, end + 1)
            path[j + 1] = end
            x = _block(bank, crow, cptr, j, a, end)
            if x > lo:
                lo = x
    best = 0.0
    for d in range(k):
        x = _block(bank, crow, cptr, d, cuts[d], cuts[d + 1])
        if d == 0 or x > best:
            best = x
    return best
