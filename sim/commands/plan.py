"""``dtsim plan``: the best training plans for a model on a fleet, predicted and simulated.

Searches pipeline depth, layer partition, data-parallel width, TP degree and
micro-batch size (:mod:`sim.planner`); ranks every plan by the closed form
of its iteration time; simulates the best few in the training DES (the
engine of ``dtsim train --plan``), optionally under failures or a trace;
prints the table (or ``--json``) and writes the chosen plan, or ``--rank N``'s (``--out``, or
``--export-plan``, which never overwrites a file without ``--overwrite``), in the format
``dtsim train --plan`` reads.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import (
    ConfigError,
    ascii_float,
    ascii_int,
    check,
    check_choice,
    check_int,
    check_replaceable,
)
from ..planner import LAYOUTS, OBJECTIVES, PlanRequest
from ..profiles.formats import fleet_network, is_plan_text_file
from ._applies import refuse_unless
from ._common import (
    add_run_options,
    check_export_file,
    check_not_an_input,
    emit_json,
    fleet_joins_plan,
    print_table,
    warn,
    write_export,
)
from ._units import (
    PLAN_UNITS,
    TIME_HELP,
    TimeOption,
    UnlimitedTimeOption,
    given_line,
    units_object,
)
from .trace import (
    add_failure_trace_options,
    assumed_unit,
    failure_trace_option,
    print_unit_note,
    trace_workers,
)

NAME = "plan"
HELP = ("the best training plans for a model on a fleet: pipeline depth, layer cut, data "
        "parallelism, TP, micro-batch size; predicted and simulated time, memory, samples/s, "
        "samples/$")


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(ascii_int(p) for p in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or a comma list: {text!r}") from None


def _price(text: str) -> tuple[str, float]:
    gpu, sep, value = str(text).partition("=")
    try:
        if not sep or not gpu:
            raise ValueError
        return gpu, ascii_float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU=DOLLARS_PER_HOUR: {text!r}") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--model", required=True, help="model of the profiles (e.g. OPT-350)")
    a("--profiles", default=None, metavar="DIR",
      help="profiles folder (default: the shipped Sailor artifact data)")
    g = p.add_argument_group("fleet (exactly one)")
    g.add_argument("--nodes", default=None, metavar="SPEC",
                   help="GPU:GPUS_PER_NODExCOUNT[@ZONE],... e.g. GH-96:4x32@us-central1-a")
    g.add_argument("--fleet", default=None, metavar="FILE",
                   help="a fleet file (JSON/TOML: nodes, and links or the profiles' network)")
    g.add_argument("--fleet-from-runs", default=None, metavar="RUN[,RUN]",
                   help="the GPUs (types, counts, zones) shipped runs or run files used; their "
                        "global batch size is the default")
    a("--global-batch-size", type=int, default=None, metavar="GBS",
      help="samples per iteration (required unless --fleet-from-runs gives it)")
    a("--objective", default="time", help="one of " + ", ".join(OBJECTIVES) + " (default time)")
    a("--microbatch-sizes", type=_ints, default=None, metavar="B[,B]",
      help="micro-batch sizes to try (default: every measured one dividing the global batch; "
           "for a model given by its shape alone, the powers of two dividing it)")
    a("--tp", type=_ints, default=None, metavar="T[,T]",
      help="TP degrees to try (default all measured; a degree the profile did not measure is "
           "derived from its TP-1 rows, as dtsim train --plan derives it)")
    a("--max-stages", type=int, default=None, help="deepest pipeline to try")
    a("--layouts", default=",".join(LAYOUTS),
      help="stage (each stage one GPU type) and/or pipeline (each pipeline one type)")
    a("--max-price-per-hour", type=float, default=None, metavar="DOLLARS",
      help="only plans whose GPUs cost at most this per hour")
    a("--price", type=_price, action="append", default=None, metavar="GPU=DOLLARS",
      help="dollars per GPU-hour of a type (repeat; overrides the catalogue)")
    a("--memory-fraction", type=float, default=1.0,
      help="fraction of each GPU's usable memory a plan may fill (default 1)")
    a("--schedule", default="1f1b",
      help="pipeline schedule of the plans: 1f1b (as Megatron-LM and DeepSpeed run it, "
           "default) or gpipe (the fixed device programs a plan's network runs)")
    a("--p2p", default=None,
      help="point-to-point transfers: blocking (DeepSpeed's paired send/receive in its "
           "TrainSchedule order), batched (Megatron-LM's 1F1B with its batched send/receive "
           "pairs; --schedule 1f1b) or overlap, overriding the framework's (default: the "
           "framework's)")
    a("--framework", default=None, metavar="NAME[:key=value,...]",
      help="the framework the plans run on (deepspeed, sailor-deepspeed, megatron, ddp: "
           "sim/profiles/frameworks.py; default: the runs' with --fleet-from-runs, else "
           "deepspeed), with a plan file's framework keys: version, precision and the "
           "framework's options, e.g. megatron:precision=bf16,overlap_grad_reduce=true; the "
           "written plan names it")
    a("--top", type=int, default=10, help="plans in the table (default 10)")
    a("--simulate", type=int, default=3, metavar="K",
      help="simulate the best K plans in the DES (default 3; 0: none)")
    a("--steps", type=int, default=3, help="iterations each simulation runs (default 3)")
    a("--compare-runs", action="store_true",
      help="with --fleet-from-runs: also predict and simulate the runs' own plans, beside "
           "their measured times")
    a("--out", default=None, metavar="FILE",
      help="write the chosen plan (JSON) for dtsim train --plan (an existing FILE is "
           "replaced only if it is a plan dtsim wrote, or with --overwrite; --export-plan "
           "writes the same and replaces no existing file without --overwrite)")
    a("--export-plan", default=None, metavar="FILE",
      help="write the chosen plan (or --rank N's) to FILE in dtsim's JSON plan format, the "
           "plan of --json's plans, as --out does; an existing FILE is refused unless "
           "--overwrite")
    a("--overwrite", action="store_true",
      help="with --out or --export-plan: replace an existing FILE, whatever it holds")
    a("--rank", type=int, default=None, metavar="N",
      help="with --out or --export-plan: write plan N of the table (its # column, 1 to --top) "
           "instead of the chosen one (*)")
    f = p.add_argument_group("failures in the simulations")
    f.add_argument("--mtbf", action=UnlimitedTimeOption, default=math.inf, metavar="TIME",
                   help=f"spot: mean time to preemption of each GPU group: {TIME_HELP} "
                        "(default inf)")
    f.add_argument("--replace-time", action=TimeOption, default=0.0, metavar="TIME",
                   help=f"spot: time to replace one: {TIME_HELP}")
    f.add_argument("--restart-cost", action=TimeOption, default=None, metavar="TIME",
                   help=f"restart time after a lost iteration (needed with failures): {TIME_HELP}")
    f.add_argument("--checkpoint-every", type=int, default=0, metavar="K",
                   help="checkpoint every K iterations")
    f.add_argument("--checkpoint-cost", action=TimeOption, default=0.0, metavar="TIME",
                   help=f"checkpoint time: {TIME_HELP}")
    add_failure_trace_options(p)
    add_run_options(p, replications=1, executor=False)


def _fleet(args: argparse.Namespace, profiles: Any) -> tuple[Any, int | None, tuple]:
    """The fleet (one of --nodes, --fleet, --fleet-from-runs), the runs' batch size, the runs."""
    from ..planner.fleets import fleet_of_plans, parse_nodes
    from ..profiles import read_fleet, read_runs
    from ..profiles.sailor import read_run

    given = [o for o in ("nodes", "fleet", "fleet_from_runs") if getattr(args, o) is not None]
    check(len(given) == 1, "fleet", "given exactly once: --nodes, --fleet or --fleet-from-runs",
          ", ".join("--" + o.replace("_", "-") for o in given) or "none")
    if args.nodes is not None:
        return parse_nodes(args.nodes, profiles.network), None, ()
    if args.fleet is not None:
        from ..profiles import Fleet

        f = read_fleet(args.fleet)
        return Fleet(f.nodes, fleet_network(f.network, profiles.network)), None, ()
    shipped = {r.name: r for r in read_runs()}
    runs = []
    for name in str(args.fleet_from_runs).split(","):
        name = name.strip()
        if name in shipped:
            runs.append(shipped[name])
        else:
            check(Path(name).is_file(), "fleet_from_runs", "names of shipped runs ("
                  + ", ".join(sorted(shipped)) + ") or run files", name)
            runs.append(read_run(name, model=args.model))
    gbs = {r.plan.global_batch_size for r in runs}
    return fleet_of_plans([r.plan for r in runs], profiles.network), \
        (gbs.pop() if len(gbs) == 1 else None), tuple(runs)


