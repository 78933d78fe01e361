"""``sim.units``: sizes, rates and times with units; exact conversion; plain numbers as float reads them."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.training import TrainingConfig
from sim.units import (
    BASE_UNITS,
    PREFIXES,
    RATE,
    SIZE,
    TIME,
    TIME_UNITS,
    format_quantity,
    has_unit,
    parse,
    parse_quantity,
    written_with_unit,
)

SI = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


@pytest.mark.parametrize("prefix,factor", [*SI.items(), *IEC.items()])
@pytest.mark.parametrize("base,per_byte", [("B", 1), ("byte", 1), ("bytes", 1), ("b", Fraction(1, 8)),
                                           ("bit", Fraction(1, 8)), ("bits", Fraction(1, 8))])
def test_every_prefix_and_base_is_its_exact_power(prefix, factor, base, per_byte):
    """k M G T P E are powers of 1000, Ki..Ei of 1024; B a byte, b/bit/bits an eighth of one."""
    for mantissa in ("1", "2.5", "0.001", "3e2", "7E-1"):
        want = float(Fraction(mantissa) * factor * per_byte)
        assert parse(f"{mantissa}{prefix}{base}", SIZE, "s") == want
        assert parse(f"{mantissa} {prefix}{base}", SIZE, "s") == want  # a space is allowed


def test_the_issue_forms_give_their_bytes():
    """2GB, 512MiB, 1.5e9B, 16Gbit, 4 KiB; 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s; 10ms, 2h."""
    assert parse("2GB", SIZE, "x") == 2e9
    assert parse("512MiB", SIZE, "x") == 512 * 2**20
    assert parse("1.5e9B", SIZE, "x") == 1.5e9
    assert parse("16Gbit", SIZE, "x") == 2e9
    assert parse("4 KiB", SIZE, "x") == 4096.0
    assert parse("10Gbit/s", RATE, "x") == 1.25e9
    assert parse("100MB/s", RATE, "x") == 1e8
    assert parse("25 Gbps", RATE, "x") == 3.125e9
    assert parse("1.2GiB/s", RATE, "x") == float(Fraction("1.2") * 2**30)
    assert parse("3GBps", RATE, "x") == 3e9  # B is always a byte, b a bit
    assert parse("5MB/ms", RATE, "x") == 5e9
    assert parse("10ms", TIME, "x") == 0.01
    assert parse("2h", TIME, "x") == 7200.0
    assert parse("250us", TIME, "x") == parse("250\u00b5s", TIME, "x") == 2.5e-4
    assert parse("1min", TIME, "x") == 60.0 and parse("1d", TIME, "x") == 86400.0


@pytest.mark.parametrize("unit,seconds", list(TIME_UNITS.items()))
def test_every_time_unit_and_rate_denominator(unit, seconds):
    """Each time unit alone, and as the denominator of a rate (bytes per that time)."""
    assert parse(f"3{unit}", TIME, "t") == float(3 * seconds)
    assert parse(f"3MB/{unit}", RATE, "r") == float(3 * 10**6 / seconds)


def test_conversion_is_exact_so_every_spelling_gives_the_same_float():
    """1.4GB, 1400MB, 1.4e9B and the plain 1.4e9 are one float (one rounding, rational arithmetic)."""
    assert parse("1.4GB", SIZE, "x") == parse("1400MB", SIZE, "x") == parse("1.4e9B", SIZE, "x") \
        == parse("1.4e9", SIZE, "x") == 1.4e9
    assert parse("2.3us", TIME, "x") == 2.3e-6 and parse("2300ns", TIME, "x") == 2.3e-6
    # a float product would not be: 2.3 * 1e-6 != 2.3e-6 in binary floating point
    assert 2.3 * 1e-6 != 2.3e-6


@pytest.mark.parametrize("text", ["1.4e9", "100", " 7 ", "inf", "-3", "1e400", "1_000", "nan",
                                  "1e-500"])
def test_a_plain_number_is_read_by_float_exactly_as_before(text):
    """A number without a unit keeps today's meaning: float(text), nan and inf included (in
    ASCII: other scripts' digits are refused, below)."""
    q = parse_quantity(text, SIZE, "x")
    want = float(text)
    assert q.unit is None and q.plain
    assert (math.isnan(q.value) and math.isnan(want)) or q.value == want
    assert not has_unit(text)


@pytest.mark.parametrize("text", ["\u0661\u0662", "\u0661.5", "\u00a07"])
def test_a_plain_number_in_other_scripts_digits_is_refused(text):
    """audit6: float('\u0661\u0662') is 12, so '--mtbf \u0661\u0662' ran an mtbf of 12; a
    number is ASCII (sim.errors.ascii_float), as a number with a unit already was."""
    with pytest.raises(ConfigError, match=r"^'x' must be a size: "):
        parse_quantity(text, SIZE, "x")
    assert not has_unit(text) and not written_with_unit(text)


