"""Units in every option and file that takes a size, rate or latency: same run as the plain numbers.

Each test gives a run with units and the same run with the plain numbers they
stand for (bytes, B/s, s): the results are equal bit for bit, and the JSON's
``units`` object names the units and echoes what was typed. Without units
support each run with units is refused (argparse's ``invalid float value``, a
file's "not a number"), so every test here fails without it.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

import topologies
from sim.cli import main
from sim.network import build_network, simulate_flows
from sim.network.curves import parse_curve
from sim.profiles import fleet_from_data, gpus_from_data, model_from_data, network_from_data
from sim.units import parse

#: Keys that measure the machine, not the model, and the spec as typed.
_WALL = {"wall_time", "stage_crossings_per_second", "microbatches_per_second", "seconds",
         "topology", "run_seconds", "run_cpu_seconds", "run_peak_rss_mib"}


def _run(capsys, argv, *, status=0):
    assert main(argv) == status, capsys.readouterr().err
    cap = capsys.readouterr()
    return cap.out, cap.err


def _json(capsys, argv):
    out, err = _run(capsys, [*argv, "--json"])
    return json.loads(out), err


def _results(d):
    return {k: v for k, v in d.items() if k != "units" and k not in _WALL}


def _without(argv, option):
    """``argv`` less ``option`` and its value (an option typed twice is refused: audit 7)."""
    k = argv.index(option)
    return [*argv[:k], *argv[k + 2:]]


def _same_run(capsys, with_units, plain):
    """Both runs succeed and print the same numbers; returns the first JSON (with units)."""
    a, _ = _json(capsys, with_units)
    b, _ = _json(capsys, plain)
    assert _results(a) == _results(b)
    assert b["units"]["given"] == {}
    return a


TRAIN = ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "2", "--steps",
         "2", "--replications", "1", "--seed", "3"]


def test_train_network_options_take_units(capsys):
    """--param-size, --activation-size, --bucket-size, --nic with units == their bytes and B/s."""
    net = ["--network", "tree:racks=1,hosts=4,host_bandwidth=100Gbit/s,uplink_bandwidth=400Gbit/s,"
           "host_latency=2us,uplink_latency=5us"]
    a = _same_run(capsys, [*TRAIN, *net, "--param-size", "1.4GB", "--activation-size", "16MiB",
                           "--bucket-size", "256MiB", "--nic", "25Gbps"],
                  [*TRAIN, "--network", "tree:racks=1,hosts=4,host_bandwidth=12500000000,"
                   "uplink_bandwidth=50000000000,host_latency=0.000002,uplink_latency=0.000005",
                   "--param-size", "1400000000", "--activation-size", "16777216",
                   "--bucket-size", "268435456", "--nic", "3125000000"])
    given = a["units"]["given"]
    assert given["param_size"] == {"text": "1.4GB", "value": 1.4e9, "unit": "B", "as": "1.4GB"}
    assert given["nic"] == {"text": "25Gbps", "value": 3.125e9, "unit": "B/s", "as": "3.125GB/s"}
    assert given["activation_size"]["as"] == "16MiB"
    assert a["units"]["base"] == {"size": "B", "rate": "B/s", "time": "s"}
    assert a["units"]["keys"]["step_time_mean"] == "s"
    assert a["units"]["keys"]["throughput"] == "microbatch/s"
    assert a["step_time_mean"] > 0


def test_train_link_options_take_units(capsys):
    """--bandwidth and --latency (one per hop) with units == B/s and s; the text names them."""
    three = ["--stages", "3"]
    t2 = _without(TRAIN, "--stages")
    _same_run(capsys, [*t2, *three, "--param-size", "2GB", "--activation-size", "1MB",
                       "--bandwidth", "25Gbps", "--latency", "1ms,250us"],
              [*t2, *three, "--param-size", "2e9", "--activation-size", "1e6",
               "--bandwidth", "3.125e9", "--latency", "0.001,0.00025"])
    out, err = _run(capsys, [*TRAIN, "--param-size", "2GB", "--bandwidth", "25Gbps"])
    assert err == ""
    assert "units: --param-size 2GB = 2GB (2e+09 B); --bandwidth 25Gbps = 3.125GB/s" in out
    assert "transfers: --param-size 2GB over --bandwidth, --latency (links 3.125GB/s, latency 0)" \
           ": 2GB at 3.125GB/s takes 0.64 s" in out
    assert "step time (s)" in out


def test_train_plain_sizes_over_default_bandwidth_get_the_hint(capsys):
    """The issue's case: --param-size 1.4e9 on a tree of 100 B/s says what one transfer takes."""
    out, err = _run(capsys, [*TRAIN, "--network", "tree:racks=1,hosts=4", "--param-size", "1.4e9"])
    assert err == ""  # all plain: one consistent (if unusual) set of units, no warning
    assert ("transfers: --param-size 1.4GB over --network tree:racks=1,hosts=4 (links 100B/s to "
            "400B/s, latency 50ms to 500ms): 1.4GB at 100B/s takes 1.4e+07 s") in out


@pytest.mark.parametrize("extra,warned", [
    (["--param-size", "1.4GB"], True),                    # a size with a unit, links plain
    (["--param-size", "1.4e9"], False),                   # all plain
    (["--param-size", "50", "--nic", "10Gbit/s"], True),  # a rate with a unit, sizes plain
    (["--param-size", "0", "--nic", "10Gbit/s"], False),  # nothing moves: the NIC times nothing
])
def test_a_transfer_time_mixing_units_and_plain_numbers_is_warned_once(capsys, extra, warned):
    """One 'warning' line on stderr naming both sides and the time it makes; the run goes on."""
    out, err = _run(capsys, [*TRAIN, "--network", "tree:racks=1,hosts=4", *extra])
    lines = err.splitlines()
    assert len(lines) == (1 if warned else 0)
    if warned:
        assert lines[0].startswith("dtsim train: warning: a transfer time mixes numbers with "
                                   "units (")
        assert "a number without a unit is in B, B/s or s" in lines[0]
    assert "throughput" in out


def test_the_warning_names_the_size_the_rate_and_the_time():
    """mixed_message: 2GB over the tree's plain 100 B/s takes 2e7 s."""
    from sim.commands._units import Term, mixed_message
    from sim.units import Quantity, parse_quantity

    msg = mixed_message([Term("--param-size", parse_quantity("2GB", "size", "p")),
                         Term("the network's bandwidth", Quantity(100.0, "rate", "100")),
                         Term("the network's latency", Quantity(0.0, "time", "0"))])
    assert msg == ("a transfer time mixes numbers with units (--param-size 2GB (2e+09 B)) and "
                   "without (the network's bandwidth 100 (B/s)); a number without a unit is in "
                   "B, B/s or s, so 2GB at 100B/s takes 2e+07 s: give every size, bandwidth and "
                   "latency with a unit, or none")
    assert mixed_message([Term("--param-size", parse_quantity("2GB", "size", "p")),
                          Term("--bandwidth", parse_quantity("1GB/s", "rate", "b"))]) is None


