"""``dtsim run``: run an experiment sweep into its results folder (resumable)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SimulationError
from ..results import format_interval, format_number, print_table
from ..runner import EXECUTORS, SweepResult, default_out, load_experiment, run_experiment
from ..runner.executors import check_workers
from ..runner.experiments import run_analyse
from ._applies import refuse_unless

NAME = "run"
HELP = "run an experiment file's sweep (resumable) and write its results folder"

__all__ = ["NAME", "HELP", "add_arguments", "add_executor_options", "run", "print_summary",
           "store_report"]


def add_executor_options(p: argparse.ArgumentParser, *, default: str = "local") -> None:
    """``--executor --scheduler --workers --seed --quiet`` (shared with ``reproduce``)."""
    p.add_argument("--executor", default=None, metavar="NAME",
                   help=f"{' | '.join(EXECUTORS)} (default {default}; dask when --scheduler is given)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local processes or local Dask workers (default: all cores)")
    p.add_argument("--seed", type=int, default=None, help="root seed (default: the experiment's)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim run``."""
    p.add_argument("experiment", metavar="EXPERIMENT.py", help="experiment file, e.g. experiments/example_sweep.py")
    p.add_argument("--quick", action="store_true", help="the experiment's QUICK settings (small, for CI)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="results folder (default out/NAME, or out/NAME_quick)")
    add_executor_options(p)
    p.add_argument("--fail-fast", action="store_true", help="stop at the first task that raises")
    p.add_argument("--batch", type=int, default=None, metavar="K",
                   help="replications per executor call (default: the experiment's BATCH, or 1)")
    p.add_argument("--prune", action="store_true",
                   help="after a complete run, remove the stored records this run did not use "
                        "(other configs, seeds, code or replications); without it nothing stored "
                        "is ever removed")


def resolve_executor(executor: str | None, scheduler: str | None, default: str = "local") -> str:
    """The executor name: as given, else dask with a scheduler, else ``default``."""
    if executor is not None:
        return executor
    return "dask" if scheduler else default


def _nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def print_summary(result: SweepResult, *, max_metrics: int = 6) -> None:
    """Print one line per point: parameters and ``mean [low, high]`` per metric.

    A metric no point measured (NaN in every record: the training DES's
    ``throughput_steady`` of any run but a saturated async pipeline, DiLoCo's
    included) is not a column of ``nan [nan, nan]`` but named on a line below
    (summary.csv keeps it).
    """
    metrics = result.metrics[:max_metrics]
    summary = result.summary(metrics)
    unmeasured = [m for m in metrics if summary and all(
        not isinstance(s.get(f"{m}_mean"), (int, float)) or math.isnan(s[f"{m}_mean"])
        for s in summary)]
    metrics = [m for m in metrics if m not in unmeasured]
    rows = []
    for s in summary:
        cells = [format_number(s[f]) if isinstance(s.get(f), (int, float))
                 else "-" if s.get(f) is None else str(s[f])  # a factor this point does not set
                 for f in result.factors]
        cells.append(f"{s['replications']}" + (f" ({s['errors']} failed)" if s["errors"] else ""))
        for m in metrics:
            if s.get(f"{m}_kind") == "upper":  # a declared rate with no event: a one-sided bound
                cells.append(f"below {format_number(s[f'{m}_high'])}")
                continue
            if s.get(f"{m}_kind") == "exact":  # the point's config fixes it: no interval
                cells.append(f"{format_number(s[f'{m}_mean'])} (exact)")
                continue
            mean, low, high = s[f"{m}_mean"], s[f"{m}_low"], s[f"{m}_high"]
            if _nan(low) and _nan(high):  # one replication (or one value): no interval to give
                # (user trial 3) was "2.388 [nan, nan]", as if the run had gone wrong
                cells.append("nan" if _nan(mean) else f"{format_number(mean)} (no interval)")
                continue
            cells.append(format_interval(mean, low, high))
        rows.append(tuple(cells))
    print_table(rows, tuple(result.factors) + ("reps",) + tuple(metrics))
    if unmeasured:
        print(f"({', '.join(unmeasured)}: not measured at any point (NaN in every record), "
              "not shown)")
    if len(result.metrics) > max_metrics:
        print(f"(+{len(result.metrics) - max_metrics} more metrics in summary.csv)")


def store_report(result: SweepResult, out: Path) -> list[str]:
    """Lines saying what a run did with its results folder: reused, run, set aside, kept, removed."""
    lines = []
    if result.manifest_damaged:
        lines.append(f"{out}/manifest.json was damaged ({result.manifest_damaged}): set aside in "
                     f"{out}/manifest.damaged and written anew; stored records were matched by "
                     "their config hashes")
    if result.code_changed:
        lines.append(f"code changed since the stored records were computed ({result.code_changed}):"
                     " they are kept but not reused")
    if result.retried:
        lines.append(f"{result.retried} stored failed tasks were run again")
    for why, n in sorted(result.set_aside.items()):
        if why.startswith("the header line"):
            lines.append(f"the header of {out}/records.csv had changed after it was written: "
                         f"restored from manifest.json (the changed line is in "
                         f"{out}/records.damaged); every record kept")
        elif why.startswith("an exact copy"):
            lines.append(f"{n} exact copies of stored lines were set aside in "
                         f"{out}/records.damaged (the first of each is used)")
        else:
            lines.append(f"{n} damaged stored lines ({why}) were set aside in "
                         f"{out}/records.damaged and their tasks run again")
    if result.repeated:
        lines.append(f"{result.repeated} stored records repeat a task stored earlier in "
                     f"{out}/records.csv (the first is used; they are kept)")
    if result.unused:
        lines.append(f"{result.unused} stored records of other configs, seeds, code or replications "
                     f"are kept in {out}/records.csv but not used (dtsim run --prune removes them)")
    if result.removed:
        lines.append(f"{result.removed} stored records this run did not use were removed (--prune)")
    return lines


def quick_overrides(module: Any) -> str:
    """What an experiment file's ``QUICK`` replaces, as one line (empty when nothing)."""
    q = getattr(module, "QUICK", None) or {}
    parts = []
    for k, v in q.items():
        if k == "BASE" and isinstance(v, Mapping):
            parts += [f"BASE.{a}={b!r}" for a, b in v.items()]
        elif k == "POINTS":
            parts.append(f"POINTS ({len(v)} points; the file's FACTORS or POINTS are not used)")
        elif k == "FACTORS":
            parts.append(f"FACTORS={v!r} (the file's FACTORS or POINTS are not used)")
        else:
            parts.append(f"{k}={v!r}")
    return ", ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Run the experiment; exit 1 when a task failed, 0 otherwise."""
    executor = resolve_executor(args.executor, args.scheduler)
    refuse_unless(args, "workers", executor != "serial", "with --executor local or dask")
    # a worker count the machine does not have is refused before the experiment file is read
    check_workers(executor, args.workers, scheduler=args.scheduler)
    exp = load_experiment(args.experiment, quick=args.quick)
    refuse_unless(args, "quick", bool(getattr(exp.module, "QUICK", None)),
                  "with an experiment that defines QUICK (this one would run in full)")
    if args.quick and not args.quiet:
        text = quick_overrides(exp.module)
        print(f"--quick overrides: {text or 'nothing (the file has no QUICK)'}", file=sys.stderr)
    out = Path(args.out) if args.out else default_out(exp)
    result = run_experiment(
        exp, out=out, seed=args.seed,
        executor=executor,
        workers=args.workers, scheduler=args.scheduler, fail_fast=args.fail_fast,
        progress=False if args.quiet else None, batch=args.batch, prune=args.prune,
        analyse=False,
    )
    print_summary(result)
    n = len(result.records)
    print(f"\n{exp.name}: {n} tasks ({result.ran} run now, {result.reused} from the store, "
          f"{result.errors} failed); results in {out}/ (records.csv, summary.csv)")
    for line in store_report(result, out):
        print(line)
    if not result.interrupted:
        try:
            run_analyse(exp, result, out)
        except SimulationError as exc:  # the results are stored and printed: one line, exit 1
            print(f"dtsim run: error: {exc}; the results are stored in {out}/", file=sys.stderr)
            return 1
    if result.errors:
        first = result.failed()[0]
        print(f"dtsim run: {result.errors} tasks failed, first (point {first['point']}, replication "
              f"{first['replication']}): {first['error']}; tracebacks in {out}/errors.log",
              file=sys.stderr)
        if result.interrupted:
            print("dtsim run: stopped at the first failure (--fail-fast)", file=sys.stderr)
        return 1
    return 0
