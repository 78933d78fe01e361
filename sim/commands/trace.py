"""``dtsim trace``: list the shipped preemption traces; statistics, fits and plots of any trace."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, check_int
from ..rng import Streams
from ..traces import (
    FORMATS,
    POLICIES,
    SHIPPED,
    TIME_UNITS,
    TraceReplay,
    envelope,
    fit_model,
    fit_trace,
    load_trace,
    trace_stats,
)
from ..traces.replay import slot_nodes
from ._applies import refuse_unless
from ._common import emit_json, print_table
from ._units import TimeOption

__all__ = ["add_failure_trace_options", "assumed_unit", "failure_trace_from_args",
           "failure_trace_option", "print_trace_instances", "print_unit_note", "trace_instances",
           "trace_workers"]

NAME = "trace"
HELP = "real preemption traces: list the shipped ones; stats, fit and plot any trace"


def add_failure_trace_options(p: argparse.ArgumentParser) -> None:
    """``--failure-trace`` and its options, shared by every command that replays failures."""
    g = p.add_argument_group("failure trace (replay a real trace as worker failures)")
    g.add_argument("--failure-trace", default=None, metavar="NAME|FILE",
                   help="a shipped trace (dtsim trace list) or a trace file to replay")
    g.add_argument("--trace-format", default=None, metavar="FMT",
                   help="auto (default) or one of " + ", ".join(FORMATS) + "; an event log "
                        "of your own: events:worker=COL,time=COL,event=COL,down=WORD,up=WORD "
                        "(docs/traces.md)")
    g.add_argument("--time-unit", default=None, metavar="UNIT",
                   help="unit of the file's times where it cannot tell (s, ms, min, h)")
    g.add_argument("--trace-policy", default=None, metavar="NAME",
                   help="which workers go when the count falls: " + ", ".join(POLICIES)
                        + " (default recent); add +tile to allow more workers than the "
                          "trace's capacity")
    g.add_argument("--trace-speedup", type=float, default=None, metavar="X",
                   help="trace seconds per simulated time unit (default 1)")
    g.add_argument("--trace-start", action=TimeOption, default=None, metavar="TIME",
                   help="trace time replayed at time 0: trace seconds, or with a unit: 90min, "
                        "6h (default 0)")
    g.add_argument("--trace-loop", action="store_true", default=None,
                   help="repeat the trace (default: refuse to run past its end)")
    g.add_argument("--trace-resample", default=None, metavar="HOW",
                   help="replications: none (all the same, default), offset (random start, "
                        "needs --trace-loop), block (moving-block bootstrap)")
    g.add_argument("--trace-block", action=TimeOption, default=None, metavar="TIME",
                   help="block length for --trace-resample block: trace seconds, or with a "
                        "unit: 30min")
    g.add_argument("--trace-model", default=None, metavar="WHAT",
                   help="trace (default: replay the trace) or fitted (a new look-alike per "
                        "replication from the trace's fitted bursty model)")


_SUB = {"trace_format": "format", "time_unit": "time_unit", "trace_policy": "policy",
        "trace_speedup": "speedup", "trace_start": "start", "trace_loop": "loop",
        "trace_resample": "resample", "trace_block": "block", "trace_model": "model"}


def failure_trace_from_args(args: argparse.Namespace) -> TraceReplay | None:
    """The :class:`~sim.traces.TraceReplay` the options ask for (None without --failure-trace).

    Raises
    ------
    ConfigError
        When a trace option is given without ``--failure-trace`` (never ignored).
    """
    given = {k: getattr(args, k) for k in _SUB if getattr(args, k, None) is not None}
    if args.failure_trace is None:
        for k, v in given.items():
            raise ConfigError(k, "unset without --failure-trace", v)
        return None
    try:
        return TraceReplay(args.failure_trace, **{_SUB[k]: v for k, v in given.items()})
    except ConfigError as exc:  # name the option typed, --failure-trace, not the reader's argument
        if exc.name != "trace":
            raise
        raise ConfigError("failure_trace", exc.rule, exc.value) from None


#: A worker name of the training system (a dtsim CSV of such names is replayed by name).
_REPLICA_NAME = re.compile(r"s([0-9]+)r([0-9]+)")


def failure_trace_option(args: argparse.Namespace) -> Any:
    """``--failure-trace`` and its options as a training config's ``failure_trace`` (None
    without it): the one rule of ``dtsim train`` and ``dtsim plan``.

    A dtsim interval CSV whose workers are all named ``s{stage}r{replica}`` is
    replayed by name, in its own times (its path is returned; workers it does
    not list follow the availability model), and the slot options are refused
    with it. Any other trace (a shipped name, or a file of any format
    :mod:`sim.traces` reads) is a :class:`~sim.traces.TraceReplay` replayed
    through its mapping policy, worker ``s{j}r{i}`` on slot ``k`` in
    stage-major order; the availability model's options are refused with it.
    """
    replay = failure_trace_from_args(args)
    if replay is None:
        return None
    tr = replay.load()
    if tr.format == "dtsim":
        from ..failures import read_trace

        if all(_REPLICA_NAME.fullmatch(w) for w in read_trace(args.failure_trace).workers):
            for dest in ("time_unit", "trace_policy", "trace_speedup", "trace_start",
                         "trace_loop", "trace_resample", "trace_block", "trace_model"):
                refuse_unless(args, dest, False, "with a trace replayed through slots (a "
                              "dtsim CSV of workers s{stage}r{replica} is replayed by name, "
                              "in its own times)")
            return args.failure_trace
    for dest in ("availability", "mean_downtime", "failure_distribution", "failure_shape"):
        refuse_unless(args, dest, False, "without --failure-trace (the trace sets the workers' "
                      "up and down times)")
    return replay


def trace_instances(workers: Sequence[Any], names: Sequence[str | None]) -> dict[str, str | None]:
    """Each worker (its name, as text) -> the trace instance it replays by name (None: up
    throughout): the ``trace_instances`` of the ``--json`` of every command that replays a
    trace by name (``names`` from the config's ``trace_names``)."""
    return {str(w): n for w, n in zip(workers, names, strict=True)}


def print_trace_instances(instances: dict[str, str | None], indent: str = "  ") -> None:
    """Print which instance each worker replays by name (:func:`trace_instances`), the first
    12 of them, under the command's failure-trace line."""
    pairs = [f"{w}={n if n is not None else '(none: up)'}" for w, n in instances.items()]
    print(f"{indent}instances replayed by name (named as the run's workers or hosts): "
          f"{', '.join(pairs[:12])}{', ...' if len(pairs) > 12 else ''}")


def trace_workers(path: str) -> tuple[tuple[str, int, int], ...]:
    """The workers a by-name trace (:func:`failure_trace_option`'s path) lists:
    ``(name, stage, replica)`` in the file's order."""
    from ..failures import read_trace

    out = []
    for w in read_trace(path).workers:
        m = _REPLICA_NAME.fullmatch(w)
        if m is not None:
            out.append((w, int(m.group(1)), int(m.group(2))))
    return tuple(out)


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="FILE|NAME", help="a shipped trace name or a trace file")
    p.add_argument("--trace-format", default="auto", metavar="FMT",
                   help="auto (detect, default) or one of " + ", ".join(FORMATS) + "; an event "
                        "log of your own: events:worker=COL,time=COL,event=COL,down=WORD,"
                        "up=WORD (docs/traces.md)")
    p.add_argument("--time-unit", default=None, metavar="UNIT",
                   help="unit of the file's times where it cannot tell: "
                        + ", ".join(u for u in TIME_UNITS if len(u) <= 3))


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    sub.add_parser("list", help="the shipped traces",
                   description="the shipped traces").add_argument(
        "--json", action="store_true", help="print one JSON object on stdout")
    st = sub.add_parser("stats", help="statistics of a trace (capacity, availability, bursts)",
                        description="statistics of a trace, by the shipped traces' conventions")
    _trace_args(st)
    st.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ft = sub.add_parser("fit", help="fit up/down durations and the burst-size law",
                        description="fit exponential, Weibull and lognormal up and down "
                                    "durations (scipy.stats, censored MLE) and event sizes")
    _trace_args(ft)
    ft.add_argument("--trace-policy", default="recent", metavar="NAME",
                    help="which slots go and return for a count trace: " + ", ".join(POLICIES)
                         + " (default recent)")
    ft.add_argument("--seed", type=int, default=0, help="root seed (random policy; default 0)")
    ft.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    pl = sub.add_parser("plot", help="count against time with the fitted model's envelope",
                        description="draw instances up against time with the 5-95%% band of "
                                    "traces generated by the fitted bursty model")
    _trace_args(pl)
    pl.add_argument("--out", required=True, metavar="PNG",
                    help="file to write (an existing one is replaced only if it is a figure "
                         "dtsim wrote, or with --overwrite)")
    pl.add_argument("--overwrite", action="store_true",
                    help="replace an existing --out file, whatever it holds")
    pl.add_argument("--samples", type=int, default=200,
                    help="generated traces for the envelope (default 200; 0: none)")
    pl.add_argument("--seed", type=int, default=0, help="root seed (default 0)")


