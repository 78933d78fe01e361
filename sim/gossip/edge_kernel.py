"""The compiled ``edge`` engine: random-edge gossip (:mod:`sim.gossip.edge`) at machine speed.

:class:`CompiledEdge` runs the same steps as :class:`~sim.gossip.edge.EdgeGossip`
*with the same random numbers in the same order and the same floating-point
operations*, so a seed gives bit-for-bit the same records on either engine
(``tests/test_gossip_edge_kernel.py`` checks it config by config):

* the edges come from the ``partners`` stream exactly as numpy's
  ``Generator.integers`` draws them for the Python engine (per record chunk
  of ``c`` steps: ``c`` uniform first ends in ``[0, n)``, then ``c`` second ends
  in ``[0, n - 1)`` shifted past the first, on the complete graph; ``c``
  uniform edge indices otherwise). The kernel reimplements numpy's PCG64
  generator and its bounded-integer rule (Lemire's multiply-and-reject on 32
  bits) and keeps two cursors on the stream, so it never holds a chunk's
  draws in memory; the numpy generator's state is written back at the end of
  the run, where the Python engine leaves it.
* the noise (every honest node adds ``N(0, s**2)`` before each step) is drawn
  by numpy from the ``noise`` stream in blocks of steps, the same values as the
  Python engine's one draw per step.
* each step updates the pair with the Python engine's arithmetic for its path:
  on Python floats (``dim = 1``, no noise: ``x_i += move(x_j - x_i)`` then
  ``x_j += move(x_i_old - x_j)``) or on the vector kernel (plain and honest:
  both ends take ``(x_i + x_j) * 0.5``; otherwise each honest end adds its
  defence's move of ``received - own``, clipping with ``diff * (tau / |diff|)``).

It asks the strategies, never their types: an adversary answers with
:meth:`~sim.adversaries.Adversary.constant` or its
:meth:`~sim.adversaries.Adversary.compiled_form` (sign-flip, ALIE, IPM,
dissensus), a defence with :meth:`~sim.adversaries.Defence.plain`,
:meth:`~sim.adversaries.Defence.fixed_radius` or
:meth:`~sim.adversaries.Defence.radius_rule` (the ClippedGossip oracle
radius). The statistics an attacker or the oracle radius reads (honest means,
deviations, neighbourhood sums) are summed in numpy's orders (pairwise in one
dimension, row by row in more, einsum's two lanes for squared norms), which
:func:`numpy_order_matches` probes. A node update (local training) and a
user's strategy without a compiled form run on the Python engine, and
:func:`sim.gossip.engines.edge_obstacle` says why.

References
----------
.. [1] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
   algorithms", IEEE Trans. Inf. Theory 52(6), 2006 (the protocol).
.. [2] M. E. O'Neill, "PCG: a family of simple fast space-efficient
   statistically good algorithms for random number generation", 2014
   (PCG64, numpy's default bit generator).
.. [3] D. Lemire, "Fast random integer generation in an interval", ACM TOMACS
   29(1), 2019 (the bounded integers numpy draws).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError, check
from ..xoshiro import HAVE_NUMBA, readonly
from ..xoshiro import jit as _jit
from .config import GossipConfig
from .edge import EdgeGossip
from .records import Records

__all__ = ["HAVE_NUMBA", "HONEST", "CONSTANT", "SIGNFLIP", "ALIE", "IPM", "DISSENSUS",
           "SENDER_KINDS", "CompiledEdge", "EdgeSteps",
           "pcg_state", "set_pcg_state", "bounded_integers", "numpy_order_matches",
           "honest_neighbours"]

#: Sender kinds of the kernel (per node).
HONEST, CONSTANT, SIGNFLIP, ALIE, IPM, DISSENSUS = 0, 1, 2, 3, 4, 5
#: The compiled forms of :meth:`sim.adversaries.Adversary.compiled_form` the kernel sends.
SENDER_KINDS = {"signflip": SIGNFLIP, "alie": ALIE, "ipm": IPM, "dissensus": DISSENSUS}
#: Noise is drawn in blocks of at most this many values (memory bound of a block).
NOISE_BLOCK_VALUES = 1 << 20
_M32 = (1 << 32) - 1
_M64 = (1 << 64) - 1


def pcg_state(rng: np.random.Generator) -> np.ndarray:
    """The PCG64 state of ``rng`` as 6 uint64: state hi/lo, increment hi/lo, has_uint32, uinteger."""
    s = rng.bit_generator.state
    if s["bit_generator"] != "PCG64":
        raise ValueError(f"needs a PCG64 generator, not {s['bit_generator']}")
    st, inc = int(s["state"]["state"]), int(s["state"]["inc"])
    return np.array([st >> 64, st & _M64, inc >> 64, inc & _M64, int(s["has_uint32"]),
                     int(s["uinteger"])], dtype=np.uint64)


def set_pcg_state(rng: np.random.Generator, st: np.ndarray) -> None:
    """Write a state of :func:`pcg_state` back into ``rng``."""
    v = [int(a) for a in st]
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (v[0] << 64) | v[1], "inc": (v[2] << 64) | v[3]},
        "has_uint32": v[4], "uinteger": v[5]}


_MULT_HI = np.uint64(0x2360ED051FC65DA4)
_MULT_LO = np.uint64(0x4385DF649FCCF645)
_LO32 = np.uint64(0xFFFFFFFF)
_U0, _U1 = np.uint64(0), np.uint64(1)
#: Constants passed to the jitted helpers as numpy scalars: numba types a Python int or bool
#: constant argument as a literal and compiles the helper once per value (two copies of the
#: honest statistics, two of the pairwise leaf sum); numpy scalars are typed int64 and bool.
_I0 = np.int64(0)
_NO_SD, _WITH_SD = np.bool_(False), np.bool_(True)
_S32, _S58, _S63, _S64 = np.uint64(32), np.uint64(58), np.uint64(63), np.uint64(64)


@_jit
def _mulhi(a, b):
    """High 64 bits of the 128-bit product of two uint64."""
    a_lo, a_hi = a & _LO32, a >> _S32
    b_lo, b_hi = b & _LO32, b >> _S32
    p0 = a_lo * b_lo
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    p3 = a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _LO32) + (p2 & _LO32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32)


@_jit
def _next64(st):
    """PCG64 (XSL-RR 128/64): advance the 128-bit LCG, then output from the new state."""
    sh, sl = st[0], st[1]
    lo = sl * _MULT_LO
    hi = _mulhi(sl, _MULT_LO) + sh * _MULT_LO + sl * _MULT_HI
    lo2 = lo + st[3]
    carry = _U1 if lo2 < lo else _U0
    hi2 = hi + st[2] + carry
    st[0], st[1] = hi2, lo2
    x = hi2 ^ lo2
    rot = hi2 >> _S58
    return (x >> rot) | (x << ((_S64 - rot) & _S63))


@_jit
def _next32(st):
    """numpy's 32-bit draw of PCG64: the low half of a 64-bit output, then its high half."""
    if st[4] != _U0:
        st[4] = _U0
        return st[5]
    v = _next64(st)
    st[4] = _U1
    st[5] = v >> _S32
    return v & _LO32


