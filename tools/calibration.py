"""Calibration of dtsim's 95% intervals: how often each covers its exact value.

Each case runs one small experiment from a seed through the public API
(``sim.pipeline.des_pipeline_model``, ``sim.gossip_model``, ``sim.failures_model``,
``sim.replicate``, ``sim.analytic``) and the same estimator the CLI prints,
and returns the estimate with its interval and the exact value. Run from 200
seeds, a calibrated 95% interval covers the exact value between 184 and 196
times (the central 95% of Binomial(200, 0.95) is 184..196), and misses on
each side at most 4% of the runs (8 of 200).

Usage::

    python tools/calibration.py            # all cases, seeds 0-199 and 1000-1199, writes docs/calibration.md
    python tools/calibration.py --first-seed 1000 --no-write   # a fresh block only
    python tools/calibration.py --seeds 50 --case contraction_n10 --no-write

``tests/test_calibration.py`` (marked slow) runs the same cases.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sim
from sim import analytic
from sim.gossip import summarize_runs
from sim.pipeline import des_pipeline_model, vector_pipeline_model
from sim.results import Estimate, mean_ci, rate_ci

#: Seeds per case, and the acceptance band for the number of covering intervals.
SEEDS = 200
BAND = (184, 196)
#: First seed of the fresh block the document also reports.
FRESH_FIRST = 1000
#: Largest share of runs an interval may miss on one side.
MAX_ONE_SIDE = 0.04


@dataclass(frozen=True)
class Case:
    """One calibrated quantity: a description and a function seed -> (estimate, exact)."""

    name: str
    quantity: str
    setup: str
    run: Callable[[int], tuple[Estimate, float]]


# --------------------------------------------------------------------------- pipeline

_DROP_COMMON = sim.PipelineConfig(stages=8, replicas=2, availability=0.9, domain_outage=0.01,
                                  skip_budget=0, microbatches=200)
_DROP_RARE = sim.PipelineConfig(stages=48, replicas=3, availability=0.9, domain_outage=0.0,
                                skip_budget=1, microbatches=2000)
_QUALITY = sim.PipelineConfig(stages=8, replicas=2, availability=0.8, domain_outage=0.0,
                              skip_budget=2, skip_penalty=0.1, microbatches=200)


def _exact_drop(cfg: sim.PipelineConfig) -> float:
    return float(analytic.drop_probability(cfg.stages, cfg.replicas[0], cfg.skip_budget,  # type: ignore[index]
                                           cfg.availability, cfg.domain_outage))


def drop_common(seed: int) -> tuple[Estimate, float]:
    recs = sim.replicate(des_pipeline_model, _DROP_COMMON, replications=10, seed=seed)
    return rate_ci([r["drop_rate"] for r in recs]), _exact_drop(_DROP_COMMON)


def drop_rare(seed: int) -> tuple[Estimate, float]:
    recs = sim.replicate(vector_pipeline_model, _DROP_RARE, replications=10, seed=seed)
    # as the CLI: the vector engine's microbatches are independent trials
    return (rate_ci([r["drop_rate"] for r in recs], trials=_DROP_RARE.microbatches),
            _exact_drop(_DROP_RARE))


def mean_quality(seed: int) -> tuple[Estimate, float]:
    recs = sim.replicate(des_pipeline_model, _QUALITY, replications=10, seed=seed)
    q = analytic.stage_outage(_QUALITY.availability, 2, _QUALITY.domain_outage)
    exact = analytic.mean_quality_delivered(_QUALITY.stages, q, _QUALITY.skip_budget,
                                            _QUALITY.skip_penalty)
    return mean_ci([r["mean_quality"] for r in recs]), float(exact)


# --------------------------------------------------------------------------- gossip

_NOISE = sim.GossipConfig(topology="complete", nodes=20, protocol="matching", rounds=100,
                          noise=1.0, burn_in=20)
_C10 = sim.GossipConfig(topology="complete", nodes=10, protocol="matching", rounds=50)
# (record_every=1: the interval these figures were calibrated with, before edge's default changed)
_TORUS = sim.GossipConfig(topology="torus:dims=4x4", protocol="edge", rounds=60, record_every=1)
_CAPTURE = sim.GossipConfig(topology="complete", nodes=10, protocol="edge", rounds=120,
                            adversary="stubborn", adversary_value=10.0, record_every=1)
_RING = sim.GossipConfig(topology="ring:n=16", protocol="edge", rounds=80, record_every=10)


def _gossip(cfg: sim.GossipConfig, seed: int) -> dict:
    return summarize_runs(sim.replicate(sim.gossip_model, cfg, replications=20, seed=seed), cfg)


def noise_floor(seed: int) -> tuple[Estimate, float]:
    out = _gossip(_NOISE, seed)
    return out["noise_floor_ci"], float(analytic.noise_floor(_NOISE.n, _NOISE.noise))


def contraction_n10(seed: int) -> tuple[Estimate, float]:
    out = _gossip(_C10, seed)
    return out["contraction_per_round_ci"], float(analytic.matching_contraction(_C10.n))


def contraction_torus(seed: int) -> tuple[Estimate, float]:
    out = _gossip(_TORUS, seed)
    return out["contraction_per_round_ci"], float(out["predicted_contraction"])


def capture(seed: int) -> tuple[Estimate, float]:
    out = _gossip(_CAPTURE, seed)
    return out["capture_rate_ci"], float(analytic.capture_rate(_CAPTURE.n))


def ring_disagreement(seed: int) -> tuple[Estimate, float]:
    out = _gossip(_RING, seed)
    return out["final_disagreement_ci"], float(out["predicted_disagreement"][-1])


# --------------------------------------------------------------------------- failures

_CLUSTER = sim.ClusterConfig(workers=8, domains=4, availability=0.9, domain_outage=0.01,
                             mean_downtime=1.0, domain_mean_downtime=5.0, horizon=2000.0)


def joint_outage(seed: int) -> tuple[Estimate, float]:
    recs = sim.replicate(sim.failures_model, _CLUSTER, replications=10, seed=seed)
    a, rho = _CLUSTER.availability, _CLUSTER.domain_outage
    exact = rho + (1 - rho) * (1 - a) ** (_CLUSTER.workers // _CLUSTER.domains)
    return rate_ci([r["joint_outage"] for r in recs]), float(exact)


CASES: dict[str, Case] = {c.name: c for c in [
    Case("drop_common", "pipeline drop rate (common)",
         "DES, L=8, r=2, a=0.9, rho=0.01, s=0; 10 x 200 microbatches; rate_ci", drop_common),
    Case("drop_rare", "pipeline drop rate (rare)",
         "vector, L=48, r=3, a=0.9, rho=0, s=1; 10 x 2000 microbatches; rate_ci", drop_rare),
    Case("mean_quality", "mean quality of delivered",
         "DES, L=8, r=2, a=0.8, s=2, kappa=0.1; 10 x 200 microbatches; mean_ci", mean_quality),
    Case("noise_floor", "noise floor E[D]",
         "matching, complete n=20, s=1, 100 rounds, burn-in 20; 20 replications; log_mean_ci",
         noise_floor),
    Case("contraction_n10", "contraction per round",
         "matching, complete n=10, 50 rounds; 20 replications; skewed_ratio_ci", contraction_n10),
    Case("contraction_torus", "contraction per step (sparse)",
         "edge, torus 4x4, 60 steps; 20 replications; skewed_ratio_ci; exact recursion at the same record",
         contraction_torus),
    Case("capture", "capture rate per step",
         "edge, complete n=10, one stubborn node b=10, 120 steps; 20 replications; ratio_ci", capture),
    Case("ring_disagreement", "E[D(80)] (sparse)",
         "edge, ring n=16, 80 steps; 20 replications; skewed_ratio_ci; exact recursion",
         ring_disagreement),
    Case("joint_outage", "joint outage of a domain",
         "8 workers in 4 domains, a=0.9, rho=0.01, horizon 2000; 10 replications; rate_ci",
         joint_outage),
]}


@dataclass(frozen=True)
class Calibration:
    """Outcome of one case over many seeds."""

    case: Case
    exact: float
    seeds: int
    covered: int
    above: int  # exact above the interval (the interval is too low)
    below: int  # exact below the interval
    seconds: float

    @property
    def passes(self) -> bool:
        lo, hi = band(self.seeds)
        limit = MAX_ONE_SIDE * self.seeds
        return lo <= self.covered <= hi and self.above <= limit and self.below <= limit


def band(seeds: int) -> tuple[int, int]:
    """The central 95% range of Binomial(seeds, 0.95): 184..196 at 200 seeds."""
    from scipy import stats

    return int(stats.binom.ppf(0.025, seeds, 0.95)), int(stats.binom.ppf(0.975, seeds, 0.95))


def calibrate(case: Case, seeds: int = SEEDS, first: int = 0) -> Calibration:
    """Run ``case`` from seeds ``first .. first + seeds - 1`` and count covers and misses."""
    t0 = time.perf_counter()
    covered = above = below = 0
    exact = math.nan
    for seed in range(first, first + seeds):
        est, exact = case.run(seed)
        if est.kind == "upper":
            hit = est.contains(exact)
            above += not hit
        else:
            hit = est.low <= exact <= est.high
            above += exact > est.high
            below += exact < est.low
        covered += hit
    return Calibration(case, exact, seeds, covered, above, below, time.perf_counter() - t0)


def table(results: list[Calibration]) -> str:
    """The Markdown calibration table."""
    lo, hi = band(results[0].seeds) if results else BAND
    lines = ["| quantity | setup | exact | covered | exact above CI | exact below CI | passes |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.case.quantity} | {r.case.setup} | {r.exact:.6g} | {r.covered}/{r.seeds} | "
                     f"{r.above} | {r.below} | {'yes' if r.passes else '**no**'} |")
    return "\n".join(lines)


def write_doc(results: list[Calibration], path: Path, fresh: list[Calibration] | None = None) -> None:
    """Write ``docs/calibration.md``: the table on seeds ``0 ..``, and on a fresh block if given."""
    lo, hi = band(results[0].seeds)
    total = sum(r.seconds for r in results) + sum(r.seconds for r in fresh or ())
    fresh_text = ""
    if fresh:
        first = FRESH_FIRST
        fresh_text = f"""
