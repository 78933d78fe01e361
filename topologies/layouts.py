"""Cluster layouts: hosts inside a hierarchy of failure domains.

A layout is a complete graph on the hosts (integer nodes ``0 .. n-1``) whose
edge ``latency`` and ``bandwidth`` depend on the lowest failure domain the two
hosts share (same rack, same region, different regions). Each node carries

* ``domain``: its chain of failure domains, outermost first, for example
  ``("region0", "region0/rack1", "region0/rack1/host2")``;
* ``name``: its innermost domain name (the host).

and the graph carries

* ``G.graph["domains"]``: ``{name: {"unavailability": u, "level": level, "parent": parent}}``
  for every domain (``parent`` None at the top);
* ``G.graph["levels"]``: the level names, outermost first.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from sim.errors import ConfigError, check, check_int, check_probability

from ._util import check_edges, check_link

__all__ = ["datacenter", "geo", "tree", "parse_matrix", "parse_names"]

INF = math.inf


def _layout_graph(name: str, levels: tuple[str, ...], chains: list[tuple[str, ...]],
                  domains: dict[str, dict[str, Any]], link) -> nx.Graph:
    """Assemble a layout: nodes with domain chains, a complete graph with ``link(depth)``."""
    G = nx.Graph(name=name, levels=levels, domains=domains)
    for i, chain in enumerate(chains):
        G.add_node(i, domain=chain, name=chain[-1])
    n = len(chains)
    for i in range(n):
        ci = chains[i]
        for j in range(i + 1, n):
            cj = chains[j]
            depth = 0
            while depth < len(ci) - 1 and ci[depth] == cj[depth]:
                depth += 1
            lat, bw = link(depth)
            G.add_edge(i, j, latency=lat, bandwidth=bw)
    return G


def datacenter(regions: int = 2, racks: int = 4, hosts: int = 4, *,
               region_outage: float = 1e-4, rack_outage: float = 1e-3, host_outage: float = 0.0,
               intra_rack_latency: float = 0.05, inter_rack_latency: float = 0.5,
               inter_region_latency: float = 50.0, intra_rack_bandwidth: float = 100.0,
               inter_rack_bandwidth: float = 40.0, inter_region_bandwidth: float = 10.0,
               ) -> nx.Graph:
    """A datacenter layout: regions > racks > hosts.

    Every host is a node with the domain chain ``("region<i>", "region<i>/rack<j>",
    "region<i>/rack<j>/host<k>")``; each domain is out independently with its
    level's unavailability. Any two hosts are linked, with the latency and
    bandwidth of the lowest level they share.

    Parameters
    ----------
    regions : int
        Number of regions (>= 1).
    racks : int
        Racks per region (>= 1).
    hosts : int
        Hosts per rack (>= 1); the layout has ``regions * racks * hosts`` nodes.
    region_outage, rack_outage, host_outage : float
        Probability in [0, 1] that one region, rack or host domain is out.
    intra_rack_latency, inter_rack_latency, inter_region_latency : float
        Link latency (>= 0) between hosts of one rack, of different racks in one
        region, and of different regions (simulator time units).
    intra_rack_bandwidth, inter_rack_bandwidth, inter_region_bandwidth : float
        Link bandwidth (> 0, ``inf`` allowed) at the same three levels.

    Returns
    -------
    networkx.Graph
        See the module docstring for the attributes.
    """
    regions = check_int("regions", regions, low=1)
    racks = check_int("racks", racks, low=1)
    hosts = check_int("hosts", hosts, low=1)
    u = {
        "region": check_probability("region_outage", region_outage),
        "rack": check_probability("rack_outage", rack_outage),
        "host": check_probability("host_outage", host_outage),
    }
    links = [
        check_link(inter_region_latency, inter_region_bandwidth, prefix="inter_region_"),
        check_link(inter_rack_latency, inter_rack_bandwidth, prefix="inter_rack_"),
        check_link(intra_rack_latency, intra_rack_bandwidth, prefix="intra_rack_"),
    ]
    n = regions * racks * hosts
    check_edges("hosts", hosts, n * (n - 1) / 2)
    domains: dict[str, dict[str, Any]] = {}
    chains = []
    for g in range(regions):
        reg = f"region{g}"
        domains[reg] = {"unavailability": u["region"], "level": "region", "parent": None}
        for r in range(racks):
            rack = f"{reg}/rack{r}"
            domains[rack] = {"unavailability": u["rack"], "level": "rack", "parent": reg}
            for h in range(hosts):
                host = f"{rack}/host{h}"
                domains[host] = {"unavailability": u["host"], "level": "host", "parent": rack}
                chains.append((reg, rack, host))
    return _layout_graph(f"datacenter(regions={regions}, racks={racks}, hosts={hosts})",
                         ("region", "rack", "host"), chains, domains, lambda depth: links[depth])


def parse_matrix(value: Any, name: str = "latency_matrix") -> np.ndarray:
    """A square matrix from nested sequences or a string ``"0/40;40/0"``.

    Parameters
    ----------
    value : str, array_like
        Rows separated by ``;`` and entries by ``/`` (the spec form), or any
        nested sequence of numbers.
    name : str
        Parameter name used in error messages.

    Returns
    -------
    numpy.ndarray
        A float ``(k, k)`` array.
    """
    rule = "a square matrix such as 0/40/70;40/0/80;70/80/0"
    try:
        if isinstance(value, str):
            rows = [[float(x) for x in row.split("/")] for row in value.split(";") if row.strip()]
        else:
            rows = [[float(x) for x in row] for row in value]
        arr = np.array(rows, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(name, rule, value) from None
    check(arr.ndim == 2 and arr.shape[0] == arr.shape[1] and arr.shape[0] >= 1, name, rule, value)
    return arr


def parse_names(value: Any, name: str = "names") -> tuple[str, ...]:
    """Region names from a sequence or a string ``"us-east/us-west/eu"``."""
    rule = "distinct names such as us-east/us-west/eu"
    items = value.split("/") if isinstance(value, str) else list(value)
    out = tuple(str(x).strip() for x in items)
    check(len(out) >= 1 and all(out) and len(set(out)) == len(out)
          and not any("/" in x or ";" in x for x in out), name, rule, value)
    return out


def geo(regions: int | None = None, hosts: int = 4, *, latency_matrix: Any = None,
        names: Any = None, inter_region_latency: float = 50.0,
        intra_region_latency: float = 0.5, region_outage: float = 1e-4,
        host_outage: float = 0.0, intra_region_bandwidth: float = 100.0,
        inter_region_bandwidth: float = 10.0, bandwidth_matrix: Any = None,
        pairs: Any = None, nic: float | None = None) -> nx.Graph:
    """A geo-distributed layout: regions > hosts, every two hosts linked, a latency and a bandwidth per pair of regions.

    Host ``k`` of region ``R`` has the domain chain ``(R, "R/host<k>")``. Hosts
    of one region are linked with ``intra_region_latency`` and
    ``intra_region_bandwidth``; hosts of regions ``a`` and ``b`` with
    ``latency_matrix[a][b]`` and ``bandwidth_matrix[a][b]``, or a region-pair
    table's values (``pairs``, :mod:`topologies.regions`). Every two hosts have a
    link of their own (a full mesh, no switch), so a region pair's bandwidth is
    each host pair's: ``hosts**2`` links of it join two regions.

    Parameters
    ----------
    regions : int or None
        Number of regions; None takes it from ``latency_matrix`` or ``names``
        (else 3).
    hosts : int
        Hosts per region (>= 1).
    latency_matrix : array_like or str or None
        Symmetric, non-negative, zero-diagonal ``regions x regions`` matrix
        (spec form ``0/40/70;40/0/80;70/80/0``); None puts
        ``inter_region_latency`` between every two regions.
    names : sequence of str or str or None
        Region names (spec form ``us-east/us-west/eu``); default ``region<i>``.
    inter_region_latency : float
        Latency between regions when no matrix is given (>= 0).
    intra_region_latency : float
        Latency between hosts of one region (>= 0).
    region_outage, host_outage : float
        Probability in [0, 1] that a region or host domain is out.
    intra_region_bandwidth, inter_region_bandwidth : float
        Link bandwidths (> 0, ``inf`` allowed).
    bandwidth_matrix : array_like or str or None
        Symmetric ``regions x regions`` bandwidths between regions (> 0 off
        the diagonal, which is not read; spec form as ``latency_matrix``);
        None puts ``inter_region_bandwidth`` between every two regions.
    pairs : str or None
        A region-pair table: a shipped one (``dtfm-world``, ``dtfm-us``:
        DT-FM's measurements between AWS regions, in seconds and bytes per
        second) or a CSV file (``topologies/data/README.md``). It gives the
        regions (``names`` then picks some of them, in order), the latency and
        bandwidth of every pair, and of the links inside a region where it
        has a row for it; ``latency_matrix``, ``bandwidth_matrix`` and the
        ``inter_region_*`` values stay unset with it.
    nic : float or None
        Every host's NIC (each direction; ``sim.network``'s node attribute
        ``nic``); None: no NIC limit of its own (the network's ``--nic``).

    Returns
    -------
    networkx.Graph
        ``G.graph["latency_matrix"]`` and ``G.graph["bandwidth_matrix"]`` hold
        the matrices used (nested tuples), ``G.graph["regions"]`` the names.
    """
    intra_by: list[tuple[float, float]] | None = None
    if pairs is not None:
        from .regions import read_region_pairs

        for key, val, default in (("latency_matrix", latency_matrix, None),
                                  ("bandwidth_matrix", bandwidth_matrix, None),
                                  ("inter_region_latency", inter_region_latency, 50.0),
                                  ("inter_region_bandwidth", inter_region_bandwidth, 10.0)):
            check(val is None if default is None else val == default, key,
                  "unset with pairs (the table gives every pair)", val)
        tab = read_region_pairs(pairs)
        if names is not None:
            tab = tab.select(parse_names(names))
        check(regions is None or regions == len(tab.names), "regions",
              f"unset or {len(tab.names)} with pairs {tab.source}", regions)
        latency_matrix = np.array(tab.latency, dtype=float)
        bandwidth_matrix = np.array(tab.bandwidth, dtype=float)
        il = check_link(intra_region_latency, intra_region_bandwidth, prefix="intra_region_")
        intra_by = [(il[0] if math.isnan(latency_matrix[i, i]) else float(latency_matrix[i, i]),
                     il[1] if math.isnan(bandwidth_matrix[i, i])
                     else float(bandwidth_matrix[i, i])) for i in range(len(tab.names))]
        np.fill_diagonal(latency_matrix, 0.0)
        names = tab.names
    mat = None if latency_matrix is None else parse_matrix(latency_matrix)
    nm = None if names is None else parse_names(names)
    if regions is None:
        regions = mat.shape[0] if mat is not None else (len(nm) if nm is not None else 3)
    regions = check_int("regions", regions, low=1)
    hosts = check_int("hosts", hosts, low=1)
    inter = check_link(inter_region_latency, inter_region_bandwidth, prefix="inter_region_")
    intra = check_link(intra_region_latency, intra_region_bandwidth, prefix="intra_region_")
    if intra_by is None:
        intra_by = [intra] * regions
    if mat is None:
        mat = np.full((regions, regions), inter[0])
        np.fill_diagonal(mat, 0.0)
    if bandwidth_matrix is None:
        bmat = np.full((regions, regions), inter[1])
    else:
        bmat = parse_matrix(bandwidth_matrix, "bandwidth_matrix")
        brule = (f"a {regions} x {regions} symmetric matrix with entries > 0 off the diagonal "
                 "(inf allowed)")
        off = ~np.eye(bmat.shape[0], dtype=bool) if bmat.shape[0] == bmat.shape[1] else None
        check(bmat.shape == (regions, regions) and off is not None
              and bool(np.all(bmat[off] > 0)) and not bool(np.any(np.isnan(bmat[off])))
              and bool(np.all((bmat == bmat.T) | np.eye(regions, dtype=bool))),
              "bandwidth_matrix", brule, bandwidth_matrix)
    if nic is not None:
        from sim.errors import check_positive

        nic = check_positive("nic", nic, allow_inf=True)
    rule = f"a {regions} x {regions} symmetric matrix with finite entries >= 0 and zero diagonal"
    check(mat.shape == (regions, regions) and bool(np.all(np.isfinite(mat)))
          and bool(np.all(mat >= 0)) and bool(np.allclose(mat, mat.T))
          and bool(np.all(np.diag(mat) == 0)), "latency_matrix", rule, latency_matrix)
    if nm is None:
        nm = tuple(f"region{i}" for i in range(regions))
    check(len(nm) == regions, "names", f"{regions} names (one per region)", names)
    ur = check_probability("region_outage", region_outage)
    uh = check_probability("host_outage", host_outage)
    n = regions * hosts
    check_edges("hosts", hosts, n * (n - 1) / 2)
    domains: dict[str, dict[str, Any]] = {}
    chains = []
    region_of = []
    for g, reg in enumerate(nm):
        domains[reg] = {"unavailability": ur, "level": "region", "parent": None}
        for h in range(hosts):
            host = f"{reg}/host{h}"
            domains[host] = {"unavailability": uh, "level": "host", "parent": reg}
            chains.append((reg, host))
            region_of.append(g)
    bdiag = bmat.copy()
    np.fill_diagonal(bdiag, [x[1] for x in intra_by])
    G = nx.Graph(name=f"geo(regions={regions}, hosts={hosts})", levels=("region", "host"),
                 domains=domains, latency_matrix=tuple(map(tuple, mat.tolist())),
                 bandwidth_matrix=tuple(map(tuple, bdiag.tolist())), regions=tuple(nm))
    for i, chain in enumerate(chains):
        if nic is None:
            G.add_node(i, domain=chain, name=chain[-1])
        else:
            G.add_node(i, domain=chain, name=chain[-1], nic=nic)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = region_of[i], region_of[j]
            if a == b:
                G.add_edge(i, j, latency=intra_by[a][0], bandwidth=intra_by[a][1])
            else:
                G.add_edge(i, j, latency=float(mat[a, b]), bandwidth=float(bmat[a, b]))
    return G



def tree(racks: int = 4, hosts: int = 4, *, host_bandwidth: float = 100.0,
         host_latency: float = 0.05, uplink_bandwidth: float = 400.0,
         uplink_latency: float = 0.5, rack_outage: float = 1e-3, host_outage: float = 0.0,
         ) -> nx.Graph:
    """A two-level switched tree: hosts on rack switches, rack switches on one core switch.

    Unlike :func:`datacenter` (a link for every pair of hosts), traffic here
    shares links: every host has one link to its rack switch, every rack one
    uplink to the core, so flows between racks share the uplinks and flows of
    one host share its link (what :mod:`sim.network` models). Hosts are the
    nodes ``0 .. racks * hosts - 1`` with the domain chain ``("rack<r>",
    "rack<r>/host<h>")`` and ``role="host"``; the switches are the nodes
    ``"rack<r>"`` and ``"core"`` with ``role="switch"`` and no domain.

    Parameters
    ----------
    racks : int
        Rack switches (>= 1).
    hosts : int
        Hosts per rack (>= 1); the graph has ``racks * hosts + racks + 1`` nodes.
    host_bandwidth, host_latency : float
        Link between a host and its rack switch (bandwidth > 0, inf allowed;
        latency >= 0).
    uplink_bandwidth, uplink_latency : float
        Link between a rack switch and the core.
    rack_outage, host_outage : float
        Probability in [0, 1] that a rack or host domain is out.

    Returns
    -------
    networkx.Graph
        ``G.graph["hosts"]`` is the number of hosts.
    """
    racks = check_int("racks", racks, low=1)
    hosts = check_int("hosts", hosts, low=1)
    hl, hb = check_link(host_latency, host_bandwidth, prefix="host_")
    ul, ub = check_link(uplink_latency, uplink_bandwidth, prefix="uplink_")
    ur = check_probability("rack_outage", rack_outage)
    uh = check_probability("host_outage", host_outage)
    n = racks * hosts
    check_edges("hosts", hosts, n + racks)
    domains: dict[str, dict[str, Any]] = {}
    G = nx.Graph(name=f"tree(racks={racks}, hosts={hosts})", levels=("rack", "host"),
                 domains=domains, hosts=n)
    for r in range(racks):
        rack = f"rack{r}"
        domains[rack] = {"unavailability": ur, "level": "rack", "parent": None}
        for h in range(hosts):
            host = f"{rack}/host{h}"
            domains[host] = {"unavailability": uh, "level": "host", "parent": rack}
            G.add_node(r * hosts + h, domain=(rack, host), name=host, role="host")
    for r in range(racks):
        G.add_node(f"rack{r}", domain=(), name=f"rack{r}", role="switch")
    G.add_node("core", domain=(), name="core", role="switch")
    for r in range(racks):
        for h in range(hosts):
            G.add_edge(r * hosts + h, f"rack{r}", latency=hl, bandwidth=hb)
        G.add_edge(f"rack{r}", "core", latency=ul, bandwidth=ub)
    return G
