"""Hardening (issue 24): files that are not files, runaway counts, silent exits and ignores."""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main
from sim.errors import MAX_INPUT_BYTES, ConfigError, read_csv_text, read_input_bytes


@pytest.fixture
def fifo(tmp_path):
    """A FIFO nobody writes to: opening it for reading would block forever."""
    p = tmp_path / "fifo.csv"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("path, what", [("/dev/zero", "a character device"),
                                        ("/dev/urandom", "a character device")])
def test_devices_are_refused_unread(path, what):
    """/dev/zero and /dev/urandom are refused from their stat, at once."""
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        read_input_bytes("trace", path)
    assert str(e.value) == f"'trace' must be a readable regular file: '{path} ({what})'"
    assert time.monotonic() - t0 < 1.0


def test_a_fifo_and_a_folder_are_refused_unread(fifo, tmp_path):
    """A FIFO (which would block) and a folder are refused in one line."""
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=r"\(a FIFO\)'$"):
        read_csv_text("speeds", fifo)
    with pytest.raises(ConfigError, match=r"\(a folder\)'$"):
        read_input_bytes("trace", tmp_path)
    assert time.monotonic() - t0 < 1.0


def test_the_size_limit_is_stated_and_bounds_what_is_read(tmp_path):
    """A file above the limit is refused naming both sizes; a regular file reads whole."""
    f = tmp_path / "t.csv"
    f.write_bytes(b"x" * 2048)
    with pytest.raises(ConfigError) as e:
        read_input_bytes("trace", f, limit=1024)
    assert "(2 KiB, more than the 1 KiB an input file may have)" in str(e.value)
    assert read_input_bytes("trace", f) == b"x" * 2048
    assert MAX_INPUT_BYTES == 256 * 2**20


@pytest.mark.parametrize("argv", [
    ["trace", "stats", "{fifo}"],
    ["failures", "--failure-trace", "{fifo}"],
    ["train", "--speeds", "{fifo}"],
    ["topologies", "{graph}"],
    ["run", "{py}"],
])
def test_every_reader_refuses_a_fifo_in_one_line(tmp_path, capsys, argv):
    """Traces, speeds, graph files and experiment files: a FIFO is exit 2, one line, no hang."""
    paths = {}
    for key, name in (("fifo", "t.csv"), ("graph", "g.graphml"), ("py", "e.py")):
        paths[key] = tmp_path / name
        os.mkfifo(paths[key])
    assert main([a.format(**paths) for a in argv]) == 2  # (a hang would time the suite out)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(a FIFO)" in err[0]


def _bamboo_text(rng: random.Random, n: int) -> str:
    t, c, out = 0, 30, []
    for _ in range(n):
        t += rng.choice([0, 1, 60, 3600])
        new = max(0, c + rng.choice([-2, -1, 1]))
        out += [f"{t},{c}", f"{t},{new}"]
        c = new
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("variant", ["plain", "crlf", "blank lines", "spaces", "bad line",
                                     "decreasing", "fraction"])
def test_fast_trace_readers_equal_the_line_readers(monkeypatch, variant):
    """The vectorised readers give the line-by-line readers' traces and errors, bit for bit."""
    from sim.traces import readers

    rng = random.Random(7)
    text = _bamboo_text(rng, 300)
    text = {"plain": text, "crlf": text.replace("\n", "\r\n"),
            "blank lines": "\n \n" + text.replace("\n", "\n\t\n", 9),
            "spaces": text.replace(",", " ,\t"),
            "bad line": text.replace("\n", "\nx,3\n", 1),
            "decreasing": text + "5,3\n",
            "fraction": text.replace("60,", "60.5,", 1)}[variant]

    def read():
        try:
            tr = readers.parse_trace_text(text, where="t.csv")
        except ConfigError as exc:
            return str(exc)
        return tr.times.tolist(), tr.counts.tolist(), tr.end

    fast = read()
    monkeypatch.setattr(readers, "_plain", lambda text: False)  # the line-by-line readers
    slow = read()
    assert fast == slow
    if variant in ("plain", "crlf", "blank lines", "spaces"):
        assert isinstance(fast, tuple) and len(fast[0]) > 100


