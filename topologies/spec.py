"""One topology spec everywhere: parse, resolve against ``--nodes``/``--seed``, build, validate.

Spec forms (the ``--topology`` value of every command)::

    ring:n=64                          a family with parameters
    torus:dims=8x8                     tuples as AxB (or a/b), matrices as a/b;c/d
    datacenter:regions=3,racks=4,hosts=8
    complete                           the size comes from --nodes
    graphs/my.graphml                  a file: .graphml, .gml, .edges, .edgelist, .txt
    mypkg.nets:build                   the user's builder (module:function)
    mypkg.nets:build:n=32,k=4          ... with keyword arguments
    ./nets.py:build                    ... from a Python file

``--nodes`` fills the family's size parameter (:attr:`Family.sized_by`) when
the spec does not give it, and ``--seed`` fills ``seed`` the same way; what the
spec says always wins. ``n`` counts every node.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from sim.errors import MAX_SOURCE_BYTES, ConfigError, ascii_float, check_input_file, check_memory

from .graphs import parse_dims
from .io import GRAPH_EXTENSIONS, check_simple, domain_chain, is_graph_file, read_graph
from .registry import REGISTRY, REQUIRED, Family, normalize_name
from .units import UnitsSeen, link_value, spec_units, typed_params

__all__ = [
    "TopologySpec",
    "parse_spec",
    "resolve",
    "build",
    "validate_graph",
    "is_complete",
    "num_nodes",
    "parse_value",
    "format_value",
]

# ASCII digits only (re.ASCII): other scripts' digits ("\u0662") are text, refused by the
# parameter's rule, as sim.errors.ascii_int and ascii_float refuse them on the command line
_INT = re.compile(r"[+-]?\d+", re.ASCII)
_DIMS = re.compile(r"\d+(x\d+)+", re.ASCII)
_KEY = re.compile(r"[A-Za-z_]\w*")
_CALLABLE = re.compile(r"(?P<mod>[A-Za-z_][\w.]*|[^:]+\.py):(?P<fn>[A-Za-z_]\w*)(?::(?P<params>.*))?")


# --------------------------------------------------------------------------- values


def _scalar(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("inf", "+inf", "infinity"):
        return math.inf
    if low in ("-inf", "-infinity"):
        return -math.inf
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(t):
        return int(t)
    try:
        return ascii_float(t)
    except ValueError:
        return t


def parse_value(text: str) -> Any:
    """A spec value from its text.

    ``64`` -> int, ``0.1``/``1e-3``/``inf`` -> float, ``none`` -> None,
    ``true``/``false`` -> bool, ``8x8`` -> ``(8, 8)``, ``a/b/c`` -> tuple,
    ``0/1;1/0`` -> tuple of row tuples, anything else -> str.

    Parameters
    ----------
    text : str
        The value as written in the spec.

    Returns
    -------
    object
    """
    t = text.strip()
    if ";" in t:
        return tuple(tuple(_scalar(x) for x in row.split("/")) for row in t.split(";") if row.strip())
    if _DIMS.fullmatch(t.lower()):
        return tuple(int(x) for x in t.lower().split("x"))
    if "/" in t:
        return tuple(_scalar(x) for x in t.split("/") if x.strip())
    return _scalar(t)


def format_value(value: Any) -> str:
    """The spec text of a value; ``parse_value(format_value(v)) == v`` for parsed values.

    Parameters
    ----------
    value : object
        A number, string, None, bool, tuple or matrix (tuple of tuples).

    Returns
    -------
    str
    """
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list, np.ndarray)):
        items = list(value)
        if items and all(isinstance(x, (tuple, list, np.ndarray)) for x in items):
            text = ";".join("/".join(format_value(x) for x in row) for row in items)
            return text + (";" if len(items) == 1 else "")
        if len(items) >= 2 and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                   for x in items):
            return "x".join(str(int(x)) for x in items)
        return "/".join(format_value(x) for x in items) + ("/" if len(items) == 1 else "")
    return str(value)


def _freeze(value: Any) -> Any:
    """Lists and arrays as tuples (so a spec is hashable and round-trips)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(x) for x in value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class TopologySpec:
    """A parsed topology spec: a family with parameters, a graph file, or a user builder.

    Exactly one of ``family``, ``path`` and ``target`` is set. ``str(spec)`` is
    the spec text, and ``parse_spec(str(spec)) == spec``.

    Attributes
    ----------
    family : str or None
        Registry family name (``ring``, ``datacenter``...).
    params : Mapping[str, Any]
        Parameters as given (for a family or a user builder).
    path : str or None
        Graph file path.
    target : str or None
        ``module:function`` (or ``file.py:function``) of a user builder.
    """

    family: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = None
    target: str | None = None

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.family, self.path, self.target)]
        if sum(given) != 1:
            raise ConfigError("topology", "exactly one of family, path or target", self)
        params = {str(k): _freeze(v) for k, v in dict(self.params).items()}
        if self.path is not None and params:
            raise ConfigError("topology", "a graph file without parameters", self.path)
        if self.family is not None:
            fam = _family_or_error(self.family, self.family)
            object.__setattr__(self, "family", fam.name)
            _check_param_names(fam, params, self._text(fam.name, params))
        object.__setattr__(self, "params", params)

    @staticmethod
    def _text(head: str, params: Mapping[str, Any]) -> str:
        if not params:
            return head
        return head + ":" + ",".join(f"{k}={format_value(v)}" for k, v in params.items())

    def __str__(self) -> str:
        if self.path is not None:
            return self.path
        return self._text(self.family if self.family is not None else str(self.target),
                          self.params)

    def __hash__(self) -> int:
        return hash((self.family, self.path, self.target, tuple(sorted(self.params.items()))))

    @property
    def kind(self) -> str:
        """``"family"``, ``"file"`` or ``"callable"``."""
        if self.family is not None:
            return "family"
        return "file" if self.path is not None else "callable"

    @property
    def is_complete(self) -> bool:
        """True for the complete graph, whose gossip needs no edges (build nothing)."""
        return self.family == "complete"

    def family_info(self) -> Family | None:
        """The registry :class:`Family`, or None for files and user builders."""
        return REGISTRY[self.family] if self.family is not None else None


