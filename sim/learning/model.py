"""Gossip training: one replication, the report of many, adversary placement.

:class:`GossipTrainingConfig` joins a :class:`~sim.gossip.GossipConfig` (network,
protocol, adversaries, clipping, noise, clock) and a
:class:`~sim.learning.config.LearningConfig` (objective, local steps), plus
what only training needs: a neighbourhood aggregation rule
(:mod:`sim.learning.robust`) and the nodes of a label-flipping data attack.
:func:`gossip_training_model` runs it on the gossip engines through their node-update
hook (:class:`~sim.learning.update.LocalSGD`); every protocol and engine runs
training the same way. Records are taken over the honest nodes (adversaries
and label flippers left out) and carry the training series of
:data:`~sim.learning.update.METRICS` beside the gossip ones.

The exact references on quadratics (:mod:`sim.analytic.learning`) register
with :mod:`sim.engines` under the family ``"gossip-training"``;
:func:`training_predictions` gathers those that apply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from .. import engines as registry
from ..engines import Applies, Reference
from ..errors import check, check_choice, check_int, check_memory, check_nonnegative
from ..gossip import GossipConfig, GossipSystem, Records, build_gossip_graph, summarize_runs
from ..gossip.model import model_output
from ..results import mean_ci, within
from ..rng import Streams
from .config import LearningConfig, build_objective
from .robust import BUCKETING_FORMS, KRUM_VARIANTS, RULE_NAMES, make_rule
from .update import METRICS, LocalSGD, training_metrics

__all__ = [
    "RULES",
    "PLACEMENTS",
    "GossipTrainingConfig",
    "TrainingRecords",
    "place_adversaries",
    "training_objective",
    "gossip_training_model",
    "training_engine",
    "summarize_training",
    "training_predictions",
    "with_learning",
]

#: Aggregation rules of neighbourhood rounds beyond the gossip defences (:mod:`sim.learning.robust`).
RULES = RULE_NAMES
#: How adversary positions are chosen when not given.
PLACEMENTS = ("first", "random", "degree")
#: Largest ``n * m * steps`` (per coordinate) for which the exact second
#: moment is evaluated for a report, and ``n * steps`` for the first moment.
EXACT_BUDGET = 2e9


@dataclass(frozen=True)
class GossipTrainingConfig:
    """A gossip-training experiment, validated before anything runs.

    Parameters
    ----------
    gossip : GossipConfig
        Network, protocol, rounds, adversaries (the ``adversary`` kinds of
        :mod:`sim.adversaries`), clip, noise, clock. For ``logistic`` its
        ``dim`` must be the dataset's (:meth:`LearningConfig.dimension`).
    learning : LearningConfig
        The objective and local steps (``objective`` not ``"none"``).
    rule : {"none", "farthest", "median", "trimmed", "krum", "rfa", "centered-clip", "mean"}
        Aggregation of ``neighbourhood`` / ``allreduce`` rounds instead of
        mixing (clipping radius from the farthest value received,
        coordinate-wise median, trimmed mean, Krum, RFA, centred clipping,
        plain mean; :mod:`sim.learning.robust`).
    trim : int
        Values trimmed at each end by ``trimmed``.
    flipped : tuple of int
        Positions of label-flipping nodes (``logistic``): they follow the
        protocol and train on labels ``C - 1 - y``; they are not honest.
    krum_f : int or None
        Adversaries Krum assumes among a node's inputs (default: every
        adversary and flipper of the config, the reference code's ``f``);
        ``2 f + 2`` must not exceed the inputs of any aggregating node.
    krum_m : int
        Values multi-Krum selects (1: Krum).
    krum_variant : {"textbook", "reference"}
        Krum's scoring and selection (:class:`~sim.learning.robust.Krum`).
    rfa_iters, rfa_nu : int, float
        Smoothed Weiszfeld iterations ``T`` and smoothing ``nu`` of ``rfa``.
    cc_tau, cc_iters : float, int
        Radius and iterations per aggregation of ``centered-clip``.
    bucketing : int
        Bucket size ``s`` of a bucketing wrapper around the rule (0: none;
        with ``rule = none`` it wraps plain or fixed-radius mixing).
    bucketing_form : {"repeat", "permute"}
        The reference decentralised form or the centralised one.
    """

    gossip: GossipConfig
    learning: LearningConfig = LearningConfig(objective="quadratic")
    rule: str = "none"
    trim: int = 1
    flipped: tuple[int, ...] = ()
    krum_f: int | None = None
    krum_m: int = 1
    krum_variant: str = "textbook"
    rfa_iters: int = 8
    rfa_nu: float = 0.1
    cc_tau: float = 10.0
    cc_iters: int = 1
    bucketing: int = 0
    bucketing_form: str = "repeat"
    _honest: tuple[bool, ...] = field(default=(), init=False, repr=False, compare=False)
    #: ``(nodes, of)`` of :meth:`trim_lowered`, counted by the rule checks (one graph build)
    _trim_lowered: tuple[int, int] = field(default=(0, 0), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        g, lc = self.gossip, self.learning
        check(lc.trains, "objective", "quadratic or logistic for gossip training", lc.objective)
        check_choice("rule", self.rule, RULES)
        check_int("trim", self.trim, low=0)
        if self.rule != "none":
            check(g.protocol in ("neighbourhood", "allreduce"), "rule",
                  f"none for protocol {g.protocol} ({self.rule} needs the whole "
                  "neighbourhood: protocol neighbourhood or allreduce)", self.rule)
            check(g.clip is None and not g.adaptive_clip, "clip",
                  f"unset with the {self.rule} rule", g.clip if g.clip is not None else "adaptive")
        n = g.n
        adv = set(g.adversary_positions)
        flips = tuple(check_int("adversary_nodes", p, low=0, high=n - 1) for p in self.flipped)
        object.__setattr__(self, "flipped", flips)
        if flips:
            check(lc.objective == "logistic", "adversary", "stubborn, alie, dissensus, signflip or "
                  "ipm for objective quadratic (labelflip needs the logistic task)", "labelflip")
            check(len(set(flips)) == len(flips), "adversary_nodes", "distinct positions", flips)
            check(not adv & set(flips), "adversary_nodes", "not both flippers and adversaries",
                  sorted(adv & set(flips)))
        honest = np.ones(n, dtype=bool)
        honest[list(adv | set(flips))] = False
        check(bool(honest.any()), "adversary_nodes", f"fewer than the {n} nodes", len(adv | set(flips)))
        object.__setattr__(self, "_honest", tuple(honest.tolist()))
        if g.engine == "compiled":
            check(lc.objective == "quadratic", "engine", "des or auto for objective "
                  f"{lc.objective} (compiled: local steps are compiled on quadratic objectives "
                  "only)", g.engine)
        self._check_rules(honest)
        want = lc.dimension(g.dim)
        check(g.dim == want, "dim", f"{want} for data {lc.data} (the dataset's; build the gossip "
              "config with dim = LearningConfig.dimension())", g.dim)
        training = honest | (~honest if g.adversary == "bitflip" else False)  # attackers that train
        lc.validate_for(n, g.dim, training, g.protocol)

    def _check_rules(self, honest: np.ndarray) -> None:
        """The new rules' parameters, bucketing, and Krum's condition at every aggregating node."""
        g = self.gossip
        check_int("krum_m", self.krum_m, low=1)
        check_choice("krum_variant", self.krum_variant, KRUM_VARIANTS)
        check_int("rfa_iters", self.rfa_iters, low=1)
        check_nonnegative("rfa_nu", self.rfa_nu)
        check_nonnegative("cc_tau", self.cc_tau)
        check_int("cc_iters", self.cc_iters, low=1)
        check_int("bucketing", self.bucketing, low=0)
        check_choice("bucketing_form", self.bucketing_form, BUCKETING_FORMS)
        if self.krum_f is not None:
            check_int("krum_f", self.krum_f, low=0)
        if self.bucketing:
            check(g.protocol in ("neighbourhood", "allreduce"), "bucketing", f"0 for protocol "
                  f"{g.protocol} (bucketing needs the whole neighbourhood: protocol neighbourhood "
                  "or allreduce)", self.bucketing)
            check(not g.adaptive_clip, "bucketing", "0 with adaptive clipping (the oracle radius "
                  "needs to know which neighbour sent what)", self.bucketing)
            # the repeat form draws m s indices per node and gathers m s values of dim d
            m = int(self._inputs_per_node(honest).max())
            s = self.bucketing if self.bucketing_form == "repeat" else 1
            check_memory("bucketing", self.bucketing,
                         float(g.n) * m * s * 8.0 * (1 + g.dim))
        if self.rule == "trimmed":
            # A node whose m values a trim of b would empty lowers b until one stays (the median),
            # as the reference code's aggregator.TM does (ClippedGossip, He et al. 2022), so the
            # authors' settings run as theirs do; a trim that empties every node's values is no
            # trimmed mean anywhere and is refused (trim_lowered() counts the nodes that lower it)
            inputs = self._inputs_per_node(honest)
            high = int(inputs.max())
            object.__setattr__(self, "_trim_lowered",
                               (int(np.count_nonzero(2 * self.trim >= inputs)), int(inputs.size)))
            check(2 * self.trim < high, "trim", f"at most {(high - 1) // 2} (a trimmed mean keeps "
                  f"m - 2 trim values; the node with most inputs has m = {high})", self.trim)
        if self.rule == "krum":
            inputs = self._inputs_per_node(honest)
            f = self.krum_f_used
            low = int(inputs.min())
            check(2 * f + 2 <= low, "krum_f", f"at most (m - 2) / 2 = {(low - 2) // 2} (Krum needs "
                  f"2 f + 2 <= the m values every aggregating node has; the fewest here is "
                  f"{low}{'' if self.krum_f is not None else '; the default f is the number of adversaries'})",
                  f)
            check(self.krum_m <= low, "krum_m", f"at most the {low} values the node with fewest "
                  "inputs aggregates", self.krum_m)

    def trim_lowered(self) -> tuple[int, int]:
        """``(nodes, of)``: the aggregating nodes whose values ``trim`` would empty (they keep
        the median, as the reference code lowers its trim), out of how many; ``(0, 0)`` for a
        rule other than ``trimmed``."""
        return self._trim_lowered

    def _inputs_per_node(self, honest: np.ndarray) -> np.ndarray:
        """How many values each aggregating node's rule sees (own included; bucket means)."""
        g = self.gossip
        net = build_gossip_graph(g)
        deg = (np.full(g.n, g.n - 1) if net.complete or g.protocol == "allreduce"
               else np.diff(net.indptr))
        agg = honest | self.flipped_mask
        if g.adversary == "bitflip":
            agg = np.ones(g.n, dtype=bool)
        m = deg[agg] + 1
        if self.bucketing and self.bucketing_form == "permute":
            m = -(-m // self.bucketing)
        return m

    @property
    def krum_f_used(self) -> int:
        """Krum's ``f``: the given one, or every adversary and label flipper."""
        if self.krum_f is not None:
            return int(self.krum_f)
        return len(self.gossip.adversary_positions) + len(self.flipped)

    @property
    def honest(self) -> np.ndarray:
        """Honest nodes (neither adversaries nor label flippers)."""
        return np.array(self._honest, dtype=bool)

    @property
    def flipped_mask(self) -> np.ndarray:
        """Label-flipping nodes."""
        m = np.zeros(self.gossip.n, dtype=bool)
        m[list(self.flipped)] = True
        return m


def place_adversaries(topology: str, k: int, rule: str, *, nodes: int | None = None,
                      topology_seed: int | None = None, seed: int = 0) -> tuple[int, ...]:
    """Positions of ``k`` adversaries by a placement rule.

    Parameters
    ----------
    topology, nodes, topology_seed
        As in :class:`~sim.gossip.GossipConfig`.
    k : int
    rule : {"first", "random", "degree"}
        The first ``k`` positions; ``k`` uniformly random ones (stream
        ``placement`` of ``seed``); the ``k`` of highest degree (ties to the
        lower position).
    seed : int

    Returns
    -------
    tuple of int
        Sorted positions.
    """
    check_choice("placement", rule, PLACEMENTS)
    probe = GossipConfig(topology=topology, nodes=nodes, topology_seed=topology_seed,
                         protocol="edge")
    n = probe.n
    k = check_int("num_adversaries", k, low=0, high=n - 1)
    if rule == "first" or k == 0:
        return tuple(range(k))
    if rule == "random":
        rng = Streams(int(seed)).rng("placement")
        return tuple(sorted(int(v) for v in rng.choice(n, size=k, replace=False)))
    net = build_gossip_graph(probe)
    deg = np.full(n, n - 1) if net.complete else np.diff(net.indptr)
    order = np.lexsort((np.arange(n), -deg))
    return tuple(sorted(int(v) for v in order[:k]))


@lru_cache(maxsize=16)
def _objective(learning: LearningConfig, n: int, dim: int, honest: tuple[bool, ...],
               flipped: tuple[bool, ...]) -> Any:
    return build_objective(learning, n, dim, np.array(honest), np.array(flipped))


def training_objective(config: GossipTrainingConfig) -> Any:
    """The objective of ``config`` (built once per process and reused)."""
    return _objective(config.learning, config.gossip.n, config.gossip.dim, config._honest,
                      tuple(config.flipped_mask.tolist()))


def _rule(config: GossipTrainingConfig) -> Any:
    """The aggregation rule of a config (a fresh object: rules may keep state per run)."""
    g = config.gossip
    return make_rule(config.rule, trim=config.trim, krum_f=config.krum_f_used,
                     krum_m=config.krum_m, krum_variant=config.krum_variant,
                     rfa_iters=config.rfa_iters, rfa_nu=config.rfa_nu, cc_tau=config.cc_tau,
                     cc_iters=config.cc_iters, bucketing=config.bucketing,
                     bucketing_form=config.bucketing_form, clip=g.clip)


class TrainingRecords(Records):
    """Gossip records over the honest rows only, plus the training series.

    Parameters
    ----------
    steps, dim, target, tau
        As :class:`~sim.gossip.Records`.
    objective : Objective
    rows : numpy.ndarray or None
        Which of the engine's honest rows are honest (None: all); the engine
        counts label flippers as honest since they follow the protocol.
    """

    def __init__(self, steps: np.ndarray, dim: int, target: np.ndarray | None, tau: float | None,
                 objective: Any, rows: np.ndarray | None) -> None:
        super().__init__(steps, dim, target, tau)
        self.objective = objective
        self.rows = rows
        self.training = {m: np.full(steps.size, np.nan) for m in METRICS}

    def record(self, k: int, time: float, exchanges: int, hx: np.ndarray) -> None:
        """Fill record ``k`` (gossip series and training series) from the honest rows."""
        if self.rows is not None:
            hx = hx[self.rows]
        super().record(k, time, exchanges, hx)
        for m, v in training_metrics(self.objective, hx).items():
            self.training[m][k] = v


def _update(config: GossipTrainingConfig) -> LocalSGD:
    g, lc = config.gossip, config.learning
    if lc.momentum == 0.0:
        return LocalSGD(training_objective(config), lc.lr, lc.local_steps, lc.grad_noise,
                        step_time=lc.node_step_times(g.n))
    return LocalSGD(training_objective(config), lc.lr, lc.local_steps, lc.grad_noise,
                    step_time=lc.node_step_times(g.n), momentum=lc.momentum,
                    plain=~config.honest)


def training_engine(config: GossipTrainingConfig) -> tuple[str, str]:
    """The gossip engine that runs ``config`` and why (``auto`` asks it with the training strategies).

    Returns
    -------
    tuple of str
        ``(name, reason)``, as :func:`sim.gossip.engines.select_engine` gives them.
    """
    from ..gossip.engines import engine_reason, select_engine, updating_engine

    if config.gossip.protocol != "async":  # the compiled edge engine hands updates to the DES
        return updating_engine(config.gossip)
    engine, reason = select_engine(config.gossip, defence=_rule(config), update=_update(config))
    base = select_engine(config.gossip)[0]
    return engine.name, (engine_reason(config.gossip) if engine is base else reason)


def gossip_training_model(config: GossipTrainingConfig, streams: Streams) -> dict[str, Any]:
    """One replication of gossip training (for :func:`sim.runner.replicate`).

    Parameters
    ----------
    config : GossipTrainingConfig
    streams : Streams
        The replication's streams; the gradient noise comes from the engines'
        ``update`` stream, the objective from ``learning.objective_seed``.

    Returns
    -------
    dict
        Everything :func:`sim.gossip.gossip_model` returns (over the honest
        nodes), the series of :data:`~sim.learning.update.METRICS`, and
        ``final_loss``, ``final_distance_to_optimum``,
        ``final_consensus_distance``, ``final_test_accuracy``, ``local_steps``
        (steps taken by all nodes).
    """
    g = config.gossip
    obj = training_objective(config)
    update = _update(config)
    system = GossipSystem(g, streams, defence=_rule(config), update=update)
    rows = None
    if config.flipped:
        rows = np.flatnonzero(config.honest[system.hidx])
    old = system.records
    system.records = TrainingRecords(old.steps, g.dim, old.target, old.tau, obj, rows)
    rec = system.run()
    out = model_output(g, system, rec)
    out["honest"] = int(config.honest.sum())
    for m in METRICS:
        out[m] = rec.training[m]
        out["final_" + m] = float(rec.training[m][-1])
    out["local_steps"] = int(update.steps_taken)
    return out


_ANY = (-math.inf, math.inf)
#: The range each final metric cannot leave, where its Student-t interval is cut: the test
#: accuracy is a fraction of the test set, the distances and the consensus distance are norms
#: (the interval of an accuracy of 2 replications went to [-0.56, 0.94] and [0.09, 1.16]).
METRIC_RANGE = {"test_accuracy": (0.0, 1.0), "distance_to_optimum": (0.0, math.inf),
                "sq_distance_to_optimum": (0.0, math.inf), "consensus_distance": (0.0, math.inf)}


def summarize_training(records: Sequence[Mapping[str, Any]], config: GossipTrainingConfig) -> dict[str, Any]:
    """Aggregate replications of :func:`gossip_training_model` into the ``dtsim gossip`` report.

    Returns
    -------
    dict
        :func:`sim.gossip.summarize_runs` (its ``predicted_*`` kept only when
        they still apply: ``lr = 0`` and no label flippers), each training
        series with ``_se``, ``final_*`` estimates with ``_ci``, ``objective``
        (per node as used, null for adversaries), ``optimum`` (``x*``) and the
        ``predicted_*`` of :func:`training_predictions`.
    """
    # local steps (lr > 0) or label flippers move the nodes besides averaging: D may grow
    out = summarize_runs(records, config.gossip,
                         averaging=None if config.learning.lr == 0 and not config.flipped else False)
    if config.learning.lr > 0 or config.flipped:
        for key in [k for k in out if k.startswith("predicted_") or k == "creep_bound"]:
            del out[key]
    out["honest"] = int(config.honest.sum())
    ok = [r for r in records if not r.get("error")]
    for m in METRICS:
        a = np.stack([np.asarray(r[m], dtype=float) for r in ok])
        mean = a.mean(axis=0)
        se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0]) if a.shape[0] > 1 else np.full_like(mean, np.nan)
        out[m], out[m + "_se"] = mean, se
        vals = [r["final_" + m] for r in ok]
        if all(math.isfinite(v) for v in vals):
            out["final_" + m + "_ci"] = within(mean_ci(vals), *METRIC_RANGE.get(m, _ANY))
    obj = training_objective(config)
    out["objective"] = obj.describe()
    out["optimum"] = np.asarray(obj.optimum, dtype=float)
    out.update(training_predictions(config))
    return out


