"""The planner's view of dtsim's models of a real run, and the DES run of a plan.

:class:`ProfilePlanModel` answers the questions the search asks
(:class:`sim.planner.search.PlanModel`) with the models ``dtsim train --plan``
uses (:mod:`sim.profiles.build`): the iteration time is the exact max-plus
evaluation of the plan's fixed per-device programs plus the all-reduce and
optimizer tail (:func:`sim.profiles.build.explain_rows`), the memory is
:func:`sim.profiles.build.plan_memory`. The planner writes neither again:
:meth:`ProfilePlanModel.memory_terms` only restates that memory model as sums
over a stage's layers (so the cut can respect it), and a test checks the
restatement against it. :func:`simulate_plan` runs a plan through the
training DES, the engine of ``dtsim train --plan``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..engines import select
from ..errors import SimulationError
from ..profiles import ModelProfile, Plan, Profiles
from ..profiles.build import PlanBuild, build_plan, explain_rows, in_flight
from ..results import mean_ci, summarize
from ..runner import replicate

__all__ = ["Prediction", "ProfilePlanModel", "simulate_plan"]


@dataclass(frozen=True)
class Prediction:
    """The closed form of one plan: iteration time, peak memory, and where the time goes."""

    iteration_time: float
    peak_memory: float
    explain: dict[str, Any]
    build: PlanBuild


class ProfilePlanModel:
    """A :class:`~sim.planner.search.PlanModel` on a model's profile, the catalogue and network.

    Parameters
    ----------
    profiles : Profiles
    model : ModelProfile
    schedule : str
        Pipeline schedule of the plans (``"1f1b"``, as Megatron-LM and DeepSpeed run it).
    p2p : str
        ``"blocking"`` (DeepSpeed's paired send and receive, as the shipped runs) or
        ``"overlap"``.
    """

    def __init__(self, profiles: Profiles, model: ModelProfile, *, schedule: str = "1f1b",
                 p2p: str = "blocking") -> None:
        self.profiles, self.model, self.schedule, self.p2p = profiles, model, schedule, p2p
        # the largest output a stage can receive: any layer but the last (which no stage sends)
        sizes = {tp: model.layer_sizes(tp) for _, _, tp in model.combinations()}
        self._recv = {tp: max((s.activation_bytes for s in row[:-1]), default=0.0)
                      for tp, row in sizes.items()}

    def build(self, plan: Plan, *, network: bool = False, **config: Any) -> PlanBuild:
        """The plan's :class:`~sim.profiles.build.PlanBuild` (ConfigError if it does not fit);
        ``network``: its transfers as flows of :mod:`sim.network` (as ``dtsim train --plan``)."""
        return build_plan(plan, self.profiles, model=self.model.name, schedule=self.schedule,
                          p2p=self.p2p, network=network, **config)

    def predict(self, plan: Plan) -> Prediction:
        b = self.build(plan)
        e = explain_rows(b)
        return Prediction(float(e["iteration"]), float(b.peak_memory), e, b)

    def training_config(self, plan: Plan, *, network: bool = True, **config: Any) -> Any:
        """The :class:`~sim.training.TrainingConfig` ``dtsim train --plan`` runs for ``plan``."""
        return self.build(plan, network=network, **config).config

    def memory_cap(self, gpu: str, tp: int) -> float:
        g = self.profiles.gpus[gpu]
        return g.memory_bytes - g.overhead(tp)

    def memory_terms(self, gpu: str, tp: int, microbatch_size: int, stage: int, stages: int,
                     microbatches: int) -> tuple[tuple[float, tuple[float, ...]], ...]:
        """:func:`~sim.profiles.build.plan_memory` as sums over the stage's layers.

        A GPU holds weights, gradients and optimizer state, then the larger of
        (activations held plus received-input buffers) and the all-reduce
        bucket, so it fits iff both sums fit: ``buffers + sum(W_i + A_i)`` and
        ``sum(W_i + K_i)``, with ``W_i`` a layer's weight, gradient and
        optimizer bytes, ``A_i`` its activations times the micro-batches the
        schedule holds at this stage, ``K_i`` its share of the bucket. Two
        readings keep the sums exact or safe: the buffers are sized for the
        largest output a stage can receive (all of OPT's are equal), and the
        bucket for all the stage's parameters (it is capped at 5e8 elements).
        """
        m = self.model
        bpv, opt = m.bytes_per_value, m.optimizer_bytes_per_param
        n = in_flight(self.schedule, stages, stage, microbatches)
        sizes = m.layer_sizes(tp)
        buffers = 0.0
        if stage > 0:
            buffers = max(2, min(stages - stage, microbatches)) * microbatch_size * self._recv[tp]
        weights = [s.params * (2 * bpv + opt) for s in sizes]
        held = tuple(w + n * microbatch_size * s.activation_memory_bytes
                     for w, s in zip(weights, sizes, strict=True))
        bucket = tuple(w + s.params * bpv for w, s in zip(weights, sizes, strict=True))
        return ((buffers, held), (0.0, bucket))


def simulate_plan(pm: ProfilePlanModel, plan: Plan, *, steps: int = 3, replications: int = 1,
                  seed: int = 0, network: bool = True, **config: Any) -> dict[str, Any]:
    """Run ``plan`` in the training DES; its mean iteration time with an interval.

    Parameters
    ----------
    pm : ProfilePlanModel
        Builds the plan's :class:`~sim.training.TrainingConfig`.
    plan : Plan
    steps : int
        Iterations per replication.
    replications : int
    seed : int
    network : bool
        Transfers and all-reduces as flows sharing the links of
        :mod:`sim.network` (default, as ``dtsim train --plan``), or as their
        closed-form times.
    **config
        Further :class:`~sim.training.TrainingConfig` fields (failures, a trace,
        checkpoints).

    Returns
    -------
    dict
        ``iteration_time``: wall time per iteration, ``global batch / samples per
        second`` (the step time without failures; with them it counts lost
        work, restarts and checkpoints), its interval ``iteration_time_ci``
        across replications (:class:`~sim.results.Estimate`),
        ``step_time`` (mean time of a completed step), ``engine``.
    """
    cfg = pm.training_config(plan, network=network, steps=steps, **config)
    sel = select("training", cfg, "auto")
    records = replicate(sel.engine.run, cfg, replications=replications, seed=seed)
    failure = SimulationError.from_records(records)
    if failure is not None:
        raise failure
    gbs = plan.global_batch_size
    per = [gbs / r["samples_per_second"] for r in records if r["samples_per_second"] > 0]
    est = summarize(records, ["step_time_mean"], lower=0.0)
    it = mean_ci(per, lower=0.0) if per else None
    return {"iteration_time": it.mean if it is not None else math.inf,
            "iteration_time_ci": it, "step_time": est["step_time_mean"].mean,
            "engine": sel.name}
