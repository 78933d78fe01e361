"""``dtsim reproduce``: run the study reproductions and write ``report.md``.

A study is an ordinary experiment file (see :mod:`sim.runner.experiments`)
that also sets a ``STUDY`` marker (``STUDY = "A"``), a ``TITLE`` and
``claims(results) -> list[dict]``. Every such file of the experiments folder
is found by its marker (studies run in marker order), run into
``OUT/<file stem>/`` like ``dtsim run`` would (stored, resumable, on the
chosen executor, which the studies share), and its claim rows (``claim``,
``exact``, ``estimate`` -- a :class:`~sim.results.Estimate` or a number --
``agrees`` and optional ``note``) go into the report.

The report has one table per study, ``claim | exact | simulated (95% CI) |
agrees``, and embeds the figures each study's ``analyse`` drew. The command
exits 1 when any claim disagrees or a study fails to run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check, check_choice, check_output_dir, check_replaceable
from ..results import estimate_text, format_number, is_report_file, print_table, write_report
from ..rng import Streams
from ..runner import (
    EXECUTORS,
    check_results_folder,
    find_studies,
    load_experiment,
    open_executor,
    run_experiment,
)
from ..runner.executors import check_reachable, check_workers
from ._applies import refuse_unless
from .run import add_executor_options, resolve_executor

NAME = "reproduce"
HELP = "reproduce both studies' claims by simulation and write report.md (exit 1 if any disagrees)"

__all__ = [
    "NAME", "HELP", "add_arguments", "run", "find_experiments", "load_studies",
    "reproduce_studies",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim reproduce``."""
    p.add_argument("--quick", action="store_true", help="small runs (CI): under 2 minutes on 2 cores")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default out/reproduce, or out/reproduce_quick)")
    add_executor_options(p)
    p.add_argument("--experiments", default=None, metavar="DIR",
                   help="folder holding the study files, found by their STUDY marker "
                        "(default: ./experiments, else the repository's)")


def find_experiments(path: str | Path | None = None) -> Path:
    """The experiments folder: ``path``, else ``./experiments``, else the repository's."""
    if path is not None:
        p = Path(path)
        check(p.is_dir(), "experiments", "an existing folder", str(path))
        return p
    here = Path.cwd() / "experiments"
    if here.is_dir():
        return here
    repo = Path(__file__).resolve().parents[2] / "experiments"
    check(repo.is_dir(), "experiments", "an existing folder (give --experiments DIR)", str(here))
    return repo


def _check_rows(rows: Any) -> list[dict[str, Any]]:
    if not isinstance(rows, Sequence) or isinstance(rows, (str, bytes)):
        raise TypeError(f"claims() returned {type(rows).__name__}, not a list of claim rows")
    out = []
    for r in rows:
        if not isinstance(r, Mapping) or not {"claim", "exact", "estimate", "agrees"} <= set(r):
            raise TypeError(f"claim row without claim/exact/estimate/agrees: {r!r}")
        out.append({**r, "agrees": bool(r["agrees"])})
    return out


