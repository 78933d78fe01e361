"""Bandwidth that depends on message size: a curve of size -> bandwidth.

Measured links are often described this way: Sailor (Strati et al., SOSP
2025) fits NCCL send/recv between two nodes as ``bw_GB/s = polyval(c,
log2(bytes / 1e6))``, and SimGrid's bandwidth factors scale a link by a
function of the message size. A :class:`BandwidthCurve` is a frozen value
(it can sit on a config and be hashed) with two forms:

``polylog2``
    ``bandwidth(s) = polyval(coefficients, log2(s / size_unit)) * bandwidth_unit``
    (coefficients highest power first, as :func:`numpy.polyval`); the size is
    clamped to ``[min_size, max_size]`` first when those are given. Sailor's
    curves are ``size_unit=1e6`` (MB) and ``bandwidth_unit=1e9`` (GB/s) with
    sizes in bytes, fitted on ``2**16`` to ``2**30`` bytes.

    A curve with both ends (its **fitted range**) is used where its fit can
    describe a transfer: from the smallest size ``s0`` of the range at and
    above which it is positive and the time it gives, ``size / bandwidth``,
    grows with the size up to ``max_size`` (a larger message never arrives
    sooner); outside ``[s0, max_size]`` at the nearest end. ``s0`` is
    ``min_size`` for most fits; a fit that dips below zero or turns back at
    its small end (183 of the 1,016 curves of the Sailor artifact are negative
    at ``2**16`` bytes: a quadratic in ``log2`` of the size fitted to 15
    points) starts where it is valid. A fitted range with no such size is
    refused when the curve is made.
``table``
    Points ``(size, bandwidth)`` with increasing sizes; between two points the
    bandwidth is linear in ``log2(size)``, and constant beyond the ends.

How a curve link is shared between flows is the solver's
(:mod:`sim.network.maxmin`): a flow of size ``s`` moving at rate ``r``
occupies the fraction ``r / c(s)`` of the link's time, and the fractions of
the flows on it sum to at most 1 (alone, a flow moves at ``c(s)``; ``k`` flows
of one size at ``c(s) / k`` each).

Text form (graph files, node and edge attributes, the CLI)::

    polylog2:c=-0.0024/0.1409/1.1168,size_unit=1e6,bandwidth_unit=1e9[,min_size=..][,max_size=..]
    table:1e3=5e8/1e6=5e9/1e9=1e10

Sizes are bytes and bandwidths bytes per second, or written with units
(:mod:`sim.units`): ``polylog2:c=...,size_unit=1MB,bandwidth_unit=1GB/s``,
``table:1kB=500MB/s/1MB=5GB/s/1GB=10GB/s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ascii_float, check, check_positive
from ..units import RATE, SIZE, has_unit, parse

__all__ = ["BandwidthCurve", "parse_curve", "as_curve", "CURVE_KINDS", "Capacity",
           "bandwidth_at", "peak_bandwidth_above", "scale_capacity"]

CURVE_KINDS = ("polylog2", "table")


def _finite(name: str, value: Any) -> float:
    try:
        x = ascii_float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, "finite numbers", value) from None
    check(not isinstance(value, bool) and math.isfinite(x), name, "finite numbers", value)
    return x


@dataclass(frozen=True)
class BandwidthCurve:
    """Bandwidth as a function of message size (a value; see the module docstring).

    Parameters
    ----------
    kind : {"polylog2", "table"}
    coefficients : tuple of float
        ``polylog2``: polynomial coefficients, highest power first.
    size_unit, bandwidth_unit : float
        ``polylog2``: ``x = log2(size / size_unit)``, bandwidth in units of
        ``bandwidth_unit``.
    min_size, max_size : float or None
        ``polylog2``: the fitted range; the size is clamped to it (with both
        given, to the part of it where the fit is valid: see the module
        docstring and :attr:`valid_min_size`).
    sizes, bandwidths : tuple of float
        ``table``: the points, sizes increasing (> 0), bandwidths > 0.
    """

    kind: str
    coefficients: tuple[float, ...] = ()
    size_unit: float = 1.0
    bandwidth_unit: float = 1.0
    min_size: float | None = None
    max_size: float | None = None
    sizes: tuple[float, ...] = ()
    bandwidths: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        check(self.kind in CURVE_KINDS, "curve", "of kind " + " or ".join(CURVE_KINDS), self.kind)
        if self.kind == "polylog2":
            coeffs = tuple(_finite("curve", c) for c in self.coefficients)
            check(len(coeffs) >= 1, "curve", "given at least one coefficient", self.coefficients)
            set_("coefficients", coeffs)
            set_("size_unit", check_positive("curve", self.size_unit))
            set_("bandwidth_unit", check_positive("curve", self.bandwidth_unit))
            lo = None if self.min_size is None else check_positive("curve", self.min_size)
            hi = None if self.max_size is None else check_positive("curve", self.max_size)
            check(lo is None or hi is None or lo <= hi, "curve", "min_size <= max_size",
                  (self.min_size, self.max_size))
            set_("min_size", lo)
            set_("max_size", hi)
            check(not self.sizes and not self.bandwidths, "curve",
                  "given points only with kind table", self.sizes)
            set_("_low", _valid_low(self) if lo is not None and hi is not None else lo)
        else:
            s = tuple(check_positive("curve", x) for x in self.sizes)
            b = tuple(check_positive("curve", x) for x in self.bandwidths)
            check(len(s) >= 1 and len(s) == len(b), "curve",
                  "a table of at least one (size, bandwidth) point", self.sizes)
            check(all(x < y for x, y in zip(s, s[1:], strict=False)), "curve",
                  "a table of increasing sizes", self.sizes)
            check(not math.isinf(s[-1]) and not any(math.isinf(x) for x in b), "curve",
                  "a table of finite sizes and bandwidths", self.sizes)
            set_("sizes", s)
            set_("bandwidths", b)
            check(not self.coefficients, "curve", "given coefficients only with kind polylog2",
                  self.coefficients)

    # -- constructors -------------------------------------------------------------
    @classmethod
    def polylog2(cls, coefficients: Any, *, size_unit: float = 1.0, bandwidth_unit: float = 1.0,
                 min_size: float | None = None, max_size: float | None = None) -> BandwidthCurve:
        """``polyval(coefficients, log2(size / size_unit)) * bandwidth_unit`` (Sailor's form)."""
        return cls("polylog2", tuple(coefficients), size_unit, bandwidth_unit, min_size, max_size)

    @classmethod
    def table(cls, points: Any) -> BandwidthCurve:
        """Points ``[(size, bandwidth), ...]``, log-linear between them, flat beyond."""
        pts = list(points)
        return cls("table", sizes=tuple(p[0] for p in pts), bandwidths=tuple(p[1] for p in pts))

    @property
    def valid_min_size(self) -> float | None:
        """``polylog2``: the smallest size the curve is evaluated at (``min_size``, or above it
        where the fit is not valid at the small end of its fitted range); ``table``: None."""
        return self._low if self.kind == "polylog2" else None  # type: ignore[attr-defined]

    # -- evaluation ---------------------------------------------------------------
    def __call__(self, size: float) -> float:
        """The bandwidth of a message of ``size`` (> 0).

        Raises
        ------
        ConfigError
            ``'curve'`` when the polynomial is not positive at that size.
        """
        s = float(size)
        if self.kind == "table":
            xs, ys = self.sizes, self.bandwidths
            if s <= xs[0]:
                return ys[0]
            if s >= xs[-1]:
                return ys[-1]
            lo, hi = 0, len(xs) - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if xs[mid] <= s:
                    lo = mid
                else:
                    hi = mid
            x0, x1 = math.log2(xs[lo]), math.log2(xs[hi])
            w = (math.log2(s) - x0) / (x1 - x0)
            return ys[lo] + w * (ys[hi] - ys[lo])
        low = self._low  # type: ignore[attr-defined]
        if low is not None and s < low:
            s = low
        if self.max_size is not None and s > self.max_size:
            s = self.max_size
        check(s > 0, "curve", "evaluated at a size > 0 (or given min_size)", size)
        x = math.log2(s / self.size_unit)
        acc = 0.0
        for c in self.coefficients:  # Horner, as numpy.polyval
            acc = acc * x + c
        bw = acc * self.bandwidth_unit
        if not (bw > 0 and math.isfinite(bw)):
            raise ConfigError("curve", f"positive at every flow size (it is {bw!r} at size "
                              f"{size!r})", self.text())
        return bw

    def scaled(self, factor: float) -> BandwidthCurve:
        """This curve times ``factor`` (> 0) at every size (``bandwidth_unit`` or the table's
        bandwidths scaled): the capacity of ``factor`` such links side by side."""
        f = check_positive("factor", factor)
        if self.kind == "table":
            return BandwidthCurve.table(zip(self.sizes, (b * f for b in self.bandwidths),
                                            strict=True))
        return BandwidthCurve.polylog2(self.coefficients, size_unit=self.size_unit,
                                       bandwidth_unit=self.bandwidth_unit * f,
                                       min_size=self.min_size, max_size=self.max_size)

    def peak_above(self, size: float) -> float:
        """The largest bandwidth :meth:`__call__` gives a message of ``size`` or more.

        ``table``: the largest point at or above ``size`` and the value at
        ``size``. ``polylog2``: the polynomial's maximum over the sizes it is
        evaluated at from ``size`` up (clamped to ``[min_size, max_size]``),
        from the range's ends and the real roots of its derivative inside it,
        raised by one part in 1e9 so that a root found to floating-point
        accuracy cannot put it under the true maximum (the planner bounds
        transfer times below with it); ``inf`` when the polynomial grows
        without bound and the curve has no ``max_size``.
        """
        s = float(size)
        kept = self.__dict__.get("_peaks")
        if kept is None:  # a frozen value: its peaks kept per size as found
            kept = {}
            object.__setattr__(self, "_peaks", kept)
        hit = kept.get(s)
        if hit is None:
            hit = kept[s] = self._peak_above(s)
        return hit

    def _peak_above(self, s: float) -> float:
        """:meth:`peak_above`, worked out."""
        size = s
        if self.kind == "table":
            return max([self(s)] + [b for x, b in zip(self.sizes, self.bandwidths, strict=True)
                                    if x >= s])
        import numpy as np

        if self._low is not None:  # type: ignore[attr-defined]
            s = max(s, self._low)  # type: ignore[attr-defined]
        if self.max_size is not None:
            s = min(s, self.max_size)
        c, grows, crit = self._shape()
        lo = math.log2(s / self.size_unit) if s > 0 else -math.inf
        hi = math.log2(self.max_size / self.size_unit) if self.max_size is not None else math.inf
        if math.isinf(hi) and grows:
            return math.inf
        xs = [x for x in (lo, hi) if math.isfinite(x)]
        xs += [r for r in crit if lo < r < hi]
        check(bool(xs), "curve", "given a size > 0 (or min_size) for its peak", size)
        best = max(float(np.polyval(c, x)) for x in xs) * self.bandwidth_unit
        return best * (1 + 1e-9) if best > 0 else best

    def _shape(self) -> tuple[Any, bool, tuple[float, ...]]:
        """``polylog2``: the coefficients as an array, whether the polynomial grows without
        bound, and the real roots of its derivative (computed once per curve)."""
        hit = self.__dict__.get("_shape_cache")
        if hit is None:
            import numpy as np

            c = np.asarray(self.coefficients, dtype=float)
            nz = np.trim_zeros(c, "f")
            crit: tuple[float, ...] = ()
            if c.size > 2:
                crit = tuple(float(r.real) for r in np.roots(np.polyder(c))
                             if abs(r.imag) <= 1e-9 * (1 + abs(r)))
            hit = (c, bool(nz.size > 1 and nz[0] > 0), crit)
            object.__setattr__(self, "_shape_cache", hit)
        return hit

    def text(self) -> str:
        """The text form (see the module docstring); ``parse_curve(c.text()) == c``."""
        if self.kind == "table":
            return "table:" + "/".join(f"{s!r}={b!r}" for s, b in
                                       zip(self.sizes, self.bandwidths, strict=True))
        parts = ["c=" + "/".join(repr(c) for c in self.coefficients),
                 f"size_unit={self.size_unit!r}", f"bandwidth_unit={self.bandwidth_unit!r}"]
        if self.min_size is not None:
            parts.append(f"min_size={self.min_size!r}")
        if self.max_size is not None:
            parts.append(f"max_size={self.max_size!r}")
        return "polylog2:" + ",".join(parts)

    def __str__(self) -> str:
        return self.text()


_RULE = ("a curve 'polylog2:c=A/B/C,size_unit=U,bandwidth_unit=W[,min_size=..][,max_size=..]' "
         "or 'table:SIZE=BW/SIZE=BW...' (sizes in B, bandwidths in B/s, or with units: 1MB, "
         "5GB/s)")


def parse_curve(text: str) -> BandwidthCurve:
    """A :class:`BandwidthCurve` from its text form (see the module docstring).

    Raises
    ------
    ConfigError
        ``'curve'`` naming the text when it is malformed.
    """
    if not isinstance(text, str):
        raise ConfigError("curve", _RULE, text)
    kind, sep, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in CURVE_KINDS:
        raise ConfigError("curve", _RULE, text)
    try:
        if kind == "table":
            pts = []
            items: list[str] = []
            for piece in rest.split("/"):  # 1kB=5MB/s/1MB=5GB/s: a piece without = is a rate's /s
                if "=" not in piece and items and has_unit(items[-1].partition("=")[2] + "/"
                                                           + piece):
                    items[-1] += "/" + piece
                else:
                    items.append(piece)
            for item in items:
                s, eq, b = item.partition("=")
                if not eq:
                    raise ValueError(item)
                pts.append((parse(s, SIZE, "curve"), parse(b, RATE, "curve")))
            return BandwidthCurve.table(pts)
        kw: dict[str, Any] = {}
        for item in rest.split(","):
            k, eq, v = item.partition("=")
            k = k.strip()
            if not eq or k in kw:
                raise ValueError(item)
            if k == "c":
                kw["coefficients"] = tuple(ascii_float(x) for x in v.split("/"))
            elif k in ("size_unit", "bandwidth_unit", "min_size", "max_size"):
                kw[k] = parse(v, RATE if k == "bandwidth_unit" else SIZE, "curve")
            else:
                raise ValueError(item)
        if "coefficients" not in kw:
            raise ValueError("c")
        return BandwidthCurve.polylog2(kw.pop("coefficients"), **kw)
    except ValueError:
        raise ConfigError("curve", _RULE, text) from None


def _valid_low(c: BandwidthCurve) -> float:
    """The smallest size ``s0`` of a polylog2 curve's fitted range ``[min_size, max_size]`` such
    that on ``[s0, max_size]`` the bandwidth is positive and the time ``size / bandwidth`` does
    not decrease.

    With ``x = log2(size / size_unit)`` and ``p`` the polynomial, the time is
    ``2**x size_unit / (p(x) bandwidth_unit)``, whose derivative in ``x`` has the
    sign of ``g(x) = ln(2) p(x) - p'(x)``; so the fit is valid where ``p > 0``
    and ``g >= 0``. The sign of both can change only at their real roots: the
    range is cut there, and the valid part is the run of pieces that ends at
    ``max_size``.

    Raises
    ------
    ConfigError
        ``'curve'`` when no size of the range is valid.
    """
    import numpy as np

    p = np.asarray(c.coefficients, dtype=float)
    g = np.polysub(math.log(2.0) * p, np.polyder(p)) if p.size > 1 else math.log(2.0) * p
    xlo = math.log2(c.min_size / c.size_unit)  # type: ignore[operator]
    xhi = math.log2(c.max_size / c.size_unit)  # type: ignore[operator]
    cuts = set()
    for q in (p, g):
        q = np.trim_zeros(np.atleast_1d(q), "f")
        if q.size > 1:
            cuts.update(float(r.real) for r in np.roots(q)
                        if abs(r.imag) <= 1e-9 * (1 + abs(r)) and xlo < r.real < xhi)
    points = [xlo, *sorted(cuts), xhi]

    def valid(x: float) -> bool:
        return float(np.polyval(p, x)) > 0 and float(np.polyval(g, x)) >= 0

    low = None
    for a, b in reversed(list(zip(points, points[1:], strict=False))):
        if not valid((a + b) / 2):
            break
        low = a
    if low is None:
        if xlo == xhi and float(np.polyval(p, xhi)) > 0:
            return c.min_size  # type: ignore[return-value]
        raise ConfigError("curve", "positive, with a time (size / bandwidth) that grows with the "
                          "size, somewhere in its fitted range (min_size..max_size)", c.text())
    return c.min_size if low == xlo else c.size_unit * 2.0 ** low  # type: ignore[return-value]


#: A link's capacity: bytes per second (``inf``: never a bottleneck) or a curve of the message size.
Capacity = float | BandwidthCurve


def bandwidth_at(capacity: Capacity, size: float) -> float:
    """The bandwidth of a message of ``size`` on a link of ``capacity`` (a number or a curve)."""
    if isinstance(capacity, BandwidthCurve):
        return capacity(size)
    return capacity


def scale_capacity(capacity: Capacity, factor: float) -> Capacity:
    """``capacity`` times ``factor``: a number or a scaled curve (:meth:`BandwidthCurve.scaled`)."""
    if isinstance(capacity, BandwidthCurve):
        return capacity.scaled(factor)
    return capacity * factor


def peak_bandwidth_above(capacity: Capacity, size: float) -> float:
    """The largest bandwidth ``capacity`` gives a message of ``size`` or more (see
    :meth:`BandwidthCurve.peak_above`)."""
    if isinstance(capacity, BandwidthCurve):
        return capacity.peak_above(size)
    return capacity


def as_curve(value: Any, name: str = "curve") -> BandwidthCurve:
    """A curve from a :class:`BandwidthCurve` or its text; ConfigError naming ``name`` else."""
    if isinstance(value, BandwidthCurve):
        return value
    try:
        return parse_curve(value)
    except ConfigError as exc:
        raise ConfigError(name, exc.rule, exc.value) from None
