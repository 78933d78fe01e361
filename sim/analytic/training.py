"""Exact references for pipeline training in simulated wall clock.

Pure functions of their arguments (no simulation, no random numbers), checked
against the training DES of :mod:`sim.training`:

* :func:`pipeline_step_time`, :func:`pipeline_bubble_fraction`: GPipe and
  1F1B (PipeDream-flush) schedules with equal deterministic stage times;
  :func:`interleaved_bubble_ratio` for Megatron-LM's interleaved 1F1B;
* :func:`program_makespan`: the exact (max-plus) completion of fixed
  per-device programs with unequal stages, transfer times and blocking or
  overlapped point-to-point (the frameworks' schedules as
  :func:`sim.training.schedules.device_program` writes them);
  :func:`transfer_spans`, :func:`transfers_meet`: when each of its transfers
  runs, and whether two of given kinds overlap (the lockstep check of a
  plan on physical nodes, :func:`sim.profiles.build.in_lockstep`);
* :func:`erlang_c`, :func:`mmc_sojourn`: one stage of ``c`` replicas sharing
  one FIFO queue (M/M/c);
* :func:`saturated_throughput`, :func:`fill_drain_time`,
  :func:`finite_throughput_bound`: a saturated pipeline whose microbatches
  are routed in proportion to replica speed (SWARM parallelism);
* :func:`checkpoint_segment_time`, :func:`checkpoint_wall_time`,
  :func:`young_interval`, :func:`daly_interval`: checkpoint and restart under
  Poisson failures (Young 1974, Daly 2006);
* :func:`ring_allreduce_time` (defined in :mod:`sim.analytic.network`, the one
  ring law): the time of a ring all-reduce;
* :func:`bucket_ready_times`, :func:`overlapped_allreduce_end`: a gradient
  all-reduce in buckets released as the backward pass produces them (PyTorch
  DDP's ``Reducer``, Megatron-LM's ``overlap_grad_reduce``), one bucket after
  the other on the data-parallel communicator; :func:`overlapped_stage_ends`,
  :func:`overlapped_exposed_time`: every stage's such all-reduce after a
  pipeline's device programs (a plan's, each bucket at its own time).

References
----------
.. [GPipe] Y. Huang et al., "GPipe: efficient training of giant neural
   networks using pipeline parallelism", NeurIPS 2019.
.. [PDF] D. Narayanan et al., "Memory-efficient pipeline-parallel DNN
   training" (PipeDream-2BW / PipeDream-flush), ICML 2021.
.. [Erlang] A. K. Erlang (1917); see L. Kleinrock, "Queueing Systems,
   Volume 1: Theory", Wiley 1975, section 3.5 (M/M/m).
.. [SWARM] M. Ryabinin, T. Dettmers, M. Diskin, A. Borzunov, "SWARM
   parallelism: training large models can be surprisingly
   communication-efficient", ICML 2023.
.. [Young] J. W. Young, "A first order approximation to the optimum
   checkpoint interval", Communications of the ACM 17(9), 1974.
.. [Daly] J. T. Daly, "A higher order estimate of the optimum
   checkpoint interval for restart dumps", Future Generation Computer
   Systems 22(3), 2006.
.. [Megatron] D. Narayanan et al., "Efficient large-scale language model
   training on GPU clusters using Megatron-LM", SC 2021 (section 2.2: the
   interleaved schedule, bubble ``(p - 1) / (v m)``).
.. [MaxPlus] F. Baccelli, G. Cohen, G. J. Olsder, J.-P. Quadrat,
   "Synchronization and Linearity: an algebra for discrete event systems",
   Wiley 1992 (event graphs: completion times as max-plus recursions).
.. [Ring] P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms
   for clusters of workstations", J. Parallel Distrib. Comput. 69(2), 2009.
.. [DDP] S. Li et al., "PyTorch Distributed: experiences on accelerating data
   parallel training", VLDB 13(12), 2020 (section 3.2.3: gradient bucketing,
   overlapping the all-reduce of a bucket with the backward computation of the
   others; buckets reduced in order).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import check, check_int, check_nonnegative, check_positive
from .network import ring_allreduce_time

__all__ = [
    "pipeline_step_time",
    "pipeline_bubble_fraction",
    "erlang_c",
    "mmc_sojourn",
    "saturated_throughput",
    "fill_drain_time",
    "finite_throughput_bound",
    "checkpoint_segment_time",
    "checkpoint_wall_time",
    "young_interval",
    "daly_interval",
    "ring_allreduce_time",
    "interleaved_bubble_ratio",
    "program_makespan",
    "bucket_ready_times",
    "overlapped_allreduce_end",
    "overlapped_stage_ends",
    "overlapped_exposed_time",
]


# --------------------------------------------------------------------------- schedules


def pipeline_step_time(stages: int, microbatches: int, forward_time: float,
                       backward_time: float) -> float:
    """Time of one GPipe or 1F1B step with equal deterministic stage times.

    Parameters
    ----------
    stages : int
        Pipeline stages ``L`` (>= 1), one replica each.
    microbatches : int
        Microbatches per step ``m`` (>= 1).
    forward_time, backward_time : float
        Forward time ``t_f`` and backward time ``t_b`` of one microbatch at
        one stage (>= 0).

    Returns
    -------
    float

    Notes
    -----
    .. math:: T_{step} = (m + L - 1)(t_f + t_b)

    Each stage does ``m (t_f + t_b)`` of work and waits ``(L - 1)(t_f + t_b)``
    for the pipeline to fill and drain. It holds for GPipe (all forwards,
    then all backwards) and for 1F1B with at most ``L - j`` microbatches in
    flight at stage ``j`` (PipeDream-flush), with no transfer time, no
    gradient synchronisation and no optimizer time.

    References
    ----------
    [GPipe]_, [PDF]_.
    """
    L = check_int("stages", stages, low=1)
    m = check_int("microbatches", microbatches, low=1)
    tf = check_nonnegative("forward_time", forward_time)
    tb = check_nonnegative("backward_time", backward_time)
    return (m + L - 1) * (tf + tb)


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle fraction of each stage in a GPipe or 1F1B step.

    Notes
    -----
    .. math:: \\text{bubble} = \\frac{L - 1}{m + L - 1}

    (one minus ``m (t_f + t_b) / T_step``, see :func:`pipeline_step_time`;
    interleaving ``v`` model chunks per stage divides it by ``v``).

    References
    ----------
    [GPipe]_, [PDF]_.
    """
    L = check_int("stages", stages, low=1)
    m = check_int("microbatches", microbatches, low=1)
    return (L - 1) / (m + L - 1)


