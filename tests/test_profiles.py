"""sim.profiles: the values, dtsim's formats and the Sailor artifact's readers."""

from __future__ import annotations

import json
import math
import re

import pytest

from sim.errors import ConfigError
from sim.network import BandwidthCurve
from sim.profiles import (
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    Link,
    ModelProfile,
    NetworkProfile,
    NodeKind,
    Plan,
    ReplicaSpec,
    StageSpec,
    fleet_from_data,
    fleet_to_data,
    gpus_from_data,
    gpus_to_data,
    load_profiles,
    model_from_data,
    model_to_data,
    network_from_data,
    network_to_data,
    plan_from_data,
    plan_to_data,
    read_plan,
    read_runs,
    sailor,
)


@pytest.fixture(scope="module")
def opt():
    return load_profiles(models=("OPT-350",))


def test_shipped_profiles_load(opt):
    """The shipped folder gives OPT-350's 26 layers, the catalogue and the curves."""
    m = opt.model("OPT-350")
    assert m.layers == 26 and m.bytes_per_value == 4
    assert m.has("GH-96", 8, 4) and m.has("RTX-3090", 2, 2) and not m.has("GH-96", 8, 8)
    t = m.layer_times("GH-96", 8, 4)[1]
    assert (t.forward, t.backward) == (0.003021, 0.006469)  # the artifact's numbers, unchanged
    assert m.layer_sizes(1)[1].params == 12596224
    assert opt.gpus["GH-96"].memory_bytes == 102625181696
    gh = NodeKind("GH-96", 4, "us-central1-a")
    assert opt.network.link(gh, gh, 4).bandwidth.coefficients == (-0.65351182, 11.42553946,
                                                              45.25031399)


def test_optimizer_step_is_spread_over_the_profiled_parameters(opt):
    """The artifact's optimizer column (one step of the profiled model, copied into every
    layer) becomes per-layer shares that add up to the step over the profiled layers."""
    raw = json.loads((sailor_dir() / "profiles.json").read_text())["OPT-350"]["GH-96"]["8"]["4"]
    m = opt.model("OPT-350")
    row = m.layer_times("GH-96", 8, 4)
    # the profiled model: embedding, two transformer layers and OPT's own head (OPTModelPipe's
    # OPTLMHeadPipe, a LayerSpec: profile.sh --num_prof_layers 2, training.py use_last)
    assert math.isclose(row[0].optimizer + row[1].optimizer + row[2].optimizer + row[25].optimizer,
                        raw["0"][2], rel_tol=1e-12)
    sizes = m.layer_sizes(4)
    assert math.isclose(row[5].optimizer / row[1].optimizer, sizes[5].params / sizes[1].params)
    assert [sailor.untied_tail_layers(x) for x in ("LLAMA-3-8", "OPT-350", "GPT-Neo-2.7")] == \
        [2, 1, 1]


def test_the_artifacts_models_are_untied_as_it_builds_them():
    """Of the artifact's pipeline models only GPTModelPipe ties its head to the embedding
    (TiedLayerSpec); OPTModelPipe, GPTNeoModelPipe and LlamaModelPipe build LayerSpecs, so the
    shipped OPT, GPT-Neo and LLaMA profiles are untied (no tied all-reduce) and a plan of two
    stages of OPT-350 has no tied ring (it had one before this was read from the artifact)."""
    from sim.profiles import Plan, ReplicaSpec, StageSpec
    from sim.profiles.build import build_plan

    prof = load_profiles(models=("OPT-350", "GPT-Neo-2.7"))
    assert not any(m.tied_embeddings or m.tied_params for m in prof.models)
    gpu = ReplicaSpec("A100-40", 1, gpus_per_node=4, zone="us-central1-a")
    plan = Plan((StageSpec(tuple(range(13)), (gpu,)), StageSpec(tuple(range(13, 26)), (gpu,))),
                1, 4, model="OPT-350")
    b = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    assert b.tied_allreduce_time == 0.0 and b.tied_allreduce_times == ()
    assert b.config.tied_allreduce_size == 0
    assert [sailor.ties_embeddings(x) for x in ("OPT-350", "OPT-30", "GPT-Neo-2.7", "LLAMA-3-8",
                                                "GPT-1.3")] == [False, False, False, False, True]


def sailor_dir():
    from sim.profiles import DATA_DIR

    return DATA_DIR


def test_lookups_refuse_in_one_line(opt):
    """A GPU type, TP degree or micro-batch size the profile lacks is named."""
    m = opt.model("OPT-350")
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the profile"):
        m.layer_times("H100", 8, 4)
    with pytest.raises(ConfigError, match=r"'tp' must be a TP degree .* \(1, 2, 4\): 8"):
        m.layer_times("GH-96", 8, 8)
    with pytest.raises(ConfigError, match="'microbatch_size' must be"):
        m.layer_times("GH-96", 3, 4)
    with pytest.raises(ConfigError, match="'model' must be a model of the profiles"):
        opt.model("GPT-X")
    with pytest.raises(ConfigError, match="'gpu' must be a GPU type of the catalogue"):
        opt.gpus["H100"]


