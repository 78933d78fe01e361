"""Units at the command line: options that take sizes, rates and times, and the units outputs name.

An option that takes a quantity is declared with ``action=SizeOption`` (or
``RateOption``, ``TimeOption``, ``TimesOption`` for a comma list); its value on
the namespace is a float in base units (bytes, bytes per second, seconds), a
plain number exactly as ``type=float`` read it, and how it was written is kept
(:func:`given_quantities`) for the warning on a transfer time that mixes
numbers with and without units (:func:`warn_mixed`) and for the ``units``
object of the JSON (:func:`units_object`).

**One convention for the whole CLI.** Every JSON a command prints about sizes,
rates or transfer times carries a top-level ``units`` object::

    "units": {"base": {"size": "B", "rate": "B/s", "time": "s"},
              "keys": {"finish": "s", "links[].bytes": "B", ...},
              "given": {"nic": {"text": "10Gbit/s", "value": 1250000000.0,
                                "unit": "B/s", "as": "1.25GB/s"}}}

``base`` is what a plain number means, ``keys`` the unit of each key of the
output that has one (``a[].b``: key ``b`` of every element of list ``a``;
``a.*``: every value of object ``a``), ``given`` the options typed with a unit,
as typed and in base units. No existing key is renamed or changed. Tables name
their units in their column headers (``size (B)``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import TIME_LIMIT, ConfigError
from ..units import (
    BASE_UNITS,
    RATE,
    SIZE,
    TIME,
    Quantity,
    format_quantity,
    parse_quantity,
)
from ._common import warn

__all__ = ["NETWORK_UNITS", "PIPELINE_UNITS", "PLAN_UNITS", "TOPOLOGY_UNITS",
           "TOPOLOGY_LISTING_UNITS", "LEARNERS_UNITS", "check_train", "check_learners", "train_transfers", "check_pipeline",
           "pipeline_transfers", "check_gossip", "flow_terms",
           "SizeOption", "RateOption", "TimeOption", "UnlimitedTimeOption", "TimesOption",
           "given_quantities", "typed_text", "as_typed", "in_seconds",
           "quantity", "Term", "mixed_message", "warn_mixed", "network_terms",
           "units_object", "given_line", "transfer_line", "network_spans", "check_hour",
           "warn_billions", "sync_terms",
           "refuse_off_the_second", "SIZE_HELP", "RATE_HELP", "TIME_HELP",
           "RUN_TIME_HELP", "TRAIN_TIMES"]

#: What a size, rate or time option's help says about its unit.
SIZE_HELP = "bytes, or with a unit: 2GB, 512MiB, 16Gbit"
RATE_HELP = "B/s, or with a unit: 10Gbit/s, 100MB/s, 25Gbps"
TIME_HELP = "s, or with a unit: 10ms, 5us"
#: What a time option of a run with its own time unit (``--hour``) says about its unit.
RUN_TIME_HELP = "time units (seconds unless --hour says otherwise), or with a unit: 90s, 5min, 2h"

#: Namespace attribute holding how each quantity option was typed.
_GIVEN = "_quantities"


class _QuantityOption(argparse.Action):
    """Store a quantity option's value in base units and remember how it was typed."""

    kind = SIZE
    many = False
    #: A number beyond the largest double (sim.units.parse_quantity): None as float reads it.
    overflow: str | None = None

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        texts = str(values).split(",") if self.many else [values]
        try:
            qs = [parse_quantity(t, self.kind, self.dest, overflow=self.overflow) for t in texts]
        except ConfigError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        setattr(namespace, self.dest, qs[0].value if len(qs) == 1 else
                tuple(q.value for q in qs))
        record = dict(getattr(namespace, _GIVEN, None) or {})
        record[self.dest] = tuple(qs)
        setattr(namespace, _GIVEN, record)


class SizeOption(_QuantityOption):
    """``--param-size 2GB``: a size in bytes."""

    kind = SIZE


