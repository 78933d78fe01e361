"""Study A: should a pipeline replicate its stages or skip them? (closed forms of :mod:`sim.pipeline`)

A microbatch crosses ``L`` stages; a stage is out when its shared failure
domain is out or all its ``r`` replicas are down; an out stage is skipped while
the skip budget ``s`` lasts, each skip costing quality (:mod:`.penalty`), else
the microbatch is dropped. Everything here is a pure function of its
arguments, validated under the CLI's parameter names (``'stages'``,
``'replicas'``, ``'skip_budget'``, ``'availability'``, ``'domain_outage'``,
``'skip_penalty'``, ``'target_drop'``).

Independent stages
    :func:`stage_outage`, :func:`drop_probability`, :func:`drop_probability_q`,
    :func:`floor_drop_rate`, :func:`skipped_distribution`, :func:`quality_mass`,
    :func:`mean_quality_delivered`, :func:`design_cost`, :func:`min_replicas`
    (:class:`Design`), :func:`optimal_design` (:class:`OptimalDesign`),
    :func:`kappa_sweep` and :data:`STUDY_A_KAPPA_SWEEP`.
Any placement of replicas onto nested failure domains
    :func:`nested_domain_outages`, :func:`out_stage_distribution`,
    :func:`exact_drop_probability`.

References
----------
.. [A] "Should a pipeline replicate stages or skip them?" (Study A; its model,
   formulas and numbers are restated in ``docs/studies.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import check, check_int, check_probability
from .penalty import SkipPenalty

__all__ = [
    # independent stages
    "stage_outage",
    "drop_probability",
    "drop_probability_q",
    "floor_drop_rate",
    "skipped_distribution",
    "quality_mass",
    "mean_quality_delivered",
    "design_cost",
    "Design",
    "min_replicas",
    "OptimalDesign",
    "optimal_design",
    "kappa_sweep",
    "STUDY_A_KAPPA_SWEEP",
    # any placement
    "MAX_ENUMERATED_DOMAINS",
    "out_stage_distribution",
    "exact_drop_probability",
    "nested_domain_outages",
]

Penalty = str | Callable[[int], float]

#: The kappa sweep that reproduces Study A's "gain 2.9x at small kappa down to
#: 1.08x at large kappa" (see :func:`kappa_sweep`). Found by scanning a, rho,
#: the penalty law, the r and s limits and round kappa grids: the study's
#: ``L = 48, a = 0.9`` with its floor example's ``rho = 1e-3``, the
#: multiplicative penalty and the doubling grid 0.025 .. 0.8 give gains 2.925,
#: 2.591, 2.030, 1.486, 1.336, 1.081 (optimum (r, s) from (1, 21) to (2, 6); the
#: best no-skip design is r = 3 throughout). At ``rho <= 1e-5`` the same grid
#: gives 2.79x .. 1.07x (2.86x at kappa = 0.02; 1.08x would need kappa ~ 0.78).
STUDY_A_KAPPA_SWEEP: dict[str, Any] = {
    "stages": 48,
    "availability": 0.9,
    "domain_outage": 1e-3,
    "skip_penalties": (0.025, 0.05, 0.1, 0.2, 0.4, 0.8),
    "penalty": "multiplicative",
    "max_replicas": 16,
}

#: Most shared failure domains :func:`out_stage_distribution` keeps open at
#: once while sweeping the stages (it enumerates their ``2**k`` joint states).
MAX_ENUMERATED_DOMAINS = 18


def _stages(stages: Any) -> int:
    return check_int("stages", stages, low=1)


def _skip(skip_budget: Any) -> int:
    return check_int("skip_budget", skip_budget, low=0)


def stage_outage(availability: float, replicas: int, domain_outage: float = 0.0) -> float:
    """Probability that a stage is out (its domain is out or all its replicas are down).

    Parameters
    ----------
    availability : float
        Probability ``a`` that a worker is up, in [0, 1].
    replicas : int
        Replica workers ``r`` per stage, >= 1.
    domain_outage : float, optional
        Probability ``rho`` that the stage's shared failure domain is out.

    Returns
    -------
    float
        The stage outage probability ``q``.

    Notes
    -----
    .. math:: q = \\rho + (1 - \\rho)(1 - a)^r

    Workers fail independently of each other; the domain outage takes all
    ``r`` replicas down together.

    References
    ----------
    Study A ("Should a pipeline replicate stages or skip them?"), docs/studies.md.

    Examples
    --------
    >>> round(stage_outage(0.9, 3, 1e-3), 8)
    0.001999
    """
    a = check_probability("availability", availability)
    r = check_int("replicas", replicas, low=1)
    rho = check_probability("domain_outage", domain_outage)
    return rho + (1.0 - rho) * (1.0 - a) ** r


def drop_probability_q(stages: int, q: float, skip_budget: int) -> float:
    """Probability that more than ``s`` of ``L`` independent stages are out.

    Parameters
    ----------
    stages : int
        Number of pipeline stages ``L``.
    q : float
        Outage probability of each stage.
    skip_budget : int
        Out stages a microbatch may skip, ``s >= 0``.

    Returns
    -------
    float
        ``P(Bin(L, q) > s)``, accurate in the far tail (``scipy.stats.binom.sf``).

    Notes
    -----
    .. math:: P(\\text{drop}) = P(K > s), \\quad K \\sim \\mathrm{Binomial}(L, q)

    References
    ----------
    Study A, docs/studies.md.
    """
    L = _stages(stages)
    q = check_probability("q", q)
    s = _skip(skip_budget)
    if s >= L:
        return 0.0
    from scipy.stats import binom  # on first use: keeps `import sim` light

    return float(binom.sf(s, L, q))


def drop_probability(stages: int, replicas: int, skip_budget: int, availability: float,
                     domain_outage: float = 0.0) -> float:
    """Probability that a microbatch is dropped (more than ``s`` stages out).

    Parameters
    ----------
    stages : int
        Number of pipeline stages ``L``.
    replicas : int
        Replicas per stage ``r``.
    skip_budget : int
        Skip budget ``s``.
    availability : float
        Worker availability ``a``.
    domain_outage : float, optional
        Unavailability ``rho`` of each stage's shared domain.

    Returns
    -------
    float
        ``P(Bin(L, q) > s)`` with ``q = rho + (1 - rho)(1 - a)^r``.

    Notes
    -----
    .. math:: P(\\text{drop}) = \\sum_{k > s} \\binom{L}{k} q^k (1-q)^{L-k}

    computed with the binomial survival function (exact to about 1e-15
    relative in the tail, where ``1 - cdf`` would cancel).

    References
    ----------
    Study A, docs/studies.md.

    Examples
    --------
    >>> round(drop_probability(48, 3, 1, 0.9, 1e-3), 5)
    0.00424
    """
    L = _stages(stages)
    s = _skip(skip_budget)
    q = stage_outage(availability, replicas, domain_outage)
    return drop_probability_q(L, q, s)


def floor_drop_rate(stages: int, domain_outage: float) -> float:
    """Drop rate with no skipping and infinitely many replicas (the shared-domain floor).

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    domain_outage : float
        Unavailability ``rho`` of each stage's domain.

    Returns
    -------
    float
        ``1 - (1 - rho)^L``.

    Notes
    -----
    With ``s = 0`` a microbatch needs every stage, and no number of replicas
    helps against a domain outage, so success is at most :math:`(1-\\rho)^L`:

    .. math:: \\lim_{r \\to \\infty} P(\\text{drop} \\mid s = 0) = 1 - (1 - \\rho)^L

    (computed as ``-expm1(L log1p(-rho))``). For a skip budget ``s`` the floor
    is ``P(Bin(L, rho) > s)``; see :func:`min_replicas`.

    References
    ----------
    Study A, docs/studies.md.

    Examples
    --------
    >>> round(floor_drop_rate(48, 1e-3), 4)
    0.0469
    """
    L = _stages(stages)
    rho = check_probability("domain_outage", domain_outage)
    if rho == 1.0:
        return 1.0
    return float(-math.expm1(L * math.log1p(-rho)))


def skipped_distribution(stages: int, q: float, skip_budget: int) -> np.ndarray:
    """Distribution of the number of skipped stages, on the delivered outcomes.

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    q : float
        Stage outage probability.
    skip_budget : int
        Skip budget ``s``.

    Returns
    -------
    numpy.ndarray
        Array of length ``s + 1`` with ``P(K = k)`` for ``k = 0..s``,
        ``K ~ Binomial(L, q)`` (entries with ``k > L`` are 0). It sums to the
        delivery probability ``P(K <= s)``, not to 1.

    Notes
    -----
    .. math:: P(K = k) = \\binom{L}{k} q^k (1 - q)^{L - k}, \\quad k = 0, \\dots, s

    References
    ----------
    Study A, docs/studies.md.
    """
    L = _stages(stages)
    q = check_probability("q", q)
    s = _skip(skip_budget)
    from scipy.stats import binom

    return binom.pmf(np.arange(s + 1), L, q)


def _quality_weights(k: np.ndarray, skip_penalty: float, penalty: Penalty) -> np.ndarray:
    """Quality of a microbatch that skipped ``k`` stages (:class:`sim.analytic.penalty.SkipPenalty`)."""
    return SkipPenalty(skip_penalty, penalty).weights(k)


def quality_mass(stages: int, q: float, skip_budget: int, skip_penalty: float,
                 penalty: Penalty = "multiplicative") -> float:
    """Expected quality of a microbatch, counting a dropped one as quality 0.

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    q : float
        Stage outage probability.
    skip_budget : int
        Skip budget ``s``.
    skip_penalty : float
        Per-skip quality loss ``kappa`` in [0, 1].
    penalty : {"multiplicative", "additive"} or callable, optional
        Quality of a microbatch that skipped ``k`` stages: ``(1 - kappa)^k``
        (the study's), ``max(0, 1 - kappa k)``, or ``penalty(k)`` (a callable
        returning a value in [0, 1]; ``skip_penalty`` is then unused).

    Returns
    -------
    float
        :math:`E[\\mathrm{quality}(K); K \\le s]`.

    Notes
    -----
    .. math:: E[(1-\\kappa)^K ; K \\le s] = \\sum_{k=0}^{s} \\binom{L}{k} q^k (1-q)^{L-k} (1-\\kappa)^k

    For ``s >= L`` and the multiplicative penalty this is
    :math:`(1 - \\kappa q)^L`.

    References
    ----------
    Study A, docs/studies.md.
    """
    pk = skipped_distribution(stages, q, skip_budget)
    w = _quality_weights(np.arange(pk.size), skip_penalty, penalty)
    # an expectation of a quality in [0, 1]: the pmf's float sum can pass 1 by an ulp
    # (L 24, q 8.9e-18: 1 + 2.1e-16), which the clip takes back
    return float(min(1.0, max(0.0, np.dot(pk, w))))


def mean_quality_delivered(stages: int, q: float, skip_budget: int, skip_penalty: float,
                           penalty: Penalty = "multiplicative") -> float:
    """Mean quality of the delivered microbatches.

    Parameters
    ----------
    stages, q, skip_budget, skip_penalty, penalty
        As for :func:`quality_mass`.

    Returns
    -------
    float
        :math:`E[\\mathrm{quality}(K) \\mid K \\le s]`; ``nan`` when nothing is
        ever delivered (``P(K <= s) = 0``).

    Notes
    -----
    .. math:: E[\\mathrm{quality}(K) \\mid K \\le s] = \\frac{E[\\mathrm{quality}(K); K \\le s]}{P(K \\le s)}

    References
    ----------
    Study A, docs/studies.md.
    """
    pk = skipped_distribution(stages, q, skip_budget)
    w = _quality_weights(np.arange(pk.size), skip_penalty, penalty)
    delivered = float(pk.sum())
    if delivered <= 0.0:
        return math.nan
    return float(np.dot(pk, w)) / delivered


def design_cost(stages: int, replicas: int, skip_budget: int, availability: float,
                domain_outage: float, skip_penalty: float,
                penalty: Penalty = "multiplicative") -> float:
    """Workers per unit of quality-weighted goodput of the design ``(r, s)``.

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    replicas : int
        Replicas per stage ``r``.
    skip_budget : int
        Skip budget ``s``.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Domain unavailability ``rho``.
    skip_penalty : float
        Per-skip quality loss ``kappa``.
    penalty : {"multiplicative", "additive"} or callable, optional
        Quality law, as for :func:`quality_mass`.

    Returns
    -------
    float
        The cost; ``inf`` when the quality mass is 0.

    Notes
    -----
    .. math:: \\mathrm{cost}(r, s) = \\frac{L r}{E[(1-\\kappa)^K ; K \\le s]},
              \\quad K \\sim \\mathrm{Binomial}(L, \\rho + (1-\\rho)(1-a)^r)

    References
    ----------
    Study A, docs/studies.md.
    """
    L = _stages(stages)
    r = check_int("replicas", replicas, low=1)
    q = stage_outage(availability, r, domain_outage)
    mass = quality_mass(L, q, skip_budget, skip_penalty, penalty)
    return L * r / mass if mass > 0 else math.inf


@dataclass(frozen=True)
class Design:
    """Outcome of :func:`min_replicas`.

    Attributes
    ----------
    feasible : bool
        Whether some ``r <= max_replicas`` reaches the target drop rate.
    replicas : int or None
        The smallest such ``r`` (None when infeasible).
    workers : int or None
        ``L * r`` (None when infeasible).
    drop_rate : float
        Drop rate at the chosen ``r``, or at ``max_replicas`` when infeasible.
    floor : float
        Limit of the drop rate as ``r -> inf``: ``P(Bin(L, rho) > s)``.
    reason : str
        Empty when feasible; otherwise why not.
    """

    feasible: bool
    replicas: int | None
    workers: int | None
    drop_rate: float
    floor: float
    reason: str


def min_replicas(stages: int, availability: float, domain_outage: float, skip_budget: int,
                 target_drop: float, max_replicas: int = 64) -> Design:
    """Smallest replication that keeps the drop rate at or below a target.

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Domain unavailability ``rho``.
    skip_budget : int
        Skip budget ``s``.
    target_drop : float
        Largest acceptable drop probability, in (0, 1].
    max_replicas : int, optional
        Largest ``r`` considered (default 64).

    Returns
    -------
    Design
        ``feasible``, ``replicas``, ``workers = L r``, ``drop_rate``, ``floor``
        and ``reason``.

    Notes
    -----
    The drop rate :math:`P(\\mathrm{Bin}(L, q_r) > s)` decreases in ``r``
    (``q_r`` does) towards the shared-domain floor

    .. math:: \\lim_{r\\to\\infty} P(\\text{drop}) = P(\\mathrm{Bin}(L, \\rho) > s)

    which is :math:`1 - (1-\\rho)^L` for ``s = 0``. If the floor is at or above
    the target no replication helps, and the reason says so with the floor.

    At ``L = 48, a = 0.9, rho <= 1e-5`` and a target of 1e-3 this gives
    ``r = 5`` (240 workers) with ``s = 0`` and ``r = 2`` (96 workers) with
    ``s = 4``; at ``rho = 1e-3`` and a target of 0.01, ``s = 0`` is
    infeasible (floor 4.69 %) and ``s = 1`` needs ``r = 3`` (drop 0.424 %).

    References
    ----------
    Study A, docs/studies.md.
    """
    L = _stages(stages)
    a = check_probability("availability", availability)
    rho = check_probability("domain_outage", domain_outage)
    s = _skip(skip_budget)
    target = check_probability("target_drop", target_drop, open_low=True)
    rmax = check_int("max_replicas", max_replicas, low=1)
    floor = drop_probability_q(L, rho, s)
    drop = 1.0
    for r in range(1, rmax + 1):
        drop = drop_probability(L, r, s, a, rho)
        if drop <= target:
            return Design(True, r, L * r, drop, floor, "")
    if floor >= target:
        reason = (f"the shared-domain floor P(Bin({L}, {rho:g}) > {s}) = {floor:.4g} "
                  f"({floor:.2%}) is not below target_drop {target:g}; no number of replicas reaches it")
    else:
        reason = (f"target_drop {target:g} needs more than max_replicas={rmax} replicas "
                  f"(drop rate {drop:.4g} at r={rmax})")
    return Design(False, None, None, drop, floor, reason)


@dataclass(frozen=True)
class OptimalDesign:
    """Outcome of :func:`optimal_design`.

    Attributes
    ----------
    replicas, skip_budget : int
        The cost-minimising design ``(r, s)``.
    cost : float
        Its cost (workers per unit of quality-weighted goodput).
    noskip_replicas : int
        The best replication with ``s = 0``.
    noskip_cost : float
        Its cost.
    gain : float
        ``noskip_cost / cost`` (>= 1).
    """

    replicas: int
    skip_budget: int
    cost: float
    noskip_replicas: int
    noskip_cost: float
    gain: float


def optimal_design(stages: int, availability: float, domain_outage: float, skip_penalty: float,
                   penalty: Penalty = "multiplicative", max_replicas: int = 16,
                   max_skip: int | None = None) -> OptimalDesign:
    """Cost-optimal replication and skip budget, and its gain over the best no-skip design.

    Parameters
    ----------
    stages : int
        Number of stages ``L``.
    availability : float
        Worker availability ``a``.
    domain_outage : float
        Domain unavailability ``rho``.
    skip_penalty : float
        Per-skip quality loss ``kappa``.
    penalty : {"multiplicative", "additive"} or callable, optional
        Quality law, as for :func:`quality_mass`.
    max_replicas : int, optional
        Largest ``r`` searched (default 16).
    max_skip : int, optional
        Largest ``s`` searched (default ``L``).

    Returns
    -------
    OptimalDesign

    Notes
    -----
    Minimises over ``1 <= r <= max_replicas``, ``0 <= s <= max_skip``

    .. math:: \\mathrm{cost}(r, s) = \\frac{L r}{E[(1-\\kappa)^K ; K \\le s]}

    (:func:`design_cost`); the no-skip design is the best ``r`` with ``s = 0``
    and ``gain = noskip_cost / cost``. Costs within a relative ``1e-9`` of the
    minimum count as ties (large ``s`` adds only ~1e-17 of mass); ties go to
    the fewest workers, then the smallest ``s``.

    Cheap skips give skip-heavy designs and expensive ones replication. With
    :data:`STUDY_A_KAPPA_SWEEP` (``L = 48, a = 0.9, rho = 1e-3``,
    multiplicative, kappa = 0.025, 0.05, 0.1, 0.2, 0.4, 0.8) the optimum moves
    from ``(r, s) = (1, 21)`` to ``(2, 6)`` and the gain falls from 2.92x to
    1.08x, the study's "2.9x down to 1.08x". At ``rho <= 1e-5`` the same grid
    gives 2.79x .. 1.07x (2.86x at kappa = 0.02).

    References
    ----------
    Study A, docs/studies.md.
    """
    L = _stages(stages)
    a = check_probability("availability", availability)
    rho = check_probability("domain_outage", domain_outage)
    rmax = check_int("max_replicas", max_replicas, low=1)
    smax = L if max_skip is None else min(check_int("max_skip", max_skip, low=0), L)
    ks = np.arange(smax + 1)
    w = _quality_weights(ks, skip_penalty, penalty)
    costs = np.empty((rmax, smax + 1))
    for r in range(1, rmax + 1):
        q = rho + (1.0 - rho) * (1.0 - a) ** r
        from scipy.stats import binom

        mass = np.cumsum(binom.pmf(ks, L, q) * w)
        with np.errstate(divide="ignore"):
            costs[r - 1] = np.where(mass > 0, L * r / np.where(mass > 0, mass, 1.0), np.inf)
    return _pick_optimal(costs)


def _pick_optimal(costs: np.ndarray) -> OptimalDesign:
    """The cheapest ``(r, s)`` of ``costs[r - 1, s]`` (ties within a relative 1e-9 to the
    fewest replicas, then the smallest ``s``) and the best no-skip design."""
    best = float(costs.min())
    if math.isfinite(best):
        rs, ss = np.nonzero(costs <= best * (1 + 1e-9))
    else:
        rs, ss = np.array([0]), np.array([0])
    i = int(np.lexsort((ss, rs))[0])  # fewest replicas, then smallest s
    r_opt, s_opt = int(rs[i]) + 1, int(ss[i])
    col0 = costs[:, 0]
    nb = float(col0.min())
    r0 = int(np.nonzero(col0 <= nb * (1 + 1e-9))[0][0]) + 1 if math.isfinite(nb) else 1
    cost = float(costs[r_opt - 1, s_opt])
    noskip = float(costs[r0 - 1, 0])
    gain = noskip / cost if math.isfinite(cost) and math.isfinite(noskip) else math.nan
    return OptimalDesign(r_opt, s_opt, cost, r0, noskip, gain)


def kappa_sweep(stages: int = 48, availability: float = 0.9, domain_outage: float = 1e-3,
                skip_penalties: Iterable[float] = (0.025, 0.05, 0.1, 0.2, 0.4, 0.8),
                penalty: Penalty = "multiplicative", max_replicas: int = 16,
                max_skip: int | None = None) -> list[tuple[float, OptimalDesign]]:
    """The cost-optimal design for each skip penalty of a sweep.

    Parameters
    ----------
    stages, availability, domain_outage, penalty, max_replicas, max_skip
        As for :func:`optimal_design`; the defaults are :data:`STUDY_A_KAPPA_SWEEP`.
    skip_penalties : iterable of float
        The kappa grid.

    Returns
    -------
    list of (float, OptimalDesign)
        ``(kappa, optimal_design(...))`` per kappa.

    Notes
    -----
    With the defaults the gains are 2.925, 2.591, 2.030, 1.486, 1.336, 1.081:
    Study A's "about 2.9x at small kappa down to about 1.08x".

    References
    ----------
    Study A, docs/studies.md.
    """
    return [(float(k), optimal_design(stages, availability, domain_outage, k, penalty,
                                      max_replicas, max_skip)) for k in skip_penalties]


# ============================================================ nested failure domains


def nested_domain_outages(chains: Sequence[Sequence[str]], unavailability: Mapping[str, float],
                          availability: float) -> dict[str, Any]:
    """Exact stationary outages of workers in a tree of failure domains.

    Parameters
    ----------
    chains : sequence of sequence of str
        Worker ``i``'s chain of domains, outermost first (for example
        ``("region0", "region0/rack1", "region0/rack1/host2")``); the chains
        form a tree (a domain has one parent).
    unavailability : mapping of str to float
        Each domain's own unavailability ``u_d`` (missing: 0).
    availability : float
        Each worker's own availability ``a``.

    Returns
    -------
    dict
        ``effective_availability`` (mean over workers of ``a prod_{d in chain}
        (1 - u_d)``), ``domain_unavailability`` (``{d: 1 - prod_{e <= d} (1 -
        u_e)}``, ancestors included) and ``joint_outage`` (``{d: P(every worker
        below d is down)}``).

    Notes
    -----
    Components fail independently and each is up with its stationary
    probability. Let ``A_d`` be the product of ``1 - u`` over the ancestors
    of ``d`` (``d`` excluded) and ``c_d`` the probability that every worker
    below ``d`` is down *given* that ``d`` and its ancestors are up:
    ``c_w = 1 - a`` for a worker and, over the children ``k`` of ``d`` (a
    worker child has ``u_k = 0``), ``c_d = prod_k (1 - (1 - u_k)(1 - c_k))``;
    then ``P(every worker below d down) = 1 - A_d (1 - u_d)(1 - c_d)``.
    One flat level of ``r`` workers gives ``rho + (1 - rho)(1 - a)^r``.

    References
    ----------
    .. [1] R. E. Barlow and F. Proschan, *Statistical Theory of Reliability
       and Life Testing*, Holt, Rinehart and Winston, 1975 (structure
       functions of independent components in series and parallel).
    """
    a = float(check_probability("availability", availability))
    parent: dict[str, str | None] = {}
    workers_below: dict[str, list[int]] = {}
    for i, chain in enumerate(chains):
        check(len(chain) >= 1, "chains", "non-empty domain chains", chain)
        for depth, d in enumerate(chain):
            p = chain[depth - 1] if depth else None
            check(parent.setdefault(d, p) == p, "chains", "a tree (one parent per domain)", d)
            workers_below.setdefault(d, []).append(i)
    u = {d: float(check_probability("unavailability", unavailability.get(d, 0.0))) for d in parent}
    children: dict[str, list[str]] = {d: [] for d in parent}
    for d, p in parent.items():
        if p is not None:
            children[p].append(d)
    direct: dict[str, int] = {d: 0 for d in parent}
    for chain in chains:
        direct[chain[-1]] += 1

    def cond(d: str) -> float:  # all below d down, given d and its ancestors up
        c = (1.0 - a) ** direct[d]
        for k in children[d]:
            c *= 1.0 - (1.0 - u[k]) * (1.0 - cond(k))
        return c

    def above(d: str) -> float:  # prod of (1 - u) over the strict ancestors
        out, p = 1.0, parent[d]
        while p is not None:
            out *= 1.0 - u[p]
            p = parent[p]
        return out

    eff = float(np.mean([a * np.prod([1.0 - u[d] for d in chain]) for chain in chains]))
    return {
        "effective_availability": eff,
        "domain_unavailability": {d: 1.0 - above(d) * (1.0 - u[d]) for d in parent},
        "joint_outage": {d: 1.0 - above(d) * (1.0 - u[d]) * (1.0 - cond(d)) for d in parent},
    }



# ============================================================ pipeline, any placement


@dataclass
class _Trie:
    """Private failure domains of one stage, as a tree; leaves are replicas."""

    children: dict[Hashable, _Trie]
    leaves: list[tuple[float, list[int]]]  # (availability, indices of enumerated domains on the chain)


def _placement(replica_domains: Any, domain_outage: Any, availability: Any
               ) -> tuple[list[list[tuple[Hashable, ...]]], dict[Hashable, float], list[list[float]]]:
    rule = "a non-empty list of stages, each a non-empty list of replica domain chains"
    check(isinstance(replica_domains, Sequence) and not isinstance(replica_domains, str)
          and len(replica_domains) >= 1, "replica_domains", rule, replica_domains)
    chains: list[list[tuple[Hashable, ...]]] = []
    for stage in replica_domains:
        check(isinstance(stage, Sequence) and not isinstance(stage, str) and len(stage) >= 1,
              "replica_domains", rule, stage)
        row = []
        for chain in stage:
            if isinstance(chain, str):
                chain = (chain,)
            check(isinstance(chain, Iterable), "replica_domains", rule, chain)
            row.append(tuple(chain))
        chains.append(row)
    check(isinstance(domain_outage, Mapping), "domain_outage",
          "a mapping from domain name to unavailability", domain_outage)
    outage = {k: check_probability("domain_outage", v) for k, v in domain_outage.items()}
    arule = "a probability, or a list of lists of probabilities shaped like replica_domains"
    if isinstance(availability, Sequence) and not isinstance(availability, str):
        check(len(availability) == len(chains), "availability", arule, availability)
        avail = []
        for row, arow in zip(chains, availability, strict=True):
            check(isinstance(arow, Sequence) and len(arow) == len(row), "availability", arule, arow)
            avail.append([check_probability("availability", x) for x in arow])
    else:
        a = check_probability("availability", availability)
        avail = [[a] * len(row) for row in chains]
    return chains, outage, avail


def _enumerated_domains(chains: list[list[tuple[Hashable, ...]]], outage: Mapping[Hashable, float]
                        ) -> list[Hashable]:
    """Domains whose states are enumerated: shared by stages, or not tree-like inside one."""
    live = {d for row in chains for ch in row for d in ch if 0.0 < outage.get(d, 0.0) < 1.0}
    stages_of: dict[Hashable, set[int]] = {}
    for j, row in enumerate(chains):
        for ch in row:
            for d in ch:
                if d in live:
                    stages_of.setdefault(d, set()).add(j)
    enum = {d for d, js in stages_of.items() if len(js) > 1}
    while True:  # a private domain must sit at one place in its stage's tree
        prefixes: dict[Hashable, set[tuple[Hashable, ...]]] = {}
        for row in chains:
            for ch in row:
                path: tuple[Hashable, ...] = ()
                for d in ch:
                    if d in live and d not in enum:
                        prefixes.setdefault(d, set()).add(path)
                        path = path + (d,)
        bad = {d for d, ps in prefixes.items() if len(ps) > 1}
        if not bad:
            break
        enum |= bad
    return sorted(enum, key=lambda d: (str(type(d)), str(d)))


def _build_trie(row: list[tuple[Hashable, ...]], arow: list[float], outage: Mapping[Hashable, float],
                col: Mapping[Hashable, int]) -> _Trie:
    root = _Trie({}, [])
    for ch, a in zip(row, arow, strict=True):
        if any(outage.get(d, 0.0) >= 1.0 for d in ch):
            continue  # always down: contributes a factor 1 to "all replicas down"
        node = root
        idx = []
        for d in ch:
            u = outage.get(d, 0.0)
            if u <= 0.0:
                continue
            if d in col:
                idx.append(col[d])
            else:
                node = node.children.setdefault(d, _Trie({}, []))
        node.leaves.append((a, idx))
    return root


def _all_down(node: _Trie, states: np.ndarray, outage: Mapping[Hashable, float]) -> np.ndarray:
    """P(every replica under ``node`` is down | enumerated states), per state row."""
    acc = np.ones(states.shape[0])
    for a, idx in node.leaves:
        if idx:
            up = states[:, idx].all(axis=1)
            acc *= np.where(up, 1.0 - a, 1.0)
        else:
            acc *= 1.0 - a
    for d, child in node.children.items():
        u = outage[d]
        acc *= u + (1.0 - u) * _all_down(child, states, outage)
    return acc


def out_stage_distribution(replica_domains: Sequence[Sequence[Sequence[Hashable]]],
                           domain_outage: Mapping[Hashable, float],
                           availability: float | Sequence[Sequence[float]]) -> np.ndarray:
    """Exact distribution of the number of out stages under any placement.

    Parameters
    ----------
    replica_domains : list of list of tuple
        ``replica_domains[j][i]`` is the chain of failure domains (outermost
        first, e.g. ``("region0", "rack3")``) of replica ``i`` of stage ``j``;
        an empty chain means no domain.
    domain_outage : dict
        Unavailability of each domain, independent across domains; a domain
        not listed never fails.
    availability : float or list of list of float
        Worker availability: one value, or one per replica (shaped like
        ``replica_domains``). Workers are independent of each other and of
        the domains.

    Returns
    -------
    numpy.ndarray
        ``P(#out stages = k)`` for ``k = 0..L``.

    Raises
    ------
    ConfigError
        On malformed input, or when some stage boundary is crossed by more
        than :data:`MAX_ENUMERATED_DOMAINS` shared domains.

    Notes
    -----
    A replica is up when its worker and every domain on its chain are up; a
    stage is out when all its replicas are down. Let ``E`` be the domains
    shared by two or more stages (plus any domain that does not sit at a
    single place in its stage's tree). Given the states ``z`` of ``E`` the
    stages are independent, and the outage of stage ``j`` follows from a
    recursion over the tree of its private domains,

    .. math:: P_d = u_d + (1 - u_d) \\prod_{c \\in \\mathrm{children}(d)} P_c
              \\prod_{i \\in \\mathrm{replicas}(d)} \\bigl(1 - a_i [z \\text{ keeps } i \\text{ up}]\\bigr)

    so the number of out stages is Poisson-binomial given ``z`` (a
    convolution over the stages), and

    .. math:: P(N = k) = \\sum_z P(z)\\, P(N = k \\mid z).

    The sum over ``z`` is a sweep over the stages in order that carries the
    joint law of the domains used both by earlier and by later stages (a
    domain is summed out after its last stage), so the cost is
    :math:`O(L^2 2^w)` with ``w`` the largest such set, small for packed or
    layered layouts even with many domains in total.

    Exact, also when stages share racks or regions (where the binomial law of
    :func:`drop_probability` is not). With one private domain per stage it
    reduces to ``Binomial(L, rho + (1 - rho)(1 - a)^r)``.

    References
    ----------
    Study A, docs/studies.md (the model whose one-domain-per-stage assumption this drops).
    """
    chains, outage, avail = _placement(replica_domains, domain_outage, availability)
    # domains that never fail are dropped; replicas under a domain that is always out are dead
    rows, arows = [], []
    for row, arow in zip(chains, avail, strict=True):
        r2, a2 = [], []
        for ch, a in zip(row, arow, strict=True):
            if any(outage.get(d, 0.0) >= 1.0 for d in ch):
                continue
            r2.append(tuple(d for d in ch if outage.get(d, 0.0) > 0.0))
            a2.append(a)
        rows.append(r2)
        arows.append(a2)
    return _frontier_distribution(rows, arows, outage)


def _frontier_distribution(rows: list[list[tuple[Hashable, ...]]], arows: list[list[float]],
                           outage: Mapping[Hashable, float]) -> np.ndarray:
    """Sweep the stages in order, carrying the joint law of the 'open' enumerated domains.

    ``P[z, k]`` is the probability that the open domains are in joint state ``z``
    (bit ``i`` set: ``frontier[i]`` is up) and ``k`` of the stages seen so far are
    out. A domain opens at the first stage that uses it and is summed out after
    the last one.
    """
    enum = _enumerated_domains(rows, outage)
    es = set(enum)
    uses = [{d for ch in row for d in ch if d in es} for row in rows]
    last = {d: j for j, u in enumerate(uses) for d in u}
    width = 0
    open_: set[Hashable] = set()
    for j, u in enumerate(uses):
        open_ |= u
        width = max(width, len(open_))
        open_ = {d for d in open_ if last[d] > j}
    check(width <= MAX_ENUMERATED_DOMAINS, "replica_domains",
          f"a placement whose stages, taken in order, depend on at most {MAX_ENUMERATED_DOMAINS} "
          "shared failure domains at once (exact enumeration is 2^k)", width)
    L = len(rows)
    frontier: list[Hashable] = []
    P = np.zeros((1, L + 1))
    P[0, 0] = 1.0
    for j, (row, arow) in enumerate(zip(rows, arows, strict=True)):
        for d in sorted(uses[j] - set(frontier), key=enum.index):
            u = outage[d]
            P = np.concatenate([P * u, P * (1.0 - u)])  # new top bit: 0 = down, 1 = up
            frontier.append(d)
        w = len(frontier)
        ids = np.arange(1 << w, dtype=np.int64)
        states = ((ids[:, None] >> np.arange(w, dtype=np.int64)) & 1).astype(bool)
        trie = _build_trie(row, arow, outage, {d: i for i, d in enumerate(frontier)})
        p = _all_down(trie, states, outage)[:, None]
        shifted = np.zeros_like(P)
        shifted[:, 1:] = P[:, :-1]
        P = P * (1.0 - p) + shifted * p
        for d in [d for d in frontier if last[d] == j]:
            i = frontier.index(d)
            bit = ((np.arange(P.shape[0], dtype=np.int64) >> i) & 1).astype(bool)
            P = P[~bit] + P[bit]
            frontier.pop(i)
    return P.sum(axis=0)


def exact_drop_probability(replica_domains: Sequence[Sequence[Sequence[Hashable]]],
                           domain_outage: Mapping[Hashable, float],
                           availability: float | Sequence[Sequence[float]],
                           skip_budget: int) -> float:
    """Exact drop probability of the pipeline under any placement of replicas.

    Parameters
    ----------
    replica_domains, domain_outage, availability
        As for :func:`out_stage_distribution`.
    skip_budget : int
        Out stages a microbatch may skip.

    Returns
    -------
    float
        ``P(#out stages > s)``.

    Notes
    -----
    .. math:: P(\\text{drop}) = \\sum_{k > s} P(N = k)

    with the exact distribution of :func:`out_stage_distribution` (a sum of
    non-negative terms, so small tails keep their relative accuracy). Equal
    to :func:`drop_probability` when each stage has its own single domain.

    References
    ----------
    Study A, docs/studies.md.
    """
    s = _skip(skip_budget)
    dist = out_stage_distribution(replica_domains, domain_outage, availability)
    return float(min(1.0, max(0.0, dist[s + 1:].sum())))


