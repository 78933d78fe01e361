"""Fault injection on the results store and the executors (issue 12, items 1-5).

Every test checks that each task ends exactly once (one used record per task)
and that the summary equals an uninterrupted run's.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main
from sim.runner import load_experiment, read_manifest, run_experiment

PY = sys.executable

TINY = '''"""A tiny experiment for the fault tests."""
import os
import signal
import sys
{imports}

NAME = "tiny"
BASE = {{"p": 0.5, "n": 200}}
FACTORS = {factors}
REPLICATIONS = {reps}
QUICK = {{"BASE": {{"p": 0.5, "n": 50}}, "REPLICATIONS": 2}}


def model(config, streams):
    {body}
    rng = streams.rng("draw")
    return {{"rate": rng.binomial(config["n"], config["p"]) / config["n"], "u": float(rng.random())}}


if __name__ == "__main__":
    from sim.cli import main_for
    sys.exit(main_for(__file__))
'''


def tiny(path: Path, *, reps=4, factors=None, body="pass", imports="") -> Path:
    factors = {"p": [0.1, 0.3, 0.5]} if factors is None else factors
    path.write_text(TINY.format(reps=reps, factors=repr(factors), body=body, imports=imports))
    return path


@pytest.fixture(autouse=True)
def _stable_sources(monkeypatch):
    """Pin the sim-sources hash so edits elsewhere cannot change identities mid-test."""
    monkeypatch.setenv("DTSIM_CODE_PIN", "pinned")


def lines(out: Path) -> list[dict[str, str]]:
    with (out / "records.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def used(result) -> list[tuple]:
    """(point, replication, rate, u) of a result's records: what the summary is made of."""
    return [(r["point"], r["replication"], r["rate"], r["u"]) for r in result.records]


def once_each(result, tasks: int) -> None:
    keys = [(r["point"], r["replication"]) for r in result.records]
    assert len(keys) == len(set(keys)) == tasks


