"""From a plan and the profiles to a :class:`~sim.training.TrainingConfig`, a memory estimate and an
account of where an iteration's time goes.

:func:`build_plan` is what ``dtsim train --plan FILE --model NAME`` runs before
any simulation. Each piece is a documented model choice; the constants come
from the profiles, the network curves, the GPU catalogue or a named framework
fact, never from the measured runs (``docs/real_runs.md`` holds the check).

Time of one iteration (what the engine runs, :mod:`sim.training.framework`);
what each transfer and collective does is the plan's framework's
(:mod:`sim.profiles.frameworks`: each value with the line of the framework's
code it was read at):

* **compute**: a replica's forward (backward) pass of one micro-batch is the
  sum of its stage's layers' profiled times on its GPU type at the plan's
  micro-batch size and its TP degree (the profile measured each layer with
  TP inside one node, so TP's own communication is in it), or where the
  profile did not measure them the rules of :mod:`sim.profiles.estimates`
  (named in :attr:`PlanBuild.estimates`); plus, with a framework that
  partitions the pipeline's tensors over the TP group (DeepSpeed's
  ``pipe_partitioned``), the all-gathers that rebuild them inside the node
  (:func:`allgather_time`);
* **point-to-point**: a stage sends the output of its last layer
  (``activation_bytes x mbs``, in the framework's activation dtype) to the
  next and gets the same size back as the gradient: ``tp`` concurrent flows of
  ``1/tp`` each when partitioned, of the whole tensor each when not
  (Megatron-LM; DeepSpeed 0.3.13's gradient, whose activation is partitioned:
  ``FrameworkBehaviour.gradient_partitioned``), timed over the pair's curve
  for that many flows (:func:`pair_time`; replicas on named hosts: :func:`physical_pair_time`),
  after the partition metadata each rank sends first where the framework does
  (DeepSpeed: :func:`partition_meta_bytes`, a message of its own with its own latency)
  and before the attention mask each rank sends after its part where the framework does
  (DeepSpeed 0.3.13 with ``GPT2ModelPipe``: :func:`mask_message_bytes`, likewise its own);
  blocking or overlapped as the framework (or ``p2p``) says;
* **gradient all-reduce** of each stage among its ``dp`` replicas, after the
  last backward (or overlapped with it, as the framework says): the gradients
  of a GPU (``params x`` the framework's all-reduce bytes per value) in the
  framework's buckets, each a ring all-reduce of NCCL (``2 (n - 1)`` steps of
  ``bucket / n`` bytes per GPU, the ``tp`` GPUs of a node at once; a step
  takes the slowest link of the ring); the stages' rings run at once; a stage
  whose replicas differ in TP degree (the Sailor artifact runs one) reduces the
  artifact's data-parallel groups in rounds of rings
  (:func:`sim.training.config.dp_group_rounds`);
* **tied weights**: with tied embeddings and more than one stage, the first
  and last stage all-reduce the gradient of the shared word embedding
  (DeepSpeed's ``ReduceTiedGrads`` of Megatron-DeepSpeed's
  ``word_embeddings_weight``: :meth:`ModelProfile.tied_parameters`) before that
  (Megatron-LM: after);
* **optimizer step**: the sum of the stage's layers' optimizer shares (the
  slowest replica of each stage); a stage's all-reduce and optimizer step
  run one after the other, the stages in parallel;
* **placement**: every stage's collectives after every device's program (the
  Sailor artifact's barrier) or each stage's after its own devices' programs
  (upstream DeepSpeed, Megatron-LM; the optimizer steps after every stage's
  reduction where the framework all-reduces a gradient norm over the
  pipeline): ``TrainingConfig.allreduce_barrier``, ``tied_first``,
  ``optimizer_barrier``, the framework's.

Memory of one GPU (stage ``j``, replica on a GPU type with TP ``t``), every term
per GPU of the TP group:

* weights and gradients, ``params x bytes_per_value`` each (the profiled runs
  trained in fp32: 4 bytes); the gradients in the framework's all-reduce dtype where it
  keeps them in a wider buffer (Megatron-LM's fp32 ``main_grad`` under bf16:
  :attr:`FrameworkBehaviour.grad_bytes`);
* optimizer state, ``params x optimizer_bytes_per_param`` (Adam's two moments,
  8 bytes in fp32; mixed-precision Adam adds fp32 master weights: 12, the
  ZeRO paper's 16 bytes per parameter with the fp16 weight and gradient;
  Rajbhandari et al., SC 2020, section 3.1);
* activations held by the schedule: ``n_j x mbs x`` the stage's layers'
  ``activation_memory_bytes``, ``n_j`` the micro-batches in flight (1F1B:
  ``min(L - j, m)``, GPipe: ``m``; Narayanan et al., ICML 2021), plus
  the received inputs: upstream DeepSpeed 0.9.0 to 0.16.5's as its code
  allocates them (:func:`recv_memory`), else ``max(2, min(L - j, m))``
  buffers of the previous stage's output (DeepSpeed's ``num_pipe_buffers``;
  0.3.13's ``max(2, min(L - j + 1, m))``); with DeepSpeed 0.3.13 and Megatron-LM
  v1.1.5's ``GPT2ModelPipe`` the ``seq x seq`` attention masks those buffers
  and the forward passes keep (:func:`mask_memory`);
* with bf16 under DeepSpeed 0.9.0 to 0.16.5, its BF16_Optimizer's instead of the three
  terms above (:func:`bf16_optimizer_memory`): the flat bf16 weights, the bf16 gradients and
  the fp32 flat gradients whole, and the fp32 master weights and optimizer state of the
  rank's ``1/dp`` partition; and its all-gather of the updated bf16 weights over the
  data-parallel group after each optimizer step, in the step's time
  (:func:`bf16_allgather_times`);
* or, when larger, DeepSpeed's flattened all-reduce bucket (a copy of at most
  ``5e8`` gradient elements, live after the last backward freed the
  activations);
* the framework's overhead on that GPU type (the catalogue's, with its source).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ConfigError, check, format_bytes
from ..training import TrainingConfig
from ..training.config import dp_group_rounds, pipe_group_chains
from .estimates import Estimator
from .frameworks import (
    META_VALUE_BYTES,
    META_VALUES,
    P2P_MODES,
    FrameworkBehaviour,
    FrameworkSpec,
    attention_path,
    check_mask_sized,
    resolve,
)
from .values import GPUCatalogue, ModelProfile, NetworkProfile, Plan, Profiles

__all__ = ["BUCKET_ELEMENTS", "PLAN_SCHEDULES", "GPUMemory", "PlanBuild", "build_plan", "plan_memory",
           "in_flight", "mask_memory", "plan_allreduce_time", "pair_link", "pair_time", "plan_network",
           "explain_rows", "plan_behaviour", "step_collectives", "small_allreduce_time", "SCALAR_BYTES",
           "LOSS_BROADCAST_BYTES", "recv_memory", "p2p_flows", "check_buckets", "tied_bytes", "allgather_time", "host_of",
           "node_links", "intra_bandwidth", "intra_capacity", "physical_pair_time",
           "physical_network", "bf16_allgather_times", "param_allgather_times", "bf16_optimizer_memory", "bf16_state_bytes",
           "bf16_flat_elements", "partition_meta_bytes", "mask_message_bytes",
           "eager_copy_memory", "EAGER_COPY_BYTES_PER_PARAM", "DIST_PAD_VALUES",
           "dist_optimizer_buckets", "dist_shard_elements", "dist_first_bucket"]

#: The schedules of a plan over its network (``dtsim train --plan``, ``dtsim plan``): the
#: fixed device programs the DES runs there (``TrainingConfig`` refuses another).
PLAN_SCHEDULES = ("1f1b", "gpipe")

#: DeepSpeed's gradient all-reduce bucket (``MEMORY_OPT_ALLREDUCE_SIZE``), in elements.
BUCKET_ELEMENTS = 500_000_000


@dataclass(frozen=True)
class GPUMemory:
    """The memory of one GPU of one replica, by term (bytes)."""

    stage: int
    replica: int
    gpu: str
    tp: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float
    allreduce_bucket: float
    overhead: float
    capacity: float
    #: Megatron-LM's fp32 copy of 16-bit gradients, held from the optimizer step (after the
    #: backward passes freed the activations) to the next step's zero_grad
    #: (:attr:`FrameworkBehaviour.grad_copy_bytes`); 0: none
    grad_copy: float = 0.0

    @property
    def total(self) -> float:
        after = self.allreduce_bucket if self.grad_copy <= self.allreduce_bucket \
            else self.grad_copy
        return (self.weights + self.gradients + self.optimizer
                + max(self.activations + self.buffers, after) + self.overhead)


@dataclass(frozen=True)
class PlanBuild:
    """A plan made ready to simulate: the config, the memory per GPU and the iteration's pieces."""

    config: TrainingConfig
    memory: tuple[GPUMemory, ...]
    stage_times: tuple[tuple[tuple[float, float, float], ...], ...]  # [j][i] (fwd, bwd, opt) per mb
    transfer_times: tuple[tuple[tuple[float, float], ...], ...]
    allreduce_times: tuple[float, ...]
    optimizer_times: tuple[float, ...]
    tied_allreduce_time: float
    behaviour: FrameworkBehaviour | None = None
    #: per pipeline: its tied all-reduce (() untied or one stage); ``tied_allreduce_time`` is
    #: their largest (without a barrier each pipeline's counts: ``staged_step_end``)
    tied_allreduce_times: tuple[float, ...] = ()
    gather_times: tuple[tuple[tuple[float, float], ...], ...] = ()  # [j][i] in (fwd, bwd) above
    estimates: tuple[str, ...] = ()  # what the profile did not measure, and the rule used
    #: the all-reduce overlapped with the backward pass: per stage, each bucket's (bytes per GPU,
    #: ring time alone) in the order the backward pass produces them (() when not overlapped)
    bucket_times: tuple[tuple[tuple[float, float], ...], ...] = ()
    #: the step's one-value collectives, each included in ``optimizer_times``: the optimizer's
    #: all-reduces over the model-parallel group (every stage's; :func:`step_collectives`) and
    #: the loss's all-reduce and broadcast after the schedule (the last stage's)
    optimizer_collective_time: float = 0.0
    loss_time: float = 0.0
    #: per stage, DeepSpeed's BF16_Optimizer all-gather of the updated bf16 weights, included
    #: in ``optimizer_times`` (() without it: :func:`bf16_allgather_times`)
    bf16_allgather_times: tuple[float, ...] = ()
    #: per stage, Megatron-LM's distributed optimizer's all-gather of the updated parameters,
    #: included in ``optimizer_times`` (() without it: :func:`param_allgather_times`)
    param_allgather_times: tuple[float, ...] = ()
    #: with DiLoCo groups (``sync`` diloco, two groups or more): each group's own build, of the
    #: plan cut to its replicas (:func:`group_plan`); ``memory`` is then theirs, and
    #: ``config.group_steps`` their step fields
    groups: tuple[PlanBuild, ...] = ()

    @property
    def peak_memory(self) -> float:
        """The largest memory of any GPU (bytes)."""
        return max(m.total for m in self.memory)


def in_flight(schedule: str, stages: int, stage: int, microbatches: int) -> int:
    """Micro-batches whose activations stage ``stage`` holds at once under ``schedule``."""
    if schedule == "gpipe":
        return microbatches
    return min(stages - stage, microbatches)


def mask_memory(sequence: int | None, stage: int, stages: int, microbatches: int, tp: int,
                pipe_buffers: int, schedule: str = "1f1b") -> float:
    """Bytes of attention masks stage ``stage`` holds under DeepSpeed 0.3.13 with Megatron-LM
    v1.1.5's ``GPT2ModelPipe`` (``sequence`` its ``seq``; None: no mask, 0 bytes).

    Every micro-batch's input carries a ``1 x 1 x seq x seq`` boolean mask, one
    byte an element (DachengLi1/AMP ``Megatron-LM-v1.1.5-3D_parallelism/megatron/
    utils.py:156-161, 199``; ``pretrain_gpt2.py:102-112`` with ``megatron/fp16/fp16.py:44-53``,
    which casts float tensors only, keeps it bool), and at
    tag v0.3.13 ``runtime/pipe/engine.py``:

    * each of the stage's ``max(2, min(L - j + pipe_buffers, m))`` input buffers
      (``schedule.py:243-247``) keeps one: stage 0 its loaded batch's
      (625-638; stage 0 sends no gradient, so nothing frees them), a later stage
      the received one cast back to bool (886-891, kept at 898, freed by the
      gradient's send, 853);
    * each forward pass clones its inputs (488) and the clone travels through the
      layers (``transformer.py:505-513``) into the output buffer (523, freed by the
      backward pass, 605; at the last stage Megatron-LM's masked ``masked_fill_``,
      ``gpt2_model.py:40-42``, run by ``fused_softmax.py:121`` without the
      off-by-default softmax fusions, ``arguments.py:516-522``, keeps it for the backward pass): ``n_j`` more,
      the micro-batches in flight, except at a stage after the first with TP > 1,
      whose buffer takes the clone in place of the received mask (499, 504);
    * a stage after the first receives every mask into its one receive buffer, in
      fp16 (``_recv_tensor_meta`` once, 866; ``p2p.recv`` into it, 886): ``2 seq^2``.

    The fp16 copy a sender makes to send it (781) lives only during the send."""
    if not sequence:
        return 0.0
    j, L, m = stage, stages, microbatches
    held = max(2, min(L - j + pipe_buffers, m))
    if not (j > 0 and tp > 1):
        held += in_flight(schedule, L, j, m)
    return float(sequence) * sequence * (held + (2 if j > 0 else 0))


def recv_memory(received: float, n: int, tp: int, partitioned: bool, in_activations: bool
                ) -> float:
    """Bytes upstream DeepSpeed (0.9.0 to 0.16.5) holds for what a stage after the first
    receives, ``received`` the bytes of one micro-batch's whole input and ``n`` the
    micro-batches in flight (:data:`~sim.profiles.frameworks.DEEPSPEED_TAGS`' ``recv_inputs``
    cites each line, per tag; 0.16.5's ``runtime/pipe/engine.py``):

    * one receive buffer, allocated once and kept across steps (1119): the whole input, or
      with TP > 1 partitioned (``partitioned``) the local ``1/t`` part;
    * each micro-batch in flight keeps one whole input in its slot (1149, freed when its
      gradient is sent, 1106): the clone taken out of the buffer (1123) or, partitioned, the
      input rebuilt from the part (726-732), which is the first layer's input;
    * unpartitioned, the forward pass's clone of it (716), the first layer's input, kept by
      the layer for the backward pass: one more per micro-batch in flight.

    A profiled layer's activation memory is what its forward pass allocates, not its input;
    a shape-estimated one (Korthikanti et al. 2022, eq. 2: ``s h (10 + 24 / t + ...)``)
    includes the first LayerNorm's input, ``2 s h`` bytes a sample in fp16, the whole input:
    with ``in_activations`` that one is not counted again (the rebuilt input partitioned,
    the forward pass's clone unpartitioned)."""
    if partitioned and tp > 1:
        return received / tp + (0 if in_activations else n) * received
    return received + (n if in_activations else 2 * n) * received


def plan_allreduce_time(network: NetworkProfile, nodes: list[Any], flows: list[int], size: float,
                        bucket: float = BUCKET_ELEMENTS * 4.0, profiles: Profiles | None = None,
                        shared: dict[tuple[str, str], tuple[int, int, int]] | None = None
                        ) -> float:
    """A bucketed ring all-reduce of ``size`` bytes per GPU among ``nodes`` (``flows`` GPUs each).

    ``nodes`` are ``(ReplicaSpec, (stage, index))`` in ring order. Buckets of
    at most ``bucket`` bytes (DeepSpeed's :data:`BUCKET_ELEMENTS` values of 4
    bytes by default; ``inf``: one) run one after the other; each is
    ``2 (n - 1)`` steps in which every GPU sends ``bucket / n`` bytes to the
    next node of the ring, the step taking the slowest link's time (each
    pair's link: :func:`pair_link`): the ring law
    :func:`sim.analytic.network.ring_steps_time`. ``shared`` (physical
    nodes): the flows that cross each NIC and node pair at once, from the
    rings that run beside this one (:func:`nic_shares`; each step of a ring
    between two nodes is timed with those counts, :func:`physical_pair_time`);
    None: this ring alone.
    """
    from ..analytic.network import ring_steps_time

    n = len(nodes)
    return ring_steps_time(n, size, float(bucket), lambda chunk: max(
        pair_time(network, nodes[k], nodes[(k + 1) % n], chunk, flows[k], profiles,
                  shares_of(shared, nodes[k], nodes[(k + 1) % n]))
        for k in range(n)))


#: Bytes of each of the step's one-value collectives: one fp32 value (the gradient norm, the
#: update flag; DeepSpeed's overflow flag is one byte, 3 bytes less on a latency-bound message)
SCALAR_BYTES = 4.0
#: Bytes DeepSpeed's pipeline engine broadcasts from the last stage: the loss and its average
#: over the data-parallel group, ``torch.Tensor([dp_group_loss, agg_loss])``, two fp32 values
LOSS_BROADCAST_BYTES = 8.0


