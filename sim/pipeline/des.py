"""The pipeline DES engine: stages, replicas, failover, skipping, in simulated time.

A microbatch crosses ``L`` stages in order. Stage ``j`` is held by ``r_j``
replica workers placed in failure domains (by default the study's placement:
all replicas of a stage share one domain of unavailability ``rho``). Workers
and domains fail and recover as the renewal processes of
:mod:`sim.failures`, in their stationary regime from time 0.

On arrival at a stage, a live replica serves it for the stage's compute time,
then the activations travel to the next stage (``latency + size/bandwidth``).
If the serving replica fails during compute, the microbatch fails over to
another live replica after ``detection_timeout`` and recomputes (the time is
charged). If the stage is *out* (no live replica, which includes its domain
being out), the microbatch skips it while its skip budget ``s`` lasts,
losing quality, else waits up to ``max_wait`` for a replica to come back and is
dropped if none does.

With zero compute and transfer time and ``max_wait = 0`` every microbatch sees
a snapshot of the stationary system, so its drop probability is exactly
``P(Bin(L, q) > s)`` with ``q = rho + (1 - rho)(1 - a)**r``. Successive
microbatches are correlated in time (a worker stays down a while), which is
why intervals come from independent replications (:func:`sim.runner.replicate`).

Speed
-----
The state the microbatches read is maintained by ``on_change`` callbacks, never
polled: per stage an ordered set of live replicas (its size is the live count)
and the number of out stages. A crossing therefore costs O(1):

* zero compute and transfer time and ``max_wait = 0``: a microbatch is one
  look at the number of out stages (no SimPy event besides its arrival);
  with ``max_wait > 0`` or a trace, a plain loop over the stages;
* with compute time: at most one ``timeout`` per stage (compute and the
  transfer to the next stage merged; a failure during the transfer does not
  affect the microbatch), a failure reaching the microbatch as
  ``process.interrupt(Transition)`` from the failing worker's callback;
* lookahead: every component publishes the time of its next scheduled
  transition (``Component.next_own_change``), so a run of stages that cannot
  change before the microbatch is done with them is crossed with a single
  ``timeout``. The results are identical to the stage-by-stage path (a test
  pins this); when outages are long compared with a stage time, a whole
  pipeline crossing costs one or two SimPy events.

Replicas are not contended resources: a replica serves every microbatch that
reaches it at once (no queueing), so latency reflects compute, transfer,
failover and waiting only. ``queueing=True`` makes them servers with queues:
that is the queueing engine's (:mod:`sim.pipeline.queueing`), and this one
refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from ..errors import ConfigError
from ..failures import FailureModel, Transition, make_distribution
from ..progress import report
from ..rng import Streams
from ..timeline import NULL
from .config import PipelineConfig

__all__ = [
    "UnitDraws",
    "LatencyHistogram",
    "build_pipeline_failures",
    "PipelineRun",
    "Pipeline",
    "run_pipeline",
    "des_pipeline_model",
]

_BLOCK = 4096  # random durations are drawn in blocks of this size
_ALWAYS = math.inf  # registered compute end when no transfer follows: any failure interrupts


# --------------------------------------------------------------------------- simulation


class UnitDraws:
    """Unit-mean random durations drawn in blocks (scale by the stage's mean).

    The law is :func:`sim.failures.make_distribution` at mean 1, the same
    duration law the failure processes use.
    """

    def __init__(self, kind: str, shape: float | None, rng: np.random.Generator) -> None:
        self.law = make_distribution(kind, 1.0, shape)
        self.rng = rng
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self.law.sample(self.rng, _BLOCK).tolist()
        return self._buf.pop()


@dataclass
class PipelineRun:
    """What one replication produced.

    Attributes
    ----------
    metrics : dict
        Flat metrics (see :func:`des_pipeline_model`).
    records : dict of numpy arrays or None
        Per-microbatch ``arrival``, ``finish``, ``skipped``, ``quality``,
        ``delivered``, ``failovers`` (when ``config.records``).
    trace : list of tuple or None
        ``(time, microbatch, event, stage, replica)`` (when ``config.trace``);
        events are arrive, serve, fail, failover, skip, wait, drop, deliver;
        ``replica`` is the index within the stage (-1 when not applicable).
    """

    metrics: dict[str, float]
    records: dict[str, np.ndarray] | None = None
    trace: list[tuple[float, int, str, int, int]] | None = None


class LatencyHistogram:
    """Log-binned latency histogram (400 bins a decade): quantiles within 0.3%, constant memory."""

    PER_DECADE = 400
    LOW = -9  # 1e-9

    def __init__(self) -> None:
        self.nbins = self.PER_DECADE * 21
        self.counts = [0] * (self.nbins + 2)  # [0] zero, [-1] overflow
        self.n = 0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, x: float) -> None:
        self.n += 1
        if x < self.lo:
            self.lo = x
        if x > self.hi:
            self.hi = x
        if x <= 0.0:
            self.counts[0] += 1
            return
        b = int((math.log10(x) - self.LOW) * self.PER_DECADE) + 1
        self.counts[min(max(b, 1), self.nbins + 1)] += 1

    def quantile(self, p: float) -> float:
        if self.n == 0:
            return math.nan
        target = p * self.n
        cum = np.cumsum(self.counts)
        b = int(np.searchsorted(cum, target, side="left"))
        if b == 0:
            v = 0.0
        else:
            v = 10.0 ** (self.LOW + (b - 0.5) / self.PER_DECADE)
        return float(min(max(v, self.lo), self.hi))


def build_pipeline_failures(config: PipelineConfig, env: simpy.Environment, streams: Streams
                   ) -> tuple[FailureModel, list[Any], list[list[int]]]:
    """The failure model of a pipeline: its placement's domains and one worker per replica.

    Parameters
    ----------
    config : PipelineConfig
    env : simpy.Environment
    streams : Streams
        Failures draw from ``failures:*`` streams (a replayed trace from its own).

    Returns
    -------
    (FailureModel, workers, stage_workers)
        The model (not started), the workers in stage order (replica ``i`` of
        stage ``j`` is named ``s{j}r{i}``), and each stage's indices into them.
        Built in the same order for every engine that simulates failures, so a
        seed gives the same failure paths in each.
    """
    c = config
    pl = c.domain_placement
    fm = FailureModel(env, streams)
    fm.add_placement_domains(pl, mean_downtime=c.domain_downtime,
                             distribution=c.failure_distribution, shape=c.failure_shape)
    workers: list[Any] = []
    stage_workers: list[list[int]] = []
    replayed = None
    if c.failure_trace is not None:
        from ..traces import attach

        slots = [(f"s{j}r{i}", chain[-1] if chain else None, j)
                 for j, stage in enumerate(pl.replica_domains) for i, chain in enumerate(stage)]
        replayed = iter(attach(fm, c.failure_trace, [(n, p) for n, p, _ in slots],
                               streams=streams, domain_of=[j for _, _, j in slots],
                               names=c.trace_names))
    for j, stage in enumerate(pl.replica_domains):
        ids = []
        for i, chain in enumerate(stage):
            if replayed is not None:
                w = next(replayed)
            else:
                w = fm.add_worker(f"s{j}r{i}", chain[-1] if chain else None,
                                  availability=c.availability, mean_downtime=c.mean_downtime,
                                  distribution=c.failure_distribution, shape=c.failure_shape)
            ids.append(len(workers))
            workers.append(w)
        stage_workers.append(ids)
    return fm, workers, stage_workers


class Pipeline:
    """A built pipeline: failure model wired to per-stage live sets, ready to run.

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams
        Failures draw from ``failures:*`` streams, arrivals from ``arrivals``,
        compute times from ``stage_time``.
    env : simpy.Environment, optional
    recorder : sim.timeline.Recorder, optional
        The timeline's recorder; with one, every stage goes the traced path
        (:meth:`_stage`), whose numbers are the fast path's.

    Notes
    -----
    Build and wire happen in the constructor; :meth:`run` starts the failure
    processes and the arrivals, and runs until every microbatch has left.
    """

    def __init__(self, config: PipelineConfig, streams: Streams,
                 env: simpy.Environment | None = None, *, recorder: Any = None) -> None:
        self.config = c = config
        self.env = env if env is not None else simpy.Environment()
        self.timeline = recorder if recorder is not None else NULL  # (sim.timeline)
        self.streams = streams
        L = c.stages
        self.L = L
        self.s = c.skip_budget
        self.quality = c.quality
        if c.queueing:
            raise ConfigError("queueing", "False for the no-queueing DES (the queueing engine, "
                              "sim.pipeline.queueing, answers queueing)", c.queueing)
        # -- build the failure model from the placement -------------------------
        fm, self.workers, self.stage_workers = build_pipeline_failures(c, self.env, streams)
        self.failure_model = fm
        self.worker_stage: list[int] = [j for j, ids in enumerate(self.stage_workers) for _ in ids]
        # -- wire: live sets, out count, recovery events, serving registries ---
        self.live: list[dict[int, None]] = [{} for _ in range(L)]
        self.n_out = 0
        self._recovered: list[simpy.Event | None] = [None] * L
        self.serving: list[dict[Any, float]] = [{} for _ in self.workers]
        for idx, w in enumerate(self.workers):
            w.on_change(self._callback(idx, self.worker_stage[idx]))
        # -- per-stage timing ---------------------------------------------------
        self.stage_time = c.stage_time
        hops = c.hop_times
        self.hop = tuple(hops) + (0.0,)
        self._draw = None
        if c.stage_time_distribution != "deterministic" and any(c.stage_time):  # type: ignore[arg-type]
            self._draw = UnitDraws(c.stage_time_distribution, c.stage_time_shape,
                                    streams.rng("stage_time"))
        # -- accumulators -------------------------------------------------------
        self.finished = 0
        self.dropped = 0
        self.skip_hist = [0] * (L + 1)
        self.quality_sum = 0.0
        self.latency_sum = 0.0
        self.failovers = 0
        self.waits = 0
        self.crossings = 0
        self.latency_hist = LatencyHistogram()
        n = c.microbatches
        self.rec: dict[str, np.ndarray] | None = None
        if c.records:
            self.rec = {
                "arrival": np.full(n, np.nan), "finish": np.full(n, np.nan),
                "skipped": np.zeros(n, dtype=np.int32), "quality": np.zeros(n),
                "delivered": np.zeros(n, dtype=bool), "failovers": np.zeros(n, dtype=np.int32),
            }
        self.trace: list[tuple[float, int, str, int, int]] | None = [] if c.trace else None
        self.done = self.env.event()
        # -- lookahead: the components whose transitions can change each stage --
        self.lookahead = True
        self._next_change = [0.0] * L
        self._stage_components: list[list[Any]] = []
        for ids in self.stage_workers:
            comps: dict[str, Any] = {}
            for idx in ids:
                w = self.workers[idx]
                comps[w.name] = w
                for d in w.ancestors():
                    comps[d.name] = d
            self._stage_components.append(list(comps.values()))

    # -- failure callbacks --------------------------------------------------------
    def _callback(self, idx: int, j: int) -> Callable[[Any, bool, float], None]:
        live = self.live[j]
        serving = self.serving[idx]

        def changed(comp: Any, up: bool, now: float) -> None:
            if up:
                live[idx] = None
                if len(live) == 1:
                    self.n_out -= 1
                    ev = self._recovered[j]
                    if ev is not None:
                        self._recovered[j] = None
                        ev.succeed()
            else:
                del live[idx]
                if not live:
                    self.n_out += 1
                if serving:
                    cause = None
                    for proc, end in list(serving.items()):
                        if end > now:
                            if cause is None:
                                cause = Transition(comp.name, False, now)
                            proc.interrupt(cause)
        return changed

    def _recovery(self, j: int) -> simpy.Event:
        ev = self._recovered[j]
        if ev is None:
            ev = self._recovered[j] = self.env.event()
        return ev

    # -- outcomes -------------------------------------------------------------------
    def _finish(self, mb: int, t0: float, k: int, failovers: int, delivered: bool) -> None:
        now = self.env.now
        self.finished += 1
        self.failovers += failovers
        if delivered:
            q = self.quality[k]
            self.skip_hist[k] += 1
            self.quality_sum += q
            lat = now - t0
            self.latency_sum += lat
            self.latency_hist.add(lat)
        else:
            self.dropped += 1
            q = 0.0
        if self.rec is not None:
            r = self.rec
            r["arrival"][mb] = t0
            r["finish"][mb] = now
            r["skipped"][mb] = k
            r["quality"][mb] = q
            r["delivered"][mb] = delivered
            r["failovers"][mb] = failovers
        if self.trace is not None:
            self.trace.append((now, mb, "deliver" if delivered else "drop", -1, -1))
        if not delivered:
            self.timeline.pipeline_event("drop", mb, None, now)
        if self.finished == self.config.microbatches:
            self.done.succeed()

    # -- microbatches ---------------------------------------------------------------
    def _instant(self, mb: int, t0: float) -> tuple[int, int] | None:
        """Cross a zero-time pipeline now; returns ``(stage, skipped)`` if it must wait."""
        if self.config.max_wait == 0 and self.trace is None:
            k = self.n_out  # the number of out stages: skipped, or dropped past s
            self.crossings += self.L
            if self.timeline.on:
                self.timeline.snapshot_skips(self, mb, t0)
            self._finish(mb, t0, min(k, self.s), 0, k <= self.s)
            return None
        live, s, tr = self.live, self.s, self.trace
        k = 0
        for j in range(self.L):
            if live[j]:
                if tr is not None:
                    tr.append((t0, mb, "serve", j, next(iter(live[j])) - self.stage_workers[j][0]))
                continue
            if k < s:
                k += 1
                if tr is not None:
                    tr.append((t0, mb, "skip", j, -1))
                self.timeline.pipeline_event("skip", mb, j, t0)
                continue
            if self.config.max_wait > 0:
                self.crossings += j
                return j, k
            self.crossings += j
            self._finish(mb, t0, k, 0, False)
            return None
        self.crossings += self.L
        self._finish(mb, t0, k, 0, True)
        return None

    def _run(self, mb: int, t0: float, j0: int, k: int):
        """The microbatch process from stage ``j0`` with ``k`` skips so far.

        Lookahead first: consecutive stages whose components (workers and their
        domains) have no transition scheduled before the microbatch is done
        with them are crossed with a single ``timeout`` (their outcome is
        certain). A stage that may change is served with one ``timeout``,
        registered for an interrupt; anything else (stage out, a failure during
        compute, tracing) goes to :meth:`_stage`.
        """
        env = self.env
        proc = env.active_process
        timeout = env.timeout
        live_all, serving, L = self.live, self.serving, self.L
        stage_time, hop, draw = self.stage_time, self.hop, self._draw
        fast = self.trace is None and not self.timeline.on
        lookahead = fast and self.lookahead
        nxt, comps, s = self._next_change, self._stage_components, self.s
        if draw is not None:
            # Draw this microbatch's compute times now, in stage order, so the
            # stream is consumed identically with or without lookahead (which
            # looks at later stages early) and whatever else is in flight.
            stage_time = list(stage_time)
            for i in range(j0, L):
                if stage_time[i]:
                    stage_time[i] *= draw()
            draw = None
        failovers = 0
        j = j0
        while j < L:
            compute = stage_time[j]
            if draw is not None and compute:
                compute *= draw()
            if lookahead:
                # Cross stages j, j+1, ... in one timeout while none of their
                # components has a transition scheduled before the microbatch
                # is done with that stage: the outcome is then certain now.
                now = env.now
                t = now
                jj = j
                c = compute
                while True:
                    nx = nxt[jj]
                    if nx <= now:  # a component changed since cached: recompute
                        nx = math.inf
                        for comp in comps[jj]:
                            if comp.next_own_change < nx:
                                nx = comp.next_own_change
                        nxt[jj] = nx
                    if live_all[jj]:
                        if nx <= t + c:
                            break
                        t = t + (c + hop[jj])
                    elif k < s and nx > t:
                        k += 1
                    else:
                        break
                    jj += 1
                    if jj == L:
                        break
                    c = stage_time[jj]
                    if draw is not None and c:
                        c *= draw()
                if jj > j:
                    if t > now:
                        yield timeout(t - now)
                    j = jj
                    if j == L:
                        break
                    compute = c
            live = live_all[j]
            if live and fast:
                if compute > 0.0:
                    reg = serving[next(iter(live))]
                    h = hop[j]
                    reg[proc] = env.now + compute if h else _ALWAYS
                    try:
                        yield timeout(compute + h)
                    except simpy.Interrupt:
                        del reg[proc]
                        failovers += 1
                        k, status = yield from self._stage(mb, j, k, proc, compute, True)
                        failovers += abs(status) >> 1
                        if status < 0:
                            self.crossings += j - j0
                            self._finish(mb, t0, k, failovers, False)
                            return
                        j += 1
                        continue
                    del reg[proc]
                elif hop[j] > 0.0:
                    yield timeout(hop[j])
                j += 1
                continue
            k, status = yield from self._stage(mb, j, k, proc, compute, False)
            failovers += abs(status) >> 1
            if status < 0:
                self.crossings += j - j0
                self._finish(mb, t0, k, failovers, False)
                return
            j += 1
        self.crossings += L - j0
        self._finish(mb, t0, k, failovers, True)

    def _stage(self, mb: int, j: int, k: int, proc: Any, compute: float, failed: bool):
        """General handling of stage ``j``: skip, wait, drop, serve with failover, trace.

        Returns ``(k, status)``: ``status`` is ``-(2 * failovers + 1)`` when
        dropped, otherwise ``2 * failovers + 1`` (served, or skipped with ``k``
        incremented); ``failovers`` counts the failures met here either way.
        """
        env = self.env
        live = self.live[j]
        tr = self.trace
        detect = self.config.detection_timeout
        max_wait = self.config.max_wait
        dur = compute + self.hop[j]
        failovers = 0
        while True:
            if failed:  # the serving replica failed during compute
                failed = False
                if detect > 0:
                    yield env.timeout(detect)
                if tr is not None and live:
                    tr.append((env.now, mb, "failover", j, -1))
                if live:
                    self.timeline.pipeline_event("failover", mb, j, env.now)
            if not live:
                if k < self.s:
                    if tr is not None:
                        tr.append((env.now, mb, "skip", j, -1))
                    self.timeline.pipeline_event("skip", mb, j, env.now)
                    return k + 1, 2 * failovers + 1
                if max_wait > 0:
                    self.waits += 1
                    if tr is not None:
                        tr.append((env.now, mb, "wait", j, -1))
                    self.timeline.pipeline_event("wait", mb, j, env.now)
                    ev = self._recovery(j)
                    if max_wait == math.inf:
                        yield ev
                    else:
                        yield ev | env.timeout(max_wait)
                if not live:
                    return k, -(2 * failovers + 1)
            w = next(iter(live))
            if tr is not None:
                tr.append((env.now, mb, "serve", j, w - self.stage_workers[j][0]))
            t_s = env.now
            if compute <= 0.0:
                if dur > 0.0:
                    yield env.timeout(dur)
                    self.timeline.serve(mb, j, w - self.stage_workers[j][0], t_s, 0.0, dur)
                return k, 2 * failovers + 1
            reg = self.serving[w]
            reg[proc] = env.now + compute
            try:
                yield env.timeout(dur)
            except simpy.Interrupt:
                del reg[proc]
                failovers += 1
                failed = True
                self.timeline.serve(mb, j, w - self.stage_workers[j][0], t_s, compute, 0.0,
                               lost_at=env.now)
                if tr is not None:
                    tr.append((env.now, mb, "fail", j, w - self.stage_workers[j][0]))
                continue
            del reg[proc]
            self.timeline.serve(mb, j, w - self.stage_workers[j][0], t_s, compute, self.hop[j])
            return k, 2 * failovers + 1

    def _arrivals(self):
        env, c = self.env, self.config
        n = c.microbatches
        tr = self.trace
        if c.arrival == "back_to_back":
            for mb in range(n):
                if not mb & 511:  # the progress bar's fraction (sim.progress; no draw, no effect)
                    report(mb / n)
                if tr is not None:
                    tr.append((env.now, mb, "arrive", -1, -1))
                yield from self._run(mb, env.now, 0, 0)
            return
        gap = 1.0 / c.rate
        poisson = c.arrival == "poisson"
        gaps: list[float] = []
        rng = self.streams.rng("arrivals") if poisson else None
        instant = c.instant
        for mb in range(n):
            if not mb & 511:
                report(mb / n)
            if poisson:
                if not gaps:
                    gaps = rng.exponential(gap, _BLOCK).tolist()  # type: ignore[union-attr]
                yield env.timeout(gaps.pop())
            else:
                yield env.timeout(gap)
            t0 = env.now
            if tr is not None:
                tr.append((t0, mb, "arrive", -1, -1))
            if instant:
                wait = self._instant(mb, t0)
                if wait is not None:
                    env.process(self._run(mb, t0, wait[0], wait[1]))
            else:
                env.process(self._run(mb, t0, 0, 0))

    def run(self) -> PipelineRun:
        """Start the failure processes and arrivals; run until every microbatch left."""
        self.failure_model.start()
        for j, ids in enumerate(self.stage_workers):
            live = self.live[j]
            for idx in ids:
                if self.workers[idx].up:
                    live[idx] = None
        self.n_out = sum(1 for live in self.live if not live)
        if self.timeline.on:  # the timeline: processes and down intervals (listeners only)
            self.timeline.start_pipeline(self)
        self.env.process(self._arrivals())
        self.env.run(until=self.done)
        self.timeline.close(self.env.now)
        return PipelineRun(self.metrics(), self.rec, self.trace)

    def metrics(self) -> dict[str, float]:
        """Flat metrics of the run so far (see :func:`des_pipeline_model`)."""
        c = self.config
        n = max(self.finished, 1)
        delivered = self.finished - self.dropped
        t = self.env.now
        out: dict[str, float] = {
            "microbatches": float(self.finished),
            "drop_rate": self.dropped / n,
            "delivered_rate": delivered / n,
            "mean_quality": self.quality_sum / delivered if delivered else math.nan,
            "quality_mass": self.quality_sum / n,
            "goodput": self.quality_sum / t if t > 0 else math.nan,
            "throughput": delivered / t if t > 0 else math.nan,
            "mean_skipped": (sum(k * h for k, h in enumerate(self.skip_hist)) / delivered
                             if delivered else math.nan),
            "failovers_per_microbatch": self.failovers / n,
            "waits_per_microbatch": self.waits / n,
            "stage_crossings": float(self.crossings),
            "simulated_time": t,
            "workers": float(c.workers),
            "worker_time": c.workers * t,
        }
        if self.rec is not None and delivered:
            d = self.rec["delivered"]
            lat = (self.rec["finish"] - self.rec["arrival"])[d]
            out["latency_mean"] = float(lat.mean())
            out["latency_p50"] = float(np.quantile(lat, 0.5))
            out["latency_p99"] = float(np.quantile(lat, 0.99))
        else:
            h = self.latency_hist
            out["latency_mean"] = self.latency_sum / delivered if delivered else math.nan
            out["latency_p50"] = h.quantile(0.5)
            out["latency_p99"] = h.quantile(0.99)
        for k in range(self.s + 1):
            out[f"skipped_{k}"] = self.skip_hist[k] / n
        return out


def run_pipeline(config: PipelineConfig, streams: Streams, *,
                 recorder: Any = None) -> PipelineRun:
    """Build, wire and run one replication; metrics plus optional records and trace.

    Parameters
    ----------
    config : PipelineConfig
    streams : Streams
        The replication's streams.
    recorder : sim.timeline.Recorder, optional
        Records the run's events (the timeline).

    Returns
    -------
    PipelineRun
    """
    return Pipeline(config, streams, recorder=recorder).run()


def des_pipeline_model(config: PipelineConfig, streams: Streams, *,
                       recorder: Any = None) -> dict[str, float]:
    """One replication of the pipeline as flat metrics (a model for :func:`sim.runner.replicate`).

    Returns
    -------
    dict
        ``drop_rate``, ``delivered_rate``, ``mean_quality`` (of delivered),
        ``quality_mass`` (quality per microbatch offered), ``goodput``
        (quality-weighted deliveries per unit simulated time), ``throughput``,
        ``mean_skipped``, ``skipped_k`` (fraction delivered with ``k`` skips,
        ``k = 0..s``), ``latency_mean``, ``latency_p50``, ``latency_p99``
        (of delivered; the quantiles come from a log-binned histogram, within
        0.3 %, unless ``config.records`` makes them exact), ``failovers_per_microbatch``, ``waits_per_microbatch``,
        ``stage_crossings``, ``simulated_time``, ``workers``, ``worker_time``.
    """
    return run_pipeline(config, streams, recorder=recorder).metrics
