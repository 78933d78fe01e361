"""Robust aggregation rules for neighbourhood rounds of gossip training.

(``IPM``, inner-product manipulation, lives with the other attacks in
:mod:`sim.adversaries`. Label flipping is a data attack: its nodes follow the
protocol and train on flipped labels, see
:attr:`sim.learning.model.GossipTrainingConfig.flipped`.)

Aggregation rules for *neighbourhood rounds* (every honest node hears every
neighbour at once, then aggregates), asked through
``neighbourhood_update(own, received, weights)`` (``own`` ``(k, d)``,
``received`` ``(k, r, d)`` in neighbour order, ``weights`` ``(k, r)`` the
receivers' mixing weights); a rule that keeps state per node answers
``neighbourhood_update_at(nodes, own, received, weights)`` instead, and one
that draws random numbers or keeps state has ``start(n, dim, streams=...)``,
called once per run. Each rule is its own class, named in :data:`RULE_NAMES`
and built by :func:`make_rule`:

``FarthestClip`` (``farthest``)
    ClippedGossip's practical radius: ``tau_i`` is the second-largest distance
    ``|v_j - x_i|`` among the values received, so only the farthest
    neighbour is clipped; then ``x_i += sum_j W_ij clip(v_j - x_i, tau_i)``.
``CoordinateMedian`` (``median``)
    ``x_i`` becomes the coordinate-wise median of its own value and the values
    received.
``TrimmedMean`` (``trimmed``)
    per coordinate, drop the ``trim`` largest and ``trim`` smallest of the own
    and received values, then average the rest.
``Mean`` (``mean``)
    the plain mean of the own and the received values (uniform weights
    ``1 / (r + 1)``; the reference code's ``DeMean``).
``Krum`` (``krum``)
    Krum and multi-Krum over the own and the received values (own first):
    each value's score sums its ``m - f - 2`` smallest squared distances to the
    others (``m`` values, ``f`` assumed adversaries, itself not counted);
    the ``m_sel`` lowest scores (ties to the earlier value) are averaged. The
    ``reference`` variant is the ClippedGossip code's: it squares the squared
    distances (scores are sums of fourth powers) and *sums* the selected
    values (the same for ``m_sel = 1``).
``RFA`` (``rfa``)
    the smoothed Weiszfeld iteration for the geometric median: from ``z = 0``,
    ``T`` times ``beta_k = 1 / max(|z - v_k|, nu)``, ``z = sum beta_k v_k /
    sum beta_k`` (uniform ``alpha_k`` cancel).
``CenteredClip`` (``centered-clip``)
    centred clipping with a persistent centre per node: the centre starts at
    the node's own value at its first aggregation, then each call iterates
    ``c <- c + mean_k clip(v_k - c, tau)`` over the own and received values
    ``L`` times and returns ``c``, which the node keeps for its next call.
``Bucketing`` (wrapper around any rule, mixing included)
    per receiver and round, a random grouping of the inputs into buckets of
    ``s`` whose means replace them before the wrapped rule. ``repeat`` (the
    ClippedGossip code's form): each of the ``m`` inputs is repeated ``s``
    times, the ``m s`` copies are permuted and cut into ``m`` buckets of
    ``s``, the first bucket playing the node's own value; ``permute`` (the
    centralised form of Karimireddy, He and Jaggi): the ``m`` inputs are
    permuted and cut into ``ceil(m / s)`` buckets (uniform weights across
    buckets for a mixing rule). The permutations come from one stream per
    node (``bucketing``, node), so they do not depend on the order the engine
    visits the nodes in.

References
----------
.. [1] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022.
.. [2] C. Xie, O. Koyejo, I. Gupta, "Fall of empires: breaking Byzantine-tolerant
   SGD by inner product manipulation", UAI 2020.
.. [3] D. Yin, Y. Chen, K. Ramchandran, P. Bartlett, "Byzantine-robust
   distributed learning: towards optimal statistical rates", ICML 2018
   (coordinate-wise median and trimmed mean).
.. [4] P. Blanchard, E. M. El Mhamdi, R. Guerraoui, J. Stainer, "Machine
   learning with adversaries: Byzantine tolerant gradient descent", NeurIPS
   2017 (Krum and multi-Krum).
.. [5] K. Pillutla, S. M. Kakade, Z. Harchaoui, "Robust aggregation for
   federated learning", IEEE Trans. Signal Processing 70, 2022 (RFA, the
   smoothed Weiszfeld algorithm).
.. [6] S. P. Karimireddy, L. He, M. Jaggi, "Learning from history for
   Byzantine robust optimization", ICML 2021 (centred clipping); "Byzantine-
   robust learning on heterogeneous datasets via bucketing", ICLR 2022.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..adversaries import Defence, clip_rows
from ..errors import check, check_choice, check_int, check_nonnegative

__all__ = ["RULE_NAMES", "KRUM_VARIANTS", "BUCKETING_FORMS", "FarthestClip", "CoordinateMedian",
           "TrimmedMean", "Mean", "Krum", "RFA", "CenteredClip", "Mixing", "Bucketing", "make_rule"]

#: The rules by name (``none`` mixes through the gossip defence).
RULE_NAMES = ("none", "farthest", "median", "trimmed", "krum", "rfa", "centered-clip", "mean")
#: Krum's scoring: the textbook one, or the reference code's (fourth powers, summed selection).
KRUM_VARIANTS = ("textbook", "reference")
#: Bucketing's grouping (see the module docstring).
BUCKETING_FORMS = ("repeat", "permute")


class _NeighbourhoodRule(Defence):
    """A rule that needs every received value at once (neighbourhood rounds only)."""

    neighbourhood_only = True
    #: True when the rule mixes with the receivers' mixing weights (a local dissensus attacker
    #: then reads them; otherwise it assumes uniform weights, as the reference code does).
    mixes = False

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:  # pragma: no cover
        """New values of ``k`` receivers from ``own`` ``(k, d)`` and ``received`` ``(k, r, d)``."""
        raise NotImplementedError


class FarthestClip(_NeighbourhoodRule):
    """Self-centred clipping whose radius clips only the farthest received value."""

    kind = "farthest"
    mixes = True

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """``x_i + sum_j W_ij clip(v_j - x_i, tau_i)``, ``tau_i`` the second-largest distance."""
        diff = received - own[:, None, :]
        dist = np.sqrt(np.einsum("krd,krd->kr", diff, diff))
        r = dist.shape[1]
        tau = np.sort(dist, axis=1)[:, -2] if r >= 2 else np.full(dist.shape[0], math.inf)
        k, _, d = diff.shape
        clipped = clip_rows(diff.reshape(k * r, d), np.repeat(tau, r)).reshape(k, r, d)
        return own + np.einsum("kr,krd->kd", weights, clipped)


class CoordinateMedian(_NeighbourhoodRule):
    """Coordinate-wise median of the own and the received values."""

    kind = "median"

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """``median(x_i, v_1, ..., v_r)`` per coordinate."""
        return np.median(np.concatenate([own[:, None, :], received], axis=1), axis=1)


class TrimmedMean(_NeighbourhoodRule):
    """Coordinate-wise trimmed mean of the own and the received values.

    Parameters
    ----------
    trim : int
        Values dropped at each end, per coordinate (``2 trim`` must stay below
        the number of values; with fewer the node keeps the median).
    """

    kind = "trimmed"

    def __init__(self, trim: int = 1) -> None:
        self.trim = check_int("trim", trim, low=0)

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """Mean of the middle ``r + 1 - 2 trim`` values per coordinate."""
        vals = np.sort(np.concatenate([own[:, None, :], received], axis=1), axis=1)
        m = vals.shape[1]
        b = self.trim
        if m - 2 * b < 1:
            return np.median(vals, axis=1)
        return vals[:, b:m - b, :].mean(axis=1)


def _inputs(own: np.ndarray, received: np.ndarray) -> np.ndarray:
    """``(k, m, d)``: each receiver's own value first, then the values received."""
    return np.concatenate([own[:, None, :], received], axis=1)


