"""The training system's configuration (values only) and the speeds file reader."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topologies.placement import Placement, from_value, shared_per_stage

from ..analytic.penalty import quality_table
from ..errors import (
    NEVER_PROBED,
    TIME_LIMIT,
    ConfigError,
    ascii_float,
    ascii_int,
    available_memory,
    check,
    check_choice,
    check_int,
    check_memory,
    check_memory_terms,
    check_nonnegative,
    check_positive,
    check_probability,
    check_time_terms,
    format_bytes,
    read_csv_text,
)
from ..failures import DISTRIBUTIONS, check_law, check_shape, read_trace
from ..units import RATE, SIZE, TIME, parse_quantity, written_with_unit
from .routing import speed_rows
from .sync import KINDS, DilocoSync, parse_sync

#: Memory of one replication (bytes, measured with tracemalloc): per stage, per
#: replica worker, per microbatch of a step.
BYTES_PER_STAGE, BYTES_PER_WORKER, BYTES_PER_MICROBATCH = 10_000, 5_400, 500
#: The largest ``speed_spread``: drawn speeds exp(-s^2/2 +- 8 s) (8 standard deviations) stay
#: within e^+-360, so a pass time divided by one stays within TIME_LIMIT's margin.
SPEED_SPREAD_LIMIT = 20.0
#: Over a network: per tensor-parallel rank of a stage (its flows and rings; measured:
#: ``--tensor-parallel`` 10^4 -> 10^5 on a tree of 8 hosts grows the run by 84 MB) and per
#: gradient bucket of an all-reduce (its size and ring state).
BYTES_PER_RANK, BYTES_PER_BUCKET = 1_000, 100

__all__ = [
    "SCHEDULES",
    "FIXED",
    "P2PS",
    "ROUTINGS",
    "PAIRS",
    "ARRIVALS",
    "PASS_TIME_DISTRIBUTIONS",
    "SYNCS",
    "STRAGGLERS",
    "TrainingConfig",
    "read_speeds",
    "replica_name",
    "stage_workers",
    "host_groups",
]

SCHEDULES = ("gpipe", "1f1b", "1f1b-dynamic", "interleaved", "swarm", "async")
#: Fixed-pipeline schedules (a micro-batch keeps its pipeline; routing picks it).
FIXED = ("gpipe", "1f1b", "1f1b-dynamic", "interleaved")
#: How a transfer between stages meets compute (see ``TrainingConfig.p2p``): in flight
#: while the stages compute through FIFO channels, or blocking both ends (without a
#: network: DeepSpeed's paired send and receive in its TrainSchedule order), or in flight
#: each on a connection of its own (no queue; concurrent ones share links max-min), or
#: Megatron-LM's 1F1B with its batched send/receive pairs (both ends held, on the framework engine).
P2PS = ("overlap", "blocking", "shared", "batched")
ROUTINGS = ("queue", "least-loaded", "weighted", "round-robin", "least-assigned-time",
            "trainer-balancer")
#: Schedule -> the routings it has. GPipe and 1F1B run fixed pipelines (routing
#: picks a microbatch's pipeline and any failover), so a shared stage queue has
#: no meaning there.
PAIRS = {
    "gpipe": ("least-loaded", "weighted", "round-robin"),
    "1f1b": ("least-loaded", "weighted", "round-robin"),
    "1f1b-dynamic": ("least-loaded", "weighted", "round-robin"),
    "interleaved": ("round-robin",),
    "swarm": ROUTINGS,
    # a balancer a trainer needs the swarm schedule's trainers (micro-batch k of every step)
    "async": tuple(r for r in ROUTINGS if r != "trainer-balancer"),
}
ARRIVALS = ("saturated", "poisson", "fixed")
#: Laws of a pass's nominal time: constant, or a unit-mean duration law of
#: :mod:`sim.failures` (Weibull, lognormal and Pareto take ``pass_time_shape``).
PASS_TIME_DISTRIBUTIONS = ("deterministic", "exponential", "weibull", "lognormal", "pareto")
#: The kinds of ``--sync`` (:data:`sim.training.sync.KINDS`).
SYNCS = tuple(KINDS)
#: What happens to the replicas a fastest-k step does not wait for (``sync_wait``).
STRAGGLERS = ("cancel", "drop")


def replica_name(stage: int, replica: int) -> str:
    """The failure-model name of replica ``replica`` of stage ``stage`` (``s{j}r{i}``)."""
    return f"s{stage}r{replica}"


def stage_workers(replicas: Sequence[int], hosts: Any = None,
                  named: Any = None) -> list[tuple[Any, ...]]:
    """Each worker's names, stage-major: ``s{j}r{i}``, then its host ``hosts[j][i]`` when
    the workers sit on a network's hosts, then its plan's host name ``named[j][i]`` when it
    has one (what a failure trace's instance names are matched against:
    :meth:`sim.traces.TraceReplay.by_name`)."""
    return [(replica_name(j, i),) + ((hosts[j][i],) if hosts else ())
            + ((named[j][i],) if named and named[j][i] is not None else ())
            for j, r in enumerate(replicas) for i in range(r)]


def host_groups(config: Any) -> list[list[int]]:
    """The workers (stage-major indices) on each host, hosts in the order of their first
    worker: the plan's hosts (``config.trace_hosts``) holding several replicas, every other
    worker a host of its own. The job engine's unit of failure: a host replays one trace slot
    (or its instance by name), has one availability process and one spot slot."""
    named = config.trace_hosts
    groups: list[list[int]] = []
    at: dict[str, int] = {}
    k = 0
    for j, r in enumerate(config.replicas):
        for i in range(r):
            host = named[j][i] if named is not None else None
            if host is None or host not in at:
                if host is not None:
                    at[host] = len(groups)
                groups.append([k])
            else:
                groups[at[host]].append(k)
            k += 1
    return groups


def _per(name: str, value: Any, n: int, conv) -> tuple:
    if isinstance(value, (list, tuple)):
        check(len(value) == n, name, f"one value or {n} values", value)
        return tuple(conv(name, v) for v in value)
    return (conv(name, value),) * n


def _hops(name: str, value: Any, n: int, r: int) -> tuple:
    """Per hop a non-negative size, or per hop a tuple of ``r`` sizes (one per pipeline)."""
    if isinstance(value, (list, tuple)):
        check(len(value) == n, name, f"one value or {n} values", value)
        out: list[Any] = []
        for v in value:
            if isinstance(v, (list, tuple)):
                check(len(v) == r, name, f"one size per pipeline ({r}) in a hop's tuple", v)
                out.append(tuple(check_nonnegative(name, x) for x in v))
            else:
                out.append(check_nonnegative(name, v))
        return tuple(out)
    return (check_nonnegative(name, value),) * n


def dp_group_rounds(tps: Any) -> tuple[int, int]:
    """``(rounds, rings)`` of the gradient all-reduce of a stage whose replicas' TP degrees are
    ``tps``, as the Sailor artifact groups it.

    The stage has ``T = max(tps)`` data-parallel groups; group ``i`` takes from a replica of TP
    ``t`` its rank ``i // (T / t)`` (the artifact's ``deepspeed/topology.py:82-99``, its
    Megatron-DeepSpeed ``core/parallel_state.py:116-131``), so a rank of TP ``t`` is in
    ``c = T / t`` groups. It reduces them one after the other (``deepspeed/engine.py:2614-2632``:
    a loop over its groups, each ``dist.all_reduce`` then a copy back, ``2475-2505``), each group
    the same bytes per rank: the TP-split gradients' ``1/T`` and the unsplit ones whole, what a
    rank of a TP-``T`` replica holds (``2617-2631``, ``params_tp_dim_dict`` at ``129-145``).
    Group ``i`` waits for group ``i - 1`` unless every ``c`` divides ``i``: the groups form
    ``T / l`` chains of ``l = lcm(c)`` groups each, run in lockstep (alike rings, one rank of
    each replica per chain). So the stage's all-reduce is ``l`` rounds, each ``T / l``
    concurrent rings of one group's bytes per rank among the replicas. One TP degree ``t``:
    one round of ``t`` rings (every TP rank its own group), the rule of every other framework.
    Every degree must divide ``T`` (:func:`sim.profiles.build.build_plan` refuses others).
    """
    T = max(tps)
    rounds = 1
    for t in tps:
        rounds = math.lcm(rounds, T // t)
    return rounds, T // rounds


def check_bucket_count(name: str, value: Any, buckets: float, rings: int, what: str) -> None:
    """Refuse a bucket size (``value`` of ``name``) whose all-reduce, cut into ``buckets``
    buckets (of ``what``) on each of ``rings`` rings, needs more memory than there is
    (:data:`BYTES_PER_BUCKET` a bucket and ring): the DES's rule, and the closed form's before
    its ring law sums the buckets one by one (:func:`sim.profiles.build.check_buckets`)."""
    need = buckets * rings * BYTES_PER_BUCKET
    if need <= NEVER_PROBED:  # (a smaller need is had: see sim.errors.NEVER_PROBED)
        return
    avail = available_memory()
    check(need <= avail, name, f"large enough for the buckets of an all-reduce to fit in memory "
          f"({buckets:.3g} buckets of {what} need about {format_bytes(need)}, "
          f"{format_bytes(avail)} available)", value)


def pipe_group_chains(groups: int, sender: int, receiver: int) -> tuple[int, int]:
    """``(chains, messages)`` of one micro-batch's activation (or gradient) over a hop from a
    replica of TP ``sender`` to one of TP ``receiver`` in a pipeline of ``groups`` pipeline
    groups, as the Sailor artifact sends it.

    Pipeline group ``g`` (of ``T = groups``, the pipeline's largest TP degree) takes from a
    replica of TP ``t`` its rank ``g // (T / t)`` (``deepspeed/topology.py:103-127``). A
    sending rank sends its part once per group it is in, in group order, each a blocking
    ``dist.send`` (``deepspeed/pipe_engine.py:1069-1071`` activations, ``1123-1125``
    gradients; ``deepspeed/p2p.py:72-94``), and a receiving rank posts one blocking
    ``dist.recv`` per group in group order (``pipe_engine.py:1150-1162``, ``1215-1220``;
    ``p2p.py:122-144``). So message ``g`` moves once the previous message of its sender rank
    and of its receiver rank have arrived. With degrees that divide each other (the artifact's
    1, 2 and 4) the ranks of the smaller degree ``k = min(sender, receiver)`` each exchange
    ``T / k`` consecutive groups with ranks of the other side, which share no rank with
    another such block: ``k`` chains at once, each ``T / k`` messages one after the other.
    Sender larger (an activation from TP 2 to TP 1): the receiving rank takes the sending
    ranks' messages in turn, each sender waiting for its turn; sender smaller: the sending
    rank sends to the receiving ranks in turn. One degree ``t = T`` on both sides: ``t``
    messages at once, one per rank (every other framework's rule).
    """
    k = min(sender, receiver)
    check(groups % sender == 0 and groups % receiver == 0
          and max(sender, receiver) % k == 0, "tensor_parallel",
          f"TP degrees that divide each other and the pipeline's largest ({groups}) with "
          "pipe_groups", (sender, receiver))
    return k, groups // k


def _grid(name: str, value: Any, counts: tuple[int, ...], conv) -> tuple[tuple[float, ...], ...]:
    """A per-replica table ``value[j][i]``, shaped like ``counts``."""
    check(isinstance(value, (list, tuple)) and len(value) == len(counts), name,
          f"one row per stage ({len(counts)})", value)
    rows = []
    for j, (row, r) in enumerate(zip(value, counts, strict=True)):
        check(isinstance(row, (list, tuple)) and len(row) == r, name,
              f"{r} values for stage {j}", row)
        rows.append(tuple(conv(name, v) for v in row))
    return tuple(rows)


def _host_name(name: str, value: Any) -> str | None:
    """A host's name (text) or None (a replica with no host named)."""
    check(value is None or isinstance(value, str) and value != "", name,
          "a host name (text) or None", value)
    return value


def _pair_grid(name: str, value: Any, counts: tuple[int, ...]
               ) -> tuple[tuple[tuple[float, float], ...], ...]:
    """A table ``value[j][i] = (a, b)`` of non-negative pairs, shaped like ``counts``."""
    check(isinstance(value, (list, tuple)) and len(value) == len(counts), name,
          f"one row per stage or hop ({len(counts)})", value)
    rows = []
    for j, (row, r) in enumerate(zip(value, counts, strict=True)):
        check(isinstance(row, (list, tuple)) and len(row) == r, name, f"{r} pairs in row {j}", row)
        out = []
        for pair in row:
            check(isinstance(pair, (list, tuple)) and len(pair) == 2, name, "(a, b) pairs", pair)
            out.append((check_nonnegative(name, pair[0]), check_nonnegative(name, pair[1])))
        rows.append(tuple(out))
    return tuple(rows)


def read_speeds(path: str | Path, stages: int) -> tuple[tuple[tuple[float, ...], ...],
                                                        tuple[tuple[float, ...], ...] | None]:
    """Read a CSV of per-replica speeds (and optional prices).

    The file has a header with columns ``stage,replica,speed`` and optionally
    ``price`` (per worker-hour). Stages are ``0..stages-1``; the replicas of
    each stage are ``0..r_j-1`` with no gap.

    Returns
    -------
    (speeds, prices)
        ``speeds[j][i]`` and ``prices[j][i]`` (None without a price column).

    Raises
    ------
    ConfigError
        Naming ``speeds`` for a missing file, a malformed row, a non-positive
        speed, a stage beyond ``stages``, or a missing or duplicated
        ``(stage, replica)``.
    """
    L = check_int("stages", stages, low=1)
    p = Path(path)
    fh = io.StringIO(read_csv_text("speeds", p), newline="")
    table: dict[tuple[int, int], tuple[float, float | None]] = {}
    with fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        check({"stage", "replica", "speed"} <= cols, "speeds",
              "a CSV file with columns stage,replica,speed", f"{path} (columns: {sorted(cols)})")
        priced = "price" in cols
        for lineno, row in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            try:
                j, i = ascii_int(row["stage"]), ascii_int(row["replica"])
                v = ascii_float(row["speed"])
                price = ascii_float(row["price"]) if priced else None
            except (TypeError, ValueError):
                raise ConfigError("speeds", "a CSV file of integer stage,replica and numeric "
                                  "speed,price", where) from None
            check(0 <= j < L, "speeds", f"a CSV file with stages in [0, {L - 1}] (--stages {L})",
                  f"{where} (stage {j})")
            check(i >= 0, "speeds", "a CSV file with replicas >= 0", f"{where} (replica {i})")
            check(math.isfinite(v) and v > 0, "speeds", "a CSV file of speeds > 0",
                  f"{where} (speed {row['speed']})")
            if price is not None:
                check(math.isfinite(price) and price >= 0, "speeds", "a CSV file of prices >= 0",
                      f"{where} (price {row['price']})")
            check((j, i) not in table, "speeds", "a CSV file with each (stage, replica) once",
                  f"{where} (stage {j}, replica {i} duplicated)")
            table[(j, i)] = (v, price)
    speeds, prices = [], []
    for j in range(L):
        n = 1 + max((i for (jj, i) in table if jj == j), default=-1)
        check(n > 0, "speeds", "a CSV file with every stage", f"{path} (stage {j} missing)")
        for i in range(n):
            check((j, i) in table, "speeds", "a CSV file with replicas 0..r-1 of every stage",
                  f"{path} (stage {j}, replica {i} missing)")
        speeds.append(tuple(table[(j, i)][0] for i in range(n)))
        prices.append(tuple(table[(j, i)][1] for i in range(n)))
    return tuple(speeds), (tuple(prices) if priced else None)  # type: ignore[return-value]


#: The fields of :class:`TrainingConfig` that take a time (in the run's time units: seconds
#: unless ``hour`` says otherwise), a size (bytes) or a rate (bytes per time unit); each takes a
#: plain number as before or a text with a unit (``sim.units``), as the CLI options do.
QUANTITY_FIELDS = {
    **dict.fromkeys(("forward_time", "backward_times", "latency", "optimizer_time",
                     "mean_downtime", "domain_downtime", "mtbf", "replace_time",
                     "detection_timeout", "max_wait", "checkpoint_cost", "restart_cost",
                     "max_time", "notice", "stall_limit"), TIME),
    **dict.fromkeys(("param_size", "activation_size", "bucket_size", "tied_allreduce_size"),
                    SIZE),
    **dict.fromkeys(("bandwidth", "nic"), RATE),
}


def _read_units(c: Any) -> None:
    """Replace every text with a unit in ``c``'s :data:`QUANTITY_FIELDS` (a tuple's items too)
    by its value in base units; plain numbers, and texts without a unit, stay as given (the
    checks that follow judge them). A time or rate with a unit is in seconds, so it is refused
    unless ``hour`` is 3600 (the time unit a second), as ``dtsim train --hour`` refuses it."""
    timed = []

    def read(name: str, kind: str, v: Any) -> Any:
        if not (isinstance(v, str) and written_with_unit(v)):
            return v
        q = parse_quantity(v, kind, name)
        if kind in (TIME, RATE):
            timed.append(q)
        return q.value

    for name, kind in QUANTITY_FIELDS.items():
        v = getattr(c, name)
        new = (tuple(read(name, kind, x) for x in v) if isinstance(v, tuple)
               else read(name, kind, v))
        if new is not v and new != v:
            object.__setattr__(c, name, new)
    hour = c.hour
    if timed and not (_is_number(hour) and float(hour) == 3600.0):
        raise ConfigError("hour", f"3600 (time units of one second) when a rate or time is "
                          f"given with a unit ({timed[0].text.strip()})", hour)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class TrainingConfig:
    """One pipeline-training system (validated on construction; values only).

    Parameters
    ----------
    stages : int
        Pipeline stages ``L``.
    replicas : int, tuple of int or None
        Replicas per stage (default 1, or the counts of ``speeds``/``placement``).
    microbatches : int
        Microbatches per step ``m`` (>= 1).
    steps : int
        Training steps ``N`` to finish (async: ``N m`` microbatches).
    schedule : {"gpipe", "1f1b", "1f1b-dynamic", "interleaved", "swarm", "async"}
        ``1f1b`` is Megatron-LM's and DeepSpeed's fixed per-stage order;
        ``1f1b-dynamic`` the rule that takes a queued backward first;
        ``interleaved`` Megatron-LM's interleaved 1F1B over ``virtual_stages``
        model chunks per device (see :mod:`sim.training.schedules`).
    routing : {"queue", "least-loaded", "weighted", "round-robin", "least-assigned-time", "trainer-balancer"}
        See :data:`PAIRS` for which schedule has which; ``trainer-balancer`` is SWARM's
        client balancer, one a trainer at each stage
        (:class:`sim.training.routing.TrainerBalancer`), ``least-assigned-time`` its rule
        with one balancer a stage (:class:`sim.training.routing.LeastAssignedTime`).
    forward_time : float or tuple of float
        Nominal forward time per stage (>= 0; 0 with no backward is Study A's snapshot); a replica of speed ``v`` takes ``t / v``.
    backward_ratio : float
        Backward time over forward time (>= 0; 0 means forward passes only).
    backward_times : float, tuple of float or None
        Nominal backward time per stage, replacing ``backward_ratio`` (which
        must then stay at its default).
    pass_time_distribution : {"deterministic", "exponential", "weibull", "lognormal", "pareto"}
        Law of a pass's nominal time (mean the stage's time).
    pass_time_shape : float or None
        Weibull shape (default 0.7), lognormal sigma (default 1) or Pareto
        tail index ``alpha > 1`` (required) of the pass-time law.
    speeds : tuple of tuple of float or None
        ``speeds[j][i]`` of each replica (default all 1).
    speed_spread : float
        Without ``speeds``: each replication draws speeds lognormal of mean 1
        and this sigma (0: all 1).
    param_size, activation_size : float
        Parameters of a stage and activations of a microbatch (size units).
    bandwidth, latency : float
        Links: a transfer of size ``S`` takes ``latency + S / bandwidth``;
        ``latency`` may be one value per hop (``L - 1``).
    sync : str
        ``KIND[:key=value,...]`` (:func:`sim.training.sync.parse_sync`; kept as
        its canonical text): ``allreduce`` (default), the ring all-reduce of
        ``param_size`` among the replicas of each stage that took part in the
        step, after its backward passes (``overlap=none``) or bucket by bucket
        as the last backward pass produces the gradients (``overlap=backward``,
        buckets of ``bucket_size`` or the framework's); ``none``; or
        ``diloco:every=H[,fragments=P,order=...,overlap=TAU,bits=B,topk=F,groups=M,
        quorum=K,grace=W]``: DiLoCo's outer loop across groups of pipelines
        (:mod:`sim.training.outer`).
    optimizer_time : float
        Time of the optimizer step after the sync.
    p2p : {"overlap", "blocking", "shared", "batched"}
        Point-to-point transfers: ``overlap``, on a communication stream beside
        the compute (the hop time delays the micro-batch only), one at a time
        per sender, receiver and stream in issue order (FIFO channels,
        :mod:`sim.network.channels`); ``blocking`` both ends; ``shared``, in
        flight as ``overlap`` but each on a connection of its own (no queue:
        without a network each transfer takes its hop time whatever else
        moves, over one concurrent transfers share the links max-min; the
        model the channels replaced). Without a network, blocking is
        DeepSpeed's paired send and receive in its ``TrainSchedule`` order (run
        by :class:`sim.training.framework.FrameworkFlow`); with one, see
        ``p2p`` below the network fields. ``batched``: Megatron-LM's
        non-interleaved 1F1B order, where the steady state posts a send and the
        receive of the other direction together and waits for both
        (:func:`sim.training.schedules.megatron_program`; schedule ``1f1b``
        only, always on the framework engine, with or without a network).
    virtual_stages : int
        Model chunks per device ``v`` of the interleaved schedule (1 otherwise);
        each chunk pass takes ``1/v`` of the stage's time.
    replica_times : tuple of tuple of (float, float) or None
        Nominal (forward, backward) time of every replica ``[j][i]``, replacing
        the stage's times (heterogeneous replicas, e.g. a plan's GPU types).
    recv_gather_times : tuple of tuple of float or None
        With ``replica_times``, schedule ``1f1b`` and ``p2p="blocking"`` on the
        framework engine: per replica ``[j][i]``, the all-gather a device runs
        before each blocking receive of its gradient, after the step's
        activation send, in DeepSpeed 0.3.13's own step order (its
        ``_exec_recv_grads`` rebuilds the partitioned output first: a ``G``
        command of :func:`sim.training.schedules.deepspeed_program`); not part
        of the backward time. None: no such command (every other framework).
    transfer_times : tuple of tuple of (float, float) or None
        Per hop ``j -> j+1`` and per pipeline ``i``: (activation, gradient)
        transfer time, replacing ``latency`` and ``activation_size``; the
        overlapped engine of fixed pipelines uses the slowest pipeline's time
        of each hop, the framework engine each pipeline's own.
    allreduce_times : tuple of float or None
        Per stage: the time of its gradient all-reduce among its replicas
        (computed from a network), replacing the ring model of ``param_size``;
        the step's tail is ``tied_allreduce_time + max_j (allreduce_j +
        optimizer_j)``.
    optimizer_times : tuple of float or None
        Per stage: its optimizer step (with ``allreduce_times``).
    tied_allreduce_time : float
        The all-reduce of weights tied between the first and last stage (an
        embedding shared with the output head), before the gradient all-reduce
        (``tied_first``; after it otherwise).
    allreduce_barrier : bool
        With a plan's all-reduce (``allreduce_times`` or ``allreduce_sizes``):
        every stage starts its collectives when every device has ended its
        program (True: the Sailor artifact's ``dist.barrier()`` after the tied
        all-reduce), or each stage when its own devices have ended theirs
        (False: upstream DeepSpeed's ``TrainSchedule`` and Megatron-LM; the tied
        all-reduce of pipeline ``k`` joins its first and last stage only). The
        step ends when every stage's optimizer step has. False runs on the
        framework engine (it needs each device's program).
    tied_first : bool
        Without the barrier: the tied all-reduce before the stage's gradient
        all-reduce (DeepSpeed's ``ReduceTiedGrads`` then ``ReduceGrads``) or
        after it (Megatron-LM's ``finalize_model_grads``).
    optimizer_barrier : bool
        Every stage's optimizer step waits for every stage to have reduced its
        gradients (the gradient norm's or overflow flag's all-reduce over the
        pipeline's model-parallel group: Megatron-LM's default gradient
        clipping, DeepSpeed in fp16 and bf16, the Sailor artifact's after its
        barrier too), or starts after its own (False).
    tied_allreduce_times : tuple of float or None
        Per pipeline: its tied all-reduce (its first and last stage's GPUs and
        link; ``tied_allreduce_time`` is their largest). Without the barrier a
        pipeline's starts when its own two devices end, so its own time counts;
        with it every pipeline's starts at once and the largest ends it. None:
        ``tied_allreduce_time`` for every pipeline.
    allreduce_buckets : tuple of tuple of (float, float) or None
        With ``allreduce_times`` and ``sync`` ``allreduce:overlap=backward`` (a
        plan's all-reduce overlapped with its last backward pass, in its closed
        form): per stage, each bucket's (bytes per GPU, all-reduce time) in the
        order the backward pass produces them (none: the stage all-reduces
        nothing); the step's tail is then the exposed all-reduce time
        (:func:`sim.analytic.training.overlapped_exposed_time`), then
        ``tied_allreduce_time + max_j optimizer_j``. Only the closed form (the
        ``schedule`` reference) answers it: the DES times a plan's buckets over
        its network (``allreduce_sizes``).
    transfer_sizes, allreduce_sizes, tied_allreduce_size
        With a network, what a plan moves through it instead of the times
        above: per hop, the bytes of one micro-batch's activation (and of its
        gradient back), sent as ``t`` flows of ``1/t`` by the sender's
        ``tensor_parallel`` ranks; per stage, the bytes of gradients each GPU
        all-reduces among the stage's replicas (``t`` rings, buckets of
        ``bucket_size``); and the tied weights' bytes per GPU, all-reduced
        between the first and last stage of each pipeline first. Such a plan
        runs on the framework engine.
    reduce_scatter : bool
        With ``allreduce_sizes``: each stage's gradients (and each overlapped bucket)
        reduce-scattered over the network instead, the ring all-reduce's first ``k - 1``
        steps (Megatron-LM's distributed optimizer, whose all-gather of the parameters is in
        ``optimizer_times``).
    trace_hosts : tuple of tuple or None
        The physical host each replica runs on (``[stage][replica]``, text or None), as a
        plan names it (``host``): a replayed trace whose instances are named as these hosts
        is replayed by name (:attr:`trace_names`), as one named as ``network_nodes`` is.
        Nothing else reads it. None: no host names.
    group_steps : tuple or None
        With a plan and ``sync`` diloco: per DiLoCo group, ``(field, value)`` pairs of the
        fields above that time its step (:data:`sim.training.outer.GROUP_STEP_FIELDS`), from
        the plan cut to the group's replicas (:func:`sim.profiles.build.group_plan`): each
        group is its own data-parallel job, whose framework's collectives over the
        data-parallel group (and its optimizer-state partition) span its replicas only.
        None: every group takes the config's own.
    gradient_transfer_sizes : tuple of float or None
        With ``transfer_sizes``: per hop, the bytes of one micro-batch's
        gradient sent back, where they differ from its activation's (the
        Sailor artifact's engine sends once per pipeline group: more when the
        stages' TP degrees differ); None: the same. A hop's entry of either may be a
        tuple of one size per pipeline (its replicas' TP degrees differ:
        :meth:`hop_size`).
    meta_sizes, gradient_meta_sizes : tuple of float or None
        With ``transfer_sizes``: per hop (a hop's entry may be a tuple, one per
        pipeline), the bytes of the message each of the sender's ranks sends
        before its part of one micro-batch's activation (``gradient_meta_sizes``:
        of its gradient; None: as ``meta_sizes``), a transfer of its own on the
        same channel, each rank's part after it: DeepSpeed's partition metadata
        (:func:`sim.profiles.build.partition_meta_bytes`); 0 or None: none.
    mask_sizes : tuple of float or None
        With ``transfer_sizes``: per hop (a hop's entry may be a tuple, one per
        pipeline), the bytes of the messages the sender's ``t`` ranks send after
        their parts of one micro-batch's activation, ``1/t`` of it from each rank,
        each a transfer of its own on the same channel after the rank's part: the
        attention mask DeepSpeed 0.3.13 sends whole from every TP rank
        (:func:`sim.profiles.build.mask_message_bytes`); never with the gradient;
        0 or None: none.
    availability, mean_downtime, domain_outage, domain_downtime,
    failure_distribution, failure_shape, placement, failure_trace
        The failure model of :mod:`sim.failures` (as in Study A's pipeline);
        ``failure_trace`` is either the path of a CSV of down intervals of
        workers named ``s{j}r{i}`` (replayed by name; workers it does not list
        follow the availability model), or a :class:`sim.traces.TraceReplay`
        of any trace (shipped or a file of any format sim.traces reads):
        worker ``s{j}r{i}`` replays slot ``k`` in stage-major order, the
        ``domain`` policy's domains are the stages, more workers than the
        trace's slots are refused unless the policy tiles, ``availability``
        must stay 1, and a finite ``max_time`` must fit in the replay.
    mtbf, replace_time : float
        Spot model: each worker is preempted after an exponential time of mean
        ``mtbf`` (inf: never) and replaced ``replace_time`` later.
    detection_timeout : float
        Time before a lost pass is re-queued.
    skip_budget, skip_penalty, penalty
        Study A's skip rule and quality penalty.
    max_wait : float
        Wait at an out stage once the skip budget is spent (may be inf: stall).
    checkpoint_every, checkpoint_cost, restart_cost
        Checkpoint every K steps (0: never) costing C; a lost step restarts
        from the last checkpoint after ``restart_cost`` (None: no restart model).
    price : float, tuple of tuple of float or None
        Price per worker-hour (one value, or per replica). A worker is billed
        while its instance exists: not while a spot slot waits for its
        replacement, nor while a replayed trace has it down
        (:mod:`sim.training.billing`).
    price_series : sim.training.billing.PriceSeries or None
        A price per worker-hour that changes over time (instead of ``price``):
        each worker pays the integral of the series over its billed time.
    samples_per_microbatch : float
        Samples in one microbatch.
    hour : float
        Time units in an hour (default 3600: times in seconds).
    arrival : {"saturated", "poisson", "fixed"}
        Async only: all microbatches available at once, or arriving at
        ``arrival_rate`` (Poisson or evenly spaced).
    arrival_rate : float
    max_time : float
        Stop the run at this simulated time even if ``N`` steps are not done
        (inf: run to the end); the metrics then say ``finished = 0``, and
        throughput and cost are over the time run.
    strategy : str, sim.training.strategies.Strategy or None
        A fault-tolerance strategy (``name[:key=value,...]`` or a strategy
        object; :mod:`sim.training.strategies`): ``swarm`` runs on this DES
        (the swarm schedule's rewiring); ``checkpoint-restart``, ``redundancy``
        and ``reconfiguration`` on the step-level job engine, with their own
        checkpoints and restarts (``checkpoint_every`` and ``restart_cost`` stay
        unset) and equal replica counts. None: today's behaviour.
    step_times : sim.training.strategies.StepTimes, str or None
        Measured step times by workers held or by pipelines (a table or a CSV
        path) for a step-level strategy, or a plan's timer of formations
        (:class:`sim.profiles.formations.PlanStepTimes`, ``dtsim train --plan``); None: the DES's
        failure-free steps.
    notice : float
        A preemption (a replayed trace's, or the spot model's) is announced this
        long ahead (AWS 120 s, GCP 30 s); a strategy may use it. 0: none.
    network : str, NetworkValue or None
        The network every transfer crosses (:mod:`sim.network`): a topology
        spec or graph file, or a :class:`~sim.network.NetworkValue`. None: each
        transfer has a link of its own (``latency + size / bandwidth``).
    network_nodes : tuple of tuple or None
        With a network, the node of each replica (``[stage][replica]``);
        default: the network's hosts (nodes that are not switches) in order,
        replica ``k`` (stage-major) on host ``k``.
    tensor_parallel : int or tuple of tuple of int
        Tensor-parallel ranks of each replica (equal within a stage): a
        transfer of ``size`` between stages is ``t`` concurrent flows of
        ``size / t`` (the sender's ``t``), and the gradient all-reduce is ``t``
        rings of ``param_size / t``, all through the node's NIC. With a plan's
        ``allreduce_sizes`` a stage's replicas may differ (each degree a divisor of
        the stage's largest): its all-reduce is then the Sailor artifact's
        data-parallel groups (:func:`dp_group_rounds`), a hop's flows its sender's.
    pipe_groups : bool
        With a plan's ``transfer_sizes``: each pipeline's hops are the Sailor
        artifact's pipeline groups (as many as the pipeline's largest TP degree
        ``T``): a hop's ``hop_size`` is ``T`` messages of ``hop_size / T``,
        ``min(t_a, t_b)`` chains at once of ``T / min(t_a, t_b)`` messages one
        after the other (:func:`pipe_group_chains`). False: the sender's ``t``
        ranks send ``hop_size / t`` each, all at once. One TP degree per
        pipeline: the same.
    nic : float, BandwidthCurve or None
        NIC capacity (egress and ingress each) of every host of the network
        that has none.
    bucket_size : float
        The all-reduce works in buckets of this size (per rank; inf: one).
    contention : bool
        With a network: transfers share its links (max-min fair flows). False:
        each transfer alone on its route (``latency + size / bottleneck``).
    p2p (with a network) : {"overlap", "blocking"}
        Transfers between stages overlap with compute (the sender goes on at
        once, the receiver queues the microbatch on arrival), or block both
        ends for the transfer (NCCL send/recv: the transfer starts when the
        receiver is free and holds both replicas until it ends).
    network_weighting : {"maxmin", "rtt"}
        Sharing rule of the network (plain max-min, or SimGrid CM02's 1/RTT).
    checkpoint_node : hashable or None
        With a network: checkpoints write every stage's parameters (from its
        lowest-index live replica) to this node over the network, on top of
        ``checkpoint_cost``; a replica with no live peer downloads from it.
    stall_limit : float or None
        A run with a restart model (or an unbounded ``max_wait``) that makes no
        progress (no checkpoint, no step beyond the best reached) for this
        simulated time stops, ``finished = 0``, and its record says why
        (``stall_reason``; :mod:`sim.training.stall`). None: 1000 failure-free
        checkpoint intervals; inf: never.
    value_bits : int
        Bits a value has in the sizes given (``param_size`` and a plan's sizes;
        default 16: bf16/fp16), for DiLoCo's payload ``bits / value_bits``.
    sync_wait : int or None
        Fastest ``K`` of ``n``: each step ends, and its all-reduce runs, once
        the first ``K`` of the ``n`` pipelines (replica ``i`` of every stage:
        one stage of ``n`` replicas is ``n`` data-parallel workers) have
        finished their share of the step's microbatches (GPipe and 1F1B,
        ``1 <= K <= n``, as many replicas at every stage). None: wait for all.
        The step's samples are those of the ``K`` pipelines; the others'
        microbatches count as dropped.
    stragglers : {"cancel", "drop"}
        With ``sync_wait``: what the other pipelines do. ``cancel``: their
        passes in service are interrupted and their queued passes dropped, so
        the next step starts on every replica at once (interruptible kernels).
        ``drop``: their passes in service run to the end and are thrown away
        (non-interruptible kernels), so a straggler starts the next step late.
        Either way the thrown-away work is charged to ``lost_pass``.
    """

    stages: int = 4
    replicas: int | tuple[int, ...] | None = None
    microbatches: int = 8
    steps: int = 10
    schedule: str = "gpipe"
    routing: str = "round-robin"
    forward_time: float | tuple[float, ...] = 1.0
    backward_ratio: float = 2.0
    pass_time_distribution: str = "deterministic"
    speeds: tuple[tuple[float, ...], ...] | None = None
    speed_spread: float = 0.0
    param_size: float = 0.0
    activation_size: float = 0.0
    bandwidth: float = math.inf
    latency: float | tuple[float, ...] = 0.0
    sync: str = "allreduce"
    optimizer_time: float = 0.0
    backward_times: float | tuple[float, ...] | None = None
    p2p: str = "overlap"
    virtual_stages: int = 1
    replica_times: tuple[tuple[tuple[float, float], ...], ...] | None = None
    recv_gather_times: tuple[tuple[float, ...], ...] | None = None
    transfer_times: tuple[tuple[tuple[float, float], ...], ...] | None = None
    allreduce_times: tuple[float, ...] | None = None
    optimizer_times: tuple[float, ...] | None = None
    tied_allreduce_time: float = 0.0
    allreduce_barrier: bool = True
    tied_first: bool = True
    optimizer_barrier: bool = False
    allreduce_buckets: tuple[tuple[tuple[float, float], ...], ...] | None = None
    tied_allreduce_times: tuple[float, ...] | None = None
    transfer_sizes: tuple[float, ...] | None = None
    gradient_transfer_sizes: tuple[float, ...] | None = None
    meta_sizes: tuple[float, ...] | None = None
    gradient_meta_sizes: tuple[float, ...] | None = None
    mask_sizes: tuple[float, ...] | None = None
    allreduce_sizes: tuple[float, ...] | None = None
    tied_allreduce_size: float = 0.0
    availability: float = 1.0
    mean_downtime: float = 1.0
    domain_outage: float = 0.0
    domain_downtime: float = 1.0
    failure_distribution: str = "exponential"
    failure_shape: float | None = None
    placement: Any = None
    failure_trace: Any = None
    mtbf: float = math.inf
    replace_time: float = 0.0
    detection_timeout: float = 0.0
    skip_budget: int = 0
    skip_penalty: float = 0.0
    penalty: str = "multiplicative"
    max_wait: float = 0.0
    checkpoint_every: int = 0
    checkpoint_cost: float = 0.0
    restart_cost: float | None = None
    price: float | tuple[tuple[float, ...], ...] | None = None
    price_series: Any = None
    samples_per_microbatch: float = 1.0
    hour: float = 3600.0
    arrival: str = "saturated"
    arrival_rate: float = 1.0
    max_time: float = math.inf
    strategy: Any = None
    step_times: Any = None
    notice: float = 0.0
    network: Any = None
    network_nodes: Any = None
    tensor_parallel: int | tuple[tuple[int, ...], ...] = 1
    pipe_groups: bool = False
    nic: Any = None
    bucket_size: float = math.inf
    contention: bool = True
    network_weighting: str = "maxmin"
    checkpoint_node: Any = None
    stall_limit: float | None = None
    pass_time_shape: float | None = None
    sync_wait: int | None = None
    stragglers: str = "cancel"
    value_bits: int = 16
    reduce_scatter: bool = False
    group_steps: tuple[tuple[tuple[str, Any], ...], ...] | None = None
    trace_hosts: Any = None

    def __post_init__(self) -> None:
        _read_units(self)  # "30min", "2.6GB", "400Mbit/s": the numbers they are, as the CLI reads them
        L = check_int("stages", self.stages, low=1)
        check_memory("stages", L, L * BYTES_PER_STAGE)  # before the per-stage tuples
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        counts: tuple[int, ...] | None = None
        if self.placement is not None:
            pl = from_value(self.placement)
            check(len(pl.replica_domains) == L, "placement", f"{L} stages", len(pl.replica_domains))
            set_("placement", pl.value())
            counts = pl.replicas
        if self.speeds is not None:
            rows = speed_rows(self.speeds, L)
            sc = tuple(len(r) for r in rows)
            check(counts is None or sc == counts, "speeds", f"the placement's counts {counts}", sc)
            counts = sc
            set_("speeds", tuple(rows))
        if self.replicas is not None:
            given = _per("replicas", self.replicas, L, lambda n, v: check_int(n, v, low=1))
            check(counts is None or given == counts, "replicas",
                  f"unset or the speeds'/placement's counts {counts}", self.replicas)
            counts = given
        set_("replicas", counts if counts is not None else (1,) * L)
        check_int("microbatches", self.microbatches, low=1)
        reps = self.replicas
        check_memory_terms([  # what one replication builds: stages, workers, a step's microbatches
            ("stages", L, L * BYTES_PER_STAGE),
            ("replicas", reps[0] if len(set(reps)) == 1 else reps,  # type: ignore[arg-type,index]
             sum(reps) * BYTES_PER_WORKER),  # type: ignore[arg-type]
            ("microbatches", self.microbatches, self.microbatches * BYTES_PER_MICROBATCH),
        ])
        check_int("steps", self.steps, low=1)
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("routing", self.routing, ROUTINGS)
        check(self.routing in PAIRS[self.schedule], "routing",
              f"one of {', '.join(PAIRS[self.schedule])} with schedule {self.schedule}",
              self.routing)
        set_("forward_time", _per("forward_time", self.forward_time, L, check_nonnegative))
        check_nonnegative("backward_ratio", self.backward_ratio)
        check_choice("pass_time_distribution", self.pass_time_distribution, PASS_TIME_DISTRIBUTIONS)
        if self.pass_time_shape is not None:
            check_positive("pass_time_shape", self.pass_time_shape)
        if self.pass_time_distribution != "deterministic":
            check_law("pass_time_distribution", self.pass_time_distribution, "pass_time_shape",
                      self.pass_time_shape)
        check_nonnegative("speed_spread", self.speed_spread)
        check(self.speed_spread <= SPEED_SPREAD_LIMIT, "speed_spread",
              f"at most {SPEED_SPREAD_LIMIT:g} (drawn speeds exp(-s^2/2 +- 8 s) within e^+-360)",
              self.speed_spread)
        check(self.speeds is None or self.speed_spread == 0, "speed_spread",
              "0 when speeds are given", self.speed_spread)
        for name in ("param_size", "activation_size", "optimizer_time", "replace_time",
                     "detection_timeout", "checkpoint_cost"):
            check_nonnegative(name, getattr(self, name))
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        set_("latency", _per("latency", self.latency, max(L - 1, 1), check_nonnegative)
             if isinstance(self.latency, (list, tuple)) else check_nonnegative("latency", self.latency))
        set_("sync", parse_sync(self.sync).text)
        check_int("value_bits", self.value_bits, low=1)
        self._check_real_run(L)
        check_probability("availability", self.availability)
        check_positive("mean_downtime", self.mean_downtime)
        check_probability("domain_outage", self.domain_outage)
        check_positive("domain_downtime", self.domain_downtime)
        check_choice("failure_distribution", self.failure_distribution, DISTRIBUTIONS)
        if self.failure_shape is not None:
            check_shape("failure_shape", self.failure_distribution, self.failure_shape)
        check_law("failure_distribution", self.failure_distribution, "failure_shape",
                  self.failure_shape)
        if isinstance(self.failure_trace, str):  # a CSV of named workers s{j}r{i}
            try:
                trace = read_trace(self.failure_trace)
            except ConfigError as exc:  # name this config's field, not read_trace's argument
                raise ConfigError("failure_trace", exc.rule, exc.value) from None
            names = {replica_name(j, i) for j, r in enumerate(self.replicas) for i in range(r)}
            extra = sorted(set(trace.workers) - names)
            check(not extra, "failure_trace", "a trace of workers s{stage}r{replica} of this "
                  "pipeline", f"{self.failure_trace} ({extra[0] if extra else ''})")
        elif self.failure_trace is not None:  # any trace, replayed through its mapping policy
            from ..traces import TraceReplay

            check(isinstance(self.failure_trace, TraceReplay), "failure_trace",
                  "a CSV path of workers s{stage}r{replica} or a sim.traces.TraceReplay",
                  self.failure_trace)
            check(self.availability == 1.0, "availability",
                  "1 with a replayed failure trace (the trace sets every worker's up and "
                  "down times)", self.availability)
            if self.max_time < math.inf:
                self.failure_trace.check_horizon(self.max_time, name="max_time")
        check_positive("mtbf", self.mtbf, allow_inf=True)
        check_int("skip_budget", self.skip_budget, low=0, high=L)
        quality_table(L, self.skip_penalty, self.penalty)
        check_nonnegative("max_wait", self.max_wait, allow_inf=True)
        check_int("checkpoint_every", self.checkpoint_every, low=0)
        if self.restart_cost is not None:
            check_nonnegative("restart_cost", self.restart_cost)
        if self.checkpoint_every:
            check(self.restart_cost is not None, "checkpoint_every",
                  "0 without a restart model (give restart_cost)", self.checkpoint_every)
        if self.schedule == "async":
            check(self.checkpoint_every == 0 and self.restart_cost is None, "schedule",
                  "one with a step barrier (gpipe, 1f1b, swarm) for checkpoint and restart",
                  self.schedule)
        check_choice("arrival", self.arrival, ARRIVALS)
        check(self.arrival == "saturated" or self.schedule == "async", "arrival",
              "saturated unless schedule is async", self.arrival)
        check_positive("arrival_rate", self.arrival_rate)
        check_positive("max_time", self.max_time, allow_inf=True)
        if self.stall_limit is not None:
            check_positive("stall_limit", self.stall_limit, allow_inf=True)
        check_nonnegative("notice", self.notice)
        if self.price is not None:
            if isinstance(self.price, (list, tuple)):
                set_("price", _grid("price", self.price, self.replicas, check_nonnegative))
            else:
                check_nonnegative("price", self.price)
        if self.price_series is not None:
            from .billing import PriceSeries

            check(isinstance(self.price_series, PriceSeries), "price_series",
                  "a sim.training.billing.PriceSeries", self.price_series)
            check(self.price is None, "price", "unset with a price series (the series is the "
                  "price)", self.price)
        check_positive("samples_per_microbatch", self.samples_per_microbatch)
        check_positive("hour", self.hour)
        check_choice("stragglers", self.stragglers, STRAGGLERS)
        if self.sync_wait is None:
            check(self.stragglers == "cancel", "stragglers", "cancel (the default) unless "
                  "sync_wait is set", self.stragglers)
        else:
            check(self.schedule in ("gpipe", "1f1b"), "sync_wait",
                  "set only with schedule gpipe or 1f1b (fixed pipelines: each replica's share "
                  "of a step is fixed)", self.sync_wait)
            check(self.strategy is None, "sync_wait",
                  "set only without a strategy (the built-in step barrier waits for K)",
                  self.sync_wait)
            check(self.network is None, "sync_wait",
                  "set only without a network (its all-reduce is the ring formula over the K "
                  "pipelines)", self.sync_wait)
            check(len(set(self.replicas)) == 1, "sync_wait",  # type: ignore[arg-type]
                  "set only with as many replicas at every stage (n pipelines)", self.sync_wait)
            check_int("sync_wait", self.sync_wait, low=1, high=self.replicas[0])  # type: ignore[index]
            check(all(t > 0 for t in self.forward_time), "forward_time",  # type: ignore[union-attr]
                  "> 0 at every stage with sync_wait (a zero-time pass has no finishing order)",
                  self.forward_time)
        pl = self.domain_placement
        dead = {d for d, u in pl.domain_outage.items() if u == 1.0}
        stuck = self.availability == 0.0 or any(
            all(dead.intersection(chain) for chain in stage) for stage in pl.replica_domains)
        if stuck and self.max_wait == math.inf and self.skip_budget < L:
            check(False, "max_wait",
                  "finite when a stage never recovers (availability 0 or a domain outage of 1)",
                  self.max_wait)
        self._check_strategy()
        if stuck and self.restart_cost is not None:
            # a restart waits for every stage to have a live replica: it would never end
            check(False, "restart_cost",
                  "unset when a stage never recovers (availability 0 or a domain outage of 1)",
                  self.restart_cost)
        job = self.strategy is not None and self.strategy.engine == "job"
        if self.framework and self.failures and self.diloco is None and not job:
            # (issue 37: a DiLoCo group that fails leaves its round instead of restarting; a
            # step-level strategy runs the failures itself from the failure-free steps)
            what = ("interleaved" if self.schedule == "interleaved" else "p2p blocking"
                    if self.p2p == "blocking" else "p2p batched" if self.p2p == "batched"
                    else "a plan over a network")
            check(self.restart_cost is not None, "restart_cost",
                  f"given with failures under {what} (a framework run restarts from its last "
                  "checkpoint)", self.restart_cost)
        self._check_network()
        if self.trace_hosts is not None:
            set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
            set_("trace_hosts", _grid("trace_hosts", self.trace_hosts, self.replicas,
                                      _host_name))
        if isinstance(self.failure_trace, str) and self.strategy is not None \
                and self.strategy.engine == "job":
            hosts = host_groups(self)
            check(len(hosts) == self.workers, "failure_trace", "a trace of hosts (named as "
                  "the plan's hosts, or unnamed: slot k on host k), not a CSV of workers "
                  "s{j}r{i}, when a host holds several replicas under a step-level strategy (a "
                  "host fails whole)",
                  self.failure_trace)
        if self.failure_trace is not None and not isinstance(self.failure_trace, str):
            if self.trace_names is None:  # slot k on worker k: at most the trace's slots
                # (the job engine's slot k on host k: its workers go down together)
                self.failure_trace.check_workers(
                    len(host_groups(self)) if self.strategy is not None
                    and self.strategy.engine == "job" else self.workers)
        self._check_sync()
        self._check_diloco()
        self._check_finite()
        if self.strategy is not None:
            self.strategy.check_last(self)

    def _check_finite(self) -> None:
        """Refuse times whose run would overflow to inf (:func:`~sim.errors.check_time_terms`):
        ``steps x (microbatches + stages) x stages`` (a bound on the passes and transfers one
        after the other a run adds up) times the sum of one micro-batch's and one step's times
        (passes, latencies, transfers at ``bandwidth``, optimizer, checkpoint, restart,
        replacement, detection, downtimes). And ``samples_per_microbatch x hour`` (samples per
        hour at one micro-batch per time unit) at most :data:`~sim.errors.TIME_LIMIT`."""
        L = self.stages
        fwd = self.forward_time if isinstance(self.forward_time, tuple) else (self.forward_time,)
        bwd = (self.backward_times if isinstance(self.backward_times, tuple)
               else (self.backward_times,)) if self.backward_times is not None else \
            tuple(f * self.backward_ratio for f in fwd)
        lat = self.latency if isinstance(self.latency, tuple) else (self.latency,)
        per = lambda size: size / self.bandwidth if self.bandwidth < math.inf else 0.0  # noqa: E731
        ratio = self.backward_times is None and self.backward_ratio > max(fwd)
        terms = [("forward_time", sum(fwd) * (L if len(fwd) == 1 else 1), self.forward_time),
                 # a backward time derived by the ratio: the larger of its two factors named
                 ("backward_times" if self.backward_times is not None else
                  "backward_ratio" if ratio else "forward_time",
                  sum(bwd) * (L if len(bwd) == 1 else 1),
                  self.backward_times if self.backward_times is not None else
                  self.backward_ratio if ratio else self.forward_time),
                 ("latency", 2 * sum(lat) * (L if len(lat) == 1 else 1), self.latency)]
        for k, n in (("activation_size", 2 * L), ("param_size", 2)):
            size = getattr(self, k)  # a byte alone overflowing names the bandwidth
            terms.append(("+bandwidth", n * per(size), self.bandwidth) if size and
                         per(1.0) * n * float(self.steps) * (self.microbatches + L) * L > TIME_LIMIT
                         else (k, n * per(size), size))
        terms += [(k, getattr(self, k), getattr(self, k)) for k in (
            "optimizer_time", "replace_time", "detection_timeout", "checkpoint_cost",
            "notice", "mean_downtime", "domain_downtime")]
        if self.restart_cost is not None:
            terms.append(("restart_cost", self.restart_cost, self.restart_cost))
        if self.max_wait < math.inf:
            terms.append(("max_wait", self.max_wait, self.max_wait))
        if self.network is not None:
            # (audit5) the network's links as the latency and bandwidth terms: a route crosses
            # each link at most once (an edge list's link of latency 1e308 ran to a time to
            # train of inf); its slowest finite capacity times each size moved
            from ..network import shared_network

            net = shared_network(self.network, nic=self.nic)
            lats = [lat for lat, _r in net.link_of.values()]
            rates = [c for c, curve in zip(net.capacity, net.curve, strict=True)
                     if curve is None and c > 0]
            slow = min(rates, default=math.inf)
            moved = 2 * L * self.activation_size + 2 * self.param_size
            terms += [("network", 2 * L * sum(lats), self.network),
                      ("+network", moved / slow if moved and slow < math.inf else 0.0,
                       self.network)]
        count = float(self.steps) * (self.microbatches + L) * L
        check_time_terms(count, terms, "steps x (micro-batches + stages) x stages")
        # the same bound on the run's time in hours (what a worker is billed: time / hour): a
        # tiny hour (--hour 1e-300, a time unit of 3.6e303 s) made the worker-hours overflow,
        # and every figure per hour with them. At hour >= 1 the bound above implies it.
        hours = count * sum(t for _, t, _ in terms) / self.hour
        check(hours <= TIME_LIMIT, "hour", f"large enough that the run's time in hours stays "
              f"finite (steps x (micro-batches + stages) x stages x the sum of its times / "
              f"hour at most {TIME_LIMIT:g}; {hours:.2g} here)", self.hour)
        # samples per hour at one micro-batch per time unit: the larger factor named
        big = "hour" if self.hour > self.samples_per_microbatch else "samples_per_microbatch"
        other = "samples_per_microbatch" if big == "hour" else "hour"
        check(self.samples_per_microbatch * self.hour <= TIME_LIMIT, big,
              f"at most {TIME_LIMIT:g} / {other} (samples per hour stay finite)",
              getattr(self, big))

    def _check_sync(self) -> None:
        """The options of ``sync`` against the rest (after the network fields)."""
        spec = self.sync_spec
        if spec.get("bucket_size") is not None:
            check(self.bucket_size == math.inf, "bucket_size",
                  "unset (inf) when sync gives bucket_size (one bucket size)", self.bucket_size)
            # the --bucket-size rule (_check_network) for sync's bucket: 1 GB in buckets of 1e-300
            # B raised OverflowError in every replication, in 1 B buckets it took 20 GB and ran on
            tp = self.tensor_parallel
            tmax = max(max(row) for row in tp) if isinstance(tp, tuple) else tp
            largest = max([self.param_size, self.tied_allreduce_size,
                           *(self.allreduce_sizes or ())]) / tmax
            check_bucket_count("sync", self.sync, largest / spec.get("bucket_size"), tmax,
                               "the largest all-reduce")
        if spec.get("overlap") != "backward":
            return
        for bad, rule in (
                (self.schedule not in ("gpipe", "1f1b"),
                 "without overlap=backward unless schedule is gpipe or 1f1b (fixed pipelines: "
                 "each replica knows its last backward pass of a step)"),
                (not self.has_backward, "without overlap=backward when there is no backward "
                 "pass (backward_ratio or backward_times 0)"),
                (self.sync_wait is not None, "without overlap=backward with sync_wait"),
                # (a plan's strategy run times its steps by the plan's own builds, whose
                # framework engine runs the overlap: sim.profiles.formations)
                (self.strategy is not None and getattr(self.step_times, "per", None)
                 != "formation", "without overlap=backward with a strategy"),
                (self.allreduce_times is not None and self.allreduce_buckets is None,
                 "without overlap=backward with allreduce_times unless allreduce_buckets "
                 "gives its buckets (a plan's buckets are timed over its network)"),
                (self.failures and not self.framework,
                 "without overlap=backward when replica servers can fail (a micro-batch "
                 "failed over to another replica moves its gradients there)")):
            check(not bad, "sync", rule, self.sync)

    def _check_real_run(self, L: int) -> None:
        """Validate the fields of framework schedules and real plans (issue 22)."""
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        fixed = self.schedule in FIXED
        if self.backward_times is not None:
            check(self.backward_ratio == 2.0, "backward_ratio",
                  "left at its default when backward_times are given", self.backward_ratio)
            set_("backward_times", _per("backward_times", self.backward_times, L,
                                        check_nonnegative))
        check_choice("p2p", self.p2p, P2PS)
        v = check_int("virtual_stages", self.virtual_stages, low=1)
        inter = self.schedule == "interleaved"
        check(inter or v == 1, "virtual_stages", "1 unless schedule is interleaved", v)
        # every worker holds v model chunks, each a stage of the device program
        check_memory("virtual_stages", v, float(v) * sum(self.replicas) * BYTES_PER_STAGE)
        framework = ((self.p2p == "blocking" and self.network is None) or inter
                     or self.p2p == "batched"
                     or self.allreduce_sizes is not None or self.allreduce_barrier is False)
        if inter and self.network is not None:
            check(False, "network", "unset with the interleaved schedule (its device programs "
                  "run on the framework engine, without a network for now)", "given")
        if self.p2p == "blocking" and self.network is None:
            check(self.schedule in ("gpipe", "1f1b"), "p2p",
                  "overlap unless schedule is gpipe or 1f1b (DeepSpeed's blocking send and "
                  "receive)", self.p2p)
        if self.p2p == "batched":
            check(self.schedule == "1f1b", "p2p", "overlap, blocking or shared unless schedule "
                  "is 1f1b (Megatron-LM's batched send/receive pairs are its non-interleaved "
                  "1F1B's)",
                  self.p2p)
        reps = self.replicas
        if framework:
            what = ("interleaved" if inter else "p2p blocking" if self.p2p == "blocking"
                    else "p2p batched" if self.p2p == "batched"
                    else "a plan over a network" if self.allreduce_sizes is not None
                    else "allreduce_barrier False")
            check(len(set(reps)) == 1, "replicas",  # type: ignore[arg-type]
                  f"the same at every stage with {what} (one device per stage per pipeline)", reps)
            r = reps[0]  # type: ignore[index]
            check(self.microbatches % r == 0, "microbatches",
                  f"a multiple of the replicas per stage ({r}) with {what}", self.microbatches)
            if inter:
                check(not isinstance(self.latency, tuple), "latency",
                      "one value with the interleaved schedule (every hop between chunks)",
                      self.latency)
                check((self.microbatches // r) % L == 0, "microbatches",
                      f"a multiple of stages x replicas ({L} x {r}) with the interleaved schedule "
                      "(Megatron-LM's condition)", self.microbatches)
            check(self.pass_time_distribution == "deterministic", "pass_time_distribution",
                  f"deterministic with {what}", self.pass_time_distribution)
            # (review of issue 35) its device programs are training schedules: every micro-batch
            # has a backward pass and sends its gradient back; the fastest-k barrier is the
            # step-level engine's, not a framework's (which waits for every replica)
            check(self.sync_wait is None, "sync_wait", f"unset with {what} (a framework's "
                  "pipeline waits for every replica of a stage: no fastest-k synchronisation)",
                  self.sync_wait)
            if not self.has_backward:
                bt = self.backward_times is not None
                check(False, "backward_times" if bt else "backward_ratio",
                      f"{'positive somewhere' if bt else '> 0'} with {what} (its device "
                      "programs are training schedules, each micro-batch's gradient sent back; "
                      "a forward-only pipeline runs with --p2p overlap)",
                      self.backward_times if bt else self.backward_ratio)
            # a framework job neither skips nor fails over: a failure loses the step
            for name, bad in (("skip_budget", self.skip_budget != 0),
                              ("max_wait", self.max_wait != 0.0),
                              ("detection_timeout", self.detection_timeout != 0.0)):
                check(not bad, name, f"0 with {what} (a framework run does not skip or fail "
                      "over: a failure loses the step)", getattr(self, name))
            check(self.routing == "round-robin", "routing",
                  f"round-robin with {what} (micro-batch k on pipeline k mod r)", self.routing)
        for name in ("replica_times", "transfer_times", "allreduce_times", "optimizer_times"):
            if getattr(self, name) is not None:
                # swarm with a strategy: a plan run as SWARM (sim.profiles.swarm), which
                # no reference or compiled engine answers (each needs no strategy)
                check(fixed or (self.schedule == "swarm" and self.strategy is not None), name,
                      "unset unless schedule is gpipe, 1f1b, 1f1b-dynamic or interleaved, or "
                      "swarm with a strategy", "given")
        if self.replica_times is not None:
            set_("replica_times", _pair_grid("replica_times", self.replica_times, reps))
        if self.recv_gather_times is not None:
            check(self.replica_times is not None and self.schedule == "1f1b"
                  and self.p2p == "blocking" and framework, "recv_gather_times",
                  "given only with replica_times, schedule 1f1b and p2p blocking on the "
                  "framework engine (DeepSpeed 0.3.13's device programs)", "given")
            g = self.recv_gather_times
            check(isinstance(g, (list, tuple)) and len(g) == L, "recv_gather_times",
                  f"one row per stage ({L})", g)
            rows = []
            for j, (row, r) in enumerate(zip(g, reps, strict=True)):  # type: ignore[arg-type]
                check(isinstance(row, (list, tuple)) and len(row) == r, "recv_gather_times",
                      f"{r} times in row {j}", row)
                rows.append(tuple(check_nonnegative("recv_gather_times", x) for x in row))
            check(not any(rows[-1]), "recv_gather_times", "0 at the last stage (it receives no "
                  "gradient)", rows[-1])
            set_("recv_gather_times", tuple(rows))
        if self.transfer_times is not None:
            check(isinstance(self.transfer_times, (list, tuple))
                  and len(self.transfer_times) == max(L * v - 1, 0), "transfer_times",
                  f"one row per hop ({max(L * v - 1, 0)})", self.transfer_times)
            set_("transfer_times", _pair_grid("transfer_times", self.transfer_times,
                                              (reps[0],) * max(L * v - 1, 0)))  # type: ignore[index]
            check(len(set(reps)) == 1, "transfer_times",  # type: ignore[arg-type]
                  "given only with the same replicas at every stage (one per pipeline)", reps)
            check(self.latency == 0.0 and self.activation_size == 0.0
                  and self.network is None, "transfer_times",
                  "given without latency, activation_size or a network", self.transfer_times)
        if self.allreduce_times is not None:
            set_("allreduce_times", _per("allreduce_times", self.allreduce_times, L,
                                         check_nonnegative))
            check(self.param_size == 0.0 and self.optimizer_time == 0.0, "allreduce_times",
                  "given with param_size and optimizer_time 0 (they replace them)",
                  self.allreduce_times)
            if self.allreduce_buckets is None:
                check(self.sync == "allreduce", "sync", "allreduce (no options) with "
                      "allreduce_times (they are the all-reduce's times)", self.sync)
            check(self.mean_latency == 0.0, "latency", "0 with allreduce_times (they give the "
                  "all-reduce; transfer_times give the hops)", self.latency)
        check(self.reduce_scatter is False or self.reduce_scatter is True and
              self.allreduce_sizes is not None, "reduce_scatter", "false, or true with "
              "allreduce_sizes (a plan over its network)", self.reduce_scatter)
        if self.optimizer_times is not None:
            check(self.allreduce_times is not None or self.allreduce_sizes is not None,
                  "optimizer_times", "given with allreduce_times or allreduce_sizes",
                  self.optimizer_times)
            set_("optimizer_times", _per("optimizer_times", self.optimizer_times, L,
                                         check_nonnegative))
        if self.allreduce_buckets is not None:
            check(self.allreduce_times is not None and self.overlapped_sync, "allreduce_buckets",
                  "given only with allreduce_times and sync allreduce:overlap=backward (a "
                  "plan's overlapped all-reduce in its closed form)", "given")
            check(isinstance(self.allreduce_buckets, (list, tuple))
                  and len(self.allreduce_buckets) == L, "allreduce_buckets",
                  f"one row per stage ({L})", self.allreduce_buckets)
            rows = []
            for row in self.allreduce_buckets:
                check(isinstance(row, (list, tuple)), "allreduce_buckets",
                      "rows of (size, time) pairs", row)
                pairs = []
                for x in row:
                    check(isinstance(x, (list, tuple)) and len(x) == 2, "allreduce_buckets",
                          "rows of (size, time) pairs", x)
                    pairs.append((check_positive("allreduce_buckets", x[0]),
                                  check_nonnegative("allreduce_buckets", x[1])))
                rows.append(tuple(pairs))
            set_("allreduce_buckets", tuple(rows))
        check_nonnegative("tied_allreduce_time", self.tied_allreduce_time)
        if self.tied_allreduce_times is not None:
            each = _per("tied_allreduce_times", self.tied_allreduce_times, self.replicas[0],
                        check_nonnegative)
            check(max(each) == self.tied_allreduce_time, "tied_allreduce_times",
                  f"times whose largest is tied_allreduce_time ({self.tied_allreduce_time!r})",
                  max(each))
            set_("tied_allreduce_times", each)
        if self.tied_allreduce_time:
            check(self.allreduce_times is not None, "tied_allreduce_time",
                  "0 without allreduce_times", self.tied_allreduce_time)
        plan_net = self.allreduce_sizes is not None
        if plan_net:
            check(self.network is not None, "allreduce_sizes", "given only with a network",
                  "given")
            check(self.allreduce_times is None and self.transfer_times is None
                  and self.tied_allreduce_time == 0.0, "allreduce_sizes",
                  "given instead of allreduce_times, transfer_times and tied_allreduce_time",
                  "both")
            set_("allreduce_sizes", _per("allreduce_sizes", self.allreduce_sizes, L,
                                         check_nonnegative))
            check(self.param_size == 0.0 and self.optimizer_time == 0.0, "allreduce_sizes",
                  "given with param_size and optimizer_time 0 (they replace them)", "given")
            check(self.schedule in ("gpipe", "1f1b"), "schedule",
                  "gpipe or 1f1b for a plan over a network", self.schedule)
        if self.transfer_sizes is not None:
            check(plan_net, "transfer_sizes", "given with allreduce_sizes (a plan over a network)",
                  "given")
            set_("transfer_sizes", _hops("transfer_sizes", self.transfer_sizes, max(L - 1, 1),
                                         self.replicas[0])[: max(L - 1, 0)])
        if self.gradient_transfer_sizes is not None:
            check(self.transfer_sizes is not None, "gradient_transfer_sizes",
                  "given with transfer_sizes", "given")
            set_("gradient_transfer_sizes", _hops("gradient_transfer_sizes",
                                                  self.gradient_transfer_sizes, max(L - 1, 1),
                                                  self.replicas[0])[: max(L - 1, 0)])
        for name in ("meta_sizes", "gradient_meta_sizes", "mask_sizes"):
            if getattr(self, name) is not None:
                check(self.transfer_sizes is not None, name, "given with transfer_sizes",
                      "given")
                set_(name, _hops(name, getattr(self, name), max(L - 1, 1),
                                 self.replicas[0])[: max(L - 1, 0)])
        for name in ("allreduce_barrier", "tied_first", "optimizer_barrier", "pipe_groups"):
            check(isinstance(getattr(self, name), bool), name, "True or False",
                  getattr(self, name))
        if self.pipe_groups:
            check(self.transfer_sizes is not None, "pipe_groups",
                  "False without a plan's transfer_sizes (a plan over a network)", True)
            check(len(set(self.replicas)) == 1, "pipe_groups", "False unless every stage has "
                  "one replica per pipeline (as many replicas)", self.replicas)
        if not self.allreduce_barrier:
            check(self.allreduce_times is not None or plan_net, "allreduce_barrier",
                  "True without a plan's all-reduce (allreduce_times or allreduce_sizes)",
                  self.allreduce_barrier)
            check(self.schedule in ("gpipe", "1f1b"), "allreduce_barrier",
                  "True unless schedule is gpipe or 1f1b (a fixed program per device)",
                  self.allreduce_barrier)
            check(self.sync_wait is None, "allreduce_barrier",
                  "True with sync_wait (the fastest pipelines end the step)",
                  self.allreduce_barrier)
            # over a network the stages' collectives are flows of the plan's sizes
            check(self.network is None or plan_net, "allreduce_barrier",
                  "True with a network unless the plan's all-reduce is given as sizes "
                  "(allreduce_sizes)", self.allreduce_barrier)
        check_nonnegative("tied_allreduce_size", self.tied_allreduce_size)
        if self.tied_allreduce_size:
            check(plan_net, "tied_allreduce_size", "0 without allreduce_sizes",
                  self.tied_allreduce_size)

    def _check_network(self) -> None:
        """Validate the network fields (against the network, which the config does not keep)."""
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        check(isinstance(self.contention, bool), "contention", "True or False", self.contention)
        check_choice("p2p", self.p2p, P2PS)
        from ..network.flows import WEIGHTINGS

        check_choice("network_weighting", self.network_weighting, WEIGHTINGS)
        set_("bucket_size", check_positive("bucket_size", self.bucket_size, allow_inf=True))
        reps = self.replicas
        if isinstance(self.tensor_parallel, (list, tuple)):
            tp = _grid("tensor_parallel", self.tensor_parallel, reps,  # type: ignore[arg-type]
                       lambda n, v: check_int(n, v, low=1))
            for j, row in enumerate(tp):
                # a plan's collectives over its network (allreduce_sizes) follow the Sailor
                # artifact's data-parallel groups where a stage's replicas differ (dp_group_rounds)
                check(len(set(row)) == 1 or (self.allreduce_sizes is not None
                                             and all(max(row) % x == 0 for x in row)),
                      "tensor_parallel", f"equal among the replicas of a stage (stage {j}), or "
                      "with a plan's allreduce_sizes each a divisor of the stage's largest", row)
            set_("tensor_parallel", tuple(tuple(int(x) for x in row) for row in tp))
        else:
            set_("tensor_parallel", check_int("tensor_parallel", self.tensor_parallel, low=1))
        tp = self.tensor_parallel
        if self.pipe_groups and isinstance(tp, tuple):  # every hop's chains (pipe_group_chains)
            for k in range(reps[0]):
                col = [row[k] for row in tp]
                for a, b in zip(col, col[1:], strict=False):
                    pipe_group_chains(max(col), a, b)
        tmax = max(max(row) for row in tp) if isinstance(tp, tuple) else tp
        # work that cannot fit, before anything is built: t flows per transfer and t rings per
        # all-reduce, each reduced bucket by bucket
        largest = max([self.param_size, self.tied_allreduce_size,
                       *(self.allreduce_sizes or ())]) / tmax
        buckets = largest / self.bucket_size if self.bucket_size < math.inf else 1.0
        check_memory("tensor_parallel", tmax, float(tmax) * sum(reps) * BYTES_PER_RANK)
        check_bucket_count("bucket_size", self.bucket_size, buckets, tmax,
                           "the largest all-reduce")
        if self.network is None:
            for name, default in (("network_nodes", None), ("nic", None),
                                  ("checkpoint_node", None),
                                  ("network_weighting", "maxmin"), ("bucket_size", math.inf),
                                  ("tensor_parallel", 1)):
                check(getattr(self, name) == default, name,
                      f"{'unset' if default is None else default} without a network",
                      getattr(self, name))
            return
        # the network to check the fields naming its nodes against: sim.network builds and
        # keeps it (the engine asks for the same one); nothing built is kept on the config
        from ..network import shared_network
        from ..network.curves import BandwidthCurve
        from ..network.topology import NetworkValue

        check(isinstance(self.network, (str, NetworkValue)), "network",
              "a topology spec or graph file, or a sim.network.NetworkValue", self.network)
        if self.nic is not None and not isinstance(self.nic, BandwidthCurve):
            check_positive("nic", self.nic, allow_inf=True)
        try:
            net = shared_network(self.network, nic=self.nic)
        except ConfigError as exc:
            if exc.name in ("topology", "nodes"):
                raise ConfigError("network", exc.rule, exc.value) from None
            raise
        check(self.bandwidth == math.inf, "bandwidth",
              "inf (unset) with a network (its links set the transfer times)", self.bandwidth)
        check(self.latency == 0.0, "latency",
              "0 (unset) with a network (its links set the transfer times)", self.latency)
        check(self.routing != "queue", "routing",
              "one that picks the next replica when a pass ends (least-loaded, weighted, "
              "round-robin, least-assigned-time, trainer-balancer) with a network", self.routing)
        if self.network_nodes is None:
            hosts = net.hosts
            check(len(hosts) >= self.workers, "network_nodes",
                  f"given when the network has fewer hosts ({len(hosts)}) than replicas "
                  f"({self.workers})", None)
            rows, k = [], 0
            for r in reps:  # type: ignore[union-attr]
                rows.append(tuple(hosts[k:k + r]))
                k += r
            set_("network_nodes", tuple(rows))
        else:
            grid = _grid("network_nodes", self.network_nodes, reps,  # type: ignore[arg-type]
                         lambda n, v: net.nodes[net.node_index(v, n)])
            set_("network_nodes", grid)
        if self.checkpoint_node is not None:
            set_("checkpoint_node", net.nodes[net.node_index(self.checkpoint_node,
                                                             "checkpoint_node")])
        if self.p2p == "blocking" and not self.framework:
            check(not self.failures, "p2p",
                  "overlap when workers can fail or be preempted (blocking transfers are "
                  "modelled without failures)", self.p2p)

    def _check_strategy(self) -> None:
        """The strategy, its step-time table and the preemption notice (after the rest)."""
        from .strategies import StepTimes, make_strategy, read_step_times

        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        strat = make_strategy(self.strategy)
        set_("strategy", strat)
        job = strat is not None and strat.engine == "job"
        if isinstance(self.step_times, str):
            set_("step_times", read_step_times(self.step_times))
        # a plan's timer of formations (sim.profiles.PlanStepTimes, dtsim train --plan)
        planned = getattr(self.step_times, "per", None) == "formation"
        if self.step_times is not None:
            check(isinstance(self.step_times, StepTimes) or planned, "step_times",
                  "a sim.training.strategies.StepTimes or a CSV path", self.step_times)
            check(job, "step_times", "given only with a step-level strategy (checkpoint-restart, "
                  "redundancy, reconfiguration)", self.step_times)
        if isinstance(self.step_times, StepTimes):
            st = self.step_times
            check(st.smallest <= self.workers, "step_times", f"a table with a count the job "
                  f"can reach (its smallest is {st.smallest} {st.per}; the job has "
                  f"{self.workers} workers)", f"{st.per} {st.smallest}")
        if self.notice > 0:
            preempted = self.mtbf < math.inf or (self.failure_trace is not None
                                                 and not isinstance(self.failure_trace, str))
            check(preempted, "notice", "0 without preemptions (a spot model or a replayed trace)",
                  self.notice)
            check(strat is not None, "notice", "0 without a strategy (a strategy decides what "
                  "a notice is for)", self.notice)
        if strat is None:
            return
        if job:
            name = strat.name
            check(self.checkpoint_every == 0, "checkpoint_every",
                  f"0 with strategy {name} (its own checkpoints: {name}:every=K,checkpoint=C)",
                  self.checkpoint_every)
            check(self.restart_cost is None, "restart_cost",
                  f"unset with strategy {name} (its own restart cost)", self.restart_cost)
            check(self.speeds is None and self.speed_spread == 0, "speeds",
                  f"unset with strategy {name} (a worker may take any stage: equal speeds)",
                  self.speeds)
            for field in ("skip_budget", "max_wait", "detection_timeout"):
                check(getattr(self, field) == 0, field, f"0 with strategy {name} (the step-level "
                      "job engine has no microbatches to skip, wait or re-route)",
                      getattr(self, field))
            check(isinstance(self.step_times, StepTimes)
                  or self.pass_time_distribution == "deterministic",
                  "pass_time_distribution", f"deterministic with strategy {name} and no step "
                  "times (its steps take the DES's failure-free step time)",
                  self.pass_time_distribution)
        strat.check(self)
        if job:
            self._check_strategy_work(strat)

    def _check_strategy_work(self, strat: Any) -> None:
        """(audit 7) Refuse a runaway before any work: a step-level job whose formation cost
        its failures keep interrupting never progresses, and its stall watchdog stops it only
        after ``stall_limit`` (default at least :data:`~sim.training.stall.STALL_FACTOR` times
        the strategy's checkpoint, restart (and Varuna's sleep before it), reconfigure and
        rebalance times: the watchdog's own window, :class:`~sim.training.strategies.watch.JobWatchdog`); ``--mtbf 100
        --strategy redundancy:rebalance=1e10`` simulated every failure of 1e13 s (hours). The
        expected up/down transitions over that window (or ``max_time`` if shorter) must be at
        most :data:`sim.failures.MAX_TRANSITIONS`, as a DiLoCo run's are; a replayed trace's
        transitions are its rows, not counted."""
        from ..failures import MAX_TRANSITIONS, cycle_rates
        from .stall import STALL_FACTOR

        if not self.failures:
            return
        costs = [(float(getattr(strat, k, 0.0) or 0.0), name) for k, name in (
            ("checkpoint", "checkpoint"), ("restart", "restart"), ("reconfigure", "reconfigure"),
            ("rebalance", "rebalance"), ("sleep", "settle"))]  # sleep: settle when growing
        window = (float(self.stall_limit) if self.stall_limit is not None
                  else STALL_FACTOR * math.fsum(c for c, _ in costs))
        length = min(self.max_time, window)
        traced = self.failure_trace is not None
        W = self.workers
        rates = cycle_rates(
            workers=0 if traced else W, availability=self.availability,
            mean_downtime=self.mean_downtime,
            domain_outages=() if traced else self.domain_placement.domain_outage.values(),
            domain_downtime=self.domain_downtime, spot=W, mtbf=self.mtbf,
            replace_time=self.replace_time)
        n = 2.0 * rates.total * length
        if not n > MAX_TRANSITIONS:
            return
        if self.stall_limit is not None and self.stall_limit <= self.max_time:
            name, value = "stall_limit", self.stall_limit
        else:
            cost, name = max(costs)
            value = cost
        raise ConfigError(name, f"small enough that a job its failures keep interrupting stops "
                          f"in bounded time (the stall watchdog waits {STALL_FACTOR:g} x the "
                          f"strategy's checkpoint, restart, settle, reconfigure and rebalance times, or "
                          f"stall_limit; max_time bounds it): at most {MAX_TRANSITIONS:.0e} "
                          f"expected up/down transitions in that window, {n:.2g} here", value)

    def _check_diloco(self) -> None:
        """(issue 37) DiLoCo's outer loop: what it runs on, and the groups it cuts."""
        spec = self.diloco
        if spec is None:
            check(self.group_steps is None, "group_steps", "None unless sync is diloco (a "
                  "DiLoCo group's step times)", self.group_steps)
            check(self.value_bits == 16, "value_bits", "16 (the default) unless sync is diloco "
                  "(it sets the size of a payload of bits/value_bits)", self.value_bits)
            return
        from .outer import check_diloco

        check_diloco(self, spec)

    # -- derived ---------------------------------------------------------------
    def hop_size(self, hop: int, pipeline: int, grad: bool = False) -> float:
        """The bytes of one micro-batch's activation (``grad``: its gradient) over ``hop`` of
        ``pipeline`` (``transfer_sizes``, ``gradient_transfer_sizes``; else
        ``activation_size``)."""
        sizes = (self.gradient_transfer_sizes if grad and self.gradient_transfer_sizes
                 is not None else self.transfer_sizes)
        if sizes is None:
            return self.activation_size
        x = sizes[hop]
        return x[pipeline] if isinstance(x, tuple) else x

    def meta_size(self, hop: int, pipeline: int, grad: bool = False) -> float:
        """The bytes each sender rank sends as a message of its own before its part of one
        micro-batch's activation (``grad``: gradient) over ``hop`` of ``pipeline``
        (``meta_sizes``, ``gradient_meta_sizes``; 0: none)."""
        sizes = (self.gradient_meta_sizes if grad and self.gradient_meta_sizes is not None
                 else self.meta_sizes)
        if sizes is None:
            return 0.0
        x = sizes[hop]
        return x[pipeline] if isinstance(x, tuple) else x

    def hop_bytes(self, hop: int, pipeline: int, grad: bool = False
                  ) -> tuple[float, float, float]:
        """What one micro-batch's activation (``grad``: gradient) over ``hop`` of ``pipeline``
        moves, summed over the sender's messages, as the network traffic sends it
        (:class:`sim.training.traffic.NetworkTraffic`): the tensor (:meth:`hop_size`), the
        partition metadata (:meth:`meta_size` from each of the ``n`` messages that carry a part:
        the sender's TP ranks, or the pipeline's groups under ``pipe_groups`` when the two
        stages' degrees differ from the groups') and the mask (:meth:`mask_size`, with the
        activation; ``1/t`` of it after each part)."""
        tp = self.tensor_parallel
        a, b = (hop + 1, hop) if grad else (hop, hop + 1)
        col = [row[pipeline] for row in tp] if isinstance(tp, tuple) else [tp] * self.stages
        L = self.stages  # an interleaved schedule's hops run over its chunks: device hop % L
        n = t = col[a % L]
        if self.pipe_groups and not t == col[b % L] == max(col):
            n = max(col)
        mask = 0.0 if grad else self.mask_size(hop, pipeline)
        return (self.hop_size(hop, pipeline, grad), n * self.meta_size(hop, pipeline, grad),
                mask if n == t else n * (mask / t))

    def mask_size(self, hop: int, pipeline: int) -> float:
        """The bytes the sender's ranks send, one message each after its part, with one
        micro-batch's activation over ``hop`` of ``pipeline`` (``mask_sizes``; 0: none)."""
        if self.mask_sizes is None:
            return 0.0
        x = self.mask_sizes[hop]
        return x[pipeline] if isinstance(x, tuple) else x

    @property
    def diloco(self) -> DilocoSync | None:
        """(issue 37) The :class:`sim.training.sync.DilocoSync` view of a DiLoCo ``sync``,
        else None."""
        if self.sync_spec.kind != "diloco":
            return None
        return DilocoSync.of(self.sync)

    @property
    def framework(self) -> bool:
        """Whether the framework engine (:mod:`sim.training.framework`) runs this config."""
        return ((self.p2p == "blocking" and self.network is None) or self.p2p == "batched"
                or self.schedule == "interleaved" or self.allreduce_sizes is not None
                or self.allreduce_barrier is False)

    @property
    def sync_spec(self) -> Any:
        """The parsed ``sync`` (a :class:`sim.training.sync.SyncSpec`)."""
        return parse_sync(self.sync)

    @property
    def ring_sync(self) -> bool:
        """Whether a step runs the gradient all-reduce: sync ``allreduce`` with parameters or a
        latency. With a latency alone the ring law gives it no time (an all-reduce of no values
        is no collective, :func:`sim.analytic.network.ring_allreduce_time`), but such a config
        still counts here, so the engines chosen for it do not change (a switch would move its
        bits, not its law)."""
        return self.sync_spec.kind == "allreduce" and (self.param_size > 0 or self.mean_latency > 0)

    @property
    def overlapped_sync(self) -> bool:
        """Whether the gradient all-reduce overlaps the backward pass (``overlap=backward``)."""
        return self.sync_spec.get("overlap") == "backward"

    @property
    def trace_names(self) -> tuple[str | None, ...] | None:
        """With a replayed trace (:class:`sim.traces.TraceReplay`) whose instances are named as
        this run's workers (``s{j}r{i}``) or their hosts (``network_nodes``): the instance each
        worker replays, stage-major (None: a worker the trace does not name, up throughout);
        None when the trace is replayed slot by slot (its instances named as none of them,
        or a count trace). Some named so and some not is refused
        (:meth:`sim.traces.TraceReplay.by_name`)."""
        ft = self.failure_trace
        if ft is None or isinstance(ft, str):
            return None
        return ft.by_name(stage_workers(self.replicas, self.network_nodes,  # type: ignore[arg-type]
                                        self.trace_hosts))

    @property
    def workers(self) -> int:
        """Replica workers (slots) in the system."""
        return int(sum(self.replicas))  # type: ignore[arg-type]

    @property
    def domain_placement(self) -> Placement:
        """The placement used, built from the stored value (Study A's shared stage domains
        when none is given)."""
        if self.placement is not None:
            return from_value(self.placement)
        return shared_per_stage(self.replicas, self.domain_outage)  # type: ignore[arg-type]

    @property
    def backward_time(self) -> tuple[float, ...]:
        """Nominal backward time per stage."""
        if self.backward_times is not None:
            return self.backward_times  # type: ignore[return-value]
        return tuple(self.backward_ratio * t for t in self.forward_time)  # type: ignore[union-attr]

    @property
    def has_backward(self) -> bool:
        """Whether steps have backward passes (a positive ratio, or some positive backward time)."""
        if self.backward_times is not None:
            return any(b > 0 for b in self.backward_times)  # type: ignore[union-attr]
        return self.backward_ratio > 0

    @property
    def hop_times(self) -> tuple[float, ...]:
        """Transfer time of each hop ``j -> j+1`` (activations; gradients the same way back
        unless ``transfer_times`` say otherwise, see :attr:`hop_times_back`)."""
        if self.transfer_times is not None:
            return tuple(max(a for a, _ in row) for row in self.transfer_times)
        L = self.stages
        lat = self.latency if isinstance(self.latency, tuple) else (self.latency,) * max(L - 1, 0)
        extra = self.activation_size / self.bandwidth if self.activation_size else 0.0
        return tuple(x + extra for x in lat[: max(L - 1, 0)])

    @property
    def hop_times_back(self) -> tuple[float, ...]:
        """Transfer time of each hop ``j+1 -> j`` (gradients)."""
        if self.transfer_times is not None:
            return tuple(max(g for _, g in row) for row in self.transfer_times)
        return self.hop_times

    @property
    def pipeline_transfer_times(self) -> tuple[tuple[tuple[float, float], ...], ...]:
        """Per hop of the model's ``L v`` stages, per pipeline: (activation, gradient) times."""
        if self.transfer_times is not None:
            return self.transfer_times
        r = self.replicas[0]  # type: ignore[index]
        hops = self.hop_times
        if self.virtual_stages > 1:  # every hop between chunks: one latency (checked)
            extra = self.activation_size / self.bandwidth if self.activation_size else 0.0
            h = float(self.latency) + extra  # type: ignore[arg-type]
            return tuple(((h, h),) * r for _ in range(self.stages * self.virtual_stages - 1))
        return tuple(((h, h),) * r for h in hops)

    @property
    def mean_latency(self) -> float:
        """Link latency used by the all-reduce and the weight download."""
        lat = self.latency
        return float(sum(lat) / len(lat)) if isinstance(lat, tuple) else float(lat)

    @property
    def download_time(self) -> float:
        """Time for a recovering or new replica to fetch its stage's weights."""
        if not self.param_size:
            return 0.0
        return self.mean_latency + self.param_size / self.bandwidth

    @property
    def failures(self) -> bool:
        """True when any worker or domain can fail or be preempted."""
        pl = self.domain_placement
        return (self.availability < 1.0 or any(u > 0 for u in pl.domain_outage.values())
                or self.mtbf < math.inf or self.failure_trace is not None)

    @property
    def quality(self) -> tuple[float, ...]:
        """Quality kept after ``k`` skips."""
        return quality_table(self.stages, self.skip_penalty, self.penalty)

    def random_sources(self) -> tuple[str, ...]:
        """What makes one replication differ from another under this config (empty: nothing).

        A new random element of the model (a law, a draw, a random policy)
        adds its condition here, so that :meth:`fixed_metrics` stays true.
        """
        out = []
        if self.failures:
            out.append("failures")
        if self.pass_time_distribution != "deterministic":
            out.append(f"{self.pass_time_distribution} pass times")
        if self.speed_spread > 0:
            out.append("random speeds (speed_spread)")
        if self.arrival == "poisson":
            out.append("Poisson arrivals")
        if self.routing == "weighted" and any(r > 1 for r in self.replicas):  # type: ignore[union-attr]
            out.append("weighted (random) routing")
        if self.routing in ("least-assigned-time", "trainer-balancer") and any(r > 1 for r in self.replicas):  # type: ignore[union-attr]
            out.append(f"{self.routing} routing's random tie-breaks")
        return tuple(out)

    def fixed_metrics(self) -> dict[str, str]:
        """The metrics of :data:`sim.training.METRICS` this config fixes, each with the reason.

        Without failures no worker is ever down, so nothing is lost, rerouted,
        recomputed, skipped, waited for, restarted or dropped: the worker
        availability is 1, the drop rate 0, the quality 1 and those counts 0.
        With nothing random at all (:meth:`random_sources` empty) every metric
        is the same in every replication (see :func:`sim.results.fixed_ci`): the
        figures every run reports (:data:`~sim.training.system.FIGURES`) and
        DiLoCo's (:data:`~sim.training.outer.DILOCO_METRICS`) too.
        """
        from .outer import DILOCO_METRICS
        from .system import FIGURES, METRICS

        random = self.random_sources()
        if not random:
            why = "nothing random: no failures, deterministic times, speeds and routing"
            return dict.fromkeys((*METRICS, *FIGURES, *DILOCO_METRICS), why)
        out = {"workers": "the config's workers"}
        if all(q == 1.0 for q in self.quality[: self.skip_budget + 1]):
            out["mean_quality"] = ("no skip costs quality (skip budget 0, or no penalty within "
                                   "it)")
        if self.skip_budget == 0:
            out.update(dict.fromkeys(("mean_skipped", "skips"),
                                     "no stage may be skipped (skip budget 0)"))
        if self.max_wait == math.inf:  # every stage recovers (a config that never does is refused)
            out["drop_rate"] = "a microbatch waits for an out stage (max_wait inf): none is dropped"
        if "failures" not in random:
            why = "no failures (availability 1, no domain outage, preemption or trace)"
            out.update(dict.fromkeys(
                ("worker_availability", "drop_rate", "mean_quality", "mean_skipped",
                 "lost_passes", "reroutes", "recomputes", "skips", "waits", "restarts",
                 "preemptions", "lost_lost_pass", "lost_recompute", "lost_reroute",
                 "lost_download", "lost_stall", "lost_restart"), why))
        if self.sync_wait is not None:  # the stragglers' microbatches drop, their passes are lost
            for m in ("drop_rate", "lost_passes", "lost_lost_pass"):
                out.pop(m, None)
        return out
