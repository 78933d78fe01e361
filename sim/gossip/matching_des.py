"""The ``matching`` protocol, per node: every node a SimPy process, every exchange a message.

The same rounds as :class:`~sim.gossip.matching.MatchingVector`, to cross-validate
it. A coordinator draws the round's matching and noise exactly as the vectorised
engine does (same streams, same order), then runs three phases at the round's
start: every node adds its noise (then the node update runs on every honest
node); every matched node computes what it sends (an adversary's value, or its
own) and asks the defence for its radius from the state after noise and before
any update, and posts the message as a timeout of the edge's exchange time;
every node then waits for its partner's message and moves toward it through
the defence. The round ends with the last delivery, so it lasts the slowest
matched exchange. About 10**3 times slower than the vector engine at ``n = 1000``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .matching import MatchingVector

__all__ = ["MatchingDES"]


class MatchingDES(MatchingVector):
    """Matching rounds with every node a SimPy process and every exchange in flight."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n, env = self.n, self.env
        self._partner = [-1] * n
        self._pdelay = [0.0] * n
        self._inbox: list[Any] = [None] * n
        rows = self.hidx if self.n_adv else np.arange(n)
        self._noise_row = np.full(n, -1, dtype=np.int64)
        self._noise_row[rows] = np.arange(rows.size)
        self._round_noise: np.ndarray | None = None
        self._start = env.event()
        self._go = env.event()
        self._recv = env.event()
        self._done = env.event()
        self._matched = 0
        self._arrived = 0
        from .network import flow_network

        flows = flow_network(self.cfg)
        self._service: Any = None
        if flows is not None:  # each message a flow on the network (they may share links)
            from ..network import NetworkService

            self._service = NetworkService(env, flows, weighting=self.cfg.network_weighting)
        for i in range(n):
            env.process(self._node(i))

    def process(self):
        """The coordinator: draw each round's matching and noise, drive the phases, record."""
        env, cfg = self.env, self.cfg
        steps = self.records.steps
        k = 1
        for r in range(1, cfg.rounds + 1):
            a, b, dl = self.draw_matching()
            dl = np.broadcast_to(np.asarray(dl, dtype=float), a.shape)
            partner, pdelay = self._partner, self._pdelay
            for i in range(self.n):
                partner[i] = -1
            for p, q, t in zip(a.tolist(), b.tolist(), dl.tolist(), strict=True):
                partner[p], partner[q] = q, p
                pdelay[p] = pdelay[q] = t
            s = cfg.noise
            if s > 0:
                rows = self.hidx.size if self.n_adv else self.n
                self._round_noise = s * self.rng_noise.standard_normal((rows, self.d))
            self._matched, self._arrived = 2 * int(a.size), 0
            self._go, self._recv, self._done = env.event(), env.event(), env.event()
            start, self._start = self._start, env.event()
            start.succeed(r)
            yield start  # every node has added its noise
            self.local_steps(self.hidx)
            self._go.succeed()
            yield self._go  # every matched node has posted its message
            self._recv.succeed()
            yield self._recv  # every matched node waits for its partner's message
            if self._matched:
                yield self._done  # the last delivery of the round
            self.exchanges += int(a.size)
            if k < steps.size and steps[k] == r:
                self.record(k)
                k += 1

    def _node(self, i: int):
        """Process of node ``i``."""
        env, x = self.env, self.x
        honest = bool(self.honest[i])
        row = int(self._noise_row[i])
        idx = np.array([i])
        defence = self.defence
        plain = defence.plain()  # every move is diff / 2: no radius to ask
        while True:
            yield self._start
            if honest and self._round_noise is not None:
                x[i] += self._round_noise[row]
            yield self._go
            j = self._partner[i]
            if j < 0:
                continue  # unmatched this round
            sent = x[i].copy() if honest else self.sent(idx, np.array([j]), x[idx])[0]
            # the radius from the state after noise and before any update
            tau = defence.radius(self.view, idx) if honest and not plain else None
            if self._service is None:
                self._inbox[j] = env.timeout(self._pdelay[i], sent)
            else:
                msg = self._inbox[j] = env.event()
                self._service.transfer(i, j, float(self.cfg.size)).callbacks.append(
                    lambda _e, msg=msg, sent=sent: msg.succeed(sent))
            yield self._recv
            received = yield self._inbox[i]
            if honest and plain:
                x[i] += (received - x[i]) / 2.0
            elif honest:
                x[i] += defence.move((received - x[i])[None, :], tau)[0]  # type: ignore[arg-type]
            self._arrived += 1
            if self._arrived == self._matched:
                self._done.succeed()