class Mean(_NeighbourhoodRule):
    """The mean of the own and the received values (uniform weights)."""

    kind = "mean"

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """``(x_i + v_1 + ... + v_r) / (r + 1)``."""
        return _inputs(own, received).mean(axis=1)


class Mixing(_NeighbourhoodRule):
    """Gossip mixing through a fixed clipping radius, as a rule (what :class:`Bucketing` wraps
    when the defence is plain or a fixed clip): ``x_i + sum_j W_ij clip(v_j - x_i, tau)``."""

    kind = "mixing"
    mixes = True

    def __init__(self, tau: float = math.inf) -> None:
        self.tau = float(tau)

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """The ClippedGossip update with radius ``tau`` (``inf``: plain gossip)."""
        diff = received - own[:, None, :]
        if not math.isinf(self.tau):
            k, r, d = diff.shape
            diff = clip_rows(diff.reshape(k * r, d), self.tau).reshape(k, r, d)
        return own + np.einsum("kr,krd->kd", weights, diff)


def _pairwise_sq(v: np.ndarray) -> np.ndarray:
    """``(k, m, m)`` squared distances between the ``m`` values of each receiver."""
    k, m, _ = v.shape
    out = np.empty((k, m, m))
    for i in range(m):
        dv = v - v[:, i:i + 1, :]
        out[:, i, :] = np.einsum("kmd,kmd->km", dv, dv)
    return out


