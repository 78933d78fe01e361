"""Hosts by name: ``dtsim network`` on graph files with string, integer and mixed node names.

The same platform (two racks of hosts under a core switch, bandwidths, latencies
and NICs that make routes and shares differ) is written as GraphML, GML and an
edge list, once with the integer names 0..n-1 in file order and once with each
other naming; the finish times and link utilisations must be equal, since only
the names differ.
"""

from __future__ import annotations

import json
import math

import networkx as nx
import pytest

from sim.cli import main
from sim.errors import ConfigError

#: (u, v, latency, bandwidth) of the platform, by position; node 0 is the core switch,
#: 1 and 2 the rack switches, 3..8 the hosts (3-5 in rack 1, 6-8 in rack 2).
EDGES = [(0, 1, 0.5, 40.0), (0, 2, 0.25, 25.0), (1, 3, 0.05, 10.0), (1, 4, 0.1, 12.0),
         (1, 5, 0.05, 8.0), (2, 6, 0.05, 10.0), (2, 7, 0.2, 6.0), (2, 8, 0.05, 30.0)]
N = 9
SWITCHES = (0, 1, 2)
#: per-host NIC (egress and ingress each), for the formats that carry node attributes
NIC = {3: 9.0, 7: 5.0}
#: (src, dst, size, start) by position; the last flow ends at a switch
FLOWS = [(3, 6, 100, 0.0), (4, 6, 50, 0.1), (5, 8, 80, 0.0), (7, 3, 60, 0.5), (8, 4, 40, 1.0),
         (3, 7, 30, 0.2), (6, 5, 70, 0.0), (4, 2, 20, 0.3)]

NAMINGS = {
    "integer-0..n-1": [str(i) for i in range(N)],
    # integers, not 0..n-1 in file order: position 3 is named 0, position 0 named 8, ...
    "integer-shuffled": ["8", "17", "3", "0", "42", "5", "1", "230", "6"],
    "string": ["core", "rack-a", "rack-b", "alice", "bob", "carol", "dave", "eve", "frank"],
    # text and integer text mixed; 1, 01 and +1 are three different nodes
    "mixed": ["core", "1", "01", "+1", "h 4".replace(" ", "_"), "7", "x7", "0", "-2"],
}
FORMATS = ("graphml", "gml", "json", "edges")


def _write_graph(path, fmt: str, names: list[str], *, typed_gml: bool = False) -> None:
    """The platform with ``names`` (``typed_gml``: GML labels that look like integers unquoted)."""
    def gml_label(x: str) -> str:
        if typed_gml and x.lstrip("-").isdigit() and str(int(x)) == x:
            return x
        return f'"{x}"'

    if fmt == "graphml":
        lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                 '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
                 '<key id="lat" for="edge" attr.name="latency" attr.type="double"/>',
                 '<key id="bw" for="edge" attr.name="bandwidth" attr.type="double"/>',
                 '<key id="role" for="node" attr.name="role" attr.type="string"/>',
                 '<key id="nic" for="node" attr.name="nic" attr.type="double"/>',
                 '<graph edgedefault="undirected">']
        for i, x in enumerate(names):
            data = ""
            if i in SWITCHES:
                data += '<data key="role">switch</data>'
            if i in NIC:
                data += f'<data key="nic">{NIC[i]!r}</data>'
            lines.append(f'<node id="{x}">{data}</node>')
        for u, v, lat, bw in EDGES:
            lines.append(f'<edge source="{names[u]}" target="{names[v]}"><data key="lat">{lat!r}'
                         f'</data><data key="bw">{bw!r}</data></edge>')
        lines += ["</graph>", "</graphml>"]
    elif fmt == "gml":
        lines = ["graph ["]
        for i, x in enumerate(names):
            extra = ' role "switch"' if i in SWITCHES else ""
            extra += f" nic {NIC[i]!r}" if i in NIC else ""
            lines.append(f"  node [ id {i} label {gml_label(x)}{extra} ]")
        for u, v, lat, bw in EDGES:
            lines.append(f"  edge [ source {u} target {v} latency {lat!r} bandwidth {bw!r} ]")
        lines.append("]")
    elif fmt == "json":  # node-link JSON, as networkx.node_link_data writes it
        nodes = [{"id": x, **({"role": "switch"} if i in SWITCHES else {}),
                  **({"nic": NIC[i]} if i in NIC else {})} for i, x in enumerate(names)]
        links = [{"source": names[u], "target": names[v], "latency": lat, "bandwidth": bw}
                 for u, v, lat, bw in EDGES]
        lines = [json.dumps({"directed": False, "multigraph": False, "graph": {},
                             "nodes": nodes, "links": links})]
    else:
        lines = [f"{names[u]} {names[v]} {lat!r} {bw!r}" for u, v, lat, bw in EDGES]
    path.write_text("\n".join(lines) + "\n")


