"""A plan from a Megatron-LM launch line (``torchrun ... pretrain_gpt.py --tensor-model-parallel-size 2 ...``).

The file (a shell script or a text file) is data: it is read, never run. A
small shell reader splits it into statements and words (quotes, ``\\``
line continuations, ``#`` comments, ``NAME=value``, ``export NAME=value``,
``NAME=( ... )`` arrays, ``$NAME``, ``${NAME}``, ``${NAME:-default}`` and
``${NAME[@]}`` of variables the file sets before use; ``$(realpath $0)``, the file's
own path, and ``$(dirname W)`` / ``$(basename W)`` of a known word: :func:`_substitute`;
``if``/``elif``/``else``/``fi``, ``&&`` and ``||`` by the branch that runs where the test is
one :func:`_test` evaluates, else what they guard is unknown).
Any other command substitution (``$(...)``, backticks), a variable the file does not set, a
positional parameter (``$1``) is never evaluated: it is an unknown word, and
the plan is refused (one line naming it) wherever such a word would set what
dtsim models; as the value of an option dtsim ignores it stays unknown.
Single-quoted text is expanded as double-quoted text would be (the
difference is not kept).

The launch statement is the one that runs a ``.py`` script by ``torchrun``,
``python`` or itself (one such statement; ``echo``, ``srun``, ``deepspeed`` and
other commands are not read): ``torchrun`` (or ``python -m torch.distributed.run``) options
before the script, Megatron-LM's after it. A Megatron-LM v1.1.5 launch on DeepSpeed (by the
``deepspeed`` launcher, with ``--pipe-parallel-size`` or ``--deepspeed_config``) is read by
:mod:`sim.profiles.deepspeed_args` instead. Every rule below is Megatron-LM's
(NVIDIA/Megatron-LM d98e8a64dd, Megatron Core 0.20.0, the version of
:data:`sim.profiles.frameworks.MEGATRON`) or PyTorch's (pytorch/pytorch
010929fd ``torch/distributed/run.py``):

- option names are spelled exactly as Megatron-LM's parser defines them
  (``argparse.ArgumentParser(..., allow_abbrev=False)``,
  ``megatron/training/arguments.py:119-120``; options generated from a config
  dataclass are ``--`` + the field name with ``_`` as ``-``,
  ``megatron/training/argument_utils.py:95-107``): ``--foo_bar`` for a
  ``--foo-bar`` dtsim reads is refused (Megatron-LM would stop at it);
  torchrun accepts both ``--nproc-per-node`` and ``--nproc_per_node`` and only
  ``--nnodes`` (``get_args_parser``);
- world size: ``--nnodes`` x ``--nproc-per-node`` (torchrun's defaults 1 and
  1), or a ``WORLD_SIZE=`` the file sets (Megatron-LM reads the
  environment's, ``arguments.py:145``); ``DP = world / (TP x PP)``, refused
  when it does not divide (``arguments.py:432-448``; ``parallel_state.py:
  822-825``);
- layers: the ``--num-layers`` transformer layers split evenly over the
  pipeline stages, refused when they do not divide (``arguments.py:985-997``),
  or with ``--decoder-first-pipeline-num-layers`` /
  ``--decoder-last-pipeline-num-layers`` the first / last stage takes that
  many and the others the rest evenly (``megatron/core/transformer/
  transformer_block.py:76-160``, ``get_num_layers_to_build``;
  ``argument_utils.py:310``); the embedding goes with the first stage and
  the output layer with the last (``megatron/core/models/gpt/gpt_model.py``:
  ``pre_process`` / ``post_process``). On the model profile (layer 0 the
  embedding, then the transformer layers, then the output layer(s):
  :func:`sim.profiles.sailor.untied_tail_layers`) the first stage holds
  layer 0 and the last the tail;
- replicas: Megatron-LM orders ranks ``tp-cp-ep-dp-pp`` (TP fastest, then
  DP, then PP: ``parallel_state.py:617``, ``training/initialize.py:395``):
  stage ``p``'s replica ``d`` is ranks ``p*TP*DP + d*TP`` to ``+TP-1``;
  torchrun gives node ``i`` ranks ``i*nproc`` to ``(i+1)*nproc-1`` (static
  rendezvous), so the replica is on host ``n{i}`` with ``gpus_per_node =
  nproc``; a TP group across two nodes is refused (dtsim keeps a replica's TP
  group in one node);
- framework :data:`~sim.profiles.frameworks.MEGATRON` 0.20.0: precision
  ``fp16`` with ``--fp16``, ``bf16`` with ``--bf16``, else ``fp32``
  (``megatron/core/model_parallel_config.py:177-180``); options
  ``overlap_grad_reduce`` (``--overlap-grad-reduce``, ``arguments.py:3121``),
  ``accumulate_allreduce_grads_in_fp32`` (``arguments.py:3069``),
  ``use_distributed_optimizer`` (``--use-distributed-optimizer``, ``arguments.py:3156``),
  the attention's ``transformer_impl`` (``--transformer-impl``, ``transformer_config.py:1314``),
  ``attention_backend`` (``--attention-backend``, ``transformer_config.py:151``; ``local``
  refused, Megatron-LM asserting ``--spec local``, ``arguments.py:436-437``) and
  ``recompute_granularity=selective`` (``--recompute-activations``, ``arguments.py:607-608``,
  or ``--recompute-granularity selective``; full recomputation refused), each only where
  not Megatron-LM's default (:data:`WORDS`); and
  ``--overlap-param-gather`` (``arguments.py:3148``) refused: first as Megatron-LM does
  without the other two (``arguments.py:1024-1029``), else as a run dtsim does not model
  (each stage's first forward pass waits for its all-gather; the option's source in
  :data:`~sim.profiles.frameworks.MEGATRON`);
  micro-batch and global batch size from ``--micro-batch-size`` and
  ``--global-batch-size`` (default ``micro x DP``: ``arguments.py:702-703``).

Options that change what dtsim models and that it does not model are refused
(:data:`REFUSED`); options dtsim does not read and that do not change it
(data, learning rate, logging, checkpoints, ...) are ignored.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, check
from .frameworks import FrameworkSpec
from .values import Plan, ReplicaSpec, StageSpec

__all__ = ["is_megatron_launch", "read_megatron_plan", "megatron_plan_from_text", "parse_launch",
           "Launch", "MARKERS", "REFUSED"]

_MEG = "NVIDIA/Megatron-LM d98e8a64dd"
#: Text whose presence (in a file that is not .json or .toml) makes a plan file a launch line.
MARKERS = ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "pretrain_")
#: Bytes of a launch file read at most.
MAX_LAUNCH_BYTES = 1 << 20

#: Megatron-LM options dtsim reads: name -> (kind, what it sets). ``int``: a value; ``flag``.
READ = {
    "--tensor-model-parallel-size": "int", "--pipeline-model-parallel-size": "int",
    "--num-layers": "int", "--hidden-size": "int", "--num-attention-heads": "int",
    "--seq-length": "int", "--micro-batch-size": "int", "--global-batch-size": "int",
    "--decoder-first-pipeline-num-layers": "int", "--decoder-last-pipeline-num-layers": "int",
    "--context-parallel-size": "int", "--expert-model-parallel-size": "int",
    "--num-virtual-stages-per-pipeline-rank": "int", "--tensor-parallel-num-weight-shards": "int",
    "--fp16": "flag", "--bf16": "flag", "--overlap-grad-reduce": "flag",
    "--accumulate-allreduce-grads-in-fp32": "flag", "--untie-embeddings-and-output-weights": "flag",
    "--transformer-impl": "word", "--attention-backend": "word",
    "--recompute-activations": "flag", "--recompute-granularity": "word",
    "--recompute-modules": "word",
    "--use-distributed-optimizer": "flag", "--overlap-param-gather": "flag",
    "--ffn-hidden-size": "int", "--num-query-groups": "int", "--swiglu": "flag",
    "--quick-geglu": "flag", "--group-query-attention": "flag",
    "--multi-latent-attention": "flag", "--position-embedding-type": "word",
}
#: The layer a model given by its shape is (:func:`sim.profiles.values.shape_sizes`:
#: ``12 h^2 + 13 h``, an MLP of two ``h x 4h`` matrices, every head its own keys and values),
#: and the Megatron-LM options that build another one (d98e8a64dd): a gated MLP (its first
#: linear layer twice as wide, three ``h x F`` matrices: ``--swiglu`` and ``--quick-geglu`` set
#: ``gated_linear_unit``, megatron/training/argument_utils.py:314-326, core/transformer/mlp.py:
#: 205-206), fewer key-value heads (``--num-query-groups``, read only with
#: ``--group-query-attention``, argument_utils.py:330-333, its argparse default 1:
#: core/transformer/transformer_config.py:175-177), multi-latent attention
#: (transformer_config.py:288). ``--ffn-hidden-size`` is the MLP's width (default ``4 h``
#: without a gated unit, arguments.py:1320-1329).
SHAPE_LAYER = "12 h^2 + 13 h a layer: an MLP of two h x 4h matrices, keys and values for every head"
SHAPE_REFUSED = {
    "--swiglu": "a gated MLP (SwiGLU: its first linear layer twice as wide, three h x F "
                "matrices; argument_utils.py:314, core/transformer/mlp.py:205)",
    "--quick-geglu": "a gated MLP (its first linear layer twice as wide; argument_utils.py:323-325)",
    "--multi-latent-attention": "multi-latent attention (transformer_config.py:288)",
}
#: The values of the word options dtsim reads that it models, with Megatron-LM's rule for the
#: others (d98e8a64dd: transformer_config.py:1314 transformer_impl, 151 attention_backend
#: (AttnBackend), 532 and 1901-1904 recompute_granularity, 560 and 1940-1941 recompute_modules).
WORDS = {
    "--transformer-impl": (("transformer_engine", "local"), "transformer_engine or local "
                           "(inference_optimized is an inference path; transformer_config.py:"
                           "1314)"),
    "--attention-backend": (("auto", "flash", "fused", "unfused"), "auto, flash, fused or "
                            "unfused (local runs only with --spec local, a layer spec of its own "
                            "that dtsim does not model: arguments.py:436-437)"),
    "--recompute-granularity": (("selective",), "selective (full recomputation, every layer's "
                                "forward rerun, is not modelled; Megatron-LM takes full or "
                                "selective, transformer_config.py:1901-1904)"),
    "--recompute-modules": (("core_attn",), "core_attn, the default (transformer_config.py:"
                            "1940-1941; other modules' recomputation is not modelled)"),
    "--position-embedding-type": (("learned_absolute", "rope", "yarn", "mrope", "relative",
                                   "none"), "one of Megatron-LM's: learned_absolute, rope, "
                                  "yarn, mrope, relative, none (arguments.py:2397-2398)"),
}
#: Word options that take one or more values (Megatron-LM's List[str] fields: argparse
#: ``nargs="+"``, d98e8a64dd megatron/training/argument_utils.py:146; transformer_config.py:560).
LISTS = frozenset({"--recompute-modules"})
#: Options that must keep Megatron-LM's default (1 or unset) for dtsim to model the run.
ONE = {
    "--context-parallel-size": ("context parallelism", "model_parallel_config.py:100"),
    "--expert-model-parallel-size": ("expert parallelism", "model_parallel_config.py:127"),
    "--num-virtual-stages-per-pipeline-rank": ("the interleaved schedule",
                                               "arguments.py:3116, 977-979"),
    "--tensor-parallel-num-weight-shards": ("TP weight sharding (GTP)",
                                            "model_parallel_config.py:58, arguments.py:417-429"),
}
#: Options that change what dtsim models and that it does not model (given at all: refused),
#: each with what it changes and where Megatron-LM defines it.
REFUSED = {
    "--sequence-parallel": "sequence parallelism (TP activations split over the sequence; "
                           "model_parallel_config.py:94)",
    "--num-layers-per-virtual-pipeline-stage": "the interleaved schedule (arguments.py:3114)",
    "--pipeline-model-parallel-layout": "a custom pipeline layout (arguments.py:3103)",
    "--account-for-embedding-in-pipeline-split": "the embedding counted as a layer in the split "
                                                 "(transformer_config.py:137)",
    "--account-for-loss-in-pipeline-split": "the loss counted as a layer in the split "
                                            "(transformer_config.py:141)",
    "--use-tp-pp-dp-mapping": "rank order tp-cp-ep-pp-dp (initialize.py:395)",
    "--overlap-param-gather-with-optimizer-step": "the interleaved schedule's first parameter "
        "all-gather beside the optimizer step (arguments.py:1066-1072)",
    "--use-torch-fsdp2": "FSDP (common_config.py:95)",
    "--use-megatron-fsdp": "FSDP (common_config.py:92)",
    "--recompute-method": "full recomputation's layer choice (transformer_config.py:543; "
                          "selective recomputation takes none: arguments.py:1425-1428)",
    "--recompute-num-layers": "full recomputation's layer count (transformer_config.py:551)",
    "--spec": "a layer spec of its own (arguments.py:3645), whose attention and layers dtsim "
              "does not know",
    "--use-legacy-models": "the legacy GPT model, not Megatron Core's (core_v0.9.0 to "
                           "core_v0.17.0, arguments.py:1255 at core_v0.9.0, pretrain_gpt.py:63; "
                           "gone from core_v0.18.0) and its own attention "
                           "(legacy/model/transformer.py:315, CoreAttention; flash only with "
                           "--use-flash-attn, :539)",
    "--num-experts": "a mixture of experts (arguments.py:3518)",
    "--fp8-format": "FP8 training (transformer_config.py:587-589)",
    "--fp4-format": "FP4 training (transformer_config.py:674)",
    "--tp-comm-overlap": "TP communication overlapped with GEMMs (model_parallel_config.py:265)",
    "--grad-reduce-in-bf16": "gradients reduced in bf16 (arguments.py:3053)",
    "--ddp-bucket-size": "a data-parallel bucket size of its own (arguments.py:3125)",
    "--ddp-num-buckets": "a data-parallel bucket count of its own (arguments.py:3123)",
    "--ddp-pad-buckets-for-high-nccl-busbw": "the distributed optimizer's buckets padded to "
        "lcm(dp, 128, 2**16) elements, not lcm(dp, 128) (arguments.py:3127; "
        "core/optimizer/param_layout.py:29-33)",
    "--model-parallel-size": "the old model-parallel argument (arguments.py:3111)",
    "--encoder-num-layers": "an encoder (arguments.py)",
    "--decoder-num-layers": "a decoder layer count apart from --num-layers (arguments.py)",
    "--hybrid-layer-pattern": "a hybrid (Mamba) model",
    "--yaml-cfg": "arguments from a YAML file (arguments.py:137-140)",
    "--use-checkpoint-args": "arguments from a checkpoint (arguments.py:91-101)",
}
#: torchrun's options: name -> whether it takes a value (pytorch torch/distributed/run.py
#: get_args_parser); spellings with ``_`` where torchrun defines them.
TORCHRUN_FLAGS = {"--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path",
                  "--run_path"}


@dataclass(frozen=True)
class _Unknown:
    """A word dtsim does not evaluate: a command substitution or a variable the file does not set."""

    what: str

    def __str__(self) -> str:
        return self.what


# --------------------------------------------------------------------------- shell reader

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _lex(text: str, where: str) -> list[list[tuple]]:
    """Statements of words; a word is a list of parts: ``("lit", s)``, ``("var", name, default,
    array, quoted)``, ``("cmd", text)`` (never run), or the tokens ``("(",)`` / ``(")",)``."""
    # Windows line ends are line ends (a CRLF file's words were read without their \r, but a
    # backslash before \r\n was no continuation: its next line became a new statement)
    text = text.replace("\r\n", "\n")
    stmts: list[list[Any]] = []
    words: list[Any] = []
    word: list[tuple] | None = None
    i, n = 0, len(text)
    depth = 0

    def lit(s: str) -> None:
        nonlocal word
        if word is None:
            word = []
        word.append(("lit", s))

    def end() -> None:
        nonlocal word
        if word is not None:
            merged: list[tuple] = []
            for part in word:
                if part[0] == "lit" and merged and merged[-1][0] == "lit":
                    merged[-1] = ("lit", merged[-1][1] + part[1])
                else:
                    merged.append(part)
            words.append(merged or [("lit", "")])
            word = None

    def dollar(j: int, quoted: bool) -> int:
        """Read a ``$`` expansion at text[j] == '$'; return the index after it."""
        nonlocal word
        if word is None:
            word = []
        if j + 1 < n and text[j + 1] == "(":
            depth, k = 0, j + 1
            while k < n:
                if text[k] == "(":
                    depth += 1
                elif text[k] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            word.append(("cmd", text[j:k + 1]))
            return k + 1
        if j + 1 < n and text[j + 1] == "{":
            k = text.find("}", j + 2)
            check(k >= 0, "plan", f"a launch file whose ${{...}} close at {where}", text[j:j + 40])
            body = text[j + 2:k]
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(\[@\]|\[\*\])?(?::-(.*))?", body, re.S)
            if m is None:
                word.append(("var", "${" + body + "}", None, False, quoted, True))
            else:
                word.append(("var", m.group(1), m.group(3), bool(m.group(2)), quoted, False))
            return k + 1
        m = _NAME.match(text, j + 1)
        if m is not None:
            word.append(("var", m.group(0), None, False, quoted, False))
            return m.end()
        if j + 1 < n and (text[j + 1].isdigit() or text[j + 1] in "@*#?$!-"):
            word.append(("var", "$" + text[j + 1], None, False, quoted, True))
            return j + 2
        word.append(("lit", "$"))
        return j + 1

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            lit(text[i + 1])
            i += 2
        elif c == "'":
            k = text.find("'", i + 1)
            check(k >= 0, "plan", f"a launch file whose quotes close at {where}", text[i:i + 40])
            lit(text[i + 1:k])
            i = k + 1
        elif c == '"':
            i += 1
            if word is None:
                word = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        word.append(("lit", text[i + 1]))
                    i += 2
                elif text[i] == "$":
                    i = dollar(i, True)
                elif text[i] == "`":
                    k = text.find("`", i + 1)
                    k = n - 1 if k < 0 else k
                    word.append(("cmd", text[i:k + 1]))
                    i = k + 1
                else:
                    word.append(("lit", text[i]))
                    i += 1
            check(i < n, "plan", f"a launch file whose quotes close at {where}", "\"")
            i += 1
        elif c == "`":
            k = text.find("`", i + 1)
            k = n - 1 if k < 0 else k
            if word is None:
                word = []
            word.append(("cmd", text[i:k + 1]))
            i = k + 1
        elif c == "$":
            i = dollar(i, False)
        elif c == "#" and word is None:
            k = text.find("\n", i)
            i = n if k < 0 else k
        elif c in " \t\r":
            end()
            i += 1
        elif c in "\n;&|" and depth > 0 and c == "\n":
            end()  # a newline inside NAME=( ... ) separates its words
            i += 1
        elif c in "\n;&|":
            end()
            if words:
                stmts.append(words)
                words = []
            if c in "&|" and i + 1 < n and text[i + 1] == c:
                stmts.append([[(c * 2,)]])  # the next statement runs on the last one's status
                i += 1
            i += 1
        elif c in "()":
            end()
            depth = max(0, depth + (1 if c == "(" else -1))
            words.append([(c,)])
            i += 1
        elif c in "<>":
            end()
            words.append([("lit", c)])
            i += 1
        else:
            lit(c)
            i += 1
    end()
    if words:
        stmts.append(words)
    return stmts


def _expand(word: list[tuple], env: dict[str, Any]) -> list[Any]:
    """The words ``word`` stands for (unquoted and array expansions split on blanks); an unknown
    part makes the whole word one :class:`_Unknown`."""
    if len(word) == 1 and word[0][0] in ("(", ")", "&&", "||"):
        return [word[0][0]]
    out = ""
    split: list[str] | None = None
    for part in word:
        if part[0] == "lit":
            out += part[1]
        elif part[0] == "cmd":
            got = _substitute(part[1], env)
            if isinstance(got, _Unknown):
                return [got]
            if len(word) == 1:
                split = got.split()
            out += got
        else:
            _v, name, default, array, quoted, special = part
            val = None if special else env.get(name)
            if val is None and default is not None:
                val = default
            if val is None:
                return [_Unknown(("$" + name) if not special else name)]
            if isinstance(val, _Unknown):
                return [val]
            if isinstance(val, list):
                if array and len(word) == 1:
                    return list(val)
                val = " ".join(str(v) for v in val) if array else str(val[0]) if val else ""
            if not quoted and len(word) == 1:
                split = val.split()
            out += val
    return split if split is not None else [out]


#: The environment key of the launch file's own absolute path (not a shell name): what
#: ``$(realpath $0)`` gives (:func:`_substitute`).
SELF = "$0"


def _substitute(cmd: str, env: dict[str, Any]) -> str | _Unknown:
    """The text of a command substitution dtsim gives without running anything, else an
    :class:`_Unknown`: ``$(realpath $0)`` and ``$(readlink -f $0)``, the launch file's own
    absolute path (whichever folder it is run from: what DeepSpeedExamples' scripts take
    their ds_config's folder from, ``script_path=$(realpath $0)``; its ``$0`` alone
    depends on how it is invoked and stays unknown), and ``$(dirname W)`` /
    ``$(basename W)`` of one known word, as coreutils cuts the text. Any other command
    (``$(cat f)``, ``$(realpath x)``, ``$(dirname $1)``) is never run: unknown."""
    unknown = _Unknown(f"{cmd} (a command substitution: never run)")
    inner = cmd[2:-1] if cmd.startswith("$(") else cmd[1:-1]
    try:
        stmts = _lex(inner, "a command substitution")
    except ConfigError:
        return unknown
    if len(stmts) != 1 or not stmts[0] or stmts[0][0][0][0] != "lit":
        return unknown
    head, args = stmts[0][0], stmts[0][1:]
    name = head[0][1] if len(head) == 1 else ""
    if name == "readlink" and args and args[0] == [("lit", "-f")]:
        name, args = "realpath", args[1:]
    if len(args) != 1:
        return unknown
    if name == "realpath":
        arg = args[0]
        own = len(arg) == 1 and arg[0][0] == "var" and arg[0][1] == "$0"
        return env[SELF] if own and isinstance(env.get(SELF), str) else unknown
    if name in ("dirname", "basename"):
        vals = _expand(args[0], env)
        if len(vals) != 1 or not isinstance(vals[0], str) or not vals[0]:
            return unknown
        text = vals[0].rstrip("/") or "/"
        if name == "basename":
            return posixpath.basename(text) or "/"
        head_ = posixpath.dirname(text)
        return (head_.rstrip("/") or "/") if head_ else "."
    return unknown


def _lit(word: list[tuple]) -> str | None:
    """The text of a word that is one literal part, else None."""
    return word[0][1] if len(word) == 1 and word[0][0] == "lit" else None


def _test(words: list[Any]) -> bool | None:
    """A test's value: ``[ A = B ]``, ``[ A == B ]``, ``[ A != B ]``, ``[ -z A ]``, ``[ -n A ]``
    (or ``[[ ... ]]``, ``test ...``; after ``!``, negated) of known words, as text compares
    them; anything else (a file test, a number comparison, an unknown word) is None."""
    if words and words[0] == "test":
        words = words[1:]
    elif len(words) >= 2 and (words[0], words[-1]) in (("[", "]"), ("[[", "]]")):
        words = words[1:-1]
    else:
        return None
    neg = bool(words) and words[0] == "!"
    words = words[1:] if neg else words
    if any(not isinstance(w, str) for w in words):
        return None
    if len(words) == 3 and words[1] in ("=", "==", "!="):
        value = (words[0] == words[2]) == (words[1] != "!=")
    elif len(words) == 2 and words[0] in ("-z", "-n"):
        value = (words[1] == "") == (words[0] == "-z")
    else:
        return None
    return value != neg


@dataclass(frozen=True)
class Launch:
    """A launch statement read from a file: its environment, launcher options, script and
    Megatron-LM arguments (words, a word dtsim did not evaluate an :class:`_Unknown`)."""

    env: dict[str, Any]
    launcher: tuple[Any, ...]
    script: str
    args: tuple[Any, ...]


_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)", re.S)


def parse_launch(text: str, where: str = "plan", launchers: tuple[str, ...] | None = None,
                 example: str = "torchrun ... pretrain_gpt.py ...",
                 path: str | os.PathLike[str] | None = None) -> Launch:
    """The launch statement of a shell script or text file (never run): a command running a
    ``.py`` script by ``torchrun``, ``python`` or itself, or (``launchers`` given) by one of
    those commands only (e.g. ``("deepspeed",)``; then ``eval WORDS`` is read as the command
    its words joined make, as the shell would run it)."""
    env: dict[str, Any] = {} if path is None else {SELF: str(Path(path).resolve())}
    launches: list[Launch] = []
    unread: list[_Unknown] = []  # words an ``eval`` would have run, not evaluated
    hidden: list[str] = []  # launches under a condition dtsim does not evaluate
    # if/elif/else/fi: per open ``if``, [this branch's condition, whether a branch ran]
    # (True, False, or None: a condition dtsim does not evaluate); && and || guard the next
    # statement by the last one's status (a command other than a test taken to succeed)
    frames: list[list[Any]] = []
    status: bool | None = True
    guard: str | None = None
    why: str | None = None  # the first condition dtsim does not evaluate, for the refusals
    for stmt in _lex(text, where):
        if stmt == [[("&&",)]] or stmt == [[("||",)]]:
            guard = stmt[0][0][0]
            continue
        head = _lit(stmt[0]) if stmt else None
        if head in ("if", "elif", "else", "fi", "then"):
            words = [x for w in stmt[1:] for x in _expand(w, env)]
            if head == "then":  # the rest of the statement is the branch's first
                stmt = stmt[1:]
                head = _lit(stmt[0]) if stmt else None
            elif head == "fi":
                if frames:
                    frames.pop()
                continue
            elif head == "else":
                if frames:
                    ran = frames[-1][1]
                    frames[-1][0] = False if ran is True else (None if ran is None else True)
                stmt, head = stmt[1:], (_lit(stmt[1]) if len(stmt) > 1 else None)
            else:
                cond = _test(words)
                if cond is None and why is None:
                    why = " ".join(map(str, words))
                if head == "if":
                    frames.append([cond, cond])
                elif frames:
                    ran = frames[-1][1]
                    frames[-1][0] = False if ran is True else (
                        None if ran is None or cond is None else cond)
                    frames[-1][1] = True if ran is True or cond is True else (
                        None if ran is None or cond is None else False)
                continue
            if not stmt:
                continue
        state: bool | None = True
        for f in frames:
            state = False if f[0] is False or state is False else (
                None if f[0] is None or state is None else True)
        if guard is not None:
            g = status if guard == "&&" else (None if status is None else not status)
            state = False if g is False or state is False else (
                None if g is None or state is None else True)
            guard = None
        if state is False:
            continue
        if head in ("[", "[[", "test"):
            status = _test([x for w in stmt for x in _expand(w, env)])
            if status is None and why is None:
                why = " ".join(str(x) for w in stmt for x in _expand(w, env))
            continue
        status = True
        k = 0
        local: dict[str, Any] = {}
        while k < len(stmt):
            w = stmt[k]
            first = w[0] if w and w[0][0] == "lit" else None
            if k == 0 and first is not None and len(w) == 1 and first[1] in ("export", "declare",
                                                                            "local", "readonly"):
                k += 1
                continue
            m = _ASSIGN.fullmatch(first[1]) if first is not None else None
            if m is None:
                break
            name = m.group(1)
            if k + 1 < len(stmt) and stmt[k + 1] == [("(",)] and m.group(3) == "":
                items: list[Any] = []
                k += 2
                while k < len(stmt) and stmt[k] != [(")",)]:
                    items.extend(_expand(stmt[k], {**env, **local}))
                    k += 1
                local[name] = (list(env.get(name) or []) if m.group(2) else []) + items
                k += 1
                continue
            rest = [("lit", m.group(3))] + w[1:] if m.group(3) else w[1:]
            vals = _expand(rest, {**env, **local}) if rest else [""]
            val = vals[0] if len(vals) == 1 and isinstance(vals[0], _Unknown) else \
                " ".join(str(v) for v in vals)
            local[name] = val
            k += 1
        if state is None:  # under a condition dtsim does not evaluate: set or not, unknown
            local = {name: _Unknown(f"${name} (set under a condition dtsim does not evaluate: "
                                    f"{why})") for name in local}
        if k >= len(stmt):
            env.update(local)
            continue
        scope = {**env, **local}
        words: list[Any] = []
        for w in stmt[k:]:
            words.extend(_expand(w, scope))
        if launchers is not None and words and words[0] == "eval":
            # eval runs its words joined as one command line: read them as the file's text
            unknown = [w for w in words[1:] if isinstance(w, _Unknown)]
            inner = _lex(" ".join(map(str, words[1:])), where) if not unknown else []
            if unknown or len(inner) != 1:
                unread.extend(unknown)
                continue
            words = [x for w in inner[0] for x in _expand(w, scope)]
        script = next((j for j, x in enumerate(words)
                       if isinstance(x, str) and x.endswith(".py") and not re.search(r"\s", x)),
                      None)
        head = os.path.basename(words[0]) if words and isinstance(words[0], str) else ""
        ok = head in launchers if launchers is not None else \
            script == 0 or head == "torchrun" or head.startswith("python")
        if script is None or not ok:
            continue  # another command (cd, mkdir, echo, ...): not run, not read
        if state is None:  # a launch that may or may not run
            hidden.append(str(why))
            continue
        launches.append(Launch(env=scope, launcher=tuple(words[:script]),
                               script=words[script], args=tuple(words[script + 1:])))
    check(not hidden, "plan", f"a launch file whose launch runs whatever its conditions are "
          f"(if, &&, ||: dtsim evaluates [ A = B ], [ A != B ], [ -z A ] and [ -n A ] of known "
          f"words only) at {where}: a command running a .py script under the condition",
          hidden[0] if hidden else None)
    check(launches or not unread, "plan", f"a launch file with one command running a .py "
          f"script ({example}) at {where}: its eval runs a word dtsim does not evaluate",
          str(unread[0]) if unread else None)
    check(len(launches) == 1, "plan", f"a launch file with one command running a .py script "
          f"({example}) at {where}", f"{len(launches)} such commands")
    return launches[0]


# --------------------------------------------------------------------------- options


def _is_option(x: Any) -> bool:
    return isinstance(x, str) and x.startswith("-") and not re.fullmatch(r"-[0-9.]+", x)


def _options(words: tuple[Any, ...], where: str, flags: set[str],
             lists: frozenset[str] = frozenset()) -> list[tuple[Any, Any]]:
    """(option, value or None) pairs; a word after an option is its value unless the option is a
    flag of ``flags`` (Megatron-LM has no positional argument: a word that is not an option
    follows an option that takes a value); an option of ``lists`` takes every word up to the
    next option, its value a tuple of them (argparse's ``nargs="+"``)."""
    out: list[tuple[Any, Any]] = []
    k = 0
    while k < len(words):
        w = words[k]
        check(_is_option(w), "plan", f"an option (--name) at {where}: Megatron-LM takes no "
              "positional argument, and a word dtsim does not evaluate cannot stand for options",
              str(w))
        if "=" in w and w.startswith("--"):
            name, _, value = w.partition("=")
            out.append((name, (value,) if name in lists else value))
            k += 1
        elif w in lists:
            end = k + 1
            while end < len(words) and not _is_option(words[end]):
                end += 1
            out.append((w, tuple(words[k + 1:end]) or None))
            k = end
        elif w not in flags and k + 1 < len(words) and not _is_option(words[k + 1]):
            out.append((w, words[k + 1]))
            k += 2
        else:
            out.append((w, None))
            k += 1
    return out


#: Digits of a count (an option's value, a hostfile's slots) read at most: 18 is below 10^18,
#: more GPUs than any machine, and Python's int() refuses text of over 4300 digits (a
#: traceback, not a line).
MAX_DIGITS = 18


def _int(name: str, value: Any, where: str, low: int = 1) -> int:
    if isinstance(value, _Unknown):
        raise ConfigError("plan", f"a value dtsim can read for {name} at {where} (the file does "
                          "not set it; nothing in it is run)", str(value))
    long = isinstance(value, str) and len(value.lstrip("0")) > MAX_DIGITS
    check(isinstance(value, str) and re.fullmatch(r"[0-9]+", value) is not None and not long
          and int(value) >= low, "plan", f"an integer >= {low}"
          f"{f' of at most {MAX_DIGITS} digits' if long else ''} for {name} at {where}", value)
    return int(value)


_KNOWN = set(READ) | set(REFUSED)


def _megatron_options(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    flags = {k for k, v in READ.items() if v == "flag"} | {
        k for k in REFUSED if k not in ("--num-layers-per-virtual-pipeline-stage",
                                        "--pipeline-model-parallel-layout", "--num-experts",
                                        "--recompute-method", "--recompute-num-layers",
                                        "--spec",
                                        "--fp8-format", "--fp4-format", "--ddp-bucket-size",
                                        "--ddp-num-buckets", "--model-parallel-size",
                                        "--encoder-num-layers", "--decoder-num-layers",
                                        "--hybrid-layer-pattern", "--yaml-cfg")}
    got: dict[str, Any] = {}
    for name, value in _options(args, where, flags, LISTS):
        if isinstance(name, _Unknown):
            raise ConfigError("plan", f"an option dtsim can read at {where}", str(name))
        hyphen = "--" + name.lstrip("-").replace("_", "-")
        if name not in _KNOWN and hyphen in _KNOWN:
            raise ConfigError("plan", f"an option spelled as Megatron-LM defines it ({hyphen}: "
                              f"its parser has no other spelling, allow_abbrev=False, "
                              f"{_MEG} megatron/training/arguments.py:119-120) at {where}", name)
        if name in REFUSED:
            raise ConfigError("plan", f"a Megatron-LM run dtsim models: {name} sets "
                              f"{REFUSED[name]}, which dtsim does not model ({where})", name)
        if name in READ:
            if READ[name] == "flag":
                check(value is None, "plan", f"no value for the flag {name} at {where}", value)
                got[name] = True
            elif READ[name] == "word":
                allowed, rule = WORDS[name]
                check(value is not None, "plan", f"a value for {name} at {where}", None)
                for one in value if name in LISTS else (value,):
                    if isinstance(one, _Unknown):
                        raise ConfigError("plan", f"a value dtsim can read for {name} at "
                                          f"{where} (the file does not set it; nothing in it "
                                          "is run)", str(one))
                    check(one in allowed, "plan", f"{name} {rule} at {where}", one)
                got[name] = value
            else:
                check(value is not None, "plan", f"a value for {name} at {where}", None)
                got[name] = _int(name, value, where)
    for name, (what, line) in ONE.items():
        if name in got:
            check(got[name] == 1, "plan", f"a Megatron-LM run dtsim models: {name} > 1 is "
                  f"{what} ({line}), which dtsim does not model ({where})", got[name])
    return got


def _torchrun(launcher: tuple[Any, ...], env: dict[str, Any], where: str) -> tuple[int, int]:
    """(nodes, processes per node) of the launcher's options (torchrun's defaults 1 and 1), or a
    world of ``WORLD_SIZE`` on one node."""
    words = list(launcher)
    launched = False
    base = os.path.basename(words[0]) if words and isinstance(words[0], str) else ""
    if base == "torchrun":
        words, launched = words[1:], True
    elif base.startswith("python"):
        words = [w for w in words[1:] if w != "-u"]
        if words[:2] in (["-m", "torch.distributed.run"], ["-m", "torch.distributed.launch"]):
            words, launched = words[2:], True
    if not launched:  # the script run by itself: Megatron-LM's WORLD_SIZE (default 1), one node
        check(not words, "plan", f"a launch by torchrun, python -m torch.distributed.run or "
              f"python at {where}", " ".join(map(str, launcher)))
        ws = env.get("WORLD_SIZE", "1")
        return 1, _int("WORLD_SIZE", ws, where)
    nnodes, nproc = "1", "1"
    for name, value in _options(tuple(words), f"{where} (launcher)", TORCHRUN_FLAGS):
        if name == "--nnodes":
            nnodes = value
        elif name in ("--nproc-per-node", "--nproc_per_node"):
            nproc = value
    if isinstance(nnodes, str) and re.fullmatch(r"([0-9]+):\1", nnodes):
        nnodes = nnodes.partition(":")[0]
    return _int("--nnodes", nnodes, where), _int("--nproc-per-node", nproc, where)


def is_megatron_launch(path: str | os.PathLike[str], text: str | None = None) -> bool:
    """Whether a plan file is a Megatron-LM launch line: not ``.json`` or ``.toml`` and holding
    one of :data:`MARKERS` or a Megatron-LM v1.1.5 launch on DeepSpeed
    (:func:`sim.profiles.deepspeed_args.is_deepspeed_launch`)."""
    if Path(path).suffix.lower() in (".json", ".toml"):
        return False
    if text is None:
        text = _read(path)
    from .deepspeed_args import is_deepspeed_launch

    return any(m in text for m in MARKERS) or is_deepspeed_launch(text)


def _read(path: str | os.PathLike[str]) -> str:
    from ..errors import read_input_bytes

    data = read_input_bytes("plan", Path(path), limit=MAX_LAUNCH_BYTES,
                            rule="a readable plan file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError("plan", "a text file (UTF-8)",
                          f"{path} (byte at offset {exc.start} is not text)") from None


def megatron_plan_from_text(text: str, where: str, model: Any,
                            gpu: str | dict[str, str] | None,
                            zone: str | dict[str, str] | None = None,
                            path: str | os.PathLike[str] | None = None) -> Plan:
    """The :class:`Plan` of a Megatron-LM launch line (``path``: the launch file, whose own
    path ``$(realpath $0)`` gives; None: unknown).

    ``model`` is the model profile the plan runs (a
    :class:`~sim.profiles.values.ModelProfile`: its layers are the plan's), ``gpu`` the GPU
    type of every rank, ``zone`` their zone (default ``"default"``).
    """
    check(gpu is not None, "gpu", "given (--gpu NAME) with a Megatron-LM launch plan (it names "
          "no GPU type)", where)
    check(model is not None, "model", "given (--model NAME) with a Megatron-LM launch plan", where)
    launch = parse_launch(text, where, path=path)
    opts = _megatron_options(launch.args, where)
    nodes, per = _torchrun(launch.launcher, launch.env, where)
    world = nodes * per
    check_gpu_hosts(gpu, lambda h: re.fullmatch(r"n(0|[1-9][0-9]{0,17})", h) is not None
                    and int(h[1:]) < nodes, f"n0 to n{nodes - 1}", where)
    if isinstance(gpu, dict) and "" not in gpu:  # each host a type: the first without one
        for i in range(min(nodes, len(gpu) + 1)):
            gpu_on(gpu, f"n{i}", where)
    tp = opts.get("--tensor-model-parallel-size", 1)
    pp = opts.get("--pipeline-model-parallel-size", 1)
    check(world % (tp * pp) == 0, "plan", f"a world size ({world} = {nodes} nodes x {per}) "
          f"divisible by TP x PP ({tp} x {pp}; {_MEG} megatron/training/arguments.py:432-434) "
          f"at {where}", world)
    dp = world // (tp * pp)
    check(per % tp == 0, "plan", f"--nproc-per-node ({per}) a multiple of TP ({tp}): a TP group "
          f"across two nodes is not modelled ({where})", per)
    check("--num-layers" in opts, "plan", f"--num-layers given at {where}", None)
    layers = opts["--num-layers"]
    first = opts.get("--decoder-first-pipeline-num-layers")
    last = opts.get("--decoder-last-pipeline-num-layers")
    per_stage = _split(layers, pp, first, last, where)
    # the model profile: layer 0 the embedding, the transformer layers, then the output layer(s)
    transformer = _transformer_layers(model)
    check(transformer == layers, "plan", f"--num-layers equal to the transformer layers of the "
          f"model profile {model.name} ({transformer}) at {where}", layers)
    # Megatron-LM's GPT ties its output layer to the embedding unless this flag is given
    # (arguments.py:2460): the launch must train the model profiled. The shipped OPT-350 is
    # untied (the Sailor artifact's OPTModelPipe gives its head a weight of its own:
    # sim.profiles.sailor.ties_embeddings), so its launch gives the flag; a profile with
    # tied_embeddings true takes a launch without it (then the tied all-reduce runs)
    untie = opts.get("--untie-embeddings-and-output-weights", False)
    check(untie != bool(model.tied_embeddings), "plan", f"--untie-embeddings-and-output-weights "
          f"{'absent' if model.tied_embeddings else 'given'} for {model.name}, whose profile "
          f"{'ties' if model.tied_embeddings else 'does not tie'} its embedding and output "
          f"weights ({_MEG} arguments.py:2460) at {where}",
          "given" if untie else "absent")
    check_model_shape(opts, model, where)
    check_shape_layer(opts, model, where)
    check("--micro-batch-size" in opts, "plan", f"--micro-batch-size given at {where}", None)
    mbs = opts["--micro-batch-size"]
    gbs = opts.get("--global-batch-size", mbs * dp)
    check(gbs % (mbs * dp) == 0, "plan", f"a global batch size divisible by micro-batch size x "
          f"DP ({mbs} x {dp}; {_MEG} megatron/core/num_microbatches_calculator.py:381) at "
          f"{where}", gbs)
    check(not (opts.get("--fp16") and opts.get("--bf16")), "plan", f"at most one of --fp16 and "
          f"--bf16 at {where}", "both")
    precision = "fp16" if opts.get("--fp16") else "bf16" if opts.get("--bf16") else "fp32"
    options = []
    if opts.get("--overlap-grad-reduce"):
        options.append(("overlap_grad_reduce", True))
    if opts.get("--accumulate-allreduce-grads-in-fp32"):
        options.append(("accumulate_allreduce_grads_in_fp32", True))
    if opts.get("--use-distributed-optimizer"):
        options.append(("use_distributed_optimizer", True))
    if opts.get("--overlap-param-gather"):  # Megatron-LM's asserts, arguments.py:1024-1029
        for need in ("--use-distributed-optimizer", "--overlap-grad-reduce"):
            check(bool(opts.get(need)), "plan", f"--overlap-param-gather only with {need} "
                  f"({_MEG} megatron/training/arguments.py:1024-1029) at {where}", "without it")
        check(False, "plan", f"a Megatron-LM run dtsim models: --overlap-param-gather makes "
              "each stage's first forward pass wait for its parameters' all-gather after "
              "receiving its input (align_param_gather off without interleaving, "
              f"arguments.py:1013; distributed_data_parallel.py:517), which dtsim does not "
              f"model ({where})", "--overlap-param-gather")
    # the attention (sim.profiles.frameworks.attention_path): options only where not Megatron's
    # defaults, so a launch without them is the plan it was
    if opts.get("--transformer-impl", "transformer_engine") != "transformer_engine":
        options.append(("transformer_impl", opts["--transformer-impl"]))
    if opts.get("--attention-backend", "auto") != "auto":
        options.append(("attention_backend", opts["--attention-backend"]))
    # --recompute-activations sets selective (arguments.py:607-608); a granularity given is
    # read as given (selective: the only one dtsim models)
    if opts.get("--recompute-activations") or "--recompute-granularity" in opts:
        options.append(("recompute_granularity", "selective"))
    # --recompute-modules core_attn alone recomputes nothing (transformer_config.py:1943-1944): ignored
    fw = FrameworkSpec("megatron", "0.20.0", precision, tuple(options))
    stages = []
    lo = 0
    total = model.layers
    for p in range(pp):
        hi = lo + per_stage[p]  # transformer layers lo..hi-1 are profile layers lo+1..hi
        a = 0 if p == 0 else lo + 1
        b = total - 1 if p == pp - 1 else hi
        reps = []
        for d in range(dp):
            rank = p * tp * dp + d * tp
            g = gpu_on(gpu, f"n{rank // per}", where)  # type: ignore[arg-type]
            reps.append(ReplicaSpec(gpu=g, tp=tp, gpus_per_node=per, zone=zone_on(zone, g),
                                    host=f"n{rank // per}"))
        stages.append(StageSpec(layers=tuple(range(a, b + 1)), replicas=tuple(reps)))
        lo = hi
    return Plan(stages=tuple(stages), microbatch_size=mbs, global_batch_size=gbs,
                model=model.name, framework=fw)


def parse_gpus(text: str) -> str | dict[str, str]:
    """``--gpu``'s value: ``NAME``, the GPU type of every rank, or ``[NAME,]HOST=NAME,...``,
    each named host's type and the others' ``NAME`` (a mixed cluster: ``V100,g4dn-0=T4``;
    the hosts are the hostfile's, or ``n0``, ``n1``, ... of a torchrun launch): a dict, the
    default under the key ``""``."""
    items = [x.strip() for x in str(text).split(",")]
    if len(items) == 1 and "=" not in items[0]:
        return items[0]
    out: dict[str, str] = {}
    for x in items:
        host, eq, gpu = x.rpartition("=")
        check(bool(gpu) and (bool(host) or not eq) and host not in out, "gpu",
              "NAME, or [NAME,]HOST=NAME,... (one GPU type per host, one default at most)", text)
        out[host] = gpu
    return out


def gpu_on(gpu: str | dict[str, str], host: str, where: str) -> str:
    """The GPU type of ``host``'s ranks under ``--gpu`` (:func:`parse_gpus`)."""
    if isinstance(gpu, str):
        return gpu
    got = gpu.get(host, gpu.get(""))
    check(got is not None, "gpu", f"a GPU type for every host of the launch (--gpu NAME,"
          f"HOST=NAME,...: {host} has none) at {where}", ",".join(
              f"{h}={g}" if h else g for h, g in gpu.items()))
    return got  # type: ignore[return-value]


def check_gpu_hosts(gpu: str | dict[str, str], known: Any, hosts: str, where: str) -> None:
    """Every host ``--gpu`` names is one of the launch's (``known(host)``; ``hosts`` says which
    they are): a typo would run it with the default type."""
    if isinstance(gpu, dict):
        extra = sorted(h for h in gpu if h and not known(h))
        check(not extra, "gpu", f"HOST=NAME entries naming hosts of the launch ({hosts}) at "
              f"{where}", ", ".join(extra))


def zone_on(zone: str | dict[str, str] | None, gpu: str) -> str:
    """The zone of a replica of type ``gpu``: ``zone``, or its entry for the type."""
    if isinstance(zone, dict):
        return zone.get(gpu) or "default"
    return zone or "default"


def check_model_shape(opts: dict[str, Any], model: Any, where: str) -> None:
    """The launch's ``--hidden-size``, ``--num-attention-heads`` and ``--seq-length`` (those
    given) are the model profile's: its shape's, or (a profile without one) seq x hidden the
    values a transformer layer outputs per sample."""
    for name, key in (("--hidden-size", "hidden"), ("--num-attention-heads", "heads"),
                      ("--seq-length", "sequence")):
        shape = getattr(model, "shape", None)
        if shape is not None and name in opts:
            check(opts[name] == getattr(shape, key), "plan", f"{name} equal to the model "
                  f"profile's {key} ({getattr(shape, key)}) at {where}", opts[name])
    sizes = dict(getattr(model, "sizes", ()) or ())
    if getattr(model, "shape", None) is None and 1 in sizes and len(sizes[1]) > 1 \
            and "--seq-length" in opts and "--hidden-size" in opts:
        # a transformer layer's output per sample is seq x hidden values (sim.profiles.sailor:
        # llm_info's act_output_bytes): the launch's shape must be the one profiled
        values = sizes[1][1].activation_bytes / model.bytes_per_value
        got = opts["--seq-length"] * opts["--hidden-size"]
        check(got == values, "plan", f"--seq-length x --hidden-size equal to the values a "
              f"transformer layer of the model profile {model.name} outputs per sample "
              f"({values:.0f}) at {where}", got)


def check_shape_layer(opts: dict[str, Any], model: Any, where: str) -> None:
    """A Megatron Core launch on a model given by its shape builds the shape's layer
    (:data:`SHAPE_LAYER`) and position embedding, or is refused (a measured profile is what
    was measured: not checked)."""
    shape = getattr(model, "shape", None)
    if shape is not None:
        # a shape is one layer (SHAPE_LAYER); an option that builds another would be ignored
        # and every size, FLOP and byte of the estimate would be the shape's, not the run's
        for name, what in SHAPE_REFUSED.items():
            check(name not in opts, "plan", f"a launch of the layer a model given by its shape "
                  f"is ({SHAPE_LAYER}): {name} sets {what}, which a shape does not model "
                  f"({_MEG}; {where})", name)
        if "--ffn-hidden-size" in opts:
            check(opts["--ffn-hidden-size"] == 4 * shape.hidden, "plan", f"--ffn-hidden-size "
                  f"equal to 4 x the model profile's hidden ({4 * shape.hidden}: the MLP of a "
                  f"model given by its shape, {SHAPE_LAYER}; another width is not modelled) at "
                  f"{where}", opts["--ffn-hidden-size"])
        # Megatron-LM's default learned_absolute (arguments.py:2397) keeps an s x h table in
        # the embedding; rope and none keep none (language_model_embedding.py:47, 71): the
        # launch and the shape must say the same
        kind = opts.get("--position-embedding-type", "learned_absolute")
        check(kind == shape.position_embedding, "plan", f"--position-embedding-type equal to "
              f"the model profile's shape position_embedding ({shape.position_embedding}; "
              f"Megatron-LM's default learned_absolute, {_MEG} megatron/training/arguments.py:"
              f"2397; a shape takes learned_absolute, rope or none) at {where}", kind)
        if "--group-query-attention" in opts:
            groups = opts.get("--num-query-groups", 1)  # its argparse default
            check(groups == shape.heads, "plan", f"--num-query-groups equal to the model "
                  f"profile's heads ({shape.heads}) with --group-query-attention (fewer "
                  f"key-value heads than heads are not modelled: {SHAPE_LAYER}; "
                  f"{_MEG} megatron/training/argument_utils.py:330-333) at {where}", groups)


def _split(layers: int, pp: int, first: int | None, last: int | None, where: str) -> list[int]:
    """Transformer layers per stage (Megatron-LM's get_num_layers_to_build)."""
    if first is None and last is None:
        check(layers % pp == 0, "plan", f"--num-layers ({layers}) divisible by the pipeline "
              f"size ({pp}; {_MEG} megatron/training/arguments.py:985-997) at {where}", layers)
        return [layers // pp] * pp
    check(pp > 1, "plan", f"--pipeline-model-parallel-size > 1 with --decoder-first/last-"
          f"pipeline-num-layers at {where}", pp)
    rest, left = layers, pp
    if first is not None:
        rest, left = rest - first, left - 1
    if last is not None:
        rest, left = rest - last, left - 1
    check(rest >= 0 and (left == 0 and rest == 0 or left > 0 and rest % left == 0), "plan",
          f"the layers left after the first/last stage's divisible by the stages left "
          f"({_MEG} megatron/core/transformer/transformer_block.py:141-147) at {where}",
          f"{rest} layers over {left} stages")
    mid = rest // left if left else 0
    out = [mid] * pp
    if first is not None:
        out[0] = first
    if last is not None:
        out[-1] = last
    check(all(x >= 1 for x in out), "plan", f"at least one transformer layer per stage at {where}",
          out)
    return out


def _transformer_layers(model: Any) -> int:
    """Transformer layers of a model profile: its shape's, else its layers less the embedding and
    the output layer(s) (:func:`sim.profiles.sailor.untied_tail_layers`, at least 1)."""
    from .sailor import untied_tail_layers

    if getattr(model, "shape", None) is not None:
        return model.shape.layers
    return model.layers - 1 - max(1, untied_tail_layers(model.name))


def read_megatron_plan(path: str | os.PathLike[str], model: Any,
                       gpu: str | dict[str, str] | None,
                       zone: str | dict[str, str] | None = None) -> Plan:
    """A Megatron-LM launch file as a :class:`Plan` (see the module docstring); one of
    Megatron-LM v1.1.5 on DeepSpeed (:func:`sim.profiles.deepspeed_args.is_deepspeed_launch`)
    by :mod:`sim.profiles.deepspeed_args`."""
    from .deepspeed_args import deepspeed_plan_from_text, is_deepspeed_launch

    text = _read(path)
    if is_deepspeed_launch(text):
        return deepspeed_plan_from_text(text, str(path), model, gpu, zone,
                                        base=Path(path).parent)
    return megatron_plan_from_text(text, str(path), model, gpu, zone, path=path)
