"""Every experiment file: stable identities across processes, reruns that recompute nothing, and
the two studies as ordinary experiments (every executor, resume after SIGKILL)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.runner import load_experiment, run_experiment

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.py"))

@pytest.fixture(autouse=True)
def _stable_sources(monkeypatch):
    """Pin the sim-sources hash so edits elsewhere cannot change identities mid-test."""
    monkeypatch.setenv("DTSIM_CODE_PIN", "pinned")  # inherited by subprocesses too


HASH_ALL = r'''
import json, sys
from pathlib import Path
from sim.errors import ConfigError
from sim.runner import canonical, load_experiment, make_tasks
from sim.runner.identity import digest


def hashes(folder, modes):
    out = {}
    for f in sorted(Path(folder).glob("*.py")):
        for quick in [m == "quick" for m in modes]:
            try:
                exp = load_experiment(f, quick=quick)
                _, tasks = make_tasks(exp.base, exp.point_list(), replications=exp.replications,
                                      seed=exp.seed)
                out[f"{f.stem}:{quick}"] = [digest(canonical(exp.base))] + [t.config_hash
                                                                           for t in tasks]
            except ConfigError as exc:
                out[f"{f.stem}:{quick}"] = "refused: " + str(exc).split(":")[0]
    return out


if __name__ == "__main__":
    json.dump(hashes(sys.argv[1], sys.argv[2:]), sys.stdout)
'''


def _hashes_in_two_processes(mode: str) -> list[dict]:
    """Each experiment's hashes (its ``--quick`` or its full configs), here and in a new process.

    The new process runs under another hash seed than this one (``PYTHONHASHSEED``), so a
    hash that depended on the order of a set or a dict built from strings would differ.
    """
    ns: dict = {"__name__": "hash_all"}
    exec(HASH_ALL, ns)
    here = json.loads(json.dumps(ns["hashes"](ROOT / "experiments", [mode])))
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    proc = subprocess.run([sys.executable, "-c", HASH_ALL, str(ROOT / "experiments"), mode],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [here, json.loads(proc.stdout)]


@pytest.fixture(scope="module")
def quick_hashes():
    return _hashes_in_two_processes("quick")


@pytest.fixture(scope="module")
def full_hashes():
    return _hashes_in_two_processes("full")


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_base_and_every_point_hash_the_same_in_two_processes(path, quick_hashes):
    """BASE and every point's config hash (--quick) agree between two processes.

    The --quick configs are of the same types as the full ones (the full sweeps, whose loading
    fits traces and tabulates order statistics, are checked in the slow test below)."""
    a, b = quick_hashes
    key = f"{path.stem}:True"
    assert isinstance(a[key], list), a[key]
    assert a[key] == b[key]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_full_configs_hash_the_same_in_two_processes(path, full_hashes):
    """BASE and every point's config hash of the full sweep agree between two processes."""
    a, b = full_hashes
    key = f"{path.stem}:False"
    assert isinstance(a[key], list), a[key]
    assert a[key] == b[key]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_experiment_run_twice_recomputes_nothing(path, tmp_path, monkeypatch):
    """dtsim run --quick twice into one folder: the second run reuses every task and runs none."""
    monkeypatch.chdir(tmp_path)
    exp = load_experiment(path, quick=True)
    first = run_experiment(exp, out=tmp_path / "o", executor="serial", progress=False)
    again = run_experiment(load_experiment(path, quick=True), out=tmp_path / "o",
                           executor="serial", progress=False)
    assert first.errors == 0 and first.ran == len(first.records) > 0
    assert (again.ran, again.reused, again.unused, again.set_aside) == (0, first.ran, 0, {})
    assert (tmp_path / "o" / "summary.csv").read_text() == _summary_after(first)


def _summary_after(result) -> str:
    return (result.out / "summary.csv").read_text()


# --------------------------------------------------------------------------- the two studies

STUDIES = [ROOT / "experiments" / "replicate_or_skip.py", ROOT / "experiments" / "stubborn_gossip.py"]


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "records.csv").open(newline="") as fh:
        rows = [{k: v for k, v in r.items() if k not in ("wall_time", "checksum")}
                for r in csv.DictReader(fh)]
    return sorted(rows, key=lambda r: (int(r["point"]), int(r["replication"])))


