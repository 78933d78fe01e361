"""``dtsim train``: pipeline training in simulated wall clock, simulated vs exact references.

Replicas are servers, microbatches come in steps under a schedule (GPipe,
1F1B, SWARM, async), failures and preemptions cost lost passes, reroutes,
weight downloads and restarts from checkpoint; the output gives throughput,
step times, time to train, bubble, utilisation, lost time by cause and cost,
next to every exact reference that applies (null, with the reason, where none does).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import Any

from ..engines import engine_names, predictions, select
from ..errors import (
    ConfigError,
    SimulationError,
    ascii_float,
    ascii_int,
    check,
    check_choice,
    check_int,
    format_bytes,
)
from ..failures import DISTRIBUTIONS
from ..results import summarize
from ..rng import Streams
from ..runner import replicate
from ..training import (
    ARRIVALS,
    P2PS,
    PASS_TIME_DISTRIBUTIONS,
    ROUTINGS,
    SCHEDULES,
    SYNCS,
    TrainingConfig,
    host_groups,
    read_speeds,
    stage_workers,
)
from ..training.checkpointing import with_auto_checkpoint
from ..training.flow import LOST_CAUSES
from ..training.outer import diloco_groups
from ..units import RATE, SIZE, TIME, format_quantity, parse_quantity
from ._applies import given, refuse_unless, verdict
from ._common import (
    add_run_options,
    check_export_file,
    check_not_an_input,
    emit_json,
    print_table,
    time_unit,
    warn,
    write_export,
)
from ._timeline import RecordingModel, add_timeline_options, finish_timeline, timeline_from_args
from ._units import (
    RATE_HELP,
    RUN_TIME_HELP,
    SIZE_HELP,
    TIME_HELP,
    RateOption,
    SizeOption,
    TimeOption,
    TimesOption,
    UnlimitedTimeOption,
    check_train,
    given_line,
    in_seconds,
    refuse_off_the_second,
    train_transfers,
    train_units,
    units_object,
)
from .trace import (
    add_failure_trace_options,
    assumed_unit,
    failure_trace_option,
    print_trace_instances,
    print_unit_note,
    trace_instances,
)

NAME = "train"
HELP = "pipeline training in simulated wall clock: throughput, step time, cost; vs exact references"

PLACEMENTS = ("shared", "spread", "packed", "random")
#: Laws that take a shape parameter.
SHAPED = ("weibull", "lognormal", "pareto")
#: JSON key -> (metric of the engine, prediction metric) for the predicted_* outputs.
PREDICTED = {
    "predicted_step_time": "step_time_mean",
    "predicted_bubble_fraction": "bubble_fraction",
    "predicted_throughput": "throughput",
    "predicted_throughput_steady": "throughput_steady",
    "predicted_wall_time": "training_time",
    "predicted_latency_mean": "latency_mean",
    "predicted_drop_rate": "drop_rate",
    "predicted_mean_quality": "mean_quality",
    "predicted_checkpoint_interval": "checkpoint_interval",
    "predicted_compute_utilisation": "compute_utilisation",
    "predicted_wan_bytes_sent": "wan_bytes_sent",
    "predicted_allreduce_bytes_sent": "allreduce_bytes_sent",
}


#: A fraction of worker time closer to 0 than this is float rounding of ``1 - busy / total``
#: (a few ulps of 1, ~1e-16), printed as 0 (a real one so small is not shown by 4 digits).
FRACTION_ROUNDING = 1e-12
#: Fractions of worker time whose Student-t interval is cut at 1 (it went past it: goodput
#: 0.576 [0, 1.35] with two replications).
FRACTIONS = ("compute_utilisation", "compute_utilisation_min", "compute_utilisation_max",
             "goodput_fraction", "utilisation", "bubble_fraction")


def _fraction(x: float) -> str:
    """A fraction of worker time as the summary line prints it: 4 significant digits, one
    within float rounding of 0 (``-7.661e-16``) as ``0``; the JSON keeps the value."""
    return _figure(x, lambda v: "0" if abs(v) < FRACTION_ROUNDING else f"{v:.4g}")


def _figure(x: float, text: Any = None) -> str:
    """A figure of the summary lines (4 significant digits, or ``text(x)``), or ``not
    measured`` where the run has none (NaN, or a ratio over 0 that overflowed: ``--json`` says
    null), as a metric no point measured is named so by dtsim run and dtsim plot."""
    if not math.isfinite(x):
        return "not measured"
    return text(x) if text is not None else f"{x:.4g}"


def _floats(text: str) -> float | tuple[float, ...]:
    try:
        vals = tuple(ascii_float(p) for p in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or a comma list: {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def _checkpoint_every(text: str) -> int | str:
    """``--checkpoint-every``: a whole number of steps, or ``auto`` (the exact best interval)."""
    if str(text) == "auto":
        return "auto"
    try:
        return ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or auto: {text!r}") from None


def _ints(text: str) -> int | tuple[int, ...]:
    try:
        vals = tuple(ascii_int(p) for p in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or a comma list: {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = TrainingConfig()
    a = p.add_argument
    a("--stages", type=int, default=d.stages, help=f"pipeline stages L (default {d.stages})")
    a("--replicas", type=_ints, default=None,
      help="replicas per stage, or one per stage as a comma list (default 1, or the speeds file's)")
    a("--microbatches-per-step", type=int, default=d.microbatches, dest="microbatches",
      metavar="M", help=f"microbatches per step m (default {d.microbatches})")
    a("--steps", type=int, default=d.steps, help=f"training steps N (default {d.steps})")
    a("--schedule", default=None,
      help="one of " + ", ".join(SCHEDULES) + f" (default {d.schedule}; 1f1b with --plan)")
    a("--routing", default=d.routing, help="one of " + ", ".join(ROUTINGS)
      + f" (default {d.routing}; SWARM's client balancer: trainer-balancer, one a trainer "
      "at each stage, on the swarm schedule; least-assigned-time, its rule with one "
      "balancer a stage)")
    a("--forward-time", action=TimesOption, default=1.0, metavar="TIME[,TIME...]",
      help=f"nominal forward time per stage, or one per stage: {RUN_TIME_HELP} (default 1)")
    a("--backward-ratio", type=float, default=d.backward_ratio,
      help=f"backward time over forward time (default {d.backward_ratio}; 0: forward only)")
    a("--backward-time", action=TimesOption, default=None, dest="backward_times",
      metavar="TIME[,TIME...]",
      help=f"nominal backward time per stage, or one per stage: {RUN_TIME_HELP} (replaces "
           "--backward-ratio)")
    a("--p2p", default=None, metavar="MODE",
      help="point-to-point transfers: " + ", ".join(P2PS) + " (default overlap: on a "
           "communication stream beside the compute, one at a time per sender and receiver "
           "(FIFO, as NCCL runs a stream); blocking: both ends held for the transfer, in "
           "DeepSpeed's paired send/recv order (without --network, or with --plan); batched: "
           "blocking in Megatron-LM's 1F1B order, a send and the receive of the other "
           "direction posted together and both waited for (--schedule 1f1b); shared: "
           "overlapped, each on "
           "a connection of its own, sharing links max-min (no framework sends so: kept for "
           "comparison); with --plan the plan's framework's, which this overrides)")
    a("--framework", default=None, metavar="NAME[:key=value,...]",
      help="with --plan: the framework that runs it, overriding the plan's key by key (one "
           "of deepspeed, sailor-deepspeed, megatron, ddp: sim/profiles/frameworks.py; default: "
           "the plan's, a Sailor plan_config's sailor-deepspeed, else deepspeed), with a plan "
           "file's framework keys (version, precision, the framework's options: "
           "megatron:overlap_grad_reduce=true); the plan's keys not given stay for the same "
           "framework and release, only its precision for another; it sets the p2p mode, the "
           "all-reduce's placement (--sync) and buckets, and the value sizes")
    a("--virtual-stages", type=int, default=1, metavar="V",
      help="model chunks per device with --schedule interleaved (default 1)")
    a("--plan", default=None, metavar="FILE",
      help="a real plan (dtsim JSON/TOML, a Sailor plan_config, or a Megatron-LM launch line: "
           "a shell or text file with torchrun ... pretrain_gpt.py --tensor-model-parallel-size "
           "..., read, never run, with --gpu and --model): stages, layers, replicas on "
           "GPU types with TP, micro-batch and global batch size; times, transfers, all-reduce "
           "and memory come from the profiles")
    a("--model", default=None, metavar="NAME", help="with --plan: the model of the profiles")
    a("--gpu", default=None, metavar="NAME",
      help="with a Megatron-LM launch --plan: the GPU type of every rank (a name of the GPU "
           "catalogue, e.g. RTX-3090), or of each host, [NAME,]HOST=NAME,... (e.g. "
           "V100,g4dn-0=T4: the host g4dn-0's ranks on T4s, the others on V100s)")
    a("--zone", default=None, metavar="ZONE",
      help="with a Megatron-LM launch --plan: the zone of its nodes (default: the one zone "
           "the network has for --gpu)")
    a("--profiles", default=None, metavar="DIR",
      help="with --plan: a profiles folder (default: the shipped Sailor profiles)")
    a("--fleet", default=None, metavar="FILE",
      help="with --plan: a fleet file (dtsim plan --fleet's); its links time the plan's "
           "transfers in place of the profiles' network for the pairs of node kinds it names, "
           "as in the search that wrote the plan (its nodes are not used; a file with no link "
           "between node kinds of the plan is refused)")
    a("--explain", action="store_true",
      help="with --plan: print where an iteration's time goes (compute per stage, bubbles, "
           "point-to-point, all-reduce, optimizer)")
    a("--export-plan", default=None, metavar="FILE",
      help="with --plan: also write the plan as this run reads it to FILE, in dtsim's JSON "
           "plan format (model, micro-batch and global batch size, each stage's layers and "
           "replicas with GPU, TP, node size, zone and host, the framework with its version, "
           "precision and options, --framework's keys applied), then run as without it (the "
           "numbers are the same): dtsim train --plan FILE with the same options, less --gpu "
           "and --zone (the file names its GPUs and zones), prints the same; an existing FILE "
           "is refused unless --overwrite")
    a("--overwrite", action="store_true",
      help="with --export-plan or --timeline: replace an existing FILE, whatever it holds "
           "(without it --export-plan replaces no file and --timeline only a timeline dtsim "
           "wrote)")
    a("--pass-time-distribution", default=d.pass_time_distribution,
      help="law of a pass time: " + ", ".join(PASS_TIME_DISTRIBUTIONS))
    a("--pass-time-shape", type=float, default=None,
      help="Weibull shape (default 0.7), lognormal sigma (default 1) or Pareto tail index "
           "alpha > 1 (required) of the pass-time law")
    a("--sync-wait", type=int, default=None, metavar="K",
      help="fastest k of n: each step waits for the first K of the n pipelines (replicas "
           "per stage; gpipe or 1f1b) and drops the rest (default: wait for all)")
    a("--stragglers", default=d.stragglers,
      help="with --sync-wait: cancel (interrupt the others' passes) or drop (let them finish "
           "and throw their work away); default cancel")
    a("--speeds", default=None, metavar="FILE",
      help="CSV stage,replica,speed[,price] of every replica (price in US dollars per "
           "worker-hour)")
    a("--speed-spread", type=float, default=0.0,
      help="without --speeds: lognormal sigma of drawn speeds (mean 1; default 0)")
    a("--param-size", action=SizeOption, default=0.0, metavar="SIZE",
      help=f"parameters per stage: {SIZE_HELP} (default 0)")
    a("--activation-size", action=SizeOption, default=0.0, metavar="SIZE",
      help=f"activations per microbatch per hop: {SIZE_HELP} (default 0)")
    a("--bandwidth", action=RateOption, default=math.inf, metavar="RATE",
      help=f"link bandwidth: {RATE_HELP} (default inf)")
    a("--latency", action=TimesOption, default=0.0, metavar="TIME[,TIME...]",
      help=f"link latency, or one per hop: {TIME_HELP} (default 0)")
    a("--sync", default=d.sync, metavar="KIND[:K=V,...]",
      help="how replicas synchronise: " + ", ".join(SYNCS) + " (default allreduce: the "
           "gradients every step); allreduce:overlap=backward[,bucket_size=B][,buckets=ddp|"
           "megatron] releases buckets of gradients as the last backward pass produces them "
           "(PyTorch DDP's 25 MiB, first 1 MiB; with --plan the plan's framework's, Megatron-LM's "
           "max(4e7, 1e6 dp) values when it never overlaps); bucket_size=B without overlap: the "
           "all-reduce's bucket; with --plan, default: the framework's; B in size units or with "
           "a unit (25MiB); diloco:every=H[,"
           "fragments=P,order=sequential|strided,overlap=TAU,bits=16|8|4,topk=F,groups=M,"
           "quorum=K,grace=W]: DiLoCo across groups of pipelines (each its own inner all-reduce; "
           "every H inner steps an outer all-reduce of the pseudo-gradients; W in time units or "
           "with a unit, 5min, which needs --hour 3600; docs/diloco.md)")
    a("--value-bits", type=int, default=d.value_bits, metavar="B",
      help="bits a value has in --param-size (and a plan's sizes): DiLoCo's payload is "
           "bits/value_bits of it (default 16)")
    a("--optimizer-time", action=TimeOption, default=0.0, metavar="TIME",
      help=f"optimizer step time: {RUN_TIME_HELP} (default 0)")
    a("--availability", type=float, default=d.availability, help="worker availability (default 1)")
    a("--mean-downtime", action=TimeOption, default=d.mean_downtime, metavar="TIME",
      help=f"mean worker outage: {RUN_TIME_HELP}")
    a("--domain-outage", type=float, default=d.domain_outage,
      help="unavailability of each stage's shared domain (default 0)")
    a("--domain-downtime", action=TimeOption, default=d.domain_downtime, metavar="TIME",
      help=f"mean domain outage: {RUN_TIME_HELP}")
    a("--failure-distribution", default=d.failure_distribution,
      help="up/down law: " + ", ".join(DISTRIBUTIONS))
    a("--failure-shape", type=float, default=None,
      help="Weibull shape, lognormal sigma or Pareto tail index alpha > 1")
    a("--topology", default=None, metavar="SPEC",
      help="place replicas on a layout (its domains and link latencies are used; link "
           "bandwidth in B/s and latency in s, or with units: tree:host_latency=5us)")
    a("--placement", default=None, metavar="POLICY",
      help="with --topology: " + ", ".join(PLACEMENTS) + " (default shared)")
    a("--mtbf", action=UnlimitedTimeOption, default=math.inf, metavar="TIME",
      help=f"spot: mean time to preemption: {RUN_TIME_HELP} (default inf)")
    a("--replace-time", action=TimeOption, default=0.0, metavar="TIME",
      help=f"spot: time to replace a preempted worker: {RUN_TIME_HELP}")
    a("--detection-timeout", action=TimeOption, default=0.0, metavar="TIME",
      help=f"time to detect a lost pass: {RUN_TIME_HELP}")
    a("--skip-budget", type=int, default=0, help="stages a microbatch may skip")
    a("--skip-penalty", type=float, default=0.0, help="quality lost per skip kappa")
    a("--penalty", default=d.penalty, help="multiplicative or additive")
    a("--max-wait", action=UnlimitedTimeOption, default=0.0, metavar="TIME",
      help=f"wait at an out stage: {RUN_TIME_HELP} (default 0; inf: stall)")
    a("--checkpoint-every", type=_checkpoint_every, default=0, metavar="K",
      help="checkpoint every K steps, or auto: the whole K of least exact cost around the "
           "exact best interval (Poisson job failures, restart model)")
    a("--checkpoint-cost", action=TimeOption, default=0.0, metavar="C",
      help=f"checkpoint time: {RUN_TIME_HELP}")
    a("--restart-cost", action=TimeOption, default=None, metavar="Q",
      help=f"restart time after a lost step (the restart model): {RUN_TIME_HELP} (default none)")
    a("--price", type=_floats, default=None,
      help="US dollars per worker-hour: one value, or one per worker (stage-major); with --plan per "
           "GPU-hour (a replica of TP t costs t times it; default the catalogue's prices)")
    a("--price-series", default=None, metavar="FILE",
      help="a CSV of time,price: US dollars per worker-hour over the run's time (instead of "
           "--price), integrated over each worker's billed time")
    a("--samples-per-microbatch", type=float, default=1.0, help="samples in a microbatch")
    a("--hour", type=float, default=3600.0,
      help="time units per hour (default 3600: the time unit is a second; a time or rate given "
           "with a unit needs 3600; not with --plan, whose times are seconds; a failure trace "
           "replays --trace-speedup trace seconds per time unit, --step-times and "
           "--price-series times are in time units)")
    a("--arrival", default=d.arrival, help="async only: " + ", ".join(ARRIVALS))
    a("--arrival-rate", type=float, default=d.arrival_rate, help="async arrival rate")
    a("--max-time", action=UnlimitedTimeOption, default=math.inf, metavar="TIME",
      help=f"stop each replication at this simulated time, inclusive (what happens at exactly "
           f"TIME happens): {RUN_TIME_HELP} (default inf: when N steps are done)")
    a("--network", default=None, metavar="SPEC|FILE",
      help="the network every transfer crosses (a topology spec or graph file: links with "
           "bandwidth in B/s and latency in s, or with units, e.g. tree:host_bandwidth="
           "100Gbit/s,host_latency=5us; sharing; hosts' NICs); transfers then share its links")
    a("--network-nodes", default=None, metavar="LIST",
      help="with --network: the node of each replica, stage-major, comma-separated (default: "
           "the hosts --placement chose when --topology is the same spec, else the network's "
           "hosts in order)")
    a("--tensor-parallel", type=_ints, default=1, metavar="T",
      help="tensor-parallel ranks of each replica (or one per stage): T concurrent flows "
           "through the node's NIC for transfers and T all-reduce rings (default 1)")
    a("--nic", action=RateOption, default=None, metavar="RATE",
      help=f"with --network: NIC capacity (each way) of every host without one: {RATE_HELP}")
    a("--bucket-size", action=SizeOption, default=math.inf, metavar="SIZE",
      help=f"with --network: all-reduce bucket per rank: {SIZE_HELP} (default inf: one bucket)")
    a("--contention", default="on", metavar="on|off",
      help="with --network: on (default) transfers share links max-min fairly; off: each "
           "alone on its route")
    a("--network-weighting", default="maxmin", metavar="NAME",
      help="with --network: maxmin (default) or rtt (SimGrid CM02's 1/latency weighting)")
    a("--checkpoint-node", default=None, metavar="NODE",
      help="with --network: checkpoints write each stage's parameters to this node")
    a("--stall-limit", action=UnlimitedTimeOption, default=None, metavar="T",
      help="stop a replication that makes no progress (no checkpoint, no new step) for this "
           f"simulated time, and say why: {RUN_TIME_HELP} (default: 1000 failure-free "
           "checkpoint intervals; inf: never)")
    a("--engine", default="auto",
      help="training engine: auto (the DES; the job engine for a step-level strategy), des, "
           "compiled (the numba event loop, same model with its own random numbers; refuses "
           "what it does not model) or job")
    g = p.add_argument_group("fault-tolerance strategies (sim.training.strategies)")
    g.add_argument("--strategy", default=None, metavar="NAME[:K=V,...]",
                   help="swarm (this DES, swarm schedule; with --plan the plan's stages "
                        "and replicas as SWARM's stages and peer pools, --routing its "
                        "routing), checkpoint-restart (Varuna, "
                        "CheckFreq), redundancy (Bamboo) or reconfiguration (Oobleck), with "
                        "parameters, e.g. checkpoint-restart:every=20,interval=adaptive (its times "
                        "take units: checkpoint=2min); with --plan, checkpoint_bandwidth=1GB/s "
                        "(each node's storage rate) times a checkpoint and a restart's read from "
                        "the plan's bytes; redundancy runs Bamboo's eager recovery (its copy "
                        "on the GPU; with TP, a shard a TP rank: dtsim's extension), "
                        "redundancy:mode=lazy its code's default; "
                        "--checkpoint-every/--checkpoint-cost/--restart-cost set its "
                        "every/checkpoint/restart")
    g.add_argument("--step-times", default=None, metavar="FILE",
                   help="a CSV of workers,step_time or pipelines,step_time: measured step "
                        "times for a step-level strategy (default: the DES's failure-free "
                        "steps)")
    g.add_argument("--preemption-notice", default=None, metavar="TIME|aws|gcp",
                   help="announce each preemption (trace or spot model) this long ahead: "
                        f"{RUN_TIME_HELP}; aws (120 s) or gcp (30 s); the strategy decides "
                        "what it does")
    add_failure_trace_options(p)
    add_timeline_options(p, what="every pass, transfer, collective chunk, step, checkpoint, "
                         "restart, down interval and preemption")
    add_run_options(p, replications=10)


def _prices(value: Any, replicas: tuple[int, ...]) -> Any:
    """``--price``: one value, or one per worker reshaped per stage."""
    if value is None or not isinstance(value, tuple):
        return value
    n = sum(replicas)
    check(len(value) == n, "price", f"one value or one per worker ({n} workers)", value)
    rows, k = [], 0
    for r in replicas:
        rows.append(tuple(value[k:k + r]))
        k += r
    return tuple(rows)


def _per_replica(name: str, value: Any, counts: tuple[int, ...], *,
                 per_worker: bool = False) -> Any:
    """One value, one per stage, or (``per_worker``) one per worker stage-major, as a grid."""
    if not isinstance(value, tuple):
        return value
    n = sum(counts)
    if per_worker:
        check(len(value) == n, name, f"one per worker, stage-major ({n} workers)",
              ",".join(map(str, value)))
        rows, k = [], 0
        for r in counts:
            rows.append(tuple(value[k:k + r]))
            k += r
        return tuple(rows)
    check(len(value) == len(counts), name, f"one value or one per stage ({len(counts)})",
          ",".join(map(str, value)))
    return tuple((v,) * r for v, r in zip(value, counts, strict=True))


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options that would have no effect with the others."""
    if args.schedule is None:
        args.schedule = "1f1b" if args.plan is not None else TrainingConfig().schedule
    refuse_unless(args, "failure_shape", args.failure_distribution in SHAPED,
                  "with --failure-distribution weibull, lognormal or pareto")
    refuse_unless(args, "pass_time_shape", args.pass_time_distribution in SHAPED,
                  "with --pass-time-distribution weibull, lognormal or pareto")
    refuse_unless(args, "stragglers", args.sync_wait is not None, "with --sync-wait")
    refuse_unless(args, "workers", args.executor != "serial", "with --executor local or dask")
    is_async = args.schedule == "async"
    refuse_unless(args, "arrival_rate", is_async and args.arrival != "saturated",
                  "with --schedule async and --arrival poisson or fixed")
    refuse_unless(args, "replace_time", math.isfinite(args.mtbf), "with a finite --mtbf")
    refuse_unless(args, "checkpoint_cost", args.checkpoint_every == "auto"
                  or args.checkpoint_every > 0 or getattr(args, "_job", False),
                  "with --checkpoint-every > 0 or auto")
    refuse_unless(args, "speed_spread", args.speeds is None, "without --speeds")
    refuse_unless(args, "domain_downtime", args.domain_outage > 0 or args.topology is not None,
                  "with --domain-outage > 0 or --topology (no domain outages otherwise)")
    refuse_unless(args, "skip_penalty", args.skip_budget > 0, "with --skip-budget > 0")
    # (audit 7) it shapes the quality after a skip only: kappa 0 loses nothing either way
    refuse_unless(args, "penalty", given(args, "skip_penalty"), "with --skip-penalty")
    refuse_unless(args, "mean_downtime", args.availability < 1,
                  "with --availability < 1 (no worker goes down at 1)")
    plan = args.plan is not None
    for dest in ("model", "profiles", "fleet", "explain", "framework", "gpu", "zone",
                 "export_plan"):
        refuse_unless(args, dest, plan, "with --plan")
    export = getattr(args, "export_plan", None)
    refuse_unless(args, "overwrite", export is not None or getattr(args, "timeline", None)
                  is not None, "with --export-plan or --timeline")
    if plan and export is not None:
        check_export_file("export_plan", export, getattr(args, "overwrite", False))
        check_not_an_input("export_plan", export, args)
        timeline = getattr(args, "timeline", None)
        check(timeline is None or os.path.realpath(timeline) != os.path.realpath(export),
              "export_plan", "another file than --timeline's (the timeline, written after the "
              "run, would replace the plan)", export)
    # (--timeline over a file the run reads: refused by timeline_from_args, every command)
    # a plan runs over its network (sim.profiles.build.plan_network), where the DES runs the
    # frameworks' fixed device programs: GPipe and 1F1B (build_plan took 1f1b-dynamic, and
    # TrainingConfig then refused it, after the profiles were read, naming 'a network')
    swarm = getattr(args, "_swarm", False)  # a plan run as SWARM (sim.profiles.swarm)
    if plan and not swarm:  # (the profiles' modules only for a plan run)
        from ..profiles.build import PLAN_SCHEDULES

        check(args.schedule in PLAN_SCHEDULES, "schedule", "1f1b or gpipe with --plan (a plan "
              "runs over its network, as the frameworks' fixed device programs)", args.schedule)
    for dest in ("stages", "replicas", "microbatches", "forward_time", "backward_ratio",
                 "backward_times", "speeds", "speed_spread", "param_size", "activation_size",
                 "bandwidth", "latency", "optimizer_time", "samples_per_microbatch",
                 "topology", "placement", "network"):
        refuse_unless(args, dest, not plan, "without --plan (the plan and the profiles set it)")
    # SWARM routes each pass at its stage among the stage's peers: the swarm schedule's routing
    refuse_unless(args, "routing", not plan or swarm, "without --plan, or with --plan and "
                  "--strategy swarm (the plan's pipelines are fixed otherwise)")
    if swarm:  # a SWARM peer sends beside its compute and its stage averages once a step
        refuse_unless(args, "explain", False, "without --strategy swarm (it breaks a fixed "
                      "device program's iteration down; SWARM routes every pass afresh)")
        refuse_unless(args, "p2p", False, "without --strategy swarm with --plan (SWARM's "
                      "peers send activations beside their compute: p2p overlap)")
        refuse_unless(args, "sync", False, "without --strategy swarm with --plan (a stage's "
                      "peers average their gradients after the step's batch: the plan's "
                      "all-reduce)")
    # a plan's strategy run times each formation by the plan re-planned for it (its profiles,
    # framework and network: sim.profiles.formations), never by a table
    refuse_unless(args, "step_times", not plan, "without --plan (with --plan and --strategy "
                  "each formation's step time is the plan's own, re-planned for it and run on "
                  "the framework engine)")
    refuse_unless(args, "hour", not plan, "without --plan (a plan's times are seconds; another "
                  "--hour would only relabel them)")
    # (audit 7) a plan runs 1f1b, gpipe or 1f1b-dynamic, never async: --arrival was ignored
    refuse_unless(args, "arrival", not plan, "without --plan (arrivals pace --schedule async "
                  "only; a plan's schedule has a step barrier)")
    refuse_unless(args, "price_series", not plan, "without --plan (a plan's --price is per "
                  "GPU-hour; a price series per worker-hour is not defined for it yet)")
    for dest in ("sync_wait", "stragglers"):  # they were accepted and ignored with --plan
        refuse_unless(args, dest, not plan, "without --plan (DeepSpeed's pipeline waits for "
                      "every replica of a stage: no fastest-k synchronisation)")
    refuse_unless(args, "virtual_stages", args.schedule == "interleaved",
                  "with --schedule interleaved")
    for dest in ("network_nodes", "tensor_parallel", "nic", "bucket_size", "contention",
                 "network_weighting", "checkpoint_node"):
        refuse_unless(args, dest, args.network is not None, "with --network")


