"""Predict every shipped real run with dtsim and with Sailor's own formulas; print the errors.

    python tools/real_runs.py                 # the tables of docs/real_runs.md, and the ablation
    python tools/real_runs.py --profiles DIR  # another profiles folder with runs/
    python tools/real_runs.py --json          # the rows as JSON
    python tools/real_runs.py --checks        # the estimation rules against the profiles
    python tools/real_runs.py --user-plans    # every plan a user can write from the profiles

For each run of ``sim/profiles/data/runs`` (or ``DIR/runs``): the measured
iteration time and peak memory, dtsim's (``dtsim train --plan`` on the run's
plan: the DES with every transfer and all-reduce as flows of ``sim.network``,
one failure-free replication, deterministic), the error, and
beside them the prediction of the Sailor artifact's own simulator computed
from its published formulas (:func:`sailor_time`, :func:`sailor_memory`,
written from the artifact's ``runtime_simulator.py`` and ``profile_utils.py``).
Then the per-cluster mean and worst absolute error, and the ablation: each
option of the model changed on its own against the run's framework's default
(:data:`ABLATION`: point-to-point overlapped on FIFO channels or shared max-min,
upstream DeepSpeed 0.16.5 and 0.3.13 (the latter's hops with the attention mask),
Megatron-LM with and without ``overlap_grad_reduce``, the
all-reduce overlapped with the last backward pass, derived TP, the profile's
value sizes, physical nodes), each a DES run over ``sim.network`` beside its
closed form (transfers and all-reduces as their times, no contention: ``dtsim
train --plan``'s exact column, the overlapped all-reduce included); and in the
closed form of the device programs the gradient all-reduce after every device's
program (the artifact's barrier) or each stage's after its own devices' programs
(no barrier; the tied all-reduce before or after the data-parallel one).

Nothing here is fitted: the measured numbers are only compared with.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from sim.analytic.placement import barrier_tail, pipelines_tied, staged_step_end
from sim.analytic.training import program_makespan
from sim.engines import predictions
from sim.profiles import DATA_DIR, MeasuredRun, load_profiles, read_runs
from sim.profiles.build import build_plan
from sim.rng import Streams
from sim.training import training_model
from sim.training.schedules import device_program

#: Sailor's DeepSpeed bucket, in bytes as its simulator compares it (``MEMORY_BUCKET_DEEPSPEED_SIZE``).
SAILOR_BUCKET = 500_000_000
#: Sailor's memory terms: bytes per parameter (Adam 8, fp32 copy 4, gradients 4, communication 4,
#: DeepSpeed's extra copies 4) and its GH200 overhead (4.76e9 fused kernels + 300e6).
SAILOR_BYTES_PER_PARAM = 24
SAILOR_OVERHEAD = 4.76e9 + 300e6


def _polyval(c: list[float], size: float) -> float:
    x = math.log2(size / 1e6)
    y = 0.0
    for a in c:
        y = y * x + a
    return y


def _sailor_send(bw: dict, a: Any, b: Any, ka: int, kb: int, size: float) -> float:
    """Sailor's send time: ``size / 1e9 / polyval(curve, log2(size / 1e6))`` (no flow factor)."""
    if size == 0:
        return 0.0
    c = bw[a.zone][a.gpu][str(ka)][b.zone][b.gpu][str(kb)][0]
    return (size / 1e9) / _polyval(c, size)


def _sailor_ar(bw: dict, a: Any, b: Any, size: float, n: int) -> float:
    """Sailor's bucketed all-reduce: buckets of 5e8 bytes, each ``2 (n - 1) t(bucket / n)``."""
    t, left = 0.0, size
    while left > 0:
        bucket = min(left, SAILOR_BUCKET)
        if n > 1:
            t += 2 * (n - 1) * _sailor_send(bw, a, b, 1, 1, bucket / n)
        left -= bucket
    return t


