"""Gossip's engines and exact references, registered with :mod:`sim.engines` (family ``"gossip"``).

Three engines answer gossip configs: ``vector`` (matching rounds with numpy,
:class:`~sim.gossip.matching.MatchingVector`), ``des`` (per-node
discrete-event simulation; its class follows the protocol:
:class:`~sim.gossip.matching_des.MatchingDES`,
:class:`~sim.gossip.edge.EdgeGossip`, :class:`~sim.gossip.asynchronous.AsyncGossip`)
and ``compiled`` (numba: :class:`~sim.gossip.compiled.CompiledAsync` for
``async``, :class:`~sim.gossip.edge_kernel.CompiledEdge` for ``edge``).
``--engine auto`` takes ``vector`` wherever it applies, ``compiled`` for the
``edge`` configs it reproduces bit for bit (:func:`edge_obstacle`), and
``compiled`` for ``async`` when numba is installed and the strategies have
compiled forms (:func:`select_engine`; the same law, its own random numbers). The references are the
closed forms and exact recursions of Study B in :mod:`sim.analytic`; each says
when it is exact, and :func:`gossip_predictions` gathers the values of those that are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engines as registry
from ..adversaries import Adversary, Defence, make_adversary, make_defence
from ..engines import Applies, Engine, Reference
from ..errors import ConfigError
from .asynchronous import AsyncGossip
from .compiled import HAVE_NUMBA, CompiledEngine
from .config import GossipConfig
from .edge import EdgeGossip
from .matching import MatchingVector
from .matching_des import MatchingDES
from .rounds import NeighbourhoodRounds
from .state import GossipSystem
from .update import NodeUpdate, default_update

__all__ = ["GossipVectorEngine", "GossipDESEngine", "CompiledEdgeEngine", "CompiledGossipEngine",
           "edge_obstacle", "updating_engine", "select_engine", "system_class", "resolved_engine",
           "engine_reason",
           "gossip_predictions", "EXACT_BUDGET"]

#: Largest ``n**2 * steps`` (disagreement) or ``n * steps`` (mean) for which the
#: exact recursions of :mod:`sim.analytic` are evaluated for a report.
EXACT_BUDGET = 2e9

_METRICS = ("n", "honest", "exchanges", "sim_time", "final_disagreement", "noise_floor",
            "capture_ratio", "creep_per_step", "creep_steps")
_DES_REASONS = {
    "matching": "every node a SimPy process and every exchange a message in flight "
                "(the cross-check of the vectorised engine)",
    "edge": "single-pair steps are simulated one at a time in order (there is no vectorised engine)",
    "async": "every node a SimPy process on its Poisson clock, exchanges in flight, churn "
             "(any strategy, including a user's own)",
    "neighbourhood": "synchronous rounds over whole neighbourhoods, in a SimPy clock",
    "allreduce": "synchronous rounds of an exact all-reduce, in a SimPy clock",
}


class _GossipEngine(Engine):
    family = "gossip"
    metrics = _METRICS

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:  # pragma: no cover
        """The class that simulates ``config``."""
        raise NotImplementedError

    def run(self, config: GossipConfig, streams: Any) -> dict[str, Any]:
        from .model import gossip_model

        out = gossip_model(config, streams)
        out.pop("engine", None)  # the engine's own metrics; gossip_model names the engine
        return out


class GossipVectorEngine(_GossipEngine):
    """Matching rounds computed with numpy over all pairs at once."""

    name = "vector"
    speed = 10

    def applies(self, config: GossipConfig) -> Applies:
        if config.protocol == "matching":
            from .network import flow_network

            if flow_network(config) is not None:
                return Applies(False, "exchanges that share links or NICs (contention on a "
                                      "network with a finite bandwidth) run on the DES")
            return Applies(True, "matching rounds are synchronous, so the vectorised engine "
                                 "computes the same rounds as the per-node DES (same matching, "
                                 "noise, adversaries, clipping and round time)")
        return Applies(False, _DES_REASONS[config.protocol])

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        return MatchingVector


class GossipDESEngine(_GossipEngine):
    """Per-node discrete-event simulation of any protocol."""

    name = "des"
    speed = 50

    def applies(self, config: GossipConfig) -> Applies:
        return Applies(True, _DES_REASONS[config.protocol])

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        return {"matching": MatchingDES, "edge": EdgeGossip, "async": AsyncGossip,
                "neighbourhood": NeighbourhoodRounds, "allreduce": NeighbourhoodRounds}[config.protocol]


def edge_obstacle(config: GossipConfig, adversary: Adversary | None, defence: Defence,
                  update: NodeUpdate) -> str | None:
    """Why the compiled edge engine cannot reproduce this config bit for bit (None: it can)."""
    if not HAVE_NUMBA:
        return "needs numba (pip install 'dtsim[fast]')"
    if config.protocol != "edge":
        return f"runs the edge protocol only, not {config.protocol}"
    if not update.is_identity():
        return "a node update (local training steps) runs on the DES engine"
    if adversary is not None and adversary.constant() is None:
        form = adversary.compiled_form()
        if form is None or form[0] not in ("signflip", "alie", "ipm", "dissensus"):
            return f"adversary {type(adversary).__name__} has no compiled form" + _scope_note(adversary)
    if defence.fixed_radius() is None and defence.radius_rule() != "oracle":
        return (f"defence {type(defence).__name__} has neither a fixed radius nor a compiled "
                "radius rule")
    return None


def _scope_note(adversary: Adversary) -> str:
    """The reason a scoped attack has no compiled form, when that is the reason."""
    if getattr(adversary, "scope", "global") == "local":
        return " (attack_scope local reads each target's neighbourhood; the DES engine runs it)"
    return ""


class CompiledEdgeEngine(_GossipEngine):
    """The edge protocol on the numba kernel: the DES engine's numbers, bit for bit, faster."""

    name = "compiled"
    speed = 5

    def applies(self, config: GossipConfig) -> Applies:
        adversary = (make_adversary(config.adversary, config.value, config.attack_scope)
                     if config.adversary_positions else None)
        why = edge_obstacle(config, adversary, make_defence(config.clip, config.adaptive_clip),
                            default_update(config))
        if why is not None:
            return Applies(False, why)
        return Applies(True, "compiled edge steps: the DES engine's draws and arithmetic, "
                             "bit for bit, at machine speed")

    def auto_for(self, config: GossipConfig) -> bool:
        """Yes, unless the config needs a summation order this numpy does not share with the kernel."""
        clipped_vector = config.dim > 1 and config.clip is not None and not np.isinf(config.clip)
        if clipped_vector or config.adaptive_clip or config.adversary in ("alie", "ipm", "dissensus"):
            from .edge_kernel import numpy_order_matches

            return numpy_order_matches()
        return True

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        from .edge_kernel import CompiledEdge

        return CompiledEdge


