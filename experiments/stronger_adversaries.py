"""Stress test 9: stronger adversaries -- k attackers, three attacks, three defences.

Study B has one stubborn node on the complete graph, and the trust-region clip
``clip(diff, tau) / 2`` turns its capture of the honest mean into a creep of at
most ``tau / (n (n - 1))`` per single-pair step. This experiment asks:

1. *Does the creep bound generalise to k attackers as* ``k tau / (n (n - 1))``
   *per step?* ``k`` stubborn nodes far away (``b = 1000``), fixed ``tau``,
   ``edge`` gossip, on the complete graph, a ring (attackers spread out) and a
   Barabasi-Albert graph (attackers on the hubs). The creep is measured while
   every honest node is farther than ``tau`` from ``b`` and set against
   ``k tau / (n (n - 1))`` and against its degree-weighted form
   ``(sum_a h_a / m) tau / (2 h)`` (``h_a`` honest neighbours of attacker
   ``a``, ``m`` edges, ``h`` honest nodes), which is the exact creep on any
   graph in the far regime: a step picks an attacker's honest edge with
   probability ``sum_a h_a / m`` and then moves one honest node by ``tau / 2``.
2. *What do stronger attacks do?* ``stubborn`` (``b = 10``), ``alie`` (the
   honest mean plus ``z = 3`` honest standard deviations) and ``dissensus``
   (``eps = 3``), with ``k = 1`` and ``k = 4`` of ``n = 20`` nodes, against no
   defence, a fixed clip ``tau`` and adaptive (ClippedGossip oracle) clipping:
   the honest mean's drift ``|m_T - m_0|`` and the final disagreement after
   ``T`` steps. With a fixed clip, any attacker moves the honest mean by at
   most ``tau / (2 h)`` per contact, so ``T k tau / (n (n - 1))`` bounds the
   expected drift of every attack on the complete graph; it is checked too.

Run::

    dtsim run experiments/stronger_adversaries.py --quick
    python experiments/stronger_adversaries.py          # full run, about a minute on 2 cores

Writes ``creep.png``, ``attacks.png``, ``creep.csv``, ``attacks.csv`` and the
markdown tables, and prints the finding.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import sim.runner
from sim.gossip import GossipConfig, gossip_model
from sim.results import format_4g, mean_ci, write_tables
from sim.rng import Streams

# ----------------------------------------------------------------------------- parameters

NAME = "stronger_adversaries"
N = 20
TAU = 0.5
#: Part 1 (creep): far stubborn value, steps, attacker counts, graphs.
CREEP_B = 1000.0
CREEP_STEPS = 4000
CREEP_K = (1, 2, 4, 8)
GRAPHS = {"complete": "complete", "ring": "ring", "ba_hubs": "barabasi_albert:m=2"}
#: Part 2 (attacks x defences): steps, attacker counts, attack parameters.
ATTACK_STEPS = 1000
ATTACK_K = (1, 4)
ATTACKS = {"stubborn": 10.0, "alie": 3.0, "dissensus": 3.0}
DEFENCES = {"none": {}, "clip": {"clip": TAU}, "adaptive": {"adaptive_clip": True}}

BASE = GossipConfig(topology="complete", nodes=N, protocol="edge", rounds=ATTACK_STEPS,
                    record_every=50, topology_seed=0)


@lru_cache(maxsize=16)
def attacker_positions(spec: str, k: int) -> tuple[int, ...]:
    """Where the ``k`` attackers sit: spread evenly on a ring, on the highest-degree hubs elsewhere."""
    if spec == "ring":
        return tuple(int(round(i * N / k)) % N for i in range(k))
    if spec == "complete":
        return tuple(range(k))
    G = replace(BASE, topology=spec).network_graph
    nodes = list(G.nodes())
    order = sorted(range(N), key=lambda p: (-G.degree(nodes[p]), p))
    return tuple(sorted(order[:k]))


def _points() -> list[dict[str, Any]]:
    pts: list[dict[str, Any]] = []
    for spec in GRAPHS.values():
        for k in CREEP_K:
            pts.append({"topology": spec, "adversary": "stubborn", "adversary_value": CREEP_B,
                        "adversary_nodes": attacker_positions(spec, k), "num_adversaries": k, "clip": TAU,
                        "rounds": CREEP_STEPS, "record_every": 100})
    for att, val in ATTACKS.items():
        for k in ATTACK_K:
            for dfn in DEFENCES.values():
                pts.append({"adversary": att, "adversary_value": val, "num_adversaries": k, **dfn})
    return pts


POINTS = _points()
REPLICATIONS = 30
#: The drift (a norm) and the disagreements cannot be negative: intervals cut at 0.
NONNEGATIVE = ("drift", "final_disagreement", "initial_disagreement")
SEED = 9
QUICK = {
    "POINTS": [p for p in POINTS if (p.get("rounds") == CREEP_STEPS and len(p["adversary_nodes"]) in (1, 4)
                                     and p["topology"] != "ring")
               or (p.get("num_adversaries") == 4 and p["adversary"] != "stubborn")],
    "REPLICATIONS": 4,
}


# ----------------------------------------------------------------------------- closed forms


def creep_k(n: int, k: int, tau: float) -> float:
    """The proposed generalisation ``k tau / (n (n - 1))`` of Study B's creep bound (per step)."""
    return k * tau / (n * (n - 1))