def small_allreduce_time(network: NetworkProfile, nodes: list[Any], size: float,
                         profiles: Profiles | None = None, *, data_parallel: bool = False
                         ) -> float:
    """An all-reduce of a few bytes (``size`` per GPU) among ``nodes`` as NCCL runs it.

    ``nodes`` are ``(ReplicaSpec, (stage, index))`` in rank order, ``t`` GPUs each (its TP
    degree). NCCL counts a communicator's nodes as its distinct hosts, numbered by their
    lowest rank, and chains the ranks of one host inside it (v2.21.5-1 ``src/init.cc``
    1110-1148: a node per first rank of the rings' intra-node chains; ``src/graph/connect.cc``
    43-59: each rank's ring and tree neighbours inside its node the previous and next of its
    chain, the chain's first rank the one that crosses to other nodes): a replica without a host, or alone
    on its host, is a node of its own; replicas on one named host are one node. NCCL's tuner
    picks the algorithm from its own latency constants for the group's ``R`` ranks (sum of
    ``t``) on ``N`` nodes (:func:`~sim.analytic.network.nccl_small_allreduce_algorithm`).

    With every replica a node of its own: the ring is :func:`plan_allreduce_time` (``2 (n -
    1)`` steps, ``t`` flows of ``size / n``); the tree
    (:func:`~sim.analytic.network.nccl_tree_parents`, over the nodes in rank order) a reduce
    up to the root and a broadcast back down, each hop one message of ``size`` bytes between
    a node and its parent; a node sends up once its children have, so the reduce is the
    slowest leaf-to-root path of up-links and the broadcast the slowest root-to-leaf path of
    down-links (``pair_time``, latency included). A replica's own TP ranks, a chain inside
    its node, are not timed (no link of the plan joins them). With replicas sharing a host
    (:func:`_shared_host_allreduce_time`) the ring runs node by node with the chain inside
    each, the tree over the ``N`` nodes with each node's chain below its first replica.

    The communicator is the model-parallel group, all ``t`` ranks of each node, or with
    ``data_parallel`` a data-parallel group: one TP rank of each node (DeepSpeed's
    ``get_data_parallel_group``, ranks differing in the data axis alone,
    ``runtime/pipe/topology.py`` ``get_axis_comm_lists('data')``): the tuner sees one rank a
    replica, and a tree hop carries the replica's ``t`` groups' messages at once.
    """
    from ..analytic.network import nccl_small_allreduce_algorithm, nccl_tree_parents

    n = len(nodes)
    if n <= 1 or size <= 0:
        return 0.0
    groups: dict[str, list[int]] = {}  # each physical node's replicas in rank order
    for k, x in enumerate(nodes):
        groups.setdefault(host_of(*x), []).append(k)
    ranks = n if data_parallel else sum(x[0].tp for x in nodes)
    algorithm = nccl_small_allreduce_algorithm(len(groups), ranks)
    if len(groups) < n:
        return _shared_host_allreduce_time(network, nodes, list(groups.values()), size,
                                           algorithm, profiles, data_parallel)
    if algorithm == "ring":
        return plan_allreduce_time(network, nodes, [x[0].tp for x in nodes], size, math.inf,
                                   profiles)
    parents = nccl_tree_parents(n)
    up, down = [0.0] * n, [0.0] * n  # each node's path to the root, up and down
    for k in range(1, n):  # walk each node's path to the root
        chain = []
        x = k
        while x > 0:
            chain.append(x)
            x = parents[x]
        u = d = 0.0
        for x in reversed(chain):
            hop = nodes[x][0].tp if data_parallel else 1  # messages a hop carries at once
            u += pair_time(network, nodes[x], nodes[parents[x]], size, hop, profiles)
            d += pair_time(network, nodes[parents[x]], nodes[x], size, hop, profiles)
        up[k], down[k] = u, d
    return max(up) + max(down)


def _shared_host_allreduce_time(network: NetworkProfile, nodes: list[Any],
                                groups: list[list[int]], size: float, algorithm: str,
                                profiles: Profiles | None, data_parallel: bool = False
                                ) -> float:
    """:func:`small_allreduce_time` where replicas share a host: ``groups`` the ``N`` nodes'
    replicas (indices into ``nodes``) in rank order, the nodes by their first replica.

    Ring (NCCL's: node by node, each node's chain inside it, the last replica of a node
    sending to the first of the next: ``connect.cc`` 43-49, 91-107): of its ``2 (R - 1)``
    steps over ``R`` replicas, ``2 N`` cross between nodes and the others stay inside one
    (none cross on one node), as the tuner counts them (``tuning.cc`` 158-162, 248); each
    step of ``t`` flows of ``size / R`` takes the slowest link of its kind.

    Tree (``connect.cc`` 50-59, 134-160: the binary tree over the nodes joins their first
    replicas, each node's other replicas a chain below its first, one message a hop): the
    reduce is the slowest path from a replica up its node's chain and then up the tree of
    first replicas to the root, the broadcast the slowest path back down; a node's whole
    chain is its longest path to its first replica. (NCCL may attach a child node one place
    down its parent's chain, ``pattern`` BALANCED or SPLIT tree, and orders a node's chain
    by its topology search, which a plan does not know: rank order here; its tuner counts ``R / N - 1`` intra-node hops and ``log2i N``
    network ones each way, ``tuning.cc`` 250-252, as here.)
    """
    from ..analytic.network import nccl_tree_parents

    N, R = len(groups), len(nodes)
    if algorithm == "ring":
        order = [k for g in groups for k in g]
        inter = intra = 0.0
        for a, b in zip(order, order[1:] + order[:1], strict=True):
            t = pair_time(network, nodes[a], nodes[b], size / R, nodes[a][0].tp, profiles)
            if host_of(*nodes[a]) == host_of(*nodes[b]):
                intra = max(intra, t)
            else:
                inter = max(inter, t)
        crossing = 2 * N if N > 1 else 0
        return (2 * (R - 1) - crossing) * intra + crossing * inter

    def hop(k: int) -> int:  # messages a hop from replica k carries at once
        return nodes[k][0].tp if data_parallel else 1

    chain_up = [sum(pair_time(network, nodes[g[k]], nodes[g[k - 1]], size, hop(g[k]), profiles)
                    for k in range(len(g) - 1, 0, -1)) for g in groups]
    chain_down = [sum(pair_time(network, nodes[g[k - 1]], nodes[g[k]], size, hop(g[k]),
                                profiles) for k in range(1, len(g))) for g in groups]
    parents = nccl_tree_parents(N)
    head = [nodes[g[0]] for g in groups]
    up, down = chain_up[:], chain_down[:]
    for k in range(1, N):
        u = d = 0.0
        x = k
        while x > 0:
            u += pair_time(network, head[x], head[parents[x]], size, hop(groups[x][0]), profiles)
            d += pair_time(network, head[parents[x]], head[x], size, hop(groups[x][0]), profiles)
            x = parents[x]
        up[k] += u
        down[k] += d
    return max(up) + max(down)


def step_collectives(plan: Plan, network: NetworkProfile, fb: FrameworkBehaviour,
                     profiles: Profiles | None = None) -> tuple[float, float]:
    """The step's small blocking collectives: ``(optimizer, loss)`` seconds.

    ``optimizer``: ``fb.optimizer_allreduces`` one-value all-reduces over each pipeline's
    model-parallel group (every stage and TP rank of one data-parallel index: the overflow
    flag, the gradient norm, Megatron-LM's update flag and norm statistics), one after the
    other once every stage has reduced its gradients, each over the pipeline's stage
    replicas (``t`` ranks each) as NCCL runs it (:func:`small_allreduce_time`: its tree from
    3 nodes, or 2 with TP > 1, ``2 x depth`` hops; else its ring, ``2 (L - 1)`` steps, each
    the ring's slowest link, latency included; stages on one physical node are one node,
    chained inside it); the largest over the pipelines. A one-stage
    plan's group is its TP group inside one node: 0. With Megatron-LM's distributed optimizer
    ``fb.world_allreduces`` of them (the gradient norm, fp16's found_inf) run over the whole
    world instead (``get_grad_stats_parallel_group``), every stage's replicas in rank order
    (stage by stage, ``tp-cp-ep-dp-pp``), by the same rule.

    ``loss`` (DeepSpeed's ``_aggregate_total_loss``, ``fb.step_join == "last-stage"``): the
    last stages all-reduce the loss (one value) over their data-parallel group, then each
    broadcasts ``[loss, mean]`` over its pipeline; NCCL's ring from the root (a broadcast has
    no tree: v2.21.5-1 ``src/graph/tuning.cc:166``), the last stage,
    reaches stage 0 first, over the link back to it, and stage 0's next step waits for it
    (the other stages wait for stage 0's activations anyway): the data-parallel all-reduce
    over the last stage's replicas, one rank of each (:func:`small_allreduce_time` with
    ``data_parallel``: with TP ``t`` NCCL's tuner sees ``r`` nodes of one rank, the ring on 2
    or 4 of them, and the replica's ``t`` groups reduce at once) plus that one link, the
    largest over the pipelines.
    """
    L, r = len(plan.stages), plan.dp[0]
    opt = loss = 0.0
    world = min(fb.world_allreduces, fb.optimizer_allreduces)
    if fb.optimizer_allreduces - world and L > 1:
        opt = (fb.optimizer_allreduces - world) * max(
            small_allreduce_time(network, [(plan.stages[j].replicas[i], (j, i)) for j in range(L)],
                                 SCALAR_BYTES, profiles) for i in range(r))
    if world:  # Megatron-LM's distributed optimizer: these over every rank, in rank order
        opt += world * small_allreduce_time(
            network, [(x, (j, i)) for j, st in enumerate(plan.stages)
                      for i, x in enumerate(st.replicas)], SCALAR_BYTES, profiles)
    if fb.step_join == "last-stage":
        last = [(x, (L - 1, i)) for i, x in enumerate(plan.stages[-1].replicas)]
        if r > 1:
            loss += small_allreduce_time(network, last, SCALAR_BYTES, profiles,
                                         data_parallel=True)
        if L > 1:
            loss += max(pair_time(network, x, (plan.stages[0].replicas[i], (0, i)),
                                  LOSS_BROADCAST_BYTES, x[0].tp, profiles)
                        for i, x in enumerate(last))
    return opt, loss


def concurrent_allreduce_times(network: NetworkProfile, rings: Sequence[list[Any]],
                               sizes: Sequence[float], bucket: float, profiles: Profiles
                               ) -> list[float]:
    """Ring all-reduces that start at once on physical nodes: when each ends.

    ``rings[k]`` are ``(ReplicaSpec, (stage, index))`` in ring order (each
    replica's TP degree its flows), ``sizes[k]`` its bytes per GPU. While a set
    of rings runs, every step of each is timed with the flows of all of them
    that cross the same NIC direction and node pair (:func:`nic_shares` of
    their edges, :func:`plan_allreduce_time`): ring ``k`` alone among them
    would take ``T_k``. The rings advance in phases: each runs at ``1 / T_k``
    of its work per second until the first of them ends, then the others go
    on with the counts of those left (a ring's work done is taken in
    proportion to its time: exact where its steps' times all scale alike, as
    on curves without latency at one chunk size). A ring inside one node
    shares nothing and takes its own time.
    """
    ends = [0.0] * len(rings)
    left: dict[int, float] = {}
    for k, ring in enumerate(rings):
        if len(ring) < 2 or sizes[k] <= 0:
            continue
        if len({host_of(*x) for x in ring}) == 1:
            ends[k] = plan_allreduce_time(network, ring, [x[0].tp for x in ring], sizes[k],
                                          bucket, profiles)
        else:
            left[k] = 1.0
    now = 0.0
    while left:
        shared = nic_shares((host_of(*rings[k][i]), host_of(*rings[k][(i + 1) % len(rings[k])]),
                             rings[k][i][0].tp) for k in left for i in range(len(rings[k])))
        alone = {k: plan_allreduce_time(network, rings[k], [x[0].tp for x in rings[k]],
                                        sizes[k], bucket, profiles, shared) for k in left}
        first = min(left, key=lambda k: left[k] * alone[k])
        step = left[first] * alone[first]
        now += step
        for k in list(left):
            left[k] -= step / alone[k]
            if k == first or left[k] <= 1e-12:
                ends[k] = now
                del left[k]
    return ends


def nic_shares(edges: Any) -> dict[tuple[str, str], tuple[int, int, int]]:
    """The flows that cross each NIC and node pair at once, for transfers between nodes.

    ``edges`` are ``(host_a, host_b, flows)``: transfers running at the same
    moment (one step of rings that run at once; the point-to-point transfers
    are counted by :func:`p2p_shares`), each of ``flows`` flows from physical node ``host_a`` to
    ``host_b``. Returns per ordered pair of different hosts ``(a, b)`` the
    counts ``(out, pair, into)``: the flows leaving ``a`` for any other node
    (its NIC's sending direction), those from ``a`` to ``b`` (the pair link's
    ``a -> b`` direction) and those entering ``b`` from any other node (its
    NIC's receiving direction; the NICs and pair links are full duplex,
    :func:`physical_network`). Transfers inside a node cross only their own
    replicas' links to the node's intra-node vertex and count nowhere.
    """
    out: dict[str, int] = {}
    into: dict[str, int] = {}
    pair: dict[tuple[str, str], int] = {}
    for a, b, f in edges:
        if a == b:
            continue
        out[a] = out.get(a, 0) + f
        into[b] = into.get(b, 0) + f
        pair[(a, b)] = pair.get((a, b), 0) + f
    return {(a, b): (out[a], f, into[b]) for (a, b), f in pair.items()}


def p2p_shares(plan: Plan, p2p: str, pipe_groups: bool = False) -> list[list[tuple[Any, Any]]]:
    """The flows that may cross each NIC direction and node pair at once with each point-to-point
    transfer of ``plan`` on physical nodes, over every hop of every pipeline (a transfer's own
    flows: :func:`hop_flows`, ``pipe_groups`` the Sailor artifact's).

    Returns per hop ``j`` and pipeline ``i`` the counts ``(out, pair, into)`` of
    :func:`nic_shares` for its activation (stage ``j`` to ``j + 1``) and its
    gradient (back), None for a transfer inside one node. A transfer of
    pipeline ``i`` over hop ``h`` crossing a NIC direction (or node pair
    direction) ``R`` is counted with its own flows, plus for every other
    pipeline the most flows of its transfers crossing ``R`` that can run at
    once, plus those of its own pipeline that can run beside it:

    * the pipelines are not synchronised during the pipeline phase (their
      replicas' links and kinds may differ), so any transfer of one may run
      beside any transfer of another: counted as concurrent (an upper bound
      where they do not meet, exact for alike pipelines in lockstep where
      ``R`` carries one hop's transfers in one direction only: the old count);
    * inside one pipeline, under a blocking paired send and receive
      (DeepSpeed's ``TrainSchedule``, GPipe's blocking program,
      :func:`sim.training.schedules.deepspeed_program`) a device runs one
      transfer at a time, and under Megatron-LM's batched 1F1B
      (:func:`sim.training.schedules.megatron_program`) at most one send and
      one receive, both with one neighbour; two transfers of one pipeline
      crossing one direction ``R`` and sharing a device are two sends or two
      receives of that device (hops ``h`` and ``h + 1``, e.g. a stage's
      activation forward and its gradient back leaving its node), so they
      never run at once: the pipeline's most flows on ``R`` is the heaviest
      set of its crossing transfers without two of neighbouring hops;
    * with transfers on a communication stream (``overlap``: one FIFO channel
      per pair and direction) or each on a connection of its own
      (``shared``), a device's transfers to both neighbours may run at once:
      every crossing transfer of a pipeline is counted (``shared`` can also
      run several transfers of one channel at once, which nothing counts).

    The counts are each at least the number of flows that can cross ``R`` at
    any moment of the pipeline phase, so max-min gives every flow at least the
    least capacity / count over its links and the time is an upper bound
    (:func:`physical_pair_time`).
    """
    from ..training.schedules import p2p_program

    return _p2p_shares(_hosts(plan), hop_flows(plan, pipe_groups), p2p_program(p2p)[0])


def hop_flows(plan: Plan, pipe_groups: bool = False) -> tuple[tuple[int, int], ...]:
    """Per hop, the flows its activation and its gradient move at once: the sender's TP
    degree; with the Sailor artifact's pipeline groups (``pipe_groups``), the smaller of the
    two stages' degrees (:func:`sim.training.config.pipe_group_chains`: that many chains of
    messages at once). The stages' first replicas' degrees (a stage of one degree: on
    physical nodes a stage never mixes them)."""
    tp = [st.replicas[0].tp for st in plan.stages]
    if pipe_groups:
        return tuple((min(a, b), min(a, b)) for a, b in zip(tp, tp[1:], strict=False))
    return tuple((a, b) for a, b in zip(tp, tp[1:], strict=False))


