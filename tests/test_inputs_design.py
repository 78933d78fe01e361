"""``dtsim design --failure-trace`` on a user's own traces: huge counts, all-zero traces, bounds."""

from __future__ import annotations

import json
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from sim import analytic
from sim.analytic import trace_design
from sim.cli import main


def _trace(tmp_path, rows: str, name: str = "t.csv") -> str:
    p = tmp_path / name
    p.write_text(rows)
    return str(p)


@pytest.mark.parametrize("C,c,W", [(10**7, 4 * 10**6, 48), (10**12, 3 * 10**11, 96),
                                   (10**12, 10**12, 48), (5 * 10**6, 0, 20)])
def test_hypergeometric_law_of_huge_traces_is_exact_to_1e9(C, c, W):
    """Beyond 10^6 slots the log-sum law equals the exact rational one to 1e-9 (and is fast)."""
    t0 = time.process_time()
    got = trace_design.hypergeom_pmf(C, c, W)
    assert time.process_time() - t0 < 0.5
    exact = np.array([float(Fraction(math.comb(c, u) * math.comb(C - c, W - u), math.comb(C, W)))
                      for u in range(W + 1)])
    big = exact > 1e-250
    assert np.all(np.abs(got[big] - exact[big]) <= 1e-9 * exact[big])
    assert np.all(got[~big] <= 1e-240)


def test_hypergeometric_law_below_the_threshold_is_scipys():
    """Up to 10^6 slots the law is scipy's, bit for bit (the shipped traces' numbers unchanged)."""
    from scipy import stats as sps

    got = trace_design.hypergeom_pmf(32, 24, 16)
    assert np.array_equal(got, sps.hypergeom.pmf(np.arange(17), 32, 24, 16))


def test_a_trace_of_10_to_the_12_instances_is_answered_fast_or_refused(tmp_path, capsys):
    """Count 1e12 on two lines: with --max-replicas an answer in seconds; without, a refusal
    naming the memory of the largest law (it was minutes in scipy, deaf to Ctrl-C)."""
    f = _trace(tmp_path, "0,1000000000000\n100,500000000000\n200,500000000000\n")
    t0 = time.process_time()
    assert main(["design", "--failure-trace", f, "--stages", "8", "--max-replicas", "20",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert time.process_time() - t0 < 20
    assert out["feasible"] and out["replicas"] == 12 and out["floor"] is None
    assert main(["design", "--failure-trace", f]) == 2
    err = capsys.readouterr().err.strip()
    assert "'failure_trace' must be a trace whose exact law fits in memory" in err
    assert "--max-replicas bounds r" in err and len(err.splitlines()) == 1


def test_max_replicas_bounds_the_trace_search():
    """--max-replicas stops the search at r = max_replicas (it searched every r and then
    refused); the reason says the target needs more."""
    from sim.traces import load_trace

    tr = load_trace("gcp-a100")
    d = analytic.trace_min_replicas(tr, 8, 1, 1e-2, max_replicas=2)
    assert not d.feasible
    assert d.reason.startswith("target_drop 0.01 needs more than max_replicas=2 replicas")
    assert d.drop_rate == pytest.approx(analytic.trace_drop_probability(
        tr.times, tr.counts, tr.end, 64, 8, 2, 1), rel=1e-12)


def test_all_zero_trace_names_the_trace_not_availability(tmp_path, capsys):
    """A trace with no instance ever up: refused naming --failure-trace (it said
    'availability' must be in [0, 1]: nan, an option never given)."""
    f = _trace(tmp_path, "0,0\n100,0\n")
    assert main(["design", "--failure-trace", f]) == 2
    err = capsys.readouterr().err
    assert "'failure_trace' must be a trace with an instance up at some time" in err


def test_feasible_trace_design_prints_no_floor_it_did_not_compute(capsys):
    """A feasible trace design stops at its r: no 'floor (r = C // L)' row with that r's drop."""
    assert main(["design", "--failure-trace", "gcp-a100", "--stages", "8", "--skip-budget", "1",
                 "--target-drop", "1e-2"]) == 0
    text = capsys.readouterr().out
    assert "replicas r" in text and "floor" not in text


def test_verify_options_are_checked_when_the_design_is_infeasible(capsys):
    """--verify --microbatches 0 on an infeasible trace design: refused (no simulation runs
    for an infeasible design, and the option was accepted silently)."""
    assert main(["design", "--failure-trace", "aws-p3", "--stages", "4", "--verify",
                 "--microbatches", "0"]) == 2
    assert "'microbatches' must be an integer >= 1: 0" in capsys.readouterr().err


def test_a_count_of_5000_digits_is_a_refusal(tmp_path, capsys):
    """A Bamboo count of 5000 digits: refused as no known format (int() raised past Python's
    4300-digit limit)."""
    f = _trace(tmp_path, "0," + "9" * 5000 + "\n10,4\n")
    assert main(["design", "--failure-trace", f]) == 2
    err = capsys.readouterr().err.strip()
    assert "'failure_trace' must be a trace in a known format" in err