@_jit
def _bounded(st, high):
    """numpy's ``integers(high)`` for ``high <= 2**32``: Lemire's rule on 32-bit draws."""
    rng = high - _U1
    if rng == _U0:
        return 0
    if rng == _LO32:
        return np.int64(_next32(st))
    m = _next32(st) * high
    leftover = m & _LO32
    if leftover < high:
        threshold = (_LO32 - rng) % high
        while leftover < threshold:
            m = _next32(st) * high
            leftover = m & _LO32
    return np.int64(m >> _S32)


@_jit
def fill_bounded(st, high, out):
    """Fill ``out`` with ``integers(high)`` draws from the state ``st``."""
    for k in range(out.size):
        out[k] = _bounded(st, high)


@_jit
def skip_bounded(st, high, count):
    """Advance ``st`` past ``count`` draws of ``integers(high)``."""
    for _ in range(count):
        _bounded(st, high)


@_jit
def _smove(diff, tau):
    """The scalar move of the Python engine (``diff * 0.5``, clipped to ``tau`` first)."""
    if diff > tau:
        return tau * 0.5
    if diff < -tau:
        return -tau * 0.5
    return diff * 0.5


@_jit
def _sumsq(a):
    """``sum(a * a)`` in the order of numpy's ``einsum("ij,ij->i")``: :func:`_sumprod` of ``a`` with itself.

    numpy's contiguous sum of products keeps two SIMD lanes (even and odd
    elements), adds a block of 8 elements from its last pair to its first, and
    sums the lanes at the end; ``tests/test_gossip_edge_kernel.py`` checks the
    order against numpy.
    """
    return _sumprod(a, a)


