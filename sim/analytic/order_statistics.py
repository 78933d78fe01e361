"""Order statistics of worker times: the round time of waiting for the fastest k of n.

A synchronous step that waits for the first ``k`` of ``n`` workers takes the
``k``-th smallest of their times, :math:`X_{(k:n)}`. Pure functions of their
arguments (no simulation), checked against the training DES's ``--sync-wait``
and the fastest-k learning model:

* :func:`exponential_order_statistic_mean`, :func:`exponential_order_statistic_variance`:
  i.i.d. exponential times, harmonic sums (Rényi's representation);
* :func:`pareto_order_statistic_moment`: i.i.d. Pareto times, Beta functions,
  finite only when ``n - k + 1 > r / alpha``;
* :func:`kth_smallest_mean`: independent times of any laws (heterogeneous
  speeds, mixed laws), by quadrature of the survival function;
* :func:`order_statistic_mean`: the same for dtsim's duration laws
  (:mod:`sim.failures`) and per-worker speeds, with the closed forms where
  they exist;
* :func:`inclusion_probabilities`: the probability that worker ``i`` is
  among the first ``k`` (the Horvitz-Thompson weights of a fastest-k
  gradient);
* :func:`drop_stragglers_step_means`: the step times when stragglers are
  not cancelled but finish their pass and start the next step late.

References
----------
.. [Renyi] A. Rényi, "On the theory of order statistics", Acta Mathematica
   Academiae Scientiarum Hungarica 4, 1953 (exponential spacings).
.. [David] H. A. David, H. N. Nagaraja, "Order Statistics", 3rd ed., Wiley
   2003 (sections 2.1-2.5: the density of ``X_(k)``, moments, the Pareto
   case via Beta functions, independent non-identical variables).
.. [Dutta] S. Dutta, G. Joshi, S. Ghosh, P. Dube, P. Nagpurkar, "Slow and
   stale gradients can win the race: error-runtime trade-offs in distributed
   SGD", AISTATS 2018 (K-sync SGD: the round time is the K-th order
   statistic of the workers' times).
.. [HT] D. G. Horvitz, D. J. Thompson, "A generalization of sampling without
   replacement from a finite universe", JASA 47(260), 1952.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, check, check_int, check_positive

__all__ = [
    "harmonic_number",
    "exponential_order_statistic_mean",
    "exponential_order_statistic_variance",
    "pareto_order_statistic_moment",
    "kth_smallest_mean",
    "law_distribution",
    "order_statistic_mean",
    "inclusion_probabilities",
    "drop_stragglers_step_means",
]

#: Relative accuracy asked of the quadratures.
RTOL = 1e-10


def harmonic_number(n: int) -> float:
    """``H_n = sum_{i=1}^n 1/i`` (``H_0 = 0``)."""
    n = check_int("n", n, low=0)
    return math.fsum(1.0 / i for i in range(1, n + 1))


def _kn(k: int, n: int) -> tuple[int, int]:
    n = check_int("n", n, low=1)
    k = check_int("k", k, low=1, high=n)
    return k, n


def exponential_order_statistic_mean(k: int, n: int, mean: float = 1.0) -> float:
    """Mean of the k-th smallest of ``n`` i.i.d. exponential times.

    Parameters
    ----------
    k, n : int
        ``1 <= k <= n``.
    mean : float
        Mean of one time ``1/mu`` (> 0).

    Returns
    -------
    float

    Notes
    -----
    .. math:: E[X_{(k:n)}] = \\frac{1}{\\mu}\\sum_{i=n-k+1}^{n} \\frac{1}{i}
              = \\frac{H_n - H_{n-k}}{\\mu}

    The gaps between successive completions are independent exponentials of
    rates ``n mu, (n-1) mu, ...`` (the remaining workers race afresh).

    References
    ----------
    [Renyi]_, [David]_.
    """
    k, n = _kn(k, n)
    m = check_positive("mean", mean)
    return m * math.fsum(1.0 / i for i in range(n - k + 1, n + 1))


def exponential_order_statistic_variance(k: int, n: int, mean: float = 1.0) -> float:
    """Variance of the k-th smallest of ``n`` i.i.d. exponential times.

    Notes
    -----
    .. math:: \\operatorname{Var} X_{(k:n)} = \\frac{1}{\\mu^2}\\sum_{i=n-k+1}^{n} \\frac{1}{i^2}

    References
    ----------
    [Renyi]_.
    """
    k, n = _kn(k, n)
    m = check_positive("mean", mean)
    return m * m * math.fsum(1.0 / (i * i) for i in range(n - k + 1, n + 1))


def pareto_order_statistic_moment(k: int, n: int, alpha: float, scale: float = 1.0,
                                  order: float = 1.0) -> float:
    """``E[X_(k:n)^r]`` of ``n`` i.i.d. Pareto times (tail index ``alpha``, least value ``x_m``).

    Parameters
    ----------
    k, n : int
        ``1 <= k <= n``.
    alpha : float
        Tail index (> 0): ``P(X > x) = (x_m / x)^alpha``.
    scale : float
        ``x_m`` (> 0).
    order : float
        ``r`` (> 0): 1 for the mean, 2 for the second moment.

    Returns
    -------
    float

    Raises
    ------
    ConfigError
        Naming ``k`` when the moment is infinite (``n - k + 1 <= r / alpha``).

    Notes
    -----
    With :math:`X = x_m U^{-1/\\alpha}`, the k-th smallest ``X`` is the
    ``(n-k+1)``-th smallest ``U``, a :math:`\\mathrm{Beta}(n-k+1, k)` variable, so

    .. math:: E[X_{(k:n)}^r] = x_m^r \\frac{B(n - k + 1 - r/\\alpha,\\ k)}{B(n - k + 1,\\ k)}
              \\quad\\text{finite iff } n - k + 1 > r/\\alpha.

    The mean of waiting for all (``k = n``) is finite only for ``alpha > 1``;
    waiting for fewer tolerates heavier tails.

    References
    ----------
    [David]_.
    """
    k, n = _kn(k, n)
    a = check_positive("alpha", alpha)
    xm = check_positive("scale", scale)
    r = check_positive("order", order)
    j = n - k + 1
    check(j > r / a, "k", f"<= n + 1 - r/alpha = {n + 1 - r / a:.6g} for a finite moment of "
          f"order {r:g} (Pareto alpha {a:g}: the mean is infinite)", k)
    from scipy.special import betaln  # on first use: keeps every CLI start light

    return xm**r * math.exp(betaln(j - r / a, k) - betaln(j, k))


def _poisson_binomial_cdf(p: np.ndarray, q: np.ndarray, upto: int) -> float:
    """``P(N <= upto)`` for ``N`` a sum of independent Bernoulli(``p_i``), ``q_i = 1 - p_i``.

    ``q`` is passed, not computed, so that a survival probability far below the
    rounding of ``1 - p`` (a heavy tail far out) keeps its digits.
    """
    dist = np.zeros(upto + 1)
    dist[0] = 1.0
    for pi, qi in zip(p, q, strict=True):
        dist[1:] = dist[1:] * qi + dist[:-1] * pi
        dist[0] *= qi
    return float(dist.sum())


class _Laws:
    """Independent laws evaluated together: one scipy call per family, not per worker."""

    def __init__(self, dists: Sequence[Any]) -> None:
        self.n = len(dists)
        groups: dict[tuple, list[int]] = {}
        for i, d in enumerate(dists):
            kw = {k: v for k, v in d.kwds.items() if k != "scale"}
            key = (d.dist.name, tuple(d.args), tuple(sorted(kw.items())))
            groups.setdefault(key, []).append(i)
        self.groups = []
        for idx in groups.values():
            d0 = dists[idx[0]]
            scales = np.array([dists[i].kwds.get("scale", 1.0) for i in idx])
            kw = {k: v for k, v in d0.kwds.items() if k != "scale"}
            self.groups.append((d0.dist, d0.args, kw, np.array(idx), scales))

    def _eval(self, what: str, t: float) -> np.ndarray:
        out = np.empty(self.n)
        for dist, args, kw, idx, scales in self.groups:
            out[idx] = getattr(dist, what)(t, *args, scale=scales, **kw)
        return out

    def cdf(self, t: float) -> np.ndarray:
        return self._eval("cdf", t)

    def sf(self, t: float) -> np.ndarray:
        return self._eval("sf", t)

    def pdf(self, t: float) -> np.ndarray:
        return self._eval("pdf", t)


def _breaks(dists: Sequence[Any]) -> list[float]:
    """Quadrature breakpoints: where a density jumps (a support's start) and where the mass
    is (quantiles of the fastest, the median and the slowest law by median)."""
    pts: set[float] = set()
    distinct: dict[tuple, Any] = {}
    for d in dists:
        distinct.setdefault((d.dist.name, tuple(d.args), tuple(sorted(d.kwds.items()))), d)
    laws = sorted(distinct.values(), key=lambda d: float(d.median()))
    for d in laws:
        lo = float(d.support()[0])
        if math.isfinite(lo) and lo > 0:
            pts.add(lo)
    for d in {id(x): x for x in (laws[0], laws[len(laws) // 2], laws[-1])}.values():
        for q in (1e-6, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 0.99999):
            v = float(d.ppf(q))
            if math.isfinite(v) and v > 0:
                pts.add(v)
    return sorted(pts)


def _pieces(pts: list[float]) -> list[tuple[float, float]]:
    """The finite pieces ``[0, p_1], [p_1, p_2], ...`` (the tail beyond ``p_last`` apart)."""
    edges = [0.0] + pts
    return list(zip(edges, edges[1:], strict=False))


#: Exponent of the tail substitution ``t = last u^(-1/TAIL_BETA)``.
TAIL_BETA = 0.02


def _tail(f: Any, last: float) -> Any:
    """``int_last^inf f(t) dt = int_0^1 f(last u^(-1/b)) (last / b) u^(-1/b - 1) du``.

    A power-law tail ``t^-g`` (heavy-tailed laws) becomes ``u^((g-1)/b - 1)``:
    smooth at ``u = 0`` once ``g - 1 >= b``, and integrable for every finite
    mean (``g > 1``); a light tail vanishes faster than any power of ``u``.
    """
    b = TAIL_BETA

    def g(u: float) -> Any:
        if u <= 0.0:
            return 0.0 * f(last)
        lu = math.log(u)
        t = last * math.exp(-lu / b)
        if not math.isfinite(t):
            return 0.0 * f(last)
        return f(t) * (last / b) * math.exp((-1.0 / b - 1.0) * lu)

    return g


def _integrate(f: Any, pts: list[float]) -> float:
    """``int_0^inf f`` split at ``pts`` (absolute tolerance ``RTOL`` times the scale of ``pts``)."""
    from scipy import integrate

    total = 0.0
    tol = RTOL * 1e-2 * pts[-1]
    for a, b in _pieces(pts):
        total += integrate.quad(f, a, b, epsabs=tol, epsrel=RTOL, limit=400)[0]
    total += integrate.quad(_tail(f, pts[-1]), 0.0, 1.0, epsabs=tol, epsrel=RTOL, limit=400)[0]
    return total


def kth_smallest_mean(k: int, dists: Sequence[Any]) -> float:
    """Mean of the k-th smallest of independent non-negative times of any laws.

    Parameters
    ----------
    k : int
        ``1 <= k <= len(dists)``.
    dists : sequence
        One law per worker: scipy frozen distributions (``cdf``, ``ppf``, a
        ``scale`` keyword) supported on ``[0, inf)``.

    Returns
    -------
    float

    Notes
    -----
    .. math:: E[T_k] = \\int_0^\\infty P(N(t) \\le k - 1)\\, dt

    with :math:`N(t)` the number of workers done by ``t``, a Poisson-binomial
    count of the :math:`F_i(t)` (computed by its convolution recursion);
    adaptive quadrature split at the laws' quantiles, relative accuracy about
    1e-10. For heavy tails check finiteness first (for i.i.d. Pareto times,
    :func:`pareto_order_statistic_moment`).

    References
    ----------
    [David]_ (section 5.2, independent non-identical variables).
    """
    n = len(dists)
    k = check_int("k", k, low=1, high=max(n, 1))
    laws = _Laws(dists)
    return _integrate(lambda t: _poisson_binomial_cdf(laws.cdf(t), laws.sf(t), k - 1),
                      _breaks(dists))


def law_distribution(law: str, mean: float = 1.0, shape: float | None = None) -> Any:
    """dtsim's duration law ``law`` (:func:`sim.failures.make_distribution`) as a scipy law.

    Parameters
    ----------
    law : {"exponential", "weibull", "lognormal", "pareto"}
    mean : float
        Mean (> 0).
    shape : float or None
        Weibull ``k`` (default 0.7), lognormal ``sigma`` (default 1), Pareto
        ``alpha > 1`` (required), as in :mod:`sim.failures`.
    """
    from scipy import stats

    from ..failures import make_distribution

    d = make_distribution(law, mean, shape)  # validates as the simulation does
    if law == "exponential":
        return stats.expon(scale=mean)
    if law == "weibull":
        return stats.weibull_min(d.shape, scale=d.scale)
    if law == "lognormal":
        return stats.lognorm(d.sigma, scale=math.exp(d.mu))
    if law == "pareto":
        return stats.pareto(d.shape, scale=d.scale)
    raise ConfigError("law", "exponential, weibull, lognormal or pareto", law)


def order_statistic_mean(k: int, n: int, law: str = "exponential", shape: float | None = None,
                         mean: float = 1.0, speeds: Sequence[float] | None = None) -> float:
    """Mean time to the k-th of ``n`` workers' completions, each ``X_i / v_i``.

    Parameters
    ----------
    k, n : int
        ``1 <= k <= n``.
    law : {"exponential", "weibull", "lognormal", "pareto", "deterministic"}
        Law of ``X_i`` (i.i.d., mean ``mean``), as a pass time of the training DES.
    shape : float or None
        Its shape (see :func:`law_distribution`).
    mean : float
        ``E[X_i]`` (> 0).
    speeds : sequence of float or None
        ``v_i`` (> 0), one per worker (None: all 1).

    Returns
    -------
    float

    Notes
    -----
    Equal speeds: exponential :func:`exponential_order_statistic_mean`, Pareto
    :func:`pareto_order_statistic_moment` (scale ``mean (alpha-1)/alpha``),
    deterministic ``mean / v``; otherwise :func:`kth_smallest_mean` of the
    scaled laws.

    References
    ----------
    [David]_, [Dutta]_.
    """
    k, n = _kn(k, n)
    m = check_positive("mean", mean)
    v = [1.0] * n if speeds is None else [check_positive("speed", x) for x in speeds]
    check(len(v) == n, "speeds", f"one speed per worker ({n})", speeds)
    if law == "deterministic":
        return sorted(m / x for x in v)[k - 1]
    if len(set(v)) == 1:
        s = v[0]
        if law == "exponential":
            return exponential_order_statistic_mean(k, n, m) / s
        if law == "pareto":
            d = law_distribution(law, m, shape)
            return pareto_order_statistic_moment(k, n, d.args[0], d.kwds["scale"]) / s
    base = law_distribution(law, m, shape)
    dists = [_scaled(base, 1.0 / x) for x in v]
    return kth_smallest_mean(k, dists)


def _scaled(d: Any, factor: float) -> Any:
    """The law of ``factor * X`` for a scipy frozen law ``d`` with a ``scale`` keyword."""
    kw = dict(d.kwds)
    kw["scale"] = kw.get("scale", 1.0) * factor
    return d.dist(*d.args, **kw)


def _leave_one_out(p: np.ndarray, q: np.ndarray, upto: int) -> np.ndarray:
    """``P(N_{-i} <= upto)`` for every ``i``: prefix and suffix Poisson-binomial laws."""
    n = len(p)
    size = upto + 1
    pre = np.zeros((n + 1, size))
    pre[0, 0] = 1.0
    for i in range(n):
        pre[i + 1, 0] = pre[i, 0] * q[i]
        pre[i + 1, 1:] = pre[i, 1:] * q[i] + pre[i, :-1] * p[i]
    suf = np.zeros((n + 1, size))
    suf[n, 0] = 1.0
    for i in range(n - 1, -1, -1):
        suf[i, 0] = suf[i + 1, 0] * q[i]
        suf[i, 1:] = suf[i + 1, 1:] * q[i] + suf[i + 1, :-1] * p[i]
    # P(N_{-i} <= upto) = sum_{a + b <= upto} pre[i, a] suf[i + 1, b]
    csuf = np.cumsum(suf[1:], axis=1)  # csuf[i, c] = P(suffix after i <= c)
    return np.einsum("ia,ia->i", pre[:n], csuf[:, ::-1])


def inclusion_probabilities(k: int, dists: Sequence[Any]) -> np.ndarray:
    """``pi_i``: the probability that worker ``i`` is among the first ``k`` to finish.

    Parameters
    ----------
    k : int
        ``1 <= k <= n``.
    dists : sequence
        Continuous laws (scipy frozen distributions with ``pdf``, ``cdf``,
        ``ppf`` and a ``scale`` keyword), one per worker, independent.

    Returns
    -------
    numpy.ndarray
        ``pi`` with ``sum(pi) = k``; ``k/n`` each for identical laws.

    Notes
    -----
    .. math:: \\pi_i = \\int_0^\\infty f_i(t)\\, P(N_{-i}(t) \\le k - 1)\\, dt

    with :math:`N_{-i}(t)` the number of the other workers done by ``t``
    (Poisson-binomial; all ``i`` at once from prefix and suffix laws, one
    vector quadrature). These are the Horvitz-Thompson weights: the estimate
    :math:`\\frac1n\\sum_{i \\in S} g_i / \\pi_i` of the mean of all ``n``
    workers' gradients over the random set ``S`` of the first ``k`` is
    unbiased, where the plain mean over ``S`` weights worker ``i`` by
    :math:`\\pi_i / k` instead of ``1/n``.

    References
    ----------
    [HT]_, [David]_.
    """
    n = len(dists)
    k = check_int("k", k, low=1, high=max(n, 1))
    if k == n:
        return np.ones(n)
    laws = _Laws(dists)

    def f(t: float) -> np.ndarray:
        return laws.pdf(t) * _leave_one_out(laws.cdf(t), laws.sf(t), k - 1)

    from scipy import integrate

    out = np.zeros(n)
    pts = _breaks(dists)
    for a, b in _pieces(pts):
        out += integrate.quad_vec(f, a, b, epsabs=RTOL * 1e-2, epsrel=RTOL, limit=400)[0]
    out += integrate.quad_vec(_tail(f, pts[-1]), 0.0, 1.0, epsabs=RTOL * 1e-2, epsrel=RTOL,
                              limit=400)[0]
    return out


def drop_stragglers_step_means(k: int, n: int, mean: float = 1.0) -> tuple[float, float]:
    """Mean step times when the stragglers' passes are not cancelled (exponential passes).

    Parameters
    ----------
    k, n : int
        Wait for the first ``k`` of ``n`` workers, one exponential pass each per step.
    mean : float
        Mean pass time (> 0).

    Returns
    -------
    (first, steady)
        The first step's mean, :math:`E[X_{(k:n)}]`, and every later step's.

    Notes
    -----
    When a step closes, its ``n - k`` stragglers are all busy (each with its
    pass of this step, or one of an earlier step not yet done) and keep
    going: each starts the next step's pass only after finishing, so at every
    step after the first exactly ``n - k`` workers start late. By
    memorylessness a straggler's remaining time is again exponential, so a
    later step takes the k-th smallest of ``k`` exponential times and
    ``n - k`` Gamma(2) times (a residual plus a fresh pass), all independent
    (:func:`kth_smallest_mean`). With no time between steps (no sync or
    optimizer time) this holds exactly; cancelling instead
    (``stragglers="cancel"``) gives :math:`E[X_{(k:n)}]` at every step.
    """
    k, n = _kn(k, n)
    m = check_positive("mean", mean)
    first = exponential_order_statistic_mean(k, n, m)
    if k == n:
        return first, first
    from scipy import stats

    dists = [stats.expon(scale=m)] * k + [stats.gamma(2.0, scale=m)] * (n - k)
    return first, kth_smallest_mean(k, dists)