def _load(args: argparse.Namespace):
    return load_trace(args.trace, format=args.trace_format, time_unit=args.time_unit)


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _list(args: argparse.Namespace) -> int:
    rows = []
    for name, meta in SHIPPED.items():
        s = trace_stats(load_trace(name))
        rows.append({"name": name, "format": meta.format, "time_unit": meta.time_unit,
                     "nodes": s["nodes"], "duration_hours": s["duration"] / 3600.0,
                     "availability": s["availability"],
                     "preemption_events": s["preemption_events"],
                     "description": meta.description, "source": meta.source})
    if args.json:
        emit_json({"traces": rows})
        return 0
    print_table([(r["name"], r["format"], r["nodes"], _fmt(r["duration_hours"], 3),
                  _fmt(r["availability"]), r["preemption_events"], r["description"])
                 for r in rows],
                ("name", "format", "nodes", "hours", "availability", "events", "description"))
    print("\nattribution and licences: sim/traces/data/README.md (Bamboo and Oobleck, MIT)")
    return 0


#: The statistics ``dtsim trace stats`` prints, with their units (times in trace seconds).
STAT_UNITS = {
    "format": "", "nodes": "worker slots (capacity)", "duration": "s",
    "mean_available": "nodes up (time average)", "availability": "fraction of slot-time up",
    "preemption_events": "events", "preempted_nodes": "nodes",
    "batch_fraction": "fraction of events taking >= 2 nodes",
    "preemptions_per_hour": "events/h", "preempted_nodes_per_hour": "nodes/h",
    "mean_event_size": "nodes/event", "node_ids": "distinct node names",
    "mean_up": "s (per slot, renewal estimate)", "mean_down": "s (per slot, renewal estimate)",
}


