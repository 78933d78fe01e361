"""Preallocated per-record arrays of one gossip replication."""

from __future__ import annotations

import numpy as np

from ..progress import report

__all__ = ["Records"]


class Records:
    """Per-record arrays: time, exchanges, disagreement ``D``, honest mean and the attack's progress.

    Parameters
    ----------
    steps : ndarray of int
        Round/step (or time) of every record; record 0 is the initial state.
    dim : int
    target : ndarray or None
        The point an attacker drags the honest mean to (stubborn ``b``), if any.
    tau : float or None
        Fixed clipping radius, for the "every honest node farther than tau" flag.
    """

    def __init__(self, steps: np.ndarray, dim: int, target: np.ndarray | None, tau: float | None) -> None:
        r = steps.size
        self.steps = steps
        self.time = np.full(r, np.nan)
        self.exchanges = np.zeros(r, dtype=np.int64)
        self.disagreement = np.full(r, np.nan)
        self.honest_mean = np.full((r, dim), np.nan)
        self.mean_shift = np.full(r, np.nan)
        self.target = target
        self.tau = tau
        self.gap = np.full(r, np.nan) if target is not None else None
        self.toward = np.full(r, np.nan) if target is not None else None
        self.far = np.zeros(r, dtype=bool) if target is not None else None
        self._m0: np.ndarray | None = None
        self._dir: np.ndarray | None = None
        self.filled = 0

    def record(self, k: int, time: float, exchanges: int, hx: np.ndarray) -> None:
        """Fill record ``k`` from the honest values ``hx`` (shape ``(h, d)``)."""
        m = hx.mean(axis=0)
        dev = hx - m
        self.time[k] = time
        self.exchanges[k] = exchanges
        self.disagreement[k] = float(np.einsum("ij,ij->", dev, dev))
        self.honest_mean[k] = m
        if self._m0 is None:
            self._m0 = m.copy()
            if self.target is not None:
                g = self.target - m
                norm = float(np.linalg.norm(g))
                self._dir = g / norm if norm > 0 else np.zeros_like(g)
        self.mean_shift[k] = float(np.linalg.norm(m - self._m0))
        if self.target is not None:
            self.gap[k] = float(np.mean(m - self.target))  # type: ignore[index]
            self.toward[k] = float((m - self._m0) @ self._dir)  # type: ignore[index, operator]
            if self.tau is not None:
                dist = np.sqrt(np.einsum("ij,ij->i", hx - self.target, hx - self.target))
                self.far[k] = bool(dist.min() > self.tau)  # type: ignore[index]
        self.filled = k + 1
        if k:  # the progress bar's fraction of this replication (sim.progress; changes nothing)
            report(k / (self.steps.size - 1))