def interleaved_bubble_ratio(devices: int, chunks: int, microbatches: int) -> float:
    """Bubble time over ideal time of interleaved 1F1B, ``(p - 1) / (v m)``.

    Notes
    -----
    With ``p`` devices each holding ``v`` equal model chunks and ``m``
    micro-batches (a multiple of ``p``), and no transfer time, a step takes

    .. math:: T = \\left(m + \\frac{p - 1}{v}\\right)(t_f + t_b)

    with ``t_f`` and ``t_b`` a device's whole forward and backward time per
    micro-batch, so the bubble is ``(p - 1)(t_f + t_b) / v`` and its ratio to
    the ideal ``m (t_f + t_b)`` is ``(p - 1) / (v m)``; ``v = 1`` is 1F1B's
    ``(L - 1) / m``.

    References
    ----------
    [Megatron]_.
    """
    p = check_int("devices", devices, low=1)
    v = check_int("chunks", chunks, low=1)
    m = check_int("microbatches", microbatches, low=1)
    return (p - 1) / (v * m)


def program_makespan(programs: Sequence[Sequence[tuple]], forward: Sequence[float],
                     backward: Sequence[float], activation: Sequence[float],
                     gradient: Sequence[float], *, blocking: bool = False,
                     channels: bool = True, finish: dict | None = None,
                     starts: dict | None = None, ends: list | None = None,
                     spans: dict | None = None, gather: Sequence[float] | None = None) -> float:
    """Exact completion time of fixed per-device programs of one pipeline (max-plus).

    Parameters
    ----------
    programs : sequence of sequence of tuple
        ``programs[d]``: device ``d``'s commands in order (``p`` devices):
        compute ``("F" | "B", chunk, i)`` on model stage ``s = chunk p + d``,
        and with ``blocking`` the transfers ``("send" | "recv", "a" | "g",
        h, i)`` over hop ``h`` (between stages ``h`` and ``h + 1``) and an
        all-gather of the device alone ``("G", chunk, i)`` (DeepSpeed 0.3.13's,
        before its gradient receive: :func:`sim.training.schedules.deepspeed_program`).
    forward, backward : sequence of float
        Time of one pass of model stage ``s`` (``S = len(forward)`` stages).
    activation, gradient : sequence of float
        Transfer time of hop ``h`` forward (activation) and back (gradient).
    blocking : bool
        Paired blocking transfers (both devices busy from the later of their
        arrivals) rather than transfers in flight while the devices compute.
    channels : bool
        Transfers in flight move one at a time per sending and receiving
        device, in the order sent (FIFO channels: NCCL's one stream per pair,
        ``p2p="overlap"``); False: each on its own, whatever else moves
        (``p2p="shared"`` without a network).
    finish : dict, optional
        Filled with the completion time of every command, keyed
        ``(kind, stage or hop, i)``.
    starts : dict, optional
        Filled with the start time of every compute command, keyed as ``finish``.
    ends : list, optional
        Filled with the time each device ends its program (its last command: a pass, or
        with ``blocking`` the transfer after it), in device order.
    spans : dict, optional
        Filled with the ``(start, end)`` of every transfer, keyed ``(tag, hop, i)`` (``tag``
        ``"a"`` an activation, ``"g"`` a gradient): a blocking or batched transfer from the
        later post of its two parties, one in flight from when it leaves its channel's queue
        (or its pass, without ``channels``), to its arrival.
    gather : sequence of float, optional
        Time of one ``("G", chunk, i)`` command of model stage ``s`` (None: the programs
        have none).

    Returns
    -------
    float
        The time the last device finishes its program (all start at 0).

    Notes
    -----
    Every command completes at

    .. math:: c = \\max(c_{prev}, r) + d

    with ``c_prev`` the completion of the device's previous command, ``d``
    its duration and ``r`` its readiness (0 for an all-gather ``G``): overlapped, a
    forward of stage ``s > 0`` is ready at its input's forward completion plus the hop's
    activation time, a backward at its output gradient's backward completion
    plus the gradient time (the last stage's at its own forward); with
    ``channels`` a transfer in flight arrives at ``max(c, a_prev) + d``, ``c``
    the completion of the pass that sent it and ``a_prev`` the arrival of the
    transfer sent before it from the same device to the same device (a
    max-plus queue per channel); blocking, a
    pass's inputs were received by earlier commands of the device, and a
    send and its receive both complete at ``max(c_prev, c'_prev) + d``. The
    recursion is evaluated by repeatedly advancing every device whose next
    command is ready; programs that cannot all finish raise ``ValueError``.
    Which command completes when, and from which others, depends only on the
    programs, not on the times: that order is worked out once per set of
    programs (and kept, :func:`_trace`) and then evaluated with the times
    given, the same operations on the same numbers.

    References
    ----------
    [MaxPlus]_, [PDF]_, [Megatron]_.
    """
    p = len(programs)
    S = len(forward)
    check(len(backward) == S and len(activation) == max(S - 1, 0) == len(gradient), "stages",
          "forward and backward per stage, activation and gradient per hop", S)
    ops, keys, complete, gathered = _trace(tuple(tuple(prog) for prog in programs), S, blocking,
                                           channels)
    gathers = _gathers(gather, S, gathered)
    if finish is None and spans is None and complete and len(ops) >= _COMPILED_FROM:
        run = _compiled_runner()
        if run is not None:  # the same loop, compiled (numba): the same operations
            began_at = np.zeros(len(ops))
            free_at = np.zeros(p)
            T = run(_trace_array(ops), p, np.asarray(forward, dtype=float),
                    np.asarray(backward, dtype=float), np.asarray(activation, dtype=float),
                    np.asarray(gradient, dtype=float), gathers, began_at, free_at, _NO_SPANS,
                    _NO_SPANS)
            if starts is not None:
                starts.update((key, float(t0)) for key, t0, op in
                              zip(keys, began_at.tolist(), ops, strict=True) if op[0] < _XA)
            if ends is not None:
                ends.extend(free_at.tolist())
            return T
    free = [0.0] * p
    done = [0.0] * len(ops)
    arrival = [0.0] * len(ops)  # of the transfer in flight command k sent, if it sent one
    began = [0.0] * len(ops)
    for k, (code, d, peer, j, dep, send, prev) in enumerate(ops):
        if code == _G0:
            t0 = free[d]
            free[d] = done[k] = t0 + gather[j]  # type: ignore[index]
            began[k] = t0
            continue
        if code >= _XA:
            if code == _W:
                free[d] = done[k] = done[dep] if prev < 0 else max(done[dep], done[prev])
                continue
            t0 = max(free[d], free[peer])
            t = t0 + (activation[j] if code in (_XA, _TA) else gradient[j])
            done[k] = t
            if spans is not None:
                spans[keys[k]] = (t0, t)
            if code <= _XG:
                free[peer] = free[d] = t
            continue
        if code == _F0 or code == _B0:
            ready = 0.0
        elif code == _BL:
            ready = done[dep]
        else:
            ready = arrival[dep]
        t0 = max(free[d], ready)
        t = t0 + (forward[j] if code == _F0 or code == _FA else backward[j])
        free[d] = done[k] = t
        began[k] = t0
        if send:
            c = t if prev < 0 or t >= arrival[prev] else arrival[prev]
            arrival[k] = c + (activation[j] if send == _SEND_A else gradient[j - 1])
            if spans is not None:  # the pass's own key: (F, stage, i) or (B, stage, i)
                spans[("a", j, keys[k][2]) if send == _SEND_A else ("g", j - 1, keys[k][2])] \
                    = (c, arrival[k])
    if finish is not None:
        finish.update(zip(keys, done, strict=True))
    if starts is not None:
        starts.update((key, t0) for key, t0, op in zip(keys, began, ops, strict=True)
                      if op[0] < _XA)
    if not complete:
        raise ValueError("the programs deadlock (a command waits for one that never comes)")
    if ends is not None:
        ends.extend(free)
    return max(free) if free else 0.0


