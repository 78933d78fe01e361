"""A compiled event loop for asynchronous gossip (numba), the machine-speed engine.

The loop simulates the same law as the SimPy ``async`` engine: every node wakes
on its own Poisson clock (the superposition of ``n`` clocks of rate ``w`` is one
clock of rate ``n w`` that picks the node uniformly), an awake honest node adds
its noise, picks a uniformly random online neighbour, and the two exchange the
values they hold (or, for an adversary, the value it chooses to send). The
exchange is delivered ``delay`` later (the edge's latency plus the model size
over its bandwidth), through a binary heap of deliveries in flight; at delivery
each honest, online end moves by ``clip(v_other - x_self, tau_self) / 2``.
A receiver's clipping radius is fixed per node, or (``adaptive``) the
ClippedGossip oracle radius ``sqrt(sum_{honest j in N(i)} |x_j - x_i|^2 / a_i)``
computed at the delivery from the values then held (``a_i`` its adversarial
neighbours; no clip where ``a_i = 0``), as :class:`sim.adversaries.AdaptiveClip`.

Churn is either exponential up and down times per node, drawn lazily (memory
does not grow with the horizon) from an exact stationary start, or given
change times per node (a replayed trace, loaded in chunks by the caller:
:meth:`AsyncLoop.load_changes`).

Local training (``train``): every honest node takes noisy gradient steps on
its quadratic ``1/2 sum_k a_ik (x_k - c_ik)^2`` at its own pace (one step per
``step_time[i]``), applied lazily where the SimPy engine applies them (both
ends when an exchange starts, a receiving end before a delivery, every honest
node at a record): the law of :meth:`sim.learning.LocalSGD.advance`.

Random numbers come from xoshiro256** generators, one per concern (wake times,
nodes and partners, noise, churn, gradient noise), seeded from the run's named
streams, so the draws of one concern do not depend on another's.

The kernel takes plain arrays; :mod:`sim.gossip.compiled` builds them from a
config and asks the adversary and the defence for their compiled form.
"""

from __future__ import annotations

import math

import numpy as np

from ..xoshiro import HAVE_NUMBA, jit, readonly, stream_states
from ..xoshiro import next_u64 as _next

__all__ = ["HAVE_NUMBA", "ADV_HONEST", "ADV_CONSTANT", "ADV_ALIE", "ADV_SIGNFLIP",
           "ADV_DISSENSUS", "ADV_IPM", "SENDER_KINDS", "CHURN_NONE", "CHURN_EXP", "CHURN_TIMES",
           "stream_states", "AsyncLoop", "run_async"]

#: Sender kinds of the kernel (per node).
ADV_HONEST, ADV_CONSTANT, ADV_ALIE, ADV_SIGNFLIP, ADV_DISSENSUS, ADV_IPM = 0, 1, 2, 3, 4, 5
#: The compiled form an adversary may declare (:meth:`sim.adversaries.Adversary.compiled_form`).
SENDER_KINDS = {"alie": ADV_ALIE, "signflip": ADV_SIGNFLIP, "dissensus": ADV_DISSENSUS,
                "ipm": ADV_IPM}

#: Generator slots: wake times, node and partner choice, noise, churn, gradient noise. numpy
#: integers, not Python ones: numba types a Python int constant passed to a jitted function
#: as a literal and compiles that function once per value (six copies of the uniform draw,
#: three of the exponential, about 5 s of a cold compile); a numpy integer is typed int64.
_WAKE, _PICK, _NOISE, _CHURN, _GRAD = (np.int64(k) for k in range(5))
#: Churn modes of the kernel: none, exponential (lazy draws), given change times (a trace).
CHURN_NONE, CHURN_EXP, CHURN_TIMES = 0, 1, 2


