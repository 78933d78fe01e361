"""Readers of the Sailor artifact's formats (eth-easl/sailor, MIT licence).

The artifact (Strati et al., "Sailor: Automating Distributed Training over
Dynamic, Heterogeneous, and Geo-distributed Clusters", SOSP 2025) stores:

``profiles.json``
    model -> GPU type -> micro-batch size -> TP degree -> layer -> ``[forward,
    backward, optimizer]`` seconds. The forward and backward times are the
    layer's. The third number is not the layer's: the artifact's profiler
    (its Megatron-DeepSpeed ``training.py``) writes the mean time of one
    optimizer step of the model it profiled into every layer's entry. That
    model held the first layer, two transformer layers and the last layer(s);
    :func:`read_sailor_model` spreads the step over those layers' parameters (time per
    parameter, Adam being memory bound) and gives each layer its share, so a
    stage's optimizer time is the sum over its layers.
``llm_info.json``
    model -> TP degree -> layer -> ``params_floats`` (the layer's parameters on
    one GPU of the TP group), ``act_output_bytes`` (the layer's output for one
    sample, what a stage sends on), ``act_mem_bytes`` (memory the forward pass
    allocated and kept, per sample), measured at micro-batch size 1; the
    ratios ``params_bytes / params_floats`` and ``act_output_bytes /
    act_output_floats`` say the bytes per value the model trained in (4 in
    the shipped profiles: fp32; 2 for fp16 or bf16).
``bandwidths.json``
    zone -> GPU type -> GPUs per node -> zone -> GPU type -> GPUs per node ->
    ``[coefficients, max]``: the aggregate NCCL send/recv bandwidth of that many
    concurrent GPU pairs between two such nodes, ``GB/s = polyval(coefficients,
    log2(bytes / 1e6))``, fitted on messages of ``2**16`` to ``2**30`` bytes
    (its ``profiling/networking/run_all.py``); the second number is unused.
a run's ``plan_config``
    (run by the artifact's DeepSpeed 0.16.5 with its modified pipeline engine:
    :data:`~sim.profiles.frameworks.SAILOR_FRAMEWORK`)
    ``pipeline_list[0]`` with ``num_stages``, ``layers_per_stage``,
    ``tmp_per_stage`` (per stage, per replica ``[[[gpu, gpus_per_node, zone]],
    tp]``) and ``dp``; ``mbs``, ``gbs``; and what was measured: ``real``
    (iteration time, seconds), ``max_mem`` (peak GPU memory, bytes),
    ``red_grads`` (gradient reduction, seconds).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check
from ..network.curves import BandwidthCurve
from .documents import get, located, read_document
from .frameworks import SAILOR_FRAMEWORK, FrameworkSpec
from .values import (
    LayerSizes,
    LayerTimes,
    Link,
    MeasuredRun,
    ModelProfile,
    NetworkProfile,
    Plan,
    ReplicaSpec,
    StageSpec,
)

__all__ = ["read_models", "read_sailor_model", "read_sailor_network", "read_sailor_plan",
           "read_run", "is_sailor_plan", "untied_tail_layers", "ties_embeddings", "sailor_curve",
           "read_intra_node"]

#: The artifact's bandwidth fits cover messages of 2**16 to 2**30 bytes.
FIT_MIN_BYTES, FIT_MAX_BYTES = 2.0 ** 16, 2.0 ** 30


#: Pipeline model of each model family the artifact knows (name prefix, upper case), as its
#: Megatron-DeepSpeed (paths below under eth-easl/sailor cf2c8e3 third_party/Megatron-DeepSpeed/)
#: picks it by ``--model-name`` (train_llm.py:53-85, the same in pretrain_gpt.py:51-85, which its
#: profiler runs; the shipped runs pass ``--model-name OPT``, sailor/Worker/run_agent.sh:67; the
#: profiler maps OPT-350 and OPT-30 to "OPT", GPT-Neo-2.7 to "GPT-Neo", LLAMA-3-8 to "LLAMA":
#: profile_all.py:15-20), with the layers after the transformer layers (each a ``LayerSpec``, no
#: ``TiedLayerSpec``, so none shares a weight with the embedding and no tied gradient is
#: all-reduced): ``OPTModelPipe`` ends with ``OPTLMHeadPipe``, a final LayerNorm and a
#: ColumnParallelLinear vocab x hidden head of its own (megatron/model/opt_model.py:49-80, 629,
#: 657-661; llm_info's last OPT-350 layer holds 51,513,344 parameters at TP 1: padded vocabulary
#: 50,304 x 1,024 + 2,048); ``GPTNeoModelPipe`` ends with a LayerNorm and no head
#: (gpt_neo_model.py:584-585; 5,120 parameters); ``LlamaModelPipe`` with an RMSNorm and
#: ``LlamaLMHeadPipe`` (llama_model.py:893-903).
_UNTIED_FAMILIES = (("GPT-NEO", 1), ("LLAMA", 2), ("OPT", 1))


def untied_tail_layers(model: str) -> int:
    """Layers after the transformer layers whose parameters the profiled optimizer step held.

    The artifact's profiler builds the model it runs (its ``training.py`` keeps
    ``use_last`` true unless profiling for Varuna: megatron/training.py:570-576)
    with two transformer layers (profile.sh:8, ``--num_prof_layers 2``): the
    embedding, two transformer layers and the layers after them, which its
    profile copies into the last layer(s) (training.py:430-450). OPT's tail is
    its head (1: final LayerNorm and its own vocab x hidden weight), GPT-Neo's
    its final LayerNorm (1), LLaMA's an RMSNorm and a head (2); see
    :data:`_UNTIED_FAMILIES`. A model of another name is taken as the
    artifact's ``GPTModelPipe`` (``--model-name GPT``), which ties its head to
    the embedding unless ``--untie-embeddings-and-output-weights`` (a
    ``TiedLayerSpec``, megatron/model/gpt_model.py:353, 406-423), so the head
    adds no parameters of its own (0).
    """
    name = model.upper()
    for prefix, tail in _UNTIED_FAMILIES:
        if name.startswith(prefix):
            return tail
    return 0


def ties_embeddings(model: str) -> bool:
    """Whether the artifact's pipeline model of that name ties its output head to the embedding.

    Only ``GPTModelPipe`` does (``TiedLayerSpec('embed', ...)`` first and last,
    megatron/model/gpt_model.py:353, 406-423, unless the launch unties them):
    DeepSpeed then all-reduces the tied weight's gradient between the first
    and the last stage. OPT, GPT-Neo and LLaMA build every layer with
    ``LayerSpec`` (:data:`_UNTIED_FAMILIES`): no tied weight, no such
    all-reduce.
    """
    name = model.upper()
    return not any(name.startswith(prefix) for prefix, _ in _UNTIED_FAMILIES)


def _profiled_params(sizes: tuple[LayerSizes, ...], tail: int) -> int:
    """Parameters of the model the artifact's profiler timed: first layer, two transformer
    layers, and the untied tail."""
    n = len(sizes)
    idx = [0, 1, 2] + list(range(n - tail, n))
    return sum(sizes[i].params for i in idx if 0 <= i < n)


def read_models(profiles_path: str | os.PathLike[str], llm_info_path: str | os.PathLike[str],
                names: tuple[str, ...] | None = None) -> tuple[ModelProfile, ...]:
    """Every model (or those named) of ``profiles.json`` with its sizes from ``llm_info.json``."""
    prof = read_document("profiles", profiles_path)
    info = read_document("profiles", llm_info_path)
    check(isinstance(prof, dict), "profiles", "a JSON object of models", str(profiles_path))
    check(isinstance(info, dict), "profiles", "a JSON object of models", str(llm_info_path))
    out = []
    for name in sorted(prof):
        if names is not None and name not in names:
            continue
        if name not in info:
            continue  # no sizes: the model cannot be placed (memory, transfers)
        out.append(_model(name, prof[name], info[name], str(profiles_path)))
    return tuple(out)


def read_sailor_model(profiles_path: str | os.PathLike[str], llm_info_path: str | os.PathLike[str],
               name: str) -> ModelProfile:
    """One model of the artifact's ``profiles.json`` and ``llm_info.json``."""
    models = read_models(profiles_path, llm_info_path, (name,))
    check(len(models) == 1, "model", f"a model of {profiles_path} with sizes in {llm_info_path}",
          name)
    return models[0]


