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
    Gupta, UAI 2020), to every peer.

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

import numpy as np
import scipy.sparse as sp

from .errors import check_choice, check_nonnegative

__all__ = [
    "ADVERSARIES",
    "DEFAULT_VALUES",
    "Neighbourhood",
    "View",
    "Adversary",
    "Stubborn",
    "StubbornValues",
    "ALIE",
    "Dissensus",
    "SignFlip",
    "IPM",
    "make_adversary",
    "Defence",
    "NoDefence",
    "FixedClip",
    "AdaptiveClip",
    "make_defence",
    "clip_rows",
]

ADVERSARIES = ("none", "stubborn", "alie", "dissensus", "signflip", "ipm")
#: Default ``adversary_value`` per kind: ``b`` for stubborn, ``z`` for ALIE,
#: ``eps`` for dissensus (sign-flip has no parameter).
DEFAULT_VALUES = {"none": 0.0, "stubborn": 10.0, "alie": 1.0, "dissensus": 1.0, "signflip": 0.0,
                  "ipm": 0.1}


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

    def __init__(self, honest: np.ndarray, adjacency: sp.spmatrix | sp.sparray | None = None) -> None:
        self.honest = np.asarray(honest, dtype=bool)
        self.n = self.honest.size
        self.h = int(self.honest.sum())
        self.complete = adjacency is None
        if adjacency is None:
            self._adj_h = None
            self._hdeg = self.h - self.honest.astype(np.int64)
            self._adeg = (self.n - self.h) - (~self.honest).astype(np.int64)
        else:
            adj = sp.csr_array(adjacency, dtype=float)
            adj.data[:] = 1.0
            self._adj_h = sp.csr_array(adj @ sp.diags_array(self.honest.astype(float)))
            self._adj_h.eliminate_zeros()
            self._hdeg = np.asarray(self._adj_h.sum(axis=1)).ravel().astype(np.int64)
            deg = np.asarray(adj.sum(axis=1)).ravel().astype(np.int64)
            self._adeg = deg - self._hdeg

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


class ALIE(Adversary):
    """Sends the honest mean plus ``z`` honest standard deviations (per coordinate)."""

    kind = "alie"

    def __init__(self, z: float) -> None:
        self.z = float(z)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        mu, sd = view.honest_stats()
        return np.broadcast_to(mu + self.z * sd, (len(peers), view.x.shape[1])).copy()

    def compiled_form(self) -> tuple[str, float]:
        return ("alie", self.z)


class Dissensus(Adversary):
    """Pushes each peer away from its honest neighbours' mean by ``eps`` times the gap."""

    kind = "dissensus"

    def __init__(self, eps: float) -> None:
        self.eps = float(eps)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        xp = view.x[peers]
        nm = view.nbhd.honest_mean(view.x, peers)
        return xp - self.eps * (nm - xp)

    def compiled_form(self) -> tuple[str, float]:
        return ("dissensus", self.eps)


class SignFlip(Adversary):
    """Sends the negation of the peer's own value."""

    kind = "signflip"

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        return -view.x[peers]

    def compiled_form(self) -> tuple[str, float]:
        return ("signflip", 0.0)


class IPM(Adversary):
    """Inner-product manipulation: sends ``-eps`` times the honest mean to every peer."""

    kind = "ipm"

    def __init__(self, eps: float) -> None:
        self.eps = check_nonnegative("adversary_value", eps)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        m = view.x[view.honest].mean(axis=0)
        return np.broadcast_to(-self.eps * m, (len(peers), view.x.shape[1])).copy()

    def compiled_form(self) -> tuple[str, float]:
        return ("ipm", self.eps)


def make_adversary(kind: str, value: float | None = None) -> Adversary | None:
    """Build an adversary by name.

    Parameters
    ----------
    kind : {"none", "stubborn", "alie", "dissensus", "signflip", "ipm"}
    value : float, optional
        ``b`` for stubborn, ``z`` for ALIE, ``eps`` for dissensus and IPM (defaults in
        :data:`DEFAULT_VALUES`); ignored by sign-flip.

    Returns
    -------
    Adversary or None
        ``None`` for ``"none"``.
    """
    check_choice("adversary", kind, ADVERSARIES)
    v = DEFAULT_VALUES[kind] if value is None else float(value)
    if kind == "stubborn":
        return Stubborn(v)
    if kind == "alie":
        return ALIE(v)
    if kind == "dissensus":
        return Dissensus(v)
    if kind == "signflip":
        return SignFlip()
    if kind == "ipm":
        return IPM(v)
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

    ``tau_i = sqrt(sum_{honest j in N(i)} |x_j - x_i|^2 / a_i)``, ``a_i`` the
    number of adversarial neighbours; no clipping where ``a_i = 0``.
    """

    kind = "adaptive"

    def radius_rule(self) -> str | None:
        """``"oracle"``, unless a subclass changed how the radius or the move is computed."""
        cls = type(self)
        same = (cls.radius is AdaptiveClip.radius and cls.move is Defence.move
                and cls.step is Defence.step)
        return "oracle" if same else None

    def radius(self, view: View, receivers: np.ndarray) -> np.ndarray:
        a = view.nbhd.adversary_degree(receivers).astype(float)
        out = np.full(a.shape, math.inf)
        bad = a > 0
        if bad.any():
            out[bad] = np.sqrt(view.nbhd.honest_sqdist(view.x, receivers[bad]) / a[bad])
        return out


def make_defence(clip: float | None = None, adaptive: bool = False) -> Defence:
    """The defence for a fixed radius ``clip``, adaptive clipping, or none."""
    if adaptive:
        return AdaptiveClip()
    if clip is not None:
        return FixedClip(clip)
    return NoDefence()
