"""``dtsim pipeline``: simulate Study A's pipeline; simulated drop rate vs the exact tail.

Three ways to answer, all printed side by side with the exact value:

* ``--method simulate --engine des``: the discrete-event simulation (timing,
  failover, waiting, time-correlated outages);
* ``--method simulate --engine vector``: the vectorised snapshot Monte Carlo of
  :mod:`sim.pipeline.vector`, valid only where it answers the same question as
  the DES (:class:`sim.pipeline.engines.VectorEngine`); latency, goodput in
  time and failovers need time and are reported as null;
* ``--method importance``: importance sampling of the snapshot drop
  probability (:func:`sim.pipeline.estimate_importance`), for drop
  probabilities far below what plain simulation resolves.

``--queueing`` turns on the training system's server model (the queueing
engine, :mod:`sim.pipeline.queueing`): replicas serve one pass at a time at
their ``--speeds`` and microbatches wait in queues routed by ``--routing``, so
``latency_mean`` and ``latency_mean_ci`` include queueing; the arrivals are
still ``--arrival`` at ``--rate`` (``poisson`` for the M/M/c references).

The comparison with the exact values is built by :mod:`sim.pipeline.compare`;
this module parses, calls and prints.

``--engine auto`` (the default) picks the vector engine exactly where it
applies, and the output says which engine ran and why.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import engines
from ..errors import (
    ConfigError,
    ascii_float,
    ascii_int,
    check,
    check_choice,
    check_int,
    check_replaceable,
    head_bytes,
    one_line,
    write_atomic,
)
from ..failures import DISTRIBUTIONS
from ..pipeline import (
    ARRIVALS,
    DEFAULT_REPLICAS,
    PENALTIES,
    STAGE_TIME_DISTRIBUTIONS,
    PipelineConfig,
    comparison_rows,
    estimate_importance,
    on_layout,
    run_pipeline,
    simulate,
)
from ..rng import Streams
from ..training import stage_workers
from . import trace as _trace
from ._applies import given, refuse_unless, verdict
from ._common import add_run_options, emit_json, print_table
from ._timeline import RecordingModel, add_timeline_options, finish_timeline, timeline_from_args
from ._units import (
    PIPELINE_UNITS,
    RATE_HELP,
    SIZE_HELP,
    TIME_HELP,
    RateOption,
    SizeOption,
    TimesOption,
    check_pipeline,
    given_line,
    pipeline_transfers,
    units_object,
)
from .trace import add_failure_trace_options, assumed_unit, failure_trace_from_args, print_unit_note

NAME = "pipeline"
HELP = "simulate a pipeline with replicas, failover and skipping; drop rate vs the exact tail"

PLACEMENTS = ("shared", "spread", "packed", "random")
#: What --queueing changes in the defaults: a queueing network where nothing fails and no job is
#: lost (M/M/c, Jackson; as Ciw's), not Study A's snapshot assumptions (a = 0.9, drop at once).
QUEUEING_DEFAULTS = {"availability": 1.0, "max_wait": math.inf}
METHODS = ("simulate", "importance")
#: Replications when ``--replications`` is not given.
DEFAULT_REPLICATIONS = 10


def _comma_list(text: str, convert: Callable[[str], Any], what: str) -> Any:
    """One value, or a tuple of them from a comma list, each read by ``convert``."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        vals = tuple(convert(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what} or a comma list: {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def int_list(text: str) -> int | tuple[int, ...]:
    """``"3"`` -> 3, ``"3,2,3"`` -> (3, 2, 3) (validation is the config's)."""
    return _comma_list(text, ascii_int, "an integer")


def float_list(text: str) -> float | tuple[float, ...]:
    """``"1.5"`` -> 1.5, ``"1,2"`` -> (1.0, 2.0)."""
    return _comma_list(text, ascii_float, "a number")