# the commands of a trace: a pass ready at 0 (forward, backward), a forward ready at its input's
# arrival, a last stage's backward ready at its own forward, a backward ready at its output
# gradient's arrival, a paired transfer (activation, gradient); what a pass sends on when it
# completes (overlapped): nothing, its output activation, its input gradient
_F0, _B0, _FA, _BL, _BG, _XA, _XG = range(7)
# (Megatron-LM's batched pairs) a transfer with a batched call on one side at least, ending at
# the later post of its two parties plus its time (activation, gradient); the end of a call
# (the later end of its transfers)
_TA, _TG, _W = 7, 8, 9
# (DeepSpeed 0.3.13) an all-gather of the device alone, ready at 0 (before a gradient receive)
_G0 = 10
_SEND_A, _SEND_G = 1, 2


def _gathers(gather: Sequence[float] | None, S: int, gathered: bool) -> Any:
    """The all-gather time per model stage as an array (zeros when ``gather`` is None; one
    line when the programs have an all-gather, ``gathered``, but no times are given)."""
    if gather is None:
        check(not gathered, "gather", "given for programs with an all-gather command (G)", None)
        return np.zeros(S)
    check(len(gather) == S, "gather", f"one time per stage ({S})", len(gather))
    return np.asarray(gather, dtype=float)


#: Traces of at least this many commands are evaluated compiled when numba is installed.
_COMPILED_FROM = 200
_NO_SPANS = np.zeros(0)  # the compiled loop's span arrays when no spans are asked for


def transfer_spans(programs: Sequence[Sequence[tuple]], forward: Sequence[float],
                   backward: Sequence[float], activation: Sequence[float],
                   gradient: Sequence[float], *, blocking: bool = False, channels: bool = True,
                   gather: Sequence[float] | None = None) -> tuple[Any, Any, Any]:
    """Every transfer of :func:`program_makespan`'s evaluation (same arguments), as arrays:
    its kind (``2 h`` hop ``h``'s activation, ``2 h + 1`` its gradient), start and end (as
    its ``spans``), one entry per transfer. Compiled where :func:`program_makespan` is."""
    ops, keys, complete, gathered = _trace(tuple(tuple(prog) for prog in programs),
                                           len(forward), blocking, channels)
    run = _compiled_runner() if complete and len(ops) >= _COMPILED_FROM else None
    if run is None:
        spans: dict = {}
        program_makespan(programs, forward, backward, activation, gradient, blocking=blocking,
                         channels=channels, spans=spans, gather=gather)
        kind = np.array([2 * h + (tag == "g") for tag, h, _ in spans], dtype=np.int64)
        t = np.array(list(spans.values()), dtype=float).reshape(len(spans), 2)
        return kind, t[:, 0].copy(), t[:, 1].copy()
    rows, kind = _trace_transfers(ops)
    xs, xe = np.zeros(len(ops)), np.zeros(len(ops))
    run(_trace_array(ops), len(programs), np.asarray(forward, dtype=float),
        np.asarray(backward, dtype=float), np.asarray(activation, dtype=float),
        np.asarray(gradient, dtype=float), _gathers(gather, len(forward), gathered),
        np.zeros(len(ops)), np.zeros(len(programs)), xs, xe)
    return kind, xs[rows], xe[rows]