def sailor_time(run: MeasuredRun, prof: dict, info: dict, bw: dict) -> float:
    """Sailor's simulated iteration time of a run (its ``simulate_iteration_time``, fp32).

    ``T = (m - 1) max_j (c_j + p_j) + sum_j p_j + sum_j c_j + max_j u_j + t_sync`` with
    ``c_j`` the stage's forward plus backward (slowest replica), ``u_j`` the
    profile's optimizer value at the stage's first layer, ``p_j`` its
    point-to-point estimate (activation out plus gradient in for a middle stage,
    twice the gradient for the last, the activation, or twice it beyond three
    stages, for the first; sizes from ``act_output_floats`` at TP 1, 4 bytes, times
    ``mbs``; curves keyed by ``min(tp, gpus_per_node)``), and ``t_sync`` the
    slowest stage's bucketed all-reduce of its weights divided by the smallest TP
    (at most 4) over ``dp`` replicas with the one-GPU curve.
    """
    plan = run.plan
    L, mbs = len(plan.stages), plan.microbatch_size
    m = math.ceil(plan.global_batch_size / (mbs * plan.dp[0]))
    p = prof[plan.model]
    i1 = info[plan.model]["1"]
    comp, upd, comm = [], [], []
    for j, st in enumerate(plan.stages):
        c = max(sum(p[r.gpu][str(mbs)][str(r.tp)][str(x)][0] + p[r.gpu][str(mbs)][str(r.tp)][str(x)][1]
                    for x in st.layers) for r in st.replicas)
        u = max(p[r.gpu][str(mbs)][str(r.tp)][str(st.layers[0])][2] for r in st.replicas)
        act = i1[str(st.layers[-1])]["act_output_floats"] * 4 * mbs
        grad = i1[str(st.layers[0])]["act_output_floats"] * 4 * mbs
        ta = tg = 0.0
        if j < L - 1:
            nxt = plan.stages[j + 1]
            for i, r in enumerate(st.replicas):
                q = nxt.replicas[i % len(nxt.replicas)]
                ta = max(ta, _sailor_send(bw, r.node, q.node, min(r.tp, r.gpus_per_node),
                                          min(q.tp, q.gpus_per_node), act))
        if j > 0:
            prv = plan.stages[j - 1]
            for i, r in enumerate(st.replicas):
                q = prv.replicas[i % len(prv.replicas)]
                tg = max(tg, _sailor_send(bw, r.node, q.node, min(r.tp, r.gpus_per_node),
                                          min(q.tp, q.gpus_per_node), grad))
        if 0 < j < L - 1:
            pj = ta + tg
        elif j == L - 1 and L > 1:
            pj = 2 * tg
        else:
            pj = ta if L <= 3 else 2 * ta
        comp.append(c)
        upd.append(u)
        comm.append(pj)
    t_pp = (m - 1) * max(c + q for c, q in zip(comp, comm, strict=True)) + sum(comm) + sum(comp) \
        + max(upd)
    sync = 0.0
    for st in plan.stages:
        tp_min = min([4] + [r.tp for r in st.replicas])
        size = sum(i1[str(x)]["params_floats"] * 4 / tp_min for x in st.layers)
        n = len(st.replicas)
        for i in range(n - 1):
            sync = max(sync, _sailor_ar(bw, st.replicas[i].node, st.replicas[i + 1].node, size, n))
    return t_pp + sync


def sailor_memory(run: MeasuredRun, info: dict) -> float:
    """Sailor's memory estimate (its ``get_memory_footprint_on_gpu``), the largest over GPUs."""
    plan = run.plan
    L = len(plan.stages)
    out = 0.0
    for j, st in enumerate(plan.stages):
        for r in st.replicas:
            t = info[plan.model][str(r.tp)]
            params = sum(t[str(x)]["params_floats"] for x in st.layers)
            act = sum(t[str(x)]["act_mem_floats"] for x in st.layers) * plan.microbatch_size * 4
            out = max(out, params * SAILOR_BYTES_PER_PARAM + act * (L - j) + SAILOR_OVERHEAD)
    return out


