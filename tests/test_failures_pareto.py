"""The Pareto duration law of sim.failures: its mean, its equilibrium residual life, its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.failures import Pareto, check_law, make_distribution


def test_pareto_mean_and_least_value():
    """Draws have the given mean and never fall below x_m = mean (alpha - 1)/alpha."""
    law = make_distribution("pareto", 2.0, 3.0)
    x = law.sample(np.random.default_rng(1), 200_000)
    assert x.min() >= law.scale == pytest.approx(4 / 3)
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert abs(x.mean() - 2.0) < 4 * se


def test_pareto_residual_is_the_equilibrium_law():
    """U times the length-biased draw has mean E[X^2]/(2 E[X]) (the stationary start); X's own
    mean (a start with a fresh duration) is rejected."""
    a, mean = 3.5, 1.0
    law = Pareto(mean, a)
    rng = np.random.default_rng(2)
    r = np.array([law.residual(rng) for _ in range(100_000)])
    xm = law.scale
    exact = (a * xm**2 / (a - 2)) / (2 * mean)
    se = r.std(ddof=1) / np.sqrt(r.size)
    assert abs(r.mean() - exact) < 4 * se
    assert abs(r.mean() - mean) > 4 * se


@pytest.mark.parametrize("shape,msg", [
    (None, "'failure_shape' must be given for a Pareto law (its tail index alpha > 1): None"),
    (1.0, "'failure_shape' must be > 1 for a Pareto law (its mean is infinite at alpha <= 1): 1.0"),
])
def test_pareto_needs_a_tail_index_above_one(shape, msg):
    """A config's check names its own field."""
    with pytest.raises(ConfigError) as exc:
        check_law("failure_distribution", "pareto", "failure_shape", shape)
    assert str(exc.value) == msg