class RateOption(_QuantityOption):
    """``--nic 10Gbit/s``: a rate in bytes per second."""

    kind = RATE


class TimeOption(_QuantityOption):
    """``--latency 5us``: a finite time in seconds (``1e400`` and ``1e400s`` both refused as
    beyond the largest double; ``inf`` is left to the option's own rule)."""

    kind = TIME
    overflow = "refuse"


class UnlimitedTimeOption(TimeOption):
    """``--max-time 2h``: a time in seconds where inf means none (no limit, no failure): a
    number beyond the largest double, ``1e400`` or ``1e400s``, is inf too (no run reaches it)."""

    overflow = "inf"


class TimesOption(_QuantityOption):
    """``--latency 5us,1ms``: a finite time, or one per item of a comma list (a tuple)."""

    kind = TIME
    many = True
    overflow = "refuse"


def typed_text(typed: Iterable[Quantity]) -> str:
    """How a quantity option was typed, for a refusal: ``10Gbit/s``, ``5us,1ms``."""
    return ",".join(q.text.strip() for q in typed)


def as_typed(args: argparse.Namespace, exc: ConfigError) -> ConfigError:
    """``exc`` showing the value as the user typed it when it refuses an option given with a
    unit: ``'bandwidth' must be > 0: '0Gbit/s'``, not the bytes per second the library was
    given (``0.0``). Only when ``exc`` names the option and shows its value (the whole list,
    or one item of it); any other refusal is returned unchanged."""
    typed = given_quantities(args).get(exc.name) or _strategy_typed(args, exc.name)
    if not any(q.unit is not None for q in typed):
        return exc
    v = exc.value
    values = tuple(q.value for q in typed)
    if isinstance(v, (tuple, list)):
        if tuple(v) == values:
            return ConfigError(exc.name, in_seconds(exc.rule, typed), typed_text(typed))
        return exc
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        hit = next((q for q in typed if q.value == v), None)
        if hit is not None:
            return ConfigError(exc.name, in_seconds(exc.rule, [hit]), typed_text([hit]))
    return exc


#: How a rule of :func:`sim.errors.check_time_terms` ends: its bound, in the run's time units.
_TIME_BOUND = f" at most {TIME_LIMIT:g})"


def in_seconds(rule: str, typed: Iterable[Quantity]) -> str:
    """``rule`` with its time bound in seconds named (``... at most 1e+300 s)``) when it is one
    of :func:`sim.errors.check_time_terms` and a time or rate of ``typed`` has a unit: the run's
    time unit is then the second (a unit needs it: :func:`check_hour`), and a bound without
    one read oddly next to ``'1e300h'``. Any other rule unchanged."""
    if rule.endswith(_TIME_BOUND) and any(q.unit is not None and q.kind in (TIME, RATE)
                                          for q in typed):
        return rule[:-1] + " s)"
    return rule


def _strategy_typed(args: argparse.Namespace, key: str) -> tuple[Quantity, ...]:
    """How key ``key`` of ``--strategy``'s text was typed (``checkpoint_bandwidth=2GB/s``): a
    strategy refuses its own keys by their names."""
    spec = getattr(args, "strategy", None)
    if not isinstance(spec, str):
        return ()
    from ..training.strategies import STRATEGIES
    from ..units import spec_quantities

    cls = STRATEGIES.get(spec.strip().partition(":")[0])  # not built: it may be what is refused
    if cls is None or key not in (*cls.times, *cls.rates):
        return ()
    try:
        return tuple(q for k, q in spec_quantities(spec, {key: RATE if key in cls.rates else TIME},
                                                   key=lambda k: k.replace("-", "_")) if k == key)
    except ConfigError:
        return ()


def given_quantities(args: argparse.Namespace) -> dict[str, tuple[Quantity, ...]]:
    """The quantity options typed on the command line: dest -> their quantities (one per item)."""
    return dict(getattr(args, _GIVEN, None) or {})