def _run(tmp_path, capsys, fmt: str, names: list[str], tag: str, **kw) -> dict:
    graph = tmp_path / f"{tag}.{fmt}"
    _write_graph(graph, fmt, names, **kw)
    flows = tmp_path / f"{tag}.csv"
    flows.write_text("src,dst,size,start\n" + "".join(
        f"{names[s]},{names[d]},{size},{start}\n" for s, d, size, start in FLOWS))
    assert main(["network", "--topology", str(graph), "--flows", str(flows), "--json"]) == 0, \
        capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("naming", [n for n in NAMINGS if n != "integer-0..n-1"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_named_hosts_give_the_results_of_integer_names(tmp_path, capsys, fmt, naming):
    """Every format and naming: finish times and link loads equal those of names 0..n-1."""
    ref = _run(tmp_path, capsys, fmt, NAMINGS["integer-0..n-1"], "ref")
    got = _run(tmp_path, capsys, fmt, NAMINGS[naming], "named")
    assert got["finish"] == ref["finish"]
    assert all(math.isfinite(x) for x in got["finish"])
    assert [(x["capacity"], x["bytes"], x["utilisation"]) for x in got["links"]] == \
        [(x["capacity"], x["bytes"], x["utilisation"]) for x in ref["links"]]
    # the flows really are routed by name: the first flow crosses its rack's uplinks
    names = NAMINGS[naming]
    used = {x["link"] for x in got["links"] if x["bytes"] > 0}
    assert f"{names[1]}->{names[0]}" in used and f"{names[0]}->{names[2]}" in used


def test_typed_gml_labels_mix_integers_and_text(tmp_path, capsys):
    """GML labels 7 (an integer) and "x7" (text) in one file: the flows name both as text."""
    ref = _run(tmp_path, capsys, "gml", NAMINGS["integer-0..n-1"], "ref")
    got = _run(tmp_path, capsys, "gml", NAMINGS["mixed"], "typed", typed_gml=True)
    assert got["finish"] == ref["finish"]


def test_edge_list_names_1_01_and_plus_1_are_three_nodes(tmp_path):
    """An edge list naming 1, 01 and +1 has three nodes; the edge 1-01 is no self-loop."""
    import topologies

    f = tmp_path / "g.edges"
    f.write_text("1 01\n01 +1\n+1 1\n")
    G = topologies.read_graph(f)
    assert sorted(G.nodes) == ["+1", "01", "1"] and G.number_of_edges() == 3
    f.write_text("1 2\n2 3\n")
    assert sorted(topologies.read_graph(f).nodes) == [1, 2, 3]


def test_duplicate_graphml_node_id_is_refused(tmp_path):
    """Two <node id="a"> in one GraphML file: refused, not merged into one node."""
    import topologies

    f = tmp_path / "dup.graphml"
    f.write_text('<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
                 '<graph edgedefault="undirected"><node id="a"/><node id="b"/><node id="a"/>'
                 '<edge source="a" target="b"/></graph></graphml>')
    with pytest.raises(ConfigError, match="the node id 'a' twice"):
        topologies.read_graph(f)


def test_two_nodes_with_the_same_text_are_ambiguous_by_name():
    """The integer 1 and the string "1" in one graph: a flow naming "1" is refused, not guessed."""
    from sim.network import build_network

    G = nx.Graph()
    G.add_edge(1, "1", bandwidth=5.0)
    G.add_edge("1", "a", bandwidth=5.0)
    net = build_network(G)
    assert net.route(1, "a").hops == 2  # the labels themselves still work
    with pytest.raises(ConfigError, match="two nodes whose name reads '1'"):
        net.route("1", "a")


@pytest.mark.slow
@pytest.mark.parametrize("naming", list(NAMINGS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_named_hosts_cross_checked_with_simgrid(tmp_path, capsys, fmt, naming):
    """SimGrid (CM02) on the file's graph with the flows by name equals dtsim network --weighting rtt."""
    import topologies
    from sim.network.simgrid import simgrid_available, simgrid_finish_times

    if not simgrid_available():
        pytest.skip("SimGrid's Python bindings are not importable")
    names = NAMINGS[naming]
    graph = tmp_path / f"g.{fmt}"
    _write_graph(graph, fmt, names)
    flows = tmp_path / "f.csv"
    flows.write_text("src,dst,size,start\n" + "".join(
        f"{names[s]},{names[d]},{size},{start}\n" for s, d, size, start in FLOWS))
    assert main(["network", "--topology", str(graph), "--flows", str(flows), "--json",
                 "--weighting", "rtt"]) == 0
    got = json.loads(capsys.readouterr().out)["finish"]
    G = topologies.read_graph(graph)
    sg, _ = simgrid_finish_times(G, [(names[s], names[d], size, start)
                                     for s, d, size, start in FLOWS])
    assert got == pytest.approx(sg, rel=1e-9)


def test_gml_with_two_equal_labels_is_refused_not_renamed_by_id(tmp_path):
    """Two GML nodes labelled "a": refused (the reader fell back to the ids 0 and 1, so the
    flows naming a and b were refused as unknown nodes instead)."""
    import topologies

    f = tmp_path / "g.gml"
    f.write_text('graph [ node [ id 0 label "a" ] node [ id 1 label "a" ] '
                 'edge [ source 0 target 1 ] ]')
    with pytest.raises(ConfigError, match="node label 'a' is duplicated"):
        topologies.read_graph(f)


def test_node_link_json_ids_1_and_text_1_are_refused(tmp_path):
    """audit9: ids 1 and "1" in a node-link JSON file were two nodes named alike (a host name
    is its text); refused in one line. 1 and "01" stay two nodes, as in an edge list."""
    import topologies

    f = tmp_path / "g.json"
    links = [{"source": 1, "target": "b"}, {"source": "1", "target": "b"}]
    f.write_text(json.dumps({"nodes": [{"id": 1}, {"id": "1"}, {"id": "b"}], "links": links}))
    with pytest.raises(ConfigError, match="the node id '1' again, as a number and as text"):
        topologies.read_graph(f)
    f.write_text(json.dumps({"nodes": [{"id": "1"}, {"id": 1}, {"id": "b"}], "links": links}))
    with pytest.raises(ConfigError, match="the node id 1 again, as a number and as text"):
        topologies.read_graph(f)
    links[1]["source"] = "01"
    f.write_text(json.dumps({"nodes": [{"id": 1}, {"id": "01"}, {"id": "b"}], "links": links}))
    assert sorted(map(str, topologies.read_graph(f).nodes)) == ["01", "1", "b"]


def test_node_link_json_round_trips_and_refuses_in_one_line(tmp_path):
    """A node-link JSON file (networkx's json_graph.node_link_data, D3's) reads as the graph
    written: write_graph/read_graph round trip with domains and an unlimited bandwidth, networkx's
    own output with units; a directed graph, a link to no node, a link twice, a nested value or a
    key it does not know is refused in one line naming the file, never pasting it whole."""
    from networkx.readwrite import json_graph

    import topologies

    G = topologies.datacenter(2, 2, 2)
    path = topologies.write_graph(G, tmp_path / "dc.json")
    H = topologies.build(str(path), require=("domain",))
    assert H.nodes[5]["domain"] == G.nodes[5]["domain"]
    assert H.graph["domains"] == G.graph["domains"]
    assert {(u, v): d for u, v, d in H.edges(data=True)} == \
        {(u, v): d for u, v, d in G.edges(data=True)}
    U = nx.Graph()
    U.add_edge("zone a", "zone b", latency="5 ms", bandwidth="10 Gbps")
    f = tmp_path / "nl.json"
    f.write_text(json.dumps(json_graph.node_link_data(U, edges="links")))
    R = topologies.build(str(f))
    assert R.edges["zone a", "zone b"]["latency"] == pytest.approx(0.005)
    assert R.edges["zone a", "zone b"]["bandwidth"] == pytest.approx(1.25e9)
    bad = {
        "directed": ({"directed": True, "nodes": [{"id": 1}, {"id": 2}],
                      "links": [{"source": 1, "target": 2}]}, "directed edges"),
        "no-node": ({"nodes": [{"id": 1}], "links": [{"source": 1, "target": 9}]},
                    "links[0]: 9 is not the id of a node"),
        "twice": ({"nodes": [{"id": 1}, {"id": 2}], "links": [{"source": 1, "target": 2},
                                                            {"source": 2, "target": 1}]},
                  "links[1]: the link 2-1 again"),
        "nested": ({"nodes": [{"id": 1}, {"id": 2}],
                    "links": [{"source": 1, "target": 2, "latency": {"x": 1}}]},
                   "links[0]: latency is not a number or a string"),
        "keys": ({"nodes": [], "links": [], "hyperedges": []}, "got ['hyperedges']"),
        "shape": ([1, 2, 3], "expected node-link JSON"),
    }
    for name, (doc, message) in bad.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(ConfigError) as e:
            topologies.build(str(p))
        text = str(e.value)
        assert message in text and str(p) in text and "\n" not in text, (name, text)
    # an edge list with a long line: the error quotes its start, not the whole line
    long = tmp_path / "long.edges"
    long.write_text("a b " + " ".join(["1"] * 500) + "\n")
    with pytest.raises(ConfigError) as e:
        topologies.build(str(long))
    assert "... (1003 characters)" in str(e.value) and len(str(e.value)) < 400


def _zones_edges(tmp_path):
    """Three zones, a GPU host behind a gateway in each, as an edge list (no switch marks)."""
    path = tmp_path / "zones.edges"
    path.write_text("iad-gpu iad-gw 5us 100Gbit/s\npdx-gpu pdx-gw 5us 100Gbit/s\n"
                    "fra-gpu fra-gw 5us 100Gbit/s\niad-gw pdx-gw 35ms 1Gbps\n"
                    "iad-gw fra-gw 45ms 500Mbps\npdx-gw fra-gw 80ms 100Mbps\n")
    return path


def test_an_edge_list_whose_gateways_get_replicas_while_hosts_stay_empty_is_warned(
        tmp_path, capsys):
    """(user trial 4) An edge list cannot mark switches, so without --network-nodes the 3
    replicas sat on iad-gpu, iad-gw and pdx-gpu (the file's first nodes), two of the three
    'zones' in iad, and the run said nothing: a DiLoCo sync then took 43 s where the zones
    placed as meant take 86 s. A warning now names where they sit and the leaves (hosts at
    the end of one link) left empty; the run is unchanged. --network-nodes silences it, and
    so does a file whose replicas all sit on leaves."""
    net = str(_zones_edges(tmp_path))
    argv = ["train", "--stages", "1", "--replicas", "3", "--microbatches-per-step", "3",
            "--steps", "4", "--param-size", "2GB", "--sync", "diloco:every=2",
            "--replications", "1", "--network", net]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert ("dtsim train: warning: --network " + net + " is an edge list, which cannot mark "
            "switches: the replicas sit on its first nodes iad-gpu, iad-gw, pdx-gpu, among them "
            "iad-gw, which links 3 nodes, while fra-gpu, at the end of one link, has none; give "
            "--network-nodes (e.g. --network-nodes iad-gpu,pdx-gpu,fra-gpu)") in err
    assert main([*argv, "--network-nodes", "iad-gpu,pdx-gpu,fra-gpu"]) == 0
    assert "warning" not in capsys.readouterr().err
    ring = tmp_path / "ring.edges"
    ring.write_text("a b 1ms 1Gbps\nb c 1ms 1Gbps\nc a 1ms 1Gbps\n")
    assert main([*argv[:-1], str(ring)]) == 0
    assert "warning" not in capsys.readouterr().err
