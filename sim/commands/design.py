"""``dtsim design``: the fewest replicas for a target drop rate, or the cost-optimal design."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import check_int, check_probability
from ..pipeline import PipelineConfig
from ..rare import importance_from_config
from ..results import Estimate
from ..rng import Streams
from ._common import emit_json, print_table

NAME = "design"
HELP = "exact pipeline design: replicas needed for a target drop rate, or the cost-optimal (r, s)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stages", type=int, default=48, help="stages L (default 48)")
    p.add_argument("--availability", type=float, default=0.9,
                   help="worker availability a (default 0.9)")
    p.add_argument("--domain-outage", type=float, default=0.0,
                   help="unavailability rho of each stage's shared domain (default 0)")
    p.add_argument("--skip-budget", type=int, default=None,
                   help="stages a microbatch may skip s (default 0; omit with --skip-penalty "
                        "to optimise it)")
    p.add_argument("--target-drop", type=float, default=1e-3,
                   help="target drop rate, in (0, 1) (default 1e-3)")
    p.add_argument("--skip-penalty", type=float, default=None,
                   help="quality lost per skip kappa: without --skip-budget, return the design "
                        "minimising workers per unit of quality-weighted goodput")
    p.add_argument("--penalty", default="multiplicative", metavar="NAME",
                   help="quality after k skips: multiplicative (default) or additive")
    p.add_argument("--max-replicas", type=int, default=None,
                   help="largest r considered (default: the analytic module's)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    v = p.add_argument_group("verification by simulation (--verify)")
    v.add_argument("--verify", action="store_true",
                   help="simulate the chosen design and report its drop rate with a 95%% interval")
    v.add_argument("--microbatches", type=int, default=20_000,
                   help="microbatches per replication (default 20000)")
    v.add_argument("--replications", type=int, default=10, help="replications (default 10)")
    v.add_argument("--rate", type=float, default=4.0,
                   help="microbatch arrival rate, in units of 1/mean worker downtime (default 4)")
    v.add_argument("--mean-downtime", type=float, default=1.0,
                   help="mean worker (and domain) outage length (default 1)")
    v.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    v.add_argument("--executor", default="serial", metavar="NAME",
                   help="serial (default) or local (process pool)")
    v.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes for --executor local")


def design(stages: int, availability: float, domain_outage: float, *,
           skip_budget: int | None = None, target_drop: float = 1e-3,
           skip_penalty: float | None = None, penalty: str = "multiplicative",
           max_replicas: int | None = None) -> dict[str, Any]:
    """Answer the design question exactly (the payload of ``dtsim design --json``).

    Parameters
    ----------
    stages, availability, domain_outage : see :class:`sim.pipeline.PipelineConfig`
    skip_budget : int, optional
        Fixed skip budget (default 0 when ``skip_penalty`` is None).
    target_drop : float
        Target drop rate in (0, 1).
    skip_penalty : float, optional
        With no ``skip_budget``: return the cost-optimal ``(r, s)``
        (:func:`sim.analytic.optimal_design`).
    penalty : str
        Quality law after skips.
    max_replicas : int, optional
        Largest ``r`` searched.

    Returns
    -------
    dict
        Minimum-replica mode: ``mode="min_replicas"``, ``feasible``, ``replicas``,
        ``workers``, ``drop_rate``, ``floor``, ``reason``, ``skip_budget``.
        Optimal mode: ``mode="optimal"``, ``replicas``, ``skip_budget``, ``cost``,
        ``noskip_replicas``, ``noskip_cost``, ``gain``, ``workers``, ``drop_rate``,
        ``mean_quality``.
    """
    from .. import analytic

    L = check_int("stages", stages, low=1)
    if skip_budget is not None:
        check_int("skip_budget", skip_budget, low=0, high=L)
    base = {"stages": stages, "availability": availability, "domain_outage": domain_outage}
    extra = {} if max_replicas is None else {"max_replicas": max_replicas}
    if skip_penalty is not None and skip_budget is None:
        opt = analytic.optimal_design(stages, availability, domain_outage, skip_penalty,
                                      penalty=penalty, **extra)
        q = analytic.stage_outage(availability, opt.replicas, domain_outage)
        return {
            "mode": "optimal", **base, "skip_penalty": skip_penalty, "penalty": penalty,
            "feasible": True,
            "replicas": opt.replicas, "skip_budget": opt.skip_budget, "cost": opt.cost,
            "noskip_replicas": opt.noskip_replicas, "noskip_cost": opt.noskip_cost,
            "gain": opt.gain, "workers": stages * opt.replicas,
            "drop_rate": float(analytic.drop_probability(stages, opt.replicas, opt.skip_budget,
                                                         availability, domain_outage)),
            "mean_quality": float(analytic.mean_quality_delivered(
                stages, q, opt.skip_budget, skip_penalty, penalty=penalty)),
        }
    s = 0 if skip_budget is None else skip_budget
    check_probability("target_drop", target_drop, open_low=True, open_high=True)
    d = analytic.min_replicas(stages, availability, domain_outage, s, target_drop, **extra)
    return {
        "mode": "min_replicas", **base, "skip_budget": s, "target_drop": target_drop,
        "feasible": bool(d.feasible), "replicas": d.replicas, "workers": d.workers,
        "drop_rate": float(d.drop_rate), "floor": float(d.floor), "reason": d.reason,
    }


#: Below this many expected drops, --verify estimates the drop rate by importance sampling.
RESOLVABLE_DROPS = 30


def verify(out: dict[str, Any], *, microbatches: int, replications: int, rate: float,
           mean_downtime: float, seed: int, executor: Any = "serial",
           workers: int | None = None, skip_penalty: float = 0.0,
           penalty: str = "multiplicative") -> dict[str, Any]:
    """Simulate the chosen design (snapshot model) and return its drop rate estimate."""
    from .pipeline import simulate

    cfg = PipelineConfig(
        stages=out["stages"], replicas=out["replicas"], skip_budget=out["skip_budget"],
        availability=out["availability"], domain_outage=out["domain_outage"],
        skip_penalty=skip_penalty, penalty=penalty, mean_downtime=mean_downtime,
        domain_downtime=mean_downtime, microbatches=microbatches, rate=rate,
    )
    sim = simulate(cfg, replications=replications, seed=seed, executor=executor, workers=workers)
    est = sim["drop_rate_ci"]
    method = "simulation"
    if sim["predicted_drop_rate"] * microbatches * replications < RESOLVABLE_DROPS:
        # Too rare for plain simulation to resolve (fewer than RESOLVABLE_DROPS drops
        # expected): estimate the drop probability by importance sampling instead.
        res = importance_from_config(cfg, rng=Streams(seed).rng("verify-importance"),
                                     target_rel_error=0.05)
        est = Estimate(res.estimate, res.se, res.low, res.high, res.samples)
        method = "importance sampling"
    return {
        "simulated_drop_rate": est.mean,
        "simulated_drop_rate_ci": est,
        "simulated_agrees": bool(est.contains(sim["predicted_drop_rate"])),
        "simulated_method": method,
        "simulated_microbatches": microbatches * replications,
        "simulated_mean_quality": sim["mean_quality"],
        "simulated_mean_quality_ci": sim["mean_quality_ci"],
        "seed": seed,
    }


def run(args: argparse.Namespace) -> int:
    out = design(args.stages, args.availability, args.domain_outage,
                 skip_budget=args.skip_budget, target_drop=args.target_drop,
                 skip_penalty=args.skip_penalty, penalty=args.penalty,
                 max_replicas=args.max_replicas)
    if args.verify:
        if out["feasible"]:
            out.update(verify(out, microbatches=args.microbatches,
                              replications=args.replications, rate=args.rate,
                              mean_downtime=args.mean_downtime, seed=args.seed,
                              executor=args.executor, workers=args.workers,
                              skip_penalty=args.skip_penalty or 0.0, penalty=args.penalty))
        else:
            out["simulated_drop_rate"] = None
            out["simulated_drop_rate_ci"] = None
    if args.json:
        emit_json(out)
        return 0
    head = (f"L={out['stages']}, a={out['availability']}, rho={out['domain_outage']}")
    if out["mode"] == "optimal":
        print(f"cost-optimal design, {head}, kappa={out['skip_penalty']} ({out['penalty']}):")
        rows = [
            ("replicas r", str(out["replicas"])), ("skip budget s", str(out["skip_budget"])),
            ("workers L*r", str(out["workers"])),
            ("cost (workers per unit quality)", f"{out['cost']:.6g}"),
            ("drop rate", f"{out['drop_rate']:.6g}"),
            ("mean quality (delivered)", f"{out['mean_quality']:.6g}"),
            ("best no-skip design", f"r={out['noskip_replicas']}, cost {out['noskip_cost']:.6g}"),
            ("gain over no-skip", f"{out['gain']:.4g}x"),
        ]
    else:
        print(f"fewest replicas for drop rate <= {out['target_drop']:g}, {head}, "
              f"s={out['skip_budget']}:")
        rows = [
            ("feasible", "yes" if out["feasible"] else "no"),
            ("replicas r", str(out["replicas"]) if out["feasible"] else "-"),
            ("workers L*r", str(out["workers"]) if out["feasible"] else "-"),
            ("drop rate", f"{out['drop_rate']:.6g}"),
            ("floor (r -> inf)", f"{out['floor']:.6g}"),
        ]
        if out["reason"]:
            rows.append(("reason", out["reason"]))
    if "simulated_drop_rate_ci" in out and out["simulated_drop_rate_ci"] is not None:
        e = out["simulated_drop_rate_ci"]
        how = (f"over {out['simulated_microbatches']} microbatches"
               if out["simulated_method"] == "simulation" else "by importance sampling")
        rows.append(("simulated drop rate (95% CI)",
                     f"{e} {how}, {'agrees' if out['simulated_agrees'] else 'DISAGREES'}"))
    print_table(rows, ("quantity", "value"))
    return 0