def _valid_families_rule() -> str:
    return ("a family (" + ", ".join(REGISTRY) + "), a graph file ("
            + ", ".join(GRAPH_EXTENSIONS) + ") or module:function")


def _family_or_error(name: str, spec_text: str) -> Family:
    key = normalize_name(name)
    if key not in REGISTRY:
        raise ConfigError("topology", _valid_families_rule(), spec_text)
    return REGISTRY[key]


def _check_param_names(fam: Family, params: Mapping[str, Any], spec_text: str) -> None:
    unknown = [k for k in params if k not in fam.params]
    if unknown:
        raise ConfigError("topology", f"given {fam.name} parameters among "
                          f"[{fam.describe_params()}], not {', '.join(unknown)}", spec_text)


#: Parameters whose value is text kept as written (a file path: ``geo:pairs=data/pairs.csv``),
#: never split into a list at "/".
TEXT_KEYS = frozenset({"pairs"})


def _parse_params(text: str, spec_text: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if not text.strip():
        return params
    for item in text.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not _KEY.fullmatch(key) or not value.strip():
            raise ConfigError("topology", "written family:key=value,key=value", spec_text)
        if key in params:
            raise ConfigError("topology", f"given each parameter once ({key} repeats)", spec_text)
        if key in TEXT_KEYS:  # a file path or a preset name: its "/" separates folders
            params[key] = value.strip()
        else:
            params[key] = link_value(key, value, spec_text)  # bandwidth=10Gbit/s: topologies.units
    return params


def parse_spec(spec: str | TopologySpec) -> TopologySpec:
    """Parse a topology spec (see the module docstring for the forms).

    Parameters
    ----------
    spec : str or TopologySpec
        Spec text (a TopologySpec is returned unchanged).

    Returns
    -------
    TopologySpec

    Raises
    ------
    ConfigError
        ``'topology'``: unknown family (the valid ones are listed), unknown
        parameter (the valid ones with defaults are listed), malformed text.
    """
    if isinstance(spec, TopologySpec):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("topology", _valid_families_rule(), spec)
    text = spec.strip()
    head, _, rest = text.partition(":")
    if normalize_name(head) in REGISTRY:
        fam = REGISTRY[normalize_name(head)]
        return TopologySpec(family=fam.name, params=_parse_params(rest, text))
    if is_graph_file(text) or (":" not in text and os.path.isfile(text)):
        return TopologySpec(path=text)
    m = _CALLABLE.fullmatch(text)
    if m:
        return TopologySpec(target=f"{m['mod']}:{m['fn']}",
                            params=_parse_params(m["params"] or "", text))
    raise ConfigError("topology", _valid_families_rule(), text)


# --------------------------------------------------------------------------- user builders


def _load_target(target: str) -> Callable[..., Any]:
    mod_name, _, fn_name = target.rpartition(":")
    rule = "an importable module:function"
    try:
        if mod_name.endswith(".py"):
            path = os.path.abspath(mod_name)
            if not os.path.exists(path):
                raise FileNotFoundError(f"no such file {mod_name}")
            # a regular file of at most MAX_SOURCE_BYTES: a FIFO or a device is refused unread
            check_input_file("topology", path, limit=MAX_SOURCE_BYTES,
                             rule="a readable .py file of a builder")
            modspec = importlib.util.spec_from_file_location(
                f"_dtsim_user_{abs(hash(path))}", path)
            if modspec is None or modspec.loader is None:
                raise ImportError(f"cannot load {mod_name}")
            module = importlib.util.module_from_spec(modspec)
            # registered before it runs, as an import would be: a dataclass in the
            # file looks its module up in sys.modules while it is being defined
            sys.modules[modspec.name] = module
            modspec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:  # console scripts do not put the cwd on the path
                sys.path.append(os.getcwd())
            module = importlib.import_module(mod_name)
        fn = getattr(module, fn_name)
    except ConfigError:
        raise
    except SystemExit as exc:  # a builder file that exits while imported: one line, not a silent exit
        raise ConfigError("topology", f"{rule} without exiting (it called sys.exit({exc.code!r}) "
                          "at import)", target) from None
    except Exception as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError("topology", f"{rule} ({type(exc).__name__}: {reason})", target) from None
    if not callable(fn):
        raise ConfigError("topology", f"{rule} ({fn_name} is not callable)", target)
    return fn


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# --------------------------------------------------------------------------- resolve and build


def resolve(spec: str | TopologySpec, *, nodes: int | None = None,
            seed: int | None = None) -> TopologySpec:
    """Fill the size parameter from ``nodes`` and ``seed`` from ``seed`` when the spec lacks them.

    Parameters
    ----------
    spec : str or TopologySpec
        The spec.
    nodes : int or None
        Total number of nodes wanted (``--nodes``); sets the family's
        :attr:`~Family.sized_by` parameter, or ``n`` of a user builder that takes one.
    seed : int or None
        Seed for random families (``--seed``).

    Returns
    -------
    TopologySpec
        With every required parameter present (files are returned unchanged).

    Raises
    ------
    ConfigError
        ``'topology'`` when a required parameter is missing and ``nodes`` cannot
        give it.
    """
    s = parse_spec(spec)
    params = dict(s.params)
    if s.family is not None:
        fam = REGISTRY[s.family]
        if fam.sized_by in params and nodes is not None:
            given = fam.node_count(params)
            if given != nodes:
                raise ConfigError("nodes", f"unset or equal to the {given} nodes of topology {s}",
                                  nodes)
        if fam.sized_by not in params and nodes is not None:
            try:
                params[fam.sized_by] = fam.size_param(nodes, params)
            except ConfigError as exc:
                raise ConfigError("topology", f"a valid {fam.name} spec ({exc})",
                                  shown(spec, s)) from None
        missing = [k for k, v in fam.params.items() if v is REQUIRED and k not in params]
        if missing:
            raise ConfigError("topology", f"given {fam.name} parameter {', '.join(missing)} "
                              f"(or --nodes) among [{fam.describe_params()}]", shown(spec, s))
        if fam.seeded and "seed" not in params and seed is not None:
            params["seed"] = seed
        return TopologySpec(family=fam.name, params=params)
    if s.target is not None:
        fn = _load_target(s.target)
        if nodes is not None and "n" not in params and _accepts(fn, "n"):
            params["n"] = nodes
        if seed is not None and "seed" not in params and _accepts(fn, "seed"):
            params["seed"] = seed
        return TopologySpec(target=s.target, params=params)
    return s


def shown(spec: str | TopologySpec, r: TopologySpec) -> str:
    """``r``, the spec ``spec`` parsed or resolved, as a refusal shows it: its text, with each
    link parameter typed with a unit as typed (``ring:n=4,bandwidth=0Gbit/s``, not the
    ``bandwidth=0.0`` B/s it was read as)."""
    typed = typed_params(spec)
    if not typed or r.path is not None:
        return str(r)
    head = r.family if r.family is not None else str(r.target)
    return head + ":" + ",".join(f"{k}={typed[k] if k in typed else format_value(v)}"
                                 for k, v in r.params.items())


def as_typed(spec: str | TopologySpec, params: Mapping[str, Any],
             exc: ConfigError) -> ConfigError:
    """A builder's refusal ``exc`` of a link parameter typed with a unit, showing the value as
    typed (``'bandwidth' must be > 0: '0Gbit/s'``) when it shows the value read from it
    (``params[exc.name]``); any other refusal unchanged."""
    typed = typed_params(spec)
    if exc.name in typed and exc.name in params and exc.value == params[exc.name]:
        return ConfigError(exc.name, exc.rule, typed[exc.name])
    return exc


def num_nodes(spec: str | TopologySpec, *, nodes: int | None = None) -> int | None:
    """Number of nodes a spec builds, without building (None for files and user builders).

    Parameters
    ----------
    spec : str or TopologySpec
        The spec.
    nodes : int or None
        ``--nodes`` as for :func:`resolve`.

    Returns
    -------
    int or None
    """
    s = parse_spec(spec)
    if s.family is None:
        return None
    r = resolve(s, nodes=nodes)
    fam = REGISTRY[r.family]
    try:
        return fam.node_count(r.params)
    except (ConfigError, TypeError, ValueError):
        raise ConfigError("topology", f"a valid {fam.name} spec", shown(spec, r)) from None


def is_complete(spec: str | TopologySpec) -> bool:
    """True when ``spec`` is the complete graph (gossip can use its edge-free engine).

    Parameters
    ----------
    spec : str or TopologySpec

    Returns
    -------
    bool
    """
    return parse_spec(spec).is_complete


def build(spec: str | TopologySpec, *, nodes: int | None = None, seed: int | None = None,
          require: Iterable[str] = ()) -> nx.Graph:
    """Build the graph a spec names.

    Parameters
    ----------
    spec : str or TopologySpec
        Family spec, graph file or ``module:function`` (see the module docstring).
    nodes : int or None
        Total number of nodes when the spec does not set the size (``--nodes``).
    seed : int or None
        Seed for random families when the spec does not set it (``--seed``).
    require : iterable of str
        Node attributes every node must carry (for example ``("domain",)`` for
        placement); see :func:`validate_graph`.

    Returns
    -------
    networkx.Graph
        Connected, every edge with ``latency`` and ``bandwidth``, every node with
        ``domain``; ``G.graph["spec"]`` is the resolved spec text and
        ``G.graph["family"]`` the family (``"file"`` or ``"callable"`` otherwise).

    Raises
    ------
    ConfigError
        ``'topology'`` with one line saying what is wrong with the spec.
    """
    r = resolve(spec, nodes=nodes, seed=seed)
    text = shown(spec, r)  # for refusals; G.graph["spec"] is str(r)
    if r.family is not None:
        fam = REGISTRY[r.family]
        _check_fits(fam, r.params, parse_spec(spec).params, nodes)
        try:
            G = fam.builder(**r.params)
        except ConfigError as exc:
            raise ConfigError("topology", f"a valid {fam.name} spec "
                              f"({as_typed(spec, r.params, exc)})", text) from None
        label = fam.name
    elif r.path is not None:
        G = read_graph(r.path)
        label = "file"
    else:
        fn = _load_target(str(r.target))
        try:
            inspect.signature(fn).bind(**r.params)
        except TypeError as exc:
            raise ConfigError("topology", f"arguments {r.target} accepts ({exc})", text) from None
        except ValueError:
            pass
        try:
            G = fn(**r.params)
        except ConfigError:
            raise
        except SystemExit as exc:  # one line naming the builder, never a silent exit
            raise ConfigError("topology", f"a builder that returns a graph without exiting (it "
                              f"called sys.exit({exc.code!r}))", text) from None
        except Exception as exc:  # the user's builder raised: one line naming it
            reason = " ".join(str(exc).split())
            raise ConfigError("topology", f"a builder that runs ({type(exc).__name__}: {reason})",
                              text) from None
        if not isinstance(G, nx.Graph):
            raise ConfigError("topology", f"a builder returning a networkx.Graph "
                              f"(got {type(G).__name__})", text)
        try:
            check_simple(G)
        except ValueError as exc:
            raise ConfigError("topology", f"a builder returning an undirected simple graph "
                              f"({exc})", text) from None
        label = "callable"
    if r.family is not None or r.target is not None:  # how its link parameters were given
        G.graph["units"] = spec_units(spec, r.params, REGISTRY[r.family].params
                                      if r.family is not None else {})
    if r.family is None and nodes is not None and G.number_of_nodes() != nodes:
        # a file or a builder sets its own size: --nodes must agree, never be dropped
        raise ConfigError("nodes", f"unset or equal to the {G.number_of_nodes()} nodes of "
                          f"topology {text}", nodes)
    if r.family is None or require:
        validate_graph(G, require=require, name=text)
    G.graph["spec"] = str(r)
    G.graph["family"] = label
    return G


#: Bytes of a networkx graph per node and per edge, with this package's attributes
#: (measured on networkx 3: about 750 bytes per node of a ring).
_NODE_BYTES, _EDGE_BYTES = 300, 450


def _mean_degree(family: str, params: Mapping[str, Any], n: int) -> float:
    """Mean degree the family's builder gives ``n`` nodes (an estimate, for memory)."""
    if family in ("complete", "datacenter", "geo"):  # layouts link every pair of hosts
        return n - 1
    if family == "torus":
        return 2.0 * len(parse_dims(params["dims"]))
    if family == "hypercube":
        return float(params["dim"])
    if family in ("random_regular", "expander"):
        return float(params.get("degree") or 4)
    if family == "watts_strogatz":
        return float(params.get("k") or 4)
    if family == "barabasi_albert":
        return 2.0 * float(params.get("m") or 2)
    if family == "erdos_renyi":
        p = params.get("p")
        return float(p) * (n - 1) if p is not None else 2.0 * math.log(max(n, 2))
    return 2.0


def estimated_bytes(spec: str | TopologySpec, *, nodes: int | None = None) -> int | None:
    """Memory the graph of a family spec takes once built (None for files and callables).

    Parameters
    ----------
    spec : str or TopologySpec
    nodes : int or None
        ``--nodes`` as for :func:`resolve`.

    Returns
    -------
    int or None
        About ``300 n + 450 m`` bytes for ``n`` nodes and ``m`` edges.
    """
    r = resolve(spec, nodes=nodes)
    if r.family is None:
        return None
    fam = REGISTRY[r.family]
    try:
        full = {k: v for k, v in fam.params.items() if v is not REQUIRED}
        full.update(r.params)
        n = fam.node_count(r.params)
        deg = _mean_degree(fam.name, full, n)
        need = n * _NODE_BYTES + n * deg / 2 * _EDGE_BYTES
    except (ConfigError, TypeError, ValueError, KeyError, OverflowError):
        return None  # the builder reports what is wrong
    if not math.isfinite(need) or need < 0:  # a parameter such as p=nan or m=inf
        return None  # the builder reports what is wrong
    return int(need)


def _fits_with_one(fam: Family, params: Mapping[str, Any], key: str) -> bool:
    """Whether the graph of ``params`` with ``key`` at 1 fits in memory (True when unknown)."""
    left = estimated_bytes(TopologySpec(family=fam.name, params={**params, key: 1}))
    if left is None:
        return True
    try:
        check_memory(key, 1, left)
    except ConfigError:
        return False
    return True


def _check_fits(fam: Family, params: Mapping[str, Any], typed: Mapping[str, Any],
                nodes: int | None) -> None:
    """Refuse a spec whose graph cannot fit in memory, naming what sets its size."""
    need = estimated_bytes(TopologySpec(family=fam.name, params=dict(params)))
    if need is None:
        return
    if nodes is not None and fam.sized_by not in typed:
        name, value = "nodes", nodes
    else:
        name, value = fam.sized_by, params.get(fam.sized_by)
        # a family sized by several parameters (geo's regions and hosts, tree's racks and
        # hosts): when the size parameter at 1 would still not fit but another typed one at 1
        # would, that one sets the size: name it (a product of several huge ones keeps the
        # size parameter)
        if not _fits_with_one(fam, params, fam.sized_by):
            for key, v in typed.items():
                if key != fam.sized_by and key in params and not isinstance(v, bool) \
                        and isinstance(v, (int, float)) and v > 1 \
                        and _fits_with_one(fam, params, key):
                    name, value = key, params[key]
                    break
    check_memory(name, value, need)


def validate_graph(G: nx.Graph, *, require: Iterable[str] = (), name: str | None = None) -> nx.Graph:
    """Check a graph for simulation and fill default attributes, in place.

    Missing edge ``latency`` becomes 1.0 and ``bandwidth`` inf; numeric strings
    become numbers; a missing node ``domain`` becomes ``()`` unless ``domain``
    is required; a domain string becomes a chain.

    Parameters
    ----------
    G : networkx.Graph
        Undirected simple graph with at least two nodes.
    require : iterable of str
        Node attributes that must be present on every node.
    name : str or None
        What to call the graph in messages (default ``G.graph["spec"]`` or ``G.name``).

    Returns
    -------
    networkx.Graph
        ``G`` itself.

    Raises
    ------
    ConfigError
        ``'topology'``: not an undirected simple graph, fewer than two nodes,
        disconnected, a node without a required attribute, an edge attribute
        that is not a valid number.
    """
    label = name if name is not None else str(G.graph.get("spec") or G.name or "graph")
    if not isinstance(G, nx.Graph) or G.is_directed() or G.is_multigraph():
        raise ConfigError("topology", "an undirected simple networkx.Graph", label)
    if G.number_of_nodes() < 2:
        raise ConfigError("topology", f"a graph with at least 2 nodes "
                          f"(got {G.number_of_nodes()})", label)
    if not nx.is_connected(G):
        k = nx.number_connected_components(G)
        raise ConfigError("topology", f"a connected graph ({k} components)", label)
    required = list(require)
    for node, data in G.nodes(data=True):
        for attr in required:
            if attr not in data:
                raise ConfigError("topology", f"a graph whose nodes all have '{attr}' "
                                  f"(node {node!r} has none)", label)
        if "domain" not in data:
            data["domain"] = ()
        elif not isinstance(data["domain"], tuple):
            data["domain"] = domain_chain(data["domain"])
    seen = UnitsSeen(G)  # link quantities written with units (topologies.units)
    for node, data in G.nodes(data=True):
        for attr in ("nic", "egress", "ingress"):
            if attr in data:
                data[attr] = seen.value(attr, data[attr], f"node {node!r}", label)
    for u, v, data in G.edges(data=True):
        for attr, default, ok, rule in (
            ("latency", 1.0, lambda x: math.isfinite(x) and x >= 0, "numbers >= 0"),
            ("bandwidth", math.inf, lambda x: x > 0, "numbers > 0"),
        ):
            value = seen.value(attr, data.get(attr, default), f"edge ({u!r}, {v!r})", label)
            try:
                x = ascii_float(value)
                good = not isinstance(value, bool) and ok(x)
            except (TypeError, ValueError):
                good = False
            if not good:
                raise ConfigError("topology", f"a graph whose edge {attr} values are {rule} "
                                  f"(edge ({u!r}, {v!r}) has {value!r})", label)
            data[attr] = x
    seen.record()
    return G
