"""Tests of sim.store: the append-only CSV results store, its manifest and resume rules."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.errors import ConfigError
from sim.rng import Streams
from sim.runner import make_tasks, sweep
from sim.runner.store import Store, read_manifest, read_records


@dataclass(frozen=True)
class Cfg:
    p: float = 0.5


def model(config: Cfg, streams: Streams) -> dict:
    """Draws a float that must survive the CSV round trip bit for bit."""
    rng = streams.rng("x")
    return {"x": float(rng.random()) * config.p, "tiny": 1e-300 * rng.random(), "k": 3}


def flaky(config: Cfg, streams: Streams) -> dict:
    """Fails at p = 0.2 unless the marker file (named in the environment) exists."""
    if config.p == 0.2 and not Path(os.environ["DTSIM_TEST_MARKER"]).exists():
        raise RuntimeError("not yet")
    return {"x": config.p}


def run(out, fn=model, factors=None, reps=3, **kw):
    return sweep(fn, Cfg(), factors=factors or {"p": [0.2, 0.9]}, replications=reps, seed=4,
                 executor="serial", out=out, name="store-test", **kw)


def test_floats_round_trip_exactly(tmp_path):
    """Floats read back from records.csv are bit-identical to the model's values."""
    fresh = sweep(model, Cfg(), factors={"p": [0.2, 0.9]}, replications=3, seed=4,
                  executor="serial")
    stored = run(tmp_path / "o")
    back = read_records(tmp_path / "o")
    for a, b in zip(fresh.records, sorted(back, key=lambda r: (r["point"], r["replication"])),
                    strict=True):
        assert a["x"] == b["x"] and a["tiny"] == b["tiny"] and b["k"] == 3
    assert [r["x"] for r in stored.records] == [r["x"] for r in fresh.records]


def test_records_load_in_pandas(tmp_path):
    """records.csv and summary.csv load straight into pandas with the expected columns."""
    pd = pytest.importorskip("pandas")
    run(tmp_path / "o")
    df = pd.read_csv(tmp_path / "o" / "records.csv")
    assert list(df.columns[:5]) == ["point", "replication", "seed", "point_key", "config_hash"]
    assert {"p", "x", "tiny", "k", "wall_time", "error"} <= set(df.columns)
    assert len(df) == 6
    s = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert list(s["p"]) == [0.2, 0.9]
    assert {"x_mean", "x_se", "x_low", "x_high", "replications", "errors"} <= set(s.columns)
    assert s["x_mean"][0] == pytest.approx(df[df.p == 0.2].x.mean(), rel=1e-12)


def test_manifest_lists_points_and_hashes(tmp_path):
    """The manifest names the experiment and each point's parameters and config hash."""
    run(tmp_path / "o")
    m = read_manifest(tmp_path / "o")
    assert m["experiment"] == "store-test" and m["seed"] == 4 and m["replications"] == 3
    assert [p["params"] for p in m["points"]] == [{"p": 0.2}, {"p": 0.9}]
    assert len({p["config_hash"] for p in m["points"]}) == 2


def test_torn_last_line_is_dropped_and_recomputed(tmp_path):
    """A partial last line (a write cut by a crash) is discarded and that task re-run."""
    out = tmp_path / "o"
    first = run(out)
    f = out / "records.csv"
    text = f.read_text()
    lines = text.splitlines(keepends=True)
    f.write_text("".join(lines[:-1]) + lines[-1][:15])
    again = run(out)
    assert (again.ran, again.reused) == (1, 5)
    assert [r["x"] for r in again.records] == [r["x"] for r in first.records]
    assert f.read_text().count("\n") == 7


