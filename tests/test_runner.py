"""Tests of sim.runner: replications, sweeps, executors, resume, experiment files, CLI."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import sim.runner as runner
from sim.cli import main
from sim.errors import ConfigError, check_probability
from sim.rng import Streams
from sim.runner import (
    expand_points,
    load_experiment,
    make_tasks,
    point_key,
    replicate,
    run_experiment,
    sweep,
    task_streams,
)

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

EXPERIMENT = '''"""A tiny experiment for the runner tests."""
import sys
import time
from dataclasses import dataclass

import sim.runner
from sim.errors import check_probability

NAME = "{name}"


@dataclass(frozen=True)
class Config:
    p: float = 0.5
    n: int = 1000
    sleep: float = 0.0
    fail_at: float = -1.0

    def __post_init__(self):
        check_probability("p", self.p)


BASE = Config(sleep={sleep})
FACTORS = {factors}
REPLICATIONS = {reps}
QUICK = {{"REPLICATIONS": 2}}


def model(config, streams):
    if config.sleep:
        time.sleep(config.sleep)
    if config.p == config.fail_at:
        raise RuntimeError(f"boom at p={{config.p}}")
    rng = streams.rng("draw")
    return {{"rate": rng.binomial(config.n, config.p) / config.n, "u": float(rng.random()){extra}}}


if __name__ == "__main__":
    from sim.cli import main_for
    sys.exit(main_for(__file__))
'''


def write_experiment(path: Path, *, name="tiny", factors=None, reps=4, sleep=0.0, extra="") -> Path:
    factors = {"p": [0.1, 0.3, 0.5]} if factors is None else factors
    path.write_text(EXPERIMENT.format(name=name, factors=repr(factors), reps=reps, sleep=sleep,
                                      extra=extra))
    return path


def comparable(records):
    """Records without the wall time (the only field allowed to differ; the line checksum covers it)."""
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in records]


def stored_rows(out: Path):
    with (out / "records.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return sorted(({k: v for k, v in r.items() if k not in ("wall_time", "checksum")} for r in rows),
                  key=lambda r: (int(r["point"]), int(r["replication"])))


@pytest.fixture(autouse=True)
def _stable_sources(monkeypatch):
    """Pin the sim-sources hash so concurrent edits elsewhere cannot invalidate stores mid-test."""
    monkeypatch.setenv("DTSIM_CODE_PIN", "pinned")  # inherited by subprocesses too


@dataclass(frozen=True)
class Cfg:
    p: float = 0.5
    n: int = 50


def binomial_model(config: Cfg, streams: Streams) -> dict:
    """Module-level model for the in-process sweep tests."""
    rng = streams.rng("draw")
    return {"rate": rng.binomial(config.n, config.p) / config.n}


# --------------------------------------------------------------------------- points and streams


def test_grid_is_cartesian_first_factor_slowest():
    """A grid expands to the cartesian product, first factor varying slowest."""
    pts = expand_points({"a": [1, 2], "b": ["x", "y", "z"]})
    assert pts == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
                   {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"}]
    assert expand_points({}) == [{}]
    assert expand_points(points=[{"a": 3}]) == [{"a": 3}]


def test_bad_factors_messages():
    """Bad factors name the field, the rule and the value."""
    with pytest.raises(ConfigError) as e:
        expand_points({"p": []})
    assert str(e.value) == "'factors['p']' must be a non-empty list of values: []"
    with pytest.raises(ConfigError) as e:
        make_tasks(Cfg(), [{"q": 1}], replications=2, seed=0)
    assert str(e.value) == "'factors' must be fields of Cfg: 'q'"
    with pytest.raises(ConfigError) as e:
        expand_points({"p": [1]}, [{"p": 1}])
    assert str(e.value) == "'points' must be given without factors (give one of them), not: 'both'"


def test_point_streams_depend_on_parameters_not_position():
    """A point's draws do not change when other points are added or reordered."""
    a = sweep(binomial_model, Cfg(), points=[{"p": 0.2}, {"p": 0.7}], replications=3, seed=5,
              executor="serial")
    b = sweep(binomial_model, Cfg(), points=[{"p": 0.9}, {"p": 0.7}, {"p": 0.1}], replications=3,
              seed=5, executor="serial")
    ra = [r["rate"] for r in a.records if r["p"] == 0.7]
    rb = [r["rate"] for r in b.records if r["p"] == 0.7]
    assert ra == rb
    s1 = task_streams(5, {"p": 0.7}, 0).rng("draw").random()
    s2 = task_streams(5, {"p": 0.2}, 0).rng("draw").random()
    assert s1 != s2 and point_key({"p": 0.7}) == point_key({"p": 0.7})


