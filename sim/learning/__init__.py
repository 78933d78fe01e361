"""Gossip training: node objectives, local steps, data and the training config.

The gossip engines make values *train* by calling a node update between
exchanges; this package supplies it (:class:`LocalSGD`) and the objectives it
asks for gradients (:class:`Quadratic`, :class:`SoftmaxRegression` on a
scikit-learn bundled dataset). The exact references on quadratics live in
:mod:`sim.analytic.learning`. :mod:`.fastest_k` is SGD that waits for the
fastest k of n workers (references in :mod:`sim.analytic.fastest_k`).
"""

from .config import DATASET_SHAPES, OBJECTIVES, LearningConfig, build_objective
from .data import DATASETS, INSTALL_HINT, PARTITIONS, Dataset, load_dataset, partition
from .fastest_k import (
    ESTIMATORS,
    FastestKConfig,
    fastest_k_inclusion,
    fastest_k_model,
    speed_correlated_centers,
)
from .model import (
    PLACEMENTS,
    RULES,
    GossipTrainingConfig,
    TrainingRecords,
    gossip_training_model,
    place_adversaries,
    summarize_training,
    training_engine,
    training_objective,
    training_predictions,
    with_learning,
)
from .objectives import (
    Objective,
    Quadratic,
    SoftmaxRegression,
    draw_quadratic,
    quadratic_from_table,
    read_objective_file,
)
from .robust import CoordinateMedian, FarthestClip, TrimmedMean
from .update import METRICS, LocalSGD, training_metrics

#: The names these had before sim.training's ``TrainingConfig`` and
#: ``training_model`` became the only ones (one public name per thing): kept,
#: without a warning and out of ``__all__``, for scripts copied from the
#: experiments before the rename.
TrainingConfig = GossipTrainingConfig
training_model = gossip_training_model

__all__ = [
    "OBJECTIVES",
    "DATASET_SHAPES",
    "DATASETS",
    "PARTITIONS",
    "INSTALL_HINT",
    "METRICS",
    "LearningConfig",
    "build_objective",
    "Dataset",
    "load_dataset",
    "partition",
    "Objective",
    "Quadratic",
    "SoftmaxRegression",
    "draw_quadratic",
    "quadratic_from_table",
    "read_objective_file",
    "LocalSGD",
    "training_metrics",
    "RULES",
    "PLACEMENTS",
    "GossipTrainingConfig",
    "TrainingRecords",
    "place_adversaries",
    "summarize_training",
    "training_engine",
    "gossip_training_model",
    "training_objective",
    "training_predictions",
    "with_learning",
    "FarthestClip",
    "CoordinateMedian",
    "TrimmedMean",
    "ESTIMATORS",
    "FastestKConfig",
    "fastest_k_model",
    "fastest_k_inclusion",
    "speed_correlated_centers",
]
