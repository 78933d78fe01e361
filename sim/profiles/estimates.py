"""Layer times a profile does not hold, each from a stated rule, and marked as estimated.

:class:`Estimator` answers "the layers' times on GPU type ``g`` at micro-batch
size ``b`` and TP degree ``t``" from what the model profile measured, and from
these rules where it measured less (every use is recorded as a note that
``dtsim train --plan`` prints):

**Tensor parallelism from a TP-1 profile** (``tp``): Megatron-LM splits a
transformer layer's matrix multiplications over the ``t`` GPUs of its TP group
(Shoeybi et al. 2019, arXiv:1909.08053, section 3), so the layer's TP-1
compute takes ``1/t`` of its time, and adds the TP group's collectives: per
transformer layer two all-reduces of the ``b x s x h`` hidden states in the
forward pass (after the attention and MLP row-parallel linears:
``reduce_from_tensor_model_parallel_region``, Megatron-LM
``megatron/core/tensor_parallel/layers.py:1566``) and two in the backward pass
(before the column-parallel linears: ``copy_to_tensor_model_parallel_region``,
``layers.py:1225``, whose backward all-reduces, ``mappings.py:216-218``); the
embedding one in the forward pass (``VocabParallelEmbedding``, ``layers.py:383``)
and the output head one in the backward pass (its input is copied to the TP
region); and the loss, on the last stage, three all-reduces of one fp32 value per token
(``b x s`` values) in the forward pass: the vocabulary-parallel cross entropy's maximum
logit, target logit and sum of exponentials, on fp32 logits, none in its backward
(Megatron-LM ``megatron/core/tensor_parallel/cross_entropy.py:130, 146-148, 150-152``
at d98e8a64dd; v1.1.5, DeepSpeedExamples 1bee84f6
``Megatron-LM-v1.1.5-3D_parallelism/megatron/mpu/cross_entropy.py:32-34, 63-65, 71-73``;
the Sailor artifact's Megatron-DeepSpeed ``megatron/core/tensor_parallel/cross_entropy.py:
21, 52, 60``, called on ``output.float()`` by its OPT, GPT-Neo and LLaMA pipelines,
``megatron/model/opt_model.py:33``), counted when the sequence length ``s`` is known
(the model's shape, or the framework's ``seq_length``). With sequence parallelism each
all-reduce is a reduce-scatter and an
all-gather (Korthikanti et al. 2022, arXiv:2205.05198), the same bytes per GPU.
An all-reduce of ``S`` bytes over ``t`` GPUs of one node is a ring: ``2 (t - 1)``
steps of ``S / t`` bytes at the intra-node bandwidth
(:meth:`sim.profiles.Profiles.intra_node_bandwidth`; Patarasuk and Yuan 2009).
Only the matrix multiplications and the attention core (its heads) split: the
layer norms, the dropouts after the attention and MLP blocks with their bias
and residual additions, and the embedding's lookup, position addition and
dropout run on the whole ``b x s x h`` tensor on every rank of the group
(Shoeybi et al. 2019, section 3 and figure 3; Korthikanti et al. 2022,
arXiv:2205.05198, section 4.2: the ``10 s b h`` of the activation memory
``s b h (10 + 24/t + 5 a s / (h t))`` that TP does not divide are those ops'
tensors). So the derived time of a pass is ``(T1 - R) / t + R`` plus the
collectives, ``T1`` the TP-1 time and ``R`` the replicated ops' time:
memory-bound elementwise work timed by the roofline (Williams, Waterman and
Patterson 2009) at the catalogue's memory bandwidth, with the bytes of
:func:`replicated_bytes` (a lower bound: kernels reach a fraction of the
peak). Where ``R`` exceeds ``T1`` (a pass the profile timed at or near 0),
``R`` is taken as ``T1`` (nothing of it splits) and the output says so.
Sequence parallelism would split these ops by ``t`` too; dtsim has no
sequence-parallel option, so it is not modelled.

**A micro-batch size the profile did not measure** (``mbs``): a layer's FLOPs
are linear in the batch (Narayanan et al. 2021, SC'21, section 5.1, eq. 2), so
its time is taken linear in the micro-batch size between the two nearest
profiled sizes (*interpolated*), and beyond them along the line through the two
nearest (*extrapolated*, never below the time proportional to the size of the
nearest), within :data:`MBS_RANGE` (half the smallest to twice the largest
profiled size); further out it is refused.

**A forward-only profile** (``backward``): the backward pass computes the
gradients of both a layer's input and its weights, twice the forward's
FLOPs (Narayanan et al. 2021, section 5.1; Kaplan et al. 2020, arXiv:2001.08361,
section 2.1: ``C = 6N`` per token, ``2N`` forward, ``4N`` backward), so the
backward compute is twice the forward compute; with TP the forward's TP
collectives are taken out first and the backward's added.

**An optimizer step the profile does not give** (``optimizer``): Adam's update
is memory bound (roofline: Williams, Waterman and Patterson 2009): it reads the
weight, gradient and two moments and writes the weight and the moments, 28 bytes
per parameter in fp32 (:data:`ADAM_BYTES_PER_PARAM`; Kingma and Ba 2015), at
the catalogue's memory bandwidth.

**A model given by its shape** on a GPU given by its peak FLOP/s and memory
bandwidth (``shape``): per transformer layer ``24 b s h^2 + 4 b s^2 h`` forward
FLOPs (Narayanan et al. 2021, section 5.1: ``24 B s h^2 (1 + s / 6h)``), the
logit layer ``2 b s h V``, the backward pass twice that; each layer's time is its
roofline lower bound, ``max(FLOPs / peak, bytes / memory bandwidth)`` with its
weights and its input and output activations as the bytes, at the GPU's
datasheet peak (tensor cores for fp16/bf16; for fp32 its TF32 tensor cores where it
has them, as NVIDIA's PyTorch containers run fp32 matrix multiplications, else
its fp32 units). Real kernels
reach a fraction of peak, so these times are lower bounds, marked as estimates.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import check, check_int
from .values import LayerSizes, LayerTimes, ModelProfile, ModelShape, Profiles, shape_sizes

__all__ = ["MBS_RANGE", "ADAM_BYTES_PER_PARAM", "MASK_BYTES", "TP_MODES", "LOSS_ALLREDUCES",
           "LOSS_VALUE_BYTES", "Estimator", "replicated_bytes", "tp_collectives"]

#: Micro-batch sizes estimated from a profile: from half its smallest to twice its largest.
MBS_RANGE = (0.5, 2.0)
#: Bytes Adam moves per parameter in fp32: read weight, gradient, two moments; write weight and
#: the two moments (Kingma and Ba 2015; PyTorch's torch.optim.Adam update).
ADAM_BYTES_PER_PARAM = 28.0
#: Bytes of one dropout mask value: PyTorch's dropout keeps its mask as ``torch.bool`` for the
#: backward pass (``native_dropout`` returns it beside the output).
MASK_BYTES = 1.0
#: The vocabulary-parallel cross entropy's all-reduces over the TP group in the last layer's
#: forward pass (maximum logit, target logit, sum of exponentials: the module docstring), each
#: of one value per token, in fp32 (:data:`LOSS_VALUE_BYTES`: the logits are cast to float first).
LOSS_ALLREDUCES = 3
LOSS_VALUE_BYTES = 4
#: ``profiled``: a measured TP-t time where the profile has one, else derived from TP 1;
#: ``derived``: every TP > 1 derived from TP 1 (the check of docs/real_runs.md).
TP_MODES = ("profiled", "derived")


def tp_collectives(index: int, layers: int) -> tuple[int, int]:
    """Megatron-LM's TP all-reduces of the hidden states in layer ``index`` of ``layers``:
    ``(forward, backward)`` (see the module docstring)."""
    if index == 0:
        return (1, 0)
    if index == layers - 1:
        return (0, 1)
    return (2, 2)


def replicated_bytes(index: int, layers: int, values: float, positions: float,
                     bytes_per_value: float) -> tuple[float, float]:
    """Bytes the elementwise ops every TP rank runs whole move in layer ``index`` of
    ``layers``: ``(forward, backward)``.

    ``values`` is one micro-batch's hidden states, ``N = b s h``; ``positions``
    the position embeddings' ``P = s h``; tensors move at ``bytes_per_value``,
    dropout masks at :data:`MASK_BYTES`. The ops are Megatron-LM's (``megatron/
    core``, GPT layer, its defaults: LayerNorm, biased linears, hidden dropout
    0.1); each reads its inputs and writes its outputs once, weights of ``h``
    values and the layer norms' per-row statistics left out (``1/h`` of the
    rest):

    - a transformer layer, forward ``10 N`` values and ``2 N`` mask bytes: the
      input and pre-MLP layer norms (``transformer_layer.py:723, 830``; read
      ``N``, write ``N`` each) and the two bias-dropout-adds after the
      row-parallel linears (``transformer_layer.py:753-756, 1104-1107``;
      ``fusions/fused_bias_dropout.py:42-51``, one fused kernel as Megatron's
      training runs it, ``--no-bias-dropout-fusion`` off by default:
      ``training/arguments.py:2899-2901``; read the output and the
      residual, write the sum and the mask: ``3 N`` and ``N`` bytes each; the
      bias, of ``h`` values, is added after the all-reduce,
      ``tensor_parallel/layers.py:1567-1572``); backward ``22 N`` and ``2 N``:
      per bias-dropout-add the dropout's gradient (read the gradient and the
      mask, write: ``2 N``, ``N`` bytes) and the bias gradient (a sum over the
      tokens: read ``N``); per layer norm its input gradient (read the
      gradient and the input, write: ``3 N``) and its weight gradients in a
      second pass (read both again: ``2 N``; PyTorch's CUDA layer norm runs
      ``GammaBetaBackwardCUDAKernel`` apart from the input gradient), and
      the addition of the residual's gradient to it (read ``2 N``, write
      ``N``).
    - the embedding (index 0), forward ``8 N + 3 P`` and ``N`` mask bytes: the
      word lookup, whole on every rank (``VocabParallelEmbedding`` looks up
      every token and zeroes the ones outside its vocabulary,
      ``tensor_parallel/layers.py:344-365``: read ``N``, write ``N``), the
      position lookup (``2 P``) and addition (read ``N + P``, write ``N``),
      the copy to ``[s, b, h]`` and the dropout
      (``common/embeddings/language_model_embedding.py:115-156``: ``2 N``
      each, and the mask); backward ``4 N + P`` and ``N`` mask bytes: the
      dropout's gradient (``2 N``, the mask), the position embeddings'
      gradient (read ``N``, write ``P``) and the word embeddings' (each rank
      reads all ``N``; the rows it adds are its own vocabulary's, split).
    - the last layer (final layer norm and output head), forward ``2 N``,
      backward ``5 N``: the final layer norm (``transformer_block.py:756``);
      the head's matrix multiplication and the vocabulary-parallel cross
      entropy split.
    """
    n, p, v = float(values), float(positions), float(bytes_per_value)
    if index == 0:
        return ((8 * n + 3 * p) * v + n * MASK_BYTES, (4 * n + p) * v + n * MASK_BYTES)
    if index == layers - 1:
        return (2 * n * v, 5 * n * v)
    return (10 * n * v + 2 * n * MASK_BYTES, 22 * n * v + 2 * n * MASK_BYTES)


def _line(b0: float, t0: float, b1: float, t1: float, b: float) -> float:
    return t0 + (t1 - t0) * (b - b0) / (b1 - b0)


class Estimator:
    """Layer times of one model on the profiles, measured or by the rules of this module.

    Parameters
    ----------
    profiles : Profiles
    model : ModelProfile
    tensor_parallel : {"profiled", "derived"}
    value_bytes : int or None
        Bytes per value of the TP collectives (the activations' dtype as the
        framework sends them; None: the profile's ``bytes_per_value``).
    shape : ModelShape or None
        The model's shape, for GPU types the profile has no time on.
    sequence : int or None
        Tokens per sample, which size the cross entropy's all-reduces (None: the
        shape's; without either they are not counted, and the notes say so).
    recompute_attention : bool
        Megatron-LM's selective recomputation: each transformer layer's backward pass
        reruns its core attention's forward, ``4 b s^2 h / t`` FLOPs (the ``Q K^T`` and
        attention-times-``V`` products of Narayanan et al. 2021's forward count), added to
        a shape's estimated backward. A measured layer time has no part for the core
        attention: refused on a GPU type the profile measured.
    """

    def __init__(self, profiles: Profiles, model: ModelProfile, *,
                 tensor_parallel: str = "profiled", value_bytes: int | None = None,
                 shape: ModelShape | None = None, sequence: int | None = None,
                 recompute_attention: bool = False) -> None:
        check(tensor_parallel in TP_MODES, "tensor_parallel", "one of " + ", ".join(TP_MODES),
              tensor_parallel)
        self.profiles, self.model, self.mode = profiles, model, tensor_parallel
        self.recompute_attention = bool(recompute_attention)
        self.value_bytes = value_bytes if value_bytes is not None else model.bytes_per_value
        self.shape = shape if shape is not None else model.shape
        if sequence is not None:
            check_int("sequence", sequence, low=1)
        self.sequence = sequence if sequence is not None else (
            self.shape.sequence if self.shape is not None else None)
        self._cache: dict[tuple, tuple[tuple[LayerTimes, ...], tuple[str, ...]]] = {}

    # -- sizes -----------------------------------------------------------------------
    def layer_sizes(self, tp: int, attention: str = "stored"
                    ) -> tuple[tuple[LayerSizes, ...], tuple[str, ...]]:
        """The layers' sizes at ``tp``: the profile's, else from the shape (its activation
        memory that of the ``attention`` path, :func:`~sim.profiles.values.shape_sizes`), else
        TP 1's split."""
        m = self.model
        if any(t == tp for t, _ in m.sizes):
            return m.layer_sizes(tp), ()
        if self.shape is not None:
            memory = {"stored": "s h (10 + 24/t + 5 a s / (h t)) bytes of activation memory per "
                                "sample in 2-byte values (Narayanan et al. 2021; Korthikanti "
                                "et al. 2022, eq. 2)",
                      "flash": "s h (10 + 24/t) + 4 a s / t bytes of activation memory per "
                               "sample in 2-byte values, the attention's flash path (Narayanan "
                               "et al. 2021; Korthikanti et al. 2022, eq. 2 without its 5 a s / "
                               "(h t); Dao et al. 2022)",
                      "selective": "s h (10 + 24/t) bytes of activation memory per sample in "
                                   "2-byte values, the core attention recomputed (Narayanan "
                                   "et al. 2021; Korthikanti et al. 2022, section 4.3)"}
            check(attention in memory, "attention", "one of " + ", ".join(memory), attention)
            return shape_sizes(self.shape, tp, m.bytes_per_value, attention), (
                f"sizes at TP {tp} from the model's shape (the profile has none there): "
                f"12 h^2 + 13 h parameters per transformer layer over {tp} GPUs, s h values out "
                f"of each layer, {memory[attention]}, at {m.bytes_per_value} bytes a value",)
        one = m.layer_sizes(1)
        return tuple(LayerSizes(s.params // tp, s.activation_bytes,
                                s.activation_memory_bytes / tp) for s in one), (
            f"sizes at TP {tp} from TP 1: parameters and activation memory split over {tp} GPUs",)

    # -- times -----------------------------------------------------------------------
    def layer_times(self, gpu: str, microbatch_size: int, tp: int
                    ) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        """``(times per layer, notes)``: measured, or estimated by the module's rules."""
        key = (gpu, microbatch_size, tp)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._times(gpu, microbatch_size, tp)
        return hit

    def _times(self, gpu: str, b: int, tp: int) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        m = self.model
        check_int("microbatch_size", b, low=1)
        check_int("tp", tp, low=1)
        measured_gpu = gpu in m.gpus
        if not measured_gpu:
            if self.shape is not None:
                return self._from_shape(gpu, b, tp)
            check(False, "gpu", f"a GPU type of the profile of {m.name} ({', '.join(m.gpus)}), "
                  "or a model given by its shape on a GPU type of the catalogue", gpu)
        check(not self.recompute_attention, "recompute_granularity", f"unset with the profile "
              f"of {m.name} on {gpu}: its times are whole layers', with no part for the core "
              "attention, whose forward selective recomputation reruns in the backward pass "
              "(a model given by its shape alone is estimated with it)", "selective")
        if tp > 1 and (self.mode == "derived" or not self._has_tp(gpu, tp)):
            # no TP-1 time to derive from: the TP degree is what cannot be had, at any
            # micro-batch size (naming the micro-batch size, where the profile has none at
            # it, sent the user to change a size the profile would estimate at a measured TP)
            tps = sorted({t for (_, _, t) in m.combinations(gpu)})
            check(self._has_tp(gpu, 1), "tp", f"a TP degree the profile of {m.name} measured "
                  f"on {gpu} ({', '.join(map(str, tps))})" + (
                      " (derived TP needs the TP-1 profile there)" if self.mode == "derived"
                      else ", or any other where it measured TP 1 to derive it from "
                      "(docs/real_runs.md)"), tp)
            rows, notes = self._at_mbs(gpu, b, 1)
            return self._derive_tp(gpu, b, tp, rows, notes)
        return self._at_mbs(gpu, b, tp)

    def _has_tp(self, gpu: str, tp: int) -> bool:
        return any(t == tp for (_, _, t) in self.model.combinations(gpu))

    def _at_mbs(self, gpu: str, b: int, tp: int) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        """Times at ``(gpu, b, tp)`` with the TP measured: the profile's at ``b``, else along the
        line of the nearest profiled micro-batch sizes (then the backward rule if needed)."""
        m = self.model
        sizes = sorted({mb for (_, mb, t) in m.combinations(gpu) if t == tp})
        if b in sizes:
            return self._complete(gpu, b, tp, m.layer_times(gpu, b, tp), ())
        check(bool(sizes), "tp", f"a TP degree the profile of {m.name} measured on {gpu} ("
              f"{', '.join(map(str, sorted({t for (_, _, t) in m.combinations(gpu)})))})", tp)
        lo, hi = MBS_RANGE[0] * sizes[0], MBS_RANGE[1] * sizes[-1]
        check(lo <= b <= hi, "microbatch_size", f"a micro-batch size the profile of {m.name} "
              f"measured on {gpu} at TP {tp} ({', '.join(map(str, sizes))}) or one within "
              f"[{lo:g}, {hi:g}] of them (estimated, docs/real_runs.md)", b)
        below = [x for x in sizes if x < b]
        above = [x for x in sizes if x > b]
        if below and above:
            b0, b1, how = below[-1], above[0], "interpolated"
        elif below:
            b0, b1, how = (below[-2] if len(below) > 1 else below[-1]), below[-1], "extrapolated"
        else:
            b0, b1, how = above[0], (above[1] if len(above) > 1 else above[0]), "extrapolated"
        r0, n0 = self._complete(gpu, b0, tp, m.layer_times(gpu, b0, tp), ())
        r1, n1 = self._complete(gpu, b1, tp, m.layer_times(gpu, b1, tp), ())
        near = sizes[-1] if b > sizes[-1] else sizes[0]
        rn = r1 if near == b1 else r0

        def at(x0: float, x1: float, xn: float) -> float:
            v = _line(b0, x0, b1, x1, b) if b1 != b0 else x0 * b / b0
            if how == "interpolated":
                return v
            lo, hi = sorted((xn, xn * b / near))  # between the nearest's time and proportion
            return min(max(v, lo), hi)

        rows = tuple(LayerTimes(at(p.forward, q.forward, n.forward),
                                at(p.backward, q.backward, n.backward),  # type: ignore[arg-type]
                                p.optimizer)  # the optimizer step does not depend on the batch
                     for p, q, n in zip(r0, r1, rn, strict=True))
        src = f"{b0} and {b1}" if b0 != b1 else f"{b0} (proportional)"
        return rows, tuple(dict.fromkeys(n0 + n1 + (
            f"{gpu} micro-batch {b} at TP {tp} {how} from the profiled sizes {src}",)))

    def _complete(self, gpu: str, b: int, tp: int, rows: tuple[LayerTimes, ...],
                  notes: tuple[str, ...]) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        """Fill a forward-only row's backward (and a missing optimizer step) by the rules."""
        if all(r.backward is not None and r.optimizer is not None for r in rows):
            return rows, notes
        out, new = [], list(notes)
        n = len(rows)
        for i, r in enumerate(rows):
            back, opt = r.backward, r.optimizer
            if back is None:
                cf, cb = (0.0, 0.0)
                if tp > 1:
                    nf, nb = tp_collectives(i, n)
                    ar = self._allreduce(gpu, tp, self._hidden_bytes(i, b))
                    cf, cb = nf * ar + self._loss(gpu, tp, b, i, n), nb * ar
                back = 2.0 * max(r.forward - cf, 0.0) + cb
            if opt is None:
                opt = self._adam(gpu, tp, i)
            out.append(LayerTimes(r.forward, back, opt))
        if any(r.backward is None for r in rows):
            new.append(f"{gpu} TP {tp}: backward = 2 x forward compute (forward-only profile)")
        if any(r.optimizer is None for r in rows):
            new.append(f"{gpu} TP {tp}: optimizer step from memory bandwidth (Adam, "
                       f"{ADAM_BYTES_PER_PARAM:g} bytes per parameter)")
        return tuple(out), tuple(new)

    def _hidden_bytes(self, index: int, b: int) -> float:
        """Bytes of one micro-batch's hidden states ``b x s x h`` around layer ``index``."""
        one = self.layer_sizes(1)[0]
        i = index - 1 if index == len(one) - 1 and index > 0 else index
        return b * one[i].activation_bytes * self.value_bytes / self.model.bytes_per_value

    def _allreduce(self, gpu: str, tp: int, size: float) -> float:
        if tp <= 1 or size <= 0:
            return 0.0
        part = size / tp
        bw, _ = self.profiles.intra_node_bandwidth(gpu, tp, part)
        return 2 * (tp - 1) * part / bw

    def _loss(self, gpu: str, tp: int, b: int, index: int, layers: int) -> float:
        """The cross entropy's forward all-reduces in layer ``index`` of ``layers`` (the
        last): :data:`LOSS_ALLREDUCES` rings of ``b s`` fp32 values (0 elsewhere, at TP 1, or
        with no sequence length known)."""
        if index != layers - 1 or self.sequence is None:
            return 0.0
        return LOSS_ALLREDUCES * self._allreduce(gpu, tp, b * self.sequence * LOSS_VALUE_BYTES)

    def _adam(self, gpu: str, tp: int, index: int) -> float:
        mb = self.profiles.gpus[gpu].memory_bandwidth
        check(mb is not None, "memory_bandwidth", f"given for {gpu} in the GPU catalogue (to "
              "estimate an optimizer step the profile does not give)", None)
        params = self.layer_sizes(tp)[0][index].params
        return params * ADAM_BYTES_PER_PARAM / mb  # type: ignore[operator]

    def replicated_times(self, gpu: str, b: int) -> tuple[tuple[float, float], ...]:
        """Per layer ``(forward, backward)`` seconds of the work every TP rank does whole
        (:func:`replicated_bytes` at the catalogue's memory bandwidth; the roofline)."""
        mb = self.profiles.gpus[gpu].memory_bandwidth
        check(mb is not None, "memory_bandwidth", f"given for {gpu} in the GPU catalogue (to "
              "estimate the work a TP group replicates when a TP degree is derived from TP 1)",
              None)
        one = self.layer_sizes(1)[0]
        n = len(one)
        bpv = self.model.bytes_per_value
        out = []
        for i in range(n):
            k = i - 1 if i == n - 1 and i > 0 else i  # the head's input: the hidden states
            positions = one[k].activation_bytes / bpv
            f, g = replicated_bytes(i, n, b * positions, positions, bpv)
            out.append((f / mb, g / mb))  # type: ignore[operator]
        return tuple(out)

    def _derive_tp(self, gpu: str, b: int, tp: int, rows: tuple[LayerTimes, ...],
                   notes: tuple[str, ...]) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        n = len(rows)
        one = self.layer_sizes(1)[0]
        at_t = self.layer_sizes(tp)[0]
        rep = self.replicated_times(gpu, b)
        clamped: list[str] = []

        def split(i: int, what: str, whole: float, replicated: float) -> float:
            if replicated > whole:
                clamped.append(f"{i} {what}")
                replicated = whole
            return (whole - replicated) / tp + replicated

        out = []
        for i, r in enumerate(rows):
            nf, nb = tp_collectives(i, n)
            ar = self._allreduce(gpu, tp, self._hidden_bytes(i, b))
            share = at_t[i].params / one[i].params if one[i].params else 1.0 / tp
            out.append(LayerTimes(split(i, "forward", r.forward, rep[i][0]) + nf * ar
                                  + self._loss(gpu, tp, b, i, n),
                                  split(i, "backward", r.backward, rep[i][1])  # type: ignore[arg-type]
                                  + nb * ar,
                                  r.optimizer * share))  # type: ignore[operator]
        _, src = self.profiles.intra_node_bandwidth(gpu, tp, 1.0)
        mb = self.profiles.gpus[gpu].memory_bandwidth
        new = (f"{gpu} TP {tp} derived from TP 1 (the split compute / {tp}; the layer norms, "
               f"dropouts and residual additions every rank runs whole estimated by roofline at "
               f"the {mb / 1e9:g} GB/s memory bandwidth; Megatron-LM's TP all-reduces over the "  # type: ignore[operator]
               f"{src}; " + (f"the cross entropy's {LOSS_ALLREDUCES} all-reduces of b s fp32 "
                             f"values at s = {self.sequence}" if self.sequence is not None else
                             f"the cross entropy's {LOSS_ALLREDUCES} all-reduces of b s fp32 "
                             "values not counted: no sequence length given") + ")",)
        if clamped:
            new += (f"{gpu} TP {tp} micro-batch {b}: the replicated estimate exceeds the TP-1 time "
                    f"of layer {', '.join(clamped)}: taken as that time, none of it split",)
        return tuple(out), notes + new

    def peak(self, gpu: str) -> float | None:
        """The catalogue's peak FLOP/s of ``gpu`` at this estimator's value size (None: not
        given, or not a GPU of the catalogue): the tensor peak for 2-byte values, else TF32's
        where the GPU has it (NVIDIA's PyTorch containers set
        TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1; the Sailor artifact's Dockerfile builds on
        nvcr.io/nvidia/pytorch:24.10), else fp32's."""
        if gpu not in self.profiles.gpus:
            return None
        g = self.profiles.gpus[gpu]
        return g.peak_flops if self.value_bytes <= 2 else (g.peak_flops_tf32 or g.peak_flops_fp32)

    def can_estimate(self, gpu: str) -> bool:
        """Whether the catalogue's datasheet of ``gpu`` gives a model's shape its times (a peak
        FLOP/s at this value size and a memory bandwidth)."""
        return self.peak(gpu) is not None and self.profiles.gpus[gpu].memory_bandwidth is not None

    def _from_shape(self, gpu: str, b: int, tp: int
                    ) -> tuple[tuple[LayerTimes, ...], tuple[str, ...]]:
        sh = self.shape
        assert sh is not None
        g = self.profiles.gpus[gpu]
        bpv = self.value_bytes
        peak = self.peak(gpu)
        check(peak is not None and g.memory_bandwidth is not None, "gpu",
              "a GPU type with " + ("peak_flops_tf32 or peak_flops_fp32 (the framework runs "
                                    "4-byte values; peak_flops, the fp16/bf16 peak, is used "
                                    "with --framework NAME:precision=bf16 or fp16)"
                                    if bpv > 2 else "peak_flops")
              + " and memory_bandwidth in the catalogue (to estimate a model given by its "
              "shape)", gpu)
        s, h, V = sh.sequence, sh.hidden, sh.vocabulary
        sizes = shape_sizes(sh, tp, bpv)
        act = b * s * h * bpv  # one micro-batch's hidden states
        out = []
        n = len(sizes)
        for i, z in enumerate(sizes):
            if i == 0:
                flops = 0.0
            elif i == n - 1:
                flops = 2.0 * b * s * h * V / tp
            else:
                flops = (24.0 * b * s * h * h + 4.0 * b * s * s * h) / tp
            moved = z.params * bpv + 2.0 * act
            fwd = max(flops / peak, moved / g.memory_bandwidth)  # type: ignore[operator]
            back = 2 * flops
            if self.recompute_attention and 0 < i < n - 1:  # the core attention's forward again
                back += 4.0 * b * s * s * h / tp
            bwd = max(back / peak, 2 * moved / g.memory_bandwidth)  # type: ignore[operator]
            nf, nb = tp_collectives(i, n)
            ar = self._allreduce(gpu, tp, float(act))
            out.append(LayerTimes(fwd + nf * ar + self._loss(gpu, tp, b, i, n), bwd + nb * ar,
                                  z.params * ADAM_BYTES_PER_PARAM / g.memory_bandwidth))  # type: ignore[operator]
        note = (f"{gpu} TP {tp} micro-batch {b} estimated from the model's shape at the GPU's "
                "datasheet peak (roofline lower bound)")
        if self.recompute_attention:
            note += ("; each transformer layer's backward pass reruns its core attention's "
                     "forward, 4 b s^2 h / t FLOPs (selective recomputation)")
        if tp > 1:  # the split and the TP collectives, named as the derived rule names them
            _, src = self.profiles.intra_node_bandwidth(gpu, tp, 1.0)
            note += (f"; each layer's FLOPs and weights split over the {tp} GPUs, plus "
                     f"Megatron-LM's TP all-reduces of b s h values over the {src} (2 per "
                     "transformer layer forward and 2 backward, the embedding's 1 forward, the "
                     "head's 1 backward" + (f", the cross entropy's {LOSS_ALLREDUCES} of b s fp32 "
                                           f"values at s = {self.sequence}"
                                           if self.sequence is not None else "") + ")")
        return tuple(out), (note,)

    # -- a profile the planner can search ---------------------------------------------
    def from_shape(self, combinations: tuple[tuple[str, int, int], ...]) -> ModelProfile:
        """A model given by its shape alone, with the estimates at ``combinations`` (``(gpu,
        microbatch size, tp)``) as its rows: what :mod:`sim.planner` searches. A plan it picks
        is timed by :func:`~sim.profiles.build.build_plan` on the model itself, which gives
        the same rows by the same rule (:meth:`_from_shape`) and names them as estimates."""
        m = self.model
        check(not m.times and self.shape is not None, "model", "a model given by its shape "
              "alone (one with measured times is searched as measured)", m.name)
        return replace(m, times=tuple((k, self._from_shape(*k)[0]) for k in combinations))

    def completed(self) -> ModelProfile:
        """The model's profile with its measured combinations only, each forward-only row's
        backward and missing optimizer step filled by the rules (what :mod:`sim.planner`
        searches)."""
        m = self.model
        times = []
        changed = False
        for key, row in m.times:
            gpu, b, tp = key
            full, _ = self._complete(gpu, b, tp, row, ())
            changed = changed or full != row
            times.append((key, full))
        return replace(m, times=tuple(times)) if changed else m
