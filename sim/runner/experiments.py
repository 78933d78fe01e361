"""Experiment files: the one format every experiment (and both studies) uses.

An experiment is a Python file ``experiments/NAME.py`` a user copies and
edits. It defines, at module level:

``NAME`` (str)
    The experiment's name; it owns its output folder (default ``out/NAME``,
    ``out/NAME_quick`` with ``--quick``).
``BASE``
    The base config: a frozen dataclass instance of values (or a dict).
``FACTORS`` (dict ``field -> list``) or ``POINTS`` (list of dicts)
    What varies. ``FACTORS = {}`` runs the base config alone. A point may
    also carry the run settings ``"replications"`` and ``"seed_offset"``
    (:mod:`sim.runner.tasks`).
``REPLICATIONS`` (int)
    Independent replications per point.
``model(config, streams) -> dict``
    A top-level function returning flat metrics.
``QUICK`` (dict, optional)
    Overrides for ``--quick``: any of ``"BASE"`` (a config, or a dict of field
    overrides), ``"FACTORS"``, ``"POINTS"``, ``"REPLICATIONS"``, ``"BATCH"``,
    ``"SEED"``.
``SEED`` (int, optional, default 0), ``BATCH`` (int, optional, default 1)
``RATES`` (dict, optional)
    The metrics that are probabilities or rates in ``[0, 1]``, each mapped to
    the independent trials behind one replication's value: ``None`` (trials
    inside a replication may be correlated), an int, or the name of a record
    field or point parameter. ``summary.csv`` gives them a rate's interval
    (inside ``[0, 1]``; ``m_kind`` ``upper`` and "below X" when no event was
    seen) and every other metric a Student-t interval
    (:func:`~sim.results.summary_rows`).
``NONNEGATIVE`` (sequence of str, or ``"*"``, optional)
    Metrics that cannot be negative (times, counts, throughputs), or ``"*"``
    for every metric not in ``RATES``: ``summary.csv`` cuts their Student-t
    intervals at 0, which keeps the coverage and the interval in range.
``FIXED`` (dict, optional)
    Metrics the model computes from the config alone (an exact reference it
    returns beside its measurements), each mapped to the reason: exact in
    ``summary.csv`` (``m_kind`` ``exact``, no interval). A config's own
    declarations (its ``fixed_metrics()``, :func:`~sim.results.config_fixed_metrics`)
    apply without it.
``analyse(results, out_dir)`` (optional)
    Draws figures and tables from a :class:`~sim.runner.SweepResult`;
    ``dtsim plot OUTDIR`` calls it again from the stored results.
``STUDY`` (str, optional), ``TITLE`` (str) and ``claims(results) -> list[dict]``
    A study reproduction: ``dtsim reproduce`` runs every file of its
    experiments folder that sets ``STUDY`` (in the order of the marker) and
    puts the rows ``claims`` returns (``claim``, ``exact``, ``estimate``,
    ``agrees``, optional ``note``) in ``report.md`` under ``TITLE``.

and ends with::

    if __name__ == "__main__":
        from sim.cli import main_for
        sys.exit(main_for(__file__))

so that ``python experiments/NAME.py [options]`` is the same as ``dtsim run
experiments/NAME.py [options]``. The experiment's source travels with each
task (see :class:`ExperimentModel`), so Dask workers need ``sim`` installed but
not the experiment file (helper modules it imports must be importable there).
"""

from __future__ import annotations

import ast
import importlib.util
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, is_dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import (
    MAX_SOURCE_BYTES,
    ConfigError,
    SimulationError,
    check,
    check_int,
    read_input_bytes,
)
from ..results import check_nonnegative_metrics, check_rates
from ..rng import Streams
from .identity import canonical, code_version, digest
from .sweep import SweepResult, fixed_declaration, sweep
from .tasks import Model, exception_line, expand_points

__all__ = [
    "Experiment",
    "ExperimentModel",
    "exec_module",
    "load_module",
    "load_experiment",
    "default_out",
    "run_experiment",
    "check_results_folder",
    "run_analyse",
    "study_marker",
    "find_studies",
]


class ExperimentModel:
    """Picklable reference to a model defined in an experiment file.

    Carries the file's source, so a worker (a spawned process or a remote Dask
    worker) can load the module under the same name before it unpickles any
    config class the module defines.
    """

    def __init__(self, module_name: str, path: str, source: str, attr: str = "model") -> None:
        self.module_name = module_name
        self.path = path
        self.source = source
        self.attr = attr

    def resolve(self) -> Model:
        """The model function (loading the experiment module if needed)."""
        mod = sys.modules.get(self.module_name)
        if mod is None:
            mod = exec_module(self.module_name, self.path, self.source)
        return getattr(mod, self.attr)

    def __call__(self, config: Any, streams: Streams) -> Mapping[str, Any]:
        return self.resolve()(config, streams)

    def __repr__(self) -> str:
        return f"ExperimentModel({self.path!r}, {self.attr!r})"


