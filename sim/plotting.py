"""Figures from results tables; the only module that imports matplotlib.

Functions here draw from tables (lists of flat dicts, as stored in an
experiment's ``summary.csv``), so figures can be redrawn without re-running
anything (``dtsim plot OUTDIR``). They use :class:`matplotlib.figure.Figure`
directly (no pyplot state, no GUI backend) and write PNG files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

__all__ = ["check_figure_file", "is_dtsim_figure", "save_figure", "plot_sweep", "plot_summary_table", "summary_figures", "plot_gossip_series", "plot_gossip_estimates",
           "plot_trace", "LEGEND_INSIDE", "LEGEND_ROWS", "SWEEP_MARKERS"]


# --------------------------------------------------------------------------- shared helpers


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _integer_ticks(axis: Any, values: Sequence[Any]) -> None:
    """Integer ticks on ``axis`` (``ax.xaxis`` or ``ax.yaxis``) when every value is a whole number."""
    from matplotlib.ticker import MaxNLocator

    vals = [_num(v) for v in values]
    if vals and all(math.isfinite(v) and v == int(v) for v in vals):
        axis.set_major_locator(MaxNLocator(integer=True))


def _error_bars(ax: Any, x: Sequence[float], mean: Sequence[float], low: Sequence[float],
                high: Sequence[float], *, logy: bool, color: Any = None, label: str | None = None,
                fmt: str = "o", kinds: Sequence[str] | None = None, **kw: Any) -> None:
    """Points with their 95% intervals, honest on log axes.

    An interval end that is not finite is not drawn. On a log axis a lower end
    at or below 0 cannot be drawn: its bar stops at the point, which gets a
    downward caret (instead of a bar running to the bottom of the axes). An
    estimate of kind ``"upper"`` (no event seen, "below X") is drawn as a
    downward triangle at its bound, without a point.
    """
    kinds = list(kinds) if kinds is not None else ["two-sided"] * len(mean)
    xs, ms, lo_e, hi_e, cut, bx, by = [], [], [], [], [], [], []
    for xi, m, lo, hi, kind in zip(x, mean, low, high, kinds, strict=True):
        m, lo, hi = _num(m), _num(lo), _num(hi)
        if kind == "upper":
            if math.isfinite(hi) and (not logy or hi > 0):
                bx.append(xi)
                by.append(hi)
            continue
        if not math.isfinite(m) or (logy and m <= 0):
            continue
        xs.append(xi)
        ms.append(m)
        down = m - lo if math.isfinite(lo) else 0.0
        if logy and math.isfinite(lo) and lo <= 0:
            down = 0.0
            cut.append((xi, m))
        lo_e.append(max(down, 0.0))
        hi_e.append(max(hi - m, 0.0) if math.isfinite(hi) else 0.0)
    line = ax.errorbar(xs, ms, yerr=[lo_e, hi_e], fmt=fmt, color=color, capsize=3, label=label, **kw)
    c = line[0].get_color() if color is None else color
    if cut:
        ax.plot([p[0] for p in cut], [p[1] for p in cut], linestyle="none", marker=7, color=c,
                markersize=8, label="lower end <= 0 (not drawable on a log axis)")
    if bx:
        ax.plot(bx, by, linestyle="none", marker="v", color=c, markersize=8,
                label="no event seen: upper bound")


# --------------------------------------------------------------------------- sweeps (runner)


#: A sweep figure's legend stays inside its axes up to this many entries, and goes beside
#: them past it (36 lines of a four-factor sweep filled the axes and hid every line).
LEGEND_INSIDE = 8
#: ... in columns of at most this many entries.
LEGEND_ROWS = 30
#: The markers of a sweep figure's lines: the first ten groups take ten colours with the
#: first, the next ten the second, ... (the colour cycle alone repeated past ten lines).
SWEEP_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_sweep(
    rows: Sequence[Mapping[str, Any]],
    x: str,
    y: str,
    path: str | Path,
    *,
    group: str | Sequence[str] | None = None,
    exact: str | None = None,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    logy: bool = False,
) -> Path:
    """Plot a metric's mean and 95% interval against one factor.

    Parameters
    ----------
    rows : list of dict
        Summary rows (one per point) with ``x``, ``{y}_mean``, ``{y}_low`` and
        ``{y}_high`` (as written by the sweep runner).
    x : str
        Column on the horizontal axis (a numeric factor, or any values,
        placed in order of appearance).
    y : str
        Metric name.
    path : path
        PNG file to write.
    group : str or sequence of str, optional
        Column (or columns) splitting the points into one line each (per combination).
    exact : str, optional
        Column with an exact reference value, drawn dashed per group.
    title, xlabel, ylabel : str, optional
        Labels (default: the column names).
    logy : bool
        Logarithmic vertical axis.

    Returns
    -------
    Path
        The file written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    by = (group,) if isinstance(group, str) else tuple(group or ())
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(g) for g in by), []).append(r)
    xs_all = [r.get(x) for r in rows]
    numeric = all(not math.isnan(_num(v)) for v in xs_all)
    order = {v: i for i, v in enumerate(dict.fromkeys(map(str, xs_all)))}
    for gi, (g, rs) in enumerate(groups.items()):
        xs = [_num(r.get(x)) if numeric else order[str(r.get(x))] for r in rs]
        idx = sorted(range(len(rs)), key=lambda i: xs[i])
        xs = [xs[i] for i in idx]
        rs = [rs[i] for i in idx]
        m = [_num(r.get(f"{y}_mean")) for r in rs]
        # ten colours, then the next marker: no two lines alike past the colour cycle
        color = f"C{gi % 10}"
        marker = SWEEP_MARKERS[(gi // 10) % len(SWEEP_MARKERS)]
        label = (", ".join(_group_label(k, v) for k, v in zip(by, g, strict=True)) if by
                 else "simulated (95% CI)")
        _error_bars(ax, xs, m, [_num(r.get(f"{y}_low")) for r in rs],
                    [_num(r.get(f"{y}_high")) for r in rs], logy=logy, color=color, label=label,
                    fmt=f"{marker}-")
        if exact:
            ex = [_num(r.get(exact)) for r in rs]
            ax.plot(xs, ex, linestyle="--", color=color, zorder=3,
                    label="exact" if not by else None)
    if not numeric:  # categories in order; a point at the experiment's base value says so
        names = {str(v): "base value" if v is None else str(v) for v in xs_all}
        ax.set_xticks(list(order.values()), [names[k] for k in order])
    else:
        _integer_ticks(ax.xaxis, xs_all)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    if group or exact:
        entries = len(ax.get_legend_handles_labels()[1])
        if entries <= LEGEND_INSIDE:
            ax.legend(fontsize="small")
        else:  # beside the axes, in columns of at most LEGEND_ROWS: inside, it hid the lines
            cols = -(-entries // LEGEND_ROWS)
            fig.set_size_inches(6 + 3.2 * cols, max(4.0, 0.7 + 0.16 * min(entries, LEGEND_ROWS)))
            fig.legend(fontsize="x-small", loc="outside right upper", ncols=cols)
    ax.grid(alpha=0.3)
    if not numeric:
        _upright_when_crowded(fig, ax)
    save_figure(fig, path, dpi=120)
    return path


def _upright_when_crowded(fig: Figure, ax: Any) -> bool:
    """Turn the x axis's category labels upright when side by side they overlap (long
    names: a graph file's path, a sync spec), and make the figure taller by what they then
    take, so that the axes keep their height; True when it turned them."""
    fig.draw_without_rendering()
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    boxes = [t.get_window_extent() for t in labels]
    if not any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:], strict=False)):
        return False
    for t in labels:
        t.set_rotation(90)
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + max(b.width for b in boxes) / fig.dpi)
    return True