def _model(name: str, prof: Any, info: Any, where: str) -> ModelProfile:
    check(isinstance(info, dict) and info, "profiles", f"TP degrees of {name} in llm_info", where)
    sizes: dict[int, tuple[LayerSizes, ...]] = {}
    n = None
    for tp_s, layers in info.items():
        tp = _int_key("profiles", tp_s, f"llm_info.{name}")
        check(isinstance(layers, dict) and layers, "profiles", f"layers of {name} at tp {tp}",
              where)
        count = len(layers)
        n = count if n is None else n
        check(count == n, "profiles", f"the same number of layers at every TP degree ({n})",
              f"{name} tp {tp}: {count}")
        row = []
        for i in range(count):
            e = get("profiles", layers, str(i), f"llm_info.{name}.{tp}", dict)
            at = f"llm_info.{name}.{tp}.{i}"
            params = get("profiles", e, "params_floats", at, (int, float))
            check(math.isfinite(params) and params >= 0, "profiles",
                  f"a finite params_floats >= 0 at {at}", params)
            with located("profiles", at):
                row.append(LayerSizes(
                    params=int(params),
                    activation_bytes=float(get("profiles", e, "act_output_bytes", at,
                                               (int, float))),
                    activation_memory_bytes=float(get("profiles", e, "act_mem_bytes", at,
                                                      (int, float)))))
        sizes[tp] = tuple(row)
    assert n is not None
    bpv, act_bpv = _value_bytes(info)
    tail = untied_tail_layers(name)
    times = []
    check(isinstance(prof, dict), "profiles", f"GPU types of {name}", where)
    for gpu in sorted(prof):
        mbss = prof[gpu]
        check(isinstance(mbss, dict), "profiles", f"an object of micro-batch sizes at "
              f"{name}.{gpu}", _what(mbss))
        for mbs_s in sorted(mbss, key=_key_order):
            mbs = _int_key("profiles", mbs_s, f"{name}.{gpu}")
            tps = mbss[mbs_s]
            check(isinstance(tps, dict), "profiles", f"an object of TP degrees at "
                  f"{name}.{gpu}.{mbs}", _what(tps))
            for tp_s in sorted(tps, key=_key_order):
                tp = _int_key("profiles", tp_s, f"{name}.{gpu}.{mbs}")
                if tp not in sizes:
                    continue  # times without sizes at that TP: not usable
                layers = tps[tp_s]
                at = f"{name}.{gpu}.{mbs}.{tp}"
                check(isinstance(layers, dict) and len(layers) == n, "profiles",
                      f"{n} layers at {at}", len(layers) if isinstance(layers, dict) else layers)
                raw = []
                for i in range(n):
                    v = get("profiles", layers, str(i), at, list)
                    check(len(v) == 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                              for x in v), "profiles",
                          f"[forward, backward, optimizer] at {at}.{i}", v)
                    raw.append(v)
                step = raw[0][2]  # the profiled model's optimizer step, copied into every layer
                per_param = step / max(_profiled_params(sizes[tp], tail), 1)
                with located("profiles", at):
                    row = tuple(LayerTimes(f, b, per_param * sizes[tp][i].params)
                                for i, (f, b, _o) in enumerate(raw))
                times.append(((gpu, mbs, tp), row))
    # only GPTModelPipe ties (ties_embeddings). Its tied weight is Megatron's word embedding
    # (TiedLayerSpec 'embed', tied_weight_attr='word_embeddings_weight'): the first layer's
    # parameters less the learned position embedding (max_position x hidden, not split over
    # TP), which the artifact's runs set to the sequence length (run_agent.sh
    # --max-position-embeddings 2048 --seq-length 2048): the first layer's output per sample,
    # seq x hidden values
    tied = ties_embeddings(name)
    tied_params = tuple((tp, row[0].params - round(row[0].activation_bytes / act_bpv))
                        for tp, row in sorted(sizes.items())) if tied else ()
    # Adam's state beyond the weight and its gradient: its two fp32 moments (8 bytes), and with
    # 2-byte weights the fp32 master copy too (12: Rajbhandari et al., SC 2020, section 3.1)
    return ModelProfile(name=name, layers=n, times=tuple(times),
                        sizes=tuple(sorted(sizes.items())), bytes_per_value=bpv,
                        optimizer_bytes_per_param=8.0 if bpv == 4 else 12.0,
                        tied_embeddings=tied, tied_params=tied_params)


