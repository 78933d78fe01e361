"""``dtsim bench``: every performance figure of one run, side by side, as ratios to SimPy.

The benches stand above what they measure, one module per part of the house:

:mod:`.suite`
    The yardstick, the parts of the library's core (pipeline, gossip, sweep,
    memory, PeerSim, plans), the targets and :func:`run_bench`.
:mod:`.training`
    Passes per bare SimPy timeout of the training engines.
:mod:`.learning`
    The cost per local step of async gossip training.
:mod:`.network`
    The flow model against SimGrid, and the cost of contention.
:mod:`.planner`
    The plan search on a 64-GPU mixed fleet.
"""

from .suite import *  # noqa: F403
from .suite import SIZES, __all__, peersim_skip_reason  # noqa: F401