def test_units_with_time_need_a_one_second_time_unit(capsys):
    """--hour 60 (minutes) with a rate in /s is refused naming --hour; a size alone is fine."""
    _, err = _run(capsys, [*TRAIN, "--hour", "60", "--param-size", "1GB", "--bandwidth",
                           "10Gbit/s"], status=2)
    assert err.strip() == ("dtsim train: error: 'hour' must be 3600 (time units of one second) "
                           "when a rate or time is given with a unit (10Gbit/s): 60.0")
    _run(capsys, [*TRAIN, "--hour", "60", "--param-size", "1GB", "--bandwidth", "1e9"])


def test_pipeline_options_take_units(capsys):
    """--transfer-size, --bandwidth, --latency; and --nic over a --network (queueing)."""
    base = ["pipeline", "--stages", "3", "--replications", "2", "--microbatches", "200",
            "--stage-time", "1", "--engine", "des", "--seed", "4"]
    _same_run(capsys, [*base, "--transfer-size", "20MB", "--bandwidth", "1GB/s", "--latency",
                       "5ms"],
              [*base, "--transfer-size", "2e7", "--bandwidth", "1e9", "--latency", "0.005"])
    q = ["pipeline", "--queueing", "--stages", "3", "--replicas", "2", "--stage-time", "1",
         "--rate", "0.5", "--routing", "least-loaded", "--seed", "38", "--replications", "2",
         "--microbatches", "300"]
    a = _same_run(capsys, [*q, "--network", "tree:racks=2,hosts=8,host_bandwidth=1Gbit/s,"
                           "uplink_bandwidth=4Gbit/s,host_latency=50ms,uplink_latency=0.5s",
                           "--transfer-size", "20MB", "--nic", "800Mbit/s"],
                  [*q, "--network", "tree:racks=2,hosts=8,host_bandwidth=1.25e8,"
                   "uplink_bandwidth=5e8,host_latency=0.05,uplink_latency=0.5",
                   "--transfer-size", "2e7", "--nic", "1e8"])
    assert a["units"]["keys"]["latency_mean"] == "s"
    assert a["units"]["given"]["nic"]["value"] == 1e8


def test_gossip_size_and_nic_take_units(capsys):
    """--size and --nic with units == bytes and B/s (contention on a ring with finite links)."""
    g = ["gossip", "--protocol", "async", "--rounds", "3", "--replications", "2", "--seed", "5"]
    a = _same_run(capsys, [*g, "--topology", "ring:n=8,bandwidth=1MB/s,latency=1ms", "--size",
                           "250kB", "--nic", "2MB/s"],
                  [*g, "--topology", "ring:n=8,bandwidth=1e6,latency=0.001", "--size", "250000",
                   "--nic", "2e6"])
    assert a["units"]["keys"] == {"time": "s"}
    assert a["units"]["given"]["size"]["value"] == 250000.0


def test_learners_size_bandwidth_and_latency_take_units(capsys):
    """dtsim learners (issue 37): --size, --bandwidth, --latency with units == bytes, B/s, s;
    its JSON names the units of its times and fractions."""
    g = ["learners", "--learners", "3", "--chips", "4", "--every", "5", "--steps", "20",
         "--mtbf", "500", "--replace-time", "20", "--chip-download", "2", "--replications", "2",
         "--seed", "2"]
    a = _same_run(capsys, [*g, "--size", "2GB", "--bandwidth", "10Gbit/s", "--latency", "50ms"],
                  [*g, "--size", "2e9", "--bandwidth", "1.25e9", "--latency", "0.05"])
    assert a["units"]["keys"]["training_time"] == "s"
    assert a["units"]["keys"]["goodput_fraction"] == "1"
    assert a["units"]["given"]["bandwidth"]["as"] == "1.25GB/s"


def test_train_diloco_figures_name_their_units(capsys):
    """dtsim train --sync diloco (issue 37): the bytes sent and the utilisation are in the
    units object; --param-size with a unit is the same run."""
    g = [*_without(_without(_without(TRAIN, "--stages"), "--replicas"), "--steps"), "--stages",
         "1", "--replicas", "2", "--steps", "4", "--forward-time", "0.1",
         "--sync", "diloco:every=2"]
    a = _same_run(capsys, [*g, "--param-size", "1GB", "--bandwidth", "1GB/s", "--latency",
                           "10ms"],
                  [*g, "--param-size", "1e9", "--bandwidth", "1e9", "--latency", "0.01"])
    keys = a["units"]["keys"]
    assert keys["wan_bytes_sent"] == keys["allreduce_bytes_sent"] == "B"
    assert keys["compute_utilisation"] == keys["goodput_fraction"] == "1"
    assert keys["outer_exposed"] == "s"
    # 2 outer syncs, each a ring of 2 groups: 2 (2 - 1) / 2 of 1 GB sent a sync
    assert a["wan_bytes_sent"] == pytest.approx(2 * 1e9)


