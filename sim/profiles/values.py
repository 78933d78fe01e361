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
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import ConfigError, check, check_int, check_nonnegative, check_positive, check_real

__all__ = [
    "LayerTimes",
    "LayerSizes",
    "ModelProfile",
    "GPUType",
    "GPUCatalogue",
    "NodeKind",
    "BandwidthCurve",
    "Link",
    "Network",
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
    over its layers.
    """

    forward: float
    backward: float
    optimizer: float = 0.0

    def __post_init__(self) -> None:
        f, b, o = self.forward, self.backward, self.optimizer
        if (type(f) is float and type(b) is float and type(o) is float
                and 0.0 <= f < math.inf and 0.0 <= b < math.inf and 0.0 <= o < math.inf):
            return  # the common case, checked without the helpers (profiles hold thousands)
        for k in ("forward", "backward", "optimizer"):
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
    """

    name: str
    layers: int
    times: tuple[tuple[tuple[str, int, int], tuple[LayerTimes, ...]], ...]
    sizes: tuple[tuple[int, tuple[LayerSizes, ...]], ...]
    bytes_per_value: int = 4
    optimizer_bytes_per_param: float = 8.0
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        _name("model", self.name)
        check(isinstance(self.tied_embeddings, bool), "tied_embeddings", "true or false",
              self.tied_embeddings)
        n = check_int("layers", self.layers, low=1)
        check(isinstance(self.times, tuple) and len(self.times) > 0, "times",
              "at least one (gpu, microbatch size, tp) entry", self.times)
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

    @cached_property
    def _times(self) -> dict[tuple[str, int, int], tuple[LayerTimes, ...]]:
        return dict(self.times)

    @cached_property
    def _sizes(self) -> dict[int, tuple[LayerSizes, ...]]:
        return dict(self.sizes)

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU types with at least one measured combination."""
        return tuple(sorted({k[0] for k, _ in self.times}))

    def combinations(self, gpu: str | None = None) -> tuple[tuple[str, int, int], ...]:
        """Measured ``(gpu, microbatch_size, tp)`` keys (of one GPU type, or all)."""
        return tuple(sorted(k for k, _ in self.times if gpu is None or k[0] == gpu))

    def has(self, gpu: str, microbatch_size: int, tp: int) -> bool:
        """Whether times were measured for this combination (and sizes at this TP)."""
        return (gpu, microbatch_size, tp) in self._times and tp in self._sizes

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

    def layer_sizes(self, tp: int) -> tuple[LayerSizes, ...]:
        """The layers' sizes on one GPU of a TP group of degree ``tp``."""
        row = self._sizes.get(tp)
        check(row is not None, "tp", f"a TP degree with sizes in the profile of {self.name} "
              f"({', '.join(str(t) for t in sorted(self._sizes))})", tp)
        return row  # type: ignore[return-value]


# --------------------------------------------------------------------------- GPUs


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
    """

    name: str
    memory_bytes: float
    price_per_hour: float | None = None
    overhead_bytes: float = 0.0
    overhead_tp1_bytes: float | None = None
    source: str = ""

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
        check(g is not None, "gpu", f"a GPU type of the catalogue ({', '.join(self.names)})", name)
        return g  # type: ignore[return-value]


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
class BandwidthCurve:
    """Bandwidth of a link as a number or as a curve of the message size.

    Either ``bandwidth`` (bytes per second, constant) or ``coefficients`` of a
    polynomial in ``x = log2(size / 1e6)`` giving GB/s (``1e9`` bytes per
    second), highest power first: ``bw(size) = 1e9 * polyval(coefficients, x)``
    (the Sailor artifact's fit of NCCL send/recv). A curve is used within the
    sizes it was fitted on, ``[min_bytes, max_bytes]``; a message outside that
    range takes the bandwidth at the nearest end.
    """

    bandwidth: float | None = None
    coefficients: tuple[float, ...] | None = None
    min_bytes: float = 2.0 ** 16
    max_bytes: float = 2.0 ** 30

    def __post_init__(self) -> None:
        check((self.bandwidth is None) != (self.coefficients is None), "bandwidth",
              "a number or a curve (coefficients), exactly one", (self.bandwidth, self.coefficients))
        if self.bandwidth is not None:
            object.__setattr__(self, "bandwidth",
                               check_positive("bandwidth", self.bandwidth, allow_inf=True))
        else:
            c = self.coefficients
            check(isinstance(c, (tuple, list)) and len(c) >= 1, "coefficients",
                  "a non-empty list of numbers", c)
            object.__setattr__(self, "coefficients",
                               tuple(check_real("coefficients", v) for v in c))  # type: ignore[union-attr]
        lo = check_positive("min_bytes", self.min_bytes)
        hi = check_positive("max_bytes", self.max_bytes)
        check(hi >= lo, "max_bytes", f">= min_bytes ({lo:g})", hi)

    def at(self, size: float) -> float:
        """Bandwidth in bytes per second for a message of ``size`` bytes."""
        if self.bandwidth is not None:
            return self.bandwidth
        s = min(max(float(size), self.min_bytes), self.max_bytes)
        x = math.log2(s / 1e6)
        y = 0.0
        for c in self.coefficients:  # type: ignore[union-attr]
            y = y * x + c
        return y * 1e9

    def peak_above(self, size: float) -> float:
        """The largest bandwidth :meth:`at` gives a message of ``size`` bytes or more.

        The polynomial's maximum over the fitted range from ``size`` up, from
        the range's ends and the real roots of its derivative inside it, raised
        by one part in 1e9 so that a root found to floating-point accuracy
        cannot put it under the true maximum (the planner bounds transfer
        times below with it).
        """
        if self.bandwidth is not None:
            return self.bandwidth
        import numpy as np

        lo = math.log2(min(max(float(size), self.min_bytes), self.max_bytes) / 1e6)
        hi = math.log2(self.max_bytes / 1e6)
        c = np.asarray(self.coefficients, dtype=float)
        xs = [lo, hi]
        if c.size > 2:
            xs += [r.real for r in np.roots(np.polyder(c))
                   if abs(r.imag) <= 1e-9 * (1 + abs(r)) and lo < r.real < hi]
        best = max(float(np.polyval(c, x)) for x in xs)
        return best * 1e9 * (1 + 1e-9) if best > 0 else best * 1e9

    def nonpositive(self, where: str, size: float) -> ConfigError:
        """The refusal of a message of ``size`` bytes at which this curve is not positive.

        Below the fitted range the curve is read at its lowest fitted size: then the
        message, not the curve, is what is outside what was measured, and the
        refusal names the plan that sends it (many replicas in a ring send small
        chunks); inside the range the curve itself is at fault (``'network'``).
        """
        bw = self.at(size)
        if self.bandwidth is None and size < self.min_bytes:
            return ConfigError("plan", f"a plan whose messages are as large as the network's "
                               f"curves were measured for ({where} was fitted on {self.min_bytes:.6g} to "
                               f"{self.max_bytes:.6g} bytes and gives {bw / 1e9:.4g} GB/s at its "
                               "low end; fewer replicas per all-reduce ring or larger "
                               "micro-batches send larger messages)", f"{size:.6g} bytes")
        return ConfigError("network", "a bandwidth curve positive at every message size used",
                           f"{where}: {bw / 1e9:.4g} GB/s at {size:.6g} bytes")

    def check_positive(self, name: str, sizes: list[float] | tuple[float, ...]) -> None:
        """Refuse a curve that is not positive at one of ``sizes`` (one line naming it)."""
        for s in sizes:
            if s > 0 and not self.at(s) > 0:
                raise ConfigError(name, "a bandwidth curve positive at every message size used",
                                  f"{self.at(s) / 1e9:.4g} GB/s at {s:.6g} bytes")


@dataclass(frozen=True)
class Link:
    """The network between a sending and a receiving node kind.

    ``flows`` is the number of concurrent flows between the two nodes the
    curve describes (one per GPU pair, as TP ranks send at once); the curve
    gives their **aggregate** bandwidth, so each of the ``flows`` flows gets
    ``curve / flows`` (a NIC shared by the flows, or one NIC per GPU, is what
    the measurement saw). ``src_flows`` and ``dst_flows`` may differ when the
    two nodes run different TP degrees (the Sailor artifact keys its curves by
    both).
    """

    src: tuple[str, str]  # (gpu, zone)
    dst: tuple[str, str]
    src_flows: int
    dst_flows: int
    curve: BandwidthCurve
    latency: float = 0.0

    def __post_init__(self) -> None:
        for k in ("src", "dst"):
            v = getattr(self, k)
            check(isinstance(v, tuple) and len(v) == 2, k, "a (gpu, zone) pair", v)
            _name("gpu", v[0])
            _name("zone", v[1])
        check_int("src_flows", self.src_flows, low=1)
        check_int("dst_flows", self.dst_flows, low=1)
        check(isinstance(self.curve, BandwidthCurve), "curve", "a BandwidthCurve", self.curve)
        object.__setattr__(self, "latency", check_nonnegative("latency", self.latency))


@dataclass(frozen=True)
class Network:
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
        bw = x.curve.at(size)
        if not bw > 0:
            raise x.curve.nonpositive(f"{src.gpu}@{src.zone} -> {dst.gpu}@{dst.zone}, {flows} "
                                      "flows", size)
        return x.latency + flows * size / bw


@dataclass(frozen=True)
class Fleet:
    """Nodes available (kind and count) and the network between them."""

    nodes: tuple[tuple[NodeKind, int], ...]
    network: Network = field(default_factory=lambda: Network(()))

    def __post_init__(self) -> None:
        check(isinstance(self.nodes, tuple), "nodes", "a tuple of (NodeKind, count)", self.nodes)
        kinds = []
        for kind, count in self.nodes:
            check(isinstance(kind, NodeKind), "nodes", "(NodeKind, count) pairs", kind)
            check_int("count", count, low=0)
            check(kind not in kinds, "nodes", "each node kind once", str(kind))
            kinds.append(kind)
        check(isinstance(self.network, Network), "network", "a Network", self.network)

    @property
    def gpus(self) -> int:
        """GPUs in the fleet."""
        return sum(k.gpus_per_node * n for k, n in self.nodes)


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class ReplicaSpec:
    """One data-parallel replica of a stage: ``tp`` GPUs of one node of a kind."""

    gpu: str
    tp: int = 1
    gpus_per_node: int | None = None
    zone: str = "default"

    def __post_init__(self) -> None:
        _name("gpu", self.gpu)
        check_int("tp", self.tp, low=1)
        if self.gpus_per_node is None:
            object.__setattr__(self, "gpus_per_node", self.tp)
        check_int("gpus_per_node", self.gpus_per_node, low=1)
        check(self.tp <= self.gpus_per_node, "tp",  # type: ignore[operator]
              f"<= gpus_per_node ({self.gpus_per_node}): a replica's TP group is within one node",
              self.tp)
        _name("zone", self.zone)

    @property
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
    the first stage.
    """

    stages: tuple[StageSpec, ...]
    microbatch_size: int
    global_batch_size: int
    model: str | None = None

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
        dp = len(self.stages[0].replicas)
        check(gbs % (mbs * dp) == 0, "global_batch_size",
              f"a multiple of microbatch_size x replicas of the first stage ({mbs} x {dp})", gbs)
        if self.model is not None:
            _name("model", self.model)

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
    """What a run is predicted from: model profiles, the GPU catalogue and the network."""

    models: tuple[ModelProfile, ...]
    gpus: GPUCatalogue
    network: Network
    source: str = ""

    def __post_init__(self) -> None:
        check(isinstance(self.models, tuple) and all(isinstance(m, ModelProfile)
                                                     for m in self.models), "models",
              "a tuple of ModelProfile", type(self.models).__name__)
        names = [m.name for m in self.models]
        dup = sorted({n for n in names if names.count(n) > 1})
        check(not dup, "models", "each model once", dup)
        check(isinstance(self.gpus, GPUCatalogue), "gpus", "a GPUCatalogue", self.gpus)
        check(isinstance(self.network, Network), "network", "a Network", self.network)

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
