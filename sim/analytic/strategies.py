"""Exact references for the fault-tolerance strategies of :mod:`sim.training.strategies`.

* :func:`linear_partition`: a pipeline template's cut of the stages into
  contiguous groups of least largest work;
* :func:`replay_checkpoint_restart`, :func:`replay_reconfiguration`,
  :func:`replay_redundancy`: the wall time of ``N`` steps when workers are
  only removed (never replaced) at given times and every step of a
  configuration takes a known time. Each walks the timeline with the
  strategy's stated rules, removal by removal, in closed arithmetic (no
  simulation): the deterministic replay the job engine must reproduce;
* :func:`checkpoint_restart_shrink`: Daly's law for checkpoint-restart
  extended to a job that shrinks as its workers fail for good (exponential
  lifetimes, no replacement, the step time a function of the workers left);
* :func:`fatal_loss_probability`: for redundancy under independent
  exponential failures, the probability that a first loss turns fatal
  before the rebalance that follows it.

Shared conventions. ``n0`` workers ``0 .. n0-1`` are up at time 0 and ready
at ``boot``; ``removals`` are ``(time, worker)``, the worker gone for good.
``step_time(sizes, held)`` gives a step's time with pipelines of ``sizes``
nodes while the job holds ``held`` workers (None: the job cannot run so
small). A removal at exactly the end of a step or phase comes after it (the
engines' rule, :data:`sim.failures.LATE`): the step is done, and what starts
then is cut at once (no work lost) by the removal.

References
----------
.. [Daly] J. T. Daly, "A higher order estimate of the optimum checkpoint
   interval for restart dumps", Future Generation Computer Systems 22(3), 2006.
.. [Bamboo] J. Thorpe et al., "Bamboo: making preemptible instances resilient
   for affordable training of large DNNs", NSDI 2023.
.. [Oobleck] I. Jang et al., "Oobleck: resilient distributed training of large
   models using pipeline templates", SOSP 2023.
.. [Varuna] S. Athlur et al., "Varuna: scalable, low-cost training of massive
   deep learning models", EuroSys 2022.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import check, check_int, check_nonnegative, check_positive

__all__ = ["linear_partition", "replay_checkpoint_restart", "replay_reconfiguration",
           "replay_redundancy", "checkpoint_restart_shrink", "fatal_loss_probability",
           "no_adjacent_pair_path", "no_adjacent_pair_cycle"]

StepTime = Callable[[tuple[int, ...], int], "float | None"]


def linear_partition(work: Sequence[float], parts: int) -> tuple[int, ...]:
    """Cut ``work`` into ``parts`` contiguous non-empty groups of least largest sum.

    Returns the group sizes. Exact (dynamic programming over the cut points;
    ties go to the earliest cuts).
    """
    w = [float(x) for x in work]
    L = len(w)
    check(1 <= parts <= L, "nodes", f"in [1, {L}] (a node holds at least one stage)", parts)
    prefix = [0.0]
    for x in w:
        prefix.append(prefix[-1] + x)
    inf = math.inf
    best = [[inf] * (L + 1) for _ in range(parts + 1)]
    cut = [[0] * (L + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for k in range(1, parts + 1):
        for i in range(k, L - (parts - k) + 1):
            for j in range(k - 1, i):
                v = max(best[k - 1][j], prefix[i] - prefix[j])
                if v < best[k][i]:
                    best[k][i], cut[k][i] = v, j
    sizes = []
    i = L
    for k in range(parts, 0, -1):
        j = cut[k][i]
        sizes.append(i - j)
        i = j
    return tuple(reversed(sizes))


# ----------------------------------------------------------------------------- replays


class _Timeline:
    """Removals still to come, and the workers still there."""

    def __init__(self, n0: int, removals: Sequence[tuple[float, int]]) -> None:
        self.alive = set(range(n0))
        self.queue = sorted((float(t), int(w)) for t, w in removals)
        self.i = 0

    def through(self, t: float, *, before: bool = False) -> list[int]:
        """Apply every removal at or before ``t`` (``before``: strictly before, those at ``t``
        left for the work starting then); the workers removed."""
        out = []
        while self.i < len(self.queue) and (self.queue[self.i][0] < t if before
                                             else self.queue[self.i][0] <= t):
            w = self.queue[self.i][1]
            self.i += 1
            if w in self.alive:
                self.alive.discard(w)
                out.append(w)
        return out

    def next_in(self, t0: float, t1: float, among: set[int] | frozenset[int] | None = None
                ) -> tuple[float, int] | None:
        """The first removal in ``[t0, t1)`` (of a worker in ``among``, if given): one at
        ``t1`` comes after the work ending then, one still pending at ``t0`` (the end of the
        work before) cuts the work starting then."""
        for k in range(self.i, len(self.queue)):
            t, w = self.queue[k]
            if t >= t1:
                return None
            if t >= t0 and w in self.alive and (among is None or w in among):
                return t, w
        return None


def _pipeline_order(alive: set[int], n0: int, stages: int) -> list[int]:
    """The workers still there in pipeline order (``s0r0, s1r0, .., s0r1, ..``): worker ``k``
    of ``n0 = L r`` numbered stage-major is stage ``k // r``, replica ``k % r``."""
    r = max(1, n0 // stages)
    return sorted(alive, key=lambda k: (k % r, k // r))


def _depth(ready: list[int], L: int, r: int, step_time: StepTime):
    P = min(len(ready) // L, r)
    if P == 0:
        return None
    t = step_time((L,) * P, len(ready))
    if t is None:
        return None
    return [tuple(ready[p * L:(p + 1) * L]) for p in range(P)], tuple(ready[P * L:]), t


def replay_checkpoint_restart(*, n0: int, removals: Sequence[tuple[float, int]], stages: int,
                              replicas: int, steps: int, step_time: StepTime, every: int,
                              checkpoint: float, restart: float, boot: float = 0.0,
                              all_held: bool = False, settle: float = 0.0) -> float:
    """Wall time of checkpoint-restart on a removal timeline (inf if it can never finish).

    Notes
    -----
    Formation: ``P = min(n // L, r)`` pipelines of ``L`` from the ``n`` workers
    left, in pipeline order (``s0r0, s1r0, ..``: :func:`_pipeline_order`), the rest spares (free the first time, ``restart``
    after). A removal of a worker the job runs on (every worker it holds when
    ``all_held``) loses the step in progress and the steps since the last
    checkpoint, during a checkpoint that checkpoint too, and during a restart
    starts it over at the removal. After each such removal the job waits
    ``settle`` (Varuna's manager's sleep, whatever is removed meanwhile) before it
    forms again from the workers left then. A checkpoint of ``checkpoint`` follows each
    ``every`` steps since the last one, and the last step (the run is done when it
    completes).
    """
    tl = _Timeline(n0, removals)
    L, N, K = stages, steps, every
    t = float(boot)
    done = committed = 0
    first = True
    while True:
        while True:  # form
            tl.through(t)
            f = _depth(_pipeline_order(tl.alive, n0, L), L, replicas, step_time)
            if f is None:
                return math.inf
            pipes, spares, T = f
            part = set(w for p in pipes for w in p) | (set(spares) if all_held else set())
            cost = 0.0 if first else restart
            hit = tl.next_in(t, t + cost, part) if cost > 0 else None
            if hit is not None:
                t = hit[0] + settle
                continue
            t += cost
            first = False
            break
        while True:  # steps
            hit = tl.next_in(t, t + T, part)
            if hit is not None:
                t, done = hit[0] + settle, committed
                break
            t += T
            done += 1
            if done - committed >= K or done == N:  # and after the last step
                hit = tl.next_in(t, t + checkpoint, part)
                if hit is not None:
                    t, done = hit[0] + settle, committed
                    break
                t += checkpoint
                committed = done
            if committed == N:
                return t


def replay_reconfiguration(*, n0: int, removals: Sequence[tuple[float, int]], stages: int,
                           steps: int, step_time: StepTime, work: Sequence[float],
                           reconfigure: float, min_nodes: int | None = None,
                           every: int = 0, checkpoint: float = 0.0, restart: float = 0.0,
                           boot: float = 0.0, most_pipelines: bool = False) -> float:
    """Wall time of reconfiguration on a removal timeline (inf if it can never finish).

    Notes
    -----
    Formation from the ``N`` workers left: for ``P`` from ``N // min_nodes``
    down to ``ceil(N / L)``, ``min(N, P L)`` nodes split as evenly as
    possible (larger first), the shortest step (strictly shorter wins, so
    ties keep more pipelines); ``most_pipelines``: only the largest ``P`` (a
    step-time table by workers held). A removal of a node the job runs on
    drops the step in progress (only it) and reconfigures (``reconfigure``)
    from the workers left; during a reconfiguration it starts it over. Each
    pipeline holds every stage, cut by :func:`linear_partition` of ``work``;
    when the removals since the last formation leave a stage with no holder
    the job rolls back to its last checkpoint (every ``every`` steps and after the
    last step, cost ``checkpoint``; none with 0) and restarts (``restart``).
    """
    tl = _Timeline(n0, removals)
    L, N = stages, steps
    low = L if min_nodes is None else min_nodes
    t = float(boot)
    done = committed = 0
    first, fatal = True, False
    holders: list[set[int]] | None = None
    dead: set[int] = set()

    def lose(ws: list[int]) -> None:
        nonlocal fatal, done
        for w in ws:
            dead.add(w)
            if holders is not None and not fatal and any(
                    w in h and h <= dead for h in holders):
                fatal, done = True, committed

    def form(ready: list[int]):
        n = len(ready)
        hi, lo = n // low, max(1, math.ceil(n / L))
        if hi < lo:
            if n < low:
                return None
            hi = lo = n // low
        best = None
        for P in (range(hi, hi - 1, -1) if most_pipelines else range(hi, lo - 1, -1)):
            used = min(n, P * L)
            q, r = divmod(used, P)
            sizes = tuple([q + 1] * r + [q] * (P - r))
            st = step_time(sizes, n)
            if st is not None and (best is None or st < best[0] * (1 - 1e-12)):
                best = (st, sizes)
        if best is None:
            return None
        pipes, k = [], 0
        for s in best[1]:
            pipes.append(tuple(ready[k:k + s]))
            k += s
        return pipes, best[0]

    while True:
        while True:  # form
            lose(tl.through(t))
            f = form(_pipeline_order(tl.alive, n0, L))
            if f is None:
                return math.inf
            pipes, T = f
            part = {w for p in pipes for w in p}
            cost = 0.0 if first else (restart if fatal else reconfigure)
            hit = tl.next_in(t, t + cost, part) if cost > 0 else None
            if hit is not None:
                t = hit[0]
                continue
            t += cost
            first, fatal = False, False
            holders = [set() for _ in range(L)]
            for p in pipes:
                sizes = linear_partition(work, len(p)) if len(p) < L else (1,) * L
                j = 0
                for w, s in zip(p, sizes, strict=True):
                    for x in range(j, j + s):
                        holders[x].add(w)
                    j += s
            dead = set()
            break
        while True:  # steps
            hit = tl.next_in(t, t + T, part)
            if hit is not None:
                t = hit[0]
                break  # the removal is applied (and judged) when re-forming
            t += T
            done += 1
            if done == N and not every:
                return t
            if every and (done - committed >= every or done == N):  # and after the last step
                hit = tl.next_in(t, t + checkpoint, part)
                if hit is not None:
                    t = hit[0]
                    break
                t += checkpoint
                committed = done
                if committed == N:
                    return t


def replay_redundancy(*, n0: int, removals: Sequence[tuple[float, int]], stages: int,
                      replicas: int, steps: int, step_time: StepTime,
                      overhead: Callable[[tuple[int, ...], float], float], slowdown: float,
                      rebalance: float, restart: float, threshold: float, every: int = 0,
                      checkpoint: float = 0.0, boot: float = 0.0,
                      redo: Callable[[tuple[int, ...], int], float] | None = None) -> float:
    """Wall time of redundancy on a removal timeline (inf if it can never finish).

    Notes
    -----
    Rings of ``P = min(n // L, r)`` pipelines of ``L`` (free the first time,
    ``rebalance`` after a rebalance, ``restart`` after a fatal loss); stage
    ``j``'s copy is on the node of stage ``j - 1`` (mod ``L``: Bamboo's). A removed node's
    stage passes to its copy's node, whose copy is then the only one; a stage
    left with no copy is fatal (roll back to the last checkpoint). While a
    node runs two stages a step takes ``slowdown`` times as long (the rest of
    the step in progress too). After each step (and its checkpoint, every
    ``every`` steps and after the last step), the job rebalances when spares >= overloaded nodes > 0,
    or ``2 o / (P L - o) > threshold``, or the nodes left form one more
    pipeline, if the nodes left form anything (else it runs on). ``overhead(sizes, step)`` is the extra time of the redundant
    forwards per step. ``redo(sizes, j)`` (lazy mode; None: 0): a whole step's passes
    of stage ``j`` that the node taking it over recomputes, pro rata of the step done,
    before the step goes on (two takeovers' nodes recompute at once: the longer).
    """
    tl = _Timeline(n0, removals)
    L, N = stages, steps
    t = float(boot)
    done = committed = 0
    started, fatal = False, False
    holder: list[list[int]] = []
    copy: list[list[int | None]] = []
    members: set[int] = set()
    dead: set[int] = set()

    def lose(w: int) -> str:
        if w not in members or w in dead:
            return "spare"
        dead.add(w)
        held = [(p, j) for p, row in enumerate(holder) for j, h in enumerate(row) if h == w]
        bad = len(held) > 1
        for p, j in held:
            c = copy[p][j]
            if c is None or c in dead:
                bad = True
                continue
            holder[p][j], copy[p][j] = c, None
        for row in copy:
            for j, c in enumerate(row):
                if c == w:
                    row[j] = None
        return "fatal" if bad else "takeover"

    def overloaded() -> int:
        n: dict[int, int] = {}
        for row in holder:
            for h in row:
                n[h] = n.get(h, 0) + 1
        return sum(1 for w, k in n.items() if k > 1 and w not in dead)

    while True:
        while True:  # form
            for w in tl.through(t):
                if members and lose(w) == "fatal" and not fatal:
                    fatal, done = True, committed
            f = _depth(_pipeline_order(tl.alive, n0, L), L, replicas, step_time)
            if f is None:
                return math.inf
            pipes, _spares, T = f
            part = {w for p in pipes for w in p}
            cost = restart if fatal else (rebalance if started else 0.0)
            hit = tl.next_in(t, t + cost, part) if cost > 0 else None
            if hit is not None:
                t = hit[0]
                continue
            t += cost
            started, fatal = True, False
            holder = [list(p) for p in pipes]
            copy = [[p[(j - 1) % L] if L > 1 else None for j in range(L)] for p in pipes]
            members, dead = set(part), set()
            base = T + overhead(tuple(len(p) for p in pipes), T)
            break
        broke = False
        while not broke:  # steps
            frac = 0.0
            owed = 0.0  # lazy mode's recomputation before the step goes on
            while True:
                d = base * (slowdown if overloaded() else 1.0)
                end = t + (1.0 - frac) * d if not owed else t + (owed + (1.0 - frac) * d)
                hit = tl.next_in(t, end, members - dead)
                if hit is None:
                    t = end
                    break
                if not owed:
                    frac = min(frac + (hit[0] - t) / d, 1.0)
                elif hit[0] - t <= owed:
                    owed -= hit[0] - t
                else:
                    frac, owed = min(frac + (hit[0] - t - owed) / d, 1.0), 0.0
                t = hit[0]
                verdicts, full = [], []
                for w in tl.through(t):  # each one lost at t
                    held = [j for row in holder for j, h in enumerate(row) if h == w] \
                        if w in members and w not in dead else []
                    verdicts.append(lose(w))
                    if verdicts[-1] == "takeover" and redo is not None:
                        full.append(redo(tuple(len(p) for p in holder), held[0]))
                if "fatal" in verdicts:
                    fatal, done, broke = True, committed, True
                    break
                for r in full:  # each its own node's, at once with the others: the longest
                    owed = max(owed, frac * r)
            if broke:
                break
            done += 1
            if done == N and not every:
                return t
            if every and (done - committed >= every or done == N):  # and after the last step
                end = t + checkpoint
                while True:
                    hit = tl.next_in(t, end, members - dead)
                    if hit is None:
                        t = end
                        committed = done
                        break
                    t = hit[0]
                    if "fatal" in [lose(w) for w in tl.through(t)]:
                        fatal, done, broke = True, committed, True
                        break
                if broke:
                    break
                if committed == N:
                    return t
            tl.through(t, before=True)  # one at t comes after this decision (the engine's)
            P = len(holder)
            o = overloaded()
            live = members - dead
            spares = [w for w in tl.alive if w not in members]
            active = P * L - o
            grow = (len(live) + len(spares)) // L > P and P < replicas
            if ((o > 0 and len(spares) >= o) or (o > 0 and active > 0 and 2 * o / active >
                                                  threshold) or grow) and \
                    _depth(_pipeline_order(tl.alive, n0, L), L, replicas, step_time) is not None:
                break  # rebalance (onto nothing the nodes left can form: none, run on degraded)


# ----------------------------------------------------------------------------- shrink (Daly)


def checkpoint_restart_shrink(*, steps: int, every: int, checkpoint: float, restart: float,
                              mtbf: float, step_time: Callable[[int], float | None],
                              workers: int) -> tuple[float, float]:
    """Checkpoint-restart on workers that fail for good: P(finish) and E[time | finish].

    Parameters
    ----------
    steps, every : int
        ``N`` steps, a checkpoint after each ``K`` steps since the last and after
        the last step.
    checkpoint, restart : float
        ``C`` and ``R``.
    mtbf : float
        Each worker fails once, after an exponential time of mean ``M``, and is
        never replaced.
    step_time : callable
        Step time with ``n`` workers (every worker is held and in use, so every
        failure interrupts the job); None below the fewest the job runs on.
    workers : int
        Workers at the start (all ready at time 0, the first formation free).

    Returns
    -------
    (p_finish, mean_time)
        The probability that the ``N`` steps finish before too few workers are
        left, and the expected wall time given that they do.

    Notes
    -----
    With ``n`` workers the job fails at rate ``n / M`` (work, checkpoint and
    restart alike). From state ``(n, k)`` (``k`` steps committed, a segment of
    ``S = min(K, N - k)`` steps of ``T(n)`` and a checkpoint, the last
    segment's too: ``W = S T(n) + C``) the segment completes with probability
    ``e^{-nW/M}``; a failure at ``s < W`` leaves ``n - 1`` workers to restart
    (``R``, itself restarted, one worker fewer, by each failure during it),
    after which the job resumes at ``k`` with ``T(n')``. The expectation over
    this finite chain is exact: the recursion carries ``P(finish)`` and
    ``E[time; finish]`` per state. With ``T`` constant and ``n`` large it is
    Daly's ``M' e^{R/M'} (e^{W/M'} - 1)`` per segment, ``M' = M / n``.

    References
    ----------
    [Daly]_ (the segment law), extended to a shrinking job.
    """
    N = check_int("steps", steps, low=1)
    K = check_int("every", every, low=1)
    C = check_nonnegative("checkpoint", checkpoint)
    R = check_nonnegative("restart", restart)
    M = check_positive("mtbf", mtbf)
    n0 = check_int("workers", workers, low=1)
    lam = 1.0 / M
    memo_run: dict[tuple[int, int], tuple[float, float]] = {}
    memo_restart: dict[tuple[int, int], tuple[float, float]] = {}

    def branch(rate: float, W: float) -> tuple[float, float, float]:
        """P(no failure in W), P(failure), E[time to failure; failure]."""
        if rate == 0:
            return 1.0, 0.0, 0.0
        ok = math.exp(-rate * W)
        # int_0^W s rate e^{-rate s} ds
        e_t = (1.0 - ok * (1.0 + rate * W)) / rate
        return ok, 1.0 - ok, e_t

    def run(n: int, k: int) -> tuple[float, float]:
        """(P finish, E[time; finish]) from a running job of n workers at k committed."""
        if k >= N:
            return 1.0, 0.0
        key = (n, k)
        if key in memo_run:
            return memo_run[key]
        T = step_time(n)
        if T is None:
            memo_run[key] = (0.0, 0.0)
            return memo_run[key]
        S = min(K, N - k)
        W = S * T + C
        ok, bad, e_t = branch(n * lam, W)
        p1, m1 = run(n, k + S)
        p2, m2 = restart_(n - 1, k)
        p = ok * p1 + bad * p2
        m = ok * (W * p1 + m1) + (e_t * p2 + bad * m2)
        memo_run[key] = (p, m)
        return p, m

    def restart_(n: int, k: int) -> tuple[float, float]:
        """From the start of a restart with n workers at k committed."""
        key = (n, k)
        if key in memo_restart:
            return memo_restart[key]
        if n <= 0 or step_time(n) is None:
            memo_restart[key] = (0.0, 0.0)
            return memo_restart[key]
        ok, bad, e_t = branch(n * lam, R)
        p1, m1 = run(n, k)
        p2, m2 = restart_(n - 1, k)
        p = ok * p1 + bad * p2
        m = ok * (R * p1 + m1) + (e_t * p2 + bad * m2)
        memo_restart[key] = (p, m)
        return p, m

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10 * (n0 + 2) * (N + 2)))
    try:
        p, m = run(n0, 0)
    finally:
        sys.setrecursionlimit(old)
    return p, (m / p if p > 0 else math.nan)


# ----------------------------------------------------------------------------- redundancy


def no_adjacent_pair_path(k: int, p: float) -> float:
    """P(no two adjacent of ``k`` nodes in a row both fail), each failing w.p. ``p`` alone.

    Notes
    -----
    The transfer matrix ``[[1-p, p], [1-p, 0]]`` over (last node up, last node
    failed), started from ``(1-p, p)``; 1 for ``k = 0``.
    """
    check_int("k", k, low=0)
    if k == 0:
        return 1.0
    up, down = 1.0 - p, p
    for _ in range(k - 1):
        up, down = (up + down) * (1.0 - p), up * p
    return up + down


def no_adjacent_pair_cycle(k: int, p: float) -> float:
    """P(no two adjacent of ``k >= 3`` nodes on a ring both fail), each w.p. ``p``.

    Notes
    -----
    ``trace(A^k)`` for ``A = [[1-p, p], [1-p, 0]]`` in the weighted sense:
    ``lambda_+^k + lambda_-^k`` with ``lambda = ((1-p) +- sqrt((1-p)^2 + 4 p (1-p))) / 2``.
    For ``k = 2`` the two nodes are adjacent once: ``1 - p^2``; for ``k = 1``, 1.
    """
    check_int("k", k, low=1)
    if k == 1:
        return 1.0
    if k == 2:
        return 1.0 - p * p
    q = 1.0 - p
    disc = math.sqrt(q * q + 4.0 * p * q)
    lp, lm = (q + disc) / 2.0, (q - disc) / 2.0
    return lp ** k + lm ** k


def fatal_loss_probability(*, stages: int, pipelines: int, mtbf: float, step: float,
                           slowdown: float, rebalance: float) -> float:
    """P(a first loss turns fatal before its rebalance), redundancy under independent failures.

    Parameters
    ----------
    stages : int
        Ring length ``L >= 3``.
    pipelines : int
        Rings ``P``; every node fails at rate ``1/M``; the lost node is replaced
        at once by a spare, so the job rebalances at the end of the step in
        progress (then pays ``rebalance``).
    mtbf : float
        ``M`` of each node.
    step : float
        The step time ``T`` (with its redundancy overhead).
    slowdown, rebalance : float
        The rest of the step runs ``slowdown`` times slower; then a rebalance of
        ``rebalance``.

    Returns
    -------
    float

    Notes
    -----
    Steps run back to back from the end of a rebalance, so the first loss
    comes after an ``Exp(P L / M)`` time and its phase ``u`` in the step has
    the wrapped exponential density ``a e^{-a u} / (1 - e^{-a T})`` on
    ``[0, T)``, ``a = P L / M``. The window until the rebalance ends is
    ``V(u) = (T - u) s + D``; each other node fails in it independently with
    ``q = 1 - e^{-V/M}``. The loss is survived when neither neighbour of the
    lost node fails (its successor's copy and its own stage are now single),
    no two adjacent nodes of the ``L - 3`` others of its ring fail, and no
    other ring loses two adjacent nodes:

    .. math::

        P(\\text{fatal} \\mid u) = 1 - (1-q)^2 A_{L-3}(q)\\, B_L(q)^{P-1}

    with ``A`` the path and ``B`` the cycle probabilities of
    :func:`no_adjacent_pair_path` and :func:`no_adjacent_pair_cycle`;
    integrated over ``u`` by Gauss-Legendre quadrature (64 points).

    References
    ----------
    [Bamboo]_ (the takeover and the fatal adjacent loss).
    """
    L = check_int("stages", stages, low=3)
    P = check_int("pipelines", pipelines, low=1)
    M = check_positive("mtbf", mtbf)
    T = check_positive("step", step)
    s = check_positive("slowdown", slowdown)
    D = check_nonnegative("rebalance", rebalance)
    a = P * L / M
    x, wts = np.polynomial.legendre.leggauss(64)
    u = (x + 1.0) * T / 2.0
    dens = a * np.exp(-a * u) / -math.expm1(-a * T)
    total = 0.0
    for ui, wi, di in zip(u.tolist(), wts.tolist(), dens.tolist(), strict=True):
        V = (T - ui) * s + D
        q = -math.expm1(-V / M)
        survive = (1 - q) ** 2 * no_adjacent_pair_path(L - 3, q) * \
            no_adjacent_pair_cycle(L, q) ** (P - 1)
        total += wi * di * (1.0 - survive)
    return total * T / 2.0
