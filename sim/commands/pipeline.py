"""``dtsim pipeline``: simulate Study A's pipeline; simulated drop rate vs the exact tail."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

from ..failures import DISTRIBUTIONS
from ..pipeline import (
    ARRIVALS,
    PENALTIES,
    STAGE_TIME_DISTRIBUTIONS,
    PipelineConfig,
    layout_hop_times,
    pipeline_model,
    predicted_drop_rate,
    run_pipeline,
)
from ..results import summarize
from ..rng import Streams
from ..runner import replicate
from ._common import add_run_options, emit_json, print_table

NAME = "pipeline"
HELP = "simulate a pipeline with replicas, failover and skipping; drop rate vs the exact tail"

PLACEMENTS = ("shared", "spread", "packed", "random")


def int_list(text: str) -> int | tuple[int, ...]:
    """``"3"`` -> 3, ``"3,2,3"`` -> (3, 2, 3) (validation is the config's)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        vals = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or a comma list: {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def float_list(text: str) -> float | tuple[float, ...]:
    """``"1.5"`` -> 1.5, ``"1,2"`` -> (1.0, 2.0)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or a comma list: {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def add_model_arguments(p: argparse.ArgumentParser, *, microbatches: int | None = None) -> None:
    """The pipeline model's options (shared with ``dtsim design --verify``)."""
    d = PipelineConfig()
    mb = d.microbatches if microbatches is None else microbatches
    r0 = PipelineConfig.__dataclass_fields__["replicas"].default
    p.add_argument("--replicas", type=int_list, default=r0,
                   help=f"replicas per stage r, or one per stage as a comma list (default {r0})")
    p.add_argument("--mean-downtime", type=float, default=d.mean_downtime,
                   help=f"mean worker outage length (default {d.mean_downtime})")
    p.add_argument("--domain-downtime", type=float, default=d.domain_downtime,
                   help=f"mean domain outage length (default {d.domain_downtime})")
    p.add_argument("--distribution", default=d.failure_distribution, metavar="NAME",
                   help="up/down duration law: " + ", ".join(DISTRIBUTIONS))
    p.add_argument("--shape", type=float, default=None,
                   help="Weibull shape or lognormal sigma of the up/down law")
    p.add_argument("--penalty", default=d.penalty, metavar="NAME",
                   help="quality after k skips: " + ", ".join(PENALTIES))
    p.add_argument("--stage-time", type=float_list, default=0.0,
                   help="mean compute time per stage, or one per stage (default 0: snapshot model)")
    p.add_argument("--stage-time-distribution", default=d.stage_time_distribution, metavar="NAME",
                   help="compute time law: " + ", ".join(STAGE_TIME_DISTRIBUTIONS))
    p.add_argument("--stage-time-shape", type=float, default=None,
                   help="Weibull shape or lognormal sigma of the compute time")
    p.add_argument("--latency", type=float_list, default=0.0,
                   help="transfer latency per hop, or one per hop (default 0)")
    p.add_argument("--transfer-size", type=float, default=0.0,
                   help="activation size per hop (default 0)")
    p.add_argument("--bandwidth", type=float, default=math.inf, help="link bandwidth (default inf)")
    p.add_argument("--microbatches", type=int, default=mb,
                   help=f"microbatches per replication (default {mb})")
    p.add_argument("--arrival", default=d.arrival, metavar="KIND",
                   help="arrivals: " + ", ".join(ARRIVALS) + f" (default {d.arrival})")
    p.add_argument("--rate", type=float, default=d.rate,
                   help=f"arrival rate for fixed/poisson arrivals (default {d.rate})")
    p.add_argument("--max-wait", type=float, default=d.max_wait,
                   help="wait at an out stage once the skip budget is spent (default 0: drop)")
    p.add_argument("--detection-timeout", type=float, default=d.detection_timeout,
                   help="time to detect a failed replica before failover (default 0)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = PipelineConfig()
    p.add_argument("--stages", type=int, default=d.stages, help=f"stages L (default {d.stages})")
    p.add_argument("--skip-budget", type=int, default=d.skip_budget,
                   help=f"stages a microbatch may skip s (default {d.skip_budget})")
    p.add_argument("--availability", type=float, default=d.availability,
                   help=f"worker availability a (default {d.availability})")
    p.add_argument("--domain-outage", type=float, default=d.domain_outage,
                   help=f"unavailability rho of each stage's shared domain (default {d.domain_outage})")
    p.add_argument("--skip-penalty", type=float, default=d.skip_penalty,
                   help=f"quality lost per skip kappa (default {d.skip_penalty})")
    add_model_arguments(p)
    p.add_argument("--topology", default=None, metavar="SPEC",
                   help="place replicas on a layout, e.g. datacenter:regions=2,racks=8,hosts=4 "
                        "(its domains and link latencies replace --domain-outage and --latency)")
    p.add_argument("--placement", default="shared", metavar="POLICY",
                   help="with --topology: " + ", ".join(PLACEMENTS) + " (default shared)")
    p.add_argument("--no-layout-latency", action="store_true",
                   help="with --topology: use the layout's failure domains but not its link "
                        "latencies (keeps the zero-time snapshot model)")
    p.add_argument("--show-placement", action="store_true",
                   help="print which replica of which stage sits in which domain")
    p.add_argument("--trace", default=None, metavar="CSV",
                   help="also write the event trace of replication 0 to this CSV file "
                        "(time, microbatch, event, stage, replica)")
    add_run_options(p, replications=10)


def write_trace(cfg: PipelineConfig, seed: int, path: str) -> Path:
    """Run replication 0 with the event trace on and write it as CSV."""
    run_ = run_pipeline(dataclasses.replace(cfg, trace=True), Streams(seed).replication(0))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("time", "microbatch", "event", "stage", "replica"))
        w.writerows(run_.trace or [])
    return out


def config_from_args(args: argparse.Namespace, **override: Any) -> tuple[PipelineConfig, Any]:
    """Build the :class:`PipelineConfig` (and the placement, if a topology) from CLI args."""
    kw: dict[str, Any] = dict(
        stages=args.stages, replicas=args.replicas, skip_budget=args.skip_budget,
        availability=args.availability, domain_outage=args.domain_outage,
        skip_penalty=args.skip_penalty, penalty=args.penalty, mean_downtime=args.mean_downtime,
        domain_downtime=args.domain_downtime, failure_distribution=args.distribution,
        failure_shape=args.shape, stage_time=args.stage_time,
        stage_time_distribution=args.stage_time_distribution,
        stage_time_shape=args.stage_time_shape, latency=args.latency,
        transfer_size=args.transfer_size, bandwidth=args.bandwidth,
        microbatches=args.microbatches, arrival=args.arrival, rate=args.rate,
        max_wait=args.max_wait, detection_timeout=args.detection_timeout,
    )
    kw.update(override)
    placement = None
    topology = getattr(args, "topology", None)
    if topology:
        import topologies
        from topologies.placement import place

        base = PipelineConfig(**kw)  # validates stages and replicas first
        layout = topologies.build(topology, seed=args.seed)
        placement = place(layout, base.stages, list(base.replicas), args.placement,
                          rng=Streams(args.seed).rng("placement"))
        kw["placement"] = placement
        if not getattr(args, "no_layout_latency", False):
            hops = layout_hop_times(layout, placement.hosts, base.transfer_size)
            kw.update(latency=hops if hops else 0.0, transfer_size=0.0)
    return PipelineConfig(**kw), placement


def exact_quality(cfg: PipelineConfig) -> float | None:
    """Exact mean quality of delivered microbatches (study placement, equal replicas)."""
    from .. import analytic

    if cfg.placement is not None or len(set(cfg.replicas)) != 1:  # type: ignore[arg-type]
        return None
    q = analytic.stage_outage(cfg.availability, cfg.replicas[0], cfg.domain_outage)  # type: ignore[index]
    return float(analytic.mean_quality_delivered(cfg.stages, q, cfg.skip_budget,
                                                 cfg.skip_penalty, penalty=cfg.penalty))


def simulate(cfg: PipelineConfig, *, replications: int, seed: int, executor: Any = "serial",
             workers: int | None = None) -> dict[str, Any]:
    """Run the replications and return the CLI's JSON payload (intervals as Estimates)."""
    t0 = time.perf_counter()
    records = replicate(pipeline_model, cfg, replications=replications, seed=seed,
                        executor=executor, workers=workers)
    wall = time.perf_counter() - t0
    errors = [r["error"] for r in records if r["error"]]
    if errors:
        raise RuntimeError(errors[0])
    est = summarize(records)
    exact_ok = cfg.instant and cfg.max_wait == 0
    crossings = sum(r["stage_crossings"] for r in records)
    busy = sum(r["wall_time"] for r in records)
    return {
        "drop_rate": est["drop_rate"].mean,
        "drop_rate_ci": est["drop_rate"],
        "predicted_drop_rate": predicted_drop_rate(cfg),
        "exact_applies": bool(exact_ok),
        "workers": cfg.workers,
        "mean_quality": est["mean_quality"].mean,
        "mean_quality_ci": est["mean_quality"],
        "predicted_mean_quality": exact_quality(cfg),
        "goodput": est["goodput"].mean,
        "goodput_ci": est["goodput"],
        "latency_mean": est["latency_mean"].mean,
        "latency_p50": est["latency_p50"].mean,
        "latency_p99": est["latency_p99"].mean,
        "mean_skipped": est["mean_skipped"].mean,
        "skipped_distribution": [est[f"skipped_{k}"].mean for k in range(cfg.skip_budget + 1)],
        "failovers_per_microbatch": est["failovers_per_microbatch"].mean,
        "worker_time": est["worker_time"].mean * replications,
        "simulated_time": est["simulated_time"].mean * replications,
        "microbatches": cfg.microbatches,
        "replications": replications,
        "stage_crossings_per_second": crossings / busy if busy > 0 else None,
        "wall_time": wall,
        "seed": seed,
    }


def run(args: argparse.Namespace) -> int:
    cfg, placement = config_from_args(args)
    if args.show_placement and placement is not None and not args.json:
        render = getattr(placement, "render", None)
        print(render() if callable(render) else str(placement))
        print()
    out = simulate(cfg, replications=args.replications, seed=args.seed,
                   executor=args.executor, workers=args.workers)
    if args.trace:
        out["trace_file"] = str(write_trace(cfg, args.seed, args.trace))
    if args.json:
        if args.show_placement and placement is not None:
            out["placement"] = [[list(c) for c in s] for s in cfg.domain_placement.replica_domains]
        emit_json(out)
        return 0
    reps = cfg.replicas
    r_text = str(reps[0]) if len(set(reps)) == 1 else ",".join(map(str, reps))  # type: ignore[arg-type]
    print(f"L={cfg.stages} stages x r={r_text} replicas ({cfg.workers} workers), s={cfg.skip_budget}, "
          f"a={cfg.availability}, rho={cfg.domain_outage if placement is None else 'layout'}, "
          f"kappa={cfg.skip_penalty}; {args.replications} replications x {cfg.microbatches} "
          f"microbatches, seed {args.seed}")
    exact_note = "" if out["exact_applies"] else " (snapshot reference; timing changes the law)"
    rows = []
    for label, key, exact in [("drop rate", "drop_rate", out["predicted_drop_rate"]),
                              ("mean quality (delivered)", "mean_quality", out["predicted_mean_quality"]),
                              ("goodput", "goodput", None)]:
        e = out[key + "_ci"]
        ok = "" if exact is None or not out["exact_applies"] else ("yes" if e.contains(exact) else "NO")
        rows.append((label, "-" if exact is None else f"{exact:.6g}", str(e), ok))
    print_table(rows, ("quantity", "exact" + exact_note, "simulated (95% CI)", "agrees"))
    print(f"mean skipped {out['mean_skipped']:.4g}; latency mean {out['latency_mean']:.4g}, "
          f"p50 {out['latency_p50']:.4g}, p99 {out['latency_p99']:.4g}; failovers per microbatch "
          f"{out['failovers_per_microbatch']:.4g}; simulated time {out['simulated_time']:.6g}")
    if args.trace:
        print(f"event trace of replication 0 written to {out['trace_file']}")
    return 0