def transfers_meet(programs: Sequence[Sequence[tuple]], forward: Sequence[float],
                   backward: Sequence[float], activation: Sequence[float],
                   gradient: Sequence[float], groups: tuple[tuple[int, ...], ...], *,
                   blocking: bool = False, channels: bool = True, key: Any = None,
                   gather: Sequence[float] | None = None) -> bool:
    """Whether, in :func:`program_makespan`'s evaluation (same arguments), two transfers of
    the kinds of one of ``groups`` (kinds as :func:`transfer_spans`') overlap: intervals of
    positive length meeting (one starts before another begun no later has ended). ``key``
    (optional, hashable): names the programs, the same key for the same programs (their
    trace is then kept under it, not looked up by the programs themselves). ``gather``: as
    :func:`program_makespan`'s."""
    k = None if key is None else (key, len(forward), blocking, channels)
    hit = _MEET_KEPT.get(k) if k is not None else None
    if hit is None:
        ops, _keys, complete, gathered = _trace(tuple(tuple(prog) for prog in programs),
                                                len(forward), blocking, channels)
        _gathers(gather, len(forward), gathered)  # one line if the programs need times
        hit = (None, None, 0, {}) if not complete or len(ops) < _COMPILED_FROM else \
            (_trace_array(ops), _trace_transfers(ops), len(ops), {})
        if k is not None:
            if len(_MEET_KEPT) >= 256:
                _MEET_KEPT.clear()
            _MEET_KEPT[k] = hit
    run = _compiled_runner() if hit[0] is not None else None
    if run is None:
        kind, t0, t1 = transfer_spans(programs, forward, backward, activation, gradient,
                                      blocking=blocking, channels=channels, gather=gather)
        return any(_meet(t0, t1, np.flatnonzero(np.isin(kind, g))) for g in groups)
    arr, (rows, kind), n, kept = hit
    rows_of = kept.get(groups)
    if rows_of is None:  # per group of kinds, the commands that are or send one of them
        if len(kept) >= 4096:
            kept.clear()
        rows_of = kept[groups] = [rows[np.isin(kind, g)] for g in groups]
    xs, xe = np.zeros(n), np.zeros(n)
    run(arr, len(programs), np.asarray(forward, dtype=float),
        np.asarray(backward, dtype=float), np.asarray(activation, dtype=float),
        np.asarray(gradient, dtype=float), _gathers(gather, len(forward), False),
        np.zeros(n), np.zeros(len(programs)), xs, xe)
    meet = _compiled_meet()
    return any(meet(xs, xe, rows) for rows in rows_of)


_MEET_KEPT: dict = {}  # transfers_meet's traces by the caller's key (at most 256)


def _meet(xs: Any, xe: Any, rows: Any) -> bool:
    """Whether two of the transfers ``rows`` (start ``xs``, end ``xe``) of positive length
    overlap."""
    a, b = xs[rows], xe[rows]
    order = np.argsort(a, kind="mergesort")
    end = -np.inf
    for k in order:
        if b[k] > a[k]:
            if a[k] < end:
                return True
            if b[k] > end:
                end = b[k]
    return False


@functools.lru_cache(maxsize=1)
def _compiled_meet() -> Any:
    """:func:`_meet` compiled with numba (itself without it)."""
    from ..xoshiro import HAVE_NUMBA, jit

    return jit(_meet) if HAVE_NUMBA else _meet


@functools.lru_cache(maxsize=256)
def _trace_transfers(ops: tuple) -> tuple[Any, Any]:
    """The trace's commands that are or send a transfer, and each one's kind (as
    :func:`transfer_spans`)."""
    rows, kind = [], []
    for k, (code, _d, _peer, j, _dep, send, _prev) in enumerate(ops):
        if code in (_XA, _TA, _XG, _TG):
            rows.append(k)
            kind.append(2 * j + (code in (_XG, _TG)))
        elif code < _XA and send:
            rows.append(k)
            kind.append(2 * j if send == _SEND_A else 2 * (j - 1) + 1)
    return np.array(rows, dtype=np.int64), np.array(kind, dtype=np.int64)


@functools.lru_cache(maxsize=256)
def _trace_array(ops: tuple) -> Any:
    """A trace's commands as an ``(n, 7)`` integer array (for the compiled loop)."""
    return np.array(ops, dtype=np.int64).reshape(len(ops), 7)


@functools.lru_cache(maxsize=1)
def _compiled_runner() -> Any:
    """The trace loop compiled with numba (``dtsim[fast]``), or None without it."""
    from ..xoshiro import HAVE_NUMBA, jit

    if not HAVE_NUMBA:
        return None
    return jit(_run_trace)


