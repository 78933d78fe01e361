"""Byzantine options a user combines on ``dtsim gossip``: refused when they cannot act."""

from __future__ import annotations

import pytest

from sim.cli import main

BASE = ["gossip", "--protocol", "neighbourhood", "--rounds", "3", "--replications", "2",
        "--objective", "quadratic"]


@pytest.mark.parametrize("extra,message", [
    (["--topology", "ring:n=8", "--rule", "trimmed", "--trim", "2"],
     "'trim' must be at most 1 (a trimmed mean keeps m - 2 trim values; the node with most "
     "inputs has m = 3): 2"),
    (["--trim", "1"], "'trim' must be given only with --rule trimmed: 1"),
    (["--alpha", "0.5"], "'alpha' must be given only with --partition dirichlet: 0.5"),
    (["--bucketing", "1000000000"], "'bucketing' must be small enough to fit in memory"),
])
def test_options_that_cannot_act_are_refused(capsys, extra, message):
    """A trim that leaves no value at any node (it fell back to the median), --trim and --alpha without
    their rule or partition (accepted and unused), a bucket of 10^9 (a 119 GiB MemoryError in
    every replication): one line, exit 2."""
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_trim_that_empties_some_nodes_runs_as_the_reference_does_and_says_so(capsys):
    """On a star of 8 a trim of 2 empties the 7 leaves' 2 values but not the hub's 8: the
    reference code's trimmed mean (ClippedGossip's aggregator.TM) lowers its trim there until a
    value stays, which is the median, so dtsim runs it (the authors' settings do this: see
    test_byzantine_reference) and names the nodes in one warning line."""
    assert main([*BASE, "--topology", "star:n=8", "--rule", "trimmed", "--trim", "2"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == ("dtsim gossip: warning: --trim 2 leaves no value at 7 of 8 aggregating "
                      "nodes (m <= 2 trim values); they keep the median, as the reference code's "
                      "trimmed mean lowers its trim")
    assert main([*BASE, "--topology", "ring:n=8", "--rule", "trimmed", "--trim", "1"]) == 0
    assert "warning" not in capsys.readouterr().err
