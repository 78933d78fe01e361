"""Exact training references (sim.analytic.training) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize

from sim import analytic
from sim.errors import ConfigError


def _gpipe_dp(L: int, m: int, tf: float, tb: float) -> float:
    """Finish time of a GPipe step by the recursion on pass finish times (all F, then all B)."""
    F = np.zeros((L, m))
    for j in range(L):
        for k in range(m):
            start = max(F[j - 1, k] if j else 0.0, F[j, k - 1] if k else 0.0)
            F[j, k] = start + tf
    B = np.zeros((L, m))
    t0 = F[L - 1, m - 1]
    for j in reversed(range(L)):
        for k in range(m):
            start = max(B[j + 1, k] if j < L - 1 else t0, B[j, k - 1] if k else 0.0,
                        F[j, m - 1])
            B[j, k] = start + tb
    return float(B[0, m - 1])


@pytest.mark.parametrize("L,m,tf,tb", [(4, 8, 1.0, 2.0), (7, 3, 0.5, 1.5), (1, 5, 1.0, 1.0)])
def test_step_time_matches_schedule_recursion(L, m, tf, tb):
    """(m + L - 1)(t_f + t_b) equals the finish time of the GPipe pass recursion."""
    assert analytic.pipeline_step_time(L, m, tf, tb) == pytest.approx(_gpipe_dp(L, m, tf, tb))


def test_bubble_is_idle_fraction():
    """The bubble is one minus each stage's work over the step time."""
    L, m, tf, tb = 5, 6, 1.0, 2.0
    T = analytic.pipeline_step_time(L, m, tf, tb)
    assert analytic.pipeline_bubble_fraction(L, m) == pytest.approx(1 - m * (tf + tb) / T)


def _mmc_chain(c: int, lam: float, mu: float, cap: int = 400) -> float:
    """Mean sojourn from the stationary law of the truncated birth-death chain and Little."""
    n = np.arange(cap + 1)
    logp = np.zeros(cap + 1)
    for k in range(1, cap + 1):
        logp[k] = logp[k - 1] + math.log(lam / (mu * min(k, c)))
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return float((n * p).sum() / lam)


@pytest.mark.parametrize("c,lam,mu", [(1, 0.5, 1.0), (1, 0.8, 1.0), (3, 2.0, 1.0), (5, 4.2, 1.1)])
def test_mmc_sojourn_matches_birth_death_chain(c, lam, mu):
    """Erlang C sojourn equals E[N]/lambda of the birth-death chain."""
    assert analytic.mmc_sojourn(c, lam, mu) == pytest.approx(_mmc_chain(c, lam, mu), rel=1e-9)


def test_mmc_single_server_closed_form():
    """With c = 1 the sojourn is 1/(mu - lambda) and C = rho."""
    assert analytic.mmc_sojourn(1, 0.7, 1.0) == pytest.approx(1 / 0.3)
    assert analytic.erlang_c(1, 0.7) == pytest.approx(0.7)


def test_erlang_c_unstable_refused():
    """An offered load of c or more is refused in one line."""
    with pytest.raises(ConfigError, match=r"'offered_load' must be < servers \(2\)"):
        analytic.erlang_c(2, 2.0)


def test_saturated_throughput_and_bound():
    """min_j sum_i v_ij / w_j, and the finite-n bound below it tending to it."""
    speeds = [[1.0, 2.0], [1.0, 1.0, 1.0], [4.0]]
    work = [1.0, 1.5, 1.0]
    assert analytic.saturated_throughput(speeds, work) == pytest.approx(2.0)
    D = analytic.fill_drain_time(speeds, work)
    assert D == pytest.approx(1.0 / 2.0 + 1.0 / 4.0)
    b10 = analytic.finite_throughput_bound(speeds, work, 10)
    b1e4 = analytic.finite_throughput_bound(speeds, work, 10_000)
    assert b10 < b1e4 < 2.0 and b1e4 == pytest.approx(2.0, rel=1e-3)


