"""``dtsim bench`` parts of gossip (:mod:`sim.gossip`): the async DES beside bare
SimPy wakes (c), vectorised matching beside bare numpy (d), and the cost of records (m)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import simpy

from ..errors import check_int
from ..rng import Streams
from .timing import _best_rate, _cpu_clock

__all__ = ["MATCHING_SIZES", "bench_async_gossip", "bench_matching", "bench_recording"]


MATCHING_SIZES = (1_000, 10_000, 100_000, 1_000_000)


# --------------------------------------------------------------------------- (c) async gossip


def bench_async_gossip(nodes: int = 1000, horizon: int = 30, repeats: int = 2) -> dict[str, float]:
    """Exchanges per second of the ``async`` gossip DES on the complete graph (merged path).

    Exchanges take the default latency 1, so about ``nodes`` of them are still
    in flight at the horizon and not counted; a horizon of tens of time units
    keeps that (and the start of ``nodes`` processes) to a few percent.

    Parameters
    ----------
    nodes : int
        Nodes, each waking at rate 1.
    horizon : int
        Simulated time units (about ``nodes * horizon`` exchanges).
    repeats : int
        Best of this many repeats.

    Returns
    -------
    dict
        ``async_exchanges_per_s``, ``async_nodes``, ``async_build_s`` (wiring
        the system: random blocks, the clocks) and ``async_path`` (the
        implementation path, see :attr:`sim.gossip.GossipSystem.async_path`);
        ``async_bare_wakes_per_s``, the rate of ``nodes`` bare SimPy processes
        that only wake on their Poisson clocks (the floor of a design with a
        SimPy process per node, as the DES had before its heap of clocks: with
        ``nodes`` timeouts pending, SimPy's heap makes a wake cost about two
        bare timeouts), and ``async_exchanges_per_bare_wake``.
    """
    from ..gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=nodes, protocol="async", rounds=horizon,
                       record_every=horizon, engine="des")
    rep = iter(range(repeats))
    info: dict[str, Any] = {}

    def once() -> tuple[float, float]:
        t0 = _cpu_clock()
        system = GossipSystem(cfg, Streams(0).replication(next(rep)))
        t1 = _cpu_clock()
        system.run()
        info.update(async_build_s=t1 - t0, async_path=system.async_path)
        return system.exchanges, _cpu_clock() - t1

    rate, _ = _best_rate(once, repeats)
    wake_rate, _ = _best_rate(lambda: _bare_wakes(nodes, horizon), repeats)
    return {"async_exchanges_per_s": rate, "async_nodes": float(nodes), **info,
            "async_bare_wakes_per_s": wake_rate, "async_exchanges_per_bare_wake": rate / wake_rate}


def _bare_wakes(nodes: int, horizon: float) -> tuple[float, float]:
    """``nodes`` SimPy processes waking at rate 1 and doing nothing else: (wakes, seconds)."""
    env = simpy.Environment()
    gaps = np.random.default_rng(nodes).exponential(1.0, size=(nodes, int(2 * horizon) + 20))

    def node(row: list[float]):
        timeout = env.timeout
        for g in row:
            yield timeout(g)

    for row in gaps.tolist():
        env.process(node(row))
    wakes = int(np.sum(np.cumsum(gaps, axis=1) <= horizon))
    t0 = _cpu_clock()
    env.run(until=horizon)
    return wakes, _cpu_clock() - t0


# --------------------------------------------------------------------------- (d) matching gossip


def bench_matching(sizes: Iterable[int] = MATCHING_SIZES, updates: float = 4e6,
                   repeats: int = 2, des_sizes: Iterable[int] = (1000,),
                   des_rounds: int = 5) -> dict[str, float]:
    """Node updates per second of vectorised matching gossip vs bare numpy, per size.

    Parameters
    ----------
    sizes : iterable of int
        Node counts (even).
    updates : float
        About this many node updates per measurement (at least 3 rounds).
    repeats : int
        Best of this many repeats.
    des_sizes : iterable of int
        Sizes at which the per-node DES engine of the same protocol is also
        timed (``des_rounds`` rounds), to show what vectorising buys.

    Returns
    -------
    dict
        For each ``n``: ``matching_updates_per_s_n{n}``, ``matching_round_ms_n{n}``,
        ``numpy_updates_per_s_n{n}``, ``matching_vs_numpy_n{n}`` (ratio of the
        two rates). The numpy reference does, per round, a random permutation,
        a pairing of its halves, and the average written to both ends. For each
        DES size: ``matching_des_updates_per_s_n{n}`` and
        ``matching_vector_vs_des_n{n}`` (how many times faster the vector engine is).
    """
    out: dict[str, float] = {}
    for n in sizes:
        n = check_int("nodes", n, low=2)
        rounds = max(3, int(updates // n))
        sim_rate = _matching_rate(n, rounds, repeats)
        np_rate = _numpy_rate(n, rounds, repeats)
        out[f"matching_updates_per_s_n{n}"] = sim_rate
        out[f"matching_round_ms_n{n}"] = 1e3 * n / sim_rate
        out[f"numpy_updates_per_s_n{n}"] = np_rate
        out[f"matching_vs_numpy_n{n}"] = sim_rate / np_rate
    for n in des_sizes:
        n = check_int("nodes", n, low=2)
        des_rate = _matching_rate(n, des_rounds, 1, engine="des")
        out[f"matching_des_updates_per_s_n{n}"] = des_rate
        vec = out.get(f"matching_updates_per_s_n{n}") or _matching_rate(n, des_rounds, repeats)
        out[f"matching_vector_vs_des_n{n}"] = vec / des_rate
    return out


def _matching_rate(n: int, rounds: int, repeats: int, engine: str = "vector") -> float:
    """Node updates/s of :class:`sim.gossip.GossipSystem` matching rounds (complete graph)."""
    from ..gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=n, protocol="matching", rounds=rounds,
                       record_every=rounds, engine=engine)
    rep = iter(range(repeats))

    def once() -> tuple[float, float]:
        system = GossipSystem(cfg, Streams(1).replication(next(rep)))
        t0 = _cpu_clock()
        system.run()
        return float(n * rounds), _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


def _numpy_rate(n: int, rounds: int, repeats: int) -> float:
    """Node updates/s of a bare numpy permute-pair-average round of ``n`` values."""
    rng = np.random.default_rng(n)

    def once() -> tuple[float, float]:
        x = rng.standard_normal((n, 1))
        t0 = _cpu_clock()
        for _ in range(rounds):
            perm = rng.permutation(n)
            a, b = perm[0::2], perm[1::2]
            avg = (x[a] + x[b]) * 0.5
            x[a] = avg
            x[b] = avg
        return float(n * rounds), _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


# --------------------------------------------------------------------------- (m) recording


def _run_seconds(cfg: Any, repeats: int, clock: Callable[[], float] = _cpu_clock) -> float:
    """Best time of ``GossipSystem(cfg).run()`` over ``repeats`` runs (the build not counted)."""
    from ..gossip import GossipSystem

    best = math.inf
    for k in range(repeats):
        system = GossipSystem(cfg, Streams(0).replication(k))
        t0 = clock()
        system.run()
        best = min(best, clock() - t0)
    return best


def bench_recording(edge_nodes: tuple[int, ...] = (1000, 10_000), edge_steps: int = 3_000_000,
                    async_nodes: int = 10_000, async_horizon: int = 100,
                    repeats: int = 5) -> dict[str, float]:
    """Cost of the default records: run time with them over run time without (start and end only).

    Parameters
    ----------
    edge_nodes, edge_steps : tuple of int, int
        Compiled ``edge`` runs on the complete graph (the default interval is
        ``max(2 n, 20000)`` steps, :func:`sim.gossip.config.default_record_every`).
    async_nodes, async_horizon : int
        A compiled ``async`` run without latency (the default interval is one time unit).
    repeats : int
        Best of this many runs of each (the two settings alternate).

    Returns
    -------
    dict
        ``recording_edge_ratio_n{n}`` and ``recording_edge_seconds_n{n}`` (with
        the default records), ``recording_async_ratio`` and
        ``recording_async_seconds``; a ratio of 1 means records cost nothing.
    """
    import dataclasses

    from ..gossip import GossipConfig, GossipSystem

    GossipSystem(GossipConfig(nodes=10, protocol="edge", rounds=10), Streams(0)).run()  # compile
    out: dict[str, float] = {}
    for n in edge_nodes:
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=edge_steps)
        bare = dataclasses.replace(cfg, record_every=edge_steps)
        with_rec, without = math.inf, math.inf
        for _ in range(repeats):  # alternate, so a burst of load hits both
            with_rec = min(with_rec, _run_seconds(cfg, 1))
            without = min(without, _run_seconds(bare, 1))
        out[f"recording_edge_ratio_n{n}"] = with_rec / without
        out[f"recording_edge_seconds_n{n}"] = with_rec
    cfg = GossipConfig(nodes=async_nodes, protocol="async", rounds=async_horizon, latency=0.0,
                       engine="compiled")
    bare = dataclasses.replace(cfg, record_every=async_horizon)
    with_rec, without = math.inf, math.inf
    for _ in range(repeats):
        with_rec = min(with_rec, _run_seconds(cfg, 1))
        without = min(without, _run_seconds(bare, 1))
    out["recording_async_ratio"] = with_rec / without
    out["recording_async_seconds"] = with_rec
    return out