def load_studies(files: Sequence[Path], *, quick: bool) -> list[dict[str, Any]]:
    """Load every study file (before any worker process starts).

    Returns
    -------
    list of dict
        Per study: ``stem``, ``path``, ``title``, ``experiment`` (or None) and
        ``error`` (why it could not be loaded, else empty).
    """
    out = []
    for path in files:
        entry: dict[str, Any] = {"stem": path.stem, "path": path, "title": path.stem,
                                 "experiment": None, "error": ""}
        try:
            exp = load_experiment(path, quick=quick)
            entry["title"] = exp.title
            if not callable(getattr(exp.module, "claims", None)):
                raise TypeError(f"{path.name} defines no claims(results)")
            entry["experiment"] = exp
        except Exception as exc:
            entry["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        out.append(entry)
    return out


def reproduce_studies(
    loaded: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    seed: int,
    executor: Any,
    progress: bool | None = None,
    log: Any = None,
) -> list[dict[str, Any]]:
    """Run each loaded study into ``out / stem`` and collect its claim rows and figures.

    Parameters
    ----------
    loaded : list of dict
        From :func:`load_studies`.
    out : Path
        Report folder.
    seed : int
        Root seed of every study.
    executor : {"serial"} or Executor
        Where the studies' tasks run (shared).
    progress : bool or None
        Progress bars (None: when stderr is a terminal).
    log : file, optional
        Where to print a line per finished study.

    Returns
    -------
    list of dict
        Per study: ``title``, ``rows``, ``figures``, ``seconds``, ``note`` and
        ``error`` (empty, or why the study failed).
    """
    results = []
    for study in loaded:
        stem = study["stem"]
        study_out = out / stem
        entry: dict[str, Any] = {"title": study["title"], "rows": [], "figures": [],
                                 "error": study["error"]}
        t0 = time.time()
        exp = study["experiment"]
        if exp is not None:
            try:
                result = run_experiment(exp, out=study_out, seed=seed, executor=executor,
                                        progress=progress)
                if result.errors:
                    first = result.failed()[0]
                    raise RuntimeError(
                        f"{result.errors} tasks failed, first (point {first['point']}, replication "
                        f"{first['replication']}): {first['error']}; tracebacks in "
                        f"{study_out}/errors.log")
                entry["rows"] = _check_rows(exp.claims(result))
            except Exception as exc:  # one failed study must not hide the other's table
                entry["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        entry["seconds"] = time.time() - t0
        entry["figures"] = (sorted(p for p in study_out.rglob("*.png") if p.stat().st_mtime >= t0 - 1)
                            if study_out.is_dir() else [])
        entry["note"] = (f"{len(entry['rows'])} claims, {entry['seconds']:.0f} s; "
                         f"data and figures in `{stem}/`.")
        if log is not None:
            print(f"{entry['title']} ({entry['seconds']:.1f} s)", file=log)
        results.append(entry)
    return results


def run(args: argparse.Namespace) -> int:
    """Run the studies, print their tables, write the report; 1 if any claim disagrees."""
    executor = resolve_executor(args.executor, args.scheduler)
    check_choice("executor", executor, EXECUTORS)
    check_workers(executor, args.workers, scheduler=args.scheduler)
    refuse_unless(args, "workers", executor != "serial", "with --executor local or dask")
    if args.scheduler:  # before the study files are imported (seconds): one line at once
        if executor != "dask":
            raise ConfigError("scheduler", "used with the dask executor only, not with", executor)
        check_reachable(args.scheduler, 5.0)
    seed = 0 if args.seed is None else args.seed
    Streams(seed)
    experiments = find_experiments(args.experiments)
    files = find_studies(experiments)
    check(bool(files), "experiments", 'a folder holding study files (files that set STUDY = "...")',
          str(experiments))
    out = Path(args.out) if args.out else Path("out") / ("reproduce_quick" if args.quick else "reproduce")
    check(not out.exists() or out.is_dir(), "out", "a folder", str(out))
    check_output_dir("out", out)  # writable, before any study runs
    # before any study runs: report.md is replaced only if it is a report dtsim wrote, and each
    # study's folder must hold no other experiment's runs (Store.open would refuse it later)
    check_replaceable("out", out / "report.md", overwrite=False, ours=is_report_file,
                      kind="a report", how="give --out another folder")
    t0 = time.time()
    loaded = load_studies(files, quick=args.quick)
    for study in loaded:
        if study["experiment"] is not None:
            check_results_folder(study["experiment"], out / study["stem"])
    with open_executor(executor, args.workers, scheduler=args.scheduler) as ex:
        studies = reproduce_studies(loaded, out, seed=seed,
                                    executor="serial" if ex is None else ex,
                                    progress=False if args.quiet else None,
                                    log=None if args.quiet else sys.stderr)
    cmd = "dtsim reproduce" + (" --quick" if args.quick else "")
    preamble = (f"`{cmd}` -- seed {seed}, executor {executor}, {time.time() - t0:.0f} s, "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. An exact value agrees when it "
                "lies inside the simulated 95% interval (across independent replications), "
                "within the claim's stated tolerance, or, in a table of many claims, inside "
                "the table's family-wise (Bonferroni) 95% interval; rows that pass only on the "
                "family-wise interval say so in the notes.")
    report = write_report(studies, out / "report.md", preamble=preamble)
    bad = 0
    for s in studies:
        print(f"\n{s['title']}")
        if s["error"]:
            print(f"  FAILED TO RUN: {s['error']}")
            bad += 1
        rows = [(r["claim"], format_number(r["exact"]), estimate_text(r["estimate"]),
                 "yes" if r["agrees"] else "NO") for r in s["rows"]]
        if rows:
            print_table(rows, ("claim", "exact", "simulated (95% CI)", "agrees"))
        bad += sum(1 for r in s["rows"] if not r["agrees"])
    print(f"\nreport: {report}")
    if bad:
        print(f"dtsim reproduce: {bad} claims disagree or studies failed; see {report}", file=sys.stderr)
        return 1
    return 0


