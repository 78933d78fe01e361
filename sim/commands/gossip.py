"""``dtsim gossip``: pairwise gossip averaging with stubborn, adversarial and clipped peers."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..adversaries import ADVERSARIES, SCOPES
from ..errors import ConfigError, SimulationError, ascii_float, ascii_int, check, check_choice
from ..gossip import (
    ENGINES,
    MIXINGS,
    PROTOCOLS,
    GossipConfig,
    default_nodes,
    gossip_comparison_rows,
    gossip_model,
    summarize_runs,
)
from ..learning import (
    DATASETS,
    OBJECTIVES,
    PLACEMENTS,
    RULES,
    GossipTrainingConfig,
    LearningConfig,
    gossip_training_model,
    place_adversaries,
    read_objective_file,
    summarize_training,
    training_engine,
    training_objective,
)
from ..runner import replicate
from . import trace as _trace
from ._applies import refuse_unless
from ._common import add_run_options, announce_fallback, emit_json, print_table, warn
from ._timeline import RecordingModel, add_timeline_options, finish_timeline, timeline_from_args
from ._units import (
    RATE_HELP,
    SIZE_HELP,
    RateOption,
    SizeOption,
    check_gossip,
    given_line,
    units_object,
)
from .trace import add_failure_trace_options, assumed_unit, failure_trace_from_args, print_unit_note

NAME = "gossip"
HELP = "gossip averaging on a graph with stubborn, adversarial or clipped peers (Study B)"

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``dtsim gossip`` options."""
    p.add_argument("--topology", default="complete", metavar="NAME[:k=v,...]",
                   help="topology spec, e.g. complete, ring:n=16, torus:dims=4x4 (default complete); "
                        "link bandwidth in B/s and latency in s, or with units: "
                        "ring:n=16,bandwidth=10Gbit/s,latency=5us")
    p.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="number of nodes n, adversaries included (default 16 on the complete graph)")
    p.add_argument("--topology-seed", type=int, default=None, metavar="S",
                   help="seed of random topology families")
    p.add_argument("--protocol", default="matching", metavar="P",
                   help="one of " + ", ".join(PROTOCOLS) + " (default matching)")
    p.add_argument("--rounds", type=number, default=50, metavar="R",
                   help="matching rounds, edge steps, or async time units (default 50; "
                        "fractional only for async)")
    p.add_argument("--record-every", type=number, default=None, metavar="K",
                   help="record every K rounds/steps/time units (default 1; edge: every "
                        "max(2n, 20000) steps, so recording stays a small fraction of the run; "
                        "fractional only for async)")
    p.add_argument("--noise", type=float, default=0.0, metavar="S",
                   help="std of the fresh noise every honest node adds each round (default 0)")
    p.add_argument("--burn-in", type=number, default=None, metavar="B",
                   help="rounds excluded from the noise-floor average (default rounds / 2)")
    p.add_argument("--dim", type=int, default=1, metavar="D", help="dimension of the values (default 1)")
    p.add_argument("--init-mean", type=float, default=0.0, metavar="M",
                   help="honest initial values are N(M, S^2) (default 0)")
    p.add_argument("--init-std", type=float, default=1.0, metavar="S",
                   help="spread of the honest initial values (default 1)")
    p.add_argument("--adversary", default="none", metavar="KIND",
                   help="one of " + ", ".join(ADVERSARIES) + ", labelflip (default none)")
    p.add_argument("--num-adversaries", type=int, default=None, metavar="K",
                   help="number of adversarial nodes, the first K in node order (default 1 with --adversary)")
    p.add_argument("--adversary-value", type=float, default=None, metavar="V",
                   help="stubborn b (default 10), ALIE z (default 1; with --attack-scope local the "
                        "reference default Phi^-1((n-f-s)/(n-f)), s = floor(n/2+1) - f), dissensus "
                        "eps (default 1), IPM eps (default 0.1)")
    p.add_argument("--attack-scope", default=None, metavar="SCOPE",
                   help="where alie, ipm and dissensus read the honest values: " + ", ".join(SCOPES)
                        + " (default global: all honest nodes; local: each target's neighbourhood, "
                          "as the ClippedGossip reference code computes them)")
    p.add_argument("--clip", type=float, default=None, metavar="TAU",
                   help="honest nodes move by clip(x_peer - x_self, TAU) / 2")
    p.add_argument("--adaptive-clip", action="store_true",
                   help="self-centred clipping with the ClippedGossip oracle radius")
    p.add_argument("--mixing", default=None, metavar="W",
                   help="neighbourhood mixing weights: " + ", ".join(MIXINGS) + " (default metropolis; "
                        "uniform 1/(1+d_i); weight: each edge's weight attribute in a topology file, "
                        "self weight completing the row)")
    p.add_argument("--gossip-rounds", type=int, default=None, metavar="K",
                   help="neighbourhood/allreduce: aggregation rounds per round (per local step), "
                        "default 1")
    p.add_argument("--wake-rate", type=float, default=1.0, metavar="R",
                   help="async: Poisson wake-up rate per node (default 1)")
    p.add_argument("--size", action=SizeOption, default=1.0, metavar="SIZE",
                   help="message size; an exchange takes latency + size / bandwidth (not "
                        "with protocol edge, whose clock counts steps): "
                        f"{SIZE_HELP} (default 1)")
    p.add_argument("--nic", action=RateOption, default=None, metavar="RATE",
                   help="NIC capacity (each way) of every node: concurrent exchanges at a node "
                        f"share it (async, matching, neighbourhood, allreduce): {RATE_HELP}")
    p.add_argument("--contention", default="on", metavar="on|off",
                   help="on (default): exchanges are flows that share finite links and NICs "
                        "(sim.network); off: each takes latency + size / bandwidth alone")
    p.add_argument("--network-weighting", default="maxmin", metavar="NAME",
                   help="with contention: maxmin (default) or rtt (SimGrid CM02's 1/latency)")
    p.add_argument("--availability", type=float, default=1.0, metavar="A",
                   help="async: fraction of time each node is online (default 1, no churn)")
    p.add_argument("--mean-downtime", type=float, default=1.0, metavar="T",
                   help="async: mean offline period (default 1)")
    p.add_argument("--engine", default="auto", metavar="E",
                   help="matching rounds: " + ", ".join(ENGINES) + " (default auto: the vectorised "
                        "engine; des runs every node as a SimPy process, slower, for cross-checks)")
    p.add_argument("--adversary-nodes", default=None, metavar="I,J,...",
                   help="positions (node order) of the adversaries, or a graph file's node "
                        "names (lab-a-03,lab-b-05), instead of the first K")
    p.add_argument("--stubborn-values", default=None, metavar="B1,B2,...",
                   help="stubborn: one value per stubborn node, in the order of --adversary-nodes "
                        "(or of the first K), instead of --adversary-value")
    p.add_argument("--placement", default=None, metavar="RULE",
                   help="adversary positions by rule: " + ", ".join(PLACEMENTS)
                        + " (random uses --objective-seed; default first)")
    t = p.add_argument_group("gossip training (values train on local objectives between exchanges)")
    t.add_argument("--objective", default="none", metavar="OBJ",
                   help="one of " + ", ".join(OBJECTIVES) + " (default none: plain averaging); "
                        "--adversary labelflip needs logistic")
    t.add_argument("--lr", type=float, default=None, metavar="ETA", help="local step size (default 0.1)")
    t.add_argument("--local-steps", type=int, default=None, metavar="H",
                   help="local steps per communication (default 1)")
    t.add_argument("--grad-noise", type=float, default=None, metavar="SIGMA",
                   help="std of the noise added to every gradient coordinate (default 0)")
    t.add_argument("--curvature-spread", type=float, default=None, metavar="S",
                   help="quadratic: curvatures uniform on [1 - S, 1 + S] (default 0)")
    t.add_argument("--optimum-spread", type=float, default=None, metavar="S",
                   help="quadratic: optima N(0, S^2) per node and coordinate (default 1)")
    t.add_argument("--objective-file", default=None, metavar="CSV",
                   help="quadratic: read node,dim,curvature,optimum instead of drawing them")
    t.add_argument("--objective-seed", type=int, default=None, metavar="S",
                   help="seed of the objective's draws, split and partition (default 0)")
    t.add_argument("--step-time", default=None, metavar="T[,T...]",
                   help="time of one local step, one value or one per node (async and "
                        "neighbourhood/allreduce rounds; default 0, 1 for async)")
    t.add_argument("--data", default=None, metavar="NAME",
                   help="logistic: one of " + ", ".join(DATASETS) + " (default digits)")
    t.add_argument("--partition", default=None, metavar="P",
                   help="logistic: iid or dirichlet (default iid)")
    t.add_argument("--alpha", type=float, default=None, metavar="A",
                   help="logistic: Dirichlet concentration of the non-iid partition (default 1)")
    t.add_argument("--rule", default=None, metavar="R",
                   help="neighbourhood/allreduce aggregation: " + ", ".join(RULES[1:])
                        + " (default: mixing, clipped by --clip or --adaptive-clip)")
    t.add_argument("--trim", type=int, default=None, metavar="B",
                   help="values dropped at each end by --rule trimmed (default 1)")
    t.add_argument("--momentum", type=float, default=None, metavar="BETA",
                   help="heavy-ball momentum of the honest nodes' local steps, as torch SGD "
                        "(v = BETA v + g; x -= lr v; default 0)")
    t.add_argument("--krum-f", type=int, default=None, metavar="F",
                   help="--rule krum: adversaries assumed among a node's inputs (default: the "
                        "number of adversaries)")
    t.add_argument("--krum-m", type=int, default=None, metavar="M",
                   help="--rule krum: values selected, multi-Krum for M > 1 (default 1)")
    t.add_argument("--krum-variant", default=None, metavar="V",
                   help="--rule krum: textbook (default) or reference (the ClippedGossip code's "
                        "fourth-power scores and summed selection)")
    t.add_argument("--rfa-iters", type=int, default=None, metavar="T",
                   help="--rule rfa: smoothed Weiszfeld iterations (default 8)")
    t.add_argument("--rfa-nu", type=float, default=None, metavar="NU",
                   help="--rule rfa: distance smoothing (default 0.1)")
    t.add_argument("--cc-tau", type=float, default=None, metavar="TAU",
                   help="--rule centered-clip: clipping radius (default 10)")
    t.add_argument("--cc-iters", type=int, default=None, metavar="L",
                   help="--rule centered-clip: iterations per aggregation (default 1)")
    t.add_argument("--bucketing", type=int, default=None, metavar="S",
                   help="neighbourhood/allreduce: average random buckets of S inputs before the "
                        "rule (or plain/clipped mixing); default 0, none")
    t.add_argument("--bucketing-form", default=None, metavar="F",
                   help="--bucketing: repeat (default, the reference decentralised form) or permute "
                        "(ceil(m/S) buckets of a random permutation)")
    add_failure_trace_options(p)  # async churn from a real trace (node i = slot i, or by name)
    add_timeline_options(p, what="every exchange (async: from its start to its delivery; edge: "
                         "each step, 2/n long), every node's down interval and the links' "
                         "utilisation (async and edge, the DES engine)")
    add_run_options(p, replications=20)


