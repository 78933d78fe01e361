"""Redundant computation (Bamboo): a stage's predecessor holds its weights and takes it over.

The job runs ``P = n // L`` pipelines of the config's depth ``L`` as rings:
the node of stage ``j`` also holds the weights of its successor, stage
``j + 1`` (the last node holds the first stage's: Bamboo's
``get_redundant_stage_ids``, ``(stage_id + 1) % num_stages``, in
``external/deepspeed/deepspeed/runtime/pipe/redundancy.py`` of
uclasystem/bamboo, and its ``EagerRecoverySchedule`` runs the successor's
forward passes); in eager mode (below) it runs that stage's forward passes again
in its pipeline bubbles, which costs ``overhead`` of the step time in normal
operation. When a node is lost, the node holding its copy takes its stage over and
runs both: the step in progress and every step after it run
``slowdown`` times slower until a rebalance (cost ``rebalance``) re-forms the
rings from the workers that are ready. A stage whose copy is gone too (two
adjacent nodes lost before a rebalance, or a node that had already taken a
stage over) is fatal: the job rolls back to its last checkpoint and restarts
(cost ``restart``). After each step the job rebalances when (Bamboo's rule)
there are as many spares as overloaded nodes, or the overloaded nodes are
more than ``threshold`` of the active ones counted twice, or the ready
workers can form one more pipeline.

Bamboo's two recovery modes (``mode``; uclasystem/bamboo 8080929, paths under
``external/deepspeed/deepspeed/``):

* ``eager``, the default: Bamboo as published, its paper (Thorpe et al., NSDI 2023,
  abstract) and its repository's README both describing redundant computation run in
  the pipeline bubbles for a low-pause recovery. The copy's layers and buffers are on the GPU
  (``engine.py:338-345``) and the successor's forwards run each step
  (``EagerRecoverySchedule``, ``schedule.py:504-524``), their outputs kept, so a
  takeover redoes no forward (``_exec_forward_pass`` returns on a kept output,
  ``engine.py:1627-1628``). ``overhead=None`` derives the overhead from the schedule:
  each node runs ``b`` extra forward passes of its successor's stage (``b``
  microbatches per pipeline), and what does not fit in its idle time within the step
  is added to the step (none with a step-time table, which is measured with the
  redundancy on). With ``--plan`` the copy and the kept forwards' activations count in
  each GPU's memory (:func:`sim.profiles.build.eager_copy_memory`: 16 bytes a
  parameter, fp32 whatever the plan's precision): a plan they do not fit is refused, a
  formation they do not fit is not formed. Bamboo has no tensor-parallel path (its
  engine forms pipe x data topologies, ``PipeDataParallelTopology``,
  ``runtime/pipe/topology.py:262-263``); for a TP > 1 plan dtsim extends it: each TP
  rank of the node holds its TP shard of the copy, the successor stage's parameters
  split as the plan's own are at that TP, and the kept forwards' activations as the
  plan's activation memory at that TP.
* ``lazy``: Bamboo's code's parameter default, what its examples run without
  ``--eager``: ``PipelineEngine(..., eager_recovery=False)``
  (``runtime/pipe/engine.py:104-105``), ``deepspeed.initialize(...,
  eager_recovery=False)`` (``__init__.py:76``), the examples' ``--eager`` a
  ``store_true`` (``DeepSpeedExamples/pipeline_parallelism/gpt2.py``); its launch
  script passes extra arguments through (``run-project-pactum.sh:29``, ``${@:5}``), so
  it fixes neither mode. The copy is kept in CPU memory (``runtime/pipe/engine.py:
  336-349``), no redundant forward runs (``LazyRecoverySchedule``,
  ``runtime/pipe/schedule.py:469-501``, adds only one-value pings), so there is no
  per-step overhead. At a takeover the node builds the copy's layers on its GPU from
  the CPU buffers (``engine.py:1232-1238``, ``module.py:262-331``) and redoes the lost
  stage's passes of the step in progress up to the failure
  (``NextStageFailoverSchedule``, ``schedule.py:348-353``), its forwards included: the
  step waits for ``done x b x t_f`` (the stage's ``b`` forwards, pro rata of the step
  done; none with a step-time table; two takeovers' nodes recompute at once, each on its
  own GPU: the longer) before its rest runs ``slowdown`` times slower.
  The copy's load from CPU memory is not timed (no host-to-device bandwidth in the
  profiles).

In both modes the lost node's backward passes of the step in progress are redone
too (the same schedule); neither dtsim nor Bamboo's simulator times that apart from
``slowdown``, and neither times the device-to-host copies of each step's
activations and input gradients Bamboo keeps for recovery (``engine.py:1715-1717``,
``1987-1992``). Bamboo's code sends no weights to the copy during training
(``TrainSchedule`` emits no ``SendWeights``; ``_exec_recv_weights`` returns at once,
``engine.py:2110-2112``); dtsim charges no such sync either.

A preemption notice (``notice="drain"``): the job rebalances without the
leaving node at the last step end from which that completes before the preemption
(not at all when the job ends by then),
so the node leaves without a takeover.

Defaults, from Bamboo's simulator (uclasystem/bamboo,
``project_pactum/simulation/simulator.py``, MIT) and the Oobleck artifact's
copy of it: a takeover runs ``slowdown`` 1.5 times slower; a rebalance
(local rendezvous) costs 20 s (GPT-2) and a restart after a fatal failure
(global rendezvous) 30 s; the 5 % threshold; a node ready 45 s after it is
added. Neither simulator checkpoints (a fatal failure keeps its steps there);
here it rolls back to a checkpoint taken every ``every`` steps at cost
``checkpoint`` (the Varuna values of :class:`CheckpointRestart`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import check, check_choice, check_int, check_nonnegative, check_probability
from .base import register_strategy
from .common import JobStrategy, RunState, check_rate, depth_pipelines
from .job import Lost
from .steptime import is_table

__all__ = ["Redundancy", "Rings", "TakenOver"]


@dataclass(frozen=True)
class TakenOver:
    """A node was lost and its stage taken over by the node holding its copy; ``redo``: the
    time a whole step's passes of that stage take to redo (lazy mode's forwards; 0 eager)."""

    worker: int
    time: float
    redo: float = 0.0


class Rings:
    """Who runs each stage of each pipeline, and who holds each stage's copy."""

    def __init__(self, pipelines: tuple[tuple[int, ...], ...], L: int) -> None:
        self.L = L
        self.holder = [list(p) for p in pipelines]
        # stage j's copy is on its predecessor's node (Bamboo: the module notes)
        self.copy: list[list[int | None]] = [[p[(j - 1) % L] if L > 1 else None
                                              for j in range(L)] for p in pipelines]
        self.members = {w for p in pipelines for w in p}
        self.dead: set[int] = set()

    def covers(self, w: int) -> list[tuple[int, int]]:
        return [(p, j) for p, row in enumerate(self.holder) for j, h in enumerate(row) if h == w]

    def overloaded(self) -> int:
        """Live nodes running more than one stage."""
        n: dict[int, int] = {}
        for row in self.holder:
            for h in row:
                n[h] = n.get(h, 0) + 1
        return sum(1 for w, k in n.items() if k > 1 and w not in self.dead)

    def lose(self, w: int) -> str:
        """Node ``w`` is lost: ``"spare"`` (not in a ring), ``"takeover"`` or ``"fatal"``."""
        if w not in self.members or w in self.dead:
            return "spare"
        self.dead.add(w)
        held = self.covers(w)
        fatal = len(held) > 1
        for p, j in held:
            c = self.copy[p][j]
            if c is None or c in self.dead:
                fatal = True
                continue
            self.holder[p][j] = c
            self.copy[p][j] = None  # its only copy is now the one running it
        for row in self.copy:
            for j, c in enumerate(row):
                if c == w:
                    row[j] = None
        return "fatal" if fatal else "takeover"