@functools.lru_cache(maxsize=4096)
def _p2p_shares(host: tuple[tuple[str, ...], ...], flows: tuple[tuple[int, int], ...],
                exclusive: bool) -> list[list[tuple[Any, Any]]]:
    """:func:`p2p_shares` of the plan's hosts (per stage, per pipeline) and each hop's flows
    (:func:`hop_flows`), worked out once per placement (the search's plans of one layout
    share it, whatever their cut); ``exclusive``: a device's two sends (or receives) never run
    at once."""
    L, r = len(host), len(host[0])
    # each crossing transfer: (hop, pipeline, kind, source host, destination host, flows)
    moves = [(j, i, k, *((host[j][i], host[j + 1][i], flows[j][0]) if k == 0
                         else (host[j + 1][i], host[j][i], flows[j][1])))
             for j in range(L - 1) for i in range(r) for k in (0, 1)]
    moves = [x for x in moves if x[3] != x[4]]
    # per direction crossed, per pipeline: the flows of its transfer over each hop (at most one
    # per hop: a hop's activation and gradient cross opposite directions)
    use: dict[tuple, dict[int, dict[int, int]]] = {}
    for j, i, _k, a, b, f in moves:
        for res in (("out", a), ("pair", a, b), ("in", b)):
            use.setdefault(res, {}).setdefault(i, {})[j] = f

    def most(hops: dict[int, int], skip: tuple[int, ...] = ()) -> int:
        """The most flows of one pipeline's transfers over ``hops`` that run at once."""
        if not exclusive:
            return sum(f for h, f in hops.items() if h not in skip)
        take = leave = 0  # heaviest set up to hop h with / without hop h (no two neighbours)
        for h in range(L - 1):
            f = hops.get(h, 0) if h not in skip else 0
            take, leave = leave + f, max(take, leave)
        return max(take, leave)

    totals = {res: {i: most(h) for i, h in per.items()} for res, per in use.items()}
    whole = {res: sum(v.values()) for res, v in totals.items()}

    def count(res: tuple, i: int, j: int, f: int) -> int:
        own = use[res][i]
        near = (j - 1, j, j + 1) if exclusive else (j,)
        return f + whole[res] - totals[res][i] + most(own, near)

    out: list[list[list[Any]]] = [[[None, None] for _ in range(r)] for _ in range(L - 1)]
    for j, i, k, a, b, f in moves:
        out[j][i][k] = (count(("out", a), i, j, f), count(("pair", a, b), i, j, f),
                        count(("in", b), i, j, f))
    return [[(x[0], x[1]) for x in row] for row in out]  # the caller only reads it


def hop_shares(plan: Plan, pipe_groups: bool = False) -> list[list[tuple[Any, Any]]]:
    """The flows crossing each NIC direction and node pair with each point-to-point transfer of
    ``plan`` on physical nodes, counting the pipelines' transfers over its own hop in its own
    direction only (:func:`nic_shares` of that hop's edges), shaped as :func:`p2p_shares`.

    Alike pipelines run in lockstep: every pipeline's transfer of one micro-batch
    over one hop runs at the same moment. Where besides no two transfers crossing one
    NIC direction or node pair direction are ever in flight at once in the
    pipeline's program (:func:`in_lockstep`), these are the flows that cross it at
    every moment, and the times are exact (:func:`physical_pair_time`).
    """
    return _hop_shares(_hosts(plan), hop_flows(plan, pipe_groups))


@functools.lru_cache(maxsize=4096)
def _hop_shares(host: tuple[tuple[str, ...], ...], flows: tuple[tuple[int, int], ...]
                ) -> list[list[tuple[Any, Any]]]:
    """:func:`hop_shares` of the plan's hosts (per stage, per pipeline) and each hop's flows
    (:func:`hop_flows`)."""
    out = []
    for j in range(len(host) - 1):
        src, dst = host[j], host[j + 1]
        fwd = nic_shares((a, b, flows[j][0]) for a, b in zip(src, dst, strict=True))
        bwd = nic_shares((b, a, flows[j][1]) for a, b in zip(src, dst, strict=True))
        out.append([(fwd.get((a, b)), bwd.get((b, a))) for a, b in zip(src, dst, strict=True)])
    return out


def _hosts(plan: Plan) -> tuple[tuple[str, ...], ...]:
    """The physical node of every replica, per stage and pipeline (:func:`host_of`)."""
    return tuple(tuple(host_of(x, (j, i)) for i, x in enumerate(st.replicas))
                 for j, st in enumerate(plan.stages))


def crossing_kinds(plan: Plan) -> tuple[frozenset[tuple[str, int]], ...]:
    """The kinds of point-to-point transfer (``("a" | "g", hop)``: an activation or gradient
    over a hop, in any pipeline) crossing one NIC direction or node pair direction of
    ``plan``'s physical nodes, for every direction that two kinds or more cross. Empty: every
    direction carries one hop's transfers one way at most, and :func:`p2p_shares` is
    :func:`hop_shares` (each transfer's other pipelines over that direction are its own
    hop's; none of its own pipeline crosses it)."""
    return _crossings(_hosts(plan))[1]


@functools.lru_cache(maxsize=4096)
def _crossings(host: tuple[tuple[str, ...], ...]
               ) -> tuple[bool, tuple[frozenset[tuple[str, int]], ...]]:
    """Whether every hop is inside one node in all pipelines or in none, and
    :func:`crossing_kinds`, of the hosts per stage and pipeline."""
    L, r = len(host), len(host[0])
    pattern = True
    cross: dict[tuple, set[tuple[str, int]]] = {}
    for j in range(L - 1):
        pattern &= len({host[j][i] == host[j + 1][i] for i in range(r)}) == 1
        for i in range(r):
            a, b = host[j][i], host[j + 1][i]
            if a != b:
                for tag, x, y in (("a", a, b), ("g", b, a)):
                    for res in (("out", x), ("pair", x, y), ("in", y)):
                        cross.setdefault(res, set()).add((tag, j))
    groups = {frozenset(v) for v in cross.values() if len(v) > 1}
    return pattern, tuple(sorted(groups, key=sorted))


@functools.lru_cache(maxsize=4096)
def _kind_ids(groups: tuple[frozenset[tuple[str, int]], ...]) -> tuple[tuple[int, ...], ...]:
    """:func:`crossing_kinds` as :func:`sim.analytic.training.transfer_spans`' kinds (``2 h``
    hop ``h``'s activation, ``2 h + 1`` its gradient)."""
    return tuple(tuple(sorted(2 * h + (tag == "g") for tag, h in g)) for g in groups)


def in_lockstep(plan: Plan, times: Sequence[Sequence[tuple]], xfer: Sequence[Sequence[tuple]],
                schedule: str, p2p: str, recv_gather: Sequence[Sequence[float]] | None = None
                ) -> bool:
    """Whether :func:`hop_shares` gives ``plan``'s point-to-point transfers exactly: alike
    pipelines in lockstep, no two of whose transfers crossing one NIC direction or node pair
    direction are in flight at once.

    ``times[j][i]`` are stage ``j``'s passes on pipeline ``i`` (forward, backward, ...),
    ``xfer[j][i]`` hop ``j``'s transfers (activation, gradient) timed with
    :func:`hop_shares`; ``recv_gather[j][i]`` (None: none) the all-gather before each gradient
    receive of DeepSpeed 0.3.13's programs (:attr:`TrainingConfig.recv_gather_times`).
    The pipelines are alike where every stage's replicas are of
    one kind (GPU, TP degree, node size, zone), every hop is inside one node in all
    pipelines or in none, and every pass and transfer takes the same time in all;
    then, under a fixed device program (schedule ``1f1b`` or ``gpipe``,
    :func:`sim.training.schedules.device_program`), every pipeline runs the same
    timeline (:func:`sim.analytic.training.program_makespan`, each transfer's start
    and end). If no two transfers whose kinds (hop and direction, in any pipeline)
    cross one NIC direction or node pair direction overlap in it (intervals of
    positive length meeting), the flows on each such direction at any moment are
    those of one transfer of every pipeline: the counts of :func:`hop_shares`.
    Every flow of it then has the same rate (the same size, links and time), so at
    each flow's least ``capacity / count`` link the flows' max-min rates are at
    least that and sum to at most its capacity: each is exactly it. The DES
    (:func:`physical_network`) runs every transfer in its time, the same timeline,
    and the closed form equals it (as long as only these transfers cross the NICs
    in the pipeline phase: no all-reduce overlapped with it, or a stage's rings
    before the other stages end theirs, which neither count has).

    Only the directions two kinds cross or more are checked (:func:`crossing_kinds`;
    on the others :func:`hop_shares` is :func:`p2p_shares`, and one kind's transfers of
    two micro-batches meet only under ``p2p`` shared, which neither counts).

    False otherwise (pipelines not alike, no fixed program, or two such transfers
    meeting): the caller then counts every transfer that may run at once
    (:func:`p2p_shares`) for the whole plan, an upper bound whatever the timeline
    (a transfer counted with :func:`hop_shares` beside others counted so could be
    met in the DES by one the closed form's timeline keeps apart).
    """
    from ..analytic.training import transfers_meet
    from ..training.schedules import device_program, p2p_program

    if schedule not in ("1f1b", "gpipe"):  # 1f1b-dynamic: no fixed program
        return False
    L = len(plan.stages)
    pattern, groups = _crossings(_hosts(plan))
    if not pattern or any(len(set(row)) > 1 for row in xfer):
        return False
    for j, st in enumerate(plan.stages):
        if len({(x.gpu, x.tp, x.gpus_per_node, x.zone) for x in st.replicas}) > 1 or \
                len(set(times[j])) > 1 or (recv_gather is not None and len(set(recv_gather[j])) > 1):
            return False
    if not groups:
        return True
    blocking, batched = p2p_program(p2p)
    recv = recv_gather is not None
    progs = [device_program(schedule, L, plan.microbatches, j, blocking=blocking,
                            batched=batched, recv_gather=recv) for j in range(L)]
    return not transfers_meet(
        progs, [row[0][0] for row in times], [row[0][1] for row in times],
        [row[0][0] for row in xfer], [row[0][1] for row in xfer], _kind_ids(groups),
        blocking=blocking, channels=p2p == "overlap",
        key=("device_program", schedule, L, plan.microbatches, blocking, batched, recv),
        gather=[row[0] for row in recv_gather] if recv_gather is not None else None)


def shares_of(shared: dict[tuple[str, str], tuple[int, int, int]] | None, a: Any, b: Any
              ) -> tuple[int, int, int] | None:
    """The counts :func:`nic_shares` gives a transfer from replica ``a`` to ``b`` (``(ReplicaSpec,
    (stage, index))``); None without ``shared`` or inside one node."""
    if not shared:
        return None
    return shared.get((host_of(*a), host_of(*b)))


def _model(plan: Plan, profiles: Profiles, model: str | None) -> ModelProfile:
    name = model if model is not None else plan.model
    if name is None:
        raise ConfigError("model", "given (--model NAME) when the plan does not name it", None)
    if model is not None and plan.model is not None and plan.model != model:
        raise ConfigError("model", f"the plan's model ({plan.model}) or unset", model)
    return profiles.model(name)


#: Megatron-LM's distributed optimizer pads the end of every bucket of its parameter and
#: gradient buffer to a multiple of ``lcm(dp, 128)`` elements, so that each bucket (and the
#: whole buffer) splits evenly over the data-parallel ranks and every bucket starts 256-byte
#: aligned: NVIDIA/Megatron-LM core_v0.9.0 ``megatron/core/distributed/
#: param_and_grad_buffer.py:383-395`` (``_pad_end_of_bucket_if_needed``, with
#: ``use_distributed_optimizer``), 425 and 557 (each bucket's end padded), 488-509 (the
#: buffer's ``numel`` the last padded end, ``param_data`` and ``grad_data`` that long); the
#: same rule at every core tag to 0.17.1 (``param_and_grad_buffer.py:852`` there) and from
#: 0.18.0 in ``megatron/core/optimizer/param_layout.py`` (d98e8a64dd: ``:29-44``,
#: ``bucket_end_divisor`` / ``pad_bucket_end``, applied by ``distrib_optimizer.py:542-549,
#: 580``); ``lcm(dp, 128, 2**16)`` only with ``--ddp-pad-buckets-for-high-nccl-busbw``
#: (refused). Each parameter's start is also padded to 64 elements (``:398-405`` at 0.9.0,
#: ``param_layout.py:24-26``): a no-op where every parameter tensor has a multiple of 64
#: elements (a transformer's, ``hidden`` and ``hidden / tp`` multiples of 64); dtsim knows a
#: stage's parameters, not its tensors, and does not model it.
DIST_PAD_VALUES = 128


def dist_first_bucket(fb: FrameworkBehaviour) -> float:
    """The elements of a bucket of the first stage's buffer under Megatron-LM's distributed
    optimizer (``inf``: one bucket): ``fb``'s bucket where its all-reduce overlaps the backward
    pass by Megatron-LM's rule (``max(4e7, 1e6 dp)`` with ``--overlap-grad-reduce``), else one
    (``bucket_size`` None: core_v0.9.0 ``distributed_data_parallel.py:56-60``); every other
    stage holds one bucket (``:69-77``, "Turn off bucketing ...")."""
    if fb.allreduce == "overlap-backward" and fb.bucket_rule == "megatron":
        return fb.bucket_elements
    return math.inf


