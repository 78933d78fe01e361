"""A compiled event loop (numba) for the contended training pipeline: the DES's model at machine speed.

The loop runs the same model as :mod:`sim.training` (the SimPy DES), step for
step and in the same event order, for the configurations
:mod:`sim.training.compiled` accepts (SWARM and async schedules, every routing,
per-replica speeds, exponential worker and stage-domain failures, failover
after the detection timeout with the DES's recompute rule, weight download on
recovery, skip budget, ``max_wait``, stalls). What it mirrors:

* **Replicas are servers** (:class:`sim.training.replica.Replica`): a live
  replica serves its private urgent queue (backward passes, recomputations),
  the stage's shared urgent queue, its private forward queue, then the stage's
  shared forward queue, FIFO each, one pass at a time for ``t / speed`` (times
  a unit exponential under exponential pass times). An idle replica joins its
  stage's idle set (insertion ordered) and is woken by an event at the current
  time (SimPy's NORMAL priority) when work is pushed to it, or to the shared
  queue while it is the first idle one.
* **Failures** (:mod:`sim.failures`): every worker and every stage domain
  alternates exponential up and down times from a stationary start; a replica
  is up when its worker and its stage's domain are. Going down, a replica
  stops being live, loses its activations (its epoch moves on), re-queues
  every pass queued at it (and, when the stage is left with no live replica,
  the stage's shared queues) after the detection timeout, and the pass or
  download in hand is interrupted by an URGENT event at the same time (the
  pass is lost, its elapsed time counted, the microbatch re-queued after the
  detection timeout). Coming back up, it downloads its stage's weights before
  it is live again.
* **Movement** (:class:`sim.training.flow.ReplicaFlow`): forward to the next stage
  after the hop time, the backward pass on the replica that did the forward
  (if it still holds the activations; else the forwards are recomputed from
  the last stage still holding them), and at a stage with no live replica a
  skip within the budget, else a wait of up to ``max_wait`` (released when a
  replica of the stage becomes live), else a drop.
* **Steps** (:class:`sim.training.trainer.StepTrainer`): ``m`` microbatches,
  a barrier, the optimizer time, the next step; async feeds ``N m``
  microbatches (all at once, Poisson or evenly spaced) with no barrier.

Events are ordered as SimPy orders them: by time, then priority (URGENT before
NORMAL), then the order of scheduling. Random numbers come from xoshiro256**
generators, one per concern (failures, pass times, routing, arrivals), seeded
from the run's named streams, so a seed gives other trajectories than the
DES's, with the same law.

All state lives in arrays made by :func:`new_state`, so :func:`advance` can
return when its event heap needs to grow and be called again.
"""

from __future__ import annotations

import math

import numpy as np

from ..xoshiro import HAVE_NUMBA, identity, jit, numba, stream_states
from ..xoshiro import next_u64 as _next

__all__ = ["HAVE_NUMBA", "ROUTING_CODES", "ARRIVAL_CODES", "stream_states", "new_state",
           "advance", "run_kernel"]

#: Routing name -> kernel code.
ROUTING_CODES = {"queue": 0, "least-loaded": 1, "weighted": 2, "round-robin": 3}
#: Async arrival name -> kernel code.
ARRIVAL_CODES = {"saturated": 0, "poisson": 1, "fixed": 2}

# generator slots
_FAIL, _PASS, _ROUTE, _ARRIVE = 0, 1, 2, 3

# replica int fields
(R_STAGE, R_IDX, R_FMUP, R_LOADED, R_LIVE, R_EPOCH, R_CUR, R_PASSES, R_INTO, R_DOWNL, R_WAIT,
 R_LOAD, R_TOKEN, R_INFLIGHT, R_IDLE, R_IPREV, R_INEXT, R_HI_H, R_HI_T, R_LO_H, R_LO_T,
 R_OWNUP, R_NI) = range(23)
# replica float fields
F_FWD, F_BWD, F_BUSY, F_T0, F_WORK, F_OWNUPT, F_OWNSINCE, F_NF = range(8)
# stage int fields
(S_FIRST, S_COUNT, S_NLIVE, S_IDLE_H, S_IDLE_T, S_SHI_H, S_SHI_T, S_SLO_H, S_SLO_T, S_W_H,
 S_W_T, S_RR, S_DOMUP, S_NI) = range(14)
# microbatch int fields
M_STAGE, M_BACK, M_TARGET, M_SKIPPED, M_DEAD, M_WAITING, M_NEXT, M_WPREV, M_WNEXT, M_WID, M_NI = \
    range(11)
# microbatch float fields
MF_T0, MF_WSINCE, MF_NF = range(3)
# global int counters
(G_SEQ, G_NHEAP, G_NOUT, G_LOSTP, G_REROUTES, G_RECOMP, G_SKIPS, G_WAITS, G_DELIV, G_DROPPED,
 G_SKIPSUM, G_STEP, G_REMAIN, G_STEP_DELIV, G_OPEN, G_DONE, G_WAITID, G_ARRIVED, G_NFIN,
 G_ATTEMPTED, G_EVENTS, G_STARTED, G_NDOWN, G_NI) = range(24)
# global float counters
(GF_NOW, GF_LOSTPASS, GF_RECOMPUTE, GF_REROUTE, GF_DOWNLOAD, GF_STALL, GF_QSUM, GF_LATSUM,
 GF_STEP_T0, GF_BUSY0, GF_COMPUTE, GF_COMPUTE_BUSY, GF_STEP_Q, GF_BUSY, GF_DOWN, GF_DSINCE,
 GF_DOWN0, GF_COMPUTE_DOWN, GF_NF) = range(19)
