"""Megatron-LM's attention activation memory by the path Megatron takes (usertrial: LLaMA-2-7B
shaped plans on A100s refused for memory that fit).

Megatron-LM builds its GPT layers with Transformer Engine's DotProductAttention
(``--transformer-impl transformer_engine``, the default at every core tag read), which in fp16
or bf16 on compute capability 8.0 or later runs flash or fused attention and keeps no ``s x s``
matrix, only the softmax statistics (``a s / t`` fp32 values a sample); below 8.0, or in fp32,
it runs its unfused attention, which keeps the softmax output, its dropout mask and the dropped
probabilities as Korthikanti et al. 2022's eq. 2 counts them; selective recomputation keeps
nothing of the core attention. The hand example (h 4096, a 32, s 4096, b 1, TP 4), per
transformer layer: eq. 2 ``4096 * 4096 * (10 + 24/4 + 5 * 32 * 4096 / (4096 * 4)) = 16,777,216
* 56 = 939,524,096`` bytes; flash ``16,777,216 * 16 + 4 * 32 * 4096 / 4 = 268,435,456 +
131,072 = 268,566,528``; selective ``268,435,456``.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.planner.models import ProfilePlanModel
from sim.profiles import Plan, ReplicaSpec, StageSpec, load_profiles
from sim.profiles.build import build_plan
from sim.profiles.formats import DATA_DIR, gpus_from_data
from sim.profiles.frameworks import FrameworkSpec
from sim.profiles.megatron_args import megatron_plan_from_text

ZONE = "us-central1-a"
STORED, FLASH, SELECTIVE = 939_524_096, 268_566_528, 268_435_456
#: The hand example's shape: two transformer layers, a small vocabulary (the head's memory is
#: s V bytes / t, apart from the attention).
HAND = {"layers": 2, "hidden": 4096, "heads": 32, "sequence": 4096, "vocabulary": 1024,
        "tied": False}
#: LLaMA-2-7B's shape (Touvron et al. 2023: 32 layers, hidden 4096, 32 heads, 4096 tokens,
#: vocabulary 32000), untied.
L7 = {"layers": 32, "hidden": 4096, "heads": 32, "sequence": 4096, "vocabulary": 32000,
      "tied": False}


def _profiles(tmp_path, shape, name="M", gpus=None):
    (tmp_path / "models").mkdir(parents=True, exist_ok=True)
    (tmp_path / "models" / "m.json").write_text(json.dumps(
        {"model": name, "bytes_per_value": 2, "optimizer_bytes_per_param": 12, "shape": shape}))
    if gpus is not None:
        (tmp_path / "gpus.json").write_text(json.dumps(gpus))
    return load_profiles(tmp_path)


def _launch(shape, extra="", precision="--bf16", tp=4, per=4, pp=1, mbs=1, gbs=1):
    return (f"torchrun --nnodes 1 --nproc-per-node {per} pretrain_gpt.py "
            f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} "
            f"--num-layers {shape['layers']} --hidden-size {shape['hidden']} "
            f"--num-attention-heads {shape['heads']} --seq-length {shape['sequence']} "
            f"--micro-batch-size {mbs} --global-batch-size {gbs} {precision} "
            f"--untie-embeddings-and-output-weights {extra}")


def _built(prof, text, gpu, model="M"):
    plan = megatron_plan_from_text(text, "launch.sh", prof.model(model), gpu, ZONE)
    return build_plan(plan, prof, steps=1)


def _per_layer(build, shape):
    """A transformer layer's activation memory per sample, out of a one-stage plan's
    activations: the embedding keeps ``s h`` values and the head ``s V / t``, 2 bytes each."""
    g = build.memory[0]
    s, h, V = shape["sequence"], shape["hidden"], shape["vocabulary"]
    return (g.activations - 2 * s * h - 2 * s * V / g.tp) / shape["layers"]


def test_hand_example_through_a_launch_line_on_a100_and_v100(tmp_path):
    """A100-80 (8.0), bf16: flash, 268,566,528 bytes a layer (before: eq. 2's 939,524,096);
    V100-16 (7.0), fp16: eq. 2 as before, and the output names each path and why; DeepSpeed
    on the same shape keeps eq. 2 on the A100 (its model's own attention)."""
    prof = _profiles(tmp_path, HAND)
    a100 = _built(prof, _launch(HAND), "A100-80")
    assert _per_layer(a100, HAND) == FLASH
    assert any("attention on A100-80 at TP 4: flash" in n and "compute capability 8.0" in n
               for n in a100.estimates)
    v100 = _built(prof, _launch(HAND, precision="--fp16"), "V100-16")
    assert _per_layer(v100, HAND) == STORED
    assert any("attention on V100-16 at TP 4: stored" in n and "compute capability 7.0 < 8.0"
               in n for n in v100.estimates)
    # fp32 on the A100: Transformer Engine's unfused attention, eq. 2 (in 4-byte values)
    fp32 = _built(prof, _launch(HAND, precision=""), "A100-80")
    assert any("attention on A100-80 at TP 4: stored, fp32" in n for n in fp32.estimates)
    # other frameworks run their model's own attention: eq. 2, no attention note
    rep = ReplicaSpec("A100-80", 4, 4, ZONE, host="n0")
    ds = build_plan(Plan((StageSpec(tuple(range(4)), (rep,)),), 1, 1, model="M",
                         framework=FrameworkSpec("deepspeed", precision="bf16")), prof, steps=1)
    assert _per_layer(ds, HAND) == STORED
    assert not any(n.startswith("attention on") for n in ds.estimates)


@pytest.mark.parametrize("flag", ["--recompute-activations", "--recompute-granularity selective",
                                  "--recompute-granularity selective "
                                  "--recompute-modules core_attn",
                                  "--recompute-modules=core_attn --recompute-activations"])
def test_selective_recomputation_keeps_nothing_of_the_core_attention(tmp_path, flag):
    """268,435,456 bytes a layer on the A100 and the V100 alike (before: refused), and the
    backward pass of a transformer layer reruns the core attention's forward: 4 b s^2 h / t
    FLOPs more, at the A100's 312 TFLOPS tensor peak (the layer is compute bound there)."""
    prof = _profiles(tmp_path, HAND)
    for gpu, precision in (("A100-80", "--bf16"), ("V100-16", "--fp16")):
        b = _built(prof, _launch(HAND, flag, precision), gpu)
        assert _per_layer(b, HAND) == SELECTIVE
        assert any(f"attention on {gpu} at TP 4: selective" in n for n in b.estimates)
    plain = _built(prof, _launch(HAND), "A100-80")
    sel = _built(prof, _launch(HAND, flag), "A100-80")
    s, h = HAND["sequence"], HAND["hidden"]
    extra = 4.0 * 1 * s * s * h / 4 / prof.gpus["A100-80"].peak_flops
    # the stage's backward pass per micro-batch; the forward is as before
    assert sel.stage_times[0][0][1] - plain.stage_times[0][0][1] == \
        pytest.approx(HAND["layers"] * extra, rel=1e-9)
    assert sel.stage_times[0][0][0] == plain.stage_times[0][0][0]


def test_planner_accepts_a_plan_eq2_refused(tmp_path):
    """LLaMA-2-7B's shape on one node of 8 A100-80s in bf16, one stage of 4 TP-2 replicas at
    micro-batch 1: eq. 2 keeps 16 x 34 layers' s x s matrices and needs more than 80 GB (DeepSpeed
    on the same plan is still refused; Megatron-LM was too, before); Megatron-LM's flash path
    fits, and the search's memory sums are plan_memory's."""
    prof = _profiles(tmp_path, L7, "L7")
    rep = ReplicaSpec("A100-80", 2, 8, ZONE, host="n0")
    layers = tuple(range(34))
    meg = FrameworkSpec("megatron", precision="bf16")
    plan = Plan((StageSpec(layers, (rep,) * 4),), 1, 16, model="L7", framework=meg)
    with pytest.raises(ConfigError, match="a plan that fits in GPU memory"):
        build_plan(Plan((StageSpec(layers, (rep,) * 4),), 1, 16, model="L7",
                        framework=FrameworkSpec("deepspeed", precision="bf16")), prof, steps=1)
    b = build_plan(plan, prof, steps=1)
    g = b.memory[0]
    assert g.total < g.capacity
    pm = ProfilePlanModel(prof, prof.model("L7").trained_at(2), framework=meg)
    terms = pm.memory_terms(g.gpu, g.tp, 1, 0, 1, plan.microbatches)
    total = max(f + sum(per[i] for i in layers) for f, per in terms) \
        + prof.gpus[g.gpu].overhead(g.tp)
    assert total == pytest.approx(g.total, rel=1e-12)


def test_planner_json_names_the_chosen_flash_plan(tmp_path, capsys):
    """The search's best plan is the one eq. 2 refused (1 stage x 4 replicas at TP 2, 1.378 s
    predicted, where eq. 2 left 2 replicas at TP 4, 1.427 s), and its estimates name the
    attention path."""
    _profiles(tmp_path, L7, "L7")
    code = main(["plan", "--model", "L7", "--profiles", str(tmp_path), "--nodes",
                 f"A100-80:8x1@{ZONE}", "--framework", "megatron:precision=bf16",
                 "--global-batch-size", "16", "--simulate", "0", "--quiet", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    best = json.loads(out)["plans"][0]
    reps = best["plan"]["stages"][0]["replicas"]
    assert (best["stages"], best["dp"], best["microbatch_size"]) == (1, 4, 1)
    assert [(r["tp"], r["count"]) for r in reps] == [(2, 4)]
    assert best["predicted_iteration_time"] == pytest.approx(1.378, abs=5e-4)
    assert any("attention on A100-80 at TP 2: flash" in n for n in best["estimates"])


def test_no_compute_capability_is_the_stored_path_with_a_note(tmp_path):
    """A user's catalogue entry without compute_capability: eq. 2, and the output says why."""
    doc = json.loads((DATA_DIR / "gpus.json").read_text())
    for g in doc["gpus"]:
        if g["name"] == "A100-80":
            del g["compute_capability"]
    prof = _profiles(tmp_path, HAND, gpus=doc)
    b = _built(prof, _launch(HAND), "A100-80")
    assert _per_layer(b, HAND) == STORED
    assert any("A100-80 has no compute_capability in the GPU catalogue" in n
               for n in b.estimates)


@pytest.mark.parametrize("value, message", [
    (-8.0, "'compute_capability' must be > 0"),
    (0, "'compute_capability' must be > 0"),
    ("8.0", "'gpus' must be a plain number of CUDA compute capability"),
    # (audit 8) taken before: 75 (sm_75 written whole) put a T4 on flash attention
    (75, "'compute_capability' must be major.minor with one digit after the point, below 20 "
         "(7.5 for a T4, not 75 as in sm_75): 75"),
    (8.05, "'compute_capability' must be major.minor with one digit after the point"),
    (1e300, "'compute_capability' must be major.minor with one digit after the point"),
])
def test_compute_capability_is_validated(value, message):
    doc = {"gpus": [{"name": "X", "memory_bytes": 1e9, "overhead_bytes": 0,
                     "compute_capability": value}]}
    with pytest.raises(ConfigError, match=re.escape(message)):
        gpus_from_data(doc)


@pytest.mark.parametrize("value", [7.0, 8.6, 12.1])
def test_compute_capability_of_the_table_is_taken(value):
    doc = {"gpus": [{"name": "X", "memory_bytes": 1e9, "overhead_bytes": 0,
                     "compute_capability": value}]}
    assert gpus_from_data(doc)["X"].compute_capability == value


@pytest.mark.parametrize("extra, gpu, precision, message", [
    ("--attention-backend flash", "V100-16", "--fp16",
     "'attention_backend' must be auto or unfused on V100-16 (compute capability 7.0"),
    ("--attention-backend fused", "T4", "--fp16",
     "'attention_backend' must be auto or unfused on T4 (compute capability 7.5"),
    ("--attention-backend flash", "A100-80", "",
     "'attention_backend' must be auto or unfused in fp32"),
    ("--attention-backend local", "A100-80", "--bf16",
     "'plan' must be --attention-backend auto, flash, fused or unfused (local runs only with "
     "--spec local"),
    ("--transformer-impl inference_optimized", "A100-80", "--bf16",
     "'plan' must be --transformer-impl transformer_engine or local"),
    ("--recompute-granularity full", "A100-80", "--bf16",
     "'plan' must be --recompute-granularity selective (full recomputation"),
    ("--recompute-activations --recompute-method uniform", "A100-80", "--bf16",
     "selective recomputation takes none: arguments.py:1425-1428"),
    ("--recompute-activations --recompute-modules mlp", "A100-80", "--bf16",
     "'plan' must be --recompute-modules core_attn, the default"),
    # a list (nargs "+"): the module not modelled is named, not read as a positional argument
    ("--recompute-activations --recompute-modules core_attn layernorm", "A100-80", "--bf16",
     "'plan' must be --recompute-modules core_attn, the default (transformer_config.py:1940-1941; "
     "other modules' recomputation is not modelled) at launch.sh: 'layernorm'"),
    ("--spec local", "A100-80", "--bf16", "--spec sets a layer spec of its own"),
    # core_v0.9.0 to core_v0.17.0: the legacy GPT model, whose CoreAttention keeps eq. 2's
    # s x s matrices (flash only with --use-flash-attn); read as Megatron Core's TE flash
    # attention on the A100 it was counted 268,566,528 bytes a layer, not 939,524,096
    ("--use-legacy-models", "A100-80", "--bf16", "--use-legacy-models sets the legacy"),
])
def test_launch_refusals(tmp_path, extra, gpu, precision, message):
    prof = _profiles(tmp_path, HAND)
    with pytest.raises(ConfigError, match=re.escape(message)):
        _built(prof, _launch(HAND, extra, precision), gpu)


def test_selective_recomputation_refused_on_measured_times():
    """The shipped OPT-350 profile times whole layers: the core attention's forward, which the
    backward pass reruns, has no time of its own there."""
    prof = load_profiles(DATA_DIR)
    text = _launch({"layers": 24, "hidden": 1024, "heads": 16, "sequence": 2048},
                   "--recompute-activations", "--fp16", tp=2, per=4, pp=2, mbs=2, gbs=16)
    with pytest.raises(ConfigError, match=re.escape(
            "'recompute_granularity' must be unset with the profile of OPT-350 on RTX-3090")):
        _built(prof, text, "RTX-3090", "OPT-350")


def test_planner_refuses_selective_recomputation_on_measured_times(capsys):
    """Once, before the search (before: every plan refused, read as "no plan fits")."""
    code = main(["plan", "--model", "OPT-350", "--nodes", f"RTX-3090:4x2@{ZONE}",
                 "--framework", "megatron:precision=fp16,recompute_granularity=selective",
                 "--global-batch-size", "16", "--simulate", "0", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "'recompute_granularity' must be unset with the profile of OPT-350" in err


def test_attention_backend_option_from_core_0_11():
    """Core 0.9.0 has no attention_backend (refused, naming the release that added it); 0.11.0
    and 0.20.0 take it."""
    with pytest.raises(ConfigError, match=re.escape("added in core 0.11.0")):
        FrameworkSpec("megatron", "0.9.0", "bf16", (("attention_backend", "flash"),))
    for v in ("0.11.0", "0.20.0"):
        FrameworkSpec("megatron", v, "bf16", (("attention_backend", "flash"),))


MEG_MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"


@pytest.mark.slow  # re-reads 22 tags of the framework's repository
@pytest.mark.skipif(not __import__("os").path.isdir(MEG_MIRROR),
                    reason="needs an NVIDIA/Megatron-LM clone with its core_v tags")
def test_attention_facts_cite_the_line_they_were_read_at():
    """Every line the attention facts cite holds its code at its tag (``_MEG_ATTN_ANCHORS``, as
    ``_MEG_ANCHORS`` are checked), d98e8a64dd's too (0.20.0's table)."""
    import importlib.util
    from pathlib import Path

    from sim.profiles.frameworks import _MEG_ATTN_020, _MEG_ATTN_ANCHORS, _MEG_ATTN_LINES

    spec = importlib.util.spec_from_file_location(
        "framework_lines", Path(__file__).resolve().parents[1] / "tools" / "framework_lines.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for version, lines in _MEG_ATTN_LINES.items():
        assert tool.lines("megatron", MEG_MIRROR, version, _MEG_ATTN_ANCHORS) == lines, version
    at = {}
    for name, path, code, where in _MEG_ATTN_ANCHORS:
        text = subprocess.run(["git", "-C", MEG_MIRROR, "show", f"d98e8a64dd:megatron/{path}"],
                              capture_output=True, text=True).stdout.splitlines()
        start = at[where] if where else 0
        found = [i + 1 for i, t in enumerate(text) if code in t and i + 1 > start]
        at[name] = found[0] if found and (start or not where) else 0
    assert tuple(at.values()) == _MEG_ATTN_020
