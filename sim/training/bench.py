"""Speed of the training DES: passes per bare SimPy timeout (for ``dtsim bench``).

The figure is a ratio measured in one run, so it does not depend on the
machine: the passes per CPU second of :data:`BENCH_CONFIG` (48 stages of 8
replicas with failures) over the timeouts per CPU second of one bare SimPy
process yielding ``timeout(1)``.
"""

from __future__ import annotations

import time

import simpy

from ..rng import Streams
from .config import TrainingConfig
from .system import TrainingSystem

__all__ = ["BENCH_CONFIG", "bare_timeouts_per_second", "measure_pass_rate"]

#: 48 stages x 8 replicas (384 workers of availability 0.9, outages of mean 50
#: forward times), SWARM steps of 512 microbatches (a contended pipeline: more
#: than the 384 replicas can hold at once) from one shared queue per stage,
#: backward twice the forward, failover after a detection timeout of 0.5, a
#: skip budget of 2 and waits of up to 5 at out stages.
BENCH_CONFIG = TrainingConfig(
    stages=48, replicas=8, microbatches=512, steps=2, schedule="swarm", routing="queue",
    forward_time=1.0, backward_ratio=2.0, availability=0.9, mean_downtime=50.0,
    detection_timeout=0.5, skip_budget=2, max_wait=5.0, sync="none",
)


def _cpu() -> float:
    return time.process_time()


def bare_timeouts_per_second(events: int = 200_000, repeats: int = 3) -> float:
    """Timeouts per CPU second of one bare SimPy process (best of ``repeats``)."""
    best = 0.0
    for _ in range(repeats):
        env = simpy.Environment()

        def loop(timeout=env.timeout):
            for _ in range(events):
                yield timeout(1.0)

        env.process(loop())
        t0 = _cpu()
        env.run()
        dt = _cpu() - t0
        if dt > 0:
            best = max(best, events / dt)
    return best


def measure_pass_rate(config: TrainingConfig = BENCH_CONFIG, *, seed: int = 0,
                      repeats: int = 2) -> dict[str, float]:
    """Passes per CPU second of the training DES, and per bare SimPy timeout.

    Parameters
    ----------
    config : TrainingConfig
        The run to time (default :data:`BENCH_CONFIG`).
    seed : int
        Root seed (repeat ``k`` uses replication ``k``).
    repeats : int
        Best of this many runs.

    Returns
    -------
    dict
        ``training_passes_per_s``, ``training_passes`` (of the best run),
        ``training_lost_passes``, ``simpy_timeouts_per_s`` and
        ``training_passes_per_bare_timeout`` (the target is at least 0.3).
    """
    best, passes, lost = 0.0, 0.0, 0.0
    for k in range(repeats):
        t0 = _cpu()
        m = TrainingSystem(config, Streams(seed).replication(k)).run()
        dt = _cpu() - t0
        if dt > 0 and m["passes"] / dt > best:
            best, passes, lost = m["passes"] / dt, m["passes"], m["lost_passes"]
    bare = bare_timeouts_per_second()
    return {"training_passes_per_s": best, "training_passes": passes,
            "training_lost_passes": lost, "simpy_timeouts_per_s": bare,
            "training_passes_per_bare_timeout": best / bare if bare > 0 else float("nan")}
