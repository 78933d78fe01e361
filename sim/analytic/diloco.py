"""Exact references for DiLoCo across zones: outer syncs, fragments, overlap, payloads.

A DiLoCo run has ``M`` groups (zones). Each group takes inner steps of time
``T`` on its own (its pipeline and its data-parallel sync inside the zone);
every ``H`` inner steps the groups all-reduce their pseudo-gradients (the
change of the parameters since the last outer step) across the WAN tier and
take an outer step [DiLoCo]_. Streaming DiLoCo [Streaming]_ cuts the model
into ``P`` fragments and synchronises one fragment every ``H / P`` inner steps,
lets the sync of a fragment run beside ``TAU`` further inner steps before it is
applied, and sends the pseudo-gradients at low precision (4 bits).
INTELLECT-1 [INTELLECT1]_ trained a 10B model so, across three continents,
with an int8 outer all-reduce.

What dtsim takes as the time of each piece (the DES of
:mod:`sim.training.outer` runs the same rules event by event):

* the payload of a pseudo-gradient of ``S`` (sizes given at ``value_bits``
  bits a value, 16 by default) sent at ``bits`` bits a value is
  ``S bits / value_bits`` (:func:`payload_size`); a top-k fraction ``F`` sends
  ``F S`` values, each with a 32-bit index beside it, so ``F S (bits + 32) /
  value_bits`` (the coordinate format of sparse all-reduce [SparCML]_);
* a dense payload ``p`` is all-reduced by a ring among the ``M`` groups:
  ``2 (M - 1) (l + p / (M B))`` [Ring]_ (:func:`sim.analytic.network.ring_allreduce_time`);
  a sparse (top-k) payload cannot be summed in place along a ring (the sum of
  sparse vectors fills in), so it is all-gathered: ``(M - 1) (l + p_k / B)``
  [SparCML]_ (:func:`sim.analytic.network.ring_allgather_time`, the all-gather
  half of the same ring law);
* with ``g`` nodes per group holding the same parameters (the group's
  data-parallel replicas after their inner sync), the sync is hierarchical
  (:func:`outer_sync_time`): node ``i`` of every group all-reduces shard ``i``
  (``p / g``) with its counterparts across the WAN (``g`` rings at once, each
  through its own node's link), then each group all-gathers its ``g`` averaged
  shards inside the zone: ``(g - 1) (l_in + p / (g B_in))`` (the two-level
  scheme of [Hier]_, without its first intra-group reduce, which DiLoCo's inner
  sync has already done);
* a group back from a failure fetches the model the same way
  (:func:`model_download_time`): node ``i`` of each stage fetches shard ``i``
  (``S / g``) from its counterpart in a group holding the model, the ``g`` at
  once, each over its own link, then the group all-gathers the shards inside
  the zone: ``l + S / (g B) + (g - 1) (l_in + S / (g B_in))`` (INTELLECT-1's
  live recovery and torchft's healing: each rank receives its own part from
  the rank of the same place in the source);
* fragment ``p`` of a model of ``L`` stages is a set of its layers
  (:func:`fragment_sizes`): ``sequential`` takes consecutive layers,
  ``strided`` every ``P``-th layer [Streaming]_;
* fragment ``p`` is synchronised after the inner steps
  ``t = (p + 1) H / P + k H <= N`` (:func:`sync_schedule`); at the end of
  a step a group first waits for the syncs due at that step (launched
  ``TAU`` steps before) and applies them, then reports the syncs launched at
  that step; a sync starts when every group has reported (a barrier) and,
  with ``TAU = 0``, the groups wait for it before their next step. Syncs
  still running after step ``N`` are waited for at the end.

References
----------
.. [DiLoCo] A. Douillard, Q. Feng, A. A. Rusu, R. Chhaparia, Y. Donchev,
   A. Kuncoro, M. Ranzato, A. Szlam, J. Shen, "DiLoCo: distributed
   low-communication training of language models", arXiv:2311.08105, 2023.
.. [Streaming] A. Douillard et al., "Streaming DiLoCo with overlapping
   communication: towards a distributed free lunch", arXiv:2501.18512, 2025.
.. [INTELLECT1] S. Jaghouar et al. (Prime Intellect), "INTELLECT-1 technical
   report", arXiv:2412.01152, 2024.
.. [DTFM] B. Yuan et al., "Decentralized training of foundation models in
   heterogeneous environments", NeurIPS 2022 (arXiv:2206.01288).
.. [Ring] P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms
   for clusters of workstations", J. Parallel Distrib. Comput. 69(2), 2009.
.. [SparCML] C. Renggli, S. Ashkboos, M. Aghagolzadeh, D. Alistarh,
   T. Hoefler, "SparCML: high-performance sparse communication for machine
   learning", SC 2019 (sparse vectors as index-value pairs; all-gather when
   the sum fills in).
.. [Hier] H. Mikami, H. Suganuma, P. U-chupala, Y. Tanaka, Y. Kageyama,
   "Massively distributed SGD: ImageNet/ResNet-50 training in a flash",
   arXiv:1811.05233, 2018 (2D all-reduce: within groups, then across).
.. [DDP] S. Li et al., "PyTorch
   Distributed: experiences on accelerating data parallel training",
   VLDB 2020 (gradient buckets all-reduced while the backward pass runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import check, check_choice, check_int, check_nonnegative, check_positive
from .network import ring_allgather_time, ring_allreduce_time, ring_bytes_sent

__all__ = [
    "GroupFailures",
    "LENGTH_MODELLED",
    "LENGTH_WHOLE",
    "failure_run_length",
    "ORDERS",
    "PAYLOAD_BITS",
    "INDEX_BITS",
    "payload_size",
    "ring_allgather_time",
    "outer_sync_time",
    "ring_hops",
    "outer_bytes_sent",
    "model_download_time",
    "RECOVERY",
    "recovery_size",
    "fragment_sizes",
    "fragment_stages",
    "sync_schedule",
    "DilocoTimes",
    "diloco_times",
    "diloco_utilisation",
    "streaming_utilisation",
    "overlap_backward_exposed",
    "bandwidth_for_time",
    "step_clock",
    "diloco_mean",
    "LossCurve",
    "loss_vs_wall_clock",
]

#: Fragment orders of Streaming DiLoCo: consecutive layers, or every P-th layer.
ORDERS = ("sequential", "strided")
#: Payload precisions dtsim models (bits a value).
PAYLOAD_BITS = (32, 16, 8, 4)
#: Bits of the index sent beside each value of a top-k payload (coordinate format).
INDEX_BITS = 32


def payload_size(size: float, *, bits: int = 16, value_bits: int = 16,
                 topk: float | None = None) -> float:
    """The size a pseudo-gradient of ``size`` takes on the wire.

    Parameters
    ----------
    size : float
        Parameters' size at ``value_bits`` bits a value (size units).
    bits : int
        Bits a value is sent at (one of 32, 16, 8, 4; at most ``value_bits``).
    value_bits : int
        Bits a value has in ``size`` (default 16: sizes in bf16/fp16).
    topk : float or None
        Fraction ``F`` in (0, 1] of the values sent (the largest), each with a
        32-bit index; None: dense.

    Returns
    -------
    float
        Size units on the wire.

    Notes
    -----
    .. math:: p = S \\frac{b}{b_v} \\quad\\text{(dense)}, \\qquad
              p_k = F S \\frac{b + 32}{b_v} \\quad\\text{(top-k)}

    The index overhead is that of the coordinate (index, value) format of
    sparse collectives [SparCML]_ with 32-bit indices (enough for
    :math:`2^{32}` values a tensor shard).
    """
    S = check_nonnegative("size", size)
    vb = check_int("value_bits", value_bits, low=1)
    b = check_int("bits", bits)
    check(b in PAYLOAD_BITS, "bits", "one of " + ", ".join(map(str, PAYLOAD_BITS)), bits)
    check(b <= vb, "bits", f"at most value_bits ({vb})", bits)
    if topk is None:
        return S * b / vb
    F = check_positive("topk", topk)
    check(F <= 1.0, "topk", "in (0, 1]", topk)
    return F * S * (b + INDEX_BITS) / vb


def ring_hops(matrix: Any, ring: Sequence[int]) -> list[float]:
    """``matrix``'s entry of each hop of ``ring`` in its order: ``matrix[ring[i]][ring[i + 1]]``,
    the last hop back to ``ring[0]`` (a ``geo`` layout's ``latency_matrix`` or
    ``bandwidth_matrix`` and the DES's ring, the groups in index order: the per-hop
    ``latency`` and ``bandwidth`` of :func:`outer_sync_time`). A flow takes the
    least-latency route (:meth:`sim.network.topology.Network.route_between`), so these
    are a hop's only where its pair's direct link is that route (latencies that keep the
    triangle inequality); otherwise give the route's latency and narrowest link."""
    r = [int(x) for x in ring]
    check(len(r) >= 2, "ring", "at least 2 zones", r)
    return [float(matrix[a][b]) for a, b in zip(r, r[1:] + r[:1], strict=True)]