class CompiledGossipEngine(_GossipEngine):
    """``--engine compiled``: the numba engine of the config's protocol (``async`` or ``edge``).

    ``auto`` picks it for ``edge`` (it gives the DES engine's numbers) and asks
    the async engine (:class:`~sim.gossip.compiled.CompiledEngine`) for ``async``.
    """

    name = "compiled"
    speed = 5

    def __init__(self) -> None:
        self.parts: dict[str, Engine] = {"async": CompiledEngine(), "edge": CompiledEdgeEngine()}

    def applies(self, config: GossipConfig) -> Applies:
        part = self.parts.get(config.protocol)
        if part is None:
            return Applies(False, "runs the async and edge protocols only, not "
                                  f"{config.protocol}")
        return part.applies(config)

    def auto_for(self, config: GossipConfig) -> bool:
        part = self.parts.get(config.protocol)
        return part is not None and part.auto_for(config)

    def accepts(self, config: GossipConfig, **strategies: Any) -> Applies:
        """Whether the part for the config's protocol accepts these strategies (:func:`select_engine`).

        The async part asks each strategy for its compiled form; the edge part
        runs a strategy without one on the Python steps itself, so it accepts all.
        """
        ask = getattr(self.parts.get(config.protocol), "accepts", None)
        return ask(config, **strategies) if callable(ask) else Applies(True, "")

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        return self.parts[config.protocol].system_class(config)  # type: ignore[attr-defined]



def select_engine(config: GossipConfig, **strategies: Any) -> tuple[Any, str]:
    """The engine that runs ``config`` with these strategies, and one sentence saying why.

    :func:`sim.engines.select` answers from the config alone; an engine that
    also needs to see the strategy objects (the compiled engine asks the
    adversary, the defence and the node update for their compiled forms) says
    so through ``accepts(config, **strategies)``. Under ``auto`` an engine that
    does not accept them gives way to the next one that applies; a named one
    is refused with its reason.

    Parameters
    ----------
    config : GossipConfig
    **strategies
        ``adversary``, ``defence``, ``update`` (None: the config's own) and ``path``.
    """
    sel = registry.select("gossip", config, config.engine)
    verdict = _accepts(sel.engine, config, strategies)
    if verdict.ok:
        return sel.engine, sel.reason
    if config.engine != "auto":
        raise ConfigError("engine", f"des or auto for this configuration ({sel.name}: "
                          f"{verdict.reason})", config.engine)
    for e in registry.engines("gossip"):
        if e is sel.engine or not e.auto_for(config) or not e.applies(config):
            continue
        if _accepts(e, config, strategies).ok:
            return e, f"auto: {e.applies(config).reason} ({sel.name}: {verdict.reason})"
    raise ConfigError("engine", f"an engine that answers this config ({sel.name}: "
                      f"{verdict.reason})", config.engine)  # pragma: no cover - des accepts all


