"""The domain-hierarchy fit of a trace's bursts recovers a known failure model's domains."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim.cli import main
from sim.failures import ClusterConfig
from sim.rng import Streams
from sim.traces import cluster_trace, fit_domains, fit_trace, load_trace, trace_stats
from sim.traces.fit_domains import rise_sizes, size_loglik
from sim.traces.stats import preemption_events

#: The known model: 32 workers in 4 domains of 8; a = 0.9 (own outages of mean 1800 s),
#: rho = 0.05 (domain outages of mean 3600 s); 4000 hours per replication.
TRUE = ClusterConfig(workers=32, domains=4, availability=0.9, mean_downtime=1800.0,
                     domain_outage=0.05, domain_mean_downtime=3600.0, horizon=1.44e7)
REPS = 8


@pytest.fixture(scope="module")
def trace0():
    """Replication 0 of the known model (the default suite's one trace, about 2 s)."""
    return cluster_trace(TRUE, streams=Streams(40).replication(0))


@pytest.fixture(scope="module")
def fit0(trace0):
    return fit_domains(trace0)


@pytest.fixture(scope="module")
def traces(trace0):
    """All REPS replications (slow tests only): replication 0 is ``trace0``."""
    return [trace0] + [cluster_trace(TRUE, streams=Streams(40).replication(k))
                       for k in range(1, REPS)]


@pytest.fixture(scope="module")
def fits(traces, fit0):
    return [fit0] + [fit_domains(tr) for tr in traces[1:]]


def _within(values, truth):
    x = np.asarray(values, dtype=float)
    se = x.std(ddof=1) / math.sqrt(len(x))
    err = abs(x.mean() - truth)
    return err <= 4 * se, (x.mean(), se, truth)


@pytest.mark.slow  # 8 traces of 4000 hours; the default suite checks one fit (next test)
@pytest.mark.parametrize("field,truth", [
    ("availability", 0.9), ("domain_outage", 0.05), ("domain_mean_downtime", 3600.0),
    ("mean_downtime", 1800.0), ("domain_mean_uptime", 3600.0 * 0.95 / 0.05),
    ("mean_uptime", 1800.0 * 0.9 / 0.1),
])
def test_fit_recovers_the_domain_models_parameters(fits, field, truth):
    """Each parameter: mean of 8 fits within 4 standard errors of the truth."""
    ok, info = _within([getattr(f, field) for f in fits], truth)
    assert ok, info


def test_one_fit_recovers_the_domain_size_and_plugs_into_cluster_config(fit0):
    """D = 8 in replication 0, its parameters within the stated tolerance of one fit, and the
    fit is a valid ClusterConfig of 4 domains."""
    assert fit0.domain_size == 8
    cfg = ClusterConfig(**fit0.cluster_config(horizon=1000.0))
    assert (cfg.workers, cfg.domains) == (32, 4)
    # stated tolerance of one fit at this horizon (about 4 sd across replications)
    f = fit0
    assert abs(f.availability - 0.9) < 0.015 and abs(f.domain_outage - 0.05) < 0.017
    assert abs(f.domain_mean_downtime / 3600.0 - 1) < 0.3
    assert abs(f.mean_downtime / 1800.0 - 1) < 0.15


@pytest.mark.slow  # 8 traces of 4000 hours; the default suite checks D = 8 in one (above)
def test_fit_recovers_the_domain_size_in_every_replication(fits):
    """D = 8 in every one of the 8 replications."""
    assert {f.domain_size for f in fits} == {8}


def test_wrong_domain_sizes_are_rejected_by_the_likelihood(trace0, fit0):
    """At the generated trace, D = 4 or 16 lose to D = 8 by far more than chance (log-lik)."""
    tr, f = trace0, fit0
    _, sizes = preemption_events(tr)
    k = sizes[sizes >= 2]
    r = rise_sizes(tr)
    k = np.concatenate([k, r[r >= 2]])
    for D in (4, 16):
        if D < k.max():
            continue  # impossible sizes: rejected outright
        best = max(size_loglik(k, D, a) for a in np.linspace(0.5, 0.999, 500))
        assert f.size_loglik - best > 20, D
    assert k.max() > 4  # so D = 4 is impossible


@pytest.mark.slow  # D = 8 recovered and D = 4, 16 rejected by the likelihood stay in default
def test_a_smaller_domain_model_is_told_apart():
    """A trace of 8 domains of 4 fits D = 4 (the estimator follows the model)."""
    cfg = ClusterConfig(workers=32, domains=8, availability=0.9, mean_downtime=1800.0,
                        domain_outage=0.05, domain_mean_downtime=3600.0, horizon=1.44e7)
    f = fit_domains(cluster_trace(cfg, streams=Streams(41).replication(0)))
    assert f.domain_size == 4 and f.domains == 8


def _independent_trace():
    cfg = ClusterConfig(workers=32, domains=4, availability=0.9, mean_downtime=1800.0,
                        domain_outage=0.0, horizon=2e6)
    return cluster_trace(cfg, streams=Streams(42).replication(0))


def test_independent_outages_have_no_domain_structure():
    """Without domains no event removes two or more: no domain fit (not a made-up one)."""
    tr = _independent_trace()
    assert trace_stats(tr)["batch_fraction"] == 0
    assert fit_domains(tr) is None


@pytest.mark.slow  # fit_trace's duration fits take ~2 s; fit_domains' None stays in default
def test_independent_outages_fit_trace_reports_no_domains():
    """fit_trace of the same trace reports the missing hierarchy as an error entry."""
    assert "error" in fit_trace(_independent_trace())["domains"]


@pytest.mark.slow  # 8 traces; one fit's a and rho (above) and the shipped fit's a (1 - rho) stay
def test_cluster_trace_availability_is_the_models(traces):
    """The recorded count trace's availability is a (1 - rho) within 4 standard errors."""
    vals = [trace_stats(tr)["availability"] for tr in traces]
    ok, info = _within(vals, 0.9 * 0.95)
    assert ok, info


def test_shipped_trace_fit_is_reported_in_json(capsys):
    """dtsim trace fit --json: 'domains' with cluster_config, a (1 - rho) the trace's availability;
    the best law of the down times is named (as test_traces.py::test_cli_trace_fit checks)."""
    assert main(["trace", "fit", "aws-p3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["down"]["best"] in ("exponential", "weibull", "lognormal")
    d = out["domains"]
    A = trace_stats(load_trace("aws-p3"))["availability"]
    assert d["availability"] * (1 - d["domain_outage"]) == pytest.approx(A, rel=1e-9)
    assert set(d["cluster_config"]) >= {"workers", "domains", "availability", "domain_outage"}


@pytest.mark.slow  # two more fits of ~2 s each; the --json form above stays in default
def test_shipped_trace_fit_is_reported_in_text(capsys):
    """dtsim trace fit (text): one line for the hierarchy, or 'none' for a trace without one."""
    assert main(["trace", "fit", "aws-p3"]) == 0
    assert "domain hierarchy (the failure model's domains)" in capsys.readouterr().out
    assert main(["trace", "fit", "aws-p2-19h"]) == 0
    assert "domain hierarchy: none" in capsys.readouterr().out
