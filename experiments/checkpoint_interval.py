"""How often should preemptible workers checkpoint? The exact interval against Young, Daly and the DES.

A synchronous job of ``n`` workers is a GPipe pipeline of ``n`` stages, one
replica each, one microbatch of forward passes per step (a step of
failure-free time ``step``, ``step / n`` per stage): any worker's failure
loses the step, and the job restarts from its last checkpoint after the
restart cost ``R``. A checkpoint every ``K`` steps costs ``C``. The exact
optimum of the expected time per unit of work (``sim.analytic.checkpointing``)
is ``tau* = (1 + W0(-exp(-1 - C/M))) M`` for a job MTBF ``M``, whatever ``R``.

Four parts (the point's ``part``):

``interval``
    Spot workers (Poisson preemptions of mean ``worker_mtbf``, replaced at
    once), the job MTBF ``M = worker_mtbf / n``. Swept: ``(n, worker_mtbf, C)``
    from ``C/M = 0.01`` to ``1``, and ``K`` around the exact ``K*`` (plus
    Young's and Daly's ``K``). Measured: the time per unit of work
    ``Phi(K)``; its best ``K`` against ``K*``, Young and Daly; ``Phi`` at each
    ``K`` against Daly's exact law.
``wall``
    The study's efficiency wall: ``R = 0`` and ``worker_mtbf / C = 3578``,
    where the exact best efficiency ``-W0(-exp(-1 - n C / M_w))`` falls to
    50 % at ``n = (ln 2 - 1/2) M_w / C = 691``. Swept: ``n`` up to 691, each
    at its ``K*`` (a step of ``tau*/10``). Measured: the efficiency.
``flaky``
    Heterogeneous workers at the wall (``n C / M_w = ln 2 - 1/2``, 50 %): a
    fraction ``f`` of the ``n`` workers fails ``r`` times as often. Each
    replication draws every worker's Poisson preemptions at its own rate into
    a trace replayed by name (a 1e-6 outage each). The job rate is
    multiplied by ``1 + f (r - 1)``; measured: the efficiency at the new
    ``K*`` against the exact one.
``trace``
    A real spot trace (looped from a random start per replication, the
    ``recent`` mapping policy) on ``n = 8`` workers: its failures are not
    Poisson. The exponential model takes the trace's own mean time between
    the job's failures (its all-up time over its outages); measured: ``Phi``
    over ``K``, the best ``K`` against the exponential model's ``K*``, and
    ``Phi`` against the exponential model's prediction.

Run::

    dtsim run experiments/checkpoint_interval.py --quick
    python experiments/checkpoint_interval.py

Writes ``checkpoint_interval.md`` (the tables and the analytic claims) and
``time_per_work.png``.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import brentq

import sim.runner
from sim import analytic
from sim.rng import Streams
from sim.training import TrainingConfig, training_model

# ----------------------------------------------------------------------------- parameters

NAME = "checkpoint_interval"

#: The study's efficiency wall: worker MTBF over checkpoint cost with 50 % at n = 691 (R = 0):
#: n_50 = (ln 2 - 1/2) M_w / C, so M_w / C = 691 / (ln 2 - 1/2).
WALL_RATIO = 691 / (math.log(2) - 0.5)
#: An outage of a generated trace (a preemption and its replacement), in step units.
BLIP = 1e-6

BASE: dict[str, Any] = dict(part="interval", workers=1, worker_mtbf=100.0, checkpoint_cost=1.0,
                            restart_cost=0.0, step=1.0, checkpoint_every=1, segments=12,
                            flaky_fraction=0.0, flaky_ratio=1.0, trace="", speedup=1.0)

#: (n, worker MTBF, C): C/M from 0.01 to 1 over MTBF, C and n.
INTERVAL_SETTINGS = ((1, 100.0, 1.0), (4, 100.0, 1.0), (16, 100.0, 1.0), (4, 20.0, 2.0),
                     (1, 10.0, 10.0))
K_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
WALL_WORKERS = (16, 64, 256, 691)
#: Flaky workers at the wall: n = 64, 4 of them (f = 1/16) failing r times as often.
FLAKY_WORKERS, FLAKY_FRACTION, FLAKY_RATIOS = 64, 1 / 16, (1.0, 11.0, 51.0, 101.0)
#: Real traces: n = 8 workers; a time unit is the trace's mean time between job failures / 100.
TRACES = ("aws-p2-3day", "aws-g4dn-24h")
TRACE_WORKERS, TRACE_COST_FRACTION, TRACE_K = 8, 0.05, (4, 8, 16, 24, 32, 48, 64, 96)


def _ks(kstar: int, extra: tuple[int, ...] = ()) -> list[int]:
    return sorted({max(1, round(kstar * f)) for f in K_FACTORS} | set(extra))


def _interval_points(settings) -> list[dict[str, Any]]:
    pts = []
    for n, Mw, C in settings:
        M = Mw / n
        kstar = analytic.best_checkpoint_every(1.0, C, M)
        young = max(1, round(analytic.young_interval(C, M)))
        daly = max(1, round(analytic.daly_interval(C, M)))
        for K in _ks(kstar, (young, daly)):
            pts.append(dict(part="interval", workers=n, worker_mtbf=Mw, checkpoint_cost=C,
                            checkpoint_every=K))
    return pts


def _wall_points(workers) -> list[dict[str, Any]]:
    pts = []
    for n in workers:
        M = WALL_RATIO / n
        step = analytic.optimal_checkpoint_interval(1.0, M) / 10
        pt = dict(part="wall", workers=n, worker_mtbf=WALL_RATIO, step=step,
                  checkpoint_every=analytic.best_checkpoint_every(step, 1.0, M))
        if n > 64:  # a step crosses n stages: fewer replications of the big jobs
            pt["replications"] = 16
        pts.append(pt)
    return pts


def _flaky_points(ratios) -> list[dict[str, Any]]:
    n, f = FLAKY_WORKERS, FLAKY_FRACTION
    Mw = n / (math.log(2) - 0.5)  # n C / M_w at the 50 % wall, C = 1
    pts = []
    for r in ratios:
        M = Mw / (n * (1 + f * (r - 1)))
        step = analytic.optimal_checkpoint_interval(1.0, M) / 10
        pts.append(dict(part="flaky", workers=n, worker_mtbf=Mw, flaky_fraction=f, flaky_ratio=r,
                        step=step, checkpoint_every=analytic.best_checkpoint_every(step, 1.0, M)))
    return pts


@cache
def trace_job_mtbf(trace: str, workers: int) -> tuple[float, float, int, float]:
    """The trace's job: mean time between failures (trace seconds), its CV, the count, mean outage.

    The job of ``workers`` slots (``recent`` policy) runs while all are up; an
    all-up period ends at the next outage (a merged down interval of any of
    them). Mean = all-up time / outages; CV = the standard deviation over the
    mean of the all-up periods (1 for Poisson); the mean outage length is the
    restart period's (the job waits for every slot).
    """
    from sim.traces import load_trace
    from sim.traces.replay import slot_patterns

    tr = load_trace(trace)
    pats = slot_patterns(tr, policy="recent")[:workers]
    merged: list[list[float]] = []
    for s, e in sorted(iv for p in pats for iv in p):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    ups, t = [], 0.0
    for s, e in merged:
        if s > t:
            ups.append(s - t)
        t = max(t, e)
    if tr.end > t and merged:  # looped: the last up period runs into the first
        if ups:
            ups[0] += tr.end - t
    up = np.array(ups)
    down = float(np.mean([e - s for s, e in merged]))
    return float(up.sum() / len(merged)), float(up.std(ddof=1) / up.mean()), len(merged), down


def _trace_points(traces, ks) -> list[dict[str, Any]]:
    pts = []
    for name in traces:
        mean_up, _, _, _ = trace_job_mtbf(name, TRACE_WORKERS)
        speedup = mean_up / 100.0  # the job MTBF is 100 time units
        for K in ks:
            pts.append(dict(part="trace", workers=TRACE_WORKERS, trace=name, speedup=speedup,
                            checkpoint_cost=TRACE_COST_FRACTION * 100.0, checkpoint_every=K,
                            worker_mtbf=math.inf))
    return pts


POINTS = (_interval_points(INTERVAL_SETTINGS) + _wall_points(WALL_WORKERS)
          + _flaky_points(FLAKY_RATIOS) + _trace_points(TRACES, TRACE_K))
REPLICATIONS = 40
NONNEGATIVE = "*"
SEED = 26
QUICK = {
    "POINTS": (_interval_points(INTERVAL_SETTINGS[2:3] + INTERVAL_SETTINGS[4:]) + _wall_points((16, 64))
               + _flaky_points((1.0, 101.0)) + _trace_points(TRACES[:1], (8, 24, 64))),
    "REPLICATIONS": 8,
}


# ----------------------------------------------------------------------------- model


def _flaky_trace(p: dict[str, Any], rng: np.random.Generator, horizon: float, path: str) -> None:
    """Poisson preemptions per worker (flaky ones r times as often), each a BLIP outage."""
    n = p["workers"]
    flaky = round(p["flaky_fraction"] * n)
    rows = []
    for j in range(n):
        mean = p["worker_mtbf"] / (p["flaky_ratio"] if j < flaky else 1.0)
        t = 0.0
        while True:
            t += rng.exponential(mean)
            if t >= horizon:
                break
            rows.append((f"s{j}r0", t, t + BLIP * p["step"]))
            t += BLIP * p["step"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["worker", "start", "end"])
        for r in rows:
            w.writerow([r[0], repr(r[1]), repr(r[2])])


def job_mtbf(p: dict[str, Any]) -> float:
    """The exponential model's job MTBF of a point (time units)."""
    if p["part"] == "trace":
        return 100.0
    n, f, r = p["workers"], p["flaky_fraction"], p["flaky_ratio"]
    return p["worker_mtbf"] / (n * (1 + f * (r - 1)))


