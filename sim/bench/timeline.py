"""``dtsim bench`` part ``timeline`` (q): the cost of ``--timeline`` (:mod:`sim.timeline`),
a run that records its events and writes them over the same run without."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from ..rng import Streams
from .timing import _cpu_clock

__all__ = ["bench_timeline", "timeline_bench_configs"]


def timeline_bench_configs() -> dict[str, Any]:
    """The runs of the ``timeline`` part: the training DES's benchmark run, and 1F1B on 4
    unequal stages, 32 micro-batches a step, 400 steps (102 400 passes)."""
    from ..training import TrainingConfig
    from .training import BENCH_CONFIG

    return {"bench": BENCH_CONFIG,
            "1f1b": TrainingConfig(stages=4, microbatches=32, steps=400, schedule="1f1b",
                                   forward_time=(1.0, 1.2, 0.9, 1.1))}


def bench_timeline(repeats: int = 3) -> dict[str, float]:
    """CPU time of a recorded run plus writing its timeline, over the run without a recorder.

    Parameters
    ----------
    repeats : int
        Best of this many of each (the two alternate, so a burst of load hits both).

    Returns
    -------
    dict
        Per run (``bench``, ``1f1b``): ``timeline_ratio_<run>`` (recorded run and its
        file over the plain run; 1 means free), ``timeline_events_<run>``,
        ``timeline_run_seconds_<run>`` (the plain run), ``timeline_record_seconds_<run>``
        (the recorder's share of the recorded run), ``timeline_write_seconds_<run>`` and
        ``timeline_mib_<run>`` (the file).
    """
    from ..timeline import Recorder
    from ..training import training_model

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in timeline_bench_configs().items():
            plain = recorded = write = math.inf
            rec = None
            for _ in range(repeats):
                t0 = _cpu_clock()
                training_model(cfg, Streams(0).replication(0))
                plain = min(plain, _cpu_clock() - t0)
                rec = Recorder()
                t0 = _cpu_clock()
                training_model(cfg, Streams(0).replication(0), recorder=rec)
                recorded = min(recorded, _cpu_clock() - t0)
                t0 = _cpu_clock()
                path = rec.write(Path(tmp) / f"{name}.json")
                write = min(write, _cpu_clock() - t0)
            out[f"timeline_ratio_{name}"] = (recorded + write) / plain
            out[f"timeline_events_{name}"] = float(rec.n)  # type: ignore[union-attr]
            out[f"timeline_run_seconds_{name}"] = plain
            out[f"timeline_record_seconds_{name}"] = max(recorded - plain, 0.0)
            out[f"timeline_write_seconds_{name}"] = write
            out[f"timeline_mib_{name}"] = path.stat().st_size / 2**20
    return out
