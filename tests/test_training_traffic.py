"""Training traffic to time (sim.training.traffic): FIFO channels, the overlapped all-reduce, --sync."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from sim.analytic import network as exact_net
from sim.analytic.training import bucket_ready_times, overlapped_allreduce_end, program_makespan
from sim.engines import predictions
from sim.errors import ConfigError
from sim.network import LinkValue, NetworkService, NetworkValue, NodeValue
from sim.network.channels import Channels
from sim.rng import Streams
from sim.training import TrainingConfig
from sim.training.schedules import device_program
from sim.training.sync import parse_sync
from sim.training.system import training_model
from sim.training.traffic import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, gradient_buckets

REL = 1e-9


# -- --sync -----------------------------------------------------------------------------
def test_parse_sync_reads_kinds_keys_and_writes_the_canonical_text():
    """KIND[:key=value,...]: defaults dropped from the text, values read by the key's reader."""
    assert parse_sync("allreduce").text == "allreduce"
    assert parse_sync("allreduce:overlap=none").text == "allreduce"
    s = parse_sync(" allreduce : bucket_size=2.5e6 , overlap=backward ")
    assert s.kind == "allreduce" and s["overlap"] == "backward" and s["bucket_size"] == 2.5e6
    assert s.text == "allreduce:overlap=backward,bucket_size=2500000"
    assert parse_sync(s.text) == s
    assert parse_sync("none").text == "none" and parse_sync("none").get("overlap") is None
    assert TrainingConfig(sync="allreduce:overlap=none").sync == "allreduce"


def test_sync_sizes_and_times_take_units():
    """bucket_size takes a size unit (bytes, exactly: 25MiB = 26214400) and DiLoCo's grace a
    time unit (seconds: 5min = 300); the canonical text holds the number; a plain number
    means what it did; sync_quantities lists what was given with a unit, as given."""
    from sim.training.sync import sync_quantities

    s = parse_sync("allreduce:overlap=backward,bucket_size=25MiB")
    assert s["bucket_size"] == 26214400.0 and s.text == "allreduce:overlap=backward,bucket_size=26214400"
    assert parse_sync("allreduce:bucket_size=1.5 GB")["bucket_size"] == 1.5e9
    assert parse_sync("allreduce:bucket_size=16Gbit")["bucket_size"] == 2e9
    d = parse_sync("diloco:every=4,quorum=2,grace=5min")
    assert d["grace"] == 300.0 and d.text == "diloco:every=4,quorum=2,grace=300"
    assert parse_sync("diloco:every=4,quorum=2,grace=250ms")["grace"] == 0.25
    assert parse_sync("diloco:every=4,quorum=2,grace=7")["grace"] == 7.0
    got = sync_quantities("diloco:every=4,quorum=2,grace=2h")
    assert [(k, q.value, q.text, q.unit) for k, q in got] == [("grace", 7200.0, "2h", "h")]
    assert sync_quantities("diloco:every=4,quorum=2,grace=7") == []
    assert sync_quantities("diloco:every=4,quorum=2,grace=2.5e1") == []  # an exponent: no unit
    assert sync_quantities(d) == []  # a parsed spec holds values only
    assert TrainingConfig(replicas=4, microbatches=4, steps=4,
                          sync="diloco:every=2,quorum=2,grace=1min").sync == (
        "diloco:every=2,quorum=2,grace=60")


