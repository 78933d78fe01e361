"""Which framework ran a plan: what it does with each transfer and collective, as values with sources.

A plan names its framework (and version, precision and the few options the
framework reads from its configuration); :func:`resolve` turns that into the
behaviour ``dtsim train --plan`` simulates. Every value below was read in the
framework's code at the version named, and carries the file and line it comes
from (``docs/real_runs.md`` has the table). Measured runs never choose a value
here: they are compared with what these values predict.

What a framework decides, and where dtsim uses it:

``p2p``
    How a pipeline stage's send and receive meet its compute: ``"blocking"``
    (the device waits until the paired transfer is done, DeepSpeed's
    ``SendActivation``/``RecvActivation`` in its ``TrainSchedule`` order),
    ``"batched"`` (blocking too, in Megatron-LM's non-interleaved 1F1B order,
    whose steady state posts a send and the receive of the other direction
    as one batch and waits for both:
    :func:`sim.training.schedules.megatron_program`) or ``"overlap"`` (on a
    communication stream beside the compute).
    :attr:`sim.training.TrainingConfig.p2p`.
``partitioned``, ``grad_partitioned`` and ``gathers``
    Whether the ``t`` ranks of a TP group each send ``1/t`` of the activation
    (``partitioned``) and of its gradient (``grad_partitioned``) and rebuild it
    by an all-gather inside the node after receiving it, and how many such
    all-gathers a stage runs per micro-batch in its forward pass (after
    receiving the activation) and in its backward pass (the output it sent,
    rebuilt for the backward pass, and a partitioned gradient). Unpartitioned,
    every rank sends the whole tensor: DeepSpeed 0.3.13 partitions the
    activation but sends the whole gradient back from every TP rank.
``allreduce``, ``barrier``, ``tied_first``
    Where the data-parallel gradient all-reduce runs: ``"after-backward"``
    (after the stage's last backward pass) or ``"overlap-backward"`` (buckets
    launched as the last micro-batch's backward pass produces them); whether
    every stage waits for all stages first (a global barrier); and whether the
    tied-embedding all-reduce between the first and last stage runs before the
    data-parallel one.
``optimizer_barrier``
    Whether every stage's optimizer step waits for all the stages of its
    pipeline to have reduced their gradients (an all-reduce of the gradient norm
    or overflow flag over the pipeline's model-parallel group), per precision.
``optimizer_allreduces``
    How many blocking one-value all-reduces over that group the optimizer step and
    what follows it run, per precision (the overflow flag, the gradient norm,
    Megatron-LM's update flag and norm maximum), each timed as NCCL runs it (its tree
    or ring) over the pipeline's stages by :func:`sim.profiles.build.step_collectives`.
``bf16_optimizer``
    With bf16, DeepSpeed's BF16_Optimizer (upstream 0.9.0 to 0.16.5): the fp32 master weights
    and optimizer state partitioned over the data-parallel group, the updated bf16 weights
    all-gathered over it after every optimizer step, in one collective or (before 0.12.4) in
    shards of ``allgather_bucket_size``: :func:`sim.profiles.build.bf16_allgather_times` and
    :func:`sim.profiles.build.bf16_optimizer_memory`; its fp32 flat gradient buffer is
    all-reduced in one collective (``bucket_elements`` inf).
``options`` ``use_distributed_optimizer`` (Megatron-LM 0.9.0 on; ``overlap_param_gather``
    read for Megatron-LM's asserts, then refused: its source says why)
    Megatron-LM's distributed optimizer: the gradients reduce-scattered over the data-parallel
    group, the optimizer state and step on the rank's ``1/dp`` shard, the parameters
    all-gathered after the step, the gradient norm over the world
    (:attr:`FrameworkBehaviour.dist_optimizer`; :func:`sim.profiles.build.param_allgather_times`,
    :func:`sim.profiles.build.plan_memory`); ``grad_copy``, the fp32 copy of 16-bit gradients
    its optimizer step holds until the next step's zero_grad (fp16).
``step_join``
    Whom a stage waits for before its next step: ``"last-stage"`` (DeepSpeed:
    the loss all-reduced among the last stages, then broadcast over each
    pipeline) or ``"pipeline"`` (Megatron-LM: all-reduces over the
    model-parallel group after the optimizer step). dtsim's engines start every
    device's next step together; :func:`sim.analytic.placement.step_join_bound`
    says by how much that can lengthen a step.
``pipe_groups``
    Whether a rank sends (and receives) each activation and gradient once per
    pipeline group it belongs to, the groups being as many as the largest TP
    degree of the pipeline's stages, a rank's groups one after the other (the
    Sailor artifact's engine, which runs stages of different TP degrees:
    :func:`sim.training.config.pipe_group_chains`); else once (a framework
    with one TP degree for the whole model).
``tp_degrees``
    The TP degrees the framework runs a replica at, where it restricts them
    (the Sailor artifact's Megatron-DeepSpeed asserts 1, 2 or 4); None: any
    (upstream DeepSpeed and Megatron-LM). A plan with another degree is refused
    in one line by :func:`sim.profiles.build.build_plan`.
``pipe_buffers``
    How many more received-input buffers than ``min(L - j, m)`` a stage
    ``j`` of ``L`` keeps (at least 2 in all): DeepSpeed's ``num_pipe_buffers``
    (0 from 0.16.5's ``TrainSchedule``, 1 in 0.3.13's), counted by
    :func:`sim.profiles.build.plan_memory` where ``recv_inputs`` gives no rule.
``recv_inputs``
    How a stage after the first holds the activations it receives, where it is not
    ``pipe_buffers``' whole buffers: ``"clone"`` (upstream DeepSpeed 0.9.0 to 0.16.5) one
    receive buffer kept across steps (the whole tensor, or its ``1/t`` part when
    partitioned), one received tensor per micro-batch in flight (the clone taken out of the
    buffer, or partitioned the whole input rebuilt from it), and unpartitioned also the
    forward pass's clone of it, the first layer's input: :func:`sim.profiles.build.recv_memory`.
``hop_mask``
    Bytes per element of a ``seq x seq`` attention mask a stage sends with every
    activation, whole from every TP rank (never with the gradient), or 0 when a hop
    carries the activation alone: DeepSpeed 0.3.13 with Megatron-LM v1.1.5's
    ``GPT2ModelPipe``, which forwards its ``1 x 1 x seq x seq`` boolean mask
    between stages and the engine casts to fp16 for NCCL, a blocking message of its
    own after the activation's part at any TP degree (the output tuple is sent item
    by item). Its sequence length is the framework option ``seq_length`` or the model
    profile's ``shape`` (:attr:`FrameworkBehaviour.mask_bytes`;
    :func:`sim.profiles.build.mask_message_bytes`).
    Not modelled: the shapes sent before a stage's first transfer (a few dozen
    int64 values, once).
``partition_meta``
    Whether a partitioned tensor goes as two blocking messages from each TP rank,
    its partition metadata (``PartitionedTensor.to_meta``: :data:`META_VALUES`
    ``+ t`` int64 values) and then its part, every micro-batch: ``"partitioned"``
    (upstream DeepSpeed, with each tensor it partitions: TP > 1; 0.3.13 the
    activation only), ``"always"`` (the Sailor artifact's engine, every activation
    and gradient at any TP degree) or None (Megatron-LM, DDP):
    :func:`sim.profiles.build.partition_meta_bytes`.
``bucket_elements``, ``bucket_rule``
    Gradient elements per all-reduce bucket (``inf``: one bucket), and how an
    all-reduce overlapped with the backward pass cuts the gradients
    (``megatron``: in production order, one bucket on every pipeline stage
    but the first; ``ddp``: PyTorch DDP's, the first bucket 1 MiB at the
    default cap): :func:`sim.training.traffic.gradient_buckets`.
    :attr:`FrameworkBehaviour.sync` is the
    :attr:`sim.training.TrainingConfig.sync` they make.
``dp_bytes``, ``tied_bytes``, ``activation_bytes``
    Bytes per value of the data-parallel gradient all-reduce, of the tied
    gradient's all-reduce, and of the activations and their gradients sent
    between stages, per training precision (``fp32``, ``fp16``, ``bf16``; a
    release without bf16, DeepSpeed 0.3.13, has no bf16 entry and refuses it),
    before any option.

``attention``
    Megatron-LM's core attention (Transformer Engine's DotProductAttention by default, its
    options ``transformer_impl``, ``attention_backend`` from core 0.11.0 and
    ``recompute_granularity=selective``): what a shape-estimated transformer layer keeps for
    its backward pass on each GPU type, :func:`attention_path` (the ``s x s`` matrices of
    Korthikanti et al. 2022's eq. 2, none with flash or fused attention in fp16/bf16 on
    compute capability 8.0 or later, none of the core attention with selective
    recomputation). None (DeepSpeed, the Sailor artifact, DDP): the model's own attention,
    eq. 2. Its lines at every core tag are ``_MEG_ATTN_LINES``.

Versions: a :class:`Framework` is one release, read at its version. A key
(``deepspeed``) may have several releases (:data:`RELEASES`: DeepSpeed 0.16.5,
the default, and 0.3.13, whose pipeline engine many published 3D-parallel runs
used, e.g. Megatron-LM v1.1.5's example); :data:`FRAMEWORKS` holds each key's
default release. A release is a whole table of its own rather than 0.16.5's with
exceptions, so every one of its values was read at its own version (and cites
it); :class:`FrameworkSpec` picks the release by ``version`` and checks the
options and precision against that release's. DeepSpeed's release tags 0.9.0 to
0.16.4 are a table each too (:data:`DEEPSPEED_TAGS`), built by one function from
the line each fact was read at in that tag (``_DS_LINES``), with the values that
tag's code gives; Megatron Core's 0.8.0 to 0.19.0 likewise (:data:`MEGATRON_TAGS`,
``_MEG_LINES``). A version is matched as a whole tag; any other is refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import check, check_int

__all__ = ["PRECISIONS", "Cited", "Framework", "FrameworkSpec", "FrameworkBehaviour",
           "FRAMEWORKS", "RELEASES", "DEFAULT_FRAMEWORK", "SAILOR_FRAMEWORK", "framework", "resolve",
           "P2P_MODES", "ALLREDUCE_PLACEMENTS", "check_mask_sized", "META_VALUES",
           "META_VALUE_BYTES", "attention_path", "TE_FLASH_MIN_CC"]

#: Bytes per value of each training precision.
PRECISIONS = {"fp32": 4, "fp16": 2, "bf16": 2}
P2P_MODES = ("blocking", "overlap", "batched")
ALLREDUCE_PLACEMENTS = ("after-backward", "overlap-backward")

_DS = "microsoft/DeepSpeed v0.16.5 (version.txt 0.16.5, commit 38327e0)"
_DS3 = "microsoft/DeepSpeed v0.3.13 (tag v0.3.13, version.txt 0.3.13)"
_SAILOR = ("eth-easl/sailor cf2c8e3 deepspeed/ (DeepSpeed 0.16.5, Dockerfile `pip install "
           "deepspeed==0.16.5`, with its pipe_engine.py, p2p.py and utils.py copied over it)")
_MEG = "NVIDIA/Megatron-LM commit d98e8a64dd (megatron/core/package_info.py 0.20.0)"

#: DeepSpeed's partition metadata (``PartitionedTensor.to_meta``, read alike at v0.3.13
#: ``runtime/utils.py:475-490``, v0.16.5 ``690-705`` and the Sailor artifact's
#: ``deepspeed/utils.py:737-752``): an int64 tensor of the tensor's number of dimensions, its
#: dimensions, the number of parts ``t``, the rank and the ``t + 1`` offsets of the parts, so
#: ``META_VALUES + t`` values for the hidden states a stage sends, of 3 dimensions (batch,
#: sequence, hidden: the word embedding of the ``[b, s]`` token ids, e.g. the Sailor runs'
#: Megatron-DeepSpeed ``megatron/model/opt_model.py:199-210``, whose transformer layers keep
#: that shape; Megatron-LM's ``[s, b, h]`` alike), each value :data:`META_VALUE_BYTES` bytes.
META_VALUES = 1 + 3 + 2 + 1
META_VALUE_BYTES = 8
_TORCH = "PyTorch torch/nn/parallel/distributed.py (DistributedDataParallel)"


@dataclass(frozen=True)
class Cited:
    """A framework fact and where in the framework's code it was read."""

    value: Any
    source: str


@dataclass(frozen=True)
class Framework:
    """One framework's behaviour (see the module docstring for each field)."""

    key: str
    title: str
    versions: tuple[str, ...]
    code: str
    p2p: Cited
    partitioned: Cited  # the activation sent as 1/t parts over the TP group
    grad_partitioned: Cited  # its gradient sent back as 1/t parts (else whole from every rank)
    gathers: Cited  # (forward, backward) all-gathers per micro-batch, or () when unpartitioned
    gather_bytes: Cited  # bytes per value of the all-gather (None: the activation's)
    allreduce: Cited
    barrier: Cited
    tied_first: Cited
    optimizer_barrier: Cited
    bucket_elements: Cited
    bucket_rule: Cited
    dp_bytes: Cited
    tied_bytes: Cited
    activation_bytes: Cited
    step_join: Cited  # who a stage waits for before its next step ("last-stage", "pipeline")
    pipe_groups: Cited  # a rank sends once per pipeline group it is in (stages of different TP)
    pipe_buffers: Cited  # received-input buffers beyond min(L - j, m) (DeepSpeed's; at least 2)
    hop_mask: Cited  # bytes per element of the seq x seq mask sent with each activation (0: none)
    pipeline: bool = True
    options: dict[str, tuple[tuple[Any, ...], str]] = field(default_factory=dict)
    tp_degrees: Cited | None = None  # the TP degrees the framework runs (None: any)
    #: the backward all-gather of the stage's output runs before the blocking receive of its
    #: gradient (True: DeepSpeed 0.3.13) rather than in the backward pass (None: there)
    recv_gather: Cited | None = None
    #: a tensor sent between stages goes as two blocking messages, its partition metadata
    #: (``META_VALUES + t`` int64 values) and then its part: "partitioned" (with each tensor
    #: the framework partitions over TP > 1 ranks: upstream DeepSpeed), "always" (every
    #: activation and gradient at any TP degree: the Sailor artifact's engine); None: no such
    #: message (the tensor alone)
    partition_meta: Cited | None = None
    #: options of another release of this key (the Sailor artifact's: of the upstream release
    #: its engine replaces) that this one lacks or ignores, with why: refused
    lacks: dict[str, str] = field(default_factory=dict)
    #: how a stage after the first holds what it receives: "clone" (upstream DeepSpeed 0.9.0
    #: to 0.16.5: one receive buffer, a clone per micro-batch in flight, and unpartitioned the
    #: forward pass's clone beside it); None: ``pipe_buffers``' slots, a whole buffer each
    recv_inputs: Cited | None = None
    #: per precision, how many blocking one-value all-reduces over the model-parallel group
    #: (every stage and TP rank of one pipeline) the optimizer step and what follows it run
    #: (None: none)
    optimizer_allreduces: Cited | None = None
    #: with bf16, DeepSpeed's BF16_Optimizer: the fp32 master weights and optimizer state
    #: partitioned over the data-parallel group, the updated bf16 weights all-gathered after
    #: each step; its value the all-gather's shard in elements (inf: one all_gather_into_tensor
    #: of the whole flat buffer). None: no such optimizer
    bf16_optimizer: Cited | None = None
    #: True: the gradients a rank holds live in the buffer the data-parallel all-reduce reduces,
    #: of its dtype (``dp_bytes``: Megatron-LM's fp32 ``main_grad`` under bf16), not the model's;
    #: None: in the model's dtype (``bytes_per_value``)
    grad_buffer: Cited | None = None
    #: Megatron-LM's attention: its default transformer_impl ("transformer_engine"), whose
    #: core attention keeps what :func:`attention_path` says; None: the model's own attention,
    #: which keeps its s x s matrices (Korthikanti et al. 2022, eq. 2)
    attention: Cited | None = None
    #: Megatron-LM's mixed-precision optimizer step: bytes a parameter of the fp32 copy of the
    #: gradients it makes where the gradient buffer holds 16-bit values (fp16 without
    #: accumulate_allreduce_grads_in_fp32), held from the step to the next step's zero_grad
    #: (None: no such copy). Not one of :meth:`facts`: a plan's sources name it only where it
    #: applies (``resolve``), so every other plan's stay as they were
    grad_copy: Cited | None = None

    @property
    def precisions(self) -> tuple[str, ...]:
        """The training precisions this release runs (those its tables have)."""
        return tuple(p for p in PRECISIONS if p in self.dp_bytes.value)

    def facts(self) -> dict[str, Cited]:
        """Every fact by name (for tables)."""
        return {k: getattr(self, k) for k in (
            "p2p", "partitioned", "grad_partitioned", "gathers", "gather_bytes", "allreduce",
            "barrier", "tied_first", "optimizer_barrier", "bucket_elements", "bucket_rule", "dp_bytes", "tied_bytes", "activation_bytes",
            "step_join", "pipe_groups", "pipe_buffers", "hop_mask", "recv_inputs",
            "optimizer_allreduces", "bf16_optimizer", "partition_meta", "grad_buffer",
            "attention")
            if getattr(self, k) is not None}


_PREC = {"fp32": 4, "fp16": 2, "bf16": 2}


def _recv_source(src: str, at: dict[str, int]) -> str:
    """Where upstream DeepSpeed's received inputs were read (``at``: the lines at ``src``)."""
    return (f"{src}: runtime/pipe/engine.py:{at['recv_alloc']} (one receive buffer, allocated "
            "once and kept across steps: the whole tensor, or with TP > 1 partitioned the "
            f"local 1/t part), {at['recv_clone']} and {at['recv_part']} (each micro-batch "
            f"received is cloned out of it) and {at['recv_keep']} (kept in its slot), "
            f"{at['fwd_clone']} (the forward pass clones it again: unpartitioned, that clone "
            "is the first layer's input, kept by the layer for the backward pass, beside the "
            f"slot's) or, partitioned, {at['fwd_full']}-{at['fwd_keep']} (the whole input "
            "rebuilt from the part replaces it in the slot and is the first layer's input), "
            f"{at['in_free']} (the slot freed once its gradient is sent); "
            f"runtime/pipe/schedule.py:{at['sg_first']} (a forward step sends the previous "
            "gradient before it receives: a stage holds its in-flight micro-batches' inputs, "
            "min(stages - stage_id, micro_batches), not its num_pipe_buffers slots)")

def _meta_source(src: str, at: dict[str, int]) -> str:
    """Where upstream DeepSpeed's partition metadata message was read (``at``: the lines)."""
    return (f"{src}: runtime/pipe/engine.py:{at['out_send']} (a partitioned output is sent as "
            f"(part.to_meta(), part.data(), ...)) and {at['send_loop']} (each item its own "
            f"blocking p2p.send: the metadata, then the part), {at['sg_meta']}-{at['sg_part']} "
            "(a partitioned gradient likewise: p2p.send of its metadata, then of its part), "
            f"{at['ra_loop']} and {at['rg_loop']} (received one by one, each a blocking "
            f"p2p.recv); runtime/utils.py:{at['meta_def']}-{at['meta_long']} (to_meta: an "
            "int64 tensor of 7 + t values for a 3-dimensional tensor)")


def _bf16_optimizer(src: str, at: dict[str, int]) -> Cited:
    """DeepSpeed's BF16_Optimizer as read at ``src`` (``at``: its lines there)."""
    one = at["ag_tensor"] > 0
    gather = (f"runtime/utils.py:{at['ag_tensor']} (one all_gather_into_tensor of the group's "
              "flat bf16 buffer over the data-parallel group, where torch has it, from 1.13; a "
              "group of one skipped)" if one else
              f"runtime/utils.py:{at['ag_shards']} (all_gather of the partitions in "
              "max(1, flat elements // allgather_bucket_size) shards, one after the other)")
    return Cited(
        math.inf if one else 5e8,
        f"{src}: runtime/engine.py:{at['bf16_acc']} (bf16 without ZeRO accumulates gradients in "
        f"fp32) and {at['bf16_sel']} (bf16 with fp32 accumulation: the BF16 wrapper, "
        "BF16_Optimizer); runtime/bf16_optimizer.py:"
        f"{at['bf16_flat']} (the stage's bf16 weights one flat buffer, padded to a multiple "
        f"of 2 x dp), {at['bf16_master']} (this rank's fp32 master weights: its 1/dp "
        "partition of it, the only parameters the base optimizer, and so its state, holds), "
        f"{at['bf16_hp']} (the fp32 gradients: a flat buffer of the whole, all-reduced by "
        f"runtime/pipe/engine.py's ReduceGrads), {at['bf16_lp']} (step: update_lp_params "
        f"after the optimizer step) and {at['bf16_ag']} (all_gather_dp_groups: the updated "
        "bf16 partitions all-gathered over the data-parallel group), " + gather
        + f"; runtime/zero/config.py:{at['ag_bucket']} (allgather_bucket_size 5e8); "
        f"runtime/pipe/engine.py:{at['bf16_keep']} (update_hp_grads(clear_lp_grads=False): "
        f"the bf16 gradients stay beside the fp32 ones); runtime/engine.py:{at['bf16_module']} "
        "(the model's weights cast to bf16)")


