"""Study A by simulation: should a pipeline replicate stages or skip them?

Every claim of Study A (docs/studies.md) is checked by running the pipeline DES in its
snapshot regime (zero compute and transfer time, stationary failures, drop at
once when the budget is spent), side by side with the exact value from
:mod:`sim.analytic`:

* the shared-domain floor at ``L = 48, rho = 1e-3``: with ``s = 0`` the drop
  rate stays above 4.69 % whatever ``r``, so no ``r`` reaches 1 %;
* with ``s = 1`` and ``a = 0.9``, ``r = 3`` is enough (drop 0.424 %) and
  ``r = 2`` is not;
* at ``a = 0.9`` the workers for a 1e-3 drop rate fall from 240 (``r = 5,
  s = 0``) to 96 (``r = 2, s = 4``): each chosen design is simulated, and so is
  the next smaller ``r`` that must miss the target;
* the kappa sweep (:data:`sim.analytic.STUDY_A_KAPPA_SWEEP`): at each kappa the
  cost-optimal ``(r, s)`` and the best no-skip design are simulated; their
  quality mass ``E[Q; delivered]`` gives the simulated cost ``L r / mass`` and
  the gain ``noskip_cost / cost`` with a delta-method interval.

Intervals come from independent replications (successive microbatches are
correlated in time). A claim *agrees* when the exact value lies in the 95 %
interval. Some probabilities are too small for plain simulation to resolve
tightly in ``--quick`` mode; the note column says so.

This is an ordinary experiment file (stored, resumable, any executor); the
``STUDY`` marker makes ``dtsim reproduce`` run it and put :func:`claims` in
its report. Each simulated point keeps the seed the study always used
(``seed_offset`` = 1000 per claim point in order, then ``1000 (N + 1) +
100 s + r`` for the figure points), so its tables are bit-identical to the
standalone program it replaces.

Run::

    dtsim run experiments/replicate_or_skip.py --quick
    dtsim run experiments/replicate_or_skip.py --executor local

Figures (PNG, in the results folder): drop rate vs r for s = 0..4 with the
floors; workers needed vs skip budget; optimal (r, s) and gain vs kappa. The
claim table is written to ``claims.md``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from scipy import stats

from sim import analytic
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import (
    Estimate,
    format_interval,
    format_number,
    judge_optimal,
    markdown_table,
    summarize,
)

# ----------------------------------------------------------------------------- parameters

NAME = "replicate_or_skip"
STUDY = "A"
TITLE = "Study A: should a pipeline replicate stages or skip them?"

STAGES = 48
AVAILABILITY = 0.9
FLOOR_RHO = 1e-3            # the floor claims
DESIGN_RHO = 0.0            # the 240 vs 96 claim ("rho at most about 1e-5")
DESIGN_RHO_MAX = 1e-5
TARGET_FLOOR = 0.01         # "no r reaches 1 %"
TARGET_DESIGN = 1e-3        # "workers for a 1e-3 drop rate"
FLOOR_R = 8                 # a large r where the floor dominates
SWEEP = analytic.STUDY_A_KAPPA_SWEEP
#: Simulation regime: worker and domain outages last 1 time unit on average;
#: microbatches arrive every 1/RATE.
MEAN_DOWNTIME = 1.0
RATE = 4.0
SEED = 0

#: (microbatches per replication, replications) per kind of check.
FULL_BUDGET = {"common": (20_000, 10), "rare": (100_000, 10), "sweep": (5_000, 8),
               "figure": (10_000, 8)}
QUICK_BUDGET = {"common": (4_000, 6), "rare": (12_000, 6), "sweep": (1_500, 5),
                "figure": (2_000, 4)}


# ----------------------------------------------------------------------------- model


def model(config: PipelineConfig, streams: Any) -> dict[str, Any]:
    """One replication of the pipeline DES (:func:`sim.pipeline.des_pipeline_model`).

    Its ``microbatches`` metric is renamed ``microbatches_run``: ``microbatches``
    is a point parameter.
    """
    metrics = dict(des_pipeline_model(config, streams))
    if "microbatches" in metrics:
        metrics["microbatches_run"] = metrics.pop("microbatches")
    return metrics


def config(replicas: int, skip_budget: int, domain_outage: float, microbatches: int,
           skip_penalty: float = 0.0, stages: int = STAGES,
           availability: float = AVAILABILITY) -> PipelineConfig:
    """The snapshot-regime pipeline of Study A at one design point."""
    return PipelineConfig(
        stages=stages, replicas=replicas, skip_budget=skip_budget, availability=availability,
        domain_outage=domain_outage, skip_penalty=skip_penalty, mean_downtime=MEAN_DOWNTIME,
        domain_downtime=MEAN_DOWNTIME, microbatches=microbatches, rate=RATE,
    )


def ratio_estimate(num: Estimate, den: Estimate, factor: float) -> Estimate:
    """``factor * num / den`` with a delta-method normal interval (independent inputs)."""
    value = factor * num.mean / den.mean
    rel = math.hypot(num.se / num.mean, den.se / den.mean)
    se = abs(value) * rel
    n = min(num.n, den.n)
    h = float(stats.t.ppf(0.975, max(n - 1, 1))) * se
    return Estimate(value, se, value - h, value + h, n)


def familywise_contains(est: Estimate, exact: float, claims: int, level: float = 0.95) -> bool:
    """Whether ``exact`` lies in the Bonferroni interval of a table of ``claims`` estimates.

    Each row's 95% interval misses a true value 5% of the time, so a table of
    20 correct rows would show a miss more often than not; the table's
    agreement uses the family-wise level (``1 - (1 - level) / claims`` per row).
    """
    if est.n < 2 or not math.isfinite(est.se):
        return False
    t = float(stats.t.ppf(1 - (1 - level) / (2 * claims), est.n - 1))
    return abs(est.mean - exact) <= t * est.se


def resolution_note(est: Estimate, exact: float) -> str:
    """Say when the interval is too wide to pin the probability."""
    if est.n == 0 or not math.isfinite(est.half_width):
        return "not simulated"
    if exact > 0 and est.half_width > 0.5 * exact:
        return "interval wide: simulation barely resolves this probability"
    return ""


# ----------------------------------------------------------------------------- the points


def _design(s: int) -> tuple[Any, Any]:
    return (analytic.min_replicas(STAGES, AVAILABILITY, DESIGN_RHO, s, TARGET_DESIGN),
            analytic.min_replicas(STAGES, AVAILABILITY, DESIGN_RHO_MAX, s, TARGET_DESIGN))


def plan(budget: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """Every simulated point of the study, in the order the claims use them.

    Each entry has ``role`` (what the claims do with it) and ``point`` (the
    sweep point: config fields, ``replications`` and ``seed_offset``).
    """
    entries: list[dict[str, Any]] = []

    def add(role: Any, kind: str, replicas: int, skip_budget: int, rho: float,
            kappa: float = 0.0, offset: int | None = None) -> None:
        n, reps = budget[kind]
        point = {"replicas": replicas, "skip_budget": skip_budget, "domain_outage": rho,
                 "skip_penalty": kappa, "microbatches": n, "replications": reps,
                 "seed_offset": 1000 * (len(entries) + 1) if offset is None else offset}
        entries.append({"role": role, "point": point})

    add("floor", "common", FLOOR_R, 0, FLOOR_RHO)
    add("s1_r3", "common", 3, 1, FLOOR_RHO)
    add("s1_r2", "common", 2, 1, FLOOR_RHO)
    for s in (0, 4):
        r = _design(s)[0].replicas
        add(("design", s), "rare", r, s, DESIGN_RHO)
        add(("design_less", s), "common", r - 1, s, DESIGN_RHO)
    noskip: set[int] = set()
    rho = SWEEP["domain_outage"]
    for kappa, opt in _kappa_sweep():
        add(("kappa", kappa), "sweep", opt.replicas, opt.skip_budget, rho, kappa)
        if opt.noskip_replicas not in noskip:
            noskip.add(opt.noskip_replicas)
            add(("noskip", opt.noskip_replicas), "sweep", opt.noskip_replicas, 0, rho)
    base = 1000 * (len(entries) + 1)
    for s in range(5):
        for r in range(1, 9):
            if analytic.drop_probability(STAGES, r, s, AVAILABILITY, FLOOR_RHO) < 3e-3:
                continue  # below what the figure budget resolves
            add(("figure", s, r), "figure", r, s, FLOOR_RHO, offset=base + 100 * s + r)
    # the designs next to each kappa optimum, simulated so that "optimal" is judged on evidence
    for kappa, opt in _kappa_sweep():
        for r, s in _neighbours(opt.replicas, opt.skip_budget):
            add(("neighbour", kappa, r, s), "sweep", r, s, rho, kappa)
    return entries


def _neighbours(r: int, s: int) -> list[tuple[int, int]]:
    """The designs one replica or one skip away from ``(r, s)``."""
    out = [(r, s - 1), (r, s + 1), (r - 1, s), (r + 1, s)]
    return [(a, b) for a, b in out if 1 <= a <= SWEEP["max_replicas"] and 0 <= b <= STAGES]


def _kappa_sweep() -> list[tuple[float, Any]]:
    return list(analytic.kappa_sweep(
        SWEEP["stages"], SWEEP["availability"], SWEEP["domain_outage"],
        SWEEP["skip_penalties"], SWEEP["penalty"], SWEEP["max_replicas"]))


BASE = config(1, 0, 0.0, 1)
POINTS = [e["point"] for e in plan(FULL_BUDGET)]
REPLICATIONS = 10
#: Metrics that are probabilities (per-microbatch rates): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None, "delivered_rate": None}
QUICK = {"POINTS": [e["point"] for e in plan(QUICK_BUDGET)]}


# ----------------------------------------------------------------------------- claims


def _estimates(results: Any) -> dict[Any, dict[str, Estimate]]:
    """Role -> the estimates of its point (raises when a task failed)."""
    if results.failed():
        r = results.failed()[0]
        raise RuntimeError(f"{len(results.failed())} tasks failed, first (point {r['point']}): "
                           f"{r['error']}")
    entries = plan(FULL_BUDGET)
    keys = ("replicas", "skip_budget", "domain_outage", "skip_penalty")
    if len(entries) != len(results.points) or any(
            any(e["point"][k] != p.get(k) for k in keys)
            for e, p in zip(entries, results.points, strict=True)):
        raise RuntimeError("these results are not of this file's points (was POINTS edited?)")
    return {e["role"]: summarize(results.records_of(i), ["drop_rate", "quality_mass", "mean_quality"])
            for i, e in enumerate(entries)}


def evaluate(results: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The claim rows and the kappa-sweep rows (for its figure) from the results."""
    est_of = _estimates(results)
    rows: list[dict[str, Any]] = []

    def add(claim: str, exact: Any, est: Any, agrees: bool = True, note: str = "", *,
            params: str, rule: str = "", familywise: bool = True) -> None:
        # ``agrees`` carries the claim's own condition (stated in ``rule``); the interval
        # test is done at the end, at the table's family-wise level, when ``familywise``.
        if not note and isinstance(est, Estimate):
            note = resolution_note(est, exact)
        rows.append({"claim": claim, "exact": exact if isinstance(exact, str) else float(exact),
                     "estimate": est, "agrees": bool(agrees), "note": note, "params": params,
                     "rule": rule, "_familywise": familywise})

    def where(r: int, s: int, rho: float, kappa: float | None = None) -> str:
        text = f"L={L}, r={r}, s={s}, a={a}, rho={rho:g}"
        return text + (f", kappa={kappa:g}" if kappa is not None else "")

    L, a = STAGES, AVAILABILITY
    # 1. The shared-domain floor: s = 0, rho = 1e-3.
    floor = analytic.floor_drop_rate(L, FLOOR_RHO)
    est = est_of["floor"]["drop_rate"]
    add(f"floor: s=0, rho={FLOOR_RHO:g}, r={FLOOR_R}: drop -> 1-(1-rho)^L = 4.69%",
        analytic.drop_probability(L, FLOOR_R, 0, a, FLOOR_RHO), est,
        note=f"floor itself {floor:.4%}", params=where(FLOOR_R, 0, FLOOR_RHO))
    design = analytic.min_replicas(L, a, FLOOR_RHO, 0, TARGET_FLOOR)
    add(f"no r reaches {TARGET_FLOOR:.0%} at s=0 (simulated lower bound > 1% at r={FLOOR_R})",
        design.floor, est, agrees=(not design.feasible) and est.low > TARGET_FLOOR,
        note=design.reason.split(";")[0], params=where(FLOOR_R, 0, FLOOR_RHO),
        rule=f"no r feasible in the exact law, and the simulated interval lies above "
             f"{TARGET_FLOOR:.0%}")
    # 2. s = 1 makes r = 3 enough.
    d1 = analytic.min_replicas(L, a, FLOOR_RHO, 1, TARGET_FLOOR)
    est3 = est_of["s1_r3"]["drop_rate"]
    add(f"s=1, rho={FLOOR_RHO:g}: r={d1.replicas} is enough (drop 0.424% <= 1%)",
        d1.drop_rate, est3,
        agrees=d1.replicas == 3 and est3.high < TARGET_FLOOR, params=where(3, 1, FLOOR_RHO),
        rule=f"exact smallest r is 3, and the simulated interval lies below {TARGET_FLOOR:.0%}")
    est2 = est_of["s1_r2"]["drop_rate"]
    exact2 = analytic.drop_probability(L, 2, 1, a, FLOOR_RHO)
    add("s=1, rho=1e-3: r=2 is not (drop > 1%)", exact2, est2,
        agrees=est2.low > TARGET_FLOOR, params=where(2, 1, FLOOR_RHO),
        rule=f"the simulated interval lies above {TARGET_FLOOR:.0%}")
    # 3. 240 vs 96 workers for a 1e-3 drop rate.
    for s in (0, 4):
        d, d_max = _design(s)
        r = d.replicas
        e_ok = est_of[("design", s)]["drop_rate"]
        add(f"a=0.9, s={s}: r={r} ({d.workers} workers) reaches 1e-3 "
            f"(same at rho=1e-5: {d_max.workers} workers)",
            d.drop_rate, e_ok,
            agrees=(d.workers == d_max.workers == (240 if s == 0 else 96))
            and e_ok.high <= TARGET_DESIGN,
            note=resolution_note(e_ok, d.drop_rate)
            or (f"exact drop at rho=1e-5: {d_max.drop_rate:.3g} (too close to 1e-3 "
                "for simulation to separate)" if s == 0 else ""),
            params=where(r, s, DESIGN_RHO) + f" (simulated at rho={DESIGN_RHO:g}; the study's "
                   f"count holds for rho up to {DESIGN_RHO_MAX:g})",
            rule=f"exact worker counts equal at rho={DESIGN_RHO:g} and {DESIGN_RHO_MAX:g}, and the "
                 f"simulated interval's upper end <= {TARGET_DESIGN:g}")
        exact_less = analytic.drop_probability(L, r - 1, s, a, DESIGN_RHO)
        e_less = est_of[("design_less", s)]["drop_rate"]
        add(f"a=0.9, s={s}: r={r - 1} misses 1e-3", exact_less, e_less,
            agrees=e_less.low > TARGET_DESIGN, params=where(r - 1, s, DESIGN_RHO),
            rule=f"the simulated interval lies above {TARGET_DESIGN:g}")
    # 4. The kappa sweep.
    sweep_rows = []
    rho_k = SWEEP["domain_outage"]
    ties = ("ties: costs within a relative 1e-9 of the minimum are equal and go to the fewest "
            "workers, then the smallest s (the cost never rises with s, so a looser tolerance "
            "picks a smaller s)")

    def cost_of(mass: Estimate, r: int) -> Estimate:
        return ratio_estimate(Estimate(1.0, 0.0, 1.0, 1.0, mass.n), mass, L * r)

    for kappa, opt in _kappa_sweep():
        m = est_of[("kappa", kappa)]["quality_mass"]
        m0 = est_of[("noskip", opt.noskip_replicas)]["quality_mass"]
        cost = cost_of(m, opt.replicas)
        gain = ratio_estimate(m, m0, opt.noskip_replicas / opt.replicas)
        here = where(opt.replicas, opt.skip_budget, rho_k, kappa)
        add(f"kappa={kappa:g}: cost L*r/E[Q; delivered] at the optimal (r, s) = "
            f"({opt.replicas}, {opt.skip_budget})", opt.cost, cost, params=here)
        costs = {f"({opt.replicas}, {opt.skip_budget})": cost}
        for r, s in _neighbours(opt.replicas, opt.skip_budget):
            costs[f"({r}, {s})"] = cost_of(est_of[("neighbour", kappa, r, s)]["quality_mass"], r)
        verdict = judge_optimal(f"({opt.replicas}, {opt.skip_budget})", costs)
        add(f"kappa={kappa:g}: (r, s) = ({opt.replicas}, {opt.skip_budget}) is cost-optimal "
            "among its simulated neighbours", opt.cost, cost, agrees=bool(verdict.holds),
            params=here + "; neighbours (r, s): " + ", ".join(k for k in costs if k != next(iter(costs))),
            rule=verdict.rule + "; " + ties, familywise=False,
            note="neighbour costs " + ", ".join(f"{k} {format_number(e.mean)}"
                                                for k, e in list(costs.items())[1:]))
        add(f"kappa={kappa:g}: gain over best no-skip (r={opt.noskip_replicas}, s=0)",
            opt.gain, gain, params=here + f"; no-skip r={opt.noskip_replicas}")
        sweep_rows.append({"kappa": kappa, "replicas": opt.replicas,
                           "skip_budget": opt.skip_budget, "gain": opt.gain,
                           "gain_low": gain.low, "gain_high": gain.high, "gain_sim": gain.mean})
    gains = [r["gain"] for r in sweep_rows]
    first, last = sweep_rows[0], sweep_rows[-1]
    sim_text = (format_interval(first["gain_sim"], first["gain_low"], first["gain_high"]) + " -> "
                + format_interval(last["gain_sim"], last["gain_low"], last["gain_high"]))
    ends_inside = (first["gain_low"] <= gains[0] <= first["gain_high"]
                   and last["gain_low"] <= gains[-1] <= last["gain_high"])
    add("gain falls from about 2.9x (small kappa) to about 1.08x (large kappa)",
        f"{format_number(gains[0])} -> {format_number(gains[-1])}", sim_text,
        agrees=round(gains[0], 1) == 2.9 and round(gains[-1], 2) == 1.08
        and all(g0 >= g1 for g0, g1 in zip(gains, gains[1:], strict=False)) and ends_inside,
        note=f"exact gains {', '.join(format_number(g) for g in gains)}",
        params=f"L={L}, a={a}, rho={rho_k:g}, kappa {first['kappa']:g} -> {last['kappa']:g}",
        rule="exact gains round to 2.9 and 1.08 and fall with kappa, and each end lies in its "
             "simulated 95% interval", familywise=False)
    n_claims = sum(r["_familywise"] for r in rows)
    fw = (f"exact inside the table's family-wise 95% interval (Bonferroni over {n_claims} "
          "claims)")
    for r in rows:
        est = r["estimate"]
        if not r.pop("_familywise"):
            continue
        r["rule"] = fw + (f"; and {r['rule']}" if r["rule"] else "")
        inside = familywise_contains(est, r["exact"], n_claims)
        if inside and not est.contains(r["exact"]):
            r["note"] = ((r["note"] + "; ") if r["note"] else "") + (
                f"outside its own 95% CI, inside the table's family-wise 95% interval "
                f"({n_claims} claims)")
        r["agrees"] = r["agrees"] and inside
    return rows, sweep_rows


