"""The importance-sampling engine: rare snapshot drop probabilities.

Plain Monte Carlo needs about ``100 / p`` microbatches for a 10% relative
error at drop probability ``p`` (``1e11`` at ``p = 1e-9``). Importance sampling
draws the outages from a *tilted* law under which drops are common and
reweights each draw by its likelihood ratio, so a few hundred draws suffice.

Independent stages (the study's placement)
    Stage ``j`` is out with ``q_j`` independently. Exponential tilting by
    ``theta`` gives ``q'_j = q_j e^theta / (1 - q_j + q_j e^theta)``; ``theta``
    is chosen so that the tilted mean number of out stages is ``s + 1`` (the
    edge of the drop event, which is also where the variance is smallest for
    the binomial tail). The likelihood ratio of a draw depends only on the
    number ``K`` of out stages: ``exp(-theta K + sum_j log(1 - q_j + q_j e^theta))``.
Shared failure domains (any placement; :func:`stratified_placement_probability`)
    Domains and workers fail independently (domain ``d`` out with ``p_d``,
    worker ``w`` down with ``1 - a_w``); stage outages are dependent through
    the domains they share, and given the domain states ``D`` the stages are
    independent, so ``h(D) = P(K > s | D)`` is an exact Poisson-binomial tail
    (conditional Monte Carlo: the workers are integrated out). Domains of
    equal outage probability form a class (the regions, the racks); the
    stratum is the number of domains out in each class, whose probability is
    a product of binomials. Strata with few configurations are summed
    exactly; the others are sampled uniformly inside each class (the exact
    conditional law) and weighted by their exact probability. Domains holding
    a single worker are folded into that worker's down probability first.

    A per-domain tilt of the domain outages (``p_d -> v_d`` fitted on pilot
    draws, by cross-entropy) is deliberately not offered: it can miss a
    combination of outages its pilot never drew (two racks out at once) and
    then report a small error around a value that is too low (3% error around
    2.1e-4 where the exact value is 3.2e-4, on two regions of 8 racks of 9
    hosts with the packed placement, ``a = 0.97``, ``s = 4``). Stratifying
    accounts for every combination by its exact probability.

The interval is the normal one from the sample variance of the weighted
indicators (``estimate +- z se``), the relative error is ``se / estimate``,
and the effective sample size is ``(sum y)**2 / sum y**2`` over the weighted
indicators ``y``. For the stratified estimator the upper end also adds the
mass of the strata not visited and a rule-of-three bound for sampled strata
without a hit.

References
----------
Rubinstein & Kroese, *Simulation and the Monte Carlo Method* (importance
sampling, exponential tilting, stratified sampling, conditional Monte Carlo).
Study A (docs/studies.md) for the model.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import check, check_int, check_positive, check_probability
from .config import PipelineConfig
from .vector import (
    PlacementArrays,
    binomial_groups,
    placement_arrays,
    stage_outage_probabilities,
)

__all__ = [
    "ImportanceResult",
    "exponential_tilt",
    "importance_drop_probability",
    "poisson_binomial_tail",
    "importance_from_config",
    "stratified_placement_probability",
]

_BATCH = 1 << 12
#: Relative rounding allowed on the ends of a stratified interval: sums of up to
#: 10**7 positive terms, each a Poisson-binomial tail with about L roundings.
_ROUNDING = 1e-9


@dataclass(frozen=True)
class ImportanceResult:
    """An importance-sampling estimate of a drop probability.

    Attributes
    ----------
    estimate : float
        Estimated ``P(K > s)``.
    low, high : float
        Confidence interval (normal, from the sample variance; ``low >= 0``).
    se : float
        Standard error of the estimate.
    rel_error : float
        ``se / estimate`` (``inf`` when no draw dropped).
    ess : float
        Effective sample size ``(sum y)**2 / sum y**2``.
    samples : int
        Draws made (pilot draws excluded).
    hits : int
        Draws that dropped under the tilted law.
    tilt : float
        The exponential tilt ``theta`` (0 for :func:`stratified_placement_probability`).
    tilted_mean_out : float
        Mean number of out stages under the tilted law (NaN when stratified).
    seconds : float
        Wall time of the estimate, pilot included.
    confidence : float
        Level of the interval.
    enumerated : int
        Domain configurations summed exactly (:func:`stratified_placement_probability`).
    """

    estimate: float
    low: float
    high: float
    se: float
    rel_error: float
    ess: float
    samples: int
    hits: int
    tilt: float
    tilted_mean_out: float
    seconds: float
    confidence: float = 0.95
    enumerated: int = 0

    def contains(self, value: float) -> bool:
        """True when ``value`` lies in the interval."""
        return self.low <= value <= self.high

    @property
    def naive_samples(self) -> float:
        """Plain Monte Carlo draws needed for the same relative error."""
        p, r = self.estimate, self.rel_error
        if not (p > 0 and r > 0 and math.isfinite(r)):
            return math.nan
        return (1.0 - p) / (p * r * r)

    def as_dict(self) -> dict[str, float]:
        """Flat record."""
        return {
            "estimate": self.estimate, "low": self.low, "high": self.high, "se": self.se,
            "rel_error": self.rel_error, "ess": self.ess, "samples": float(self.samples),
            "hits": float(self.hits), "tilt": self.tilt, "tilted_mean_out": self.tilted_mean_out,
            "seconds": self.seconds, "naive_samples": self.naive_samples,
        }

    def __str__(self) -> str:
        return (f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] "
                f"(rel. error {self.rel_error:.3g}, ESS {self.ess:.0f}, {self.samples} samples)")


class _Accumulator:
    """Running sums of the weighted indicators ``y``."""

    def __init__(self) -> None:
        self.n = 0
        self.hits = 0
        self.s1 = 0.0
        self.s2 = 0.0
        self.k_sum = 0.0

    def add(self, y: np.ndarray, k: np.ndarray) -> None:
        self.n += y.size
        self.hits += int(np.count_nonzero(y))
        self.s1 += float(y.sum())
        self.s2 += float(np.dot(y, y))
        self.k_sum += float(k.sum())

    def moments(self) -> tuple[float, float]:
        """``(estimate, standard error)``."""
        if self.n == 0:
            return math.nan, math.inf
        m = self.s1 / self.n
        if self.n < 2:
            return m, math.inf
        var = max(self.s2 / self.n - m * m, 0.0) * self.n / (self.n - 1)
        return m, math.sqrt(var / self.n)

    def rel_error(self) -> float:
        m, se = self.moments()
        return se / m if m > 0 else math.inf

    def result(self, tilt: float, confidence: float, t0: float) -> ImportanceResult:
        m, se = self.moments()
        from scipy import stats

        z = float(stats.norm.ppf(0.5 + confidence / 2))
        rel = se / m if m > 0 else math.inf
        ess = self.s1 * self.s1 / self.s2 if self.s2 > 0 else 0.0
        return ImportanceResult(m, max(m - z * se, 0.0), m + z * se, se, rel, ess, self.n,
                                self.hits, float(tilt), self.k_sum / max(self.n, 1),
                                time.perf_counter() - t0, confidence)


def _run(draw, acc: _Accumulator, samples: int, target: float | None, min_samples: int,
         batch: int) -> None:
    """Draw batches until ``samples`` draws, or the target relative error is reached."""
    m = min(max(min_samples, 2), samples) if target is not None else batch
    while acc.n < samples:
        m = min(m, batch, samples - acc.n)
        y, k = draw(m)
        acc.add(y, k)
        if target is not None and acc.n >= min_samples and acc.hits >= 30 \
                and acc.rel_error() <= target:
            return
        if target is not None:  # size the next batch from the error so far
            rel = acc.rel_error()
            need = acc.n * (rel / target) ** 2 - acc.n if math.isfinite(rel) else 2 * acc.n
            m = int(min(max(need * 1.1, 256), 4 * acc.n + 256))
        else:
            m = batch


def _budget(samples: int | None, target_rel_error: float | None) -> tuple[int, float | None]:
    if target_rel_error is not None:
        target = check_positive("target_rel_error", target_rel_error)
        cap = 10_000_000 if samples is None else check_int("samples", samples, low=2)
        return cap, target
    return (10_000 if samples is None else check_int("samples", samples, low=2)), None


def exponential_tilt(q: np.ndarray, target_mean: float) -> float:
    """The tilt ``theta`` making ``sum_j q'_j`` equal ``target_mean``.

    Parameters
    ----------
    q : numpy.ndarray
        Per-stage outage probabilities.
    target_mean : float
        Desired tilted mean number of out stages.

    Returns
    -------
    float
        ``theta >= 0`` (0 when the untilted mean already reaches the target).

    Notes
    -----
    ``q'_j = q_j e^theta / (1 - q_j + q_j e^theta)``, increasing in ``theta``;
    solved by Brent's method on ``theta``.
    """
    q = np.asarray(q, dtype=float)
    free = q[(q > 0) & (q < 1)]
    fixed = float(np.count_nonzero(q >= 1))
    if q.sum() >= target_mean or free.size == 0:
        return 0.0
    goal = min(target_mean, fixed + free.size - 0.5) - fixed

    def excess(theta: float) -> float:
        lo = np.log(free) + theta - np.log1p(-free)  # log-odds after tilting
        return float((1.0 / (1.0 + np.exp(-lo))).sum()) - goal

    if excess(0.0) >= 0:
        return 0.0
    hi = 1.0
    while excess(hi) < 0:
        hi *= 2.0
    from scipy import optimize  # on first use: keeps `import sim` light

    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def _tilted(p: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
    """``p e^theta / (1 - p + p e^theta)``, keeping 0 and 1 fixed (theta broadcasts)."""
    p = np.asarray(p, dtype=float)
    m = (p > 0) & (p < 1)
    safe = np.where(m, p, 0.5)
    lo = np.log(safe) - np.log1p(-safe) + theta
    return np.where(m, 1.0 / (1.0 + np.exp(-lo)), p)


def importance_drop_probability(
    stages: int,
    replicas: int | Sequence[int],
    skip_budget: int,
    availability: float,
    domain_outage: float = 0.0,
    *,
    samples: int | None = None,
    rng: np.random.Generator,
    target_rel_error: float | None = None,
    tilt: float | None = None,
    confidence: float = 0.95,
    min_samples: int = 1000,
) -> ImportanceResult:
    """Estimate ``P(K > s)`` for independent stages by exponential tilting.

    Parameters
    ----------
    stages : int
        ``L``.
    replicas : int or sequence of int
        Replicas per stage (one value or one per stage).
    skip_budget : int
        ``s`` in ``[0, L]``.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Unavailability ``rho`` of each stage's own domain.
    samples : int, optional
        Draws to make (default 10 000); with ``target_rel_error``, the most
        draws to make (default 10**7).
    rng : numpy.random.Generator
    target_rel_error : float, optional
        Stop as soon as ``se / estimate`` is at most this (after ``min_samples``
        draws and 30 drops under the tilted law).
    tilt : float, optional
        Use this ``theta`` instead of the one giving a tilted mean of ``s + 1``.
    confidence : float
        Level of the interval.
    min_samples : int
        Draws before the stopping rule is looked at.

    Returns
    -------
    ImportanceResult

    Notes
    -----
    With ``q'_j`` the tilted outage probabilities, the weight of a draw with
    ``K`` out stages is ``prod_j (q_j/q'_j)**X_j ((1-q_j)/(1-q'_j))**(1-X_j)
    = exp(-theta K + Lambda(theta))`` with
    ``Lambda(theta) = sum_j log(1 - q_j + q_j e^theta)``, and the estimator is
    the mean of ``1{K > s}`` times that weight.
    """
    t0 = time.perf_counter()
    L = check_int("stages", stages, low=1)
    s = check_int("skip_budget", skip_budget, low=0, high=L)
    check_probability("confidence", confidence, open_low=True, open_high=True)
    n_max, target = _budget(samples, target_rel_error)
    q = stage_outage_probabilities(L, replicas, availability, domain_outage)
    acc = _Accumulator()
    if np.count_nonzero(q > 0) <= s:  # the drop is impossible
        acc.n = n_max
        return acc.result(0.0, confidence, t0)
    theta = exponential_tilt(q, s + 1.0) if tilt is None else float(tilt)
    qt = _tilted(q, theta)
    m = (q > 0) & (q < 1)
    log_mgf = float(np.log1p(q[m] * math.expm1(theta)).sum()) if theta else 0.0
    groups = binomial_groups(qt)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        k = np.zeros(n, dtype=np.int64)
        for cnt, p in groups:
            k += rng.binomial(cnt, p, size=n)
        y = np.where(k > s, np.exp(log_mgf - theta * k), 0.0)
        return y, k

    _run(draw, acc, n_max, target, min_samples, _BATCH)
    return acc.result(theta, confidence, t0)


def poisson_binomial_tail(q: np.ndarray, skip_budget: int) -> np.ndarray:
    """Row-wise ``P(sum_j X_j > s)`` for independent ``X_j ~ Bernoulli(q[:, j])``.

    Parameters
    ----------
    q : numpy.ndarray
        ``(m, L)`` outage probabilities (one row per draw).
    skip_budget : int
        ``s``.

    Returns
    -------
    numpy.ndarray
        ``(m,)`` tail probabilities, accumulated as sums of positive terms (no
        ``1 - P(K <= s)`` cancellation, so tails near 1e-15 and below stay accurate).
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    m, L = q.shape
    s = int(skip_budget)
    dist = np.zeros((m, s + 1))
    dist[:, 0] = 1.0
    tail = np.zeros(m)
    for j in range(L):
        qj = q[:, j]
        tail += dist[:, s] * qj
        new = dist * (1.0 - qj)[:, None]
        new[:, 1:] += dist[:, :-1] * qj[:, None]
        dist = new
    return tail


