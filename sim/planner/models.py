"""The planner's view of dtsim's models of a real run, and the DES run of a plan.

:class:`ProfilePlanModel` answers the questions the search asks
(:class:`sim.planner.search.PlanModel`) with the models ``dtsim train --plan``
uses (:mod:`sim.profiles.build`): the iteration time is the exact max-plus
evaluation of the plan's fixed per-device programs plus the all-reduce and
optimizer tail, or with a framework that overlaps the all-reduce with the
backward pass, the time its buckets add after the pipeline
(:func:`sim.profiles.build.explain_rows`), the memory is
:func:`sim.profiles.build.plan_memory`. The planner writes neither again:
:meth:`ProfilePlanModel.memory_terms` only restates that memory model as sums
over a stage's layers (so the cut can respect it), and a test checks the
restatement against it. :func:`simulate_plan` runs a plan through the
training DES, the engine of ``dtsim train --plan``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..engines import select
from ..errors import ConfigError, SimulationError, check
from ..network.curves import peak_bandwidth_above
from ..profiles import Fleet, ModelProfile, Plan, Profiles, ReplicaSpec, StageSpec
from ..profiles.build import (
    DIST_PAD_VALUES,
    PlanBuild,
    bf16_state_bytes,
    build_plan,
    check_buckets,
    dist_first_bucket,
    explain_rows,
    in_flight,
    intra_capacity,
    mask_memory,
    mask_message_bytes,
    node_links,
    p2p_flows,
    pair_link,
    pair_time,
    plan_allreduce_time,
    recv_memory,
    tied_bytes,
)
from ..profiles.frameworks import FrameworkSpec, attention_path, check_mask_sized, resolve
from ..results import mean_ci, summarize
from ..runner import replicate

__all__ = ["Prediction", "ProfilePlanModel", "derived_tp_model", "shape_search_model",
           "simulate_plan"]


@dataclass(frozen=True)
class Prediction:
    """The closed form of one plan: iteration time, peak memory, and where the time goes."""

    iteration_time: float
    peak_memory: float
    explain: dict[str, Any]
    build: PlanBuild


class ProfilePlanModel:
    """A :class:`~sim.planner.search.PlanModel` on a model's profile, the catalogue and network.

    Parameters
    ----------
    profiles : Profiles
    model : ModelProfile
    schedule : str
        Pipeline schedule of the plans (``"1f1b"``, as Megatron-LM and DeepSpeed run it).
    p2p : str or None
        Override the framework's point-to-point semantics (``"blocking"``,
        DeepSpeed's paired send and receive, ``"batched"``, Megatron-LM's 1F1B
        with batched pairs, or ``"overlap"``); None: the framework's.
    framework : FrameworkSpec or None
        What runs the plans that name none, as those the search makes (None:
        :data:`~sim.profiles.frameworks.DEFAULT_FRAMEWORK`); the bounds of the
        search assume it.
    fleet : Fleet or None
        The physical nodes: a plan whose replicas name no host is placed on
        them in DeepSpeed's rank order (:meth:`place`) and timed on them
        (replicas of one node share its NICs and talk over its intra-node
        link). None: each replica a node of its own (the pair curves).
    """

    def __init__(self, profiles: Profiles, model: ModelProfile, *, schedule: str = "1f1b",
                 p2p: str | None = None, framework: FrameworkSpec | None = None,
                 fleet: Fleet | None = None) -> None:
        self.profiles, self.model, self.schedule = profiles, model, schedule
        self.fleet = fleet
        #: per (GPU, zone), the fleet's nodes in rank order as runs (GPUs per node, count,
        #: index of the first): not a list of every node (a count of 10^9 took 15 GB)
        self._runs: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
        self._placed: dict[tuple, list] = {}
        #: _placed_stages' replicas per plan shape (stage by stage, each stage's replicas, or
        #: (replica, count) for a stage of one kind: a search's plans of one shape share them,
        #: whatever their cut and micro-batch size)
        self._shapes: dict[tuple, tuple[tuple[ReplicaSpec, ...], ...]] = {}
        self._steps: dict[tuple, float] = {}  # _step_bound's, by placed kinds and size
        self._replicas: dict[tuple, ReplicaSpec] = {}  # place()'s, by kind, TP and node
        for kind, count in (fleet.nodes if fleet is not None else ()):
            runs = self._runs.setdefault((kind.gpu, kind.zone), [])
            start = runs[-1][2] + runs[-1][1] if runs else 0
            if count > 0:
                runs.append((kind.gpus_per_node, count, start))
        self.framework = framework if framework is not None else FrameworkSpec()
        fb = resolve(self.framework, model.bytes_per_value,
                     sequence=model.shape.sequence if model.shape is not None else None)
        check_mask_sized(fb)  # a search times pipeline hops: a mask it cannot size is refused
        if fb.attention is not None and fb.attention[2]:
            # selective recomputation reruns the core attention, which a measured layer time has
            # no part for (sim.profiles.estimates.Estimator): refused once, not plan by plan
            # (each plan refused would read as "no plan fits")
            own = next((x for x in profiles.models if x.name == model.name), model)
            check(not own.times, "recompute_granularity", f"unset with the profile of "
                  f"{model.name}: its times are whole layers', with no part for the core "
                  "attention, whose forward selective recomputation reruns in the backward "
                  "pass (a model given by its shape alone is estimated with it)", "selective")
        self.p2p = p2p if p2p is not None else fb.p2p  # the search's plans' (the bounds)
        self._p2p_override = p2p  # a plan naming its framework keeps that one's unless given
        self._fb = fb if p2p is None else replace(fb, p2p=p2p)
        #: the TP degrees the framework runs (the Sailor artifact's: 1, 2, 4; None: any)
        self.tp_degrees = fb.tp_degrees
        # the largest all-reduce a plan can hold (the whole model's gradients, one stage) fits
        # the framework's buckets: the bounds sum them one by one as build_plan does
        # (a model given by its shape alone has no measured combination: refused by the search)
        # (at most a GPU's memory: a stage whose gradients do not fit one is refused anyway,
        # and a shape of 10^8 hidden units named bucket_size, which nobody gave)
        check_buckets(fb, min(max((sum(s.params for s in model.layer_sizes(tp))
                                   for _, _, tp in model.combinations()), default=0.0)
                              * float(fb.dp_bytes),
                              max((g.memory_bytes for g in profiles.gpus.gpus), default=math.inf)),
                      1)
        # the largest output a stage can receive: any layer but the last (which no stage sends)
        sizes = {tp: model.layer_sizes(tp) for _, _, tp in model.combinations()}
        self._recv = {tp: max((s.activation_bytes for s in row[:-1]), default=0.0)
                      for tp, row in sizes.items()}

    def place(self, plan: Plan) -> Plan:
        """``plan`` with its replicas on the fleet's nodes, in DeepSpeed's rank order.

        DeepSpeed numbers ranks pipeline stage first, then data-parallel
        replica, then TP rank (``PipeModelDataParallelTopology``, axes
        ``['pipe', 'data', 'model']``: deepspeed/runtime/pipe/topology.py), and
        a launcher gives a node consecutive ranks: so each replica, stage by
        stage, takes the first node of its GPU type and zone with ``tp`` GPUs
        free (the node it would get ranks on). Without a fleet, or when the plan
        names hosts already, the plan as it is.
        """
        stages = self._placed_stages(plan)
        return plan if stages is None else replace(plan, stages=stages)

    def _placed_stages(self, plan: Plan) -> tuple[StageSpec, ...] | None:
        """:meth:`place`'s stages (None: the plan as it is)."""
        if self.fleet is None or plan.physical:
            return None
        # the placement reads each replica's GPU type, zone and TP degree in rank order: alike
        # replicas (equal values) place alike, so a stage of one kind is keyed by its count
        shape = tuple((st.replicas[0], len(st.replicas))
                      if st.replicas.count(st.replicas[0]) == len(st.replicas) else st.replicas
                      for st in plan.stages)
        placed = self._shapes.get(shape)
        if placed is None:
            placed = self._shapes[shape] = self._first_fit(plan)
        return tuple(StageSpec(st.layers, reps)
                     for st, reps in zip(plan.stages, placed, strict=True))

    def _first_fit(self, plan: Plan) -> tuple[tuple[ReplicaSpec, ...], ...]:
        """:meth:`_placed_stages`' replicas of each stage, worked out."""
        # first fit in rank order: per run, the free GPUs of the nodes used so far, always a
        # prefix of the run (its nodes are alike: a new one is taken only when none before fits)
        # (each run's free GPUs a node, and the first node with any: the nodes before it are
        # full, so no replica fits there and the first fit starts at it)
        used: dict[tuple[str, str], list[tuple[list[int], list[int]]]] = {}
        made = self._replicas
        stages = []
        for st in plan.stages:
            reps = []
            for r in st.replicas:
                runs = self._runs.get((r.gpu, r.zone), [])
                touched = used.setdefault((r.gpu, r.zone), [([], [0]) for _ in runs])
                n = g = None
                for (gpn, count, start), (free, lo) in zip(runs, touched, strict=True):
                    k = next((i for i in range(lo[0], len(free)) if free[i] >= r.tp), None)
                    if k is None and len(free) < count and gpn >= r.tp:
                        free.append(gpn)
                        k = len(free) - 1
                    if k is not None:
                        free[k] -= r.tp
                        while lo[0] < len(free) and free[lo[0]] == 0:
                            lo[0] += 1
                        n, g = start + k, gpn
                        break
                check(n is not None, "plan", "a plan whose replicas fit the fleet's nodes "
                      "in rank order", f"{r.gpu}@{r.zone} TP {r.tp}")
                key = (r.gpu, r.tp, r.zone, n)
                x = made.get(key)
                if x is None:  # a placed replica is a value: made (and checked) once
                    x = made[key] = ReplicaSpec(r.gpu, r.tp, g, r.zone,  # type: ignore[arg-type]
                                                host=f"{r.gpu}@{r.zone}#{n}")
                reps.append(x)
            stages.append(tuple(reps))
        return tuple(stages)

    def _placements(self, a: ReplicaSpec, b: ReplicaSpec) -> list[tuple[Any, Any]]:
        """The ways a replica of kind ``a`` and one of kind ``b`` can sit: on two nodes of the
        fleet, or on one (same type and zone, a node with GPUs for both); without a fleet, as
        nodes of their own (the pair curves)."""
        if self.fleet is None:
            return [((a, (0, 0)), (b, (1, 0)))]
        hit = self._placed.get((a, b))
        if hit is not None:
            return hit
        ga = max((g for g, _, _ in self._runs.get((a.gpu, a.zone), ())), default=a.tp)
        gb = max((g for g, _, _ in self._runs.get((b.gpu, b.zone), ())), default=b.tp)
        pa = ReplicaSpec(a.gpu, a.tp, ga, a.zone, host="x")
        out = [((pa, (0, 0)), (ReplicaSpec(b.gpu, b.tp, gb, b.zone, host="y"), (1, 0)))]
        if (a.gpu, a.zone) == (b.gpu, b.zone) and ga >= a.tp + b.tp:
            out.append(((pa, (0, 0)), (ReplicaSpec(b.gpu, b.tp, ga, b.zone, host="x"), (1, 0))))
        self._placed[(a, b)] = out
        return out

    def build(self, plan: Plan, *, network: bool = False, **config: Any) -> PlanBuild:
        """The plan's :class:`~sim.profiles.build.PlanBuild` (ConfigError if it does not fit);
        ``network``: its transfers as flows of :mod:`sim.network` (as ``dtsim train --plan``)."""
        change: dict[str, Any] = {}
        if plan.framework is None:  # the search's plans run on the model's framework
            change["framework"] = self.framework
        stages = self._placed_stages(plan)
        if stages is not None:
            change["stages"] = stages
        if change:  # one new plan (checked once) with both
            plan = replace(plan, **change)
        return build_plan(plan, self.profiles, model=self.model.name, schedule=self.schedule,
                          p2p=self._p2p_override, network=network, **config)

    def predict(self, plan: Plan) -> Prediction:
        b = self.build(plan)
        e = explain_rows(b)
        return Prediction(float(e["iteration"]), float(b.peak_memory), e, b)

    def predict_unless(self, plan: Plan, too_slow: Any) -> Prediction | None:
        """:meth:`predict`, or None when ``too_slow(t)`` holds for a lower bound ``t`` on the
        plan's pipeline phase read off its build before its device programs are evaluated
        (:func:`pipeline_busy_bound`: its busiest device's compute and blocking transfers,
        with every transfer timed as the closed form times it, NIC sharing included)."""
        b = self.build(plan)
        if too_slow(pipeline_busy_bound(b)):
            return None
        e = explain_rows(b)
        return Prediction(float(e["iteration"]), float(b.peak_memory), e, b)

    def p2p_bound(self, a: ReplicaSpec, b: ReplicaSpec, microbatch_size: int) -> float:
        """A lower bound on the device time one micro-batch's transfers over a stage boundary
        from a replica of kind ``a`` to one of kind ``b`` cost each of the two devices.

        With DeepSpeed's blocking send and receive (``p2p="blocking"``, the default)
        both devices are busy for the activation ``a -> b`` and the gradient ``b -> a``
        (:func:`~sim.profiles.build.explain_rows` counts them in the stage's time),
        timed as :func:`~sim.profiles.build.build_plan` times them; the bound is
        the least such pair over the layers a stage can end with (any but the
        last). With Megatron-LM's batched pairs (``p2p="batched"``) a device's
        calls over one boundary post at most one transfer each way together,
        so it is busy at least the longer of the two per micro-batch.
        Overlapped transfers occupy no device: 0. A pair of kinds the
        network lacks: 0 (such a plan is refused when it is timed). On physical
        nodes the closed form times a transfer with the flows of every transfer that may
        share its NICs and node pair (:func:`~sim.profiles.build.p2p_shares`);
        each transfer alone, as here, is never longer, so the bound holds.
        """
        from ..training.schedules import p2p_program

        blocking, batched = p2p_program(self.p2p)
        if not blocking:
            return 0.0
        both = max if batched else (lambda x, y: x + y)
        m, fb, net = self.model, self._fb, self.profiles.network
        best = math.inf
        scale = fb.activation_bytes / m.bytes_per_value
        mask = mask_message_bytes(fb)
        for act in {s.activation_bytes for s in m.layer_sizes(a.tp)[:-1]}:
            size = microbatch_size * act * scale
            for pa, pb in self._placements(a, b):
                try:
                    fwd = pair_time(net, pa, pb, *p2p_flows(fb, size, a.tp), self.profiles)
                    if mask > 0:  # DeepSpeed 0.3.13's mask, each rank's message after its part
                        fwd += pair_time(net, pa, pb, mask, a.tp, self.profiles)
                    t = both(fwd,
                             pair_time(net, pb, pa, *p2p_flows(fb, size, b.tp, gradient=True),
                                       self.profiles))
                except ConfigError:
                    return 0.0
                best = min(best, t)
        return best if math.isfinite(best) else 0.0

    def allreduce_bound(self, kinds: tuple[ReplicaSpec, ...], replicas: int, size: float
                        ) -> float:
        """A lower bound on :func:`~sim.profiles.build.plan_allreduce_time` of ``size`` bytes or
        more per GPU in a ring of ``replicas`` replicas, each of one of ``kinds``.

        The ring's first bucket alone (``min(size, bucket)`` bytes or more):
        ``2 (n - 1)`` steps, each at least a link's latency plus ``tp`` flows of
        ``bucket / n`` bytes at the link's peak bandwidth for messages of that
        size or more (:meth:`~sim.network.BandwidthCurve.peak_above`), the
        least over every ordered pair of kinds. 0 for one replica or a pair the
        network lacks (such a plan is refused when it is timed). Under Megatron-LM's
        distributed optimizer the gradients are reduce-scattered: ``n - 1`` such steps.
        """
        n = replicas
        if n <= 1 or size <= 0:
            return 0.0
        fb = self._fb
        bucket = fb.bucket_elements * fb.dp_bytes
        if fb.framework.key == "megatron" and fb.allreduce == "overlap-backward":
            bucket = 40_000_000.0 * fb.dp_bytes  # its bucket grows with dp: the least one
        msg = min(size, bucket) / n
        steps = n - 1 if fb.dist_optimizer else 2 * (n - 1)  # a reduce-scatter: half the ring
        kinds = tuple(dict.fromkeys(kinds))
        step = math.inf
        for a in kinds:
            for b in kinds:
                for x, y in self._placements(a, b):
                    try:
                        step = min(step, self._step_bound(x, y, msg))
                    except ConfigError:
                        return 0.0
        return steps * step

    def _step_bound(self, x: Any, y: Any, msg: float) -> float:
        """A lower bound on one ring step from ``x`` to ``y`` (``(ReplicaSpec, where)``): ``tp``
        flows of ``msg`` bytes (or more) at the peak bandwidths of the links they cross (worked
        out once per pair of placed kinds and size: the placements are values made once)."""
        key = (x[0], y[0], msg)
        hit = self._steps.get(key)
        if hit is None:
            hit = self._steps[key] = self._step_bound_of(x, y, msg)
        return hit

    def _step_bound_of(self, x: Any, y: Any, msg: float) -> float:
        """:meth:`_step_bound`, worked out."""
        net, t = self.profiles.network, x[0].tp
        if x[0].host is None:  # a node of its own: the pair curve
            link = pair_link(net, x, y)
            peak = peak_bandwidth_above(link.bandwidth, msg)
            return link.latency + (t * msg / peak if peak > 0 else 0.0)
        if x[0].host == y[0].host:  # one node: its intra-node link
            peak = peak_bandwidth_above(intra_capacity(self.profiles, x[0]), msg)
            return msg / peak if peak > 0 else 0.0
        links = node_links(net, x, y)
        rate = min(peak_bandwidth_above(links["gpu"].bandwidth, msg),
                   peak_bandwidth_above(links["nic"].bandwidth, msg) / t,
                   peak_bandwidth_above(links["pair"].bandwidth, msg) / t,
                   peak_bandwidth_above(links["nic_back"].bandwidth, msg) / t,
                   peak_bandwidth_above(links["gpu_back"].bandwidth, msg))
        lat = max(v.latency for v in links.values())
        return lat + (msg / rate if rate > 0 else 0.0)

    def tail_bound(self, kinds: tuple[ReplicaSpec, ...], dp: int, stages: int,
                   uniform: bool = False) -> float:
        """A lower bound on the tail :func:`~sim.profiles.build.explain_rows` adds to the
        pipeline phase (tied all-reduce, then the slowest stage's gradient all-reduce and
        optimizer step) for every plan of ``stages`` stages of ``dp`` replicas of these kinds.

        * The tied all-reduce (a tied model, ``stages > 1``): the least
          :func:`~sim.profiles.build.plan_allreduce_time` of the tied layer between a
          first-stage and a last-stage replica over every ordered pair of kinds
          (the function the plan is timed with).
        * The gradient all-reduce (``dp > 1``) after the last backward pass:
          some stage holds at least ``1/stages`` of the parameters (per GPU, at
          the least-bytes TP degree of the kinds), all-reduced among ``dp``
          replicas of the kinds (:meth:`allreduce_bound`); with ``uniform``
          (every stage's replicas of one kind, and every kind holding a stage,
          as in the ``stage`` layout) also each kind's ring over its smallest
          layer. Overlapped with the backward pass (PyTorch DDP, Megatron-LM's
          ``overlap_grad_reduce``) it may hide behind the pipeline: 0. Without
          a barrier (upstream DeepSpeed, Megatron-LM: each stage's collectives
          from its own devices' ends, :func:`sim.analytic.placement.staged_step_end`)
          only stage 0 ends with the pipeline: 0 too. The tied all-reduce's term
          holds either way (stage 0's last backward pass ends the pipeline phase
          and the tied all-reduce follows it, before or after its gradients').
        * The optimizer step: 0.

        A pair of kinds the network lacks adds nothing (such a plan is refused
        when it is timed).
        """
        kinds = tuple(dict.fromkeys(kinds))
        m, L, net, fb = self.model, stages, self.profiles.network, self._fb
        tail = 0.0
        if m.tied_embeddings and L > 1:
            best = math.inf
            bucket = fb.bucket_elements * fb.dp_bytes
            for a in kinds:
                for b in kinds:
                    size = tied_bytes(m, fb, b.tp)
                    for x, y in self._placements(a, b):
                        try:
                            t = plan_allreduce_time(net, [x, y], [a.tp, b.tp], size, bucket,
                                                    self.profiles)
                        except ConfigError:
                            continue
                        best = min(best, t)
            tail += best if math.isfinite(best) else 0.0
        # after the pipeline's end only with a barrier: without one (upstream DeepSpeed,
        # Megatron-LM) a stage that ends early reduces meanwhile, and only stage 0 ends last
        if dp > 1 and fb.allreduce != "overlap-backward" and (fb.barrier or L == 1):
            rows = [m.layer_sizes(tp) for tp in {k.tp for k in kinds}]
            total = sum(min(r[i].params for r in rows) for i in range(m.layers)) * fb.dp_bytes
            ar = self.allreduce_bound(kinds, dp, total / L)
            if uniform:
                for k in kinds:
                    least = min(s.params for s in m.layer_sizes(k.tp)) * fb.dp_bytes
                    ar = max(ar, self.allreduce_bound((k,), dp, least))
            tail += ar
        return tail

    def training_config(self, plan: Plan, *, network: bool = True, **config: Any) -> Any:
        """The :class:`~sim.training.TrainingConfig` ``dtsim train --plan`` runs for ``plan``."""
        return self.build(plan, network=network, **config).config

    def memory_cap(self, gpu: str, tp: int) -> float:
        g = self.profiles.gpus[gpu]
        return g.memory_bytes - g.overhead(tp)

    @property
    def memory_dp(self) -> bool:
        """Whether :meth:`memory_terms` depends on the stage's data-parallel degree ``dp``
        (DeepSpeed's BF16_Optimizer partitions its fp32 master weights and optimizer state over
        it: :func:`~sim.profiles.build.bf16_optimizer_memory`; Megatron-LM's distributed
        optimizer its optimizer state: :func:`~sim.profiles.build.plan_memory`); the search
        passes ``dp`` then."""
        return self._fb.bf16_allgather is not None or self._fb.dist_optimizer

    def memory_terms(self, gpu: str, tp: int, microbatch_size: int, stage: int, stages: int,
                     microbatches: int, dp: int = 1
                     ) -> tuple[tuple[float, tuple[float, ...]], ...]:
        """:func:`~sim.profiles.build.plan_memory` as sums over the stage's layers.

        A GPU holds weights, gradients and optimizer state, then the larger of
        (activations held plus received-input buffers) and the all-reduce
        bucket, so it fits iff both sums fit: ``buffers + sum(W_i + A_i)`` and
        ``sum(W_i + K_i)``, with ``W_i`` a layer's weight, gradient and
        optimizer bytes, ``A_i`` its activations times the micro-batches the
        schedule holds at this stage, ``K_i`` its share of the bucket (Megatron-LM, which
        reduces the gradients in place in their buffer, has none: fp16's fp32 copy alone). Three
        readings keep the sums exact or safe: the buffers are sized for the
        largest output a stage can receive (all of OPT's are equal), the
        bucket for all the stage's parameters (it is capped at 5e8 elements),
        and upstream DeepSpeed's received inputs (:func:`recv_memory`) are
        counted whole even for a shape-estimated model, whose stage's first
        layer, when a transformer layer, holds one of them in its activations
        (the stage's layers are not known here).

        Under DeepSpeed's BF16_Optimizer (bf16 on 0.9.0 to 0.16.5,
        :func:`~sim.profiles.build.bf16_optimizer_memory`) a rank of ``dp``
        replicas holds ``2P + F (6 + (4 + s) / dp)`` bytes for its ``P``
        parameters, ``F`` being ``P`` padded up to a multiple of ``2 dp``: the
        sums count ``W_i`` at ``F = P`` and the fixed term the most padding can
        add, ``(2 dp - 1)`` elements, so they are never below plan_memory and at
        most ``(2 dp - 1) (6 + (4 + s) / dp)`` bytes above it (18 at dp 1, ~400 at 32).
        Under Megatron-LM's distributed optimizer ``W_i`` holds the optimizer state of the
        rank's ``1/dp`` shard, and ``K_i`` is the larger of the bucket's share and the fp32
        gradient copy fp16's step makes (``grad_copy_bytes``, of the shard), every
        parameter's: never below plan_memory, as the bucket's share; its buffer's padding
        (each bucket to ``lcm(dp, 128)`` elements) counted as the most it can add, ``lcm - 1``
        elements a bucket (the first stage's overlapped buckets at most ``1 + P / bucket``).
        """
        m = self.model
        bpv, opt = m.bytes_per_value, m.optimizer_bytes_per_param
        n = in_flight(self.schedule, stages, stage, microbatches)
        sizes = m.layer_sizes(tp)
        buffers = 0.0
        if stage > 0 and self._fb.recv_clones:  # upstream DeepSpeed 0.9.0 to 0.16.5
            buffers = recv_memory(microbatch_size * self._recv[tp], n, tp,
                                  self._fb.partitioned, False)
        elif stage > 0:
            extra = self._fb.pipe_buffers  # DeepSpeed 0.3.13 keeps one more
            buffers = max(2, min(stages - stage + extra, microbatches)) * microbatch_size \
                * self._recv[tp]
        # the attention masks DeepSpeed 0.3.13 keeps with GPT2ModelPipe (none elsewhere)
        buffers += mask_memory(self._fb.sequence, stage, stages, microbatches, tp,
                               self._fb.pipe_buffers, self.schedule)
        if self._fb.bf16_allgather is not None:  # DeepSpeed's BF16_Optimizer
            state = bf16_state_bytes(bpv, opt)
            per_flat = 6.0 + (4.0 + state) / dp  # bf16 weights 2, fp32 gradients 4, fp32 part
            weights = [s.params * (2.0 + per_flat) for s in sizes]
            pad = (2 * dp - 1) * per_flat  # the most the flat buffer's padding adds
            buffers += pad
        else:
            # the gradients in the framework's buffer's dtype where wider (Megatron-LM bf16);
            # Megatron-LM's distributed optimizer: the state of the rank's 1/dp shard
            state = opt / dp if self._fb.dist_optimizer else opt
            weights = [s.params * (bpv + (self._fb.grad_bytes or bpv) + state) for s in sizes]
            pad = 0.0
            if self._fb.dist_optimizer:
                # Megatron-LM pads each bucket to lcm(dp, 128) elements (dist_optimizer_buckets):
                # at most div - 1 elements more of weights and gradients a bucket, and of its
                # shard's optimizer state and gradient copy at most (div - 1) / dp; the first
                # stage's overlapped buckets number at most 1 + P / bucket
                div = math.lcm(dp, DIST_PAD_VALUES)
                pad = (div - 1) * (bpv + (self._fb.grad_bytes or bpv)
                                   + (opt + self._fb.grad_copy_bytes) / dp)
                first = dist_first_bucket(self._fb) if stage == 0 else math.inf
                if math.isfinite(first):
                    weights = [w + s.params * pad / first for w, s in zip(weights, sizes,
                                                                          strict=True)]
                buffers += pad
        kept = sizes  # the activation memory of the attention path on this GPU (Megatron-LM)
        if self._fb.attention is not None and m.shape_sized(tp):
            path, _ = attention_path(self._fb, gpu, self.profiles.gpus[gpu].compute_capability)
            kept = m.layer_sizes(tp, path)
        held = tuple(w + n * microbatch_size * s.activation_memory_bytes
                     for w, s in zip(weights, kept, strict=True))
        # after the backward passes: the bucket, or Megatron-LM's fp32 gradient copy (fp16)
        copy = self._fb.grad_copy_bytes / (dp if self._fb.dist_optimizer else 1)
        # (Megatron-LM reduces the gradients in place in their buffer: no bucket, the copy only)
        after = copy if self._fb.grads_in_buffer else bpv if copy <= bpv else copy
        bucket = tuple(w + s.params * after for w, s in zip(weights, sizes, strict=True))
        return ((buffers, held), (pad, bucket))


