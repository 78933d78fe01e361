"""Suite-wide setup: under pytest-xdist, the workers share the cold compilation of the kernels.

The numba kernels (``sim.training.kernel``, ``sim.gossip.kernel``,
``sim.gossip.edge_kernel``) are compiled with ``cache=True``: a process loads a
kernel from numba's on-disk cache when an earlier process has written it. On a
fresh clone the cache is empty, and every xdist worker compiled every kernel
itself the first time one of its tests needed it (tens of seconds of CPU per
kernel family per worker). Here, once the workers have collected (so the
scheduler already hands tests to the others), worker ``gwK`` of ``N`` compiles the
families ``K, K + N, ...`` among those the collected tests use, so each family is
compiled once and the other workers load it from the cache when their tests
reach it. Nothing a test checks changes: the kernels are the same, only which
process compiles them first. Without xdist, or without numba, this does nothing.
"""

from __future__ import annotations

import os

import pytest


def _training_kernel() -> None:
    from sim.engines import select
    from sim.rng import Streams
    from sim.training import TrainingConfig

    cfg = TrainingConfig(stages=2, replicas=2, microbatches=4, steps=1, schedule="swarm",
                         routing="queue", sync="none")
    select("training", cfg, "compiled").engine.run(cfg, Streams(0).replication(0))


def _gossip_kernels() -> None:
    from sim.gossip import GossipConfig, gossip_model
    from sim.rng import Streams

    for protocol in ("edge", "async"):
        gossip_model(GossipConfig(nodes=10, protocol=protocol, rounds=2, engine="compiled"),
                     Streams(0).replication(0))


#: One entry per kernel family, the most expensive first, with the test files that use it.
KERNEL_FAMILIES = (
    (_training_kernel, ("test_training_compiled.py", "test_bench.py")),
    (_gossip_kernels, ("gossip", "test_bench.py")),
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session) -> None:
    """Before a worker's first test (after collection, so the others are already running)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or session.config.option.collectonly:
        return
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    files = {item.path.name for item in session.items}
    needed = [family for family, users in KERNEL_FAMILIES
              if any(u in f for f in files for u in users)]
    k = int(worker[2:])
    n = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    for family in needed[k::n]:
        try:
            family()
        except Exception:  # a broken kernel fails in its own tests, not here
            pass
