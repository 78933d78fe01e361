"""Pipeline training in simulated wall clock: replicas as servers, steps, schedules, failures.

A different model from Study A's open-arrival snapshot pipeline
(:mod:`sim.pipeline`), sharing its failure model, placements and skip
penalty. Pieces, one module each:

* :mod:`.config`: :class:`TrainingConfig` (values only) and :func:`read_speeds`;
* :mod:`.routing`: routing policies (strategy objects);
* :mod:`.schedules`: GPipe, 1F1B (fixed order and dynamic), interleaved 1F1B,
  SWARM, async (strategy objects) and the frameworks' device programs;
* :mod:`.framework`: devices running those programs (blocking point-to-point,
  interleaving);
* :mod:`.replica`: replica servers, spot slots, interrupt causes;
* :mod:`.flow`: microbatch movement, failover, recompute, skip and wait;
* :mod:`.traffic`: the one adapter from the training system's traffic to time
  (the closed form, or flows on :mod:`sim.network`), chosen once per run;
* :mod:`.trainer`: steps, sync, checkpoint and restart;
* :mod:`.system`: build, wire, run, metrics (:func:`training_model`);
* :mod:`.engines`: the engines and exact references of family ``"training"``;
* :mod:`.compiled` and :mod:`.kernel`: the compiled (numba) event loop of the same
  model for the configs it accepts (``--engine compiled``).

:mod:`sim.bench.training` measures the engines' speed.
"""

from .config import (
    ARRIVALS,
    FIXED,
    P2PS,
    PAIRS,
    PASS_TIME_DISTRIBUTIONS,
    ROUTINGS,
    SCHEDULES,
    SYNCS,
    TrainingConfig,
    host_groups,
    read_speeds,
    replica_name,
    stage_workers,
)
from .routing import ROUTING_POLICIES, Routing
from .schedules import SCHEDULE_POLICIES, Schedule
from .system import METRICS, TrainingSystem, training_model

__all__ = [
    "ARRIVALS", "FIXED", "P2PS", "PAIRS", "PASS_TIME_DISTRIBUTIONS", "ROUTINGS", "SCHEDULES", "SYNCS",
    "TrainingConfig", "host_groups", "read_speeds", "replica_name", "stage_workers", "ROUTING_POLICIES", "Routing",
    "SCHEDULE_POLICIES", "Schedule", "METRICS", "TrainingSystem", "training_model",
]
from . import engines  # noqa: F401,E402  (registers the family's engine and references)