def _warn_unlinked(args: argparse.Namespace, fleet: Any) -> None:
    """Say which pairs of the fleet's node kinds (GPU type and zone) the network has no link
    for: every plan that spans them is refused (counted among the plans "refused for memory
    or links"), so a fleet of several nodes without links is searched one node at a time."""
    nodes: dict[tuple[str, str], int] = {}
    for k, n in fleet.nodes:
        if n > 0:
            nodes[(k.gpu, k.zone)] = nodes.get((k.gpu, k.zone), 0) + n
    ends = sorted(nodes)
    net = fleet.network
    missing = [f"{a[0]}@{a[1]} and {b[0]}@{b[1]}" for i, a in enumerate(ends) for b in ends[i:]
               if (a != b or nodes[a] > 1)
               and not net.flow_counts(a, b) and not net.flow_counts(b, a)]
    if missing:
        warn("plan", f"the network has no link between {'; '.join(missing)} nodes: plans "
             "across them are refused (give the links in a fleet file or the profiles' "
             "network)")


def request_from_args(args: argparse.Namespace, gbs_default: int | None) -> PlanRequest:
    gbs = args.global_batch_size if args.global_batch_size is not None else gbs_default
    check(gbs is not None, "global_batch_size", "given (or one batch size shared by the runs of "
          "--fleet-from-runs)", gbs)
    layouts = tuple(x.strip() for x in str(args.layouts).split(",") if x.strip())
    return PlanRequest(
        global_batch_size=gbs, objective=args.objective, microbatch_sizes=args.microbatch_sizes,
        tp=args.tp, max_stages=args.max_stages, layouts=layouts,
        max_price_per_hour=args.max_price_per_hour, prices=tuple(args.price or ()),
        memory_fraction=args.memory_fraction, top=args.top)