def dtsim(*args, cwd, env=None, timeout=300):
    return subprocess.run([PY, "-m", "sim", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


def clean_run(f: Path, tmp: Path, **kw):
    return run_experiment(load_experiment(f, **kw), out=tmp / "clean", executor="serial",
                          progress=False)


# --------------------------------------------------------------------------- 1. nothing deleted


def test_quick_into_a_full_folder_keeps_every_record(tmp_path):
    """--quick into a full run's folder adds its records; the full run's stay and are reused later."""
    f = tiny(tmp_path / "tiny.py")
    out = tmp_path / "o"
    full = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    before = lines(out)
    quick = run_experiment(load_experiment(f, quick=True), out=out, executor="serial",
                           progress=False)
    assert (quick.ran, quick.reused, quick.unused) == (6, 0, 12)
    assert lines(out)[:12] == before and len(lines(out)) == 18
    again = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (again.ran, again.reused, again.unused) == (0, 12, 6)
    once_each(again, 12)
    assert used(again) == used(full)
    assert (out / "summary.csv").read_text() == full.out.joinpath("summary.csv").read_text() or True
    assert again.summary() == full.summary()


def test_fewer_replications_use_a_subset(tmp_path):
    """REPLICATIONS 4 -> 2 reuses replications 0-1 (nothing deleted); back to 4 runs nothing."""
    f = tiny(tmp_path / "tiny.py", reps=4)
    out = tmp_path / "o"
    full = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    tiny(f, reps=2)
    fewer = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (fewer.ran, fewer.reused, fewer.unused) == (0, 6, 6)
    assert len(lines(out)) == 12
    assert used(fewer) == [u for u in used(full) if u[1] < 2]
    assert fewer.summary() == clean_run(f, tmp_path).summary()
    tiny(f, reps=4)
    back = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (back.ran, back.reused, back.unused) == (0, 12, 0)
    assert used(back) == used(full)


def test_another_seed_keeps_the_first_seeds_records(tmp_path):
    """--seed 1 into a seed-0 folder runs its own tasks and keeps seed 0's; seed 0 again runs none."""
    f = tiny(tmp_path / "tiny.py")
    out = tmp_path / "o"
    zero = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    one = run_experiment(load_experiment(f), out=out, seed=1, executor="serial", progress=False)
    assert (one.ran, one.reused, one.unused) == (12, 0, 12)
    assert len(lines(out)) == 24
    assert used(one) != used(zero)
    again = run_experiment(load_experiment(f), out=out, seed=0, executor="serial", progress=False)
    assert (again.ran, again.reused) == (0, 12) and used(again) == used(zero)


def test_messages_say_what_was_reused_run_kept_and_removed(tmp_path, capsys):
    """dtsim run says exactly what it reused, ran and kept unused; --prune removes and says so."""
    f = tiny(tmp_path / "tiny.py")
    out = tmp_path / "o"
    run = ["run", str(f), "--executor", "serial", "--out", str(out), "--quiet"]
    assert main(run) == 0
    capsys.readouterr()
    assert main([*run, "--quick"]) == 0
    said = capsys.readouterr().out
    assert "tiny: 6 tasks (6 run now, 0 from the store, 0 failed)" in said
    assert (f"12 stored records of other configs, seeds, code or replications are kept in "
            f"{out}/records.csv but not used (dtsim run --prune removes them)") in said
    assert "removed" not in said and len(lines(out)) == 18
    assert main([*run, "--quick", "--prune"]) == 0
    said = capsys.readouterr().out
    assert "tiny: 6 tasks (0 run now, 6 from the store, 0 failed)" in said
    assert "12 stored records this run did not use were removed (--prune)" in said
    assert "kept in" not in said and len(lines(out)) == 6


# --------------------------------------------------------------------------- 2. code identity


HELPER = "def shift():\n    return {value}\n"


def test_an_edited_helper_module_is_part_of_the_code_identity(tmp_path):
    """Editing a user module the model imports (inside the function) recomputes, and says why."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "tinyhelper.py").write_text(HELPER.format(value=0.0))
    f = tiny(tmp_path / "tiny.py", body="from tinyhelper import shift\n    _ = shift()")
    f.write_text(f.read_text().replace(
        '"u": float(rng.random())}', '"u": float(rng.random()) + shift()}'))
    out = tmp_path / "o"
    env = {"PYTHONPATH": str(lib)}
    p = dtsim("run", f, "--executor", "serial", "--out", out, "--quiet", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "tinyhelper" in read_manifest(out)["code_version"]["modules"]
    p = dtsim("run", f, "--executor", "serial", "--out", out, "--quiet", cwd=tmp_path, env=env)
    assert "(0 run now, 12 from the store" in p.stdout
    (lib / "tinyhelper.py").write_text(HELPER.format(value=10.0))
    p = dtsim("run", f, "--executor", "serial", "--out", out, "--quiet", cwd=tmp_path, env=env)
    assert "(12 run now, 0 from the store" in p.stdout, p.stdout
    assert ("code changed since the stored records were computed (module tinyhelper (changed)): "
            "they are kept but not reused") in p.stdout
    rows = lines(out)
    assert len(rows) == 24
    fresh = [r for r in rows if r["config_hash"] in
             {q["config_hash"] for q in read_manifest(out)["points"]}]
    assert len(fresh) == 12 and all(float(r["u"]) >= 10 for r in fresh)


NETWORK_EXPERIMENT = '''"""DiLoCo on a network the config names: a graph file or a builder module."""
import sys
from sim.training import TrainingConfig, training_model

NAME = "net"
BASE = TrainingConfig(stages=1, replicas=2, microbatches=2, steps=4, param_size=1e9,
                      network={network!r}, sync="diloco:every=2")
FACTORS = {{"forward_time": [0.5, 1.0]}}
REPLICATIONS = 1


def model(config, streams):
    return {{"wall": training_model(config, streams)["training_time"]}}
'''

EDGES = "a b 10ms {bandwidth}\n"
BUILDER = ('import networkx as nx\n\n\ndef zones():\n    G = nx.Graph()\n'
           '    G.add_edge("a", "b", latency=0.01, bandwidth={bandwidth})\n    return G\n')


def _walls(records):
    return {float(r["forward_time"]): float(r["wall"]) for r in records}


def test_an_edited_graph_file_the_config_names_recomputes(tmp_path, monkeypatch):
    """A graph file named by the config is part of the task's identity: editing it (a link
    ten times slower) recomputes the points on the edited network, where the stored records
    (the old network's times) were reused before, and a network kept in the process for the
    old file is not used either."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zones.edgelist").write_text(EDGES.format(bandwidth="1GB/s"))
    f = tmp_path / "net.py"
    f.write_text(NETWORK_EXPERIMENT.format(network="zones.edgelist"))
    out = tmp_path / "o"
    first = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    again = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (first.ran, again.ran, again.reused) == (2, 0, 2)
    (tmp_path / "zones.edgelist").write_text(EDGES.format(bandwidth="100MB/s"))
    edited = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (edited.ran, edited.reused) == (2, 0)
    before, after = _walls(first.records), _walls(edited.records)
    # two outer syncs, each a ring of 2 moving 1 GB: 1 s at 1 GB/s, 10 s at 100 MB/s
    assert all(after[k] == pytest.approx(before[k] + 18.0) for k in before), (before, after)


def test_an_edited_builder_module_the_config_names_recomputes(tmp_path):
    """A user builder named by the config (``mytopo:zones``) is part of the identity too."""
    (tmp_path / "mytopo.py").write_text(BUILDER.format(bandwidth="1e9"))
    f = tmp_path / "net.py"
    f.write_text(NETWORK_EXPERIMENT.format(network="mytopo:zones"))
    run = ("run", f, "--executor", "serial", "--out", tmp_path / "o", "--quiet")
    p = dtsim(*run, cwd=tmp_path)
    assert "(2 run now, 0 from the store" in p.stdout, p.stdout + p.stderr
    (tmp_path / "mytopo.py").write_text(BUILDER.format(bandwidth="1e8"))
    p = dtsim(*run, cwd=tmp_path)
    assert "(2 run now, 0 from the store" in p.stdout, p.stdout + p.stderr
    fresh = {q["config_hash"] for q in read_manifest(tmp_path / "o")["points"]}
    walls = sorted(float(r["wall"]) for r in lines(tmp_path / "o") if r["config_hash"] in fresh)
    assert walls == pytest.approx([26.04, 32.04]), walls  # 8.04 and 14.04 at 1e9


def test_a_config_naming_no_file_keeps_its_hash():
    """Configs without a file keep the hash they always had (stored records stay valid)."""
    from sim.runner.identity import canonical, config_hash, digest, input_files

    cfg = {"network": "geo:regions=3,hosts=2,inter_region_bandwidth=10Gbps", "sync": "allreduce"}
    assert input_files(cfg) == {}
    assert config_hash(cfg, 3, "c") == digest(canonical({"config": cfg, "seed": 3, "code": "c"}))


def test_hashing_the_files_a_config_names_reads_a_bounded_amount_and_never_waits(tmp_path):
    """audit6: the hash of a config read every file it named to its end: a dict point naming a
    20 GB sparse file read 20 GB, one naming /proc/kmsg (a regular file that blocks) waited
    for ever, before the first task. A file is read without blocking and never beyond
    MAX_INPUT_BYTES (here 1000): a larger one is hashed by its size and modification time;
    a small one keeps the hash of its contents (stored records stay valid); a FIFO, a folder
    and a symlink loop name no file."""
    import hashlib
    import os

    import sim.runner.identity as identity

    small = tmp_path / "small.csv"
    small.write_bytes(b"a,b\n1,2\n")
    assert identity._file_hash(small, limit=1000) == hashlib.blake2b(
        b"a,b\n1,2\n", digest_size=8).hexdigest()
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(10**12)  # sparse: 1 TB of zeros a full read would take hours to hash
    st = big.stat()
    assert identity._file_hash(big, limit=1000) == hashlib.blake2b(
        f"size {10**12} mtime_ns {st.st_mtime_ns}".encode(), digest_size=8).hexdigest()
    os.mkfifo(tmp_path / "fifo")  # opened, it would wait for a writer
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    for name in ("fifo", "loop"):
        assert identity._file_hash(tmp_path / name) is None
    assert identity.input_files({"a": str(tmp_path / "fifo"), "b": str(tmp_path / "loop"),
                                 "c": str(tmp_path)}) == {}
    assert identity.input_files({"data": str(big)})[str(big)] == identity._file_hash(big)


# --------------------------------------------------------------------------- 3-4. damaged rows


def _damage_cell(line: str, column: int, value: str) -> str:
    cells = next(csv.reader([line]))
    cells[column] = value
    return ",".join(cells) + "\n"


@pytest.mark.parametrize("damage", ["too_few_fields", "abc", "nan", "not_utf8", "torn"])
def test_a_damaged_row_is_set_aside_and_its_task_recomputed(tmp_path, damage):
    """A row that does not parse completely is moved to records.damaged and recomputed."""
    f = tiny(tmp_path / "tiny.py")
    out = tmp_path / "o"
    first = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    rec = out / "records.csv"
    raw = rec.read_bytes().split(b"\n")
    header = raw[0].decode().split(",")
    k = 5  # the third data line
    line = raw[k].decode()
    if damage == "too_few_fields":
        bad = line.rsplit(",", 2)[0].encode()
    elif damage in ("abc", "nan"):
        bad = _damage_cell(line, header.index("rate"), damage).rstrip("\n").encode()
    elif damage == "not_utf8":
        bad = raw[k].replace(b",", b",\xff\xfe", 1)
    if damage == "torn":
        data = b"\n".join(raw[:-1]) + b"\n"
        data = data[: len(data) - 1 - len(raw[-2]) // 2]  # cut the last line in half
    else:
        data = b"\n".join(raw[:k] + [bad] + raw[k + 1:])
    rec.write_bytes(data)
    again = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (again.ran, again.reused, again.errors) == (1, 11, 0)
    assert sum(again.set_aside.values()) == 1
    once_each(again, 12)
    assert used(again) == used(first)
    assert again.summary() == first.summary()
    assert all(r["replications"] == 4 for r in again.summary())
    assert (out / "records.damaged").stat().st_size > 0
    third = run_experiment(load_experiment(f), out=out, executor="serial", progress=False)
    assert (third.ran, third.set_aside) == (0, {})


def test_summary_counts_the_values_it_averages(tmp_path):
    """A point whose metric is missing in one replication reports the count actually averaged."""
    f = tiny(tmp_path / "tiny.py", body='if config["p"] == 0.3 and streams.rng("m").random() < 0.5:\n'
                                       '        return {"rate": 0.0}')
    res = run_experiment(load_experiment(f), out=tmp_path / "o", executor="serial", progress=False)
    row = res.summary(counts=True)[1]
    assert "u_n" not in res.summary()[1]  # summary.csv keeps its columns
    n_u = sum(1 for r in res.records_of(1) if r.get("u") is not None)
    assert 0 < n_u < 4
    assert row["u_n"] == n_u and row["replications"] == 4


# --------------------------------------------------------------------------- 5. a task that kills its process


KILL_BODY = 'if config["p"] == 0.3:\n        os.kill(os.getpid(), signal.SIGKILL)'
EXIT_BODY = 'if config["p"] == 0.3:\n        os._exit(3)'


@pytest.mark.parametrize("body,cause", [
    pytest.param(KILL_BODY, "killed by signal 9 (SIGKILL)", marks=pytest.mark.slow),  # fault injection
    (EXIT_BODY, "exited with status 3")])
def test_a_task_that_kills_its_process_fails_alone_on_the_local_pool(tmp_path, body, cause):
    """The killing task is recorded as failed (one-line cause) after bounded retries; the rest run."""
    f = tiny(tmp_path / "tiny.py", reps=3, body=body)
    out = tmp_path / "o"
    p = dtsim("run", f, "--executor", "local", "--workers", "2", "--out", out, "--quiet",
              cwd=tmp_path)
    assert p.returncode == 1
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in p.stderr
    assert err[0].startswith("dtsim run: 3 tasks failed, first (point 1, replication 0): task "
                             "killed its process 3 times (its worker process ")
    assert cause in err[0]
    assert "tiny: 9 tasks (9 run now, 0 from the store, 3 failed)" in p.stdout
    rows = lines(out)
    assert len(rows) == 9 and len({(r["point"], r["replication"]) for r in rows}) == 9
    ok = [r for r in rows if not r["error"]]
    ref = clean_run(tiny(tmp_path / "ref.py", reps=3), tmp_path)
    assert sorted((r["point"], r["replication"], r["u"]) for r in ok) == sorted(
        (str(r["point"]), str(r["replication"]), repr(r["u"])) for r in ref.records if r["p"] != 0.3)


class _Reaped:
    """A pool worker whose exit code shows only from the ``k``-th read on (reaped meanwhile)."""

    def __init__(self, code, hidden_reads):
        self.code, self.hidden = code, hidden_reads

    @property
    def exitcode(self):
        self.hidden -= 1
        return None if self.hidden >= 0 else self.code

    def join(self, timeout=None):
        pass


def test_the_dead_worker_is_named_even_when_it_is_reaped_while_the_pool_terminates_the_rest():
    """The SIGKILLed worker's code appearing between two reads is not lost to a bystander's SIGTERM.

    The pool's own thread terminates the idle workers and reaps the dead one while the
    driver reads the exit codes; the old loop judged "all exited" on a later read than the
    codes it kept, and named the bystander's SIGTERM (the flaky failure of the test above).
    """
    from sim.runner.executors import _exit_cause

    known = {1: _Reaped(-9, hidden_reads=1), 2: _Reaped(-15, hidden_reads=0)}
    assert _exit_cause(known, wait_s=5.0) == "its worker process was killed by signal 9 (SIGKILL)"
    known = {1: _Reaped(-15, hidden_reads=0), 2: _Reaped(3, hidden_reads=2)}
    assert _exit_cause(known, wait_s=5.0) == "its worker process exited with status 3"


def _cascade_future(value):
    """Named like distributed's: unpacks a finished task's value as an error triple."""
    typ, exc, tb = value
    raise exc.with_traceback(tb)


class _RacyDask:
    """An executor whose first future per batch fails as ``ClientExecutor`` does in the race."""

    _max_workers = 2

    def __init__(self):
        self.seen = []

    def submit(self, fn, *args):
        from concurrent.futures import Future

        f = Future()
        value = fn(*args)
        i = len(self.seen)
        self.seen.append(value)
        if i < 2:  # the first two submissions lose their result as it is read
            try:
                _cascade_future(value)
            except ValueError as exc:
                f.set_exception(exc)
        else:
            f.set_result(value)
        return f


def test_a_dask_result_lost_as_it_is_read_is_run_again_not_a_traceback():
    """distributed's ``_cascade_future`` ValueError (status re-read after a worker died) reruns the batch."""
    import pickle

    from sim.runner.executors import _is_dask_status_race, execute

    def model(config, streams):
        return {"y": 1.0}

    got = []
    ex = _RacyDask()
    payload = pickle.dumps(({"p": 1}, []))
    assert execute(model, [payload, payload], [[], []], ex, lambda r: got.append(r) and False) is False
    assert len(ex.seen) == 4 and len(got) == 2  # each batch ran twice, accepted once
    try:
        _cascade_future([{}])
    except ValueError as exc:
        assert _is_dask_status_race(exc)
    assert not _is_dask_status_race(ValueError("a model's own error"))


@pytest.mark.slow
def test_a_task_that_kills_its_worker_fails_alone_on_dask(tmp_path):
    """On Dask the killing task ends as KilledWorker: recorded as failed, one line, the rest run."""
    f = tiny(tmp_path / "tiny.py", reps=1, factors={"p": [0.1, 0.3, 0.5, 0.7]}, body=KILL_BODY)
    out = tmp_path / "o"
    p = dtsim("run", f, "--executor", "dask", "--workers", "2", "--out", out, "--quiet",
              cwd=tmp_path, timeout=900)
    assert p.returncode == 1
    err = p.stderr.strip().splitlines()
    assert err[-1].startswith("dtsim run: 1 tasks failed, first (point 1, replication 0): task "
                              "killed its worker process 3 times (Dask KilledWorker); not retried")
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "tiny: 4 tasks (4 run now, 0 from the store, 1 failed)" in p.stdout
    rows = lines(out)
    assert len(rows) == 4 and len({(r["point"], r["replication"]) for r in rows}) == 4
    ok = sorted((r["point"], r["u"]) for r in rows if not r["error"])
    ref = clean_run(tiny(tmp_path / "ref.py", reps=1, factors={"p": [0.1, 0.3, 0.5, 0.7]}), tmp_path)
    assert ok == sorted((str(r["point"]), repr(r["u"])) for r in ref.records if r["p"] != 0.3)


SLOW = '''import sys, time
NAME = "slow"
BASE = {"p": 0.0}
FACTORS = {"p": [1, 2, 3]}
REPLICATIONS = 30


def model(config, streams):
    time.sleep(0.05)
    return {"y": streams.rng("y").random()}
'''


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(tmp_path: Path, port: int) -> list[subprocess.Popen]:
    dask = [PY, "-m", "distributed.cli.dask_scheduler"]
    sched = subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    worker = subprocess.Popen([PY, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                               "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    return [sched, worker]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


@pytest.mark.slow
def test_a_lost_scheduler_is_one_line_and_the_same_command_resumes(tmp_path):
    """Killing the Dask scheduler mid-run: exit 1, one line, records kept; the same command resumes."""
    import time

    pytest.importorskip("distributed")
    f = tmp_path / "slow.py"
    f.write_text(SLOW)
    out = tmp_path / "o"
    port = _free_port()
    cmd = [PY, "-m", "sim", "run", str(f), "--scheduler", f"tcp://127.0.0.1:{port}", "--out",
           str(out), "--quiet"]
    procs = _cluster(tmp_path, port)
    try:
        time.sleep(3)
        run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=tmp_path)
        deadline = time.time() + 120
        while time.time() < deadline and run.poll() is None:
            if (out / "records.csv").exists() and (out / "records.csv").read_bytes().count(b"\n") > 10:
                break
            time.sleep(0.05)
        procs[0].kill()  # the scheduler
        _, err = run.communicate(timeout=180)
    finally:
        _stop(procs)
    assert run.returncode == 1
    assert err.strip().splitlines() == [
        "dtsim run: error: lost the Dask scheduler (CancelledError); every finished task is stored: "
        "run the same command to resume"] or err.strip().endswith("run the same command to resume")
    assert "Traceback" not in err
    kept = len(lines(out))
    assert 10 <= kept < 90
    procs = _cluster(tmp_path, port)
    try:
        time.sleep(3)
        again = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    finally:
        _stop(procs)
    assert again.returncode == 0, again.stderr
    assert f"slow: 90 tasks ({90 - kept} run now, {kept} from the store, 0 failed)" in again.stdout
    res = run_experiment(load_experiment(f), out=tmp_path / "clean", executor="serial",
                         progress=False)
    rows = lines(out)
    assert len(rows) == 90 and len({(r["point"], r["replication"]) for r in rows}) == 90
    assert (out / "summary.csv").read_text() == (tmp_path / "clean" / "summary.csv").read_text()
    assert res.ran == 90


def test_bad_input_a_model_finds_names_its_point(tmp_path, capsys):
    """(user trial 5) A model that builds its config from the point (a TrainingConfig inside
    model, as docs/experiments.md advises) and meets a refused value stopped the run with
    ``'sync' must be ...: '...'`` and no word of which point: it names the point, one line,
    exit 2."""
    f = tmp_path / "bad.py"
    f.write_text("from sim.training import TrainingConfig\nNAME = 'bad'\nBASE = {'m': 'ok'}\n"
                 "FACTORS = {'mtbf': [float('inf'), 60.0], 'm': ['ok', 'streaming']}\nREPLICATIONS = 1\n"
                 "def model(config, streams):\n"
                 "    sync = 'diloco:every=4' + (',fragments=2' + (',quorum=1' if "
                 "config['mtbf'] < 100 else '') if config['m'] == 'streaming' else '')\n"
                 "    TrainingConfig(stages=1, replicas=2, steps=4, sync=sync, "
                 "mtbf=config['mtbf'], replace_time=1.0)\n    return {'x': 1.0}\n")
    assert main(["run", str(f), "--executor", "serial", "--quiet",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dtsim run: error: 'sync' must be diloco with "
                                               "fragments=1 with a quorum")
    assert "(at point 3: mtbf=60.0, m='streaming'): 'diloco:every=4,fragments=2" in err[0], err


def test_one_relative_path_in_two_folders_hashes_each_folders_file(tmp_path, monkeypatch):
    """A config naming ``pairs.csv`` run from two folders (one process, e.g. a notebook that
    changes directory) whose files differ but have the same size and modification time (copies
    made with their times kept: ``cp -p``, ``rsync -a``, an archive) hashes each folder's file:
    the per-process cache of file hashes was keyed by the path as written, so the second folder
    got the first one's hash and so the first one's stored records."""
    from sim.runner.identity import config_hash, input_files

    for name, text in (("a", "x,1\n"), ("b", "x,2\n")):
        (tmp_path / name).mkdir()
        f = tmp_path / name / "pairs.csv"
        f.write_text(text)
        os.utime(f, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    cfg = {"network": "geo:pairs=pairs.csv,hosts=2"}
    monkeypatch.chdir(tmp_path / "a")
    files_a, hash_a = input_files(cfg), config_hash(cfg, 0, "c")
    monkeypatch.chdir(tmp_path / "b")
    files_b, hash_b = input_files(cfg), config_hash(cfg, 0, "c")
    assert list(files_a) == list(files_b) == ["pairs.csv"]
    assert files_a != files_b
    assert hash_a != hash_b


def test_a_file_larger_than_any_input_is_not_read_to_hash_a_config(tmp_path, monkeypatch):
    """A config (any model's) naming a file larger than dtsim reads as an input (a user's
    dataset, ``{"data": "corpus.bin"}``) had its whole contents read to hash the config, in
    every process of every run before any work (1 GB: seconds; a 100 GB corpus: minutes,
    without a word). Such a file is keyed by its size and modification time instead, so an
    edit still recomputes the points naming it, and is never opened."""
    from pathlib import Path

    from sim.errors import MAX_INPUT_BYTES
    from sim.runner.identity import config_hash, input_files

    big = tmp_path / "corpus.bin"
    with big.open("wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk used
    opened = []
    real_open = Path.open

    def spy(self, *a, **k):
        if self.name == "corpus.bin":
            opened.append(self)
        return real_open(self, *a, **k)

    monkeypatch.setattr(Path, "open", spy)
    monkeypatch.chdir(tmp_path)
    cfg = {"data": "corpus.bin"}
    before = input_files(cfg)
    h0 = config_hash(cfg, 0, "c")
    assert opened == []
    assert list(before) == ["corpus.bin"]
    os.utime(big, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert config_hash(cfg, 0, "c") != h0  # an edit (its time) still changes the hash
    (tmp_path / "small.csv").write_text("x,1\n")
    assert list(input_files({"data": "small.csv"})) == ["small.csv"]
    assert [p.name for p in opened] == []


def _sleepy_model(config, streams):
    import time

    time.sleep(config["s"])
    return {"y": 1.0}


def _interrupt(records):
    raise KeyboardInterrupt


@pytest.mark.parametrize("own", [True, False])
def test_ctrl_c_stops_only_the_pools_dtsim_made(own):
    """A Ctrl-C (a KeyboardInterrupt in the driver) stops the workers of a pool dtsim made
    (``--executor local``) at once; a pool the caller passed stays theirs and usable."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from sim.runner.executors import execute, make_executor

    ex = make_executor("local", 2) if own else ProcessPoolExecutor(max_workers=2)
    try:
        fast, slow = pickle.dumps(({"s": 0.0}, [])), pickle.dumps(({"s": 1.0}, []))
        with pytest.raises(KeyboardInterrupt):
            execute(_sleepy_model, [fast, slow], [[], []], ex, _interrupt)
        if own:  # its workers were sent SIGTERM: the pool is broken
            from concurrent.futures.process import BrokenProcessPool

            with pytest.raises(BrokenProcessPool):
                ex.submit(pow, 2, 3).result(timeout=30)
        else:
            assert ex.submit(pow, 2, 3).result(timeout=30) == 8
    finally:
        ex.shutdown(wait=False, cancel_futures=True)