def _same_rows(a: list[dict[str, str]], b: list[dict[str, str]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        diff = {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}
        assert not diff, (x["point"], x["replication"], diff)


def _claims(exp, result):
    return [(r["claim"], r["exact"], str(r["estimate"]), r["agrees"]) for r in exp.claims(result)]


@pytest.mark.slow
@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_study_is_an_ordinary_experiment_on_every_executor(path, tmp_path):
    """A study --quick: every claim agrees, identical on serial, local and Dask; a rerun reuses all."""
    exp = load_experiment(path, quick=True)
    outs, claims = {}, {}
    for ex in ("serial", "local", "dask"):
        res = run_experiment(exp, out=tmp_path / ex, seed=0, executor=ex, workers=2, progress=False)
        assert res.errors == 0 and res.ran == len(res.records)
        outs[ex], claims[ex] = res, _claims(exp, res)
    assert all(agrees for *_, agrees in claims["serial"]), claims["serial"]
    assert claims["serial"] == claims["local"] == claims["dask"]
    for ex in ("local", "dask"):
        _same_rows(_rows(tmp_path / "serial"), _rows(tmp_path / ex))
    again = run_experiment(exp, out=tmp_path / "serial", seed=0, executor="serial", progress=False)
    assert (again.ran, again.reused) == (0, outs["serial"].ran)
    assert _claims(exp, again) == claims["serial"]


@pytest.mark.slow
@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_study_resumes_after_sigkill(path, tmp_path):
    """``dtsim run STUDY --quick`` killed with SIGKILL mid-run resumes to the uninterrupted result."""
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "sim", "run", str(path), "--quick", "--seed", "0", "--out", str(out),
           "--executor", "local", "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, cwd=tmp_path)
    records = out / "records.csv"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if records.exists() and records.read_bytes().count(b"\n") >= 40:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = records.read_bytes().count(b"\n") - 1
    exp = load_experiment(path, quick=True)
    resumed = run_experiment(exp, out=out, seed=0, executor="local", workers=2, progress=False)
    clean = run_experiment(exp, out=tmp_path / "clean", seed=0, executor="serial", progress=False)
    assert resumed.reused == partial and resumed.reused + resumed.ran == clean.ran
    rows = _rows(out)
    assert len({(r["point"], r["replication"]) for r in rows}) == len(rows) == clean.ran
    _same_rows(rows, _rows(tmp_path / "clean"))
    assert _claims(exp, resumed) == _claims(exp, clean)
    assert (out / "summary.csv").read_text() == (tmp_path / "clean" / "summary.csv").read_text()


def test_every_experiments_rates_name_its_metrics_and_are_valid():
    """Each experiment's RATES (if any) is a valid declaration; its summary intervals stay in [0, 1]."""
    from sim.runner.experiments import load_experiment

    root = Path(__file__).resolve().parent.parent / "experiments"
    declared = {}
    for f in sorted(root.glob("*.py")):
        exp = load_experiment(f)
        declared[f.stem] = dict(exp.rates)
    assert declared["example_sweep"] == {m: None for m in (
        "worker_availability", "effective_availability", "domain_unavailability", "joint_outage")}
    assert declared["correlated_placement"].keys() == {f"drop_s{s}" for s in range(5)}


@pytest.mark.slow
def test_every_quick_summary_keeps_estimates_inside_intervals_and_rates_in_unit_interval(tmp_path):
    """Every experiment's --quick summary.csv: each estimate inside its interval, each declared rate's in [0, 1]."""
    import csv
    import math

    from sim.runner.experiments import load_experiment, run_experiment

    root = Path(__file__).resolve().parent.parent / "experiments"
    for f in sorted(root.glob("*.py")):
        exp = load_experiment(f, quick=True)
        res = run_experiment(exp, out=tmp_path / f.stem, executor="serial", analyse=False)
        rows = list(csv.DictReader((tmp_path / f.stem / "summary.csv").open()))
        for row in rows:
            for key in row:
                if not key.endswith("_mean"):
                    continue
                m = key[:-5]
                try:
                    v, lo, hi = (float(row[m + s]) for s in ("_mean", "_low", "_high"))
                except (KeyError, ValueError):
                    continue
                if math.isnan(lo) or math.isnan(v):
                    continue
                assert lo <= v <= hi, (f.stem, m, v, lo, hi)
                if m in res.rates:
                    assert 0.0 <= lo and hi <= 1.0, (f.stem, m, lo, hi)
                    assert row[m + "_kind"] in ("two-sided", "upper", "exact")
