"""The compiled ``async`` engine: the protocol of :mod:`sim.gossip.asynchronous` at machine speed.

:class:`CompiledAsync` builds the same system as every gossip engine (values,
honest mask, adversary, defence, records; :class:`~sim.gossip.state.GossipSystem`),
then hands the values to the numba event loop of :mod:`sim.gossip.kernel`,
advancing it from one record time to the next and recording through the shared
:class:`~sim.gossip.records.Records`. It simulates the same law as the SimPy
engine (Poisson clocks, a uniformly random online neighbour, exchanges in flight
for ``latency + size / bandwidth``, exponential churn, noise at the wake), with
its own random numbers: a seed gives other trajectories than the SimPy engine's,
with the same distribution. That is why ``--engine auto`` does not pick it
(``auto = False``): it runs when named, ``--engine compiled``.

It asks the strategies, never their types: an adversary answers with
:meth:`~sim.adversaries.Adversary.constant` or
:meth:`~sim.adversaries.Adversary.compiled_form`, a defence with
:meth:`~sim.adversaries.Defence.fixed_radius`; one that has no compiled form
(a user's own, adaptive clipping) and any local training step leave the config
to the SimPy engine, and the engine says so.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from .. import engines as registry
from ..adversaries import Adversary, Defence, make_adversary, make_defence
from ..engines import Applies, Engine
from ..errors import ConfigError
from .config import GossipConfig
from .records import Records
from .state import GossipSystem
from .update import NodeUpdate, default_update

__all__ = ["CompiledEngine", "CompiledAsync", "compiled_obstacle"]

#: Whether numba is installed; the kernel (and numba, about half a second) is
#: imported only when a config asks for the compiled engine.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def compiled_obstacle(config: GossipConfig, adversary: Adversary | None, defence: Defence,
                      update: NodeUpdate) -> str | None:
    """Why the compiled engine cannot run this config with these strategies (None: it can)."""
    if not HAVE_NUMBA:
        return "needs numba (pip install 'dtsim[fast]')"
    if config.protocol != "async":
        return f"runs the async protocol only, not {config.protocol}"
    if config.failure_trace is not None:
        return "churn replayed from a trace runs on the SimPy engine"
    if not update.is_identity():
        return "a node update (local training steps) runs on the SimPy engine"
    if adversary is not None and adversary.constant() is None:
        from .kernel import SENDER_KINDS

        form = adversary.compiled_form()
        if form is None or form[0] not in SENDER_KINDS:
            return f"adversary {type(adversary).__name__} has no compiled form"
    if defence.fixed_radius() is None:
        return f"defence {type(defence).__name__} has no fixed radius (state-dependent clipping)"
    return None


class CompiledAsync(GossipSystem):
    """The async protocol on the numba event loop (see the module docstring)."""

    def __init__(self, config: GossipConfig, streams: Any, *, path: str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(config, streams, path="auto", **kwargs)
        from .kernel import ADV_CONSTANT, SENDER_KINDS, AsyncLoop, stream_states

        why = compiled_obstacle(config, self.adversary, self.defence, self.update)
        if why is not None:
            raise ConfigError("engine", f"des or auto for this configuration (compiled: {why})",
                              "compiled")
        n, d = self.n, self.d
        kind = np.zeros(n, dtype=np.int64)
        param = np.zeros(n)
        const = np.zeros((n, d))
        adv = np.flatnonzero(self.is_adv)
        if adv.size:
            c = self.adversary.constant()  # type: ignore[union-attr]
            if c is not None:
                kind[adv], const[adv] = ADV_CONSTANT, c
            else:
                rule, value = self.adversary.compiled_form()  # type: ignore[union-attr, misc]
                kind[adv], param[adv] = SENDER_KINDS[rule], value
        tau = np.full(n, float(self.defence.fixed_radius()))  # type: ignore[arg-type]
        net, cfg = self.net, self.cfg
        states = stream_states([streams.rng(name) for name in ("wake", "partners", "noise",
                                                               "churn")])
        self.x = np.ascontiguousarray(self.x, dtype=float)
        self.view.x = self.x
        self.loop = AsyncLoop(
            self.x, self.honest, kind, param, const, tau, states=states,
            wake_rate=cfg.wake_rate, noise=cfg.noise, complete=net.complete,
            complete_delay=net.complete_delay,
            indptr=None if net.complete else net.indptr,
            indices=None if net.complete else net.indices,
            edge_delay=None if net.complete else net.nbr_delay,
            availability=cfg.availability, mean_downtime=cfg.mean_downtime)

    @property
    def async_path(self) -> str:
        """``compiled``."""
        return "compiled"

    def run(self) -> Records:
        """Advance the loop from record time to record time, recording the honest values."""
        rec = self.records
        hidx = self.hidx
        rec.record(0, 0.0, 0, self.x[hidx])
        for k in range(1, rec.steps.size):
            t = float(rec.steps[k])
            self.loop.advance(t)
            self.exchanges = self.loop.exchanges
            rec.record(k, t, self.exchanges, self.x[hidx])
        return rec


class CompiledEngine(Engine):
    """``--engine compiled``: the async protocol on the numba event loop (never chosen by auto)."""

    name = "compiled"
    family = "gossip"
    speed = 5
    auto = False
    metrics = ("n", "honest", "exchanges", "sim_time", "final_disagreement", "noise_floor",
               "capture_ratio", "creep_per_step", "creep_steps")

    def applies(self, config: GossipConfig) -> Applies:
        """Async protocol, an adversary and defence with compiled forms, no node update, numba."""
        adversary = (make_adversary(config.adversary, config.value)
                     if config.adversary_positions else None)
        why = compiled_obstacle(config, adversary,
                                make_defence(config.clip, config.adaptive_clip),
                                default_update(config))
        if why is not None:
            return Applies(False, why)
        return Applies(True, "compiled event loop: the async law (Poisson clocks, exchanges in "
                             "flight, churn) at machine speed, with its own random numbers")

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        """:class:`CompiledAsync`."""
        return CompiledAsync

    def run(self, config: GossipConfig, streams: Any) -> dict[str, Any]:
        """One replication (:func:`sim.gossip.model.gossip_model`)."""
        from .model import gossip_model

        return gossip_model(config, streams)


registry.register(CompiledEngine())
