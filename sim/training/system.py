"""The built training system: failure model, replicas, flow and trainer, wired, then run.

Build and wire happen in :class:`TrainingSystem`'s constructor (desmod's
elaborate phase); :meth:`TrainingSystem.run` starts the failure processes, the
spot slots, the servers and the trainer, runs until ``N`` steps are done, and
returns flat metrics (:func:`training_model`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import simpy

from ..errors import ConfigError
from ..failures import FailureModel, read_trace
from ..rng import Streams
from ..timeline import NULL
from .billing import Presence
from .config import TrainingConfig
from .flow import LOST_CAUSES, ReplicaFlow, live_idle_share
from .framework import FrameworkFlow
from .instant import InstantEnd
from .replica import SpotSlot
from .schedules import SCHEDULE_POLICIES
from .stall import Watchdog, diagnose, interval_time, needs_watchdog, stall_limit
from .traffic import traffic_for
from .trainer import AsyncTrainer, StepTrainer, steady_throughput

__all__ = ["TrainingSystem", "build_failures", "draw_speeds", "training_model",
           "training_record", "METRICS", "FIGURES", "figures"]

#: Metrics of one replication (see :func:`training_model`).
METRICS = (
    "throughput", "throughput_steady", "goodput", "step_time_mean", "step_time_p50",
    "step_time_p99", "training_time", "finished", "steps_done", "bubble_fraction", "utilisation", "latency_mean",
    "drop_rate", "mean_quality", "mean_skipped", "passes", "lost_passes", "reroutes",
    "recomputes", "skips", "waits", "restarts", "checkpoints", "preemptions", "workers",
    "worker_hours", "samples", "samples_per_second", "samples_per_worker_hour", "cost",
    "samples_per_dollar", "quality_samples_per_dollar", "worker_availability",
    *(f"lost_{k}" for k in LOST_CAUSES),
)


#: (issue 37) Figures every training run reports beside :data:`METRICS` (see :func:`figures`).
FIGURES = ("compute_utilisation", "compute_utilisation_min", "compute_utilisation_max",
           "wan_bytes_sent", "wan_bytes_sent_max", "allreduce_bytes_sent")


def figures(per_worker: Any, wan: Any, allreduce: Any) -> dict[str, float]:
    """The figures of :data:`FIGURES` from per-worker arrays.

    ``compute_utilisation``: the fraction of the wall time a worker spends in
    its steps' compute phase (from a step's start until its last micro-batch
    is done: pipeline bubbles count, the step-end all-reduce, optimizer step,
    outer syncs, barriers, downloads and restarts do not, nor a phase's part the
    worker is not live in (down, or fetching its weights while its peers compute:
    :meth:`~sim.training.trainer.Trainer.worker_compute`); without a step
    barrier the whole run), mean, least and largest over the workers.
    ``wan_bytes_sent``: bytes a worker sent over the WAN tier (DiLoCo's
    outer syncs and model downloads; 0 without DiLoCo), mean and largest;
    ``allreduce_bytes_sent``: bytes a worker sent in the gradient
    all-reduces inside its group (its pipeline's data parallelism), mean.
    Neither counts pipeline hops or a worker's own weight download, whatever
    links they cross: they are the tiers' bytes, not the bytes across zones.
    """
    cu = np.asarray(per_worker, dtype=float)
    w = np.asarray(wan, dtype=float)
    a = np.asarray(allreduce, dtype=float)
    nan = math.nan
    return {
        "compute_utilisation": float(cu.mean()) if cu.size else nan,
        "compute_utilisation_min": float(cu.min()) if cu.size else nan,
        "compute_utilisation_max": float(cu.max()) if cu.size else nan,
        "wan_bytes_sent": float(w.mean()) if w.size else 0.0,
        "wan_bytes_sent_max": float(w.max()) if w.size else 0.0,
        "allreduce_bytes_sent": float(a.mean()) if a.size else 0.0,
    }


def draw_speeds(config: TrainingConfig, streams: Streams) -> tuple[tuple[float, ...], ...]:
    """The replicas' speeds: the config's, or drawn lognormal (mean 1) from stream ``speeds``."""
    if config.speeds is not None:
        return config.speeds
    reps = config.replicas
    sig = config.speed_spread
    if sig == 0:
        return tuple((1.0,) * r for r in reps)  # type: ignore[union-attr]
    rng = streams.rng("speeds")
    return tuple(tuple(float(v) for v in rng.lognormal(-sig * sig / 2.0, sig, r))
                 for r in reps)  # type: ignore[union-attr]


def _slot_names(c: TrainingConfig, slots: list[tuple[str, int, int]]) -> list[str | None] | None:
    """The instance each of ``slots`` replays by name (``c.trace_names``), or None."""
    names = c.trace_names
    if names is None:
        return None
    first = [sum(c.replicas[:j]) for j in range(len(c.replicas))]  # type: ignore[index,arg-type]
    return [names[first[j] + i] for _, j, i in slots]


def build_failures(env: simpy.Environment, config: TrainingConfig, streams: Streams,
                   slots: list[tuple[str, int, int]]) -> tuple[FailureModel, list[Any]]:
    """The failure model of ``config``'s workers (not started) and its workers, in slot order.

    ``slots`` are ``(name, stage, replica)`` in stage-major order. The
    placement's domains come first; then either a replayed trace (slot ``k``
    on worker ``k``, the stages as the domain policy's domains; by name when its
    instances are named as the workers or their hosts: ``config.trace_names``), or each
    worker's availability model, a named CSV trace overriding it by name. The
    training DES and the strategies' job engine build the same model, so a
    seed gives both the same failures.
    """
    c = config
    fm = FailureModel(env, streams)
    pl = c.domain_placement
    fm.add_placement_domains(pl, mean_downtime=c.domain_downtime,
                             distribution=c.failure_distribution, shape=c.failure_shape)
    named = isinstance(c.failure_trace, str)
    trace = read_trace(c.failure_trace).intervals if named else {}
    replayed = None
    if c.failure_trace is not None and not named:  # slot k = worker k, stage-major
        from ..traces import attach

        parents = [pl.replica_domains[j][i] for _, j, i in slots]
        replayed = attach(fm, c.failure_trace,
                          [(name, ch[-1] if ch else None) for (name, _, _), ch in zip(
                              slots, parents, strict=True)],
                          streams=streams, domain_of=[j for _, j, _ in slots],
                          names=_slot_names(c, slots))
    workers = []
    for k, (name, j, i) in enumerate(slots):
        if replayed is not None:
            w = replayed[k]
        else:
            chain = pl.replica_domains[j][i]
            w = fm.add_worker(name, chain[-1] if chain else None,
                              availability=c.availability, mean_downtime=c.mean_downtime,
                              distribution=c.failure_distribution, shape=c.failure_shape,
                              trace=trace.get(name))
        workers.append(w)
    return fm, workers


class TrainingSystem:
    """One replication of the training system, built and wired.

    Parameters
    ----------
    config : TrainingConfig
    streams : Streams
        Failures draw from ``failures:*``, preemptions from ``spot``, routing
        from ``routing``, pass times from ``pass_time``, arrivals from
        ``arrivals``, speeds from ``speeds``.
    recorder : sim.timeline.Recorder, optional
        The timeline's recorder, which the engine's components call as they run
        (default: none; the numbers are the same either way).
    """

    def __init__(self, config: TrainingConfig, streams: Streams, *, recorder: Any = None) -> None:
        c = self.config = config
        env = self.env = simpy.Environment()
        self.rec = rec = recorder if recorder is not None else NULL
        self.schedule = SCHEDULE_POLICIES[c.schedule]()
        self.speeds = draw_speeds(c, streams)
        flow_class = FrameworkFlow if c.framework else ReplicaFlow
        # the one adapter from the run's traffic to time, chosen once (closed form or flows)
        self.traffic = traffic_for(c, env, recorder=rec)
        self.flow = flow_class(c, env, streams, self.schedule, self.speeds, traffic=self.traffic,
                               recorder=rec)
        if self.schedule.step_barrier:
            self.trainer: Any = StepTrainer(c, env, self.flow, self.schedule)
        else:
            self.trainer = AsyncTrainer(c, env, self.flow, self.schedule, streams.rng("arrivals"))
        self.failure_model = self._wire_failures(streams)
        self.spots = []
        if c.mtbf < math.inf:
            self.spots = [SpotSlot(rep, c.mtbf, c.replace_time, streams.rng("spot", rep.stage, rep.index))
                          for rep in self.flow.replicas]

    def _wire_failures(self, streams: Streams) -> FailureModel:
        fm, self.workers = build_failures(
            self.env, self.config, streams,
            [(rep.name, rep.stage, rep.index) for rep in self.flow.replicas])
        for rep, w in zip(self.flow.replicas, self.workers, strict=True):
            w.on_change(rep.worker_changed)
        return fm

    def _wire_presence(self) -> None:
        """Billing and availability clocks, where the plain formulas do not say it all: a
        replayed trace bills a worker only while it is up, a price series is integrated over
        each worker's billed time, and a spot worker is available only while present."""
        c = self.config
        self.presence: list[Presence] | None = None
        named = isinstance(c.failure_trace, str)
        listed = set(read_trace(c.failure_trace).intervals) if named else set()
        billed = [c.failure_trace is not None and (not named or rep.name in listed)
                  for rep in self.flow.replicas]
        bill = any(billed) or c.price_series is not None
        avail = bool(self.spots)
        if not (bill or avail):
            return
        self.presence = []
        slots = {id(slot.replica): slot for slot in self.spots}
        for rep, w, tb in zip(self.flow.replicas, self.workers, billed, strict=True):
            p = Presence(self.env, w.own_up, trace_billed=tb, bill=bill, avail=avail,
                         series=c.price_series)
            w.on_own_change(p.own)
            slot = slots.get(id(rep))
            if slot is not None:
                slot.listeners.append(p.spot)
            self.presence.append(p)

    def run(self) -> dict[str, float]:
        """Start everything, run until the trainer is done; the replication's metrics."""
        self.failure_model.start()
        for rep, w in zip(self.flow.replicas, self.workers, strict=True):
            rep.fm_up = w.up
        self._wire_presence()
        if self.rec.on:  # the timeline: processes, down intervals, preemptions (listeners only)
            self.rec.start_training(self)
        if self.config.strategy is not None:  # a DES strategy (swarm): asked, never type-checked
            self.config.strategy.prepare_des(self)
        self.flow.start()
        for slot in self.spots:
            self.env.process(slot.run(self.env))
        self.trainer.proc = self.env.process(self.trainer.run())
        ends = [self.trainer.done]
        stop = self.config.max_time
        if stop < math.inf and not isinstance(self.config.failure_trace, (str, type(None))):
            # the config allows a max_time within rounding of the replay's end: stop at the end
            stop = min(stop, self.config.failure_trace.duration)
        instant = InstantEnd(self.env)  # the run's end and the watchdog's: after their instant
        if stop < math.inf:  # inclusive: every event at exactly stop happens first
            ends.append(instant.stop_at(stop))
        watch = None
        if needs_watchdog(self.config):
            watch = Watchdog(self.env, self.trainer, stall_limit(self.config), instant)
            ends.append(watch.event)
        # one condition over every end (a nested one would end a step of the event order later)
        self.env.run(until=ends[0] if len(ends) == 1 else self.env.any_of(ends))
        self.rec.close(self.env.now)
        out = self.metrics()
        if hasattr(self, "notices_used"):
            out["notices_used"] = float(self.notices_used)
        if self._stalled(watch):
            out["stall_reason"] = diagnose(self)
        return out

    def _stalled(self, watch: Watchdog | None) -> bool:
        """Stopped by the watchdog, or stopped at ``max_time`` without progress for at
        least one failure-free checkpoint interval."""
        if watch is not None and watch.fired:
            return True
        tr = self.trainer
        if tr.done.triggered or not self.schedule.step_barrier or not self.config.failures:
            return False
        return self.env.now - tr.progress_t >= interval_time(self.config)[0]

    def metrics(self) -> dict[str, float]:
        """Flat metrics of the run (see :func:`training_model`)."""
        c, tr, flow = self.config, self.trainer, self.flow
        wall = self.env.now
        nan = math.nan
        finished = tr.done.triggered
        if self.schedule.step_barrier:
            kept = [tr.kept[k] for k in range(tr.steps_done)]
            delivered = sum(d for d, _ in kept)
            quality = sum(q for _, q in kept)
            steps = tr.step_times
            bubble = live_idle_share(tr.compute_busy, c.workers * tr.compute_time,
                                     tr.compute_down)
            steady = nan
        else:
            delivered, quality = tr.delivered, tr.quality_sum
            steps = tr.step_times_async()
            busy = sum(r.busy_time for r in flow.replicas)
            bubble = live_idle_share(busy, c.workers * wall, flow.down.at(wall))
            steady = steady_throughput(tr.finish_times) if c.arrival == "saturated" else nan
        busy = sum(r.busy_time for r in flow.replicas)
        pres = getattr(self, "presence", None)
        if pres is not None and pres[0].bill is not None:
            hours = [p.bill.total(wall) / c.hour for p in pres]  # type: ignore[union-attr]
        else:
            hours = [(wall - (s.unbilled_until(wall))) / c.hour for s in self.spots] or \
                [wall / c.hour] * c.workers
        series_cost = None
        if c.price is None and c.price_series is not None:
            series_cost = float(sum(p.bill.priced(wall) for p in pres)) / c.hour  # type: ignore[union-attr]
        if pres is not None and pres[0].avail is not None:
            availability = float(np.mean([p.avail.total(wall) / wall if wall > 0  # type: ignore[union-attr]
                                          else float(p.present and p.own_up) for p in pres]))
        else:
            availability = float(np.mean([w.own_availability(wall) for w in self.workers]))
        attempted = tr.delivered + tr.dropped
        samples = delivered * c.samples_per_microbatch
        out = training_record(
            c, wall=wall, finished=finished, delivered=delivered, quality=quality,
            samples=samples, quality_samples=quality * c.samples_per_microbatch,
            step_times=steps, steps_done=float(tr.steps_done), hours=hours,
            series_cost=series_cost, availability=availability, lost=flow.lost, measured={
                "throughput_steady": steady,
                "bubble_fraction": bubble,
                "utilisation": busy / (c.workers * wall) if wall > 0 else nan,
                "latency_mean": tr.latency_sum / tr.delivered if tr.delivered else nan,
                "drop_rate": tr.dropped / attempted if attempted else nan,
                "mean_quality": tr.quality_sum / tr.delivered if tr.delivered else nan,
                "mean_skipped": tr.skipped_sum / tr.delivered if tr.delivered else nan,
                "passes": float(flow.passes), "lost_passes": float(flow.lost_passes),
                "reroutes": float(flow.reroutes), "recomputes": float(flow.recomputes),
                "skips": float(flow.skips), "waits": float(flow.waits),
                "restarts": float(tr.restarts), "checkpoints": float(tr.checkpoints),
                "preemptions": float(sum(s.preemptions for s in self.spots))})
        if not getattr(self, "figures", False):
            return out
        # (issue 37) the figures dtsim train reports: compute utilisation, bytes sent
        if not self.schedule.step_barrier:  # no step barrier: no sync phase, the whole run computes
            cu = np.full(c.workers, 1.0 if wall > 0 else nan)
        elif wall > 0:  # a worker's compute phases while it was live (not while down)
            cu = np.asarray(tr.worker_compute(c.workers, wall)) / wall
        else:
            cu = np.full(c.workers, nan)
        sent = self.traffic.sent_by(flow.replicas)
        out.update(figures(cu, np.zeros(c.workers), sent))
        return out


