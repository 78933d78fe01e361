"""Tests of the one-line validation messages and their CLI handling."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from sim.errors import (
    ConfigError,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)


def test_message_template():
    """Messages read 'name' must be rule: value."""
    assert str(ConfigError("availability", "in [0, 1]", 1.5)) == "'availability' must be in [0, 1]: 1.5"


def test_pickles_across_processes():
    """A ConfigError survives pickling (process pools, Dask workers)."""
    e = pickle.loads(pickle.dumps(ConfigError("x", "> 0", -1)))
    assert str(e) == "'x' must be > 0: -1" and e.name == "x"


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: check_probability("p", float("nan")), "'p' must be in [0, 1]: nan"),
        (lambda: check_probability("p", 0.0, open_low=True), "'p' must be in (0, 1]: 0.0"),
        (lambda: check_probability("p", "a"), "'p' must be in [0, 1]: 'a'"),
        # audit4: inf is refused for not being finite ('> 0: inf' named a rule inf meets)
        (lambda: check_positive("t", float("inf")), "'t' must be a finite number > 0: inf"),
        (lambda: check_nonnegative("t", float("inf")), "'t' must be a finite number >= 0: inf"),
        (lambda: check_nonnegative("t", float("-inf")), "'t' must be >= 0: -inf"),
        (lambda: check_nonnegative("t", -1.0, allow_inf=True), "'t' must be >= 0: -1.0"),
        (lambda: check_int("n", 2.5, low=1), "'n' must be an integer >= 1: 2.5"),
        (lambda: check_int("n", 9, low=1, high=8), "'n' must be an integer in [1, 8]: 9"),
        (lambda: check_choice("k", "z", ["a", "b"]), "'k' must be one of a, b: 'z'"),
    ],
)
def test_checks(call, message):
    """Each checker raises the exact message."""
    with pytest.raises(ConfigError) as ei:
        call()
    assert str(ei.value) == message


def test_valid_values_pass():
    """Valid values come back converted."""
    assert check_probability("p", 1) == 1.0
    assert check_int("n", 3, low=1) == 3
    assert check_positive("t", 2) == 2.0


def test_cli_bad_input_is_one_line_exit_2():
    """The CLI prints one line naming parameter, rule and value, exits 2, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "sim", "failures", "--availability", "1.5"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "dtsim failures: error: 'availability' must be in [0, 1]: 1.5\n"


