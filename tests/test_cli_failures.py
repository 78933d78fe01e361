"""Tests of ``dtsim failures``: the JSON keys and measured-vs-target agreement."""

from __future__ import annotations

import json
import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", "failures", *args],
                          capture_output=True, text=True)


def test_json_keys_and_agreement():
    """--json prints the documented keys; measured values contain their targets."""
    p = _run("--json", "--workers", "12", "--domains", "3", "--availability", "0.8",
             "--domain-outage", "0.05", "--horizon", "3000", "--replications", "8", "--seed", "4")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ["worker_availability", "worker_availability_ci", "target_availability",
                "domain_unavailability", "domain_unavailability_ci",
                "target_domain_unavailability", "simulated_time", "seed"]:
        assert key in out
    lo, hi = out["worker_availability_ci"]
    assert lo <= 0.8 <= hi and hi - lo < 0.02
    lo, hi = out["domain_unavailability_ci"]
    assert lo <= 0.05 <= hi and hi - lo < 0.04
    assert out["seed"] == 4 and out["simulated_time"] == 3000 * 8


def test_same_seed_same_output():
    """Two runs with one seed print identical JSON (serial vs pool)."""
    a = _run("--json", "--horizon", "300", "--replications", "3", "--seed", "8")
    b = _run("--json", "--horizon", "300", "--replications", "3", "--seed", "8",
             "--executor", "local")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_bad_distribution_exit_2():
    """An unknown distribution is one line and exit 2."""
    p = _run("--distribution", "gamma")
    assert p.returncode == 2
    assert p.stderr.strip() == ("dtsim failures: error: 'distribution' must be one of "
                                "exponential, weibull, lognormal, deterministic: 'gamma'")
