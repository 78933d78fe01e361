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
    sizes in bytes.
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

from ..errors import ConfigError, check, check_positive
from ..units import RATE, SIZE, has_unit, parse

__all__ = ["BandwidthCurve", "parse_curve", "as_curve", "CURVE_KINDS"]

CURVE_KINDS = ("polylog2", "table")


def _finite(name: str, value: Any) -> float:
    try:
        x = float(value)
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
        ``polylog2``: clamp the size to this range before evaluating.
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
        if self.min_size is not None and s < self.min_size:
            s = self.min_size
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
                kw["coefficients"] = tuple(float(x) for x in v.split("/"))
            elif k in ("size_unit", "bandwidth_unit", "min_size", "max_size"):
                kw[k] = parse(v, RATE if k == "bandwidth_unit" else SIZE, "curve")
            else:
                raise ValueError(item)
        if "coefficients" not in kw:
            raise ValueError("c")
        return BandwidthCurve.polylog2(kw.pop("coefficients"), **kw)
    except ValueError:
        raise ConfigError("curve", _RULE, text) from None


def as_curve(value: Any, name: str = "curve") -> BandwidthCurve:
    """A curve from a :class:`BandwidthCurve` or its text; ConfigError naming ``name`` else."""
    if isinstance(value, BandwidthCurve):
        return value
    try:
        return parse_curve(value)
    except ConfigError as exc:
        raise ConfigError(name, exc.rule, exc.value) from None
