"""Step times of a plan's formations, for the step-level strategies (``dtsim train --plan P
--strategy S``).

A step-level strategy (checkpoint-restart, redundancy, reconfiguration;
:mod:`sim.training.strategies`) re-forms the job from the workers that are
ready: ``P`` pipelines of ``n`` nodes each. With a plan, every worker is a
node of the plan (one replica: a TP group), and a formation's step is the
plan's own iteration re-planned for it, timed by the framework engine (the
plan's profiles, framework and release, its network), never a hand value:

* ``P`` pipelines of the plan's depth ``L``: the plan with ``P`` replicas
  a stage, the same global batch (the job engine's step is the global batch
  in every formation; Oobleck keeps the global number of micro-batches and
  splits it over the pipelines it instantiates: SymbioticLab/Oobleck
  ``oobleck/engine/pipeline_instantiator.py``, ``PipelineInstantiator(
  pipeline_templates, global_num_microbatches)``): one failure-free step of
  :func:`~sim.profiles.build.build_plan`'s config on the framework engine;
  with every pipeline up this is ``dtsim train --plan P``'s iteration;
* ``P`` pipelines of ``n < L`` nodes (reconfiguration's templates below
  ``L``): the plan's ``L`` stages merged into ``n`` contiguous groups of least
  largest work (:func:`sim.training.strategies.merge_stages`, dtsim's rule
  for a template of ``n`` nodes, the stage work a micro-batch's forward and
  backward on the plan's GPU), each group's layers one stage, ``P`` replicas;
  a re-partition that does not fit in GPU memory cannot run (no time: the
  strategy does not form it);
* pipelines of different depths (reconfiguration with ``min_nodes < L``, when
  the nodes do not split evenly): :func:`derived_step_time`'s rule with the
  plan's pieces: the step's micro-batches split over the pipelines by their
  bottleneck rates, each pipeline its share as a one-replica plan of its depth
  (framework engine, no optimizer), the step ending with the slowest, the
  plan's ring all-reduce of the largest node's gradients among the pipelines
  (the all-reduce time of that node's stage in the plan of that depth with
  ``P`` replicas) and the slowest node's optimizer step.

Where the global batch does not split evenly over ``P`` pipelines, some take
one micro-batch more than others (``ceil(m / P)``): the step is timed with
every pipeline at that larger share, which is exact while the pipelines meet
only in the all-reduce (each replica a node of its own, its own links: the
plans this runs; the framework engine's blocking programs need equal shares).
The samples of a step stay the global batch.

The plan's nodes must all be of one kind (GPU type, TP degree, node size,
zone, no named host, or each named host holding one replica: its node of its own, as a
launch line of ``--nproc-per-node`` equal to TP names them): a strategy puts any ready
node at any stage.

A formation's checkpoint (:meth:`PlanStepTimes.checkpoint_bytes`, for a strategy's
``checkpoint_bandwidth``): the bytes each node writes and reads, from the plan's memory
model (:func:`~sim.profiles.build.plan_memory`: a GPU's ``weights`` and ``optimizer``
terms, times the node's ``tp`` GPUs), as the plan's framework writes a checkpoint:

* DeepSpeed's pipeline engine (``deepspeed``, ``sailor-deepspeed``; DeepSpeed v0.16.5,
  commit 38327e0): the layer files of a stage are written by its data-parallel rank 0
  alone, each TP rank its own (``runtime/pipe/module.py:596-607``, ``save_state_dict``:
  ``if dp_rank != 0: return`` unless ``checkpoint.parallel_write.pipeline_stage``,
  default False, ``runtime/constants.py:416``; ``module.py:571-579``, one file per layer
  and model-parallel rank); the optimizer state, without ZeRO and without bf16, goes
  into ``mp_rank_XX_model_states.pt`` (``runtime/engine.py:3457`` and ``3471``,
  ``optimizer.state_dict()`` when not ``zero_optimization() or bfloat16_enabled()``),
  written only where ``save_non_zero_checkpoint``, data-parallel rank 0
  (``engine.py:1061-1069``, ``3492-3494``): the node of replica 0 of each stage writes ``tp x (weights +
  optimizer)``, the others nothing. With bf16 (BF16_Optimizer) every rank also writes
  its own ``1/dp`` partition of the fp32 master weights and optimizer state
  (``engine.py:1071-1076``, ``save_zero_checkpoint``; ``3277-3279``, ``3637-3640``):
  replica 0 writes ``tp x (weights + optimizer)``, the others ``tp x optimizer``
  (the memory model's partition). DeepSpeed 0.3.13 writes alike (tag v0.3.13:
  ``runtime/pipe/module.py:536-538``, ``runtime/engine.py:453-455``, ``1648-1653``,
  ``1600``). A restart reads on every node what its ranks hold:
  its stage's layer files (``runtime/pipe/module.py:623-637``, ``load_state_dir`` on
  every rank, ``runtime/pipe/engine.py:1389``) and, without bf16, its model-parallel
  rank's whole ``mp_rank`` file with the optimizer state (``engine.py:2978-2979``,
  ``3020-3028``), with bf16 its own partition alone (``engine.py:3175``, unless
  ``zero_elastic_checkpoint``): ``tp x (weights + optimizer)`` on every node.
* PyTorch DDP (``ddp``, one stage): rank 0 alone writes (pytorch/tutorials 0168169
  ``intermediate_source/ddp_tutorial.rst``, ``demo_checkpoint``: ``if rank == 0:
  torch.save(ddp_model.state_dict(), ...)``, every rank then loads it); a checkpoint to
  resume from holds the optimizer's ``state_dict`` too, whole on every rank under DDP:
  as DeepSpeed without bf16.
* Megatron-LM (``megatron``; NVIDIA/Megatron-LM commit d98e8a64dd): the default
  ``torch_dist`` format (``megatron/training/config/training_config.py:486``) saved
  fully parallel (``fully_parallel_save`` default True, ``:511``) over the data-parallel
  group (``:559``; ``megatron/training/checkpointing.py:862-875``), which spreads the
  replicated shards over its ranks as evenly as it can
  (``megatron/core/dist_checkpointing/strategies/fully_parallel.py:46-58``): each node
  writes ``tp x (weights + optimizer) / dp`` (the even split; the greedy split by
  tensor is at least that), and reads ``tp x (weights + optimizer)``. So from Megatron
  Core 0.9.0 (tag ``core_v0.9.0``: ``megatron/training/arguments.py:1425``, ``--ckpt-format``
  default ``torch_dist``; ``1441-1442``, fully parallel save unless
  ``--no-ckpt-fully-parallel-save``). Megatron Core 0.8.0 saves the legacy ``torch`` format
  unless ``--use-dist-ckpt`` (tag ``core_v0.8.0``: ``arguments.py:1317-1318``, off by
  default; ``checkpointing.py:301-304``, ``329-331``, ``374-377``: data-parallel rank 0
  alone builds its model and optimizer state and saves it with ``torch.save``, the optimizer whole
  without ``--use-distributed-optimizer``, off by default, ``arguments.py:1453``): as
  DeepSpeed without bf16, each node reading ``tp x (weights + optimizer)``.

The memory model's ``weights`` and ``optimizer`` terms are the model profile's values (its
``bytes_per_value`` a weight, its ``optimizer_bytes_per_param``): where the plan trains in 16
bits on a profile measured in fp32 (or in fp32 on a 16-bit profile), DeepSpeed and
Megatron-LM write otherwise: a 16-bit weight in the layer files and the model state, and in
the optimizer's state an fp32 master copy (DeepSpeed's FP16_Optimizer, v0.16.4
``runtime/fp16/fused_optimizer.py:447-448``, ``fp32_groups_flat`` beside the base
optimizer's state; Megatron Core's Float16OptimizerWithFloat16Params, tag ``core_v0.9.0``
``megatron/core/optimizer/optimizer.py:609-614``, ``617-644`` sharded:
``fp32_from_fp16_params``) and the moments (the profile's optimizer bytes less the 4 of
a master it holds when 16-bit, :func:`~sim.profiles.build.bf16_state_bytes`): ``2 + 4 +
moments`` bytes a parameter in 16 bits, ``4 + moments`` in fp32 (OPT-350's fp32 profile in
fp16: 14, not the memory model's 4 + 8). DDP keeps the memory model's terms.

Pipelines of different depths (reconfiguration's mixed templates): the largest node's
bytes over the depths' plans of ``P`` pipelines.

With Megatron-LM's distributed optimizer (``use_distributed_optimizer``) a rank holds its
``1/dp`` shard of the optimizer state: the checkpoint still holds all of it, spread over the
group as above (each node writes ``tp x (weights + optimizer) / dp`` of the whole state), and
a rank reads back its weights and its own shard (d98e8a64dd
``megatron/core/optimizer/distrib_optimizer.py:1462``, ``sharded_state_dict``: each rank's
shard of the fp32 main weights and moments, a sharded tensor loaded by its own offsets).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError
from .values import Plan, Profiles, StageSpec

__all__ = ["PlanStepTimes", "plan_node_kind", "own_nodes", "checkpoint_rule", "node_checkpoint_bytes"]

#: How each framework key writes a checkpoint (module notes): "rank0" (data-parallel rank 0
#: of each stage writes its state, every rank reads its own) or "spread" (the data-parallel
#: group shares the writes).
CHECKPOINT_RULES = {"deepspeed": "rank0", "sailor-deepspeed": "rank0", "ddp": "rank0",
                    "megatron": "spread"}
#: A release that writes otherwise than its key's rule, by (key, version): Megatron Core
#: 0.8.0's default legacy format (module notes).
CHECKPOINT_RULE_RELEASES = {("megatron", "0.8.0"): "rank0"}


def checkpoint_rule(build: Any) -> str:
    """The checkpoint writers of a built plan's framework: ``"rank0"``, ``"rank0-bf16"``
    (DeepSpeed's BF16_Optimizer: every rank writes its optimizer partition too) or
    ``"spread"`` (module notes)."""
    fb = build.behaviour
    key = fb.framework.key
    rule = CHECKPOINT_RULE_RELEASES.get((key, fb.framework.versions[0]), CHECKPOINT_RULES[key])
    return rule + "-bf16" if rule == "rank0" and fb.bf16_allgather is not None else rule


#: The framework keys whose 16-bit training keeps the weights in 16 bits and an fp32 master
#: copy in the optimizer's state, both in the checkpoint (module notes).
MASTER_COPY_KEYS = ("deepspeed", "sailor-deepspeed", "megatron")


def _param_bytes(build: Any, model: Any) -> float | None:
    """Checkpoint bytes a parameter takes where the plan's precision is not its model
    profile's (module notes: a 16-bit weight, an fp32 master copy and the optimizer's
    moments); None where the memory model's weights and optimizer terms are those bytes."""
    from .build import bf16_state_bytes

    fb = build.behaviour
    half = fb.precision in ("fp16", "bf16")
    if fb.framework.key not in MASTER_COPY_KEYS or half == (model.bytes_per_value == 2):
        return None
    moments = bf16_state_bytes(model.bytes_per_value, model.optimizer_bytes_per_param)
    return (2.0 + 4.0 if half else 4.0) + moments


