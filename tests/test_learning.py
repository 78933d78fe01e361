"""Objectives, data partitions, local steps and the training config of sim.learning."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.learning import (
    LearningConfig,
    LocalSGD,
    Quadratic,
    build_objective,
    load_dataset,
    partition,
    quadratic_from_table,
    read_objective_file,
    training_metrics,
)


def test_quadratic_loss_is_the_mean_objective_gap():
    """Quadratic.loss(m) equals F(m) - F(x*) computed from the definition."""
    rng = np.random.default_rng(0)
    a, c = rng.uniform(0.5, 1.5, (6, 3)), rng.normal(size=(6, 3))
    honest = np.array([True, True, False, True, True, True])
    q = Quadratic(a, c, honest)

    def F(x):
        return np.mean([0.5 * np.sum(a[i] * (x - c[i]) ** 2) for i in np.flatnonzero(honest)])

    m = rng.normal(size=3)
    assert q.loss(m) == pytest.approx(F(m) - F(q.optimum), rel=1e-12)
    np.testing.assert_allclose(q.gradient(np.tile(m, (2, 1)), np.array([1, 4])),
                               a[[1, 4]] * (m - c[[1, 4]]))
    assert q.describe()["nodes"][2] is None


def test_local_sgd_without_noise_is_the_affine_map():
    """H noiseless steps give g x + (1 - g) c with g = (1 - eta a)^H; noise comes from the rng."""
    a, c = np.array([[0.5], [1.5]]), np.array([[1.0], [-2.0]])
    q = Quadratic(a, c, np.ones(2, bool))
    x = np.array([[3.0], [0.5]])
    sgd = LocalSGD(q, 0.3, 4, 0.0)
    sgd.local_steps(x, np.array([0, 1]), rng=np.random.default_rng(1))
    g = (1 - 0.3 * a) ** 4
    np.testing.assert_allclose(x, g * np.array([[3.0], [0.5]]) + (1 - g) * c)
    sgd = LocalSGD(q, 0.3, 2, 0.5)
    noisy1 = sgd.steps(x, np.array([0, 1]), rng=np.random.default_rng(7))
    noisy2 = sgd.steps(x, np.array([0, 1]), rng=np.random.default_rng(7))
    np.testing.assert_array_equal(noisy1, noisy2)
    quiet = LocalSGD(q, 0.3, 2, 0.0).steps(x, np.array([0, 1]), rng=None)
    assert not np.allclose(noisy1, quiet)


def test_async_advance_steps_at_each_nodes_pace():
    """advance() applies floor((phase + elapsed) / step_time) steps and carries the remainder."""
    a, c = np.array([[1.0], [1.0]]), np.array([[0.0], [0.0]])
    sgd = LocalSGD(Quadratic(a, c, np.ones(2, bool)), 0.5, 1, 0.0, step_time=[0.3, 1.0])
    x = np.array([[1.0], [1.0]])
    rng = np.random.default_rng(0)
    sgd.advance(x, 0, 0.7, rng=rng)  # 2 steps, 0.1 left
    sgd.advance(x, 0, 0.2, rng=rng)  # 0.3: one more step
    sgd.advance(x, 1, 0.99, rng=rng)  # none yet
    np.testing.assert_allclose(x[:, 0], [0.5**3, 1.0])
    assert sgd.steps_taken == 3


def test_softmax_gradient_matches_finite_differences():
    """The softmax-regression gradient equals central differences of its loss (iris)."""
    cfg = LearningConfig(objective="logistic", lr=0.1, data="iris", partition="iid")
    honest = np.ones(4, bool)
    obj = build_objective(cfg, 4, cfg.dimension(1), honest)
    rng = np.random.default_rng(2)
    w = rng.normal(size=obj.dim)
    g = obj.gradient(w[None, :], np.array([1]))[0]
    h = 1e-6
    for k in rng.choice(obj.dim, 5, replace=False):
        e = np.zeros(obj.dim)
        e[k] = h
        fd = (obj._node_loss_grad(w + e, 1)[0] - obj._node_loss_grad(w - e, 1)[0]) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert obj.loss(obj.optimum) == pytest.approx(0.0, abs=1e-12)
    assert obj.loss(np.zeros(obj.dim)) > 0.1


def test_digits_optimum_classifies_held_out_data():
    """The honest optimum on digits reaches > 90 % held-out accuracy; zero weights about 10 %."""
    cfg = LearningConfig(objective="logistic", lr=0.05, data="digits")
    obj = build_objective(cfg, 8, cfg.dimension(1), np.ones(8, bool))
    assert obj.dim == 650
    assert obj.test_accuracy(obj.optimum) > 0.9
    assert obj.test_accuracy(np.zeros(obj.dim)) < 0.2
    met = training_metrics(obj, np.tile(obj.optimum, (3, 1)))
    assert met["loss"] == pytest.approx(0.0, abs=1e-9)
    assert met["consensus_distance"] < 1e-25


def test_partitions_cover_every_sample_once_and_dirichlet_skews():
    """iid and Dirichlet shards are a partition; small alpha concentrates classes."""
    data = load_dataset("digits", test_fraction=0.25, rng=np.random.default_rng(0))
    y = data.y_train
    for kind, alpha in (("iid", 1.0), ("dirichlet", 0.1), ("dirichlet", 100.0)):
        shards = partition(y, 10, kind=kind, alpha=alpha, rng=np.random.default_rng(1))
        allidx = np.concatenate(shards)
        assert np.array_equal(np.sort(allidx), np.arange(y.size))

    def top_share(alpha):
        shards = partition(y, 10, kind="dirichlet", alpha=alpha, rng=np.random.default_rng(3))
        shares = [np.bincount(y[s], minlength=10).max() / max(s.size, 1) for s in shards if s.size]
        return np.mean(shares)

    assert top_share(0.05) > 0.6 > 0.3 > top_share(100.0)
    with pytest.raises(ConfigError, match=r"^'alpha' must be > 0: 0.0$"):
        LearningConfig(objective="logistic", partition="dirichlet", alpha=0.0)


def test_objective_file_rows(tmp_path):
    """A CSV objective is read into values; missing honest nodes or dims are refused."""
    p = tmp_path / "obj.csv"
    p.write_text("node,dim,curvature,optimum\n0,0,1.0,2.0\n1,0,0.5,-1\n2,0,2.0,0.0\n")
    table = read_objective_file(str(p))
    assert table == ((0, 0, 1.0, 2.0), (1, 0, 0.5, -1.0), (2, 0, 2.0, 0.0))
    a, c = quadratic_from_table(table, 3, 1, np.ones(3, bool))
    np.testing.assert_array_equal(a[:, 0], [1.0, 0.5, 2.0])
    with pytest.raises(ConfigError) as exc:
        quadratic_from_table(table, 4, 1, np.ones(4, bool))
    assert str(exc.value) == ("'objective_file' must be a row for every honest node and dim "
                              "(1 missing, first node 3 dim 0): 'incomplete'")
    # an adversary's row may be absent
    quadratic_from_table(table, 4, 1, np.array([True, True, True, False]))
    with pytest.raises(ConfigError, match="first node 0 dim 1"):
        quadratic_from_table(table, 3, 2, np.ones(3, bool))
    with pytest.raises(ConfigError, match=r"'objective_file' must be dims in 0..0 \(dim = 1\)"):
        quadratic_from_table(table + ((0, 1, 1.0, 0.0),), 3, 1, np.ones(3, bool))
    with pytest.raises(ConfigError, match="'objective_file' must be a readable CSV file"):
        read_objective_file(str(tmp_path / "nope.csv"))


def test_config_refuses_bad_values():
    """Unknown data, a divergent step (naming the node), a step_time of the wrong length."""
    with pytest.raises(ConfigError, match=r"^'data' must be one of digits, iris, breast_cancer, wine: 'mnist'$"):
        LearningConfig(objective="logistic", data="mnist")
    cfg = LearningConfig(objective="quadratic", lr=1.5, curvature_spread=0.5, objective_seed=3)
    honest = np.ones(8, bool)
    a, _ = cfg.quadratic_arrays(8, 2, honest)
    bad = np.argwhere(1.5 * a >= 2)[0]
    with pytest.raises(ConfigError) as exc:
        cfg.validate_for(8, 2, honest, "matching")
    assert f"(node {bad[0]}, dim {bad[1]} has lr * curvature = " in str(exc.value)
    with pytest.raises(ConfigError, match=r"'step_time' must be one value or one per node \(8\): 3"):
        LearningConfig(objective="quadratic", step_time=(1.0, 2.0, 3.0)).validate_for(
            8, 1, honest, "async")
    with pytest.raises(ConfigError, match="'step_time' must be > 0 for protocol async"):
        LearningConfig(objective="quadratic").validate_for(8, 1, honest, "async")


def test_missing_extra_names_the_install_command(monkeypatch):
    """Without scikit-learn the logistic objective is refused with the pip command."""
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ConfigError) as exc:
        LearningConfig(objective="logistic")
    assert str(exc.value) == ("'objective' must be installed with the learn extra "
                              "(pip install 'dtsim[learn]'): 'logistic'")


def test_bench_async_training_counts_steps():
    """The bench function reports the local steps it ran and a positive cost per step."""
    from sim.bench.learning import bench_async_training

    out = bench_async_training(nodes=10, horizon=3, dim=2, step_time=0.5, repeats=1)
    assert out["async_training_local_steps"] == 10 * 6
    assert out["async_training_us_per_local_step"] > 0
