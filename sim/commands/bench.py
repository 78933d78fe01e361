"""``dtsim bench``: every performance figure of one run, side by side, with ratios to SimPy."""

from __future__ import annotations

import argparse
import math
import os
import sys

from ..bench import (
    MATCHING_SIZES,
    PARTS,
    append_jsonl,
    check_targets,
    is_bench_history,
    peersim_skip_reason,
    run_bench,
)
from ..errors import check, check_replaceable, one_line
from ._common import emit_json, print_table

NAME = "bench"
HELP = "measure simulator speed and memory side by side (ratios to a bare SimPy loop)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="smaller sizes (the whole suite in under 3 minutes)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--out", default="out/bench.jsonl", metavar="FILE",
                   help="append the run as one JSON line to FILE (default out/bench.jsonl; "
                        "'-' to skip); an existing FILE must be a bench history (its first line "
                        "a run's)")
    p.add_argument("--parts", default=None, metavar="LIST",
                   help="comma-separated subset of " + ",".join(PARTS) + " (simpy always runs)")
    p.add_argument("--peersim", default=None, metavar="DIR",
                   help="PeerSim 1.0.5 source tree or git repository: the peersim part builds it "
                        "with javac (benchmarks/peersim.sh) and times it next to dtsim's compiled "
                        "edge and async engines (without it that part is skipped)")


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
            return f"{v:.3g}"
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:.1f}"
    return "-" if v is None else str(v)


