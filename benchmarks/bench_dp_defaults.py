"""Defaults of the private calibrators (issue #21): tight vs paper, rank vs quantile.

Issue #21 asks to make ``rule="tight"`` the default of ``"dp-central"``
(:class:`~skfedcp.calibrators.PrivateCentralCalibrator`) and ``"dp-qq"``
(:class:`~skfedcp.calibrators.PrivateQuantileOfQuantilesCalibrator`) only if,
on the score laws of the user guide's tables, it is never further from
``1 - alpha`` than the paper's rule, and ``utility="rank"`` (dp-qq) only
where it wins on every law tested. This script gives the numbers.

Columns: dp-qq ``paper`` (the papers' rule), ``tight`` (``rule="tight"``,
paper's quantile utility) and ``rank`` (``rule="tight", utility="rank"``);
dp-central ``paper`` and ``tight``. Every other parameter is the
calibrator's default (dp-qq: 100 bins, ``gamma="auto"``; dp-central:
``n_bins="auto"``, ``gamma="auto"``), scores on the public bounds (0, 1).

Score laws: uniform, Beta(5, 1) (mass near 1), Beta(1, 4) (mass near 0),
the two-point law (90 % at 0.004, 10 % at 0.996) and an atom at 0 (85 % at
0, 15 % uniform).

Coverage of a cell: ``E[F(threshold)]`` over calibration data and mechanism
(``F`` the score CDF, ``F(+inf) = 1``). Given the data, the law of the
threshold is exact: each client's release law is computed (the same
vectorised path as ``private_quantile``; checked against the calibrator's
``threshold_probabilities`` on the first draws of every cell), and the
``k``-th smallest of independent releases has ``P(T > e_b) = P(fewer than
k releases <= e_b)``, a Poisson-binomial. The outer expectation over data:

* two-point law: **exact**. A client's data set is fixed by its number of
  low scores (binomial), so its marginal release law is a finite binomial
  mixture; clients are independent, so the threshold's law (and coverage)
  follows exactly from these marginals (binomial weights below 1e-18 are
  dropped);
* other laws: Monte Carlo over ``--reps`` data sets (± its standard error);
  all the columns of a cell use the same data sets, so differences between
  rules are paired.

Width: the mean threshold, with ``+inf`` (the trivial set) counted as the
upper score bound 1, and ``P(inf)``, the probability of the trivial set. An
infeasible plan releases ``+inf`` without reading data: coverage 1.

Verdict (per comparison, over all cells): a challenger is *further* from
``1 - alpha`` than the reference when ``|cov_c - (1 - alpha)| > |cov_r -
(1 - alpha)|``; it is further *beyond noise* when the gap exceeds 3 paired
standard errors (exact cells: 1e-9). The guarantee check asks every tight
column for ``cov >= 1 - alpha - 3 SE``.

The default grid (alpha in {0.1, 0.05}, epsilon in {0.5, 1, 5}, equal and
unequal client sizes) keeps every tight plan within a few seconds on the
2-core machine; ``--large`` adds larger federations for when the plans are
faster. dp-central runs on the pooled sizes ``N`` of the federations
(each ``N`` once).

The record goes to ``benchmarks/results/bench_dp_defaults.json`` (the default
grid), ``bench_dp_defaults_large.json`` (``--large``, or ``--settings`` naming
larger federations only) or ``bench_dp_defaults_subset.json`` (other
``--settings``).

Run: ``python benchmarks/bench_dp_defaults.py [--quick] [--large] [--reps R]
[--settings NAME ...]``.
"""

import argparse
import math
import sys
import time
import warnings

import _common
import numpy as np
from scipy import stats

from skfedcp.calibrators import (
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
)
from skfedcp.calibrators._dp._laws import _poisbin_at_most
from skfedcp.exceptions import InfiniteThresholdWarning
from skfedcp.privacy._quantile import _release_log_probabilities

ALPHAS = (0.1, 0.05)
EPSILONS = (0.5, 1.0, 5.0)
BOUNDS = (0.0, 1.0)
#: Standard errors a difference must exceed to count beyond Monte Carlo noise.
MARGIN_SE = 3.0
#: Tolerance of the exact cells (float rounding of the sums).
EXACT_TOL = 1e-9
#: A gap beyond noise that is also larger than this is reported as material.
MATERIAL = 1e-3

