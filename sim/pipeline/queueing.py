"""The queueing engine: Study A's open-arrival pipeline with replicas as servers.

``PipelineConfig(queueing=True)`` turns on the server model of the training
system (:mod:`sim.training`) for the open-arrival pipeline. Each replica
serves one pass at a time and takes ``stage_time / speed`` (``speeds``,
default 1), a pass time drawn from ``stage_time_distribution``; microbatches
wait in queues, routed within each stage by ``routing`` (one shared FIFO per
stage, join the shortest queue, random in proportion to speed, or in turn).
Everything else is the pipeline's: the arrivals (``arrival`` at ``rate``:
evenly spaced, Poisson, or back to back), the failure model and placement
(built by :func:`sim.pipeline.des.build_pipeline_failures`, so a seed gives the same
failure paths as the DES), the hop times, failover after
``detection_timeout``, skipping within the budget, waiting up to
``max_wait``, and the metrics of :func:`sim.pipeline.pipeline_model`, whose
``latency_mean`` then includes the time spent queueing.

The pieces are the training system's, unchanged: :class:`sim.training.flow.ReplicaFlow`
(stages of :class:`sim.training.replica.Replica` servers, routing, failover,
skip and wait) driven by forward passes only, fed by :class:`OpenArrivals`
(a trainer with no steps). Two rules follow from the training model and
differ from the no-queueing DES: a pass queued at a replica that fails is
re-queued after the detection timeout too, and a skipped stage still costs
its hop to the next stage.

The exact reference :class:`TandemReference` is the mean sojourn of a Jackson
tandem of M/M/c stations (:func:`sim.analytic.tandem_sojourn`), which is the
M/M/c sojourn for one stage.
"""

from __future__ import annotations

import math

import simpy

from .. import analytic, engines
from ..engines import Applies, Engine, Reference
from ..errors import ConfigError
from ..rng import Streams
from ..training.config import TrainingConfig
from ..training.flow import ReplicaFlow
from ..training.replica import Microbatch
from ..training.schedules import Async
from ..training.traffic import traffic_for
from ..training.trainer import Trainer
from .config import PipelineConfig
from .des import LatencyHistogram, UnitDraws, build_pipeline_failures
from .engines import FAMILY, SNAPSHOT_METRICS, TIMED_METRICS

__all__ = ["QueueingPipeline", "OpenArrivals", "QueueingEngine", "TandemReference",
           "queueing_model", "stage_waits_reference", "METRICS"]

#: The queueing engine's metrics: the DES's, and the replicas' mean busy fraction.
METRICS = SNAPSHOT_METRICS + TIMED_METRICS + ("utilisation",)

_BLOCK = 4096  # Poisson gaps are drawn in blocks of this size (as the DES draws them)


def _flow_config(c: PipelineConfig) -> TrainingConfig:
    """The training-system values the flow reads, from the pipeline's (forward passes only)."""
    if c.network is not None:  # the hops cross the network (its flows share links)
        return TrainingConfig(
            stages=c.stages, replicas=c.replicas, microbatches=1, steps=1, schedule="async",
            routing=c.routing, forward_time=c.stage_time, backward_ratio=0.0,
            activation_size=c.transfer_size, detection_timeout=c.detection_timeout,
            skip_budget=c.skip_budget, skip_penalty=c.skip_penalty, penalty=c.penalty,  # type: ignore[arg-type]
            max_wait=c.max_wait, network=c.network, network_nodes=c.network_nodes, nic=c.nic,
            contention=c.contention, p2p=c.p2p, network_weighting=c.network_weighting)
    return TrainingConfig(
        stages=c.stages, replicas=c.replicas, microbatches=1, steps=1, schedule="async",
        routing=c.routing, forward_time=c.stage_time, backward_ratio=0.0,
        latency=c.latency if c.stages > 1 else 0.0,  # type: ignore[arg-type]
        activation_size=c.transfer_size, bandwidth=c.bandwidth,
        detection_timeout=c.detection_timeout, skip_budget=c.skip_budget,
        skip_penalty=c.skip_penalty, penalty=c.penalty, max_wait=c.max_wait,  # type: ignore[arg-type]
    )