def _accepts(engine: Any, config: GossipConfig, strategies: dict[str, Any]) -> Applies:
    ask = getattr(engine, "accepts", None)
    return ask(config, **strategies) if callable(ask) else Applies(True, "")


def system_class(config: GossipConfig, **strategies: Any) -> type[GossipSystem]:
    """The engine class that simulates ``config`` with these strategies (:func:`select_engine`)."""
    return select_engine(config, **strategies)[0].system_class(config)


def resolved_engine(config: GossipConfig) -> str:
    """The engine that runs ``config``: ``"vector"``, ``"des"`` or ``"compiled"``."""
    return select_engine(config)[0].name


def engine_reason(config: GossipConfig) -> str:
    """One sentence saying why :func:`resolved_engine` runs (printed by ``dtsim gossip``)."""
    sel = registry.select("gossip", config, config.engine)
    if config.protocol != "matching":
        text = f"{config.protocol}: {sel.engine.applies(config).reason}"
        if config.engine == "auto" and config.protocol == "async":  # why compiled did not run
            skipped = [f"{n}: {r}" for n, ok, r in sel.considered
                       if not ok and n != "vector" and n != sel.name]
            if skipped:
                text += " (" + "; ".join(skipped) + ")"
        return text
    if config.engine == "auto":
        return sel.reason
    return f"requested: engine {sel.name}"


def updating_engine(config: GossipConfig) -> tuple[str, str]:
    """The engine that runs ``config`` with a node update (gossip training), and why.

    The compiled edge engine hands a node update to the DES engine's steps
    (:class:`~sim.gossip.edge_kernel.CompiledEdge`), so under ``auto`` an
    ``edge`` training run is reported as ``des``.
    """
    sel = registry.select("gossip", config, config.engine)
    if sel.name == "compiled" and config.protocol == "edge" and config.engine == "auto":
        return "des", f"edge: {_DES_REASONS['edge']}"
    return sel.name, engine_reason(config)


# --------------------------------------------------------------------------- references


def _clipped(c: GossipConfig) -> bool:
    return c.clip is not None or c.adaptive_clip


def _k(c: GossipConfig) -> int:
    return len(c.adversary_positions)


class _GossipReference(Reference):
    family = "gossip"
    rule = ""

    def ok(self, c: GossipConfig) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def applies(self, config: GossipConfig) -> Applies:
        return Applies(bool(self.ok(config)), ("exact for " if self.ok(config) else "needs ") + self.rule)


class MatchingComplete(_GossipReference):
    """Perfect matchings on the complete graph, all honest: contraction, noise floor, ``E[D_t]``."""

    name = "matching_complete"
    metrics = ("predicted_contraction", "predicted_noise_floor", "predicted_disagreement")
    rule = "matching on the complete graph, all honest, no clip"

    def ok(self, c: GossipConfig) -> bool:
        return c.protocol == "matching" and c.complete and _k(c) == 0 and not _clipped(c)

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        from .. import analytic

        n, d, s = c.n, c.dim, c.noise
        out: dict[str, Any] = {}
        cc = float(analytic.matching_contraction(n))
        out["predicted_contraction"] = cc
        if s > 0:
            out["predicted_noise_floor"] = float(analytic.noise_floor(n, s)) * d
        steps = c.record_steps()
        series = np.empty(steps.size)
        cur, r = (n - 1) * c.init_std**2 * d, 0
        add = (n - 1) * s**2 * d
        for idx, st in enumerate(steps):
            while r < st:
                cur = cc * (cur + add)
                r += 1
            series[idx] = cur
        out["predicted_disagreement"] = series
        return out


class EdgeComplete(_GossipReference):
    """One random pair on the complete graph: ``E[D'] = (1 - 1/(n-1)) D`` exactly.

    One pair lowers ``D`` by ``(x_i - x_j)^2 / 2`` and ``sum_{i<j} (x_i - x_j)^2 = n D``.
    """

    name = "edge_complete"
    metrics = ("predicted_contraction", "predicted_disagreement")
    rule = "edge on the complete graph, all honest, no noise, no clip"

    def ok(self, c: GossipConfig) -> bool:
        return c.protocol == "edge" and _k(c) == 0 and c.noise == 0 and not _clipped(c) and c.complete

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        n, t = c.n, c.record_steps().astype(float)
        return {"predicted_contraction": 1.0 - 1.0 / (n - 1),
                "predicted_disagreement": (n - 1) * c.init_std**2 * c.dim * (1.0 - 1.0 / (n - 1)) ** t}


