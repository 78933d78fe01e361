"""``dtsim failures``: simulate workers in failure domains; measured vs asked."""

from __future__ import annotations

import argparse

import numpy as np

from ..errors import ConfigError, SimulationError
from ..failures import DISTRIBUTIONS, ClusterConfig, failures_model, layout_domains
from ..results import judge_equal, metric_estimate
from ..runner import replicate
from . import trace as _trace
from ._applies import given, refuse_unless, verdict
from ._common import add_run_options, emit_json, print_table
from .trace import add_failure_trace_options, assumed_unit, failure_trace_from_args, print_unit_note

NAME = "failures"
HELP = "simulate a cluster of failing workers in domains; print measured vs target availability"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ClusterConfig()
    p.add_argument("--cluster-workers", "--workers", dest="cluster_workers", type=int,
                   default=d.workers, metavar="N",
                   help=f"workers in the simulated cluster (default {d.workers}); --workers is its "
                        "old name, kept for scripts (elsewhere --workers counts processes)")
    p.add_argument("--domains", type=int, default=d.domains,
                   help=f"failure domains; worker i in domain i %% domains (default {d.domains})")
    p.add_argument("--availability", type=float, default=d.availability,
                   help=f"each worker's own availability a (default {d.availability})")
    p.add_argument("--mean-downtime", type=float, default=d.mean_downtime,
                   help=f"mean worker outage length (default {d.mean_downtime})")
    # the defaults of dtsim pipeline and dtsim design: one default per flag name
    p.add_argument("--domain-outage", type=float, default=0.0,
                   help="unavailability rho of each domain (default 0)")
    p.add_argument("--domain-downtime", type=float, default=1.0,
                   help="mean domain outage length (default 1)")
    p.add_argument("--topology", default=None, metavar="LAYOUT",
                   help="nested failure domains from a layout, as dtsim pipeline --topology: "
                        "e.g. datacenter:regions=2,racks=4,hosts=4,region_outage=1e-4,"
                        "rack_outage=1e-3 (one worker per host; replaces --cluster-workers, "
                        "--domains and --domain-outage)")
    p.add_argument("--distribution", default=d.distribution, metavar="NAME",
                   help="up/down duration law: " + ", ".join(DISTRIBUTIONS))
    p.add_argument("--shape", type=float, default=None,
                   help="Weibull shape k (default 0.7), lognormal sigma (default 1.0) or Pareto "
                        "tail index alpha > 1 (required)")
    p.add_argument("--trace", default=None, metavar="CSV",
                   help="alias of --failure-trace CSV --trace-format dtsim (a CSV of "
                        "worker,start,end down intervals; the old name of the option)")
    p.add_argument("--horizon", type=float, default=None,
                   help=f"simulated time per replication (default {d.horizon:g}, or the "
                        "whole failure trace when it ends)")
    add_failure_trace_options(p)
    add_run_options(p, replications=10, executor=False)
    p.add_argument("--executor", default="serial", metavar="NAME",
                   help="serial (default) or local (process pool)")


