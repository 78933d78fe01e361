"""Option helpers shared by the subcommands (the printing helpers live in :mod:`sim.results`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..results import print_table, to_jsonable

__all__ = ["add_run_options", "emit_json", "to_jsonable", "print_table", "time_unit",
           "announce_fallback", "check_export_file", "write_export"]

#: Names of the time unit for the usual values of ``--hour`` (time units per hour).
_UNITS_PER_HOUR = {3600.0: "s", 60.0: "min", 1.0: "h", 3.6e6: "ms"}


def add_run_options(p: argparse.ArgumentParser, *, replications: int = 20, executor: bool = True) -> None:
    """``--replications --seed --json`` (and ``--executor --workers``)."""
    p.add_argument("--replications", type=int, default=replications, metavar="M",
                   help=f"independent replications (default {replications})")
    p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (one shows, with an ETA, only when stderr is a terminal)")
    if executor:
        p.add_argument("--executor", default="serial", metavar="NAME",
                       help="serial (default) or local (process pool)")
        p.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes for --executor local (default: all cores)")


def emit_json(payload: dict[str, Any]) -> None:
    """Print ``payload`` as one JSON object (non-finite numbers become null)."""
    json.dump(to_jsonable(payload), sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


def time_unit(hour: float) -> str:
    """The name of the simulated time unit when an hour is ``hour`` of them (``3600`` -> ``s``).

    Any other value gives ``"time unit"`` (the caller says what an hour is).
    """
    return _UNITS_PER_HOUR.get(float(hour), "time unit")


def warn(command: str, message: str) -> None:
    """One ``dtsim COMMAND: warning: MESSAGE`` line on stderr: the input is run as given, but
    something in it is likely not what the user meant."""
    print(f"dtsim {command}: warning: {message}", file=sys.stderr, flush=True)


def announce_fallback(command: str, engine: str, reason: str) -> None:
    """Say on stderr, before any replication runs, that a missing extra slows this run down.

    ``reason`` is the engine choice's explanation (``engine_reason``); when it
    says that a faster engine needs numba, one line names the engine that runs
    instead and the extra that installs numba, so a long run is not a surprise
    found at its end.
    """
    if "needs numba" in reason:
        print(f"dtsim {command}: note: numba is not installed, so the {engine} engine runs this "
              "(slower; the compiled engine needs pip install 'dtsim[fast]')", file=sys.stderr,
              flush=True)


def fleet_joins_plan(fleet: str, plan: Any) -> tuple[bool, list[str]]:
    """Whether a link of fleet file ``fleet`` joins two node kinds of ``plan`` (a
    :class:`sim.profiles.Plan`), and those kinds (``GPU@zone``, sorted).

    ``dtsim train --plan P --fleet F`` times the plan on F's links only; with no such link F
    changes nothing (refused there), and ``dtsim plan --out`` does not print it."""
    from ..profiles import read_fleet

    kinds = {(r.gpu, r.zone) for st in plan.stages for r in st.replicas}
    joins = any(x.src in kinds and x.dst in kinds for x in read_fleet(fleet).network.links)
    return joins, [f"{g}@{z}" for g, z in sorted(kinds)]


#: The options of the commands that write a timeline, an event log or a plan that name a
#: file the command reads.
INPUT_FILES = ("plan", "fleet", "speeds", "price_series", "step_times", "failure_trace",
               "network", "topology", "trace")


def check_not_an_input(name: str, path: str | None, args: Any) -> None:
    """(audit9) Refuse an output ``path`` that is one of the files the command reads (the
    options of :data:`INPUT_FILES` ``args`` has): with ``--overwrite`` ``train --plan
    launch.sh --export-plan launch.sh`` replaced the user's launch line with JSON, and
    ``plan --fleet F --export-plan F`` replaced the fleet, then failed reading it again."""
    from ..errors import ConfigError

    if path is None or not os.path.exists(path):
        return
    for dest in INPUT_FILES:
        given = getattr(args, dest, None)
        if isinstance(given, str) and os.path.isfile(given) and os.path.samefile(given, path):
            raise ConfigError(name, f"another file than --{dest.replace('_', '-')}'s (it "
                              "would replace a file the run reads)", path)


def check_export_file(name: str, path: str, overwrite: bool) -> Path:
    """Before any work: a file can be written at ``path`` (:func:`sim.errors.check_output_file`:
    not a folder, a device or a FIFO; its folder writable or creatable) and, unless
    ``overwrite`` (``--overwrite``), none is there yet (``/dev/null`` aside): ``--export-plan``
    replaces a file only when told to, where ``--out`` and ``--timeline`` overwrite one. A
    symbolic link is such a file; with ``overwrite`` the file it points to is replaced, the
    link stays (:func:`sim.errors.check_replaceable`'s rule)."""
    from ..errors import ConfigError, check_output_file, check_replaceable

    p = check_output_file(name, path)
    if not overwrite and (p.exists() or p.is_symlink()) and os.path.realpath(p) != os.devnull:
        raise ConfigError(name, "a file that does not exist yet (--overwrite to replace it)",
                          str(path))
    if p.is_symlink():  # with --overwrite: the file it points to, its folder writable
        check_replaceable(name, p, overwrite=True, ours=lambda _: False, kind="a file")
    return p


def write_export(name: str, path: str, text: str, overwrite: bool) -> None:
    """Write ``text`` to ``path`` (its folder made if missing): created anew (a file that
    appeared since :func:`check_export_file` is left as it is and named), or replaced
    atomically with ``overwrite``. A write that fails is one line, exit 1."""
    from ..errors import SimulationError, one_line, write_atomic

    p = Path(path)
    try:
        if os.path.realpath(p) == os.devnull:  # accepted by check_export_file: nothing kept
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            return
        if overwrite:  # atomically: a crash midway leaves the file it replaces whole
            write_atomic(p, text)
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "x", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise SimulationError(f"could not write the {name} to {path}: {one_line(exc)}") from None
