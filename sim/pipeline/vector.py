"""The vector engine: vectorised Monte Carlo of the snapshot model (Study A).

Under the study's assumptions every microbatch sees a fresh, independent
snapshot of the stationary system: worker ``w`` is down with probability
``1 - a`` and domain ``d`` is out with probability ``rho_d``, all independent,
and crossing the pipeline takes no time. The only random quantity that matters
is then ``K``, the number of *out* stages a microbatch meets; it is dropped when
``K > s`` and otherwise keeps quality ``quality(K)``. This module draws ``K``
for millions of microbatches at a time with numpy, in chunks of constant
memory:

* one domain per stage (the study's placement): stage ``j`` is out with
  ``q_j = rho + (1 - rho)(1 - a)**r_j`` independently, so ``K`` is a sum of
  binomials, one per distinct ``q_j`` (a single ``rng.binomial(L, q)`` when all
  stages have the same ``r``);
* any placement (:func:`simulate_placement`): the domain states are drawn as a
  boolean matrix, then each stage's outage given them (all its replicas down,
  a replica being down when its worker or a domain on its chain is), which has
  the same joint law as drawing every worker.

When does this answer the DES's question?
-----------------------------------------
:class:`sim.pipeline.engines.VectorEngine` says so for a
:class:`sim.pipeline.PipelineConfig` (``applies``).
The DES and this engine agree on the *long-run rate* of drops (and on the
distribution of skips and the mean quality) when the crossing is a snapshot
(zero compute and transfer time, hence no failure during service, no failover
and ``max_wait = 0``) and the failure processes start stationary (no trace).
Then each microbatch arrives at a time chosen independently of the failure
process (fixed or Poisson arrivals do not look at the failures), so by
stationarity the state it sees has exactly the stationary law, whatever the
up/down duration distributions: its drop probability is the snapshot
probability, and the long-run drop rate is its average. What the DES has and
this engine does not is time correlation: a worker down for one microbatch is
likely still down for the next, so drops come in bursts, the per-window drop
rate fluctuates far more, and a DES replication of ``N`` microbatches carries
far less information than ``N`` independent snapshots (its interval must come
from independent replications). Latency, goodput per unit time, failovers and
waits need time and are not answered here.

References
----------
Study A (docs/studies.md): ``P(drop) = P(Binomial(L, q) > s)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..analytic.penalty import SkipPenalty
from ..errors import check, check_int, check_probability

__all__ = [
    "DEFAULT_CHUNK",
    "StylisedResult",
    "stage_outage_probabilities",
    "simulate_stylised",
    "simulate_placement",
    "PlacementArrays",
    "placement_arrays",
    "binomial_groups",
]

#: Microbatches drawn per numpy call (memory stays constant whatever the total).
DEFAULT_CHUNK = 1 << 16

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class StylisedResult:
    """Counts from a vectorised run of the snapshot model.

    Attributes
    ----------
    microbatches : int
        Microbatches simulated.
    out_histogram : numpy.ndarray
        ``out_histogram[k]`` microbatches met exactly ``k`` out stages, ``k = 0..L``.
    skip_budget : int
        ``s``: a microbatch meeting more than ``s`` out stages is dropped.
    quality : numpy.ndarray
        Quality kept after ``k`` skips, ``k = 0..L``.
    """

    microbatches: int
    out_histogram: np.ndarray
    skip_budget: int
    quality: np.ndarray

    @property
    def stages(self) -> int:
        """Number of stages ``L``."""
        return len(self.out_histogram) - 1

    @property
    def dropped(self) -> int:
        """Microbatches that met more than ``s`` out stages."""
        return int(self.out_histogram[self.skip_budget + 1:].sum())

    @property
    def delivered(self) -> int:
        """Microbatches delivered (at most ``s`` out stages, all skipped)."""
        return self.microbatches - self.dropped

    @property
    def skip_histogram(self) -> np.ndarray:
        """Delivered microbatches by number of skipped stages, ``k = 0..s``."""
        return self.out_histogram[: self.skip_budget + 1].copy()

    @property
    def drop_rate(self) -> float:
        """Fraction of microbatches dropped."""
        return self.dropped / self.microbatches

    @property
    def quality_sum(self) -> float:
        """Total quality of the delivered microbatches."""
        s = self.skip_budget
        return float(np.dot(self.out_histogram[: s + 1], self.quality[: s + 1]))

    @property
    def mean_quality(self) -> float:
        """Mean quality of a delivered microbatch (NaN if none was delivered)."""
        d = self.delivered
        return self.quality_sum / d if d else math.nan

    @property
    def mean_skipped(self) -> float:
        """Mean number of skipped stages of a delivered microbatch."""
        d = self.delivered
        s = self.skip_budget
        return float(np.dot(np.arange(s + 1), self.out_histogram[: s + 1])) / d if d else math.nan

    def drop_rate_se(self) -> float:
        """Binomial standard error of :attr:`drop_rate` (valid: trials are independent)."""
        p = self.drop_rate
        return math.sqrt(p * (1.0 - p) / self.microbatches)

    def metrics(self) -> dict[str, float]:
        """Flat metrics named like :func:`sim.pipeline.pipeline_model`'s."""
        n = self.microbatches
        out = {
            "microbatches": float(n),
            "drop_rate": self.drop_rate,
            "delivered_rate": self.delivered / n,
            "mean_quality": self.mean_quality,
            "quality_mass": self.quality_sum / n,
            "mean_skipped": self.mean_skipped,
            "stage_crossings": float(n) * self.stages,
        }
        for k in range(self.skip_budget + 1):
            out[f"skipped_{k}"] = float(self.out_histogram[k]) / n
        return out

    def __add__(self, other: StylisedResult) -> StylisedResult:
        check(len(self.out_histogram) == len(other.out_histogram)
              and self.skip_budget == other.skip_budget, "other",
              "a result with the same stages and skip budget", other)
        return StylisedResult(self.microbatches + other.microbatches,
                              self.out_histogram + other.out_histogram, self.skip_budget,
                              self.quality)


