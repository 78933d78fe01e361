"""Random blocks and peer choice of the ``async`` protocol.

Each node holds a block of wake gaps (stream ``wake``), a block of peer draws
(stream ``partners``) and, with noise, a block of normals (stream ``noise``),
drawn for all nodes at once at setup and refilled per node in chunks from the
same streams; the refill order is fixed by the event order, so a seed still
fixes every draw.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .asynchronous import AsyncGossip

__all__ = ["AsyncDraws"]


class AsyncDraws:
    """Per-node random blocks and the choice of an (online) peer for one async system.

    Parameters
    ----------
    system : AsyncGossip
        The system being wired (its streams, network and churn workers).
    scalar : bool
        Noise blocks as Python floats (scalar paths) or numpy rows.
    workers : list or None
        The nodes' churn workers (``None``: every node always online).
    """

    def __init__(self, system: AsyncGossip, scalar: bool, workers: list[Any] | None) -> None:
        cfg, net = system.cfg, system.net
        self.n, self.d, self.net, self.scalar = system.n, system.d, net, scalar
        self.workers = workers
        self.rng_partners = system.rng_partners
        self.rng_noise = system.rng_noise
        self.rng_wake = system.streams.rng("wake")
        # a chunk covers the expected wakes of the horizon (plus slack), at most 64
        expect = cfg.wake_rate * cfg.rounds
        self.chunk = int(min(64, max(4, math.ceil(1.2 * expect + 3 * math.sqrt(expect) + 2))))
        self.mean_gap = 1.0 / cfg.wake_rate
        #: Peers drawn directly (complete graph, no churn): the draws are the peers themselves.
        self.direct = net.complete and self.workers is None
        if not net.complete:
            self._indices = net.indices.tolist()
            self._delay = net.nbr_delay.tolist()
            self._ptr = net.indptr.tolist()

    def initial(self, noisy: bool) -> tuple[list[list[float]], list[list[Any]], list[Any]]:
        """Every node's first blocks: wake gaps, peer draws and noise (``None`` rows without noise)."""
        n, c = self.n, self.chunk
        gaps = self.rng_wake.exponential(self.mean_gap, size=(n, c)).tolist()
        us = self.peer_block(np.arange(n), c)
        if noisy:
            z = self.rng_noise.standard_normal(size=(n, c * self.d))
            return gaps, us, (z.tolist() if self.scalar else list(z.reshape(n, c, self.d)))
        return gaps, us, [None] * n

    def peer_block(self, nodes: np.ndarray, c: int) -> list[list[Any]]:
        """Peer draws of ``c`` wakes for each of ``nodes`` (stream ``partners``).

        With :attr:`direct` peers the peers themselves (uniform over the other
        nodes); otherwise uniforms in [0, 1) that :meth:`pick` turns into an
        online neighbour.
        """
        rng = self.rng_partners
        if self.direct:
            j = rng.integers(self.n - 1, size=(nodes.size, c))
            j += j >= nodes[:, None]
            return j.tolist()
        return rng.random(size=(nodes.size, c)).tolist()

    def refill(self, i: int, with_noise: bool) -> tuple[list[float], list[Any], Any]:
        """Fresh blocks of wake gaps, peer draws and (scalar or vector) noise for node ``i``."""
        c = self.chunk
        gaps = self.rng_wake.exponential(self.mean_gap, size=c).tolist()
        us = self.peer_block(np.array([i]), c)[0]
        zs = None
        if with_noise:
            z = self.rng_noise.standard_normal(size=c * self.d)
            zs = z.tolist() if self.scalar else z.reshape(c, self.d)
        return gaps, us, zs

    def pick(self, i: int, u: float) -> tuple[int, float] | None:
        """Peer of ``i`` and the exchange time, from one uniform ``u`` (None: nobody online).

        Uniform over the (online) neighbours: on the complete graph a rejection
        draw among the other nodes (falling back to a scan after 64 misses),
        on a sparse graph an index into the online neighbours.
        """
        workers = self.workers
        if self.net.complete:
            n1, delay = self.n - 1, self.net.complete_delay
            j = int(u * n1)
            j += j >= i
            if workers is None or workers[j].up:
                return j, delay
            rng = self.rng_partners
            for _ in range(64):
                j = int(rng.random() * n1)
                j += j >= i
                if workers[j].up:
                    return j, delay
            cand = [j for j in range(self.n) if j != i and workers[j].up]
            return (cand[int(u * len(cand))], delay) if cand else None
        lo, hi = self._ptr[i], self._ptr[i + 1]
        if hi == lo:
            return None
        idx = self._indices
        if workers is None:
            k = lo + int(u * (hi - lo))
        else:
            ks = [k for k in range(lo, hi) if workers[idx[k]].up]
            if not ks:
                return None
            k = ks[int(u * len(ks))]
        return idx[k], self._delay[k]
