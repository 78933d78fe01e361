"""A plan from a Megatron-LM v1.1.5 launch on DeepSpeed 0.3.13's pipeline engine.

The launch line of DeepSpeedExamples' ``Megatron-LM-v1.1.5-3D_parallelism``
(``deepspeed --num_nodes 4 --num_gpus 4 pretrain_gpt2.py --model-parallel-size 2
--pipe-parallel-size 4 ... --deepspeed --deepspeed_config ds_config.json``), the
example many published 3D-parallel runs used, with DeepSpeed 0.3.13. The file is
read by :mod:`sim.profiles.megatron_args`' shell reader (never run: a command
substitution, a variable the file does not set or a positional ``$1`` is an
unknown word, refused where it would set what dtsim models); the ds_config JSON
and the hostfile it names are read as data, relative to the launch file's folder.
The plan runs framework :data:`~sim.profiles.frameworks.DEEPSPEED_0313`.

Every rule below is the example's (``EX``: microsoft/DeepSpeedExamples 1bee84f6,
``Megatron-LM-v1.1.5-3D_parallelism/``, the commit that added it; the file is the
same until it moved, 89ce0d5a; DachengLi1/AMP vendors it) or DeepSpeed's (``DS``:
microsoft/DeepSpeed tag v0.3.13):

- the launch statement runs a ``.py`` script by the ``deepspeed`` launcher; its
  options (``DS launcher/runner.py:33-112``, argparse with abbreviations):
  ``-H/--hostfile`` (default ``/job/hostfile``), ``-i/--include``,
  ``-e/--exclude``, ``--num_nodes``, ``--num_gpus`` (default -1: unset),
  ``--master_port``, ``--master_addr``, ``--launcher``, ``--launcher_args``
  (these four change nothing dtsim models);
- world size (``runner.py:254-303``): the hostfile's ``NAME slots=N`` lines in
  order (``runner.py:115-143``; a duplicate host or another line is refused as
  DeepSpeed does) filtered by ``--include`` / ``--exclude``
  (``NAME[:SLOT,...]@...``, ``runner.py:146-245``, not with ``--num_nodes`` /
  ``--num_gpus``: ``runner.py:257-259``), then the first ``--num_nodes`` hosts
  (``runner.py:290-296``), then ``--num_gpus`` GPUs on each (``runner.py:
  298-302``). The hostfile is looked up next to the launch file (its path
  relative to the launch file's folder; an absolute or ``~/`` path, or the default
  ``/job/hostfile``, by its name, ``hostfile``, in that folder; so is the ds_config): the machine
  that ran the launch had it, this one need not. Without one DeepSpeed runs on
  the local machine's ``torch.cuda.device_count()`` GPUs (``runner.py:262-270``),
  which the file does not say: ``--num_gpus`` must, and ``--num_nodes`` > 1 is
  refused (``runner.py:272-273``); the host is ``localhost``. Ranks are given
  host by host in that order (``DS launcher/launch.py:92-100``);
- Megatron-LM v1.1.5's options are spelled as its parser defines them
  (``EX megatron/arguments.py:29-30``, ``allow_abbrev=False``; DeepSpeed's own,
  ``--deepspeed_config``, with ``_``: ``DS deepspeed/__init__.py:161-193``):
  ``--model-parallel-size`` (TP, default 1, ``arguments.py:378``; at most the
  world size, ``arguments.py:64``), ``--pipe-parallel-size`` (default 0,
  ``arguments.py:380``: 0 builds GPT2Model on DeepSpeed's non-pipeline engine,
  ``pretrain_gpt2.py:40-46``, ``training.py:248``, which the 0.3.13 table does
  not describe: refused), ``--num-layers``, ``--hidden-size``,
  ``--num-attention-heads``, ``--seq-length`` (``arguments.py:160-174, 428``),
  ``--batch-size`` (``arguments.py:225``, the samples each micro-batch loads:
  ``megatron/utils.py:92-107``, one ``next(data_iter)`` per micro-batch), ``--fp16``
  (``arguments.py:347``), ``--deepspeed`` (required: ``training.py:358``) and
  ``--deepspeed_config`` (``DS runtime/engine.py:524-530``;
  ``--deepscale_config`` is its old name, both refused, ``engine.py:512-515``);
- replicas: ``DP = world / (PP x TP)``, refused when it does not divide
  (``EX megatron/initialize.py:159-166``); ranks in the order of
  ``PipeModelDataParallelTopology`` (``DS runtime/pipe/topology.py:246-249``:
  axes ``pipe, data, model``, the last fastest, ``topology.py:25-46``): stage
  ``p``'s replica ``d`` is ranks ``p*DP*TP + d*TP`` to ``+TP-1``, on the host
  holding them (``gpus_per_node`` its GPU count); a TP group across two hosts
  is refused (dtsim keeps a replica's TP group in one node);
- layers: GPT2ModelPipe (``EX megatron/model/gpt2_model.py:130-228``) lists the
  tied embedding (160), a transpose, ``--num-layers`` ParallelTransformerLayerPipe
  (178), a transpose, LayerNorm (189), the tied head (204) and, with
  ``--fp16``, fp16_to_fp32 (217-218), and passes ``partition_method=
  'type:transformer'`` (228): ``DS runtime/pipe/module.py:366-373`` weighs the
  layers whose class name holds ``transformer`` 1, the others 0
  (``module.py:270-290``), and ``runtime/utils.py:299-393``
  (``partition_balanced``) splits them over the stages (computed here as it
  does, its binary search to ``eps=1e-3`` included). The embedding is the
  model profile's layer 0, transformer layer ``i`` its layer ``i+1``, the head
  its last layer(s); a stage left with no layer is refused. The embedding and
  the head share one weight (``TiedLayerSpec('embed', ...)``, 160 and 204): the
  model profile must tie them (``tied_embeddings``);
- the ds_config JSON (``DS runtime/config.py:520-536``; duplicate keys refused,
  ``config_utils.py:31-38``): ``train_batch_size``,
  ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``, those
  not given worked out as ``config.py:679-725`` does (integer division), then
  ``train_batch = micro x gas x world`` (``config.py:659-677``) where the world
  is the data-parallel size (the engine's mpu is the pipeline grid:
  ``DS deepspeed/__init__.py:134``, ``config.py:533-536``; ``pipe/engine.py:
  75-76``); ``--batch-size`` must equal the micro-batch (the engine counts its
  micro-batch while the example loads ``--batch-size`` samples; ``--gas`` only
  sizes the datasets, ``EX training.py:619``). The plan's micro-batch is it
  and its global batch ``train_batch_size``;
- precision ``fp16`` with ``fp16.enabled`` (``config.py:86-90``; the engine
  halves the model, ``engine.py:560-563``), which ``--fp16`` (the example's
  parameter dtype, ``arguments.py:76-78``) must agree with, else ``fp32``;
  option ``fp32_allreduce`` from the key (``constants.py:190-191``;
  Megatron-LM's ``--fp32-allreduce`` is its own DDP's, which DeepSpeed
  replaces, ``training.py:132-134``: it changes nothing); option
  ``seq_length`` from ``--seq-length`` (the mask each hop carries);
- refused, as what dtsim does not model: activation checkpointing
  (``--checkpoint-activations``: ``gpt2_model.py:220-227`` recomputes every
  ``--checkpoint-num-layers`` layers; ``--distribute-checkpointed-activations``
  needs it, ``arguments.py:123-126``; the ds_config's
  ``pipeline.activation_checkpoint_interval`` > 0, ``pipe/engine.py:162-163``),
  since the 0.3.13 table has no recomputation option; ``--cpu-optimizer``
  (DeepSpeedCPUAdam, ``training.py:172-177``); ZeRO (``zero_optimization`` of
  stage > 0, or ``true``: stage 1, ``zero/config.py:44-58``), ``amp``
  (``config.py:70-74``) and ``elasticity`` (``pipe/engine.py:57-58``).

Other options and keys (data, learning rate, logging, checkpoints, loss
scaling, gradient clipping, ...) change nothing dtsim models and are ignored.
"""

