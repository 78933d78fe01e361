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

#: One or two cases of every kind: memory, output locations, inapplicable flags,
#: binary files, experiment files, the API.
FAST = (
    "pipeline/stages-1e9",
    "pipeline/trace-is-dir",
    "pipeline/shape-with-exponential",
    "pipeline/show-placement-without-topology",
    "design/microbatches-without-verify",
    "failures/trace-binary",
    "failures/availability-with-trace",
    "gossip/dim-1e9",
    "gossip/adversary-value-without-adversary",
    "topologies/ring-1e12",
    "run/sys-exit-7-at-import",
    "run/name-escapes-out",
    "run/out-read-only",
    "reproduce/no-study-files",
    "bench/parts-empty",
    "api/PipelineConfig-availability-string",
    "api/read_trace-binary",
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
