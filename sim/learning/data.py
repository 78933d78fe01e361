"""Real classification data for gossip training: scikit-learn's bundled datasets.

The datasets ship inside scikit-learn (no download). scikit-learn is an
optional extra, ``pip install 'dtsim[learn]'``; without it :func:`load_dataset`
refuses with that command. A dataset is split once into train and test
(stratified, from a generator the caller passes), standardised with the
training statistics, and its training part partitioned across nodes:

``iid``
    a random permutation cut into ``n`` near-equal shards;
``dirichlet``
    for every class, node shares drawn from ``Dirichlet(alpha 1_n)`` and the
    class's samples cut in those proportions (Hsu, Qi, Brown 2019): small
    ``alpha`` gives each node a few classes, large ``alpha`` tends to iid. A
    node may receive no sample; its local loss is then the regulariser alone.

References
----------
.. [1] T.-M. H. Hsu, H. Qi, M. Brown, "Measuring the effects of non-identical
   data distribution for federated visual classification", 2019.
.. [2] F. Pedregosa et al., "Scikit-learn: machine learning in Python", JMLR 12, 2011.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, check, check_choice, check_positive

__all__ = ["DATASETS", "PARTITIONS", "INSTALL_HINT", "Dataset", "load_dataset", "partition"]

#: Dataset names and the scikit-learn loader of each.
DATASETS = {
    "digits": "load_digits",
    "iris": "load_iris",
    "breast_cancer": "load_breast_cancer",
    "wine": "load_wine",
}
PARTITIONS = ("iid", "dirichlet")
INSTALL_HINT = "pip install 'dtsim[learn]'"


@dataclass(frozen=True)
class Dataset:
    """A standardised train/test split (features without the bias column)."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: int

    @property
    def features(self) -> int:
        """Number of input features."""
        return int(self.X_train.shape[1])


def require_sklearn() -> object:
    """Import :mod:`sklearn.datasets`, or refuse in one line naming the install command."""
    try:
        import sklearn.datasets as skd
    except ImportError:
        raise ConfigError("objective", f"installed with the learn extra ({INSTALL_HINT})",
                          "logistic") from None
    return skd


def load_dataset(name: str, *, test_fraction: float, rng: np.random.Generator) -> Dataset:
    """Load a bundled dataset, split it (stratified) and standardise it.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    test_fraction : float
        Share of every class held out for testing, in (0, 1).
    rng : numpy.random.Generator
        Draws the split.

    Returns
    -------
    Dataset
    """
    check_choice("data", name, DATASETS)
    check(0.0 < float(test_fraction) < 1.0, "test_fraction", "in (0, 1)", test_fraction)
    skd = require_sklearn()
    X, y = getattr(skd, DATASETS[name])(return_X_y=True)
    X = np.asarray(X, dtype=float)
    _, y = np.unique(np.asarray(y), return_inverse=True)
    test = np.zeros(y.size, dtype=bool)
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        k = int(round(test_fraction * idx.size))
        test[rng.permutation(idx)[:k]] = True
    Xtr, Xte = X[~test], X[test]
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return Dataset(name, (Xtr - mu) / sd, y[~test], (Xte - mu) / sd, y[test], int(y.max()) + 1)


def partition(y: np.ndarray, nodes: int, *, kind: str = "iid", alpha: float = 1.0,
              rng: np.random.Generator) -> list[np.ndarray]:
    """Split sample indices across ``nodes`` (iid or Dirichlet non-iid).

    Parameters
    ----------
    y : numpy.ndarray
        Class labels ``0 .. C-1`` of the training samples.
    nodes : int
    kind : {"iid", "dirichlet"}
    alpha : float
        Dirichlet concentration (> 0), ``dirichlet`` only.
    rng : numpy.random.Generator

    Returns
    -------
    list of numpy.ndarray
        Sorted sample indices of every node.

    Notes
    -----
    ``dirichlet``: for each class ``c`` with samples ``I_c``, draw
    :math:`p \\sim \\mathrm{Dir}(\\alpha 1_n)` and give node ``i`` the samples of
    ``I_c`` (shuffled) between the cut points
    :math:`\\mathrm{round}(|I_c| \\sum_{j<i} p_j)` and
    :math:`\\mathrm{round}(|I_c| \\sum_{j\\le i} p_j)`.

    References
    ----------
    .. [1] T.-M. H. Hsu, H. Qi, M. Brown, "Measuring the effects of non-identical
       data distribution for federated visual classification", 2019.
    """
    check_choice("partition", kind, PARTITIONS)
    if kind == "iid":
        return [np.sort(s) for s in np.array_split(rng.permutation(y.size), nodes)]
    a = check_positive("alpha", alpha)
    shards: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for cls in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == cls))
        p = rng.dirichlet(np.full(nodes, a))
        cuts = np.round(np.cumsum(p) * idx.size).astype(np.int64)
        cuts[-1] = idx.size
        for i, part in enumerate(np.split(idx, cuts[:-1])):
            shards[i].append(part)
    return [np.sort(np.concatenate(s)) if s else np.empty(0, dtype=np.int64) for s in shards]