def _failures(args: argparse.Namespace) -> dict[str, Any]:
    """The failure options as TrainingConfig fields, checked before the search on a one-stage
    framework run. A trace follows ``dtsim train``'s rule (:func:`failure_trace_option`): a
    dtsim CSV of workers ``s{stage}r{replica}`` by name (the plans simulated under it are
    those that have every worker it names: :func:`_lacks`), any other through slots."""
    refuse_unless(args, "replace_time", math.isfinite(args.mtbf), "with a finite --mtbf")
    refuse_unless(args, "checkpoint_cost", args.checkpoint_every > 0, "with --checkpoint-every > 0")
    trace = failure_trace_option(args)
    # (audit 7) a restart follows a lost iteration: without failures none is lost
    refuse_unless(args, "restart_cost", math.isfinite(args.mtbf) or trace is not None
                  or args.checkpoint_every > 0, "with --mtbf, --failure-trace or "
                  "--checkpoint-every > 0: without failures no iteration is lost")
    kw: dict[str, Any] = {}
    if args.mtbf != math.inf:
        kw.update(mtbf=args.mtbf, replace_time=args.replace_time)
    if trace is not None:
        kw["failure_trace"] = trace
    if args.restart_cost is not None:
        kw["restart_cost"] = args.restart_cost
    if args.checkpoint_every:
        kw.update(checkpoint_every=args.checkpoint_every, checkpoint_cost=args.checkpoint_cost)
    from ..training import TrainingConfig

    probe = {k: v for k, v in kw.items() if k != "failure_trace"}
    p2p = _p2p_in_force(args)  # its messages name the mode the plans run under
    TrainingConfig(stages=1, replicas=1, p2p=p2p, schedule="1f1b" if p2p == "batched"
                   else "gpipe", sync="allreduce", **probe)
    return kw


def _lacks(plan: Any, workers: tuple[tuple[str, int, int], ...]) -> str | None:
    """The first of a by-name trace's ``workers`` (:func:`trace_workers`) that ``plan`` does
    not have (stage ``j``'s replica ``i``, as ``dtsim train --plan`` names them), else None."""
    dp = plan.dp
    return next((w for w, j, i in workers if j >= len(dp) or i >= dp[j]), None)


