"""Placement of pipeline stage replicas onto the hosts of a layout.

Policies (``L`` stages of ``r`` replicas each, or ``r_j`` for stage ``j``; one
worker per host):

``shared``
    The study's design: all replicas of a stage in one domain of the
    grouping level (a rack in :func:`~topologies.datacenter`, a region in
    :func:`~topologies.geo`), every stage in a different one.
``spread``
    A stage's replicas in distinct domains at the highest (outermost) level
    that has at least ``r`` domains (``max r_j`` with per-stage counts): distinct regions when there are at least
    ``r`` regions, else distinct racks, else distinct hosts; within a domain,
    hosts are taken round-robin over its sub-domains.
``packed``
    Hosts filled in layout order (rack by rack): stage 0 takes the first ``r``
    hosts, stage 1 the next ``r``..., so several stages share a rack.
``random``
    ``L r`` hosts drawn uniformly without replacement with ``rng``.

The grouping level is the innermost level above the hosts' own domains (a
domain level whose names are unique per host is the hosts' own).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from sim.errors import ConfigError, check, check_choice, check_int, check_probability

__all__ = ["POLICIES", "Placement", "place", "from_value", "shared_per_stage"]

#: The placement policies, in listing order.
POLICIES = ("shared", "spread", "packed", "random")


@dataclass(frozen=True, eq=False)
class Placement:
    """Where every replica of every stage runs, and the failure domains above it.

    The one placement type: :func:`place` returns it, :func:`from_value` rebuilds
    it from the value form a :class:`sim.pipeline.PipelineConfig` stores, and the
    pipeline engines and exact references read it.

    Attributes
    ----------
    replica_domains : tuple of tuple of tuple of str
        ``replica_domains[j][i]``: the failure-domain chain of replica ``i`` of
        stage ``j``, outermost first (an empty chain: no domain).
    domain_outage : dict[str, float]
        Unavailability of each domain (domains not listed never fail).
    policy : str
        The policy that made it (empty when given directly).
    hosts : tuple of tuple
        ``hosts[j][i]``: the layout node running replica ``i`` of stage ``j``
        (empty when the placement was not made on a layout).
    domain_level : dict[str, str]
        Level name of every domain in ``replica_domains`` (when known).
    stage_latency : tuple of tuple of tuple of float
        ``stage_latency[j][a][b]``: latency from replica ``a`` of stage ``j`` to
        replica ``b`` of stage ``j + 1`` (the edge, else the shortest path;
        empty when not made on a layout).

    Notes
    -----
    Two placements are equal when their domain chains and outages are (and,
    when made on a layout, their policy and hosts).
    """

    replica_domains: tuple[tuple[tuple[str, ...], ...], ...]
    domain_outage: dict[str, float] = field(default_factory=dict)
    policy: str = ""
    hosts: tuple[tuple[Any, ...], ...] = ()
    domain_level: dict[str, str] = field(default_factory=dict)
    stage_latency: tuple[tuple[tuple[float, ...], ...], ...] = ()

    def __post_init__(self) -> None:
        rd = tuple(tuple(tuple(str(d) for d in chain) for chain in stage)
                   for stage in self.replica_domains)
        object.__setattr__(self, "replica_domains", rd)
        check(len(rd) >= 1, "placement", "at least one stage", len(rd))
        for stage in rd:
            check(len(stage) >= 1, "placement", "at least one replica per stage", stage)
        outage = {str(k): check_probability("domain_outage", v)
                  for k, v in dict(self.domain_outage).items()}
        object.__setattr__(self, "domain_outage", outage)
        parents: dict[str, str | None] = {}
        for stage in rd:
            for chain in stage:
                for depth, name in enumerate(chain):
                    parent = chain[depth - 1] if depth else None
                    check(parents.setdefault(name, parent) == parent, "placement",
                          "a consistent domain hierarchy (one parent per domain)", name)

    def _key(self) -> tuple[Any, ...]:
        return (self.replica_domains, tuple(sorted(self.domain_outage.items())), self.policy,
                self.hosts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def value(self) -> tuple[tuple[tuple[tuple[str, ...], ...], ...], tuple[tuple[str, float], ...]]:
        """The value form ``(replica_domains, sorted (domain, outage) pairs)`` a config stores."""
        return self.replica_domains, tuple(sorted(self.domain_outage.items()))

    @property
    def stages(self) -> int:
        """Number of stages."""
        return len(self.replica_domains)

    @property
    def replicas(self) -> tuple[int, ...]:
        """Replicas of each stage."""
        return tuple(len(stage) for stage in self.replica_domains)

    def stages_by_domain(self) -> dict[str, list[int]]:
        """For each domain, the stages with at least one replica inside it."""
        out: dict[str, list[int]] = defaultdict(list)
        for j, stage in enumerate(self.replica_domains):
            for name in sorted({d for chain in stage for d in chain}):
                out[name].append(j)
        return dict(out)

    def shared_domains(self) -> dict[str, list[int]]:
        """Domains holding replicas of more than one stage (what makes stages correlated)."""
        return {d: js for d, js in self.stages_by_domain().items() if len(js) > 1}

    def records(self) -> list[dict[str, Any]]:
        """One flat record per replica: stage, replica, host, domain chain text."""
        return [
            {"stage": j, "replica": i, "host": self.hosts[j][i] if self.hosts else None,
             "domain": " > ".join(self.replica_domains[j][i])}
            for j in range(self.stages) for i in range(self.replicas[j])
        ]

    def render(self) -> str:
        """A text table of the placement, for ``--show-placement``."""
        rows = [("stage", "replica", "host", "domains (outermost first)")]
        for rec in self.records():
            rows.append((str(rec["stage"]), str(rec["replica"]), str(rec["host"]),
                         rec["domain"] or "-"))
        widths = [max(len(r[c]) for r in rows) for c in range(4)]
        counts = self.replicas
        each = (str(counts[0]) if len(set(counts)) == 1
                else "(" + ",".join(map(str, counts)) + ")")
        lines = [f"placement {self.policy or 'given'}: {self.stages} stages x {each} replicas"]
        for k, r in enumerate(rows):
            lines.append("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        shared = {d: js for d, js in self.shared_domains().items()
                  if self.domain_level.get(d) != "host"}
        if shared:
            lines.append("domains shared by stages: " + "; ".join(
                f"{d} (u={self.domain_outage.get(d, 0.0):g}) <- stages "
                + ",".join(map(str, js)) for d, js in sorted(shared.items())))
        else:
            lines.append("domains shared by stages: none")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def from_value(value: Any) -> Placement:
    """A :class:`Placement` from any of its accepted forms.

    Parameters
    ----------
    value : Placement or pair
        A placement, or a pair ``(replica_domains, domain_outage)`` whose second
        item is a mapping or a sequence of ``(domain, outage)`` pairs (the value
        form of :meth:`Placement.value`).

    Returns
    -------
    Placement

    Raises
    ------
    ConfigError
        ``'placement'`` for anything else.
    """
    if isinstance(value, Placement):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        rd, outage = value
        if isinstance(outage, dict):
            return Placement(rd, outage)
        if isinstance(outage, (tuple, list)) and all(
                isinstance(p, (tuple, list)) and len(p) == 2 for p in outage):
            return Placement(rd, dict(outage))
    raise ConfigError("placement", "a Placement or a (replica_domains, domain_outage) pair", value)


def shared_per_stage(replicas: Sequence[int], domain_outage: float) -> Placement:
    """The study's placement: stage ``j``'s replicas all in its own domain ``stage{j}``.

    Parameters
    ----------
    replicas : sequence of int
        Replicas of each stage.
    domain_outage : float
        Unavailability of every stage's domain.

    Returns
    -------
    Placement
    """
    return Placement(tuple(((f"stage{j}",),) * r for j, r in enumerate(replicas)),
                     {f"stage{j}": domain_outage for j in range(len(replicas))})


def _levels(layout: nx.Graph, hosts: list[Any]) -> tuple[list[tuple[str, ...]], int, int]:
    """Domain chains, the chain depth, and the grouping level index (-1: none)."""
    chains = [tuple(layout.nodes[h].get("domain", ())) for h in hosts]
    depth = min((len(c) for c in chains), default=0)
    if depth == 0:
        return chains, 0, -1
    inner = [c[depth - 1] for c in chains]
    per_host = len(set(inner)) == len(inner)
    group = depth - 2 if per_host else depth - 1
    return chains, depth, group


def _fail(policy: str, need: str, have: str) -> ConfigError:
    return ConfigError("placement", f"possible on the layout ({policy} needs {need}; "
                       f"the layout has {have})", policy)


def _level_name(layout: nx.Graph, chains: list[tuple[str, ...]], level: int) -> str:
    levels = layout.graph.get("levels")
    if levels and level < len(levels):
        return str(levels[level])
    domains = layout.graph.get("domains", {})
    name = chains[0][level] if chains and level < len(chains[0]) else ""
    return str(domains.get(name, {}).get("level", f"level{level}"))


def _interleaved(members: list[int], chains: list[tuple[str, ...]], level: int) -> list[int]:
    """Hosts of one domain, round-robin over its sub-domains at ``level + 1``."""
    groups: dict[Any, list[int]] = defaultdict(list)
    for h in members:
        key = chains[h][level + 1] if level + 1 < len(chains[h]) else h
        groups[key].append(h)
    queues = list(groups.values())
    out: list[int] = []
    k = 0
    while len(out) < len(members):
        for q in queues:
            if k < len(q):
                out.append(q[k])
        k += 1
    return out


def place(layout: nx.Graph, stages: int, replicas: int | Sequence[int],
          policy: str = "shared", *,
          rng: np.random.Generator | None = None) -> Placement:
    """Place ``stages`` x ``replicas`` pipeline workers on the hosts of a layout.

    Parameters
    ----------
    layout : networkx.Graph
        A layout (:func:`~topologies.datacenter`, :func:`~topologies.geo`, or
        any graph whose nodes carry ``domain`` chains).
    stages : int
        Number of pipeline stages ``L`` (>= 1).
    replicas : int or sequence of int
        Replicas per stage ``r`` (>= 1), or one count per stage.
    policy : {"shared", "spread", "packed", "random"}
        See the module docstring.
    rng : numpy.random.Generator, optional
        Required by ``random``.

    Returns
    -------
    Placement

    Raises
    ------
    ConfigError
        ``'placement'`` when the layout has too few hosts or domains for the
        policy; ``'rng'`` when ``random`` has no generator.
    """
    policy = check_choice("placement", policy, POLICIES)
    stages = check_int("stages", stages, low=1)
    if isinstance(replicas, (int, np.integer)) and not isinstance(replicas, bool):
        counts = [check_int("replicas", replicas, low=1)] * stages
    else:
        try:
            counts = [check_int("replicas", r, low=1) for r in replicas]  # type: ignore[union-attr]
        except TypeError:
            raise ConfigError("replicas", "an integer >= 1 or one per stage", replicas) from None
        check(len(counts) == stages, "replicas", f"{stages} counts (one per stage)", replicas)
    rmax = max(counts)
    uniform = len(set(counts)) == 1
    rtext = str(rmax) if uniform else f"{rmax} (the largest stage)"
    offsets = np.concatenate([[0], np.cumsum(counts)]).tolist()
    # the hosts: a layout's switches (role="switch": the tree family's racks and core, a graph
    # file's) carry no worker
    hosts = [v for v, role in layout.nodes(data="role") if role != "switch"]
    need = offsets[-1]
    if need > len(hosts):
        raise _fail(policy, f"{need} hosts", f"{len(hosts)}")
    chains, depth, group = _levels(layout, hosts)
    chosen: list[list[int]] = []
    if policy == "packed":
        chosen = [list(range(offsets[j], offsets[j + 1])) for j in range(stages)]
    elif policy == "random":
        check(isinstance(rng, np.random.Generator), "rng",
              "a numpy Generator for placement 'random'", rng)
        assert rng is not None
        pick = rng.choice(len(hosts), size=need, replace=False)
        chosen = [sorted(pick[offsets[j]:offsets[j + 1]].tolist()) for j in range(stages)]
    elif policy == "shared":
        if group < 0:
            raise _fail(policy, f"{stages} shared domains with >= {rtext} hosts",
                        "no shared failure domains")
        members: dict[str, list[int]] = defaultdict(list)
        for h, c in enumerate(chains):
            members[c[group]].append(h)
        level = _level_name(layout, chains, group)
        groups = list(members.values())
        used = [False] * len(groups)
        picked: dict[int, list[int]] = {}
        for j in sorted(range(stages), key=lambda j: -counts[j]):  # largest stages first
            k = next((k for k, m in enumerate(groups) if not used[k] and len(m) >= counts[j]),
                     None)
            if k is None:
                eligible = sum(len(m) >= rmax for m in groups)
                raise _fail(policy, f"{stages} {level}s with >= {rtext} hosts each",
                            f"{eligible}")
            used[k] = True
            picked[j] = groups[k][:counts[j]]
        chosen = [picked[j] for j in range(stages)]
    else:  # spread
        if depth == 0:
            raise _fail(policy, "failure domains", "none")
        level = next((lv for lv in range(depth)
                      if len({c[lv] for c in chains}) >= rmax), None)
        if level is None:
            raise _fail(policy, f"{rtext} distinct domains at some level",
                        f"at most {len({c[depth - 1] for c in chains})}")
        members = defaultdict(list)
        for h, c in enumerate(chains):
            members[c[level]].append(h)
        names = list(members)
        queues = {d: _interleaved(members[d], chains, level) for d in names}
        for j in range(stages):
            order = sorted(range(len(names)),
                           key=lambda k, j=j: (-len(queues[names[k]]), (k - j) % len(names)))
            picks = [names[k] for k in order if queues[names[k]]][:counts[j]]
            if len(picks) < counts[j]:
                lname = _level_name(layout, chains, level)
                raise _fail(policy, f"{counts[j]} {lname}s with a free host for each of "
                            f"{stages} stages", f"free hosts in {len(picks)} at stage {j}")
            chosen.append([queues[d].pop(0) for d in picks])
    host_sets = tuple(tuple(hosts[h] for h in stage) for stage in chosen)
    rdomains = tuple(tuple(chains[h] for h in stage) for stage in chosen)
    info = layout.graph.get("domains", {})
    outage: dict[str, float] = {}
    levels: dict[str, str] = {}
    for stage in rdomains:
        for chain in stage:
            for depth_k, name in enumerate(chain):
                entry = info.get(name, {})
                outage[name] = float(entry.get("unavailability", 0.0))
                levels[name] = str(entry.get("level", _level_name(layout, chains, depth_k)))
    latency = tuple(
        tuple(tuple(_latency(layout, a, b) for b in host_sets[j + 1]) for a in host_sets[j])
        for j in range(stages - 1)
    )
    return Placement(rdomains, outage, policy=policy, hosts=host_sets, domain_level=levels,
                     stage_latency=latency)


def _latency(G: nx.Graph, a: Any, b: Any) -> float:
    """Latency between two hosts: the edge's, else the latency-weighted shortest path."""
    if a == b:
        return 0.0
    data = G.get_edge_data(a, b)
    if data is not None:
        return float(data.get("latency", 1.0))
    try:
        return float(nx.shortest_path_length(G, a, b, weight="latency"))
    except nx.NetworkXNoPath:
        return float("inf")