def quantity(args: argparse.Namespace, dest: str, kind: str) -> tuple[Quantity, ...]:
    """How option ``dest`` was given: as typed, or its value as a plain number (a default)."""
    typed = given_quantities(args).get(dest)
    if typed is not None:
        return typed
    value = getattr(args, dest, None)
    if value is None:
        return ()
    values = value if isinstance(value, tuple) else (value,)
    return tuple(Quantity(float(v), kind, f"{float(v):g}") for v in values)


class Term:
    """One term of a transfer time: what it is, and how it was given."""

    def __init__(self, label: str, q: Quantity) -> None:
        self.label, self.q = label, q

    @property
    def counts(self) -> bool:
        """False for 0 and inf (they mean the same in every unit)."""
        return 0 < self.q.value < math.inf

    def text(self) -> str:
        unit = f" ({self.q.value:.4g} {BASE_UNITS[self.q.kind]})" if self.q.unit else \
            f" ({BASE_UNITS[self.q.kind]})"
        return f"{self.label} {self.q.text.strip()}{unit}"


def option_terms(args: argparse.Namespace, dests: Mapping[str, str]) -> list[Term]:
    """The terms of options ``dest -> kind`` (``--param-size 2GB``), typed or at their defaults."""
    out = []
    for dest, kind in dests.items():
        for q in quantity(args, dest, kind):
            out.append(Term("--" + dest.replace("_", "-"), q))
    return out


def network_terms(units: Mapping[str, Any], what: str) -> list[Term]:
    """The terms of a network's links as :mod:`topologies.units` recorded them (``G.graph["units"]``)."""
    out = []
    for attr in ("bandwidth", "latency", "nic"):
        for q in units.get(attr) or ():
            if q is not None:
                out.append(Term(f"{what}'s {attr}", q))
    return out


def mixed_message(terms: Iterable[Term]) -> str | None:
    """The warning for the terms of one transfer time (latency + size / rate), None if consistent.

    The rule: a plain number is in the base units (B, B/s, s); a quantity with a
    unit is converted to them. Terms all given with units, or all as plain
    numbers (a model in its own consistent units), are consistent; a mix of the
    two is what cannot be right unless the plain numbers happen to be in base
    units, so it is named, with the time one transfer then takes. 0 and inf
    are left out (the same in every unit), and so are sizes when no rate is
    finite and rates when no size is above 0 (size / rate is then 0 or none).
    """
    terms = [t for t in terms if t.counts]
    kinds = {t.q.kind for t in terms}
    if RATE not in kinds or SIZE not in kinds:  # a size matters only at a finite rate
        terms = [t for t in terms if t.q.kind == TIME]
    withu = [t for t in terms if t.q.unit is not None]
    plain = [t for t in terms if t.q.unit is None]
    if not withu or not plain:
        return None
    msg = (f"a transfer time mixes numbers with units ({'; '.join(t.text() for t in withu)}) "
           f"and without ({'; '.join(t.text() for t in plain)}); a number without a unit is "
           "in B, B/s or s")
    sizes = [t.q.value for t in terms if t.q.kind == SIZE]
    rates = [t.q.value for t in terms if t.q.kind == RATE]
    if sizes and rates:
        s, r = max(sizes), min(rates)
        msg += f", so {format_quantity(s, SIZE)} at {format_quantity(r, RATE)} takes {s / r:.4g} s"
    return msg + ": give every size, bandwidth and latency with a unit, or none"


def warn_mixed(command: str, terms: Iterable[Term]) -> None:
    """Print :func:`mixed_message` as one ``warning`` line on stderr when there is one."""
    msg = mixed_message(terms)
    if msg is not None:
        warn(command, msg)