def _plan_kw(args: argparse.Namespace, failure_trace: Any) -> dict[str, Any]:
    """The TrainingConfig fields a plan run takes from the command line (failures, steps, ...)."""
    kw: dict[str, Any] = dict(
        steps=args.steps, pass_time_distribution=args.pass_time_distribution,
        pass_time_shape=args.pass_time_shape,
        availability=args.availability, mean_downtime=args.mean_downtime,
        domain_outage=args.domain_outage, domain_downtime=args.domain_downtime,
        failure_distribution=args.failure_distribution, failure_shape=args.failure_shape,
        failure_trace=failure_trace, mtbf=args.mtbf, replace_time=args.replace_time,
        detection_timeout=args.detection_timeout, skip_budget=args.skip_budget,
        skip_penalty=args.skip_penalty, penalty=args.penalty, max_wait=args.max_wait,
        checkpoint_every=args.checkpoint_every, checkpoint_cost=args.checkpoint_cost,
        restart_cost=args.restart_cost, hour=args.hour, max_time=args.max_time,
        stall_limit=args.stall_limit, value_bits=args.value_bits)
    if given(args, "sync"):  # else the plan's framework's (sim.profiles.frameworks)
        kw["sync"] = args.sync
    if args.price is not None:
        kw["price"] = args.price  # reshaped per worker once the plan's counts are known
    return kw


