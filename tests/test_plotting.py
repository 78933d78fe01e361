"""Tests of sim.plotting: honest error bars on log axes, integer ticks, infeasible designs off the axis."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from sim import plotting
from sim.results import mean_ci, proportion_ci


def test_negative_lower_end_does_not_pull_a_log_axis_down():
    """On a log axis a lower interval end <= 0 stops the bar at the point (marked), not at the axis bottom."""
    fig = Figure()
    ax = fig.add_subplot()
    ax.set_yscale("log")
    plotting._error_bars(ax, [1, 2], [1e-3, 2e-3], [-1e-3, 1.5e-3], [3e-3, 2.5e-3], logy=True,
                         color="C0", label="sim")
    ax.relim()
    ax.autoscale_view()
    assert ax.get_ylim()[0] > 1e-4
    labels = [line.get_label() for line in ax.lines]
    assert any("lower end <= 0" in lab for lab in labels)


def test_upper_bound_is_drawn_as_a_bound():
    """An estimate with no event seen is drawn as a downward triangle at its bound."""
    fig = Figure()
    ax = fig.add_subplot()
    e = proportion_ci(0, 1000)
    plotting._error_bars(ax, [1], [e.mean], [e.low], [e.high], logy=True, kinds=[e.kind])
    bound = [line for line in ax.lines if line.get_label() == "no event seen: upper bound"]
    assert bound and math.isclose(bound[0].get_ydata()[0], e.high)


def test_integer_axis_gets_integer_ticks():
    """A whole-number axis (skip budget, r) gets integer ticks only."""
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [1, 2, 3])
    plotting._integer_ticks(ax.xaxis, [0, 1, 2])
    ticks = ax.get_xticks()
    assert all(float(t).is_integer() for t in ticks)


def test_workers_vs_skip_draws_infeasible_above_the_data(tmp_path):
    """Infeasible designs are marked above the feasible ones, not at 0 workers."""
    series = [{"domain_outage": 0.0, "points": [(0, 240), (1, 192)]},
              {"domain_outage": 1e-3, "points": [(0, None), (1, 192)]}]
    path = plotting.plot_workers_vs_skip(series, tmp_path / "w.png", stages=48, availability=0.9,
                                         target_drop=1e-3)
    assert path.exists() and path.stat().st_size > 1000


def test_plot_gossip_estimates_accepts_no_interval(tmp_path):
    """An estimate from one replication (no interval) is drawn as a point without a bar."""
    path = plotting.plot_gossip_estimates([1, 2], [mean_ci([1.0]), mean_ci([1.0, 2.0, 3.0])],
                                          tmp_path / "e.png")
    assert path.exists()


def test_a_point_at_the_base_value_is_not_labelled_none(tmp_path, monkeypatch):
    """A sweep of POINTS where some leave the line factor at the experiment's base value
    (no ``bandwidth`` in their params): their line was labelled ``bandwidth=None``; it
    says ``bandwidth: base value``; the others keep ``bandwidth=5``."""
    labels = []
    draw = plotting._error_bars

    def spy(*a, **k):
        labels.append(k.get("label"))
        return draw(*a, **k)

    monkeypatch.setattr(plotting, "_error_bars", spy)
    rows = [{"steps": s, "throughput_mean": 1.0, "throughput_low": 0.9, "throughput_high": 1.1,
             **({"bandwidth": 5} if s > 2 else {})} for s in (1, 2, 3, 4)]
    out = plotting.plot_summary_table(rows, ["steps", "bandwidth"], ["throughput"], tmp_path)
    assert out[0].exists()
    assert labels == ["bandwidth: base value", "bandwidth=5"]


def test_a_point_at_the_base_value_is_not_a_none_tick(tmp_path, monkeypatch):
    """The x factor left at the base value by some POINTS: its tick read ``None``; it reads
    ``base value`` (the other categories as they are, in order of appearance)."""
    ticks = []
    save = plotting.Figure.savefig

    def spy(fig, *a, **k):
        ticks.extend(t.get_text() for t in fig.axes[0].get_xticklabels())
        return save(fig, *a, **k)

    monkeypatch.setattr(plotting.Figure, "savefig", spy)
    rows = [{"bandwidth": b, "throughput_mean": 1.0, "throughput_low": 0.9,
             "throughput_high": 1.1} for b in (None, "1GB/s", "10GB/s")]
    out = plotting.plot_summary_table(rows, ["bandwidth"], ["throughput"], tmp_path)
    assert out[0].exists()
    assert ticks == ["base value", "1GB/s", "10GB/s"]


def test_long_category_ticks_do_not_overlap(tmp_path, monkeypatch):
    """(user trial 11) A sweep whose x factor is a graph file's path (``network``, one
    file a bandwidth) drew its six tick labels on top of each other, unreadable: side by side
    they are turned upright, and the figure grows by their length so the axes keep their
    height. Short categories stay as they were, level."""
    seen = {}
    save = plotting.Figure.savefig

    def spy(fig, *a, **k):
        fig.draw_without_rendering()
        ax = fig.axes[0]
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        seen["overlaps"] = sum(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:], strict=False))
        seen["rotation"] = {t.get_rotation() for t in ax.get_xticklabels()}
        seen["axes_height"] = ax.get_window_extent().height / fig.dpi
        return save(fig, *a, **k)

    monkeypatch.setattr(plotting.Figure, "savefig", spy)
    for names, turned in (([f"/tmp/ut11/zones_{g}G.json" for g in (1, 2.5, 5, 10, 20, 40)],
                           True), (["a", "b", "c"], False)):
        rows = [{"network": n, "u_mean": 0.5 + 0.05 * i, "u_low": 0.4, "u_high": 0.9}
                for i, n in enumerate(names)]
        plotting.plot_sweep(rows, "network", "u", tmp_path / "u.png")
        assert seen["overlaps"] == 0
        assert seen["rotation"] == ({90.0} if turned else {0.0})
        assert seen["axes_height"] > 2.5  # of the 4-inch figure's axes: not squashed


def _spy_error_bars(monkeypatch) -> list:
    """The (label, xs) of every line the default figures draw, in order (plotting still draws)."""
    drawn = []
    draw = plotting._error_bars

    def spy(ax, xs, m, *a, **k):
        drawn.append((k.get("label"), list(xs)))
        return draw(ax, xs, m, *a, **k)

    monkeypatch.setattr(plotting, "_error_bars", spy)
    return drawn


def test_default_figures_of_three_factors_draw_a_line_per_combination(tmp_path, monkeypatch):
    """(user trial 4) A sweep of method x link x spot drew its default figures against method
    with a line per link only: each line went through the spot and no-spot points of every
    method in turn (two points at one x, joined), as if one series. Every factor after the
    first now splits the lines: one per (link, spot), labelled by both, one point an x."""
    drawn = _spy_error_bars(monkeypatch)
    rows = [{"method": m, "link": b, "spot": s, "u_mean": 0.5, "u_low": 0.4, "u_high": 0.6}
            for m in ("dp", "diloco") for b in ("100Mbps", "1Gbps") for s in ("none", "1h")]
    out = plotting.plot_summary_table(rows, ["method", "link", "spot"], ["u"], tmp_path)
    assert out[0].exists()
    assert [label for label, _ in drawn] == ["link=100Mbps, spot=none", "link=100Mbps, spot=1h",
                                             "link=1Gbps, spot=none", "link=1Gbps, spot=1h"]
    assert all(xs == [0, 1] for _, xs in drawn)


def test_default_figures_of_an_experiment_in_parts_draw_each_part_over_its_factors(
        tmp_path, monkeypatch):
    """(user trial 5) dtsim plot on experiments/diloco_zones.py's results (POINTS in parts,
    each leaving the others' factors at BASE) drew every metric against ``part``, a line per
    point, 20 legend lines over the axes (``failure_factor: base value, ..., trace=aws-p3``).
    A metric is drawn from the points that measured it, a figure per part, over the factors
    that vary there: goodput against failure_factor, a line per sync; against sync, a line
    per trace."""
    drawn = _spy_error_bars(monkeypatch)
    est = {"g_mean": 0.5, "g_low": 0.4, "g_high": 0.6}
    rows = ([{"part": "goodput", "failure_factor": f, "sync": s, **est}
             for f in (1, 2, 4) for s in ("synchronous", "quorum")]
            + [{"part": "trace", "trace": t, "sync": s, **est}
               for t in ("aws-p3", "gcp-a100") for s in ("synchronous", "quorum")]
            + [{"part": "bandwidth", "method": m, "g_mean": math.nan, "g_low": math.nan,
                "g_high": math.nan} for m in ("dp", "diloco")])
    out = plotting.plot_summary_table(
        rows, ["part", "method", "failure_factor", "sync", "trace"], ["g"], tmp_path)
    assert [p.name for p in out] == ["g_part=goodput.png", "g_part=trace.png"]
    assert all(p.exists() for p in out)
    assert drawn == [("sync=synchronous", [1, 2, 4]), ("sync=quorum", [1, 2, 4]),
                     ("trace=aws-p3", [0, 1]), ("trace=gcp-a100", [0, 1])]


def test_default_figures_of_parts_sharing_their_fixed_factors_are_two_files(tmp_path):
    """Two parts that set one factor at the same value (replicas=4), each varying another
    (mtbf, availability), were both named ``u_replicas=4.png``: the second figure was written
    over the first, one part's figure lost without a word. Each is now named by its x too."""
    est = {"u_mean": 0.5, "u_low": 0.4, "u_high": 0.6}
    rows = ([{"replicas": 4, "mtbf": t, **est} for t in (10, 20)]
            + [{"replicas": 4, "availability": a, **est} for a in (0.9, 0.99)])
    out = plotting.plot_summary_table(rows, ["replicas", "mtbf", "availability"], ["u"],
                                      tmp_path)
    assert [p.name for p in out] == ["u_replicas=4_by_mtbf.png",
                                     "u_replicas=4_by_availability.png"]
    assert len({p.name for p in tmp_path.iterdir()}) == 2


