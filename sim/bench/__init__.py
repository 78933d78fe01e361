"""``dtsim bench``: every performance figure of one run, side by side, as ratios to SimPy.

The benches stand above what they measure, one module per part of the house
(:data:`MEASURED_BY` maps each part of ``dtsim bench --parts`` to its module):

:mod:`.suite`
    The parts, their sizes, the targets and :func:`run_bench`, which runs them.
:mod:`.timing`
    The clock and the yardstick (bare SimPy timeouts per CPU second).
:mod:`.pipeline`, :mod:`.gossip`, :mod:`.training`, :mod:`.learning`, :mod:`.network`
    The simulators of each package: Study A's pipeline engines; gossip's async
    DES, matching and records; the training engines; async gossip training;
    the flow model against SimGrid and the cost of contention.
:mod:`.plans`, :mod:`.planner`
    Real plans simulated and evaluated; the plan search on a 64-GPU fleet.
:mod:`.learners`
    DiLoCo's learners engine at 10^6 chips.
:mod:`.sweep`, :mod:`.memory`, :mod:`.machine`, :mod:`.peersim`
    Sweeps on local and Dask workers; peak memory; the compiled gossip engine
    against a C loop; and against PeerSim.
:mod:`.timeline`
    The cost of ``--timeline``: a recorded training run and its file over the plain run.
"""

from .gossip import MATCHING_SIZES
from .peersim import peersim_skip_reason
from .suite import (
    MEASURED_BY,
    PARTS,
    SIZES,
    TARGETS,
    Target,
    append_jsonl,
    check_targets,
    is_bench_history,
    run_bench,
)

__all__ = ["MATCHING_SIZES", "MEASURED_BY", "PARTS", "SIZES", "TARGETS", "Target", "append_jsonl",
           "is_bench_history", "check_targets", "peersim_skip_reason", "run_bench"]
