"""Closed forms and exact recursions that the simulations are checked against.

Everything here is a pure function of its arguments: no simulation, no random
numbers. Inputs are validated with the helpers of :mod:`sim.errors`, under the
CLI's parameter names (``'stages'``, ``'replicas'``, ``'skip_budget'``,
``'availability'``, ``'domain_outage'``, ``'skip_penalty'``, ``'target_drop'``,
``'nodes'``, ``'noise'``, ``'tau'``), so a bad value surfaces as one line.

Study A (replicate or skip pipeline stages)
    :func:`stage_outage`, :func:`drop_probability`, :func:`drop_probability_q`,
    :func:`floor_drop_rate`, :func:`skipped_distribution`, :func:`quality_mass`,
    :func:`mean_quality_delivered`, :func:`design_cost`, :func:`min_replicas`
    (:class:`Design`), :func:`optimal_design` (:class:`OptimalDesign`),
    :func:`kappa_sweep` and :data:`STUDY_A_KAPPA_SWEEP`.
Pipeline under any placement of replicas onto failure domains
    :func:`out_stage_distribution`, :func:`exact_drop_probability`.
Study B (gossip with a stubborn node, complete graph)
    :func:`matching_contraction`, :func:`rounds_to_reduce`, :func:`noise_floor`,
    :func:`noise_floor_before_averaging`, :func:`capture_rate`,
    :func:`matching_capture_rate`, :func:`creep_bound`, :func:`matching_creep`,
    :func:`complete_graph_honest_mean`.
Random-edge gossip on any graph
    :func:`edge_gossip_disagreement`, :func:`edge_gossip_honest_disagreement`,
    :func:`edge_gossip_rate`, :func:`expected_averaging_matrix`,
    :func:`spectral_gap`, :func:`fiedler_value`, :func:`stubborn_honest_mean`,
    :func:`stubborn_honest_expectation`, :func:`harmonic_extension`,
    :func:`honest_nodes`.
Checkpoint interval (:mod:`sim.analytic.checkpointing`)
    :func:`optimal_checkpoint_interval` (the exact Lambert-W optimum),
    :func:`checkpoint_time_per_work`, :func:`optimal_time_per_work`,
    :func:`best_checkpoint_every`, :func:`job_mtbf`, :func:`efficiency_wall`.
Fastest k of n (:mod:`sim.analytic.order_statistics`, :mod:`sim.analytic.fastest_k`)
    :func:`exponential_order_statistic_mean`, :func:`pareto_order_statistic_moment`,
    :func:`order_statistic_mean`, :func:`kth_smallest_mean`,
    :func:`inclusion_probabilities`, :func:`drop_stragglers_step_means`;
    :func:`sgd_mse`, :func:`sgd_steps_to_accuracy`, :func:`time_to_accuracy`,
    :func:`fastest_k_sweep`, :func:`best_lr`, :func:`fastest_k_bias`.

References
----------
.. [A] "Should a pipeline replicate stages or skip them?" (Study A; its model,
   formulas and numbers are restated in ``docs/studies.md``).
.. [B] "What can one stubborn node do to gossip averaging?" (Study B;
   ``docs/studies.md`` restates it with the readings that make its constants
   exact).
.. [BGPS] S. Boyd, A. Ghosh, B. Prabhakar, D. Shah, "Randomized gossip
   algorithms", IEEE Trans. Information Theory 52(6), 2006.
.. [ACFO] D. Acemoglu, G. Como, F. Fagnani, A. Ozdaglar, "Opinion fluctuations
   and disagreement in social networks", Mathematics of Operations Research
   38(1), 2013.
.. [HKJ] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ..errors import (
    check,
    check_choice,
    check_int,
    check_nonnegative,
    check_probability,
)

__all__ = [
    # Study A
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
    # placement
    "MAX_ENUMERATED_DOMAINS",
    "out_stage_distribution",
    "exact_drop_probability",
    # Study B
    "matching_contraction",
    "rounds_to_reduce",
    "noise_floor",
    "noise_floor_before_averaging",
    "capture_rate",
    "matching_capture_rate",
    "creep_bound",
    "matching_creep",
    "complete_graph_honest_mean",
    # any graph
    "MAX_EXACT_NODES",
    "MAX_EXACT_RATE_NODES",
    "expected_averaging_matrix",
    "fiedler_value",
    "spectral_gap",
    "edge_gossip_rate",
    "edge_gossip_disagreement",
    "edge_gossip_honest_disagreement",
    "honest_nodes",
    "stubborn_honest_expectation",
    "stubborn_honest_mean",
    "harmonic_extension",
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

#: Largest graph for the exact second-moment recursion: it keeps dense
#: ``n x n`` matrices (about three of them, 8 bytes per entry; 10^4 nodes is
#: about 2.4 GB). Beyond this use :func:`edge_gossip_rate` or :func:`spectral_gap`.
MAX_EXACT_NODES = 10_000

#: Largest graph for which :func:`edge_gossip_rate` computes the exact rate by
#: default (a Lanczos iteration on ``n x n`` matrices: about 0.1 s for a ring of
#: 100 nodes, 8 s for 200); beyond it returns the spectral bound.
MAX_EXACT_RATE_NODES = 256


# =========================================================================== Study A


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
    """Quality of a microbatch that skipped ``k`` stages (:class:`sim.pipeline.penalty.SkipPenalty`)."""
    from ..pipeline.penalty import SkipPenalty

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
    return float(np.dot(pk, w))


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


__all__ += ["nested_domain_outages"]


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


# =========================================================================== Study B


def _even_nodes(n: Any) -> int:
    n = check_int("nodes", n, low=2)
    check(n % 2 == 0, "nodes", "an even integer >= 2", n)
    return n


def matching_contraction(n: int) -> float:
    """Expected contraction of disagreement per random perfect-matching round.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).

    Returns
    -------
    float
        ``(n - 2) / (2 (n - 1))``.

    Notes
    -----
    Averaging a pair lowers :math:`D = \\sum_i (x_i - \\bar x)^2` by
    :math:`(x_i - x_j)^2 / 2`; each pair is matched with probability
    :math:`1/(n-1)` and :math:`\\sum_{i<j} (x_i - x_j)^2 = n D`, so exactly

    .. math:: E[D' \\mid D] = \\frac{n - 2}{2 (n - 1)} D .

    References
    ----------
    Study B ("What can one stubborn node do to gossip averaging?"), docs/studies.md.
    """
    n = _even_nodes(n)
    return (n - 2) / (2 * (n - 1))


def rounds_to_reduce(n: int, factor: float = 1e-6) -> int:
    """Matching rounds until expected disagreement falls by ``factor``.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    factor : float, optional
        Target ratio ``E[D_t] / D_0`` in (0, 1) (default 1e-6).

    Returns
    -------
    int
        The smallest ``t`` with :math:`c^t \\le` ``factor``, ``c`` the
        :func:`matching_contraction` (about 20 for 1e-6 at any large ``n``).

    Notes
    -----
    .. math:: t = \\lceil \\ln(\\mathrm{factor}) / \\ln c \\rceil, \\quad c = \\frac{n-2}{2(n-1)}

    References
    ----------
    Study B, docs/studies.md.
    """
    c = matching_contraction(n)
    f = check_probability("factor", factor, open_low=True, open_high=True)
    if c == 0.0:
        return 1
    t = math.ceil(math.log(f) / math.log(c) - 1e-12)
    return max(t, 1)


def noise_floor(n: int, noise: float) -> float:
    """Stationary expected disagreement with per-round noise, measured after averaging.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    noise : float
        Standard deviation ``s`` of the fresh ``N(0, s^2)`` noise each node
        adds every round, before the matching averages.

    Returns
    -------
    float
        ``(n - 1)(n - 2) s^2 / n``.

    Notes
    -----
    Noise adds :math:`(n-1)s^2` to :math:`E[D]`, then the matching multiplies
    by :math:`c = (n-2)/(2(n-1))`; the fixed point of
    :math:`D \\mapsto c (D + (n-1) s^2)` is

    .. math:: D^* = \\frac{c (n-1) s^2}{1 - c} = \\frac{(n-1)(n-2)}{n} s^2 .

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    s = check_nonnegative("noise", noise)
    return (n - 1) * (n - 2) * s * s / n


def noise_floor_before_averaging(n: int, noise: float) -> float:
    """Stationary expected disagreement measured right after the noise, before averaging.

    Parameters
    ----------
    n : int
        Number of nodes (even, >= 2).
    noise : float
        Noise standard deviation ``s``.

    Returns
    -------
    float
        ``2 (n - 1)^2 s^2 / n``.

    Notes
    -----
    .. math:: D^* + (n - 1) s^2 = \\frac{2 (n-1)^2}{n} s^2

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    s = check_nonnegative("noise", noise)
    return 2 * (n - 1) ** 2 * s * s / n


def capture_rate(n: int) -> float:
    """Per-step contraction of ``E[m - b]`` with one stubborn node, single random pair.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (>= 2).

    Returns
    -------
    float
        ``1 - 1 / (n (n - 1))``.

    Notes
    -----
    Each honest node meets the stubborn one with probability
    :math:`2/(n(n-1))` and then moves the honest mean by
    :math:`(b - x_i) / (2(n-1))`; honest-honest pairs keep the mean, so

    .. math:: E[m' - b] = \\Bigl(1 - \\frac{1}{n (n - 1)}\\Bigr) (m - b).

    References
    ----------
    Study B, docs/studies.md; [ACFO] (stubborn agents in gossip).
    """
    n = check_int("nodes", n, low=2)
    return 1.0 - 1.0 / (n * (n - 1))


def matching_capture_rate(n: int) -> float:
    """Per-round contraction of ``E[m - b]`` with one stubborn node, random perfect matching.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (even, >= 2).

    Returns
    -------
    float
        ``1 - 1 / (2 (n - 1))``.

    Notes
    -----
    The stubborn node is matched to each honest node with probability
    :math:`1/(n-1)`, which moves the honest mean by :math:`(b - x_i)/(2(n-1))`:

    .. math:: E[m' - b] = \\Bigl(1 - \\frac{1}{2 (n - 1)}\\Bigr) (m - b).

    References
    ----------
    Study B, docs/studies.md.
    """
    n = _even_nodes(n)
    return 1.0 - 1.0 / (2 * (n - 1))


def creep_bound(n: int, tau: float) -> float:
    """Largest expected per-step move of the honest mean under a trust-region clip.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (>= 2).
    tau : float
        Clip radius (> 0); an honest node moves by ``clip(x_peer - x_self, tau) / 2``.

    Returns
    -------
    float
        ``tau / (n (n - 1))`` per single-pair step.

    Notes
    -----
    An honest node meets the stubborn one with probability
    :math:`2/(n(n-1))` and then moves by at most :math:`\\tau/2`, i.e. the mean
    by at most :math:`\\tau/(2(n-1))`; summed over the :math:`n-1` honest nodes

    .. math:: |E[m' - m]| \\le \\frac{\\tau}{n (n - 1)},

    with equality while every honest node is farther than ``tau`` from ``b``.

    References
    ----------
    Study B, docs/studies.md; [HKJ] (ClippedGossip, self-centred clipping).
    """
    n = check_int("nodes", n, low=2)
    t = check_nonnegative("tau", tau)
    return t / (n * (n - 1))


def matching_creep(n: int, tau: float) -> float:
    """Per-round creep of the honest mean under a clip, random perfect matching.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included (even, >= 2).
    tau : float
        Clip radius.

    Returns
    -------
    float
        ``tau / (2 (n - 1))``; exact while every honest node is farther than
        ``tau`` from the stubborn value.

    Notes
    -----
    The stubborn node's partner moves by exactly :math:`\\tau/2` towards it:

    .. math:: E[m' - m] = \\frac{\\tau}{2 (n - 1)}

    References
    ----------
    Study B, docs/studies.md; [HKJ].
    """
    n = _even_nodes(n)
    t = check_nonnegative("tau", tau)
    return t / (2 * (n - 1))


def complete_graph_honest_mean(n: int, stubborn_value: float | np.ndarray, honest_mean0: float | np.ndarray,
                               steps: int, *, protocol: str = "edge") -> np.ndarray:
    """Exact expected honest mean, one stubborn node on the complete graph.

    Parameters
    ----------
    n : int
        Number of nodes, the stubborn one included.
    stubborn_value : float or array
        The stubborn value ``b`` (scalar or a vector of dimension ``d``).
    honest_mean0 : float or array
        Initial honest mean ``m_0`` (same shape as ``b``).
    steps : int
        Steps (``edge``: single random pairs) or rounds (``matching``).
    protocol : {"edge", "matching"}, optional

    Returns
    -------
    numpy.ndarray
        ``E[m_t]`` for ``t = 0..steps``, shape ``(steps + 1,)`` or ``(steps + 1, d)``.

    Notes
    -----
    .. math:: E[m_t] = b + \\gamma^t (m_0 - b), \\quad
              \\gamma = 1 - \\frac{1}{n(n-1)} \\text{ (edge)}, \\;
              1 - \\frac{1}{2(n-1)} \\text{ (matching)}

    References
    ----------
    Study B, docs/studies.md.
    """
    proto = check_choice("protocol", protocol, ["edge", "matching"])
    g = capture_rate(n) if proto == "edge" else matching_capture_rate(n)
    T = check_int("steps", steps, low=0)
    b = np.asarray(stubborn_value, dtype=float)
    m0 = np.asarray(honest_mean0, dtype=float)
    f = g ** np.arange(T + 1, dtype=float)
    f = f.reshape((-1,) + (1,) * np.broadcast(b, m0).ndim)
    return b + f * (m0 - b)


# ============================================================== gossip on any graph


@dataclass(frozen=True)
class _Edges:
    nodes: list[Hashable]
    i: np.ndarray
    j: np.ndarray

    @property
    def n(self) -> int:
        return len(self.nodes)

    @property
    def m(self) -> int:
        return int(self.i.size)

    def laplacian(self) -> sp.csr_matrix:
        n = self.n
        deg = np.bincount(self.i, minlength=n) + np.bincount(self.j, minlength=n)
        rows = np.concatenate([self.i, self.j, np.arange(n)])
        cols = np.concatenate([self.j, self.i, np.arange(n)])
        data = np.concatenate([-np.ones(2 * self.m), deg.astype(float)])
        return sp.csr_matrix((data, (rows, cols)), shape=(n, n))


def _edges(G: Any) -> _Edges:
    check(isinstance(G, nx.Graph), "graph", "a networkx graph", type(G).__name__)
    check(not G.is_directed(), "graph", "an undirected graph", type(G).__name__)
    nodes = list(G.nodes())
    check(len(nodes) >= 2, "nodes", "an integer >= 2", len(nodes))
    index = {v: k for k, v in enumerate(nodes)}
    pairs = [(index[u], index[v]) for u, v in G.edges()]
    for a, b in pairs:
        check(a != b, "graph", "a graph without self-loops", nodes[a])
    check(len(pairs) >= 1, "graph", "a graph with at least one edge", G.number_of_edges())
    ij = np.array(pairs, dtype=np.int64)
    return _Edges(nodes, ij[:, 0].copy(), ij[:, 1].copy())


def _check_exact_size(n: int) -> None:
    check(n <= MAX_EXACT_NODES, "nodes",
          f"at most {MAX_EXACT_NODES} for the exact second-moment recursion (O(n^2) memory; "
          "use edge_gossip_rate() or spectral_gap() instead)", n)


def expected_averaging_matrix(G: nx.Graph) -> sp.csr_matrix:
    """Expected averaging matrix of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one edge is drawn uniformly per step.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``E[W] = I - L / (2 m)`` in the order of ``G.nodes()``.

    Notes
    -----
    :math:`W_e = I - (e_i - e_j)(e_i - e_j)^T / 2` and
    :math:`\\sum_e (e_i - e_j)(e_i - e_j)^T = L`, so

    .. math:: E[W] = \\frac{1}{m} \\sum_e W_e = I - \\frac{L}{2m}.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    return (sp.identity(e.n, format="csr") - e.laplacian() / (2.0 * e.m)).tocsr()


def fiedler_value(G: nx.Graph) -> float:
    """Algebraic connectivity: the second smallest eigenvalue of the graph Laplacian.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph (unweighted; parallel edges count).

    Returns
    -------
    float
        :math:`\\lambda_2(L)`; 0 for a disconnected graph.

    Notes
    -----
    Dense ``eigvalsh`` up to 2000 nodes. Beyond: if the Laplacian has a
    narrow band after reverse Cuthill-McKee reordering (rings, tori, paths),
    Lanczos on :math:`P (L + \\delta I)^{-1} P` with a sparse LU
    (shift-invert, accurate for tiny :math:`\\lambda_2`); otherwise Lanczos
    (``scipy.sparse.linalg.eigsh``) on :math:`P(cI - L)P` with :math:`c = 2 d_{max} \\ge \\lambda_{max}(L)` and
    :math:`P = I - J/n`: its top eigenvalue is :math:`c - \\lambda_2(L)`, so the
    absolute accuracy is about :math:`10^{-13} c` (seconds for 10^5 nodes).

    References
    ----------
    .. [1] M. Fiedler, "Algebraic connectivity of graphs", 1973.
    """
    e = _edges(G)
    if e.n <= 2000:
        lam = np.linalg.eigvalsh(e.laplacian().toarray())
        return float(max(lam[1], 0.0))
    if not nx.is_connected(G):
        return 0.0
    L = e.laplacian()
    c = 2.0 * float(L.diagonal().max())  # >= lambda_max(L)
    perm = reverse_cuthill_mckee(L, symmetric_mode=True)
    Lp = L[perm][:, perm].tocoo()
    if int(np.abs(Lp.row - Lp.col).max()) * e.n <= 2 * 10**8:
        # narrow band after reordering (rings, tori, paths): shift-invert with a sparse LU
        delta = 1e-6 * c
        lu = spla.splu((L + delta * sp.identity(e.n)).tocsc())

        def inverse(v: np.ndarray) -> np.ndarray:  # P (L + delta I)^-1 P
            w = lu.solve(v.ravel() - v.mean())
            return w - w.mean()

        op = spla.LinearOperator((e.n, e.n), matvec=inverse, dtype=float)
        v0 = np.cos(np.arange(e.n) * 2.399963229728653)
        top = spla.eigsh(op, k=1, which="LA", v0=v0, tol=1e-12, maxiter=100_000,
                         return_eigenvectors=False)
        return float(max(1.0 / top[0] - delta, 0.0))

    def shifted(v: np.ndarray) -> np.ndarray:  # P (cI - L) P, P = I - J/n
        v = v.ravel() - v.mean()
        w = c * v - L @ v
        return w - w.mean()

    op = spla.LinearOperator((e.n, e.n), matvec=shifted, dtype=float)
    v0 = np.cos(np.arange(e.n) * 2.399963229728653)  # deterministic, not constant
    top = spla.eigsh(op, k=1, which="LA", v0=v0, tol=1e-13, ncv=64, maxiter=100_000,
                     return_eigenvectors=False)
    return float(max(c - top[0], 0.0))


def spectral_gap(G: nx.Graph) -> float:
    """Spectral gap ``1 - lambda_2(E[W])`` of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.

    Returns
    -------
    float
        :math:`\\lambda_2(L) / (2m)`.

    Notes
    -----
    .. math:: 1 - \\lambda_2(E[W]) = \\frac{\\lambda_2(L)}{2m}

    and :math:`E[D(t)] \\le \\lambda_2(E[W])^t D(0)` [1]_. On sparse graphs
    (ring, torus, random regular) the exact :math:`E[D(t)]` decays about twice
    as fast in the exponent; see :func:`edge_gossip_rate`.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    return fiedler_value(G) / (2.0 * e.m)


def _second_moment_step(S: np.ndarray, K: sp.csr_matrix, e: _Edges, honest: np.ndarray | None
                        ) -> np.ndarray:
    """One step of ``Sigma' = mean_e A_e Sigma A_e^T`` (stubborn rows of ``A_e`` are identity)."""
    m = e.m
    w = (S[e.i, e.i] + S[e.j, e.j] - 2.0 * S[e.i, e.j]) / (4.0 * m)
    out = K @ S
    out += out.T.copy()
    out *= -1.0 / (2.0 * m)
    out += S
    if honest is None:
        out[np.diag_indices(e.n)] += np.bincount(e.i, w, e.n) + np.bincount(e.j, w, e.n)
        np.subtract.at(out, (e.i, e.j), w)
        np.subtract.at(out, (e.j, e.i), w)
        return out
    hi, hj = honest[e.i], honest[e.j]
    diag = np.bincount(e.i, w * hi, e.n) + np.bincount(e.j, w * hj, e.n)
    out[np.diag_indices(e.n)] += diag
    both = hi & hj
    np.subtract.at(out, (e.i[both], e.j[both]), w[both])
    np.subtract.at(out, (e.j[both], e.i[both]), w[both])
    return out


def _record_points(steps: int, record_every: int) -> np.ndarray:
    pts = np.arange(0, steps + 1, record_every, dtype=np.int64)
    if pts[-1] != steps:
        pts = np.append(pts, steps)
    return pts


def _steps_every(steps: Any, record_every: Any) -> tuple[int, int]:
    return check_int("steps", steps, low=0), check_int("record_every", record_every, low=1)


def edge_gossip_disagreement(G: nx.Graph, steps: int, *, sigma0: np.ndarray | None = None,
                             record_every: int = 1) -> np.ndarray:
    """Exact expected disagreement of random-edge gossip on any graph.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; each step averages the endpoints of one uniformly
        random edge.
    steps : int
        Number of single-edge steps.
    sigma0 : array_like, optional
        Second moment :math:`E[x_0 x_0^T]` of the start, ``n x n`` in the order
        of ``G.nodes()``. Default: the identity (i.i.d. ``N(0, 1)`` values).
        For a deterministic start ``x0`` pass ``np.outer(x0, x0)``.
    record_every : int, optional
        Record every ``k`` steps (default 1).

    Returns
    -------
    numpy.ndarray
        :math:`E[D(t)]` at ``t = 0, k, 2k, ...`` and at ``t = steps`` (always
        included), ``D = sum_i (x_i - mean(x))^2``.

    Raises
    ------
    ConfigError
        If the graph has more than :data:`MAX_EXACT_NODES` nodes (the
        recursion stores dense ``n x n`` matrices); use
        :func:`edge_gossip_rate` or :func:`spectral_gap` then.

    Notes
    -----
    :math:`W_e = I - v v^T/2`, :math:`v = e_i - e_j`, is a projection, so

    .. math:: \\Sigma_{t+1} = \\frac{1}{m} \\sum_e W_e \\Sigma_t W_e
              = \\Sigma_t - \\frac{L \\Sigma_t + \\Sigma_t L}{2m}
                + \\frac{1}{4m} L_w(\\Sigma_t),
              \\qquad E[D(t)] = \\mathrm{tr}\\bigl((I - J/n) \\Sigma_t\\bigr)

    where :math:`L_w` is the Laplacian with edge weights
    :math:`w_e = \\Sigma_{ii} + \\Sigma_{jj} - 2 \\Sigma_{ij}`. No :math:`W_e` is
    formed: a step costs one sparse-dense product, :math:`O(n m + n^2)`.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    e = _edges(G)
    _check_exact_size(e.n)
    T, k = _steps_every(steps, record_every)
    n = e.n
    if sigma0 is None:
        S = np.eye(n)
    else:
        S = np.array(sigma0, dtype=float)
        check(S.shape == (n, n), "sigma0", f"an array of shape ({n}, {n})", S.shape)
        S = (S + S.T) / 2.0
    # Iterate on P Sigma P (P = I - J/n): the map commutes with it and the trace is unchanged,
    # so E[D] keeps its relative accuracy instead of cancelling against the consensus part.
    S = S - S.mean(axis=0, keepdims=True)
    S = S - S.mean(axis=1, keepdims=True)
    K = e.laplacian()
    pts = _record_points(T, k)
    out = np.empty(pts.size)
    t, r = 0, 0
    while True:
        if t == pts[r] or t % 8 == 0:  # re-project: rounding leaks out of the subspace
            S = S - S.mean(axis=0, keepdims=True)
            S = S - S.mean(axis=1, keepdims=True)
            S = (S + S.T) / 2.0
        if t == pts[r]:
            out[r] = np.trace(S)
            r += 1
            if r == pts.size:
                break
        S = _second_moment_step(S, K, e, None)
        t += 1
    return out


def _stubborn_split(G: nx.Graph, stubborn: Any, x0: Any) -> tuple[_Edges, np.ndarray, np.ndarray, np.ndarray]:
    """Edges, honest mask, stubborn values ``(n, d)`` and honest starts ``(n, d)`` (rows in node order)."""
    e = _edges(G)
    index = {v: k for k, v in enumerate(e.nodes)}
    if isinstance(stubborn, Mapping):
        stub = dict(stubborn)
    else:
        check(isinstance(stubborn, Iterable) and not isinstance(stubborn, str), "stubborn",
              "a mapping node -> value, or a list of nodes whose values are in x0", stubborn)
        names = list(stubborn)
        check(isinstance(x0, Mapping) and all(v in x0 for v in names), "stubborn",
              "a mapping node -> value, or a list of nodes whose values are in x0", names)
        stub = {v: x0[v] for v in names}
    check(len(stub) >= 1, "stubborn", "at least one stubborn node", stub)
    for v in stub:
        check(v in index, "stubborn", "nodes of the graph", v)
    check(len(stub) < e.n, "stubborn", "fewer nodes than the graph has", len(stub))
    vals = [np.asarray(b, dtype=float) for b in stub.values()]
    shape = vals[0].shape
    check(len(shape) <= 1 and all(v.shape == shape for v in vals) and all(np.isfinite(v).all() for v in vals),
          "stubborn", "finite values, all scalars or all vectors of one dimension", shape)
    d = 1 if shape == () else shape[0]
    honest = np.ones(e.n, dtype=bool)
    B = np.zeros((e.n, d))
    for v, b in zip(stub, vals, strict=True):
        honest[index[v]] = False
        B[index[v]] = b.reshape(d)
    X = np.zeros((e.n, d))
    hidx = np.nonzero(honest)[0]
    if x0 is None:
        pass
    elif isinstance(x0, Mapping):
        for v in (e.nodes[i] for i in hidx):
            if v in x0:
                xv = np.asarray(x0[v], dtype=float)
                check(xv.size in (1, d) and np.isfinite(xv).all(), "x0",
                      f"finite values of dimension {d}", x0[v])
                X[index[v]] = np.broadcast_to(xv.reshape(-1), (d,))
    else:
        xa = np.asarray(x0, dtype=float)
        h = hidx.size
        same = d > 1 and xa.shape == (d,) and d != h  # one vector for every honest node
        ok = xa.ndim == 0 or same or xa.shape in ((h,), (h, d)) or (d == 1 and xa.shape == (h, 1))
        check(ok and np.isfinite(xa).all(), "x0",
              f"a scalar, a mapping node -> value, or an array of shape ({h},) or ({h}, {d}) "
              "over the honest nodes", xa.shape)
        X[hidx] = np.broadcast_to(xa if (xa.ndim == 0 or same) else xa.reshape((h, -1)), (h, d))
    return e, honest, B, X


def honest_nodes(G: nx.Graph, stubborn: Iterable[Hashable]) -> list[Hashable]:
    """The honest nodes in the order used by the stubborn-node functions.

    Parameters
    ----------
    G : networkx.Graph
    stubborn : iterable of nodes (a dict's keys are its nodes)

    Returns
    -------
    list
        Nodes of ``G`` not in ``stubborn``, in ``G.nodes()`` order.
    """
    s = set(stubborn)
    return [v for v in G.nodes() if v not in s]


def _reduce_dim(arr: np.ndarray, scalar: bool) -> np.ndarray:
    return arr[..., 0] if scalar else arr


def _is_scalar_values(stubborn: Any, x0: Any) -> bool:
    if isinstance(stubborn, Mapping):
        vals = list(stubborn.values())
    else:
        vals = [x0[v] for v in stubborn] if isinstance(x0, Mapping) else [0.0]
    return np.asarray(vals[0]).ndim == 0 if vals else True


def stubborn_honest_expectation(G: nx.Graph, stubborn: Mapping[Hashable, Any] | Iterable[Hashable],
                                steps: int, *, x0: Any = None, record_every: int = 1) -> np.ndarray:
    """Exact expected value of every honest node under random-edge gossip with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict or iterable
        ``{node: b}`` (``b`` a scalar or a vector of dimension ``d``), or a
        list of nodes whose values are read from ``x0``.
    steps : int
        Number of single-edge steps.
    x0 : scalar, dict or array, optional
        Initial honest values: a scalar for all, ``{node: value}`` (missing
        honest nodes start at 0; stubborn entries are used only when
        ``stubborn`` is a list), or an array over :func:`honest_nodes`.
        Default 0.
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        Shape ``(T, h)`` for scalar values or ``(T, h, d)`` for vectors, rows
        at the recorded steps, columns in :func:`honest_nodes` order.

    Notes
    -----
    An honest endpoint of the drawn edge moves half-way to the other
    endpoint; stubborn nodes never move. With the Laplacian :math:`L` split
    into honest (H) and stubborn (S) blocks,

    .. math:: E[x_H(t+1)] = E[x_H(t)] - \\frac{L_{HH} E[x_H(t)] + L_{HS} b_S}{2m}.

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    .. [2] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    scalar = _is_scalar_values(stubborn, x0)
    e, honest, B, X = _stubborn_split(G, stubborn, x0)
    T, k = _steps_every(steps, record_every)
    L = e.laplacian()
    hidx = np.nonzero(honest)[0]
    sidx = np.nonzero(~honest)[0]
    LHH = L[hidx][:, hidx].tocsr()
    drive = L[hidx][:, sidx] @ B[sidx]
    x = X[hidx].copy()
    pts = _record_points(T, k)
    out = np.empty((pts.size,) + x.shape)
    t, r = 0, 0
    two_m = 2.0 * e.m
    while True:
        if t == pts[r]:
            out[r] = x
            r += 1
            if r == pts.size:
                break
        x = x - (LHH @ x + drive) / two_m
        t += 1
    return _reduce_dim(out, scalar)


def stubborn_honest_mean(G: nx.Graph, stubborn: Mapping[Hashable, Any] | Iterable[Hashable],
                         x0: Any = None, steps: int = 0, record_every: int = 1) -> np.ndarray:
    """Exact expected honest mean under random-edge gossip with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict or iterable
        ``{node: b}``, or a list of nodes whose (fixed) values are in ``x0``.
    x0 : scalar, dict or array, optional
        Initial honest values (see :func:`stubborn_honest_expectation`); default 0.
    steps : int
        Number of single-edge steps.
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        :math:`E[\\bar x_H(t)]`, shape ``(T,)`` (scalars) or ``(T, d)``.

    Notes
    -----
    The mean over honest nodes of the first-moment recursion

    .. math:: E[x_H(t+1)] = E[x_H(t)] - \\frac{L_{HH} E[x_H(t)] + L_{HS} b_S}{2m},

    which tends to the mean of the :func:`harmonic_extension`. On the
    complete graph with one stubborn node it is
    :math:`b + (1 - 1/(n(n-1)))^t (m_0 - b)` (:func:`capture_rate`).

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    ex = stubborn_honest_expectation(G, stubborn, steps, x0=x0, record_every=record_every)
    return ex.mean(axis=1)


def harmonic_extension(G: nx.Graph, stubborn: Mapping[Hashable, Any]) -> np.ndarray:
    """Long-run expected honest values with stubborn nodes.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.
    stubborn : dict
        ``{node: b}``, scalars or vectors of one dimension.

    Returns
    -------
    numpy.ndarray
        :math:`x_H^* = -L_{HH}^{-1} L_{HS} b_S`, shape ``(h,)`` or ``(h, d)``,
        in :func:`honest_nodes` order.

    Raises
    ------
    ConfigError
        If some connected component has no stubborn node (no limit exists
        independent of the start).

    Notes
    -----
    The fixed point of the first-moment recursion: each honest value is the
    average of its neighbours',

    .. math:: L_{HH} x_H^* + L_{HS} b_S = 0 .

    With stubborn nodes that disagree the values themselves never settle;
    only their expectations converge.

    References
    ----------
    .. [1] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    check(isinstance(stubborn, Mapping), "stubborn", "a mapping node -> value", stubborn)
    scalar = _is_scalar_values(stubborn, None)
    e, honest, B, _ = _stubborn_split(G, stubborn, None)
    stub_set = set(stubborn)
    for comp in nx.connected_components(G):
        check(bool(comp & stub_set), "stubborn", "a set with a node in every connected component",
              sorted(map(str, comp))[:5])
    L = e.laplacian()
    hidx = np.nonzero(honest)[0]
    sidx = np.nonzero(~honest)[0]
    LHH = L[hidx][:, hidx].tocsc()
    rhs = -(L[hidx][:, sidx] @ B[sidx])
    x = spla.splu(LHH).solve(rhs)
    return _reduce_dim(np.asarray(x).reshape(hidx.size, -1), scalar)


def edge_gossip_honest_disagreement(G: nx.Graph, stubborn: Mapping[Hashable, Any], steps: int, *,
                                    x0: Any = None, honest_variance: float = 1.0,
                                    record_every: int = 1) -> np.ndarray:
    """Exact expected disagreement among honest nodes, with stubborn nodes held fixed.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph; one uniformly random edge per step.
    stubborn : dict
        ``{node: b}``, scalars or vectors of dimension ``d``.
    steps : int
        Number of single-edge steps.
    x0 : scalar, dict or array, optional
        Mean of the initial honest values (default 0), as for
        :func:`stubborn_honest_expectation`.
    honest_variance : float, optional
        Initial honest values are ``x0 + N(0, honest_variance)``, independent
        across nodes and coordinates (default 1; 0 for a deterministic start).
    record_every : int, optional
        Record every ``k`` steps; ``t = steps`` is always included.

    Returns
    -------
    numpy.ndarray
        :math:`E[D_H(t)]`, :math:`D_H = \\sum_{i \\in H} \\|x_i - \\bar x_H\\|^2`
        (summed over coordinates).

    Notes
    -----
    Stubborn rows stay fixed, so a step is :math:`x' = A_e x` with
    :math:`A_e = I - P v v^T / 2`, :math:`P` the projection on honest
    coordinates, and

    .. math:: \\Sigma' = \\Sigma - \\frac{P L \\Sigma + \\Sigma L P}{2m}
              + \\frac{1}{4m} P L_w(\\Sigma) P,
              \\qquad E[D_H] = \\mathrm{tr}\\bigl(P (I - J_H/h) P\\, \\Sigma\\bigr)

    per coordinate, started from :math:`\\Sigma_0 = E[x_0 x_0^T]` with the
    stubborn values in it. With disagreeing stubborn nodes :math:`E[D_H]`
    tends to a positive constant.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    .. [2] Acemoglu, Como, Fagnani, Ozdaglar, "Opinion fluctuations and
       disagreement in social networks", 2013.
    """
    check(isinstance(stubborn, Mapping), "stubborn", "a mapping node -> value", stubborn)
    e, honest, B, X = _stubborn_split(G, stubborn, x0)
    _check_exact_size(e.n)
    var = check_nonnegative("honest_variance", honest_variance)
    T, k = _steps_every(steps, record_every)
    K = sp.diags(honest.astype(float)) @ e.laplacian()
    K = K.tocsr()
    hidx = np.nonzero(honest)[0]
    h = hidx.size
    pts = _record_points(T, k)
    total = np.zeros(pts.size)
    for c in range(B.shape[1]):
        # D_H is invariant under a common shift of all values; centring on the stubborn
        # values keeps the recursion away from cancellation when they agree.
        shift = B[~honest, c].mean()
        mean0 = np.where(honest, X[:, c], B[:, c]) - shift
        S = np.outer(mean0, mean0)
        S[hidx, hidx] += var
        t, r = 0, 0
        while True:
            if t % 8 == 0:
                S = (S + S.T) / 2.0  # the step is exact for symmetric matrices; keep it so
            if t == pts[r]:
                sub = S[np.ix_(hidx, hidx)]
                total[r] += np.trace(sub) - sub.sum() / h
                r += 1
                if r == pts.size:
                    break
            S = _second_moment_step(S, K, e, honest)
            t += 1
    return total


def _rate_operator(e: _Edges) -> spla.LinearOperator:
    n = e.n
    K = e.laplacian()

    def mv(v: np.ndarray) -> np.ndarray:
        S = v.reshape(n, n)
        S = (S + S.T) / 2.0
        S = S - S.mean(axis=0, keepdims=True)
        S = S - S.mean(axis=1, keepdims=True)
        R = _second_moment_step(S, K, e, None)
        R = R - R.mean(axis=0, keepdims=True)
        R = R - R.mean(axis=1, keepdims=True)
        return R.reshape(-1)

    return spla.LinearOperator((n * n, n * n), matvec=mv, dtype=float)


def edge_gossip_rate(G: nx.Graph, *, method: str = "auto") -> float:
    """Asymptotic per-step decay factor of the expected disagreement of random-edge gossip.

    Parameters
    ----------
    G : networkx.Graph
        Undirected graph.
    method : {"auto", "exact", "bound"}, optional
        ``exact``: leading eigenvalue of the second-moment map on the
        disagreement subspace (Lanczos on ``n x n`` matrices, up to
        :data:`MAX_EXACT_NODES`); ``bound``: the spectral bound
        :math:`\\lambda_2(E[W])`; ``auto`` (default): exact up to
        :data:`MAX_EXACT_RATE_NODES` nodes, the bound beyond.

    Returns
    -------
    float
        ``rho`` with :math:`E[D(t)] \\approx C \\rho^t` for large ``t``.

    Notes
    -----
    The map :math:`\\mathcal M(\\Sigma) = \\frac1m \\sum_e W_e \\Sigma W_e` is
    self-adjoint and positive for the Frobenius inner product and commutes
    with :math:`\\Sigma \\mapsto P\\Sigma P`, :math:`P = I - J/n`, so the
    exact rate is its largest eigenvalue on :math:`\\{P \\Sigma P\\}`. Always

    .. math:: \\lambda_2(E[W])^2 \\le \\rho \\le \\lambda_2(E[W]) = 1 - \\frac{\\lambda_2(L)}{2m};

    on the complete graph :math:`\\rho = \\lambda_2(E[W]) = 1 - 1/(n-1)`, while
    on sparse graphs (ring, torus, random regular) :math:`\\rho` is close to
    :math:`\\lambda_2(E[W])^2`: the disagreement decays about twice as fast in
    the exponent as the bound suggests.

    References
    ----------
    .. [1] Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", 2006.
    """
    kind = check_choice("method", method, ["auto", "exact", "bound"])
    e = _edges(G)
    if kind == "bound" or (kind == "auto" and e.n > MAX_EXACT_RATE_NODES):
        return 1.0 - spectral_gap(G)
    _check_exact_size(e.n)
    n = e.n
    if n <= 16:
        # dense eigen-decomposition of the map on symmetric matrices (small graphs)
        basis = np.eye(n * n)
        op = _rate_operator(e)
        M = np.column_stack([op.matvec(basis[:, c]) for c in range(n * n)])
        return float(np.linalg.eigvalsh((M + M.T) / 2.0)[-1])
    v0 = np.eye(n) - 1.0 / n
    val = spla.eigsh(_rate_operator(e), k=1, which="LA", v0=v0.reshape(-1), tol=1e-12,
                     return_eigenvectors=False)
    return float(val[0])


# ============================================================== async gossip under churn


def churn_contraction_rate(n: int, availability: float, wake_rate: float) -> float:
    """Decay rate of ``E[D]`` per time unit of async gossip on the complete graph under churn.

    Parameters
    ----------
    n : int
        Nodes.
    availability : float
        Stationary probability ``a`` that a node is online.
    wake_rate : float
        Poisson clock rate ``lambda`` of each node.

    Returns
    -------
    float

    Notes
    -----
    ``n a lambda (1 - (1 - a)**(n - 1)) / (n - 1)``: online nodes wake at total
    rate ``n a lambda``, find an online partner unless all ``n - 1`` others are
    down, and each completed exchange contracts ``E[D]`` by ``1 / (n - 1)`` of
    itself (the edge-gossip step on the complete graph). Derived here and
    checked by simulation (``experiments/churn.py``) in the fast-churn regime,
    where the online set seen by successive exchanges is close to independent.

    References
    ----------
    Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans.
    Inf. Theory 52(6), 2006 (the per-exchange contraction).
    """
    a = availability
    return n * a * wake_rate * (1.0 - (1.0 - a) ** (n - 1)) / (n - 1)


def async_noise_floor(n: int, noise: float) -> float:
    """Stationary ``E[D]`` of noisy async gossip on the complete graph, instant exchanges.

    Notes
    -----
    ``(n - 1)(n - 2) s**2 / (2 n)``: each wake adds ``N(0, s**2)`` to the waking
    node before its exchange; balancing the injected disagreement against the
    per-exchange contraction ``1 / (n - 1)`` gives the floor. Derived here and
    checked by simulation (``experiments/churn.py``).
    """
    return (n - 1) * (n - 2) * noise**2 / (2 * n)


__all__ += ["churn_contraction_rate", "async_noise_floor"]


# =========================================================================== training (sim.training)

from . import training  # noqa: E402
from .training import *  # noqa: E402,F403

__all__ += training.__all__

# ============================================== queueing pipeline (own module)

from . import queueing as queueing  # noqa: E402
from .queueing import *  # noqa: E402,F403

__all__ += queueing.__all__

# ====================================================== gossip training (own module)

from . import learning as learning  # noqa: E402
from .learning import *  # noqa: E402,F403

__all__ += learning.__all__

# ====================================== checkpoint interval, exact optimum (own module)

from . import checkpointing as checkpointing  # noqa: E402
from .checkpointing import *  # noqa: E402,F403

__all__ += checkpointing.__all__

# ============================== order statistics, fastest k of n (own modules)

from . import order_statistics as order_statistics  # noqa: E402
from .order_statistics import *  # noqa: E402,F403

__all__ += order_statistics.__all__

from . import fastest_k as fastest_k  # noqa: E402
from .fastest_k import *  # noqa: E402,F403

__all__ += fastest_k.__all__

# ================================================ Study A on a count trace (own module)

from . import trace_design as trace_design  # noqa: E402
from .trace_design import *  # noqa: E402,F403

__all__ += trace_design.__all__

# ======================================= fault-tolerance strategies (own module)

from . import strategies as strategies  # noqa: E402
from .strategies import *  # noqa: E402,F403

__all__ += strategies.__all__

# ================================================ cutting a chain across devices (own module)

from . import partition as partition  # noqa: E402
from .partition import *  # noqa: E402,F403

__all__ += partition.__all__

# ======================== DiLoCo across zones: outer syncs, fragments, overlap (own module)
# (not star-imported: its names are read as sim.analytic.diloco.<name>)

from . import diloco as diloco  # noqa: E402
