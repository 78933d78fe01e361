"""Link quantities with units in topology specs and graph files (see :mod:`sim.units`).

A spec parameter whose name contains ``bandwidth`` takes a rate, one named
``nic`` a rate, one whose name contains ``latency`` a time (a matrix entry by
entry): ``tree:host_bandwidth=10Gbit/s,host_latency=5us``,
``geo:latency_matrix=0/40ms;40ms/0``, ``geo:bandwidth_matrix=0/10Gbit/s;10Gbit/s/0``
(a rate's ``/s`` is read with its number, not as a separator), ``geo:nic=25Gbps``.
A graph file's edge ``bandwidth`` and ``latency`` and node ``nic``, ``egress``
and ``ingress`` may be written the same way (``0 1 5us 10Gbit/s`` in an edge
list, ``bandwidth="100Gbit/s"`` in GraphML or GML). A plain number means what it
meant before: bytes per second, seconds.

``G.graph["units"]`` records how a graph's link quantities were given, for the
warning on a transfer time that mixes numbers with and without units: it maps
``bandwidth``, ``latency`` and ``nic`` to a pair (an example
:class:`sim.units.Quantity` given with a unit, an example given as a plain
number or left at a default), each None when there is none; 0 and inf, which
mean the same in every unit, are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import networkx as nx

from sim.errors import ConfigError
from sim.units import RATE, TIME, TIME_UNITS, Quantity, has_unit, parse, parse_quantity

__all__ = ["param_kind", "link_value", "spec_units", "typed_params", "UnitsSeen", "LINK_ATTRS"]

#: Edge and node attributes that take a quantity, and its kind.
LINK_ATTRS = {"bandwidth": RATE, "latency": TIME, "nic": RATE, "egress": RATE, "ingress": RATE}


def param_kind(key: str) -> str | None:
    """The quantity a spec parameter takes by its name: ``*bandwidth*`` and ``nic`` a rate,
    ``*latency*`` a time, any other none."""
    return RATE if "bandwidth" in key or key == "nic" else TIME if "latency" in key else None


def _rate_items(row: str) -> list[str]:
    """A row of ``/``-separated rates, each rate's ``/s`` (``/ms``, ...) kept with it:
    ``0/10Gbit/s/5GB/s`` -> ``["0", "10Gbit/s", "5GB/s"]``."""
    out: list[str] = []
    for tok in row.split("/"):
        if out and tok.strip() in TIME_UNITS and has_unit(out[-1]):
            out[-1] += "/" + tok.strip()
        else:
            out.append(tok)
    return out


def link_value(key: str, text: str, spec_text: str) -> Any:
    """A spec parameter's value: :func:`topologies.parse_value`, with units where the name takes them.

    Parameters
    ----------
    key : str
        The parameter's name (its kind by :func:`param_kind`).
    text : str
        Its value as written.
    spec_text : str
        The whole spec, for the message.

    Returns
    -------
    object
        A rate or time with a unit as a float in B/s or s (a matrix of times
        entry by entry); anything else as :func:`topologies.parse_value` reads it.

    Raises
    ------
    ConfigError
        ``'topology'`` naming the spec when a value written with a unit is not
        one of the parameter's kind (``bandwidth=10GB``), or an unknown unit
        follows a number (``bandwidth=10parsecs``).
    """
    from .spec import parse_value

    kind = param_kind(key)
    if kind is None:
        return parse_value(text)

    def one(x: Any) -> Any:
        if isinstance(x, str) and (has_unit(x) or x.strip()[:1].isdigit()):
            try:
                return parse(x.strip(), kind, key)
            except ConfigError as exc:
                raise ConfigError("topology", f"a spec whose {exc.name} is {exc.rule}",
                                  spec_text) from None
        return x

    if has_unit(text.strip()):  # before "/" splits 10Gbit/s
        return one(text.strip())
    if kind == RATE and "/" in text:  # a list or matrix of rates: 10Gbit/s is one entry
        from .spec import _scalar

        t = text.strip()
        if ";" in t:  # as parse_value: rows split by ";", entries by "/"
            return tuple(tuple(one(_scalar(x)) for x in _rate_items(r))
                         for r in t.split(";") if r.strip())
        return tuple(one(_scalar(x)) for x in _rate_items(t) if x.strip())
    value = parse_value(text)
    if isinstance(value, tuple):
        return tuple(tuple(one(x) for x in v) if isinstance(v, tuple) else one(v) for v in value)
    return one(value)


def _unit_values(spec: str) -> dict[str, tuple[str, list[str]]]:
    """Parameter -> (its value as written, the entries written with a unit), for each link
    parameter of a spec's text with at least one such entry."""
    from .spec import _CALLABLE

    m = _CALLABLE.fullmatch(spec.strip())
    rest = (m["params"] or "") if m is not None and m["params"] is not None \
        else spec.strip().partition(":")[2]
    typed: dict[str, tuple[str, list[str]]] = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq or param_kind(key.strip()) is None:
            continue
        whole = value.strip()
        found = [whole] if has_unit(whole) else [
            x.strip() for row in whole.split(";") for x in _rate_items(row)
            if has_unit(x.strip())]
        if found:
            typed[key.strip()] = (whole, found)
    return typed


def _typed_units(spec: str) -> dict[str, str]:
    """Parameter -> the first value written with a unit, from a spec's text."""
    return {k: found[0] for k, (_, found) in _unit_values(spec).items()}


