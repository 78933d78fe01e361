"""dtsim's own formats (JSON or TOML) for plans, model profiles, GPU catalogues, networks and fleets.

Each reader takes a file (``.json`` or ``.toml``, chosen by the suffix) or
already parsed data (``*_from_data``), and each writer gives plain data that
``json.dump`` writes. Field names are the values' (:mod:`sim.profiles.values`).

Plan::

    model = "OPT-350"              # optional; --model names it otherwise
    microbatch_size = 8
    global_batch_size = 1024
    framework = "deepspeed"        # optional (sim.profiles.frameworks); or a table:
    # [framework]
    # name = "deepspeed"; version = "0.16.5"; precision = "fp16"; communication_data_type = "fp32"
    [[stages]]
    first_layer = 0                # or: layers = [0, 1, 2, ...]
    last_layer = 11
    replicas = [{gpu = "GH-96", tp = 4, gpus_per_node = 4, zone = "us-central1-a", count = 8}]
    # a replica may name its physical node: host = "n3" (replicas on one host share its NICs
    # and talk over its intra-node link); without, each replica is a node of its own

:func:`plan_text` writes one (``dtsim plan --out``, ``--export-plan``: every field of a
:class:`Plan`, read back equal).

A plan file may also be a Sailor ``plan_config`` (it has ``pipeline_list``), or a
Megatron-LM launch line (a file not ``.json``/``.toml`` holding
``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size`` or
``pretrain_``: ``torchrun ... pretrain_gpt.py --tensor-model-parallel-size 2 ...``,
read and never run, with a model and a GPU type given apart:
:mod:`sim.profiles.megatron_args`).

Model profile (``times`` rows may be ``[forward]`` alone: a forward-only
profile, or ``[forward, backward]``: the optimizer step is then estimated, as for a
forward-only one (:mod:`sim.profiles.estimates`); a ``shape`` with ``layers``, ``hidden``, ``heads``, ``sequence``,
``vocabulary``, ``tied`` and optionally ``position_embedding`` (``learned_absolute``, the
default, ``rope`` or ``none``: Megatron-LM's ``--position-embedding-type``) gives sizes and
estimated times where the profile
has none, and may stand alone: :mod:`sim.profiles.estimates`; its ``tied`` and the
profile's ``tied_embeddings`` are one fact: either may be given, both must agree, and
with neither the model is untied, ``tied_embeddings``' default; Megatron-LM's GPT ties
them unless ``--untie-embeddings-and-output-weights``, so say ``"tied": true`` for it)::

    {"model": "M", "layers": 2, "bytes_per_value": 4, "optimizer_bytes_per_param": 8,
     "tied_embeddings": false,
     "sizes": [{"tp": 1, "layers": [{"params": 10, "activation_bytes": 4096,
                                    "activation_memory_bytes": 8192}, ...]}],
     "times": [{"gpu": "A", "microbatch_size": 1, "tp": 1,
                "layers": [[forward, backward, optimizer], ...]}]}

GPU catalogue::

    {"gpus": [{"name": "A", "memory_bytes": 2.5e10, "price_per_hour": 1.5,
               "overhead_bytes": 3e9, "overhead_tp1_bytes": 2e9, "source": "...",
               "intra_node_bandwidth": 3e11, "peak_flops": 3.12e14, "peak_flops_fp32": 1.95e13,
               "memory_bandwidth": 1.555e12, "spec_source": "..."}]}

(any other key is refused; ``overhead_bytes`` is required, 0 to mean none; ``price_per_hour``
is US dollars per GPU-hour and the peaks FLOP/s, plain numbers: ``"$2.1/h"`` and ``"312 TFLOPS"``
are refused, there is no unit for them; an optional ``"currency"`` must be ``"USD"``: a price
in another currency is refused, none is converted)

NetworkProfile (``bandwidth`` in bytes per second, or a ``curve`` in GB/s of
``log2(bytes / 1e6)``, highest power first, fitted on ``min_bytes`` to
``max_bytes``; or a ``curve`` in the text form of :mod:`sim.network.curves`,
e.g. ``"table:1e3=5e8/1e6=5e9"``)::

    {"links": [{"src": {"gpu": "A", "zone": "z"}, "dst": {"gpu": "B", "zone": "z"},
                "flows": 2, "bandwidth": 1.25e9, "latency": 1e-5},
               {"src": ..., "dst": ..., "src_flows": 4, "dst_flows": 4,
                "curve": {"coefficients": [-0.65, 11.4, 45.3], "min_bytes": 65536,
                          "max_bytes": 1073741824}}]}

Fleet: ``{"nodes": [{"gpu": "A", "gpus_per_node": 8, "zone": "z", "count": 4}],
"links": [...]}`` (links as in a network).

Units: a number is in bytes, bytes per second or seconds as above; a size, rate
or time may instead be text with a unit (:mod:`sim.units`): ``"bandwidth":
"10Gbit/s"``, ``"latency": "5us"``, ``"memory_bytes": "80GiB"``, ``"min_bytes":
"64KiB"``, ``"activation_bytes": "1.5MiB"``, a model's ``times`` rows ``["1.9ms", "3.8ms",
"0.4ms"]`` (a parameter count is a number: ``"params": 350000000``, not ``"350M"``).

A profiles folder (:func:`load_profiles`) holds ``gpus.json`` (or
``.toml``; without one, the shipped catalogue), and model profiles and links in
either format: the Sailor
artifact's ``profiles.json`` with ``llm_info.json`` and ``bandwidths.json``
(and optionally its measured ``intra_node_bandwidths.json``),
and dtsim's ``models/*.json|toml`` and ``network.json|toml``; its ``runs/``
holds measured runs (Sailor run files).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check, check_int
from ..network.curves import BandwidthCurve, as_curve
from ..units import RATE, SIZE, TIME, describe, parse_quantity
from . import sailor
from .documents import get, located, read_document
from .frameworks import FrameworkSpec
from .values import (
    Fleet,
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    Link,
    MeasuredRun,
    ModelProfile,
    ModelShape,
    NetworkProfile,
    NodeKind,
    Plan,
    Profiles,
    ReplicaSpec,
    StageSpec,
)

__all__ = [
    "plan_from_data", "plan_to_data", "plan_text", "read_plan", "framework_from_data", "framework_to_data",
    "model_from_data", "model_to_data", "read_model",
    "gpus_from_data", "gpus_to_data", "read_gpus",
    "network_from_data", "network_to_data", "read_network",
    "fleet_from_data", "fleet_to_data", "read_fleet", "fleet_network", "with_fleet",
    "load_profiles", "read_runs", "DATA_DIR",
]

#: The profiles dtsim ships (the Sailor artifact's data and the GPU catalogue).
DATA_DIR = Path(__file__).parent / "data"

_NUM = (int, float)


def _opt(obj: dict, key: str, default: Any) -> Any:
    return obj.get(key, default) if isinstance(obj, dict) else default


def _qty(name: str, obj: Any, key: str, where: str, kind: str, *default: Any) -> Any:
    """``obj[key]`` (or ``default``): a number, or text with a unit (``"80GiB"``, ``"25Gbit/s"``,
    ``"5us"``) read by :mod:`sim.units` into B, B/s or s; any other value as the plain reader."""
    value = _opt(obj, key, default[0]) if default else get(name, obj, key, where)
    if isinstance(value, str):  # text: a number with a unit, nothing else
        try:
            q = parse_quantity(value, kind, key)
            if q.unit is None:  # "1e9" as text: numbers are written as numbers
                raise ConfigError(key, describe(kind), value)
            return q.value
        except ConfigError as exc:
            raise ConfigError(name, f"{exc.rule} at {where}.{key}", value) from None
    return value if default else get(name, obj, key, where, _NUM)


def _time_text(value: str, where: str) -> float:
    """A layer time written as text: a time with a unit (``"1.9ms"``), read by :mod:`sim.units`
    into seconds; text without a unit (``"0.0019"``) is refused, as :func:`_qty` refuses it."""
    try:
        q = parse_quantity(value, TIME, "time", overflow="refuse")
        if q.unit is None:
            raise ConfigError("time", describe(TIME), value)
        return q.value
    except ConfigError as exc:
        raise ConfigError("model", f"{exc.rule} at {where}", value) from None


# --------------------------------------------------------------------------- plan

#: The keys of a dtsim plan, of one of its stages; any other is refused (a typo would
#: otherwise leave its value unused).
PLAN_KEYS = ("model", "microbatch_size", "global_batch_size", "stages", "framework")
STAGE_KEYS = ("layers", "first_layer", "last_layer", "replicas")
#: Memory per layer of a plan's stage (its index and what a stage keeps of it) and per
#: replica (it becomes a training worker: sim.training.config.BYTES_PER_WORKER).
BYTES_PER_PLAN_LAYER, BYTES_PER_PLAN_REPLICA = 100, 5_400


def _check_plan_size(doc: dict, where: str) -> None:
    """Refuse, before any tuple is built, a plan whose layers or replicas cannot fit."""
    from ..errors import check_memory_terms

    layers = replicas = 0
    stages = doc.get("stages")
    for st in stages if isinstance(stages, list) else ():
        if not isinstance(st, dict):
            continue
        a, b = st.get("first_layer"), st.get("last_layer")
        if "layers" not in st and isinstance(a, int) and isinstance(b, int) and b >= a:
            layers += b - a + 1
        for r in st.get("replicas") or () if isinstance(st.get("replicas"), list) else ():
            c = r.get("count", 1) if isinstance(r, dict) else 1
            replicas += c if isinstance(c, int) and c > 0 else 1
    check_memory_terms([("plan", f"{where} ({layers} layers)", layers * BYTES_PER_PLAN_LAYER),
                        ("plan", f"{where} ({replicas} replicas)",
                         replicas * BYTES_PER_PLAN_REPLICA)])


def plan_from_data(doc: Any, where: str = "plan", model: str | None = None) -> Plan:
    """A :class:`Plan` from parsed dtsim plan data (or a Sailor ``plan_config``)."""
    if sailor.is_sailor_plan(doc):
        return sailor.plan_from_sailor(doc, where, model)
    check(isinstance(doc, dict), "plan", "a JSON/TOML table with stages", where)
    unknown = sorted(set(doc) - set(PLAN_KEYS))
    check(not unknown, "plan", f"a table of {', '.join(PLAN_KEYS)} (no other key) at {where}",
          unknown)
    _check_plan_size(doc, where)
    stages = []
    for j, st in enumerate(get("plan", doc, "stages", where, list)):
        at = f"{where}.stages[{j}]"
        check(isinstance(st, dict), "plan", f"a table at {at}", st)
        unknown = sorted(set(st) - set(STAGE_KEYS))
        check(not unknown, "plan", f"stage keys {', '.join(STAGE_KEYS)} at {at}", unknown)
        if "layers" in st:
            layers = tuple(get("plan", st, "layers", at, list))
        else:
            a = get("plan", st, "first_layer", at, int)
            b = get("plan", st, "last_layer", at, int)
            check(b >= a, "plan", f"last_layer >= first_layer at {at}", (a, b))
            layers = tuple(range(a, b + 1))
        reps: list[ReplicaSpec] = []
        for i, r in enumerate(get("plan", st, "replicas", at, list)):
            rat = f"{at}.replicas[{i}]"
            check(isinstance(r, dict), "plan", f"a table at {rat}", r)
            unknown = set(r) - {"gpu", "tp", "gpus_per_node", "zone", "count", "host"}
            check(not unknown, "plan", f"replica keys gpu, tp, gpus_per_node, zone, count, host "
                  f"at {rat}", sorted(unknown))
            count = _opt(r, "count", 1)
            check(isinstance(count, int) and not isinstance(count, bool) and count >= 1, "plan",
                  f"a count >= 1 at {rat}", count)
            spec = ReplicaSpec(gpu=get("plan", r, "gpu", rat, str), tp=_opt(r, "tp", 1),
                               gpus_per_node=_opt(r, "gpus_per_node", None),
                               zone=_opt(r, "zone", "default"), host=_opt(r, "host", None))
            reps.extend([spec] * count)
        stages.append(StageSpec(layers=layers, replicas=tuple(reps)))
    m = _opt(doc, "model", None)
    if model is not None:
        m = model
    return Plan(stages=tuple(stages), microbatch_size=get("plan", doc, "microbatch_size", where, int),
                global_batch_size=get("plan", doc, "global_batch_size", where, int), model=m,
                framework=framework_from_data(doc["framework"], f"{where}.framework")
                if "framework" in doc else None)


def framework_from_data(doc: Any, where: str = "framework") -> FrameworkSpec:
    """A :class:`FrameworkSpec` from a name (``"megatron"``) or a table (``name``, ``version``,
    ``precision``, and options of the framework's configuration by their names)."""
    if isinstance(doc, str):
        return FrameworkSpec(_word(doc))
    check(isinstance(doc, dict), "framework", f"a name or a table with name at {where}", doc)
    words: dict[Any, Any] = {}
    for k, v in doc.items():  # a key or text value read as --framework reads it: spaces around
        check(_word(k) not in words, "framework", f"each key once at {where}", _word(k))
        words[_word(k)] = _word(v)
    doc = words
    version = _opt(doc, "version", None)
    check(version is None or isinstance(version, str), "framework_version",
          f"a string at {where}", version)
    return FrameworkSpec(name=get("framework", doc, "name", where, str), version=version,
                         precision=_opt(doc, "precision", None),
                         options=tuple((k, v) for k, v in doc.items()
                                       if k not in ("name", "version", "precision")))


def _word(v: Any) -> Any:
    """A framework's name, key or text value without the spaces around it (``' 0.14.4'`` is
    ``0.14.4``), read so in a plan file's table as in ``--framework``'s text; other values as
    they are."""
    return v.strip() if isinstance(v, str) else v


def framework_from_text(text: Any, plan: FrameworkSpec | None = None) -> FrameworkSpec:
    """A :class:`FrameworkSpec` from the command line's ``NAME[:key=value,...]``.

    The keys are a plan file's framework table's (``version``, ``precision``
    and the framework's options, :data:`sim.profiles.frameworks.FRAMEWORKS`),
    e.g. ``megatron:precision=bf16,overlap_grad_reduce=true``; ``true`` and
    ``false`` are booleans and a number is a number (``bucket_cap_mb=50``).

    ``plan``: the framework the plan names, which the text overrides key by
    key: the same framework and release keeps the plan's version, precision
    and options that the text does not give; another framework or release
    keeps only the plan's precision (the training's, not the framework's;
    the options are the other release's table's).
    """
    check(isinstance(text, str) and text.strip() != "", "framework",
          "NAME[:key=value,...] text", text)
    name, colon, rest = str(text).partition(":")
    doc: dict[str, Any] = {"name": _word(name)}
    # a colon opens a list of options: one with none after it is a slip (as a trailing comma)
    check(not colon or rest.strip() != "", "framework", "NAME[:key=value,...] (a colon "
          "followed by at least one key=value)", text)
    for item in (_word(x) for x in rest.split(",")) if colon else ():
        key, eq, val = (_word(x) for x in item.partition("="))
        check(bool(eq and key and val), "framework", "NAME[:key=value,...] (each option "
              "key=value)", text)
        check(key != "name" and key not in doc, "framework", "each key once (the name "
              "before the colon)", key)
        doc[key] = val if key in ("version", "precision") else _option_value(val)
    if plan is not None:
        framework_from_data(doc, "--framework")  # the text alone first: its own errors
        base = framework_to_data(plan)
        if base["name"] != doc["name"] or doc.get("version", base.get("version")) != \
                base.get("version"):
            base = {"precision": base["precision"]} if "precision" in base else {}
        doc = {**base, **doc}
    return framework_from_data(doc, "--framework")


#: A number as a JSON plan file writes one (ASCII digits; no ``1_000``, ``inf``, ``nan``, ``0x10``).
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _option_value(text: str) -> Any:
    """``true``/``false`` as a boolean, an integer or a number as such (JSON's grammar: what a
    plan file's table would hold), else the text (refused by the option's rule)."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    hit = _NUMBER.fullmatch(text)
    if hit is None:
        return text
    return float(text) if hit.group(1) or hit.group(2) else int(text)


def framework_to_data(f: FrameworkSpec) -> dict[str, Any]:
    """Plain data of a :class:`FrameworkSpec`."""
    out: dict[str, Any] = {"name": f.name}
    if f.version is not None:
        out["version"] = f.version
    if f.precision is not None:
        out["precision"] = f.precision
    out.update(dict(f.options))
    return out


def plan_to_data(plan: Plan) -> dict[str, Any]:
    """Plain data of ``plan`` (consecutive equal replicas grouped with a count)."""
    stages = []
    for st in plan.stages:
        groups: list[dict[str, Any]] = []
        for r in st.replicas:
            d = {"gpu": r.gpu, "tp": r.tp, "gpus_per_node": r.gpus_per_node, "zone": r.zone}
            if r.host is not None:
                d["host"] = r.host
            if groups and {k: v for k, v in groups[-1].items() if k != "count"} == d:
                groups[-1]["count"] += 1
            else:
                groups.append({**d, "count": 1})
        stages.append({"first_layer": st.layers[0], "last_layer": st.layers[-1],
                       "replicas": groups})
    out: dict[str, Any] = {}
    if plan.model is not None:
        out["model"] = plan.model
    out.update(microbatch_size=plan.microbatch_size, global_batch_size=plan.global_batch_size,
               stages=stages)
    if plan.framework is not None:
        out["framework"] = framework_to_data(plan.framework)
    return out


def plan_text(plan: Plan) -> str:
    """The text of a dtsim JSON plan file holding ``plan`` (:func:`plan_to_data`, one space an
    indent level, a final newline): what ``dtsim plan --out`` and ``--export-plan`` write.
    :func:`read_plan` reads it back as ``plan``: every field of a :class:`Plan`, its stages,
    replicas (``host`` included) and :class:`FrameworkSpec`, is written."""
    return json.dumps(plan_to_data(plan), indent=1) + "\n"


def is_plan_text_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a plan exactly as :func:`plan_text` lays it out (a JSON object of
    plan keys with ``stages``, one space an indent level, a final newline): a file that
    ``dtsim plan --out`` wrote, which a later ``--out`` may replace. A plan of the user's
    (written by hand, by another tool, or edited) is laid out otherwise."""
    p = Path(path)
    if p.stat().st_size > 64 * 2**20:
        return False
    try:
        text = p.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return False
    return (isinstance(doc, dict) and "stages" in doc and set(doc) <= set(PLAN_KEYS)
            and json.dumps(doc, indent=1) + "\n" == text)


def read_plan(path: str | os.PathLike[str], model: str | None = None, *,
              gpu: str | dict[str, str] | None = None, zone: str | dict[str, str] | None = None,
              profiles: Profiles | None = None) -> Plan:
    """A plan file: dtsim's format (JSON/TOML), a Sailor ``plan_config``, or a Megatron-LM
    launch line (:mod:`sim.profiles.megatron_args`: a file not ``.json``/``.toml`` holding
    ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size`` or ``pretrain_``;
    it needs ``model``, ``gpu`` and optionally ``zone``; the model profile is ``profiles``'
    or the shipped one). ``gpu`` and ``zone`` are refused with a plan that names its GPUs."""
    from . import megatron_args

    if megatron_args.is_megatron_launch(path):
        check(model is not None, "model", "given (--model NAME) with a Megatron-LM launch plan",
              str(path))
        prof = profiles if profiles is not None else load_profiles(models=(model,))
        return megatron_args.read_megatron_plan(path, prof.model(model), gpu, zone)
    if (gpu is not None or zone is not None) and Path(path).suffix.lower() not in (".json",
                                                                                 ".toml"):
        # --gpu says a launch was meant: a file that is no plan document either (an empty one,
        # a script of another command) is named, not --gpu as if the plan named its GPUs
        try:
            read_document("plan", path)
        except ConfigError:
            raise ConfigError("plan", "a Megatron-LM launch line with --gpu/--zone (a file "
                              "holding " + ", ".join(megatron_args.MARKERS) + " or a deepspeed "
                              "launch of a .py script; this one holds none, nor is it a plan "
                              "document)", str(path)) from None
    check(gpu is None, "gpu", "given only with a Megatron-LM launch plan (a dtsim or Sailor "
          "plan names its GPUs)", gpu)
    check(zone is None, "zone", "given only with a Megatron-LM launch plan (a dtsim or Sailor "
          "plan names its zones)", zone)
    return plan_from_data(read_document("plan", path), str(path), model)


# --------------------------------------------------------------------------- model profile


def model_from_data(doc: Any, where: str = "model") -> ModelProfile:
    """A :class:`ModelProfile` from parsed dtsim model-profile data."""
    check(isinstance(doc, dict), "model", "a JSON/TOML table", where)
    shape = None
    if "shape" in doc:
        sh = get("model", doc, "shape", where, dict)
        at = f"{where}.shape"
        unknown = set(sh) - {"layers", "hidden", "heads", "sequence", "vocabulary", "tied",
                             "position_embedding"}
        check(not unknown, "model", f"shape keys layers, hidden, heads, sequence, vocabulary, "
              f"tied, position_embedding at {at}", sorted(unknown))
        # the tie is the shape's `tied` or the profile's `tied_embeddings` (both, if given,
        # must agree); neither: untied, the profile's default
        tied = _opt(sh, "tied", _opt(doc, "tied_embeddings", False))
        check(tied == _opt(doc, "tied_embeddings", tied), "model",
              f"tied_embeddings equal to the shape's tied at {where} (both say whether the "
              "output head is the word embedding)",
              (doc.get("tied_embeddings"), sh.get("tied")))
        shape = ModelShape(**{k: get("model", sh, k, at, int) for k in
                              ("layers", "hidden", "heads", "sequence", "vocabulary")},
                           tied=tied, position_embedding=get(
                               "model", sh, "position_embedding", at, str)
                           if "position_embedding" in sh else "learned_absolute")
    sizes = []
    for k, e in enumerate(get("model", doc, "sizes", where, list)
                          if shape is None or "sizes" in doc else []):
        at = f"{where}.sizes[{k}]"
        with located("model", at):
            row = tuple(LayerSizes(params=get("model", x, "params", f"{at}.layers[{i}]", int),
                                   activation_bytes=_qty("model", x, "activation_bytes",
                                                         f"{at}.layers[{i}]", SIZE),
                                   activation_memory_bytes=_qty("model", x,
                                                                "activation_memory_bytes",
                                                                f"{at}.layers[{i}]", SIZE))
                        for i, x in enumerate(get("model", e, "layers", at, list)))
        sizes.append((get("model", e, "tp", at, int), row))
    times = []
    for k, e in enumerate(get("model", doc, "times", where, list)
                          if shape is None or "times" in doc else []):
        at = f"{where}.times[{k}]"
        rows = []
        for i, x in enumerate(get("model", e, "layers", at, list)):
            check(isinstance(x, list) and len(x) in (1, 2, 3)
                  and all(isinstance(v, (*_NUM, str)) and not isinstance(v, bool) for v in x),
                  "model", f"[forward(, backward(, optimizer))] seconds (numbers, or times with "
                  f"a unit: \"1.9ms\") at {at}.layers[{i}]", x)
            # a time may be text with a unit, as every time of these files ("1.9ms")
            x = [_time_text(v, f"{at}.layers[{i}][{n}]") if isinstance(v, str) else v
                 for n, v in enumerate(x)]
            with located("model", f"{at}.layers[{i}]"):
                # a row without its optimizer step leaves it to the estimate (Adam at the GPU's
                # memory bandwidth, named in the output), as a forward-only row does; before,
                # [forward, backward] took LayerTimes' default, an optimizer step of 0 s
                rows.append(LayerTimes(x[0], None, None) if len(x) == 1
                            else LayerTimes(x[0], x[1], None) if len(x) == 2 else LayerTimes(*x))
        times.append(((get("model", e, "gpu", at, str), get("model", e, "microbatch_size", at, int),
                       get("model", e, "tp", at, int)), tuple(rows)))
    layers = (get("model", doc, "layers", where, int) if shape is None or "layers" in doc
              else shape.layers + 2)
    return ModelProfile(name=get("model", doc, "model", where, str),
                        layers=layers, times=tuple(times), shape=shape,
                        sizes=tuple(sizes), bytes_per_value=_opt(doc, "bytes_per_value", 4),
                        optimizer_bytes_per_param=_opt(doc, "optimizer_bytes_per_param", 8.0),
                        tied_embeddings=_opt(doc, "tied_embeddings",
                                             False if shape is None else shape.tied),
                        tied_params=tuple((get("model", e, "tp", f"{where}.tied_params", int),
                                           get("model", e, "params", f"{where}.tied_params", int))
                                          for e in (get("model", doc, "tied_params", where, list)
                                                    if "tied_params" in doc else [])),
                        )


def model_to_data(m: ModelProfile) -> dict[str, Any]:
    """Plain data of a model profile."""
    return {
        "model": m.name, "layers": m.layers, "bytes_per_value": m.bytes_per_value,
        "optimizer_bytes_per_param": m.optimizer_bytes_per_param,
        "tied_embeddings": m.tied_embeddings,
        **({"tied_params": [{"tp": t, "params": n} for t, n in m.tied_params]}
           if m.tied_params else {}),
        "sizes": [{"tp": tp, "layers": [{"params": s.params, "activation_bytes": s.activation_bytes,
                                         "activation_memory_bytes": s.activation_memory_bytes}
                                        for s in row]} for tp, row in m.sizes],
        "times": [{"gpu": g, "microbatch_size": b, "tp": t,
                   "layers": [[x.forward] if x.backward is None else
                              [x.forward, x.backward] if x.optimizer is None else
                              [x.forward, x.backward, x.optimizer] for x in row]}
                  for (g, b, t), row in m.times],
        **({"shape": {"layers": m.shape.layers, "hidden": m.shape.hidden, "heads": m.shape.heads,
                      "sequence": m.shape.sequence, "vocabulary": m.shape.vocabulary,
                      "tied": m.shape.tied,
                      **({"position_embedding": m.shape.position_embedding}
                         if m.shape.position_embedding != "learned_absolute" else {})}}
           if m.shape is not None else {}),
    }


def read_model(path: str | os.PathLike[str]) -> ModelProfile:
    """A dtsim model-profile file."""
    return model_from_data(read_document("model", path), str(path))


# --------------------------------------------------------------------------- GPUs


#: The keys of a GPU catalogue entry; any other is refused (a misspelt ``"price"`` or
#: ``"peak_tflops"`` left the GPU unpriced, or without the datasheet a shape's times need).
GPU_KEYS = ("name", "memory_bytes", "price_per_hour", "overhead_bytes", "overhead_tp1_bytes",
            "source", "intra_node_bandwidth", "peak_flops", "peak_flops_fp32", "memory_bandwidth",
            "spec_source", "peak_flops_tf32", "compute_capability", "currency")
#: A catalogue entry's numbers that take no unit, and what they count.
_PLAIN = {"price_per_hour": "dollars per GPU-hour", "peak_flops": "FLOP/s",
          "peak_flops_fp32": "FLOP/s", "peak_flops_tf32": "FLOP/s",
          "compute_capability": "CUDA compute capability, major.minor (8.0 for an A100)"}


def _plain(g: dict, key: str, at: str) -> Any:
    """``g[key]`` (None if absent): a number; text (``"$2.1/h"``, ``"312 TFLOPS"``) or a bool is
    refused naming the place and the unit the number is in (sim.units has no price or FLOP/s)."""
    value = g.get(key)
    # true/false too: a bool is an int to Python, refused below as "must be >= 0: True"
    check(not isinstance(value, (str, bool)), "gpus", f"a plain number of {_PLAIN[key]} (no "
          f"unit) at {at}.{key}", value)
    return value


def gpus_from_data(doc: Any, where: str = "gpus") -> GPUCatalogue:
    """A :class:`GPUCatalogue` from parsed data."""
    out = []
    for k, g in enumerate(get("gpus", doc, "gpus", where, list)):
        at = f"{where}.gpus[{k}]"
        check(isinstance(g, dict), "gpus", f"a table at {at}", g)
        # every price dtsim reads (here, --price, --max-price-per-hour, --price-series, a speeds
        # file's) is a plain number of US dollars and is printed as $: a currency said is USD,
        # any other refused (its prices would be printed as dollars; none is converted)
        if "currency" in g:
            check(g["currency"] == "USD", "gpus", f"USD at {at}.currency (price_per_hour is a "
                  "plain number of US dollars per GPU-hour, printed as $; dtsim converts no "
                  "currency)", g["currency"])
        unknown = sorted(set(g) - set(GPU_KEYS))
        check(not unknown, "gpus", f"GPU keys {', '.join(GPU_KEYS)} at {at}", unknown)
        # No default: 0 let a user's GPU type hold plans that the framework's own memory (CUDA
        # context, NCCL buffers, allocator reserve, kernels) would not; 0 must be said.
        check("overhead_bytes" in g, "gpus", f"an overhead_bytes at {at} (the memory the "
              "framework takes on each GPU beyond the model's tensors; the shipped types take "
              "Sailor's 3GB, 2GB at TP 1 with overhead_tp1_bytes; 0 for none)",
              g.get("name"))
        out.append(GPUType(name=get("gpus", g, "name", at, str),
                           memory_bytes=_qty("gpus", g, "memory_bytes", at, SIZE),
                           price_per_hour=_plain(g, "price_per_hour", at),
                           overhead_bytes=_qty("gpus", g, "overhead_bytes", at, SIZE),
                           overhead_tp1_bytes=_qty("gpus", g, "overhead_tp1_bytes", at, SIZE,
                                                   None),
                           source=_opt(g, "source", ""),
                           intra_node_bandwidth=_qty("gpus", g, "intra_node_bandwidth", at, RATE,
                                                     None),
                           peak_flops=_plain(g, "peak_flops", at),
                           peak_flops_fp32=_plain(g, "peak_flops_fp32", at),
                           memory_bandwidth=_qty("gpus", g, "memory_bandwidth", at, RATE, None),
                           spec_source=_opt(g, "spec_source", ""),
                           peak_flops_tf32=_plain(g, "peak_flops_tf32", at),
                           compute_capability=_plain(g, "compute_capability", at)))
    return GPUCatalogue(tuple(out))


def gpus_to_data(c: GPUCatalogue) -> dict[str, Any]:
    return {"gpus": [{k: v for k, v in (("name", g.name), ("memory_bytes", g.memory_bytes),
                                         ("price_per_hour", g.price_per_hour),
                                         ("overhead_bytes", g.overhead_bytes),
                                         ("overhead_tp1_bytes", g.overhead_tp1_bytes),
                                         ("source", g.source),
                                         ("intra_node_bandwidth", g.intra_node_bandwidth),
                                         ("peak_flops", g.peak_flops),
                                         ("peak_flops_fp32", g.peak_flops_fp32),
                                         ("memory_bandwidth", g.memory_bandwidth),
                                         ("spec_source", g.spec_source or None),
                                         ("peak_flops_tf32", g.peak_flops_tf32),
                                         ("compute_capability", g.compute_capability))
                                        if v is not None}
                     for g in c.gpus]}


def read_gpus(path: str | os.PathLike[str]) -> GPUCatalogue:
    """A GPU catalogue file."""
    return gpus_from_data(read_document("gpus", path), str(path))


# --------------------------------------------------------------------------- network, fleet


def _end(v: Any, at: str) -> tuple[str, str]:
    check(isinstance(v, dict), "network", f"a table with gpu and zone at {at}", v)
    return (get("network", v, "gpu", at, str), get("network", v, "zone", at, str))


def _gbs_curve(coefficients: list, lo: Any, hi: Any, at: str) -> BandwidthCurve:
    """A curve in GB/s of ``log2(bytes / 1e6)`` fitted on ``[lo, hi]`` bytes (the format's form)."""
    for k, v in (("min_bytes", lo), ("max_bytes", hi)):
        check(isinstance(v, _NUM) and not isinstance(v, bool), "network", f"a number of bytes "
              f"as {k} at {at}", v)
    try:
        return BandwidthCurve.polylog2(coefficients, size_unit=1e6, bandwidth_unit=1e9,
                                       min_size=lo, max_size=hi)
    except ConfigError as exc:
        raise ConfigError("network", exc.rule, f"{at}: {exc.value!r}") from None


#: The keys of a link of a network (or fleet) document; any other is refused (a misspelt
#: ``"latancy"`` would otherwise leave the link at 0 latency).
LINK_KEYS = ("src", "dst", "flows", "src_flows", "dst_flows", "bandwidth", "curve", "latency")


def _link(x: dict, at: str) -> Link:
    """One link of a network document (its table ``x``, at ``at``)."""
    unknown = sorted(set(x) - set(LINK_KEYS))
    check(not unknown, "network", f"link keys {', '.join(LINK_KEYS)} at {at}", unknown)
    flows = _opt(x, "flows", 1)
    with located("network", at):
        if "bandwidth" in x:
            curve: Any = _qty("network", x, "bandwidth", at, RATE)
        elif isinstance(x.get("curve"), str):  # the curve's text form (sim.network.curves)
            curve = as_curve(x["curve"], "network")
        else:
            c = get("network", x, "curve", at, dict)
            curve = _gbs_curve(get("network", c, "coefficients", at, list),
                               _qty("network", c, "min_bytes", at, SIZE, 2.0 ** 16),
                               _qty("network", c, "max_bytes", at, SIZE, 2.0 ** 30), at)
        return Link(_end(get("network", x, "src", at), f"{at}.src"),
                    _end(get("network", x, "dst", at), f"{at}.dst"),
                    _opt(x, "src_flows", flows), _opt(x, "dst_flows", flows), curve,
                    _qty("network", x, "latency", at, TIME, 0.0))


def _link_ends(x: dict) -> str:
    """``GPU@ZONE -> GPU@ZONE``: a link's two ends as its table gives them, to name it in a
    message ("" where they are not both tables of a gpu and a zone: their own check says so)."""
    ends = []
    for key in ("src", "dst"):
        v = x.get(key)
        if not (isinstance(v, dict) and isinstance(v.get("gpu"), str)
                and isinstance(v.get("zone"), str)):
            return ""
        ends.append(f"{v['gpu']}@{v['zone']}")
    return f"{ends[0]} -> {ends[1]}"


def network_from_data(doc: Any, where: str = "network") -> NetworkProfile:
    """A :class:`NetworkProfile` from parsed data (``links``); a bad link is named by its index
    and its two ends."""
    links = []
    seen: dict[tuple, int] = {}
    for k, x in enumerate(get("network", doc, "links", where, list)):
        at = f"{where}.links[{k}]"
        check(isinstance(x, dict), "network", f"a table at {at}", x)
        try:
            links.append(_link(x, at))
        except ConfigError as exc:
            ends = _link_ends(x)
            if not ends:
                raise
            raise ConfigError(exc.name, f"{exc.rule} (the link {ends})", exc.value) from None
        # (audit5) a link given twice: the last one was used, the first silently dropped
        y = links[-1]
        first = seen.setdefault((y.src, y.dst, y.src_flows, y.dst_flows), k)
        check(first == k, "network", f"each link once (src, dst and flows) at {where}: "
              f"links[{first}] and links[{k}] are the link {_link_ends(x)}",
              f"{y.src_flows} flows")
    return NetworkProfile(tuple(links))


def network_to_data(n: NetworkProfile) -> dict[str, Any]:
    out = []
    for x in n.links:
        d: dict[str, Any] = {"src": {"gpu": x.src[0], "zone": x.src[1]},
                             "dst": {"gpu": x.dst[0], "zone": x.dst[1]},
                             "src_flows": x.src_flows, "dst_flows": x.dst_flows}
        c = x.bandwidth
        if not isinstance(c, BandwidthCurve):
            d["bandwidth"] = c
        elif (c.kind == "polylog2" and c.size_unit == 1e6 and c.bandwidth_unit == 1e9
              and c.min_size is not None and c.max_size is not None):
            d["curve"] = {"coefficients": list(c.coefficients), "min_bytes": c.min_size,
                          "max_bytes": c.max_size}
        else:
            d["curve"] = c.text()
        if x.latency:
            d["latency"] = x.latency
        out.append(d)
    return {"links": out}


def read_network(path: str | os.PathLike[str]) -> NetworkProfile:
    """A dtsim network file."""
    return network_from_data(read_document("network", path), str(path))


#: The keys of a fleet and of one of its nodes; any other is refused (a typo such as
#: ``"cuont"`` would otherwise leave its value unused and the count at 1).
FLEET_KEYS = ("nodes", "links")
FLEET_NODE_KEYS = ("gpu", "gpus_per_node", "zone", "count")


#: GPUs per node and node counts of a fleet are below this (``--nodes GPU:GxN@zone`` reads at
#: most nine digits each: :func:`sim.planner.fleets.parse_nodes`).
MAX_NODE_NUMBER = 10**9


def fleet_from_data(doc: Any, where: str = "fleet") -> Fleet:
    """A :class:`Fleet` from parsed data (``nodes`` and optional ``links``; no other key)."""
    nodes = []
    if isinstance(doc, dict):
        unknown = sorted(set(doc) - set(FLEET_KEYS))
        check(not unknown, "fleet", f"a table of {', '.join(FLEET_KEYS)} (no other key) at "
              f"{where}", unknown)
    for k, x in enumerate(get("fleet", doc, "nodes", where, list)):
        at = f"{where}.nodes[{k}]"
        check(isinstance(x, dict), "fleet", f"a table at {at}", x)
        unknown = sorted(set(x) - set(FLEET_NODE_KEYS))
        check(not unknown, "fleet", f"node keys {', '.join(FLEET_NODE_KEYS)} at {at}", unknown)
        gpn, count = get("fleet", x, "gpus_per_node", at, int), _opt(x, "count", 1)
        with located("fleet", at):  # the node kind's own rules (gpus_per_node >= 1, count >= 0)
            kind = NodeKind(get("fleet", x, "gpu", at, str), gpn, _opt(x, "zone", "default"))
            check_int("count", count, low=0)
        for key, v in (("gpus_per_node", gpn), ("count", count)):  # as --nodes GPU:GxN@zone
            check(v < MAX_NODE_NUMBER, "fleet", f"GPUs per node and counts below 10^9 (as "
                  f"--nodes) for {key} at {at}", v)
        nodes.append((kind, count))
    net = network_from_data(doc, where) if isinstance(doc, dict) and "links" in doc else NetworkProfile(())
    return Fleet(tuple(nodes), net)


def fleet_to_data(f: Fleet) -> dict[str, Any]:
    return {"nodes": [{"gpu": k.gpu, "gpus_per_node": k.gpus_per_node, "zone": k.zone, "count": n}
                      for k, n in f.nodes], **network_to_data(f.network)}


def fleet_network(own: NetworkProfile, profiles_network: NetworkProfile) -> NetworkProfile:
    """A fleet file's links where it gives them: every ordered pair of node kinds (GPU type and
    zone) the file names takes all its links from the file; the other pairs keep the profiles'."""
    named = {(x.src, x.dst) for x in own.links}
    return NetworkProfile(tuple(own.links) + tuple(x for x in profiles_network.links
                                            if (x.src, x.dst) not in named))


def with_fleet(profiles: Profiles, fleet: str | os.PathLike[str] | Fleet) -> Profiles:
    """``profiles`` with a fleet file's links (``dtsim plan --fleet`` and ``dtsim train --plan
    --fleet``: a script times a plan on the links the planner searched it on)."""
    import dataclasses

    f = fleet if isinstance(fleet, Fleet) else read_fleet(fleet)
    return dataclasses.replace(profiles, network=fleet_network(f.network, profiles.network))


def read_fleet(path: str | os.PathLike[str]) -> Fleet:
    """A fleet file."""
    return fleet_from_data(read_document("fleet", path), str(path))


# --------------------------------------------------------------------------- profiles folder


def _first(folder: Path, stem: str) -> Path | None:
    for ext in (".json", ".toml"):
        p = folder / (stem + ext)
        if p.is_file():
            return p
    return None


def load_profiles(folder: str | os.PathLike[str] | None = None,
                  models: tuple[str, ...] | None = None) -> Profiles:
    """The model profiles, GPU catalogue and network of a profiles folder (default: the shipped one).

    ``models`` restricts the model profiles read to those named (reading
    every model of the shipped folder takes about a second). A folder is read
    once per process while its files are unchanged.

    Raises
    ------
    ConfigError
        Naming ``profiles``: not a folder, no GPU catalogue, or no model.
    """
    d = Path(folder) if folder is not None else DATA_DIR
    check(d.is_dir(), "profiles", "a folder of profiles", str(d))
    try:
        stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                      for p in sorted(d.rglob("*")) if p.is_file())
    except OSError:
        stamp = None
    key = (str(d.resolve()), stamp, None if models is None else tuple(sorted(models)))
    hit = _CACHE.get(key) if stamp is not None else None
    if hit is not None:
        return hit
    out = _load(d, models)
    if stamp is not None:
        if len(_CACHE) >= 8:
            _CACHE.clear()
        _CACHE[key] = out
    return out