def _grad_option_source(src: str, at: dict[str, int]) -> str:
    """The source of DeepSpeed's ``pipeline.grad_partitioned`` option at one release (``at``: its
    lines, keys of ``_DS_ANCHORS``), with why TP > 1 takes it only as ``pipe_partitioned``."""
    pipe = "runtime/pipe/engine.py"
    return (f"{src}: runtime/config.py:{at['cfg_grad']} (DeepSpeed config "
            f"pipeline.grad_partitioned, default true; effective only with TP > 1, {pipe}:"
            f"{at['grad_part']}, is_grad_partitioned, computed apart from is_pipe_partitioned at "
            f"{at['pipe_part']}). At TP > 1 taken only alike with pipe_partitioned: the "
            "activation whole and the gradient partitioned, a stage sends the gradient as its "
            f"partition's metadata and 1/t part ({at['sg_meta']}-{at['sg_part']}) where the "
            f"previous stage, its output whole, receives one whole-size tensor ({at['rg_whole']}) "
            f"and then reads it as a partition ({at['bwd_grad']}): no assert, the messages do not "
            "match and it does not train; the activation partitioned and the gradient whole, a "
            f"stage all-gathers its output before each gradient receive ({at['rg_full']}), a "
            "step order dtsim models for DeepSpeed 0.3.13 only")


#: DeepSpeed 0.16.5's lines of the places ``_grad_option_source`` cites
_DS_GRAD_AT = dict(cfg_grad=468, grad_part=145, pipe_part=144, sg_meta=1094, sg_part=1095,
                   rg_whole=1204, bwd_grad=848, rg_full=1167)


_DEEPSPEED_COMMON = dict(
    p2p=Cited("blocking",
              f"{_DS}: deepspeed/runtime/pipe/p2p.py:59-60 (send is dist.send, recv dist.recv, "
              "blocking) and runtime/pipe/schedule.py:438,454 ('The communication is blocking and "
              "must be paired'), issued in TrainSchedule order (schedule.py:189-244)"),
    partitioned=Cited(True,
                      f"{_DS}: runtime/config.py:467-468 (pipeline pipe_partitioned and "
                      "grad_partitioned default True); runtime/pipe/engine.py:744-757 (the output "
                      "becomes a PartitionedTensor over the TP group and its local part is sent)"),
    grad_partitioned=Cited(True, f"{_DS}: runtime/config.py:468 (pipeline grad_partitioned "
                           "default True), runtime/pipe/engine.py:145 (is_grad_partitioned with "
                           "TP > 1) and 1062-1095 (the input's gradient becomes a "
                           "PartitionedTensor over the TP group; its meta and local part are "
                           "sent)"),
    allreduce=Cited("after-backward",
                    f"{_DS}: runtime/pipe/engine.py:81 (enable_backward_allreduce = False: no "
                    "reduction during backward) and runtime/pipe/schedule.py:238-241 "
                    "(ReduceTiedGrads, ReduceGrads, OptimizerStep at the last step of the batch)"),
    tied_first=Cited(True, f"{_DS}: runtime/pipe/schedule.py:239-240 (ReduceTiedGrads before "
                     "ReduceGrads)"),
    optimizer_allreduces=Cited(
        {"fp32": 0, "fp16": 2, "bf16": 1},
        f"{_DS}: fp16: runtime/fp16/fused_optimizer.py:259 (has_overflow: the overflow flag "
        "all-reduced, runtime/utils.py:263) and 314 (get_flattened_grad_norm: the gradient "
        "norm all-reduced, runtime/utils.py:444, then .item()), both over "
        "mpu.get_model_parallel_group(), the norm whether or not it clips; bf16: "
        "runtime/bf16_optimizer.py:276 (get_global_norm_of_tensors, the norm all-reduced at "
        "runtime/utils.py:890); fp32: none (runtime/engine.py:2216-2225, clipping only with "
        "gradient_clipping > 0, constants.py:215 default 0.)"),
    optimizer_barrier=Cited(
        {"fp32": False, "fp16": True, "bf16": True},
        f"{_DS}: fp32: runtime/engine.py:2216-2225 (_take_model_step clips, over the "
        "model-parallel group, only with gradient_clipping > 0; constants.py:215 "
        "GRADIENT_CLIPPING_DEFAULT = 0.); fp16: runtime/fp16/fused_optimizer.py:259 (step's "
        "has_overflow, runtime/utils.py:263: all_reduce over mpu.get_model_parallel_group()); "
        "bf16: runtime/bf16_optimizer.py:276-277 (the global gradient norm over the same "
        "group); the group is every stage and TP rank of one data-parallel index "
        "(runtime/pipe/topology.py:300-313, 442-443)"),
    bucket_elements=Cited(500_000_000.0,
                          f"{_DS}: runtime/engine.py:111 (MEMORY_OPT_ALLREDUCE_SIZE = 500000000), "
                          "runtime/pipe/engine.py:300 (allreduce_gradients(bucket_size="
                          "MEMORY_OPT_ALLREDUCE_SIZE)), runtime/engine.py:2523-2533 (a bucket is "
                          "reduced once it holds more than that many elements)"),
    bucket_rule=Cited("megatron", f"{_DS}: runtime/pipe/engine.py:81 (the pipeline engine never "
                      "overlaps its all-reduce with the backward pass; one forced to, with "
                      "--sync allreduce:overlap=backward, is cut as Megatron-LM's)"),
    dp_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 2},
                   f"{_DS}: runtime/engine.py:939-950 (communication_data_type: the config's, "
                   "else fp16 with fp16, bf16 with bf16, else fp32) and 2491-2497 (a bucket is "
                   "cast to it before dist.all_reduce; with bf16 the BF16_Optimizer's fp32 "
                   "gradients, runtime/pipe/engine.py:298-304, are cast too)"),
    tied_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                     f"{_DS}: runtime/pipe/engine.py:287-291 (dist.all_reduce of weight.grad, the "
                     "model's dtype; with bf16 of weight._hp_grad, fp32; no cast)"),
    activation_bytes=Cited(_PREC, f"{_DS}: runtime/pipe/engine.py:1038-1041 (the stage's "
                           "output is sent as computed, in the model's dtype)"),
    pipe_groups=Cited(False, f"{_DS}: runtime/pipe/topology.py:244-248 "
                      "(PipeModelDataParallelTopology: one model-parallel degree for every "
                      "stage; a stage sends each tensor once to its peer)"),
    pipe_buffers=Cited(0, f"{_DS}: runtime/pipe/schedule.py:255-256 (TrainSchedule."
                       "num_pipe_buffers: max(2, min(stages - stage_id, micro_batches))), "
                       "runtime/pipe/engine.py:1410 (reserved per batch)"),
    hop_mask=Cited(0, f"{_DS}: runtime/pipe/engine.py:759 and 1039-1041 (a stage sends the "
                   "partition metadata, its part of the activation and whatever else its last "
                   "layer returns) and 230 (a mask cast to fp16, 1028-1031, only for a class "
                   "named GPT2ModelPipe): a model whose stages pass the hidden states alone, "
                   "as Megatron-DeepSpeed's GPTModelPipe with its mask precomputed in "
                   "args.attn_mask (eth-easl/sailor cf2c8e3 third_party/Megatron-DeepSpeed/"
                   "train_llm.py:89-105), sends no mask"),
    step_join=Cited("last-stage",
                    f"{_DS}: runtime/pipe/engine.py:386-392 (train_batch: the schedule, then "
                    "_aggregate_total_loss) and 583-640 (the last stage all-reduces the loss "
                    "over its data-parallel group, 602, then broadcasts it over its pipeline, "
                    "629; every other stage receives it, 639): a stage starts its next step "
                    "once the last stages have ended theirs"),
    options={
        "communication_data_type": (("fp32", "fp16", "bf16"),
                                    f"{_DS}: runtime/config.py:252-266 (DeepSpeed config key "
                                    "communication_data_type; sets dp_bytes)"),
        "pipe_partitioned": ((True, False), f"{_DS}: runtime/config.py:467 (DeepSpeed config "
                             "pipeline.pipe_partitioned; effective only with TP > 1, "
                             "runtime/pipe/engine.py:144)"),
        "grad_partitioned": ((True, False), _grad_option_source(_DS, _DS_GRAD_AT)),
    },
)

#: DeepSpeed's pipeline engine as released (what Megatron-DeepSpeed runs by default).
DEEPSPEED = Framework(
    key="deepspeed", title="DeepSpeed pipeline engine (PipelineEngine, TrainSchedule)",
    versions=("0.16.5",), code=_DS,
    gathers=Cited((1, 2), f"{_DS}: runtime/pipe/engine.py:719-726 (a stage after the first "
                  "rebuilds its input, part_input.full(): one all-gather per forward pass) and "
                  "826-848 (a stage before the last rebuilds its output, part_output.full(), and "
                  "the received gradient, part_grad.full(): two per backward pass)"),
    gather_bytes=Cited(None, f"{_DS}: runtime/utils.py:671-680 (PartitionedTensor.full: "
                       "all_gather_into_tensor in the tensor's dtype)"),
    barrier=Cited(False, f"{_DS}: runtime/pipe/engine.py:275-300 (no barrier: a stage reduces "
                  "after its own last step; the tied all-reduce joins the first and last stage)"),
    lacks={"fp32_allreduce": "DeepSpeed 0.16.5's runtime/config.py reads no such key (0.3.13's: "
                             "version=0.3.13); its all-reduce dtype is communication_data_type, "
                             "runtime/engine.py:938-950"},
    recv_inputs=Cited("clone", _recv_source(_DS, dict(
        recv_alloc=1119, recv_clone=1123, recv_part=1137, recv_keep=1149, fwd_clone=716,
        fwd_full=726, fwd_keep=732, in_free=1106, sg_first=216))),
    partition_meta=Cited("partitioned", _meta_source(_DS, dict(
        out_send=759, send_loop=1041, sg_meta=1094, sg_part=1095, ra_loop=1136, rg_loop=1211,
        meta_def=690, meta_long=705)) + "; sent with every micro-batch: the cache of 0.12.6 "
        "(4559dad) keeps the receiver's host copy of it, runtime/pipe/engine.py:720-721 and "
        "843-844, not the send"),
    bf16_optimizer=_bf16_optimizer(_DS, dict(
        bf16_acc=1018, bf16_sel=1347, bf16_module=1231, ag_bucket=128, bf16_flat=141,
        bf16_master=156, bf16_hp=162, bf16_lp=312, bf16_ag=432, ag_tensor=967, ag_shards=979,
        bf16_keep=867)),
    **_DEEPSPEED_COMMON,
)

#: DeepSpeed 0.3.13's pipeline engine (Megatron-LM v1.1.5's 3D-parallelism example ran it, e.g.
#: the AMP artifact, NeurIPS 2022, whose vendored copy changes no value below: only prints,
#: timers, an exit after step 101, a layer partition read from a file). Every value read at
#: tag v0.3.13; where it differs from 0.16.5 the text says so.
DEEPSPEED_0313 = Framework(
    key="deepspeed", title="DeepSpeed 0.3.13 pipeline engine (PipelineEngine, TrainSchedule)",
    versions=("0.3.13",), code=_DS3,
    p2p=Cited("blocking",
              f"{_DS3}: deepspeed/runtime/pipe/p2p.py:31-55 (send and recv are both "
              "dist.broadcast over the two ranks' group, async_op forced False at 34 and 48: "
              "blocking) and runtime/pipe/schedule.py:426,442,457,471 ('The communication is "
              "blocking and must be paired'), in TrainSchedule order (schedule.py:189-241); "
              "unlike 0.16.5 a forward step receives its activation before sending the "
              "previous gradient and a backward step sends the previous activation before "
              "receiving its gradient (206-219), and the all-gather of _exec_recv_grads "
              "(runtime/pipe/engine.py:908-918) between the two: dtsim runs this order "
              "(sim.training.schedules.deepspeed_program, order 0.3.13; recv_gather)"),
    partitioned=Cited(True, f"{_DS3}: runtime/pipe/engine.py:106 (is_pipe_partitioned = "
                      "is_model_parallel: always with TP > 1, no configuration key, "
                      "runtime/config.py:367-378) and 513-520 (the output becomes a "
                      "PartitionedTensor over the TP group; its meta and local part are sent)"),
    grad_partitioned=Cited(False, f"{_DS3}: runtime/pipe/engine.py:107 (is_grad_partitioned = "
                           "False), 843-850 (_exec_send_grads sends each floating-point "
                           "input's whole .grad; the input is the full tensor rebuilt at "
                           "499-504) and 920-939 (_exec_recv_grads receives into a buffer of "
                           "the whole output's size, used as is at 584: every TP rank sends "
                           "and receives the whole gradient)"),
    gathers=Cited((1, 1), f"{_DS3}: runtime/pipe/engine.py:493-499 (a stage after the first "
                  "rebuilds its input, part_input.full(): one all-gather per forward pass) and "
                  "910-915 (a stage before the last rebuilds its output, part_output.full(), "
                  "in _exec_recv_grads before receiving the gradient; the gradient is whole, "
                  "565-592: one per backward pass)"),
    gather_bytes=Cited(None, f"{_DS3}: runtime/utils.py:445-466 (PartitionedTensor.full: "
                       "dist.all_gather into a buffer of the local part's dtype)"),
    allreduce=Cited("after-backward",
                    f"{_DS3}: runtime/pipe/engine.py:56 (enable_backward_allreduce = False) and "
                    "runtime/pipe/schedule.py:234-237 (ReduceTiedGrads, ReduceGrads, "
                    "OptimizerStep at the last step of the batch)"),
    barrier=Cited(False, f"{_DS3}: runtime/pipe/engine.py:208-226 (no barrier: a stage reduces "
                  "after its own last step; the tied all-reduce joins the first and last stage)"),
    tied_first=Cited(True, f"{_DS3}: runtime/pipe/schedule.py:235-236 (ReduceTiedGrads before "
                     "ReduceGrads)"),
    recv_gather=Cited(True, f"{_DS3}: runtime/pipe/engine.py:908-918 (_exec_recv_grads, with "
                      "is_pipe_partitioned and not is_grad_partitioned: the stage's output "
                      "rebuilt, part_output.full(), an all-gather over the TP group) before "
                      "920-939 (the blocking p2p.recv of the gradient); RecvGrad follows the "
                      "step's SendActivation (runtime/pipe/schedule.py:214-219) and precedes "
                      "BackwardPass (229-231), which gathers nothing more (565-582)"),
    optimizer_barrier=Cited(
        {"fp32": False, "fp16": True},
        f"{_DS3}: fp32: runtime/engine.py:1046-1056 (_take_model_step clips only with "
        "gradient_clipping > 0, constants.py:179 GRADIENT_CLIPPING_DEFAULT = 0., and then by "
        "torch.nn.utils.clip_grad_norm_ of the rank's own parameters: no collective); fp16: "
        "runtime/fp16/fused_optimizer.py:212 (step's has_overflow; runtime/utils.py:126-129 "
        "all_reduce over mpu.get_model_parallel_group()) and 248 (then the gradient norm, "
        "runtime/utils.py:171-220, all-reduced over the same group at 217 whether or not it "
        "clips: two one-value all-reduces, timed by optimizer_allreduces); Megatron-LM v1.1.5's "
        "apex FusedAdam (DachengLi1/AMP Megatron-LM-v1.1.5-3D_parallelism/megatron/training.py:"
        "25, 294-302) makes it FP16_Optimizer (runtime/engine.py:689-701); the mpu is the "
        "pipeline grid "
        "(deepspeed/__init__.py:134, runtime/pipe/module.py:504-505), whose group is every stage "
        "and TP rank of one data-parallel index (runtime/pipe/topology.py:303-312, 441-442); "
        "no bf16 in this release"),
    optimizer_allreduces=Cited(
        {"fp32": 0, "fp16": 2},
        f"{_DS3}: fp16: runtime/fp16/fused_optimizer.py:212 (has_overflow: the flag "
        "all-reduced over mpu.get_model_parallel_group(), runtime/utils.py:126-129) and 248 "
        "(get_grad_norm: the norm all-reduced over the same group, runtime/utils.py:217, "
        "whether or not it clips); fp32: none (runtime/engine.py:1046-1056: clipping, off by "
        "default, by the rank's own torch.nn.utils.clip_grad_norm_)"),
    bucket_elements=Cited(500_000_000.0,
                          f"{_DS3}: runtime/engine.py:47 (MEMORY_OPT_ALLREDUCE_SIZE = "
                          "500000000), runtime/pipe/engine.py:221-226 (buffered_allreduce_"
                          "fallback(elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE)), "
                          "runtime/engine.py:1238-1249 (a bucket is reduced once it holds more "
                          "than that many elements)"),
    bucket_rule=Cited("megatron", f"{_DS3}: runtime/pipe/engine.py:56 (the pipeline engine never "
                      "overlaps its all-reduce with the backward pass; one forced to, with "
                      "--sync allreduce:overlap=backward, is cut as Megatron-LM's)"),
    dp_bytes=Cited({"fp32": 4, "fp16": 2},
                   f"{_DS3}: runtime/engine.py:1251-1279 (buffered_allreduce_fallback: the "
                   "gradients grouped by dtype, split_half_float_double_csr at 56-68) and 1206-1212 "
                   "(allreduce_bucket flattens them and all-reduces in their dtype, fp16 with "
                   "fp16, unless fp32_allreduce: tensor.float()); no communication_data_type"),
    tied_bytes=Cited({"fp32": 4, "fp16": 2},
                     f"{_DS3}: runtime/pipe/module.py:405-409 (dist.all_reduce of weight.grad, "
                     "the model's dtype; no cast)"),
    activation_bytes=Cited({"fp32": 4, "fp16": 2},
                           f"{_DS3}: runtime/pipe/engine.py:788-792 (the stage's output, or its "
                           "partition, sent as computed, in the model's dtype)"),
    step_join=Cited("last-stage",
                    f"{_DS3}: runtime/pipe/engine.py:280-284 (train_batch: the schedule, then "
                    "_aggregate_total_loss) and 388-418 (the last stage all-reduces the loss "
                    "over its data-parallel group, 398, then broadcasts it over its pipeline, "
                    "403; every other stage receives it, 412): a stage starts its next step "
                    "once the last stages have ended theirs"),
    hop_mask=Cited(2, f"{_DS3}: runtime/pipe/engine.py:520 (a partitioned stage sends the "
                   "metadata, its part and outputs[1], the second tensor its last layer "
                   "returns, whole from every TP rank; at TP 1, 106 and 513, the output "
                   "(hidden, mask) as returned) and 776-781 and 788-792 (for "
                   "GPT2ModelPipe that tensor, the attention mask, cast to half: 2 bytes an "
                   "element, then sent: the tuple item by item, each its own blocking "
                   "p2p.send, a dist.broadcast over the pair's group, p2p.py:31-41, the mask "
                   "last; received likewise, 873-886), 822-830 (dropped from the gradient "
                   "sent back); "
                   "Megatron-LM v1.1.5's 3D example (DachengLi1/AMP DeepSpeed/DeepSpeedExamples/"
                   "Megatron-LM-v1.1.5-3D_parallelism) forwards its mask through every stage: "
                   "megatron/model/language_model.py:252-261 (EmbeddingPipe returns "
                   "(embeddings, attention_mask)), model/transformer.py:505-513 "
                   "(ParallelTransformerLayerPipe returns (output, attention_mask)), "
                   "model/gpt2_model.py:174 and 187 (dropped after the last transformer "
                   "layer), megatron/utils.py:156-161 and 199 (1 x 1 x seq x seq, boolean; "
                   "reset_attention_mask off, arguments.py:715)"),
    partition_meta=Cited("partitioned", f"{_DS3}: runtime/pipe/engine.py:520 (a partitioned "
                         "output is sent as (part.to_meta(), part.data(), outputs[1])) and "
                         "788-792 (each its own blocking p2p.send, a dist.broadcast over the "
                         "pair's group, p2p.py:31-41: the metadata, then the part, then the "
                         "mask), 873-885 (received one by one, the metadata into a long "
                         "buffer); the gradient is not partitioned (107) and goes alone "
                         "(832-850, 929-939); runtime/utils.py:475-490 (to_meta: an int64 "
                         "tensor of 7 + t values for a 3-dimensional tensor); sent with every "
                         "micro-batch"),
    pipe_buffers=Cited(1, f"{_DS3}: runtime/pipe/schedule.py:243-247 (TrainSchedule."
                       "num_pipe_buffers: max(2, min(stages - stage_id + 1, micro_batches)), "
                       "one more than 0.16.5's), runtime/pipe/engine.py:1149 (reserved per "
                       "batch)"),
    pipe_groups=Cited(False, f"{_DS3}: runtime/pipe/topology.py:246-249 "
                      "(PipeModelDataParallelTopology: one model-parallel degree for every "
                      "stage) and 372-387 (one p2p group per rank and its next stage's rank)"),
    options={
        "fp32_allreduce": ((True, False), f"{_DS3}: runtime/constants.py:190-191 (DeepSpeed "
                           "config key fp32_allreduce, default False), runtime/config.py:"
                           "166-167, runtime/engine.py:1211-1212 (the bucket cast to fp32 "
                           "before dist.all_reduce; sets dp_bytes 4)"),
        "seq_length": ((), f"{_DS3}: runtime/pipe/engine.py:520 and 776-792 (the mask every "
                       "hop carries) as Megatron-LM v1.1.5's 3D example builds it: its "
                       "megatron/arguments.py:694 (--seq-length), megatron/utils.py:156-161 "
                       "(1 x 1 x seq x seq); without the option the model profile's shape "
                       "gives the sequence"),
    },
    lacks={
        "communication_data_type": "DeepSpeed 0.3.13's runtime/config.py reads no such key "
                                   "(its fp32_allreduce casts the all-reduce to fp32)",
        "pipe_partitioned": "DeepSpeed 0.3.13 always partitions with TP > 1 "
                            "(runtime/pipe/engine.py:106; runtime/config.py:367-378 has no "
                            "such pipeline key)",
        "grad_partitioned": "DeepSpeed 0.3.13 never partitions the gradient "
                            "(runtime/pipe/engine.py:107, is_grad_partitioned = False; "
                            "runtime/config.py:367-378 has no such pipeline key)",
    },
)