@_jit
def sumsq_rows(a, out):
    """:func:`_sumsq` of every row of ``a`` into ``out`` (for the order check)."""
    for r in range(a.shape[0]):
        out[r] = _sumsq(a[r])


@_jit
def _sumprod(a, b):
    """``sum(a * b)`` in the order of numpy's einsum of two contiguous rows (see :func:`_sumsq`)."""
    n = a.size
    l0 = 0.0
    l1 = 0.0
    k = 0
    while n - k >= 8:
        l0 = a[k] * b[k] + (a[k + 2] * b[k + 2] + (a[k + 4] * b[k + 4] + (a[k + 6] * b[k + 6] + l0)))
        l1 = (a[k + 1] * b[k + 1]
              + (a[k + 3] * b[k + 3] + (a[k + 5] * b[k + 5] + (a[k + 7] * b[k + 7] + l1))))
        k += 8
    while k < n:
        l0 = a[k] * b[k] + l0
        if k + 1 < n:
            l1 = a[k + 1] * b[k + 1] + l1
        k += 2
    return l0 + l1


@_jit
def _pw_leaf(a, lo, n):
    """numpy's pairwise sum of at most 128 values: eight accumulators, then the rest."""
    if n < 8:
        res = 0.0
        for k in range(n):
            res += a[lo + k]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@_jit
def _pw(a, lo, n):
    """numpy's pairwise sum of ``a[lo:lo + n]``: halves (cut at a multiple of 8) down to 128.

    numpy recurses; this walks the same tree with an explicit stack (numba's
    on-disk cache mishandles recursive functions), adding the same pairs.
    """
    if n <= 128:
        return _pw_leaf(a, lo, n)
    f_lo = np.empty(64, dtype=np.int64)
    f_n = np.empty(64, dtype=np.int64)
    f_stage = np.empty(64, dtype=np.int64)
    vals = np.empty(64)
    top, nv = 0, 0
    f_lo[0], f_n[0], f_stage[0] = lo, n, 0
    while top >= 0:
        m = f_n[top]
        if m <= 128:
            vals[nv] = _pw_leaf(a, f_lo[top], m)
            nv += 1
            top -= 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        if f_stage[top] == 0:
            f_stage[top] = 1
            f_lo[top + 1], f_n[top + 1], f_stage[top + 1] = f_lo[top], n2, 0
            top += 1
        elif f_stage[top] == 1:
            f_stage[top] = 2
            f_lo[top + 1], f_n[top + 1], f_stage[top + 1] = f_lo[top] + n2, m - n2, 0
            top += 1
        else:
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            top -= 1
    return vals[0]


@_jit
def pairwise_sum(a):
    """:func:`_pw` of a whole 1-D array (for the order check)."""
    return _pw(a, _I0, a.size)


@_jit
def _hsum(x, idx, out, buf):
    """``x[idx].sum(axis=0)`` as numpy sums it: pairwise in one dimension, row by row in more."""
    d = x.shape[1]
    h = idx.size
    if d == 1:
        for r in range(h):
            buf[r] = x[idx[r], 0]
        out[0] = 0.0 + _pw(buf, _I0, h)
        return
    for c in range(d):
        out[c] = 0.0
    for r in range(h):
        row = idx[r]
        for c in range(d):
            out[c] = out[c] + x[row, c]