def creep_degree_weighted(config: GossipConfig) -> float:
    """``(sum_a h_a / m) tau / (2 h)``: far-regime creep per step on any graph (exact)."""
    G = config.network_graph
    nodes = list(G.nodes())
    adv = {nodes[p] for p in config.adversary_positions}
    h = config.n - len(adv)
    ha = sum(1 for a in adv for v in G.neighbors(a) if v not in adv)
    return ha / G.number_of_edges() * float(config.clip or 0.0) / (2.0 * h)


# ----------------------------------------------------------------------------- model


def model(config: GossipConfig, streams: Streams) -> dict[str, Any]:
    """One replication: honest-mean drift, final disagreement, creep while far (with a clip)."""
    out = gossip_model(config, streams)
    k = len(config.adversary_positions)
    res = {
        "k": k,
        "drift": float(out["mean_shift"][-1]),
        "final_disagreement": float(out["final_disagreement"]),
        "initial_disagreement": float(out["disagreement"][0]),
        "creep_bound_k": creep_k(config.n, k, config.clip) if config.clip is not None else math.nan,
    }
    if config.clip is not None and config.adversary == "stubborn":
        res["creep_per_step"] = float(out.get("creep_per_step", math.nan))
        res["creep_steps"] = int(out.get("creep_steps", 0))
        res["creep_degree_weighted"] = creep_degree_weighted(config)
    return res


# ----------------------------------------------------------------------------- analysis


def _params(params: dict[str, Any]) -> dict[str, Any]:
    """Point parameters, with lists read back from a stored results folder (JSON text) as tuples."""
    out = dict(params)
    if isinstance(out.get("adversary_nodes"), str):
        out["adversary_nodes"] = tuple(json.loads(out["adversary_nodes"]))
    return out


def _graph_name(spec: str) -> str:
    return next((g for g, s in GRAPHS.items() if s == spec), spec)