def _p2p_in_force(args: argparse.Namespace) -> str:
    """The point-to-point mode the searched plans run under: ``--p2p``, else ``--framework``'s,
    else the default framework's (a Sailor run's with ``--fleet-from-runs`` is blocking too)."""
    from ..profiles.formats import framework_from_text
    from ..profiles.frameworks import resolve

    if args.p2p is not None:
        return str(args.p2p)
    spec = framework_from_text(args.framework) if args.framework is not None else None
    return resolve(spec, 4).p2p


def _check_prices(args: argparse.Namespace, fleet: Any) -> None:
    """Each ``--price GPU=...`` names a GPU type of the fleet, spelled as the fleet spells it
    (a price for any other type, or ``gh-96`` for ``GH-96``, was accepted and never used)."""
    types = sorted({k.gpu for k, n in fleet.nodes if n})
    seen: set[str] = set()
    for gpu, value in args.price or ():
        if gpu not in types:
            same = [t for t in types if t.lower() == gpu.lower()]
            hint = f"; did you mean {same[0]}?" if same else ""
            raise ConfigError("price", f"GPU=DOLLARS for a GPU type of the fleet "
                              f"({', '.join(types)}{hint})", f"{gpu}={value:g}")
        check(gpu not in seen, "price", "given once per GPU type", f"{gpu}={value:g}")
        seen.add(gpu)


def _gib(x: float) -> str:
    """Bytes in GiB, the unit ``dtsim train --plan`` prints peak memory in."""
    return f"{x / 2**30:.1f}"


def _est(e: Any) -> str:
    """A simulated time: the number alone when the replications agree (no failures)."""
    if e is None:
        return "-"
    if e.n <= 1 or not (e.high > e.low):
        return f"{e.mean:.4g}"
    return f"{e.mean:.4g} [{e.low:.4g}, {e.high:.4g}]"


def _describe(plan: Any, zones: bool = False) -> tuple[str, str, str]:
    """(shape p x dp, GPUs with TP, layers per stage) of a plan; with ``zones``, each kind of
    GPU names its zone (``8 A100-80@iad (8 x tp1)``: plans alike but in different zones differ).

    GPUs count GPUs, as ``--json``'s ``gpus``: ``3584 GH-96 (1792 x tp2)`` is 1792 replicas of
    TP 2 (``1792xGH-96/tp2`` read as 1792 GPUs)."""
    kinds: dict[tuple[str, int, str], int] = {}
    for st in plan.stages:
        for r in st.replicas:
            key = (r.gpu, r.tp, f"@{r.zone}" if zones else "")
            kinds[key] = kinds.get(key, 0) + 1
    gpus = ", ".join(f"{n * t} {g}{z} ({n} x tp{t})" for (g, t, z), n in kinds.items())
    stages = []
    for st in plan.stages:
        types = dict.fromkeys(r.gpu for r in st.replicas)
        stages.append(f"{len(st.layers)}" + ("" if len({k[:2] for k in kinds}) == 1 else ":" + "+".join(types)))
    return f"{plan.pipeline_stages}x{plan.dp[0]}", gpus, ",".join(stages)


