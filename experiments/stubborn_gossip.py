"""Study B by simulation: what can one stubborn node do to gossip training?

Reproduces every claim of Study B (SPEC.md) with the gossip simulator and puts
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

Run::

    python experiments/stubborn_gossip.py --quick          # under a minute
    python experiments/stubborn_gossip.py --executor local --workers 2

It prints ``claim | exact | simulated (95% CI) | agrees`` and writes the
figures and ``claims.csv`` to ``--out`` (default ``out/stubborn_gossip``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from sim import analytic
from sim.gossip import GossipConfig, gossip_model, summarize_runs
from sim.plotting import plot_gossip_estimates, plot_gossip_series
from sim.results import Estimate, mean_ci, write_csv
from sim.runner import make_executor, replicate

# ----------------------------------------------------------------------------- parameters

NAME = "stubborn_gossip"
SEED = 2026
OUT = Path("out") / NAME

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

QUICK = {
    "CONTRACTION": {10: 1000, 100: 200, 10_000: 20},
    "NOISE_ROUNDS": 1500,
    "NOISE_REPS": 8,
    "NOISE_N": (10, 100, 1000),
    "CAPTURE_REPS": 400,
    "CREEP_TAUS": (0.1, 0.5, 2.0),
    "CREEP_REPS": 50,
    "SPARSE_REPS": 600,
}


# ----------------------------------------------------------------------------- helpers


def _claim(claim: str, exact: float, est: Estimate, *, rel_tol: float | None = None) -> dict[str, Any]:
    """A claim row: agrees when the exact value lies in the 95% interval (and within rel_tol)."""
    ok = est.contains(exact)
    if rel_tol is not None:
        ok = ok and abs(est.mean / exact - 1) <= rel_tol
    return {"claim": claim, "exact": exact, "estimate": est, "agrees": bool(ok)}


def _runs(cfg: GossipConfig, reps: int, seed: int, ex: Executor | None) -> list[dict[str, Any]]:
    return replicate(gossip_model, cfg, replications=reps, seed=seed, executor=ex)


def _series_band(records: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.stack([np.asarray(r[key], dtype=float).reshape(len(r["steps"]), -1)[:, 0] for r in records])
    m = a.mean(axis=0)
    h = 1.96 * a.std(axis=0, ddof=1) / math.sqrt(a.shape[0])
    return m, m - h, m + h


# ----------------------------------------------------------------------------- the study


def reproduce(quick: bool, out: Path, seed: int = SEED,
              executor: str | Executor | None = "serial", workers: int | None = None,
              log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Run every Study B claim by simulation; write figures and ``claims.csv`` to ``out``.

    Parameters
    ----------
    quick : bool
        Smaller run (under a minute on one core).
    out : Path
        Output folder (created).
    seed : int
        Root seed; every part derives its own from it.
    executor : {"serial", "local"} or Executor
        Where replications run.
    workers : int, optional
        Pool size for ``"local"``.
    log : callable, optional
        Receives one-line progress messages (default: silent).

    Returns
    -------
    list of dict
        One row per claim: ``claim``, ``exact``, ``estimate`` (an
        :class:`~sim.results.Estimate`), ``agrees``.
    """
    if log is None:
        def log(message: str) -> None:
            pass
    p = {k: v for k, v in globals().items() if k.isupper()}
    if quick:
        p.update(QUICK)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ex = make_executor(executor, workers)
    own = ex is not None and not isinstance(executor, Executor)
    rows: list[dict[str, Any]] = []
    try:
        rows += _contraction(p, out, seed, ex, log)
        rows += _noise_floor(p, out, seed + 1, ex, log)
        rows += _capture(p, out, seed + 2, ex, log)
        rows += _creep(p, out, seed + 3, ex, log)
        rows += _sparse(p, out, seed + 4, ex, log)
    finally:
        if own:
            ex.shutdown()  # type: ignore[union-attr]
    write_csv([{"claim": r["claim"], "exact": r["exact"], "mean": r["estimate"].mean,
                "low": r["estimate"].low, "high": r["estimate"].high, "se": r["estimate"].se,
                "replications": r["estimate"].n, "agrees": r["agrees"]} for r in rows],
              out / "claims.csv")
    return rows