def shape_search_model(profiles: Profiles, model: ModelProfile, fleet: Fleet,
                       microbatch_sizes: tuple[int, ...] | None, tps: tuple[int, ...] | None,
                       global_batch_size: int, framework: FrameworkSpec | None = None
                       ) -> tuple[ModelProfile, tuple[str, ...]]:
    """What the search ranks for a model given by its shape alone, and what it tried.

    Every time is the roofline estimate ``dtsim train --plan`` gives such a model
    (:mod:`sim.profiles.estimates`, at the framework's activation bytes, as
    :func:`~sim.profiles.build.build_plan` estimates them), at each combination
    of: the fleet's GPU types whose datasheet the catalogue holds (peak FLOP/s and
    memory bandwidth); the micro-batch sizes given, else the powers of two that
    divide the global batch; the TP degrees given, else the powers of two up to
    the GPUs of the type's largest node (a TP group stays in one node). The
    search then keeps the combinations the framework runs and the heads divide.

    Returns
    -------
    (ModelProfile, tuple of str)
        The model with those rows, and one line per choice (for the output).
    """
    from ..profiles.estimates import Estimator

    assert model.shape is not None and not model.times
    fb = resolve(framework, model.bytes_per_value, sequence=model.shape.sequence)
    model = model.trained_at(fb.activation_bytes)  # sized as build_plan sizes it: the run's precision
    est = Estimator(profiles, model, value_bytes=fb.activation_bytes,
                    recompute_attention=fb.attention is not None and fb.attention[2])
    most: dict[str, int] = {}
    for kind, count in fleet.nodes:
        if count > 0:
            most[kind.gpu] = max(most.get(kind.gpu, 0), kind.gpus_per_node)
    gpus = sorted(g for g in most if est.can_estimate(g))
    peaks = ("peak_flops (the fp16/bf16 tensor peak, at the framework's 2-byte values)"
             if fb.activation_bytes <= 2 else "peak_flops_tf32 or peak_flops_fp32 (the "
             "framework runs 4-byte values; peak_flops is the fp16/bf16 peak, used with "
             "--framework NAME:precision=bf16 or fp16)")
    check(bool(gpus), "fleet", f"GPUs whose datasheet the catalogue holds ({peaks} and "
          f"memory_bandwidth: {model.name} is given by its shape, its times estimated from "
          "them)", ", ".join(sorted(most)))
    sizes = microbatch_sizes if microbatch_sizes is not None else tuple(
        b for b in (2 ** k for k in range(global_batch_size.bit_length()))
        if global_batch_size % b == 0)
    combos = []
    for gpu in gpus:
        degrees = tps if tps is not None else tuple(
            2 ** k for k in range(most[gpu].bit_length()) if 2 ** k <= most[gpu])
        combos.extend((gpu, b, t) for b in sizes for t in degrees)
    notes = (f"{model.name} is given by its shape: every time is estimated (the roofline "
             "lower bound at the GPU's datasheet peak, docs/real_runs.md), on "
             + ", ".join(gpus) + "; micro-batch sizes " + ", ".join(map(str, sizes))
             + ("" if microbatch_sizes is not None else " (the powers of two dividing the "
                "global batch; --microbatch-sizes to choose)"),)
    skipped = sorted(set(most) - set(gpus))
    if skipped:
        notes += (f"not searched: {', '.join(skipped)} (no datasheet peak FLOP/s or memory "
                  "bandwidth in the catalogue to estimate on)",)
    return est.from_shape(tuple(combos)), notes


