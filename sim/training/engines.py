"""The training family's engines and exact references, registered with :mod:`sim.engines`.

The engines are the DES (:class:`TrainingDES`, every config without a
step-level strategy, the one ``auto`` picks), the compiled event loop
(:class:`~sim.training.compiled.CompiledTraining`, ``--engine compiled``: the
same model for the configs it accepts) and the step-level job engine
(:class:`JobEngine`: the checkpoint-restart, redundancy and reconfiguration
strategies of :mod:`sim.training.strategies`).

Each reference says when it is exact for a :class:`~sim.training.TrainingConfig`
(one line either way) and predicts its metrics from :mod:`sim.analytic.training`
or Study A's closed forms:

``fastest_k``  one stage of n replicas waiting for the first K (``sync_wait``): the
               K-th order statistic of the pass times (step time, time to train);
``schedule``   GPipe and 1F1B step time and bubble, one replica per stage;
``mmc``        one stage of ``c`` replicas under ``queue`` routing (M/M/c);
``saturated``  async, weighted routing, unbounded supply: the steady throughput;
``daly``       one worker, checkpoints, Poisson preemptions (Daly 2006);
``snapshot``   zero-time async crossings: Study A's drop law and mean quality;
``checkpoint_interval``  Poisson job failures, restart model: the exact best
               interval ``tau*`` (Lambert W; :mod:`sim.training.checkpointing`).
"""

from __future__ import annotations

import math
from typing import Any

from .. import analytic
from ..analytic.placement import barrier_tail, pipelines_tied, staged_step_end
from ..engines import Applies, Engine, Reference, register
from ..network.collectives import bucket_sizes
from .checkpointing import checkpoint_interval_obstacle, predicted_interval
from .compiled import CompiledTraining
from .strategies.job import JOB_METRICS, job_model
from .system import FIGURES, METRICS, draw_speeds, training_model

__all__ = ["TrainingDES", "JobEngine", "CompiledTraining", "FastestKReference", "StrategyReplayReference",
           "ScheduleReference", "MMcReference", "SaturatedReference", "DalyReference",
           "SnapshotReference", "CheckpointIntervalReference", "DilocoReference", "PREDICTED"]

#: Metrics an exact reference may predict (``predicted_<metric>`` in the CLI).
PREDICTED = ("step_time_mean", "bubble_fraction", "throughput", "throughput_steady",
             "training_time", "latency_mean", "drop_rate", "mean_quality", "checkpoint_interval",
             "compute_utilisation", "wan_bytes_sent", "allreduce_bytes_sent")


def _job_strategy(c: Any) -> bool:
    return c.strategy is not None and c.strategy.engine == "job"


class JobEngine(Engine):
    """The step-level job engine of :mod:`sim.training.strategies` (a step-level strategy)."""

    name = "job"
    family = "training"
    speed = 60
    metrics = (*METRICS, *JOB_METRICS)
    records = True

    def applies(self, config: Any) -> Applies:
        if _job_strategy(config):
            return Applies(True, f"the step-level job engine runs strategy "
                           f"{config.strategy.name}")
        return Applies(False, "runs the step-level strategies (checkpoint-restart, redundancy, "
                       "reconfiguration)")

    def run(self, config: Any, streams: Any, *, recorder: Any = None) -> dict[str, Any]:
        return job_model(config, streams, recorder=recorder)


class TrainingDES(Engine):
    """The discrete-event simulation of :mod:`sim.training` (every config but a step-level
    strategy's)."""

    name = "des"
    family = "training"
    speed = 50
    metrics = (*METRICS, *FIGURES)
    records = True

    def applies(self, config: Any) -> Applies:
        if _job_strategy(config):
            return Applies(False, f"strategy {config.strategy.name} runs on the step-level "
                           "job engine")
        if config.allreduce_buckets is not None:
            return Applies(False, "a plan's all-reduce overlapped with the backward pass runs "
                           "over its network (allreduce_sizes: dtsim train --plan); "
                           "allreduce_buckets are its closed form's (the schedule reference)")
        return Applies(True, "the training DES answers every configuration")

    def run(self, config: Any, streams: Any, *, recorder: Any = None) -> dict[str, Any]:
        return training_model(config, streams, figures=True, recorder=recorder)


def _speed_one(c: Any) -> float | None:
    """The common speed of every replica, or None if speeds differ or are drawn."""
    if c.speed_spread > 0:
        return None
    v = {s for row in draw_speeds(c, None) for s in row} if c.speeds is not None else {1.0}
    return v.pop() if len(v) == 1 else None


