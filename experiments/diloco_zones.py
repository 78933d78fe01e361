"""DiLoCo across zones: how much bandwidth between zones keeps the GPUs busy, and what failures cost.

Four parts, one experiment (``part`` of each point):

``bandwidth``
    The WAN bandwidth a zone needs for a compute utilisation of 50, 80, 90,
    95 and 99 % (steady state, closed forms of :mod:`sim.analytic.diloco`),
    by method, at the inner-step times of 1B-, 10B- and 100B-parameter
    models; and a DES check at that bandwidth (``dtsim train``'s DES, ``N =
    4 H`` inner steps: its measured utilisation beside the exact value of
    that finite run, which also pays the last sync).
``regions``
    The compute utilisation of each method on DT-FM's measured delays and
    bandwidths between 8 AWS regions (``geo:pairs=dtfm-world``, one zone a
    region, one WAN host a zone), simulated with the flows of
    :mod:`sim.network` (no closed form: every pair differs).
``goodput``
    Goodput (merged compute over chip time) of synchronous and quorum outer
    steps against the chip failure rate, on the learners engine at the
    10^6-chip scale point (:data:`sim.training.learners.SCALE_POINT`, 40
    learners of 25,000 chips; failure rate a multiple of Llama 3's per-GPU
    rate), with and without step-time noise (lognormal, sigma 0.3); and on the
    training DES under two real preemption traces (AWS p3 spot instances,
    ``aws-p3``; GCP A100 preemptible VMs, ``gcp-a100``), each replication
    from a random offset of the looped trace (the same offsets for both
    variants: common random numbers).
``learning``
    Loss of the global model against wall clock for each method at one
    bandwidth (the exact first moment on heterogeneous quadratics,
    :func:`sim.analytic.diloco.loss_vs_wall_clock`), and the time to a
    target loss.

Step times (the sources): a zone is 64 NVIDIA H100 SXM GPUs (989 TFLOP/s
dense BF16, NVIDIA's H100 datasheet) at a model FLOPs utilisation of 40 %
(Llama 3 405B trained at 38-43 % BF16 MFU on H100, Dubey et al. 2024,
arXiv:2407.21783, table 4); an inner step of a zone processes 2^19 tokens
(a 2M-token global batch over 4 zones) and costs ``6 N`` FLOPs a token
(Kaplan et al. 2020): ``T = 6 N 2^19 / (64 * 989e12 * 0.4)``, 0.124 s, 1.24 s
and 12.4 s for N = 1e9, 1e10, 1e11. The pseudo-gradient is the model at
bf16 (``2 N`` bytes). ``M = 4`` zones in a ring, 0.1 s between zones (the
order of DT-FM's inter-region delays, 11-265 ms).

Methods: ``dp`` (data parallelism across zones: a ring all-reduce of the
gradients every step), ``dp-overlap`` (the same, overlapped with the
backward pass, 2/3 of the step: ``--sync allreduce:overlap=backward``, the
gradients cut into ``n`` equal buckets, each all-reduced by its own ring once
the backward pass has produced it and the bucket before it is done; ``n``
from 1 to 32, the best at each bandwidth, so the strongest data-parallel
baseline; exact by the max-plus recursion of
:func:`sim.analytic.overlapped_allreduce_end`, which the DES equals), ``diloco``
(``H = 100`` inner steps between outer syncs, as INTELLECT-1), ``streaming``
(``P = 4`` strided fragments, one every 25 steps), ``streaming-overlap``
(the same, each sync beside ``TAU = 5`` inner steps) and ``streaming-4bit``
(overlapped, 4-bit payloads): Streaming DiLoCo's (arXiv:2501.18512) three
steps, one at a time.

Bandwidths are in Gbit/s (a zone's WAN link, each direction), times in
seconds, sizes in bytes.

Run::

    dtsim run experiments/diloco_zones.py --quick
    python experiments/diloco_zones.py            # full, about 10 minutes on 2 cores
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim.analytic import bucket_ready_times, overlapped_allreduce_end, ring_allreduce_time
from sim.analytic import diloco as AD
from sim.rng import Streams
from sim.training.traffic import gradient_buckets

# ----------------------------------------------------------------------------- parameters

NAME = "diloco_zones"

#: H100 SXM dense BF16 peak (FLOP/s), MFU, GPUs a zone, tokens a zone's inner step.
PEAK, MFU, GPUS, TOKENS = 989e12, 0.40, 64, 2 ** 19
ZONES, LATENCY = 4, 0.1
#: Every model size the parts name (parameters). The bandwidth part sweeps MODELS (edit it:
#: a subset, or sizes of your own); the regions, trace and learning parts name theirs here.
SIZES = {"1B": 1e9, "10B": 1e10, "100B": 1e11}
MODELS = dict(SIZES)
#: The models of the regions part, of the trace part and of the learning part.
REGION_MODELS, TRACE_MODEL = ("1B", "10B"), "10B"
TARGETS = (0.5, 0.8, 0.9, 0.95, 0.99)
#: method -> (H, fragments, overlap, bits); dp methods sync every step.
METHODS = {
    "dp": (1, 1, 0, 16), "dp-overlap": (1, 1, 0, 16), "diloco": (100, 1, 0, 16),
    "streaming": (100, 4, 0, 16), "streaming-overlap": (100, 4, 5, 16),
    "streaming-4bit": (100, 4, 5, 4),
}
#: DT-FM's worldwide case: 8 regions of its table.
REGIONS = "Oregon/Virginia/Ohio/Tokyo/Seoul/London/Frankfurt/Ireland"
#: Real preemption traces of the trace part (shipped, sim/traces/data: AWS p3 spot, GCP A100).
TRACES = ("aws-p3", "gcp-a100")
#: Chip failure rate multiples of the scale point's (Llama 3's per-GPU rate).
FAILURE_FACTORS = (1, 2, 4, 8)
#: Quorum of the 40 learners and its grace window (s).
QUORUM, GRACE = 30, 10.0
#: Learning: target losses of the global model, bandwidth (Gbit/s), model.
LOSS_TARGETS, LEARN_GBPS, LEARN_MODEL = (0.2, 0.05), 10.0, "10B"
#: Bucket counts tried for dp-overlap (the best at each bandwidth). PyTorch DDP's default,
#: 25 MiB buckets (hundreds of them here), pays the ring's 0.6 s of latency a bucket.
DP_BUCKETS = range(1, 33)


def size(name: str) -> float:
    """The parameters of the model ``name`` (MODELS first, then SIZES)."""
    return {**SIZES, **MODELS}[name]


def step_time(params: float) -> float:
    """A zone's inner step (s): ``6 N`` FLOPs a token, ``TOKENS`` tokens, 64 H100 at 40 % MFU."""
    return 6.0 * params * TOKENS / (GPUS * PEAK * MFU)


