"""The plan search: from a model profile and a fleet to the best training plans.

A plan (:class:`sim.profiles.Plan`) fixes the pipeline depth ``p``, the
layers of each stage, the data-parallel width ``dp`` (replicas per stage,
the same for every stage, as Megatron-LM and DeepSpeed run), each
replica's GPU type and TP degree, and the micro-batch size; the global
batch size is the user's. The search enumerates, for every micro-batch size
the profile measured that divides the global batch:

* the set of GPU types (and zones) used and one TP degree per type (a
  measured one that fits a node of that type);
* ``dp`` and ``p`` (``gbs`` divisible by ``mbs * dp``; at most one layer per
  stage);
* a *layout* of the types on the ``p x dp`` grid of replicas:
  ``"stage"``, every stage of one type, the types in contiguous runs along
  the pipeline in every order (a heterogeneous pipeline, like the mixed
  cluster's two-stage run); or ``"pipeline"``, every pipeline (data-parallel
  replica of the whole model) of one type, several types side by side (like
  its two-replica run), all at one TP degree (a stage's replicas share
  one, as DeepSpeed's process grid has it);

and cuts the layers by the exact greedy bottleneck partition
(:func:`sim.analytic.partition.greedy_partition`) on the profile's
per-layer forward-plus-backward times of each stage's GPU type at that
micro-batch size and TP degree, under each stage's memory cap (the memory
model's per-layer terms at that stage's position in the schedule). Every
resulting plan is ranked by the closed form of its iteration time.

Groups ``(mbs, TP degrees, dp, p)`` are visited in order of a lower bound
on the iteration time, ``m max(W_min / p, max_i w_min,i)`` (``m`` micro-
batches per pipeline, each through a bottleneck stage that holds at least
``1/p`` of the cheapest type's work and at least the largest layer), which
holds for any schedule in which a stage runs its ``m`` forward and backward
passes one after another. A plan model may add what it knows below the rest
of the iteration (:meth:`sim.planner.models.ProfilePlanModel.p2p_bound`:
each device's blocking transfers over a boundary, once per micro-batch;
:meth:`~sim.planner.models.ProfilePlanModel.tail_bound`: the all-reduces
after the pipeline). The search stops when the bound passes the ``top``-th
best plan found (for samples per dollar, the bound times the cheapest price
of the group's replicas).
"""

from __future__ import annotations

import bisect
import functools
import gc
import heapq
import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ..analytic.partition import greedy_partition_prefix, prefix_sums
from ..errors import ConfigError, check, check_choice, check_int, check_positive, check_probability
from ..profiles import Fleet, GPUCatalogue, ModelProfile, Plan, ReplicaSpec, StageSpec

__all__ = [
    "OBJECTIVES",
    "LAYOUTS",
    "PlanRequest",
    "PlanModel",
    "Candidate",
    "SearchResult",
    "search_plans",
    "fleet_types",
]

#: time: least iteration time; throughput: most samples per second (the same order at a fixed
#: global batch size); cost: most samples per dollar.
OBJECTIVES = ("time", "throughput", "cost")
LAYOUTS = ("stage", "pipeline")


class PlanModel(Protocol):
    """What the search asks of the iteration-time and memory models (one of each in dtsim)."""

    def predict(self, plan: Plan) -> Any:
        """The closed form of ``plan``: an object with ``iteration_time`` (s) and
        ``peak_memory`` (bytes, the largest over GPUs); ConfigError if it does not fit."""

    def memory_terms(self, gpu: str, tp: int, microbatch_size: int, stage: int, stages: int,
                     microbatches: int) -> tuple[tuple[float, tuple[float, ...]], ...]:
        """A stage's memory on one GPU as constraints ``fixed + sum of per-layer bytes over its
        layers <= memory_cap`` (several when the model takes a maximum of sums). A model whose
        ``memory_dp`` attribute is true also takes ``dp=``, the stage's replicas (the memory
        depends on it: DeepSpeed's BF16_Optimizer partitions its optimizer state over them)."""

    def memory_cap(self, gpu: str, tp: int) -> float:
        """Bytes a GPU of this type can give the model's tensors at this TP degree."""

    # Optional: ``tail_bound(kinds, dp, stages, uniform)``, a lower bound on what the iteration
    # adds to the pipeline phase (all-reduces, optimizer step) for any plan of ``stages`` stages
    # of ``dp`` replicas of these kinds (``uniform``: every stage's replicas of one kind, every
    # kind holding a stage) (:meth:`sim.planner.models.ProfilePlanModel.tail_bound`);
    # a model without it is bounded by its compute alone. Optional too:
    # ``p2p_bound(a, b, microbatch_size)``, a lower bound on the device time one micro-batch's
    # transfers over a stage boundary from a replica of kind ``a`` to one of kind ``b`` cost each
    # of the two devices (:meth:`sim.planner.models.ProfilePlanModel.p2p_bound`).


