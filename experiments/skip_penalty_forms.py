"""Stress test 6: skip penalty forms -- how the cost-optimal design moves with the quality law.

Study A charges a microbatch that skipped ``k`` stages a multiplicative
penalty, quality ``(1 - kappa)**k``, and finds the design ``(r, s)`` that
minimises workers per unit of quality-weighted goodput,
``cost(r, s) = L r / E[quality(K); K <= s]``. This experiment swaps the
quality law and re-optimises (:func:`sim.analytic.optimal_design` with a
callable penalty), over the study's kappa sweep:

``multiplicative``  ``(1 - kappa)**k`` (the study's);
``additive``        ``max(0, 1 - kappa k)``: the loss grows linearly and reaches zero;
``threshold``       a hard quality threshold: full quality while the multiplicative
                    quality stays at or above ``Q_MIN`` (``k <= k* = floor(log Q_MIN / log(1 - kappa))``),
                    worthless beyond (as good as dropped).

Each optimal design (and the best no-skip design, the gain's reference) is
simulated with the snapshot pipeline DES: its quality mass gives the simulated
cost ``L r / mass`` (95 % interval by the delta method), against the exact cost.

Run::

    dtsim run experiments/skip_penalty_forms.py --quick
    python experiments/skip_penalty_forms.py        # full run

Writes ``penalties.png``, ``penalties.csv`` and ``penalties.md`` and prints the finding.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import sim.runner
from sim import analytic
from sim.errors import check_choice, check_int, check_positive, check_probability
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "skip_penalty_forms"

FORMS = ("multiplicative", "additive", "threshold")
#: Quality below which a microbatch is worthless under the threshold form.
Q_MIN = 0.5
#: Study A's kappa sweep point: L = 48, a = 0.9, rho = 1e-3.
STAGES = analytic.STUDY_A_KAPPA_SWEEP["stages"]
AVAILABILITY = analytic.STUDY_A_KAPPA_SWEEP["availability"]
DOMAIN_OUTAGE = analytic.STUDY_A_KAPPA_SWEEP["domain_outage"]
KAPPAS = tuple(analytic.STUDY_A_KAPPA_SWEEP["skip_penalties"])
MAX_REPLICAS = 16


@dataclass(frozen=True)
class Threshold:
    """Hard quality threshold: quality 1 for ``k <= k*`` skips, 0 beyond (a picklable callable).

    ``k* = floor(log(q_min) / log(1 - kappa))``: the most skips whose
    multiplicative quality ``(1 - kappa)**k`` stays at or above ``q_min``.
    """

    kappa: float
    q_min: float = Q_MIN

    @property
    def max_skips(self) -> int:
        """``k*``."""
        if self.kappa <= 0:
            return 10**9
        if self.kappa >= 1:
            return 0
        return int(math.floor(math.log(self.q_min) / math.log1p(-self.kappa) + 1e-12))

    def __call__(self, k: int) -> float:
        return 1.0 if k <= self.max_skips else 0.0


def penalty_of(form: str, kappa: float) -> Any:
    """The ``penalty`` argument of :mod:`sim.analytic` / :class:`PipelineConfig` for a form."""
    return Threshold(kappa) if form == "threshold" else form


def optimum(form: str, kappa: float) -> analytic.OptimalDesign:
    """The cost-optimal design for a form and kappa."""
    return analytic.optimal_design(STAGES, AVAILABILITY, DOMAIN_OUTAGE, kappa,
                                   penalty_of(form, kappa), MAX_REPLICAS)


@dataclass(frozen=True)
class PenaltyConfig:
    """One design ``(r, s)`` under one penalty form (validated on construction).

    Parameters
    ----------
    form : {"multiplicative", "additive", "threshold"}
    kappa : float
        Per-skip penalty.
    replicas, skip_budget : int
        The design.
    role : str
        ``optimal`` or ``noskip`` (a label for the analysis).
    microbatches : int
        Microbatches per replication.
    rate : float
        Arrival rate (outages last one time unit on average).
    """

    form: str = "multiplicative"
    kappa: float = 0.1
    replicas: int = 2
    skip_budget: int = 6
    role: str = "optimal"
    microbatches: int = 5_000
    rate: float = 4.0

    def __post_init__(self) -> None:
        check_choice("form", self.form, FORMS)
        check_probability("kappa", self.kappa)
        check_choice("role", self.role, ("optimal", "noskip"))
        check_int("microbatches", self.microbatches, low=1)
        check_positive("rate", self.rate)
        self.pipeline()

    def pipeline(self) -> PipelineConfig:
        """The snapshot pipeline of this design."""
        return PipelineConfig(
            stages=STAGES, replicas=self.replicas, skip_budget=self.skip_budget,
            availability=AVAILABILITY, domain_outage=DOMAIN_OUTAGE, skip_penalty=self.kappa,
            penalty=penalty_of(self.form, self.kappa), microbatches=self.microbatches,
            rate=self.rate,
        )


def design_points(kappas: tuple[float, ...] = KAPPAS) -> list[dict[str, Any]]:
    """The optimal and the best no-skip design of every (form, kappa)."""
    pts = []
    for form in FORMS:
        for k in kappas:
            o = optimum(form, k)
            pts.append({"form": form, "kappa": k, "replicas": o.replicas,
                        "skip_budget": o.skip_budget, "role": "optimal"})
            pts.append({"form": form, "kappa": k, "replicas": o.noskip_replicas,
                        "skip_budget": 0, "role": "noskip"})
    return pts


BASE = PenaltyConfig()
POINTS = design_points()
REPLICATIONS = 8
#: Metrics that are probabilities (a per-microbatch rate): intervals inside [0, 1] in summary.csv.
RATES = {"drop_rate": None}
SEED = 6
QUICK = {
    "BASE": {"microbatches": 1_000},
    "POINTS": design_points((0.05, 0.4)),
    "REPLICATIONS": 3,
}


# ----------------------------------------------------------------------------- model


def model(config: PenaltyConfig, streams: Streams) -> dict[str, float]:
    """One replication: quality mass and drop rate of the design."""
    m = des_pipeline_model(config.pipeline(), streams)
    return {"quality_mass": m["quality_mass"], "drop_rate": m["drop_rate"],
            "mean_skipped": m["mean_skipped"]}


# ----------------------------------------------------------------------------- analysis


def exact_mass(config: PenaltyConfig) -> float:
    """Exact quality mass ``E[quality(K); K <= s]`` of a design."""
    q = analytic.stage_outage(AVAILABILITY, config.replicas, DOMAIN_OUTAGE)
    return analytic.quality_mass(STAGES, q, config.skip_budget, config.kappa,
                                 penalty_of(config.form, config.kappa))


def table(results: sim.runner.SweepResult) -> list[dict[str, Any]]:
    """One row per (form, kappa): optimal design, simulated and exact cost and gain."""
    est: dict[tuple[str, float, str], dict[str, Any]] = {}
    for params, recs in results.point_records():
        cfg = replace(BASE, **params)
        m = mean_ci([r["quality_mass"] for r in recs])
        workers = STAGES * cfg.replicas
        cost = workers / m.mean
        cost_se = workers * m.se / m.mean**2  # delta method
        h = (m.high - m.mean) / m.se if m.se > 0 else 0.0  # the t quantile
        est[(cfg.form, cfg.kappa, cfg.role)] = {
            "cfg": cfg, "cost": cost, "cost_se": cost_se, "cost_low": cost - h * cost_se,
            "cost_high": cost + h * cost_se, "exact_cost": workers / exact_mass(cfg),
            "replications": len(recs),
        }
    rows = []
    for form in FORMS:
        for k in sorted({key[1] for key in est if key[0] == form}):
            o, n = est.get((form, k, "optimal")), est.get((form, k, "noskip"))
            if o is None or n is None:
                continue
            gain = n["cost"] / o["cost"]
            rel = math.hypot(o["cost_se"] / o["cost"], n["cost_se"] / n["cost"])
            exact_gain = n["exact_cost"] / o["exact_cost"]
            row = {
                "form": form, "kappa": k, "replicas": o["cfg"].replicas,
                "skip_budget": o["cfg"].skip_budget, "workers": STAGES * o["cfg"].replicas,
                "noskip_replicas": n["cfg"].replicas,
                "cost": o["cost"], "cost_low": o["cost_low"], "cost_high": o["cost_high"],
                "exact_cost": o["exact_cost"],
                "cost_in_interval": bool(o["cost_low"] <= o["exact_cost"] <= o["cost_high"]),
                "degenerate": bool(o["cost_se"] == 0),
                "gain": gain, "gain_low": gain * (1 - 1.96 * rel), "gain_high": gain * (1 + 1.96 * rel),
                "exact_gain": exact_gain,
                "threshold_max_skips": Threshold(k).max_skips if form == "threshold" else None,
                "replications": o["replications"],
            }
            row["gain_in_interval"] = bool(row["gain_low"] <= exact_gain <= row["gain_high"])
            rows.append(row)
    return rows


COLUMNS = ["form", "kappa", "replicas", "skip_budget", "workers", "noskip_replicas", "cost",
           "cost_low", "cost_high", "exact_cost", "gain", "gain_low", "gain_high", "exact_gain",
           "threshold_max_skips"]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figure, table and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    rows = table(results)
    title = "Skip penalty forms: cost-optimal design and gain over no-skip"
    text = write_tables(rows, COLUMNS, out_dir, "penalties", title, fmt=format_4g)
    design_s, gain_s = [], []
    kappas = sorted({r["kappa"] for r in rows})
    ticks = (list(range(len(kappas))), [f"{k:g}" for k in kappas])
    for i, form in enumerate(FORMS):
        rs = [r for r in rows if r["form"] == form]
        if not rs:
            continue
        x = [kappas.index(r["kappa"]) for r in rs]
        xj = [v + 0.12 * (i - 1) for v in x]  # side by side, so equal designs stay visible
        design_s.append({"label": f"{form}: s", "x": xj, "mean": [r["skip_budget"] for r in rs],
                         "color": f"C{i}", "style": "points", "marker": "o"})
        design_s.append({"label": f"{form}: r", "x": xj, "mean": [r["replicas"] for r in rs],
                         "color": f"C{i}", "style": "points", "marker": "s"})
        gain_s.append({"label": f"{form} simulated (95% CI)", "x": x, "style": "points",
                       "color": f"C{i}", "mean": [r["gain"] for r in rs],
                       "low": [r["gain_low"] for r in rs], "high": [r["gain_high"] for r in rs],
                       "ref_x": x, "ref_y": [r["exact_gain"] for r in rs],
                       "ref_label": f"{form} exact"})
    plot_stress_panels(
        [{"xlabel": "skip penalty kappa", "ylabel": "optimal skip budget s (circles) / replicas r (squares)",
          "xticks": ticks, "title": "Cost-optimal design", "series": design_s},
         {"xlabel": "skip penalty kappa", "ylabel": "gain = best no-skip cost / optimal cost",
          "xticks": ticks, "hline": 1.0, "title": "Gain over the best no-skip design",
          "series": gain_s}],
        out_dir / "penalties.png",
        title=f"Skip penalty forms (L={STAGES}, a={AVAILABILITY}, rho={DOMAIN_OUTAGE:g}; threshold: "
              f"quality 1 while (1-kappa)^k >= {Q_MIN}, else 0)",
        caption=f"Optimal designs from sim.analytic.optimal_design; gains simulated with the snapshot "
                f"pipeline DES (quality mass of the optimal and the no-skip design, 95% CI by the delta "
                f"method across {rows[0]['replications'] if rows else 0} replications); dashed: exact.")
    print(f"\n{NAME}: cost-optimal design by penalty form\n{text}\n")
    for r in rows:
        extra = f" (k*={r['threshold_max_skips']})" if r["form"] == "threshold" else ""
        print(f"  {r['form']}{extra}, kappa {r['kappa']:g}: optimum r={r['replicas']}, "
              f"s={r['skip_budget']} ({r['workers']} workers), cost {r['cost']:.2f} "
              f"[{r['cost_low']:.2f}, {r['cost_high']:.2f}] vs exact {r['exact_cost']:.4f} "
              f"({'degenerate interval: no microbatch lost' if r['degenerate'] else 'inside' if r['cost_in_interval'] else 'OUTSIDE'}); gain over no-skip "
              f"{r['gain']:.3f} [{r['gain_low']:.3f}, {r['gain_high']:.3f}] vs exact {r['exact_gain']:.3f} "
              f"({'inside' if r['gain_in_interval'] else 'OUTSIDE'})")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
