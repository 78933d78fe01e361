"""Reading and writing graph files: GraphML, GML, node-link JSON and edge lists.

Files carry what they carry: edge ``latency``/``bandwidth`` and node
``domain`` are read when present (numeric strings become numbers, a domain
string becomes a chain) and :func:`topologies.validate_graph` fills the rest.

Edge-list lines (``.edges``, ``.edgelist``, ``.txt``; ``#`` starts a comment)::

    u v                      # an edge with default attributes
    u v latency              # an edge with a latency
    u v latency bandwidth    # ... and a bandwidth
    u v key=value ...        # any attributes
    u v {'latency': 2.0}     # networkx.write_edgelist(G, path) format
    u                        # an isolated node

Node-link JSON (``.json``: what ``networkx.node_link_data`` and D3 write)::

    {"nodes": [{"id": "a", "domain": "r0/k1"}, {"id": "b"}],
     "links": [{"source": "a", "target": "b", "latency": "5 ms", "bandwidth": "10 Gbps"}]}

(``"edges"`` for ``"links"``; ``"directed"``, ``"multigraph"`` and ``"graph"`` as
networkx writes them; a node's ``domain`` may also be a list, the chain).

A node's ``domain`` in a file is a string: names separated by ``;`` give the
chain as written (``"region0;region0/rack1"``); a single ``/`` path is
expanded to its prefixes (``"region0/rack1"`` -> ``("region0", "region0/rack1")``).
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import networkx as nx

from sim.errors import ConfigError, ascii_float, read_input_bytes
from sim.units import has_unit

__all__ = ["GRAPH_EXTENSIONS", "read_graph", "write_graph", "domain_chain", "is_graph_file",
           "check_simple"]

#: File name endings read as graph files.
GRAPH_EXTENSIONS = (".graphml", ".gml", ".json", ".edges", ".edgelist", ".txt")

#: an integer in ASCII digits (\d would also match other scripts' digits, "\u0663")
_INT = re.compile(r"[+-]?[0-9]+")


def is_graph_file(spec: str) -> bool:
    """True when ``spec`` names a graph file by its ending."""
    return spec.lower().endswith(GRAPH_EXTENSIONS)


def _coerce(value: Any) -> Any:
    """A numeric string (ASCII digits) as int or float; anything else unchanged.

    A value in other scripts' digits (``"\u0663"``, which ``float`` reads as 3.0) stays
    text, which the validators then refuse as not a number, naming the file.
    """
    if not isinstance(value, str):
        return value
    s = value.strip()
    if _INT.fullmatch(s):
        return int(s)
    try:
        return ascii_float(s)
    except ValueError:
        return value


def domain_chain(value: Any) -> tuple[str, ...]:
    """A node's domain chain from a tuple, list or file string (see the module docstring).

    Parameters
    ----------
    value : str or sequence of str
        ``"a;a/b"`` (explicit chain), ``"a/b/c"`` (prefix chain), ``""`` (none)
        or a sequence of names.

    Returns
    -------
    tuple of str
    """
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return ()
        if ";" in s:
            return tuple(x.strip() for x in s.split(";") if x.strip())
        parts = s.split("/")
        return tuple("/".join(parts[: i + 1]) for i in range(len(parts)))
    return tuple(str(x) for x in value)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _shown(line: str, limit: int = 80) -> str:
    """A line of a file as an error shows it: quoted, cut at ``limit`` characters."""
    return repr(line) if len(line) <= limit else repr(line[:limit]) + f"... ({len(line)} characters)"


def _read_node_link(text: str) -> nx.Graph:
    """A node-link JSON document (see the module docstring) as a graph, read as data only."""
    doc = json.loads(text)
    shape = ('node-link JSON: {"nodes": [{"id": ...}, ...], "links": [{"source": ..., '
             '"target": ...}, ...]}')
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise ValueError(f"expected {shape}")
    key = "links" if "links" in doc else "edges"
    links = doc.get(key, [])
    if not isinstance(links, list):
        raise ValueError(f"expected {shape} ('{key}' is not a list)")
    unknown = sorted(set(doc) - {"nodes", key, "directed", "multigraph", "graph"})
    if unknown:
        raise ValueError(f"keys nodes, {key}, directed, multigraph and graph; got {unknown}")
    G: nx.Graph = nx.DiGraph() if doc.get("directed") else nx.Graph()  # directed: refused

    def scalar(where: str, k: str, v: Any) -> Any:
        if isinstance(v, (str, int, float, bool)) or (k == "domain" and isinstance(v, list)
                                                      and all(isinstance(x, str) for x in v)):
            return tuple(v) if isinstance(v, list) else v
        raise ValueError(f"{where}: {k} is not a number or a string: {v!r}"[:200])

    texts: set[str] = set()
    for n, node in enumerate(doc["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("id"), (str, int)) \
                or isinstance(node.get("id"), bool):
            raise ValueError(f"nodes[{n}]: expected an object with an id (a string or an "
                             f"integer), got {_shown(json.dumps(node))}")
        if G.has_node(node["id"]):
            raise ValueError(f"nodes[{n}]: the node id {node['id']!r} again (each node once)")
        if str(node["id"]) in texts:  # (audit9) 1 and "1" were two nodes named alike
            raise ValueError(f"nodes[{n}]: the node id {node['id']!r} again, as a number and "
                             "as text (each node once: a host's name is its text)")
        texts.add(str(node["id"]))
        G.add_node(node["id"], **{str(k): scalar(f"nodes[{n}]", k, v)
                                   for k, v in node.items() if k != "id"})
    for n, link in enumerate(links):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise ValueError(f"{key}[{n}]: expected an object with a source and a target, got "
                             f"{_shown(json.dumps(link))}")
        u, v = link["source"], link["target"]
        for end in (u, v):
            if isinstance(end, (list, dict)) or not G.has_node(end):
                raise ValueError(f"{key}[{n}]: {end!r} is not the id of a node")
        if G.has_edge(u, v) and not G.is_directed():
            raise ValueError(f"{key}[{n}]: the link {u}-{v} again (parallel links are not "
                             "allowed; give each link once)")
        G.add_edge(u, v, **{str(k): scalar(f"{key}[{n}]", k, x) for k, x in link.items()
                            if k not in ("source", "target", "key")})
    graph = doc.get("graph", {})
    if isinstance(graph, dict):
        for k, v in graph.items():
            G.graph[str(k)] = json.dumps(v) if k == "domains" else v
        if "domains" in G.graph:
            G.graph["domains_json"] = G.graph.pop("domains")
    elif isinstance(graph, list):  # older networkx wrote the graph attributes as pairs
        G.graph.update({str(k): v for k, v in graph if k != "domains"})
    return G


def _read_edgelist(text: str) -> nx.Graph:
    G = nx.Graph()
    usage = "'u v [latency [bandwidth]]', 'u v key=value ...' or 'u v {dict}'"
    for lineno, raw in enumerate(io.StringIO(text, newline=None), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split(None, 2)
        if len(tokens) == 1:
            G.add_node(tokens[0])
            continue
        u, v = tokens[0], tokens[1]
        if u == v:
            raise ValueError(f"line {lineno}: a self-loop {u}-{v} (a node gossips with others)")
        if G.has_edge(u, v):
            raise ValueError(f"line {lineno}: the edge {u}-{v} again (parallel edges are "
                             "not allowed; give each link once)")
        rest = tokens[2] if len(tokens) == 3 else ""
        data: dict[str, Any] = {}
        if rest.startswith("{"):
            try:
                data = ast.literal_eval(rest)
            except (ValueError, SyntaxError):
                data = None  # type: ignore[assignment]
            if not isinstance(data, dict):
                raise ValueError(f"line {lineno}: expected {usage}, got {_shown(line)}")
        elif rest:
            extra = rest.split()
            if all("=" in t for t in extra):
                data = dict(t.split("=", 1) for t in extra)
            elif len(extra) <= 2 and not any("=" in t for t in extra):
                data = dict(zip(("latency", "bandwidth"), extra, strict=False))
                for key, val in data.items():
                    if not isinstance(_coerce(val), (int, float)) and not has_unit(val):
                        raise ValueError(f"line {lineno}: {key} is not a number: {val!r}")
            else:
                raise ValueError(f"line {lineno}: expected {usage}, got {_shown(line)}")
        G.add_edge(u, v, **{str(k): _coerce(x) for k, x in data.items()})
    return G


def _graphml_duplicate_id(data: bytes) -> str | None:
    """The first node id a GraphML document declares twice (None when every id is new).

    networkx keeps one node per id, so a repeated ``<node id=...>`` would merge two
    nodes (and their attributes) silently; the ids are read here with the same
    parser, which refuses what networkx's reader would.
    """
    from xml.etree.ElementTree import iterparse

    seen: set[tuple[str, str]] = set()
    graph: list[str] = []
    for event, el in iterparse(io.BytesIO(data), events=("start", "end")):
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "graph":
            if event == "start":
                graph.append(el.get("id", str(len(graph))))
            else:
                graph.pop()
            continue
        if tag == "node" and event == "start":
            key = ("/".join(graph), el.get("id", ""))
            if key in seen:
                return key[1]
            seen.add(key)
        if event == "end":
            el.clear()
    return None


def _read_gml(text: str) -> nx.Graph:
    try:
        return nx.parse_gml(text, label="label")
    except nx.NetworkXError as exc:  # no labels: the ids name the nodes (two equal labels
        if "label" not in str(exc) or "duplicated" in str(exc):  # are refused, not renamed)
            raise
        return nx.parse_gml(text, label="id")


def check_simple(G: nx.Graph) -> None:
    """Refuse a graph with directed edges, parallel edges or self-loops (never dropped silently).

    Raises
    ------
    ValueError
        Saying which, with an example (the callers name the file or builder).
    """
    if G.is_directed():
        raise ValueError("directed edges (links are two-way: write an undirected graph, "
                         "edgedefault=\"undirected\" in GraphML)")
    if G.is_multigraph():
        for u, v, k in G.edges(keys=True):
            if k != 0 or G.number_of_edges(u, v) > 1:
                raise ValueError(f"parallel edges between {u} and {v} (give each link once)")
    loops = list(nx.selfloop_edges(G))
    if loops:
        raise ValueError(f"a self-loop at node {loops[0][0]} (a node gossips with others)")


def _normalise(G: nx.Graph) -> nx.Graph:
    """Undirected simple graph, integer labels when all are integers, typed attributes.

    Labels become integers only when every label is an integer written the way
    Python writes it (``1``, ``-3``): ``1``, ``01`` and ``+1`` are three nodes,
    so a file that names them all keeps its labels as text rather than merging
    them into one.
    """
    check_simple(G)
    if G.is_multigraph():
        G = nx.Graph(G)
    labels = list(G.nodes)
    if labels and all(isinstance(x, str) and len(x) < 1000 and _INT.fullmatch(x)
                      and str(int(x)) == x
                      for x in labels):
        G = nx.relabel_nodes(G, {x: int(x) for x in labels}, copy=True)
    for _, data in G.nodes(data=True):
        for key in list(data):
            data[key] = domain_chain(data[key]) if key == "domain" else _coerce(data[key])
    for _, _, data in G.edges(data=True):
        for key in list(data):
            data[key] = _coerce(data[key])
    graph = G.graph
    if isinstance(graph.get("domains_json"), str):
        graph["domains"] = json.loads(graph.pop("domains_json"))
    if isinstance(graph.get("levels"), str):
        graph["levels"] = tuple(graph["levels"].split("/"))
    if "domains" not in graph:
        domains: dict[str, dict[str, Any]] = {}
        for _, chain in G.nodes(data="domain"):
            for depth, name in enumerate(chain or ()):
                domains.setdefault(name, {"unavailability": 0.0, "level": f"level{depth}",
                                          "parent": chain[depth - 1] if depth else None})
        if domains:
            graph["domains"] = domains
    return G


def read_graph(path: str | Path) -> nx.Graph:
    """Read a GraphML, GML, node-link JSON or edge-list file into an undirected graph.

    Parameters
    ----------
    path : str or Path
        The file; the format follows its ending (:data:`GRAPH_EXTENSIONS`).

    Returns
    -------
    networkx.Graph
        Attributes as read (numeric strings converted); not yet validated.

    Raises
    ------
    ConfigError
        ``'topology'`` naming the path and the parser's reason.
    """
    p = Path(path)
    rule = "a readable graph file"
    if not p.exists():
        raise ConfigError("topology", f"{rule} (no such file)", str(path))
    # a regular file of at most MAX_INPUT_BYTES: a FIFO or a device is refused unread
    data = read_input_bytes("topology", p, rule=rule)
    ext = p.suffix.lower()
    try:
        if ext == ".graphml":
            G = nx.read_graphml(io.BytesIO(data))
            dup = _graphml_duplicate_id(data)
            if dup is not None:
                raise ValueError(f"the node id {dup!r} twice (each node once: a second "
                                 "<node> with the same id would merge two nodes)")
        elif ext == ".gml":
            G = _read_gml(data.decode("utf-8-sig"))
        elif ext == ".json":
            G = _read_node_link(data.decode("utf-8-sig"))
        else:
            G = _read_edgelist(data.decode("utf-8-sig"))
        return _normalise(G)
    except ConfigError:
        raise
    except Exception as exc:  # any parser failure becomes one line naming the file
        raise ConfigError("topology", f"{rule} ({_one_line(exc)})", str(path)) from None


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_graph(G: nx.Graph, path: str | Path) -> Path:
    """Write ``G`` as GraphML, GML, node-link JSON or an edge list (by the ending), readable back.

    Domain chains become ``;``-joined strings, ``G.graph["domains"]`` a JSON
    string, other non-scalar attributes strings.

    Parameters
    ----------
    G : networkx.Graph
        The graph (for example a built topology).
    path : str or Path
        Destination; ``.graphml``, ``.gml``, ``.json`` or an edge-list ending.

    Returns
    -------
    Path
    """
    p = Path(path)
    ext = p.suffix.lower()
    H = nx.Graph()
    for key, value in G.graph.items():
        if key == "domains":
            H.graph["domains_json"] = json.dumps(value)
        elif key == "levels":
            H.graph["levels"] = "/".join(value)
        elif key == "units":  # how the link attributes were given (read again from the file)
            continue
        else:
            H.graph[key] = _scalar(value)
    for node, data in G.nodes(data=True):
        attrs = {k: (";".join(v) if k == "domain" else _scalar(v)) for k, v in data.items()}
        H.add_node(node, **attrs)
    for u, v, data in G.edges(data=True):
        H.add_edge(u, v, **{k: _scalar(x) for k, x in data.items()})
    if ext == ".graphml":
        nx.write_graphml(H, p)
    elif ext == ".gml":
        nx.write_gml(H, p, stringizer=str)
    elif ext == ".json":
        def value(x: Any) -> Any:  # JSON has no inf: a bandwidth without limit as "inf"
            return "inf" if isinstance(x, float) and math.isinf(x) else x
        doc = {"directed": False, "multigraph": False,
               "graph": {k: value(v) for k, v in H.graph.items()},
               "nodes": [{"id": n, **{k: value(v) for k, v in d.items()}}
                         for n, d in H.nodes(data=True)],
               "links": [{"source": u, "target": v, **{k: value(x) for k, x in d.items()}}
                         for u, v, d in H.edges(data=True)]}
        with p.open("w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, allow_nan=False)
            fh.write("\n")
    elif ext in GRAPH_EXTENSIONS:
        with p.open("w", encoding="utf-8") as fh:
            for node in H.nodes:
                if H.degree(node) == 0:
                    fh.write(f"{node}\n")
            for u, v, data in H.edges(data=True):
                fh.write(f"{u} {v} {data.get('latency', 1.0)!r} "
                         f"{_fmt_bw(data.get('bandwidth', math.inf))}\n")
    else:
        raise ConfigError("path", "a file ending in " + ", ".join(GRAPH_EXTENSIONS), str(path))
    return p


def _fmt_bw(x: Any) -> str:
    return "inf" if x == math.inf else repr(x)