def _run_trace(ops: Any, p: int, forward: Any, backward: Any, activation: Any,
               gradient: Any, gather: Any, began: Any, ends: Any, xs: Any, xe: Any) -> float:
    """:func:`program_makespan`'s loop over a trace (``ops`` as from :func:`_trace_array`);
    ``max(x, y)`` written as Python's builtin takes it (``y if y > x else x``); ``began[k]``
    is set to the start of compute (or all-gather) command ``k``, ``ends[d]`` to device
    ``d``'s end, and (where ``xs`` is not empty) ``xs[k]``, ``xe[k]`` to the start and end of the transfer
    command ``k`` is, or sends (:func:`transfer_spans`)."""
    spans = xs.shape[0] > 0
    free = np.zeros(p)
    done = np.zeros(ops.shape[0])
    arrival = np.zeros(ops.shape[0])
    for k in range(ops.shape[0]):
        code, d, peer, j, dep = ops[k, 0], ops[k, 1], ops[k, 2], ops[k, 3], ops[k, 4]
        send, prev = ops[k, 5], ops[k, 6]
        x = free[d]
        if code == _G0:
            t = x + gather[j]
            free[d] = t
            done[k] = t
            began[k] = x
            continue
        if code == _W:
            t = done[dep]
            if prev >= 0 and done[prev] > t:
                t = done[prev]
            free[d] = t
            done[k] = t
            continue
        if code >= _XA:
            r = free[peer]
            t0 = r if r > x else x
            t = t0 + (activation[j] if code == _XA or code == _TA else gradient[j])
            done[k] = t
            if spans:
                xs[k] = t0
                xe[k] = t
            if code <= _XG:
                free[peer] = t
                free[d] = t
            continue
        if code == _F0 or code == _B0:
            r = 0.0
        elif code == _BL:
            r = done[dep]
        else:
            r = arrival[dep]
        t0 = r if r > x else x
        t = t0 + (forward[j] if code == _F0 or code == _FA else backward[j])
        free[d] = t
        done[k] = t
        began[k] = t0
        if send != 0:
            c = t if prev < 0 or t >= arrival[prev] else arrival[prev]
            arrival[k] = c + (activation[j] if send == _SEND_A else gradient[j - 1])
            if spans:
                xs[k] = c
                xe[k] = arrival[k]
    best = free[0]
    for d in range(p):
        ends[d] = free[d]
        if free[d] > best:
            best = free[d]
    return best


def _transfer_ends(op: tuple) -> list[tuple]:
    """The transfers of a transfer command, ``[(role, tag, hop, i)]``: one for a lone
    ``send``/``recv``, a send then a receive for a batched ``sendrecv``
    (:func:`sim.training.schedules.megatron_program`)."""
    if op[0] == "sendrecv":
        return [("send", op[1], op[2], op[3]), ("recv", op[4], op[5], op[6])]
    return [(op[0], op[1], op[2], op[3])]


def _peer(role: str, tag: str, h: int, p: int) -> int:
    """The device at the other end of ``role`` (``send``/``recv``) of hop ``h``'s activation
    (``tag`` ``a``, sent by stage ``h``) or gradient (``g``, sent by stage ``h + 1``), of ``p``
    devices."""
    sender = h % p if tag == "a" else (h + 1) % p
    receiver = (h + 1) % p if tag == "a" else h % p
    return receiver if role == "send" else sender


@functools.lru_cache(maxsize=256)
def _trace(programs: tuple[tuple[tuple, ...], ...], S: int, blocking: bool, channels: bool
           ) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple, ...], bool, bool]:
    """The order in which :func:`program_makespan` completes the programs' commands.

    Each command as ``(code, device, peer, stage or hop, command it waits for,
    what it sends on, the command that sent the transfer before it on the same
    channel)`` (-1 where none; the last only with ``channels``), in completion
    order; the key of each (as ``finish`` has them); whether every program
    finishes; whether the programs hold an all-gather ``G``. The order is that of repeatedly advancing every device whose
    next command is ready: readiness is whether a command (or the transfer it
    sent) has completed, never its time, so the order depends on the programs only.
    """
    p = len(programs)
    pos = [0] * p
    index: dict = {}
    last: dict = {}  # channel (sender device, receiver device) -> the command that last sent on it
    ops: list[tuple[int, ...]] = []
    keys: list[tuple] = []
    got: list[dict] = [{} for _ in range(p)]  # per device: its call's transfers done so far
    waits = [0] * p

    def _wait(dev: int, xs: list[int]) -> None:
        """Device ``dev``'s call is over when its transfers ``xs`` (one or two) are."""
        keys.append(("call", dev, waits[dev]))
        waits[dev] += 1
        ops.append((_W, dev, -1, 0, xs[0], 0, xs[1] if len(xs) > 1 else -1))
        got[dev] = {}
        pos[dev] += 1

    progress = True
    while progress:
        progress = False
        for d in range(p):
            prog = programs[d]
            while pos[d] < len(prog):
                op = prog[pos[d]]
                kind = op[0]
                if kind == "G":  # an all-gather of the device alone: ready when the device is
                    s = op[1] * p + d
                    keys.append(("G", s, op[2]))
                    ops.append((_G0, d, -1, s, -1, 0, -1))
                    pos[d] += 1
                    progress = True
                    continue
                if kind in ("F", "B"):
                    s, i = op[1] * p + d, op[2]
                    dep = -1
                    if blocking or (kind == "F" and s == 0):
                        code = _F0 if kind == "F" else _B0
                    else:
                        want = ("F", s - 1, i) if kind == "F" else (
                            ("F", s, i) if s == S - 1 else ("B", s + 1, i))
                        x = index.get(want)
                        if x is None:
                            break
                        dep = x
                        code = _FA if kind == "F" else (_BL if s == S - 1 else _BG)
                    send, prev = 0, -1
                    if not blocking and (s < S - 1 if kind == "F" else s > 0):
                        send = _SEND_A if kind == "F" else _SEND_G
                        if channels:
                            channel = (d, (s + 1) % p if kind == "F" else (s - 1) % p)
                            prev = last.get(channel, -1)
                            last[channel] = len(ops)
                    index[(kind, s, i)] = len(ops)
                    keys.append((kind, s, i))
                    ops.append((code, d, -1, s, dep, send, prev))
                    pos[d] += 1
                    progress = True
                    continue
                if kind != "sendrecv" and not got[d]:
                    tag, h, i = op[1], op[2], op[3]
                    peer = _peer(kind, tag, h, p)
                    want = ("recv" if kind == "send" else "send", tag, h, i)
                    if pos[peer] >= len(programs[peer]):
                        break
                    theirs = tuple(programs[peer][pos[peer]])
                    if theirs == want:  # two lone calls: one paired blocking transfer
                        index[(tag, h, i)] = len(ops)
                        keys.append((tag, h, i))
                        ops.append((_XA if tag == "a" else _XG, d, peer, h, -1, 0, -1))
                        pos[d] += 1
                        pos[peer] += 1
                        progress = True
                        continue
                # a batched pair on one side at least: each transfer starts once both of its
                # parties have posted their calls; a call ends when all its transfers have
                mine = _transfer_ends(op)
                for end in mine:
                    if end in got[d]:
                        continue
                    role, tag, h, i = end
                    peer = _peer(role, tag, h, p)
                    if pos[peer] >= len(programs[peer]) or programs[peer][pos[peer]][0] not in \
                            ("send", "recv", "sendrecv"):
                        continue
                    theirs = _transfer_ends(programs[peer][pos[peer]])
                    want = ("recv" if role == "send" else "send", tag, h, i)
                    if want not in theirs:
                        continue
                    x = len(ops)
                    index[(tag, h, i)] = x
                    keys.append((tag, h, i))
                    ops.append((_TA if tag == "a" else _TG, d, peer, h, -1, 0, -1))
                    got[d][end] = x
                    got[peer][want] = x
                    if len(got[peer]) == len(theirs):  # the peer's call is over
                        _wait(peer, [got[peer][e] for e in theirs])
                if len(got[d]) < len(mine):
                    break
                _wait(d, [got[d][e] for e in mine])
                progress = True
    complete = all(pos[d] >= len(programs[d]) for d in range(p))
    return tuple(ops), tuple(keys), complete, any(op[0] == _G0 for op in ops)