@dataclass(frozen=True)
class PlanRequest:
    """What a user asks the planner (values only; validated on construction).

    Parameters
    ----------
    global_batch_size : int
        Samples per iteration (the training recipe's; not searched).
    objective : {"time", "throughput", "cost"}
        Least iteration time, most samples per second, or most samples per
        dollar (needs a price for every GPU type used).
    microbatch_sizes : tuple of int or None
        Micro-batch sizes to try (default: every size the profile measured
        that divides the global batch size).
    tp : tuple of int or None
        TP degrees to try (default: every measured one that fits a node).
    max_stages : int or None
        Deepest pipeline to try (default: one layer per stage).
    layouts : tuple of str
        ``"stage"`` and/or ``"pipeline"`` (see the module docstring).
    max_price_per_hour : float or None
        Only plans whose GPUs cost at most this (dollars per hour).
    prices : tuple of (gpu, float)
        Dollars per GPU-hour, overriding (or completing) the catalogue's.
    memory_fraction : float
        Fraction of each GPU's usable memory a plan may fill (default 1).
    top : int
        Plans to keep (the search stops when its bound passes the top-th).
    """

    global_batch_size: int
    objective: str = "time"
    microbatch_sizes: tuple[int, ...] | None = None
    tp: tuple[int, ...] | None = None
    max_stages: int | None = None
    layouts: tuple[str, ...] = LAYOUTS
    max_price_per_hour: float | None = None
    prices: tuple[tuple[str, float], ...] = ()
    memory_fraction: float = 1.0
    top: int = 10

    def __post_init__(self) -> None:
        check_int("global_batch_size", self.global_batch_size, low=1)
        check_choice("objective", self.objective, OBJECTIVES)
        for name in ("microbatch_sizes", "tp"):
            v = getattr(self, name)
            if v is not None:
                check(isinstance(v, tuple) and len(v) >= 1, name, "a non-empty tuple of integers",
                      v)
                for x in v:
                    check_int(name, x, low=1)
                # one rule with the other set-like lists (--price once per GPU type, a
                # network's nodes, the adversary positions): a repeat is refused, not merged
                check(len(set(v)) == len(v), name, "values each given once", v)
        if self.max_stages is not None:
            check_int("max_stages", self.max_stages, low=1)
        check(isinstance(self.layouts, tuple) and len(self.layouts) >= 1, "layouts",
              "a non-empty tuple of " + ", ".join(LAYOUTS), self.layouts)
        for x in self.layouts:
            check_choice("layouts", x, LAYOUTS)
        check(len(set(self.layouts)) == len(self.layouts), "layouts", "values each given once",
              self.layouts)
        if self.max_price_per_hour is not None:
            check_positive("max_price_per_hour", self.max_price_per_hour)
        check(isinstance(self.prices, tuple), "prices", "a tuple of (gpu, price) pairs", self.prices)
        for pair in self.prices:
            check(isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str),
                  "prices", "(gpu, price) pairs", pair)
            check_positive("prices", pair[1])
        check_probability("memory_fraction", self.memory_fraction, open_low=True)
        check_int("top", self.top, low=1)


@dataclass(frozen=True)
class Candidate:
    """One ranked plan with its closed-form prediction."""

    plan: Plan
    layout: str
    iteration_time: float
    peak_memory: float
    price_per_hour: float | None
    prediction: Any = field(compare=False, repr=False)

    @property
    def gpus(self) -> int:
        return self.plan.gpus

    @property
    def samples_per_second(self) -> float:
        return self.plan.global_batch_size / self.iteration_time

    @property
    def samples_per_dollar(self) -> float | None:
        if self.price_per_hour is None or self.price_per_hour == 0:
            return None
        return self.samples_per_second * 3600.0 / self.price_per_hour

    def key(self, objective: str) -> float:
        """Smaller is better."""
        if objective == "cost":
            spd = self.samples_per_dollar
            return math.inf if spd is None else 1.0 / spd
        return self.iteration_time


@dataclass(frozen=True)
class SearchResult:
    """The best plans, best first, and what the search did."""

    candidates: tuple[Candidate, ...]
    objective: str
    evaluated: int
    partitions: int
    groups: int
    groups_pruned: int
    refused: int
    seconds: float
    #: plans cut whose compute bound, or whose busiest device's time read off their build
    #: (PlanModel.predict_unless), passed the top-th: never ranked
    skipped: int = 0

    @property
    def best(self) -> Candidate:
        return self.candidates[0]


