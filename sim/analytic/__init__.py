"""Closed forms and exact recursions that the simulations are checked against.

Everything here is a pure function of its arguments: no simulation, no random
numbers. Inputs are validated with the helpers of :mod:`sim.errors`, under the
CLI's parameter names, so a bad value surfaces as one line. One module per
family; this face only hands their names on, so ``from sim.analytic import
drop_probability`` and ``sim.analytic.drop_probability`` work for every name
below, as ``sim.analytic.pipeline.drop_probability`` does.

:mod:`.pipeline`
    Study A, replicate or skip pipeline stages (:mod:`sim.pipeline`):
    :func:`drop_probability`, :func:`min_replicas`, :func:`optimal_design`,
    :func:`kappa_sweep`, ...; any placement of replicas onto nested failure
    domains: :func:`out_stage_distribution`, :func:`exact_drop_probability`.
:mod:`.penalty`
    The skip penalty (:class:`SkipPenalty`, :func:`quality_table`), shared by
    Study A and the training pipeline.
:mod:`.gossip`
    Study B, a stubborn node in gossip averaging (:mod:`sim.gossip`):
    :func:`matching_contraction`, :func:`creep_bound`, ...; random-edge gossip
    on any graph: :func:`edge_gossip_rate`, :func:`stubborn_honest_mean`, ...;
    async gossip under churn.
:mod:`.trace_design`
    Study A's design on a trace of counts of workers up.
:mod:`.training`, :mod:`.queueing`, :mod:`.strategies`, :mod:`.partition`, :mod:`.network`
    The training pipeline (step times, schedules, M/M/c stations), the queueing
    pipeline, fault-tolerance strategies of real systems, cutting a chain of
    layers across devices, ring all-reduce on a network.
:mod:`.checkpointing`
    The checkpoint interval: the exact Lambert-W optimum, Young and Daly.
:mod:`.order_statistics`, :mod:`.fastest_k`
    Waiting for the fastest ``k`` of ``n``, and SGD on them.
:mod:`.learning`
    Gossip training (:mod:`sim.learning`).
:mod:`.diloco`
    DiLoCo across zones (:mod:`sim.training.outer`): payloads, outer syncs,
    fragments, the lockstep wall time and utilisation, the first moment on
    quadratics against wall clock.

Each function states its formula under Notes and its source under References.
"""

from . import (
    checkpointing,
    diloco,
    fastest_k,
    gossip,
    learning,
    order_statistics,
    partition,
    penalty,
    pipeline,
    queueing,
    strategies,
    trace_design,
    training,
)
from .checkpointing import *  # noqa: F403
from .diloco import *  # noqa: F403
from .fastest_k import *  # noqa: F403
from .gossip import *  # noqa: F403
from .learning import *  # noqa: F403
from .order_statistics import *  # noqa: F403
from .partition import *  # noqa: F403
from .penalty import *  # noqa: F403
from .pipeline import *  # noqa: F403
from .queueing import *  # noqa: F403
from .strategies import *  # noqa: F403
from .trace_design import *  # noqa: F403
from .training import *  # noqa: F403

__all__ = [
    *pipeline.__all__,
    *penalty.__all__,
    *gossip.__all__,
    *training.__all__,
    *queueing.__all__,
    *learning.__all__,
    *checkpointing.__all__,
    *order_statistics.__all__,
    *fastest_k.__all__,
    *trace_design.__all__,
    *strategies.__all__,
    *partition.__all__,
    *diloco.__all__,
]
