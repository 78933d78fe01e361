"""Where a pipeline's gradient all-reduces start: after a barrier, or each stage on its own.

A plan's step ends with, per stage ``j``, the data-parallel all-reduce of its
gradients among its replicas (time ``a_j``) and its optimizer step (``o_j``);
with tied weights (an embedding shared by the first and last stage) the first
and last stage of each pipeline also all-reduce the tied gradient (time ``t``).
Where these start is the framework's (:mod:`sim.profiles.frameworks`):

* with a barrier (the Sailor artifact's DeepSpeed: ``dist.barrier()`` after the
  tied all-reduce) every stage starts once every device has ended its program:
  ``T + t + max_j (a_j + o_j)``, ``T`` the pipeline phase's end, or
  ``T + t + max_j a_j + max_j o_j`` where the optimizer step waits for every
  stage's reduction (:func:`barrier_tail`);
* without one (upstream DeepSpeed's ``TrainSchedule``, Megatron-LM), each
  stage starts when its own devices have ended their programs: this module.

The time a device ends its program is :func:`sim.analytic.training.program_makespan`'s
(``ends``): its last pass, or with blocking transfers the send of the last
gradient after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import check

__all__ = ["barrier_tail", "pipelines_tied", "staged_step_end", "step_join_bound"]


def staged_step_end(ends: Sequence[Sequence[float]], allreduce: Sequence[float],
                    optimizer: Sequence[float], tied: float | Sequence[float] = 0.0, *,
                    tied_first: bool = True, optimizer_barrier: bool = False,
                    reduced: Sequence[float] | None = None,
                    stage_ends: list | None = None) -> float:
    """The end of a step whose stages all-reduce without a barrier (max-plus).

    Parameters
    ----------
    ends : sequence of sequence of float
        ``ends[j][k]``: when the device of stage ``j`` in pipeline ``k`` ends its
        program (the pipelines that ran micro-batches; as many at every stage).
    allreduce, optimizer : sequence of float
        Per stage: its gradient all-reduce among its replicas and its optimizer step.
    tied : float or sequence of float
        A pipeline's tied all-reduce between its first and last stage (0: none),
        or each pipeline's (as many as ``ends[j]``).
    tied_first : bool
        The tied all-reduce before the stages' gradient all-reduce (DeepSpeed) or
        after it (Megatron-LM).
    optimizer_barrier : bool
        Every stage's optimizer step waits for every stage to have reduced (an
        all-reduce of the gradient norm or overflow flag over the pipeline's
        stages; its time is in ``optimizer``: ``sim.profiles.build.step_collectives``).
    reduced : sequence of float, optional
        Per stage: when its gradient all-reduce, overlapped with its last backward
        passes, ended (:func:`sim.analytic.training.overlapped_stage_ends`; ``-inf``
        for a stage that reduces nothing). The stage's reduction is then done at
        ``max(e_j, reduced_j)`` plus its ``allreduce`` (0 for such a plan).
    stage_ends : list, optional
        Filled with when each stage's optimizer step ends, in stage order.

    Returns
    -------
    float
        When the last stage's optimizer step ends.

    Notes
    -----
    With ``e_j = max_k ends[j][k]`` (a ring all-reduce starts when all its
    members are there) and, for stages ``0`` and ``L - 1`` with tied weights,

    * ``tied_first``: the tied all-reduce of pipeline ``k`` ends at
      ``u_k = max(ends[0][k], ends[L-1][k]) + t_k``, the two stages' gradient
      all-reduces start at ``max_k u_k``: ``d_j = max(e_j, max_k u_k) + a_j``;
    * else ``d_j = e_j + a_j`` for every stage, then the tied all-reduce:
      ``d_0 = d_{L-1} = max(d_0, d_{L-1}) + max_k t_k`` (every pipeline's tied
      all-reduce starts then);

    the step ends at ``max_j (d_j + o_j)``, or with ``optimizer_barrier`` at
    ``max_j d_j + max_j o_j``. DeepSpeed's ``TrainSchedule`` puts
    ``ReduceTiedGrads``, ``ReduceGrads`` and ``OptimizerStep`` in each stage's
    own last step (``deepspeed/runtime/pipe/schedule.py:238-241``);
    Megatron-LM's ``finalize_model_grads`` all-reduces the data-parallel
    gradients, then the tied embedding (``finalize_model_grads.py:640``, then
    ``676``). Neither waits for another stage but through these collectives.
    """
    L = len(ends)
    check(L > 0 and len(allreduce) == L == len(optimizer), "stages",
          "ends, allreduce and optimizer per stage", L)
    pipes = len(ends[0])
    check(pipes > 0 and all(len(row) == pipes for row in ends), "ends",
          "as many pipelines at every stage", [len(row) for row in ends])
    done = [max(row) for row in ends]
    each = [float(tied)] * pipes if isinstance(tied, (int, float)) else [float(x) for x in tied]
    check(len(each) == pipes, "tied", f"one time per pipeline ({pipes})", len(each))
    t_max = max(each)
    has_tied = t_max > 0 and L > 1
    if has_tied and tied_first:
        u = max(max(ends[0][k], ends[L - 1][k]) + each[k] for k in range(pipes))
        done[0] = max(done[0], u)
        done[L - 1] = max(done[L - 1], u)
    if reduced is not None:  # the buckets went during the backward passes: wait for the last
        check(len(reduced) == L, "reduced", f"one end per stage ({L})", len(reduced))
        done = [max(e, x) for e, x in zip(done, reduced, strict=True)]
    done = [e + a for e, a in zip(done, allreduce, strict=True)]
    if has_tied and not tied_first:
        done[0] = done[L - 1] = max(done[0], done[L - 1]) + t_max
    if optimizer_barrier:
        done = [max(done)] * L
    each_end = [d + o for d, o in zip(done, optimizer, strict=True)]
    if stage_ends is not None:
        stage_ends.extend(each_end)
    return max(each_end)


def pipelines_tied(times: Sequence[float] | None, single: float,
                   ran: Sequence[int]) -> float | list[float]:
    """The ``tied`` argument of :func:`staged_step_end` for the pipelines ``ran`` (those that got
    micro-batches, in the order of ``ends``): each one's own tied all-reduce time when the
    plan has them per pipeline (``times``: its first and last GPUs and the link between them),
    else the one ``single`` time."""
    if not times:
        return single
    return [times[k] for k in ran]


def barrier_tail(allreduce: Sequence[float], optimizer: Sequence[float], tied: float = 0.0, *,
                 optimizer_barrier: bool = False, start: float = 0.0,
                 stage_ends: list | None = None) -> tuple[float, int]:
    """The time after the pipeline phase of a step with the barrier, and the stage that ends it.

    Parameters
    ----------
    allreduce, optimizer : sequence of float
        Per stage: its gradient all-reduce among its replicas and its optimizer step.
    tied : float
        The tied all-reduce before the barrier (0: none).
    optimizer_barrier : bool
        Every stage's optimizer step waits for every stage's reduction (an
        all-reduce of the gradient norm or overflow flag over the model-parallel
        group, its time in ``optimizer``: ``sim.profiles.build.step_collectives``): DeepSpeed
        in fp16 and bf16
        (``runtime/fp16/fused_optimizer.py:259``, ``runtime/bf16_optimizer.py:276-277``),
        the Sailor artifact's included, whose ``dist.barrier()`` comes first.
    start : float
        When the pipeline phase ends (the times returned count from 0 before it).
    stage_ends : list, optional
        Filled with when each stage's optimizer step ends, in stage order.

    Returns
    -------
    tuple of (float, int)
        ``start + t + max_j (a_j + o_j)`` and its ``j``; with ``optimizer_barrier``
        ``start + t + max_j a_j + max_j o_j`` and the ``j`` of the longest optimizer
        step (the first of equals).
    """
    L = len(allreduce)
    check(L > 0 and len(optimizer) == L, "stages", "allreduce and optimizer per stage", L)
    reduced = [max(allreduce)] * L if optimizer_barrier else list(allreduce)
    each = [start + tied + a + o for a, o in zip(reduced, optimizer, strict=True)]
    if stage_ends is not None:
        stage_ends.extend(each)
    if optimizer_barrier:
        j = max(range(L), key=lambda i: optimizer[i])
    else:
        j = max(range(L), key=lambda i: allreduce[i] + optimizer[i])
    return each[j], j


def step_join_bound(stage_ends: Sequence[float], join: str) -> float:
    """How much starting every device's next step together can lengthen it, at most.

    Parameters
    ----------
    stage_ends : sequence of float
        When each stage's step ends (its optimizer step), in stage order.
    join : str
        Whom a stage waits for before its next step (the framework's
        ``step_join``): ``"last-stage"`` or ``"pipeline"``.

    Returns
    -------
    float
        An upper bound on what the engines' step barrier adds to the next step
        (0 where it is exact).

    Notes
    -----
    DeepSpeed's ``train_batch`` ends with ``_aggregate_total_loss``: the last
    stages all-reduce the loss over their data-parallel group, then each
    broadcasts it over its pipeline (``runtime/pipe/engine.py:583-640``), so
    stage ``j`` starts its next step at ``max(e_j, e_{L-1})``, not at
    ``max_i e_i``. Every stage after the first begins its step by receiving an
    activation that stage 0 sends after its first forward pass, and the step's
    collectives wait for every replica, so a stage that starts before stage 0
    changes nothing: the barrier is exact when ``max(e_0, e_{L-1}) = max_i
    e_i``, and otherwise the next step starts at least ``max(e_0, e_{L-1})``
    (max-plus is monotone), so the barrier adds at most ``max_i e_i -
    max(e_0, e_{L-1})``. Megatron-LM's ``train_step`` all-reduces the update
    flag and the gradient norm over the model-parallel group after the
    optimizer step and reads them on the host: every stage of a pipeline
    starts after the slowest, the barrier itself (0). Stage ends here are per
    stage (one optimizer time per stage, the data-parallel all-reduce ending
    together on every replica).
    """
    check(len(stage_ends) > 0, "stage_ends", "one end per stage", len(stage_ends))
    check(join in ("last-stage", "pipeline"), "join", "last-stage or pipeline", join)
    if join == "pipeline":
        return 0.0
    return max(stage_ends) - max(stage_ends[0], stage_ends[-1])
