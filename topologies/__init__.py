"""Topologies: gossip graph families, failure-domain layouts, one spec for all, placement.

>>> import topologies
>>> G = topologies.build("torus:dims=8x8")
>>> G.number_of_nodes(), G.edges[0, 1]["latency"]
(64, 1.0)
>>> str(topologies.parse_spec("datacenter:regions=3,racks=4,hosts=8"))
'datacenter:regions=3,racks=4,hosts=8'

Every builder is networkx-style (size first, keyword-only options), returns an
undirected graph whose nodes carry ``domain`` (their failure-domain chain,
outermost first; ``()`` on gossip graphs) and whose edges carry ``latency`` and
``bandwidth``. :data:`REGISTRY` lists the families; :func:`build` turns a spec
(``ring:n=64``, a GraphML/GML/edge-list file, or ``module:function``) into a
graph; :func:`place` puts pipeline replicas onto a layout.
"""

from .arrays import EdgeArrays, edge_arrays
from .graphs import (
    barabasi_albert,
    complete,
    erdos_renyi,
    expander,
    hypercube,
    path,
    random_regular,
    ring,
    star,
    torus,
    watts_strogatz,
)
from .io import read_graph, write_graph
from .layouts import datacenter, geo, tree
from .placement import POLICIES, Placement, from_value, place, shared_per_stage
from .registry import REGISTRY, REQUIRED, Family, families, family_names, get_family
from .spec import (
    TopologySpec,
    build,
    format_value,
    is_complete,
    num_nodes,
    parse_spec,
    parse_value,
    resolve,
    validate_graph,
)

__all__ = [
    # builders
    "complete", "ring", "path", "star", "torus", "hypercube", "random_regular",
    "erdos_renyi", "watts_strogatz", "barabasi_albert", "expander", "datacenter", "geo", "tree",
    # registry and specs
    "REGISTRY", "REQUIRED", "Family", "families", "family_names", "get_family",
    "TopologySpec", "parse_spec", "resolve", "build", "validate_graph", "is_complete",
    "num_nodes", "parse_value", "format_value", "read_graph", "write_graph",
    "EdgeArrays", "edge_arrays",
    # placement
    "POLICIES", "Placement", "place", "from_value", "shared_per_stage",
]
