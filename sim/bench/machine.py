"""``dtsim bench`` part ``machine`` (i): the compiled async gossip engine against a plain C
loop of the same job (``benchmarks/async_gossip.c``), and a large run's peak memory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..rng import Streams
from .memory import _peak_rss
from .timing import _best_rate, _cpu_clock

__all__ = ["bench_machine"]


# --------------------------------------------------------------------------- (i) against the machine

_C_SOURCE = Path(__file__).resolve().parents[2] / "benchmarks" / "async_gossip.c"


def _c_reference() -> Path | None:
    """The C reference loop, compiled once per source version (None: no compiler or source)."""
    import hashlib
    import shutil
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not _C_SOURCE.exists():
        return None
    tag = hashlib.sha256(_C_SOURCE.read_bytes()).hexdigest()[:12]
    exe = Path(tempfile.gettempdir()) / f"dtsim-async-gossip-{tag}"
    if not exe.exists():
        tmp = exe.with_suffix(".tmp")
        subprocess.run([cc, "-O2", "-o", str(tmp), str(_C_SOURCE), "-lm"], check=True,
                       capture_output=True, timeout=120)
        tmp.replace(exe)
    return exe


def _c_rate(exe: Path, nodes: int, horizon: float, latency: float, repeats: int) -> float:
    best = 0.0
    for k in range(repeats):
        out = subprocess.run([str(exe), str(nodes), str(horizon), str(latency), str(k + 1)],
                             capture_output=True, text=True, check=True, timeout=600)
        best = max(best, float(json.loads(out.stdout)["exchanges_per_s"]))
    return best


def _compiled_rate(nodes: int, horizon: float, latency: float, repeats: int) -> float:
    from ..gossip import GossipConfig, GossipSystem

    cfg = GossipConfig(topology="complete", nodes=nodes, protocol="async", rounds=int(horizon),
                       record_every=int(horizon), latency=latency, engine="compiled")
    GossipSystem(GossipConfig(topology="complete", nodes=10, protocol="async", rounds=1,
                              latency=latency, engine="compiled"), Streams(0)).run()  # compile
    rep = iter(range(repeats))

    def once() -> tuple[float, float]:
        system = GossipSystem(cfg, Streams(0).replication(next(rep)))
        t0 = _cpu_clock()
        system.run()
        return system.exchanges, _cpu_clock() - t0

    return _best_rate(once, repeats)[0]


def bench_machine(nodes: int = 1000, horizon: int = 2000, repeats: int = 3,
                  big_nodes: int = 1_000_000, big_horizon: int = 10) -> dict[str, float]:
    """The compiled async gossip engine as a fraction of a plain C loop, and its memory at scale.

    Parameters
    ----------
    nodes, horizon : int
        Complete graph of ``nodes`` nodes waking at rate 1 for ``horizon`` time
        units (about ``nodes * horizon`` exchanges), for both loops.
    repeats : int
        Best of this many runs of each.
    big_nodes, big_horizon : int
        The large run (latency 1, churn at availability 0.9), in a fresh
        subprocess for its peak RSS.

    Returns
    -------
    dict
        ``c_async_per_s`` and ``c_async_latency_per_s`` (absent without a C
        compiler), ``compiled_async_per_s``, ``compiled_async_latency_per_s``,
        their ratios ``compiled_vs_c`` and ``compiled_vs_c_latency``, and
        ``mem_compiled_big_peak_mib``, ``mem_compiled_big_exchanges``,
        ``mem_compiled_big_seconds``.
    """
    out: dict[str, float] = {}
    out["compiled_async_per_s"] = _compiled_rate(nodes, horizon, 0.0, repeats)
    out["compiled_async_latency_per_s"] = _compiled_rate(nodes, horizon, 1.0, repeats)
    exe = _c_reference()
    if exe is not None:
        out["c_async_per_s"] = _c_rate(exe, nodes, horizon, 0.0, repeats)
        out["c_async_latency_per_s"] = _c_rate(exe, nodes, horizon, 1.0, repeats)
        out["compiled_vs_c"] = out["compiled_async_per_s"] / out["c_async_per_s"]
        out["compiled_vs_c_latency"] = (out["compiled_async_latency_per_s"]
                                        / out["c_async_latency_per_s"])
    big = _peak_rss("compiled_big", nodes=int(big_nodes), horizon=int(big_horizon))
    out.update(mem_compiled_big_nodes=float(big_nodes), mem_compiled_big_peak_mib=big["peak_mib"],
               mem_compiled_big_exchanges=float(big["exchanges"]),
               mem_compiled_big_seconds=big["seconds"])
    return out