def _flows(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_network_flows_csv_and_nic_take_units(tmp_path, capsys):
    """A flows CSV's size and start, and --nic, with units == bytes, s, B/s; tables name units."""
    u = _flows(tmp_path, "u.csv", "src,dst,size,start\n0,5,1GB,0\n1,5,800Mbit,10ms\n2,30,50MB,1s\n")
    p = _flows(tmp_path, "p.csv", "src,dst,size,start\n0,5,1e9,0\n1,5,1e8,0.01\n2,30,5e7,1\n")
    spec = "tree:racks=2,hosts=20,host_bandwidth=10Gbit/s,uplink_bandwidth=40Gbit/s," \
           "host_latency=5us,uplink_latency=10us"
    plain = "tree:racks=2,hosts=20,host_bandwidth=1.25e9,uplink_bandwidth=5e9," \
            "host_latency=5e-6,uplink_latency=1e-5"
    a = _same_run(capsys, ["network", "--topology", spec, "--flows", u, "--nic", "25Gbps"],
                  ["network", "--topology", plain, "--flows", p, "--nic", "3.125e9"])
    assert a["units"]["keys"]["finish"] == "s" and a["units"]["keys"]["links[].bytes"] == "B"
    out, err = _run(capsys, ["network", "--topology", spec, "--flows", u, "--nic", "25Gbps"])
    assert err == ""
    assert "units: --nic 25Gbps = 3.125GB/s (3.125e+09 B/s)" in out
    assert "size (B)" in out and "capacity (B/s)" in out and "finish (s)" in out


def test_network_flows_with_units_on_plain_links_are_warned(tmp_path, capsys):
    """A flows file in GB on the tree's default 100 B/s: one warning with the 1e7 s it takes."""
    u = _flows(tmp_path, "u.csv", "src,dst,size,start\n0,5,1GB,0\n")
    _, err = _run(capsys, ["network", "--topology", "tree:racks=2,hosts=20", "--flows", u])
    assert len(err.splitlines()) == 1
    assert "1GB at 100B/s takes 1e+07 s" in err


@pytest.mark.parametrize("row,rule", [
    ("0,5,2GB/h,0", "rows whose size is a size, not a rate"),
    ("0,5,10 parsecs,0", "rows whose size is a size: bytes"),
    ("0,5,1GB,2GB", "rows whose start is a time, not a size"),
])
def test_network_flows_bad_units_are_one_line(tmp_path, capsys, row, rule):
    """A flows row with a wrong unit: one line naming the file's line, exit 2."""
    f = _flows(tmp_path, "b.csv", "src,dst,size,start\n" + row + "\n")
    _, err = _run(capsys, ["network", "--topology", "tree:racks=2,hosts=20", "--flows", f],
                  status=2)
    assert len(err.splitlines()) == 1 and f"'flows' must be {rule}" in err and "b.csv:2" in err


def _finish(spec):
    flows = [(0, 2, 1e6, 0.0), (1, 2, 5e5, 0.0)]
    return list(simulate_flows(build_network(spec), flows).finish)


def test_graph_files_take_link_attributes_with_units(tmp_path):
    """Edge lists (positional, key=value), GraphML and GML with units give the plain graph's times."""
    plain = tmp_path / "plain.edges"
    plain.write_text("0 1 0.001 1e8\n1 2 0.002 1.25e8\n")
    positional = tmp_path / "pos.edges"
    positional.write_text("0 1 1ms 100MB/s\n1 2 2ms 1Gbit/s\n")
    keyed = tmp_path / "key.edges"
    keyed.write_text("0 1 latency=1ms bandwidth=100MB/s\n1 2 latency=2000us bandwidth=1Gbps\n")
    G = nx.Graph()
    G.add_edge(0, 1, latency="1ms", bandwidth="100MB/s")
    G.add_edge(1, 2, latency="2ms", bandwidth="1Gbit/s")
    nx.write_graphml(G, tmp_path / "g.graphml")
    nx.write_gml(G, tmp_path / "g.gml")
    want = _finish(str(plain))
    for f in (positional, keyed, tmp_path / "g.graphml", tmp_path / "g.gml"):
        assert _finish(str(f)) == want, f
    units = topologies.build(str(positional)).graph["units"]
    assert units["bandwidth"][0].text == "100MB/s" and units["bandwidth"][1] is None


def test_node_nics_in_a_graph_file_take_units(tmp_path):
    """A node's nic / egress / ingress written with a unit is that many B/s."""
    G = nx.Graph()
    G.add_node(0, nic="8Mbit/s")
    G.add_node(1, egress="1MB/s", ingress="2MB/s")
    G.add_edge(0, 1, latency=0.0, bandwidth="1GB/s")
    nx.write_graphml(G, tmp_path / "n.graphml")
    net = build_network(str(tmp_path / "n.graphml"))
    caps = dict(zip(net.resource_names, net.capacity, strict=True))
    assert caps["egress:0"] == caps["ingress:0"] == 1e6
    assert caps["egress:1"] == 1e6 and caps["ingress:1"] == 2e6


def test_graph_file_units_of_the_wrong_kind_are_refused(tmp_path):
    """latency=2GB in a file: one 'topology' line naming the edge and the rule."""
    f = tmp_path / "w.edges"
    f.write_text("0 1 latency=2GB\n")
    with pytest.raises(Exception) as exc:
        topologies.build(str(f))
    assert str(exc.value).startswith("'topology' must be a graph whose edge latency values are a "
                                     "time, not a size")


@pytest.mark.parametrize("with_units,plain", [
    ("tree:racks=2,hosts=3,host_bandwidth=10Gbit/s,host_latency=5us",
     "tree:racks=2,hosts=3,host_bandwidth=1250000000.0,host_latency=5e-06"),
    ("ring:n=5,bandwidth=1MiB/s,latency=.5ms", "ring:n=5,bandwidth=1048576.0,latency=0.0005"),
    ("geo:latency_matrix=0/40ms;40ms/0,intra_region_bandwidth=8Gbps",
     "geo:latency_matrix=0/0.04;0.04/0,intra_region_bandwidth=1e9"),
    ("geo:regions=2,bandwidth_matrix=0/10Gbit/s;10Gbit/s/0,nic=25Gbps",
     "geo:regions=2,bandwidth_matrix=0/1250000000.0;1250000000.0/0,nic=3125000000.0"),
    ("datacenter:regions=1,racks=2,hosts=2,intra_rack_bandwidth=1GB/s,inter_rack_latency=1ms",
     "datacenter:regions=1,racks=2,hosts=2,intra_rack_bandwidth=1e9,inter_rack_latency=0.001"),
])
def test_topology_spec_parameters_take_units(with_units, plain):
    """A *bandwidth* parameter takes a rate, a *latency* one a time (a matrix entry by entry)."""
    a, b = topologies.build(with_units), topologies.build(plain)
    assert list(a.nodes(data=True)) == list(b.nodes(data=True))
    assert list(a.edges(data=True)) == list(b.edges(data=True))
    assert topologies.parse_spec(with_units) == topologies.parse_spec(plain)


@pytest.mark.parametrize("spec,rule", [
    ("tree:host_bandwidth=10GB", "a spec whose host_bandwidth is a rate, not a size"),
    ("tree:host_latency=2GB/s", "a spec whose host_latency is a time, not a rate"),
    ("ring:n=4,bandwidth=10parsecs", "a spec whose bandwidth is a rate: bytes per second"),
])
def test_topology_spec_units_of_the_wrong_kind_are_refused(spec, rule):
    """One 'topology' line naming the parameter, the rule and the spec."""
    with pytest.raises(Exception) as exc:
        topologies.parse_spec(spec)
    assert str(exc.value).startswith(f"'topology' must be {rule}")
    assert str(exc.value).endswith(f": {spec!r}")


def test_profile_files_take_sizes_rates_and_times_with_units():
    """Network/fleet links, GPU memory, model activation sizes: text with units == the numbers."""
    end = {"gpu": "A", "zone": "z"}
    u = {"links": [{"src": end, "dst": end, "flows": 2, "bandwidth": "10Gbit/s", "latency": "5us"},
                   {"src": end, "dst": end, "curve": {"coefficients": [1.0], "min_bytes": "64KiB",
                                                      "max_bytes": "1GiB"}}]}
    p = {"links": [{"src": end, "dst": end, "flows": 2, "bandwidth": 1.25e9, "latency": 5e-6},
                   {"src": end, "dst": end, "curve": {"coefficients": [1.0], "min_bytes": 65536,
                                                      "max_bytes": 2**30}}]}
    assert network_from_data(u) == network_from_data(p)
    nodes = [{"gpu": "A", "gpus_per_node": 8, "zone": "z", "count": 2}]
    assert fleet_from_data({"nodes": nodes, **u}) == fleet_from_data({"nodes": nodes, **p})
    assert gpus_from_data({"gpus": [{"name": "A", "memory_bytes": "80GiB", "overhead_bytes": "3GB",
                                     "overhead_tp1_bytes": "2GB"}]}) == \
        gpus_from_data({"gpus": [{"name": "A", "memory_bytes": 80 * 2**30, "overhead_bytes": 3e9,
                                  "overhead_tp1_bytes": 2e9}]})
    layer = {"params": 10, "activation_bytes": "4KiB", "activation_memory_bytes": "8kB"}
    doc = {"model": "M", "layers": 1, "sizes": [{"tp": 1, "layers": [layer]}],
           "times": [{"gpu": "A", "microbatch_size": 1, "tp": 1, "layers": [[1.0, 2.0]]}]}
    m = model_from_data(doc)
    assert m.layer_sizes(1)[0].activation_bytes == 4096 and \
        m.layer_sizes(1)[0].activation_memory_bytes == 8000
    with pytest.raises(Exception) as exc:
        network_from_data({"links": [{"src": end, "dst": end, "bandwidth": "10Gbit"}]})
    assert str(exc.value) == ("'network' must be a rate, not a size (bytes per second, or a number "
                              "and a rate unit: 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s) at "
                              "network.links[0].bandwidth (the link A@z -> A@z): '10Gbit'")


def test_a_profiles_layer_times_take_time_units():
    """A model profile's times rows, as every time of the profile files: "1.9ms" is the number
    0.0019 read by sim.units (the same profile as the plain numbers); text without a unit or of
    another kind, negative or not finite, is refused naming the row and element. Before, any
    text in a row was refused ('[forward(, backward(, optimizer))] seconds')."""
    layer = {"params": 10, "activation_bytes": 4096, "activation_memory_bytes": 8192}

    def doc(row):
        return {"model": "M", "layers": 1, "sizes": [{"tp": 1, "layers": [layer]}],
                "times": [{"gpu": "A", "microbatch_size": 1, "tp": 1, "layers": [row]}]}

    assert model_from_data(doc(["1.9ms", "3.8 ms", "400us"])) == \
        model_from_data(doc([parse("1.9ms", "time", "t"), parse("3.8ms", "time", "t"),
                             parse("400us", "time", "t")]))
    assert model_from_data(doc(["2s"])).times[0][1][0].forward == 2.0
    assert model_from_data(doc([0.5, "1s"])).times[0][1][0].backward == 1.0
    for bad, rule in [("0.002", "a time: seconds, or a number and a time unit"),
                      ("2GB", "a time, not a size"), ("-1ms", "a time >= 0"),
                      ("1e400s", "a finite time"), ("0.2 m", "a time with a known unit")]:
        with pytest.raises(Exception) as exc:
            model_from_data(doc([1.0, bad]), "m.json")
        assert str(exc.value).startswith(f"'model' must be {rule}")
        assert str(exc.value).endswith(f" at m.json.times[0].layers[0][1]: '{bad}'")


def test_curve_text_takes_units():
    """polylog2's size_unit/bandwidth_unit and a table's points with units == the numbers."""
    assert parse_curve("table:1kB=500MB/s/1MB=5GB/s/1GB=10GB/s") == \
        parse_curve("table:1e3=5e8/1e6=5e9/1e9=1e10")
    assert parse_curve("polylog2:c=-0.0024/0.1409/1.1168,size_unit=1MB,bandwidth_unit=1GB/s,"
                       "min_size=64KiB") == \
        parse_curve("polylog2:c=-0.0024/0.1409/1.1168,size_unit=1e6,bandwidth_unit=1e9,"
                    "min_size=65536")


@pytest.mark.parametrize("command,option,unit", [
    ("train", "--param-size", "bytes"), ("train", "--activation-size", "bytes"),
    ("train", "--bucket-size", "bytes"), ("train", "--bandwidth", "B/s"),
    ("train", "--nic", "B/s"), ("train", "--latency", "s, or with a unit"),
    ("train", "--network", "B/s"), ("train", "--topology", "B/s"),
    ("pipeline", "--transfer-size", "bytes"), ("pipeline", "--bandwidth", "B/s"),
    ("pipeline", "--latency", "s, or with a unit"), ("pipeline", "--nic", "B/s"),
    ("pipeline", "--network", "B/s"), ("gossip", "--size", "bytes"), ("gossip", "--nic", "B/s"),
    ("gossip", "--topology", "B/s"), ("network", "--nic", "B/s"), ("network", "--flows", "bytes"),
    ("network", "--topology", "B/s"), ("learners", "--size", "bytes"),
    ("learners", "--bandwidth", "B/s"), ("learners", "--latency", "s, or with a unit"),
])
def test_help_names_the_unit_of_every_option(capsys, command, option, unit):
    """--help: each size, rate and latency option says its unit and shows a form with one."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text[text.index("options:"):]
    start = text.index(f" {option} ")
    entry = text[start:start + 400]
    assert unit in entry, entry
    assert any(x in entry for x in ("GB", "Gbit", "Gbps", "ms", "us")), entry


@pytest.mark.parametrize("text", ["100", "1e9", "0.5", " 7 ", "inf", "1e-300", "3.0000000000000004"])
def test_plain_numbers_reach_the_config_exactly_as_float_read_them(text):
    """A plain option value is float(text), bit for bit (so no printed number moves)."""
    from sim.cli import build_parser

    args = build_parser("train").parse_args(["train", "--param-size", text, "--bandwidth", text])
    assert args.param_size == float(text) and args.bandwidth == float(text)
    assert parse(text, "size", "x") == float(text)


def test_an_inapplicable_option_with_a_unit_is_refused_as_typed(capsys):
    """--nic 10Gbit/s without --network: the refusal shows '10Gbit/s', a plain 5 stays 5.0."""
    _, err = _run(capsys, ["train", "--nic", "10Gbit/s"], status=2)
    assert err.strip() == "dtsim train: error: 'nic' must be given only with --network: '10Gbit/s'"
    _, err = _run(capsys, ["train", "--nic", "5"], status=2)
    assert err.strip() == "dtsim train: error: 'nic' must be given only with --network: 5.0"


@pytest.mark.parametrize("argv, shown", [
    (["train", "--bandwidth", "0Gbit/s"], "'bandwidth' must be > 0: '0Gbit/s'"),
    (["train", "--mtbf", "0ms"], "'mtbf' must be > 0: '0ms'"),
    (["train", "--latency", "1e300h"], "): '1e300h'"),
    (["train", "--stages", "2", "--latency", "1ms,2ms,3ms"],
     "'latency' must be one value or 1 values: '1ms,2ms,3ms'"),
    (["train", "--replicas", "2", "--strategy", "checkpoint-restart:checkpoint_bandwidth=0GB/s"],
     "or none: '0GB/s'"),
    (["pipeline", "--transfer-size", "1GB", "--bandwidth", "0Gbit/s"],
     "'bandwidth' must be > 0: '0Gbit/s'"),
    (["gossip", "--nic", "0Gbit/s"], "'nic' must be > 0: '0Gbit/s'"),
    (["learners", "--bandwidth", "0Gbit/s"], "'bandwidth' must be > 0: '0Gbit/s'"),
    (["learners", "--grace", "5min"], "'grace' must be 0 without quorum: '5min'"),
    (["learners", "--step-time", "0ms"], "'step_time' must be > 0: '0ms'"),
])
def test_an_option_with_a_unit_the_config_refuses_is_shown_as_typed(capsys, argv, shown):
    """(smallfix2) --bandwidth 0Gbit/s was refused as \"'bandwidth' must be > 0: 0.0\" and
    --latency 1e300h as '... at most 1e+300): 3.6e+303': the value the library was given, in
    B/s or s, not what was typed. The refusal shows the text typed, as the refusals of an
    inapplicable option (above) and of a bad unit already did; a plain number stays as read."""
    _, err = _run(capsys, argv, status=2)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(shown), lines
    plain = {"0Gbit/s": "0", "0ms": "0", "0GB/s": "0"}
    if argv[-1].split("=")[-1] in plain:  # the same refusal of a plain number: its float
        _, err = _run(capsys, [*argv[:-1], argv[-1].replace(argv[-1].split("=")[-1], "0")],
                      status=2)
        assert err.strip().endswith(": 0.0"), err


@pytest.mark.parametrize("argv, line", [
    (["topologies", "ring:n=4,bandwidth=0Gbit/s"],
     "dtsim topologies: error: 'topology' must be a valid ring spec ('bandwidth' must be > 0: "
     "'0Gbit/s'): 'ring:n=4,bandwidth=0Gbit/s'"),
    (["topologies", "ring:bandwidth=0Gbit/s", "--nodes", "4"],  # n from --nodes, as resolved
     "dtsim topologies: error: 'topology' must be a valid ring spec ('bandwidth' must be > 0: "
     "'0Gbit/s'): 'ring:bandwidth=0Gbit/s,n=4'"),
    (["topologies", "tree:racks=2,hosts=2,host_bandwidth=0Gbit/s,host_latency=5us"],
     "dtsim topologies: error: 'topology' must be a valid tree spec ('host_bandwidth' must be "
     "> 0: '0Gbit/s'): 'tree:racks=2,hosts=2,host_bandwidth=0Gbit/s,host_latency=5us'"),
    (["topologies", "geo:regions=2,hosts=1,latency_matrix=0/1ms;2ms/0"],
     "dtsim topologies: error: 'topology' must be a valid geo spec ('latency_matrix' must be a "
     "2 x 2 symmetric matrix with finite entries >= 0 and zero diagonal: '0/1ms;2ms/0'): "
     "'geo:regions=2,hosts=1,latency_matrix=0/1ms;2ms/0'"),
    (["topologies", "ring:n=2,bandwidth=1Gbit/s"],  # another key refused: its value as read
     "dtsim topologies: error: 'topology' must be a valid ring spec ('n' must be an integer "
     ">= 3: 2): 'ring:n=2,bandwidth=1Gbit/s'"),
    (["train", "--topology", "ring:n=4,bandwidth=0Gbit/s"],
     "dtsim train: error: 'topology' must be a valid ring spec ('bandwidth' must be > 0: "
     "'0Gbit/s'): 'ring:n=4,bandwidth=0Gbit/s'"),
    (["train", "--replicas", "2", "--network", "ring:n=4,bandwidth=0Gbit/s"],
     "dtsim train: error: 'network' must be a valid ring spec ('bandwidth' must be > 0: "
     "'0Gbit/s'): 'ring:n=4,bandwidth=0Gbit/s'"),
    (["topologies", "ring:n=4,bandwidth=0"],  # a plain number: as before
     "dtsim topologies: error: 'topology' must be a valid ring spec ('bandwidth' must be > 0: "
     "0): 'ring:n=4,bandwidth=0'"),
])
def test_a_topology_spec_with_a_unit_is_refused_as_typed(capsys, argv, line):
    """(smallfix3) A spec's link value with a unit the family refuses was shown as read, in
    B/s or s, in the spec and in the key's refusal: \"('bandwidth' must be > 0: 0.0):
    'ring:n=4,bandwidth=0.0'\". Both as typed now, as the options' refusals (above)."""
    _, err = _run(capsys, argv, status=2)
    assert err.strip() == line


def test_a_topology_specs_text_in_outputs_is_unchanged(capsys):
    """The spec as resolved (in B/s) stays what the outputs print: only refusals changed."""
    d, _ = _json(capsys, ["topologies", "ring:n=4,bandwidth=1Gbit/s"])
    assert d["spec"] == "ring:n=4,bandwidth=125000000.0"
    assert topologies.build("ring:n=4,bandwidth=1Gbit/s").graph["spec"] == d["spec"]


@pytest.mark.parametrize("argv, line", [
    (["--preemption-notice", "1e300h"],
     "'preemption_notice' must be 0 without preemptions (a spot model or a replayed trace): "
     "'1e300h'"),
    (["--preemption-notice", "aws", "--mtbf", "100"],
     "'preemption_notice' must be 0 without a strategy (a strategy decides what a notice is "
     "for): 'aws'"),
    (["--preemption-notice", "1e300h", "--mtbf", "100", "--replicas", "2", "--strategy",
      "checkpoint-restart"],
     "'preemption_notice' must be small enough that the run's time stays finite (steps x "
     "(micro-batches + stages) x stages x the sum of its times at most 1e+300 s): '1e300h'"),
    (["--preemption-notice", "1e300", "--mtbf", "100", "--replicas", "2", "--strategy",
      "checkpoint-restart"],  # a plain number: the run's time units, no unit to name
     "'preemption_notice' must be small enough that the run's time stays finite (steps x "
     "(micro-batches + stages) x stages x the sum of its times at most 1e+300): '1e300'"),
    (["--replicas", "2", "--strategy", "checkpoint-restart:notice=bogus", "--preemption-notice",
      "5", "--mtbf", "100"],  # the strategy's own key notice: its name
     "'notice' must be one of checkpoint, ignore: 'bogus'"),
    (["--latency", "1e300h"],
     "'latency' must be small enough that the run's time stays finite (steps x (micro-batches "
     "+ stages) x stages x the sum of its times at most 1e+300 s): '1e300h'"),
    (["--latency", "1e300"],
     "'latency' must be small enough that the run's time stays finite (steps x (micro-batches "
     "+ stages) x stages x the sum of its times at most 1e+300): 1e+300"),
    (["--param-size", "1GB", "--bandwidth", "1e-300B/s"],
     "'bandwidth' must be large enough that the run's time stays finite (steps x (micro-batches "
     "+ stages) x stages x the sum of its times at most 1e+300 s): '1e-300B/s'"),
])
def test_a_preemption_notice_the_config_refuses_names_the_option_as_typed(capsys, argv, line):
    """(smallfix3) --preemption-notice 1e300h was refused as the config's 'notice' with
    3.6e+303 (its seconds), aws as 120.0: the option's name and the text typed now, as its own
    refusals (above). A bound of the run's time next to a value typed with a unit names its
    unit, the second (a unit needs it: --hour 3600): '... at most 1e+300 s): '1e300h''."""
    _, err = _run(capsys, ["train", "--steps", "1", *argv], status=2)
    assert err.strip() == f"dtsim train: error: {line}"


def test_plan_and_topologies_json_name_their_units(capsys):
    """dtsim topologies SPEC: latency in s, bandwidth in B/s, in the table and the JSON."""
    d, _ = _json(capsys, ["topologies", "tree:racks=2,hosts=2,host_bandwidth=1Gbit/s"])
    assert d["bandwidth_max"] == 1.25e8 and d["bandwidth_min"] == 400.0  # host links, uplinks
    assert d["units"]["keys"] == {"latency_min": "s", "latency_max": "s", "bandwidth_min": "B/s",
                                  "bandwidth_max": "B/s"}
    out, _ = _run(capsys, ["topologies", "tree:racks=2,hosts=2"])
    assert "unit" in out.splitlines()[0] and "B/s" in out
    from sim.commands._units import PLAN_UNITS

    assert PLAN_UNITS["plans[].peak_memory"] == "B"
    assert PLAN_UNITS["plans[].predicted_iteration_time"] == "s"


def test_train_time_options_take_units(capsys):
    """Every time option of dtsim train: the same run as the seconds they stand for.

    A point with failures, checkpoints, restarts, downtime and per-stage pass
    times, so each converted value is used (a wrong factor moves the numbers: at
    --mtbf 10min preemptions hit, and each option at another value moves the run;
    at 2h none hit and --replace-time 5min read as 5 was the same run).
    """
    timed = ["--mtbf", "10min", "--replace-time", "5min", "--restart-cost", "30s",
             "--checkpoint-every", "2", "--checkpoint-cost", "10s", "--forward-time", "1s,2s",
             "--backward-time", "1500ms,3s", "--optimizer-time", "250ms", "--availability",
             "0.9", "--mean-downtime", "1min", "--detection-timeout", "2s", "--max-time", "3h",
             "--stall-limit", "1d"]
    plain = ["--mtbf", "600", "--replace-time", "300", "--restart-cost", "30",
             "--checkpoint-every", "2", "--checkpoint-cost", "10", "--forward-time", "1,2",
             "--backward-time", "1.5,3", "--optimizer-time", "0.25", "--availability", "0.9",
             "--mean-downtime", "60", "--detection-timeout", "2", "--max-time", "10800",
             "--stall-limit", "86400"]
    base = ["train", "--stages", "2", "--microbatches-per-step", "4", "--steps", "30",
            "--replications", "2", "--seed", "5"]
    a = _same_run(capsys, [*base, *timed], [*base, *plain])
    given = a["units"]["given"]
    assert given["mtbf"] == {"text": "10min", "value": 600.0, "unit": "s", "as": "600s"}
    assert [g["value"] for g in given["backward_times"]] == [1.5, 3.0]
    assert given["stall_limit"]["value"] == 86400.0
    # the units are used, not ignored: 10 min is not 10 (the run's seconds), 5 min not 5
    for number, wrong in (("600", "10"), ("300", "5")):
        b, _ = _json(capsys, [*base, *[(wrong if t == number else t) for t in plain]])
        assert _results(b) != _results(a), number


def test_train_domain_and_wait_times_take_units(capsys):
    """--domain-downtime and --max-wait (a skipping pipeline), and --preemption-notice.

    One replica per stage: with two, --max-wait 0.5 or 500 was the same run (a
    wrong conversion of 500ms unseen); with one, each of the two moves the run."""
    base = ["train", "--stages", "3", "--replicas", "1", "--microbatches-per-step", "4",
            "--steps", "10", "--replications", "2", "--seed", "1", "--availability", "0.9",
            "--mean-downtime", "20", "--domain-outage", "0.05", "--skip-budget", "1"]
    a = _same_run(capsys, [*base, "--domain-downtime", "1min", "--max-wait", "500ms"],
                  [*base, "--domain-downtime", "60", "--max-wait", "0.5"])
    for wrong in (["--domain-downtime", "1", "--max-wait", "0.5"],
                  ["--domain-downtime", "60", "--max-wait", "500"]):
        b, _ = _json(capsys, [*base, *wrong])
        assert _results(b) != _results(a), wrong
    job = ["train", "--stages", "2", "--steps", "20", "--replications", "2", "--mtbf", "300",
           "--replace-time", "10", "--strategy", "redundancy", "--seed", "2"]
    a = _same_run(capsys, [*job, "--preemption-notice", "2min"],
                  [*job, "--preemption-notice", "120"])
    assert a["preemption_notice"] == 120.0


def test_train_times_with_units_need_seconds_and_a_plan_has_no_hour(capsys):
    """A time with a unit off a one-second clock names --hour; --hour with --plan is refused
    (it relabelled a plan's seconds: 'time to train (min) 242.08' for 242 s)."""
    _, err = _run(capsys, ["train", "--stages", "2", "--hour", "60", "--mtbf", "2h"], status=2)
    assert err.strip() == ("dtsim train: error: 'hour' must be 3600 (time units of one second) "
                           "when a rate or time is given with a unit (2h): 60.0")
    _, err = _run(capsys, ["train", "--stages", "2", "--hour", "60", "--mtbf", "100",
                           "--strategy", "redundancy", "--preemption-notice", "30s"], status=2)
    assert "'hour' must be 3600" in err and "(30s)" in err
    # aws's 120 s notice is 2 time units when an hour is 60 of them
    out, _ = _json(capsys, ["train", "--stages", "2", "--steps", "5", "--replications", "1",
                            "--hour", "60", "--mtbf", "100", "--replace-time", "1",
                            "--strategy", "redundancy", "--preemption-notice", "aws"])
    assert out["preemption_notice"] == 2.0
    plan = str(__import__("pathlib").Path(__file__).resolve().parent.parent / "sim" / "profiles"
               / "data" / "runs" / "mit-N2_D1.json")
    _, err = _run(capsys, ["train", "--plan", plan, "--model", "OPT-350", "--replications",
                           "1", "--hour", "60"], status=2)
    assert err.strip().startswith("dtsim train: error: 'hour' must be given only without --plan")


def test_sync_times_with_units_need_seconds(tmp_path, capsys):
    """--sync diloco:...,grace=500ms is 0.5 s: the run of grace=0.5 (its JSON, bit for bit;
    three groups, the third slower: the grace window decides when the outer step fires) on
    the one-second clock, refused naming --hour off it (a plain grace=5 is then 5 minutes,
    and a size unit, bucket_size=25MiB, needs no clock)."""
    speeds = tmp_path / "s.csv"
    speeds.write_text("stage,replica,speed\n0,0,1\n0,1,1\n0,2,0.8\n")
    run = ["train", "--stages", "1", "--forward-time", "1", "--replicas", "3",
           "--microbatches-per-step", "3", "--steps", "4",
           "--replications", "1", "--param-size", "10", "--bandwidth", "5",
           "--speeds", str(speeds)]
    dl = "diloco:every=2,quorum=2,grace={}"
    a, _ = _json(capsys, [*run, "--sync", dl.format("500ms")])
    b, _ = _json(capsys, [*run, "--sync", dl.format("0.5")])
    c, _ = _json(capsys, [*run, "--sync", dl.format("500")])
    assert _results(a) == _results(b) != _results(c)
    assert a["sync"] == "diloco:every=2,quorum=2,grace=0.5"
    _, err = _run(capsys, [*run, "--hour", "60", "--sync", dl.format("5min")], status=2)
    assert err.strip() == ("dtsim train: error: 'hour' must be 3600 (time units of one second) "
                           "when a rate or time is given with a unit (--sync grace=5min): 60.0")
    _json(capsys, [*run, "--hour", "60", "--sync", dl.format("5")])
    _json(capsys, [*_without(run[:-2], "--param-size"), "--hour", "60", "--param-size", "1GB",
                   "--sync", "allreduce:overlap=backward,bucket_size=25MiB"])


def test_strategy_times_with_units_need_seconds(capsys):
    """--strategy checkpoint-restart:checkpoint=2min,restart=1h is the run of 120 and 3600 (its
    JSON, bit for bit; 2 s checkpoints give another run), refused naming --hour off the
    one-second clock (where a plain checkpoint=2 is 2 minutes)."""
    run = ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "4",
           "--steps", "50", "--forward-time", "0.4", "--mtbf", "600", "--seed", "3",
           "--replications", "2"]
    a, _ = _json(capsys, [*run, "--strategy", "checkpoint-restart:checkpoint=2min,restart=1h"])
    b, _ = _json(capsys, [*run, "--strategy", "checkpoint-restart:checkpoint=120,restart=3600"])
    c, _ = _json(capsys, [*run, "--strategy", "checkpoint-restart:checkpoint=2,restart=3600"])
    assert _results(a) == _results(b) != _results(c)
    _, err = _run(capsys, [*run, "--hour", "60", "--strategy",
                           "checkpoint-restart:checkpoint=2min"], status=2)
    assert err.strip() == ("dtsim train: error: 'hour' must be 3600 (time units of one second) "
                           "when a rate or time is given with a unit (--strategy "
                           "checkpoint=2min): 60.0")
    _json(capsys, [*run, "--hour", "60", "--strategy", "checkpoint-restart:checkpoint=2"])