def _no_strategy(c: Any) -> tuple[bool, str]:
    """The refusal of every reference of the training DES for a step-level strategy (and,
    issue 37, for a DiLoCo run, which the diloco reference answers)."""
    if c.diloco is not None:  # the diloco reference's own verdict, whichever note shows
        v = DilocoReference().applies(c)
        return (True, "sync diloco: " + ("answered by the diloco reference" if v.ok
                                         else f"diloco: {v.reason}"))
    return (_job_strategy(c), "needs the training DES (no step-level strategy)")
#: Why no closed form answers a config with a network.
_NETWORK = "needs no network (transfers over a network are simulated, not in the closed form)"


def _no_failures(c: Any) -> str | None:
    return "failures or preemptions are on" if c.failures else None


def _first(*checks: tuple[bool, str]) -> Applies | None:
    """The first failed check as a refusal, or None when all pass."""
    for bad, why in checks:
        if bad:
            return Applies(False, why)
    return None


class ScheduleReference(Reference):
    """``(m + L - 1)(t_f + t_b)`` and ``(L - 1)/(m + L - 1)`` for GPipe and 1F1B, and the exact
    max-plus completion of the frameworks' fixed programs otherwise.

    With ``r`` replicas per stage the fixed pipelines are ``r`` independent
    copies; a balanced split (round robin or least-loaded, ``r`` dividing
    ``m``) gives each ``m / r`` microbatches, so ``m`` becomes ``m / r``.

    Where the closed form does not apply (unequal stages, transfer times,
    per-stage backward times, heterogeneous replicas, blocking point-to-point,
    interleaving, a plan's all-reduce and optimizer tail), a deterministic
    failure-free run of GPipe, 1F1B (fixed order) or interleaved 1F1B is
    predicted by :func:`sim.analytic.training.program_makespan` over each
    pipeline's device programs (:func:`sim.training.schedules.device_program`),
    plus the step's gradient sync and optimizer tail.
    """

    name = "schedule"
    family = "training"
    metrics = ("step_time_mean", "bubble_fraction", "training_time", "throughput",
               "compute_utilisation", "allreduce_bytes_sent")

    def applies(self, c: Any) -> Applies:
        no = self._closed_form(c)
        if no is None:
            return Applies(True, "GPipe/1F1B with equal deterministic stages on fixed pipelines")
        if _program_refusal(c) is None:
            return Applies(True, "GPipe/1F1B/interleaved fixed programs, deterministic and "
                           "failure-free: exact max-plus completion")
        return no

    def _closed_form(self, c: Any) -> Applies | None:
        return _first(
            _no_strategy(c),
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.schedule not in ("gpipe", "1f1b", "1f1b-dynamic"), "needs schedule gpipe or 1f1b"),
            (len(set(c.replicas)) != 1, "needs as many replicas at every stage"),
            (c.replicas[0] > 1 and (c.microbatches % c.replicas[0] != 0
                                    or c.routing not in ("round-robin", "least-loaded")),
             "needs one replica per stage, or r dividing m with a balanced routing "
             "(round-robin, least-loaded)"),
            (c.replicas[0] > 1 and c.ring_sync,
             "needs no gradient sync time (sync none, or no parameters and no latency)"),
            (c.pass_time_distribution != "deterministic", "needs deterministic pass times"),
            (len(set(c.forward_time)) != 1 or c.forward_time[0] == 0,
             "needs equal positive forward times"),
            (_speed_one(c) is None, "needs equal replica speeds"),
            (c.failures, "needs no failures"),
            (any(c.hop_times), "needs no transfer time"),
            (c.optimizer_time > 0 or c.checkpoint_every > 0, "needs no optimizer or checkpoint time"),
            (c.sync_wait is not None and c.sync_wait < c.replicas[0],
             "needs every pipeline in the step (sync_wait unset or equal to the replicas)"),
            (c.backward_times is not None or c.replica_times is not None,
             "needs one backward ratio and the stage's times on every replica"),
            (c.allreduce_times is not None, "needs no all-reduce or optimizer tail"),
        )

    def predict(self, c: Any) -> dict[str, Any]:
        if self._closed_form(c) is not None:
            return _program_prediction(c)
        v = _speed_one(c)
        tf = c.forward_time[0] / v
        per_pipe = c.microbatches // c.replicas[0]
        T = analytic.pipeline_step_time(c.stages, per_pipe, tf, c.backward_ratio * tf)
        return {"step_time_mean": T,
                "bubble_fraction": analytic.pipeline_bubble_fraction(c.stages, per_pipe),
                "training_time": c.steps * T, "throughput": c.microbatches / T,
                "compute_utilisation": 1.0, "allreduce_bytes_sent": _allreduce_bytes(c)}