def model(p: dict[str, Any], streams: Streams) -> dict[str, float]:
    """One replication: the time per unit of work and the efficiency at ``K``."""
    n, K, step = p["workers"], p["checkpoint_every"], p["step"]
    N = K * p["segments"]
    kw: dict[str, Any] = dict(stages=n, replicas=1, microbatches=1, steps=N, schedule="gpipe",
                              forward_time=step / n, backward_ratio=0.0, sync="none",
                              checkpoint_every=K, checkpoint_cost=p["checkpoint_cost"],
                              restart_cost=p["restart_cost"])
    path = None
    if p["part"] in ("interval", "wall"):
        kw.update(mtbf=p["worker_mtbf"], replace_time=0.0)
    elif p["part"] == "flaky":
        M = job_mtbf(p)
        phi = analytic.checkpoint_time_per_work(K * step, p["checkpoint_cost"], 0.0, M)
        horizon = 200.0 * N * step * phi
        fd, path = tempfile.mkstemp(suffix=".csv", prefix="dtsim_flaky_")
        os.close(fd)
        _flaky_trace(p, streams.rng("flaky"), horizon, path)
        kw.update(failure_trace=path)
    else:
        from sim.traces import TraceReplay

        kw.update(failure_trace=TraceReplay(p["trace"], policy="recent", speedup=p["speedup"],
                                            loop=True, resample="offset"))
    try:
        out = training_model(TrainingConfig(**kw), streams)
    finally:
        if path is not None:
            os.unlink(path)
    work = N * step
    return {"time_per_work": out["training_time"] / work, "efficiency": work / out["training_time"],
            "restarts": out["restarts"]}