def exec_module(module_name: str, path: str, source: str) -> ModuleType:
    """Execute ``source`` as module ``module_name`` (registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    mod.__file__ = path
    mod.__dtsim_source__ = source  # the text that ran, which travels with each task
    sys.modules[module_name] = mod
    try:
        exec(compile(source, path, "exec"), mod.__dict__)  # noqa: S102
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return mod


def load_module(path: str | Path, *, prefix: str = "dtsim_experiment") -> ModuleType:
    """Import a Python file by path under a name derived from its content.

    Raises
    ------
    ConfigError
        When the file does not exist or fails to import.
    """
    p = Path(path)
    check(p.suffix == ".py" and p.exists() and not p.is_dir(), "experiment", "an existing .py file",
          str(path))
    # a regular file of at most MAX_SOURCE_BYTES: a FIFO or a device is refused unread
    data = read_input_bytes("experiment", p, limit=MAX_SOURCE_BYTES, rule="an existing .py file")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("experiment", f"a readable UTF-8 file ({exception_line(exc)})", str(path)) from None
    stem = "".join(c if c.isalnum() else "_" for c in p.stem)
    name = f"{prefix}_{stem}_{digest(source, 6)}"
    if name in sys.modules:
        return sys.modules[name]
    try:
        return exec_module(name, str(p.resolve()), source)
    except ConfigError:
        raise
    except SystemExit as exc:
        raise ConfigError("experiment", f"importable without exiting (it called sys.exit"
                          f"({exc.code!r}) at import; guard it with "
                          "if __name__ == '__main__')", str(path)) from None
    except Exception as exc:
        raise ConfigError("experiment", f"importable ({exception_line(exc)})", str(path)) from None


@dataclass(frozen=True)
class Experiment:
    """An experiment file, loaded (see the module docstring for what it defines)."""

    name: str
    path: Path
    base: Any
    factors: Mapping[str, Sequence[Any]] | None
    points: Sequence[Mapping[str, Any]] | None
    replications: int
    model: ExperimentModel
    seed: int = 0
    batch: int = 1
    quick: bool = False
    analyse: Callable[[SweepResult, Path], None] | None = None
    module: ModuleType | None = field(default=None, repr=False, compare=False)
    #: ``RATES`` of the file: metrics that are probabilities, with their trials.
    rates: Mapping[str, Any] = field(default_factory=dict)
    #: ``NONNEGATIVE`` of the file: metrics that cannot be negative, or "*".
    nonnegative: tuple[str, ...] | str = ()
    #: ``FIXED`` of the file: metrics the model computes from the config alone, with the reason
    #: (a dict for every point, or a function of a point's config giving the point's).
    fixed: Mapping[str, str] | Callable[[Any], Mapping[str, str]] = field(default_factory=dict)

    def point_list(self) -> list[dict[str, Any]]:
        """The points, expanded."""
        return expand_points(self.factors, self.points)

    @property
    def title(self) -> str:
        """``TITLE`` of the file, else its name."""
        return str(getattr(self.module, "TITLE", None) or self.name)

    def claims(self, result: SweepResult) -> list[dict[str, Any]]:
        """The study's claim rows from its results (``claims(results)`` of the file)."""
        fn = getattr(self.module, "claims", None)
        check(callable(fn), "experiment", "a study file defining claims(results)", str(self.path))
        return fn(result)


_QUICK_KEYS = ("BASE", "FACTORS", "POINTS", "REPLICATIONS", "BATCH", "SEED")


