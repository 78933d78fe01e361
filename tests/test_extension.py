"""A failure law and a topology family defined outside the package run through the public API."""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pytest
import simpy

import topologies
from sim import analytic
from sim.engines import predictions
from sim.failures import (
    ClusterConfig,
    FailureModel,
    failures_model,
    register_distribution,
    unregister_distribution,
)
from sim.pipeline import PipelineConfig, des_pipeline_model
from sim.results import summarize
from sim.rng import Streams
from sim.runner import replicate
from topologies.placement import place

# ----------------------------------------------------------------------------- a new failure law


@dataclass(frozen=True)
class HalfUniform:
    """Durations uniform on ``[mean/2, 3 mean/2]`` (no outage shorter than half the mean)."""

    mean: float

    @property
    def bounds(self) -> tuple[float, float]:
        return 0.5 * self.mean, 1.5 * self.mean

    def sample(self, rng: np.random.Generator, size: int | None = None):
        lo, hi = self.bounds
        return float(rng.uniform(lo, hi)) if size is None else rng.uniform(lo, hi, size)

    def residual(self, rng: np.random.Generator) -> float:
        # length-biased uniform on [lo, hi] has CDF (x^2 - lo^2) / (hi^2 - lo^2)
        lo, hi = self.bounds
        x = math.sqrt(lo * lo + rng.random() * (hi * hi - lo * lo))
        return float(rng.random() * x)


@pytest.fixture
def half_uniform():
    """The law registered under "half_uniform" for one test, then removed."""
    register_distribution("half_uniform", lambda mean, shape: HalfUniform(mean))
    yield "half_uniform"
    unregister_distribution("half_uniform")


def _downtimes(distribution: str) -> np.ndarray:
    """Full outage lengths of one worker (a = 0.5, mean downtime 2) over 4000 time units."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(3))
    w = fm.add_worker("w", availability=0.5, mean_downtime=2.0, distribution=distribution)
    went_down: list[float] = []
    lengths: list[float] = []

    def changed(comp, up, now):
        if not up:
            went_down.append(now)
        elif went_down:
            lengths.append(now - went_down[-1])

    w.on_change(changed)
    fm.start()
    env.run(until=4000.0)
    return np.array(lengths)


def test_new_law_shapes_the_outages(half_uniform):
    """Every outage of the user's law lies in [1, 3] (mean 2); the exponential law's do not."""
    mine = _downtimes(half_uniform)
    assert mine.size > 500
    assert mine.min() >= 1.0 and mine.max() <= 3.0
    assert mine.mean() == pytest.approx(2.0, abs=4 * (2 / math.sqrt(12)) / math.sqrt(mine.size))
    expo = _downtimes("exponential")
    assert (expo < 1.0).mean() > 0.3  # 1 - e^{-1/2} = 0.39: the wrong law is visibly different


def test_new_law_availability_matches_its_means(half_uniform):
    """failures_model with the user's law: availability a and 2 / (up + down) transitions per time."""
    cfg = ClusterConfig(workers=8, domains=2, availability=0.8, mean_downtime=2.0,
                        domain_outage=0.0, distribution=half_uniform, horizon=2000.0)
    recs = replicate(failures_model, cfg, replications=12, seed=21)
    est = summarize(recs, ["worker_availability", "worker_transitions"])
    up, down = 0.8 * 2.0 / 0.2, 2.0
    a = est["worker_availability"]
    assert abs(a.mean - 0.8) <= 4 * a.se
    t = est["worker_transitions"]
    assert abs(t.mean - 2.0 / (up + down)) <= 4 * t.se
    assert abs(t.mean - 2.0 / (2 * up + down)) > 4 * t.se  # a law with the wrong up mean fails


def _new_law_drop_rate(law: str, replications: int):
    """The pipeline DES's drop-rate estimate with the user's law for failures, and the exact value."""
    cfg = PipelineConfig(stages=6, replicas=2, skip_budget=0, availability=0.8, domain_outage=0.02,
                         failure_distribution=law, mean_downtime=0.5,
                         domain_downtime=0.5, microbatches=3000)
    recs = replicate(des_pipeline_model, cfg, replications=replications, seed=22)
    return summarize(recs, ["drop_rate"])["drop_rate"], analytic.drop_probability(6, 2, 0, 0.8, 0.02)