#: The Sailor artifact's DeepSpeed (what the shipped runs ran): 0.16.5 with its own pipe engine.
SAILOR = Framework(
    key="sailor-deepspeed", title="DeepSpeed 0.16.5 pipeline engine as modified by the Sailor "
    "artifact (the shipped runs)", versions=("0.16.5",), code=_SAILOR,
    gathers=Cited((1, 1), f"{_SAILOR}: deepspeed/pipe_engine.py:757 (forward: reconstruct_tensor "
                  "of the received parts over the TP group) and 875 (backward: reconstruct_tensor "
                  "of the received gradient), each one all_gather_into_tensor "
                  "(deepspeed/utils.py:666)"),
    gather_bytes=Cited(4, f"{_SAILOR}: deepspeed/utils.py:631 (reconstruct_tensor gathers into a "
                       "float32 buffer whatever the model's dtype)"),
    barrier=Cited(True, f"{_SAILOR}: deepspeed/pipe_engine.py:318 (dist.barrier() after the tied "
                  "all-reduce, 'for measurements': every stage waits for all before its "
                  "data-parallel all-reduce)"),
    **{**_DEEPSPEED_COMMON,
       "grad_partitioned": Cited(True, f"{_SAILOR}: deepspeed/pipe_engine.py:875 (the "
                                 "received gradient parts rebuilt by reconstruct_tensor over "
                                 "the TP group: each rank sent its part)"),
       "pipe_groups": Cited(True, f"{_SAILOR}: deepspeed/topology.py:103-127 (pipeline "
                            "group j of a pipeline takes, at a stage of TP t, the rank "
                            "j // (T / t), T the pipeline's largest TP degree: T groups) and "
                            "421-429 (a rank's groups); deepspeed/pipe_engine.py:1069-1071 and "
                            "1123-1125 (each activation and gradient part sent once per group "
                            "the rank is in, in group order), 1150-1162 and 1215-1220 (received "
                            "once per group, in group order); deepspeed/p2p.py:72-94 and "
                            "122-144 (each a blocking dist.send / dist.recv)"),
       "step_join": Cited("last-stage", f"{_SAILOR}: deepspeed/pipe_engine.py:417-423 "
                          "(train_batch: the schedule, then _aggregate_total_loss) and 614-675 "
                          "(the loss all-reduced over the last stages' data-parallel group, "
                          "then broadcast over each pipeline); its Megatron-DeepSpeed "
                          "training.py:941-947 times each step between torch.cuda.synchronize() "
                          "calls"),
       "hop_mask": Cited(0, f"{_SAILOR}: deepspeed/pipe_engine.py:788 and 1066-1071 (a stage "
                         "sends the metadata, its part and its last layer's other outputs, once "
                         "per group), 250 (a mask cast only for a class named GPT2ModelPipe), "
                         "760 (a receiver keeps the activation alone); the runs' "
                         "third_party/Megatron-DeepSpeed/train_llm.py:89-105 precomputes the "
                         "mask in args.attn_mask, so OPTModelPipe, GPTNeoModelPipe and "
                         "LlamaModelPipe pass the hidden states alone (megatron/model/"
                         "opt_model.py:237-239 and 565-570, gpt_neo_model.py:507-509 and "
                         "376-381, llama_model.py:223-225 and 633-638)"),
       "p2p": Cited("blocking", f"{_SAILOR}: deepspeed/p2p.py:45-69 and 97-120 (send and recv "
                    "call dist.send / dist.recv, blocking, for each pipeline group) in "
                    "DeepSpeed's TrainSchedule order (deepspeed/pipe_engine.py:417-420)"),
       # the artifact's engine reads pipeline.pipe_partitioned and then ignores it: taking
       # the option would time whole tensors where the engine sends parts
       "options": {k: v for k, v in _DEEPSPEED_COMMON["options"].items()  # type: ignore
                   if k not in ("pipe_partitioned", "grad_partitioned")},
       "lacks": {"pipe_partitioned": "the Sailor artifact's engine reads the key "
                                     "(deepspeed/pipe_engine.py:162-164) but never uses it: "
                                     "every stage but the last partitions its output over its "
                                     "TP group whatever it says, even of one rank (772-788), "
                                     "and every gradient (1101-1102)",
                 "grad_partitioned": "the Sailor artifact's engine reads the key "
                                     "(deepspeed/pipe_engine.py:163, 165) but sends every "
                                     "gradient partitioned over its TP group whatever it says "
                                     "(1101-1102)"}},
    partition_meta=Cited("always", f"{_SAILOR}: deepspeed/pipe_engine.py:772-788 (every stage "
                         "but the last partitions its output over its TP group, whatever "
                         "pipe_partitioned says and even of one rank, and sends (part.to_meta(), "
                         "part.data(), ...)), 1069-1071 (each item its own blocking send, per "
                         "pipeline group: the metadata, then the part), 1101-1102 and 1123-1125 "
                         "(every gradient likewise), 1150-1161 and 1216-1221 (received one by "
                         "one); deepspeed/p2p.py:72-94 and 122-144 (each a dist.send or "
                         "dist.recv); deepspeed/utils.py:737-752 (to_meta: an int64 tensor of "
                         "7 + t values for a 3-dimensional tensor); sent with every micro-batch"),
    tp_degrees=Cited((1, 2, 4), "eth-easl/sailor cf2c8e3 third_party/Megatron-DeepSpeed/megatron/"
                     "core/parallel_state.py:112-114 (initialize_model_parallel_from_file: "
                     "assert tp in {1,2,4}, 'Only TP in {1,2,4} is allowed!', for every "
                     "replica's TP degree), run by megatron/initialize.py:262-266 when "
                     "--distributed-config-file is given, as the artifact's workers give it "
                     "(sailor/Worker/run_agent.sh:50, elastic_worker_agent.py:144)"),
)

#: Megatron-LM's attention facts (:func:`attention_path`), read at every tag as ``_MEG_ANCHORS``
#: and checked alike (``tests/test_megatron_attention_memory.py``); a table apart so that the
#: rows of ``_MEG_LINES`` stay as they were read.
_MT = "core/transformer/transformer_config.py"
_MAT = "core/transformer/attention.py"
_MDPA = "core/transformer/dot_product_attention.py"
_MEG_ATTN_ANCHORS: tuple[tuple[str, str, str, str], ...] = (
    ("impl_arg", "training/arguments.py", "group.add_argument('--transformer-impl', default='transformer_engine',", ""),
    ("impl_cfg", _MT, "transformer_impl: Literal[", ""),
    ("attn_cfg", _MT, "attention_backend: AttnBackend = AttnBackend.auto", ""),
    ("attn_local", "training/arguments.py", "if args.attention_backend == AttnBackend.local:", ""),
    ("te_dpa", "core/extensions/transformer_engine.py",
     "class TEDotProductAttention(te.pytorch.DotProductAttention)", ""),
    ("te_dpa_old", "core/transformer/custom_layers/transformer_engine.py",
     "class TEDotProductAttention(te.pytorch.DotProductAttention)", ""),
    ("local_softmax", _MDPA, "self.scale_mask_softmax(", ""),
    ("local_dropout", _MDPA, "attention_probs = self.attention_dropout(attention_probs)", ""),
    ("attn_drop", _MT, "attention_dropout: float = 0.1", ""),
    ("ckpt_attn", _MAT, "self.checkpoint_core_attention = ", ""),
    ("ckpt_use", _MAT, "if self.checkpoint_core_attention and self.training:", ""),
    ("recompute_act", "training/arguments.py", "args.recompute_granularity = 'selective'", ""),
    ("sel_method", "training/arguments.py", "if args.recompute_granularity == 'selective':", ""),
)
_MEG_ATTN_LINES: dict[str, tuple[int, ...]] = {
    "0.8.0": (668, 0, 0, 0, 0, 404, 160, 167, 46, 103, 322, 221, 460),
    "0.9.0": (721, 0, 0, 0, 429, 0, 157, 164, 54, 95, 290, 236, 492),
    "0.10.0": (837, 0, 0, 0, 546, 0, 166, 173, 54, 115, 436, 281, 576),
    "0.11.0": (909, 0, 51, 227, 604, 0, 166, 173, 74, 120, 450, 288, 628),
    "0.12.0": (1078, 0, 60, 319, 609, 0, 166, 173, 83, 137, 623, 380, 750),
    "0.12.1": (1078, 0, 60, 319, 609, 0, 166, 173, 83, 137, 623, 380, 750),
    "0.12.2": (1088, 0, 60, 329, 609, 0, 166, 173, 83, 137, 623, 390, 760),
    "0.12.3": (1088, 0, 60, 329, 609, 0, 166, 173, 83, 137, 623, 390, 760),
    "0.13.0": (1205, 0, 101, 386, 705, 0, 177, 184, 124, 161, 724, 447, 842),
    "0.13.1": (1205, 0, 101, 386, 705, 0, 177, 184, 124, 161, 724, 447, 842),
    "0.14.0": (1245, 0, 101, 365, 789, 0, 177, 184, 124, 177, 791, 417, 828),
    "0.15.0": (1339, 0, 102, 378, 831, 0, 200, 208, 130, 186, 865, 461, 914),
    "0.15.1": (1339, 0, 102, 378, 831, 0, 200, 208, 130, 186, 865, 461, 914),
    "0.15.2": (1339, 0, 102, 378, 831, 0, 200, 208, 130, 186, 865, 461, 914),
    "0.15.3": (1339, 0, 102, 378, 831, 0, 200, 208, 130, 186, 865, 461, 914),
    "0.16.0": (0, 880, 110, 321, 1140, 0, 210, 218, 140, 328, 1134, 431, 899),
    "0.16.1": (0, 880, 110, 321, 1140, 0, 210, 218, 140, 328, 1134, 431, 899),
    "0.17.0": (0, 985, 125, 322, 1351, 0, 210, 218, 155, 328, 1143, 499, 1185),
    "0.17.1": (0, 998, 125, 322, 1351, 0, 210, 218, 155, 328, 1143, 499, 1190),
    "0.18.0": (0, 1111, 138, 429, 1583, 0, 210, 218, 168, 373, 1268, 606, 1370),
    "0.18.2": (0, 1111, 138, 429, 1583, 0, 210, 218, 168, 373, 1268, 606, 1370),
    "0.19.0": (0, 1220, 144, 434, 1770, 0, 210, 218, 184, 392, 1544, 590, 1385),
}
#: The same places at d98e8a64dd (core 0.20.0, :data:`MEGATRON`'s commit).
_MEG_ATTN_020 = (0, 1314, 151, 436, 2041, 0, 210, 218, 191, 392, 1555, 608, 1425)
#: The least CUDA compute capability on which Transformer Engine runs flash or fused attention
#: (``transformer_engine/pytorch/attention/dot_product_attention/utils.py``,
#: get_attention_backend, "Filter: Compute capability": FlashAttention 2 and FusedAttention
#: disabled below sm80; "Filter: Data type": both only for fp16 and bf16 inputs).
TE_FLASH_MIN_CC = 8.0
_TE_RULE = ("Transformer Engine's get_attention_backend (transformer_engine/pytorch/attention/"
            "dot_product_attention/utils.py: flash and fused attention disabled below compute "
            "capability 8.0 and for inputs other than fp16 and bf16, the unfused attention "
            "left)")


def _megatron_attention(src: str, at: dict[str, int], version: str
                        ) -> tuple[Cited, dict[str, tuple[tuple[Any, ...], str]], dict[str, str]]:
    """Megatron-LM's attention at ``src`` (``at``: the lines of ``_MEG_ATTN_ANCHORS`` there):
    the fact, its options and the options it lacks."""
    args = "training/arguments.py"
    impl = (f"{args}:{at['impl_arg']} (--transformer-impl, default transformer_engine)"
            if at["impl_arg"] else f"{_MT}:{at['impl_cfg']} (transformer_impl, default "
            "transformer_engine; --transformer-impl generated from it)")
    te = (f"core/extensions/transformer_engine.py:{at['te_dpa']}" if at["te_dpa"] else
          f"core/transformer/custom_layers/transformer_engine.py:{at['te_dpa_old']}")
    fact = Cited("transformer_engine", (
        f"{src}: {impl}: the GPT layer's core attention is Transformer Engine's "
        f"DotProductAttention ({te}, TEDotProductAttention), which runs flash or fused "
        f"attention in fp16 and bf16 on compute capability {TE_FLASH_MIN_CC:.1f} or later and keeps "
        f"no s x s matrix (Dao et al. 2022), else its unfused attention ({_TE_RULE}); the "
        f"unfused and the local attention ({_MDPA}:{at['local_softmax']} the softmax, "
        f"{at['local_dropout']} its dropout, attention_dropout 0.1 at {_MT}:{at['attn_drop']}) "
        "keep the softmax output, the dropout mask and the dropped probabilities, 5 a s^2 "
        "bytes a sample (Korthikanti et al. 2022, eq. 2)"))
    options: dict[str, tuple[tuple[Any, ...], str]] = {
        "transformer_impl": (("transformer_engine", "local"), f"{src}: {impl} (local: Megatron "
                             f"Core's own layers, whose attention is the local one, {_MDPA}:"
                             f"{at['local_softmax']}-{at['local_dropout']})"),
        "recompute_granularity": (("selective",), (
            f"{src}: {args}:{at['recompute_act']} (--recompute-activations sets selective), "
            f"{at['sel_method']} (selective takes no --recompute-method); {_MAT}:"
            f"{at['ckpt_attn']} and {at['ckpt_use']} (the core attention checkpointed: none of "
            "it kept, its forward rerun in the backward pass; Korthikanti et al. 2022, section "
            "4.3). Full recomputation is not modelled")),
    }
    lacks: dict[str, str] = {}
    if at["attn_cfg"]:
        options["attention_backend"] = (
            ("auto", "flash", "fused", "unfused", "local"),
            f"{src}: {_MT}:{at['attn_cfg']} (attention_backend, default auto: Transformer Engine "
            f"chooses among flash, fused and unfused; {_TE_RULE}), {args}:{at['attn_local']} "
            "(local only with --spec local, a layer spec dtsim does not model)")
    else:
        lacks["attention_backend"] = (
            f"Megatron-LM core {version} has no attention_backend (added in core 0.11.0, "
            f"{_MT}:51 at core_v0.11.0): Transformer Engine chooses its backend itself, as "
            "auto lets it")
    return fact, options, lacks


_ATTN_020 = _megatron_attention(_MEG, dict(zip((a[0] for a in _MEG_ATTN_ANCHORS), _MEG_ATTN_020,
                                                strict=True)), "0.20.0")

#: The distributed optimizer's places (``_MEG_DO_ANCHORS``, below) at d98e8a64dd, the
#: release of :data:`MEGATRON` (0: absent), checked against a clone by
#: ``tests/test_megatron_dist_optimizer.py``.
_MEG_DO_MAIN: dict[str, int] = dict(
    do_cfg=29, opg_cfg=21, do_arg=3156, opg_arg=3148, opg_if=1024, opg_assert=1029,
    grad_sync=600, rs_old=782, rs_new=718, param_sync=383, ag_old=0, ag_new=521, shard_main=445,
    shard_grad=2792, step_rg=3168, step_ag=3175, mp_group_do=0, stats_group_do=796,
    pre_hook=517, finish_ps=538, dispatch_ps=557, align_off=1013, fp16_copy=1097,
    zero_grad=3044)


def _dist_optimizer_source(src: str, at: dict[str, int], extra: str = "") -> str:
    """Where Megatron-LM's distributed optimizer was read (``at``: the lines of
    ``_MEG_DO_ANCHORS`` at ``src``)."""
    rs = at["rs_new"] or at["rs_old"]
    ag = at["ag_new"] or at["ag_old"]
    stats = (f"get_grad_stats_parallel_group {at['stats_group_do']}" if at["stats_group_do"]
             else f"get_model_parallel_group {at['mp_group_do']}")
    return (f"{src}: core/distributed/distributed_data_parallel_config.py:{at['do_cfg']} and "
            f"training/arguments.py:{at['do_arg']} (use_distributed_optimizer, off by default); "
            f"core/distributed/param_and_grad_buffer.py:{at['grad_sync']} and {rs} "
            "(start_grad_sync reduce-scatters each bucket's gradients, in the gradient "
            f"buffer's dtype, over the data-parallel group), {at['param_sync']} and {ag} "
            "(start_param_sync all-gathers each bucket's parameters, in their dtype); "
            f"core/optimizer/distrib_optimizer.py:{at['shard_main']} (fp32 master weights of "
            f"the rank's 1/dp shard only), {at['step_rg']}-{at['step_ag']} "
            "(step_with_ready_grads: the optimizer steps its shard, then the parameters are "
            f"all-gathered unless overlap_param_gather), {stats} (the gradient norm and "
            "found_inf reduced over the whole world, not the model-parallel group)"
            + (f"; {extra}" if extra else ""))


def _overlap_param_gather_source(src: str, at: dict[str, int]) -> str:
    """Where Megatron-LM's ``--overlap-param-gather`` was read (``at``: as
    :func:`_dist_optimizer_source`)."""
    return (f"{src}: core/distributed/distributed_data_parallel_config.py:{at['opg_cfg']}, "
            f"training/arguments.py:{at['opg_arg']} and {at['opg_if']}-{at['opg_assert']} "
            "(only with the distributed optimizer and overlap_grad_reduce); "
            f"core/optimizer/distrib_optimizer.py:{at['step_rg']}-{at['step_ag']} (the step "
            "then launches no all-gather); without the interleaved schedule align_param_gather "
            f"is off (training/arguments.py:{at['align_off']}), so each bucket's all-gather "
            "starts in the forward pre-hook of its first module in the next step "
            f"(core/distributed/distributed_data_parallel.py:{at['pre_hook']}, "
            f"param_and_grad_buffer.py:{at['finish_ps']} and {at['dispatch_ps']}: started "
            "there if not yet, then waited for): each stage's first forward pass, after it "
            "received its input, waits for its all-gather, a delay of the pipeline's fill "
            "dtsim's schedules do not model (refused)")


def _grad_copy_source(src: str, at: dict[str, int]) -> str:
    """Where Megatron-LM's fp32 gradient copy was read (``at``: as :func:`_dist_optimizer_source`)."""
    return (f"{src}: core/optimizer/optimizer.py:{at['fp16_copy']} "
            "(_copy_model_grads_to_main_grads: main_param.grad = model_param.main_grad.float(), "
            "a new fp32 tensor where main_grad is fp16, the same tensor where it is fp32) and, "
            f"with the distributed optimizer, distrib_optimizer.py:{at['shard_grad']} (the "
            "same for the rank's shard); freed by optimizer.zero_grad() (set_to_none) at the "
            f"start of the next step, training/training.py:{at['zero_grad']}, before its "
            "forward passes: 4 bytes a parameter (of the shard) held after the backward "
            "passes, which Megatron's dist_optimizer.md table counts in its fp16 20 and 4 + 16/d")


