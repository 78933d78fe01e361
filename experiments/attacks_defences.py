"""Attacks against defences on a real learning task, in simulated wall clock.

Softmax regression on scikit-learn's bundled ``digits`` (8x8 images, 10
classes, 650 parameters), iid shards over ``n = 20`` nodes, 10 % adversaries
(2 nodes, placed at random). Every round each honest node takes ``H`` local
gradient steps (``step_time`` each; full local gradient plus ``N(0, 0.3^2)``
noise per coordinate, the stand-in for minibatch noise), then hears all its neighbours
(``latency + size / bandwidth``) and aggregates (``neighbourhood`` rounds):
plain Metropolis mixing, ClippedGossip with a fixed radius, with the oracle
adaptive radius, with the practical farthest-neighbour radius, a coordinate-wise
median or a trimmed mean; and (issue 25) Krum, RFA (smoothed Weiszfeld),
centred clipping with a persistent centre, the plain mean and the median behind
bucketing. Attacks: none, stubborn (``b`` in every coordinate), ALIE, IPM,
sign-flip, dissensus and label flipping (a data attack by nodes that otherwise
follow the protocol); and the reference code's versions: ``alie-local``,
``ipm-local``, ``dissensus-local`` and ``bitflip``. Graphs: complete, ring,
random 4-regular. Some points add heavy-ball momentum 0.9 (``lr`` 0.01, the
same effective step ``lr / (1 - beta)`` as the base ``lr`` 0.1).

*Scope convention* (the ``scope`` column of ``final_table.csv``): the attacks
``alie``, ``ipm`` and ``dissensus`` are dtsim's omniscient versions (scope
``global``: ALIE sends the honest mean plus ``z`` population standard
deviations of all honest nodes, IPM ``-eps`` times the mean of all honest
nodes, dissensus pushes the peer away from its honest neighbours' mean);
``*-local`` are exactly what the ClippedGossip authors' code computes (scope
``local``: from the target's neighbourhood; ALIE subtracts ``z`` standard
deviations with ddof 1; dissensus divides the target's weighted honest pull by
its Byzantine weight); ``bitflip`` is their bit-flip worker (it trains,
aggregates and sends minus its model). Attacks without a scope show ``-``.

Section ``paper`` reproduces, at dtsim's scale, the honest-majority experiment
of the ClippedGossip paper (He, Karimireddy, Jaggi, 2022; ``honest_majority.py``
of epfml/byzantine-robust-decentralized-optimizer, whose README says it makes
the paper's Fig. 6, and whose published final accuracies,
``outputs/honest_majority/exp/acc.csv``, MIT licence, are in
:data:`PAPER_ACCURACY`): five honest nodes on a ring, each with two Byzantine
leaves (15 nodes, 10 Byzantine), plus one more Byzantine leaf on node 0 (16
nodes, 11 Byzantine: no honest majority); their lazy Metropolis weights
(``W`` plus ``(1 - w_min) I``, renormalised); attacks ALIE (``z = 10``), IPM
(``eps = 0.1``) and dissensus (``eps = 1.5``), local scope; SCClip with
``tau = 0.1``, trimmed mean ``b = 2`` and RFA ``T = 8``; momentum 0.9,
``lr = 0.01``, one local step per round. What differs: softmax regression on
digits instead of their CNN on MNIST, the full local gradient plus noise
instead of minibatches of 32, 300 rounds instead of their 900 iterations
(digits converges within about 100 at this effective step), dtsim's
replications instead of their single seed; MOZI is not in dtsim. Plain
gossip and centred clipping (``tau = 0.1``) are dtsim's extra rows.

Measured: held-out test accuracy and the distance of the honest mean from the
honest optimum ``x*`` at four points of simulated time. Beside them, the
quantities of ClippedGossip's neighbourhood bound ``O(delta_max zeta^2 /
gamma^2)``: ``delta_max`` the largest Byzantine weight at an honest node,
``zeta^2 = (1/h) sum_i |grad f_i(x*)|^2`` the heterogeneity at the optimum and
``gamma`` the spectral gap of the mixing matrix (the bound is up to a
constant, so only its ordering across graphs is compared).

Run::

    dtsim run experiments/attacks_defences.py --quick
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import sim.runner
from sim.analytic.learning import metropolis_weights
from sim.gossip import GossipConfig
from sim.gossip.mixing import mixing_weights
from sim.learning import (
    LearningConfig,
    gossip_training_model,
    place_adversaries,
    training_objective,
    with_learning,
)
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "attacks_defences"

BASE = {"graph": "complete", "attack": "none", "defence": "plain", "nodes": 20,
        "adversaries": 2, "rounds": 80, "lr": 0.1, "local_steps": 2, "grad_noise": 0.3, "step_time": 0.01,
        "latency": 0.05, "bandwidth": 20.0, "size": 1.0, "clip": 1.0, "trim": 1,
        "data": "digits", "objective_seed": 0}

GRAPHS = ["complete", "ring", "random_regular:degree=4"]
ATTACKS = ["none", "stubborn", "alie", "ipm", "signflip", "dissensus", "labelflip"]
DEFENCES = ["plain", "clip", "adaptive", "farthest", "median", "trimmed"]
#: The reference code's attacks (scope local) and the new defences (issue 25).
LOCAL_ATTACKS = ["alie-local", "ipm-local", "dissensus-local", "bitflip"]
NEW_DEFENCES = ["krum", "rfa", "centered-clip", "mean", "median-bucketing"]
#: Momentum points: beta 0.9 with lr 0.01 (effective step lr / (1 - beta) = 0.1, the base lr).
MOMENTUM = {"momentum": 0.9, "lr": 0.01}
MOMENTUM_ATTACKS = ["none", "alie-local", "ipm-local", "dissensus-local", "bitflip"]
MOMENTUM_DEFENCES = ["plain", "clip", "median", "centered-clip"]
#: The paper section: graphs (honest majority or not), attacks and aggregators.
PAPER_GRAPHS = ["malicious-ring:hm", "malicious-ring"]
PAPER_ATTACKS = ["alie-local", "ipm-local", "dissensus-local"]
PAPER_DEFENCES = ["clip", "trimmed", "rfa", "plain", "centered-clip"]
PAPER = {"section": "paper", "rounds": 300, "lr": 0.01, "momentum": 0.9, "local_steps": 1,
         "clip": 0.1, "trim": 2}


def _grid(graphs, attacks, defences, **extra):
    return [{"graph": g, "attack": a, "defence": d, **extra}
            for g in graphs for a in attacks for d in defences]


#: The existing grid first (its points keep their parameters, so their streams and numbers),
#: then the reference attacks against every defence, the old attacks against the new
#: defences, momentum, and the paper's setting.
POINTS = (_grid(GRAPHS, ATTACKS, DEFENCES)
          + _grid(GRAPHS, LOCAL_ATTACKS, DEFENCES + NEW_DEFENCES)
          + _grid(GRAPHS, ATTACKS, NEW_DEFENCES)
          + _grid(GRAPHS, MOMENTUM_ATTACKS, MOMENTUM_DEFENCES, **MOMENTUM)
          + _grid(PAPER_GRAPHS, PAPER_ATTACKS, PAPER_DEFENCES, **PAPER))

REPLICATIONS = 3
#: Metrics that are probabilities (test accuracies: fractions of a test set): intervals inside [0, 1] in summary.csv.
RATES = {f"accuracy_{k}": None for k in range(1, 5)}
SEED = 17

QUICK = {
    "BASE": dict(BASE, rounds=60),
    "POINTS": (_grid(["complete", "ring"], ["none", "stubborn", "alie", "ipm", "labelflip"], DEFENCES)
               + _grid(["complete", "ring"], LOCAL_ATTACKS,
                       ["plain", "clip", "median", "krum", "rfa", "centered-clip", "mean"])
               + _grid(["complete"], ["alie-local", "bitflip"], ["plain", "centered-clip"], **MOMENTUM)
               + _grid(PAPER_GRAPHS, PAPER_ATTACKS, ["clip", "trimmed"], **dict(PAPER, rounds=100))),
    "REPLICATIONS": 2,
}

#: Adversary values: stubborn b, ALIE z, IPM eps, dissensus eps (the local versions the same,
#: so that a row differs from its global twin by the scope only).
VALUES = {"stubborn": 10.0, "alie": 1.0, "ipm": 0.1, "dissensus": 1.0, "signflip": None,
          "bitflip": None}
#: The paper's attack parameters (honest_majority.py: ALIE10, IPM's fixed 0.1, dissensus1.5).
PAPER_VALUES = {"alie": 10.0, "ipm": 0.1, "dissensus": 1.5}
#: Checkpoints, as fractions of the horizon.
CHECKPOINTS = (0.25, 0.5, 0.75, 1.0)
#: Final global test accuracy (%) at iteration 870 of the reference runs (their
#: outputs/honest_majority/exp/acc.csv, epfml/byzantine-robust-decentralized-optimizer,
#: MIT licence): {(aggregator, honest majority): {attack: accuracy}}.
PAPER_ACCURACY = {
    ("clip", True): {"alie": 94.1, "ipm": 91.1, "dissensus": 89.4},
    ("clip", False): {"alie": 94.2, "ipm": 91.5, "dissensus": 90.1},
    ("trimmed", True): {"alie": 11.3, "ipm": 84.8, "dissensus": 90.3},
    ("trimmed", False): {"alie": 9.8, "ipm": 11.3, "dissensus": 9.8},
    ("rfa", True): {"alie": 9.8, "ipm": 11.3, "dissensus": 89.3},
    ("rfa", False): {"alie": 9.8, "ipm": 11.3, "dissensus": 9.8},
}


# ----------------------------------------------------------------------------- model


def malicious_ring(honest_majority: bool, g: int = 5) -> nx.Graph:
    """The reference honest-majority graph: ``g`` honest nodes on a ring, nodes ``i + g`` and
    ``i + 2 g`` Byzantine leaves of node ``i``, and (no honest majority) leaf ``3 g`` on node 0;
    edge ``weight`` their lazy Metropolis weights ``W / (2 - w_min)`` (``w_min`` the least honest
    self weight), so that ``mixing = "weight"`` mixes as their ``normalize`` option does."""
    G = nx.Graph()
    n = 3 * g + (0 if honest_majority else 1)
    G.add_nodes_from(range(n))
    G.add_edges_from([(i, (i + 1) % g) for i in range(g)])
    for i in range(g):
        G.add_edges_from([(i, i + g), (i, i + 2 * g)])
    if not honest_majority:
        G.add_edge(0, 3 * g)
    W = metropolis_weights(G).toarray()
    w_min = float(np.min(1.0 - W.sum(axis=1)[:g]))
    for a, b in G.edges():
        G[a][b]["weight"] = float(W[a, b] / (2.0 - w_min))
    return G


def _paper_gossip(p: dict[str, Any], kind: str, scope: str, clip: float | None, adaptive: bool):
    hm = p["graph"].endswith(":hm")
    G = malicious_ring(hm)
    n = G.number_of_nodes()
    pos = tuple(range(5, n))
    return GossipConfig(topology=p["graph"], graph=G, protocol="neighbourhood", rounds=p["rounds"],
                        record_every=max(1, p["rounds"] // 20), adversary=kind,
                        adversary_nodes=pos if kind != "none" else None,
                        adversary_value=PAPER_VALUES.get(kind), attack_scope=scope,
                        clip=clip, adaptive_clip=adaptive, size=p["size"], init_std=0.0,
                        latency=p["latency"], bandwidth=p["bandwidth"], mixing="weight")


def _krum_f(g: GossipConfig, adversaries: int) -> int:
    """Krum's f: the number of adversaries, or the most Krum allows at the node with fewest inputs."""
    deg = (np.full(g.n, g.n - 1) if g.complete else
           np.array([d for _, d in g.network_graph.degree()]))
    return int(min(adversaries, (int(deg.min()) + 1 - 2) // 2))


def config_of(p: dict[str, Any]):
    """The :class:`~sim.learning.GossipTrainingConfig` of a point."""
    attack, flip = p["attack"], p["attack"] == "labelflip"
    kind = "none" if attack in ("none", "labelflip") else attack.removesuffix("-local")
    scope = "local" if attack.endswith("-local") else "global"
    d = p["defence"]
    bucket = 2 if d.endswith("-bucketing") else 0
    d = d.removesuffix("-bucketing")
    clip = p["clip"] if d == "clip" else None
    if p.get("section") == "paper":
        g = _paper_gossip(p, kind, scope, clip, d == "adaptive")
    else:
        pos = place_adversaries(p["graph"], p["adversaries"], "random", nodes=p["nodes"],
                                topology_seed=0, seed=p["objective_seed"])
        link = f"latency={p['latency']},bandwidth={p['bandwidth']}"
        spec = p["graph"] + ("," if ":" in p["graph"] else ":") + link
        g = GossipConfig(topology=spec, nodes=p["nodes"], topology_seed=0,
                         protocol="neighbourhood", rounds=p["rounds"],
                         record_every=max(1, p["rounds"] // 20), adversary=kind,
                         adversary_nodes=pos if kind != "none" else None,
                         adversary_value=VALUES.get(kind), attack_scope=scope, clip=clip,
                         adaptive_clip=d == "adaptive", size=p["size"], init_std=0.0)
    lc = LearningConfig(objective="logistic", data=p["data"], lr=p["lr"],
                        local_steps=p["local_steps"], grad_noise=p["grad_noise"],
                        step_time=(p["step_time"],),
                        objective_seed=p["objective_seed"], momentum=p.get("momentum", 0.0))
    rule = d if d in ("farthest", "median", "trimmed", "krum", "rfa", "centered-clip", "mean") \
        else "none"
    extra: dict[str, Any] = {}
    if rule == "krum":
        extra["krum_f"] = _krum_f(g, len(g.adversary_positions) + (p["adversaries"] if flip else 0))
    if rule == "centered-clip":
        extra["cc_tau"] = p["clip"]
    if flip:
        flipped = tuple(range(5, g.n)) if p.get("section") == "paper" else place_adversaries(
            p["graph"], p["adversaries"], "random", nodes=p["nodes"], topology_seed=0,
            seed=p["objective_seed"])
    else:
        flipped = ()
    return with_learning(g, lc, rule=rule, trim=p["trim"], flipped=flipped, bucketing=bucket,
                         **extra)


def bound_terms(cfg) -> dict[str, float]:
    """delta_max, zeta^2 and gamma of ClippedGossip's bound for the point's graph."""
    g = cfg.gossip
    G = g.network_graph
    W = mixing_weights(G, g.mixing).toarray()
    np.fill_diagonal(W, 1.0 - W.sum(axis=1))
    honest = cfg.honest
    byz = ~honest
    delta = float(W[np.ix_(honest, byz)].sum(axis=1).max()) if byz.any() else 0.0
    sym = bool(np.array_equal(W, W.T))
    lam = np.sort(np.abs(np.linalg.eigvalsh(W) if sym else np.linalg.eigvals(W)))
    gamma = float(1.0 - lam[-2])
    obj = training_objective(cfg)
    xs = obj.optimum
    hidx = np.flatnonzero(honest)
    grads = obj.gradient(np.tile(xs, (hidx.size, 1)), hidx)
    zeta2 = float(np.mean(np.einsum("ij,ij->i", grads, grads)))
    return {"delta_max": delta, "zeta2": zeta2, "gamma": gamma,
            "bound": delta * zeta2 / gamma**2 if gamma > 0 else float("inf")}


def model(config: dict[str, Any], streams: Streams) -> dict[str, Any]:
    """One replication: accuracy and distance to x* at the checkpoints, and the bound terms."""
    cfg = config_of(config)
    if not nx.is_connected(cfg.gossip.network_graph):  # pragma: no cover - fixed graphs
        raise ValueError("graph not connected")
    out = gossip_training_model(cfg, streams)
    steps, time = np.asarray(out["steps"]), np.asarray(out["time"])
    res: dict[str, Any] = {}
    for q, frac in enumerate(CHECKPOINTS, start=1):
        k = int(np.searchsorted(steps, frac * steps[-1]))
        res[f"time_{q}"] = float(time[k])
        res[f"accuracy_{q}"] = float(out["test_accuracy"][k])
        res[f"distance_{q}"] = float(out["distance_to_optimum"][k])
    res["accuracy_at_optimum"] = float(training_objective(cfg).test_accuracy(
        training_objective(cfg).optimum))
    res.update(bound_terms(cfg))
    return res


# ----------------------------------------------------------------------------- analysis


def _scope(attack: str) -> str:
    """The scope convention of an attack name (module docstring)."""
    if attack.endswith("-local"):
        return "local"
    return "global" if attack in ("alie", "ipm", "dissensus") else "-"


def _label(r: dict[str, Any]) -> str:
    """The figure group of a row: its section, or momentum."""
    if r.get("section") == "paper":
        return "paper_"
    return "momentum_" if r.get("momentum") else ""


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Accuracy against simulated time per defence (one figure per graph and attack); tables."""
    from sim.plotting import plot_sweep
    from sim.results import write_csv

    rows = results.summary()
    out_dir = Path(out_dir)
    for label in dict.fromkeys(_label(r) for r in rows):
        part = [r for r in rows if _label(r) == label]
        for graph in dict.fromkeys(r["graph"] for r in part):
            for attack in dict.fromkeys(r["attack"] for r in part):
                series = []
                for r in part:
                    if r["graph"] != graph or r["attack"] != attack:
                        continue
                    for q in range(1, len(CHECKPOINTS) + 1):
                        series.append({"defence": r["defence"], "time": r[f"time_{q}_mean"],
                                       **{f"{m}_{s}": r[f"{m}_{q}_{s}"]
                                          for s in ("mean", "low", "high")
                                          for m in ("accuracy", "distance")}})
                if not series:
                    continue
                name = label + graph.split(":")[0] + ("-hm" if graph.endswith(":hm") else "")
                title = (f"reference honest-majority setting: {attack} on {graph}" if label == "paper_"
                         else f"digits, n = 20, 10% adversaries: {attack} on {name}")
                plot_sweep(series, "time", "accuracy", out_dir / f"accuracy_{name}_{attack}.png",
                           group="defence", xlabel="simulated wall time",
                           ylabel="held-out test accuracy of the honest mean", title=title)
                plot_sweep(series, "time", "distance", out_dir / f"distance_{name}_{attack}.png",
                           group="defence", xlabel="simulated wall time", logy=True,
                           ylabel="|honest mean - x*|", title=title)
    last = len(CHECKPOINTS)
    table = [{"graph": r["graph"], "attack": r["attack"], "defence": r["defence"],
              "accuracy": r[f"accuracy_{last}_mean"], "accuracy_low": r[f"accuracy_{last}_low"],
              "accuracy_high": r[f"accuracy_{last}_high"],
              "distance": r[f"distance_{last}_mean"], "time": r[f"time_{last}_mean"],
              "accuracy_at_optimum": r["accuracy_at_optimum_mean"],
              "delta_max": r["delta_max_mean"], "zeta2": r["zeta2_mean"],
              "gamma": r["gamma_mean"], "bound": r["bound_mean"],
              "scope": _scope(r["attack"]), "momentum": r.get("momentum", 0.0),
              "section": r.get("section", "grid")} for r in rows]
    write_csv(table, out_dir / "final_table.csv")
    paper = []
    for r in rows:
        if r.get("section") != "paper":
            continue
        hm = r["graph"].endswith(":hm")
        ref = PAPER_ACCURACY.get((r["defence"], hm), {}).get(r["attack"].removesuffix("-local"))
        paper.append({"honest_majority": hm, "attack": r["attack"], "defence": r["defence"],
                      "accuracy": r[f"accuracy_{last}_mean"],
                      "accuracy_low": r[f"accuracy_{last}_low"],
                      "accuracy_high": r[f"accuracy_{last}_high"],
                      "distance": r[f"distance_{last}_mean"],
                      "reference_accuracy": (ref / 100.0) if ref is not None else float("nan"),
                      "delta_max": r["delta_max_mean"], "gamma": r["gamma_mean"]})
    if paper:
        write_csv(paper, out_dir / "paper_table.csv")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