def test_runs_read_with_their_measurements():
    """The 17 shipped runs: plans, models from the file names, measured values."""
    runs = {r.name: r for r in read_runs()}
    assert len(runs) == 17
    r = runs["clariden-OPT-350-N16_D4"]
    assert r.plan.model == "OPT-350" and r.plan.dp == (4, 4, 4, 4) and r.plan.microbatches == 32
    assert r.iteration_time == 2.72578 and r.peak_memory == 25140658176
    mit = runs["mit-N2_D1"].plan
    assert [s.replicas[0].gpu for s in mit.stages] == ["RTX-3090", "Titan-RTX"]
    assert mit.stages[0].replicas[0].tp == 2 and mit.microbatches == 128
    r.plan.check_covers(26)


def test_plan_values_validate():
    """Plans refuse gaps, TP beyond a node, and batches that do not divide."""
    rep = ReplicaSpec("A", tp=2, gpus_per_node=4)
    with pytest.raises(ConfigError, match="'layers' must be stages of consecutive layers"):
        Plan((StageSpec((0, 1), (rep,)), StageSpec((3,), (rep,))), 1, 4)
    with pytest.raises(ConfigError, match="'tp' must be <= gpus_per_node"):
        ReplicaSpec("A", tp=8, gpus_per_node=4)
    with pytest.raises(ConfigError, match="'global_batch_size' must be a multiple"):
        Plan((StageSpec((0,), (rep, rep)),), 2, 6)
    p = Plan((StageSpec((0, 1), (rep,)), StageSpec((2,), (rep,))), 1, 4)
    with pytest.raises(ConfigError, match=r"'layers' must be stages covering .* 0\.\.3"):
        p.check_covers(4)


def test_formats_round_trip(tmp_path):
    """Plan, model, GPUs, network and fleet survive to_data/from_data; TOML plans read."""
    rep = ReplicaSpec("A", tp=2, gpus_per_node=8, zone="z")
    plan = Plan((StageSpec((0, 1), (rep, rep)), StageSpec((2,), (rep, ReplicaSpec("B")))), 2, 8,
                model="M")
    assert plan_from_data(json.loads(json.dumps(plan_to_data(plan)))) == plan
    m = ModelProfile("M", 2, ((("A", 1, 1), (LayerTimes(1.0, 2.0, 0.5), LayerTimes(1.0, 2.0))),),
                     ((1, (LayerSizes(10, 4.0, 8.0), LayerSizes(20, 4.0, 8.0))),))
    assert model_from_data(json.loads(json.dumps(model_to_data(m)))) == m
    cat = GPUCatalogue((GPUType("A", 2e10, 1.5, 3e9, 2e9, "here"), GPUType("B", 1e10)))
    assert gpus_from_data(json.loads(json.dumps(gpus_to_data(cat)))) == cat
    gbs = dict(size_unit=1e6, bandwidth_unit=1e9, min_size=2.0**16, max_size=2.0**30)
    net = NetworkProfile((Link(("A", "z"), ("B", "z"), 2, 2, 1e9, 1e-5),
                   Link(("A", "z"), ("A", "z"), 1, 1, BandwidthCurve.polylog2((1.0, 2.0), **gbs)),
                   Link(("B", "z"), ("A", "z"), 1, 1, BandwidthCurve.table([(1e3, 5e8), (1e6, 5e9)]))))
    assert network_from_data(json.loads(json.dumps(network_to_data(net)))) == net
    fleet = fleet_from_data({"nodes": [{"gpu": "A", "gpus_per_node": 8, "zone": "z", "count": 3}],
                             **network_to_data(net)})
    assert fleet.gpus == 24 and fleet_from_data(fleet_to_data(fleet)) == fleet
    toml = tmp_path / "p.toml"
    toml.write_text('model = "M"\nmicrobatch_size = 2\nglobal_batch_size = 8\n'
                    '[[stages]]\nfirst_layer = 0\nlast_layer = 1\n'
                    'replicas = [{gpu = "A", tp = 2, gpus_per_node = 8, zone = "z", count = 2}]\n'
                    '[[stages]]\nlayers = [2]\n'
                    'replicas = [{gpu = "A", tp = 2, gpus_per_node = 8, zone = "z"}, {gpu = "B"}]\n')
    assert read_plan(toml) == plan