class OpenArrivals(Trainer):
    """The pipeline's arrivals and accounting, in the trainer's place (no steps, no sync).

    Microbatch ``k`` enters stage 0 at ``(k + 1) / rate`` (``fixed``), after
    exponential gaps of mean ``1 / rate`` drawn from stream ``arrivals``
    (``poisson``, in blocks as the DES draws them), or as the previous one
    leaves (``back_to_back``, the first at time 0). A microbatch leaves when
    its last forward pass is done (delivered, with the quality of its skips)
    or when it meets an out stage with no skip and no wait left (dropped).
    """

    def __init__(self, config: PipelineConfig, env: simpy.Environment, flow: ReplicaFlow,
                 streams: Streams) -> None:
        super().__init__(flow.config, env, flow, Async())
        self.pc = config
        self.streams = streams
        self.quality_table = config.quality
        self.skip_hist = [0] * (config.stages + 1)
        self.crossings = 0
        self.finished_count = 0
        self.latency_hist = LatencyHistogram()

    # hooks the flow calls ------------------------------------------------------------
    def forward_done(self, mb: Microbatch) -> None:  # pragma: no cover - no backward passes
        self.finished(mb)

    def finished(self, mb: Microbatch) -> None:
        """``mb`` is delivered after its last stage."""
        k = mb.skipped
        lat = self.env.now - mb.t0
        self.delivered += 1
        self.skip_hist[k] += 1
        self.quality_sum += self.quality_table[k]
        self.latency_sum += lat
        self.latency_hist.add(lat)
        self.crossings += self.pc.stages
        self._left()

    def blocked(self, mb: Microbatch, j: int) -> None:
        """``mb`` met out stage ``j`` with no skip and no wait left: dropped."""
        mb.dead = True
        self.dropped += 1
        self.flow.release(mb)
        self.crossings += j
        self._left()

    def _left(self) -> None:
        self.finished_count += 1
        n = self.pc.microbatches
        if self.finished_count == n:
            self.done.succeed()
        elif self.pc.arrival == "back_to_back":
            # the next one enters now, after this event (no recursion through the flow)
            ev = self.env.timeout(0.0)
            ev.callbacks.append(lambda _e, k=self.finished_count: self._enter(k))

    def _enter(self, k: int) -> None:
        self.flow.arrive_fwd(Microbatch(k, None, self.pc.stages, self.env.now), 0)

    def run(self):
        """The arrival process (a generator method)."""
        c, env = self.pc, self.env
        self.attempted = c.microbatches
        if c.arrival == "back_to_back":
            self._enter(0)
            return
        gap = 1.0 / c.rate
        poisson = c.arrival == "poisson"
        rng = self.streams.rng("arrivals") if poisson else None
        gaps: list[float] = []
        for k in range(c.microbatches):
            if poisson:
                if not gaps:
                    gaps = rng.exponential(gap, _BLOCK).tolist()  # type: ignore[union-attr]
                yield env.timeout(gaps.pop())
            else:
                yield env.timeout(gap)
            self._enter(k)