from __future__ import annotations

import json
import os
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check, check_memory_terms
from .frameworks import FrameworkSpec
from .megatron_args import (
    MAX_DIGITS,
    _int,
    _options,
    _transformer_layers,
    _Unknown,
    check_gpu_hosts,
    check_model_shape,
    gpu_on,
    parse_launch,
    zone_on,
)
from .values import Plan, ReplicaSpec, StageSpec

__all__ = ["is_deepspeed_launch", "deepspeed_plan_from_text", "partition_balanced", "DS_MARKERS"]

EX = "microsoft/DeepSpeedExamples 1bee84f6 Megatron-LM-v1.1.5-3D_parallelism"
DS = "microsoft/DeepSpeed v0.3.13"
#: Text whose presence makes a launch file one of Megatron-LM v1.1.5 on DeepSpeed.
DS_MARKERS = ("--pipe-parallel-size", "--deepspeed_config", "--deepscale_config")
_LAUNCHER = re.compile(r"(?:^|[\s;&|(\"'=])deepspeed\s[^\n]*\.py\b", re.M)

#: Megatron-LM v1.1.5's options dtsim reads (arguments.py of the example): ``int`` or ``flag``.
READ = {
    "--model-parallel-size": "int", "--pipe-parallel-size": "int0", "--num-layers": "int",
    "--hidden-size": "int", "--num-attention-heads": "int", "--seq-length": "int",
    "--batch-size": "int", "--fp16": "flag", "--deepspeed": "flag", "--deepspeed_config": "path",
    "--deepscale_config": "path",
}
#: Options that change what dtsim models and that it does not model.
REFUSED = {
    "--checkpoint-activations": "activation checkpointing (recomputation every "
                                "--checkpoint-num-layers layers, gpt2_model.py:220-227; the "
                                "DeepSpeed 0.3.13 table has no recomputation option)",
    "--distribute-checkpointed-activations": "activation checkpointing (arguments.py:123-126)",
    "--cpu-optimizer": "the optimizer on the CPU (DeepSpeedCPUAdam, training.py:172-177)",
}
#: The flags (action='store_true') of the example's parser (megatron/arguments.py) and
#: DeepSpeed's (deepspeed/__init__.py:163-193): a word after them is not their value.
FLAGS = {
    "--apply-residual-connection-post-layernorm", "--openai-gelu", "--checkpoint-activations",
    "--distribute-checkpointed-activations", "--scaled-upper-triang-masked-softmax-fusion",
    "--scaled-masked-softmax-fusion", "--bias-gelu-fusion", "--bias-dropout-fusion",
    "--cpu-optimizer", "--cpu_torch_adam", "--override-lr-scheduler",
    "--use-checkpoint-lr-scheduler", "--no-save-optim", "--no-save-rng", "--no-load-optim",
    "--no-load-rng", "--finetune", "--fp16", "--apply-query-key-layer-scaling",
    "--attention-softmax-in-fp32", "--fp32-allreduce", "--fp16-lm-cross-entropy",
    "--use-cpu-initialization", "--mmap-warmup", "--reset-position-ids", "--reset-attention-mask",
    "--eod-mask-loss", "--adlr-autoresume", "--use-one-sent-docs", "--faiss-use-gpu",
    "--zero-reduce-scatter", "--zero-contigious-gradients", "--deepspeed-activation-checkpointing",
    "--partition-activations", "--contigious-checkpointing", "--checkpoint-in-cpu",
    "--synchronize-each-layer", "--profile-backward", "--deepspeed", "--deepscale",
    "--deepspeed_mpi"}