class FastestKReference(Reference):
    """The K-th of n order statistic for a step that waits for the fastest K of n replicas.

    One stage of ``n`` replicas and ``n`` microbatches split one per replica
    (round robin or least-loaded), forward passes only: every replica does
    one pass per step, and the step (``sync_wait = K``) ends at the K-th
    completion, then the ring all-reduce among the K and the optimizer step.
    Stragglers ``cancel``: each step takes :math:`X_{(K:n)}` (any pass law,
    given speeds; :func:`sim.analytic.order_statistic_mean`); ``drop``
    (exponential passes, equal speeds, no time between steps): the first
    step :math:`X_{(K:n)}`, later ones the K-th of ``K`` exponential and
    ``n - K`` Gamma(2) times (:func:`sim.analytic.drop_stragglers_step_means`).
    """

    name = "fastest_k"
    family = "training"
    metrics = ("step_time_mean", "training_time")

    def applies(self, c: Any) -> Applies:
        no = _first(
            (c.sync_wait is None, "needs sync_wait (wait for the fastest K of n)"),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.stages != 1, "needs one stage of n replicas"),
            (c.backward_ratio != 0, "needs one pass per replica per step (forward only)"),
            (c.microbatches != c.replicas[0] or c.routing not in ("round-robin", "least-loaded"),
             "needs one microbatch per replica (microbatches = replicas, round-robin or "
             "least-loaded routing)"),
            (c.speed_spread > 0, "needs given (not drawn) speeds"),
            (c.failures, "needs no failures"),
            (c.checkpoint_every > 0, "needs no checkpoints"),
            (c.stragglers == "drop" and (c.pass_time_distribution != "exponential"
                                         or _speed_one(c) is None),
             "with stragglers drop, needs exponential passes and equal speeds"),
            (c.stragglers == "drop" and (c.optimizer_time > 0 or c.ring_sync),
             "with stragglers drop, needs no time between steps (no sync or optimizer time)"),
        )
        return no if no is not None else Applies(
            True, "one pass per replica, the step ends at the K-th completion (order statistic)")

    @staticmethod
    def _between(c: Any) -> float:
        K = c.sync_wait
        sync = 0.0
        if c.ring_sync and K > 1:
            sync = analytic.ring_allreduce_time(K, c.param_size, c.bandwidth, c.mean_latency)
        return sync + c.optimizer_time

    def predict(self, c: Any) -> dict[str, Any]:
        n, K, N = c.replicas[0], c.sync_wait, c.steps
        t = c.forward_time[0]
        speeds = draw_speeds(c, None)[0]
        if c.stragglers == "drop":
            first, steady = analytic.drop_stragglers_step_means(K, n, t / speeds[0])
            total = first + (N - 1) * steady
            return {"step_time_mean": total / N, "training_time": total}
        law = c.pass_time_distribution
        step = analytic.order_statistic_mean(K, n, law, c.pass_time_shape, t, speeds) \
            + self._between(c)
        return {"step_time_mean": step, "training_time": N * step}