#: Megatron-LM's own schedules and DistributedDataParallel (Megatron Core).
MEGATRON = Framework(
    key="megatron", title="Megatron-LM (Megatron Core schedules and DistributedDataParallel)",
    versions=("0.20.0",), code=_MEG,
    p2p=Cited("batched", f"{_MEG}: megatron/core/pipeline_parallel/schedules.py:2147-2480 "
              "(forward_backward_pipelining_without_interleaving: warm-up recv_forward, "
              "forward, send_forward 2344-2362; steady send_forward_recv_backward 2416 and "
              "send_backward_recv_forward 2446, the last send_backward alone 2442; cool-down "
              "recv_backward, backward, send_backward 2466-2474), 2181-2184 (refuses "
              "overlap_p2p_comm); p2p_communication.py:379-381 and 22-57 (batch_p2p_comm: "
              "both operations of a call posted by one batch_isend_irecv; training/"
              "argument_utils.py:307 batch_p2p_comm = not overlap_p2p_comm, arguments.py:"
              "1010-1012 overlap off without interleaving), 416-424 (every request waited on, "
              "then torch.cuda.synchronize: the device waits for the call's transfers)"),
    partitioned=Cited(False, f"{_MEG}: schedules.py:2140-2143 (each TP rank sends the whole "
                      "(seq, mbs, hidden) tensor; 1/t of the sequence only with "
                      "sequence_parallel)"),
    grad_partitioned=Cited(False, f"{_MEG}: schedules.py:2140-2143 (the gradient sent back has "
                           "the activation's whole shape on every TP rank)"),
    gathers=Cited((), f"{_MEG}: schedules.py:2140-2143 (no all-gather after receiving)"),
    hop_mask=Cited(0, f"{_MEG}: p2p_communication.py:494-514 and 280-349 (send_forward and "
                   "send_backward send one tensor, the hidden states or their gradient, into "
                   "a buffer of the known tensor_shape; shapes exchanged first only with "
                   "variable_seq_lengths, 327-333): no mask crosses a hop"),
    gather_bytes=Cited(None, f"{_MEG}: no all-gather"),
    allreduce=Cited("after-backward",
                    f"{_MEG}: distributed/distributed_data_parallel_config.py:18 "
                    "(overlap_grad_reduce = False) and finalize_model_grads.py:640 "
                    "(finish_grad_sync after the pipeline's last backward pass)"),
    barrier=Cited(False, f"{_MEG}: finalize_model_grads.py:560-640 (no barrier across stages)"),
    tied_first=Cited(False, f"{_MEG}: finalize_model_grads.py:640 then 676 (the data-parallel "
                     "all-reduce, then _allreduce_word_embedding_grads)"),
    optimizer_barrier=Cited(
        {"fp32": True, "fp16": True, "bf16": True},
        f"{_MEG}: core/optimizer/optimizer.py:830-831 and 1351-1352 (step clips the gradients "
        "when clip_grad > 0: optimizer_config.py:374 clip_grad = 1.0, training/arguments.py:"
        "2615 --clip-grad default 1.0), the norm all-reduced over get_grad_stats_parallel_group(), "
        "the model-parallel group of TP and pipeline ranks (optimizer.py:322-340)"),
    optimizer_allreduces=Cited(
        {"fp32": 3, "fp16": 4, "bf16": 3},
        f"{_MEG}: core/optimizer/optimizer.py:830-831 (clip_grad = 1.0 by default: "
        "get_grad_norm_fp32 all-reduces the norm, core/optimizer/clip_grads.py:132-134), fp16 "
        "also 764 (_unscale_main_grads_and_check_for_nan: found_inf all-reduced, 729-731; bf16 "
        "and fp32 have no grad scaler), all over the model-parallel group (get_grad_stats_"
        "parallel_group); then training/training.py:3198 (logical_and_across_model_parallel_"
        "group: update_successful) and 3201 (reduce_max_stat_across_model_parallel_group: "
        "grad_norm), each an all_reduce then .item() (training/utils/common_utils.py:309-310, "
        "325-326)"),
    bucket_elements=Cited(math.inf, f"{_MEG}: distributed/distributed_data_parallel.py:133-137 "
                          "(bucket_size None, one bucket, unless overlap_grad_reduce; then "
                          "max(40000000, 1000000 x dp) elements)"),
    bucket_rule=Cited("megatron", f"{_MEG}: distributed/distributed_data_parallel.py:160-171 "
                      "('Turn off bucketing if we are on a pipeline stage that is not the "
                      "first': one bucket there) and 101 (buckets of bucket_size elements on the "
                      "first stage, launched as the last micro-batch's backward pass makes "
                      "their gradients ready)"),
    dp_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                   f"{_MEG}: distributed/distributed_data_parallel_config.py:15 "
                   "(grad_reduce_in_fp32 = False: the model's dtype) and training/"
                   "arguments.py:1204-1217 (bf16 accumulates and all-reduces in fp32)"),
    tied_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                     f"{_MEG}: finalize_model_grads.py:250-258 (the embedding's main_grad, the "
                     "gradient buffer's dtype, as dp_bytes)"),
    grad_buffer=Cited(True, f"{_MEG}: distributed/param_and_grad_buffer.py:924 (grad_dtype = "
                      "torch.float if grad_reduce_in_fp32 else param.dtype) and 1190-1194 (the "
                      "buffer, every parameter's main_grad, allocated in grad_dtype): fp32 "
                      "gradients held under bf16, 4 bytes a parameter beside the 2-byte weights"),
    activation_bytes=Cited(_PREC, f"{_MEG}: pipeline_parallel/p2p_communication.py:340-348 "
                           "(received tensors of config.pipeline_dtype, the model's dtype)"),
    pipe_buffers=Cited(0, f"{_MEG}: schedules.py:2329, 2366, 2421, 2427, 2463 (a received "
                       "input is kept in input_tensors while its micro-batch is in flight, "
                       "popped at its backward pass: the in-flight count, which dtsim's memory "
                       "counts as DeepSpeed 0.16.5's buffers, at least 2)"),
    pipe_groups=Cited(False, f"{_MEG}: core/parallel_state.py:601-602 "
                      "(initialize_model_parallel: one tensor_model_parallel_size for every "
                      "stage)"),
    step_join=Cited("pipeline",
                    f"{_MEG}: training/training.py:3165 (optimizer.step()), then 3198 and "
                    "3201 (logical_and_across_model_parallel_group, "
                    "reduce_max_stat_across_model_parallel_group over the model-parallel "
                    "group of TP and pipeline ranks; training/utils/common_utils.py:309-310: "
                    "all_reduce, then .item() on the host): every stage of a pipeline starts "
                    "its next step after the slowest one's optimizer step"),
    options={
        "overlap_grad_reduce": ((True, False),
                                f"{_MEG}: distributed_data_parallel_config.py:18 and "
                                "distributed_data_parallel.py:133-137 (buckets of max(4e7, 1e6 "
                                "dp) elements reduced as the backward pass produces them)"),
        "accumulate_allreduce_grads_in_fp32": ((True, False),
                                               f"{_MEG}: training/arguments.py:1204-1219 "
                                               "(fp32 gradient buffers: dp_bytes and tied_bytes "
                                               "4)"),
        "use_distributed_optimizer": ((True, False), _dist_optimizer_source(
            _MEG, _MEG_DO_MAIN, "docs/user-guide/features/dist_optimizer.md:16-20 (bytes a parameter: fp16 4 + "
            "16/d, bf16 6 + 12/d, fp32 8 + 8/d); core/optimizer/__init__.py:674 "
            "(grad_stats_parallel_group = intra_dist_opt_group: the world, one instance)")),
        "overlap_param_gather": ((True, False), _overlap_param_gather_source(_MEG, _MEG_DO_MAIN)),
        **_ATTN_020[1],
    },
    attention=_ATTN_020[0],
    grad_copy=Cited(4, _grad_copy_source(_MEG, _MEG_DO_MAIN)),
)

#: PyTorch's DistributedDataParallel (data parallelism only).
DDP = Framework(
    key="ddp", title="PyTorch DistributedDataParallel", versions=("2.x",), code=_TORCH,
    p2p=Cited("blocking", f"{_TORCH}: no pipeline (one stage)"),
    partitioned=Cited(False, f"{_TORCH}: no pipeline"),
    grad_partitioned=Cited(False, f"{_TORCH}: no pipeline"),
    gathers=Cited((), f"{_TORCH}: no pipeline"),
    gather_bytes=Cited(None, f"{_TORCH}: no pipeline"),
    allreduce=Cited("overlap-backward",
                    f"{_TORCH}: the reducer's autograd hooks all-reduce a bucket as soon as "
                    "the backward pass has produced all its gradients (DistributedDataParallel "
                    "docs, 'Internal Design')"),
    barrier=Cited(False, f"{_TORCH}: no pipeline"),
    tied_first=Cited(True, f"{_TORCH}: no pipeline"),
    optimizer_barrier=Cited({"fp32": False, "fp16": False, "bf16": False},
                            f"{_TORCH}: no pipeline"),
    bucket_elements=Cited(25 * 1024 * 1024,
                          f"{_TORCH}: DistributedDataParallel(bucket_cap_mb=25): buckets of "
                          "25 MiB (here in bytes: divided by dp_bytes for elements)"),
    bucket_rule=Cited("ddp", f"{_TORCH}: DistributedDataParallel._ddp_init_helper (parameters "
                      "cut in registration order with limits [dist._DEFAULT_FIRST_BUCKET_BYTES "
                      "= 1 MiB, bucket_bytes_cap], the buckets then reversed to follow the "
                      "backward pass)"),
    dp_bytes=Cited(_PREC, f"{_TORCH}: gradients all-reduced in the parameters' dtype"),
    tied_bytes=Cited(_PREC, f"{_TORCH}: no pipeline"),
    activation_bytes=Cited(_PREC, f"{_TORCH}: no pipeline"),
    pipe_groups=Cited(False, f"{_TORCH}: no pipeline"),
    pipe_buffers=Cited(0, f"{_TORCH}: no pipeline"),
    hop_mask=Cited(0, f"{_TORCH}: no pipeline"),
    step_join=Cited("pipeline", f"{_TORCH}: no pipeline (one stage: the all-reduce joins the "
                    "replicas)"),
    pipeline=False,
    options={"bucket_cap_mb": ((), f"{_TORCH}: DistributedDataParallel(bucket_cap_mb=25)")},
)

