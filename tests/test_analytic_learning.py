"""Exact references of gossip training on quadratics against an independent Monte Carlo."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from sim.analytic import learning as L
from sim.errors import ConfigError

SE_TOL = 4.0


def _problem(n, d, seed, spread=0.5):
    rng = np.random.default_rng(seed)
    return rng.uniform(1 - spread, 1 + spread, (n, d)), rng.normal(0.0, 2.0, (n, d))


def _local(y, nodes, a, c, eta, H, sigma, rng, honest):
    """H explicit noisy gradient steps on the rows of honest nodes (brute force)."""
    train = honest[nodes][..., None]
    for _ in range(H):
        g = a[nodes] * (y - c[nodes]) + sigma * rng.standard_normal(y.shape)
        y = np.where(train, y - eta * g, y)
    return y


def _mc_edge(G, a, c, eta, H, sigma, stub, T, R, seed, mu0=1.0, sd0=0.7, noise=0.0):
    """Replications of random-edge gossip training, written from the model statement."""
    rng = np.random.default_rng(seed)
    n, d = a.shape
    edges = np.array(G.edges())
    honest = np.ones(n, bool)
    for p in stub:
        honest[p] = False
    x = rng.normal(mu0, sd0, (R, n, d))
    for p, b in stub.items():
        x[:, p] = b
    xs = L.honest_optimum(a, c, honest)
    rec = {"mean": [], "cons": [], "sq": []}
    ar = np.arange(R)
    for t in range(T + 1):
        hm = x[:, honest].mean(axis=1)
        rec["mean"].append(hm)
        rec["cons"].append(((x[:, honest] - hm[:, None]) ** 2).sum(axis=(1, 2)) / honest.sum())
        rec["sq"].append(((hm - xs) ** 2).sum(axis=1))
        if t == T:
            break
        if noise:
            x[:, honest] += noise * rng.standard_normal((R, int(honest.sum()), d))
        e = edges[rng.integers(len(edges), size=R)]
        i, j = e[:, 0], e[:, 1]
        yi = _local(x[ar, i], i, a, c, eta, H, sigma, rng, honest)
        yj = _local(x[ar, j], j, a, c, eta, H, sigma, rng, honest)
        avg = (yi + yj) / 2
        x[ar, i] = np.where(honest[i][:, None], avg, x[ar, i])
        x[ar, j] = np.where(honest[j][:, None], avg, x[ar, j])
    return {k: np.array(v) for k, v in rec.items()}


def _mc_matching(a, c, eta, H, stub, T, R, seed, x0=-1.0):
    rng = np.random.default_rng(seed)
    n, d = a.shape
    honest = np.ones(n, bool)
    for p in stub:
        honest[p] = False
    x = np.full((R, n, d), x0)
    for p, b in stub.items():
        x[:, p] = b
    out = []
    ar = np.arange(R)[:, None]
    for _ in range(T + 1):
        out.append(x[:, honest].mean(axis=1))
        y = x.copy()
        for _h in range(H):
            y[:, honest] -= eta * a[honest] * (y[:, honest] - c[honest])
        perm = np.argsort(rng.random((R, n)), axis=1)
        A, B = perm[:, 0::2], perm[:, 1::2]
        avg = (y[ar, A] + y[ar, B]) / 2
        y[ar, A] = avg
        y[ar, B] = avg
        for p, b in stub.items():
            y[:, p] = b
        x = y
    return np.array(out)


def _z(sim, exact):
    """Largest |mean - exact| / SE over the given points."""
    m = sim.mean(axis=1)
    se = sim.std(axis=1, ddof=1) / np.sqrt(sim.shape[1])
    return np.max(np.abs(m - exact) / se)


def test_edge_moments_ring_with_stubborn_and_noise_quick():
    """The ring check below with 5000 replications: the noiseless model rejected by more than
    6 SE (10 in the full version)."""
    _edge_moments_ring(5000, quiet_se=6.0)


@pytest.mark.slow  # the 5000-replication version above stays in the default suite
def test_edge_moments_ring_with_stubborn_and_noise():
    """Ring of 8, a stubborn node, H = 3, gradient noise: mean, consensus and distance exact."""
    _edge_moments_ring(20000, quiet_se=10.0)


def _edge_moments_ring(R: int, quiet_se: float) -> None:
    G = nx.cycle_graph(8)
    a, c = _problem(8, 2, 1)
    stub = {2: 5.0}
    eta, H, sigma, T = 0.3, 3, 1.5, 40
    sim = _mc_edge(G, a, c, eta, H, sigma, stub, T, R=R, seed=11)
    ex = L.edge_training_moments(G, a, c, eta, H, T, grad_noise=sigma, init_mean=1.0,
                                 init_std=0.7, stubborn=stub)
    pts = [3, 10, 25, 40]
    for k in range(2):
        zk = _z(sim["mean"][pts][:, :, k], ex["honest_mean"][pts, k])
        assert zk < SE_TOL, (k, zk)
    assert _z(sim["cons"][pts], ex["consensus_distance"][pts]) < SE_TOL
    assert _z(sim["sq"][pts], ex["sq_distance_to_optimum"][pts]) < SE_TOL
    # the intervals are tight: SE of the consensus distance below 2 % of it
    cons = sim["cons"][40]
    assert cons.std() / np.sqrt(cons.size) < 0.02 * cons.mean()
    # the first-moment recursion agrees with the second-moment one
    fm = L.training_mean("edge", a, c, eta, H, T, graph=G, stubborn=stub, x0=1.0).mean(axis=1)
    np.testing.assert_allclose(fm, ex["honest_mean"], rtol=1e-10, atol=1e-12)
    # wrong models are rejected: one local step instead of three, or no gradient noise
    wrong = L.training_mean("edge", a, c, eta, 1, T, graph=G, stubborn=stub, x0=1.0).mean(axis=1)
    assert _z(sim["mean"][pts][:, :, 0], wrong[pts, 0]) > 10
    quiet = L.edge_training_moments(G, a, c, eta, H, T, grad_noise=0.0, init_mean=1.0,
                                    init_std=0.7, stubborn=stub)
    assert _z(sim["cons"][pts], quiet["consensus_distance"][pts]) > quiet_se


def test_edge_moments_gossip_noise_and_loss():
    """Random 3-regular graph, no adversary, gossip noise and gradient noise; loss = abar/2 sq."""
    G = nx.random_regular_graph(3, 10, seed=4)
    a, c = _problem(10, 1, 2)
    eta, H, sigma, s, T = 0.2, 2, 0.3, 0.2, 60
    sim = _mc_edge(G, a, c, eta, H, sigma, {}, T, R=5000, seed=12, noise=s)
    ex = L.edge_training_moments(G, a, c, eta, H, T, grad_noise=sigma, noise=s, init_mean=1.0,
                                 init_std=0.7)
    pts = [5, 30, 60]
    assert _z(sim["cons"][pts], ex["consensus_distance"][pts]) < SE_TOL
    assert _z(sim["sq"][pts], ex["sq_distance_to_optimum"][pts]) < SE_TOL
    np.testing.assert_allclose(ex["loss"], a.mean(axis=0)[0] / 2 * ex["sq_distance_to_optimum"])
    without = L.edge_training_moments(G, a, c, eta, H, T, grad_noise=sigma, init_mean=1.0,
                                      init_std=0.7)
    assert _z(sim["cons"][pts], without["consensus_distance"][pts]) > 10


def test_edge_moments_reduce_to_averaging():
    """lr = 0: the second-moment recursion gives the averaging disagreement of sim.analytic."""
    from sim.analytic import edge_gossip_disagreement

    G = nx.cycle_graph(6)
    a, c = _problem(6, 1, 3)
    ex = L.edge_training_moments(G, a, c, 0.0, 2, 30, init_mean=0.0, init_std=1.0)
    D = edge_gossip_disagreement(G, 30)
    np.testing.assert_allclose(ex["consensus_distance"] * 6, D, rtol=1e-9)


def test_matching_first_moment_complete_graph_with_stubborn():
    """Complete graph of 6, perfect matchings, a stubborn node: E[m_t] and the equilibrium."""
    a, c = _problem(6, 1, 2)
    stub = {0: 3.0}
    eta, H, T = 0.2, 4, 15
    sim = _mc_matching(a, c, eta, H, stub, T, R=40000, seed=5)
    ex = L.training_mean("matching", a, c, eta, H, T, stubborn=stub, x0=-1.0).mean(axis=1)
    pts = [1, 3, 8, 15]
    assert _z(sim[pts][:, :, 0], ex[pts, 0]) < SE_TOL
    eq = L.training_equilibrium("matching", a, c, eta, H, stubborn=stub)
    # dense check of the closed-form equilibrium: E[W] diag(g) with the stubborn row fixed
    n = 6
    honest = np.arange(n) != 0
    g = (1 - eta * a[:, 0]) ** H
    EW = np.full((n, n), 1 / (2 * (n - 1)))
    np.fill_diagonal(EW, 0.5)
    M = EW @ np.diag(np.where(honest, g, 0.0))
    v = EW @ np.where(honest, (1 - g) * c[:, 0], 3.0)
    xh = np.linalg.solve(np.eye(n - 1) - M[np.ix_(honest, honest)], v[honest])
    np.testing.assert_allclose(eq[:, 0], xh, rtol=1e-12)
    np.testing.assert_allclose(ex[-1, 0], L.training_mean(
        "matching", a, c, eta, H, 400, stubborn=stub, x0=-1.0).mean(axis=1)[-1, 0], atol=0.05)
    # wrong models: the edge capture law's equilibrium (b) and the untrained mean
    assert _z(sim[[15]][:, :, 0], np.array([3.0])) > 10
    untrained = L.training_mean("matching", a, c, 0.0, H, T, stubborn=stub, x0=-1.0).mean(axis=1)
    assert _z(sim[pts][:, :, 0], untrained[pts, 0]) > 10


def test_training_equilibrium_edge_is_the_harmonic_extension_without_training():
    """lr = 0 with a stubborn node: the edge equilibrium is capture at b (harmonic extension)."""
    G = nx.path_graph(5)
    a, c = _problem(5, 1, 1)
    eq = L.training_equilibrium("edge", a, c, 0.0, 1, graph=G, stubborn={4: 2.5})
    np.testing.assert_allclose(eq[:, 0], 2.5)
    # with training the honest mean settles between x* and b
    out = L.stubborn_training_bias("edge", a, c, 0.2, 2, {4: 2.5}, graph=G)
    xs = out["optimum"][0]
    assert min(xs, 2.5) < out["honest_mean"][0] < max(xs, 2.5)
    np.testing.assert_allclose(out["bias"], out["honest_mean"] - out["optimum"])
    assert np.isfinite(out["attack_bias"]).all()


def test_equilibrium_is_the_long_run_of_the_first_moment():
    """The solved fixed point equals the iterated first moment, on edge, matching and allreduce."""
    G = nx.random_regular_graph(3, 12, seed=1)
    a, c = _problem(12, 2, 7)
    stub = {3: -1.0, 7: 4.0}
    for proto, graph, T in (("edge", G, 6000), ("matching", None, 300), ("allreduce", None, 300),
                            ("neighbourhood", G, 600)):
        eq = L.training_equilibrium(proto, a, c, 0.25, 3, graph=graph, stubborn=stub)
        it = L.training_mean(proto, a, c, 0.25, 3, T, graph=graph, stubborn=stub, x0=0.0)[-1]
        np.testing.assert_allclose(it, eq, rtol=1e-6, atol=1e-8)
        t = L.steps_to_equilibrium(proto, a, c, 0.25, 3, graph=graph, stubborn=stub, x0=0.0,
                                   tol=0.01)
        assert 0 < t < T


def test_diloco_fixed_point():
    """All-reduce after H local steps: weighted mean of the c_i, optimum at H = 1, plain mean as H grows."""
    a, c = _problem(5, 3, 9, spread=0.8)
    eta = 0.3
    for H in (1, 2, 5, 40):
        fp = L.diloco_fixed_point(a, c, eta, H)
        it = L.training_mean("allreduce", a, c, eta, H, 2000, x0=0.0)[-1, 0]
        np.testing.assert_allclose(it, fp, rtol=1e-9, atol=1e-12)
        w = 1 - (1 - eta * a) ** H
        np.testing.assert_allclose(fp, (w * c).sum(0) / w.sum(0))
    np.testing.assert_allclose(L.diloco_fixed_point(a, c, eta, 1), L.honest_optimum(a, c))
    far = L.diloco_fixed_point(a, c, eta, 2000)
    np.testing.assert_allclose(far, c.mean(axis=0), atol=1e-12)
    # noisy all-reduce by Monte Carlo: the long-run mean is the fixed point, not the optimum
    rng = np.random.default_rng(3)
    H, sigma, R = 5, 0.5, 5000
    x = np.zeros((R, 3))
    for _ in range(60):
        y = np.repeat(x[:, None, :], 5, axis=1)
        for _h in range(H):
            y -= eta * (a * (y - c) + sigma * rng.standard_normal(y.shape))
        x = y.mean(axis=1)
    fp = L.diloco_fixed_point(a, c, eta, H)
    se = x.std(axis=0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(x.mean(0) - fp) < SE_TOL * se)
    assert np.any(np.abs(x.mean(0) - L.honest_optimum(a, c)) > 10 * se)


def test_local_gain_and_noise_variance():
    """g = (1 - eta a)^H and q = eta^2 sigma^2 sum_h (1 - eta a)^(2h), also at eta a = 2 - eps."""
    a = np.array([[0.5, 1.0]])
    np.testing.assert_allclose(L.local_gain(a, 0.4, 3), (1 - 0.4 * a) ** 3)
    q = L.local_noise_variance(a, 0.4, 3, 0.5)
    r = 1 - 0.4 * a
    np.testing.assert_allclose(q, 0.16 * 0.25 * (1 + r**2 + r**4))
    np.testing.assert_allclose(L.local_noise_variance(np.array([[1.0]]), 0.0, 4, 1.0), 0.0)


def test_refuses_divergent_step_naming_the_node():
    """lr * a >= 2 at an honest node is refused in one line naming node and dim."""
    a = np.array([[1.0], [2.5], [1.0]])
    with pytest.raises(ConfigError) as exc:
        L.training_mean("allreduce", a, np.zeros_like(a), 0.8, 1, 3)
    assert str(exc.value) == ("'lr' must be < 2 / curvature at every honest node (node 1, dim 0 "
                              "has lr * curvature = 2): 0.8")
    # a stubborn row is not checked
    L.training_mean("allreduce", a, np.zeros_like(a), 0.8, 1, 3, stubborn={1: 0.0})
    with pytest.raises(ConfigError, match="'lr' must be > 0 .or a stubborn node present."):
        L.training_equilibrium("allreduce", a, np.zeros_like(a), 0.0, 1)