def allreduce_variants(build: Any) -> dict[str, float]:
    """Iteration time, in the closed form of the device programs, with the gradient all-reduce
    after every device has ended its program (``barrier``: the artifact's ``dist.barrier()``
    after the tied all-reduce) or each stage's when its own devices have ended theirs (no
    barrier, :func:`sim.analytic.placement.staged_step_end`: ``stage``, the tied all-reduce
    first as DeepSpeed's ``TrainSchedule`` in fp32; ``stage_megatron``, after it and the
    optimizer steps after every stage's reduction, as Megatron-LM's).
    A device's program ends with its last pass, or with blocking transfers the send of the last
    gradient after it. The all-reduce overlapped with the backward pass is an :data:`ABLATION`
    row, run by the DES (``--sync allreduce:overlap=backward``)."""
    c = build.config
    L, r, m = c.stages, c.replicas[0], c.microbatches
    blocking = c.p2p in ("blocking", "batched")
    batched = c.p2p == "batched"
    ends: list[list[float]] = [[] for _ in range(L)]
    ran: list[int] = []  # the pipelines that got micro-batches
    T = 0.0
    for k in range(r):
        mk = len(range(k, m, r))
        if mk == 0:
            continue
        ran.append(k)
        f = [c.replica_times[j][k][0] for j in range(L)]
        b = [c.replica_times[j][k][1] for j in range(L)]
        act = [row[k][0] for row in build.transfer_times]
        grad = [row[k][1] for row in build.transfer_times]
        # DeepSpeed 0.3.13's all-gather before each gradient receive, a command of its own
        gather = None if c.recv_gather_times is None else \
            [c.recv_gather_times[j][k] for j in range(L)]
        progs = [device_program(c.schedule, L, mk, j, blocking=blocking, batched=batched,
                                recv_gather=gather is not None) for j in range(L)]
        e: list[float] = []
        T = max(T, program_makespan(progs, f, b, act, grad, blocking=blocking,
                                    channels=c.p2p == "overlap", ends=e, gather=gather))
        for j in range(L):
            ends[j].append(e[j])
    ar, opt, tied = build.allreduce_times, build.optimizer_times, build.tied_allreduce_time
    each = pipelines_tied(build.tied_allreduce_times, tied, ran)  # per pipeline: its own ring
    return {"barrier": T + barrier_tail(ar, opt, tied,
                                        optimizer_barrier=c.optimizer_barrier)[0],
            "stage": staged_step_end(ends, ar, opt, each, tied_first=True),
            "stage_megatron": staged_step_end(ends, ar, opt, each, tied_first=False,
                                              optimizer_barrier=True)}


#: The ablation: each option of the model against the run's framework's default (sailor-deepspeed
#: for the artifact's runs), one at a time: (name, what it changes, build_plan keywords, hosts).
ABLATION: tuple[tuple[str, str, dict[str, Any], bool], ...] = (
    ("p2p_overlap", "point-to-point on a communication stream (overlapped: FIFO channels) "
     "instead of blocking", {"p2p": "overlap"}, False),
    ("p2p_shared", "point-to-point overlapped, each transfer on a connection of its own sharing "
     "links max-min (no framework's: the model the channels replaced)", {"p2p": "shared"}, False),
    ("framework_deepspeed", "upstream DeepSpeed 0.16.5 (1 + 2 all-gathers per boundary, no "
     "barrier: each stage's tied and data-parallel all-reduce when its own program ends) "
     "instead of the artifact's modified engine", {"framework": "deepspeed"}, False),
    ("framework_megatron", "Megatron-LM's schedules (its 1F1B order with batched send/receive "
     "pairs; each TP rank sends the whole tensor, no all-gather; no barrier, the tied "
     "all-reduce after the data-parallel one)", {"framework": "megatron"}, False),
    ("framework_megatron_ds_order", "Megatron-LM in DeepSpeed's TrainSchedule order of separate "
     "blocking sends and receives (--p2p blocking: the model before its order was built)",
     {"framework": "megatron", "p2p": "blocking"}, False),
    ("framework_megatron_overlap", "Megatron-LM with overlap_grad_reduce (its all-reduce in "
     "buckets of max(4e7, 1e6 dp) elements as the last backward pass produces them)",
     {"framework": ("megatron", (("overlap_grad_reduce", True),))}, False),
    ("framework_deepspeed_0313", "DeepSpeed 0.3.13 with Megatron-LM v1.1.5's GPT2ModelPipe "
     "(its TrainSchedule order, the gradient whole from every TP rank, one all-gather per "
     "pass, and with every activation the 1 x 1 x 2048 x 2048 attention mask in fp16, 8 MiB, "
     "whole from every TP rank: the runs' --seq-length 2048, eth-easl/sailor "
     "sailor/Worker/run_agent.sh:59) instead of the artifact's engine",
     {"framework": ("deepspeed", (("seq_length", 2048),), "0.3.13")}, False),
    ("allreduce_overlap", "the artifact's DeepSpeed with its all-reduce overlapped with the last "
     "backward pass (--sync allreduce:overlap=backward: Megatron-LM's buckets)",
     {"sync": "allreduce:overlap=backward"}, False),
    ("tp_derived", "TP > 1 layer times derived from the TP-1 profile instead of the profiled",
     {"tensor_parallel": "derived"}, False),
    ("value_sizes_profile", "every collective at the profile's bytes per value instead of the "
     "framework's", {"value_sizes": "profile"}, False),
    ("physical_nodes", "each replica on a named host: the physical-node network instead of the "
     "pair curves", {}, True),
)