def test_failed_tasks_are_retried_on_rerun(tmp_path, monkeypatch):
    """Tasks whose stored record is an error run again; the failed attempts stay in the file, unused."""
    marker = tmp_path / "marker"
    monkeypatch.setenv("DTSIM_TEST_MARKER", str(marker))
    out = tmp_path / "o"
    a = run(out, fn=flaky)
    assert a.errors == 3
    marker.write_text("now")
    b = run(out, fn=flaky)
    assert (b.ran, b.reused, b.errors, b.retried) == (3, 3, 0, 3)
    rows = list(csv.DictReader((out / "records.csv").open()))
    assert len(rows) == 9 and sum(bool(r["error"]) for r in rows) == 3
    c = run(out, fn=flaky)
    assert (c.ran, c.reused, c.errors, c.retried, c.unused) == (0, 6, 0, 0, 3)
    assert [r["x"] for r in c.records] == [r["x"] for r in b.records]


def test_new_metric_columns_extend_the_header(tmp_path, monkeypatch):
    """A record with new columns (first success after errors) rewrites the header, keeping rows."""
    monkeypatch.setenv("DTSIM_TEST_MARKER", str(tmp_path / "never"))
    out = tmp_path / "o"
    res = run(out, fn=flaky, factors={"p": [0.2, 0.5]}, reps=2)
    with (out / "records.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and "x" in rows[0]
    assert [r["x"] for r in rows if not r["error"]] == ["0.5", "0.5"]
    assert res.errors == 2


def test_other_experiment_folder_is_refused(tmp_path):
    """Opening a folder of another experiment raises a one-line ConfigError."""
    run(tmp_path / "o")
    with pytest.raises(ConfigError) as e:
        Store.open(tmp_path / "o", name="other")
    assert str(e.value) == (
        f"'out' must be a folder of experiment 'other', not of 'store-test': '{tmp_path / 'o'}'")


def test_records_without_manifest_are_refused(tmp_path):
    """A folder with records.csv but no manifest is not silently adopted."""
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "records.csv").write_text("point\n")
    with pytest.raises(ConfigError) as e:
        Store.open(tmp_path / "o", name="x")
    assert str(e.value) == (
        f"'out' must be a folder with a manifest.json beside its records.csv: '{tmp_path / 'o'}'")


def test_a_file_is_not_a_folder(tmp_path):
    """--out naming a file is refused."""
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError) as e:
        Store.open(tmp_path / "f", name="x")
    assert str(e.value) == f"'out' must be a folder: '{tmp_path / 'f'}'"


def test_two_runs_cannot_share_a_folder(tmp_path):
    """While one run holds the folder, a second is refused."""
    s = Store.open(tmp_path / "o", name="x")
    try:
        with pytest.raises(ConfigError) as e:
            Store.open(tmp_path / "o", name="x")
        assert str(e.value) == f"'out' must be a folder no other run is using: '{tmp_path / 'o'}'"
    finally:
        s.close()
    Store.open(tmp_path / "o", name="x").close()


def test_reconcile_sets_aside_exact_copies_and_tampered_lines(tmp_path):
    """An exact copy of a line and a line whose cells changed go to records.damaged, verbatim."""
    out = tmp_path / "o"
    run(out)
    f = out / "records.csv"
    lines = f.read_text().splitlines(keepends=True)
    tampered = lines[1].replace(lines[1].split(",")[4], "ffffffffffffffff")
    f.write_text("".join(lines) + lines[1] + tampered)
    _, tasks = make_tasks(Cfg(), [{"p": 0.2}, {"p": 0.9}], replications=3, seed=4)
    with Store.open(out, name="store-test") as s:
        done = s.reconcile(tasks)
        assert (s.unused, s.repeated) == (0, 0)
        assert s.set_aside == {"checksum mismatch (a cell changed after it was written)": 1,
                               "an exact copy of an earlier line": 1}
    assert len(done) == 6 and f.read_text() == "".join(lines)
    damaged = (out / "records.damaged").read_text()
    assert tampered in damaged and damaged.count(lines[1]) == 1
    assert all(isinstance(r["x"], float) and isinstance(r["config_hash"], str) for r in done.values())


def test_an_exact_copy_is_not_reported_as_another_configs_record(tmp_path):
    """dtsim run says a copied line was set aside, not that a record of another config is kept."""
    out = tmp_path / "o"
    run(out)
    f = out / "records.csv"
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines) + lines[2])
    again = run(out)
    assert (again.ran, again.reused, again.unused, again.repeated) == (0, 6, 0, 0)
    assert again.set_aside == {"an exact copy of an earlier line": 1}