_jit = jit


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
def _is_up(i, t, churn, up, next_toggle, mean_up, mean_down, st, tr_ptr, tr_times, tr_pos):
    """Whether node ``i`` is up at time ``t`` (queries come in time order)."""
    if churn == CHURN_NONE:
        return True
    if churn == CHURN_EXP:
        while next_toggle[i] <= t:
            if up[i]:
                up[i] = False
                next_toggle[i] += _expo(st, _CHURN, mean_down)
            else:
                up[i] = True
                next_toggle[i] += _expo(st, _CHURN, mean_up)
    else:  # given change times: every change at or before t has happened
        while next_toggle[i] <= t:
            up[i] = not up[i]
            p = tr_pos[i] + 1
            tr_pos[i] = p
            next_toggle[i] = tr_times[p] if p < tr_ptr[i + 1] else math.inf
    return up[i]


@_jit
def _settle(t, up, next_toggle, tr_ptr, tr_times, tr_pos):
    """Apply every loaded change at or before ``t`` to every node (given change times)."""
    for i in range(up.size):
        while next_toggle[i] <= t:
            up[i] = not up[i]
            p = tr_pos[i] + 1
            tr_pos[i] = p
            next_toggle[i] = tr_times[p] if p < tr_ptr[i + 1] else math.inf


@_jit
def _load(next_toggle, tr_ptr, tr_times, tr_pos):
    for i in range(next_toggle.size):
        tr_pos[i] = tr_ptr[i]
        next_toggle[i] = tr_times[tr_ptr[i]] if tr_ptr[i] < tr_ptr[i + 1] else math.inf