@pytest.mark.parametrize("text", ["1e400", "1e400s", "2e308", "1e99999min", "+1e400"])
def test_a_time_beyond_a_double_reads_alike_with_and_without_a_unit(text):
    """audit4: --max-time 1e400 was inf (float) while 1e400s was refused: an option where inf
    means none reads both as inf (overflow="inf"), one that takes a finite time refuses both
    (overflow="refuse"), in the one line the unit's refusal had; the default is unchanged."""
    assert parse_quantity(text, TIME, "max_time", overflow="inf").value == math.inf
    with pytest.raises(ConfigError, match=r"^'max_time' must be a finite time \(at most "
                       r"1.8e\+308 s\): '" + re.escape(text) + "'$"):
        parse_quantity(text, TIME, "max_time", overflow="refuse")
    for spelled in ("inf", "Infinity", "-inf"):  # inf spelled out is the option's to judge
        assert math.isinf(parse_quantity(spelled, TIME, "x", overflow="refuse").value)
    assert parse_quantity("2h", TIME, "x", overflow="refuse").value == 7200.0
    assert parse_quantity("-1e400", TIME, "x", overflow="inf").value == -math.inf


@pytest.mark.parametrize("text,kind,message", [
    ("10 parsecs", SIZE, "'param_size' must be a size: bytes, or a number and a size unit: 2GB, "
     "512MiB, 1.5e9B, 16Gbit, 4 KiB (k M G T P E powers of 1000, Ki Mi Gi Ti Pi Ei of 1024; B a "
     "byte, b or bit a bit): '10 parsecs'"),
    ("1e400GB", SIZE, "'param_size' must be a finite size (at most 1.8e+308 B): '1e400GB'"),
    ("-2GB", SIZE, "'param_size' must be a size >= 0: '-2GB'"),
    ("2GB/h", SIZE, "'param_size' must be a size, not a rate (bytes, or a number and a size unit: "
     "2GB, 512MiB, 1.5e9B, 16Gbit, 4 KiB): '2GB/h'"),
    ("10Gbit", RATE, "'param_size' must be a rate, not a size (bytes per second, or a number and "
     "a rate unit: 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s): '10Gbit'"),
    ("2KB", SIZE, "'param_size' must be a size with a known unit (K is ambiguous (1000 or 1024): "
     "write k (1000) or Ki (1024)): '2KB'"),
    ("5mB", SIZE, "'param_size' must be a size with a known unit (m is milli (or minute: write "
     "min)): '5mB'"),
    ("5m", TIME, "'param_size' must be a time with a known unit (m is milli (or minute: write "
     "min)): '5m'"),
    ("2 GB/s", TIME, "'param_size' must be a time, not a rate (seconds, or a number and a time "
     "unit: 10ms, 250us, 2h): '2 GB/s'"),
])
def test_refusals_name_the_parameter_the_rule_and_the_value(text, kind, message):
    """One ConfigError line: 'name' must be RULE: VALUE as typed."""
    with pytest.raises(ConfigError) as exc:
        parse(text, kind, "param_size")
    assert str(exc.value) == message


@pytest.mark.parametrize("text", ["GB", "nanGB", "infGB", "\u0662GB", "2gb", "2 G B", "2GBB",
                                  "2Gbit/S", "2Gb/sec", "1e5000000GB", "--2GB", "2.GB.", "2iB",
                                  "x2GB", "2GB/", "/s"])
def test_malformed_quantities_are_refused(text):
    """No number, nan/inf or non-ASCII digits with a unit, wrong case, unknown units."""
    for kind in (SIZE, RATE, TIME):
        with pytest.raises(ConfigError) as exc:
            parse(text, kind, "v")
        assert exc.value.name == "v" and exc.value.value == text


def test_huge_exponents_are_refused_before_any_big_arithmetic():
    """1e99999999GB answers at once (no 10**99999999), and so does a 5000-digit mantissa."""
    with pytest.raises(ConfigError, match="finite size"):
        parse("1e99999999GB", SIZE, "x")
    with pytest.raises(ConfigError, match="at most 4300 digits"):
        parse("1" * 5000 + "GB", SIZE, "x")
    assert parse("1e-99999999GB", SIZE, "x") == 0.0  # underflow to 0, as float("1e-99999999")


@pytest.mark.parametrize("kind", [SIZE, RATE, TIME])
def test_format_quantity_round_trips_exactly(kind):
    """parse(format_quantity(x)) == x for 1000 random floats over 30 decades, and for round ones."""
    rng = np.random.default_rng(33)
    xs = list(10.0 ** rng.uniform(-12, 18, size=1000)) + [1.0, 1000.0, 1024.0, 2**30, 1e9, 0.5,
                                                          1.25e9, 3600.0, 5e-324, 1e300]
    for x in xs:
        text = format_quantity(float(x), kind)
        assert parse(text, kind, "x") == float(x), (x, text)
        assert has_unit(text)


