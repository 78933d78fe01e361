"""``dtsim gossip``: pairwise gossip averaging with stubborn, adversarial and clipped peers."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from ..adversaries import ADVERSARIES
from ..gossip import (
    ENGINES,
    PROTOCOLS,
    GossipConfig,
    comparison_rows,
    default_nodes,
    gossip_model,
    summarize_runs,
)
from ..runner import replicate
from ._common import add_run_options, emit_json, print_table

NAME = "gossip"
HELP = "gossip averaging on a graph with stubborn, adversarial or clipped peers (Study B)"

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``dtsim gossip`` options."""
    p.add_argument("--topology", default="complete", metavar="NAME[:k=v,...]",
                   help="topology spec, e.g. complete, ring:n=16, torus:dims=4x4 (default complete)")
    p.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="number of nodes n, adversaries included (default 16 on the complete graph)")
    p.add_argument("--topology-seed", type=int, default=None, metavar="S",
                   help="seed of random topology families")
    p.add_argument("--protocol", default="matching", metavar="P",
                   help="one of " + ", ".join(PROTOCOLS) + " (default matching)")
    p.add_argument("--rounds", type=int, default=50, metavar="R",
                   help="matching rounds, edge steps, or async time units (default 50)")
    p.add_argument("--record-every", type=int, default=1, metavar="K",
                   help="record every K rounds/steps/time units (default 1)")
    p.add_argument("--noise", type=float, default=0.0, metavar="S",
                   help="std of the fresh noise every honest node adds each round (default 0)")
    p.add_argument("--burn-in", type=int, default=None, metavar="B",
                   help="rounds excluded from the noise-floor average (default rounds / 2)")
    p.add_argument("--dim", type=int, default=1, metavar="D", help="dimension of the values (default 1)")
    p.add_argument("--adversary", default="none", metavar="KIND",
                   help="one of " + ", ".join(ADVERSARIES) + " (default none)")
    p.add_argument("--num-adversaries", type=int, default=None, metavar="K",
                   help="number of adversarial nodes, the first K in node order (default 1 with --adversary)")
    p.add_argument("--adversary-value", type=float, default=None, metavar="V",
                   help="stubborn b (default 10), ALIE z (default 1), dissensus eps (default 1)")
    p.add_argument("--clip", type=float, default=None, metavar="TAU",
                   help="honest nodes move by clip(x_peer - x_self, TAU) / 2")
    p.add_argument("--adaptive-clip", action="store_true",
                   help="self-centred clipping with the ClippedGossip oracle radius")
    p.add_argument("--wake-rate", type=float, default=1.0, metavar="R",
                   help="async: Poisson wake-up rate per node (default 1)")
    p.add_argument("--size", type=float, default=1.0, metavar="S",
                   help="message size; an exchange takes latency + size / bandwidth (default 1)")
    p.add_argument("--availability", type=float, default=1.0, metavar="A",
                   help="async: fraction of time each node is online (default 1, no churn)")
    p.add_argument("--mean-downtime", type=float, default=1.0, metavar="T",
                   help="async: mean offline period (default 1)")
    p.add_argument("--engine", default="auto", metavar="E",
                   help="matching rounds: " + ", ".join(ENGINES) + " (default auto: the vectorised "
                        "engine; des runs every node as a SimPy process, slower, for cross-checks)")
    add_run_options(p, replications=20)


def config_from_args(args: argparse.Namespace) -> GossipConfig:
    """Build (and so validate) the :class:`~sim.gossip.GossipConfig` of the options."""
    nodes = default_nodes(args.topology, args.nodes)
    burn_in = args.burn_in
    if burn_in is None:
        burn_in = args.rounds // 2 if isinstance(args.rounds, int) and args.rounds > 0 else 0
    return GossipConfig(
        topology=args.topology,
        nodes=nodes,
        protocol=args.protocol,
        rounds=args.rounds,
        noise=args.noise,
        dim=args.dim,
        adversary=args.adversary,
        num_adversaries=args.num_adversaries,
        adversary_value=args.adversary_value,
        clip=args.clip,
        adaptive_clip=args.adaptive_clip,
        record_every=args.record_every,
        burn_in=burn_in,
        wake_rate=args.wake_rate,
        size=args.size,
        availability=args.availability,
        mean_downtime=args.mean_downtime,
        topology_seed=args.topology_seed,
        engine=args.engine,
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "-"
    return f"{v:.6g}" if isinstance(v, (float, np.floating)) else str(v)


def run(args: argparse.Namespace) -> int:
    """Run the replications and print the report (text table or one JSON object)."""
    cfg = config_from_args(args)
    records = replicate(gossip_model, cfg, replications=args.replications, seed=args.seed,
                        executor=args.executor, workers=args.workers)
    report = summarize_runs(records, cfg)
    errors = [r["error"] for r in records if r.get("error")]
    if args.json:
        payload = {
            "topology": cfg.topology, "nodes": cfg.n, "protocol": cfg.protocol,
            "rounds": cfg.rounds, "noise": cfg.noise, "dim": cfg.dim,
            "adversary": cfg.adversary, "num_adversaries": cfg.num_adversaries,
            "adversary_value": cfg.value if cfg.adversary != "none" else None,
            "clip": cfg.clip, "adaptive_clip": cfg.adaptive_clip, "seed": args.seed,
            "engine": cfg.resolved_engine, "engine_reason": cfg.engine_reason,
            "errors": errors,
        }
        payload.update(report)
        emit_json(payload)
        return 0 if not errors else 1
    print(f"gossip: {cfg.protocol} on {cfg.topology} with n = {cfg.n} "
          f"({cfg.honest_count} honest), {report['replications']} replications, seed {args.seed}")
    print(f"engine: {cfg.resolved_engine} ({cfg.engine_reason})")
    rows = [(r["quantity"], _fmt(r["simulated"]),
             f"[{_fmt(r['interval'].low)}, {_fmt(r['interval'].high)}]" if r["interval"] is not None else "-",
             _fmt(r["exact"])) for r in comparison_rows(report)]
    print_table(rows, ("quantity", "simulated", "95% CI", "exact"))
    for e in errors:
        print(f"replication error: {e}")
    return 0 if not errors else 1
