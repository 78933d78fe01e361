"""``dtsim plot OUTDIR``: redraw an experiment's figures from its stored results;
``dtsim plot --timeline FILE``: draw a run's timeline as a Gantt chart.

A results folder is data, never code: its CSV files and ``manifest.json`` are
read and checked, and the default figures (one per metric that varies over the
sweep, against the first factor; ``--metric NAME`` for named ones) are drawn from them alone. The Python file whose path the manifest
records is never imported or run. An experiment's own ``analyse(results,
out_dir)`` runs only when the user names the experiment file on the command
line (``--experiment FILE``), as ``dtsim run FILE`` would run it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SimulationError, check, one_line
from ..results import check_nonnegative_metrics, check_rates
from ..runner import SweepResult, code_version, load_experiment, read_manifest, read_records
from ..runner.experiments import run_analyse

NAME = "plot"
HELP = ("redraw an experiment's figures from its results folder (no re-run, no code from the "
        "folder), or draw a --timeline file as a Gantt chart")

__all__ = ["NAME", "HELP", "add_arguments", "run", "load_result", "check_manifest"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim plot``."""
    p.add_argument("outdir", metavar="OUTDIR", nargs="?", default=None,
                   help="results folder written by dtsim run")
    p.add_argument("--timeline", default=None, metavar="FILE",
                   help="instead of OUTDIR: a timeline written by --timeline (dtsim train, "
                        "pipeline, network, gossip), drawn as a Gantt chart: a row per device "
                        "and stream, passes by kind, transfers, failures, step boundaries and "
                        "bubble fractions")
    p.add_argument("--out", default=None, metavar="PNG",
                   help="with --timeline: the image written (default FILE with .png; an "
                        "existing one is replaced only if it is a figure dtsim wrote, or with "
                        "--overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --timeline: replace an existing image, whatever it holds")
    p.add_argument("--experiment", default=None, metavar="FILE",
                   help="the experiment file whose analyse() draws the figures; it is run, so "
                        "name only a file you trust (default: no code runs; one figure per metric "
                        "is drawn from the stored data, and the file the folder's manifest names "
                        "is never run)")
    p.add_argument("--metric", action="append", default=None, metavar="NAME",
                   help="draw only this metric's default figure, even if it is the same at every "
                        "point (repeat for several; default: every metric that varies over the "
                        "sweep, the constant ones named in one line; not with --timeline)")


def _bad(outdir: str | Path, why: str) -> ConfigError:
    return ConfigError("OUTDIR", f"a results folder with a valid manifest.json ({why})", str(outdir))


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_manifest(manifest: Any, outdir: str | Path) -> dict[str, Any]:
    """Check the parts of a folder's manifest that ``dtsim plot`` reads (it is untrusted data).

    Raises
    ------
    ConfigError
        ``'OUTDIR' must be a results folder with a valid manifest.json (<what is wrong>)``.
    """
    if not isinstance(manifest, dict):
        raise _bad(outdir, f"a JSON object, not {type(manifest).__name__}")
    name = manifest.get("experiment")
    if not isinstance(name, str) or not name:
        raise _bad(outdir, f"'experiment' must be a name, not {name!r}")
    reps = manifest.get("replications", 0)
    if not _is_count(reps):
        raise _bad(outdir, f"'replications' must be an integer >= 0, not {reps!r}")
    pts = manifest.get("points", [])
    if not isinstance(pts, list):
        raise _bad(outdir, f"'points' must be a list, not {type(pts).__name__}")
    for i, p in enumerate(pts):
        if not isinstance(p, dict):
            raise _bad(outdir, f"points[{i}] must be an object, not {type(p).__name__}")
        if not isinstance(p.get("params"), dict):
            raise _bad(outdir, f"points[{i}].params must be an object")
        if not isinstance(p.get("config_hash"), str) or not p["config_hash"]:
            raise _bad(outdir, f"points[{i}].config_hash must be a string")
        if p.get("point") != i:
            raise _bad(outdir, f"points[{i}].point must be {i}, not {p.get('point')!r}")
        if "replications" in p and not _is_count(p["replications"]):
            raise _bad(outdir, f"points[{i}].replications must be an integer >= 0")
        for k, v in p["params"].items():
            if isinstance(v, float) and not math.isfinite(v):
                continue  # NaN and infinities are stored as such: data, drawn as gaps
            if not isinstance(v, (str, int, float, bool, type(None), list)):
                raise _bad(outdir, f"points[{i}].params[{k!r}] must be a value, not "
                                   f"{type(v).__name__}")
    for key in ("file", "quick"):
        if key in manifest and not isinstance(manifest[key], (str, bool, type(None))):
            raise _bad(outdir, f"'{key}' must be a string or a flag")
    return manifest