def _program_refusal(c: Any) -> str | None:
    """Why the max-plus program form does not give ``c``'s step exactly (None: it does)."""
    reps = c.replicas
    checks = (
        _no_strategy(c),
        (c.network is not None, _NETWORK),
        (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
        (c.sync_wait is not None and c.sync_wait < c.replicas[0],
         "needs every pipeline in the step (sync_wait unset or equal to the replicas)"),
        (c.schedule not in ("gpipe", "1f1b", "interleaved"),
         "needs schedule gpipe, 1f1b or interleaved (a fixed program)"),
        (c.pass_time_distribution != "deterministic", "needs deterministic pass times"),
        (c.failures, "needs no failures"),
        (c.checkpoint_every > 0, "needs no checkpoint time"),
        (c.speed_spread > 0, "needs given (not drawn) speeds"),
        (len(set(reps)) != 1, "needs as many replicas at every stage"),
        (reps[0] > 1 and c.routing != "round-robin",
         "needs one pipeline, or round-robin routing (micro-batch k on pipeline k mod r)"),
        (c.schedule == "gpipe" and reps[0] > 1 and not c.framework,
         "needs one pipeline for gpipe (its phase barrier spans the pipelines)"),
        (not c.has_backward, "needs backward passes"),
    )
    for bad, why in checks:
        if bad:
            return why
    return None


def _program_prediction(c: Any) -> dict[str, Any]:
    """Step time, bubble, time to train and throughput of ``c`` from its device programs."""
    from ..training.schedules import device_program, p2p_program

    speeds = draw_speeds(c, None)
    L, v, r, m = c.stages, c.virtual_stages, c.replicas[0], c.microbatches
    blocking, batched = p2p_program(c.p2p)
    channels = c.p2p == "overlap"
    T, busy = 0.0, 0.0
    last_b: list[list[tuple[float, float]]] = [[] for _ in range(L)]  # (start, time) per stage
    dev_ends: list[list[float]] = [[] for _ in range(L)]  # each device's program end
    ran: list[int] = []  # the pipelines that got micro-batches
    for k in range(r):
        mk = len(range(k, m, r))
        if mk == 0:
            continue
        ran.append(k)
        fw, bw = [], []
        for j in range(L):
            f, b = (c.replica_times[j][k] if c.replica_times is not None
                    else (c.forward_time[j], c.backward_time[j]))
            fw.append(f / speeds[j][k] / v)
            bw.append(b / speeds[j][k] / v)
            busy += mk * (f + b) / speeds[j][k]
        forward = [fw[s % L] for s in range(L * v)]
        backward = [bw[s % L] for s in range(L * v)]
        if c.framework:
            xfer = c.pipeline_transfer_times
            act = [row[k][0] for row in xfer]
            grad = [row[k][1] for row in xfer]
        else:
            act, grad = list(c.hop_times), list(c.hop_times_back)
        gather = None  # DeepSpeed 0.3.13's all-gather before each gradient receive (device busy)
        if c.recv_gather_times is not None:
            gather = [c.recv_gather_times[j][k] for j in range(L)]
            busy += mk * math.fsum(gather[:L - 1])  # the last stage receives no gradient
        progs = [device_program(c.schedule, L, mk, j, v=v, blocking=blocking, batched=batched,
                                recv_gather=gather is not None)
                 for j in range(L)]
        starts: dict = {}
        ends: list[float] = []
        T = max(T, analytic.program_makespan(progs, forward, backward, act, grad,
                                             blocking=blocking, channels=channels,
                                             starts=starts, ends=ends, gather=gather))
        for j in range(L):
            dev_ends[j].append(ends[j])
        for j in range(L):  # each device's last backward pass (v = 1 with overlap)
            i = max(op[2] for op in progs[j] if op[0] == "B")
            last_b[j].append((starts[("B", j, i)], backward[j]))
    compute = T
    sync = 0.0
    spec = c.sync_spec
    bucket = spec.get("bucket_size")
    n = min(m, r)
    if c.overlapped_sync:  # each stage's buckets as its last backward passes produce them
        if c.allreduce_buckets is not None:  # a plan's: each bucket's own time
            buckets = c.allreduce_buckets
        else:
            from ..training.traffic import gradient_buckets

            sizes = gradient_buckets(c.param_size, bucket) if n > 1 else []
            row = tuple((b, analytic.ring_allreduce_time(n, b, c.bandwidth, c.mean_latency))
                        for b in sizes)
            buckets = (row,) * L
        sync = analytic.overlapped_exposed_time(T, last_b, buckets)
    elif c.ring_sync and r > 1:
        nb = 1 if bucket is None else max(len(bucket_sizes(c.param_size, bucket)), 1)
        sync = analytic.ring_allreduce_time(n, c.param_size, c.bandwidth, c.mean_latency,
                                            buckets=nb)
    tail = c.optimizer_time
    if c.allreduce_times is not None:
        opt = c.optimizer_times or (0.0,) * L
        if c.allreduce_buckets is not None:  # the buckets, then the tied all-reduce (Megatron's)
            tail = c.tied_allreduce_time + max(opt)
        else:
            tail = barrier_tail(c.allreduce_times, opt, c.tied_allreduce_time,
                                optimizer_barrier=c.optimizer_barrier)[0]
    step = compute + sync + tail
    if not c.allreduce_barrier:  # each stage's collectives as its own devices end (a plan's)
        reduced = None
        allreduce = c.allreduce_times
        if c.overlapped_sync:  # its buckets went during its last backward passes
            reduced = analytic.overlapped_stage_ends(last_b, buckets)
            allreduce = (0.0,) * L
        tied = pipelines_tied(c.tied_allreduce_times, c.tied_allreduce_time, ran)
        step = staged_step_end(dev_ends, allreduce, c.optimizer_times or (0.0,) * L, tied,
                               tied_first=c.tied_first, optimizer_barrier=c.optimizer_barrier,
                               reduced=reduced)
    return {"step_time_mean": step, "training_time": c.steps * step,
            "throughput": m / step if step > 0 else math.nan,
            "bubble_fraction": 1.0 - busy / (c.workers * compute) if compute > 0 else math.nan,
            "compute_utilisation": compute / step if step > 0 else math.nan,
            "allreduce_bytes_sent": _allreduce_bytes(c)}


def _allreduce_bytes(c: Any) -> float | None:
    """(issue 37) Size units each worker sends in ``N`` failure-free step-end rings of
    ``param_size`` among ``min(m, r)``: ``N 2 (n - 1) / n P`` on the ``n`` pipelines that get
    micro-batches, 0 on the others (mean over workers); None for a plan's times (no sizes)."""
    if c.allreduce_times is not None:
        return None
    r, m = c.replicas[0], c.microbatches
    n = min(m, r)
    if c.sync_spec.kind != "allreduce" or n < 2 or not c.param_size:
        return 0.0
    return c.steps * 2.0 * (n - 1) / n * c.param_size * n / r


class MMcReference(Reference):
    """M/M/c mean sojourn for one stage of ``c`` replicas sharing a FIFO queue."""

    name = "mmc"
    family = "training"
    metrics = ("latency_mean",)

    def applies(self, c: Any) -> Applies:
        no = _first(
            _no_strategy(c),
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.stages != 1, "needs one stage"),
            (c.schedule != "async" or c.arrival != "poisson", "needs async Poisson arrivals"),
            (c.routing != "queue", "needs queue routing"),
            (c.pass_time_distribution != "exponential" or c.backward_ratio != 0,
             "needs exponential forward-only passes"),
            (_speed_one(c) is None, "needs equal replica speeds"),
            (c.forward_time[0] == 0, "needs a positive forward time"),
            (c.failures, "needs no failures"),
        )
        if no is not None:
            return no
        mu = _speed_one(c) / c.forward_time[0]
        if c.arrival_rate >= c.replicas[0] * mu:
            return Applies(False, "the queue is unstable (arrival rate >= c mu)")
        return Applies(True, "M/M/c: Poisson arrivals, exponential passes, one FIFO queue")

    def predict(self, c: Any) -> dict[str, Any]:
        mu = _speed_one(c) / c.forward_time[0]
        return {"latency_mean": analytic.mmc_sojourn(c.replicas[0], c.arrival_rate, mu)}


