"""Tests of the failure model: renewal processes, domains, accounting, traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from sim.errors import ConfigError
from sim.failures import (
    ClusterConfig,
    Deterministic,
    Exponential,
    FailureModel,
    GroupMonitor,
    LogNormal,
    Transition,
    Weibull,
    failures_model,
    make_distribution,
    read_trace,
    up_down_means,
)
from sim.results import mean_ci
from sim.rng import Streams
from sim.runner import replicate


def _second_moment(d) -> float:
    if isinstance(d, Exponential):
        return 2 * d.mean**2
    if isinstance(d, Weibull):
        return d.scale**2 * math.gamma(1 + 2 / d.shape)
    if isinstance(d, LogNormal):
        return math.exp(2 * d.mu + 2 * d.sigma**2)
    return d.mean**2


# Exponential and Deterministic in default; the others slow (200000 scalar draws each): their
# sample means are checked by test_unit_mean_block_draws and their residual (equilibrium) laws
# by test_stationary_from_time_zero[weibull/lognormal], in the default suite.
@pytest.mark.parametrize(
    "dist", [Exponential(2.0), pytest.param(Weibull(2.0, 0.6), marks=pytest.mark.slow),
             pytest.param(Weibull(2.0, 2.5), marks=pytest.mark.slow),
             pytest.param(LogNormal(2.0, 1.2), marks=pytest.mark.slow), Deterministic(2.0)]
)
def test_sample_and_residual_means(dist):
    """Samples have the asked mean; residual lives have mean E[X^2] / (2 E[X])."""
    rng = np.random.default_rng(7)
    n = 200_000
    x = np.array([dist.sample(rng) for _ in range(n)])
    y = np.array([dist.residual(rng) for _ in range(n)])
    assert abs(x.mean() - dist.mean) <= 4 * x.std() / math.sqrt(n) + 1e-12
    target = _second_moment(dist) / (2 * dist.mean)
    assert abs(y.mean() - target) <= 4 * y.std() / math.sqrt(n)


def test_up_down_means():
    """Mean up time is a d / (1 - a); the extremes never fail or never recover."""
    assert up_down_means(0.9, 2.0) == pytest.approx((18.0, 2.0))
    assert up_down_means(1.0, 2.0) == (math.inf, 2.0)
    assert up_down_means(0.0, 2.0) == (2.0, math.inf)


# deterministic in default (the law with a phase); the others slow: each law's means are checked
# by test_sample_and_residual_means / test_unit_mean_block_draws and its start by
# test_stationary_from_time_zero, in the default suite
@pytest.mark.parametrize("distribution", [pytest.param("exponential", marks=pytest.mark.slow),
                                          pytest.param("weibull", marks=pytest.mark.slow),
                                          pytest.param("lognormal", marks=pytest.mark.slow),
                                          "deterministic"])
def test_worker_and_domain_availability_match_targets(distribution):
    """Measured availability of workers and domains matches a and 1 - rho (4 SE)."""
    cfg = ClusterConfig(workers=8, domains=4, availability=0.7, mean_downtime=1.0,
                        domain_outage=0.1, domain_mean_downtime=2.0,
                        distribution=distribution, horizon=4000.0)
    recs = replicate(failures_model, cfg, replications=12, seed=11)
    for key, target in [("worker_availability", 0.7), ("domain_unavailability", 0.1),
                        ("effective_availability", 0.7 * 0.9)]:
        e = mean_ci(r[key] for r in recs)
        assert abs(e.mean - target) <= 4 * e.se + 1e-9, (key, e, target)
        assert e.se < 0.01


# exponential slow: memoryless, its residual life is its own law (test_sample_and_residual_means
# [dist0] in default); the three laws whose residual law differs stay in default
@pytest.mark.parametrize("distribution", [pytest.param("exponential", marks=pytest.mark.slow),
                                          "weibull", "lognormal", "deterministic"])
def test_stationary_from_time_zero(distribution):
    """Shortly after 0, and after the first renewals, the up fraction over many workers is a."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(3))
    n = 6000
    ws = [fm.add_worker(f"w{i}", availability=0.6, mean_downtime=5.0,
                        distribution=distribution, shape=0.5 if distribution == "weibull" else None)
          for i in range(n)]
    fm.start()
    # t = 6 lies between the mean down time (5) and the mean up time (7.5): residual lives
    # drawn from the plain law instead of the equilibrium law would show there.
    for t in (0.5, 6.0):
        env.run(until=t)
        frac = np.mean([w.up for w in ws])
        assert abs(frac - 0.6) <= 4 * math.sqrt(0.6 * 0.4 / n), (t, frac)