def _check_fleet_links(args: argparse.Namespace, plan: Any) -> None:
    """Refuse a ``--fleet`` none of whose links joins two node kinds of the plan (audit 7).

    Only a fleet file's links time a plan (its nodes are not used), so a file without links,
    or with links only for other GPU types or zones, changed nothing and was accepted."""
    if args.fleet is None:
        return
    from ._common import fleet_joins_plan

    joins, kinds = fleet_joins_plan(args.fleet, plan)
    if not joins:
        raise ConfigError("fleet", "a fleet file with a link between node kinds of the plan ("
                          + ", ".join(kinds) + "; with --plan only its links are used, its "
                          "nodes are not)", args.fleet)


def _with_fleet(args: argparse.Namespace, profiles: Any) -> Any:
    """The profiles with ``--fleet``'s links (as dtsim plan --fleet timed the plan with)."""
    from ..profiles import with_fleet

    return profiles if args.fleet is None else with_fleet(profiles, args.fleet)


def build_from_args(args: argparse.Namespace) -> Any:
    """``--plan``: read the plan and the profiles and build the run (a PlanBuild)."""
    from dataclasses import replace

    from ..profiles import load_profiles, read_plan
    from ..profiles.build import build_plan
    from ..profiles.frameworks import FrameworkSpec

    strategy = _strategy(args)
    # --strategy swarm: the plan's stages and replicas as SWARM's stages and peer pools, on the
    # training DES's swarm schedule (sim.profiles.swarm); the others on the job engine
    swarm = strategy is not None and strategy.engine == "des"
    if swarm:
        if given(args, "schedule") and args.schedule != "swarm":  # as without --plan
            raise ConfigError("schedule", "swarm with --strategy swarm", args.schedule)
        args.schedule, args._swarm = "swarm", True
    _check_options(args)
    failure_trace = failure_trace_option(args)
    check_int("replications", args.replications, low=1)
    if args.p2p is not None:
        check_choice("p2p", args.p2p, P2PS)
    if args.framework is not None:  # its own errors before any file is read
        from ..profiles.formats import framework_from_text

        framework_from_text(args.framework)
    from ..profiles.megatron_args import is_megatron_launch

    if is_megatron_launch(args.plan):  # its layers are the model profile's: read it first
        if args.model is None:
            raise ConfigError("model", "given (--model NAME) with a Megatron-LM launch plan",
                              args.plan)
        if args.gpu is None:
            raise ConfigError("gpu", "given (--gpu NAME) with a Megatron-LM launch plan (it "
                              "names no GPU type)", args.plan)
        from ..profiles.megatron_args import parse_gpus

        spec = parse_gpus(args.gpu)  # NAME, or [NAME,]HOST=NAME,... (a mixed cluster)
        types = [spec] if isinstance(spec, str) else list(dict.fromkeys(spec.values()))
        # the fleet's links first: the zone below is the one they (or the profiles') have
        profiles = _with_fleet(args, load_profiles(args.profiles, models=(args.model,)))
        for gpu in types:
            if gpu not in {g.name for g in profiles.gpus.gpus}:
                raise ConfigError("gpu", "a GPU of the catalogue ("
                                  + ", ".join(g.name for g in profiles.gpus.gpus) + ")", gpu)
        zones = {}
        for gpu in types:
            zone = args.zone
            known = sorted({z for link in profiles.network.links
                            for g, z in (link.src, link.dst) if g == gpu})
            if zone is None:  # as dtsim plan --nodes: the one zone the network has for the GPU
                if len(known) != 1:
                    raise ConfigError("zone", f"given (--zone ZONE) for {gpu} (the network has "
                                      f"{', '.join(known) if known else 'no link'} for it)", None)
                zone = known[0]
            elif known and zone not in known:
                raise ConfigError("zone", f"a zone the network has links for {gpu} in ("
                                  + ", ".join(known) + ")", zone)
            zones[gpu] = zone
        plan = read_plan(args.plan, args.model, gpu=spec,
                         zone=zones[spec] if isinstance(spec, str) else zones,
                         profiles=profiles)
        name = args.model
    else:
        plan = read_plan(args.plan, gpu=args.gpu, zone=args.zone)
        name = args.model if args.model is not None else plan.model
        if name is None:
            raise ConfigError("model", "given (--model NAME) when the plan does not name it", None)
        profiles = _with_fleet(args, load_profiles(args.profiles, models=(name,)))
    _check_fleet_links(args, plan)
    fw = None
    if args.framework is not None:  # over the plan's own table, key by key
        fw = framework_from_text(args.framework, plan.framework)
    if swarm:  # before the profiles' times: what SWARM has no meaning for, in one line
        from ..profiles.swarm import check_swarm_plan

        check_swarm_plan(plan)
        check_choice("routing", args.routing, ROUTINGS)
    if args.p2p is not None and len(plan.stages) == 1:  # as without a plan: it would be ignored
        raise ConfigError("p2p", "given only with a plan of two stages or more (one stage sends "
                          "nothing between stages)", args.p2p)
    kw = _plan_kw(args, failure_trace)
    if args.preemption_notice is not None:  # the config refuses one without a strategy
        kw["notice"] = _notice(args.preemption_notice, args.hour)
    price = kw.pop("price", None)
    if getattr(strategy, "mode", None) == "eager":  # Bamboo's copy on the GPU (TP: its shard)
        kw["redundant_copy"] = True
    if swarm:  # SWARM's wiring is no framework's program: the plan's pieces as times
        from ..profiles.swarm import swarm_plan_config

        # the plan's pieces (no config field changes them: --sync is refused); the run's
        # fields, the strategy and its notice go on the swarm config
        def rebuild(p: Any) -> Any:
            return build_plan(p, profiles, model=name, framework=fw)
        build = rebuild(plan)
        cfg, notes = swarm_plan_config(plan, build, rebuild, routing=args.routing,
                                       strategy=strategy, **kw)
        build = replace(build, config=cfg, estimates=build.estimates + notes)
    elif strategy is not None:  # each formation's step: the plan re-planned for it
        from ..profiles.formations import PlanStepTimes

        timing = {k: kw[k] for k in ("sync", "value_bits", "redundant_copy") if k in kw}
        named = [x.host for st in plan.stages for x in st.replicas if x.host is not None]
        # a checkpoint's time is a node's bytes over its bandwidth: a host of several replicas
        # would write theirs over one link, which the formations' per-node bytes do not sum
        check(getattr(strategy, "checkpoint_bandwidth", None) is None
              or len(set(named)) == len(named), "checkpoint_bandwidth",
              "unset when a plan's host holds several replicas (a host writes its replicas' "
              "checkpoints over one link: not modelled; give checkpoint= and restart=)",
              strategy.checkpoint_bandwidth if hasattr(strategy, "checkpoint_bandwidth")
              else None)
        kw.update(strategy=strategy,
                  step_times=PlanStepTimes(plan, profiles, name, tuple(dict(
                      schedule=args.schedule, p2p=args.p2p, framework=fw, network=True,
                      **timing).items())))
    if not swarm:
        build = build_plan(plan, profiles, model=name, schedule=args.schedule,
                           p2p=args.p2p, framework=fw, network=True, **kw)
    # --export-plan's plan: the one built, its model and framework as run (--model, and
    # --framework's keys over the plan's; no framework: DeepSpeed's, named)
    args._plan_run = replace(plan, model=name, framework=fw if fw is not None else
                             plan.framework if plan.framework is not None else FrameworkSpec())
    if price is not None:  # per GPU-hour: a replica (one worker) of TP t costs t times it
        grid = _prices(price, build.config.replicas)
        tps = [[x.tp for x in st.replicas] for st in plan.stages]
        grid = tuple(tuple((grid[j][i] if isinstance(grid, tuple) else grid) * t
                           for i, t in enumerate(row)) for j, row in enumerate(tps))
        build = replace(build, config=replace(build.config, price=grid))
    return build


