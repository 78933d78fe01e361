"""One replication of a gossip experiment, and the aggregate report of many."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..adversaries import Adversary, Defence
from ..errors import check
from ..results import log_mean_ci, mean_ci, power_ci, ratio_ci, skewed_ratio_ci, within
from ..rng import Streams
from .config import GossipConfig
from .engines import gossip_predictions, resolved_engine
from .state import GossipSystem
from .update import NodeUpdate

__all__ = ["gossip_model", "model_output", "summarize_runs", "gossip_comparison_rows"]

#: Scalar keys of the report compared with an exact value: (measured, exact, label).
COMPARED = (
    ("contraction_per_round", "predicted_contraction", "contraction per round/step"),
    ("noise_floor", "predicted_noise_floor", "noise floor E[D]"),
    ("capture_rate", "predicted_capture_rate", "capture rate of E[m - b]"),
    ("creep_per_step", "creep_bound", "creep of m toward b per round/step"),
)


# --------------------------------------------------------------------------- the model


def gossip_model(config: GossipConfig, streams: Streams, *, adversary: Adversary | None = None,
                 defence: Defence | None = None, update: NodeUpdate | None = None,
                 recorder: Any = None) -> dict[str, Any]:
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
    recorder : sim.timeline.Recorder, optional
        Records the run's exchanges (the ``async`` and ``edge`` DES engines).

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
        ``far``; and ``engine``, the engine that ran: the fastest that answers
        the config (``config.engine = "auto"``, as ``dtsim gossip`` chooses
        through :func:`sim.engines.select`) or the one it names.
    """
    system = GossipSystem(config, streams, adversary=adversary, defence=defence, update=update,
                          recorder=recorder)
    out = model_output(config, system, system.run())
    out["engine"] = resolved_engine(config)  # the one GossipSystem ran (sim.engines.select)
    return out


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
                out["creep_steps"] = _step(rec.steps[w])
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


def _step(v: Any) -> int | float:
    """A record's step or time: an int when integral (fractional async times stay floats)."""
    f = float(v)
    return int(f) if f.is_integer() else f


def _series(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.stack([np.asarray(r[key], dtype=float) for r in records])


def _mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = a.mean(axis=0)
    se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0]) if a.shape[0] > 1 else np.full_like(m, np.nan)
    return m, se


#: Depth of the record the contraction is estimated at: the last record where
#: the mean disagreement is still at least this fraction of its start.
CONTRACTION_DEPTH = 0.1


