"""Contention: how much of the instant-exchange and no-sharing laws survives shared bandwidth?

Two questions, each with the law it tests:

``gossip``
    Async gossip of a large model (message ``size`` 1) between 24 hosts (12 in
    the quick run) of a 3-region geo layout (intra-region links 100 and latency 0.005, inter-region
    10 and 0.05), every node waking at rate 1. Every host has a NIC of ``nic``
    each way, which its concurrent exchanges share (sim.network: an exchange is
    a flow each way, max-min fair). Laws: the *instant-exchange* law (exchanges
    take no time: the study's model) and the *no-sharing* law (each exchange
    takes ``latency + size / bandwidth`` on its own: ``contention=False``).
    Measured: the simulated time until the honest disagreement falls to
    ``1e-3`` of its start, and the exchanges completed per unit of time.
``allreduce``
    A GPipe pipeline of 4 stages, 4 data-parallel replicas per stage on 16
    hosts of a two-level tree (hosts with NICs of ``B = 8``), gradients of
    ``P = 64`` per stage all-reduced by a ring after each step; each replica
    has ``tp`` tensor-parallel ranks, which reduce ``P / tp`` each through the
    node's one NIC. Law: *no sharing* (each rank its own link:
    ``contention=False``). Exact with sharing: step
    ``(m/r + L - 1)(t_f + t_b) + 2 (L - 1) l + 2 (r - 1)(l + t (P/t) / (r B))``
    (sim.analytic.network.ring_allreduce_time), reported beside the simulation.

Run::

    dtsim run experiments/contention.py --quick
    python experiments/contention.py

Writes ``gossip.md``, ``allreduce.md`` and ``gossip_time.png``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim.analytic import network as exact
from sim.analytic import pipeline_step_time
from sim.gossip import GossipConfig
from sim.gossip.model import gossip_model
from sim.rng import Streams
from sim.training import TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "contention"

#: The gossip layout: 3 regions of ``hosts`` hosts (latencies in time units, bandwidths per
#: unit).
GEO = ("geo:regions=3,hosts={hosts},intra_region_latency=0.005,inter_region_latency=0.05,"
       "intra_region_bandwidth=100,inter_region_bandwidth=10")
#: Where the disagreement must fall (a fraction of its start).
EPS = 1e-3
#: The all-reduce pipeline's network: 16 hosts on 4 racks (route latency 0.05 in a rack,
#: 0.25 across), links fast enough that the NICs are the bottleneck.
TREE = ("tree:racks=4,hosts=4,host_latency=0.025,uplink_latency=0.1,host_bandwidth=1000,"
        "uplink_bandwidth=1000")

BASE = {"study": "gossip", "law": "contention", "nic": math.inf, "tp": 1, "horizon": 30.0,
        "hosts": 8, "size": 1.0, "nic_allreduce": 8.0, "param_size": 64.0, "steps": 3}


def _points(nics, tps) -> list[dict[str, Any]]:
    pts: list[dict[str, Any]] = [{"study": "gossip", "law": "instant"},
                                 {"study": "gossip", "law": "no-sharing"}]
    pts += [{"study": "gossip", "law": "contention", "nic": b} for b in nics]
    for t in tps:
        for law in ("contention", "no-sharing"):
            pts.append({"study": "allreduce", "law": law, "tp": t})
    return pts


POINTS = _points((16.0, 8.0, 4.0, 3.0), (1, 2, 4, 8))
REPLICATIONS = 10
SEED = 21
#: Whether a replication reached the target disagreement: a probability (intervals in [0, 1]).
RATES = {"reached": None}
#: Every other metric is a time, a rate or a ratio: intervals cut at 0.
NONNEGATIVE = "*"
QUICK = {
    "BASE": dict(BASE, horizon=30.0, hosts=4, steps=2),
    "POINTS": _points((8.0, 3.0), (1, 4)),
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- model


def gossip_config(p: dict[str, Any]) -> GossipConfig:
    """The async gossip config of a ``gossip`` point (law: instant, no-sharing, contention)."""
    topo = GEO.format(hosts=int(p["hosts"]))
    size = float(p["size"])
    kw: dict[str, Any] = {}
    if p["law"] == "instant":
        topo = topo.replace("intra_region_latency=0.005", "intra_region_latency=0").replace(
            "inter_region_latency=0.05", "inter_region_latency=0")
        size = 0.0
        kw["contention"] = False
    elif p["law"] == "no-sharing":
        kw["contention"] = False
    elif math.isfinite(p["nic"]):
        kw["nic"] = float(p["nic"])
    return GossipConfig(topology=topo, protocol="async", rounds=float(p["horizon"]),
                        record_every=0.25, size=size, wake_rate=1.0, engine="des", **kw)


def allreduce_config(p: dict[str, Any]) -> TrainingConfig:
    """The pipeline config of an ``allreduce`` point."""
    return TrainingConfig(stages=4, replicas=4, microbatches=16, steps=int(p["steps"]),
                          schedule="gpipe", routing="round-robin",
                          param_size=float(p["param_size"]), network=TREE,
                          nic=float(p["nic_allreduce"]), tensor_parallel=int(p["tp"]),
                          contention=p["law"] == "contention")


def allreduce_exact(p: dict[str, Any]) -> tuple[float, float]:
    """(step with the NIC shared by the tp ranks, step under the no-sharing law).

    Ring neighbours are the replicas of a stage in order, on the hosts of one
    rack (route latency 0.05), the schedule's hops cross racks (0.25).
    """
    L, r, m, tp = 4, 4, 16, int(p["tp"])
    P, B = float(p["param_size"]), float(p["nic_allreduce"])
    sched = pipeline_step_time(L, m // r, 1.0, 2.0) + 2 * (L - 1) * 0.25
    shared = exact.ring_allreduce_time(r, P / tp, B, 0.05, ranks_per_nic=tp)
    alone = exact.ring_allreduce_time(r, P / tp, B, 0.05)
    return sched + shared, sched + alone


def model(config: dict[str, Any], streams: Streams) -> dict[str, float]:
    """One replication of a point: gossip convergence, or the pipeline's step time."""
    if config["study"] == "gossip":
        out = gossip_model(gossip_config(config), streams)
        d, t = np.asarray(out["disagreement"]), np.asarray(out["time"])
        hit = np.flatnonzero(d <= EPS * d[0])
        return {"time_to_eps": float(t[hit[0]]) if hit.size else float(t[-1]),
                "reached": float(hit.size > 0),
                "exchanges_per_time": float(out["exchanges"]) / float(out["sim_time"])}
    out = training_model(allreduce_config(config), streams)
    shared, alone = allreduce_exact(config)
    return {"step_time": out["step_time_mean"], "exact_step_time": shared,
            "no_sharing_step_time": alone,
            "step_over_no_sharing": out["step_time_mean"] / alone}