def test_domain_outage_downs_all_workers_at_once():
    """A domain outage downs every worker under it at the same instant; recovery needs both."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(5))
    region = fm.add_domain("region", unavailability=0.2, mean_downtime=3.0)
    rack = fm.add_domain("rack", region, unavailability=0.2, mean_downtime=2.0)
    ws = [fm.add_worker(f"w{i}", rack, availability=0.7, mean_downtime=1.0) for i in range(4)]
    seen = {"down": 0, "up": 0}
    times: dict[str, list[tuple[float, bool]]] = {w.name: [] for w in ws}
    for w in ws:
        w.on_change(lambda c, up, t: times[c.name].append((t, up)))

    def check_domain(comp, up, t):
        for w in ws:
            assert w.up == (w.own_up and rack.up and region.up)
            if not up:
                assert not w.up
        seen["up" if up else "down"] += 1
        if not up:  # every worker that was up went down at exactly this instant
            for w in ws:
                if w.own_up:
                    assert times[w.name][-1] == (t, False)

    rack.on_change(check_domain)
    fm.start()
    env.run(until=2000.0)
    assert seen["down"] > 50 and seen["up"] > 50
    # consistency of accounting: effective availability <= own, and <= the rack's
    for w in ws:
        assert w.availability() <= w.own_availability() + 1e-12
        assert w.availability() <= rack.availability() + 1e-12


def test_next_transition_event_carries_cause():
    """next_transition() fires at the next effective change with a Transition."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(9))
    w = fm.add_worker("w", availability=0.5, mean_downtime=1.0)
    got = []

    def watcher(env):
        for _ in range(5):
            cause = yield w.next_transition()
            got.append(cause)

    fm.start()
    env.process(watcher(env))
    env.run(until=100.0)
    assert len(got) == 5
    assert all(isinstance(c, Transition) and c.component == "w" for c in got)
    assert [c.up for c in got] == [got[0].up, not got[0].up] * 2 + [got[0].up]
    assert all(b.time > a.time for a, b in zip(got, got[1:], strict=False))


# the default point runs 6 replications (12 before): z = -1.86, the independent law 26 se
# away (12: z = -1.42, 31 se away); the slow point keeps 12
@pytest.mark.parametrize("a,rho,r,reps", [pytest.param(0.6, 0.05, 3, 12, marks=pytest.mark.slow),
                                          (0.8, 0.02, 2, 6)])
def test_joint_outage_of_a_domain(a, rho, r, reps):
    """All r workers of a domain are down together rho + (1-rho)(1-a)^r of the time."""
    cfg = ClusterConfig(workers=r * 3, domains=3, availability=a, mean_downtime=1.0,
                        domain_outage=rho, domain_mean_downtime=2.0, horizon=10_000.0)
    recs = replicate(failures_model, cfg, replications=reps, seed=2)
    e = mean_ci(r_["joint_outage"] for r_ in recs)
    target = rho + (1 - rho) * (1 - a) ** r
    assert abs(e.mean - target) <= 4 * e.se
    independent = (1 - a * (1 - rho)) ** r  # what ignoring the shared domain would predict
    assert abs(e.mean - independent) > 4 * e.se