def _group_label(group: str, value: Any) -> str:
    """A sweep line's legend: ``factor=value``; a point that leaves the factor at the
    experiment's base value (a ``POINTS`` entry without it: None) says so."""
    return f"{group}: base value" if value is None else f"{group}={value}"


def plot_summary_table(
    rows: Sequence[Mapping[str, Any]],
    factors: Sequence[str],
    metrics: Sequence[str],
    out_dir: str | Path,
) -> list[Path]:
    """One PNG per metric against the first factor (a line per combination of the others).

    The default figures of an experiment without its own ``analyse``; with no
    factor, the metric is drawn per point index. A metric no point measured (NaN
    at every point: :func:`unmeasured`) has no figure, as ``dtsim run``'s table
    leaves it out (it was an empty plot with made-up axes). Each figure is drawn
    from the points that measured its metric, against the factors that vary among
    them (the first on the x axis, a line per combination of the others). Points
    that set different factors (an experiment in ``POINTS`` parts, each leaving
    the others' factors at ``BASE``) give a figure per set of factors,
    ``{metric}_{factor=value,...}.png`` named and titled by what its points share
    (``goodput_fraction_part=trace.png``). A grid whose every factor varies and
    every point measures the metric is drawn as before.
    """
    return [plot_sweep(rs, x, m, Path(out_dir) / f"{name}.png", group=group, title=title)
            for m, rs, x, group, name, title in summary_figures(rows, factors, metrics)]


def summary_figures(rows: Sequence[Mapping[str, Any]], factors: Sequence[str],
                    metrics: Sequence[str]) -> list[tuple[str, list, str, Any, str, Any]]:
    """The figures :func:`plot_summary_table` draws, in order: ``(metric, rows, x, group,
    name, title)``, the file being ``{name}.png`` (what a command checks before it draws)."""
    out: list[tuple[str, list, str, Any, str, Any]] = []
    skip = set(unmeasured(rows, metrics))
    for m in metrics:
        if m in skip:
            continue
        mine = [r for r in rows if not _nan_mean(r.get(f"{m}_mean"))]
        # the factors a point sets (a POINTS entry leaves the others at BASE): a part is a
        # largest such set, with the points that set some of its factors only (a sweep that
        # leaves a factor at its base value at some points stays one figure)
        sets = [frozenset(f for f in factors if r.get(f) is not None) for r in mine]
        largest = [a for a in dict.fromkeys(sets) if not any(a < b for b in sets)]
        parts: dict[frozenset[str], list[Mapping[str, Any]]] = {}
        for r, a in zip(mine, sets, strict=True):
            parts.setdefault(next(b for b in largest if a <= b), []).append(r)
        figs = []
        for set_, rs in parts.items():
            varying = [f for f in factors if len({_key(r.get(f)) for r in rs}) > 1]
            if not factors:
                x, group = "point", None
            elif not varying:  # one point measured it (or all at one value of every factor)
                x, group = factors[0], None
            else:
                x, group = varying[0], tuple(varying[1:]) or None
            name, title = m, None
            if len(parts) > 1:  # one figure a part, named by the factors its points share
                fixed = [(f, rs[0].get(f)) for f in factors
                         if f in set_ and f not in varying and rs[0].get(f) is not None]
                tag = "_".join(f"{f}={v}" for f, v in fixed) or f"{len(out) + len(figs)}"
                name = f"{m}_{re.sub(r'[^A-Za-z0-9_.=+-]+', '-', tag)}"
                title = ", ".join(f"{f}={v}" for f, v in fixed) or None
            figs.append([rs, x, group, name, title])
        # parts that share the same factors at the same values (each varying another) would
        # write one file, the last part's figure over the others': each is named by its x too
        names = [f[3] for f in figs]
        for i, f in enumerate(figs):
            if names.count(f[3]) > 1:
                f[3] = f"{f[3]}_by_{re.sub(r'[^A-Za-z0-9_.=+-]+', '-', str(f[1]))}"
                f[4] = f"{f[4]}, by {f[1]}" if f[4] else f"by {f[1]}"
                if [g[3] for g in figs].count(f[3]) > 1:  # the same x too: its index
                    f[3] = f"{f[3]}_{i}"
        out += [(m, rs, x, group, name, title) for rs, x, group, name, title in figs]
    return out


