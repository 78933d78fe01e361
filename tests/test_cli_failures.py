"""Tests of ``dtsim failures``: the JSON keys and measured-vs-target agreement.

The command runs in this process (``sim.cli.main``, the function behind ``dtsim`` and
``python -m sim``), its output read with capsys: a fresh interpreter per call cost 1.5-4 s
of start-up each. ``tests/test_errors.py`` runs ``python -m sim failures`` in a subprocess.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sim.cli import main


@pytest.fixture
def _run(capsys, monkeypatch):
    """``_run(*args)``: dtsim failures ARGS in this process, as (returncode, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "80")  # --help wraps as in a subprocess without a terminal

    def run(*args: str) -> SimpleNamespace:
        capsys.readouterr()
        try:
            rc = main(["failures", *args])
        except SystemExit as exc:  # argparse: --help, or a usage error
            rc = exc.code
        out = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err)

    return run


def test_json_keys_and_agreement(_run):
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


def test_same_seed_same_output(_run):
    """Two runs with one seed print identical JSON (serial vs pool)."""
    a = _run("--json", "--horizon", "300", "--replications", "3", "--seed", "8")
    b = _run("--json", "--horizon", "300", "--replications", "3", "--seed", "8",
             "--executor", "local")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_bad_distribution_exit_2(_run):
    """An unknown distribution is one line and exit 2."""
    p = _run("--distribution", "gamma")
    assert p.returncode == 2
    assert p.stderr.strip() == ("dtsim failures: error: 'distribution' must be one of "
                                "exponential, weibull, lognormal, deterministic, pareto: 'gamma'")


def test_cluster_workers_and_its_documented_alias(_run):
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


def test_fractions_get_intervals_inside_unit_interval(_run):
    """Availability and outage intervals lie in [0, 1]; a domain never out is 0, exactly.

    (Before issue 24 a domain outage of 0 printed a one-sided bound, "below 0.53".)
    """
    p = _run("--json", "--horizon", "500", "--replications", "4", "--seed", "3")
    out = json.loads(p.stdout)
    for key in ("worker_availability_ci", "effective_availability_ci", "domain_unavailability_ci",
                "joint_outage_ci"):
        lo, hi = out[key]
        assert 0.0 <= lo <= hi <= 1.0
    assert out["domain_unavailability"] == 0.0 and out["domain_unavailability_ci"] == [0.0, 0.0]
    text = _run("--horizon", "500", "--replications", "4", "--seed", "3").stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("domain unavailability"))
    assert "0 (exact)" in line and "below" not in text


_LAYOUT = "datacenter:regions=2,racks=2,hosts=3,region_outage=0.05,rack_outage=0.05,host_outage=0.02"


def test_nested_domains_match_the_exact_joint_outage(_run):
    """With --topology each level's unavailability and joint outage match the nested exact formula."""
    # 6 replications (10 before): every level's interval holds its exact value (z = 0.48, 0.73,
    # 0.33), the flat model 15 se away (10: z = 0.45, 0.71, 0.17; flat 26 se away)
    p = _run("--json", "--topology", _LAYOUT, "--availability", "0.9", "--horizon", "4000",
             "--replications", "6", "--seed", "5")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    a, uR, uK, uH, H, K = 0.9, 0.05, 0.05, 0.02, 3, 2
    qh = 1 - (1 - uH) * a                   # a host's worker down, given its rack and region up
    ck = qh ** H                            # a rack's workers all down, given the rack is up
    cr = (1 - (1 - uK) * (1 - ck)) ** K     # a region's workers all down, given it is up
    exact = {"level0": 1 - (1 - uR) * (1 - cr),
             "level1": 1 - (1 - uR) * (1 - uK) * (1 - ck),
             "level2": 1 - (1 - uR) * (1 - uK) * (1 - uH) * a}
    for key, value in exact.items():
        assert abs(out[f"predicted_joint_outage_{key}"] - value) < 1e-12
        lo, hi = out[f"joint_outage_{key}_ci"]
        m = out[f"joint_outage_{key}"]
        assert lo <= value <= hi and abs(m - value) < 4 * (hi - lo) / (2 * 1.96), (key, m, lo, hi, value)
    assert abs(out["target_effective_availability"] - a * (1 - uR) * (1 - uK) * (1 - uH)) < 1e-12
    lo, hi = out["effective_availability_ci"]
    assert lo <= out["target_effective_availability"] <= hi
    # a flat model (each rack its own domain, parents ignored) is rejected
    flat = uK + (1 - uK) * (1 - (1 - uH) * a) ** H
    lo, hi = out["joint_outage_level1_ci"]
    assert not lo <= flat <= hi and abs(out["joint_outage_level1"] - flat) > 8 * (hi - lo) / 3.92


def test_nested_domains_refuse_the_flat_flags(_run):
    """--topology replaces --domains, --domain-outage and --cluster-workers: each is refused in one line."""
    p = _run("--topology", _LAYOUT, "--domains", "3")
    assert p.returncode == 2
    assert p.stderr.strip() == ("dtsim failures: error: 'domains' must be given only without "
                                "--topology (the layout's hosts and failure domains replace it): 3")
    p = _run("--topology", "ring:n=4:x=1")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = _run("--topology", "ring:n=4")  # a graph without failure domains
    assert p.returncode == 2
    assert p.stderr.strip() == ("dtsim failures: error: 'topology' must be a layout whose hosts sit "
                                "in failure domains (datacenter, geo, or a graph file with domain "
                                "chains): 'ring:n=4'")


def test_a_tree_layouts_hosts_fail_in_their_racks(_run):
    """tree:racks=2,hosts=4 has 8 hosts in 2 racks and 3 switches (role=switch, labels of
    another type than the hosts'): a worker per host, none per switch. Before, sorting the
    mixed labels raised a TypeError traceback."""
    p = _run("--topology", "tree:racks=2,hosts=4", "--json", "--replications", "2",
             "--horizon", "200")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    from sim.failures import layout_domains

    chains, unavail = layout_domains("tree:racks=2,hosts=4")
    assert chains == [(f"rack{r}", f"rack{r}/host{h}") for r in range(2) for h in range(4)]
    assert unavail["rack0"] == 0.001