# --------------------------------------------------------------------------- references


def _quadratic_arrays(c: GossipTrainingConfig) -> tuple[np.ndarray, np.ndarray]:
    obj = training_objective(c)
    return obj.curvature, obj.centres


def _stubborn(c: GossipTrainingConfig) -> dict[int, float]:
    return {int(p): b for p, b in c.gossip.stubborn_map.items()}


def _graph(c: GossipTrainingConfig) -> Any:
    return c.gossip.network_graph


def _exact_protocol(c: GossipTrainingConfig) -> tuple[bool, str]:
    g = c.gossip
    if c.learning.objective != "quadratic":
        return False, "a quadratic objective"
    if g.adversary not in ("none", "stubborn"):
        return False, "no adversary or stubborn ones (their rows fixed)"
    if g.clip is not None or g.adaptive_clip or c.rule != "none" or c.bucketing:
        return False, "no clip and plain mixing (the update must be affine)"
    if g.protocol == "matching" and not g.complete:
        return False, "matching on the complete graph (greedy maximal matchings have no closed E[W])"
    if g.protocol == "async":
        return False, "a synchronous protocol or random edges (async steps at each node's pace)"
    if g.n * g.rounds > EXACT_BUDGET:
        return False, "n * rounds <= 2e9"
    return True, (f"{g.protocol}: the update is affine in x"
                  + (" and the momentum buffers" if c.learning.momentum else "")
                  + ", so E[x'] = E[W G](E[x])")


