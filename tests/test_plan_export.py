"""--export-plan: a plan read from a Megatron-LM launch line, a Sailor plan_config or found by
``dtsim plan``, written as dtsim's own JSON plan, which ``dtsim train --plan`` runs to the same
JSON output, bit for bit (the launch line's --gpu and --zone aside: the file names its GPUs)."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.profiles import load_profiles, plan_from_data, plan_text, read_plan, read_runs
from sim.profiles.formats import DATA_DIR
from sim.profiles.megatron_args import megatron_plan_from_text

ZONE = "us-central1-a"
#: OPT-350 on 4 nodes of 4 RTX-3090: TP 2, PP 2, DP 4 (two replicas a node), fp16, Megatron-LM's
#: distributed optimizer and overlapped gradient reduction; the learning rate is ignored.
LAUNCH = """#!/bin/bash
torchrun --nnodes 4 --nproc-per-node 4 pretrain_gpt.py \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\
    --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \\
    --untie-embeddings-and-output-weights --micro-batch-size 2 --global-batch-size 64 \\
    --fp16 --use-distributed-optimizer --overlap-grad-reduce --lr 1e-4
"""
RUN = ("--steps", "1", "--replications", "2", "--seed", "3", "--json")
#: The Sailor plan_config of a real run (the mixed cluster's two-stage RTX-3090 | Titan-RTX
#: pipeline), as shipped (the same file as ../shared/real-runs/runs/mit-N2_D1.json).
SAILOR = DATA_DIR / "runs" / "mit-N2_D1.json"


def _cli(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def launch(tmp_path):
    p = tmp_path / "launch.sh"
    p.write_text(LAUNCH)
    return p


def test_plan_text_reads_back_as_the_plan():
    """Every field of a plan is written: the 17 shipped Sailor runs and a Megatron-LM launch
    (hosts, framework options) read back equal."""
    plans = [r.plan for r in read_runs()]
    opt = load_profiles(models=("OPT-350",)).model("OPT-350")
    plans.append(megatron_plan_from_text(LAUNCH, "launch.sh", opt, "RTX-3090", ZONE))
    assert len(plans) == 18
    for plan in plans:
        assert plan_from_data(json.loads(plan_text(plan))) == plan
    meg = json.loads(plan_text(plans[-1]))
    assert meg["framework"] == {"name": "megatron", "version": "0.20.0", "precision": "fp16",
                                "overlap_grad_reduce": True, "use_distributed_optimizer": True}
    assert [(s["first_layer"], s["last_layer"]) for s in meg["stages"]] == [(0, 12), (13, 25)]
    assert [[(r["host"], r["tp"], r["gpus_per_node"], r["count"]) for r in s["replicas"]]
            for s in meg["stages"]] == [[("n0", 2, 4, 2), ("n1", 2, 4, 2)],
                                         [("n2", 2, 4, 2), ("n3", 2, 4, 2)]]


def test_megatron_launch_round_trip(tmp_path, launch, capsys):
    """TP 2 x PP 2 x DP 4 with the distributed optimizer: the launch line's run, the same with
    --export-plan, and the exported plan's run (with and without --model) print the same JSON;
    exporting the exported plan writes the same bytes."""
    out = tmp_path / "plan.json"
    code, base, err = _cli(["train", "--plan", launch, "--model", "OPT-350", "--gpu", "RTX-3090",
                            *RUN], capsys)
    assert code == 0, err
    code, a, err = _cli(["train", "--plan", launch, "--model", "OPT-350", "--gpu", "RTX-3090",
                         *RUN, "--export-plan", out], capsys)
    assert code == 0, err
    assert a == base and '"step_time_mean"' in a
    assert err.strip() == f"plan written to {out} (dtsim train --plan {out} with this run's " \
        "other options, less --gpu and --zone, runs the same plan)"
    doc = json.loads(out.read_text())
    assert doc["model"] == "OPT-350" and doc["global_batch_size"] == 64
    assert doc["framework"]["use_distributed_optimizer"] is True
    for model in (("--model", "OPT-350"), ()):
        code, b, err = _cli(["train", "--plan", out, *model, *RUN], capsys)
        assert code == 0, err
        assert b == base
    again = tmp_path / "again.json"
    code, b, err = _cli(["train", "--plan", out, *RUN, "--export-plan", again], capsys)
    assert code == 0, err
    assert b == base and again.read_bytes() == out.read_bytes()


def test_deepspeed_launch_round_trip(tmp_path, capsys, tied_profiles_folder):
    """Megatron-LM v1.1.5 on DeepSpeed 0.3.13 (a deepspeed launch, its ds_config and hostfile):
    the exported plan holds the release and its options (seq_length, fp32_allreduce) and the
    hostfile's hosts, and runs to the same JSON."""
    (tmp_path / "hostfile").write_text("worker-0 slots=4\nworker-1 slots=4\n")
    (tmp_path / "ds_config.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
        "train_batch_size": 16, "fp16": {"enabled": True}, "fp32_allreduce": True}))
    launch = tmp_path / "ds.sh"
    launch.write_text("deepspeed --num_nodes 2 --num_gpus 4 pretrain_gpt2.py --model-parallel-size "
                      "2 --pipe-parallel-size 2 --num-layers 24 --hidden-size 1024 "
                      "--num-attention-heads 16 --seq-length 2048 --batch-size 2 --gas 4 --fp16 "
                      "--deepspeed --deepspeed_config ds_config.json\n")
    out = tmp_path / "ds.json"
    common = [*RUN, "--profiles", tied_profiles_folder]
    code, a, err = _cli(["train", "--plan", launch, "--gpu", "RTX-3090", "--model", "OPT-350",
                         *common, "--export-plan", out], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["framework"] == {"name": "deepspeed", "version": "0.3.13", "precision": "fp16",
                                "fp32_allreduce": True, "seq_length": 2048}
    assert [[r["host"] for r in s["replicas"]] for s in doc["stages"]] == [["worker-0"],
                                                                          ["worker-1"]]
    code, b, err = _cli(["train", "--plan", out, *common], capsys)
    assert code == 0, err
    assert a == b and '"step_time_mean"' in a


def test_sailor_plan_config_round_trip(tmp_path, capsys):
    """A real run's plan_config: the exported plan names the model and Sailor's framework and
    runs to the same JSON."""
    out = tmp_path / "sailor.json"
    code, a, err = _cli(["train", "--plan", SAILOR, "--model", "OPT-350", *RUN,
                         "--export-plan", out], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["model"] == "OPT-350"
    assert doc["framework"] == {"name": "sailor-deepspeed", "version": "0.16.5"}
    assert [(s["first_layer"], s["last_layer"], s["replicas"][0]["gpu"]) for s in doc["stages"]] \
        == [(0, 11, "RTX-3090"), (12, 25, "Titan-RTX")]
    assert read_plan(out) == read_plan(SAILOR, "OPT-350")
    code, b, err = _cli(["train", "--plan", out, "--model", "OPT-350", *RUN], capsys)
    assert code == 0, err
    assert a == b and '"step_time_mean"' in a


def test_framework_override_is_exported(tmp_path, launch, capsys):
    """--framework's keys over the plan's are in the file: it runs the same with or without
    the same --framework again; a plan without a framework is written as DeepSpeed's."""
    fw = ("--framework", "megatron:overlap_grad_reduce=false")
    out = tmp_path / "fw.json"
    code, a, err = _cli(["train", "--plan", launch, "--model", "OPT-350", "--gpu", "RTX-3090",
                         *fw, *RUN, "--export-plan", out], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["framework"]["overlap_grad_reduce"] is False
    for again in (fw, ()):
        code, b, err = _cli(["train", "--plan", out, *again, *RUN], capsys)
        assert code == 0, err
        assert a == b
    bare = tmp_path / "bare.json"
    doc = json.loads(plan_text(read_plan(SAILOR, "OPT-350")))
    del doc["framework"]
    bare.write_text(json.dumps(doc))
    named = tmp_path / "named.json"
    code, a, err = _cli(["train", "--plan", bare, *RUN, "--export-plan", named], capsys)
    assert code == 0, err
    assert json.loads(named.read_text())["framework"] == {"name": "deepspeed"}
    code, b, err = _cli(["train", "--plan", named, *RUN], capsys)
    assert code == 0, err
    assert a == b


def test_dtsim_plan_rank_round_trip(tmp_path, capsys):
    """dtsim plan --export-plan --rank 2 writes plan 2 of --json's plans; dtsim train --plan on
    it exports the same bytes and prints the same JSON as the plan --out wrote for rank 2."""
    search = ["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size",
              "32", "--microbatch-sizes", "1", "--top", "3", "--simulate", "0", "--quiet"]
    exported, out = tmp_path / "p2.json", tmp_path / "o2.json"
    code, text, err = _cli([*search, "--json", "--export-plan", exported, "--rank", "2"], capsys)
    assert code == 0, err
    doc = json.loads(text)
    assert (doc["written"], doc["export_plan"]) == (1, str(exported))
    assert json.loads(exported.read_text()) == doc["plans"][1]["plan"]
    assert doc["plans"][1]["plan"] != doc["plans"][0]["plan"]
    code, text, err = _cli([*search, "--out", out, "--rank", "2"], capsys)
    assert code == 0, err
    assert f"plan 2 written to {out}" in text
    assert out.read_bytes() == exported.read_bytes()
    again = tmp_path / "again.json"
    code, a, err = _cli(["train", "--plan", exported, *RUN, "--export-plan", again], capsys)
    assert code == 0, err
    assert again.read_bytes() == exported.read_bytes()
    code, b, err = _cli(["train", "--plan", out, *RUN], capsys)
    assert code == 0, err
    assert a == b and '"step_time_mean"' in a


def test_an_existing_file_is_kept_unless_overwrite(tmp_path, launch, capsys):
    """An existing FILE is refused in one line, exit 2, before any work, and left as it was;
    --overwrite replaces it."""
    out = tmp_path / "plan.json"
    out.write_text("mine\n")
    argv = ["train", "--plan", launch, "--model", "OPT-350", "--gpu", "RTX-3090", *RUN,
            "--export-plan", out]
    code, text, err = _cli(argv, capsys)
    assert (code, text) == (2, "")
    assert err == (f"dtsim train: error: 'export_plan' must be a file that does not exist yet "
                   f"(--overwrite to replace it): '{out}'\n")
    assert out.read_text() == "mine\n"
    code, text, err = _cli([*argv, "--overwrite"], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["model"] == "OPT-350"


@pytest.mark.parametrize("argv, message", [
    (["train", "--export-plan", "x.json"], "'export_plan' must be given only with --plan"),
    (["train", "--plan", "{launch}", "--model", "OPT-350", "--gpu", "RTX-3090", "--overwrite"],
     "'overwrite' must be given only with --timeline or --export-plan"),
    (["train", "--plan", "{launch}", "--model", "OPT-350", "--gpu", "RTX-3090",
      "--export-plan", "{tmp}"], "'export_plan' must be a writable file"),
    (["train", "--plan", "{launch}", "--model", "OPT-350", "--gpu", "RTX-3090",
      "--export-plan", "t.json", "--timeline", "./t.json"],
     "'export_plan' must be another file than --timeline's"),
    (["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size", "32",
      "--rank", "2"], "'rank' must be given only with --out or --export-plan"),
    (["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size", "32",
      "--top", "3", "--rank", "4", "--export-plan", "x.json"], "'rank' must be an integer"),
    (["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size", "32",
      "--out", "a.json", "--export-plan", "x.json"], "'export_plan' must be given without --out"),
    (["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size", "32",
      "--overwrite"], "'overwrite' must be given only with --out or --export-plan"),
    (["plan", "--model", "OPT-350", "--nodes", "RTX-3090:4x2", "--global-batch-size", "32",
      "--export-plan", "{existing}"], "'export_plan' must be a file that does not exist yet"),
])
def test_refusals_are_one_line_exit_2(tmp_path, launch, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    existing = tmp_path / "existing.json"
    existing.write_text("{}\n")
    argv = [a.format(launch=launch, tmp=tmp_path, existing=existing) for a in argv]
    code, text, err = _cli(argv, capsys)
    assert (code, text) == (2, "")
    assert err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.json", "launch.sh"]
    assert existing.read_text() == "{}\n"


def test_rank_past_the_plans_found(tmp_path, capsys):
    """--rank above the plans the search found (here 1 of --top 5) is refused once it is known,
    before the simulations, and nothing is written."""
    out = tmp_path / "p.json"
    code, text, err = _cli(["plan", "--model", "OPT-350", "--nodes", "RTX-3090:1x1",
                            "--global-batch-size", "4", "--microbatch-sizes", "1", "--tp", "1",
                            "--top", "5", "--rank", "5", "--export-plan", out, "--quiet"], capsys)
    assert (code, text) == (2, "")
    assert "'rank' must be at most the plans found (1): 5" in err and err.count("\n") == 1
    assert not out.exists()


def test_export_to_dev_null_runs(capsys):
    """(review15) --export-plan /dev/null is accepted by the check before the run (writing to
    the null device replaces no file of the user's); its write then opened it with "x" and
    failed, exit 1: 'could not write the plan to /dev/null: File exists'."""
    code, out, err = _cli(["train", "--plan", SAILOR, "--model", "OPT-350", *RUN,
                           "--export-plan", "/dev/null"],
                          capsys)
    assert code == 0, err
    assert json.loads(out)["replications"] == 2
    assert err.strip().startswith("plan written to /dev/null")