def _nan_mean(v: Any) -> bool:
    return not isinstance(v, (int, float)) or math.isnan(v)


def _key(v: Any) -> str:
    """A factor's value as a hashable key (a list or dict value too)."""
    return repr(v)


def unmeasured(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> list[str]:
    """The metrics whose summary mean is NaN (or missing) at every row (none with no rows)."""
    def nan(v: Any) -> bool:
        return not isinstance(v, (int, float)) or math.isnan(v)
    return [m for m in metrics if rows and all(nan(r.get(f"{m}_mean")) for r in rows)]


def constant(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, float]:
    """The metrics whose summary mean is the same number at every point that measured it, with
    that number, when at least two points measured it (a figure of them is a flat line)."""
    out = {}
    for m in metrics:
        vals = [r.get(f"{m}_mean") for r in rows]
        vals = [v for v in vals if isinstance(v, (int, float)) and not math.isnan(v)]
        if len(vals) >= 2 and all(v == vals[0] for v in vals):
            out[m] = float(vals[0])
    return out


# --------------------------------------------------------------------------- gossip (Study B)
# Used by experiments/stubborn_gossip.py; series and estimates in, PNG out.


def _gossip_fig(path: str | Path) -> tuple[Path, Figure, Any]:
    """A one-axes figure for the gossip plots (the folder of ``path`` is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4, 4.2))
    return path, fig, fig.add_subplot()


def _finish_gossip_fig(fig: Figure, ax: Any, path: Path, *, title: str | None, xlabel: str,
                       ylabel: str, logx: bool = False, logy: bool = False) -> Path:
    """Scales, labels, legend and grid of a gossip plot, then save it to ``path``."""
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return path


def plot_gossip_series(
    series: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    title: str | None = None,
    xlabel: str = "round",
    ylabel: str = "",
    logy: bool = False,
) -> Path:
    """Simulated series with 95% bands and their exact curves.

    Parameters
    ----------
    series : list of dict
        Each with ``label``, ``x``, ``mean`` and optionally ``low``/``high``
        (a band) and ``exact`` (a dashed black curve at the same ``x``, drawn on
        top) with ``exact_label`` (default ``"exact"``; say ``"bound"`` when it
        is one).
    path : str or Path
        PNG file to write (its folder is created).
    title, xlabel, ylabel : str
    logy : bool
        Log-scale y axis (non-positive points are dropped).

    Returns
    -------
    Path
    """
    path, fig, ax = _gossip_fig(path)
    named: set[str] = set()
    for i, s in enumerate(series):
        color = f"C{i % 10}"
        x = [float(v) for v in s["x"]]
        y = [float(v) for v in s["mean"]]
        keep = [k for k, v in enumerate(y) if not logy or v > 0]
        ax.plot([x[k] for k in keep], [y[k] for k in keep], color=color, linewidth=1.0,
                marker="o", markersize=3, label=f"{s['label']} (sim, 95% band)")
        if s.get("low") is not None and s.get("high") is not None:
            lo = [float(v) for v in s["low"]]
            hi = [float(v) for v in s["high"]]
            kk = [k for k in keep if not logy or lo[k] > 0]
            ax.fill_between([x[k] for k in kk], [lo[k] for k in kk], [hi[k] for k in kk],
                            color=color, alpha=0.2, linewidth=0)
        if s.get("exact") is not None:
            ex = [float(v) for v in s["exact"]]
            ke = [k for k, v in enumerate(ex) if not logy or v > 0]
            # drawn last and on top, in black dashes over the coloured simulation
            name = s.get("exact_label", "exact")
            ax.plot([x[k] for k in ke], [ex[k] for k in ke], color="k", linestyle=(0, (4, 3)),
                    linewidth=1.2, zorder=4, label=None if name in named else name)
            named.add(name)
    _integer_ticks(ax.xaxis, [v for s in series for v in s["x"]])
    return _finish_gossip_fig(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel,
                              logy=logy)


def plot_gossip_estimates(
    x: Sequence[float],
    estimates: Sequence[Any],
    path: str | Path,
    *,
    exact_x: Sequence[float] | None = None,
    exact_y: Sequence[float] | None = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
    logx: bool = False,
    logy: bool = False,
) -> Path:
    """Point estimates with 95% intervals against a factor, with the exact curve.

    Parameters
    ----------
    x : sequence of float
        Factor values.
    estimates : sequence of Estimate
        One :class:`~sim.results.Estimate` (``mean``, ``low``, ``high``) per ``x``.
    path : str or Path
        PNG file to write.
    exact_x, exact_y : sequence of float, optional
        The exact curve (drawn as a line).
    title, xlabel, ylabel : str
    logx, logy : bool

    Returns
    -------
    Path
    """
    path, fig, ax = _gossip_fig(path)
    if exact_x is not None and exact_y is not None:
        ax.plot(list(exact_x), list(exact_y), color="k", linestyle="--", label="exact")
    _error_bars(ax, list(x), [e.mean for e in estimates], [e.low for e in estimates],
                [e.high for e in estimates], logy=logy, color="C0", label="simulated (95% CI)",
                kinds=[getattr(e, "kind", "two-sided") for e in estimates])
    if not logx:
        _integer_ticks(ax.xaxis, x)
    return _finish_gossip_fig(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel,
                              logx=logx, logy=logy)


# --------------------------------------------------------------------------- pipeline (Study A)

__all__ += ["plot_drop_vs_replicas", "plot_workers_vs_skip", "plot_kappa_sweep"]


def _pipeline_fig(path: str | Path, ncols: int = 1) -> tuple[Path, Figure, list[Any]]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4 * ncols, 4.4), layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return path, fig, axes


def plot_drop_vs_replicas(curves: Sequence[Mapping[str, Any]], path: str | Path, *,
                          stages: int, availability: float, domain_outage: float) -> Path:
    """Drop rate against replicas per stage, one line per skip budget, with the floors.

    Parameters
    ----------
    curves : list of dict
        One per skip budget: ``skip_budget``, ``replicas`` (list of r),
        ``exact`` (drop rate per r), ``simulated`` (list of ``(r, Estimate)``)
        and ``floor`` (the shared-domain limit ``P(Bin(L, rho) > s)``).
    path : path
        PNG file to write.
    stages, availability, domain_outage : float
        For the title.

    Returns
    -------
    Path
    """
    path, fig, (ax,) = _pipeline_fig(path)
    for i, c in enumerate(curves):
        color = f"C{i}"
        ax.plot(c["replicas"], c["exact"], color=color, marker=".",
                label=f"s={c['skip_budget']} exact")
        pts = c.get("simulated") or []
        if pts:
            _error_bars(ax, [r for r, _ in pts], [e.mean for _, e in pts], [e.low for _, e in pts],
                        [e.high for _, e in pts], logy=True, color=color, mfc="none",
                        kinds=[getattr(e, "kind", "two-sided") for _, e in pts])
        if c.get("floor", 0) > 0:
            ax.axhline(c["floor"], color=color, linestyle=":", linewidth=1)
    ax.axhline(0.01, color="gray", linestyle="--", linewidth=0.8, label="1% target")
    ax.set_yscale("log")
    _integer_ticks(ax.xaxis, [r for c in curves for r in c["replicas"]])
    ax.set_xlabel("replicas per stage r")
    ax.set_ylabel("drop rate P(Bin(L, q) > s)")
    ax.set_title(f"Drop rate vs r (L={stages}, a={availability}, rho={domain_outage:g}); "
                 "dotted: shared-domain floors, circles: simulated (95% CI)", fontsize="small")
    ax.legend(fontsize="x-small", ncols=2)
    ax.grid(alpha=0.3, which="both")
    save_figure(fig, path, dpi=120)
    return path


def plot_workers_vs_skip(series: Sequence[Mapping[str, Any]], path: str | Path, *,
                         stages: int, availability: float, target_drop: float) -> Path:
    """Workers needed for a target drop rate against the skip budget.

    Parameters
    ----------
    series : list of dict
        One per domain outage: ``domain_outage`` and ``points``, a list of
        ``(s, workers or None)`` (None where infeasible).
    path : path
        PNG file to write.
    stages, availability, target_drop : float
        For the title.

    Returns
    -------
    Path
    """
    path, fig, (ax,) = _pipeline_fig(path)
    k = len(series)
    feasible = [w for srs in series for _, w in srs["points"] if w is not None]
    top = 1.08 * max(feasible) if feasible else 1.0
    for i, srs in enumerate(series):
        # the rho lines coincide wherever the floor is far below the target:
        # dodge them sideways so each stays visible
        dx = 0.12 * (i - (k - 1) / 2)
        pts = [(s, w) for s, w in srs["points"] if w is not None]
        if pts:
            ax.plot([s + dx for s, _ in pts], [w for _, w in pts], color=f"C{i}",
                    marker="os^D"[i % 4], markersize=6, linestyle=("-", "--", ":")[i % 3],
                    label=f"rho={srs['domain_outage']:g}")
        bad = [s for s, w in srs["points"] if w is None]
        if bad:
            # no number of workers reaches the target: marked above the axes' data, not at 0
            ax.plot([s + dx for s in bad], [top] * len(bad), "x", color=f"C{i}", markersize=9,
                    clip_on=False,
                    label=f"rho={srs['domain_outage']:g}: infeasible (floor above target)")
        for s, w in pts:
            if (s, w) in ((0, 240), (4, 96)) and srs["domain_outage"] == 0:
                ax.annotate(f"{w}", (s + dx, w), textcoords="offset points", xytext=(6, 6))
    if any(w is None for srs in series for _, w in srs["points"]):
        ax.axhline(top, color="gray", linewidth=0.6, linestyle=":")
        ax.annotate("infeasible", (0.0, top), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(4, 4), fontsize="x-small", color="gray")
    ax.set_ylim(0, top * 1.1)
    _integer_ticks(ax.xaxis, [s for srs in series for s, _ in srs["points"]])
    ax.set_xlabel("skip budget s")
    ax.set_ylabel("workers L*r")
    ax.set_title(f"Workers needed for drop rate <= {target_drop:g} vs skip budget "
                 f"(L={stages}, a={availability})\nlines dodged sideways where they coincide",
                 fontsize="small")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=120)
    return path


def plot_kappa_sweep(rows: Sequence[Mapping[str, Any]], path: str | Path, *,
                     stages: int, availability: float, domain_outage: float) -> Path:
    """Cost-optimal (r, s) and its gain over no-skip against the skip penalty kappa.

    Parameters
    ----------
    rows : list of dict
        One per kappa: ``kappa``, ``replicas``, ``skip_budget``, ``gain``
        (exact) and optionally ``gain_sim``, ``gain_low``, ``gain_high``.
    path : path
        PNG file to write.
    stages, availability, domain_outage : float
        For the title.

    Returns
    -------
    Path
    """
    path, fig, (ax1, ax2) = _pipeline_fig(path, ncols=2)
    k = [r["kappa"] for r in rows]
    ax1.plot(k, [r["skip_budget"] for r in rows], "o-", color="C0", label="skip budget s")
    ax1.plot(k, [r["replicas"] for r in rows], "s-", color="C1", label="replicas r")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xticks(k, [f"{v:g}" for v in k])
        ax.minorticks_off()
    _integer_ticks(ax1.yaxis, [r["skip_budget"] for r in rows] + [r["replicas"] for r in rows])
    ax1.set_xlabel("skip penalty kappa")
    ax1.set_ylabel("optimal design")
    ax1.set_title("Optimal (r, s) vs kappa", fontsize="small")
    ax1.legend(fontsize="small")
    ax1.grid(alpha=0.3)
    ax2.plot(k, [r["gain"] for r in rows], "k--", label="exact")
    if all("gain_sim" in r for r in rows):
        _error_bars(ax2, k, [r["gain_sim"] for r in rows], [r["gain_low"] for r in rows],
                    [r["gain_high"] for r in rows], logy=False, color="C0",
                    label="simulated (95% CI)")
    ax2.axhline(1.0, color="gray", linewidth=0.8)
    ax2.set_xlabel("skip penalty kappa")
    ax2.set_ylabel("gain = no-skip cost / optimal cost")
    ax2.set_title("Gain of the optimal design over no-skip vs kappa", fontsize="small")
    ax2.legend(fontsize="small")
    ax2.grid(alpha=0.3)
    fig.suptitle(f"Cost-optimal pipeline design (L={stages}, a={availability}, "
                 f"rho={domain_outage:g})", fontsize="medium")
    save_figure(fig, path, dpi=120)
    return path


# --------------------------------------------------------------------------- stress tests: gossip
# Used by experiments/sparse_graphs.py, async_latency.py, stronger_adversaries.py and churn.py
# (issue 8, experiments 7-10): simulated curves or points with 95% intervals, their exact or
# closed-form references, and a caption line under the axes.

__all__ += ["plot_stress_panels"]


def plot_stress_panels(
    panels: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    caption: str = "",
    title: str | None = None,
    ncols: int | None = None,
) -> Path:
    """One or more panels of simulated series (95% intervals) against reference curves.

    Parameters
    ----------
    panels : list of dict
        One per panel, with ``xlabel``, ``ylabel`` and optionally ``title``,
        ``logx``, ``logy``, ``ylim``, ``hline`` (a horizontal reference
        value), ``xticks`` (``(positions, labels)``, e.g. for categorical
        axes; ``rotate=False`` keeps the labels level), ``legend``
        (``"outside"`` puts it right of the axes) and ``series``: a list of
        dicts with ``label``, ``x``, ``mean`` and optionally ``color``,
        ``low``/``high`` (error bars for ``style="points"`` with ``marker``,
        else a band), ``kinds`` (each point's :attr:`~sim.results.Estimate.kind`;
        ``"upper"`` points, no event seen, are drawn as bounds) and ``ref_x``/``ref_y`` with ``ref_label`` (a reference
        curve, dashed, same colour), ``ref_style`` (a matplotlib line style,
        default ``"--"``; ``"none"`` with ``ref_marker`` draws markers only).
    path : str or Path
        PNG file to write (its folder is created).
    caption : str
        A line of text under the panels saying what is drawn.
    title : str, optional
        Figure title.
    ncols : int, optional
        Panels per row (default: all in one row).

    Returns
    -------
    Path
        The file written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    k = max(len(panels), 1)
    cols = min(k, ncols or k)
    rows = -(-k // cols)
    wide = any(p.get("legend") == "outside" for p in panels)
    fig = Figure(figsize=(5.6 * cols + (3.0 if wide else 0.0), 4.2 * rows + 0.6), layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(k)]
    for ax, panel in zip(axes, panels, strict=False):
        logy = bool(panel.get("logy"))
        for i, s in enumerate(panel.get("series", [])):
            color = s.get("color", f"C{i % 10}")
            x = [_num(v) for v in s.get("x", [])]
            y = [_num(v) for v in s.get("mean", [])]
            kinds = list(s.get("kinds") or ["two-sided"] * len(y))
            keep = [j for j, v in enumerate(y)
                    if kinds[j] == "upper" or (math.isfinite(v) and (not logy or v > 0))]
            xs, ys = [x[j] for j in keep], [y[j] for j in keep]
            lo = s.get("low")
            hi = s.get("high")
            if s.get("style") == "points":
                nan_list = [math.nan] * len(keep)
                _error_bars(ax, xs, ys,
                            [_num(lo[j]) for j in keep] if lo is not None and hi is not None else nan_list,
                            [_num(hi[j]) for j in keep] if lo is not None and hi is not None else nan_list,
                            logy=logy, color=color, label=s.get("label"), fmt=s.get("marker", "o"),
                            kinds=[kinds[j] for j in keep])
            else:
                ax.plot(xs, ys, color=color, label=s.get("label"))
                if lo is not None and hi is not None:
                    band = [j for j in keep if math.isfinite(_num(lo[j])) and math.isfinite(_num(hi[j]))
                            and (not logy or _num(lo[j]) > 0)]
                    ax.fill_between([x[j] for j in band], [_num(lo[j]) for j in band],
                                    [_num(hi[j]) for j in band], color=color, alpha=0.2, linewidth=0)
            if s.get("ref_x") is not None and s.get("ref_y") is not None:
                rx = [_num(v) for v in s["ref_x"]]
                ry = [_num(v) for v in s["ref_y"]]
                kr = [j for j, v in enumerate(ry) if math.isfinite(v) and (not logy or v > 0)]
                ax.plot([rx[j] for j in kr], [ry[j] for j in kr], color=color,
                        linestyle=s.get("ref_style", "--"), marker=s.get("ref_marker"),
                        markersize=14 if s.get("ref_marker") else None, label=s.get("ref_label"))
        if panel.get("hline") is not None:
            ax.axhline(float(panel["hline"]), color="gray", linewidth=0.8, linestyle=":")
        if panel.get("logx"):
            ax.set_xscale("log")
        elif panel.get("xticks") is None:
            _integer_ticks(ax.xaxis, [v for s in panel.get("series", []) for v in s.get("x", [])])
        if logy:
            ax.set_yscale("log")
        if panel.get("ylim") is not None:
            ax.set_ylim(*panel["ylim"])
        if panel.get("xticks") is not None:
            from matplotlib.ticker import NullLocator

            pos, names = panel["xticks"]
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(list(pos), list(names), rotation=30 if panel.get("rotate", True) else 0,
                          ha="right" if panel.get("rotate", True) else "center", fontsize="small")
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        if panel.get("title"):
            ax.set_title(panel["title"], fontsize="small")
        if any(s.get("label") or s.get("ref_label") for s in panel.get("series", [])):
            if panel.get("legend") == "outside":
                ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
            else:
                ax.legend(fontsize="x-small")
        ax.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title, fontsize="medium")
    if caption:
        fig.get_layout_engine().set(rect=(0, 0.1 / rows, 1, 1 - 0.1 / rows))
        fig.text(0.01, 0.01, caption, fontsize="x-small", wrap=True, va="bottom")
    save_figure(fig, path, dpi=120)
    return path


# --------------------------------------------------------------------------- traces


#: The creator every figure names in its metadata (PNG, PDF, SVG, PS and EPS): how a later
#: command knows a figure at its path for dtsim's own, which it may replace.
FIGURE_CREATOR = "dtsim figure"
_CREATOR_FORMATS = ("png", "pdf", "svg", "ps", "eps")


def save_figure(fig: Figure, path: str | Path, *, dpi: int) -> Path:
    """``fig.savefig`` into a temporary file beside ``path``, then renamed over it (a crash
    midway leaves the earlier file whole: :func:`sim.errors.replace_atomic`), the format of
    ``path``'s suffix, its metadata naming :data:`FIGURE_CREATOR` where the format holds
    metadata."""
    from .errors import replace_atomic

    p = Path(path)
    fmt = p.suffix.lower().lstrip(".") or "png"
    meta = {"Creator": FIGURE_CREATOR} if fmt in _CREATOR_FORMATS else None
    return replace_atomic(p, lambda target: fig.savefig(target, dpi=dpi, format=fmt,
                                                        metadata=meta))


def is_dtsim_figure(path: str | Path) -> bool:
    """Whether the figure at ``path`` names :data:`FIGURE_CREATOR` (in its first or last
    64 KiB, where PNG, SVG, PS and PDF keep their metadata)."""
    from .errors import head_bytes, tail_bytes

    mark = FIGURE_CREATOR.encode()
    return mark in head_bytes(Path(path), 2**16) or mark in tail_bytes(Path(path), 2**16)


def check_figure_file(name: str, path: str | Path, *, overwrite: bool = False) -> Path:
    """Refuse, before any work, a figure path matplotlib cannot write.

    The file name must end in a format matplotlib writes (``.png``, ``.pdf``,
    ``.svg``...) -- without one, matplotlib would add ``.png`` to the name --
    and be writable (:func:`sim.errors.check_output_file`); unless ``overwrite``, a file
    already there must be a figure dtsim wrote (:func:`is_dtsim_figure`).

    Raises
    ------
    ConfigError
        ``'<name>' must be a file ending in .png, .pdf, ...: <path>``.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    from .errors import ConfigError, check_replaceable

    kinds = sorted(FigureCanvasBase.get_supported_filetypes())
    ext = Path(str(path)).suffix.lower().lstrip(".")
    if ext not in kinds:
        raise ConfigError(name, "a figure file ending in " + ", ".join(f".{k}" for k in kinds),
                          str(path))
    return check_replaceable(name, path, overwrite=overwrite, ours=is_dtsim_figure,
                             kind="a figure")


def plot_trace(times: Sequence[float], counts: Sequence[float], end: float, path: str | Path, *,
               band: Mapping[str, Sequence[float]] | None = None, capacity: int | None = None,
               title: str | None = None) -> Path:
    """Instances up against time (hours) as a step function, with an optional model band.

    Parameters
    ----------
    times, counts : sequence
        Change times (seconds) and the count from each on; ``end`` ends the span.
    path : path
        PNG file to write.
    band : dict, optional
        ``t`` (seconds), ``low``, ``mean``, ``high``: a fitted model's pointwise envelope.
    capacity : int, optional
        Drawn as a dotted line.
    """
    path, fig, (ax,) = _pipeline_fig(path)
    h = [t / 3600.0 for t in times] + [end / 3600.0]
    ax.step(h, list(counts) + [counts[-1]], where="post", color="C0", lw=1.2, label="trace")
    if band is not None:
        bt = [t / 3600.0 for t in band["t"]]
        ax.fill_between(bt, band["low"], band["high"], color="C1", alpha=0.25, lw=0,
                        label="fitted model, 5-95%")
        ax.plot(bt, band["mean"], color="C1", lw=1.0, ls="--", label="fitted model, mean")
    if capacity is not None:
        ax.axhline(capacity, color="grey", ls=":", lw=1.0, label="capacity")
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("instances up")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=120)
    return path


# --------------------------------------------------------------------------- timelines (Gantt)

__all__ += ["plot_timeline", "TIMELINE_STYLE", "STEP_LINES", "STEP_LABELS", "THIN_BAR", "THIN_EDGE"]

#: A Gantt chart draws its steps' boundaries up to this many steps (a lost step's in red
#: whatever their number, up to as many lost steps); past it they are dashes every few
#: pixels that hide the bars, so the title says how many were left out.
STEP_LINES = 60
#: ... and labels each step with its bubble fraction up to this many (two lines of 7-point
#: text, about 55 pixels wide: a 10-inch figure holds about a dozen side by side).
STEP_LABELS = 12

#: A Gantt bar narrower than this fraction of the run's drawn extent (about 1.5 pixels of a
#: 10-inch figure's axes at 100 dpi) is edged in its own colour, :data:`THIN_EDGE` points wide,
#: so that it shows: the white edge that parts wider bars would cover it.
THIN_BAR = 1 / 500
#: The edge of a thin bar, in points (a pixel at 100 dpi is 0.72 points).
THIN_EDGE = 0.75

#: Kind -> (face colour, hatch, legend label) of the Gantt chart's bars.
TIMELINE_STYLE: dict[str, tuple[str, str | None, str]] = {
    "forward": ("#4C72B0", None, "forward pass"),
    "backward": ("#DD8452", None, "backward pass"),
    "recompute": ("#A1C9F4", "..", "recomputed forward"),
    "step": ("#8172B3", None, "step (job engine)"),
    "transfer": ("#55A868", None, "transfer (activation, gradient, flow, exchange)"),
    "queue": ("#B6E3C0", "..", "transfer waiting in its FIFO channel"),
    "collective": ("#937860", None, "collective (all-reduce, all-gather)"),
    "checkpoint": ("#DA8BC3", None, "checkpoint"),
    "restart": ("#8C8C8C", None, "restart, weight download, waiting"),
    "failure": ("#C44E52", "//", "down (failure, preemption)"),
    "other": ("#CCB974", None, "other"),
}
_MARKS = {"preemption": ("v", "#C44E52"), "skip": ("x", "black"), "failure": ("|", "#C44E52")}


def plot_timeline(gantt: Any, path: str | Path, *, dpi: int = 100) -> tuple[Path, dict[str, Any]]:
    """Draw a timeline as a Gantt chart: a row per device and stream, bars by kind.

    Parameters
    ----------
    gantt : sim.timeline.Gantt
        The rows, steps and counters of a timeline (:func:`sim.timeline.gantt`).
    path : path
        The image written (its folder is created).

    Returns
    -------
    (Path, dict)
        The file, and the drawn artists: ``bars`` maps each row's index to a
        list of ``(kind, lost, lane, BrokenBarHCollection)``, ``steps`` holds the
        step boundary lines, ``marks`` the instants' markers.

    Notes
    -----
    Compute is coloured by pass (forward, backward, recomputed forward), a pass
    lost to a failure is hatched; transfers, collectives, checkpoints, restarts
    and down intervals have their own colours. Step boundaries are dashed
    lines labelled with the step and its bubble fraction (the idle fraction of
    the live workers, up and holding their weights, during its passes) up to
    :data:`STEP_LABELS` steps, unlabelled
    up to :data:`STEP_LINES`; past that only lost steps' starts are drawn (red),
    and the title says so. The title gives the overall bubble fraction.
    """
    from matplotlib.patches import Patch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = gantt.rows
    n = max(len(rows), 1)
    counters = gantt.counters
    height = min(2.0 + 0.3 * n, 40.0) + (1.6 if counters else 0.0)
    fig = Figure(figsize=(10.0, height), layout="constrained")
    if counters:
        ax, cx = fig.subplots(2, 1, sharex=True, height_ratios=[max(n, 4), 3])
    else:
        ax, cx = fig.add_subplot(), None
    drawn: dict[str, Any] = {"bars": {}, "steps": [], "marks": []}
    used: set[str] = set()
    # a bar narrower than THIN_BAR of the run's extent (about a pixel and a half of the
    # axes) is edged in its own colour, THIN_EDGE points wide: the white edge that parts
    # touching bars covered it whole (an 8-stage step of 96 micro-batches over 20 s showed
    # its 5 ms passes as near-white specks)
    ends = [t for r in rows for b in r.bars for t in (b.start, b.end)]
    thin_width = (max(ends) - min(ends)) * THIN_BAR if ends else 0.0
    for y, r in enumerate(rows):
        groups: dict[tuple[str, bool, int, bool], list[tuple[float, float]]] = {}
        for b in r.bars:
            thin = not b.lost and b.end - b.start < thin_width
            groups.setdefault((b.kind, b.lost, b.lane, thin), []).append(
                (b.start, b.end - b.start))
        out = []
        h = 0.8 / r.lanes  # overlapping events of one stream: sub-rows of the row
        for (kind, lost, lane, thin), spans in groups.items():
            face, hatch, _ = TIMELINE_STYLE.get(kind, TIMELINE_STYLE["other"])
            edge = face if thin else "white" if not lost else "black"
            coll = ax.broken_barh(spans, (y - 0.4 + lane * h, h), facecolors=face,
                                  edgecolors=edge, linewidth=THIN_EDGE if thin else 0.3,
                                  hatch="xxx" if lost else hatch, alpha=0.55 if lost else 1.0)
            out.append((kind, lost, lane, coll))
            used.add(kind)
        drawn["bars"][y] = out
        for t, cat, _name in r.marks:
            m, colour = _MARKS.get(cat, ("*", "black"))
            drawn["marks"].append(ax.plot([t], [y], marker=m, color=colour, ms=6,
                                          linestyle="none")[0])
    all_steps = gantt.steps
    lines = all_steps if len(all_steps) <= STEP_LINES else [s for s in all_steps if s.lost]
    if len(lines) > STEP_LINES:
        lines = []
    labelled = len(lines) <= STEP_LABELS
    for s in lines:
        colour = "#C44E52" if s.lost else "black"
        drawn["steps"].append(ax.axvline(s.start, color=colour, ls="--", lw=0.8))
        if not labelled:
            continue
        label = f"step {s.step}" + (" (lost)" if s.lost else "")
        if s.bubble is not None:
            b = f"{s.bubble:.3f}"
            label += f"\nbubble {'0.000' if float(b) == 0 else b}"  # -2.2e-16: no sign
        ax.annotate(label, (s.start, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", va="top", fontsize=7,
                    color=colour)
    if lines and len(lines) == len(all_steps):
        last = max(all_steps, key=lambda s: s.end)
        drawn["steps"].append(ax.axvline(last.end, color="black", ls="--", lw=0.8))
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=8 if n < 40 else 6)
    ax.set_ylim(len(rows) - 0.5, -0.5 - (0.9 if lines and labelled else 0.0))
    ax.set_ylabel("device and stream")
    title = gantt.title
    if gantt.bubble is not None:
        b = f"{gantt.bubble:.4f}"
        b = "0.0000" if float(b) == 0 else b  # float residue (-5.7e-12) printed no sign
        title += (f"\nbubble fraction {b} (idle share of the live workers during the steps' "
                  "passes: down ones, or ones fetching weights, left out)")
    if len(lines) < len(all_steps):
        which = "only the lost steps' starts drawn" if lines else "no step boundary drawn"
        title += (f"\n({len(all_steps):,} steps, more than {STEP_LINES}: {which}; "
                  "--timeline-window T0:T1 records a part of the run)")
    elif lines and not labelled:
        title += f"\n({len(all_steps):,} step boundaries, labelled up to {STEP_LABELS} steps)"
    if gantt.rows_left_out:
        title += f"\n(first {len(rows)} rows drawn; {gantt.rows_left_out} more in the file)"
    if gantt.left_out:
        title += f"\n({gantt.left_out:,} events past the file's cap are not in it)"
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(facecolor=TIMELINE_STYLE[k][0], hatch=TIMELINE_STYLE[k][1],
                     label=TIMELINE_STYLE[k][2]) for k in TIMELINE_STYLE if k in used]
    if any(b.lost for r in rows for b in r.bars):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="xxx",
                             label="pass lost to a failure"))
    if lines:
        from matplotlib.lines import Line2D

        if len(lines) == len(all_steps):
            handles.append(Line2D([], [], color="black", ls="--", lw=0.8,
                                  label="step boundary"))
        if any(s.lost for s in lines):
            handles.append(Line2D([], [], color="#C44E52", ls="--", lw=0.8,
                                  label="lost step (its start)"))
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                  frameon=False)
    if cx is not None:
        for name, pts in sorted(counters.items()):
            pts = sorted(pts)
            cx.step([t for t, _ in pts], [v for _, v in pts], where="post", lw=0.8, label=name)
        cx.set_ylabel("link utilisation")
        cx.set_ylim(bottom=0.0)
        cx.grid(alpha=0.3)
        if len(counters) <= 12:
            cx.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
        cx.set_xlabel(f"simulated time ({gantt.unit})")
    else:
        ax.set_xlabel(f"simulated time ({gantt.unit})")
    save_figure(fig, path, dpi=dpi)
    return path, drawn