#: DeepSpeed's pipeline engine at every release tag from v0.9.0 to v0.16.4, a table each
#: (:func:`_deepspeed_release`). Each fact cites, at that tag, the line of the code it was read
#: in: ``_DS_ANCHORS`` names each place (a file under ``deepspeed/runtime/``, the code found
#: there, which occurrence of it) and ``_DS_LINES`` its line per tag (0: absent from that
#: release). ``tests/test_profiles_frameworks.py`` re-reads every tag in a microsoft/DeepSpeed
#: clone and checks each line holds its code and each 0 that the code is absent; where facts
#: differ between tags, docs/real_runs.md says which commit changed them.
_DS_ANCHORS: tuple[tuple[str, str, str, int], ...] = (
    ("send", "pipe/p2p.py", "return dist.send(tensor, dest_rank)", 1),
    ("recv", "pipe/p2p.py", "return dist.recv(tensor, src_rank)", 1),
    ("cfg_pipe", "config.py", '"pipe_partitioned": True,', 1),
    ("cfg_grad", "config.py", '"grad_partitioned": True,', 1),
    ("cfg_cdt", "config.py", "def get_communication_data_type(", 1),
    ("cfg_bf16", "config.py", 'elif val == "bf16":', 1),
    ("cfg_bfp16", "config.py", 'elif val == "bfp16":', 1),
    ("no_bwd", "pipe/engine.py", "self.enable_backward_allreduce = False", 1),
    ("pipe_part", "pipe/engine.py", "self.is_pipe_partitioned = self.is_model_parallel", 1),
    ("grad_part", "pipe/engine.py", "self.is_grad_partitioned = self.is_model_parallel", 1),
    ("mask_cls", "pipe/engine.py",
     "self.has_attention_mask = self.module.__class__.__name__ == 'GPT2ModelPipe'", 1),
    ("tied_grad", "pipe/engine.py", "grad = weight._hp_grad if", 1),
    ("tied_ar", "pipe/engine.py", "dist.all_reduce(grad, group=group)", 1),
    ("red_call", "pipe/engine.py",
     "self.allreduce_gradients(bucket_size=MEMORY_OPT_ALLREDUCE_SIZE)", 1),
    ("bf16_red", "pipe/engine.py", "self.buffered_allreduce_fallback(grads=", 1),
    ("tb_sched", "pipe/engine.py",
     "sched = schedule.TrainSchedule(micro_batches=self.micro_batches,", 1),
    ("tb_agg", "pipe/engine.py", "self.agg_train_loss = self._aggregate_total_loss()", 1),
    ("loss_ar", "pipe/engine.py",
     "dist.all_reduce(agg_loss, group=self.mpu.get_data_parallel_group())", 1),
    ("loss_bc", "pipe/engine.py",
     "dist.broadcast(tensor=losses, src=self.global_rank, "
     "group=self.mpu.get_pipe_parallel_group())", 1),
    ("loss_rx", "pipe/engine.py",
     "dist.broadcast(tensor=losses, src=src_rank, group=self.grid.get_pipe_parallel_group())", 1),
    ("fwd_full", "pipe/engine.py", "inputs = (part_input.full(), *inputs[2:])", 1),
    ("out_part", "pipe/engine.py",
     "part = PartitionedTensor(tensor=first_output, "
     "group=self.grid.get_slice_parallel_group())", 1),
    ("out_send", "pipe/engine.py", "outputs = (part.to_meta(), part.data(), *outputs_tail)", 1),
    ("bwd_out", "pipe/engine.py", ".data = part_output.full()", 1),
    ("bwd_grad", "pipe/engine.py", "grad_tensors = (part_grad.full(), *grad_tensors[2:])", 1),
    ("mask_half", "pipe/engine.py", "outputs[-1] = outputs[-1].half()", 1),
    ("send_loop", "pipe/engine.py", "p2p.send(buffer, self.next_stage)", 1),
    ("sg_part", "pipe/engine.py", "p2p.send(inputs[1], self.prev_stage)", 1),
    ("reserve", "pipe/engine.py",
     "self._reserve_pipe_buffers(pipe_schedule.num_pipe_buffers())", 1),
    ("mem_opt", "engine.py", "MEMORY_OPT_ALLREDUCE_SIZE = 500000000", 1),
    ("cdt", "engine.py", "def communication_data_type(self):", 1),
    ("cdt_bf16", "engine.py", "return torch.bfloat16", 1),
    ("fallback", "engine.py",
     "def buffered_allreduce_fallback(self, grads=None, elements_per_buffer=500000000", 1),
    ("ar_cast", "engine.py", "tensor_to_allreduce = tensor.to(self.communication_data_type)", 1),
    ("ar_thr", "engine.py", "if numel > numel_per_bucket:", 1),
    ("clip_if", "engine.py", "if self.gradient_clipping() > 0.0:", 1),
    ("clip_def", "constants.py", "GRADIENT_CLIPPING_DEFAULT = 0.", 1),
    ("fp16_ovf", "fp16/fused_optimizer.py",
     "self.overflow = self.overflow_checker.has_overflow(fp16_params)", 1),
    ("ovf_mp", "utils.py",
     "dist.all_reduce(overflow_gpu, op=dist.ReduceOp.MAX, "
     "group=self.mpu.get_model_parallel_group())", 2),
    ("norm_def", "utils.py", "def get_global_norm_of_tensors(", 1),
    ("full_def", "utils.py", "def full(self, device=None):", 1),
    ("full_dtype", "utils.py",
     "flat_tensor = torch.zeros([full_numel], dtype=self.local_data.dtype", 1),
    ("bf16_norm", "bf16_optimizer.py", "= get_global_norm_of_tensors(input_tensors=", 1),
    ("paired_send", "pipe/schedule.py",
     "The communication is blocking and must be paired with a :class:`RecvActivation`", 1),
    ("paired_recv", "pipe/schedule.py",
     "The communication is blocking and must be paired with a :class:`SendActivation`", 1),
    ("train_sched", "pipe/schedule.py", "class TrainSchedule(PipeSchedule):", 1),
    ("tied_first", "pipe/schedule.py", "cmds.append(ReduceTiedGrads())", 1),
    ("buffers", "pipe/schedule.py",
     "buffers = min(self.stages - self.stage_id, self.micro_batches)", 1),
    ("topo", "pipe/topology.py", "class PipeModelDataParallelTopology(ProcessTopology):", 1),
    ("mp_group", "pipe/topology.py", "self.ds_model_proc_group = None", 1),
    ("mp_get", "pipe/topology.py", "def get_model_parallel_group(self):", 1),
    ("recv_alloc", "pipe/engine.py",
     "self.pipe_recv_buf = self._recv_tensor_meta(self.prev_stage)", 1),
    ("recv_clone", "pipe/engine.py", "recvd = self.pipe_recv_buf.clone().detach()", 1),
    ("recv_part", "pipe/engine.py", "recvd[idx] = buffer.clone().detach()", 1),
    ("recv_keep", "pipe/engine.py", "self.pipe_buffers['inputs'][buffer_id] = recvd", 1),
    ("fwd_clone", "pipe/engine.py", "inputs = self.pipe_buffers['inputs'][buffer_id].clone()", 1),
    ("fwd_keep", "pipe/engine.py", "self.pipe_buffers['inputs'][buffer_id] = inputs", 1),
    ("in_free", "pipe/engine.py", "self.pipe_buffers['inputs'][buffer_id] = None", 1),
    ("sg_first", "pipe/schedule.py", "cmds.append(SendGrad(prev_buffer))", 1),
    ("fp16_norm", "fp16/fused_optimizer.py", "all_groups_norm = get_", 1),
    ("bf16_sel", "engine.py",
     "elif model_dtype == torch.bfloat16 and grad_accum_dtype == torch.float32:", 1),
    ("bf16_acc", "engine.py", "if model_dtype == torch.bfloat16 and not self.zero_optimization():",
     1),
    ("bf16_module", "engine.py", "self.module.bfloat16()", 1),
    ("ag_bucket", "zero/config.py", "allgather_bucket_size: int = Field(pp_int(5e8)", 1),
    ("bf16_flat", "bf16_optimizer.py", "self._flatten_dense_tensors_aligned(self.bf16_groups[i],",
     1),
    ("bf16_master", "bf16_optimizer.py",
     "bf16_dp_partitions[partition_id].clone().float().detach())", 1),
    ("bf16_hp", "bf16_optimizer.py", "torch.zeros_like(self.bf16_groups_flat[i], dtype=", 1),
    ("bf16_lp", "bf16_optimizer.py", "self.update_lp_params()", 1),
    ("bf16_ag", "bf16_optimizer.py", "all_gather_dp_groups(", 1),
    ("ag_tensor", "utils.py", "if dist.has_all_gather_into_tensor():", 1),
    ("ag_shards", "utils.py", "num_shards = max(1, partitioned_params[partition_id].numel() * "
     "dp_world_size // allgather_bucket_size)", 1),
    ("bf16_keep", "pipe/engine.py", "self.optimizer.update_hp_grads(clear_lp_grads=False)", 1),
    ("meta_def", "utils.py", "def to_meta(self):", 1),
    ("meta_long", "utils.py", "return torch.LongTensor(data=meta)", 1),
    ("sg_meta", "pipe/engine.py", "p2p.send(inputs[0], self.prev_stage)", 1),
    ("ra_loop", "pipe/engine.py", "p2p.recv(buffer, self.prev_stage)", 1),
    ("rg_loop", "pipe/engine.py", "p2p.recv(buffer, self.next_stage)", 1),
    ("rg_whole", "pipe/engine.py", "p2p.recv(self.grad_layer, self.next_stage)", 1),
    ("rg_full", "pipe/engine.py", ".data = part_output.full()", 2),
)
_DS_LINES: dict[str, tuple[int, ...]] = {
    "0.9.0": (64, 85, 0, 0, 231, 0, 240, 59, 117, 118, 180, 237, 238, 250, 256, 332, 336, 521, 526,
            533, 614, 640, 645, 702, 715, 918, 929, 983, 1288, 102, 793, 0, 2271, 2178, 2208, 1907,
            206, 237, 258, 849, 668, 674, 238, 438, 454, 189, 239, 255, 244, 302, 442, 1007, 1011,
            1025, 1037, 606, 620, 994, 216, 272, 1149, 847, 1046, 111, 101, 117, 123, 252, 325, 0,
            929, 733, 694, 709, 982, 1024, 1094, 1087, 1053),
    "0.9.1": (64, 85, 0, 0, 231, 0, 240, 59, 117, 118, 180, 237, 238, 250, 256, 332, 336, 521, 526,
            533, 614, 640, 645, 702, 715, 918, 929, 983, 1289, 100, 773, 0, 2251, 2158, 2188, 1887,
            206, 237, 258, 849, 668, 674, 239, 438, 454, 189, 239, 255, 244, 302, 442, 1007, 1011,
            1025, 1037, 606, 620, 994, 216, 272, 1129, 827, 1026, 111, 102, 118, 124, 253, 326, 0,
            929, 733, 694, 709, 982, 1024, 1094, 1087, 1053),
    "0.9.2": (64, 85, 0, 0, 231, 0, 240, 61, 119, 120, 182, 239, 240, 251, 257, 333, 337, 522, 527,
            534, 615, 646, 651, 708, 721, 924, 935, 989, 1295, 100, 776, 785, 2300, 2207, 2237,
            1936, 206, 237, 258, 849, 668, 674, 239, 438, 454, 189, 239, 255, 244, 302, 442, 1013,
            1017, 1031, 1043, 607, 621, 1000, 216, 272, 1135, 833, 1032, 111, 102, 118, 124, 253,
            326, 0, 929, 739, 694, 709, 988, 1030, 1100, 1093, 1059),
    "0.9.3": (64, 85, 0, 0, 236, 0, 245, 61, 119, 120, 182, 239, 240, 251, 257, 333, 337, 522, 527,
            534, 615, 646, 651, 708, 721, 924, 935, 989, 1295, 100, 786, 795, 2317, 2224, 2254,
            1953, 211, 237, 258, 849, 668, 674, 239, 438, 454, 189, 239, 255, 244, 302, 442, 1013,
            1017, 1031, 1043, 607, 621, 1000, 216, 272, 1147, 843, 1043, 111, 102, 118, 124, 253,
            326, 0, 929, 739, 694, 709, 988, 1030, 1100, 1093, 1059),
    "0.9.4": (64, 85, 0, 0, 236, 0, 245, 61, 119, 120, 182, 239, 240, 251, 257, 333, 337, 522, 527,
            534, 615, 646, 651, 708, 721, 924, 935, 989, 1295, 100, 786, 795, 2317, 2224, 2254,
            1953, 211, 237, 258, 849, 668, 674, 239, 438, 454, 189, 239, 255, 244, 302, 442, 1013,
            1017, 1031, 1043, 607, 621, 1000, 216, 272, 1147, 843, 1043, 111, 102, 118, 124, 253,
            326, 0, 929, 739, 694, 709, 988, 1030, 1100, 1093, 1059),
    "0.9.5": (64, 85, 0, 0, 236, 0, 245, 61, 119, 120, 182, 239, 240, 251, 257, 333, 337, 522, 527,
            534, 615, 646, 651, 708, 721, 924, 935, 989, 1295, 100, 785, 794, 2316, 2223, 2253,
            1952, 211, 237, 258, 849, 668, 674, 238, 438, 454, 189, 239, 255, 244, 302, 442, 1013,
            1017, 1031, 1043, 607, 621, 1000, 216, 272, 1146, 842, 1042, 111, 101, 117, 123, 252,
            325, 0, 929, 739, 694, 709, 988, 1030, 1100, 1093, 1059),
    "0.10.0": (64, 85, 0, 0, 236, 0, 245, 61, 119, 120, 182, 239, 240, 251, 257, 333, 337, 522,
            528, 534, 615, 646, 651, 708, 721, 924, 935, 989, 1295, 100, 797, 806, 2357, 2261,
            2291, 1986, 211, 237, 258, 849, 668, 674, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1013, 1017, 1031, 1043, 607, 621, 1000, 216, 272, 1171, 863, 1063, 114, 101, 117, 123,
            252, 325, 0, 929, 739, 694, 709, 988, 1030, 1100, 1093, 1059),
    "0.10.1": (64, 85, 0, 0, 236, 0, 245, 74, 132, 133, 195, 252, 253, 262, 268, 344, 348, 538,
            544, 550, 631, 662, 667, 724, 737, 940, 951, 1005, 1323, 104, 796, 805, 2353, 2257,
            2287, 1981, 211, 222, 270, 867, 686, 692, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1029, 1033, 1047, 1059, 623, 637, 1016, 216, 257, 1165, 862, 1062, 115, 101, 117, 123,
            252, 325, 0, 947, 755, 712, 727, 1004, 1046, 1116, 1109, 1075),
    "0.10.2": (64, 85, 0, 0, 239, 0, 248, 74, 132, 133, 195, 252, 253, 262, 268, 344, 348, 538,
            544, 550, 631, 662, 667, 724, 737, 941, 952, 1006, 1324, 105, 797, 806, 2386, 2290,
            2320, 2014, 211, 222, 270, 867, 686, 692, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1030, 1034, 1048, 1060, 623, 637, 1017, 216, 257, 1175, 866, 1070, 116, 101, 117, 123,
            252, 325, 0, 951, 755, 712, 727, 1005, 1047, 1117, 1110, 1076),
    "0.10.3": (64, 85, 0, 0, 240, 0, 249, 74, 132, 133, 203, 260, 261, 270, 276, 352, 356, 546,
            552, 558, 639, 667, 672, 729, 742, 950, 961, 1015, 1324, 105, 797, 806, 2387, 2291,
            2321, 2014, 211, 222, 270, 867, 686, 692, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1039, 1043, 1057, 1069, 631, 645, 1026, 216, 257, 1175, 866, 1070, 116, 101, 117, 123,
            252, 325, 0, 951, 760, 712, 727, 1014, 1056, 1126, 1119, 1085),
    "0.11.0": (64, 85, 0, 0, 241, 0, 250, 74, 132, 133, 203, 260, 261, 270, 276, 352, 356, 548,
            554, 560, 641, 669, 674, 731, 744, 952, 963, 1017, 1326, 106, 798, 807, 2393, 2297,
            2327, 2020, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1041, 1045, 1059, 1071, 633, 647, 1028, 216, 257, 1176, 867, 1071, 116, 101, 117, 123,
            252, 325, 0, 950, 762, 711, 726, 1016, 1058, 1128, 1121, 1087),
    "0.11.1": (64, 85, 0, 0, 241, 0, 250, 74, 132, 133, 203, 260, 261, 270, 276, 352, 356, 548,
            554, 560, 641, 669, 674, 731, 744, 952, 963, 1017, 1326, 106, 798, 807, 2393, 2297,
            2327, 2020, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1041, 1045, 1059, 1071, 633, 647, 1028, 216, 257, 1176, 867, 1071, 116, 101, 117, 123,
            252, 325, 0, 950, 762, 711, 726, 1016, 1058, 1128, 1121, 1087),
    "0.11.2": (64, 85, 0, 0, 241, 0, 252, 75, 135, 136, 206, 263, 264, 273, 279, 355, 359, 551,
            557, 563, 644, 672, 677, 734, 747, 955, 966, 1020, 1329, 106, 798, 807, 2400, 2304,
            2334, 2027, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1044, 1048, 1062, 1074, 636, 650, 1031, 216, 257, 1183, 871, 1075, 116, 101, 117, 123,
            252, 325, 0, 950, 765, 711, 726, 1019, 1061, 1131, 1124, 1090),
    "0.12.0": (64, 85, 0, 0, 241, 0, 252, 75, 135, 136, 206, 263, 264, 273, 279, 355, 359, 551,
            557, 563, 644, 672, 677, 734, 747, 955, 966, 1020, 1329, 106, 798, 807, 2400, 2304,
            2334, 2027, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1044, 1048, 1062, 1074, 636, 650, 1031, 216, 257, 1183, 871, 1075, 116, 101, 117, 123,
            252, 325, 0, 950, 765, 711, 726, 1019, 1061, 1131, 1124, 1090),
    "0.12.1": (64, 85, 0, 0, 241, 0, 252, 75, 135, 136, 206, 263, 264, 273, 279, 355, 359, 551,
            557, 563, 644, 672, 677, 734, 747, 955, 966, 1020, 1329, 106, 798, 807, 2400, 2304,
            2334, 2027, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1044, 1048, 1062, 1074, 636, 650, 1031, 216, 257, 1183, 871, 1075, 116, 101, 117, 123,
            252, 325, 0, 950, 765, 711, 726, 1019, 1061, 1131, 1124, 1090),
    "0.12.2": (64, 85, 0, 0, 241, 0, 252, 75, 135, 136, 206, 263, 264, 273, 279, 355, 359, 551,
            557, 563, 644, 672, 677, 734, 747, 955, 966, 1020, 1329, 106, 798, 807, 2400, 2304,
            2334, 2027, 211, 222, 270, 866, 685, 691, 238, 438, 454, 189, 239, 255, 244, 302, 442,
            1044, 1048, 1062, 1074, 636, 650, 1031, 216, 257, 1183, 871, 1075, 116, 101, 117, 123,
            252, 325, 0, 950, 765, 711, 726, 1019, 1061, 1131, 1124, 1090),
    "0.12.3": (64, 85, 452, 453, 241, 0, 252, 75, 137, 138, 210, 267, 268, 277, 283, 359, 363, 555,
            561, 567, 648, 676, 681, 738, 751, 959, 970, 1024, 1333, 106, 801, 810, 2404, 2308,
            2338, 2031, 211, 221, 270, 866, 685, 691, 237, 438, 454, 189, 239, 255, 244, 302, 442,
            1048, 1052, 1066, 1078, 640, 654, 1035, 216, 256, 1186, 874, 1078, 116, 100, 116, 122,
            251, 323, 0, 950, 769, 711, 726, 1023, 1065, 1135, 1128, 1094),
    "0.12.4": (64, 85, 452, 453, 241, 0, 252, 75, 137, 138, 210, 267, 268, 277, 283, 359, 363, 555,
            561, 567, 648, 676, 681, 738, 751, 959, 970, 1024, 1333, 106, 804, 813, 2408, 2312,
            2342, 2035, 211, 221, 270, 859, 685, 691, 237, 438, 454, 189, 239, 255, 244, 302, 442,
            1048, 1052, 1066, 1078, 640, 654, 1035, 216, 256, 1189, 877, 1081, 124, 100, 116, 122,
            251, 323, 946, 958, 769, 704, 719, 1023, 1065, 1135, 1128, 1094),
    "0.12.5": (64, 85, 452, 453, 241, 0, 252, 75, 137, 138, 210, 267, 268, 277, 283, 359, 363, 555,
            561, 567, 648, 676, 681, 738, 751, 959, 970, 1024, 1333, 106, 804, 813, 2415, 2319,
            2349, 2042, 211, 221, 269, 834, 660, 666, 249, 438, 454, 189, 239, 255, 244, 302, 442,
            1048, 1052, 1066, 1078, 640, 654, 1035, 216, 256, 1195, 877, 1081, 124, 105, 121, 128,
            263, 335, 921, 933, 769, 679, 694, 1023, 1065, 1135, 1128, 1094),
    "0.12.6": (64, 85, 456, 457, 241, 0, 252, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 564,
            570, 576, 659, 687, 692, 751, 766, 974, 985, 1039, 1350, 106, 807, 816, 2419, 2323,
            2353, 2046, 211, 221, 290, 855, 681, 687, 250, 438, 454, 189, 239, 255, 244, 302, 442,
            1063, 1067, 1081, 1093, 649, 665, 1050, 216, 256, 1198, 880, 1084, 124, 106, 122, 129,
            266, 348, 969, 981, 784, 700, 715, 1038, 1080, 1152, 1145, 1111),
    "0.13.0": (64, 85, 456, 457, 241, 0, 252, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 573,
            579, 585, 668, 696, 701, 760, 775, 983, 994, 1048, 1359, 106, 817, 826, 2435, 2332,
            2362, 2055, 211, 221, 290, 855, 681, 687, 250, 438, 454, 189, 239, 255, 244, 302, 442,
            1072, 1076, 1090, 1102, 658, 674, 1059, 216, 256, 1211, 890, 1097, 124, 106, 122, 129,
            266, 348, 969, 981, 793, 700, 715, 1047, 1089, 1161, 1154, 1120),
    "0.13.1": (64, 85, 456, 457, 241, 0, 252, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 573,
            579, 585, 668, 696, 701, 760, 775, 983, 994, 1048, 1359, 106, 817, 826, 2435, 2332,
            2362, 2055, 211, 221, 290, 855, 681, 687, 250, 438, 454, 189, 239, 255, 244, 302, 442,
            1072, 1076, 1090, 1102, 658, 674, 1059, 216, 256, 1211, 890, 1097, 124, 106, 122, 129,
            266, 348, 969, 981, 793, 700, 715, 1047, 1089, 1161, 1154, 1120),
    "0.13.2": (64, 85, 457, 458, 242, 0, 253, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 573,
            579, 585, 668, 696, 701, 760, 775, 983, 994, 1048, 1359, 107, 826, 835, 2445, 2342,
            2372, 2065, 211, 221, 290, 864, 690, 696, 255, 438, 454, 189, 239, 255, 244, 302, 442,
            1072, 1076, 1090, 1102, 658, 674, 1059, 216, 256, 1221, 899, 1107, 124, 106, 122, 129,
            274, 356, 978, 990, 793, 709, 724, 1047, 1089, 1161, 1154, 1120),
    "0.13.3": (64, 85, 465, 466, 250, 0, 261, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 573,
            579, 585, 668, 696, 701, 760, 775, 983, 994, 1048, 1359, 107, 826, 835, 2447, 2344,
            2374, 2067, 215, 221, 290, 864, 690, 696, 260, 438, 454, 189, 239, 255, 244, 302, 442,
            1072, 1076, 1090, 1102, 658, 674, 1059, 216, 256, 1220, 899, 1106, 124, 108, 124, 131,
            279, 371, 978, 990, 793, 709, 724, 1047, 1089, 1161, 1154, 1120),
    "0.13.4": (64, 85, 465, 466, 250, 0, 261, 75, 137, 138, 214, 271, 272, 281, 287, 368, 372, 573,
            579, 585, 668, 696, 701, 760, 775, 983, 994, 1048, 1359, 107, 826, 835, 2447, 2344,
            2374, 2067, 215, 221, 290, 864, 690, 696, 260, 438, 454, 189, 239, 255, 244, 302, 442,
            1072, 1076, 1090, 1102, 658, 674, 1059, 216, 256, 1220, 899, 1106, 124, 108, 124, 131,
            279, 371, 978, 990, 793, 709, 724, 1047, 1089, 1161, 1154, 1120),
    "0.13.5": (64, 85, 465, 466, 250, 0, 261, 77, 139, 140, 216, 273, 274, 283, 289, 370, 374, 575,
            581, 587, 670, 698, 703, 762, 777, 985, 996, 1050, 1361, 107, 826, 835, 2447, 2344,
            2374, 2067, 215, 221, 290, 864, 690, 696, 260, 438, 454, 189, 239, 255, 244, 302, 442,
            1074, 1078, 1092, 1104, 660, 676, 1061, 216, 256, 1220, 899, 1106, 124, 108, 124, 131,
            279, 371, 978, 990, 795, 709, 724, 1049, 1091, 1163, 1156, 1122),
    "0.14.0": (64, 85, 465, 466, 250, 0, 261, 77, 139, 140, 216, 273, 274, 283, 289, 370, 374, 575,
            581, 587, 670, 698, 703, 762, 777, 985, 996, 1050, 1361, 107, 826, 835, 2447, 2344,
            2374, 2067, 215, 221, 290, 864, 690, 696, 260, 438, 454, 189, 239, 255, 244, 302, 442,
            1074, 1078, 1092, 1104, 660, 676, 1061, 216, 256, 1220, 899, 1106, 124, 108, 124, 131,
            279, 371, 978, 990, 795, 709, 724, 1049, 1091, 1163, 1156, 1122),
    "0.14.1": (60, 81, 465, 466, 250, 261, 0, 78, 140, 141, 223, 280, 281, 290, 294, 375, 381, 593,
            620, 630, 716, 744, 749, 823, 838, 1046, 1057, 1111, 1422, 107, 826, 835, 2454, 2344,
            2376, 2067, 215, 222, 264, 836, 662, 668, 284, 438, 454, 189, 239, 255, 244, 302, 442,
            1135, 1139, 1153, 1165, 706, 722, 1122, 216, 268, 1220, 899, 1106, 124, 127, 142, 148,
            310, 430, 977, 989, 856, 681, 696, 1110, 1152, 1224, 1217, 1183),
    "0.14.2": (60, 81, 465, 466, 250, 261, 0, 78, 140, 141, 223, 280, 281, 290, 294, 375, 381, 593,
            620, 630, 716, 744, 749, 823, 838, 1046, 1057, 1111, 1422, 107, 826, 835, 2454, 2344,
            2376, 2067, 215, 259, 263, 824, 669, 675, 284, 438, 454, 189, 239, 255, 244, 302, 442,
            1135, 1139, 1153, 1165, 706, 722, 1122, 216, 314, 1220, 899, 1106, 124, 127, 142, 148,
            310, 430, 965, 977, 856, 688, 703, 1110, 1152, 1224, 1217, 1183),
    "0.14.3": (60, 81, 467, 468, 252, 263, 0, 76, 139, 140, 222, 279, 280, 289, 293, 374, 380, 592,
            619, 629, 715, 743, 748, 822, 837, 1046, 1057, 1111, 1422, 107, 818, 827, 2450, 2336,
            2368, 2059, 215, 259, 263, 826, 671, 677, 284, 438, 454, 189, 239, 255, 244, 302, 442,
            1135, 1139, 1153, 1165, 705, 721, 1122, 216, 314, 1212, 891, 1098, 125, 127, 142, 148,
            310, 430, 967, 979, 856, 690, 705, 1110, 1152, 1224, 1217, 1183),
    "0.14.4": (60, 81, 466, 467, 251, 262, 0, 76, 139, 140, 222, 279, 280, 289, 293, 374, 380, 592,
            619, 629, 715, 743, 748, 822, 837, 1046, 1057, 1111, 1422, 107, 817, 826, 2449, 2335,
            2367, 2058, 215, 259, 263, 826, 671, 677, 284, 438, 454, 189, 239, 255, 244, 302, 442,
            1135, 1139, 1153, 1165, 705, 721, 1122, 216, 314, 1211, 890, 1097, 125, 127, 142, 148,
            310, 430, 967, 979, 856, 690, 705, 1110, 1152, 1224, 1217, 1183),
    "0.14.5": (60, 81, 466, 467, 251, 262, 0, 76, 139, 140, 224, 281, 282, 291, 295, 376, 382, 594,
            621, 631, 717, 745, 750, 824, 839, 1048, 1059, 1113, 1424, 109, 858, 867, 2493, 2379,
            2411, 2102, 215, 259, 263, 826, 671, 677, 299, 438, 454, 189, 239, 255, 244, 302, 442,
            1137, 1141, 1155, 1167, 707, 723, 1124, 216, 314, 1255, 931, 1141, 125, 141, 156, 162,
            325, 445, 967, 979, 858, 690, 705, 1112, 1154, 1226, 1219, 1185),
    "0.15.0": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 290, 299, 303, 385, 391, 603,
            630, 640, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 109, 866, 875, 2502, 2388,
            2420, 2111, 215, 259, 263, 826, 671, 677, 299, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1264, 939, 1149, 125, 141, 156, 162,
            325, 445, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.15.1": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 290, 299, 303, 385, 391, 603,
            630, 640, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 109, 866, 875, 2502, 2388,
            2420, 2111, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1264, 939, 1149, 125, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.15.2": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 290, 299, 303, 385, 391, 601,
            628, 638, 724, 752, 757, 831, 846, 1028, 1039, 1093, 1408, 109, 866, 875, 2502, 2388,
            2420, 2111, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1117, 1121, 1135, 1147, 714, 730, 1104, 216, 314, 1264, 939, 1149, 125, 141, 156, 162,
            312, 432, 967, 979, 865, 690, 705, 1092, 1134, 1209, 1202, 1165),
    "0.15.3": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 290, 299, 303, 385, 391, 601,
            628, 638, 724, 752, 757, 831, 846, 1028, 1039, 1093, 1408, 109, 866, 875, 2502, 2388,
            2420, 2111, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1117, 1121, 1135, 1147, 714, 730, 1104, 216, 314, 1264, 939, 1149, 125, 141, 156, 162,
            312, 432, 967, 979, 865, 690, 705, 1092, 1134, 1209, 1202, 1165),
    "0.15.4": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 109, 866, 875, 2502, 2388,
            2420, 2111, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1264, 939, 1149, 125, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.16.0": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 110, 871, 880, 2533, 2419,
            2451, 2139, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1272, 944, 1157, 126, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.16.1": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 110, 871, 880, 2533, 2419,
            2451, 2139, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1272, 944, 1157, 126, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.16.2": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 110, 871, 880, 2538, 2424,
            2456, 2144, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1276, 947, 1160, 127, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.16.3": (60, 81, 466, 467, 251, 262, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 110, 871, 880, 2538, 2424,
            2456, 2144, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1276, 947, 1160, 127, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
    "0.16.4": (60, 81, 467, 468, 252, 263, 0, 81, 144, 145, 230, 289, 291, 300, 304, 386, 392, 602,
            629, 639, 726, 754, 759, 833, 848, 1030, 1041, 1095, 1410, 111, 939, 948, 2611, 2497,
            2529, 2217, 215, 259, 263, 826, 671, 677, 276, 438, 454, 189, 239, 255, 244, 302, 442,
            1119, 1123, 1137, 1149, 716, 732, 1106, 216, 314, 1347, 1018, 1231, 128, 141, 156, 162,
            312, 432, 967, 979, 867, 690, 705, 1094, 1136, 1211, 1204, 1167),
}