@pytest.mark.parametrize("text, message", [
    ("allreduce:bucket_size=2GB/s", "'sync' must be bucket_size a size, not a rate (bytes, or "
     "a number and a size unit: 2GB, 512MiB, 1.5e9B, 16Gbit, 4 KiB): '2GB/s'"),
    ("allreduce:bucket_size=4KB", "'sync' must be bucket_size a size with a known unit (K is "
     "ambiguous (1000 or 1024): write k (1000) or Ki (1024)): '4KB'"),
    ("diloco:every=4,quorum=2,grace=5GB", "'sync' must be grace a time, not a size (seconds, "
     "or a number and a time unit: 10ms, 250us, 2h): '5GB'"),
    ("diloco:every=4,quorum=2,grace=5m", "'sync' must be grace a time with a known unit (m is "
     "milli (or minute: write min)): '5m'"),
    ("diloco:every=4,quorum=2,grace=-5s", "'sync' must be grace a time >= 0: '-5s'"),
    ("diloco:every=4,quorum=2,grace=1e400s", "'sync' must be grace a finite time (at most "
     "1.8e+308 s): '1e400s'"),
    ("diloco:every=4,grace=2s", "'sync' must be grace 0 without quorum: '2s'"),
    ("diloco:every=4,grace=5min", "'sync' must be grace 0 without quorum: '5min'"),
    ("diloco:every=4,grace=1.50", "'sync' must be grace 0 without quorum: '1.50'"),
])
def test_bad_sync_quantities_are_one_line(text, message):
    """A size or time with a bad unit, of the wrong kind, negative or too large is one line
    naming sync, the key's rule and the value as given."""
    with pytest.raises(ConfigError) as e:
        parse_sync(text)
    assert str(e.value) == message


@pytest.mark.parametrize("text, message", [
    ("gossip", "'sync' must be KIND[:key=value,...] with KIND one of allreduce, none, diloco: "
                   "'gossip'"),
    ("allreduce:depth=2", "'sync' must be a key of allreduce (overlap, bucket_size, buckets): "
                          "'depth'"),
    ("allreduce:overlap=forward", "'sync' must be overlap in (none, backward): 'forward'"),
    ("allreduce:bucket_size=0", "'sync' must be bucket_size > 0: '0'"),
    ("allreduce:bucket_size=inf", "'sync' must be bucket_size > 0: 'inf'"),
    ("allreduce:overlap", "'sync' must be KIND[:key=value,...] (each option key=value): "
                          "'allreduce:overlap'"),
    ("allreduce:overlap=none,overlap=backward", "'sync' must be each key once: 'overlap'"),
    ("none:overlap=backward", "'sync' must be a key of none (it has none): 'overlap'"),
])
def test_bad_sync_text_is_one_line(text, message):
    """Every malformed --sync names sync, the rule and the value."""
    with pytest.raises(ConfigError) as e:
        TrainingConfig(sync=text)
    assert str(e.value) == message


def test_overlap_is_refused_where_a_replica_does_not_know_its_last_backward():
    """overlap=backward needs fixed pipelines, backward passes, no fastest-k and no failover."""
    with pytest.raises(ConfigError, match="unless schedule is gpipe or 1f1b"):
        TrainingConfig(schedule="swarm", routing="least-loaded",
                       sync="allreduce:overlap=backward")
    with pytest.raises(ConfigError, match="no backward pass"):
        TrainingConfig(backward_ratio=0.0, sync="allreduce:overlap=backward")
    with pytest.raises(ConfigError, match="when replica servers can fail"):
        TrainingConfig(replicas=2, availability=0.9, sync="allreduce:overlap=backward")
    with pytest.raises(ConfigError) as e:
        TrainingConfig(replicas=2, network="star:n=8", sync="allreduce:bucket_size=4",
                       bucket_size=4.0)
    assert str(e.value) == ("'bucket_size' must be unset (inf) when sync gives bucket_size "
                            "(one bucket size): 4.0")