@_jit
def _hstats(x, idx, mean, sd, want_sd, buf):
    """``x[idx].mean(axis=0)`` and (``want_sd``) ``.std(axis=0)`` in numpy's summation order."""
    d = x.shape[1]
    h = idx.size
    _hsum(x, idx, mean, buf)
    for c in range(d):
        mean[c] = mean[c] / h
    if not want_sd:
        return
    if d == 1:
        for r in range(h):
            dv = x[idx[r], 0] - mean[0]
            buf[r] = dv * dv
        sd[0] = math.sqrt((0.0 + _pw(buf, _I0, h)) / h)
        return
    for c in range(d):
        sd[c] = 0.0
    for r in range(h):
        row = idx[r]
        for c in range(d):
            dv = x[row, c] - mean[c]
            sd[c] = sd[c] + dv * dv
    for c in range(d):
        sd[c] = math.sqrt(sd[c] / h)


@_jit
def _oracle_radius(p, x, complete, hidx, hptr, hind, adeg, mean, s1, t1, t2, buf, sq):
    """The ClippedGossip oracle radius of honest ``p`` (:class:`~sim.adversaries.AdaptiveClip`)."""
    a = adeg[p]
    if a <= 0.0:
        return math.inf
    d = x.shape[1]
    if not complete:  # sum over p's honest neighbours, in the stored order
        acc = 0.0
        for k in range(hptr[p], hptr[p + 1]):
            j = hind[k]
            for c in range(d):
                t1[c] = x[j, c] - x[p, c]
            acc = acc + _sumsq(t1)
        return math.sqrt(acc / a)
    # complete graph: expanded sums on values centred on the honest mean
    h = hidx.size
    _hstats(x, hidx, mean, s1, _NO_SD, buf)
    for c in range(d):
        s1[c] = 0.0
    for r in range(h):
        row = hidx[r]
        for c in range(d):
            t1[c] = x[row, c] - mean[c]
        sq[r] = _sumsq(t1)
        if d == 1:
            buf[r] = t1[0]
        else:
            for c in range(d):
                s1[c] = s1[c] + t1[c]
    if d == 1:
        s1[0] = 0.0 + _pw(buf, _I0, h)
    s2_all = 0.0 + _pw(sq, _I0, h)
    for c in range(d):
        t1[c] = x[p, c] - mean[c]
    sqp = _sumsq(t1)
    for c in range(d):
        t2[c] = s1[c] - 1.0 * t1[c]
    cnt = float(h - 1)
    val = (s2_all - 1.0 * sqp) - 2.0 * _sumprod(t1, t2) + cnt * _sumsq(t1)
    if val < 0.0:
        val = 0.0
    return math.sqrt(val / a)


@_jit
def _vmove(x, row, diff, tau):
    """``x[row] += clip_rows(diff, tau) / 2`` as the vector kernel computes it."""
    d = diff.size
    if tau == math.inf:
        for c in range(d):
            x[row, c] = x[row, c] + diff[c] / 2.0
        return
    norm = math.sqrt(_sumsq(diff))
    scale = 1.0
    if norm > tau:
        scale = tau / norm
    for c in range(d):
        x[row, c] = x[row, c] + (diff[c] * scale) / 2.0