class SaturatedReference(Reference):
    """``min_j sum_i v_ij / w_j`` for async weighted routing with an unbounded supply."""

    name = "saturated"
    family = "training"
    metrics = ("throughput_steady",)

    @staticmethod
    def _rates(c: Any) -> list[float]:
        speeds = draw_speeds(c, None)
        return [sum(row) / (t * (1 + c.backward_ratio)) for row, t in zip(speeds, c.forward_time, strict=True)]

    def applies(self, c: Any) -> Applies:
        no = _first(
            _no_strategy(c),
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.schedule != "async" or c.arrival != "saturated", "needs async with a saturated supply"),
            (c.routing != "weighted", "needs weighted routing"),
            (c.speed_spread > 0, "needs given (not drawn) speeds"),
            (any(t == 0 for t in c.forward_time), "needs positive forward times"),
            (c.failures, "needs no failures"),
        )
        if no is not None:
            return no
        rates = sorted(self._rates(c))
        if len(rates) > 1 and rates[1] <= rates[0] * (1 + 1e-9):
            return Applies(False, "two stages tie for the bottleneck (their random shares idle them)")
        return Applies(True, "saturated weighted routing with a unique bottleneck stage")

    def predict(self, c: Any) -> dict[str, Any]:
        speeds = draw_speeds(c, None)
        work = [t * (1 + c.backward_ratio) for t in c.forward_time]
        return {"throughput_steady": analytic.saturated_throughput(speeds, work)}


class DalyReference(Reference):
    """Daly's expected time of ``N/K`` checkpointed segments, for one worker."""

    name = "daly"
    family = "training"
    metrics = ("training_time",)

    def applies(self, c: Any) -> Applies:
        no = _first(
            _no_strategy(c),
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.stages != 1 or c.replicas[0] != 1, "needs one worker (one stage, one replica)"),
            (c.schedule == "async", "needs a step barrier"),
            (c.mtbf == math.inf, "needs preemptions (mtbf)"),
            (c.replace_time > 0 or c.download_time > 0, "needs instant replacement"),
            (c.availability < 1 or c.domain_outage > 0 or c.failure_trace is not None,
             "needs preemptions as the only failures"),
            (c.pass_time_distribution != "deterministic", "needs deterministic pass times"),
            (c.checkpoint_every == 0 or c.steps % c.checkpoint_every != 0,
             "needs checkpoints every K steps with N a multiple of K"),
        )
        return no if no is not None else Applies(True, "one worker, Poisson preemptions, checkpoint and restart")

    def predict(self, c: Any) -> dict[str, Any]:
        v = draw_speeds(c, None)[0][0]
        t = c.microbatches * c.forward_time[0] * (1 + c.backward_ratio) / v + c.optimizer_time
        return {"training_time": analytic.checkpoint_wall_time(
            c.steps, t, c.checkpoint_every, c.checkpoint_cost, c.restart_cost, c.mtbf)}


