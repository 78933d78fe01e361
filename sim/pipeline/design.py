"""Pipeline design: the fewest replicas for a target drop rate, or the cost-optimal ``(r, s)``.

:func:`design` answers exactly from the closed forms of :mod:`sim.analytic`;
:func:`verify` simulates the chosen design and returns the comparison (by
importance sampling where the drop rate is too rare to simulate, the rule of
:func:`sim.pipeline.compare.estimate_drop_rate`). With a failure trace,
:func:`design` answers from the trace's exact law under the ``random`` policy
(:mod:`sim.analytic.trace_design`), next to the binomial answer at the trace's
availability, and :func:`verify_trace` simulates the design replaying the
trace (looped, from a uniformly random offset per replication).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import check, check_int, check_probability
from .compare import estimate_drop_rate
from .config import PipelineConfig

__all__ = ["design", "verify", "verify_trace", "check_verify_size"]


def design(stages: int, availability: float, domain_outage: float, *,
           skip_budget: int | None = None, target_drop: float = 1e-3,
           skip_penalty: float | None = None, penalty: str = "multiplicative",
           max_replicas: int | None = None, trace: Any = None) -> dict[str, Any]:
    """Answer the design question exactly (the payload of ``dtsim design --json``).

    Parameters
    ----------
    stages, availability, domain_outage : see :class:`sim.pipeline.PipelineConfig`
    skip_budget : int, optional
        Fixed skip budget (default 0 when ``skip_penalty`` is None).
    target_drop : float
        Target drop rate in (0, 1).
    skip_penalty : float, optional
        With no ``skip_budget``: return the cost-optimal ``(r, s)``
        (:func:`sim.analytic.optimal_design`).
    penalty : str
        Quality law after skips.
    max_replicas : int, optional
        Largest ``r`` searched.
    trace : sim.traces.TraceReplay, optional
        Workers replay this trace under the ``random`` policy: the answer is
        the trace's exact law (``availability`` and ``domain_outage`` are then
        the trace's and 0), ``r`` at most the trace's slots over ``L``; the
        record adds ``law``, ``trace``, ``slots`` and the binomial answer at the
        trace's availability (``independent_*``).

    Returns
    -------
    dict
        Minimum-replica mode: ``mode="min_replicas"``, ``feasible``, ``replicas``,
        ``workers``, ``drop_rate``, ``floor``, ``reason``, ``skip_budget``.
        Optimal mode: ``mode="optimal"``, ``replicas``, ``skip_budget``, ``cost``,
        ``noskip_replicas``, ``noskip_cost``, ``gain``, ``workers``, ``drop_rate``,
        ``mean_quality``.
    """
    from .. import analytic

    L = check_int("stages", stages, low=1)
    if skip_budget is not None:
        check_int("skip_budget", skip_budget, low=0, high=L)
    if trace is not None:
        return _trace_design(L, trace, skip_budget=skip_budget, target_drop=target_drop,
                             skip_penalty=skip_penalty, penalty=penalty,
                             max_replicas=max_replicas)
    base = {"stages": stages, "availability": availability, "domain_outage": domain_outage}
    extra = {} if max_replicas is None else {"max_replicas": max_replicas}
    if skip_penalty is not None and skip_budget is None:
        opt = analytic.optimal_design(stages, availability, domain_outage, skip_penalty,
                                      penalty=penalty, **extra)
        q = analytic.stage_outage(availability, opt.replicas, domain_outage)
        return {
            "mode": "optimal", **base, "skip_penalty": skip_penalty, "penalty": penalty,
            "feasible": True,
            "replicas": opt.replicas, "skip_budget": opt.skip_budget, "cost": opt.cost,
            "noskip_replicas": opt.noskip_replicas, "noskip_cost": opt.noskip_cost,
            "gain": opt.gain, "workers": stages * opt.replicas,
            "drop_rate": float(analytic.drop_probability(stages, opt.replicas, opt.skip_budget,
                                                         availability, domain_outage)),
            "mean_quality": float(analytic.mean_quality_delivered(
                stages, q, opt.skip_budget, skip_penalty, penalty=penalty)),
        }
    s = 0 if skip_budget is None else skip_budget
    check_probability("target_drop", target_drop, open_low=True, open_high=True)
    d = analytic.min_replicas(stages, availability, domain_outage, s, target_drop, **extra)
    return {
        "mode": "min_replicas", **base, "skip_budget": s, "target_drop": target_drop,
        "feasible": bool(d.feasible), "replicas": d.replicas, "workers": d.workers,
        "drop_rate": float(d.drop_rate), "floor": float(d.floor), "reason": d.reason,
    }


#: Most microbatches ``verify`` simulates in all (microbatches x replications):
#: a design check, not a study. At the snapshot engine's few million
#: microbatches per second this is minutes; beyond it a check would run for
#: hours or days, so it is refused at once (run ``dtsim pipeline`` for a long
#: study, which Ctrl-C stops).
MAX_VERIFY_MICROBATCHES = 10**9


def check_verify_size(microbatches: int, replications: int) -> None:
    """Refuse a verification's size before anything runs (also when the design turns out
    infeasible and nothing is simulated: the options were accepted silently then)."""
    check_int("microbatches", microbatches, low=1)
    check_int("replications", replications, low=1)
    total = microbatches * replications
    check(total <= MAX_VERIFY_MICROBATCHES, "microbatches",
          f"at most {MAX_VERIFY_MICROBATCHES:.0e} in total over the replications for a design "
          f"check (microbatches x replications = {total:.3g}; use dtsim pipeline for longer runs)",
          microbatches)


def verify(out: dict[str, Any], *, microbatches: int, replications: int, rate: float,
           mean_downtime: float, seed: int, executor: Any = "serial",
           workers: int | None = None, skip_penalty: float = 0.0,
           penalty: str = "multiplicative") -> dict[str, Any]:
    """Simulate the design ``out`` (snapshot model) and return its drop rate estimate.

    Parameters
    ----------
    out : dict
        A :func:`design` record (``stages``, ``replicas``, ``skip_budget``,
        ``availability``, ``domain_outage``).
    microbatches, replications : int
        Per replication, and replications; at most
        :data:`MAX_VERIFY_MICROBATCHES` in all.
    rate : float
        Microbatch arrival rate (in units of 1 / mean downtime).
    mean_downtime : float
        Mean worker and domain outage.
    seed : int
    executor, workers
        As for :func:`sim.runner.replicate`.
    skip_penalty, penalty
        The skip penalty law.

    Returns
    -------
    dict
        ``simulated_drop_rate``, ``simulated_drop_rate_ci`` (an Estimate),
        ``simulated_agrees``, ``simulated_method``, ``simulated_microbatches``,
        ``simulated_mean_quality``, ``simulated_mean_quality_ci``, ``seed``.
    """
    check_verify_size(microbatches, replications)
    cfg = PipelineConfig(
        stages=out["stages"], replicas=out["replicas"], skip_budget=out["skip_budget"],
        availability=out["availability"], domain_outage=out["domain_outage"],
        skip_penalty=skip_penalty, penalty=penalty, mean_downtime=mean_downtime,
        domain_downtime=mean_downtime, microbatches=microbatches, rate=rate,
    )
    res = estimate_drop_rate(cfg, replications=replications, seed=seed, executor=executor,
                             workers=workers)
    est = res["estimate"]
    return {
        "simulated_drop_rate": est.mean,
        "simulated_drop_rate_ci": est,
        "simulated_agrees": res["agrees"],
        "simulated_method": res["method"],
        "simulated_microbatches": res["microbatches"],
        "simulated_mean_quality": res["mean_quality"],
        "simulated_mean_quality_ci": res["mean_quality_ci"],
        "seed": seed,
    }


def _trace_design(L: int, replay: Any, *, skip_budget: int | None, target_drop: float,
                  skip_penalty: float | None, penalty: str,
                  max_replicas: int | None) -> dict[str, Any]:
    """:func:`design` under a replayed trace (``random`` policy): exact, and the binomial
    answer at the trace's availability beside it."""
    from .. import analytic
    from ..errors import check
    from ..traces import trace_slots, trace_stats

    leave, tile = replay.policy_parts
    check(leave == "random" and not tile, "trace_policy",
          "random for dtsim design (the exact law needs the up set uniform given the count, "
          "each worker on its own slot)", replay.policy)
    tr = replay.load()
    inst = replay.instances or ()
    named = _design_workers(inst, L)
    check(not named, "failure_trace", "a trace whose instances are named as none of the "
          "pipeline's workers s{stage}r{replica} for dtsim design (it answers under the random "
          "policy, any worker on any slot; a trace named as the workers is replayed by name: "
          "simulate it with dtsim pipeline)",
          f"{replay.trace} ({len(named)} of {len(inst)} instances named so, e.g. "
          f"{named[0] if named else ''})")
    check(not (tr.reuse and tr.nodes is not None), "failure_trace",
          "a count or event trace (a dtsim CSV of named workers is replayed by name, not by "
          "the random policy)", replay.trace)
    slots = trace_slots(tr)
    check(slots >= 1 and tr.counts.max() > 0, "failure_trace", "a trace with an instance up "
          "at some time (its availability is 0 / 0 or 0: no design fits it)", replay.trace)
    a = float(trace_stats(tr)["availability"])
    base = {"stages": L, "availability": a, "domain_outage": 0.0, "trace": replay.trace,
            "slots": slots, "law": "trace (random policy, exact)"}
    inner = design(L, a, 0.0, skip_budget=skip_budget, target_drop=target_drop,
                   skip_penalty=skip_penalty, penalty=penalty, max_replicas=max_replicas)
    indep = {f"independent_{k}": inner[k] for k in ("replicas", "skip_budget", "workers",
                                                    "drop_rate") if k in inner}
    if skip_penalty is not None and skip_budget is None:
        check(slots >= L, "stages", f"at most the trace's {slots} slots", L)
        opt = analytic.trace_optimal_design(tr, L, skip_penalty, penalty=penalty,
                                            max_replicas=max_replicas)
        law = analytic.trace_skipped_distribution(tr.times, tr.counts, tr.end, slots, L,
                                                  opt.replicas)
        import numpy as np

        k = np.arange(L + 1)
        q = np.asarray(analytic.SkipPenalty(skip_penalty, penalty).weights(k))
        kept = law[: opt.skip_budget + 1]
        mean_q = float((kept * q[: opt.skip_budget + 1]).sum() / kept.sum()) if kept.sum() > 0 \
            else float("nan")
        return {
            "mode": "optimal", **base, "skip_penalty": skip_penalty, "penalty": penalty,
            "feasible": True, "replicas": opt.replicas, "skip_budget": opt.skip_budget,
            "cost": opt.cost, "noskip_replicas": opt.noskip_replicas,
            "noskip_cost": opt.noskip_cost, "gain": opt.gain, "workers": L * opt.replicas,
            "drop_rate": float(law[opt.skip_budget + 1:].sum()), "mean_quality": mean_q,
            "independent_cost": inner["cost"], **indep,
        }
    s = 0 if skip_budget is None else skip_budget
    d = analytic.trace_min_replicas(tr, L, s, target_drop, max_replicas=max_replicas)
    return {
        "mode": "min_replicas", **base, "skip_budget": s, "target_drop": target_drop,
        "feasible": bool(d.feasible), "replicas": d.replicas, "workers": d.workers,
        "drop_rate": float(d.drop_rate), "floor": float(d.floor), "reason": d.reason,
        **indep,
    }