@register_strategy
@dataclass(frozen=True)
class Redundancy(JobStrategy):
    """Bamboo's redundant computation (module notes).

    Parameters
    ----------
    overhead : float or None
        Step-time overhead of the redundant forwards in normal operation (a
        fraction; None: eager, from the bubble, or 0 with a step-time table; lazy, 0).
    slowdown : float
        Step-time factor while a node runs two stages (default 1.5, Bamboo).
    rebalance : float
        Time of a rebalance (default 20 s, Bamboo's GPT-2).
    restart : float
        Time of the restart after a fatal failure (default 30 s, Bamboo).
    threshold : float
        Rebalance when 2 x overloaded / active exceeds it (default 0.05, Bamboo).
    every : int
        Steps between checkpoints (0: none; default 10).
    checkpoint : float
        Time of a checkpoint (default 15.8 s).
    notice : {"drain", "ignore"}
    boot : float
        Default 45 s (the artifacts' instance creation time).
    checkpoint_bandwidth : float or None
        With ``--plan``: each node's write and read rate to the checkpoint storage (bytes
        per second; a unit: ``2GB/s``). A checkpoint then takes the most bytes a node of the
        formation writes over it and a restart ``restart`` plus the most bytes a node reads
        (:mod:`sim.profiles.formations`); None (default): ``checkpoint`` and ``restart``.
    mode : {"eager", "lazy"}
        Bamboo's recovery mode (module notes); default ``eager``, Bamboo as published
        (``lazy``: its code's parameter default).
    """

    name = "redundancy"
    times = ("boot", "rebalance", "restart", "checkpoint")
    rates = ("checkpoint_bandwidth",)
    overhead: float | None = None
    slowdown: float = 1.5
    rebalance: float = 20.0
    restart: float = 30.0
    threshold: float = 0.05
    every: int = 10
    checkpoint: float = 15.8
    notice: str = "drain"
    boot: float = 45.0
    checkpoint_bandwidth: float | None = None
    mode: str = "eager"

    def check_params(self) -> None:
        if self.overhead is not None:
            check(isinstance(self.overhead, (int, float)), "overhead", "a number or none",
                  self.overhead)
            check_nonnegative("overhead", self.overhead)
        check(isinstance(self.slowdown, (int, float)) and 1 <= self.slowdown < math.inf,
              "slowdown", "a finite number >= 1 (an overloaded node still computes)",
              self.slowdown)
        check_nonnegative("rebalance", self.rebalance)
        check_nonnegative("restart", self.restart)
        check_probability("threshold", self.threshold)
        check_int("every", self.every, low=0)
        check_nonnegative("checkpoint", self.checkpoint)
        check_choice("notice", self.notice, ("drain", "ignore"))
        if self.checkpoint_bandwidth is not None:
            check_rate("checkpoint_bandwidth", self.checkpoint_bandwidth)
        check_choice("mode", self.mode, ("eager", "lazy"))

    # -- formation and step time ----------------------------------------------------------
    def formation(self, job: Any, ready: list[int]) -> Any:
        st = job.run_state
        leaving = st.leaving if st is not None else {}
        return depth_pipelines(job, [w for w in ready if w not in leaving])

    def rc_overhead(self, job: Any, f: Any) -> float:
        """Extra time per step of the redundant forwards (module notes)."""
        c = job.config
        if self.overhead is not None:
            return self.overhead * f.step_time
        if self.mode == "lazy" or is_table(c.step_times):  # none; a table: measured with it
            return 0.0
        P, L = len(f.pipelines), c.stages
        b = math.ceil(c.microbatches / P)
        fwd, bwd = c.forward_time, c.backward_time
        extra = 0.0
        for j in range(L):
            busy = b * (fwd[j] + bwd[j])
            redundant = b * fwd[(j + 1) % L] if L > 1 else 0.0  # its successor's
            extra = max(extra, redundant - (f.step_time - busy))
        return max(extra, 0.0)

    def redo_time(self, c: Any, pipelines: int, stage: int) -> float:
        """Lazy mode: a whole step's forward passes of ``stage`` (``b`` micro-batches), which the
        node taking it over recomputes pro rata of the step done (module notes); 0 eager, and
        with a step-time table (no stage times: measured with the redundancy on)."""
        if self.mode == "eager" or is_table(c.step_times):
            return 0.0
        return math.ceil(c.microbatches / pipelines) * c.forward_time[stage]

    def duration(self, job: Any, st: RunState) -> float:
        """A whole step's time now (slower while a node runs two stages)."""
        f = job.formation
        base = f.step_time + st.extra["overhead"]
        return base * (self.slowdown if st.extra["rings"].overloaded() else 1.0)

    def form(self, job: Any, st: RunState):
        """Wait for workers; restart (after a fatal failure) or rebalance, or start free."""
        f = yield from self.reform(job, st, "rebalances", self.rebalance)
        st.extra["rings"] = Rings(f.pipelines, job.config.stages)
        st.extra["overhead"] = self.rc_overhead(job, f)
        st.participants = frozenset(f.workers)
        st.leaving = {w: t for w, t in st.leaving.items() if w in st.participants}
        return

    # -- steps ------------------------------------------------------------------------
    def step(self, job: Any, st: RunState):
        env = job.env
        t0 = env.now
        done = 0.0  # fraction of the step done
        redo = 0.0  # lazy mode: recomputation owed before the step goes on (module notes)
        degraded_since = env.now if st.extra["rings"].overloaded() else None
        while True:
            d = self.duration(job, st)
            left = (1.0 - done) * d if not redo else redo + (1.0 - done) * d
            st.step_end = env.now + left
            causes = yield from job.wait(left)
            st.step_end = math.inf
            if causes is None:
                break
            if not redo:
                done = min(done + job.waited / d, 1.0)
            elif job.waited <= redo:
                redo -= job.waited
            else:
                done, redo = min(done + (job.waited - redo) / d, 1.0), 0.0
            for cause in causes:  # each takeover's node recomputes on its own GPU, at once
                if isinstance(cause, TakenOver) and cause.redo:  # with any other's: the longest
                    redo = max(redo, done * cause.redo)
            if self.losses(causes):  # fatal
                self._fatal(job, st, env.now - t0)
                return
            if degraded_since is None and st.extra["rings"].overloaded():
                degraded_since = env.now
        if degraded_since is not None:
            job.counts["degraded_time"] += env.now - degraded_since
        job.step_done(env.now - t0)
        if job.done.triggered:
            return
        yield from self.after_step(job, st)

    def _fatal(self, job: Any, st: RunState, elapsed: float) -> None:
        job.rollback(elapsed)
        job.counts["fatal_failures"] += 1
        job.formation = None
        st.extra["fatal"] = True
        st.participants = frozenset()

    def after_step(self, job: Any, st: RunState):
        c = job.config
        if self.every and (job.steps - job.committed >= self.every or job.steps >= job.N):
            ok = yield from self.checkpoint_blocking(job, st, self.checkpoint_time(job))
            if not ok:
                self._fatal(job, st, 0.0)
                return
            if job.done.triggered:  # the checkpoint after the last step
                return
        rings: Rings = st.extra["rings"]
        P, L = len(job.formation.pipelines), c.stages
        o = rings.overloaded()
        live = [w for w in rings.members if w not in rings.dead]
        spares = [w for w in job.ready_workers() if w not in rings.members]
        active = P * L - o
        drain = [w for w in self.drain_due(job, st, self.duration(job, st), self.rebalance)
                 if w in rings.members and w not in rings.dead]
        grow = (len(live) + len(spares)) // L > P and P < max(c.replicas)
        if not ((o > 0 and len(spares) >= o) or (o > 0 and active > 0 and 2 * o / active >
                                                  self.threshold) or grow or drain):
            return
        # a rebalance re-forms the rings from the ready workers (those leaving left out): when
        # they form nothing (eager's copy leaves no fewer pipelines room in GPU memory) the job
        # runs on as it is, degraded, rather than stall for workers (it stalled: N32_D16 on
        # aws-p3, docs/strategies.md)
        if self.formation(job, job.ready_workers()) is None:
            return
        if drain:
            job.counts["notices_used"] += len(drain)
        job.formation = None
        st.participants = frozenset(live)

    # -- events -----------------------------------------------------------------------
    def lost(self, job: Any, w: Any) -> None:
        st = job.run_state
        if st is None:
            return
        st.leaving.pop(w.index, None)
        rings: Rings | None = st.extra.get("rings")
        if job.formation is None or rings is None:
            if w.index in st.participants:  # forming: the restart or rebalance starts over
                if rings is not None and rings.lose(w.index) == "fatal" and \
                        not st.extra.get("fatal"):
                    job.counts["fatal_failures"] += 1
                    job.rollback(0.0)
                    st.extra["fatal"] = True
                job.interrupt(Lost(w.index, job.env.now))
            return
        first = rings.overloaded() == 0 and w.index in rings.members and w.index not in rings.dead
        held = rings.covers(w.index) if w.index not in rings.dead else []
        verdict = rings.lose(w.index)
        if verdict == "takeover" and first:
            job.counts["takeover_windows"] += 1  # a first loss: the job runs degraded from here
        if verdict == "fatal":
            job.interrupt(Lost(w.index, job.env.now))
        elif verdict == "takeover":
            redo = self.redo_time(job.config, len(rings.holder), held[0][1])
            job.interrupt(TakenOver(w.index, job.env.now, redo) if redo else
                          TakenOver(w.index, job.env.now))

    def noticed(self, job: Any, w: Any, at: float) -> None:
        st = job.run_state
        if st is None or self.notice == "ignore" or w.index not in st.participants:
            return
        st.leaving[w.index] = at