@_jit
def _train(i, now, x, tmask, last, phase, step_time, lr, gnoise, curv, cent, st, counts):
    """Node ``i``'s local steps completed since it was last brought up to date (honest ``i``)."""
    el = now - last[i]
    last[i] = now
    if not tmask[i]:
        return
    done = phase[i] + el
    t = step_time[i]
    k = int(done // t)
    phase[i] = done - k * t
    d = x.shape[1]
    for _ in range(k):
        for c in range(d):
            g = curv[i, c] * (x[i, c] - cent[i, c])
            if gnoise > 0.0:
                g += gnoise * _normal(st, _GRAD)
            x[i, c] -= lr * g
    counts[2] += k


@_jit
def _train_all(now, x, honest, tmask, last, phase, step_time, lr, gnoise, curv, cent, st, counts):
    for i in range(x.shape[0]):
        if honest[i]:
            _train(i, now, x, tmask, last, phase, step_time, lr, gnoise, curv, cent, st, counts)


@_jit
def _oracle_radius(i, x, honest, adeg, indptr, indices, complete):
    """ClippedGossip's oracle radius of receiver ``i`` from the values now (``inf``: no adversary)."""
    if adeg[i] == 0:
        return math.inf
    d = x.shape[1]
    tot = 0.0
    if complete:
        for j in range(x.shape[0]):
            if honest[j] and j != i:
                for c in range(d):
                    dv = x[j, c] - x[i, c]
                    tot += dv * dv
    else:
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if honest[j]:
                for c in range(d):
                    dv = x[j, c] - x[i, c]
                    tot += dv * dv
    return math.sqrt(tot / adeg[i])


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
    elif k == ADV_IPM:
        _honest_stats(x, honest, mean, sd)
        for c in range(d):
            out[c] = -param[src] * mean[c]
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
def _advance(t_end, x, honest, kind, param, const, tau, adaptive, adeg, complete, complete_delay,
             indptr, indices, edge_delay, wake_rate, noise, churn, availability, mean_downtime,
             train, tmask, step_time, lr, gnoise, curv, cent, up, next_toggle, tr_ptr, tr_times,
             tr_pos, last, phase, clock, counts, heap_t, heap_ij, heap_v, st):
    """Run the loop up to time ``t_end``; the state lives in the arrays passed.

    ``clock[0]`` is the time of the next wake (drawn but not yet run);
    ``counts`` holds the heap size, the deliveries and the local steps so far.
    Returns True when it stopped before a wake because the heap was full (a
    wake adds at most one delivery): the caller grows the heap arrays and calls
    again, which resumes at that wake. The kernel allocates no 2-D array
    itself, which spares numba compiling its shape-error formatting (about 7 s
    of a cold compile).
    """
    n, d = x.shape
    mean = np.empty(d)
    sd = np.empty(d)
    vi = np.empty(d)
    vj = np.empty(d)
    tmp = np.empty(2 * d)
    mean_up = math.inf
    if churn == CHURN_EXP:
        mean_up = availability * mean_downtime / (1.0 - availability)
    total_rate = n * wake_rate
    while True:
        now = clock[0]
        # deliveries due before the next wake (or by t_end), in due order
        # (inline: a call with this many arguments per wake costs more than the delivery)
        t_due_by = min(now, t_end)
        if counts[0] > 0 and heap_t[0] <= t_due_by:
            hn = counts[0]
            while hn > 0 and heap_t[0] <= t_due_by:
                t_del = heap_t[0]
                a, b = heap_ij[0, 0], heap_ij[0, 1]
                # each honest, online end moves
                if honest[a] and (churn == CHURN_NONE or _is_up(
                        a, t_del, churn, up, next_toggle, mean_up, mean_downtime, st, tr_ptr,
                        tr_times, tr_pos)):
                    if train:
                        _train(a, t_del, x, tmask, last, phase, step_time, lr, gnoise, curv,
                               cent, st, counts)
                    r = (_oracle_radius(a, x, honest, adeg, indptr, indices, complete)
                         if adaptive else tau[a])
                    _move(a, heap_v[0, d:], x, r)
                if honest[b] and (churn == CHURN_NONE or _is_up(
                        b, t_del, churn, up, next_toggle, mean_up, mean_downtime, st, tr_ptr,
                        tr_times, tr_pos)):
                    if train:
                        _train(b, t_del, x, tmask, last, phase, step_time, lr, gnoise, curv,
                               cent, st, counts)
                    r = (_oracle_radius(b, x, honest, adeg, indptr, indices, complete)
                         if adaptive else tau[b])
                    _move(b, heap_v[0, :d], x, r)
                counts[1] += 1
                hn -= 1
                if hn > 0:  # sift the last slot down from the root
                    lt = heap_t[hn]
                    li, lj = heap_ij[hn, 0], heap_ij[hn, 1]
                    for c in range(2 * d):
                        tmp[c] = heap_v[hn, c]
                    k = 0
                    while True:
                        ch = 2 * k + 1
                        if ch >= hn:
                            break
                        if ch + 1 < hn and heap_t[ch + 1] < heap_t[ch]:
                            ch += 1
                        if lt <= heap_t[ch]:
                            break
                        heap_t[k] = heap_t[ch]
                        heap_ij[k, 0], heap_ij[k, 1] = heap_ij[ch, 0], heap_ij[ch, 1]
                        for c in range(2 * d):
                            heap_v[k, c] = heap_v[ch, c]
                        k = ch
                    heap_t[k] = lt
                    heap_ij[k, 0], heap_ij[k, 1] = li, lj
                    for c in range(2 * d):
                        heap_v[k, c] = tmp[c]
            counts[0] = hn
        if now > t_end:
            break
        if counts[0] == heap_t.size:  # full: grown by the caller, which calls again
            return True
        clock[0] = now + _expo(st, _WAKE, 1.0 / total_rate)
        i = int(_uniform(st, _PICK) * n)
        u = _uniform(st, _PICK)
        if churn and not _is_up(i, now, churn, up, next_toggle, mean_up, mean_downtime, st,
                                tr_ptr, tr_times, tr_pos):
            continue
        # a uniformly random online neighbour
        j = -1
        delay = complete_delay
        if complete:
            j = int(u * (n - 1))
            j += j >= i
            if churn and not _is_up(j, now, churn, up, next_toggle, mean_up, mean_downtime, st,
                                    tr_ptr, tr_times, tr_pos):
                j = -1
                for _ in range(64):
                    c = int(_uniform(st, _PICK) * (n - 1))
                    c += c >= i
                    if _is_up(c, now, churn, up, next_toggle, mean_up, mean_downtime, st,
                              tr_ptr, tr_times, tr_pos):
                        j = c
                        break
                if j < 0:
                    cnt = 0
                    for c in range(n):
                        if c != i and _is_up(c, now, churn, up, next_toggle, mean_up,
                                             mean_downtime, st, tr_ptr, tr_times, tr_pos):
                            cnt += 1
                    if cnt:
                        pick = int(u * cnt)
                        for c in range(n):
                            if c != i and _is_up(c, now, churn, up, next_toggle, mean_up,
                                                 mean_downtime, st, tr_ptr, tr_times, tr_pos):
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
                                  mean_downtime, st, tr_ptr, tr_times, tr_pos):
                            cnt += 1
                    if cnt:
                        pick = int(u * cnt)
                        for e in range(lo, hi_e):
                            if _is_up(indices[e], now, churn, up, next_toggle, mean_up,
                                      mean_downtime, st, tr_ptr, tr_times, tr_pos):
                                if pick == 0:
                                    j, delay = indices[e], edge_delay[e]
                                    break
                                pick -= 1
        if j < 0:
            continue
        if train:  # both ends' local work up to now, before anything is read
            if honest[i]:
                _train(i, now, x, tmask, last, phase, step_time, lr, gnoise, curv, cent, st,
                       counts)
            if honest[j]:
                _train(j, now, x, tmask, last, phase, step_time, lr, gnoise, curv, cent, st,
                       counts)
        if noise > 0.0 and honest[i]:
            for c in range(d):
                x[i, c] += noise * _normal(st, _NOISE)
        # what each end sends; honest senders inline (a call costs more than the exchange)
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
                if adaptive:
                    _move(i, vj, x, _oracle_radius(i, x, honest, adeg, indptr, indices, complete))
                else:
                    _move(i, vj, x, tau[i])
            if honest[j]:
                if adaptive:
                    _move(j, vi, x, _oracle_radius(j, x, honest, adeg, indptr, indices, complete))
                else:
                    _move(j, vi, x, tau[j])
            counts[1] += 1
            continue
        hn = counts[0]  # < heap_t.size: checked before this wake
        t_due = now + delay
        k = hn
        counts[0] = hn + 1
        while k > 0:
            p = (k - 1) // 2
            if heap_t[p] <= t_due:
                break
            heap_t[k] = heap_t[p]
            heap_ij[k, 0], heap_ij[k, 1] = heap_ij[p, 0], heap_ij[p, 1]
            for c in range(2 * d):
                heap_v[k, c] = heap_v[p, c]
            k = p
        heap_t[k] = t_due
        heap_ij[k, 0], heap_ij[k, 1] = i, j
        for c in range(d):
            heap_v[k, c] = vi[c]
            heap_v[k, d + c] = vj[c]
    return False