def _contraction(p, out, seed, ex, log):
    log("contraction per matching round ...")
    rows, series = [], []
    for n, reps in p["CONTRACTION"].items():
        cfg = GossipConfig(nodes=n, rounds=p["CONTRACTION_ROUNDS"])
        recs = _runs(cfg, reps, seed, ex)
        s = summarize_runs(recs, cfg)
        c = analytic.matching_contraction(n)
        rows.append(_claim(f"contraction per matching round, n={n}", c, s["contraction_per_round_ci"]))
        m, lo, hi = _series_band(recs, "disagreement")
        series.append({"label": f"n={n}", "x": s["steps"], "mean": m, "low": lo, "high": hi,
                       "exact": s["predicted_disagreement"]})
    plot_gossip_series(series, out / "disagreement_vs_rounds.png", logy=True, xlabel="matching round",
                       ylabel="honest disagreement D", title="D per matching round (dashed: exact)")
    return rows


def _noise_floor(p, out, seed, ex, log):
    log("noise floor ...")
    rows, ns, ests = [], [], []
    for n in p["NOISE_N"]:
        cfg = GossipConfig(nodes=n, rounds=p["NOISE_ROUNDS"], noise=p["NOISE_S"],
                           burn_in=p["NOISE_BURN_IN"], record_every=1)
        est = mean_ci(r["noise_floor"] for r in _runs(cfg, p["NOISE_REPS"], seed, ex))
        ns.append(n)
        ests.append(est)
        if n in p["NOISE_CLAIM_N"]:
            exact = analytic.noise_floor(n, p["NOISE_S"])
            rows.append(_claim(f"noise floor (within 1%), n={n}, s={p['NOISE_S']:g}", exact, est,
                               rel_tol=0.01))
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


def _capture(p, out, seed, ex, log):
    log("capture by a stubborn node ...")
    rows = []
    for n in p["CAPTURE_N"]:
        steps = n * (n - 1)
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=steps, record_every=steps,
                           adversary="stubborn", adversary_value=p["CAPTURE_B"])
        s = summarize_runs(_runs(cfg, p["CAPTURE_REPS"], seed, ex), cfg)
        rows.append(_claim(f"capture rate per step, n={n}", analytic.capture_rate(n), s["capture_rate_ci"]))
    n = p["CAPTURE_N"][0]
    cfg = GossipConfig(nodes=n, rounds=2 * n, record_every=2 * n, adversary="stubborn",
                       adversary_value=p["CAPTURE_B"])
    s = summarize_runs(_runs(cfg, p["CAPTURE_REPS"], seed, ex), cfg)
    rows.append(_claim(f"capture rate per matching round, n={n}", analytic.matching_capture_rate(n),
                       s["capture_rate_ci"]))
    # honest mean vs steps, with and without the clip (figure)
    n, b, tau, steps = p["MEAN_N"], p["MEAN_B"], p["MEAN_TAU"], p["MEAN_STEPS"]
    every = max(1, steps // 100)
    series = []
    for label, clip in (("no clip", None), (f"clip tau={tau:g}", tau)):
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=steps, record_every=every,
                           adversary="stubborn", adversary_value=b, clip=clip)
        recs = _runs(cfg, 200, seed, ex)
        s = summarize_runs(recs, cfg)
        m, lo, hi = _series_band(recs, "honest_mean")
        exact = s.get("predicted_honest_mean")
        if clip is not None:  # linear creep at tau/(n(n-1)) per step: an upper bound on progress
            exact = np.minimum(s["steps"] * analytic.creep_bound(n, tau), b)
        series.append({"label": label, "x": s["steps"], "mean": m, "low": lo, "high": hi, "exact": exact})
    plot_gossip_series(series, out / "honest_mean_vs_steps.png", xlabel="single-pair step",
                       ylabel="honest mean m",
                       title=f"stubborn node at b={b:g}, n={n}; dashed: exact / creep bound")
    return rows