def _ds_version(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


#: The first DeepSpeed release whose ``communication_data_type`` is bf16 when training in bf16
#: (v0.9.2, commit dcb4a7d, #3399; before, fp32: the bf16 optimizer's fp32 gradients all-reduced
#: as they are), the first with the ``pipeline.pipe_partitioned`` key (v0.12.3, c2074b3,
#: #4322) and the first spelling that config value ``bf16`` (v0.14.1; before, ``bfp16``).
_DS_BF16_COMM, _DS_PIPE_PARTITIONED, _DS_BF16_SPELLING = "0.9.2", "0.12.3", "0.14.1"
#: Bytes per value of each communication_data_type value a DeepSpeed release accepts.
_COMM_BYTES = {**PRECISIONS, "bfp16": 2}


def _deepspeed_release(version: str) -> Framework:
    """DeepSpeed's pipeline engine at tag ``v{version}`` (a key of :data:`_DS_LINES`): 0.16.5's
    facts where that release's code is the same, each citing its own line at this tag."""
    at = dict(zip((a[0] for a in _DS_ANCHORS), _DS_LINES[version], strict=True))
    src = f"microsoft/DeepSpeed v{version} (tag v{version})"
    v = _ds_version(version)
    bf16_comm = v >= _ds_version(_DS_BF16_COMM)
    spelling = "bf16" if v >= _ds_version(_DS_BF16_SPELLING) else "bfp16"
    cdt_line = at["cfg_bf16"] or at["cfg_bfp16"]
    options = {
        "communication_data_type": (
            ("fp32", "fp16", spelling),
            f"{src}: runtime/config.py:{at['cfg_cdt']}-{cdt_line} (DeepSpeed config key "
            f"communication_data_type, fp32, fp16 or {spelling}; sets dp_bytes)")}
    lacks = {"fp32_allreduce": f"DeepSpeed {version}'s runtime/config.py reads no such key "
                               "(0.3.13's: version=0.3.13); its all-reduce dtype is "
                               f"communication_data_type, runtime/engine.py:{at['cdt']}"}
    if v >= _ds_version(_DS_PIPE_PARTITIONED):
        options["pipe_partitioned"] = (
            (True, False), f"{src}: runtime/config.py:{at['cfg_pipe']} (DeepSpeed config "
            "pipeline.pipe_partitioned; effective only with TP > 1, runtime/pipe/engine.py:"
            f"{at['pipe_part']})")
        options["grad_partitioned"] = ((True, False), _grad_option_source(src, at))
    else:
        lacks["pipe_partitioned"] = (
            f"DeepSpeed {version} always partitions with TP > 1 (runtime/pipe/engine.py:"
            f"{at['pipe_part']}; its runtime/config.py has no such pipeline key, added in "
            f"{_DS_PIPE_PARTITIONED})")
        lacks["grad_partitioned"] = (
            f"DeepSpeed {version} always partitions the gradient with TP > 1 (runtime/pipe/"
            f"engine.py:{at['grad_part']}; its runtime/config.py has no such pipeline key, "
            f"added in {_DS_PIPE_PARTITIONED})")
    if bf16_comm:
        # with bf16 the bf16 optimizer's gradients: passed by _bf16_reduce_grads up to 0.14.0,
        # fetched by buffered_allreduce_fallback (grads=None) from 0.14.1
        where = (f"called with grads=None by buffered_allreduce_fallback, runtime/engine.py:"
                 f"{at['fallback']}" if v >= _ds_version("0.14.1") else
                 f"passed at runtime/pipe/engine.py:{at['bf16_red']}")
        dp_bytes = Cited(_PREC, f"{src}: runtime/engine.py:{at['cdt']}-{at['cdt_bf16']} "
                         "(communication_data_type: the config's, else fp16 with fp16, bf16 with "
                         f"bf16, else fp32) and {at['ar_cast']} (a bucket is cast to it before "
                         "dist.all_reduce; with bf16 the bf16 optimizer's fp32 gradients, "
                         f"get_grads_for_reduction {where}, are cast too)")
    else:
        dp_bytes = Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                         f"{src}: runtime/engine.py:{at['cdt']} (communication_data_type: the "
                         "config's, else fp16 with fp16, else fp32: no bf16 default before "
                         f"{_DS_BF16_COMM}), runtime/pipe/engine.py:{at['bf16_red']} (with bf16 "
                         "the bf16 optimizer's fp32 gradients are reduced) and runtime/engine.py:"
                         f"{at['ar_cast']} (cast only to another dtype: all-reduced in fp32)")
    pipe = "runtime/pipe/engine.py"
    return Framework(
        key="deepspeed", title=f"DeepSpeed {version} pipeline engine (PipelineEngine, "
        "TrainSchedule)", versions=(version,), code=src,
        p2p=Cited("blocking", f"{src}: runtime/pipe/p2p.py:{at['send']} and {at['recv']} (send "
                  "is dist.send, recv dist.recv, blocking) and runtime/pipe/schedule.py:"
                  f"{at['paired_send']},{at['paired_recv']} ('The communication is blocking and "
                  f"must be paired'), issued in TrainSchedule order (schedule.py:"
                  f"{at['train_sched']}-244)"),
        partitioned=Cited(True, f"{src}: {pipe}:{at['pipe_part']} (is_pipe_partitioned with TP "
                          f"> 1) and {at['out_part']}-{at['out_send']} (the output becomes a "
                          "PartitionedTensor over the TP group; its meta and local part are "
                          "sent)"),
        grad_partitioned=Cited(True, f"{src}: {pipe}:{at['grad_part']} (is_grad_partitioned "
                               f"with TP > 1) and {at['sg_part']} (the input's gradient sent as "
                               "a PartitionedTensor's meta and local part)"),
        gathers=Cited((1, 2), f"{src}: {pipe}:{at['fwd_full']} (a stage after the first "
                      "rebuilds its input, part_input.full(): one all-gather per forward pass), "
                      f"{at['bwd_out']} and {at['bwd_grad']} (a stage before the last rebuilds "
                      "its output, part_output.full(), and the received gradient, "
                      "part_grad.full(): two per backward pass)"),
        gather_bytes=Cited(None, f"{src}: runtime/utils.py:{at['full_def']}-{at['full_dtype']} "
                           "(PartitionedTensor.full gathers into a buffer of the local part's "
                           "dtype)"),
        allreduce=Cited("after-backward", f"{src}: {pipe}:{at['no_bwd']} "
                        "(enable_backward_allreduce = False: no reduction during backward) and "
                        f"runtime/pipe/schedule.py:{at['tied_first']}-{at['tied_first'] + 2} "
                        "(ReduceTiedGrads, ReduceGrads, OptimizerStep at the last step of the "
                        "batch)"),
        barrier=Cited(False, f"{src}: {pipe}:{at['tied_ar']}-{at['red_call']} (no barrier: a "
                      "stage reduces after its own last step; the tied all-reduce joins the first "
                      "and last stage)"),
        tied_first=Cited(True, f"{src}: runtime/pipe/schedule.py:{at['tied_first']}-"
                         f"{at['tied_first'] + 1} (ReduceTiedGrads before ReduceGrads)"),
        optimizer_barrier=Cited(
            {"fp32": False, "fp16": True, "bf16": True},
            f"{src}: fp32: runtime/engine.py:{at['clip_if']} (clipping over the model-parallel "
            f"group only with gradient_clipping > 0; constants.py:{at['clip_def']} "
            f"GRADIENT_CLIPPING_DEFAULT = 0.); fp16: runtime/fp16/fused_optimizer.py:"
            f"{at['fp16_ovf']} (step's has_overflow, runtime/utils.py:{at['ovf_mp']}: all_reduce "
            "over mpu.get_model_parallel_group()); bf16: runtime/bf16_optimizer.py:"
            f"{at['bf16_norm']} (the global gradient norm, runtime/utils.py:{at['norm_def']}, "
            "over the same group); the group is every stage and TP rank of one data-parallel "
            f"index (runtime/pipe/topology.py:{at['mp_group']}, {at['mp_get']})"),
        optimizer_allreduces=Cited(
            {"fp32": 0, "fp16": 2, "bf16": 1},
            f"{src}: fp16: runtime/fp16/fused_optimizer.py:{at['fp16_ovf']} (has_overflow: the "
            f"flag all-reduced, runtime/utils.py:{at['ovf_mp']}) and {at['fp16_norm']} (the "
            "gradient norm, all-reduced by get_grad_norm or get_flattened_grad_norm in "
            "runtime/utils.py, then .item()), both over mpu.get_model_parallel_group(), the norm "
            f"whether or not it clips; bf16: runtime/bf16_optimizer.py:{at['bf16_norm']} "
            f"(get_global_norm_of_tensors, runtime/utils.py:{at['norm_def']}: the norm "
            f"all-reduced over the same group); fp32: none (runtime/engine.py:{at['clip_if']}, "
            f"clipping only with gradient_clipping > 0, constants.py:{at['clip_def']} default "
            "0.)"),
        bucket_elements=Cited(500_000_000.0, f"{src}: runtime/engine.py:{at['mem_opt']} "
                              f"(MEMORY_OPT_ALLREDUCE_SIZE = 500000000), {pipe}:{at['red_call']} "
                              f"and {at['bf16_red']} (the all-reduce's bucket size), "
                              f"runtime/engine.py:{at['ar_thr']} (a bucket is reduced once it "
                              "holds more than that many elements)"),
        bucket_rule=Cited("megatron", f"{src}: {pipe}:{at['no_bwd']} (the pipeline engine never "
                          "overlaps its all-reduce with the backward pass; one forced to, with "
                          "--sync allreduce:overlap=backward, is cut as Megatron-LM's)"),
        dp_bytes=dp_bytes,
        tied_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                         f"{src}: {pipe}:{at['tied_grad']}-{at['tied_ar']} (dist.all_reduce of "
                         "weight.grad, the model's dtype; with bf16 of weight._hp_grad, fp32; no "
                         "cast)"),
        activation_bytes=Cited(_PREC, f"{src}: {pipe}:{at['send_loop']} (the stage's output is "
                               "sent as computed, in the model's dtype)"),
        step_join=Cited("last-stage", f"{src}: {pipe}:{at['tb_sched']}-{at['tb_agg']} "
                        "(train_batch: the schedule, then _aggregate_total_loss), "
                        f"{at['loss_ar']}, {at['loss_bc']} and {at['loss_rx']} (the last stage "
                        "all-reduces the loss over its data-parallel group, then broadcasts it "
                        "over its pipeline; every other stage receives it): a stage starts its "
                        "next step once the last stages have ended theirs"),
        pipe_groups=Cited(False, f"{src}: runtime/pipe/topology.py:{at['topo']} "
                          "(PipeModelDataParallelTopology: one model-parallel degree for every "
                          "stage; a stage sends each tensor once to its peer)"),
        pipe_buffers=Cited(0, f"{src}: runtime/pipe/schedule.py:{at['buffers']}-"
                           f"{at['buffers'] + 1} (TrainSchedule.num_pipe_buffers: max(2, "
                           f"min(stages - stage_id, micro_batches))), {pipe}:{at['reserve']} "
                           "(reserved per batch)"),
        hop_mask=Cited(0, f"{src}: {pipe}:{at['out_send']} and {at['send_loop']} (a stage sends "
                       "the partition metadata, its part of the activation and whatever else its "
                       f"last layer returns) and {at['mask_cls']} (a mask cast to fp16, "
                       f"{at['mask_half']}, only for a class named GPT2ModelPipe): a model whose "
                       "stages pass the hidden states alone sends no mask"),
        options=options, lacks=lacks, recv_inputs=Cited("clone", _recv_source(src, at)),
        bf16_optimizer=_bf16_optimizer(src, at),
        partition_meta=Cited("partitioned", _meta_source(src, at) + "; sent with every "
                             "micro-batch"),
    )


#: The DeepSpeed releases read tag by tag (``_DS_LINES``), each a table of its own.
DEEPSPEED_TAGS: dict[str, Framework] = {v: _deepspeed_release(v) for v in _DS_LINES}



#: Megatron-LM at every Megatron Core release tag from core_v0.8.0 to core_v0.19.0 (not the
#: release candidates), a table each (:func:`_megatron_release`), as ``DEEPSPEED_TAGS``: each
#: place a fact was read is a file under ``megatron/``, the code found there and the place it
#: follows (its first occurrence after that one's line, or in the file); ``_MEG_LINES`` its line
#: per tag (0: absent), checked against a clone of NVIDIA/Megatron-LM by
#: ``tests/test_profiles_frameworks.py``.
_MS = "core/pipeline_parallel/schedules.py"
_MP = "core/pipeline_parallel/p2p_communication.py"
_MF = "core/distributed/finalize_model_grads.py"
_MD = "core/distributed/distributed_data_parallel.py"
_MA = "training/arguments.py"
_MEG_ANCHORS: tuple[tuple[str, str, str, str], ...] = (
    ("sched", _MS, "def forward_backward_pipelining_without_interleaving(", ""),
    ("no_overlap", _MS, "does not support overlapping p2p communication", "sched"),
    ("shapes", _MS, "def get_tensor_shapes(", ""),
    ("seq_par", _MS, "if config.sequence_parallel:", "shapes"),
    ("warm_send", _MS, "send_forward(", "sched"),
    ("sfrb", _MS, "send_forward_recv_backward(", "sched"),
    ("sbrf", _MS, "send_backward_recv_forward(", "sched"),
    ("in_append", _MS, "input_tensors.append(", "sched"),
    ("in_pop", _MS, "input_tensors.pop(0)", "sched"),
    ("batched", _MP, "def _batched_p2p_ops(", ""),
    ("isend", _MP, "batch_isend_irecv(", "batched"),
    ("branch", _MP, "elif config.batch_p2p_comm:", ""),
    ("wait", _MP, "req.wait()", "branch"),
    ("sync", _MP, "torch.cuda.synchronize()", "branch"),
    ("send_fwd", _MP, "def send_forward(", ""),
    ("dtype", _MP, "dtype=config.pipeline_dtype", ""),
    ("arg_batch", _MA, "kw_args['batch_p2p_comm'] = not args.overlap_p2p_comm", ""),
    ("arg_batch_u", "training/argument_utils.py",
     "kw_args['batch_p2p_comm'] = not args.overlap_p2p_comm", ""),
    ("overlap_off", _MA, "args.overlap_p2p_comm = False", ""),
    ("bf16_fp32", _MA, "args.accumulate_allreduce_grads_in_fp32 = True", ""),
    ("acc_arg", _MA, "'--accumulate-allreduce-grads-in-fp32'", ""),
    ("clip_arg", _MA, "group.add_argument('--clip-grad', type=float, default=1.0,", ""),
    ("grad_fp32", "core/distributed/distributed_data_parallel_config.py",
     "grad_reduce_in_fp32: bool = False", ""),
    ("overlap_cfg", "core/distributed/distributed_data_parallel_config.py",
     "overlap_grad_reduce: bool = False", ""),
    ("bucket", _MD, "40000000, 1000000 *", ""),
    ("bucket_off", _MD, "bucket_size = None", "bucket"),
    ("pp_first", _MD, "Turn off bucketing if we are on a pipeline stage that is not the first", ""),
    ("pp_off", _MD, "self.bucket_size = None", "pp_first"),
    ("fmg", _MF, "def finalize_model_grads(", ""),
    ("finish", _MF, "finish_grad_sync(", "fmg"),
    ("emb", _MF, "_allreduce_word_embedding_grads(model", "fmg"),
    ("emb_old", _MF, "_allreduce_embedding_grads(model", "fmg"),
    ("emb_ar", _MF, "torch.distributed.all_reduce(grad, group=", ""),
    ("clip_if", "core/optimizer/optimizer.py", "if self.config.clip_grad > 0.0:", ""),
    ("mp_group", "core/optimizer/optimizer.py", "return parallel_state.get_model_parallel_group()", ""),
    ("clip_cfg", "core/optimizer/optimizer_config.py", "clip_grad: float = 1.0", ""),
    ("opt_step", "training/training.py",
     "update_successful, grad_norm, num_zeros_in_grad = optimizer.step()", ""),
    ("land", "training/training.py", "logical_and_across_model_parallel_group(", "opt_step"),
    ("tp_init", "core/parallel_state.py", "def initialize_model_parallel(", ""),
    ("max_stat", "training/training.py",
     "grad_norm = reduce_max_stat_across_model_parallel_group(", "opt_step"),
    ("found_inf", "core/optimizer/optimizer.py",
     "found_inf_flag = self._unscale_main_grads_and_check_for_nan()", ""),
    ("grad_buf", "core/distributed/param_and_grad_buffer.py", "dtype=self.grad_dtype,", ""),
)
_MEG_LINES: dict[str, tuple[int, ...]] = {
    "0.8.0": (1256, 1288, 1147, 1170, 1396, 1446, 1474, 1400, 1457, 121, 163, 349, 365, 371,
            423, 324, 621, 0, 274, 305, 1380, 960, 11, 14, 53, 57, 66, 72, 100, 113, 0, 131, 41,
            435, 142, 106, 611, 0, 307, 0, 385, 368),
    "0.9.0": (1274, 1304, 1161, 1186, 1416, 1467, 1495, 1420, 1478, 121, 153, 331, 383, 389,
            457, 292, 671, 0, 289, 336, 1492, 1029, 11, 14, 56, 60, 69, 75, 99, 112, 0, 130, 36,
            438, 144, 113, 737, 0, 352, 0, 388, 507),
    "0.10.0": (1606, 1636, 1485, 1510, 1748, 1799, 1827, 1752, 1810, 119, 151, 328, 385, 391,
            459, 289, 784, 0, 356, 422, 1648, 1153, 11, 14, 56, 60, 69, 75, 212, 225, 0, 252,
            135, 459, 161, 103, 787, 0, 390, 0, 409, 589),
    "0.11.0": (1613, 1643, 1492, 1517, 1755, 1806, 1834, 1759, 1817, 119, 151, 328, 385, 391,
            459, 289, 856, 0, 375, 472, 1738, 1244, 11, 14, 57, 61, 70, 76, 241, 254, 0, 281,
            136, 483, 174, 120, 816, 821, 432, 824, 431, 594),
    "0.12.0": (1719, 1749, 1598, 1623, 1861, 1912, 1940, 1865, 1923, 119, 151, 334, 391, 403,
            476, 295, 1016, 0, 470, 594, 2020, 1478, 11, 14, 58, 62, 71, 77, 256, 269, 0, 296,
            150, 483, 174, 148, 1266, 1271, 431, 1274, 431, 630),
    "0.12.1": (1719, 1749, 1598, 1623, 1861, 1912, 1940, 1865, 1923, 119, 151, 334, 391, 403,
            476, 295, 1016, 0, 470, 594, 2020, 1478, 11, 14, 58, 62, 71, 77, 256, 269, 0, 296,
            150, 483, 174, 148, 1266, 1271, 431, 1274, 431, 630),
    "0.12.2": (1719, 1749, 1598, 1623, 1861, 1912, 1940, 1865, 1923, 119, 151, 334, 391, 403,
            476, 295, 1026, 0, 480, 604, 2030, 1488, 11, 14, 58, 62, 71, 77, 256, 269, 0, 296,
            150, 483, 174, 148, 1266, 1271, 431, 1274, 431, 630),
    "0.12.3": (1719, 1749, 1598, 1623, 1861, 1912, 1940, 1865, 1923, 119, 151, 334, 391, 403,
            476, 295, 1026, 0, 480, 604, 2030, 1488, 11, 14, 58, 62, 71, 77, 256, 269, 0, 296,
            150, 483, 174, 148, 1266, 1271, 431, 1274, 431, 630),
    "0.13.0": (1754, 1785, 1629, 1654, 1903, 1962, 1995, 1909, 1973, 119, 151, 334, 391, 403,
            482, 295, 1132, 0, 576, 686, 2225, 1678, 11, 14, 64, 68, 177, 187, 284, 297, 0, 324,
            153, 551, 177, 162, 1422, 1427, 480, 1430, 495, 649),
    "0.13.1": (1754, 1785, 1629, 1654, 1903, 1962, 1995, 1909, 1973, 119, 151, 334, 391, 403,
            482, 295, 1132, 0, 576, 686, 2225, 1678, 11, 14, 64, 68, 177, 187, 284, 297, 0, 324,
            153, 551, 177, 162, 1422, 1427, 480, 1430, 495, 649),
    "0.14.0": (1959, 1992, 1933, 1952, 2160, 2216, 2251, 2164, 2227, 16, 48, 353, 392, 398, 465,
            314, 1165, 0, 548, 665, 2300, 1727, 11, 14, 64, 68, 177, 187, 376, 422, 449, 0, 250,
            563, 178, 175, 1248, 1253, 468, 1256, 504, 687),
    "0.15.0": (1949, 1982, 1923, 1942, 2150, 2206, 2236, 2154, 2217, 16, 48, 353, 392, 398, 465,
            314, 1253, 0, 614, 745, 2543, 1889, 11, 14, 60, 64, 113, 123, 388, 434, 461, 0, 250,
            602, 179, 174, 1295, 1300, 514, 1303, 543, 701),
    "0.15.1": (1949, 1982, 1923, 1942, 2150, 2206, 2236, 2154, 2217, 16, 48, 353, 392, 398, 465,
            314, 1253, 0, 614, 745, 2543, 1889, 11, 14, 60, 64, 113, 123, 388, 434, 461, 0, 250,
            602, 179, 174, 1295, 1300, 514, 1303, 543, 701),
    "0.15.2": (1949, 1982, 1923, 1942, 2150, 2206, 2236, 2154, 2217, 16, 48, 353, 392, 398, 465,
            314, 1253, 0, 614, 745, 2543, 1889, 11, 14, 60, 64, 113, 123, 388, 434, 461, 0, 250,
            602, 179, 174, 1295, 1300, 514, 1303, 543, 701),
    "0.15.3": (1949, 1982, 1923, 1942, 2150, 2206, 2236, 2154, 2217, 16, 48, 353, 392, 398, 465,
            314, 1253, 0, 614, 745, 2543, 1889, 11, 14, 60, 64, 113, 123, 388, 434, 461, 0, 250,
            602, 179, 174, 1295, 1300, 514, 1303, 543, 701),
    "0.16.0": (1972, 2006, 1946, 1965, 2174, 2230, 2260, 2178, 2241, 16, 48, 353, 392, 398, 465,
            314, 1326, 0, 585, 723, 2194, 1825, 11, 14, 65, 68, 91, 102, 396, 443, 470, 0, 258,
            606, 182, 331, 1703, 1715, 548, 1718, 547, 782),
    "0.16.1": (1972, 2006, 1946, 1965, 2174, 2230, 2260, 2178, 2241, 16, 48, 353, 392, 398, 465,
            314, 1326, 0, 585, 723, 2194, 1825, 11, 14, 65, 68, 91, 102, 396, 443, 470, 0, 258,
            606, 182, 331, 1703, 1715, 548, 1718, 547, 782),
    "0.17.0": (2007, 2043, 1975, 2000, 2224, 2278, 2308, 2228, 2289, 17, 49, 374, 413, 419, 486,
            335, 1661, 0, 844, 999, 2618, 2213, 13, 16, 65, 68, 91, 102, 400, 447, 474, 0, 258,
            607, 183, 347, 1883, 1895, 548, 1898, 548, 983),
    "0.17.1": (2007, 2043, 1975, 2000, 2224, 2278, 2308, 2228, 2289, 17, 49, 374, 413, 419, 486,
            335, 1669, 0, 844, 1004, 2631, 2226, 13, 16, 66, 69, 92, 103, 400, 447, 474, 0, 258,
            607, 183, 347, 1877, 1889, 548, 1892, 548, 1038),
    "0.18.0": (2055, 2091, 2023, 2048, 2278, 2332, 2362, 2282, 2343, 17, 49, 374, 413, 419, 486,
            335, 0, 302, 991, 1184, 2699, 2295, 15, 18, 69, 72, 95, 106, 445, 498, 528, 0, 258,
            634, 199, 371, 2287, 2303, 547, 2306, 575, 1100),
    "0.18.2": (2055, 2091, 2023, 2048, 2278, 2332, 2362, 2282, 2343, 17, 49, 374, 413, 419, 486,
            335, 0, 302, 991, 1184, 2706, 2302, 15, 18, 69, 72, 95, 106, 445, 498, 528, 0, 258,
            634, 199, 371, 2287, 2303, 547, 2306, 575, 1100),
    "0.19.0": (2120, 2156, 2088, 2113, 2328, 2382, 2412, 2332, 2393, 17, 49, 374, 413, 419, 486,
            335, 0, 307, 978, 1193, 2921, 2505, 15, 18, 69, 72, 95, 106, 563, 626, 659, 0, 258,
            830, 340, 371, 2474, 2503, 601, 2506, 764, 1161),
}