def test_plan_failure_times_take_units(capsys):
    """dtsim plan's --mtbf/--replace-time/--restart-cost/--checkpoint-cost (seconds).

    At an MTBF of 5 min over 5 iterations of about a minute preemptions hit, so every
    one of the four is used: each at another value moves the simulated time, so a wrong
    conversion would show (at 1 h over 3 iterations none hit: --replace-time and
    --restart-cost could have been read wrong unseen)."""
    base = ["plan", "--model", "OPT-350", "--fleet-from-runs", "mit-N2_D1", "--top", "1",
            "--steps", "5", "--checkpoint-every", "1", "--seed", "4"]
    typed = {"--mtbf": ("5min", "300"), "--replace-time": ("1min", "60"),
             "--restart-cost": ("20s", "20"), "--checkpoint-cost": ("500ms", "0.5")}

    def run(values):
        d, _ = _json(capsys, [*base, *[x for k, v in values.items() for x in (k, v)]])
        return d, d.pop("search")  # the search's own wall time differs

    (a, a_search), (b, b_search) = (run({k: v[i] for k, v in typed.items()}) for i in (0, 1))
    assert a_search.keys() == b_search.keys()
    assert _results(a) == _results(b)
    assert a["units"]["given"]["mtbf"]["value"] == 300.0
    simulated = b["plans"][0]["simulated_iteration_time"]
    for opt in ("--replace-time", "--restart-cost", "--checkpoint-cost"):
        wrong = {k: v[1] for k, v in typed.items()} | {opt: "1" if opt != "--restart-cost"
                                                        else "1000"}
        c, _ = run(wrong)
        assert c["plans"][0]["simulated_iteration_time"] != simulated, opt