# G_NDOWN replicas not live since GF_DSINCE; GF_DOWN their worker-time before it
# (sim.training.flow.DownClock): GF_COMPUTE_DOWN is its part in the steps' compute phases
# int parameters
(P_L, P_R, P_SKIP, P_ROUTING, P_EXPO, P_BACK, P_ASYNC, P_ARRIVAL, P_N, P_M, P_TOTAL, P_SLOTS,
 P_NI) = range(13)
# float parameters
(PF_DET, PF_MAXWAIT, PF_DOWNLOAD, PF_OPT, PF_GAP, PF_WUP, PF_WDOWN, PF_DUP, PF_DDOWN,
 PF_NF) = range(10)

# events
EV_WAKE, EV_WORK, EV_INTR, EV_FAIL, EV_AFWD, EV_ABACK, EV_EXPIRE, EV_TRAINER, EV_ARRIVAL, \
    EV_DONE = range(10)
_URGENT, _NORMAL = 0, 1
_PRIO = np.int64(1) << np.int64(62)
# movement ops
OP_AFWD, OP_FNEXT, OP_ABACK, OP_BNEXT = range(4)


_jit = jit
#: Small helpers inlined into their callers (numba IR), saving a call per use.
_inl = numba.njit(cache=True, nogil=True, inline="always") if HAVE_NUMBA else identity


# --------------------------------------------------------------------------- random numbers
@_jit
def _uniform(st, k):
    """Uniform on the open interval (0, 1)."""
    return (float(_next(st, k) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@_jit
def _expo(st, k, mean):
    """Exponential of the given mean (strictly positive)."""
    return -math.log(_uniform(st, k)) * mean


# --------------------------------------------------------------------------- the event heap
_A_BITS = np.int64(30)
_A_MASK = (np.int64(1) << _A_BITS) - np.int64(1)
_B_MASK = (np.int64(1) << np.int64(29)) - np.int64(1)


@_inl
def _push(gi, ht, hk, hp, t, prio, kind, a, b):
    """Schedule event ``kind`` with arguments ``a``, ``b`` at ``t`` (SimPy's order: time,
    priority, scheduling order)."""
    n = gi[G_NHEAP]
    seq = gi[G_SEQ]
    gi[G_SEQ] = seq + 1
    key = seq + (_PRIO if prio == _NORMAL else np.int64(0))
    pay = (np.int64(kind) << np.int64(59)) | (np.int64(b) << _A_BITS) | np.int64(a)
    gi[G_NHEAP] = n + 1
    while n > 0:  # sift the hole up
        p = (n - 1) >> 1
        tp = ht[p]
        if t < tp or (t == tp and key < hk[p]):
            ht[n], hk[n], hp[n] = tp, hk[p], hp[p]
            n = p
        else:
            break
    ht[n], hk[n], hp[n] = t, key, pay


@_jit
def _pop(gi, ht, hk, hp):
    """Remove the earliest event; its time and payload."""
    t0, pay0 = ht[0], hp[0]
    n = gi[G_NHEAP] - 1
    gi[G_NHEAP] = n
    if n > 0:
        t, key, pay = ht[n], hk[n], hp[n]
        i = 0
        while True:  # sift the hole down
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hk[c + 1] < hk[c])):
                c += 1
            if ht[c] < t or (ht[c] == t and hk[c] < key):
                ht[i], hk[i], hp[i] = ht[c], hk[c], hp[c]
                i = c
            else:
                break
        ht[i], hk[i], hp[i] = t, key, pay
    return t0, pay0


# --------------------------------------------------------------------------- queues and sets
@_inl
def _q_append(arr, row, hcol, tcol, mi, mb):
    mi[mb, M_NEXT] = -1
    t = arr[row, tcol]
    if t < 0:
        arr[row, hcol] = mb
    else:
        mi[t, M_NEXT] = mb
    arr[row, tcol] = mb


@_inl
def _q_pop(arr, row, hcol, tcol, mi):
    mb = arr[row, hcol]
    nx = mi[mb, M_NEXT]
    arr[row, hcol] = nx
    if nx < 0:
        arr[row, tcol] = -1
    return mb


@_inl
def _idle_add(ri, si, k):
    j = ri[k, R_STAGE]
    ri[k, R_IDLE] = 1
    ri[k, R_INEXT] = -1
    t = si[j, S_IDLE_T]
    ri[k, R_IPREV] = t
    if t < 0:
        si[j, S_IDLE_H] = k
    else:
        ri[t, R_INEXT] = k
    si[j, S_IDLE_T] = k


@_inl
def _idle_remove(ri, si, k):
    if ri[k, R_IDLE] == 0:
        return
    j = ri[k, R_STAGE]
    p, n = ri[k, R_IPREV], ri[k, R_INEXT]
    if p < 0:
        si[j, S_IDLE_H] = n
    else:
        ri[p, R_INEXT] = n
    if n < 0:
        si[j, S_IDLE_T] = p
    else:
        ri[n, R_IPREV] = p
    ri[k, R_IDLE] = 0