def node_checkpoint_bytes(build: Any, model: Any) -> tuple[tuple[float, float], ...]:
    """Per node of a built plan of ``model`` (its :class:`~sim.profiles.values.ModelProfile`;
    stage-major, as ``build.memory``): the bytes it writes for a checkpoint and the bytes it
    reads at a restart (module notes)."""
    if build.behaviour is not None:  # the model as the build sized it: a shape alone is sized
        # in the run's precision (ModelProfile.trained_at; the profile's own bytes a value
        # halved an fp16 shape's parameters: 7 bytes a parameter, not 14)
        model = model.trained_at(build.behaviour.activation_bytes)
    rule = checkpoint_rule(build)
    per = None if rule == "rank0-bf16" else _param_bytes(build, model)
    dp = {}
    for g in build.memory:
        dp[g.stage] = dp.get(g.stage, 0) + 1
    fb = build.behaviour
    out = []
    for g in build.memory:
        # Megatron-LM's distributed optimizer: a rank holds 1/dp of the optimizer state, the
        # checkpoint all of it (spread over the group), and a rank reads back its own shard
        shards = dp[g.stage] if fb.dist_optimizer else 1
        if per is None:
            state = g.tp * (g.weights + g.optimizer * shards)
            read = state if shards == 1 else g.tp * (g.weights + g.optimizer)
        else:  # the memory model's weights are the profile's values: its parameters
            state = g.tp * (g.weights / model.bytes_per_value * per)
            wb = 2.0 if fb.precision in ("fp16", "bf16") else 4.0  # the weight's own bytes
            read = state if shards == 1 else \
                g.tp * (g.weights / model.bytes_per_value * (wb + (per - wb) / shards))
        if rule == "spread":
            written = state / dp[g.stage]
        elif g.replica == 0:
            written = state
        else:
            written = g.tp * g.optimizer if rule == "rank0-bf16" else 0.0
        out.append((written, read))
    return tuple(out)