def load_experiment(path: str | Path, *, quick: bool = False) -> Experiment:
    """Load and check an experiment file.

    Parameters
    ----------
    path : path
        ``experiments/NAME.py``.
    quick : bool
        Apply the file's ``QUICK`` overrides.

    Returns
    -------
    Experiment

    Raises
    ------
    ConfigError
        When the file is missing, fails to import or lacks the definitions.
    """
    mod = load_module(path)
    need = ["NAME", "BASE", "REPLICATIONS", "model"]
    missing = [n for n in need if not hasattr(mod, n)]
    if not (hasattr(mod, "FACTORS") or hasattr(mod, "POINTS")):
        missing.append("FACTORS or POINTS")
    check(not missing, "experiment", "a file defining " + ", ".join(missing), str(path))
    check(callable(mod.model), "experiment", "a file defining model(config, streams)", str(path))
    check(not (hasattr(mod, "FACTORS") and hasattr(mod, "POINTS")), "experiment",
          "a file defining FACTORS or POINTS, not both", str(path))
    settings = {
        "BASE": mod.BASE,
        "FACTORS": getattr(mod, "FACTORS", None),
        "POINTS": getattr(mod, "POINTS", None),
        "REPLICATIONS": mod.REPLICATIONS,
        "BATCH": getattr(mod, "BATCH", 1),
        "SEED": getattr(mod, "SEED", 0),
    }
    if quick:
        q = getattr(mod, "QUICK", {}) or {}
        check(isinstance(q, Mapping), "QUICK", "a dict of overrides", q)
        for k, v in q.items():
            check(k in _QUICK_KEYS, "QUICK", "keyed by " + ", ".join(_QUICK_KEYS), k)
            if k == "BASE" and isinstance(v, Mapping):
                # field overrides of either kind of BASE: a dict BASE keeps its other keys
                # (it was replaced whole, so a key only BASE gave went missing in --quick)
                v = ({**settings["BASE"], **v} if isinstance(settings["BASE"], Mapping)
                     else replace(settings["BASE"], **v))
            if k == "FACTORS":
                settings["POINTS"] = None
            if k == "POINTS":
                settings["FACTORS"] = None
            settings[k] = v
    base = settings["BASE"]
    check((is_dataclass(base) and not isinstance(base, type)) or isinstance(base, Mapping),
          "BASE", "a config: a dataclass instance or a dict of values", base)
    if isinstance(base, Mapping):  # a dataclass checks its own fields; a dict cannot
        for k, v in base.items():
            check(not (isinstance(v, float) and math.isnan(v)), "BASE",
                  f"a dict of values without NaN (BASE[{k!r}] is NaN)", dict(base))
        varied = settings["FACTORS"] or {}
        for k, vs in (varied.items() if isinstance(varied, Mapping) else ()):
            for v in (vs if isinstance(vs, Sequence) and not isinstance(vs, str) else ()):
                check(not (isinstance(v, float) and math.isnan(v)), f"factors[{k!r}]",
                      "values without NaN", list(vs))
    name = mod.NAME
    check(isinstance(name, str) and name.strip() != "", "NAME", "a non-empty string", name)
    check(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*", name) is not None and ".." not in name,
          "NAME", "a plain name of letters, digits and _ . + - (no / or .., so that "
          "out/NAME stays inside out/)", name)
    analyse = getattr(mod, "analyse", None)
    check(analyse is None or callable(analyse), "analyse",
          "a function analyse(results, out_dir), or not defined", analyse)
    # the file asked for, not the cached module's (load_module shares one module between files
    # of the same content, whose __file__ is the first one's): the manifest names this file
    p = Path(path).resolve()
    return Experiment(
        name=name, path=p, base=settings["BASE"], factors=settings["FACTORS"],
        points=settings["POINTS"],
        replications=check_int("REPLICATIONS", settings["REPLICATIONS"], low=1),
        model=ExperimentModel(mod.__name__, str(p), getattr(mod, "__dtsim_source__", ""), "model"),
        seed=settings["SEED"], batch=check_int("BATCH", settings["BATCH"], low=1),
        quick=quick, analyse=analyse, module=mod,
        rates=check_rates(getattr(mod, "RATES", None), "RATES"),
        nonnegative=check_nonnegative_metrics(getattr(mod, "NONNEGATIVE", None), "NONNEGATIVE"),
        fixed=fixed_declaration(getattr(mod, "FIXED", None), "FIXED"),
    )


def default_out(exp: Experiment) -> Path:
    """``out/NAME`` (``out/NAME_quick`` for quick runs), relative to the working directory."""
    return Path("out") / (exp.name + ("_quick" if exp.quick else ""))


def run_experiment(
    exp: Experiment | str | Path,
    *,
    quick: bool = False,
    out: str | Path | None = None,
    seed: int | None = None,
    executor: str | Executor | None = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    fail_fast: bool = False,
    progress: bool | None = None,
    batch: int | None = None,
    analyse: bool = True,
    prune: bool = False,
) -> SweepResult:
    """Run an experiment into its results folder, resuming, then analyse it.

    Parameters
    ----------
    exp : Experiment or path
        The experiment (a path is loaded with ``quick``).
    quick, out, seed, executor, workers, scheduler, fail_fast, progress, batch, prune
        As for :func:`~sim.runner.sweep`; ``seed`` and ``batch`` default to the file's.
    analyse : bool
        Call the experiment's ``analyse(results, out)`` afterwards.

    Returns
    -------
    SweepResult
    """
    if not isinstance(exp, Experiment):
        exp = load_experiment(exp, quick=quick)
    out_dir = Path(out) if out is not None else default_out(exp)
    check_results_folder(exp, out_dir)
    version = code_version(exp.path)
    code = canonical(version)
    try:
        result = _sweep_experiment(exp, out_dir, version, code, seed=seed, executor=executor,
                                   workers=workers, scheduler=scheduler, fail_fast=fail_fast,
                                   progress=progress, batch=batch, prune=prune)
    except ConfigError as exc:  # name the experiment file's own setting
        if exc.name in ("rates", "nonnegative"):
            raise ConfigError(exc.name.upper(), exc.rule, exc.value) from None
        raise
    if analyse and exp.analyse is not None and not result.interrupted:
        run_analyse(exp, result, out_dir)
    return result


