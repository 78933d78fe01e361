"""The new defences (Krum, RFA, centred clipping, mean, bucketing) against textbook and brute-force versions."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import minimize

from sim.adversaries import AdaptiveClip, Neighbourhood, View
from sim.errors import ConfigError
from sim.gossip import GossipConfig
from sim.gossip.mixing import mixing_weights
from sim.learning import GossipTrainingConfig, LearningConfig
from sim.learning.robust import Bucketing, CenteredClip, Krum, Mean, Mixing, make_rule
from sim.rng import Streams


def _inputs(seed, k=3, r=6, d=3):
    rng = np.random.default_rng(seed)
    own = rng.standard_normal((k, d))
    rec = rng.standard_normal((k, r, d)) * 2
    return own, rec, np.full((k, r), 1.0 / (r + 1))


@pytest.mark.parametrize("f,m", [(0, 1), (1, 1), (2, 1), (1, 3), (2, 2)])
def test_textbook_krum_is_the_brute_force_minimiser(f, m):
    """Krum's score is the least sum of squared distances to any n - f - 2 others (all subsets tried)."""
    own, rec, w = _inputs(f * 10 + m)
    rule = Krum(f, m)
    got = rule.neighbourhood_update(own, rec, w)
    for i in range(own.shape[0]):
        v = [own[i]] + list(rec[i])
        n = len(v)
        scores = []
        for a in range(n):
            others = [b for b in range(n) if b != a]
            best = min(sum(float(np.sum((v[a] - v[b]) ** 2)) for b in sub)
                       for sub in itertools.combinations(others, n - f - 2))
            scores.append(best)
        order = sorted(range(n), key=lambda a: (scores[a], a))[:m]
        np.testing.assert_allclose(got[i], np.mean([v[a] for a in order], axis=0), atol=1e-12)


def test_krum_refuses_too_many_adversaries():
    """2 f + 2 above the inputs is refused naming krum_f (the reference code raises there too)."""
    own, rec, w = _inputs(0, r=3)
    with pytest.raises(ConfigError, match="'krum_f'"):
        Krum(2, 1).neighbourhood_update(own, rec, w)


def test_krum_reference_variant_differs_from_textbook_where_fourth_powers_reorder():
    """The reference scores (fourth powers) pick another value than Krum's squares on a crafted input."""
    v = np.array([0.8, -1.4, -2.8, -2.9, 1.9, 2.5])  # found by a search over random values
    own, rec = v[None, :1], v[None, 1:, None]
    w = np.full((1, 5), 1 / 6)
    t = Krum(1, 1, "textbook").neighbourhood_update(own, rec, w)
    r = Krum(1, 1, "reference").neighbourhood_update(own, rec, w)
    sq = (v[:, None] - v[None, :]) ** 2
    s2 = [np.sort(np.delete(sq[i], i))[:3].sum() for i in range(6)]
    s4 = [np.sort(np.delete(sq[i] ** 2, i))[:3].sum() for i in range(6)]
    assert t[0, 0] == v[int(np.argmin(s2))] and r[0, 0] == v[int(np.argmin(s4))]
    assert t[0, 0] != r[0, 0]


def test_rfa_converges_to_the_geometric_median():
    """Many smoothed Weiszfeld steps with a tiny nu reach the minimiser of sum |z - v_k| (scipy)."""
    own, rec, w = _inputs(3, k=2, r=7, d=2)
    got = make_rule("rfa", rfa_iters=2000, rfa_nu=1e-12).neighbourhood_update(own, rec, w)
    for i in range(2):
        v = np.vstack([own[i], rec[i]])
        res = minimize(lambda z, v=v: np.sum(np.sqrt(np.sum((v - z) ** 2, axis=1))), v.mean(axis=0),
                       method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 20000})
        np.testing.assert_allclose(got[i], res.x, atol=1e-6)


def test_centered_clip_reaches_the_clipped_mean_fixed_point_and_keeps_its_centre():
    """Iterated, the centre solves sum clip(v_k - c, tau) = 0; a huge tau gives the mean in one step."""
    own, rec, w = _inputs(4)
    cc = CenteredClip(0.5, iters=500)
    cc.start(3, 3)
    c = cc.neighbourhood_update_at(np.arange(3), own, rec, w)
    for i in range(3):
        v = np.vstack([own[i], rec[i]])
        d = v - c[i]
        nrm = np.linalg.norm(d, axis=1)
        clipped = d * np.minimum(1.0, 0.5 / nrm)[:, None]
        assert np.linalg.norm(clipped.sum(axis=0)) < 1e-10
    big = CenteredClip(1e9)
    big.start(3, 3)
    np.testing.assert_allclose(big.neighbourhood_update_at(np.arange(3), own, rec, w),
                               Mean().neighbourhood_update(own, rec, w), atol=1e-12)
    # persistence: a second call starts from the kept centre, not from the own value
    one = CenteredClip(0.1)
    one.start(3, 3)
    first = one.neighbourhood_update_at(np.arange(3), own, rec, w)
    second = one.neighbourhood_update_at(np.arange(3), own + 5.0, rec, w)
    fresh = CenteredClip(0.1)
    fresh.start(3, 3)
    assert not np.allclose(second, fresh.neighbourhood_update_at(np.arange(3), own + 5.0, rec, w))
    assert np.all(np.linalg.norm(second - first, axis=1) <= 0.1 + 1e-12)