def _value_bytes(info: dict) -> tuple[int, float]:
    """Bytes per weight and per activation value as the profiled model trained: the first
    layer's ``params_bytes / params_floats`` and ``act_output_bytes / act_output_floats`` at its
    smallest TP degree (4 and 4 in the shipped fp32 profiles; 2 for fp16 or bf16); 4 where the
    document does not give both."""
    tp = min(info, key=lambda k: int(k) if _is_count(k) else 1 << 30)
    first = info[tp].get("0") if isinstance(info[tp], dict) else None
    out = []
    for b, f in (("params_bytes", "params_floats"), ("act_output_bytes", "act_output_floats")):
        v = 4.0
        if isinstance(first, dict) and isinstance(first.get(b), (int, float)) \
                and isinstance(first.get(f), (int, float)) and first[f] > 0:
            v = float(first[b]) / first[f]
        out.append(v)
    w = out[0]
    return (2 if abs(w - 2) < 0.5 else 4), out[1]


def _is_count(s: Any) -> bool:
    """A key written with the digits 0-9 only (``"²"`` is a digit to ``str.isdigit``, not to int)."""
    return isinstance(s, str) and 0 < len(s) <= 18 and s.isascii() and s.isdigit()


def _key_order(s: Any) -> int:
    return int(s) if _is_count(s) else 0


