"""Study B by simulation: what can one stubborn node do to gossip averaging?

Reproduces every claim of Study B (docs/studies.md) with the gossip simulator and puts
each measurement next to its exact value:

* contraction of the disagreement per random perfect-matching round,
  ``(n - 2) / (2 (n - 1))``, at several ``n`` up to ``10**4`` (``10**5`` in
  the full run);
* the noise floor ``(n - 1)(n - 2) s**2 / n`` (within 1 %);
* capture of the honest mean by one stubborn node, ``1 - 1/(n (n - 1))`` per
  single-pair step (and ``1 - 1/(2 (n - 1))`` per matching round);
* the clipped creep, at most ``tau / (n (n - 1))`` per step and equal to it
  while the stubborn value is far;
* beyond the complete graph: random-edge gossip on a ring and a torus against
  the exact second- and first-moment recursions.

This is an ordinary experiment file (stored, resumable, any executor); the
``STUDY`` marker makes ``dtsim reproduce`` run it and put :func:`claims` in
its report. Every part keeps the seed the study always used (the root seed
plus 0 for the contraction, 1 for the noise floor, 2 for capture, 3 for the
creep and 4 for the sparse graphs, as ``seed_offset``), so its tables are
bit-identical to the standalone program it replaces. Configs are dicts of
values; the sparse graphs are built inside the task, never stored on a config.

Run::

    dtsim run experiments/stubborn_gossip.py --quick          # under a minute
    dtsim run experiments/stubborn_gossip.py --executor local --workers 2

Figures and ``claims.csv`` go to the results folder (default
``out/stubborn_gossip``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from sim import analytic
from sim.gossip import GossipConfig, gossip_model, summarize_runs
from sim.results import Estimate, judge_bound, judge_equal, log_mean_ci, mean_ci, write_csv

# ----------------------------------------------------------------------------- parameters

NAME = "stubborn_gossip"
STUDY = "B"
TITLE = "Study B: what can one stubborn node do to gossip averaging?"
SEED = 2026

#: Contraction per matching round: n -> replications (rounds fixed).
CONTRACTION = {10: 2000, 100: 400, 10_000: 40, 100_000: 10}
CONTRACTION_ROUNDS = 24
#: Noise floor: noise s, rounds per replication, burn-in, replications, n values
#: (the 1 % claims are made at NOISE_CLAIM_N).
NOISE_S = 1.0
NOISE_ROUNDS = 4000
NOISE_BURN_IN = 40
NOISE_REPS = 10
NOISE_N = (10, 30, 100, 300, 1000)
NOISE_CLAIM_N = (100, 1000)
#: Capture: n values (edge protocol, one stubborn node at b), replications.
CAPTURE_N = (10, 50)
CAPTURE_B = 10.0
CAPTURE_REPS = 800
#: Clipped creep: n, stubborn value far away, radii, steps, replications.
CREEP_N = 10
CREEP_B = 1000.0
CREEP_TAUS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
CREEP_CLAIM_TAU = 0.5
CREEP_STEPS = 4000
CREEP_REPS = 100
#: Honest mean with and without clip (figure): n, b, tau, steps.
MEAN_N, MEAN_B, MEAN_TAU, MEAN_STEPS = 10, 10.0, 0.2, 6000
#: Sparse graphs against the exact recursions (edge protocol).
#: Steps per graph (where E[D] is still about 1 % of its start), record interval,
#: replications, stubborn value.
SPARSE_STEPS = {"ring n=16": 480, "torus 4x4": 120}
SPARSE_EVERY, SPARSE_REPS, SPARSE_B = 40, 2000, 4.0

QUICK_PARAMETERS = {
    "CONTRACTION": {10: 1000, 100: 200, 10_000: 20},
    "NOISE_ROUNDS": 1500,
    "NOISE_REPS": 8,
    "NOISE_N": (10, 100, 1000),
    "CAPTURE_REPS": 400,
    "CREEP_TAUS": (0.1, 0.5, 2.0),
    "CREEP_REPS": 50,
    "SPARSE_REPS": 600,
}


# ----------------------------------------------------------------------------- the points

#: The sparse graphs, built inside each task from their name (never stored on a config).
GRAPHS = {"ring n=16": lambda: nx.cycle_graph(16),
          "torus 4x4": lambda: nx.grid_2d_graph(4, 4, periodic=True)}
#: Series each record keeps (the rest of gossip_model's series are not used here).
SERIES = ("steps", "time", "disagreement", "honest_mean", "mean_shift", "gap", "toward", "far")


def parameters(quick: bool) -> dict[str, Any]:
    """The study's parameters (the upper-case names above), with the quick ones applied."""
    p = {k: v for k, v in globals().items() if k.isupper() and k not in ("QUICK", "POINTS")}
    if quick:
        p.update(QUICK_PARAMETERS)
    return p


