"""Attacks and robust aggregation rules for gossip training.

Attacks (strategy objects with the interface of :class:`sim.adversaries.Adversary`):

``IPM``
    inner-product manipulation: every adversary sends ``-eps`` times the
    honest mean (Xie, Koyejo, Gupta 2020; the IPM attack of ClippedGossip's
    experiments).
``LabelFlip``
    a data attack: the adversarial nodes follow the protocol like honest
    ones but train on flipped labels ``y -> C - 1 - y`` (logistic task). It
    never sends anything of its own choosing; :meth:`LabelFlip.follows_protocol`
    tells the builder to run those nodes as protocol-honest and to leave
    them out of the metrics.

Aggregation rules for *neighbourhood rounds* (every honest node hears every
neighbour at once, then aggregates), asked through
``neighbourhood_update(own, received, weights)``:

``FarthestClip``
    ClippedGossip's practical radius: ``tau_i`` is the second-largest distance
    ``|v_j - x_i|`` among the values received, so only the farthest
    neighbour is clipped; then ``x_i += sum_j W_ij clip(v_j - x_i, tau_i)``.
``CoordinateMedian``
    ``x_i`` becomes the coordinate-wise median of its own value and the values
    received.
``TrimmedMean``
    per coordinate, drop the ``trim`` largest and ``trim`` smallest of the own
    and received values, then average the rest.

References
----------
.. [1] L. He, S. P. Karimireddy, M. Jaggi, "Byzantine-robust decentralized
   learning via ClippedGossip", 2022.
.. [2] C. Xie, O. Koyejo, I. Gupta, "Fall of empires: breaking Byzantine-tolerant
   SGD by inner product manipulation", UAI 2020.
.. [3] D. Yin, Y. Chen, K. Ramchandran, P. Bartlett, "Byzantine-robust
   distributed learning: towards optimal statistical rates", ICML 2018
   (coordinate-wise median and trimmed mean).
"""

from __future__ import annotations

import math

import numpy as np

from ..adversaries import Adversary, Defence, View, clip_rows
from ..errors import check_int, check_nonnegative

__all__ = ["IPM", "LabelFlip", "FarthestClip", "CoordinateMedian", "TrimmedMean"]


class IPM(Adversary):
    """Sends ``-eps`` times the honest mean to every peer."""

    kind = "ipm"

    def __init__(self, eps: float) -> None:
        self.eps = check_nonnegative("adversary_value", eps)

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """``-eps * mean(honest x)`` in every row."""
        m = view.x[view.honest].mean(axis=0)
        return np.broadcast_to(-self.eps * m, (len(peers), view.x.shape[1])).copy()


class LabelFlip(Adversary):
    """Data attack: the node trains on flipped labels and otherwise follows the protocol."""

    kind = "labelflip"

    def follows_protocol(self) -> bool:
        """True: its nodes average like honest ones; only their data are poisoned."""
        return True

    def send(self, view: View, senders: np.ndarray, peers: np.ndarray) -> np.ndarray:
        """Its own values (it follows the protocol)."""
        return view.x[senders].copy()


class _NeighbourhoodRule(Defence):
    """A rule that needs every received value at once (neighbourhood rounds only)."""

    neighbourhood_only = True

    def neighbourhood_update(self, own: np.ndarray, received: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:  # pragma: no cover
        """New values of ``k`` receivers from ``own`` ``(k, d)`` and ``received`` ``(k, r, d)``."""
        raise NotImplementedError


class FarthestClip(_NeighbourhoodRule):
    """Self-centred clipping whose radius clips only the farthest received value."""

    kind = "farthest"

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