def test_a_second_record_of_a_task_is_counted_as_repeated(tmp_path):
    """Two different valid records of one task: the first is used, the second counted as repeated."""
    out = tmp_path / "o"
    first = run(out)
    f = out / "records.csv"
    lines = f.read_text().splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    row = dict(zip(header, next(csv.reader([lines[1]])), strict=True))
    row["x"] = repr(float(row["x"]) + 1.0)
    row["wall_time"] = "1.0"
    from sim.runner.store import row_checksum

    row["checksum"] = row_checksum(row)
    f.write_text("".join(lines) + ",".join(row[c] for c in header) + "\n")
    again = run(out)
    assert (again.ran, again.unused, again.repeated, again.set_aside) == (0, 0, 1, {})
    assert [r["x"] for r in again.records] == [r["x"] for r in first.records]


def test_a_renamed_header_cell_is_repaired_from_the_manifest(tmp_path):
    """A header cell renamed after writing: every record is kept and reused, the header restored."""
    out = tmp_path / "o"
    first = run(out)
    f = out / "records.csv"
    text = f.read_text()
    header, body = text.split("\n", 1)
    assert ",x," in header and read_manifest(out)["columns"] == header.split(",")
    f.write_text(header.replace(",x,", ",renamed,") + "\n" + body)
    again = run(out)
    assert (again.ran, again.reused) == (0, 6)
    assert [r["x"] for r in again.records] == [r["x"] for r in first.records]
    assert f.read_text() == text
    assert again.set_aside == {
        "the header line changed after it was written; restored from manifest.json": 1}
    assert ",renamed," in (out / "records.damaged").read_text()


def test_a_wrong_header_without_a_copy_is_not_kept(tmp_path):
    """With no copy to repair from, the lines are set aside and the wrong header is not kept."""
    out = tmp_path / "o"
    run(out)
    m = read_manifest(out)
    del m["columns"]
    (out / "manifest.json").write_text(json.dumps(m))
    f = out / "records.csv"
    header, body = f.read_text().split("\n", 1)
    f.write_text(header.replace(",x,", ",renamed,") + "\n" + body)
    again = run(out)
    assert (again.ran, again.reused) == (6, 0)
    assert f.read_text().split("\n", 1)[0] == header
    assert len(read_records(out)) == 6


@pytest.mark.parametrize("damage", [b"{not json", b"[1, 2]", b"\xff\xfe", b'{"seed": 3}'])
def test_a_damaged_manifest_is_set_aside_and_the_run_resumes(tmp_path, damage):
    """A damaged manifest.json does not block resuming: it is moved aside and the records reused."""
    out = tmp_path / "o"
    first = run(out)
    (out / "manifest.json").write_bytes(damage)
    again = run(out)
    assert (again.ran, again.reused) == (0, 6) and again.manifest_damaged
    assert [r["x"] for r in again.records] == [r["x"] for r in first.records]
    assert (out / "manifest.damaged").read_bytes() == damage
    assert read_manifest(out)["experiment"] == "store-test"


@pytest.mark.parametrize("part", ["records.csv", "manifest.json"])
def test_a_folder_in_place_of_a_store_file_is_refused_before_any_task(tmp_path, part):
    """records.csv or manifest.json being a folder is refused when the store opens, not at the end."""
    out = tmp_path / "o"
    (out / part).mkdir(parents=True)
    calls = []

    def counting(config, streams):
        calls.append(1)
        return {"x": 1.0}

    with pytest.raises(ConfigError) as e:
        run(out, fn=counting)
    assert str(e.value) == (f"'out' must be a results folder whose {part} is a regular file: "
                            f"'{out / part} (a folder)'")
    assert calls == []