# --------------------------------------------------------------------------- the model
@_inl
def _down_change(gi, gf, d):
    """DownClock.change: ``d`` more replicas not live from now."""
    n = gi[G_NDOWN]
    if n:
        gf[GF_DOWN] += n * (gf[GF_NOW] - gf[GF_DSINCE])
    gf[GF_DSINCE] = gf[GF_NOW]
    gi[G_NDOWN] = n + d


@_inl
def _down_at(gi, gf):
    """DownClock.at(now): worker-time not live from the start to now."""
    n = gi[G_NDOWN]
    if n:
        return gf[GF_DOWN] + n * (gf[GF_NOW] - gf[GF_DSINCE])
    return gf[GF_DOWN]


@_inl
def _wake(ri, si, gi, gf, ht, hk, hp, k):
    w = ri[k, R_WAIT]
    if w != 0:
        ri[k, R_WAIT] = 0
        _idle_remove(ri, si, k)
        _push(gi, ht, hk, hp, gf[GF_NOW], _NORMAL, EV_WAKE, k, w)


@_jit
def _push_mb(ri, si, mi, gi, gf, ht, hk, hp, k, mb, urgent):
    if urgent:
        _q_append(ri, k, R_HI_H, R_HI_T, mi, mb)
    else:
        _q_append(ri, k, R_LO_H, R_LO_T, mi, mb)
    ri[k, R_LOAD] += 1
    _wake(ri, si, gi, gf, ht, hk, hp, k)


@_jit
def _choose(pi, ri, rf_speed, si, st, j):
    """The live replica of stage ``j`` the routing picks, or -1 for the shared queue."""
    code = pi[P_ROUTING]
    if code == 0:
        return -1
    first, cnt = si[j, S_FIRST], si[j, S_COUNT]
    if code == 1:  # least-loaded: the first of fewest queued plus in service
        best, load = -1, np.int64(1) << np.int64(62)
        for k in range(first, first + cnt):
            if ri[k, R_LIVE]:
                n = ri[k, R_LOAD]
                if n < load:
                    if n == 0:
                        return k
                    best, load = k, n
        return best
    if code == 2:  # weighted by speed
        if si[j, S_NLIVE] == 1:
            for k in range(first, first + cnt):
                if ri[k, R_LIVE]:
                    return k
        total = 0.0
        last = -1
        for k in range(first, first + cnt):
            if ri[k, R_LIVE]:
                total += rf_speed[k, F_NF]
                last = k
        x = _uniform(st, _ROUTE) * total
        for k in range(first, first + cnt):
            if ri[k, R_LIVE]:
                x -= rf_speed[k, F_NF]
                if x < 0.0:
                    return k
        return last
    # round-robin over the replica indices
    n = si[j, S_RR]
    best = -1
    firstlive = -1
    for k in range(first, first + cnt):
        if ri[k, R_LIVE]:
            if firstlive < 0:
                firstlive = k
            if ri[k, R_IDX] >= n:
                best = k
                break
    if best < 0:
        best = firstlive
    si[j, S_RR] = ri[best, R_IDX] + 1
    return best


@_inl
def _holds(ri, hr, he_, mb, i):
    h = hr[mb, i]
    return h >= 0 and ri[h, R_LIVE] == 1 and ri[h, R_EPOCH] == he_[mb, i]


@_jit
def _release(ri, si, gi, gf, ht, hk, hp, hr, he_, pi, mb):
    for i in range(pi[P_L]):
        h = hr[mb, i]
        if h >= 0 and ri[h, R_EPOCH] == he_[mb, i] and ri[h, R_INFLIGHT] > 0:
            ri[h, R_INFLIGHT] -= 1
            _wake(ri, si, gi, gf, ht, hk, hp, h)


@_jit
def _left(pi, gi, gf, ht, hk, hp):
    gi[G_REMAIN] -= 1
    if gi[G_REMAIN] == 0:
        if pi[P_ASYNC]:
            _push(gi, ht, hk, hp, gf[GF_NOW], _NORMAL, EV_DONE, 0, 0)
        elif gi[G_OPEN]:
            gi[G_OPEN] = 0
            _push(gi, ht, hk, hp, gf[GF_NOW], _NORMAL, EV_TRAINER, 0, 0)


@_jit
def _finished(pi, mi, mf, gi, gf, ht, hk, hp, quality, fin, mb):
    now = gf[GF_NOW]
    sk = mi[mb, M_SKIPPED]
    q = quality[sk]
    gi[G_DELIV] += 1
    gf[GF_QSUM] += q
    gf[GF_LATSUM] += now - mf[mb, MF_T0]
    gi[G_SKIPSUM] += sk
    if pi[P_ASYNC]:
        fin[gi[G_NFIN]] = now
        gi[G_NFIN] += 1
    else:
        gi[G_STEP_DELIV] += 1
        gf[GF_STEP_Q] += q
    _left(pi, gi, gf, ht, hk, hp)


