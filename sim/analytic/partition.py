"""Cutting a chain of layers across devices of unequal speed, exactly.

The sibling study "How should a model be cut across devices of unequal
speed?" asks, for a model of ``m`` layers with work ``w_1..w_m`` (in order)
and ``k`` devices in a sequence with speeds ``v_1..v_k`` (and memory caps),
for the contiguous blocks, block ``j`` on device ``j``, that minimise the
bottleneck

.. math:: T = \\max_j S_j / v_j, \\qquad S_j = \\sum_{i \\in \\text{block } j} w_i .

A block may be empty (its device then sits idle: with devices in a fixed
order that is how a slow device is left out). Everything here is exact:

* :func:`greedy_partition` (the study's greedy bottleneck partition: a
  bottleneck ``T`` is feasible iff packing the layers greedily, each device
  taking layers while its block fits ``T`` and its memory cap, covers the
  model; the least feasible ``T`` is found by an exact parametric search over
  the finitely many block times, not a numerical tolerance);
* :func:`dp_partition` (dynamic programming over ``(device, layers covered)``;
  equal to the greedy, and it also answers the variant in which every device
  must hold a layer, where the greedy is not exact);
* :func:`bottleneck_bounds`: ``W/V <= T* <= W/V + (k - 1) w_max / V`` without
  memory caps, hence the study's strict ``T* < W/V + k w_max / V``;
* :func:`speed_blind_partition`, :func:`speed_blind_cost`: equal-work blocks
  on unequal devices, whose cost over the optimum is exactly
  ``v_mean / v_min`` when both cuts are exact (see there);
* :func:`best_device_order`, :func:`swap_device_order`: the residual decision,
  the order of the devices (exhaustive over distinct orders, and the
  pairwise-swap local search).

The same routines take a general cost: ``times[j][i]``, the time of layer
``i`` on device ``j`` (for example a per-GPU-type profile, where a layer's
time is not the same multiple of its work on every GPU), and a device may
stand for several replicas that all run the block (its time is then the
largest of theirs). The greedy stays exact for any block cost that is a sum
of non-negative per-layer terms, or a maximum of such sums, and for memory
constraints of the same form.

References
----------
.. [Cut] "How should a model be cut across devices of unequal speed?"
   (the sibling study of this series; its claims are restated in
   ``docs/partition.md``).
.. [Nicol] D. M. Nicol, "Rectilinear partitioning of irregular data
   parallel computations", J. Parallel Distrib. Comput. 23(2), 1994 (the
   probe, i.e. greedy feasibility test, for chains-on-chains partitioning).
.. [Pinar] A. Pinar, C. Aykanat, "Fast optimal load balancing algorithms
   for 1D partitioning", J. Parallel Distrib. Comput. 64(8), 2004.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_int

__all__ = [
    "Partition",
    "block_times",
    "greedy_partition",
    "greedy_partition_prefix",
    "prefix_sums",
    "dp_partition",
    "bottleneck_bounds",
    "speed_blind_partition",
    "speed_blind_cost",
    "best_device_order",
    "swap_device_order",
]


@dataclass(frozen=True)
class Partition:
    """Contiguous blocks of a chain of layers, block ``j`` on device ``order[j]``.

    Attributes
    ----------
    cuts : tuple of int
        ``k + 1`` boundaries ``0 = c_0 <= c_1 <= ... <= c_k = m``; block ``j``
        holds layers ``c_j .. c_{j+1} - 1`` (empty when ``c_j = c_{j+1}``).
    bottleneck : float
        The largest block time.
    times : tuple of float
        Each block's time on its device (0 for an empty block).
    order : tuple of int
        The device that runs block ``j`` (the identity unless an order was searched).
    """

    cuts: tuple[int, ...]
    bottleneck: float
    times: tuple[float, ...]
    order: tuple[int, ...]

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` of each block (layers ``start .. stop - 1``)."""
        return tuple(zip(self.cuts[:-1], self.cuts[1:], strict=True))

    @property
    def layers(self) -> tuple[tuple[int, ...], ...]:
        """The layer indices of each block."""
        return tuple(tuple(range(a, b)) for a, b in self.blocks)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layers per block."""
        return tuple(b - a for a, b in self.blocks)


# ----------------------------------------------------------------------------- inputs


def _vector(name: str, value: Any, *, positive: bool = False, length: int | None = None) -> np.ndarray:
    arr = np.asarray(value, dtype=float) if _numeric(value) else None
    rule = "a non-empty sequence of finite numbers " + ("> 0" if positive else ">= 0")
    if length is not None:
        rule += f" of length {length}"
    ok = (arr is not None and arr.ndim == 1 and arr.size > 0 and bool(np.all(np.isfinite(arr)))
          and bool(np.all(arr > 0) if positive else np.all(arr >= 0))
          and (length is None or arr.size == length))
    check(ok, name, rule, value)
    return arr  # type: ignore[return-value]


def _numeric(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    try:
        np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def _rows(name: str, value: Any, k: int, m: int) -> list[np.ndarray]:
    """Per-device tables: a ``(k, m)`` array, or per device an ``(r_j, m)`` array of rows."""
    rule = (f"one row of {m} finite values >= 0 per device ({k}), or per device a list of such "
            "rows")
    check(isinstance(value, (list, tuple, np.ndarray)) and len(value) == k, name, rule, value)
    out = []
    for row in value:
        arr = np.asarray(row, dtype=float) if _numeric(row) else None
        if arr is not None and arr.ndim == 1:
            arr = arr[None, :]
        check(arr is not None and arr.ndim == 2 and arr.shape[0] >= 1 and arr.shape[1] == m
              and bool(np.all(np.isfinite(arr))) and bool(np.all(arr >= 0)), name, rule, row)
        out.append(arr)  # type: ignore[arg-type]
    return out


class _Chain:
    """A chain of ``m`` layers on ``k`` devices, as prefix sums (Python lists: the probe is
    many scalar steps, which lists serve faster than small numpy arrays).

    ``cost[j]`` holds rows of prefix sums: block ``[a, b)`` on device ``j`` takes
    ``max_r row_r[b] - row_r[a]``. ``mem[j]`` rows and ``cap[j]`` caps: the block
    must keep ``mem_q[b] - mem_q[a] <= cap_q`` for every ``q``.
    """

    def __init__(self, cost: list[np.ndarray], mem: list[np.ndarray] | None,
                 cap: list[np.ndarray] | None) -> None:
        self.raw = (cost, mem, cap)  # the validated inputs, to re-order the devices
        self.k = len(cost)
        self.m = int(cost[0].shape[1])
        self.cost = [[prefix_sums(r) for r in c] for c in cost]
        self.mem = None if mem is None else [[prefix_sums(r) for r in x] for x in mem]
        self.cap = None if cap is None else [[float(c) for c in row] for row in cap]

    @classmethod
    def from_prefix(cls, cost: list[list[list[float]]], mem: list[list[list[float]]] | None,
                    cap: list[list[float]] | None) -> _Chain:
        self = cls.__new__(cls)
        self.raw = None
        self.k, self.m = len(cost), len(cost[0][0]) - 1
        self.cost, self.mem, self.cap = cost, mem, cap
        return self

    def block(self, j: int, a: int, b: int) -> float:
        if b <= a:
            return 0.0
        return max(r[b] - r[a] for r in self.cost[j])

    def fits_memory(self, j: int, a: int, b: int) -> bool:
        if self.mem is None or b <= a:
            return True
        return all(r[b] - r[a] <= c for r, c in zip(self.mem[j], self.cap[j], strict=True))  # type: ignore[index]

    def _last(self, row: list[float], a: int, limit: float) -> int:
        """The largest ``b`` in ``[a, m]`` with ``row[b] - row[a] <= limit`` (rows are non-decreasing)."""
        base = row[a]
        b = max(a, bisect.bisect_right(row, base + limit, lo=a) - 1)
        while b < self.m and row[b + 1] - base <= limit:  # make the guess exact for the
            b += 1                                         # difference as block() computes it
        while b > a and row[b] - base > limit:
            b -= 1
        return b

    def memory_end(self, j: int, a: int) -> int:
        """The largest ``b`` whose block ``[a, b)`` fits device ``j``'s memory."""
        if self.mem is None:
            return self.m
        return min(self._last(r, a, c) for r, c in zip(self.mem[j], self.cap[j], strict=True))  # type: ignore[index]

    def furthest(self, j: int, a: int, T: float) -> int:
        """The largest ``b >= a`` with block ``[a, b)`` of time <= T that fits device ``j``'s memory."""
        return min(self.memory_end(j, a), *(self._last(r, a, T) for r in self.cost[j]))

    def probe(self, T: float, j: int = 0, a: int = 0) -> list[int] | None:
        """Greedy ends of devices ``j..k-1`` from layer ``a`` at bottleneck ``T``, or None if they
        do not reach the end of the chain."""
        ends = []
        for d in range(j, self.k):
            a = self.furthest(d, a, T) if a < self.m else a
            ends.append(a)
        return ends if a == self.m else None

    def times(self, cuts: Sequence[int]) -> tuple[float, ...]:
        return tuple(self.block(j, a, b) for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:],
                                                                       strict=True)))


