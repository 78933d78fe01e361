"""Fit a trace's burst structure as a domain hierarchy of the failure model.

The model is :mod:`sim.failures`' two-level one: ``C`` workers in failure
domains of ``D`` workers; each worker's own process is up a fraction ``a``
of the time (mean down time ``delta_n``), each domain's is down a fraction
``rho`` (mean outage ``delta_d``), exponential up and down times, all
independent; a worker is up when it and its domain are. Its parameters are
those of :class:`sim.failures.ClusterConfig` (``workers``, ``domains``,
``availability``, ``mean_downtime``, ``domain_outage``,
``domain_mean_downtime``), so a fit replays as a parametric failure model.

What a count trace shows of it. A domain outage removes, at one instant,
the workers of the domain whose own process is up: ``K ~ Binomial(D, a)``
of them (the own processes are independent of the domain's, and a Poisson
outage sees them in their stationary law). A worker's own outage while its
domain is up removes one. Two own outages never share an instant, so every
preemption event of two or more is a domain outage; events of one are a
mixture.

The estimator:

1. ``(D, a)`` maximise the likelihood of the sizes ``k >= 2`` under the
   binomial truncated to ``K >= 2``,
   ``sum_i log Bin(k_i; D, a) - n_2 log P(K >= 2)``, over integers
   ``max k_i <= D <= C`` and ``a`` in ``[A, 1)`` (``A`` the trace's
   availability; ``A = a (1 - rho)`` needs ``a >= A``).
2. ``rho = 1 - A / a`` (the availability is matched exactly).
3. Domain outages, visible or not: ``N_d = n_2 / P(K >= 2)`` over the span
   ``T``; among them ``N_d P(K = 1)`` removed one worker, so the own
   outages seen are ``n_1' = max(n_1 - N_d P(K = 1), 0)``.
4. With ``m = C / D`` domains, each up a fraction ``1 - rho``, a domain's
   mean up time is ``u_d = m (1 - rho) T / N_d`` and its mean outage
   ``delta_d = rho u_d / (1 - rho)``.
5. Own outages are seen only while the domain is up, from the ``C A``
   workers effectively up on average: a worker's mean up time is
   ``u_n = C A T / n_1'`` and its mean down time ``delta_n = u_n (1 - a) / a``.

It is a moment-and-likelihood fit, not a full likelihood of the trace: the
count path's time structure (which rise ends which outage) is not used.
With no event of two or more there is no domain structure to fit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .model import AvailabilityTrace
from .stats import preemption_events, trace_stats

__all__ = ["DomainFit", "fit_domains", "cluster_trace", "size_loglik", "rise_sizes"]

#: Largest own availability searched (a = 1 would make single losses impossible).
A_MAX = 1.0 - 1e-9


@dataclass(frozen=True)
class DomainFit:
    """A fitted domain hierarchy (see the module notes); times in seconds.

    Attributes
    ----------
    workers : int
        ``C``, the trace's capacity.
    domain_size : int
        ``D``.
    domains : int
        ``round(C / D)``, the domain count for :class:`~sim.failures.ClusterConfig`
        (worker ``i`` in domain ``i % domains``).
    availability : float
        ``a``, each worker's own up-fraction.
    mean_downtime : float
        ``delta_n``, mean own outage (inf when no own outage is seen).
    domain_outage : float
        ``rho``, each domain's down-fraction.
    domain_mean_downtime : float
        ``delta_d``.
    domain_mean_uptime, mean_uptime : float
        ``u_d`` and ``u_n``.
    domain_events : float
        ``N_d``, domain outages estimated over the span (visible or not).
    own_events : float
        ``n_1'``, own outages seen.
    size_loglik : float
        Log-likelihood of the sizes ``>= 2`` at the fit.
    expected_sizes : dict
        ``{k: expected count}`` of events of size ``k >= 2`` at the fit.
    observed_sizes : dict
        ``{k: count}`` observed.
    boundary : bool
        ``a`` at its lower bound ``A`` (the bursts are smaller than whole
        domains of up workers would make them: ``rho = 0``).
    """

    workers: int
    domain_size: int
    domains: int
    availability: float
    mean_downtime: float
    domain_outage: float
    domain_mean_downtime: float
    domain_mean_uptime: float
    mean_uptime: float
    domain_events: float
    own_events: float
    size_loglik: float
    expected_sizes: dict[int, float]
    observed_sizes: dict[int, int]
    boundary: bool

    def cluster_config(self, horizon: float | None = None) -> dict[str, Any]:
        """Keyword arguments of :class:`sim.failures.ClusterConfig` for this fit.

        Parameters
        ----------
        horizon : float, optional
            Added as ``horizon`` when given.

        Notes
        -----
        ``domain_mean_downtime`` is left out when ``domain_outage`` is 0 (the
        boundary fit), where it has no effect.
        """
        out: dict[str, Any] = {
            "workers": self.workers, "domains": self.domains,
            "availability": self.availability, "mean_downtime": self.mean_downtime,
            "domain_outage": self.domain_outage,
        }
        if self.domain_outage > 0:  # (with no domain outage its length has no meaning)
            out["domain_mean_downtime"] = self.domain_mean_downtime
        if horizon is not None:
            out["horizon"] = horizon
        return out

    def as_dict(self) -> dict[str, Any]:
        """The fields, plus ``cluster_config`` (JSON-ready)."""
        out = asdict(self)
        out["cluster_config"] = self.cluster_config()
        return out


def size_loglik(k: np.ndarray, D: int, a: float) -> float:
    """Log-likelihood of burst sizes ``k >= 2`` under ``Binomial(D, a)`` truncated to ``K >= 2``.

    Returns
    -------
    float
        ``sum_i log Bin(k_i; D, a) - n log P(K >= 2)`` (``-inf`` when ``P(K >= 2) = 0``).
    """
    from scipy import stats as sps  # on first use: keeps `import sim` light

    tail = float(sps.binom.sf(1, D, a))
    if tail <= 0:
        return -math.inf
    return float(np.sum(sps.binom.logpmf(k, D, a)) - len(k) * math.log(tail))


def rise_sizes(trace: AvailabilityTrace) -> np.ndarray:
    """Instances gained at each timestamp where the count rises (the falls' mirror)."""
    t, c = trace.times, trace.counts
    gain = np.zeros(len(c), dtype=np.int64)
    gain[1:] = np.maximum(c[1:] - c[:-1], 0)
    idx = np.nonzero(gain)[0]
    if len(idx) == 0:
        return np.zeros(0, dtype=np.int64)
    _, inv = np.unique(t[idx], return_inverse=True)
    out = np.zeros(int(inv.max()) + 1, dtype=np.int64)
    np.add.at(out, inv, gain[idx])
    return out


def fit_domains(trace: AvailabilityTrace) -> DomainFit | None:
    """Fit the domain hierarchy to a trace's preemption events (see the module notes).

    Parameters
    ----------
    trace : AvailabilityTrace

    Returns
    -------
    DomainFit or None
        None when no preemption event removes two or more (nothing to fit).
    """
    from scipy import optimize
    from scipy import stats as sps

    st = trace_stats(trace)
    _, sizes = preemption_events(trace)
    falls = np.asarray(sizes[sizes >= 2], dtype=np.int64)
    if len(falls) == 0:
        return None
    rises = rise_sizes(trace)
    big = np.concatenate([falls, rises[rises >= 2]])
    C, A, T = int(st["nodes"]), float(st["availability"]), float(trace.end)
    lo = min(max(A, 1e-9), A_MAX)
    best: tuple[float, int, float] | None = None
    for D in range(int(big.max()), C + 1):
        res = optimize.minimize_scalar(lambda a, D=D: -size_loglik(big, D, a),
                                       bounds=(lo, A_MAX), method="bounded",
                                       options={"xatol": 1e-10})
        cands = [float(res.x), lo, A_MAX]
        a = max(cands, key=lambda x: size_loglik(big, D, x))
        ll = size_loglik(big, D, a)
        if best is None or ll > best[0] + 1e-9:
            best = (ll, D, a)
    assert best is not None
    ll, D, a = best
    rho = max(0.0, 1.0 - A / a)
    p_big = float(sps.binom.sf(1, D, a))
    p_one = float(sps.binom.pmf(1, D, a))
    n_d = len(big) / (2 * p_big)  # each domain outage shows a fall and a rise
    n1 = int(np.sum(sizes == 1))
    own = max(n1 - n_d * p_one, 0.0)
    m = C / D
    u_d = m * (1 - rho) * T / n_d
    d_d = rho * u_d / (1 - rho)
    u_n = C * A * T / own if own > 0 else math.inf
    d_n = u_n * (1 - a) / a if own > 0 else math.inf
    vals, cnt = np.unique(falls, return_counts=True)
    expected = {k: float(n_d * sps.binom.pmf(k, D, a)) for k in range(2, D + 1)}
    return DomainFit(
        workers=C, domain_size=D, domains=max(1, round(m)), availability=a,
        mean_downtime=d_n, domain_outage=rho, domain_mean_downtime=d_d,
        domain_mean_uptime=u_d, mean_uptime=u_n, domain_events=n_d, own_events=own,
        size_loglik=ll, expected_sizes=expected,
        observed_sizes={int(v): int(c) for v, c in zip(vals, cnt, strict=True)},
        boundary=a <= lo * (1 + 1e-6),
    )


def cluster_trace(config: Any, *, streams: Any) -> AvailabilityTrace:
    """The count trace of a :class:`sim.failures.ClusterConfig`'s failure model.

    Runs the config's workers and domains (:func:`sim.failures.build_cluster`)
    for ``config.horizon`` and records the number of workers effectively up
    (own process and domain up) after every change: the trace a cloud would
    have shown of that model, in the model's time unit (read as seconds).

    Parameters
    ----------
    config : ClusterConfig
    streams : Streams
        The replication's streams (the failure model's ``failures:*``).

    Returns
    -------
    AvailabilityTrace
        Format ``synthetic``, capacity at most ``config.workers``.
    """
    import simpy

    from ..failures import build_cluster
    from .model import count_trace

    env = simpy.Environment()
    fm = build_cluster(config, env, streams)
    workers = [c for c in fm.components.values() if c.kind == "worker"]
    times: list[float] = []
    counts: list[int] = []
    up = [0]

    def changed(comp: Any, is_up: bool, now: float) -> None:
        up[0] += 1 if is_up else -1
        times.append(now)
        counts.append(up[0])

    for w in workers:
        w.on_change(changed)
    fm.start()
    up[0] = sum(w.up for w in workers)
    times.insert(0, 0.0)
    counts.insert(0, up[0])
    env.run(until=config.horizon)
    return count_trace(times, counts, config.horizon, format="synthetic",
                       source="cluster model")
