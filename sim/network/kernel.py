"""The flow engine compiled (numba): :class:`CompiledFlowEngine` and the batch loop :func:`run_flows`.

The same model as :class:`sim.network.flows.FlowEngine`, statement for
statement, so that both give the same numbers bit for bit: a flow is
activated at ``start + latency``; at each event time (the starts and finishes
within :data:`TIE` of the earliest, taken together, each at its own time) the
connected component of flows that share a resource with the ones that moved
is collected (depth first from the changed resources, in the Python engine's
order) and water-filled with a heap of resource levels (SimGrid's lazy and
selective update); a flow's remaining size is brought up to date only when
its rate changes; finish times wait in a heap keyed ``(time, sequence)``.
Each resource keeps its flows in a doubly linked list in the order they
arrived (the Python engine's insertion-ordered dict), so every sum is taken
in the same order as there.

The state lives in two flat arrays (``N``, an arena of integers, and ``X``, one of floats,
the layout in :func:`_offsets`): a call from Python into the compiled code then
passes two arrays, whatever the engine holds, which keeps a call at a few
hundred nanoseconds (each array argument costs numba about 70 ns to unbox).
Both grow (doubling) when flows are added past their capacity.

Without numba :class:`sim.network.flows.FlowEngine` runs instead (this
module's functions would run, slowly, as plain Python; the default test suite
checks their logic that way, ``tests/test_network_kernel.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import check_choice
from ..xoshiro import HAVE_NUMBA, identity, jit

if HAVE_NUMBA:
    import numba

    #: For the functions that only index the arenas (they allocate nothing): compiled without
    #: numba's reference counting, which would otherwise count every use of an arena in them.
    lean = numba.njit(cache=True, nogil=True, _nrt=False)
    #: For the small helpers of the hot loops: inlined where they are called (numba's own IR
    #: inlining; a call passes each array as seven values and the offset tuples by value).
    inline = numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
else:  # pragma: no cover - exercised where numba is absent
    lean = inline = identity

__all__ = ["HAVE_NUMBA", "CompiledFlowEngine", "run_flows", "NO_EXCHANGE", "NO_ROOM"]

#: Completions within this relative distance of an event are taken with it (as FlowEngine).
TIE = 1e-12

_LATENCY, _ACTIVE, _DONE, _CANCELLED = 0, 1, 2, 3
#: What :func:`_exchange` returns when no exchange completed, and when the arenas are full.
NO_EXCHANGE, NO_ROOM = -1, -2

# the integer arena's header: capacities (flows, their route entries, resources, event heap,
# level heap, routes, the routes' entries), then counters
(_NF, _NE, _R, _H, _L, _RT, _RE, _NFLOWS, _NENT, _HS, _SEQ, _EVENTS, _NACTIVE, _STAMP, _NROUTES,
 _NRENT) = range(16)
_IHDR = 16
# the float arena's header
_NOW, _NEXT = 0, 1
_XHDR = 4

# The integer arena's sections, in order (:func:`_offsets`): per flow (the output first),
# per route entry, per resource, per event-heap slot, per level-heap slot.
(_I_OUT, _I_STATE, _I_HPOS, _I_E0, _I_E1, _I_CST, _I_FST, _I_COMP, _I_ORDER,
 _I_ERES, _I_EFLOW, _I_EPREV, _I_ENEXT,
 _I_HEAD, _I_TAIL, _I_CNT, _I_SST, _I_TST, _I_CHS, _I_CHG, _I_STACK, _I_CRES, _I_TOUCHED,
 _I_HSEQ, _I_HFLOW,
 _I_LRES,
 _I_R0, _I_R1,
 _I_RRES) = range(29)
# The float arena's sections, likewise (the routes: latency and weight, and each entry's
# coefficient).
(_X_OUTT, _X_SIZE, _X_W, _X_REM, _X_RATE, _X_LAST, _X_FINISH, _X_NRATE,
 _X_COEF,
 _X_CAP, _X_LREM, _X_LDEN,
 _X_HKEY,
 _X_LKEY,
 _X_RLAT, _X_RW,
 _X_RCOEF) = range(17)


@jit
def _sizes(NF, NE, R, H, L, RT, RE):
    """Lengths of the integer and float arenas for these capacities."""
    return (_IHDR + 9 * NF + 4 * NE + 10 * R + 2 * H + L + 2 * RT + RE,
            _XHDR + 8 * NF + NE + 3 * R + H + L + 2 * RT + RE)


@lean
def _offsets(N):
    """Where each section starts: a tuple for the integer arena, one for the float arena.

    The compiled functions index the arenas at these offsets (``N[state + f]``
    is flow ``f``'s state) rather than through views: a view is an array whose
    reference count numba keeps, about 20 ns each time one is made or handed on,
    which with some forty sections was most of the cost of a call.
    The finished-flow output (flow ids, then their finish times) comes first in
    each arena, at fixed offsets, so that Python reads it without the layout.
    """
    NF, NE, R, H, L, RT = N[_NF], N[_NE], N[_R], N[_H], N[_L], N[_RT]
    a = _IHDR
    b = a + 9 * NF
    c = b + 4 * NE
    d = c + 10 * R
    e = d + 2 * H
    g = e + L
    oi = (a, a + NF, a + 2 * NF, a + 3 * NF, a + 4 * NF, a + 5 * NF, a + 6 * NF, a + 7 * NF,
          a + 8 * NF,
          b, b + NE, b + 2 * NE, b + 3 * NE,
          c, c + R, c + 2 * R, c + 3 * R, c + 4 * R, c + 5 * R, c + 6 * R, c + 7 * R, c + 8 * R,
          c + 9 * R,
          d, d + H,
          e,
          g, g + RT,
          g + 2 * RT)
    p = _XHDR
    q = p + 8 * NF
    r = q + NE
    u = r + 3 * R
    v = u + H + L
    ox = (p, p + NF, p + 2 * NF, p + 3 * NF, p + 4 * NF, p + 5 * NF, p + 6 * NF, p + 7 * NF,
          q,
          r, r + R, r + 2 * R,
          u,
          u + H,
          v, v + RT,
          v + 2 * RT)
    return oi, ox


@jit
def _new(cap, NF, NE, RT, RE):
    """Empty arenas for ``NF`` flows and ``NE`` of their route entries, ``RT`` routes and
    ``RE`` of their entries, on resources of capacity ``cap``."""
    R = cap.shape[0]
    H = NF + 16
    L = R + NE + 16
    ni, nx = _sizes(NF, NE, R, H, L, RT, RE)
    N = np.zeros(ni, np.int64)
    X = np.zeros(nx, np.float64)
    N[_NF], N[_NE], N[_R], N[_H], N[_L], N[_RT], N[_RE] = NF, NE, R, H, L, RT, RE
    X[_NOW] = 0.0
    X[_NEXT] = math.inf
    oi, ox = _offsets(N)
    for r in range(R):
        N[oi[_I_HEAD] + r] = -1
        N[oi[_I_TAIL] + r] = -1
        X[ox[_X_CAP] + r] = cap[r]
    return N, X


@jit
def _grow(N, X, NF, NE, RT, RE):
    """The arenas copied into larger ones (capacities as for _new)."""
    oi, ox = _offsets(N)
    cap = X[ox[_X_CAP]:ox[_X_CAP] + N[_R]].copy()
    N2, X2 = _new(cap, NF, NE, RT, RE)
    oi2, ox2 = _offsets(N2)
    for k in range(_RE + 1, _IHDR):
        N2[k] = N[k]
    nr, nre = N[_NROUTES], N[_NRENT]
    for a in range(_I_R0, _I_RRES):
        N2[oi2[a]:oi2[a] + nr] = N[oi[a]:oi[a] + nr]
    N2[oi2[_I_RRES]:oi2[_I_RRES] + nre] = N[oi[_I_RRES]:oi[_I_RRES] + nre]
    for a in range(_X_RLAT, _X_RCOEF):
        X2[ox2[a]:ox2[a] + nr] = X[ox[a]:ox[a] + nr]
    X2[ox2[_X_RCOEF]:ox2[_X_RCOEF] + nre] = X[ox[_X_RCOEF]:ox[_X_RCOEF] + nre]
    for k in range(_XHDR):
        X2[k] = X[k]
    nf, ne, R = N[_NFLOWS], N[_NENT], N[_R]
    for a in range(_I_STATE, _I_ERES):
        N2[oi2[a]:oi2[a] + nf] = N[oi[a]:oi[a] + nf]
    for a in range(_I_ERES, _I_HEAD):
        N2[oi2[a]:oi2[a] + ne] = N[oi[a]:oi[a] + ne]
    for a in range(_I_HEAD, _I_HSEQ):
        N2[oi2[a]:oi2[a] + R] = N[oi[a]:oi[a] + R]
    for a in range(_X_SIZE, _X_COEF):
        X2[ox2[a]:ox2[a] + nf] = X[ox[a]:ox[a] + nf]
    X2[ox2[_X_COEF]:ox2[_X_COEF] + ne] = X[ox[_X_COEF]:ox[_X_COEF] + ne]
    for a in range(_X_CAP, _X_HKEY):
        X2[ox2[a]:ox2[a] + R] = X[ox[a]:ox[a] + R]
    hs = N[_HS]
    X2[ox2[_X_HKEY]:ox2[_X_HKEY] + hs] = X[ox[_X_HKEY]:ox[_X_HKEY] + hs]
    for a in range(_I_HSEQ, _I_LRES):
        N2[oi2[a]:oi2[a] + hs] = N[oi[a]:oi[a] + hs]
    return N2, X2


# -- the event heap: at most one entry per flow, its next event (the activation of a flow in
# its latency, the finish of a moving one), keyed (time, sequence), least first; a new rate
# moves the flow's entry, with a new sequence number. FlowEngine keeps a heap of every entry
# ever pushed and skips the superseded ones: the live entries and their keys are the same,
# so they come out in the same order.


@inline
def _hbefore(N, X, hq, hk, a, b):
    """Whether heap slot ``a`` comes before slot ``b``."""
    ka = X[hk + a]
    kb = X[hk + b]
    return ka < kb or (ka == kb and N[hq + a] < N[hq + b])


@inline
def _hput(N, X, hk, hq, hf, hp, i, t, q, f):
    """Slot ``i`` holds flow ``f``'s entry ``(t, q)``."""
    X[hk + i] = t
    N[hq + i] = q
    N[hf + i] = f
    N[hp + f] = i


@inline
def _hsift(N, X, oi, ox, i, size):
    """Restore the heap order from slot ``i`` (its entry moved up or down)."""
    hk, hq, hf, hp = ox[_X_HKEY], oi[_I_HSEQ], oi[_I_HFLOW], oi[_I_HPOS]
    t, q, f = X[hk + i], N[hq + i], N[hf + i]
    while i > 0:  # up
        p = (i - 1) >> 1
        kp = X[hk + p]
        if kp < t or (kp == t and N[hq + p] < q):
            break
        _hput(N, X, hk, hq, hf, hp, i, kp, N[hq + p], N[hf + p])
        i = p
    while True:  # down
        a = 2 * i + 1
        if a >= size:
            break
        c = a
        if a + 1 < size and _hbefore(N, X, hq, hk, a + 1, a):
            c = a + 1
        kc = X[hk + c]
        if t < kc or (t == kc and q < N[hq + c]):
            break
        _hput(N, X, hk, hq, hf, hp, i, kc, N[hq + c], N[hf + c])
        i = c
    _hput(N, X, hk, hq, hf, hp, i, t, q, f)


@inline
def _hpush(N, X, oi, ox, t, f):
    """Flow ``f``'s next event at ``t``, with the next sequence number (its entry moved if it
    has one, else added)."""
    q = N[_SEQ] + 1
    N[_SEQ] = q
    hp = oi[_I_HPOS]
    i = N[hp + f]
    if i < 0:
        i = N[_HS]
        N[_HS] = i + 1
    _hput(N, X, ox[_X_HKEY], oi[_I_HSEQ], oi[_I_HFLOW], hp, i, t, q, f)
    _hsift(N, X, oi, ox, i, N[_HS])


@inline
def _hremove(N, X, oi, ox, i):
    """Take out the entry in slot ``i``."""
    hk, hq, hf, hp = ox[_X_HKEY], oi[_I_HSEQ], oi[_I_HFLOW], oi[_I_HPOS]
    N[hp + N[hf + i]] = -1
    n = N[_HS] - 1
    N[_HS] = n
    if i < n:
        _hput(N, X, hk, hq, hf, hp, i, X[hk + n], N[hq + n], N[hf + n])
        _hsift(N, X, oi, ox, i, n)


@inline
def _next_time(N, X, oi, ox):
    """Time of the next event, inf when none."""
    return X[ox[_X_HKEY]] if N[_HS] > 0 else math.inf


# -- the level heap of one water-filling: entries (level, resource), least first


@inline
def _lpush(N, X, lr, lk, n, k, r):
    i = n
    X[lk + i] = k
    N[lr + i] = r
    while i > 0:
        p = (i - 1) >> 1
        kp, ki = X[lk + p], X[lk + i]
        if kp < ki or (kp == ki and N[lr + p] <= N[lr + i]):
            break
        X[lk + p], X[lk + i] = ki, kp
        N[lr + p], N[lr + i] = N[lr + i], N[lr + p]
        i = p
    return n + 1


@inline
def _lpop(N, X, lr, lk, n):
    n -= 1
    if n > 0:
        X[lk] = X[lk + n]
        N[lr] = N[lr + n]
        i = 0
        while True:
            a = 2 * i + 1
            if a >= n:
                break
            c = a
            b = a + 1
            if b < n and (X[lk + b] < X[lk + a] or (X[lk + b] == X[lk + a]
                                                    and N[lr + b] < N[lr + a])):
                c = b
            if X[lk + i] < X[lk + c] or (X[lk + i] == X[lk + c] and N[lr + i] <= N[lr + c]):
                break
            X[lk + c], X[lk + i] = X[lk + i], X[lk + c]
            N[lr + c], N[lr + i] = N[lr + i], N[lr + c]
            i = c
    return n


# -- the model


@inline
def _link(N, oi, e, r):
    """Route entry ``e`` joins the end of resource ``r``'s flows."""
    prev, nxt, head, tail = oi[_I_EPREV], oi[_I_ENEXT], oi[_I_HEAD], oi[_I_TAIL]
    t = N[tail + r]
    N[prev + e] = t
    N[nxt + e] = -1
    if t >= 0:
        N[nxt + t] = e
    else:
        N[head + r] = e
    N[tail + r] = e


@inline
def _unlink(N, oi, e, r):
    prev, nxt, head, tail = oi[_I_EPREV], oi[_I_ENEXT], oi[_I_HEAD], oi[_I_TAIL]
    p = N[prev + e]
    n = N[nxt + e]
    if p >= 0:
        N[nxt + p] = n
    else:
        N[head + r] = n
    if n >= 0:
        N[prev + n] = p
    else:
        N[tail + r] = p


@lean
def _resolve(N, X, oi, ox, nchg, T):
    """Re-solve the component of the ``nchg`` changed resources (FlowEngine._resolve and
    maxmin.waterfill, in their order), then push the new finish times (FlowEngine._apply)."""
    e0, e1, cst, fst = oi[_I_E0], oi[_I_E1], oi[_I_CST], oi[_I_FST]
    comp, order, eres, eflow, enext = oi[_I_COMP], oi[_I_ORDER], oi[_I_ERES], oi[_I_EFLOW], \
        oi[_I_ENEXT]
    head, cnt, sst, tst, chg = oi[_I_HEAD], oi[_I_CNT], oi[_I_SST], oi[_I_TST], oi[_I_CHG]
    stack, cres, touched, lres = oi[_I_STACK], oi[_I_CRES], oi[_I_TOUCHED], oi[_I_LRES]
    w, rem, rate, last, nrate = ox[_X_W], ox[_X_REM], ox[_X_RATE], ox[_X_LAST], ox[_X_NRATE]
    coef, cap, lrem, lden, lkey = ox[_X_COEF], ox[_X_CAP], ox[_X_LREM], ox[_X_LDEN], \
        ox[_X_LKEY]
    stamp = N[_STAMP] + 1
    N[_STAMP] = stamp
    nr = 0
    sp = 0
    for k in range(nchg):
        r = N[chg + k]
        N[sst + r] = stamp
        N[cres + nr] = r
        nr += 1
        N[stack + sp] = r
        sp += 1
    nf = 0
    while sp > 0:
        sp -= 1
        r = N[stack + sp]
        e = N[head + r]
        while e >= 0:
            f = N[eflow + e]
            if N[cst + f] != stamp:
                N[cst + f] = stamp
                N[comp + nf] = f
                nf += 1
                for e2 in range(N[e0 + f], N[e1 + f]):
                    r2 = N[eres + e2]
                    if N[sst + r2] != stamp:
                        N[sst + r2] = stamp
                        N[cres + nr] = r2
                        nr += 1
                        N[stack + sp] = r2
                        sp += 1
            e = N[enext + e]
    if nf == 0:
        return
    # water-filling
    for k in range(nr):
        r = N[cres + k]
        X[lrem + r] = X[cap + r]
        X[lden + r] = 0.0
        N[cnt + r] = 0
    for k in range(nf):
        f = N[comp + k]
        iw = 1.0 / X[w + f]
        for e in range(N[e0 + f], N[e1 + f]):
            r = N[eres + e]
            X[lden + r] += X[coef + e] * iw
            N[cnt + r] += 1
    ls = 0
    for k in range(nr):
        r = N[cres + k]
        if N[cnt + r] > 0:
            ls = _lpush(N, X, lres, lkey, ls, X[lrem + r] / X[lden + r], r)
    nfix = 0
    while ls > 0:
        lvl = X[lkey]
        r = N[lres]
        ls = _lpop(N, X, lres, lkey, ls)
        if N[cnt + r] <= 0 or X[lrem + r] / X[lden + r] != lvl:
            continue  # filled already, or a stale level
        N[cnt + r] = 0
        nt = 0
        e = N[head + r]
        while e >= 0:
            f = N[eflow + e]
            e = N[enext + e]
            if N[fst + f] == stamp:
                continue
            N[fst + f] = stamp
            N[order + nfix] = f
            nfix += 1
            wf = X[w + f]
            x = lvl / wf
            X[nrate + f] = x
            iw = 1.0 / wf
            for e2 in range(N[e0 + f], N[e1 + f]):
                r2 = N[eres + e2]
                if N[cnt + r2] > 0:
                    a = X[coef + e2]
                    X[lrem + r2] -= a * x
                    X[lden + r2] -= a * iw
                    N[cnt + r2] -= 1
                    if N[tst + r2] != stamp:
                        N[tst + r2] = stamp
                        N[touched + nt] = r2
                        nt += 1
        for k in range(nt):
            r2 = N[touched + k]
            N[tst + r2] = 0
            if N[cnt + r2] > 0:
                d = X[lden + r2]
                if d <= 0.0:  # rounding left nothing in the denominator: recompute it
                    d = 0.0
                    e = N[head + r2]
                    while e >= 0:
                        f = N[eflow + e]
                        if N[fst + f] != stamp:
                            d += X[coef + e] / X[w + f]
                        e = N[enext + e]
                    X[lden + r2] = d
                rm = X[lrem + r2]
                ls = _lpush(N, X, lres, lkey, ls, (rm if rm > 0.0 else 0.0) / d, r2)
                if rm < 0.0:
                    X[lrem + r2] = 0.0
    # new rates: remaining sizes brought up to date, new finish times
    for k in range(nfix):
        f = N[order + k]
        x = X[nrate + f]
        old = X[rate + f]
        if x == old:
            continue
        rm = X[rem + f]
        if old > 0.0:
            rm -= old * (T - X[last + f])
            if rm < 0.0:
                rm = 0.0
            X[rem + f] = rm
        X[last + f] = T
        X[rate + f] = x
        _hpush(N, X, oi, ox, T + rm / x if x > 0.0 else math.inf, f)


@lean
def _step(N, X, oi, ox, nout):
    """Process the events at the next event time (FlowEngine._step); the output's new length."""
    out, state, e0, e1 = oi[_I_OUT], oi[_I_STATE], oi[_I_E0], oi[_I_E1]
    eres, chs, chg = oi[_I_ERES], oi[_I_CHS], oi[_I_CHG]
    hk, hflow = ox[_X_HKEY], oi[_I_HFLOW]
    outt, size, last, finish = ox[_X_OUTT], ox[_X_SIZE], ox[_X_LAST], ox[_X_FINISH]
    T = X[hk]
    lim = T + abs(T) * TIE
    stamp = N[_STAMP] + 1
    N[_STAMP] = stamp
    nchg = 0
    while N[_HS] > 0 and X[hk] <= lim:
        t = X[hk]
        f = N[hflow]
        _hremove(N, X, oi, ox, 0)
        if N[state + f] == _ACTIVE:  # a finish
            N[state + f] = _DONE
            X[finish + f] = t
            N[_NACTIVE] -= 1
            N[out + nout] = f
            X[outt + nout] = t
            nout += 1
            for e in range(N[e0 + f], N[e1 + f]):
                r = N[eres + e]
                _unlink(N, oi, e, r)
                if N[chs + r] != stamp:
                    N[chs + r] = stamp
                    N[chg + nchg] = r
                    nchg += 1
        else:  # an activation
            if N[e1 + f] == N[e0 + f] or X[size + f] == 0.0:
                N[state + f] = _DONE
                X[finish + f] = t
                N[out + nout] = f
                X[outt + nout] = t
                nout += 1
                continue
            N[state + f] = _ACTIVE
            N[_NACTIVE] += 1
            X[last + f] = t
            for e in range(N[e0 + f], N[e1 + f]):
                r = N[eres + e]
                _link(N, oi, e, r)
                if N[chs + r] != stamp:
                    N[chs + r] = stamp
                    N[chg + nchg] = r
                    nchg += 1
    if T > X[_NOW]:
        X[_NOW] = T
    N[_EVENTS] += 1
    if nchg > 0:
        _resolve(N, X, oi, ox, nchg, T)
    return nout


@lean
def _advance_to(N, X, oi, ox, until):
    nout = 0
    while True:
        t = _next_time(N, X, oi, ox)
        if t > until or t == math.inf:
            break
        nout = _step(N, X, oi, ox, nout)
    if until > X[_NOW] and until < math.inf:
        X[_NOW] = until
    X[_NEXT] = t
    return nout


@lean
def _advance(N, X, until):
    """Every event at times <= ``until`` (FlowEngine.advance): the number of flows finished
    (ids and times at the start of the arenas) and the next event time."""
    oi, ox = _offsets(N)
    nout = _advance_to(N, X, oi, ox, until)
    return nout, X[_NEXT]


@lean
def _route(N, X, res, coef, lat, wt):
    """Register a route (entries ``res``, coefficients ``coef``, latency, weight): its id."""
    oi, ox = _offsets(N)
    k = N[_NROUTES]
    e = N[_NRENT]
    n = res.shape[0]
    for j in range(n):
        N[oi[_I_RRES] + e + j] = res[j]
        X[ox[_X_RCOEF] + e + j] = coef[j]
    N[oi[_I_R0] + k] = e
    N[oi[_I_R1] + k] = e + n
    X[ox[_X_RLAT] + k] = lat
    X[ox[_X_RW] + k] = wt
    N[_NROUTES] = k + 1
    N[_NRENT] = e + n
    return k


@lean
def _add_flow(N, X, oi, ox, rid, size, t):
    """A flow of ``size`` on route ``rid`` requested at ``t`` (FlowEngine.add after its
    checks; the arenas have room)."""
    f = N[_NFLOWS]
    N[_NFLOWS] = f + 1
    ne = N[_NENT]
    a, b = N[oi[_I_R0] + rid], N[oi[_I_R1] + rid]
    eres, eflow, ecoef, rres, rcoef = oi[_I_ERES], oi[_I_EFLOW], ox[_X_COEF], oi[_I_RRES], \
        ox[_X_RCOEF]
    for j in range(b - a):
        N[eres + ne + j] = N[rres + a + j]
        N[eflow + ne + j] = f
        X[ecoef + ne + j] = X[rcoef + a + j]
    N[oi[_I_E0] + f] = ne
    N[oi[_I_E1] + f] = ne + b - a
    N[_NENT] = ne + b - a
    N[oi[_I_STATE] + f] = _LATENCY
    N[oi[_I_HPOS] + f] = -1
    X[ox[_X_SIZE] + f] = size
    X[ox[_X_W] + f] = X[ox[_X_RW] + rid]
    X[ox[_X_REM] + f] = size
    X[ox[_X_RATE] + f] = 0.0
    X[ox[_X_LAST] + f] = t
    X[ox[_X_FINISH] + f] = math.nan
    ta = t + X[ox[_X_RLAT] + rid]
    _hpush(N, X, oi, ox, ta, f)
    if ta < X[_NEXT]:
        X[_NEXT] = ta


@lean
def _room(N, X, oi, flows, entries):
    """Whether the arenas hold ``flows`` more flows with ``entries`` more entries (heaps
    included: the event heap has room for two entries per flow)."""
    return N[_NFLOWS] + flows <= N[_NF] and N[_NENT] + entries <= N[_NE]


@lean
def _add(N, X, rid, size, t):
    """:func:`_add_flow` from Python, the start ``t`` first brought to the engine's time if it
    is at most ``1e-12`` (relative) before it (FlowEngine.add). The next event time; nan if
    the arenas lack room (nothing done: grow them and call again); -inf if ``t`` is before
    the engine's time."""
    oi, ox = _offsets(N)
    if not _room(N, X, oi, 1, N[oi[_I_R1] + rid] - N[oi[_I_R0] + rid]):
        return math.nan
    now = X[_NOW]
    if t < now:
        if now - t > 1e-12 * max(1.0, abs(now)):
            return -math.inf
        t = now
    _add_flow(N, X, oi, ox, rid, size, t)
    return X[_NEXT]


@lean
def _exchange(N, X, until, rid1, rid2, size):
    """:func:`_advance` to ``until``, then (unless ``rid1 < 0``) a flow each way of ``size``
    starting then, on routes ``rid1`` and ``rid2``; the engine's flows all come in such
    pairs, exchange ``k`` being flows ``2 k`` and ``2 k + 1``. The exchanges complete by
    ``until`` (both flows arrived), in the order their second flow arrived: ``k >= 0`` when
    that is exchange ``k`` alone, :data:`NO_EXCHANGE` when none, ``-n - 2`` when ``n >= 2``
    (written at the start of the integer arena), :data:`NO_ROOM` if the arenas lack room
    for the new one (nothing done: grow them and call again)."""
    oi, ox = _offsets(N)
    if rid1 >= 0 and not _room(N, X, oi, 2, N[oi[_I_R1] + rid1] - N[oi[_I_R0] + rid1]
                               + N[oi[_I_R1] + rid2] - N[oi[_I_R0] + rid2]):
        return NO_ROOM
    nout = 0
    if X[_NEXT] <= until:
        nout = _advance_to(N, X, oi, ox, until)
    elif until > X[_NOW]:
        X[_NOW] = until
    if nout > 0:
        out, state, cst = oi[_I_OUT], oi[_I_STATE], oi[_I_CST]
        stamp = N[_STAMP] + 1
        N[_STAMP] = stamp
        for k in range(nout):  # finished in this call (cst is free: done flows join no component)
            N[cst + N[out + k]] = stamp
        m = 0
        for k in range(nout):
            f = N[out + k]
            N[cst + f] = 0
            p = f ^ 1
            if N[state + p] == _DONE and N[cst + p] != stamp:  # the other arrived before
                N[out + m] = f >> 1
                m += 1
        nout = m
    if rid1 >= 0:
        _add_flow(N, X, oi, ox, rid1, size, until)
        _add_flow(N, X, oi, ox, rid2, size, until)
    if nout == 0:
        return NO_EXCHANGE
    if nout == 1:
        return N[oi[_I_OUT]]
    return -nout - 2


@lean
def _cancel(N, X, f):
    """Withdraw flow ``f`` now (FlowEngine.cancel): the next event time."""
    oi, ox = _offsets(N)
    state = oi[_I_STATE]
    st = N[state + f]
    if st == _LATENCY or st == _ACTIVE:
        i = N[oi[_I_HPOS] + f]
        if i >= 0:
            _hremove(N, X, oi, ox, i)
    if st == _LATENCY:
        N[state + f] = _CANCELLED
    elif st == _ACTIVE:
        N[state + f] = _CANCELLED
        N[_NACTIVE] -= 1
        stamp = N[_STAMP] + 1
        N[_STAMP] = stamp
        eres, chs, chg = oi[_I_ERES], oi[_I_CHS], oi[_I_CHG]
        nchg = 0
        for e in range(N[oi[_I_E0] + f], N[oi[_I_E1] + f]):
            r = N[eres + e]
            _unlink(N, oi, e, r)
            if N[chs + r] != stamp:
                N[chs + r] = stamp
                N[chg + nchg] = r
                nchg += 1
        _resolve(N, X, oi, ox, nchg, X[_NOW])
    t = _next_time(N, X, oi, ox)
    X[_NEXT] = t
    return t


@jit
def _rates(N, X):
    """The moving flows and their rates."""
    oi, ox = _offsets(N)
    nf = N[_NFLOWS]
    state = N[oi[_I_STATE]:oi[_I_STATE] + nf]
    moving = np.nonzero(state == _ACTIVE)[0]
    return moving, X[ox[_X_RATE]:ox[_X_RATE] + nf][moving]


@jit
def _export(N, X):
    """Copies of the per-flow state, route entries (first, last), the entries' resources,
    the sizes, finish times and the entries' coefficients (for results)."""
    oi, ox = _offsets(N)
    nf, ne = N[_NFLOWS], N[_NENT]
    return (N[oi[_I_STATE]:oi[_I_STATE] + nf].copy(), N[oi[_I_E0]:oi[_I_E0] + nf].copy(),
            N[oi[_I_E1]:oi[_I_E1] + nf].copy(), N[oi[_I_ERES]:oi[_I_ERES] + ne].copy(),
            X[ox[_X_SIZE]:ox[_X_SIZE] + nf].copy(), X[ox[_X_FINISH]:ox[_X_FINISH] + nf].copy(),
            X[ox[_X_COEF]:ox[_X_COEF] + ne].copy())


@jit
def run_flows(cap, ptr, res, coef, weight, size, start, lat):
    """Finish times of a batch of flows (arrays in, arrays out), as FlowEngine would give them.

    Parameters
    ----------
    cap : float64[R]
        Resource capacities.
    ptr : int64[n+1]
        Flow ``f``'s route entries are ``ptr[f]:ptr[f+1]``.
    res, coef : int64[nnz], float64[nnz]
        Resource and coefficient of each route entry.
    weight, size, start, lat : float64[n]
        Weight, size, start and route latency of each flow.

    Returns
    -------
    (finish, events)
        float64[n] finish times and the number of event times processed.
    """
    n = size.shape[0]
    N, X = _new(cap, max(n, 1), max(res.shape[0], 1), max(n, 1), max(res.shape[0], 1))
    t0 = math.inf
    for f in range(n):
        if start[f] < t0:
            t0 = start[f]
    X[_NOW] = t0 if n > 0 else 0.0
    for f in range(n):  # each flow its own route
        _route(N, X, res[ptr[f]:ptr[f + 1]], coef[ptr[f]:ptr[f + 1]], lat[f], weight[f])
    oi, ox = _offsets(N)
    for f in range(n):
        _add_flow(N, X, oi, ox, f, size[f], start[f])
    _advance_to(N, X, oi, ox, math.inf)
    return X[ox[_X_FINISH]:ox[_X_FINISH] + n].copy(), N[_EVENTS]


_NONE: tuple[int, ...] = ()  # no exchange complete


class CompiledFlowEngine:
    """:class:`sim.network.flows.FlowEngine` (incremental) in compiled code, the same numbers.

    Parameters
    ----------
    network : Network
    weighting : {"maxmin", "rtt"}
    flows : int
        Flows to make room for at first (the arenas double as needed).
    routes : int
        Routes (ordered pairs of endpoints) to make room for at first, four
        resources each (the arenas double as needed).

    """

    def __init__(self, network: Any, *, weighting: str = "maxmin", flows: int = 1024,
                 routes: int = 16) -> None:
        from .flows import WEIGHTINGS

        self.network = network
        self.weighting = check_choice("weighting", weighting, WEIGHTINGS)
        self.incremental = True
        self._rtt = self.weighting == "rtt"
        nf, nr = max(int(flows), 1), max(int(routes), 16)
        # the arenas (N, X), in a list that growing them updates in place, so that a bound
        # exchange (exchanger) follows them
        self._arena = list(_new(np.asarray(network.capacity, dtype=np.float64), nf, 4 * nf,
                                nr, 4 * nr))
        self._next = math.inf
        self._routes: dict[Any, tuple] = {}  # (src, dst) -> (route id or None, entries, Route)
        self._sized: dict[tuple, int] = {}  # (src, dst, size) -> route id, for curve routes
        self._pairs: dict[tuple, dict] = {}  # (a, size) -> {b: (id a -> b, id b -> a)}

    # -- state ---------------------------------------------------------------------
    @property
    def N(self) -> np.ndarray:
        """The integer arena."""
        return self._arena[0]

    @property
    def X(self) -> np.ndarray:
        """The float arena."""
        return self._arena[1]

    @property
    def now(self) -> float:
        """The engine's time (the last event processed, or the last ``advance`` bound)."""
        return float(self.X[_NOW])

    @now.setter
    def now(self, t: float) -> None:
        self.X[_NOW] = float(t)

    @property
    def n(self) -> int:
        """Flows added."""
        return int(self.N[_NFLOWS])

    @property
    def events(self) -> int:
        """Event times processed."""
        return int(self.N[_EVENTS])

    @property
    def active(self) -> int:
        """Flows moving now."""
        return int(self.N[_NACTIVE])

    @property
    def finish(self) -> np.ndarray:
        """Finish time of every flow added (nan while not finished)."""
        return _export(self.N, self.X)[5]

    def next_time(self) -> float:
        """Time of the next start or finish (inf when nothing is pending)."""
        return self._next

    # -- routes and room -------------------------------------------------------------
    def _route_id(self, src: Any, dst: Any, size: float) -> int:
        """The registered route of a flow ``src -> dst`` of ``size``."""
        x = self._routes.get((src, dst))
        if x is None:
            rt = self.network.route(src, dst)
            curve = self.network.curve
            curved = any(curve[r] is not None for r in rt.resources)
            x = self._routes[(src, dst)] = (None if curved else self._register(rt, 1.0), rt)
        if x[0] is not None:
            return x[0]
        key = (src, dst, size)  # a curve's coefficient 1 / c(size) depends on the size
        rid = self._sized.get(key)
        if rid is None:
            rid = self._sized[key] = self._register(x[1], size)
        return rid

    def _register(self, rt: Any, size: float) -> int:
        curve = self.network.curve
        coef = np.array([1.0 if curve[r] is None or size == 0 else 1.0 / curve[r](size)
                         for r in rt.resources], dtype=np.float64)
        w = rt.latency if self._rtt and rt.latency > 0 else 1.0
        N = self.N
        if N[_NROUTES] == N[_RT] or N[_NRENT] + len(coef) > N[_RE]:
            self._grow(routes=1, route_entries=len(coef))
        return _route(self.N, self.X, np.asarray(rt.resources, dtype=np.int64), coef,
                      rt.latency, w)

    def _grow(self, flows: int = 0, entries: int = 0, routes: int = 0,
              route_entries: int = 0) -> None:
        """Larger arenas, for this many more flows, entries, routes and route entries (each
        capacity that falls short at least doubled)."""
        N = self.N
        new = []
        for c, u, w in zip((_NF, _NE, _RT, _RE), (_NFLOWS, _NENT, _NROUTES, _NRENT),
                           (flows, entries, routes, route_entries), strict=True):
            cap, need = int(N[c]), int(N[u]) + w
            new.append(cap if need <= cap else max(2 * cap, need))
        self._arena[:] = _grow(self.N, self.X, *new)

    # -- flows -----------------------------------------------------------------------
    def add(self, src: Any, dst: Any, size: float, start: float | None = None) -> int:
        """Request a flow; its index (as :meth:`sim.network.flows.FlowEngine.add`)."""
        if size.__class__ is not float or not 0.0 <= size < math.inf:
            from ..errors import check_nonnegative

            size = check_nonnegative("size", size)
        t = self.now if start is None else start if start.__class__ is float else float(start)
        if not math.isfinite(t):
            from .flows import _check_flow

            _check_flow(self.now, size, t)  # raises, naming the start
        x = self._routes.get((src, dst))
        rid = x[0] if x is not None and x[0] is not None else self._route_id(src, dst, size)
        N, X = self._arena
        nxt = _add(N, X, rid, size, t)
        if nxt != nxt:  # no room
            self._grow(flows=1, entries=len(self._entries(rid)))
            N, X = self._arena
            nxt = _add(N, X, rid, size, t)
        if nxt == -math.inf:
            from .flows import _check_flow

            _check_flow(self.now, size, t)  # raises: the start is before the engine's time
        self._next = nxt
        return N.item(_NFLOWS) - 1

    def add_checked(self, src: Any, dst: Any, size: float, t: float) -> int:
        """:meth:`add` (the checks are cheap here)."""
        return self.add(src, dst, size, t)

    def _entries(self, rid: int) -> range:
        oi = _offsets(self.N)[0]
        return range(int(self.N[oi[_I_R0] + rid]), int(self.N[oi[_I_R1] + rid]))

    def exchange(self, a: Any, b: Any, size: float, t: float) -> Sequence[int]:
        """:meth:`advance` to ``t``, then a flow of ``size`` each way between ``a`` and ``b``
        from ``t`` (``size`` a float >= 0, ``t`` >= now), for an engine whose flows all come
        so, in pairs (see :meth:`sim.network.flows.FlowEngine.exchange`): the exchanges
        complete by ``t`` (the ``k``-th asked is ``k``), in the order they completed."""
        return self.exchanger(size, a)(b, t)

    def exchanger(self, size: float, a: Any) -> Callable[[Any, float], Sequence[int]]:
        """:meth:`exchange` from ``a`` with ``size`` bound: ``f(b, t)``, for a hot loop."""
        size = float(size)
        pairs = self._pairs.setdefault((a, size), {})
        arena, route_id, run, grow, entries = (self._arena, self._route_id, _exchange,
                                               self._grow, self._entries)

        def exchange(b: Any, t: float) -> Sequence[int]:
            x = pairs.get(b)
            if x is None:
                x = pairs[b] = (route_id(a, b, size), route_id(b, a, size))
            N, X = arena
            k = run(N, X, t, x[0], x[1], size)
            if k == NO_EXCHANGE:
                return _NONE
            if k >= 0:
                return (k,)
            if k == NO_ROOM:
                grow(flows=2, entries=len(entries(x[0])) + len(entries(x[1])))
                return exchange(b, t)
            return N[_IHDR:_IHDR - k - 2].tolist()

        return exchange

    def exchanges_done(self, until: float) -> Sequence[int]:
        """:meth:`advance` to ``until`` on an engine of exchanges: those complete by then
        (as :meth:`exchange` reports them)."""
        k = _exchange(self.N, self.X, until, -1, -1, 0.0)
        if k == NO_EXCHANGE:
            return _NONE
        return (k,) if k >= 0 else self.N[_IHDR:_IHDR - k - 2].tolist()

    def cancel(self, f: int) -> None:
        """Withdraw flow ``f`` now (its share goes back to the others)."""
        self._next = _cancel(self.N, self.X, f)

    def moved(self, f: int, t: float) -> float:
        """What flow ``f`` has moved by time ``t`` (as :meth:`FlowEngine.moved`)."""
        N, X = self.N, self.X
        oi, ox = _offsets(N)
        st = N[oi[_I_STATE] + f]
        size = float(X[ox[_X_SIZE] + f])
        if st == _DONE:
            return size
        if st != _ACTIVE:
            return 0.0
        rem = X[ox[_X_REM] + f] - X[ox[_X_RATE] + f] * (t - X[ox[_X_LAST] + f])
        return size - max(0.0, float(rem))

    def rates(self) -> dict[int, float]:
        """The rate of every flow moving now (its share after the last event)."""
        f, x = _rates(self.N, self.X)
        return dict(zip(f.tolist(), x.tolist(), strict=True))

    def advance_times(self, until: float) -> tuple[list[int], list[float]]:
        """Every start and finish at times ``<= until``: the flows finished and their times."""
        n, self._next = _advance(self.N, self.X, until)
        if n == 0:
            return [], []
        return (self.N[_IHDR:_IHDR + n].tolist(), self.X[_XHDR:_XHDR + n].tolist())

    def advance(self, until: float) -> list[int]:
        """Process every start and finish at times ``<= until``; the flows finished, in order."""
        return self.advance_times(until)[0]

    def run(self) -> list[int]:
        """Process every pending event; the flows finished, in order."""
        return self.advance(math.inf)

    # -- results -------------------------------------------------------------------
    def utilisation(self, span: float) -> list[dict[str, Any]]:
        """Per resource: bytes carried and mean utilisation (as FlowEngine.utilisation)."""
        from .flows import link_utilisation

        state, e0, e1, eres, size, _, coef = _export(self.N, self.X)
        done = state == _DONE
        ranges = list(zip(e0[done].tolist(), e1[done].tolist(), strict=True))
        return link_utilisation(self.network, size[done].tolist(),
                                [eres[a:b].tolist() for a, b in ranges],
                                [coef[a:b].tolist() for a, b in ranges], span)