def dist_optimizer_buckets(params: int, dp: int, bucket: float = math.inf
                           ) -> tuple[tuple[int, int], ...]:
    """Each bucket of a rank's ``params`` parameters under Megatron-LM's distributed optimizer
    over ``dp`` replicas, ``(elements, padded elements)`` in the order the backward pass fills
    them: cut every ``ceil(bucket)`` elements (a bucket closes once it holds ``bucket_size``,
    :func:`dist_first_bucket`; ``inf``: one bucket), each padded up to a multiple of
    ``lcm(dp, 128)`` (:data:`DIST_PAD_VALUES`)."""
    n = int(params)
    div = math.lcm(int(dp), DIST_PAD_VALUES)
    b = n if not math.isfinite(bucket) else min(n, math.ceil(bucket))
    out = []
    left = n
    while left > 0:
        u = min(b, left)
        out.append((u, -(-u // div) * div))
        left -= u
    return tuple(out)


def dist_shard_elements(buckets: Sequence[tuple[int, int]], dp: int, rank: int) -> int:
    """The parameters of data-parallel ``rank``'s shard (of ``dp``): in each bucket the rank
    owns ``[rank, rank + 1) x padded / dp`` (Megatron-LM's ``_build_model_gbuf_range``,
    core_v0.9.0 ``core/optimizer/distrib_optimizer.py:178-185``, d98e8a64dd ``:231-238``;
    its master weights and Adam's moments cover the parameters in that range), of which the bucket's first
    ``elements`` are parameters and the rest padding: the last ranks own less."""
    out = 0
    for u, padded in buckets:
        each = padded // dp
        out += max(0, min(each, u - rank * each))
    return out


def plan_memory(plan: Plan, model: ModelProfile, gpus: GPUCatalogue, schedule: str = "1f1b",
                sizes_at: Any = None, pipe_buffers: int = 0,
                mask_sequence: int | None = None, recv_clones: bool = False,
                partitioned: bool = True, bf16_optimizer: bool = False,
                grad_bytes: int | None = None, dist_optimizer: bool = False,
                grad_copy: float = 0.0, memory_sizes_at: Any = None,
                flat_bucket: bool = True, dist_bucket: float = math.inf
                ) -> tuple[GPUMemory, ...]:
    """The memory of every GPU of ``plan`` (one entry per replica; its TP GPUs are alike).

    ``sizes_at(tp)`` gives the layers' sizes at a TP degree (default the profile's,
    :meth:`ModelProfile.layer_sizes`; :class:`~sim.profiles.estimates.Estimator` where the
    profile has none). ``pipe_buffers``: received-input buffers beyond ``min(L - j, m)``
    (the framework's, :attr:`FrameworkBehaviour.pipe_buffers`: 1 in DeepSpeed 0.3.13).
    ``mask_sequence``: the sequence of the attention masks the buffers and forward passes
    keep (:func:`mask_memory`, counted with the buffers; None: no mask, the framework's
    :attr:`FrameworkBehaviour.sequence`). ``recv_clones``: the received inputs held as upstream
    DeepSpeed holds them (:func:`recv_memory`, with ``partitioned`` its pipe_partitioned;
    :attr:`FrameworkBehaviour.recv_clones`) in place of ``pipe_buffers``' buffers.
    ``bf16_optimizer``: DeepSpeed's BF16_Optimizer holds the weights, gradients and optimizer
    state as :func:`bf16_optimizer_memory` says (:attr:`FrameworkBehaviour.bf16_allgather`).
    ``grad_bytes``: bytes a value of the gradients (:attr:`FrameworkBehaviour.grad_bytes`,
    Megatron-LM's fp32 gradient buffer under bf16; None: the model's ``bytes_per_value``).
    ``memory_sizes_at(gpu, tp)``: the layers' sizes whose activation memory a GPU of that type
    keeps (the attention path of :func:`sim.profiles.frameworks.attention_path`; None: those of
    ``sizes_at``). ``flat_bucket``: the all-reduce copies the gradients into a flattened
    bucket of up to :data:`BUCKET_ELEMENTS` (DeepSpeed); False: it reduces them in place in
    their buffer, no copy (Megatron-LM: :attr:`FrameworkBehaviour.grads_in_buffer`).
    ``dist_optimizer``: Megatron-LM's distributed optimizer, the optimizer state (fp32 master
    weights and Adam's moments, the profile's ``optimizer_bytes_per_param``) of the rank's
    ``1/dp`` shard of the stage's parameters, ``dp`` its replicas (Megatron-LM's
    ``dist_optimizer.md`` table: fp16 ``4 + 16/d``, bf16 ``6 + 12/d``, fp32 ``8 + 8/d`` bytes
    a parameter, fp16's ``16/d`` with the gradient copy). ``grad_copy``: bytes a parameter
    (of the shard) of Megatron-LM's fp32 copy of 16-bit gradients, held after the backward
    passes (:attr:`GPUMemory.grad_copy`; :attr:`FrameworkBehaviour.grad_copy_bytes`).
    With ``dist_optimizer`` the stage's parameters lie in Megatron-LM's padded buffer
    (:func:`dist_optimizer_buckets`: one bucket a stage, the first stage's cut every
    ``dist_bucket`` elements, :func:`dist_first_bucket`): the weights and gradients are the
    padded buffer's, the optimizer state and the gradient copy replica ``i``'s shard's
    parameters (:func:`dist_shard_elements`)."""
    layer_sizes = sizes_at if sizes_at is not None else model.layer_sizes
    L = len(plan.stages)
    m = plan.microbatches
    mbs = plan.microbatch_size
    bpv = model.bytes_per_value
    out = []
    for j, st in enumerate(plan.stages):
        alike: dict[tuple, tuple] = {}  # a stage's replicas of one GPU type and TP: summed once
        # the flattened all-reduce bucket holds one data-parallel group's gradients: what a rank
        # of the stage's largest TP degree holds (the Sailor artifact's groups, engine.py:
        # 2614-2632 and 2507-2518; one TP degree: the rank's own)
        top = max(x.tp for x in st.replicas)
        group = sum(layer_sizes(top)[x].params for x in st.layers)
        for i, rep in enumerate(st.replicas):
            hit = alike.get((rep.gpu, rep.tp))
            if hit is None:
                g = gpus[rep.gpu]
                sizes = layer_sizes(rep.tp)
                P = sum(sizes[x].params for x in st.layers)
                kept = sizes if memory_sizes_at is None else memory_sizes_at(rep.gpu, rep.tp)
                act = mbs * sum(kept[x].activation_memory_bytes for x in st.layers)
                buffers = 0.0
                if j > 0:
                    prev = plan.stages[j - 1]
                    sent = sizes[prev.layers[-1]].activation_bytes
                    if recv_clones:
                        # a shape-estimated transformer layer first: its activations hold
                        # its input (the last layer's, the head's, are the logits alone)
                        first = st.layers[0]
                        estimated = model.shape_sized(rep.tp) and 0 < first <= model.layers - 2
                        buffers = recv_memory(mbs * sent, in_flight(schedule, L, j, m), rep.tp,
                                              partitioned, estimated)
                    else:  # the product in its order before recv_memory: the same bits
                        buffers = max(2, min(L - j + pipe_buffers, m)) * mbs * sent
                buffers += mask_memory(mask_sequence, j, L, m, rep.tp, pipe_buffers, schedule)
                hit = alike[(rep.gpu, rep.tp)] = (g, P, act, buffers)
            g, P, act, buffers = hit
            n = in_flight(schedule, L, j, m)
            if bf16_optimizer:
                weights, gradients, optimizer = bf16_optimizer_memory(
                    P, len(st.replicas), bpv, model.optimizer_bytes_per_param)
            else:
                weights, gradients, optimizer = (P * bpv, P * (grad_bytes or bpv),
                                                 P * model.optimizer_bytes_per_param)
            shard = float(len(st.replicas)) if dist_optimizer else 1.0
            copy = P * grad_copy / shard if grad_copy else 0.0
            if dist_optimizer:
                optimizer = P * model.optimizer_bytes_per_param / shard
                # Megatron-LM's buffer: each bucket padded to lcm(dp, 128) elements
                cut = dist_optimizer_buckets(P, len(st.replicas),
                                             dist_bucket if j == 0 else math.inf)
                padded = sum(x[1] for x in cut)
                if padded != P:  # (unpadded: the products as before, bit for bit)
                    mine = dist_shard_elements(cut, len(st.replicas), i)
                    weights = padded * bpv
                    gradients = padded * (grad_bytes or bpv)
                    optimizer = mine * model.optimizer_bytes_per_param
                    copy = mine * grad_copy if grad_copy else 0.0
            out.append(GPUMemory(
                stage=j, replica=i, gpu=rep.gpu, tp=rep.tp, weights=weights, gradients=gradients,
                optimizer=optimizer, activations=n * act,
                buffers=buffers,
                allreduce_bucket=min(group, BUCKET_ELEMENTS) * bpv if flat_bucket else 0.0,
                overhead=g.overhead(rep.tp), capacity=g.memory_bytes,
                grad_copy=copy))
    return tuple(out)


#: Bamboo's eager mode holds four fp32 tensors the size of the covered stage's parameters
#: on the GPU: the layers built for it, a parameter buffer and two optimizer-state buffers
#: (module notes of :func:`eager_copy_memory`).
EAGER_COPY_BYTES_PER_PARAM = 4 * 4.0


def eager_copy_memory(plan: Plan, sizes_at: Any, memory_sizes_at: Any = None
                      ) -> tuple[float, ...]:
    """Per GPU of ``plan`` (stage-major, as :func:`plan_memory`): the bytes Bamboo's eager
    recovery mode adds on the GPU of stage ``j``, which covers stage ``r = (j + 1) mod L``
    (uclasystem/bamboo 8080929, ``external/deepspeed/deepspeed/runtime/pipe/``).

    * The copy: ``init_redundancy`` (``engine.py:317-350``) builds stage ``r``'s layers on
      the GPU (``module.py:262-331``, ``self.to(cuda)``) and allocates a parameter buffer
      (``module.py:225-233``, ``zeros_like`` on the device) and two optimizer-state buffers
      (``runtime/engine.py:347-352``, ``exp_avg`` and ``exp_avg_sq``, ``ones_like``): four
      tensors of ``r``'s parameters, in fp32 whatever the plan's precision (built after
      ``DeepSpeedEngine.__init__`` halves the model under fp16, ``runtime/engine.py:226``
      and ``811-824``, which ``PipelineEngine.__init__`` runs first, ``pipe/engine.py:106``
      then ``183``): 16 bytes a parameter (:data:`EAGER_COPY_BYTES_PER_PARAM`).
    * The redundant forwards' activations: ``EagerRecoverySchedule`` runs ``r``'s forward of
      every micro-batch with autograd on, its output kept in ``output_r`` (``engine.py:1626-
      1647``; never run backward in normal operation) and its input a clone of stage ``j``'s
      output (``engine.py:1999-2005``), both until ``_clean_pipe_buffers`` at the end of
      ``train_batch`` (``engine.py:1417``), a buffer a micro-batch (``TrainSchedule.
      num_pipe_buffers``, ``schedule.py:299-301``, is ``PipeSchedule``'s ``micro_batches``,
      ``106-115``): the ``m`` micro-batches' activations of ``r`` (of
      one micro-batch when ``r`` is the last stage, whose output is the loss, not kept,
      ``engine.py:1646-1653``) and ``m`` received inputs (none for ``r = 0``: its input is
      the data), in the plan's memory model's terms (:func:`plan_memory`).

    One stage: nothing (dtsim gives a one-stage job no copy). TP > 1 is dtsim's extension
    (Bamboo's engine forms pipe x data topologies only, ``PipeDataParallelTopology``,
    ``runtime/pipe/topology.py:262-263``): each TP rank of the node holds its shard, the
    layers' sizes at the replica's TP degree (``sizes_at(tp)``, the split :func:`plan_memory`
    gives the plan's own stages: the parameters plan_memory counts for stage ``r`` at that
    TP, at 16 bytes each), its kept forwards' activations as the plan's activation memory
    at that TP and the received inputs whole (the activation memory of ``memory_sizes_at(gpu,
    tp)`` where given, as :func:`plan_memory`'s)."""
    L = len(plan.stages)
    m, mbs = plan.microbatches, plan.microbatch_size
    out = []
    for j, st in enumerate(plan.stages):
        r = (j + 1) % L
        for rep in st.replicas:
            if L == 1:
                out.append(0.0)
                continue
            sizes = sizes_at(rep.tp)
            layers = plan.stages[r].layers
            params = sum(sizes[x].params for x in layers)
            graphs = 1 if r == L - 1 else m
            kept = sizes if memory_sizes_at is None else memory_sizes_at(rep.gpu, rep.tp)
            act = graphs * mbs * sum(kept[x].activation_memory_bytes for x in layers)
            inputs = m * mbs * sizes[st.layers[-1]].activation_bytes if r != 0 else 0.0
            out.append(EAGER_COPY_BYTES_PER_PARAM * params + act + inputs)
    return tuple(out)


def bf16_flat_elements(params: int, dp: int) -> int:
    """The elements of DeepSpeed's BF16_Optimizer flat bf16 buffer for a rank's ``params``
    over ``dp`` replicas: padded to a multiple of ``2 dp`` (``nccl_start_alignment_factor``
    times the data-parallel size), so it splits into ``dp`` equal partitions."""
    align = 2 * dp
    return -(-int(params) // align) * align


def bf16_optimizer_memory(params: int, dp: int, profile_bytes: int, optimizer_bytes: float
                          ) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes of a rank under DeepSpeed's BF16_Optimizer.

    The weights: the flat bf16 buffer (2 bytes an element, :func:`bf16_flat_elements`);
    the gradients: the bf16 ones backward makes (2 bytes a parameter, kept: the pipeline
    engine's ``update_hp_grads(clear_lp_grads=False)``) and the fp32 flat buffer they are
    accumulated into (4 bytes an element, whole: the buffer all-reduced over the data-parallel
    group); the optimizer: this rank's ``1/dp`` partition of the flat buffer as fp32 master
    weights (4 bytes) and the base optimizer's state of it. That state is the profile's
    ``optimizer_bytes`` a parameter, less the 4 bytes of fp32 master weights it includes when
    the profile trained in 16 bits (``profile_bytes`` 2: mixed-precision Adam's 12 = master 4
    and moments 8; in fp32 the weight is the master: 8, the moments)."""
    flat = bf16_flat_elements(params, dp)
    state = bf16_state_bytes(profile_bytes, optimizer_bytes)
    return 2.0 * flat, 2.0 * params + 4.0 * flat, (flat // dp) * (4.0 + state)


def bf16_state_bytes(profile_bytes: int, optimizer_bytes: float) -> float:
    """The base optimizer's state a parameter under BF16_Optimizer (:func:`bf16_optimizer_memory`):
    the profile's ``optimizer_bytes`` less the 4 bytes of fp32 master weights they include when
    the profile trained in 16 bits (``profile_bytes`` 2), never below 0."""
    return max(optimizer_bytes - (4.0 if profile_bytes == 2 else 0.0), 0.0)


def bf16_allgather_times(plan: Plan, network: NetworkProfile, fb: FrameworkBehaviour,
                         params: Sequence[int], profiles: Profiles | None = None
                         ) -> tuple[float, ...]:
    """Per stage, DeepSpeed's BF16_Optimizer all-gather of the updated bf16 weights after its
    optimizer step (``fb.bf16_allgather``; () without it).

    Each stage's replicas all-gather the flat bf16 buffer of a rank's ``params[j]``
    (:func:`bf16_flat_elements`), every replica contributing its ``1/r``: a ring all-gather,
    ``r - 1`` steps of a partition's bytes, each step the ring's slowest link with the ``t``
    ranks of a replica at once (the ring law of :func:`plan_allreduce_time`, whose all-reduce
    of ``r`` partitions is ``2 (r - 1)`` such steps: half of it). One collective where
    DeepSpeed calls all_gather_into_tensor (``fb.bf16_allgather`` inf); before (up to 0.12.3)
    ``max(1, flat // bucket)`` shards of ``partition // shards`` elements (rounded down to
    even), the last the remainder, one after the other. On physical nodes the stages' rings run
    at once and share NICs (:func:`concurrent_allreduce_times`, halved; the shards counted as
    one there). One replica: 0."""
    if fb.bf16_allgather is None:
        return ()
    r = plan.dp[0]
    rings = [[(x, (j, i)) for i, x in enumerate(st.replicas)] for j, st in enumerate(plan.stages)]
    flats = [bf16_flat_elements(p, r) for p in params]
    if r <= 1:
        return tuple(0.0 for _ in plan.stages)
    if plan.physical:
        ends = concurrent_allreduce_times(network, rings, [2.0 * f for f in flats], math.inf,
                                          profiles)  # type: ignore[arg-type]
        return tuple(e / 2 for e in ends)
    out = []
    for ring, flat in zip(rings, flats, strict=True):
        part = flat // r
        shards = 1 if math.isinf(fb.bf16_allgather) else max(1, int(flat // fb.bf16_allgather))
        each = part // shards
        each -= each % 2
        sizes = [each] * (shards - 1) + [part - (shards - 1) * each]
        flows = [x[0].tp for x in ring]
        out.append(math.fsum(plan_allreduce_time(network, ring, flows, 2.0 * k * r, math.inf,
                                                 profiles) / 2 for k in sizes))
    return tuple(out)


def param_allgather_times(plan: Plan, network: NetworkProfile, fb: FrameworkBehaviour,
                          params: Sequence[int], profiles: Profiles | None = None
                          ) -> tuple[float, ...]:
    """Per stage, Megatron-LM's distributed optimizer's all-gather of the updated parameters
    after its optimizer step (``fb.dist_optimizer``; () without it).

    Each bucket of a rank's ``params[j]`` parameters, ``fb.param_gather_bytes`` a value, is
    all-gathered among the stage's ``r`` replicas, one bucket after the other (a synchronous
    ``start_param_sync`` a bucket group): the ring's ``r - 1`` steps of ``1/r`` of the bucket,
    half of :func:`plan_allreduce_time` of it (whose ``2 (r - 1)`` steps are the same chunks).
    The buckets are the gradients' (Megatron-LM's one buffer, cut once for both): ``fb``'s
    ``bucket_elements``, overlapped with the backward pass by its ``bucket_rule``
    (:func:`sim.training.traffic.gradient_buckets`: Megatron-LM's cut on the first stage
    only). On physical nodes the stages' rings run at once and share NICs
    (:func:`concurrent_allreduce_times` of each stage's bytes, halved; overlapped, each bucket
    with every stage's ring beside it, as :func:`overlapped_buckets`). One replica: 0."""
    if not fb.dist_optimizer:
        return ()
    r = plan.dp[0]
    if r <= 1:
        return tuple(0.0 for _ in plan.stages)
    from ..training.traffic import gradient_buckets

    pb = float(fb.param_gather_bytes)
    bucket = fb.bucket_elements * pb
    rings = [[(x, (j, i)) for i, x in enumerate(st.replicas)] for j, st in enumerate(plan.stages)]
    overlapped = fb.allreduce == "overlap-backward"
    if plan.physical and not overlapped:
        ends = concurrent_allreduce_times(network, rings, [p * pb for p in params], bucket,
                                          profiles)  # type: ignore[arg-type]
        return tuple(e / 2 for e in ends)
    # overlapped buckets on physical nodes: each with every stage's ring beside it, as
    # overlapped_buckets times the gradients' (an upper bound where they do not all overlap)
    shared = nic_shares((host_of(*ring[i]), host_of(*ring[(i + 1) % r]), ring[i][0].tp)
                        for ring in rings for i in range(r)) if plan.physical else None
    out = []
    for j, (ring, p) in enumerate(zip(rings, params, strict=True)):
        flows = [x[0].tp for x in ring]
        if not overlapped:
            out.append(plan_allreduce_time(network, ring, flows, p * pb, bucket, profiles) / 2)
            continue
        cuts = gradient_buckets(p * pb, bucket if math.isfinite(bucket) else None,
                                rule=fb.bucket_rule, first_stage=j == 0)
        out.append(math.fsum(plan_allreduce_time(network, ring, flows, b, math.inf, profiles,
                                                 shared) / 2 for b in cuts))
    return tuple(out)


def pair_link(network: NetworkProfile, a: Any, b: Any) -> Any:
    """The link from replica ``a`` to replica ``b`` (each ``(ReplicaSpec, (stage, index))``).

    The curve measured from ``a``'s node kind to ``b``'s with their TP
    degrees as flow counts (the artifact's curves are per ordered pair: e.g.
    Titan-RTX -> RTX-3090 and back differ). A pair measured in one direction
    only is taken as symmetric (the other direction's curve); a pair measured
    in neither is refused in one line naming ``network``. Flow counts measured
    in neither direction take the curve of fewer flows the network did measure,
    shared by all of them (:meth:`~sim.profiles.NetworkProfile.shared_link`,
    named by :func:`link_estimates`).
    """
    (ra, _), (rb, _) = a, b
    try:
        return network.link(ra.node, rb.node, ra.tp, rb.tp)
    except ConfigError:
        try:
            return network.link(rb.node, ra.node, rb.tp, ra.tp)
        except ConfigError:
            pass
        x = network.shared_link(ra.node, rb.node, ra.tp, rb.tp) or \
            network.shared_link(rb.node, ra.node, rb.tp, ra.tp)
        if x is not None:
            return x
        raise


def link_estimates(network: NetworkProfile, pairs: Any) -> list[str]:
    """What :func:`pair_link` estimated for the replica pairs ``pairs`` (``(a, b)`` each, as
    it takes them): a line per link whose flow counts the network did not measure."""
    out = []
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            (rx, _), (ry, _) = x, y
            link = pair_link(network, x, y)
            if (link.src_flows, link.dst_flows) in ((rx.tp, ry.tp), (ry.tp, rx.tp)):
                continue
            out.append(f"network {rx.gpu}@{rx.zone} -> {ry.gpu}@{ry.zone} with {rx.tp}/{ry.tp} "
                       f"flows (TP degrees): not measured; the {link.src_flows}/"
                       f"{link.dst_flows}-flow curve {link.src[0]}@{link.src[1]} -> "
                       f"{link.dst[0]}@{link.dst[1]} (the largest measured counts not above "
                       "them) shared max-min fair by all the flows")
    return out


def pair_time(network: NetworkProfile, a: Any, b: Any, size: float, flows: int,
              profiles: Profiles | None = None, shares: tuple[int, int, int] | None = None
              ) -> float:
    """``flows`` flows of ``size`` bytes each from ``a`` to ``b`` (see :func:`pair_link`); replicas
    placed on named hosts are timed on their physical nodes (:func:`physical_pair_time`, which
    needs ``profiles``; ``shares``: the flows crossing ``a``'s NIC, the node pair and ``b``'s
    NIC at once, :func:`nic_shares`, None: these flows alone). A time is worked out once per
    pair of replicas, size, flows and shares (kept with the profiles or the network) where it
    does not depend on where in the plan the replicas sit: both on named hosts, or both nodes
    of their own."""
    ra, rb = a[0], b[0]
    if ra.host is not None or rb.host is not None:
        check(profiles is not None, "profiles", "given to time replicas on named hosts", None)
        if ra.host is None or rb.host is None:  # host_of names the other's node by position
            return physical_pair_time(profiles, a, b, size, flows,  # type: ignore[arg-type]
                                      *(shares or ()))
        kept = profiles.__dict__.setdefault("_pair_times", {})  # type: ignore[union-attr]
    else:
        kept = network.memo
        shares = None  # nodes of their own share nothing
    key = ("pair_time", ra, rb, size, flows) if shares is None else \
        ("pair_time", ra, rb, size, flows, shares)
    t = kept.get(key)
    if t is None:
        t = kept[key] = _pair_time(network, a, b, size, flows, profiles, shares)
    return t


def _pair_time(network: NetworkProfile, a: Any, b: Any, size: float, flows: int,
               profiles: Profiles | None, shares: tuple[int, int, int] | None = None) -> float:
    """:func:`pair_time`, worked out."""
    if a[0].host is not None or b[0].host is not None:
        return physical_pair_time(profiles, a, b, size, flows,  # type: ignore[arg-type]
                                  *(shares or ()))
    x = pair_link(network, a, b)
    if size <= 0:
        return 0.0
    (ra, _), (rb, _) = a, b
    bw = x.bandwidth_at(size, f"{ra.gpu}@{ra.zone} -> {rb.gpu}@{rb.zone}")
    return x.latency + flows * size / bw


def host_of(rep: Any, where: tuple[int, int]) -> str:
    """The physical node of replica ``rep`` at ``(stage, index)``: its ``host``, else its own."""
    return rep.host if rep.host is not None else f"s{where[0]}r{where[1]}-node"


def _measured(network: NetworkProfile, src: Any, dst: Any, most: int) -> int:
    """The largest flow count measured from ``src`` to ``dst`` node kinds, at most ``most``;
    a pair measured from ``dst`` to ``src`` only has that direction's counts (it is taken as
    symmetric, as :func:`pair_link` takes its curve)."""
    s, d = (src.gpu, src.zone), (dst.gpu, dst.zone)
    counts = [k for k in network.flow_counts(s, d) or network.flow_counts(d, s) if k <= most]
    check(bool(counts), "network", "a link for every pair of node kinds the plan uses",
          f"{src.gpu}@{src.zone} -> {dst.gpu}@{dst.zone} (with at most {most} flows)")
    return max(counts)


def node_links(network: NetworkProfile, a: Any, b: Any) -> dict[str, Any]:
    """The links of a transfer between replicas ``a`` and ``b`` on different physical nodes.

    The Sailor artifact measured ``k`` concurrent GPU pairs between two nodes;
    a physical node's links are read off those curves: ``gpu`` (one GPU's own
    path, what one pair achieved between two nodes of its kind, ``B_1(a, a)``),
    ``nic`` (the node's NICs, what all its ``g`` GPUs achieved together towards
    a node of its kind, ``B_g(a, a)``; the largest count measured up to ``g``),
    and ``pair`` (the path between the two nodes, what ``min(g_a, g_b)``
    pairs achieved between them, ``B(a, b)``); ``*_back`` those of ``b``.
    """
    (ra, _), (rb, _) = a, b
    key = ("node_links", ra.gpu, ra.zone, ra.gpus_per_node, rb.gpu, rb.zone, rb.gpus_per_node)
    hit = network.memo.get(key)
    if hit is not None:
        return hit
    na, nb = ra.node, rb.node
    ga, gb = ra.gpus_per_node, rb.gpus_per_node
    k = _measured(network, na, nb, min(ga, gb))
    out = {"gpu": network.link(na, na, 1, 1), "nic": network.link(na, na, *(
        2 * (_measured(network, na, na, ga),))), "pair": pair_link(network, (ra.__class__(
            ra.gpu, k, k, ra.zone), None), (rb.__class__(rb.gpu, k, k, rb.zone), None)),
        "nic_back": network.link(nb, nb, *(2 * (_measured(network, nb, nb, gb),))),
        "gpu_back": network.link(nb, nb, 1, 1)}
    network.memo[key] = out
    return out


def intra_bandwidth(profiles: Profiles, rep: Any, flows: int, size: float) -> float:
    """Bytes per second of each of ``flows`` concurrent GPU-to-GPU flows inside ``rep``'s node
    (``2 flows`` GPUs busy: :meth:`Profiles.intra_node_bandwidth`)."""
    return profiles.intra_node_bandwidth(rep.gpu, min(2 * flows, rep.gpus_per_node), size)[0]


def physical_pair_time(profiles: Profiles, a: Any, b: Any, size: float, flows: int,
                       out_flows: int | None = None, pair_flows: int | None = None,
                       in_flows: int | None = None) -> float:
    """``flows`` flows of ``size`` bytes from replica ``a`` to ``b`` (``(ReplicaSpec, (stage,
    index))``) on physical nodes (:func:`host_of`).

    On one node: over its intra-node link, each flow at :func:`intra_bandwidth`
    (each replica has its own link to the node's intra-node vertex in
    :func:`physical_network`: nothing else shares it). On two: each flow at
    ``min(gpu_a, nic_a / F_out, pair / F_pair, nic_b / F_in, gpu_b)`` of the
    message size (:func:`node_links`), after the largest latency of the links
    crossed; ``F_out`` (``out_flows``) the flows leaving ``a``'s node for any
    other node at the same moment, ``F_pair`` (``pair_flows``) those from
    ``a``'s node to ``b``'s, ``F_in`` (``in_flows``) those entering ``b``'s
    node from any other (:func:`nic_shares`); each ``flows`` by default (these
    flows alone).

    The law of sharing: flows that cross a NIC direction or a node pair's link
    at once share it equally. Max-min fairness (the DES's,
    :func:`physical_network`) gives every flow at least the least
    ``capacity / count`` over its links, and exactly that where the flows
    alike (one hop of alike pipelines in lockstep) all have the same
    bottleneck; so the time is exact there and an upper bound otherwise (as
    long as only the counted flows run).
    """
    if size <= 0:
        return 0.0
    (ra, wa), (rb, wb) = a, b
    if host_of(ra, wa) == host_of(rb, wb):
        intra = intra_bandwidth(profiles, ra, flows, size)
        return size / intra if intra > 0 else math.inf
    fo = flows if out_flows is None else out_flows
    fp = flows if pair_flows is None else pair_flows
    fi = flows if in_flows is None else in_flows
    check(min(fo, fp, fi) >= flows, "shares", "at least the transfer's own flows",
          (fo, fp, fi))
    x = node_links(profiles.network, a, b)
    where = f"{ra.gpu}@{ra.zone} -> {rb.gpu}@{rb.zone}"
    rate = min(x["gpu"].bandwidth_at(size, where), x["nic"].bandwidth_at(size, where) / fo,
               x["pair"].bandwidth_at(size, where) / fp,
               x["nic_back"].bandwidth_at(size, where) / fi,
               x["gpu_back"].bandwidth_at(size, where))
    lat = max(v.latency for v in x.values())
    # (audit5) a share of a link of 5e-324 B/s underflows to 0: no transfer over it ends (it
    # raised ZeroDivisionError in the planner's bound); a link of 1e-300 B/s already gave inf
    return lat + size / rate if rate > 0 else math.inf


def physical_network(plan: Plan, profiles: Profiles, tied: bool) -> Any:
    """The plan's physical nodes as a :class:`sim.network.NetworkValue` (a plan with hosts).

    Per replica a host ``s{j}r{i}``; per physical node ``H`` up to three vertices:
    ``H/intra`` (its intra-node link: each replica's ``t`` GPUs reach it at
    ``t x`` :func:`intra_bandwidth`; only on a node of several replicas), and on a
    node that exchanges data with another, ``H/gpu`` (each replica's ``t`` GPUs
    reach it at ``t x`` the GPU's own curve) and ``H/nic``, joined to ``H/gpu`` by
    the node's NIC (full duplex, the node's curve) and to the NIC of every node it
    exchanges data with by the pair's curve (:func:`node_links`). A plan of one
    replica and one stage has one idle link (nothing moves). A transfer
    inside a node crosses its two replicas' intra-node links (the intra
    vertices come first, so the route of least hops takes them), one between
    nodes a GPU link, a NIC, the pair link, a NIC and a GPU link. A measured
    link's latency is its whole GPU-to-GPU path's: the pair link carries the
    largest latency of the links a transfer between the two nodes crosses
    (:func:`node_links`), the GPU links and NICs none, so a transfer pays it
    once, as in :func:`physical_pair_time`.
    """
    from ..network.curves import scale_capacity
    from ..network.topology import LinkValue, NetworkValue, NodeValue

    net = profiles.network
    L, r = len(plan.stages), plan.dp[0]
    reps = {(j, i): (plan.stages[j].replicas[i], (j, i)) for j in range(L) for i in range(r)}
    hosts = {w: host_of(rep, w) for w, (rep, _) in reps.items()}
    pairs: set[tuple] = set()
    for j in range(L):
        for i in range(r):
            if j + 1 < L:
                pairs.add(((j, i), (j + 1, i)))
            if r > 1:
                pairs.add(((j, i), (j, (i + 1) % r)))
            if tied and L > 1 and j == 0:
                pairs.add(((0, i), (L - 1, i)))
    shared = {h for h in hosts.values() if list(hosts.values()).count(h) > 1}
    # the hosts that exchange data with another host: only their GPUs' paths and NICs carry
    # flows (a node whose traffic stays inside needs no curve of the network's)
    crossing = {h for wa, wb in pairs if hosts[wa] != hosts[wb] for h in (hosts[wa], hosts[wb])}
    links: list[Any] = []
    order = [f"s{j}r{i}" for (j, i) in sorted(reps)]
    node_of: dict[str, Any] = {}
    for w in sorted(reps):
        rep, _ = reps[w]
        h = hosts[w]
        node_of.setdefault(h, rep)
        name = f"s{w[0]}r{w[1]}"
        if h in shared:
            links.append(LinkValue(name, f"{h}/intra", scale_capacity(
                intra_capacity(profiles, rep), rep.tp)))
    for w in sorted(reps):
        rep, _ = reps[w]
        h = hosts[w]
        if h not in crossing:
            continue
        links.append(LinkValue(f"s{w[0]}r{w[1]}", f"{h}/gpu",
                               scale_capacity(net.link(rep.node, rep.node, 1, 1).bandwidth,
                                              rep.tp)))
    for h, rep in node_of.items():
        if h not in crossing:
            continue
        nic = net.link(rep.node, rep.node, *(2 * (_measured(net, rep.node, rep.node,
                                                             rep.gpus_per_node),)))
        # no latency here: a measured link's latency is the whole GPU-to-GPU path's, paid once
        # on the pair link below (physical_pair_time's largest latency of the links crossed)
        links.append(LinkValue(f"{h}/gpu", f"{h}/nic", nic.bandwidth))
    seen = set()
    for wa, wb in sorted(pairs):
        ha, hb = hosts[wa], hosts[wb]
        if ha == hb or frozenset((ha, hb)) in seen:
            continue
        seen.add(frozenset((ha, hb)))
        x = node_links(net, reps[wa], reps[wb])
        y = node_links(net, reps[wb], reps[wa])
        links.append(LinkValue(f"{ha}/nic", f"{hb}/nic", x["pair"].bandwidth,
                               max(v.latency for v in (*x.values(), *y.values())),
                               reverse_bandwidth=None if y["pair"].bandwidth == x["pair"].bandwidth
                               else y["pair"].bandwidth))
    vertices = order + [f"{h}/{v}" for v in ("intra",) for h in node_of if h in shared] + \
        [f"{h}/{v}" for h in node_of if h in crossing for v in ("gpu", "nic")]
    if not links:  # one replica, one stage: nothing moves (as plan_network)
        links.append(LinkValue("s0r0", "idle", float("inf")))
        vertices.append("idle")
    return NetworkValue(tuple(links), tuple(NodeValue(v) for v in vertices))


def intra_capacity(profiles: Profiles, rep: Any) -> Any:
    """One GPU's intra-node capacity as a capacity value: the measured curve per sender (with
    ``2 t`` GPUs busy), else the catalogue's number."""
    k = min(2 * rep.tp, rep.gpus_per_node)
    kept = profiles.__dict__.setdefault("_intra_capacity", {})  # made once per (gpu, GPUs)
    hit = kept.get((rep.gpu, k))
    if hit is None:
        hit = next((c.scaled(1.0 / (k / 2)) for g, n, c in profiles.intra_node
                    if g == rep.gpu and n == k), None)
        if hit is None:
            hit = profiles.intra_node_bandwidth(rep.gpu, k, 1.0)[0]
        kept[(rep.gpu, k)] = hit
    return hit


def plan_pairs(plan: Plan, tied: bool) -> dict[tuple, tuple]:
    """The pairs of replicas that exchange data, ``{((j, i), (j', i')): (a, b)}`` with ``a``,
    ``b`` as :func:`pair_link` takes them: neighbouring stages of a pipeline, neighbours in a
    stage's all-reduce ring, the first and last stage with tied weights (``tied``)."""
    L, r = len(plan.stages), plan.dp[0]
    rep = lambda j, i: (plan.stages[j].replicas[i], (j, i))  # noqa: E731
    pairs: dict[tuple, tuple] = {}
    for j in range(L):
        for i in range(r):
            if j + 1 < L:
                pairs.setdefault(((j, i), (j + 1, i)), (rep(j, i), rep(j + 1, i)))
            if r > 1:
                a, b = sorted([(j, i), (j, (i + 1) % r)])
                pairs.setdefault((a, b), (rep(*a), rep(*b)))
            if tied and L > 1 and j == 0:
                pairs.setdefault(((0, i), (L - 1, i)), (rep(0, i), rep(L - 1, i)))
    return pairs


def plan_network(plan: Plan, network: NetworkProfile, tied: bool) -> Any:
    """The plan's hosts and links as a :class:`sim.network.NetworkValue`.

    One host per replica (``s{j}r{i}``), one link per pair of replicas that
    exchange data (neighbouring stages of a pipeline, neighbours in a stage's
    all-reduce ring, the first and last stage with tied weights), full
    duplex, each direction carrying the bandwidth measured in that direction
    (:func:`pair_link`; the ``v -> u`` one as ``reverse_bandwidth``; a
    :class:`sim.network.BandwidthCurve` as it is), and the larger of
    the two directions' latencies (the shipped curves have none). Sharing
    on a link is max-min fair, so the ``t`` flows of a TP group get
    ``B_t(S) / t`` each, as :meth:`~sim.profiles.NetworkProfile.transfer_time` says.
    """
    from ..network.topology import LinkValue, NetworkValue

    links = []
    for (a, b), (x, y) in sorted(plan_pairs(plan, tied).items()):
        fwd, back = pair_link(network, x, y), pair_link(network, y, x)
        links.append(LinkValue(f"s{a[0]}r{a[1]}", f"s{b[0]}r{b[1]}", fwd.bandwidth,
                               max(fwd.latency, back.latency),
                               reverse_bandwidth=None if back.bandwidth == fwd.bandwidth
                               else back.bandwidth))
    if not links:  # one replica, one stage: nothing moves; a link to nowhere keeps the value valid
        links.append(LinkValue("s0r0", "idle", float("inf")))
    return NetworkValue(tuple(links))


def plan_behaviour(plan: Plan, mp: ModelProfile,
                   framework: FrameworkSpec | None = None) -> FrameworkBehaviour:
    """What the plan's framework (or ``framework``, which overrides it) does with its traffic."""
    spec = framework if framework is not None else plan.framework
    return resolve(spec, mp.bytes_per_value, plan.dp[0],
                   mp.shape.sequence if mp.shape is not None else None)


def given_sync(fb: FrameworkBehaviour, sync: Any, dp: int) -> tuple[FrameworkBehaviour, str]:
    """``fb`` with a given ``--sync`` (None: the framework's own) over its all-reduce, and the
    run's :attr:`~sim.training.TrainingConfig.sync`.

    ``allreduce`` places the all-reduce after the last backward pass,
    ``overlap=backward`` bucket by bucket during it; ``bucket_size`` (bytes)
    and ``buckets`` replace the framework's. A framework that never overlaps
    its all-reduce (DeepSpeed's pipeline engine) forced to takes Megatron-LM's
    default bucket, ``max(4e7, 1e6 dp)`` elements
    (``megatron/core/distributed/distributed_data_parallel.py:133-134``).
    ``diloco`` keeps the framework's all-reduce inside each group (refused for
    one that overlaps it: DiLoCo's groups all-reduce after the backward pass,
    :func:`sim.training.outer.group_config`). ``none`` is refused: a plan's
    framework all-reduces its gradients.
    """
    if sync is None:
        return fb, fb.sync
    from ..training.sync import parse_sync

    spec = parse_sync(sync)
    if spec.kind == "diloco":
        check(fb.allreduce == "after-backward", "sync", "diloco only with a framework whose "
              "all-reduce runs after the last backward pass (DiLoCo's groups all-reduce after "
              f"it; {fb.framework.key} overlaps it here)", spec.text)
        return fb, spec.text
    check(spec.kind == "allreduce", "sync", "allreduce[:key=value,...] or diloco:... with a "
          "plan (its framework all-reduces the gradients)", spec.text)
    over = spec["overlap"] == "backward"
    was = fb.allreduce == "overlap-backward"
    elements = fb.bucket_elements
    first = fb.first_bucket
    if over and not was:
        elements = float(max(40_000_000, 1_000_000 * dp))
        first = False
    elif was and not over and fb.framework.key == "megatron":
        elements = math.inf  # distributed_data_parallel.py:135-137: one bucket without overlap
    if spec["bucket_size"] is not None:
        elements = spec["bucket_size"] / float(fb.dp_bytes)
        first = False
    src = dict(fb.sources)
    src["allreduce"] = src["bucket_elements"] = f"--sync {spec.text} (given)"
    fb = replace(fb, allreduce="overlap-backward" if over else "after-backward",
                 bucket_elements=elements, first_bucket=first and over,
                 bucket_rule=spec["buckets"] or fb.bucket_rule, sources=src)
    return fb, fb.sync


def check_buckets(fb: FrameworkBehaviour, size: float, tp: int) -> None:
    """Refuse a bucket so small that an all-reduce of ``size`` bytes per GPU over ``tp`` rings
    has more buckets than fit in memory (the DES's rule for ``bucket_size``,
    :class:`~sim.training.TrainingConfig`: ``BYTES_PER_BUCKET`` per bucket and ring), before
    any is timed (the ring law sums them one by one; ``--framework ddp:bucket_cap_mb=1e-300``
    used to run for ever). Names ``bucket_cap_mb`` (in MiB) when DDP's option set it, else
    ``bucket_size`` (bytes)."""
    from ..training.config import check_bucket_count

    bucket = fb.bucket_bytes
    if size <= 0 or not bucket < math.inf:
        return
    given = str(fb.sources.get("bucket_elements", "")).startswith("--sync")
    mib = fb.framework.key == "ddp" and not given
    check_bucket_count("bucket_cap_mb" if mib else "bucket_size", bucket / 2**20 if mib else bucket,
                       size / bucket, tp, f"{format_bytes(size)} per GPU")


def p2p_flows(fb: FrameworkBehaviour, size: float, tp: int, gradient: bool = False
              ) -> tuple[float, int]:
    """``(bytes per flow, flows)`` of one activation (``gradient``: its gradient sent back) of
    ``size`` bytes sent by a TP group of ``tp`` ranks: partitioned (DeepSpeed's activation;
    its gradient from 0.16.5 on), ``tp`` flows of ``size / tp``; else each rank sends the whole
    tensor (Megatron-LM without sequence parallelism; DeepSpeed 0.3.13's gradient,
    ``FrameworkBehaviour.gradient_partitioned``). The tensor alone: the attention mask some
    frameworks send after it is a message of its own (:func:`mask_message_bytes`)."""
    if (fb.gradient_partitioned if gradient else fb.partitioned) or tp == 1:
        return size / tp, tp
    return size, tp


def mask_message_bytes(fb: FrameworkBehaviour, gradient: bool = False) -> float:
    """Bytes of the message each TP rank sends after its part of an activation, a blocking
    send of its own, or 0: the attention mask DeepSpeed 0.3.13 sends whole from every TP rank
    with Megatron-LM v1.1.5's ``GPT2ModelPipe`` (:attr:`FrameworkBehaviour.mask_bytes`): the
    stage's output tuple is sent item by item, each a ``dist.broadcast`` over the pair's group
    (``runtime/pipe/engine.py:788-792``, ``p2p.py:31-41``), the mask last, at any TP degree
    (TP 1 sends ``(hidden, mask)``, TP > 1 ``(metadata, part, mask)``, ``520``); the gradient
    never carries it (``822-830``).

    Raises
    ------
    ConfigError
        The framework sends a mask but no sequence length sized it.
    """
    return 0.0 if gradient else check_mask_sized(fb)


def partition_meta_bytes(fb: FrameworkBehaviour, tp: int, gradient: bool = False) -> float:
    """Bytes of the message each of a TP group's ``tp`` ranks sends before its part of an
    activation (``gradient``: of its gradient), a blocking send of its own, or 0: DeepSpeed's
    partition metadata (``PartitionedTensor.to_meta``, :data:`~sim.profiles.frameworks.META_VALUES`
    int64 values and the TP degree), with every tensor it partitions (upstream: TP > 1 and
    ``pipe_partitioned`` or ``grad_partitioned``; 0.3.13 never the gradient) or, in the Sailor
    artifact's engine, with every activation and gradient at any TP degree
    (``FrameworkBehaviour.partition_meta``)."""
    rule = fb.partition_meta
    if rule is None:
        return 0.0
    if rule == "partitioned" and not (
            tp > 1 and (fb.gradient_partitioned if gradient else fb.partitioned)):
        return 0.0
    return float(META_VALUE_BYTES * (META_VALUES + tp))


def tied_bytes(mp: ModelProfile, fb: FrameworkBehaviour, tp: int) -> float:
    """Bytes per GPU of the tied embedding's gradient all-reduce (0 untied); at a TP degree the
    profile has no sizes for, its TP-1 tied weight split over ``tp`` GPUs."""
    if any(t == tp for t, _ in mp.sizes) or mp.shape is not None or tp == 1:
        return mp.tied_parameters(tp) * float(fb.tied_bytes)
    return mp.tied_parameters(1) // tp * float(fb.tied_bytes)


def allgather_time(profiles: Profiles, gpu: str, tp: int, size: float) -> float:
    """A ring all-gather of a ``size``-byte tensor over ``tp`` GPUs of one node: ``tp - 1`` steps
    in which every GPU sends ``size / tp`` bytes to the next at the intra-node bandwidth
    (:meth:`~sim.profiles.Profiles.intra_node_bandwidth`; Patarasuk and Yuan 2009)."""
    if tp <= 1 or size <= 0:
        return 0.0
    part = size / tp
    bw, _ = profiles.intra_node_bandwidth(gpu, tp, part)
    return (tp - 1) * part / bw


def group_plan(plan: Plan, groups: int, g: int) -> Plan:
    """DiLoCo group ``g`` of ``groups`` as a plan of its own: replicas ``g k .. (g + 1) k - 1``
    of every stage (``k = dp / groups``, the pipelines of
    :func:`sim.training.outer.group_config`) and the global batch's ``1 / groups`` (the same
    micro-batches a pipeline). Each DiLoCo group is its own data-parallel job, so its
    framework's collectives over the data-parallel group and its optimizer-state partition
    span these replicas only (Douillard et al. 2023, arXiv:2311.08105, Algorithm 1; PRIME's
    INTELLECT-1: each node one FSDP job)."""
    k = plan.dp[0] // groups
    return replace(plan, stages=tuple(replace(st, replicas=st.replicas[g * k:(g + 1) * k])
                                      for st in plan.stages),
                   global_batch_size=plan.global_batch_size // groups)


def _group_builds(plan: Plan, build: PlanBuild, args: dict[str, Any]) -> PlanBuild:
    """``build`` of ``plan`` with DiLoCo groups: each group's build (:func:`group_plan`), their
    step fields as the config's ``group_steps`` and their GPUs' memory (each replica numbered as
    in ``plan``); one group or none: ``build`` itself."""
    from ..training.outer import GROUP_STEP_FIELDS, diloco_groups

    cfg = build.config
    if cfg.diloco is None or diloco_groups(cfg) < 2:
        return build
    M = diloco_groups(cfg)
    k = cfg.replicas[0] // M
    subs = tuple(build_plan(group_plan(plan, M, g), **args) for g in range(M))
    steps = tuple(tuple((f, getattr(b.config, f)) for f in GROUP_STEP_FIELDS) for b in subs)
    memory = tuple(sorted((replace(m, replica=m.replica + g * k)
                           for g, b in enumerate(subs) for m in b.memory),
                          key=lambda m: (m.stage, m.replica)))
    return replace(build, config=replace(cfg, group_steps=steps), memory=memory, groups=subs)


def build_plan(plan: Plan, profiles: Profiles, *, model: str | None = None,
               schedule: str = "1f1b", p2p: str | None = None,
               framework: FrameworkSpec | None = None, value_sizes: str = "framework",
               tensor_parallel: str = "profiled", check_memory: bool = True,
               network: bool = False, redundant_copy: bool = False, **config: Any) -> PlanBuild:
    """The :class:`TrainingConfig` of ``plan`` on ``profiles``, its memory and its pieces.

    Parameters
    ----------
    plan : Plan
    profiles : Profiles
    model : str, optional
        The model's name (else the plan's).
    schedule : {"1f1b", "gpipe", "1f1b-dynamic"}
    p2p : {"blocking", "overlap", "batched", "shared"} or None
        Override the framework's point-to-point semantics (None: the
        framework's, :mod:`sim.profiles.frameworks`): a blocking paired send
        and receive in DeepSpeed's ``TrainSchedule`` order (``blocking``, also
        with framework megatron: the override is the order too), blocking in
        Megatron-LM's 1F1B order with its batched send/receive pairs
        (``batched``, schedule 1f1b only), or transfers on a communication
        stream beside the compute (FIFO channels, :mod:`sim.network.channels`). ``shared`` (each
        transfer on a connection of its own, sharing links max-min) is no
        framework's: a comparison only.
    framework : FrameworkSpec, optional
        Override the plan's framework.
    value_sizes : {"framework", "profile"}
        Bytes per value of each collective as the framework sends it
        (default), or every collective at the profile's ``bytes_per_value``
        (the comparison of ``tools/real_runs.py``).
    tensor_parallel : {"profiled", "derived"}
        A TP > 1 stage's layer times: the profile's where it measured them
        (else derived from TP 1), or always derived from TP 1
        (:mod:`sim.profiles.estimates`). Every time the profile did not measure
        (a derived TP degree, an unprofiled micro-batch size, a forward-only
        profile's backward pass, a model given by its shape) is named in
        :attr:`PlanBuild.estimates`.
    check_memory : bool
        Refuse a plan that does not fit (one line naming the stage and GPU).
    network : bool
        Run the plan's transfers and all-reduces as flows of :mod:`sim.network`
        over :func:`plan_network` (contention between them included), instead
        of their closed-form times (which stay in the PlanBuild as the
        reference).
    redundant_copy : bool
        Count Bamboo's eager redundant copy (``--strategy redundancy``, its default
        ``mode=eager``; a TP rank its shard) in each GPU's memory (:func:`eager_copy_memory`); with ``check_memory``, refuse a plan it
        no longer fits.
    **config
        Any other :class:`TrainingConfig` field (steps, failures, prices, ...).

    Raises
    ------
    ConfigError
        One line: a GPU type the profile or catalogue lacks, layers that do
        not cover the model, a TP degree or micro-batch size without a profile
        entry, a TP degree that does not divide the model's attention heads
        (where its shape gives them), a TP degree the framework does not run (the
        Sailor artifact's: 1, 2 or 4), a missing network link, a plan out of memory,
        a stage whose replicas differ in TP degree where its framework cannot run it
        (all but the Sailor artifact's), its replicas name hosts or its all-reduce is
        overlapped or DiLoCo's.
    """
    mp = _model(plan, profiles, model)
    plan.check_covers(mp.layers)
    if network:  # the DES over a plan's network runs fixed device programs (TrainingConfig)
        check(schedule in PLAN_SCHEDULES, "schedule",
              "1f1b or gpipe with a plan over its network", schedule)
    check(schedule in ("1f1b", "gpipe", "1f1b-dynamic"), "schedule",
          "1f1b, gpipe or 1f1b-dynamic with a plan", schedule)
    check(value_sizes in ("framework", "profile"), "value_sizes", "framework or profile",
          value_sizes)
    L = len(plan.stages)
    dp = plan.dp
    check(len(set(dp)) == 1, "plan", "the same number of replicas at every stage (one per "
          "pipeline)", dp)
    r = dp[0]
    if mp.tied_embeddings and L > 1:  # the tied groups pair TP rank k of the first and last stage
        ends = sorted({x.tp for x in plan.stages[0].replicas + plan.stages[-1].replicas})
        check(len(ends) == 1, "plan", "one TP degree at the first and last stage of a model "
              "with tied embeddings (their tied all-reduce pairs TP rank k of each, for every "
              "pipeline and every rank below a rank's own degree: DeepSpeed's module.py "
              "_index_tied_modules, the artifact's deepspeed/module.py:499-506; a rank it "
              "lacks fails deepspeed/topology.py:142)", "TP " + " and ".join(map(str, ends)))
    if mp.shape is not None:  # the heads are known: a TP group splits them evenly (Megatron-LM's
        # attention, num_attention_heads_per_partition = divide(num_attention_heads, world_size))
        for st in plan.stages:
            for x in st.replicas:
                check(mp.shape.heads % x.tp == 0, "tp",
                      f"a divisor of the model's heads ({mp.shape.heads})", x.tp)
    fb = plan_behaviour(plan, mp, framework)
    trained = _trained(profiles, mp, fb.activation_bytes)  # a shape alone: the run's precision
    if trained is not mp:
        mp, fb = trained, plan_behaviour(plan, trained, framework)
    if fb.tp_degrees is not None:  # the Sailor artifact's Megatron-DeepSpeed: 1, 2 or 4; 1
        # with DeepSpeed's pipe_partitioned and grad_partitioned apart (FrameworkBehaviour)
        *most, last = fb.tp_degrees
        degrees = (", ".join(map(str, most)) + " or " if most else "") + \
            f"{last} with framework {fb.framework.key}"
        for j, st in enumerate(plan.stages):
            for i, x in enumerate(st.replicas):
                where = f"a Sailor plan's tmp_per_stage[{j}][{i}]; " if fb.pipe_groups else ""
                check(x.tp in fb.tp_degrees, "tp", f"{degrees}, at stage {j} replica {i} ("
                      f"{where}{fb.sources['tp_degrees']})", x.tp)
    for j, st in enumerate(plan.stages):  # replicas of one stage with different TP degrees
        tps = sorted({x.tp for x in st.replicas})
        if len(tps) == 1:
            continue
        # only the Sailor artifact groups such a stage (pipe_groups: its per-group topology);
        # upstream DeepSpeed and Megatron-LM build one model-parallel degree for every rank
        check(fb.pipe_groups, "plan", f"one TP degree per stage (stage {j}) with framework "
              f"{fb.framework.key} (one model-parallel degree for every rank: "
              f"{fb.sources.get('pipe_groups', fb.framework.key)}); the Sailor artifact's "
              "(sailor-deepspeed) runs such a stage", tps)
        # the artifact's group i takes rank i // (T / t) of a replica of TP t (topology.py:93-97),
        # so every degree must divide T: its degrees 1, 2 and 4 (fb.tp_degrees, checked above) do
        check(not plan.physical, "plan", f"one TP degree per stage (stage {j}) on named hosts "
              "(the Sailor artifact's rounds of data-parallel groups are timed for replicas "
              "that are nodes of their own: a Sailor plan_config, or a plan without hosts)", tps)
    check(fb.framework.pipeline or L == 1, "framework",
          f"a pipeline framework for a plan of {L} stages", fb.framework.key)
    if value_sizes == "profile":
        b0 = mp.bytes_per_value
        fb = replace(fb, dp_bytes=b0, tied_bytes=b0, activation_bytes=b0, gather_bytes=b0,
                     param_gather_bytes=b0 if fb.dist_optimizer else 0)
    if p2p is not None:
        # shared (max-min, no queue) is no framework's: an override kept for comparison
        check(p2p in P2P_MODES + ("shared",), "p2p", "one of " + ", ".join(P2P_MODES)
              + " or shared", p2p)
        fb = replace(fb, p2p=p2p)
    check(schedule == "1f1b" or fb.p2p != "batched", "schedule",
          "1f1b with Megatron-LM's batched point-to-point (its non-interleaved schedule; "
          "p2p blocking or overlap for another)", schedule)
    bpv = mp.bytes_per_value
    act_scale = fb.activation_bytes / bpv  # the profile's sizes are in its own precision
    recompute = fb.attention is not None and fb.attention[2]
    est = _estimator(profiles, mp, tensor_parallel, fb.activation_bytes, fb.sequence, recompute)
    notes: list[str] = []
    sizes_kept: dict[int, Any] = {}

    def sizes_at(tp: int) -> Any:
        row = sizes_kept.get(tp)
        if row is None:  # its notes once: they are kept once each anyway
            row, why = est.layer_sizes(tp)
            notes.extend(why)
            sizes_kept[tp] = row
        return row
    gpus = profiles.gpus
    memory_kept: dict[tuple[str, int], Any] = {}

    def memory_sizes_at(gpu: str, tp: int) -> Any:
        """The sizes whose activation memory a GPU of type ``gpu`` keeps: its attention path's
        where the sizes come from the model's shape (a measured size is the profile's)."""
        row = memory_kept.get((gpu, tp))
        if row is None:
            row = sizes_at(tp)
            # Megatron-LM: the path its attention takes here (refused where TE would fail);
            # a measured size is the profile's, whatever attention measured it
            if fb.attention is not None:
                path, why = attention_path(fb, gpu, gpus[gpu].compute_capability)
                if mp.shape_sized(tp):
                    if path != "stored":
                        row, _ = est.layer_sizes(tp, path)
                    notes.append(f"attention on {gpu} at TP {tp}: {path}, {why}")
            memory_kept[(gpu, tp)] = row
        return row
    mbs = plan.microbatch_size
    net = profiles.network
    # compute: per stage, per replica (forward, backward, optimizer) of one micro-batch, with the
    # all-gathers that rebuild a partitioned activation or gradient inside the node (DeepSpeed)
    times, gathers = [], []
    passes = []  # [j][i] (forward, backward) of the passes alone, where the backward all-gather
    # is a command of its own before the gradient receive (DeepSpeed 0.3.13: recv below)
    for j, st in enumerate(plan.stages):
        row, grow, prow = [], [], []
        alike: dict[tuple, tuple] = {}  # a stage's replicas of one GPU type and TP: once
        for rep in st.replicas:
            hit = alike.get((rep.gpu, rep.tp))
            if hit is not None:
                row.append(hit[0])
                grow.append(hit[1])
                prow.append(hit[2])
                continue
            lt, why = est.layer_times(rep.gpu, mbs, rep.tp)  # refuses what no rule gives
            gpus[rep.gpu]  # a GPU type the catalogue lacks
            notes.extend(why)
            sizes = sizes_at(rep.tp)
            g_f = g_b = 0.0
            if fb.gathers and rep.tp > 1:
                gb = fb.gather_bytes / bpv
                if j > 0:
                    prev = plan.stages[j - 1].layers[-1]
                    g_f = fb.gathers[0] * allgather_time(
                        profiles, rep.gpu, rep.tp, mbs * sizes[prev].activation_bytes * gb)
                if j < L - 1:
                    g_b = fb.gathers[1] * allgather_time(
                        profiles, rep.gpu, rep.tp, mbs * sizes[st.layers[-1]].activation_bytes * gb)
            back = math.fsum(lt[x].backward for x in st.layers)
            row.append((math.fsum(lt[x].forward for x in st.layers) + g_f, back + g_b,
                        math.fsum(lt[x].optimizer for x in st.layers)))
            grow.append((g_f, g_b))
            prow.append((row[-1][0], back))
            alike[(rep.gpu, rep.tp)] = (row[-1], grow[-1], prow[-1])
        times.append(tuple(row))
        gathers.append(tuple(grow))
        passes.append(tuple(prow))
    # DeepSpeed 0.3.13 all-gathers a stage's output in _exec_recv_grads, before the blocking
    # receive of its gradient (fb.recv_gather): in its own program (schedule 1f1b, blocking),
    # a command of its own; elsewhere (no such program) inside the backward pass as before
    recv = fb.recv_gather and schedule == "1f1b" and fb.p2p == "blocking" and \
        any(g[1] > 0 for grow in gathers for g in grow)
    recv_gather = tuple(tuple(g[1] for g in grow) for grow in gathers) if recv else None
    pass_times = tuple(tuple((f, b) for f, b in prow) for prow in passes) if recv else \
        tuple(tuple((f, b) for f, b, _ in row) for row in times)
    # point to point: per hop, per pipeline (activation, gradient); the Sailor artifact's engine
    # sends each part once per pipeline group its rank is in (fb.pipe_groups): a stage of TP t
    # in a pipeline whose largest TP is T sends T / t times what one send carries; T is each
    # pipeline's own (topology.py:105-111: tps_pp_stage[i], the TP degrees of pipeline i)
    tops = [max(st.replicas[i].tp for st in plan.stages) for i in range(r)]
    xfer_sizes: list[list[float]] = []  # [hop][pipeline]: the bytes one activation moves
    grad_sizes: list[list[float]] = []
    once: list[list[float]] = []  # [hop][pipeline]: the tensor, sent once
    hops = [[((a.replicas[i], (j, i)), (b.replicas[i], (j + 1, i))) for i in range(r)]
            for j, (a, b) in enumerate(zip(plan.stages, plan.stages[1:], strict=False))]
    for j, ends in enumerate(hops):
        acts, grads, row = [], [], []
        for i, (pa, pb) in enumerate(ends):
            size = mbs * sizes_at(pa[0].tp)[plan.stages[j].layers[-1]].activation_bytes \
                * act_scale
            row.append(size)
            acts.append(size * tops[i] / pa[0].tp if fb.pipe_groups else size)
            grads.append(size * tops[i] / pb[0].tp if fb.pipe_groups else size)
        xfer_sizes.append(acts)
        grad_sizes.append(grads)
        once.append(row)

    def hop_time(a: Any, b: Any, j: int, i: int, grad: bool, shares: Any) -> float:
        """Hop ``j``'s activation (``grad``: gradient) of pipeline ``i`` from replica ``a`` to
        ``b``: the sender's ranks' flows at once; the Sailor artifact's pipeline groups
        (fb.pipe_groups), ``T`` messages of the tensor's part, ``k`` chains at once of
        ``T / k`` one after the other (pipe_group_chains: a rank sends and receives its
        groups' messages in group order, each a blocking send or receive). Where the
        framework sends its partition metadata first (:func:`partition_meta_bytes`), each
        rank's message of it before each of its parts, a transfer of its own: its time too;
        likewise the attention mask each rank sends after its part (:func:`mask_message_bytes`).
        """
        meta = partition_meta_bytes(fb, a[0].tp, grad)
        mask = mask_message_bytes(fb, grad)
        if not fb.pipe_groups:
            t = pair_time(net, a, b, *p2p_flows(fb, (grad_sizes if grad else xfer_sizes)[j][i],
                                                a[0].tp, gradient=grad), profiles, shares)
            t = t if meta <= 0 else pair_time(net, a, b, meta, a[0].tp, profiles, shares) + t
            return t if mask <= 0 else t + pair_time(net, a, b, mask, a[0].tp, profiles, shares)
        each, _ = p2p_flows(fb, once[j][i], a[0].tp, gradient=grad)  # one group's message
        k, n = pipe_group_chains(tops[i], a[0].tp, b[0].tp)
        t = pair_time(net, a, b, each, k, profiles, shares)
        t = t if meta <= 0 else pair_time(net, a, b, meta, k, profiles, shares) + t
        return n * (t if mask <= 0 else t + pair_time(net, a, b, mask, k, profiles, shares))

    def timed(shares: list[list[tuple[Any, Any]]] | None) -> list[tuple]:
        """Every transfer's time, per hop and pipeline (activation, gradient), with ``shares``
        of each (None: each alone, or nodes of their own)."""
        out = []
        for j, ends in enumerate(hops):
            row = []
            for i, (pa, pb) in enumerate(ends):
                fwd, bwd = shares[j][i] if shares is not None else (None, None)
                row.append((hop_time(pa, pb, j, i, False, fwd), hop_time(pb, pa, j, i, True, bwd)))
            out.append(tuple(row))
        return out
    # on physical nodes: each transfer with the pipelines' transfers over its own hop in its
    # own direction (hop_shares), where alike pipelines in lockstep never run two transfers
    # over one NIC direction or node pair at once (in_lockstep: then exact); else with every
    # transfer that may cross one at once, over every hop of every pipeline (p2p_shares)
    if plan.physical:
        xfer = timed(hop_shares(plan, fb.pipe_groups))
        if crossing_kinds(plan) and not in_lockstep(plan, pass_times, xfer, schedule, fb.p2p,
                                                    recv_gather):
            xfer = timed(p2p_shares(plan, fb.p2p, fb.pipe_groups))
    else:
        xfer = timed(None)
    # gradient all-reduce per stage, tied embedding between the first and last stage: after the
    # last backward pass in the framework's buckets (DeepSpeed: 5e8 elements; Megatron-LM by
    # default: one), or bucket by bucket as the backward pass produces them (Megatron-LM's
    # overlap_grad_reduce, PyTorch DDP): TrainingConfig.sync, fb.sync (a given sync overrides it)
    fb, sync = given_sync(fb, config.pop("sync", None), r)
    fb_given = fb  # (its bucket unpadded: the buffer's cut)
    overlapped = fb.allreduce == "overlap-backward"
    if any(len({x.tp for x in st.replicas}) > 1 for st in plan.stages):
        # the artifact reduces a mixed stage's groups after the backward pass, one round after
        # the other (engine.py:2614-2632); neither Megatron-LM's buckets nor DiLoCo's groups
        # are defined over such groups
        check(not overlapped and not sync.startswith("diloco"), "sync", "the framework's "
              "all-reduce after the backward pass for a plan whose stage mixes TP degrees "
              "(the Sailor artifact's data-parallel groups: deepspeed/engine.py:2614-2632)",
              sync)
    # Megatron-LM's distributed optimizer: each stage's buffer in buckets padded to
    # lcm(dp, 128) elements (dist_optimizer_buckets), reduce-scattered and all-gathered whole;
    # the first stage's overlapped buckets cut at the padded bucket (its padded size), so the
    # adapter's cut (gradient_buckets) gives each bucket's padded size
    padded: list[int] | None = None
    if fb.dist_optimizer:
        first_cut = dist_first_bucket(fb)
        padded = [sum(x[1] for x in dist_optimizer_buckets(
            sum(sizes_at(st.replicas[0].tp)[x].params for x in st.layers), r,
            first_cut if j == 0 else math.inf)) for j, st in enumerate(plan.stages)]
        if math.isfinite(first_cut):
            div = math.lcm(r, DIST_PAD_VALUES)
            fb = replace(fb, bucket_elements=float(-(-math.ceil(first_cut) // div) * div))
            if sync == fb_given.sync:
                sync = fb.sync
    bucket = fb.bucket_bytes
    ar, ar_sizes = [], []
    # on physical nodes the stages' rings run at once (all after the barrier; without one they
    # overlap as the stages' programs end: counted as at once, an upper bound) and share the
    # NICs and node pairs their steps cross (nic_shares of every ring's edges)
    rings = [[(x, (j, i)) for i, x in enumerate(st.replicas)] for j, st in enumerate(plan.stages)]
    for j, st in enumerate(plan.stages):
        # a rank reduces, per data-parallel group it is in, what a rank of the stage's largest
        # TP degree T holds (one TP degree: its own gradients); where the replicas' degrees
        # differ, the Sailor artifact's groups run in rounds of rings (dp_group_rounds: its
        # deepspeed/topology.py:82-99, engine.py:2614-2632), each ring's flows on the pair link
        tp = max(x.tp for x in st.replicas)
        size = (padded[j] if padded is not None else
                sum(sizes_at(tp)[x].params for x in st.layers)) * float(fb.dp_bytes)
        if r > 1:  # an all-reduce to cut
            check_buckets(fb, size, tp)
        ar_sizes.append(size)
        if not plan.physical:
            rounds, each = dp_group_rounds([x.tp for x in st.replicas])
            flows = [x.tp for x in st.replicas] if rounds == 1 else [each] * r
            ar.append(rounds * plan_allreduce_time(net, rings[j], flows, size, bucket, profiles))
    if plan.physical:
        ar = concurrent_allreduce_times(net, rings, ar_sizes, bucket, profiles)
    if fb.dist_optimizer:  # Megatron-LM's reduce-scatter: the ring's first r - 1 steps, half
        ar = [t / 2 for t in ar]
    tied, tied_size = 0.0, 0.0
    tied_each: list[float] = []  # per pipeline (its first and last stage's GPUs and link)
    if mp.tied_embeddings and L > 1:
        tied_size = tied_bytes(mp, fb, plan.stages[-1].replicas[0].tp)
        pairs = [((plan.stages[0].replicas[i], (0, i)), (plan.stages[-1].replicas[i], (L - 1, i)))
                 for i in range(r)]
        if plan.physical:  # every pipeline's tied ring at once (first <-> last)
            tied_each = concurrent_allreduce_times(net, [[x, y] for x, y in pairs],
                                                   [tied_size] * r, bucket, profiles)
        else:
            tied_each = [plan_allreduce_time(net, [x, y], [x[0].tp, y[0].tp], tied_size, bucket,
                                             profiles) for x, y in pairs]
        tied = max(tied_each)
    if not plan.physical:  # on physical nodes every count used is a measured one (node_links)
        notes.extend(link_estimates(net, plan_pairs(plan, mp.tied_embeddings).values()))
    buckets = overlapped_buckets(plan, net, sync, ar_sizes, profiles) if overlapped else ()
    if fb.dist_optimizer and buckets:  # each bucket reduce-scattered (half its ring)
        buckets = tuple(tuple((b, t / 2) for b, t in row) for row in buckets)
    opt = tuple(max(t[2] for t in row) for row in times)
    if fb.dist_optimizer:  # the optimizer steps the rank's 1/r shard of the stage's parameters
        opt = tuple(o / r for o in opt)
    # the optimizer's one-value all-reduces over the model-parallel group, after every stage
    # has reduced (each stage's optimizer step waits for them), and DeepSpeed's loss
    # all-reduce and broadcast, which the last stage's step ends with (step_collectives)
    opt_coll, loss_time = step_collectives(plan, net, fb, profiles)
    if opt_coll or loss_time:
        opt = tuple(o + opt_coll + (loss_time if j == L - 1 else 0.0) for j, o in enumerate(opt))
    # DeepSpeed's BF16_Optimizer: the step ends by all-gathering the updated bf16 weights over
    # the stage's data-parallel group (update_lp_params), before the loss (bf16 only)
    gather_ag = bf16_allgather_times(plan, net, fb, [sum(sizes_at(st.replicas[0].tp)[x].params
                                                         for x in st.layers)
                                                     for st in plan.stages], profiles)
    if any(gather_ag):
        opt = tuple(o + g for o, g in zip(opt, gather_ag, strict=True))
    # Megatron-LM's distributed optimizer: the step ends by all-gathering the parameters
    param_ag = param_allgather_times(plan, net, fb, padded or [], profiles)
    if param_ag:
        opt = tuple(o + g for o, g in zip(opt, param_ag, strict=True))
    memory = plan_memory(plan, mp, gpus, schedule, sizes_at, fb.pipe_buffers, fb.sequence,
                         fb.recv_clones, fb.partitioned, fb.bf16_allgather is not None,
                         fb.grad_bytes, fb.dist_optimizer, fb.grad_copy_bytes, memory_sizes_at,
                         not fb.grads_in_buffer,
                         dist_first_bucket(fb_given) if fb.dist_optimizer else math.inf)
    if check_memory:
        for g in memory:
            if g.total > g.capacity:
                raise ConfigError("plan", "a plan that fits in GPU memory",
                                  f"stage {g.stage} on {g.gpu} (replica {g.replica}, TP {g.tp}) "
                                  f"needs {format_bytes(g.total)} of {format_bytes(g.capacity)}")
    if redundant_copy and check_memory:
        for g, extra in zip(memory, eager_copy_memory(plan, sizes_at, memory_sizes_at),
                            strict=True):
            if g.total + extra > g.capacity:
                raise ConfigError("plan", "a plan that fits in GPU memory with Bamboo's eager "
                                  "redundant copy (redundancy, mode=eager; mode=lazy keeps it "
                                  "in CPU memory)",
                                  f"stage {g.stage} on {g.gpu} (replica {g.replica}, TP {g.tp}) "
                                  f"needs {format_bytes(g.total + extra)} "
                                  f"({format_bytes(extra)} for the copy of stage "
                                  f"{(g.stage + 1) % len(plan.stages)} and the activations "
                                  f"of its forwards) of {format_bytes(g.capacity)}")
    prices = None
    if all(gpus[x.gpu].price_per_hour is not None for st in plan.stages for x in st.replicas):
        prices = tuple(tuple(gpus[x.gpu].price_per_hour * x.tp for x in st.replicas)  # type: ignore[operator]
                       for st in plan.stages)
    kw: dict[str, Any] = dict(
        stages=L, replicas=r, microbatches=plan.microbatches * r, schedule=schedule,
        routing="round-robin", forward_time=tuple(row[0][0] for row in times),
        backward_times=tuple(row[0][1] for row in times),
        replica_times=pass_times, recv_gather_times=recv_gather,
        optimizer_times=opt, p2p=fb.p2p, samples_per_microbatch=float(mbs), price=prices,
        sync=sync,
        # where the stages' collectives start (fb.barrier, fb.tied_first: the framework's);
        # one stage, or a schedule with no fixed device program (1f1b-dynamic): after the phase
        allreduce_barrier=fb.barrier or L == 1 or schedule not in ("gpipe", "1f1b"),
        tied_first=fb.tied_first, optimizer_barrier=fb.optimizer_barrier)
    if network:
        # the bytes a hop moves (flows x bytes each), per pipeline where they differ among them
        def moved(sizes: list[list[float]], at: int) -> tuple:
            out = []
            for j, row in enumerate(sizes):
                each = [p2p_flows(fb, x, plan.stages[j + at].replicas[i].tp, gradient=at == 1)
                        for i, x in enumerate(row)]
                per = [x * k for x, k in each]
                out.append(per[0] if len(set(each)) == 1 else tuple(per))
            return tuple(out)
        flows, back = moved(xfer_sizes, 0), moved(grad_sizes, 1)

        def metas(at: int) -> tuple | None:  # per hop the bytes each sender rank's metadata has
            out = []
            for j in range(L - 1):
                each = [partition_meta_bytes(fb, plan.stages[j + at].replicas[i].tp,
                                             gradient=at == 1) for i in range(r)]
                out.append(each[0] if len(set(each)) == 1 else tuple(each))
            return tuple(out) if any(out) else None
        meta, meta_back = metas(0), metas(1)
        # per hop the bytes of the masks the sender's ranks send after their parts, one each
        each_mask = mask_message_bytes(fb) if L > 1 else 0.0
        masks = tuple(
            each_mask * plan.stages[j].replicas[0].tp
            if len({x.tp for x in plan.stages[j].replicas}) == 1 else
            tuple(each_mask * x.tp for x in plan.stages[j].replicas)
            for j in range(L - 1)) if each_mask > 0 else None
        kw.update(network=physical_network(plan, profiles, mp.tied_embeddings) if plan.physical
                  else plan_network(plan, net, mp.tied_embeddings),
                  network_nodes=tuple(tuple(f"s{j}r{i}" for i in range(r)) for j in range(L)),
                  # the plan's hosts name its workers for a trace replayed by name
                  **({"trace_hosts": tuple(tuple(x.host for x in st.replicas)
                                           for st in plan.stages)}
                     if any(x.host for st in plan.stages for x in st.replicas) else {}),
                  tensor_parallel=tuple(tuple(x.tp for x in st.replicas) for st in plan.stages),
                  bucket_size=math.inf if overlapped else bucket,
                  transfer_sizes=flows or None,
                  gradient_transfer_sizes=back if back != flows else None,
                  meta_sizes=meta,
                  mask_sizes=masks,
                  gradient_meta_sizes=(None if meta_back == meta else
                                       meta_back or (0.0,) * (L - 1)),
                  allreduce_sizes=tuple(ar_sizes), tied_allreduce_size=tied_size,
                  # Megatron-LM's distributed optimizer: the rings reduce-scatter
                  **({"reduce_scatter": True} if fb.dist_optimizer else {}),
                  # the artifact's groups matter where a pipeline's stages differ in TP
                  pipe_groups=fb.pipe_groups and any(
                      len({st.replicas[i].tp for st in plan.stages}) > 1 for i in range(r)))
    else:
        kw.update(transfer_times=tuple(xfer) if L > 1 else None, allreduce_times=tuple(ar),
                  tied_allreduce_time=tied, allreduce_buckets=buckets or None,
                  tied_allreduce_times=tuple(tied_each) or None)
    for k in config:
        check(k not in ("stages", "replicas", "microbatches", "forward_time", "backward_times",
                        "replica_times", "recv_gather_times", "transfer_times",
                        "allreduce_times", "optimizer_times",
                        "tied_allreduce_time", "tied_allreduce_times", "samples_per_microbatch",
                        "backward_ratio",
                        "speeds", "latency", "activation_size", "param_size", "bandwidth"),
              k, "set by the plan (not given with it)", config[k])
    kw.update(config)
    cfg = TrainingConfig(**kw)
    return _group_builds(plan, PlanBuild(config=cfg, memory=memory, stage_times=tuple(times),
                     transfer_times=tuple(xfer), allreduce_times=tuple(ar), optimizer_times=opt,
                     tied_allreduce_time=tied, tied_allreduce_times=tuple(tied_each),
                     behaviour=fb, gather_times=tuple(gathers),
                     estimates=tuple(dict.fromkeys(notes)), bucket_times=buckets,
                     optimizer_collective_time=opt_coll, loss_time=loss_time,
                     bf16_allgather_times=gather_ag, param_allgather_times=param_ag),
        dict(profiles=profiles, model=model, schedule=schedule, p2p=p2p, framework=framework,
             value_sizes=value_sizes, tensor_parallel=tensor_parallel,
             check_memory=check_memory, network=network, redundant_copy=redundant_copy))


def overlapped_buckets(plan: Plan, network: NetworkProfile, sync: str, sizes: Sequence[float],
                       profiles: Profiles) -> tuple[tuple[tuple[float, float], ...], ...]:
    """Per stage, each bucket of the all-reduce overlapped with the backward pass as
    ``(bytes per GPU, time)``, in the order the backward pass produces them.

    The buckets are the traffic adapter's (:func:`sim.training.traffic.gradient_buckets` of
    the stage's ``sizes[j]`` with ``sync``'s ``bucket_size`` and ``buckets`` rule, Megatron-LM's
    for a plan by default: cut only on the first stage), none with one replica; each bucket's
    time is its ring among the stage's replicas, :func:`plan_allreduce_time` in one
    bucket (the law of the plan's other all-reduces). On physical nodes the stages'
    buckets are released near the end of the backward pass, so every stage's ring is
    counted as running beside each bucket (:func:`nic_shares` of all the stages' ring
    edges): an upper bound where they do not all overlap. The closed form of the step is
    :func:`sim.analytic.training.overlapped_exposed_time`.
    """
    from ..training.sync import parse_sync
    from ..training.traffic import gradient_buckets

    spec = parse_sync(sync)
    bucket, rule = spec.get("bucket_size"), spec.get("buckets") or "megatron"
    r = plan.dp[0]
    shared = nic_shares(
        (host_of(st.replicas[i], (j, i)), host_of(st.replicas[(i + 1) % r], (j, (i + 1) % r)),
         st.replicas[i].tp) for j, st in enumerate(plan.stages) if r > 1 for i in range(r)) \
        if plan.physical else None
    out = []
    for j, st in enumerate(plan.stages):
        if len(st.replicas) < 2:
            out.append(())
            continue
        nodes = [(x, (j, i)) for i, x in enumerate(st.replicas)]
        tps = [x.tp for x in st.replicas]
        out.append(tuple((b, plan_allreduce_time(network, nodes, tps, b, math.inf, profiles,
                                                 shared))
                         for b in gradient_buckets(sizes[j], bucket, rule=rule,
                                                   first_stage=j == 0)))
    return tuple(out)


def _trained(profiles: Profiles, mp: ModelProfile, value_bytes: int) -> ModelProfile:
    """:meth:`ModelProfile.trained_at`, kept with the profiles (one object per model and
    precision, so :func:`_estimator` keeps its estimates across plans)."""
    kept = profiles.__dict__.setdefault("_trained", {})
    key = (id(mp), value_bytes)
    hit = kept.get(key)
    if hit is None or hit[0] is not mp:
        hit = kept[key] = (mp, mp.trained_at(value_bytes))
    return hit[1]


def _estimator(profiles: Profiles, mp: ModelProfile, tensor_parallel: str, value_bytes: int,
               sequence: int | None = None, recompute_attention: bool = False) -> Estimator:
    """The :class:`Estimator` of ``mp`` on ``profiles`` (one per model, mode, value size,
    sequence length, the framework's where it has one, else the shape's, and selective
    recomputation: kept with the profiles, its estimates are values of those alone)."""
    kept = profiles.__dict__.setdefault("_estimators", {})
    key = (id(mp), tensor_parallel, value_bytes, sequence, recompute_attention)
    hit = kept.get(key)
    if hit is None or hit[0] is not mp:
        hit = kept[key] = (mp, Estimator(profiles, mp, tensor_parallel=tensor_parallel,
                                         value_bytes=value_bytes, sequence=sequence,
                                         recompute_attention=recompute_attention))
    return hit[1]


def explain_rows(build: PlanBuild) -> dict[str, Any]:
    """Where a failure-free iteration's time goes, from the exact evaluation of its programs.

    Returns per stage (the slowest pipeline's device): compute (forward and
    backward passes), point-to-point (time the device spends in blocking
    transfers, the longer of a batched pair's two; overlapped transfers occupy
    no device and show as waiting),
    bubble (the rest of the pipeline phase: waiting for inputs and peers);
    and the iteration's tail: tied all-reduce, gradient all-reduce and
    optimizer step of the slowest stage, and the total. Where the framework
    overlaps the all-reduce with the backward pass (``allreduce_overlapped``,
    :attr:`PlanBuild.bucket_times`), the all-reduce is the time its buckets
    add after the pipeline phase, from every pipeline's last backward passes
    (:func:`sim.analytic.training.overlapped_exposed_time`), then the tied
    all-reduce and the slowest optimizer step (Megatron-LM's order); its
    after-the-backward-pass time is ``allreduce_after_backward``. Where the
    framework has no barrier before its all-reduces (``allreduce_barrier``
    False: upstream DeepSpeed, Megatron-LM), the iteration is each stage's
    collectives from its own devices' program ends
    (:func:`sim.analytic.placement.staged_step_end`, ``placement`` "per
    stage"); the tail's rows are then the slowest stage's parts, not a sum.
    ``stage_ends`` is when each stage's optimizer step ends, ``step_join`` whom a
    stage of the framework waits for before its next step, and
    ``step_join_bound`` how much the engines' step barrier can lengthen the
    next step at most (:func:`sim.analytic.placement.step_join_bound`; 0: exact).
    """
    from ..analytic.placement import barrier_tail, pipelines_tied, staged_step_end, step_join_bound
    from ..analytic.training import overlapped_exposed_time as exposed
    from ..analytic.training import overlapped_stage_ends, program_makespan
    from ..training.schedules import device_program, p2p_program

    c = build.config
    L, r, m = c.stages, c.replicas[0], c.microbatches  # type: ignore[index]
    blocking, batched = p2p_program(c.p2p)
    overlapped = bool(build.bucket_times)
    staged = not c.allreduce_barrier  # each stage's collectives from its own programs' end
    best: tuple[float, int, dict] | None = None
    seen: dict[tuple, tuple[float, list, list, list]] = {}
    last_b: list[list[tuple[float, float]]] = [[] for _ in range(L)]  # (start, time) per stage
    dev_ends: list[list[float]] = [[] for _ in range(L)]  # each device's program end
    ran: list[int] = []  # the pipelines that got micro-batches
    for k in range(r):
        mk = len(range(k, m, r))
        f = [c.replica_times[j][k][0] for j in range(L)]  # type: ignore[index]
        b = [c.replica_times[j][k][1] for j in range(L)]  # type: ignore[index]
        act = [row[k][0] for row in build.transfer_times]
        grad = [row[k][1] for row in build.transfer_times]
        # DeepSpeed 0.3.13: each gradient receive's all-gather, a command of its own
        gather = None if c.recv_gather_times is None else \
            [c.recv_gather_times[j][k] for j in range(L)]
        key = (mk, *f, *b, *act, *grad, *(gather or ()))
        if key in seen:  # a pipeline like one before (same kinds, same links)
            T, progs, lasts, ends = seen[key]
        else:
            progs = [device_program(c.schedule, L, mk, j, blocking=blocking, batched=batched,
                                    recv_gather=gather is not None)
                     for j in range(L)]
            starts: dict | None = {} if overlapped else None
            ends = [] if staged else None
            T = program_makespan(progs, f, b, act, grad, blocking=blocking,
                                 channels=c.p2p == "overlap", starts=starts, ends=ends,
                                 gather=gather)
            lasts = [] if starts is None else [  # each device's last backward pass
                starts[("B", j, max(op[2] for op in progs[j] if op[0] == "B"))]
                for j in range(L)]
            seen[key] = (T, progs, lasts, ends)
        for j, t0 in enumerate(lasts):
            last_b[j].append((t0, b[j]))
        if ends and mk > 0:
            ran.append(k)
            for j in range(L):
                dev_ends[j].append(ends[j])
        if best is None or T > best[0]:  # a stage's backward row with its all-gather (0.3.13)
            bg = b if gather is None else [x + y for x, y in zip(b, gather, strict=True)]
            best = (T, k, {"mk": mk, "progs": progs, "act": act, "grad": grad, "f": f, "b": bg})
    assert best is not None
    T, k, d = best
    stages = []
    for j in range(L):
        compute = d["mk"] * (d["f"][j] + d["b"][j])
        p2p = 0.0
        if blocking:  # a batched pair's two transfers run at once: the longer
            for op in d["progs"][j]:
                if op[0] in ("send", "recv"):
                    p2p += d["act"][op[2]] if op[1] == "a" else d["grad"][op[2]]
                elif op[0] == "sendrecv":
                    x = d["act" if op[1] == "a" else "grad"][op[2]]
                    y = d["act" if op[4] == "a" else "grad"][op[5]]
                    p2p += x if x >= y else y
        stages.append({"stage": j, "forward": d["f"][j], "backward": d["b"][j],
                       "compute": compute, "p2p": p2p, "bubble": max(T - compute - p2p, 0.0)})
    opt = build.optimizer_times
    if overlapped:  # the buckets during the last backward passes, then tied, then optimizers
        tail_stage = max(range(L), key=lambda j: opt[j])
        allreduce = exposed(T, last_b, build.bucket_times)
        stage_ends = [T + allreduce + build.tied_allreduce_time + o for o in opt]
    else:
        stage_ends = []
        _tail, tail_stage = barrier_tail(build.allreduce_times, opt, build.tied_allreduce_time,
                                         optimizer_barrier=c.optimizer_barrier, start=T,
                                         stage_ends=stage_ends)
        allreduce = (max(build.allreduce_times) if c.optimizer_barrier
                     else build.allreduce_times[tail_stage])
    iteration = max(stage_ends)
    if staged:  # each stage's collectives from its own devices' program ends
        tied = pipelines_tied(build.tied_allreduce_times, build.tied_allreduce_time, ran)
        stage_ends = []
        iteration = staged_step_end(
            dev_ends, (0.0,) * L if overlapped else build.allreduce_times,
            opt, tied, tied_first=c.tied_first, optimizer_barrier=c.optimizer_barrier,
            reduced=overlapped_stage_ends(last_b, build.bucket_times) if overlapped else None,
            stage_ends=stage_ends)
    join = build.behaviour.step_join if build.behaviour is not None else "pipeline"
    out = {"pipeline": k, "microbatches": d["mk"], "pipeline_time": T, "stages": stages,
           "tied_allreduce": build.tied_allreduce_time, "allreduce": allreduce,
           "optimizer": build.optimizer_times[tail_stage], "tail_stage": tail_stage,
           "iteration": iteration, "allreduce_overlapped": c.overlapped_sync,
           "placement": "per stage" if staged else "barrier",
           "stage_ends": stage_ends, "step_join": join,
           "step_join_bound": step_join_bound(stage_ends, join),
           # inside "optimizer" (step_collectives): every stage's, and the last stage's
           "optimizer_collectives": build.optimizer_collective_time, "loss": build.loss_time}
    if any(build.bf16_allgather_times):  # inside "optimizer" too (DeepSpeed bf16 only)
        out["bf16_allgather"] = build.bf16_allgather_times[tail_stage]
    if build.param_allgather_times:  # inside "optimizer" too (Megatron's distributed optimizer)
        out["param_allgather"] = build.param_allgather_times[tail_stage]
    if overlapped:
        out["allreduce_after_backward"] = max(build.allreduce_times)
    return out
