"""The flow-level network model: routes, max-min fair sharing, NIC limits, size-dependent bandwidth.

Every engine that moves data asks this package for transfer times. A flow
waits its route's latency, then shares every resource on its route max-min
fairly with the other flows (SimGrid's CM02 model with its corrective factors
off); the shares are recomputed at every start and finish. See
``docs/network.md``.

>>> from sim.network import simulate_flows, LinkValue, NetworkValue
>>> net = NetworkValue((LinkValue("a", "b", bandwidth=10.0, latency=1.0),))
>>> simulate_flows(net, [("a", "b", 10.0, 0.0), ("a", "b", 10.0, 0.0)]).finish.tolist()
[3.0, 3.0]
"""

from .curves import BandwidthCurve, as_curve, parse_curve
from .flows import WEIGHTINGS, Flow, FlowEngine, FlowResult, read_flows, simulate_flows
from .maxmin import maxmin_rates, waterfill
from .service import NetworkService
from .topology import (
    DEFAULT_SHARING,
    SHARINGS,
    LinkValue,
    Network,
    NetworkValue,
    NodeValue,
    Route,
    build_network,
    network_graph,
    shared_network,
)

__all__ = [
    "BandwidthCurve", "parse_curve", "as_curve",
    "Flow", "FlowEngine", "FlowResult", "simulate_flows", "read_flows", "WEIGHTINGS",
    "maxmin_rates", "waterfill",
    "NetworkService",
    "SHARINGS", "DEFAULT_SHARING", "NodeValue", "LinkValue", "NetworkValue", "Route", "Network",
    "build_network", "network_graph", "shared_network",
]