def outer_sync_time(groups: int, size: float, bandwidth: float | Sequence[float],
                    latency: float | Sequence[float], *,
                    bits: int = 16, value_bits: int = 16, topk: float | None = None,
                    nodes_per_group: int = 1, intra_bandwidth: float | None = None,
                    intra_latency: float | None = None) -> float:
    """Time of one outer sync of a pseudo-gradient of ``size`` among ``M`` groups.

    Parameters
    ----------
    groups : int
        ``M`` groups (zones) taking part.
    size : float
        The pseudo-gradient (parameters) at ``value_bits`` bits a value.
    bandwidth, latency : float or sequence of float
        The WAN tier: each node's bandwidth (per direction) to the next group
        in the ring, and the latency between ring neighbours; or one of each
        a hop, ``M`` in ring order (hop ``i`` from group ``i`` to ``i + 1``,
        the last back to group 0; :func:`ring_hops`), where zones differ.
    bits, value_bits, topk
        As :func:`payload_size`.
    nodes_per_group : int
        ``g`` nodes of each group holding the same parameters (the group's
        data-parallel replicas of this stage).
    intra_bandwidth, intra_latency : float or None
        Links inside a group (default: the WAN's; given with per-hop values
        and more than one node a group).

    Returns
    -------
    float

    Notes
    -----
    Dense, ``p = S b / b_v``:

    .. math:: T = 2 (M - 1) \\left(\\ell + \\frac{p}{g M B}\\right)
              + (g - 1) \\left(\\ell_{in} + \\frac{p}{g B_{in}}\\right)

    top-k, ``p_k = F S (b + 32) / b_v`` (each node selects its shard's top-k):

    .. math:: T = (M - 1) \\left(\\ell + \\frac{p_k}{g B}\\right)
              + (g - 1) \\left(\\ell_{in} + \\frac{\\min(M p_k, p)}{g B_{in}}\\right)

    the second term the all-gather of the averaged shards inside each group
    (the average of ``M`` sparse shards has at most ``M F`` of the values;
    never more than the dense payload) [Hier]_ [SparCML]_ [Ring]_.

    With a latency and a bandwidth a hop (``\\ell_i``, ``B_i``) every step of
    the ring ends with its slowest hop: a node forwards at step ``s`` the
    chunk it received at step ``s - 1`` once its own send of step ``s - 1``
    is done (:mod:`sim.network.collectives`), so the end of its step ``s``
    is a longest path of ``s + 1`` hops, each a hop's time or its
    predecessor's, at most ``(s + 1) \\max_i \\tau_i``, which the slowest hop
    reaches by itself:

    .. math:: T = 2 (M - 1) \\max_i \\left(\\ell_i + \\frac{p}{g M B_i}\\right)
              + (g - 1) \\left(\\ell_{in} + \\frac{p}{g B_{in}}\\right)

    (top-k: ``(M - 1) max_i (l_i + p_k / (g B_i))``): 3 zones 0.3, 0.4 and
    0.6 apart around the ring, ``p / M = 4`` over 10, 5 and 20, take
    ``4 max(0.7, 1.2, 0.8) = 4.8`` (the mean latency with the least bandwidth
    says 4.93, the largest latency with it 5.6).

    An empty payload (``size = 0``) takes no time, latency included: an
    all-reduce of no values is no collective (NCCL discards one of count 0
    before queueing any work: ``taskAppend``, src/enqueue.cc:2335 at
    v2.27.3-1), as the network's rings move no flow then
    (:func:`sim.network.collectives.ring_allreduce`).
    """
    M = check_int("groups", groups, low=1)
    g = check_int("nodes_per_group", nodes_per_group, low=1)
    if not (np.isscalar(latency) and np.isscalar(bandwidth)):
        return _outer_sync_hops(M, g, size, bandwidth, latency, bits=bits,
                                value_bits=value_bits, topk=topk,
                                intra_bandwidth=intra_bandwidth, intra_latency=intra_latency)
    B = check_positive("bandwidth", bandwidth, allow_inf=True)
    lat = check_nonnegative("latency", latency)
    Bi = B if intra_bandwidth is None else check_positive("intra_bandwidth", intra_bandwidth,
                                                          allow_inf=True)
    li = lat if intra_latency is None else check_nonnegative("intra_latency", intra_latency)
    dense = payload_size(size, bits=bits, value_bits=value_bits)
    if topk is None:  # an empty payload is no ring at all (see the Notes)
        across = ring_allreduce_time(M, dense / g, B, lat) if M > 1 else 0.0
        inside = ring_allgather_time(g, dense / g, Bi, li) if M > 1 else 0.0
        return across + inside
    pk = payload_size(size, bits=bits, value_bits=value_bits, topk=topk)
    if M == 1:
        return 0.0
    return (ring_allgather_time(M, pk / g, B, lat)
            + ring_allgather_time(g, min(M * pk, dense) / g, Bi, li))