def test_format_quantity_picks_readable_units():
    """SI unless an IEC prefix is shorter; the shortest time unit."""
    assert format_quantity(2e9, SIZE) == "2GB"
    assert format_quantity(512 * 2**20, SIZE) == "512MiB"
    assert format_quantity(1.25e9, RATE) == "1.25GB/s"
    assert format_quantity(float(Fraction("1.2") * 2**30), RATE) == "1.2GiB/s"
    assert format_quantity(0.01, TIME) == "10ms"
    assert format_quantity(7200.0, TIME) == "2h"
    assert format_quantity(90.0, TIME) == "90s"
    assert format_quantity(0.0, SIZE) == "0B" and format_quantity(math.inf, RATE) == "inf"


def test_base_units_and_prefix_table():
    """The base units are B, B/s, s; the prefix table is SI and IEC exactly."""
    assert BASE_UNITS == {SIZE: "B", RATE: "B/s", TIME: "s"}
    assert PREFIXES == {**SI, **IEC}


def test_a_config_given_a_text_with_a_unit_says_how_to_give_it():
    """(user trial 3) ``TrainingConfig(param_size="20GB")`` in an experiment script said
    ``'param_size' must be >= 0: '20GB'``, as if 20GB were negative: only the command line
    and files read units. The line now says the config takes a number in base units and what
    reads the text; a text without a unit keeps the line it had. (TrainingConfig takes such
    texts since user trial 15, below; PipelineConfig still refuses them so.)"""
    from sim.pipeline import PipelineConfig

    hint = ("a number in base units (B, B/s, s; a text with a unit is read by "
            "sim.units.parse(text, kind, name))")
    for kw, rule in ((dict(transfer_size="20GB"), ">= 0"), (dict(bandwidth="40Gbit/s"), "> 0"),
                     (dict(latency="100ms"), ">= 0")):
        with pytest.raises(ConfigError) as e:
            PipelineConfig(**kw)
        (name, text), = kw.items()
        assert str(e.value) == f"'{name}' must be {rule}, {hint}: '{text}'"
    for cls in (PipelineConfig, TrainingConfig):
        name = "transfer_size" if cls is PipelineConfig else "param_size"
        with pytest.raises(ConfigError) as e:
            cls(**{name: "abc"})
        assert str(e.value) == f"'{name}' must be >= 0: 'abc'"


def test_config_fields_with_a_dimension_take_unit_texts():
    """(user trial 15) ``TrainingConfig(mtbf="30min")`` in an experiment script was refused while
    the network text of the same config took units: every time, size and rate field now takes a
    text with a unit (sim.units), stored as the number the CLI would store; plain numbers and
    the config built from them are unchanged."""
    from sim.training.config import QUANTITY_FIELDS

    kw = dict(stages=2, replicas=3, microbatches=3)
    given = TrainingConfig(**kw, mtbf="30min", replace_time="2min", param_size="2.6GB",
                           activation_size="16MiB", bandwidth="400Mbit/s",
                           forward_time=("300ms", 0.25), latency="35ms", max_wait="5min",
                           checkpoint_cost="1.5s", restart_cost="90s",
                           stall_limit="1h", optimizer_time="20ms")
    plain = TrainingConfig(**kw, mtbf=1800.0, replace_time=120.0, param_size=2.6e9,
                           activation_size=16 * 2**20, bandwidth=5e7, forward_time=(0.3, 0.25),
                           latency=0.035, max_wait=300.0, checkpoint_cost=1.5,
                           restart_cost=90.0, stall_limit=3600.0,
                           optimizer_time=0.02)
    assert given == plain
    for name in QUANTITY_FIELDS:
        assert getattr(given, name) == getattr(plain, name), name
    assert given.forward_time == (0.3, 0.25) and given.bandwidth == 5e7
    net = dict(stages=1, replicas=2, network="complete:n=2,bandwidth=1GB/s")
    assert (TrainingConfig(**net, bucket_size="25MB", nic="100Gbit/s")
            == TrainingConfig(**net, bucket_size=2.5e7, nic=1.25e10))
    # a time or rate with a unit is in seconds: refused on another clock, as dtsim train --hour
    with pytest.raises(ConfigError, match=r"^'hour' must be 3600 \(time units of one second\) "
                                          r"when a rate or time is given with a unit \(30min\)"):
        TrainingConfig(**kw, mtbf="30min", hour=60.0)
    assert TrainingConfig(**kw, param_size="2GB", hour=60.0).param_size == 2e9  # a size is not
    with pytest.raises(ConfigError, match=r"^'mtbf' must be a time"):
        TrainingConfig(**kw, mtbf="30 parsecs")