def _plan_closed_form(args: argparse.Namespace, build: Any) -> dict[str, Any]:
    """The closed form of a plan run: the same plan with its transfers and all-reduces as
    times (no contention), evaluated exactly (:func:`sim.engines.predictions`)."""
    from dataclasses import replace

    c = build.config
    closed = replace(c, network=None, network_nodes=None, tensor_parallel=1, bucket_size=math.inf,
                     transfer_sizes=None, gradient_transfer_sizes=None, meta_sizes=None,
                     gradient_meta_sizes=None, mask_sizes=None, allreduce_sizes=None,
                     reduce_scatter=False,  # the closed form's times are the reduce-scatter's
                     tied_allreduce_size=0.0, pipe_groups=False,
                     transfer_times=build.transfer_times or None,
                     allreduce_times=build.allreduce_times,
                     tied_allreduce_time=build.tied_allreduce_time,
                     tied_allreduce_times=build.tied_allreduce_times or None,
                     allreduce_buckets=build.bucket_times or None)
    return predictions("training", closed)


#: Cloud preemption notices (seconds): AWS spot's two-minute interruption notice, GCP's
#: 30-second preemption notice.
NOTICES = {"aws": 120.0, "gcp": 30.0}


def _notice(text: str | None, hour: float) -> float:
    """``--preemption-notice`` in the run's time units (``hour`` of them make an hour).

    A plain number is in those units, as every time option; ``aws``, ``gcp`` and
    a time with a unit are seconds, converted by ``hour`` (a unit needs the
    one-second clock, as everywhere: :func:`sim.commands._units.check_hour`).
    """
    if text is None:
        return 0.0
    scale = hour / 3600.0 if 0 < hour < math.inf else 1.0  # a bad --hour is refused by the config
    if text.strip().lower() in NOTICES:
        return NOTICES[text.strip().lower()] * scale
    rule = ("a finite time >= 0: time units, a time with a unit (90s, 2min), aws (120 s) or "
            "gcp (30 s)")
    try:
        q = parse_quantity(text, TIME, "preemption_notice")
    except ConfigError:
        raise ConfigError("preemption_notice", rule, text) from None
    check(0.0 <= q.value < math.inf, "preemption_notice", rule, text)  # nan fails too
    if q.unit is not None and float(hour) != 3600.0:
        refuse_off_the_second(q, hour)
    return q.value


def _notice_as_typed(args: argparse.Namespace, exc: ConfigError) -> ConfigError:
    """The config's refusal of its ``notice`` (``'notice' must be 0 without preemptions:
    3.6e+303``) naming the option, ``--preemption-notice``, with the text typed (``'1e300h'``,
    ``'aws'``), as the option's own refusals (:func:`_notice`); its time bound in seconds when
    the text has a unit (:func:`sim.commands._units.in_seconds`; ``aws`` and ``gcp`` have
    none). Any other refusal, a
    strategy's ``notice`` key among them, unchanged."""
    text = args.preemption_notice
    if exc.name != "notice" or text is None:
        return exc
    try:
        value = _notice(text, args.hour)
    except ConfigError:
        return exc
    if exc.value != value:
        return exc
    try:  # aws, gcp: no unit typed (converted by --hour, which may not make the clock seconds)
        typed = [parse_quantity(text, TIME, "preemption_notice")]
    except ConfigError:
        typed = []
    return ConfigError("preemption_notice", in_seconds(exc.rule, typed), text)


def _strategy(args: argparse.Namespace) -> Any:
    """``--strategy`` with ``--checkpoint-every/--checkpoint-cost/--restart-cost`` folded into
    a step-level strategy's ``every/checkpoint/restart`` (None without --strategy)."""
    from ..training.strategies import make_strategy

    if args.strategy is None:
        return None
    strat = make_strategy(args.strategy)
    if strat.engine != "job":
        return strat
    args._job = True
    moves = {"checkpoint_every": "every", "checkpoint_cost": "checkpoint",
             "restart_cost": "restart"}
    changes = {}
    names = {f.name for f in dataclasses.fields(strat)}
    # the keys the spec text sets itself (review13: --checkpoint-cost 20 silently replaced
    # the spec's checkpoint=5)
    typed = {p.partition("=")[0].strip().replace("-", "_")
             for p in args.strategy.partition(":")[2].split(",") if p.strip()}
    for dest, field in moves.items():
        if given(args, dest) or (dest == "restart_cost" and args.restart_cost is not None):
            value = getattr(args, dest)
            check(field in names, dest, f"given only with a strategy that has '{field}' "
                  f"({strat.name} has none)", value)
            check(field not in typed, dest, f"given once: --{dest.replace('_', '-')} or "
                  f"--strategy's '{field}=', not both", value)
            changes[field] = value
            setattr(args, dest, 0 if dest == "checkpoint_every" else
                    (None if dest == "restart_cost" else 0.0))
    return dataclasses.replace(strat, **changes) if changes else strat


