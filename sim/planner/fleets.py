"""Fleets for the planner: parsed from a short spec, or the GPUs measured runs used."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ..errors import check
from ..profiles import Fleet, NetworkProfile, NodeKind, Plan

__all__ = ["parse_nodes", "fleet_of_plans", "fleet_gpus"]

_SPEC = re.compile(r"(?P<gpu>[^:,@\s]+):(?P<gpn>[0-9]+)x(?P<count>[0-9]+)(?:@(?P<zone>[^,\s]+))?")


def parse_nodes(spec: str, network: NetworkProfile) -> Fleet:
    """A fleet from ``GPU:GPUS_PER_NODExCOUNT[@ZONE],...`` (e.g. ``GH-96:4x32@us-central1-a``).

    Without ``@ZONE`` the zone is the one the network's links give that GPU
    type, when they give it exactly one.
    """
    check(isinstance(spec, str) and spec.strip() != "", "nodes",
          "GPU:GPUS_PER_NODExCOUNT[@ZONE], comma separated", spec)
    zones: dict[str, set[str]] = {}
    for link in network.links:
        for gpu, zone in (link.src, link.dst):
            zones.setdefault(gpu, set()).add(zone)
    count: Counter[NodeKind] = Counter()
    for part in spec.split(","):
        mt = _SPEC.fullmatch(part.strip())
        check(mt is not None, "nodes", "GPU:GPUS_PER_NODExCOUNT[@ZONE], comma separated "
              "(e.g. GH-96:4x32@us-central1-a)", part)
        gpu, zone = mt["gpu"], mt["zone"]  # type: ignore[index]
        known = sorted(zones.get(gpu, ()))
        if zone is None:
            # (user trial 15) with no link for the GPU type at all (a user's catalogue without
            # network.json) no zone can be inferred, and any name does for nodes that talk
            # over no link: say so, not only that the network has none
            check(len(known) == 1, "nodes", f"a zone for {gpu} (@ZONE; the network has "
                  f"{', '.join(known)} for it)" if known else f"a zone for {gpu} (@ZONE; the "
                  f"network has no link for {gpu} to take one from: name any, e.g. "
                  f"{part.strip()}@dc1, and give links between zones in network.json or "
                  "--fleet for plans across nodes)", part)
            zone = known[0]
        else:  # a typo would leave the nodes without links: every multi-node plan refused
            check(not known or zone in known, "nodes", f"a zone the network has links for "
                  f"{gpu} in ({', '.join(known)})", part)
        check(len(mt["gpn"]) <= 9 and len(mt["count"]) <= 9, "nodes",  # type: ignore[index]
              "GPUs per node and counts below 10^9", part)
        check(int(mt["gpn"]) >= 1 and int(mt["count"]) >= 1, "nodes",  # type: ignore[index]
              "GPUs per node and counts >= 1", part)
        count[NodeKind(gpu, int(mt["gpn"]), zone)] += int(mt["count"])  # type: ignore[index]
    return Fleet(tuple(count.items()), network)


def fleet_of_plans(plans: Iterable[Plan], network: NetworkProfile) -> Fleet:
    """The GPUs measured runs used: per node kind, the most replicas any of ``plans`` put on it.

    A plan's replica is one node of ``gpus_per_node`` GPUs of its type and zone
    (the Sailor artifact's convention), so a run's fleet is its replicas' nodes.
    """
    most: Counter[NodeKind] = Counter()
    for plan in plans:
        here = Counter(r.node for st in plan.stages for r in st.replicas)
        for kind, n in here.items():
            most[kind] = max(most[kind], n)
    check(len(most) > 0, "runs", "at least one run", ())
    return Fleet(tuple(sorted(most.items(), key=lambda kv: str(kv[0]))), network)


def fleet_gpus(fleet: Fleet) -> str:
    """``24 GPUs: 3 x RTX-3090x8@z, ...`` (for headers)."""
    parts = [f"{n} x {k}" for k, n in fleet.nodes if n]
    return f"{fleet.gpus} GPUs: " + ", ".join(parts)