@_jit
def _move(op, mb, j, pi, pf, ri, rf_speed, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st,
          hops, quality, fin):
    """A microbatch's movements until it is queued, scheduled, finished, waiting or dropped."""
    L = pi[P_L]
    while True:
        if op == OP_AFWD:  # ReplicaFlow.arrive_fwd
            if mi[mb, M_DEAD]:
                return
            mi[mb, M_STAGE] = j
            if mi[mb, M_TARGET] >= 0 and hr[mb, j] < 0:  # skipped the first time: pass through
                op = OP_FNEXT
                continue
            if si[j, S_NLIVE] == 0:  # ReplicaFlow.out_stage
                if mi[mb, M_SKIPPED] < pi[P_SKIP]:
                    mi[mb, M_SKIPPED] += 1
                    gi[G_SKIPS] += 1
                    hr[mb, j] = -1
                    if mi[mb, M_TARGET] == j:
                        mi[mb, M_TARGET] = -1
                        mi[mb, M_BACK] = 1
                        op = OP_BNEXT
                    else:
                        op = OP_FNEXT
                    continue
                mw = pf[PF_MAXWAIT]
                if mw > 0.0:
                    gi[G_WAITS] += 1
                    mi[mb, M_WAITING] = 1
                    wid = gi[G_WAITID]
                    gi[G_WAITID] = wid + 1
                    mi[mb, M_WID] = wid
                    mf[mb, MF_WSINCE] = gf[GF_NOW]
                    t = si[j, S_W_T]  # append to the stage's waiters
                    mi[mb, M_WPREV] = t
                    mi[mb, M_WNEXT] = -1
                    if t < 0:
                        si[j, S_W_H] = mb
                    else:
                        mi[t, M_WNEXT] = mb
                    si[j, S_W_T] = mb
                    if mw < math.inf:
                        _push(gi, ht, hk, hp, gf[GF_NOW] + mw, _NORMAL, EV_EXPIRE, mb,
                              wid)
                    return
                _blocked(pi, ri, si, mi, hr, he_, gi, gf, ht, hk, hp, mb)
                return
            rep = _choose(pi, ri, rf_speed, si, st, j)
            urgent = mi[mb, M_TARGET] >= 0
            if rep < 0:
                if urgent:
                    _q_append(si, j, S_SHI_H, S_SHI_T, mi, mb)
                else:
                    _q_append(si, j, S_SLO_H, S_SLO_T, mi, mb)
                h = si[j, S_IDLE_H]
                if h >= 0:
                    _wake(ri, si, gi, gf, ht, hk, hp, h)
            else:
                _push_mb(ri, si, mi, gi, gf, ht, hk, hp, rep, mb, urgent)
            return
        elif op == OP_FNEXT:  # ReplicaFlow.forward_next
            if j + 1 == L:
                if pi[P_BACK]:  # the trainer's forward_done: start_backward
                    mi[mb, M_BACK] = 1
                    op = OP_ABACK
                    j = L - 1
                    continue
                _finished(pi, mi, mf, gi, gf, ht, hk, hp, quality, fin, mb)
                return
            dt = hops[j]
            if dt <= 0.0:
                op = OP_AFWD
                j = j + 1
                continue
            _push(gi, ht, hk, hp, gf[GF_NOW] + dt, _NORMAL, EV_AFWD, mb, j + 1)
            return
        elif op == OP_ABACK:  # ReplicaFlow.arrive_back
            if mi[mb, M_DEAD]:
                return
            mi[mb, M_STAGE] = j
            h = hr[mb, j]
            if h < 0:
                op = OP_BNEXT
                continue
            if ri[h, R_LIVE] == 1 and ri[h, R_EPOCH] == he_[mb, j]:
                _push_mb(ri, si, mi, gi, gf, ht, hk, hp, h, mb, True)
                return
            i = j - 1
            while i >= 0 and not _holds(ri, hr, he_, mb, i):
                i -= 1
            gi[G_RECOMP] += 1
            mi[mb, M_BACK] = 0
            mi[mb, M_TARGET] = j
            if i >= 0:
                dt = hops[i]
                if dt <= 0.0:
                    op = OP_AFWD
                    j = i + 1
                    continue
                _push(gi, ht, hk, hp, gf[GF_NOW] + dt, _NORMAL, EV_AFWD, mb, i + 1)
                return
            op = OP_AFWD
            j = 0
            continue
        else:  # OP_BNEXT: ReplicaFlow.backward_next
            if j == 0:
                _finished(pi, mi, mf, gi, gf, ht, hk, hp, quality, fin, mb)
                return
            dt = hops[j - 1]
            if dt <= 0.0:
                op = OP_ABACK
                j = j - 1
                continue
            _push(gi, ht, hk, hp, gf[GF_NOW] + dt, _NORMAL, EV_ABACK, mb, j - 1)
            return


@_jit
def _blocked(pi, ri, si, mi, hr, he_, gi, gf, ht, hk, hp, mb):
    mi[mb, M_DEAD] = 1
    gi[G_DROPPED] += 1
    _release(ri, si, gi, gf, ht, hk, hp, hr, he_, pi, mb)
    _left(pi, gi, gf, ht, hk, hp)


@_jit
def _requeue(mb, pi, pf, ri, rf_speed, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st,
             hops, quality, fin):
    gi[G_REROUTES] += 1
    det = pf[PF_DET]
    gf[GF_REROUTE] += det
    back = mi[mb, M_BACK] == 1
    if det <= 0.0:
        _move(OP_ABACK if back else OP_AFWD, mb, mi[mb, M_STAGE], pi, pf, ri, rf_speed, si, mi,
              mf, hr, he_, gi, gf, ht, hk, hp, st, hops, quality, fin)
    else:
        _push(gi, ht, hk, hp, gf[GF_NOW] + det, _NORMAL, EV_ABACK if back else EV_AFWD,
              mb, mi[mb, M_STAGE])