def _rows(res: dict) -> list[tuple[str, ...]]:
    y = res.get("simpy_timeouts_per_s")
    rows: list[tuple[str, ...]] = []

    def add(label: str, key: str, unit: str, ratio_key: str | None = None) -> None:
        if key not in res:
            return
        ratio = res.get(ratio_key) if ratio_key else None
        rows.append((label, _fmt(res[key]), unit, _fmt(ratio) if ratio is not None else ""))

    add("(a) bare SimPy timeouts", "simpy_timeouts_per_s", "/s", None)
    if y:
        rows[-1] = rows[-1][:3] + ("1",)
    add("(b) pipeline DES stage crossings", "pipeline_crossings_per_s", "/s",
        "pipeline_crossings_per_timeout")
    add("(c) async gossip exchanges", "async_exchanges_per_s", "/s", "async_exchanges_per_timeout")
    for n in MATCHING_SIZES:
        add(f"(d) matching gossip updates n={n:g}", f"matching_updates_per_s_n{n}", "/s",
            f"matching_updates_per_timeout_n{n}")
        add(f"    bare numpy permute-average n={n:g}", f"numpy_updates_per_s_n{n}", "/s",
            f"numpy_updates_per_timeout_n{n}")
        add(f"    matching round n={n:g}", f"matching_round_ms_n{n}", "ms")
        add(f"    matching / numpy n={n:g}", f"matching_vs_numpy_n{n}", "x")
    add("(e) stylised vector trials", "stylised_trials_per_s", "/s", "stylised_trials_per_timeout")
    add("(f) IS time to 10% at p=1.65e-9", "rare_seconds", "s")
    add("    IS samples used", "rare_samples", "")
    add("    plain MC samples for the same error", "rare_naive_samples", "")
    add("    shared racks, stratified: time at p=8.1e-9", "rare_shared_seconds", "s")
    add("(g) serial, 20 tasks", "sweep_serial_s", "s")
    add("    runner, 2 local workers: speedup", "sweep_local_speedup", "x")
    add("    plain ProcessPoolExecutor: speedup", "sweep_plain_pool_speedup", "x")
    add("    runner / plain (local)", "sweep_local_vs_plain", "x")
    add("    runner, 2-worker Dask: speedup", "sweep_dask_speedup", "x")
    add("    plain Dask submission: speedup", "sweep_plain_dask_speedup", "x")
    add("    runner / plain (Dask)", "sweep_dask_vs_plain", "x")
    add("(h) peak RSS, interpreter + sim", "mem_baseline_mib", "MiB")
    add("    peak RSS, 1e5-node async gossip", "mem_async_gossip_peak_mib", "MiB")
    add("    peak RSS, pipeline 1e4 microbatches", "mem_pipeline_small_peak_mib", "MiB")
    add("    peak RSS, pipeline 1e6 microbatches", "mem_pipeline_large_peak_mib", "MiB")
    add("    growth 1e4 -> 1e6 microbatches", "mem_pipeline_growth_mib", "MiB")
    add("    traced peak, pipeline 1e4 microbatches", "mem_pipeline_traced_small_mib", "MiB")
    if "mem_pipeline_traced_large_microbatches" in res:
        n = res["mem_pipeline_traced_large_microbatches"]
        add(f"    traced peak, pipeline {n:.0e} microbatches", "mem_pipeline_traced_large_mib", "MiB")
    for key in sorted(k for k in res if k.startswith("mem_compiled_h") and k.endswith("_mib")):
        h = key[len("mem_compiled_h"):-len("_mib")]
        add(f"    peak RSS, compiled n=1e5 async, horizon {h}", key, "MiB")
    add("    compiled RSS, long / short horizon", "mem_compiled_horizon_ratio", "x")
    add("(i) C reference loop, async, no latency", "c_async_per_s", "/s")
    add("    compiled async gossip, no latency", "compiled_async_per_s", "/s")
    add("    compiled / C, no latency", "compiled_vs_c", "x")
    add("    C reference loop, latency 1", "c_async_latency_per_s", "/s")
    add("    compiled async gossip, latency 1", "compiled_async_latency_per_s", "/s")
    add("    compiled / C, latency 1", "compiled_vs_c_latency", "x")
    add("    peak RSS, compiled n=1e6 latency + churn", "mem_compiled_big_peak_mib", "MiB")
    add("    exchanges of that run", "mem_compiled_big_exchanges", "")
    add("(j) high-flip pipeline, DES crossings", "highflip_des_crossings_per_s", "/s")
    add("    high-flip pipeline, markov crossings", "highflip_markov_crossings_per_s", "/s")
    add("    markov / DES", "highflip_markov_vs_des", "x")
    add("(k) contended training passes, DES", "training_passes_per_s", "/s",
        "training_passes_per_timeout")
    add("    contended training passes, compiled", "compiled_training_passes_per_s", "/s",
        "compiled_training_passes_per_timeout")
    add("    compiled / DES", "compiled_training_vs_des", "x")
    add("    scale point (compiled, 48x8, steps)", "training_scale_steps", "")
    add("    scale point wall time", "training_scale_seconds", "s")
    add("    scale point CPU time", "training_scale_cpu_seconds", "s")
    add("    scale point peak RSS", "training_scale_peak_mib", "MiB")
    add("(p) real plans simulated (DES, one iteration)", "plans_simulated_per_s", "/s",
        "plans_simulated_per_timeout")
    add("    real plans evaluated exactly (max-plus)", "plans_exact_per_s", "/s")
    if "planner_seconds" in res:
        add(f"(q) dtsim plan, {res.get('planner_gpus', 0):g}-GPU mixed fleet: search CPU time",
            "planner_seconds", "s")
        add("    plans ranked (closed form) per CPU second", "planner_plans_per_s", "/s")
        add("    plans ranked", "planner_plans", "")
    if "learners_events_per_s" in res:
        add(f"(s) DiLoCo learners, {res.get('learners_chips', 0):g} chips, "
            f"{res.get('learners_days', 0):g} simulated days: events", "learners_events_per_s",
            "/s")
        add("    that run: wall time", "learners_seconds", "s")
        add("    that run: CPU time", "learners_cpu_seconds", "s")
        add("    that run: peak RSS", "learners_peak_mib", "MiB")
        add("    that run: goodput", "learners_goodput", "")
    add("(l) async gossip training, per local step", "async_training_us_per_local_step", "us")
    add("    compiled engine, per local step", "async_training_compiled_us_per_local_step", "us")
    for key in sorted(k for k in res if k.startswith("recording_edge_ratio_n")):
        n = int(key.rsplit("_n", 1)[1])
        add(f"(m) edge n={n:g}: default records / none", key, "x")
    add("    async n=1e4: default records / none", "recording_async_ratio", "x")
    if "peersim_skipped" in res:
        rows.append(("(n) PeerSim side by side", f"skipped: {res['peersim_skipped']}", "", ""))
    for n in (100_000, 1_000_000):
        add(f"(n) PeerSim cycle-driven averaging n={n:g}", f"peersim_cycle_per_s_n{n}", "/s")
        add(f"    dtsim compiled edge n={n:g}", f"dtsim_edge_per_s_n{n}", "/s")
        add(f"    dtsim / PeerSim n={n:g}", f"edge_vs_peersim_n{n}", "x")
    add("    PeerSim event-driven averaging n=1e4", "peersim_event_per_s", "/s")
    add("    dtsim compiled async n=1e4", "dtsim_async_per_s", "/s")
    add("    dtsim / PeerSim, no delay", "async_vs_peersim", "x")
    add("    PeerSim event-driven, delay 10% of a cycle", "peersim_event_delay_per_s", "/s")
    add("    dtsim compiled async, latency 0.1", "dtsim_async_delay_per_s", "/s")
    add("    dtsim / PeerSim, delay", "async_delay_vs_peersim", "x")
    if "network_flows_per_s" in res:
        n, h = res.get("network_flows", 0), res.get("network_hosts", 0)
        add(f"(o) network, {n:g} flows on a {h:g}-host tree, dtsim "
            f"({res.get('network_engine', '')})", "network_flows_per_s", "flows/s")
        add("    SimGrid 3.32 CM02, same flows, same run", "simgrid_flows_per_s", "flows/s")
        add("    dtsim / SimGrid", "network_vs_simgrid", "x")
        add("    largest relative difference of finish times", "network_simgrid_max_rel_error", "")
        add("    dtsim route lookups (not in the rate)", "network_route_seconds", "s")
        add("    training DES passes, contention on", "training_contention_passes_per_s", "/s")
        add("    training DES passes, contention off", "training_no_contention_passes_per_s", "/s")
        add("    async gossip DES exchanges, contention on", "gossip_contention_exchanges_per_s",
            "/s")
        add("    async gossip DES exchanges, contention off",
            "gossip_no_contention_exchanges_per_s", "/s")
    if "timeline_ratio_bench" in res:
        add(f"(r) --timeline, training bench run ({res.get('timeline_events_bench', 0):.3g} "
            "events): recorded + file / plain", "timeline_ratio_bench", "x")
        add(f"    1F1B run ({res.get('timeline_events_1f1b', 0):.3g} events)",
            "timeline_ratio_1f1b", "x")
    return rows