def test_bucketing_keeps_the_mean_and_with_s_1_only_permutes():
    """Repeat form: the bucket means average to the inputs' mean; s = 1 permutes the inputs."""
    own, rec, w = _inputs(6, k=4, r=5)
    for s in (1, 2, 3):
        b = Bucketing(Mean(), s)
        b.start(4, 3, streams=Streams(2))
        out = b.buckets(np.arange(4), own, rec)
        np.testing.assert_allclose(out.mean(axis=1), np.concatenate([own[:, None], rec], 1).mean(1),
                                   atol=1e-12)
        if s == 1:
            for i in range(4):
                got = sorted(map(tuple, out[i]))
                want = sorted(map(tuple, np.vstack([own[i], rec[i]])))
                np.testing.assert_allclose(got, want)
    p = Bucketing(Mean(), 4, "permute")
    p.start(4, 3, streams=Streams(2))
    out = p.buckets(np.arange(4), own, rec)
    assert out.shape == (4, 2, 3)  # ceil(6 / 4) buckets: one of 4 values, one of 2


def test_bucketing_streams_do_not_depend_on_visit_order():
    """Each node's permutation comes from its own stream: visiting nodes in another order changes nothing."""
    own, rec, w = _inputs(8, k=4)
    a, b = Bucketing(Mean(), 2), Bucketing(Mean(), 2)
    a.start(4, 3, streams=Streams(9))
    b.start(4, 3, streams=Streams(9))
    fwd = a.neighbourhood_update_at(np.arange(4), own, rec, w)
    rev = b.neighbourhood_update_at(np.arange(4)[::-1], own[::-1], rec[::-1], w)[::-1]
    np.testing.assert_array_equal(fwd, rev)


def test_mixing_rule_is_the_gossip_update():
    """Mixing(tau) is x + sum_j W_ij clip(v_j - x, tau); tau = inf is plain gossip."""
    own, rec, w = _inputs(10)
    plain = Mixing().neighbourhood_update(own, rec, w)
    np.testing.assert_allclose(plain, own + np.einsum("kr,krd->kd", w, rec - own[:, None]))
    clipped = Mixing(0.3).neighbourhood_update(own, rec, w)
    d = rec - own[:, None]
    nrm = np.linalg.norm(d, axis=2, keepdims=True)
    np.testing.assert_allclose(clipped, own + np.einsum("kr,krd->kd", w, d * np.minimum(1, 0.3 / nrm)))


def test_weighted_oracle_radius_on_an_irregular_graph():
    """Oracle radius with Metropolis weights: sqrt(sum_honest W |x_j - x_i|^2 / sum_byz W) (brute force)."""
    G = nx.Graph([(0, 1), (1, 2), (1, 3), (2, 3), (3, 4), (4, 5), (1, 5), (0, 5)])
    honest = np.array([False, True, True, True, True, False])
    x = np.random.default_rng(1).standard_normal((6, 2)) * 3
    W = mixing_weights(G, "metropolis")
    adj = nx.to_scipy_sparse_array(G, nodelist=range(6), weight=None, format="csr")
    nb = Neighbourhood(honest, adj, W)
    tau = AdaptiveClip().radius(View(x, honest, nb), np.array([1, 2, 3, 4]))
    Wd = W.toarray()
    for k, i in enumerate([1, 2, 3, 4]):
        num = sum(Wd[i, j] * np.sum((x[j] - x[i]) ** 2) for j in G.neighbors(i) if honest[j])
        den = sum(Wd[i, j] for j in G.neighbors(i) if not honest[j])
        want = math.sqrt(num / den) if den > 0 else math.inf
        assert tau[k] == pytest.approx(want, rel=1e-12)
    # without weights (pairwise protocols) the old uniform rule: node 1 has two adversarial neighbours
    tau_u = AdaptiveClip().radius(View(x, honest, Neighbourhood(honest, adj)), np.array([1]))
    num = sum(np.sum((x[j] - x[1]) ** 2) for j in G.neighbors(1) if honest[j])
    assert tau_u[0] == pytest.approx(math.sqrt(num / 2), rel=1e-12)


