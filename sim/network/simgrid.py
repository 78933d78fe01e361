"""SimGrid as the peer: the same flows on the same platform, through SimGrid's own CM02 model.

SimGrid's Python bindings (Debian's ``python3-simgrid``, SimGrid 3.32) are
built for the system Python, so the flows run in a subprocess of that
interpreter: :func:`simgrid_finish_times` writes the platform (one SimGrid
link per dtsim resource, with the routes dtsim computed) and the flows as
JSON beside a small driver script, runs it, and reads the finish times back.

Settings that make CM02 plain max-min (every one explicit, whatever the
defaults of the installed version):

* ``network/model:CM02`` with ``network/latency-factor:1``,
  ``network/bandwidth-factor:1`` and ``network/weight-S:0``: no corrective
  factors, and a flow's sharing penalty is its route latency alone;
* ``network/TCP-gamma:0``: no TCP window bound (``rate <= gamma / (2 latency)``);
* ``network/crosstraffic:0``: no reverse-direction ACK traffic (5 % of the
  rate on the back route otherwise);
* ``maxmin/precision`` and ``surf/precision`` at ``1e-13`` (defaults ``1e-5``
  and ``1e-9`` are coarser than the comparison).

CM02 still weights every flow's share by the inverse of its route latency (its
penalty), so its sharing is plain max-min exactly when the flows that compete
have equal route latencies; ``weighting="rtt"`` in dtsim reproduces the
weighting itself.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from .flows import Flow, _as_flows
from .topology import Network, build_network

__all__ = ["SIMGRID_PYTHON", "SIMGRID_CONFIG", "simgrid_available", "simgrid_finish_times"]

#: The interpreter that has SimGrid's bindings (override with DTSIM_SIMGRID_PYTHON).
SIMGRID_PYTHON = os.environ.get("DTSIM_SIMGRID_PYTHON", "/usr/bin/python3")

#: The configuration under which CM02 is max-min (weighted by route latency).
SIMGRID_CONFIG = (
    "network/model:CM02",
    "network/latency-factor:1.0",
    "network/bandwidth-factor:1.0",
    "network/weight-S:0",
    "network/TCP-gamma:0",
    "network/crosstraffic:0",
    "maxmin/precision:1e-13",
    "surf/precision:1e-13",
)

#: Bandwidth of a link that only carries a latency (a dtsim edge with infinite
#: bandwidth): never the bottleneck of any flow here.
LATENCY_ONLY_BANDWIDTH = 1e300

_DRIVER = r'''
import json, sys, time
sys.path.append("/usr/lib/python3/dist-packages")
import simgrid
from simgrid import Actor, Comm, Engine, LinkInRoute, NetZone, this_actor

spec = json.load(open(sys.argv[1]))
engine = Engine(["dtsim-peer"] + ["--cfg=" + c for c in spec["config"]]
                + ["--log=root.thres:critical"])
zone = NetZone.create_full_zone("platform")
hosts = [zone.create_host("h%d" % i, 1e9) for i in range(spec["hosts"])]
links = []
for k, (bw, lat) in enumerate(spec["links"]):
    link = zone.create_link("l%d" % k, bw)
    link.set_latency(lat)
    link.seal()
    links.append(link)
for s, d, route in spec["routes"]:
    zone.add_route(hosts[s].netpoint, hosts[d].netpoint, None, None,
                   [LinkInRoute(links[k]) for k in route], False)
zone.seal()
flows = spec["flows"]
comms = [None] * len(flows)

def driver():
    for i in sorted(range(len(flows)), key=lambda i: flows[i][3]):
        s, d, size, start = flows[i]
        if start > Engine.clock:
            this_actor.sleep_until(start)
        comms[i] = Comm.sendto_async(hosts[s], hosts[d], size)
    Comm.wait_all(comms)

Actor.create("driver", hosts[0], driver)
t0 = time.process_time()
engine.run()
cpu = time.process_time() - t0
json.dump({"finish": [c.finish_time for c in comms], "cpu": cpu}, open(sys.argv[2], "w"))
'''


def simgrid_available() -> bool:
    """True when the SimGrid interpreter imports ``simgrid``."""
    try:
        out = subprocess.run([SIMGRID_PYTHON, "-c", "import sys; sys.path.append("
                              "'/usr/lib/python3/dist-packages'); import simgrid"],
                             capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _platform(net: Network, flows: Sequence[Flow]) -> tuple[list, list, list, list]:
    """SimGrid links (one per dtsim resource, plus latency-only links) and explicit routes."""
    links: list[tuple[float, float]] = [(net.capacity[r], 0.0) for r in range(net.n_resources)]
    for r, c in enumerate(net.curve):
        if c is not None:
            raise ValueError(f"resource {net.resource_names[r]} has a curve: SimGrid's CM02 "
                             "has no per-link size curve")
    lat_link: dict[tuple[int, int], int] = {}
    routes: dict[tuple[int, int], list[int]] = {}
    hosts: dict[int, int] = {}
    out_flows = []
    for fl in flows:
        rt = net.route(fl.src, fl.dst)
        for n in (rt.src, rt.dst):
            hosts.setdefault(n, len(hosts))
        key = (rt.src, rt.dst)
        if key not in routes:
            # the egress NIC first, then each edge (its resource; its latency on a latency-only
            # link, so that both directions of a shared link carry it), the ingress NIC last
            path: list[int] = []
            if net.egress[rt.src] >= 0:
                path.append(net.egress[rt.src])
            for a, b in zip(rt.nodes, rt.nodes[1:], strict=False):
                w, rr = net.link_of[(a, b)]
                if rr >= 0:
                    path.append(rr)
                if w > 0:
                    lk = lat_link.get((a, b))
                    if lk is None:
                        lk = lat_link[(a, b)] = len(links)
                        links.append((LATENCY_ONLY_BANDWIDTH, w))
                    path.append(lk)
            if net.ingress[rt.dst] >= 0:
                path.append(net.ingress[rt.dst])
            routes[key] = path
        if not math.isfinite(fl.size) or fl.size != int(fl.size):
            raise ValueError(f"SimGrid moves whole bytes: size {fl.size!r}")
        out_flows.append([hosts[rt.src], hosts[rt.dst], int(fl.size), float(fl.start)])
    route_rows = [[hosts[s], hosts[d], p] for (s, d), p in routes.items()]
    return links, route_rows, out_flows, list(hosts)


def simgrid_finish_times(network: Any, flows: Sequence[Any], *, timeout: float = 3600.0,
                         config: Sequence[str] = SIMGRID_CONFIG) -> tuple[list[float], float]:
    """Finish times of ``flows`` computed by SimGrid (CM02) on the same platform and routes.

    Parameters
    ----------
    network : anything :func:`~sim.network.topology.build_network` takes (no curves)
    flows : sequence of Flow or (src, dst, size, start); sizes whole numbers
    timeout : float
        Seconds before the subprocess is stopped.
    config : sequence of str
        SimGrid ``--cfg`` settings (default :data:`SIMGRID_CONFIG`).

    Returns
    -------
    (finish, cpu_seconds)
        Finish times in the input order, and the CPU time SimGrid's
        ``Engine.run`` took (the platform's construction excluded).
    """
    net = build_network(network)
    rows = _as_flows(flows)
    links, routes, sg_flows, hosts = _platform(net, rows)
    spec = {"config": list(config), "hosts": len(hosts), "links": links, "routes": routes,
            "flows": sg_flows}
    with tempfile.TemporaryDirectory(prefix="dtsim-simgrid-") as tmp:
        script = os.path.join(tmp, "driver.py")
        inp = os.path.join(tmp, "platform.json")
        out = os.path.join(tmp, "finish.json")
        with open(script, "w") as fh:
            fh.write(_DRIVER)
        with open(inp, "w") as fh:
            json.dump(spec, fh)
        t0 = time.monotonic()
        proc = subprocess.run([SIMGRID_PYTHON, script, inp, out], capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"SimGrid run failed ({proc.returncode}, "
                               f"{time.monotonic() - t0:.1f} s): {' / '.join(tail)}")
        with open(out) as fh:
            res = json.load(fh)
    return [float(x) for x in res["finish"]], float(res["cpu"])