The same cases from a fresh block of seeds ({first} to {first + fresh[0].seeds - 1}), a check
that the estimators were not tuned to the first block:

{table(fresh)}
"""
    text = f"""# Calibration of the 95% intervals

Each quantity below is estimated from {results[0].seeds} independent seeds (0 to
{results[0].seeds - 1}); each seed runs the replications listed and the estimator the CLI
prints, and the table counts how often its 95% interval covers the exact value.
A calibrated interval covers it between {lo} and {hi} times (the central 95% of
Binomial({results[0].seeds}, 0.95)) and misses on each side at most
{int(MAX_ONE_SIDE * 100)}% of the runs ({int(MAX_ONE_SIDE * results[0].seeds)}).
"Exact above CI" means the interval lay wholly below the exact value.

Written by `python tools/calibration.py` (the slow test `tests/test_calibration.py`
runs the same cases); {total:.0f} s of wall time on a shared two-core machine.
Where the exact value depends on the record the estimator picks (the sparse
contraction), the table shows the last seed's.

{table(results)}
{fresh_text}
Each block of 200 tests every row twice (a side may miss at most 8 times), so
even calibrated intervals (2.5 % a side) fail one of the 18 side limits of a
block seven times in ten (each side 6.6 %). A larger sample tells a true excess from
chance: over 1000 further seeds (2000 to 2999; `python tools/calibration.py
--first-seed 2000 --seeds 1000 --no-write`, measured with this code):