def _config_from_args(args: argparse.Namespace) -> TrainingConfig:
    """Validate every option and build the :class:`TrainingConfig` (before any simulation)."""
    if args.plan is not None:
        return build_from_args(args).config
    strategy = _strategy(args)
    if args.strategy is not None and strategy.name == "swarm" and not given(args, "schedule"):
        args.schedule = "swarm"  # --strategy swarm is today's behaviour with a swarm schedule
    _check_options(args)
    failure_trace = failure_trace_option(args)
    check_int("stages", args.stages, low=1)
    check_int("replications", args.replications, low=1)
    check_choice("placement", args.placement or "shared", PLACEMENTS)
    if args.placement is not None and args.topology is None:
        raise ConfigError("placement", "given only with --topology", args.placement)
    kw: dict[str, Any] = dict(
        stages=args.stages, replicas=args.replicas, microbatches=args.microbatches,
        steps=args.steps, schedule=args.schedule, routing=args.routing,
        forward_time=args.forward_time, backward_ratio=args.backward_ratio,
        pass_time_distribution=args.pass_time_distribution, speed_spread=args.speed_spread,
        pass_time_shape=args.pass_time_shape, sync_wait=args.sync_wait, stragglers=args.stragglers,
        param_size=args.param_size, activation_size=args.activation_size,
        bandwidth=args.bandwidth, latency=args.latency, sync=args.sync,
        value_bits=args.value_bits, optimizer_time=args.optimizer_time, availability=args.availability,
        mean_downtime=args.mean_downtime, domain_outage=args.domain_outage,
        domain_downtime=args.domain_downtime, failure_distribution=args.failure_distribution,
        failure_shape=args.failure_shape, failure_trace=failure_trace, mtbf=args.mtbf,
        replace_time=args.replace_time, detection_timeout=args.detection_timeout,
        skip_budget=args.skip_budget, skip_penalty=args.skip_penalty, penalty=args.penalty,
        max_wait=args.max_wait,
        checkpoint_every=0 if args.checkpoint_every == "auto" else args.checkpoint_every,
        checkpoint_cost=args.checkpoint_cost, restart_cost=args.restart_cost,
        samples_per_microbatch=args.samples_per_microbatch, hour=args.hour,
        arrival=args.arrival, arrival_rate=args.arrival_rate, max_time=args.max_time,
        backward_times=args.backward_times, p2p=args.p2p or "overlap",
        virtual_stages=args.virtual_stages,
        stall_limit=args.stall_limit, strategy=strategy, step_times=args.step_times,
        notice=_notice(args.preemption_notice, args.hour),
    )
    if args.network is not None:
        check_choice("contention", args.contention, ("on", "off"))
        kw.update(network=args.network, nic=args.nic, bucket_size=args.bucket_size,
                  contention=args.contention == "on", p2p=args.p2p or "overlap",
                  network_weighting=args.network_weighting, checkpoint_node=args.checkpoint_node)
    file_prices = None
    if args.speeds is not None:
        speeds, file_prices = read_speeds(args.speeds, args.stages)
        kw["speeds"] = speeds
        if file_prices is not None and args.price is not None:
            raise ConfigError("price", "unset when the speeds file has a price column", args.price)
    if args.network is not None:  # the per-replica grids need the replica counts
        counts = TrainingConfig(**{k: v for k, v in kw.items() if k not in (
            "network", "nic", "bucket_size", "contention", "p2p", "network_weighting",
            "checkpoint_node")}).replicas
        kw["tensor_parallel"] = _per_replica("tensor_parallel", args.tensor_parallel, counts)
        if args.network_nodes is not None:
            kw["network_nodes"] = _per_replica("network_nodes", tuple(
                x.strip() for x in args.network_nodes.split(",")), counts, per_worker=True)
    if args.price_series is not None:
        from ..training.billing import read_price_series

        kw["price_series"] = read_price_series(args.price_series)
    base = TrainingConfig(**kw)  # validates everything but the placement and prices
    kw["replicas"] = base.replicas
    kw["price"] = file_prices if file_prices is not None else _prices(args.price, base.replicas)
    if args.topology:
        import topologies
        from topologies.placement import place

        from ..pipeline import layout_hop_times

        layout = topologies.build(args.topology, seed=args.seed)
        pl = place(layout, base.stages, list(base.replicas), args.placement or "shared",
                   rng=Streams(args.seed).rng("placement"))
        kw["placement"] = pl
        if args.network is not None:  # the network times the transfers, not the layout's links
            if args.network_nodes is None and args.network == args.topology:
                kw["network_nodes"] = pl.hosts  # replicas on the hosts the placement chose
        else:
            hops = layout_hop_times(layout, pl.hosts, base.activation_size)
            if hops:
                kw.update(latency=hops, activation_size=0.0)
    cfg = TrainingConfig(**kw)
    if args.checkpoint_every == "auto":
        cfg = with_auto_checkpoint(cfg)
    _check_effects(args, cfg)
    return cfg


def group_regions(nodes: Any, groups: int, region: Any) -> list[list[Any]]:
    """The regions (``region(node)``) of each DiLoCo group's workers on ``nodes``
    (``[stage][replica]``), in group order: group ``g`` of ``groups`` holds replicas
    ``g k .. (g+1) k - 1`` of every stage, ``k = r / groups``."""
    k = len(nodes[0]) // groups
    return [sorted({region(row[i]) for row in nodes for i in range(g * k, (g + 1) * k)},
                   key=str) for g in range(groups)]


def _check_trace_clock(args: argparse.Namespace, cfg: TrainingConfig) -> None:
    """Warn when ``--hour`` makes the time unit something other than a second but a replayed
    trace (its times in seconds) keeps its default speed: one trace second per time unit, so
    ``--hour 60`` replays it 60 times slower than it happened (``--trace-speedup`` says how
    many trace seconds a time unit is; the help says so, a user may still miss it)."""
    if (float(cfg.hour) == 3600.0 or args.failure_trace is None
            or args.trace_speedup is not None or isinstance(cfg.failure_trace, str)):
        return
    unit = 3600.0 / float(cfg.hour)
    warn("train", f"--hour {cfg.hour:g} makes a time unit {unit:g} s, but --failure-trace "
         f"{args.failure_trace} replays one trace second per time unit (--trace-speedup 1): "
         f"--trace-speedup {unit:g} replays it as it happened")


def _check_group_regions(args: argparse.Namespace, cfg: TrainingConfig) -> None:
    """Warn when the default placement (replica ``k``, stage-major, on host ``k``) puts a
    DiLoCo group's workers in several regions of a layout that has regions: its pipelines then
    cross the slow links and the outer syncs may not (the groups are the zones only where the
    user places them so), and name the ``--network-nodes`` that keeps each group in one."""
    if (cfg.diloco is None or cfg.network is None or cfg.stages < 2
            or args.network_nodes is not None or args.topology is not None):
        return
    import topologies

    try:
        G = topologies.build(args.network, seed=args.seed)
    except Exception:  # noqa: BLE001 - the config built it; a builder without a layout
        return
    if not hasattr(G, "nodes"):
        return
    attrs = dict(G.nodes(data=True))

    def region(node: Any) -> Any:
        d = attrs.get(node, {}).get("domain")
        return d[0] if isinstance(d, tuple) and d else None

    r = cfg.replicas[0]
    M = diloco_groups(cfg)
    spans = [(g, regs) for g, regs in enumerate(group_regions(cfg.network_nodes, M, region))
             if len(regs) > 1 and None not in regs]
    if not spans:
        return
    g, regs = spans[0]
    # the same hosts in group-major order: group g's stages in turn, each its k replicas
    hosts = [h for row in cfg.network_nodes for h in row]
    k = r // M
    order = [(j, g2 * k + i) for g2 in range(M) for j in range(cfg.stages) for i in range(k)]
    grid: list[list[Any]] = [[None] * r for _ in range(cfg.stages)]
    for (j, i), h in zip(order, hosts, strict=True):
        grid[j][i] = h
    hint = ""
    if all(len(x) == 1 for x in group_regions(grid, M, region)):
        hint = (" (each group in one region: --network-nodes "
                + ",".join(str(h) for row in grid for h in row) + ")")
    warn("train", f"DiLoCo group {g}'s workers are in {len(regs)} regions of the network "
         f"({', '.join(map(str, regs))}): replica k of the stages in turn sits on the "
         "network's host k, so its pipelines cross the links between regions and the outer "
         f"syncs need not; give --network-nodes to place each group in one region{hint}")


def _check_one_group(cfg: TrainingConfig) -> None:
    """Warn when a DiLoCo run has one group (one replica a stage, the default one group a
    pipeline; or ``groups=1``): its outer steps have no other group to average with, so they
    send nothing over the WAN tier and nobody waits for them, and the run times as its one
    group's inner steps and data-parallel all-reduce (``--sync allreduce``). A plausible
    study (a one-zone baseline; Douillard et al. 2023 train DiLoCo with one replica too), so
    it runs; the line says what it measures, since nothing else in the output does."""
    if cfg.diloco is None:
        return
    M = diloco_groups(cfg)
    if M != 1:
        return
    why = ("groups=1: every pipeline in one group" if cfg.diloco.groups is not None
           else "one replica a stage, so one pipeline and one group")
    # with failures the group's rules are DiLoCo's, not data parallelism's: not the same times
    so = ("so the run times as --sync allreduce (a one-zone baseline)" if not cfg.failures
          else "but its failures follow DiLoCo's rules (the group is down while a stage has no "
          "live replica and loses its inner steps since the last outer step), so it does not "
          "time as --sync allreduce")
    warn("train", f"--sync {cfg.sync} runs one DiLoCo group ({why}): its outer steps have "
         f"no other group to average with, send nothing over the WAN tier and take no time, {so}")


def _check_edge_list_hosts(args: argparse.Namespace, cfg: TrainingConfig) -> None:
    """Warn when an edge-list ``--network`` (which cannot mark switches) puts a replica on a
    node that links several others while a leaf (a host at the end of one link) gets none:
    the replicas sit on the file's first nodes, gateways included (docs/network.md), which
    a file of hosts behind gateways does not mean. Name where they sit and a placement."""
    if (cfg.network is None or args.network_nodes is not None or args.topology is not None
            or not str(args.network).lower().endswith((".edges", ".edgelist", ".txt"))):
        return
    from topologies.io import read_graph

    try:
        G = read_graph(args.network)
    except Exception:  # noqa: BLE001 - the config read it; nothing to warn about otherwise
        return
    hosts = [n for n, r in G.nodes(data="role") if r != "switch"]
    used, rest = hosts[:cfg.workers], hosts[cfg.workers:]
    inner = [n for n in used if G.degree(n) > 1]
    leaves = [n for n in rest if G.degree(n) == 1]
    if not inner or not leaves:
        return
    spare = [n for n in hosts if G.degree(n) == 1]
    hint = (f" (e.g. --network-nodes {','.join(map(str, spare[:cfg.workers]))})"
            if len(spare) >= cfg.workers else "")
    empty = (f"{leaves[0]}, at the end of one link, has none" if len(leaves) == 1 else
             f"{', '.join(map(str, leaves))}, each at the end of one link, have none")
    warn("train", f"--network {args.network} is an edge list, which cannot mark switches: the "
         f"replicas sit on its first nodes {', '.join(map(str, used))}, among them {inner[0]}, "
         f"which links {G.degree(inner[0])} nodes, while {empty}; give --network-nodes{hint}")


