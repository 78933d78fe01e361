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
  draws in memory; the numpy generator's state is written back after each
  chunk.
* the noise (every honest node adds ``N(0, s**2)`` before each step) is drawn
  by numpy from the ``noise`` stream in blocks of steps, the same values as the
  Python engine's one draw per step.
* each step updates the pair with the Python engine's arithmetic for its path:
  on Python floats (``dim = 1``, no noise: ``x_i += move(x_j - x_i)`` then
  ``x_j += move(x_i_old - x_j)``) or on the vector kernel (plain and honest:
  both ends take ``(x_i + x_j) * 0.5``; otherwise each honest end adds its
  defence's move of ``received - own``, clipping with ``diff * (tau / |diff|)``).

It asks the strategies, never their types: an adversary answers with
:meth:`~sim.adversaries.Adversary.constant` or (sign-flip) its
:meth:`~sim.adversaries.Adversary.compiled_form`; a defence with
:meth:`~sim.adversaries.Defence.plain` and
:meth:`~sim.adversaries.Defence.fixed_radius`. What it does not reproduce bit
for bit is left to the Python engine, and
:func:`sim.gossip.engines.edge_obstacle` says why: the
adversaries whose message is a statistic of all honest values (ALIE, IPM,
dissensus; a per-step O(n) sum whose rounding follows numpy's summation
order), state-dependent clipping, a node update (local training), and a user's
adversary or defence without a compiled form.

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
from .config import GossipConfig
from .edge import EdgeGossip
from .records import Records

try:  # numba is the optional extra ``dtsim[fast]``
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "HONEST", "CONSTANT", "SIGNFLIP", "CompiledEdge", "EdgeSteps",
           "pcg_state", "set_pcg_state", "bounded_integers", "einsum_order_matches"]

#: Sender kinds of the kernel (per node).
HONEST, CONSTANT, SIGNFLIP = 0, 1, 2
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


def _identity(f):
    return f


_jit = numba.njit(cache=True, nogil=True) if HAVE_NUMBA else _identity

_MULT_HI = np.uint64(0x2360ED051FC65DA4)
_MULT_LO = np.uint64(0x4385DF649FCCF645)
_LO32 = np.uint64(0xFFFFFFFF)
_U0, _U1 = np.uint64(0), np.uint64(1)
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
    """``sum(a * a)`` in the order of numpy's ``einsum("ij,ij->i")`` (two lanes, blocks of 8).

    numpy's contiguous sum of products keeps two SIMD lanes (even and odd
    elements), adds a block of 8 elements from its last pair to its first, and
    sums the lanes at the end; ``tests/test_gossip_edge_kernel.py`` checks the
    order against numpy.
    """
    n = a.size
    l0 = 0.0
    l1 = 0.0
    k = 0
    while n - k >= 8:
        l0 = a[k] * a[k] + (a[k + 2] * a[k + 2] + (a[k + 4] * a[k + 4] + (a[k + 6] * a[k + 6] + l0)))
        l1 = (a[k + 1] * a[k + 1]
              + (a[k + 3] * a[k + 3] + (a[k + 5] * a[k + 5] + (a[k + 7] * a[k + 7] + l1))))
        k += 8
    while k < n:
        l0 = a[k] * a[k] + l0
        if k + 1 < n:
            l1 = a[k + 1] * a[k + 1] + l1
        k += 2
    return l0 + l1


@_jit
def sumsq_rows(a, out):
    """:func:`_sumsq` of every row of ``a`` into ``out`` (for the order check)."""
    for r in range(a.shape[0]):
        out[r] = _sumsq(a[r])


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
def _sent(src, dst, x, kind, const, out):
    """The value ``src`` sends to ``dst`` into ``out``."""
    k = kind[src]
    d = out.size
    if k == 0:
        for c in range(d):
            out[c] = x[src, c]
    elif k == 1:
        for c in range(d):
            out[c] = const
    else:  # sign-flip: the negation of the peer's own value
        for c in range(d):
            out[c] = -x[dst, c]


@_jit
def edge_steps(count, x, kind, const, tau, plain, scalar, complete, u, v, first, second,
               high_a, high_b, noise, z, hidx):
    """Run ``count`` steps of random-edge gossip on ``x`` in place (see the module docstring).

    ``first`` is the stream cursor of the first ends (or edge indices), ``second``
    that of the second ends (complete graph); ``z`` holds ``count`` blocks of
    standard normals for the noise (``noise > 0``), row ``r`` for node ``hidx[r]``.
    """
    d = x.shape[1]
    vi = np.empty(d)
    vj = np.empty(d)
    di = np.empty(d)
    dj = np.empty(d)
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
        _sent(i, j, x, kind, const, vi)
        _sent(j, i, x, kind, const, vj)
        for c in range(d):
            di[c] = vj[c] - x[i, c]
            dj[c] = vi[c] - x[j, c]
        if ki == 0:
            _vmove(x, i, di, tau)
        if kj == 0:
            _vmove(x, j, dj, tau)


