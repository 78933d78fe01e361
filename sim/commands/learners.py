"""``dtsim learners``: DiLoCo's outer loop over learners of many chips (the event-aggregated
engine of :mod:`sim.training.learners`): goodput under per-chip failures at scale."""

from __future__ import annotations

import argparse
import math
import resource
import time
from typing import Any

from ..errors import SimulationError
from ..results import summarize
from ..runner import replicate
from ..training.learners import LEARNER_METRICS, STEP_LAWS, LearnersConfig, learners_model
from ._applies import refuse_unless
from ._common import add_run_options, emit_json, print_table
from ._units import (
    LEARNERS_UNITS,
    RATE_HELP,
    SIZE_HELP,
    TIME_HELP,
    RateOption,
    SizeOption,
    TimeOption,
    UnlimitedTimeOption,
    check_learners,
    given_line,
    units_object,
)

NAME = "learners"
HELP = ("DiLoCo learners of many chips under per-chip failures: goodput at scale "
        "(event-aggregated engine, 10^6 chips in minutes)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = LearnersConfig()
    a = p.add_argument
    a("--learners", type=int, default=d.learners, help=f"learners M (default {d.learners})")
    a("--chips", type=int, default=d.chips,
      help=f"chips a learner (all needed; default {d.chips})")
    a("--step-time", action=TimeOption, default=d.step_time, metavar="TIME",
      help=f"an inner step's mean time: {TIME_HELP} (default 1)")
    a("--step-time-distribution", default=d.step_time_distribution,
      help="law of a step's time (mean --step-time): " + ", ".join(STEP_LAWS))
    a("--step-time-shape", type=float, default=d.step_time_shape,
      help="lognormal sigma of a step's time (default 0.5)")
    a("--every", type=int, default=d.every, help=f"inner steps H an outer step (default {d.every})")
    a("--steps", type=int, default=d.steps, help=f"inner steps N, a multiple of H (default {d.steps})")
    a("--quorum", type=int, default=None, metavar="K",
      help="an outer step goes on once K learners reported and either all members have or "
           "--grace passed (default: synchronous)")
    a("--grace", action=TimeOption, default=0.0, metavar="W",
      help=f"the grace window (with --quorum): {TIME_HELP}")
    a("--heartbeat", action=TimeOption, default=d.heartbeat, metavar="TIME",
      help=f"the time the survivors of an outer all-reduce take to notice a learner lost in "
           f"it (INTELLECT-1's heartbeat timeout): {TIME_HELP} (default {d.heartbeat:g})")
    a("--on-loss", default=d.on_loss,
      help="then: rerun the all-reduce among them (INTELLECT-1; default) or drop the outer "
           "step on every survivor (torchft)")
    a("--retries", type=int, default=d.retries,
      help=f"tries of an outer all-reduce with --on-loss rerun (default {d.retries})")
    a("--recovery", default=d.recovery,
      help="what a learner back downloads: prime (INTELLECT-1's live recovery: fp32 "
           "parameters, outer momentum, AdamW's moments; default), torchft (its DiLoCo "
           "example's state dicts) or params (the parameters alone)")
    a("--size", action=SizeOption, default=d.size, metavar="SIZE",
      help=f"model parameters: {SIZE_HELP} (default 0)")
    a("--bandwidth", action=RateOption, default=d.bandwidth, metavar="RATE",
      help=f"a learner's WAN bandwidth: {RATE_HELP} (default inf)")
    a("--latency", action=TimeOption, default=d.latency, metavar="TIME",
      help=f"latency between learners: {TIME_HELP} (default 0)")
    a("--bits", type=int, default=d.bits, help="payload bits a value (32, 16, 8, 4)")
    a("--value-bits", type=int, default=d.value_bits, help="bits a value has in --size (16)")
    a("--topk", type=float, default=None, help="top-k fraction sent (32-bit indices)")
    a("--mtbf", action=UnlimitedTimeOption, default=d.mtbf, metavar="TIME",
      help=f"a chip's mean time to failure: {TIME_HELP} (default inf)")
    a("--replace-time", action=TimeOption, default=d.replace_time, metavar="TIME",
      help=f"a failed chip's replacement time: {TIME_HELP}")
    a("--chip-download", action=TimeOption, default=d.chip_download, metavar="TIME",
      help=f"a replaced chip's weight fetch time (none when its learner will download "
           f"the model: it is behind the latest): {TIME_HELP}")
    a("--max-time", action=UnlimitedTimeOption, default=math.inf, metavar="TIME",
      help=f"stop a replication here, inclusive (what happens at exactly TIME happens): "
           f"{TIME_HELP}")
    add_run_options(p, replications=5)


def _config_from_args(args: argparse.Namespace) -> LearnersConfig:
    """Every option validated into a :class:`LearnersConfig` (before any simulation)."""
    return LearnersConfig(
        learners=args.learners, chips=args.chips, step_time=args.step_time,
        step_time_distribution=args.step_time_distribution, step_time_shape=args.step_time_shape,
        every=args.every, steps=args.steps, quorum=args.quorum, grace=args.grace, size=args.size,
        bandwidth=args.bandwidth, latency=args.latency, bits=args.bits,
        value_bits=args.value_bits, topk=args.topk, mtbf=args.mtbf,
        replace_time=args.replace_time, chip_download=args.chip_download,
        max_time=args.max_time, heartbeat=args.heartbeat, on_loss=args.on_loss,
        retries=args.retries, recovery=args.recovery)


def _children_cpu() -> float:
    """User and system CPU seconds of this process's reaped children (the pool's workers)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: argparse.Namespace) -> int:
    from ..errors import check_int

    check_int("replications", args.replications, low=1)
    # options that would have no effect are refused, never silently ignored
    refuse_unless(args, "step_time_shape", args.step_time_distribution == "lognormal",
                  "with --step-time-distribution lognormal")
    for dest in ("replace_time", "chip_download", "heartbeat", "on_loss", "retries",
                 "recovery"):
        refuse_unless(args, dest, math.isfinite(args.mtbf), "with a finite --mtbf")
    refuse_unless(args, "retries", args.on_loss == "rerun", "with --on-loss rerun (a "
                  "discarded outer step is not tried again)")
    refuse_unless(args, "workers", args.executor != "serial", "with --executor local")
    cfg = _config_from_args(args)
    # (user trial 3) the payload options act on --size only: without it an outer step moves
    # nothing, and --bandwidth 1Gbit/s or --bits 4 would print a utilisation they never set
    for dest in ("bandwidth", "bits", "topk", "value_bits", "recovery"):
        refuse_unless(args, dest, cfg.size > 0, "with --size > 0 (the model an outer step "
                      "all-reduces; default 0: nothing moves)")
    check_learners(args)
    # (user trial 3) the CPU of the pool's processes too (reaped when the pool shuts down):
    # with --executor local the parent's own CPU alone said 0.00985 s for 1.3 s of work
    w0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    records = replicate(learners_model, cfg, replications=args.replications, seed=args.seed,
                        executor=args.executor, workers=args.workers)
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0 + _children_cpu() - k0
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    est = summarize(records, list(LEARNER_METRICS), lower=0.0, fixed=cfg.fixed_metrics(),
                    fractions=("goodput_fraction", "compute_utilisation"))
    peak = max(resource.getrusage(who).ru_maxrss for who in
               (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024  # the largest process
    out: dict[str, Any] = {k: est[k].mean for k in LEARNER_METRICS}
    out.update({f"{k}_ci": est[k] for k in ("goodput_fraction", "compute_utilisation",
                                             "training_time")})
    out.update(chips=cfg.learners * cfg.chips, replications=args.replications, seed=args.seed,
               run_seconds=wall, run_cpu_seconds=cpu, run_peak_rss_mib=peak,
               synchronisation="synchronous" if cfg.quorum is None else
               f"quorum {cfg.quorum}, grace {cfg.grace:g}")
    if args.json:
        out["units"] = units_object(LEARNERS_UNITS, args)
        emit_json(out)
        return 0
    print(f"{cfg.learners} learners x {cfg.chips} chips = {cfg.learners * cfg.chips:g} chips, "
          f"H={cfg.every}, N={cfg.steps}, {out['synchronisation']}; {args.replications} "
          f"replications, seed {args.seed}")
    line = given_line(args)
    if line is not None:
        print(line)
    # a figure no replication has (time to train when none finished): said, not 'nan'
    rows = [(label, str(est[key]) if est[key].n else "not measured") for label, key in (
        ("goodput (merged chip compute / chip time)", "goodput_fraction"),
        ("compute utilisation (fraction of wall time)", "compute_utilisation"),
        ("time to train (s)", "training_time"),
        ("outer steps taken", "outer_steps"),
        ("outer all-reduces started (aborted ones too)", "outer_syncs"), ("chip failures", "failures"),
        ("downloads (model, missed outer steps)", "outer_downloads"), ("late merges", "late_merges"),
        ("work lost (chip s)", "lost_outer_work"),
        ("outer all-reduces aborted (a learner lost in them)", "outer_aborts"),
        ("time in aborted all-reduces (s)", "outer_aborted"), ("events", "events"))]
    print_table(rows, ("quantity", "mean (95% CI)"))
    stalled = sum(1 for r in records if r.get("stalled"))
    stopped = sum(1 for r in records if not r.get("finished") and not r.get("stalled"))
    if stopped:
        print(f"{stopped} of {args.replications} replications stopped at --max-time "
              f"{cfg.max_time:g} before {cfg.steps} inner steps; time to train is not measured")
    if stalled:
        print(f"{stalled} of {args.replications} replications stopped without an outer step "
              f"for {cfg.stall_limit():.4g} s (1000 failure-free rounds of "
              f"every={cfg.every} steps and the sync): the learners' chips fail faster than "
              f"they take {cfg.every} inner steps (--mtbf {cfg.mtbf:g}, {cfg.chips} chips a "
              "learner); time to train is not measured")
    print(f"ran in {wall:.3g} s wall, {cpu:.3g} s CPU, peak resident memory {peak:.0f} MiB")
    return 0