def _check_effects(args: argparse.Namespace, cfg: TrainingConfig) -> None:
    """Refuse the options a built config shows to have no effect (they were accepted silently).

    ``--stall-limit`` watches for a run that cannot progress, which only failures cause;
    ``--p2p`` says how a transfer between stages meets compute, which needs a transfer;
    ``--bandwidth`` divides sizes, which need a size (as ``dtsim pipeline`` refuses it
    without ``--transfer-size``).
    """
    refuse_unless(args, "stall_limit", cfg.failures, "with failures (--availability < 1, "
                  "--mtbf, --domain-outage or --failure-trace): without any, every run "
                  "progresses")
    # (audit 7) a restart follows a lost step: without failures none is lost and the cost was
    # ignored (a checkpoint interval needs it in the config; a strategy has its own restarts)
    refuse_unless(args, "restart_cost", cfg.failures or cfg.checkpoint_every > 0
                  or cfg.strategy is not None, "with failures (--availability < 1, --mtbf, "
                  "--domain-outage or --failure-trace) or --checkpoint-every > 0: without any, "
                  "no step is lost and none restarts")
    lat = cfg.latency
    moves = cfg.stages > 1 and (cfg.activation_size > 0 or cfg.network is not None
                                or cfg.transfer_times is not None
                                or any(x > 0 for x in (lat if isinstance(lat, tuple) else (lat,))))
    refuse_unless(args, "p2p", moves or args.plan is not None, "with transfers between stages "
                  "(--activation-size > 0, --latency > 0 or --network, and --stages > 1): "
                  "without any, blocking and overlap time the same")
    # (user trial 3) "--sync diloco:every=H --bandwidth 1Gbit/s" without --param-size printed
    # utilisation 1, as if the link had been enough: nothing had moved over it
    sized = (cfg.param_size > 0 or cfg.activation_size > 0 or cfg.tied_allreduce_size > 0
             or any(any(x or ()) for x in (cfg.transfer_sizes, cfg.gradient_transfer_sizes,
                                            cfg.allreduce_sizes)))
    refuse_unless(args, "bandwidth", sized or args.plan is not None, "with a size to move "
                  "(--param-size > 0, or --activation-size > 0 without --topology, whose "
                  "links time the hops): without one, every transfer, "
                  "all-reduce and outer sync takes its latency alone")
    # (audit5) --sync allreduce:overlap=backward,bucket_size=25MiB on one replica a stage ran as
    # the default: there is no all-reduce for its keys to shape
    spec = cfg.sync_spec
    refuse_unless(args, "sync", spec.kind != "allreduce" or spec.text == "allreduce"
                  or any(r > 1 for r in cfg.replicas) or cfg.tied_allreduce_size > 0
                  or args.plan is not None, "with an all-reduce to shape when it gives "
                  "allreduce keys (a stage of --replicas 2 or more): with one replica a stage "
                  "there is none")


def _simulate(cfg: TrainingConfig, *, replications: int, seed: int, executor: Any = "serial",
              workers: int | None = None, engine: str = "auto",
              records_out: list | None = None, model: Any = None) -> dict[str, Any]:
    """Run the replications; the payload of ``dtsim train --json`` (intervals as Estimates).

    ``records_out``, a list, receives the replications' records; ``model``
    replaces the selected engine's ``run`` (a :class:`~sim.commands._timeline.RecordingModel`
    wrapping it).
    """
    sel = select("training", cfg, engine)
    records = replicate(sel.engine.run if model is None else model, cfg,
                        replications=replications, seed=seed, executor=executor, workers=workers)
    if records_out is not None:
        records_out.extend(records)
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    _add_figures(records)
    from ..training.outer import DILOCO_METRICS
    from ..training.system import FIGURES

    diloco = cfg.diloco is not None
    extra = [m for m in (*FIGURES, *(DILOCO_METRICS if diloco else ())) if m not in
             sel.engine.metrics]
    # every training metric is a count, a time, a rate or a fraction: none is below 0; the
    # fractions stay inside [0, 1] ("below X" at 0); what the config fixes is exact
    est = summarize(records, [*sel.engine.metrics, *extra], lower=0.0,
                    rates=("drop_rate", "worker_availability"), fixed=cfg.fixed_metrics(),
                    fractions=FRACTIONS)
    ok = [r for r in records if not r.get("error")]
    pred = predictions("training", cfg)
    priced = cfg.price is not None or cfg.price_series is not None
    out: dict[str, Any] = {
        "engine": sel.name, "engine_reason": sel.reason,
        "throughput": est["throughput"].mean, "throughput_ci": est["throughput"],
        "throughput_steady": est["throughput_steady"].mean,
        "throughput_steady_ci": est["throughput_steady"],
        "goodput": est["goodput"].mean,
        "step_time_mean": est["step_time_mean"].mean, "step_time_ci": est["step_time_mean"],
        "step_time_p50": est["step_time_p50"].mean, "step_time_p99": est["step_time_p99"].mean,
        "wall_time_mean": est["training_time"].mean, "wall_time_ci": est["training_time"],
        "finished": est["finished"].mean, "steps_done": est["steps_done"].mean,
        "bubble_fraction": est["bubble_fraction"].mean, "utilisation": est["utilisation"].mean,
        "latency_mean": est["latency_mean"].mean, "latency_mean_ci": est["latency_mean"],
        "drop_rate": est["drop_rate"].mean, "drop_rate_ci": est["drop_rate"],
        "mean_quality": est["mean_quality"].mean,
        "worker_availability": est["worker_availability"].mean,
        "worker_availability_ci": est["worker_availability"],
        "lost_time": {k: est[f"lost_{k}"].mean for k in LOST_CAUSES},
        "restarts": est["restarts"].mean, "preemptions": est["preemptions"].mean,
        "workers": cfg.workers, "worker_hours": est["worker_hours"].mean,
        "samples_per_second": est["samples_per_second"].mean,
        "samples_per_worker_hour": est["samples_per_worker_hour"].mean,
        "cost": est["cost"].mean if priced else None,
        "samples_per_dollar": est["samples_per_dollar"].mean if priced else None,
    }
    # (issue 37) every run: compute utilisation (mean over workers, with its interval; least
    # and largest over workers) and the bytes each worker sent
    out.update({
        "compute_utilisation": est["compute_utilisation"].mean,
        "compute_utilisation_ci": est["compute_utilisation"],
        "compute_utilisation_min": est["compute_utilisation_min"].mean,
        "compute_utilisation_max": est["compute_utilisation_max"].mean,
        "wan_bytes_sent": est["wan_bytes_sent"].mean,
        "wan_bytes_sent_ci": est["wan_bytes_sent"],
        "wan_bytes_sent_max": est["wan_bytes_sent_max"].mean,
        "allreduce_bytes_sent": est["allreduce_bytes_sent"].mean,
    })
    if diloco:
        spec = cfg.diloco
        out["sync"] = cfg.sync
        out["groups"] = spec.groups or cfg.replicas[0]
        out.update({k: est[k].mean for k in DILOCO_METRICS})
        out["goodput_fraction_ci"] = est["goodput_fraction"]
    if priced and cfg.skip_budget > 0:  # skipping costs quality: samples per dollar weighted by it
        out["quality_samples_per_dollar"] = est["quality_samples_per_dollar"].mean
        out["quality_samples_per_dollar_ci"] = est["quality_samples_per_dollar"]
    stalled = [r for r in ok if r.get("stall_reason")]
    if stalled:  # the keys appear only when a replication stalled (the output is otherwise unchanged)
        out.update(stalled=len(stalled), stall_reason=stalled[0]["stall_reason"],
                   stall_replication=stalled[0]["replication"])
    notes = {}
    for key, metric in PREDICTED.items():
        p = pred[metric]
        out[key] = p["value"]
        notes[key] = (f"{p['reference']}: {p['note']}" if p["value"] is not None else p["note"])
    out["reference_note"] = notes
    if cfg.strategy is not None:
        out["strategy"] = cfg.strategy.describe()
        if cfg.notice:
            out["preemption_notice"] = cfg.notice
        if sel.name == "job":
            from ..training.strategies import JOB_METRICS

            out["strategy_counts"] = {k: est[k].mean for k in JOB_METRICS}
            hosts = host_groups(cfg)
            if len(hosts) < cfg.workers:  # a plan's host holding several replicas
                out["failure_hosts"] = len(hosts)
            out["checkpoints"] = est["checkpoints"].mean
            out["lost_time"]["work"] = est["lost_work"].mean
    if cfg.failure_trace is not None:
        out["failure_trace"] = cfg.failure_trace if isinstance(cfg.failure_trace, str) \
            else cfg.failure_trace.trace
        named = isinstance(cfg.failure_trace, str)
        out["trace_policy"] = None if named else cfg.failure_trace.policy
        out["trace_resample"] = None if named else cfg.failure_trace.resample
        out["trace_model"] = None if named else cfg.failure_trace.model
        # the unit its times were read in when the file does not say and --time-unit was not
        # given ("s"; None when known, and for a by-name CSV, in the run's own time units)
        out["trace_time_unit_assumed"] = assumed_unit(cfg.failure_trace)
        names = cfg.trace_names
        if names is not None:  # instances named as the workers or hosts: replayed by name
            out["trace_instances"] = trace_instances(
                [w for w, *_ in stage_workers(cfg.replicas)], names)  # type: ignore[arg-type]
    out.update(replications=replications, steps=cfg.steps, microbatches=cfg.microbatches,
               seed=seed)
    return out


def _add_figures(records: list[dict[str, Any]]) -> None:
    """(issue 37) The figures of engines that do not report them, from what they do report:
    ``compute_utilisation`` (the engine's, else ``utilisation / (1 - bubble_fraction)``,
    both measured against the steps' compute time: an engine without failures), no WAN
    tier, no all-reduce bytes known (NaN) unless the engine runs no all-reduce."""
    for r in records:
        if r.get("error") or "compute_utilisation_min" in r:
            continue
        cu = r.get("compute_utilisation")
        if cu is None:
            u, b = r.get("utilisation", math.nan), r.get("bubble_fraction", math.nan)
            cu = u / (1.0 - b) if b == b and u == u and b < 1.0 else math.nan
        r.update(compute_utilisation=cu, compute_utilisation_min=cu, compute_utilisation_max=cu,
                 wan_bytes_sent=0.0, wan_bytes_sent_max=0.0,
                 allreduce_bytes_sent=r.get("allreduce_bytes_sent", math.nan))


def _plan_payload(build: Any, out: dict[str, Any], explain: bool) -> None:
    """Add a plan run's memory (and with --explain where the time goes) to the JSON payload."""
    out["peak_memory"] = build.peak_memory
    out["memory"] = [{"stage": g.stage, "replica": g.replica, "gpu": g.gpu, "tp": g.tp,
                      "total": g.total, "capacity": g.capacity, "weights": g.weights,
                      "gradients": g.gradients, "optimizer": g.optimizer,
                      "activations": g.activations, "input_buffers": g.buffers,
                      "allreduce_bucket": g.allreduce_bucket, "overhead": g.overhead,
                      # Megatron-LM fp16's fp32 gradient copy (only where it holds one)
                      **({"grad_copy": g.grad_copy} if g.grad_copy else {})}
                     for g in build.memory]
    out["p2p"] = build.config.p2p
    fb = build.behaviour
    if fb is not None:
        out["framework"] = {"name": fb.framework.key, "version": fb.framework.versions[0],
                            "precision": fb.precision, "p2p": fb.p2p,
                            "allreduce": fb.allreduce, "sync": build.config.sync,
                            "bucket_rule": fb.bucket_rule, "bytes_per_value": {
                                "activations": fb.activation_bytes, "tied": fb.tied_bytes,
                                "allreduce": fb.dp_bytes},
                            # bytes of the attention mask each TP rank sends with an activation
                            "hop_mask_bytes": fb.mask_bytes, "sources": fb.sources}
        if fb.optimizer_sharding is not None:  # named only where the optimizer is sharded
            out["framework"]["optimizer_sharding"] = fb.optimizer_sharding
    out["estimates"] = list(build.estimates)
    if explain:
        from ..profiles.build import explain_rows

        # DiLoCo's groups: each its own data-parallel job; group 0's step (the others' where
        # their iteration differs, e.g. other GPUs)
        out["explain"] = explain_rows(build.groups[0] if build.groups else build)
        if build.groups:
            M = len(build.groups)
            out["explain"]["diloco_group"] = (f"group 0 of {M} ({build.config.replicas[0] // M} "
                                              "replicas a stage): its own data-parallel job")
            its = [explain_rows(b)["iteration"] for b in build.groups]
            if len(set(its)) > 1:
                out["explain"]["group_iterations"] = its


