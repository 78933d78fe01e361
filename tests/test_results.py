"""Tests of sim.results (estimates, cells, summaries, the report writer) and dtsim reproduce."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from sim.cli import main
from sim.results import (
    Estimate,
    as_array,
    crossing,
    estimate_text,
    format_4g,
    format_number,
    from_cell,
    judge_bound,
    judge_equal,
    judge_optimal,
    log_mean_ci,
    lognormal_mean_ci,
    markdown_table,
    mean_ci,
    power_ci,
    proportion_ci,
    rate_ci,
    ratio_ci,
    read_csv,
    skewed_ratio_ci,
    summarize,
    summary_rows,
    to_cell,
    write_csv,
    write_report,
    write_tables,
)


def test_mean_ci_matches_student_t():
    """mean_ci is the sample mean with a Student-t half-width over replications."""
    x = [1.0, 2.0, 4.0, 7.0]
    e = mean_ci(x)
    se = np.std(x, ddof=1) / 2
    assert e.mean == 3.5 and e.se == pytest.approx(se)
    assert e.high - e.mean == pytest.approx(stats.t.ppf(0.975, 3) * se)
    assert e.n == 4 and e.contains(3.5) and not e.contains(100)


def test_mean_ci_edge_cases():
    """One value gives no interval (not [-inf, inf]), none gives NaN; NaNs are counted, not hidden."""
    one = mean_ci([2.0])
    assert one.mean == 2.0 and one.kind == "none" and not one.has_interval
    assert not one.contains(2.0) and str(one) == "2 (no interval, n = 1)"
    assert judge_equal(one, 2.0).holds is None
    assert math.isnan(mean_ci([]).mean)
    e = mean_ci([1.0, float("nan"), 3.0])
    assert e.n == 2 and e.dropped == 1 and str(e).endswith("(1 NaN left out)")


@pytest.mark.slow  # a coverage study (4000 intervals); the t formula: test_mean_ci_matches_student_t
def test_mean_ci_coverage_is_95_percent():
    """About 95% of intervals from 5 normal replications cover the true mean (a z interval would not)."""
    rng = np.random.default_rng(12345)
    trials = 4000
    hits = sum(mean_ci(rng.normal(1.0, 2.0, size=5)).contains(1.0) for _ in range(trials))
    se = math.sqrt(0.95 * 0.05 / trials)
    assert abs(hits / trials - 0.95) < 4 * se  # a normal-quantile interval covers ~0.88 here


def test_proportion_ci_is_wilson_inside_unit_interval():
    """proportion_ci is the Wilson score interval; it stays in [0, 1] where a Wald interval does not."""
    e = proportion_ci(1, 750)
    p, z = 1 / 750, stats.norm.ppf(0.975)
    wald_low = p - z * math.sqrt(p * (1 - p) / 750)
    assert wald_low < 0 < e.low < p < e.high < 1
    # Wilson ends solve |p_hat - p| = z sqrt(p (1 - p) / N)
    for end in (e.low, e.high):
        assert abs(p - end) == pytest.approx(z * math.sqrt(end * (1 - end) / 750), rel=1e-9)
    full = proportion_ci(20, 20)
    assert full.high == 1.0 and full.low < 1.0


def test_proportion_ci_no_event_is_a_one_sided_bound():
    """With no event the estimate is an upper bound 1 - 0.05**(1/N), printed and judged as "below X"."""
    e = proportion_ci(0, 1000)
    assert e.kind == "upper" and e.high == pytest.approx(1 - 0.05 ** (1 / 1000))
    assert str(e) == f"below {e.high:.6g}"
    assert judge_equal(e, 1e-4).holds is True and judge_equal(e, 0.01).holds is False
    assert "one-sided" in judge_equal(e, 1e-4).rule


@pytest.mark.slow  # a coverage study (4000 intervals); the bound's formula: the test above
def test_proportion_ci_covers_a_rare_rate_with_its_no_event_bound():
    """At p = 0.002 and N = 1000 (no event 13.5 % of the time) the intervals cover 95 %."""
    # the bound covers: at p = 0.003 and N = 1000, P(no event) = 0.05 when p is at the bound
    rng = np.random.default_rng(7)
    p_true = 0.002
    hits = 0
    for _ in range(4000):
        k = int(rng.binomial(1000, p_true))
        hits += proportion_ci(k, 1000).contains(p_true)
    assert abs(hits / 4000 - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 4000) + 0.01


@pytest.mark.slow  # a coverage study (2000 intervals); rate_ci's ends: test_rate_ci_bounds_and_edges
def test_rate_ci_covers_clustered_rare_rates_where_t_misses_above():
    """rate_ci covers a rare rate from correlated replications; a t-interval misses above far more than below."""
    rng = np.random.default_rng(2024)
    p, reps = 0.01, 20
    cover = t_cover = above = t_above = below = t_below = 0
    runs = 2000
    for _ in range(runs):
        # bursts: each replication is 20 blocks of 10 equal trials (strong correlation)
        rates = rng.binomial(20, p, size=reps) / 20
        e, t = rate_ci(rates), mean_ci(rates)
        cover += e.contains(p)
        t_cover += t.contains(p)
        above += p > e.high
        t_above += p > t.high
        below += p < e.low
        t_below += p < t.low
    se = math.sqrt(0.95 * 0.05 / runs)
    assert abs(cover / runs - 0.95) < 4 * se + 0.01
    assert above / runs < 0.04 and below / runs < 0.04
    assert t_above / runs > 0.08  # the symmetric interval misses above (exact above it)


def test_rate_ci_bounds_and_edges():
    """All-zero rates give a bound from the trials or the replications; one replication gives no interval."""
    z = rate_ci([0.0] * 10)
    assert z.kind == "upper" and z.high == pytest.approx(1 - 0.05 ** 0.1)
    zt = rate_ci([0.0] * 10, trials=100)
    assert zt.high == pytest.approx(1 - 0.05 ** (1 / 1000))
    assert rate_ci([0.3]).kind == "none"
    e = rate_ci([0.1, float("nan"), 0.2, 0.15])
    assert e.dropped == 1 and 0 <= e.low < e.mean < e.high <= 1
    with pytest.raises(ValueError):
        rate_ci([1.5, 0.1])


@pytest.mark.slow  # a coverage study (2000 intervals); the formula: test_ratio_ci_is_the_delta_method
def test_ratio_ci_delta_method_covers_ratio_of_means():
    """ratio_ci's interval covers E[Y]/E[X] 95 % of the time (20 replications)."""
    rng = np.random.default_rng(99)
    runs, n, true = 2000, 20, 0.45
    hits = 0
    for _ in range(runs):
        x = rng.chisquare(9, size=n)
        y = x * rng.beta(4.5, 5.5, size=n)  # E[Y | X] = 0.45 X
        e = ratio_ci(y, x)
        hits += e.contains(true)
    assert abs(hits / runs - 0.95) < 4 * math.sqrt(0.95 * 0.05 / runs)


