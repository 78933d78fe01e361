"""``dtsim bench`` part ``peersim`` (n): PeerSim 1.0.5, built and timed by
``benchmarks/peersim.sh``, beside dtsim's compiled edge and async engines."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from ..rng import Streams

__all__ = ["peersim_skip_reason", "bench_peersim"]


# --------------------------------------------------------------------------- (n) PeerSim

_PEERSIM_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "peersim.sh"
#: ``benchmarks/peersim.sh`` cases: (case, nodes) -> the key of its rate here.
_PEERSIM_CASES = {("cycle_complete", 100_000): "peersim_cycle_per_s_n100000",
                  ("cycle_complete", 1_000_000): "peersim_cycle_per_s_n1000000",
                  ("event_nodelay", 10_000): "peersim_event_per_s",
                  ("event_delay10", 10_000): "peersim_event_delay_per_s"}


def peersim_skip_reason(peersim: str | None) -> str | None:
    """Why the ``peersim`` part cannot run (None: it can)."""
    import shutil

    if peersim is None:
        return "needs --peersim DIR"
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "needs java and javac on PATH"
    if not _PEERSIM_SCRIPT.exists():
        return f"needs {_PEERSIM_SCRIPT}"
    return None


def _exchange_rate(cfg: Any, repeats: int) -> float:
    """Best exchanges per wall-clock second of ``GossipSystem(cfg).run()``."""
    from ..gossip import GossipSystem

    best = 0.0
    for k in range(repeats):
        system = GossipSystem(cfg, Streams(0).replication(k))
        t0 = time.perf_counter()
        system.run()
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, system.exchanges / dt)
    return best


def bench_peersim(peersim: str | None = None, repeats: int = 3, edge_steps: int = 20_000_000,
                  async_nodes: int = 10_000, async_horizon: int = 200) -> dict[str, Any]:
    """PeerSim's averaging and dtsim's compiled engines, exchanges per second, side by side.

    Parameters
    ----------
    peersim : str or None
        A PeerSim 1.0.5 source tree or a git repository holding it (see
        ``benchmarks/peersim.sh``); None skips the part.
    repeats : int
        Best of this many runs on each side (PeerSim's rate is the difference
        of two runs that differ only in cycles, so JVM start-up cancels).
    edge_steps : int
        Steps of each compiled ``edge`` run (complete graph, ``n = 1e5, 1e6``).
    async_nodes, async_horizon : int
        The compiled ``async`` runs (complete graph, wake rate 1), without
        delay and with a delay of 0.1 time unit (PeerSim's 10% of a cycle).

    Returns
    -------
    dict
        ``peersim_skipped`` (the reason) when it does not run; otherwise
        PeerSim's ``peersim_cycle_per_s_n{n}``, ``peersim_event_per_s``,
        ``peersim_event_delay_per_s``, dtsim's ``dtsim_edge_per_s_n{n}``,
        ``dtsim_async_per_s``, ``dtsim_async_delay_per_s`` (wall clock on both
        sides, as PeerSim times itself) and the ratios ``edge_vs_peersim_n{n}``,
        ``async_vs_peersim``, ``async_delay_vs_peersim`` (dtsim / PeerSim;
        ahead means above 1).
    """
    why = peersim_skip_reason(peersim)
    if why is not None:
        return {"peersim_skipped": why}
    from ..gossip import GossipConfig, GossipSystem

    proc = subprocess.run(["bash", str(_PEERSIM_SCRIPT), str(peersim), str(repeats)],
                          capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"benchmarks/peersim.sh failed (exit {proc.returncode}): {tail}")
    out: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            key = _PEERSIM_CASES.get((rec["case"], int(rec["nodes"])))
            if key is not None and rec.get("exchanges_per_s"):
                out[key] = float(rec["exchanges_per_s"])
    GossipSystem(GossipConfig(nodes=10, protocol="edge", rounds=10), Streams(0)).run()  # compile
    GossipSystem(GossipConfig(nodes=10, protocol="async", rounds=1, latency=0.1,
                              engine="compiled"), Streams(0)).run()
    for n in (100_000, 1_000_000):
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=edge_steps, record_every=edge_steps)
        out[f"dtsim_edge_per_s_n{n}"] = _exchange_rate(cfg, repeats)
    for key, lat in (("dtsim_async_per_s", 0.0), ("dtsim_async_delay_per_s", 0.1)):
        cfg = GossipConfig(nodes=async_nodes, protocol="async", rounds=async_horizon,
                           record_every=async_horizon, latency=lat, engine="compiled")
        out[key] = _exchange_rate(cfg, repeats)
    for ours, theirs, ratio in (
            ("dtsim_edge_per_s_n100000", "peersim_cycle_per_s_n100000", "edge_vs_peersim_n100000"),
            ("dtsim_edge_per_s_n1000000", "peersim_cycle_per_s_n1000000",
             "edge_vs_peersim_n1000000"),
            ("dtsim_async_per_s", "peersim_event_per_s", "async_vs_peersim"),
            ("dtsim_async_delay_per_s", "peersim_event_delay_per_s", "async_delay_vs_peersim")):
        if out.get(theirs):
            out[ratio] = out[ours] / out[theirs]
    return out
