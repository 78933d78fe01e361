"""The DiLoCo closed forms of sim.analytic.diloco at hand-computed points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.analytic import diloco as D
from sim.analytic.network import ring_allreduce_time
from sim.errors import ConfigError


def test_payload_is_bits_over_value_bits_and_topk_pays_32_bit_indices():
    """4 bits of 16 is a quarter; top-k 1 % at 8 bits costs 0.01 (8 + 32) / 16 of the size."""
    assert D.payload_size(100.0, bits=4) == 25.0
    assert D.payload_size(100.0, bits=16, value_bits=32) == 50.0
    assert D.payload_size(100.0, bits=8, topk=0.01) == pytest.approx(0.01 * 100 * 40 / 16)


@pytest.mark.parametrize("kw, msg", [
    (dict(bits=5), "'bits' must be one of 32, 16, 8, 4: 5"),
    (dict(bits=32), "'bits' must be at most value_bits (16): 32"),
    (dict(topk=1.5), "'topk' must be in (0, 1]: 1.5"),
    (dict(topk=0.0), "'topk' must be > 0: 0.0"),
])
def test_payload_refuses_bad_precisions(kw, msg):
    """Precisions outside 32/16/8/4, above the values' own, and fractions outside (0, 1]."""
    with pytest.raises(ConfigError) as e:
        D.payload_size(10.0, **kw)
    assert str(e.value) == msg


def test_outer_sync_is_the_ring_of_the_payload_and_hierarchical_adds_the_zone_allgather():
    """M = 4, S = 80 at 8 bits: ring of 40; with g = 2 nodes a group, two WAN rings of 20 and
    an intra-group all-gather of 20 (1 step)."""
    M, S, B, lat = 4, 80.0, 10.0, 0.5
    assert D.outer_sync_time(M, S, B, lat, bits=8) == pytest.approx(
        2 * 3 * (0.5 + 40 / (4 * 10)))
    t = D.outer_sync_time(M, S, B, lat, bits=8, nodes_per_group=2, intra_bandwidth=100.0,
                          intra_latency=0.01)
    assert t == pytest.approx(2 * 3 * (0.5 + 20 / (4 * 10)) + 1 * (0.01 + 20 / 100))
    assert D.outer_sync_time(1, S, B, lat) == 0.0
    assert D.outer_sync_time(M, S, B, lat) == ring_allreduce_time(M, S, B, lat)


def test_a_groups_model_download_is_one_shard_a_node_then_the_zone_allgather():
    """S = 10 on 2 nodes over B = 5, l = 0.25: each node's shard 5 from its counterpart
    (0.25 + 1), then one step of the all-gather inside (0.25 + 1 with the WAN's links, 0.005
    over 1000 without latency): 2.5 and 1.255. The whole stage to each node from one source
    (the model before) says 0.25 + 2 either way. One node: l + S / B, bit for bit."""
    assert D.model_download_time(10.0, 5.0, 0.25, nodes_per_group=2) == pytest.approx(
        2.5, rel=1e-15)
    assert D.model_download_time(10.0, 5.0, 0.25, nodes_per_group=2, intra_bandwidth=1000.0,
                                 intra_latency=0.0) == pytest.approx(1.255, rel=1e-15)
    assert D.model_download_time(10.0, 5.0, 0.25, nodes_per_group=2) != pytest.approx(2.25)
    for S, B, lat in ((10.0, 5.0, 0.25), (3.0, 7.0, 0.1), (0.0, 5.0, 0.3), (4.0, math.inf, 0.2)):
        assert D.model_download_time(S, B, lat) == lat + S / B
    assert D.model_download_time(0.0, 5.0, 0.3, nodes_per_group=4) == 0.3  # the request alone


def test_a_recovery_payload_is_what_each_framework_sends():
    """S = 10 (the parameters at 16 bits): prime sends the fp32 outer parameters, the outer
    Nesterov momentum and AdamW's two moments, 4 x 32 bits a parameter: 80; at value_bits
    32, 40. torchft (its DiLoCo's original parameters and outer momentum, its example's
    model, AdamW's two moments and outer momentum) 6 copies at the parameters' bits: 60
    either way. params: S (what dtsim moved before)."""
    assert D.recovery_size(10.0) == 80.0  # prime's, the default
    assert D.recovery_size(10.0, value_bits=32, recovery="prime") == 40.0
    assert D.recovery_size(10.0, value_bits=8, recovery="prime") == 160.0
    assert D.recovery_size(10.0, recovery="torchft") == 60.0
    assert D.recovery_size(10.0, value_bits=32, recovery="torchft") == 60.0
    assert D.recovery_size(10.0, recovery="params") == 10.0
    assert D.recovery_size(10.0) != 10.0  # the parameters alone, before
    with pytest.raises(ConfigError, match="'recovery' must be"):
        D.recovery_size(10.0, recovery="deepspeed")