def test_empty_point_matches_replicate():
    """A sweep of the base config alone uses the streams of replicate()."""
    s = sweep(binomial_model, Cfg(), factors={}, replications=4, seed=11, executor="serial")
    r = replicate(binomial_model, Cfg(), replications=4, seed=11)
    assert [x["rate"] for x in s.records] == [x["rate"] for x in r]


def test_replicate_serial_equals_pool():
    """replicate() gives identical results serially and on a process pool."""
    a = replicate(binomial_model, Cfg(), replications=6, seed=3, executor="serial")
    b = replicate(binomial_model, Cfg(), replications=6, seed=3, executor="local", workers=2)
    assert comparable(a) == comparable(b)


def test_batching_does_not_change_results():
    """Running several replications per executor call gives the same records."""
    a = sweep(binomial_model, Cfg(), factors={"p": [0.2, 0.4]}, replications=5, seed=1,
              executor="serial")
    b = sweep(binomial_model, Cfg(), factors={"p": [0.2, 0.4]}, replications=5, seed=1,
              executor="local", workers=2, batch=3)
    assert comparable(a.records) == comparable(b.records)


def test_sweep_estimates_match_the_model():
    """Per-point estimates cover the binomial mean (a wrong stream or point mapping would not)."""
    res = sweep(binomial_model, Cfg(n=200), factors={"p": [0.1, 0.6]}, replications=40, seed=2,
                executor="serial")
    rows = res.summary()
    for row in rows:
        se = row["rate_se"]
        assert abs(row["rate_mean"] - row["p"]) < 4 * se
        assert se == pytest.approx((row["p"] * (1 - row["p"]) / 200 / 40) ** 0.5, rel=0.35)


def test_point_records_skip_failed_tasks_and_points():
    """point_records yields each point's parameters with its successful records only."""
    recs = [{"point": 0, "replication": 0, "error": None}, {"point": 0, "replication": 1, "error": "x"},
            {"point": 1, "replication": 0, "error": "boom"}, {"point": 2, "replication": 0}]
    res = runner.SweepResult(name="t", points=[{"p": 1}, {"p": 2}, {"p": 3}], factors=["p"],
                             records=recs)
    got = list(res.point_records())
    assert got == [({"p": 1}, [recs[0]]), ({"p": 3}, [recs[3]])]


# --------------------------------------------------------------------------- executors


@pytest.mark.parametrize("executors", [
    ("serial", "local"),
    # a 2-worker dask cluster starts in about 3 s; the default suite runs dask against an
    # existing in-process cluster (test_existing_scheduler_address)
    pytest.param(("serial", "local", "dask"), marks=pytest.mark.slow)])
def test_same_table_on_serial_local_and_dask(tmp_path, executors):
    """The same sweep gives identical result tables on serial, local and a 2-worker dask cluster."""
    exp = load_experiment(write_experiment(tmp_path / "tiny.py", reps=3))
    outs = {}
    for ex in executors:
        res = run_experiment(exp, out=tmp_path / ex, executor=ex, workers=2, progress=False)
        assert res.ran == 9 and res.errors == 0
        outs[ex] = res
    for ex in executors[1:]:
        assert comparable(outs["serial"].records) == comparable(outs[ex].records)
        assert stored_rows(tmp_path / "serial") == stored_rows(tmp_path / ex)
        assert (tmp_path / ex / "summary.csv").read_text() == (
            tmp_path / "serial" / "summary.csv").read_text()