def test_ratio_ci_is_the_delta_method():
    """ratio_ci estimates mean(Y)/mean(X) with the delta-method se and a Student-t half-width."""
    y, x = np.array([1.0, 2.0, 4.0]), np.array([2.0, 3.0, 5.0])
    e = ratio_ci(y, x, log=False)
    r = 7 / 10
    assert e.mean == pytest.approx(r)
    assert e.se == pytest.approx(np.std(y - r * x, ddof=1) / (math.sqrt(3) * x.mean()))
    assert e.high - e.mean == pytest.approx(stats.t.ppf(0.975, 2) * e.se)


def test_power_ci_maps_the_ends():
    """power_ci maps every end of the interval by v -> v**p."""
    e = ratio_ci([0.2, 0.25, 0.3], [1.0, 1.0, 1.0])
    c = power_ci(e, 0.5)
    assert c.mean == pytest.approx(0.25**0.5) and c.low == pytest.approx(e.low**0.5)
    assert c.high == pytest.approx(e.high**0.5)


def test_log_mean_ci_stays_positive_and_refuses_negative_values():
    """log_mean_ci of positive data has a positive lower end; a negative value is refused."""
    x = np.random.default_rng(5).lognormal(0.0, 0.5, size=20)
    e = log_mean_ci(x)
    assert 0 < e.low < x.mean() < e.high
    with pytest.raises(ValueError):
        log_mean_ci([-1.0, 2.0])


@pytest.mark.slow  # a coverage study (3000 intervals); its cheap checks: the test above
def test_log_mean_ci_covers_lognormal_mean_better_than_t():
    """log_mean_ci stays positive and misses above less often than the t interval on a skewed mean."""
    rng = np.random.default_rng(5)
    runs, n, sigma = 3000, 20, 0.5
    true = math.exp(sigma**2 / 2)
    above = t_above = 0
    for _ in range(runs):
        x = rng.lognormal(0.0, sigma, size=n)
        e, t = log_mean_ci(x), mean_ci(x)
        assert e.low > 0
        above += true > e.high
        t_above += true > t.high
    # the t interval misses above about 6 % of the time here, the log interval under 5 %
    assert above < t_above - 20
    assert above / runs < 0.05 < t_above / runs
    with pytest.raises(ValueError):
        log_mean_ci([-1.0, 2.0])


def test_lognormal_mean_ci_is_cox():
    """lognormal_mean_ci is Cox's interval; zero is refused."""
    x = np.array([1.0, 2.0, 4.0, 8.0])
    e = lognormal_mean_ci(x)
    ly = np.log(x)
    m, s2 = ly.mean(), ly.var(ddof=1)
    assert e.mean == pytest.approx(math.exp(m + s2 / 2))
    w = stats.norm.ppf(0.975) * math.sqrt(s2 / 4 + s2**2 / 6)
    assert e.low == pytest.approx(math.exp(m + s2 / 2 - w)) and e.method == "cox"
    with pytest.raises(ValueError):
        lognormal_mean_ci([0.0, 1.0])


@pytest.mark.slow  # a coverage study (3000 intervals); the formula: test_lognormal_mean_ci_is_cox
def test_lognormal_mean_ci_covers_a_lognormal_mean():
    """On log-normal data (sigma 1, n 20) Cox's interval misses above far less than log-t."""
    rng = np.random.default_rng(11)
    runs, true = 3000, math.exp(0.5)
    hits = above = log_above = 0
    for _ in range(runs):
        y = rng.lognormal(0.0, 1.0, size=20)
        c = lognormal_mean_ci(y)
        hits += c.contains(true)
        above += true > c.high
        log_above += true > log_mean_ci(y).high
    assert 0.92 < hits / runs < 0.97
    # log-t misses above about 10 % of the time here, Cox's interval about 6 %
    assert above / runs + 0.03 < log_above / runs
    with pytest.raises(ValueError):
        lognormal_mean_ci([0.0, 1.0])


def test_skewed_ratio_ci_keeps_the_ratio_of_means_and_is_consistent():
    """skewed_ratio_ci is the ratio of means with a log interval at least the delta one; unlike Cox's, it stays centred."""
    _skewed_ratio_ci_checks(coverage=False)


