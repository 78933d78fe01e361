"""The bad-input audit (tools/bad_inputs.py): a representative subset by default, every case slow."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "bad_inputs.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("dtsim_bad_inputs", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


audit = _load_tool()

#: One case of every kind: memory, output locations, inapplicable flags, binary files,
#: experiment files, the API (each CLI case is a fresh process of about 0.5-1.5 s; the
#: whole table, every subcommand, is the slow test below).
FAST = (
    "pipeline/shape-with-exponential",
    "failures/trace-binary",
    "failures/availability-with-trace",
    "gossip/dim-1e9",
    "run/sys-exit-7-at-import",
    "run/name-escapes-out",
    "run/out-read-only",
    "reproduce/no-study-files",
    "bench/parts-empty",
    "api/PipelineConfig-availability-string",
    "api/read_trace-binary",
    "units/network-flows-size-rate",
)


@pytest.fixture(scope="module")
def cases():
    """The audit's cases, keyed by id, with their scratch folder and mounts."""
    with audit.fixtures() as fx:
        yield {c.id: c for c in audit.build_cases(fx)}


def test_table_is_large_and_covers_every_subcommand(cases):
    """At least 120 cases, every subcommand and the three config classes among them."""
    assert len(cases) >= 120
    prefixes = {cid.split("/")[0] for cid in cases}
    assert {"bench", "design", "failures", "gossip", "pipeline", "plot", "reproduce", "run",
            "topologies", "api"} <= prefixes
    api_text = " ".join(" ".join(c.argv) for cid, c in cases.items() if cid.startswith("api/"))
    for cls in ("PipelineConfig", "GossipConfig", "ClusterConfig"):
        assert cls in api_text


def test_judge_tells_the_failures_apart():
    """The verdicts: silent ignore, wrong parameter, traceback, hang and pass are told apart."""
    case = audit.Case("x", ["true"], audit.refuse("shape"))
    line = "dtsim pipeline: error: 'shape' must be given only with --distribution weibull: 0.7\n"
    assert audit.judge(case, 0, "", "", False)[0] == "silent ignore"
    assert audit.judge(case, 2, "", line.replace("'shape'", "'rate'"), False)[0] == "wrong parameter"
    assert audit.judge(case, 1, "", "Traceback (most recent call last):\n  ...\nKeyError\n",
                       False)[0] == "traceback"
    assert audit.judge(case, None, "", "", True)[0] == "hang"
    assert audit.judge(case, 2, "", line, False)[0] == "pass"
    assert audit.judge(case, 2, "", "dtsim x: error: argument --shape: invalid float value\n",
                       False)[0] == "pass"
    noisy = audit.Case("y", ["true"], audit.ok())
    assert audit.judge(noisy, 0, "", "x.py:3: RuntimeWarning: divide by zero\n",
                       False)[0] == "noisy stderr"


@pytest.mark.parametrize("case_id", FAST)
def test_representative_case(cases, case_id):
    """A representative bad input gets one line naming its parameter, exit 2 (or as expected)."""
    if case_id == "run/out-read-only" and cases[case_id].argv[-1].startswith("/dev/"):
        pytest.skip("no tmpfs mounts here")
    o = audit.run_case(cases[case_id])
    assert o.verdict == "pass", (o.verdict, o.detail, o.status, o.last)


@pytest.mark.slow
def test_whole_table(tmp_path):
    """Every case of the audit meets its expectation: 0 tracebacks, hangs, silent ignores."""
    outcomes, fx = audit.run_cases()
    audit.write_markdown(outcomes, tmp_path / "bad_inputs.md", str(fx.root), fx.mountable)
    t = audit.totals(outcomes)
    bad = [(o.case.id, o.verdict, o.last) for o in outcomes if o.verdict != "pass"]
    assert t["failed"] == 0, bad
    assert t["tracebacks"] == t["hangs"] == t["silent ignores"] == t["wrong parameter names"] == 0


def test_given_options_are_what_was_typed():
    """The CLI records the options typed (abbreviated or with =), not the defaults."""
    from sim.cli import build_parser, given_options

    p = build_parser()
    assert given_options(p, ["pipeline", "--stages=4", "--replicati", "3", "--show-pl"]) == {
        "stages", "replications", "show_placement"}
    assert given_options(p, ["topologies"]) == frozenset()


def test_inapplicable_option_message_is_exact(capsys):
    """An option without effect is one line naming the option it needs, exit 2."""
    from sim.cli import main

    assert main(["pipeline", "--shape", "0.7"]) == 2
    assert capsys.readouterr().err == (
        "dtsim pipeline: error: 'shape' must be given only with --distribution weibull, "
        "lognormal or pareto: 0.7\n")
    assert main(["design", "--seed", "3"]) == 2
    assert capsys.readouterr().err == "dtsim design: error: 'seed' must be given only with --verify: 3\n"


def test_memory_message_names_the_driving_parameter():
    """check_memory_terms names the largest term; the rule says what is needed and available."""
    from sim.errors import ConfigError, check_memory, check_memory_terms

    with pytest.raises(ConfigError) as e:
        check_memory_terms([("nodes", 16, 10.0), ("dim", 10**9, 3 * 2**30)], available=2**30)
    assert str(e.value) == ("'dim' must be small enough to fit in memory (needs about 3 GiB, "
                            "1 GiB available): 1000000000")
    check_memory("stages", 4, 2**20, available=2**30)  # fits: no error


def test_output_locations_are_checked_without_creating_them(tmp_path):
    """A folder below a regular file, or a file that is a folder, is refused; nothing is made."""
    from sim.errors import ConfigError, check_output_dir, check_output_file

    f = tmp_path / "f.txt"
    f.write_text("x")
    with pytest.raises(ConfigError, match=r"^'out' must be a writable folder: .*is a file"):
        check_output_dir("out", f / "sub")
    with pytest.raises(ConfigError, match=r"^'trace' must be a writable file: .*\(a folder\)"):
        check_output_file("trace", tmp_path)
    assert check_output_dir("out", tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_numeric_strings_are_not_numbers():
    """'0.5' is refused where a number is wanted (it would be stored and hashed as a string)."""
    from sim.errors import ConfigError, check_positive, check_probability

    with pytest.raises(ConfigError, match=r"^'availability' must be in \[0, 1\]: '0.5'$"):
        check_probability("availability", "0.5")
    with pytest.raises(ConfigError, match=r"^'rate' must be > 0: '2'$"):
        check_positive("rate", "2", allow_inf=True)
    assert check_probability("availability", 0.5) == 0.5


def test_mean_ci_says_what_it_leaves_out():
    """NaN values are counted in Estimate.dropped and said by str(); nan='raise' refuses them."""
    import math

    from sim.errors import ConfigError
    from sim.results import mean_ci

    e = mean_ci([1.0, math.nan, 3.0])
    assert (e.n, e.dropped, e.mean) == (2, 1, 2.0) and str(e).endswith("(1 NaN left out)")
    assert mean_ci([1.0, 3.0]).dropped == 0 and "NaN" not in str(mean_ci([1.0, 3.0]))
    with pytest.raises(ConfigError, match=r"^'values' must be numbers without NaN"):
        mean_ci([1.0, math.nan], nan="raise")