def _what(v: Any) -> Any:
    """A JSON value for a message: a number as it is, a list or an object by its kind."""
    return type(v).__name__ if isinstance(v, (dict, list)) else v


def _int_key(name: str, s: Any, where: str) -> int:
    check(_is_count(s) and int(s) >= 1, name, f"positive integer keys at {where}", s)
    return int(s)


def read_sailor_network(path: str | os.PathLike[str]) -> NetworkProfile:
    """The artifact's ``bandwidths.json`` as links (aggregate curves per flow count)."""
    doc = read_document("network", path)
    check(isinstance(doc, dict), "network", "a JSON object of zones", str(path))
    links = []
    for z1, g1s in doc.items():
        for g1, n1s in _obj(g1s, f"{z1}").items():
            for n1, z2s in _obj(n1s, f"{z1}.{g1}").items():
                k1 = _int_key("network", n1, f"{z1}.{g1}")
                for z2, g2s in _obj(z2s, f"{z1}.{g1}.{n1}").items():
                    for g2, n2s in _obj(g2s, f"{z1}.{g1}.{n1}.{z2}").items():
                        for n2, v in _obj(n2s, f"{z1}.{g1}.{n1}.{z2}.{g2}").items():
                            k2 = _int_key("network", n2, f"{z1}.{g1}.{n1}.{z2}.{g2}")
                            at = f"{z1}.{g1}.{n1}.{z2}.{g2}.{n2}"
                            check(isinstance(v, list) and v and isinstance(v[0], list), "network",
                                  f"[coefficients, max] at {at}", v)
                            links.append(Link((g1, z1), (g2, z2), k1, k2, sailor_curve(
                                v[0], at)))
    return NetworkProfile(tuple(links))


