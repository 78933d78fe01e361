"""The compiled ``async`` engine: the protocol of :mod:`sim.gossip.asynchronous` at machine speed.

:class:`CompiledAsync` builds the same system as every gossip engine (values,
honest mask, adversary, defence, node update, records;
:class:`~sim.gossip.state.GossipSystem`), then hands the values to the numba
event loop of :mod:`sim.gossip.kernel`, advancing it from one record time to
the next and recording through the shared :class:`~sim.gossip.records.Records`.
It simulates the same law as the SimPy engine (Poisson clocks, a uniformly
random online neighbour, exchanges in flight for ``latency + size /
bandwidth``, exponential churn or churn replayed from a trace, noise at the
wake, fixed or adaptive clipping, local training steps on quadratics), with its
own random numbers: a seed gives other trajectories than the SimPy engine's,
with the same distribution. ``--engine auto`` picks it for every async config
it answers when numba is installed (otherwise the SimPy engine runs, and the
output says which ran); ``--engine des`` keeps the SimPy engine.

It asks the strategies, never their types: an adversary answers with
:meth:`~sim.adversaries.Adversary.constant` or
:meth:`~sim.adversaries.Adversary.compiled_form`, a defence with
:meth:`~sim.adversaries.Defence.compiled_form` (a fixed radius or the oracle
radius), a node update with ``compiled_form(n)`` (local steps on quadratics,
:meth:`sim.learning.LocalSGD.compiled_form`). One that has none (a user's own
rule, softmax regression) leaves the config to the SimPy engine: ``auto`` falls
back to it, and a config naming ``compiled`` is refused with the reason.

Churn from a trace: the replay's down intervals (the same
:meth:`~sim.traces.TraceReplay.worker_intervals`, from the same named streams,
as the SimPy engine's workers) become per-node change times, loaded one chunk
of at most one trace period at a time, so memory does not grow with the
horizon.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import engines as registry
from ..adversaries import Adversary, Defence, make_defence
from ..engines import Applies, Engine
from ..errors import ConfigError
from .config import GossipConfig
from .records import Records
from .state import GossipSystem, config_adversary
from .update import NodeUpdate, default_update

__all__ = ["CompiledEngine", "CompiledAsync", "gossip_compiled_obstacle"]

#: Whether numba is installed; the kernel (and numba, about half a second) is
#: imported only when a config asks for the compiled engine.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def gossip_compiled_obstacle(config: GossipConfig, adversary: Adversary | None, defence: Defence,
                      update: NodeUpdate, *, path: str = "auto") -> str | None:
    """Why the compiled engine cannot run this config with these strategies (None: it can)."""
    if not HAVE_NUMBA:
        return "needs numba (pip install 'dtsim[fast]')"
    if config.protocol != "async":
        return f"runs the async protocol only, not {config.protocol}"
    if path != "auto":
        return f"path {path} is an implementation path of the SimPy engine"
    from .network import flow_network

    if flow_network(config) is not None:
        return ("exchanges that share links or NICs (contention on a network with a finite "
                "bandwidth) run on the DES")
    if adversary is not None and adversary.constant() is None:
        from .kernel import SENDER_KINDS

        form = adversary.compiled_form()
        if form is None or form[0] not in SENDER_KINDS:
            note = (" (attack_scope local reads each target's neighbourhood; the DES engine runs it)"
                    if getattr(adversary, "scope", "global") == "local" else "")
            return f"adversary {type(adversary).__name__} has no compiled form{note}"
    dform = defence.compiled_form()
    if dform is None or dform[0] not in ("clip", "oracle"):
        return f"defence {type(defence).__name__} has no compiled form"
    if not update.is_identity():
        ask = getattr(update, "compiled_form", None)
        if not callable(ask) or ask(config.n) is None:
            if getattr(update, "momentum", 0.0):
                return (f"node update {type(update).__name__} has no compiled form (momentum "
                        "buffers are not compiled; the SimPy engine runs it)")
            return (f"node update {type(update).__name__} has no compiled form (local steps are "
                    "compiled on quadratic objectives only; logistic runs on the SimPy engine)")
    return None


class _ChangeFeed:
    """Up/down change times of every node from a replay's down intervals, chunk by chunk."""

    def __init__(self, intervals: list[Iterator[tuple[float, float]]]) -> None:
        self._its = [self._changes(iv) for iv in intervals]
        self._next = [next(it, math.inf) for it in self._its]

    @staticmethod
    def _changes(intervals: Iterator[tuple[float, float]]) -> Iterator[float]:
        for s, e in intervals:
            yield float(s)  # down at s
            if math.isinf(e):
                return  # down for good (an open end)
            yield float(e)  # up at e

    def until(self, t: float) -> list[np.ndarray]:
        """Every node's change times up to ``t`` not given before."""
        out = []
        for i, it in enumerate(self._its):
            got = []
            nxt = self._next[i]
            while nxt <= t:
                got.append(nxt)
                nxt = next(it, math.inf)
            self._next[i] = nxt
            out.append(np.array(got, dtype=float))
        return out