def _creep(p, out, seed, ex, log):
    log("clipped creep ...")
    n, b, steps = p["CREEP_N"], p["CREEP_B"], p["CREEP_STEPS"]
    rows, taus, ests = [], [], []
    for tau in p["CREEP_TAUS"]:
        cfg = GossipConfig(nodes=n, protocol="edge", rounds=steps, record_every=steps // 10,
                           adversary="stubborn", adversary_value=b, clip=tau)
        s = summarize_runs(_runs(cfg, p["CREEP_REPS"], seed, ex), cfg)
        est = s["creep_per_step_ci"]
        taus.append(tau)
        ests.append(est)
        if tau == p["CREEP_CLAIM_TAU"]:
            rows.append(_claim(f"clipped creep per step, far stubborn node, n={n}, tau={tau:g}",
                               analytic.creep_bound(n, tau), est))
    # near the stubborn value the clip binds less often: creep below the bound
    tau = p["CREEP_CLAIM_TAU"]
    cfg = GossipConfig(nodes=n, protocol="edge", rounds=400, record_every=400, adversary="stubborn",
                       adversary_value=0.0, clip=tau)
    recs = _runs(cfg, 4 * p["CREEP_REPS"], seed, ex)
    est = mean_ci(r["toward"][-1] / 400 for r in recs)
    bound = analytic.creep_bound(n, tau)
    rows.append({"claim": f"creep at most tau/(n(n-1)) near the stubborn node (b=0), n={n}, tau={tau:g}",
                 "exact": bound, "estimate": est, "agrees": bool(est.high <= bound)})
    grid = np.geomspace(min(taus), max(taus), 50)
    plot_gossip_estimates(taus, ests, out / "creep_vs_tau.png", exact_x=grid,
                          exact_y=[analytic.creep_bound(n, t) for t in grid], logx=True, logy=True,
                          xlabel="clip radius tau", ylabel="creep of m per step",
                          title=f"clipped creep, n={n}, b={b:g} (line: tau/(n(n-1)))")
    return rows


def _sparse(p, out, seed, ex, log):
    log("ring and torus against the exact recursions ...")
    rows = []
    graphs = {"ring n=16": nx.cycle_graph(16), "torus 4x4": nx.grid_2d_graph(4, 4, periodic=True)}
    for name, g in graphs.items():
        t = p["SPARSE_STEPS"][name]
        base = dict(graph=g, topology=name, nodes=None, protocol="edge", rounds=t,
                    record_every=p["SPARSE_EVERY"])
        cfg = GossipConfig(**base)
        recs = _runs(cfg, p["SPARSE_REPS"], seed, ex)
        s = summarize_runs(recs, cfg)
        rows.append(_claim(f"edge gossip E[D(t)] at t={t}, {name}", float(s["predicted_disagreement"][-1]),
                           mean_ci(r["disagreement"][-1] for r in recs)))
        cfg = GossipConfig(**base, adversary="stubborn", adversary_value=p["SPARSE_B"])
        recs = _runs(cfg, p["SPARSE_REPS"], seed, ex)
        s = summarize_runs(recs, cfg)
        rows.append(_claim(f"stubborn E[m(t)] at t={t}, {name}", float(s["predicted_honest_mean"][-1]),
                           mean_ci(float(np.ravel(r["honest_mean"])[-1]) for r in recs)))
    return rows


# ----------------------------------------------------------------------------- command line


def _table(rows: list[dict[str, Any]]) -> None:
    from sim.commands._common import print_table

    print_table([(r["claim"], f"{r['exact']:.6g}", str(r["estimate"]), "yes" if r["agrees"] else "NO")
                 for r in rows], ("claim", "exact", "simulated (95% CI)", "agrees"))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick --out DIR --seed --executor --workers``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small run (under a minute)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    ap.add_argument("--seed", type=int, default=SEED, help=f"root seed (default {SEED})")
    ap.add_argument("--executor", default="serial", help="serial (default) or local")
    ap.add_argument("--workers", type=int, default=None, help="processes for --executor local")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = reproduce(args.quick, args.out, args.seed, args.executor, args.workers,
                     log=lambda m: print(m, file=sys.stderr))
    _table(rows)
    print(f"\n{sum(r['agrees'] for r in rows)}/{len(rows)} claims agree; "
          f"figures and claims.csv in {args.out} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
