"""Region-pair tables (topologies.regions) and the geo layout's per-pair bandwidths and NIC."""

from __future__ import annotations

import pytest

import topologies
from sim.errors import ConfigError
from sim.network import build_network
from topologies.layouts import geo
from topologies.regions import PRESETS, read_region_pairs


def test_dtfm_world_is_the_published_table_in_seconds_and_bytes_per_second():
    """Ten regions, every pair once and symmetric; Oregon-Virginia 67 ms and 0.79 Gbit/s,
    London-Frankfurt 14 ms and 1.14 Gbit/s; 10 ms and 2 Gbit/s inside a region."""
    t = read_region_pairs("dtfm-world")
    assert len(t.names) == 10
    i, j = t.names.index("Oregon"), t.names.index("Virginia")
    assert t.latency[i][j] == t.latency[j][i] == pytest.approx(0.067)
    assert t.bandwidth[i][j] == pytest.approx(0.79e9 / 8)
    a, b = t.names.index("London"), t.names.index("Frankfurt")
    assert (t.latency[a][b], t.bandwidth[a][b]) == (pytest.approx(0.014),
                                                    pytest.approx(1.14e9 / 8))
    assert t.latency[a][a] == pytest.approx(0.010) and t.bandwidth[a][a] == pytest.approx(2.5e8)
    assert set(PRESETS) == {"dtfm-world", "dtfm-us"}


def test_geo_takes_each_pairs_latency_and_bandwidth_and_a_host_nic():
    """geo:pairs=dtfm-world,names=Oregon/Tokyo,hosts=2: the Oregon-Tokyo links are 96 ms and
    0.523 Gbit/s, hosts of a region 10 ms and 2 Gbit/s, every host a NIC of 1e9."""
    G = topologies.build("geo:pairs=dtfm-world,names=Oregon/Tokyo,hosts=2,nic=1e9")
    assert G.graph["regions"] == ("Oregon", "Tokyo")
    assert G.edges[0, 2] == {"latency": pytest.approx(0.096), "bandwidth": pytest.approx(0.523e9 / 8)}
    assert G.edges[0, 1] == {"latency": pytest.approx(0.010), "bandwidth": pytest.approx(2.5e8)}
    assert all(G.nodes[v]["nic"] == 1e9 for v in G)
    net = build_network(G)
    assert net.nodes == [0, 1, 2, 3]


def test_geo_bandwidth_matrix():
    """A bandwidth per pair of regions from a matrix; the default keeps one value."""
    G = geo(3, 1, bandwidth_matrix="0/1/2;1/0/3;2/3/0")
    assert [G.edges[e]["bandwidth"] for e in [(0, 1), (0, 2), (1, 2)]] == [1, 2, 3]
    assert geo(2, 1).edges[0, 1]["bandwidth"] == 10.0


def test_a_pairs_file_in_the_simulator_units(tmp_path):
    """A CSV with latency,bandwidth columns is taken as it is; a missing pair is refused."""
    p = tmp_path / "p.csv"
    p.write_text("# three sites\na,b,latency,bandwidth\nx,y,1,5\ny,z,2,6\nx,z,3,7\n")
    G = geo(hosts=1, pairs=str(p))
    assert G.graph["regions"] == ("x", "y", "z")
    assert G.edges[0, 2] == {"latency": 3.0, "bandwidth": 7.0}
    p.write_text("a,b,latency,bandwidth\nx,y,1,5\ny,z,2,6\n")
    with pytest.raises(ConfigError) as e:
        geo(hosts=1, pairs=str(p))
    assert str(e.value) == f"'pairs' must be every pair of the regions it names: '{p} (x-z missing)'"


@pytest.mark.parametrize("text, rule", [
    ("a,b,lat,bw\nx,y,1,2\n", "a CSV with columns a,b,latency,bandwidth (or latency_ms,bandwidth_gbps)"),
    ("a,b,latency,bandwidth\nx,y,1,2\ny,x,1,2\n", "each pair of regions once"),
    ("a,b,latency,bandwidth\nx,y,-1,2\n", "latencies >= 0"),
    ("a,b,latency,bandwidth\nx,y,1,0\n", "bandwidths > 0 (inf allowed)"),
    ("a,b,latency,bandwidth\nx,y,one,2\n", "numeric latency and bandwidth"),
    ("a,b,latency,bandwidth\nx,y,1,10GB\n", "bandwidth values that are a rate, not a size "
     "(bytes per second, or a number and a rate unit: 10Gbit/s, 100MB/s, 25 Gbps, 1.2GiB/s)"),
    ("a,b,latency_ms,bandwidth_gbps\nx,y,40ms,10\n",
     "plain numbers in latency_ms (its unit is in its name)"),
])
def test_bad_pairs_files_are_refused(tmp_path, text, rule):
    """Each malformed table is one line naming pairs and the rule."""
    p = tmp_path / "p.csv"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        read_region_pairs(str(p))
    assert e.value.name == "pairs" and e.value.rule == rule