def test_fast_dtsim_csv_reader_equals_the_row_reader(tmp_path, monkeypatch):
    """A dtsim CSV (states, extra columns, touching intervals) reads as the row-by-row reader."""
    import sim.failures as failures
    from sim.traces import load_trace

    rng = random.Random(3)
    rows = []
    for w in range(12):
        t = 0.0
        for _ in range(rng.randint(0, 9)):
            s = t + rng.choice([0.0, rng.expovariate(0.2)])
            e = s + rng.expovariate(1.0)
            rows.append(f"w{w},{rng.choice(['down', ' Down', ''])},{s!r},{e!r},x")
            t = e
    rng.shuffle(rows)
    f = tmp_path / "d.csv"
    f.write_text("worker,state,start,end,note\n" + "\n".join(rows) + "\nw99,up,0,5,y\n")

    def read():
        tr = load_trace(str(f))
        return (tr.times.tolist(), tr.counts.tolist(), tr.end, list(tr.nodes),
                failures.read_trace(f).intervals)

    fast = read()
    monkeypatch.setattr(failures, "_read_trace_fast", lambda text, path: None)
    assert read() == fast


def test_deeply_nested_skypilot_json_is_one_line(tmp_path):
    """[[[[...]]]] a hundred thousand deep is bad input, not a RecursionError."""
    from sim.traces import load_trace

    f = tmp_path / "t.json"
    f.write_text('{"metadata": {"gap_seconds": 60}, "data": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(ConfigError, match=r"nested too deeply"):
        load_trace(str(f))


def test_workers_beyond_the_cpus_are_refused_before_anything(tmp_path, capsys):
    """--workers above the CPUs: one line, no folder, no process (the fork bomb)."""
    from sim.runner.executors import check_workers, usable_cpus

    exp = Path(__file__).resolve().parents[1] / "experiments" / "example_sweep.py"
    out = tmp_path / "o"
    assert main(["run", str(exp), "--workers", "100000", "--out", str(out)]) == 2
    cpus = usable_cpus()
    assert capsys.readouterr().err == (
        f"dtsim run: error: 'workers' must be an integer in [1, {cpus}] (the CPUs this "
        f"machine has): 100000\n")
    assert not out.exists()
    assert check_workers("local", cpus) == cpus and check_workers("serial", 10**6) == 10**6
    with pytest.raises(ConfigError, match="'workers'"):
        check_workers("dask", cpus + 1)
    # refused before the experiment file is even read (it would import numpy, scipy, ...)
    marker = tmp_path / "imported"
    probe = tmp_path / "probe.py"
    probe.write_text(f"open({str(marker)!r}, 'w').close()\n")
    assert main(["run", str(probe), "--workers", "100000", "--out", str(out)]) == 2
    assert not marker.exists()


def test_a_model_that_exits_fails_its_task_alone():
    """sys.exit in a model is that replication's recorded failure, not the end of the run."""
    from sim.runner import replicate

    recs = replicate(_exits_at_one, {"p": 1}, replications=3, seed=0)
    assert [r["error"] for r in recs] == ["", "SystemExit: the model called sys.exit(3)", ""]


def _exits_at_one(config, streams):
    """Calls sys.exit in replication 1 (told apart by its first draw)."""
    if streams.rng("x").random() == _FIRST_DRAWS[1]:
        sys.exit(3)
    return {"y": 1.0}


_FIRST_DRAWS = [__import__("sim").Streams(0).replication(k).rng("x").random() for k in range(3)]


def test_a_model_that_exits_on_the_local_pool_fails_alone(tmp_path):
    """With the local pool the other tasks finish and records.csv is written."""
    from sim.runner import sweep

    res = sweep(_exits_at_one, {"p": 1}, factors={}, replications=3, seed=0,
                executor="local", workers=1, out=tmp_path / "o", name="exits")
    assert [bool(r["error"]) for r in res.records] == [False, True, False]
    assert (tmp_path / "o" / "records.csv").read_text().count("\n") == 4


def test_model_and_metrics_are_checked():
    """A model that is not callable, and a metric no record has, raise instead of NaN."""
    from sim.results import summarize
    from sim.runner import replicate

    with pytest.raises(ConfigError, match=r"^'model' must be a callable"):
        replicate(5, {"p": 1}, replications=2, seed=0)
    recs = replicate(_exits_at_one, {"p": 1}, replications=1, seed=0)
    with pytest.raises(ConfigError, match=r"^'metrics' must be names of metrics the records "
                                          r"carry \(y\): 'nope'$"):
        summarize(recs, ["nope"])


@pytest.mark.parametrize("argv, message", [
    (["trace", "plot", "aws-p3", "--out", ""], "'out' must be a non-empty value: ''"),
    (["failures", "--cluster-workers", "4", "--domains", "8"], "'domains' must be at most the 4"),
    (["failures", "--availability", "1", "--mean-downtime", "5"],
     "'mean_downtime' must be given only with --availability < 1"),
    (["failures", "--distribution", "weibull", "--shape", "1e-300"],
     "'shape' must be a Weibull shape k with Gamma(1 + 1/k) finite"),
    (["gossip", "--rounds", "3", "--burn-in", "10"], "'burn_in' must be less than rounds (3;"),
    (["gossip", "--adversary", "stubborn", "--adversary-value", "1e308"],
     "'adversary_value' must be at most 1e+150 in magnitude"),
    (["design", "--verify", "--microbatches", "1000000000000"],
     "'microbatches' must be at most 1e+09 in total"),
    (["bench", "--quick", "--parts", "simpy", "--out", "/dev/full"],
     "'out' must be a writable file: '/dev/full (a character device)'"),
    (["trace", "plot", "aws-p3", "--out", "x.bogus"], "'out' must be a figure file ending in"),
])
def test_silent_accepts_are_one_line_refusals(capsys, argv, message):
    """What ran before as if nothing were wrong is refused in one line, exit 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_lognormal_sigma_bound():
    """The lognormal sigma stops where exp(sigma^2 / 2) leaves the doubles."""
    from sim.failures import MAX_LOGNORMAL_SIGMA, LogNormal, check_shape

    assert math_isfinite(np.exp(MAX_LOGNORMAL_SIGMA**2 / 2 * (1 - 1e-12)))
    LogNormal(1.0, MAX_LOGNORMAL_SIGMA)
    with pytest.raises(ConfigError, match=r"^'sigma' must be a lognormal sigma"):
        LogNormal(1.0, MAX_LOGNORMAL_SIGMA * 1.01)
    assert check_shape("shape", "exponential", 1e-300) == 1e-300


def math_isfinite(x: float) -> bool:
    return bool(np.isfinite(x))


BUILDERS = '''
import sys
import networkx as nx
def boom(n=8):
    raise RuntimeError("the builder failed")
def leave(n=8):
    sys.exit(3)
def directed(n=8):
    return nx.DiGraph(nx.cycle_graph(n))
'''


@pytest.mark.parametrize("fn, message", [
    ("boom", "a builder that runs (RuntimeError: the builder failed)"),
    ("leave", "a builder that returns a graph without exiting (it called sys.exit(3))"),
    ("directed", "a builder returning an undirected simple graph (directed edges"),
])
def test_user_builders_that_fail_are_one_line(tmp_path, fn, message):
    """A builder that raises, exits or returns a directed graph: one ConfigError naming it."""
    import topologies

    f = tmp_path / "b.py"
    f.write_text(BUILDERS)
    with pytest.raises(ConfigError) as e:
        topologies.build(f"{f}:{fn}")
    assert e.value.name == "topology" and message in str(e.value)


@pytest.mark.parametrize("text, why", [
    ("0 1\n1 2\n2 0\n1 0\n", "line 4: the edge 1-0 again"),
    ("0 1\n1 2\n2 0\n2 2\n", "line 4: a self-loop 2-2"),
])
def test_edge_lists_with_repeated_edges_or_loops_are_refused(tmp_path, text, why):
    """An edge given twice or a self-loop is refused with its line, never dropped."""
    import topologies

    f = tmp_path / "g.edges"
    f.write_text(text)
    with pytest.raises(ConfigError, match=why):
        topologies.build(str(f))


@pytest.mark.parametrize("make, why", [
    (lambda nx: nx.DiGraph([(0, 1), (1, 2), (2, 0)]), "directed edges"),
    (lambda nx: nx.MultiGraph([(0, 1), (1, 2), (2, 0), (0, 1)]), "parallel edges between 0 and 1"),
    (lambda nx: nx.Graph([(0, 1), (1, 2), (2, 0), (1, 1)]), "a self-loop at node 1"),
])
def test_graphml_that_is_not_simple_is_refused(tmp_path, make, why):
    """Directed, parallel or self-loop edges in GraphML are refused (they were dropped)."""
    import networkx as nx

    import topologies

    f = tmp_path / "g.graphml"
    nx.write_graphml(make(nx), f)
    with pytest.raises(ConfigError, match=why):
        topologies.build(str(f))


def test_nodes_must_agree_with_a_graph_file(tmp_path):
    """--nodes 50 with a 20-node file is refused naming 'nodes' (it ran on 20)."""
    import networkx as nx

    import topologies

    f = tmp_path / "g.graphml"
    nx.write_graphml(nx.cycle_graph(20), f)
    with pytest.raises(ConfigError) as e:
        topologies.build(str(f), nodes=50)
    assert str(e.value) == f"'nodes' must be unset or equal to the 20 nodes of topology {f}: 50"
    assert topologies.build(str(f), nodes=20).number_of_nodes() == 20


def test_experiment_settings_that_were_ignored_are_refused(tmp_path, capsys):
    """BASE not a config, analyse not a function, RATES naming no metric: one line, exit 2."""
    head = ("import sys\nNAME = 'x'\nFACTORS = {'p': [0.1]}\nREPLICATIONS = 2\n"
            "def model(config, streams):\n    return {'y': config['p']}\n")
    cases = {
        "BASE = 5\n": "'BASE' must be a config: a dataclass instance or a dict of values: 5",
        "BASE = {'p': 0.5}\nanalyse = 3\n": "'analyse' must be a function analyse(results, "
                                            "out_dir), or not defined: 3",
        "BASE = {'p': float('nan')}\n": "'BASE' must be a dict of values without NaN",
        "BASE = {'p': 0.5}\nRATES = {'nope': None}\n": "'RATES' must be names of metrics the "
                                                        "model returns (y): 'nope'",
        "BASE = {'p': 0.5}\nBASE['me'] = BASE\n": "'base' must be a config of values without "
                                                  "cycles",
    }
    for i, (tail, message) in enumerate(cases.items()):
        f = tmp_path / f"e{i}.py"
        f.write_text(head + tail)
        assert main(["run", str(f), "--executor", "serial", "--quiet",
                     "--out", str(tmp_path / f"o{i}")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (tail, err)


@pytest.mark.parametrize("cls, kw, tame, name", [
    ("training", {"latency": 1e308}, {"latency": 1e280}, "latency"),
    ("training", {"stages": 4, "latency": (1.0, 1e308, 1.0)},
     {"stages": 4, "latency": (1.0, 1e280, 1.0)}, "latency"),
    ("training", {"forward_time": 1e307}, {"forward_time": 1e280}, "forward_time"),
    ("training", {"backward_ratio": 1e308}, {"backward_ratio": 1e280}, "backward_ratio"),
    ("training", {"optimizer_time": 1e308}, {"optimizer_time": 1e280}, "optimizer_time"),
    ("training", {"activation_size": 1.0, "bandwidth": 1e-308},
     {"activation_size": 1.0, "bandwidth": 1e-280}, "bandwidth"),
    ("training", {"samples_per_microbatch": 1e308}, {"samples_per_microbatch": 1e290},
     "samples_per_microbatch"),
    ("training", {"speed_spread": 1e308}, {"speed_spread": 20.0}, "speed_spread"),
    # a time unit of 3.6e303 s: the worker-hours overflow (it ran); a huge one, the samples
    # per hour (it named samples_per_microbatch, which was not given)
    ("training", {"hour": 1e-300}, {"hour": 1e-280}, "hour"),
    ("training", {"hour": 1e308}, {"hour": 1e290}, "hour"),
    # the network's links as the latency and bandwidth terms (a link of latency 1e299 or 1e308
    # ran to a time to train of inf)
    ("training", {"stages": 2, "network": "tree:racks=1,hosts=4,host_latency=1e299"},
     {"stages": 2, "network": "tree:racks=1,hosts=4,host_latency=1e280"}, "network"),
    ("training", {"stages": 2, "activation_size": 1e6,
                  "network": "tree:racks=1,hosts=4,host_bandwidth=1e-299"},
     {"stages": 2, "activation_size": 1e6,
      "network": "tree:racks=1,hosts=4,host_bandwidth=1e-250"}, "network"),
    # --sync's bucket as --bucket-size's: 1e9 B in buckets of 1e-300 B raised OverflowError in
    # every replication; of 1e-3 B (1e12 buckets) it ran out of memory
    ("training", {"replicas": 2, "param_size": 1e9, "bandwidth": 1e9,
                  "sync": "allreduce:overlap=backward,bucket_size=1e-300"},
     {"replicas": 2, "param_size": 1e9, "bandwidth": 1e9,
      "sync": "allreduce:overlap=backward,bucket_size=1e6"}, "sync"),
    ("training", {"replicas": 2, "param_size": 1e9, "bandwidth": 1e9,
                  "sync": "allreduce:bucket_size=1e-3"},
     {"replicas": 2, "param_size": 1e9, "bandwidth": 1e9, "sync": "allreduce:bucket_size=1e6"},
     "sync"),
    ("pipeline", {"latency": 1e308}, {"latency": 1e280}, "latency"),
    ("pipeline", {"rate": 1e-308}, {"rate": 1e-280}, "rate"),
    ("learners", {"latency": 1e308}, {"latency": 1e280}, "latency"),
    ("learners", {"size": 1.0, "bandwidth": 1e-308}, {"size": 1.0, "bandwidth": 1e-280},
     "bandwidth"),
])
def test_a_value_whose_run_overflows_is_refused_and_one_below_runs(cls, kw, tame, name):
    """A time (or rate) whose run's time would overflow to inf is refused naming it (before:
    inf in the output, a ZeroDivisionError for the speed spread, a hang for the pipeline);
    the same config far enough below the bound (1e300) is valid."""
    from sim.pipeline import PipelineConfig
    from sim.training import TrainingConfig
    from sim.training.learners import LearnersConfig

    make = {"training": lambda **k: TrainingConfig(steps=2, **k),
            "pipeline": lambda **k: PipelineConfig(microbatches=10, **k),
            "learners": LearnersConfig}[cls]
    with pytest.raises(ConfigError) as exc:
        make(**kw)
    assert exc.value.name == name
    make(**tame)


def test_gossip_noise_beyond_the_value_bound_is_refused(capsys):
    """--noise 1e200 raised OverflowError in the prediction's (n - 1) s^2 d; it is a value the
    gossip adds, bounded as the initial values are (MAX_VALUE, 1e150); 1e150 runs finite."""
    code = main(["gossip", "--nodes", "10", "--rounds", "5", "--noise", "1e200"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dtsim gossip: error: 'noise'")
    assert main(["gossip", "--nodes", "10", "--rounds", "5", "--noise", "1e150", "--json"]) == 0


def test_rates_of_an_experiment_in_parts_are_checked_over_every_point(tmp_path, capsys):
    """An experiment whose points return different metrics (parts) declares a rate of one part:
    it is accepted and its interval stays inside [0, 1] (a mean interval of 3 rates near 1 goes
    past 1), while a rate no point returns is still refused in one line, exit 2."""
    import csv

    head = ("NAME = 'x'\nBASE = {'part': 'a'}\nPOINTS = [{'part': 'a'}, {'part': 'b'}]\n"
            "REPLICATIONS = 3\n"
            "def model(config, streams):\n"
            "    if config['part'] == 'a':\n        return {'t': 1.0}\n"
            "    return {'g': 0.999 - 0.4 * streams.rng('g').random() ** 4}\n")
    f = tmp_path / "parts.py"
    f.write_text(head + "RATES = {'g': None}\n")
    assert main(["run", str(f), "--executor", "serial", "--quiet",
                 "--out", str(tmp_path / "o")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "o" / "summary.csv")))
    g = next(r for r in rows if r["part"] == "b")
    assert 0.0 <= float(g["g_low"]) <= float(g["g_high"]) <= 1.0
    f.write_text(head + "RATES = {'nope': None}\n")
    assert main(["run", str(f), "--executor", "serial", "--quiet",
                 "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'RATES' must be names of metrics the model returns (g, t): 'nope'" \
        in err[0], err


def test_a_rate_of_a_part_whose_every_task_failed_is_not_blamed_on_rates(tmp_path, capsys):
    """(user trial 4) A copy of diloco_zones.py edited to MODELS = {'1B': 1e9} had every task
    of its trace part fail (KeyError: '10B', a model the part named), and the run ended with
    "'RATES' must be names of metrics the model returns (...): 'worker_availability'", exit 2:
    the declared rate of that part was blamed, not the failures. With a point whose every
    task failed, the rate may be that point's: the run ends as a run with failed tasks (exit
    1, the failures named), and the rate is still refused when every point has a record."""
    head = ("NAME = 'x'\nBASE = {'part': 'a'}\nPOINTS = [{'part': 'a'}, {'part': 'b'}]\n"
            "REPLICATIONS = 2\nRATES = {'g': None}\n"
            "def model(config, streams):\n"
            "    if config['part'] == 'a':\n        return {'t': 1.0}\n"
            "    return {'g': {'10B': 0.5}['1B']}\n")
    f = tmp_path / "parts.py"
    f.write_text(head)
    assert main(["run", str(f), "--executor", "serial", "--quiet",
                 "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "RATES" not in err and "KeyError" in err, err
