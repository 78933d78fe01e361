"""The ``edge`` protocol: one uniformly random edge per step, steps in order.

Steps are instantaneous exchanges at rate ``n / 2`` per time unit, i.e. a step
lasts ``2 / n``: ``n / 2`` steps (as many exchanges as one perfect matching)
take one time unit. The clock advances by one SimPy timeout per recorded chunk
of steps. In each step: the noise, the node update on the pair's honest ends,
then the pair averages. Without noise, in one dimension, with a scalar defence
rule and no node update, the steps run on Python floats through the scalar
kernel (a step with an attacker that is not constant goes through the vector
kernel).
"""

from __future__ import annotations

import numpy as np

from .state import GossipSystem

__all__ = ["EdgeGossip"]


class EdgeGossip(GossipSystem):
    """Single-edge steps, simulated one at a time in order."""

    def draw_edges(self, count: int) -> tuple[list[int], list[int]]:
        """Endpoints of ``count`` uniformly random edges (stream ``partners``)."""
        rng = self.rng_partners
        if self.net.complete:
            i = rng.integers(self.n, size=count)
            j = rng.integers(self.n - 1, size=count)
            j += j >= i
            return i.tolist(), j.tolist()
        e = rng.integers(self.net.u.size, size=count)
        return self.net.u[e].tolist(), self.net.v[e].tolist()

    def steps(self, count: int) -> None:
        """Run ``count`` single-edge steps (on the scalar kernel where it applies)."""
        ii, jj = self.draw_edges(count)
        if self.rec.on:  # the steps of this chunk, each 2 / n long, in order up to now
            self.rec.edge_steps(ii, jj, self.env.now - count * 2.0 / self.n, 2.0 / self.n)
        if self.cfg.noise == 0 and self.scalar_ok(attacker=False):
            self._scalar_steps(ii, jj)
        else:
            adv = self._adv_list
            for i, j in zip(ii, jj, strict=True):
                self.add_noise()
                if not (adv[i] and adv[j]):
                    pair_a, pair_b = np.array([i]), np.array([j])
                    self.local_steps(np.array([i, j]))
                    self.exchange_pairs(pair_a, pair_b)
        self.exchanges += count

    def _scalar_steps(self, ii: list[int], jj: list[int]) -> None:
        adv = self._adv_list
        const = self._constant
        exchange = self.scalar_kernel()
        xs = self.x[:, 0].tolist()
        for i, j in zip(ii, jj, strict=True):
            ai, aj = adv[i], adv[j]
            if not (ai or aj):
                exchange(xs, i, j, xs[i], xs[j])
            elif ai and aj:
                continue
            elif const is not None:
                exchange(xs, i, j, const if ai else xs[i], const if aj else xs[j])
            else:  # an attacker that is asked what it sends: this step on the vector kernel
                self.x[:, 0] = xs
                self.exchange_pairs(np.array([i]), np.array([j]))
                xs = self.x[:, 0].tolist()
        self.x[:, 0] = xs

    def process(self):
        env = self.env
        steps = self.records.steps
        dt = 2.0 / self.n
        for k in range(1, steps.size):
            count = int(steps[k] - steps[k - 1])
            yield env.timeout(count * dt)
            self.steps(count)
            self.record(k)