def training_record(config: TrainingConfig, *, wall: float, finished: bool, delivered: float,
                    quality: float, samples: float, quality_samples: float,
                    step_times: Any, steps_done: float, hours: list[float],
                    series_cost: float | None, availability: float, lost: dict[str, float],
                    measured: dict[str, float]) -> dict[str, float]:
    """The flat record of one training run, :data:`METRICS` in order: every engine's (the DES,
    the compiled loop, the step-level job engine) computed one way from what it measured.

    Parameters
    ----------
    config : TrainingConfig
    wall : float
        The simulated time the run ended at.
    finished : bool
        The ``N`` steps were done.
    delivered, quality : float
        Microbatches of the kept steps, and their quality (the sum of each one's quality).
    samples, quality_samples : float
        Samples, and quality-weighted samples, of those microbatches.
    step_times : sequence of float
        Every completed step attempt's time (async: per ``m`` completions).
    steps_done : float
    hours : list of float
        Billed hours of each worker (stage-major).
    series_cost : float or None
        With a price series (and no ``price``): the run's cost (each worker's integral
        of the series over its billed time).
    availability : float
        The workers' mean availability over the run.
    lost : dict
        Time lost per cause (:data:`sim.training.flow.LOST_CAUSES`).
    measured : dict
        The engine's own figures for the other metrics (``throughput_steady``,
        ``bubble_fraction``, ``utilisation``, ``latency_mean``, ``drop_rate``,
        ``mean_quality``, ``mean_skipped`` and the counts), NaN where it has none.
    """
    c = config
    nan = math.nan
    worker_hours = float(sum(hours))
    cost = nan
    if c.price is not None:
        if isinstance(c.price, tuple):
            prices = [p for row in c.price for p in row]
        else:
            prices = [float(c.price)] * c.workers
        cost = float(sum(p * h for p, h in zip(prices, hours, strict=True)))
    elif series_cost is not None:
        cost = series_cost
    st = np.asarray(step_times, dtype=float)
    out: dict[str, float] = {
        "throughput": delivered / wall if wall > 0 else nan,
        "throughput_steady": measured["throughput_steady"],
        "goodput": quality / wall if wall > 0 else nan,
        "step_time_mean": float(st.mean()) if st.size else nan,
        "step_time_p50": float(np.quantile(st, 0.5)) if st.size else nan,
        "step_time_p99": float(np.quantile(st, 0.99)) if st.size else nan,
        "training_time": wall if finished else nan,
        "finished": float(finished),
        "steps_done": steps_done,
    }
    for k in ("bubble_fraction", "utilisation", "latency_mean", "drop_rate", "mean_quality",
              "mean_skipped", "passes", "lost_passes", "reroutes", "recomputes", "skips",
              "waits", "restarts", "checkpoints", "preemptions"):
        out[k] = measured[k]
    out.update({
        "workers": float(c.workers), "worker_hours": worker_hours, "samples": samples,
        "samples_per_second": samples / wall if wall > 0 else nan,
        "samples_per_worker_hour": samples / worker_hours if worker_hours > 0 else nan,
        "cost": cost,
        "samples_per_dollar": samples / cost if cost and cost > 0 else nan,
        "quality_samples_per_dollar": quality_samples / cost if cost and cost > 0 else nan,
        "worker_availability": availability,
    })
    for k in LOST_CAUSES:
        out[f"lost_{k}"] = float(lost[k])  # a plain float (was numpy's at times)
    return out