# --------------------------------------------------------------------------- inputs


def _replicas_per_stage(stages: int, replicas: int | Sequence[int]) -> np.ndarray:
    L = check_int("stages", stages, low=1)
    if isinstance(replicas, (list, tuple, np.ndarray)):
        check(len(replicas) == L, "replicas", f"one value or {L} values (one per stage)", replicas)
        return np.array([check_int("replicas", r, low=1) for r in replicas], dtype=np.int64)
    return np.full(L, check_int("replicas", replicas, low=1), dtype=np.int64)


def stage_outage_probabilities(stages: int, replicas: int | Sequence[int], availability: float,
                               domain_outage: float = 0.0) -> np.ndarray:
    """Per-stage outage probability ``q_j = rho + (1 - rho)(1 - a)**r_j``.

    Parameters
    ----------
    stages : int
    replicas : int or sequence of int
        ``r`` for every stage, or one value per stage.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Unavailability ``rho`` of each stage's own domain.

    Returns
    -------
    numpy.ndarray
        ``q_j`` for ``j = 0..L-1``.
    """
    r = _replicas_per_stage(stages, replicas)
    a = check_probability("availability", availability)
    rho = check_probability("domain_outage", domain_outage)
    return rho + (1.0 - rho) * (1.0 - a) ** r


def _check_common(stages: int, skip_budget: int, microbatches: int, chunk: int) -> tuple[int, int, int]:
    L = check_int("stages", stages, low=1)
    s = check_int("skip_budget", skip_budget, low=0, high=L)
    n = check_int("microbatches", microbatches, low=1)
    c = check_int("chunk", chunk, low=1)
    return s, n, c


