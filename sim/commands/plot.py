"""``dtsim plot OUTDIR``: redraw an experiment's figures from its stored results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError, check
from ..runner import SweepResult, code_version, load_experiment, read_manifest, read_records

NAME = "plot"
HELP = "redraw an experiment's figures from its results folder (no re-run)"

__all__ = ["NAME", "HELP", "add_arguments", "run", "load_result"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dtsim plot``."""
    p.add_argument("outdir", metavar="OUTDIR", help="results folder written by dtsim run")
    p.add_argument("--experiment", default=None, metavar="FILE",
                   help="experiment file whose analyse() draws the figures "
                        "(default: the file recorded in the manifest)")


def load_result(outdir: str | Path) -> tuple[dict, SweepResult]:
    """The manifest and the stored results (as a :class:`SweepResult`) of a folder.

    Only records of the manifest's points (matching config hashes) are kept.
    """
    out = Path(outdir)
    manifest = read_manifest(out) if out.is_dir() else None
    check(manifest is not None, "OUTDIR", "a results folder with a manifest.json", str(outdir))
    assert manifest is not None
    pts = manifest.get("points", [])
    points = [dict(p["params"]) for p in pts]
    hashes = {p["config_hash"]: p["point"] for p in pts}
    reps = int(manifest.get("replications", 0))
    want = {(p["config_hash"], k): p["point"] for p in pts
            for k in range(int(p.get("replications", reps)))}
    records = read_records(out, want)
    for r in records:
        r["point"] = hashes[r["config_hash"]]
    records.sort(key=lambda r: (r["point"], r["replication"]))
    factors = list(dict.fromkeys(k for p in points for k in p))
    result = SweepResult(manifest["experiment"], points, factors, records, out=out)
    result.errors = len(result.failed())
    return manifest, result


def run(args: argparse.Namespace) -> int:
    """Call the experiment's ``analyse`` (or draw default figures) from the stored tables."""
    manifest, result = load_result(args.outdir)
    out = Path(args.outdir)
    file = args.experiment or manifest.get("file")
    analyse = None
    if file:
        if not Path(file).is_file() and args.experiment is None:
            print(f"dtsim plot: note: experiment file {file} is gone; drawing default figures",
                  file=sys.stderr)
        else:
            exp = load_experiment(file, quick=bool(manifest.get("quick", False)))
            if exp.name != manifest["experiment"]:
                raise ConfigError("experiment", f"the file of experiment {manifest['experiment']!r}, "
                                  f"not of {exp.name!r}", str(file))
            recorded = (manifest.get("code_version") or {}).get("experiment")
            if recorded and recorded != code_version(exp.path).get("experiment"):
                print(f"dtsim plot: note: {file} changed since these results were computed",
                      file=sys.stderr)
            analyse = exp.analyse
            result.rates = dict(exp.rates)
            result.nonnegative = exp.nonnegative
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.png")}
    if analyse is not None:
        analyse(result, out)
    else:
        from ..plotting import plot_summary_table

        plot_summary_table(result.summary(), result.factors, result.metrics, out)
    drawn = sorted(p for p in out.rglob("*.png") if before.get(p) != p.stat().st_mtime_ns)
    for p in drawn:
        print(p)
    if not drawn:
        print(f"dtsim plot: no figures drawn in {out}", file=sys.stderr)
    return 0
