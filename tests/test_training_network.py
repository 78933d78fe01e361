"""The training system over a network (TrainingConfig.network): transfers as flows, contention."""

from __future__ import annotations

import math

import pytest

from sim.analytic import network as exact
from sim.analytic import pipeline_step_time
from sim.errors import ConfigError
from sim.network import LinkValue, NetworkValue, NodeValue
from sim.rng import Streams
from sim.training import TrainingConfig
from sim.training.compiled import compiled_obstacle
from sim.training.system import training_model

REL = 1e-9


def star(hosts: list[str], *, lat: float = 0.0, nic: float | None = None,
         bw: float = math.inf) -> NetworkValue:
    """Hosts on one switch 'sw' (route latency 2 lat); NICs of ``nic`` each way."""
    links = tuple(LinkValue(h, "sw", bandwidth=bw, latency=lat) for h in hosts)
    nodes = tuple(NodeValue(h, egress=nic, ingress=nic) for h in hosts) if nic else ()
    return NetworkValue(links, nodes)


def grid(hosts: list[str], L: int, r: int) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(hosts[j * r:(j + 1) * r]) for j in range(L))


def hosts(n: int) -> list[str]:
    return [f"h{i}" for i in range(n)]


@pytest.mark.parametrize("t", [1, 4])
def test_step_is_the_schedule_plus_the_ring_allreduce_with_ranks_sharing_a_nic(t):
    """GPipe step = (m/r+L-1)(tf+tb) + 2(L-1)l + ring all-reduce; t ranks share each NIC."""
    L, r, m, B, lat, P = 2, 4, 8, 5.0, 0.05, 40.0
    h = hosts(L * r)
    cfg = TrainingConfig(stages=L, replicas=r, microbatches=m, steps=2, schedule="gpipe",
                         routing="round-robin", param_size=P,
                         network=star(h, lat=lat / 2, nic=B), network_nodes=grid(h, L, r),
                         tensor_parallel=t)
    got = training_model(cfg, Streams(0))["step_time_mean"]
    sched = pipeline_step_time(L, m // r, 1.0, 2.0) + 2 * (L - 1) * lat
    want = sched + exact.ring_allreduce_time(r, P / t, B, lat, ranks_per_nic=t)
    assert abs(got - want) <= REL * want
    free = training_model(TrainingConfig(**{**cfg.__dict__, "contention": False}),
                          Streams(0))["step_time_mean"]
    no_share = sched + exact.ring_allreduce_time(r, P / t, B, lat)  # a NIC per rank
    assert abs(free - no_share) <= REL * no_share
    if t > 1:
        assert got > free * 1.5  # the no-sharing law is far off


def test_buckets_add_their_latencies():
    """Buckets of b: 2(k-1)(n_b l + S/(k B)) for the all-reduce part of the step."""
    L, r, m, B, lat, P = 1, 3, 3, 4.0, 0.1, 30.0
    h = hosts(r)
    base = dict(stages=L, replicas=r, microbatches=m, steps=1, schedule="gpipe",
                routing="round-robin", param_size=P, network=star(h, lat=lat / 2, nic=B),
                network_nodes=grid(h, L, r))
    one = training_model(TrainingConfig(**base), Streams(0))["step_time_mean"]
    four = training_model(TrainingConfig(**base, bucket_size=P / 4), Streams(0))["step_time_mean"]
    ring1 = exact.ring_allreduce_time(r, P, B, lat)
    ring4 = exact.ring_allreduce_time(r, P, B, lat, buckets=4)
    assert abs((four - one) - (ring4 - ring1)) <= 1e-9 * four


def test_activation_transfers_share_the_senders_nic():
    """Two stages of one replica each: a transfer of A over a NIC of B costs A/B per hop."""
    L, m, A, B = 2, 1, 6.0, 3.0
    h = hosts(2)
    cfg = TrainingConfig(stages=L, replicas=1, microbatches=m, steps=1, schedule="gpipe",
                         activation_size=A, network=star(h, nic=B), network_nodes=grid(h, L, 1),
                         tensor_parallel=2)
    got = training_model(cfg, Streams(0))["step_time_mean"]
    # forward 1, transfer A/B, forward 1, backward 2, transfer A/B, backward 2
    assert abs(got - (6.0 + 2 * A / B)) <= REL * got


def test_no_finite_bandwidth_gives_the_same_numbers_with_contention_on_and_off():
    """A network of infinite links: contention on equals contention off, bit for bit."""
    L, r = 3, 2
    h = hosts(L * r)
    base = dict(stages=L, replicas=r, microbatches=6, steps=3, schedule="1f1b",
                routing="least-loaded", activation_size=5.0, param_size=9.0,
                network=star(h, lat=0.1), network_nodes=grid(h, L, r), availability=0.8,
                mean_downtime=3.0, pass_time_distribution="exponential")
    on = training_model(TrainingConfig(**base), Streams(4))
    off = training_model(TrainingConfig(**base, contention=False), Streams(4))
    assert on == off


@pytest.mark.parametrize("m", [1, 2, 4, 7])
def test_overlap_and_blocking_transfers_two_stage_gpipe(m):
    """L = 2 GPipe, a transfer d < t_f: overlap (m+1)(tf+tb) + 2d; blocking (m+1)(tf+tb) + 2md.

    Overlap: only the first forward and the last backward wait for a transfer.
    Blocking: every microbatch holds both stages for d, each way.
    """
    h = hosts(2)
    d = 1.0 / 2.0  # activation 1 over a NIC of 2
    base = dict(stages=2, replicas=1, microbatches=m, steps=1, schedule="gpipe",
                activation_size=1.0, network=star(h, nic=2.0), network_nodes=grid(h, 2, 1))
    over = training_model(TrainingConfig(**base), Streams(0))["step_time_mean"]
    block = training_model(TrainingConfig(**base, p2p="blocking"), Streams(0))["step_time_mean"]
    assert abs(over - ((m + 1) * 3.0 + 2 * d)) <= REL * over
    assert abs(block - ((m + 1) * 3.0 + 2 * m * d)) <= REL * block


def test_failures_with_a_network_download_weights_and_retry_cut_transfers():
    """Failing replicas download weights over the network and cut transfers are retried."""
    L, r = 3, 2
    h = hosts(L * r) + ["store"]
    cfg = TrainingConfig(stages=L, replicas=r, microbatches=8, steps=6, schedule="swarm",
                         routing="least-loaded", activation_size=2.0, param_size=20.0,
                         network=star(h, nic=10.0, lat=0.01), network_nodes=grid(h, L, r),
                         availability=0.95, mean_downtime=2.0, detection_timeout=0.5,
                         checkpoint_node="store", checkpoint_every=2, checkpoint_cost=0.1,
                         restart_cost=1.0)
    out = training_model(cfg, Streams(2))
    assert out["finished"] == 1.0 and out["steps_done"] == 6
    assert out["lost_download"] > 0 and out["lost_checkpoint"] > 3 * 0.1


def test_network_configs_refuse_what_does_not_apply():
    """One line each: queue routing, link scalars, blocking with failures, nodes, ranks."""
    h = hosts(4)
    net = star(h, nic=1.0)
    base = dict(stages=2, replicas=2, network=net, schedule="swarm", routing="least-loaded")
    TrainingConfig(**base)
    with pytest.raises(ConfigError, match="'routing' must be one that picks the next replica"):
        TrainingConfig(**{**base, "routing": "queue"})
    with pytest.raises(ConfigError, match=r"'bandwidth' must be inf \(unset\) with a network"):
        TrainingConfig(**base, bandwidth=2.0)
    with pytest.raises(ConfigError, match="'p2p' must be overlap when workers can fail"):
        TrainingConfig(**base, p2p="blocking", availability=0.9)
    with pytest.raises(ConfigError, match="'network_nodes' must be a node of the network"):
        TrainingConfig(**base, network_nodes=(("h0", "h1"), ("h2", "nope")))
    with pytest.raises(ConfigError, match="'network_nodes' must be given when the network has"):
        TrainingConfig(**{**base, "replicas": 3})
    with pytest.raises(ConfigError, match="'tensor_parallel' must be equal among the replicas"):
        TrainingConfig(**base, tensor_parallel=((1, 2), (1, 1)))
    with pytest.raises(ConfigError, match="'nic' must be unset without a network"):
        TrainingConfig(stages=2, nic=3.0)
    with pytest.raises(ConfigError, match="'network' must be a family"):
        TrainingConfig(**{**base, "network": "nosuch:x=1"})


def test_compiled_engine_and_references_leave_network_configs_to_the_des():
    """The compiled loop refuses a network in one line; no closed form claims it."""
    from sim.engines import predictions

    h = hosts(4)
    cfg = TrainingConfig(stages=2, replicas=2, network=star(h, nic=1.0), schedule="swarm",
                         routing="least-loaded", microbatches=4, steps=2)
    assert compiled_obstacle(cfg) == "transfers over a network (contention) run on the DES"
    for p in predictions("training", cfg).values():
        assert p["value"] is None
