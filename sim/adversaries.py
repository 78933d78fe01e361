"""Adversarial peers and clipping defences for pairwise gossip.

An *adversary* occupies some nodes of the gossip graph. It never updates its
own value; when it exchanges with an honest peer it sends a value of its
choosing, possibly a different one to every peer:

``stubborn``
    always sends the constant ``b`` (the Study B attacker);
``alie``
    "a little is enough": the honest mean plus ``z`` honest standard
    deviations, per coordinate (an omniscient attacker; use ``z < 0`` for the
    "minus" variant of the ClippedGossip experiments);
``dissensus``
    pushes each peer away from the mean of its honest neighbours: it sends
    ``x_p - eps * (nbr_mean_p - x_p)``, so after the pairwise average the peer
    has moved ``eps / 2`` of its gap *away* from its honest neighbours;
``signflip``
    sends the negation of the peer's own value, ``-x_p``;
``ipm``
    inner-product manipulation: ``-eps`` times the honest mean (Xie, Koyejo,
    Gupta, UAI 2020), to every peer;
``bitflip``
    the attacker keeps a model of its own that trains (plain SGD on its own
    objective) and aggregates like an honest node's, and sends minus that
    model to every neighbour (the reference code's bit-flip worker).

*Attack scope.* ALIE, IPM and dissensus read the honest values. With scope
``global`` (the default, and every number dtsim printed before) they read all
honest nodes as above. With scope ``local`` each computes what the reference
code of the ClippedGossip authors computes for a Byzantine leaf attached to one
target ``t``, from ``t``'s neighbourhood only: with ``S_t = {t} + the honest
neighbours of t``,

* ALIE sends ``mu - z sigma`` per coordinate, ``mu`` and ``sigma`` the mean
  and the standard deviation with ddof 1 over ``S_t`` (``sigma = 0`` when
  ``S_t = {t}``; torch gives NaN there); its default ``z`` is
  ``Phi^-1((n - f - s) / (n - f))`` with ``s = floor(n / 2 + 1) - f``
  (:func:`alie_default_z`);
* IPM sends ``-eps`` times the mean over ``S_t``;
* dissensus sends ``x_t - eps sum_{j honest nbr of t} W_tj (x_j - x_t) /
  sum_{k adversarial nbr of t} W_tk`` with ``W`` the target's mixing weights
  when it mixes (plain gossip, clipping) and uniform weights when it
  aggregates by a robust rule, as theirs does (``x_t`` when the adversarial
  weights sum to 0).

Their attacker has exactly one neighbour. Here an attacker with several honest
neighbours sends each one the value computed with that neighbour as the target,
as if it were a separate leaf attached to each (what a receiver gets never
depends on which attacker sent it).

A *defence* decides how an honest node moves toward the value it received.
With ``diff = received - own`` the node adds ``step(diff)``:

* no defence: ``diff / 2`` (plain pairwise averaging);
* fixed trust region: ``clip(diff, tau) / 2`` with ``clip`` the projection on
  the Euclidean ball of radius ``tau`` (clip, then halve);
* adaptive self-centred clipping (the oracle radius rule of ClippedGossip):
  ``tau_i = sqrt(sum_{honest j in N(i)} |x_j - x_i|^2 / a_i)`` with ``a_i`` the
  number of adversarial neighbours of ``i`` (uniform mixing weights cancel);
  a node with no adversarial neighbour does not clip.

Both attackers and defences see the system through a :class:`View`: the
current values, the honest mask and a :class:`Neighbourhood` that sums over
honest neighbours (in O(1) per node on the complete graph, which is never
built explicitly).

References
----------
L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized learning
via ClippedGossip", 2022 (self-centred clipping, its radius rules and the
bit-flip, ALIE, IPM and dissensus attacks).
G. Baruch, M. Baruch, Y. Goldberg, "A little is enough: circumventing defenses
for distributed learning", NeurIPS 2019 (ALIE).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import check_choice, check_nonnegative

__all__ = [
    "ADVERSARIES",
    "SCOPES",
    "SCOPED",
    "DEFAULT_VALUES",
    "alie_default_z",
    "Neighbourhood",
    "View",
    "Adversary",
    "Stubborn",
    "StubbornValues",
    "ALIE",
    "Dissensus",
    "SignFlip",
    "IPM",
    "BitFlip",
    "make_adversary",
    "Defence",
    "NoDefence",
    "FixedClip",
    "AdaptiveClip",
    "make_defence",
    "clip_rows",
]

ADVERSARIES = ("none", "stubborn", "alie", "dissensus", "signflip", "ipm", "bitflip")
#: Where ALIE, IPM and dissensus read the honest values: all honest nodes, or the target's neighbourhood.
SCOPES = ("global", "local")
#: The kinds an attack scope applies to.
SCOPED = ("alie", "ipm", "dissensus")
#: Default ``adversary_value`` per kind: ``b`` for stubborn, ``z`` for ALIE,
#: ``eps`` for dissensus and IPM (sign-flip and bit-flip have no parameter).
#: With scope ``local`` the default ALIE ``z`` is :func:`alie_default_z`; IPM's
#: 0.1 is the reference code's fixed ``eps``.
DEFAULT_VALUES = {"none": 0.0, "stubborn": 10.0, "alie": 1.0, "dissensus": 1.0, "signflip": 0.0,
                  "ipm": 0.1, "bitflip": 0.0}


def alie_default_z(n: int, f: int) -> float:
    """The reference code's default ALIE ``z`` for ``n`` nodes of which ``f`` are adversaries.

    ``z = Phi^-1((n - f - s) / (n - f))`` with ``s = floor(n / 2 + 1) - f`` the
    number of "supporters" (Baruch et al.'s choice, as the ClippedGossip code
    computes it with ``n`` every node and ``f`` the Byzantine ones). NaN or
    infinite when the probability leaves ``(0, 1)`` (many adversaries): the
    attack then needs its ``z`` given.

    Parameters
    ----------
    n, f : int

    Returns
    -------
    float
    """
    from scipy.stats import norm

    s = math.floor(n / 2 + 1) - f
    p = (n - f - s) / (n - f)
    return float(norm.ppf(p))


# --------------------------------------------------------------------------- neighbourhoods


class Neighbourhood:
    """Sums over each node's honest neighbours, on the complete graph or a sparse one.

    Parameters
    ----------
    honest : ndarray of bool, shape (n,)
        Which nodes are honest.
    adjacency : scipy.sparse matrix or None
        The graph's 0/1 adjacency in node order; ``None`` means the complete
        graph (kept implicit, so ``n = 10**5`` costs nothing).
    """

    def __init__(self, honest: np.ndarray, adjacency: sp.spmatrix | sp.sparray | None = None,
                 weights: sp.spmatrix | sp.sparray | None = None) -> None:
        self.honest = np.asarray(honest, dtype=bool)
        self.n = self.honest.size
        self.h = int(self.honest.sum())
        self.complete = adjacency is None
        self._adj = None
        if adjacency is None:
            self._adj_h = None
            self._hdeg = self.h - self.honest.astype(np.int64)
            self._adeg = (self.n - self.h) - (~self.honest).astype(np.int64)
        else:
            adj = sp.csr_array(adjacency, dtype=float)
            adj.data[:] = 1.0
            self._adj = adj
            self._adj_h = sp.csr_array(adj @ sp.diags_array(self.honest.astype(float)))
            self._adj_h.eliminate_zeros()
            self._hdeg = np.asarray(self._adj_h.sum(axis=1)).ravel().astype(np.int64)
            deg = np.asarray(adj.sum(axis=1)).ravel().astype(np.int64)
            self._adeg = deg - self._hdeg
        self.weights: sp.csr_array | None = None
        self._uniform_row = np.ones(self.n, dtype=bool)
        if weights is not None:
            if adjacency is None:
                raise ValueError("Neighbourhood weights need the graph's adjacency")
            self.set_weights(weights)

    def set_weights(self, weights: sp.spmatrix | sp.sparray | None) -> None:
        """Mixing weights ``W_ij`` of each receiver's neighbours (``None``: uniform).

        ``weights`` is an ``n x n`` sparse matrix of the off-diagonal weights
        with the graph's sparsity (row ``i``: what node ``i`` gives each
        neighbour). Rows whose weights are all equal are *uniform*: the rules
        that read weights then compute exactly what they computed without any
        (uniform weights cancel), so a regular graph's numbers never move.
        """
        if weights is None:
            self.weights = None
            self._uniform_row = np.ones(self.n, dtype=bool)
            return
        w = sp.csr_array(weights, dtype=float)
        w.sort_indices()
        self.weights = w
        lo = np.full(self.n, np.inf)
        hi = np.full(self.n, -np.inf)
        r = np.repeat(np.arange(self.n), np.diff(w.indptr))
        np.minimum.at(lo, r, w.data)
        np.maximum.at(hi, r, w.data)
        self._uniform_row = (lo == hi) | (np.diff(w.indptr) == 0)

    def honest_degree(self, peers: np.ndarray) -> np.ndarray:
        """Number of honest neighbours of each node in ``peers``."""
        return self._hdeg[peers]

    def adversary_degree(self, peers: np.ndarray) -> np.ndarray:
        """Number of adversarial neighbours of each node in ``peers``."""
        return self._adeg[peers]

    def honest_sums(self, x: np.ndarray, peers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(count, sum x_j, sum |x_j|^2)`` over the honest neighbours ``j`` of each peer.

        Parameters
        ----------
        x : ndarray, shape (n, d)
            Current values.
        peers : ndarray of int
            Nodes to evaluate.

        Returns
        -------
        tuple of ndarray
            Shapes ``(k,)``, ``(k, d)`` and ``(k,)``.
        """
        peers = np.asarray(peers)
        sq = np.einsum("ij,ij->i", x, x)
        if self._adj_h is None:
            hx = x[self.honest]
            s1_all = hx.sum(axis=0)
            s2_all = float(sq[self.honest].sum())
            own = self.honest[peers].astype(float)
            s1 = s1_all[None, :] - own[:, None] * x[peers]
            s2 = s2_all - own * sq[peers]
        else:
            rows = self._adj_h[peers]
            s1 = np.asarray(rows @ x)
            s2 = np.asarray(rows @ sq).ravel()
        return self._hdeg[peers].astype(float), s1, s2

    def honest_mean(self, x: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """Mean of each peer's honest neighbours (the peer's own value if it has none)."""
        cnt, s1, _ = self.honest_sums(x, peers)
        out = x[peers].astype(float, copy=True)
        ok = cnt > 0
        out[ok] = s1[ok] / cnt[ok, None]
        return out

    def honest_sqdist(self, x: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """``sum_{honest j in N(p)} |x_j - x_p|^2`` for each peer ``p``."""
        peers = np.asarray(peers)
        if self._adj_h is not None:
            # summed term by term over each peer's honest neighbours (O(its degree))
            rows = self._adj_h[peers]
            r = np.repeat(np.arange(peers.size), np.diff(rows.indptr))
            diff = x[rows.indices] - x[peers][r]
            return np.bincount(r, weights=np.einsum("ij,ij->i", diff, diff), minlength=peers.size)
        # expanded sums, on values centred on the honest mean: uncentred, they cancel
        # catastrophically near consensus far from 0
        if self.h:
            x = x - x[self.honest].mean(axis=0)
        cnt, s1, s2 = self.honest_sums(x, peers)
        xp = x[peers]
        val = s2 - 2.0 * np.einsum("ij,ij->i", xp, s1) + cnt * np.einsum("ij,ij->i", xp, xp)
        return np.maximum(val, 0.0)


    # -- the target's neighbourhood (attack scope "local") ------------------------
    def _group(self, peers: np.ndarray) -> tuple[Any, np.ndarray]:
        """Honest-neighbour rows of ``peers`` (CSR, data 1) and each row's group size ``1 + count``."""
        rows = self._adj_h[peers]  # type: ignore[index]
        return rows, np.diff(rows.indptr).astype(np.int64) + 1

    def local_mean(self, x: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """Mean of ``S_p = {p} + honest neighbours of p`` for each peer ``p`` (shape ``(k, d)``)."""
        peers = np.asarray(peers, dtype=np.int64)
        if self._adj_h is None:
            hx = x[self.honest]
            tot = hx.sum(axis=0)[None, :] + np.where(self.honest[peers], 0.0, 1.0)[:, None] * x[peers]
            cnt = self.h + (~self.honest[peers]).astype(np.int64)
            return tot / cnt[:, None]
        rows, cnt = self._group(peers)
        return (np.asarray(rows @ x) + x[peers]) / cnt[:, None]

    def local_stats(self, x: np.ndarray, peers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-coordinate mean and standard deviation (ddof 1) over ``S_p`` for each peer ``p``.

        The deviation is 0 where ``S_p`` is ``p`` alone. On the implicit
        complete graph ``S_p`` is every honest node (and ``p``); elsewhere the
        squared deviations from each group's own mean are summed term by term.
        """
        peers = np.asarray(peers, dtype=np.int64)
        if self._adj_h is None:
            c = x[self.honest].mean(axis=0) if self.h else np.zeros(x.shape[1])
            y = x - c  # centred on the honest mean: no cancellation near consensus
            hy = y[self.honest]
            s1h, s2h = hy.sum(axis=0), np.einsum("ij,ij->j", hy, hy)
            extra = (~self.honest[peers]).astype(float)[:, None]
            yp = y[peers]
            cnt = (self.h + extra[:, 0])
            s1 = s1h[None, :] + extra * yp
            s2 = s2h[None, :] + extra * yp * yp
            mean_y = s1 / cnt[:, None]
            ss = np.maximum(s2 - cnt[:, None] * mean_y * mean_y, 0.0)
            mean = mean_y + c
        else:
            rows, cnt_i = self._group(peers)
            cnt = cnt_i.astype(float)
            mean = (np.asarray(rows @ x) + x[peers]) / cnt[:, None]
            r = np.repeat(np.arange(peers.size), np.diff(rows.indptr))
            dev = x[rows.indices] - mean[r]
            own = x[peers] - mean
            pick = sp.csr_array((np.ones(r.size), np.arange(r.size), rows.indptr),
                                shape=(peers.size, r.size))
            ss = np.asarray(pick @ (dev * dev)) + own * own
        var = np.zeros_like(mean)
        many = cnt > 1
        var[many] = ss[many] / (cnt[many, None] - 1.0)
        return mean, np.sqrt(var)

    def weighted_pull(self, x: np.ndarray, peers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sum_{honest j} W_pj (x_j - x_p), sum_{adversarial k} W_pk)`` for each peer ``p``.

        With uniform weights (none set, or the implicit complete graph) every
        weight is 1: the honest sum of differences and the adversarial degree
        (the common weight cancels in the dissensus ratio).
        """
        peers = np.asarray(peers, dtype=np.int64)
        xp = x[peers]
        if self.weights is None:
            cnt, s1, _ = self.honest_sums(x, peers)
            return s1 - cnt[:, None] * xp, self._adeg[peers].astype(float)
        rows = self.weights[peers]
        r = np.repeat(np.arange(peers.size), np.diff(rows.indptr))
        h = self.honest[rows.indices]
        wh = np.where(h, rows.data, 0.0)
        pull_rows = sp.csr_array((wh, rows.indices, rows.indptr), shape=rows.shape)
        pull = np.asarray(pull_rows @ x) - np.asarray(pull_rows.sum(axis=1)).ravel()[:, None] * xp
        byz = np.bincount(r, weights=np.where(h, 0.0, rows.data), minlength=peers.size)
        return pull, byz

    def weighted_oracle(self, x: np.ndarray, peers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sum_{honest j} W_pj |x_j - x_p|^2, sum_{adversarial k} W_pk)`` (weights must be set)."""
        peers = np.asarray(peers, dtype=np.int64)
        assert self.weights is not None
        rows = self.weights[peers]
        r = np.repeat(np.arange(peers.size), np.diff(rows.indptr))
        h = self.honest[rows.indices]
        diff = x[rows.indices] - x[peers][r]
        sq = np.einsum("ij,ij->i", diff, diff)
        num = np.bincount(r, weights=np.where(h, rows.data * sq, 0.0), minlength=peers.size)
        byz = np.bincount(r, weights=np.where(h, 0.0, rows.data), minlength=peers.size)
        return num, byz

    def uniform_rows(self, peers: np.ndarray) -> np.ndarray:
        """True for each peer whose neighbours all have the same weight (or no weights are set)."""
        return self._uniform_row[np.asarray(peers, dtype=np.int64)]


@dataclass
class View:
    """What attackers and defences see at an exchange: values, honest mask, neighbourhoods."""

    x: np.ndarray
    honest: np.ndarray
    nbhd: Neighbourhood

    def honest_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-coordinate mean and (population) standard deviation of the honest values."""
        hx = self.x[self.honest]
        return hx.mean(axis=0), hx.std(axis=0)


# --------------------------------------------------------------------------- adversaries


class Adversary:
    """Base class: an attacker that never updates and sends values of its choosing."""

    kind = "none"

    def initial_value(self, dim: int) -> np.ndarray | None:
        """The value the adversary's rows hold (``None``: keep the honest-like draw)."""
        return None

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """Values sent by ``senders[k]`` to ``peers[k]``; shape ``(len(peers), d)``."""
        raise NotImplementedError

    def target(self, dim: int) -> np.ndarray | None:
        """The point the attacker drags the honest mean to, if it has one (stubborn ``b``)."""
        return None

    def constant(self) -> float | None:
        """The one number sent in every coordinate to every peer at all times, if there is one.

        Engines ask this for their scalar fast paths (``dim = 1``): a constant
        attacker sends it without a call to :meth:`send`. ``None`` (the
        default) sends through :meth:`send` on the vector path.
        """
        return None

    def compiled_form(self) -> tuple[str, float] | None:
        """``(rule, parameter)`` naming a sending rule the compiled engine implements, if any.

        The compiled async engine (:mod:`sim.gossip.compiled`) asks this, and
        :meth:`constant`, instead of calling :meth:`send` from compiled code.
        ``None`` (the default) leaves a user's adversary to the SimPy engines.
        """
        return None


class Stubborn(Adversary):
    """Holds ``b`` (in every coordinate) and sends it to everyone."""

    kind = "stubborn"

    def __init__(self, value: float) -> None:
        self.value = float(value)

    def initial_value(self, dim: int) -> np.ndarray:
        return np.full(dim, self.value)

    def target(self, dim: int) -> np.ndarray:
        return np.full(dim, self.value)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        return np.full((len(peers), view.x.shape[1]), self.value)

    def constant(self) -> float:
        return self.value


class StubbornValues(Adversary):
    """Stubborn nodes that disagree: node ``positions[k]`` holds ``values[k]`` and sends it to everyone.

    Parameters
    ----------
    positions : sequence of int
        The stubborn nodes (node order), as the config's ``adversary_positions``.
    values : sequence of float
        Each one's value ``b_k`` (in every coordinate).
    n : int
        Number of nodes.

    Notes
    -----
    With disagreeing stubborn nodes the honest values never settle; their
    expectation tends to the harmonic extension ``-L_HH^{-1} L_HS b_S`` of
    the stubborn values (:func:`sim.analytic.harmonic_extension`).
    """

    kind = "stubborn"

    def __init__(self, positions: Sequence[int], values: Sequence[float], n: int) -> None:
        if len(positions) != len(values):
            raise ValueError(f"StubbornValues needs one value per position: {len(positions)}, {len(values)}")
        self.positions = tuple(int(p) for p in positions)
        self.values = tuple(float(v) for v in values)
        self._by_node = np.full(int(n), np.nan)
        self._by_node[list(self.positions)] = self.values

    def initial_value(self, dim: int) -> np.ndarray:
        """One row per stubborn node, in ``positions`` order."""
        return np.repeat(np.asarray(self.values)[:, None], dim, axis=1)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        v = self._by_node[np.asarray(senders, dtype=np.int64)]
        return np.repeat(v[:, None], view.x.shape[1], axis=1)


class _Scoped(Adversary):
    """An attack that reads the honest values, globally or from each target's neighbourhood."""

    def __init__(self, scope: str = "global") -> None:
        self.scope = check_choice("attack_scope", scope, SCOPES)

    @property
    def local(self) -> bool:
        """True with scope ``local`` (the reference code's computation)."""
        return self.scope == "local"


class ALIE(_Scoped):
    """"A little is enough": honest mean plus ``z`` standard deviations (scope ``global``),
    or the target's neighbourhood mean minus ``z`` standard deviations with ddof 1 (``local``)."""

    kind = "alie"

    def __init__(self, z: float, scope: str = "global") -> None:
        super().__init__(scope)
        self.z = float(z)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        if self.local:
            mu, sd = view.nbhd.local_stats(view.x, peers)
            return mu - self.z * sd
        mu, sd = view.honest_stats()
        return np.broadcast_to(mu + self.z * sd, (len(peers), view.x.shape[1])).copy()

    def compiled_form(self) -> tuple[str, float] | None:
        return None if self.local else ("alie", self.z)


class Dissensus(_Scoped):
    """Pushes each peer away from its honest neighbours (the peer's mean gap, or the reference
    code's weighted pull divided by the adversarial weight with scope ``local``)."""

    kind = "dissensus"

    def __init__(self, eps: float, scope: str = "global") -> None:
        super().__init__(scope)
        self.eps = float(eps)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        xp = view.x[peers]
        if self.local:
            pull, byz = view.nbhd.weighted_pull(view.x, peers)
            out = xp.astype(float, copy=True)
            ok = byz > 0
            out[ok] = xp[ok] - self.eps * (pull[ok] / byz[ok, None])
            return out
        nm = view.nbhd.honest_mean(view.x, peers)
        return xp - self.eps * (nm - xp)

    def compiled_form(self) -> tuple[str, float] | None:
        return None if self.local else ("dissensus", self.eps)


class SignFlip(Adversary):
    """Sends the negation of the peer's own value."""

    kind = "signflip"

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        return -view.x[peers]

    def compiled_form(self) -> tuple[str, float]:
        return ("signflip", 0.0)


class IPM(_Scoped):
    """Inner-product manipulation: ``-eps`` times the honest mean (``global``), or times the
    mean of the target and its honest neighbours (``local``)."""

    kind = "ipm"

    def __init__(self, eps: float, scope: str = "global") -> None:
        super().__init__(scope)
        self.eps = check_nonnegative("adversary_value", eps)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        if self.local:
            return -self.eps * view.nbhd.local_mean(view.x, peers)
        m = view.x[view.honest].mean(axis=0)
        return np.broadcast_to(-self.eps * m, (len(peers), view.x.shape[1])).copy()

    def compiled_form(self) -> tuple[str, float] | None:
        return None if self.local else ("ipm", self.eps)


class BitFlip(Adversary):
    """The reference code's bit-flip worker: it trains and aggregates a model of its own, and sends
    minus that model to every neighbour.

    Each round its row takes the local steps of its own objective (plain SGD:
    the reference code's Byzantine workers have no momentum), then it sends
    ``-x_b``; it then aggregates like an honest node from what it received,
    its own input being what it sent (``-x_b``). Engines ask
    :meth:`trains` and :meth:`aggregates`; only the synchronous round
    protocols (``neighbourhood``, ``allreduce``) move adversary rows.
    """

    kind = "bitflip"

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        return -view.x[np.asarray(senders, dtype=np.int64)]

    def trains(self) -> bool:
        """True: the attacker's row takes local steps like a training node's."""
        return True

    def aggregates(self) -> bool:
        """True: the attacker's row aggregates from what it receives, starting from what it sends."""
        return True


def make_adversary(kind: str, value: float | None = None, scope: str = "global") -> Adversary | None:
    """Build an adversary by name.

    Parameters
    ----------
    kind : {"none", "stubborn", "alie", "dissensus", "signflip", "ipm", "bitflip"}
    value : float, optional
        ``b`` for stubborn, ``z`` for ALIE, ``eps`` for dissensus and IPM (defaults in
        :data:`DEFAULT_VALUES`; the scope-``local`` ALIE default depends on the
        graph, see :func:`alie_default_z` and :attr:`sim.gossip.GossipConfig.value`);
        ignored by sign-flip and bit-flip.
    scope : {"global", "local"}
        Where ALIE, IPM and dissensus read the honest values (module docstring).

    Returns
    -------
    Adversary or None
        ``None`` for ``"none"``.
    """
    check_choice("adversary", kind, ADVERSARIES)
    check_choice("attack_scope", scope, SCOPES)
    v = DEFAULT_VALUES[kind] if value is None else float(value)
    if kind == "stubborn":
        return Stubborn(v)
    if kind == "alie":
        return ALIE(v, scope)
    if kind == "dissensus":
        return Dissensus(v, scope)
    if kind == "signflip":
        return SignFlip()
    if kind == "ipm":
        return IPM(v, scope)
    if kind == "bitflip":
        return BitFlip()
    return None


# --------------------------------------------------------------------------- defences


def clip_rows(diff: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Project each row of ``diff`` on the Euclidean ball of radius ``tau`` (per row).

    Parameters
    ----------
    diff : ndarray, shape (k, d)
    tau : float or ndarray of shape (k,)
        Radii (``inf`` leaves a row unchanged).

    Returns
    -------
    ndarray, shape (k, d)
    """
    norms = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    t = np.asarray(tau, dtype=float)
    over = norms > t  # so norms > 0 where it divides
    scale = np.ones_like(norms)
    scale[over] = (t if t.ndim == 0 else t[over]) / norms[over]
    return diff * scale[:, None]


def _half(diff: float) -> float:
    return diff * 0.5


class Defence:
    """How an honest node moves toward a received value: ``x_i += step(diff)``.

    Engines ask a defence three things, and never its type: :meth:`radius`
    (from the state when the receiver commits to the exchange), :meth:`move`
    (the move for a difference and that radius) and, for the scalar fast paths
    (``dim = 1``), :meth:`scalar_move` (the same rule as a function of one
    float, or ``None`` when it depends on the state). :meth:`plain` says the
    move is exactly ``diff / 2`` with no clipping, which lets the all-honest
    matching average ``(x_a + x_b) / 2`` directly. A subclass overrides
    :meth:`radius` (a clipping rule) or :meth:`move` (any other rule), and
    :meth:`scalar_move` to keep the fast paths.
    """

    kind = "none"

    def radius(self, view: View, receivers: np.ndarray) -> np.ndarray | float:
        """Clipping radius of each receiver (``inf``: no clipping)."""
        return math.inf

    def move(self, diff: np.ndarray, tau: np.ndarray | float) -> np.ndarray:
        """The move ``clip(diff, tau) / 2`` of each row of ``diff`` (the one vector clipping)."""
        if np.all(np.isinf(tau)):
            return diff / 2.0
        return clip_rows(diff, tau) / 2.0

    def step(self, view: View, diff: np.ndarray, receivers: np.ndarray) -> np.ndarray:
        """The move of each receiver: :meth:`move` with the receivers' :meth:`radius`."""
        return self.move(diff, self.radius(view, receivers))

    def scalar_move(self) -> Callable[[float], float] | None:
        """The move as a function of a scalar difference, when it does not depend on the state.

        ``None`` (the default) keeps the engines on their vector paths.
        """
        return None

    def plain(self) -> bool:
        """True when every move is exactly ``diff / 2`` (plain averaging)."""
        return False

    def fixed_radius(self) -> float | None:
        """The one clipping radius of every receiver at all times (``inf``: none), if there is one.

        The compiled async engine asks this; ``None`` (the default, and any
        state-dependent rule) leaves the defence to the SimPy engines.
        """
        return None

    def compiled_form(self) -> tuple[str, float] | None:
        """``(rule, parameter)`` naming a receiving rule the compiled async engine implements, if any.

        ``("clip", tau)`` for a fixed radius (``inf``: plain averaging; the
        default whenever :meth:`fixed_radius` gives one) or ``("oracle", 0.0)``
        when :meth:`radius_rule` names the ClippedGossip oracle radius of
        :class:`AdaptiveClip`. ``None`` leaves the defence to the SimPy engines.
        """
        tau = self.fixed_radius()
        if tau is not None:
            return ("clip", float(tau))
        return ("oracle", 0.0) if self.radius_rule() == "oracle" else None

    def radius_rule(self) -> str | None:
        """The name of a state-dependent radius rule the compiled edge engine implements, if any.

        ``"oracle"``: the ClippedGossip oracle radius of :class:`AdaptiveClip`.
        ``None`` (the default) leaves a state-dependent rule to the Python engines.
        """
        return None


class NoDefence(Defence):
    """Plain pairwise averaging: ``x_i += diff / 2``."""

    def scalar_move(self) -> Callable[[float], float]:
        return _half

    def plain(self) -> bool:
        return True

    def fixed_radius(self) -> float:
        return math.inf


class FixedClip(Defence):
    """Trust region of fixed radius ``tau``: ``x_i += clip(diff, tau) / 2``."""

    kind = "clip"

    def __init__(self, tau: float) -> None:
        self.tau = check_nonnegative("clip", tau)

    def radius(self, view: View, receivers: np.ndarray) -> float:
        return self.tau

    def fixed_radius(self) -> float:
        return self.tau

    def scalar_move(self) -> Callable[[float], float]:
        tau = self.tau

        def clipped_half(diff: float) -> float:
            return (tau if diff > tau else (-tau if diff < -tau else diff)) * 0.5

        return clipped_half


class AdaptiveClip(Defence):
    """Self-centred clipping with the ClippedGossip oracle radius.

    ``tau_i = sqrt(sum_{honest j in N(i)} W_ij |x_j - x_i|^2 / sum_{adversarial k}
    W_ik)`` with ``W`` the receiver's mixing weights. Pairwise protocols and
    rows whose weights are all equal use uniform weights, which cancel:
    ``tau_i = sqrt(sum_{honest j} |x_j - x_i|^2 / a_i)``, ``a_i`` the number of
    adversarial neighbours. No clipping where ``a_i = 0`` (or the adversarial
    weights sum to 0).
    """

    kind = "adaptive"

    def radius_rule(self) -> str | None:
        """``"oracle"``, unless a subclass changed how the radius or the move is computed."""
        cls = type(self)
        same = (cls.radius is AdaptiveClip.radius and cls.move is Defence.move
                and cls.step is Defence.step)
        return "oracle" if same else None

    def radius(self, view: View, receivers: np.ndarray) -> np.ndarray:
        nb = view.nbhd
        a = nb.adversary_degree(receivers).astype(float)
        out = np.full(a.shape, math.inf)
        bad = a > 0
        if bad.any():
            uni = nb.uniform_rows(receivers)
            plain = bad & uni
            if plain.any():
                out[plain] = np.sqrt(nb.honest_sqdist(view.x, receivers[plain]) / a[plain])
            weighted = bad & ~uni
            if weighted.any():
                num, byz = nb.weighted_oracle(view.x, receivers[weighted])
                tau = np.full(num.shape, math.inf)
                pos = byz > 0
                tau[pos] = np.sqrt(num[pos] / byz[pos])
                out[weighted] = tau
        return out


def make_defence(clip: float | None = None, adaptive: bool = False) -> Defence:
    """The defence for a fixed radius ``clip``, adaptive clipping, or none."""
    if adaptive:
        return AdaptiveClip()
    if clip is not None:
        return FixedClip(clip)
    return NoDefence()