def sailor_curve(coefficients: Any, where: str = "") -> BandwidthCurve:
    """The artifact's fit as a curve: GB/s ``= polyval(coefficients, log2(bytes / 1e6))``, fitted
    on ``2**16`` to ``2**30`` bytes (:data:`FIT_MIN_BYTES`, :data:`FIT_MAX_BYTES`).

    Raises
    ------
    ConfigError
        Naming ``network`` (and ``where``) for coefficients that are not a list of numbers.
    """
    check(isinstance(coefficients, (list, tuple)), "network", "a list of coefficients",
          f"{where}: {coefficients!r}" if where else coefficients)
    try:
        return BandwidthCurve.polylog2(coefficients, size_unit=1e6, bandwidth_unit=1e9,
                                       min_size=FIT_MIN_BYTES, max_size=FIT_MAX_BYTES)
    except ConfigError as exc:
        raise ConfigError("network", exc.rule, f"{where}: {exc.value!r}" if where
                          else exc.value) from None


def _obj(v: Any, where: str) -> dict:
    check(isinstance(v, dict), "network", f"a JSON object at {where}", type(v).__name__)
    return v


def read_intra_node(path: str | os.PathLike[str]) -> tuple[tuple[str, int, BandwidthCurve], ...]:
    """The artifact's ``intra_node_bandwidths.json``: per GPU type and GPU count ``k`` of one node,
    the aggregate send/recv bandwidth of its ``k/2`` GPU pairs measured at once (the artifact's
    ``profiling/networking/test_sendrecv.py`` run on one node: ranks below ``k/2`` send to the
    rank ``k/2`` above, the total bytes over the time), fitted as the inter-node curves."""
    doc = read_document("network", path)
    check(isinstance(doc, dict), "network", "a JSON object of GPU types", str(path))
    out = []
    for gpu, per in doc.items():
        for k_s, v in _obj(per, str(gpu)).items():
            k = _int_key("network", k_s, f"{gpu}")
            check(k >= 2, "network", f"2 or more GPUs at {gpu}", k)
            check(isinstance(v, list) and v and isinstance(v[0], list), "network",
                  f"[coefficients, max] at {gpu}.{k}", v)
            out.append((gpu, k, sailor_curve(v[0], f"{path}: {gpu}.{k}")))
    return tuple(sorted(out, key=lambda e: (e[0], e[1])))


def is_sailor_plan(doc: Any) -> bool:
    """Whether a parsed document is a Sailor ``plan_config`` (it has ``pipeline_list``)."""
    return isinstance(doc, dict) and "pipeline_list" in doc