def test_trace_start_and_block_take_units(capsys):
    """--trace-start and --trace-block (trace seconds, whatever --hour says) take a unit as
    every other time option of dtsim train: they were float-typed ('invalid float value')."""
    base = ["train", "--stages", "2", "--replicas", "6", "--steps", "40", "--forward-time", "20",
            "--replications", "2", "--seed", "7", "--restart-cost", "5", "--failure-trace",
            "aws-g4dn-24h", "--trace-loop", "--trace-resample", "block"]
    a = _same_run(capsys, [*base, "--trace-start", "1h", "--trace-block", "30min"],
                  [*base, "--trace-start", "3600", "--trace-block", "1800"])
    assert a["units"]["given"]["trace_start"]["value"] == 3600.0
    assert a["units"]["given"]["trace_block"]["value"] == 1800.0
    # the units are used: 1 h of trace is not 1 s of it
    b, _ = _json(capsys, [*base, "--trace-start", "1", "--trace-block", "1800"])
    assert _results(b) != _results(a)


@pytest.mark.parametrize("text", ["-5", "nan", "inf", "1e400s"])
def test_a_preemption_notice_out_of_range_names_the_option(text, capsys):
    """--preemption-notice -5, nan and inf were refused as "'notice' must be >= 0" (the
    config's field, not the option typed; inf is >= 0), 1e400s as not a time at all: one
    line naming preemption_notice and saying a finite time >= 0."""
    _, err = _run(capsys, ["train", "--stages", "2", "--mtbf", "100", "--strategy",
                           "redundancy", f"--preemption-notice={text}"], status=2)
    assert err.strip().startswith("dtsim train: error: 'preemption_notice' must be a finite "
                                  "time >= 0"), err
    assert len(err.strip().splitlines()) == 1


