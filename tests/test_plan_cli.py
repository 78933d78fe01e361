"""dtsim plan on the shipped profiles: the one closed form, the one memory model, the DES, the CLI."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.planner import PlanRequest, search_plans
from sim.planner.fleets import fleet_of_plans, parse_nodes
from sim.planner.models import ProfilePlanModel, simulate_plan
from sim.profiles import load_profiles, read_plan, read_runs
from sim.profiles.build import build_plan, plan_memory


@pytest.fixture(scope="module")
def shipped():
    profiles = load_profiles(models=("OPT-350",))
    return profiles, profiles.model("OPT-350"), {r.name: r for r in read_runs()}


def test_memory_terms_restate_plan_memory(shipped):
    """The cut's per-layer memory sums give plan_memory's total on every GPU of the 17 runs
    (the default framework, DeepSpeed 0.16.5: its received inputs as recv_memory counts them)."""
    profiles, model, runs = shipped
    pm = ProfilePlanModel(profiles, model)
    gpus = 0
    for run in runs.values():
        plan = run.plan
        for g in plan_memory(plan, model, profiles.gpus, recv_clones=True):
            layers = plan.stages[g.stage].layers
            terms = pm.memory_terms(g.gpu, g.tp, plan.microbatch_size, g.stage,
                                    plan.pipeline_stages, plan.microbatches)
            total = max(f + sum(per[i] for i in layers) for f, per in terms)
            assert total + profiles.gpus[g.gpu].overhead(g.tp) == pytest.approx(g.total, rel=1e-12)
            gpus += 1
    assert gpus > 100
    # DeepSpeed 0.3.13 keeps one more received-input buffer (schedule.py:243-247 at v0.3.13):
    # the planner's sums follow it, and a middle stage of a deep pipeline holds one more output
    from dataclasses import replace

    from sim.profiles.frameworks import FrameworkSpec

    old = FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 2048),))
    pm3 = ProfilePlanModel(profiles, model, framework=old)
    deepest = max(runs.values(), key=lambda r: r.plan.pipeline_stages).plan
    L = deepest.pipeline_stages
    assert L >= 3
    new_, old_ = (plan_memory(deepest, model, profiles.gpus, pipe_buffers=k) for k in (0, 1))
    for a, b in zip(new_, old_, strict=True):
        out = model.layer_sizes(a.tp)[deepest.stages[a.stage - 1].layers[-1]].activation_bytes \
            if a.stage else 0.0
        grows = 0 < a.stage and L - a.stage + 1 <= deepest.microbatches and L - a.stage >= 2
        assert b.buffers - a.buffers == pytest.approx(
            deepest.microbatch_size * out if grows else 0.0, rel=1e-12)
    # with the attention masks 0.3.13 keeps (2048 x 2048 bools, mask_memory): the planner too
    masked = plan_memory(deepest, model, profiles.gpus, pipe_buffers=1, mask_sequence=2048)
    for b in masked:
        terms = pm3.memory_terms(b.gpu, b.tp, deepest.microbatch_size, b.stage, L,
                                 deepest.microbatches)
        total = max(f + sum(per[i] for i in deepest.stages[b.stage].layers) for f, per in terms)
        assert total + profiles.gpus[b.gpu].overhead(b.tp) == pytest.approx(b.total, rel=1e-12)
    built = build_plan(replace(deepest, framework=old), profiles, steps=1, check_memory=False)
    assert [g.buffers for g in built.memory] == [g.buffers for g in masked]


def test_fleets_from_runs_and_specs(shipped):
    """A run's fleet is its replicas' nodes (the most any run used); a spec names nodes."""
    profiles, _, runs = shipped
    mixed = fleet_of_plans([runs["mit-N2_D1"].plan, runs["mit-N2_D2"].plan], profiles.network)
    assert sorted((str(k), n) for k, n in mixed.nodes) == [
        ("RTX-3090x2@us-central1-a", 1), ("Titan-RTXx2@us-central1-a", 1)]
    gh = fleet_of_plans([runs[f"clariden-OPT-350-N32_D{d}"].plan for d in (8, 16, 32)],
                        profiles.network)
    assert [(str(k), n) for k, n in gh.nodes] == [("GH-96x4@us-central1-a", 32)]
    f = parse_nodes("RTX-3090:8x3,RTX-2080:8x3,Titan-RTX:8x2", profiles.network)
    assert f.gpus == 64
    with pytest.raises(ConfigError, match="'nodes' must be a zone for GH-96"):
        parse_nodes("GH-96:4x2", profiles.network)
    # (user trial 15) a GPU type the network has no link for: any zone name, and how
    with pytest.raises(ConfigError, match="'nodes' must be a zone for L40S \\(@ZONE; the network "
                       "has no link for L40S to take one from: name any, e.g. L40S:8x1@dc1"):
        parse_nodes("L40S:8x1", profiles.network)
    with pytest.raises(ConfigError, match="'nodes' must be GPU:GPUS_PER_NODExCOUNT"):
        parse_nodes("GH-96:4", profiles.network)


@pytest.mark.slow
def test_restricted_to_the_runs_choices_the_planner_ranks_them_as_measured(shipped):
    """With the GH200 runs' TP 4 and micro-batch 8, the best plan is the fastest measured one (DP 32)."""
    profiles, model, runs = shipped
    names = [f"clariden-OPT-350-N32_D{d}" for d in (8, 16, 32)]
    fleet = fleet_of_plans([runs[n].plan for n in names], profiles.network)
    pm = ProfilePlanModel(profiles, model)
    res = search_plans(model, fleet, profiles.gpus,
                       PlanRequest(1024, tp=(4,), microbatch_sizes=(8,), top=5), pm)
    best = res.best.plan
    assert (best.pipeline_stages, best.dp[0]) == (1, 32)
    measured = sorted(names, key=lambda n: runs[n].iteration_time)
    predicted = sorted(names, key=lambda n: pm.predict(runs[n].plan).iteration_time)
    assert predicted == measured  # D32 < D16 < D8 both ways