def importance_from_config(config: Any, *, rng: np.random.Generator, samples: int | None = None,
                           target_rel_error: float | None = None,
                           confidence: float = 0.95) -> ImportanceResult:
    """Importance-sampling drop probability for a :class:`sim.pipeline.PipelineConfig`.

    Uses :func:`importance_drop_probability` (exponential tilting) for the
    study's placement (``placement`` None: one domain per stage, stages
    independent) and :func:`stratified_placement_probability` for a placement
    with shared domains. It estimates the snapshot drop probability (the
    question the vector engine answers; see :class:`sim.pipeline.engines.ImportanceEngine`).

    Parameters
    ----------
    config : sim.pipeline.PipelineConfig
    rng : numpy.random.Generator
    samples, target_rel_error, confidence
        As for :func:`importance_drop_probability` and
        :func:`stratified_placement_probability`.

    Returns
    -------
    ImportanceResult
    """
    check(isinstance(config, PipelineConfig), "config", "a PipelineConfig", config)
    if config.study_placement:
        return importance_drop_probability(
            config.stages, config.replicas, config.skip_budget, config.availability,
            config.domain_outage, samples=samples, rng=rng, target_rel_error=target_rel_error,
            confidence=confidence)
    pl = config.domain_placement
    return stratified_placement_probability(
        pl.replica_domains, pl.domain_outage, config.availability, config.skip_budget,
        samples=samples, rng=rng, target_rel_error=target_rel_error, confidence=confidence)


