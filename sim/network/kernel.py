"""The batch flow simulation as one compiled loop (numba), the same model as :class:`FlowEngine`.

:func:`run_flows` takes the flows' routes as flat arrays and returns their
finish times. It does what the Python engine does, in the same order of
events: activations at ``start + latency``; at each event time, the
connected component of the resources that changed is collected and
water-filled with a heap of resource levels; a flow's remaining size is
updated only when its rate changes; finish times wait in a heap with version
numbers. Arrays only, so numba compiles it (``dtsim[fast]``); without numba
:func:`simulate_flows` uses the Python engine instead (this loop would run,
slowly, as plain Python).

Equal to the Python engine to rounding (the order of additions in a
resource's denominator may differ), checked in ``tests/test_network_kernel.py``.
"""

from __future__ import annotations

import math

import numpy as np

from ..xoshiro import HAVE_NUMBA, jit

__all__ = ["HAVE_NUMBA", "run_flows"]

TIE = 1e-12


@jit
def _hpush(keys, vals, vers, size, k, v, ver):
    """Push onto a binary min-heap stored in arrays; the new size."""
    i = size
    keys[i] = k
    vals[i] = v
    vers[i] = ver
    while i > 0:
        p = (i - 1) >> 1
        if keys[p] <= keys[i]:
            break
        keys[p], keys[i] = keys[i], keys[p]
        vals[p], vals[i] = vals[i], vals[p]
        vers[p], vers[i] = vers[i], vers[p]
        i = p
    return size + 1


