"""Tests of sim.progress: the bar's on/off rule, its movement within a replication, and no effect on numbers."""

from __future__ import annotations

import numpy as np

import sim
from sim import progress
from sim.cli import main


class _Bar:
    """Stands in for a tqdm bar: records every update."""

    def __init__(self) -> None:
        self.updates: list[float] = []

    def update(self, n: float) -> None:
        self.updates.append(n)


def test_bar_shows_only_when_asked_or_on_a_terminal():
    """wanted(): an explicit answer decides; None is off inside quiet() and off without a terminal."""
    assert progress.wanted(True) and not progress.wanted(False)
    with progress.quiet():
        assert not progress.wanted(None) and progress.wanted(True)
    assert progress.wanted(None) is False  # pytest's stderr is not a terminal


def test_engines_move_the_bar_within_one_replication():
    """A gossip run and a pipeline DES run report fractions that end at 1, then settle to whole tasks."""
    cfg = sim.GossipConfig(nodes=10, rounds=40, record_every=10)
    bar = _Bar()
    with progress.tracking(bar) as part:
        progress.begin()
        sim.gossip_model(cfg, sim.Streams(1).replication(0))
        assert np.isclose(sum(bar.updates), 1.0) and len(bar.updates) == 4
        part.settle(1)
    assert np.isclose(sum(bar.updates), 1.0)
    bar = _Bar()
    pcfg = sim.PipelineConfig(stages=4, replicas=2, microbatches=2000, stage_time=0.1)
    with progress.tracking(bar) as part:
        progress.begin()
        sim.pipeline_model(pcfg, sim.Streams(1).replication(0), engine="des")
        assert 0.7 < sum(bar.updates) <= 1.0 and len(bar.updates) >= 3
        part.settle(1)
    assert np.isclose(sum(bar.updates), 1.0)


def test_a_bar_changes_no_number(capsys):
    """replicate() with the bar drawn gives the records it gives without it."""
    cfg = sim.GossipConfig(nodes=10, protocol="edge", rounds=50, record_every=10)
    on = sim.replicate(sim.gossip_model, cfg, replications=3, seed=2, progress=True)
    off = sim.replicate(sim.gossip_model, cfg, replications=3, seed=2, progress=False)
    assert "replicate" in capsys.readouterr().err  # the bar was drawn
    for a, b in zip(on, off, strict=True):
        assert np.array_equal(a["disagreement"], b["disagreement"])
        assert a["final_disagreement"] == b["final_disagreement"]


def test_every_model_command_takes_quiet(capsys):
    """--quiet is accepted by the model commands (and turns the bar off)."""
    assert main(["gossip", "--nodes", "10", "--rounds", "5", "--replications", "2", "--quiet"]) == 0
    assert main(["failures", "--horizon", "50", "--replications", "2", "--quiet"]) == 0
    capsys.readouterr()
