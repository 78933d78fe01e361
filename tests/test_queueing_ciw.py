"""Cross-check of the queueing pipeline against Ciw, an independent queueing simulator (slow).

Ciw (https://ciw.readthedocs.io) simulates open queueing networks; a tandem of M/M/c
stations is one of its networks. Both simulators are run on the same tandems and their
per-station mean waits in queue, busy fractions and mean sojourns are compared, each with
its standard error across independent replications, and both against the exact Erlang C
values (Jackson's theorem).

What Ciw models differently, and how the comparison accounts for it:

- Ciw runs until a time horizon and reports the customers that completed by then; dtsim runs
  a fixed number of microbatches to the end. Both start empty, so both means carry the same
  small start-up bias (waits are shorter in an empty system); Ciw's horizon is set to the
  time dtsim's arrivals take (microbatches / rate), and both are judged against each other
  first, then against the exact stationary value with the same tolerance.
- Ciw has no failures, skipping or transfer time between stations; dtsim's runs here have
  none either (availability 1, latency 0).
- Ciw's busy fraction (``server_utilisation``) is over each station's servers up to the
  horizon; dtsim's ``utilisation_stage{j}`` is over the run's simulated time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim import analytic
from sim.pipeline import PipelineConfig, queueing_model
from sim.rng import Streams

pytestmark = pytest.mark.slow

ciw = pytest.importorskip("ciw")

#: Tandems: (servers per station, arrival rate, mean pass time per station).
TANDEMS = [
    ((1, 1), 0.7, (1.0, 1.0)),
    ((1, 2, 3), 0.8, (1.0, 2.0, 3.0)),
    ((2, 1, 3), 1.2, (1.5, 0.6, 2.0)),
]
MICROBATCHES = 4000
REPLICATIONS = 12


def _mean_se(x):
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def _ciw_run(servers, rate, stage_time, seed):
    """One Ciw replication: per-station mean wait in queue and busy fraction, mean sojourn."""
    L = len(servers)
    routing = [[1.0 if k == j + 1 else 0.0 for k in range(L)] for j in range(L)]
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=rate)] + [None] * (L - 1),
        service_distributions=[ciw.dists.Exponential(rate=1.0 / t) for t in stage_time],
        number_of_servers=list(servers), routing=routing)
    ciw.seed(seed)
    q = ciw.Simulation(net)
    q.simulate_until_max_time(MICROBATCHES / rate)
    recs = q.get_all_records()
    waits = [float(np.mean([r.waiting_time for r in recs if r.node == j + 1]))
             for j in range(L)]
    busy = [float(q.transitive_nodes[j].server_utilisation) for j in range(L)]
    # sojourn of the customers that left the last station: their records at every station
    by_id: dict[int, float] = {}
    done = set()
    for r in recs:
        by_id[r.id_number] = by_id.get(r.id_number, 0.0) + r.waiting_time + r.service_time
        if r.node == L:
            done.add(r.id_number)
    sojourn = float(np.mean([by_id[i] for i in done]))
    return waits, busy, sojourn


@pytest.mark.parametrize("servers, rate, stage_time", TANDEMS)
def test_per_station_waits_busy_fractions_and_sojourn_agree_with_ciw(servers, rate, stage_time):
    L = len(servers)
    cfg = PipelineConfig(stages=L, replicas=servers, queueing=True, arrival="poisson", rate=rate,
                         stage_time=stage_time, stage_time_distribution="exponential",
                         availability=1.0, microbatches=MICROBATCHES)
    ours = [queueing_model(cfg, Streams(77).replication(k)) for k in range(REPLICATIONS)]
    theirs = [_ciw_run(servers, rate, stage_time, 1000 + k) for k in range(REPLICATIONS)]
    mus = [1.0 / t for t in stage_time]
    exact_w = analytic.tandem_waits(list(servers), rate, mus)
    for j in range(L):
        w, w_se = _mean_se([r[f"wait_stage{j}"] for r in ours])
        cw, cw_se = _mean_se([t[0][j] for t in theirs])
        tol = 4 * math.hypot(w_se, cw_se)
        assert abs(w - cw) < tol, (j, "wait", w, w_se, cw, cw_se)
        assert abs(w - exact_w[j]) < 4 * w_se, (j, w, w_se, exact_w[j])
        u, u_se = _mean_se([r[f"utilisation_stage{j}"] for r in ours])
        cu, cu_se = _mean_se([t[1][j] for t in theirs])
        assert abs(u - cu) < 4 * math.hypot(u_se, cu_se) + 0.01 * cu, (j, "busy", u, cu)
        # a wrong model fails: one server fewer at a station with more than one (if stable)
        c = servers[j]
        if c > 1 and rate < (c - 1) * mus[j]:
            wrong = analytic.tandem_waits([c - 1], rate, [mus[j]])[0]
            assert abs(cw - wrong) > tol and abs(w - wrong) > tol, (j, w, cw, wrong)
    s, s_se = _mean_se([r["latency_mean"] for r in ours])
    cs, cs_se = _mean_se([t[2] for t in theirs])
    assert abs(s - cs) < 4 * math.hypot(s_se, cs_se), (s, s_se, cs, cs_se)
    exact_s = analytic.tandem_sojourn(list(servers), rate, mus)
    assert abs(s - exact_s) < 4 * s_se, (s, s_se, exact_s)