def _segment_by_renewal(tau: float, C: float, R: float, M: float) -> float:
    """Expected segment time from the renewal equation, integrals done numerically."""
    X = tau + C
    lost = integrate.quad(lambda s: s * math.exp(-s / M) / M, 0, X)[0]  # E[F; F < X]
    p_fail = -math.expm1(-X / M)
    # restart: complete R uninterrupted, each failure restarts it
    r_lost = integrate.quad(lambda s: s * math.exp(-s / M) / M, 0, R)[0]
    r_fail = -math.expm1(-R / M)
    ER = (R * math.exp(-R / M) + r_lost) / (1 - r_fail)
    # T = X e^{-X/M} + lost + p_fail (ER + T)
    return (X * math.exp(-X / M) + lost + p_fail * ER) / (1 - p_fail)


@pytest.mark.parametrize("tau,C,R,M", [(10.0, 1.0, 2.0, 50.0), (3.0, 0.5, 0.0, 4.0), (40.0, 5.0, 5.0, 20.0)])
def test_daly_segment_matches_renewal_equation(tau, C, R, M):
    """M e^{R/M}(e^{(tau+C)/M} - 1) solves the segment renewal equation."""
    assert analytic.checkpoint_segment_time(tau, C, R, M) == pytest.approx(
        _segment_by_renewal(tau, C, R, M), rel=1e-8)


def test_checkpoint_wall_time_is_segments():
    """N steps take N/K segments; N not a multiple of K is refused."""
    seg = analytic.checkpoint_segment_time(5 * 2.0, 1.0, 0.5, 30.0)
    assert analytic.checkpoint_wall_time(20, 2.0, 5, 1.0, 0.5, 30.0) == pytest.approx(4 * seg)
    with pytest.raises(ConfigError, match=r"'steps' must be a multiple of checkpoint_every \(3\): 20"):
        analytic.checkpoint_wall_time(20, 2.0, 3, 1.0, 0.5, 30.0)


@pytest.mark.parametrize("C,M", [(1.0, 1000.0), (5.0, 200.0)])
def test_daly_interval_near_numerical_optimum(C, M):
    """Daly's interval is within 2% of the numerical optimum and nearer to it than Young's."""
    def overhead(tau: float) -> float:
        return analytic.checkpoint_segment_time(tau, C, 0.0, M) / tau

    best = optimize.minimize_scalar(overhead, bounds=(1e-3, 10 * M), method="bounded",
                                    options={"xatol": 1e-9}).x
    daly = analytic.daly_interval(C, M)
    young = analytic.young_interval(C, M)
    assert abs(daly - best) / best < 0.02
    assert abs(daly - best) < abs(young - best)


def test_ring_allreduce():
    """2(k-1)(latency + P/(k W)), zero for one participant and for no values (NCCL discards a
    count-0 all-reduce, latencies included: the ring law paid 2(k-1) latencies for it)."""
    assert analytic.ring_allreduce_time(4, 8.0, 2.0, 0.1) == pytest.approx(6 * (0.1 + 1.0))
    assert analytic.ring_allreduce_time(1, 8.0, 2.0, 0.1) == 0.0
    assert analytic.ring_allreduce_time(4, 0.0, 2.0, 0.1) == 0.0
    assert analytic.ring_allreduce_time(4, 0.0, 2.0, 0.1, buckets=3) == 0.0
    assert analytic.ring_allreduce_time(4, 8.0, 2.0, 0.1, buckets=3) == pytest.approx(6 * 1.3)
    # (review10) no bucket is for no values: with values it is refused, not timed as their
    # bandwidth alone (6 x 1.0 = 6.0, while the Notes said zero for n_b = 0)
    assert analytic.ring_allreduce_time(4, 0.0, 2.0, 0.1, buckets=0) == 0.0
    with pytest.raises(ConfigError, match=r"^'buckets' must be at least 1 with values to reduce"):
        analytic.ring_allreduce_time(4, 8.0, 2.0, 0.1, buckets=0)