class SnapshotReference(Reference):
    """Study A's snapshot law for zero-time crossings: drop rate and mean quality."""

    name = "snapshot"
    family = "training"
    metrics = ("drop_rate", "mean_quality")

    def applies(self, c: Any) -> Applies:
        no = _first(
            _no_strategy(c),
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.schedule != "async" or c.arrival == "saturated",
             "needs async arrivals at a rate (fixed or poisson)"),
            (any(c.forward_time) or c.backward_ratio != 0 or any(c.hop_times),
             "needs zero-time crossings (forward time 0, no backward, no transfer)"),
            (c.max_wait > 0, "needs max_wait 0"),
            (c.mtbf < math.inf or c.failure_trace is not None or c.download_time > 0,
             "needs the stationary failure model only (no spot, trace or download)"),
        )
        return no if no is not None else Applies(True, "zero-time crossings see a stationary snapshot (Study A)")

    def predict(self, c: Any) -> dict[str, Any]:
        reps = c.replicas
        out: dict[str, Any] = {}
        if c.placement is None and len(set(reps)) == 1:
            q = analytic.stage_outage(c.availability, reps[0], c.domain_outage)
            out["drop_rate"] = analytic.drop_probability_q(c.stages, q, c.skip_budget)
            out["mean_quality"] = analytic.mean_quality_delivered(
                c.stages, q, c.skip_budget, c.skip_penalty, penalty=c.penalty)
        else:
            pl = c.domain_placement
            out["drop_rate"] = analytic.exact_drop_probability(
                [list(s) for s in pl.replica_domains], dict(pl.domain_outage), c.availability,
                c.skip_budget)
            out["mean_quality"] = None
        return out


class CheckpointIntervalReference(Reference):
    """The exact best work between checkpoints, ``tau* = (1 + W0(-e^{-1-C/M})) M``.

    ``M`` is the running job's MTBF, one over the sum of its components'
    failure rates (:func:`sim.training.checkpointing.job_failure_rate`). Not a
    simulated metric: ``dtsim train --json`` reports it as
    ``predicted_checkpoint_interval`` (time units), and
    ``--checkpoint-every auto`` checkpoints at the whole number of steps of
    least exact cost around it.
    """

    name = "checkpoint_interval"
    family = "training"
    metrics = ("checkpoint_interval",)

    def applies(self, c: Any) -> Applies:
        why = checkpoint_interval_obstacle(c)
        if why is None and not c.checkpoint_cost > 0:
            why = "needs a checkpoint cost > 0"
        return Applies(False, why) if why is not None else Applies(
            True, "Poisson job failures (one replica per stage, exponential clocks), restart model")

    def predict(self, c: Any) -> dict[str, Any]:
        return {"checkpoint_interval": predicted_interval(c)}


def _removal_times(c: Any) -> list[tuple[float, int, float]] | str:
    """``(start, worker, end)`` of a trace in which each worker goes down at most once, or the
    reason it is not one (whether it comes back within the run is judged by the replay)."""
    from ..failures import read_trace
    from ..rng import Streams

    L = c.stages
    names = [f"s{j}r{i}" for j in range(L) for i in range(c.replicas[j])]
    if isinstance(c.failure_trace, str):
        ivs = read_trace(c.failure_trace).intervals
        rows = [list(ivs.get(n, ())) for n in names]
    else:
        tr = c.failure_trace
        if tr.loop or tr.resample != "none" or tr.model != "trace":
            return "needs a trace replayed once as it is (no loop, resampling or fitted model)"
        # by name when the trace names the workers or their hosts (c.trace_names, stage-major
        # as ``names``), as the engines replay it; else slot k on host k (the job engine's
        # unit of failure, sim.training.config.host_groups: a worker of its own but for a
        # plan's host holding several), each worker its host's intervals
        from .config import host_groups

        hosts = host_groups(c)
        stage = [j for j in range(L) for _ in range(c.replicas[j])]
        tn = c.trace_names
        its = tr.worker_intervals(len(hosts), streams=Streams(0).replication(0),
                                  domain_of=[stage[ks[0]] for ks in hosts],
                                  names=None if tn is None else [tn[ks[0]] for ks in hosts])
        rows = [[]] * len(names)
        for ks, it in zip(hosts, its, strict=True):
            row = list(it)
            for k in ks:
                rows[k] = row
    out = []
    for k, row in enumerate(rows):
        if len(row) > 1:
            return "needs a trace in which each worker goes down at most once"
        if row:
            out.append((float(row[0][0]), k, float(row[0][1])))
    return out