@_jit
def _sent(src, dst, x, kind, const, param, complete, hidx, hptr, hind, out, mean, sd, buf):
    """The value ``src`` sends to ``dst`` into ``out`` (as :meth:`~sim.adversaries.Adversary.send`)."""
    k = kind[src]
    d = out.size
    if k == HONEST:
        for c in range(d):
            out[c] = x[src, c]
    elif k == CONSTANT:
        for c in range(d):
            out[c] = const
    elif k == SIGNFLIP:  # the negation of the peer's own value
        for c in range(d):
            out[c] = -x[dst, c]
    elif k == ALIE:  # honest mean plus z honest standard deviations
        _hstats(x, hidx, mean, sd, _WITH_SD, buf)
        for c in range(d):
            out[c] = mean[c] + param * sd[c]
    elif k == IPM:  # -eps times the honest mean
        _hstats(x, hidx, mean, sd, _NO_SD, buf)
        for c in range(d):
            out[c] = -param * mean[c]
    else:  # DISSENSUS: x_p - eps (mean of p's honest neighbours - x_p)
        if complete:
            _hsum(x, hidx, mean, buf)
            cnt = float(hidx.size - 1)
            for c in range(d):
                mean[c] = mean[c] - 1.0 * x[dst, c]
        else:
            for c in range(d):
                mean[c] = 0.0
            for e in range(hptr[dst], hptr[dst + 1]):
                j = hind[e]
                for c in range(d):
                    mean[c] = mean[c] + 1.0 * x[j, c]
            cnt = float(hptr[dst + 1] - hptr[dst])
        for c in range(d):
            nm = mean[c] / cnt if cnt > 0.0 else x[dst, c]
            out[c] = x[dst, c] - param * (nm - x[dst, c])


@_jit
def edge_steps(count, x, kind, const, tau, plain, scalar, complete, u, v, first, second,
               high_a, high_b, noise, z, hidx, param, adaptive, adeg, hptr, hind, buf, sq):
    """Run ``count`` steps of random-edge gossip on ``x`` in place (see the module docstring).

    ``first`` is the stream cursor of the first ends (or edge indices), ``second``
    that of the second ends (complete graph); ``z`` holds ``count`` blocks of
    standard normals for the noise (``noise > 0``), row ``r`` for node ``hidx[r]``
    (the honest nodes). ``param`` is the attack's parameter, ``adaptive`` the
    oracle clipping radius (``adeg`` adversarial degrees, ``hptr``/``hind`` the
    honest neighbours of a sparse graph); ``buf`` and ``sq`` hold ``len(hidx)``.
    """
    d = x.shape[1]
    vi = np.empty(d)
    vj = np.empty(d)
    di = np.empty(d)
    dj = np.empty(d)
    mean = np.empty(d)
    sd = np.empty(d)
    t1 = np.empty(d)
    t2 = np.empty(d)
    hcount = hidx.size
    for s in range(count):
        if complete:
            i = _bounded(first, high_a)
            j = _bounded(second, high_b)
            if j >= i:
                j += 1
        else:
            e = _bounded(first, high_a)
            i, j = u[e], v[e]
        if noise > 0.0:
            for r in range(hcount):
                row = hidx[r]
                for c in range(d):
                    x[row, c] = x[row, c] + noise * z[s, r, c]
        ki, kj = kind[i], kind[j]
        if ki != 0 and kj != 0:
            continue
        if scalar and ki == 0 and kj == 0:
            xi, xj = x[i, 0], x[j, 0]
            x[i, 0] = xi + _smove(xj - xi, tau)
            x[j, 0] = xj + _smove(xi - xj, tau)
            continue
        if scalar and (ki == 1 or kj == 1):
            h = j if ki == 1 else i
            x[h, 0] = x[h, 0] + _smove(const - x[h, 0], tau)
            continue
        if plain:
            for c in range(d):
                a = (x[i, c] + x[j, c]) * 0.5
                x[i, c] = a
                x[j, c] = a
            continue
        _sent(i, j, x, kind, const, param, complete, hidx, hptr, hind, vi, mean, sd, buf)
        _sent(j, i, x, kind, const, param, complete, hidx, hptr, hind, vj, mean, sd, buf)
        for c in range(d):
            di[c] = vj[c] - x[i, c]
            dj[c] = vi[c] - x[j, c]
        tau_i, tau_j = tau, tau
        if adaptive:  # both radii from the state before either end moves
            if ki == 0:
                tau_i = _oracle_radius(i, x, complete, hidx, hptr, hind, adeg, mean, sd, t1, t2,
                                       buf, sq)
            if kj == 0:
                tau_j = _oracle_radius(j, x, complete, hidx, hptr, hind, adeg, mean, sd, t1, t2,
                                       buf, sq)
        if ki == 0:
            _vmove(x, i, di, tau_i)
        if kj == 0:
            _vmove(x, j, dj, tau_j)


