"""What ``dtsim bench --parts network`` measures: the flow model against SimGrid, and its cost.

* flows per second on ``flows`` staggered flows over a two-level tree of
  ``racks * hosts`` hosts (every route of the same latency, so SimGrid's CM02
  is plain max-min there), by dtsim (the compiled loop, else the Python engine)
  and by SimGrid 3.32 on the same flow set in the same run; the ratio, and the
  largest relative difference of their finish times. Both are timed on the
  simulation alone (CPU time): dtsim's routes are looked up first and timed
  apart (``network_route_seconds``), and SimGrid's platform, with the same
  routes, is built before its ``Engine.run``.
* the cost of contention in the training DES and in async gossip: the same
  run with ``contention`` on and off (the same network, each transfer alone
  when off), passes or exchanges per CPU second, after one short run of each
  (which loads the compiled flow engine from numba's cache).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .timing import _cpu_clock as _cpu

__all__ = ["bench_network", "bench_flows", "bench_contention_cost", "tree_flows"]


def tree_flows(flows: int, racks: int, hosts: int, seed: int) -> tuple[Any, list[tuple]]:
    """The bench's network (a tree, equal route latencies) and its staggered flows."""
    from ..network.topology import build_network

    net = build_network(f"tree:racks={racks},hosts={hosts},host_latency=0.05,uplink_latency=0")
    n = racks * hosts
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, flows)
    dst = (src + rng.integers(1, n, flows)) % n
    size = rng.integers(1, 100, flows)
    start = rng.uniform(0, 100 * flows / 10_000, flows)
    return net, list(zip(src.tolist(), dst.tolist(), size.tolist(), start.tolist(), strict=True))


def bench_flows(flows: int = 10_000, racks: int = 40, hosts: int = 25, repeats: int = 2,
                seed: int = 7, simgrid: bool = True) -> dict[str, Any]:
    """Flows per second of dtsim and SimGrid on the same flow set (see the module docstring)."""
    from ..network.flows import RUN_FLOWS_ARGS, _as_flows, flow_arrays, simulate_flows
    from ..network.kernel import HAVE_NUMBA, run_flows
    from ..network.simgrid import simgrid_available, simgrid_finish_times

    net, rows = tree_flows(flows, racks, hosts, seed)
    fl = _as_flows(rows)
    t0 = _cpu()
    arr = flow_arrays(net, fl, [f.start for f in fl])
    out: dict[str, Any] = {"network_flows": flows, "network_hosts": racks * hosts,
                           "network_route_seconds": _cpu() - t0}
    keys = RUN_FLOWS_ARGS
    if HAVE_NUMBA:
        run_flows(*[arr[k] for k in keys])  # compile (or load from the cache) first
        best = math.inf
        for _ in range(repeats):
            t0 = _cpu()
            finish, events = run_flows(*[arr[k] for k in keys])
            best = min(best, _cpu() - t0)
        out["network_engine"] = "compiled"
    else:
        best = math.inf
        for _ in range(max(1, repeats - 1)):
            t0 = _cpu()
            res = simulate_flows(net, fl, engine="python")
            best = min(best, _cpu() - t0)
            finish, events = res.finish, res.events
        out["network_engine"] = "python"
    out["network_flows_per_s"] = flows / best
    out["network_events"] = int(events)
    if simgrid and simgrid_available():
        sg_best = math.inf
        sg = None
        for _ in range(repeats):
            sg, cpu = simgrid_finish_times(net, fl)
            sg_best = min(sg_best, cpu)
        out["simgrid_flows_per_s"] = flows / sg_best
        out["network_vs_simgrid"] = out["network_flows_per_s"] / out["simgrid_flows_per_s"]
        f = np.asarray(finish)
        out["network_simgrid_max_rel_error"] = float(np.max(np.abs(f - np.asarray(sg)) / f))
    return out


def bench_contention_cost(repeats: int = 2, steps: int = 20, horizon: float = 40.0
                          ) -> dict[str, Any]:
    """Passes (training) and exchanges (async gossip) per CPU second, contention on and off."""
    import dataclasses

    from ..gossip.config import GossipConfig
    from ..gossip.model import gossip_model
    from ..rng import Streams
    from ..training import TrainingConfig
    from ..training.system import TrainingSystem

    tc = TrainingConfig(stages=4, replicas=2, microbatches=16, steps=steps, schedule="swarm",
                        routing="least-loaded", activation_size=4.0, param_size=40.0,
                        network="tree:racks=2,hosts=4,host_bandwidth=8,uplink_bandwidth=16",
                        nic=10.0, tensor_parallel=2)
    gc = GossipConfig(topology="ring:n=64,latency=0.05,bandwidth=20", protocol="async",
                      rounds=horizon, size=1.0, nic=10.0, engine="des")
    out: dict[str, Any] = {}
    # load the compiled flow engine (numba's cache) before timing, as bench_flows does
    TrainingSystem(dataclasses.replace(tc, steps=1), Streams(1).replication(0)).run()
    gossip_model(dataclasses.replace(gc, rounds=1.0), Streams(1).replication(0))
    for label, on in (("contention", True), ("no_contention", False)):
        best = 0.0
        for k in range(repeats):
            sysm = TrainingSystem(dataclasses.replace(tc, contention=on),
                                  Streams(0).replication(k))
            t0 = _cpu()
            m = sysm.run()
            best = max(best, m["passes"] / (_cpu() - t0))
        out[f"training_{label}_passes_per_s"] = best
        cfg = gc if on else dataclasses.replace(gc, contention=False, nic=None)
        best = 0.0
        for k in range(repeats):
            t0 = _cpu()
            m = gossip_model(cfg, Streams(0).replication(k))
            best = max(best, m["exchanges"] / (_cpu() - t0))
        out[f"gossip_{label}_exchanges_per_s"] = best
    out["training_contention_cost"] = (out["training_no_contention_passes_per_s"]
                                       / out["training_contention_passes_per_s"])
    out["gossip_contention_cost"] = (out["gossip_no_contention_exchanges_per_s"]
                                     / out["gossip_contention_exchanges_per_s"])
    return out


def bench_network(flows: int = 10_000, racks: int = 40, hosts: int = 25, repeats: int = 2,
                  steps: int = 20, horizon: float = 40.0) -> dict[str, Any]:
    """Both halves (:func:`bench_flows`, :func:`bench_contention_cost`)."""
    out = bench_flows(flows, racks, hosts, repeats)
    out.update(bench_contention_cost(repeats, steps, horizon))
    return out