def test_outer_sync_with_a_latency_and_a_bandwidth_a_hop():
    """3 zones 0.3, 0.4 and 0.6 apart around the ring (0-1, 1-2, 2-0), 10, 5 and 20 between
    them, S = 12: every step ends with its slowest hop, max(0.3 + 4 / 10, 0.4 + 4 / 5,
    0.6 + 4 / 20) = 1.2, so 4 steps take 4.8 (not the mean latency's 4.93, nor the largest
    latency with the least bandwidth's 5.6). Top-k 25 % at 8 bits with 2 nodes a group:
    blocks 0.25 * 12 * 40 / 16 / 2 = 3.75, 2 steps of max(0.675, 1.15, 0.7875), then the
    all-gather inside (0.01 + 3 / 100): 2.34. Equal hops give the one-value law, bit for
    bit."""
    lat = [[0, 0.3, 0.6], [0.3, 0, 0.4], [0.6, 0.4, 0]]
    bw = [[0, 10, 20], [10, 0, 5], [20, 5, 0]]
    assert D.ring_hops(lat, [0, 1, 2]) == [0.3, 0.4, 0.6]
    assert D.ring_hops(bw, [2, 0, 1]) == [20.0, 10.0, 5.0]
    hop_b, hop_l = D.ring_hops(bw, [0, 1, 2]), D.ring_hops(lat, [0, 1, 2])
    assert D.outer_sync_time(3, 12.0, hop_b, hop_l) == pytest.approx(4.8, rel=1e-12)
    assert D.outer_sync_time(3, 12.0, 5.0, hop_l) == pytest.approx(4 * 1.4, rel=1e-12)
    t = D.outer_sync_time(3, 12.0, hop_b, hop_l, bits=8, topk=0.25, nodes_per_group=2,
                          intra_bandwidth=100.0, intra_latency=0.01)
    assert t == pytest.approx(2 * 1.15 + 0.04, rel=1e-12)
    assert D.outer_sync_time(4, 80.0, [10.0] * 4, [0.5] * 4, bits=8) == \
        D.outer_sync_time(4, 80.0, 10.0, 0.5, bits=8)
    with pytest.raises(ConfigError, match="'latency' must be one value a hop of the ring"):
        D.outer_sync_time(3, 12.0, 5.0, [0.1, 0.2])
    with pytest.raises(ConfigError, match="'intra_latency' must be given"):
        D.outer_sync_time(3, 12.0, 5.0, hop_l, nodes_per_group=2)


def test_topk_sync_is_an_allgather_of_index_value_pairs():
    """Top-k 10 % at 16 bits of 100 among 3: blocks of 0.1 * 100 * 48 / 16 = 30, 2 steps."""
    assert D.outer_sync_time(3, 100.0, 5.0, 0.1, topk=0.1) == pytest.approx(2 * (0.1 + 30 / 5))
    wan, inside = D.outer_bytes_sent(3, 100.0, topk=0.1)
    assert (wan, inside) == (pytest.approx(60.0), 0.0)


def test_outer_bytes_of_a_ring_are_two_m_minus_one_over_m():
    """Each node of a 4-group ring sends 2 * 3 / 4 of the payload; with 2 nodes a group half
    of that across and half the payload inside."""
    assert D.outer_bytes_sent(4, 80.0) == (pytest.approx(120.0), 0.0)
    assert D.outer_bytes_sent(4, 80.0, nodes_per_group=2) == (pytest.approx(60.0),
                                                               pytest.approx(40.0))