#: How many instances of a slot ``trace stats`` names before it says how many more.
_SHOWN = 6


def assumed_unit(trace: Any) -> str | None:
    """The unit a command's trace's times were taken in for want of one (``"s"``), else None
    (the unit known, no trace, or a by-name dtsim CSV, a path replayed in the run's own time
    units): the ``trace_time_unit_assumed`` of every command that replays a failure trace.

    ``trace`` is what the command read: a :class:`~sim.traces.Trace`, a
    :class:`~sim.traces.TraceReplay`, a path (:func:`failure_trace_option`'s by-name trace)
    or None. Every command that reads a trace says this in its JSON and prints
    :func:`print_unit_note` in its text.
    """
    if trace is None or isinstance(trace, str):
        return None
    return (trace.load() if isinstance(trace, TraceReplay) else trace).assumed_unit


def print_unit_note(trace: Any, indent: str = "  ") -> None:
    """Print the line saying a command's trace (any :func:`assumed_unit` takes) was read in
    seconds for want of a unit, under the command's first lines (``indent``); nothing when
    the unit is known."""
    if assumed_unit(trace) is not None:
        print(indent + ("times read in seconds: the file does not say its unit and --time-unit "
                        "was not given (--time-unit h if they are hours)"))


def _stats(args: argparse.Namespace) -> int:
    tr = _load(args)
    s = trace_stats(tr)
    slots = slot_nodes(tr) if tr.format == "events" else None
    if slots is not None:
        s["slots"] = slots
    if args.json:
        emit_json(s)
        return 0
    print(f"trace {s['source']}")
    print_table([(k, _fmt(s[k], 6), unit) for k, unit in STAT_UNITS.items()],
                ("statistic", "value", "unit"))
    sizes = ", ".join(f"{k}: {v}" for k, v in s["event_sizes"].items())
    print(f"event sizes (size: events): {sizes or 'none'}")
    print_unit_note(tr, indent="")
    if slots is not None:
        print("worker slots (worker k replays slot k; dtsim train: s{j}r{i} is slot k in "
              "stage-major order, unless every instance is named as a worker or host of the "
              "run: then each worker replays its own by name), the instances each held under "
              "policy recent:")
        for k, ids in enumerate(slots):
            more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
            print(f"  slot {k}: {', '.join(ids[:_SHOWN])}{more}")
    return 0