@jit
def _hpop(keys, vals, vers, size):
    """Remove the top of the heap; the new size (the top was read by the caller)."""
    size -= 1
    if size == 0:
        return 0
    keys[0] = keys[size]
    vals[0] = vals[size]
    vers[0] = vers[size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        b = a + 1
        c = a
        if b < size and keys[b] < keys[a]:
            c = b
        if keys[c] >= keys[i]:
            break
        keys[c], keys[i] = keys[i], keys[c]
        vals[c], vals[i] = vals[i], vals[c]
        vers[c], vers[i] = vers[i], vers[c]
        i = c
    return size


@jit
def _grow(keys, vals, vers):
    n = keys.shape[0] * 2
    k2 = np.empty(n, np.float64)
    v2 = np.empty(n, np.int64)
    w2 = np.empty(n, np.int64)
    k2[: keys.shape[0]] = keys
    v2[: keys.shape[0]] = vals
    w2[: keys.shape[0]] = vers
    return k2, v2, w2


@jit
def run_flows(cap, ptr, res, coef, weight, size, act, order):
    """Finish times of flows (arrays in, arrays out); see the module docstring.

    Parameters
    ----------
    cap : float64[R]
        Resource capacities.
    ptr : int64[n+1]
        Flow ``f``'s route entries are ``ptr[f]:ptr[f+1]``.
    res, coef : int64[nnz], float64[nnz]
        Resource and coefficient of each route entry.
    weight, size, act : float64[n]
        Weight, size and activation time (start + route latency) of each flow.
    order : int64[n]
        Flows by activation time (stable).

    Returns
    -------
    (finish, events)
        float64[n] finish times and the number of event times processed.
    """
    R = cap.shape[0]
    n = size.shape[0]
    nnz = res.shape[0]
    # resource membership: the route entries currently on each resource
    rcount = np.zeros(R, np.int64)
    for e in range(nnz):
        rcount[res[e]] += 1
    rptr = np.zeros(R + 1, np.int64)
    for r in range(R):
        rptr[r + 1] = rptr[r] + rcount[r]
    rlist = np.empty(nnz, np.int64)
    rlen = np.zeros(R, np.int64)
    slot = np.empty(nnz, np.int64)
    eflow = np.empty(nnz, np.int64)
    for f in range(n):
        for e in range(ptr[f], ptr[f + 1]):
            eflow[e] = f
    # flow state
    rem = size.copy()
    rate = np.zeros(n, np.float64)
    last = np.zeros(n, np.float64)
    ver = np.zeros(n, np.int64)
    state = np.zeros(n, np.int8)  # 0 latency, 1 active, 2 done
    finish = np.full(n, np.nan)
    # finish heap
    hk = np.empty(max(16, 2 * n), np.float64)
    hv = np.empty(max(16, 2 * n), np.int64)
    hw = np.empty(max(16, 2 * n), np.int64)
    hs = 0
    # scratch for a re-solve
    rstamp = np.zeros(R, np.int64)
    fstamp = np.zeros(n, np.int64)
    fixed = np.zeros(n, np.int64)
    newrate = np.zeros(n, np.float64)
    stamp = 0
    chg = np.empty(R, np.int64)
    comp_r = np.empty(R, np.int64)
    comp_f = np.empty(n, np.int64)
    stack = np.empty(R, np.int64)
    lrem = np.zeros(R, np.float64)
    lden = np.zeros(R, np.float64)
    lcnt = np.zeros(R, np.int64)
    lk = np.empty(R + nnz + 1, np.float64)
    lv = np.empty(R + nnz + 1, np.int64)
    lw = np.empty(R + nnz + 1, np.int64)
    touched = np.empty(R, np.int64)
    tstamp = np.zeros(R, np.int64)
    ia = 0
    events = 0
    while True:
        while hs > 0:
            f = hv[0]
            if hw[0] != ver[f] or state[f] != 1:
                hs = _hpop(hk, hv, hw, hs)
            else:
                break
        tf = hk[0] if hs > 0 else math.inf
        ta = act[order[ia]] if ia < n else math.inf
        T = tf if tf < ta else ta
        if T == math.inf:
            break
        lim = T + abs(T) * TIE
        events += 1
        stamp += 1
        nchg = 0
        # finishes and activations at this time (finishes first, as the heap would pop them)
        while hs > 0 and hk[0] <= lim:
            f = hv[0]
            t = hk[0]
            w = hw[0]
            hs = _hpop(hk, hv, hw, hs)
            if w != ver[f] or state[f] != 1:
                continue
            state[f] = 2
            finish[f] = t
            for e in range(ptr[f], ptr[f + 1]):
                r = res[e]
                p = slot[e]
                lastpos = rptr[r] + rlen[r] - 1
                moved = rlist[lastpos]
                rlist[p] = moved
                slot[moved] = p
                rlen[r] -= 1
                if rstamp[r] != stamp:
                    rstamp[r] = stamp
                    chg[nchg] = r
                    nchg += 1
        while ia < n and act[order[ia]] <= lim:
            f = order[ia]
            ia += 1
            if ptr[f] == ptr[f + 1] or size[f] == 0.0:
                state[f] = 2
                finish[f] = act[f]
                continue
            state[f] = 1
            last[f] = act[f]
            for e in range(ptr[f], ptr[f + 1]):
                r = res[e]
                p = rptr[r] + rlen[r]
                rlist[p] = e
                slot[e] = p
                rlen[r] += 1
                if rstamp[r] != stamp:
                    rstamp[r] = stamp
                    chg[nchg] = r
                    nchg += 1
        if nchg == 0:
            continue
        # the component: resources reachable through flows from the changed ones
        stamp += 1
        nr = 0
        nf = 0
        sp = 0
        for k in range(nchg):
            r = chg[k]
            rstamp[r] = stamp
            comp_r[nr] = r
            nr += 1
            stack[sp] = r
            sp += 1
        while sp > 0:
            sp -= 1
            r = stack[sp]
            for p in range(rptr[r], rptr[r] + rlen[r]):
                f = eflow[rlist[p]]
                if fstamp[f] != stamp:
                    fstamp[f] = stamp
                    comp_f[nf] = f
                    nf += 1
                    for e in range(ptr[f], ptr[f + 1]):
                        r2 = res[e]
                        if rstamp[r2] != stamp:
                            rstamp[r2] = stamp
                            comp_r[nr] = r2
                            nr += 1
                            stack[sp] = r2
                            sp += 1
        if nf == 0:
            continue
        # water-filling with a heap of resource levels
        for k in range(nr):
            r = comp_r[k]
            lrem[r] = cap[r]
            lden[r] = 0.0
            lcnt[r] = 0
        for k in range(nf):
            f = comp_f[k]
            iw = 1.0 / weight[f]
            for e in range(ptr[f], ptr[f + 1]):
                r = res[e]
                lden[r] += coef[e] * iw
                lcnt[r] += 1
        ls = 0
        for k in range(nr):
            r = comp_r[k]
            if lcnt[r] > 0:
                ls = _hpush(lk, lv, lw, ls, lrem[r] / lden[r], r, 0)
        while ls > 0:
            lvl = lk[0]
            r = lv[0]
            ls = _hpop(lk, lv, lw, ls)
            if lcnt[r] <= 0 or lrem[r] / lden[r] != lvl:
                continue
            lcnt[r] = 0
            nt = 0
            for p in range(rptr[r], rptr[r] + rlen[r]):
                f = eflow[rlist[p]]
                if fixed[f] == stamp:
                    continue
                fixed[f] = stamp
                wf = weight[f]
                x = lvl / wf
                newrate[f] = x
                iw = 1.0 / wf
                for e in range(ptr[f], ptr[f + 1]):
                    r2 = res[e]
                    if lcnt[r2] > 0:
                        lrem[r2] -= coef[e] * x
                        lden[r2] -= coef[e] * iw
                        lcnt[r2] -= 1
                        if tstamp[r2] != stamp:
                            tstamp[r2] = stamp
                            touched[nt] = r2
                            nt += 1
            for k in range(nt):
                r2 = touched[k]
                tstamp[r2] = 0
                if lcnt[r2] > 0:
                    d = lden[r2]
                    if d <= 0.0:
                        d = 0.0
                        for p in range(rptr[r2], rptr[r2] + rlen[r2]):
                            e = rlist[p]
                            f = eflow[e]
                            if fixed[f] != stamp:
                                d += coef[e] / weight[f]
                        lden[r2] = d
                    rm = lrem[r2]
                    if rm < 0.0:
                        rm = 0.0
                        lrem[r2] = 0.0
                    ls = _hpush(lk, lv, lw, ls, rm / d, r2, 0)
        # new rates: bring remaining sizes up to date, push new finish times
        for k in range(nf):
            f = comp_f[k]
            x = newrate[f]
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
            ver[f] += 1
            if hs == hk.shape[0]:
                hk, hv, hw = _grow(hk, hv, hw)
            hs = _hpush(hk, hv, hw, hs, T + rm / x if x > 0.0 else math.inf, f, ver[f])
    return finish, events
