"""Named, independent random streams from one root seed.

One root seed makes every number in a run. Each concern (a worker's failures,
a domain's outages, the gossip partner draws, an adversary) gets its own
:class:`numpy.random.Generator`, derived from the root :class:`~numpy.random.SeedSequence`
by a spawn key made of the replication index, a stable hash of the stream's
name and any extra integer indices. Because a stream depends only on
``(seed, replication, name, indices)``:

* the same seed gives bit-identical results on any executor and any number
  of workers (replication ``k`` gets the same streams wherever it runs);
* adding a component (a new stream name) never changes the draws of another.

This follows numpy's "Parallel random number generation" guide: the spawn key
plays the role of ``SeedSequence.spawn`` but is addressed by name rather than by
order of creation.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .errors import check

__all__ = ["Streams", "name_key"]


def name_key(name: str) -> int:
    """Stable 32-bit integer for a stream name (independent of ``PYTHONHASHSEED``)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")


class Streams:
    """Factory of named, independent generators under one root seed.

    Parameters
    ----------
    seed : int
        Root seed (a non-negative integer).
    replication : int, optional
        Index of the independent replication these streams belong to.

    Examples
    --------
    >>> s = Streams(42).replication(3)
    >>> a = s.rng("worker", 0).random()
    >>> b = Streams(42).replication(3).rng("worker", 0).random()
    >>> a == b
    True
    """

    __slots__ = ("seed", "_key")

    def __init__(self, seed: int, replication: int | None = None, *, _key: tuple[int, ...] = ()) -> None:
        check(
            isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0,
            "seed",
            "a non-negative integer",
            seed,
        )
        self.seed = int(seed)
        key = tuple(_key)
        if replication is not None:
            key = key + (int(replication),)
        self._key = key

    def replication(self, k: int) -> Streams:
        """The streams of replication ``k`` (independent of every other ``k``)."""
        return Streams(self.seed, _key=self._key + (int(k),))

    def child(self, name: str, *index: int) -> Streams:
        """A sub-factory whose streams are all independent of this one's."""
        return Streams(self.seed, _key=self._key + (name_key(name), *map(int, index)))

    def seed_sequence(self, name: str, *index: int) -> np.random.SeedSequence:
        """The :class:`~numpy.random.SeedSequence` behind ``rng(name, *index)``."""
        return np.random.SeedSequence(
            self.seed, spawn_key=self._key + (name_key(name), *map(int, index))
        )

    def rng(self, name: str, *index: int) -> np.random.Generator:
        """A fresh generator for stream ``name`` (with optional integer indices)."""
        return np.random.Generator(np.random.PCG64(self.seed_sequence(name, *index)))

    def __repr__(self) -> str:
        return f"Streams(seed={self.seed}, key={self._key})"
