"""``dtsim reproduce``: run both study reproductions and write ``report.md``.

Each study is an experiment file in ``experiments/`` exposing::

    reproduce(quick: bool, out: pathlib.Path, seed: int, executor) -> list[dict]

returning claim rows (``claim``, ``exact``, ``estimate`` -- a
:class:`~sim.results.Estimate` or a number -- and ``agrees``), and writing its
PNG figures into ``out``. ``executor`` is ``"serial"`` or an open
:class:`concurrent.futures.Executor` (a process pool or a Dask cluster shared
by both studies) to pass on to :func:`sim.runner.replicate`.

The report has one table per study, ``claim | exact | simulated (95% CI) |
agrees``, and embeds the figures each study wrote during this run. The command
exits 1 when any claim disagrees or a study fails to run.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import check, check_choice, check_int
from ..results import Estimate, format_number, write_report
from ..rng import Streams
from ..runner import EXECUTORS, DaskExecutor, _exec_module, open_executor
from ._common import print_table
from .run import add_executor_options, resolve_executor

NAME = "reproduce"
HELP = "reproduce both studies' claims by simulation and write report.md (exit 1 if any disagrees)"

#: (file stem in experiments/, title used when the module has no TITLE)
STUDIES: tuple[tuple[str, str], ...] = (
    ("replicate_or_skip", "Study A: should a pipeline replicate stages or skip them?"),
    ("stubborn_gossip", "Study B: what can one stubborn node do to gossip training?"),
)

__all__ = [
    "NAME", "HELP", "STUDIES", "add_arguments", "run", "find_experiments", "load_study",
    "load_studies", "reproduce_studies",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim reproduce``."""
    p.add_argument("--quick", action="store_true", help="small runs (CI): under 2 minutes on 2 cores")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default out/reproduce, or out/reproduce_quick)")
    add_executor_options(p)
    p.add_argument("--experiments", default=None, metavar="DIR",
                   help="folder holding the study files (default: ./experiments, else the repository's)")


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
        raise TypeError(f"reproduce() returned {type(rows).__name__}, not a list of claim rows")
    out = []
    for r in rows:
        if not isinstance(r, Mapping) or not {"claim", "exact", "estimate", "agrees"} <= set(r):
            raise TypeError(f"claim row without claim/exact/estimate/agrees: {r!r}")
        out.append({**r, "agrees": bool(r["agrees"])})
    return out


def load_study(path: Path) -> ModuleType:
    """Import a study file under its plain stem (``replicate_or_skip``).

    The plain name lets process-pool workers forked afterwards, and Dask
    workers given the file with ``Client.upload_file``, unpickle the functions
    the study defines. A changed file is re-imported.
    """
    check(path.is_file(), "experiment", "an existing .py file", str(path))
    source = path.read_text()
    digest = hashlib.blake2b(source.encode(), digest_size=8).hexdigest()
    mod = sys.modules.get(path.stem)
    if mod is not None and getattr(mod, "__dtsim_source__", None) == digest:
        return mod
    sys.modules.pop(path.stem, None)
    mod = _exec_module(path.stem, str(path.resolve()), source)
    mod.__dtsim_source__ = digest  # type: ignore[attr-defined]
    return mod


def load_studies(
    experiments: Path, studies: Sequence[tuple[str, str]] = STUDIES
) -> list[dict[str, Any]]:
    """Import every study file (before any worker process starts).

    Returns
    -------
    list of dict
        Per study: ``stem``, ``path``, ``title``, ``module`` (or None) and
        ``error`` (why it could not be imported, else empty).
    """
    out = []
    for stem, default_title in studies:
        path = experiments / f"{stem}.py"
        entry: dict[str, Any] = {"stem": stem, "path": path, "title": default_title,
                                 "module": None, "error": ""}
        try:
            mod = load_study(path)
            entry["title"] = getattr(mod, "TITLE", None) or default_title
            if not callable(getattr(mod, "reproduce", None)):
                raise TypeError(f"{stem}.py defines no reproduce(quick, out, seed, executor)")
            entry["module"] = mod
        except Exception as exc:
            entry["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        out.append(entry)
    return out


def reproduce_studies(
    loaded: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    quick: bool,
    seed: int,
    executor: Any,
    log: Any = None,
) -> list[dict[str, Any]]:
    """Run each loaded study's ``reproduce`` and collect its rows and figures.

    Parameters
    ----------
    loaded : list of dict
        From :func:`load_studies`.
    out : Path
        Report folder; study ``stem`` writes into ``out / stem``.
    quick, seed, executor
        Passed to each ``reproduce``.
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
        study_out.mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"title": study["title"], "rows": [], "figures": [],
                                 "error": study["error"]}
        t0 = time.time()
        if study["module"] is not None:
            try:
                rows = study["module"].reproduce(quick=quick, out=study_out, seed=seed,
                                                 executor=executor)
                entry["rows"] = _check_rows(rows)
            except Exception as exc:  # one failed study must not hide the other's table
                entry["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        entry["seconds"] = time.time() - t0
        entry["figures"] = sorted(p for p in study_out.rglob("*.png") if p.stat().st_mtime >= t0 - 1)
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
    if args.workers is not None:
        check_int("workers", args.workers, low=1)
    seed = 0 if args.seed is None else args.seed
    Streams(seed)
    experiments = find_experiments(args.experiments)
    out = Path(args.out) if args.out else Path("out") / ("reproduce_quick" if args.quick else "reproduce")
    t0 = time.time()
    loaded = load_studies(experiments)
    with open_executor(executor, args.workers, scheduler=args.scheduler) as ex:
        if isinstance(ex, DaskExecutor):
            for study in loaded:
                if study["module"] is not None:
                    ex.client.upload_file(str(study["path"]))
        studies = reproduce_studies(loaded, out, quick=args.quick, seed=seed,
                                    executor="serial" if ex is None else ex,
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
        rows = [(r["claim"], format_number(r["exact"]), _est(r["estimate"]),
                 "yes" if r["agrees"] else "NO") for r in s["rows"]]
        if rows:
            print_table(rows, ("claim", "exact", "simulated (95% CI)", "agrees"))
        bad += sum(1 for r in s["rows"] if not r["agrees"])
    print(f"\nreport: {report}")
    if bad:
        print(f"dtsim reproduce: {bad} claims disagree or studies failed; see {report}", file=sys.stderr)
        return 1
    return 0


def _est(e: Any) -> str:
    if isinstance(e, Estimate):
        return f"{format_number(e.mean)} [{format_number(e.low)}, {format_number(e.high)}]"
    return format_number(e)