def prefix_sums(row: Any) -> list[float]:
    """``[0, r_0, r_0 + r_1, ...]`` as floats (the form :func:`greedy_partition_prefix` takes)."""
    return [0.0, *itertools.accumulate(map(float, row))]


def greedy_partition_prefix(cost: list[list[list[float]]], memory: list[list[list[float]]] | None
                            = None, caps: list[list[float]] | None = None) -> Partition | None:
    """:func:`greedy_partition` on prepared prefix sums, without validation, or None if no cut fits.

    For callers that cut many times from the same rows (the plan search):
    ``cost[j]`` is the list of device ``j``'s rows of :func:`prefix_sums` of its
    layer times (all of length ``m + 1``), ``memory[j]`` its memory rows'
    prefix sums and ``caps[j]`` one cap per memory row.
    """
    ch = _Chain.from_prefix(cost, memory, caps)
    if ch.probe(math.inf) is None:
        return None
    return _greedy(ch)


def _chain(work: Any, speeds: Any, times: Any, memory: Any, caps: Any,
           devices: int | None = None) -> _Chain:
    if times is not None:
        check(work is None and speeds is None, "times", "given without work and speeds", times)
        first = np.asarray(times[0], dtype=float) if len(times) and _numeric(times[0]) else None
        m = first.shape[-1] if first is not None and first.ndim >= 1 else 0
        check(m > 0, "times", "one row of layer times per device", times)
        cost = _rows("times", times, len(times), m)
        k = len(cost)
    else:
        w = _vector("work", work)
        v = _vector("speeds", speeds, positive=True)
        k, m = v.size, w.size
        cost = [(w / s)[None, :] for s in v]
    if devices is not None:
        check(k == devices, "speeds", f"{devices} devices", k)
    if memory is None:
        check(caps is None, "caps", "given with memory", caps)
        return _Chain(cost, None, None)
    check(caps is not None, "caps", "given with memory", caps)
    mem_arr = np.asarray(memory, dtype=float) if _numeric(memory) else None
    if mem_arr is not None and mem_arr.ndim == 1:  # one memory per layer, the same on every device
        mem = [_vector("memory", memory, length=m)[None, :] for _ in range(k)]
    else:
        mem = _rows("memory", memory, k, m)
    cap_rows = []
    if _numeric(caps) and np.asarray(caps, dtype=float).ndim == 1:
        c = _vector("caps", caps, length=k)
        cap_rows = [np.full(x.shape[0], c[j]) for j, x in enumerate(mem)]
    else:
        check(isinstance(caps, (list, tuple)) and len(caps) == k, "caps",
              f"one cap per device ({k}), or per device one cap per memory row", caps)
        for x, cj in zip(mem, caps, strict=True):
            cap_rows.append(_vector("caps", np.atleast_1d(cj), length=x.shape[0]))
    return _Chain(cost, mem, cap_rows)