class AsyncLoop:
    """The state of one compiled async gossip run, advanced to successive times.

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, d)`` values, updated in place.
    honest : numpy.ndarray of bool
        ``(n,)``; adversaries never update.
    kind, param, const : numpy.ndarray
        Per node: sender kind (``ADV_*``), its scalar parameter (ALIE ``z``,
        dissensus and IPM ``eps``) and its constant value row (``ADV_CONSTANT``).
    tau : numpy.ndarray
        ``(n,)`` clipping radius of each receiver (``inf``: plain averaging);
        unused with ``adaptive``.
    states : numpy.ndarray
        ``(5, 4)`` uint64 generator states (:func:`stream_states`): wake, pick,
        noise, churn, gradient noise (a fifth row is added when only four are given).
    wake_rate, noise : float
        Poisson clock rate per node; noise standard deviation added at a wake.
    complete, complete_delay : bool, float
        The complete graph with one exchange time, or a CSR graph
        (``indptr``, ``indices``, ``edge_delay`` per directed edge).
    availability, mean_downtime : float
        Exponential churn of every node (``availability = 1``: none).
    changes : bool
        Churn from given change times instead (:meth:`load_changes`); every
        node starts up.
    adaptive : bool
        The ClippedGossip oracle radius at every delivery instead of ``tau``.
    training : dict, optional
        Local steps on quadratics: ``lr``, ``grad_noise``, ``step_time`` (per
        node), ``train`` (mask of nodes that step), ``curvature`` and
        ``optimum`` (``(n, d)``).
    """

    def __init__(self, x: np.ndarray, honest: np.ndarray, kind: np.ndarray, param: np.ndarray,
                 const: np.ndarray, tau: np.ndarray, *, states: np.ndarray,
                 wake_rate: float = 1.0, noise: float = 0.0, complete: bool = True,
                 complete_delay: float = 0.0, indptr: np.ndarray | None = None,
                 indices: np.ndarray | None = None, edge_delay: np.ndarray | None = None,
                 availability: float = 1.0, mean_downtime: float = 1.0, changes: bool = False,
                 adaptive: bool = False, training: dict | None = None) -> None:
        if not HAVE_NUMBA:
            raise RuntimeError("the compiled engine needs numba: pip install 'dtsim[fast]'")
        n, d = x.shape
        self.x = x
        if indptr is None:
            indptr = np.zeros(1, dtype=np.int64)
            indices = np.zeros(0, dtype=np.int64)
            edge_delay = np.zeros(0)
        if states.shape[0] < 5:  # callers of the averaging loop may give four streams
            extra = np.array([[0x9E3779B97F4A7C15, 1, 2, 3]], dtype=np.uint64)
            states = np.vstack([states, np.repeat(extra, 5 - states.shape[0], axis=0)])
        self.st = states
        honest = np.ascontiguousarray(honest, dtype=np.bool_)
        self.honest = honest
        self.churn = CHURN_TIMES if changes else (CHURN_EXP if availability < 1.0 else CHURN_NONE)
        self.up = np.ones(n, dtype=np.bool_)
        self.next_toggle = np.full(n, math.inf)
        self.tr_ptr = np.zeros(n + 1, dtype=np.int64)
        self.tr_times = np.zeros(1)
        self.tr_pos = np.zeros(n, dtype=np.int64)
        self.loaded_to = 0.0
        if self.churn == CHURN_EXP:  # exact stationary start of the memoryless up/down law
            _churn_start(self.up, self.next_toggle, float(availability), float(mean_downtime),
                         states)
        # adversarial degree of every node (for the adaptive radius)
        adv = ~honest
        if complete:
            adeg = np.full(n, int(adv.sum()), dtype=np.int64) - adv.astype(np.int64)
        else:
            src = np.repeat(np.arange(n), np.diff(indptr))
            adeg = np.bincount(src, weights=adv[indices], minlength=n).astype(np.int64)
        self.train = training is not None
        tr = training or {}
        self.tmask = np.ascontiguousarray(tr.get("train", np.ones(n, dtype=bool)), dtype=np.bool_)
        step_time = np.ascontiguousarray(tr.get("step_time", np.ones(n)), dtype=float)
        curv = np.ascontiguousarray(tr.get("curvature", np.zeros((n, d))), dtype=float)
        cent = np.ascontiguousarray(tr.get("optimum", np.zeros((n, d))), dtype=float)
        self.last = np.zeros(n)
        self.phase = np.zeros(n)
        self.clock = np.zeros(1)
        self.clock[0] = _expo(states, _WAKE, 1.0 / (n * wake_rate))
        self.counts = np.zeros(3, dtype=np.int64)
        self.heap = (np.empty(1024), np.empty((1024, 2), dtype=np.int64), np.empty((1024, 2 * d)))
        self._train_args = (self.tmask, self.last, self.phase, step_time, float(tr.get("lr", 0.0)),
                            float(tr.get("grad_noise", 0.0)), curv, cent)
        self.args = (honest,
                     np.ascontiguousarray(kind, dtype=np.int64),
                     np.ascontiguousarray(param, dtype=float), np.ascontiguousarray(const, dtype=float),
                     np.ascontiguousarray(tau, dtype=float), bool(adaptive), adeg, bool(complete),
                     float(complete_delay),
                     readonly(indptr, np.int64), readonly(indices, np.int64),
                     readonly(edge_delay, float), float(wake_rate), float(noise),
                     self.churn, float(availability), float(mean_downtime), self.train,
                     self.tmask, step_time, float(tr.get("lr", 0.0)),
                     float(tr.get("grad_noise", 0.0)), curv, cent)

    @property
    def exchanges(self) -> int:
        """Exchanges delivered so far."""
        return int(self.counts[1])

    @property
    def in_flight(self) -> int:
        """Exchanges started and not yet delivered."""
        return int(self.counts[0])

    @property
    def local_steps(self) -> int:
        """Local training steps taken so far (all nodes)."""
        return int(self.counts[2])

    def load_changes(self, t_end: float, times: list[np.ndarray]) -> None:
        """Give every node's up/down change times in ``(loaded_to, t_end]`` (``changes`` churn).

        Changes loaded before and due by the previous ``t_end`` are applied
        first, so only one chunk of change times is held at a time.
        """
        _settle(self.loaded_to, self.up, self.next_toggle, self.tr_ptr, self.tr_times, self.tr_pos)
        counts = np.array([t.size for t in times], dtype=np.int64)
        self.tr_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.tr_times = np.concatenate([*times, [math.inf]]).astype(float)
        _load(self.next_toggle, self.tr_ptr, self.tr_times, self.tr_pos)
        self.loaded_to = float(t_end)

    def advance(self, t_end: float) -> None:
        """Run every wake and delivery up to time ``t_end``."""
        while _advance(float(t_end), self.x, *self.args, self.up, self.next_toggle,
                       self.tr_ptr, self.tr_times, self.tr_pos, self.last, self.phase,
                       self.clock, self.counts, *self.heap, self.st):
            hn = int(self.counts[0])  # the heap is full: twice the room, the same entries
            grown = tuple(np.empty((2 * a.shape[0], *a.shape[1:]), dtype=a.dtype)
                          for a in self.heap)
            for new, old in zip(grown, self.heap, strict=True):
                new[:hn] = old[:hn]
            self.heap = grown

    def catch_up(self, t: float) -> None:
        """Every honest node's local steps up to time ``t`` (a record reads every value)."""
        if self.train:
            _train_all(float(t), self.x, self.honest, *self._train_args, self.st, self.counts)