# ----------------------------------------------------------------------------- analysis


def _f(x: float, d: int = 4) -> str:
    return f"{x:.{d}g}"


def _ci(r: dict[str, Any], m: str) -> str:
    return f"{_f(float(r[m + '_mean']))} [{_f(float(r[m + '_low']))}, {_f(float(r[m + '_high']))}]"


def claims() -> list[str]:
    """The study's analytic claims, checked on the exact law."""
    A = analytic
    out = []
    eps5 = brentq(
        lambda e: A.young_interval(e, 1.0) / A.optimal_checkpoint_interval(e, 1.0) - 1.05, 1e-6, 1)
    eps25 = brentq(
        lambda e: A.young_interval(e, 1.0) / A.optimal_checkpoint_interval(e, 1.0) - 1.25, 1e-6, 1)
    daly = max(abs(A.daly_interval(e, 1.0) / A.optimal_checkpoint_interval(e, 1.0) - 1)
               for e in np.linspace(1e-4, eps25, 200))
    out.append(f"- Young overshoots the exact interval by 5 % at C/M = {eps5:.4f} and by 25 % at "
               f"C/M = {eps25:.4f} (in the wall setting: n = {eps5 * WALL_RATIO:.0f} and "
               f"{eps25 * WALL_RATIO:.0f} workers; at n = 691 it overshoots by "
               f"{100 * (A.young_interval(691 / WALL_RATIO, 1) / A.optimal_checkpoint_interval(691 / WALL_RATIO, 1) - 1):.1f} %). "
               f"Daly's higher-order interval stays within {100 * daly:.2f} % of it over the same "
               f"range (it undershoots); Daly's first-order sqrt(2C(M+R)) is Young's at R = 0 and "
               f"overshoots more for R > 0.")
    for e in (0.01, 0.1, 691 / WALL_RATIO, 1.0):
        t = A.optimal_checkpoint_interval(e, 1.0)
        lo = A.checkpoint_time_per_work(t / 2, e, 0, 1) / A.checkpoint_time_per_work(t, e, 0, 1)
        hi = A.checkpoint_time_per_work(2 * t, e, 0, 1) / A.checkpoint_time_per_work(t, e, 0, 1)
        out.append(f"- Flat curve at C/M = {e:.4g}: the time per unit of work at tau*/2 and 2 tau* "
                   f"is {100 * (lo - 1):.2f} % and {100 * (hi - 1):.2f} % above the optimum.")
    n50 = A.efficiency_wall(WALL_RATIO, 1.0, 0.0, 0.5)
    out.append(f"- Efficiency wall: with R = 0, 50 % at n = (ln 2 - 1/2) M_w / C; the study's "
               f"n = 691 is M_w / C = {WALL_RATIO:.1f} (n_50 = {n50:.2f}), e.g. a checkpoint of "
               f"1 minute and a worker MTBF of {WALL_RATIO / 60:.1f} hours.")
    e0 = 691 / WALL_RATIO
    target = 0.2 * A.optimal_checkpoint_efficiency(e0, 0, 1.0)
    mult = brentq(
        lambda x: A.optimal_checkpoint_efficiency(e0 * x, 0, 1.0) - target, 1, 100)
    out.append(f"- Flaky workers: a fraction f failing r times as often multiplies the job's "
               f"failure rate by 1 + f (r - 1); at the wall (efficiency 0.50) throughput falls "
               f"fivefold (to {target:.3f}) at 1 + f (r - 1) = {mult:.2f}: 1 in 16 workers "
               f"{1 + 16 * (mult - 1):.0f} times flakier, or 10 % of them "
               f"{1 + 10 * (mult - 1):.0f} times.")
    return out


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Tables: measured best K vs exact/Young/Daly; the wall; flaky workers; real traces."""
    from sim.plotting import plot_sweep

    rows = results.summary()
    A = analytic
    lines = ["## Analytic claims (exact law)", "", *claims(), ""]
    # interval
    inter = [r for r in rows if r["part"] == "interval"]
    if inter:
        lines += ["## Measured best interval (time per unit of work Phi, DES, 95 % CI)", "",
                  "| n | worker MTBF | C | C/M | tau* | Young (over) | Daly (over) | K* | measured "
                  "best K | K within the best's CI | Phi(K*) sim | Phi(K*) exact | Phi(Young K) sim |"
                  " Phi(Young K) exact |", "|" + "---|" * 14]
        for key in dict.fromkeys((int(r["workers"]), float(r["worker_mtbf"]),
                                  float(r["checkpoint_cost"])) for r in inter):
            rs = sorted((r for r in inter if (int(r["workers"]), float(r["worker_mtbf"]),
                                               float(r["checkpoint_cost"])) == key),
                        key=lambda r: int(r["checkpoint_every"]))
            n, Mw, C = key
            M = Mw / n
            tau, yo, da = (A.optimal_checkpoint_interval(C, M), A.young_interval(C, M),
                           A.daly_interval(C, M))
            kstar = A.best_checkpoint_every(1.0, C, M)
            ky = max(1, round(yo))
            best = min(rs, key=lambda r: float(r["time_per_work_mean"]))
            near = [int(r["checkpoint_every"]) for r in rs
                    if float(r["time_per_work_low"]) <= float(best["time_per_work_high"])]
            by_k = {int(r["checkpoint_every"]): r for r in rs}
            lines.append(
                f"| {n} | {Mw:g} | {C:g} | {C / M:.3g} | {tau:.4g} | {yo:.4g} (+{100 * (yo / tau - 1):.1f} %) "
                f"| {da:.4g} ({100 * (da / tau - 1):+.2f} %) | {kstar} | {int(best['checkpoint_every'])} "
                f"| {min(near)}-{max(near)} | {_ci(by_k[kstar], 'time_per_work')} | "
                f"{A.checkpoint_time_per_work(kstar, C, 0, M):.4g} | "
                f"{_ci(by_k[ky], 'time_per_work') if ky in by_k else '-'} | "
                f"{A.checkpoint_time_per_work(ky, C, 0, M):.4g} |")
        inside = rejected = 0
        for r in inter:
            K, C = int(r["checkpoint_every"]), float(r["checkpoint_cost"])
            M = float(r["worker_mtbf"]) / int(r["workers"])
            mean, se = float(r["time_per_work_mean"]), float(r["time_per_work_se"])
            inside += abs(mean - A.checkpoint_time_per_work(K, C, 0, M)) <= 4 * se
            # wrong model: checkpoints (and restarts) immune to failures
            rejected += abs(mean - (M * math.expm1(K / M) + C) / K) > 4 * se
        lines += ["", f"Daly's exact Phi(K) within 4 SE of the DES at {inside} of {len(inter)} "
                  f"(n, MTBF, C, K) points; the model with checkpoints immune to failures, "
                  f"(M (e^(K/M) - 1) + C)/K, is rejected at {rejected} of them.", ""]
        # Young's K against K*, paired: every point draws replication r from the same streams
        by_point: dict[int, dict[int, float]] = {}
        for rec in results.records:
            if not rec.get("error"):
                by_point.setdefault(int(rec["point"]), {})[int(rec["replication"])] = \
                    float(rec["time_per_work"])
        params = results.points
        lines += ["Young's K against K*, paired by replication (the same failure streams):", "",
                  "| n | C/M | K*, Young K | Phi(Young K) - Phi(K*) (mean, SE) | z |",
                  "|---|---|---|---|---|"]
        for key in dict.fromkeys((int(r["workers"]), float(r["worker_mtbf"]),
                                  float(r["checkpoint_cost"])) for r in inter):
            n, Mw, C = key
            M = Mw / n
            kstar = A.best_checkpoint_every(1.0, C, M)
            ky = max(1, round(A.young_interval(C, M)))
            idx = {int(p["checkpoint_every"]): i for i, p in enumerate(params)
                   if p.get("part") == "interval" and (int(p["workers"]), float(p["worker_mtbf"]),
                                                       float(p["checkpoint_cost"])) == key}
            if ky == kstar or ky not in idx or kstar not in idx:
                continue
            a, b = by_point.get(idx[ky], {}), by_point.get(idx[kstar], {})
            d = np.array([a[r] - b[r] for r in sorted(set(a) & set(b))])
            se = float(d.std(ddof=1) / math.sqrt(d.size))
            lines.append(f"| {n} | {C / M:.3g} | {kstar}, {ky} | {d.mean():.4g}, {se:.3g} | "
                         f"{d.mean() / se:.1f} |")
        lines.append("")
        for r in inter:
            r["setting"] = f"n={int(r['workers'])} M_w={float(r['worker_mtbf']):g} C={float(r['checkpoint_cost']):g}"
        plot_sweep(inter, "checkpoint_every", "time_per_work", Path(out_dir) / "time_per_work.png",
                   group="setting", xlabel="checkpoint every K steps (step = 1)",
                   ylabel="wall time per unit of work", title="Phi(K): DES against the exact optimum")
    wall = [r for r in rows if r["part"] == "wall"]
    if wall:
        lines += [f"## Efficiency wall (R = 0, M_w / C = {WALL_RATIO:.1f})", "",
                  "| n | C/M | exact best efficiency (tau*) | exact at K* | simulated at K* |",
                  "|---|---|---|---|---|"]
        for r in sorted(wall, key=lambda r: int(r["workers"])):
            n = int(r["workers"])
            M = WALL_RATIO / n
            K, step = int(r["checkpoint_every"]), float(r["step"])
            lines.append(f"| {n} | {1 / M:.4g} | {A.optimal_checkpoint_efficiency(1.0, 0, M):.4f} | "
                         f"{A.checkpoint_efficiency(K * step, 1.0, 0, M):.4f} | {_ci(r, 'efficiency')} |")
        lines.append("")
    flaky = [r for r in rows if r["part"] == "flaky"]
    if flaky:
        lines += [f"## Flaky workers at the wall (n = {FLAKY_WORKERS}, {FLAKY_FRACTION:.4g} of them r "
                  "times as flaky)", "",
                  "| r | job rate multiple | exact best efficiency | exact at K* | simulated at K* |",
                  "|---|---|---|---|---|"]
        for r in sorted(flaky, key=lambda r: float(r["flaky_ratio"])):
            p = {k: r[k] for k in ("part", "workers", "worker_mtbf", "flaky_fraction", "flaky_ratio")}
            p = {**p, "workers": int(p["workers"]), "worker_mtbf": float(p["worker_mtbf"]),
                 "flaky_fraction": float(p["flaky_fraction"]), "flaky_ratio": float(p["flaky_ratio"])}
            M = job_mtbf(p)
            K, step = int(r["checkpoint_every"]), float(r["step"])
            lines.append(f"| {float(r['flaky_ratio']):g} | {1 + p['flaky_fraction'] * (p['flaky_ratio'] - 1):.3g} | "
                         f"{A.optimal_checkpoint_efficiency(1.0, 0, M):.4f} | "
                         f"{A.checkpoint_efficiency(K * step, 1.0, 0, M):.4f} | {_ci(r, 'efficiency')} |")
        lines.append("")
    tr = [r for r in rows if r["part"] == "trace"]
    if tr:
        lines += ["## Real traces (n = 8, C = 5, the exponential model's job MTBF = 100)", "",
                  "The exponential model: Poisson job failures at the trace's mean time between "
                  "them (100 time units) and restart periods of the trace's mean job outage D: "
                  "Phi(K) = (e^{(K + C)/M} - 1)(M + D)/K.", "",
                  "| trace | all-up periods: count, CV; mean outage D | K* (exponential) | measured best K | K within "
                  "the best's CI | Phi(K*) sim | Phi(K*) exponential model | Phi(best) sim |",
                  "|---|---|---|---|---|---|---|---|"]
        for name in dict.fromkeys(r["trace"] for r in tr):
            rs = sorted((r for r in tr if r["trace"] == name), key=lambda r: int(r["checkpoint_every"]))
            mean_up, cv, count, mean_down = trace_job_mtbf(name, TRACE_WORKERS)
            D = mean_down / float(rs[0]["speedup"])
            C = TRACE_COST_FRACTION * 100.0
            kstar = A.best_checkpoint_every(1.0, C, 100.0)
            best = min(rs, key=lambda r: float(r["time_per_work_mean"]))
            near = [int(r["checkpoint_every"]) for r in rs
                    if float(r["time_per_work_low"]) <= float(best["time_per_work_high"])]
            at = min(rs, key=lambda r: abs(int(r["checkpoint_every"]) - kstar))
            Kr = int(at["checkpoint_every"])
            lines.append(f"| {name} | {count}, {cv:.2f}; D = {D:.3g} | {kstar} (nearest run: "
                         f"{int(at['checkpoint_every'])}) | {int(best['checkpoint_every'])} | "
                         f"{min(near)}-{max(near)} | {_ci(at, 'time_per_work')} | "
                         f"{math.expm1((Kr + C) / 100.0) * (100.0 + D) / Kr:.4g} | "
                         f"{_ci(best, 'time_per_work')} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    (Path(out_dir) / "checkpoint_interval.md").write_text(text)
    print(text)


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