def _fit(args: argparse.Namespace) -> int:
    tr = _load(args)
    f = fit_trace(tr, policy=args.trace_policy,
                  rng=Streams(args.seed).rng("trace:policy"))
    if tr.assumed_unit is not None:  # as trace stats says it
        f["time_unit_assumed"] = tr.assumed_unit
    if args.json:
        emit_json(f)
        return 0
    print(f"trace {f['source']} ({f['format']}), durations under policy {f['policy']}")
    print_unit_note(tr)
    rows = []
    for which in ("up", "down", "interevent"):
        fd = f[which]
        if fd is None:
            rows.append((which, "-", "-", "-", "-", "-", "-", "fewer than 2 complete periods"))
            continue
        for law, r in fd["laws"].items():
            rows.append((which, law, _fmt(r["mean"]), _fmt(r["shape"]), _fmt(r["aic"], 6),
                         _fmt(r["ks"], 3), f"{fd['n']}+{fd['censored']}c",
                         "best" if law == fd["best"] else ""))
    print_table(rows, ("durations", "law", "mean (s)", "shape", "AIC", "KS", "n", ""))
    sz = f["sizes"]
    if sz["events"]:
        print(f"event sizes: mean {sz['mean']:.4g}; zero-truncated geometric p = "
              f"{sz['geometric_p']:.4g} (AIC {sz['geometric_aic']:.6g}) predicts batch fraction "
              f"{sz['geometric_batch_fraction']:.4g}, observed {sz['batch_fraction']:.4g}")
    if f["zero_length"]:
        print(f"{f['zero_length']} zero-length periods (a dip and a replacement at one "
              "timestamp) left out of the duration fits")
    d = f["domains"]
    if "error" in d:
        print(f"domain hierarchy: none ({d['error']})")
    else:
        print(f"domain hierarchy (the failure model's domains): {d['domains']} "
              f"domain{'s' if d['domains'] != 1 else ''} of {d['domain_size']} workers; domain outage {d['domain_outage']:.4g} with mean "
              f"{d['domain_mean_downtime']:.4g} s (mean up {d['domain_mean_uptime']:.4g} s); "
              f"own availability {d['availability']:.4g}, mean own outage "
              f"{d['mean_downtime']:.4g} s"
              + ("; at the bound a = availability: the bursts are smaller than whole domains "
                 "of up workers, so the fit puts every outage on the workers (rho = 0) and "
                 "makes each burst an instant domain outage" if d["boundary"] else ""))
    g = f["generator"]
    if "error" in g:
        print(f"no generator: {g['error']}")
    else:
        print(f"generator: events at {g['event_rate'] * 3600:.4g}/h, sizes from the empirical "
              f"law, down times {g['down_law']} with mean {g['down_mean']:.4g} s"
              + (f" and shape {g['down_shape']:.4g}" if g["down_shape"] is not None else "")
              + f"; availability {g['availability']:.4g}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from ..plotting import check_figure_file, plot_trace

    check_int("samples", args.samples, low=0)
    check_figure_file("out", args.out, overwrite=args.overwrite)  # before the trace is read and fitted, not after
    tr = _load(args)
    print_unit_note(tr, indent="")
    band = None
    if args.samples:
        try:
            model = fit_model(tr)
        except ConfigError as exc:  # nothing stationary to fit: draw the trace alone, say why
            print(f"no envelope: {exc}")
        else:
            band = envelope(model, tr.end, rng=Streams(args.seed).rng("trace:envelope"),
                            samples=args.samples)
    path = plot_trace(tr.times.tolist(), tr.counts.tolist(), tr.end, args.out, band=band,
                      capacity=tr.capacity, title=f"{args.trace} ({tr.format})")
    print(f"wrote {path}")
    return 0


def run(args: argparse.Namespace) -> int:
    return {"list": _list, "stats": _stats, "fit": _fit, "plot": _plot}[args.trace_command](args)