def _result(ch: _Chain, cuts: Sequence[int], order: Sequence[int] | None = None) -> Partition:
    t = ch.times(cuts)
    return Partition(tuple(int(c) for c in cuts), max(t), t,
                     tuple(order) if order is not None else tuple(range(ch.k)))


def _infeasible(ch: _Chain) -> None:
    check(False, "caps", "large enough to hold the model on these devices (no cut fits the "
          "memory caps at any bottleneck)", ch.cap)


def _first(lo: int, hi: int, pred) -> int:
    """The first ``b`` in ``[lo, hi)`` with ``pred(b)`` (``pred`` monotone), or ``hi``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _device_step(ch: _Chain, j: int, a: int, lo: float, hi: float
                 ) -> tuple[int, list[int] | None]:
    """One step of the search: where device ``j`` (starting at layer ``a``) ends for every
    ``T`` in the new ``(lo, hi)``, and the probe's ends from ``j`` on if ``hi`` was lowered."""
    bmax = ch.memory_end(j, a)

    def c(b: int) -> float:
        return ch.block(j, a, b)

    left = _first(a, bmax + 1, lambda b: c(b) > lo)
    right = _first(left, bmax + 1, lambda b: c(b) >= hi)
    found: dict[int, list[int]] = {}

    def feasible(b: int) -> bool:
        got = ch.probe(c(b), j, a)
        if got is not None:
            found[b] = got
        return got is not None

    b = _first(left, right, feasible)
    return b - 1, found.get(b)


