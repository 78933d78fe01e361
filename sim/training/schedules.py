"""Pipeline schedules as strategy objects the engine asks (never type-checks), and device programs.

A schedule answers these questions:

``fixed_pipelines``
    Whether a microbatch keeps one pipeline (replica index) through the stages,
    routing choosing only its pipeline and any failover (GPipe, 1F1B), or is
    routed afresh at every stage (SWARM, async).
``step_barrier``
    Whether microbatches come in steps of ``m`` closed by the gradient sync
    and the optimizer step (all but async).
``phase_barrier``
    Whether every forward pass of a step ends before any backward pass starts
    (GPipe).
``forward_limit(stage, stages)``
    The most microbatches a replica of ``stage`` holds between its forward and
    backward pass (None: unbounded); 1F1B keeps ``L - j`` at stage ``j``.
``fixed_order``
    Whether each replica serves its passes in the framework's fixed per-stage
    order (1F1B as Megatron-LM and DeepSpeed run it: forwards while fewer
    than ``L - j`` micro-batches are in flight and forwards remain, else
    backwards; it waits for the kind whose turn it is), or takes whatever is
    queued, backward passes first (``1f1b-dynamic``, GPipe, SWARM, async).
``framework``
    Whether the schedule exists only as fixed device programs
    (:func:`device_program`: interleaved 1F1B), run by
    :class:`sim.training.framework.FrameworkFlow`.

:func:`device_program` gives the per-step program of one device of a
pipeline under each framework schedule; :func:`sim.analytic.training.program_makespan`
evaluates programs exactly (max-plus), the reference the engines are held to.
"""

from __future__ import annotations

import functools

from ..errors import check

__all__ = ["Schedule", "GPipe", "OneFOneB", "OneFOneBDynamic", "Interleaved", "SwarmSchedule", "Async",
           "SCHEDULE_POLICIES", "megatron_1f1b_order", "interleaved_order", "deepspeed_program",
           "megatron_program", "device_program", "p2p_program"]


class Schedule:
    """Base schedule: the answers of SWARM (loosely coupled stages, one step barrier)."""

    name = "schedule"
    fixed_pipelines = False
    step_barrier = True
    phase_barrier = False
    fixed_order = False
    framework = False

    def forward_limit(self, stage: int, stages: int) -> int | None:
        """Microbatches a replica of ``stage`` may hold between forward and backward."""
        return None


class GPipe(Schedule):
    """All forwards of a step, then all backwards, on fixed pipelines."""

    name = "gpipe"
    fixed_pipelines = True
    phase_barrier = True


class OneFOneB(Schedule):
    """1F1B in Megatron-LM's and DeepSpeed's fixed per-stage order (PipeDream-flush).

    Stage ``j`` of ``L`` does ``min(L - j - 1, m)`` warm-up forwards, then
    alternates one forward and one backward while forwards remain, then the
    remaining backwards: at most ``L - j`` micro-batches in flight.
    """

    name = "1f1b"
    fixed_pipelines = True
    fixed_order = True

    def forward_limit(self, stage: int, stages: int) -> int | None:
        return stages - stage


class OneFOneBDynamic(OneFOneB):
    """1F1B as a dynamic rule: a queued backward goes first, forwards while under ``L - j`` in flight.

    Equal to the fixed order when stages are equal; with unequal stages it
    runs backwards as soon as they arrive, which frameworks do not do (dtsim's
    ``1f1b`` before issue 22).
    """

    name = "1f1b-dynamic"
    fixed_order = False


class Interleaved(OneFOneB):
    """Megatron-LM's interleaved 1F1B: ``v`` model chunks per device (virtual stages)."""

    name = "interleaved"
    framework = True


class SwarmSchedule(Schedule):
    """No fixed pipelines: each pass routed at its stage; one barrier per step."""

    name = "swarm"


class Async(Schedule):
    """No step barrier: microbatches flow continuously (steady-state throughput)."""

    name = "async"
    step_barrier = False


#: Schedule name -> class.
SCHEDULE_POLICIES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (GPipe, OneFOneB, OneFOneBDynamic, Interleaved, SwarmSchedule, Async)
}


# --------------------------------------------------------------------------- device programs