def check_hour(args: argparse.Namespace, hour: float, dests: Iterable[str] = (),
               network_units: Mapping[str, Any] | None = None) -> None:
    """Refuse units that carry time (rates, times) when a time unit is not one second.

    A quantity with a unit converts to seconds; ``--hour`` other than 3600
    makes the simulated time unit something else, so a rate or time with a unit
    cannot be right there. Sizes are not affected.
    """
    if float(hour) == 3600.0:
        return
    typed = given_quantities(args)
    timed = [q for d in dests for q in typed.get(d, ()) if q.unit and q.kind in (RATE, TIME)]
    for attr in ("bandwidth", "latency", "nic"):
        pair = (network_units or {}).get(attr) or ()
        if pair and pair[0] is not None:
            timed.append(pair[0])
    if timed:
        refuse_off_the_second(timed[0], hour)


def refuse_off_the_second(q: Quantity, hour: float) -> None:
    """Refuse ``q``, a rate or time typed with a unit (so in seconds), on a clock of ``hour``
    time units an hour other than 3600, naming ``--hour``."""
    raise ConfigError("hour", f"3600 (time units of one second) when a rate or time is given "
                      f"with a unit ({q.text.strip()})", hour)


def check_transfers(command: str, args: argparse.Namespace, options: Mapping[str, str],
                    network_units: Mapping[str, Any] | None = None, *, hour: float = 3600.0,
                    what: str = "the network", extra: Iterable[Term] = ()) -> None:
    """Refuse timed units off a one-second clock (:func:`check_hour`), warn on a mix (:func:`warn_mixed`).

    Parameters
    ----------
    command : str
        The subcommand, for the warning.
    args : argparse.Namespace
    options : Mapping
        The options (dest -> kind) whose values are terms of the command's transfer times.
    network_units : Mapping or None
        ``G.graph["units"]`` of the network or layout the transfers cross.
    hour : float
        Time units per hour (``--hour``; 3600: the time unit is a second).
    what : str
        What to call the network in the warning.
    extra : iterable of Term
        Terms given elsewhere than in options (``--sync``'s ``bucket_size``: :func:`sync_terms`).
    """
    check_hour(args, hour, options, network_units)
    warn_mixed(command, option_terms(args, options) + list(extra)
               + network_terms(network_units or {}, what))


def sync_terms(text: Any) -> list[Term]:
    """The sizes of a ``--sync`` text that are terms of transfer times (the all-reduce's
    ``bucket_size``), as given: with a unit, or a plain number."""
    from ..training.sync import QUANTITIES, parse_sync, sync_quantities

    if not isinstance(text, str):
        return []
    spec = parse_sync(text)
    sizes = {k for k, kind in QUANTITIES.get(spec.kind, {}).items() if kind == SIZE}
    given = dict(sync_quantities(text))
    out = []
    for k, v in spec.params:
        if k in sizes and v is not None:
            out.append(Term(f"--sync {k}", given.get(k) or Quantity(float(v), SIZE, f"{v:g}")))
    return out