def tables(results: sim.runner.SweepResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The creep rows (part 1) and the attack rows (part 2)."""
    creep, attacks = [], []
    for params, recs in results.point_records():
        cfg = replace(BASE, **_params(params))
        k = len(cfg.adversary_positions)
        if cfg.rounds == CREEP_STEPS and cfg.adversary_value == CREEP_B:
            e = mean_ci([float(r["creep_per_step"]) for r in recs])
            b_k = creep_k(cfg.n, k, TAU)
            b_w = float(recs[0]["creep_degree_weighted"])
            creep.append({
                "graph": _graph_name(cfg.topology), "k": k, "replications": len(recs),
                "creep_per_step": e.mean, "creep_low": e.low, "creep_high": e.high, "creep_se": e.se,
                "k_tau_over_n_n1": b_k, "sim_over_k_bound": e.mean / b_k,
                "k_bound_in_interval": bool(e.low <= b_k <= e.high),
                "degree_weighted": b_w, "degree_weighted_in_interval": bool(e.low <= b_w <= e.high),
                "far_steps": int(min(int(r["creep_steps"]) for r in recs)),
            })
        else:
            defence = "adaptive" if cfg.adaptive_clip else ("clip" if cfg.clip is not None else "none")
            dr = mean_ci([float(r["drift"]) for r in recs], lower=0.0)
            D = mean_ci([float(r["final_disagreement"]) for r in recs], lower=0.0)
            D0 = float(np.mean([float(r["initial_disagreement"]) for r in recs]))
            bound = cfg.rounds * creep_k(cfg.n, k, TAU) if defence == "clip" else math.nan
            attacks.append({
                "attack": cfg.adversary, "k": k, "defence": defence, "replications": len(recs),
                "drift": dr.mean, "drift_low": dr.low, "drift_high": dr.high,
                "drift_bound": bound,
                "drift_within_bound": bool(dr.low <= bound) if defence == "clip" else None,
                "final_D": D.mean, "final_D_low": D.low, "final_D_high": D.high, "initial_D": D0,
                "drift_median": float(np.median([float(r["drift"]) for r in recs])),
                "final_D_median": float(np.median([float(r["final_disagreement"]) for r in recs])),
            })
    return creep, attacks


def analyse(results: sim.runner.SweepResult, out_dir: Path) -> None:
    """Figures, tables and the printed finding."""
    from sim.plotting import plot_stress_panels

    out_dir = Path(out_dir)
    creep, attacks = tables(results)
    ccols = ["graph", "k", "creep_per_step", "creep_low", "creep_high", "k_tau_over_n_n1",
             "sim_over_k_bound", "degree_weighted", "far_steps"]
    acols = ["attack", "k", "defence", "drift", "drift_low", "drift_high", "drift_median", "drift_bound",
             "final_D", "final_D_low", "final_D_high", "final_D_median"]
    ct = write_tables(creep, ccols, out_dir, "creep",
                      f"Creep per step, k far stubborn nodes, tau={TAU}, n={N}", fmt=format_4g)
    at = write_tables(attacks, acols, out_dir, "attacks",
                      f"Attacks x defences, n={N}, {ATTACK_STEPS} edge steps, tau={TAU}", fmt=format_4g)
    series = []
    for i, g in enumerate(dict.fromkeys(r["graph"] for r in creep)):
        rs = sorted([r for r in creep if r["graph"] == g], key=lambda r: r["k"])
        ks = [r["k"] for r in rs]
        series.append({"label": f"{g}: simulated (95% CI)", "x": ks, "style": "points", "color": f"C{i}",
                       "mean": [r["creep_per_step"] for r in rs], "low": [r["creep_low"] for r in rs],
                       "high": [r["creep_high"] for r in rs], "ref_x": ks,
                       "ref_y": [r["degree_weighted"] for r in rs], "ref_style": ":",
                       "ref_label": f"{g}: degree-weighted (sum h_a/m) tau/(2h)"})
    kk = np.linspace(1, max(CREEP_K), 50)
    series.append({"label": None, "x": [], "mean": [], "color": "k", "ref_x": kk,
                   "ref_y": [creep_k(N, k, TAU) for k in kk], "ref_label": "k tau / (n (n-1))"})
    plot_stress_panels(
        [{"series": series, "xlabel": "stubborn attackers k", "ylabel": "creep of the honest mean per step",
          "logx": True, "logy": True, "title": f"Clipped creep, n={N}, tau={TAU}, b={CREEP_B:g}",
          "legend": "outside", "xticks": (list(CREEP_K), [str(k) for k in CREEP_K]), "rotate": False}],
        out_dir / "creep.png",
        caption="Edge gossip, one random edge per step; creep measured while every honest node is farther "
                "than tau from b (95% CI across replications). Black: the proposed k tau/(n(n-1)); dotted: "
                "the degree-weighted exact creep.")
    panels = []
    for metric, ylab in (("drift", "honest-mean drift |m_T - m_0|"), ("final_D", "final disagreement D_T")):
        sr = []
        for i, dfn in enumerate(DEFENCES):
            rs = [r for r in attacks if r["defence"] == dfn]
            labels = [f"{r['attack']} k={r['k']}" for r in rs]
            xs = list(range(len(rs)))
            sr.append({"label": dfn, "x": [x + 0.15 * (i - 1) for x in xs], "style": "points",
                       "color": f"C{i}", "mean": [r[metric] for r in rs],
                       "low": [r[f"{metric}_low"] for r in rs], "high": [r[f"{metric}_high"] for r in rs]})
            if metric == "drift" and dfn == "clip":
                sr[-1].update(ref_x=[x + 0.15 * (i - 1) for x in xs], ref_y=[r["drift_bound"] for r in rs],
                              ref_style="none", ref_marker="_", ref_label="clip: bound T k tau/(n(n-1))")
        panels.append({"series": sr, "xlabel": "attack, number of attackers k", "ylabel": ylab,
                       "logy": True, "title": ylab, "xticks": (list(range(len(labels))), labels)})
    plot_stress_panels(
        panels, out_dir / "attacks.png",
        caption=f"n={N}, complete graph, {ATTACK_STEPS} edge steps, honest start N(0,1), tau={TAU}; stubborn "
                f"b={ATTACKS['stubborn']:g}, ALIE z={ATTACKS['alie']:g}, dissensus eps={ATTACKS['dissensus']:g}. "
                "Points: mean with 95% CI over replications; bars: the fixed-clip drift bound.")
    print(f"\n{NAME}: creep per step with k far stubborn nodes (tau={TAU}, n={N})\n{ct}\n")
    print(f"{NAME}: attacks x defences after {ATTACK_STEPS} steps (n={N})\n{at}\n")
    for r in creep:
        print(f"  creep {r['graph']} k={r['k']}: {r['creep_per_step']:.5f} [{r['creep_low']:.5f}, "
              f"{r['creep_high']:.5f}] vs k tau/(n(n-1)) = {r['k_tau_over_n_n1']:.5f} "
              f"(ratio {r['sim_over_k_bound']:.2f}, {'inside' if r['k_bound_in_interval'] else 'OUTSIDE'}); "
              f"degree-weighted {r['degree_weighted']:.5f} "
              f"({'inside' if r['degree_weighted_in_interval'] else 'OUTSIDE'})")
    for r in attacks:
        extra = (f", bound {r['drift_bound']:.3f} ({'respected' if r['drift_within_bound'] else 'EXCEEDED'})"
                 if r["defence"] == "clip" else "")
        print(f"  {r['attack']} k={r['k']} defence={r['defence']}: drift {r['drift']:.3f} "
              f"[{r['drift_low']:.3f}, {r['drift_high']:.3f}] (median {r['drift_median']:.3g}){extra}; "
              f"final D {r['final_D']:.3g} (median {r['final_D_median']:.3g}; start {r['initial_D']:.3g})")


if __name__ == "__main__":
    from sim.cli import main_for

    sys.exit(main_for(__file__))