def load_result(outdir: str | Path) -> tuple[dict, SweepResult]:
    """The manifest and the stored results (as a :class:`SweepResult`) of a folder.

    Only records of the manifest's points (matching config hashes) are kept.
    Nothing in the folder is run: the manifest and ``records.csv`` are read as
    data (regular files of bounded size) and checked.

    Raises
    ------
    ConfigError
        ``'OUTDIR'`` when the folder is not a results folder or its manifest is
        damaged or of the wrong shape.
    """
    out = Path(outdir)
    manifest = None
    if out.is_dir():
        try:
            manifest = read_manifest(out, name="OUTDIR")
        except ConfigError as exc:  # not a regular file, too large, or not a JSON object
            raise ConfigError("OUTDIR", "a results folder with a valid manifest.json",
                              str(exc.value)) from None
    check(manifest is not None, "OUTDIR", "a results folder with a manifest.json", str(outdir))
    manifest = check_manifest(manifest, outdir)
    pts = manifest.get("points", [])
    points = [dict(p["params"]) for p in pts]
    hashes = {p["config_hash"]: p["point"] for p in pts}
    reps = int(manifest.get("replications", 0))
    want = {(p["config_hash"], k): p["point"] for p in pts
            for k in range(int(p.get("replications", reps)))}
    records = read_records(out, want, name="OUTDIR")
    for r in records:
        r["point"] = hashes[r["config_hash"]]
    records.sort(key=lambda r: (r["point"], r["replication"]))
    factors = list(dict.fromkeys(k for p in points for k in p))
    result = SweepResult(manifest["experiment"], points, factors, records, out=out,
                         fixed=[_fixed_of(p) for p in pts])
    result.errors = len(result.failed())
    return manifest, result


def _fixed_of(entry: dict) -> dict[str, str]:
    """The metrics a manifest point records as fixed by its config (text only; else none)."""
    f = entry.get("fixed") if isinstance(entry, dict) else None
    if not isinstance(f, dict):
        return {}
    return {k: v for k, v in f.items() if isinstance(k, str) and isinstance(v, str)}


def _declared(manifest: dict[str, Any], result: SweepResult, outdir: str | Path) -> None:
    """The ``RATES`` and ``NONNEGATIVE`` the run recorded (data), so the intervals match ``run``."""
    try:
        result.rates = check_rates(manifest.get("rates"), "rates")
        result.nonnegative = check_nonnegative_metrics(manifest.get("nonnegative"), "nonnegative")
    except ConfigError as exc:
        raise _bad(outdir, f"'{exc.name}' must be {exc.rule}") from None


def _analyse(args: argparse.Namespace, manifest: dict[str, Any], result: SweepResult, out: Path):
    file = args.experiment
    exp = load_experiment(file, quick=bool(manifest.get("quick", False)))
    if exp.name != manifest["experiment"]:
        raise ConfigError("experiment", f"the file of experiment {manifest['experiment']!r}, "
                          f"not of {exp.name!r}", str(file))
    check(exp.analyse is not None, "experiment", "a file defining analyse(results, out_dir) "
          "(without --experiment, dtsim plot draws one figure per metric)", str(file))
    recorded = (manifest.get("code_version") or {}).get("experiment") \
        if isinstance(manifest.get("code_version"), dict) else None
    if recorded and recorded != code_version(exp.path).get("experiment"):
        print(f"dtsim plot: note: {file} changed since these results were computed",
              file=sys.stderr)
    result.rates = dict(exp.rates)
    result.nonnegative = exp.nonnegative
    return exp


