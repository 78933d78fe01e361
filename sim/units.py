"""Quantities with units: sizes, rates and times as dtsim reads and writes them.

dtsim's **base units** are the byte (``B``), the byte per second (``B/s``) and
the second (``s``): the units of the shipped profiles, plans and fleets, and of
every simulated clock whose hour is 3600 time units (``dtsim train --hour``'s
default). A **plain number** is in the base units and means exactly what it
meant before units were accepted: it is read by ``float`` and nothing else
(so ``--param-size 1.4e9`` is 1.4e9 bytes, and a topology's default bandwidth
``100`` is 100 B/s). A number **with a unit** is converted exactly to the base
units (the product is formed in rational arithmetic and rounded once, so
``1.4GB``, ``1400MB`` and ``1.4e9B`` give the same float as ``1.4e9``).

Conventions (the spellings are case-sensitive):

sizes
    ``B``, ``byte``, ``bytes`` is a byte; ``b``, ``bit``, ``bits`` a bit (1/8 B),
    after an optional prefix: ``2GB``, ``512MiB``, ``1.5e9B``, ``16Gbit``, ``4 KiB``.
prefixes
    ``k M G T P E`` are powers of 1000 (SI; ``k`` is lower case) and
    ``Ki Mi Gi Ti Pi Ei`` powers of 1024 (IEC 80000-13). ``K`` alone is refused
    (``KB`` is 1000 B to some and 1024 B to JEDEC's memory sizes: write ``kB``
    or ``KiB``), and so are ``m`` (milli: ``mB`` is no size) and every other
    letter.
rates
    a size unit per time unit, ``10Gbit/s``, ``100MB/s``, ``1.2GiB/s``,
    ``5MB/ms``, or with ``ps`` for "per second": ``25 Gbps`` (bits),
    ``3GBps`` (bytes: ``B`` is always a byte and ``b`` a bit).
times
    ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``min``, ``h``, ``d`` (86400 s):
    ``10ms``, ``2h``. ``m`` is refused (minute, or milli of what?).

A number with a unit must be an ASCII decimal number (digits, an optional
fraction and exponent), finite, and not negative; whitespace may separate the
number from its unit. What is refused is refused with one
:class:`~sim.errors.ConfigError` line naming the parameter, the rule and the
value as given (``'param_size' must be a size ...: '10 parsecs'``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .errors import ConfigError, ascii_float

__all__ = [
    "SIZE",
    "RATE",
    "TIME",
    "KINDS",
    "BASE_UNITS",
    "Quantity",
    "parse_quantity",
    "parse",
    "has_unit",
    "written_with_unit",
    "spec_quantities",
    "format_quantity",
    "describe",
]

SIZE, RATE, TIME = "size", "rate", "time"
#: The kinds of quantity, in the order rules name them.
KINDS = (SIZE, RATE, TIME)
#: The unit a plain number of each kind is in (and every output reports).
BASE_UNITS = {SIZE: "B", RATE: "B/s", TIME: "s"}

#: Prefix -> factor. SI prefixes are powers of 1000, IEC (``i``) ones powers of 1024.
PREFIXES: dict[str, int] = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
#: Size base unit -> bytes.
SIZE_BASES: dict[str, Fraction] = {
    "B": Fraction(1), "byte": Fraction(1), "bytes": Fraction(1),
    "b": Fraction(1, 8), "bit": Fraction(1, 8), "bits": Fraction(1, 8),
}
#: Time unit -> seconds.
TIME_UNITS: dict[str, Fraction] = {
    "ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "\u00b5s": Fraction(1, 10**6),
    "\u03bcs": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": Fraction(1),
    "min": Fraction(60), "h": Fraction(3600), "d": Fraction(86400),
}

#: An ASCII decimal number (no unicode digits, no underscores, no nan/inf).
_NUMBER = re.compile(r"\s*(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                     r"(?:[eE](?P<exp>[+-]?[0-9]+))?\s*(?P<unit>.*?)\s*", re.DOTALL)
#: Exponents beyond this overflow (or vanish in) every float whatever the unit.
_MAX_EXPONENT = 400

_EXAMPLES = {
    SIZE: "bytes, or a number and a size unit: 2GB, 512MiB, 1.5e9B, 16Gbit, 4 KiB",
    RATE: "bytes per second, or a number and a rate unit: 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s",
    TIME: "seconds, or a number and a time unit: 10ms, 250us, 2h",
}
_PREFIX_RULE = ("k M G T P E powers of 1000, Ki Mi Gi Ti Pi Ei of 1024; B a byte, b or bit a bit")


def describe(kind: str) -> str:
    """The rule a value of ``kind`` must follow (the text of every refusal of one).

    Parameters
    ----------
    kind : {"size", "rate", "time"}

    Returns
    -------
    str
        ``"a size: bytes, or a number and a size unit: 2GB, ..."``.
    """
    rule = f"a {kind}: {_EXAMPLES[kind]}"
    return rule + (f" ({_PREFIX_RULE})" if kind != TIME else "")


@dataclass(frozen=True)
class Quantity:
    """A value read from text: its value in base units and how it was written.

    Attributes
    ----------
    value : float
        In the base unit of ``kind`` (:data:`BASE_UNITS`).
    kind : {"size", "rate", "time"}
    text : str
        The text as given.
    unit : str or None
        The unit as written (``"GB"``, ``"Gbit/s"``), None for a plain number.
    """

    value: float
    kind: str
    text: str
    unit: str | None = None

    @property
    def plain(self) -> bool:
        """True for a plain number (in base units, as before units existed)."""
        return self.unit is None

    def describe(self) -> str:
        """``"2GB (2e+09 B)"``, or ``"100 (B/s)"`` for a plain number."""
        base = BASE_UNITS[self.kind]
        if self.unit is None:
            return f"{self.text.strip()} ({base})"
        return f"{self.text.strip()} ({self.value:.6g} {base})"


def _size_unit(unit: str) -> Fraction | None:
    """Bytes of one ``unit`` (a prefix and a size base), None when it is none."""
    for base, f in SIZE_BASES.items():
        if unit.endswith(base):
            prefix = unit[: len(unit) - len(base)]
            if prefix in PREFIXES:
                return f * PREFIXES[prefix]
    return None


def _rate_unit(unit: str) -> Fraction | None:
    """Bytes per second of one ``unit`` (``size/time`` or ``size`` + ``ps``), None else."""
    if "/" in unit:
        num, _, den = unit.partition("/")
        size, per = _size_unit(num.strip()), TIME_UNITS.get(den.strip())
        if size is None or per is None:
            return None
        return size / per
    if unit.endswith("ps"):
        size = _size_unit(unit[:-2])
        return size
    return None


def _unit_kind(unit: str) -> tuple[str, Fraction] | None:
    """(kind, factor to base units) of a unit, None when it is not one."""
    f = _size_unit(unit)
    if f is not None:
        return SIZE, f
    f = _rate_unit(unit)
    if f is not None:
        return RATE, f
    if unit in TIME_UNITS:
        return TIME, TIME_UNITS[unit]
    return None


def _ambiguous(unit: str) -> str | None:
    """Why a unit that is not one is refused, when it is a near miss worth naming."""
    head = unit.split("/")[0].strip()
    if head[:1] == "K" and head[1:2] != "i":
        return "K is ambiguous (1000 or 1024): write k (1000) or Ki (1024)"
    if head[:1] == "m" and head not in TIME_UNITS and head != "min":
        return "m is milli (or minute: write min)"
    return None


def _kind_word(kind: str) -> str:
    return {SIZE: "size", RATE: "rate", TIME: "time"}[kind]


def parse_quantity(text: Any, kind: str, name: str, *, overflow: str | None = None) -> Quantity:
    """Read a size, rate or time from text (see the module docstring).

    Parameters
    ----------
    text : str or number
        ``"2GB"``, ``"10Gbit/s"``, ``"10ms"``, or a plain number (text or a
        number), which is read by ``float`` exactly as before units existed.
    kind : {"size", "rate", "time"}
        What the parameter takes.
    name : str
        The parameter, for the error message.
    overflow : {None, "refuse", "inf"}
        A number beyond the largest double (``1e400``, ``1e400s``): None reads
        a plain one as ``float`` does (inf) and refuses one with a unit;
        ``"refuse"`` refuses both (an option that takes a finite value);
        ``"inf"`` reads both as inf (an option where inf means none, such as a
        time limit: no run reaches either).

    Returns
    -------
    Quantity

    Raises
    ------
    ConfigError
        ``'name' must be a size: ...: '10 parsecs'``: an unknown or ambiguous
        unit, a unit of another kind (``2GB/h`` for a size), no number, a
        number that is not ASCII decimal, negative, or too large for a float.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}: {kind!r}")
    if isinstance(text, bool):
        raise ConfigError(name, describe(kind), text)
    if isinstance(text, (int, float)):
        return Quantity(float(text), kind, repr(text))
    if not isinstance(text, str):
        raise ConfigError(name, describe(kind), text)
    if overflow not in (None, "refuse", "inf"):
        raise ValueError(f"overflow must be None, 'refuse' or 'inf': {overflow!r}")
    try:  # a plain number: today's meaning, exactly (ASCII: float reads every script's digits)
        value = ascii_float(text)
    except ValueError:
        pass
    else:
        beyond = math.isinf(value) and text.strip().lower().lstrip("+-") not in ("inf",
                                                                                 "infinity")
        if beyond and overflow == "refuse":
            raise ConfigError(name, f"a finite {_kind_word(kind)} (at most {_max_text(kind)})",
                              text)
        return Quantity(value, kind, text)  # overflow "inf" or None: float's +-inf
    m = _NUMBER.fullmatch(text)
    if m is None or not m["unit"]:
        raise ConfigError(name, describe(kind), text)
    unit = m["unit"]
    found = _unit_kind(unit)
    if found is None:
        why = _ambiguous(unit)
        rule = describe(kind) if why is None else f"a {_kind_word(kind)} with a known unit ({why})"
        raise ConfigError(name, rule, text)
    got, factor = found
    if got != kind:
        raise ConfigError(name, f"a {_kind_word(kind)}, not a {_kind_word(got)} "
                          f"({_EXAMPLES[kind]})", text)
    if m["num"].startswith("-") and float(m["num"]) != 0:
        raise ConfigError(name, f"a {_kind_word(kind)} >= 0", text)
    exp = int(m["exp"]) if m["exp"] is not None else 0
    try:
        mantissa = Fraction(m["num"])
    except ValueError:  # more digits than Python converts
        raise ConfigError(name, f"a {_kind_word(kind)} whose number has at most 4300 digits",
                          text) from None
    if mantissa == 0:
        return Quantity(0.0, kind, text, unit)
    if abs(exp) > _MAX_EXPONENT:
        if exp < 0:
            return Quantity(0.0, kind, text, unit)
        if overflow == "inf":
            return Quantity(math.inf, kind, text, unit)
        raise ConfigError(name, f"a finite {_kind_word(kind)} (at most {_max_text(kind)})", text)
    exact = abs(mantissa) * Fraction(10) ** exp * factor
    try:
        value = float(exact)
    except OverflowError:
        if overflow == "inf":
            return Quantity(math.inf, kind, text, unit)
        raise ConfigError(name, f"a finite {_kind_word(kind)} (at most {_max_text(kind)})",
                          text) from None
    return Quantity(value, kind, text, unit)