def _run_chunks(draw: Callable[[int], np.ndarray], L: int, n: int, chunk: int) -> np.ndarray:
    """Histogram of ``K`` over ``n`` draws made ``chunk`` at a time."""
    hist = np.zeros(L + 1, dtype=np.int64)
    done = 0
    while done < n:
        m = min(chunk, n - done)
        hist += np.bincount(draw(m), minlength=L + 1)
        done += m
    return hist


def binomial_groups(q: np.ndarray) -> list[tuple[int, float]]:
    """Group stages of equal outage probability.

    Parameters
    ----------
    q : numpy.ndarray
        Per-stage outage probabilities.

    Returns
    -------
    list of (int, float)
        ``(count, q)`` for each distinct ``q > 0``; ``K`` is the sum of
        independent ``Binomial(count, q)`` over the groups.
    """
    vals, counts = np.unique(q, return_counts=True)
    return [(int(c), float(v)) for v, c in zip(vals, counts, strict=True) if v > 0]


def _binomial_sum_sampler(groups: list[tuple[int, float]], rng: np.random.Generator
                          ) -> Callable[[int], np.ndarray]:
    if not groups:
        return lambda m: np.zeros(m, dtype=np.int64)
    if len(groups) == 1:
        (cnt, q), = groups
        return lambda m: rng.binomial(cnt, q, size=m)

    def draw(m: int) -> np.ndarray:
        k = rng.binomial(groups[0][0], groups[0][1], size=m)
        for cnt, q in groups[1:]:
            k += rng.binomial(cnt, q, size=m)
        return k
    return draw


def simulate_stylised(
    stages: int,
    replicas: int | Sequence[int],
    skip_budget: int,
    availability: float,
    domain_outage: float = 0.0,
    skip_penalty: float = 0.0,
    penalty: str | Callable[[int], float] = "multiplicative",
    *,
    microbatches: int,
    rng: np.random.Generator,
    chunk: int = DEFAULT_CHUNK,
) -> StylisedResult:
    """Monte Carlo of the study's snapshot model, one binomial draw per microbatch.

    Parameters
    ----------
    stages : int
        ``L`` (>= 1).
    replicas : int or sequence of int
        Replicas per stage ``r`` (one value, or one per stage).
    skip_budget : int
        ``s`` in ``[0, L]``.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Unavailability ``rho`` of each stage's own shared domain.
    skip_penalty : float
        ``kappa`` in [0, 1].
    penalty : {"multiplicative", "additive"} or callable
        See :class:`~sim.analytic.penalty.SkipPenalty`.
    microbatches : int
        Independent microbatches to simulate.
    rng : numpy.random.Generator
    chunk : int
        Microbatches per numpy call (memory is ``O(chunk)``).

    Returns
    -------
    StylisedResult

    Notes
    -----
    Stage ``j`` is out with ``q_j = rho + (1 - rho)(1 - a)**r_j``, independently
    of the others, so ``K = sum_g Binomial(L_g, q_g)`` over the groups ``g`` of
    stages sharing a value of ``q``; with equal replicas ``K ~ Binomial(L, q)``.
    """
    s, n, c = _check_common(stages, skip_budget, microbatches, chunk)
    q = stage_outage_probabilities(stages, replicas, availability, domain_outage)
    quality = SkipPenalty(skip_penalty, penalty).weights(np.arange(int(stages) + 1))
    draw = _binomial_sum_sampler(binomial_groups(q), rng)
    hist = _run_chunks(draw, int(stages), n, c)
    return StylisedResult(n, hist, s, quality)


# --------------------------------------------------------------------------- placements