def add_model_arguments(p: argparse.ArgumentParser, *, microbatches: int | None = None) -> None:
    """The pipeline model's options (shared with ``dtsim design --verify``)."""
    d = PipelineConfig()
    mb = d.microbatches if microbatches is None else microbatches
    p.add_argument("--replicas", type=int_list, default=None,
                   help="replicas per stage r, or one per stage as a comma list "
                        f"(default {DEFAULT_REPLICAS}; with --topology, the count placed per stage)")
    p.add_argument("--mean-downtime", type=float, default=None,
                   help=f"mean worker outage length (default {d.mean_downtime})")
    p.add_argument("--domain-downtime", type=float, default=d.domain_downtime,
                   help=f"mean domain outage length (default {d.domain_downtime})")
    p.add_argument("--distribution", default=None, metavar="NAME",
                   help="up/down duration law: " + ", ".join(DISTRIBUTIONS)
                        + f" (default {d.failure_distribution})")
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
    p.add_argument("--latency", action=TimesOption, default=0.0, metavar="TIME[,TIME...]",
                   help=f"transfer latency per hop, or one per hop: {TIME_HELP} (default 0)")
    p.add_argument("--transfer-size", action=SizeOption, default=0.0, metavar="SIZE",
                   help=f"activation size per hop: {SIZE_HELP} (default 0)")
    p.add_argument("--bandwidth", action=RateOption, default=math.inf, metavar="RATE",
                   help=f"link bandwidth: {RATE_HELP} (default inf)")
    p.add_argument("--microbatches", type=int, default=mb,
                   help=f"microbatches per replication (default {mb})")
    p.add_argument("--arrival", default=d.arrival, metavar="KIND",
                   help="arrivals: " + ", ".join(ARRIVALS) + f" (default {d.arrival})")
    p.add_argument("--rate", type=float, default=d.rate,
                   help=f"arrival rate for fixed/poisson arrivals (default {d.rate})")
    p.add_argument("--max-wait", type=float, default=None,
                   help="wait at an out stage once the skip budget is spent (default 0: drop; "
                        "with --queueing inf: wait until the stage is back)")
    p.add_argument("--detection-timeout", type=float, default=d.detection_timeout,
                   help="time to detect a failed replica before failover (default 0)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = PipelineConfig()
    p.add_argument("--stages", type=int, default=d.stages, help=f"stages L (default {d.stages})")
    p.add_argument("--skip-budget", type=int, default=d.skip_budget,
                   help=f"stages a microbatch may skip s (default {d.skip_budget})")
    p.add_argument("--availability", type=float, default=None,
                   help=f"worker availability a (default {d.availability}, Study A's; with "
                        f"--queueing {QUEUEING_DEFAULTS['availability']:g}: no failures; not "
                        "with --failure-trace)")
    p.add_argument("--domain-outage", type=float, default=d.domain_outage,
                   help=f"unavailability rho of each stage's shared domain (default {d.domain_outage})")
    p.add_argument("--skip-penalty", type=float, default=d.skip_penalty,
                   help=f"quality lost per skip kappa (default {d.skip_penalty})")
    add_model_arguments(p)
    p.add_argument("--topology", default=None, metavar="SPEC",
                   help="place replicas on a layout, e.g. datacenter:regions=2,racks=8,hosts=4 "
                        "(its domains and link latencies replace --domain-outage and --latency; "
                        "link bandwidth in B/s and latency in s, or with units: "
                        "tree:host_bandwidth=10Gbit/s,host_latency=5us)")
    p.add_argument("--placement", default="shared", metavar="POLICY",
                   help="with --topology: " + ", ".join(PLACEMENTS) + " (default shared)")
    p.add_argument("--no-layout-latency", action="store_true",
                   help="with --topology: use the layout's failure domains but not its link "
                        "latencies (keeps the zero-time snapshot model)")
    p.add_argument("--show-placement", action="store_true",
                   help="print which replica of which stage sits in which domain")
    p.add_argument("--event-log", default=None, metavar="CSV",
                   help="also write the event log of replication 0 to this CSV file "
                        "(time, microbatch, event, stage, replica); --failure-trace is the "
                        "input trace of failures")
    add_failure_trace_options(p)
    p.add_argument("--queueing", action="store_true",
                   help="replicas are servers (one pass at a time, stage time / speed) and "
                        "microbatches wait in queues, so the latency includes queueing (the "
                        "training system's server model; the arrivals are --arrival at --rate). "
                        "Its defaults are a queueing network's: --availability 1 (no failures) "
                        "and --max-wait inf (a microbatch waits for an out stage instead of "
                        "being dropped); give them to model failures and drops")
    p.add_argument("--routing", default=None, metavar="NAME",
                   help="with --queueing: routing within a stage: queue (one shared FIFO, the "
                        "default), least-loaded, weighted (by speed), round-robin or "
                        "least-assigned-time (SWARM's balancer rule, one for the stage)")
    p.add_argument("--speeds", default=None, metavar="FILE",
                   help="with --queueing: CSV stage,replica,speed of every replica (default "
                        "all 1; it sets the replicas per stage)")
    p.add_argument("--network", default=None, metavar="SPEC|FILE",
                   help="with --queueing: the network the hops cross (--transfer-size a "
                        "microbatch, as flows sharing its links: bandwidth in B/s and latency "
                        "in s, or with units, tree:host_bandwidth=10Gbit/s,host_latency=5us); "
                        "give a --routing that picks a replica")
    p.add_argument("--network-nodes", default=None, metavar="LIST",
                   help="with --network: the node of each replica, stage-major, comma-separated "
                        "(default the network's hosts in order)")
    p.add_argument("--nic", action=RateOption, default=None, metavar="RATE",
                   help=f"with --network: NIC capacity (each way) of every host without one: "
                        f"{RATE_HELP}")
    p.add_argument("--contention", default="on", metavar="on|off",
                   help="with --network: on (default) transfers share links; off: each alone")
    p.add_argument("--p2p", default="overlap", metavar="MODE",
                   help="with --network: overlap (default) or blocking (both ends held)")
    p.add_argument("--network-weighting", default="maxmin", metavar="NAME",
                   help="with --network: maxmin (default) or rtt (SimGrid CM02)")
    p.add_argument("--engine", default="auto", metavar="NAME",
                   help="simulation engine: des, vector (snapshot Monte Carlo, only where it "
                        "answers the same question as the DES), markov, queueing (with "
                        "--queueing, the only one) or auto (default: the fastest that applies)")
    p.add_argument("--method", default="simulate", metavar="NAME",
                   help="simulate (default) or importance (importance sampling of the snapshot "
                        "drop probability, for rare drops)")
    p.add_argument("--samples", type=int, default=None, metavar="N",
                   help="with --method importance: draws to make (default 10000), or with "
                        "--target-rel-error the most draws (default 10**7)")
    p.add_argument("--target-rel-error", type=float, default=None, metavar="R",
                   help="with --method importance: stop once the relative standard error is "
                        "at most R")
    add_timeline_options(p, what="every stage served, hop, failover, skip, wait, drop and down "
                         "interval (the discrete-event simulation's, --engine des)")
    add_run_options(p, replications=DEFAULT_REPLICATIONS)
    # None marks "not given": --method importance refuses these rather than ignore them.
    p.set_defaults(replications=None, microbatches=None)


EVENT_LOG_COLUMNS = ("time", "microbatch", "event", "stage", "replica")
#: The first line of every event log written (how a later --event-log knows a file for dtsim's).
EVENT_LOG_HEAD = (",".join(EVENT_LOG_COLUMNS) + "\r\n").encode()


def is_event_log_file(path: str | Path) -> bool:
    """Whether ``path`` begins with the header line :func:`write_event_log` writes."""
    return head_bytes(Path(path), len(EVENT_LOG_HEAD) + 1)[:len(EVENT_LOG_HEAD)] == EVENT_LOG_HEAD


def write_event_log(cfg: PipelineConfig, seed: int, path: str) -> Path:
    """Run replication 0 with the event trace on and write it as CSV (``--event-log``), replacing
    the file atomically."""
    run_ = run_pipeline(dataclasses.replace(cfg, trace=True), Streams(seed).replication(0))
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(EVENT_LOG_COLUMNS)
    w.writerows(run_.trace or [])
    return write_atomic(path, buf.getvalue(), newline="")


def _config_from_args(args: argparse.Namespace, *, layout_latency: bool | None = None,
                     **override: Any) -> tuple[PipelineConfig, Any]:
    """Build the :class:`PipelineConfig` (and the placement, if a topology) from CLI args.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``dtsim pipeline`` options (``replicas`` and ``microbatches`` may be
        None: not given, the config's defaults apply).
    layout_latency : bool, optional
        With a topology, whether its link latencies become the hop latencies
        (default: unless ``--no-layout-latency``).
    **override
        Config fields that replace the options.

    Returns
    -------
    (PipelineConfig, Placement or None)
    """
    d = PipelineConfig()
    replay = failure_trace_from_args(args) if hasattr(args, "failure_trace") else None
    if replay is not None:  # the trace sets the workers' states: refuse, never ignore
        for name, value in (("availability", getattr(args, "availability", None)),
                            ("mean_downtime", args.mean_downtime),
                            ("distribution", args.distribution), ("shape", args.shape)):
            if value is not None:
                raise ConfigError(name, "unset with --failure-trace (the trace sets the "
                                  "workers' up and down times)", value)
    availability = getattr(args, "availability", None)
    queueing = getattr(args, "queueing", False)
    if availability is None:  # --queueing: no failures unless asked (not with a trace)
        availability = QUEUEING_DEFAULTS["availability"] if queueing and replay is None \
            else d.availability
    max_wait = args.max_wait
    if max_wait is None:  # --queueing: a microbatch waits for an out stage, as a queue holds it
        max_wait = QUEUEING_DEFAULTS["max_wait"] if queueing else d.max_wait
    kw: dict[str, Any] = dict(
        stages=args.stages, replicas=args.replicas, skip_budget=args.skip_budget,
        availability=availability,
        domain_outage=args.domain_outage, skip_penalty=args.skip_penalty, penalty=args.penalty,
        mean_downtime=d.mean_downtime if args.mean_downtime is None else args.mean_downtime,
        domain_downtime=args.domain_downtime,
        failure_distribution=d.failure_distribution if args.distribution is None
        else args.distribution,
        failure_shape=args.shape, stage_time=args.stage_time,
        stage_time_distribution=args.stage_time_distribution,
        stage_time_shape=args.stage_time_shape, latency=args.latency,
        transfer_size=args.transfer_size, bandwidth=args.bandwidth,
        microbatches=args.microbatches, arrival=args.arrival, rate=args.rate,
        max_wait=max_wait, detection_timeout=args.detection_timeout,
    )
    if replay is not None:
        kw["failure_trace"] = replay
    if kw["microbatches"] is None:
        del kw["microbatches"]
    if getattr(args, "queueing", False):
        kw.update(queueing=True, routing="queue" if args.routing is None else args.routing)
        if getattr(args, "network", None) is not None:
            check_choice("contention", args.contention, ("on", "off"))
            kw.update(network=args.network, nic=args.nic, contention=args.contention == "on",
                      p2p=args.p2p, network_weighting=args.network_weighting)
            if args.network_nodes is not None:
                names = tuple(x.strip() for x in args.network_nodes.split(","))
                reps = PipelineConfig(**{k: v for k, v in kw.items() if not k.startswith(
                    ("network", "nic", "contention", "p2p"))}).replicas
                check(len(names) == sum(reps), "network_nodes",  # type: ignore[arg-type]
                      f"one per worker, stage-major ({sum(reps)} workers)",  # type: ignore[arg-type]
                      args.network_nodes)
                rows, k = [], 0
                for r in reps:  # type: ignore[union-attr]
                    rows.append(names[k:k + r])
                    k += r
                kw["network_nodes"] = tuple(rows)
        if args.speeds is not None:
            from ..training import read_speeds

            speeds, prices = read_speeds(args.speeds, args.stages)
            if prices is not None:  # never silently ignored
                raise ConfigError("speeds", "a CSV file without a price column (dtsim pipeline "
                                  "has no cost; use dtsim train)", args.speeds)
            kw["speeds"] = speeds
    kw.update(override)
    cfg = PipelineConfig(**kw)
    topology = getattr(args, "topology", None)
    if not topology:
        return cfg, None
    if layout_latency is None:
        layout_latency = not getattr(args, "no_layout_latency", False)
    return on_layout(cfg, topology, args.placement, seed=args.seed, layout_latency=layout_latency)


#: Up/down and compute-time laws that take a shape parameter.
SHAPED = ("weibull", "lognormal", "pareto")
SHAPED_TEXT = ", ".join(SHAPED[:-1]) + " or " + SHAPED[-1]


def check_model_options(args: argparse.Namespace, *, topology: bool = False,
                        layout_latency: bool = False, snapshot_only: bool = False) -> None:
    """Refuse the model options that would have no effect with the others.

    Parameters
    ----------
    args : argparse.Namespace
        Options of :func:`add_model_arguments` (and ``--domain-outage``).
    topology : bool
        Whether a layout gives the failure domains (``--domain-outage`` has no effect).
    layout_latency : bool
        Whether the layout's links give the hop times (``--latency`` and
        ``--bandwidth`` have no effect; ``--transfer-size`` does).
    snapshot_only : bool
        Whether only the snapshot drop probability is computed (``--method
        importance``): outage lengths and arrival rates have no effect.
    """
    refuse_unless(args, "shape", args.distribution in SHAPED,
                  "with --distribution " + SHAPED_TEXT)
    stage_time = args.stage_time if isinstance(args.stage_time, tuple) else (args.stage_time,)
    timed = any(t != 0 for t in stage_time)
    refuse_unless(args, "stage_time_distribution", timed, "with --stage-time > 0")
    refuse_unless(args, "stage_time_shape", timed and args.stage_time_distribution in SHAPED,
                  "with --stage-time > 0 and --stage-time-distribution " + SHAPED_TEXT)
    # (audit 7) without a skip no quality is lost: kappa and its form were ignored
    refuse_unless(args, "skip_penalty", args.skip_budget > 0, "with --skip-budget > 0")
    refuse_unless(args, "penalty", given(args, "skip_penalty"), "with --skip-penalty")
    refuse_unless(args, "rate", args.arrival != "back_to_back",
                  "with --arrival fixed or poisson (back_to_back arrivals have no rate)")
    refuse_unless(args, "domain_outage", not topology,
                  "without --topology (the layout's failure domains replace it)")
    refuse_unless(args, "domain_downtime", topology or getattr(args, "domain_outage", 0) != 0,
                  "with --domain-outage > 0 or --topology (no domain outages otherwise)")
    availability = getattr(args, "availability", None)
    refuse_unless(args, "mean_downtime", availability is None or availability < 1,
                  "with --availability < 1 (no worker goes down at 1)")
    refuse_unless(args, "latency", not layout_latency,
                  "without --topology, or with --no-layout-latency (the layout's links replace it)")
    refuse_unless(args, "bandwidth", not layout_latency and args.transfer_size != 0,
                  "with --transfer-size > 0 and without the layout's links")
    refuse_unless(args, "transfer_size", layout_latency or math.isfinite(args.bandwidth)
                  or getattr(args, "network", None) is not None,
                  "with a finite --bandwidth, the layout's links or --network (size / inf "
                  "bandwidth is 0)")
    if snapshot_only:
        # (--max-wait, --arrival back_to_back and --stage-time are refused later, saying why)
        for dest in ("mean_downtime", "domain_downtime", "rate", "detection_timeout"):
            refuse_unless(args, dest, False, "with --method simulate (importance sampling "
                          "computes the snapshot drop probability)")


def _check_options(args: argparse.Namespace) -> str:
    """Validate the method, the engine and the options that go with them; return the method."""
    method = check_choice("method", args.method, METHODS)
    check_choice("engine", args.engine, engines.engine_names("pipeline"))
    topology = bool(args.topology)
    for dest in ("placement", "show_placement", "no_layout_latency"):
        refuse_unless(args, dest, topology, "with --topology")
    for dest in ("routing", "speeds", "network"):
        refuse_unless(args, dest, args.queueing, "with --queueing")
    for dest in ("network_nodes", "nic", "contention", "p2p", "network_weighting"):
        refuse_unless(args, dest, args.network is not None, "with --network")
    if args.queueing:
        if method == "importance":
            raise ConfigError("queueing", "unset with --method importance (it draws snapshots "
                              "of the stage states; nothing queues there)", True)
        if args.event_log is not None:
            raise ConfigError("event_log", "unset with --queueing (the event log is the "
                              "no-queueing DES's)", args.event_log)
    check_model_options(args, topology=topology, snapshot_only=method == "importance",
                        layout_latency=topology and method == "simulate"
                        and not args.no_layout_latency)
    refuse_unless(args, "workers", args.executor != "serial" or method == "importance",
                  "with --executor local or dask")
    if args.event_log is not None and method == "simulate":
        # before the simulation, not after it: a file there is replaced only if it is an event
        # log dtsim wrote (its header line first), or with --overwrite
        check_replaceable("event_log", args.event_log, overwrite=args.overwrite,
                          ours=is_event_log_file, kind="an event log")
    if method == "simulate":
        for name, value in (("samples", args.samples), ("target_rel_error", args.target_rel_error)):
            if value is not None:
                raise ConfigError(name, "given only with --method importance", value)
        if args.replications is not None:
            check_int("replications", args.replications, low=1)
        return method
    # importance: refuse what it would otherwise silently ignore
    refused = (
        ("engine", args.engine, args.engine != "auto", "auto with --method importance "
         "(it draws snapshots itself)"),
        ("replications", args.replications, args.replications is not None,
         "unset with --method importance (its draws are independent; use --samples)"),
        ("microbatches", args.microbatches, args.microbatches is not None,
         "unset with --method importance (use --samples)"),
        ("executor", args.executor, args.executor != "serial",
         "serial with --method importance"),
        ("workers", args.workers, args.workers is not None, "unset with --method importance"),
        ("event_log", args.event_log, args.event_log is not None,
         "unset with --method importance (it has no event log)"),
    )
    for name, value, bad, rule in refused:
        if bad:
            raise ConfigError(name, rule, value)
    return method


def _print_importance(out: dict[str, Any], cfg: PipelineConfig, args: argparse.Namespace,
                      placement: Any) -> None:
    print(f"L={cfg.stages} stages x r={_replicas_text(cfg)} replicas ({cfg.workers} workers), "
          f"s={cfg.skip_budget}, a={cfg.availability}, "
          f"rho={cfg.domain_outage if placement is None else 'layout'}; seed {args.seed}")
    print("method: importance sampling of the snapshot drop probability"
          + (" (layout failure domains; link latencies not used)" if placement is not None else ""))
    print(f"estimator: {out['estimator']}")
    lo, hi = out["drop_rate_ci"]
    exact = out["predicted_drop_rate"]
    agrees = "" if out["agrees"] is None else ("yes" if out["agrees"] else "NO")
    print_table([("drop rate", "-" if exact is None else f"{exact:.6g}",
                  f"{out['drop_rate']:.6g} [{lo:.6g}, {hi:.6g}]", agrees)],
                ("quantity", "exact", "importance sampling (95% CI)", "agrees"))
    naive = out["naive_samples"]
    enum = f", {out['enumerated']} domain configurations summed exactly" \
        if out["enumerated"] else ""
    if naive is None or not math.isfinite(naive):
        cost = ("no sampling error (the interval's width is the rounding and the mass of the "
                "strata not visited)" if out["samples"] == 0 else "no drop was seen")
    else:
        cost = f"plain Monte Carlo would need {naive:.3g} microbatches for this error"
    print(f"relative error {out['rel_error']:.3g}, effective sample size "
          f"{out['effective_sample_size']:.0f}, {out['samples']} samples{enum}; {cost}; "
          f"{out['wall_time']:.3g} s")


def _station_rows(out: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per stage: its mean wait in queue, the M/M/c value where exact, its busy fraction."""
    exact = out["predicted_wait_stage"]
    rows = []
    for j, (w, u) in enumerate(zip(out["wait_stage_ci"], out["utilisation_stage_ci"],
                                   strict=True)):
        x = None if exact is None else exact[j]
        ok = "" if x is None else verdict(w.low, w.high, w.contains(x))
        rows.append((str(j), str(w), "-" if x is None else f"{x:.6g}", ok, str(u)))
    return rows


def _queueing_defaults_line(args: argparse.Namespace, cfg: PipelineConfig) -> str:
    """What --queueing assumed (availability, waiting), said in the output, never silently."""
    a = ("failures from the trace" if cfg.failure_trace is not None
         else f"availability {cfg.availability:g}"
         + (" (the --queueing default: no failures)" if args.availability is None else ""))
    w = ("a microbatch at an out stage waits until it is back" if cfg.max_wait == math.inf
         else f"a microbatch at an out stage waits at most {cfg.max_wait:g}, then is dropped")
    if args.max_wait is None:
        w += " (the --queueing default; --max-wait 0 drops at once, as Study A)"
    return f"queueing: {a}; {w}"


def _replicas_text(cfg: PipelineConfig) -> str:
    reps = cfg.replicas
    return str(reps[0]) if len(set(reps)) == 1 else ",".join(map(str, reps))  # type: ignore[arg-type]


def _log_failed(args: argparse.Namespace, error: str | None) -> int:
    if error is None:
        return 0
    print(f"dtsim pipeline: error: could not write the event log to {args.event_log}: {error} "
          "(the results above are complete)", file=sys.stderr)
    return 1


def _check_timeline(args: argparse.Namespace, method: str, cfg: PipelineConfig,
                    request: Any) -> None:
    """Refuse, before any work, a timeline this run cannot record, or one too large."""
    from ..pipeline.engines import choose_engine
    from ..timeline import check_run_size

    if method == "importance":
        raise ConfigError("timeline", "given with --method simulate (importance sampling draws "
                          "snapshots, not a run in time)", request.path)
    sel, _ = choose_engine(cfg, args.engine)
    if not getattr(sel.engine, "records", False):
        raise ConfigError("timeline", f"given with --engine des (the {sel.name} engine runs "
                          "this configuration and records no events)", request.path)
    check_run_size(request, 2.0 * cfg.microbatches * cfg.stages, "stage crossings and hops")


def run(args: argparse.Namespace) -> int:
    method = _check_options(args)
    request = timeline_from_args(args)
    log_error: str | None = None
    if method == "importance":
        cfg, placement = _config_from_args(args, layout_latency=False)
    else:
        cfg, placement = _config_from_args(args)
    check_pipeline(args, cfg)
    model = None
    if request is not None:
        _check_timeline(args, method, cfg, request)
        if args.executor == "serial":  # replication 0 records as it runs
            from ..pipeline.engines import choose_engine

            model = RecordingModel(choose_engine(cfg, args.engine)[0].engine.run,
                                   request.recorder(), args.seed,
                                   request.replication)
    records: list[dict[str, Any]] = []
    if args.show_placement and placement is not None and not args.json:
        print(placement.render())
        print()
    if method == "importance":
        out = estimate_importance(cfg, seed=args.seed, samples=args.samples,
                                  target_rel_error=args.target_rel_error)
    else:
        reps = DEFAULT_REPLICATIONS if args.replications is None else args.replications
        engine = args.engine
        if args.event_log:  # the event log is the DES's
            if engine == "vector":
                raise ConfigError("event_log", "unset with --engine vector (it has no event log)",
                                  args.event_log)
            engine = "des"
        out = simulate(cfg, replications=reps, seed=args.seed, executor=args.executor,
                       workers=args.workers, engine=engine, records_out=records, model=model)
        if args.event_log and args.engine == "auto":
            out["engine_reason"] = "auto: --event-log needs the discrete-event simulation"
        if args.event_log:
            try:
                out["event_log_file"] = str(write_event_log(cfg, args.seed, args.event_log))
            except OSError as exc:  # the results are printed anyway; the torn file is removed
                log_error = one_line(exc)
                with contextlib.suppress(OSError):
                    Path(args.event_log).unlink()
                out["event_log_file"] = None
        if cfg.failure_trace is not None:
            out["failure_trace"] = cfg.failure_trace.trace
            out["trace_policy"] = cfg.failure_trace.policy
            out["trace_time_unit_assumed"] = assumed_unit(cfg.failure_trace)
            names = cfg.trace_names
            if names is not None:  # instances named as the workers or hosts: replayed by name
                out["trace_instances"] = _trace.trace_instances(
                    [w for w, *_ in stage_workers(cfg.replicas)], names)  # type: ignore[arg-type]
    out["units"] = units_object(PIPELINE_UNITS, args)
    if args.json:
        if args.show_placement and placement is not None:
            out["placement"] = [[list(c) for c in s] for s in cfg.domain_placement.replica_domains]
        emit_json(out)
        if request is not None:
            _timeline(args, cfg, request, records[request.replication], model)
        return _log_failed(args, log_error)
    for line in (given_line(args), pipeline_transfers(args, cfg)):
        if line is not None:
            print(line)
    if method == "importance":
        _print_importance(out, cfg, args, placement)
        return 0
    avail = (f"trace {cfg.failure_trace.trace} (policy {cfg.failure_trace.policy})"
             if cfg.failure_trace is not None else f"a={cfg.availability}")
    print(f"L={cfg.stages} stages x r={_replicas_text(cfg)} replicas ({cfg.workers} workers), "
          f"s={cfg.skip_budget}, {avail}, "
          f"rho={cfg.domain_outage if placement is None else 'layout'}, "
          f"kappa={cfg.skip_penalty}; {out['replications']} replications x {cfg.microbatches} "
          f"microbatches, seed {args.seed}")
    print_unit_note(cfg.failure_trace)
    if "trace_instances" in out:
        _trace.print_trace_instances(out["trace_instances"])
    print(f"engine: {out['engine']} ({out['engine_reason']})"
          + (f"; routing {out['routing']}" if cfg.queueing else ""))
    if cfg.queueing:
        print(_queueing_defaults_line(args, cfg))
    exact_note = "" if out["exact_applies"] else " (snapshot reference; timing changes the law)"
    rows = []
    for c in comparison_rows(out):
        ok = "" if c.agrees is None else verdict(c.estimate.low, c.estimate.high, c.agrees)
        rows.append((c.quantity, c.unit, "-" if c.exact is None else f"{c.exact:.6g}",
                     str(c.estimate), ok))
    print_table(rows, ("quantity", "unit", "exact" + exact_note, "simulated (95% CI)", "agrees"))
    if cfg.queueing:
        print(f"latency reference: {out['latency_reference']}")
        print_table(_station_rows(out), ("stage", "wait in queue (time units)", "exact (M/M/c)",
                                         "agrees", "utilisation (busy fraction)"))
        print(f"utilisation of all replicas: {out['utilisation_ci']}")
    if out.get("latency_mean") is not None:
        print(f"mean skipped {out['mean_skipped']:.4g} stages; latency mean "
              f"{out['latency_mean']:.4g}, p50 {out['latency_p50']:.4g}, p99 "
              f"{out['latency_p99']:.4g} time units; failovers per microbatch "
              f"{out['failovers_per_microbatch']:.4g}; simulated time "
              f"{out['simulated_time']:.6g} time units")
        print("time units: those of --stage-time, --latency and 1 / --rate (one microbatch "
              "arrives per time unit at --rate 1)")
    else:
        print(f"mean skipped {out['mean_skipped']:.4g} stages; latency, goodput in time and failovers: "
              f"not answered by the {out['engine']} engine (use --engine des)")
    if args.event_log and log_error is None:
        print(f"event log of replication 0 written to {out['event_log_file']}")
    if request is not None:
        _timeline(args, cfg, request, records[request.replication], model)
    return _log_failed(args, log_error)


def _timeline(args: argparse.Namespace, cfg: PipelineConfig, request: Any,
              record: dict[str, Any], model: RecordingModel | None) -> None:
    """Write replication K's events (``--timeline-replication``) (recorded in the run, else by running it again here)."""
    from ..pipeline.engines import choose_engine

    sel, _ = choose_engine(cfg, args.engine)

    def rerun() -> tuple[Any, dict[str, Any]]:
        rec = request.recorder()
        return rec, sel.engine.run(cfg, Streams(args.seed).replication(request.replication),
                                   recorder=rec)

    finish_timeline(request, model, rerun, record=record, command="pipeline", seed=args.seed,
                    json_mode=args.json, unit="s")