def gossip_config(config: dict[str, Any]) -> GossipConfig:
    """The :class:`~sim.gossip.GossipConfig` of a point (its graph built from the name)."""
    kw = dict(config)
    name = kw.pop("graph", None)
    if name is not None:
        return GossipConfig(**kw, graph=GRAPHS[name](), topology=name, nodes=None)
    return GossipConfig(**kw)


def plan(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Every simulated point, in order: ``role`` and ``point`` (config, replications, seed_offset)."""
    entries: list[dict[str, Any]] = []

    def add(role: Any, offset: int, reps: int, **config: Any) -> None:
        gossip_config(config)  # validate now, before anything runs
        entries.append({"role": role, "point": {**config, "replications": reps,
                                                "seed_offset": offset}})

    for n, reps in p["CONTRACTION"].items():
        add(("contraction", n), 0, reps, nodes=n, rounds=p["CONTRACTION_ROUNDS"])
    for n in p["NOISE_N"]:
        add(("noise", n), 1, p["NOISE_REPS"], nodes=n, rounds=p["NOISE_ROUNDS"],
            noise=p["NOISE_S"], burn_in=p["NOISE_BURN_IN"], record_every=1)
    for n in p["CAPTURE_N"]:
        steps = n * (n - 1)
        add(("capture", n), 2, p["CAPTURE_REPS"], nodes=n, protocol="edge", rounds=steps,
            record_every=steps, adversary="stubborn", adversary_value=p["CAPTURE_B"])
    n = p["CAPTURE_N"][0]
    add(("capture_matching", n), 2, p["CAPTURE_REPS"], nodes=n, rounds=2 * n, record_every=2 * n,
        adversary="stubborn", adversary_value=p["CAPTURE_B"])
    n, b, tau, steps = p["MEAN_N"], p["MEAN_B"], p["MEAN_TAU"], p["MEAN_STEPS"]
    for clip in (None, tau):
        add(("mean", clip), 2, 200, nodes=n, protocol="edge", rounds=steps,
            record_every=max(1, steps // 100), adversary="stubborn", adversary_value=b, clip=clip)
    n, b, steps = p["CREEP_N"], p["CREEP_B"], p["CREEP_STEPS"]
    for tau in p["CREEP_TAUS"]:
        add(("creep", tau), 3, p["CREEP_REPS"], nodes=n, protocol="edge", rounds=steps,
            record_every=steps // 10, adversary="stubborn", adversary_value=b, clip=tau)
    add("creep_near", 3, 4 * p["CREEP_REPS"], nodes=n, protocol="edge", rounds=400,
        record_every=400, adversary="stubborn", adversary_value=0.0, clip=p["CREEP_CLAIM_TAU"])
    for name in GRAPHS:
        base = dict(graph=name, protocol="edge", rounds=p["SPARSE_STEPS"][name],
                    record_every=p["SPARSE_EVERY"])
        add(("sparse", name), 4, p["SPARSE_REPS"], **base)
        add(("sparse_stubborn", name), 4, p["SPARSE_REPS"], **base, adversary="stubborn",
            adversary_value=p["SPARSE_B"])
    return entries


def model(config: dict[str, Any], streams: Any) -> dict[str, Any]:
    """One replication of :func:`sim.gossip.gossip_model`: its scalars and the series used here.

    The noise-floor points (``record_every=1``, thousands of records) keep
    their scalars only.
    """
    rec = gossip_model(gossip_config(config), streams)
    keep = () if config.get("noise", 0.0) > 0 else SERIES
    return {k: v for k, v in rec.items() if k in keep or np.ndim(v) == 0}


BASE: dict[str, Any] = {}
POINTS = [e["point"] for e in plan(parameters(False))]
REPLICATIONS = 1  # every point sets its own
BATCH = 50
QUICK = {"POINTS": [e["point"] for e in plan(parameters(True))]}


# ----------------------------------------------------------------------------- claims


def _params(cfg: GossipConfig, reps: int) -> str:
    """The parameters of a claim's simulation, as text for its report row."""
    unit = "rounds" if cfg.protocol == "matching" else ("time units" if cfg.protocol == "async"
                                                         else "single-pair steps")
    parts = [f"{cfg.protocol} on {cfg.topology}, n={cfg.n}", f"{cfg.rounds} {unit}"]
    if cfg.record_every != 1:
        parts.append(f"recorded every {cfg.record_every}")
    if cfg.noise:
        parts.append(f"noise s={cfg.noise:g}, burn-in {cfg.burn_in}")
    if cfg.adversary != "none":
        parts.append(f"{cfg.adversary} b={cfg.value:g} at {list(cfg.adversary_positions)}")
    if cfg.clip is not None:
        parts.append(f"clip tau={cfg.clip:g}")
    parts.append(f"start N({cfg.init_mean:g}, {cfg.init_std:g}^2)")
    parts.append(f"{reps} replications")
    return ", ".join(parts)


def _claim(claim: str, exact: float, est: Estimate, cfg: GossipConfig, *,
           rel_tol: float | None = None) -> dict[str, Any]:
    """A claim row with its parameters: holds when the exact value lies in the 95% interval
    (and the estimate is within ``rel_tol`` of it)."""
    v = judge_equal(est, exact)
    ok, rule = v.holds, v.rule
    if rel_tol is not None:
        ok = bool(ok) and abs(est.mean / exact - 1) <= rel_tol
        rule += f", and the estimate within {rel_tol:.0%} of it"
    return {"claim": claim, "exact": exact, "estimate": est, "agrees": bool(ok), "rule": rule,
            "params": _params(cfg, est.n)}


def _series_band(records: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.stack([np.asarray(r[key], dtype=float).reshape(len(r["steps"]), -1)[:, 0] for r in records])
    m = a.mean(axis=0)
    h = 1.96 * a.std(axis=0, ddof=1) / math.sqrt(a.shape[0])
    return m, m - h, m + h


def _arrays(record: dict[str, Any]) -> dict[str, Any]:
    """A record with its series as arrays (stored records hold them as JSON text)."""
    out = {}
    for k, v in record.items():
        if v is None:
            continue
        if k in SERIES and isinstance(v, str):
            v = np.asarray(json.loads(v))
        out[k] = v
    return out


class _Runs:
    """Role -> (records, GossipConfig) of a finished sweep of this file's points."""

    def __init__(self, results: Any) -> None:
        if results.failed():
            r = results.failed()[0]
            raise RuntimeError(f"{len(results.failed())} tasks failed, first (point {r['point']}): "
                               f"{r['error']}")
        for quick in (False, True):
            self.p = parameters(quick)
            entries = plan(self.p)
            points = [{k: v for k, v in e["point"].items() if k not in ("replications", "seed_offset")}
                      for e in entries]
            if points == results.points:
                break
        else:
            raise RuntimeError("these results are not of this file's points (was POINTS edited?)")
        self.index = {e["role"]: i for i, e in enumerate(entries)}
        self.results = results

    def __call__(self, role: Any) -> tuple[list[dict[str, Any]], GossipConfig]:
        i = self.index[role]
        return ([_arrays(r) for r in self.results.records_of(i)],
                gossip_config(self.results.points[i]))


def evaluate(results: Any, out: Path | None = None) -> list[dict[str, Any]]:
    """The claim rows; with ``out``, also draw the figures and write ``claims.csv`` there."""
    runs = _Runs(results)
    p = runs.p
    rows: list[dict[str, Any]] = []
    rows += _contraction(p, runs, out)
    rows += _noise_floor(p, runs, out)
    rows += _capture(p, runs, out)
    rows += _creep(p, runs, out)
    rows += _sparse(p, runs)
    if out is not None:
        write_csv([{"claim": r["claim"], "exact": r["exact"], "mean": r["estimate"].mean,
                    "low": r["estimate"].low, "high": r["estimate"].high, "se": r["estimate"].se,
                    "replications": r["estimate"].n, "agrees": r["agrees"]} for r in rows],
                  Path(out) / "claims.csv")
    return rows


def claims(results: Any) -> list[dict[str, Any]]:
    """One row per claim: ``claim``, ``exact``, ``estimate`` (an :class:`~sim.results.Estimate`), ``agrees``."""
    return evaluate(results)


def analyse(results: Any, out_dir: Path) -> None:
    """Draw the figures and write ``claims.csv`` into the results folder."""
    evaluate(results, Path(out_dir))


def _contraction(p, runs, out):
    from sim.plotting import plot_gossip_series

    rows, series = [], []
    for n in p["CONTRACTION"]:
        recs, cfg = runs(("contraction", n))
        s = summarize_runs(recs, cfg)
        c = analytic.matching_contraction(n)
        rows.append(_claim(f"contraction per matching round, n={n}", c, s["contraction_per_round_ci"],
                           cfg))
        m, lo, hi = _series_band(recs, "disagreement")
        series.append({"label": f"n={n}", "x": s["steps"], "mean": m, "low": lo, "high": hi,
                       "exact": s["predicted_disagreement"]})
    if out is not None:
        plot_gossip_series(series, out / "disagreement_vs_rounds.png", logy=True,
                           xlabel="matching round", ylabel="honest disagreement D",
                           title="D per matching round (dashed: exact)")
    return rows


def _noise_floor(p, runs, out):
    from sim.plotting import plot_gossip_estimates

    rows, ns, ests = [], [], []
    for n in p["NOISE_N"]:
        recs, ncfg = runs(("noise", n))
        est = log_mean_ci(r["noise_floor"] for r in recs)  # as dtsim gossip: skewed, positive
        ns.append(n)
        ests.append(est)
        if n in p["NOISE_CLAIM_N"]:
            exact = analytic.noise_floor(n, p["NOISE_S"])
            rows.append(_claim(f"noise floor (within 1%), n={n}, s={p['NOISE_S']:g}", exact, est,
                               ncfg, rel_tol=0.01))
    if out is not None:
        # scaled by n s^2 so the (n-1)(n-2)/n^2 shape (and a 1 % miss) is visible
        s2 = p["NOISE_S"] ** 2
        scaled = [Estimate(e.mean / (n * s2), e.se / (n * s2), e.low / (n * s2), e.high / (n * s2), e.n)
                  for n, e in zip(ns, ests, strict=True)]
        grid = np.unique(np.geomspace(min(ns), max(ns), 80).round().astype(int))
        plot_gossip_estimates(ns, scaled, out / "noise_floor_vs_n.png", exact_x=grid,
                              exact_y=[(n - 1) * (n - 2) / n**2 for n in grid], logx=True,
                              xlabel="n", ylabel="stationary E[D] / (n s^2), after averaging",
                              title=f"noise floor, s = {p['NOISE_S']:g} (line: (n-1)(n-2)/n^2)")
    return rows


def _capture(p, runs, out):
    from sim.plotting import plot_gossip_series

    rows = []
    for n in p["CAPTURE_N"]:
        recs, ccfg = runs(("capture", n))
        s = summarize_runs(recs, ccfg)
        rows.append(_claim(f"capture rate per step, n={n}", analytic.capture_rate(n), s["capture_rate_ci"],
                           ccfg))
    n = p["CAPTURE_N"][0]
    recs, ccfg = runs(("capture_matching", n))
    s = summarize_runs(recs, ccfg)
    rows.append(_claim(f"capture rate per matching round, n={n}", analytic.matching_capture_rate(n),
                       s["capture_rate_ci"], ccfg))
    if out is None:
        return rows
    # honest mean vs steps, with and without the clip (figure)
    n, b, tau = p["MEAN_N"], p["MEAN_B"], p["MEAN_TAU"]
    series = []
    for label, clip in (("no clip", None), (f"clip tau={tau:g}", tau)):
        recs, cfg = runs(("mean", clip))
        s = summarize_runs(recs, cfg)
        m, lo, hi = _series_band(recs, "honest_mean")
        exact = s.get("predicted_honest_mean")
        if clip is not None:  # linear creep at tau/(n(n-1)) per step: an upper bound on progress
            exact = np.minimum(s["steps"] * analytic.creep_bound(n, tau), b)
        series.append({"label": label, "x": s["steps"], "mean": m, "low": lo, "high": hi, "exact": exact,
                       "exact_label": "exact" if clip is None else "creep bound tau/(n(n-1)) per step"})
    plot_gossip_series(series, out / "honest_mean_vs_steps.png", xlabel="single-pair step",
                       ylabel="honest mean m",
                       title=f"stubborn node at b={b:g}, n={n}; dashed: exact (no clip), bound (clip)")
    return rows


def _creep(p, runs, out):
    from sim.plotting import plot_gossip_estimates

    n, b = p["CREEP_N"], p["CREEP_B"]
    rows, taus, ests = [], [], []
    for tau in p["CREEP_TAUS"]:
        recs, kcfg = runs(("creep", tau))
        s = summarize_runs(recs, kcfg)
        est = s["creep_per_step_ci"]
        taus.append(tau)
        ests.append(est)
        if tau == p["CREEP_CLAIM_TAU"]:
            rows.append(_claim(f"clipped creep per step, far stubborn node, n={n}, tau={tau:g}",
                               analytic.creep_bound(n, tau), est, kcfg))
    # near the stubborn value the clip binds less often: creep below the bound
    tau = p["CREEP_CLAIM_TAU"]
    recs, ncfg = runs("creep_near")
    est = mean_ci(r["toward"][-1] / ncfg.rounds for r in recs)
    bound = analytic.creep_bound(n, tau)
    v = judge_bound(est, bound, mode="confirmed")  # an inequality: the exact column is the bound
    rows.append({"claim": f"creep at most tau/(n(n-1)) near the stubborn node (b=0), n={n}, tau={tau:g}",
                 "exact": bound, "estimate": est, "agrees": bool(v.holds), "rule": v.rule,
                 "params": _params(ncfg, est.n),
                 "note": "the exact column is the bound tau/(n(n-1)), not the creep"})
    if out is not None:
        grid = np.geomspace(min(taus), max(taus), 50)
        plot_gossip_estimates(taus, ests, out / "creep_vs_tau.png", exact_x=grid,
                              exact_y=[analytic.creep_bound(n, t) for t in grid], logx=True, logy=True,
                              xlabel="clip radius tau", ylabel="creep of m per step",
                              title=f"clipped creep, n={n}, b={b:g} (line: tau/(n(n-1)))")
    return rows


def _sparse(p, runs):
    rows = []
    for name in GRAPHS:
        t = p["SPARSE_STEPS"][name]
        recs, cfg = runs(("sparse", name))
        s = summarize_runs(recs, cfg)
        rows.append(_claim(f"edge gossip E[D(t)] at t={t}, {name}", float(s["predicted_disagreement"][-1]),
                           s["final_disagreement_ci"], cfg))
        recs, cfg = runs(("sparse_stubborn", name))
        s = summarize_runs(recs, cfg)
        rows.append(_claim(f"stubborn E[m(t)] at t={t}, {name}", float(s["predicted_honest_mean"][-1]),
                           mean_ci(float(np.ravel(r["honest_mean"])[-1]) for r in recs), cfg))
    return rows


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
