"""A launch line on a mixed cluster (user trial 10: 3 p3.8xlarge with 4 V100 each and one
g4dn.12xlarge with 4 T4, the Megatron-LM v1.1.5 example on DeepSpeed 0.3.13): ``--gpu`` named
one GPU type for every rank, so such a launch could not be read; ``--gpu V100,g4dn-0=T4`` gives
each host of the hostfile its type."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError

SHAPE = {"model": "gpt2", "shape": {"layers": 4, "hidden": 256, "heads": 8, "sequence": 128,
                                    "vocabulary": 1000, "tied": True}}
GPUS = {"gpus": [
    {"name": "V100", "memory_bytes": "16GiB", "peak_flops": 125e12, "memory_bandwidth": "900GB/s",
     "intra_node_bandwidth": "300GB/s", "overhead_bytes": "3GB"},
    {"name": "T4", "memory_bytes": "16GB", "peak_flops": 65e12, "memory_bandwidth": "320GB/s",
     "intra_node_bandwidth": "15.75GB/s", "overhead_bytes": "3GB"}]}
LINKS = [{"src": {"gpu": a, "zone": "z"}, "dst": {"gpu": b, "zone": "z"}, "bandwidth": "10Gbit/s",
          "latency": "25us"} for a, b in (("V100", "V100"), ("V100", "T4"), ("T4", "T4"))]
LAUNCH = ("deepspeed pretrain_gpt2.py --model-parallel-size 1 --pipe-parallel-size 4 "
          "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 "
          "--batch-size 2 --fp16 --deepspeed --deepspeed_config ds_config.json\n")
HAND = {"model": "gpt2", "microbatch_size": 2, "global_batch_size": 32,
        "framework": {"name": "deepspeed", "version": "0.3.13", "precision": "fp16",
                      "seq_length": 128},
        "stages": [{"layers": layers, "replicas": [
            {"gpu": gpu, "tp": 1, "gpus_per_node": 4, "zone": "z", "host": host, "count": 4}]}
            for layers, gpu, host in (([0, 1], "V100", "p3-a"), ([2], "V100", "p3-b"),
                                      ([3], "V100", "p3-c"), ([4, 5], "T4", "g4dn-0"))]}


@pytest.fixture
def user(tmp_path):
    (tmp_path / "prof" / "models").mkdir(parents=True)
    (tmp_path / "prof" / "gpus.json").write_text(json.dumps(GPUS))
    (tmp_path / "prof" / "models" / "gpt2.json").write_text(json.dumps(SHAPE))
    (tmp_path / "fleet.json").write_text(json.dumps({"nodes": [
        {"gpu": "V100", "gpus_per_node": 4, "zone": "z", "count": 3},
        {"gpu": "T4", "gpus_per_node": 4, "zone": "z", "count": 1}], "links": LINKS}))
    (tmp_path / "ds_config.json").write_text(json.dumps(
        {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": True}}))
    (tmp_path / "hostfile").write_text("p3-a slots=4\np3-b slots=4\np3-c slots=4\ng4dn-0 slots=4\n")
    (tmp_path / "launch.sh").write_text(LAUNCH)
    (tmp_path / "hand.json").write_text(json.dumps(HAND))
    return tmp_path


def _run(user, capsys, *plan):
    argv = ["train", *plan, "--model", "gpt2", "--profiles", str(user / "prof"), "--fleet",
            str(user / "fleet.json"), "--steps", "2", "--replications", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    return out["step_time_mean"], out["peak_memory"], [m["gpu"] for m in out["memory"]]


def test_a_mixed_launch_is_the_plan_written_by_hand(user, capsys):
    got = _run(user, capsys, "--plan", str(user / "launch.sh"), "--gpu", "V100,g4dn-0=T4")
    assert got == _run(user, capsys, "--plan", str(user / "hand.json"))
    assert got[2] == ["V100"] * 12 + ["T4"] * 4


@pytest.mark.parametrize("gpu, rule", [
    ("V100,g4dn-1=T4", "HOST=NAME entries naming hosts of the launch"),  # a typo
    ("p3-a=V100,g4dn-0=T4", "a GPU type for every host of the launch"),   # p3-b has none
    ("V100,T4", "one default at most"),
    ("V100,g4dn-0=A100", "a GPU of the catalogue"),
])
def test_what_it_refuses(user, capsys, gpu, rule):
    assert main(["train", "--plan", str(user / "launch.sh"), "--gpu", gpu, "--model", "gpt2",
                 "--profiles", str(user / "prof"), "--fleet", str(user / "fleet.json")]) == 2
    assert rule in capsys.readouterr().err


def test_one_name_is_every_rank():
    from sim.profiles.megatron_args import parse_gpus

    assert parse_gpus("V100") == "V100"
    assert parse_gpus("V100, g4dn-0=T4") == {"": "V100", "g4dn-0": "T4"}
    with pytest.raises(ConfigError):
        parse_gpus("g4dn-0=")
