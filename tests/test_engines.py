"""The engine and reference interface: one selection rule, reasons, predictions."""

from __future__ import annotations

import pytest

from sim import engines
from sim.engines import Applies, Engine, Reference
from sim.errors import ConfigError


class _Fast(Engine):
    name, family, speed, metrics = "fast", "toy", 1, ("x",)

    def applies(self, config):
        return Applies(config["small"], "small configs only" if not config["small"] else "small")

    def run(self, config, streams):
        return {"x": 1.0}


class _Slow(Engine):
    name, family, speed, metrics = "slow", "toy", 9, ("x", "y")

    def applies(self, config):
        return Applies(True, "always")

    def run(self, config, streams):
        return {"x": 1.0, "y": 2.0}


class _Ref(Reference):
    name, family, metrics = "closed-form", "toy", ("x",)

    def applies(self, config):
        return Applies(config["small"], "exact when small")

    def predict(self, config):
        return {"x": 0.5}


@pytest.fixture(autouse=True)
def _toy():
    for obj in (_Fast(), _Slow(), _Ref()):
        engines.register(obj)
    yield
    engines._ENGINES.pop("toy", None)
    engines._REFERENCES.pop("toy", None)


def test_auto_picks_the_fastest_engine_that_applies():
    """auto: the fastest applicable engine, with its reason; the slower one otherwise."""
    assert engines.select("toy", {"small": True}).name == "fast"
    sel = engines.select("toy", {"small": False})
    assert sel.name == "slow" and sel.reason == "auto: always"
    assert sel.considered[0] == ("fast", False, "small configs only")


def test_named_engine_that_does_not_apply_is_refused_with_its_reason():
    """Asking for an engine that cannot answer names its reason and the alternative."""
    with pytest.raises(ConfigError) as err:
        engines.select("toy", {"small": False}, "fast")
    assert str(err.value) == ("'engine' must be an engine that answers this config "
                              "(fast: small configs only; use slow): 'fast'")
    with pytest.raises(ConfigError, match="one of auto, fast, slow"):
        engines.select("toy", {"small": True}, "warp")


def test_predictions_give_value_or_reason():
    """A reference that applies gives its value; one that does not gives a null and why."""
    assert engines.predictions("toy", {"small": True})["x"] == {
        "value": 0.5, "reference": "closed-form", "note": "exact when small"}
    p = engines.predictions("toy", {"small": False}, ["x", "y"])
    assert p["x"]["value"] is None and p["x"]["note"] == "closed-form: exact when small"
    assert p["y"] == {"value": None, "reference": None, "note": "no exact reference"}
