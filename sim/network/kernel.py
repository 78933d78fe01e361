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
the layout in :func:`_views`): a call from Python into the compiled code then
passes two arrays, whatever the engine holds, which keeps a call at a few
hundred nanoseconds (each array argument costs numba about 70 ns to unbox).
Both grow (doubling) when flows are added past their capacity.

Without numba :class:`sim.network.flows.FlowEngine` runs instead (this
module's functions would run, slowly, as plain Python; the default test suite
checks their logic that way, ``tests/test_network_kernel.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import check, check_choice
from ..xoshiro import HAVE_NUMBA, jit

__all__ = ["HAVE_NUMBA", "CompiledFlowEngine", "run_flows"]

#: Completions within this relative distance of an event are taken with it (as FlowEngine).
TIE = 1e-12

_LATENCY, _ACTIVE, _DONE, _CANCELLED = 0, 1, 2, 3
_ACT, _FIN = 0, 1

# the integer arena's header: capacities (flows, route entries, resources, event heap,
# level heap), then counters
_NF, _NE, _R, _H, _L, _NFLOWS, _NENT, _HS, _SEQ, _EVENTS, _NACTIVE, _STAMP = range(12)
_IHDR = 16
# the float arena's header
_NOW, _NEXT = 0, 1
_XHDR = 4


@jit
def _sizes(NF, NE, R, H, L):
    """Lengths of the integer and float arenas for these capacities."""
    return _IHDR + 9 * NF + 4 * NE + 10 * R + 4 * H + L, _XHDR + 8 * NF + NE + 3 * R + H + L


@jit
def _views(N, X):
    """The arenas' sections as views: per flow, per route entry, per resource, the heaps.

    The finished-flow output (flow ids, then their finish times) comes first in
    each arena, at fixed offsets, so that Python reads it without the layout.
    """
    NF, NE, R, H, L = N[_NF], N[_NE], N[_R], N[_H], N[_L]
    o = _IHDR
    out = N[o:o + NF]
    o += NF
    state = N[o:o + NF]
    o += NF
    ver = N[o:o + NF]
    o += NF
    e0 = N[o:o + NF]
    o += NF
    e1 = N[o:o + NF]
    o += NF
    cst = N[o:o + NF]  # the stamp of the last component that took the flow
    o += NF
    fst = N[o:o + NF]  # the stamp of the last water-filling that fixed its rate
    o += NF
    comp = N[o:o + NF]  # the component's flows in order of discovery
    o += NF
    order = N[o:o + NF]  # ... in order of fixing
    o += NF
    eres = N[o:o + NE]
    o += NE
    eflow = N[o:o + NE]
    o += NE
    eprev = N[o:o + NE]
    o += NE
    enext = N[o:o + NE]
    o += NE
    head = N[o:o + R]
    o += R
    tail = N[o:o + R]
    o += R
    cnt = N[o:o + R]
    o += R
    sst = N[o:o + R]  # seen by the current component
    o += R
    tst = N[o:o + R]  # touched in the current round of filling
    o += R
    chs = N[o:o + R]  # changed by the current event
    o += R
    chg = N[o:o + R]
    o += R
    stack = N[o:o + R]
    o += R
    cres = N[o:o + R]
    o += R
    touched = N[o:o + R]
    o += R
    hseq = N[o:o + H]
    o += H
    hkind = N[o:o + H]
    o += H
    hflow = N[o:o + H]
    o += H
    hver = N[o:o + H]
    o += H
    lres = N[o:o + L]
    p = _XHDR
    outt = X[p:p + NF]
    p += NF
    size = X[p:p + NF]
    p += NF
    w = X[p:p + NF]
    p += NF
    rem = X[p:p + NF]
    p += NF
    rate = X[p:p + NF]
    p += NF
    last = X[p:p + NF]
    p += NF
    finish = X[p:p + NF]
    p += NF
    nrate = X[p:p + NF]
    p += NF
    coef = X[p:p + NE]
    p += NE
    cap = X[p:p + R]
    p += R
    lrem = X[p:p + R]
    p += R
    lden = X[p:p + R]
    p += R
    hkey = X[p:p + H]
    p += H
    lkey = X[p:p + L]
    return ((out, state, ver, e0, e1, cst, fst, comp, order, eres, eflow, eprev, enext, head,
             tail, cnt, sst, tst, chs, chg, stack, cres, touched, hseq, hkind, hflow, hver, lres),
            (outt, size, w, rem, rate, last, finish, nrate, coef, cap, lrem, lden, hkey, lkey))


@jit
def _new(cap, NF, NE):
    """Empty arenas for ``NF`` flows and ``NE`` route entries on resources of capacity ``cap``."""
    R = cap.shape[0]
    H = 2 * NF + 16
    L = R + NE + 16
    ni, nx = _sizes(NF, NE, R, H, L)
    N = np.zeros(ni, np.int64)
    X = np.zeros(nx, np.float64)
    N[_NF], N[_NE], N[_R], N[_H], N[_L] = NF, NE, R, H, L
    X[_NOW] = 0.0
    X[_NEXT] = math.inf
    V, W = _views(N, X)
    V[13][:] = -1  # head
    V[14][:] = -1  # tail
    W[9][:] = cap
    return N, X


@jit
def _grow(N, X, NF, NE):
    """The arenas copied into larger ones (``NF`` flows, ``NE`` entries); the heaps keep
    their entries (compacted: the stale ones dropped, which changes no pop order)."""
    V, W = _views(N, X)
    cap = W[9]
    N2, X2 = _new(cap.copy(), NF, NE)
    V2, W2 = _views(N2, X2)
    for k in range(_IHDR):
        if k > _L:
            N2[k] = N[k]
    for k in range(_XHDR):
        X2[k] = X[k]
    nf, ne, R = N[_NFLOWS], N[_NENT], N[_R]
    for a in range(1, 9):  # per flow (not the output)
        V2[a][:nf] = V[a][:nf]
    for a in range(9, 13):  # per entry
        V2[a][:ne] = V[a][:ne]
    for a in range(13, 23):  # per resource
        V2[a][:R] = V[a][:R]
    for a in range(1, 8):
        W2[a][:nf] = W[a][:nf]
    W2[8][:ne] = W[8][:ne]
    for a in range(9, 12):
        W2[a][:R] = W[a][:R]
    # the event heap: live entries only, then heapified
    state, ver = V[1], V[2]
    hs = 0
    for k in range(N[_HS]):
        f = V[25][k]
        if (V[24][k] == _FIN and (V[26][k] != ver[f] or state[f] != _ACTIVE)) or (
                V[24][k] == _ACT and state[f] != _LATENCY):
            continue
        W2[12][hs] = W[12][k]
        V2[23][hs] = V[23][k]
        V2[24][hs] = V[24][k]
        V2[25][hs] = V[25][k]
        V2[26][hs] = V[26][k]
        hs += 1
    N2[_HS] = hs
    for k in range(hs // 2 - 1, -1, -1):
        _hdown(W2[12], V2[23], V2[24], V2[25], V2[26], k, hs)
    return N2, X2


# -- the event heap: entries (time, sequence, kind, flow, version), least (time, sequence) first


@jit
def _hswap(hkey, hseq, hkind, hflow, hver, a, b):
    hkey[a], hkey[b] = hkey[b], hkey[a]
    hseq[a], hseq[b] = hseq[b], hseq[a]
    hkind[a], hkind[b] = hkind[b], hkind[a]
    hflow[a], hflow[b] = hflow[b], hflow[a]
    hver[a], hver[b] = hver[b], hver[a]


@jit
def _hdown(hkey, hseq, hkind, hflow, hver, i, size):
    while True:
        a = 2 * i + 1
        if a >= size:
            return
        c = a
        b = a + 1
        if b < size and (hkey[b] < hkey[a] or (hkey[b] == hkey[a] and hseq[b] < hseq[a])):
            c = b
        if hkey[i] < hkey[c] or (hkey[i] == hkey[c] and hseq[i] < hseq[c]):
            return
        _hswap(hkey, hseq, hkind, hflow, hver, i, c)
        i = c


@jit
def _hpush(N, hkey, hseq, hkind, hflow, hver, t, kind, f, v):
    """Push an entry with the next sequence number (the heap has room: see _compact)."""
    s = N[_SEQ] + 1
    N[_SEQ] = s
    i = N[_HS]
    N[_HS] = i + 1
    hkey[i] = t
    hseq[i] = s
    hkind[i] = kind
    hflow[i] = f
    hver[i] = v
    while i > 0:
        p = (i - 1) >> 1
        if hkey[p] < hkey[i] or (hkey[p] == hkey[i] and hseq[p] < hseq[i]):
            return
        _hswap(hkey, hseq, hkind, hflow, hver, p, i)
        i = p


@jit
def _hpop(N, hkey, hseq, hkind, hflow, hver):
    """Drop the top entry (read by the caller)."""
    n = N[_HS] - 1
    N[_HS] = n
    if n > 0:
        hkey[0] = hkey[n]
        hseq[0] = hseq[n]
        hkind[0] = hkind[n]
        hflow[0] = hflow[n]
        hver[0] = hver[n]
        _hdown(hkey, hseq, hkind, hflow, hver, 0, n)


@jit
def _compact(N, V, W):
    """Drop the stale entries of a full event heap (at most one live entry per flow, and the
    heap holds two per flow of capacity: afterwards there is room for any re-solve)."""
    state, ver = V[1], V[2]
    hseq, hkind, hflow, hver, hkey = V[23], V[24], V[25], V[26], W[12]
    n = 0
    for k in range(N[_HS]):
        f = hflow[k]
        if (hkind[k] == _FIN and (hver[k] != ver[f] or state[f] != _ACTIVE)) or (
                hkind[k] == _ACT and state[f] != _LATENCY):
            continue
        hkey[n] = hkey[k]
        hseq[n] = hseq[k]
        hkind[n] = hkind[k]
        hflow[n] = hflow[k]
        hver[n] = hver[k]
        n += 1
    N[_HS] = n
    for k in range(n // 2 - 1, -1, -1):
        _hdown(hkey, hseq, hkind, hflow, hver, k, n)


@jit
def _next_time(N, V, W):
    """Time of the next live entry (stale tops dropped), inf when none."""
    state, ver = V[1], V[2]
    hseq, hkind, hflow, hver, hkey = V[23], V[24], V[25], V[26], W[12]
    while N[_HS] > 0:
        f = hflow[0]
        if (hkind[0] == _FIN and (hver[0] != ver[f] or state[f] != _ACTIVE)) or (
                hkind[0] == _ACT and state[f] != _LATENCY):
            _hpop(N, hkey, hseq, hkind, hflow, hver)
            continue
        return hkey[0]
    return math.inf


# -- the level heap of one water-filling: entries (level, resource), least first


@jit
def _lpush(lkey, lres, n, k, r):
    i = n
    lkey[i] = k
    lres[i] = r
    while i > 0:
        p = (i - 1) >> 1
        if lkey[p] < lkey[i] or (lkey[p] == lkey[i] and lres[p] <= lres[i]):
            break
        lkey[p], lkey[i] = lkey[i], lkey[p]
        lres[p], lres[i] = lres[i], lres[p]
        i = p
    return n + 1


@jit
def _lpop(lkey, lres, n):
    n -= 1
    if n > 0:
        lkey[0] = lkey[n]
        lres[0] = lres[n]
        i = 0
        while True:
            a = 2 * i + 1
            if a >= n:
                break
            c = a
            b = a + 1
            if b < n and (lkey[b] < lkey[a] or (lkey[b] == lkey[a] and lres[b] < lres[a])):
                c = b
            if lkey[i] < lkey[c] or (lkey[i] == lkey[c] and lres[i] <= lres[c]):
                break
            lkey[c], lkey[i] = lkey[i], lkey[c]
            lres[c], lres[i] = lres[i], lres[c]
            i = c
    return n


# -- the model


@jit
def _link(V, e, r):
    """Route entry ``e`` joins the end of resource ``r``'s flows."""
    eprev, enext, head, tail = V[11], V[12], V[13], V[14]
    t = tail[r]
    eprev[e] = t
    enext[e] = -1
    if t >= 0:
        enext[t] = e
    else:
        head[r] = e
    tail[r] = e


@jit
def _unlink(V, e, r):
    eprev, enext, head, tail = V[11], V[12], V[13], V[14]
    p = eprev[e]
    n = enext[e]
    if p >= 0:
        enext[p] = n
    else:
        head[r] = n
    if n >= 0:
        eprev[n] = p
    else:
        tail[r] = p


@jit
def _resolve(N, V, W, nchg, T):
    """Re-solve the component of the ``nchg`` changed resources (FlowEngine._resolve and
    maxmin.waterfill, in their order), then push the new finish times (FlowEngine._apply)."""
    (_, state, ver, e0, e1, cst, fst, comp, order, eres, eflow, _, enext, head, _, cnt, sst,
     tst, _, chg, stack, cres, touched, hseq, hkind, hflow, hver, lres) = V
    (_, _, w, rem, rate, last, _, nrate, coef, cap, lrem, lden, hkey, lkey) = W
    stamp = N[_STAMP] + 1
    N[_STAMP] = stamp
    nr = 0
    sp = 0
    for k in range(nchg):
        r = chg[k]
        sst[r] = stamp
        cres[nr] = r
        nr += 1
        stack[sp] = r
        sp += 1
    nf = 0
    while sp > 0:
        sp -= 1
        r = stack[sp]
        e = head[r]
        while e >= 0:
            f = eflow[e]
            if cst[f] != stamp:
                cst[f] = stamp
                comp[nf] = f
                nf += 1
                for e2 in range(e0[f], e1[f]):
                    r2 = eres[e2]
                    if sst[r2] != stamp:
                        sst[r2] = stamp
                        cres[nr] = r2
                        nr += 1
                        stack[sp] = r2
                        sp += 1
            e = enext[e]
    if nf == 0:
        return
    # water-filling
    for k in range(nr):
        r = cres[k]
        lrem[r] = cap[r]
        lden[r] = 0.0
        cnt[r] = 0
    for k in range(nf):
        f = comp[k]
        iw = 1.0 / w[f]
        for e in range(e0[f], e1[f]):
            r = eres[e]
            lden[r] += coef[e] * iw
            cnt[r] += 1
    ls = 0
    for k in range(nr):
        r = cres[k]
        if cnt[r] > 0:
            ls = _lpush(lkey, lres, ls, lrem[r] / lden[r], r)
    nfix = 0
    while ls > 0:
        lvl = lkey[0]
        r = lres[0]
        ls = _lpop(lkey, lres, ls)
        if cnt[r] <= 0 or lrem[r] / lden[r] != lvl:
            continue  # filled already, or a stale level
        cnt[r] = 0
        nt = 0
        e = head[r]
        while e >= 0:
            f = eflow[e]
            e = enext[e]
            if fst[f] == stamp:
                continue
            fst[f] = stamp
            order[nfix] = f
            nfix += 1
            wf = w[f]
            x = lvl / wf
            nrate[f] = x
            iw = 1.0 / wf
            for e2 in range(e0[f], e1[f]):
                r2 = eres[e2]
                if cnt[r2] > 0:
                    a = coef[e2]
                    lrem[r2] -= a * x
                    lden[r2] -= a * iw
                    cnt[r2] -= 1
                    if tst[r2] != stamp:
                        tst[r2] = stamp
                        touched[nt] = r2
                        nt += 1
        for k in range(nt):
            r2 = touched[k]
            tst[r2] = 0
            if cnt[r2] > 0:
                d = lden[r2]
                if d <= 0.0:  # rounding left nothing in the denominator: recompute it
                    d = 0.0
                    e = head[r2]
                    while e >= 0:
                        f = eflow[e]
                        if fst[f] != stamp:
                            d += coef[e] / w[f]
                        e = enext[e]
                    lden[r2] = d
                rm = lrem[r2]
                ls = _lpush(lkey, lres, ls, (rm if rm > 0.0 else 0.0) / d, r2)
                if rm < 0.0:
                    lrem[r2] = 0.0
    # new rates: remaining sizes brought up to date, new finish times
    for k in range(nfix):
        f = order[k]
        x = nrate[f]
        old = rate[f]
        if x == old:
            continue
        rm = rem[f]
        if old > 0.0:
            rm -= old * (T - last[f])
            if rm < 0.0:
                rm = 0.0
            rem[f] = rm
        last[f] = T
        rate[f] = x
        v = ver[f] + 1
        ver[f] = v
        if N[_HS] == N[_H]:
            _compact(N, V, W)
        _hpush(N, hkey, hseq, hkind, hflow, hver, T + rm / x if x > 0.0 else math.inf,
               _FIN, f, v)


@jit
def _step(N, X, V, W, nout):
    """Process the events at the next event time (FlowEngine._step); the output's new length."""
    (out, state, ver, e0, e1, _, _, _, _, eres, _, _, _, _, _, _, _, _, chs, chg, _, _, _,
     hseq, hkind, hflow, hver, _) = V
    (outt, size, _, _, _, last, finish, _, _, _, _, _, hkey, _) = W
    T = hkey[0]
    lim = T + abs(T) * TIE
    stamp = N[_STAMP] + 1
    N[_STAMP] = stamp
    nchg = 0
    while N[_HS] > 0 and hkey[0] <= lim:
        t = hkey[0]
        kind = hkind[0]
        f = hflow[0]
        v = hver[0]
        _hpop(N, hkey, hseq, hkind, hflow, hver)
        if kind == _FIN:
            if v != ver[f] or state[f] != _ACTIVE:
                continue
            state[f] = _DONE
            finish[f] = t
            N[_NACTIVE] -= 1
            out[nout] = f
            outt[nout] = t
            nout += 1
            for e in range(e0[f], e1[f]):
                r = eres[e]
                _unlink(V, e, r)
                if chs[r] != stamp:
                    chs[r] = stamp
                    chg[nchg] = r
                    nchg += 1
        else:
            if state[f] != _LATENCY:
                continue
            if e1[f] == e0[f] or size[f] == 0.0:
                state[f] = _DONE
                finish[f] = t
                out[nout] = f
                outt[nout] = t
                nout += 1
                continue
            state[f] = _ACTIVE
            N[_NACTIVE] += 1
            last[f] = t
            for e in range(e0[f], e1[f]):
                r = eres[e]
                _link(V, e, r)
                if chs[r] != stamp:
                    chs[r] = stamp
                    chg[nchg] = r
                    nchg += 1
    if T > X[_NOW]:
        X[_NOW] = T
    N[_EVENTS] += 1
    if nchg > 0:
        _resolve(N, V, W, nchg, T)
    return nout


@jit
def _advance(N, X, until):
    """Every event at times <= ``until`` (FlowEngine.advance): the number of flows finished
    (ids and times at the start of the arenas), the next event time and the engine's time."""
    V, W = _views(N, X)
    nout = 0
    while True:
        t = _next_time(N, V, W)
        if t > until or t == math.inf:
            break
        nout = _step(N, X, V, W, nout)
    if until > X[_NOW] and until < math.inf:
        X[_NOW] = until
    X[_NEXT] = t
    return nout, t, X[_NOW]


@jit
def _add(N, X, res, coef, size, t, lat, wt):
    """A flow on route entries ``res`` (coefficients ``coef``) requested at ``t``: the next
    event time (FlowEngine.add after its checks; the arenas have room)."""
    V, W = _views(N, X)
    f = N[_NFLOWS]
    N[_NFLOWS] = f + 1
    ne = N[_NENT]
    eres, eflow, ecoef = V[9], V[10], W[8]
    for k in range(res.shape[0]):
        eres[ne + k] = res[k]
        eflow[ne + k] = f
        ecoef[ne + k] = coef[k]
    V[3][f] = ne
    V[4][f] = ne + res.shape[0]
    N[_NENT] = ne + res.shape[0]
    V[1][f] = _LATENCY
    V[2][f] = 0
    W[1][f] = size
    W[2][f] = wt
    W[3][f] = size
    W[4][f] = 0.0
    W[5][f] = t
    W[6][f] = math.nan
    if N[_HS] == N[_H]:
        _compact(N, V, W)
    ta = t + lat
    _hpush(N, W[12], V[23], V[24], V[25], V[26], ta, _ACT, f, 0)
    if ta < X[_NEXT]:
        X[_NEXT] = ta
    return X[_NEXT]


@jit
def _cancel(N, X, f):
    """Withdraw flow ``f`` now (FlowEngine.cancel): the next event time."""
    V, W = _views(N, X)
    state = V[1]
    st = state[f]
    if st == _LATENCY:
        state[f] = _CANCELLED
    elif st == _ACTIVE:
        state[f] = _CANCELLED
        N[_NACTIVE] -= 1
        stamp = N[_STAMP] + 1
        N[_STAMP] = stamp
        eres, chs, chg = V[9], V[18], V[19]
        nchg = 0
        for e in range(V[3][f], V[4][f]):
            r = eres[e]
            _unlink(V, e, r)
            if chs[r] != stamp:
                chs[r] = stamp
                chg[nchg] = r
                nchg += 1
        _resolve(N, V, W, nchg, X[_NOW])
    t = _next_time(N, V, W)
    X[_NEXT] = t
    return t


@jit
def _add_all(N, X, ptr, res, coef, weight, size, start, lat):
    """Every flow of the batch, in order (``_add`` each)."""
    for f in range(size.shape[0]):
        _add(N, X, res[ptr[f]:ptr[f + 1]], coef[ptr[f]:ptr[f + 1]], size[f], start[f], lat[f],
             weight[f])


@jit
def _export(N, X):
    """Copies of the per-flow state, sizes, finish times and route entries (for results)."""
    V, W = _views(N, X)
    nf, ne = N[_NFLOWS], N[_NENT]
    return (V[1][:nf].copy(), V[3][:nf].copy(), V[4][:nf].copy(), V[9][:ne].copy(),
            W[1][:nf].copy(), W[6][:nf].copy(), W[8][:ne].copy())


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
    N, X = _new(cap, max(n, 1), max(res.shape[0], 1))
    t0 = math.inf
    for f in range(n):
        if start[f] < t0:
            t0 = start[f]
    X[_NOW] = t0 if n > 0 else 0.0
    _add_all(N, X, ptr, res, coef, weight, size, start, lat)
    _advance(N, X, math.inf)
    V, W = _views(N, X)
    return W[6][:n].copy(), N[_EVENTS]


class CompiledFlowEngine:
    """:class:`sim.network.flows.FlowEngine` (incremental) in compiled code, the same numbers.

    Parameters
    ----------
    network : Network
    weighting : {"maxmin", "rtt"}
    flows : int
        Flows to make room for at first (the arenas double as needed).

    Attributes
    ----------
    events : int
        Event times processed.
    active : int
        Flows moving now.
    """

    def __init__(self, network: Any, *, weighting: str = "maxmin", flows: int = 64) -> None:
        from .flows import WEIGHTINGS

        self.network = network
        self.weighting = check_choice("weighting", weighting, WEIGHTINGS)
        self.incremental = True
        self._rtt = self.weighting == "rtt"
        self._nf = max(int(flows), 1)
        self._ne = 4 * self._nf
        self.N, self.X = _new(np.asarray(network.capacity, dtype=np.float64), self._nf, self._ne)
        self.n = 0  # flows added
        self._nent = 0
        self._next = math.inf
        self._now = 0.0
        self._routes: dict[Any, tuple] = {}
        self._coefs: dict[tuple, np.ndarray] = {}

    # -- state ---------------------------------------------------------------------
    @property
    def now(self) -> float:
        """The engine's time (the last event processed, or the last ``advance`` bound)."""
        return self._now

    @now.setter
    def now(self, t: float) -> None:
        self._now = float(t)
        self.X[_NOW] = self._now

    @property
    def events(self) -> int:
        return int(self.N[_EVENTS])

    @property
    def active(self) -> int:
        return int(self.N[_NACTIVE])

    @property
    def finish(self) -> np.ndarray:
        """Finish time of every flow added (nan while not finished)."""
        return _export(self.N, self.X)[5]

    def next_time(self) -> float:
        """Time of the next start or finish (inf when nothing is pending)."""
        return self._next

    # -- flows -----------------------------------------------------------------------
    def route(self, src: Any, dst: Any) -> tuple:
        """``(route, entries, coefficients or None, weight)`` of the route ``src -> dst``
        (coefficients None: a curve on the route, so they depend on the size)."""
        key = (src, dst)
        x = self._routes.get(key)
        if x is None:
            rt = self.network.route(src, dst)
            curve = self.network.curve
            curved = any(curve[r] is not None for r in rt.resources)
            res = np.asarray(rt.resources, dtype=np.int64)
            w = rt.latency if self._rtt and rt.latency > 0 else 1.0
            x = self._routes[key] = (rt, res, None if curved else np.ones(len(res)), w)
        return x

    def _coefficients(self, rt: Any, size: float) -> np.ndarray:
        key = (rt.src, rt.dst, size)
        c = self._coefs.get(key)
        if c is None:
            if len(self._coefs) > 100_000:
                self._coefs.clear()
            curve = self.network.curve
            c = self._coefs[key] = np.array(
                [1.0 if curve[r] is None or size == 0 else 1.0 / curve[r](size)
                 for r in rt.resources], dtype=np.float64)
        return c

    def add(self, src: Any, dst: Any, size: float, start: float | None = None) -> int:
        """Request a flow; its index (as :meth:`sim.network.flows.FlowEngine.add`)."""
        from .flows import _check_flow

        size, t = _check_flow(self.now, size, start)
        return self.add_checked(src, dst, size, t)

    def add_checked(self, src: Any, dst: Any, size: float, t: float) -> int:
        """:meth:`add` with ``size`` and ``t`` already checked (a float >= 0, a time >= now)."""
        rt, res, coef, w = self.route(src, dst)
        if coef is None:
            coef = self._coefficients(rt, size)
        if self.n == self._nf or self._nent + len(res) > self._ne:
            self._grow(len(res))
        self._next = _add(self.N, self.X, res, coef, size, t, rt.latency, w)
        f = self.n
        self.n = f + 1
        self._nent += len(res)
        return f

    def _grow(self, need: int) -> None:
        nf = 2 * self._nf if self.n == self._nf else self._nf
        ne = max(2 * self._ne, self._nent + need) if self._nent + need > self._ne else self._ne
        self.N, self.X = _grow(self.N, self.X, nf, ne)
        self._nf, self._ne = nf, ne

    def cancel(self, f: int) -> None:
        """Withdraw flow ``f`` now (its share goes back to the others)."""
        self._next = _cancel(self.N, self.X, f)
        self._now = float(self.X[_NOW])

    def advance_times(self, until: float) -> tuple[list[int], list[float]]:
        """Every start and finish at times ``<= until``: the flows finished and their times."""
        n, self._next, self._now = _advance(self.N, self.X, until)
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
        return link_utilisation(self.network, size[done].tolist(),
                                [eres[a:b].tolist() for a, b in zip(e0[done], e1[done],
                                                                    strict=True)],
                                [coef[a:b].tolist() for a, b in zip(e0[done], e1[done],
                                                                    strict=True)], span)


def check_engine(name: str) -> None:  # pragma: no cover - used by callers that choose
    check(HAVE_NUMBA, "engine", "auto or python without numba (pip install 'dtsim[fast]')", name)