def _greedy(ch: _Chain) -> Partition:
    """Exact least bottleneck by the greedy probe (Nicol's search over each device's block end)."""
    ends = ch.probe(math.inf)
    if ends is None:
        _infeasible(ch)
    zero = ch.probe(0.0)
    if zero is not None:
        return _result(ch, [0, *zero])
    best = [0, *ends]  # type: ignore[misc]
    hi = max(ch.times(best))  # feasible (a cut achieves it): T* lies in (lo, hi]
    lo, path = 0.0, [0]
    for j in range(ch.k):
        # For every T in (lo, hi) devices 0..j-1 end at a = path[-1]. Device j's block
        # [a, b) costs c(b), non-decreasing in b, and the probe is monotone in T: the
        # first b with lo < c(b) < hi whose c(b) is feasible lowers hi to c(b), and
        # below it device j stops at b - 1; if there is none, it stops at the last b
        # with c(b) < hi. Either way c(new end) is infeasible: the new lo.
        a = path[-1]
        end, got = _device_step(ch, j, a, lo, hi)
        if got is not None:
            best, hi = [*path, *got], ch.block(j, a, end + 1)
        path.append(end)
        lo = max(lo, ch.block(j, a, end))
    return _result(ch, best)


# ----------------------------------------------------------------------------- public


def block_times(cuts: Sequence[int], work: Any = None, speeds: Any = None, *,
                times: Any = None) -> tuple[float, ...]:
    """Each block's time for given cuts: ``S_j / v_j`` (or the sum of ``times[j]`` over the block).

    Parameters
    ----------
    cuts : sequence of int
        ``k + 1`` non-decreasing boundaries from 0 to ``m``.
    work, speeds : sequence of float
        Layer work ``w_i >= 0`` and device speeds ``v_j > 0``.
    times : array_like, optional
        Instead of ``work`` and ``speeds``: per device, the time of each layer
        (a row), or several rows (replicas; the block takes the longest).
    """
    ch = _chain(work, speeds, times, None, None)
    c = list(cuts) if isinstance(cuts, (list, tuple)) else cuts
    ok = (isinstance(c, (list, tuple)) and len(c) == ch.k + 1
          and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in c)
          and c[0] == 0 and c[-1] == ch.m and all(a <= b for a, b in zip(c[:-1], c[1:], strict=True)))
    check(ok, "cuts", f"{ch.k + 1} non-decreasing integers from 0 to {ch.m}", cuts)
    return ch.times(c)


