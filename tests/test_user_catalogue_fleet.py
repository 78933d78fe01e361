"""A user's own GPU catalogue, model shape and fleet file (user trial of 2026-12-07)."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.profiles import gpus_from_data

GPU = {"name": "big80", "memory_bytes": "80GB", "price_per_hour": 2.1, "peak_flops": 3.12e14,
       "memory_bandwidth": "2TB/s", "intra_node_bandwidth": "300GB/s", "overhead_bytes": "3GB"}
SHAPE = {"model": "tiny", "shape": {"layers": 4, "hidden": 256, "heads": 8, "sequence": 128,
                                    "vocabulary": 1000, "tied": True}}
LINK = {"src": {"gpu": "big80", "zone": "dc1"}, "dst": {"gpu": "big80", "zone": "dc1"},
        "bandwidth": "100Gbit/s", "latency": "5us"}
LAUNCH = ("torchrun --nproc_per_node 4 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size 2 "
          "--pipeline-model-parallel-size 2 --num-layers 4 --hidden-size 256 "
          "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 "
          "--micro-batch-size 1 --global-batch-size 8 --bf16\n")


@pytest.fixture
def user(tmp_path):
    """A profiles folder of one GPU type and a model given by its shape (no network file), and
    a fleet file with its own links."""
    (tmp_path / "prof" / "models").mkdir(parents=True)
    (tmp_path / "prof" / "gpus.json").write_text(json.dumps({"gpus": [GPU]}))
    (tmp_path / "prof" / "models" / "tiny.json").write_text(json.dumps(SHAPE))
    (tmp_path / "fleet.json").write_text(json.dumps({"nodes": [
        {"gpu": "big80", "gpus_per_node": 4, "zone": "dc1", "count": 2}], "links": [LINK]}))
    return tmp_path


@pytest.mark.parametrize("key, value, rule", [
    ("price", 2.1, "GPU keys name, memory_bytes, price_per_hour"),  # a typo: left it unpriced
    ("peak_tflops", 312, "GPU keys name, memory_bytes, price_per_hour"),
    ("price_per_hour", "$2.1/h", "a plain number of dollars per GPU-hour (no unit) at "
     "gpus.gpus[0].price_per_hour"),  # said "'price_per_hour' must be >= 0", no place
    ("peak_flops", "312 TFLOPS", "a plain number of FLOP/s (no unit) at gpus.gpus[0].peak_flops"),
    # a bool: said "'price_per_hour' must be >= 0: True" (True is >= 0), no place
    ("price_per_hour", True, "a plain number of dollars per GPU-hour (no unit) at "
     "gpus.gpus[0].price_per_hour"),
    ("peak_flops_fp32", False, "a plain number of FLOP/s (no unit) at gpus.gpus[0].peak_flops_fp32"),
])
def test_a_catalogue_entry_refuses_what_it_would_not_use(key, value, rule):
    with pytest.raises(ConfigError) as exc:
        gpus_from_data({"gpus": [{**GPU, key: value}]})
    assert exc.value.name == "gpus" and rule in exc.value.rule


@pytest.mark.parametrize("currency", ["EUR", "usd", "$", 1])
def test_a_price_in_another_currency_is_refused_in_one_line(user, capsys, currency):
    """Every price dtsim reads is a plain number of US dollars, printed as $ (plan's samples/$,
    its JSON's $/h and sample/$): an entry saying its prices are euros was refused as an
    unknown key, a list of keys that never said why; it is now refused naming USD, before
    any work. "USD" said is accepted, the same catalogue as without it (no number moves)."""
    (user / "prof" / "gpus.json").write_text(json.dumps({"gpus": [{**GPU, "currency": currency}]}))
    argv = ["plan", "--model", "tiny", "--profiles", str(user / "prof"), "--fleet",
            str(user / "fleet.json"), "--global-batch-size", "8", "--simulate", "0",
            "--quiet", "--framework", "deepspeed:precision=bf16", "--objective", "cost", "--json"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("dtsim plan: error: 'gpus' must be USD at gpus.gpus[0].currency (price_per_hour "
                   "is a plain number of US dollars per GPU-hour, printed as $; dtsim converts "
                   f"no currency): {currency!r}").replace("gpus.gpus", f"{user}/prof/gpus.json.gpus")
    (user / "prof" / "gpus.json").write_text(json.dumps({"gpus": [{**GPU, "currency": "USD"}]}))
    assert main(argv) == 0
    said = json.loads(capsys.readouterr().out)
    (user / "prof" / "gpus.json").write_text(json.dumps({"gpus": [GPU]}))
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    price = said["plans"][0]["price_per_hour"]  # 2.1 $ per GPU-hour, not converted
    assert price == pytest.approx(2.1 * round(price / 2.1), rel=1e-12) and price > 0
    assert said["units"]["keys"]["plans[].samples_per_dollar"] == "sample/$"
    said["search"].pop("seconds"), plain["search"].pop("seconds")
    assert said == plain


def test_an_entry_without_overhead_bytes_is_refused_in_one_line(user, capsys):
    """A user's GPU type without ``overhead_bytes`` was taken as 0 framework memory (no CUDA
    context, NCCL buffers or allocator reserve), so it held plans the shipped types' 2-5 GB
    would not. It is now asked for in one line; 0 written is 0."""
    bare = {k: v for k, v in GPU.items() if k != "overhead_bytes"}
    (user / "prof" / "gpus.json").write_text(json.dumps({"gpus": [bare]}))
    argv = ["plan", "--model", "tiny", "--profiles", str(user / "prof"), "--fleet",
            str(user / "fleet.json"), "--global-batch-size", "8", "--simulate", "0",
            "--quiet", "--framework", "deepspeed:precision=bf16"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        "dtsim plan: error: 'gpus' must be an overhead_bytes at ") and err.endswith("'big80'")
    (user / "prof" / "gpus.json").write_text(json.dumps({"gpus": [{**bare, "overhead_bytes": 0}]}))
    assert main(argv) == 0
    assert gpus_from_data({"gpus": [GPU]})["big80"].overhead(2) == 3e9


def test_a_shape_in_fp32_names_the_peak_it_needs(user, capsys):
    """The default framework runs 4-byte values: the catalogue's ``peak_flops`` (fp16/bf16) is
    not the peak it estimates at; the refusal said "peak FLOP/s" as if none were given."""
    argv = ["plan", "--model", "tiny", "--profiles", str(user / "prof"), "--fleet",
            str(user / "fleet.json"), "--global-batch-size", "8", "--simulate", "0", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "peak_flops_tf32 or peak_flops_fp32" in err and "precision=bf16" in err
    assert main([*argv, "--framework", "deepspeed:precision=bf16"]) == 0


def test_a_launch_line_takes_its_zone_from_the_fleet_links(user, capsys):
    """The zone of ``--gpu`` was looked up in the profiles' network before ``--fleet``'s links
    were added: a folder with no network was refused ('the network has no link for it')."""
    (user / "launch.sh").write_text(LAUNCH)
    argv = ["train", "--plan", str(user / "launch.sh"), "--gpu", "big80", "--model", "tiny",
            "--profiles", str(user / "prof"), "--fleet", str(user / "fleet.json"), "--steps", "1",
            "--replications", "1", "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    auto = json.loads(capsys.readouterr().out)
    assert main([*argv, "--zone", "dc1"]) == 0
    assert auto["step_time_mean"] == json.loads(capsys.readouterr().out)["step_time_mean"] > 0


def test_a_planned_plan_with_hosts_says_how_to_run_a_strategy(user, capsys):
    """dtsim plan --out names every replica's host, several replicas a host, which a
    step-level strategy refused (saying to delete them); it now runs them, each host failing
    whole, and each replica a node of its own without them."""
    out = user / "best.json"
    assert main(["plan", "--model", "tiny", "--profiles", str(user / "prof"), "--fleet",
                 str(user / "fleet.json"), "--global-batch-size", "8", "--framework",
                 "deepspeed:precision=bf16", "--simulate", "1", "--steps", "1", "--quiet",
                 "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert all("host" in r for st in plan["stages"] for r in st["replicas"])
    capsys.readouterr()
    argv = ["train", "--plan", str(out), "--profiles", str(user / "prof"), "--fleet",
            str(user / "fleet.json"), "--steps", "2", "--replications", "1",
            "--strategy", "checkpoint-restart"]
    assert main(argv) == 0
    assert "failures per host: " in capsys.readouterr().out
    for st in plan["stages"]:
        for r in st["replicas"]:
            del r["host"]
    out.write_text(json.dumps(plan))
    assert main(argv) == 0


def test_a_shape_plan_in_fp32_names_both_peaks_it_takes(user, capsys):
    """A Sailor plan runs the artifact's DeepSpeed in fp32, which estimates at TF32's peak where
    the GPU has one, else fp32's: the refusal named peak_flops_fp32 alone."""
    sailor = {"zone": "dc1", "mbs": 1, "gbs": 4, "pipeline_list": [{
        "num_stages": 1, "layers_per_stage": [[0, 1, 2, 3, 4, 5]],
        "tmp_per_stage": [[[[["big80", 1, "dc1"]], 1]]], "dp": [1]}]}
    (user / "sailor.json").write_text(json.dumps(sailor))
    argv = ["train", "--plan", str(user / "sailor.json"), "--model", "tiny", "--profiles",
            str(user / "prof"), "--fleet", str(user / "fleet.json"), "--steps", "1",
            "--replications", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "peak_flops_tf32 or peak_flops_fp32" in err and "precision=bf16" in err
    assert main([*argv, "--framework", "sailor-deepspeed:precision=bf16"]) == 0


def test_a_script_times_a_plan_on_the_fleet_as_the_cli_does(user, capsys):
    """sim.profiles.with_fleet is the library's --fleet (a script had to import it from
    sim.commands): a plan with a strategy built in a script gives the CLI's numbers."""
    from sim import engines, replicate
    from sim.profiles import load_profiles, read_plan, with_fleet
    from sim.profiles.build import build_plan
    from sim.profiles.formations import PlanStepTimes
    from sim.training.strategies import make_strategy

    plan = {"model": "tiny", "microbatch_size": 1, "global_batch_size": 8, "framework":
            {"name": "deepspeed", "precision": "bf16"}, "stages": [
                {"first_layer": 0, "last_layer": 2, "replicas": [
                    {"gpu": "big80", "tp": 1, "gpus_per_node": 4, "zone": "dc1", "count": 2}]},
                {"first_layer": 3, "last_layer": 5, "replicas": [
                    {"gpu": "big80", "tp": 1, "gpus_per_node": 4, "zone": "dc1", "count": 2}]}]}
    (user / "plan.json").write_text(json.dumps(plan))
    (user / "trace.csv").write_text("worker,start,end\ns1r0,0.5,2\n")
    assert main(["train", "--plan", str(user / "plan.json"), "--profiles", str(user / "prof"),
                 "--fleet", str(user / "fleet.json"), "--steps", "20", "--replications", "1",
                 "--failure-trace", str(user / "trace.csv"), "--strategy", "checkpoint-restart",
                 "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    profiles = with_fleet(load_profiles(str(user / "prof"), models=("tiny",)), user / "fleet.json")
    p = read_plan(user / "plan.json")
    cfg = build_plan(p, profiles, model="tiny", network=True, steps=20,
                     failure_trace=str(user / "trace.csv"),
                     strategy=make_strategy("checkpoint-restart"),
                     step_times=PlanStepTimes(p, profiles, "tiny", (("network", True),))).config
    [rec] = replicate(engines.select("training", cfg).engine.run, cfg, replications=1, seed=0)
    assert rec["training_time"] == cli["wall_time_mean"] > 0
    assert rec["samples_per_dollar"] == cli["samples_per_dollar"] > 0