def derived_tp_model(profiles: Profiles, model: ModelProfile, fleet: Fleet,
                     tps: tuple[int, ...], framework: FrameworkSpec | None = None
                     ) -> tuple[ModelProfile, tuple[str, ...]]:
    """A measured profile with rows at the TP degrees ``tps`` (``--tp``) it did not measure on
    a GPU type of the fleet, derived from its TP-1 rows as ``dtsim train --plan`` derives them
    (:mod:`sim.profiles.estimates`: the split compute over ``t``, the replicated work whole,
    Megatron-LM's TP all-reduces over the node's link), at each micro-batch size it measured
    at TP 1, for degrees up to the type's largest node and where the profile has sizes there
    (its own, or its shape's). Before, a degree the profile had not measured was refused by
    the search, though ``dtsim train --plan`` timed it. Returns the model and one line per
    degree added (the output names them as estimates); the model itself when none is.
    """
    from ..profiles.estimates import Estimator

    fb = resolve(framework, model.bytes_per_value,
                 sequence=model.shape.sequence if model.shape is not None else None)
    est = Estimator(profiles, model, value_bytes=fb.activation_bytes, sequence=fb.sequence)
    most: dict[str, int] = {}
    for kind, count in fleet.nodes:
        if count > 0:
            most[kind.gpu] = max(most.get(kind.gpu, 0), kind.gpus_per_node)
    sized = {t for t, _ in model.sizes}
    extra = []
    added: dict[str, list[int]] = {}
    for (gpu, b, t), _ in model.times:
        if t != 1 or gpu not in most:
            continue
        for tp in tps:
            if (tp <= 1 or tp > most[gpu] or any(g == gpu and x == tp for (g, _, x), _
                                                 in model.times)
                    or (model.shape is None and tp not in sized)):
                continue
            extra.append(((gpu, b, tp), est.layer_times(gpu, b, tp)[0]))
            added.setdefault(gpu, [])
            if tp not in added[gpu]:
                added[gpu].append(tp)
    if not extra:
        return model, ()
    notes = tuple(f"{gpu} TP {', '.join(map(str, ts))}: not measured, derived from the profile's "
                  "TP 1 rows as dtsim train --plan derives them (docs/real_runs.md, Profiles "
                  "that hold less)" for gpu, ts in added.items())
    return replace(model, times=model.times + tuple(extra)), notes