def _mixing(c: GossipTrainingConfig) -> Any:
    """The off-diagonal mixing weights of a neighbourhood config (None: Metropolis)."""
    g = c.gossip
    if g.protocol != "neighbourhood" or g.mixing == "metropolis":
        return None
    from ..gossip.mixing import mixing_weights

    return mixing_weights(_graph(c), g.mixing)


class TrainingFirstMoment(Reference):
    """Exact E[x_t] and its fixed point on quadratics (:func:`~sim.analytic.learning.training_mean`)."""

    name = "training_first_moment"
    family = "gossip-training"
    metrics = ("predicted_honest_mean", "predicted_equilibrium_mean", "predicted_bias",
               "predicted_attack_bias", "predicted_steps_to_equilibrium")

    def applies(self, config: GossipTrainingConfig) -> Applies:
        ok, why = _exact_protocol(config)
        return Applies(ok, why if ok else "needs " + why)

    def predict(self, c: GossipTrainingConfig) -> dict[str, Any]:
        from ..analytic import learning as L

        g, lc = c.gossip, c.learning
        a, cc = _quadratic_arrays(c)
        stub = _stubborn(c)
        graph = _graph(c) if g.protocol in ("edge", "neighbourhood") else None
        more = {"momentum": lc.momentum, "weights": _mixing(c), "gossip_rounds": g.gossip_rounds}
        mean = L.training_mean(g.protocol, a, cc, lc.lr, lc.local_steps, g.rounds, graph=graph,
                               stubborn=stub, x0=g.init_mean, record_every=g.record_every, **more)
        hm = mean.mean(axis=1)
        out: dict[str, Any] = {"predicted_honest_mean": hm[:, 0] if g.dim == 1 else hm}
        if lc.lr > 0 or stub:
            eq = L.training_equilibrium(g.protocol, a, cc, lc.lr, lc.local_steps, graph=graph,
                                        stubborn=stub, **more)
            out["predicted_equilibrium_mean"] = eq.mean(axis=0)
            xs = training_objective(c).optimum
            out["predicted_bias"] = eq.mean(axis=0) - xs
            if stub and lc.lr > 0 and more["weights"] is None:
                b = L.stubborn_training_bias(g.protocol, a, cc, lc.lr, lc.local_steps, stub,
                                             graph=graph, momentum=lc.momentum,
                                             gossip_rounds=g.gossip_rounds)
                out["predicted_attack_bias"] = b["attack_bias"]
            out["predicted_steps_to_equilibrium"] = L.steps_to_equilibrium(
                g.protocol, a, cc, lc.lr, lc.local_steps, graph=graph, stubborn=stub,
                x0=g.init_mean, tol=0.01, max_steps=max(10 * g.rounds, 10_000), **more)
        return out


