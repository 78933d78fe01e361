"""The clock and the yardstick of ``dtsim bench``: bare SimPy timeouts per CPU second (part a)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import simpy

__all__ = ["bench_simpy"]


#: Clock of the single-process figures (a)-(f): CPU time of this process, so that
#: other jobs on a shared machine do not slow one side of a ratio and not the other.
#: The sweep speedups (g) use wall time, which is what parallelism buys.
_cpu_clock = time.process_time



def _best_rate(fn: Callable[[], tuple[float, float]], repeats: int) -> tuple[float, float]:
    """Run ``fn() -> (work, seconds)`` ``repeats`` times; the best rate and its seconds."""
    best, secs = 0.0, math.nan
    for _ in range(repeats):
        work, dt = fn()
        if dt > 0 and work / dt > best:
            best, secs = work / dt, dt
    return best, secs


# --------------------------------------------------------------------------- (a) yardstick


def bench_simpy(events: int = 200_000, repeats: int = 3) -> dict[str, float]:
    """Bare SimPy rate: one process yielding ``events`` timeouts of 1.

    Parameters
    ----------
    events : int
        Timeouts per repeat.
    repeats : int
        Best of this many repeats.

    Returns
    -------
    dict
        ``simpy_timeouts_per_s``.
    """
    def once() -> tuple[float, float]:
        env = simpy.Environment()

        def loop():
            timeout = env.timeout
            for _ in range(events):
                yield timeout(1.0)

        env.process(loop())
        t0 = _cpu_clock()
        env.run()
        return events, _cpu_clock() - t0

    rate, _ = _best_rate(once, repeats)
    return {"simpy_timeouts_per_s": rate}