def train_units(tu: str) -> dict[str, str]:
    """The ``keys`` of ``dtsim train --json``'s units object, time in ``tu`` (``s`` by default)."""
    mb = f"microbatch/{tu}"
    keys = {k: mb for k in ("throughput", "throughput_ci", "throughput_steady",
                            "throughput_steady_ci", "goodput", "predicted_throughput",
                            "predicted_throughput_steady")}
    keys.update({k: tu for k in (
        "step_time_mean", "step_time_ci", "step_time_p50", "step_time_p99", "wall_time_mean",
        "wall_time_ci", "latency_mean", "latency_mean_ci", "lost_time.*", "predicted_step_time",
        "predicted_wall_time", "predicted_latency_mean", "predicted_checkpoint_interval",
        "strategy_counts.lost_work", "strategy_counts.wait_time",
        "strategy_counts.degraded_time", "preemption_notice")})
    keys.update({k: "1" for k in (
        "finished", "bubble_fraction", "utilisation", "drop_rate", "drop_rate_ci",
        "mean_quality", "worker_availability", "worker_availability_ci",
        "predicted_bubble_fraction", "predicted_drop_rate", "predicted_mean_quality",
        "compute_utilisation", "compute_utilisation_ci", "compute_utilisation_min",
        "compute_utilisation_max", "predicted_compute_utilisation", "goodput_fraction",
        "goodput_fraction_ci")})
    # (issue 37) what each worker sent, and DiLoCo's outer loop
    keys.update({k: "B" for k in (
        "wan_bytes_sent", "wan_bytes_sent_ci", "wan_bytes_sent_max", "allreduce_bytes_sent",
        "predicted_wan_bytes_sent", "predicted_allreduce_bytes_sent")})
    keys.update({"outer_exposed": tu, "lost_outer_work": f"worker {tu}", "outer_aborted": tu,
                 "outer_steps": "1"})
    keys.update({"worker_hours": "h", "cost": "$", "samples_per_dollar": "sample/$",
                 "quality_samples_per_dollar": "sample/$",
                 "quality_samples_per_dollar_ci": "sample/$",
                 "samples_per_second": f"sample/{tu}",
                 "samples_per_worker_hour": "sample/(worker h)",
                 "peak_memory": "B"})
    keys.update({f"memory[].{k}": "B" for k in (
        "total", "capacity", "weights", "gradients", "optimizer", "activations", "input_buffers",
        "allreduce_bucket", "overhead")})
    keys.update({f"explain.{k}": "s" for k in (
        "pipeline_time", "tied_allreduce", "allreduce", "optimizer", "iteration",
        "stages[].forward", "stages[].backward", "stages[].compute", "stages[].p2p",
        "stages[].bubble")})
    return keys


def _span(values: Iterable[float], kind: str) -> str:
    xs = sorted(x for x in values if 0 < x < math.inf)
    if not xs:
        return "inf" if kind == RATE else "0"
    lo, hi = format_quantity(xs[0], kind), format_quantity(xs[-1], kind)
    return lo if lo == hi else f"{lo} to {hi}"


def transfer_line(sizes: Mapping[str, float], rates: Iterable[float],
                  latencies: Iterable[float], where: str) -> str | None:
    """``"transfers: --param-size 1.4GB over tree (links 100B/s to 400B/s, latency 50ms to
    500ms): 1.4GB at 100B/s takes 1.4e+07 s"``, for a text report; None when nothing moves.

    Every size, rate and latency a transfer time is made of, in units, and the
    time the largest size takes at the lowest rate: the hint that a plain number
    was not in the unit meant (``--param-size 1.4e9`` over the default 100 B/s).
    """
    moved = {k: v for k, v in sizes.items() if v is not None and 0 < v < math.inf}
    if not moved:
        return None
    rates = [r for r in rates if 0 < r < math.inf]
    text = (f"transfers: {', '.join('--' + k.replace('_', '-') + ' ' + format_quantity(v, SIZE) for k, v in moved.items())} "
            f"over {where} (links {_span(rates, RATE)}, latency {_span(latencies, TIME)})")
    if rates:
        s, r = max(moved.values()), min(rates)
        text += f": {format_quantity(s, SIZE)} at {format_quantity(r, RATE)} takes {s / r:.4g} s"
    return text


def network_spans(net: Any) -> tuple[list[float], list[float]]:
    """The finite link and NIC capacities (curves left out) and the link latencies of a
    :class:`sim.network.Network`."""
    rates = [c for c, curve in zip(net.capacity, net.curve, strict=True) if curve is None]
    return rates, [lat for lat, _r in net.link_of.values()]