# --------------------------------------------------------------------------- stratified (robust)


def _poisson_binomial_pmf(p: np.ndarray) -> np.ndarray:
    """``P(M = m)``, ``m = 0..len(p)``, for ``M`` a sum of independent Bernoulli(``p``)."""
    pmf = np.zeros(p.size + 1)
    pmf[0] = 1.0
    for j, pj in enumerate(p):
        pmf[1: j + 2] = pmf[1: j + 2] * (1.0 - pj) + pmf[: j + 1] * pj
        pmf[0] *= 1.0 - pj
    return pmf


def _compositions(total: int, caps: Sequence[int]) -> list[tuple[int, ...]]:
    """Every ``(k_1, ..., k_C)`` with ``sum k_c = total`` and ``0 <= k_c <= caps[c]``."""
    if not caps:
        return [()] if total == 0 else []
    out = []
    for k in range(min(total, caps[0]) + 1):
        out.extend((k, *rest) for rest in _compositions(total - k, caps[1:]))
    return out


def _fold_private_domains(pa: PlacementArrays) -> PlacementArrays:
    """Fold every domain that holds a single worker into that worker's own down probability.

    Such a domain (a host holding one replica, say) is independent of the
    rest, so ``1 - a_w`` becomes ``1 - a_w (1 - p_d)``, exactly; fewer domains
    mean fewer configurations to sum or sample.
    """
    nd = pa.domain_p.size
    if nd == 0 or pa.worker_chain.shape[1] == 0:
        return pa
    owners = np.bincount(pa.worker_chain.ravel(), minlength=nd + 1)[:nd]
    private = owners == 1
    if not private.any():
        return pa
    wp = pa.worker_p.copy()
    for d in np.flatnonzero(private):
        w = int(np.flatnonzero((pa.worker_chain == d).any(axis=1))[0])
        wp[w] = 1.0 - (1.0 - wp[w]) * (1.0 - pa.domain_p[d])
    keep = np.flatnonzero(owners > 1)
    col = np.full(nd + 1, keep.size, dtype=np.int64)
    col[keep] = np.arange(keep.size)
    return PlacementArrays(tuple(pa.domains[i] for i in keep), pa.domain_p[keep], wp,
                           col[pa.worker_chain], pa.stage_workers)


