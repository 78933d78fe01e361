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


def test_cluster_workers_and_its_documented_alias():
    """--cluster-workers sets the cluster size; --workers is its documented old name, same output."""
    a = _run("--json", "--cluster-workers", "6", "--horizon", "300", "--replications", "2")
    b = _run("--json", "--workers", "6", "--horizon", "300", "--replications", "2")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert "old name" in _run("--help").stdout


def test_domain_defaults_match_pipeline_and_design():
    """--domain-outage and --domain-downtime have one default across failures, pipeline and design."""
    import argparse

    from sim.commands import design, failures, pipeline

    def defaults(mod):
        p = argparse.ArgumentParser()
        mod.add_arguments(p)
        return {a.dest: a.default for a in p._actions}

    f, pl = defaults(failures), defaults(pipeline)
    assert f["domain_outage"] == pl["domain_outage"] == 0.0
    assert f["domain_downtime"] == pl["domain_downtime"] == 1.0
    assert defaults(design).get("domain_outage", 0.0) == 0.0


def test_fractions_get_intervals_inside_unit_interval():
    """Availability and outage intervals lie in [0, 1]; a domain never out is a one-sided bound."""
    p = _run("--json", "--horizon", "500", "--replications", "4", "--seed", "3")
    out = json.loads(p.stdout)
    for key in ("worker_availability_ci", "effective_availability_ci", "domain_unavailability_ci",
                "joint_outage_ci"):
        lo, hi = out[key]
        assert 0.0 <= lo <= hi <= 1.0
    assert out["domain_unavailability"] == 0.0 and out["domain_unavailability_ci"][0] == 0.0
    text = _run("--horizon", "500", "--replications", "4", "--seed", "3").stdout
    assert "below " in text