class TrainingSecondMoment(Reference):
    """Exact E[consensus distance], E[|m - x*|^2] and E[loss] of random-edge training."""

    name = "training_second_moment"
    family = "gossip-training"
    metrics = ("predicted_consensus_distance", "predicted_sq_distance_to_optimum", "predicted_loss")

    def applies(self, config: GossipTrainingConfig) -> Applies:
        from ..analytic.learning import MAX_TRAINING_EXACT_NODES

        ok, why = _exact_protocol(config)
        g = config.gossip
        if ok and g.protocol != "edge":
            ok, why = False, "protocol edge (random single edges)"
        if ok and config.learning.momentum:
            ok, why = False, "no momentum"
        if ok and g.n > MAX_TRAINING_EXACT_NODES:
            ok, why = False, f"at most {MAX_TRAINING_EXACT_NODES} nodes"
        if ok:
            m = g.n * (g.n - 1) / 2 if g.complete else len(build_gossip_graph(g).u)
            if g.n * m * g.rounds * g.dim > EXACT_BUDGET:
                ok, why = False, "n * edges * steps * dim <= 2e9"
        return Applies(ok, "edge: Boyd-style recursion with drift and noise" if ok else "needs " + why)

    def predict(self, c: GossipTrainingConfig) -> dict[str, Any]:
        from ..analytic import learning as L

        g, lc = c.gossip, c.learning
        a, cc = _quadratic_arrays(c)
        ex = L.edge_training_moments(_graph(c), a, cc, lc.lr, lc.local_steps, g.rounds,
                                     grad_noise=lc.grad_noise, noise=g.noise,
                                     init_mean=g.init_mean, init_std=g.init_std,
                                     stubborn=_stubborn(c), record_every=g.record_every)
        return {"predicted_consensus_distance": ex["consensus_distance"],
                "predicted_sq_distance_to_optimum": ex["sq_distance_to_optimum"],
                "predicted_loss": ex["loss"]}


