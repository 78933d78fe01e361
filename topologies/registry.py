"""The registry of topology families: name, builder, parameters and defaults, size rule."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from sim.errors import ConfigError, check, check_int

from . import graphs, layouts
from ._util import isqrt_exact
from .graphs import parse_dims
from .layouts import parse_matrix, parse_names

__all__ = ["REQUIRED", "Family", "REGISTRY", "families", "get_family", "family_names"]


class _Required:
    """Marker default of a parameter that has none."""

    _instance: _Required | None = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"

    def __reduce__(self):
        return (_Required, ())


#: Default of a parameter that must be given (in the spec or through ``--nodes``).
REQUIRED: Any = _Required()


@dataclass(frozen=True, eq=False)
class Family:
    """One topology family of the registry.

    Attributes
    ----------
    name : str
        Registry name, used in specs (``ring``, ``torus``, ``datacenter``...).
    builder : callable
        The networkx-style builder ``builder(**params) -> networkx.Graph``.
    params : Mapping[str, Any]
        Parameter names in signature order, each with its default
        (:data:`REQUIRED` when it has none).
    summary : str
        First line of the builder's docstring.
    sized_by : str
        The parameter ``--nodes`` sets when the spec does not give it.
    kind : str
        ``"graph"`` (gossip graph family) or ``"layout"`` (failure-domain layout).
    """

    name: str
    builder: Callable[..., nx.Graph]
    params: Mapping[str, Any]
    summary: str
    sized_by: str
    kind: str
    _from_nodes: Callable[[int, Mapping[str, Any]], Any] = field(repr=False, compare=False)
    _count: Callable[[Mapping[str, Any]], int] = field(repr=False, compare=False)

    def describe_params(self) -> str:
        """``"n (required), latency=1.0, bandwidth=inf"``: every parameter with its default."""
        from .spec import format_value

        parts = []
        for key, default in self.params.items():
            parts.append(f"{key} (required)" if default is REQUIRED
                         else f"{key}={format_value(default)}")
        return ", ".join(parts)

    def size_param(self, nodes: int, params: Mapping[str, Any]) -> Any:
        """Value of :attr:`sized_by` giving ``nodes`` nodes in total (other params fixed).

        Raises
        ------
        ConfigError
            ``'nodes'`` when no value of the size parameter gives that many nodes.
        """
        nodes = check_int("nodes", nodes, low=1)
        return self._from_nodes(nodes, params)

    def node_count(self, params: Mapping[str, Any]) -> int:
        """Number of nodes the builder makes with ``params`` (defaults filled), without building."""
        full = {k: v for k, v in self.params.items() if v is not REQUIRED}
        full.update(params)
        return int(self._count(full))

    @property
    def seeded(self) -> bool:
        """True when the family is random (has a ``seed`` parameter)."""
        return "seed" in self.params


def _summary(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.strip().splitlines()[0].replace("``", "") if doc.strip() else fn.__name__


def _family(builder: Callable[..., nx.Graph], *, sized_by: str, kind: str,
            from_nodes: Callable[[int, Mapping[str, Any]], Any],
            count: Callable[[Mapping[str, Any]], int]) -> Family:
    sig = inspect.signature(builder)
    params = {p.name: (REQUIRED if p.default is inspect.Parameter.empty else p.default)
              for p in sig.parameters.values()}
    return Family(builder.__name__, builder, params, _summary(builder), sized_by, kind,
                  from_nodes, count)


def _n(nodes: int, params: Mapping[str, Any]) -> int:
    return nodes


def _count_n(params: Mapping[str, Any]) -> int:
    return int(params["n"])


def _torus_from_nodes(nodes: int, params: Mapping[str, Any]) -> tuple[int, int]:
    side = isqrt_exact(nodes)
    check(side is not None and side >= 2, "nodes",
          "a perfect square >= 4 for torus (or give dims=AxB...)", nodes)
    return (side, side)


def _hypercube_from_nodes(nodes: int, params: Mapping[str, Any]) -> int:
    check(nodes >= 2 and nodes & (nodes - 1) == 0, "nodes",
          "a power of 2 >= 2 for hypercube (or give dim=)", nodes)
    return nodes.bit_length() - 1


def _dc_from_nodes(nodes: int, params: Mapping[str, Any]) -> int:
    per = int(params.get("regions", 2)) * int(params.get("racks", 4))
    check(nodes % per == 0, "nodes", f"a multiple of regions * racks = {per} for datacenter", nodes)
    return nodes // per


def _geo_regions(params: Mapping[str, Any]) -> int:
    if params.get("regions") is not None:
        return int(params["regions"])
    if params.get("names") is not None:
        return len(parse_names(params["names"]))
    if params.get("pairs") is not None:
        from .regions import read_region_pairs

        return len(read_region_pairs(params["pairs"]).names)
    if params.get("latency_matrix") is not None:
        return parse_matrix(params["latency_matrix"]).shape[0]
    if params.get("names") is not None:
        return len(parse_names(params["names"]))
    return 3


def _geo_from_nodes(nodes: int, params: Mapping[str, Any]) -> int:
    per = _geo_regions(params)
    check(nodes % per == 0, "nodes", f"a multiple of regions = {per} for geo", nodes)
    return nodes // per


def _tree_from_nodes(nodes: int, params: Mapping[str, Any]) -> int:
    racks = int(params.get("racks", 4))
    hosts, extra = divmod(nodes - racks - 1, racks)
    check(hosts >= 1 and extra == 0, "nodes", f"racks * hosts + racks + 1 for tree with "
          f"racks = {racks} (the switches are nodes too)", nodes)
    return hosts


def _build_registry() -> dict[str, Family]:
    fams = [
        _family(graphs.complete, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.ring, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.path, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.star, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.torus, sized_by="dims", kind="graph", from_nodes=_torus_from_nodes,
                count=lambda p: math.prod(parse_dims(p["dims"]))),
        _family(graphs.hypercube, sized_by="dim", kind="graph", from_nodes=_hypercube_from_nodes,
                count=lambda p: 2 ** int(p["dim"])),
        _family(graphs.random_regular, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.erdos_renyi, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.watts_strogatz, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.barabasi_albert, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(graphs.expander, sized_by="n", kind="graph", from_nodes=_n, count=_count_n),
        _family(layouts.datacenter, sized_by="hosts", kind="layout", from_nodes=_dc_from_nodes,
                count=lambda p: int(p["regions"]) * int(p["racks"]) * int(p["hosts"])),
        _family(layouts.geo, sized_by="hosts", kind="layout", from_nodes=_geo_from_nodes,
                count=lambda p: _geo_regions(p) * int(p["hosts"])),
        _family(layouts.tree, sized_by="hosts", kind="layout", from_nodes=_tree_from_nodes,
                count=lambda p: int(p["racks"]) * (int(p["hosts"]) + 1) + 1),
    ]
    return {f.name: f for f in fams}


#: Every registered family by name, in listing order.
REGISTRY: dict[str, Family] = _build_registry()


def families() -> list[Family]:
    """Every registered family, in listing order.

    Returns
    -------
    list of Family
    """
    return list(REGISTRY.values())


def family_names() -> list[str]:
    """Names of the registered families, in listing order."""
    return list(REGISTRY)


def normalize_name(name: str) -> str:
    """Registry form of a family name (case-insensitive, ``-`` same as ``_``)."""
    return name.strip().lower().replace("-", "_")


def get_family(name: str) -> Family:
    """The family called ``name`` (``random-regular`` and ``random_regular`` both work).

    Raises
    ------
    ConfigError
        ``'topology'`` listing the valid family names.
    """
    key = normalize_name(name)
    if key not in REGISTRY:
        raise ConfigError("topology", "one of " + ", ".join(REGISTRY), name)
    return REGISTRY[key]