def _timeline(args: argparse.Namespace) -> int:
    """``--timeline FILE [--out PNG]``: the Gantt chart of a timeline."""
    from ..plotting import check_figure_file, plot_timeline
    from ..timeline import gantt, read_timeline

    check(args.outdir is None, "OUTDIR", "not given with --timeline", args.outdir)
    check(args.experiment is None, "experiment", "not given with --timeline", args.experiment)
    check(args.metric is None, "metric", "not given with --timeline (a timeline is drawn whole, "
          "as one Gantt chart)", args.metric)
    out = args.out if args.out is not None else str(Path(args.timeline).with_suffix(".png"))
    check_figure_file("out", out, overwrite=args.overwrite)
    if Path(out).resolve() == Path(args.timeline).resolve():
        raise ConfigError("out", "another file than the timeline it draws", out)
    obj = read_timeline(args.timeline)
    g = gantt(obj)
    check(bool(g.rows), "timeline", "a timeline with at least one event to draw", args.timeline)
    path, _ = plot_timeline(g, out)
    print(path)
    return 0


def run(args: argparse.Namespace) -> int:
    """Draw the default figures from the stored data, or the named experiment's ``analyse``."""
    if args.timeline is not None:
        return _timeline(args)
    check(args.out is None, "out", "given only with --timeline", args.out)
    check(not args.overwrite, "overwrite", "given only with --timeline", True)
    check(args.metric is None or args.experiment is None, "metric",
          "not given with --experiment (its analyse() draws its own figures)", args.metric)
    check(args.outdir is not None, "OUTDIR", "a results folder (or --timeline FILE)", None)
    manifest, result = load_result(args.outdir)
    out = Path(args.outdir)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.png")}
    if args.experiment is not None:
        exp = _analyse(args, manifest, result, out)
        run_analyse(exp, result, out)  # what the user's analyse raises: one line, exit 1
    else:
        from ..errors import check_replaceable
        from ..plotting import (
            constant,
            is_dtsim_figure,
            plot_summary_table,
            summary_figures,
            unmeasured,
        )

        _declared(manifest, result, args.outdir)
        summary = result.summary()
        skipped = unmeasured(summary, result.metrics)
        metrics = list(result.metrics)
        for m in args.metric or ():
            check(m in metrics and m not in skipped, "metric",
                  "a metric measured in these results (" + ", ".join(
                      x for x in metrics if x not in skipped)[:300] + ")", m)
        same = ({} if args.metric is not None
                else constant(summary, [m for m in metrics if m not in skipped]))
        metrics = (list(dict.fromkeys(args.metric)) if args.metric is not None
                   else [m for m in metrics if m not in same])
        # (smallfix8) before any is drawn or noted: each figure replaces only a figure dtsim
        # drew (or an empty file), as every other output does; a user's file there was
        # overwritten
        for fig in summary_figures(summary, result.factors, metrics):
            check_replaceable("OUTDIR", out / f"{fig[4]}.png", overwrite=False,
                              ours=is_dtsim_figure, kind="a figure",
                              how="move it: dtsim plot replaces only the figures it drew")
        if manifest.get("file"):
            print(f"dtsim plot: note: default figures from the stored data; the experiment's own "
                  f"analyse() runs only when named: dtsim plot {args.outdir} --experiment FILE",
                  file=sys.stderr)
        if args.metric is None and skipped:
            print(f"dtsim plot: note: no figure for {', '.join(skipped)}: not measured at "
                  "any point (NaN in every record)", file=sys.stderr)
        if same:
            print("dtsim plot: note: no figure for the metrics the same at every point "
                  "(--metric NAME draws one): "
                  + ", ".join(f"{m}={v:g}" for m, v in same.items()), file=sys.stderr)
        try:
            plot_summary_table(summary, result.factors, metrics, out)
        except (TypeError, ValueError) as exc:  # stored values that cannot be drawn
            raise SimulationError(f"cannot draw the stored results of {out} "
                                  f"({one_line(exc)})") from None
    drawn = sorted(p for p in out.rglob("*.png") if before.get(p) != p.stat().st_mtime_ns)
    for p in drawn:
        print(p)
    if not drawn:
        print(f"dtsim plot: no figures drawn in {out}", file=sys.stderr)
    return 0