def bucket_ready_times(start: float, duration: float, sizes: Sequence[float]) -> list[float]:
    """When each bucket's gradients are produced by a backward pass of ``duration`` from ``start``.

    Notes
    -----
    The pass produces the stage's gradients at an even rate, bucket after
    bucket in the order given (the order the backward pass reaches them):

    .. math:: r_b = t_0 + d \\, \\frac{\\sum_{b' \\le b} s_{b'}}{\\sum_{b'} s_{b'}}

    with the last bucket ready as the pass ends (``r_B = t_0 + d`` exactly).
    """
    total = math.fsum(sizes)
    out, acc = [], 0.0
    for k, b in enumerate(sizes):
        acc += b
        f = 1.0 if k == len(sizes) - 1 else acc / total
        out.append(start + duration * f)
    return out


def overlapped_allreduce_end(ready: Sequence[float], durations: Sequence[float]) -> float:
    """When a bucketed all-reduce overlapped with the backward pass ends.

    Parameters
    ----------
    ready : sequence of float
        ``r_b``: when every participant has produced bucket ``b`` (the latest
        of their :func:`bucket_ready_times`), in bucket order.
    durations : sequence of float
        ``T_b``: bucket ``b``'s all-reduce alone (e.g.
        :func:`ring_allreduce_time` of its size).

    Notes
    -----
    The buckets are all-reduced in order on one communicator (DDP's
    ``Reducer`` launches them in bucket order; NCCL runs a communicator's
    operations one after the other), each once it is ready:

    .. math:: e_b = \\max(r_b, e_{b-1}) + T_b, \\qquad e_0 = -\\infty

    and the exposed all-reduce time after the last backward pass ends at
    ``t_end`` is ``e_B - t_end``; the all-reduce that waits for the end of the
    backward pass (``overlap=none``) ends at ``t_end + sum_b T_b`` [DDP]_.
    Returns ``-inf`` for no bucket.

    References
    ----------
    [DDP]_, [MaxPlus]_.
    """
    check(len(ready) == len(durations), "durations", f"{len(ready)} values (one per bucket)",
          len(durations))
    e = -math.inf
    for r, T in zip(ready, durations, strict=True):
        e = (r if r >= e else e) + T
    return e


def overlapped_stage_ends(last_backward: Sequence[Sequence[tuple[float, float]]],
                          buckets: Sequence[Sequence[tuple[float, float]]]) -> list[float]:
    """When each stage's bucketed all-reduce, overlapped with its last backward passes, ends.

    Parameters
    ----------
    last_backward : sequence of sequence of (float, float)
        Per stage ``j``: the ``(start, duration)`` of the last backward pass of
        each participant of its all-reduce (one per pipeline, e.g. from
        :func:`program_makespan`'s ``starts``).
    buckets : sequence of sequence of (float, float)
        Per stage ``j``: each bucket's ``(size, T_b)`` in the order the
        backward pass produces them (``T_b`` its all-reduce alone: the ring
        law of its size over the stage's links); empty when the stage
        all-reduces nothing (one replica).

    Returns
    -------
    list of float
        ``e_j`` per stage: ``-inf`` for a stage without buckets.

    Notes
    -----
    Every participant produces the stage's gradients at an even rate over its
    last backward pass (:func:`bucket_ready_times`); bucket ``b`` is released
    when every participant has produced it, ``r_b = max_i r_{i,b}``, and the
    buckets are reduced one after the other (:func:`overlapped_allreduce_end`):

    .. math:: e_b = \\max(r_b, e_{b-1}) + T_b, \\qquad e_j = e_B.

    The stages' all-reduces run at once on communicators of their own (one per
    stage's data-parallel group: they share no link on a plan's network).

    References
    ----------
    [DDP]_, [MaxPlus]_.
    """
    check(len(last_backward) == len(buckets), "buckets",
          f"{len(last_backward)} stages (one per stage of last_backward)", len(buckets))
    out = []
    for passes, bks in zip(last_backward, buckets, strict=True):
        if not bks or not passes:
            out.append(-math.inf)
            continue
        sizes = [s for s, _ in bks]
        ready = [max(x) for x in zip(*(bucket_ready_times(t0, d, sizes) for t0, d in passes),
                                     strict=True)]
        out.append(overlapped_allreduce_end(ready, [T for _, T in bks]))
    return out