@pytest.mark.slow  # a coverage study (2000 intervals) after the checks of the test above
def test_skewed_ratio_ci_covers_a_lognormal_mean():
    """The same checks, then: on a log-normal law with 20 replications it covers 93-98.5 %."""
    _skewed_ratio_ci_checks(coverage=True)


def _skewed_ratio_ci_checks(coverage: bool) -> None:
    rng = np.random.default_rng(21)
    y, x = rng.lognormal(0.0, 1.0, 20), rng.uniform(1.0, 2.0, 20)
    e, d = skewed_ratio_ci(y, x), ratio_ci(y, x)
    assert e.mean == pytest.approx(y.mean() / x.mean()) and e.method == "log-max"
    assert e.low <= d.low and e.high >= d.high and e.low > 0
    # a bounded, left-skewed law (not log-normal): with 4000 replications Cox's estimate is off
    big = rng.beta(1.0, 0.3, 4000)
    true = 1.0 / 1.3
    assert skewed_ratio_ci(big).contains(true) and not lognormal_mean_ci(big).contains(true)
    if not coverage:
        return
    # coverage on a log-normal law with 20 replications
    hits = 0
    for _ in range(2000):
        hits += skewed_ratio_ci(rng.lognormal(0.0, 1.0, 20)).contains(math.exp(0.5))
    assert 0.93 < hits / 2000 < 0.985


def test_verdicts_state_their_rules():
    """Each verdict says yes/no/not judged and the rule that decided it."""
    e = mean_ci([1.0, 2.0, 3.0])
    assert judge_equal(e, 2.0).holds and not judge_equal(e, 50.0).holds
    assert "inside" in judge_equal(e, 2.0).rule
    assert judge_equal(e, None).holds is None
    assert judge_bound(e, 1.0).holds and not judge_bound(e, -10.0).holds
    assert judge_bound(e, 10.0, claim="at least").holds is False
    assert judge_bound(e, 2.5, mode="confirmed").holds is False  # 2.5 is inside the interval
    assert judge_bound(e, 20.0, mode="confirmed").holds is True
    assert "holds only if the whole 95% interval lies at or below" in judge_bound(e, 20.0, mode="confirmed").rule
    assert str(judge_bound(e, 1.0)).startswith("yes (")
    chosen = mean_ci([10.0, 10.1, 9.9])
    worse, better = mean_ci([12.0, 12.1, 11.9]), mean_ci([5.0, 5.1, 4.9])
    v = judge_optimal("a", {"a": chosen, "b": worse})
    assert v.holds and "neighbours simulated: b" in v.rule
    v = judge_optimal("a", {"a": chosen, "b": worse, "c": better})
    assert v.holds is False and "better: c" in v.rule
    assert judge_optimal("a", {"a": chosen, "b": mean_ci([1.0])}).holds is None


def test_summarize_skips_errors():
    """summarize estimates numeric metrics over records without error."""
    recs = [{"replication": 0, "seed": 1, "y": 1.0, "error": ""},
            {"replication": 1, "seed": 1, "y": 3.0, "error": ""},
            {"replication": 2, "seed": 1, "error": "boom"}]
    out = summarize(recs)
    assert list(out) == ["y"] and out["y"].mean == 2.0 and out["y"].n == 2


def test_cells_round_trip():
    """to_cell/from_cell keep scalars and turn arrays into JSON text."""
    assert to_cell(np.float64(0.1)) == 0.1 and type(to_cell(np.int64(3))) is int
    assert to_cell(np.array([1, 2])) == "[1,2]" and to_cell((1, "a")) == '[1,"a"]'
    assert to_cell(np.bool_(True)) is True
    for v in (0, -4, 0.1, 1e-300, "ring", True, False):
        assert from_cell(str(v) if not isinstance(v, float) else repr(v)) == v
    assert from_cell("") is None and math.isnan(from_cell("nan"))


def test_write_read_csv_round_trip(tmp_path):
    """write_csv/read_csv keep records (union of keys)."""
    recs = [{"a": 1, "b": 0.5}, {"a": 2, "c": "x"}]
    back = read_csv(write_csv(recs, tmp_path / "r.csv"))
    assert back == [{"a": 1, "b": 0.5, "c": None}, {"a": 2, "b": None, "c": "x"}]


def test_summary_rows_per_point():
    """summary_rows gives one row per point with mean, se and interval, counting errors."""
    recs = [{"point": 0, "y": 1.0, "error": ""}, {"point": 0, "y": 3.0, "error": ""},
            {"point": 1, "y": 5.0, "error": ""}, {"point": 1, "error": "x"}]
    rows = summary_rows(recs, [{"a": 1}, {"a": 2}, {"a": 3}], metrics=["y"])
    assert [r["a"] for r in rows] == [1, 2, 3]
    e = mean_ci([1.0, 3.0])
    assert (rows[0]["y_mean"], rows[0]["y_low"], rows[0]["y_high"]) == (e.mean, e.low, e.high)
    assert (rows[1]["replications"], rows[1]["errors"]) == (1, 1)
    assert rows[2]["replications"] == 0 and math.isnan(rows[2]["y_mean"])