# -- channels ---------------------------------------------------------------------------
def test_a_channel_moves_one_transfer_at_a_time_and_channels_share_links():
    """One link of 10/s: two transfers of 10 on one channel arrive at 1 and 2; on two channels
    (or plain flows) they share the link and both arrive at 2; a withdrawn head lets the next go."""
    net = NetworkValue((LinkValue("a", "b", bandwidth=10.0),))

    def run(send):
        env = simpy.Environment()
        ch = Channels(NetworkService(env, net))
        evs = send(ch)
        env.run()
        return [e.value if e.triggered else None for e in evs]

    assert run(lambda ch: [ch.send("x", "a", "b", 10.0), ch.send("x", "a", "b", 10.0)]) == \
        pytest.approx([1.0, 2.0])
    assert run(lambda ch: [ch.send("x", "a", "b", 10.0), ch.send("y", "a", "b", 10.0)]) == \
        pytest.approx([2.0, 2.0])

    def cut(ch):
        first, second = ch.send("x", "a", "b", 10.0), ch.send("x", "a", "b", 10.0)
        ev = ch.env.timeout(0.5)
        ev.callbacks.append(lambda _e: ch.cancel(first))
        return [first, second]
    assert run(cut) == [None, pytest.approx(1.5)]


def _chain(L: int, bw: list[float], lat: list[float]) -> NetworkValue:
    """Hosts h0 - h1 - ... in a line: hop j its own full-duplex link (each direction alone)."""
    return NetworkValue(tuple(LinkValue(f"h{j}", f"h{j + 1}", bandwidth=bw[j], latency=lat[j])
                              for j in range(L - 1)))


def _random_pipeline(rng: np.random.Generator, schedule: str):
    L = int(rng.integers(3, 6))
    m = int(rng.integers(4, 13))
    f = [float(x) for x in rng.uniform(0.2, 1.5, L)]
    b = [float(x) * float(y) for x, y in zip(f, rng.uniform(1.0, 3.0, L), strict=True)]
    bw = [float(x) for x in rng.uniform(0.5, 5.0, L - 1)]
    lat = [float(x) for x in rng.uniform(0.0, 0.2, L - 1)]
    A = float(rng.uniform(1.0, 3.0))
    return L, m, f, b, bw, lat, A


def _max_plus(schedule: str, L: int, m: int, f, b, act, grad, *, channels: bool = True,
              v: int = 1) -> float:
    progs = [device_program(schedule, L, m, j, v=v) for j in range(L)]
    return program_makespan(progs, [f[s % L] / v for s in range(L * v)],
                            [b[s % L] / v for s in range(L * v)], act, grad, channels=channels)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_fifo_channels_match_the_max_plus_pipeline_at_random_configs(schedule):
    """Over a network (one link per hop), overlapped hops are FIFO channels: the DES's step is the
    max-plus makespan with a queue per channel (1e-9) at random unequal stages, links and sizes."""
    rng = np.random.default_rng(35 if schedule == "gpipe" else 36)
    queued = 0
    for _ in range(6):
        L, m, f, b, bw, lat, A = _random_pipeline(rng, schedule)
        d = [lat[j] + A / bw[j] for j in range(L - 1)]
        want = _max_plus(schedule, L, m, f, b, d, d)
        queued += want > _max_plus(schedule, L, m, f, b, d, d, channels=False) * (1 + 1e-6)
        cfg = TrainingConfig(stages=L, microbatches=m, steps=1, schedule=schedule,
                             forward_time=tuple(f), backward_times=tuple(b), activation_size=A,
                             network=_chain(L, bw, lat),
                             network_nodes=tuple((f"h{j}",) for j in range(L)))
        got = training_model(cfg, Streams(0))["step_time_mean"]
        assert got == pytest.approx(want, rel=REL)
    if schedule == "gpipe":  # its forward bursts queue (1F1B's warm-up rarely does)
        assert queued >= 3