def _points() -> list[dict[str, Any]]:
    pts: list[dict[str, Any]] = []
    for m in MODELS:
        for meth in METHODS:
            for u in TARGETS:
                pts.append({"part": "bandwidth", "model": m, "method": meth, "target": u,
                            "replications": 1})
    for m in REGION_MODELS:
        for meth in METHODS:
            if meth != "dp-overlap":
                pts.append({"part": "regions", "model": m, "method": meth, "replications": 1})
    for f in FAILURE_FACTORS:
        for sync in ("synchronous", "quorum"):
            for sigma in (0.0, 0.3):
                pts.append({"part": "goodput", "failure_factor": f, "sync": sync,
                            "step_sigma": sigma})
    for k, trace in enumerate(TRACES):
        for sync in ("synchronous", "quorum"):  # common random numbers: one seed a trace
            pts.append({"part": "trace", "trace": trace, "sync": sync, "replications": 10,
                        "seed_offset": 1 + k})
    for meth in METHODS:
        pts.append({"part": "learning", "method": meth, "replications": 1})
    return pts


BASE = {"part": "bandwidth", "model": "10B", "method": "diloco", "target": 0.95,
        "failure_factor": 1, "sync": "synchronous", "step_sigma": 0.0, "days": 1.0,
        "trace_steps": 6000, "trace": "aws-p3"}