# ----------------------------------------------------------------------------- analysis


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Tables of both studies and the gossip convergence time against the NIC."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    out_dir = Path(out_dir)
    g = [r for r in rows if r["study"] == "gossip"]
    base = {r["law"]: r for r in g if r["law"] != "contention"}
    lines = ["| law | NIC | time to D <= 1e-3 D0 (95% CI) | reached | exchanges per time | "
             "time / no-sharing |", "|---|---|---|---|---|---|"]
    ref = float(base["no-sharing"]["time_to_eps_mean"]) if "no-sharing" in base else math.nan
    order = [base[k] for k in ("instant", "no-sharing") if k in base]
    order += sorted((r for r in g if r["law"] == "contention"), key=lambda r: -float(r["nic"]))
    for r in order:
        nic = "-" if r["law"] != "contention" else f"{float(r['nic']):g}"
        lines.append(f"| {r['law']} | {nic} | {float(r['time_to_eps_mean']):.4g} "
                     f"[{float(r['time_to_eps_low']):.4g}, {float(r['time_to_eps_high']):.4g}] | "
                     f"{float(r['reached_mean']):.2g} | {float(r['exchanges_per_time_mean']):.4g} "
                     f"| {float(r['time_to_eps_mean']) / ref:.3g} |")
    (out_dir / "gossip.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    cont = [dict(r, nic_value=float(r["nic"])) for r in g if r["law"] == "contention"]
    if cont:
        plot_sweep(cont, "nic_value", "time_to_eps", out_dir / "gossip_time.png",
                   xlabel="NIC capacity per host (size units per time unit)",
                   ylabel="time until D <= 1e-3 D(0)",
                   title=f"async gossip on a geo layout (no-sharing law: {ref:.3g})")
    a = sorted((r for r in rows if r["study"] == "allreduce"),
               key=lambda r: (int(r["tp"]), r["law"]))
    lines = ["| tp ranks per NIC | law | step time (95% CI) | exact (shared NIC) | "
             "no-sharing law | step / no-sharing law |", "|---|---|---|---|---|---|"]
    for r in a:
        lines.append(f"| {int(r['tp'])} | {r['law']} | {float(r['step_time_mean']):.6g} "
                     f"[{float(r['step_time_low']):.6g}, {float(r['step_time_high']):.6g}] | "
                     f"{float(r['exact_step_time_mean']):.6g} | "
                     f"{float(r['no_sharing_step_time_mean']):.6g} | "
                     f"{float(r['step_over_no_sharing_mean']):.4g} |")
    (out_dir / "allreduce.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