def test_format_number():
    """Numbers in tables: integers plain, others 4 significant digits."""
    assert format_number(240) == "240" and format_number(0.0046913) == "0.004691"
    assert format_number(float("nan")) == "nan" and format_number(None) == ""
    # one format: 4 significant digits, given to the gap when a value is within 0.01 of 1
    assert format_number(0.997443) == "1 - 0.002557" and format_number(0.999899) == "1 - 0.000101"
    assert format_number(1.0004) == "1 + 0.0004" and format_number(-0.9991) == "-(1 - 0.0009)"
    assert format_number(0.98) == "0.98" and format_number(0.4444444) == "0.4444"


def test_an_interval_is_written_in_one_number_form():
    """The claim tables of dtsim reproduce and the report: an interval that crosses 1 is written
    with 4 significant digits throughout, not ``1.069 [1 - 0.002557, 1.141]`` (the form the
    terminal table of reproduce and the Study A kappa-sweep claim printed); all three within
    0.01 of 1 keep the gap form; an exact value has no interval."""
    gain = Estimate(mean=1.069, se=0.036, low=0.997443, high=1.141, n=10)
    assert estimate_text(gain) == "1.069 [0.9974, 1.141]"
    capture = Estimate(mean=1 - 0.0004064, se=1e-6, low=1 - 0.0004104, high=1 - 0.0004025, n=10)
    assert estimate_text(capture) == "1 - 0.0004064 [1 - 0.0004104, 1 - 0.0004025]"
    assert estimate_text(Estimate(0.75, 0.0, 0.75, 0.75, 4, kind="exact")) == "0.75 (exact)"


def test_format_4g():
    """The experiments' cell text: floats to 4 digits, non-finite as nan, others by str."""
    assert format_4g(0.0046913) == "0.004691" and format_4g(2.0) == "2" and format_4g(20000.0) == "2e+04"
    assert format_4g(math.inf) == "nan" and format_4g(np.float64(1.23456)) == "1.235"
    assert (format_4g(3), format_4g(True), format_4g(None), format_4g("ring")) == ("3", "True", "None", "ring")


def test_markdown_table_layout():
    """markdown_table: header, separator, one line per row, chosen columns in order."""
    rows = [{"a": 1, "b": 0.5, "_x": [1]}, {"a": 2, "b": math.nan, "_x": [2]}]
    assert markdown_table(rows, ["b", "a"]) == "| b | a |\n|---|---|\n| 0.5 | 1 |\n| nan | 2 |"
    assert markdown_table(rows, ["a"], fmt=lambda v: f"<{v}>") == "| a |\n|---|\n| <1> |\n| <2> |"


def test_write_tables_writes_csv_and_md(tmp_path):
    """write_tables: CSV of the public keys, a titled Markdown table, and the table returned."""
    rows = [{"a": 1, "b": math.inf, "_x": [1]}, {"a": 2, "b": 0.25, "_x": [2]}]
    text = write_tables(rows, ["a", "b"], tmp_path / "out", "t", "Title", fmt=format_4g)
    assert text == "| a | b |\n|---|---|\n| 1 | nan |\n| 2 | 0.25 |"
    assert (tmp_path / "out" / "t.md").read_text() == f"# Title\n\n{text}\n"
    assert read_csv(tmp_path / "out" / "t.csv") == [{"a": 1, "b": math.inf}, {"a": 2, "b": 0.25}]


def test_crossing_is_log_linear_and_nan_when_never_reached():
    """crossing interpolates log-linearly, starts at x[0] when y[0] is low, nan when never reached."""
    x = np.arange(0, 11, 2.0)
    y = 10.0 ** (-x)
    assert crossing(x, y, 1e-5) == pytest.approx(5.0) and crossing(x, y, 10.0) == 0.0
    assert math.isnan(crossing(x, y, 1e-30))


def test_as_array_reads_lists_and_json():
    """as_array: a list metric in memory or as JSON text read back from a results folder."""
    assert as_array([1, 2]).tolist() == [1.0, 2.0] == as_array("[1, 2]").tolist()
    assert as_array(np.arange(2)).dtype == float


# --------------------------------------------------------------------------- report


def _rows(agree=True):
    return [{"claim": "floor drop rate, L=48", "exact": 0.04691,
             "estimate": Estimate(0.0470, 0.0002, 0.0466, 0.0474, 20), "agrees": True,
             "note": "interval wide"},
            {"claim": "workers for 1e-3 | s=4", "exact": 96, "estimate": 96.0, "agrees": agree}]


def test_write_report_tables_and_figures(tmp_path):
    """The report has one claims table per study and embeds each figure by relative path."""
    fig = tmp_path / "a" / "fig one.png"
    fig.parent.mkdir()
    fig.write_bytes(b"\x89PNG")
    path = write_report([{"title": "Study A", "rows": _rows(), "figures": [fig]},
                         {"title": "Study B", "rows": _rows()[:1], "figures": []}],
                        tmp_path / "report.md")
    text = path.read_text()
    assert text.count("| claim | exact | simulated (95% CI) | agrees |") == 2
    assert "| floor drop rate, L=48 | 0.04691 | 0.047 [0.0466, 0.0474] | yes |" in text
    assert "| workers for 1e-3 \\| s=4 | 96 | 96 | yes |" in text
    assert "![fig one](a/fig one.png)" in text
    assert "- *floor drop rate, L=48*: interval wide" in text
    assert "All 3 claims agree" in text
    assert text.index("## Study A") < text.index("## Study B")