def test_fragments_sequential_and_strided():
    """4 stages of 8 in 2 fragments: sequential = stages 0-1 | 2-3, strided = 0,2 | 1,3; one
    stage in 4 fragments: a quarter each either way."""
    assert D.fragment_sizes([8, 8, 8, 8], 2, "sequential") == [[8, 8, 0, 0], [0, 0, 8, 8]]
    assert D.fragment_sizes([8, 8, 8, 8], 2, "strided") == [[8, 0, 8, 0], [0, 8, 0, 8]]
    assert D.fragment_sizes([8], 4, "strided") == [[2.0]] * 4
    # 2 stages, 4 layers, 3 fragments is impossible: 12 layers
    assert D.fragment_sizes([6, 6], 3, "sequential") == [[4, 0], [2, 2], [0, 4]]
    with pytest.raises(ConfigError) as e:
        D.fragment_sizes([6, 6], 3, layers=4)
    assert str(e.value) == "'layers' must be a multiple of the stages (2) and of the fragments (3): 4"


def test_fragment_stages_are_the_stages_holding_its_layers():
    """The stages in each fragment's outer sync: those holding one of its layers (the cut of
    fragment_sizes), a stage whose layers weigh 0 included (it holds them)."""
    assert D.fragment_stages(4, 2, "sequential") == [(0, 1), (2, 3)]
    assert D.fragment_stages(4, 2, "strided") == [(0, 2), (1, 3)]
    assert D.fragment_stages(1, 4, "strided") == [(0,)] * 4
    assert D.fragment_stages(2, 3, "sequential") == [(0,), (0, 1), (1,)]
    # 4 layers, 2 a stage: layer l in fragment l % 4
    assert D.fragment_stages(2, 4, "strided", layers=4) == [(0,), (0,), (1,), (1,)]
    assert D.fragment_stages(2, 2, "strided", layers=4) == [(0, 1), (0, 1)]
    assert D.fragment_stages(2, 2) == [(0,), (1,)]
    assert D.fragment_sizes([0.0, 8.0], 2) == [[0.0, 0.0], [0.0, 8.0]]
    with pytest.raises(ConfigError) as e:
        D.fragment_stages(2, 3, layers=4)
    assert str(e.value) == "'layers' must be a multiple of the stages (2) and of the fragments (3): 4"


def test_sync_schedule_spreads_fragments_every_h_over_p():
    """H = 4, P = 2, N = 10: fragment 0 after 2, 6, 10; fragment 1 after 4, 8."""
    assert D.sync_schedule(10, 4, 2) == [(2, 0), (4, 1), (6, 0), (8, 1), (10, 0)]
    assert D.sync_schedule(7, 3) == [(3, 0), (6, 0)]
    with pytest.raises(ConfigError) as e:
        D.sync_schedule(10, 4, 3)
    assert str(e.value) == "'fragments' must be a divisor of every (4): 3"


def test_vanilla_wall_time_and_utilisation():
    """N = 12, H = 4, T = 1, T_sync = 2: wall 12 + 3 * 2 = 18; utilisation 4 / 6."""
    r = D.diloco_times(12, 1.0, 4, [2.0])
    assert r.wall_time == 18.0 and r.syncs == 3 and not r.overlapping
    assert r.compute_utilisation == pytest.approx(12 / 18)
    assert D.diloco_utilisation(4, 1.0, 2.0) == pytest.approx(4 / 6)


def test_overlap_hides_a_sync_that_fits_its_tau_steps_and_exposes_the_rest():
    """Two fragments of sync 1.5 with TAU = 1 step of 1: 0.5 exposed at each application; the
    last sync (after step N) is waited for in full when no step is left to hide it."""
    r = D.diloco_times(8, 1.0, 4, [1.5, 1.5], overlap=1)
    # syncs after 2 (applied at 3: +0.5), 4 (at 5: +0.5), 6 (at 7: +0.5), 8 (end: +1.5)
    assert r.wall_time == pytest.approx(8 + 0.5 * 3 + 1.5)
    assert D.streaming_utilisation(4, 1.0, [1.5, 1.5], overlap=1) == pytest.approx(4 / 5)
    hidden = D.diloco_times(8, 1.0, 4, [0.9, 0.9], overlap=1)
    assert hidden.wall_time == pytest.approx(8 + 0.9)  # only the last one
    assert D.streaming_utilisation(4, 1.0, [0.9, 0.9], overlap=1) == 1.0