def test_group_monitor_fractions_sum_to_one():
    """The time-with-k-down fractions form a distribution matching the binomial when independent."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(1))
    ws = [fm.add_worker(f"w{i}", availability=0.5, mean_downtime=1.0) for i in range(3)]
    g = GroupMonitor(ws)
    fm.start()
    env.run(until=20_000.0)
    f = g.fractions()
    assert f.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(f, [1 / 8, 3 / 8, 3 / 8, 1 / 8], atol=0.02)
    assert g.outages > 100


def test_same_seed_bit_identical_serial_and_pool():
    """The same seed gives identical records on serial and process-pool execution."""
    cfg = ClusterConfig(workers=6, domains=2, horizon=500.0, distribution="weibull")
    a = replicate(failures_model, cfg, replications=4, seed=123)
    b = replicate(failures_model, cfg, replications=4, seed=123, executor="local", workers=2)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_time"} for r in rs]  # noqa: E731
    assert strip(a) == strip(b)
    c = replicate(failures_model, cfg, replications=4, seed=124)
    assert strip(a) != strip(c)


def _transition_times(extra: bool) -> list[tuple[float, bool]]:
    env = simpy.Environment()
    fm = FailureModel(env, Streams(42))
    d = fm.add_domain("d0", unavailability=0.1, mean_downtime=2.0)
    if extra:
        d2 = fm.add_domain("d_extra", unavailability=0.3)
        fm.add_worker("w_extra", d2, availability=0.4)
    w = fm.add_worker("w0", d, availability=0.8, mean_downtime=1.0)
    out: list[tuple[float, bool]] = []
    w.on_change(lambda c, up, t: out.append((t, up)))
    fm.start()
    env.run(until=300.0)
    return out


def test_adding_a_component_does_not_change_other_draws():
    """A new domain and worker leave an existing worker's transitions bit-identical."""
    base = _transition_times(False)
    assert len(base) > 20
    assert _transition_times(True) == base


def test_trace_replay(tmp_path):
    """A trace replays its down intervals exactly; the worker is up elsewhere."""
    p = tmp_path / "trace.csv"
    p.write_text("worker,start,end,state\nA,0,2,down\nA,5,6,down\nB,1,3,down\nB,3,4,up\n")
    cfg = ClusterConfig(workers=2, domains=1, domain_outage=0.0, horizon=10.0, trace=str(p))
    rec = failures_model(cfg, Streams(0))
    # A down 3 of 10, B down 2 of 10
    assert rec["worker_availability"] == pytest.approx(((10 - 3) + (10 - 2)) / 20)


@pytest.mark.parametrize(
    "content,message",
    [
        ("worker,begin,end\nA,0,1\n", "'trace' must be a CSV file with columns worker,start,end: "),
        ("worker,start,end\nA,0,x\n", "'trace' must be a CSV file of numeric start,end: "),
        ("worker,start,end\nA,3,1\n", "'trace' must be a CSV file with 0 <= start < end: "),
        ("worker,start,end\nA,0,3\nA,2,4\n", "'trace' must be a CSV file without overlapping intervals per worker: "),
    ],
)
def test_malformed_trace_messages(tmp_path, content, message):
    """Malformed traces raise one ConfigError line naming 'trace'."""
    p = tmp_path / "t.csv"
    p.write_text(content)
    with pytest.raises(ConfigError) as ei:
        read_trace(p)
    assert str(ei.value).startswith(message)
    assert "\n" not in str(ei.value)


def test_missing_trace_message(tmp_path):
    """An unreadable trace names the path and the reason."""
    with pytest.raises(ConfigError, match=r"^'trace' must be a readable CSV file: '.*nope.csv \(No such file or directory\)'$"):
        read_trace(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"availability": 1.5}, "'availability' must be in [0, 1]: 1.5"),
        ({"domain_outage": -0.1}, "'domain_outage' must be in [0, 1]: -0.1"),
        ({"mean_downtime": 0.0}, "'mean_downtime' must be > 0: 0.0"),
        ({"workers": 0}, "'workers' must be an integer >= 1: 0"),
        ({"horizon": -5.0}, "'horizon' must be > 0: -5.0"),
        ({"distribution": "gamma"},
         "'distribution' must be one of exponential, weibull, lognormal, deterministic, pareto: "
         "'gamma'"),
    ],
)
def test_config_errors(kwargs, message):
    """Bad cluster configs raise at construction with the exact one-line message."""
    with pytest.raises(ConfigError) as ei:
        ClusterConfig(**kwargs)
    assert str(ei.value) == message