_CACHE: dict[tuple, Profiles] = {}


def _load(d: Path, names: tuple[str, ...] | None) -> Profiles:
    # a folder without a catalogue of its own takes dtsim's (the GPU types' datasheet facts and
    # the Sailor artifact's overheads: sim/profiles/data/gpus.json)
    gp = _first(d, "gpus") or _first(DATA_DIR, "gpus")
    check(gp is not None, "profiles", "a folder with a GPU catalogue (gpus.json or gpus.toml)",
          str(d))
    gpus = read_gpus(gp)  # type: ignore[arg-type]
    models: list[ModelProfile] = []
    if (d / "profiles.json").is_file() and (d / "llm_info.json").is_file():
        models.extend(sailor.read_models(d / "profiles.json", d / "llm_info.json", names))
    mdir = d / "models"
    if mdir.is_dir():
        for p in sorted(mdir.iterdir()):
            if p.suffix.lower() in (".json", ".toml") and p.is_file():
                m = read_model(p)
                if names is None or m.name in names:
                    models.append(m)
    if names is not None:
        missing = sorted(set(names) - {m.name for m in models})
        if missing:
            every = sorted({m.name for m in _load(d, None).models})
            raise ConfigError("model", f"a model of the profiles ({', '.join(every)}) in {d}",
                              missing[0])
    check(bool(models), "profiles", "a folder with model profiles (profiles.json and llm_info.json, "
          "or models/*.json)", str(d))
    links: list[Link] = []
    if (d / "bandwidths.json").is_file():
        links.extend(sailor.read_sailor_network(d / "bandwidths.json").links)
    npath = _first(d, "network")
    if npath is not None:
        links.extend(read_network(npath).links)
    intra = ()
    if (d / "intra_node_bandwidths.json").is_file():
        intra = sailor.read_intra_node(d / "intra_node_bandwidths.json")
    try:
        return Profiles(models=tuple(models), gpus=gpus, network=NetworkProfile(tuple(links)),
                        source=str(d), intra_node=intra)
    except ConfigError as exc:
        raise ConfigError("profiles", exc.rule, f"{d}: {exc.value}") from None


def read_runs(folder: str | os.PathLike[str] | None = None) -> tuple[MeasuredRun, ...]:
    """The measured runs of a profiles folder's ``runs/`` (Sailor run files), by name."""
    d = (Path(folder) if folder is not None else DATA_DIR) / "runs"
    if not d.is_dir():
        return ()
    return tuple(sailor.read_run(p) for p in sorted(d.glob("*.json")))