def training_model(config: TrainingConfig, streams: Streams, *,
                   figures: bool = True, recorder: Any = None) -> dict[str, float]:
    """One replication of the training system as flat metrics (a model for ``replicate``).

    ``recorder`` (a :class:`sim.timeline.Recorder`) records the run's events as it runs.

    Returns
    -------
    dict
        ``throughput`` (delivered microbatches of the ``N`` kept steps per
        time unit), ``throughput_steady`` (async, saturated: completions per
        time between the first and last 10 % of completions, free of fill and
        drain), ``goodput`` (quality-weighted), ``step_time_mean``/``_p50``/
        ``_p99`` (every completed step attempt; async: time per ``m``
        completions), ``training_time`` (simulated wall time to finish ``N`` steps; not the runner's ``wall_time``), ``bubble_fraction``
        (idle fraction of the live replicas, up and holding their weights, during the
        steps' compute phases, ``1 - busy / (workers x compute time - down)`` with
        ``down`` the worker-time of the replicas not live in those phases: a replica down,
        or waiting for its replacement or weights, is not counted (its time is in
        ``lost_*`` and ``worker_availability``), so a one-stage run has no bubble from its
        failures; async: over the run), ``utilisation`` (busy fraction, mean over replicas),
        ``latency_mean`` (microbatch sojourn), ``drop_rate``, ``mean_quality``,
        ``mean_skipped``, counts (``passes``, ``lost_passes``, ``reroutes``,
        ``recomputes``, ``skips``, ``waits``, ``restarts``, ``checkpoints``,
        ``preemptions``: the spot model's only, a replayed trace's removals are failures,
        in ``worker_availability``), ``workers``, ``worker_hours`` (billed: a preempted
        slot is not billed until its replacement, a worker replaying a trace
        only while up), ``samples``,
        ``samples_per_second``, ``samples_per_worker_hour``, ``cost`` and
        ``samples_per_dollar`` (NaN unpriced; billed hours: a spot slot not while
        it waits for its replacement, a worker replaying a trace not while the
        trace has it down; with a price series, its integral over each worker's
        billed time), ``quality_samples_per_dollar`` (quality-weighted samples
        per dollar: skipped stages cost quality), ``worker_availability`` (the
        workers' own up-fraction over the run, mean over workers; under the spot
        model, up and present: a slot waiting for its replacement is not
        available), and ``lost_<cause>``: replica
        time in lost passes (``lost_pass``), recomputed forwards
        (``recompute``), weight downloads (``download``); detection timeouts
        charged per re-queued pass (``reroute``); microbatch time waiting at
        out stages (``stall``); wall time rolled back and spent restarting
        (``restart``) and checkpointing (``checkpoint``).

    With ``figures`` (the default, and what ``dtsim train``'s DES engine asks) the run
    also reports :data:`FIGURES` (:func:`figures`); a DiLoCo run always does, with
    :data:`sim.training.outer.DILOCO_METRICS`, so a sweep that sets DiLoCo beside data
    parallelism has every figure at every point (``figures=False`` leaves them out).

    A step-level strategy (``checkpoint-restart``, ``redundancy``, ``reconfiguration``) runs
    on its job engine (:func:`sim.training.strategies.job.job_model`), as ``dtsim train`` and
    :func:`sim.engines.select` run it.
    """
    if config.allreduce_buckets is not None:  # the closed form's: refused, never mis-timed
        raise ConfigError("allreduce_buckets", "unset to simulate (the DES times a plan's "
                          "overlapped all-reduce over its network: allreduce_sizes)", "given")
    if config.diloco is not None:  # (issue 37) DiLoCo's groups and outer loop
        from .outer import diloco_model

        return diloco_model(config, streams, recorder=recorder)
    if config.strategy is not None and config.strategy.engine == "job":
        # a step-level strategy (checkpoint-restart, redundancy, reconfiguration) runs on the
        # job engine: the DES ignored it and its step_times, and timed the microbatch
        # defaults (forward 1 s) as if there were no strategy
        from .strategies.job import job_model

        return job_model(config, streams, recorder=recorder)
    system = TrainingSystem(config, streams, recorder=recorder)
    system.figures = figures  # (issue 37) FIGURES too, as dtsim train's engine asks
    return system.run()