def test_write_report_states_parameters_and_rules(tmp_path):
    """Rows with parameters and verdicts get a table that states each row's parameters, verdict and rule."""
    est = Estimate(0.0470, 0.0002, 0.0466, 0.0474, 20)
    bound = proportion_ci(0, 1000)
    rows = [{"claim": "floor", "params": "L=48, rho=1e-3", "exact": 0.04691, "estimate": est,
             "verdict": judge_equal(est, 0.04691)},
            {"claim": "creep at most bound", "params": "n=10, tau=0.5", "exact": 0.05,
             "estimate": est, "verdict": judge_bound(est, 0.01)},
            {"claim": "tail", "params": "s=4", "exact": 1e-4, "estimate": bound,
             "verdict": judge_equal(bound, 1e-4)},
            {"claim": "one run", "params": "n=1", "exact": 2.0, "estimate": mean_ci([2.0]),
             "verdict": judge_equal(mean_ci([2.0]), 2.0)}]
    text = write_report([{"title": "S", "rows": rows}], tmp_path / "r.md").read_text()
    assert "| claim | parameters | exact | simulated (95% CI) | holds | rule |" in text
    assert "| floor | L=48, rho=1e-3 | 0.04691 | 0.047 [0.0466, 0.0474] | yes | exact inside the 95% interval |" in text
    assert "| **no** | claim '<= bound' fails only if the whole 95% interval lies above the bound |" in text
    assert f"below {format_number(bound.high)}" in text
    assert "| **not judged** | no interval from 1 replication(s) |" in text
    assert "**1 of 4 claims do not hold and 1 could not be judged" in text


def test_write_report_flags_disagreement(tmp_path):
    """A disagreeing claim is marked and counted at the top."""
    text = write_report([{"title": "S", "rows": _rows(agree=False)}], tmp_path / "r.md").read_text()
    assert "| **no** |" in text and "**1 of 2 claims disagree; 0 studies failed to run.**" in text


FAKE = '''
from pathlib import Path
from sim.results import mean_ci

NAME = "{name}"
STUDY = "{marker}"
TITLE = "{title}"
BASE = {{"mu": 2.0}}
FACTORS = {{}}
REPLICATIONS = 30
QUICK = {{"REPLICATIONS": 8}}


def model(config, streams):
    {body}
    return {{"y": streams.rng("y").normal(config["mu"], 1.0)}}


def claims(results):
    est = mean_ci([r["y"] for r in results.records_of(0)])
    return [{{"claim": "mean is 2", "exact": 2.0, "estimate": est, "agrees": est.contains(2.0)}},
            {{"claim": "always", "exact": 1, "estimate": 1, "agrees": {agree}}}]


def analyse(results, out):
    (Path(out) / "{fig}.png").write_bytes(b"\\x89PNG fake")
'''


def fake_experiments(tmp_path: Path, *, agree=True, fail_b=False) -> Path:
    d = tmp_path / "experiments"
    d.mkdir()
    # Discovered by the STUDY marker (run in marker order), not by file name.
    (d / "zz_first.py").write_text(
        FAKE.format(name="first", marker="A", title="Fake A", fig="a_fig", body="pass", agree=agree))
    (d / "aa_second.py").write_text(
        FAKE.format(name="second", marker="B", title="Fake B", fig="b_fig", agree=True,
                    body='raise RuntimeError("engine broke")' if fail_b else "pass"))
    (d / "not_a_study.py").write_text("NAME = 'x'\nraise SystemExit('must not be imported')\n")
    return d


def test_reproduce_writes_report(tmp_path, capsys):
    """dtsim reproduce runs each STUDY file as an experiment and writes report.md; exit 0 when all agree."""
    d = fake_experiments(tmp_path)
    out = tmp_path / "out"
    rc = main(["reproduce", "--quick", "--experiments", str(d), "--out", str(out),
               "--executor", "local", "--workers", "2", "--quiet"])
    assert rc == 0, capsys.readouterr().err
    text = (out / "report.md").read_text()
    assert "## Fake A" in text and "## Fake B" in text
    assert text.count("| mean is 2 | 2 |") == 2
    assert text.index("## Fake A") < text.index("## Fake B")
    assert "![a_fig](zz_first/a_fig.png)" in text
    assert "![b_fig](aa_second/b_fig.png)" in text
    assert "All 4 claims agree" in text
    assert "report:" in capsys.readouterr().out


def test_reproduce_exits_nonzero_on_disagreement(tmp_path, capsys):
    """A disagreeing claim makes dtsim reproduce exit 1 (report still written)."""
    d = fake_experiments(tmp_path, agree=False)
    rc = main(["reproduce", "--experiments", str(d), "--out", str(tmp_path / "o"), "--executor",
               "serial", "--quiet"])
    assert rc == 1
    assert "| always | 1 | 1 | **no** |" in (tmp_path / "o" / "report.md").read_text()
    assert "claims disagree" in capsys.readouterr().err


def test_reproduce_failed_study_keeps_the_other(tmp_path, capsys):
    """A study that raises is reported as failed, the other's table stays, exit 1."""
    d = fake_experiments(tmp_path, fail_b=True)
    rc = main(["reproduce", "--quick", "--experiments", str(d), "--out", str(tmp_path / "o"),
               "--executor", "serial", "--quiet"])
    assert rc == 1
    text = (tmp_path / "o" / "report.md").read_text()
    assert "| mean is 2 |" in text and "RuntimeError: 8 tasks failed" in text
    assert "engine broke" in text
    assert "FAILED TO RUN" in capsys.readouterr().out


def test_reproduce_bad_executor(tmp_path, capsys):
    """An unknown executor is one line, exit 2."""
    d = fake_experiments(tmp_path)
    assert main(["reproduce", "--experiments", str(d), "--executor", "mpi"]) == 2
    assert capsys.readouterr().err == (
        "dtsim reproduce: error: 'executor' must be one of serial, local, dask: 'mpi'\n")