def checkpoint_cost(cfg: TrainingConfig) -> dict[str, Any] | None:
    """A plan's step-level strategy run: what its checkpoint and restart cost in the full
    formation and where that came from (None for any other run)."""
    s, table = cfg.strategy, cfg.step_times
    if s is None or s.engine != "job" or not hasattr(table, "checkpoint_bytes") \
            or not hasattr(s, "checkpoint"):
        return None
    bw = getattr(s, "checkpoint_bandwidth", None)
    # the interval: every ``every`` steps unless the strategy chooses it (checkpoint-restart's
    # interval=overhead from each checkpoint's stall, adaptive from ``every`` at first)
    rule = getattr(s, "interval", "fixed")
    out: dict[str, Any] = {"every": None if rule == "overhead" else s.every}
    if rule != "fixed":
        out["interval"] = rule
    if bw is None:
        default = type(s)()
        given = s.checkpoint != default.checkpoint or s.restart != default.restart
        out.update(checkpoint=s.checkpoint, restart=s.restart, source=(
            "given" if given else f"{s.name}'s defaults (the Oobleck/Bamboo artifacts' values "
            "for their models, BERT-large's 15.8 s checkpoint)") + ", not this plan's bytes "
            "(checkpoint_bandwidth=RATE times them from the plan)")
        return out
    sizes = (table.stages,) * table.plan.dp[0]
    written, read = table.checkpoint_bytes(sizes)
    writers = table.checkpoint_rule()
    out.update(checkpoint=written / bw, restart=s.restart + read / bw, bandwidth=bw,
               bytes_written=written, bytes_read=read, writers=writers,
               source=f"the plan's bytes over checkpoint_bandwidth (per node; writers: "
               f"{writers}, sim.profiles.formations), restart {s.restart:g} s plus the read")
    return out


def _print_explain(x: dict[str, Any], m: int) -> None:
    """``m``: the step's micro-batches over all pipelines (the run line's ``m=``; with DiLoCo
    groups a group's ``m / M``)."""
    if x.get("diloco_group"):
        its = x.get("group_iterations")
        print(f"DiLoCo {x['diloco_group']}" + (
            "; each group's iteration: " + ", ".join(f"{t:.4g}" for t in its) if its else ""))
    print(f"where an iteration's time goes (failure-free; pipeline {x['pipeline']}, which runs "
          f"{x['microbatches']} of the step's m={m} micro-batches; seconds):")
    rows = [(str(s["stage"]), f"{s['forward']:.4g}", f"{s['backward']:.4g}",
             f"{s['compute']:.4g}", f"{s['p2p']:.4g}", f"{s['bubble']:.4g}")
            for s in x["stages"]]
    print_table(rows, ("stage", "forward/mb", "backward/mb", "compute", "p2p", "bubble"))
    # Megatron-LM's distributed optimizer reduce-scatters the gradients (JSON: "allreduce")
    dp_sync = "reduce-scatter" if x.get("param_allgather") is not None else "all-reduce"
    print(f"pipeline {x['pipeline_time']:.4g} + tied all-reduce {x['tied_allreduce']:.4g} + "
          f"{dp_sync} {x['allreduce']:.4g} + optimizer {x['optimizer']:.4g} (stage "
          f"{x['tail_stage']}) = {x['iteration']:.4g}")
    coll, loss = x.get("optimizer_collectives", 0.0), x.get("loss", 0.0)
    if coll > 0 or loss > 0:
        world = " (the gradient norm's over every rank: the distributed optimizer)" \
            if x.get("param_allgather") is not None else ""
        print(f"  (the optimizer steps include the one-value all-reduces over the model-parallel "
              f"group{world}, {coll:.4g}, and the loss's all-reduce and broadcast from the last "
              f"stage, {loss:.4g})")
    if x.get("param_allgather", 0.0) > 0:
        print("  (and the distributed optimizer's all-gather of the updated parameters over the "
              f"stage's data-parallel group, {x['param_allgather']:.4g})")
    if x.get("bf16_allgather", 0.0) > 0:
        print("  (and the bf16 optimizer's all-gather of the updated weights over the stage's "
              f"data-parallel group, {x['bf16_allgather']:.4g})")
    if x.get("allreduce_overlapped"):
        print("  (the all-reduce overlaps the last backward passes: what its buckets add after "
              f"the pipeline; {x['allreduce_after_backward']:.4g} after the backward pass)")
    if x.get("step_join_bound", 0.0) > 0:
        print(f"  (the next step starts on every device at {x['iteration']:.4g}; this framework "
              "starts a stage once it and the last stages are done, so each step after the "
              f"first may be up to {x['step_join_bound']:.4g} shorter)")


def training_events(cfg: TrainingConfig) -> float:
    """About how many events a run of ``cfg`` records (before any work): its passes (forward
    and backward, every micro-batch at every stage), twice as many transfers over a network,
    on the step-level job engine a step per worker, and with DiLoCo each group's steps and
    waits and each outer sync on its replicas."""
    if cfg.strategy is not None and cfg.strategy.engine == "job":
        return float(cfg.steps) * (cfg.workers + 2)
    passes = float(cfg.steps) * cfg.microbatches * cfg.stages * cfg.virtual_stages * (
        2 if cfg.has_backward else 1)
    if cfg.network is not None or cfg.framework:
        passes *= 3
    if cfg.diloco is not None:  # each group's steps; every sync on outer and its replicas
        spec = cfg.diloco
        groups = diloco_groups(cfg)
        syncs = cfg.steps / spec.every * spec.fragments
        return passes + cfg.steps * 2.0 * groups + syncs * (1 + cfg.workers + groups)
    return passes + cfg.steps * 2.0


def _timeline(args: argparse.Namespace, cfg: TrainingConfig, request: Any,
              record: dict[str, Any], model: RecordingModel | None) -> None:
    """Write replication K's events (``--timeline-replication``) (recorded in the run, else by running it again here)."""
    from ..rng import Streams

    sel = select("training", cfg, args.engine)
    tu = time_unit(cfg.hour)
    unit = "time units" if tu == "time unit" else tu

    def rerun() -> tuple[Any, dict[str, Any]]:
        rec = request.recorder()
        return rec, sel.engine.run(cfg, Streams(args.seed).replication(request.replication),
                                   recorder=rec)

    finish_timeline(request, model, rerun, record=record, command="train", seed=args.seed,
                    json_mode=args.json, engine_selected=sel.name, unit=unit)


def _check_timeline(args: argparse.Namespace, cfg: TrainingConfig, request: Any) -> None:
    """Refuse, before any work, a timeline the chosen engine cannot record or too large."""
    from ..timeline import check_run_size

    sel = select("training", cfg, args.engine)
    if not getattr(sel.engine, "records", False):
        raise ConfigError("timeline", "given with the des or job engine (the "
                          f"{sel.name} engine records no events)", request.path)
    check_run_size(request, training_events(cfg), "passes, transfers and steps")