def plan_from_sailor(doc: Any, where: str, model: str | None = None) -> Plan:
    """A :class:`Plan` from a parsed Sailor ``plan_config``."""
    pl = get("plan", doc, "pipeline_list", where, list)
    check(len(pl) == 1, "plan", "one pipeline in pipeline_list (replicas are given per stage)",
          f"{where} ({len(pl)} pipelines)")
    p = get("plan", pl, 0, f"{where}.pipeline_list", dict)
    at = f"{where}.pipeline_list[0]"
    L = get("plan", p, "num_stages", at, int)
    layers = get("plan", p, "layers_per_stage", at, list)
    tmp = get("plan", p, "tmp_per_stage", at, list)
    dp = get("plan", p, "dp", at, list)
    check(len(layers) == L and len(tmp) == L and len(dp) == L, "plan",
          f"num_stages ({L}) entries in layers_per_stage, tmp_per_stage and dp",
          f"{where} ({len(layers)}, {len(tmp)}, {len(dp)})")
    stages = []
    for j in range(L):
        reps = []
        check(isinstance(tmp[j], list) and len(tmp[j]) == dp[j], "plan",
              f"dp[{j}] ({dp[j]}) replicas in tmp_per_stage[{j}]", where)
        for i, entry in enumerate(tmp[j]):
            ok = (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)
                  and len(entry[0]) == 1 and isinstance(entry[0][0], list)
                  and len(entry[0][0]) == 3)
            check(ok, "plan", f"[[[gpu, gpus_per_node, zone]], tp] at tmp_per_stage[{j}][{i}] "
                  "(one VM per replica: the artifact's controller sends all of a replica's "
                  "ranks to one node, sailor/Controller/local/local_controller.py:52-83)", entry)
            gpu, gpn, zone = entry[0][0]
            # a TP group larger than its VM: the artifact starts every rank of a replica on its
            # one VM (elastic_worker_agent.py:85-102; run_from_file.sh:83-92, torchrun
            # --nproc_per_node = the replica's TP) on GPU rank % GPUs (Megatron-DeepSpeed
            # megatron/initialize.py:220-227), so two ranks share a GPU, which NCCL refuses
            # (init.cc: "Duplicate GPU detected", ncclInvalidUsage): no TP group spans VMs
            check(not (isinstance(entry[1], int) and isinstance(gpn, int) and entry[1] > gpn),
                  "tp", f"at most its VM's GPUs ({gpn}) at tmp_per_stage[{j}][{i}] (the Sailor "
                  "artifact starts a replica's TP ranks on its one VM, on GPU rank % GPUs: "
                  "elastic_worker_agent.py:85-102, megatron/initialize.py:220-227; two ranks on "
                  "one GPU are refused by NCCL, 'Duplicate GPU detected')", entry[1])
            reps.append(ReplicaSpec(gpu=gpu, tp=entry[1], gpus_per_node=gpn, zone=zone))
        check(isinstance(layers[j], list), "plan", f"a list of layers at layers_per_stage[{j}]",
              layers[j])
        stages.append(StageSpec(layers=tuple(layers[j]), replicas=tuple(reps)))
    return Plan(stages=tuple(stages), microbatch_size=get("plan", doc, "mbs", where, int),
                global_batch_size=get("plan", doc, "gbs", where, int), model=model,
                framework=FrameworkSpec(SAILOR_FRAMEWORK, "0.16.5"))


def read_sailor_plan(path: str | os.PathLike[str], model: str | None = None) -> Plan:
    """A Sailor ``plan_config`` file as a :class:`Plan`."""
    return plan_from_sailor(read_document("plan", path), str(path), model)


def read_run(path: str | os.PathLike[str], model: str | None = None) -> MeasuredRun:
    """A Sailor run file: its plan and what was measured (``real``, ``max_mem``, ``red_grads``).

    The model is ``model``, else the file's name: ``*-OPT-350-*`` and ``mit-*``
    runs are OPT-350 (the artifact's folders), ``*-GPT-NEO-*`` GPT-Neo-2.7.
    """
    doc = read_document("run", path)
    name = Path(path).stem
    if model is None:
        up = name.upper()
        model = ("GPT-Neo-2.7" if "GPT-NEO" in up else "OPT-350" if "OPT-350" in up
                 or up.startswith("MIT-") else None)
    if model is None:
        raise ConfigError("model", "given for a run file whose name does not say it", str(path))
    plan = plan_from_sailor(doc, str(path), model)
    real = get("run", doc, "real", str(path), (int, float))
    mem = doc.get("max_mem") if isinstance(doc, dict) else None
    red = doc.get("red_grads") if isinstance(doc, dict) else None
    return MeasuredRun(name=name, plan=plan, iteration_time=float(real),
                       peak_memory=None if mem is None else float(mem),
                       gradient_reduction_time=None if red is None else float(red))