def run(args: argparse.Namespace) -> int:
    parts = None
    if args.parts is not None:
        parts = [p.strip() for p in args.parts.split(",") if p.strip()]
        check(bool(parts), "parts", "a comma-separated list of names from " + ", ".join(PARTS),
              args.parts)
        for p in parts:
            check(p in PARTS, "parts", "names from " + ", ".join(PARTS), p)
    if args.peersim is not None:  # before the benchmark runs, never a silently ignored flag
        check(parts is None or "peersim" in parts, "peersim",
              "given only with the peersim part in --parts", args.peersim)
        check(os.path.isdir(args.peersim), "peersim",
              "a PeerSim 1.0.5 source directory or git repository", args.peersim)
        why = peersim_skip_reason(args.peersim)
        check(why is None, "peersim", f"given only where the part can run ({why})", args.peersim)
    writes = bool(args.out) and args.out != "-"
    if writes:  # before the benchmark runs, not after
        # a file there is appended to only if it is a bench history (its first line a run's)
        check_replaceable("out", args.out, overwrite=False, ours=is_bench_history,
                          kind="a bench history", how="each run appends a line to it")

    def progress(part: str, seconds: float) -> None:
        if not args.json:
            print(f"  {part}: {seconds:.1f} s", file=sys.stderr, flush=True)

    res = run_bench(quick=args.quick, parts=parts, progress=progress, peersim=args.peersim)
    targets = check_targets(res)
    res["targets"] = targets
    write_error = None
    if writes:
        try:
            append_jsonl(args.out, res)
        except OSError as exc:  # print the results anyway; say why they were not appended
            write_error = one_line(exc)
    missed = [t for t in targets if t["met"] is False]
    status = 1 if missed else 0  # a missed target is a failed benchmark, for scripts and CI
    if args.json:
        emit_json(res)
        return max(_write_failed(args.out, write_error), status)
    print(f"dtsim bench{' --quick' if args.quick else ''}: {res['timestamp']}, commit "
          f"{res['commit'] or '?'}, {res['cpus']} cpus, python {res['python']}, "
          f"{res['total_seconds']:.0f} s")
    print_table(_rows(res), ("figure", "value", "unit", "per SimPy timeout"))
    print()
    trows = []
    for t in targets:
        met = {True: "yes", False: "NO", None: "not measured"}[t["met"]]
        trows.append((t["text"], _fmt(t["value"]), f"{t['op']} {t['target']:g}", met))
    print_table(trows, ("target", "measured", "wanted", "met"))
    errors = [(k, v) for k, v in res.items()
              if k in {f"{p}_error" for p in PARTS} | {"sweep_dask_error"}]
    for k, v in errors:
        print(f"{k}: {v}")
    if writes and write_error is None:
        print(f"appended to {args.out}")
    if missed:
        print(f"dtsim bench: {len(missed)} target(s) missed: "
              + ", ".join(t["key"] for t in missed) + " (exit status 1)", file=sys.stderr)
    return max(_write_failed(args.out, write_error), status)


def _write_failed(out: str, error: str | None) -> int:
    """Exit status after the results were printed: 1, with one line, if appending failed."""
    if error is None:
        return 0
    print(f"dtsim bench: error: could not append the results to {out}: {error}", file=sys.stderr)
    return 1
