"""The ``matching`` protocol, vectorised: numpy over all pairs of a round at once.

Synchronous rounds. On the complete graph (``n`` even) a uniformly random
perfect matching (a random permutation paired up); on any other graph a random
maximal matching built greedily over the edges in uniformly random order
(:func:`~sim.gossip.network.random_maximal_matching`). A round lasts the slowest
matched exchange, ``max(latency + size / bandwidth)`` over its edges, and is
one SimPy timeout. In each round: the noise, the node update on every honest
node, then the matching averages through the vector kernel.
"""

from __future__ import annotations

import numpy as np

from .network import random_maximal_matching
from .state import GossipSystem

__all__ = ["MatchingVector"]


class MatchingVector(GossipSystem):
    """Matching rounds computed with numpy over all pairs at once."""

    def draw_matching(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
        """The round's pairs ``(a, b)`` and their exchange times (stream ``partners``).

        On the complete graph the time is one number (every edge alike).
        """
        net = self.net
        if net.complete:
            perm = self.rng_partners.permutation(self.n)
            return perm[0::2], perm[1::2], net.complete_delay
        e = random_maximal_matching(net.u, net.v, self.n, rng=self.rng_partners)
        return net.u[e], net.v[e], net.delay[e]

    def process(self):
        env = self.env
        steps = self.records.steps
        k = 1
        for r in range(1, self.cfg.rounds + 1):
            a, b, dl = self.draw_matching()
            duration = dl if np.ndim(dl) == 0 else (float(dl.max()) if dl.size else 0.0)
            yield env.timeout(duration)
            self.add_noise()
            self.local_steps(self.hidx)
            self.exchange_pairs(a, b)
            self.exchanges += int(a.size)
            if k < steps.size and steps[k] == r:
                self.record(k)
                k += 1