class Krum(_NeighbourhoodRule):
    """Krum (``m_sel = 1``) and multi-Krum over the own and the received values.

    Parameters
    ----------
    f : int
        Adversaries assumed among the inputs (the reference code passes the
        total number of adversaries); ``2 f + 2`` must not exceed the inputs.
    m : int
        Values selected (1: Krum).
    variant : {"textbook", "reference"}
        ``textbook``: scores sum squared distances and the selection is
        averaged; ``reference``: the ClippedGossip code's fourth powers and
        sum of the selection.
    """

    kind = "krum"

    def __init__(self, f: int, m: int = 1, variant: str = "textbook") -> None:
        self.f = check_int("krum_f", f, low=0)
        self.m = check_int("krum_m", m, low=1)
        self.variant = check_choice("krum_variant", variant, KRUM_VARIANTS)

    def scores(self, values: np.ndarray) -> np.ndarray:
        """``(k, m)`` Krum scores of each receiver's ``m`` values."""
        k, m, _ = values.shape
        d2 = _pairwise_sq(values)
        if self.variant == "reference":
            d2 = d2 * d2
        keep = m - self.f - 2
        check(2 * self.f + 2 <= m, "krum_f", f"at most (inputs - 2) / 2 = {(m - 2) // 2} here (Krum needs "
              f"2 f + 2 <= the {m} values a node aggregates)", self.f)
        eye = np.eye(m, dtype=bool)
        d2 = np.where(eye[None, :, :], np.inf, d2)  # a value is not its own neighbour
        return np.sort(d2, axis=2)[:, :, :keep].sum(axis=2)

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """The selected value (Krum) or the selection's mean (sum for ``reference``)."""
        v = _inputs(own, received)
        k, m, _ = v.shape
        check(self.m <= m, "krum_m", f"at most the {m} values a node aggregates", self.m)
        order = np.argsort(self.scores(v), axis=1, kind="stable")[:, :self.m]
        chosen = v[np.arange(k)[:, None], order]
        if self.variant == "reference" or self.m == 1:
            return chosen.sum(axis=1)
        return chosen.mean(axis=1)