#: Training options and their defaults (a given option needs --objective).
_TRAINING = {"lr": 0.1, "local_steps": 1, "grad_noise": 0.0, "curvature_spread": 0.0,
             "optimum_spread": 1.0, "objective_file": None, "objective_seed": 0, "step_time": None,
             "data": "digits", "partition": "iid", "alpha": 1.0, "rule": "none", "trim": 1,
             "momentum": 0.0, "krum_f": None, "krum_m": 1, "krum_variant": "textbook",
             "rfa_iters": 8, "rfa_nu": 0.1, "cc_tau": 10.0, "cc_iters": 1, "bucketing": 0,
             "bucketing_form": "repeat"}


def number(text: str) -> int | float:
    """An argparse type: an int when the text is one, else a float (``2.5``); ASCII only."""
    if not str(text).isascii():
        raise ValueError(f"not an ASCII number: {text!r}")
    try:
        return int(text)
    except ValueError:
        return float(text)


def _int_list(name: str, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:  # (audit 7) an empty item (1,,2 or 1,) is refused: it was dropped silently
        return tuple(ascii_int(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(name, "a comma-separated list of integers", text) from None


def _adversary_positions(args: argparse.Namespace, nodes: int | None) -> tuple[int, ...] | None:
    """``--adversary-nodes``: node positions, or the names of a graph file's nodes.

    A list of integers is positions (node order), as always; otherwise every entry must name a
    node of the graph (``lab-a-03``: a graph file's own names, which ``dtsim network``,
    ``--network-nodes`` and the timeline use too), and is read as that node's position."""
    text = getattr(args, "adversary_nodes", None)
    try:
        return _int_list("adversary_nodes", text)
    except ConfigError:
        pass
    names = [v.strip() for v in str(text).split(",")]
    check("" not in names, "adversary_nodes", "a comma-separated list of node positions or "
          "names, none empty", text)
    graph = GossipConfig(topology=args.topology, nodes=nodes,
                         topology_seed=args.topology_seed).network_graph
    order = {str(v): i for i, v in enumerate(graph.nodes)}
    unknown = [v for v in names if v not in order]
    check(not unknown, "adversary_nodes",
          "a comma-separated list of node positions (integers) or of the graph's node names "
          f"(unknown: {', '.join(unknown[:3])})", text)
    return tuple(order[v] for v in names)


def _float_list(name: str, text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:  # (audit 7) an empty item is refused, as in _int_list
        return tuple(ascii_float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(name, "a comma-separated list of numbers", text) from None


def training_from_args(args: argparse.Namespace) -> GossipTrainingConfig | None:
    """The :class:`~sim.learning.GossipTrainingConfig` of the options, or None without ``--objective``."""
    given = [k for k in _TRAINING if getattr(args, k, None) is not None]
    if args.objective == "none":
        check(not given, "objective", "quadratic or logistic with --" + ", --".join(
            k.replace("_", "-") for k in given), "none")
        check(args.adversary != "labelflip", "adversary", "labelflip only with --objective logistic",
              args.adversary)
        return None
    check_choice("objective", args.objective, OBJECTIVES[1:])
    v = {k: (getattr(args, k) if getattr(args, k) is not None else d) for k, d in _TRAINING.items()}
    step = _float_list("step_time", v["step_time"])
    if step is None:
        step = (1.0,) if args.protocol == "async" else (0.0,)
    table = read_objective_file(v["objective_file"]) if v["objective_file"] else None
    lc = LearningConfig(objective=args.objective, lr=v["lr"], local_steps=v["local_steps"],
                        grad_noise=v["grad_noise"], curvature_spread=v["curvature_spread"],
                        optimum_spread=v["optimum_spread"], objective_table=table, step_time=step,
                        data=v["data"], partition=v["partition"], alpha=v["alpha"],
                        objective_seed=v["objective_seed"], momentum=v["momentum"])
    flip = args.adversary == "labelflip"
    g = _config_from_args(args, dim=lc.dimension(args.dim) if args.dim == 1 else args.dim,
                         objective_seed=v["objective_seed"])
    flipped: tuple[int, ...] = ()
    if flip:
        flipped = tuple(g.adversary_positions)
        g = replace(g, adversary="none", adversary_nodes=None, num_adversaries=None,
                    adversary_value=None)
    return GossipTrainingConfig(g, lc, rule=v["rule"], trim=v["trim"], flipped=flipped,
                          krum_f=v["krum_f"], krum_m=v["krum_m"], krum_variant=v["krum_variant"],
                          rfa_iters=v["rfa_iters"], rfa_nu=v["rfa_nu"], cc_tau=v["cc_tau"],
                          cc_iters=v["cc_iters"], bucketing=v["bucketing"],
                          bucketing_form=v["bucketing_form"])


def _config_from_args(args: argparse.Namespace, *, dim: int | None = None,
                     objective_seed: int = 0) -> GossipConfig:
    """Build (and so validate) the :class:`~sim.gossip.GossipConfig` of the options."""
    nodes = default_nodes(args.topology, args.nodes)
    kind = "stubborn" if args.adversary == "labelflip" else args.adversary  # positions only
    positions = _adversary_positions(args, nodes)
    rule = getattr(args, "placement", None)
    if rule is not None:
        check(positions is None, "placement", "unset with --adversary-nodes", rule)
        check(args.adversary != "none", "placement", "given only with --adversary", rule)
        k = 1 if args.num_adversaries is None else args.num_adversaries
        positions = place_adversaries(args.topology, k, rule, nodes=nodes,
                                      topology_seed=args.topology_seed, seed=objective_seed)
    burn_in = args.burn_in
    if burn_in is None:
        if isinstance(args.rounds, int):
            burn_in = args.rounds // 2 if args.rounds > 0 else 0
        else:  # a fractional async horizon (the config refuses it for the other protocols)
            burn_in = args.rounds / 2 if args.rounds > 0 else 0
    return GossipConfig(
        topology=args.topology,
        nodes=nodes,
        protocol=args.protocol,
        rounds=args.rounds,
        noise=args.noise,
        dim=args.dim if dim is None else dim,
        adversary=kind,
        num_adversaries=args.num_adversaries,
        adversary_nodes=positions,
        adversary_value=args.adversary_value,
        stubborn_values=_float_list("stubborn_values", getattr(args, "stubborn_values", None)),
        init_mean=getattr(args, "init_mean", 0.0),
        init_std=getattr(args, "init_std", 1.0),
        clip=args.clip,
        adaptive_clip=args.adaptive_clip,
        attack_scope=getattr(args, "attack_scope", None) or "global",
        mixing=getattr(args, "mixing", None) or "metropolis",
        gossip_rounds=1 if getattr(args, "gossip_rounds", None) is None else args.gossip_rounds,
        record_every=args.record_every,
        burn_in=burn_in,
        wake_rate=args.wake_rate,
        size=args.size,
        availability=args.availability,
        mean_downtime=args.mean_downtime,
        failure_trace=failure_trace_from_args(args),
        topology_seed=args.topology_seed,
        engine=args.engine,
        contention=check_choice("contention", getattr(args, "contention", "on"),
                                ("on", "off")) == "on",
        nic=getattr(args, "nic", None),
        network_weighting=getattr(args, "network_weighting", "maxmin"),
    )


def _byzantine_keys(cfg: GossipConfig, tc: GossipTrainingConfig | None = None) -> dict[str, Any]:
    """The attack-scope, mixing, gossip-round, momentum and rule settings that differ from the defaults.

    Reported only when set, so the JSON of every run that sets none of them is unchanged.
    """
    out: dict[str, Any] = {}
    if cfg.attack_scope != "global":
        out["attack_scope"] = cfg.attack_scope
    if cfg.mixing != "metropolis":
        out["mixing"] = cfg.mixing
    if cfg.gossip_rounds != 1:
        out["gossip_rounds"] = cfg.gossip_rounds
    if tc is not None:
        if tc.learning.momentum:
            out["momentum"] = tc.learning.momentum
        if tc.rule == "krum":
            out.update(krum_f=tc.krum_f_used, krum_m=tc.krum_m, krum_variant=tc.krum_variant)
        elif tc.rule == "rfa":
            out.update(rfa_iters=tc.rfa_iters, rfa_nu=tc.rfa_nu)
        elif tc.rule == "centered-clip":
            out.update(cc_tau=tc.cc_tau, cc_iters=tc.cc_iters)
        if tc.bucketing:
            out.update(bucketing=tc.bucketing, bucketing_form=tc.bucketing_form)
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "-"
    return f"{v:.6g}" if isinstance(v, (float, np.floating)) else str(v)


def _ci_text(ci: Any) -> str:
    if ci is None:
        return "-"
    if not ci.has_interval:
        return f"no interval (n = {ci.n})"
    return f"[{_fmt(ci.low)}, {_fmt(ci.high)}]"


def _seeded_topology(spec: str) -> bool:
    """False when ``spec`` names a family without randomness (a seed changes nothing)."""
    try:
        import topologies

        fam = topologies.parse_spec(spec).family_info()
    except Exception:  # noqa: BLE001 - a bad spec is the config's to refuse, with its message
        return True
    return fam is None or fam.seeded


def _size_matters(cfg: GossipConfig) -> bool:
    """True when the message size changes some exchange time (a link of finite bandwidth)."""
    import dataclasses

    from ..gossip.network import build_gossip_graph

    if cfg.nic is not None:
        return True
    a, b = build_gossip_graph(cfg), build_gossip_graph(dataclasses.replace(cfg, size=0.0))
    return a.complete_delay != b.complete_delay or not np.array_equal(a.delay, b.delay)


def _check_size(args: argparse.Namespace, cfg: GossipConfig) -> None:
    """Refuse ``--size`` where no exchange time reads it: the edge protocol's clock (``2/n`` a
    step, no exchange timed), or links of infinite bandwidth (plain gossip and training alike)."""
    refuse_unless(args, "size", cfg.protocol != "edge",
                  "with a protocol that times its exchanges (edge's clock counts steps, 2/n "
                  "each: no exchange takes latency + size / bandwidth)")
    refuse_unless(args, "size", _size_matters(cfg),
                  "with links of finite bandwidth (an exchange takes latency + size / bandwidth; "
                  "this topology's bandwidth is infinite)")


def _contention_matters(cfg: GossipConfig) -> bool:
    """True when exchanges would share something (a finite link or a NIC) with contention on."""
    import dataclasses

    from ..gossip.network import flow_network

    return flow_network(dataclasses.replace(cfg, contention=True)) is not None


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options that would have no effect with the others."""
    refuse_unless(args, "adversary_value", args.adversary != "none", "with --adversary")
    refuse_unless(args, "stubborn_values", args.adversary == "stubborn", "with --adversary stubborn")
    refuse_unless(args, "adversary_value", args.adversary != "bitflip",
                  "with an adversary that has a parameter (bitflip has none)")
    refuse_unless(args, "attack_scope", args.adversary != "none", "with --adversary")
    rule = getattr(args, "rule", None)
    for dest in ("krum_f", "krum_m", "krum_variant"):
        refuse_unless(args, dest, rule == "krum", "with --rule krum")
    for dest in ("rfa_iters", "rfa_nu"):
        refuse_unless(args, dest, rule == "rfa", "with --rule rfa")
    for dest in ("cc_tau", "cc_iters"):
        refuse_unless(args, dest, rule == "centered-clip", "with --rule centered-clip")
    refuse_unless(args, "bucketing_form", bool(getattr(args, "bucketing", None)),
                  "with --bucketing S (S >= 1)")
    # accepted and unused before issue 33
    refuse_unless(args, "trim", rule == "trimmed", "with --rule trimmed")
    refuse_unless(args, "alpha", getattr(args, "partition", None) == "dirichlet",
                  "with --partition dirichlet")
    is_async = args.protocol == "async"
    for dest in ("wake_rate", "availability"):
        refuse_unless(args, dest, is_async, "with --protocol async")
    refuse_unless(args, "mean_downtime", is_async and args.availability < 1,
                  "with --protocol async and --availability < 1 (no churn otherwise)")
    refuse_unless(args, "topology_seed", _seeded_topology(args.topology),
                  "with a random topology family (this one has no randomness)")
    refuse_unless(args, "workers", args.executor != "serial", "with --executor local or dask")
    refuse_unless(args, "network_weighting", getattr(args, "contention", "on") == "on",
                  "with --contention on")


def _add_trace_instances(payload: dict[str, Any], cfg: GossipConfig) -> None:
    """``trace_instances`` (node -> the instance it replays) when the trace is replayed by
    name (its instances named as the graph's nodes)."""
    names = cfg.trace_names
    if names is not None:
        payload["trace_instances"] = _trace.trace_instances(cfg.node_names(), names)


def _print_trace_instances(cfg: GossipConfig) -> None:
    """The text's line of :func:`_add_trace_instances` (nothing when replayed slot by slot)."""
    out: dict[str, Any] = {}
    _add_trace_instances(out, cfg)
    if out:
        _trace.print_trace_instances(out["trace_instances"])


def run(args: argparse.Namespace) -> int:
    """Run the replications and print the report (text table or one JSON object)."""
    _check_options(args)
    request = timeline_from_args(args)
    tc = training_from_args(args)
    if tc is not None:
        if request is not None:
            raise ConfigError("timeline", "given without the gossip training options (the "
                              "timeline records the async and edge exchanges of plain "
                              "gossip)", request.path)
        return _run_training(args, tc)
    cfg = _config_from_args(args)
    if request is not None:
        _check_timeline(cfg, request)
    _check_size(args, cfg)
    refuse_unless(args, "contention", _contention_matters(cfg),
                  "with a protocol whose exchanges overlap (not edge) on links of finite "
                  "bandwidth or with --nic (nothing is shared otherwise)")
    check_gossip(args, cfg)
    _warn_switches(cfg)
    announce_fallback("gossip", cfg.resolved_engine, cfg.engine_reason)
    model = None  # replication 0 records as it runs (the serial executor, on the DES engine)
    if request is not None and args.executor == "serial" and cfg.resolved_engine == "des":
        model = RecordingModel(gossip_model, request.recorder(), args.seed,
                                   request.replication)
    records = replicate(gossip_model if model is None else model, cfg,
                        replications=args.replications, seed=args.seed,
                        executor=args.executor, workers=args.workers)
    report = summarize_runs(records, cfg)
    errors = [r["error"] for r in records if r.get("error")]
    timeline = (lambda: _timeline(args, cfg, request, records[request.replication], model)) \
        if request is not None else (lambda: None)
    if args.json:
        payload = {
            "topology": cfg.topology, "nodes": cfg.n, "protocol": cfg.protocol,
            "rounds": cfg.rounds, "noise": cfg.noise, "dim": cfg.dim,
            "adversary": cfg.adversary, "num_adversaries": cfg.num_adversaries,
            "adversary_value": cfg.value if cfg.adversary != "none" else None,
            **({"adversary_nodes": list(cfg.adversary_positions),
                "stubborn_values": list(cfg.stubborn_values)} if cfg.stubborn_values else {}),
            "clip": cfg.clip, "adaptive_clip": cfg.adaptive_clip, "seed": args.seed,
            "engine": cfg.resolved_engine, "engine_reason": cfg.engine_reason,
            "errors": errors, **_byzantine_keys(cfg),
        }
        payload.update(report)
        if cfg.failure_trace is not None:
            payload["trace_time_unit_assumed"] = assumed_unit(cfg.failure_trace)
            _add_trace_instances(payload, cfg)
        payload["units"] = units_object({"time": "s"}, args)
        emit_json(payload)
        timeline()
        return 0 if not errors else 1
    line = given_line(args)
    if line is not None:
        print(line)
    print(f"gossip: {cfg.protocol} on {cfg.topology} with n = {cfg.n} "
          f"({cfg.honest_count} honest), {report['replications']} replications, seed {args.seed}")
    print_unit_note(cfg.failure_trace)
    _print_trace_instances(cfg)
    print(f"engine: {cfg.resolved_engine} ({cfg.engine_reason})")
    rows = [(r["quantity"], _fmt(r["simulated"]), _ci_text(r["interval"]), _fmt(r["exact"]))
            for r in gossip_comparison_rows(report)]
    print_table(rows, ("quantity", "simulated", "95% CI", "exact"))
    for e in errors:
        print(f"replication error: {e}")
    timeline()
    return 0 if not errors else 1


def _check_timeline(cfg: Any, request: Any) -> None:
    """Refuse, before any work, a timeline this gossip run cannot record, or one too large."""
    from ..timeline import check_run_size

    if cfg.protocol not in ("async", "edge"):
        raise ConfigError("timeline", "given with --protocol async or edge (the engines that "
                          f"record their exchanges; not {cfg.protocol})", request.path)
    if cfg.resolved_engine != "des" and cfg.protocol == "async":
        raise ConfigError("timeline", "given with --engine des for this async configuration "
                          f"(the {cfg.resolved_engine} engine runs it: its own random numbers, "
                          "no events)", request.path)
    if cfg.protocol == "async":
        events = 2.0 * cfg.n * cfg.wake_rate * float(cfg.rounds)
    else:
        events = 2.0 * float(cfg.rounds)
    check_run_size(request, events, "exchanges")


def _timeline(args: argparse.Namespace, cfg: Any, request: Any, record: dict[str, Any],
              model: RecordingModel | None) -> None:
    """Write replication K's events (``--timeline-replication``): recorded in the run, else by running it again here on
    the DES engine (the compiled edge engine gives the DES engine's numbers bit for bit, so
    replication 0 of either is the same run; the check says so)."""
    from ..rng import Streams

    def rerun() -> tuple[Any, dict[str, Any]]:
        rec = request.recorder()
        des = replace(cfg, engine="des") if cfg.engine == "auto" else cfg
        metrics = gossip_model(des, Streams(args.seed).replication(request.replication),
                               recorder=rec)
        metrics["engine"] = record.get("engine")  # the engine's name, not a number of the run
        return rec, metrics

    finish_timeline(request, model, rerun, record=record, command="gossip", seed=args.seed,
                    json_mode=args.json, unit="s")


#: Training rows of the text report: (measured, exact, label).
_TRAIN_ROWS = (
    ("loss", "predicted_loss", "final loss F(m) - F(x*)"),
    ("distance_to_optimum", None, "final |m - x*|"),
    ("sq_distance_to_optimum", "predicted_sq_distance_to_optimum", "final |m - x*|^2"),
    ("consensus_distance", "predicted_consensus_distance", "final consensus distance"),
    ("test_accuracy", None, "final test accuracy"),
)


def switch_nodes(cfg: GossipConfig) -> list[Any]:
    """The nodes of ``cfg``'s graph marked as switches (``role="switch"``: the ``tree`` family's
    and a user's graph file's), which gossip as peers like every node of the graph."""
    from ..gossip import build_gossip_graph

    g = build_gossip_graph(cfg).graph
    if g is None:
        return []
    return [v for v, role in g.nodes(data="role") if role == "switch"]


def _warn_switches(cfg: GossipConfig) -> None:
    """Say when switches take part in gossip: the graph is the gossip graph, every node a peer
    holding a value (``n`` counts them), so a physical network's switches average too."""
    sw = switch_nodes(cfg)
    if sw:
        shown = ", ".join(map(str, sw[:4])) + (", ..." if len(sw) > 4 else "")
        warn("gossip", f"{len(sw)} of the {cfg.n} nodes of {cfg.topology} are switches "
             f"(role=switch: {shown}): every node of the graph gossips, holding a value, "
             "switches too; give the graph of the peers that gossip")


def _run_training(args: argparse.Namespace, tc: GossipTrainingConfig) -> int:
    cfg = tc.gossip
    training_objective(tc)  # build (and so validate) the objective before any replication
    _check_size(args, cfg)
    check_gossip(args, cfg)
    _warn_switches(cfg)
    lowered, nodes = tc.trim_lowered()
    if lowered:  # accepted as the reference code runs it, but never silently
        warn("gossip", f"--trim {tc.trim} leaves no value at {lowered} of {nodes} aggregating "
             "nodes (m <= 2 trim values); they keep the median, as the reference code's trimmed "
             "mean lowers its trim")
    announce_fallback("gossip", *training_engine(tc))
    records = replicate(gossip_training_model, tc, replications=args.replications, seed=args.seed,
                        executor=args.executor, workers=args.workers)
    errors = [r["error"] for r in records if r.get("error")]
    if len(errors) == len(records):
        raise SimulationError.from_records(records)  # type: ignore[misc]
    report = summarize_training(records, tc)
    engine, engine_why = training_engine(tc)
    lc = tc.learning
    adversary = "labelflip" if tc.flipped else cfg.adversary
    if args.json:
        payload = {
            "topology": cfg.topology, "nodes": cfg.n, "protocol": cfg.protocol,
            "rounds": cfg.rounds, "noise": cfg.noise, "dim": cfg.dim,
            "adversary": adversary,
            "num_adversaries": len(tc.flipped) if tc.flipped else cfg.num_adversaries,
            "adversary_nodes": list(tc.flipped or cfg.adversary_positions),
            "adversary_value": cfg.value if cfg.adversary != "none" else None,
            "clip": cfg.clip, "adaptive_clip": cfg.adaptive_clip, "rule": tc.rule,
            "seed": args.seed, "engine": engine, "engine_reason": engine_why,
            "objective_kind": lc.objective, "lr": lc.lr, "local_steps": lc.local_steps,
            "grad_noise": lc.grad_noise, "errors": errors, **_byzantine_keys(cfg, tc),
        }
        payload.update(report)
        if cfg.failure_trace is not None:
            payload["trace_time_unit_assumed"] = assumed_unit(cfg.failure_trace)
            _add_trace_instances(payload, cfg)
        payload["units"] = units_object({"time": "s"}, args)
        emit_json(payload)
        return 0 if not errors else 1
    print(f"gossip training: {lc.objective} on {cfg.protocol} over {cfg.topology} with "
          f"n = {cfg.n} ({int(tc.honest.sum())} honest), lr {lc.lr}, H = {lc.local_steps}, "
          f"{report['replications']} replications, seed {args.seed}")
    print_unit_note(cfg.failure_trace)
    _print_trace_instances(cfg)
    print(f"engine: {engine} ({engine_why})")
    rows = []
    for key, exact, label in _TRAIN_ROWS:
        val = float(report[key][-1])
        if not math.isfinite(val):
            continue
        ci = report.get("final_" + key + "_ci")
        ex = report.get(exact) if exact else None
        rows.append((label, _fmt(val), f"[{_fmt(ci.low)}, {_fmt(ci.high)}]" if ci is not None else "-",
                     _fmt(float(np.asarray(ex)[-1])) if ex is not None else "-"))
    hm = np.asarray(report["honest_mean"])
    pm = report.get("predicted_honest_mean")
    rows.append(("final honest mean (coord 0)", _fmt(float(hm.reshape(hm.shape[0], -1)[-1, 0])), "-",
                 _fmt(float(np.asarray(pm).reshape(hm.shape[0], -1)[-1, 0])) if pm is not None else "-"))
    if "predicted_equilibrium_mean" in report:
        rows.append(("equilibrium honest mean (coord 0)", "-", "-",
                     _fmt(float(report["predicted_equilibrium_mean"][0]))))
    if "predicted_ipm_fixed_point" in report:
        rows.append(("IPM-against-clip fixed point of the honest mean", "-", "-",
                     _fmt(float(report["predicted_ipm_fixed_point"][0]))))
    print_table(rows, ("quantity", "simulated", "95% CI", "exact"))
    for e in errors:
        print(f"replication error: {e}")
    return 0 if not errors else 1