def _max_text(kind: str) -> str:
    return f"{1.7976931348623157e308:.3g} {BASE_UNITS[kind]}"


def parse(text: Any, kind: str, name: str) -> float:
    """The value of :func:`parse_quantity` in base units (a float)."""
    return parse_quantity(text, kind, name).value


#: a number followed by something that is not part of a number (meant as a unit, known or not)
_WRITTEN_WITH_UNIT = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                                r"\s*[^\s0-9.+-].*", re.DOTALL)


def written_with_unit(text: str) -> bool:
    """Whether ``text`` is a number written with a unit, or with something meant as one (which
    :func:`parse_quantity` then names): not a plain number, which ``float`` reads (``1e5``,
    ``inf``). For the values of spec texts (``grace=5min``, ``checkpoint=2min``)."""
    try:
        ascii_float(text)
    except ValueError:
        return bool(_WRITTEN_WITH_UNIT.fullmatch(text))
    return False


def spec_quantities(text: str, kinds: Any, key: Any = None) -> list[tuple[str, Quantity]]:
    """The parameters of a spec text ``name:key=value,...`` given with a unit, each with its
    :class:`Quantity` as written, in the text's order: those whose key (``key(k)`` when given,
    the text's spelling otherwise) is in ``kinds`` (key -> its quantity's kind) and whose value
    is :func:`written_with_unit`. For a spec its reader took first (a bad one refused there:
    ``--sync``'s, ``--strategy``'s)."""
    out = []
    for item in filter(None, (x.strip() for x in text.strip().partition(":")[2].split(","))):
        k, _, val = (x.strip() for x in item.partition("="))
        k = key(k) if key is not None else k
        if k in kinds and written_with_unit(val):
            out.append((k, parse_quantity(val, kinds[k], k)))
    return out


