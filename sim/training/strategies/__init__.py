"""Fault-tolerance strategies of real systems, one per module, as strategy objects.

* :class:`Swarm` (:mod:`.swarm`): SWARM's rewiring, on the training DES;
* :class:`CheckpointRestart` (:mod:`.checkpoint_restart`): Varuna and CheckFreq;
* :class:`Redundancy` (:mod:`.redundancy`): Bamboo's redundant computation;
* :class:`Reconfiguration` (:mod:`.reconfiguration`): Oobleck's pipeline templates.

The last three run on the step-level job engine (:mod:`.job`), whose step
times come from a measured table or the training DES without failures
(:mod:`.steptime`). :func:`make_strategy` parses ``name[:key=value,...]``;
a registered subclass (:func:`register_strategy`) is named the same way.
"""

from .base import (
    STRATEGIES,
    Formation,
    Strategy,
    make_strategy,
    register_strategy,
    strategy_names,
    strategy_quantities,
)
from .checkpoint_restart import CheckpointRestart
from .common import JobStrategy
from .job import JOB_METRICS, JobSystem, job_model
from .reconfiguration import Reconfiguration
from .redundancy import Redundancy
from .steptime import StepTimes, derived_step_time, merge_stages, read_step_times
from .swarm import Swarm

__all__ = [
    "STRATEGIES", "Formation", "Strategy", "JobStrategy", "make_strategy", "register_strategy",
    "strategy_names", "strategy_quantities", "Swarm", "CheckpointRestart", "Redundancy", "Reconfiguration",
    "JobSystem", "job_model", "JOB_METRICS", "StepTimes", "read_step_times",
    "derived_step_time", "merge_stages",
]
