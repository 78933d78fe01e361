"""The skip penalty: the quality a microbatch keeps after skipping ``k`` stages.

One value object, :class:`SkipPenalty`, validates the law once and evaluates
it for the simulation (:meth:`SkipPenalty.table`, Python floats, one per
``k``; :func:`quality_table` for a config's fields) and for the closed forms
(:meth:`SkipPenalty.weights`, a numpy array). Study A's pipeline
(:mod:`sim.pipeline`), the training pipeline (:mod:`sim.training`) and the
closed forms of :mod:`sim.analytic.pipeline` all take it from here.
The two evaluations of the multiplicative law are kept apart on purpose:
numpy's vectorised ``power`` and Python's ``float.__pow__`` differ in the last
bit for some ``(kappa, k)`` on SIMD builds of numpy, and each path is the one
its callers always used, so no printed number moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, check, check_choice, check_probability

__all__ = ["PENALTIES", "SkipPenalty", "quality_table"]

#: The named penalty laws.
PENALTIES = ("multiplicative", "additive")


@dataclass(frozen=True)
class SkipPenalty:
    """Quality kept after ``k`` skips (validated on construction).

    Parameters
    ----------
    kappa : float
        Quality lost per skip, in [0, 1].
    form : {"multiplicative", "additive"} or callable
        ``(1 - kappa)**k`` (the study's), ``max(0, 1 - kappa k)``, or
        ``form(k)`` (a picklable, top-level function returning a number in
        [0, 1]; ``kappa`` is then unused).

    Examples
    --------
    >>> SkipPenalty(0.1).table(2)
    (1.0, 0.9, 0.81)
    """

    kappa: float = 0.0
    form: str | Callable[[int], float] = "multiplicative"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", check_probability("skip_penalty", self.kappa))
        if not callable(self.form):
            check_choice("penalty", self.form, PENALTIES)

    def _name(self) -> str:
        return str(getattr(self.form, "__name__", self.form))

    def _call(self, k: int) -> float:
        """``form(k)`` checked: a number in [0, 1]."""
        try:
            v = float(self.form(k))  # type: ignore[operator]
        except Exception as exc:  # a user function that fails is bad input
            raise ConfigError("penalty", "a function k -> quality in [0, 1]",
                              f"{self._name()} ({exc})") from None
        check(0.0 <= v <= 1.0, "penalty", "a function k -> quality in [0, 1]",
              f"{self._name()}({k}) = {v}")
        return v

    def table(self, stages: int) -> tuple[float, ...]:
        """Quality after ``k`` skips for ``k = 0..stages`` (the simulation's table).

        Parameters
        ----------
        stages : int

        Returns
        -------
        tuple of float
        """
        kappa = self.kappa
        if callable(self.form):
            return tuple(self._call(k) for k in range(stages + 1))
        if self.form == "multiplicative":
            return tuple((1.0 - kappa) ** k for k in range(stages + 1))
        return tuple(max(0.0, 1.0 - kappa * k) for k in range(stages + 1))

    def weights(self, k: np.ndarray) -> np.ndarray:
        """Quality after ``k`` skips for each entry of the integer array ``k`` (closed forms).

        Parameters
        ----------
        k : numpy.ndarray
            Skip counts.

        Returns
        -------
        numpy.ndarray

        Notes
        -----
        Multiplicative: :math:`(1 - \\kappa)^k`; additive:
        :math:`\\max(0, 1 - \\kappa k)`.
        """
        if callable(self.form):
            return np.array([self._call(int(x)) for x in k], dtype=float)
        kf = np.asarray(k).astype(float)
        if self.form == "multiplicative":
            return (1.0 - self.kappa) ** kf
        return np.maximum(0.0, 1.0 - self.kappa * kf)


def quality_table(stages: int, skip_penalty: float,
                  penalty: str | Callable[[int], float] = "multiplicative") -> tuple[float, ...]:
    """Quality kept by a microbatch that skipped ``k`` stages, for ``k = 0..stages``.

    Parameters
    ----------
    stages : int
    skip_penalty : float
        ``kappa`` in [0, 1].
    penalty : {"multiplicative", "additive"} or callable
        See :class:`SkipPenalty`.

    Returns
    -------
    tuple of float
    """
    return SkipPenalty(skip_penalty, penalty).table(stages)
