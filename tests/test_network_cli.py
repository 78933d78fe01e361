"""``dtsim network``: finish times in the file's order, utilisation, one-line refusals."""

from __future__ import annotations

import json

import pytest

from sim.cli import main


def _flows(tmp_path, text):
    p = tmp_path / "flows.csv"
    p.write_text(text)
    return str(p)


def test_json_gives_finish_times_in_file_order_and_link_utilisation(tmp_path, capsys):
    """--json: 'finish' in the file's order (two flows sharing a host link, one across racks)."""
    f = _flows(tmp_path, "src,dst,size,start\n0,5,100,0\n1,5,100,0\n2,30,50,1\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=20", "--flows", f, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finish"] == pytest.approx([2.1, 2.1, 2.6], rel=1e-12)
    links = {x["link"]: x for x in out["links"]}
    assert links["rack0->5"]["bytes"] == 200.0
    assert links["rack0->5"]["utilisation"] == pytest.approx(200.0 / (100.0 * 2.6))
    assert out["makespan"] == pytest.approx(2.6)


def test_text_table_and_full_solver_agree(tmp_path, capsys):
    """The table prints each flow; --solver full gives the same finish times."""
    f = _flows(tmp_path, "src,dst,size,start\n0,3,10,0\n1,3,30,0.5\n2,0,5,0.2\n")
    args = ["network", "--topology", "tree:racks=2,hosts=2", "--flows", f, "--nic", "20"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "3 flows on tree:racks=2,hosts=2 (maxmin sharing)" in text
    assert main([*args, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["finish"]
    assert main([*args, "--json", "--solver", "full"]) == 0
    assert json.loads(capsys.readouterr().out)["finish"] == pytest.approx(a, rel=1e-12)


@pytest.mark.parametrize("rows,message", [
    ("0,nope,1,0", "'flows' must be rows whose dst is a node of the network"),
    ("0,1,-1,0", "'flows' must be rows with a finite size >= 0"),
    ("0,0,1,0", "'flows' must be rows whose dst differs from src"),
])
def test_bad_rows_are_one_line_exit_2(tmp_path, capsys, rows, message):
    """Unknown node, negative size, a flow to itself: one line, exit 2."""
    f = _flows(tmp_path, "src,dst,size,start\n" + rows + "\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=2", "--flows", f]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_graph_without_bandwidth_is_refused(tmp_path, capsys):
    """A graph whose routes cross no finite bandwidth has nothing to share: refused."""
    f = _flows(tmp_path, "src,dst,size,start\n0,1,1,0\n")
    assert main(["network", "--topology", "ring:n=4", "--flows", f]) == 2
    assert "'topology' must be a graph with a finite bandwidth" in capsys.readouterr().err
    assert main(["network", "--topology", "ring:n=4", "--flows", f, "--nic", "2"]) == 0


def test_train_over_a_network_cli(tmp_path, capsys):
    """dtsim train --network: TP ranks share each host's NIC in the all-reduce; off is faster."""
    base = ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "4",
            "--steps", "2", "--schedule", "gpipe", "--param-size", "40",
            "--network", "tree:racks=1,hosts=4,host_latency=0.025,uplink_latency=0",
            "--nic", "5", "--tensor-parallel", "4", "--replications", "1", "--json"]
    assert main(base) == 0
    on = json.loads(capsys.readouterr().out)["step_time_mean"]
    assert main([*base, "--contention", "off"]) == 0
    off = json.loads(capsys.readouterr().out)["step_time_mean"]
    # (m/r + L - 1)(tf + tb) + 2(L-1) l + 2(k-1)(l + t S/(k B)) with S = 40/4 per rank
    sched = (2 + 1) * 3.0 + 2 * 0.05
    assert on == pytest.approx(sched + 2 * (0.05 + 4 * 10 / (2 * 5)), rel=1e-9)
    assert off == pytest.approx(sched + 2 * (0.05 + 10 / (2 * 5)), rel=1e-9)


def test_train_network_options_need_a_network(capsys):
    """--nic, --contention... without --network have no effect: refused in one line."""
    assert main(["train", "--nic", "5"]) == 2
    assert "'nic' must be given only with --network" in capsys.readouterr().err
    assert main(["train", "--contention", "off"]) == 2
    assert "'contention' must be given only with --network" in capsys.readouterr().err


def test_pipeline_queueing_over_a_network_cli(capsys):
    """dtsim pipeline --queueing --network: a stage's two replicas on one host share its link."""
    base = ["pipeline", "--queueing", "--stages", "3", "--replicas", "2", "--stage-time", "1",
            "--arrival", "fixed", "--rate", "1.5", "--routing", "round-robin",
            "--transfer-size", "2", "--network", "tree:racks=1,hosts=6,host_bandwidth=2",
            "--network-nodes", "0,0,1,1,2,2",
            "--availability", "1", "--microbatches", "60", "--replications", "2", "--json"]
    assert main(base) == 0
    on = json.loads(capsys.readouterr().out)["latency_mean"]
    assert main([*base, "--contention", "off"]) == 0
    off = json.loads(capsys.readouterr().out)["latency_mean"]
    # alone, a hop is the route latency 0.05 + 0.05 plus 2 / 2: 3 passes and 2 hops
    assert off == pytest.approx(3 * 1.0 + 2 * (0.1 + 1.0), rel=1e-12)
    assert on > off + 0.1  # transfers every 2/3 time unit, each 1 alone: they overlap