def own_nodes(plan: Plan) -> Plan:
    """``plan`` with its hosts left out when each named host holds one replica: such a host is
    the replica's node of its own (a launch line of ``--nproc-per-node`` equal to TP names
    hosts ``n0``, ``n1``, ..., one replica each); else ``plan`` as it is."""
    hosts = [x.host for st in plan.stages for x in st.replicas if x.host is not None]
    if not hosts or len(set(hosts)) < len(hosts):
        return plan
    return dataclasses.replace(plan, stages=tuple(
        dataclasses.replace(st, replicas=tuple(dataclasses.replace(x, host=None)
                                               for x in st.replicas))
        for st in plan.stages))


def plan_node_kind(plan: Plan) -> Any:
    """The one node kind of ``plan`` (a ReplicaSpec without a host), None when its replicas
    differ (GPU type, TP degree, node size, zone). A host holding one replica is its node of
    its own (:func:`own_nodes`); a host holding several is one node of the job engine's
    failures (``TrainingConfig.trace_hosts``), each replica a worker of its own."""
    kinds = {dataclasses.replace(x, host=None) for st in plan.stages for x in st.replicas}
    return next(iter(kinds)) if len(kinds) == 1 else None


@dataclass(frozen=True, eq=False)
class PlanStepTimes:
    """A plan's step time per formation (module notes); sits on ``TrainingConfig.step_times``.

    Parameters
    ----------
    plan : Plan
        The plan as given (its replicas all of one node kind).
    profiles : Profiles
        The profiles it was built with (a ``--fleet``'s links in them).
    model : str
    options : tuple of (str, value)
        The other keyword arguments of :func:`~sim.profiles.build.build_plan` the run
        used (schedule, p2p, framework, network, a given sync).

    Notes
    -----
    :meth:`formation_time` builds and runs each formation shape once (a cache per
    instance; equality is identity, so a config holding it hashes as itself).
    """

    per: ClassVar[str] = "formation"
    plan: Plan
    profiles: Profiles
    model: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", own_nodes(self.plan))
        if plan_node_kind(self.plan) is None:
            raise ConfigError("plan", "a plan whose replicas are all one node kind (GPU type, "
                              "TP degree, node size, zone) with a step-level strategy (it puts "
                              "any ready node at any stage)",
                              ", ".join(sorted({f"{x.gpu} TP {x.tp}" for st in self.plan.stages
                                                for x in st.replicas})))
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_builds", {})

    def __getstate__(self) -> dict[str, Any]:  # the caches stay behind (rebuilt where used)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_builds", {})

    # -- the plan's pieces -------------------------------------------------------------
    @property
    def stages(self) -> int:
        return len(self.plan.stages)

    @property
    def microbatches(self) -> int:
        """Micro-batches of a step (the global batch over the micro-batch size)."""
        return self.plan.global_batch_size // self.plan.microbatch_size

    def groups(self, n: int) -> tuple[int, ...]:
        """The plan's stages per node of a pipeline of ``n`` nodes."""
        from ..training.strategies import merge_stages

        L = self.stages
        return (1,) * L if n >= L else merge_stages(self.stage_work, n)

    @property
    def stage_work(self) -> tuple[float, ...]:
        """A micro-batch's forward and backward time at each of the plan's stages (its node
        kind), from the full plan's build: what :func:`merge_stages` balances."""
        c = self._build(self.stages, self.plan.dp[0], self.plan.microbatches).config
        return tuple(f + b for f, b in zip(c.forward_time, c.backward_time, strict=True))

    def _plan(self, n: int, replicas: int, per_pipeline: int) -> Plan:
        """The plan re-partitioned over ``n`` nodes a pipeline, ``replicas`` pipelines of
        ``per_pipeline`` micro-batches each."""
        p = self.plan
        kind = plan_node_kind(p)
        stages, j = [], 0
        for size in self.groups(n):
            layers = tuple(x for st in p.stages[j:j + size] for x in st.layers)
            stages.append(StageSpec(layers, (kind,) * replicas))
            j += size
        if n >= self.stages and replicas <= p.dp[0]:  # the plan edited to fewer replicas
            stages = [StageSpec(st.layers, st.replicas[:replicas]) for st in p.stages]
        gbs = p.microbatch_size * replicas * per_pipeline
        return dataclasses.replace(p, stages=tuple(stages), global_batch_size=gbs)

    def _build(self, n: int, replicas: int, per_pipeline: int) -> Any:
        """The PlanBuild of :meth:`_plan` (None when it does not fit in GPU memory)."""
        key = (n, replicas, per_pipeline)
        if key not in self._builds:  # type: ignore[attr-defined]
            from .build import build_plan

            try:
                b = build_plan(self._plan(n, replicas, per_pipeline), self.profiles,
                               model=self.model, **dict(self.options))
            except ConfigError as exc:
                if exc.name != "plan" or "fits in GPU memory" not in exc.rule:
                    raise
                b = None
            self._builds[key] = b  # type: ignore[attr-defined]
        return self._builds[key]  # type: ignore[attr-defined]

    # -- a formation's checkpoint ---------------------------------------------------------
    def checkpoint_bytes(self, sizes: tuple[int, ...]) -> tuple[float, float]:
        """(written, read): the most bytes any node of pipelines of ``sizes`` nodes writes for
        a checkpoint and reads at a restart (module notes), from the plan of that formation
        (``None`` shapes, out of GPU memory, never form); each shape once (a checkpoint, and
        each step under checkpoint-restart's interval=overhead, asks)."""
        key = ("checkpoint", tuple(sizes))  # beside formation_time's keys, tuples of ints
        cache = self._cache  # type: ignore[attr-defined]
        if key not in cache:
            cache[key] = self._checkpoint_bytes(tuple(sizes))
        return cache[key]

    def _checkpoint_bytes(self, sizes: tuple[int, ...]) -> tuple[float, float]:
        P, M = len(sizes), self.microbatches
        w = r = 0.0
        for n in sorted(set(sizes)):
            b = self._build(n, P, math.ceil(M / P))
            if b is None:  # pragma: no cover - such a formation has no step time: never formed
                continue
            for written, read in node_checkpoint_bytes(b, self._model_profile()):
                w, r = max(w, written), max(r, read)
        return w, r

    def _model_profile(self) -> Any:
        """The profile of the plan's model."""
        return self.profiles.model(self.model)

    def checkpoint_rule(self) -> str:
        """The plan's framework's checkpoint writers (:func:`checkpoint_rule`)."""
        return checkpoint_rule(self._build(self.stages, self.plan.dp[0], self.plan.microbatches))

    # -- a formation's step ---------------------------------------------------------------
    def formation_time(self, sizes: tuple[int, ...]) -> float | None:
        """One failure-free step of pipelines of ``sizes`` nodes (None: it cannot run, a
        re-partition out of GPU memory); each shape is built and run once."""
        key = tuple(sizes)
        cache = self._cache  # type: ignore[attr-defined]
        if key not in cache:
            cache[key] = self._time(key) if key else None
        return cache[key]

    def _time(self, sizes: tuple[int, ...]) -> float | None:
        from ..training.strategies.steptime import _des_step, _free

        P, M = len(sizes), self.microbatches
        if len(set(sizes)) == 1:
            b = self._build(sizes[0], P, math.ceil(M / P))
            if b is None:
                return None
            return _des_step(_free(b.config))
        return self._mixed(sizes)

    def _mixed(self, sizes: tuple[int, ...]) -> float | None:
        """Pipelines of different depths (module notes)."""
        from ..training.strategies.steptime import _des_step, _free, split_microbatches

        work, P, M = self.stage_work, len(sizes), self.microbatches
        rates = []
        for n in sizes:
            worst, j = 0.0, 0
            for g in self.groups(n):
                worst = max(worst, math.fsum(work[j:j + g]))
                j += g
            rates.append(1.0 / worst)
        shares = split_microbatches(tuple(rates), M)
        phase, sync, opt = 0.0, 0.0, 0.0
        for n in sorted(set(sizes)):
            full = self._build(n, P, math.ceil(M / P))  # the depth's all-reduce among P
            if full is None:
                return None
            sync = max(sync, max(full.allreduce_times))
            opt = max(opt, max(full.optimizer_times))
        for n, b in zip(sizes, shares, strict=True):
            if not b:
                continue
            one = self._build(n, 1, b)
            if one is None:
                return None
            c = _free(one.config)
            phase = max(phase, _des_step(dataclasses.replace(
                c, optimizer_times=(0.0,) * c.stages)))
        return phase + sync + opt