@_jit
def _serve(k, pi, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
    """Replica._serve: start the next pass; True once waiting (for work or a pass)."""
    j = ri[k, R_STAGE]
    while ri[k, R_LIVE]:
        mb = -1
        if ri[k, R_HI_H] >= 0:
            mb = _q_pop(ri, k, R_HI_H, R_HI_T, mi)
            if mi[mb, M_DEAD]:
                ri[k, R_LOAD] -= 1
                continue
        elif si[j, S_SHI_H] >= 0:
            mb = _q_pop(si, j, S_SHI_H, S_SHI_T, mi)
            if mi[mb, M_DEAD]:
                continue
            ri[k, R_LOAD] += 1
        elif ri[k, R_LO_H] >= 0:
            mb = _q_pop(ri, k, R_LO_H, R_LO_T, mi)
            if mi[mb, M_DEAD]:
                ri[k, R_LOAD] -= 1
                continue
        elif si[j, S_SLO_H] >= 0:
            mb = _q_pop(si, j, S_SLO_H, S_SLO_T, mi)
            if mi[mb, M_DEAD]:
                continue
            ri[k, R_LOAD] += 1
        if mb < 0:
            ri[k, R_WAIT] = 1
            _idle_add(ri, si, k)
            return True
        work = rf[k, F_BWD] if mi[mb, M_BACK] else rf[k, F_FWD]
        if pi[P_EXPO]:
            work *= _expo(st, _PASS, 1.0)
        ri[k, R_CUR] = mb
        now = gf[GF_NOW]
        rf[k, F_T0] = now
        rf[k, F_WORK] = work
        ri[k, R_INTO] = 1
        _push(gi, ht, hk, hp, now + work, _NORMAL, EV_WORK, k, ri[k, R_TOKEN])
        return True
    return False


@_jit
def _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
    """Replica._outer: wait while down, download the weights, else serve."""
    for _ in range(4):
        if ri[k, R_FMUP] == 0:
            ri[k, R_WAIT] = 2
            return
        if ri[k, R_LOADED] == 0:
            now = gf[GF_NOW]
            rf[k, F_T0] = now
            ri[k, R_INTO] = 1
            ri[k, R_DOWNL] = 1
            _push(gi, ht, hk, hp, now + pf[PF_DOWNLOAD], _NORMAL, EV_WORK, k,
                  ri[k, R_TOKEN])
            return
        if _serve(k, pi, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
            return
    raise RuntimeError("a replica up and loaded is not live")


@_jit
def _replica_down(k, was_live, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                  st, hops, quality, fin):
    j = ri[k, R_STAGE]
    out = False
    _idle_remove(ri, si, k)
    if was_live:
        si[j, S_NLIVE] -= 1
        out = si[j, S_NLIVE] == 0
        if out:
            gi[G_NOUT] += 1
    heads = np.empty(4, dtype=np.int64)  # detach every queue first, as the DES lists them
    heads[0] = ri[k, R_HI_H]
    heads[1] = ri[k, R_LO_H]
    heads[2] = -1
    heads[3] = -1
    ri[k, R_HI_H] = -1
    ri[k, R_HI_T] = -1
    ri[k, R_LO_H] = -1
    ri[k, R_LO_T] = -1
    ri[k, R_LOAD] = 1 if ri[k, R_CUR] >= 0 else 0
    if out:
        heads[2] = si[j, S_SHI_H]
        heads[3] = si[j, S_SLO_H]
        si[j, S_SHI_H] = -1
        si[j, S_SHI_T] = -1
        si[j, S_SLO_H] = -1
        si[j, S_SLO_T] = -1
    for q in range(4):
        mb = heads[q]
        while mb >= 0:
            nx = mi[mb, M_NEXT]
            if not mi[mb, M_DEAD]:
                _requeue(mb, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk,
                         hp, st, hops, quality, fin)
            mb = nx


@_jit
def _set_state(k, up, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
               quality, fin):
    """Replica.set_state: going down interrupts the work in hand; coming up wakes."""
    was = ri[k, R_FMUP] == 1
    ri[k, R_FMUP] = 1 if up else 0
    if was and not up:
        was_live = ri[k, R_LIVE] == 1
        ri[k, R_LIVE] = 0
        if was_live:
            _down_change(gi, gf, 1)
        ri[k, R_LOADED] = 0
        ri[k, R_EPOCH] += 1
        ri[k, R_INFLIGHT] = 0
        _replica_down(k, was_live, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                       st, hops, quality, fin)
        if ri[k, R_INTO]:
            ri[k, R_INTO] = 0
            ri[k, R_TOKEN] += 1  # the work's event stays scheduled, with no effect
            _push(gi, ht, hk, hp, gf[GF_NOW], _URGENT, EV_INTR, k, 0)
    elif up and not was:
        _wake(ri, si, gi, gf, ht, hk, hp, k)


@_jit
def _replica_live(k, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                  quality, fin):
    ri[k, R_LIVE] = 1
    _down_change(gi, gf, -1)
    j = ri[k, R_STAGE]
    si[j, S_NLIVE] += 1
    if si[j, S_NLIVE] == 1:
        gi[G_NOUT] -= 1
        mb = si[j, S_W_H]
        si[j, S_W_H] = -1
        si[j, S_W_T] = -1
        now = gf[GF_NOW]
        while mb >= 0:
            nx = mi[mb, M_WNEXT]
            mi[mb, M_WAITING] = 0
            gf[GF_STALL] += now - mf[mb, MF_WSINCE]
            _move(OP_AFWD, mb, j, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht,
                  hk, hp, st, hops, quality, fin)
            mb = nx


@_jit
def _start_step(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                quality, fin):
    """StepTrainer._step's start: ``m`` fresh microbatches at stage 0 (True: step still open)."""
    m = pi[P_M]
    gf[GF_STEP_T0] = gf[GF_NOW]
    gf[GF_BUSY0] = gf[GF_BUSY]
    gf[GF_DOWN0] = _down_at(gi, gf)
    gi[G_REMAIN] = m
    gi[G_STEP_DELIV] = 0
    gf[GF_STEP_Q] = 0.0
    gi[G_ATTEMPTED] += m
    for mb in range(m):
        _new_mb(mb, mi, mf, hr, gf[GF_NOW])
    for mb in range(m):
        _move(OP_AFWD, mb, 0, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk,
              hp, st, hops, quality, fin)
    if gi[G_REMAIN] > 0:
        gi[G_OPEN] = 1
        return True
    return False


@_jit
def _new_mb(mb, mi, mf, hr, now):
    mi[mb, M_STAGE] = 0
    mi[mb, M_BACK] = 0
    mi[mb, M_TARGET] = -1
    mi[mb, M_SKIPPED] = 0
    mi[mb, M_DEAD] = 0
    mi[mb, M_WAITING] = 0
    mi[mb, M_NEXT] = -1
    mi[mb, M_WID] = -1
    mf[mb, MF_T0] = now
    hr[mb, :] = -1


@_jit
def _step_done(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
               quality, fin, steps, kept_d, kept_q, phase):
    """The trainer after a step's barrier: optimizer time, record, next step (loops while
    a step closes at once)."""
    while True:
        now = gf[GF_NOW]
        if phase == 0:
            gf[GF_COMPUTE] += now - gf[GF_STEP_T0]
            gf[GF_COMPUTE_BUSY] += gf[GF_BUSY] - gf[GF_BUSY0]
            gf[GF_COMPUTE_DOWN] += _down_at(gi, gf) - gf[GF_DOWN0]
            if pf[PF_OPT] > 0.0:
                _push(gi, ht, hk, hp, now + pf[PF_OPT], _NORMAL, EV_TRAINER, 1, 0)
                return
        k = gi[G_STEP]
        steps[k] = now - gf[GF_STEP_T0]
        kept_d[k] = gi[G_STEP_DELIV]
        kept_q[k] = gf[GF_STEP_Q]
        gi[G_STEP] = k + 1
        if k + 1 == pi[P_N]:
            gi[G_DONE] = 1
            return
        if _start_step(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                       quality, fin):
            return
        phase = 0


@_jit
def _fail_event(c, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                quality, fin):
    """A worker's (``c < R``) or stage domain's own transition, and the next one drawn."""
    R = pi[P_R]
    now = gf[GF_NOW]
    if c < R:
        k = c
        own = ri[k, R_OWNUP] == 1
        if own:
            rf[k, F_OWNUPT] += now - rf[k, F_OWNSINCE]
        rf[k, F_OWNSINCE] = now
        own = not own
        ri[k, R_OWNUP] = 1 if own else 0
        eff = own and si[ri[k, R_STAGE], S_DOMUP] == 1
        if eff != (ri[k, R_FMUP] == 1):
            _set_state(k, eff, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                       st, hops, quality, fin)
        mean = pf[PF_WUP] if own else pf[PF_WDOWN]
    else:
        j = c - R
        dom = si[j, S_DOMUP] == 0
        si[j, S_DOMUP] = 1 if dom else 0
        first = si[j, S_FIRST]
        for k in range(first, first + si[j, S_COUNT]):
            eff = dom and ri[k, R_OWNUP] == 1
            if eff != (ri[k, R_FMUP] == 1):
                _set_state(k, eff, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                            st, hops, quality, fin)
        mean = pf[PF_DUP] if dom else pf[PF_DDOWN]
    if mean < math.inf:
        _push(gi, ht, hk, hp, now + _expo(st, _FAIL, mean), _NORMAL, EV_FAIL, c, 0)


@_jit
def _start(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops, quality,
           fin):
    """Time 0: stationary failure states, the servers started, the trainer's first release."""
    R, L = pi[P_R], pi[P_L]
    for j in range(L):  # domains (parents) first
        up_m, down_m = pf[PF_DUP], pf[PF_DDOWN]
        if up_m == math.inf:
            up = True
        elif down_m == math.inf:
            up = False
        else:
            up = _uniform(st, _FAIL) < up_m / (up_m + down_m)
        si[j, S_DOMUP] = 1 if up else 0
        mean = up_m if up else down_m
        if mean < math.inf:
            _push(gi, ht, hk, hp, _expo(st, _FAIL, mean), _NORMAL, EV_FAIL, R + j, 0)
    for k in range(R):
        up_m, down_m = pf[PF_WUP], pf[PF_WDOWN]
        if up_m == math.inf:
            up = True
        elif down_m == math.inf:
            up = False
        else:
            up = _uniform(st, _FAIL) < up_m / (up_m + down_m)
        ri[k, R_OWNUP] = 1 if up else 0
        mean = up_m if up else down_m
        if mean < math.inf:
            _push(gi, ht, hk, hp, _expo(st, _FAIL, mean), _NORMAL, EV_FAIL, k, 0)
        eff = up and si[ri[k, R_STAGE], S_DOMUP] == 1
        ri[k, R_FMUP] = 1 if eff else 0
        ri[k, R_LOADED] = ri[k, R_FMUP]
        ri[k, R_LIVE] = ri[k, R_FMUP]
        if eff:
            si[ri[k, R_STAGE], S_NLIVE] += 1
        else:
            gi[G_NDOWN] += 1  # not live from time 0 (GF_DSINCE)
    nout = 0
    for j in range(L):
        if si[j, S_NLIVE] == 0:
            nout += 1
    gi[G_NOUT] = nout
    for k in range(R):
        _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
    if pi[P_ASYNC]:
        gi[G_REMAIN] = pi[P_TOTAL]
        gi[G_ATTEMPTED] = pi[P_TOTAL]
        n = pi[P_TOTAL] if pi[P_ARRIVAL] == 0 else 1
        for mb in range(n):
            _new_mb(mb, mi, mf, hr, 0.0)
            _move(OP_AFWD, mb, 0, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht,
                  hk, hp, st, hops, quality, fin)
        gi[G_ARRIVED] = n
        if n < pi[P_TOTAL]:
            _push(gi, ht, hk, hp, _gap(pi, pf, st), _NORMAL, EV_ARRIVAL, 0, 0)
        return True
    return _start_step(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                       quality, fin)


@_jit
def _gap(pi, pf, st):
    if pi[P_ARRIVAL] == 1:
        return _expo(st, _ARRIVE, pf[PF_GAP])
    return pf[PF_GAP]


@_jit
def advance(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops, quality,
            fin, steps, kept_d, kept_q, margin):
    """Process events until the run is done (returns 0) or the heap needs room (returns 1)."""
    cap = ht.size
    if gi[G_STARTED] == 0:
        gi[G_STARTED] = 1
        if not _start(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                      quality, fin):
            _step_done(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                       quality, fin, steps, kept_d, kept_q, 0)
    while gi[G_DONE] == 0:
        if gi[G_NHEAP] + margin > cap:
            return 1
        if gi[G_NHEAP] == 0:
            raise RuntimeError("the event heap ran dry before the run ended")
        now, pay = _pop(gi, ht, hk, hp)
        gi[G_EVENTS] += 1
        gf[GF_NOW] = now
        kind = pay >> np.int64(59)
        a = pay & _A_MASK
        b = (pay >> _A_BITS) & _B_MASK
        if kind == EV_WORK:
            k = a
            if b != ri[k, R_TOKEN]:
                continue
            ri[k, R_INTO] = 0
            if ri[k, R_DOWNL]:  # Replica._on_downloaded
                ri[k, R_DOWNL] = 0
                gf[GF_DOWNLOAD] += pf[PF_DOWNLOAD]
                ri[k, R_LOADED] = 1
                _replica_live(k, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                              st, hops, quality, fin)
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
                continue
            # Replica._on_pass, then ReplicaFlow.pass_done
            mb = ri[k, R_CUR]
            ri[k, R_CUR] = -1
            ri[k, R_LOAD] -= 1
            work = rf[k, F_WORK]
            rf[k, F_BUSY] += work
            gf[GF_BUSY] += work
            ri[k, R_PASSES] += 1
            j = mi[mb, M_STAGE]
            if mi[mb, M_BACK] == 0:
                if mi[mb, M_TARGET] >= 0:
                    gf[GF_RECOMPUTE] += work
                hr[mb, j] = k
                he_[mb, j] = ri[k, R_EPOCH]
                ri[k, R_INFLIGHT] += 1
                if mi[mb, M_TARGET] == j:
                    mi[mb, M_TARGET] = -1
                    mi[mb, M_BACK] = 1
                    _push_mb(ri, si, mi, gi, gf, ht, hk, hp, k, mb, True)
                else:
                    _move(OP_FNEXT, mb, j, pi, pf, ri, rf, si, mi, mf, hr, he_, gi,
                          gf, ht, hk, hp, st, hops, quality, fin)
            else:
                if ri[k, R_INFLIGHT] > 0:
                    ri[k, R_INFLIGHT] -= 1
                _move(OP_BNEXT, mb, j, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf,
                      ht, hk, hp, st, hops, quality, fin)
            if not _serve(k, pi, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
        elif kind == EV_WAKE:
            k = a
            if b == 2:
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
            elif not _serve(k, pi, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
        elif kind == EV_FAIL:
            _fail_event(a, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st,
                        hops, quality, fin)
        elif kind == EV_INTR:  # Replica._on_interrupt
            k = a
            el = now - rf[k, F_T0]
            if ri[k, R_DOWNL]:
                ri[k, R_DOWNL] = 0
                gf[GF_DOWNLOAD] += el
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
                continue
            mb = ri[k, R_CUR]
            ri[k, R_CUR] = -1
            ri[k, R_LOAD] -= 1
            rf[k, F_BUSY] += el
            gf[GF_BUSY] += el
            gi[G_LOSTP] += 1  # ReplicaFlow.pass_lost
            gf[GF_LOSTPASS] += el
            if not mi[mb, M_DEAD]:
                _requeue(mb, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp,
                          st, hops, quality, fin)
            if not _serve(k, pi, ri, rf, si, mi, gi, gf, ht, hk, hp, st):
                _outer(k, pi, pf, ri, rf, si, mi, gi, gf, ht, hk, hp, st)
        elif kind == EV_AFWD:
            _move(OP_AFWD, a, b, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk,
                  hp, st, hops, quality, fin)
        elif kind == EV_ABACK:
            _move(OP_ABACK, a, b, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht,
                  hk, hp, st, hops, quality, fin)
        elif kind == EV_EXPIRE:  # ReplicaFlow._expire
            mb = a
            if mi[mb, M_WAITING] == 1 and mi[mb, M_WID] == b:
                j = mi[mb, M_STAGE]
                p, n = mi[mb, M_WPREV], mi[mb, M_WNEXT]
                if p < 0:
                    si[j, S_W_H] = n
                else:
                    mi[p, M_WNEXT] = n
                if n < 0:
                    si[j, S_W_T] = p
                else:
                    mi[n, M_WPREV] = p
                mi[mb, M_WAITING] = 0
                gf[GF_STALL] += pf[PF_MAXWAIT]
                if not mi[mb, M_DEAD]:
                    _blocked(pi, ri, si, mi, hr, he_, gi, gf, ht, hk, hp, mb)
        elif kind == EV_TRAINER:
            _step_done(pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht, hk, hp, st, hops,
                       quality, fin, steps, kept_d, kept_q, a)
        elif kind == EV_ARRIVAL:
            mb = gi[G_ARRIVED]
            _new_mb(mb, mi, mf, hr, now)
            gi[G_ARRIVED] = mb + 1
            _move(OP_AFWD, mb, 0, pi, pf, ri, rf, si, mi, mf, hr, he_, gi, gf, ht,
                  hk, hp, st, hops, quality, fin)
            if mb + 1 < pi[P_TOTAL]:
                _push(gi, ht, hk, hp, now + _gap(pi, pf, st), _NORMAL, EV_ARRIVAL, 0, 0)
        else:  # EV_DONE
            gi[G_DONE] = 1
    return 0


def new_state(*, stage_of: np.ndarray, index_of: np.ndarray, counts: np.ndarray,
              speeds: np.ndarray, fwd: np.ndarray, bwd: np.ndarray, ints: np.ndarray,
              floats: np.ndarray, hops: np.ndarray, quality: np.ndarray,
              states: np.ndarray) -> dict:
    """The arrays of one run (see :func:`run_kernel`)."""
    R, L = int(ints[P_R]), int(ints[P_L])
    slots = int(ints[P_SLOTS])
    ri = np.zeros((R, R_NI), dtype=np.int64)
    ri[:, R_STAGE] = stage_of
    ri[:, R_IDX] = index_of
    ri[:, R_CUR] = -1
    ri[:, [R_IPREV, R_INEXT, R_HI_H, R_HI_T, R_LO_H, R_LO_T]] = -1
    ri[:, R_OWNUP] = 1
    rf = np.zeros((R, F_NF + 1))
    rf[:, F_FWD] = fwd
    rf[:, F_BWD] = bwd
    rf[:, F_NF] = speeds  # the last column: speeds, read by the weighted routing
    si = np.zeros((L, S_NI), dtype=np.int64)
    si[:, S_FIRST] = np.concatenate([[0], np.cumsum(counts)[:-1]])
    si[:, S_COUNT] = counts
    si[:, [S_IDLE_H, S_IDLE_T, S_SHI_H, S_SHI_T, S_SLO_H, S_SLO_T, S_W_H, S_W_T]] = -1
    si[:, S_DOMUP] = 1
    mi = np.full((slots, M_NI), -1, dtype=np.int64)
    mf = np.zeros((slots, MF_NF))
    hr = np.full((slots, L), -1, dtype=np.int32)
    he_ = np.zeros((slots, L), dtype=np.int32)
    margin = slots + 4 * R + 2 * L + 64
    cap = 2 * margin + R + L
    total = int(ints[P_TOTAL]) if ints[P_ASYNC] else 0
    return {
        "pi": ints, "pf": floats, "ri": ri, "rf": rf, "si": si, "mi": mi, "mf": mf, "hr": hr,
        "he_": he_, "gi": np.zeros(G_NI, dtype=np.int64), "gf": np.zeros(GF_NF),
        "heap": [np.empty(cap), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)],
        "st": states, "hops": hops, "quality": quality,
        "fin": np.empty(max(total, 1)), "steps": np.empty(max(int(ints[P_N]), 1)),
        "kept_d": np.zeros(max(int(ints[P_N]), 1), dtype=np.int64),
        "kept_q": np.zeros(max(int(ints[P_N]), 1)), "margin": margin,
    }


def run_kernel(s: dict) -> dict:
    """Run the state ``s`` of :func:`new_state` to the end (growing the heap as needed)."""
    if not HAVE_NUMBA:
        raise RuntimeError("the compiled training engine needs numba: pip install 'dtsim[fast]'")
    while True:
        ht, hk, hp = s["heap"]
        status = advance(s["pi"], s["pf"], s["ri"], s["rf"], s["si"], s["mi"], s["mf"], s["hr"],
                         s["he_"], s["gi"], s["gf"], ht, hk, hp, s["st"], s["hops"],
                         s["quality"], s["fin"], s["steps"], s["kept_d"], s["kept_q"],
                         s["margin"])
        if status == 0:
            return s
        n = ht.size
        s["heap"] = [np.concatenate([x, np.empty(n, dtype=x.dtype)]) for x in s["heap"]]
