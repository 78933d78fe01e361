"""A compiled event loop for asynchronous gossip (numba), the machine-speed engine.

The loop simulates the same law as the SimPy ``async`` engine: every node wakes
on its own Poisson clock (the superposition of ``n`` clocks of rate ``w`` is one
clock of rate ``n w`` that picks the node uniformly), an awake honest node adds
its noise, picks a uniformly random online neighbour, and the two exchange the
values they hold (or, for an adversary, the value it chooses to send). The
exchange is delivered ``delay`` later (the edge's latency plus the model size
over its bandwidth), through a binary heap of deliveries in flight; at delivery
each honest, online end moves by ``clip(v_other - x_self, tau_self) / 2``.
Churn is exponential up and down times per node, drawn lazily (memory does not
grow with the horizon) from an exact stationary start.

Random numbers come from xoshiro256** generators, one per concern (wake times,
nodes and partners, noise, churn), seeded from the run's named streams, so the
draws of one concern do not depend on another's.

The kernel takes plain arrays; :mod:`sim.gossip` builds them from a config and
asks the adversary and the defence for their compiled form.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is the optional extra ``dtsim[fast]``
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "ADV_HONEST", "ADV_CONSTANT", "ADV_ALIE", "ADV_SIGNFLIP",
           "ADV_DISSENSUS", "stream_states", "run_async"]

#: Sender kinds of the kernel (per node).
ADV_HONEST, ADV_CONSTANT, ADV_ALIE, ADV_SIGNFLIP, ADV_DISSENSUS = 0, 1, 2, 3, 4

#: Generator slots: wake times, node and partner choice, noise, churn.
_WAKE, _PICK, _NOISE, _CHURN = 0, 1, 2, 3


def stream_states(rngs: list[np.random.Generator]) -> np.ndarray:
    """xoshiro256** states (``(k, 4)`` uint64), one per numpy generator given."""
    out = np.empty((len(rngs), 4), dtype=np.uint64)
    for k, g in enumerate(rngs):
        st = g.integers(0, 2**64 - 1, size=4, dtype=np.uint64, endpoint=True)
        if not st.any():
            st[0] = 1
        out[k] = st
    return out


def _identity(f):
    return f


_jit = numba.njit(cache=True, nogil=True) if HAVE_NUMBA else _identity


@_jit
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@_jit
def _next(st, k):
    s0, s1, s2, s3 = st[k, 0], st[k, 1], st[k, 2], st[k, 3]
    r = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    st[k, 0], st[k, 1], st[k, 2], st[k, 3] = s0, s1, s2, s3
    return r


@_jit
def _uniform(st, k):
    return float(_next(st, k) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@_jit
def _expo(st, k, mean):
    return -math.log1p(-_uniform(st, k)) * mean


@_jit
def _normal(st, k):
    # Box-Muller, one value per call (the other is dropped: keeps the stream stateless)
    u1 = _uniform(st, k)
    u2 = _uniform(st, k)
    return math.sqrt(-2.0 * math.log1p(-u1)) * math.cos(2.0 * math.pi * u2)


@_jit
def _advance_churn(i, t, up, next_toggle, mean_up, mean_down, st):
    while next_toggle[i] <= t:
        if up[i]:
            up[i] = False
            next_toggle[i] += _expo(st, _CHURN, mean_down)
        else:
            up[i] = True
            next_toggle[i] += _expo(st, _CHURN, mean_up)


@_jit
def _is_up(i, t, churn, up, next_toggle, mean_up, mean_down, st):
    if not churn:
        return True
    _advance_churn(i, t, up, next_toggle, mean_up, mean_down, st)
    return up[i]


@_jit
def _honest_stats(x, honest, mean, sd):
    n, d = x.shape
    h = 0
    mean[:] = 0.0
    for i in range(n):
        if honest[i]:
            h += 1
            for c in range(d):
                mean[c] += x[i, c]
    for c in range(d):
        mean[c] /= max(h, 1)
    sd[:] = 0.0
    for i in range(n):
        if honest[i]:
            for c in range(d):
                dv = x[i, c] - mean[c]
                sd[c] += dv * dv
    for c in range(d):
        sd[c] = math.sqrt(sd[c] / max(h, 1))


@_jit
def _send(src, dst, out, x, kind, param, const, honest, indptr, indices, complete, mean, sd):
    """Value ``src`` sends to ``dst`` into ``out`` (honest: its own value)."""
    d = x.shape[1]
    k = kind[src]
    if k == ADV_HONEST:
        for c in range(d):
            out[c] = x[src, c]
    elif k == ADV_CONSTANT:
        for c in range(d):
            out[c] = const[src, c]
    elif k == ADV_ALIE:
        _honest_stats(x, honest, mean, sd)
        for c in range(d):
            out[c] = mean[c] + param[src] * sd[c]
    elif k == ADV_SIGNFLIP:
        for c in range(d):
            out[c] = -x[dst, c]
    else:  # ADV_DISSENSUS: away from dst's honest neighbours' mean
        for c in range(d):
            mean[c] = 0.0
        h = 0
        if complete:
            for j in range(x.shape[0]):
                if honest[j] and j != dst:
                    h += 1
                    for c in range(d):
                        mean[c] += x[j, c]
        else:
            for e in range(indptr[dst], indptr[dst + 1]):
                j = indices[e]
                if honest[j]:
                    h += 1
                    for c in range(d):
                        mean[c] += x[j, c]
        for c in range(d):
            nm = mean[c] / h if h else x[dst, c]
            out[c] = x[dst, c] - param[src] * (nm - x[dst, c])


@_jit
def _move(i, v, x, tau):
    """``x_i += clip(v - x_i, tau) / 2``."""
    d = x.shape[1]
    norm2 = 0.0
    for c in range(d):
        dv = v[c] - x[i, c]
        norm2 += dv * dv
    scale = 0.5
    if tau < math.inf and norm2 > tau * tau:
        scale = 0.5 * tau / math.sqrt(norm2)
    for c in range(d):
        x[i, c] += (v[c] - x[i, c]) * scale


@_jit
def _record(r, x, honest, dis, hmean, nexch, exchanges):
    n, d = x.shape
    h = 0
    for c in range(d):
        hmean[r, c] = 0.0
    for i in range(n):
        if honest[i]:
            h += 1
            for c in range(d):
                hmean[r, c] += x[i, c]
    for c in range(d):
        hmean[r, c] /= max(h, 1)
    s = 0.0
    for i in range(n):
        if honest[i]:
            for c in range(d):
                dv = x[i, c] - hmean[r, c]
                s += dv * dv
    dis[r] = s
    nexch[r] = exchanges


@_jit
def _kernel(x, honest, kind, param, const, tau, complete, complete_delay, indptr, indices,
            edge_delay, wake_rate, noise, churn, availability, mean_downtime, record_times,
            st):
    n, d = x.shape
    nrec = record_times.size
    dis = np.empty(nrec)
    hmean = np.empty((nrec, d))
    nexch = np.empty(nrec, dtype=np.int64)
    mean = np.empty(d)
    sd = np.empty(d)
    vi = np.empty(d)
    vj = np.empty(d)
    # churn: exact stationary start (memoryless laws)
    up = np.ones(n, dtype=np.bool_)
    next_toggle = np.full(n, math.inf)
    mean_up = math.inf
    if churn:
        mean_up = availability * mean_downtime / (1.0 - availability)
        for i in range(n):
            up[i] = _uniform(st, _CHURN) < availability
            next_toggle[i] = _expo(st, _CHURN, mean_up if up[i] else mean_downtime)
    # deliveries in flight: a binary heap of slots (due time, i, j, values)
    cap = 1024
    due = np.empty(cap)
    hi = np.empty(cap, dtype=np.int64)
    hj = np.empty(cap, dtype=np.int64)
    hvi = np.empty((cap, d))
    hvj = np.empty((cap, d))
    hn = 0
    exchanges = 0
    r = 0
    now = 0.0
    while r < nrec and record_times[r] <= 0.0:
        _record(r, x, honest, dis, hmean, nexch, exchanges)
        r += 1
    total_rate = n * wake_rate
    horizon = record_times[nrec - 1]
    while True:
        now += _expo(st, _WAKE, 1.0 / total_rate)
        # deliveries and records due before this wake, in time order
        while True:
            t_del = due[0] if hn > 0 else math.inf
            t_rec = record_times[r] if r < nrec else math.inf
            if t_del > now and t_rec > now:
                break
            if t_rec < t_del:
                _record(r, x, honest, dis, hmean, nexch, exchanges)
                r += 1
                continue
            a, b = hi[0], hj[0]
            if honest[a] and _is_up(a, t_del, churn, up, next_toggle, mean_up, mean_downtime, st):
                _move(a, hvj[0], x, tau[a])
            if honest[b] and _is_up(b, t_del, churn, up, next_toggle, mean_up, mean_downtime, st):
                _move(b, hvi[0], x, tau[b])
            exchanges += 1
            hn -= 1
            if hn > 0:  # sift the last slot down from the root
                ld, li, lj = due[hn], hi[hn], hj[hn]
                for c in range(d):
                    vi[c] = hvi[hn, c]
                    vj[c] = hvj[hn, c]
                k = 0
                while True:
                    ch = 2 * k + 1
                    if ch >= hn:
                        break
                    if ch + 1 < hn and due[ch + 1] < due[ch]:
                        ch += 1
                    if ld <= due[ch]:
                        break
                    due[k], hi[k], hj[k] = due[ch], hi[ch], hj[ch]
                    for c in range(d):
                        hvi[k, c] = hvi[ch, c]
                        hvj[k, c] = hvj[ch, c]
                    k = ch
                due[k], hi[k], hj[k] = ld, li, lj
                for c in range(d):
                    hvi[k, c] = vi[c]
                    hvj[k, c] = vj[c]
        if now > horizon:
            break
        i = int(_uniform(st, _PICK) * n)
        u = _uniform(st, _PICK)
        if not _is_up(i, now, churn, up, next_toggle, mean_up, mean_downtime, st):
            continue
        # a uniformly random online neighbour
        j = -1
        delay = complete_delay
        if complete:
            j = int(u * (n - 1))
            j += j >= i
            if churn and not _is_up(j, now, churn, up, next_toggle, mean_up, mean_downtime, st):
                j = -1
                for _ in range(64):
                    c = int(_uniform(st, _PICK) * (n - 1))
                    c += c >= i
                    if _is_up(c, now, churn, up, next_toggle, mean_up, mean_downtime, st):
                        j = c
                        break
                if j < 0:
                    cnt = 0
                    for c in range(n):
                        if c != i and _is_up(c, now, churn, up, next_toggle, mean_up,
                                             mean_downtime, st):
                            cnt += 1
                    if cnt:
                        pick = int(u * cnt)
                        for c in range(n):
                            if c != i and _is_up(c, now, churn, up, next_toggle, mean_up,
                                                 mean_downtime, st):
                                if pick == 0:
                                    j = c
                                    break
                                pick -= 1
        else:
            lo, hi_e = indptr[i], indptr[i + 1]
            if hi_e > lo:
                if not churn:
                    e = lo + int(u * (hi_e - lo))
                    j, delay = indices[e], edge_delay[e]
                else:
                    cnt = 0
                    for e in range(lo, hi_e):
                        if _is_up(indices[e], now, churn, up, next_toggle, mean_up,
                                  mean_downtime, st):
                            cnt += 1
                    if cnt:
                        pick = int(u * cnt)
                        for e in range(lo, hi_e):
                            if _is_up(indices[e], now, churn, up, next_toggle, mean_up,
                                      mean_downtime, st):
                                if pick == 0:
                                    j, delay = indices[e], edge_delay[e]
                                    break
                                pick -= 1
        if j < 0:
            continue
        if noise > 0.0 and honest[i]:
            for c in range(d):
                x[i, c] += noise * _normal(st, _NOISE)
        # honest senders inline (a call per exchange costs more than the exchange)
        if kind[i] == ADV_HONEST:
            for c in range(d):
                vi[c] = x[i, c]
        else:
            _send(i, j, vi, x, kind, param, const, honest, indptr, indices, complete, mean, sd)
        if kind[j] == ADV_HONEST:
            for c in range(d):
                vj[c] = x[j, c]
        else:
            _send(j, i, vj, x, kind, param, const, honest, indptr, indices, complete, mean, sd)
        if delay <= 0.0:
            if honest[i]:
                _move(i, vj, x, tau[i])
            if honest[j]:
                _move(j, vi, x, tau[j])
            exchanges += 1
            continue
        if hn == cap:  # grow the heap
            cap *= 2
            due2 = np.empty(cap)
            due2[:hn] = due[:hn]
            due = due2
            t2 = np.empty(cap, dtype=np.int64)
            t2[:hn] = hi[:hn]
            hi = t2
            t3 = np.empty(cap, dtype=np.int64)
            t3[:hn] = hj[:hn]
            hj = t3
            v2 = np.empty((cap, d))
            v2[:hn] = hvi[:hn]
            hvi = v2
            v3 = np.empty((cap, d))
            v3[:hn] = hvj[:hn]
            hvj = v3
        t_due = now + delay
        k = hn
        hn += 1
        while k > 0:
            p = (k - 1) // 2
            if due[p] <= t_due:
                break
            due[k], hi[k], hj[k] = due[p], hi[p], hj[p]
            for c in range(d):
                hvi[k, c] = hvi[p, c]
                hvj[k, c] = hvj[p, c]
            k = p
        due[k], hi[k], hj[k] = t_due, i, j
        for c in range(d):
            hvi[k, c] = vi[c]
            hvj[k, c] = vj[c]
    while r < nrec:
        _record(r, x, honest, dis, hmean, nexch, exchanges)
        r += 1
    return dis, hmean, nexch, hn


def run_async(x: np.ndarray, honest: np.ndarray, kind: np.ndarray, param: np.ndarray,
              const: np.ndarray, tau: np.ndarray, *, record_times: np.ndarray,
              states: np.ndarray, wake_rate: float = 1.0, noise: float = 0.0,
              complete: bool = True, complete_delay: float = 0.0,
              indptr: np.ndarray | None = None, indices: np.ndarray | None = None,
              edge_delay: np.ndarray | None = None, availability: float = 1.0,
              mean_downtime: float = 1.0) -> dict[str, np.ndarray]:
    """Run the compiled async gossip loop in place on ``x``.

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, d)`` values, updated in place.
    honest : numpy.ndarray of bool
        ``(n,)``; adversaries never update.
    kind, param, const : numpy.ndarray
        Per node: sender kind (``ADV_*``), its scalar parameter (ALIE ``z``,
        dissensus ``eps``) and its constant value row (``ADV_CONSTANT``).
    tau : numpy.ndarray
        ``(n,)`` clipping radius of each receiver (``inf``: plain averaging).
    record_times : numpy.ndarray
        Increasing times at which to record; the last one is the horizon.
    states : numpy.ndarray
        ``(4, 4)`` uint64 generator states (:func:`stream_states`): wake, pick,
        noise, churn.
    wake_rate, noise : float
        Poisson clock rate per node; noise standard deviation added at a wake.
    complete, complete_delay : bool, float
        Complete graph with one exchange time, or a CSR graph
        (``indptr``, ``indices``, ``edge_delay`` per directed edge).
    availability, mean_downtime : float
        Exponential churn of every node (``availability = 1``: none).

    Returns
    -------
    dict
        ``disagreement`` and ``exchanges`` (per record), ``honest_mean``
        (``(records, d)``) and ``in_flight`` (deliveries pending at the horizon).
    """
    if not HAVE_NUMBA:
        raise RuntimeError("the compiled engine needs numba: pip install 'dtsim[fast]'")
    if indptr is None:
        indptr = np.zeros(1, dtype=np.int64)
        indices = np.zeros(0, dtype=np.int64)
        edge_delay = np.zeros(0)
    dis, hmean, nexch, pending = _kernel(
        x, np.ascontiguousarray(honest, dtype=np.bool_), np.ascontiguousarray(kind, dtype=np.int64),
        np.ascontiguousarray(param, dtype=float), np.ascontiguousarray(const, dtype=float),
        np.ascontiguousarray(tau, dtype=float), bool(complete), float(complete_delay),
        np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int64),
        np.ascontiguousarray(edge_delay, dtype=float), float(wake_rate), float(noise),
        availability < 1.0, float(availability), float(mean_downtime),
        np.ascontiguousarray(record_times, dtype=float), states)
    return {"disagreement": dis, "honest_mean": hmean, "exchanges": nexch,
            "in_flight": int(pending)}
