"""``dtsim network``: finish times of a set of flows on a topology (the flow-level model)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from .. import progress
from ..errors import ConfigError, check, check_choice
from ._applies import refuse_unless
from ._common import emit_json, print_table
from ._timeline import add_timeline_options, timeline_from_args, write_timeline
from ._units import (
    NETWORK_UNITS,
    RATE_HELP,
    SIZE_HELP,
    TIME_HELP,
    RateOption,
    flow_terms,
    given_line,
    network_terms,
    option_terms,
    units_object,
    warn_mixed,
)

NAME = "network"
HELP = "finish times of flows (src,dst,size,start) on a topology, max-min fair sharing"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim network``."""
    p.add_argument("--topology", required=True, metavar="SPEC|FILE",
                   help="a topology spec or graph file whose edges carry bandwidth (B/s) and "
                        "latency (s), or with units (tree:racks=4,hosts=8,host_bandwidth="
                        "10Gbit/s,host_latency=5us; datacenter:..., my.graphml)")
    p.add_argument("--flows", required=True, metavar="FLOWS.csv",
                   help="CSV with the header src,dst,size,start (node names as in the graph; "
                        f"size in {SIZE_HELP}; start in {TIME_HELP})")
    p.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="total nodes when the spec does not set the size")
    p.add_argument("--seed", type=int, default=None, help="seed for random families")
    p.add_argument("--nic", action=RateOption, default=None, metavar="RATE",
                   help=f"NIC capacity (egress and ingress each) of every host without one: "
                        f"{RATE_HELP}")
    p.add_argument("--weighting", default="maxmin", metavar="NAME",
                   help="maxmin (plain max-min fairness, default) or rtt (SimGrid CM02: shares "
                        "weighted by 1 / route latency)")
    p.add_argument("--solver", default="incremental", metavar="NAME",
                   help="incremental (re-solve the flows a change touches, default) or full "
                        "(re-solve every flow at every event: the cross-check)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: finish (in the file's order), links (utilisation)")
    add_timeline_options(p, what="every flow (from its request to its finish) and every "
                         "link's utilisation as it changes", replications=False)


def _random_spec(spec: str) -> bool:
    """False for a graph file and a family without randomness (a builder: it may draw)."""
    import topologies
    from topologies.io import is_graph_file

    if is_graph_file(spec):
        return False
    try:
        fam = topologies.parse_spec(spec).family_info()
    except ConfigError:
        return True  # the build says what is wrong with the spec
    return fam is None or fam.seeded


