"""Calibration of the printed 95% intervals: coverage over 200 seeds in the binomial band (slow)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "calibration.py"
_spec = importlib.util.spec_from_file_location("dtsim_calibration", _PATH)
assert _spec is not None and _spec.loader is not None
calibration = importlib.util.module_from_spec(_spec)
sys.modules["dtsim_calibration"] = calibration
_spec.loader.exec_module(calibration)


def test_band_is_the_central_binomial_range():
    """The acceptance band at 200 seeds is 184..196 (central 95% of Binomial(200, 0.95))."""
    assert calibration.band(200) == (184, 196)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(calibration.CASES))
def test_interval_is_calibrated(name):
    """The case's 95% interval covers its exact value 184..196 times of 200, each side missing <= 8."""
    r = calibration.calibrate(calibration.CASES[name], 200)
    assert r.passes, (r.covered, r.above, r.below)


@pytest.mark.slow
def test_calibration_rejects_the_old_contraction_interval():
    """The old contraction interval (t on per-replication ratios at 1e-3 depth) fails the band at n = 10."""
    import sim
    from sim import analytic
    from sim.results import mean_ci, power_ci

    cfg = sim.GossipConfig(topology="complete", nodes=10, protocol="matching", rounds=50)
    exact = analytic.matching_contraction(10)
    steps = cfg.record_steps()
    covered = above = 0
    for seed in range(200):
        recs = sim.replicate(sim.gossip_model, cfg, replications=20, seed=seed)
        D = np.stack([r["disagreement"] for r in recs])
        Dm = D.mean(axis=0)
        j = max(1, int(np.sum(Dm[1:] >= 1e-3 * Dm[0])))
        est = power_ci(mean_ci(D[:, j] / D[:, 0]), 1.0 / float(steps[j]))
        covered += est.low <= exact <= est.high
        above += exact > est.high
    assert covered < 184 and above > 8