def run(args: argparse.Namespace) -> int:
    from ..planner import search_plans
    from ..planner.fleets import fleet_gpus
    from ..planner.models import (
        ProfilePlanModel,
        derived_tp_model,
        shape_search_model,
        simulate_plan,
    )
    from ..profiles import load_profiles, plan_text, plan_to_data
    from ..profiles.estimates import Estimator
    from ..profiles.formats import framework_from_text

    check_int("top", args.top, low=1)
    check_int("simulate", args.simulate, low=0)
    check_int("steps", args.steps, low=1)
    check_int("replications", args.replications, low=1)
    refuse_unless(args, "compare_runs", args.fleet_from_runs is not None,
                  "with --fleet-from-runs")
    simulated = args.simulate > 0 or args.compare_runs
    for dest in ("mtbf", "replace_time", "restart_cost", "checkpoint_every", "checkpoint_cost",
                 "failure_trace", "steps", "replications", "seed"):
        refuse_unless(args, dest, simulated, "with --simulate > 0 or --compare-runs (it changes "
                      "only the simulations; the search predicts failure-free iterations)")
    # a plan runs over its network, whose DES runs fixed programs (dtsim train --plan's
    # PLAN_SCHEDULES): 1f1b-dynamic was taken here, and every plan then refused, reported
    # as a fleet holding no plan
    from ..profiles.build import PLAN_SCHEDULES

    check_choice("schedule", args.schedule, PLAN_SCHEDULES)
    if args.p2p is not None:
        check_choice("p2p", args.p2p, ("blocking", "overlap", "batched"))
    refuse_unless(args, "overwrite", args.export_plan is not None or args.out is not None,
                  "with --out or --export-plan")
    if args.out is not None:
        check_replaceable("out", args.out, overwrite=args.overwrite, ours=is_plan_text_file,
                          kind="a plan file")
        check_not_an_input("out", args.out, args)
    if args.export_plan is not None:
        check(args.out is None, "export_plan", "given without --out (both write the plan; "
              "--out replaces a plan file dtsim wrote, --export-plan no file without "
              "--overwrite)", args.export_plan)
        check_export_file("export_plan", args.export_plan, args.overwrite)
        check_not_an_input("export_plan", args.export_plan, args)
    written_file = args.out if args.out is not None else args.export_plan
    refuse_unless(args, "rank", written_file is not None, "with --out or --export-plan")
    if args.rank is not None:
        check_int("rank", args.rank, low=1, high=args.top)
    failures = _failures(args)
    profiles = load_profiles(args.profiles, models=(args.model,))
    fleet, gbs_default, runs = _fleet(args, profiles)
    _check_prices(args, fleet)
    if fleet.network is not profiles.network:  # the fleet's links time its plans
        profiles = replace(profiles, network=fleet.network)
    req = request_from_args(args, gbs_default)
    fw = None
    if args.framework is not None:
        fw = framework_from_text(args.framework)
    elif runs and len({r.plan.framework for r in runs}) == 1:
        fw = runs[0].plan.framework  # the runs' framework (a Sailor run's: sailor-deepspeed)
    model = profiles.model(args.model)
    shape_notes: tuple[str, ...] = ()
    if not model.times:  # given by its shape alone: the search ranks estimated rows
        model, shape_notes = shape_search_model(profiles, model, fleet, req.microbatch_sizes,
                                                req.tp, req.global_batch_size, fw)
    else:  # a forward-only profile's backward passes (and optimizer steps) by the stated rules
        if req.tp is not None:  # TP degrees asked for and not measured: derived from TP 1
            model, shape_notes = derived_tp_model(profiles, model, fleet, req.tp, fw)
        model = Estimator(profiles, model).completed()
    pm = ProfilePlanModel(profiles, model, schedule=args.schedule, p2p=args.p2p, framework=fw,
                          fleet=fleet)
    check(args.schedule == "1f1b" or pm.p2p != "batched", "schedule",
          "1f1b with Megatron-LM's batched point-to-point (its non-interleaved schedule; "
          "--p2p blocking or overlap for another)", args.schedule)
    res = search_plans(model, fleet, profiles.gpus, req, pm)
    _warn_unlinked(args, fleet)  # after the search's refusals: one line each
    # --rank past the plans found is known only now: refused before the simulations
    check(args.rank is None or args.rank <= len(res.candidates), "rank",
          f"at most the plans found ({len(res.candidates)})", args.rank)
    sims: list[dict[str, Any] | None] = []
    trace = failures.get("failure_trace")
    named = trace_workers(trace) if isinstance(trace, str) else ()  # a by-name trace's, once
    lacking: dict[int, str] = {}  # plans a by-name trace passes over: the worker they lack
    for i, c in enumerate(res.candidates):
        if len([s for s in sims if s is not None]) < args.simulate:
            w = _lacks(c.plan, named)
            if w is not None:
                lacking[i] = w
                sims.append(None)
                continue
            sims.append(simulate_plan(pm, c.plan, steps=args.steps,
                                      replications=args.replications, seed=args.seed, **failures))
        else:
            sims.append(None)
    if lacking and all(s is None for s in sims):
        raise ConfigError("failure_trace", "a trace of workers s{stage}r{replica} that a listed "
                          "plan has (it is replayed by name, as by dtsim train --plan)",
                          f"{trace} ({next(iter(lacking.values()))}: not in any of the "
                          f"{len(res.candidates)} plans)")
    chosen = 0
    if any(s is not None for s in sims):  # the best simulated plan is the one chosen
        def sim_key(i: int) -> float:
            s, c = sims[i], res.candidates[i]
            t = s["iteration_time"]  # type: ignore[index]
            if req.objective == "cost":
                return t * (c.price_per_hour or math.inf)
            return t
        chosen = min((i for i, s in enumerate(sims) if s is not None), key=sim_key)
    best = res.candidates[chosen]
    written = chosen if args.rank is None else args.rank - 1  # the plan --out/--export-plan write
    compared = []
    for r in runs if args.compare_runs else ():
        try:
            pred = pm.predict(r.plan)
            sim = simulate_plan(pm, r.plan, steps=args.steps, replications=args.replications,
                                seed=args.seed, **failures)
            compared.append((r, pred, sim, None))
        except ConfigError as exc:
            compared.append((r, None, None, str(exc)))
    if args.out is not None:  # replaced atomically: a crash midway leaves the earlier file whole
        write_export("plan", args.out, plan_text(_written_plan(res.candidates[written], pm)),
                     True)
    if args.export_plan is not None:
        write_export("plan", args.export_plan, plan_text(_written_plan(res.candidates[written],
                                                                       pm)), args.overwrite)
    if args.json:
        emit_json({
            "model": model.name, "fleet": fleet_gpus(fleet), "objective": req.objective,
            "global_batch_size": req.global_batch_size, "chosen": chosen,
            "model_from_shape": list(shape_notes),
            "search": {"evaluated": res.evaluated, "partitions": res.partitions,
                       "groups": res.groups, "groups_pruned": res.groups_pruned,
                       "refused": res.refused, "skipped": res.skipped,
                       "seconds": res.seconds},
            "plans": [_row_json(c, s, pm.place, pm.framework)
                      for c, s in zip(res.candidates, sims, strict=True)],
            "runs": [{"name": r.name, "measured_iteration_time": r.iteration_time,
                      "measured_peak_memory": r.peak_memory,
                      "predicted_iteration_time": None if p is None else p.iteration_time,
                      "predicted_peak_memory": None if p is None else p.peak_memory,
                      "simulated_iteration_time": None if s is None else s["iteration_time"],
                      "plan": plan_to_data(r.plan), "refused": err}
                     for r, p, s, err in compared],
            "out": args.out, "export_plan": args.export_plan,
            "written": None if written_file is None else written,
            "units": units_object(PLAN_UNITS, args),
            **({"not_simulated_for_trace": {str(i + 1): w for i, w in lacking.items()}}
               if isinstance(trace, str) else {}),
            **({"trace_time_unit_assumed": assumed_unit(trace)} if trace is not None else {}),
        })
        return 0
    print(f"{model.name} on {fleet_gpus(fleet)}; global batch {req.global_batch_size}, "
          f"objective {req.objective}")
    print(f"searched {res.evaluated} plans ({res.partitions} cuts, {res.refused} refused for "
          f"memory or links) in {res.seconds:.2f} s; {res.groups_pruned} groups and {res.skipped} "
          "cuts pruned by the bound")
    print_unit_note(trace)
    for note in shape_notes:
        print(note)
    units = given_line(args)
    if units is not None:
        print(units)
    rows = []
    zones = len({r.zone for c in res.candidates for st in c.plan.stages for r in st.replicas}) > 1
    for i, (c, s) in enumerate(zip(res.candidates, sims, strict=True)):
        shape, gpus, stages = _describe(c.plan, zones)
        sim = "-" if s is None else _est(s["iteration_time_ci"])
        # (audit5) a ratio over a price that underflows (GH-96=1e-320) is inf: said, as --json's null
        spd = "-" if c.samples_per_dollar is None else f"{c.samples_per_dollar:.4g}" \
            if math.isfinite(c.samples_per_dollar) else "not measured"
        rows.append(("*" if i == chosen else "", i + 1, c.layout, shape, gpus,
                     c.plan.microbatch_size, stages, f"{c.iteration_time:.4g}", sim,
                     _gib(c.peak_memory), f"{c.samples_per_second:.4g}", spd))
    print_table(rows, ("", "#", "layout", "p x dp", "GPUs", "mbs", "layers per stage",
                       "predicted s", "simulated s", "peak GiB", "samples/s", "samples/$"))
    if lacking:
        print(f"failure trace {trace} (by worker name, as dtsim train --plan): not simulated "
              "under it, plans " + ", ".join(f"{i + 1} (no {w})" for i, w in lacking.items()))
    for note in _estimates(best):  # what the chosen plan's prediction estimated (as train's)
        print(f"  plan {chosen + 1} estimated, not measured: {note}")
    if compared:
        print("the runs' own plans:")
        rrows = []
        for r, p, s, err in compared:
            shape, gpus, stages = _describe(r.plan)
            if err is not None:
                rrows.append((r.name, shape, gpus, r.plan.microbatch_size, stages,
                              f"{r.iteration_time:.4g}", "refused: " + err, "", ""))
                continue
            rrows.append((r.name, shape, gpus, r.plan.microbatch_size, stages,
                          f"{r.iteration_time:.4g}", f"{p.iteration_time:.4g}",
                          _est(s["iteration_time_ci"]),
                          f"{(p.iteration_time / r.iteration_time - 1) * 100:+.1f}%"))
        print_table(rrows, ("run", "p x dp", "GPUs", "mbs", "layers per stage", "measured s",
                            "predicted s", "simulated s", "predicted error"))
    if written_file is not None:
        # the options the plans were searched with that the plan file does not hold (the
        # fleet file only when a link of it times the plan: train refuses it otherwise)
        plan = res.candidates[written].plan
        fleet = (args.fleet if args.fleet is not None
                 and fleet_joins_plan(args.fleet, plan)[0] else None)
        extra = "".join(f" --{k} {v}" for k, v in (
            ("profiles", args.profiles), ("fleet", fleet), ("schedule", None if args.schedule == "1f1b"
                                          else args.schedule),
            ("p2p", args.p2p if len(plan.stages) > 1 else None))  # one stage: none moves
            if v is not None)
        print(f"plan {written + 1} written to {written_file} (dtsim train --plan {written_file} "
              f"--model {model.name}{extra})")
    return 0