def greedy_partition(work: Any = None, speeds: Any = None, *, times: Any = None,
                     memory: Any = None, caps: Any = None) -> Partition:
    """The minimum-bottleneck contiguous partition, by the greedy probe.

    Parameters
    ----------
    work : sequence of float
        Work of each layer, in chain order (``>= 0``).
    speeds : sequence of float
        Speed of each device, in pipeline order (``> 0``); block ``j`` runs on
        device ``j``.
    times : array_like, optional
        Instead of ``work`` and ``speeds``: ``times[j]`` the time of each layer
        on device ``j`` (a row of ``m`` values), or several rows for a device
        that stands for several replicas (the block takes the longest).
    memory : array_like, optional
        Memory of each layer (one row, the same on every device), or per device
        one row (or several rows, each with its own cap).
    caps : array_like, optional
        Memory cap of each device (or per device, one per memory row).

    Returns
    -------
    Partition
        The cuts with the least bottleneck; among them the one the greedy
        probe finds at that bottleneck (each device packs as many layers as
        fit, so the earliest devices are the fullest).

    Raises
    ------
    ConfigError
        For malformed input, or ``'caps'`` when no cut fits the memory caps.

    Notes
    -----
    A bottleneck ``T`` is feasible iff the greedy probe (device ``j`` takes
    the longest block from where ``j - 1`` stopped whose time is ``<= T`` and
    whose memory fits its caps) reaches the end of the chain: by induction
    on ``j`` the greedy covers at least the prefix any feasible cut covers,
    because a block's time and memory only grow as it extends. The optimum
    ``T*`` is one of the finitely many block times ``S(a, b) / v_j``; the
    search keeps an infeasible ``lo`` and a feasible ``hi`` (a cut's actual
    bottleneck) and probes the median block time strictly between them until
    none is left, so ``T*`` is exact, not within a tolerance. Blocks may be
    empty (the device idles). With every device required to hold a layer
    the greedy is not exact; use :func:`dp_partition` with
    ``allow_empty=False``.

    References
    ----------
    [Cut]_, [Nicol]_, [Pinar]_.
    """
    return _greedy(_chain(work, speeds, times, memory, caps))


def dp_partition(work: Any = None, speeds: Any = None, *, times: Any = None,
                 memory: Any = None, caps: Any = None, allow_empty: bool = True) -> Partition:
    """The minimum-bottleneck contiguous partition, by dynamic programming.

    Same parameters as :func:`greedy_partition`, and ``allow_empty``: False
    requires every device to hold at least one layer (``m >= k``).

    Notes
    -----
    ``f[j][b]``, the least bottleneck of layers ``0..b-1`` on devices
    ``0..j``, is ``min_a max(f[j-1][a], t_j(a, b))`` over the ``a`` whose block
    ``[a, b)`` fits device ``j``'s memory (``a < b`` when blocks must be
    non-empty). ``O(k m^2)`` block evaluations.
    """
    ch = _chain(work, speeds, times, memory, caps)
    check(isinstance(allow_empty, bool), "allow_empty", "True or False", allow_empty)
    if not allow_empty:
        check(ch.m >= ch.k, "allow_empty", f"True when devices ({ch.k}) outnumber layers ({ch.m})",
              allow_empty)
    k, m, inf = ch.k, ch.m, math.inf
    f = [[inf] * (m + 1) for _ in range(k + 1)]
    arg = [[-1] * (m + 1) for _ in range(k + 1)]
    f[0][0] = 0.0
    for j in range(1, k + 1):
        for b in range(m + 1):
            best, where = inf, -1
            for a in range(b + (1 if allow_empty else 0)):
                if f[j - 1][a] == inf or not ch.fits_memory(j - 1, a, b):
                    continue
                val = max(f[j - 1][a], ch.block(j - 1, a, b))
                if val < best:
                    best, where = val, a
            f[j][b], arg[j][b] = best, where
    if f[k][m] == inf:
        _infeasible(ch)
    cuts, b = [m], m
    for j in range(k, 0, -1):
        b = arg[j][b]
        cuts.append(b)
    return _result(ch, cuts[::-1])