@pytest.mark.slow  # 10 replications (~5 s); the test below runs the first 5 of them
def test_new_law_drop_rate_in_the_pipeline_des_at_ten_replications(half_uniform):
    """The pipeline DES with the user's failure law: drop rate within 4 SE of the exact value."""
    est, exact = _new_law_drop_rate(half_uniform, 10)
    assert abs(est.mean - exact) <= 4 * est.se


def test_new_law_runs_in_the_pipeline_des(half_uniform):
    """The pipeline DES accepts the user's law for failures and compute times by name.

    The drop rate from 5 replications: z = -0.81 against the exact value, and the law without
    the domain outages 17.9 se away (10 replications, the slow test above: z = -2.10, 34.7 se).
    """
    est, exact = _new_law_drop_rate(half_uniform, 5)
    assert abs(est.mean - exact) <= 4 * est.se
    assert abs(est.mean - analytic.drop_probability(6, 2, 0, 0.8, 0.0)) > 4 * est.se
    timed = PipelineConfig(stages=3, replicas=1, availability=1.0, stage_time=2.0,
                           stage_time_distribution=half_uniform, microbatches=400)
    lat = summarize(replicate(des_pipeline_model, timed, replications=4, seed=23),
                    ["latency_mean", "latency_p99"])
    assert lat["latency_mean"].mean == pytest.approx(6.0, rel=0.05)
    assert lat["latency_p99"].mean <= 3 * 3.0  # three stages of at most 1.5 x 2


# ----------------------------------------------------------------------------- a new topology family


def pods(pods: int = 2, hosts: int = 4, outage: float = 0.05) -> nx.Graph:
    """``pods`` pods of ``hosts`` fully linked hosts; each pod is one failure domain."""
    G = nx.complete_graph(pods * hosts)
    for h in G.nodes:
        G.nodes[h]["domain"] = (f"pod{h // hosts}",)
    nx.set_edge_attributes(G, 0.0, "latency")
    G.graph["domains"] = {f"pod{p}": {"unavailability": outage, "level": "pod", "parent": None}
                          for p in range(pods)}
    G.graph["levels"] = ("pod",)
    return G


def test_new_topology_places_correlated_stages():
    """A user builder by file:function spec: packed stages share pods, the exact law is not binomial."""
    layout = topologies.build(f"{__file__}:pods:pods=2,hosts=4,outage=0.05")
    assert layout.graph["family"] == "callable" and layout.number_of_nodes() == 8
    pl = place(layout, 4, 2, "packed")
    assert pl.shared_domains() == {"pod0": [0, 1], "pod1": [2, 3]}
    cfg = PipelineConfig(stages=4, placement=pl, skip_budget=1, availability=0.8,
                         mean_downtime=0.5, domain_downtime=0.5, microbatches=3000)
    exact = predictions("pipeline", cfg, ["drop_rate"])["drop_rate"]
    assert exact["reference"] == "placement_exact"
    q = 0.05 + 0.95 * 0.2 ** 2
    independent = 1 - (1 - q) ** 4 - 4 * q * (1 - q) ** 3
    # 6 replications (10 before): z = 0.33, the independent law 15 se away (10: z = -0.21, 21 se)
    est = summarize(replicate(des_pipeline_model, cfg, replications=6, seed=24),
                    ["drop_rate"])["drop_rate"]
    assert abs(est.mean - exact["value"]) <= 4 * est.se
    assert abs(est.mean - independent) > 4 * est.se  # one-domain-per-stage law rejected


def test_unregistered_law_is_refused(half_uniform):
    """A law's name is refused once it is removed; built-in laws cannot be removed."""
    unregister_distribution(half_uniform)
    with pytest.raises(ValueError) as info:
        ClusterConfig(distribution=half_uniform)
    assert str(info.value) == ("'distribution' must be one of exponential, weibull, lognormal, "
                               "deterministic, pareto: 'half_uniform'")
    register_distribution(half_uniform, lambda mean, shape: HalfUniform(mean))
    with pytest.raises(ValueError):
        unregister_distribution("weibull")
