"""Closed forms for the queueing pipeline: stations of identical servers in tandem.

:func:`tandem_sojourn` is the mean time through ``L`` M/M/c stations in series
(a Jackson tandem network) with deterministic transfer delays between them,
the exact reference of ``dtsim pipeline --queueing`` with no failures; with one
station it is the M/M/c mean sojourn (:func:`sim.analytic.mmc_sojourn`).

References
----------
.. [Burke] P. J. Burke, "The output of a queuing system", Operations Research
   4(6), 1956.
.. [Jackson] J. R. Jackson, "Networks of waiting lines", Operations Research
   5(4), 1957.
.. [Kleinrock] L. Kleinrock, "Queueing Systems, Volume 1: Theory", Wiley, 1975
   (M/M/c and Erlang C, section 3.5).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import check, check_nonnegative, check_positive
from .training import erlang_c, mmc_sojourn

__all__ = ["tandem_sojourn", "tandem_waits"]


def tandem_sojourn(servers: Sequence[int], arrival_rate: float, service_rates: Sequence[float],
                   delays: Sequence[float] = ()) -> float:
    """Mean sojourn through M/M/c stations in tandem, with fixed delays between them.

    Parameters
    ----------
    servers : sequence of int
        Identical servers ``c_j`` of each station, sharing its one FIFO queue.
    arrival_rate : float
        Poisson arrival rate ``lambda`` at the first station (> 0).
    service_rates : sequence of float
        Exponential service rate ``mu_j`` of each server of station ``j`` (> 0),
        with ``lambda < c_j mu_j`` at every station.
    delays : sequence of float
        Deterministic delay after each station but the last (``L - 1`` values,
        >= 0; empty for none).

    Returns
    -------
    float
        :math:`\\sum_j W_j + \\sum_j d_j`.

    Notes
    -----
    The departures of a stable M/M/c queue in equilibrium are a Poisson process
    of rate :math:`\\lambda` (Burke's theorem), and a fixed delay keeps a Poisson
    process Poisson, so every station sees Poisson arrivals of rate
    :math:`\\lambda` and is an M/M/c queue in its own right (the product form of
    Jackson networks). The mean sojourn adds up:

    .. math:: T = \\sum_{j=1}^{L} \\left(\\frac{C(c_j, \\lambda/\\mu_j)}{c_j\\mu_j - \\lambda}
              + \\frac{1}{\\mu_j}\\right) + \\sum_{j=1}^{L-1} d_j

    with :math:`C` the Erlang C probability of waiting. Only the means add this
    way (the sojourns at successive stations are not independent in general).

    References
    ----------
    [Burke]_, [Jackson]_, [Kleinrock]_.
    """
    L = len(servers)
    check(L >= 1 and len(service_rates) == L, "service_rates", f"one per station ({L})",
          service_rates)
    delays = tuple(delays)
    check(len(delays) in (0, L - 1), "delays", f"none or one per hop ({L - 1})", delays)
    lam = check_positive("arrival_rate", arrival_rate)
    total = sum(check_nonnegative("delays", d) for d in delays)
    for c, mu in zip(servers, service_rates, strict=True):
        total += mmc_sojourn(c, lam, check_positive("service_rates", mu))
    return float(total)


def tandem_waits(servers: Sequence[int], arrival_rate: float,
                 service_rates: Sequence[float]) -> list[float]:
    """Mean time in queue (before service) at each M/M/c station of a tandem.

    Parameters
    ----------
    servers : sequence of int
        Identical servers ``c_j`` of each station, sharing its one FIFO queue.
    arrival_rate : float
        Poisson arrival rate ``lambda`` at the first station (> 0).
    service_rates : sequence of float
        Exponential service rate ``mu_j`` of each server of station ``j``, with
        ``lambda < c_j mu_j``.

    Returns
    -------
    list of float
        :math:`W_{q,j} = C(c_j, \\lambda/\\mu_j) / (c_j\\mu_j - \\lambda)` per station.

    Notes
    -----
    Every station of a Jackson tandem is an M/M/c queue in its own right
    (Burke's theorem, see :func:`tandem_sojourn`), whose mean wait in queue is
    the Erlang C probability of waiting times the mean wait of one that does,
    :math:`1 / (c\\mu - \\lambda)`. Fixed delays between stations change no wait.

    References
    ----------
    [Burke]_, [Jackson]_, [Kleinrock]_.
    """
    L = len(servers)
    check(L >= 1 and len(service_rates) == L, "service_rates", f"one per station ({L})",
          service_rates)
    lam = check_positive("arrival_rate", arrival_rate)
    out = []
    for c, mu in zip(servers, service_rates, strict=True):
        mu = check_positive("service_rates", mu)
        out.append(float(erlang_c(c, lam / mu) / (c * mu - lam)))
    return out
