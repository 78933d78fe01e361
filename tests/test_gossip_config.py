"""Tests of sim.gossip.config: a GossipConfig is a value that hashes the same in every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, is_dataclass

import networkx as nx
import numpy as np
import pytest

from sim.errors import ConfigError
from sim.gossip import GossipConfig, GraphValue, build_gossip_graph
from sim.runner import config_hash

#: Configs (as keyword text) whose hash must not depend on the process.
_CASES = {
    "ring-edge": 'GossipConfig(topology="ring:n=16", protocol="edge")',
    "geo-async": 'GossipConfig(topology="geo:regions=3,hosts=4", protocol="async", rounds=5)',
    "sparse-matching": 'GossipConfig(topology="random_regular:n=32,degree=4", topology_seed=3, '
                       'adversary="stubborn", adversary_nodes=(5,))',
    "given-graph": 'GossipConfig(graph=nx.cycle_graph(10), topology="g", protocol="edge", '
                   'adversary="alie", clip=0.5)',
    "complete": 'GossipConfig(nodes=100, noise=1.0)',
}

_SCRIPT = """
import json, sys
import networkx as nx
from sim.gossip import GossipConfig
from sim.runner import config_hash
cases = json.loads(sys.argv[1])
print(json.dumps({k: config_hash(eval(v), 7) for k, v in cases.items()}))
"""


def _hashes_in_a_new_process() -> dict[str, str]:
    """The cases' hashes in a fresh process under another hash seed than this one."""
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    out = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(_CASES)], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": seed})
    return json.loads(out.stdout)


def _leaves(obj):
    if is_dataclass(obj):
        for f in fields(obj):
            yield from _leaves(getattr(obj, f.name))
    elif isinstance(obj, tuple):
        for v in obj:
            yield from _leaves(v)
    else:
        yield obj


def test_config_hash_is_the_same_in_two_processes():
    """Sparse, geo, given-graph and complete configs hash equally here and in a fresh process."""
    first = _hashes_in_a_new_process()
    here = {k: config_hash(eval(v), 7) for k, v in _CASES.items()}  # built here, and built once
    assert here == first
    assert len(set(first.values())) == len(first)  # distinct configs, distinct hashes


@pytest.mark.parametrize("case", sorted(_CASES))
def test_config_holds_values_only(case):
    """Every field of a config is a number, a string, a bool, None or a tuple of those."""
    cfg = eval(_CASES[case])
    for leaf in _leaves(cfg):
        assert leaf is None or isinstance(leaf, (bool, int, float, str)), (case, type(leaf))
    hash(cfg)  # a frozen value is hashable


def test_given_graph_is_kept_as_a_value_with_its_order():
    """A networkx graph passed in becomes a GraphValue; the built network keeps node and edge order."""
    g = nx.Graph()
    g.add_nodes_from([3, 1, 2, 0])
    g.add_edges_from([(2, 0), (3, 1), (1, 2), (0, 3)], latency=2.0)
    g.add_edge(1, 1)  # a self-loop carries no exchange
    cfg = GossipConfig(graph=g, topology="g", protocol="edge")
    assert isinstance(cfg.graph, GraphValue)
    assert cfg.graph.nodes == (3, 1, 2, 0)
    net = build_gossip_graph(cfg)
    simple = nx.Graph(g)
    simple.remove_edge(1, 1)
    assert list(net.graph.nodes()) == list(simple.nodes())
    assert list(net.graph.edges()) == list(simple.edges())
    np.testing.assert_array_equal(net.delay, 2.0 + 1.0 / np.inf)
    assert GossipConfig(graph=cfg.graph, topology="g", protocol="edge") == cfg


def test_network_is_built_after_validation_and_shared():
    """The config stores no network; building twice in one process returns the same read-only arrays."""
    cfg = GossipConfig(topology="torus:dims=4x4", protocol="edge")
    assert not any(isinstance(v, nx.Graph) for v in vars(cfg).values())
    a, b = build_gossip_graph(cfg), build_gossip_graph(GossipConfig(topology="torus:dims=4x4", protocol="edge"))
    assert a is b
    assert not a.u.flags.writeable
    with pytest.raises(nx.NetworkXError):
        a.graph.add_edge(0, 99)  # frozen: engines share it


def test_graph_value_of_a_disconnected_graph_is_refused():
    """A GraphValue built by hand is validated like a networkx graph."""
    value = GraphValue.from_networkx(nx.Graph([(0, 1), (2, 3)]))
    with pytest.raises(ConfigError) as e:
        GossipConfig(graph=value, topology="two-pieces", protocol="edge")
    assert str(e.value) == "'topology' must be a connected graph: 'two-pieces'"


@pytest.mark.parametrize("spec,said", [
    ("complete:n=4,bandwidth=0", "('bandwidth' must be > 0: 0)"),
    ("complete:n=4,bandwidth=0Gbit/s", "('bandwidth' must be > 0: '0Gbit/s')"),
    ("complete:n=4,latency=-1", "('latency' must be >= 0: -1)"),
])
def test_complete_spec_links_checked_though_never_built(spec, said):
    """The implicit complete graph is never built, so its builder's link checks never ran:
    bandwidth=0 divided the exchange size by 0 (a traceback), latency=-1 failed every
    replication ('Negative delay'). Refused as a ring spec's are."""
    with pytest.raises(ConfigError) as exc:
        GossipConfig(topology=spec, rounds=3)
    assert exc.value.name == "topology" and said in str(exc.value)