def test_fifo_channels_without_a_network_match_the_max_plus_too():
    """The closed form queues on the same channels: replica servers (1F1B, per-hop latency) and
    framework devices (the interleaved schedule) both give the max-plus makespan."""
    rng = np.random.default_rng(7)
    for _ in range(4):
        L, m, f, b, _bw, lat, A = _random_pipeline(rng, "1f1b")
        W = float(rng.uniform(0.5, 4.0))
        d = [lat[j] + A / W for j in range(L - 1)]
        cfg = TrainingConfig(stages=L, microbatches=m, steps=1, schedule="1f1b",
                             forward_time=tuple(f), backward_times=tuple(b), activation_size=A,
                             bandwidth=W, latency=tuple(lat))
        assert training_model(cfg, Streams(0))["step_time_mean"] == \
            pytest.approx(_max_plus("1f1b", L, m, f, b, d, d), rel=REL)
    L, v, m, h = 3, 2, 6, 2.0  # interleaved: the wrap-around hop shares the 2 -> 0 channel
    f = [0.3, 0.5, 0.2]
    cfg = TrainingConfig(stages=L, virtual_stages=v, microbatches=m, steps=1,
                         schedule="interleaved", forward_time=tuple(f), backward_ratio=2.0,
                         latency=h)
    want = _max_plus("interleaved", L, m, f, [2 * x for x in f], [h] * (L * v - 1),
                     [h] * (L * v - 1), v=v)
    assert training_model(cfg, Streams(0))["step_time_mean"] == pytest.approx(want, rel=REL)
    assert want > _max_plus("interleaved", L, m, f, [2 * x for x in f], [h] * (L * v - 1),
                            [h] * (L * v - 1), v=v, channels=False) + 0.25


def test_a_gpipe_burst_pipelines_on_fifo_channels_and_stalls_when_shared():
    """The published GPipe setting's mechanism (8 stages, 96 micro-batches, every hop 1 Gbit/s
    and 10 ms; compute and sizes illustrative: the run's own are not in dtsim's inputs): a
    stage computes faster than its hop moves activations, so they burst. FIFO: the max-plus
    makespan (1e-9); shared max-min (p2p shared, the model the channels replaced): the burst
    arrives together and the pipeline stops pipelining, far slower (rejected)."""
    L, m, B, lat = 8, 96, 125e6, 0.010
    A, tf = 4e6, 0.005  # 42 ms per activation against 5 ms of forward compute
    f, b = [tf] * L, [2 * tf] * L
    base = dict(stages=L, microbatches=m, steps=1, schedule="gpipe", forward_time=tf,
                backward_ratio=2.0, activation_size=A, network=_chain(L, [B] * (L - 1),
                                                                      [lat] * (L - 1)),
                network_nodes=tuple((f"h{j}",) for j in range(L)))
    d = [lat + A / B] * (L - 1)
    want = _max_plus("gpipe", L, m, f, b, d, d)
    fifo = training_model(TrainingConfig(**base), Streams(0))["step_time_mean"]
    shared = training_model(TrainingConfig(**base, p2p="shared"), Streams(0))["step_time_mean"]
    assert fifo == pytest.approx(want, rel=REL)
    assert shared > 1.8 * want


# -- the all-reduce overlapped with the backward pass -------------------------------------
def test_gradient_buckets_follow_ddp_and_megatron():
    """DDP: 25 MiB buckets cut in registration order after a first 1 MiB one, then reversed;
    Megatron: buckets in production order on the first stage, one bucket elsewhere."""
    MiB = 1024 * 1024
    assert DDP_BUCKET_BYTES == 25 * MiB and DDP_FIRST_BUCKET_BYTES == MiB
    assert gradient_buckets(60 * MiB, None) == [9 * MiB, 25 * MiB, 25 * MiB, MiB]
    assert gradient_buckets(0.5 * MiB, None) == [0.5 * MiB]
    assert gradient_buckets(10.0, 4.0) == [2.0, 4.0, 4.0]
    assert gradient_buckets(10.0, 4.0, rule="megatron") == [4.0, 4.0, 2.0]
    assert gradient_buckets(10.0, 4.0, rule="megatron", first_stage=False) == [10.0]


