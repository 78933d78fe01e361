"""A plan run as SWARM parallelism (``dtsim train --plan P --strategy swarm``).

SWARM (Ryabinin et al., ICML 2023) cuts the model into stages, each served by
a pool of peers that hold the whole stage; every pass is routed at its stage
to a peer of the pool (stochastic wiring) and a stage's peers average their
gradients once the stage has processed the global batch. A plan maps onto it
as follows, each piece the plan's own (:func:`sim.profiles.build.build_plan`
with its transfers as times):

* the plan's stages are SWARM's stages: its layer cut, and each replica's
  forward and backward time of a micro-batch from the profile;
* the plan's replicas of a stage are the stage's peer pool; the passes are
  routed afresh at every stage by the config's routing (the swarm schedule of
  the training DES, its rules of loss, re-queueing and skipping unchanged);
  a peer's speed, which weighted routing draws by, is its micro-batch
  throughput ``1 / (t_f + t_b)`` relative to the stage's first peer;
* a hop between two stages takes the plan's transfer time of a micro-batch
  between the two peers, which SWARM may wire in any pair: every pair is timed
  (the plan rebuilt with the odd stages' replicas rotated), and where pairs
  differ a hop takes the slowest pair's time, named in the estimates;
* at the step's end each stage all-reduces its gradients among its peers (the
  plan's ring time of the stage's parameters, the whole ring also where the
  plan's framework reduce-scatters) and steps its own optimizer (the plan's
  slowest replica's optimizer step of the stage): SWARM's peers average after
  the stage's batch (``--averaging_target_batch_size``) and each stage's
  optimizer runs on its own, with no gradient norm across stages (yandex-research/swarm
  f66855f, ``swarm/setup_and_launch_server.sh:24-30``, one server a stage with
  its own ``--clip_grad_norm``), so the framework's model-parallel collectives,
  loss broadcast and weight all-gathers in the plan's optimizer step are not
  run; a tied all-reduce (first and last stage) stays the plan's.

Refused (one line each): a replica of TP > 1 (a SWARM server runs its stage on
one device, ``--device cuda:0`` in the same script, line 30), replicas on named
hosts (peers wired at random sharing a host's NICs are not modelled), and
``--p2p``/``--sync`` (SWARM's peers send asynchronously and average once a
step).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import ConfigError, check
from ..training.config import TrainingConfig
from .values import Plan

__all__ = ["SWARM_SOURCE", "check_swarm_plan", "swarm_plan_config"]

#: Where a SWARM server's behaviour used here is written down.
SWARM_SOURCE = "yandex-research/swarm f66855f swarm/setup_and_launch_server.sh:24-30"


def check_swarm_plan(plan: Plan) -> None:
    """Refuse what a plan says that SWARM has no meaning for (module notes)."""
    for j, st in enumerate(plan.stages):
        for i, x in enumerate(st.replicas):
            check(x.tp == 1, "tp", f"1 with --strategy swarm (a SWARM server runs its stage on "
                  f"one device, --device cuda:0: {SWARM_SOURCE}; stage {j} replica {i})", x.tp)
            if x.host is not None:
                raise ConfigError("plan", "a plan without named hosts with --strategy swarm "
                                  "(SWARM wires any peer to any peer; peers sharing a host's "
                                  f"NICs are not modelled; stage {j} replica {i})", x.host)


def _rotated(plan: Plan, k: int) -> Plan:
    """``plan`` with each odd stage's replicas rotated by ``k``: replica ``i`` of an even stage
    then meets replica ``i + k`` of the odd stages next to it (mod ``r``)."""
    stages = tuple(st if j % 2 == 0 else replace(st, replicas=st.replicas[k:] + st.replicas[:k])
                   for j, st in enumerate(plan.stages))
    return replace(plan, stages=stages)


def _pair_times(plan: Plan, build: Any, rebuild: Any) -> tuple[list[tuple[float, float]], list[str]]:
    """Per hop, the (activation, gradient) time SWARM's wiring meets: the one time every pair
    of peers has, else the slowest pair's (and a note)."""
    L, r = len(plan.stages), len(plan.stages[0].replicas)
    kinds = [{(x.gpu, x.gpus_per_node, x.zone) for x in st.replicas} for st in plan.stages]
    seen: list[set[tuple[float, float]]] = [set(row) for row in build.transfer_times]
    if any(len(k) > 1 for k in kinds):  # pairs of other kinds than the plan's pipelines meet
        for k in range(1, r):
            other = rebuild(_rotated(plan, k)).transfer_times
            for j in range(L - 1):
                seen[j].update(other[j])
    hops, notes = [], []
    for j, pairs in enumerate(seen):
        worst = (max(a for a, _ in pairs), max(g for _, g in pairs))
        if len(pairs) > 1:
            lo = min(a for a, _ in pairs)
            notes.append(f"swarm: the peers of stages {j} and {j + 1} meet in pairs whose "
                         f"activation transfer takes {lo:.6g} to {worst[0]:.6g} s: every hop "
                         "takes the slowest pair's time")
        hops.append(worst)
    return hops, notes


def swarm_plan_config(plan: Plan, build: Any, rebuild: Any, *, routing: str,
                      strategy: Any = "swarm", **fields: Any
                      ) -> tuple[TrainingConfig, tuple[str, ...]]:
    """The training DES's config of ``plan`` run as SWARM, and what it estimated.

    Parameters
    ----------
    plan : Plan
        The plan (checked by :func:`check_swarm_plan`).
    build : PlanBuild
        ``plan`` built with its transfers as times (``build_plan(..., network=False)``), with
        the run's failures, steps and strategy.
    rebuild : callable
        ``rebuild(plan)`` builds another plan the same way (its transfer times are read).
    routing : str
        The routing of the swarm schedule (:data:`sim.training.config.ROUTINGS`).
    strategy : Strategy or str
        The DES strategy that runs it (``swarm``).
    **fields
        Other :class:`TrainingConfig` fields set with it (``notice``).

    Returns
    -------
    (TrainingConfig, tuple of str)
    """
    check_swarm_plan(plan)
    c = build.config
    L = c.stages
    hops, notes = _pair_times(plan, build, rebuild)
    r = c.replicas[0]
    # each peer's passes exactly (its work over its speed), its speed its throughput
    times = [[(f, b) for f, b, _ in row] for row in build.stage_times]
    speeds = tuple(tuple((row[0][0] + row[0][1]) / (f + b) for f, b in row) for row in times)
    work = tuple(tuple((f * s, b * s) for (f, b), s in zip(row, sp, strict=True))
                 for row, sp in zip(times, speeds, strict=True))
    allreduce = build.allreduce_times
    fb = build.behaviour
    if fb is not None and fb.dist_optimizer:  # the plan reduce-scatters (half the ring)
        allreduce = tuple(2 * t for t in allreduce)
    optimizer = tuple(max(t[2] for t in row) for row in build.stage_times)
    cfg = replace(c, schedule="swarm", routing=routing, p2p="overlap", speeds=speeds,
                  replica_times=work, recv_gather_times=None,
                  transfer_times=tuple((h,) * r for h in hops) if L > 1 else None,
                  allreduce_times=allreduce, optimizer_times=optimizer,
                  allreduce_buckets=None, sync="allreduce", allreduce_barrier=True,
                  optimizer_barrier=False, tied_allreduce_times=None,
                  tied_allreduce_time=build.tied_allreduce_time, strategy=strategy, **fields)
    return cfg, tuple(notes)