def units_object(keys: Mapping[str, str], args: argparse.Namespace | None = None
                 ) -> dict[str, Any]:
    """The ``units`` object of a command's JSON (see the module docstring)."""
    given = {}
    for dest, qs in (given_quantities(args) if args is not None else {}).items():
        typed = [q for q in qs if q.unit is not None]
        if not typed:
            continue
        entry = [{"text": q.text.strip(), "value": q.value, "unit": BASE_UNITS[q.kind],
                  "as": format_quantity(q.value, q.kind)} for q in qs]
        given[dest] = entry[0] if len(entry) == 1 else entry
    return {"base": dict(BASE_UNITS), "keys": dict(keys), "given": given}


def given_line(args: argparse.Namespace) -> str | None:
    """``"units: --nic 10Gbit/s = 1.25GB/s"``: the options typed with a unit, for a text report."""
    parts = []
    for dest, qs in given_quantities(args).items():
        if any(q.unit is not None for q in qs):
            parts.append(f"--{dest.replace('_', '-')} " + ",".join(q.text.strip() for q in qs)
                         + " = " + ",".join(format_quantity(q.value, q.kind) for q in qs)
                         + f" ({'/'.join(f'{q.value:g}' for q in qs)} {BASE_UNITS[qs[0].kind]})")
    if not parts:
        return None
    return "units: " + "; ".join(parts)


# ----------------------------------------------------------------------------- per command
# What each command's transfers are made of, and the units of its JSON; the commands call
# these (one line each), so their own modules only declare options and print.

#: ``dtsim network --json``: a link's capacity is B/s, or a curve's text (B/s at each size in B).
NETWORK_UNITS = {"finish": "s", "makespan": "s", "links[].capacity": "B/s",
                 "links[].bytes": "B", "links[].utilisation": "1"}
#: ``dtsim pipeline --json``: the time unit is that of --stage-time, --latency and 1 / --rate
#: (the second when any is given with a unit).
PIPELINE_UNITS = {k: "s" for k in (
    "latency_mean", "latency_mean_ci", "latency_p50", "latency_p99", "predicted_latency_mean",
    "wait_stage", "wait_stage_ci", "predicted_wait_stage", "simulated_time", "worker_time")}
PIPELINE_UNITS.update({k: "1" for k in (
    "drop_rate", "drop_rate_ci", "predicted_drop_rate", "mean_quality", "mean_quality_ci",
    "predicted_mean_quality", "utilisation", "utilisation_ci", "utilisation_stage",
    "utilisation_stage_ci")})
#: ``dtsim plan --json``.
PLAN_UNITS = {"search.seconds": "s", "plans[].predicted_iteration_time": "s",
              "plans[].peak_memory": "B", "plans[].samples_per_second": "sample/s",
              "plans[].price_per_hour": "$/h", "plans[].samples_per_dollar": "sample/$",
              "plans[].simulated_iteration_time": "s", "plans[].simulated_iteration_time_ci": "s",
              "plans[].simulated_step_time": "s", "runs[].measured_iteration_time": "s",
              "runs[].measured_peak_memory": "B", "runs[].predicted_iteration_time": "s",
              "runs[].predicted_peak_memory": "B", "runs[].simulated_iteration_time": "s"}
#: ``dtsim topologies SPEC --json`` (and its table's unit column), and the listing's.
TOPOLOGY_UNITS = {"latency_min": "s", "latency_max": "s", "bandwidth_min": "B/s",
                  "bandwidth_max": "B/s"}
TOPOLOGY_LISTING_UNITS = {"families[].params.*latency*": "s",
                          "families[].params.*bandwidth*": "B/s"}


#: ``dtsim learners --json`` (issue 37): its clock is the second when --bandwidth or
#: --latency is given with a unit (a plain --step-time is then in seconds too).
LEARNERS_UNITS = {"training_time": "s", "training_time_ci": "s", "lost_outer_work": "chip s",
                  "goodput_fraction": "1", "goodput_fraction_ci": "1",
                  "compute_utilisation": "1", "compute_utilisation_ci": "1", "stalled": "1",
                  "run_seconds": "s", "run_cpu_seconds": "s", "run_peak_rss_mib": "MiB",
                  "outer_aborts": "1", "outer_aborted": "s", "outer_steps": "1"}