#: name -> client sizes. Equal and unequal sizes, a few m and n.
SETTINGS = {
    "5 x 50": [50] * 5,
    "5 x 200": [200] * 5,
    "10 x 100": [100] * 10,
    "20 x 250": [250] * 20,
    "5 x 1000": [1000] * 5,
    "5 of 60..300": [60, 100, 150, 200, 300],
    "10 of 40..300": [40, 60, 80, 100, 120, 150, 180, 200, 250, 300],
    "8 of 200..1500": [200, 300, 400, 600, 800, 1000, 1200, 1500],
}
#: Added by --large (tight plans of tens of seconds today).
LARGE_SETTINGS = {
    "40 of 20..400": np.linspace(20, 400, 40).astype(int).tolist(),
    "100 x 100": [100] * 100,
    "20 of 100..2000": np.linspace(100, 2000, 20).astype(int).tolist(),
}
QUICK_SETTINGS = ("5 x 200", "5 of 60..300")


def _two_point(rng, size):
    return np.where(rng.random(size) < 0.9, 0.004, 0.996)


#: name -> (sampler(rng, shape), CDF F(t) on [0, 1] and F(+inf) = 1,
#: two atoms ((low, high), P(low)) for the exact computation, or None).
LAWS = {
    "uniform": (lambda rng, s: rng.uniform(size=s), lambda t: np.minimum(t, 1.0), None),
    "beta(5,1)": (
        lambda rng, s: rng.beta(5, 1, size=s),
        lambda t: np.minimum(t, 1.0) ** 5,
        None,
    ),
    "beta(1,4)": (
        lambda rng, s: rng.beta(1, 4, size=s),
        lambda t: 1.0 - (1.0 - np.minimum(t, 1.0)) ** 4,
        None,
    ),
    "two-point": (
        _two_point,
        lambda t: np.where(t >= 0.996, 1.0, np.where(t >= 0.004, 0.9, 0.0)),
        ((0.004, 0.996), 0.9),
    ),
    "atom 85% at 0": (
        lambda rng, s: np.where(rng.random(s) < 0.85, 0.0, rng.uniform(size=s)),
        lambda t: 0.85 + 0.15 * np.minimum(t, 1.0),
        None,
    ),
}

QQ_COLUMNS = {
    "paper": ("paper", "quantile"),
    "tight": ("tight", "quantile"),
    "rank": ("tight", "rank"),
}
CENTRAL_COLUMNS = {"paper": ("paper", None), "tight": ("tight", None)}
#: (calibrator, challenger, reference): the comparisons of the verdict.
COMPARISONS = [
    ("dp-central", "tight", "paper"),
    ("dp-qq", "tight", "paper"),
    ("dp-qq", "rank", "paper"),
    ("dp-qq", "rank", "tight"),
]


def make_calibrator(kind, epsilon, rule, utility):
    if kind == "dp-qq":
        return PrivateQuantileOfQuantilesCalibrator(
            epsilon=epsilon, score_bounds=BOUNDS, rule=rule, utility=utility
        )
    return PrivateCentralCalibrator(epsilon=epsilon, score_bounds=BOUNDS, rule=rule)


class Party:
    """One releasing party of a plan: its size, level, and the mechanism."""

    def __init__(self, n, level, epsilon, edges, utility):
        self.n, self.level, self.epsilon = n, level, epsilon
        self.edges, self.utility = edges, utility

    def cdfs(self, scores):
        """``P(release <= e_b | data)`` for each row of ``scores`` (R, n)."""
        n_bins = self.edges.shape[0] - 1
        if self.level is None or not np.isfinite(self.level):  # sends +inf
            out = np.zeros((scores.shape[0], n_bins))
            out[:, -1] = 1.0
            return out
        log_p = _release_log_probabilities(
            scores, self.level, self.epsilon, self.edges, self.utility
        )
        return np.cumsum(np.exp(log_p), axis=1)


def parties_of(kind, plan, sizes, epsilon, utility):
    """The releasing parties of a feasible plan and the order statistic k."""
    edges = np.linspace(*BOUNDS, plan["n_bins"] + 1)
    if kind == "dp-central":
        return [Party(int(sum(sizes)), plan["level"], epsilon, edges, "quantile")], 1
    utility = plan.get("utility", utility)
    parties = [
        Party(n, level, epsilon, edges, utility)
        for n, level in zip(sizes, plan["levels"], strict=True)
    ]
    return parties, plan["k"]