class CompiledAsync(GossipSystem):
    """The async protocol on the numba event loop (see the module docstring)."""

    def __init__(self, config: GossipConfig, streams: Any, *, path: str = "auto",
                 **kwargs: Any) -> None:
        super().__init__(config, streams, path="auto", **kwargs)
        from .kernel import ADV_CONSTANT, SENDER_KINDS, AsyncLoop, stream_states

        why = gossip_compiled_obstacle(config, self.adversary, self.defence, self.update, path=path)
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
        rule, radius = self.defence.compiled_form()  # type: ignore[misc]
        tau = np.full(n, float(radius) if rule == "clip" else math.inf)
        training = self.update.compiled_form(n) if self._updating else None  # type: ignore[attr-defined]
        net, cfg = self.net, self.cfg
        states = stream_states([streams.rng(name) for name in ("wake", "partners", "noise",
                                                               "churn", "update")])
        self.x = np.ascontiguousarray(self.x, dtype=float)
        self.view.x = self.x
        self._feed: _ChangeFeed | None = None
        self._period = math.inf
        if cfg.failure_trace is not None:
            replay = cfg.failure_trace
            self._feed = _ChangeFeed(replay.worker_intervals(n, streams=streams,
                                                             names=cfg.trace_names))
            self._period = float(replay.load().end) / float(replay.speedup)
        self.loop = AsyncLoop(
            self.x, self.honest, kind, param, const, tau, states=states,
            wake_rate=cfg.wake_rate, noise=cfg.noise, complete=net.complete,
            complete_delay=net.complete_delay,
            indptr=None if net.complete else net.indptr,
            indices=None if net.complete else net.indices,
            edge_delay=None if net.complete else net.nbr_delay,
            availability=cfg.availability, mean_downtime=cfg.mean_downtime,
            changes=self._feed is not None, adaptive=rule == "oracle", training=training)

    @property
    def async_path(self) -> str:
        """``compiled``."""
        return "compiled"

    def _advance_to(self, t0: float, t: float) -> None:
        feed = self._feed
        if feed is None:
            self.loop.advance(t)
            return
        # change times in chunks of at most one trace period (memory bounded by the trace)
        cur = t0
        while cur < t:
            nxt = min(t, cur + self._period)
            self.loop.load_changes(nxt, feed.until(nxt))
            self.loop.advance(nxt)
            cur = nxt

    def run(self) -> Records:
        """Advance the loop from record time to record time, recording the honest values."""
        rec = self.records
        hidx = self.hidx
        rec.record(0, 0.0, 0, self.x[hidx])
        prev = 0.0
        for k in range(1, rec.steps.size):
            t = float(rec.steps[k])
            self._advance_to(prev, t)
            self.loop.catch_up(t)
            prev = t
            self.exchanges = self.loop.exchanges
            rec.record(k, t, self.exchanges, self.x[hidx])
        add = getattr(self.update, "add_steps", None)
        if callable(add) and self.loop.local_steps:
            add(self.loop.local_steps)
        return rec


class CompiledEngine(Engine):
    """``--engine compiled``: the async protocol on the numba event loop (auto's choice for async)."""

    name = "compiled"
    family = "gossip"
    speed = 5
    metrics = ("n", "honest", "exchanges", "sim_time", "final_disagreement", "noise_floor",
               "capture_ratio", "creep_per_step", "creep_steps")

    def applies(self, config: GossipConfig) -> Applies:
        """Async protocol, the config's adversary and defence with compiled forms, numba."""
        adversary = config_adversary(config)
        why = gossip_compiled_obstacle(config, adversary,
                                make_defence(config.clip, config.adaptive_clip),
                                default_update(config))
        if why is not None:
            return Applies(False, why)
        return Applies(True, "compiled event loop: the async law (Poisson clocks, exchanges in "
                             "flight, churn) at machine speed, with its own random numbers")

    def accepts(self, config: GossipConfig, *, adversary: Adversary | None = None,
                defence: Defence | None = None, update: NodeUpdate | None = None,
                path: str = "auto") -> Applies:
        """Whether the strategies given for ``config`` (None: the config's own) have compiled forms."""
        if adversary is None and config.adversary_positions:
            adversary = config_adversary(config)
        why = gossip_compiled_obstacle(config, adversary,
                                defence if defence is not None
                                else make_defence(config.clip, config.adaptive_clip),
                                update if update is not None else default_update(config),
                                path=path)
        return Applies(why is None, why or "")

    def system_class(self, config: GossipConfig) -> type[GossipSystem]:
        """:class:`CompiledAsync`."""
        return CompiledAsync

    def run(self, config: GossipConfig, streams: Any) -> dict[str, Any]:
        """One replication (:func:`sim.gossip.model.gossip_model`)."""
        from .model import gossip_model

        out = gossip_model(config, streams)
        out.pop("engine", None)  # the engine's own metrics; gossip_model names the engine
        return out


registry.register(CompiledEngine())