def test_bandwidth_curve_and_transfer_time():
    """A curve is evaluated in GB/s of log2(MB), clamped to its fitted range; k flows share it."""
    c = BandwidthCurve.polylog2((-0.05, 1.0, 10.0), size_unit=1e6, bandwidth_unit=1e9,
                                min_size=2**16, max_size=2**30)
    x = math.log2(8e6 / 1e6)
    assert math.isclose(c(8e6), 1e9 * (-0.05 * x * x + x + 10))
    assert c(1.0) == c(2**16) and c(2**40) == c(2**30)
    a = NodeKind("A", 4, "z")
    net = NetworkProfile((Link(("A", "z"), ("A", "z"), 4, 4, c, 1e-4),))
    assert math.isclose(net.transfer_time(a, a, 8e6, 4), 1e-4 + 4 * 8e6 / c(8e6))
    assert net.transfer_time(a, a, 0.0, 4) == 0.0
    with pytest.raises(ConfigError, match="'network' must be a link for every pair"):
        net.transfer_time(a, a, 8e6, 2)
    neg = NetworkProfile((Link(("A", "z"), ("A", "z"), 1, 1, BandwidthCurve.polylog2((1.0, -1.0), size_unit=1e6)),))
    with pytest.raises(ConfigError, match="'network' must be a bandwidth curve positive"):
        neg.transfer_time(a, a, 1e6, 1)


def test_documents_refuse_in_one_line(tmp_path):
    """Unreadable, malformed or incomplete documents give one line naming the input."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"stages": [}')
    with pytest.raises(ConfigError, match=r"'plan' must be a valid JSON file: .*line 1"):
        read_plan(bad)
    with pytest.raises(ConfigError, match="'plan' must be a readable JSON or TOML file"):
        read_plan(tmp_path / "none.json")
    with pytest.raises(ConfigError, match="'plan' must be a document with 'global_batch_size'"):
        plan_from_data({"microbatch_size": 1, "stages": [{"layers": [0], "replicas": [
            {"gpu": "A"}]}]})
    with pytest.raises(ConfigError, match="'profiles' must be a folder of profiles"):
        load_profiles(tmp_path / "nothing")
    with pytest.raises(ConfigError, match="'profiles' must be a folder with model profiles"):
        load_profiles(tmp_path)  # no catalogue of its own: dtsim's; but no model either


def test_a_link_given_twice_is_refused():
    """A network or fleet file giving one link (src, dst, flows) twice: the last was used and
    the first dropped without a word; it is refused naming both. Another flow count, or the
    other direction, is another link."""
    a = {"gpu": "GH-96", "zone": "z"}
    b = {"gpu": "GH-96", "zone": "y"}
    link = {"src": a, "dst": b, "flows": 1, "bandwidth": 5e9}
    with pytest.raises(ConfigError, match=re.escape(
            "'network' must be each link once (src, dst and flows) at network: links[0] and "
            "links[2] are the link GH-96@z -> GH-96@y: '1 flows'")):
        network_from_data({"links": [link, {**link, "flows": 2}, {**link, "bandwidth": 6e9}]})
    net = network_from_data({"links": [link, {**link, "flows": 2}, {**link, "src": b, "dst": a}]})
    assert len(net.links) == 3


@pytest.mark.parametrize("node, message", [
    ({"gpus_per_node": 10**9}, "'fleet' must be GPUs per node and counts below 10^9 (as --nodes) "
     "for gpus_per_node at F.nodes[1]: 1000000000"),
    ({"gpus_per_node": 4, "count": 10**9}, "'fleet' must be GPUs per node and counts below 10^9 "
     "(as --nodes) for count at F.nodes[1]: 1000000000"),
    ({"gpus_per_node": 4, "count": -1}, "'fleet' must be an integer >= 0 for count at "
     "F.nodes[1]: -1"),
    ({"gpus_per_node": 0}, "'fleet' must be an integer >= 1 for gpus_per_node at F.nodes[1]: 0"),
])
def test_a_fleet_files_node_numbers_follow_the_nodes_options_rule(node, message):
    """(smallfix2) ``--nodes GPU:GxN@zone`` refuses GPUs per node and counts of 10^9 and above;
    a fleet file took them (and a count of -1 was refused as 'count', naming neither the file
    nor the node). The file follows the same rule, in one line naming the node; 999999999,
    the largest --nodes takes, is taken."""
    ok = {"gpu": "A", "gpus_per_node": 8, "zone": "z"}
    with pytest.raises(ConfigError) as e:
        fleet_from_data({"nodes": [ok, {"gpu": "A", "zone": "y", **node}]}, "F")
    assert str(e.value) == message
    big = fleet_from_data({"nodes": [{**ok, "gpus_per_node": 10**9 - 1, "count": 10**9 - 1}]})
    assert big.gpus == (10**9 - 1) ** 2