#: Later Megatron-LM's names for what v1.1.5 calls otherwise: its parser
#: (arguments.py:29-30, parse_args) stops at them.
LATER = {"--tensor-model-parallel-size": "--model-parallel-size",
         "--pipeline-model-parallel-size": "--pipe-parallel-size",
         "--micro-batch-size": "--batch-size and the ds_config's train_micro_batch_size_per_gpu",
         "--global-batch-size": "the ds_config's train_batch_size"}
#: The deepspeed launcher's options (runner.py:38-105): long name -> short name.
LAUNCHER_OPTIONS = {"--hostfile": "-H", "--include": "-i", "--exclude": "-e", "--num_nodes": None,
                    "--num_gpus": None, "--master_port": None, "--master_addr": None,
                    "--launcher": None, "--launcher_args": None}
#: Bytes of a ds_config or hostfile read at most.
MAX_BYTES = 1 << 20


def is_deepspeed_launch(text: str) -> bool:
    """Whether a launch file's text is Megatron-LM v1.1.5 on DeepSpeed: one of
    :data:`DS_MARKERS`, or a command running a ``.py`` script by the ``deepspeed`` launcher."""
    return any(m in text for m in DS_MARKERS) or _LAUNCHER.search(text) is not None


# --------------------------------------------------------------------------- partition


def partition_balanced(weights: list[float], parts: int, eps: float = 1e-3) -> list[int]:
    """Stage boundaries of ``weights`` over ``parts`` stages as DeepSpeed 0.3.13's
    ``runtime/utils.py:378-393`` computes them: the smallest heaviest stage found by a binary
    search to ``eps`` (``_rb_partition_balanced``, 362-375), then the boundaries of a greedy
    probe at it (``_lprobe``, 327-359); ``partition_uniform`` (312-324) with no more items
    than stages. ``bounds[p]`` to ``bounds[p+1]`` are stage ``p``'s items."""
    n = len(weights)
    if n <= parts:
        return [min(p, n) for p in range(parts + 1)]
    cum: list[float] = []
    for w in weights:
        cum.append(w + (cum[-1] if cum else 0))

    def probe(cap: float) -> tuple[list[int], bool]:
        bounds = [0] + [n] * parts
        chunk = n // parts
        step = chunk
        target = cap
        for p in range(1, parts):
            while step < n and cum[step] < target:
                step += chunk
            bounds[p] = bisect_left(cum, target, lo=step - chunk, hi=min(step, n))
            if bounds[p] == n:
                return bounds, cum[-1] - cum[bounds[p - 1]] < cap
            target = cum[bounds[p] - 1] + cap
        return bounds, target >= cum[-1]

    low, high = cum[-1] / parts, cum[-1]
    while high > low + eps:
        mid = low + (high - low) / 2
        if probe(mid)[1]:
            high = mid
        else:
            low = mid + eps
    bounds, ok = probe(high)
    check(ok, "plan", "a pipeline partition DeepSpeed 0.3.13 finds (runtime/utils.py:391)",
          weights)
    return bounds


# --------------------------------------------------------------------------- launcher


def _near(base: Path, name: str) -> Path:
    """A file the launch names, looked up next to the launch file."""
    p = Path(name)  # ~/x is a home folder's, absolute once the shell expands it
    return base / (p.name if p.is_absolute() or name.startswith("~") else p)