@_jit
def _churn_start(up, next_toggle, availability, mean_downtime, st):
    mean_up = availability * mean_downtime / (1.0 - availability)
    for i in range(up.size):
        up[i] = _uniform(st, _CHURN) < availability
        next_toggle[i] = _expo(st, _CHURN, mean_up if up[i] else mean_downtime)


def run_async(x: np.ndarray, honest: np.ndarray, kind: np.ndarray, param: np.ndarray,
              const: np.ndarray, tau: np.ndarray, *, record_times: np.ndarray,
              states: np.ndarray, **kwargs) -> dict[str, np.ndarray]:
    """Run :class:`AsyncLoop` over ``record_times``; disagreement and honest mean at each.

    Returns
    -------
    dict
        ``disagreement`` and ``exchanges`` (per record), ``honest_mean``
        (``(records, d)``) and ``in_flight`` (deliveries pending at the horizon).
    """
    loop = AsyncLoop(x, honest, kind, param, const, tau, states=states, **kwargs)
    times = np.asarray(record_times, dtype=float)
    h = np.asarray(honest, dtype=bool)
    dis = np.empty(times.size)
    hmean = np.empty((times.size, x.shape[1]))
    exch = np.empty(times.size, dtype=np.int64)
    for r, t in enumerate(times):
        if t > 0:
            loop.advance(t)
            loop.catch_up(t)
        hx = x[h]
        hmean[r] = hx.mean(axis=0)
        dis[r] = float(((hx - hmean[r]) ** 2).sum())
        exch[r] = loop.exchanges
    return {"disagreement": dis, "honest_mean": hmean, "exchanges": exch,
            "in_flight": loop.in_flight}