def _outer_sync_hops(M: int, g: int, size: float, bandwidth: Any, latency: Any, *, bits: int,
                     value_bits: int, topk: float | None, intra_bandwidth: float | None,
                     intra_latency: float | None) -> float:
    """:func:`outer_sync_time` with a latency and a bandwidth a hop (its Notes)."""
    def hops(name: str, v: Any, rule: Any) -> list[float]:
        if np.isscalar(v):
            return [rule(name, v)] * M
        out = [rule(name, x) for x in v]
        check(len(out) == M, name, f"one value a hop of the ring ({M} groups)", list(v))
        return out
    B = hops("bandwidth", bandwidth, lambda n, x: check_positive(n, x, allow_inf=True))
    lat = hops("latency", latency, check_nonnegative)
    check(g == 1 or (intra_bandwidth is not None and intra_latency is not None),
          "intra_latency", "given (with intra_bandwidth) with per-hop values and "
          "nodes_per_group above 1", intra_latency)
    dense = payload_size(size, bits=bits, value_bits=value_bits)
    if M == 1 or dense == 0:  # an empty payload: no ring (outer_sync_time's Notes)
        return 0.0
    if topk is None:
        chunk, steps, block = dense / (g * M), 2 * (M - 1), dense
    else:
        pk = payload_size(size, bits=bits, value_bits=value_bits, topk=topk)
        chunk, steps, block = pk / g, M - 1, min(M * pk, dense)
    across = steps * max(x + chunk / b for x, b in zip(lat, B, strict=True))
    if g == 1:
        return across
    Bi = check_positive("intra_bandwidth", intra_bandwidth, allow_inf=True)
    li = check_nonnegative("intra_latency", intra_latency)
    return across + ring_allgather_time(g, block / g, Bi, li)


def outer_bytes_sent(groups: int, size: float, *, bits: int = 16, value_bits: int = 16,
                     topk: float | None = None, nodes_per_group: int = 1) -> tuple[float, float]:
    """Size units each node sends in one outer sync: (over the WAN, inside its group).

    Notes
    -----
    A ring all-reduce of ``p`` among ``k`` sends ``2 (k - 1) p / k`` from each
    participant; an all-gather of blocks ``p`` sends ``(k - 1) p`` [Ring]_. So a
    node sends :math:`2 (M - 1) p / (g M)` across the WAN (dense) or
    :math:`(M - 1) p_k / g` (top-k), and :math:`(g - 1) p / g` (resp.
    :math:`(g - 1) \\min(M p_k, p) / g`) inside its group.
    """
    M = check_int("groups", groups, low=1)
    g = check_int("nodes_per_group", nodes_per_group, low=1)
    dense = payload_size(size, bits=bits, value_bits=value_bits)
    if M == 1:
        return 0.0, 0.0
    if topk is None:
        return ring_bytes_sent(M, dense / g), ring_bytes_sent(g, dense / g, gather=True)
    pk = payload_size(size, bits=bits, value_bits=value_bits, topk=topk)
    return (ring_bytes_sent(M, pk / g, gather=True),
            ring_bytes_sent(g, min(M * pk, dense) / g, gather=True))


#: What a group back from a failure fetches (:func:`recovery_size`): the framework whose
#: live recovery it follows, or the parameters alone.
RECOVERY = ("prime", "torchft", "params")

#: Copies of the parameters each recovery sends, and their bits a value (None: the
#: parameters' own, ``value_bits``). Read at PrimeIntellect-ai/prime d57965b (Erland366/prime)
#: and pytorch/torchft 73dafea; the small non-tensor states (step counters, the scheduler,
#: the training progress, AdamW's scalar ``step``) are left out.
_RECOVERY_COPIES: dict[str, tuple[int, int | None]] = {
    # prime, checkpoint.py:443-501 (recv) / 509-541 (send): the offloaded outer parameters,
    # fp32 (diloco.py:154, 169); the outer optimizer's state, SGD with Nesterov momentum
    # (diloco.py:72-73): one momentum buffer a parameter, fp32 like the offloaded grads it
    # is cloned from (diloco.py:155, 170); the inner optimizer's state, AdamW by default
    # (config.py:56, optimizers.py:24-29): exp_avg and exp_avg_sq a parameter, the dtype of
    # FSDP's sharded parameters, fp32 (the model is built in fp32, bf16 only in compute:
    # train.py:144-168). The inner parameters are not sent: the offloaded ones are copied
    # into them (checkpoint.py:463-467).
    "prime": (4, 32),
    # torchft, manager.py:704-709 and 892-899: every registered state dict. DiLoCo's own,
    # a fragment's original_parameters and outer optimizer state (local_sgd.py:256-287; the
    # backup at the parameters' dtype, 242-254; Nesterov SGD: one momentum buffer); the
    # user's, as train_diloco.py:50-60 and 76-81 register it: the model, the inner AdamW's
    # two moments and the outer SGD's state again (165-170), each tensor sent as it is
    # (http_transport.py:220-242: copied to CPU one by one, 270-285).
    "torchft": (6, None),
    "params": (1, None),
}