def overlapped_exposed_time(end: float, last_backward: Sequence[Sequence[tuple[float, float]]],
                            buckets: Sequence[Sequence[tuple[float, float]]]) -> float:
    """The all-reduce time a step adds after its pipeline phase ending at ``end``, when every
    stage's all-reduce overlaps its last backward passes (:func:`overlapped_stage_ends`).

    Notes
    -----
    The step waits for the pipeline phase and for every stage's last bucket
    (the framework's step: the optimizer runs once the gradients are reduced):

    .. math:: \\max(t_{end}, \\max_j e_j) - t_{end}

    the overlapped all-reduce's exposed time (0 when every bucket is done before
    the pipeline ends). Without overlap the same buckets, all released at the
    end of the backward pass, would add ``sum_b T_b`` (the slowest stage's).
    """
    e = max([end, *overlapped_stage_ends(last_backward, buckets)])
    return e - end


# --------------------------------------------------------------------------- M/M/c


def erlang_c(servers: int, offered_load: float) -> float:
    """Erlang C: the probability that an arrival waits in an M/M/c queue.

    Parameters
    ----------
    servers : int
        Servers ``c`` (>= 1).
    offered_load : float
        ``A = lambda / mu`` in Erlangs, ``0 <= A < c``.

    Returns
    -------
    float

    Notes
    -----
    With the Erlang B recursion :math:`B_0 = 1`,
    :math:`B_k = A B_{k-1} / (k + A B_{k-1})` (numerically stable),

    .. math:: C(c, A) = \\frac{B_c}{1 - (A/c)(1 - B_c)}.

    References
    ----------
    [Erlang]_.
    """
    c = check_int("servers", servers, low=1)
    A = check_nonnegative("offered_load", offered_load)
    check(A < c, "offered_load", f"< servers ({c}) for a stable queue", offered_load)
    b = 1.0
    for k in range(1, c + 1):
        b = A * b / (k + A * b)
    rho = A / c
    return b / (1.0 - rho * (1.0 - b))


def mmc_sojourn(servers: int, arrival_rate: float, service_rate: float) -> float:
    """Mean time in system (wait plus service) of an M/M/c queue.

    Parameters
    ----------
    servers : int
        Identical servers ``c`` sharing one FIFO queue.
    arrival_rate : float
        Poisson arrival rate ``lambda`` (> 0), ``lambda < c mu``.
    service_rate : float
        Exponential service rate ``mu`` of each server (> 0).

    Returns
    -------
    float

    Notes
    -----
    .. math:: W = \\frac{C(c, \\lambda/\\mu)}{c\\mu - \\lambda} + \\frac{1}{\\mu}

    with :math:`C` the Erlang C probability of waiting (:func:`erlang_c`);
    for ``c = 1`` this is :math:`1/(\\mu - \\lambda)`.

    References
    ----------
    [Erlang]_.
    """
    c = check_int("servers", servers, low=1)
    lam = check_positive("arrival_rate", arrival_rate)
    mu = check_positive("service_rate", service_rate)
    check(lam < c * mu, "arrival_rate", f"< servers x service_rate ({c * mu:g})", arrival_rate)
    return erlang_c(c, lam / mu) / (c * mu - lam) + 1.0 / mu


# --------------------------------------------------------------------------- saturated


def _speeds_work(speeds: Sequence[Sequence[float]], work: Sequence[float]
                 ) -> tuple[list[list[float]], list[float]]:
    v = [[check_positive("speed", s) for s in stage] for stage in speeds]
    w = [check_positive("work", x) for x in work]
    check(len(v) == len(w) and len(v) >= 1, "work", f"one value per stage ({len(v)})", list(work))
    for stage in v:
        check(len(stage) >= 1, "speeds", "at least one replica per stage", stage)
    return v, w


def saturated_throughput(speeds: Sequence[Sequence[float]], work: Sequence[float]) -> float:
    """Saturated throughput of a pipeline routed in proportion to speed.

    Parameters
    ----------
    speeds : sequence of sequence of float
        ``speeds[j][i]``: speed ``v_ij`` of replica ``i`` of stage ``j`` (> 0);
        a pass of nominal time ``t`` takes ``t / v_ij``.
    work : sequence of float
        Nominal work ``w_j = t_f + t_b`` of one microbatch at stage ``j`` (> 0).

    Returns
    -------
    float
        Microbatches per time unit.

    Notes
    -----
    .. math:: X = \\min_j \\frac{\\sum_i v_{ij}}{w_j}

    Routing a fraction :math:`v_{ij}/\\sum_i v_{ij}` of stage ``j``'s
    microbatches to replica ``i`` loads every replica of the stage equally,
    at :math:`\\lambda w_j / \\sum_i v_{ij}`, so the stage saturates at the
    same rate for all its replicas; the pipeline runs at its slowest stage's
    rate. It is reached in the long run of an unbounded supply of
    microbatches when one stage is strictly the bottleneck (with ties the
    random shares of the tied stages leave them idle now and then).

    **Fill and drain.** ``n`` microbatches take at least
    ``n / X + D`` (:func:`fill_drain_time`), so ``n / T(n) <= n / (n/X + D)``
    (:func:`finite_throughput_bound`), with a relative deficit ``O(1/n)``;
    random routing adds the imbalance of the random shares to the drain,
    ``O(sqrt(n))``, so the measured rate of a finite run approaches ``X`` as
    ``O(n^{-1/2})``; a steady window (between the completion of the first and
    last few microbatches) measures ``X`` itself.

    References
    ----------
    [SWARM]_.
    """
    v, w = _speeds_work(speeds, work)
    return min(sum(vs) / wj for vs, wj in zip(v, w, strict=True))