class EdgeRecursion(_GossipReference):
    """The exact second-moment recursion of random-edge gossip on any graph."""

    name = "edge_recursion"
    metrics = ("predicted_disagreement",)
    rule = "edge on a sparse graph, all honest, no noise, no clip, n**2 * steps <= 2e9"

    def ok(self, c: GossipConfig) -> bool:
        return (c.protocol == "edge" and _k(c) == 0 and c.noise == 0 and not _clipped(c)
                and not c.complete and c.n * c.n * c.rounds <= EXACT_BUDGET)

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        from .. import analytic

        ed = analytic.edge_gossip_disagreement(c.network_graph, int(c.rounds), record_every=c.record_every)
        return {"predicted_disagreement": np.asarray(ed, dtype=float) * c.init_std**2 * c.dim}


def _one_stubborn_complete(c: GossipConfig) -> bool:
    return (c.adversary == "stubborn" and _k(c) == 1 and c.complete
            and c.protocol in ("edge", "matching"))


class Capture(_GossipReference):
    """One stubborn node on the complete graph: ``E[m_t - b] = r**t (m_0 - b)``."""

    name = "capture"
    metrics = ("predicted_capture_rate", "predicted_honest_mean")
    rule = "one stubborn node on the complete graph, edge or matching, no clip"

    def ok(self, c: GossipConfig) -> bool:
        return _one_stubborn_complete(c) and not _clipped(c)

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        from .. import analytic

        r = float(analytic.capture_rate(c.n) if c.protocol == "edge"
                  else analytic.matching_capture_rate(c.n))
        b, t = c.value, c.record_steps().astype(float)
        return {"predicted_capture_rate": r, "predicted_honest_mean": b + (c.init_mean - b) * r**t}


class Creep(_GossipReference):
    """One stubborn node against a fixed clip on the complete graph: the creep of ``m`` toward ``b``."""

    name = "creep"
    metrics = ("creep_bound",)
    rule = "one stubborn node on the complete graph, edge or matching, a fixed clip"

    def ok(self, c: GossipConfig) -> bool:
        return _one_stubborn_complete(c) and c.clip is not None

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        from .. import analytic

        fn = analytic.creep_bound if c.protocol == "edge" else analytic.matching_creep
        return {"creep_bound": float(fn(c.n, c.clip))}


class StubbornRecursion(_GossipReference):
    """The exact first-moment recursion of random-edge gossip with stubborn nodes on any graph."""

    name = "stubborn_recursion"
    metrics = ("predicted_honest_mean",)
    rule = "stubborn nodes with edge on a sparse graph, no clip, n * steps <= 2e9"

    def ok(self, c: GossipConfig) -> bool:
        return (c.adversary == "stubborn" and _k(c) >= 1 and c.protocol == "edge"
                and not _clipped(c) and not c.complete and c.n * c.rounds <= EXACT_BUDGET)

    def predict(self, c: GossipConfig) -> dict[str, Any]:
        from .. import analytic

        G = c.network_graph
        nodes = list(G.nodes())
        stub = {nodes[p]: b for p, b in c.stubborn_map.items()}
        hm = analytic.stubborn_honest_mean(G, stub, c.init_mean, int(c.rounds), record_every=c.record_every)
        return {"predicted_honest_mean": np.asarray(hm, dtype=float)}


for _obj in (GossipVectorEngine(), GossipDESEngine(), CompiledGossipEngine(), MatchingComplete(), EdgeComplete(), EdgeRecursion(),
             Capture(), Creep(), StubbornRecursion()):
    registry.register(_obj)


def gossip_predictions(config: GossipConfig) -> dict[str, Any]:
    """Exact predictions that apply to ``config``, from :func:`sim.engines.predictions`.

    Returns
    -------
    dict
        Any of: ``predicted_contraction`` (complete graph, all honest, no
        clip: per matching round, or per ``edge`` step without noise),
        ``predicted_noise_floor`` (same, with noise; summed over
        coordinates), ``predicted_disagreement`` (series at the record steps:
        matching on the complete graph, all honest, no clip, with or without noise; or
        ``edge`` on any graph, all honest, no noise, no clip),
        ``predicted_capture_rate`` (one stubborn node on the complete graph,
        ``edge`` per step or ``matching`` per round, no clip),
        ``predicted_honest_mean`` (the same, or stubborn nodes with ``edge`` on
        a sparse graph, no clip: the first-moment recursion), and
        ``creep_bound`` (one stubborn node on the complete graph with a fixed clip).
    """
    return {m: p["value"] for m, p in registry.predictions("gossip", config).items()
            if p["value"] is not None}