def test_a_sweep_figure_of_many_lines_keeps_its_legend_off_the_axes(tmp_path, monkeypatch):
    """dtsim plot's default figure of a four-factor sweep (the user trial's: framework on x,
    3 x 3 x 4 = 36 lines): the legend is beside the axes, not over them (inside, it filled
    them and squashed the lines into a strip), and no two lines share a colour and a marker
    (the ten colours alone repeated: 36 lines in 10 looks). Few lines keep it inside."""
    figs = []

    class Kept(Figure):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            figs.append(self)

    monkeypatch.setattr(plotting, "Figure", Kept)
    rows = [{"framework": f, "p2p": p, "microbatches": m, "latency_ms": lat,
             "t_mean": 1.0 + i, "t_low": 0.5 + i, "t_high": 1.5 + i}
            for i, (p, m, lat) in enumerate((p, m, lat) for p in ("blocking", "overlap", "batched")
                                            for m in (8, 32, 96) for lat in (0.1, 1, 10, 50))
            for f in ("deepspeed", "megatron")]
    plotting.plot_sweep(rows, "framework", "t", tmp_path / "t.png",
                        group=["p2p", "microbatches", "latency_ms"])
    fig = figs[-1]
    ax = fig.axes[0]
    fig.canvas.draw()
    legends = fig.legends + ([ax.get_legend()] if ax.get_legend() else [])
    assert len(legends) == 1
    box, axbox = legends[0].get_window_extent(), ax.get_window_extent()
    assert not box.overlaps(axbox)
    assert axbox.height > 0.6 * fig.bbox.height  # the axes keep the figure's height
    handles, _ = ax.get_legend_handles_labels()  # error bar containers: [0] is the line
    looks = [(h[0].get_color(), h[0].get_marker()) for h in handles]
    assert len(looks) == 36 and len(set(looks)) == 36
    plotting.plot_sweep(rows[:6], "framework", "t", tmp_path / "few.png", group=["latency_ms"])
    few = figs[-1]
    few.canvas.draw()
    assert few.axes[0].get_legend() is not None and not few.legends
