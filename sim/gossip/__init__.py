"""Pairwise gossip averaging on a networkx graph, timed in simulated wall clock (Study B).

Every node holds a vector of dimension ``dim``; honest nodes start i.i.d.
``N(init_mean, init_std**2)`` per coordinate; adversaries
(:mod:`sim.adversaries`) sit at chosen nodes and never update. Three protocols,
each advancing a SimPy clock: ``matching`` (synchronous rounds of a random
perfect or maximal matching), ``edge`` (one random edge per step) and
``async`` (Poisson clocks, exchanges in flight, churn).

Layout (data flows down):

``config``
    :class:`GossipConfig`, a frozen value (numbers, strings, tuples), and its
    size function.
``network``
    :func:`build_gossip_graph`, the build step: node order, edge arrays, exchange
    times (cached per process); :func:`random_maximal_matching`.
``state``
    :class:`GossipSystem`: shared state and the vector and scalar exchange
    kernels; ``GossipSystem(config, streams)`` builds the engine class that
    runs the config.
``matching``, ``matching_des``, ``edge``, ``asynchronous``, ``compiled``
    One engine class each: :class:`MatchingVector`, :class:`MatchingDES`,
    :class:`EdgeGossip`, :class:`AsyncGossip` and :class:`CompiledAsync` (the
    async law on the numba loop of ``kernel``; ``auto``'s choice for async).
``update``
    The node-update hook (:class:`NodeUpdate`; default :class:`NoUpdate`,
    pure averaging).
``engines``
    The ``vector`` and ``des`` engines (and, in ``compiled``, the compiled one)
    and the exact references of Study B,
    registered with :mod:`sim.engines`; :func:`gossip_predictions`.
``model``
    :func:`gossip_model` (one replication) and :func:`summarize_runs`.

Noise (``noise = s``): every honest node adds fresh ``N(0, s**2)`` per
coordinate before the averaging of each round (``matching``) or step
(``edge``); in ``async`` a node adds it when it wakes, before sending.

Records (every ``record_every`` rounds/steps, or time units for ``async``;
record 0 is the initial state) carry the simulated time, the exchange count,
the honest disagreement ``D = sum_honest |x_i - m|**2``, the honest mean ``m``,
``|m - m_0|``, and with a stubborn attacker at ``b`` the gap
``mean_c(m - b)``, the progress of ``m`` toward ``b`` along ``b - m_0`` and
whether every honest node is farther than ``tau`` from ``b``.

The complete graph is never built: partners are drawn directly and
neighbourhood sums are O(1) per node, so the vectorised matching engine runs
``n = 10**5`` in milliseconds per round.
"""

from .asynchronous import AsyncGossip
from .compiled import CompiledAsync, CompiledEngine
from .config import (
    ASYNC_PATHS,
    DEFAULT_COMPLETE_NODES,
    ENGINES,
    MIXINGS,
    PROTOCOLS,
    GossipConfig,
    GraphValue,
    default_nodes,
    network_size,
    spec_family,
)
from .edge import EdgeGossip
from .engines import engine_reason, gossip_predictions, resolved_engine, system_class
from .matching import MatchingVector
from .matching_des import MatchingDES
from .model import gossip_comparison_rows, gossip_model, summarize_runs
from .network import GossipGraph, build_gossip_graph, random_maximal_matching
from .records import Records
from .state import GossipSystem
from .update import NodeUpdate, NoUpdate, default_update

__all__ = [
    "MIXINGS",
    "PROTOCOLS",
    "ASYNC_PATHS",
    "ENGINES",
    "DEFAULT_COMPLETE_NODES",
    "GossipConfig",
    "CompiledAsync",
    "CompiledEngine",
    "GraphValue",
    "spec_family",
    "default_nodes",
    "network_size",
    "GossipGraph",
    "build_gossip_graph",
    "random_maximal_matching",
    "Records",
    "GossipSystem",
    "MatchingVector",
    "MatchingDES",
    "EdgeGossip",
    "AsyncGossip",
    "NodeUpdate",
    "NoUpdate",
    "default_update",
    "system_class",
    "resolved_engine",
    "engine_reason",
    "gossip_predictions",
    "gossip_model",
    "summarize_runs",
    "gossip_comparison_rows",
]