def summarize_runs(records: Sequence[Mapping[str, Any]], config: GossipConfig, *,
                   averaging: bool | None = None) -> dict[str, Any]:
    """Aggregate replications of :func:`gossip_model` into the ``dtsim gossip`` report.

    Parameters
    ----------
    records : sequence of dict
        Replication records (records with an ``error`` are skipped).
    config : GossipConfig
    averaging : bool, optional
        Whether the runs only averaged (disagreement never grows, so the
        contraction factor's interval is cut to ``[0, 1]``). Default: the
        config's :attr:`~sim.gossip.GossipConfig.averaging_only`; pass False
        when the runs had strategy objects or a node update that may raise ``D``.

    Returns
    -------
    dict
        Series ``steps``, ``time``, ``disagreement`` (+ ``_se``), ``honest_mean``
        (+ ``_se``; a list per record when ``dim > 1``), ``mean_shift``;
        ``contraction_per_round`` with ``contraction_per_round_ci`` and
        ``contraction_steps`` ``t_j``: ``(E[D(t_j)] / E[D(0)]) ** (1 / t_j)``
        from the ratio of mean disagreements at record ``t_j`` (the last record
        where the mean is at least :data:`CONTRACTION_DEPTH` of ``D[0]``, above
        ten times any noise floor) with :func:`~sim.results.skewed_ratio_ci`,
        carried through the power -- estimate and interval from the same data
        and record
        (where the rate is not constant, ``predicted_contraction`` is the exact
        recursion's ``(E[D(t_j)] / E[D(0)]) ** (1 / t_j)`` at the same record);
        ``final_disagreement`` + ``final_disagreement_ci`` (``E[D]`` at the last
        record, the sample mean with :func:`~sim.results.skewed_ratio_ci`);
        ``noise_floor`` + ``noise_floor_ci`` (with noise; log-scale interval); with a stubborn
        attacker ``capture_rate`` + ``capture_rate_ci`` (per round/step factor
        of ``E[m - b]``, a ratio of means with its delta-method interval, as the contraction) and with a clip ``creep_per_step`` + ``creep_per_step_ci``;
        and every entry of :func:`gossip_predictions`.

    Values beyond the doubles' range (an attacker at 1e308) give infinite or
    NaN aggregates, which the report prints as such; numpy does not warn.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _summarize_runs(records, config, averaging)


def _summarize_runs(records: Sequence[Mapping[str, Any]], config: GossipConfig,
                    averaging: bool | None = None) -> dict[str, Any]:
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
    pred = gossip_predictions(config)
    # Contraction: E[D(t_j)] / E[D(0)] at one record t_j, the ratio of the mean
    # disagreements with a log-scale interval no narrower than the spread of the
    # per-replication log ratios (skewed_ratio_ci), both from the same
    # replications at the same record, then raised to 1 / t_j. For matching on
    # the complete graph E[D(t)] = c**t E[D(0)] at any t. t_j is the last record,
    # within the records above ten times any noise floor, where the mean is still
    # above 0.1 D[0].
    floor = pred.get("predicted_noise_floor", 0.0)
    thresh = max(Dm[0] * 1e-12, 10.0 * floor, 1e-300)
    good = (Dm[1:] > thresh) & (np.diff(steps) == k)
    prefix = int(np.argmin(good)) if not good.all() else good.size  # contiguous from record 0
    if config.protocol != "async" and prefix >= 1 and Dm[0] > 0:
        j = max(1, int(np.sum(Dm[1:prefix + 1] >= CONTRACTION_DEPTH * Dm[0])))
        est = power_ci(skewed_ratio_ci(D[:, j], D[:, 0]), 1.0 / float(steps[j]))
        if config.averaging_only if averaging is None else averaging:
            est = within(est, 0.0, 1.0)  # D(t) <= D(0) in every replication: a factor <= 1
        out["contraction_per_round"] = est.mean
        out["contraction_per_round_ci"] = est
        out["contraction_steps"] = int(steps[j])
        pd = pred.get("predicted_disagreement")
        if "predicted_contraction" not in pred and pd is not None and pd[0] > 0:
            # no constant rate (sparse graphs): the exact recursion at the same record
            pred["predicted_contraction"] = float((pd[j] / pd[0]) ** (1.0 / float(steps[j])))
    fd = skewed_ratio_ci(D[:, -1])
    out["final_disagreement"], out["final_disagreement_ci"] = fd.mean, fd
    if config.noise > 0:
        est = log_mean_ci([r["noise_floor"] for r in ok])
        out["noise_floor"] = est.mean
        out["noise_floor_ci"] = est
    if "gap" in ok[0]:
        gap = _series(ok, "gap")
        g = gap.mean(axis=0)
        rel = g / g[0] if g[0] != 0 else np.full_like(g, np.nan)
        idx = np.flatnonzero((rel >= 0.05) & (steps > 0))
        if idx.size and config.protocol != "async":
            t = int(idx[-1])
            est = power_ci(ratio_ci(gap[:, t], gap[:, 0]), 1.0 / float(steps[t]))
            out["capture_rate"] = est.mean
            out["capture_rate_ci"] = est
            out["capture_steps"] = int(steps[t])
            phm = pred.get("predicted_honest_mean")
            b = config.value
            if ("predicted_capture_rate" not in pred and phm is not None
                    and np.isfinite(b) and phm[0] != b):
                # no constant rate (sparse graphs): the exact first moment at the same record,
                # (E[m(t)] - b) / (m(0) - b), as the contraction reads the second moment's
                pred["predicted_capture_rate"] = float(
                    ((phm[t] - b) / (phm[0] - b)) ** (1.0 / float(steps[t])))
        if config.clip is not None:
            far = np.stack([np.asarray(r["far"], dtype=bool) for r in ok]).all(axis=0)
            bad = np.flatnonzero(~far)
            w = steps.size - 1 if bad.size == 0 else int(bad[0]) - 1
            if w >= 1:
                toward = _series(ok, "toward")
                est = mean_ci(toward[:, w] / steps[w])
                out["creep_per_step"] = est.mean
                out["creep_per_step_ci"] = est
                out["creep_steps"] = _step(steps[w])
    out.update(pred)
    return out


def gossip_comparison_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
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
    fd = report.get("final_disagreement_ci")
    rows.append({"quantity": "final disagreement D",
                 "simulated": fd.mean if fd is not None else float(report["disagreement"][-1]),
                 "interval": fd, "exact": float(pd[-1]) if pd is not None else None})
    return rows