def typed_params(spec: Any) -> dict[str, str]:
    """Parameter -> its value as typed, for each link parameter of spec text ``spec`` written
    with a unit (in whole or in one entry: ``bandwidth=0Gbit/s``, ``latency_matrix=0/1ms;1ms/0``);
    {} for a parsed spec (numbers only). For refusals, which show what was typed, not the B/s
    or s it was read as."""
    if not isinstance(spec, str):
        return {}
    return {k: whole for k, (whole, _) in _unit_values(spec).items()}


def spec_units(spec: Any, params: Mapping[str, Any], defaults: Mapping[str, Any]
               ) -> dict[str, tuple[Quantity | None, Quantity | None]]:
    """``G.graph["units"]`` of a family's (or builder's) graph, from its spec and parameters.

    Parameters
    ----------
    spec : str or TopologySpec
        The spec as given (a TopologySpec holds numbers only: no units to find).
    params : Mapping
        The resolved parameters.
    defaults : Mapping
        The family's parameters with their defaults (``REQUIRED`` ones skipped).
    """
    from .registry import REQUIRED
    from .spec import format_value

    typed = _typed_units(spec) if isinstance(spec, str) else {}
    full = {k: v for k, v in defaults.items() if v is not REQUIRED}
    full.update(params)
    for key, by in UNUSED_WHEN.items():  # a default the layout does not use is no term
        if key not in typed and any(full.get(b) is not None for b in by):
            full.pop(key, None)
    pairs = _pairs_quantities(full.get("pairs"))
    out: dict[str, tuple[Quantity | None, Quantity | None]] = {}
    attrs = [("bandwidth", RATE), ("latency", TIME)] + ([("nic", RATE)] if "nic" in full else [])
    for attr, kind in attrs:
        unit = plain = None
        for key, value in full.items():
            if param_kind(key) != kind or (key == "nic") != (attr == "nic"):
                continue
            if key in typed:
                unit = unit or parse_quantity(typed[key], kind, key)
                continue
            flat = value if isinstance(value, tuple) else (value,)
            for x in (y for row in flat for y in (row if isinstance(row, tuple) else (row,))):
                if plain is None and isinstance(x, (int, float)) and not isinstance(x, bool) \
                        and 0 < x < math.inf:
                    plain = Quantity(float(x), kind, format_value(x))
        if unit is None and attr in pairs:
            unit = pairs[attr]
        out[attr] = (unit, plain)
    return out


#: Parameters a layout ignores once others are given (geo: a latency or bandwidth matrix, or a
#: region-pair table, gives every pair between regions), so their defaults are no term of a
#: transfer's time.
UNUSED_WHEN: dict[str, tuple[str, ...]] = {
    "inter_region_latency": ("latency_matrix", "pairs"),
    "inter_region_bandwidth": ("bandwidth_matrix", "pairs"),
}


def _pairs_quantities(pairs: Any) -> dict[str, Quantity]:
    """A region-pair table's first finite latency and bandwidth, as quantities with units (read
    into s and B/s, :mod:`topologies.regions`) when the table states its units; {} without a
    table or for one of plain numbers (its numbers are then the spec's plain terms too)."""
    if pairs is None:
        return {}
    from .regions import read_region_pairs

    tab = read_region_pairs(pairs)
    if not tab.with_units:
        return {}
    out: dict[str, Quantity] = {}
    for attr, kind, unit, matrix in (("latency", TIME, "s", tab.latency),
                                      ("bandwidth", RATE, "B/s", tab.bandwidth)):
        vals = [x for row in matrix for x in row if 0 < x < math.inf]
        if vals:
            out[attr] = parse_quantity(f"{vals[0]!r}{unit}", kind, "pairs")
    return out


class UnitsSeen:
    """Reads a graph's link attributes written with units; records how they were given.

    :func:`topologies.validate_graph` passes every edge ``bandwidth`` and
    ``latency`` and node ``nic``/``egress``/``ingress`` through :meth:`value`
    and calls :meth:`record` at the end, which sets ``G.graph["units"]`` unless
    the builder already did (a family spec, from its parameters).
    """

    def __init__(self, G: nx.Graph) -> None:
        self.G = G
        self.found: dict[str, list[Any]] = {}

    def value(self, attr: str, value: Any, where: str, label: str) -> Any:
        """``value`` as a number when it is written with a unit, else unchanged.

        Raises
        ------
        ConfigError
            ``'topology'`` naming the graph, the attribute and the element when
            the unit is not one of the attribute's kind.
        """
        kind = LINK_ATTRS[attr]
        pair = self.found.setdefault("nic" if attr in ("egress", "ingress") else attr,
                                     [None, None])
        if isinstance(value, str) and has_unit(value):
            try:
                q = parse_quantity(value, kind, attr)
            except ConfigError as exc:
                raise ConfigError("topology", f"a graph whose {where.split()[0]} {attr} values "
                                  f"are {exc.rule} ({where} has {value!r})", label) from None
            if pair[0] is None and 0 < q.value < math.inf:
                pair[0] = q
            return q.value
        if pair[1] is None and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and 0 < value < math.inf:
            pair[1] = Quantity(float(value), kind, repr(value))
        return value

    def record(self) -> None:
        """Set ``G.graph["units"]`` unless it is set."""
        if not isinstance(self.G.graph.get("units"), dict):
            self.G.graph["units"] = {k: tuple(v) for k, v in self.found.items()}
