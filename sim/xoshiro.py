"""xoshiro256** random numbers for the numba kernels (gossip and training), in one place.

Each kernel keeps its streams as rows of a ``(k, 4)`` uint64 array seeded from
named numpy generators (:func:`stream_states`) and draws 64-bit words with
:func:`next_u64`; how a word becomes a uniform is the kernel's own (the
gossip kernel maps to ``[0, 1)``, the training kernel to ``(0, 1)``).

Imported only by the kernels, so that ``import sim`` never pays for numba.

References
----------
.. [1] D. Blackman and S. Vigna, "Scrambled linear pseudorandom number
   generators", ACM Transactions on Mathematical Software 47 (2021) 36.
"""

from __future__ import annotations

import numpy as np

try:  # numba is the optional extra ``dtsim[fast]``
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "jit", "identity", "next_u64", "readonly", "stream_states"]


def identity(f):
    """The decorator used in place of numba's without numba (plain Python)."""
    return f


#: ``numba.njit(cache=True, nogil=True)``, or :func:`identity` without numba.
jit = numba.njit(cache=True, nogil=True) if HAVE_NUMBA else identity


def readonly(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a C-contiguous, read-only array of ``dtype`` (a view where no copy is needed).

    numba compiles one specialisation per argument type, and writability is part
    of the type: a kernel's graph arrays (which it only reads) are always passed
    read-only, so a built network (whose arrays are frozen) and the empty arrays
    of the complete graph share one compiled kernel instead of two.
    """
    view = np.ascontiguousarray(a, dtype=dtype).view()
    view.setflags(write=False)
    return view


def stream_states(rngs: list[np.random.Generator]) -> np.ndarray:
    """xoshiro256** states (``(k, 4)`` uint64), one per numpy generator given."""
    out = np.empty((len(rngs), 4), dtype=np.uint64)
    for k, g in enumerate(rngs):
        st = g.integers(0, 2**64 - 1, size=4, dtype=np.uint64, endpoint=True)
        if not st.any():
            st[0] = 1
        out[k] = st
    return out


@jit
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@jit
def next_u64(st, k):
    """The next 64-bit word of stream ``k`` (row ``k`` of ``st``, advanced in place)."""
    s0, s1, s2, s3 = st[k, 0], st[k, 1], st[k, 2], st[k, 3]
    r = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    st[k, 0], st[k, 1], st[k, 2], st[k, 3] = s0, s1, s2, s3
    return r