def check_learners(args: argparse.Namespace) -> None:
    """``dtsim learners``: warn on a transfer time mixing numbers with and without units
    (``--size``, ``--bandwidth``, ``--latency``: :func:`warn_mixed`), and on a model size
    that reads as a count of billions (:func:`warn_billions`)."""
    warn_mixed("learners", option_terms(args, {"size": SIZE, "bandwidth": RATE,
                                               "latency": TIME}))
    warn_billions("learners", args, "size")


def warn_billions(command: str, args: argparse.Namespace, dest: str) -> None:
    """Warn when option ``dest`` (a model's size) was typed as fewer than 1000 bytes with the
    bare unit ``B`` (``--param-size 1B``, ``7B``): a model's name counts its parameters in
    billions, the option is bytes. Names the model of that many billion parameters at
    ``--value-bits``; the value is used as given."""
    typed = given_quantities(args).get(dest) or ()
    for q in typed:
        if q.unit == "B" and 0 < q.value < 1000:
            n = q.value
            bits = getattr(args, "value_bits", 16) or 16
            model = format_quantity(n * 1e9 * bits / 8, SIZE)
            opt = "--" + dest.replace("_", "-")
            warn(command, f"{opt} {q.text.strip()} is {n:g} byte{'' if n == 1 else 's'} (B is a "
                 f"byte, not a billion): a model of {n:g} billion parameters at {bits} bits a "
                 f"value is {model} ({opt} {model})")


def _links(cfg: Any, args: argparse.Namespace, layout: bool
           ) -> tuple[Mapping[str, Any], list[float], list[float], str] | None:
    """The links a command's transfers cross: (units as given, rates, latencies, what).

    The config's network (``cfg.network``), else the ``--topology`` layout when its
    links time the hops (``layout``), else None (the command's own link options).
    """
    if getattr(cfg, "network", None) is not None:
        from ..network import shared_network

        # the one network of this value, built when the config was validated (kept per process)
        net = shared_network(cfg.network, nic=getattr(cfg, "nic", None))
        rates, lats = network_spans(net)
        return net.units, rates, lats, f"--network {args.network}"
    if layout and getattr(args, "topology", None):
        import topologies

        G = topologies.build(args.topology, seed=args.seed)
        return (G.graph.get("units") or {}, [b for _, _, b in G.edges(data="bandwidth")],
                [x for _, _, x in G.edges(data="latency")], f"--topology {args.topology}")
    return None


def _hops(args: argparse.Namespace) -> list[float]:
    lat = args.latency
    return list(lat) if isinstance(lat, tuple) else [lat]


#: ``dtsim train``'s time options: in the run's time units (``--hour``), or with a unit.
TRAIN_TIMES = ("forward_time", "backward_times", "optimizer_time", "mean_downtime",
               "domain_downtime", "mtbf", "replace_time", "detection_timeout", "max_wait",
               "checkpoint_cost", "restart_cost", "max_time", "stall_limit")


def check_train(args: argparse.Namespace, cfg: Any) -> None:
    """``dtsim train`` (not --plan): a time with a unit only on a one-second clock
    (:func:`check_hour` over :data:`TRAIN_TIMES` and the times of ``--sync``'s text, such as
    DiLoCo's ``grace=5min``, and of ``--strategy``'s, such as ``checkpoint=2min``), then
    :func:`check_transfers` over its network or links."""
    from ..training.strategies import strategy_quantities
    from ..training.sync import sync_quantities

    check_hour(args, cfg.hour, TRAIN_TIMES)
    warn_billions("train", args, "param_size")
    if float(cfg.hour) != 3600.0:
        given = [("--sync", k, q) for k, q in sync_quantities(args.sync)]
        given += [("--strategy", k, q) for k, q in strategy_quantities(args.strategy)]
        for option, key, q in given:
            if q.kind in (RATE, TIME):
                refuse_off_the_second(replace(q, text=f"{option} {key}={q.text.strip()}"),
                                      cfg.hour)
    links = _links(cfg, args, layout=True)
    if cfg.network is not None:
        options = {"param_size": SIZE, "activation_size": SIZE, "bucket_size": SIZE, "nic": RATE}
    else:
        options = {"param_size": SIZE, "activation_size": SIZE, "bandwidth": RATE, "latency": TIME}
    check_transfers("train", args, options, links[0] if links else None, hour=cfg.hour,
                    what="the network" if cfg.network is not None else "the topology",
                    extra=sync_terms(args.sync))