def test_overlapping_syncs_are_flagged():
    """TAU = 3 > H / P = 2 with syncs longer than 2 steps: two syncs in flight at once."""
    assert D.diloco_times(8, 1.0, 4, [2.5, 2.5], overlap=3).overlapping
    assert not D.diloco_times(8, 1.0, 4, [1.5, 1.5], overlap=3).overlapping


def test_an_empty_outer_sync_takes_no_time():
    """A payload of 0 is no collective (NCCL discards a count-0 all-reduce): 0 with any
    latency, per-hop latencies, nodes per group or top-k, as the network's rings; any payload
    pays the ring's 2 (M - 1) latencies: M = 4, l = 0.1, p = 8 over B = 2: 6 (0.1 + 1) = 6.6."""
    assert D.outer_sync_time(4, 0.0, 2.0, 0.1) == 0.0
    assert D.outer_sync_time(4, 0.0, 2.0, 0.1, nodes_per_group=2) == 0.0
    assert D.outer_sync_time(4, 0.0, 2.0, 0.1, topk=0.1) == 0.0
    assert D.outer_sync_time(4, 0.0, [2.0] * 4, [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert D.outer_sync_time(4, 8.0, 2.0, 0.1) == pytest.approx(6.6, rel=1e-15)
    assert D.outer_sync_time(4, 8.0, [2.0] * 4, [0.1, 0.2, 0.3, 0.4]) == \
        pytest.approx(6 * (0.4 + 1.0), rel=1e-15)


def test_bandwidth_for_time_inverts_the_sync_time():
    """The bandwidth returned makes the sync take exactly the budget; latency alone over the
    budget needs infinite bandwidth."""
    B = D.bandwidth_for_time(3.0, 4, 100.0, 0.1, bits=4)
    assert D.outer_sync_time(4, 100.0, B, 0.1, bits=4) == pytest.approx(3.0)
    Bk = D.bandwidth_for_time(3.0, 4, 100.0, 0.1, topk=0.05)
    assert D.outer_sync_time(4, 100.0, Bk, 0.1, topk=0.05) == pytest.approx(3.0)
    assert D.bandwidth_for_time(0.5, 4, 100.0, 0.1) == math.inf


def test_overlap_backward_exposes_what_outlasts_the_backward_pass():
    """All-reduce 5 beside a backward pass of 3: 2 exposed; 2 beside 3: none."""
    assert D.overlap_backward_exposed(5.0, 3.0) == 2.0
    assert D.overlap_backward_exposed(2.0, 3.0) == 0.0


# --------------------------------------------------------------------------- learning


def _problem(M=4, d=6, seed=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, (M, d)), rng.normal(0.0, 1.0, (M, d))


def test_vanilla_mean_is_local_sgd_allreduce_rounds():
    """P = 1, TAU = 0, outer lr 1: after every H steps the global model equals
    sim.analytic.learning.training_mean's allreduce protocol with H local steps."""
    from sim.analytic.learning import training_mean

    a, c = _problem()
    m = D.diloco_mean(a, c, 0.3, 40, 5, x0=2.0)
    ref = training_mean("allreduce", a, c, 0.3, 5, 8, x0=2.0)  # (rounds + 1, n, d)
    np.testing.assert_allclose(m[::5], ref[:, 0, :], rtol=1e-12, atol=1e-12)


def test_h_one_is_gradient_descent_on_the_mean_objective():
    """H = 1: theta' = theta - eta mean_i a_i (theta - c_i) (data parallelism)."""
    a, c = _problem()
    m = D.diloco_mean(a, c, 0.2, 5, 1, x0=1.0)
    th = np.full(a.shape[1], 1.0)
    for _ in range(5):
        th = th - 0.2 * (a * (th - c)).mean(axis=0)
    np.testing.assert_allclose(m[-1], th, rtol=1e-12)


def test_long_run_reaches_diloco_fixed_point():
    """Vanilla DiLoCo tends to sum w c / sum w, w = 1 - (1 - eta a)^H."""
    from sim.analytic.learning import diloco_fixed_point

    a, c = _problem()
    m = D.diloco_mean(a, c, 0.3, 4000, 8)
    np.testing.assert_allclose(m[-1], diloco_fixed_point(a, c, 0.3, 8), rtol=1e-9, atol=1e-12)


def test_streaming_mean_matches_noisy_replications():
    """P = 2 (strided), TAU = 1, mixing 0.5, outer lr 0.7, gradient noise 0.5: the mean of 4000
    noisy replications (simulated here step by step) agrees with the exact first moment within
    4 standard errors; a model that applies the outer step at once (TAU = 0) is rejected."""
    a, c = _problem(M=3, d=4, seed=5)
    eta, N, H, tau, alpha, mu, sigma, R = 0.2, 12, 4, 1, 0.5, 0.7, 0.5, 4000
    rng = np.random.default_rng(11)
    frags = [np.arange(4)[p::2] for p in range(2)]
    theta = np.zeros((R, 4))
    x = np.zeros((R, 3, 4))
    pend = {}
    for t in range(1, N + 1):
        x = x - eta * (a * (x - c) + sigma * rng.standard_normal(x.shape))
        for p, dl in pend.pop(t, []):
            theta[:, frags[p]] -= mu * dl
            x[:, :, frags[p]] = alpha * x[:, :, frags[p]] + (1 - alpha) * theta[:, None, frags[p]]
        if t % (H // 2) == 0:
            p = (t // (H // 2) - 1) % 2
            dl = (theta[:, None, frags[p]] - x[:, :, frags[p]]).mean(axis=1)
            pend.setdefault(min(t + tau, N + 1), []).append((p, dl))
    for p, dl in pend.pop(N + 1, []):
        theta[:, frags[p]] -= mu * dl
    exact = D.diloco_mean(a, c, eta, N, H, fragments=2, order="strided", overlap=tau,
                          mixing=alpha, outer_lr=mu)[-1]
    se = theta.std(axis=0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(theta.mean(axis=0) - exact) <= 4 * se)
    wrong = D.diloco_mean(a, c, eta, N, H, fragments=2, order="strided", overlap=0,
                          outer_lr=mu)[-1]
    assert np.any(np.abs(theta.mean(axis=0) - wrong) > 4 * se)


def test_loss_against_wall_clock_and_time_to_target():
    """The clock is the time model's (its end is diloco_times' wall time); the loss falls to
    the target at the first step whose loss is below it."""
    a, c = _problem()
    curve = D.loss_vs_wall_clock(a, c, 0.3, 40, 5, 1.0, [3.0], x0=2.0)
    assert curve.time[-1] == pytest.approx(D.diloco_times(40, 1.0, 5, [3.0]).wall_time)
    target = curve.loss[20]
    k = next(i for i, v in enumerate(curve.loss) if v <= target)
    assert curve.time_to(target) == curve.time[k]
    assert curve.time_to(-1.0) == math.inf


def test_failure_run_length_exact_references():
    """sim.analytic.diloco.failure_run_length (the DiLoCo and learners transition budgets'
    length): no loss, R rounds of tau / p; one group, the renewal law (e^(lambda tau) - 1) /
    (lambda p) a round; a run that stalls, the stall limit L times 1 + c + ... + c^(R-1), c the
    union bound (1 + lambda L) e^(-lambda tau) (review9's expm1 try left this out and counted a
    stalling run's rounds as ending); a quorum K of M, the sum over M - K + 1, plus grace."""
    G, f = D.GroupFailures, D.failure_run_length
    assert f([G(0.0, 0.5, 10.0)], 3, 1e4) == 60.0
    g = G(0.2, 5 / 6, 30.0)
    assert g.round_time() == pytest.approx(math.expm1(6.0) / (0.2 * 5 / 6), rel=1e-12)
    assert f([g, g], 3, 3e4) == pytest.approx(3 * g.round_time(), rel=1e-12)
    g, L = G(0.2, 5 / 6, 60.0), 6e4
    c = (1 + 0.2 * L) * math.exp(-12.0)
    assert f([g], 3, L) == pytest.approx(L * (1 + c + c * c), rel=1e-12)
    assert f([g], 3, L) < 1.1 * L < 3 * min(g.round_time(), L)
    assert f([G(0.0, 1.0, 10.0)] * 4, 1, 1e6, quorum=4, grace=2.0) == pytest.approx(42.0)
    assert f([G(0.0, 1.0, 10.0)] * 4, 1, 1e6, quorum=1) == pytest.approx(10.0)
    assert f([G(0.1, 0.0, 1.0)], 5, 100.0) == 100.0  # never up: stalls in the first round
