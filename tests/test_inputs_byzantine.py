"""Byzantine options a user combines on ``dtsim gossip``: refused when they cannot act."""

from __future__ import annotations

import pytest

from sim.cli import main

BASE = ["gossip", "--protocol", "neighbourhood", "--rounds", "3", "--replications", "2",
        "--objective", "quadratic"]


@pytest.mark.parametrize("extra,message", [
    (["--topology", "ring:n=8", "--rule", "trimmed", "--trim", "2"],
     "'trim' must be at most 1 (a trimmed mean keeps m - 2 trim values; the node with fewest "
     "inputs has m = 3): 2"),
    (["--trim", "1"], "'trim' must be given only with --rule trimmed: 1"),
    (["--alpha", "0.5"], "'alpha' must be given only with --partition dirichlet: 0.5"),
    (["--bucketing", "1000000000"], "'bucketing' must be small enough to fit in memory"),
])
def test_options_that_cannot_act_are_refused(capsys, extra, message):
    """A trim that leaves no value (it fell back to the median), --trim and --alpha without
    their rule or partition (accepted and unused), a bucket of 10^9 (a 119 GiB MemoryError in
    every replication): one line, exit 2."""
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