def _written_plan(c: Any, pm: Any) -> Any:
    """The plan of candidate ``c`` as written and printed: on the fleet's nodes (hosts), with
    the framework it was searched on (its own, where it names one)."""
    return replace(pm.place(c.plan), framework=pm.framework if c.plan.framework is None
                   else c.plan.framework)


def _estimates(c: Any) -> tuple[str, ...]:
    """What the profile did not measure for candidate ``c`` (its PlanBuild's estimates)."""
    build = getattr(c.prediction, "build", None)
    return tuple(build.estimates) if build is not None else ()


def _row_json(c: Any, s: dict[str, Any] | None, place: Any = None,
              framework: Any = None) -> dict[str, Any]:
    from ..profiles import plan_to_data

    return {
        "layout": c.layout, "stages": c.plan.pipeline_stages, "dp": c.plan.dp[0],
        "microbatch_size": c.plan.microbatch_size, "microbatches": c.plan.microbatches,
        "gpus": c.gpus, "layers_per_stage": [len(st.layers) for st in c.plan.stages],
        "predicted_iteration_time": c.iteration_time, "peak_memory": c.peak_memory,
        "samples_per_second": c.samples_per_second, "price_per_hour": c.price_per_hour,
        "samples_per_dollar": c.samples_per_dollar,
        "simulated_iteration_time": None if s is None else s["iteration_time"],
        "simulated_iteration_time_ci": None if s is None else s["iteration_time_ci"],
        "simulated_step_time": None if s is None else s["step_time"],
        # with the framework it was searched on, as --out writes it (before: none, so the
        # plan run by dtsim train --plan ran on the default framework, DeepSpeed fp32/fp16)
        "plan": plan_to_data(replace(place(c.plan) if place is not None else c.plan,
                                     framework=framework if c.plan.framework is None
                                     else c.plan.framework)),
        "estimates": list(_estimates(c)),
    }