def test_reproduce_without_study_files_is_a_usage_error(tmp_path, capsys):
    """A folder with no STUDY file is one line and exit 2 (not a report of nothing)."""
    d = tmp_path / "empty"
    d.mkdir()
    (d / "plain.py").write_text("NAME = 'plain'\n")
    assert main(["reproduce", "--experiments", str(d), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("dtsim reproduce: error: 'experiments' must be a folder "
                                              "holding study files")


def test_summary_rows_give_declared_rates_intervals_inside_the_unit_interval():
    """A declared rate gets rate_ci's interval in [0, 1] ("upper" with no event); other metrics keep t."""
    from sim.errors import ConfigError

    points = [{"p": 0}, {"p": 1}]
    recs = [{"point": 0, "error": "", "drop": v, "x": v} for v in (0.0, 0.0, 0.02, 0.0)]
    recs += [{"point": 1, "error": "", "drop": 0.0, "x": 0.0} for _ in range(4)]
    plain = summary_rows(recs, points, metrics=["drop", "x"])
    rows = summary_rows(recs, points, metrics=["drop", "x"], rates={"drop": None})
    # the t-interval of a rare rate leaves [0, 1]; the declared rate's does not
    assert plain[0]["drop_low"] < 0 <= rows[0]["drop_low"] <= rows[0]["drop_mean"] <= rows[0]["drop_high"] <= 1
    assert rows[0]["drop_kind"] == "two-sided" and "x_kind" not in rows[0]
    assert (rows[0]["x_low"], rows[0]["x_high"]) == (plain[0]["x_low"], plain[0]["x_high"])
    # no event: a one-sided bound from 4 replications counted as one trial each
    assert rows[1]["drop_kind"] == "upper" and rows[1]["drop_mean"] == 0.0 == rows[1]["drop_low"]
    assert rows[1]["drop_high"] == pytest.approx(1 - 0.05 ** (1 / 4))
    # with independent trials per replication (an int or a field) the bound is tighter
    by_int = summary_rows(recs, points, metrics=["drop"], rates={"drop": 1000})
    assert by_int[1]["drop_high"] == pytest.approx(1 - 0.05 ** (1 / 4000))
    by_field = summary_rows([dict(r, n=1000) for r in recs], points, metrics=["drop"],
                            rates={"drop": "n"})
    assert by_field[1]["drop_high"] == by_int[1]["drop_high"]
    with pytest.raises(ConfigError, match="'rates' must be metrics whose values lie in \\[0, 1\\] "
                       "\\('drop' at point '0' is not\\): 2.0"):
        summary_rows(recs + [{"point": 0, "error": "", "drop": 2.0}], points, metrics=["drop"],
                     rates={"drop": None})
    with pytest.raises(ConfigError, match="'RATES' must be a dict"):
        from sim.results import check_rates
        check_rates({"drop": -1}, "RATES")


@pytest.mark.slow  # 2000 intervals; the cut rule: test_summary_rows_cut_declared_nonnegative_metrics_at_zero
def test_mean_ci_cut_at_the_lower_bound_keeps_coverage():
    """A non-negative quantity's t-interval is cut at 0 (never below its range), only when it crosses.

    Coverage cannot drop: the true mean of a non-negative quantity is never
    below 0, so it is inside the cut interval whenever it was inside the t one.
    At a small mean with few replications the plain t-interval crosses 0 in
    most runs, and the cut one covers exactly as often.
    """
    rng = np.random.default_rng(7)
    true = 0.05
    covered_t = covered_cut = crossed = 0
    for _ in range(2000):
        x = rng.exponential(true, size=4) * (rng.random(4) < 0.5) * 2
        t, cut = mean_ci(x), mean_ci(x, lower=0.0)
        assert cut.low >= 0.0 and cut.mean == t.mean and cut.high == t.high
        if t.low < 0:
            crossed += 1
            assert cut.method == "t-cut" and cut.low == 0.0
        else:
            assert (cut.low, cut.method) == (t.low, "t")
        covered_t += t.low <= true <= t.high
        covered_cut += cut.low <= true <= cut.high
    assert crossed > 1000  # the case the cut is for
    assert covered_cut == covered_t


def test_summary_rows_cut_declared_nonnegative_metrics_at_zero():
    """NONNEGATIVE metrics get t-intervals cut at 0; undeclared ones keep the plain t; negatives are refused."""
    from sim.errors import ConfigError
    from sim.results import summary_rows

    recs = [{"point": 0, "error": None, "wait": w, "shift": w} for w in (0.0, 0.0, 0.0, 3.0)]
    plain = summary_rows(recs, [{}], metrics=["wait", "shift"])[0]
    cut = summary_rows(recs, [{}], metrics=["wait", "shift"], nonnegative=["wait"])[0]
    assert plain["wait_low"] < 0 and cut["wait_low"] == 0.0
    assert cut["wait_high"] == plain["wait_high"] and cut["wait_mean"] == plain["wait_mean"]
    assert cut["shift_low"] == plain["shift_low"] < 0  # not declared: unchanged
    star = summary_rows(recs, [{}], metrics=["wait", "shift"], nonnegative="*")[0]
    assert star["shift_low"] == 0.0
    bad = [dict(r, wait=-1.0) for r in recs]
    # (user trial 15) the refusal names the metric and the point: it named neither
    with pytest.raises(ConfigError, match="'nonnegative' must be metrics whose values are >= 0 "
                       "\\('wait' at point '0' is not\\): -1.0"):
        summary_rows(bad, [{}], metrics=["wait"], nonnegative="*")
    with pytest.raises(ConfigError, match="'nonnegative'"):
        summary_rows(recs, [{}], metrics=["wait"], nonnegative="wait")


# --------------------------------------------------------------------------- exact where nothing varies


def test_fixed_ci_is_exact_and_refuses_a_declaration_the_replications_contradict():
    """A fixed quantity prints "X (exact)", equals only its value, and refuses varying values."""
    from sim.errors import SimulationError
    from sim.results import fixed_ci

    e = fixed_ci([0.75, 0.75, 0.75], "same trace")
    assert (e.kind, e.mean, e.low, e.high, e.se, e.n) == ("exact", 0.75, 0.75, 0.75, 0.0, 3)
    assert e.text() == "0.75 (exact)" and e.method == "exact: same trace"
    assert e.contains(0.75) and not e.contains(0.7501)
    assert judge_equal(e, 0.75).holds and judge_equal(e, 0.76).holds is False
    with pytest.raises(SimulationError, match="'x' is fixed by the config \\(same trace\\) but its "
                                              "replications differ: 0.7 to 0.75"):
        fixed_ci([0.75, 0.7], "same trace", name="x")
    # the intervals it replaces: a Wilson interval on identical rates, and "below X" at 0
    assert rate_ci([0.75] * 3).high - rate_ci([0.75] * 3).low > 0.3
    assert rate_ci([0.0] * 10).text().startswith("below 0.2")


def test_within_cuts_an_interval_to_its_quantitys_range_and_keeps_the_estimate():
    """A factor that cannot exceed 1 keeps its estimate; only the interval's ends move."""
    from sim.results import within

    e = Estimate(0.6, 0.1, 0.14, 2.6, 2)
    cut = within(e, 0.0, 1.0)
    assert (cut.mean, cut.low, cut.high, cut.method) == (0.6, 0.14, 1.0, "t-cut")
    assert within(cut, 0.0, 1.0) is cut


def test_summary_rows_and_summarize_print_what_the_config_fixes_as_exact():
    """Declared fixed metrics: m_kind exact, low == high == mean; the others keep their interval."""
    recs = [{"point": 0, "error": None, "a": 1.0, "d": 0.0, "u": u} for u in (1.0, 2.0, 4.0)]
    row = summary_rows(recs, [{}], metrics=["a", "d", "u"], rates={"d": None},
                       fixed=[{"a": "no failures", "d": "no failures"}])[0]
    assert (row["a_kind"], row["a_low"], row["a_high"]) == ("exact", 1.0, 1.0)
    assert (row["d_kind"], row["d_high"]) == ("exact", 0.0)
    assert "u_kind" not in row and row["u_low"] < row["u_high"]
    plain = summary_rows(recs, [{}], metrics=["d"], rates={"d": None})[0]
    assert plain["d_kind"] == "upper" and plain["d_high"] > 0.5  # "below 0.63": before
    est = summarize(recs, ["a", "d", "u"], rates=["d"], fixed={"a": "no failures"})
    assert est["a"].kind == "exact" and est["d"].kind == "upper" and est["u"].kind == "two-sided"


def _json_out(capsys, argv):
    import json

    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_failures_replaying_one_trace_is_exact(capsys):
    """failures --failure-trace aws-p3: every replication replays the same trace, so no interval.

    Before: worker availability 0.750871 [0.400365, 0.931532] and "below 0.258866".
    """
    out = _json_out(capsys, ["failures", "--failure-trace", "aws-p3", "--workers", "32",
                             "--replications", "3", "--horizon", "4000", "--json", "--quiet"])
    for k in ("worker_availability", "effective_availability", "domain_unavailability",
              "joint_outage"):
        lo, hi = out[k + "_ci"]
        assert lo == hi == out[k], k
    assert out["domain_unavailability"] == 0.0
    assert main(["failures", "--failure-trace", "aws-p3", "--workers", "32", "--replications",
                 "3", "--horizon", "4000", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "(exact)" in text and "below" not in text and "[" not in text


def test_training_without_failures_has_availability_1_and_drop_rate_0_exactly(capsys):
    """No failures: worker availability exactly 1 and drop rate exactly 0, while times vary.

    Before: worker_availability_ci [0.66, 1.0] and drop_rate_ci [0, 0.259].
    """
    out = _json_out(capsys, ["train", "--stages", "3", "--replicas", "2", "--microbatches-per-step",
                             "4", "--steps", "2", "--schedule", "gpipe", "--pass-time-distribution",
                             "exponential", "--replications", "4", "--json"])
    assert out["worker_availability_ci"] == [1.0, 1.0]
    assert out["drop_rate_ci"] == [0.0, 0.0]
    lo, hi = out["step_time_ci"]
    assert lo < out["step_time_mean"] < hi  # random pass times: a real interval
    det = _json_out(capsys, ["train", "--stages", "4", "--replicas", "1", "--microbatches-per-step",
                             "8", "--steps", "5", "--schedule", "gpipe", "--json"])
    assert det["step_time_ci"] == [33.0, 33.0] and det["throughput_ci"][0] == det["throughput"]


def test_queueing_pipeline_at_availability_1_drops_nothing_exactly(capsys):
    """pipeline --queueing --availability 1: drop rate 0 (exact), not "below X"."""
    argv = ["pipeline", "--queueing", "--stages", "2", "--replicas", "1,2", "--stage-time", "1,1.5",
            "--stage-time-distribution", "exponential", "--arrival", "poisson", "--rate", "0.5",
            "--availability", "1", "--microbatches", "300", "--replications", "3"]
    out = _json_out(capsys, [*argv, "--json"])
    assert out["drop_rate_ci"] == [0.0, 0.0]
    lo, hi = out["latency_mean_ci"]
    assert lo < out["latency_mean"] < hi
    assert main(argv) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("drop rate"))
    assert "0 (exact)" in line and "below" not in line


def test_a_sweep_point_without_domain_outages_has_domain_unavailability_0_exactly(tmp_path):
    """The example sweep at domain_outage=0: 0 (exact), not "below 0.4507"; the manifest keeps it."""
    from sim.commands.plot import load_result
    from sim.failures import ClusterConfig, failures_model
    from sim.runner import sweep

    base = ClusterConfig(workers=6, domains=2, availability=0.9, horizon=300.0)
    res = sweep(failures_model, base, factors={"domain_outage": [0.0, 0.05]}, replications=3,
                seed=1, executor="serial", out=tmp_path / "o", rates={"domain_unavailability": None})
    zero, some = res.summary()
    assert zero["domain_unavailability_kind"] == "exact" and zero["domain_unavailability_high"] == 0
    assert some["domain_unavailability_kind"] == "two-sided"
    assert res.estimates(0)["domain_unavailability"].text() == "0 (exact)"
    _, again = load_result(tmp_path / "o")  # rebuilt from the folder alone (RATES not known)
    row = again.summary()[0]
    assert (row["domain_unavailability_kind"], row["domain_unavailability_high"]) == ("exact", 0)


def test_gossip_contraction_interval_stays_at_or_below_1(tmp_path, capsys):
    """Averaging never raises D, so the contraction factor's interval ends at 1 at most.

    Before: 0.594 [0.136, 2.597] from 2 replications on a graph file.
    """
    import networkx as nx

    from sim.gossip import GossipConfig, gossip_model
    from sim.results import power_ci
    from sim.runner import replicate

    f = tmp_path / "g.graphml"
    nx.write_graphml(nx.random_regular_graph(3, 20, seed=1), f)
    out = _json_out(capsys, ["gossip", "--topology", str(f), "--replications", "2", "--seed", "0",
                             "--json", "--quiet"])
    lo, hi = out["contraction_per_round_ci"]
    assert 0 < lo < out["contraction_per_round"] < hi <= 1.0
    # the interval before the cut reaches above 1: the case the rule is for
    recs = replicate(gossip_model, GossipConfig(topology=str(f)), replications=2, seed=0)
    j, t = 1 + int(np.argmax(np.asarray(recs[0]["steps"][1:]) == out["contraction_steps"])), \
        out["contraction_steps"]
    D = np.stack([np.asarray(r["disagreement"], dtype=float) for r in recs])
    assert power_ci(skewed_ratio_ci(D[:, j], D[:, 0]), 1.0 / t).high > 1.0


def test_summarize_cuts_the_interval_of_a_fraction_at_1():
    """(user trial 4) dtsim train printed a DiLoCo run's goodput as 0.576 [0, 1.35] and
    compute utilisation 0.670 [0, 1.92] (two replications, Student-t): a fraction of time
    past 1. Metrics named in ``fractions`` have their interval cut at 1 as ``lower`` cuts it
    at 0 (the true mean is never above 1, so the cut keeps the coverage); the mean, se and
    every other metric are unchanged."""
    recs = [{"u": 0.2, "t": 0.2}, {"u": 0.95, "t": 0.95}]
    plain = summarize(recs, ["u", "t"], lower=0.0)
    est = summarize(recs, ["u", "t"], lower=0.0, fractions=("u",))
    assert plain["u"].high > 1 and est["u"].high == 1.0 and est["u"].low == 0.0
    assert est["u"].mean == plain["u"].mean and est["u"].se == plain["u"].se
    assert est["u"].method == "t-cut" and est["t"] == plain["t"]
    inside = summarize([{"u": 0.5}, {"u": 0.52}, {"u": 0.51}], ["u"], lower=0.0,
                       fractions=("u",))["u"]
    assert inside == summarize([{"u": 0.5}, {"u": 0.52}, {"u": 0.51}], ["u"], lower=0.0)["u"]


def test_train_and_learners_intervals_of_fractions_stay_inside_0_1(capsys):
    """The goodput of 2 replications of a failing DiLoCo run was [0, 3.81] (seed 2); its
    compute utilisation [0, 2.81]. Both now end at 1; dtsim learners' fractions likewise."""
    import json

    from sim.cli import main

    assert main(["train", "--stages", "1", "--replicas", "2", "--microbatches-per-step", "2",
                 "--steps", "20", "--sync", "diloco:every=10", "--param-size", "1e3", "--mtbf",
                 "30", "--replace-time", "5", "--replications", "2", "--seed", "2",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("compute_utilisation_ci", "goodput_fraction_ci"):
        assert 0.0 <= d[k][0] <= d[k][1] == 1.0, (k, d[k])
    assert main(["learners", "--learners", "2", "--chips", "2", "--step-time", "1", "--every",
                 "5", "--steps", "20", "--mtbf", "20", "--replace-time", "5", "--replications",
                 "2", "--seed", "1", "--json"]) == 0  # was [0, 3.55] and [0, 2.85]
    d = json.loads(capsys.readouterr().out)
    for k in ("compute_utilisation_ci", "goodput_fraction_ci"):
        assert d[k] == [0.0, 1.0], (k, d[k])