def test_pairs_refuses_the_matrices_it_replaces():
    """With a table the matrices and inter-region values stay unset."""
    with pytest.raises(ConfigError) as e:
        geo(hosts=1, pairs="dtfm-us", bandwidth_matrix="0/1;1/0")
    assert str(e.value).startswith("'bandwidth_matrix' must be unset with pairs")


def test_geo_matrix_nic_and_pairs_take_units_as_every_link_does(tmp_path, monkeypatch):
    """Units (topologies.units, sim.units) in geo's bandwidth matrix (a rate's /s is not an
    entry separator), its NIC, and a pairs file's latency and bandwidth columns build the
    same graph as the plain numbers they stand for; a NIC given with a unit is recorded for
    the mixed-units warning."""
    def links(G):
        return ([(u, v, d["latency"], d["bandwidth"]) for u, v, d in sorted(G.edges(data=True))],
                [G.nodes[v].get("nic") for v in sorted(G)])

    a = topologies.build("geo:regions=3,hosts=2,bandwidth_matrix=0/10Gbit/s/5GB/ms;"
                         "10Gbit/s/0/1e9;5GB/ms/1e9/0,latency_matrix=0/40ms/1;40ms/0/2;1/2/0,"
                         "nic=25Gbps")
    b = topologies.build("geo:regions=3,hosts=2,bandwidth_matrix=0/1250000000/5e12;"
                         "1250000000/0/1e9;5e12/1e9/0,latency_matrix=0/0.04/1;0.04/0/2;1/2/0,"
                         "nic=3125000000")
    assert links(a) == links(b)
    assert a.graph["units"]["nic"][0].text == "25Gbps" and b.graph["units"]["nic"][0] is None
    with pytest.raises(ConfigError) as e:
        topologies.build("geo:regions=2,hosts=1,nic=10GB")
    assert e.value.name == "topology" and "nic is a rate, not a size" in e.value.rule
    monkeypatch.chdir(tmp_path)
    (tmp_path / "u.csv").write_text("a,b,latency,bandwidth\nx,y,40ms,10Gbit/s\nx,x,1ms,1GB/s\n"
                                    "y,y,0.001,1e9\n")
    (tmp_path / "p.csv").write_text("a,b,latency,bandwidth\nx,y,0.04,1250000000\nx,x,0.001,1e9\n"
                                    "y,y,0.001,1e9\n")
    assert links(topologies.build("geo:pairs=u.csv,hosts=2")) == \
        links(topologies.build("geo:pairs=p.csv,hosts=2"))


def test_a_pairs_file_named_by_a_path_with_folders(tmp_path, monkeypatch):
    """geo:pairs= takes a path as written ("/" separates folders, not list entries): a file
    in a folder builds the same graph as the same file named from its folder."""
    d = tmp_path / "my zones"
    d.mkdir()
    (d / "p.csv").write_text("a,b,latency,bandwidth\nx,y,0.04,1250000000\nx,x,0.001,1e9\n"
                             "y,y,0.001,1e9\n")
    a = topologies.build(f"geo:pairs={d / 'p.csv'},hosts=2")
    monkeypatch.chdir(d)
    b = topologies.build("geo:pairs=p.csv,hosts=2")
    assert sorted(a.edges(data=True)) == sorted(b.edges(data=True))
    assert a.graph["regions"] == ("x", "y")


def test_the_mixed_units_warning_counts_only_the_links_geo_builds(capsys):
    """With a region-pair table (stated units) the inter-region defaults are unused: no
    warning once the links inside a region have units too; without them the warning names
    the plain intra-region defaults, not the unused inter-region ones (50 and 10)."""
    from sim.cli import main

    base = ["train", "--stages", "1", "--replicas", "4", "--param-size", "1GB", "--steps", "1",
            "--replications", "1", "--json", "--network"]
    assert main(base + ["geo:pairs=dtfm-us,hosts=1,intra_region_bandwidth=100Gbit/s,"
                        "intra_region_latency=10us"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(base + ["geo:pairs=dtfm-us,hosts=1"]) == 0
    err = capsys.readouterr().err
    assert "mixes numbers with units" in err and "bandwidth 100.0 (B/s)" in err
    assert "50.0" not in err and "bandwidth 10.0 (B/s)" not in err
