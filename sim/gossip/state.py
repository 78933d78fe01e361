"""Shared state of every gossip engine, and the two pairwise exchange kernels.

:class:`GossipSystem` holds what every protocol needs -- values, the honest
mask, the adversary, the defence, the node update, the neighbourhood view, the
records and the clock -- and the two kernels every engine exchanges through:
:meth:`GossipSystem.receive` (vector: honest nodes move toward values received,
simultaneously, through the defence) with :meth:`GossipSystem.exchange_pairs`
on top of it, and the function :meth:`GossipSystem.scalar_kernel` returns (one
pair on Python floats, for the ``dim = 1`` fast paths). ``GossipSystem(config, streams)``
builds the engine class that runs the config (see :mod:`sim.gossip.engines`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import simpy

from ..adversaries import (
    Adversary,
    Defence,
    Neighbourhood,
    StubbornValues,
    View,
    make_adversary,
    make_defence,
)
from ..errors import check, check_choice
from ..rng import Streams
from ..timeline import NULL
from .config import ASYNC_PATHS, GossipConfig
from .network import build_gossip_graph
from .records import Records
from .update import NodeUpdate, default_update

__all__ = ["GossipSystem", "config_adversary"]


def config_adversary(config: GossipConfig) -> Adversary | None:
    """The adversary a config names (None without adversary positions).

    Disagreeing :attr:`~sim.gossip.GossipConfig.stubborn_values` give a
    :class:`~sim.adversaries.StubbornValues`; equal ones the plain
    :class:`~sim.adversaries.Stubborn` of their common value (the same run as
    ``adversary_value``).
    """
    if not config.adversary_positions:
        return None
    if config.disagreeing_stubborn:
        return StubbornValues(config.adversary_positions, config.stubborn_values or (), config.n)
    return make_adversary(config.adversary, config.value, getattr(config, "attack_scope", "global"))


class GossipSystem:
    """A built gossip system: values, adversaries, defence, node update, clock and recorder.

    Build and wire everything in the constructor, then :meth:`run` once.
    ``GossipSystem(config, streams)`` returns an instance of the engine class
    that runs ``config`` (matching vector or DES, edge, async).

    Parameters
    ----------
    config : GossipConfig
    streams : Streams
        Streams ``init``, ``partners``, ``noise``, ``wake``, ``update`` (one each,
        for all nodes) and ``failures:*`` are independent, so changing one
        concern never changes another's draws.
    path : {"auto", "merged", "events", "vector"}
        Implementation path of the ``async`` protocol (see
        :attr:`~sim.gossip.asynchronous.AsyncGossip.async_path`).
    adversary : Adversary, optional
        The attack at the config's adversary positions (default: the config's kind).
    defence : Defence, optional
        Default: the config's ``clip`` / ``adaptive_clip``.
    update : NodeUpdate, optional
        Local computation between exchanges (default: :func:`~sim.gossip.update.default_update`,
        pure averaging).
    recorder : sim.timeline.Recorder, optional
        The timeline's recorder (the ``async`` and ``edge`` engines record their exchanges).
    """

    #: Pause the garbage collector during :meth:`run` (engines allocating an event per wake).
    pause_gc = False

    def __new__(cls, config: GossipConfig, streams: Streams, **kwargs: Any) -> GossipSystem:
        if cls is GossipSystem:
            from .engines import system_class

            cls = system_class(config, **{k: kwargs.get(k) for k in ("adversary", "defence",
                                                                       "update")},
                               path=kwargs.get("path", "auto"))
        return super().__new__(cls)

    def __init__(self, config: GossipConfig, streams: Streams, *, path: str = "auto",
                 adversary: Adversary | None = None, defence: Defence | None = None,
                 update: NodeUpdate | None = None, recorder: Any = None) -> None:
        check_choice("path", path, ASYNC_PATHS)
        self.cfg = config
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.net = net = build_gossip_graph(config)
        self.n = n = net.n
        self.d = d = config.dim
        self.env = simpy.Environment()
        self.rng_partners = streams.rng("partners")
        self.rng_noise = streams.rng("noise")
        self.streams = streams
        adv_pos = np.asarray(config.adversary_positions, dtype=np.int64)
        self.is_adv = np.zeros(n, dtype=bool)
        self.is_adv[adv_pos] = True
        self.honest = ~self.is_adv
        self.hidx = np.flatnonzero(self.honest)
        self.n_adv = int(adv_pos.size)
        init = streams.rng("init")
        self.x = config.init_mean + config.init_std * init.standard_normal((n, d))
        check(adversary is None or self.n_adv > 0, "adversary",
              "given only with adversary positions in the config", type(adversary).__name__)
        if adversary is None and self.n_adv:
            adversary = config_adversary(config)
        self.adversary = adversary
        if adversary is not None:
            iv = adversary.initial_value(d)
            if iv is not None:
                self.x[adv_pos] = iv
        self.defence = defence if defence is not None else make_defence(config.clip, config.adaptive_clip)
        self.update = update if update is not None else default_update(config)
        self._updating = not self.update.is_identity()
        self.rng_update = streams.rng("update") if self._updating else None
        if net.complete:
            self.nbhd = Neighbourhood(self.honest)
        else:
            g = net.graph
            assert g is not None
            adj = nx.to_scipy_sparse_array(g, nodelist=list(g.nodes()), weight=None, format="csr")
            self.nbhd = Neighbourhood(self.honest, adj)
        self.view = View(self.x, self.honest, self.nbhd)
        target = adversary.target(d) if adversary is not None else None
        self.records = Records(config.record_steps(), d, target, config.clip)
        self.exchanges = 0
        self._ran = False
        self._workers: list[Any] | None = None
        self._scalar_values: list[float] | None = None
        self._adv_list = self.is_adv.tolist()
        self._constant = adversary.constant() if adversary is not None else None
        self._smove = self.defence.scalar_move()

    # -- what the strategies allow -------------------------------------------
    def scalar_ok(self, *, attacker: bool = True) -> bool:
        """True when exchanges can run on Python floats.

        That needs ``dim = 1``, a defence with a scalar rule, no node update
        and (unless ``attacker`` is False) a constant attacker or none.
        """
        return (self.d == 1 and self._smove is not None and not self._updating
                and (not attacker or self.adversary is None or self._constant is not None))

    @property
    def async_path(self) -> str:
        """Implementation path of the ``async`` protocol (``""`` for the other protocols)."""
        return ""

    # -- shared pieces ------------------------------------------------------
    def record(self, k: int) -> None:
        """Fill record ``k`` from the honest values now."""
        if self._scalar_values is not None:
            self.x[:, 0] = self._scalar_values
        self.records.record(k, self.env.now, self.exchanges, self.x[self.hidx])

    def add_noise(self) -> None:
        """Every honest node adds fresh ``N(0, s**2)`` per coordinate (stream ``noise``)."""
        s = self.cfg.noise
        if s > 0:
            if self.n_adv:
                self.x[self.hidx] += s * self.rng_noise.standard_normal((self.hidx.size, self.d))
            else:
                self.x += s * self.rng_noise.standard_normal((self.n, self.d))

    def local_steps(self, nodes: np.ndarray) -> None:
        """The node update's local work on the honest ``nodes`` (nothing by default)."""
        if self._updating:
            nodes = nodes[self.honest[nodes]]
            if nodes.size:
                self.update.local_steps(self.x, nodes, rng=self.rng_update)  # type: ignore[arg-type]

    def sent(self, src: np.ndarray, dst: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Values ``src[k]`` sends to ``dst[k]``: its own row ``own[k]``, or the adversary's choice."""
        if not self.n_adv:
            return own
        adv = self.is_adv[src]
        if not adv.any():
            return own
        out = own.copy()
        out[adv] = self.adversary.send(self.view, src[adv], dst[adv])  # type: ignore[union-attr]
        return out

    # -- the two kernels ------------------------------------------------------
    def receive(self, dst: np.ndarray, values: np.ndarray) -> None:
        """Vector kernel: honest nodes ``dst[k]`` (distinct) move toward ``values[k]`` at once.

        The defence is asked for the move from the state before any of these moves.
        """
        x = self.x
        xd = x[dst]
        x[dst] = xd + self.defence.step(self.view, values - xd, dst)

    def exchange_pairs(self, a: np.ndarray, b: np.ndarray) -> None:
        """Exchange over disjoint pairs ``(a[k], b[k])`` simultaneously (adversaries never move)."""
        x = self.x
        xa, xb = x[a], x[b]
        if self.n_adv == 0 and self.defence.plain():
            avg = (xa + xb) * 0.5
            x[a] = avg
            x[b] = avg
            return
        va, vb = self.sent(a, b, xa), self.sent(b, a, xb)
        dst = np.concatenate([a, b])
        val = np.concatenate([vb, va])
        if self.n_adv:
            keep = self.honest[dst]
            dst, val = dst[keep], val[keep]
        if dst.size:
            self.receive(dst, val)

    def scalar_kernel(self) -> Callable[[list[float], int, int, float, float], None]:
        """Scalar kernel ``exchange(xs, i, j, vi, vj)``: the honest (and online) ends of ``(i, j)``
        move toward what the other sent, by the defence's :meth:`~sim.adversaries.Defence.scalar_move`.

        Values are Python floats in ``xs``; call this once the engine is wired (churn included).
        """
        move, adv, workers = self._smove, self._adv_list, self._workers
        assert move is not None

        def exchange(xs: list[float], i: int, j: int, vi: float, vj: float) -> None:
            if not adv[i] and (workers is None or workers[i].up):
                xs[i] += move(vj - xs[i])
            if not adv[j] and (workers is None or workers[j].up):
                xs[j] += move(vi - xs[j])

        return exchange

    # -- run ----------------------------------------------------------------
    def process(self):  # pragma: no cover - interface
        """The engine's main SimPy process (a generator); it ends at the horizon."""
        raise NotImplementedError

    def run(self) -> Records:
        """Run the protocol to the horizon and return the filled records."""
        check(not self._ran, "system", "run once", "run()")
        self._ran = True
        if self._scalar_values is not None:
            self._scalar_values[:] = self.x[:, 0].tolist()
        self.record(0)
        if self.rec.on:  # the timeline: processes and down intervals (listeners only)
            self.rec.start_gossip(self)
        proc = self.env.process(self.process())
        # An engine that allocates an event per wake would trigger collections that
        # scan every node's process; none of what it creates is cyclic garbage.
        was_enabled = gc.isenabled()
        if self.pause_gc:
            gc.disable()
        try:
            self.env.run(until=proc)
        finally:
            if was_enabled:
                gc.enable()
        self.rec.close(self.env.now)
        if self._scalar_values is not None:
            self.x[:, 0] = self._scalar_values
        return self.records