@_jit
def edge_chunk(count, x, kind, const, tau, plain, scalar, complete, u, v, state, first, high_a,
               high_b, hidx, no_noise, param, adaptive, adeg, hptr, hind, buf, sq):
    """One record chunk without noise: :func:`edge_steps` with the stream cursors set up.

    On the complete graph the chunk's second ends are drawn after all its first
    ends (as numpy fills two arrays), so a copy of the state (into ``first``, a
    scratch array of its shape, element by element: the kernel allocates and
    slices nothing, which spares numba compiling its shape-error formatting,
    about 4 s of a cold compile) draws the first ends while ``state``, advanced
    past them, draws the second ends.
    """
    for k in range(state.size):  # element by element: a slice copy also checks shapes
        first[k] = state[k]
    if complete:
        skip_bounded(state, high_a, count)
    edge_steps(count, x, kind, const, tau, plain, scalar, complete, u, v, first, state, high_a,
               high_b, 0.0, no_noise, hidx, param, adaptive, adeg, hptr, hind, buf, sq)
    if not complete:
        for k in range(state.size):
            state[k] = first[k]


def numpy_order_matches(max_dim: int = 40, rows: int = 200) -> bool:
    """Whether this numpy sums in the kernel's orders (probed once per process).

    The kernel reproduces three of numpy's summation orders: ``einsum("ij,ij->i")``
    (:func:`_sumsq`: the norm of a clipped vector move, the oracle radius),
    the pairwise sum of a contiguous 1-D reduction (:func:`_pw`: honest means and
    deviations in one dimension) and row-by-row column sums (more dimensions).
    Another numpy build (another SIMD width) could sum otherwise; then ``auto``
    does not pick the engine for the configs that need them
    (:meth:`sim.gossip.engines.CompiledEdgeEngine.auto_for`).
    """
    global _ORDER_OK
    if _ORDER_OK is None:
        rng = np.random.default_rng(12345)
        ok = True
        for d in range(1, max_dim + 1):
            a = rng.standard_normal((rows, d)) * np.exp(3.0 * rng.standard_normal((rows, 1)))
            out = np.empty(rows)
            sumsq_rows(a, out)
            ok = ok and bool(np.array_equal(out, np.einsum("ij,ij->i", a, a)))
        for size in (*range(1, 300), 1000, 8191, 8192, 8193, 20_000, 100_001):
            a = rng.standard_normal((size, 1)) * np.exp(rng.standard_normal((size, 1)))
            ok = ok and float(pairwise_sum(a[:, 0])) == float(a.sum(axis=0)[0])
        a = rng.standard_normal((1000, 3))
        col = np.zeros(3)
        for r in range(a.shape[0]):
            col = col + a[r]
        ok = ok and bool(np.array_equal(col, a.sum(axis=0)))
        _ORDER_OK = ok
    return _ORDER_OK


_ORDER_OK: bool | None = None


def bounded_integers(st: np.ndarray, high: int, count: int) -> np.ndarray:
    """``count`` draws of ``Generator.integers(high)`` from the state ``st`` (advanced in place).

    The same values numpy draws from the generator whose state ``st`` is
    (:func:`pcg_state`); for tests and for readers of the kernel.
    """
    out = np.empty(count, dtype=np.int64)
    fill_bounded(st, np.uint64(high), out)
    return out