#: The distributed optimizer (``--use-distributed-optimizer``) at each tag of ``_MEG_LINES``: its
#: own table of places (as ``_MEG_ANCHORS``; ``_MEG_DO_LINES`` the line of each per tag, 0:
#: absent), checked against a clone by ``tests/test_megatron_dist_optimizer.py``
#: (``python tools/framework_lines.py megatron-do REPO TAG`` prints a row).
_MB = "core/distributed/param_and_grad_buffer.py"
_MO = "core/optimizer/distrib_optimizer.py"
_MDC = "core/distributed/distributed_data_parallel_config.py"
_MEG_DO_ANCHORS: tuple[tuple[str, str, str, str], ...] = (
    ("do_cfg", _MDC, "use_distributed_optimizer: bool = False", ""),
    ("opg_cfg", _MDC, "overlap_param_gather: bool = False", ""),
    ("do_arg", _MA, "'--use-distributed-optimizer'", ""),
    ("opg_arg", _MA, "'--overlap-param-gather'", ""),
    ("opg_if", _MA, "if args.overlap_param_gather:", ""),
    ("opg_assert", _MA, "Must use --overlap-param-gather with --overlap-grad-reduce", "opg_if"),
    ("grad_sync", _MB, "def start_grad_sync(", ""),
    ("rs_old", _MB, "torch.distributed._reduce_scatter_base(", "grad_sync"),
    ("rs_new", _MB, "dist_reduce_scatter_func(", "grad_sync"),
    ("param_sync", _MB, "def start_param_sync(", ""),
    ("ag_old", _MB, "torch.distributed._all_gather_base(", "param_sync"),
    ("ag_new", _MB, "dist_all_gather_func(", "param_sync"),
    ("shard_main", _MO, "shard_main_param = shard_model_param.clone().float()", ""),
    ("shard_grad", _MO, "shard_main_param.grad = shard_model_grad.float()", ""),
    ("step_rg", _MO, "def step_with_ready_grads(", ""),
    ("step_ag", _MO, "not self.ddp_config.overlap_param_gather", "step_rg"),
    ("mp_group_do", _MO, "def get_model_parallel_group(", ""),
    ("stats_group_do", _MO, "def get_grad_stats_parallel_group(", ""),
    ("pre_hook", _MD, "def _make_forward_pre_hook(", ""),
    ("finish_ps", _MB, "def finish_param_sync(", ""),
    ("dispatch_ps", _MB, "if not self.param_gather_dispatched:", "finish_ps"),
    ("align_off", _MA, "args.align_param_gather = False", ""),
    ("fp16_copy", "core/optimizer/optimizer.py",
     "main_param.grad = model_param.main_grad.float()", ""),
    ("zero_grad", "training/training.py", "optimizer.zero_grad()", ""),
)
_MEG_DO_LINES: dict[str, tuple[int, ...]] = {
    "0.8.0": (17, 0, 1453, 1429, 279, 0, 96, 135, 0, 0, 0, 0, 319, 1520, 1597, 0, 547, 0, 0, 0, 0,
            0, 582, 586),
    "0.9.0": (25, 17, 1584, 1556, 296, 300, 223, 259, 0, 147, 176, 0, 368, 1691, 1816, 1833, 574,
            0, 307, 193, 213, 290, 580, 712),
    "0.10.0": (25, 17, 1746, 1718, 364, 368, 246, 355, 313, 168, 210, 199, 367, 1674, 1799, 1816,
            0, 550, 327, 216, 236, 357, 601, 759),
    "0.11.0": (25, 17, 1839, 1810, 399, 403, 255, 360, 321, 169, 211, 200, 376, 1764, 1907, 1924,
            0, 589, 326, 217, 237, 376, 636, 787),
    "0.12.0": (25, 17, 2131, 2102, 502, 506, 279, 388, 348, 193, 235, 224, 366, 1988, 2088, 2107,
            0, 584, 359, 241, 261, 471, 636, 1226),
    "0.12.1": (25, 17, 2131, 2102, 502, 506, 279, 388, 348, 193, 235, 224, 366, 1988, 2088, 2107,
            0, 584, 359, 241, 261, 471, 636, 1226),
    "0.12.2": (25, 17, 2141, 2112, 512, 516, 279, 388, 348, 193, 235, 224, 366, 1988, 2088, 2107,
            0, 584, 359, 241, 261, 481, 636, 1226),
    "0.12.3": (25, 17, 2141, 2112, 512, 516, 279, 388, 348, 193, 235, 224, 366, 1988, 2088, 2107,
            0, 584, 359, 241, 261, 481, 636, 1226),
    "0.13.0": (25, 17, 2348, 2319, 594, 598, 291, 402, 360, 205, 247, 236, 373, 2015, 2147, 2166,
            0, 591, 450, 253, 273, 577, 704, 1372),
    "0.13.1": (25, 17, 2348, 2319, 594, 598, 291, 402, 360, 205, 247, 236, 373, 2015, 2147, 2166,
            0, 591, 450, 253, 273, 577, 704, 1372),
    "0.14.0": (25, 17, 2412, 2383, 559, 563, 323, 442, 396, 214, 260, 249, 379, 2091, 2270, 2289,
            0, 597, 467, 266, 286, 549, 716, 1202),
    "0.15.0": (25, 17, 2658, 2629, 625, 629, 322, 441, 395, 213, 259, 248, 395, 2396, 2575, 2594,
            0, 616, 405, 265, 285, 615, 755, 1249),
    "0.15.1": (25, 17, 2658, 2629, 625, 629, 322, 441, 395, 213, 259, 248, 395, 2396, 2575, 2594,
            0, 616, 405, 265, 285, 615, 755, 1249),
    "0.15.2": (25, 17, 2658, 2629, 625, 629, 322, 441, 395, 213, 259, 248, 395, 2396, 2575, 2594,
            0, 616, 405, 265, 285, 615, 755, 1249),
    "0.15.3": (25, 17, 2658, 2629, 625, 629, 322, 441, 395, 213, 259, 248, 395, 2396, 2575, 2594,
            0, 616, 405, 265, 285, 615, 755, 1249),
    "0.16.0": (25, 17, 2283, 2264, 597, 601, 364, 502, 443, 250, 296, 285, 399, 2419, 2598, 2617,
            0, 620, 384, 302, 322, 586, 759, 1619),
    "0.16.1": (25, 17, 2283, 2264, 597, 601, 364, 502, 443, 250, 296, 285, 399, 2419, 2598, 2617,
            0, 620, 384, 302, 322, 586, 759, 1619),
    "0.17.0": (27, 19, 2694, 2683, 856, 861, 520, 666, 607, 297, 0, 417, 399, 2431, 2610, 2629, 0,
            620, 388, 432, 451, 845, 760, 1799),
    "0.17.1": (27, 19, 2707, 2696, 856, 861, 521, 667, 608, 298, 0, 418, 404, 2476, 2667, 2686, 0,
            625, 389, 433, 452, 845, 760, 1793),
    "0.18.0": (29, 21, 2772, 2764, 1003, 1008, 556, 719, 660, 351, 0, 477, 422, 2697, 3013, 3020,
            0, 771, 413, 494, 513, 992, 787, 2184),
    "0.18.2": (29, 21, 2779, 2771, 1003, 1008, 556, 719, 660, 351, 0, 477, 422, 2697, 3013, 3020,
            0, 771, 413, 494, 513, 992, 787, 2184),
    "0.19.0": (29, 21, 2997, 2989, 990, 995, 594, 776, 712, 377, 0, 515, 445, 2782, 3158, 3165, 0,
            796, 432, 532, 551, 979, 1097, 2364),
}


def _megatron_release(version: str) -> Framework:
    """Megatron-LM at tag ``core_v{version}`` (a key of :data:`_MEG_LINES`): 0.20.0's facts where
    that release's code is the same, each citing its own line at this tag."""
    at = dict(zip((a[0] for a in _MEG_ANCHORS), _MEG_LINES[version], strict=True))
    do = dict(zip((a[0] for a in _MEG_DO_ANCHORS), _MEG_DO_LINES[version], strict=True))
    src = f"NVIDIA/Megatron-LM core_v{version} (tag core_v{version})"
    attn, attn_options, attn_lacks = _megatron_attention(src, dict(zip(
        (a[0] for a in _MEG_ATTN_ANCHORS), _MEG_ATTN_LINES[version], strict=True)), version)
    # the distributed optimizer where its buffer's reduce-scatter and all-gather were read
    # (core_v0.8.0 all-gathers in distrib_optimizer.py, from zero_grad: not read, not offered)
    dist: dict[str, tuple[tuple[Any, ...], str]] = {}
    if do["param_sync"] and (do["ag_new"] or do["ag_old"]) and (do["rs_new"] or do["rs_old"]):
        dist["use_distributed_optimizer"] = ((True, False), _dist_optimizer_source(src, do))
        if do["opg_cfg"] and do["opg_assert"] and do["step_ag"] and do["finish_ps"] \
                and do["dispatch_ps"] and do["align_off"]:
            dist["overlap_param_gather"] = ((True, False),
                                            _overlap_param_gather_source(src, do))
    sched, p2p, fin = "core/pipeline_parallel/schedules.py", \
        "core/pipeline_parallel/p2p_communication.py", "core/distributed/finalize_model_grads.py"
    ddp, args = "core/distributed/distributed_data_parallel.py", "training/arguments.py"
    batch = (f"training/arguments.py:{at['arg_batch']}" if at["arg_batch"] else
             f"training/argument_utils.py:{at['arg_batch_u']}")
    emb = at["emb"] or at["emb_old"]
    whole = (f"{src}: {sched}:{at['shapes']} and {at['seq_par']} (get_tensor_shapes: each TP "
             "rank sends the whole (seq, mbs, hidden) tensor; 1/t of the sequence only with "
             "sequence_parallel)")
    if at["land"]:
        join = (f"{src}: training/training.py:{at['opt_step']} (optimizer.step()), then "
                f"{at['land']} (logical_and_across_model_parallel_group: an all-reduce over the "
                "model-parallel group of TP and pipeline ranks)")
    else:
        join = (f"{src}: training/training.py:{at['opt_step']} (optimizer.step(), whose "
                f"gradient norm, core/optimizer/optimizer.py:{at['clip_if']}, is all-reduced over "
                f"the model-parallel group of TP and pipeline ranks, {at['mp_group']})")
    return Framework(
        key="megatron", title=f"Megatron-LM core {version} (Megatron Core schedules and "
        "DistributedDataParallel)", versions=(version,), code=src,
        p2p=Cited("batched", f"{src}: {sched}:{at['sched']} "
                  "(forward_backward_pipelining_without_interleaving: warm-up send_forward "
                  f"{at['warm_send']}; steady send_forward_recv_backward {at['sfrb']} and "
                  f"send_backward_recv_forward {at['sbrf']}), {at['no_overlap']} (refuses "
                  f"overlap_p2p_comm); {p2p}:{at['branch']} and {at['batched']}-{at['isend']} "
                  "(batch_p2p_comm: both operations of a call posted by one batch_isend_irecv; "
                  f"{batch} batch_p2p_comm = not overlap_p2p_comm, arguments.py:"
                  f"{at['overlap_off']} overlap off without interleaving), {at['wait']} and "
                  f"{at['sync']} (every request waited on, then torch.cuda.synchronize)"),
        partitioned=Cited(False, whole),
        grad_partitioned=Cited(False, whole),
        gathers=Cited((), whole),
        hop_mask=Cited(0, f"{src}: {p2p}:{at['send_fwd']} (send_forward sends one tensor, the "
                       "hidden states, into a buffer of the known tensor_shape): no mask crosses "
                       "a hop"),
        gather_bytes=Cited(None, f"{src}: {sched}:{at['shapes']} (no all-gather)"),
        allreduce=Cited("after-backward", f"{src}: core/distributed/"
                        f"distributed_data_parallel_config.py:{at['overlap_cfg']} "
                        f"(overlap_grad_reduce = False) and {fin}:{at['finish']} "
                        "(finish_grad_sync after the pipeline's last backward pass)"),
        barrier=Cited(False, f"{src}: {fin}:{at['fmg']}-{emb} (no barrier across stages)"),
        tied_first=Cited(False, f"{src}: {fin}:{at['finish']} then {emb} (the data-parallel "
                         "all-reduce, then the word embedding's)"),
        optimizer_barrier=Cited(
            {"fp32": True, "fp16": True, "bf16": True},
            f"{src}: core/optimizer/optimizer.py:{at['clip_if']} (step clips the gradients when "
            f"clip_grad > 0: optimizer_config.py:{at['clip_cfg']} clip_grad = 1.0, {args}:"
            f"{at['clip_arg']} --clip-grad default 1.0), the norm all-reduced over the "
            f"model-parallel group of TP and pipeline ranks (optimizer.py:{at['mp_group']})"),
        optimizer_allreduces=Cited(
            {p: 1 + (p == "fp16") + (at["land"] > 0) + (at["max_stat"] > 0) for p in _PREC},
            f"{src}: core/optimizer/optimizer.py:{at['clip_if']} (clip_grad = 1.0 by default: "
            "get_grad_norm_fp32 all-reduces the norm over the model-parallel group), fp16 also "
            f"{at['found_inf']} (_unscale_main_grads_and_check_for_nan: found_inf all-reduced "
            "over the same group; bf16 and fp32 have no grad scaler)"
            + (f"; then training/training.py:{at['land']} (logical_and_across_model_parallel_"
               f"group: update_successful) and {at['max_stat']} (reduce_max_stat_across_model_"
               "parallel_group: grad_norm), each an all_reduce then .item()"
               if at["land"] and at["max_stat"] else
               "; nothing after the optimizer step (train_step reduces no flag or norm at this "
               "tag)")),
        bucket_elements=Cited(math.inf, f"{src}: {ddp}:{at['bucket']}-{at['bucket_off']} "
                              "(bucket_size None, one bucket, unless overlap_grad_reduce; then "
                              "max(40000000, 1000000 x dp) elements)"),
        bucket_rule=Cited("megatron", f"{src}: {ddp}:{at['pp_first']}-{at['pp_off']} ('Turn off "
                          "bucketing if we are on a pipeline stage that is not the first': one "
                          "bucket there; buckets of bucket_size elements on the first stage)"),
        dp_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                       f"{src}: core/distributed/distributed_data_parallel_config.py:"
                       f"{at['grad_fp32']} (grad_reduce_in_fp32 = False: the model's dtype) and "
                       f"{args}:{at['bf16_fp32']} (bf16 accumulates and all-reduces in fp32)"),
        tied_bytes=Cited({"fp32": 4, "fp16": 2, "bf16": 4},
                         f"{src}: {fin}:{at['emb_ar']} (the embedding's main_grad, the gradient "
                         "buffer's dtype, as dp_bytes)"),
        grad_buffer=Cited(True, f"{src}: core/distributed/param_and_grad_buffer.py:"
                          f"{at['grad_buf']} (the gradient buffer, every parameter's main_grad, "
                          "allocated in grad_dtype, fp32 when grad_reduce_in_fp32)"),
        activation_bytes=Cited(_PREC, f"{src}: {p2p}:{at['dtype']} (received tensors of "
                               "config.pipeline_dtype, the model's dtype)"),
        pipe_buffers=Cited(0, f"{src}: {sched}:{at['in_append']} and {at['in_pop']} (a received "
                           "input is kept in input_tensors while its micro-batch is in flight, "
                           "popped at its backward pass: the in-flight count, which dtsim's "
                           "memory counts as DeepSpeed 0.16.5's buffers, at least 2)"),
        pipe_groups=Cited(False, f"{src}: core/parallel_state.py:{at['tp_init']} "
                          "(initialize_model_parallel: one tensor_model_parallel_size for every "
                          "stage)"),
        step_join=Cited("pipeline", join + ": every stage of a pipeline starts its next step "
                        "after the slowest one's optimizer step"),
        options={
            "overlap_grad_reduce": ((True, False), f"{src}: core/distributed/"
                                    f"distributed_data_parallel_config.py:{at['overlap_cfg']} "
                                    f"and {ddp}:{at['bucket']}-{at['bucket_off']} (buckets of "
                                    "max(4e7, 1e6 dp) elements reduced as the backward pass "
                                    "produces them)"),
            "accumulate_allreduce_grads_in_fp32": ((True, False), f"{src}: {args}:"
                                                   f"{at['acc_arg']} and {at['bf16_fp32']} (fp32 "
                                                   "gradient buffers: dp_bytes and tied_bytes "
                                                   "4)"),
            **dist,
            **attn_options,
        },
        attention=attn, lacks=attn_lacks,
        grad_copy=Cited(4, _grad_copy_source(src, do)),
    )


#: The Megatron Core releases read tag by tag (``_MEG_LINES``), each a table of its own.
MEGATRON_TAGS: dict[str, Framework] = {v: _megatron_release(v) for v in _MEG_LINES}

FRAMEWORKS: dict[str, Framework] = {f.key: f for f in (DEEPSPEED, SAILOR, MEGATRON, DDP)}
#: Every release read, per key and version (the first of each key its default, FRAMEWORKS').
RELEASES: dict[str, dict[str, Framework]] = {}
for _f in (DEEPSPEED, DEEPSPEED_0313, *DEEPSPEED_TAGS.values(), SAILOR, MEGATRON,
           *MEGATRON_TAGS.values(), DDP):
    for _v in _f.versions:
        RELEASES.setdefault(_f.key, {})[_v] = _f
DEFAULT_FRAMEWORK = "deepspeed"
#: What a Sailor plan_config (the artifact's run files) ran.
SAILOR_FRAMEWORK = "sailor-deepspeed"


#: A release's minor or patch number as a release writes it (PyTorch's version.txt: "2.4.1"):
#: decimal ASCII digits, no leading zero ("2.04" is no release: it is not read as 2.4), at most
#: ``_RELEASE_DIGITS`` of them (PyTorch's releases so far have 1 or 2: 1.13.1, 2.9.0; a
#: 20-digit minor is a typing slip, not a release the 2.x table can be said to cover).
_RELEASE_DIGITS = 3
_RELEASE_NUMBER = re.compile(f"(?:0|[1-9][0-9]{{0,{_RELEASE_DIGITS - 1}}})", re.ASCII)


def _known(name: str) -> str:
    """The versions of ``name`` read, the tags read one by one as their first and last."""
    ranged = {"deepspeed": DEEPSPEED_TAGS, "megatron": MEGATRON_TAGS}.get(name, {})
    singles = [f"{v} (any {v[:-2]}.N or {v[:-2]}.N.M as the release writes it: N and M "
               f"of 1 to {_RELEASE_DIGITS} digits, no leading zero)" if v.endswith(".x") else v
               for v in RELEASES[name] if v not in ranged]
    if ranged:
        tags = list(ranged)
        singles.append(f"each tagged release {tags[0]} to {tags[-1]}")
    return ", ".join(singles)


def framework(name: str, version: str | None = None) -> Framework:
    """The framework called ``name`` at ``version`` (None: its default release); one line naming
    ``framework`` or ``framework_version`` if there is none."""
    f = FRAMEWORKS.get(name) if isinstance(name, str) else None
    check(f is not None, "framework", "one of " + ", ".join(FRAMEWORKS), name)
    if version is None:
        return f  # type: ignore[return-value]
    releases = RELEASES[name]
    if version not in releases and isinstance(version, str):
        # a table read for a whole major line (DDP's "2.x": its bucket rules hold for every 2.N)
        major, dot, rest = version.partition(".")
        line = f"{major}.x"
        if line in releases and dot and rest.count(".") <= 1 and all(
                _RELEASE_NUMBER.fullmatch(p) for p in rest.split(".")):
            return releases[line]
    check(version in releases, "framework_version",
          f"a version of {name} the table was read at ({_known(name)})", version)
    return releases[version]


