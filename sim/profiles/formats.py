"""dtsim's own formats (JSON or TOML) for plans, model profiles, GPU catalogues, networks and fleets.

Each reader takes a file (``.json`` or ``.toml``, chosen by the suffix) or
already parsed data (``*_from_data``), and each writer gives plain data that
``json.dump`` writes. Field names are the values' (:mod:`sim.profiles.values`).

Plan::

    model = "OPT-350"              # optional; --model names it otherwise
    microbatch_size = 8
    global_batch_size = 1024
    [[stages]]
    first_layer = 0                # or: layers = [0, 1, 2, ...]
    last_layer = 11
    replicas = [{gpu = "GH-96", tp = 4, gpus_per_node = 4, zone = "us-central1-a", count = 8}]

A plan file may also be a Sailor ``plan_config`` (it has ``pipeline_list``).

Model profile::

    {"model": "M", "layers": 2, "bytes_per_value": 4, "optimizer_bytes_per_param": 8,
     "tied_embeddings": false,
     "sizes": [{"tp": 1, "layers": [{"params": 10, "activation_bytes": 4096,
                                    "activation_memory_bytes": 8192}, ...]}],
     "times": [{"gpu": "A", "microbatch_size": 1, "tp": 1,
                "layers": [[forward, backward, optimizer], ...]}]}

GPU catalogue::

    {"gpus": [{"name": "A", "memory_bytes": 2.5e10, "price_per_hour": 1.5,
               "overhead_bytes": 3e9, "overhead_tp1_bytes": 2e9, "source": "..."}]}

Network (``bandwidth`` in bytes per second, or a ``curve`` in GB/s of
``log2(bytes / 1e6)``, highest power first)::

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
"64KiB"``, ``"activation_bytes": "1.5MiB"``.

A profiles folder (:func:`load_profiles`) holds ``gpus.json`` (or
``.toml``), and model profiles and links in either format: the Sailor
artifact's ``profiles.json`` with ``llm_info.json`` and ``bandwidths.json``,
and dtsim's ``models/*.json|toml`` and ``network.json|toml``; its ``runs/``
holds measured runs (Sailor run files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check
from ..units import RATE, SIZE, TIME, describe, parse_quantity
from . import sailor
from .documents import get, located, read_document
from .values import (
    BandwidthCurve,
    Fleet,
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    Link,
    MeasuredRun,
    ModelProfile,
    Network,
    NodeKind,
    Plan,
    Profiles,
    ReplicaSpec,
    StageSpec,
)

__all__ = [
    "plan_from_data", "plan_to_data", "read_plan",
    "model_from_data", "model_to_data", "read_model",
    "gpus_from_data", "gpus_to_data", "read_gpus",
    "network_from_data", "network_to_data", "read_network",
    "fleet_from_data", "fleet_to_data", "read_fleet",
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


# --------------------------------------------------------------------------- plan

#: The keys of a dtsim plan, of one of its stages; any other is refused (a typo would
#: otherwise leave its value unused).
PLAN_KEYS = ("model", "microbatch_size", "global_batch_size", "stages")
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
            unknown = set(r) - {"gpu", "tp", "gpus_per_node", "zone", "count"}
            check(not unknown, "plan", f"replica keys gpu, tp, gpus_per_node, zone, count at {rat}",
                  sorted(unknown))
            count = _opt(r, "count", 1)
            check(isinstance(count, int) and not isinstance(count, bool) and count >= 1, "plan",
                  f"a count >= 1 at {rat}", count)
            spec = ReplicaSpec(gpu=get("plan", r, "gpu", rat, str), tp=_opt(r, "tp", 1),
                               gpus_per_node=_opt(r, "gpus_per_node", None),
                               zone=_opt(r, "zone", "default"))
            reps.extend([spec] * count)
        stages.append(StageSpec(layers=layers, replicas=tuple(reps)))
    m = _opt(doc, "model", None)
    if model is not None:
        m = model
    return Plan(stages=tuple(stages), microbatch_size=get("plan", doc, "microbatch_size", where, int),
                global_batch_size=get("plan", doc, "global_batch_size", where, int), model=m)


def plan_to_data(plan: Plan) -> dict[str, Any]:
    """Plain data of ``plan`` (consecutive equal replicas grouped with a count)."""
    stages = []
    for st in plan.stages:
        groups: list[dict[str, Any]] = []
        for r in st.replicas:
            d = {"gpu": r.gpu, "tp": r.tp, "gpus_per_node": r.gpus_per_node, "zone": r.zone}
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
    return out


def read_plan(path: str | os.PathLike[str], model: str | None = None) -> Plan:
    """A plan file: dtsim's format (JSON/TOML) or a Sailor ``plan_config``."""
    return plan_from_data(read_document("plan", path), str(path), model)