def _recursion(programs, forward, backward, activation, gradient, blocking, channels):
    """program_makespan's recursion as first written: every device advanced while it can,
    transfers in flight queued per (sender, receiver) channel with ``channels``."""
    p, S = len(programs), len(forward)
    done, began, pos, free = {}, {}, [0] * p, [0.0] * p
    arrival, last = {}, {}

    def sent(key, t, src, dst, d):
        a = last.get((src, dst)) if channels else None
        arr = (t if a is None or t >= a else a) + d
        if channels:
            last[(src, dst)] = arr
        arrival[key] = arr

    progress = True
    while progress:
        progress = False
        for d in range(p):
            prog = programs[d]
            while pos[d] < len(prog):
                op = prog[pos[d]]
                if op[0] in ("F", "B"):
                    kind, s, i = op[0], op[1] * p + d, op[2]
                    if blocking or (kind == "F" and s == 0):
                        ready = 0.0
                    else:
                        want = ("a", s - 1, i) if kind == "F" else (
                            ("F", s, i) if s == S - 1 else ("g", s, i))
                        src = done if want[0] == "F" else arrival
                        if want not in src:
                            break
                        ready = src[want]
                    t0 = max(free[d], ready)
                    t = t0 + (forward[s] if kind == "F" else backward[s])
                    done[(kind, s, i)] = free[d] = t
                    began[(kind, s, i)] = t0
                    if not blocking and kind == "F" and s < S - 1:
                        sent(("a", s, i), t, d, (s + 1) % p, activation[s])
                    elif not blocking and kind == "B" and s > 0:
                        sent(("g", s - 1, i), t, d, (s - 1) % p, gradient[s - 1])
                    pos[d] += 1
                    progress = True
                    continue
                kind, tag, h, i = op
                peer = ((h + 1) % p if tag == "a" else h % p) if kind == "send" else (
                    h % p if tag == "a" else (h + 1) % p)
                want = ("recv" if kind == "send" else "send", tag, h, i)
                if pos[peer] >= len(programs[peer]) or tuple(programs[peer][pos[peer]]) != want:
                    break
                t = max(free[d], free[peer]) + (activation[h] if tag == "a" else gradient[h])
                done[(tag, h, i)] = free[d] = free[peer] = t
                pos[d] += 1
                pos[peer] += 1
                progress = True
    return max(free), done, began, list(free)


@pytest.mark.parametrize("channels", [True, False])
@pytest.mark.parametrize("schedule,blocking", [  # the blocking engine has no interleaving
    ("1f1b", True), ("1f1b", False), ("gpipe", True), ("gpipe", False), ("interleaved", False)])
def test_program_makespan_is_the_recursion_bit_for_bit(schedule, blocking, channels):
    """The traced evaluation (Python, and compiled for long programs when numba is installed,
    with or without the start times) gives the recursion's completion and start times exactly, every command's and the last
    one, with and without FIFO channels (which move the answer: checked)."""
    from sim.training.schedules import device_program

    v = 2 if schedule == "interleaved" else 1
    rng = np.random.default_rng(8)
    moved = 0
    for L, m in ((1, 3), (3, 6), (4, 40), (7, 63)):
        S = L * v
        progs = [device_program(schedule, L, m, j, v=v, blocking=blocking) for j in range(L)]
        for _ in range(3):
            f, b = rng.uniform(0.1, 3, S).tolist(), rng.uniform(0.1, 3, S).tolist()
            a, g = rng.uniform(0, 4, S - 1).tolist(), rng.uniform(0, 4, S - 1).tolist()
            want, done, began, free = _recursion(progs, f, b, a, g, blocking, channels)
            finish: dict = {}
            starts: dict = {}
            ends: list = []
            assert analytic.program_makespan(progs, f, b, a, g, blocking=blocking,
                                             channels=channels, finish=finish,
                                             starts=starts, ends=ends) == want
            assert finish == done
            assert starts == began
            assert ends == free
            ends_alone: list = []  # each device's end alone: compiled for long programs too
            assert analytic.program_makespan(progs, f, b, a, g, blocking=blocking,
                                             channels=channels, ends=ends_alone) == want
            assert ends_alone == free
            assert analytic.program_makespan(progs, f, b, a, g, blocking=blocking,
                                             channels=channels) == want
            alone: dict = {}  # the start times alone: compiled for long programs too
            assert analytic.program_makespan(progs, f, b, a, g, blocking=blocking,
                                             channels=channels, starts=alone) == want
            assert alone == began
            moved += want != _recursion(progs, f, b, a, g, blocking, not channels)[0]
    assert (moved > 0) == (not blocking)
