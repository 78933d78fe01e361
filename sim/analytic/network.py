"""Exact references for the flow-level network model (:mod:`sim.network`).

Each is a closed form of max-min fair sharing in a situation simple enough to
solve by hand; the tests run the simulation beside each.

* :func:`equal_flows_finish`: ``k`` equal flows started together on one link.
* :func:`dumbbell_rates`: flows with their own access links sharing one bottleneck.
* :func:`parking_lot_rates`: one long flow across a chain of links, short flows on each.
* :func:`ring_allreduce_time`: the ring all-reduce (dtsim's one ring law), and
  its slowdown when the ranks of a node share its NIC; :func:`ring_steps_time`,
  the same law with a time per step (size-dependent, unequal links);
  :func:`ring_allgather_time`, its all-gather half; :func:`ring_bytes_sent`,
  what each participant sends.
* :func:`star_exchange_time`: pairwise gossip exchanges with the hub of a star
  whose NIC is the bottleneck.
* :func:`nccl_tree_parents`, :func:`nccl_small_allreduce_algorithm`: the tree NCCL
  builds over ``n`` nodes and the algorithm its tuner picks for an all-reduce of a
  few bytes (:func:`sim.profiles.build.small_allreduce_time` times it).

References
----------
.. [BG] D. Bertsekas and R. Gallager, *Data Networks*, 2nd ed., Prentice Hall
   1992, section 6.5.2 (max-min fairness; the parking-lot example).
.. [Ring] P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms
   for clusters of workstations", J. Parallel Distrib. Comput. 69(2), 2009.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..errors import check, check_int, check_nonnegative, check_positive

__all__ = [
    "equal_flows_finish",
    "dumbbell_rates",
    "parking_lot_rates",
    "ring_allreduce_time",
    "ring_steps_time",
    "ring_allgather_time",
    "ring_bytes_sent",
    "star_exchange_time",
    "nccl_tree_parents",
    "nccl_tree_depth",
    "nccl_small_allreduce_algorithm",
]


def equal_flows_finish(k: int, size: float, bandwidth: float, latency: float = 0.0) -> float:
    """Finish time of ``k`` flows of ``size`` started together on one link.

    Notes
    -----
    .. math:: T = \\ell + k S / B

    Each flow waits the latency, then the ``k`` share ``B`` equally until they
    all finish together.
    """
    k = check_int("k", k, low=1)
    S = check_nonnegative("size", size)
    B = check_positive("bandwidth", bandwidth, allow_inf=True)
    lat = check_nonnegative("latency", latency)
    return lat + (k * S / B if S else 0.0)


def dumbbell_rates(access: Sequence[float], bottleneck: float) -> list[float]:
    """Max-min rates of flows, each through its own access link, sharing one bottleneck.

    Parameters
    ----------
    access : sequence of float
        Capacity ``a_i`` of each flow's own access link (> 0, inf allowed).
    bottleneck : float
        Capacity ``C`` of the link they all cross.

    Returns
    -------
    list of float

    Notes
    -----
    .. math:: x_i = \\min(a_i, \\lambda), \\qquad \\sum_i \\min(a_i, \\lambda) = C

    (all ``x_i = a_i`` when ``sum a_i <= C``): sorted ascending, the water level
    is ``lambda = (C - sum_{i<m} a_(i)) / (n - m)`` for the first ``m`` at which
    it does not exceed ``a_(m)`` [BG]_.
    """
    a = [check_positive("access", x, allow_inf=True) for x in access]
    C = check_positive("bottleneck", bottleneck)
    check(len(a) >= 1, "access", "at least one flow", access)
    if sum(a) <= C:
        return list(a)
    order = sorted(a)
    n = len(order)
    used = 0.0
    lam = C / n
    for m in range(n):
        lam = (C - used) / (n - m)
        if lam <= order[m]:
            break
        used += order[m]
    return [min(x, lam) for x in a]


def parking_lot_rates(capacities: Sequence[float], short_flows: Sequence[int]) -> tuple[float,
                                                                                         list[float]]:
    """Max-min rates on a parking-lot chain: one long flow, ``n_j`` short flows on link ``j``.

    Parameters
    ----------
    capacities : sequence of float
        ``C_j`` of the links of the chain.
    short_flows : sequence of int
        ``n_j >= 0``: flows that cross link ``j`` only.

    Returns
    -------
    (long, short)
        The long flow's rate and the rate of a short flow on each link (NaN where
        ``n_j = 0``).

    Notes
    -----
    .. math:: x_{long} = \\min_j \\frac{C_j}{n_j + 1}, \\qquad
              x_j = \\frac{C_j - x_{long}}{n_j}

    The link with the least ``C_j / (n_j + 1)`` fills first and fixes the long
    flow; every other link's short flows then share what it leaves [BG]_.
    """
    C = [check_positive("capacities", x) for x in capacities]
    n = [check_int("short_flows", x, low=0) for x in short_flows]
    check(len(C) == len(n) and len(C) >= 1, "short_flows", f"{len(C)} counts (one per link)",
          short_flows)
    long = min(c / (k + 1) for c, k in zip(C, n, strict=True))
    return long, [(c - long) / k if k else math.nan for c, k in zip(C, n, strict=True)]


def ring_allreduce_time(participants: int, size: float, bandwidth: float, latency: float,
                        *, ranks_per_nic: int = 1, buckets: int = 1) -> float:
    """Time of a ring all-reduce when each participant's NIC (or link) is the only limit.

    The one ring law of dtsim: the training closed form (a step's gradient
    all-reduce, :class:`sim.training.traffic.Traffic`) and the network's
    exact references use it; :func:`ring_steps_time` is the same law with a
    time per step (size-dependent bandwidth, unequal links).

    Parameters
    ----------
    participants : int
        ``k`` nodes in the ring.
    size : float
        ``S``: bytes each rank reduces.
    bandwidth : float
        ``B``: each node's NIC, per direction (``inf``: latency only).
    latency : float
        ``l``: route latency between ring neighbours.
    ranks_per_nic : int
        ``t`` ranks of a node running their rings at once through its NIC.
    buckets : int
        ``n_b`` buckets reduced one after the other (each pays its latencies;
        0 only when nothing is reduced, ``S = 0``).

    Notes
    -----
    .. math:: T = 2 (k - 1) \\left(n_b \\ell + \\frac{t S}{k B}\\right)

    ``2 (k-1)`` steps (a reduce-scatter and an all-gather, ``k - 1`` each)
    move a chunk of ``S / k`` per rank; the ``t`` ranks of a node share its
    NIC, so the bandwidth term is ``t`` times that of ranks with a NIC each
    (``t = 1``: the familiar ``2 (k-1)/k S/B``) [Ring]_. Zero for ``k = 1``
    or ``S = 0``: an all-reduce of no values is no collective, its
    latencies included (NCCL discards one of count 0 before queueing any work:
    ``taskAppend``, src/enqueue.cc:2335 at v2.27.3-1; the flows of
    :func:`sim.network.collectives.ring_allreduce` move nothing then).
    """
    k = check_int("participants", participants, low=1)
    S = check_nonnegative("size", size)
    B = check_positive("bandwidth", bandwidth, allow_inf=True)
    lat = check_nonnegative("latency", latency)
    t = check_int("ranks_per_nic", ranks_per_nic, low=1)
    nb = check_int("buckets", buckets, low=0)
    # no bucket with values to reduce is no schedule of them (it timed their bandwidth alone)
    check(nb >= 1 or S == 0, "buckets", "at least 1 with values to reduce (size > 0)", nb)
    if k == 1 or S == 0:
        return 0.0
    return 2.0 * (k - 1) * (nb * lat + t * S / (k * B))


def ring_allgather_time(participants: int, size: float, bandwidth: float, latency: float,
                        *, ranks_per_nic: int = 1) -> float:
    """Time of a ring all-gather of a block of ``size`` from each of ``k`` participants.

    The all-gather half of the ring law :func:`ring_allreduce_time`: ``k - 1``
    steps, each forwarding one participant's whole block to the next (how
    DiLoCo's averaged shards are gathered inside a group, and sparse top-k
    payloads, whose sum fills in, across groups:
    :func:`sim.analytic.diloco.outer_sync_time`;
    :func:`sim.network.collectives.ring_allgather` runs it as flows).

    Notes
    -----
    .. math:: T = (k - 1) \\left(\\ell + \\frac{t p}{B}\\right)
              = \\tfrac12\\, T_{\\text{all-reduce}}(k, k p)

    the all-reduce of ``k p`` (a chunk of ``p`` a step) without its
    reduce-scatter half [Ring]_. Zero for ``k = 1`` or ``p = 0`` (nothing is
    sent: the flows move nothing either).
    """
    k = check_int("participants", participants, low=1)
    p = check_nonnegative("size", size)
    if k == 1 or p == 0:
        return 0.0
    return 0.5 * ring_allreduce_time(k, k * p, bandwidth, latency, ranks_per_nic=ranks_per_nic)


def ring_bytes_sent(participants: int, size: float, *, gather: bool = False) -> float:
    """What each participant of a ring sends: ``2 (k - 1) S / k`` in an all-reduce of ``S``,
    ``(k - 1) p`` in an all-gather of blocks ``p`` (``gather``); 0 for ``k = 1``.

    Notes
    -----
    Each of the ``2 (k - 1)`` steps of :func:`ring_allreduce_time` sends a
    chunk of ``S / k``; each of the ``k - 1`` steps of
    :func:`ring_allgather_time` a whole block [Ring]_.
    """
    k = check_int("participants", participants, low=1)
    S = check_nonnegative("size", size)
    if gather:
        return (k - 1) * S
    return 2.0 * (k - 1) * S / k


# Up to this many buckets ring_steps_time adds them one by one, as the ring runs them.
_SUMMED_BUCKETS = 1 << 20


def ring_steps_time(participants: int, size: float, bucket_size: float,
                    step_time: Callable[[float], float]) -> float:
    """A ring all-reduce of ``size`` per rank in buckets, each step timed by ``step_time``.

    The law of :func:`ring_allreduce_time` where a step's time is not
    ``l + t c / B`` but whatever ``step_time(c)`` says for a chunk of ``c``
    bytes per rank (the slowest link of the ring, each with its own
    size-dependent bandwidth curve: a plan's closed form,
    :func:`sim.profiles.build.plan_allreduce_time`).

    Notes
    -----
    .. math:: T = \\sum_{b} 2 (k - 1)\\, \\tau(s_b / k)

    over the buckets ``s_b`` of at most ``bucket_size`` (the last one the
    remainder), one after the other [Ring]_. Zero for ``k <= 1`` or ``S <= 0``.
    """
    n = participants
    if n <= 1 or size <= 0:
        return 0.0
    full = float(bucket_size)
    buckets = size / full
    if buckets > _SUMMED_BUCKETS:  # equal full buckets: one product (the sum below would
        # take one Python step a bucket, and stall once ``left - b == left``)
        q = math.floor(buckets)
        rest = size - q * full
        return (q * 2 * (n - 1) * step_time(full / n)
                + (2 * (n - 1) * step_time(rest / n) if rest > 0 else 0.0))
    # the buckets as the network's rings cut them (sim.network.collectives.bucket_sizes):
    # ceil(S / b) - 1 full ones and the remainder, counted, not subtracted one by one (1.0 in
    # buckets of 0.1 left 1.4e-16 after ten subtractions: an eleventh bucket, its steps paid)
    nb = max(1, math.ceil(buckets))  # (one bucket: the whole size, inf buckets too)
    rest = size - full * (nb - 1) if nb > 1 else float(size)
    total, tau = 0.0, None
    for _ in range(nb - 1):  # every full bucket takes the same step time: timed once
        if tau is None:
            tau = step_time(full / n)
        total += 2 * (n - 1) * tau
    if rest > 0:
        total += 2 * (n - 1) * (tau if rest == full and tau is not None
                                else step_time(rest / n))
    return total


def star_exchange_time(exchanges: int, size: float, hub_nic: float, latency: float) -> float:
    """Time of ``m`` pairwise exchanges with the hub of a star, started together.

    Each exchange is a flow each way of ``size`` between the hub and a leaf;
    the hub's NIC (``hub_nic`` per direction) is the only bottleneck.

    Notes
    -----
    .. math:: T = \\ell + m S / B_{hub}

    The ``m`` flows out of the hub share its egress and the ``m`` flows into it
    its ingress, each at ``B_hub / m``. The hub therefore completes at most
    ``B_hub / S`` exchanges per time unit, however many leaves gossip with it.
    """
    m = check_int("exchanges", exchanges, low=1)
    S = check_nonnegative("size", size)
    B = check_positive("hub_nic", hub_nic, allow_inf=True)
    lat = check_nonnegative("latency", latency)
    return lat + (m * S / B if S else 0.0)


def nccl_tree_parents(nodes: int) -> tuple[int, ...]:
    """Each node's parent (-1: the root, node 0) in the binary tree NCCL builds over
    ``nodes`` nodes, its channel 0's tree.

    NCCL v2.21.5-1 ``src/graph/trees.cc:31-50`` (``ncclGetBtree``; unchanged to the 2026
    master but for spacing): ``bit`` is the lowest set bit of ``rank``, the parent
    ``(rank ^ bit) | (bit << 1)``, or ``rank ^ bit`` when that is out of range; the root 0
    has one child. ``src/graph/connect.cc:144-151``: channel ``c < nChannels`` takes this
    tree (the first of ``ncclGetDtree``'s two; the second, a mirror or shift of it, the
    duplicated channels), and a message of a few bytes runs on one channel.
    """
    check_int("nodes", nodes, low=1)
    out = [-1]
    for rank in range(1, nodes):
        bit = rank & -rank
        up = (rank ^ bit) | (bit << 1)
        out.append(up if up < nodes else rank ^ bit)
    return tuple(out)


def nccl_tree_depth(nodes: int) -> int:
    """The hops from the root of :func:`nccl_tree_parents` to its deepest node."""
    parents = nccl_tree_parents(nodes)
    depth = [0] * nodes
    for k in range(1, nodes):  # a parent's index is below its child's or is its own
        d, x = 0, k            # tree's (the bounded case): walk up
        while x > 0:
            x, d = parents[x], d + 1
        depth[k] = d
    return max(depth)


def _log2i(n: int) -> int:
    return max(int(n).bit_length() - 1, 0)


def nccl_small_allreduce_algorithm(nodes: int, ranks: int, *, intra: float = 1.0,
                                   overhead: float = 1.0) -> str:
    """``"tree"`` or ``"ring"``: what NCCL's tuner picks for an all-reduce of a few bytes over
    ``ranks`` GPUs on ``nodes`` nodes (no CollNet/NVLS: none without a SHARP network or, for
    NVLS, on one node).

    NCCL v2.21.5-1 (the NCCL pinned by torch 2.5 and 2.6; v2.18.1-1's rule, torch 2.1, is the
    same) ``src/graph/tuning.cc``: each algorithm and protocol's time is
    ``latency + bytes / bandwidth`` (443) and the least is run (``src/enqueue.cc:1484-1514``,
    ``topoGetAlgoInfo``; NVLS's latencies are larger still); a few bytes make it the
    latency, which for the LL protocol (the least latency of the three for both) is
    ``6.6 + (2 (R - 1) - 2 N) max(i, o) + 2 N 2.7`` us for the ring (57, 158-161, 226-248;
    ``i`` its intra-node hop 0.6 NVLink / 1.0 PCI, ``o`` the network post overhead, 1 us on
    Intel and other CPUs, 2 on AMD, 111-118) and ``6.8 + 2 ((R / N - 1) i + log2i(N) 5.0)`` us
    for the tree (57, 75, 250-252). The plan knows neither the CPU nor the NVLink: Intel and
    PCI are taken (``intra``, ``overhead``, in us), and for up to 16 nodes of up to 8 ranks
    each either choice gives the same pick (``tests/test_nccl_tree.py``): the ring on one
    node, and with one rank per node on 2 or 4 nodes; the tree otherwise (NCCL's master,
    2.30, runs the tree on 4 such nodes too: ``tuning.cc`` 386-389, 411 changed the ring's). NCCL's constants are microseconds the tuner assumes,
    whatever the real links' latency (``latencyInter``, the network plugin's,
    ``search.cc:565``, is 0 for NCCL's own IB and socket transports, ``net_ib.cc:620``,
    ``net_socket.cc:101``): they choose, the plan's links time.
    """
    check_int("nodes", nodes, low=1)
    check_int("ranks", ranks, low=nodes)
    if nodes == 1:
        return "ring"  # equal hops but a smaller base (6.6 < 6.8 us)
    ring = 6.6 + (2 * (ranks - 1) - 2 * nodes) * max(intra, overhead) + 2 * nodes * 2.7
    tree = 6.8 + 2 * ((ranks // nodes - 1) * intra + _log2i(nodes) * 5.0)
    return "tree" if tree < ring else "ring"
