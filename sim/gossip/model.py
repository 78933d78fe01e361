"""One replication of a gossip experiment, and the aggregate report of many."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..adversaries import Adversary, Defence
from ..errors import check
from ..results import Estimate, mean_ci
from ..rng import Streams
from .config import GossipConfig
from .engines import predictions
from .state import GossipSystem
from .update import NodeUpdate

__all__ = ["gossip_model", "model_output", "summarize_runs", "comparison_rows"]

#: Scalar keys of the report compared with an exact value: (measured, exact, label).
COMPARED = (
    ("contraction_per_round", "predicted_contraction", "contraction per round/step"),
    ("noise_floor", "predicted_noise_floor", "noise floor E[D]"),
    ("capture_rate", "predicted_capture_rate", "capture rate of E[m - b]"),
    ("creep_per_step", "creep_bound", "creep of m toward b per round/step"),
)


# --------------------------------------------------------------------------- the model


def gossip_model(config: GossipConfig, streams: Streams, *, adversary: Adversary | None = None,
                 defence: Defence | None = None, update: NodeUpdate | None = None) -> dict[str, Any]:
    """One replication of a gossip experiment (for :func:`sim.runner.replicate`).

    Parameters
    ----------
    config : GossipConfig
    streams : Streams
        The replication's streams.
    adversary, defence, update : optional
        Strategy objects replacing the config's adversary kind, its defence and
        the default node update (see :class:`~sim.gossip.state.GossipSystem`);
        bind them with :func:`functools.partial` to give a runner a model.

    Returns
    -------
    dict
        Flat scalar metrics -- ``final_disagreement``, ``noise_floor`` (mean ``D`` over records
        past ``burn_in``), ``capture_ratio`` (``gap[-1] / gap[0]``, stubborn),
        ``creep_per_step`` and ``creep_steps`` (progress of the honest mean
        toward ``b`` per round/step while every honest node stays farther than
        ``tau``, with a clip), ``exchanges``, ``sim_time`` -- and the series as
        numpy arrays: ``steps``, ``time``, ``exchange_counts``,
        ``disagreement``, ``honest_mean`` (shape ``(records, dim)``),
        ``mean_shift`` and, with a stubborn attacker, ``gap``, ``toward``,
        ``far``.
    """
    system = GossipSystem(config, streams, adversary=adversary, defence=defence, update=update)
    return model_output(config, system, system.run())


def model_output(config: GossipConfig, system: GossipSystem, rec: Any) -> dict[str, Any]:
    """The flat metrics and series of :func:`gossip_model` from a system that has run.

    For models that build their :class:`~sim.gossip.state.GossipSystem` themselves
    (gossip training swaps in its own records); ``rec`` is ``system.run()``.
    """
    D = rec.disagreement
    out: dict[str, Any] = {
        "n": config.n,
        "honest": config.honest_count,
        "exchanges": int(system.exchanges),
        "sim_time": float(rec.time[-1]),
        "final_disagreement": float(D[-1]),
    }
    post = (rec.steps >= config.burn_in) & (rec.steps > 0)
    out["noise_floor"] = float(D[post].mean()) if post.any() else math.nan
    if rec.gap is not None:
        out["capture_ratio"] = float(rec.gap[-1] / rec.gap[0]) if rec.gap[0] != 0 else math.nan
        if config.clip is not None and rec.far is not None:
            bad = np.flatnonzero(~rec.far)
            w = rec.steps.size - 1 if bad.size == 0 else int(bad[0]) - 1
            if w >= 1:
                out["creep_per_step"] = float(rec.toward[w] / rec.steps[w])  # type: ignore[index]
                out["creep_steps"] = int(rec.steps[w])
            else:
                out["creep_per_step"] = math.nan
                out["creep_steps"] = 0
    out.update({
        "steps": rec.steps.copy(),
        "time": rec.time,
        "exchange_counts": rec.exchanges,
        "disagreement": D,
        "honest_mean": rec.honest_mean,
        "mean_shift": rec.mean_shift,
    })
    if rec.gap is not None:
        out["gap"] = rec.gap
        out["toward"] = rec.toward
        out["far"] = rec.far
    return out


# --------------------------------------------------------------------------- aggregation


def _series(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.stack([np.asarray(r[key], dtype=float) for r in records])


def _mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = a.mean(axis=0)
    se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0]) if a.shape[0] > 1 else np.full_like(m, np.nan)
    return m, se


def _power_ci(est: Estimate, power: float) -> Estimate:
    """Transform an estimate of ``c**k`` into one of ``c`` (monotone map)."""
    def f(v: float) -> float:
        return math.copysign(abs(v) ** power, v) if math.isfinite(v) else v
    return Estimate(f(est.mean), est.se * power * abs(est.mean) ** (power - 1) if est.mean else math.nan,
                    f(est.low), f(est.high), est.n, est.confidence)


def summarize_runs(records: Sequence[Mapping[str, Any]], config: GossipConfig) -> dict[str, Any]:
    """Aggregate replications of :func:`gossip_model` into the ``dtsim gossip`` report.

    Parameters
    ----------
    records : sequence of dict
        Replication records (records with an ``error`` are skipped).
    config : GossipConfig

    Returns
    -------
    dict
        Series ``steps``, ``time``, ``disagreement`` (+ ``_se``), ``honest_mean``
        (+ ``_se``; a list per record when ``dim > 1``), ``mean_shift``;
        ``contraction_per_round`` (geometric mean of successive ratios of the
        mean disagreement over the records from 0 while it stays above
        ``max(1e-12 D[0], 10 x predicted noise floor)``; with noise it is
        slightly biased up) with ``contraction_per_round_ci`` (from the
        per-replication ratios ``D[j] / D[0]``, unbiased for ``c**t``);
        ``noise_floor`` + ``noise_floor_ci`` (with noise); with a stubborn
        attacker ``capture_rate`` + ``capture_rate_ci`` (per round/step factor
        of ``E[m - b]``) and with a clip ``creep_per_step`` + ``creep_per_step_ci``;
        and every entry of :func:`predictions`.
    """
    ok = [r for r in records if not r.get("error")]
    check(bool(ok), "replications", "at least one that ran", [r.get("error") for r in records])
    steps = np.asarray(ok[0]["steps"])
    k = config.record_every
    out: dict[str, Any] = {"n": config.n, "honest": config.honest_count, "replications": len(ok),
                           "steps": steps}
    time = _series(ok, "time")
    out["time"] = time.mean(axis=0)
    D = _series(ok, "disagreement")
    Dm, Dse = _mean_se(D)
    out["disagreement"], out["disagreement_se"] = Dm, Dse
    hm = np.stack([np.asarray(r["honest_mean"], dtype=float) for r in ok])
    hmm, hmse = _mean_se(hm)
    if config.dim == 1:
        hmm, hmse = hmm[:, 0], hmse[:, 0]
    out["honest_mean"], out["honest_mean_se"] = hmm, hmse
    out["mean_shift"] = _series(ok, "mean_shift").mean(axis=0)
    out["exchanges"] = float(np.mean([r["exchanges"] for r in ok]))
    pred = predictions(config)
    # Contraction: the geometric mean of successive ratios of the mean
    # disagreement over the records before the floor (it telescopes to
    # (Dm[j] / Dm[0]) ** (1 / steps[j])); its interval comes from the
    # per-replication ratios D[j'] / D[0], unbiased for c ** steps[j'] since
    # E[D' | x] = c D, at the last record j' where Dm is still above 1e-3 Dm[0]
    # (deeper ratios are dominated by rare replications at small n).
    floor = pred.get("predicted_noise_floor", 0.0)
    thresh = max(Dm[0] * 1e-12, 10.0 * floor, 1e-300)
    good = (Dm[1:] > thresh) & (np.diff(steps) == k)
    prefix = int(np.argmin(good)) if not good.all() else good.size  # contiguous from record 0
    if config.protocol != "async" and prefix >= 1 and Dm[0] > 0:
        out["contraction_per_round"] = float((Dm[prefix] / Dm[0]) ** (1.0 / steps[prefix]))
        j = max(1, int(np.sum(Dm[1:prefix + 1] >= 1e-3 * Dm[0])))
        est = mean_ci(D[:, j] / D[:, 0])
        out["contraction_per_round_ci"] = _power_ci(est, 1.0 / float(steps[j]))
        out["contraction_steps"] = int(steps[j])
    if config.noise > 0:
        est = mean_ci([r["noise_floor"] for r in ok])
        out["noise_floor"] = est.mean
        out["noise_floor_ci"] = est
    if "gap" in ok[0]:
        gap = _series(ok, "gap")
        g = gap.mean(axis=0)
        rel = g / g[0] if g[0] != 0 else np.full_like(g, np.nan)
        idx = np.flatnonzero((rel >= 0.05) & (steps > 0))
        if idx.size and config.protocol != "async":
            t = int(idx[-1])
            out["capture_rate"] = float(rel[t] ** (1.0 / steps[t]))
            est = mean_ci(gap[:, t] / gap[:, 0])
            out["capture_rate_ci"] = _power_ci(est, 1.0 / float(steps[t]))
            out["capture_steps"] = int(steps[t])
        if config.clip is not None:
            far = np.stack([np.asarray(r["far"], dtype=bool) for r in ok]).all(axis=0)
            bad = np.flatnonzero(~far)
            w = steps.size - 1 if bad.size == 0 else int(bad[0]) - 1
            if w >= 1:
                toward = _series(ok, "toward")
                est = mean_ci(toward[:, w] / steps[w])
                out["creep_per_step"] = est.mean
                out["creep_per_step_ci"] = est
                out["creep_steps"] = int(steps[w])
    out.update(pred)
    return out


def comparison_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Simulated against exact, one record per quantity of a :func:`summarize_runs` report.

    Parameters
    ----------
    report : dict
        The output of :func:`summarize_runs`.

    Returns
    -------
    list of dict
        ``quantity``, ``simulated``, ``interval`` (an :class:`~sim.results.Estimate`
        or None) and ``exact`` (None where no reference applies), for each
        quantity of :data:`COMPARED` the report carries, then the final
        disagreement ``D``.
    """
    rows = []
    for key, exact, label in COMPARED:
        if key in report or exact in report:
            rows.append({"quantity": label, "simulated": report.get(key),
                         "interval": report.get(key + "_ci"), "exact": report.get(exact)})
    pd = report.get("predicted_disagreement")
    rows.append({"quantity": "final disagreement D", "simulated": float(report["disagreement"][-1]),
                 "interval": None, "exact": float(pd[-1]) if pd is not None else None})
    return rows