class RFA(_NeighbourhoodRule):
    """Robust federated averaging: ``T`` smoothed Weiszfeld steps from 0 (geometric median).

    Parameters
    ----------
    iters : int
        ``T``.
    nu : float
        Smoothing: distances below ``nu`` count as ``nu``.
    """

    kind = "rfa"

    def __init__(self, iters: int = 8, nu: float = 0.1) -> None:
        self.iters = check_int("rfa_iters", iters, low=1)
        self.nu = check_nonnegative("rfa_nu", nu)

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """The smoothed Weiszfeld estimate of the geometric median of the own and received values."""
        v = _inputs(own, received)
        z = np.zeros((v.shape[0], v.shape[2]))
        for _ in range(self.iters):
            dz = z[:, None, :] - v
            dist = np.sqrt(np.einsum("kmd,kmd->km", dz, dz))
            beta = (1.0 / v.shape[1]) / np.maximum(dist, self.nu)
            z = np.einsum("km,kmd->kd", beta, v) / beta.sum(axis=1)[:, None]
        return z


class CenteredClip(_NeighbourhoodRule):
    """Centred clipping with a persistent centre per node.

    Parameters
    ----------
    tau : float
        Clipping radius.
    iters : int
        Iterations per aggregation (the decentralised reference code uses 1).
    """

    kind = "centered-clip"

    def __init__(self, tau: float, iters: int = 1) -> None:
        self.tau = check_nonnegative("cc_tau", tau)
        self.iters = check_int("cc_iters", iters, low=1)
        self._centre: np.ndarray | None = None
        self._set: np.ndarray | None = None

    def start(self, n: int, dim: int, *, streams: Any = None) -> None:
        """No centre yet at any node."""
        self._centre = np.zeros((n, dim))
        self._set = np.zeros(n, dtype=bool)

    def neighbourhood_update_at(self, nodes: np.ndarray, own: np.ndarray, received: np.ndarray,
                                weights: np.ndarray) -> np.ndarray:
        """Iterate each node's centre toward the clipped mean of its inputs; keep it."""
        if self._centre is None or self._centre.shape[0] <= int(np.max(nodes)):
            self.start(int(np.max(nodes)) + 1, own.shape[1])
        assert self._centre is not None and self._set is not None
        nodes = np.asarray(nodes, dtype=np.int64)
        c = np.where(self._set[nodes][:, None], self._centre[nodes], own)
        v = _inputs(own, received)
        k, m, d = v.shape
        for _ in range(self.iters):
            diff = (v - c[:, None, :]).reshape(k * m, d)
            c = clip_rows(diff, self.tau).reshape(k, m, d).sum(axis=1) / m + c
        self._centre[nodes] = c
        self._set[nodes] = True
        return c.copy()

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
        """One aggregation from centres at the own values (no memory; engines call ``_at``)."""
        v = _inputs(own, received)
        k, m, d = v.shape
        c = own.copy()
        for _ in range(self.iters):
            diff = (v - c[:, None, :]).reshape(k * m, d)
            c = clip_rows(diff, self.tau).reshape(k, m, d).sum(axis=1) / m + c
        return c