def test_overlapped_end_is_the_max_plus_of_ready_buckets():
    """e_b = max(r_b, e_{b-1}) + T_b; buckets produced evenly over the pass."""
    r = bucket_ready_times(1.0, 2.0, [1.0, 1.0, 2.0])
    assert r == pytest.approx([1.5, 2.0, 3.0]) and r[-1] == 3.0
    assert overlapped_allreduce_end(r, [1.0, 0.2, 0.5]) == pytest.approx(3.5)
    assert overlapped_allreduce_end([], []) == -math.inf


def _overlap_config(rng: np.random.Generator, **kw):
    L = int(rng.integers(1, 4))
    r = int(rng.integers(2, 5))
    m = r * int(rng.integers(1, 4))
    P = float(rng.uniform(20.0, 200.0))
    return dict(stages=L, replicas=r, microbatches=m, steps=2, routing="round-robin",
                forward_time=tuple(float(x) for x in rng.uniform(0.3, 1.5, L)),
                backward_ratio=float(rng.uniform(1.0, 3.0)), param_size=P,
                bandwidth=float(rng.uniform(5.0, 50.0)), latency=float(rng.uniform(0.0, 0.1)),
                sync=f"allreduce:overlap=backward,bucket_size={P * rng.uniform(0.1, 0.6):.6g}",
                **kw)


@pytest.mark.parametrize("engine", ["servers", "framework"])
def test_overlapped_allreduce_matches_its_closed_form_at_random_configs(engine):
    """The DES's step with buckets released during the last backward pass is the closed form
    (max-plus of the stages' programs, then each stage's buckets: sim.analytic), 1e-9; the
    all-reduce after the backward pass (overlap none, same buckets) is rejected."""
    rng = np.random.default_rng(11 if engine == "servers" else 12)
    gain = 0.0
    for _ in range(6):
        kw = (dict(schedule="1f1b") if engine == "servers"
              else dict(schedule=str(rng.choice(["gpipe", "1f1b"])), p2p="blocking"))
        c = TrainingConfig(**_overlap_config(rng, **kw))
        got = training_model(c, Streams(0))["step_time_mean"]
        want = predictions("training", c)["step_time_mean"]
        assert want["reference"] == "schedule"
        assert got == pytest.approx(want["value"], rel=REL)
        after = TrainingConfig(**{**c.__dict__, "sync": c.sync.replace("overlap=backward,", "")})
        late = predictions("training", after)["step_time_mean"]["value"]
        assert training_model(after, Streams(0))["step_time_mean"] == pytest.approx(late,
                                                                                   rel=REL)
        gain = max(gain, (late - got) / late)
    assert gain > 0.05  # somewhere the overlap hides over 5% of the step: the late model fails


def test_overlapped_allreduce_over_a_network_is_the_ring_law_per_bucket():
    """One data-parallel stage on a star of NICs of B (route latency l): each bucket's ring of
    flows takes the ring law, so the network DES equals the closed form's step (1e-9)."""
    r, B, lat, P = 4, 8.0, 0.05, 64.0
    h = [f"h{i}" for i in range(r)]
    star = NetworkValue(tuple(LinkValue(x, "sw", bandwidth=math.inf, latency=lat / 2) for x in h),
                        tuple(NodeValue(x, egress=B, ingress=B) for x in h))
    base = dict(stages=1, replicas=r, microbatches=2 * r, steps=2, schedule="1f1b",
                routing="round-robin", forward_time=1.0, backward_ratio=2.0, param_size=P,
                sync="allreduce:overlap=backward,bucket_size=24")
    net = TrainingConfig(**base, network=star, network_nodes=(tuple(h),))
    closed = TrainingConfig(**base, bandwidth=B, latency=lat)
    assert training_model(net, Streams(0))["step_time_mean"] == pytest.approx(
        predictions("training", closed)["step_time_mean"]["value"], rel=REL)
    assert exact_net.ring_allreduce_time(r, 24.0, B, lat) > 0