def test_uniform_weight_rows_keep_the_old_oracle_radius_bit_for_bit():
    """On a regular graph (uniform rows) the weighted oracle radius is the old one, bit for bit."""
    G = nx.random_regular_graph(4, 12, seed=2)
    honest = np.ones(12, dtype=bool)
    honest[[0, 5]] = False
    x = np.random.default_rng(3).standard_normal((12, 3))
    adj = nx.to_scipy_sparse_array(G, nodelist=range(12), weight=None, format="csr")
    peers = np.flatnonzero(honest)
    old = AdaptiveClip().radius(View(x, honest, Neighbourhood(honest, adj)), peers)
    new = AdaptiveClip().radius(View(x, honest, Neighbourhood(honest, adj, mixing_weights(G))), peers)
    np.testing.assert_array_equal(old, new)


# ----------------------------------------------------------------------------- configs


def _cfg(**kw):
    base = dict(topology="ring:n=10", protocol="neighbourhood", rounds=5)
    base.update(kw)
    return GossipConfig(**base)


@pytest.mark.parametrize("kw,message", [
    ({"adversary": "stubborn", "attack_scope": "local"},
     "'attack_scope' must be global for adversary stubborn (local scope is for alie, ipm and "
     "dissensus; the reference bit-flip is adversary bitflip): 'local'"),
    ({"adversary": "bitflip", "protocol": "edge"},
     "'protocol' must be neighbourhood or allreduce for adversary bitflip (a bit-flip attacker "
     "trains and aggregates each round): 'edge'"),
    ({"mixing": "uniform", "protocol": "edge"},
     "'mixing' must be metropolis for protocol edge (mixing weights are used by protocol "
     "neighbourhood): 'uniform'"),
    ({"gossip_rounds": 2, "protocol": "matching", "topology": "complete", "nodes": 10},
     "'gossip_rounds' must be 1 for protocol matching (several gossip rounds per step need protocol "
     "neighbourhood or allreduce): 2"),
    ({"mixing": "weight"}, "'weight' must be on every edge with mixing weight (an edge attribute "
     "weight=W): 'edge (0, 1) has none'"),
    ({"mixing": "weight", "topology": "complete", "nodes": 8},
     "'mixing' must be metropolis or uniform on the implicit complete graph (it has no edge "
     "attributes; give a graph file with weight on every edge): 'weight'"),
    ({"adversary": "alie", "attack_scope": "local", "num_adversaries": 7},
     "'adversary_value' must be given for adversary alie with attack_scope local here (the reference "
     "default z = Phi^-1((n - f - s) / (n - f)), s = floor(n / 2 + 1) - f, is nan at n = 10, f = 7): "
     "None"),
])
def test_byzantine_config_messages(kw, message):
    """Scope, bit-flip, mixing, gossip rounds and the undefined default z are refused in one exact line."""
    with pytest.raises(ConfigError) as e:
        _cfg(**kw)
    assert str(e.value) == message


def test_weight_rows_above_one_are_refused():
    """Edge weights summing above 1 at a node are refused naming the node."""
    G = nx.cycle_graph(5)
    for a, b in G.edges():
        G[a][b]["weight"] = 0.4
    G[0][1]["weight"] = 0.7
    with pytest.raises(ConfigError) as e:
        GossipConfig(topology="w", graph=G, protocol="neighbourhood", mixing="weight")
    assert str(e.value) == ("'weight' must be edge weights summing to at most 1 at every node (the self "
                            "weight 1 - sum completes the row): \"node 0's sum to 1.1\"")


def test_training_rule_messages():
    """Krum's 2 f + 2 condition, bucketing with adaptive clipping, momentum range: one line each."""
    g = _cfg(adversary="ipm", num_adversaries=2)
    lc = LearningConfig(objective="quadratic", lr=0.1)
    with pytest.raises(ConfigError) as e:
        GossipTrainingConfig(g, lc, rule="krum")
    assert str(e.value) == ("'krum_f' must be at most (m - 2) / 2 = 0 (Krum needs 2 f + 2 <= the m "
                            "values every aggregating node has; the fewest here is 3; the default f is "
                            "the number of adversaries): 2")
    with pytest.raises(ConfigError, match="'bucketing' must be 0 with adaptive clipping"):
        GossipTrainingConfig(_cfg(adaptive_clip=True, adversary="ipm"), lc, bucketing=2)
    with pytest.raises(ConfigError, match=r"'momentum' must be in \[0, 1\): 1.0"):
        LearningConfig(objective="quadratic", lr=0.1, momentum=1.0)