def has_unit(text: Any) -> bool:
    """True when ``text`` is a number written with a unit (not a plain number)."""
    if not isinstance(text, str):
        return False
    try:
        ascii_float(text)
        return False
    except ValueError:
        pass
    m = _NUMBER.fullmatch(text)
    return m is not None and bool(m["unit"]) and _unit_kind(m["unit"]) is not None


def _mantissa(x: float, factor: Fraction | int, kind: str, unit: str) -> str | None:
    """A short decimal ``m`` with ``parse(m + unit) == x`` (the shortest text of the float
    ``x / unit`` when it reads back, else the fewest digits that do), None when none of 17
    digits does. Written without an exponent unless that takes more than 21 characters.
    """
    from decimal import Decimal

    exact = Fraction(x) / factor
    try:
        mantissa = float(exact)
    except OverflowError:  # 1e300 s in ns: not a unit to write it in
        return None
    def text_of(short: str) -> str:
        fixed = format(Decimal(short), "f")
        fixed = fixed[:-2] if fixed.endswith(".0") else fixed
        return fixed if len(fixed) <= 21 else short

    first = text_of(repr(mantissa))  # the mantissa's shortest text: nearly always the answer
    if parse(first + unit, kind, "value") == x:
        return first
    for digits in range(1, 18):
        text = text_of(f"{mantissa:.{digits}g}")
        if parse(text + unit, kind, "value") == x:
            return text
    return None