@_jit
def edge_chunk(count, x, kind, const, tau, plain, scalar, complete, u, v, state, high_a, high_b,
               hidx, no_noise):
    """One record chunk without noise: :func:`edge_steps` with the stream cursors set up.

    On the complete graph the chunk's second ends are drawn after all its first
    ends (as numpy fills two arrays), so a copy of the state draws the first
    ends while ``state``, advanced past them, draws the second ends.
    """
    first = state.copy()
    if complete:
        skip_bounded(state, high_a, count)
    edge_steps(count, x, kind, const, tau, plain, scalar, complete, u, v, first, state, high_a,
               high_b, 0.0, no_noise, hidx)
    if not complete:
        state[:] = first


def einsum_order_matches(max_dim: int = 40, rows: int = 200) -> bool:
    """Whether this numpy's ``einsum("ij,ij->i")`` sums in :func:`_sumsq`'s order (dims 2..max_dim).

    The norm of a clipped vector move (``dim > 1``) follows it; another numpy
    build could sum otherwise, and then the engine is not chosen by ``auto``
    for those configs (:meth:`sim.gossip.engines.CompiledEdgeEngine.auto_for`).
    """
    global _EINSUM_OK
    if _EINSUM_OK is None:
        rng = np.random.default_rng(12345)
        ok = True
        for d in range(2, max_dim + 1):
            a = rng.standard_normal((rows, d)) * np.exp(3.0 * rng.standard_normal((rows, 1)))
            out = np.empty(rows)
            sumsq_rows(a, out)
            ok = ok and bool(np.array_equal(out, np.einsum("ij,ij->i", a, a)))
        _EINSUM_OK = ok
    return _EINSUM_OK


_EINSUM_OK: bool | None = None


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
        Sender kind per node: 0 honest, 1 constant (``const``), 2 sign-flip.
    const : float
        The constant attacker's value (every coordinate).
    tau : float
        Fixed clipping radius (``inf``: none).
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
        Rows that take noise (the honest nodes; all nodes when every node is honest).
    """

    def __init__(self, x: np.ndarray, kind: np.ndarray, const: float, tau: float, *,
                 plain: bool, scalar: bool, complete: bool, u: np.ndarray, v: np.ndarray,
                 partners: np.random.Generator, noise: float, noise_rng: np.random.Generator,
                 hidx: np.ndarray) -> None:
        self.x = x
        self.n = x.shape[0]
        self.kind = np.ascontiguousarray(kind, dtype=np.int64)
        self.const = float(const)
        self.tau = float(tau)
        self.plain, self.scalar, self.complete = bool(plain), bool(scalar), bool(complete)
        self.u = np.ascontiguousarray(u, dtype=np.int64)
        self.v = np.ascontiguousarray(v, dtype=np.int64)
        self.partners = partners
        self.noise = float(noise)
        self.noise_rng = noise_rng
        self.hidx = np.ascontiguousarray(hidx, dtype=np.int64)
        self.hcount = int(self.hidx.size)
        self.state = pcg_state(partners)
        self.highs = ((np.uint64(self.n), np.uint64(self.n - 1)) if self.complete
                      else (np.uint64(self.u.size), np.uint64(0)))
        self.chunk_args = (self.x, self.kind, self.const, self.tau, self.plain, self.scalar,
                           self.complete, self.u, self.v, self.state, *self.highs, self.hidx,
                           np.empty((0, 0, self.x.shape[1])))
        if self.complete:
            if self.n - 1 > _M32:
                raise ValueError("the compiled edge engine draws at most 2**32 nodes")
        elif self.u.size - 1 > _M32:
            raise ValueError("the compiled edge engine draws at most 2**32 edges")

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
        args = (self.x, self.kind, self.const, self.tau, self.plain, self.scalar, self.complete,
                self.u, self.v, first, main, high_a, high_b)
        d = self.x.shape[1]
        block = max(1, NOISE_BLOCK_VALUES // max(1, self.hcount * d))
        done = 0
        while done < count:
            b = min(block, count - done)
            z = self.noise_rng.standard_normal((b, self.hcount, d))
            edge_steps(b, *args, self.noise, z, self.hidx)
            done += b
        if not self.complete:
            main[:] = first

    def sync(self) -> None:
        """Write the stream state back into the ``partners`` generator."""
        set_pcg_state(self.partners, self.state)


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
        const = 0.0
        adv = np.flatnonzero(self.is_adv)
        if adv.size:
            c = self.adversary.constant()  # type: ignore[union-attr]
            if c is not None:
                kind[adv], const = CONSTANT, float(c)
            else:
                kind[adv] = SIGNFLIP
        tau = float(self.defence.fixed_radius())  # type: ignore[arg-type]
        self.x = np.ascontiguousarray(self.x, dtype=float)
        self.view.x = self.x
        net, cfg = self.net, self.cfg
        # the Python engine's choice of path (sim.gossip.edge.EdgeGossip.steps)
        scalar = cfg.noise == 0 and self.scalar_ok(attacker=False)
        plain = self.n_adv == 0 and self.defence.plain()
        self.loop = EdgeSteps(
            self.x, kind, const, tau, plain=plain, scalar=scalar, complete=net.complete,
            u=net.u, v=net.v, partners=self.rng_partners, noise=cfg.noise,
            noise_rng=self.rng_noise, hidx=self.hidx if self.n_adv else np.arange(n))

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