def bottleneck_bounds(work: Any, speeds: Any) -> tuple[float, float]:
    """Bounds on the optimal bottleneck without memory caps: ``(W/V, W/V + (k - 1) w_max / V)``.

    Parameters
    ----------
    work, speeds : sequence of float
        Layer work (``m`` values >= 0) and device speeds (``k`` values > 0).

    Returns
    -------
    (lower, upper) : tuple of float
        ``W / V <= T* <= W / V + (k - 1) w_max / V`` with ``W`` the total work,
        ``V`` the total speed and ``w_max`` the largest layer.

    Notes
    -----
    Lower: ``W = sum_j S_j <= T* sum_j v_j``. Upper: if the greedy probe
    fails at ``T``, every device stopped because the next layer did not fit,
    ``S_j + w_{next(j)} > T v_j``; summing, the covered work plus the last
    device's next layer is at most ``W`` and the other ``k - 1`` next layers
    are at most ``w_max`` each, so ``T V < W + (k - 1) w_max``. Hence the
    study's strict form ``T* < W/V + k w_max / V``, whatever the order of the
    devices (blocks may be empty). The lower bound is attained when the
    speed-proportional cut falls on layer boundaries; the upper one by one
    layer on ``k`` equal devices, and approached with ``m >= k`` by one layer
    of work ``w`` followed by ``k - 1`` layers of work tending to 0. Read
    with ``m`` the number of layers, ``W/V + m w_max / V`` is an upper bound
    only when the devices do not outnumber the layers (one layer on three
    equal devices breaks it), so the ``m`` of the study is read as the
    number of devices. Memory caps void the upper bound (they can force
    layers onto slow devices).

    References
    ----------
    [Cut]_.
    """
    w = _vector("work", work)
    v = _vector("speeds", speeds, positive=True)
    W, V = float(w.sum()), float(v.sum())
    return W / V, W / V + (v.size - 1) * float(w.max()) / V


def speed_blind_partition(work: Any, speeds: Any) -> Partition:
    """Equal-work blocks (the best cut for equal devices) run on the given devices in order.

    The cut ignores the speeds: it is :func:`greedy_partition` with every
    speed 1 (the least largest block of work); its blocks then run on the
    devices as given, block ``j`` on device ``j``, and :attr:`Partition.times`
    and ``bottleneck`` are on those devices.
    """
    w = _vector("work", work)
    v = _vector("speeds", speeds, positive=True)
    blind = greedy_partition(w, np.ones(v.size))
    return _result(_chain(w, v, None, None, None), blind.cuts)


def speed_blind_cost(speeds: Any) -> float:
    """The cost of speed-blind splitting: ``v_mean / v_min``.

    Parameters
    ----------
    speeds : sequence of float
        Device speeds (``> 0``).

    Returns
    -------
    float
        ``mean(v) / min(v)``: the bottleneck of equal-work blocks over the
        optimal bottleneck.

    Notes
    -----
    Equal-work blocks put ``W/k`` on every device, so the slowest sets the
    bottleneck ``(W/k) / v_min``; the optimum is ``W/V`` (:func:`bottleneck_bounds`).
    The ratio is exactly ``V / (k v_min) = v_mean / v_min`` when both cuts are
    exact: the layers split into ``k`` blocks of equal work and into blocks
    of work ``W v_j / V`` in the devices' order (e.g. ``m`` equal layers with
    ``k | m`` and every ``m v_j / V`` an integer), and nothing else (memory)
    constrains the cut. Otherwise it is the limit as the largest layer's share
    of the work goes to 0; at finite ``m`` the discrete ratio from
    :func:`speed_blind_partition` and :func:`greedy_partition` is the exact
    answer. The ratio does not depend on the order of the devices.

    References
    ----------
    [Cut]_.
    """
    v = _vector("speeds", speeds, positive=True)
    return float(v.mean() / v.min())


def _order_result(ch_for, order: tuple[int, ...]) -> Partition:
    p = _greedy(ch_for(order))
    return Partition(p.cuts, p.bottleneck, p.times, order)