class QueueingPipeline:
    """One replication of the queueing pipeline, built and wired.

    Parameters
    ----------
    config : PipelineConfig
        With ``queueing`` on.
    streams : Streams
        Failures draw from ``failures:*`` (as in the DES), arrivals from
        ``arrivals``, pass times from ``stage_time``, routing from ``routing``.
    """

    def __init__(self, config: PipelineConfig, streams: Streams) -> None:
        if not config.queueing:
            raise ConfigError("queueing", "True for the queueing engine (the DES answers the "
                              "no-queueing pipeline)", config.queueing)
        c = self.config = config
        env = self.env = simpy.Environment()
        speeds = c.speeds if c.speeds is not None else tuple((1.0,) * r for r in c.replicas)  # type: ignore[union-attr]
        draws = None
        if c.stage_time_distribution != "deterministic" and any(c.stage_time):  # type: ignore[arg-type]
            draws = UnitDraws(c.stage_time_distribution, c.stage_time_shape,
                              streams.rng("stage_time"))
        fc = _flow_config(c)
        self.flow = ReplicaFlow(fc, env, streams, Async(), speeds, unit_draws=draws,
                         traffic=traffic_for(fc, env))
        self.arrivals = OpenArrivals(c, env, self.flow, streams)
        self.failure_model, self.workers, _ = build_pipeline_failures(c, env, streams)
        for rep, w in zip(self.flow.replicas, self.workers, strict=True):
            w.on_change(rep.worker_changed)

    def run(self) -> dict[str, float]:
        """Start the failures, the servers and the arrivals; run until every microbatch left."""
        self.failure_model.start()
        for rep, w in zip(self.flow.replicas, self.workers, strict=True):
            rep.fm_up = w.up
        self.flow.start()
        self.arrivals.proc = self.env.process(self.arrivals.run())
        self.env.run(until=self.arrivals.done)
        return self.metrics()

    def metrics(self) -> dict[str, float]:
        """The metrics of :func:`sim.pipeline.pipeline_model`, and ``utilisation``."""
        c, a, flow = self.config, self.arrivals, self.flow
        n = max(a.finished_count, 1)
        delivered = a.delivered
        t = self.env.now
        nan = math.nan
        h = a.latency_hist
        out: dict[str, float] = {
            "microbatches": float(a.finished_count),
            "drop_rate": a.dropped / n,
            "delivered_rate": delivered / n,
            "mean_quality": a.quality_sum / delivered if delivered else nan,
            "quality_mass": a.quality_sum / n,
            "goodput": a.quality_sum / t if t > 0 else nan,
            "throughput": delivered / t if t > 0 else nan,
            "mean_skipped": (sum(k * x for k, x in enumerate(a.skip_hist)) / delivered
                             if delivered else nan),
            "failovers_per_microbatch": flow.lost_passes / n,
            "waits_per_microbatch": flow.waits / n,
            "stage_crossings": float(a.crossings),
            "simulated_time": t,
            "workers": float(c.workers),
            "worker_time": c.workers * t,
            "latency_mean": a.latency_sum / delivered if delivered else nan,
            "latency_p50": h.quantile(0.5),
            "latency_p99": h.quantile(0.99),
            "utilisation": (sum(r.busy_time for r in flow.replicas) / (c.workers * t)
                            if t > 0 else nan),
        }
        for k in range(c.skip_budget + 1):
            out[f"skipped_{k}"] = a.skip_hist[k] / n
        for j, stage in enumerate(flow.stages):  # per station, as a queueing peer reports them
            passes = sum(r.passes for r in stage)
            out[f"wait_stage{j}"] = (sum(r.queue_time for r in stage) / passes if passes
                                     else nan)
            out[f"utilisation_stage{j}"] = (sum(r.busy_time for r in stage) / (len(stage) * t)
                                            if t > 0 else nan)
        return out


def queueing_model(config: PipelineConfig, streams: Streams) -> dict[str, float]:
    """One replication of the queueing pipeline as flat metrics (a model for ``replicate``).

    Returns
    -------
    dict
        The metrics of :func:`sim.pipeline.pipeline_model` (``latency_*``
        include queueing; ``failovers_per_microbatch`` counts passes lost to
        failures), ``utilisation``, the replicas' mean busy fraction, and per
        stage ``j``: ``wait_stage{j}``, the mean time a completed pass waited
        in the stage's queues before a replica started it (from when it was
        queued at the live stage: a wait at an out stage is not in it), and
        ``utilisation_stage{j}``, the stage's replicas' mean busy fraction.

    Raises
    ------
    ConfigError
        When ``config.queueing`` is off.
    """
    return QueueingPipeline(config, streams).run()


