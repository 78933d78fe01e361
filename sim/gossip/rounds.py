"""Synchronous rounds in which every node hears all its neighbours: ``neighbourhood`` and ``allreduce``.

``neighbourhood``
    In each round: the noise, the node update on every honest node, then
    every honest node ``i`` receives a value from every neighbour ``j``
    (its own row, or what an adversary chooses to send to ``i``) and
    aggregates. By default it mixes with Metropolis weights
    ``W_ij = 1 / (1 + max(d_i, d_j))`` through the defence's clipping radius,
    ``x_i += sum_j W_ij clip(v_j - x_i, tau_i)`` (ClippedGossip's update; no
    clip is plain gossip ``x' = W x``). A defence that answers
    ``neighbourhood_update(own, received, weights)`` (a coordinate-wise median,
    a trimmed mean, a radius set from the values received) aggregates
    instead. A round lasts the node update's compute time plus the slowest
    exchange of the graph.
``allreduce``
    The same round over the complete graph whatever the topology: with plain
    mixing every node gets the exact mean of all values (an adversary
    contributes what it sends to itself), the all-reduce of local SGD. A
    round lasts the compute time plus one exchange time
    (``latency + size / bandwidth``).

Adversaries never move, except those whose :meth:`aggregates` says yes (the
reference bit-flip worker, :class:`~sim.adversaries.BitFlip`): their rows take
the node update (when :meth:`trains` says so) and aggregate like an honest
node's, their own input being what they send. The receivers of a round
aggregate from the values of the round's start (after the node update),
simultaneously.

Mixing weights follow the config's ``mixing`` (:mod:`sim.gossip.mixing`); the
oracle clipping radius and the local dissensus attack read the same weights
(uniform weights where the receivers aggregate by a robust rule, as the
reference code's attacker assumes). With ``gossip_rounds = K`` a round is the
node update then ``K`` aggregations (each one asks the attackers again; the
reference code's multi-round trainer asks them once per step and lets them
send their own aggregated models afterwards), and lasts ``K`` exchange times
plus the compute.

A rule that keeps state per node (a persistent centre) answers
``neighbourhood_update_at(nodes, own, received, weights)`` instead of
``neighbourhood_update``; a rule with a ``start(n, dim, streams=...)`` method is
started once per run with the run's ``rule`` streams (bucketing draws its
permutations there).

References
----------
.. [1] L. Xiao, S. Boyd, "Fast linear iterations for distributed averaging", 2004.
.. [2] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..adversaries import clip_rows
from .state import GossipSystem

__all__ = ["NeighbourhoodRounds", "round_flow_time"]


def round_flow_time(flows: Any, config: Any, full: bool, edges: Any) -> float:
    """How long one round's exchanges take when they share the network (all start together).

    Every node sends ``size`` to each node it aggregates from: its neighbours
    (a flow each way on every edge), or every other node (``allreduce``, and
    ``neighbourhood`` on the complete graph), each flow on its route. The round
    lasts until the last one arrives.
    """
    from ..network import simulate_flows

    n = len(flows.nodes)
    size = float(config.size)
    if full:
        pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    else:
        u, v = edges
        pairs = [(int(a), int(b)) for a, b in zip(u.tolist(), v.tolist(), strict=True)]
        pairs += [(b, a) for a, b in pairs]
    if not pairs:
        return 0.0
    res = simulate_flows(flows, [(a, b, size, 0.0) for a, b in pairs],
                         weighting=config.network_weighting)
    return float(res.finish.max())


class NeighbourhoodRounds(GossipSystem):
    """Every honest node aggregates over its whole neighbourhood once per round."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        net, n = self.net, self.n
        self.full = bool(net.complete or self.cfg.protocol == "allreduce")
        if self.full:
            self.deg = np.full(n, n - 1, dtype=np.int64)
            self.round_delay = float(net.complete_delay) if net.complete else float(
                self.cfg.latency + (0.0 if np.isinf(self.cfg.bandwidth)
                                    else self.cfg.size / self.cfg.bandwidth))
            self.edges = n * (n - 1) // 2
        else:
            self.deg = np.diff(net.indptr)
            self.round_delay = float(net.delay.max()) if net.delay.size else 0.0
            self.edges = int(net.u.size)
        from .network import flow_network

        flows = flow_network(self.cfg)
        if flows is not None:  # the round's exchanges share the network: as long as they take
            self.round_delay = round_flow_time(flows, self.cfg, self.full,
                                               None if self.full else (net.u, net.v))
        ask = getattr(self.defence, "neighbourhood_update", None)
        self._rule = ask
        at = getattr(self.defence, "neighbourhood_update_at", None)
        self._rule_at = at if callable(at) else None
        start = getattr(self.defence, "start", None)
        if callable(start):
            start(n, self.d, streams=self.streams.child("rule"))
        self.gossip_rounds = int(getattr(self.cfg, "gossip_rounds", 1))
        mixing = getattr(self.cfg, "mixing", "metropolis")
        self._slot_w: np.ndarray | None = None
        if not self.full and mixing != "metropolis":
            from .mixing import slot_weights

            self._slot_w = slot_weights(net, mixing)
        if not self.full and (ask is None or getattr(self.defence, "mixes", False)):
            # the oracle radius and the local dissensus read the weights the receivers mix with
            from .mixing import weight_matrix

            self.nbhd.set_weights(weight_matrix(net, mixing))
        # adversaries whose rows train and aggregate (the reference bit-flip worker)
        adv = self.adversary
        self._adv_agg = np.zeros(0, dtype=np.int64)
        if adv is not None and callable(getattr(adv, "aggregates", None)) and adv.aggregates():
            self._adv_agg = np.flatnonzero(self.is_adv)
        self._adv_train = bool(adv is not None and callable(getattr(adv, "trains", None))
                               and adv.trains())
        self.receivers = np.union1d(self.hidx, self._adv_agg) if self._adv_agg.size else self.hidx
        # receivers grouped by degree (one array per degree)
        hd = self.deg[self.receivers]
        self._groups = [(int(r), self.receivers[hd == r]) for r in np.unique(hd)]

    def _neighbours(self, nodes: np.ndarray, r: int) -> np.ndarray:
        """``(k, r)`` neighbour positions of ``nodes`` (all of degree ``r``)."""
        if self.full:
            others = np.arange(self.n)[None, :].repeat(nodes.size, axis=0)
            mask = others != nodes[:, None]
            return others[mask].reshape(nodes.size, self.n - 1)
        start = self.net.indptr[nodes]
        return self.net.indices[start[:, None] + np.arange(r)[None, :]]

    def _received(self, nodes: np.ndarray, nbrs: np.ndarray) -> np.ndarray:
        """Values ``(k, r, d)`` the neighbours ``nbrs`` send to ``nodes``."""
        x = self.x
        vals = x[nbrs]
        if self.n_adv:
            adv = self.is_adv[nbrs]
            if adv.any():
                kk, rr = np.nonzero(adv)
                vals[kk, rr] = self.sent(nbrs[kk, rr], nodes[kk], x[nbrs[kk, rr]])
        return vals

    def _weights(self, nodes: np.ndarray, nbrs: np.ndarray) -> np.ndarray:
        if self.full:
            return np.full(nbrs.shape, 1.0 / self.n)
        if self._slot_w is not None:
            r = nbrs.shape[1]
            return self._slot_w[self.net.indptr[nodes][:, None] + np.arange(r)[None, :]]
        return 1.0 / (1.0 + np.maximum(self.deg[nodes][:, None], self.deg[nbrs]))

    def _plain_full_mean(self) -> bool:
        """Exact mean in one pass: complete mixing, plain defence, no adversary."""
        return self.full and self.n_adv == 0 and self._rule is None and self.defence.plain()

    def _own(self, nodes: np.ndarray) -> np.ndarray:
        """Each receiver's own input: its row, or what an aggregating adversary sends itself."""
        own = self.x[nodes]
        if self._adv_agg.size:
            adv = self.is_adv[nodes]
            if adv.any():
                own[adv] = self.adversary.send(self.view, nodes[adv], nodes[adv])  # type: ignore[union-attr]
        return own

    def aggregate(self) -> None:
        """One round's aggregation at every receiver, from the values now."""
        x = self.x
        if self._plain_full_mean():
            x[:] = x.mean(axis=0)
            return
        new = {}
        for r, nodes in self._groups:
            nbrs = self._neighbours(nodes, r)
            vals = self._received(nodes, nbrs)
            w = self._weights(nodes, nbrs)
            own = self._own(nodes)
            if self._rule_at is not None:
                new[r] = self._rule_at(nodes, own, vals, w)
                continue
            if self._rule is not None:
                new[r] = self._rule(own, vals, w)
                continue
            k, _, d = vals.shape
            diff = (vals - own[:, None, :]).reshape(k * r, d)
            tau = np.broadcast_to(np.asarray(self.defence.radius(self.view, nodes), dtype=float),
                                  (k,))
            if np.all(np.isinf(tau)):
                moved = diff
            else:
                moved = clip_rows(diff, np.repeat(tau, r))
            new[r] = own + np.einsum("kr,krd->kd", w, moved.reshape(k, r, d))
        for r, nodes in self._groups:
            x[nodes] = new[r]

    def compute_time(self) -> float:
        """Time of the round's local work, asked of the node update (0 if it has no say)."""
        ask = getattr(self.update, "compute_time", None)
        return float(ask(self.hidx)) if ask is not None and self._updating else 0.0

    def train(self) -> None:
        """The round's node update: the honest nodes, and the adversaries that train."""
        if self._adv_train and self._updating:
            nodes = np.flatnonzero(self.honest | self.is_adv)
            self.update.local_steps(self.x, nodes, rng=self.rng_update)  # type: ignore[arg-type]
        else:
            self.local_steps(self.hidx)

    def process(self):
        env = self.env
        steps = self.records.steps
        K = self.gossip_rounds
        duration = self.compute_time() + (self.round_delay if K == 1 else K * self.round_delay)
        k = 1
        for rd in range(1, self.cfg.rounds + 1):
            yield env.timeout(duration)
            self.add_noise()
            self.train()
            for _ in range(K):
                self.aggregate()
            self.exchanges += self.edges if K == 1 else K * self.edges
            if k < steps.size and steps[k] == rd:
                self.record(k)
                k += 1