def run(args: argparse.Namespace) -> int:
    """Read, validate, simulate, print."""
    from ..network import build_network, read_flows, simulate_flows
    from ..network.flows import WEIGHTINGS

    refuse_unless(args, "seed", _random_spec(args.topology), "with a random family or a "
                  "builder (this topology has no randomness)")
    check_choice("weighting", args.weighting, WEIGHTINGS)
    check_choice("solver", args.solver, ("incremental", "full"))
    request = timeline_from_args(args)
    if args.nic is not None:
        check(args.nic > 0, "nic", "> 0", args.nic)
    typed: list = []
    flows = read_flows(args.flows, quantities=typed)
    total = sum(fl.size for fl in flows)  # inf when the sum is beyond a double
    check(total < math.inf, "flows", "sizes whose sum is a finite double (at most about "
          "1.8e308 in all: each link's bytes are summed)", f"{args.flows} (sum {total:g})")
    net = build_network(args.topology, nodes=args.nodes, seed=args.seed, nic=args.nic)
    with progress.bar(len(flows) if len(flows) >= 10_000 else 0, "routes", unit="flow") as bar:
        _check_routes(args, net, flows, bar)
    rec = None
    if request is not None:  # the flows' own events, from the run whose numbers are printed
        from ..network.flows import COMPILED_FROM
        from ..network.kernel import HAVE_NUMBA
        from ..timeline import check_run_size

        if HAVE_NUMBA and args.solver == "incremental" and len(flows) >= COMPILED_FROM:
            raise ConfigError("timeline", f"given with fewer than {COMPILED_FROM} flows (from "
                              "there the compiled loop runs, which records no events)",
                              f"{len(flows)} flows")
        check_run_size(request, 2.0 * len(flows) * (1 + net.n_resources), "flow ends and "
                       "link samples")
        rec = request.recorder(flows=True)
        rec.meta.update(engine="flow-level network", flows=len(flows), unit="s")
    warn_mixed(NAME, flow_terms(args.flows, typed) + network_terms(net.units, "the topology")
               + option_terms(args, {"nic": "rate"}))
    res = simulate_flows(net, flows, weighting=args.weighting,
                         incremental=args.solver == "incremental", recorder=rec)
    finish = [float(x) for x in res.finish]
    late = next((k for k, t in enumerate(finish) if not math.isfinite(t)), None)
    check(late is None, "flows", "sizes and capacities whose finish times are finite doubles "
          "(sharing a link, the flows took longer than about 1.8e308)",
          f"{args.flows}:{(late or 0) + 2}")
    start = min(fl.start for fl in flows)
    makespan = max(finish) - start
    if args.json:
        emit_json({"topology": args.topology, "flows": len(flows), "weighting": args.weighting,
                   "solver": args.solver, "finish": finish, "makespan": makespan,
                   "links": res.links, "units": units_object(NETWORK_UNITS, args)})
        if rec is not None:
            write_timeline(request, rec, command="network", seed=None, json_mode=True)
        return 0
    rows: list[list[Any]] = [
        [k, fl.src, fl.dst, fl.size, fl.start, t, t - fl.start]
        for k, (fl, t) in enumerate(zip(flows, finish, strict=True))]
    print(f"{len(flows)} flows on {args.topology} ({args.weighting} sharing), "
          f"makespan {makespan:.6g} s")
    line = given_line(args)
    if line is not None:
        print(line)
    print_table(rows, ["flow", "src", "dst", "size (B)", "start (s)", "finish (s)",
                       "duration (s)"])
    used = [x for x in res.links if x["bytes"] > 0]
    if used:
        print()
        print(f"links that carried data ({len(used)} of {len(res.links)} finite):")
        print_table([[x["link"], x["capacity"], x["bytes"], x["utilisation"]] for x in used],
                    ["link", "capacity (B/s)", "bytes (B)", "utilisation"])
    if rec is not None:
        write_timeline(request, rec, command="network", seed=None, json_mode=False)
    return 0


def _check_routes(args: argparse.Namespace, net: Any, flows: list, bar: Any) -> None:
    """Every flow names two nodes joined by a route that crosses a finite resource, and its
    time alone on that route is a finite double; ``bar`` counts the flows checked."""
    for k, fl in enumerate(flows, start=2):
        where = f"{args.flows}:{k}"
        try:
            src = net.node_index(fl.src, "src")
            dst = net.node_index(fl.dst, "dst")
        except ConfigError as exc:
            raise ConfigError("flows", f"rows whose {exc.name} is {exc.rule}",
                              f"{where} ({exc.value})") from None
        check(src != dst, "flows", "rows whose dst differs from src", f"{where} ({fl.src})")
        try:
            rt = net.route_between(src, dst)
        except ConfigError:
            raise ConfigError("flows", "rows whose dst is reachable from src",
                              f"{where} ({fl.src} -> {fl.dst})") from None
        if fl.size > 0 and not rt.resources:
            raise ConfigError("topology", "a graph with a finite bandwidth (or NIC) on the route "
                              f"of every flow ({where}: {fl.src} -> {fl.dst} crosses none; "
                              "give edge bandwidths or --nic)", args.topology)
        plain = [net.capacity[r] for r in rt.resources if net.curve[r] is None]
        if fl.size > 0 and plain:  # alone on its route, the flow takes size / slowest
            alone = fl.start + rt.latency + fl.size / min(plain)
            check(alone < math.inf, "flows", "rows whose time alone on their route (start + "
                  "latency + size / least capacity) is a finite double",
                  f"{where} ({fl.size:g} over a capacity of {min(plain):g})")
        if k % 1000 == 0:
            bar.update(1000)
