"""Robust aggregation rules for neighbourhood rounds of gossip training.

(``IPM``, inner-product manipulation, lives with the other attacks in
:mod:`sim.adversaries`. Label flipping is a data attack: its nodes follow the
protocol and train on flipped labels, see
:attr:`sim.learning.model.TrainingConfig.flipped`.)

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

from ..adversaries import Defence, clip_rows
from ..errors import check_int

__all__ = ["FarthestClip", "CoordinateMedian", "TrimmedMean"]


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
