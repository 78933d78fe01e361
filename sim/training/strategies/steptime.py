"""Step times of a configuration: measured tables, or the training DES without failures.

The step-level strategies (checkpoint-restart, redundancy, reconfiguration)
move between configurations of the workers that are up: ``P`` pipelines of
the config's depth ``L``, or, for reconfiguration, pipelines of other depths
(templates). A step of a configuration takes

* the time a **table** gives (:class:`StepTimes`, read by
  :func:`read_step_times`): measured step times by the number of workers the
  job holds (``per="workers"``, the artifacts of Oobleck and Bamboo look
  their throughput up this way) or by the number of pipelines
  (``per="pipelines"``, Bamboo's own simulator);
* or, without a table, the time the **training DES** takes for one step of
  that configuration with no failure (:func:`derived_step_time`): the
  config's stages, schedule, routing, transfers, gradient sync and optimizer,
  on ``P`` replicas per stage; a pipeline of ``n < L`` nodes holds the ``L``
  stages merged into ``n`` contiguous groups of least largest work
  (:func:`merge_stages`), and the step's microbatches are split over the
  pipelines in proportion to their bottleneck rates (each pipeline of ``n``
  nodes is run by the DES for its share). With deterministic pass times this
  is exact: it is the DES's own step.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import progress
from ...errors import (
    ConfigError,
    ascii_float,
    ascii_int,
    check,
    check_choice,
    check_memory,
    read_csv_text,
)
from ...rng import Streams

__all__ = ["StepTimes", "read_step_times", "merge_stages", "derived_step_time",
           "split_microbatches", "stage_work", "formation_time", "is_table"]

PER = ("workers", "pipelines")
#: Memory a row of a CSV table takes while it is read into Python numbers (a 10^6-row
#: step-time table peaked at 236 bytes a row, a price series at 192: tracemalloc), and the
#: rows from which reading one shows a progress bar.
BYTES_PER_CSV_ROW, PROGRESS_ROWS = 250, 100_000


@dataclass(frozen=True)
class StepTimes:
    """Measured step times by workers held or by pipelines (values only).

    Parameters
    ----------
    per : {"workers", "pipelines"}
        What ``counts`` count.
    counts : tuple of int
        Increasing counts (>= 1).
    times : tuple of float
        Step time at each count (> 0, in the run's time units).

    Notes
    -----
    :meth:`lookup` gives the time of the largest count at most ``n`` (more
    workers than the table's largest count run at its time, the extra ones
    idle) and None below the smallest count (the job cannot run).
    """

    per: str
    counts: tuple[int, ...]
    times: tuple[float, ...]

    def __post_init__(self) -> None:
        check_choice("step_times", self.per, PER)
        counts = tuple(int(c) for c in self.counts)
        times = tuple(float(t) for t in self.times)
        check(len(counts) == len(times) and counts, "step_times",
              "as many times as counts, at least one", (len(counts), len(times)))
        for a, b in zip(counts, counts[1:], strict=False):
            check(b > a, "step_times", "strictly increasing counts", b)
        check(counts[0] >= 1, "step_times", "counts >= 1", counts[0])
        for t in times:
            check(math.isfinite(t) and t > 0, "step_times", "step times > 0", t)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "times", times)

    @property
    def smallest(self) -> int:
        """The fewest workers (or pipelines) the table can run."""
        return self.counts[0]

    def lookup(self, n: int) -> float | None:
        """Step time with ``n`` workers (or pipelines), None below the smallest count."""
        best = None
        for c, t in zip(self.counts, self.times, strict=True):
            if c <= n:
                best = t
        return best


def read_step_times(path: str | Path) -> StepTimes:
    """Read a CSV with a header ``workers,step_time`` or ``pipelines,step_time``.

    Raises
    ------
    ConfigError
        Naming ``step_times`` for a missing, unreadable or malformed file.
    """
    text = read_csv_text("step_times", path)
    rows_in = text.count("\n")
    # what the rows take while read (measured: 236 bytes a row at 10^6 rows), before any
    check_memory("step_times", str(path), rows_in * BYTES_PER_CSV_ROW)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    cols = set(reader.fieldnames or [])
    per = [p for p in PER if p in cols]
    check(len(per) == 1 and "step_time" in cols, "step_times",
          "a CSV file with columns workers,step_time or pipelines,step_time",
          f"{path} (columns: {sorted(cols)})")
    rows = []
    with progress.bar(rows_in if rows_in >= PROGRESS_ROWS else 0, "step times",
                      unit="row") as bar:
        for lineno, row in enumerate(reader, start=2):
            try:
                rows.append((ascii_int(row[per[0]]), ascii_float(row["step_time"])))
            except (TypeError, ValueError):
                raise ConfigError("step_times", f"a CSV file of integer {per[0]} and numeric "
                                  "step_time", f"{path}:{lineno}") from None
            if lineno % 10_000 == 0:
                bar.update(10_000)
    check(bool(rows), "step_times", "a CSV file with at least one row", str(path))
    rows.sort()
    try:
        return StepTimes(per[0], tuple(c for c, _ in rows), tuple(t for _, t in rows))
    except ConfigError as exc:
        raise ConfigError("step_times", exc.rule, f"{path} ({exc.value})") from None


def is_table(step_times: Any) -> bool:
    """Whether ``step_times`` is a measured table (a :class:`StepTimes`), not a plan's
    timer of formations (``per == "formation"``: :class:`sim.profiles.formations.PlanStepTimes`)."""
    return step_times is not None and step_times.per != "formation"


def stage_work(config: Any) -> tuple[float, ...]:
    """The work of each stage that a pipeline of fewer nodes merges (:func:`merge_stages`):
    ``t_f (1 + backward_ratio)``, or with a plan's timer its stages' forward and backward
    time (:attr:`sim.profiles.formations.PlanStepTimes.stage_work`)."""
    st = config.step_times
    if st is not None and st.per == "formation":
        return st.stage_work
    return tuple(f * (1 + config.backward_ratio) for f in config.forward_time)


def formation_time(config: Any, sizes: tuple[int, ...], held: int) -> float | None:
    """A step's time with pipelines of ``sizes`` nodes and ``held`` workers held: the
    config's table, its plan's timer (:class:`sim.profiles.formations.PlanStepTimes`) or the training
    DES (:func:`derived_step_time`); None when it cannot run."""
    st = config.step_times
    if st is None:
        return derived_step_time(config, sizes) if sizes else None
    if st.per == "formation":
        return st.formation_time(sizes)
    return st.lookup(held if st.per == "workers" else len(sizes))


def merge_stages(work: tuple[float, ...], nodes: int) -> tuple[int, ...]:
    """Cut ``work`` (per stage) into ``nodes`` contiguous non-empty groups of least largest sum
    (:func:`sim.analytic.linear_partition`): the group sizes."""
    from ...analytic.strategies import linear_partition

    return linear_partition(work, nodes)


def _free(config: Any) -> Any:
    """``config`` with every failure, trace, strategy and restart model removed, one step."""
    return dataclasses.replace(
        config, availability=1.0, domain_outage=0.0, placement=None, failure_trace=None,
        mtbf=math.inf, replace_time=0.0, restart_cost=None, checkpoint_every=0,
        checkpoint_cost=0.0, steps=1, max_time=math.inf, stall_limit=None, max_wait=0.0,
        strategy=None, step_times=None, price=None, price_series=None, notice=0.0,
        trace_hosts=None)


@functools.lru_cache(maxsize=512)
def _des_step(config: Any) -> float:
    from ..system import TrainingSystem

    system = TrainingSystem(config, Streams(0).replication(0))
    system.run()
    return float(system.env.now)


def _pipeline_config(config: Any, nodes: int, microbatches: int) -> Any:
    """One pipeline of ``nodes`` nodes holding the config's stages merged, ``microbatches``
    microbatches, no sync (the step's sync over pipelines is added by the caller)."""
    c = config
    sizes = merge_stages(tuple(f * (1 + c.backward_ratio) for f in c.forward_time), nodes)
    fwd, lat, i = [], [], 0
    hops = c.latency if isinstance(c.latency, tuple) else (c.latency,) * max(c.stages - 1, 0)
    for k, n in enumerate(sizes):
        fwd.append(sum(c.forward_time[i:i + n]))
        i += n
        if k + 1 < len(sizes):
            lat.append(hops[i - 1] if hops else 0.0)
    return dataclasses.replace(
        _free(c), stages=nodes, replicas=1, speeds=None, microbatches=microbatches,
        forward_time=tuple(fwd), latency=tuple(lat) if len(lat) > 1 else (lat[0] if lat else 0.0),
        sync="none", optimizer_time=0.0)


def split_microbatches(rates: tuple[float, ...], m: int) -> tuple[int, ...]:
    """``m`` microbatches over pipelines in proportion to their ``rates`` (largest remainders,
    ties to the first)."""
    total = sum(rates)
    raw = [m * r / total for r in rates]
    base = [int(math.floor(x)) for x in raw]
    left = m - sum(base)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - base[i]), i))
    for i in order[:left]:
        base[i] += 1
    return tuple(base)