@dataclass(frozen=True)
class PlacementArrays:
    """A placement compiled to index arrays for vectorised draws.

    Attributes
    ----------
    domains : tuple of str
        Names of the domains that can fail (outage > 0), column order of the draws.
    domain_p : numpy.ndarray
        Outage probability of each of those domains.
    worker_p : numpy.ndarray
        Own down probability ``1 - a_w`` of each worker (stage-major order).
    worker_chain : numpy.ndarray
        ``(workers, depth)`` indices into the domain columns; the padding
        index ``len(domains)`` is a column that is never out.
    stage_workers : numpy.ndarray
        ``(stages, max_replicas)`` indices into the workers; the padding index
        ``workers`` is a worker that is always down.
    """

    domains: tuple[str, ...]
    domain_p: np.ndarray
    worker_p: np.ndarray
    worker_chain: np.ndarray
    stage_workers: np.ndarray

    @property
    def stages(self) -> int:
        """Number of stages."""
        return int(self.stage_workers.shape[0])

    def out_stages(self, domain_down: np.ndarray, worker_down: np.ndarray) -> np.ndarray:
        """Number of out stages per row, from boolean domain and own-worker states.

        Parameters
        ----------
        domain_down : numpy.ndarray
            ``(m, len(domains))`` booleans.
        worker_down : numpy.ndarray
            ``(m, workers)`` booleans (the worker's own state).

        Returns
        -------
        numpy.ndarray
            ``(m,)`` integer counts.
        """
        m = worker_down.shape[0]
        eff = worker_down
        if self.worker_chain.shape[1] and len(self.domains):
            dext = np.concatenate([domain_down, np.zeros((m, 1), dtype=bool)], axis=1)
            eff = eff | dext[:, self.worker_chain].any(axis=2)
        wext = np.concatenate([eff, np.ones((m, 1), dtype=bool)], axis=1)
        return wext[:, self.stage_workers].all(axis=2).sum(axis=1)

    def stage_outage_given(self, domain_down: np.ndarray) -> np.ndarray:
        """Probability that each stage is out given the domain states.

        Parameters
        ----------
        domain_down : numpy.ndarray
            ``(m, len(domains))`` booleans.

        Returns
        -------
        numpy.ndarray
            ``(m, stages)``: ``prod_i f_i`` over the stage's replicas, with
            ``f_i = 1`` when a domain on replica ``i``'s chain is out and
            ``1 - a_i`` otherwise (workers fail independently, each serves one
            stage, so stages are independent given the domains).
        """
        m = domain_down.shape[0]
        wp = np.broadcast_to(self.worker_p, (m, self.worker_p.size))
        if self.worker_chain.shape[1] and len(self.domains):
            dext = np.concatenate([domain_down, np.zeros((m, 1), dtype=bool)], axis=1)
            wp = np.where(dext[:, self.worker_chain].any(axis=2), 1.0, wp)
        wext = np.concatenate([wp, np.ones((m, 1))], axis=1)
        return wext[:, self.stage_workers].prod(axis=2)


def placement_arrays(replica_domains: Sequence[Sequence[Sequence[str]]],
                     domain_outage: Mapping[str, float],
                     availability: float | Sequence[Sequence[float]]) -> PlacementArrays:
    """Compile a placement (as for :func:`sim.analytic.exact_drop_probability`).

    Parameters
    ----------
    replica_domains : sequence
        ``replica_domains[j][i]``: domain chain (outermost first) of replica
        ``i`` of stage ``j``.
    domain_outage : mapping
        Unavailability of each domain (domains not listed never fail).
    availability : float or sequence of sequences
        Worker availability, one value or one per replica (same shape as
        ``replica_domains``).

    Returns
    -------
    PlacementArrays
    """
    check(len(replica_domains) >= 1, "replica_domains", "at least one stage", replica_domains)
    outage = {str(k): check_probability("domain_outage", v) for k, v in dict(domain_outage).items()}
    live_domains = [d for d in sorted(outage) if outage[d] > 0]
    col = {d: i for i, d in enumerate(live_domains)}
    pad_dom = len(live_domains)
    chains: list[list[int]] = []
    wp: list[float] = []
    stage_idx: list[list[int]] = []
    scalar_a = not isinstance(availability, (list, tuple, np.ndarray))
    if scalar_a:
        a_all = check_probability("availability", availability)
    else:
        check(len(availability) == len(replica_domains), "availability",  # type: ignore[arg-type]
              "one value or one list per stage", availability)
    for j, stage in enumerate(replica_domains):
        check(len(stage) >= 1, "replica_domains", "at least one replica per stage", stage)
        ids = []
        for i, chain in enumerate(stage):
            if scalar_a:
                a = a_all
            else:
                row = availability[j]  # type: ignore[index]
                check(len(row) == len(stage), "availability",
                      f"one value per replica of stage {j}", row)
                a = check_probability("availability", row[i])
            ids.append(len(wp))
            wp.append(1.0 - a)
            chains.append([col[str(d)] for d in chain if str(d) in col])
        stage_idx.append(ids)
    depth = max((len(c) for c in chains), default=0)
    wc = np.full((len(chains), depth), pad_dom, dtype=np.int64)
    for w, c in enumerate(chains):
        wc[w, : len(c)] = c
    width = max(len(ids) for ids in stage_idx)
    sw = np.full((len(stage_idx), width), len(wp), dtype=np.int64)
    for j, ids in enumerate(stage_idx):
        sw[j, : len(ids)] = ids
    return PlacementArrays(tuple(live_domains), np.array([outage[d] for d in live_domains]),
                           np.array(wp), wc, sw)


