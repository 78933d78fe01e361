"""The time-correlated snapshot engine: exact Markov sampling at the arrival times.

Where the crossing is instant and a microbatch never waits, the pipeline DES
only ever looks at the failure state at arrival times, yet it pays one SimPy
event for every transition of every worker and domain in between. With
exponential up and down times each component is a two-state Markov chain, so
its states at the arrival times can be drawn directly from the exact kernel
(:func:`sim.markov.sample_states`). The result has the DES's law, time
correlation included (bursts of drops, window statistics), at a cost that does
not grow with the failure rate; unlike the vector engine, whose microbatches
see independent snapshots, it answers every question about the order of drops.
"""

from __future__ import annotations

import math

import numpy as np

from .. import engines
from ..engines import Applies, Engine
from ..markov import sample_states
from ..rng import Streams
from .config import PipelineConfig
from .des import PipelineRun
from .engines import VectorEngine
from .vector import PlacementArrays, placement_arrays

__all__ = ["MarkovEngine", "snapshot_out_stages", "markov_run"]

_CHUNK = 1 << 12


def snapshot_out_stages(pa: PlacementArrays, worker_downtime: float, domain_downtime: float,
                        gaps: np.ndarray, *, rng: np.random.Generator,
                        chunk: int = _CHUNK) -> np.ndarray:
    """Out stages seen by each arrival of a zero-time pipeline, with time correlation.

    Parameters
    ----------
    pa : PlacementArrays
        The placement (domains that can fail, workers' own down probabilities,
        chains and stages).
    worker_downtime, domain_downtime : float
        Mean down times of workers and of domains (exponential up and down laws).
    gaps : numpy.ndarray
        ``(m,)`` inter-arrival gaps; the first arrival sees the stationary law.
    rng : numpy.random.Generator
    chunk : int
        Arrivals per block (memory ``O(chunk * components)``); the state is
        carried from block to block, so the law does not depend on it.

    Returns
    -------
    numpy.ndarray
        ``(m,)`` number of out stages at each arrival.

    Notes
    -----
    Components are the failing domains (availability ``1 - rho``) then the
    workers' own processes (availability ``a``), all independent; a worker is
    effectively down when it or a domain on its chain is, and a stage is out
    when all its replicas are (:meth:`PlacementArrays.out_stages`). Each
    component's states at the arrival times are drawn from its exact
    two-state kernel (:func:`sim.markov.sample_states`).
    """
    nd = len(pa.domains)
    avail = np.concatenate([1.0 - pa.domain_p, 1.0 - pa.worker_p])
    down = np.concatenate([np.full(nd, float(domain_downtime)),
                           np.full(pa.worker_p.size, float(worker_downtime))])
    m = len(gaps)
    out = np.empty(m, dtype=np.int64)
    state = None
    for lo in range(0, m, chunk):
        hi = min(lo + chunk, m)
        up = sample_states(avail, down, gaps[lo:hi], rng=rng, start=state)
        state = up[-1]
        out[lo:hi] = pa.out_stages(~up[:, :nd], ~up[:, nd:])
    return out


def markov_run(config: PipelineConfig, streams: Streams) -> PipelineRun:
    """One replication on the Markov engine: the DES's metrics, and records when asked.

    Parameters
    ----------
    config : PipelineConfig
        A config :class:`MarkovEngine` applies to.
    streams : Streams
        Arrival gaps from stream ``arrivals`` (Poisson arrivals), failure
        states from stream ``markov``.

    Returns
    -------
    PipelineRun
        ``metrics`` as :func:`sim.pipeline.pipeline_model` (the crossing is
        instant: latency 0, no failover, no wait); ``records`` (``arrival``,
        ``finish``, ``skipped``, ``quality``, ``delivered``, ``failovers``)
        when ``config.records``.
    """
    n, L, s = config.microbatches, config.stages, config.skip_budget
    gap = 1.0 / config.rate
    if config.arrival == "poisson":
        gaps = streams.rng("arrivals").exponential(gap, n)
    else:
        gaps = np.full(n, gap)
    pl = config.domain_placement
    pa = placement_arrays(pl.replica_domains, pl.domain_outage, config.availability)
    k_out = snapshot_out_stages(pa, config.mean_downtime, config.domain_downtime, gaps,
                                rng=streams.rng("markov"))
    delivered = k_out <= s
    skipped = np.minimum(k_out, s)
    quality = np.asarray(config.quality, dtype=float)[skipped] * delivered
    nd = int(delivered.sum())
    t = float(gaps.sum())
    hist = np.bincount(skipped[delivered], minlength=s + 1)
    qsum = float(quality.sum())
    metrics: dict[str, float] = {
        "microbatches": float(n),
        "drop_rate": (n - nd) / n,
        "delivered_rate": nd / n,
        "mean_quality": qsum / nd if nd else math.nan,
        "quality_mass": qsum / n,
        "goodput": qsum / t if t > 0 else math.nan,
        "throughput": nd / t if t > 0 else math.nan,
        "mean_skipped": float(np.dot(np.arange(s + 1), hist)) / nd if nd else math.nan,
        "failovers_per_microbatch": 0.0,
        "waits_per_microbatch": 0.0,
        "stage_crossings": float(L * n),
        "simulated_time": t,
        "workers": float(config.workers),
        "worker_time": config.workers * t,
        "latency_mean": 0.0 if nd else math.nan,
        "latency_p50": 0.0 if nd else math.nan,
        "latency_p99": 0.0 if nd else math.nan,
    }
    for k in range(s + 1):
        metrics[f"skipped_{k}"] = float(hist[k]) / n
    records = None
    if config.records:
        arrival = np.cumsum(gaps)
        records = {"arrival": arrival, "finish": arrival.copy(),
                   "skipped": skipped.astype(np.int32), "quality": quality,
                   "delivered": delivered, "failovers": np.zeros(n, dtype=np.int32)}
    return PipelineRun(metrics, records, None)


class MarkovEngine(Engine):
    """Exact sampling of exponential failure states at the arrival times (any failure rate).

    Applies where the crossing is a snapshot (zero crossing time, ``max_wait``
    0, no event log) and every up and down time is exponential (no replayed
    trace), with fixed or Poisson arrivals. Its law is the DES's, time correlation included.
    """

    name = "markov"
    family = "pipeline"
    speed = 20
    metrics = ("microbatches", "drop_rate", "delivered_rate", "mean_quality", "quality_mass",
               "mean_skipped", "stage_crossings", "goodput", "throughput", "latency_mean",
               "latency_p50", "latency_p99", "failovers_per_microbatch", "waits_per_microbatch",
               "simulated_time", "workers", "worker_time")
    requested = ("exact Markov sampling of the exponential failure states at the arrival "
                 "times (the DES's law, time correlation included)")

    def applies(self, config: PipelineConfig) -> Applies:
        """Snapshot crossing, exponential laws, fixed or Poisson arrivals, no event trace."""
        snapshot = VectorEngine().applies(config)  # the snapshot conditions, with their reasons
        if not snapshot:
            return snapshot
        if config.failure_distribution != "exponential":
            return Applies(False, f"failure_distribution {config.failure_distribution!r} is not "
                                  "exponential (the states are not a Markov chain)")
        if config.trace:
            return Applies(False, "an event trace needs the discrete-event simulation")
        return Applies(True, self.requested)

    def run(self, config: PipelineConfig, streams: Streams) -> dict[str, float]:
        """One replication's metrics (:func:`markov_run`)."""
        return markov_run(config, streams).metrics


engines.register(MarkovEngine())
