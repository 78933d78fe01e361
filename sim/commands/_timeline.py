"""``--timeline FILE``: the options, the check before any work, and writing one replication's events.

Shared by ``dtsim train``, ``pipeline``, ``network`` and ``gossip``. The
replication recorded is ``--timeline-replication K`` (default 0; ``dtsim
network`` runs once and has no such option). With the serial executor (the
default) replication K runs with a :class:`sim.timeline.Recorder` as one of
the replications (:class:`RecordingModel`: the recorder changes no number, so
the results are those of a run without it). With a process pool or Dask the
replications run as they would, then replication K runs once more here with
the recorder (its streams are the same, so its run is the same), and its
metrics are checked equal to the first run's. The JSON payload on stdout is the same with and
without ``--timeline``: the line saying what was written goes to stdout in
the text report and to stderr with ``--json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ConfigError, SimulationError, ascii_int, check, check_int, one_line
from ..timeline import (
    DEFAULT_MAX_EVENTS,
    RUN_LIMIT_FACTOR,
    Recorder,
    TimelineRequest,
    timeline_request,
)

__all__ = ["add_timeline_options", "timeline_from_args", "first_difference", "write_timeline",
           "RecordingModel", "finish_timeline"]


def add_timeline_options(p: argparse.ArgumentParser, *, what: str,
                         replications: bool = True) -> None:
    """``--timeline FILE``, ``--timeline-window T0:T1``, ``--timeline-max-events N`` and, for a
    command of several replications, ``--timeline-replication K``."""
    g = p.add_argument_group("timeline (the Trace Event Format of Perfetto and chrome://tracing; "
                             "dtsim plot --timeline draws it)")
    which = "of replication K (--timeline-replication) " if replications else ""
    g.add_argument("--timeline", default=None, metavar="FILE",
                   help=f"write {what} {which}to FILE as Trace Event Format JSON "
                        "(simulated seconds as microseconds; an existing FILE is replaced only "
                        "if it is a timeline dtsim wrote, or with --overwrite); "
                        "the numbers printed are the same with and without it")
    g.add_argument("--timeline-window", default=None, metavar="T0:T1",
                   help="keep only the events that intersect [T0, T1] (simulated time; "
                        "default the whole run)")
    g.add_argument("--timeline-max-events", default=None, metavar="N",
                   help=f"keep at most N events (default {DEFAULT_MAX_EVENTS:,}); the ones "
                        "past it are counted by category in the file and on the output; a run "
                        f"of more than {RUN_LIMIT_FACTOR} x N events is refused before it runs")
    if "--overwrite" not in p._option_string_actions:  # (dtsim train's covers --export-plan too)
        other = " or --event-log" if any(a.dest == "event_log" for a in p._actions) else ""
        g.add_argument("--overwrite", action="store_true",
                       help=f"replace an existing --timeline{other} FILE whatever it holds "
                            "(without it only a file dtsim wrote is replaced)")
    if replications:
        g.add_argument("--timeline-replication", default=None, metavar="K",
                       help="the replication recorded, 0 <= K < --replications (default 0, the "
                            "seed's first); the output says whether a worker failed or was "
                            "preempted in it")


def timeline_from_args(args: argparse.Namespace) -> TimelineRequest | None:
    """The checked request of the options (None without ``--timeline``), before any work."""
    cap = getattr(args, "timeline_max_events", None)
    if cap is not None:
        try:
            cap = ascii_int(str(cap).strip())
        except ValueError:
            raise ConfigError("timeline_max_events", "an integer in [1, 100000000]",
                              args.timeline_max_events) from None
        check_int("timeline_max_events", cap, low=1, high=10**8)
    overwrite = bool(getattr(args, "overwrite", False))
    users = ["timeline"] + [d for d in ("event_log", "export_plan") if hasattr(args, d)]
    check(not overwrite or any(getattr(args, d, None) is not None for d in users), "overwrite",
          "given only with " + " or ".join("--" + d.replace("_", "-") for d in users), True)
    from ._common import check_not_an_input

    for dest in ("timeline", "event_log"):  # every command: never over a file it reads
        check_not_an_input(dest, getattr(args, dest, None), args)
    request = timeline_request(getattr(args, "timeline", None),
                               getattr(args, "timeline_window", None), cap, overwrite=overwrite)
    k = getattr(args, "timeline_replication", None)
    if k is None:
        return request
    check(request is not None, "timeline_replication", "given only with --timeline", k)
    reps = getattr(args, "replications", 1)
    if not isinstance(reps, int) or reps < 1:  # refused as 'replications' by the command
        reps = 1
    rule = f"an integer in [0, {reps - 1}] (0 <= K < --replications {reps})"
    try:
        kk = ascii_int(str(k).strip())
    except ValueError:
        raise ConfigError("timeline_replication", rule, k) from None
    check(0 <= kk < reps, "timeline_replication", rule, k)
    return replace(request, replication=kk)  # type: ignore[arg-type]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
        except TypeError:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def first_difference(record: dict[str, Any], metrics: dict[str, Any]) -> str | None:
    """The first metric of the recorded run that differs from the first run's record (None:
    every one is the same, bit for bit)."""
    for k, v in metrics.items():
        if k not in record or not _same(record[k], v):
            return k
    return None


def failure_text(rec: Recorder) -> str:
    """What failed in the recorded run (the whole run, window and cap aside), or that nothing
    did: ``3 workers down, 2 spot preemptions`` or ``no worker failure or preemption``."""
    down, pre = rec.failures["down"], rec.failures["preempted"]
    parts = ([f"{down:,} worker{'s' if down != 1 else ''} down"] if down else []) + \
        ([f"{pre:,} spot preemption{'s' if pre != 1 else ''}"] if pre else [])
    return ", ".join(parts) if parts else "no worker failure or preemption"


def write_timeline(request: TimelineRequest, rec: Recorder, *, command: str, seed: int | None,
                   json_mode: bool, record: dict[str, Any] | None = None,
                   metrics: dict[str, Any] | None = None, **other: Any) -> None:
    """Check the recorded run against the first run, write the file, say what it holds.

    Raises
    ------
    SimulationError
        When the recorded run of the replication gave another number than the
        first run (a recorder must change nothing), or the file cannot be written.
    """
    k = request.replication
    if record is not None and metrics is not None:
        key = first_difference(record, metrics)
        if key is not None:
            raise SimulationError(f"the timeline's run of replication {k} gave another {key} "
                                  f"({metrics.get(key)!r}) than the first run "
                                  f"({record.get(key)!r}); no timeline written")
    meta = {"generator": f"dtsim {command}", "replication": k if seed is not None else None,
            "seed": seed, **other}
    try:
        path = rec.write(request.path, meta)
    except OSError as exc:
        raise SimulationError(f"could not write the timeline to {request.path}: "
                              f"{one_line(exc)}") from None
    s = rec.summary()
    line = f"timeline: {s['events']:,} events"
    line += f" of replication {k}" if seed is not None else ""
    line += f" written to {path}"
    if s["outside_window"]:
        line += f" ({s['outside_window']:,} outside the window left out)"
    if s["left_out"]:
        total = sum(s["left_out"].values())
        parts = ", ".join(f"{k} {v:,}" for k, v in s["left_out"].items())
        line += (f"; the cap of {rec.max_events:,} events was reached at t = "
                 f"{s['left_out_from']:.6g}: {total:,} more left out ({parts})")
    out = sys.stderr if json_mode else sys.stdout
    print(line, file=out)
    if seed is not None:
        print(f"timeline: replication {k} (seed {seed}) had {failure_text(rec)}", file=out)


class RecordingModel:
    """A model for :func:`sim.runner.replicate` that records replication ``replication`` as
    it runs.

    ``run(config, streams, recorder=...)`` is the engine's; the call whose
    streams are that replication's (under root ``seed``) gets the recorder, every
    other call runs as it would. In-process only (the serial executor): a
    process pool would record in another process.
    """

    def __init__(self, run: Any, recorder: Recorder, seed: int, replication: int = 0) -> None:
        from ..rng import Streams

        self.run = run
        self.rec = recorder
        self.target = repr(Streams(seed).replication(replication))
        self.recorded: dict[str, Any] | None = None

    def __call__(self, config: Any, streams: Any) -> dict[str, Any]:
        if self.recorded is None and repr(streams) == self.target:
            self.recorded = self.run(config, streams, recorder=self.rec)
            return self.recorded
        return self.run(config, streams)


def finish_timeline(request: TimelineRequest, model: RecordingModel | None, rerun: Any, *,
                    record: dict[str, Any], command: str, seed: int, json_mode: bool,
                    **other: Any) -> None:
    """Write the requested replication's timeline: the one ``model`` recorded in the run, else
    the one of ``rerun() -> (recorder, metrics)`` checked equal to the run's ``record`` (that
    replication's)."""
    if model is not None and model.recorded is not None:
        write_timeline(request, model.rec, command=command, seed=seed, json_mode=json_mode,
                       **other)
        return
    rec, metrics = rerun()
    write_timeline(request, rec, command=command, seed=seed, json_mode=json_mode, record=record,
                   metrics=metrics, **other)