def test_a_trace_off_the_second_clock_is_warned_about(capsys):
    """--hour 60 with a replayed trace at its default speed replays one trace second per
    minute (60 times slower than it happened: availability 0.08 for the trace's 0.68); one
    warning names the --trace-speedup that replays it as it happened. Not with the speedup
    given, nor on the one-second clock."""
    base = ["train", "--stages", "2", "--replicas", "2", "--failure-trace", "aws-g4dn-24h",
            "--steps", "3", "--replications", "1", "--max-wait", "inf"]
    _, err = _run(capsys, [*base, "--hour", "60"])
    assert err.strip() == ("dtsim train: warning: --hour 60 makes a time unit 60 s, but "
                           "--failure-trace aws-g4dn-24h replays one trace second per time "
                           "unit (--trace-speedup 1): --trace-speedup 60 replays it as it "
                           "happened")
    _, err = _run(capsys, [*base, "--hour", "60", "--trace-speedup", "60"])
    assert "warning" not in err
    _, err = _run(capsys, base)
    assert "warning" not in err


def test_a_model_size_written_as_a_count_of_billions_in_bytes_is_warned(capsys):
    """(user trial 4) A user of a '1B-parameter model' typed --param-size 1B: one byte (B is a
    byte), and the all-reduce of 3 zones over 100 Mbit/s took 8e-08 s, utilisation 0.91 where
    the 2GB of the model's bf16 values give 0.0046. A size of fewer than 1000 bytes written
    with the bare unit B is warned about, naming the model's size at --value-bits; the run
    is unchanged. dtsim learners --size likewise; 1kB, 2GB and plain numbers are not."""
    base = ["train", "--stages", "1", "--replicas", "3", "--microbatches-per-step", "3",
            "--steps", "2", "--replications", "1", "--bandwidth", "100Mbps"]
    _, err = _run(capsys, [*base, "--param-size", "1B"])
    assert ("dtsim train: warning: --param-size 1B is 1 byte (B is a byte, not a billion): "
            "a model of 1 billion parameters at 16 bits a value is 2GB (--param-size 2GB)"
            ) in err
    _, err = _run(capsys, [*base, "--param-size", "7B", "--value-bits", "32", "--sync",
                           "diloco:every=2"])
    assert "--param-size 7B is 7 bytes" in err and "is 28GB (--param-size 28GB)" in err
    for ok in ("1kB", "2GB", "100"):
        _, err = _run(capsys, [*base, "--param-size", ok])
        assert "not a billion" not in err
    _, err = _run(capsys, ["learners", "--learners", "3", "--chips", "2", "--every", "2",
                           "--steps", "4", "--replications", "1", "--size", "70B"])
    assert ("dtsim learners: warning: --size 70B is 70 bytes (B is a byte, not a billion): "
            "a model of 70 billion parameters at 16 bits a value is 140GB (--size 140GB)") in err


