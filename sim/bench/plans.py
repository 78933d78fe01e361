"""``dtsim bench`` part ``plans`` (p): real plans (:mod:`sim.profiles`) built and simulated
per CPU second, and evaluated exactly."""

from __future__ import annotations

from ..rng import Streams
from .timing import _best_rate, _cpu_clock

__all__ = ["bench_plans"]


def bench_plans(repeats: int = 2) -> dict[str, float]:
    """Real plans per CPU second: built and simulated (the DES), and evaluated exactly.

    The 17 shipped runs' plans (:func:`sim.profiles.read_runs`), each built by
    :func:`sim.profiles.build.build_plan` and simulated for one failure-free
    iteration by the training DES; and the same plans' exact step times
    (:func:`sim.engines.predictions`, the max-plus program evaluation).
    """
    from ..engines import predictions
    from ..profiles import load_profiles, read_runs
    from ..profiles.build import build_plan
    from ..training import training_model

    runs = read_runs()
    prof = load_profiles(models=tuple(sorted({r.plan.model for r in runs})))  # type: ignore[type-var]

    def sim_once() -> tuple[float, float]:
        t0 = _cpu_clock()
        for r in runs:
            b = build_plan(r.plan, prof, steps=1, check_memory=False)
            training_model(b.config, Streams(0).replication(0))
        return float(len(runs)), _cpu_clock() - t0

    builds = [build_plan(r.plan, prof, steps=1, check_memory=False).config for r in runs]

    def exact_once() -> tuple[float, float]:
        t0 = _cpu_clock()
        for c in builds:
            predictions("training", c, ["step_time_mean"])
        return float(len(builds)), _cpu_clock() - t0

    rate, _ = _best_rate(sim_once, repeats)
    exact, _ = _best_rate(exact_once, repeats)
    micro = sum(c.microbatches for c in builds) / len(builds)
    return {"plans_simulated_per_s": rate, "plans_exact_per_s": exact,
            "plans_count": float(len(runs)), "plans_mean_microbatches": micro}