def _design_workers(instances: Sequence[str], stages: int) -> list[str]:
    """The instances named as a worker ``s{j}r{i}`` of a pipeline of ``stages`` stages (the
    workers of every design it may answer, whatever its replicas)."""
    from ..training.config import replica_name

    out = []
    for n in instances:
        m = re.fullmatch(r"s([0-9]+)r([0-9]+)", n)
        if m is not None and int(m.group(1)) < stages and replica_name(
                int(m.group(1)), int(m.group(2))) == n:
            out.append(n)
    return out


def verify_trace(out: dict[str, Any], replay: Any, *, microbatches: int, replications: int,
                 seed: int, executor: Any = "serial", workers: int | None = None,
                 skip_penalty: float = 0.0, penalty: str = "multiplicative") -> dict[str, Any]:
    """Simulate the design ``out`` replaying the trace: the drop rate with its interval.

    The workers replay the trace under the ``random`` policy, looped, each
    replication from a uniformly random offset (so the expected drop rate is
    the trace's time average, the exact value of ``out``); ``microbatches``
    arrive evenly over one span of the trace per replication.

    Returns
    -------
    dict
        ``simulated_drop_rate``, ``simulated_drop_rate_ci``, ``simulated_agrees``
        (None when fewer than 30 drops are expected: too rare to judge),
        ``simulated_method``, ``simulated_microbatches``, ``simulated_mean_quality``,
        ``simulated_mean_quality_ci``, ``seed``.
    """
    import dataclasses

    from ..results import judge_equal, mean_ci, rate_ci
    from ..runner import replicate
    from . import des_pipeline_model
    from .compare import RESOLVABLE_DROPS

    looped = dataclasses.replace(replay, policy="random", loop=True, resample="offset")
    span = replay.load().end / replay.speedup
    cfg = PipelineConfig(stages=out["stages"], replicas=out["replicas"],
                         skip_budget=out["skip_budget"], failure_trace=looped,
                         microbatches=microbatches, rate=microbatches / span,
                         skip_penalty=skip_penalty, penalty=penalty)
    recs = replicate(des_pipeline_model, cfg, replications=replications, seed=seed,
                     executor=executor, workers=workers)
    ok = [r for r in recs if not r.get("error")]
    est = rate_ci([float(r["drop_rate"]) for r in ok])
    exact = out["drop_rate"]
    resolvable = exact * microbatches * replications >= RESOLVABLE_DROPS
    mq = mean_ci([float(r["mean_quality"]) for r in ok if r.get("mean_quality") == r.get(
        "mean_quality")])
    return {
        "simulated_drop_rate": est.mean, "simulated_drop_rate_ci": est,
        "simulated_agrees": judge_equal(est, exact).holds if resolvable else None,
        "simulated_method": "simulation", "simulated_microbatches": microbatches * len(ok),
        "simulated_mean_quality": mq.mean, "simulated_mean_quality_ci": mq, "seed": seed,
    }