def megatron_1f1b_order(stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """The compute order of one stage under non-interleaved 1F1B, ``[("F" | "B", microbatch)]``.

    Megatron-LM's ``forward_backward_pipelining_without_interleaving``: stage
    ``j`` of ``L`` runs ``w = min(L - j - 1, m)`` warm-up forwards, then
    ``m - w`` times one forward and one backward, then ``w`` cool-down
    backwards. DeepSpeed's ``TrainSchedule`` gives every stage the same order.
    """
    w = min(stages - stage - 1, microbatches)
    out = [("F", i) for i in range(w)]
    for k in range(microbatches - w):
        out.append(("F", w + k))
        out.append(("B", k))
    out.extend(("B", i) for i in range(microbatches - w, microbatches))
    return out


def interleaved_order(devices: int, chunks: int, microbatches: int, device: int
                      ) -> list[tuple[str, int, int]]:
    """The compute order of one device under interleaved 1F1B, ``[("F" | "B", chunk, microbatch)]``.

    Megatron-LM's ``forward_backward_pipelining_with_interleaving`` (Narayanan
    et al., SC 2021, section 2.2): with ``p`` devices, ``v`` chunks and ``m``
    micro-batches (a multiple of ``p``) the ``m v`` chunk passes of each kind
    go in groups of ``p`` micro-batches per chunk, chunks ascending for
    forwards and descending for backwards; device ``d`` runs
    ``min(2 (p - d - 1) + (v - 1) p, m v)`` warm-up forwards (all of them when
    ``m = p``), then one forward and one backward, then the cool-down backwards.
    Chunk ``c`` of device ``d`` is model stage ``c p + d``.
    """
    p, v, m = devices, chunks, microbatches
    total = m * v
    warm = total if m == p else min(2 * (p - device - 1) + (v - 1) * p, total)

    def chunk_mb(k: int, forward: bool) -> tuple[int, int]:
        g = k % (p * v)
        c = g // p
        return (c if forward else v - 1 - c), (k // (p * v)) * p + k % p

    out: list[tuple[str, int, int]] = [("F", *chunk_mb(k, True)) for k in range(warm)]
    for k in range(total - warm):
        out.append(("F", *chunk_mb(k + warm, True)))
        out.append(("B", *chunk_mb(k, False)))
    out.extend(("B", *chunk_mb(k, False)) for k in range(total - warm, total))
    return out


def deepspeed_program(stages: int, microbatches: int, stage: int, *,
                      order: str = "0.16.5", recv_gather: bool = False) -> list[tuple]:
    """One stage's commands under DeepSpeed's ``TrainSchedule`` with blocking send/recv.

    DeepSpeed's pipeline engine runs ``2 (m + L - 1)`` steps; stage ``j``
    forwards micro-batch ``i`` at step ``2 i + j`` and backwards it at step
    ``2 i + 2 L - 1 - j`` (steps of the wrong parity for a stage, or with no
    valid micro-batch, are idle). A forward step first sends the gradient of
    the previous step's backward to stage ``j - 1``, then receives its input
    activation; a backward step first receives its output gradient, then sends
    the activation of the previous step's forward to stage ``j + 1``; every
    send and receive is blocking and paired. Commands: ``("F", 0, i)``,
    ``("B", 0, i)``, ``("send" | "recv", "a" | "g", hop, i)`` where ``hop``
    ``h`` is the link between stages ``h`` and ``h + 1``.

    That is DeepSpeed 0.16.5's order (``runtime/pipe/schedule.py:214-223``);
    ``order="0.3.13"``, DeepSpeed 0.3.13's (``schedule.py:206-219`` at tag
    v0.3.13): each step's two transfers the other way round, a forward step
    receiving its activation before sending the gradient, a backward step
    sending the activation before receiving its gradient. Both transfers of a step are between
    the same two stages, so without anything between them either order gives the same
    makespan (``tests/test_profiles_frameworks.py`` checks it).

    ``recv_gather`` (``order="0.3.13"`` only): DeepSpeed 0.3.13's ``_exec_recv_grads``
    (``runtime/pipe/engine.py:908-918`` at tag v0.3.13) first all-gathers the stage's
    partitioned output over its TP group, then receives the gradient (920-939): a command
    ``("G", 0, i)`` of the device alone before each ``("recv", "g", j, i)``, after the step's
    activation send. Its peer waits in its gradient send meanwhile, so here the order matters.
    """
    check(order in ("0.16.5", "0.3.13"), "order", "0.16.5 or 0.3.13", order)
    check(not recv_gather or order == "0.3.13", "recv_gather", "False unless order is 0.3.13",
          recv_gather)
    L, m, j = stages, microbatches, stage
    out: list[tuple] = []
    prev = -1

    def valid(i: int) -> bool:
        return 0 <= i < m

    for step in range(2 * (m + L - 1)):
        if (step % 2 == 0) == (j % 2 == 0):  # a forward step of this stage
            base = step // 2 if step % 2 == 0 else (step - 1) // 2
            mb, fwd = base - j // 2, True
        elif step % 2 == 0:
            mb, fwd = step // 2 - L + (j + 1) // 2, False
        else:
            mb, fwd = (step - 1) // 2 - L + 1 + j // 2, False
        if fwd:
            pair = [("send", "g", j - 1, prev), ("recv", "a", j - 1, mb)] if j > 0 else []
        else:
            pair = [("recv", "g", j, mb), ("send", "a", j, prev)] if j < L - 1 else []
        for x in (pair[::-1] if order == "0.3.13" else pair):
            if valid(x[3]):
                if recv_gather and x[:2] == ("recv", "g"):
                    out.append(("G", 0, x[3]))
                out.append(x)
        if valid(mb):
            out.append(("F" if fwd else "B", 0, mb))
        prev = mb
    return out


def megatron_program(stages: int, microbatches: int, stage: int) -> list[tuple]:
    """One stage's commands under Megatron-LM's non-interleaved 1F1B with batched send/receive.

    Megatron-LM core 0.20 (commit d98e8a64dd), ``schedules.py``
    ``forward_backward_pipelining_without_interleaving`` (2147-2480): stage
    ``j`` of ``L`` runs ``w = min(L - j - 1, m)`` warm-up micro-batches
    (2277-2278), each ``recv_forward``, forward, ``send_forward``
    (2344-2362); then, if ``m > w``, one more ``recv_forward`` (2373-2376);
    then ``m - w`` steady iterations ``k``: forward of ``w + k``,
    ``send_forward_recv_backward`` (the activation of ``w + k`` to stage
    ``j + 1`` and the gradient of ``k`` from it, 2416), backward of ``k``,
    then ``send_backward_recv_forward`` (the gradient of ``k`` to stage
    ``j - 1`` and the activation of ``w + k + 1`` from it, 2446) or, at the
    last iteration, ``send_backward`` alone (2442); then ``w`` cool-down
    micro-batches, each ``recv_backward``, backward, ``send_backward``
    (2466-2474). The first stage has no previous rank and the last no next:
    every call towards nobody is skipped whole (``is_pp_first_stage`` and
    ``is_pp_last_stage`` in ``p2p_communication.py`` 430-600), so the last
    stage's steady state has no ``send_forward_recv_backward`` and the first
    stage's no ``send_backward_recv_forward``.

    A two-way call is one batch: ``_communicate`` (``p2p_communication.py``
    280-428) posts both operations through ``torch.distributed.batch_isend_irecv``
    (``_batched_p2p_ops``, 22-57; ``batch_p2p_comm`` is ``not
    overlap_p2p_comm``, ``training/argument_utils.py:307``, and the
    non-interleaved schedule forces ``overlap_p2p_comm`` off,
    ``training/arguments.py:1010-1012`` and ``schedules.py:2181-2184``),
    waits on every request (416-418) and then on the device
    (``torch.cuda.synchronize``, 421-424, ``batch_p2p_sync`` default True,
    ``model_parallel_config.py:395``). A one-way call is a batch of one.

    Commands: ``("F" | "B", 0, i)``; a lone ``("send" | "recv", "a" | "g",
    hop, i)`` as :func:`deepspeed_program`'s; and a batched pair
    ``("sendrecv", send_tag, send_hop, send_i, recv_tag, recv_hop, recv_i)``.
    Semantics (:func:`sim.analytic.training.program_makespan` and
    :class:`sim.training.framework.FrameworkFlow`): each transfer starts when
    both its parties have posted the calls that hold it (the peer's call may
    be a pair or a single operation) and takes its own time (the hop's
    activation or gradient time: the two directions of a hop are
    independent, full duplex); a device is free when every transfer of its
    call has completed. A lone call is the paired blocking transfer.
    """
    L, m, j = stages, microbatches, stage
    first, last = j == 0, j == L - 1
    w = min(L - j - 1, m)
    out: list[tuple] = []
    for i in range(w):  # warm-up
        if not first:
            out.append(("recv", "a", j - 1, i))
        out.append(("F", 0, i))
        if not last:
            out.append(("send", "a", j, i))
    if m > w and not first:
        out.append(("recv", "a", j - 1, w))
    for k in range(m - w):  # steady state
        out.append(("F", 0, w + k))
        if not last:
            out.append(("sendrecv", "a", j, w + k, "g", j, k))
        out.append(("B", 0, k))
        if not first:
            if k == m - w - 1:
                out.append(("send", "g", j - 1, k))
            else:
                out.append(("sendrecv", "g", j - 1, k, "a", j - 1, w + k + 1))
    for i in range(m - w, m):  # cool-down
        if not last:
            out.append(("recv", "g", j, i))
        out.append(("B", 0, i))
        if not first:
            out.append(("send", "g", j - 1, i))
    return out


def gpipe_blocking_program(stages: int, microbatches: int, stage: int) -> list[tuple]:
    """GPipe with blocking paired send/recv: every forward with its transfers, then every backward."""
    L, m, j = stages, microbatches, stage
    out: list[tuple] = []
    for i in range(m):
        if j > 0:
            out.append(("recv", "a", j - 1, i))
        out.append(("F", 0, i))
        if j < L - 1:
            out.append(("send", "a", j, i))
    for i in range(m):
        if j < L - 1:
            out.append(("recv", "g", j, i))
        out.append(("B", 0, i))
        if j > 0:
            out.append(("send", "g", j - 1, i))
    return out


def p2p_program(p2p: str) -> tuple[bool, bool]:
    """``(blocking, batched)`` of the device programs of point-to-point mode ``p2p``: blocking
    (the device holds both ends of each transfer) under DeepSpeed's ``blocking`` and Megatron-LM's
    ``batched`` sends, batched (a send paired with the other direction's receive, in
    Megatron-LM's 1F1B order) under ``batched`` only; neither under ``overlap`` or ``shared``."""
    return p2p in ("blocking", "batched"), p2p == "batched"


def device_program(schedule: str, stages: int, microbatches: int, stage: int, *, v: int = 1,
                   blocking: bool = False, batched: bool = False,
                   recv_gather: bool = False) -> list[tuple]:
    """The per-step program of device ``stage`` of a pipeline of ``stages`` devices.

    Compute passes are ``("F" | "B", chunk, microbatch)``; with ``blocking``
    the transfers are explicit paired commands (:func:`deepspeed_program`),
    with ``batched`` too Megatron-LM's 1F1B with its batched send/receive
    pairs (:func:`megatron_program`), otherwise each pass waits for its input
    to arrive. ``recv_gather`` (schedule ``1f1b``, blocking, not batched): DeepSpeed
    0.3.13's program, its own step order with an all-gather ``("G", 0, i)`` before each
    gradient receive (:func:`deepspeed_program`). (A new list each call, of a program
    worked out once per arguments.)

    Raises
    ------
    ValueError
        For a schedule without a device program (SWARM, async) or a blocking
        interleaved program (Megatron's interleaved schedule overlaps its
        transfers; the blocking engine is DeepSpeed's, which has no interleaving),
        or a batched program of another schedule than 1f1b (Megatron-LM's batched pairs
        are its non-interleaved 1F1B's), or ``recv_gather`` with another program than
        DeepSpeed's blocking 1f1b.
    """
    return list(_device_program(schedule, stages, microbatches, stage, v, blocking, batched,
                                recv_gather))


@functools.lru_cache(maxsize=4096)
def _device_program(schedule: str, stages: int, microbatches: int, stage: int, v: int,
                    blocking: bool, batched: bool = False,
                    recv_gather: bool = False) -> tuple[tuple, ...]:
    return tuple(_program(schedule, stages, microbatches, stage, v=v, blocking=blocking,
                          batched=batched, recv_gather=recv_gather))


def _program(schedule: str, stages: int, microbatches: int, stage: int, *, v: int = 1,
             blocking: bool = False, batched: bool = False,
             recv_gather: bool = False) -> list[tuple]:
    """:func:`device_program`, worked out."""
    if recv_gather:
        if schedule == "1f1b" and blocking and not batched and v == 1:
            return deepspeed_program(stages, microbatches, stage, order="0.3.13",
                                     recv_gather=True)
        raise ValueError(f"no device program with an all-gather before the gradient receive "
                         f"for schedule {schedule} (blocking={blocking}, batched={batched})")
    if batched:
        if schedule == "1f1b" and blocking:
            return megatron_program(stages, microbatches, stage)
        raise ValueError(f"no batched device program for schedule {schedule} "
                         f"(blocking={blocking})")
    if schedule in ("1f1b", "1f1b-dynamic"):
        if blocking:
            return deepspeed_program(stages, microbatches, stage)
        return [(k, 0, i) for k, i in megatron_1f1b_order(stages, microbatches, stage)]
    if schedule == "gpipe":
        if blocking:
            return gpipe_blocking_program(stages, microbatches, stage)
        return [("F", 0, i) for i in range(microbatches)] + \
            [("B", 0, i) for i in range(microbatches)]
    if schedule == "interleaved" and not blocking:
        return list(interleaved_order(stages, v, microbatches, stage))
    raise ValueError(f"no device program for schedule {schedule} (blocking={blocking})")