| quantity | covered of 1000 | exact above CI | exact below CI |
|---|---|---|---|
| pipeline drop rate (common) | 950 | 29 | 21 |
| pipeline drop rate (rare) | 958 | 14 | 28 |
| mean quality of delivered | 961 | 18 | 21 |
| noise floor E[D] | 954 | 25 | 21 |
| contraction per round (n = 10) | 960 | 16 | 24 |
| contraction per step (torus) | 953 | 31 | 16 |
| capture rate per step | 950 | 37 | 13 |
| E[D(80)] (ring) | 965 | 23 | 12 |
| joint outage of a domain | 934 | **43** | 23 |

Every row covers 95-96.5 % but the joint outage (93.4 %, 4.3 % above; see the
known limits); the capture rate's 3.7 % above is chance-sized (seeds 3000 to
3999: 953, 24 above, 23 below).

Estimators (all in `sim/results.py`): `rate_ci` is a Wilson interval on the
effective number of independent trials (it stays in [0, 1], and with no event
gives a one-sided bound "below X"); the contraction is the ratio of mean
disagreements at one record with `skewed_ratio_ci`, raised to one over the
record's step; `skewed_ratio_ci` is the delta-method interval on the log scale
whose upper end reaches at least as far as the spread of the per-replication
log ratios allows (Cox's width); the capture rate is a delta-method ratio of
mean gaps at one record; the final disagreement is the sample mean with
`skewed_ratio_ci`; the noise floor is a mean with a log-scale interval; mean
quality is Student t.

## The contraction at n = 10 (fixed)

Until this table the contraction interval widened *both* ends to Cox's width
and covered 197 of 200 (over 2000 seeds: 97.3 %, exact above 39 times, below
15 times), one above the band. Why: at n = 10 the contraction is read at the
second or third record (the last with mean D at least 0.1 of D(0)), so each
replication's ratio D(2)/D(0) is a product of two matching factors. Its log is
left-skewed (skewness -1.06, sd 0.90), not normal, so Cox's log-normal width
(half-width 0.47 on the log scale) is 1.3 times what the ratio of means
actually spreads (1.96 sd(log R) = 0.36, measured over 2000 seeds). The
estimate and its interval do come from the same replications and record; the
record is picked from the data (the second in 1493 of 2000 seeds, the third in
505), and fixing it at the one the exact curve gives (the second) moves the
coverage by 2 of 2000, so the choice is not the cause. The
delta-method interval alone covered 93.6 % (exact above 86 times of 2000,
4.3 %: a sample that misses the rare large replications has a low mean and a
small standard error). That failure is one-sided, so the guard now applies
to the upper end only; a sample holding a large replication has a large
standard error too, and the delta method's lower end stands. Over the 2000
seeds the one-sided interval covers 96.0 % (39 above, 42 below); on the torus
95.5 % of 1000 (28 above, 17 below), on the ring's E[D(80)] 96.1 % (24, 15).
Also tried and rejected over the same 2000 seeds: a jackknife variance on the
log scale (94.3 %, 81 above), a studentized bootstrap (93.6 %), BCa (90.0 %),
Hall's skew-corrected t on the residuals (92.5 %) and on log pseudo-values
(93.0 %, now 82 below).

## Known limits (measured, not in the table)

- The joint outage of a domain misses above 4.3 % of the time over 1000
  seeds (934 covered, 43 above, 23 below), so a block of 200 fails its
  upper-side limit about half the time (seeds 1000 to 1199: 9 above). Each
  replication's joint outage is carried by a few domain outages (rho = 0.01
  with mean length 5 over 2000 time units: about 4 episodes per domain), so a
  sample of 10 replications that drew few long outages has both a low mean
  and a low spread, the failure the contraction's guard answers. A
  Clopper-Pearson interval on the same effective trials (Korn and Graubard's
  choice) did no better (936 covered, 43 above, degrees-of-freedom adjusted);
  unadjusted it covered 903. Read such a rate with more replications or a
  longer horizon (more episodes per replication).