def simulate_plan(pm: ProfilePlanModel, plan: Plan, *, steps: int = 3, replications: int = 1,
                  seed: int = 0, network: bool = True, **config: Any) -> dict[str, Any]:
    """Run ``plan`` in the training DES; its mean iteration time with an interval.

    Parameters
    ----------
    pm : ProfilePlanModel
        Builds the plan's :class:`~sim.training.TrainingConfig`.
    plan : Plan
    steps : int
        Iterations per replication.
    replications : int
    seed : int
    network : bool
        Transfers and all-reduces as flows sharing the links of
        :mod:`sim.network` (default, as ``dtsim train --plan``), or as their
        closed-form times.
    **config
        Further :class:`~sim.training.TrainingConfig` fields (failures, a trace,
        checkpoints).

    Returns
    -------
    dict
        ``iteration_time``: wall time per iteration, ``global batch / samples per
        second`` (the step time without failures; with them it counts lost
        work, restarts and checkpoints), its interval ``iteration_time_ci``
        across replications (:class:`~sim.results.Estimate`),
        ``step_time`` (mean time of a completed step), ``engine``.
    """
    cfg = pm.training_config(plan, network=network, steps=steps, **config)
    sel = select("training", cfg, "auto")
    records = replicate(sel.engine.run, cfg, replications=replications, seed=seed)
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    gbs = plan.global_batch_size
    per = [gbs / r["samples_per_second"] for r in records if r["samples_per_second"] > 0]
    est = summarize(records, ["step_time_mean"], lower=0.0)
    it = mean_ci(per, lower=0.0) if per else None
    return {"iteration_time": it.mean if it is not None else math.inf,
            "iteration_time_ci": it, "step_time": est["step_time_mean"].mean,
            "engine": sel.name}