class QueueingEngine(Engine):
    """The queueing pipeline (:class:`QueueingPipeline`): exactly the configs with ``queueing``."""

    name = "queueing"
    family = FAMILY
    speed = 110  # after the DES: listed last; it alone answers queueing configs
    metrics = METRICS
    requested = "replicas are servers with queues (the training system's server model)"

    def applies(self, config: PipelineConfig) -> Applies:
        """Exactly when ``queueing`` is on (no other engine answers those configs)."""
        if not config.queueing:
            return Applies(False, "queueing is off (a replica serves every microbatch at once)")
        return Applies(True, "queueing is on: replicas are servers, microbatches wait in queues")

    def run(self, config: PipelineConfig, streams: Streams) -> dict[str, float]:
        """One replication (:func:`queueing_model`)."""
        return queueing_model(config, streams)


def _tandem_applies(c: PipelineConfig) -> Applies:
    checks = (
        (not c.queueing, "needs queueing (replicas as servers)"),
        (c.routing != "queue", "needs queue routing (one shared FIFO per stage)"),
        (c.arrival != "poisson", "needs Poisson arrivals"),
        (c.stage_time_distribution != "exponential", "needs exponential stage times"),
        (any(t <= 0 for t in c.stage_time), "needs positive stage times"),  # type: ignore[union-attr]
        (c.speeds is not None and any(len(set(row)) > 1 for row in c.speeds),
         "needs equal speeds within each stage"),
        (c.failure_trace is not None or c.availability < 1
         or any(u > 0 for u in c.domain_placement.domain_outage.values()), "needs no failures"),
    )
    for bad, why in checks:
        if bad:
            return Applies(False, why)
    for j, (r, mu) in enumerate(zip(c.replicas, _service_rates(c), strict=True)):  # type: ignore[arg-type]
        if c.rate >= r * mu:
            return Applies(False, f"stage {j} is unstable (rate >= replicas x service rate)")
    return Applies(True, "M/M/c stations in tandem (Jackson): Poisson arrivals, exponential "
                         "passes, one FIFO per stage, no failures"
                   if c.stages > 1 else "M/M/c: Poisson arrivals, exponential passes, one FIFO")


def stage_waits_reference(c: PipelineConfig) -> list[float] | None:
    """Each stage's exact mean wait in queue where the tandem reference applies (else None).

    :func:`sim.analytic.tandem_waits`: the Erlang C wait of each M/M/c station.
    """
    if not _tandem_applies(c):
        return None
    return analytic.tandem_waits(list(c.replicas), c.rate, _service_rates(c))  # type: ignore[arg-type]


def _service_rates(c: PipelineConfig) -> list[float]:
    speed = [row[0] for row in c.speeds] if c.speeds is not None else [1.0] * c.stages
    return [v / t for v, t in zip(speed, c.stage_time, strict=True)]  # type: ignore[arg-type]


class TandemReference(Reference):
    """Mean sojourn of M/M/c stations in tandem (Jackson), with the hop times between them."""

    name = "mmc_tandem"
    family = FAMILY
    metrics = ("latency_mean",)

    def applies(self, config: PipelineConfig) -> Applies:
        """Queueing, queue routing, Poisson arrivals, exponential passes, no failures, stable."""
        return _tandem_applies(config)

    def predict(self, config: PipelineConfig) -> dict[str, float]:
        """``{"latency_mean": sum_j W_j + sum_j hop_j}`` (:func:`sim.analytic.tandem_sojourn`)."""
        c = config
        return {"latency_mean": analytic.tandem_sojourn(
            list(c.replicas), c.rate, _service_rates(c), c.hop_times)}  # type: ignore[arg-type]


for _obj in (QueueingEngine(), TandemReference()):
    engines.register(_obj)
