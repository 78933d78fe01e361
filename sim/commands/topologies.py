"""``dtsim topologies``: list the topology families, or build one spec and describe it."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_choice, check_int
from ._applies import refuse_unless
from ._common import emit_json, print_table
from ._units import TOPOLOGY_LISTING_UNITS, TOPOLOGY_UNITS, units_object

NAME = "topologies"
HELP = "list topology families with their parameters (or build a spec and describe it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim topologies``."""
    p.add_argument("spec", nargs="?", default=None, metavar="SPEC",
                   help="a topology spec to build and describe (ring:n=64, torus:dims=8x8, "
                        "datacenter:regions=3,racks=4,hosts=8, a graph file, module:function); "
                        "bandwidth parameters are in B/s and latency ones in s, or with units "
                        "(tree:host_bandwidth=10Gbit/s,host_latency=5us)")
    p.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="total nodes when the spec does not set the size")
    p.add_argument("--seed", type=int, default=None, help="seed for random families")
    p.add_argument("--stages", type=int, default=None, metavar="L",
                   help="also place L pipeline stages on the layout")
    p.add_argument("--replicas", type=int, default=2, metavar="R",
                   help="replicas per stage for --stages (default 2)")
    p.add_argument("--policy", default="shared", metavar="NAME",
                   help="placement policy for --stages: shared, spread, packed, random")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _listing() -> list[dict[str, Any]]:
    import topologies

    return [
        {"family": f.name, "kind": f.kind, "sized_by": f.sized_by,
         "params": {k: ("required" if v is topologies.REQUIRED else topologies.format_value(v))
                    for k, v in f.params.items()},
         "summary": f.summary}
        for f in topologies.families()
    ]


def _describe(args: argparse.Namespace) -> dict[str, Any]:
    import topologies

    G = topologies.build(args.spec, nodes=args.nodes, seed=args.seed)
    # as every command that uses a topology says (a graph of one node has no link to describe)
    check(G.number_of_nodes() >= 2, "topology",
          f"a graph with at least 2 nodes (got {G.number_of_nodes()})", args.spec)
    degrees = np.fromiter((d for _, d in G.degree()), dtype=np.int64, count=G.number_of_nodes())
    lat = np.fromiter((d for _, _, d in G.edges(data="latency")), dtype=float,
                      count=G.number_of_edges())
    bw = np.fromiter((d for _, _, d in G.edges(data="bandwidth")), dtype=float,
                     count=G.number_of_edges())
    out: dict[str, Any] = {
        "spec": G.graph["spec"], "family": G.graph["family"],
        "nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
        "degree_min": int(degrees.min()), "degree_mean": float(degrees.mean()),
        "degree_max": int(degrees.max()),
        "latency_min": float(lat.min()), "latency_max": float(lat.max()),
        "bandwidth_min": float(bw.min()), "bandwidth_max": float(bw.max()),
    }
    domains = G.graph.get("domains") or {}
    if domains:
        levels: dict[str, int] = {}
        for info in domains.values():
            levels[info.get("level", "?")] = levels.get(info.get("level", "?"), 0) + 1
        out["domains_per_level"] = levels
    if args.stages is not None:
        from sim.rng import Streams

        rng = Streams(args.seed or 0).rng("placement")
        check_int("stages", args.stages, low=1)
        check_choice("policy", args.policy, topologies.POLICIES)
        try:
            placement = topologies.place(G, args.stages, args.replicas, args.policy, rng=rng)
        except ConfigError as exc:  # name the option typed here, not the library's argument
            if exc.name != "placement":
                raise
            raise ConfigError("stages", exc.rule, args.stages) from None
        out["placement"] = placement.records()
        out["_placement_text"] = placement.render()
    return out


def _uses_seed(spec: str) -> bool:
    """False when ``spec`` is a family without randomness (files and builders: unknown, True)."""
    import topologies

    try:
        fam = topologies.parse_spec(spec).family_info()
    except ConfigError:
        return True  # the build says what is wrong with the spec
    return fam is None or fam.seeded


def run(args: argparse.Namespace) -> int:
    """List the families, or describe the graph ``args.spec`` builds."""
    for dest in ("nodes", "seed", "stages"):
        refuse_unless(args, dest, args.spec is not None, "with a SPEC to build")
    for dest in ("replicas", "policy"):
        refuse_unless(args, dest, args.stages is not None, "with --stages")
    if args.spec is not None:
        refuse_unless(args, "seed", _uses_seed(args.spec)
                      or (args.stages is not None and args.policy == "random"),
                      "with a random family or --stages --policy random (this spec has no "
                      "randomness)")
    if args.spec is None:
        rows = _listing()
        if args.json:
            emit_json({"families": rows, "units": units_object(TOPOLOGY_LISTING_UNITS)})
            return 0
        for r in rows:
            params = ", ".join(f"{k} (required)" if v == "required" else f"{k}={v}"
                               for k, v in r["params"].items())
            print(f"{r['family']}  ({r['kind']}; --nodes sets {r['sized_by']})")
            print(f"    {r['summary']}")
            print(f"    {params}")
        from topologies.io import GRAPH_EXTENSIONS

        print("\nspec: FAMILY[:key=value,...] | FILE" + "/".join(GRAPH_EXTENSIONS)
              + " | module:function[:key=value,...]")
        return 0
    info = _describe(args)
    text = info.pop("_placement_text", None)
    if args.json:
        emit_json({**info, "units": units_object(TOPOLOGY_UNITS)})
        return 0
    rows = [(k, f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else str(v),
             TOPOLOGY_UNITS.get(k, ""))
            for k, v in info.items() if k != "placement"]
    print_table(rows, ("field", "value", "unit"))
    if text is not None:
        print()
        print(text)
    return 0