def recovery_size(size: float, *, value_bits: int = 16, recovery: str = "prime") -> float:
    """What a group back from a failure fetches for a stage of ``size`` (its parameters at
    ``value_bits`` a value), as the framework's live recovery sends it.

    ``prime`` (INTELLECT-1): the fp32 outer parameters, the outer Nesterov momentum (fp32)
    and the inner AdamW's two moments (fp32): ``4 * 32 / value_bits`` times ``size``.
    ``torchft``: DiLoCo's original parameters and outer momentum, and the user's state dict
    of its DiLoCo example (model, AdamW's two moments, the outer momentum again), each at
    the parameters' dtype: ``6 size``. ``params``: ``size`` (dtsim before: the parameters
    alone). Sources at ``_RECOVERY_COPIES``.
    """
    check_choice("recovery", recovery, RECOVERY)
    copies, bits = _RECOVERY_COPIES[recovery]
    return copies * size if bits is None else copies * size * bits / value_bits


def model_download_time(size: float, bandwidth: float, latency: float, *,
                        nodes_per_group: int = 1, intra_bandwidth: float | None = None,
                        intra_latency: float | None = None) -> float:
    """Time of a group's fetch of ``size`` (a stage's parameters, or the payloads a late
    group missed) across the WAN tier, on ``g`` nodes of the group.

    Parameters
    ----------
    size : float
        What each node of the group must hold at the end (size units).
    bandwidth, latency : float
        A WAN link (one a pair of nodes, as :func:`outer_sync_time`'s).
    nodes_per_group : int
        ``g`` nodes of the group receiving it (the stage's live data-parallel replicas).
    intra_bandwidth, intra_latency : float or None
        Links inside the group (default: the WAN's).

    Returns
    -------
    float

    Notes
    -----
    .. math:: T = \\ell + \\frac{S}{g B}
              + (g - 1) \\left(\\ell_{in} + \\frac{S}{g B_{in}}\\right)

    Node ``i`` receives shard ``i`` (``S / g``) from its counterpart, node ``i`` of the
    source group, the ``g`` transfers at once over ``g`` links; then the group all-gathers
    its ``g`` shards (:func:`sim.analytic.network.ring_allgather_time`), as the outer sync
    gathers its averaged shards: a group's data-parallel replicas each hold their whole
    stage (FSDP ranks would keep their shards and need no all-gather). The references move one copy of the state a group, split
    over its ranks: INTELLECT-1's live recovery has each GPU of the joining node receive
    its own FSDP shard from the GPU of the same local rank on the source node, over that
    rank's own process group across the nodes (PrimeIntellect-ai/prime at d57965b,
    ``src/zeroband/checkpoint.py:443-467``, ``src/zeroband/comms.py:95-100, 154-163``,
    ``src/zeroband/diloco.py:147-177``; FSDP on the node's GPUs,
    ``src/zeroband/train.py:155-168``); torchft's healing has each rank of the healing
    replica group fetch its own state dict from the checkpoint server of the rank of the
    same ``group_rank`` in an up-to-date group (pytorch/torchft at 73dafea,
    ``torchft/manager.py:712-743``, ``src/manager.rs:357-361``, ``404-419``). An empty
    ``size`` pays the WAN latency alone (the request), and no all-gather.
    """
    S = check_nonnegative("size", size)
    g = check_int("nodes_per_group", nodes_per_group, low=1)
    B = check_positive("bandwidth", bandwidth, allow_inf=True)
    lat = check_nonnegative("latency", latency)
    Bi = B if intra_bandwidth is None else check_positive("intra_bandwidth", intra_bandwidth,
                                                          allow_inf=True)
    li = lat if intra_latency is None else check_nonnegative("intra_latency", intra_latency)
    return lat + S / (g * B) + ring_allgather_time(g, S / g, Bi, li)


def fragment_sizes(stage_sizes: Sequence[float], fragments: int, order: str = "sequential",
                   layers: int | None = None) -> list[list[float]]:
    """The part of each stage's parameters in each fragment.

    Parameters
    ----------
    stage_sizes : sequence of float
        Parameters of each of the ``L`` pipeline stages.
    fragments : int
        ``P``.
    order : {"sequential", "strided"}
        Fragment ``p`` holds the layers ``l`` with ``l // (n / P) == p``
        (consecutive) or ``l % P == p`` (every ``P``-th) [Streaming]_.
    layers : int or None
        ``n`` layers of the model, equal in size within a stage and ``n / L``
        to a stage (``n`` a multiple of ``L`` and of ``P``); default
        ``lcm(L, P)``.

    Returns
    -------
    list of list of float
        ``out[p][j]``: the size of stage ``j``'s layers in fragment ``p``.
    """
    sizes = [check_nonnegative("param_size", s) for s in stage_sizes]
    L = len(sizes)
    check(L >= 1, "stage_sizes", "at least one stage", stage_sizes)
    owners, per = _layer_owners(L, fragments, order, layers)
    out = [[0.0] * L for _ in range(fragments)]
    for p, j in owners:
        out[p][j] += sizes[j] / per
    return out