class _Stratum:
    """Running sums of ``h`` over the draws of one sampled stratum."""

    def __init__(self, m: int, mass: float) -> None:
        self.m, self.mass = m, mass
        self.n, self.s1, self.s2, self.hits = 0, 0.0, 0.0, 0

    def add(self, h: np.ndarray) -> None:
        self.n += h.size
        self.s1 += float(h.sum())
        self.s2 += float(np.dot(h, h))
        self.hits += int(np.count_nonzero(h))

    @property
    def mean(self) -> float:
        return self.s1 / self.n if self.n else 0.0

    @property
    def var(self) -> float:
        if self.n < 2:
            return 0.0
        m = self.mean
        return max(self.s2 / self.n - m * m, 0.0) * self.n / (self.n - 1)

    def alloc_sd(self) -> float:
        """Standard deviation for allocating draws, floored by the rule of three when no draw hit."""
        return max(math.sqrt(self.var), math.sqrt(3.0 / max(self.n, 1)) if self.hits == 0 else 0.0)


def stratified_placement_probability(
    replica_domains: Sequence[Sequence[Sequence[str]]],
    domain_outage: Mapping[str, float],
    availability: float | Sequence[Sequence[float]],
    skip_budget: int,
    *,
    samples: int | None = None,
    rng: np.random.Generator,
    target_rel_error: float | None = None,
    confidence: float = 0.95,
    enumerate_limit: int = 20_000,
    pilot: int = 256,
    tail_tolerance: float = 1e-4,
    max_strata: int = 20_000,
) -> ImportanceResult:
    """Estimate ``P(K > s)`` on a placement with shared domains, stratified by domain outages.

    Unlike a per-domain tilt of the domain outages, which can miss a
    combination of domain outages its pilot never drew (two racks out at
    once) and then report a small error around a value that is too low,
    here every combination is accounted for by its stratum's exact
    probability; what sampling can still under-represent is a configuration
    that is rare *inside* a large sampled stratum (a few rack triples that
    cover one stage among hundreds), so such strata are summed exactly
    whenever they have at most ``enumerate_limit`` configurations. Domains of equal outage probability
    form a class (the regions, the racks); a stratum is the number of domains
    out in each class. Strata are visited in increasing total number of
    domains out; a stratum with few configurations is summed exactly, the
    others are sampled (uniformly inside each class, which is the exact
    conditional law) and weighted by their exact probability, with draws
    allocated where they reduce the variance most.

    Parameters
    ----------
    replica_domains, domain_outage, availability
        The placement, as for :func:`sim.analytic.exact_drop_probability`.
    skip_budget : int
        ``s``.
    samples : int, optional
        Random draws (default 10 000; with ``target_rel_error`` the most draws,
        default 10**7). Strata summed exactly cost no draws.
    rng : numpy.random.Generator
    target_rel_error : float, optional
        Stop as soon as ``se / estimate`` is at most this.
    confidence : float
        Level of the interval.
    enumerate_limit : int
        A stratum with at most this many configurations is summed exactly.
    pilot : int
        Draws per sampled stratum before allocating the rest.
    tail_tolerance : float
        Strata are visited until the probability that more domains are out
        is at most this fraction of the estimate; that unvisited mass is added
        to the upper end of the interval (a drop probability is at most 1).
    max_strata : int
        Most strata visited (the unvisited mass again goes to the upper end).

    Returns
    -------
    ImportanceResult
        ``samples`` counts random draws, ``enumerated`` the configurations
        summed exactly; ``ess`` is ``(sum y)**2 / sum y**2`` over every term
        ``y`` of the estimate; ``tilt`` is 0 (no exponential tilt).

    Notes
    -----
    Domains that hold a single worker are first folded into that worker's
    own down probability (exact: they are independent of everything else).
    With ``k = (k_c)`` the number of domains out in each class ``c`` (``n_c``
    domains of outage ``p_c``),

    .. math:: P(K > s) = \\sum_k \\prod_c \\binom{n_c}{k_c} p_c^{k_c}
              (1 - p_c)^{n_c - k_c}\\, E[h(D) \\mid k],

    where ``h(D) = P(K > s | D)`` is the exact Poisson-binomial tail of the
    stages given the domain states ``D`` (workers integrated out) and, given
    ``k``, the domains out in class ``c`` are a uniform ``k_c``-subset. A
    sampled stratum estimates ``E[h | k]`` from its draws;
    ``se**2 = sum_k P(k)**2 var_k / n_k``; draws go in proportion to
    ``P(k) sd_k`` (Neyman allocation), the rule of three flooring ``sd_k`` of
    a stratum that has not hit yet. The estimate is unbiased for the visited
    strata; the interval's upper end adds the unvisited mass and, for a
    sampled stratum without a hit, the rule-of-three bound ``3 P(k) / n_k``.

    References
    ----------
    Rubinstein & Kroese, *Simulation and the Monte Carlo Method*
    (stratified sampling, conditional Monte Carlo).
    """
    t0 = time.perf_counter()
    pa = _fold_private_domains(placement_arrays(replica_domains, domain_outage, availability))
    L = pa.stages
    s = check_int("skip_budget", skip_budget, low=0, high=L)
    check_probability("confidence", confidence, open_low=True, open_high=True)
    n_max, target = _budget(samples, target_rel_error)
    enumerate_limit = check_int("enumerate_limit", enumerate_limit, low=1)
    pilot = check_int("pilot", pilot, low=2)
    check_positive("tail_tolerance", tail_tolerance)
    max_strata = check_int("max_strata", max_strata, low=1)
    p_all = pa.domain_p
    nd = p_all.size
    forced = p_all >= 1.0
    free_idx = np.flatnonzero(~forced)
    pf = p_all[free_idx]
    nf = pf.size
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + confidence / 2))
    values, inverse = np.unique(pf, return_inverse=True)
    members = [np.flatnonzero(inverse == c) for c in range(values.size)]
    caps = [m.size for m in members]

    def h(rows: np.ndarray) -> np.ndarray:
        out = np.empty(rows.shape[0])
        for a in range(0, rows.shape[0], _BATCH):
            part = rows[a: a + _BATCH]
            d = np.zeros((part.shape[0], nd), dtype=bool)
            d[:, forced] = True
            d[:, free_idx] = part
            out[a: a + _BATCH] = poisson_binomial_tail(pa.stage_outage_given(d), s)
        return out

    def stratum_mass(k: tuple[int, ...]) -> float:
        return float(np.prod([stats.binom.pmf(kc, caps[c], values[c]) for c, kc in enumerate(k)]))

    def enumerate_rows(k: tuple[int, ...]) -> np.ndarray:
        per_class = [list(itertools.combinations(members[c].tolist(), kc)) for c, kc in enumerate(k)]
        combos = list(itertools.product(*per_class))
        rows = np.zeros((len(combos), nf), dtype=bool)
        for i, parts in enumerate(combos):
            for part in parts:
                rows[i, list(part)] = True
        return rows

    def sample_rows(k: tuple[int, ...], n: int) -> np.ndarray:
        rows = np.zeros((n, nf), dtype=bool)
        for c, kc in enumerate(k):
            if kc == 0:
                continue
            mem = members[c]
            if kc == mem.size:
                rows[:, mem] = True
                continue
            pick = np.argpartition(rng.random((n, mem.size)), kc - 1, axis=1)[:, :kc]
            np.put_along_axis(rows, mem[pick], True, axis=1)
        return rows

    total_pmf = _poisson_binomial_pmf(pf)
    tails = np.concatenate([np.cumsum(total_pmf[::-1])[::-1][1:], [0.0]])  # P(M > m)
    exact_sum = 0.0
    y1 = y2 = 0.0
    hits = enumerated = visited = 0
    strata: list[tuple[tuple[int, ...], _Stratum]] = []
    remainder = 0.0

    def current() -> float:
        return exact_sum + sum(st.mass * st.mean for _, st in strata)

    for m in range(nf + 1):
        comps = _compositions(m, caps)
        if visited + len(comps) > max_strata:
            remainder = float(tails[m - 1]) if m else 1.0
            break
        for k in comps:
            visited += 1
            mass = stratum_mass(k)
            if mass <= 0:
                continue
            size = math.prod(math.comb(caps[c], kc) for c, kc in enumerate(k))
            if size <= enumerate_limit:
                y = (mass / size) * h(enumerate_rows(k))
                exact_sum += float(y.sum())
                y1 += float(y.sum())
                y2 += float(np.dot(y, y))
                hits += int(np.count_nonzero(y))
                enumerated += size
            else:
                st = _Stratum(m, mass)
                st.add(h(sample_rows(k, pilot)))
                strata.append((k, st))
        remainder = float(tails[m])
        if remainder <= 0 or remainder <= tail_tolerance * current():
            break

    def se() -> float:
        return math.sqrt(sum(st.mass ** 2 * st.var / st.n for _, st in strata))

    drawn = sum(st.n for _, st in strata)
    while strata and drawn < n_max:
        est = current()
        if target is not None and est > 0 and se() <= target * est \
                and sum(st.hits for _, st in strata) >= 30:
            break
        weights = np.array([st.mass * st.alloc_sd() for _, st in strata])
        if weights.sum() <= 0:
            break
        if target is None:
            extra = n_max - drawn
        else:
            goal = (weights.sum() / (target * est)) ** 2 if est > 0 else 4 * drawn
            extra = int(min(max(goal - drawn, 256), 4 * drawn + 256, n_max - drawn))
        share = np.floor(extra * weights / weights.sum()).astype(int)
        if share.sum() == 0:
            share[int(np.argmax(weights))] = extra
        for (k, st), n in zip(strata, share, strict=True):
            if n > 0:
                st.add(h(sample_rows(k, int(n))))
        drawn = sum(st.n for _, st in strata)
        if target is None:
            break

    for _, st in strata:  # the weighted terms of the sampled strata, for the ESS
        if st.n:
            c = st.mass / st.n
            y1 += c * st.s1
            y2 += c * c * st.s2
            hits += st.hits
    est = current()
    err = se()
    rel = err / est if est > 0 else math.inf
    ess = y1 * y1 / y2 if y2 > 0 else 0.0
    # a sampled stratum with no hit may still hold up to 3/n of its mass (rule of three)
    unseen = sum(st.mass * 3.0 / st.n for _, st in strata if st.hits == 0 and st.n)
    # Rounding of every term (summed strata, sampled strata, the unvisited tail), not
    # only of the summed ones: when the unvisited strata drop surely (h = 1) the upper
    # end equals the exact value in real arithmetic and floats land either side of it.
    slack = _ROUNDING * (est + remainder + unseen)
    return ImportanceResult(est, max(est - z * err - slack, 0.0),
                            est + z * err + remainder + unseen + slack, err, rel,
                            ess, drawn, hits, 0.0, math.nan, time.perf_counter() - t0,
                            confidence, enumerated)