- Cox's log-normal interval (`lognormal_mean_ci`) covered well with 20
  replications but its estimate is biased when the law is not log-normal: the
  contraction at n = 10 from 1000 replications gave 0.4634 [0.4485, 0.4787]
  for the exact 0.4444, and the ring's E[D(480)] from 600 replications 0.03263
  [0.02807, 0.03794] for 0.0245. dtsim keeps the ratio of means (consistent)
  and borrows only the width from the logs.
- Deep disagreement is beyond 20 replications, and no interval from 20 can
  be both honest and useful there. E[D] after 10, 20 and 50 matching rounds at
  n = 10, over 2000 seeds of 20 replications: `skewed_ratio_ci` covers 94.7,
  91.4 and 86.2 % (exact above 81, 137 and 252 times). The log of D(t)/D(0) has
  sd 2.0, 2.8 and 4.4 there: the mean is carried by replications rarer than 1
  in 20 (the sample mean's median is 0.81, 0.50 and 0.056 of the exact value),
  and a sample that holds none of them shows no sign of it. For a log-normal
  law the sample mean's relative variance is (exp(s^2) - 1)/n, so resolving
  E[D(50)] needs of the order of exp(19) replications. Read a deep final D with
  many more replications, or read the contraction (whose record is chosen
  shallow for this reason) and raise it to the power.
- The noise floor at n = 10 over short runs: with 50 rounds, burn-in 25 and 20
  replications, the per-replication floor is skewed (skewness about 1: matched
  pairs hold equal values, so D has few degrees of freedom), and over 600 seeds
  the log-scale interval covered 557 times (92.8 %), with the exact value
  above it 30 times (5.0 %) and below 13 times. A Student-t, Hall's
  skew-corrected t, a gamma profile likelihood and Cox's interval did no
  better (93-94 %, 4-6 % above). More records per replication (100 rounds,
  n = 20, the table's row) or more replications bring it into the band.
"""
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=SEEDS)
    p.add_argument("--first-seed", type=int, default=0,
                   help="first seed of the block (default 0; a fresh block checks an interval)")
    p.add_argument("--case", action="append", choices=sorted(CASES))
    p.add_argument("--no-write", action="store_true", help="print only, do not write docs/calibration.md")
    args = p.parse_args(argv)
    names = args.case or list(CASES)
    results = []
    for name in names:
        r = calibrate(CASES[name], args.seeds, args.first_seed)
        results.append(r)
        print(f"{name}: exact {r.exact:.6g}, covered {r.covered}/{r.seeds}, above {r.above}, "
              f"below {r.below}, {r.seconds:.1f} s", flush=True)
    print(table(results))
    fresh: list[Calibration] = []
    write = not args.no_write and args.case is None and args.first_seed == 0
    if write:
        for name in names:
            r = calibrate(CASES[name], args.seeds, FRESH_FIRST)
            fresh.append(r)
            print(f"{name} (seeds from {FRESH_FIRST}): exact {r.exact:.6g}, covered {r.covered}/{r.seeds}, "
                  f"above {r.above}, below {r.below}, {r.seconds:.1f} s", flush=True)
        write_doc(results, Path(__file__).resolve().parent.parent / "docs" / "calibration.md", fresh)
    return 0 if all(r.passes for r in results + fresh) else 1


if __name__ == "__main__":
    sys.exit(main())