def _order_setup(work: Any, speeds: Any, times: Any, memory: Any, caps: Any):
    """The number of devices, a builder of the chain for a device order, and each device's
    kind (devices of one kind are interchangeable)."""
    cost, mem, cap = _chain(work, speeds, times, memory, caps).raw  # validates once

    def build(order: Sequence[int]) -> _Chain:
        return _Chain([cost[d] for d in order], None if mem is None else [mem[d] for d in order],
                      None if cap is None else [cap[d] for d in order])

    keys = [(cost[d].tobytes(), None if mem is None else (mem[d].tobytes(), cap[d].tobytes()))  # type: ignore[index]
            for d in range(len(cost))]
    return len(cost), build, keys


def best_device_order(work: Any = None, speeds: Any = None, *, times: Any = None,
                      memory: Any = None, caps: Any = None, max_orders: int = 50_000) -> Partition:
    """The least bottleneck over every order of the devices (and its cut).

    Devices that are interchangeable (same speed or times, same memory and
    caps) are not permuted among themselves, so ``k`` devices of ``g`` kinds
    need the multinomial number of distinct orders, refused above
    ``max_orders``. :attr:`Partition.order` gives the device of each block.
    The first order that reaches the least bottleneck is kept (orders in
    lexicographic order of device kinds).
    """
    k, build, keys = _order_setup(work, speeds, times, memory, caps)
    check_int("max_orders", max_orders, low=1)
    kinds: dict[Any, list[int]] = {}
    for d, key in enumerate(keys):
        kinds.setdefault(key, []).append(d)
    counts = [len(v) for v in kinds.values()]
    n_orders = math.factorial(k)
    for c in counts:
        n_orders //= math.factorial(c)
    check(n_orders <= max_orders, "max_orders", f">= the {n_orders} distinct device orders",
          max_orders)
    groups = list(kinds.values())
    best: Partition | None = None
    for seq in _multiset_orders([len(g) for g in groups]):
        nxt = [0] * len(groups)
        order = []
        for g in seq:
            order.append(groups[g][nxt[g]])
            nxt[g] += 1
        try:
            p = _order_result(build, tuple(order))
        except ConfigError as exc:  # this order cannot hold the model in memory
            if exc.name == "caps":
                continue
            raise
        if best is None or p.bottleneck < best.bottleneck:
            best = p
    if best is None:
        _infeasible(build(tuple(range(k))))
    return best  # type: ignore[return-value]


def _multiset_orders(counts: list[int]):
    """Distinct sequences with ``counts[g]`` copies of ``g``, in lexicographic order."""
    total = sum(counts)
    seq: list[int] = []

    def rec():
        if len(seq) == total:
            yield tuple(seq)
            return
        for g, c in enumerate(counts):
            if c:
                counts[g] -= 1
                seq.append(g)
                yield from rec()
                seq.pop()
                counts[g] += 1

    yield from rec()


def swap_device_order(work: Any = None, speeds: Any = None, *, times: Any = None,
                      memory: Any = None, caps: Any = None,
                      order: Sequence[int] | None = None) -> Partition:
    """Pairwise-swap local search over device orders, from ``order`` (default as given).

    Repeatedly applies the best swap of two devices that lowers the optimal
    bottleneck (each order's cut by :func:`greedy_partition`) until no swap
    does: a local optimum, checked against :func:`best_device_order`.
    """
    k, build, keys = _order_setup(work, speeds, times, memory, caps)
    cur = tuple(range(k)) if order is None else tuple(order)
    check(sorted(cur) == list(range(k)), "order", f"a permutation of 0..{k - 1}", order)

    def value(o: tuple[int, ...]) -> Partition | None:
        try:
            return _order_result(build, o)
        except ConfigError as exc:  # this order cannot hold the model in memory
            if exc.name == "caps":
                return None
            raise

    best = value(cur)
    while True:
        improved = None
        for a, b in itertools.combinations(range(k), 2):
            if keys[cur[a]] == keys[cur[b]]:
                continue
            o = list(cur)
            o[a], o[b] = o[b], o[a]
            p = value(tuple(o))
            if p is not None and (best is None or p.bottleneck < (improved or best).bottleneck):
                improved = p
        if improved is None:
            break
        best, cur = improved, improved.order
    if best is None:
        _infeasible(build(cur))
    return best  # type: ignore[return-value]