def run(args: argparse.Namespace) -> int:
    refuse_unless(args, "shape", args.distribution in ("weibull", "lognormal", "pareto"),
                  "with --distribution weibull, lognormal or pareto")
    replaying = args.trace is not None or args.failure_trace is not None
    for dest in ("availability", "mean_downtime"):  # the trace gives the workers' outages
        refuse_unless(args, dest, not replaying, "without a failure trace (the trace replaces it)")
    d = ClusterConfig()
    nested = args.topology is not None
    for dest in ("cluster_workers", "domains", "domain_outage"):
        refuse_unless(args, dest, not nested, "without --topology (the layout's hosts and "
                      "failure domains replace it)")
    refuse_unless(args, "mean_downtime", args.availability < 1,
                  "with --availability < 1 (no worker goes down at 1)")
    if given(args, "domains") and not nested and args.domains > args.cluster_workers:
        raise ConfigError("domains", f"at most the {args.cluster_workers} workers of the cluster "
                          "(worker i sits in domain i % domains: a domain beyond them holds no "
                          "worker)", args.domains)
    if args.trace is not None:  # the documented alias
        if args.failure_trace is not None:
            raise ConfigError("trace", "unset with --failure-trace (it is its alias)", args.trace)
        args.failure_trace = args.trace
        if args.trace_format is None:
            args.trace_format = "dtsim"
    replay = failure_trace_from_args(args)
    horizon = args.horizon
    if horizon is None:
        horizon = d.horizon if replay is None or replay.duration == float("inf") else replay.duration
    domain_outage = args.domain_outage
    workers = args.cluster_workers
    chains: list[tuple[str, ...]] = []
    unavail: dict[str, float] = {}
    if nested:
        chains, unavail = layout_domains(args.topology)
        workers = len(chains)
    cfg = ClusterConfig(
        workers=workers, domains=args.domains, availability=args.availability,
        mean_downtime=args.mean_downtime, domain_outage=domain_outage,
        domain_mean_downtime=args.domain_downtime, distribution=args.distribution,
        shape=args.shape, horizon=horizon, failure_trace=replay, topology=args.topology,
    )
    records = replicate(failures_model, cfg, replications=args.replications, seed=args.seed,
                        executor=args.executor)
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    ok = [r for r in records if not r.get("error")]
    fixed = cfg.fixed_metrics()

    def fraction(k: str):  # of time: inside [0, 1] ("below X" never seen); exact when fixed
        return metric_estimate([r[k] for r in ok], rate=True, fixed=fixed.get(k), name=k)

    est = {k: fraction(k) for k in
           ("worker_availability", "effective_availability", "domain_unavailability", "joint_outage")}
    transitions = float(np.mean([r["worker_transitions"] for r in ok]))
    a, rho = cfg.availability, cfg.domain_outage
    levels: list[tuple[str, str, float, float]] = []  # nested: (label, key, exact u, exact joint)
    if nested:
        from .. import analytic

        exact = analytic.nested_domain_outages(chains, unavail, a)
        doms = list(dict.fromkeys(d for c in chains for d in c))
        depth = {d: k for c in chains for k, d in enumerate(c)}
        joint = float(np.mean([exact["joint_outage"][d] for d in doms]))
        rho = float(np.mean([exact["domain_unavailability"][d] for d in doms]))
        for k in range(max(len(c) for c in chains)):
            at = [d for d in doms if depth[d] == k]
            levels.append((at[0].rsplit("/", 1)[-1].rstrip("0123456789") or f"level{k}", f"level{k}",
                           float(np.mean([exact["domain_unavailability"][d] for d in at])),
                           float(np.mean([exact["joint_outage"][d] for d in at]))))
            for m in (f"joint_outage_level{k}", f"domain_unavailability_level{k}"):
                est[m] = fraction(m)
        eff_target = exact["effective_availability"]
    else:
        joint = float(np.mean([rho + (1 - rho) * (1 - a) ** r for r in cfg.workers_per_domain if r]))
        eff_target = a * (1 - rho)
    out = {
        "worker_availability": est["worker_availability"].mean,
        "worker_availability_ci": est["worker_availability"],
        "target_availability": a,
        "effective_availability": est["effective_availability"].mean,
        "effective_availability_ci": est["effective_availability"],
        "target_effective_availability": eff_target,
        "domain_unavailability": est["domain_unavailability"].mean,
        "domain_unavailability_ci": est["domain_unavailability"],
        "target_domain_unavailability": rho,
        "joint_outage": est["joint_outage"].mean,
        "joint_outage_ci": est["joint_outage"],
        "predicted_joint_outage": joint,
        "transitions_per_worker_per_time": transitions,
        "simulated_time": cfg.horizon * args.replications,
        "replications": args.replications,
        "seed": args.seed,
    }
    for label, key, u_k, j_k in levels:
        out[f"domain_unavailability_{key}"] = est[f"domain_unavailability_{key}"].mean
        out[f"domain_unavailability_{key}_ci"] = est[f"domain_unavailability_{key}"]
        out[f"target_domain_unavailability_{key}"] = u_k
        out[f"joint_outage_{key}"] = est[f"joint_outage_{key}"].mean
        out[f"joint_outage_{key}_ci"] = est[f"joint_outage_{key}"]
        out[f"predicted_joint_outage_{key}"] = j_k
        out[f"{key}_name"] = label
    if nested:
        out["topology"] = cfg.topology
    if replay is not None:
        from ..traces import trace_stats

        # by name too: it answers only when each of the trace's slots is replayed once, and a
        # by-name replay then has one worker per instance (as many as slots, tiling refused),
        # whose mean up-fraction is the count's integral over workers x span as well
        exact = replay.exact_availability(cfg.workers, cfg.horizon)
        out["target_availability"] = exact
        out["target_effective_availability"] = None if exact is None else exact * (1 - rho)
        out["predicted_joint_outage"] = None
        out["trace"] = replay.trace
        out["trace_policy"] = replay.policy
        out["trace_availability"] = trace_stats(replay.load())["availability"]
        out["trace_time_unit_assumed"] = assumed_unit(replay)
        names = cfg.trace_names
        if names is not None:  # instances named as the workers: replayed by name
            out["trace_instances"] = _trace.trace_instances(
                [f"worker{i}" for i in range(cfg.workers)], names)
    if args.json:
        emit_json(out)
        return 0
    rows = []
    nested_rows = []
    for label, key, u_k, j_k in levels:
        nested_rows += [(f"{label} unavailability (parents included)",
                         f"domain_unavailability_{key}", u_k),
                        (f"joint outage of a {label}", f"joint_outage_{key}", j_k)]
    for label, key, target in [
        ("worker availability", "worker_availability", out["target_availability"]),
        ("effective availability", "effective_availability", out["target_effective_availability"]),
        ("domain unavailability", "domain_unavailability", rho),
        ("joint outage of a domain", "joint_outage", out["predicted_joint_outage"]),
    ] + nested_rows:
        e = est[key]
        ok = "" if target is None else verdict(e.low, e.high, bool(judge_equal(e, target).holds))
        if target is not None and e.kind == "exact":  # fixed by the config: equal, or not
            ok = "exact" if e.contains(target) else "NO"
        rows.append((label, "-" if target is None else f"{target:.6g}", str(e), ok))
    law = (f"trace {replay.trace} (policy {replay.policy})" if replay is not None
           else f"{cfg.distribution} durations")
    where = (f"{len(dict.fromkeys(d for c in chains for d in c))} nested domains of {cfg.topology}"
             if nested else f"{cfg.domains} domains")
    print(f"{cfg.workers} workers in {where}, {law}, "
          f"{args.replications} replications x {cfg.horizon:g} time units, seed {args.seed}")
    print_unit_note(replay)
    if "trace_instances" in out:
        _trace.print_trace_instances(out["trace_instances"])
    print_table(rows, ("quantity", "target", "measured (95% CI)", "target in CI"))
    return 0