POINTS = _points()
REPLICATIONS = 3
SEED = 37
#: Fractions of time or work (random across replications): intervals inside [0, 1] in
#: summary.csv (a mean interval went past 1: goodput [0.66, 1.07] with 3 replications).
RATES = {"goodput_fraction": None, "compute_utilisation": None, "worker_availability": None}
NONNEGATIVE = "*"
QUICK = {
    "BASE": {"days": 0.05, "trace_steps": 400},
    # the lowest target and the highest up to 95 %, the first region model: the parameters
    # above as edited (a copy with its own MODELS and TARGETS keeps a quick run of each part)
    "POINTS": ([p for p in POINTS if p["part"] == "bandwidth" and p["target"] in (
                    min(TARGETS), max([t for t in TARGETS if t <= 0.95] or TARGETS))]
               + [p for p in POINTS if p["part"] == "regions" and p["model"] == REGION_MODELS[0]]
               + [p for p in POINTS if p["part"] == "goodput" and p["failure_factor"] in (1, 8)]
               + [dict(p, replications=3) for p in POINTS if p["part"] == "trace"]
               + [p for p in POINTS if p["part"] == "learning"]),
    "REPLICATIONS": 1,
}


# ----------------------------------------------------------------------------- model


def bucket_size(S: float, n: int) -> float:
    """``--sync allreduce:bucket_size`` that cuts ``S`` into ``n`` buckets (the last a hair
    smaller: ``ceil(S / b) = n`` whatever the rounding)."""
    return S / n * (1.0 + 1e-9)


def dp_overlap_exposed(params: float, B: float, n: int) -> float:
    """The all-reduce time exposed after the backward pass, ``n`` buckets at ``B`` bytes/s.

    Every zone's backward pass runs from ``T/3`` to ``T`` (1F1B, one micro-batch, backward
    twice the forward) and produces the gradients at an even rate, DDP's buckets in its order
    (:func:`sim.training.traffic.gradient_buckets`); each bucket is a ring all-reduce of its
    size (:func:`sim.analytic.ring_allreduce_time`), in order, once produced
    (:func:`sim.analytic.overlapped_allreduce_end`): ``max(0, e_n - T)``.
    """
    T = step_time(params)
    sizes, ready = _bucket_plan(params, n)
    ring = {b: ring_allreduce_time(ZONES, b, B, LATENCY) for b in set(sizes)}  # 2 sizes at most
    end = overlapped_allreduce_end(ready, [ring[b] for b in sizes])
    return max(0.0, end - T)


@functools.cache
def _bucket_plan(params: float, n: int) -> tuple[list[float], list[float]]:
    """``n`` buckets of the gradients in DDP's order, and when each is produced."""
    T, S = step_time(params), 2.0 * params
    sizes = gradient_buckets(S, bucket_size(S, n))
    return sizes, bucket_ready_times(T / 3.0, 2.0 * T / 3.0, sizes)


def dp_overlap_best(params: float, B: float) -> tuple[float, int]:
    """The least exposed time over :data:`DP_BUCKETS`, and its bucket count (the fewest)."""
    return min((dp_overlap_exposed(params, B, n), n) for n in DP_BUCKETS)


def utilisation(method: str, params: float, B: float) -> float:
    """Steady-state compute utilisation of ``method`` at ``B`` bytes/s (closed forms)."""
    T, S = step_time(params), 2.0 * params
    H, P, tau, bits = METHODS[method]
    if method == "dp-overlap":
        return T / (T + dp_overlap_best(params, B)[0])
    if method == "dp":
        return T / (T + AD.outer_sync_time(ZONES, S, B, LATENCY))
    tf = [AD.outer_sync_time(ZONES, S / P, B, LATENCY, bits=bits)] * P
    return AD.streaming_utilisation(H, T, tf, overlap=tau)