def _replay(c: Any) -> tuple[float | None, str]:
    """The replayed wall time of a step-level strategy on ``c``'s removal trace, or None and
    why not."""
    from ..analytic.strategies import (
        replay_checkpoint_restart,
        replay_reconfiguration,
        replay_redundancy,
    )
    from .strategies.base import Formation
    from .strategies.steptime import formation_time, stage_work

    rows = _removal_times(c)
    if isinstance(rows, str):
        return None, rows
    s = c.strategy
    rem = [(t, k) for t, k, _ in rows]
    table = c.step_times

    def step_time(sizes: tuple[int, ...], held: int) -> float | None:
        return formation_time(c, sizes, held)

    common = dict(n0=c.workers, removals=rem, stages=c.stages, steps=c.steps,
                  step_time=step_time, boot=s.boot)
    if s.name == "checkpoint-restart":
        t = replay_checkpoint_restart(
            **common, replicas=max(c.replicas), every=s.every, checkpoint=s.checkpoint,
            restart=s.restart, all_held=table is not None and table.per == "workers",
            settle=s.settle if s.grow else 0.0)
    elif s.name == "reconfiguration":
        work = stage_work(c)
        t = replay_reconfiguration(
            **common, work=work, reconfigure=s.reconfigure, min_nodes=s.min_nodes,
            every=s.every, checkpoint=s.checkpoint, restart=s.restart,
            most_pipelines=table is not None and table.per == "workers")
    else:
        def overhead(sizes: tuple[int, ...], t_step: float) -> float:
            f = Formation(tuple((0,) * n for n in sizes), (), 0, t_step)
            return s.rc_overhead(_ConfigOnly(c), f)
        def redo(sizes: tuple[int, ...], stage: int) -> float:
            return s.redo_time(c, len(sizes), stage)
        t = replay_redundancy(
            **common, replicas=max(c.replicas), overhead=overhead, slowdown=s.slowdown,
            rebalance=s.rebalance, restart=s.restart, threshold=s.threshold, every=s.every,
            checkpoint=s.checkpoint, redo=redo)
    if not math.isfinite(t):
        return None, "the workers left can never form the strategy's configuration"
    if any(end < t * (1 + 1e-12) for start, _, end in rows if start < t):
        return None, "needs a trace that only removes workers (one comes back within the run)"
    if not isinstance(c.failure_trace, (str, type(None))) and t > c.failure_trace.duration:
        return None, "needs the run to end within the trace"
    return t, ""


class StrategyReplayReference(Reference):
    """The wall time of a step-level strategy on a trace that only removes workers, with
    deterministic step times: :mod:`sim.analytic.strategies`' replays."""

    name = "replay"
    family = "training"
    metrics = ("training_time",)

    def applies(self, c: Any) -> Applies:
        s = c.strategy
        no = _first(
            (not _job_strategy(c), "needs a step-level strategy"),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.failure_trace is None, "needs a failure trace that removes workers"),
            (c.mtbf < math.inf or c.availability < 1 or c.domain_outage > 0
             or c.placement is not None, "needs the trace as the only failures"),
            (c.notice > 0, "needs no preemption notice"),
            (s is not None and s.name == "checkpoint-restart" and (
                s.interval != "fixed" or s.snapshot != "blocking"),
             "needs a fixed interval and blocking checkpoints"),
            (s is not None and s.name == "reconfiguration" and s.grow,
             "needs grow off (no worker joins on a removal trace)"),
            (getattr(s, "checkpoint_bandwidth", None) is not None,
             "needs the checkpoint and restart times given (not a plan's bytes over "
             "checkpoint_bandwidth, which vary with the formation)"),
            (s is not None and s.name not in ("checkpoint-restart", "redundancy",
                                              "reconfiguration"),
             "knows the built-in strategies only"),
        )
        if no is not None:
            return no
        t, why = _replay(c)
        if t is None:
            return Applies(False, why)
        return Applies(True, f"{s.name} replayed on a removal trace with deterministic steps")

    def predict(self, c: Any) -> dict[str, Any]:
        t, _ = _replay(c)
        return {"training_time": t}