def derived_step_time(config: Any, pipelines: tuple[int, ...]) -> float:
    """One failure-free step of ``pipelines`` (nodes per pipeline) by the training DES.

    All pipelines of the config's depth: the config itself with one replica
    per pipeline at every stage (its schedule, routing, transfers, sync and
    optimizer). Otherwise each pipeline of ``n`` nodes runs its share of the
    step's microbatches (:func:`split_microbatches` by its bottleneck rate)
    alone, and the step ends with the slowest, the ring all-reduce of the
    largest node's parameters among the pipelines, and the optimizer.
    """
    c = config
    L = c.stages
    check(len(pipelines) >= 1, "pipelines", "at least one", pipelines)
    if all(n == L for n in pipelines):
        return _des_step(dataclasses.replace(_free(c), replicas=len(pipelines), speeds=None))
    work = tuple(f * (1 + c.backward_ratio) for f in c.forward_time)
    rates = []
    for n in pipelines:
        sizes = merge_stages(work, n)
        i, worst = 0, 0.0
        for s in sizes:
            worst = max(worst, sum(work[i:i + s]))
            i += s
        rates.append(1.0 / worst if worst > 0 else math.inf)
    shares = split_microbatches(tuple(rates), c.microbatches)
    t = 0.0
    for n, b in zip(pipelines, shares, strict=True):
        if b:
            t = max(t, _des_step(_pipeline_config(c, n, b)))
    sync = 0.0
    if c.ring_sync and len(pipelines) > 1:
        from ...analytic.training import ring_allreduce_time

        most = max(max(merge_stages(work, n)) for n in pipelines)
        sync = ring_allreduce_time(len(pipelines), most * c.param_size, c.bandwidth,
                                   c.mean_latency)
    return t + sync + c.optimizer_time