def fill_drain_time(speeds: Sequence[Sequence[float]], work: Sequence[float]) -> float:
    """Least extra time beyond ``n / X`` a finite saturated run needs.

    Notes
    -----
    With ``b`` the bottleneck stage of :func:`saturated_throughput`, the first
    microbatch reaches it after the work of the stages before it and the last
    leaves after the work of the stages after it, each at best on the fastest
    replica:

    .. math:: D = \\sum_{j \\ne b} \\frac{w_j}{\\max_i v_{ij}}.

    References
    ----------
    [SWARM]_.
    """
    v, w = _speeds_work(speeds, work)
    rates = [sum(vs) / wj for vs, wj in zip(v, w, strict=True)]
    b = rates.index(min(rates))
    return sum(wj / max(vs) for j, (vs, wj) in enumerate(zip(v, w, strict=True)) if j != b)


def finite_throughput_bound(speeds: Sequence[Sequence[float]], work: Sequence[float],
                            microbatches: int) -> float:
    """Upper bound ``n / (n/X + D)`` on the throughput of ``n`` saturated microbatches.

    Notes
    -----
    .. math:: X_n \\le \\frac{n}{n / X + D}

    with ``X`` from :func:`saturated_throughput` and ``D`` from
    :func:`fill_drain_time`; it tends to ``X`` as ``n`` grows.

    References
    ----------
    [SWARM]_.
    """
    n = check_int("microbatches", microbatches, low=1)
    X = saturated_throughput(speeds, work)
    return n / (n / X + fill_drain_time(speeds, work))


# --------------------------------------------------------------------------- checkpointing


def checkpoint_segment_time(work: float, checkpoint_cost: float, restart_cost: float,
                            mtbf: float) -> float:
    """Expected time to complete one segment of work and its checkpoint.

    Parameters
    ----------
    work : float
        Work per segment ``tau = K t`` (K steps of time t), >= 0.
    checkpoint_cost : float
        Checkpoint time ``C`` (>= 0).
    restart_cost : float
        Restart time ``R`` after a failure (>= 0).
    mtbf : float
        Mean time between failures ``M`` (> 0); failures are Poisson at rate
        ``1/M`` at all times, during work, checkpoint and restart alike.

    Returns
    -------
    float

    Notes
    -----
    .. math:: E[T_{seg}] = M e^{R/M} \\left(e^{(\\tau + C)/M} - 1\\right)

    A failure loses the segment in progress (work and checkpoint); it is
    followed by a restart of ``R``, itself restarted by a failure, and the
    segment is attempted again from its start. The first attempt pays no
    restart.

    References
    ----------
    [Daly]_ (equation for the expected wall clock time of one segment).
    """
    tau = check_nonnegative("work", work)
    C = check_nonnegative("checkpoint_cost", checkpoint_cost)
    R = check_nonnegative("restart_cost", restart_cost)
    M = check_positive("mtbf", mtbf)
    return M * math.exp(R / M) * math.expm1((tau + C) / M)


def checkpoint_wall_time(steps: int, step_time: float, checkpoint_every: int,
                         checkpoint_cost: float, restart_cost: float, mtbf: float) -> float:
    """Expected wall time of ``N`` steps checkpointed every ``K`` (``N/K`` segments).

    Notes
    -----
    .. math:: E[T_N] = \\frac{N}{K} M e^{R/M}\\left(e^{(K t + C)/M} - 1\\right)

    for ``N`` a multiple of ``K`` (see :func:`checkpoint_segment_time`).

    References
    ----------
    [Daly]_.
    """
    N = check_int("steps", steps, low=1)
    K = check_int("checkpoint_every", checkpoint_every, low=1)
    check(N % K == 0, "steps", f"a multiple of checkpoint_every ({K})", steps)
    t = check_nonnegative("step_time", step_time)
    return (N // K) * checkpoint_segment_time(K * t, checkpoint_cost, restart_cost, mtbf)


def young_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young's optimum work between checkpoints, ``sqrt(2 C M)``.

    Notes
    -----
    .. math:: \\tau_{Young} = \\sqrt{2 C M}

    First order in ``C / M``.

    References
    ----------
    [Young]_.
    """
    C = check_positive("checkpoint_cost", checkpoint_cost)
    M = check_positive("mtbf", mtbf)
    return math.sqrt(2.0 * C * M)


def daly_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Daly's higher-order optimum work between checkpoints.

    Notes
    -----
    .. math::
        \\tau_{Daly} = \\sqrt{2 C M}\\left[1 + \\frac{1}{3}\\sqrt{\\frac{C}{2M}}
        + \\frac{C}{18 M}\\right] - C \\quad (C < 2M), \\qquad M \\text{ otherwise}.

    References
    ----------
    [Daly]_.
    """
    C = check_positive("checkpoint_cost", checkpoint_cost)
    M = check_positive("mtbf", mtbf)
    if C >= 2.0 * M:
        return M
    return math.sqrt(2.0 * C * M) * (1.0 + math.sqrt(C / (2.0 * M)) / 3.0 + C / (18.0 * M)) - C