def _every_plan(profiles, model, nodes, request, physical=False):
    """Every plan an exhaustive search ranks (top set above the space), with the search."""
    from sim.planner import search as S

    fleet = parse_nodes(nodes, profiles.network)
    pm = ProfilePlanModel(profiles, model, fleet=fleet if physical else None)
    s = S._Search(model, fleet, profiles.gpus, request, pm)
    s.run(prune=False)
    return pm, list(s.best.values())


@pytest.mark.parametrize("physical", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_transfer_and_tail_bounds_never_exceed_the_closed_form(shipped, physical):
    """On every plan of a mixed fleet: each boundary's transfers >= p2p_bound, the tail after
    the pipeline >= tail_bound (the search prunes with them); both exact on one-kind pairs of
    nodes of their own; on physical nodes (replicas placed in rank order, sharing nodes) too."""
    profiles, model, _ = shipped
    pm, cands = _every_plan(profiles, model, "RTX-3090:2x2,RTX-2080:2x2,Titan-RTX:2x1",
                            PlanRequest(64, microbatch_sizes=(1, 2), top=10**6), physical)
    hops = tails = 0
    tight_hop = tight_tail = 0.0
    for c in cands:
        plan, e, b = c.plan, c.prediction.explain, c.prediction.build
        p, dp = plan.pipeline_stages, plan.dp[0]
        for j in range(p - 1):
            for i in range(dp):
                a, z = plan.stages[j].replicas[i], plan.stages[j + 1].replicas[i]
                actual = sum(b.transfer_times[j][i])
                bound = pm.p2p_bound(a, z, plan.microbatch_size)
                assert bound <= actual * (1 + 1e-12), (plan, j, i, bound, actual)
                tight_hop = max(tight_hop, bound / actual)
                hops += 1
        tail = e["tied_allreduce"] + e["allreduce"] + e["optimizer"]
        kinds = tuple(dict.fromkeys(r for st in plan.stages for r in st.replicas))
        uniform = all(len(set(st.replicas)) == 1 for st in plan.stages)
        bound = pm.tail_bound(kinds, dp, p, uniform)
        assert bound <= tail * (1 + 1e-12), (plan, bound, tail)
        if tail > 0:
            tight_tail = max(tight_tail, bound / tail)
            tails += 1
    assert hops > 500 and tails > 100
    assert tight_hop > 1 - 1e-9  # a boundary between two replicas of one kind: the bound is exact
    assert tight_tail > 0.5  # and the tail's is not vacuous
    if physical:  # many plans put two replicas on one node (TP 1 on the 2-GPU nodes)
        shared = 0
        for c in cands:
            hosts = [r.host for st in pm.place(c.plan).stages for r in st.replicas]
            shared += len(set(hosts)) < len(hosts)
        assert shared > 50


def test_peak_bandwidth_is_the_curves_maximum_above_a_size(shipped):
    """BandwidthCurve.peak_above: at least the curve at every size from there up, and reached."""
    import numpy as np

    profiles = shipped[0]
    curves = {x.bandwidth for x in profiles.network.links if not isinstance(x.bandwidth, float)}
    assert len(curves) > 5
    for c in curves:
        for lo in (0.0, 1e6, 3e7):
            grid = np.geomspace(max(lo, 1.0), 4 * c.max_size, 1201)
            top = max(c(float(x)) for x in grid)
            assert top <= c.peak_above(lo) <= top * (1 + 1e-4)  # the grid misses the apex by less


def test_simulated_equals_predicted_without_failures(shipped):
    """The DES of a plan (dtsim train --plan's engine) gives the closed form's iteration time."""
    profiles, model, runs = shipped
    pm = ProfilePlanModel(profiles, model)
    for name in ("mit-N2_D1", "clariden-OPT-350-N4_D2"):
        plan = runs[name].plan
        sim = simulate_plan(pm, plan, steps=2)
        assert sim["iteration_time"] == pytest.approx(pm.predict(plan).iteration_time, rel=1e-9)


@pytest.mark.slow
def test_cli_plan_writes_a_plan_dtsim_train_reads(tmp_path, capsys):
    """dtsim plan --json on the mixed fleet: the chosen plan file runs in dtsim train --plan."""
    out = tmp_path / "best.json"
    code = main(["plan", "--model", "OPT-350", "--fleet-from-runs", "mit-N2_D1,mit-N2_D2",
                 "--top", "3", "--simulate", "1", "--steps", "2", "--json", "--out", str(out)])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    chosen = res["plans"][res["chosen"]]
    assert chosen["simulated_iteration_time"] == pytest.approx(
        chosen["predicted_iteration_time"], rel=1e-9)
    assert res["global_batch_size"] == 256
    plan = read_plan(out)
    assert plan.global_batch_size == 256 and plan.gpus <= 4
    code = main(["train", "--plan", str(out), "--model", "OPT-350", "--steps", "2",
                 "--replications", "1", "--json"])
    assert code == 0
    train = json.loads(capsys.readouterr().out)
    assert train["step_time_mean"] == pytest.approx(chosen["predicted_iteration_time"], rel=1e-9)


def test_plan_and_train_print_peak_memory_in_one_unit(tmp_path, capsys):
    """dtsim plan's table gives peak memory in GiB, as dtsim train --plan does for the same
    plan (it gave decimal GB: 18.0 here against train's 16.8 GiB)."""
    out = tmp_path / "best.json"
    assert main(["plan", "--model", "OPT-350", "--fleet-from-runs", "mit-N2_D1,mit-N2_D2",
                 "--top", "1", "--simulate", "0", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(x for x in lines if "layers per stage" in x)
    row = next(x for x in lines if x.startswith("*"))
    col = head.index("peak GiB")
    shown = row[col:].split()[0]
    assert main(["train", "--plan", str(out), "--model", "OPT-350", "--steps", "1",
                 "--replications", "1"]) == 0
    text = capsys.readouterr().out
    assert f"peak GPU memory {shown} GiB" in text


def test_cli_plan_times_plans_on_the_fleet_files_links(tmp_path, capsys):
    """dtsim plan --fleet FILE uses the file's links: with GH200 links of 1e3 B/s the best plan
    keeps to one node (its replicas all-reduce over the node's intra-node link) and is slower
    than on the profiles' curves."""
    nodes = [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "us-central1-a", "count": 4}]
    end = {"gpu": "GH-96", "zone": "us-central1-a"}
    slow = {"nodes": nodes, "links": [{"src": end, "dst": end, "flows": k, "bandwidth": 1e3}
                                      for k in (1, 2, 4)]}
    res = {}
    for name, doc in (("plain", {"nodes": nodes}), ("slow", slow)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        assert main(["plan", "--model", "OPT-350", "--fleet", str(path), "--global-batch-size",
                     "64", "--top", "2", "--simulate", "1", "--steps", "1", "--json"]) == 0
        res[name] = json.loads(capsys.readouterr().out)["plans"][0]
    assert res["plain"]["gpus"] == 16 and res["slow"]["gpus"] == 4  # one node
    assert res["slow"]["predicted_iteration_time"] > 2 * res["plain"]["predicted_iteration_time"]
    hosts = {r.get("host") for st in res["slow"]["plan"]["stages"] for r in st["replicas"]}
    assert len(hosts) == 1 and None not in hosts


def test_a_link_whose_share_underflows_is_one_no_transfer_crosses(tmp_path, capsys):
    """A fleet link of 5e-324 B/s between zones: a flow's share of it underflows to 0, and the
    planner's bound raised ZeroDivisionError (a traceback); it is a link no transfer ends on,
    so the best plan keeps to one zone, as with a link of 1e-300 B/s."""
    a, b = ({"gpu": "GH-96", "zone": z} for z in ("us-central1-a", "europe-west4-a"))
    best = {}
    for bw in (1e-300, 5e-324):
        doc = {"nodes": [{**a, "gpus_per_node": 4, "count": 1},
                         {**b, "gpus_per_node": 4, "count": 1}],
               "links": [{"src": e, "dst": e, "flows": 1, "bandwidth": 5e9} for e in (a, b)]
               + [{"src": a, "dst": b, "flows": 1, "bandwidth": bw}]}
        path = tmp_path / f"fleet-{bw}.json"
        path.write_text(json.dumps(doc))
        assert main(["plan", "--model", "OPT-350", "--fleet", str(path), "--global-batch-size",
                     "8", "--top", "1", "--simulate", "0", "--json"]) == 0
        best[bw] = json.loads(capsys.readouterr().out)["plans"][0]
    assert best[5e-324] == best[1e-300]
    assert len({r["zone"] for st in best[5e-324]["plan"]["stages"] for r in st["replicas"]}) == 1


def test_a_plan_searched_on_a_fleet_files_links_runs_on_them(tmp_path, capsys):
    """The plan dtsim plan --fleet writes runs in dtsim train --plan --fleet on the same links
    (the command dtsim plan prints): the fleet's own links, which the profiles' network lacks
    for its zone, time it as in the search. Before, train had no --fleet and refused the plan
    ('network' must be a link for every pair of node kinds the plan uses)."""
    end = {"gpu": "GH-96", "zone": "eu"}
    doc = {"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "eu", "count": 2}],
           "links": [{"src": end, "dst": end, "flows": k, "bandwidth": "100Gbit/s",
                      "latency": "20us"} for k in (1, 2, 4)]}
    fleet, out = tmp_path / "fleet.json", tmp_path / "best.json"
    fleet.write_text(json.dumps(doc))
    assert main(["plan", "--model", "OPT-350", "--fleet", str(fleet), "--global-batch-size",
                 "32", "--top", "1", "--simulate", "0", "--out", str(out), "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)["plans"][0]
    argv = ["train", "--plan", str(out), "--model", "OPT-350", "--steps", "1", "--json"]
    assert main(argv) == 2
    assert "'network' must be a link for every pair" in capsys.readouterr().err
    assert main([*argv, "--fleet", str(fleet)]) == 0
    train = json.loads(capsys.readouterr().out)
    assert train["step_time_mean"] == pytest.approx(chosen["predicted_iteration_time"], rel=1e-9)
    assert main(["plan", "--model", "OPT-350", "--fleet", str(fleet), "--global-batch-size",
                 "32", "--top", "1", "--simulate", "0", "--out", str(out)]) == 0
    assert f"--fleet {fleet}" in capsys.readouterr().out  # the command printed runs it
    assert main(["train", "--stages", "2", "--fleet", str(fleet)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"'fleet' must be given only with --plan: "
                                                    f"'{fleet}'")


def test_a_fleet_file_without_a_link_of_the_plan_is_refused_and_not_printed(tmp_path, capsys):
    """(audit 7) dtsim train --plan uses a fleet file's links only: a file with none between
    the plan's node kinds (nodes only, or links of another zone) changed nothing and was
    accepted; it is refused in one line, and dtsim plan --out no longer prints it in the
    command it suggests (which would now be refused)."""
    nodes = [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "us-central1-a", "count": 2}]
    end = {"gpu": "GH-96", "zone": "eu"}
    other = [{"src": end, "dst": end, "flows": k, "bandwidth": "100Gbit/s", "latency": "20us"}
             for k in (1, 2, 4)]
    out = tmp_path / "best.json"
    for name, doc in (("nodes-only", {"nodes": nodes}),
                      ("other-zone", {"nodes": nodes, "links": other})):
        fleet = tmp_path / f"{name}.json"
        fleet.write_text(json.dumps(doc))
        assert main(["plan", "--model", "OPT-350", "--fleet", str(fleet), "--global-batch-size",
                     "8", "--top", "1", "--simulate", "0", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"(dtsim train --plan {out} --model OPT-350)" in printed
        argv = ["train", "--plan", str(out), "--model", "OPT-350", "--steps", "1",
                "--replications", "1"]
        assert main(argv) == 0  # the printed command runs
        capsys.readouterr()
        assert main([*argv, "--fleet", str(fleet)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith(
            "'fleet' must be a fleet file with a link between node kinds of the plan "
            "(GH-96@us-central1-a; with --plan only its links are used, its nodes are not): "
            f"'{fleet}'")


def _shape_only(tmp_path, network=True):
    """A profiles folder with model S given by its shape alone (and the shipped curves)."""
    import shutil

    from sim.profiles.formats import DATA_DIR

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "S.json").write_text(json.dumps({
        "model": "S", "bytes_per_value": 2, "shape": {
            "layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000}}))
    if network:
        shutil.copy(DATA_DIR / "bandwidths.json", tmp_path)
    return tmp_path


def test_a_model_given_by_its_shape_alone_is_planned_on_estimates(tmp_path, capsys):
    """A shape-only profile was refused by dtsim plan ('model' must be a profile with measured
    times), though dtsim train --plan runs it on estimates. The search now ranks the same
    roofline rows build_plan estimates (at the powers of two dividing the global batch and TP
    up to the node), says so, and each plan's prediction is dtsim train --plan's closed form
    of the plan it writes."""
    from sim.planner.fleets import parse_nodes
    from sim.planner.models import shape_search_model
    from sim.profiles.estimates import Estimator

    d = _shape_only(tmp_path)
    out = tmp_path / "best.json"
    argv = ["plan", "--model", "S", "--profiles", str(d), "--nodes", "GH-96:4x2@us-central1-a",
            "--global-batch-size", "8", "--simulate", "1", "--top", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("S is given by its shape: every time is estimated (the roofline lower bound at the "
            "GPU's datasheet peak, docs/real_runs.md), on GH-96; micro-batch sizes 1, 2, 4, 8 "
            "(the powers of two dividing the global batch; --microbatch-sizes to choose)") in text
    assert "estimated from the model's shape at the GPU's datasheet peak" in text
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model_from_shape"] and len(doc["plans"]) == 3
    best = doc["plans"][doc["chosen"]]
    assert main(["train", "--plan", str(out), "--profiles", str(d), "--model", "S", "--steps",
                 "1", "--replications", "1", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["predicted_step_time"] == pytest.approx(best["predicted_iteration_time"],
                                                       rel=1e-12)
    # the rows searched are build_plan's estimates, row for row (fp16: 2-byte activations)
    prof = load_profiles(d, models=("S",))
    fleet = parse_nodes("GH-96:4x2@us-central1-a", prof.network)
    m, notes = shape_search_model(prof, prof.model("S"), fleet, None, None, 8)
    assert m.combinations() == tuple(("GH-96", b, t) for b in (1, 2, 4, 8) for t in (1, 2, 4))
    est = Estimator(prof, prof.model("S"), value_bytes=2)
    for gpu, b, t in m.combinations():
        assert m.layer_times(gpu, b, t) == est.layer_times(gpu, b, t)[0]


def test_a_shape_model_on_gpus_without_a_datasheet_is_refused_naming_the_fleet(tmp_path,
                                                                               capsys):
    """A catalogue GPU type with no peak FLOP/s: nothing to estimate on; one line."""
    d = _shape_only(tmp_path)
    (d / "gpus.json").write_text(json.dumps({"gpus": [
        {"name": "X1", "memory_bytes": 8e10, "price_per_hour": 1.0, "overhead_bytes": 0}]}))
    code = main(["plan", "--model", "S", "--profiles", str(d), "--nodes", "X1:4x1@z",
                 "--global-batch-size", "8", "--simulate", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("dtsim plan: error: 'fleet' must be GPUs whose datasheet the "
                             "catalogue holds"), err


def test_a_tp_the_heads_do_not_divide_is_refused_naming_the_heads(tmp_path, capsys):
    """--tp 4 for a model of 6 heads on 4-GPU nodes: TP 4 fits the node, and a model given by
    its shape gets rows at it, but the heads do not split evenly. The refusal said only 'a TP
    degree the profile measured that fits a node of the fleet (largest node: 4 GPUs)', both
    beside the point; it names the heads now (and --tp 2 runs)."""
    d = _shape_only(tmp_path)
    (d / "models" / "S.json").write_text(json.dumps({
        "model": "S", "bytes_per_value": 2, "shape": {
            "layers": 4, "hidden": 384, "heads": 6, "sequence": 128, "vocabulary": 1000}}))
    argv = ["plan", "--model", "S", "--profiles", str(d), "--nodes", "GH-96:4x2@us-central1-a",
            "--global-batch-size", "8", "--simulate", "0", "--top", "1"]
    code = main([*argv, "--tp", "4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("dtsim plan: error: 'tp' must be a TP degree "), err
    assert "divides the 6 attention heads of S" in err[0] and err[0].endswith(": (4,)"), err
    assert main([*argv, "--tp", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["tp"] for st in doc["plans"][0]["plan"]["stages"] for r in st["replicas"]} == {2}


def test_a_plan_inside_one_node_needs_no_network_curve(tmp_path, capsys):
    """Two stages on one 4-GPU node of a kind the network has no curve for: the closed form
    timed it, the DES refused it ('a link for every pair of node kinds': it built the node's
    NIC and GPU paths though no transfer leaves the node); one stage on one replica: no link
    at all ('must be given at least one link'). Both run now, the DES equal to the closed
    form (no contention inside: each replica its own intra-node link)."""
    d = _shape_only(tmp_path, network=False)
    for layers, reps in (([[0, 2], [3, 5]], 1), ([[0, 5]], 1)):
        stages = [{"first_layer": a, "last_layer": b, "replicas": [
            {"gpu": "GH-96", "tp": 2 if len(layers) == 2 else 4, "gpus_per_node": 4,
             "zone": "us-central1-a", "host": "n0", "count": reps}]} for a, b in layers]
        plan = tmp_path / f"p{len(layers)}.json"
        plan.write_text(json.dumps({"model": "S", "microbatch_size": 2, "global_batch_size": 8,
                                    "stages": stages}))
        assert main(["train", "--plan", str(plan), "--profiles", str(d), "--model", "S",
                     "--steps", "2", "--replications", "1", "--json"]) == 0, \
            capsys.readouterr().err
        run = json.loads(capsys.readouterr().out)
        assert run["step_time_mean"] == pytest.approx(run["predicted_step_time"], rel=1e-9)


def test_a_fleet_whose_nodes_have_no_link_is_warned_about(tmp_path, capsys):
    """Two GH-96 nodes in a zone the network has no link for: every plan across the two is
    refused, so the search keeps to one node. It was silent (a zone with no link at all passes
    the --nodes check); now one warning names the pair. One node needs no link: no warning."""
    doc = {"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "eu", "count": 2}]}
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(doc))
    argv = ["plan", "--model", "OPT-350", "--fleet", str(path), "--global-batch-size", "16",
            "--simulate", "0", "--top", "1", "--json"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert cap.err.strip() == ("dtsim plan: warning: the network has no link between GH-96@eu "
                               "and GH-96@eu nodes: plans across them are refused (give the "
                               "links in a fleet file or the profiles' network)")
    assert json.loads(cap.out)["plans"][0]["gpus"] <= 4
    doc["nodes"][0]["count"] = 1
    path.write_text(json.dumps(doc))
    assert main(argv) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv,message", [
    (["--global-batch-size", "8"],
     "'fleet' must be given exactly once: --nodes, --fleet or --fleet-from-runs: 'none'"),
    (["--nodes", "GH-96:4x2@us-central1-a", "--fleet-from-runs", "mit-N2_D1"],
     "'fleet' must be given exactly once: --nodes, --fleet or --fleet-from-runs: "
     "'--nodes, --fleet-from-runs'"),
    (["--nodes", "GH-96:4x2@us-central1-a"],
     "'global_batch_size' must be given (or one batch size shared by the runs of "
     "--fleet-from-runs): None"),
    (["--nodes", "GH-96:4x2@us-central1-a", "--global-batch-size", "8", "--compare-runs"],
     "'compare_runs' must be given only with --fleet-from-runs: True"),
    (["--nodes", "RTX-3090:2x1@us-central1-a", "--global-batch-size", "8", "--objective",
      "cost"], "'prices' must be a price for every GPU type of the fleet (the catalogue's, or "
     "given: --price GPU=DOLLARS_PER_HOUR): 'RTX-3090'"),
    (["--nodes", "A100-80:1x1@us-central1-a", "--global-batch-size", "8", "--tp", "4"],
     "'tp' must be a TP degree the profile has times at (measured, or estimated for a model "
     "given by its shape) that fits a node of the fleet (largest node: 1 GPUs): (4,)"),
])
def test_cli_refuses_in_one_line(argv, message, capsys):
    """Bad fleets, batch sizes and objectives: exit 2 and one line naming the parameter."""
    code = main(["plan", "--model", "OPT-350", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].endswith(message)


def test_bench_part_on_a_small_fleet():
    """The bench part reports the search's CPU time, plans ranked and their rate (4 mixed GPUs)."""
    from sim.bench.planner import bench_planner

    res = bench_planner(nodes="RTX-3090:2x1@us-central1-a,Titan-RTX:2x1@us-central1-a",
                        top=2)
    assert res["planner_gpus"] == 4 and res["planner_plans"] >= 2
    assert res["planner_seconds"] > 0
    assert res["planner_plans_per_s"] == pytest.approx(res["planner_plans"]
                                                       / res["planner_seconds"])
    assert 0 < res["planner_best_iteration_time"] < 200


@pytest.mark.slow
def test_bench_part_on_the_64_gpu_mixed_fleet(capsys):
    """dtsim bench --parts planner: the 64-GPU mixed fleet, in the table."""
    assert main(["bench", "--quick", "--parts", "planner", "--out", "-"]) in (0, 1)
    text = capsys.readouterr().out
    assert "(q) dtsim plan, 64-GPU mixed fleet" in text and "plans ranked" in text


def test_a_bad_fleet_link_is_named_by_its_index_and_ends(tmp_path):
    """A fleet file's bad link: the message names the file, the link's index and its two ends."""
    from sim.profiles.formats import read_fleet

    end = {"gpu": "GH-96", "zone": "us-central1-a"}
    rtx = {"gpu": "RTX-3090", "zone": "us-central1-a"}
    doc = {"nodes": [{**end, "gpus_per_node": 4, "count": 2}],
           "links": [{"src": end, "dst": end, "flows": 1, "bandwidth": 5e9},
                     {"src": end, "dst": rtx, "flows": 1, "bandwidth": -5}]}
    f = tmp_path / "fleet.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as exc:
        read_fleet(f)
    assert str(exc.value) == (f"'network' must be > 0 for bandwidth at {f}.links[1] (the link "
                              "GH-96@us-central1-a -> RTX-3090@us-central1-a): -5")


def test_a_model_given_by_shape_and_times_without_sizes_is_planned_and_run(tmp_path, capsys):
    """A model profile with its shape and measured times but no sizes (OPT-350's GH200 times,
    its shape): ``dtsim plan`` searches it (before: every TP degree was dropped for want of
    measured sizes, and the fleet was refused as holding no plan) and ``dtsim train --plan``
    runs the plan it writes; both name the sizes derived from the shape."""
    import shutil

    from sim.profiles import model_to_data
    from sim.profiles.formats import DATA_DIR

    doc = model_to_data(load_profiles(models=("OPT-350",)).model("OPT-350"))
    doc = {k: v for k, v in doc.items() if k not in ("sizes", "tied_params")}
    doc.update(model="OPT-shape", times=[t for t in doc["times"] if t["gpu"] == "GH-96"],
               shape={"layers": 24, "hidden": 1024, "heads": 16, "sequence": 2048,
                      "vocabulary": 50272, "tied": False})
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "opt.json").write_text(json.dumps(doc))
    shutil.copy(DATA_DIR / "bandwidths.json", tmp_path)
    out = tmp_path / "best.json"
    assert main(["plan", "--profiles", str(tmp_path), "--model", "OPT-shape", "--nodes",
                 "GH-96:4x2@us-central1-a", "--global-batch-size", "32", "--top", "2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "estimated, not measured: sizes at TP" in text and "from the model's shape" in text
    assert main(["plan", "--profiles", str(tmp_path), "--model", "OPT-shape", "--nodes",
                 "GH-96:4x2@us-central1-a", "--global-batch-size", "32", "--top", "2",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["plans"]
    assert all(any("from the model's shape" in e for e in r["estimates"]) for r in rows)
    assert main(["train", "--plan", str(out), "--profiles", str(tmp_path), "--model",
                 "OPT-shape", "--steps", "1", "--replications", "1"]) == 0
    text = capsys.readouterr().out
    assert "from the model's shape" in text and "step time" in text


@pytest.mark.parametrize("extra, mode", [
    (("--framework", "megatron"), "p2p batched"),
    (("--framework", "deepspeed"), "p2p blocking"),
    (("--framework", "megatron", "--p2p", "blocking"), "p2p blocking"),
    ((), "p2p blocking"),
])
def test_failure_refusals_name_the_p2p_mode_in_force(extra, mode, capsys):
    """``dtsim plan --mtbf`` without a restart cost is refused naming the point-to-point mode
    the plans run under: Megatron-LM's batched (it said blocking, whatever the framework)."""
    code = main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--top", "1", "--simulate", "1", "--mtbf", "100",
                 *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert f"'restart_cost' must be given with failures under {mode} " in err[0]
@pytest.mark.parametrize("node,message", [
    ({"gpu": "A100-40", "gpus_per_node": 4, "zone": "us-central1-a", "cuont": 4},
     "'fleet' must be node keys gpu, gpus_per_node, zone, count at {f}.nodes[0]: ['cuont']"),
    ({"gpu": "A100-40", "gpus_per_node": 4, "zone": "us-central1-a", "count": 0},
     "'fleet' must be at least one GPU (a node kind with count >= 1): 'A100-40 x 0'"),
])
def test_a_users_fleet_file_typo_or_no_gpu_is_refused(tmp_path, capsys, node, message):
    """A misspelt key used to be ignored (the node counted once: the plan of 4 GPUs, not 16),
    and a fleet of count 0 was refused as 'GPUs of a type the profile measured' while naming
    a type it measured; each is now one line that says what is wrong, exit 2."""
    import json

    from sim.cli import main

    f = tmp_path / "fleet.json"
    f.write_text(json.dumps({"nodes": [node]}))
    assert main(["plan", "--model", "OPT-350", "--fleet", str(f),
                 "--global-batch-size", "32"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.strip().splitlines() == ["dtsim plan: error: " + message.format(f=f)]


def test_a_fleet_file_with_an_unknown_top_level_key_is_refused(tmp_path):
    from sim.profiles import fleet_from_data

    with pytest.raises(ConfigError, match=r"a table of nodes, links \(no other key\)"):
        fleet_from_data({"nodes": [{"gpu": "A", "gpus_per_node": 8}], "link": []})


def test_a_network_link_with_a_misspelt_key_is_refused():
    """A link's "latancy" used to be ignored (the link at 0 latency): now one line naming it."""
    from sim.profiles import network_from_data

    end = {"gpu": "A", "zone": "z"}
    with pytest.raises(ConfigError, match=r"link keys .* at network.links\[0\] \(the link "
                                          r"A@z -> A@z\)"):
        network_from_data({"links": [{"src": end, "dst": end, "bandwidth": 1e9,
                                      "latancy": "5ms"}]})


def _zones_fleet(tmp_path, both_ways: bool):
    """Two zones of one A100-80 node each, the link between them given one way or both."""
    links = [{"src": {"gpu": "A100-80", "zone": z}, "dst": {"gpu": "A100-80", "zone": z},
              "bandwidth": "100Gbit/s", "latency": "5us"} for z in ("iad", "fra")]
    way = {"src": {"gpu": "A100-80", "zone": "iad"}, "dst": {"gpu": "A100-80", "zone": "fra"},
           "bandwidth": "500Mbps", "latency": "45ms"}
    links.append(way)
    if both_ways:
        links.append(dict(way, src=way["dst"], dst=way["src"]))
    path = tmp_path / ("both.json" if both_ways else "one_way.json")
    path.write_text(json.dumps({"nodes": [{"gpu": "A100-80", "gpus_per_node": 2, "zone": z,
                                           "count": 1} for z in ("iad", "fra")],
                                "links": links}))
    return path


def test_a_link_between_zones_given_one_way_is_taken_as_symmetric_on_physical_nodes(
        tmp_path, capsys):
    """(user trial 4) A fleet file whose link between two zones is written once (iad -> fra)
    refused every plan with replicas on named hosts in both zones ('network' must be a link
    for every pair of node kinds the plan uses: 'A100-80@fra -> A100-80@iad (with at most 2
    flows)'), and dtsim plan never offered a plan across the zones, though a pair measured one
    way only is taken as symmetric (sim.profiles.build.pair_link, docs/real_runs.md). The
    physical nodes' links now read the other direction's flow counts too: the run equals the
    one whose file writes the same link both ways, bit for bit."""
    d = _shape_only(tmp_path, network=False)
    rep = {"gpu": "A100-80", "tp": 1, "gpus_per_node": 2, "count": 2}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "model": "S", "microbatch_size": 1, "global_batch_size": 8,
        "stages": [{"first_layer": 0, "last_layer": 5, "replicas": [
            dict(rep, zone=z, host=f"A100-80@{z}#0") for z in ("iad", "fra")]}]}))
    steps = {}
    for both in (True, False):
        fleet = _zones_fleet(tmp_path, both)
        assert main(["train", "--plan", str(plan), "--profiles", str(d), "--model", "S",
                     "--fleet", str(fleet), "--steps", "2", "--replications", "1",
                     "--json"]) == 0, capsys.readouterr().err
        steps[both] = json.loads(capsys.readouterr().out)["step_time_mean"]
    assert steps[False] == steps[True] > 0.045
    # and the planner searches plans across the two zones on the one-way file
    assert main(["plan", "--model", "S", "--profiles", str(d), "--fleet",
                 str(_zones_fleet(tmp_path, False)), "--global-batch-size", "8",
                 "--microbatch-sizes", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(p["gpus"] == 4 for p in doc["plans"]), [p["gpus"] for p in doc["plans"]]


def test_the_plan_table_names_the_zone_when_plans_differ_in_it(tmp_path, capsys):
    """(user trial 4) On a fleet of one node in each of two zones the table printed the two
    best plans as the same row twice ('1x2  2xA100-80/tp1  ...'): one in iad, one in fra. When
    the candidates span zones, each GPU kind names its zone."""
    d = _shape_only(tmp_path, network=False)
    assert main(["plan", "--model", "S", "--profiles", str(d), "--fleet",
                 str(_zones_fleet(tmp_path, True)), "--global-batch-size", "8",
                 "--microbatch-sizes", "1", "--simulate", "0", "--top", "4"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " x tp1)" in line]
    assert any("2 A100-80@iad (2 x tp1)" in r for r in rows), rows
    assert any("2 A100-80@fra (2 x tp1)" in r for r in rows), rows
    assert len({r.replace("*", " ").split(None, 1)[1] for r in rows}) == len(rows)


def test_the_plan_tables_gpus_column_counts_gpus_as_the_json_does(tmp_path, capsys):
    """(smallfix3) The GPUs column showed '4xGH-96/tp2' for 8 GPUs (4 replicas of TP 2), read
    as 4 GPUs where --json's gpus says 8. It leads with the GPUs --json counts, then the
    replicas and their TP degree: '8 GH-96 (4 x tp2)'."""
    d = _shape_only(tmp_path)
    argv = ["plan", "--model", "S", "--profiles", str(d), "--nodes", "GH-96:4x2@us-central1-a",
            "--global-batch-size", "8", "--simulate", "0", "--top", "1", "--tp", "2"]
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    replicas = sum(len(st["replicas"]) for st in plan["plan"]["stages"])
    assert plan["gpus"] == 2 * replicas, plan["gpus"]
    assert main(argv) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("*"))
    assert f" {plan['gpus']} GH-96 ({replicas} x tp2) " in row, row


@pytest.mark.parametrize("option, dest, text, shown", [
    ("--tp", "tp", "1,1", "(1, 1)"),
    ("--tp", "tp", "4,1,4", "(4, 1, 4)"),
    ("--microbatch-sizes", "microbatch_sizes", "1,1", "(1, 1)"),
    ("--layouts", "layouts", "stage,stage", "('stage', 'stage')"),
])
def test_a_repeated_value_of_a_plan_list_is_refused_in_one_line(capsys, option, dest, text,
                                                               shown):
    """--tp 1,1 and --microbatch-sizes 1,1 were taken (the search tries each value once, so the
    repeat did nothing): refused as --price twice for a GPU, a network's node named twice or
    an adversary position twice are, one line naming the option, exit 2, before any work."""
    argv = ["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
            "--global-batch-size", "8", "--simulate", "0", "--top", "1", option, text]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dtsim plan: error: '{dest}' must be values each given once: {shown}"]
    values = tuple(text.split(",")) if dest == "layouts" else tuple(map(int, text.split(",")))
    with pytest.raises(ConfigError, match=f"'{dest}' must be values each given once"):
        PlanRequest(8, **{dest: values})
    assert PlanRequest(8, **{dest: tuple(dict.fromkeys(values))}) is not None


def test_a_plan_whose_closed_form_disagrees_says_what_the_exact_column_is(tmp_path, capsys):
    """A Megatron-LM launch (TP 4 x PP 4 x DP 2 on 8 nodes, overlap_grad_reduce) whose
    all-reduce buckets share the nodes' NICs with the pipeline's transfers: the DES is longer
    than the plan's closed form, which times each transfer alone. The table printed the closed
    form in a column headed 'exact' and 'NO' with no word on it (the JSON's reference_note had
    it); the text now prints that note under the table for the rows that disagree."""
    (tmp_path / "models").mkdir()
    (tmp_path / "gpus.json").write_text(json.dumps({"gpus": [{
        "name": "L40S", "memory_bytes": "48GB", "price_per_hour": 1.0, "overhead_bytes": 0,
        "intra_node_bandwidth": "32GB/s", "peak_flops": 3.62e14, "peak_flops_fp32": 9.16e13,
        "memory_bandwidth": "864GB/s"}]}))
    (tmp_path / "models" / "S.json").write_text(json.dumps({
        "model": "S", "bytes_per_value": 2, "shape": {
            "layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000,
            "tied": True}}))
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps({
        "nodes": [{"gpu": "L40S", "gpus_per_node": 4, "zone": "z", "count": 8}],
        "links": [{"src": {"gpu": "L40S", "zone": "z"}, "dst": {"gpu": "L40S", "zone": "z"},
                   "bandwidth": "25Gbit/s", "latency": "3 ms"}]}))
    launch = tmp_path / "launch.sh"
    launch.write_text(
        "torchrun --nnodes 8 --nproc-per-node 4 pretrain_gpt.py --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 4 --num-layers 4 --hidden-size 256 "
        "--num-attention-heads 4 --seq-length 128 --micro-batch-size 2 --global-batch-size 64 "
        "--bf16 --overlap-grad-reduce\n")
    argv = ["train", "--plan", str(launch), "--gpu", "L40S", "--zone", "z", "--model", "S",
            "--profiles", str(tmp_path), "--fleet", str(fleet), "--steps", "1",
            "--replications", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    step = next(ln for ln in lines if ln.startswith("step time (s)"))
    assert step.split()[-1] == "NO"
    assert ("  exact throughput, step time, time to train: plan closed form (transfers and "
            "all-reduces as their times, no contention: exact when no two transfers share a "
            "link): ") in "\n".join(lines)


def test_a_trace_of_named_workers_is_replayed_by_name_as_train_replays_it(tmp_path, capsys):
    """A dtsim CSV of workers s{stage}r{replica} is replayed by name in dtsim plan, as in
    dtsim train --plan: each plan simulated has every worker it names, plans without one are
    passed over (said), and the chosen plan's simulated time is train's on the written plan,
    failures and restarts included. (dtsim plan replayed it by slot: its 2 workers were 2
    slots, refused for the 8-worker 2x4 plan.) A trace no listed plan can run is refused."""
    trace = tmp_path / "mine.csv"
    trace.write_text("worker,start,end\ns1r0,0.05,0.25\ns0r3,0.4,0.5\n")
    out = tmp_path / "best.json"
    common = ["--failure-trace", str(trace), "--restart-cost", "0.01", "--steps", "3"]
    code = main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--simulate", "2", "--top", "4", *common,
                 "--json", "--out", str(out)])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    # 1x2 and 1x4 have no stage 1, 4x2 no replica 3 of stage 0: 2x4 is the one simulated
    assert res["not_simulated_for_trace"] == {"1": "s1r0", "3": "s1r0", "4": "s0r3"}
    assert [p["simulated_iteration_time"] is None for p in res["plans"]] == [True, False,
                                                                             True, True]
    chosen = res["plans"][res["chosen"]]
    assert (chosen["stages"], chosen["dp"]) == (2, 4)
    # the failures cost time: lost passes and restarts over the failure-free prediction
    assert chosen["simulated_iteration_time"] > 1.5 * chosen["predicted_iteration_time"]
    code = main(["train", "--plan", str(out), "--model", "OPT-350", *common,
                 "--replications", "1", "--json"])
    assert code == 0
    train = json.loads(capsys.readouterr().out)
    assert 8 / train["samples_per_second"] == chosen["simulated_iteration_time"]
    assert train["lost_time"]["restart"] > 0
    trace.write_text("worker,start,end\ns9r0,0.05,0.25\n")
    code = main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--simulate", "2", "--top", "4", *common])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("dtsim plan: error: 'failure_trace' must be a trace of workers "
                             "s{stage}r{replica} that a listed plan has")
    assert "(s9r0: not in any of the 4 plans)" in err[0]


@pytest.mark.parametrize("schedule", ["1f1b-dynamic", "interleaved", "swarm", "async"])
def test_a_plan_runs_1f1b_or_gpipe_and_says_so_before_reading_it(tmp_path, capsys, schedule):
    """dtsim train --plan runs over the plan's network, whose DES runs fixed device programs:
    1f1b or gpipe. Any other schedule is one line naming 'schedule' and those two, before
    the plan or the profiles are read (a missing plan file is not what is reported). Before,
    build_plan took 1f1b-dynamic ('1f1b, gpipe or 1f1b-dynamic with a plan', its refusal of
    the others) and the config then refused it as 'gpipe or 1f1b for a plan over a network',
    after the profiles were read: two rules that disagreed."""
    assert main(["train", "--plan", str(tmp_path / "nothing.json"), "--model", "OPT-350",
                 "--steps", "1", "--replications", "1", "--schedule", schedule]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dtsim train: error: 'schedule' must be 1f1b or gpipe with --plan (a plan "
                   f"runs over its network, as the frameworks' fixed device programs): "
                   f"'{schedule}'")
    shipped = load_profiles()
    with pytest.raises(ConfigError, match="'schedule' must be 1f1b or gpipe with a plan over "
                                          "its network: '1f1b-dynamic'"):
        build_plan(read_plan("sim/profiles/data/runs/mit-N2_D1.json"), shipped,
                   model="OPT-350", schedule="1f1b-dynamic", network=True)


def test_dtsim_plan_refuses_a_schedule_no_plan_runs(capsys):
    """dtsim plan --schedule 1f1b-dynamic (which its help offered) was taken, every plan was
    then refused by the DES over the plan's network, and the command said the fleet could
    not hold the model ('fleet' must be GPUs enough ...): now the schedule is refused."""
    assert main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
                 "--global-batch-size", "8", "--simulate", "0", "--top", "1",
                 "--schedule", "1f1b-dynamic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dtsim plan: error: 'schedule' must be one of 1f1b, gpipe")
    assert err.endswith(": '1f1b-dynamic'")