class DilocoReference(Reference):
    """(issue 37) DiLoCo's outer loop on identical groups in lockstep: the exact wall time of
    :func:`sim.analytic.diloco.diloco_times` (vanilla: ``N T + (N / H) T_sync``; a fragment's
    sync hidden by the ``TAU`` inner steps it runs beside, the rest exposed), each group's inner
    step ``T`` from this family's own references, each sync the closed form
    :func:`sim.analytic.diloco.outer_sync_time` (hierarchical with ``k`` pipelines a group),
    and the size units each worker sends over the WAN tier
    (:func:`sim.analytic.diloco.outer_bytes_sent`)."""

    name = "diloco"
    family = "training"
    metrics = ("step_time_mean", "training_time", "throughput", "compute_utilisation",
               "wan_bytes_sent", "allreduce_bytes_sent", "bubble_fraction")

    def _group(self, c: Any) -> tuple[Any, dict[str, Any]] | str:
        from ..engines import predictions
        from .outer import group_config

        spec = c.diloco
        M = spec.groups or c.replicas[0]
        gc = group_config(c, M, 0)
        pred = predictions("training", gc)
        for key in ("step_time_mean", "compute_utilisation"):
            if pred[key]["value"] is None:
                return f"needs a group step with an exact reference ({pred[key]['note']})"
        return gc, pred

    def applies(self, c: Any) -> Applies:
        if c.diloco is None:
            return Applies(False, "needs sync diloco")
        no = _first(
            (c.network is not None, _NETWORK),
            (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
            (c.failures, "needs no failures"),
            (c.pass_time_distribution != "deterministic", "needs deterministic pass times"),
            (c.speed_spread > 0 or (c.speeds is not None and len(
                {s for row in c.speeds for s in row}) > 1), "needs equal replica speeds "
             "(identical groups in lockstep)"),
            (c.replica_times is not None, "needs the stage's times on every replica"),
        )
        if no is not None:
            return no
        got = self._group(c)
        if isinstance(got, str):
            return Applies(False, got)
        return Applies(True, "identical deterministic groups in lockstep, every link the "
                       "config's bandwidth and latency")

    def predict(self, c: Any) -> dict[str, Any]:
        from ..analytic import diloco as AD
        from .outer import fragment_stage_sets, fragment_stage_sizes

        spec = c.diloco
        M = spec.groups or c.replicas[0]
        k = c.replicas[0] // M
        gc, pred = self._group(c)  # type: ignore[misc]
        T = pred["step_time_mean"]["value"]
        Tc = T * pred["compute_utilisation"]["value"]
        frag = fragment_stage_sizes(c, spec)
        kw = dict(bits=spec.bits, value_bits=c.value_bits, topk=spec.topk, nodes_per_group=k)
        # the stages holding layers of the fragment, at once (the others take no part)
        tf = [max((AD.outer_sync_time(M, sizes[j], c.bandwidth, c.mean_latency, **kw)
                   if sizes[j] or c.mean_latency else 0.0) for j in part)
              for sizes, part in zip(frag, fragment_stage_sets(c, spec), strict=True)]
        times = AD.diloco_times(c.steps, T, spec.every, tf, overlap=spec.overlap,
                                compute_time=Tc)
        wan = 0.0
        for _t, p in AD.sync_schedule(c.steps, spec.every, spec.fragments):
            # each worker of stage j sends its share; the mean over the (equal) stages
            wan += sum(AD.outer_bytes_sent(M, S, **kw)[0] for S in frag[p]) / c.stages
        inner = pred["allreduce_bytes_sent"]["value"]
        return {"step_time_mean": T, "training_time": times.wall_time,
                "throughput": c.steps * c.microbatches / times.wall_time,
                "compute_utilisation": times.compute_utilisation, "wan_bytes_sent": wan,
                "allreduce_bytes_sent": (None if inner is None else
                                         inner + sum(AD.outer_bytes_sent(M, S, **kw)[1]
                                                     for t, p in AD.sync_schedule(
                                                         c.steps, spec.every, spec.fragments)
                                                     for S in frag[p]) / c.stages),
                "bubble_fraction": pred["bubble_fraction"]["value"]}


class _ConfigOnly:
    """A job-like view with only a config (what Redundancy.rc_overhead reads)."""

    def __init__(self, config: Any) -> None:
        self.config = config


# fastest_k first: where neither it nor schedule applies, schedule's reason is the one shown
# diloco first: on other configs the others' notes stay the last word, as before issue 37
for _obj in (TrainingDES(), JobEngine(), CompiledTraining(), DilocoReference(),
             FastestKReference(), ScheduleReference(),
             MMcReference(), SaturatedReference(), DalyReference(), SnapshotReference(),
             StrategyReplayReference(), CheckpointIntervalReference()):
    register(_obj)