def bandwidth_needed(method: str, params: float, target: float) -> float:
    """The least bandwidth (bytes/s) for a steady-state utilisation of ``target``."""
    T, S = step_time(params), 2.0 * params
    H, P, tau, bits = METHODS[method]
    slack = (1.0 - target) / target
    if method == "dp":
        return AD.bandwidth_for_time(T * slack, ZONES, S, LATENCY)
    if method == "dp-overlap":  # the exposed time falls with B: bisect (geometric)
        budget = T * slack
        if dp_overlap_best(params, math.inf)[0] > budget:
            return math.inf
        lo, hi = 1.0, 1.0
        while dp_overlap_best(params, hi)[0] > budget:
            lo, hi = hi, hi * 4.0
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if mid in (lo, hi):
                break
            lo, hi = (lo, mid) if dp_overlap_best(params, mid)[0] <= budget else (mid, hi)
        return hi
    # P syncs an outer period, each exposing max(0, T_f - TAU T): T_f <= TAU T + H T slack / P
    return AD.bandwidth_for_time(tau * T + H * T * slack / P, ZONES, S / P, LATENCY, bits=bits)


def _sync_spec(method: str, params: float = 0.0, B: float = math.inf) -> str:
    H, P, tau, bits = METHODS[method]
    if method == "dp-overlap":  # the best bucket count at this bandwidth
        n = dp_overlap_best(params, B)[1]
        return f"allreduce:overlap=backward,bucket_size={bucket_size(2.0 * params, n)!r}"
    if method == "dp":
        return "allreduce"
    return (f"diloco:every={H}" + (f",fragments={P},order=strided" if P > 1 else "")
            + (f",overlap={tau}" if tau else "") + (f",bits={bits}" if bits != 16 else ""))


def _des(method: str, params: float, *, bandwidth: float = math.inf, network: Any = None,
         groups: int = ZONES, steps: int | None = None, seed: int = 0) -> dict[str, Any]:
    """One failure-free run of the training DES: ``groups`` zones of one replica."""
    from sim.engines import predictions
    from sim.training import TrainingConfig, training_model

    H = METHODS[method][0]
    T = step_time(params)
    N = steps if steps is not None else (100 if method.startswith("dp") else 4 * H)
    kw: dict[str, Any] = dict(stages=1, replicas=groups, microbatches=groups, steps=N,
                              forward_time=T / 3.0, backward_ratio=2.0, param_size=2.0 * params,
                              sync=_sync_spec(method, params, bandwidth), schedule="1f1b")
    if network is None:
        kw.update(bandwidth=bandwidth, latency=LATENCY)
    else:
        kw.update(network=network)
    cfg = TrainingConfig(**kw)
    out = training_model(cfg, Streams(seed).replication(0), figures=True)
    pred = predictions("training", cfg, ["compute_utilisation"])["compute_utilisation"]["value"]
    return {"des_utilisation": out["compute_utilisation"],
            "exact_run_utilisation": math.nan if pred is None else pred,
            "wan_gb_sent": (out["wan_bytes_sent"] + out["allreduce_bytes_sent"]) / 1e9,
            "wall_hours": out["training_time"] / 3600.0}


def _goodput(p: dict[str, Any], streams: Streams) -> dict[str, Any]:
    from sim.training.learners import SCALE_POINT, LearnersConfig, learners_model

    sp = dict(SCALE_POINT)
    sp["mtbf"] = sp["mtbf"] / p["failure_factor"]
    q = {} if p["sync"] == "synchronous" else {"quorum": QUORUM, "grace": GRACE}
    law = {} if p["step_sigma"] == 0 else {"step_time_distribution": "lognormal",
                                           "step_time_shape": p["step_sigma"]}
    steps = int(round(86400 * p["days"] / sp["every"])) * sp["every"]
    out = learners_model(LearnersConfig(steps=steps, **sp, **q, **law), streams)
    return {k: out[k] for k in ("goodput_fraction", "compute_utilisation", "training_time",
                                "failures", "outer_downloads", "late_merges", "chips")}