@dataclass(frozen=True)
class FrameworkSpec:
    """What a plan says ran it: a framework, its version, the precision, and options.

    Parameters
    ----------
    name : str
        A key of :data:`FRAMEWORKS`.
    version : str or None
        A version the table was read at (None: the table's).
    precision : {"fp32", "fp16", "bf16"} or None
        The training precision (None: from the model profile's bytes per value).
    options : tuple of (str, value)
        Options of the framework's configuration the table knows
        (``Framework.options``), e.g. DeepSpeed's ``communication_data_type``.
    """

    name: str = DEFAULT_FRAMEWORK
    version: str | None = None
    precision: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        fw = framework(self.name, self.version)
        if self.precision is not None:
            check(self.precision in PRECISIONS, "precision", "one of " + ", ".join(PRECISIONS),
                  self.precision)
            check(self.precision in fw.precisions, "precision", f"one of "
                  f"{', '.join(fw.precisions)} with {fw.key} {fw.versions[0]} (the precisions "
                  "its code has)", self.precision)
        opts = tuple(self.options.items()) if isinstance(self.options, dict) else self.options
        check(isinstance(opts, tuple), "framework_options", "a table of options", self.options)
        seen = set()
        for item in opts:
            check(isinstance(item, tuple) and len(item) == 2, "framework_options",
                  "(name, value) pairs", item)
            k, v = item
            has = ", ".join(fw.options) or "none"
            if k in fw.lacks:
                check(False, "framework_options", f"an option {fw.key} {fw.versions[0]} has "
                      f"({has}; {k}: {fw.lacks[k]})", k)
            check(k in fw.options, "framework_options", f"an option {fw.key} has ({has})", k)
            check(k not in seen, "framework_options", "each option once", k)
            seen.add(k)
            allowed = fw.options[k][0]
            if allowed:
                check(any(v == a and type(v) is type(a) for a in allowed), k,
                      "one of " + ", ".join(map(str, allowed)), v)
            else:
                check(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                      and math.isfinite(v), k, "a number > 0", v)
        got = dict(opts)
        if got.get("overlap_param_gather"):  # Megatron-LM's two asserts (its source's lines)
            opg = fw.options["overlap_param_gather"][1]
            where = re.search(r"training/arguments\.py:[0-9]+ and ([0-9]+-[0-9]+)", opg)
            for need in ("use_distributed_optimizer", "overlap_grad_reduce"):
                check(got.get(need) is True, "overlap_param_gather", f"true only with {need}="
                      f"true ({opg.partition(':')[0]}: training/arguments.py:"
                      f"{where.group(1) if where else '?'} asserts it)", True)
            check(False, "overlap_param_gather", "false: with it each stage's first forward "
                  "pass waits for its parameters' all-gather after receiving its input (the "
                  "forward pre-hook, align_param_gather off without interleaving), which dtsim "
                  "does not model", True)
        object.__setattr__(self, "options", tuple(sorted(opts)))

    @property
    def framework(self) -> Framework:
        """The release this spec names (its version's, else the key's default)."""
        return framework(self.name, self.version)

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class FrameworkBehaviour:
    """What a framework does with one plan's traffic, resolved to numbers (with sources)."""

    framework: Framework
    precision: str
    p2p: str
    partitioned: bool
    gathers: tuple[int, ...]
    gather_bytes: int
    allreduce: str
    barrier: bool
    tied_first: bool
    bucket_elements: float
    dp_bytes: int
    tied_bytes: int
    activation_bytes: int
    sources: dict[str, str]
    bucket_rule: str = "megatron"
    optimizer_barrier: bool = False
    #: blocking one-value all-reduces over the model-parallel group in and after the optimizer
    #: step (``Framework.optimizer_allreduces``, this precision's)
    optimizer_allreduces: int = 0
    first_bucket: bool = False  # DDP at its default cap: the first bucket 1 MiB
    step_join: str = "pipeline"
    pipe_groups: bool = False
    #: the TP degrees it runs (None: any): the Sailor artifact's 1, 2, 4; 1 with DeepSpeed's
    #: pipe_partitioned and grad_partitioned apart (the gradient alone does not train)
    tp_degrees: tuple[int, ...] | None = None
    #: the gradient sent back as 1/t parts (None: as ``partitioned``, the activation)
    grad_partitioned: bool | None = None
    #: received-input buffers beyond ``min(L - j, m)`` (``Framework.pipe_buffers``)
    pipe_buffers: int = 0
    #: bytes of the attention mask each TP rank sends after its part of every activation, a
    #: message of its own (``hop_mask`` times the sequence squared; None: the framework sends
    #: one but no sequence was given)
    mask_bytes: float | None = 0.0
    #: the sequence length that sized it (None: no mask, or not given)
    sequence: int | None = None
    #: the backward all-gather (``gathers[1]``) runs before each blocking gradient receive,
    #: after the step's activation send (``Framework.recv_gather``), not in the backward pass
    recv_gather: bool = False
    #: received inputs held as ``Framework.recv_inputs`` "clone" says (else pipe_buffers')
    recv_clones: bool = False
    #: DeepSpeed's BF16_Optimizer (bf16 only, ``Framework.bf16_optimizer``): the all-gather's
    #: shard in elements (inf: one all-gather); None: the optimizer state whole on every rank
    bf16_allgather: float | None = None
    #: ``Framework.partition_meta``: each hop's tensor preceded by its partition metadata, a
    #: message of its own ("partitioned": with each partitioned tensor; "always"; None: never;
    #: :func:`sim.profiles.build.partition_meta_bytes`)
    partition_meta: str | None = None
    #: bytes a value of the gradients a rank holds (``Framework.grad_buffer``: the all-reduce
    #: buffer's, where wider than the model's values); None: the model's ``bytes_per_value``
    grad_bytes: int | None = None
    #: ``Framework.grad_buffer``: the gradients live in the buffer the data-parallel all-reduce
    #: (or reduce-scatter) reduces in place (Megatron-LM's ``bucket.grad_data``), so the
    #: all-reduce makes no flattened copy of them (DeepSpeed's pipeline engine flattens up to
    #: 5e8 elements a bucket: :data:`sim.profiles.build.BUCKET_ELEMENTS`)
    grads_in_buffer: bool = False
    #: Megatron-LM's attention as the plan runs it, ``(transformer_impl, attention_backend,
    #: selective recomputation)`` (``Framework.attention``; :func:`attention_path` reads it);
    #: None: the model's own attention, its s x s matrices kept (eq. 2)
    attention: tuple[str, str, bool] | None = None
    #: Megatron-LM's distributed optimizer (``use_distributed_optimizer``): the gradients
    #: reduce-scattered over the data-parallel group instead of all-reduced, the optimizer state
    #: and its step on the rank's ``1/dp`` shard, the parameters all-gathered after the step in
    #: ``param_gather_bytes`` a value, the gradient norm (and fp16's found_inf) reduced over the
    #: world (``world_allreduces`` of ``optimizer_allreduces``)
    dist_optimizer: bool = False
    param_gather_bytes: int = 0
    world_allreduces: int = 0
    #: bytes a parameter (of the rank's shard with ``dist_optimizer``) of the fp32 gradient copy
    #: Megatron-LM's optimizer step makes from 16-bit gradients (``Framework.grad_copy``), held
    #: after the backward passes until the next step's zero_grad; 0: none
    grad_copy_bytes: float = 0.0

    @property
    def optimizer_sharding(self) -> str | None:
        """What the output says of the optimizer's sharding (None: none, nothing said)."""
        if not self.dist_optimizer:
            return None
        return ("distributed (Megatron-LM --use-distributed-optimizer): optimizer state 1/dp a "
                "rank, gradients reduce-scattered, parameters all-gathered after the step")

    @property
    def gradient_partitioned(self) -> bool:
        """Whether a hop's gradient travels as ``1/t`` parts (else whole from every TP rank)."""
        return self.partitioned if self.grad_partitioned is None else self.grad_partitioned

    @property
    def bucket_bytes(self) -> float:
        """Bytes of a gradient all-reduce bucket (``inf``: one bucket)."""
        return self.bucket_elements * float(self.dp_bytes)

    @property
    def sync(self) -> str:
        """The :attr:`sim.training.TrainingConfig.sync` of this behaviour: ``allreduce`` after
        the last backward pass (its buckets are the config's ``bucket_size``), or overlapped
        with the backward pass with the framework's bucket rule and bucket (none at DDP's
        default, which the adapter knows: 25 MiB, the first 1 MiB)."""
        if self.allreduce != "overlap-backward":
            return "allreduce"
        text = f"allreduce:overlap=backward,buckets={self.bucket_rule}"
        if not self.first_bucket and math.isfinite(self.bucket_bytes):
            text += f",bucket_size={self.bucket_bytes:.17g}"
        return text


def resolve(spec: FrameworkSpec | None, profile_bytes: int, dp: int = 1,
            sequence: int | None = None) -> FrameworkBehaviour:
    """The behaviour of ``spec`` (None: the default framework) for a plan of ``dp`` replicas.

    ``profile_bytes`` is the model profile's bytes per value, the precision
    when the spec gives none (4: fp32, 2: fp16). ``sequence`` is the model
    profile's sequence length where its ``shape`` gives one: it sizes the
    attention mask of a framework whose hops carry one (``hop_mask``), unless the
    spec's ``seq_length`` option gives it (both: they must agree). With neither,
    :attr:`FrameworkBehaviour.mask_bytes` is None and a plan with a pipeline hop
    is refused (:func:`sim.profiles.build.mask_message_bytes`).
    """
    spec = spec if spec is not None else FrameworkSpec()
    fw = spec.framework
    if spec.precision is not None:
        prec = spec.precision
    else:
        check(profile_bytes in (2, 4), "precision", "given (fp32, fp16 or bf16) when the model "
              "profile's bytes_per_value is not 4 or 2", profile_bytes)
        prec = "fp32" if profile_bytes == 4 else "fp16"
    check(prec in fw.precisions, "precision", f"one of {', '.join(fw.precisions)} with "
          f"{fw.key} {fw.versions[0]}", prec)
    src = {k: c.source for k, c in fw.facts().items()}
    dp_bytes = fw.dp_bytes.value[prec]
    tied_bytes = fw.tied_bytes.value[prec]
    allreduce = fw.allreduce.value
    bucket = fw.bucket_elements.value
    partitioned = fw.partitioned.value
    grad_partitioned = fw.grad_partitioned.value
    cdt = spec.option("communication_data_type")
    if cdt is not None:
        dp_bytes = _COMM_BYTES[cdt]
        src["dp_bytes"] = fw.options["communication_data_type"][1]
    tp_degrees = None if fw.tp_degrees is None else tuple(fw.tp_degrees.value)
    pipe_key, grad_key = spec.option("pipe_partitioned"), spec.option("grad_partitioned")
    if pipe_key is False:
        partitioned = grad_partitioned = False
        src["partitioned"] = src["grad_partitioned"] = fw.options["pipe_partitioned"][1]
    if grad_key is False:
        grad_partitioned = False
        src["grad_partitioned"] = fw.options["grad_partitioned"][1]
    if pipe_key is False and grad_key is not False or grad_key is False and pipe_key is not False:
        # DeepSpeed's keys apart at TP > 1: the gradient partitioned alone does not train, the
        # activation alone runs in a step order not modelled for this release (the source)
        tp_degrees = (1,)
        src["tp_degrees"] = (f"pipe_partitioned={str(pipe_key is not False).lower()} with "
                             f"grad_partitioned={str(grad_key is not False).lower()} (each "
                             "true unless given); give both false, or neither: "
                             + fw.options["grad_partitioned"][1])
    if spec.option("fp32_allreduce"):
        dp_bytes = 4
        src["dp_bytes"] = fw.options["fp32_allreduce"][1]
    if spec.option("accumulate_allreduce_grads_in_fp32"):
        dp_bytes = tied_bytes = 4
        src["dp_bytes"] = src["tied_bytes"] = fw.options["accumulate_allreduce_grads_in_fp32"][1]
    if spec.option("overlap_grad_reduce"):
        allreduce = "overlap-backward"
        bucket = float(max(40_000_000, 1_000_000 * dp))
        src["allreduce"] = src["bucket_elements"] = fw.options["overlap_grad_reduce"][1]
    first = False
    if fw.key == "ddp":
        mb = spec.option("bucket_cap_mb", 25)
        bucket = mb * 1024 * 1024 / dp_bytes
        first = spec.option("bucket_cap_mb") is None
        if not first:
            src["bucket_elements"] = fw.options["bucket_cap_mb"][1]
    bf16_fact = fw.bf16_optimizer if prec == "bf16" else None
    bf16 = bf16_fact.value if bf16_fact is not None else None
    if bf16_fact is not None:  # BF16_Optimizer: the gradients one flat buffer, one collective
        bucket = math.inf
        src["bucket_elements"] = (
            f"{_DS}: with BF16_Optimizer the pipeline engine "
            "reduces the optimizer's fp32 flat gradient buffer, one tensor ("
            "runtime/pipe/engine.py:303-304 _bf16_reduce_grads, bf16_optimizer.py:371-374 "
            "get_grads_for_reduction, 162 the buffer), and a tensor is never split: "
            "allreduce_no_retain (runtime/engine.py:2523-2534) all-reduces it whole, whatever "
            "elements_per_buffer (MEMORY_OPT_ALLREDUCE_SIZE); read alike at v0.9.0, v0.12.3, v0.14.0 "
            "and v0.16.4")
    gb = fw.gather_bytes.value
    act = fw.activation_bytes.value[prec]
    if fw.tp_degrees is not None and "tp_degrees" not in src:
        src["tp_degrees"] = fw.tp_degrees.source
    recv_gather = bool(partitioned and fw.recv_gather is not None and fw.recv_gather.value)
    if recv_gather:
        src["recv_gather"] = fw.recv_gather.source  # type: ignore[union-attr]
    attention = None
    if fw.attention is not None:
        backend = spec.option("attention_backend", "auto")
        if backend == "local":  # Megatron-LM asserts it runs only with its --spec local
            check(False, "attention_backend", "auto, flash, fused or unfused (Megatron-LM "
                  "asserts local runs only with --spec local, a layer spec of its own that "
                  "dtsim does not model: training/arguments.py, its attention_backend check)",
                  backend)
        attention = (spec.option("transformer_impl", fw.attention.value), backend,
                     spec.option("recompute_granularity") == "selective")
        for k in ("transformer_impl", "attention_backend", "recompute_granularity"):
            if spec.option(k) is not None:
                src["attention"] += f"; {k}={spec.option(k)}: {fw.options[k][1]}"
    seq, mask = spec.option("seq_length"), 0.0
    if seq is not None:
        check_int("seq_length", seq, low=1)
        check(sequence is None or seq == sequence, "seq_length", "the model shape's sequence "
              f"({sequence})", seq)
        src["hop_mask"] = f"{src['hop_mask']}; sequence: {fw.options['seq_length'][1]}"
    seq = seq if seq is not None else sequence
    if fw.hop_mask.value:
        mask = float(fw.hop_mask.value) * seq * seq if seq is not None else None
    dist = bool(spec.option("use_distributed_optimizer"))
    world = 0
    if dist:
        src["optimizer_sharding"] = fw.options["use_distributed_optimizer"][1]
        # the gradient norm, and fp16's found_inf, over the world (grad_stats_parallel_group)
        world = 1 + (prec == "fp16") if fw.optimizer_allreduces is not None else 0
    # the fp32 copy of 16-bit gradients (fp16 without fp32 accumulation): 4 bytes a parameter
    copy = 0.0
    if fw.grad_copy is not None and prec != "fp32" and dp_bytes == 2:
        copy = float(fw.grad_copy.value)
        src["grad_copy"] = fw.grad_copy.source
    return FrameworkBehaviour(
        framework=fw, precision=prec, p2p=fw.p2p.value, partitioned=partitioned,
        grad_partitioned=grad_partitioned and partitioned,
        gathers=tuple(fw.gathers.value) if partitioned else (), gather_bytes=gb if gb else act,
        allreduce=allreduce, barrier=fw.barrier.value, tied_first=fw.tied_first.value,
        optimizer_barrier=fw.optimizer_barrier.value[prec],
        optimizer_allreduces=(fw.optimizer_allreduces.value[prec]
                              if fw.optimizer_allreduces is not None else 0),
        bucket_elements=float(bucket), dp_bytes=dp_bytes, tied_bytes=tied_bytes,
        activation_bytes=act, sources=src, bucket_rule=fw.bucket_rule.value, first_bucket=first,
        step_join=fw.step_join.value, pipe_groups=fw.pipe_groups.value,
        pipe_buffers=fw.pipe_buffers.value, mask_bytes=mask,
        recv_clones=fw.recv_inputs is not None and fw.recv_inputs.value == "clone",
        bf16_allgather=bf16,
        partition_meta=None if fw.partition_meta is None else fw.partition_meta.value,
        sequence=seq if fw.hop_mask.value else None, recv_gather=recv_gather,
        tp_degrees=tp_degrees,
        # the buffer's dtype where it is fp32 (bf16, accumulate_allreduce_grads_in_fp32);
        # otherwise it is the parameters' dtype, the model's values
        grad_bytes=dp_bytes if fw.grad_buffer is not None and fw.grad_buffer.value
        and dp_bytes > profile_bytes else None,
        grads_in_buffer=fw.grad_buffer is not None and bool(fw.grad_buffer.value),
        attention=attention,
        dist_optimizer=dist, param_gather_bytes=PRECISIONS[prec] if dist else 0,
        world_allreduces=world,
        grad_copy_bytes=copy)


#: What each attention path keeps, as the output names it (:func:`attention_path`).
_KEEPS = {"stored": "keeps the s x s softmax output, its dropout mask and the dropped "
                    "probabilities: s h (10 + 24/t + 5 a s / (h t)) bytes a sample (Korthikanti "
                    "et al. 2022, eq. 2)",
          "flash": "keeps no s x s matrix, the softmax statistics instead: s h (10 + 24/t) + "
                   "4 a s / t bytes a sample (Dao et al. 2022)",
          "selective": "keeps nothing of the core attention, whose forward the backward pass "
                       "reruns: s h (10 + 24/t) bytes a sample (Korthikanti et al. 2022, section "
                       "4.3)"}


def attention_path(fb: FrameworkBehaviour, gpu: str, compute_capability: float | None
                   ) -> tuple[str, str]:
    """``(path, why)``: how a transformer layer's attention keeps what its backward pass needs
    on a GPU of type ``gpu`` (its catalogue ``compute_capability``, None: not given) under
    ``fb``, one of :data:`sim.profiles.values.ATTENTION_PATHS`, and the sentence the output
    gives for it.

    Megatron-LM (``fb.attention``): ``selective`` with selective recomputation; else
    ``flash`` when Transformer Engine's DotProductAttention may run flash or fused attention
    (transformer_impl transformer_engine, attention_backend auto, flash or fused, fp16 or
    bf16, compute capability :data:`TE_FLASH_MIN_CC` or later); else ``stored`` (the local or
    TE's unfused attention). An explicit flash or fused backend where TE has neither (fp32,
    or below 8.0) is refused in one line, as TE fails there; with no compute capability in the
    catalogue the path is ``stored`` and the sentence says why. Every other framework runs its
    model's own attention: ``stored``."""
    fw = fb.framework
    if fb.attention is None:
        return "stored", (f"{fw.key} {fw.versions[0]} runs the model's own attention, which "
                          + _KEEPS["stored"])
    impl, backend, selective = fb.attention
    if selective:
        return "selective", "recompute_granularity=selective: the layer " + _KEEPS["selective"]
    if impl == "local":
        return "stored", "transformer_impl=local: Megatron Core's local attention " + \
            _KEEPS["stored"]
    if backend == "unfused":
        return "stored", "attention_backend=unfused: Transformer Engine's unfused attention " + \
            _KEEPS["stored"]
    explicit = backend in ("flash", "fused")
    if fb.precision == "fp32":
        check(not explicit, "attention_backend", "auto or unfused in fp32 (Transformer Engine "
              "runs flash and fused attention in fp16 and bf16 only, so it would fail)", backend)
        return "stored", "fp32: Transformer Engine runs its unfused attention, which " + \
            _KEEPS["stored"]
    if compute_capability is None:
        return "stored", (f"{gpu} has no compute_capability in the GPU catalogue: counted as "
                          "Transformer Engine's unfused attention, which " + _KEEPS["stored"]
                          + f" (give it: flash or fused attention runs on {TE_FLASH_MIN_CC:.1f} "
                          "or later)")
    if compute_capability < TE_FLASH_MIN_CC:
        check(not explicit, "attention_backend", f"auto or unfused on {gpu} (compute capability "
              f"{compute_capability:.1f}: Transformer Engine's flash and fused attention need "
              f"{TE_FLASH_MIN_CC:.1f} or later, so it would fail)", backend)
        return "stored", (f"{gpu} (compute capability {compute_capability:.1f} < "
                          f"{TE_FLASH_MIN_CC:.1f}): Transformer Engine runs its unfused "
                          "attention, which " + _KEEPS["stored"])
    how = "flash or fused" if backend == "auto" else backend
    named = f"attention_backend={backend}" if "attention_backend" in fw.options else \
        "Transformer Engine's own choice (no attention_backend at this release)"
    return "flash", (f"{named}: Transformer Engine's {how} attention in "
                     f"{fb.precision} on {gpu} (compute capability {compute_capability:.1f}) "
                     + _KEEPS["flash"])


def check_mask_sized(fb: FrameworkBehaviour) -> float:
    """The bytes of the mask each TP rank sends with an activation (0: none); one line naming
    ``seq_length`` when the framework sends one but no sequence length sized it."""
    fw = fb.framework
    check(fb.mask_bytes is not None, "seq_length", f"given for {fw.key} {fw.versions[0]}, "
          "whose every pipeline hop carries a seq x seq attention mask (framework option "
          "seq_length=S, or a model profile with a shape)", None)
    return float(fb.mask_bytes)  # type: ignore[arg-type]