@pytest.mark.slow  # fault injection: SIGINT to a running dtsim
def test_ctrl_c_leaves_a_consistent_store(tmp_path):
    """SIGINT mid-run exits 130 and leaves complete lines and a matching summary."""
    exp = tmp_path / "slow.py"
    exp.write_text(
        "import sys, time\nimport sim.runner\nNAME='slow'\nBASE={'p': 0}\n"
        "FACTORS={'p': [1, 2]}\nREPLICATIONS=200\n"
        "def model(config, streams):\n    time.sleep(0.05)\n    return {'y': streams.rng('y').random()}\n"
        "if __name__ == '__main__':\n    from sim.cli import main_for\n    sys.exit(main_for(__file__))\n")
    out = tmp_path / "o"
    # a child inherits an ignored SIGINT (a background job of a non-interactive shell, some
    # test runners' workers), and Python then never raises KeyboardInterrupt: restore it
    proc = subprocess.Popen([sys.executable, str(exp), "--executor", "serial", "--out", str(out),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline:
        if (out / "records.csv").exists() and (out / "records.csv").read_text().count("\n") >= 11:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().endswith("dtsim run: interrupted")
    text = (out / "records.csv").read_text()
    assert text.endswith("\n")
    n = text.count("\n") - 1
    assert 10 <= n < 400
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert sum(int(r["replications"]) for r in summary) == n
    assert all(not math.isnan(float(r["y_mean"])) for r in summary if int(r["replications"]) > 1)


@pytest.mark.slow  # fault injection: SIGINT to a running dtsim with a process pool
def test_ctrl_c_stops_a_pool_at_once(tmp_path):
    """Ctrl-C with --executor local used to wait for each worker to finish its task (and the
    one queued behind it), whose records the run no longer takes: a minute here, hours for long
    tasks. The workers are now stopped at once; the finished tasks stay stored."""
    exp = tmp_path / "long.py"
    exp.write_text(
        "import sys, time\nNAME='long'\nBASE={'p': 0}\nFACTORS={'p': [0, 1]}\nREPLICATIONS=3\n"
        "def model(config, streams):\n    time.sleep(0.05 if config['p'] == 0 else 60)\n"
        "    return {'y': streams.rng('y').random()}\n"
        "if __name__ == '__main__':\n    from sim.cli import main_for\n    sys.exit(main_for(__file__))\n")
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, str(exp), "--executor", "local", "--workers", "2",
                             "--out", str(out), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline:
        if (out / "records.csv").exists() and (out / "records.csv").read_text().count("\n") >= 4:
            break
        time.sleep(0.01)
    time.sleep(1.0)  # the 60 s tasks are running in both workers
    proc.send_signal(signal.SIGINT)  # the driver alone, as kill -INT or a job scheduler sends it
    t0 = time.time()
    _, err = proc.communicate(timeout=180)
    took = time.time() - t0
    assert proc.returncode == 130, err
    assert took < 20, f"Ctrl-C took {took:.1f} s"
    assert err.strip().endswith("dtsim run: interrupted")
    assert (out / "records.csv").read_text().count("\n") == 4  # header and the 3 fast tasks


def test_a_summary_that_is_not_a_runs_is_refused(tmp_path):
    """A folder holding someone's own summary.csv (no records.csv, no manifest) is refused before
    anything is written: a run used to overwrite that file without a word."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "summary.csv").write_text("node,accuracy\nlab-pc-01,0.91\n")
    (d / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError) as e:
        sweep(model, Cfg(), factors={"p": [0.5]}, replications=2, seed=0, executor="serial",
              out=d, name="store-test")
    assert str(e.value) == (
        f"'out' must be a folder whose summary.csv is a run's (this one has no records.csv and no "
        f"valid manifest.json, so a run would overwrite it): '{d}'")
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "summary.csv"]
    assert (d / "summary.csv").read_text() == "node,accuracy\nlab-pc-01,0.91\n"
    # a run's own folder whose records.csv is gone keeps its manifest: it opens and is filled
    run(tmp_path / "o")
    (tmp_path / "o" / "records.csv").unlink()
    assert (tmp_path / "o" / "summary.csv").exists()
    res = run(tmp_path / "o")
    assert len(res.records) > 0