def _trace(p: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """8 zones of 2 pipeline stages (16 workers on the trace's slots: aws-p3 has 32,
    gcp-a100 64), 10B model, 4-bit DiLoCo at 100 Gbit/s, each replication from a random
    offset of the looped trace (trace seconds = simulated seconds), the up slots uniform
    given the trace's count (policy ``random``)."""
    from sim.traces import TraceReplay
    from sim.training import TrainingConfig, training_model

    params = size(TRACE_MODEL)
    T = step_time(params)
    sync = "diloco:every=100,bits=4" + (",quorum=6,grace=10.0" if p["sync"] == "quorum" else "")
    cfg = TrainingConfig(stages=2, replicas=8, microbatches=8, steps=p["trace_steps"],
                         forward_time=T / 6.0, backward_ratio=2.0, param_size=params,
                         bandwidth=100e9 / 8, latency=LATENCY, sync=sync,
                         failure_trace=TraceReplay(p["trace"], policy="random",
                                                   resample="offset", loop=True))
    out = training_model(cfg, streams)
    return {"goodput_fraction": out["goodput_fraction"],
            "compute_utilisation": out["compute_utilisation"],
            "training_time": out["training_time"], "outer_downloads": out["outer_downloads"],
            "late_merges": out["late_merges"], "worker_availability": out["worker_availability"]}


def _learning(method: str) -> dict[str, Any]:
    """Loss against wall clock at ``LEARN_GBPS`` for ``LEARN_MODEL`` on ``ZONES`` zones'
    quadratics."""
    rng = np.random.default_rng(3)
    d = 8
    a = rng.uniform(0.5, 1.5, (ZONES, d))  # each zone's data: its own curvature and optimum
    c = rng.normal(0.0, 1.0, (ZONES, d))
    params = size(LEARN_MODEL)
    T, S, B = step_time(params), 2.0 * params, LEARN_GBPS * 1e9 / 8
    H, P, tau, bits = METHODS[method]
    N = 3000
    if method.startswith("dp"):
        tail = (dp_overlap_best(params, B)[0] if method == "dp-overlap"
                else AD.outer_sync_time(ZONES, S, B, LATENCY))
        curve = AD.loss_vs_wall_clock(a, c, 0.05, N, 1, T, [tail], x0=3.0)
    else:
        tf = [AD.outer_sync_time(ZONES, S / P, B, LATENCY, bits=bits)] * P
        curve = AD.loss_vs_wall_clock(a, c, 0.05, N, H, T, tf, overlap=tau, order="strided",
                                      mixing=0.5, x0=3.0)
    out = {"final_loss": curve.loss[-1], "initial_loss": curve.loss[0],
           "wall_hours": curve.time[-1] / 3600.0}
    for k, target in enumerate(LOSS_TARGETS):
        out[f"hours_to_loss{k}"] = curve.time_to(target) / 3600.0
        out[f"steps_to_loss{k}"] = float(next((i for i, v in enumerate(curve.loss)
                                                if v <= target), math.nan))
    return out


def model(config: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """One replication of one point (see the module docstring for the parts)."""
    part = config["part"]
    if part == "bandwidth":
        params = size(config["model"])
        B = bandwidth_needed(config["method"], params, config["target"])
        out = {"bandwidth_gbps": B * 8 / 1e9, "step_time_s": step_time(params),
               "utilisation_at_bandwidth": utilisation(config["method"], params, B),
               "buckets": (float(dp_overlap_best(params, B)[1]) if config["method"] ==
                           "dp-overlap" and math.isfinite(B) else math.nan)}
        if not math.isfinite(B):
            out.update(des_utilisation=math.nan, exact_run_utilisation=math.nan)
        else:
            got = _des(config["method"], params, bandwidth=B)
            out.update(des_utilisation=got["des_utilisation"],
                       exact_run_utilisation=got["exact_run_utilisation"])
        return out
    if part == "regions":
        net = f"geo:pairs=dtfm-world,names={REGIONS},hosts=1"
        out = _des(config["method"], size(config["model"]), network=net, groups=8,
                   steps=20 if config["method"].startswith("dp") else 200)
        out.pop("exact_run_utilisation")
        return out
    if part == "goodput":
        return _goodput(config, streams)
    if part == "trace":
        return _trace(config, streams)
    return _learning(config["method"])


# ----------------------------------------------------------------------------- analysis


def _rows(results: sim.runner.SweepResult, part: str) -> list[dict[str, Any]]:
    return [r for r in results.summary() if r["part"] == part]


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Tables of the four parts, a figure of the bandwidth needed, and the finding."""
    from sim.results import format_4g, write_tables

    out_dir = Path(out_dir)
    texts = []
    bw = _rows(results, "bandwidth")
    wide = []
    for m in MODELS:
        for meth in METHODS:
            rs = {r["target"]: r for r in bw if r["model"] == m and r["method"] == meth}
            if not rs:
                continue
            row: dict[str, Any] = {"model": m, "step_s": next(iter(rs.values()))["step_time_s_mean"],
                                   "method": meth}
            for u in TARGETS:
                if u in rs:
                    row[f"gbps_{int(round(100 * u))}"] = _cell(rs[u]["bandwidth_gbps_mean"],
                                                               "latency-bound")
            check = rs.get(0.95) or next(iter(rs.values()))
            row["des_check"] = check["des_utilisation_mean"]
            row["exact_check"] = check["exact_run_utilisation_mean"]
            row["buckets"] = _cell(check.get("buckets_mean"), "")
            wide.append(row)
    cols = ["model", "step_s", "method"] + [f"gbps_{int(round(100 * u))}" for u in TARGETS
                                            if f"gbps_{int(round(100 * u))}" in wide[0]]
    cols += ["des_check", "exact_check", "buckets"]
    texts.append((f"Gbit/s a zone needs for a compute utilisation of {100 * min(TARGETS):g}-"
                  f"{100 * max(TARGETS):g} % ({ZONES} zones, "
                  f"{LATENCY:g} s apart; DES check at the 95 % bandwidth: a run of 4 H steps (dp: 100), "
                  "measured and exact, the last sync included; dp-overlap's buckets there)",
                  write_tables(wide, cols, out_dir, f"{NAME}_bandwidth",
                               "Bandwidth needed for compute utilisation", fmt=format_4g)))
    reg = _rows(results, "regions")
    rrows = [{"model": r["model"], "method": r["method"],
              "utilisation": r["des_utilisation_mean"], "wan_gb_per_zone": r["wan_gb_sent_mean"]}
             for r in reg]
    texts.append(("compute utilisation on DT-FM's 8 AWS regions (measured delays and "
                  "bandwidths, one WAN host a zone; training DES over sim.network)",
                  write_tables(rrows, ["model", "method", "utilisation", "wan_gb_per_zone"],
                               out_dir, f"{NAME}_regions", "Utilisation across DT-FM's regions",
                               fmt=format_4g)))
    gp = _rows(results, "goodput")
    grows = [{"failure_x": r["failure_factor"], "step_sigma": r["step_sigma"], "sync": r["sync"],
              "goodput": r["goodput_fraction_mean"], "low": r["goodput_fraction_low"],
              "high": r["goodput_fraction_high"], "utilisation": r["compute_utilisation_mean"],
              "days": r["training_time_mean"] / 86400, "failures": r["failures_mean"],
              "late_merges": r["late_merges_mean"]} for r in gp]
    texts.append((f"goodput of 10^6 chips in 40 learners against the chip failure rate "
                  f"(x Llama 3's), synchronous vs quorum {QUORUM} of 40 (grace {GRACE:g} s)",
                  write_tables(grows, ["failure_x", "step_sigma", "sync", "goodput", "low", "high",
                                       "utilisation", "days", "failures", "late_merges"],
                               out_dir, f"{NAME}_goodput", "Goodput against failure rate",
                               fmt=format_4g)))
    tr = _rows(results, "trace")
    trows = [{"trace": r["trace"], "sync": r["sync"], "goodput": r["goodput_fraction_mean"],
              "low": r["goodput_fraction_low"], "high": r["goodput_fraction_high"],
              "utilisation": r["compute_utilisation_mean"],
              "hours": r["training_time_mean"] / 3600, "downloads": r["outer_downloads_mean"],
              "late_merges": r["late_merges_mean"],
              "availability": r["worker_availability_mean"], "replications": r["replications"]}
             for r in tr]
    texts.append(("goodput under real preemption traces (training DES, 8 zones x 2 stages, "
                  f"{TRACE_MODEL} model, 4-bit DiLoCo at 100 Gbit/s; 95 % CI over random trace offsets)",
                  write_tables(trows, ["trace", "sync", "goodput", "low", "high", "utilisation", "hours",
                                       "downloads", "late_merges", "availability",
                                       "replications"],
                               out_dir, f"{NAME}_trace", "Goodput under a real trace",
                               fmt=format_4g)))
    ln = _rows(results, "learning")
    lrows = []
    for r in ln:
        row = {"method": r["method"]}
        for k, target in enumerate(LOSS_TARGETS):
            row[f"hours_to_{target:g}"] = _cell(r[f"hours_to_loss{k}_mean"], "never")
            row[f"steps_to_{target:g}"] = _cell(r[f"steps_to_loss{k}_mean"], "never")
        row.update(final_loss=r["final_loss_mean"], hours_3000_steps=r["wall_hours_mean"])
        lrows.append(row)
    lcols = ["method"] + [f"{a}_to_{t:g}" for t in LOSS_TARGETS for a in ("hours", "steps")]
    texts.append((f"time to a loss of {' and '.join(f'{t:g}' for t in LOSS_TARGETS)} (of "
                  f"{ln[0]['initial_loss_mean']:.3g} at the start) at {LEARN_GBPS:g} Gbit/s, "
                  f"{LEARN_MODEL} step times (exact first moment on {ZONES} zones' quadratics; "
                  "3000 inner steps)" if ln else "learning",
                  write_tables(lrows, lcols + ["final_loss", "hours_3000_steps"], out_dir,
                               f"{NAME}_learning", "Loss against wall clock", fmt=format_4g)))
    _plot(wide, out_dir)
    for title, text in texts:
        print(f"\n{NAME}: {title}\n{text}")
    print(f"\n{NAME}: finding: {finding(wide, grows, trows, lrows)}")


def _cell(x: Any, word: str) -> Any:
    """A table cell: the number, or ``word`` where it is infinite or missing."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else word


def finding(wide: list[dict[str, Any]], grows: list[dict[str, Any]], trows: list[dict[str, Any]],
            lrows: list[dict[str, Any]]) -> str:
    """One paragraph from the tables (numbers as measured)."""
    def need(model: str, meth: str) -> str:
        r = next((w for w in wide if w["model"] == model and w["method"] == meth), None)
        v = None if r is None else r.get("gbps_95")
        return "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))

    parts = [f"{m}: " + ", ".join(f"{meth} {need(m, meth)}" for meth in METHODS)
             for m in MODELS if any(w["model"] == m for w in wide)]
    text = ("Gbit/s a zone needs for 95 % utilisation — " + "; ".join(parts) + ". "
            if parts else "")
    if grows:
        worst = max(r["failure_x"] for r in grows)
        g = {(r["sync"], r["step_sigma"]): r["goodput"] for r in grows if r["failure_x"] == worst}
        if g:
            text += (f"At {worst}x Llama 3's failure rate, goodput of 10^6 chips: " + ", ".join(
                f"{s} (step sigma {sg:g}) {v:.3f}" for (s, sg), v in sorted(g.items())) + ". ")
    if trows:
        text += "Under real traces, goodput: " + ", ".join(
            f"{r['trace']} {r['sync']} {r['goodput']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
            for r in trows) + ". "
    for t in LOSS_TARGETS if lrows else ():
        key = f"hours_to_{t:g}"
        text += f"Time to loss {t:g}: " + ", ".join(
            f"{r['method']} " + (f"{r[key]:.3g} h" if isinstance(r[key], float) else r[key])
            for r in lrows) + ". "
    return text


def _plot(wide: list[dict[str, Any]], out_dir: Path) -> None:
    from sim.plotting import plot_sweep

    rows = []
    for w in wide:
        for u in TARGETS:
            key = f"gbps_{int(round(100 * u))}"
            if key in w and isinstance(w[key], float) and math.isfinite(w[key]):
                rows.append({"target": u, "gbps_mean": w[key], "gbps_low": w[key],
                             "gbps_high": w[key], "case": f"{w['model']} {w['method']}"})
    if rows:
        plot_sweep(rows, "target", "gbps", out_dir / f"{NAME}_bandwidth.png", group="case",
                   logy=True, xlabel="compute utilisation", ylabel="Gbit/s a zone needs",
                   title=f"bandwidth between zones for a utilisation ({ZONES} zones)")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