def _largest(x: float, units: list[tuple[Fraction, str]], kind: str) -> str | None:
    """``x`` in the largest of ``units`` it is at least one of (the smallest if none)."""
    fits = [(f, u) for f, u in units if x >= f] or [min(units)]
    f, u = max(fits)
    m = _mantissa(x, f, kind, u)
    return None if m is None else m + u


def format_quantity(value: float, kind: str) -> str:
    """A value in base units as text with a unit that :func:`parse` reads back exactly.

    A size in bytes with the largest SI prefix it is at least one of (``2GB``),
    or the largest IEC prefix when that is shorter (``512MiB``, ``4KiB``); a rate
    likewise in bytes per second (``1.25GB/s``, ``1.2GiB/s``); a time in the
    unit among ns, us, ms, s, min, h, d that writes it shortest (``10ms``,
    ``90s``, ``2h``). ``parse(format_quantity(x, kind), kind, ...) == x`` for
    every finite ``x >= 0``; ``inf`` and ``nan`` are written as ``inf`` and ``nan``.

    Parameters
    ----------
    value : float
        In base units.
    kind : {"size", "rate", "time"}

    Returns
    -------
    str
    """
    x = float(value)
    if not math.isfinite(x) or x < 0:
        return repr(x)
    if x == 0:
        return "0" + BASE_UNITS[kind]
    if kind == TIME:
        texts = []
        for u, f in TIME_UNITS.items():
            if u in ("\u00b5s", "\u03bcs") or (x < f and u != "ns"):
                continue
            m = _mantissa(x, f, kind, u)
            if m is not None:
                texts.append(m + u)
        best = min(texts, key=len, default=None)
    else:
        suffix = "B" if kind == SIZE else "B/s"
        si = [(Fraction(f), p + suffix) for p, f in PREFIXES.items() if "i" not in p]
        iec = [(Fraction(f), p + suffix) for p, f in PREFIXES.items() if "i" in p]
        best = _largest(x, si, kind)
        other = _largest(x, iec, kind) if x >= 1024 else None
        if best is None or (other is not None and len(other) < len(best)):
            best = other
    return best if best is not None else repr(x) + BASE_UNITS[kind]