def _read_text(name: str, path: Path, rule: str) -> str:
    from ..errors import read_input_bytes

    data = read_input_bytes(name, path, limit=MAX_BYTES, rule=rule)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, f"{rule} (UTF-8 text)",
                          f"{path} (byte at offset {exc.start} is not text)") from None


def _hostfile(path: Path) -> dict[str, int]:
    """The hosts and slots of a hostfile (runner.py:115-143)."""
    pool: dict[str, int] = {}
    for k, line in enumerate(_read_text("plan", path, "a readable hostfile").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        words = line.split()
        m = re.fullmatch(r"[^=]*=([0-9]+)", words[1]) if len(words) == 2 else None
        check(m is not None, "plan", f"a hostfile line 'NAME slots=N' ({DS} launcher/runner.py:"
              f"129-136) at {path}:{k}", line)
        check(words[0] not in pool, "plan", f"a hostfile without duplicate hosts ({DS} "
              f"launcher/runner.py:137-140) at {path}:{k}", words[0])
        digits = m.group(1).lstrip("0")  # type: ignore[union-attr]
        check(len(digits) <= MAX_DIGITS, "plan", f"a hostfile slot count of at most {MAX_DIGITS} "
              f"digits at {path}:{k}", line)
        pool[words[0]] = int(m.group(1))  # type: ignore[union-attr]
    return pool


def _filter(pool: dict[str, int], include: str, exclude: str, where: str
            ) -> dict[str, Sequence[int]]:
    """``--include`` / ``--exclude`` over the hosts' slots (runner.py:146-245); a host's slots
    as a ``range`` (not a list: a hostfile's ``slots=1000000000`` costs nothing)."""
    hosts: dict[str, Sequence[int]] = {h: range(n) for h, n in pool.items()}
    check(not (include and exclude), "plan", f"at most one of --include and --exclude ({DS} "
          f"launcher/runner.py:166-167) at {where}", "both")
    spec = include or exclude
    if not spec:
        return hosts
    check(len(spec) <= MAX_BYTES, "plan", f"--include/--exclude of at most {MAX_BYTES} "
          f"characters at {where}", spec)
    chosen: dict[str, Sequence[int]] = {} if include else dict(hosts)
    removed: dict[str, set[int]] = {}
    for node in spec.split("@"):
        name, colon, slots = node.partition(":")
        check(name in hosts, "plan", f"a host of the hostfile in --include/--exclude ({DS} "
              f"launcher/runner.py:189-190, 209-210) at {where}", name)
        if colon:
            check(all(re.fullmatch(rf"[0-9]{{1,{MAX_DIGITS}}}", s) for s in slots.split(",")),
                  "plan", f"slots as N,N,... (each of at most {MAX_DIGITS} digits) in "
                  f"--include/--exclude at {where}", node)
            nums = [int(s) for s in slots.split(",")]
            for s in nums:
                check(s in hosts[name], "plan", f"a slot host {name} has ({DS} launcher/runner.py:"
                      f"191-195) at {where}", s)
            if include:
                chosen[name] = sorted(set(nums))
            else:
                gone = removed.setdefault(name, set())
                for s in nums:  # runner.py:203, 215: list.remove of a slot no longer there
                    check(s not in gone and len(chosen[name]) > 0, "plan",
                          f"a slot --exclude names once at {where}", s)
                    gone.add(s)
        else:
            if include:
                chosen[name] = hosts[name]
            else:
                chosen[name], removed[name] = range(0), set()
    out: dict[str, Sequence[int]] = {}
    for h in hosts:
        if h in chosen:
            gone = removed.get(h, set())
            left = len(chosen[h]) - len(gone)
            if left:  # only the count of a host's slots matters from here on
                out[h] = range(left)
    return out


def _launcher_option(name: Any, where: str) -> str:
    """A launcher option's long name (argparse's unique prefixes, runner.py:34)."""
    check(isinstance(name, str), "plan", f"a deepspeed launcher option dtsim can read at {where}",
          str(name))
    short = {v: k for k, v in LAUNCHER_OPTIONS.items() if v}
    if name in short:
        return short[name]
    hits = [k for k in LAUNCHER_OPTIONS if k.startswith(name)] if name.startswith("--") else []
    if name in LAUNCHER_OPTIONS:
        return name
    check(len(hits) == 1, "plan", f"an option of DeepSpeed 0.3.13's launcher ("
          f"{', '.join(LAUNCHER_OPTIONS)}: {DS} launcher/runner.py:33-112) at {where}", name)
    return hits[0]


def _world(launcher: tuple[Any, ...], base: Path, where: str) -> list[tuple[str, int]]:
    """(host, GPUs) in rank order of a ``deepspeed`` launcher's options (runner.py:254-303)."""
    opts: dict[str, Any] = {}
    for name, value in _options(tuple(launcher[1:]), f"{where} (launcher)", set()):
        long = _launcher_option(name, where)
        check(value is not None, "plan", f"a value for the launcher option {long} at {where}",
              None)
        opts[long] = value
    nodes = _int("--num_nodes", opts["--num_nodes"], where, low=0) if "--num_nodes" in opts \
        else -1
    gpus = _int("--num_gpus", opts["--num_gpus"], where, low=0) if "--num_gpus" in opts else -1
    include, exclude = opts.get("--include", ""), opts.get("--exclude", "")
    for name, v in (("--include", include), ("--exclude", exclude)):
        if isinstance(v, _Unknown):
            raise ConfigError("plan", f"a value dtsim can read for {name} at {where} (the file "
                              "does not set it; nothing in it is run)", str(v))
    check(not ((nodes >= 0 or gpus >= 0) and (include or exclude)), "plan", f"--num_nodes/"
          f"--num_gpus without --include/--exclude ({DS} launcher/runner.py:257-259) at {where}",
          "both")
    hostfile = opts.get("--hostfile", "/job/hostfile")
    if isinstance(hostfile, _Unknown):
        raise ConfigError("plan", f"a value dtsim can read for --hostfile at {where} (the file "
                          "does not set it; nothing in it is run)", str(hostfile))
    path = _near(base, hostfile)
    if "--hostfile" in opts or path.is_file():
        check(path.is_file(), "plan", f"the hostfile --hostfile names ({hostfile}) next to the "
              f"launch file, as {path} (DeepSpeed reads the hosts from it: {DS} launcher/"
              f"runner.py:115-143)", str(path))
        active = _filter(_hostfile(path), include, exclude, where)
        check(bool(active), "plan", f"a hostfile with at least one host at {path}", 0)
    else:  # runner.py:262-273: the local machine's GPUs, which the file does not say
        check(gpus > 0, "plan", f"a world size the launch says: without a hostfile ({hostfile}, "
              f"looked for as {path}) DeepSpeed runs on the local machine's "
              f"torch.cuda.device_count() GPUs ({DS} launcher/runner.py:262-270); give "
              f"--num_gpus or a hostfile next to the launch file ({where})", "no --num_gpus")
        check(nodes <= 1, "plan", f"--num_nodes at most 1 without a hostfile ({DS} launcher/"
              f"runner.py:272-273) at {where}", nodes)
        check(not (include or exclude), "plan", f"--include/--exclude with a hostfile at {where}",
              include or exclude)
        active = {"localhost": range(gpus)}
    if nodes > 0:
        active = dict(list(active.items())[:nodes])
    if gpus > 0:
        active = {h: range(gpus) for h in active}
    hosts = [(h, len(s)) for h, s in active.items() if s]
    from .formats import BYTES_PER_PLAN_REPLICA

    world = sum(n for _, n in hosts)  # each GPU at most a replica (a plan file's): before any
    check_memory_terms([("plan", f"{where} ({world} GPUs)", world * BYTES_PER_PLAN_REPLICA)])
    return hosts


# --------------------------------------------------------------------------- ds_config


def _config(path: Path, name: str) -> dict[str, Any]:
    text = _read_text("plan", path, f"a readable ds_config ({name}, the launch's "
                      "--deepspeed_config, next to the launch file)")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        dup = [k for k, c in Counter(k for k, _ in items).items() if c > 1]
        check(not dup, "plan", f"a ds_config without duplicate keys ({DS} runtime/config_utils.py:"
              f"31-38) at {path}", dup)
        return dict(items)

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError("plan", f"a ds_config in JSON ({DS} runtime/config.py:522-527) at "
                          f"{path}", f"line {exc.lineno}: {exc.msg}") from None
    except RecursionError:  # [[[[...]]]] thousands deep: bad input, not a crash
        raise ConfigError("plan", f"a ds_config in JSON ({DS} runtime/config.py:522-527) at "
                          f"{path}", "nested too deeply") from None
    except ValueError as exc:  # an integer of over 4300 digits (int_max_str_digits)
        raise ConfigError("plan", f"a ds_config in JSON ({DS} runtime/config.py:522-527) at "
                          f"{path}", str(exc)) from None
    check(isinstance(data, dict), "plan", f"a ds_config holding a JSON object at {path}",
          type(data).__name__)
    return data


def _key_int(cfg: dict[str, Any], key: str, path: Path) -> int | None:
    v = cfg.get(key)
    if v is None:
        return None
    check(isinstance(v, int) and not isinstance(v, bool), "plan", f"an integer {key} at {path}",
          v)
    return v


def _flag(table: Any, key: str) -> Any:
    """``table[key]`` of a JSON object (None for anything else)."""
    return table.get(key) if isinstance(table, dict) else None


def _batch(cfg: dict[str, Any], dp: int, path: Path) -> tuple[int, int, int]:
    """(train batch, micro-batch, gradient accumulation steps) as DeepSpeed 0.3.13 sets and
    checks them (runtime/config.py:659-725; the world its data-parallel size)."""
    train = _key_int(cfg, "train_batch_size", path)
    micro = _key_int(cfg, "train_micro_batch_size_per_gpu", path)
    gas = _key_int(cfg, "gradient_accumulation_steps", path)
    check(train is not None or micro is not None, "plan", f"train_batch_size or "
          f"train_micro_batch_size_per_gpu in the ds_config ({DS} runtime/config.py:722-725) at "
          f"{path}", "neither")
    if train is not None and micro is not None and gas is None:
        gas = train // micro // dp
    elif train is not None and micro is None and gas is not None:
        micro = train // dp // gas if gas else 0
    elif train is None and micro is not None and gas is not None:
        train = micro * gas * dp
    elif train is not None and micro is None:
        gas, micro = 1, train // dp
    elif train is None and micro is not None:
        gas, train = 1, micro * dp
    assert train is not None and micro is not None and gas is not None
    check(train > 0 and micro > 0 and gas > 0 and train == micro * gas * dp, "plan",
          f"train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
          f"data-parallel size ({micro} x {gas} x {dp}; {DS} runtime/config.py:659-725, the "
          f"data-parallel size as the pipeline grid's: deepspeed/__init__.py:134, config.py:"
          f"533-536) at {path}", train)
    return train, micro, gas


def _check_config(cfg: dict[str, Any], path: Path) -> None:
    """Refuse the ds_config keys that change what dtsim models and that it does not model."""
    for key in ("zero_optimization", "pipeline", "amp", "elasticity"):  # config.py reads
        # them with .get/.items (zero_optimization may be true/false: zero/config.py:44-46); a
        # key given as null is None there: None.get / None.items (config.py:72, 376, zero/
        # config.py:44-51 and 68-71, elasticity/elasticity.py:204) is an AttributeError
        v = cfg.get(key)
        check((v is None and key not in cfg) or isinstance(v, dict)
              or (key == "zero_optimization" and isinstance(v, bool)), "plan",
              f"{key} a table ({DS} runtime/config.py) at {path}", v)
    zero = cfg.get("zero_optimization")
    stage = (1 if zero else 0) if isinstance(zero, bool) else \
        zero.get("stage", 0) if isinstance(zero, dict) else 0
    # 0.3.13 reads the stage as given (config_utils.py:23-24) and compares it: ZeRO is on when
    # stage > 0 (runtime/config.py:612-614), then at most 3 (config.py:756-758); a stage <= 0
    # (-1 as 0) runs without ZeRO; a stage that does not compare with 0 (text, null) raises
    check(isinstance(stage, (int, float)), "plan", f"zero_optimization.stage a number ({DS} "
          f"runtime/config.py:614 compares it with 0) at {path}", stage)
    check(not stage > 0 or stage <= 3, "plan", f"zero_optimization.stage at most 3 ({DS} "
          f"runtime/config.py:756-758, zero/constants.py:38) at {path}", stage)
    check(not stage > 0, "plan", f"a DeepSpeed run dtsim models: zero_optimization "
          f"stage {stage} is ZeRO ({DS} runtime/config.py:612-614, zero/config.py:44-58, "
          f"68-71), which dtsim does not model with this table ({path})", stage)
    for key in ("amp", "elasticity", "fp16"):
        check(isinstance(_flag(cfg.get(key), "enabled") or False, bool), "plan",
              f"{key}.enabled true or false at {path}", _flag(cfg.get(key), "enabled"))
    check(not _flag(cfg.get("amp"), "enabled"), "plan", f"a DeepSpeed run dtsim "
          f"models: amp.enabled is Apex AMP ({DS} runtime/config.py:70-74), which dtsim does not "
          f"model ({path})", True)
    check(not _flag(cfg.get("elasticity"), "enabled"), "plan",
          f"a DeepSpeed run without elasticity ({DS} runtime/pipe/engine.py:57-58) at {path}",
          True)
    pipe = cfg.get("pipeline")
    interval = pipe.get("activation_checkpoint_interval", 0) if isinstance(pipe, dict) else 0
    check(isinstance(interval, int) and not isinstance(interval, bool) and interval >= 0,
          "plan", f"pipeline.activation_checkpoint_interval an integer >= 0 ({DS} runtime/pipe/"
          f"engine.py:162-163) at {path}", interval)
    check(not interval, "plan", f"a DeepSpeed run dtsim models: pipeline."
          f"activation_checkpoint_interval {interval} is activation checkpointing ({DS} "
          f"runtime/pipe/engine.py:162-163; the DeepSpeed 0.3.13 table has no recomputation "
          f"option) at {path}", interval)
    for key in ("fp32_allreduce",):
        check(isinstance(cfg.get(key, False), bool), "plan", f"true or false for {key} at {path}",
              cfg.get(key))
    fp16 = cfg.get("fp16", {})
    check(isinstance(fp16, dict) and isinstance(fp16.get("enabled", False), bool), "plan",
          f"fp16 a table with enabled true or false ({DS} runtime/config.py:86-90) at {path}",
          fp16)


# --------------------------------------------------------------------------- options


def _spelling(name: str) -> str:
    return "--" + name.lstrip("-").replace("_", "-").lower()


_KNOWN = {_spelling(k): k for k in set(READ) | set(REFUSED)}


def _megatron_options(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    got: dict[str, Any] = {}
    for name, value in _options(args, where, FLAGS):
        if isinstance(name, _Unknown):
            raise ConfigError("plan", f"an option dtsim can read at {where}", str(name))
        known = _KNOWN.get(_spelling(name))
        if known is not None and known != name:
            raise ConfigError("plan", f"an option spelled as Megatron-LM v1.1.5 or DeepSpeed "
                              f"defines it ({known}; allow_abbrev=False, {EX} megatron/"
                              f"arguments.py:29-30) at {where}", name)
        if name in LATER:
            raise ConfigError("plan", f"an option of Megatron-LM v1.1.5 ({name} is a later "
                              f"Megatron-LM's; v1.1.5 has {LATER[name]}: {EX} megatron/"
                              f"arguments.py) at {where}", name)
        if name in REFUSED:
            raise ConfigError("plan", f"a run dtsim models: {name} sets {REFUSED[name]}, which "
                              f"dtsim does not model ({where})", name)
        kind = READ.get(name)
        if kind == "flag":
            check(value is None, "plan", f"no value for the flag {name} at {where}", value)
            got[name] = True
        elif kind is not None:
            check(value is not None, "plan", f"a value for {name} at {where}", None)
            if kind == "path":
                if isinstance(value, _Unknown):
                    raise ConfigError("plan", f"a value dtsim can read for {name} at {where} "
                                      "(the file does not set it; nothing in it is run)",
                                      str(value))
                got[name] = value
            else:
                got[name] = _int(name, value, where, low=0 if kind == "int0" else 1)
    return got


#: The example's other training scripts and the model each builds (not GPT2ModelPipe): refused
#: rather than read as GPT-2 (a script of another name is taken to build GPT2ModelPipe).
OTHER_SCRIPTS = {"pretrain_bert.py": "BertModel (pretrain_bert.py:31-41)",
                 "pretrain_ict.py": "an ICT model (pretrain_ict.py:33-34, general_ict_model_provider)",
                 "pretrain_transgan.py": "a TransGAN (AMP's addition to the example)"}


def deepspeed_plan_from_text(text: str, where: str, model: Any,
                             gpu: str | dict[str, str] | None,
                             zone: str | dict[str, str] | None = None,
                             base: str | os.PathLike[str] | None = None
                             ) -> Plan:
    """The :class:`Plan` of a Megatron-LM v1.1.5 launch on DeepSpeed 0.3.13 (see the module
    docstring); ``base`` is the folder its ds_config and hostfile are looked up in (default:
    ``where``'s)."""
    check(gpu is not None, "gpu", "given (--gpu NAME) with a Megatron-LM launch plan (it names "
          "no GPU type)", where)
    check(model is not None, "model", "given (--model NAME) with a Megatron-LM launch plan", where)
    folder = Path(base) if base is not None else Path(where).parent
    launch = parse_launch(text, where, launchers=("deepspeed",),
                          example="deepspeed ... pretrain_gpt2.py ...",
                          path=folder / Path(where).name)  # $(realpath $0): the file's own
    script = Path(str(launch.script)).name
    check(script not in OTHER_SCRIPTS, "plan", f"a launch of pretrain_gpt2.py at {where} (the "
          "script that builds GPT2ModelPipe, whose layers and mask this reader models; "
          f"{script} builds {OTHER_SCRIPTS.get(script)})", script)
    opts = _megatron_options(launch.args, where)
    hosts = _world(launch.launcher, folder, where)
    world = sum(n for _, n in hosts)
    check_gpu_hosts(gpu, {h for h, _ in hosts}.__contains__, ", ".join(h for h, _ in hosts),
                    where)
    for h, _ in hosts:  # each a type, before what the plan's layers need
        gpu_on(gpu, h, where)
    check(opts.get("--deepspeed", False), "plan", f"--deepspeed given: the pipeline runs on "
          f"DeepSpeed's engine only ({EX} megatron/training.py:358) at {where}", "absent")
    pp = opts.get("--pipe-parallel-size", 0)
    check(pp >= 1, "plan", f"--pipe-parallel-size >= 1 at {where}: 0 builds GPT2Model on "
          f"DeepSpeed's non-pipeline engine ({EX} pretrain_gpt2.py:40-46, megatron/training.py:"
          f"248), which the DeepSpeed 0.3.13 table does not describe", pp)
    tp = min(opts.get("--model-parallel-size", 1), world)  # arguments.py:64
    check(world % (pp * tp) == 0, "plan", f"a world size ({world} GPUs on {len(hosts)} hosts) "
          f"divisible by PP x TP ({pp} x {tp}; {EX} megatron/initialize.py:162) at {where}", world)
    dp = world // (pp * tp)
    names = [k for k in ("--deepspeed_config", "--deepscale_config") if k in opts]
    check(len(names) == 1, "plan", f"one ds_config (--deepspeed_config FILE; --deepscale_config "
          f"is its old name: {DS} runtime/engine.py:512-515, 524-530) at {where}",
          " and ".join(names) or "none")
    cfg_path = _near(folder, opts[names[0]])
    cfg = _config(cfg_path, opts[names[0]])
    _check_config(cfg, cfg_path)
    train, micro, gas = _batch(cfg, dp, cfg_path)
    check("--batch-size" in opts, "plan", f"--batch-size given (the samples a micro-batch loads: "
          f"{EX} megatron/utils.py:92-107) at {where}", None)
    check(opts["--batch-size"] == micro, "plan", f"--batch-size equal to the ds_config's "
          f"micro-batch ({micro}: the example loads --batch-size samples a micro-batch, "
          f"megatron/utils.py:99-107, DeepSpeed counts train_micro_batch_size_per_gpu, "
          f"runtime/pipe/engine.py:63, 75-76) at {where}", opts["--batch-size"])
    fp16 = bool(cfg.get("fp16", {}).get("enabled", False))
    check(fp16 == bool(opts.get("--fp16")), "plan", f"--fp16 {'given' if fp16 else 'absent'} as "
          f"the ds_config's fp16.enabled is {str(fp16).lower()} (the example's parameter dtype, "
          f"{EX} megatron/arguments.py:76-78, and DeepSpeed's, {DS} runtime/engine.py:560-563, "
          f"must agree) at {where}", "given" if opts.get("--fp16") else "absent")
    check("--num-layers" in opts, "plan", f"--num-layers given at {where}", None)
    check("--seq-length" in opts, "plan", f"--seq-length given (the attention mask each hop "
          f"sends is seq x seq: {EX} megatron/utils.py:133-135) at {where}", None)
    layers = opts["--num-layers"]
    transformer = _transformer_layers(model)
    check(transformer == layers, "plan", f"--num-layers equal to the transformer layers of the "
          f"model profile {model.name} ({transformer}) at {where}", layers)
    check(bool(model.tied_embeddings), "plan", f"a model profile that ties its embedding and "
          f"output weights, as GPT2ModelPipe does ({EX} megatron/model/gpt2_model.py:160, 204: "
          f"TiedLayerSpec('embed', ...)): {model.name}'s does not ({where})", model.name)
    check_model_shape(opts, model, where)
    # GPT2ModelPipe's layer list (gpt2_model.py:160-218) and partition_method='type:transformer'
    specs = ["embed", "transpose"] + ["transformer"] * layers + ["transpose", "layernorm", "head"]
    if fp16:
        specs.append("fp16_to_fp32")
    bounds = partition_balanced([1 if s == "transformer" else 0 for s in specs], pp)
    total = model.layers
    starts = list(accumulate((n for _, n in hosts[:-1]), initial=0))
    sizes = dict(hosts)
    stages = []
    for p in range(pp):
        held: list[int] = []
        for idx in range(bounds[p], bounds[p + 1]):
            if specs[idx] == "embed":
                held.append(0)
            elif specs[idx] == "transformer":
                held.append(idx - 1)  # transformer layer idx-2 is profile layer idx-1
            elif specs[idx] == "head":
                held.extend(range(layers + 1, total))
        check(bool(held), "plan", f"at least one layer on each pipeline stage ({DS} runtime/pipe/"
              f"module.py:366-373 gives stage {p} of {pp} none of {layers} transformer layers) at "
              f"{where}", pp)
        reps = []
        for d in range(dp):
            first = p * dp * tp + d * tp  # topology.py:246-249: axes pipe, data, model
            host = _host_of(hosts, first, tp, where, starts)
            g = gpu_on(gpu, host, where)
            reps.append(ReplicaSpec(gpu=g, tp=tp, gpus_per_node=sizes[host],
                                    zone=zone_on(zone, g), host=host))
        stages.append(StageSpec(layers=tuple(held), replicas=tuple(reps)))
    options: list[tuple[str, Any]] = [("seq_length", opts["--seq-length"])]
    if cfg.get("fp32_allreduce", False):
        options.insert(0, ("fp32_allreduce", True))
    fw = FrameworkSpec("deepspeed", "0.3.13", "fp16" if fp16 else "fp32", tuple(options))
    return Plan(stages=tuple(stages), microbatch_size=micro, global_batch_size=train,
                model=model.name, framework=fw)


def _host_of(hosts: list[tuple[str, int]], first: int, tp: int, where: str,
             starts: list[int] | None = None) -> str:
    """The host of ranks ``first`` to ``first+tp-1`` (launch.py:92-100: host by host);
    ``starts`` the first rank of each host (worked out when not given)."""
    if starts is None:
        starts = list(accumulate((n for _, n in hosts[:-1]), initial=0))
    k = bisect_right(starts, first) - 1
    name, n = hosts[k]
    assert 0 <= k and first < starts[k] + n, first
    check(first + tp <= starts[k] + n, "plan", f"a TP group on one host: ranks {first}-"
          f"{first + tp - 1} span {name} and the next host, which dtsim does not model "
          f"({where})", tp)
    return name