def train_transfers(args: argparse.Namespace, cfg: Any) -> str | None:
    """``dtsim train``'s ``transfers:`` line (:func:`transfer_line`)."""
    sizes = {"param_size": cfg.param_size, "activation_size": args.activation_size}
    links = _links(cfg, args, layout=True)
    if links is not None:
        return transfer_line(sizes, links[1], links[2], links[3])
    return transfer_line(sizes, [args.bandwidth], _hops(args), "--bandwidth, --latency")


def _pipeline_layout(args: argparse.Namespace) -> bool:
    return not getattr(args, "no_layout_latency", False)


def check_pipeline(args: argparse.Namespace, cfg: Any) -> None:
    """``dtsim pipeline``: :func:`check_transfers` over its network or links."""
    links = _links(cfg, args, layout=_pipeline_layout(args))
    if getattr(cfg, "network", None) is not None:
        options = {"transfer_size": SIZE, "nic": RATE}
    else:
        options = {"transfer_size": SIZE, "bandwidth": RATE, "latency": TIME}
    check_transfers("pipeline", args, options, links[0] if links else None,
                    what="the network" if getattr(cfg, "network", None) is not None
                    else "the topology")


def pipeline_transfers(args: argparse.Namespace, cfg: Any) -> str | None:
    """``dtsim pipeline``'s ``transfers:`` line (:func:`transfer_line`)."""
    sizes = {"transfer_size": args.transfer_size}
    links = _links(cfg, args, layout=_pipeline_layout(args))
    if links is not None:
        return transfer_line(sizes, links[1], links[2], links[3])
    return transfer_line(sizes, [args.bandwidth], _hops(args), "--bandwidth, --latency")


def flow_terms(path: str, typed: Iterable[tuple[Quantity, Quantity]]) -> list[Term]:
    """A flows file's sizes as terms of the transfer time: the first typed with a unit, the
    first without (``read_flows(..., quantities=typed)``)."""
    out: list[Term] = []
    for unit in (True, False):
        q = next((s for s, _ in typed if (s.unit is not None) == unit and s.value > 0), None)
        if q is not None:
            out.append(Term(f"{path} size", q))
    return out


def check_gossip(args: argparse.Namespace, cfg: Any) -> None:
    """``dtsim gossip``: :func:`check_transfers` of ``--size``/``--nic`` and the topology's links.

    Nothing to check with protocol ``edge``: its clock counts steps (``2/n`` each) and times no
    exchange, so the links' units and the default ``--size`` never meet in a transfer time."""
    if cfg.protocol == "edge":
        return
    units: Any = {}
    if cfg.graph is None:
        from ..gossip.config import spec_family

        family, params = spec_family(cfg.topology)
        if family == "complete":  # never built as a graph: its parameters say it all
            from topologies import REGISTRY
            from topologies.units import spec_units

            units = spec_units(cfg.topology, params, REGISTRY["complete"].params)
        else:
            from ..gossip.network import topology_graph

            units = topology_graph(cfg.topology, cfg.nodes, cfg.topology_seed).graph.get(
                "units") or {}
    check_transfers("gossip", args, {"size": SIZE, "nic": RATE}, units, what="the topology")