def test_a_bucket_size_in_sync_is_a_term_of_the_transfer_units_check(capsys):
    """--sync allreduce:...,bucket_size=25MiB (units in --sync, this session) took the bucket
    in bytes beside a plain --param-size 1e3 in size units, silently: the bucket held the
    whole model (step 19.0 where bucket_size=100 gives 17.2), while --bucket-size 25MiB
    beside the same --param-size is warned about. The sync's bucket_size is now one of the
    terms of the mixed-units warning (with or without a network), a plain number included."""
    base = ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "4",
            "--steps", "2", "--replications", "1"]
    sync = "allreduce:overlap=backward,bucket_size="
    _, err = _run(capsys, [*base, "--param-size", "1e3", "--bandwidth", "100", "--sync",
                           sync + "25MiB"])
    assert ("dtsim train: warning: a transfer time mixes numbers with units (--sync "
            "bucket_size 25MiB (2.621e+07 B)) and without (--param-size 1e3 (B)") in err, err
    _, err = _run(capsys, [*base, "--param-size", "1kB", "--bandwidth", "100B/s", "--latency",
                           "0s", "--sync", sync + "100"])
    assert "mixes numbers with units" in err and "without (--sync bucket_size 100 (B))" in err
    net = "geo:regions=2,hosts=2,inter_region_bandwidth=100,inter_region_latency=0"
    _, err = _run(capsys, [*base, "--param-size", "1e3", "--network", net, "--sync",
                           sync + "25MiB"])
    assert "(--sync bucket_size 25MiB (2.621e+07 B))" in err, err
    for ok in ([*base, "--param-size", "1e3", "--bandwidth", "100", "--sync", sync + "100"],
               [*base, "--param-size", "1kB", "--bandwidth", "100B/s", "--latency", "0s",
                "--sync", sync + "25MiB"]):
        _, err = _run(capsys, ok)
        assert "warning" not in err, err


