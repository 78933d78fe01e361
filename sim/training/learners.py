"""The learners engine: DiLoCo's outer loop at the scale of millions of chips, event-aggregated.

The training DES (:mod:`sim.training.outer`) runs every pass of every
replica; at 10^6 chips that is out of reach. This engine keeps the rules of
the DES's round mode (vanilla DiLoCo, failures, quorum and grace window; the
module docstring of :mod:`sim.training.outer`) but aggregates what a learner
(a group) does:

* **Chips.** Learner ``g`` has ``n`` chips; each present chip fails after an
  exponential time of mean ``mtbf`` (the training DES's spot model), is
  replaced ``replace_time`` later, then fetches its weights for
  ``chip_download`` (a failure meanwhile restarts its repair) while the
  learner holds the latest model; when the learner will download the model
  (it holds an older one, or an outer step is in flight) the chip is live at
  once and a fetch in progress stops (the DES's one download a worker,
  :meth:`sim.training.outer.OuterLoop.skip_download`); the learner is
  up while every chip is live. By memorylessness the time to the learner's
  next chip failure is exponential of rate ``(n - b) / mtbf``, ``b`` the chips
  in replacement (the minimum of the present chips' clocks); it is drawn
  again whenever ``b`` changes, so the process is exact however many chips
  are down at once; the failed chip is a downloading one with probability
  (downloading) / (present). The events are failures and repair ends, never
  per chip.
* **Steps.** A learner's ``H`` inner steps of a round are one event: their
  end ``H T`` after the round's start (deterministic ``T``), or the sum of
  ``H`` draws of the step-time law. A failure loses the steps since the
  learner's last merge (those completed count as compute, as in the DES).
  A failure at the very time a block, a sync or a download ends comes after
  it (the DES's rule, :data:`sim.failures.LATE`): the block is reported.
* **Outer steps**, **downloads**, **joiners** (and a round whose last member
  fails: its waiting joiners start it again at once) and **late merges**:
  exactly the DES's rules (the grace window closed: its timer goes behind every other event
  of its instant), with the sync time of :func:`sim.analytic.diloco.outer_sync_time`
  for the learners in the ring and the model download ``latency + R / bandwidth`` (``R`` the recovery state,
  ``recovery``).
* **A learner lost during the outer all-reduce** aborts it (the DES's rule,
  :meth:`sim.training.outer.OuterLoop._member_lost`): the survivors notice ``heartbeat``
  later; the lost learner's pseudo-gradient is out; they rerun it among themselves (up to
  ``retries`` tries) or, ``on_loss="discard"``, drop the outer step and their steps.

Same metrics as the DES where they mean the same (``training_time``,
``finished``, ``goodput_fraction``: merged compute over chip time;
``compute_utilisation``: inner-step compute over wall time, mean over chips,
``outer_syncs`` (all-reduces started, aborted ones too), ``outer_steps`` (outer steps
taken: a ring completed, or the tries ran out and each survivor stepped alone; one a
step, not a survivor; none for a discarded or void one), ``outer_downloads``,
``late_merges``, ``lost_outer_work`` in chip-time, ``outer_aborts``, ``outer_aborted``),
plus ``failures`` and ``events``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analytic import diloco as AD
from ..errors import (
    TIME_LIMIT,
    ConfigError,
    check,
    check_choice,
    check_int,
    check_memory,
    check_nonnegative,
    check_positive,
    check_time_terms,
)
from ..failures import MAX_TRANSITIONS, check_transitions, cycle_rates
from ..rng import Streams
from .stall import STALL_FACTOR

__all__ = ["LearnersConfig", "learners_model", "LEARNER_METRICS", "STEP_LAWS"]

#: Metrics of one replication of :func:`learners_model`.
LEARNER_METRICS = ("training_time", "finished", "goodput_fraction", "compute_utilisation",
                   "outer_syncs", "outer_steps", "outer_downloads", "late_merges", "lost_outer_work",
                   "failures", "events", "stalled", "outer_aborts", "outer_aborted")
#: A replication stops, unfinished (``stalled`` 1), once no outer step has started or ended
#: for this many failure-free rounds (the training DES's stall factor,
#: :data:`sim.training.stall.STALL_FACTOR`): learners that fail faster than they take their
#: ``every`` inner steps would otherwise never end.
STALL_ROUNDS = STALL_FACTOR
#: The most learners x (outer steps + :data:`SETUP_ROUNDS`) a replication may take: a
#: learner's round (its report, kept in counts, and its share of the outer step) costs at most
#: about 1.5e-5 s of CPU on this project's 2-core machine (lognormal steps with failures and
#: a payload; 3e-6 s deterministic and failure-free), so 4e6 is about a minute a replication
#: (measured at the limit: 1000 learners x 3997 outer steps of lognormal steps with failures
#: and a payload, 37 s of CPU; 10^6 learners x 1, 41 s and 2.8 GiB); past it a run is a
#: runaway, refused before any work.
MAX_ROUND_WORK = 4e6
#: A learner's set-up (its random streams), about 4e-5 s of CPU: as many rounds.
SETUP_ROUNDS = 3
#: Resident memory a learner takes (about 2.8 KiB failure-free, 3.9 KiB with lognormal steps
#: and failures, measured at 10^5 learners), rounded up.
BYTES_PER_LEARNER = 4096
#: Laws of an inner step's time (mean ``step_time``).
STEP_LAWS = ("deterministic", "exponential", "lognormal")


@dataclass(frozen=True)
class LearnersConfig:
    """Learners of many chips under DiLoCo's outer loop (validated on construction; values).

    Parameters
    ----------
    learners : int
        ``M`` learners (groups).
    chips : int
        ``n`` chips a learner (all needed: a chip failure stops the learner).
    step_time : float
        ``T``: one inner step (time units).
    step_time_distribution : {"deterministic", "exponential", "lognormal"}
        Law of a step's time, mean ``T`` (lognormal: sigma ``step_time_shape``).
    step_time_shape : float
    every, steps : int
        ``H`` and ``N`` (a multiple of ``H``): the run ends after ``N / H``
        outer steps.
    quorum : int or None
        ``K`` (None: synchronous).
    grace : float
        ``W`` with ``quorum``.
    size, bandwidth, latency : float
        The model's parameters (``value_bits`` a value), the WAN bandwidth of
        a learner and the latency between learners: the ring's sync time and
        the download ``latency + R / bandwidth`` (``R``: ``recovery``).
    bits, value_bits, topk
        The payload (:func:`sim.analytic.diloco.payload_size`).
    mtbf : float
        Mean time to failure of a chip (inf: never).
    replace_time, chip_download : float
        A failed chip's replacement, then its weight fetch (none when the learner will
        download the model).
    max_time : float
        Stop here if not done.
    heartbeat : float
        The time the survivors of an outer all-reduce take to notice a learner lost in it
        (INTELLECT-1's heartbeat timeout, 10 s: the DES's ``heartbeat``).
    on_loss : {"rerun", "discard"}
        Then: the all-reduce again among them, up to ``retries`` tries (INTELLECT-1), or
        the outer step dropped on every survivor (torchft); the DES's rule.
    retries : int
        Tries of an outer all-reduce (prime's ``retry_all_reduce``, 3).
    recovery : {"prime", "torchft", "params"}
        What a learner's model download moves (:func:`sim.analytic.diloco.recovery_size`;
        the DES's ``recovery``): prime's live recovery by default.
    """

    learners: int = 4
    chips: int = 1
    step_time: float = 1.0
    step_time_distribution: str = "deterministic"
    step_time_shape: float = 0.5
    every: int = 100
    steps: int = 1000
    quorum: int | None = None
    grace: float = 0.0
    size: float = 0.0
    bandwidth: float = math.inf
    latency: float = 0.0
    bits: int = 16
    value_bits: int = 16
    topk: float | None = None
    mtbf: float = math.inf
    replace_time: float = 0.0
    chip_download: float = 0.0
    max_time: float = math.inf
    heartbeat: float = 10.0
    on_loss: str = "rerun"
    retries: int = 3
    recovery: str = "prime"

    def __post_init__(self) -> None:
        M = check_int("learners", self.learners, low=1)
        check_int("chips", self.chips, low=1)
        check_positive("step_time", self.step_time)
        check_choice("step_time_distribution", self.step_time_distribution, STEP_LAWS)
        check_positive("step_time_shape", self.step_time_shape)
        H = check_int("every", self.every, low=1)
        N = check_int("steps", self.steps, low=1)
        check(N % H == 0, "steps", f"a multiple of every ({H})", N)
        if self.quorum is not None:
            check_int("quorum", self.quorum, low=1, high=M)
        check_nonnegative("grace", self.grace)
        check(math.isfinite(self.grace), "grace", "finite", self.grace)
        check(self.quorum is not None or self.grace == 0, "grace", "0 without quorum",
              self.grace)
        # (audit 7) the M-th report is the last: no window follows it (accepted, no effect)
        check(self.quorum != M or self.grace == 0, "grace", f"0 with quorum equal to learners "
              f"({M}: the K-th report is the last, no report can come in a window)", self.grace)
        check_nonnegative("size", self.size)
        check_positive("bandwidth", self.bandwidth, allow_inf=True)
        check_nonnegative("latency", self.latency)
        AD.payload_size(self.size, bits=self.bits, value_bits=self.value_bits, topk=self.topk)
        check_positive("mtbf", self.mtbf, allow_inf=True)
        check_nonnegative("replace_time", self.replace_time)
        check_nonnegative("chip_download", self.chip_download)
        check_positive("max_time", self.max_time, allow_inf=True)
        check_positive("heartbeat", self.heartbeat)
        check_choice("on_loss", self.on_loss, ("rerun", "discard"))
        check_int("retries", self.retries, low=1)
        check_choice("recovery", self.recovery, AD.RECOVERY)
        check(self.on_loss == "rerun" or self.retries == 3, "retries", "3 (unset) with on_loss "
              "discard (a discarded outer step is not tried again)", self.retries)
        # times whose run would overflow to inf: every step, and (at most) a ring all-reduce of
        # 2 (M - 1) hops of latency plus a share of the payload after each, and with failures
        # a model download of what the recovery sends (smallfix7: it was the parameters alone,
        # prime's recovery is 8 x them at 16 bits)
        moved = self.size + (AD.recovery_size(self.size, value_bits=self.value_bits,
                                              recovery=self.recovery)
                             if math.isfinite(self.mtbf) else 0.0)
        hop = moved / self.bandwidth if self.bandwidth < math.inf else 0.0
        big = bool(self.size) and 2.0 * M * N / self.bandwidth > TIME_LIMIT
        check_time_terms(2.0 * M * N, [
            ("step_time", self.step_time, self.step_time), ("latency", self.latency, self.latency),
            ("+bandwidth" if big else "size", hop, self.bandwidth if big else self.size),
            ("grace", self.grace, self.grace), ("heartbeat", self.heartbeat, self.heartbeat),
            ("replace_time", self.replace_time,
                                                 self.replace_time),
            ("chip_download", self.chip_download, self.chip_download)],
            "2 x learners x steps")
        self._check_work()

    def _check_work(self) -> None:
        """Refuse a runaway before any work: the learners' rounds (learners x (outer steps +
        :data:`SETUP_ROUNDS`) at most :data:`MAX_ROUND_WORK`), their memory
        (:data:`BYTES_PER_LEARNER` a learner) and the chips' expected failures and replacements (2 x
        learners x chips x length / (mtbf + replace_time) at most
        :data:`sim.failures.MAX_TRANSITIONS`, the length the failure-free run plus the stall
        limit, or max_time if shorter)."""
        M, R = self.learners, self.steps // self.every
        work = float(M) * (R + SETUP_ROUNDS)
        if work > MAX_ROUND_WORK:
            name, value = ("learners", M) if M >= R else ("steps", self.steps)
            raise ConfigError(name, f"small enough that a replication's rounds stay bounded "
                              f"(learners x (outer steps + {SETUP_ROUNDS}) at most "
                              f"{MAX_ROUND_WORK:.0e}, about a minute; {work:.2g} here)", value)
        check_memory("learners", M, float(M) * BYTES_PER_LEARNER)
        if not math.isfinite(self.mtbf):
            return
        length, how = self.run_length()
        rate = cycle_rates(spot=float(M) * self.chips, mtbf=self.mtbf,
                           replace_time=self.replace_time).spot
        blame = max([(float(self.chips), "chips", self.chips), (float(M), "learners", M),
                     (length / (self.mtbf + self.replace_time), "mtbf", self.mtbf)],
                    key=lambda b: b[0])
        check_transitions(2.0 * rate * length, blame[1], blame[2], how)
        # (smallfix7) the stall rule does not run while the survivors wait for the notice
        # (busy): --heartbeat 1e9 --mtbf 30 ran the chips' failures for 1e9 s, never ending
        n = 2.0 * rate * self.heartbeat
        check(n <= MAX_TRANSITIONS, "heartbeat", "short enough that the chips' failures "
              f"during one wait for the notice stay bounded (2 x learners x chips x heartbeat / "
              f"(mtbf + replace_time) at most {MAX_TRANSITIONS:.0e}: {n:.2g} here)",
              self.heartbeat)

    def run_length(self) -> tuple[float, str]:
        """The length the chips' failures are counted over, and what it is (words): with
        deterministic steps, the run's expected length under its failures
        (:func:`sim.analytic.diloco.failure_run_length`: a learner needs its ``n`` chips, lost
        at rate ``n / mtbf``, each up a fraction ``mtbf / (mtbf + replace_time + D)``, ``D =
        (e^(chip_download / mtbf) - 1)(mtbf + replace_time)`` its download with restarts;
        ``tau`` its ``H`` steps and the sync; at most the second), else the failure-free run
        plus the whole stall limit; either capped by max_time."""
        M, R = self.learners, self.steps // self.every
        whole = R * (self.every * self.step_time + self.sync_time(M)) + self.stall_limit()
        if self.step_time_distribution != "deterministic":
            return (min(self.max_time, whole),
                    AD.LENGTH_WHOLE)
        n, mtbf, rt = self.chips, self.mtbf, self.replace_time
        x = self.chip_download / mtbf
        down = rt + (math.expm1(x) * (mtbf + rt) if x < 700.0 else math.inf)
        p = mtbf / (mtbf + down)
        up = math.exp(n * math.log(p)) if p > 0.0 else 0.0
        tau = self.every * self.step_time + self.sync_time(M)
        length = AD.failure_run_length([AD.GroupFailures(n / mtbf, up, tau)], R,
                                       self.stall_limit(), quorum=self.quorum or 1,
                                       grace=self.grace, copies=M)
        return (min(self.max_time, length, whole),
                AD.LENGTH_MODELLED)

    def sync_time(self, k: int) -> float:
        """The outer all-reduce among ``k`` learners."""
        if k < 2:
            return 0.0
        return AD.outer_sync_time(k, self.size, self.bandwidth, self.latency, bits=self.bits,
                                  value_bits=self.value_bits, topk=self.topk)

    def stall_limit(self) -> float:
        """Time without an outer step starting or ending after which a replication stops:
        :data:`STALL_ROUNDS` failure-free rounds (``every`` mean steps and the sync of all
        the learners)."""
        return STALL_ROUNDS * (self.every * self.step_time + self.sync_time(self.learners))

    @property
    def download_time(self) -> float:
        """A learner's model download (``latency + R / bandwidth``, ``R`` what the
        framework's recovery sends, :func:`sim.analytic.diloco.recovery_size`): the DES's
        (:func:`sim.analytic.diloco.model_download_time`) with one node a learner, as in
        its outer sync (:meth:`sync_time`). It was ``size`` (the parameters alone)."""
        return AD.model_download_time(
            AD.recovery_size(self.size, value_bits=self.value_bits, recovery=self.recovery),
            self.bandwidth, self.latency)

    def fixed_metrics(self) -> dict[str, str]:
        """The metrics of :data:`LEARNER_METRICS` this config fixes, each with the reason
        (:func:`sim.results.fixed_ci`: printed exact, no interval). With deterministic steps
        and no chip failure nothing differs between replications; without chip failures
        their count is 0."""
        if self.step_time_distribution == "deterministic" and not math.isfinite(self.mtbf):
            return dict.fromkeys(LEARNER_METRICS, "nothing random: deterministic steps, no "
                                 "chip failures (mtbf inf)")
        return {} if math.isfinite(self.mtbf) else {"failures": "no chip failures (mtbf inf)"}


# event kinds (ties at one time: in the order they were scheduled, as SimPy does)
_ROUND, _FAIL, _LIVE, _REPLACED, _SYNC_END, _DL_END, _TIMER, _FETCH_END, _NOTICE = range(9)
#: Order of the events of one instant (then the order they were pushed in): a chip failure
#: after the rest of its instant (the DES's :data:`sim.failures.LATE`: a block of steps, a
#: sync or a download ending at the failure's time is done first), the grace window's end
#: after everything (the DES's :class:`sim.training.instant.InstantEnd`: it steps behind the
#: events of its instant, at rank 2 behind a failure).
_RANK = (0, 1, 0, 0, 0, 0, 0, 0, 0)


class _Learner:
    __slots__ = ("g", "repl", "dl", "up", "down", "version", "member", "reported", "round",
                 "start", "pend_steps", "pend_compute", "late", "fail_ev", "round_ev",
                 "dl_ev", "state", "compute", "merged", "lost", "downloads", "steps_plan",
                 "dl_late", "fetch_ev", "fetch_wait")

    def __init__(self, g: int) -> None:
        self.g = g
        self.repl: list[list[Any]] = []  # chips in replacement: [event id] (can not fail)
        self.dl: list[list[Any]] = []  # chips fetching weights: [event id]
        self.up = True
        self.down = False  # the DES's flag: out of the outer loop until it rejoins
        self.version = 0
        self.round = 0  # the round its current block of steps belongs to
        self.state = "train"  # train | reported | wait_busy | download | joiner | late | down
        self.start = 0.0  # when the current block of steps started
        self.pend_steps = 0
        self.pend_compute = 0.0
        self.late: tuple[int, float] | None = None
        self.fail_ev = None
        self.round_ev = None
        self.dl_ev = None
        self.compute = 0.0
        self.merged = 0.0
        self.lost = 0.0
        self.downloads = 0
        self.steps_plan: np.ndarray | None = None
        self.dl_late = False
        self.fetch_ev: int | None = None  # a late learner's background fetch
        self.fetch_wait = False  # ... waiting for the outer step in progress


class _Engine:
    """One replication of the learners engine (see the module docstring)."""

    def __init__(self, c: LearnersConfig, streams: Streams) -> None:
        self.c = c
        self.M = c.learners
        self.H = c.every
        self.R = c.steps // c.every
        self.rng_fail = [streams.rng("chips", g) for g in range(self.M)]
        self.rng_step = [streams.rng("steps", g) for g in range(self.M)]
        # (time, rank, seq, kind, learner, data): a failure ranks behind the other events of
        # its instant and the grace window's timer behind it (:data:`_RANK`)
        self.heap: list[tuple[float, int, int, int, int, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.L = [_Learner(g) for g in range(self.M)]
        self.V = 0
        self.members: set[int] = set(range(self.M))
        self.reported: dict[int, float] = {}
        # kept as learners go down, come back and report, so that a report costs O(1) (not a
        # pass over the round's members): the members up, and those of them yet to report
        self.n_alive = self.n_unreported = self.M
        self.fired = False
        self.timer = False
        self.kth: float | None = None
        self.busy = False
        self.gone: set[int] = set()  # learners that went down while the outer step was in flight
        self.waiting: set[int] = set()
        self.finished = False
        self.n_syncs = self.late_merges = self.failures = self.events = 0
        self.dead: set[int] = set()  # cancelled event ids
        # the stall rule: stop once no outer step has started or ended for `limit`
        self.progress_t = 0.0
        self.limit = c.stall_limit()
        self.stalled = False
        # the outer all-reduce in flight (the DES's OuterLoop._outer_ring): its end event (None
        # while aborted), its learners, tries, when the last began, each one's merged
        # compute, members lost since the abort and the notice event; a round counter for the
        # grace timer (V, but for a discarded outer step, which starts the round again)
        self.sync_ev: int | None = None
        self.ring_live: list[int] = []
        self.ring_books: dict[int, float] = {}
        self.ring_dead: set[int] = set()
        self.ring_tries = 0
        self.t_try = 0.0
        self.notice_ev: int | None = None
        self.ring_data: Any = None
        self.rid = 0
        self.n_aborts = 0
        self.aborted_time = 0.0
        self.n_steps = 0  # outer steps taken (a completed ring, or the tries ran out)

    # -- event queue ------------------------------------------------------------------
    def push(self, t: float, kind: int, g: int, data: Any = None, rank: int | None = None) -> int:
        self.seq += 1
        heapq.heappush(self.heap, (t, _RANK[kind] if rank is None else rank, self.seq, kind, g,
                                   data))
        return self.seq

    def cancel(self, ev: int | None) -> None:
        if ev is not None:
            self.dead.add(ev)

    # -- chips ------------------------------------------------------------------------
    def _draw_failure(self, x: _Learner) -> None:
        self.cancel(x.fail_ev)
        x.fail_ev = None
        n = self.c.chips - len(x.repl)
        if n > 0 and self.c.mtbf < math.inf:
            dt = float(self.rng_fail[x.g].exponential(self.c.mtbf / n))
            x.fail_ev = self.push(self.now + dt, _FAIL, x.g)

    def _fail(self, x: _Learner) -> None:
        self.failures += 1
        c = self.c
        present = c.chips - len(x.repl)
        if x.dl and self.rng_fail[x.g].random() * present < len(x.dl):  # a fetching chip
            k = int(self.rng_fail[x.g].integers(len(x.dl)))
            ev = x.dl.pop(k)
            self.cancel(ev[0])
        ev = [None]
        ev[0] = self.push(self.now + c.replace_time, _REPLACED, x.g, ev)
        x.repl.append(ev)
        if x.up:
            x.up = False
            self._lost(x)
        self._draw_failure(x)

    def _replaced(self, x: _Learner, ev: list[Any]) -> None:
        x.repl.remove(ev)
        if self._fetches(x):  # the learner's model download brings its weights: live at once
            self._draw_failure(x)
            self._whole(x)
            return
        e2 = [None]
        e2[0] = self.push(self.now + self.c.chip_download, _LIVE, x.g, e2)
        x.dl.append(e2)
        self._draw_failure(x)

    def _fetches(self, x: _Learner) -> bool:
        """``x`` (down) will download the model when it is back: it holds an older model than
        the latest, or an outer step is in flight (the DES's
        :meth:`sim.training.outer.OuterLoop.skip_download`)."""
        return x.down and (x.version != self.V or self.busy)

    def _whole(self, x: _Learner) -> None:
        """Every chip of ``x`` is live again: it is up and rejoins."""
        if not x.repl and not x.dl:
            x.up = True
            self._set_down(x, False)
            self._rejoin(x, late=False)

    def _live(self, x: _Learner, ev: list[Any]) -> None:
        x.dl.remove(ev)
        self._whole(x)

    # -- training ---------------------------------------------------------------------
    def _begin_round(self, x: _Learner) -> None:
        """``x`` starts ``H`` inner steps now."""
        c = self.c
        x.state = "train"
        x.round = self.V
        x.start = self.now
        if c.step_time_distribution == "deterministic":
            x.steps_plan = None
            end = self.now + self.H * c.step_time
        else:
            r = self.rng_step[x.g]
            if c.step_time_distribution == "exponential":
                d = r.exponential(c.step_time, self.H)
            else:
                s = c.step_time_shape
                d = r.lognormal(math.log(c.step_time) - s * s / 2, s, self.H)
            x.steps_plan = np.cumsum(d)
            end = self.now + float(x.steps_plan[-1])
        x.round_ev = self.push(end, _ROUND, x.g)

    def _steps_done(self, x: _Learner) -> tuple[int, float]:
        """Steps ``x`` completed since its block started, and their compute."""
        el = self.now - x.start
        if x.steps_plan is None:
            k = min(self.H, int(el / self.c.step_time * (1 + 1e-12)))
            return k, k * self.c.step_time
        k = int(np.searchsorted(x.steps_plan, el, side="right"))
        return k, float(x.steps_plan[k - 1]) if k else 0.0

    def _round_end(self, x: _Learner) -> None:
        x.round_ev = None
        k, comp = self.H, (self.H * self.c.step_time if x.steps_plan is None
                           else float(x.steps_plan[-1]))
        x.pend_steps += k
        x.pend_compute += comp
        x.compute += comp
        self._report(x)

    # -- the outer loop (the DES's round mode) ----------------------------------------
    def _report(self, x: _Learner) -> None:
        if self.c.quorum is not None:  # on its own clock: any open round takes its report
            on_time = not self.fired
        else:
            on_time = x.round == self.V and not self.fired and x.g in self.members
        if on_time:
            x.state = "reported"
            self._add_report(x.g)
            self._check_fire()
            return
        books = (x.pend_steps, x.pend_compute)
        x.pend_steps, x.pend_compute = 0, 0.0
        if x.late is not None:
            books = (books[0] + x.late[0], books[1] + x.late[1])
        x.late = books
        # it goes on at once; the outer steps it missed come in the background
        if x.fetch_ev is None and not x.fetch_wait:
            if self.busy:
                x.fetch_wait = True
            else:
                self._start_fetch(x)
        self._begin_round(x)

    def _start_fetch(self, x: _Learner) -> None:
        c = self.c
        x.fetch_wait = False
        if x.version == self.V:
            return
        x.downloads += 1
        pay = AD.payload_size(c.size, bits=c.bits, value_bits=c.value_bits)
        T = c.latency + ((self.V - x.version) * pay / c.bandwidth if pay else 0.0)
        x.fetch_ev = self.push(self.now + T, _FETCH_END, x.g)

    # -- the round's members: counts kept on every change ------------------------------
    def _recount(self) -> None:
        """Count the members up and those yet to report (once a round: the members change)."""
        self.n_alive = self.n_unreported = 0
        for g in self.members:
            if not self.L[g].down:
                self.n_alive += 1
                self.n_unreported += g not in self.reported

    def _set_down(self, x: _Learner, down: bool) -> None:
        if x.down != down:
            x.down = down
            if x.g in self.members:
                d = -1 if down else 1
                self.n_alive += d
                if x.g not in self.reported:
                    self.n_unreported += d

    def _add_member(self, g: int) -> None:
        if g not in self.members:
            self.members.add(g)
            if not self.L[g].down:
                self.n_alive += 1
                self.n_unreported += g not in self.reported

    def _discard_member(self, g: int) -> None:
        if g in self.members:
            self.members.discard(g)
            if not self.L[g].down:
                self.n_alive -= 1
                self.n_unreported -= g not in self.reported

    def _add_report(self, g: int) -> None:
        if g not in self.reported and g in self.members and not self.L[g].down:
            self.n_unreported -= 1
        self.reported[g] = self.now

    def _drop_report(self, g: int) -> None:
        if self.reported.pop(g, None) is not None and g in self.members \
                and not self.L[g].down:
            self.n_unreported += 1

    def _check_fire(self) -> None:
        if self.fired or not self.reported:
            return
        if self.n_unreported == 0:  # every member up has reported
            self._fire()
            return
        K = self.c.quorum
        if K is None or len(self.reported) < K:
            return
        if self.kth is None:
            self.kth = sorted(self.reported.values())[K - 1]
        if not self.timer:
            self.timer = True
            self.push(max(self.now, self.kth + self.c.grace), _TIMER, -1, self.rid)

    def _fire(self) -> None:
        self.fired = True
        parts = sorted(self.reported)
        holders = sorted(g for g in range(self.M) if self.L[g].late is not None
                         and g not in self.reported)
        joiners = sorted(g for g in self.waiting if g not in self.reported)
        ring = set(parts) | set(holders) | set(joiners)
        books = self.ring_books = {}
        for g in parts:
            x = self.L[g]
            x.merged += x.pend_compute
            books[g] = x.pend_compute
            x.pend_steps, x.pend_compute = 0, 0.0
            if x.late is not None:
                x.merged += x.late[1]
                books[g] += x.late[1]
                x.late = None
        for g in holders:
            x = self.L[g]
            x.merged += x.late[1]
            books[g] = x.late[1]
            x.late = None
            self.late_merges += 1
        self.n_syncs += 1
        self.busy = True
        self.progress_t = self.now
        # every learner down will now download the model: its chips' own fetches are cut
        for x in self.L:
            if x.down and x.dl:
                for e in x.dl:
                    self.cancel(e[0])
                x.dl.clear()  # (present chips, still: the failure rate is the same)
                self._whole(x)
        self.ring_data = (parts, joiners)
        self.ring_tries = 0
        self._ring(sorted(ring))

    def _ring(self, ring: list[int]) -> None:
        """A try of the outer all-reduce among ``ring`` (the DES's ``_outer_ring``)."""
        self.ring_live = ring
        self.ring_tries += 1
        self.t_try = self.now
        self.sync_ev = self.push(self.now + self.c.sync_time(len(ring)), _SYNC_END, -1,
                                 self.ring_data)

    def _member_lost(self, g: int) -> None:
        """Learner ``g``, in the outer all-reduce, went down: the DES's rule
        (:meth:`sim.training.outer.OuterLoop._member_lost`): the try moving is aborted and
        the survivors notice ``heartbeat`` later (another loss meanwhile pushes it on)."""
        if g not in self.ring_live or g in self.ring_dead:
            return
        if self.sync_ev is not None:
            self.cancel(self.sync_ev)
            self.sync_ev = None
            self.n_aborts += 1
            self.progress_t = self.now
        self.ring_dead.add(g)
        self.cancel(self.notice_ev)
        self.notice_ev = self.push(self.now + self.c.heartbeat, _NOTICE, -1)

    def _noticed(self) -> None:
        """The DES's :meth:`~sim.training.outer.OuterLoop._noticed`: the lost learners'
        pseudo-gradients are out; rerun among the survivors, or discard, or (tries out) each
        takes its own outer step now."""
        self.notice_ev = None
        n = self.c.chips
        self.aborted_time += self.now - self.t_try
        for g in sorted(self.ring_dead):
            b = self.ring_books.pop(g, 0.0)
            self.L[g].merged -= b
            self.L[g].lost += b * n
        survivors = [g for g in self.ring_live if g not in self.ring_dead]
        self.ring_dead = set()
        if not survivors:
            self._sync_end(*self.ring_data, outcome="void")
        elif self.c.on_loss == "discard":
            for g in survivors:
                b = self.ring_books.pop(g, 0.0)
                self.L[g].merged -= b
                self.L[g].lost += b * n
            self._sync_end(*self.ring_data, outcome="discard")
        elif self.ring_tries >= self.c.retries:
            self._sync_end(*self.ring_data, outcome="alone")
        else:
            self.n_syncs += 1
            self._ring(survivors)

    def _sync_end(self, parts: list[int], joiners: list[int], outcome: str = "done") -> None:
        self.sync_ev = None
        self.ring_live = []
        self.rid += 1
        self.progress_t = self.now
        gone, self.gone = self.gone, set()
        if outcome in ("done", "alone"):
            self.V += 1
            self.n_steps += 1
            for g in parts + joiners:  # (the DES's rule: one that went down meanwhile)
                if not self.L[g].down and g not in gone:
                    self.L[g].version = self.V
        self.waiting.difference_update(joiners)
        up = {g for g in range(self.M) if not self.L[g].down and g not in gone}
        in_parts, in_joiners = set(parts), set(joiners)  # (sets: a lookup a learner below)
        members = {g for g in in_parts | in_joiners if g in up}
        old_members = self.members
        self.busy = False
        if self.V >= self.R:
            self.finished = True
        self.members = members
        self.reported = {}
        self._recount()
        self.fired = False
        self.timer = False
        self.kth = None
        del old_members
        if self.finished:
            return
        # every learner waiting on this outer step goes on, in learner order
        for g in range(self.M):
            x = self.L[g]
            if x.down:
                continue
            if x.state == "reported" and g in in_parts:
                self._begin_round(x)
            elif x.state == "joiner" and g in in_joiners:
                self._begin_round(x)
            elif x.state == "wait_busy":
                self._start_download(x)
            elif x.state == "wait_end":
                x.version = self.V
                self._join(x)
            if x.fetch_wait:
                self._start_fetch(x)

    def _lost(self, x: _Learner) -> None:
        """``x`` went down: it leaves its round; its unmerged steps are lost."""
        n = self.c.chips
        if x.state == "train" and x.round_ev is not None:
            k, comp = self._steps_done(x)
            x.pend_steps += k
            x.pend_compute += comp
            x.compute += comp
        self.cancel(x.round_ev)
        x.round_ev = None
        self.cancel(x.dl_ev)
        x.dl_ev = None
        self.cancel(x.fetch_ev)
        x.fetch_ev = None
        x.fetch_wait = False
        self._set_down(x, True)
        x.lost += x.pend_compute * n
        x.pend_steps, x.pend_compute = 0, 0.0
        if x.late is not None:
            x.lost += x.late[1] * n
            x.late = None
        self.waiting.discard(x.g)
        x.state = "down"
        if self.busy:  # the outer step in flight: it will not hold it
            self.gone.add(x.g)
            self._member_lost(x.g)
        if not self.fired:
            self._drop_report(x.g)
            self._discard_member(x.g)
            self._check_fire()
            if not self.fired and self.waiting and not self.n_alive:
                self._restart_round()

    def _restart_round(self) -> None:
        """The DES's rule (:meth:`sim.training.outer.OuterLoop._restart_round`): the round's
        last member went down before the outer step; the learners waiting to join at it start
        the round again at once, as its members, from the last outer step's parameters."""
        joiners = sorted(self.waiting)
        self.waiting.clear()
        self.members = set(joiners)
        self._recount()
        for g in joiners:
            self._begin_round(self.L[g])

    def _rejoin(self, x: _Learner, late: bool) -> None:
        """The DES's rejoin: wait for an outer step in progress, fetch the model (or the
        missed outer steps), wait for an outer step that landed meanwhile, join."""
        if not late:
            self._set_down(x, False)
        if late or x.version != self.V or self.busy:
            x.state = "wait_busy" if self.busy else "download"
            x.dl_late = late
            if not self.busy:
                self._start_download(x)
            return
        self._join(x)

    def _start_download(self, x: _Learner) -> None:
        c = self.c
        x.state = "download"
        x.downloads += 1
        if x.dl_late:
            pay = AD.payload_size(c.size, bits=c.bits, value_bits=c.value_bits)
            T = c.latency + ((self.V - x.version) * pay / c.bandwidth if pay else 0.0)
        else:
            T = c.download_time
        x.dl_ev = self.push(self.now + T, _DL_END, x.g)

    def _dl_end(self, x: _Learner) -> None:
        x.dl_ev = None
        if self.busy:  # an outer step landed meanwhile: taken on the way once it ends
            x.state = "wait_end"
            return
        x.version = self.V
        self._join(x)

    def _join(self, x: _Learner) -> None:
        if self.c.quorum is not None:  # on its own clock (not a member the round waits for)
            self._begin_round(x)
            return
        # the members up but x
        if not self.n_alive - (x.g in self.members and not x.down):
            if not self.fired:
                self._add_member(x.g)
            self._begin_round(x)
            return
        self.waiting.add(x.g)
        x.state = "joiner"

    # -- run ----------------------------------------------------------------------------
    def run(self) -> dict[str, float]:
        c = self.c
        for x in self.L:
            self._draw_failure(x)
            self._begin_round(x)
        heap = self.heap
        while heap and not self.finished:
            t, _r, seq, kind, g, data = heapq.heappop(heap)
            if seq in self.dead:
                self.dead.discard(seq)
                continue
            stall = self.progress_t + self.limit
            if not self.busy and t > stall and stall <= c.max_time:
                self.now, self.stalled = stall, True
                break
            if t > c.max_time:
                self.now = c.max_time
                break
            self.now = t
            self.events += 1
            if kind == _ROUND:
                self._round_end(self.L[g])
            elif kind == _FAIL:
                self.L[g].fail_ev = None
                self._fail(self.L[g])
            elif kind == _REPLACED:
                self._replaced(self.L[g], data)
            elif kind == _LIVE:
                self._live(self.L[g], data)
            elif kind == _SYNC_END:
                self._sync_end(*data)
            elif kind == _DL_END:
                self._dl_end(self.L[g])
            elif kind == _NOTICE:
                self._noticed()
            elif kind == _FETCH_END:
                x = self.L[g]
                x.fetch_ev = None
                if not x.down:
                    x.version = self.V
            elif kind == _TIMER:  # the grace window is closed: after the rest of this instant
                if data == self.rid and not self.fired:
                    if heap and heap[0][0] == t:  # behind them (a failure: at rank 2)
                        self.push(t, _TIMER, -1, data, rank=2 * heap[0][1])
                    else:
                        self._fire()
        wall = self.now
        n, M = c.chips, self.M
        # the completed steps of blocks in progress at the end count as compute (as the DES's)
        unmerged = 0.0
        for x in self.L:
            if x.state == "train" and x.round_ev is not None:
                k, comp = self._steps_done(x)
                x.compute += comp
                unmerged += comp
        # finished: the steps no outer step merged (a late learner's, with a quorum) are not in
        # the final model: lost, as a learner's unmerged steps are when it goes down (the DES's)
        if self.finished:
            unmerged += sum(x.pend_compute + (x.late[1] if x.late is not None else 0.0)
                            for x in self.L)
        else:
            unmerged = 0.0
        nan = math.nan
        return {
            "training_time": wall if self.finished else nan,
            "finished": float(self.finished),
            "goodput_fraction": sum(x.merged for x in self.L) / (M * wall) if wall > 0 else nan,
            "compute_utilisation": (sum(x.compute for x in self.L) / (M * wall)
                                    if wall > 0 else nan),
            "outer_syncs": float(self.n_syncs),
            "outer_steps": float(self.n_steps),
            "outer_downloads": float(sum(x.downloads for x in self.L)),
            "late_merges": float(self.late_merges),
            "lost_outer_work": float(sum(x.lost for x in self.L)) + unmerged * n,
            "failures": float(self.failures),
            "events": float(self.events),
            "stalled": float(self.stalled),
            "chips": float(n * M),
            "outer_aborts": float(self.n_aborts),
            "outer_aborted": float(self.aborted_time),
        }


def learners_model(config: LearnersConfig, streams: Streams) -> dict[str, float]:
    """One replication of the learners engine as flat metrics (a model for ``replicate``).

    Streams: ``chips`` (each learner's failures, index ``g``) and ``steps``.
    """
    return _Engine(config, streams).run()


#: The 10^6-chip scale point of ``dtsim bench`` (part ``learners``) and of
#: ``experiments/diloco_zones.py``. Sources: the per-chip MTBF is Llama 3's
#: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs (Dubey et al.,
#: "The Llama 3 herd of models", arXiv:2407.21783, section 3.3.4):
#: 54 * 86400 * 16384 / 419 = 1.82e8 s a GPU; the model is 100B parameters at
#: 2 bytes (bf16); 100 Gbit/s (1.25e10 bytes/s) of WAN a learner and 0.1 s
#: between learners, 4-bit payloads (Streaming DiLoCo's); the replacement
#: (600 s), a chip's weight fetch (60 s) and the 1 s inner step are inputs
#: of this scale point, not measurements.
SCALE_POINT = dict(learners=40, chips=25_000, step_time=1.0, every=100, size=2e11,
                   bandwidth=1.25e10, latency=0.1, bits=4, mtbf=54 * 86400 * 16384 / 419,
                   replace_time=600.0, chip_download=60.0)