def test_make_distribution_shapes():
    """make_distribution maps names and shape to the right law."""
    assert make_distribution("weibull", 2.0, 1.5) == Weibull(2.0, 1.5)
    assert make_distribution("lognormal", 2.0) == LogNormal(2.0, 1.0)
    assert make_distribution("deterministic", 3.0) == Deterministic(3.0)


@pytest.mark.parametrize("kind, shape", [("exponential", None), ("weibull", 0.7), ("weibull", 1.5),
                                         ("lognormal", 1.0), ("lognormal", 2.0)])
def test_unit_mean_block_draws(kind, shape):
    """The laws at mean 1, drawn in blocks, are the pipeline's compute-time draws (bit for bit) with mean 1."""
    n = 200_000
    got = make_distribution(kind, 1.0, shape).sample(np.random.default_rng(5), n)
    rng = np.random.default_rng(5)
    if kind == "exponential":
        want = rng.exponential(1.0, n)
    elif kind == "weibull":
        want = rng.weibull(shape, n) / math.gamma(1.0 + 1.0 / shape)
    else:
        want = rng.lognormal(-shape * shape / 2.0, shape, n)
    assert np.array_equal(got, want)
    assert abs(got.mean() - 1.0) <= 4 * got.std() / math.sqrt(n)
    assert abs(got.mean() - 1.2) > 4 * got.std() / math.sqrt(n)


def test_cluster_transitions_budget_matches_the_simulated_count():
    """ClusterConfig.expected_transitions: the workers' part, 2 x (1 - a) / downtime per worker
    per unit time, equals the measured worker_transitions within 4 standard errors (and its
    half, one transition per cycle, is rejected); a horizon or downtime whose run would simulate
    more than MAX_TRANSITIONS is refused naming it, before any work."""
    from sim.failures import MAX_TRANSITIONS, ClusterConfig, failures_model

    cfg = ClusterConfig(workers=8, domains=2, availability=0.7, mean_downtime=0.5,
                        domain_outage=0.05, domain_mean_downtime=2.0, horizon=300.0)
    n, name, _ = cfg.expected_transitions()
    assert n == pytest.approx(2 * (8 * 0.3 / 0.5 + 2 * 0.05 / 2.0) * 300.0, rel=1e-12)
    assert name == "mean_downtime"
    per_worker = [failures_model(cfg, Streams(5).replication(k))["worker_transitions"]
                  for k in range(16)]
    m, se = np.mean(per_worker), np.std(per_worker, ddof=1) / np.sqrt(len(per_worker))
    assert abs(m - 2 * 0.3 / 0.5) < 4 * se
    assert abs(m - 0.3 / 0.5) > 4 * se
    with pytest.raises(ConfigError, match="'horizon' must be small enough that the simulation"):
        ClusterConfig(horizon=1e9)
    with pytest.raises(ConfigError, match="'mean_downtime' must be large enough"):
        ClusterConfig(mean_downtime=1e-6)
    with pytest.raises(ConfigError, match="'domain_mean_downtime' must be large enough"):
        ClusterConfig(availability=1.0, domain_outage=0.2, domain_mean_downtime=1e-6)
    big = ClusterConfig(horizon=1e7)  # 3.2e7: within the budget
    assert big.expected_transitions()[0] == pytest.approx(3.216e7) and 3.216e7 < MAX_TRANSITIONS
    assert ClusterConfig(availability=1.0, domain_outage=0.0, horizon=1e12).horizon == 1e12