def test_existing_scheduler_address(tmp_path, capsys):
    """dtsim run --scheduler ADDRESS uses an existing Dask cluster, with the serial run's results."""
    distributed = pytest.importorskip("distributed")
    f = write_experiment(tmp_path / "tiny.py", reps=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        rc = main(["run", str(f), "--scheduler", cluster.scheduler_address,
                   "--out", str(tmp_path / "d"), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    assert main(["run", str(f), "--executor", "serial", "--out", str(tmp_path / "s"),
                 "--quiet"]) == 0
    assert stored_rows(tmp_path / "d") == stored_rows(tmp_path / "s")


def test_unreachable_scheduler_is_a_clear_error_within_seconds(tmp_path, capsys):
    """An unreachable Dask scheduler gives one line and exit 2 within a few seconds."""
    f = write_experiment(tmp_path / "tiny.py")
    t0 = time.time()
    rc = main(["run", str(f), "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "o"),
               "--quiet"])
    assert rc == 2 and time.time() - t0 < 15
    assert capsys.readouterr().err == (
        "dtsim run: error: 'scheduler' must be a reachable Dask scheduler address: "
        "'tcp://127.0.0.1:9'\n")


def test_unknown_executor(tmp_path, capsys):
    """An unknown executor name is one line and exit 2."""
    f = write_experiment(tmp_path / "tiny.py")
    assert main(["run", str(f), "--executor", "gpu", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (
        "dtsim run: error: 'executor' must be one of serial, local, dask: 'gpu'\n")


# --------------------------------------------------------------------------- failures


def test_raising_task_is_recorded_and_the_rest_complete(tmp_path, capsys):
    """A task that raises is recorded with its error; the other tasks complete; exit 1."""
    f = tmp_path / "tiny.py"
    write_experiment(f, reps=3)
    f.write_text(f.read_text().replace("BASE = Config(sleep=0.0)", "BASE = Config(fail_at=0.3)"))
    out = tmp_path / "o"
    rc = main(["run", str(f), "--executor", "local", "--workers", "2", "--out", str(out), "--quiet"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "3 tasks failed" in err and "RuntimeError: boom at p=0.3" in err
    rows = stored_rows(out)
    assert len(rows) == 9
    bad = [r for r in rows if r["error"]]
    assert [r["p"] for r in bad] == ["0.3"] * 3 and all(r["rate"] == "" for r in bad)
    assert all(r["rate"] != "" for r in rows if not r["error"])
    assert "boom at p=0.3" in (out / "errors.log").read_text()
    summary = {r["p"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert summary["0.3"]["errors"] == "3" and summary["0.1"]["replications"] == "3"


def test_fail_fast_stops_at_first_error(tmp_path, capsys):
    """--fail-fast stops the sweep at the first failing task."""
    f = tmp_path / "tiny.py"
    write_experiment(f, reps=3)
    f.write_text(f.read_text().replace("BASE = Config(sleep=0.0)", "BASE = Config(fail_at=0.1)"))
    out = tmp_path / "o"
    rc = main(["run", str(f), "--executor", "serial", "--out", str(out), "--fail-fast", "--quiet"])
    assert rc == 1
    assert "--fail-fast" in capsys.readouterr().err
    assert len(stored_rows(out)) == 1


# --------------------------------------------------------------------------- resume


@pytest.mark.slow  # fault injection: a driver killed mid-run (the store's own resume tests run by default)
def test_sigkill_then_rerun_completes_each_task_exactly_once(tmp_path):
    """A run killed with SIGKILL resumes: every task once, same results as an uninterrupted run."""
    f = write_experiment(tmp_path / "tiny.py", reps=20, sleep=0.03)
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [PY, str(f), "--executor", "local", "--workers", "2", "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=tmp_path)
    records = out / "records.csv"
    deadline = time.time() + 60
    while time.time() < deadline:
        if records.exists() and records.read_text().count("\n") >= 15:
            break
        time.sleep(0.01)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    os.kill(proc.pid, signal.SIGKILL)  # the driver only: its pool workers must follow it
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.time() + 10
    while any(Path(f"/proc/{c}").exists() for c in children) and time.time() < deadline:
        time.sleep(0.05)
    alive = [c for c in children if Path(f"/proc/{c}").exists()]
    try:
        assert not alive, "pool workers outlived the killed driver"
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if alive else None
    done_before = len(stored_rows(out))
    assert 14 <= done_before < 60
    res = run_experiment(load_experiment(f), out=out, executor="local", workers=2, progress=False)
    assert res.reused == done_before and res.ran == 60 - done_before
    rows = stored_rows(out)
    keys = [(r["point"], r["replication"]) for r in rows]
    assert len(keys) == 60 and len(set(keys)) == 60
    clean = run_experiment(load_experiment(f), out=tmp_path / "clean", executor="serial",
                           progress=False)
    assert rows == stored_rows(tmp_path / "clean")
    assert comparable(res.records) == comparable(clean.records)


def test_rerun_reuses_everything(tmp_path):
    """Re-running a finished sweep recomputes nothing and returns the same records."""
    f = write_experiment(tmp_path / "tiny.py")
    a = run_experiment(load_experiment(f), out=tmp_path / "o", executor="serial", progress=False)
    b = run_experiment(load_experiment(f), out=tmp_path / "o", executor="serial", progress=False)
    assert (b.ran, b.reused) == (0, 12)
    assert a.records == b.records


def test_changing_a_factor_value_recomputes_only_that_point(tmp_path):
    """Editing one factor value recomputes that point only; the old point's records are kept, unused."""
    f = write_experiment(tmp_path / "tiny.py", factors={"p": [0.1, 0.3, 0.5]})
    out = tmp_path / "o"
    a = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    write_experiment(f, factors={"p": [0.1, 0.4, 0.5]})
    b = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (b.ran, b.reused, b.unused) == (4, 8, 4)
    keep = [r for r in a.records if r["p"] in (0.1, 0.5)]
    assert [r for r in b.records if r["p"] in (0.1, 0.5)] == keep  # wall times too: not re-run
    assert sorted({r["p"] for r in stored_rows(out)}) == ["0.1", "0.3", "0.4", "0.5"]
    assert [r["p"] for r in b.summary()] == [0.1, 0.4, 0.5]


def test_code_pin_and_sources_hash(monkeypatch):
    """The sources hash covers sim/ (not the CLI or plotting); DTSIM_CODE_PIN replaces it."""
    assert runner.code_version()["sim"] == "pinned"
    monkeypatch.delenv("DTSIM_CODE_PIN")
    real = runner.code_version()["sim"]
    assert len(real) == 16 and real == runner.sources_hash()


def test_experiment_code_hash_ignores_parameters():
    """Editing parameters, comments or analyse() keeps the code hash; editing the model does not."""
    src = write_experiment.__globals__["EXPERIMENT"].format(
        name="a", factors="{}", reps=2, sleep=0.0, extra="")
    h = runner.experiment_code_hash(src)
    assert runner.experiment_code_hash(src.replace("REPLICATIONS = 2", "REPLICATIONS = 9  # more")) == h
    assert runner.experiment_code_hash(src.replace('NAME = "a"', 'NAME = "b"')) == h
    assert runner.experiment_code_hash(src.replace("rng.random()", "rng.random() * 2")) != h


def test_changing_the_model_or_seed_recomputes_everything(tmp_path):
    """A changed model (code version) or seed invalidates every stored task."""
    f = write_experiment(tmp_path / "tiny.py")
    out = tmp_path / "o"
    run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    b = run_experiment(load_experiment(f), out=out, executor="serial", seed=9, progress=False)
    assert (b.ran, b.reused) == (12, 0)
    write_experiment(f, extra=', "v": 2')
    c = run_experiment(load_experiment(f), out=out, executor="serial", seed=9, progress=False)
    assert (c.ran, c.reused) == (12, 0) and all(r["v"] == 2 for r in c.records)


def test_more_replications_are_added_not_recomputed(tmp_path):
    """Raising REPLICATIONS runs only the new replications."""
    f = write_experiment(tmp_path / "tiny.py", reps=2)
    out = tmp_path / "o"
    run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    write_experiment(f, reps=5)
    b = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (b.ran, b.reused) == (9, 6)


def test_folder_of_another_experiment_is_refused(tmp_path, capsys):
    """An output folder holding another experiment's results: one line, exit 2."""
    out = tmp_path / "o"
    a = write_experiment(tmp_path / "a.py", name="alpha")
    b = write_experiment(tmp_path / "b.py", name="beta")
    assert main(["run", str(a), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", str(b), "--executor", "serial", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == (
        f"dtsim run: error: 'out' must be a folder of experiment 'beta', not of 'alpha': '{out}'\n")


# --------------------------------------------------------------------------- experiment files


def test_experiment_without_definitions(tmp_path, capsys):
    """An experiment file missing the expected definitions: one line naming them, exit 2."""
    f = tmp_path / "bad.py"
    f.write_text("NAME = 'bad'\nFACTORS = {}\n")
    assert main(["run", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"dtsim run: error: 'experiment' must be a file defining BASE, REPLICATIONS, model: '{f}'\n")
    assert main(["run", str(tmp_path / "missing.py")]) == 2
    assert "'experiment' must be an existing .py file" in capsys.readouterr().err


def test_bad_point_config_is_caught_before_running(tmp_path, capsys):
    """A point that is not a valid config fails at construction with the config's message,
    naming the point and its factor values (it said only ``'p' must be in [0, 1]: 1.5``)."""
    f = write_experiment(tmp_path / "tiny.py", factors={"p": [0.5, 1.5]})
    assert main(["run", str(f), "--executor", "serial", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (
        "dtsim run: error: 'p' must be in [0, 1] (at point 1: p=1.5): 1.5\n")
    assert not (tmp_path / "o").exists()


@dataclass(frozen=True)
class CheckedCfg:
    p: float = 0.5
    n: int = 50

    def __post_init__(self):
        check_probability("p", self.p)


def test_a_refused_point_of_a_grid_names_the_point():
    """(smallfix2) In a grid of many points the config's refusal, ``'p' must be in [0, 1]:
    1.5``, did not say which point (here the same value at two of them, with n telling them
    apart): it names the first point refused, with every factor value, in the one-line form."""
    params = expand_points({"n": [10, 20], "p": [0.5, 1.5]})
    with pytest.raises(ConfigError) as e:
        make_tasks(CheckedCfg(), params, replications=2, seed=0)
    assert str(e.value) == "'p' must be in [0, 1] (at point 1: n=10, p=1.5): 1.5"
    assert (e.value.name, e.value.value) == ("p", 1.5)
    with pytest.raises(ConfigError) as e:  # explicit points, with a run setting left out
        make_tasks(CheckedCfg(), [{"p": 0.2}, {"p": -1.0, "replications": 3}],
                   replications=2, seed=0)
    assert str(e.value) == "'p' must be in [0, 1] (at point 1: p=-1.0): -1.0"
    # a valid grid is unchanged: same configs as replace(), same tasks
    configs, tasks = make_tasks(CheckedCfg(), expand_points({"p": [0.2, 0.9]}), replications=2,
                                seed=0)
    assert configs == [CheckedCfg(p=0.2), CheckedCfg(p=0.9)] and len(tasks) == 4


def test_quick_overrides(tmp_path):
    """QUICK overrides the module settings and uses its own default folder."""
    f = write_experiment(tmp_path / "tiny.py")
    exp = load_experiment(f, quick=True)
    assert exp.replications == 2 and runner.default_out(exp) == Path("out/tiny_quick")


def test_example_experiment_runs_as_a_script_and_replots(tmp_path, capsys):
    """python experiments/example_sweep.py --quick works like dtsim run; dtsim plot redraws.

    The script runs serially here (the local pool has its own tests); the plot is drawn
    in this process, from the folder and the experiment file named on the command line."""
    out = tmp_path / "ex"
    p = subprocess.run([PY, str(ROOT / "experiments" / "example_sweep.py"), "--quick", "--executor",
                        "serial", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "example_sweep: 20 tasks (20 run now" in p.stdout
    png = out / "joint_outage.png"
    assert png.stat().st_size > 1000
    png.unlink()
    exp = ROOT / "experiments" / "example_sweep.py"
    capsys.readouterr()
    assert main(["plot", str(out), "--experiment", str(exp)]) == 0
    assert png.exists() and str(png) in capsys.readouterr().out


def test_plot_without_analyse_draws_default_figures(tmp_path, capsys):
    """dtsim plot on an experiment without analyse() draws one figure per metric."""
    f = write_experiment(tmp_path / "tiny.py")
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    assert main(["plot", str(out)]) == 0
    assert (out / "rate.png").exists() and (out / "u.png").exists()


def test_plot_default_figures_replace_only_dtsims_own(tmp_path, capsys):
    """smallfix8: dtsim plot OUTDIR wrote its figures over whatever file was at their names. Each
    is checked before any is drawn, as every other output: a user's file (or a link to one) is
    refused in one line naming OUTDIR and left as it was; a figure dtsim drew is replaced, and
    a link to one is written through (the link stays)."""
    f = write_experiment(tmp_path / "tiny.py")
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"a photo")
    for setup in (lambda p: p.write_bytes(b"a photo"), lambda p: p.symlink_to(photo)):
        png = out / "u.png"
        png.unlink(missing_ok=True)
        setup(png)
        capsys.readouterr()
        assert main(["plot", str(out)]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1, cap.err
        assert "'OUTDIR' must be a new file or a figure dtsim wrote" in cap.err
        assert png.read_bytes() == b"a photo" and not (out / "rate.png").exists()
    png.unlink()
    assert main(["plot", str(out)]) == 0 and main(["plot", str(out)]) == 0  # its own: again
    drawn = png.read_bytes()
    elsewhere = tmp_path / "kept" / "u.png"
    elsewhere.parent.mkdir()
    png.rename(elsewhere)
    png.symlink_to(elsewhere)
    assert main(["plot", str(out)]) == 0
    assert png.is_symlink() and elsewhere.stat().st_size == len(drawn)


def test_plot_draws_no_empty_figure_for_a_metric_never_measured(tmp_path, capsys):
    """(user trial 3) A metric NaN at every point (the training DES's ``cost`` unpriced,
    ``throughput_steady``) got an empty figure with axes from -0.05 to 0.05 from the default
    figures, while dtsim run's table says it was not measured; now it gets none, and a note."""
    f = write_experiment(tmp_path / "tiny.py", extra=', "cost": float("nan")')
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["plot", str(out)]) == 0
    err = capsys.readouterr().err
    assert (out / "rate.png").exists() and not (out / "cost.png").exists()
    assert ("dtsim plot: note: no figure for cost: not measured at any point (NaN in every "
            "record)") in err


def test_plot_skips_metrics_constant_over_the_sweep(tmp_path, capsys):
    """(user trial 15) dtsim plot drew a figure per metric, constants such as ``workers`` too
    (70 figures, 72 s): a metric the same at every point gets no figure but a note naming it
    and its value; ``--metric NAME`` still draws it (and only it)."""
    f = write_experiment(tmp_path / "tiny.py", extra=', "workers": 3.0')
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["plot", str(out)]) == 0
    err = capsys.readouterr().err
    assert (out / "rate.png").exists() and (out / "u.png").exists()
    assert not (out / "workers.png").exists()
    assert ("dtsim plot: note: no figure for the metrics the same at every point (--metric NAME "
            "draws one): workers=3") in err
    (out / "rate.png").unlink()
    assert main(["plot", str(out), "--metric", "workers"]) == 0
    assert (out / "workers.png").exists() and not (out / "rate.png").exists()
    assert main(["plot", str(out), "--metric", "nope"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "dtsim plot: error: 'metric' must be a metric measured in these results (rate, u, workers")


MARKING = '''"""Writes a marker file when imported: a results folder must never run it."""
from pathlib import Path

Path({marker!r}).write_text("the file named in manifest.json ran")
NAME = "tiny"
BASE = {{"p": 0.5}}
FACTORS = {{"p": [0.1]}}
REPLICATIONS = 1


def model(config, streams):
    return {{"y": 1.0}}


def analyse(results, out_dir):
    Path({marker!r}).write_text("its analyse ran")
'''


def test_plot_never_runs_the_file_a_manifest_names(tmp_path, capsys):
    """A manifest pointing at a file that would write a marker: dtsim plot draws from data, runs nothing."""
    f = write_experiment(tmp_path / "tiny.py")
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(MARKING.format(marker=str(marker)))
    m = json.loads((out / "manifest.json").read_text())
    m["file"] = str(evil)
    (out / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert main(["plot", str(out)]) == 0  # in this process: any import of evil.py would show
    assert not marker.exists()
    assert (out / "rate.png").exists() and "--experiment FILE" in capsys.readouterr().err
    # named on the command line, the file is the user's choice and runs
    assert main(["plot", str(out), "--experiment", str(evil)]) == 0
    assert marker.read_text() == "its analyse ran"


def test_plot_uses_the_rates_the_run_recorded(tmp_path):
    """Default figures use the RATES and NONNEGATIVE the run stored in the manifest (data)."""
    f = write_experiment(tmp_path / "tiny.py")
    f.write_text(f.read_text().replace("REPLICATIONS = 4", "REPLICATIONS = 4\nRATES = {'rate': None}"))
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["rates"] == {"rate": None} and m["nonnegative"] == []
    from sim.commands.plot import _declared, load_result

    manifest, result = load_result(out)
    _declared(manifest, result, out)
    assert result.rates == {"rate": None}
    stored = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["rate_kind"] for r in result.summary()] == [r["rate_kind"] for r in stored] \
        == ["two-sided"] * 3
    assert [repr(r["rate_high"]) for r in result.summary()] == [r["rate_high"] for r in stored]


@pytest.mark.parametrize("edit, why", [
    (lambda m: m.update(points="x"), "'points' must be a list"),
    (lambda m: m.update(replications="3"), "'replications' must be an integer >= 0"),
    (lambda m: m["points"][0].update(params=[1]), "points[0].params must be an object"),
    (lambda m: m["points"][0].update(config_hash=5), "points[0].config_hash must be a string"),
    (lambda m: m.update(experiment=None), "(manifest.json: no experiment name)"),
    (lambda m: m.update(rates=[1]), "'rates' must be a dict"),
])
def test_plot_refuses_a_manifest_of_the_wrong_shape(tmp_path, capsys, edit, why):
    """A manifest with a wrong type is one line naming OUTDIR and what is wrong, exit 2."""
    f = write_experiment(tmp_path / "tiny.py")
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    edit(m)
    (out / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert main(["plot", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'OUTDIR' must be a results folder with a valid manifest.json" in err[0]
    assert why in err[0]


def test_plot_with_an_analyse_that_raises_is_one_line(tmp_path, capsys):
    """An experiment's analyse() that raises: dtsim plot --experiment exits 1 with one line."""
    f = write_experiment(tmp_path / "tiny.py", extra="")
    f.write_text(f.read_text() + "\n\ndef analyse(results, out_dir):\n    raise KeyError('nope')\n")
    out = tmp_path / "o"
    assert main(["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]) == 1
    capsys.readouterr()
    assert main(["plot", str(out), "--experiment", str(f)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dtsim plot: error: analyse() of {f} raised KeyError: 'nope'"]


DYING = '''"""A worker dies (os._exit) the first time it runs a task of point p=0.3."""
import os
from pathlib import Path

NAME = "dying"
BASE = {{"p": 0.0}}
FACTORS = {{"p": [0.1, 0.3, 0.5]}}
REPLICATIONS = 3
MARKER = Path({marker!r})


def model(config, streams):
    if config["p"] == 0.3 and not MARKER.exists():
        MARKER.write_text("died once")
        os._exit(1)
    return {{"x": streams.rng("x").random()}}
'''


@pytest.mark.parametrize("executor", ["local", pytest.param("dask", marks=pytest.mark.slow)])
def test_dead_worker_tasks_are_retried(tmp_path, executor):
    """A worker process that dies mid-task has its tasks rerun; the sweep completes unchanged."""
    f = tmp_path / "dying.py"
    marker = tmp_path / "marker"
    f.write_text(DYING.format(marker=str(marker)))
    exp = load_experiment(f)
    res = run_experiment(exp, out=tmp_path / "o", executor=executor, workers=2, progress=False)
    assert marker.exists()  # a worker did die
    assert res.ran == 9 and res.errors == 0
    ref = sweep(exp.model, exp.base, factors=exp.factors, replications=3, seed=0,
                executor="serial")  # marker present: nothing dies in-process
    assert [(r["p"], r["x"]) for r in res.records] == [(r["p"], r["x"]) for r in ref.records]


def test_quick_prints_what_it_overrides(tmp_path, capsys):
    """``dtsim run --quick`` says on stderr which settings QUICK replaces (FACTORS edits do nothing then)."""
    from sim.cli import main

    exp = tmp_path / "q.py"
    exp.write_text(
        "NAME = 'q'\nBASE = {'x': 0}\nFACTORS = {'x': [1, 2, 3]}\nREPLICATIONS = 4\n"
        "QUICK = {'FACTORS': {'x': [1]}, 'REPLICATIONS': 2}\n"
        "def model(config, streams):\n    return {'y': float(config['x'])}\n")
    assert main(["run", str(exp), "--quick", "--out", str(tmp_path / "o"), "--executor", "serial"]) == 0
    err = capsys.readouterr().err
    assert "--quick overrides: FACTORS={'x': [1]} (the file's FACTORS or POINTS are not used), " \
           "REPLICATIONS=2" in err


DILOCO_SWEEP = '''
from sim.training import TrainingConfig, training_model

NAME = "diloco_sweep"
BASE = TrainingConfig(stages=1, replicas=(3,), microbatches=3, steps=6, param_size=10.0,
                      bandwidth=5.0, sync="diloco:every=3")
FACTORS = {"bandwidth": [5.0, 50.0]}
REPLICATIONS = 2
SEED = 0


def model(config, streams):
    return training_model(config, streams)
'''


def test_a_sweep_table_leaves_out_a_metric_no_point_measured(tmp_path, capsys):
    """A DiLoCo sweep: ``throughput_steady`` (the saturated async pipeline's rate) is NaN in
    every record; its column printed ``nan [nan, nan]`` at every point. It is named on a line
    under the table instead (summary.csv keeps it); the other columns are as before."""
    from sim.cli import main

    exp = tmp_path / "diloco_sweep.py"
    exp.write_text(DILOCO_SWEEP)
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    head = next(line for line in text.splitlines() if line.startswith("bandwidth"))
    assert "throughput_steady" not in head and "throughput" in head.split()
    assert "nan [nan, nan]" not in text
    assert ("(throughput_steady: not measured at any point (NaN in every record), not shown)"
            in text)
    assert "throughput_steady_mean" in (out / "summary.csv").read_text().splitlines()[0]


def test_a_point_of_one_replication_prints_no_interval_not_nan(tmp_path, capsys):
    """(user trial 3) A point run once has no interval; dtsim run's table printed it as
    ``0.5 [nan, nan]`` (diloco_zones --quick: every cell), as if the run had failed; it now
    says ``(no interval)``, as dtsim train says ``(no interval, n = 1)``."""
    f = write_experiment(tmp_path / "tiny.py", reps=1)
    assert main(["run", str(f), "--executor", "serial", "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "[nan, nan]" not in text and "(no interval)" in text


DICT_TRAINING_SWEEP = '''
from sim.training import TrainingConfig, training_model

NAME = "dict_training"
BASE = {"mtbf": "inf"}
FACTORS = {"mtbf": ["inf", "20"]}
REPLICATIONS = 4
RATES = {"compute_utilisation": None}


def build(config):
    return TrainingConfig(stages=1, replicas=(2,), microbatches=4, steps=6, forward_time=1.0,
                          param_size=10.0, bandwidth=5.0, sync="diloco:every=2",
                          mtbf=float(config["mtbf"]), replace_time=3.0)


def model(config, streams):
    out = training_model(build(config), streams)
    return {"compute_utilisation": out["compute_utilisation"], "steps_per_hour": 3600.0 * 6 /
            out["training_time"]}
'''


def test_fixed_may_be_a_function_of_a_dict_points_config(tmp_path, capsys):
    """(user trial 5) A copy of an experiment whose points are dicts and whose model builds its
    TrainingConfig itself: at the failure-free point four identical utilisations of 0.8346 got
    the Wilson interval [0.199, 0.990] (the runner could not see what the config fixes; a
    dict ``FIXED`` would claim it at the failing point too). ``FIXED`` may be a function of a
    point's config: here the config's own ``fixed_metrics()``, so the failure-free point is
    exact (no interval) and the point with failures keeps its interval; a function that returns
    something else is refused in one line naming the point, before anything runs."""
    exp = tmp_path / "dict_training.py"
    exp.write_text(DICT_TRAINING_SWEEP + "\n\ndef FIXED(config):\n"
                   "    return build(config).fixed_metrics()\n")
    out = tmp_path / "o"
    assert main(["run", str(exp), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    capsys.readouterr()
    with open(out / "summary.csv") as fh:
        rows = {r["mtbf"]: r for r in csv.DictReader(fh)}
    exact, varied = rows["inf"], rows["20"]
    assert exact["compute_utilisation_kind"] == "exact"
    assert float(exact["compute_utilisation_low"]) == float(exact["compute_utilisation_high"]) \
        == float(exact["compute_utilisation_mean"])
    assert float(exact["steps_per_hour_low"]) == float(exact["steps_per_hour_high"])
    assert varied["compute_utilisation_kind"] != "exact"
    assert float(varied["compute_utilisation_low"]) < float(varied["compute_utilisation_high"])
    bad = tmp_path / "bad_fixed.py"
    bad.write_text(DICT_TRAINING_SWEEP + "\n\ndef FIXED(config):\n    return ['x']\n")
    assert main(["run", str(bad), "--out", str(tmp_path / "b"), "--executor", "serial",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'FIXED(config) of point 0' must be a dict of metric name" in err[0]
    assert not (tmp_path / "b").exists()


def test_a_config_fixed_builds_and_refuses_names_the_point(tmp_path, capsys):
    """(smallfix2) FIXED(config) builds the TrainingConfig of each point before anything runs;
    its refusal at one point (here mtbf -5 at point 1) passed as it was, naming no point. It
    names the point and its values, as the model's own refusal does, exit 2, nothing written."""
    exp = tmp_path / "bad_point.py"
    exp.write_text(DICT_TRAINING_SWEEP.replace('["inf", "20"]', '["inf", "-5"]')
                   + "\n\ndef FIXED(config):\n    return build(config).fixed_metrics()\n")
    assert main(["run", str(exp), "--out", str(tmp_path / "b"), "--executor", "serial",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dtsim run: error: 'mtbf' must be "), err
    assert err[0].endswith(" (at point 1: mtbf='-5'): -5.0"), err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("body, why", [
    ("    raise KeyError('nope')\n", "(it raised KeyError: 'nope')"),
    ("    import sys\n    sys.exit(3)\n", "(it called sys.exit(3))"),
    ("    return FIXED(config)\n", "(it raised RecursionError: maximum recursion depth exceeded)"),
])
def test_a_fixed_function_that_raises_or_exits_is_refused_in_one_line(tmp_path, capsys, body,
                                                                       why):
    """audit6: a FIXED function that raised ended 'dtsim run' in a traceback, one that called
    sys.exit(3) ended it with status 3 and nothing said. Either is one line naming the point,
    exit 2, before anything runs (nothing written)."""
    bad = tmp_path / "bad_fixed.py"
    bad.write_text(DICT_TRAINING_SWEEP + "\n\ndef FIXED(config):\n" + body)
    assert main(["run", str(bad), "--out", str(tmp_path / "b"), "--executor", "serial",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "dtsim run: error: 'FIXED(config) of point 0' must be a function of a point's config "
        f"that returns a dict of metric name -> reason {why}: ")
    assert not (tmp_path / "b").exists()


def test_quick_base_overrides_a_dict_base_field_by_field(tmp_path):
    """A dict BASE with QUICK's BASE dict: the quick run keeps BASE's other keys. The QUICK
    dict used to replace the whole BASE (``dtsim run`` still said ``BASE.steps=...``, an
    override), so a point that relied on a key only BASE gave failed with a KeyError."""
    exp = tmp_path / "qd.py"
    exp.write_text(
        "NAME = 'qd'\nBASE = {'x': 1, 'steps': 10}\nPOINTS = [{'y': 2}]\nREPLICATIONS = 1\n"
        "QUICK = {'BASE': {'steps': 3}}\n"
        "def model(config, streams):\n    return {'z': float(config['x'] * config['steps'])}\n")
    loaded = load_experiment(exp, quick=True)
    assert loaded.base == {"x": 1, "steps": 3}
    res = run_experiment(loaded, out=tmp_path / "o", executor="serial", progress=False)
    assert res.errors == 0 and [r["z"] for r in res.records] == [3.0]


def test_a_numpy_float_metric_is_stored_as_a_number(tmp_path):
    """np.float64 is a float subclass: to_cell passed it through and the store wrote its
    numpy-2 repr, 'np.float64(0.25)', read back as text (the summary's mean was nan; found with
    the redundancy strategy's throughput in a user's sweep)."""
    import numpy as np

    from sim.results import to_cell

    assert type(to_cell(np.float64(0.25))) is float
    exp = write_experiment(tmp_path / "npf.py", name="npf", factors={"p": [0.5]}, reps=2,
                           extra=', "x": __import__("numpy").float64(0.25)')
    res = run_experiment(exp, out=tmp_path / "out", executor="serial", progress=False,
                         analyse=False)
    rows = stored_rows(tmp_path / "out")
    assert [r["x"] for r in rows] == ["0.25", "0.25"]
    assert res.summary()[0]["x_mean"] == 0.25