def fragment_stages(stages: int, fragments: int, order: str = "sequential",
                    layers: int | None = None) -> list[tuple[int, ...]]:
    """The stages that hold layers of each fragment (the cut of :func:`fragment_sizes`).

    A stage none of whose layers is in fragment ``p`` has nothing of it to send:
    it takes no part in that fragment's outer sync (no ring, no latency). A
    stage that holds layers of ``p`` takes part even when their size is 0 (in
    the closed form a sync of a model of size 0 still pays its latency).

    Returns
    -------
    list of tuple of int
        ``out[p]``: the stages ``j`` with a layer in fragment ``p``, in order.
    """
    L = check_int("stages", stages, low=1)
    owners, _per = _layer_owners(L, fragments, order, layers)
    held: list[set[int]] = [set() for _ in range(fragments)]
    for p, j in owners:
        held[p].add(j)
    return [tuple(sorted(js)) for js in held]


def _layer_owners(L: int, fragments: int, order: str,
                  layers: int | None) -> tuple[list[tuple[int, int]], int]:
    """``(fragment, stage)`` of each of the ``n`` layers of a model of ``L`` stages, and the
    layers a stage holds (``n / L``); see :func:`fragment_sizes`."""
    P = check_int("fragments", fragments, low=1)
    check_choice("order", order, ORDERS)
    n = math.lcm(L, P) if layers is None else check_int("layers", layers, low=1)
    check(n % L == 0 and n % P == 0, "layers", f"a multiple of the stages ({L}) and of the "
          f"fragments ({P})", n)
    per = n // L
    return [(layer // (n // P) if order == "sequential" else layer % P, layer // per)
            for layer in range(n)], per


def sync_schedule(steps: int, every: int, fragments: int = 1) -> list[tuple[int, int]]:
    """The ``(step, fragment)`` outer syncs of a run of ``N`` inner steps, in order.

    Notes
    -----
    Fragment ``p`` is synchronised after the inner steps
    :math:`t = (p + 1) H / P + k H \\le N`, so one fragment every ``H / P``
    steps and each fragment every ``H`` steps [Streaming]_; ``P = 1`` is
    DiLoCo's sync every ``H`` steps [DiLoCo]_.
    """
    N = check_int("steps", steps, low=1)
    H = check_int("every", every, low=1)
    P = check_int("fragments", fragments, low=1)
    check(H % P == 0, "fragments", f"a divisor of every ({H})", P)
    gap = H // P
    out = []
    for t in range(gap, N + 1, gap):
        out.append((t, (t // gap - 1) % P))
    return out


@dataclass(frozen=True)
class DilocoTimes:
    """Wall time of a lockstep DiLoCo run (see :func:`diloco_times`).

    Attributes
    ----------
    wall_time : float
    compute_time : float
        ``N T_c``: the time the groups spend in their inner steps' compute.
    exposed : float
        Wall time not hidden behind inner steps (waiting for outer syncs).
    overlapping : bool
        Whether two outer syncs were ever in flight at once (with a network
        they would share its links, so the recursion is no longer exact).
    syncs : int
        Outer syncs run.
    """

    wall_time: float
    compute_time: float
    exposed: float
    overlapping: bool
    syncs: int

    @property
    def compute_utilisation(self) -> float:
        """``compute_time / wall_time``."""
        return self.compute_time / self.wall_time if self.wall_time > 0 else math.nan


def diloco_times(steps: int, step_time: float, every: int, sync_times: Sequence[float], *,
                 overlap: int = 0, compute_time: float | None = None) -> DilocoTimes:
    """Exact wall time of ``M`` groups in lockstep under (streaming) DiLoCo.

    Parameters
    ----------
    steps : int
        ``N`` inner steps of every group.
    step_time : float
        ``T``: one inner step (its compute, then its inner sync and optimizer).
    every : int
        ``H``.
    sync_times : sequence of float
        ``T_f(p)``: the outer sync time of each of the ``P`` fragments
        (one value: vanilla DiLoCo).
    overlap : int
        ``TAU`` inner steps a sync runs beside before it is applied.
    compute_time : float or None
        ``T_c``: the compute part of ``T`` (default ``T``).

    Returns
    -------
    DilocoTimes

    Notes
    -----
    The recursion over the inner steps (groups in lockstep: equal,
    deterministic steps): after step ``t`` the clock has advanced by ``T``;
    every sync due at ``t`` (launched at ``t - TAU``) is waited for,
    :math:`\\tau \\leftarrow \\max(\\tau, f)`; every sync launched at ``t``
    (:func:`sync_schedule`) starts at :math:`\\tau` and ends at
    :math:`\\tau + T_f(p)`, waited for at once when ``TAU = 0``. After step ``N``
    the run waits for every sync still running. With ``TAU = 0`` and ``P = 1``
    this is :math:`N T + \\lfloor N / H \\rfloor T_{sync}` [DiLoCo]_; each sync
    hides :math:`\\min(T_f, \\mathrm{TAU}\\, T)` of its time [Streaming]_.
    Exact when each sync takes its own ``T_f`` whatever else is in flight
    (each transfer on its own link); ``overlapping`` says whether two syncs were
    ever in flight at once (when they share links they then take longer).
    """
    N = check_int("steps", steps, low=1)
    T = check_nonnegative("step_time", step_time)
    H = check_int("every", every, low=1)
    tf = [check_nonnegative("sync_times", x) for x in sync_times]
    P = len(tf)
    check(P >= 1, "sync_times", "one value per fragment", sync_times)
    tau_steps = check_int("overlap", overlap, low=0)
    Tc = T if compute_time is None else check_nonnegative("compute_time", compute_time)
    clock = 0.0
    pending: dict[int, list[float]] = {}
    running: list[float] = []  # end times of syncs launched so far
    overlapping = False
    n_syncs = 0
    sched = sync_schedule(N, H, P)
    by_step: dict[int, list[int]] = {}
    for t, p in sched:
        by_step.setdefault(t, []).append(p)
    for t in range(1, N + 1):
        clock += T
        for f in pending.pop(t, []):
            clock = max(clock, f)
        for p in by_step.get(t, []):
            if any(f > clock for f in running):
                overlapping = True
            end = clock + tf[p]
            running.append(end)
            n_syncs += 1
            if tau_steps == 0:
                clock = end
            else:
                pending.setdefault(min(t + tau_steps, N + 1), []).append(end)
    for f in pending.pop(N + 1, []):
        clock = max(clock, f)
    return DilocoTimes(wall_time=clock, compute_time=N * Tc, exposed=clock - N * T,
                       overlapping=overlapping, syncs=n_syncs)


def step_clock(steps: int, step_time: float, every: int, sync_times: Sequence[float], *,
               overlap: int = 0) -> list[float]:
    """The wall clock at the end of each inner step (and its due syncs), ``N + 1`` values.

    Value ``t`` is when the groups are ready to begin step ``t + 1`` under the
    recursion of :func:`diloco_times` (``0``: the start; ``N``: the end of the
    run, every sync waited for). A data-parallel run is ``every = 1`` with its
    all-reduce as the sync.
    """
    N = check_int("steps", steps, low=1)
    T = check_nonnegative("step_time", step_time)
    H = check_int("every", every, low=1)
    tf = [check_nonnegative("sync_times", x) for x in sync_times]
    tau_steps = check_int("overlap", overlap, low=0)
    by_step: dict[int, list[int]] = {}
    for t, p in sync_schedule(N, H, len(tf)):
        by_step.setdefault(t, []).append(p)
    clock, out = 0.0, [0.0]
    pending: dict[int, list[float]] = {}
    for t in range(1, N + 1):
        clock += T
        for f in pending.pop(t, []):
            clock = max(clock, f)
        for p in by_step.get(t, []):
            end = clock + tf[p]
            if tau_steps == 0:
                clock = end
            else:
                pending.setdefault(min(t + tau_steps, N + 1), []).append(end)
        if t == N:
            for f in pending.pop(N + 1, []):
                clock = max(clock, f)
        out.append(clock)
    return out


def diloco_utilisation(every: int, step_time: float, sync_time: float) -> float:
    """Steady-state compute utilisation of vanilla DiLoCo.

    Notes
    -----
    .. math:: U = \\frac{H T}{H T + T_{sync}}

    ``H`` inner steps of ``T`` per outer sync of ``T_sync`` [DiLoCo]_
    (``T`` counted as compute).
    """
    H = check_int("every", every, low=1)
    T = check_nonnegative("step_time", step_time)
    S = check_nonnegative("sync_time", sync_time)
    return H * T / (H * T + S) if H * T + S > 0 else math.nan


def streaming_utilisation(every: int, step_time: float, sync_times: Sequence[float],
                          overlap: int = 0) -> float:
    """Steady-state compute utilisation of Streaming DiLoCo (fragments, overlap).

    Notes
    -----
    .. math:: U = \\frac{H T}{H T + \\sum_p \\max(0, T_f(p) - \\mathrm{TAU}\\, T)}

    Per ``H`` inner steps each of the ``P`` fragments is synchronised once;
    its sync hides behind the ``TAU`` inner steps it runs beside, and only
    the remainder is exposed [Streaming]_. Exact in steady state when no two
    syncs are in flight at once (``TAU <= H / P``, or every
    ``T_f <= (H / P) T``; see :func:`diloco_times`).
    """
    H = check_int("every", every, low=1)
    T = check_nonnegative("step_time", step_time)
    tau = check_int("overlap", overlap, low=0)
    exposed = sum(max(0.0, check_nonnegative("sync_times", x) - tau * T) for x in sync_times)
    return H * T / (H * T + exposed) if H * T + exposed > 0 else math.nan


def overlap_backward_exposed(allreduce_time: float, backward_time: float) -> float:
    """The exposed tail of a gradient all-reduce overlapped with the backward pass.

    Notes
    -----
    .. math:: T_{exp} = \\max(0, T_{ar} - T_b)

    Gradient buckets are all-reduced while the backward pass goes on [DDP]_;
    at best the all-reduce starts with the backward pass and runs at the
    full rate, so what is left after the backward pass is exposed. A lower
    bound: buckets become ready only as the backward pass produces them, and
    the last one is always exposed.
    """
    a = check_nonnegative("allreduce_time", allreduce_time)
    b = check_nonnegative("backward_time", backward_time)
    return max(0.0, a - b)


def bandwidth_for_time(budget: float, groups: int, size: float, latency: float, *,
                       bits: int = 16, value_bits: int = 16, topk: float | None = None
                       ) -> float:
    """The least WAN bandwidth for which one outer sync of ``size`` takes at most ``budget``.

    Returns
    -------
    float
        ``inf`` when the latency alone exceeds the budget; 0 when nothing moves.

    Notes
    -----
    The sync time of :func:`outer_sync_time` (one node a group) is
    :math:`a + b / B` with :math:`a = 2 (M-1) \\ell`, :math:`b = 2 (M-1) p / M`
    (dense) or :math:`a = (M-1) \\ell`, :math:`b = (M-1) p_k` (top-k), so
    :math:`B = b / (\\text{budget} - a)`.
    """
    X = check_nonnegative("budget", budget)
    M = check_int("groups", groups, low=1)
    lat = check_nonnegative("latency", latency)
    if M == 1:
        return 0.0
    if topk is None:
        p = payload_size(size, bits=bits, value_bits=value_bits)
        a, b = 2.0 * (M - 1) * lat, 2.0 * (M - 1) * p / M
    else:
        p = payload_size(size, bits=bits, value_bits=value_bits, topk=topk)
        a, b = (M - 1) * lat, (M - 1) * p
    if b == 0:
        return 0.0
    return b / (X - a) if X > a else math.inf


# --------------------------------------------------------------------------- learning


def _coordinate_fragments(d: int, fragments: int, order: str) -> list[np.ndarray]:
    """Coordinates of each fragment: ``d`` coordinates as ``d`` layers of equal size."""
    check(d % fragments == 0, "fragments", f"a divisor of the dimension ({d})", fragments)
    idx = np.arange(d)
    if order == "sequential":
        return [idx[p * d // fragments:(p + 1) * d // fragments] for p in range(fragments)]
    return [idx[p::fragments] for p in range(fragments)]


def diloco_mean(curvature: Any, optimum: Any, lr: float, steps: int, every: int, *,
                fragments: int = 1, order: str = "sequential", overlap: int = 0,
                mixing: float = 0.5, outer_lr: float = 1.0, x0: Any = 0.0) -> np.ndarray:
    """Exact expected global parameters of (streaming) DiLoCo on separable quadratics.

    Parameters
    ----------
    curvature, optimum : array_like, shape (M, d)
        Group ``i``'s quadratic :math:`f_i(x) = \\frac12 \\sum_k a_{ik} (x_k - c_{ik})^2`.
    lr : float
        Inner step size ``eta`` (``eta a < 2``); gradient noise of mean zero
        does not enter the first moment.
    steps, every : int
        ``N`` inner steps, ``H``.
    fragments, order : int, str
        ``P`` fragments of the ``d`` coordinates (``P`` dividing ``d``):
        consecutive or every ``P``-th coordinate (:func:`fragment_sizes` with
        one coordinate a layer).
    overlap : int
        ``TAU``: a fragment's outer step is applied ``TAU`` inner steps after
        its pseudo-gradient was taken.
    mixing : float
        ``alpha`` in [0, 1): with ``TAU > 0`` each group's fragment becomes
        ``alpha x + (1 - alpha) theta`` when the outer step lands (Streaming
        DiLoCo's merge, 0.5 in its experiments); with ``TAU = 0`` it is
        replaced (DiLoCo).
    outer_lr : float
        ``mu``: the outer step :math:`\\theta \\leftarrow \\theta - \\mu \\bar\\Delta`
        (outer SGD; ``mu = 1``: plain averaging, local SGD).
    x0 : float or array_like, shape (d,)
        The initial model.

    Returns
    -------
    numpy.ndarray, shape (N + 1, d)
        :math:`E[\\theta_t]` after each inner step (row 0: the start).

    Notes
    -----
    Every inner step is affine in the parameters,
    :math:`x_i \\leftarrow x_i - \\eta a_i (x_i - c_i)`, and so are the outer
    step and the merge; the expectation passes through them, so the recursion
    of the means is exact. Fragment ``p``'s pseudo-gradient is taken after the
    steps of :func:`sync_schedule`, :math:`\\Delta_i = \\theta_p - x_{i,p}`, and
    applied ``TAU`` steps later (after step ``N`` at the latest). With ``P = 1``,
    ``TAU = 0`` and ``mu = 1`` this is local SGD's round (H local steps, then the
    exact mean; :func:`sim.analytic.learning.training_mean` with protocol
    ``allreduce``), whose fixed point is
    :func:`sim.analytic.learning.diloco_fixed_point`; ``H = 1`` is gradient
    descent on the mean objective (data parallelism) [DiLoCo]_ [Streaming]_.
    """
    from .learning import check_step_size

    a = np.asarray(curvature, dtype=float)
    c = np.asarray(optimum, dtype=float)
    if a.ndim == 1:
        a, c = a[:, None], c[:, None]
    check(a.ndim == 2 and a.shape == c.shape, "optimum", f"an array of shape {a.shape}",
          c.shape)
    check(bool(np.all(a > 0)), "curvature", "> 0", float(a.min()))
    eta = check_nonnegative("lr", lr)
    check_step_size(a, eta)
    N = check_int("steps", steps, low=1)
    H = check_int("every", every, low=1)
    P = check_int("fragments", fragments, low=1)
    check_choice("order", order, ORDERS)
    tau = check_int("overlap", overlap, low=0)
    alpha = float(mixing)
    check(0.0 <= alpha < 1.0, "mixing", "in [0, 1)", mixing)
    mu = check_nonnegative("outer_lr", outer_lr)
    M, d = a.shape
    frags = _coordinate_fragments(d, P, order)
    theta = np.broadcast_to(np.asarray(x0, dtype=float), (d,)).astype(float).copy()
    x = np.tile(theta, (M, 1))
    by_step: dict[int, list[int]] = {}
    for t, p in sync_schedule(N, H, P):
        by_step.setdefault(t, []).append(p)
    pending: dict[int, list[tuple[int, np.ndarray]]] = {}
    out = np.empty((N + 1, d))
    out[0] = theta
    step = 1.0 - eta * a

    def apply(p: int, delta: np.ndarray) -> None:
        cols = frags[p]
        theta[cols] -= mu * delta
        if tau == 0:
            x[:, cols] = theta[cols]
        else:
            x[:, cols] = alpha * x[:, cols] + (1.0 - alpha) * theta[cols]

    for t in range(1, N + 1):
        x = step * x + eta * a * c
        for p, delta in pending.pop(t, []):
            apply(p, delta)
        for p in by_step.get(t, []):
            cols = frags[p]
            delta = (theta[cols] - x[:, cols]).mean(axis=0)
            if tau == 0:
                apply(p, delta)
            else:
                pending.setdefault(min(t + tau, N + 1), []).append((p, delta))
        if t == N:
            for p, delta in pending.pop(N + 1, []):
                apply(p, delta)
        out[t] = theta
    return out


@dataclass(frozen=True)
class LossCurve:
    """Loss of the global model against wall clock (see :func:`loss_vs_wall_clock`).

    Attributes
    ----------
    time, loss : tuple of float
        After each inner step (``N + 1`` values, the start first).
    """

    time: tuple[float, ...]
    loss: tuple[float, ...]

    def time_to(self, target: float) -> float:
        """The first wall clock at which the loss is at most ``target`` (inf: never)."""
        for t, v in zip(self.time, self.loss, strict=True):
            if v <= target:
                return t
        return math.inf


def loss_vs_wall_clock(curvature: Any, optimum: Any, lr: float, steps: int, every: int,
                       step_time: float, sync_times: Sequence[float], *, overlap: int = 0,
                       order: str = "sequential", mixing: float = 0.5, outer_lr: float = 1.0,
                       x0: Any = 0.0) -> LossCurve:
    """The time model joined to the learning model: loss of the global model against wall clock.

    Parameters
    ----------
    curvature, optimum, lr, steps, every, overlap, order, mixing, outer_lr, x0
        As :func:`diloco_mean` (one fragment per entry of ``sync_times``).
    step_time, sync_times
        As :func:`step_clock`: the inner step and each fragment's sync time.

    Returns
    -------
    LossCurve
        ``loss[t] = F(E[theta_t]) - F(x*)`` with :math:`F = \\frac1M \\sum_i f_i`
        and :math:`x^*` its minimiser (:func:`sim.analytic.learning.honest_optimum`),
        at ``time[t]`` of :func:`step_clock`.

    Notes
    -----
    :math:`F(\\theta) - F(x^*) = \\sum_k \\frac{\\bar a_k}{2} (\\theta_k - x^*_k)^2`
    (``abar`` the mean curvature), evaluated at the exact mean of the
    parameters; with gradient noise it is the loss of the mean, not the mean
    loss.
    """
    from .learning import honest_optimum

    means = diloco_mean(curvature, optimum, lr, steps, every, fragments=len(sync_times),
                        order=order, overlap=overlap, mixing=mixing, outer_lr=outer_lr, x0=x0)
    a = np.asarray(curvature, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    xs = honest_optimum(curvature, optimum)
    abar = a.mean(axis=0)
    loss = (0.5 * abar * (means - xs) ** 2).sum(axis=1)
    clock = step_clock(steps, step_time, every, sync_times, overlap=overlap)
    return LossCurve(tuple(float(t) for t in clock), tuple(float(v) for v in loss))


#: A failure budget's length in a refusal's words: the run's expected length under its
#: failures (:func:`failure_run_length`), or, where that model does not apply, the failure-free
#: run plus the whole stall limit (DiLoCo's :func:`sim.training.outer.run_length_diloco` and
#: :meth:`sim.training.LearnersConfig.run_length`)
LENGTH_MODELLED = ("the run's expected length under its failures, the stall limit where it "
                   "may stall, or max_time (--max-time bounds it)")
LENGTH_WHOLE = ("the run's length, failure-free plus the whole stall limit or max_time "
                "(--max-time bounds a run that ends sooner)")


@dataclass(frozen=True)
class GroupFailures:
    """What a run's failures do to one DiLoCo group (a learner), for
    :func:`failure_run_length`: ``loss_rate`` the rate at which the group, able to step, loses
    a stage (and its work since the last merge); ``up`` the long-run fraction of time it can
    step; ``tau`` the time it must stay able to step to take its ``H`` inner steps and the
    outer sync (its steps' slowdown by failures inside it included)."""

    loss_rate: float
    up: float
    tau: float

    def round_time(self) -> float:
        """Expected time to a stretch of ``tau`` without a loss, from able to step:
        ``(e^(lambda tau) - 1) / (lambda p)`` (``tau / p`` as lambda -> 0; inf when never up).

        Losses come at rate ``lambda`` while the group can step (exponential up-times); every
        failed try lasts on average ``1/lambda`` given that it fails short of ``tau``, minus the
        try's truncation, plus a down spell of mean ``(1 - p) / (p lambda)`` (renewal-reward:
        the group is up a fraction ``p`` of the time, up spells of mean ``1/lambda``); the
        number of failed tries is geometric of mean ``e^(lambda tau) - 1``. Exact for a group
        that needs all its workers up, exponential up-times; any down-time law."""
        lam, p, tau = self.loss_rate, self.up, self.tau
        if p <= 0.0:
            return math.inf
        if lam <= 0.0:
            return tau / p
        x = lam * tau
        if x > 700.0:
            return math.inf
        return math.expm1(x) / (lam * p)

    def tries_within(self, span: float) -> float:
        """Upper bound on the probability that the group, in ``span`` from any state, holds a
        stretch of ``tau``: every try starts an up spell, at most ``1 + lambda span`` of them in
        ``span`` on average (one, then one a loss), each lasting ``tau`` with probability
        ``e^(-lambda tau)`` (a union bound: no independence needed); 0 for a group never up."""
        lam = self.loss_rate
        if self.up <= 0.0:
            return 0.0
        if lam <= 0.0:
            return 1.0
        return (1.0 + lam * span) * math.exp(-lam * self.tau)


def failure_run_length(groups: Sequence[GroupFailures], rounds: int, stall_limit: float, *,
                       quorum: int = 1, grace: float = 0.0, copies: int = 1) -> float:
    """Upper-bound-ish expected simulated time of a DiLoCo run with failures that stops when it
    has taken ``rounds`` outer steps or when no outer step has started or ended for
    ``stall_limit`` (the stall watchdog): the length its failures' transitions are counted
    over (:func:`sim.training.outer.check_diloco`, :class:`sim.training.LearnersConfig`).

    Derivation. A round ends when ``quorum`` groups (1 synchronous) have each held a stretch of
    their ``tau`` able to step since it began (a group's try is lost with a stage; a group back
    joins the next try). Group ``g`` alone takes ``E_g`` (:meth:`GroupFailures.round_time`) on
    average; the ``K``-th of ``M`` such times is at most the sum of the largest ``M - K + 1``
    over ``M - K + 1``, so a round takes at most ``X = sum(E_g) / (M - K + 1) + grace`` on
    average (synchronous: the groups' mean time; more groups only add tries: a group waiting to
    join waits on a member's try begun before its own would). The run stops at the first round
    longer than ``stall_limit`` ``L`` (that round counts ``L``) or after ``rounds`` ``R``: its
    length is the sum over rounds ``i`` of ``P(the run reaches round i) E[min(X_i, L)]``, at
    most ``min(X, L) (1 - c^R) / (1 - c)`` with ``c`` a bound on the probability that a round
    ends within ``L`` (the sum over groups of :meth:`GroupFailures.tries_within`, at most 1):
    ``R min(X, L)`` for a run that ends (``c = 1``), about ``L`` for one that stalls at once
    (``c`` near 0), in between for one that stalls after a few rounds. Each of ``groups``
    stands for ``copies`` alike groups.
    """
    M = len(groups) * copies
    K = min(max(int(quorum), 1), M)
    times = [g.round_time() for g in groups]
    X = (copies * math.fsum(times) / (M - K + 1) + grace if all(map(math.isfinite, times))
         else math.inf)
    c = min(1.0, copies * math.fsum(g.tries_within(stall_limit) for g in groups))
    per = min(X, stall_limit)
    if c >= 1.0:
        return rounds * per
    reach = -math.expm1(rounds * math.log(c)) if c > 0.0 else 1.0  # 1 - c^R
    return per * reach / (1.0 - c)