def threshold_summary(cdfs, k, edges, cdf):
    """Coverage, mean threshold (+inf as the bound) and P(+inf), per row.

    ``cdfs``: per party an ``(R, B)`` array of release CDFs; the parties are
    independent and the threshold is the ``k``-th smallest release.
    """
    rows, n_bins = cdfs[0].shape
    probs = np.stack([c.ravel() for c in cdfs])
    above = _poisbin_at_most(probs, [1] * len(cdfs), k).reshape(rows, n_bins)
    law_cdf = 1.0 - above
    law_cdf[:, -1] = 1.0
    pmf = np.diff(law_cdf, axis=1, prepend=0.0)
    values = edges[1:].copy()
    values[-1] = np.inf
    coverage = pmf @ cdf(values)
    threshold = pmf @ np.r_[edges[1:-1], BOUNDS[1]]
    return coverage, threshold, pmf[:, -1]


def _federation(rng, law, sizes, reps):
    draw = LAWS[law][0]
    return [draw(rng, (reps, n)) for n in sizes]


def monte_carlo_cell(kind, columns, sizes, law, alpha, epsilon, reps, seed, chunk):
    """Per-draw coverage, threshold and P(inf) of every column (paired draws)."""
    cdf = LAWS[law][1]
    plans = {
        name: make_calibrator(kind, epsilon, rule, utility).plan(sizes, alpha)
        for name, (rule, utility) in columns.items()
    }
    out = {name: np.ones((3, reps)) for name in columns}  # infeasible: 1, 1, 1
    rng = np.random.default_rng(seed)
    rows = max(1, min(reps, chunk // max(1, sum(sizes))))
    checked = False
    for start in range(0, reps, rows):
        stop = min(reps, start + rows)
        data = _federation(rng, law, sizes, stop - start)
        pooled = np.hstack(data) if kind == "dp-central" else None
        for name, (rule, utility) in columns.items():
            plan = plans[name]
            if not plan["feasible"]:
                continue
            parties, k = parties_of(kind, plan, sizes, epsilon, utility)
            blocks = [pooled] if kind == "dp-central" else data
            cdfs = [p.cdfs(block) for p, block in zip(parties, blocks, strict=True)]
            edges = parties[0].edges
            out[name][:, start:stop] = threshold_summary(cdfs, k, edges, cdf)
            if not checked:
                _check_against_library(
                    kind, epsilon, rule, utility, data, alpha, out[name][0, start], cdf
                )
        checked = True
    return plans, out


def _check_against_library(kind, epsilon, rule, utility, data, alpha, value, cdf):
    """The vectorised law must equal ``threshold_probabilities`` (first draw)."""
    scores = np.concatenate([block[0] for block in data])
    ids = np.repeat(np.arange(len(data)), [block.shape[1] for block in data])
    cal = make_calibrator(kind, epsilon, rule, utility)
    law = cal.threshold_probabilities(scores, ids, alpha=alpha)
    expected = float(law.probabilities @ cdf(law.values))
    if not abs(expected - value) <= 1e-9:
        raise AssertionError(
            f"{kind} {rule}/{utility}: vectorised coverage {value!r} differs "
            f"from threshold_probabilities {expected!r}"
        )


def exact_two_atom_cell(kind, columns, sizes, law, alpha, epsilon):
    """Exact coverage etc. of a two-atom law: binomial mixtures of data sets."""
    _, cdf, ((low, high), p_low) = LAWS[law]
    plans, out = {}, {}
    for name, (rule, utility) in columns.items():
        plan = make_calibrator(kind, epsilon, rule, utility).plan(sizes, alpha)
        plans[name] = plan
        if not plan["feasible"]:
            out[name] = np.ones((3, 1))
            continue
        parties, k = parties_of(kind, plan, sizes, epsilon, utility)
        marginals, memo = [], {}
        for party in parties:
            key = (party.n, party.level)
            if key not in memo:
                counts = np.arange(party.n + 1)
                weights = stats.binom.pmf(counts, party.n, p_low)
                keep = weights > 1e-18
                counts, weights = counts[keep], weights[keep] / weights[keep].sum()
                scores = np.where(
                    np.arange(party.n)[None, :] < counts[:, None], low, high
                )
                memo[key] = (weights @ party.cdfs(scores))[None, :]
            marginals.append(memo[key])
        out[name] = np.array(threshold_summary(marginals, k, parties[0].edges, cdf))
    return plans, out


def _plan_record(plan):
    keys = ("feasible", "k", "gamma", "n_bins", "level", "levels", "coverage_lower")
    record = {key: plan[key] for key in keys if key in plan}
    if "levels" in record:
        levels = [float(v) if v is not None else math.inf for v in record["levels"]]
        record["levels"] = sorted(set(levels))
    return record


def summarize(name_cols, out, exact, target):
    """Mean, SE, distance to the target of every column of a cell."""
    cells = {}
    for name in name_cols:
        cov, thr, pinf = out[name]
        r = cov.shape[0]
        se = 0.0 if exact or r < 2 else float(cov.std(ddof=1) / math.sqrt(r))
        mean = float(cov.mean())
        cells[name] = {
            "coverage": mean,
            "se": se,
            "distance": abs(mean - target),
            "threshold": float(thr.mean()),
            "p_inf": float(pinf.mean()),
        }
    return cells


def paired_gap(out, challenger, reference, exact, target):
    """``|c - target| - |r - target|`` and its paired standard error."""
    c, r = out[challenger][0], out[reference][0]
    sc = 1.0 if c.mean() >= target else -1.0
    sr = 1.0 if r.mean() >= target else -1.0
    d = sc * (c - target) - sr * (r - target)
    se = 0.0 if exact or d.shape[0] < 2 else float(d.std(ddof=1) / math.sqrt(d.size))
    return float(d.mean()), se


def run(settings, alphas, epsilons, laws, reps, seed, chunk):
    rows = []
    jobs = [("dp-qq", QQ_COLUMNS, name, sizes) for name, sizes in settings.items()]
    pooled = {}
    for name, sizes in settings.items():
        pooled.setdefault(int(sum(sizes)), name)
    for total in sorted(pooled):
        jobs.append(("dp-central", CENTRAL_COLUMNS, f"N = {total}", [total]))
    for job, (kind, columns, name, sizes) in enumerate(jobs):
        for a_i, alpha in enumerate(alphas):
            for e_i, epsilon in enumerate(epsilons):
                for l_i, law in enumerate(laws):
                    start = time.perf_counter()
                    exact = LAWS[law][2] is not None
                    cell_seed = [seed, job, a_i, e_i, l_i]
                    if exact:
                        plans, out = exact_two_atom_cell(
                            kind, columns, sizes, law, alpha, epsilon
                        )
                    else:
                        plans, out = monte_carlo_cell(
                            kind, columns, sizes, law, alpha, epsilon, reps,
                            cell_seed, chunk,
                        )  # fmt: skip
                    target = 1.0 - alpha
                    row = {
                        "calibrator": kind,
                        "setting": name,
                        "sizes": [int(n) for n in sizes],
                        "alpha": alpha,
                        "epsilon": epsilon,
                        "law": law,
                        "exact": exact,
                        "reps": 0 if exact else reps,
                        "columns": summarize(columns, out, exact, target),
                        "plans": {n: _plan_record(p) for n, p in plans.items()},
                        "gaps": {},
                    }
                    for calib, challenger, reference in COMPARISONS:
                        if calib == kind:
                            gap, se = paired_gap(
                                out, challenger, reference, exact, target
                            )
                            row["gaps"][f"{challenger} vs {reference}"] = {
                                "gap": gap,
                                "se": se,
                            }
                    row["seconds"] = time.perf_counter() - start
                    rows.append(row)
                    print_row(row, columns)
    return rows


def _cov(cell, exact, feasible):
    if not feasible:
        return "1 (trivial)  "
    if exact:
        return f"{cell['coverage']:.4f} exact "
    return f"{cell['coverage']:.4f}±{cell['se']:.4f}"


HEADER = (
    f"{'calibrator':10s} {'setting':15s} {'alpha':>5s} {'eps':>4s} {'law':13s} "
    f"{'column':6s} {'coverage':>13s} {'|cov-(1-a)|':>11s} {'mean thr':>8s} "
    f"{'P(inf)':>6s} {'plan':>14s}"
)


def print_row(row, columns):
    for i, name in enumerate(columns):
        cell, plan = row["columns"][name], row["plans"][name]
        if not plan["feasible"]:
            described = "infeasible"
        elif row["calibrator"] == "dp-qq":
            described = f"k={plan['k']} q={plan['levels'][0]:.4f}"
            if len(plan["levels"]) > 1:
                described = f"k={plan['k']} q={plan['levels'][0]:.3f}.."
        else:
            described = f"B={plan['n_bins']} q={plan['level']:.4f}"
        lead = (
            f"{row['calibrator']:10s} {row['setting']:15s} {row['alpha']:5g} "
            f"{row['epsilon']:4g} {row['law']:13s}"
            if i == 0
            else " " * 52
        )
        coverage = _cov(cell, row["exact"], plan["feasible"])
        print(
            f"{lead} {name:6s} {coverage:>13s} {cell['distance']:11.4f} "
            f"{cell['threshold']:8.4f} {cell['p_inf']:6.3f} {described:>14s}",
            flush=True,
        )


def verdict(rows):
    """Counts per comparison, and per law for rank vs tight."""
    table = []
    for calib, challenger, reference in COMPARISONS:
        key = f"{challenger} vs {reference}"
        sel = [r for r in rows if r["calibrator"] == calib]
        if not sel:
            continue
        gaps = [(r["gaps"][key]["gap"], r["gaps"][key]["se"], r) for r in sel]
        further = [(g, s, r) for g, s, r in gaps if g > 0]
        beyond = [(g, s, r) for g, s, r in gaps if g > max(MARGIN_SE * s, EXACT_TOL)]
        material = [(g, s, r) for g, s, r in beyond if g > MATERIAL]
        closer = [(g, s, r) for g, s, r in gaps if -g > max(MARGIN_SE * s, EXACT_TOL)]
        worst = max(gaps, key=lambda x: x[0] - MARGIN_SE * x[1])
        table.append(
            {
                "calibrator": calib,
                "comparison": key,
                "cells": len(gaps),
                "further": len(further),
                "further_beyond_3se": len(beyond),
                "further_beyond_3se_and_material": len(material),
                "closer_beyond_3se": len(closer),
                "max_gap": worst[0],
                "max_gap_se": worst[1],
                "max_gap_cell": _where(worst[2]),
                "further_cells": [
                    {"cell": _where(r), "gap": g, "se": s} for g, s, r in beyond
                ],
            }
        )
    per_law = []
    qq = [r for r in rows if r["calibrator"] == "dp-qq"]
    for law in LAWS:
        for alpha in sorted({r["alpha"] for r in qq}, reverse=True):
            sel = [
                r["gaps"]["rank vs tight"]
                for r in qq
                if r["law"] == law and r["alpha"] == alpha
            ]
            if not sel:
                continue
            pairs = [(g["gap"], max(MARGIN_SE * g["se"], EXACT_TOL)) for g in sel]
            gaps = [g for g, _ in pairs]
            per_law.append(
                {
                    "law": law,
                    "alpha": alpha,
                    "cells": len(sel),
                    "rank_wins": sum(-g > n for g, n in pairs),
                    "rank_loses": sum(g > n for g, n in pairs),
                    "rank_loses_material": sum(g > max(n, MATERIAL) for g, n in pairs),
                    "largest_loss": max(gaps),
                    "largest_win": -min(gaps),
                }
            )
    guarantee = []
    for r in rows:
        target = 1.0 - r["alpha"]
        for name in ("tight", "rank"):
            cell = r["columns"].get(name)
            if cell is None:
                continue
            slack = max(MARGIN_SE * cell["se"], EXACT_TOL)
            if cell["coverage"] < target - slack:
                guarantee.append(
                    {"cell": _where(r), "column": name, **cell, "target": target}
                )
    min_margin = {}
    for r in rows:
        for name in ("paper", "tight", "rank"):
            cell = r["columns"].get(name)
            if cell is None:
                continue
            diff = cell["coverage"] - (1 - r["alpha"])
            z = diff / cell["se"] if cell["se"] > 0 else math.inf
            key = (r["calibrator"], name)
            if key not in min_margin or diff < min_margin[key][1]:
                min_margin[key] = (z, diff, _where(r))
    return table, per_law, guarantee, min_margin


def _where(row):
    return (
        f"{row['calibrator']} {row['setting']} alpha={row['alpha']:g} "
        f"eps={row['epsilon']:g} {row['law']}"
    )


def print_verdict(table, per_law, guarantee, min_margin):
    print(
        f"\nVERDICT (a challenger is 'further' when |cov - (1 - alpha)| exceeds the "
        f"reference's; 'beyond noise' when by more than {MARGIN_SE:g} paired SE, "
        f"exact cells by more than {EXACT_TOL:g})"
    )
    print(
        f"{'calibrator':10s} {'challenger vs reference':>24s} {'cells':>5s} "
        f"{'further':>7s} {'beyond 3SE':>10s} {'& >0.001':>8s} {'closer (3SE)':>12s} "
        f"{'largest gap (±SE)':>19s}  where"
    )
    for t in table:
        print(
            f"{t['calibrator']:10s} {t['comparison']:>24s} {t['cells']:5d} "
            f"{t['further']:7d} {t['further_beyond_3se']:10d} "
            f"{t['further_beyond_3se_and_material']:8d} "
            f"{t['closer_beyond_3se']:12d} "
            f"{t['max_gap']:+10.5f}±{t['max_gap_se']:.5f}  {t['max_gap_cell']}"
        )
        for f in t["further_cells"][:12]:
            print(f"{'':42s}further: {f['gap']:+.5f}±{f['se']:.5f}  {f['cell']}")
        if len(t["further_cells"]) > 12:
            print(f"{'':42s}... {len(t['further_cells']) - 12} more (JSON)")
    if per_law:
        print("\ndp-qq, rank vs tight (quantile utility), per law and alpha (3 SE):")
        print(
            f"{'law':13s} {'alpha':>5s} {'cells':>5s} {'rank wins':>9s} "
            f"{'rank loses':>10s} {'& >0.001':>8s} {'largest win':>11s} "
            f"{'largest loss':>12s}"
        )
        for p in per_law:
            print(
                f"{p['law']:13s} {p['alpha']:5g} {p['cells']:5d} {p['rank_wins']:9d} "
                f"{p['rank_loses']:10d} {p['rank_loses_material']:8d} "
                f"{p['largest_win']:11.4f} {p['largest_loss']:12.4f}"
            )
    print(
        f"\nGuarantee: tight/rank coverage below 1 - alpha by more than "
        f"{MARGIN_SE:g} SE: {len(guarantee)} cell(s)"
    )
    for g in guarantee:
        print(f"  {g['column']}: {g['coverage']:.4f}±{g['se']:.4f}  {g['cell']}")
    print("Smallest coverage - (1 - alpha) per column (z: in SE):")
    for (calib, name), (z, diff, where) in sorted(min_margin.items()):
        z_text = "exact" if math.isinf(z) else f"z={z:+.1f}"
        print(f"  {calib:10s} {name:6s} {diff:+.4f} ({z_text})  {where}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 settings, 200 reps")
    parser.add_argument("--large", action="store_true", help="add larger federations")
    parser.add_argument("--reps", type=int, default=None, help="data sets per cell")
    parser.add_argument(
        "--settings",
        nargs="+",
        metavar="NAME",
        choices=[*SETTINGS, *LARGE_SETTINGS],
        help="run only these federations (names as printed, e.g. '5 x 200')",
    )
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument(
        "--chunk", type=int, default=2_000_000, help="scores drawn at once"
    )
    args = parser.parse_args(argv)
    settings = dict(SETTINGS)
    if args.quick:
        settings = {name: SETTINGS[name] for name in QUICK_SETTINGS}
    if args.large:
        settings.update(LARGE_SETTINGS)
    record = "bench_dp_defaults" + ("_large" if args.large else "")
    if args.settings:
        settings = {
            name: {**SETTINGS, **LARGE_SETTINGS}[name] for name in args.settings
        }
        large_only = set(args.settings) <= set(LARGE_SETTINGS)
        record = "bench_dp_defaults_" + ("large" if large_only else "subset")
    reps = args.reps or (200 if args.quick else 2000)
    start = time.perf_counter()
    print(HEADER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        rows = run(settings, ALPHAS, EPSILONS, list(LAWS), reps, args.seed, args.chunk)
    table, per_law, guarantee, min_margin = verdict(rows)
    print_verdict(table, per_law, guarantee, min_margin)
    seconds = time.perf_counter() - start
    print(f"\n{len(rows)} cells in {seconds:.0f} s")
    if not args.quick:
        path = _common.save_record(
            record,
            {
                "command": " ".join(["python", "benchmarks/bench_dp_defaults.py"]
                                    + sys.argv[1:]),
                "alphas": ALPHAS,
                "epsilons": EPSILONS,
                "laws": list(LAWS),
                "settings": settings,
                "reps": reps,
                "seed": args.seed,
                "margin_se": MARGIN_SE,
                "seconds": seconds,
                "verdict": table,
                "rank_vs_tight_per_law": per_law,
                "guarantee_violations": guarantee,
                "min_margin": [
                    {"calibrator": c, "column": n, "z": None if math.isinf(z) else z,
                     "diff": d, "cell": w}
                    for (c, n), (z, d, w) in sorted(min_margin.items())
                ],
                "rows": rows,
            },
        )  # fmt: skip
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