def claims(results: Any) -> list[dict[str, Any]]:
    """One row per claim: ``claim``, ``exact``, ``estimate`` (or None), ``agrees``, ``note``."""
    return evaluate(results)[0]


def analyse(results: Any, out_dir: Path) -> None:
    """Draw the three figures and write ``claims.md`` into the results folder."""
    from sim.plotting import plot_drop_vs_replicas, plot_kappa_sweep, plot_workers_vs_skip

    rows, sweep_rows = evaluate(results)
    out_dir = Path(out_dir)
    cols = ["claim", "parameters", "exact", "simulated (95% CI)", "holds", "rule", "note"]
    table = [dict(zip(cols, [
        r["claim"], r["params"], format_number(r["exact"]),
        r["estimate"].text(format_number) if isinstance(r["estimate"], Estimate)
        else format_number(r["estimate"]),
        "yes" if r["agrees"] else "NO", r["rule"], r["note"]], strict=True)) for r in rows]
    (out_dir / "claims.md").write_text(f"# {TITLE}\n\n" + markdown_table(table, cols, fmt=str) + "\n")
    L, a, rho = STAGES, AVAILABILITY, FLOOR_RHO
    est_of = _estimates(results)
    curves = []
    for s in range(5):
        exact = [analytic.drop_probability(L, r, s, a, rho) for r in range(1, 9)]
        sim_pts = [(r, est_of[("figure", s, r)]["drop_rate"]) for r in range(1, 9)
                   if ("figure", s, r) in est_of]
        floor = analytic.drop_probability_q(L, rho, s)
        curves.append({"skip_budget": s, "replicas": list(range(1, 9)), "exact": exact,
                       "simulated": sim_pts, "floor": floor})
    plot_drop_vs_replicas(curves, out_dir / "drop_vs_replicas.png", stages=L,
                          availability=a, domain_outage=rho)
    series = []
    for rho_w in (0.0, 1e-5, 1e-3):
        pts = []
        for s in range(0, 13):
            d = analytic.min_replicas(L, a, rho_w, s, TARGET_DESIGN)
            pts.append((s, d.workers))
        series.append({"domain_outage": rho_w, "points": pts})
    plot_workers_vs_skip(series, out_dir / "workers_vs_skip.png", stages=L,
                         availability=a, target_drop=TARGET_DESIGN)
    plot_kappa_sweep(sweep_rows, out_dir / "kappa_sweep.png", stages=L, availability=a,
                     domain_outage=SWEEP["domain_outage"])


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
