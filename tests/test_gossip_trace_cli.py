"""`dtsim gossip --failure-trace`: async churn replayed from a trace, as the API replays it."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.gossip import GossipConfig, gossip_model
from sim.runner import replicate
from sim.traces import TraceReplay

ARGS = ["gossip", "--protocol", "async", "--nodes", "32", "--rounds", "5", "--record-every", "5",
        "--replications", "4", "--seed", "3", "--json"]


def _cli(capsys, *extra):
    base = list(ARGS)
    if "--replications" in extra:  # one value (an option typed twice is refused: audit 7)
        k = base.index("--replications")
        del base[k:k + 2]
    assert main([*base, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_trace_churn_is_the_api_replay(capsys):
    """The CLI's numbers are the API's with the same TraceReplay; without the trace they differ."""
    out = _cli(capsys, "--failure-trace", "aws-p3", "--trace-loop", "--trace-speedup", "100")
    cfg = GossipConfig(protocol="async", nodes=32, rounds=5, record_every=5,
                       failure_trace=TraceReplay("aws-p3", loop=True, speedup=100.0))
    recs = replicate(gossip_model, cfg, replications=4, seed=3)
    api = sum(r["final_disagreement"] for r in recs) / 4
    assert out["final_disagreement"] == pytest.approx(api, rel=1e-12)
    # the wrong model (no churn) is rejected: with 40 replications the intervals are disjoint
    # (aws-p3 starts with many of its 32 slots down, and those nodes do not gossip)
    more = ["--replications", "40"]
    traced = _cli(capsys, "--failure-trace", "aws-p3", "--trace-loop", "--trace-speedup", "100",
                  *more)
    plain = _cli(capsys, *more)
    assert traced["final_disagreement_ci"][0] > plain["final_disagreement_ci"][1]


@pytest.mark.parametrize("extra,param", [
    (["--failure-trace", "aws-p3", "--nodes", "64"], "nodes"),
    (["--failure-trace", "aws-p3", "--availability", "0.9"], "availability"),
    (["--trace-loop"], "trace_loop"),
])
def test_cli_trace_refusals_are_one_line(capsys, extra, param):
    args = [a for a in ARGS if a != "--json"]
    i = args.index("--nodes")
    if "--nodes" in extra:
        del args[i:i + 2]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"'{param}'" in err[0]
