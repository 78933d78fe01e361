"""The inputs of a real training run as values: model profile, GPU catalogue, fleet and network, plan.

Every class is a frozen dataclass validated on construction (one
:class:`~sim.errors.ConfigError` line naming the field, the rule and the
value), holding only numbers, strings and tuples, so a value hashes and
pickles like a config. Lookups that would be slow on tuples (a profile's
times by GPU type, micro-batch size and TP degree; a network's links) build a
dictionary once, on first use.

Units: seconds, bytes, bytes per second, US dollars per GPU-hour.

The readers of dtsim's own JSON/TOML formats are in :mod:`sim.profiles.formats`,
those of the Sailor artifact's formats in :mod:`sim.profiles.sailor`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..errors import ConfigError, check, check_int, check_nonnegative, check_positive
from ..network.curves import BandwidthCurve, Capacity, bandwidth_at
from .frameworks import FrameworkSpec

__all__ = [
    "LayerTimes",
    "LayerSizes",
    "ModelShape",
    "shape_sizes",
    "ATTENTION_PATHS",
    "ModelProfile",
    "GPUType",
    "GPUCatalogue",
    "NodeKind",
    "Link",
    "NetworkProfile",
    "Fleet",
    "ReplicaSpec",
    "StageSpec",
    "Plan",
    "MeasuredRun",
    "Profiles",
]


def _name(field_name: str, value: Any) -> str:
    check(isinstance(value, str) and value.strip() != "" and value == value.strip(),
          field_name, "a non-empty name without surrounding spaces", value)
    return value


# --------------------------------------------------------------------------- model profile


@dataclass(frozen=True)
class LayerTimes:
    """Times of one layer for one micro-batch on one GPU (seconds).

    ``optimizer`` is the layer's share of the optimizer step (the time of the
    step over the layer's parameters); a stage's optimizer step is the sum
    over its layers. A forward-only profile leaves ``backward`` (and
    ``optimizer``) None: :mod:`sim.profiles.estimates` gives them by its rules.
    """

    forward: float
    backward: float | None
    optimizer: float | None = 0.0

    def __post_init__(self) -> None:
        f, b, o = self.forward, self.backward, self.optimizer
        if (type(f) is float and type(b) is float and type(o) is float
                and 0.0 <= f < math.inf and 0.0 <= b < math.inf and 0.0 <= o < math.inf):
            return  # the common case, checked without the helpers (profiles hold thousands)
        object.__setattr__(self, "forward", check_nonnegative("forward", f))
        for k in ("backward", "optimizer"):
            if getattr(self, k) is not None:
                object.__setattr__(self, k, check_nonnegative(k, getattr(self, k)))


@dataclass(frozen=True)
class LayerSizes:
    """Sizes of one layer on one GPU of a TP group of the given degree.

    Parameters
    ----------
    params : int
        Parameters the GPU holds for this layer (its TP shard).
    activation_bytes : float
        Bytes of the layer's output for one sample (micro-batch size 1): what a
        stage that ends with this layer sends to the next one (and the size of
        the gradient it receives back).
    activation_memory_bytes : float
        Bytes the layer keeps for its backward pass, per sample, on this GPU.
    """

    params: int
    activation_bytes: float
    activation_memory_bytes: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", check_int("params", self.params, low=0))
        for k in ("activation_bytes", "activation_memory_bytes"):
            object.__setattr__(self, k, check_nonnegative(k, getattr(self, k)))


#: A shape's position embeddings (:class:`ModelShape`): Megatron-LM's
#: ``--position-embedding-type`` values that keep a learned table (``learned_absolute``) or
#: none (``rope``, ``none``).
POSITION_EMBEDDINGS = ("learned_absolute", "rope", "none")
#: The most transformer layers a model given by its shape may have (:class:`ModelShape`).
MAX_SHAPE_LAYERS = 10_000


@dataclass(frozen=True)
class ModelShape:
    """A GPT-style transformer by its shape (Megatron-LM's layout: embedding, ``layers``
    transformer layers, final layer norm and output head).

    Parameters
    ----------
    layers : int
        Transformer layers ``l``.
    hidden : int
        Hidden size ``h``.
    heads : int
        Attention heads ``a``.
    sequence : int
        Sequence length ``s``.
    vocabulary : int
        Vocabulary ``V`` (padded as trained).
    tied : bool
        Whether the output head is the word embedding, tied; a profile's
        ``tied_embeddings`` must say the same.
    position_embedding : str
        Megatron-LM's ``--position-embedding-type`` of the model (:data:`POSITION_EMBEDDINGS`):
        ``learned_absolute`` (its default) keeps a learned ``s x h`` position table in the
        embedding, replicated on every TP rank; ``rope`` and ``none`` keep none
        (NVIDIA/Megatron-LM d98e8a64dd core/models/common/embeddings/
        language_model_embedding.py:47, 71: ``add_position_embedding`` only for
        ``learned_absolute``; the table a plain ``torch.nn.Embedding``).
    """

    layers: int
    hidden: int
    heads: int
    sequence: int
    vocabulary: int
    tied: bool = True
    position_embedding: str = "learned_absolute"

    def __post_init__(self) -> None:
        for k in ("layers", "hidden", "heads", "sequence", "vocabulary"):
            check_int(k, getattr(self, k), low=1)
        # each layer is estimated, searched and simulated one by one (a 10^5-layer shape took
        # a 40 s dtsim plan, 10^6 a runaway): 10 times the deepest transformer trained
        # (DeepNet's 1,000 layers: Wang et al. 2022, arXiv:2203.00555)
        check(self.layers <= MAX_SHAPE_LAYERS, "layers", f"an integer in [1, "
              f"{MAX_SHAPE_LAYERS}] (10 x DeepNet's 1,000, the deepest transformer trained)",
              self.layers)
        check(self.hidden % self.heads == 0, "heads", f"a divisor of hidden ({self.hidden})",
              self.heads)
        check(isinstance(self.tied, bool), "tied", "true or false", self.tied)
        check(self.position_embedding in POSITION_EMBEDDINGS, "position_embedding",
              "one of " + ", ".join(POSITION_EMBEDDINGS), self.position_embedding)


#: How a transformer layer's attention keeps what its backward pass needs
#: (:func:`shape_sizes`): ``stored`` the ``s x s`` softmax output, its dropout mask and the
#: dropped probabilities (Korthikanti et al. 2022, eq. 2); ``flash`` none of them, the
#: softmax statistics instead (FlashAttention and Transformer Engine's fused attention: Dao
#: et al. 2022); ``selective`` none at all (the core attention recomputed in the backward
#: pass: Korthikanti et al. 2022, section 4.3). Which one a run takes is the framework's
#: (:func:`sim.profiles.frameworks.attention_path`).
ATTENTION_PATHS = ("stored", "flash", "selective")
#: Bytes a value of FlashAttention's softmax statistics (``softmax_lse``, fp32, one per head
#: and token: Dao et al. 2022, algorithm 2, which saves ``L`` for the backward pass).
SOFTMAX_STAT_BYTES = 4


def shape_sizes(shape: ModelShape, tp: int, bytes_per_value: int,
                attention: str = "stored") -> tuple[LayerSizes, ...]:
    """The layers' sizes of a model given by its shape, on one GPU of a TP group of ``tp``.

    Parameters per layer (Narayanan et al. 2021, section 5.1): transformer
    ``12 h^2 + 13 h`` (its matrices split over TP, its layer norms and biases of
    ``h`` taken as split too); embedding ``V h / tp + s h`` (learned positions,
    replicated; ``V h / tp`` with ``rope`` or no position embedding); the last layer its norm, ``2 h``, plus an untied head's ``V h / tp``.
    A layer's output per sample is ``s h`` values; the activation memory it
    keeps per sample (Korthikanti et al. 2022, eq. 2, without sequence
    parallelism or recomputation, 2-byte activations) ``s h (10 + 24 / t + 5 a s
    / (h t))`` bytes, doubled for 4-byte values: ``attention`` ``"stored"``
    (:data:`ATTENTION_PATHS`). ``"flash"`` keeps no ``s x s`` matrix: ``s h (10 + 24 /
    t)`` bytes (the attention's inputs and output, which the eq. 2 terms count already)
    plus the softmax statistics, ``a s / t`` fp32 values (:data:`SOFTMAX_STAT_BYTES`);
    ``"selective"`` ``s h (10 + 24 / t)`` bytes (Korthikanti et al. 2022, section 4.3).
    """
    check(attention in ATTENTION_PATHS, "attention", "one of " + ", ".join(ATTENTION_PATHS),
          attention)
    s, h, a, V = shape.sequence, shape.hidden, shape.heads, shape.vocabulary
    out_bytes = float(s * h * bytes_per_value)
    if attention == "stored":
        mem = s * h * (10 + 24 / tp + 5 * a * s / (h * tp)) * (bytes_per_value / 2.0)
    else:
        mem = s * h * (10 + 24 / tp) * (bytes_per_value / 2.0)
        if attention == "flash":
            mem += SOFTMAX_STAT_BYTES * a * s / tp
    positions = s * h if shape.position_embedding == "learned_absolute" else 0
    emb = LayerSizes(V * h // tp + positions, out_bytes, float(s * h * bytes_per_value))
    layer = LayerSizes((12 * h * h + 13 * h) // tp, out_bytes, mem)
    last = LayerSizes(2 * h + (0 if shape.tied else V * h // tp), out_bytes,
                      float(s * V * bytes_per_value) / tp)
    return (emb,) + (layer,) * shape.layers + (last,)


@dataclass(frozen=True)
class ModelProfile:
    """A model's measured layers: times per (GPU type, micro-batch size, TP degree), sizes per TP.

    Parameters
    ----------
    name : str
    layers : int
        Number of layers ``n``; layer indices are ``0..n-1``.
    times : tuple of ((gpu, microbatch_size, tp), tuple of LayerTimes)
        One entry per measured combination, ``n`` layer times each.
    sizes : tuple of (tp, tuple of LayerSizes)
        One entry per TP degree, ``n`` layer sizes each.
    bytes_per_value : int
        Bytes of one weight, gradient or activation value as trained (4 for
        fp32, 2 for fp16 or bf16 weights and activations).
    optimizer_bytes_per_param : float
        Bytes of optimizer state and master weights per parameter beyond the
        weight and its gradient (Adam in fp32: its two moments, 8; mixed
        precision Adam: fp32 master weights and two moments, 12).
    tied_embeddings : bool
        Whether the last layer's weight is the first layer's embedding, tied
        (its gradient is all-reduced between the first and last stage).
    tied_params : tuple of (tp, int)
        Per TP degree, the parameters of the tied weight on one GPU (the word
        embedding, ``vocabulary x hidden / tp``); a TP degree not listed takes
        the first layer's parameters (the embedding layer that holds it).
    shape : ModelShape or None
        The model's shape: its sizes where ``sizes`` has none, and its times
        estimated on GPU types ``times`` has none for
        (:mod:`sim.profiles.estimates`). A model given by its shape alone has
        no ``times`` and no ``sizes``.
    """

    name: str
    layers: int
    times: tuple[tuple[tuple[str, int, int], tuple[LayerTimes, ...]], ...]
    sizes: tuple[tuple[int, tuple[LayerSizes, ...]], ...]
    bytes_per_value: int = 4
    optimizer_bytes_per_param: float = 8.0
    tied_embeddings: bool = False
    tied_params: tuple[tuple[int, int], ...] = ()
    shape: ModelShape | None = None

    def __post_init__(self) -> None:
        _name("model", self.name)
        check(isinstance(self.tied_embeddings, bool), "tied_embeddings", "true or false",
              self.tied_embeddings)
        n = check_int("layers", self.layers, low=1)
        check(self.shape is None or isinstance(self.shape, ModelShape), "shape",
              "a ModelShape or None", self.shape)
        if self.shape is not None:
            # one model, one tie: the shape's tie sizes the head (no weight of its own when
            # tied), tied_embeddings all-reduces the tied gradient; a shape-only profile was
            # tied in its sizes and untied in its traffic by the two defaults
            check(self.shape.tied == self.tied_embeddings, "tied_embeddings",
                  f"the model shape's tied ({str(self.shape.tied).lower()}): both say whether "
                  "the output head is the word embedding", self.tied_embeddings)
            check(n == self.shape.layers + 2, "layers", f"the shape's transformer layers + 2 "
                  f"({self.shape.layers + 2}: embedding, transformer layers, head)", n)
        check(isinstance(self.times, tuple) and (len(self.times) > 0 or self.shape is not None),
              "times", "at least one (gpu, microbatch size, tp) entry (or a model shape)",
              self.times)
        seen = set()
        for key, row in self.times:
            gpu, mbs, tp = key
            _name("gpu", gpu)
            check_int("microbatch_size", mbs, low=1)
            check_int("tp", tp, low=1)
            check(key not in seen, "times", "one entry per (gpu, microbatch size, tp)", key)
            seen.add(key)
            check(len(row) == n and all(isinstance(t, LayerTimes) for t in row), "times",
                  f"{n} LayerTimes per entry (one per layer)", f"{key}: {len(row)}")
        tps = set()
        for tp, row in self.sizes:
            check_int("tp", tp, low=1)
            check(tp not in tps, "sizes", "one entry per tp", tp)
            tps.add(tp)
            check(len(row) == n and all(isinstance(s, LayerSizes) for s in row), "sizes",
                  f"{n} LayerSizes per entry (one per layer)", f"tp {tp}: {len(row)}")
        check_int("bytes_per_value", self.bytes_per_value, low=1)
        check_nonnegative("optimizer_bytes_per_param", self.optimizer_bytes_per_param)
        check(isinstance(self.tied_params, tuple), "tied_params", "(tp, parameters) pairs",
              self.tied_params)
        for item in self.tied_params:
            check(isinstance(item, tuple) and len(item) == 2, "tied_params",
                  "(tp, parameters) pairs", item)
            check_int("tp", item[0], low=1)
            check_int("tied_params", item[1], low=0)
        check(len({t for t, _ in self.tied_params}) == len(self.tied_params), "tied_params",
              "one entry per tp", self.tied_params)

    @cached_property
    def _times(self) -> dict[tuple[str, int, int], tuple[LayerTimes, ...]]:
        return dict(self.times)

    @cached_property
    def _sizes(self) -> dict[int, tuple[LayerSizes, ...]]:
        return dict(self.sizes)

    @property
    def forward_only(self) -> bool:
        """Whether some measured row lacks its backward times."""
        return any(t.backward is None for _, row in self.times for t in row)

    @cached_property
    def gpus(self) -> tuple[str, ...]:
        """GPU types with at least one measured combination."""
        return tuple(sorted({k[0] for k, _ in self.times}))

    def combinations(self, gpu: str | None = None) -> tuple[tuple[str, int, int], ...]:
        """Measured ``(gpu, microbatch_size, tp)`` keys (of one GPU type, or all)."""
        return tuple(sorted(k for k, _ in self.times if gpu is None or k[0] == gpu))

    def has(self, gpu: str, microbatch_size: int, tp: int) -> bool:
        """Whether times were measured for this combination, and sizes at this TP are known:
        measured, or derived from the model's shape (:meth:`layer_sizes`)."""
        return (gpu, microbatch_size, tp) in self._times and (
            tp in self._sizes or self.shape is not None)

    def layer_times(self, gpu: str, microbatch_size: int, tp: int) -> tuple[LayerTimes, ...]:
        """The layers' times on ``gpu`` at this micro-batch size and TP degree.

        Raises
        ------
        ConfigError
            Naming ``gpu`` when the profile has no time on that GPU type,
            ``tp`` or ``microbatch_size`` when that combination was not measured.
        """
        row = self._times.get((gpu, microbatch_size, tp))
        if row is not None:
            return row
        check(gpu in self.gpus, "gpu", f"a GPU type of the profile of {self.name} "
              f"({', '.join(self.gpus)})", gpu)
        tps = sorted({k[2] for k in self.combinations(gpu) if k[1] == microbatch_size})
        if tps:
            raise ConfigError("tp", f"a TP degree the profile of {self.name} measured on {gpu} "
                              f"at micro-batch size {microbatch_size} ({', '.join(map(str, tps))})",
                              tp)
        sizes = sorted({k[1] for k in self.combinations(gpu)})
        raise ConfigError("microbatch_size", f"a micro-batch size the profile of {self.name} "
                          f"measured on {gpu} ({', '.join(map(str, sizes))})", microbatch_size)

    def tied_parameters(self, tp: int) -> int:
        """Parameters of the tied weight, the word embedding, on one GPU of a TP group of degree
        ``tp`` (0 untied): ``tied_params``'s, else ``V h / tp`` of a shape, else the first
        layer's."""
        if not self.tied_embeddings:
            return 0
        for t, n in self.tied_params:
            if t == tp:
                return n
        if self.shape_sized(tp):  # the word embedding, V h / tp: the first layer's learned
            # positions (s h, replicated) are no part of the tied weight (as a Sailor
            # profile's tied_params: sim.profiles.sailor, word_embeddings_weight)
            return self.shape.vocabulary * self.shape.hidden // tp
        return self.layer_sizes(tp)[0].params

    def trained_at(self, value_bytes: int) -> ModelProfile:
        """This model at the precision it trains in, ``value_bytes`` per value (the
        framework's activations: 2 in fp16 or bf16, 4 in fp32).

        A profile with measured times or sizes keeps its own (its sizes were measured in
        it). A model given by its shape alone measured nothing: it is sized in the
        framework's precision, its weights, gradients and activations ``value_bytes`` a
        value, and the state bytes a parameter, ``2 x bytes_per_value +
        optimizer_bytes_per_param`` (16 by default: Rajbhandari et al., SC 2020, mixed
        precision Adam's 2 + 2 + 12 and fp32 Adam's 4 + 4 + 8), kept (the optimizer's at
        least 0). Before, a shape without ``bytes_per_value`` was sized in fp32 in an fp16
        or bf16 run: its activation memory, receive buffers and gradient bucket twice what
        the run holds."""
        if self.times or self.sizes or self.shape is None or value_bytes == self.bytes_per_value:
            return self
        opt = self.optimizer_bytes_per_param + 2.0 * (self.bytes_per_value - value_bytes)
        return replace(self, bytes_per_value=value_bytes, optimizer_bytes_per_param=max(0.0, opt))

    def shape_sized(self, tp: int) -> bool:
        """Whether the layers' sizes at ``tp`` come from the model's shape (the profile has none
        there): :func:`shape_sizes`."""
        return tp not in self._sizes and self.shape is not None

    def layer_sizes(self, tp: int, attention: str = "stored") -> tuple[LayerSizes, ...]:
        """The layers' sizes on one GPU of a TP group of degree ``tp`` (the shape's where the
        profile has none, with the activation memory of the ``attention`` path:
        :func:`shape_sizes`; measured sizes are the profile's whatever the path)."""
        row = self._sizes.get(tp)
        if row is None:
            if self.shape is not None:
                return shape_sizes(self.shape, tp, self.bytes_per_value, attention)
            # the message is formatted only when it is needed
            raise ConfigError("tp", f"a TP degree with sizes in the profile of {self.name} "
                              f"({', '.join(str(t) for t in sorted(self._sizes))})", tp)
        return row


# --------------------------------------------------------------------------- GPUs


#: A compute capability at or above this is refused as written whole (``75`` for sm_75, 7.5);
#: the highest in NVIDIA's CUDA GPUs table (developer.nvidia.com/cuda-gpus) at this writing is 12.x.
CC_BELOW = 20.0


@dataclass(frozen=True)
class GPUType:
    """One GPU type of the catalogue.

    Parameters
    ----------
    name : str
    memory_bytes : float
        Device memory.
    price_per_hour : float or None
        Dollars per GPU-hour (None: unpriced).
    overhead_bytes : float
        Memory the framework takes on each GPU beyond the model's tensors
        (CUDA context, communication buffers, kernels, allocator reserve), for
        TP groups larger than one GPU.
    overhead_tp1_bytes : float or None
        The same for a GPU that runs without tensor parallelism (None: as
        ``overhead_bytes``).
    source : str
        Where the numbers come from.
    intra_node_bandwidth : float or None
        Bytes per second one GPU moves to the other GPUs of its node, per
        direction (its NVLink, or its PCIe link without one), from the GPU's
        datasheet: the bandwidth of a TP group's collectives inside a node
        (when no measured intra-node curve is given).
    peak_flops, peak_flops_tf32, peak_flops_fp32 : float or None
        Dense peak FLOP/s of the GPU's tensor cores in fp16/bf16 (with fp32
        accumulation) and in TF32 (Ampere and later; what fp32 matrix
        multiplications run on in NVIDIA's PyTorch containers, which set
        ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``), and of its fp32 units, from
        its datasheet.
    memory_bandwidth : float or None
        Device memory bandwidth, bytes per second, from its datasheet.
    spec_source : str
        Where those four come from.
    compute_capability : float or None
        The GPU's CUDA compute capability (``major.minor`` as a number: 8.0 for the A100),
        from NVIDIA's CUDA GPUs table (developer.nvidia.com/cuda-gpus): whether Transformer
        Engine can run flash or fused attention on it (8.0 or later:
        :func:`sim.profiles.frameworks.attention_path`). None: not given, and a Megatron-LM
        plan's attention is counted as the stored path, with a note saying so.
    """

    name: str
    memory_bytes: float
    price_per_hour: float | None = None
    overhead_bytes: float = 0.0
    overhead_tp1_bytes: float | None = None
    source: str = ""
    intra_node_bandwidth: float | None = None
    peak_flops: float | None = None
    peak_flops_fp32: float | None = None
    memory_bandwidth: float | None = None
    spec_source: str = ""
    peak_flops_tf32: float | None = None
    compute_capability: float | None = None

    def __post_init__(self) -> None:
        _name("gpu", self.name)
        object.__setattr__(self, "memory_bytes", check_positive("memory_bytes", self.memory_bytes))
        if self.price_per_hour is not None:
            object.__setattr__(self, "price_per_hour",
                               check_nonnegative("price_per_hour", self.price_per_hour))
        object.__setattr__(self, "overhead_bytes",
                           check_nonnegative("overhead_bytes", self.overhead_bytes))
        if self.overhead_tp1_bytes is not None:
            object.__setattr__(self, "overhead_tp1_bytes",
                               check_nonnegative("overhead_tp1_bytes", self.overhead_tp1_bytes))
        check(isinstance(self.source, str), "source", "a string", self.source)
        for k in ("intra_node_bandwidth", "peak_flops", "peak_flops_fp32", "memory_bandwidth",
                  "peak_flops_tf32", "compute_capability"):
            if getattr(self, k) is not None:
                object.__setattr__(self, k, check_positive(k, getattr(self, k)))
        cc = self.compute_capability
        # (audit 8) 75 (sm_75 written whole) read as >= 8.0 put a T4 on flash attention
        check(cc is None or (cc < CC_BELOW and abs(cc * 10 - round(cc * 10)) < 1e-9),
              "compute_capability", f"major.minor with one digit after the point, below "
              f"{CC_BELOW:g} (7.5 for a T4, not 75 as in sm_75)", cc)
        check(isinstance(self.spec_source, str), "spec_source", "a string", self.spec_source)

    def overhead(self, tp: int) -> float:
        """Framework overhead on one GPU of a TP group of degree ``tp``."""
        if tp == 1 and self.overhead_tp1_bytes is not None:
            return self.overhead_tp1_bytes
        return self.overhead_bytes


@dataclass(frozen=True)
class GPUCatalogue:
    """GPU types by name."""

    gpus: tuple[GPUType, ...]

    def __post_init__(self) -> None:
        check(isinstance(self.gpus, tuple) and all(isinstance(g, GPUType) for g in self.gpus),
              "gpus", "a tuple of GPUType", self.gpus)
        names = [g.name for g in self.gpus]
        dup = sorted({n for n in names if names.count(n) > 1})
        check(not dup, "gpus", "each GPU type once", dup)

    @cached_property
    def _by_name(self) -> dict[str, GPUType]:
        return {g.name: g for g in self.gpus}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> GPUType:
        g = self._by_name.get(name)
        if g is None:  # the message is formatted only when it is needed
            raise ConfigError("gpu", f"a GPU type of the catalogue ({', '.join(self.names)})",
                              name)
        return g


# --------------------------------------------------------------------------- network


@dataclass(frozen=True)
class NodeKind:
    """A kind of node: its GPU type, GPUs per node and zone."""

    gpu: str
    gpus_per_node: int
    zone: str

    def __post_init__(self) -> None:
        _name("gpu", self.gpu)
        check_int("gpus_per_node", self.gpus_per_node, low=1)
        _name("zone", self.zone)

    def __str__(self) -> str:
        return f"{self.gpu}x{self.gpus_per_node}@{self.zone}"


@dataclass(frozen=True)
class Link:
    """The network between a sending and a receiving node kind.

    ``flows`` is the number of concurrent flows between the two nodes the
    bandwidth describes (one per GPU pair, as TP ranks send at once); it is
    their **aggregate** bandwidth, so each of the ``flows`` flows gets
    ``bandwidth / flows`` (a NIC shared by the flows, or one NIC per GPU, is
    what the measurement saw). ``src_flows`` and ``dst_flows`` may differ when
    the two nodes run different TP degrees (the Sailor artifact keys its curves
    by both). ``bandwidth`` is bytes per second or a
    :class:`sim.network.BandwidthCurve` of the message size (the one curve of
    dtsim: the Sailor artifact's fits are ``polylog2`` curves in GB/s of
    ``log2(bytes / 1e6)`` with their fitted range).
    """

    src: tuple[str, str]  # (gpu, zone)
    dst: tuple[str, str]
    src_flows: int
    dst_flows: int
    bandwidth: Capacity
    latency: float = 0.0

    def __post_init__(self) -> None:
        for k in ("src", "dst"):
            v = getattr(self, k)
            check(isinstance(v, tuple) and len(v) == 2, k, "a (gpu, zone) pair", v)
            _name("gpu", v[0])
            _name("zone", v[1])
        check_int("src_flows", self.src_flows, low=1)
        check_int("dst_flows", self.dst_flows, low=1)
        if not isinstance(self.bandwidth, BandwidthCurve):
            object.__setattr__(self, "bandwidth",
                               check_positive("bandwidth", self.bandwidth, allow_inf=True))
        object.__setattr__(self, "latency", check_nonnegative("latency", self.latency))

    def bandwidth_at(self, size: float, where: str = "") -> float:
        """The aggregate bandwidth for messages of ``size`` bytes (bytes per second).

        Raises
        ------
        ConfigError
            Naming ``network`` (and ``where``, the pair) when a curve is not
            positive there.
        """
        try:
            bw = bandwidth_at(self.bandwidth, size)
        except ConfigError as exc:
            raise ConfigError("network", "a bandwidth curve positive at every message size used",
                              f"{where or self.name}: {exc.rule} at {size:.6g} bytes") from None
        return bw

    @property
    def name(self) -> str:
        """``gpu@zone -> gpu@zone`` with the flow counts."""
        return (f"{self.src[0]}@{self.src[1]} -> {self.dst[0]}@{self.dst[1]}, "
                f"{self.src_flows}/{self.dst_flows} flows")


@dataclass(frozen=True)
class NetworkProfile:
    """Links between node kinds (see :class:`Link`)."""

    links: tuple[Link, ...]

    def __post_init__(self) -> None:
        check(isinstance(self.links, tuple) and all(isinstance(x, Link) for x in self.links),
              "links", "a tuple of Link", type(self.links).__name__)

    @cached_property
    def _table(self) -> dict[tuple, Link]:
        return {(x.src, x.dst, x.src_flows, x.dst_flows): x for x in self.links}

    @cached_property
    def _flows_given(self) -> dict[tuple, list[str]]:
        """Per (src, dst) kind pair, the equal flow counts given, sorted as text (for messages:
        the planner asks for missing pairs often, and scanning every link each time made a
        1200-GPU fleet's search spend most of its time here)."""
        out: dict[tuple, set[str]] = {}
        for (s, d, a, b) in self._table:
            if a == b:
                out.setdefault((s, d), set()).add(f"{a}")
        return {k: sorted(v) for k, v in out.items()}

    def link(self, src: NodeKind, dst: NodeKind, src_flows: int, dst_flows: int | None = None
             ) -> Link:
        """The link from a ``src`` node sending ``src_flows`` flows to a ``dst`` node.

        Raises
        ------
        ConfigError
            Naming ``network`` when no curve was given for that pair and flow count.
        """
        dst_flows = src_flows if dst_flows is None else dst_flows
        key = ((src.gpu, src.zone), (dst.gpu, dst.zone), src_flows, dst_flows)
        x = self._table.get(key)
        if x is None:
            have = self._flows_given.get((key[0], key[1]), [])
            raise ConfigError("network", "a link for every pair of node kinds and flow count "
                              "the plan uses" + (f" (flows given: {', '.join(have)})" if have else ""),
                              f"{src.gpu}@{src.zone} -> {dst.gpu}@{dst.zone} with "
                              f"{src_flows}/{dst_flows} flows")
        return x

    def shared_link(self, src: NodeKind, dst: NodeKind, src_flows: int,
                    dst_flows: int | None = None) -> Link | None:
        """The link standing in for ``src_flows``/``dst_flows`` flows beyond the counts the
        network measured (more than every count measured at one end or both): the measured one
        of the largest flow counts not above them at either end (the most flows, then the most
        sent), whose aggregate curve the plan's flows share max-min fair (each ``B_m(S) / k``
        for ``k`` flows over the ``m``-flow curve ``B_m``, as :meth:`transfer_time` and
        :mod:`sim.network` share any link). None: the exact counts were measured, both lie
        within the measured range (an unmeasured combination inside it is not extrapolated),
        or no count at or below them was.

        The Sailor artifact keys its curves by the number of concurrent GPU pairs and times a
        transfer only over a count it measured (its planner's
        ``precompute_ar_times_bottleneck`` skips a TP degree without a curve; its simulator's
        ``get_zone_coeffs`` looks the count up and has no rule for a missing one); that the
        aggregate of the largest measured count bounds more flows is dtsim's rule (an
        estimate, named in :attr:`~sim.profiles.build.PlanBuild.estimates`: more flows than
        measured may reach more aggregate bandwidth, so the time is an upper bound where the
        curve still grows with the count).
        """
        dst_flows = src_flows if dst_flows is None else dst_flows
        s, d = (src.gpu, src.zone), (dst.gpu, dst.zone)
        if (s, d, src_flows, dst_flows) in self._table:
            return None
        pairs = self._pairs_given.get((s, d), ())
        fit = [(a, b) for a, b in pairs if a <= src_flows and b <= dst_flows]
        if not fit or (src_flows <= max(a for a, _ in pairs)
                       and dst_flows <= max(b for _, b in pairs)):
            return None
        a, b = max(fit, key=lambda ab: (min(ab), ab[0], ab[1]))
        return self._table[(s, d, a, b)]

    @cached_property
    def _pairs_given(self) -> dict[tuple, tuple[tuple[int, int], ...]]:
        out: dict[tuple, list[tuple[int, int]]] = {}
        for (s, d, a, b) in self._table:
            out.setdefault((s, d), []).append((a, b))
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def _counts(self) -> dict[tuple, tuple[int, ...]]:
        out: dict[tuple, list[int]] = {}
        for (s, d, a, b) in self._table:
            if a == b:
                out.setdefault((s, d), []).append(a)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """A cache for values derived from the links (the network is immutable)."""
        return {}

    def flow_counts(self, src: tuple[str, str], dst: tuple[str, str]) -> tuple[int, ...]:
        """The flow counts measured from ``src`` to ``dst`` (``(gpu, zone)``), equal at both ends."""
        return self._counts.get((src, dst), ())

    def transfer_time(self, src: NodeKind, dst: NodeKind, size: float, flows: int = 1,
                      dst_flows: int | None = None) -> float:
        """Time for ``flows`` concurrent flows of ``size`` bytes each from a ``src`` to a ``dst`` node.

        Notes
        -----
        .. math:: t = \\ell + \\frac{k\\,S}{B_k(S)}

        with ``B_k`` the link's aggregate bandwidth curve for ``k`` flows at a
        per-flow message size ``S``, and ``\\ell`` its latency. Zero for an
        empty message.
        """
        if size <= 0:
            return 0.0
        x = self.link(src, dst, flows, dst_flows)
        bw = x.bandwidth_at(size, f"{src.gpu}@{src.zone} -> {dst.gpu}@{dst.zone}, {flows} flows")
        return x.latency + flows * size / bw


@dataclass(frozen=True)
class Fleet:
    """Nodes available (kind and count) and the network between them."""

    nodes: tuple[tuple[NodeKind, int], ...]
    network: NetworkProfile = field(default_factory=lambda: NetworkProfile(()))

    def __post_init__(self) -> None:
        check(isinstance(self.nodes, tuple), "nodes", "a tuple of (NodeKind, count)", self.nodes)
        kinds = []
        for kind, count in self.nodes:
            check(isinstance(kind, NodeKind), "nodes", "(NodeKind, count) pairs", kind)
            check_int("count", count, low=0)
            check(kind not in kinds, "nodes", "each node kind once", str(kind))
            kinds.append(kind)
        check(isinstance(self.network, NetworkProfile), "network", "a NetworkProfile", self.network)

    @property
    def gpus(self) -> int:
        """GPUs in the fleet."""
        return sum(k.gpus_per_node * n for k, n in self.nodes)


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class ReplicaSpec:
    """One data-parallel replica of a stage: ``tp`` GPUs of one node of a kind.

    ``host`` names the physical node the GPUs are on: replicas with the same
    ``host`` share that node (its NICs, and its intra-node link between them;
    :func:`sim.profiles.build.plan_network`). None (the Sailor artifact's plans):
    the replica is a node of its own, its links the pair curves measured
    between two such nodes.
    """

    gpu: str
    tp: int = 1
    gpus_per_node: int | None = None
    zone: str = "default"
    host: str | None = None

    def __post_init__(self) -> None:
        if self.host is not None:
            _name("host", self.host)
        _name("gpu", self.gpu)
        check_int("tp", self.tp, low=1)
        if self.gpus_per_node is None:
            object.__setattr__(self, "gpus_per_node", self.tp)
        check_int("gpus_per_node", self.gpus_per_node, low=1)
        check(self.tp <= self.gpus_per_node, "tp",  # type: ignore[operator]
              f"<= gpus_per_node ({self.gpus_per_node}): a replica's TP group is within one node "
              "(its profiled layer times hold TP's collectives over the intra-node link; the "
              "Sailor artifact starts a replica's ranks on one VM)",
              self.tp)
        _name("zone", self.zone)

    @cached_property
    def node(self) -> NodeKind:
        return NodeKind(self.gpu, self.gpus_per_node, self.zone)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StageSpec:
    """A pipeline stage: its layers (consecutive) and its data-parallel replicas."""

    layers: tuple[int, ...]
    replicas: tuple[ReplicaSpec, ...]

    def __post_init__(self) -> None:
        check(isinstance(self.layers, tuple) and len(self.layers) >= 1, "layers",
              "a non-empty tuple of layer indices", self.layers)
        for x in self.layers:
            check_int("layers", x, low=0)
        check(all(b == a + 1 for a, b in zip(self.layers, self.layers[1:], strict=False)),
              "layers", "consecutive layer indices", self.layers)
        check(isinstance(self.replicas, tuple) and len(self.replicas) >= 1
              and all(isinstance(r, ReplicaSpec) for r in self.replicas), "replicas",
              "a non-empty tuple of ReplicaSpec", self.replicas)


@dataclass(frozen=True)
class Plan:
    """Stages with their layers and replicas, micro-batch and global batch size.

    Each pipeline (replica ``i`` of every stage) runs
    ``gbs / (mbs * dp)`` micro-batches per iteration, ``dp`` the replicas of
    the first stage. ``framework`` says what ran it (:mod:`sim.profiles.frameworks`;
    None: DeepSpeed's pipeline engine, :data:`~sim.profiles.frameworks.DEFAULT_FRAMEWORK`).
    """

    stages: tuple[StageSpec, ...]
    microbatch_size: int
    global_batch_size: int
    model: str | None = None
    framework: FrameworkSpec | None = None

    def __post_init__(self) -> None:
        check(isinstance(self.stages, tuple) and len(self.stages) >= 1
              and all(isinstance(s, StageSpec) for s in self.stages), "stages",
              "a non-empty tuple of StageSpec", self.stages)
        mbs = check_int("microbatch_size", self.microbatch_size, low=1)
        gbs = check_int("global_batch_size", self.global_batch_size, low=1)
        for j, (a, b) in enumerate(zip(self.stages, self.stages[1:], strict=False)):
            check(b.layers[0] == a.layers[-1] + 1, "layers",
                  f"stages of consecutive layers (stage {j + 1} starts after stage {j})",
                  f"stage {j} ends at {a.layers[-1]}, stage {j + 1} starts at {b.layers[0]}")
        used: dict[str, tuple[tuple[str, int, str], int]] = {}
        for st in self.stages:
            for r in st.replicas:
                if r.host is None:
                    continue
                kind = (r.gpu, r.gpus_per_node, r.zone)
                prev = used.get(r.host)
                check(prev is None or prev[0] == kind, "host", "one node kind (gpu, "
                      "gpus_per_node, zone) per host", f"{r.host}: {prev[0] if prev else ''} "
                      f"and {kind}")
                n = (prev[1] if prev else 0) + r.tp
                check(n <= r.gpus_per_node, "host", f"hosts whose replicas' TP degrees sum to "  # type: ignore[operator]
                      f"at most gpus_per_node ({r.gpus_per_node})", f"{r.host}: {n} GPUs")
                used[r.host] = (kind, n)
        dp = len(self.stages[0].replicas)
        check(gbs % (mbs * dp) == 0, "global_batch_size",
              f"a multiple of microbatch_size x replicas of the first stage ({mbs} x {dp})", gbs)
        if self.model is not None:
            _name("model", self.model)
        check(self.framework is None or isinstance(self.framework, FrameworkSpec), "framework",
              "a FrameworkSpec or None", self.framework)

    @property
    def pipeline_stages(self) -> int:
        return len(self.stages)

    @property
    def dp(self) -> tuple[int, ...]:
        """Replicas per stage."""
        return tuple(len(s.replicas) for s in self.stages)

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per iteration, ``gbs / (mbs dp)``."""
        return self.global_batch_size // (self.microbatch_size * self.dp[0])

    @property
    def gpus(self) -> int:
        return sum(r.tp for s in self.stages for r in s.replicas)

    @property
    def physical(self) -> bool:
        """Whether the plan places replicas on named hosts (physical nodes)."""
        return any(r.host is not None for s in self.stages for r in s.replicas)

    def check_covers(self, layers: int) -> None:
        """Refuse a plan whose stages do not cover layers ``0..layers-1`` exactly once."""
        first, last = self.stages[0].layers[0], self.stages[-1].layers[-1]
        check(first == 0 and last == layers - 1, "layers",
              f"stages covering the model's layers 0..{layers - 1} exactly once",
              f"{first}..{last}")


@dataclass(frozen=True)
class MeasuredRun:
    """A plan with what a real run of it measured (for checking, never for fitting)."""

    name: str
    plan: Plan
    iteration_time: float
    peak_memory: float | None = None
    gradient_reduction_time: float | None = None

    def __post_init__(self) -> None:
        _name("name", self.name)
        check(isinstance(self.plan, Plan), "plan", "a Plan", self.plan)
        check_positive("iteration_time", self.iteration_time)
        if self.peak_memory is not None:
            check_positive("peak_memory", self.peak_memory)
        if self.gradient_reduction_time is not None:
            check_nonnegative("gradient_reduction_time", self.gradient_reduction_time)


@dataclass(frozen=True)
class Profiles:
    """What a run is predicted from: model profiles, the GPU catalogue and the network.

    ``intra_node``: measured bandwidth inside one node, per GPU type and GPU count
    (``(gpu, gpus, curve)``, the aggregate of ``gpus / 2`` pairs sending at once).
    """

    models: tuple[ModelProfile, ...]
    gpus: GPUCatalogue
    network: NetworkProfile
    source: str = ""
    intra_node: tuple[tuple[str, int, BandwidthCurve], ...] = ()

    def __post_init__(self) -> None:
        check(isinstance(self.models, tuple) and all(isinstance(m, ModelProfile)
                                                     for m in self.models), "models",
              "a tuple of ModelProfile", type(self.models).__name__)
        names = [m.name for m in self.models]
        dup = sorted({n for n in names if names.count(n) > 1})
        check(not dup, "models", "each model once", dup)
        check(isinstance(self.gpus, GPUCatalogue), "gpus", "a GPUCatalogue", self.gpus)
        check(isinstance(self.network, NetworkProfile), "network", "a NetworkProfile", self.network)
        check(isinstance(self.intra_node, tuple) and all(
            isinstance(e, tuple) and len(e) == 3 and isinstance(e[2], BandwidthCurve)
            and isinstance(e[1], int) and e[1] >= 2 for e in self.intra_node), "intra_node",
            "(gpu, gpus, curve) entries", self.intra_node)

    def intra_node_bandwidth(self, gpu: str, gpus: int, size: float) -> tuple[float, str]:
        """Bytes per second one GPU sends to another of its node in a collective over ``gpus``
        GPUs of the node, for messages of ``size`` bytes, and where it comes from.

        A measured intra-node curve for that GPU type and count (the aggregate of
        ``gpus / 2`` pairs sending at once, so per sender ``curve / (gpus / 2)``)
        is the machine's own; without one, the catalogue's datasheet
        ``intra_node_bandwidth``.

        Raises
        ------
        ConfigError
            Naming ``intra_node_bandwidth`` when neither is given for ``gpu``.
        """
        for g, k, c in self.intra_node:
            if g == gpu and k == gpus:
                return c(size) / (k / 2), f"measured intra-node curve ({gpu}, {k} GPUs)"
        bw = self.gpus[gpu].intra_node_bandwidth
        check(bw is not None, "intra_node_bandwidth", f"given for {gpu} (in the GPU catalogue, "
              "or a measured intra_node_bandwidths.json in the profiles folder) to time its "
              "collectives inside a node", None)
        return bw, f"catalogue ({gpu}: {self.gpus[gpu].spec_source.split(':')[0]})"

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def model(self, name: str) -> ModelProfile:
        """The profile of model ``name`` (one line naming ``model`` if there is none)."""
        for m in self.models:
            if m.name == name:
                return m
        raise ConfigError("model", f"a model of the profiles ({', '.join(self.model_names)})"
                          + (f" in {self.source}" if self.source else ""), name)
