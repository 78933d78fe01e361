"""The node-update hook: what an honest node computes on its own between exchanges.

Every engine asks one :class:`NodeUpdate` at fixed points of its protocol:

``matching`` (vector and DES engines)
    :meth:`NodeUpdate.local_steps` on every honest node once per round, after
    the round's noise and before the matching averages;
``edge``
    :meth:`NodeUpdate.local_steps` on the honest ends of the chosen pair, after
    the step's noise and before the pair averages;
``async``
    :meth:`NodeUpdate.advance` brings a node's value up to the current time
    (its local steps run continuously) whenever the node's value is read or
    changed: at each end of an exchange when it starts, and at a receiving end
    before a delivery is applied.

The update a config asks for is built by :func:`default_update` (the one
place a config field choosing local training would be read); the default,
:class:`NoUpdate`, computes nothing: pure averaging, and the
scalar fast paths stay valid (:meth:`NodeUpdate.is_identity`). A subclass that
trains (local gradient steps) overrides the two methods and
:meth:`NodeUpdate.is_identity`; every engine then takes its vector path and
calls it, with a generator from the replication's own ``update`` stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .config import GossipConfig

__all__ = ["NodeUpdate", "NoUpdate", "default_update"]


class NodeUpdate:
    """Base class of node updates (the default computes nothing)."""

    def is_identity(self) -> bool:
        """True when the update never changes a value (lets engines skip it and take fast paths)."""
        return True

    def local_steps(self, x: np.ndarray, nodes: np.ndarray, *, rng: np.random.Generator) -> None:
        """Update the rows ``x[nodes]`` in place with one communication round's local work.

        Parameters
        ----------
        x : ndarray, shape (n, d)
            Every node's value (adversary rows included; ``nodes`` are honest).
        nodes : ndarray of int
        rng : numpy.random.Generator
            The replication's ``update`` stream.
        """

    def advance(self, x: np.ndarray, node: int, elapsed: float, *, rng: np.random.Generator) -> None:
        """Update ``x[node]`` in place with the local work of ``elapsed`` time units (``async``)."""


class NoUpdate(NodeUpdate):
    """Pure averaging: no local computation."""


def default_update(config: GossipConfig) -> NodeUpdate:
    """The node update ``config`` asks for: today always :class:`NoUpdate` (pure averaging)."""
    return NoUpdate()
