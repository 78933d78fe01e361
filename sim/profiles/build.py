"""From a plan and the profiles to a :class:`~sim.training.TrainingConfig`, a memory estimate and an
account of where an iteration's time goes.

:func:`build_plan` is what ``dtsim train --plan FILE --model NAME`` runs before
any simulation. Each piece is a documented model choice; the constants come
from the profiles, the network curves, the GPU catalogue or a named framework
fact, never from the measured runs (``docs/real_runs.md`` holds the check).

Time of one iteration (what the engine runs, :mod:`sim.training.framework`):

* **compute**: a replica's forward (backward) pass of one micro-batch is the
  sum of its stage's layers' profiled times on its GPU type at the plan's
  micro-batch size and its TP degree (the profile measured each layer with
  TP inside one node, so TP's own communication is in it);
* **point-to-point**: a stage sends the output of its last layer
  (``activation_bytes x mbs``) to the next and gets the same size back as the
  gradient. With TP > 1 DeepSpeed's pipeline engine partitions the tensor over
  the TP group (``pipeline.pipe_partitioned`` and ``grad_partitioned``, on by
  default) so the node's ``tp`` GPUs send ``1/tp`` each at once: ``tp``
  concurrent flows through the pair's link, timed by
  :meth:`~sim.profiles.Network.transfer_time` with the curve measured for that
  many flows. ``p2p="blocking"``: DeepSpeed's ``TrainSchedule`` with paired
  blocking send and receive; ``"overlap"``: transfers in flight while the
  stages compute (Megatron-LM's order);
* **gradient all-reduce** of each stage among its ``dp`` replicas, after the
  last backward (DeepSpeed's pipeline engine runs ``ReduceGrads`` at the end
  of the step, not overlapped with the backward): the gradients of a GPU
  (``params x bytes_per_value``) in buckets of at most ``5e8`` elements
  (DeepSpeed's ``MEMORY_OPT_ALLREDUCE_SIZE``), each a ring all-reduce of NCCL
  (``2 (n - 1)`` steps of ``bucket / n`` bytes per GPU, the ``tp`` GPUs of a
  node at once; a step takes the slowest link of the ring); the stages' rings
  run at once, on separate nodes;
* **tied weights**: with tied embeddings and more than one stage, the first
  and last stage all-reduce the gradient of the shared embedding (DeepSpeed's
  ``ReduceTiedGrads``; its size is the last layer's parameters) before that;
* **optimizer step**: the sum of the stage's layers' optimizer shares (the
  slowest replica of each stage); a stage's all-reduce and optimizer step
  run one after the other, the stages in parallel.

Memory of one GPU (stage ``j``, replica on a GPU type with TP ``t``), every term
per GPU of the TP group:

* weights and gradients, ``params x bytes_per_value`` each (the profiled runs
  trained in fp32: 4 bytes);
* optimizer state, ``params x optimizer_bytes_per_param`` (Adam's two moments,
  8 bytes in fp32; mixed-precision Adam adds fp32 master weights: 12, the
  ZeRO paper's 16 bytes per parameter with the fp16 weight and gradient;
  Rajbhandari et al., SC 2020, section 3.1);
* activations held by the schedule: ``n_j x mbs x`` the stage's layers'
  ``activation_memory_bytes``, ``n_j`` the micro-batches in flight (1F1B:
  ``min(L - j, m)``, GPipe: ``m``; Narayanan et al., ICML 2021), plus
  DeepSpeed's received-input buffers, ``max(2, min(L - j, m))`` of the
  previous stage's output (its ``num_pipe_buffers``);
* or, when larger, DeepSpeed's flattened all-reduce bucket (a copy of at most
  ``5e8`` gradient elements, live after the last backward freed the
  activations);
* the framework's overhead on that GPU type (the catalogue's, with its source).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, check, format_bytes
from ..training import TrainingConfig
from .values import GPUCatalogue, ModelProfile, Network, Plan, Profiles

__all__ = ["BUCKET_ELEMENTS", "GPUMemory", "PlanBuild", "build_plan", "plan_memory",
           "in_flight", "plan_allreduce_time", "pair_link", "plan_network", "explain_rows"]

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

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer
                + max(self.activations + self.buffers, self.allreduce_bucket) + self.overhead)


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

    @property
    def peak_memory(self) -> float:
        """The largest memory of any GPU (bytes)."""
        return max(m.total for m in self.memory)


def in_flight(schedule: str, stages: int, stage: int, microbatches: int) -> int:
    """Micro-batches whose activations stage ``stage`` holds at once under ``schedule``."""
    if schedule == "gpipe":
        return microbatches
    return min(stages - stage, microbatches)


def plan_allreduce_time(network: Network, nodes: list[Any], flows: list[int],
                        size: float) -> float:
    """A bucketed ring all-reduce of ``size`` bytes per GPU among ``nodes`` (``flows`` GPUs each).

    ``nodes`` are ``(ReplicaSpec, (stage, index))`` in ring order. Buckets of
    at most :data:`BUCKET_ELEMENTS` values of 4 bytes run one after the other;
    each is ``2 (n - 1)`` steps in which every GPU sends ``bucket / n`` bytes
    to the next node of the ring, the step taking the slowest link's time
    (each pair's link: :func:`pair_link`): the ring law
    :func:`sim.analytic.network.ring_steps_time`.
    """
    from ..analytic.network import ring_steps_time

    n = len(nodes)
    return ring_steps_time(n, size, BUCKET_ELEMENTS * 4.0, lambda chunk: max(
        pair_time(network, nodes[k], nodes[(k + 1) % n], chunk, flows[k]) for k in range(n)))


def _model(plan: Plan, profiles: Profiles, model: str | None) -> ModelProfile:
    name = model if model is not None else plan.model
    if name is None:
        raise ConfigError("model", "given (--model NAME) when the plan does not name it", None)
    if model is not None and plan.model is not None and plan.model != model:
        raise ConfigError("model", f"the plan's model ({plan.model}) or unset", model)
    return profiles.model(name)


def plan_memory(plan: Plan, model: ModelProfile, gpus: GPUCatalogue, schedule: str = "1f1b"
                ) -> tuple[GPUMemory, ...]:
    """The memory of every GPU of ``plan`` (one entry per replica; its TP GPUs are alike)."""
    L = len(plan.stages)
    m = plan.microbatches
    mbs = plan.microbatch_size
    bpv = model.bytes_per_value
    out = []
    for j, st in enumerate(plan.stages):
        for i, rep in enumerate(st.replicas):
            g = gpus[rep.gpu]
            sizes = model.layer_sizes(rep.tp)
            P = sum(sizes[x].params for x in st.layers)
            act = mbs * sum(sizes[x].activation_memory_bytes for x in st.layers)
            n = in_flight(schedule, L, j, m)
            buffers = 0.0
            if j > 0:
                prev = plan.stages[j - 1]
                buffers = max(2, min(L - j, m)) * mbs * \
                    model.layer_sizes(rep.tp)[prev.layers[-1]].activation_bytes
            out.append(GPUMemory(
                stage=j, replica=i, gpu=rep.gpu, tp=rep.tp, weights=P * bpv, gradients=P * bpv,
                optimizer=P * model.optimizer_bytes_per_param, activations=n * act,
                buffers=buffers, allreduce_bucket=min(P, BUCKET_ELEMENTS) * bpv,
                overhead=g.overhead(rep.tp), capacity=g.memory_bytes))
    return tuple(out)


def pair_link(network: Network, a: Any, b: Any) -> Any:
    """The link from replica ``a`` to replica ``b`` (each ``(ReplicaSpec, (stage, index))``).

    The curve measured from ``a``'s node kind to ``b``'s with their TP
    degrees as flow counts (the artifact's curves are per ordered pair: e.g.
    Titan-RTX -> RTX-3090 and back differ). A pair measured in one direction
    only is taken as symmetric (the other direction's curve); a pair measured
    in neither is refused in one line naming ``network``.
    """
    (ra, _), (rb, _) = a, b
    try:
        return network.link(ra.node, rb.node, ra.tp, rb.tp)
    except ConfigError:
        try:
            return network.link(rb.node, ra.node, rb.tp, ra.tp)
        except ConfigError:
            pass
        raise


def pair_time(network: Network, a: Any, b: Any, size: float, flows: int) -> float:
    """``flows`` flows of ``size`` bytes each from ``a`` to ``b`` (see :func:`pair_link`)."""
    x = pair_link(network, a, b)
    if size <= 0:
        return 0.0
    bw = x.curve.at(size)
    if not bw > 0:
        (ra, _), (rb, _) = a, b
        raise x.curve.nonpositive(f"{ra.gpu}@{ra.zone} -> {rb.gpu}@{rb.zone}", size)
    return x.latency + flows * size / bw


def plan_network(plan: Plan, network: Network, tied: bool) -> Any:
    """The plan's hosts and links as a :class:`sim.network.NetworkValue`.

    One host per replica (``s{j}r{i}``), one link per pair of replicas that
    exchange data (neighbouring stages of a pipeline, neighbours in a stage's
    all-reduce ring, the first and last stage with tied weights), full
    duplex, each direction carrying the curve measured in that direction
    (:func:`pair_link`; the ``v -> u`` one as ``reverse_bandwidth``) as a
    :class:`sim.network.BandwidthCurve` (``polylog2`` in GB/s of
    ``log2(bytes / 1e6)``, clamped to the fitted sizes), and the larger of
    the two directions' latencies (the shipped curves have none). Sharing
    on a link is max-min fair, so the ``t`` flows of a TP group get
    ``B_t(S) / t`` each, as :meth:`~sim.profiles.Network.transfer_time` says.
    """
    from ..network.curves import BandwidthCurve as NetCurve
    from ..network.topology import LinkValue, NetworkValue

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
    def capacity(c: Any) -> Any:
        return c.bandwidth if c.bandwidth is not None else NetCurve.polylog2(
            c.coefficients, size_unit=1e6, bandwidth_unit=1e9, min_size=c.min_bytes,
            max_size=c.max_bytes)

    links = []
    for (a, b), (x, y) in sorted(pairs.items()):
        fwd, back = pair_link(network, x, y), pair_link(network, y, x)
        links.append(LinkValue(f"s{a[0]}r{a[1]}", f"s{b[0]}r{b[1]}", capacity(fwd.curve),
                               max(fwd.latency, back.latency),
                               reverse_bandwidth=None if back.curve == fwd.curve
                               else capacity(back.curve)))
    if not links:  # one replica, one stage: nothing moves; a link to nowhere keeps the value valid
        links.append(LinkValue("s0r0", "idle", float("inf")))
    return NetworkValue(tuple(links))


def build_plan(plan: Plan, profiles: Profiles, *, model: str | None = None,
               schedule: str = "1f1b", p2p: str = "blocking", check_memory: bool = True,
               network: bool = False, **config: Any) -> PlanBuild:
    """The :class:`TrainingConfig` of ``plan`` on ``profiles``, its memory and its pieces.

    Parameters
    ----------
    plan : Plan
    profiles : Profiles
    model : str, optional
        The model's name (else the plan's).
    schedule : {"1f1b", "gpipe", "1f1b-dynamic"}
    p2p : {"blocking", "overlap", "shared"}
        DeepSpeed's blocking paired send/receive (what the shipped runs used)
        or transfers overlapped with compute (FIFO channels; ``shared``: each
        on a connection of its own, see :class:`~sim.training.TrainingConfig`).
    check_memory : bool
        Refuse a plan that does not fit (one line naming the stage and GPU).
    network : bool
        Run the plan's transfers and all-reduces as flows of :mod:`sim.network`
        over :func:`plan_network` (contention between them included), instead
        of their closed-form times (which stay in the PlanBuild as the
        reference).
    **config
        Any other :class:`TrainingConfig` field (steps, failures, prices, ...).

    Raises
    ------
    ConfigError
        One line: a GPU type the profile or catalogue lacks, layers that do
        not cover the model, a TP degree or micro-batch size without a profile
        entry, a missing network link, a plan out of memory.
    """
    mp = _model(plan, profiles, model)
    plan.check_covers(mp.layers)
    check(schedule in ("1f1b", "gpipe", "1f1b-dynamic"), "schedule",
          "1f1b, gpipe or 1f1b-dynamic with a plan", schedule)
    L = len(plan.stages)
    dp = plan.dp
    check(len(set(dp)) == 1, "plan", "the same number of replicas at every stage (one per "
          "pipeline)", dp)
    r = dp[0]
    for j, st in enumerate(plan.stages):
        check(len({x.tp for x in st.replicas}) == 1, "plan",
              f"one TP degree per stage (stage {j})", sorted({x.tp for x in st.replicas}))
    gpus = profiles.gpus
    mbs = plan.microbatch_size
    net = profiles.network
    # compute: per stage, per replica (forward, backward, optimizer) of one micro-batch
    times = []
    for st in plan.stages:
        row = []
        for rep in st.replicas:
            lt = mp.layer_times(rep.gpu, mbs, rep.tp)  # a GPU type, TP or mbs the profile lacks
            mp.layer_sizes(rep.tp)
            gpus[rep.gpu]  # a GPU type the catalogue lacks
            row.append((math.fsum(lt[x].forward for x in st.layers),
                        math.fsum(lt[x].backward for x in st.layers),
                        math.fsum(lt[x].optimizer for x in st.layers)))
        times.append(tuple(row))
    # point to point: per hop, per pipeline (activation, gradient)
    xfer = []
    for j in range(L - 1):
        a, b = plan.stages[j], plan.stages[j + 1]
        row = []
        for i in range(r):
            src, dst = a.replicas[i], b.replicas[i]
            size = mbs * mp.layer_sizes(src.tp)[a.layers[-1]].activation_bytes
            pa, pb = (src, (j, i)), (dst, (j + 1, i))
            act = pair_time(net, pa, pb, size / src.tp, src.tp)
            grad = pair_time(net, pb, pa, size / dst.tp, dst.tp)
            row.append((act, grad))
        xfer.append(tuple(row))
    # gradient all-reduce per stage, tied embedding between the first and last stage
    ar, ar_sizes = [], []
    for j, st in enumerate(plan.stages):
        tp = st.replicas[0].tp
        size = sum(mp.layer_sizes(tp)[x].params for x in st.layers) * mp.bytes_per_value
        ar_sizes.append(size)
        ar.append(plan_allreduce_time(net, [(x, (j, i)) for i, x in enumerate(st.replicas)],
                                 [x.tp for x in st.replicas], size))
    tied, tied_size = 0.0, 0.0
    if mp.tied_embeddings and L > 1:
        last_tp = plan.stages[-1].replicas[0].tp
        tied_size = mp.layer_sizes(last_tp)[mp.layers - 1].params * mp.bytes_per_value
        for i in range(r):
            first, last = plan.stages[0].replicas[i], plan.stages[-1].replicas[i]
            tied = max(tied, plan_allreduce_time(net, [(first, (0, i)), (last, (L - 1, i))],
                                            [first.tp, last.tp], tied_size))
    opt = tuple(max(t[2] for t in row) for row in times)
    memory = plan_memory(plan, mp, gpus, schedule)
    if check_memory:
        for g in memory:
            if g.total > g.capacity:
                raise ConfigError("plan", "a plan that fits in GPU memory",
                                  f"stage {g.stage} on {g.gpu} (replica {g.replica}, TP {g.tp}) "
                                  f"needs {format_bytes(g.total)} of {format_bytes(g.capacity)}")
    prices = None
    if all(gpus[x.gpu].price_per_hour is not None for st in plan.stages for x in st.replicas):
        prices = tuple(tuple(gpus[x.gpu].price_per_hour * x.tp for x in st.replicas)  # type: ignore[operator]
                       for st in plan.stages)
    kw: dict[str, Any] = dict(
        stages=L, replicas=r, microbatches=plan.microbatches * r, schedule=schedule,
        routing="round-robin", forward_time=tuple(row[0][0] for row in times),
        backward_times=tuple(row[0][1] for row in times),
        replica_times=tuple(tuple((f, b) for f, b, _ in row) for row in times),
        optimizer_times=opt, p2p=p2p, samples_per_microbatch=float(mbs), price=prices,
        sync="allreduce")
    if network:
        # the all-reduce's bucket: DeepSpeed's (the shipped runs'), unless --sync gives one or
        # overlaps the backward pass (then Megatron-LM's default, megatron/core/distributed/
        # distributed_data_parallel.py: bucket_size = max(40000000, 1000000 * dp) values)
        from ..training.sync import parse_sync

        spec = parse_sync(config.get("sync", "allreduce"))
        bucket = BUCKET_ELEMENTS * float(mp.bytes_per_value)
        if spec.get("overlap") == "backward" or spec.get("bucket_size") is not None:
            bucket = math.inf
            if spec.get("bucket_size") is None:
                megatron = max(40_000_000, 1_000_000 * r) * float(mp.bytes_per_value)
                config = {**config, "sync": f"{spec.text},bucket_size={megatron:.17g}"}
        kw.update(network=plan_network(plan, net, mp.tied_embeddings),
                  network_nodes=tuple(tuple(f"s{j}r{i}" for i in range(r)) for j in range(L)),
                  tensor_parallel=tuple(tuple(x.tp for x in st.replicas) for st in plan.stages),
                  bucket_size=bucket,
                  transfer_sizes=tuple(mbs * mp.layer_sizes(plan.stages[j].replicas[0].tp)[
                      plan.stages[j].layers[-1]].activation_bytes for j in range(L - 1)) or None,
                  allreduce_sizes=tuple(ar_sizes), tied_allreduce_size=tied_size)
    else:
        kw.update(transfer_times=tuple(xfer) if L > 1 else None, allreduce_times=tuple(ar),
                  tied_allreduce_time=tied)
    for k in config:
        check(k not in ("stages", "replicas", "microbatches", "forward_time", "backward_times",
                        "replica_times", "transfer_times", "allreduce_times", "optimizer_times",
                        "tied_allreduce_time", "samples_per_microbatch", "backward_ratio",
                        "speeds", "latency", "activation_size", "param_size", "bandwidth"),
              k, "set by the plan (not given with it)", config[k])
    kw.update(config)
    cfg = TrainingConfig(**kw)
    return PlanBuild(config=cfg, memory=memory, stage_times=tuple(times),
                     transfer_times=tuple(xfer), allreduce_times=tuple(ar), optimizer_times=opt,
                     tied_allreduce_time=tied)


def explain_rows(build: PlanBuild) -> dict[str, Any]:
    """Where a failure-free iteration's time goes, from the exact evaluation of its programs.

    Returns per stage (the slowest pipeline's device): compute (forward and
    backward passes), point-to-point (time the device spends in blocking
    transfers; overlapped transfers occupy no device and show as waiting),
    bubble (the rest of the pipeline phase: waiting for inputs and peers);
    and the iteration's tail: tied all-reduce, gradient all-reduce and
    optimizer step of the slowest stage, and the total.
    """
    from ..analytic.training import program_makespan
    from ..training.schedules import device_program

    c = build.config
    L, r, m = c.stages, c.replicas[0], c.microbatches  # type: ignore[index]
    blocking = c.p2p == "blocking"
    best: tuple[float, int, dict] | None = None
    for k in range(r):
        mk = len(range(k, m, r))
        f = [c.replica_times[j][k][0] for j in range(L)]  # type: ignore[index]
        b = [c.replica_times[j][k][1] for j in range(L)]  # type: ignore[index]
        act = [row[k][0] for row in build.transfer_times]
        grad = [row[k][1] for row in build.transfer_times]
        progs = [device_program(c.schedule, L, mk, j, blocking=blocking) for j in range(L)]
        done: dict = {}
        T = program_makespan(progs, f, b, act, grad, blocking=blocking,
                             channels=c.p2p == "overlap", finish=done)
        if best is None or T > best[0]:
            best = (T, k, {"mk": mk, "progs": progs, "act": act, "grad": grad, "f": f, "b": b})
    assert best is not None
    T, k, d = best
    stages = []
    for j in range(L):
        compute = d["mk"] * (d["f"][j] + d["b"][j])
        p2p = 0.0
        if blocking:
            for op in d["progs"][j]:
                if op[0] in ("send", "recv"):
                    p2p += d["act"][op[2]] if op[1] == "a" else d["grad"][op[2]]
        stages.append({"stage": j, "forward": d["f"][j], "backward": d["b"][j],
                       "compute": compute, "p2p": p2p, "bubble": max(T - compute - p2p, 0.0)})
    tail_stage = max(range(L), key=lambda j: build.allreduce_times[j] + build.optimizer_times[j])
    return {"pipeline": k, "microbatches": d["mk"], "pipeline_time": T, "stages": stages,
            "tied_allreduce": build.tied_allreduce_time,
            "allreduce": build.allreduce_times[tail_stage],
            "optimizer": build.optimizer_times[tail_stage], "tail_stage": tail_stage,
            "iteration": T + build.tied_allreduce_time + build.allreduce_times[tail_stage]
            + build.optimizer_times[tail_stage]}