def check_results_folder(exp: Experiment, out_dir: Path) -> None:
    """Refuse, before any task runs, a results folder of another experiment (its manifest names
    another ``NAME``, as :meth:`Store.open <sim.runner.store.Store.open>` refuses it), or one
    that another experiment file of the same ``NAME`` wrote (its manifest's ``file``, a file that still exists and is not ``exp``'s):
    two experiments that share a name share ``out/NAME`` by default, and the second would keep
    its records beside the first's. A folder whose file is gone (moved or renamed) resumes, as
    does one the same file wrote after an edit (its records are reused by config hash only).

    Raises
    ------
    ConfigError
        ``'out' must be a folder of experiment 'NAME', not of 'OTHER': <folder>`` or
        ``'out' must be a folder no other experiment file wrote ...: <folder>``.
    """
    import os

    from .store import _manifest_or_damage

    if not out_dir.is_dir():
        return
    manifest, _ = _manifest_or_damage(out_dir)
    if manifest is None:
        return  # none, or a damaged one: Store.open says what it does with the folder
    if manifest.get("experiment") != exp.name:
        raise ConfigError("out", f"a folder of experiment {exp.name!r}, not of "
                          f"{manifest.get('experiment')!r}", str(out_dir))
    other = manifest.get("file")
    if not isinstance(other, str) or not other:
        return
    try:
        same = os.path.samefile(other, exp.path)
    except (OSError, ValueError):
        return  # the file that wrote it is gone: the same experiment, moved
    if not same:
        raise ConfigError("out", f"a folder no other experiment file wrote (it holds the runs of "
                          f"{other}, also NAME {exp.name!r}; give --out another folder)",
                          str(out_dir))


def _sweep_experiment(exp: Experiment, out_dir: Path, version: dict[str, Any], code: str, *,
                      seed, executor, workers, scheduler, fail_fast, progress, batch,
                      prune) -> SweepResult:
    return sweep(
        exp.model, exp.base, factors=exp.factors, points=exp.points,
        replications=exp.replications, seed=exp.seed if seed is None else seed,
        executor=executor, workers=workers, scheduler=scheduler, out=out_dir,
        name=exp.name, code=code, fail_fast=fail_fast, progress=progress,
        batch=exp.batch if batch is None else batch, prune=prune, rates=exp.rates,
        nonnegative=exp.nonnegative, fixed=exp.fixed,
        info={"file": str(exp.path), "quick": exp.quick, "code_version": version,
              "rates": dict(exp.rates), "nonnegative": exp.nonnegative},
    )


def run_analyse(exp: Experiment, result: SweepResult, out_dir: str | Path) -> None:
    """Call the experiment's ``analyse(results, out_dir)``; what it raises becomes one line.

    Raises
    ------
    ConfigError
        As raised by ``analyse`` (bad input, one line).
    SimulationError
        ``analyse() of FILE raised <Type>: <message>`` (chained to the
        original exception) for anything else it raises, ``sys.exit``
        included: the results are stored before it runs.
    """
    if exp.analyse is None:
        return
    try:
        exp.analyse(result, Path(out_dir))
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else exception_line(exc)
        raise SimulationError(f"analyse() of {exp.path} raised {what}") from exc


def study_marker(path: str | Path) -> str | None:
    """The ``STUDY = "..."`` marker of a file (read from its syntax tree, not run), or None.

    Raises
    ------
    ConfigError
        ``'experiments'`` when the path is not a readable regular file.
    """
    # a .py file that is not a regular file (a FIFO, a device) is refused unread
    source = read_input_bytes("experiments", path, limit=MAX_SOURCE_BYTES,
                              rule="a folder of readable regular .py files")
    try:
        tree = ast.parse(source.decode("utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "STUDY"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


def find_studies(folder: str | Path) -> list[Path]:
    """The study files of a folder: ``*.py`` files setting ``STUDY``, in marker order."""
    found = []
    for f in sorted(Path(folder).glob("*.py")):
        mark = study_marker(f)
        if mark is not None:
            found.append((mark, f.name, f))
    return [f for _, _, f in sorted(found)]
