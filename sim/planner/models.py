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
from ..errors import ConfigError, SimulationError
from ..profiles import ModelProfile, Plan, Profiles, ReplicaSpec
from ..profiles.build import (
    BUCKET_ELEMENTS,
    PlanBuild,
    build_plan,
    explain_rows,
    in_flight,
    pair_link,
    pair_time,
    plan_allreduce_time,
)
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

    def p2p_bound(self, a: ReplicaSpec, b: ReplicaSpec, microbatch_size: int) -> float:
        """A lower bound on the device time one micro-batch's transfers over a stage boundary
        from a replica of kind ``a`` to one of kind ``b`` cost each of the two devices.

        With DeepSpeed's blocking send and receive (``p2p="blocking"``, the default)
        both devices are busy for the activation ``a -> b`` and the gradient ``b -> a``
        (:func:`~sim.profiles.build.explain_rows` counts them in the stage's time),
        timed as :func:`~sim.profiles.build.build_plan` times them; the bound is
        the least such pair over the layers a stage can end with (any but the
        last). Overlapped transfers occupy no device: 0. A pair of kinds the
        network lacks: 0 (such a plan is refused when it is timed).
        """
        if self.p2p != "blocking":
            return 0.0
        m = self.model
        pa, pb = (a, (0, 0)), (b, (1, 0))
        best = math.inf
        for act in {s.activation_bytes for s in m.layer_sizes(a.tp)[:-1]}:
            size = microbatch_size * act
            try:
                t = (pair_time(self.profiles.network, pa, pb, size / a.tp, a.tp)
                     + pair_time(self.profiles.network, pb, pa, size / b.tp, b.tp))
            except ConfigError:
                return 0.0
            best = min(best, t)
        return best if math.isfinite(best) else 0.0

    def allreduce_bound(self, kinds: tuple[ReplicaSpec, ...], replicas: int, size: float
                        ) -> float:
        """A lower bound on :func:`~sim.profiles.build.plan_allreduce_time` of ``size`` bytes or
        more per GPU in a ring of ``replicas`` replicas, each of one of ``kinds``.

        The ring's first bucket alone (``min(size, bucket)`` bytes or more):
        ``2 (n - 1)`` steps, each at least a link's latency plus ``tp`` flows of
        ``bucket / n`` bytes at the link's peak bandwidth for messages of that
        size or more (:meth:`~sim.profiles.BandwidthCurve.peak_above`), the
        least over every ordered pair of kinds. 0 for one replica or a pair the
        network lacks (such a plan is refused when it is timed).
        """
        n = replicas
        if n <= 1 or size <= 0:
            return 0.0
        msg = min(size, BUCKET_ELEMENTS * 4.0) / n
        nodes = [(k, (0, i)) for i, k in enumerate(dict.fromkeys(kinds))]
        step = math.inf
        for x in nodes:
            for y in nodes:
                try:
                    link = pair_link(self.profiles.network, x, y)
                except ConfigError:
                    return 0.0
                peak = link.curve.peak_above(msg)
                step = min(step, link.latency + (x[0].tp * msg / peak if peak > 0 else 0.0))
        return 2 * (n - 1) * step

    def tail_bound(self, kinds: tuple[ReplicaSpec, ...], dp: int, stages: int,
                   uniform: bool = False) -> float:
        """A lower bound on the tail :func:`~sim.profiles.build.explain_rows` adds to the
        pipeline phase (tied all-reduce, then the slowest stage's gradient all-reduce and
        optimizer step) for every plan of ``stages`` stages of ``dp`` replicas of these kinds.

        * The tied all-reduce (a tied model, ``stages > 1``): the least
          :func:`~sim.profiles.build.plan_allreduce_time` of the tied layer between a
          first-stage and a last-stage replica over every ordered pair of kinds
          (the function the plan is timed with).
        * The gradient all-reduce (``dp > 1``): some stage holds at least
          ``1/stages`` of the parameters (per GPU, at the least-bytes TP degree
          of the kinds), all-reduced among ``dp`` replicas of the kinds
          (:meth:`allreduce_bound`); with ``uniform`` (every stage's replicas of
          one kind, and every kind holding a stage, as in the ``stage`` layout)
          also each kind's ring over its smallest layer.
        * The optimizer step: 0.

        A pair of kinds the network lacks adds nothing (such a plan is refused
        when it is timed).
        """
        kinds = tuple(dict.fromkeys(kinds))
        m, L, net = self.model, stages, self.profiles.network
        tail = 0.0
        if m.tied_embeddings and L > 1:
            best = math.inf
            for a in kinds:
                for b in kinds:
                    size = m.layer_sizes(b.tp)[m.layers - 1].params * m.bytes_per_value
                    try:
                        t = plan_allreduce_time(net, [(a, (0, 0)), (b, (L - 1, 0))], [a.tp, b.tp], size)
                    except ConfigError:
                        continue
                    best = min(best, t)
            tail += best if math.isfinite(best) else 0.0
        if dp > 1:
            rows = [m.layer_sizes(tp) for tp in {k.tp for k in kinds}]
            total = sum(min(r[i].params for r in rows) for i in range(m.layers)) * m.bytes_per_value
            ar = self.allreduce_bound(kinds, dp, total / L)
            if uniform:
                for k in kinds:
                    least = min(s.params for s in m.layer_sizes(k.tp)) * m.bytes_per_value
                    ar = max(ar, self.allreduce_bound((k,), dp, least))
            tail += ar
        return tail

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