def test_cli_unknown_option_exit_2():
    """An unknown option is a one-line usage error with exit 2."""
    proc = subprocess.run([sys.executable, "-m", "sim", "failures", "--bogus"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def _broken_model(config, streams):
    raise ValueError("engine broke")


def test_failed_replication_is_one_line_exit_1(monkeypatch, capsys):
    """A replication that raises is reported as one line with exit 1, not a traceback."""
    import sim.commands.failures as cmd
    from sim.cli import main

    monkeypatch.setattr(cmd, "failures_model", _broken_model)
    assert main(["failures", "--replications", "3", "--horizon", "10"]) == 1
    err = capsys.readouterr().err
    assert err == ("dtsim failures: error: 3 of 3 replications failed; "
                   "replication 0: ValueError: engine broke\n")


def test_version_flag_prints_the_package_version(capsys):
    """``dtsim --version`` prints ``dtsim <version>`` (the package's) and exits 0."""
    import pytest

    import sim
    from sim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"dtsim {sim.__version__}"
    from importlib.metadata import version

    assert version("dtsim") == sim.__version__  # pyproject and the package agree


def test_ascii_int_reads_what_int_read_but_other_scripts_digits():
    """sim.errors.ascii_int, the CLI's integer reader: what int() took before stays (white
    space, a sign, underscores between digits, an int itself); other scripts' digits, which
    int() also reads ('\\u0661' is 1), are refused; what int() refused stays refused."""
    from sim.errors import ascii_int

    for text, v in (("3", 3), (" 3 ", 3), ("+3", 3), ("-1", -1), ("1_000", 1000), ("007", 7),
                    (5, 5)):
        assert ascii_int(text) == v
    for text in ("\u0661", "\u0661\u0662", "1\u0660", "\uff13", "\u09e9", "\u00a03",
                 "1e3", "1.0", "", "1__0", "0x10"):
        with pytest.raises(ValueError):
            ascii_int(text)


def _refused_in_one_line(capsys, tmp_path, monkeypatch, argv, line):
    """``dtsim argv`` (run in ``tmp_path``) exits 2 printing ``line`` alone and writes no
    timeline file."""
    from sim.cli import main

    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals exit from parse_args
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [line]
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("argv, line", [
    (["train", "--seed", "\u0661"], "dtsim train: error: argument --seed: invalid int value: "
                                     "'\u0661'"),
    (["train", "--steps", "\u0662"], "dtsim train: error: argument --steps: invalid int "
                                      "value: '\u0662'"),
    (["train", "--replicas", "\u0662,1"], "dtsim train: error: argument --replicas: expected "
                                          "an integer or a comma list: '\u0662,1'"),
    (["train", "--checkpoint-every", "\u0662"], "dtsim train: error: argument "
     "--checkpoint-every: expected an integer or auto: '\u0662'"),
    (["train", "--timeline", "t.json", "--timeline-replication", "\u0661"],
     "dtsim train: error: 'timeline_replication' must be an integer in [0, 9] (0 <= K < "
     "--replications 10): '\u0661'"),
    (["train", "--timeline", "t.json", "--timeline-max-events", "\u0661\u0660"],
     "dtsim train: error: 'timeline_max_events' must be an integer in [1, 100000000]: "
     "'\u0661\u0660'"),
    (["train", "--sync", "diloco:every=\u0662"], "dtsim train: error: 'sync' must be every "
                                                  "an integer >= 1: '\u0662'"),
    (["pipeline", "--replicas", "\u0662"], "dtsim pipeline: error: argument --replicas: "
                                           "expected an integer or a comma list: '\u0662'"),
    (["gossip", "--rounds", "\u0662"], "dtsim gossip: error: argument --rounds: invalid "
                                       "number value: '\u0662'"),
    (["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a", "--tp", "\u0661"],
     "dtsim plan: error: argument --tp: expected an integer or a comma list: '\u0661'"),
])
def test_cli_integers_are_ascii_digits_only(capsys, tmp_path, monkeypatch, argv, line):
    """'--timeline-replication \u0661' recorded replication 1 and '--seed \u0661' ran seed 1
    (int() reads every script's digits): each integer option now refuses them in its usual
    one line, exit 2, before any work (no timeline file written)."""
    _refused_in_one_line(capsys, tmp_path, monkeypatch, argv, line)


def test_ascii_float_reads_what_float_read_but_other_scripts_digits():
    """sim.errors.ascii_float, the one reader of a number typed on a command line or in a spec
    text: what float() took stays (white space, a sign, an exponent, underscores between
    digits as ascii_int keeps them, inf and nan for each option's rule to judge, a number
    itself); other scripts' digits and spaces, which float() also reads ('\\u0661.\\u0665' is
    1.5), are refused; what float() refused stays refused."""
    import math

    from sim.errors import ascii_float

    for text, v in (("1.5", 1.5), (" 2 ", 2.0), ("+3", 3.0), ("-1e3", -1000.0), ("1_000.5", 1000.5),
                    (".5", 0.5), ("inf", math.inf), (2, 2.0)):
        assert ascii_float(text) == v
    assert math.isnan(ascii_float("nan"))
    for text in ("\u0661", "\u0661.\u0665", "1.\u0665", "\uff13", "\u09e9", "\u00a03", "1e\u0663",
                 "", "1__0", "0x10", "1,5"):
        with pytest.raises(ValueError):
            ascii_float(text)


@pytest.mark.parametrize("argv, line", [
    (["train", "--availability", "\u0660.\u0665"],
     "dtsim train: error: argument --availability: invalid float value: '\u0660.\u0665'"),
    (["train", "--mtbf", "\u0663\u0660\u0660\u0660"],
     "dtsim train: error: argument --mtbf: 'mtbf' must be a time: seconds, or a number and a "
     "time unit: 10ms, 250us, 2h: '\u0663\u0660\u0660\u0660'"),
    (["train", "--strategy", "checkpoint-restart:every=\u0663"],
     "dtsim train: error: 'every' must be an integer: '\u0663'"),
    (["train", "--strategy", "redundancy:slowdown=\u0661.\u0665"],
     "dtsim train: error: 'slowdown' must be a number: '\u0661.\u0665'"),
    (["train", "--strategy", "reconfiguration:boot=\u0661"],
     "dtsim train: error: 'boot' must be a number: '\u0661'"),
    (["train", "--replicas", "4", "--microbatches-per-step", "4", "--steps", "8", "--sync",
      "diloco:every=4,topk=\u0660.\u0661"],
     "dtsim train: error: 'sync' must be topk in (0, 1]: '\u0660.\u0661'"),
    (["train", "--timeline", "t.json", "--timeline-window", "\u0661:2"],
     "dtsim train: error: 'timeline_window' must be T0:T1 with 0 <= T0 < T1 (simulated time "
     "units; T1 may be inf): '\u0661:2'"),
    (["pipeline", "--stage-time", "\u0661,2"],
     "dtsim pipeline: error: argument --stage-time: expected a number or a comma list: "
     "'\u0661,2'"),
    (["gossip", "--noise", "\u0661"],
     "dtsim gossip: error: argument --noise: invalid float value: '\u0661'"),
    (["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a", "--price",
      "GH-96=\u0661"],
     "dtsim plan: error: argument --price: expected GPU=DOLLARS_PER_HOUR: 'GH-96=\u0661'"),
    (["topologies", "torus:dims=4x\u00b2"],
     "dtsim topologies: error: 'topology' must be a valid torus spec ('dims' must be side "
     "lengths >= 2 such as 8x8 (any number of dimensions): '4x\u00b2'): 'torus:dims=4x\u00b2'"),
    (["topologies", "ring:n=\u0668"],
     "dtsim topologies: error: 'topology' must be a valid ring spec ('n' must be an integer "
     ">= 3: '\u0668'): 'ring:n=\u0668'"),
    (["topologies", "tree:racks=2,hosts=4,host_bandwidth=\u0661"],
     "dtsim topologies: error: 'topology' must be a spec whose host_bandwidth is a rate: bytes "
     "per second, or a number and a rate unit: 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s (k M G T P "
     "E powers of 1000, Ki Mi Gi Ti Pi Ei of 1024; B a byte, b or bit a bit): "
     "'tree:racks=2,hosts=4,host_bandwidth=\u0661'"),
])
def test_cli_numbers_are_ascii_only(capsys, tmp_path, monkeypatch, argv, line):
    """audit6: float() and a topology spec's \\d read every script's digits: '--mtbf
    \u0663\u0660\u0660\u0660' ran an mtbf of 3000, '--strategy checkpoint-restart:every=\u0663'
    checkpointed every 3 steps, 'ring:n=\u0668' built 8 nodes, and 'torus:dims=4x\u00b2' (a
    superscript: str.isdigit says yes, int() no) ended in a traceback. Each is refused in its
    option's usual one line, exit 2, before any work (no timeline file written)."""
    _refused_in_one_line(capsys, tmp_path, monkeypatch, argv, line)


@pytest.mark.parametrize("kind, text, line", [
    ("speeds", "stage,replica,speed\n0,0,\u0661\n",
     "'speeds' must be a CSV file of integer stage,replica and numeric speed,price: "),
    ("speeds", "stage,replica,speed\n\u0660,0,1\n",
     "'speeds' must be a CSV file of integer stage,replica and numeric speed,price: "),
    ("step_times", "workers,step_time\n4,\u0661\u0660\n",
     "'step_times' must be a CSV file of integer workers and numeric step_time: "),
    ("step_times", "workers,step_time\n\u0664,10\n",
     "'step_times' must be a CSV file of integer workers and numeric step_time: "),
    ("price_series", "time,price\n0,\u0663\n",
     "'price_series' must be a CSV file of numeric time,price: "),
])
def test_training_csv_numbers_are_ascii_only(tmp_path, kind, text, line):
    """audit6: the speeds, step-times and price-series readers used int() and float(), so a
    price of '\u0663' billed 3 a worker-hour and a speed of '\u0661' ran at 1; their numbers
    are ASCII (ascii_int, ascii_float), refused in the file's usual one line."""
    from sim.training import read_speeds
    from sim.training.billing import read_price_series
    from sim.training.strategies import read_step_times

    f = tmp_path / f"{kind}.csv"
    f.write_text(text, encoding="utf-8")
    read = {"speeds": lambda p: read_speeds(p, 1), "step_times": read_step_times,
            "price_series": read_price_series}[kind]
    with pytest.raises(ConfigError) as e:
        read(f)
    assert str(e.value) == line + repr(f"{f}:2")