def pipeline_busy_bound(build: PlanBuild) -> float:
    """A lower bound on the pipeline phase :func:`~sim.profiles.build.explain_rows` evaluates:
    the time the busiest device of any pipeline spends computing and in its transfers.

    Every device of a pipeline of ``m`` micro-batches runs ``m`` forward and backward passes
    and, over each of its stage boundaries, receives and sends every micro-batch's
    activation or gradient. Under a blocking paired send and receive (DeepSpeed's
    ``TrainSchedule``, GPipe's blocking program) each transfer holds the device for its
    time, one after the other: ``m (f + b + sum of its transfers)``; under Megatron-LM's
    batched pairs a call holds at most one transfer each way with one neighbour, so the
    calls with a neighbour last at least ``m`` times the longer of the activation and the
    gradient; overlapped transfers hold no device. A device's commands run one after the
    other in :func:`~sim.analytic.training.program_makespan`, so the phase is at least this
    (shaved by 1e-9 of itself: the sums here and there round apart).
    """
    c = build.config
    L, r, m = c.stages, c.replicas[0], c.microbatches  # type: ignore[index]
    blocking = c.p2p in ("blocking", "batched")
    batched = c.p2p == "batched"
    busiest = 0.0
    for k in range(r):
        mk = len(range(k, m, r))
        for j in range(L):
            f, b = c.replica_times[j][k]  # type: ignore[index]
            if c.recv_gather_times is not None:  # DeepSpeed 0.3.13's, before each receive
                b += c.recv_gather_times[j][k]
            hops = 0.0
            if blocking:
                for h in (j - 1, j):
                    if 0 <= h < L - 1:
                        act, grad = build.transfer_times[h][k]
                        hops += max(act, grad) if batched else act + grad
            busiest = max(busiest, mk * (f + b + hops))
    return busiest * (1 - 1e-9)