def run(args: argparse.Namespace) -> int:
    check_choice("engine", args.engine, engine_names("training"))
    request = timeline_from_args(args)
    build = None
    try:
        if args.plan is not None:
            build = build_from_args(args)
            cfg = build.config
            _check_effects(args, cfg)
        else:
            cfg = _config_from_args(args)
            check_train(args, cfg)
            _check_group_regions(args, cfg)
            _check_edge_list_hosts(args, cfg)
            _check_trace_clock(args, cfg)
    except ConfigError as exc:
        named = _notice_as_typed(args, exc)
        if named is exc:
            raise
        raise named from None
    _check_one_group(cfg)
    model = None
    if request is not None:
        _check_timeline(args, cfg, request)
        if args.executor == "serial":  # replication 0 records as it runs
            model = RecordingModel(select("training", cfg, args.engine).engine.run,
                                   request.recorder(), args.seed,
                                   request.replication)
    if getattr(args, "export_plan", None) is not None:  # every check passed: before the run
        from ..profiles import plan_text

        write_export("plan", args.export_plan, plan_text(args._plan_run), args.overwrite)
    records: list[dict[str, Any]] = []
    out = _simulate(cfg, replications=args.replications, seed=args.seed,
                    executor=args.executor, workers=args.workers, engine=args.engine,
                    records_out=records, model=model)
    if args.checkpoint_every == "auto":
        out.update(checkpoint_every=cfg.checkpoint_every, checkpoint_every_auto=True)
    if build is not None:
        _plan_payload(build, out, args.explain)
        cost = checkpoint_cost(cfg)
        if cost is not None:
            out["checkpoint_cost"] = cost
        # (issue 37) the plan's closed form times a data-parallel step; a DiLoCo run's groups
        # all-reduce among fewer replicas: none then
        # a strategy run's references are the job engine's (its replay on the plan's steps)
        pred = {} if cfg.diloco is not None or cfg.strategy is not None else \
            _plan_closed_form(args, build)
        for key, metric in PREDICTED.items():
            p = pred.get(metric)
            if p is not None and p["value"] is not None:
                out[key] = p["value"]
                out["reference_note"][key] = (
                    "plan closed form (transfers and all-reduces as their times, no contention: "
                    f"exact when no two transfers share a link): {p['note']}")
    out["units"] = units_object(train_units(time_unit(cfg.hour)), args)
    if args.json:
        emit_json(out)
        if request is not None:
            _timeline(args, cfg, request, records[request.replication], model)
        _exported(args)
        return 0
    for line in (given_line(args), None if build is not None else train_transfers(args, cfg)):
        if line is not None:
            print(line)
    if build is not None:
        fb = build.behaviour
        from ..profiles.frameworks import FRAMEWORKS
        # a release other than the key's default names its version (the default's text as before)
        name = fb.framework.key if FRAMEWORKS[fb.framework.key] is fb.framework else \
            f"{fb.framework.key} {fb.framework.versions[0]}"
        print(f"plan {args.plan}: peak GPU memory {format_bytes(build.peak_memory)} "
              f"(largest over {len(build.memory)} replicas' GPUs); {name} "
              f"{fb.precision}, p2p {cfg.p2p}, all-reduce {fb.allreduce} (sync {cfg.sync}) in "
              f"{fb.dp_bytes}-byte values, activations {fb.activation_bytes}-byte"
              + (f", each with its {format_bytes(fb.mask_bytes)} attention mask (sequence "
                 f"{fb.sequence})" if fb.mask_bytes else ""))
        if fb.optimizer_sharding is not None:
            print(f"  optimizer: {fb.optimizer_sharding}")
        for note in build.estimates:
            print(f"  estimated, not measured: {note}")
        if args.explain:
            _print_explain(out["explain"], cfg.microbatches // max(1, len(build.groups)))
    print(f"L={cfg.stages} stages, replicas {','.join(map(str, cfg.replicas))} ({cfg.workers} "
          f"workers), {cfg.schedule}/{cfg.routing}, m={cfg.microbatches}, N={cfg.steps}; "
          f"{args.replications} replications, seed {args.seed}")
    if cfg.strategy is not None:
        notice = f", preemption notice {cfg.notice:g}" if cfg.notice else ""
        print(f"strategy {out['strategy']} ({out['engine']} engine){notice}")
        if "failure_hosts" in out:
            print(f"failures per host: {out['failure_hosts']} hosts of {cfg.workers} workers go "
                  "down and come back whole (a spot preemption takes the instance: --mtbf, "
                  "--availability and a trace's instances are per host; priced per worker)")
        cc = out.get("checkpoint_cost")
        if cc is not None:
            io = "" if "bandwidth" not in cc else (
                f" ({format_quantity(cc['bytes_written'], SIZE)} written, "
                f"{format_quantity(cc['bytes_read'], SIZE)} "
                f"read by the busiest node at {format_quantity(cc['bandwidth'], RATE)})")
            rule = cc.get("interval")
            every = f"checkpoint {cc['checkpoint']:.4g} s " + (
                "at the interval=overhead rule (each checkpoint's stall at most overhead_bound "
                "of the steps' compute)" if rule == "overhead" else
                f"every {cc['every']} steps at first (interval=adaptive)" if rule == "adaptive"
                else f"every {cc['every']} steps") if cc["every"] or rule == "overhead" \
                else "no checkpoint (every=0)"
            print(f"  {every}, restart {cc['restart']:.4g} s{io}, full formation: "
                  f"{cc['source']}")
    if cfg.failure_trace is not None:
        how = "by worker name" if out["trace_policy"] is None else (
            "by instance name" if "trace_instances" in out else f"policy {out['trace_policy']}")
        if out["trace_resample"] not in (None, "none"):
            how += f", resample {out['trace_resample']}"
        if out["trace_model"] not in (None, "trace"):
            how += f", model {out['trace_model']}"
        print(f"failure trace {out['failure_trace']} ({how}): worker availability "
              f"{out['worker_availability_ci']}")
        if "trace_instances" in out:
            print_trace_instances(out["trace_instances"])
        elif out["trace_policy"] is not None:
            where = ("host k (hosts in the order of their first worker s{j}r{i}, "
                     "stage-major)" if "failure_hosts" in out else "worker k (s{j}r{i} "
                     "stage-major)")
            print(f"  slot k replayed on {where}: the trace's instances "
                  "are named as none of the run's workers or hosts")
        print_unit_note(cfg.failure_trace)
        # the JSON's preemptions are the spot model's: say where the trace's removals are
        counted = "losses (strategy_counts.losses), " if "strategy_counts" in out else ""
        print(f"  the trace's removals are worker failures: {counted}lost time and availability, "
              "not the JSON's preemptions (the spot model's, --mtbf)")
    tu = time_unit(cfg.hour)
    if tu == "time unit":
        print(f"times in time units ({cfg.hour:g} per hour, --hour)")
    rows, notes = [], {}
    rate = f"microbatches/{tu}"
    for label, key, pkey in [(f"throughput ({rate})", "throughput", "predicted_throughput"),
                             (f"throughput, steady ({rate})", "throughput_steady",
                              "predicted_throughput_steady"),
                             (f"step time ({tu})", "step_time", "predicted_step_time"),
                             (f"time to train ({tu})", "wall_time", "predicted_wall_time"),
                             (f"microbatch latency ({tu})", "latency_mean", "predicted_latency_mean"),
                             ("drop rate (fraction)", "drop_rate", "predicted_drop_rate")]:
        e = out[key + "_ci"]
        if e is None or e.n == 0 or math.isnan(e.mean):
            continue
        exact = out[pkey]
        # an exact (deterministic) estimate agrees up to rounding, relative to its size
        ok = "" if exact is None else verdict(e.low, e.high, e.contains(exact)
                                              or e.low - 1e-12 <= exact <= e.high + 1e-12)
        rows.append((label, "-" if exact is None else f"{exact:.6g}", str(e), ok))
        if ok == "NO" and out["reference_note"].get(pkey):  # what that exact value is
            notes.setdefault(out["reference_note"][pkey], []).append(label.split(" (")[0])
    print_table(rows, ("quantity", "exact", "simulated (95% CI)", "agrees"))
    for note, labels in notes.items():  # e.g. a plan's closed form, which has no contention
        print(f"  exact {', '.join(labels)}: {note}")
    tau = out["predicted_checkpoint_interval"]
    if tau is not None:
        how = " (auto)" if args.checkpoint_every == "auto" else ""
        print(f"exact best checkpoint interval {tau:.6g} time units; checkpointing every "
              f"{cfg.checkpoint_every} steps{how}")
    if out["finished"] < 1:
        stop = f"at --max-time {args.max_time:g}" if math.isfinite(args.max_time) else \
            "without progress"
        print(f"{(1 - out['finished']) * args.replications:.0f} of {args.replications} "
              f"replications stopped {stop} before {cfg.steps} steps "
              f"(mean steps done {out['steps_done']:.4g}); time to train is not measured")
    if out.get("stall_reason"):
        print(f"why ({out['stalled']} of {args.replications} stalled; replication "
              f"{out['stall_replication']}): {out['stall_reason']}")
    lost = ", ".join(f"{k} {v:.4g}" for k, v in out["lost_time"].items() if v and k != "work")
    if "strategy_counts" in out:
        sc = out["strategy_counts"]
        print(f"per replication: {sc['losses']:.4g} losses, {out['restarts']:.4g} restarts, "
              f"{out.get('checkpoints', 0) or 0:.4g} checkpoints, {sc['reconfigurations']:.4g} "
              f"reconfigurations, {sc['rebalances']:.4g} rebalances, {sc['fatal_failures']:.4g} "
              f"fatal failures; work lost ({tu}) {sc['lost_work']:.4g}, waiting for workers "
              f"({tu}) {sc['wait_time']:.4g}, degraded ({tu}) {sc['degraded_time']:.4g}")
        print(f"lost time ({tu}): {lost or 'none'}")
    else:
        print(f"bubble {_fraction(out['bubble_fraction'])}, utilisation "
              f"{_fraction(out['utilisation'])} "
              f"(fractions of worker time; bubble: the live workers' idle share in the "
              f"steps' passes, down ones left out); lost replica time ({tu}): "
              f"{lost or 'none'}")
    cost = "" if out["cost"] is None else f", cost ${_figure(out['cost'])} (price per " \
        f"worker-hour x {_figure(out['worker_hours'])} worker-hours), samples per dollar " \
        f"{_figure(out['samples_per_dollar'])}"
    if "quality_samples_per_dollar" in out:
        cost += f" (quality-weighted {_figure(out['quality_samples_per_dollar'])})"
    print(f"samples per worker-hour {_figure(out['samples_per_worker_hour'])}{cost}")
    if "groups" in out:
        _print_diloco(out, cfg, tu)
    if request is not None:
        _timeline(args, cfg, request, records[request.replication], model)
    _exported(args)
    return 0


def _exported(args: argparse.Namespace) -> None:
    """Say where --export-plan wrote the plan and how to run it: on stdout in the text report,
    on stderr with --json (whose stdout is the one JSON object, the same as without it)."""
    if getattr(args, "export_plan", None) is None:
        return
    print(f"plan written to {args.export_plan} (dtsim train --plan {args.export_plan} with this "
          "run's other options, less --gpu and --zone, runs the same plan)",
          file=sys.stderr if args.json else sys.stdout)


def _outer_counts(out: dict[str, Any]) -> str:
    """The outer steps taken, and the all-reduce tries started where they differ (a try
    aborted, or one in flight at the end): "2 outer steps (3 all-reduce tries, 1 aborted)"."""
    steps, tries, aborts = out["outer_steps"], out["outer_syncs"], out["outer_aborts"]
    text = f"{steps:.4g} outer step{'' if steps == 1 else 's'}"
    if tries != steps or aborts:
        text += f" ({tries:.4g} all-reduce tr{'y' if tries == 1 else 'ies'}, {aborts:.4g} aborted)"
    return text


def _print_diloco(out: dict[str, Any], cfg: TrainingConfig, tu: str) -> None:
    """(issue 37) A DiLoCo run's outer loop: utilisation, WAN traffic, syncs, goodput."""
    M = out["groups"]
    k = cfg.replicas[0] // M
    print(f"DiLoCo {out['sync']}: {M} group{'s' if M != 1 else ''} of {k} "
          f"pipeline{'s' if k > 1 else ''}, "
          f"{_outer_counts(out)}, {out['outer_exposed']:.4g} {tu} a group "
          "waiting for them")

    def exact(key: str, shown: str = "") -> str:
        v = out.get(key)
        if v is None or (shown.endswith(f"{v:.6g} (exact)")):  # said once: "0.18 (exact)"
            return ""
        return f" (exact {v:.6g})"
    cu = out["compute_utilisation_ci"]
    print(f"compute utilisation {cu}{exact('predicted_compute_utilisation', str(cu))}, "
          f"{out['compute_utilisation_min']:.4g} to {out['compute_utilisation_max']:.4g} over "
          "workers (fraction of wall time in inner steps' compute)")
    # wan_bytes_sent counts DiLoCo's outer tier only: a group's data-parallel all-reduce
    # counts inside its group even where its pipelines cross zones (groups=1 across regions),
    # and its pipeline hops and a worker's own weight download count in neither
    print(f"sent per worker (bytes): WAN (DiLoCo outer tier: outer syncs, model downloads) "
          f"{out['wan_bytes_sent']:.6g}{exact('predicted_wan_bytes_sent')}, largest "
          f"{out['wan_bytes_sent_max']:.6g}; inside its group (data-parallel all-reduce, "
          f"whatever links it crosses, and the outer syncs' all-gather) "
          f"{out['allreduce_bytes_sent']:.6g}{exact('predicted_allreduce_bytes_sent')}; "
          "in neither: pipeline hops between stages and a worker's own weight download, "
          "whatever links they cross")
    if cfg.failures or out["outer_downloads"]:
        print(f"goodput {out['goodput_fraction_ci']} (merged compute over worker time); "
              f"work lost {out['lost_outer_work']:.4g} ({tu} of worker time), "
              f"{out['outer_downloads']:.4g} downloads (of the model, or of the outer steps a "
              f"late or rejoining group missed), {out['late_merges']:.4g} late merges")
        if out.get("outer_aborts"):
            print(f"{out['outer_aborts']:.4g} outer all-reduces aborted (a group lost in them; "
                  f"rerun or discarded after the heartbeat timeout), {out['outer_aborted']:.4g} "
                  f"{tu} from their starts to the rerun or discard")