def _hosted(plan: Any) -> Any:
    """``plan`` with every replica on a host of its own (the artifact's one node per replica)."""
    from dataclasses import replace

    from sim.profiles import StageSpec

    return replace(plan, stages=tuple(
        StageSpec(st.layers, tuple(replace(r, host=f"s{j}r{i}") for i, r in
                                   enumerate(st.replicas))) for j, st in enumerate(plan.stages)))


def rows(folder: Path | None = None, ablation: bool = True) -> list[dict[str, Any]]:
    """One row per run: measured, dtsim and Sailor time and memory, and the model variants
    (:data:`ABLATION`, and the all-reduce placements of :func:`allreduce_variants`)."""
    from sim.profiles.frameworks import FrameworkSpec

    d = folder if folder is not None else DATA_DIR
    runs = read_runs(d)
    models = tuple(sorted({r.plan.model for r in runs}))  # type: ignore[type-var]
    prof = load_profiles(d, models=models)
    raw_p = json.loads((d / "profiles.json").read_text())
    raw_i = json.loads((d / "llm_info.json").read_text())
    raw_b = json.loads((d / "bandwidths.json").read_text())
    out = []
    for run in runs:
        row: dict[str, Any] = {"run": run.name, "cluster": run.name.split("-")[0],
                               "measured_time": run.iteration_time,
                               "measured_memory": run.peak_memory}
        b = build_plan(run.plan, prof, steps=1, check_memory=False, network=True)
        t = training_model(b.config, Streams(0).replication(0))["step_time_mean"]
        closed = build_plan(run.plan, prof, steps=1, check_memory=False)
        row["dtsim_time"] = t
        row["closed_form_time"] = predictions("training", closed.config)["step_time_mean"]["value"]
        row["dtsim_memory"] = b.peak_memory
        row["framework"] = b.behaviour.framework.key
        row["framework_version"] = b.behaviour.framework.versions[0]  # the release's table
        row["estimates"] = list(b.estimates)
        row.update({f"allreduce_{k}": v for k, v in allreduce_variants(closed).items()})
        for name, _, kw, hosted in ABLATION if ablation else ():
            kw = dict(kw)
            if "framework" in kw:
                fw = kw["framework"]
                kw["framework"] = (FrameworkSpec(fw) if isinstance(fw, str)
                                   else FrameworkSpec(fw[0], *fw[2:], options=fw[1]))
            plan = _hosted(run.plan) if hosted else run.plan
            v = build_plan(plan, prof, steps=1, check_memory=False, network=True, **kw)
            row[f"ablation_{name}"] = training_model(v.config,
                                                     Streams(0).replication(0))["step_time_mean"]
            # its closed form (transfers and all-reduces as their times, no contention): the
            # exact column of dtsim train --plan, overlapped all-reduces included (issue 35)
            w = build_plan(plan, prof, steps=1, check_memory=False, **kw)
            row[f"closed_{name}"] = predictions("training", w.config)["step_time_mean"]["value"]
        row["sailor_time"] = sailor_time(run, raw_p, raw_i, raw_b)
        row["sailor_memory"] = sailor_memory(run, raw_i)
        out.append(row)
    return out


def _err(pred: float, real: float | None) -> float:
    return math.nan if real is None else (pred - real) / real


def summary(rs: list[dict[str, Any]], key: str, real: str) -> dict[str, dict[str, float]]:
    """Mean and worst absolute relative error of ``key`` against ``real``, per cluster and all."""
    out: dict[str, dict[str, float]] = {}
    for cl in sorted({r["cluster"] for r in rs}) + ["all"]:
        errs = [abs(_err(r[key], r[real])) for r in rs if cl in ("all", r["cluster"])
                and r[real] is not None]
        out[cl] = {"mean": sum(errs) / len(errs), "worst": max(errs), "runs": len(errs)}
    return out