class EdgeSteps:
    """The arrays of one compiled edge run, advanced by chunks of steps.

    Parameters
    ----------
    x : ndarray, shape (n, d)
        Values, updated in place (C-contiguous float64).
    kind : ndarray of int, shape (n,)
        Sender kind per node (:data:`HONEST`, :data:`CONSTANT`, :data:`SIGNFLIP`,
        :data:`ALIE`, :data:`IPM`, :data:`DISSENSUS`).
    const : float
        The constant attacker's value (every coordinate).
    param : float
        The attack's parameter (ALIE ``z``, IPM and dissensus ``eps``).
    tau : float
        Fixed clipping radius (``inf``: none).
    adaptive : bool
        Clip with the ClippedGossip oracle radius instead (``adeg``, ``hptr``, ``hind``).
    plain : bool
        Plain averaging of an all-honest system (both ends take the mean).
    scalar : bool
        The Python engine's scalar path (``dim = 1``, no noise): steps on floats.
    complete : bool
        Draw pairs on the complete graph; else uniform edges ``(u[e], v[e])``.
    u, v : ndarray of int
        Edge endpoints (sparse graphs).
    partners : numpy.random.Generator
        The ``partners`` stream (PCG64), kept in step with the kernel.
    noise : float
        Noise standard deviation (0: none).
    noise_rng : numpy.random.Generator
        The ``noise`` stream.
    hidx : ndarray of int
        The honest nodes (they take the noise; honest statistics run over them).
    adeg : ndarray of float
        Adversarial neighbours of each node.
    hptr, hind : ndarray of int
        The honest neighbours of each node of a sparse graph, CSR, in the order
        :class:`~sim.adversaries.Neighbourhood` sums them (empty: complete graph).
    """

    def __init__(self, x: np.ndarray, kind: np.ndarray, const: float, tau: float, *,
                 plain: bool, scalar: bool, complete: bool, u: np.ndarray, v: np.ndarray,
                 partners: np.random.Generator, noise: float, noise_rng: np.random.Generator,
                 hidx: np.ndarray, param: float = 0.0, adaptive: bool = False,
                 adeg: np.ndarray | None = None, hptr: np.ndarray | None = None,
                 hind: np.ndarray | None = None) -> None:
        self.x = x
        self.n = n = x.shape[0]
        self.complete = bool(complete)
        if self.complete:
            if n - 1 > _M32:
                raise ValueError("the compiled edge engine draws at most 2**32 nodes")
        elif u.size - 1 > _M32:
            raise ValueError("the compiled edge engine draws at most 2**32 edges")
        self.partners = partners
        self.noise = float(noise)
        self.noise_rng = noise_rng
        self.hidx = np.ascontiguousarray(hidx, dtype=np.int64)
        self.hcount = h = int(self.hidx.size)
        self.state = pcg_state(partners)
        self.highs = ((np.uint64(n), np.uint64(n - 1)) if self.complete
                      else (np.uint64(u.size), np.uint64(0)))
        empty = np.zeros(1, dtype=np.int64)
        self.base = (np.ascontiguousarray(kind, dtype=np.int64), float(const), float(tau),
                     bool(plain), bool(scalar), self.complete,
                     readonly(u, np.int64), readonly(v, np.int64))
        self.extra = (float(param), bool(adaptive),
                      np.zeros(n) if adeg is None else np.ascontiguousarray(adeg, dtype=float),
                      empty if hptr is None else np.ascontiguousarray(hptr, dtype=np.int64),
                      empty if hind is None else np.ascontiguousarray(hind, dtype=np.int64),
                      np.empty(max(h, 1)), np.empty(max(h, 1)))
        self.chunk_args = (self.x, *self.base, self.state, np.empty_like(self.state), *self.highs,
                           self.hidx, np.empty((0, 0, self.x.shape[1])), *self.extra)

    def steps(self, count: int) -> None:
        """Run ``count`` steps (one record chunk of the Python engine's draws).

        The stream state lives in :attr:`state` during the run; :meth:`sync`
        writes it back into the ``partners`` generator.
        """
        main = self.state
        high_a, high_b = self.highs
        if self.noise == 0.0:
            edge_chunk(count, *self.chunk_args)
            return
        first = main.copy()
        if self.complete:  # the second ends start after the chunk's first ends
            skip_bounded(main, high_a, count)
        d = self.x.shape[1]
        block = max(1, NOISE_BLOCK_VALUES // max(1, self.hcount * d))
        done = 0
        while done < count:
            b = min(block, count - done)
            z = self.noise_rng.standard_normal((b, self.hcount, d))
            edge_steps(b, self.x, *self.base, first, main, high_a, high_b, self.noise, z,
                       self.hidx, *self.extra)
            done += b
        if not self.complete:
            main[:] = first

    def sync(self) -> None:
        """Write the stream state back into the ``partners`` generator."""
        set_pcg_state(self.partners, self.state)


def honest_neighbours(graph: Any, honest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (``indptr``, ``indices``) of every node's honest neighbours, in the order
    :class:`~sim.adversaries.Neighbourhood` stores them (built the same way, with scipy)."""
    import networkx as nx
    import scipy.sparse as sp

    adj = nx.to_scipy_sparse_array(graph, nodelist=list(graph.nodes()), weight=None, format="csr")
    adj = sp.csr_array(adj, dtype=float)
    adj.data[:] = 1.0
    adj_h = sp.csr_array(adj @ sp.diags_array(np.asarray(honest, dtype=float)))
    adj_h.eliminate_zeros()
    return adj_h.indptr.astype(np.int64), adj_h.indices.astype(np.int64)


class CompiledEdge(EdgeGossip):
    """The edge protocol on the numba kernel (see the module docstring).

    Strategies given to the constructor that have no compiled form (a user's
    adversary or defence) run the Python engine's steps instead -- the same
    numbers, at its speed -- unless the config names ``engine="compiled"``,
    which then refuses them with the reason.
    """

    def __init__(self, config: GossipConfig, streams: Any, *, path: str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(config, streams, path="auto", **kwargs)
        from .engines import edge_obstacle

        self.loop: EdgeSteps | None = None
        why = edge_obstacle(config, self.adversary, self.defence, self.update)
        if why is not None:
            if config.engine == "compiled":
                raise ConfigError("engine", "des or auto for this configuration "
                                  f"(compiled: {why})", "compiled")
            return
        n = self.n
        kind = np.zeros(n, dtype=np.int64)
        const = param = 0.0
        adv = np.flatnonzero(self.is_adv)
        if adv.size:
            c = self.adversary.constant()  # type: ignore[union-attr]
            if c is not None:
                kind[adv], const = CONSTANT, float(c)
            else:
                rule, param = self.adversary.compiled_form()  # type: ignore[union-attr, misc]
                kind[adv] = SENDER_KINDS[rule]
        radius = self.defence.fixed_radius()
        adaptive = radius is None  # edge_obstacle let through only the oracle rule
        self.x = np.ascontiguousarray(self.x, dtype=float)
        self.view.x = self.x
        net, cfg = self.net, self.cfg
        hptr = hind = None
        if not net.complete and (adaptive or DISSENSUS in kind):
            hptr, hind = honest_neighbours(net.graph, self.honest)
        adeg = self.nbhd.adversary_degree(np.arange(n)).astype(float)
        # the Python engine's choice of path (sim.gossip.edge.EdgeGossip.steps)
        scalar = cfg.noise == 0 and self.scalar_ok(attacker=False)
        plain = self.n_adv == 0 and self.defence.plain()
        self.loop = EdgeSteps(
            self.x, kind, const, math.inf if adaptive else float(radius), plain=plain,
            scalar=scalar, complete=net.complete, u=net.u, v=net.v, partners=self.rng_partners,
            noise=cfg.noise, noise_rng=self.rng_noise, hidx=self.hidx, param=float(param),
            adaptive=adaptive, adeg=adeg, hptr=hptr, hind=hind)

    def run(self) -> Records:
        """Run chunk by chunk to the horizon, recording the honest values (as the Python engine)."""
        if self.loop is None:
            return super().run()
        check(not self._ran, "system", "run once", "run()")
        self._ran = True
        rec = self.records
        steps = rec.steps
        x = self.x
        hidx = self.hidx
        honest_rows = (lambda: x) if self.n_adv == 0 else (lambda: x[hidx])
        dt = 2.0 / self.n
        t = 0.0
        rec.record(0, t, 0, honest_rows())
        for k in range(1, steps.size):
            count = int(steps[k] - steps[k - 1])
            t = t + count * dt  # the SimPy clock's sum, in the same order
            self.loop.steps(count)
            self.exchanges += count
            rec.record(k, t, self.exchanges, honest_rows())
        self.loop.sync()
        return rec
