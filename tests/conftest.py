"""Suite-wide setup: under pytest-xdist, the workers share the cold compilation of the kernels.

The numba kernels (``sim.training.kernel``, ``sim.gossip.kernel``,
``sim.gossip.edge_kernel``) are compiled with ``cache=True``: a process loads a
kernel from numba's on-disk cache when an earlier process has written it. On a
fresh clone the cache is empty, and every xdist worker compiled every kernel
itself the first time one of its tests needed it (tens of seconds of CPU per
kernel family per worker). Here worker ``gwK`` of ``N`` compiles the families
``K, K + N, ...`` before its first test, so each family is compiled once and the
other workers load it from the cache when their tests reach it. Nothing a test
checks changes: the kernels are the same, only which process compiles them first.
Without xdist, or without numba, this does nothing.
"""

from __future__ import annotations

import os


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


#: One entry per kernel family, the most expensive first.
KERNEL_FAMILIES = (_training_kernel, _gossip_kernels)


def pytest_sessionstart(session) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    k = int(worker[2:])
    n = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    for family in KERNEL_FAMILIES[k::n]:
        try:
            family()
        except Exception:  # a broken kernel fails in its own tests, not here
            pass