def _sailor_plan(model_layers: int, stages: int, reps: list[tuple[str, int, str]], tp: int,
                 mbs: int, gbs: int, per_stage: bool = False) -> dict[str, Any]:
    """A run file in the artifact's format (``plan_config``): ``reps`` the replicas of every
    stage (one node kind each), or with ``per_stage`` one node kind per stage (one replica).
    (Before ``per_stage`` was explicit, a list of as many replicas as stages was read as one
    kind per stage: the 2-stage, 2-replica plans were written with one replica.)"""
    if per_stage and len(reps) != stages:
        raise ValueError(f"one node kind per stage: {len(reps)} kinds for {stages} stages")
    per, cut = model_layers // stages, []
    start = 0
    for j in range(stages):
        end = model_layers if j == stages - 1 else start + per
        cut.append(list(range(start, end)))
        start = end
    tmp = []
    for j in range(stages):
        kinds = [reps[j]] if per_stage else reps
        tmp.append([[[list(k)], tp] for k in kinds])
    return {"zone": reps[0][2], "pipeline_list": [{"num_stages": stages, "layers_per_stage": cut,
            "tmp_per_stage": tmp, "dp": [len(tmp[0])] * stages}], "mbs": mbs, "gbs": gbs}


def user_plans(folder: Path | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """Plans a user can write from the shipped profiles, in the artifact's format: every model
    with sizes, on every GPU type it was profiled on, at every profiled micro-batch size and TP
    degree and at unprofiled sizes between them (3, 6, 12, 24), in 1, 2 and 4 stages of 1 or 2
    replicas on nodes of the GPU type's zone (the largest node the network measured it in, or
    the TP degree's if larger), 8 micro-batches per pipeline; two-type pipelines of the mixed
    cluster's GPUs; and stages whose two replicas differ in TP degree (one stage, or the middle
    of three), at the smallest size profiled at the smaller degree."""
    d = folder if folder is not None else DATA_DIR
    prof = load_profiles(d)
    kinds: dict[str, tuple[int, str]] = {}
    for lk in prof.network.links:
        (g, z), (g2, z2) = lk.src, lk.dst
        if g == g2 and z == z2:
            n, zone = kinds.get(g, (0, z))
            if zone == z:
                kinds[g] = (max(n, lk.src_flows), zone)
    out = []
    for m in prof.models:
        for gpu in m.gpus:
            if gpu not in kinds:
                continue
            gpn, zone = kinds[gpu]
            combos = set(m.combinations(gpu))
            tps = sorted({t for (_, _, t) in combos})
            for tp in tps:
                # a TP group larger than the node the network measured is on a node of its own
                # size: its flows share the largest measured count's curve (an estimate)
                nodes = max(gpn, tp)
                sizes = sorted({b for (_, b, t) in combos if t == tp})
                for b in sorted(set(sizes) | {x for x in (3, 6, 12, 24) if sizes[0] < x < sizes[-1]}):
                    for stages in (1, 2, 4):
                        for dp in (1, 2):
                            doc = _sailor_plan(m.layers, stages, [(gpu, nodes, zone)] * dp, tp, b,
                                               8 * b * dp)
                            out.append((f"{m.name}-{gpu}-tp{tp}-mbs{b}-S{stages}-D{dp}", m.name,
                                        doc))
    mixed = [g for g in ("RTX-3090", "Titan-RTX", "RTX-2080") if g in kinds]
    for m in prof.models:
        for a in mixed:
            for z in mixed:
                if a == z or not (m.has(a, 2, 2) and m.has(z, 2, 2)):
                    continue
                doc = _sailor_plan(m.layers, 2, [(a, 2, kinds[a][1]), (z, 2, kinds[z][1])], 2, 2,
                                   16, per_stage=True)
                out.append((f"{m.name}-{a}-{z}-tp2-mbs2-S2", m.name, doc))
    # a stage whose two replicas differ in TP degree (the artifact's data-parallel groups): one
    # stage, or three whose middle one mixes (the ends one degree: the models tie embeddings);
    # on the node kinds whose network has curves between nodes of different sizes (the GCP
    # clusters': the mixed cluster measured equal counts only, so a link between a TP-1 and a
    # TP-4 replica there is refused naming the missing curve, as a hop between such stages is)
    unequal = {lk.src[0] for lk in prof.network.links
               if lk.src == lk.dst and lk.src_flows != lk.dst_flows}
    for m in prof.models:
        for gpu in m.gpus:
            if gpu not in kinds or gpu not in unequal:
                continue
            gpn, zone = kinds[gpu]
            combos = set(m.combinations(gpu))
            tps = sorted({t for (_, _, t) in combos if t <= gpn})
            have = {(lk.src_flows, lk.dst_flows) for lk in prof.network.links
                    if lk.src == lk.dst == (gpu, zone)}
            for lo in tps:
                for hi in (t for t in tps if t > lo and t % lo == 0 and (lo, t) in have):
                    b = min(x for (_, x, t) in combos if t == lo)
                    for stages in (1, 3):
                        doc = _sailor_plan(m.layers, stages, [(gpu, gpn, zone)] * 2, lo, b,
                                           16 * b)
                        doc["pipeline_list"][0]["tmp_per_stage"][stages // 2][1][1] = hi
                        out.append((f"{m.name}-{gpu}-tp{lo}+{hi}-mbs{b}-S{stages}-D2", m.name,
                                    doc))
    return out


def check_user_plans(folder: Path | None = None, limit: int | None = None) -> dict[str, Any]:
    """Write every :func:`user_plans` plan to a file in the artifact's format, read it back and
    run it as ``dtsim train --plan`` does (the DES over sim.network, one step); count the plans
    that ran, those refused for memory (a plan that does not fit is not a valid plan), those
    refused for a TP degree the artifact does not run (its Megatron-DeepSpeed asserts 1, 2 or
    4: the profiles' TP-8 entries), and any other refusal or error (there should be none)."""
    import tempfile

    from sim.errors import ConfigError
    from sim.profiles import read_plan

    d = folder if folder is not None else DATA_DIR
    prof = load_profiles(d)
    ran, memory, tp, refused, estimated = 0, 0, 0, [], 0
    plans = user_plans(d)[:limit]
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, doc in plans:
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(doc))
            try:
                plan = read_plan(path, model)
                b = build_plan(plan, prof, model=model, steps=1, network=True)
                t = training_model(b.config, Streams(0).replication(0))["step_time_mean"]
                if not (t > 0 and math.isfinite(t)):
                    refused.append((name, f"step time {t}"))
                    continue
                ran += 1
                estimated += bool(b.estimates)
            except ConfigError as exc:
                if exc.name == "plan" and "fits in GPU memory" in exc.rule:
                    memory += 1
                elif exc.name == "tp" and "with framework sailor-deepspeed" in exc.rule:
                    tp += 1
                else:
                    refused.append((name, str(exc)))
    return {"plans": len(plans), "ran": ran, "with_estimates": estimated,
            "refused_memory": memory, "refused_tp": tp, "refused_other": refused}


def tp_check(folder: Path | None = None) -> list[dict[str, Any]]:
    """Derived TP against the profiled: for every profiled ``(model, GPU, mbs, TP > 1)`` with a
    TP-1 profile at that ``mbs``, the model's forward plus backward time summed over its layers,
    derived from TP 1 (:mod:`sim.profiles.estimates`) over the measured intra-node curves and
    over the catalogue's datasheet bandwidth, against the profiled; per GPU type and TP, the
    mean signed and absolute error and the range. A check of the rule: nothing is fitted."""
    from dataclasses import replace

    from sim.profiles.estimates import Estimator

    d = folder if folder is not None else DATA_DIR
    prof = load_profiles(d)
    sources = {"measured intra-node curves": prof, "catalogue datasheet": replace(
        prof, intra_node=())}
    acc: dict[tuple[str, str, int], list[float]] = {}
    for src, p in sources.items():
        for m in p.models:
            est = Estimator(p, m, tensor_parallel="derived")
            for (g, b, t) in m.combinations():
                if t == 1 or not m.has(g, b, 1):
                    continue
                rows_, _ = est.layer_times(g, b, t)
                got = sum(x.forward + x.backward for x in rows_)
                want = sum(x.forward + x.backward for x in m.layer_times(g, b, t))
                acc.setdefault((src, g, t), []).append((got - want) / want)
    return [{"intra": src, "gpu": g, "tp": t, "n": len(e), "mean": sum(e) / len(e),
             "mean_abs": sum(map(abs, e)) / len(e), "low": min(e), "high": max(e)}
            for (src, g, t), e in sorted(acc.items())]


def rule_checks(folder: Path | None = None) -> dict[str, Any]:
    """The other estimation rules against what the profiles measured (checks, nothing fitted):
    each profiled micro-batch size left out and estimated from the others (interpolated or
    extrapolated); the backward pass of the transformer layers at TP 1 against twice the forward
    (the FLOP rule); and the physical-node decomposition of the network curves, ``min(k B_1(a,a),
    B_g(a,a), B_g(a,b), B_g(b,b), k B_1(b,b))`` against the measured ``B_k(a,b)`` at 8 MB."""
    from dataclasses import replace

    from sim.errors import ConfigError
    from sim.profiles.estimates import Estimator

    d = folder if folder is not None else DATA_DIR
    prof = load_profiles(d)
    mbs: dict[tuple[str, str], list[float]] = {}
    back: dict[str, list[float]] = {}
    for m in prof.models:
        for key in m.combinations():
            g, b, t = key
            rest = tuple((k, r) for k, r in m.times if k != key)
            if not any(k[0] == g and k[2] == t for k, _ in rest):
                continue
            try:
                est, notes = Estimator(prof, replace(m, times=rest)).layer_times(g, b, t)
            except ConfigError:
                continue
            meas = m.layer_times(g, b, t)
            got = sum(x.forward + x.backward for x in est)
            want = sum(x.forward + x.backward for x in meas)
            how = "interpolated" if "interpolated" in notes[-1] else "extrapolated"
            mbs.setdefault((g, how), []).append((got - want) / want)
            if t == 1:
                f = sum(x.forward for x in meas[1:-1])
                back.setdefault(g, []).append(sum(x.backward for x in meas[1:-1]) / f)
    net = prof.network
    dec: list[float] = []
    size = 8e6
    for lk in net.links:
        (ga, za), (gb, zb) = lk.src, lk.dst
        k = lk.src_flows
        if k != lk.dst_flows:
            continue
        try:
            a_counts = net.flow_counts((ga, za), (ga, za))
            b_counts = net.flow_counts((gb, zb), (gb, zb))
            ab = net.flow_counts((ga, za), (gb, zb))
            b1a = _cap(net, (ga, za), (ga, za), 1, size)
            b1b = _cap(net, (gb, zb), (gb, zb), 1, size)
            nga = _cap(net, (ga, za), (ga, za), max(a_counts), size)
            ngb = _cap(net, (gb, zb), (gb, zb), max(b_counts), size)
            pab = _cap(net, (ga, za), (gb, zb), max(ab), size)
        except (ConfigError, ValueError):
            continue
        pred = min(k * b1a, nga, pab, ngb, k * b1b)
        dec.append((pred - _cap(net, (ga, za), (gb, zb), k, size)) / _cap(net, (ga, za),
                                                                           (gb, zb), k, size))

    def stats(e: list[float]) -> dict[str, float]:
        return {"n": len(e), "mean_abs": sum(map(abs, e)) / len(e), "worst": max(map(abs, e))}

    return {"microbatch": {f"{g} {how}": stats(e) for (g, how), e in sorted(mbs.items())},
            "backward_over_forward": {g: {"n": len(r), "mean": sum(r) / len(r), "low": min(r),
                                          "high": max(r)} for g, r in sorted(back.items())},
            "node_decomposition": stats(dec)}


def _cap(net: Any, src: tuple[str, str], dst: tuple[str, str], k: int, size: float) -> float:
    from sim.network.curves import bandwidth_at
    from sim.profiles import NodeKind

    return bandwidth_at(net.link(NodeKind(src[0], k, src[1]), NodeKind(dst[0], k, dst[1]), k,
                                 k).bandwidth, size)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=Path, default=None, help="profiles folder with runs/")
    ap.add_argument("--json", action="store_true", help="print the rows and summaries as JSON")
    ap.add_argument("--checks", action="store_true",
                    help="instead: the estimation rules against the profiles (derived TP per "
                         "GPU type, micro-batch sizes left out, backward / forward, the "
                         "physical-node decomposition of the curves)")
    ap.add_argument("--user-plans", action="store_true",
                    help="instead: write every plan a user can write from the profiles (other "
                         "models, micro-batch sizes, TP degrees) and run each")
    a = ap.parse_args(argv)
    if a.checks:
        res = {"tp": tp_check(a.profiles), **rule_checks(a.profiles)}
        if a.json:
            print(json.dumps(res, indent=1))
            return 0
        print("| TP over | GPU | TP | n | mean | mean abs | range |")
        print("|---|---|---:|---:|---:|---:|---|")
        for r in res["tp"]:
            print(f"| {r['intra']} | {r['gpu']} | {r['tp']} | {r['n']} | {100 * r['mean']:+.1f}% | "
                  f"{100 * r['mean_abs']:.1f}% | {100 * r['low']:+.0f}% .. {100 * r['high']:+.0f}% |")
        print()
        for k, v in res["microbatch"].items():
            print(f"micro-batch {k}: n={v['n']} mean |e| {100 * v['mean_abs']:.1f}%, worst "
                  f"{100 * v['worst']:.0f}%")
        for k, v in res["backward_over_forward"].items():
            print(f"backward / forward {k}: mean {v['mean']:.2f} ({v['low']:.2f}..{v['high']:.2f})")
        v = res["node_decomposition"]
        print(f"physical-node decomposition of {v['n']} curves at 8 MB: mean |e| "
              f"{100 * v['mean_abs']:.1f}%, worst {100 * v['worst']:.0f}%")
        return 0
    if a.user_plans:
        res = check_user_plans(a.profiles)
        print(json.dumps(res, indent=1) if a.json else
              f"{res['plans']} plans: {res['ran']} ran ({res['with_estimates']} with estimated "
              f"times), {res['refused_memory']} refused as not fitting in GPU memory, "
              f"{res['refused_tp']} for a TP degree the Sailor artifact does not run (1, 2, 4), "
              f"{len(res['refused_other'])} refused otherwise")
        for name, why in res["refused_other"]:
            print(f"  {name}: {why}")
        return 1 if res["refused_other"] else 0
    rs = rows(a.profiles)
    summ = {k: summary(rs, k, "measured_time") for k in
            ("dtsim_time", "sailor_time", "allreduce_barrier", "allreduce_stage",
             "allreduce_stage_megatron",
             *(f"ablation_{n}" for n, *_ in ABLATION))}
    summ.update({k: summary(rs, k, "measured_memory") for k in ("dtsim_memory", "sailor_memory")})
    if a.json:
        json.dump({"rows": rs, "summary": summ}, sys.stdout, indent=1)
        print()
        return 0
    print("| run | measured (s) | dtsim (s) | error | Sailor (s) | error | measured (GB) "
          "| dtsim (GB) | error | Sailor (GB) | error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        mt, mm = r["measured_time"], r["measured_memory"]
        print(f"| {r['run']} | {mt:.4g} | {r['dtsim_time']:.4g} | "
              f"{100 * _err(r['dtsim_time'], mt):+.1f}% | {r['sailor_time']:.4g} | "
              f"{100 * _err(r['sailor_time'], mt):+.1f}% | {mm / 1e9:.2f} | "
              f"{r['dtsim_memory'] / 1e9:.2f} | {100 * _err(r['dtsim_memory'], mm):+.1f}% | "
              f"{r['sailor_memory'] / 1e9:.2f} | {100 * _err(r['sailor_memory'], mm):+.1f}% |")
    if any(f"closed_{n}" in r for r in rs for n, *_ in ABLATION):
        print()
        print("| option | runs with a closed form | DES vs closed form: mean relative gap "
              "| worst |")
        print("|---|---:|---:|---:|")
        for n, *_ in ABLATION:
            gaps = [abs(r[f"ablation_{n}"] - r[f"closed_{n}"]) / r[f"closed_{n}"] for r in rs
                    if r.get(f"closed_{n}") is not None]
            if gaps:
                print(f"| {n} | {len(gaps)} | {sum(gaps) / len(gaps):.1e} | {max(gaps):.1e} |")
    print()
    print("| prediction | cluster | runs | mean error | worst error |")
    print("|---|---|---:|---:|---:|")
    for k, per in summ.items():
        for cl, s in per.items():
            print(f"| {k} | {cl} | {s['runs']} | {100 * s['mean']:.1f}% | {100 * s['worst']:.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
