"""Step times of a plan's formations, for the step-level strategies (``dtsim train --plan P
--strategy S``).

A step-level strategy (checkpoint-restart, redundancy, reconfiguration;
:mod:`sim.training.strategies`) re-forms the job from the workers that are
ready: ``P`` pipelines of ``n`` nodes each. With a plan, every worker is a
node of the plan (one replica: a TP group), and a formation's step is the
plan's own iteration re-planned for it, timed by the framework engine (the
plan's profiles, framework and release, its network), never a hand value:

* ``P`` pipelines of the plan's depth ``L``: the plan with ``P`` replicas
  a stage, the same global batch (the job engine's step is the global batch
  in every formation; Oobleck keeps the global number of micro-batches and
  splits it over the pipelines it instantiates: SymbioticLab/Oobleck
  ``oobleck/engine/pipeline_instantiator.py``, ``PipelineInstantiator(
  pipeline_templates, global_num_microbatches)``): one failure-free step of
  :func:`~sim.profiles.build.build_plan`'s config on the framework engine;
  with every pipeline up this is ``dtsim train --plan P``'s iteration;
* ``P`` pipelines of ``n < L`` nodes (reconfiguration's templates below
  ``L``): the plan's ``L`` stages merged into ``n`` contiguous groups of least
  largest work (:func:`sim.training.strategies.merge_stages`, dtsim's rule
  for a template of ``n`` nodes, the stage work a micro-batch's forward and
  backward on the plan's GPU), each group's layers one stage, ``P`` replicas;
  a re-partition that does not fit in GPU memory cannot run (no time: the
  strategy does not form it);
* pipelines of different depths (reconfiguration with ``min_nodes < L``, when
  the nodes do not split evenly): :func:`derived_step_time`'s rule with the
  plan's pieces: the step's micro-batches split over the pipelines by their
  bottleneck rates, each pipeline its share as a one-replica plan of its depth
  (framework engine, no optimizer), the step ending with the slowest, the
  plan's ring all-reduce of the largest node's gradients among the pipelines
  (the all-reduce time of that node's stage in the plan of that depth with
  ``P`` replicas) and the slowest node's optimizer step.

Where the global batch does not split evenly over ``P`` pipelines, some take
one micro-batch more than others (``ceil(m / P)``): the step is timed with
every pipeline at that larger share, which is exact while the pipelines meet
only in the all-reduce (each replica a node of its own, its own links: the
plans this runs; the framework engine's blocking programs need equal shares).
The samples of a step stay the global batch.

The plan's nodes must all be of one kind (GPU type, TP degree, node size,
zone, no named host): a strategy puts any ready node at any stage.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError
from .values import Plan, Profiles, StageSpec

__all__ = ["PlanStepTimes", "plan_node_kind"]


def plan_node_kind(plan: Plan) -> Any:
    """The one node kind of ``plan`` (a ReplicaSpec without a host), None when its replicas
    differ or name hosts."""
    kinds = {x for st in plan.stages for x in st.replicas}
    if len(kinds) != 1:
        return None
    kind = next(iter(kinds))
    return None if kind.host is not None else kind


@dataclass(frozen=True, eq=False)
class PlanStepTimes:
    """A plan's step time per formation (module notes); sits on ``TrainingConfig.step_times``.

    Parameters
    ----------
    plan : Plan
        The plan as given (its replicas all of one node kind).
    profiles : Profiles
        The profiles it was built with (a ``--fleet``'s links in them).
    model : str
    options : tuple of (str, value)
        The other keyword arguments of :func:`~sim.profiles.build.build_plan` the run
        used (schedule, p2p, framework, network, a given sync).

    Notes
    -----
    :meth:`formation_time` builds and runs each formation shape once (a cache per
    instance; equality is identity, so a config holding it hashes as itself).
    """

    per: ClassVar[str] = "formation"
    plan: Plan
    profiles: Profiles
    model: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if plan_node_kind(self.plan) is None:
            hosts = any(x.host for st in self.plan.stages for x in st.replicas)
            raise ConfigError("plan", "a plan whose replicas are all one node kind (GPU type, "
                              "TP degree, node size, zone; no named host) with a step-level "
                              "strategy (it puts any ready node at any stage)" + (
                                  "; dtsim plan --out names each replica's host: delete the "
                                  "plan's host keys to run each replica as a node of its own"
                                  if hosts else ""),
                              ", ".join(sorted({f"{x.gpu} TP {x.tp}" + (f" on {x.host}" if
                                                                         x.host else "")
                                                for st in self.plan.stages
                                                for x in st.replicas})))
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_builds", {})

    def __getstate__(self) -> dict[str, Any]:  # the caches stay behind (rebuilt where used)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_builds", {})

    # -- the plan's pieces -------------------------------------------------------------
    @property
    def stages(self) -> int:
        return len(self.plan.stages)

    @property
    def microbatches(self) -> int:
        """Micro-batches of a step (the global batch over the micro-batch size)."""
        return self.plan.global_batch_size // self.plan.microbatch_size

    def groups(self, n: int) -> tuple[int, ...]:
        """The plan's stages per node of a pipeline of ``n`` nodes."""
        from ..training.strategies import merge_stages

        L = self.stages
        return (1,) * L if n >= L else merge_stages(self.stage_work, n)

    @property
    def stage_work(self) -> tuple[float, ...]:
        """A micro-batch's forward and backward time at each of the plan's stages (its node
        kind), from the full plan's build: what :func:`merge_stages` balances."""
        c = self._build(self.stages, self.plan.dp[0], self.plan.microbatches).config
        return tuple(f + b for f, b in zip(c.forward_time, c.backward_time, strict=True))

    def _plan(self, n: int, replicas: int, per_pipeline: int) -> Plan:
        """The plan re-partitioned over ``n`` nodes a pipeline, ``replicas`` pipelines of
        ``per_pipeline`` micro-batches each."""
        p = self.plan
        kind = plan_node_kind(p)
        stages, j = [], 0
        for size in self.groups(n):
            layers = tuple(x for st in p.stages[j:j + size] for x in st.layers)
            stages.append(StageSpec(layers, (kind,) * replicas))
            j += size
        if n >= self.stages and replicas <= p.dp[0]:  # the plan edited to fewer replicas
            stages = [StageSpec(st.layers, st.replicas[:replicas]) for st in p.stages]
        gbs = p.microbatch_size * replicas * per_pipeline
        return dataclasses.replace(p, stages=tuple(stages), global_batch_size=gbs)

    def _build(self, n: int, replicas: int, per_pipeline: int) -> Any:
        """The PlanBuild of :meth:`_plan` (None when it does not fit in GPU memory)."""
        key = (n, replicas, per_pipeline)
        if key not in self._builds:  # type: ignore[attr-defined]
            from .build import build_plan

            try:
                b = build_plan(self._plan(n, replicas, per_pipeline), self.profiles,
                               model=self.model, **dict(self.options))
            except ConfigError as exc:
                if exc.name != "plan" or "fits in GPU memory" not in exc.rule:
                    raise
                b = None
            self._builds[key] = b  # type: ignore[attr-defined]
        return self._builds[key]  # type: ignore[attr-defined]

    # -- a formation's step ---------------------------------------------------------------
    def formation_time(self, sizes: tuple[int, ...]) -> float | None:
        """One failure-free step of pipelines of ``sizes`` nodes (None: it cannot run, a
        re-partition out of GPU memory); each shape is built and run once."""
        key = tuple(sizes)
        cache = self._cache  # type: ignore[attr-defined]
        if key not in cache:
            cache[key] = self._time(key) if key else None
        return cache[key]

    def _time(self, sizes: tuple[int, ...]) -> float | None:
        from ..training.strategies.steptime import _des_step, _free

        P, M = len(sizes), self.microbatches
        if len(set(sizes)) == 1:
            b = self._build(sizes[0], P, math.ceil(M / P))
            if b is None:
                return None
            return _des_step(_free(b.config))
        return self._mixed(sizes)

    def _mixed(self, sizes: tuple[int, ...]) -> float | None:
        """Pipelines of different depths (module notes)."""
        from ..training.strategies.steptime import _des_step, _free, split_microbatches

        work, P, M = self.stage_work, len(sizes), self.microbatches
        rates = []
        for n in sizes:
            worst, j = 0.0, 0
            for g in self.groups(n):
                worst = max(worst, math.fsum(work[j:j + g]))
                j += g
            rates.append(1.0 / worst)
        shares = split_microbatches(tuple(rates), M)
        phase, sync, opt = 0.0, 0.0, 0.0
        for n in sorted(set(sizes)):
            full = self._build(n, P, math.ceil(M / P))  # the depth's all-reduce among P
            if full is None:
                return None
            sync = max(sync, max(full.allreduce_times))
            opt = max(opt, max(full.optimizer_times))
        for n, b in zip(sizes, shares, strict=True):
            if not b:
                continue
            one = self._build(n, 1, b)
            if one is None:
                return None
            c = _free(one.config)
            phase = max(phase, _des_step(dataclasses.replace(
                c, optimizer_times=(0.0,) * c.stages)))
        return phase + sync + opt
