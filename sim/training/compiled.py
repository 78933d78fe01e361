"""The compiled training engine: :mod:`sim.training.kernel`'s numba event loop, with the DES's metrics.

:class:`CompiledTraining` answers the configurations whose every feature the
kernel models exactly as the DES does (see :func:`compiled_obstacle` for what
it refuses, one reason per line), builds the kernel's arrays from the config
(speeds from the DES's own ``speeds`` stream, so a drawn spread is the same per
seed), runs it, and reports the metrics of
:func:`sim.training.system.training_model` computed the same way. Its random
numbers are its own (xoshiro256** from the run's named streams), so a seed
gives other trajectories than the DES with the same law; ``--engine auto``
therefore keeps the DES (``auto = False``) and the compiled engine runs when
named, ``--engine compiled``.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import numpy as np

from ..engines import Applies, Engine
from ..errors import ConfigError
from .config import TrainingConfig
from .flow import live_idle_share
from .system import METRICS, draw_speeds, training_record
from .trainer import steady_throughput

__all__ = ["HAVE_NUMBA", "compiled_obstacle", "compiled_training_model", "CompiledTraining"]

#: Whether numba is installed; the kernel (and numba) is imported only when a run asks for it.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None

#: The most bytes the kernel's per-microbatch tables may take (async holds all ``N m``).
MAX_TABLE_BYTES = 1 << 30


def _slots(c: TrainingConfig) -> int:
    return c.steps * c.microbatches if c.schedule == "async" else c.microbatches


def compiled_obstacle(c: TrainingConfig) -> str | None:
    """Why the compiled engine does not model ``c`` exactly as the DES (None: it does)."""
    pl = c.domain_placement
    checks = (
        (not HAVE_NUMBA, "needs numba (pip install 'dtsim[fast]')"),
        (c.network is not None, "transfers over a network (contention) run on the DES"),
        (c.schedule not in ("swarm", "async"),
         f"runs the swarm and async schedules, not {c.schedule} (fixed pipelines)"),
        (c.backward_times is not None, "per-stage backward times run on the DES"),
        (c.strategy is not None, "fault-tolerance strategies run on the DES or the job engine"),
        (c.placement is not None, "a placement's domain hierarchy runs on the DES "
         "(the compiled engine has stage domains only)"),
        (c.failure_trace is not None, "failure traces run on the DES"),
        (c.mtbf < math.inf, "spot preemption (mtbf) runs on the DES"),
        (c.failures and c.failure_distribution != "exponential",
         f"needs exponential up and down times, not {c.failure_distribution}"),
        (c.restart_cost is not None or c.checkpoint_every > 0,
         "checkpoint and restart run on the DES"),
        (c.ring_sync,
         "the gradient all-reduce (sync allreduce with parameters or latency) runs on the DES"),
        (c.max_time < math.inf, "needs runs to the end (max_time inf)"),
        (any(t <= 0 for t in c.forward_time),
         "needs positive forward times (zero-time passes run on the DES)"),
        (_slots(c) * c.stages * 8 > MAX_TABLE_BYTES,
         "too many microbatches at once for its tables (async: steps x microbatches)"),
        (len(pl.replica_domains) != c.stages, "needs one domain per stage"),
        (c.pass_time_distribution not in ("deterministic", "exponential"),
         f"needs deterministic or exponential passes, not {c.pass_time_distribution}"),
        (c.sync_wait is not None, "fastest-k steps (sync_wait) run on the DES"),
        (c.routing in ("least-assigned-time", "trainer-balancer"),
         f"{c.routing} routing (a throughput average per replica) runs on the DES"),
    )
    for bad, why in checks:
        if bad:
            return why
    return None


def _build(c: TrainingConfig, streams: Any):
    from . import kernel as K

    speeds = draw_speeds(c, streams)
    L = c.stages
    counts = np.array([len(row) for row in speeds], dtype=np.int64)
    stage_of = np.repeat(np.arange(L, dtype=np.int64), counts)
    index_of = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
    sp = np.array([v for row in speeds for v in row], dtype=float)
    fwd = np.array(c.forward_time, dtype=float)[stage_of] / sp
    bwd = np.array(c.backward_time, dtype=float)[stage_of] / sp
    ints = np.zeros(K.P_NI, dtype=np.int64)
    ints[K.P_L], ints[K.P_R] = L, int(counts.sum())
    ints[K.P_SKIP] = c.skip_budget
    ints[K.P_ROUTING] = K.ROUTING_CODES[c.routing]
    ints[K.P_EXPO] = int(c.pass_time_distribution == "exponential")
    ints[K.P_BACK] = int(c.backward_ratio > 0)
    ints[K.P_ASYNC] = int(c.schedule == "async")
    ints[K.P_ARRIVAL] = K.ARRIVAL_CODES[c.arrival]
    ints[K.P_N], ints[K.P_M] = c.steps, c.microbatches
    ints[K.P_TOTAL] = c.steps * c.microbatches
    ints[K.P_SLOTS] = _slots(c)
    from ..failures import up_down_means

    w_up, w_down = up_down_means(c.availability, c.mean_downtime)
    u = c.domain_outage
    d_up, d_down = up_down_means(1.0 - u, c.domain_downtime, name="domain_outage")
    floats = np.zeros(K.PF_NF)
    floats[K.PF_DET], floats[K.PF_MAXWAIT] = c.detection_timeout, c.max_wait
    floats[K.PF_DOWNLOAD], floats[K.PF_OPT] = c.download_time, c.optimizer_time
    floats[K.PF_GAP] = 1.0 / c.arrival_rate
    floats[K.PF_WUP], floats[K.PF_WDOWN] = w_up, w_down
    floats[K.PF_DUP], floats[K.PF_DDOWN] = d_up, d_down
    hops = np.array(c.hop_times + (0.0,), dtype=float)
    states = K.stream_states([streams.rng("kernel:" + name)
                              for name in ("failures", "pass_time", "routing", "arrivals")])
    s = K.new_state(stage_of=stage_of, index_of=index_of, counts=counts, speeds=sp, fwd=fwd,
                    bwd=bwd, ints=ints, floats=floats, hops=hops,
                    quality=np.array(c.quality, dtype=float), states=states)
    return K, s


def compiled_training_model(config: TrainingConfig, streams: Any) -> dict[str, float]:
    """One replication on the compiled engine, as :func:`sim.training.training_model`'s metrics.

    Raises
    ------
    ConfigError
        Naming ``engine`` when the config has a feature the kernel does not
        model (:func:`compiled_obstacle`).
    """
    c = config
    why = compiled_obstacle(c)
    if why is not None:
        raise ConfigError("engine", f"des or auto for this configuration (compiled: {why})",
                          "compiled")
    K, s = _build(c, streams)
    K.run_kernel(s)
    gi, gf, ri, rf = s["gi"], s["gf"], s["ri"], s["rf"]
    nan = math.nan
    wall = float(gf[K.GF_NOW])
    W = c.workers
    busy = float(rf[:, K.F_BUSY].sum())
    if c.schedule == "async":
        delivered, quality = int(gi[K.G_DELIV]), float(gf[K.GF_QSUM])
        fin = s["fin"][: int(gi[K.G_NFIN])].tolist()
        m = c.microbatches
        t = sorted(fin)
        marks = [0.0] + [t[i] for i in range(m - 1, len(t), m)]
        steps = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        down = float(gf[K.GF_DOWN]) + int(gi[K.G_NDOWN]) * (wall - float(gf[K.GF_DSINCE])) \
            if gi[K.G_NDOWN] else float(gf[K.GF_DOWN])  # DownClock.at(wall)
        bubble = live_idle_share(busy, W * wall, down)
        idle_all = 1.0 - busy / (W * wall) if wall > 0 else nan
        steady = steady_throughput(fin) if c.arrival == "saturated" else nan
        steps_done = float(delivered + int(gi[K.G_DROPPED])) // m
    else:
        n = int(gi[K.G_STEP])
        delivered = int(s["kept_d"][:n].sum())
        quality = float(s["kept_q"][:n].sum())
        steps = s["steps"][:n].tolist()
        ct = float(gf[K.GF_COMPUTE])
        bubble = live_idle_share(float(gf[K.GF_COMPUTE_BUSY]), W * ct,
                                 float(gf[K.GF_COMPUTE_DOWN]))
        idle_all = 1.0 - float(gf[K.GF_COMPUTE_BUSY]) / (W * ct) if ct > 0 else nan
        steady = nan
        steps_done = float(n)
    dlv, drp = int(gi[K.G_DELIV]), int(gi[K.G_DROPPED])
    attempted = dlv + drp
    series_cost = None
    if c.price is None and c.price_series is not None:  # no trace or spot: billed throughout
        series_cost = W * c.price_series.integral(wall) / c.hour
    own = rf[:, K.F_OWNUPT] + np.where(ri[:, K.R_OWNUP] == 1, wall - rf[:, K.F_OWNSINCE], 0.0)
    avail = float(np.mean(own / wall)) if wall > 0 else float(np.mean(ri[:, K.R_OWNUP]))
    lost = {"lost_pass": float(gf[K.GF_LOSTPASS]), "recompute": float(gf[K.GF_RECOMPUTE]),
            "reroute": float(gf[K.GF_REROUTE]), "download": float(gf[K.GF_DOWNLOAD]),
            "stall": float(gf[K.GF_STALL]), "restart": 0.0, "checkpoint": 0.0}
    out = training_record(
        c, wall=wall, finished=True, delivered=delivered, quality=quality,
        samples=delivered * c.samples_per_microbatch,
        quality_samples=quality * c.samples_per_microbatch, step_times=steps,
        steps_done=steps_done, hours=[wall / c.hour] * W, series_cost=series_cost,
        availability=avail, lost=lost, measured={
            "throughput_steady": steady,
            "bubble_fraction": bubble,
            "utilisation": busy / (W * wall) if wall > 0 else nan,
            "latency_mean": float(gf[K.GF_LATSUM]) / dlv if dlv else nan,
            "drop_rate": drp / attempted if attempted else nan,
            "mean_quality": float(gf[K.GF_QSUM]) / dlv if dlv else nan,
            "mean_skipped": float(gi[K.G_SKIPSUM]) / dlv if dlv else nan,
            "passes": float(ri[:, K.R_PASSES].sum()), "lost_passes": float(gi[K.G_LOSTP]),
            "reroutes": float(gi[K.G_REROUTES]), "recomputes": float(gi[K.G_RECOMP]),
            "skips": float(gi[K.G_SKIPS]), "waits": float(gi[K.G_WAITS]),
            "restarts": 0.0, "checkpoints": 0.0, "preemptions": 0.0})
    out["events"] = float(gi[K.G_EVENTS])
    # the compute time over the wall time, as utilisation over the idle share of every worker
    # in the compute phases (down ones too): how dtsim train derived it before bubble_fraction
    # left the down workers out, so the figure is the same float; less the worker-time not
    # live in the compute phases (the DES's: a down worker's phases are not its compute)
    u = out["utilisation"]
    out["compute_utilisation"] = (u / (1.0 - idle_all) if idle_all == idle_all and u == u
                                  and idle_all < 1.0 else nan)
    if c.schedule != "async" and float(gf[K.GF_COMPUTE_DOWN]) > 0 and wall > 0:
        out["compute_utilisation"] -= float(gf[K.GF_COMPUTE_DOWN]) / (W * wall)
    return {k: out[k] for k in (*METRICS, "events", "compute_utilisation")}


class CompiledTraining(Engine):
    """The training model on the numba event loop (see the module docstring)."""

    name = "compiled"
    family = "training"
    speed = 10
    metrics = METRICS
    auto = False  # its own random numbers: a seed's numbers would move under auto

    def applies(self, config: Any) -> Applies:
        why = compiled_obstacle(config)
        if why is not None:
            return Applies(False, why)
        return Applies(True, "the compiled event loop models this configuration exactly as the DES")

    def run(self, config: Any, streams: Any) -> dict[str, Any]:
        m = compiled_training_model(config, streams)
        m.pop("events", None)
        return m