class DiLoCoFixedPoint(Reference):
    """Local steps then exact averaging: the fixed point ``sum w c / sum w``."""

    name = "diloco_fixed_point"
    family = "gossip-training"
    metrics = ("predicted_fixed_point",)

    def applies(self, c: GossipTrainingConfig) -> Applies:
        g = c.gossip
        ok = (c.learning.objective == "quadratic" and g.protocol == "allreduce"
              and g.adversary == "none" and c.learning.lr > 0 and c.rule == "none"
              and g.clip is None and not g.adaptive_clip and not c.bucketing
              and not c.learning.momentum)
        return Applies(ok, "allreduce after H local steps, all honest: w_i = 1 - (1 - eta a_i)^H"
                       if ok else "needs protocol allreduce, quadratic, all honest, lr > 0, no clip, "
                       "no momentum")

    def predict(self, c: GossipTrainingConfig) -> dict[str, Any]:
        from ..analytic import learning as L

        a, cc = _quadratic_arrays(c)
        return {"predicted_fixed_point": L.diloco_fixed_point(a, cc, c.learning.lr,
                                                              c.learning.local_steps)}


class IPMClipFixedPoint(Reference):
    """IPM attackers against a fixed clip on the complete graph: the honest mean's fixed point."""

    name = "ipm_clip_fixed_point"
    family = "gossip-training"
    metrics = ("predicted_ipm_fixed_point",)

    def applies(self, c: GossipTrainingConfig) -> Applies:
        g, lc = c.gossip, c.learning
        need = []
        if lc.objective != "quadratic" or g.dim != 1:
            need.append("a quadratic objective in dimension 1")
        if not (g.protocol == "allreduce" or (g.protocol == "neighbourhood" and g.complete)):
            need.append("neighbourhood rounds on the complete graph (or allreduce)")
        if g.adversary != "ipm":
            need.append("IPM attackers")
        if g.clip is None or not math.isfinite(g.clip) or g.adaptive_clip or c.rule != "none" \
                or c.bucketing:
            need.append("a fixed clipping radius and plain mixing")
        if g.noise > 0 or lc.lr <= 0 or c.flipped:
            need.append("lr > 0, no gossip noise, no label flippers")
        if need:
            return Applies(False, "needs " + "; ".join(need))
        return Applies(True, "piecewise-affine round map solved exactly on the piece of its limit "
                             "(the expected state's limit while no clip decision flips)")

    def predict(self, c: GossipTrainingConfig) -> dict[str, Any]:
        from ..analytic import learning as L

        g, lc = c.gossip, c.learning
        a, cc = _quadratic_arrays(c)
        h = c.honest
        fp = L.ipm_clip_fixed_point(a[h, 0], cc[h, 0], lc.lr, lc.local_steps, g.n, g.value, g.clip,
                                    momentum=lc.momentum, gossip_rounds=g.gossip_rounds)
        return {"predicted_ipm_fixed_point": np.array([fp["mean"]])}


for _ref in (TrainingFirstMoment(), TrainingSecondMoment(), DiLoCoFixedPoint(), IPMClipFixedPoint()):
    registry.register(_ref)


def training_predictions(config: GossipTrainingConfig) -> dict[str, Any]:
    """The exact ``predicted_*`` values that apply to ``config`` (family ``gossip-training``)."""
    return {m: p["value"] for m, p in registry.predictions("gossip-training", config).items()
            if p["value"] is not None}


def with_learning(gossip: GossipConfig, learning: LearningConfig, **kwargs: Any) -> GossipTrainingConfig:
    """A :class:`GossipTrainingConfig` whose gossip ``dim`` is set to the objective's dimension."""
    dim = learning.dimension(gossip.dim)
    if dim != gossip.dim:
        gossip = replace(gossip, dim=dim)
    return GossipTrainingConfig(gossip, learning, **kwargs)
