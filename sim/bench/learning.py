"""The cost of a local step in the ``async`` gossip-training engine, for ``dtsim bench``.

:func:`bench_async_training` runs the ``async`` protocol with a quadratic
objective (every node steps continuously at ``step_time`` and gossips on its
Poisson clock) and reports CPU time per local step, next to the same run
without training (``lr = 0`` keeps every value, so the engine runs its plain
paths) so that the training's own share can be read off as a difference.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import check_int, check_positive
from ..rng import Streams

__all__ = ["bench_async_training", "bench_gossip_training"]


def bench_async_training(nodes: int = 200, horizon: int = 20, dim: int = 10,
                         step_time: float = 0.1, repeats: int = 2,
                         engine: str = "des") -> dict[str, Any]:
    """CPU cost per local step of async gossip training on the complete graph.

    Parameters
    ----------
    nodes : int
        Nodes, each a SimPy process waking at rate 1.
    horizon : int
        Simulated time units.
    dim : int
        Parameter dimension of the quadratic objective.
    step_time : float
        Time of one local step (so about ``nodes * horizon / step_time`` steps).
    repeats : int
        Best (least CPU time) of this many runs.
    engine : {"des", "compiled"}
        The SimPy engine (the figure of issue 16) or the compiled one.

    Returns
    -------
    dict
        ``async_training_local_steps``, ``async_training_s`` (CPU seconds of the
        best run), ``async_training_us_per_local_step``,
        ``async_training_exchanges``, ``async_plain_s`` (the same
        configuration with ``lr = 0``: no training work) and
        ``async_training_us_per_local_step_net`` (the difference per step).
    """
    from ..gossip import GossipConfig, GossipSystem
    from ..learning.config import LearningConfig
    from ..learning.model import GossipTrainingConfig, training_objective
    from ..learning.update import LocalSGD

    n = check_int("nodes", nodes, low=2)
    T = check_int("horizon", horizon, low=1)
    st = check_positive("step_time", step_time)
    g = GossipConfig(topology="complete", nodes=n, protocol="async", rounds=T, record_every=T,
                     dim=check_int("dim", dim, low=1), engine=engine)
    lc = LearningConfig(objective="quadratic", lr=0.1, local_steps=1, grad_noise=0.1,
                        curvature_spread=0.5, step_time=(st,))
    cfg = GossipTrainingConfig(g, lc)
    obj = training_objective(cfg)

    def once(lr: float, k: int) -> tuple[float, int, int]:
        up = LocalSGD(obj, lr, 1, lc.grad_noise, step_time=lc.node_step_times(n))
        system = GossipSystem(g, Streams(0).replication(k), update=up)
        t0 = time.process_time()
        system.run()
        return time.process_time() - t0, up.steps_taken, int(system.exchanges)

    best = min((once(lc.lr, k) for k in range(repeats)), key=lambda r: r[0])
    plain = min(once(0.0, k)[0] for k in range(repeats))
    secs, steps, exch = best
    return {
        "async_training_local_steps": steps,
        "async_training_s": secs,
        "async_training_us_per_local_step": 1e6 * secs / max(steps, 1),
        "async_training_exchanges": exch,
        "async_plain_s": plain,
        "async_training_us_per_local_step_net": 1e6 * (secs - plain) / max(steps, 1),
    }


# --------------------------------------------------------------------------- (l) gossip training


def bench_gossip_training(repeats: int = 2) -> dict[str, float]:
    """CPU cost per local step of async gossip training (:func:`bench_async_training`).

    The SimPy engine's figures, and the compiled engine's with the prefix
    ``async_training_compiled_`` (when numba is installed).
    """
    from ..gossip.compiled import HAVE_NUMBA

    out = {k: v for k, v in bench_async_training(repeats=repeats, engine="des").items()
           if isinstance(v, (int, float))}
    if HAVE_NUMBA:
        bench_async_training(nodes=10, horizon=1, dim=2, repeats=1, engine="compiled")  # compile
        comp = bench_async_training(repeats=repeats, engine="compiled")
        out.update({k.replace("async_training_", "async_training_compiled_"): v
                    for k, v in comp.items() if isinstance(v, (int, float))
                    and k.startswith("async_training_")})
    return out