# --------------------------------------------------------------------------- model profile


def model_from_data(doc: Any, where: str = "model") -> ModelProfile:
    """A :class:`ModelProfile` from parsed dtsim model-profile data."""
    check(isinstance(doc, dict), "model", "a JSON/TOML table", where)
    sizes = []
    for k, e in enumerate(get("model", doc, "sizes", where, list)):
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
    for k, e in enumerate(get("model", doc, "times", where, list)):
        at = f"{where}.times[{k}]"
        rows = []
        for i, x in enumerate(get("model", e, "layers", at, list)):
            check(isinstance(x, list) and len(x) in (2, 3)
                  and all(isinstance(v, _NUM) and not isinstance(v, bool) for v in x), "model",
                  f"[forward, backward(, optimizer)] seconds at {at}.layers[{i}]", x)
            with located("model", f"{at}.layers[{i}]"):
                rows.append(LayerTimes(*x))
        times.append(((get("model", e, "gpu", at, str), get("model", e, "microbatch_size", at, int),
                       get("model", e, "tp", at, int)), tuple(rows)))
    return ModelProfile(name=get("model", doc, "model", where, str),
                        layers=get("model", doc, "layers", where, int), times=tuple(times),
                        sizes=tuple(sizes), bytes_per_value=_opt(doc, "bytes_per_value", 4),
                        optimizer_bytes_per_param=_opt(doc, "optimizer_bytes_per_param", 8.0),
                        tied_embeddings=_opt(doc, "tied_embeddings", False))


def model_to_data(m: ModelProfile) -> dict[str, Any]:
    """Plain data of a model profile."""
    return {
        "model": m.name, "layers": m.layers, "bytes_per_value": m.bytes_per_value,
        "optimizer_bytes_per_param": m.optimizer_bytes_per_param,
        "tied_embeddings": m.tied_embeddings,
        "sizes": [{"tp": tp, "layers": [{"params": s.params, "activation_bytes": s.activation_bytes,
                                         "activation_memory_bytes": s.activation_memory_bytes}
                                        for s in row]} for tp, row in m.sizes],
        "times": [{"gpu": g, "microbatch_size": b, "tp": t,
                   "layers": [[x.forward, x.backward, x.optimizer] for x in row]}
                  for (g, b, t), row in m.times],
    }


def read_model(path: str | os.PathLike[str]) -> ModelProfile:
    """A dtsim model-profile file."""
    return model_from_data(read_document("model", path), str(path))


# --------------------------------------------------------------------------- GPUs


def gpus_from_data(doc: Any, where: str = "gpus") -> GPUCatalogue:
    """A :class:`GPUCatalogue` from parsed data."""
    out = []
    for k, g in enumerate(get("gpus", doc, "gpus", where, list)):
        at = f"{where}.gpus[{k}]"
        check(isinstance(g, dict), "gpus", f"a table at {at}", g)
        out.append(GPUType(name=get("gpus", g, "name", at, str),
                           memory_bytes=_qty("gpus", g, "memory_bytes", at, SIZE),
                           price_per_hour=_opt(g, "price_per_hour", None),
                           overhead_bytes=_qty("gpus", g, "overhead_bytes", at, SIZE, 0.0),
                           overhead_tp1_bytes=_qty("gpus", g, "overhead_tp1_bytes", at, SIZE,
                                                   None),
                           source=_opt(g, "source", "")))
    return GPUCatalogue(tuple(out))


def gpus_to_data(c: GPUCatalogue) -> dict[str, Any]:
    return {"gpus": [{k: v for k, v in (("name", g.name), ("memory_bytes", g.memory_bytes),
                                         ("price_per_hour", g.price_per_hour),
                                         ("overhead_bytes", g.overhead_bytes),
                                         ("overhead_tp1_bytes", g.overhead_tp1_bytes),
                                         ("source", g.source)) if v is not None}
                     for g in c.gpus]}


def read_gpus(path: str | os.PathLike[str]) -> GPUCatalogue:
    """A GPU catalogue file."""
    return gpus_from_data(read_document("gpus", path), str(path))