def test_gossip_size_is_refused_where_no_exchange_is_timed(tmp_path, capsys):
    """``--size`` was read by no exchange time and accepted without a word: with protocol
    ``edge`` (its clock counts steps, 2/n each) and in gossip training on links of infinite
    bandwidth. Both are refused in one line; and an edge run over a graph file whose links carry
    units is not warned about a mix with the default ``--size`` (edge times no transfer)."""
    f = tmp_path / "campus.edges"
    f.write_text("lab-pc-01 lab-pc-02 200us 1Gbit/s\nlab-pc-02 cloud-a 12ms 500Mbit/s\n"
                 "cloud-a lab-pc-01 50us 25Gbit/s\n")
    edge = ["gossip", "--topology", str(f), "--protocol", "edge", "--rounds", "5",
            "--replications", "2"]
    _, err = _run(capsys, [*edge, "--size", "2GB"], status=2)
    assert err.strip().splitlines()[-1] == (
        "dtsim gossip: error: 'size' must be given only with a protocol that times its exchanges "
        "(edge's clock counts steps, 2/n each: no exchange takes latency + size / bandwidth): '2GB'")
    _, err = _run(capsys, [*edge, "--objective", "quadratic", "--size", "2GB"], status=2)
    assert "'size' must be given only with a protocol that times its exchanges" in err
    _, err = _run(capsys, ["gossip", "--nodes", "8", "--protocol", "neighbourhood", "--rounds",
                           "3", "--replications", "2", "--objective", "quadratic", "--size",
                           "2GB"], status=2)
    assert err.strip().splitlines()[-1].startswith(
        "dtsim gossip: error: 'size' must be given only with links of finite bandwidth")
    _, err = _run(capsys, edge)
    assert "warning" not in err
    # a protocol that times its exchanges over the same links is still warned about the mix
    _, err = _run(capsys, ["gossip", "--topology", str(f), "--protocol", "async", "--rounds", "1",
                           "--replications", "2"])
    assert "mixes numbers with units" in err
