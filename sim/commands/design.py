"""``dtsim design``: the fewest replicas for a target drop rate, or the cost-optimal design.

The answers and the check by simulation are :mod:`sim.pipeline.design`'s; this
module parses, calls and prints.
"""

from __future__ import annotations

import argparse

from ..pipeline.design import check_verify_size, design, verify, verify_trace
from ..results import Estimate
from ._applies import given, refuse_unless, verdict
from ._common import emit_json, print_table
from .trace import add_failure_trace_options, assumed_unit, failure_trace_from_args, print_unit_note

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
    add_failure_trace_options(p)


#: Options of the --verify group: they have an effect only with --verify.
VERIFY_OPTIONS = ("microbatches", "replications", "rate", "mean_downtime", "seed", "executor",
                  "workers")


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options that would have no effect with the others."""
    for dest in VERIFY_OPTIONS:
        refuse_unless(args, dest, args.verify, "with --verify")
    refuse_unless(args, "workers", args.executor != "serial",
                  "with --verify --executor local or dask")
    optimal = args.skip_penalty is not None and args.skip_budget is None
    refuse_unless(args, "target_drop", not optimal,
                  "with --skip-budget or without --skip-penalty (the cost-optimal design has "
                  "no target)")
    refuse_unless(args, "penalty", args.skip_penalty is not None, "with --skip-penalty")
    refuse_unless(args, "skip_penalty", optimal or args.verify,
                  "without --skip-budget, or with --verify (it only weights the quality)")
    traced = args.failure_trace is not None
    for dest in ("availability", "domain_outage"):
        refuse_unless(args, dest, not traced,
                      "without --failure-trace (the trace sets the workers' up and down times)")
    for dest in ("rate", "mean_downtime"):
        refuse_unless(args, dest, not traced, "without --failure-trace (with a trace the "
                      "microbatches arrive evenly over one span of it)")
    for dest in ("trace_loop", "trace_resample", "trace_start", "trace_speedup", "trace_block",
                 "trace_model"):
        refuse_unless(args, dest, False, "with dtsim train, pipeline, gossip or failures (dtsim "
                      "design answers from the whole trace; --verify replays it looped from a "
                      "random offset)")


def _trace(args: argparse.Namespace):
    """The trace to design for, under the random policy unless another is named (refused)."""
    if args.failure_trace is None:
        return None
    if not given(args, "trace_policy") and args.trace_policy is None:
        args.trace_policy = "random"
    return failure_trace_from_args(args)


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.verify:
        check_verify_size(args.microbatches, args.replications)
    trace = _trace(args)
    out = design(args.stages, args.availability, args.domain_outage,
                 skip_budget=args.skip_budget, target_drop=args.target_drop,
                 skip_penalty=args.skip_penalty, penalty=args.penalty,
                 max_replicas=args.max_replicas, trace=trace)
    if args.verify:
        if out["feasible"] and trace is not None:
            out.update(verify_trace(out, trace, microbatches=args.microbatches,
                                    replications=args.replications, seed=args.seed,
                                    executor=args.executor, workers=args.workers,
                                    skip_penalty=args.skip_penalty or 0.0,
                                    penalty=args.penalty))
        elif out["feasible"]:
            out.update(verify(out, microbatches=args.microbatches,
                              replications=args.replications, rate=args.rate,
                              mean_downtime=args.mean_downtime, seed=args.seed,
                              executor=args.executor, workers=args.workers,
                              skip_penalty=args.skip_penalty or 0.0, penalty=args.penalty))
        else:
            out["simulated_drop_rate"] = None
            out["simulated_drop_rate_ci"] = None
    if trace is not None:
        out["trace_time_unit_assumed"] = assumed_unit(trace)
    if args.json:
        emit_json(out)
        return 0
    head = (f"L={out['stages']}, a={out['availability']}, rho={out['domain_outage']}"
            if trace is None else
            f"L={out['stages']}, trace {out['trace']} ({out['slots']} slots, availability "
            f"{out['availability']:.4g}, random policy)")
    if out["mode"] == "optimal":
        print(f"cost-optimal design, {head}, kappa={out['skip_penalty']} ({out['penalty']}):")
        print_unit_note(trace)
        rows = [
            ("replicas r", str(out["replicas"])), ("skip budget s", str(out["skip_budget"])),
            ("workers L*r", str(out["workers"])),
            ("cost (workers per unit quality)", f"{out['cost']:.6g}"),
            ("drop rate", f"{out['drop_rate']:.6g}"),
            ("mean quality (delivered)", f"{out['mean_quality']:.6g}"),
            ("best no-skip design", f"r={out['noskip_replicas']}, cost {out['noskip_cost']:.6g}"),
            ("gain over no-skip", f"{out['gain']:.4g}x"),
        ]
        if trace is not None:
            rows.append(("independent outages, same a", f"r={out['independent_replicas']}, "
                         f"s={out['independent_skip_budget']}, cost {out['independent_cost']:.6g}"))
    else:
        print(f"fewest replicas for drop rate <= {out['target_drop']:g}, {head}, "
              f"s={out['skip_budget']}:")
        print_unit_note(trace)
        rows = [
            ("feasible", "yes" if out["feasible"] else "no"),
            ("replicas r", str(out["replicas"]) if out["feasible"] else "-"),
            ("workers L*r", str(out["workers"]) if out["feasible"] else "-"),
            ("drop rate", f"{out['drop_rate']:.6g}"),
        ]
        if trace is None:
            rows.append(("floor (r -> inf)", f"{out['floor']:.6g}"))
        elif not out["feasible"]:  # a feasible trace design stops searching at its r
            top = out["slots"] // out["stages"]
            if args.max_replicas is not None:
                top = min(top, args.max_replicas)
            rows.append((f"floor (r = {top}" + (", every slot)" if top == out["slots"] //
                                                 out["stages"] else ", --max-replicas)"),
                         f"{out['floor']:.6g}"))
        if out["reason"]:
            rows.append(("reason", out["reason"]))
        if trace is not None:
            ind = out.get("independent_replicas")
            rows.append(("independent outages, same a",
                         f"r={ind}, drop {out['independent_drop_rate']:.6g}" if ind is not None
                         else f"infeasible (drop {out['independent_drop_rate']:.6g})"))
    if "simulated_drop_rate_ci" in out and out["simulated_drop_rate_ci"] is not None:
        e = out["simulated_drop_rate_ci"]
        how = (f"over {out['simulated_microbatches']} microbatches"
               if out["simulated_method"] == "simulation" else "by importance sampling")
        if trace is not None:
            how += " replaying the trace"
        rows.append(("simulated drop rate (95% CI)",
                     f"{e} {how}, {_said(e, out['simulated_agrees'])}"))
    print_table(rows, ("quantity", "value"))
    return 0


def _said(e: Estimate, agrees: bool | None) -> str:
    """``agrees`` / ``DISAGREES``, ``no interval`` (one replication), or ``not judged`` (a
    drop rate too rare for the microbatches simulated)."""
    if agrees is None and e.has_interval:
        return "not judged (fewer than 30 drops expected)"
    said = verdict(e.low, e.high, bool(agrees))
    return {"yes": "agrees", "NO": "DISAGREES"}.get(said, said)