# --------------------------------------------------------------------------- network, fleet


def _end(v: Any, at: str) -> tuple[str, str]:
    check(isinstance(v, dict), "network", f"a table with gpu and zone at {at}", v)
    return (get("network", v, "gpu", at, str), get("network", v, "zone", at, str))


def network_from_data(doc: Any, where: str = "network") -> Network:
    """A :class:`Network` from parsed data (``links``)."""
    links = []
    for k, x in enumerate(get("network", doc, "links", where, list)):
        at = f"{where}.links[{k}]"
        check(isinstance(x, dict), "network", f"a table at {at}", x)
        flows = _opt(x, "flows", 1)
        with located("network", at):
            if "bandwidth" in x:
                curve = BandwidthCurve(bandwidth=_qty("network", x, "bandwidth", at, RATE))
            else:
                c = get("network", x, "curve", at, dict)
                curve = BandwidthCurve(coefficients=tuple(get("network", c, "coefficients", at,
                                                              list)),
                                       min_bytes=_qty("network", c, "min_bytes", at, SIZE,
                                                      2.0 ** 16),
                                       max_bytes=_qty("network", c, "max_bytes", at, SIZE,
                                                      2.0 ** 30))
            links.append(Link(_end(get("network", x, "src", at), f"{at}.src"),
                              _end(get("network", x, "dst", at), f"{at}.dst"),
                              _opt(x, "src_flows", flows), _opt(x, "dst_flows", flows), curve,
                              _qty("network", x, "latency", at, TIME, 0.0)))
    return Network(tuple(links))


def network_to_data(n: Network) -> dict[str, Any]:
    out = []
    for x in n.links:
        d: dict[str, Any] = {"src": {"gpu": x.src[0], "zone": x.src[1]},
                             "dst": {"gpu": x.dst[0], "zone": x.dst[1]},
                             "src_flows": x.src_flows, "dst_flows": x.dst_flows}
        if x.curve.bandwidth is not None:
            d["bandwidth"] = x.curve.bandwidth
        else:
            d["curve"] = {"coefficients": list(x.curve.coefficients or ()),
                          "min_bytes": x.curve.min_bytes, "max_bytes": x.curve.max_bytes}
        if x.latency:
            d["latency"] = x.latency
        out.append(d)
    return {"links": out}


def read_network(path: str | os.PathLike[str]) -> Network:
    """A dtsim network file."""
    return network_from_data(read_document("network", path), str(path))


def fleet_from_data(doc: Any, where: str = "fleet") -> Fleet:
    """A :class:`Fleet` from parsed data (``nodes`` and optional ``links``)."""
    nodes = []
    for k, x in enumerate(get("fleet", doc, "nodes", where, list)):
        at = f"{where}.nodes[{k}]"
        check(isinstance(x, dict), "fleet", f"a table at {at}", x)
        nodes.append((NodeKind(get("fleet", x, "gpu", at, str), get("fleet", x, "gpus_per_node",
                                                                      at, int),
                               _opt(x, "zone", "default")), _opt(x, "count", 1)))
    net = network_from_data(doc, where) if isinstance(doc, dict) and "links" in doc else Network(())
    return Fleet(tuple(nodes), net)


def fleet_to_data(f: Fleet) -> dict[str, Any]:
    return {"nodes": [{"gpu": k.gpu, "gpus_per_node": k.gpus_per_node, "zone": k.zone, "count": n}
                      for k, n in f.nodes], **network_to_data(f.network)}


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
    gp = _first(d, "gpus")
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
        links.extend(sailor.read_network(d / "bandwidths.json").links)
    npath = _first(d, "network")
    if npath is not None:
        links.extend(read_network(npath).links)
    try:
        return Profiles(models=tuple(models), gpus=gpus, network=Network(tuple(links)),
                        source=str(d))
    except ConfigError as exc:
        raise ConfigError("profiles", exc.rule, f"{d}: {exc.value}") from None


def read_runs(folder: str | os.PathLike[str] | None = None) -> tuple[MeasuredRun, ...]:
    """The measured runs of a profiles folder's ``runs/`` (Sailor run files), by name."""
    d = (Path(folder) if folder is not None else DATA_DIR) / "runs"
    if not d.is_dir():
        return ()
    return tuple(sailor.read_run(p) for p in sorted(d.glob("*.json")))