class Bucketing(_NeighbourhoodRule):
    """Random buckets of ``s`` inputs, averaged, before the wrapped rule.

    Parameters
    ----------
    rule : Defence
        The wrapped rule (anything with ``neighbourhood_update`` or
        ``neighbourhood_update_at``; :class:`Mixing` for plain or clipped gossip).
    s : int
        Bucket size.
    form : {"repeat", "permute"}
        See the module docstring.
    """

    kind = "bucketing"

    def __init__(self, rule: Any, s: int = 2, form: str = "repeat") -> None:
        self.rule = rule
        self.s = check_int("bucketing", s, low=1)
        self.form = check_choice("bucketing_form", form, BUCKETING_FORMS)
        self._streams: Any = None
        self._rngs: dict[int, np.random.Generator] = {}

    def start(self, n: int, dim: int, *, streams: Any) -> None:
        """Keep the run's streams (one ``bucketing`` stream per node) and start the wrapped rule."""
        self._streams = streams
        self._rngs = {}
        ask = getattr(self.rule, "start", None)
        if callable(ask):
            ask(n, dim, streams=streams.child("wrapped"))

    def rng(self, node: int) -> np.random.Generator:
        """Node ``node``'s bucketing stream."""
        g = self._rngs.get(node)
        if g is None:
            if self._streams is None:
                from ..rng import Streams

                self._streams = Streams(0)
            g = self._rngs[node] = self._streams.rng("bucketing", node)
        return g

    def buckets(self, nodes: np.ndarray, own: np.ndarray, received: np.ndarray) -> np.ndarray:
        """``(k, b, d)`` bucket means of each receiver (the first plays its own value)."""
        v = _inputs(own, received)
        k, m, d = v.shape
        s = self.s
        if self.form == "repeat":
            base = np.arange(m * s) % m
            idx = np.stack([base[self.rng(int(i)).permutation(m * s)] for i in nodes])
            return v[np.arange(k)[:, None], idx].reshape(k, m, s, d).sum(axis=2) / s
        nb = -(-m // s)
        idx = np.stack([self.rng(int(i)).permutation(m) for i in nodes])
        perm = v[np.arange(k)[:, None], idx]
        out = np.empty((k, nb, d))
        for t in range(nb):
            part = perm[:, t * s:(t + 1) * s]
            out[:, t] = part.sum(axis=1) / part.shape[1]
        return out

    def neighbourhood_update_at(self, nodes: np.ndarray, own: np.ndarray, received: np.ndarray,
                                weights: np.ndarray) -> np.ndarray:
        """The wrapped rule on the bucket means (the first as the own value)."""
        b = self.buckets(np.asarray(nodes), own, received)
        w = weights if self.form == "repeat" else np.full((b.shape[0], b.shape[1] - 1),
                                                           1.0 / b.shape[1])
        at = getattr(self.rule, "neighbourhood_update_at", None)
        if callable(at):
            return at(nodes, b[:, 0], b[:, 1:], w)
        return self.rule.neighbourhood_update(b[:, 0], b[:, 1:], w)

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:  # pragma: no cover - engines use _at
        """Bucketing needs the receivers' identities (their streams): see ``neighbourhood_update_at``."""
        raise NotImplementedError("Bucketing aggregates through neighbourhood_update_at")


def make_rule(name: str, *, trim: int = 1, krum_f: int = 0, krum_m: int = 1,
              krum_variant: str = "textbook", rfa_iters: int = 8, rfa_nu: float = 0.1,
              cc_tau: float = 10.0, cc_iters: int = 1, bucketing: int = 0,
              bucketing_form: str = "repeat", clip: float | None = None) -> Defence | None:
    """The rule a name gives (``None`` for ``none`` without bucketing: the gossip defence mixes).

    Parameters
    ----------
    name : str
        One of :data:`RULE_NAMES`.
    trim, krum_f, krum_m, krum_variant, rfa_iters, rfa_nu, cc_tau, cc_iters
        The rules' parameters.
    bucketing : int
        Bucket size ``s`` (0: no bucketing); with ``none`` it wraps plain or
        fixed-radius mixing (:class:`Mixing` with ``clip``).
    bucketing_form : {"repeat", "permute"}
    clip : float, optional
        The fixed gossip clipping radius wrapped by bucketing with ``none``.
    """
    check_choice("rule", name, RULE_NAMES)
    rule: Defence | None
    if name == "farthest":
        rule = FarthestClip()
    elif name == "median":
        rule = CoordinateMedian()
    elif name == "trimmed":
        rule = TrimmedMean(trim)
    elif name == "mean":
        rule = Mean()
    elif name == "krum":
        rule = Krum(krum_f, krum_m, krum_variant)
    elif name == "rfa":
        rule = RFA(rfa_iters, rfa_nu)
    elif name == "centered-clip":
        rule = CenteredClip(cc_tau, cc_iters)
    else:
        rule = None
    if bucketing:
        inner = rule if rule is not None else Mixing(math.inf if clip is None else clip)
        return Bucketing(inner, bucketing, bucketing_form)
    return rule