def _placement_sampler(pa: PlacementArrays, rng: np.random.Generator
                       ) -> Callable[[int], np.ndarray]:
    dp = pa.domain_p
    if dp.size == 0:  # no failing domain: stages are independent, K is a binomial sum
        q0 = pa.stage_outage_given(np.zeros((1, 0), dtype=bool))[0]
        return _binomial_sum_sampler(binomial_groups(q0), rng)

    def draw(m: int) -> np.ndarray:
        dd = rng.random((m, dp.size)) < dp
        q = pa.stage_outage_given(dd)
        return (rng.random(q.shape) < q).sum(axis=1)
    return draw


def simulate_placement(
    replica_domains: Sequence[Sequence[Sequence[str]]],
    domain_outage: Mapping[str, float],
    availability: float | Sequence[Sequence[float]],
    skip_budget: int,
    skip_penalty: float = 0.0,
    penalty: str | Callable[[int], float] = "multiplicative",
    *,
    microbatches: int,
    rng: np.random.Generator,
    chunk: int = 1 << 13,
) -> StylisedResult:
    """Monte Carlo of the snapshot model on any placement with shared domains.

    Parameters
    ----------
    replica_domains, domain_outage, availability
        The placement, as for :func:`placement_arrays`.
    skip_budget : int
        ``s`` in ``[0, L]``.
    skip_penalty, penalty
        See :class:`~sim.analytic.penalty.SkipPenalty`.
    microbatches : int
        Independent microbatches to simulate.
    rng : numpy.random.Generator
    chunk : int
        Microbatches per numpy call (memory ``O(chunk * workers)``).

    Returns
    -------
    StylisedResult

    Notes
    -----
    Per microbatch: every failing domain is out with its probability, every
    worker is down on its own with ``1 - a``, all independently; a worker is
    effectively down when it or a domain on its chain is; a stage is out when
    all of its replicas are effectively down. Domains shared by several stages
    make stage outages dependent, so ``K`` is no longer binomial. The draw is
    made in two steps with the same joint law: the domain states, then each
    stage's outage given them (a Bernoulli of
    :meth:`PlacementArrays.stage_outage_given`, since each worker serves one
    stage), which needs one uniform per domain and per stage instead of one per
    worker.
    """
    pa = placement_arrays(replica_domains, domain_outage, availability)
    L = pa.stages
    s, n, c = _check_common(L, skip_budget, microbatches, chunk)
    quality = SkipPenalty(skip_penalty, penalty).weights(np.arange(L + 1))
    hist = _run_chunks(_placement_sampler(pa, rng), L, n, c)
    return StylisedResult(n, hist, s, quality)