# ----------------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class _Type:
    """GPUs of one type in one zone: their node sizes and counts."""

    gpu: str
    zone: str
    nodes: tuple[tuple[int, int], ...]  # (gpus_per_node, count)

    @property
    def max_tp(self) -> int:
        return max(g for g, n in self.nodes if n > 0)

    def slots(self, tp: int) -> int:
        """Replicas of ``tp`` GPUs the nodes hold (a replica's TP group is within one node)."""
        return sum(n * (g // tp) for g, n in self.nodes)

    def gpus(self) -> int:
        return sum(g * n for g, n in self.nodes)


def fleet_types(fleet: Fleet) -> tuple[_Type, ...]:
    """The fleet's GPUs grouped by (type, zone)."""
    by: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for kind, count in fleet.nodes:
        if count > 0:
            by.setdefault((kind.gpu, kind.zone), []).append((kind.gpus_per_node, count))
    return tuple(_Type(g, z, tuple(sorted(n))) for (g, z), n in sorted(by.items()))


# ----------------------------------------------------------------------------- the search


class _Search:
    """One search: the inputs, caches of per-layer rows and memory terms, and the counters."""

    def __init__(self, model: ModelProfile, fleet: Fleet, gpus: GPUCatalogue,
                 request: PlanRequest, pm: PlanModel, compiled_cut: bool = True) -> None:
        self.model, self.catalogue, self.req, self.pm = model, gpus, request, pm
        self.n = model.layers
        self.prices = dict(request.prices)
        check(fleet.gpus > 0, "fleet", "at least one GPU (a node kind with count >= 1)",
              ", ".join(f"{k.gpu} x {n}" for k, n in fleet.nodes))
        check(len(model.gpus) > 0, "model", "a profile with times ('times' rows: the search "
              "ranks the GPU types, micro-batch sizes and TP degrees they hold; a model given "
              "by its shape alone gets estimated rows from sim.planner.models."
              "shape_search_model, as dtsim plan does)", model.name)
        self.types = tuple(t for t in fleet_types(fleet) if t.gpu in model.gpus)
        check(len(self.types) > 0, "fleet", f"GPUs of a type the profile of {model.name} measured "
              f"({', '.join(model.gpus)})", ", ".join(sorted({k.gpu for k, _ in fleet.nodes})))
        if request.objective == "cost" or request.max_price_per_hour is not None:
            unpriced = sorted({t.gpu for t in self.types if self.price(t.gpu) is None})
            check(not unpriced, "prices", "a price for every GPU type of the fleet (the "
                  "catalogue's, or given: --price GPU=DOLLARS_PER_HOUR)", ", ".join(unpriced))
        self._rows: dict[tuple[str, int, int], tuple[float, ...]] = {}
        self._prefix: dict[tuple[str, int, int], list[float]] = {}
        self._mem: dict[tuple, list[tuple[float, list[float]]]] = {}
        self._mem_dp = bool(getattr(pm, "memory_dp", False))  # memory_terms takes dp
        self._specs: dict[tuple[str, int, str], ReplicaSpec] = {}
        self._tails: dict[tuple, float] = {}
        self._tail_bound = getattr(pm, "tail_bound", None)
        self._p2p: dict[tuple, float] = {}
        self._p2p_bound = getattr(pm, "p2p_bound", None)
        self._predict_unless = getattr(pm, "predict_unless", None)
        self.evaluated = self.partitions = self.refused = self.groups = self.pruned = 0
        self.skipped = 0  # plans cut but not ranked: a bound of theirs passed the top-th
        self.over_budget = 0  # plans or groups left out for max_price_per_hour
        self.prune = True
        # the plans ranked, each once (a plan equal to one ranked before takes its place), and
        # where their candidate is in self.ranked: the order found, which breaks ties
        self._place: dict[Plan, int] = {}
        self.ranked: list[Candidate] = []
        self._keys: list[float] = []  # the top smallest keys of self.ranked, sorted
        # (rank key, place) of the candidates that still hold their prediction (a plan's
        # build and rows, in proportion to its replicas): :meth:`_release` keeps them to the
        # top ranked, the only ones read again
        self._held: list[tuple[float, int, int, int]] = []
        from .cut import HAVE_NUMBA, RowBank, StageTable

        # the prefix-sum rows and stages the compiled cut reads (None: the Python cut)
        self._bank = RowBank(self.n + 1) if HAVE_NUMBA and compiled_cut else None
        self._table = StageTable()
        self._stage_ids: dict[tuple, int] = {}
        self._stage_specs: dict[tuple, StageSpec] = {}  # kept: their ids name them below
        self._stage_terms: dict[int, tuple[tuple[float, ...], bool]] = {}  # price terms, priced
        self._ranked: set[tuple] = set()  # the plans ranked, by their stages' ids

    @property
    def best(self) -> dict[Plan, Candidate]:
        """The plans ranked and their candidates, in the order found (those past the top-th
        without their prediction: :meth:`_release`)."""
        return {plan: self.ranked[at] for plan, at in self._place.items()}

    # -- inputs ------------------------------------------------------------------------
    def price(self, gpu: str) -> float | None:
        if gpu in self.prices:
            return self.prices[gpu]
        return self.catalogue[gpu].price_per_hour if gpu in self.catalogue else None

    def row(self, gpu: str, mbs: int, tp: int) -> tuple[float, ...]:
        """Forward plus backward time of each layer for one micro-batch."""
        key = (gpu, mbs, tp)
        r = self._rows.get(key)
        if r is None:
            r = self._rows[key] = tuple(t.forward + t.backward
                                        for t in self.model.layer_times(gpu, mbs, tp))
            self._prefix[key] = prefix_sums(r)
        return r

    def memory(self, gpu: str, tp: int, mbs: int, j: int, p: int, m: int, dp: int
               ) -> list[tuple[float, list[float]]]:
        """Per memory constraint of stage ``j`` of ``p`` of ``dp`` replicas: (cap left for the
        layers, prefix sums of the per-layer bytes)."""
        key = self._mem_key(gpu, tp, mbs, j, p, m, dp)
        x = self._mem.get(key)
        if x is None:
            cap = self.pm.memory_cap(gpu, tp) * self.req.memory_fraction
            terms = (self.pm.memory_terms(gpu, tp, mbs, j, p, m, dp=dp) if self._mem_dp
                     else self.pm.memory_terms(gpu, tp, mbs, j, p, m))
            x = self._mem[key] = [(cap - fixed, prefix_sums(per)) for fixed, per in terms]
        return x

    def _mem_key(self, gpu: str, tp: int, mbs: int, j: int, p: int, m: int, dp: int) -> tuple:
        """:meth:`memory`'s key: ``dp`` in it only where the model's memory depends on it."""
        return (gpu, tp, mbs, j, p, m, dp) if self._mem_dp else (gpu, tp, mbs, j, p, m)

    def spec(self, t: _Type, tp: int) -> ReplicaSpec:
        """A replica: ``tp`` GPUs of one node (Sailor's convention: the plan's node is the TP group)."""
        key = (t.gpu, tp, t.zone)
        s = self._specs.get(key)
        if s is None:
            s = self._specs[key] = ReplicaSpec(t.gpu, tp, gpus_per_node=tp, zone=t.zone)
        return s

    def tp_options(self, t: _Type, mbs: int) -> list[int]:
        want = self.req.tp
        heads = self.model.shape.heads if self.model.shape is not None else None
        runs = getattr(self.pm, "tp_degrees", None)  # the framework's (Sailor's: 1, 2, 4)
        return sorted({tp for (_, b, tp) in self.model.combinations(t.gpu)
                       if b == mbs and t.slots(tp) > 0 and (want is None or tp in want)
                       and self.model.has(t.gpu, mbs, tp)
                       and (runs is None or tp in runs)
                       and (heads is None or heads % tp == 0)})  # heads split evenly

    def mbs_options(self) -> list[int]:
        gbs = self.req.global_batch_size
        measured = sorted({b for t in self.types for (_, b, _) in self.model.combinations(t.gpu)})
        want = self.req.microbatch_sizes
        return [b for b in measured if gbs % b == 0 and (want is None or b in want)]

    def tail(self, pairs: tuple[tuple[_Type, int], ...], dp: int, p: int,
             uniform: bool = False) -> float:
        """The model's lower bound on the iteration's tail for these kinds (0 without one);
        ``uniform``: every stage of one kind, every kind holding a stage (the stage layout)."""
        if self._tail_bound is None:
            return 0.0
        key = (pairs, dp, p, uniform)
        x = self._tails.get(key)
        if x is None:
            x = self._tails[key] = float(self._tail_bound(
                tuple(self.spec(t, tp) for t, tp in pairs), dp, p, uniform))
        return x

    def hop(self, a: tuple[_Type, int], b: tuple[_Type, int], mbs: int) -> float:
        """The model's lower bound on a stage boundary's per-micro-batch device time (0 without one)."""
        if self._p2p_bound is None:
            return 0.0
        key = (a, b, mbs)
        x = self._p2p.get(key)
        if x is None:
            x = self._p2p[key] = float(self._p2p_bound(self.spec(*a), self.spec(*b), mbs))
        return x

    def unit_price(self, t: _Type, tp: int) -> float:
        return tp * (self.price(t.gpu) or 0.0)

    # -- ranking -------------------------------------------------------------------------
    def threshold(self) -> float:
        k = self.req.top
        return self._keys[k - 1] if len(self._keys) >= k else math.inf

    def objective_bound(self, t_lb: float, rate: float) -> float:
        if self.req.objective == "cost":
            return t_lb * rate / 3600.0 / self.req.global_batch_size
        return t_lb

    def admit(self, plan: Plan, layout: str, compute: float = 0.0, tail: float = 0.0) -> None:
        """Rank ``plan`` by the closed form, unless ``m x compute + tail`` (its bottleneck
        stage's forward and backward passes, a lower bound on any schedule's pipeline phase,
        plus the model's bound on the tail after it) already puts it past the top-th plan."""
        # the plan's identity (its stages are made once each, by plan()) and its price, the
        # replicas' terms added in order as sum() would
        ident = (tuple(map(id, plan.stages)), plan.microbatch_size)
        if ident in self._ranked:
            return
        terms = self._stage_terms
        rate: float = 0
        priced = True
        for st in plan.stages:
            x, p = terms[id(st)]
            priced = priced and p
            for u in x:
                rate += u
        if self.prune:
            if self.objective_bound(plan.microbatches * compute + tail, rate) >= self.threshold():
                self.skipped += 1
                return
        try:
            if self.prune and self._predict_unless is not None:
                # its busiest device's time, NIC sharing included, may already pass the top-th
                thr = self.threshold()
                pred = self._predict_unless(
                    plan, lambda t: self.objective_bound(t + tail, rate) >= thr)
                if pred is None:
                    self.skipped += 1
                    return
            else:
                pred = self.pm.predict(plan)
        except ConfigError:
            self.evaluated += 1
            self.refused += 1
            return
        self.evaluated += 1
        cand = Candidate(plan, layout, float(pred.iteration_time), float(pred.peak_memory),
                         rate if priced else None, pred)
        if self.req.max_price_per_hour is not None and rate > self.req.max_price_per_hour:
            self.over_budget += 1
            return
        key = cand.key(self.req.objective)
        at = self._place.setdefault(plan, len(self.ranked))
        if at == len(self.ranked):
            self.ranked.append(cand)
        else:
            self.ranked[at] = cand
        self._ranked.add(ident)
        bisect.insort(self._keys, key)
        del self._keys[self.req.top:]  # threshold() reads the top-th alone
        self._held.append((key, cand.gpus, plan.pipeline_stages, at))
        if len(self._held) > 2 * self.req.top:
            self._release()

    def _release(self) -> None:
        """Drop the predictions of the candidates past the top-th in the final ranking (the
        objective's key, then fewer GPUs, fewer stages, the order found: _search_plans' sort); a
        candidate past it stays past it, and the output reads only the top's predictions. At
        GH-96:4x30000 the search kept every ranked plan's build (552 of up to 26,624 nodes:
        1.9 GB peak RSS)."""
        held = sorted(set(self._held))  # a plan ranked again is in it twice, alike
        for *_, at in held[self.req.top:]:
            self.ranked[at] = replace(self.ranked[at], prediction=None)
        self._held = held[:self.req.top]

    # -- building plans ----------------------------------------------------------------
    def cut(self, stage_types: Sequence[Sequence[tuple[_Type, int]]], mbs: int, m: int
            ) -> tuple[tuple[tuple[int, int], ...], float] | None:
        """The greedy bottleneck cut for stages whose replicas have these (type, tp), and its
        bottleneck (a micro-batch's forward and backward on the slowest stage), or None.

        Compiled when numba is installed (:func:`sim.planner.cut.greedy_cut`, the same
        cut), else :func:`sim.analytic.partition.greedy_partition_prefix`."""
        p = len(stage_types)
        if self._bank is not None:
            return self._cut_compiled(stage_types, mbs, m)
        times, mem, caps = [], [], []
        for j, reps in enumerate(stage_types):
            kinds = list(dict.fromkeys(reps))
            for t, tp in kinds:
                self.row(t.gpu, mbs, tp)
            times.append([self._prefix[(t.gpu, mbs, tp)] for t, tp in kinds])
            terms = [x for t, tp in kinds for x in self.memory(t.gpu, tp, mbs, j, p, m,
                                                                len(reps))]
            if any(c < 0 for c, _ in terms):
                return None
            mem.append([per for _, per in terms])
            caps.append([c for c, _ in terms])
        self.partitions += 1
        part = greedy_partition_prefix(times, mem, caps)
        if part is None or min(part.sizes) == 0:  # a stage left empty: the shallower plan is searched on its own
            return None
        return part.blocks, part.bottleneck

    def _stage_id(self, reps: Sequence[tuple[_Type, int]], mbs: int, j: int, p: int, m: int
                  ) -> int:
        """One stage of a compiled cut, by id in the stage table (its kinds' layer-time rows,
        memory rows and caps); -1 when a memory term has no room left."""
        bank = self._bank
        kinds = list(dict.fromkeys(reps))
        crow, mrow, mcap = [], [], []
        for t, tp in kinds:
            self.row(t.gpu, mbs, tp)
            crow.append(bank.id((t.gpu, mbs, tp), self._prefix[(t.gpu, mbs, tp)]))
        for t, tp in kinds:
            key = self._mem_key(t.gpu, tp, mbs, j, p, m, len(reps))
            for q, (c, per) in enumerate(self.memory(t.gpu, tp, mbs, j, p, m, len(reps))):
                if c < 0:
                    return -1
                mrow.append(bank.id((key, q), per))
                mcap.append(c)
        return self._table.add(crow, mrow, mcap)

    def _cut_compiled(self, stage_types: Sequence[Sequence[tuple[_Type, int]]], mbs: int, m: int
                      ) -> tuple[tuple[tuple[int, int], ...], float] | None:
        """:meth:`cut` through :func:`sim.planner.cut.greedy_cut_stages`."""
        from .cut import greedy_cut_stages

        p = len(stage_types)
        ids = self._stage_ids
        sids = []
        for j, reps in enumerate(stage_types):
            key = (tuple(reps), mbs, j, p, m)
            sid = ids.get(key)
            if sid is None:
                sid = ids[key] = self._stage_id(reps, mbs, j, p, m)
            if sid < 0:  # a memory term with no room left
                return None
            sids.append(sid)
        self.partitions += 1
        t = self._table
        cuts = np.empty(p + 1, dtype=np.int64)
        bottleneck = greedy_cut_stages(self._bank.rows, t.bounds, t.crow, t.mrow, t.mcap,
                                       np.array(sids, dtype=np.int64), self.n, cuts)
        if bottleneck != bottleneck:  # no cut fits
            return None
        c = cuts.tolist()
        blocks = tuple(zip(c[:-1], c[1:], strict=True))
        if min(b - a for a, b in blocks) == 0:  # a stage left empty: searched on its own
            return None
        return blocks, bottleneck

    def plan(self, stage_types: Sequence[Sequence[tuple[_Type, int]]], mbs: int, m: int
             ) -> tuple[Plan, float] | None:
        cut = self.cut(stage_types, mbs, m)
        if cut is None:
            self.refused += 1
            return None
        blocks, bottleneck = cut
        specs = self._stage_specs
        stages = []
        for (a, b), reps in zip(blocks, stage_types, strict=True):
            key = (a, b, tuple(reps))
            st = specs.get(key)
            if st is None:  # a stage met before is the same value: made (and checked) once
                st = specs[key] = StageSpec(tuple(range(a, b)),
                                            tuple(self.spec(t, tp) for t, tp in reps))
                self._stage_terms[id(st)] = (
                    tuple(r.tp * (self.price(r.gpu) or 0.0) for r in st.replicas),
                    all(self.price(r.gpu) is not None for r in st.replicas))
            stages.append(st)
        return Plan(tuple(stages), mbs, self.req.global_batch_size,
                    model=self.model.name), bottleneck

    # -- the search ----------------------------------------------------------------------
    def run(self, prune: bool = True) -> None:
        """Best first by bound; stop when the bound reaches the top-th key (all, unpruned).

        On a terminal two progress bars with an ETA (:func:`sim.progress.bar`): the
        bounds of every (micro-batch size, GPU types, TP degrees), then the groups.
        """
        from .. import progress

        self.prune = prune
        heap: list[tuple[float, int, Any]] = []
        tick = itertools.count()
        kinds = sum(math.prod(len(self.tp_options(t, mbs)) for t in types)
                    for mbs in self.mbs_options() for k in range(1, len(self.types) + 1)
                    for types in itertools.combinations(self.types, k))
        with progress.bar(kinds, "plan search (bounds)", unit="kind") as bar:
            for g in self.group_items(bar.update):
                heapq.heappush(heap, (g[0], next(tick), g[1]))
        # on a terminal, a bar over the groups (at most all of them are expanded: its ETA is
        # an upper bound, the search stops earlier at the bound)
        with progress.bar(len(heap), "plan search (groups)", unit="group") as bar:
            while heap:
                bound, _, item = heapq.heappop(heap)
                if prune and bound >= self.threshold():
                    self.pruned += 1 + len(heap)
                    break
                if item[0] == "group":
                    self.groups += 1
                    bar.update(1)
                    for b, sub in self.expand(item):
                        if not prune or b < self.threshold():
                            heapq.heappush(heap, (b, next(tick), sub))
                        else:
                            self.pruned += 1
                else:
                    self.evaluate(item)

    def group_items(self, done: Any = None) -> Iterator[tuple[float, tuple]]:
        """Every (mbs, types, TP degrees, dp, p) with its bound on the objective's key
        (``done(1)`` after each (mbs, types, TP degrees): the progress bar's unit)."""
        max_p = min(self.n, self.req.max_stages or self.n)
        gbs = self.req.global_batch_size
        for mbs in self.mbs_options():
            for k in range(1, len(self.types) + 1):
                for types in itertools.combinations(self.types, k):
                    opts = [self.tp_options(t, mbs) for t in types]
                    for tps in itertools.product(*opts):
                        pairs = tuple(zip(types, tps, strict=True))
                        slots = [t.slots(tp) for t, tp in pairs]
                        rows = [self.row(t.gpu, mbs, tp) for t, tp in pairs]
                        ref = [min(r[i] for r in rows) for i in range(self.n)]
                        W = sum(ref)
                        rho = [min((r[i] / ref[i]) if ref[i] > 0 else math.inf
                                   for i in range(self.n)) for r in rows]
                        rho = [x if math.isfinite(x) else 1.0 for x in rho]
                        wmax = max(ref)
                        cheapest = min(self.unit_price(t, tp) for t, tp in pairs)
                        # with two or more stages every device has a boundary between two of the
                        # kinds, whose transfers it does once per micro-batch besides its compute
                        hop = min(self.hop(a, b, mbs) for a in pairs for b in pairs)
                        info = (pairs, slots, rows, ref, W, rho, wmax)
                        for dp in range(1, min(sum(slots), gbs // mbs) + 1):  # mbs dp | gbs
                            if gbs % (mbs * dp):
                                continue
                            m = gbs // (mbs * dp)
                            for p in range(1, max_p + 1):
                                if p * dp > sum(slots):
                                    break
                                if p < k and dp < k:
                                    continue
                                t_lb = m * (max(W * min(rho) / p, wmax) + (hop if p > 1 else 0.0)) \
                                    + self.tail(pairs, dp, p)
                                rate = cheapest * p * dp
                                if (self.req.max_price_per_hour is not None
                                        and rate > self.req.max_price_per_hour):
                                    self.over_budget += 1
                                    continue
                                yield (self.objective_bound(t_lb, rate),
                                       ("group", mbs, dp, p, m, info))
                        if done is not None:
                            done(1)

    def expand(self, item: tuple) -> Iterator[tuple[float, tuple]]:
        """The layouts of a group, each composition with its own bound."""
        _, mbs, dp, p, m, (pairs, slots, rows, ref, W, rho, wmax) = item
        k = len(pairs)
        units = [self.unit_price(t, tp) for t, tp in pairs]
        budget = self.req.max_price_per_hour
        tail, tail_stage = self.tail(pairs, dp, p), self.tail(pairs, dp, p, True)
        # the busiest device's transfers: a boundary between two runs of kinds (k > 1), and one
        # inside every run of two or more stages (each device does m of its boundaries' hops)
        cross = min((self.hop(a, b, mbs) for a in pairs for b in pairs if a != b), default=0.0)
        own = [self.hop(a, a, mbs) for a in pairs]
        least = min(self.hop(a, b, mbs) for a in pairs for b in pairs) if p > 1 else 0.0
        if "stage" in self.req.layouts or k == 1:
            for c in _compositions(p, k):
                if any(ci * dp > s for ci, s in zip(c, slots, strict=True)):
                    continue
                hops = max([cross if k > 1 else 0.0]
                           + [h for h, ci in zip(own, c, strict=True) if ci >= 2])
                t_lb = m * max(max(W / sum(ci / r for ci, r in zip(c, rho, strict=True)), wmax)
                               + least, hops) + tail_stage
                rate = dp * sum(ci * u for ci, u in zip(c, units, strict=True))
                if budget is None or rate <= budget:
                    yield self.objective_bound(t_lb, rate), ("stage", mbs, dp, p, m, pairs, c)
                else:
                    self.over_budget += 1
        # a stage's replicas share one TP degree (DeepSpeed's grid; build_plan refuses others)
        if "pipeline" in self.req.layouts and k > 1 and len({tp for _, tp in pairs}) == 1:
            for d in _compositions(dp, k):
                if any(di * p > s for di, s in zip(d, slots, strict=True)):
                    continue
                t_lb = m * max(max(max(sum(r) for r in rows) / p, max(max(r) for r in rows))
                               + (min(own) if p > 1 else 0.0), max(own) if p > 1 else 0.0) + tail
                rate = p * sum(di * u for di, u in zip(d, units, strict=True))
                if budget is None or rate <= budget:
                    yield self.objective_bound(t_lb, rate), ("pipeline", mbs, dp, p, m, pairs, d)
                else:
                    self.over_budget += 1

    def evaluate(self, item: tuple) -> None:
        kind, mbs, dp, p, m, pairs, counts = item
        tail = self.tail(pairs, dp, p, kind == "stage")
        if kind == "stage":
            used = [(pair, c) for pair, c in zip(pairs, counts, strict=True)]
            for order in itertools.permutations(used):
                seq = [pair for pair, c in order for _ in range(c)]
                made = self.plan([[pair] * dp for pair in seq], mbs, m)
                if made is not None:
                    self.admit(made[0], "stage", made[1], tail)
        else:
            reps = [pair for pair, d in zip(pairs, counts, strict=True) for _ in range(d)]
            made = self.plan([reps] * p, mbs, m)
            if made is not None:
                self.admit(made[0], "pipeline", made[1], tail)


@functools.lru_cache(maxsize=1024)
def _compositions(total: int, parts: int) -> tuple[tuple[int, ...], ...]:
    """Ordered ways to write ``total`` as ``parts`` positive integers (in lexicographic order of
    their cut points; worked out once per arguments)."""
    out = []
    for cuts in itertools.combinations(range(1, total), parts - 1):
        b = (0, *cuts, total)
        out.append(tuple(b[i + 1] - b[i] for i in range(parts)))
    return tuple(out)


def search_plans(model: ModelProfile, fleet: Fleet, gpus: GPUCatalogue, request: PlanRequest,
                 plan_model: PlanModel, *, prune: bool = True) -> SearchResult:
    """The best plans for ``model`` on ``fleet`` (see the module docstring for the search).

    Parameters
    ----------
    model : ModelProfile
    fleet : Fleet
        GPUs available: node kinds (GPU type, GPUs per node, zone) and counts.
    gpus : GPUCatalogue
        Memory and prices of the GPU types.
    request : PlanRequest
    plan_model : PlanModel
        The closed form of the iteration time and the memory model.
    prune : bool
        Stop at the bound (default); False evaluates every plan of the search
        space (to check that the bound never drops one of the best).

    Returns
    -------
    SearchResult
        At most ``request.top`` plans, best first.

    Raises
    ------
    ConfigError
        When no plan fits the fleet (naming ``fleet``), or for bad input.
    """
    check(isinstance(request, PlanRequest), "request", "a PlanRequest", request)
    # every plan ranked keeps its build (objects in proportion to its replicas) and the caches
    # grow with the placements: the full collections these allocations triggered scanned all
    # of it again and again (half the CPU time of GH-96:4x1000 at --global-batch-size 1024).
    # Next to nothing it makes is cyclic garbage (a collection after a search of 1118 plans of
    # three GPU types finds none): the collector waits until it has returned (all but the plans
    # kept then freed)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _search_plans(model, fleet, gpus, request, plan_model, prune)
    finally:
        if was_enabled:
            gc.enable()


def _search_plans(model: ModelProfile, fleet: Fleet, gpus: GPUCatalogue, request: PlanRequest,
                  plan_model: PlanModel, prune: bool) -> SearchResult:
    """:func:`search_plans`, with the collector paused."""
    t0 = time.perf_counter()
    s = _Search(model, fleet, gpus, request, plan_model)
    check(len(s.mbs_options()) > 0, "microbatch_sizes",
          f"a micro-batch size the profile measured that divides global_batch_size "
          f"{request.global_batch_size}", request.microbatch_sizes)
    if request.tp is not None:
        fits = sorted({tp for t in s.types for b in s.mbs_options() for tp in s.tp_options(t, b)})
        runs = getattr(s.pm, "tp_degrees", None)
        heads = model.shape.heads if model.shape is not None else None
        check(len(fits) > 0, "tp", "a TP degree the profile has times at (measured, or "
              "estimated for a model given by its shape) that fits a node of the fleet "
              f"(largest node: {max(t.max_tp for t in s.types)} GPUs)"
              + ("" if heads is None else f", divides the {heads} attention heads of "
                 f"{model.name}")
              + ("" if runs is None else " and the framework runs (" + ", ".join(map(str, runs))
                 + ")"), request.tp)
    s.run(prune)
    ranked = sorted(s.ranked, key=lambda c: (c.key(request.objective), c.gpus,
                                                    c.plan.pipeline_stages))
    # (audit5) no plan: the option that left plans out is named, not the fleet (--max-price-per-
    # hour 1e-300 or --memory-fraction 1e-300 named 'fleet', which holds the model at the defaults)
    if not ranked and s.over_budget:
        check(False, "max_price_per_hour", f"at least the price per hour of a plan that holds "
              f"{model.name} ({s.over_budget} plans or groups of plans priced above it, none "
              "below it fits)", request.max_price_per_hour)
    if not ranked and request.memory_fraction < 1.0:
        check(False, "memory_fraction", f"large enough that a plan holds {model.name} (no plan "
              "fits that fraction of each GPU's memory, or the network lacks a link it needs)",
              request.memory_fraction)
    check(len(ranked) > 0, "fleet", f"GPUs enough to hold {model.name} (no plan fits their memory "
          "or the network lacks a link they need)", f"{sum(t.gpus() for t in s.types)} GPUs")
    return SearchResult(tuple(ranked[: request.top]), request.objective, s.evaluated,
                        s.partitions, s.groups, s.pruned, s.refused, time.perf_counter() - t0,
                        s.skipped)
