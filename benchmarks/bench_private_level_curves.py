"""Corrected levels of private calibration versus n and epsilon (Fig. 2 of seed 002).

Angelopoulos et al., Fig. 2: the level ``q~`` at which the private quantile
runs, with the number of bins ``m*`` and ``gamma*`` chosen automatically
(deterministic Algorithm 5, alpha = 0.1). It falls towards the limiting value
``1 - alpha`` as ``n`` and ``epsilon`` grow; ``>= 1`` means too little data
(trivial sets). The paper gives the figure only, no numbers.

Also, the FedCP²-QQ analogue (Humbert et al., Fig. 2): the exact coverage
``M(l_gamma + l_cor, k_gamma)`` of the corrected ranks for m = 10 clients,
B = 100 bins, beside the reference values of the spec (section 7).

Then ``rule="paper"`` versus ``rule="tight"`` (the skfedcp extension of the
user guide, "Tight corrections") and, for FedCP²-QQ, ``rule="tight",
utility="rank"`` (the symmetric rank utility): the exact coverage
``E[F(threshold)]`` of the rules, the share of the paper's excess over
``1 - alpha`` each removes (± its paired delta-method SE: all rules run on
the same draws), from the exact law of the threshold (``threshold_probabilities``)
averaged over ``R`` calibration draws (± its Monte Carlo standard error), for
FedCP²-QQ (5 clients x 200 scores, B = 100, the paper's setting) and
dp-central (n = 1,000, automatic bins), on several score laws: continuous
(uniform, skewed), atoms, ties on bin edges and a two-point law.

Run: ``python benchmarks/bench_private_level_curves.py [--quick]``.
"""

import argparse
import time

import _common  # noqa: F401
import numpy as np

from skfedcp.calibrators import (
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
)
from skfedcp.privacy import (
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
)

ALPHA = 0.1
# Spec fedcp_qq.md section 7 ("Fig. 2-like values"), None = infeasible.
QQ_REFERENCE = {
    10.0: [0.9556, 0.9259, 0.9167, 0.9071, 0.9041],
    5.0: [0.9804, 0.9467, 0.9263, 0.9131, 0.9073],
    1.0: [None, None, 0.9995, 0.9522, 0.9276],
}
QQ_SIZES = [50, 100, 200, 500, 1000]


def central_curves(sizes, epsilons):
    table = {}
    for eps in epsilons:
        for n in sizes:
            m = private_conformal_n_bins(n, ALPHA, epsilon=eps)
            gamma = private_conformal_gamma(n, ALPHA, epsilon=eps)
            level = private_conformal_level(
                n, ALPHA, epsilon=eps, n_bins=m, gamma=gamma
            )
            table[eps, n] = (level, m, gamma)
    return table


def qq_curves(sizes, epsilons):
    table = {}
    for eps in epsilons:
        cal = PrivateQuantileOfQuantilesCalibrator(epsilon=eps, score_bounds=(0, 1))
        for n in sizes:
            plan = cal.plan([n] * 10, ALPHA)
            table[eps, n] = plan["score"] if plan["feasible"] else None
    return table


# Score laws: a sampler and the CDF F(t) = P(S <= t) (t may be +inf).
LAWS = {
    "uniform": (lambda rng, n: rng.uniform(size=n), lambda t: np.minimum(t, 1.0)),
    "beta(5,1)": (
        lambda rng, n: rng.beta(5, 1, size=n),
        lambda t: np.minimum(t, 1) ** 5,
    ),
    "atom 85% at 0": (
        lambda rng, n: np.where(rng.random(n) < 0.85, 0.0, rng.uniform(size=n)),
        lambda t: 0.85 + 0.15 * np.minimum(t, 1.0),
    ),
    "edges (ties)": (
        lambda rng, n: rng.integers(1, 101, size=n) / 100.0,
        lambda t: np.floor(np.minimum(t, 1.0) * 100 + 1e-9) / 100.0,
    ),
    "two-point": (
        lambda rng, n: np.where(rng.random(n) < 0.9, 0.004, 0.996),
        lambda t: np.where(t >= 0.996, 1.0, np.where(t >= 0.004, 0.9, 0.0)),
    ),
}


def exact_coverage(calibrator, sizes, law, reps, seed=0):
    """Mean and SE over ``reps`` data sets of ``E[F(threshold) | data]``."""
    cov = exact_coverages(calibrator, sizes, law, reps, seed)
    return cov.mean(), cov.std(ddof=1) / np.sqrt(reps)


def removed_share(paper, other):
    """Share of the paper's excess over ``1 - alpha`` removed, and its SE.

    ``paper`` and ``other`` are the per-draw coverages on the *same* data
    sets (same seed), so the ratio ``mean(p - o) / mean(p - (1 - alpha))``
    gets a paired delta-method standard error.
    """
    d, e = paper - other, paper - (1 - ALPHA)
    if e.mean() <= 0:
        return np.nan, np.nan
    ratio = d.mean() / e.mean()
    z = (d - ratio * e) / e.mean()
    return ratio, z.std(ddof=1) / np.sqrt(z.shape[0])


def exact_coverages(calibrator, sizes, law, reps, seed=0):
    """``E[F(threshold) | data]`` on ``reps`` data sets drawn from ``seed``."""
    draw, cdf = LAWS[law]
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes)
    ids = np.repeat(np.arange(sizes.shape[0]), sizes) if sizes.shape[0] > 1 else None
    cov = np.empty(reps)
    for r in range(reps):
        law_ = calibrator.threshold_probabilities(
            draw(rng, int(sizes.sum())), ids, alpha=ALPHA
        )
        cov[r] = law_.probabilities @ cdf(law_.values)
    return cov


def coverage_tables(reps, epsilons=(10.0, 5.0, 1.0), laws=None, settings=None):
    def dp_qq(e, rule, utility="quantile"):
        return PrivateQuantileOfQuantilesCalibrator(
            epsilon=e, score_bounds=(0, 1), rule=rule, utility=utility
        )

    def central(e, rule, utility="quantile"):
        return PrivateCentralCalibrator(epsilon=e, score_bounds=(0, 1), rule=rule)

    # (rule, utility) columns: the paper, the tight plan on the paper's
    # mechanism and, for DP-QQ, the tight plan on the symmetric rank utility.
    qq_rules = [("paper", "quantile"), ("tight", "quantile"), ("tight", "rank")]
    all_settings = {
        "dp-qq 5 x 200, B=100": ([200] * 5, dp_qq, qq_rules),
        "dp-qq 5 of 150..250, B=100": ([150, 180, 200, 220, 250], dp_qq, qq_rules),
        "dp-central n=1000": ([1000], central, qq_rules[:2]),
    }
    rows = []
    for name in settings or all_settings:
        sizes, make, rules = all_settings[name]
        print(f"\n{name}: exact coverage (mean ± SE over {reps} data sets)")
        header = f"{'law':>14s} {'eps':>4s} {'paper':>17s} {'tight':>17s}"
        if len(rules) == 3:
            header += f" {'tight rank':>17s}"
        header += f" {'removed':>9s}"
        if len(rules) == 3:
            header += f" {'removed rank':>13s}"
        header += f" {'goal':>6s} {'bound (tight)':>14s}"
        if len(rules) == 3:
            header += f" {'bound (rank)':>13s}"
        print(header)
        for law in laws or LAWS:
            for eps in epsilons:
                out, bounds = {}, {}
                for rule, utility in rules:
                    cal = make(eps, rule, utility)
                    out[rule, utility] = exact_coverages(cal, sizes, law, reps)
                    bounds[rule, utility] = cal.plan(sizes, ALPHA).get(
                        "coverage_lower", float("nan")
                    )
                se = {key: c.std(ddof=1) / np.sqrt(reps) for key, c in out.items()}
                p, p_se = out["paper", "quantile"].mean(), se["paper", "quantile"]
                t, t_se = out["tight", "quantile"].mean(), se["tight", "quantile"]
                t_removed, t_removed_se = removed_share(
                    out["paper", "quantile"], out["tight", "quantile"]
                )
                line = (
                    f"{law:>14s} {eps:4g} {p:8.4f} ± {p_se:.4f} {t:8.4f} ± {t_se:.4f}"
                )
                row = {
                    "setting": name,
                    "law": law,
                    "epsilon": eps,
                    "paper": p,
                    "paper_se": p_se,
                    "tight": t,
                    "tight_se": t_se,
                    "excess_removed": t_removed,
                    "excess_removed_se": t_removed_se,
                    "tight_bound": bounds["tight", "quantile"],
                }
                if len(rules) == 3:
                    r, r_se = out["tight", "rank"].mean(), se["tight", "rank"]
                    r_removed, r_removed_se = removed_share(
                        out["paper", "quantile"], out["tight", "rank"]
                    )
                    line += f" {r:8.4f} ± {r_se:.4f}"
                    row.update(
                        rank=r,
                        rank_se=r_se,
                        rank_excess_removed=r_removed,
                        rank_excess_removed_se=r_removed_se,
                        rank_bound=bounds["tight", "rank"],
                    )
                line += f" {100 * t_removed:4.0f}±{100 * t_removed_se:.1f}%"
                if len(rules) == 3:
                    line += f" {100 * r_removed:8.0f}±{100 * r_removed_se:.1f}%"
                line += f" {'>= 50%':>6s} {bounds['tight', 'quantile']:14.4f}"
                if len(rules) == 3:
                    line += f" {bounds['tight', 'rank']:13.4f}"
                print(line, flush=True)
                rows.append(row)
    return rows


def _cell(value):
    return f"{'>= 1':>8s}" if value >= 1 else f"{value:8.4f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a coarse n grid")
    parser.add_argument(
        "--reps", type=int, default=None, help="data sets per coverage cell"
    )
    parser.add_argument(
        "--coverage-only", action="store_true", help="only paper vs tight"
    )
    parser.add_argument(
        "--dp-qq-only", action="store_true", help="paper vs tight: dp-qq, uniform"
    )
    args = parser.parse_args(argv)
    reps = args.reps or (100 if args.quick else 1000)
    if args.dp_qq_only:
        rows = coverage_tables(
            reps,
            epsilons=(10.0, 5.0),
            laws=["uniform"],
            settings=["dp-qq 5 x 200, B=100", "dp-qq 5 of 150..250, B=100"],
        )
        _common.save_record("private_tight_dp_qq", {"alpha": ALPHA, "rows": rows})
        return
    if args.coverage_only:
        rows = coverage_tables(reps)
        _common.save_record("private_tight_coverage", {"alpha": ALPHA, "rows": rows})
        return
    if args.quick:
        sizes = [100, 1000, 10_000]
        epsilons = [1.0, 10.0]
    else:
        sizes = [int(n) for n in np.unique(np.logspace(2, 5, 13).astype(int))]
        epsilons = [0.5, 1.0, 2.0, 5.0, 10.0]
    start = time.perf_counter()
    central = central_curves(sizes, epsilons)
    print(f"\nq~(n, epsilon), alpha = {ALPHA}, auto m* and gamma* (>= 1: trivial)")
    print(f"{'n':>8s} " + " ".join(f"{'eps=' + format(e, 'g'):>8s}" for e in epsilons))
    for n in sizes:
        cells = " ".join(_cell(central[e, n][0]) for e in epsilons)
        print(f"{n:8d} {cells}")
    print("\nexcess (q~ - (1 - alpha)) / (1 - alpha) at the largest n:")
    for e in epsilons:
        level = central[e, sizes[-1]][0]
        print(f"  eps={e:g}: {(level - (1 - ALPHA)) / (1 - ALPHA):.2e}")
    print("\nchosen m* (bins):")
    print(f"{'n':>8s} " + " ".join(f"{'eps=' + format(e, 'g'):>8s}" for e in epsilons))
    for n in sizes:
        print(f"{n:8d} " + " ".join(f"{central[e, n][1]:8d}" for e in epsilons))

    qq_eps = [10.0, 5.0, 1.0] if not args.quick else [10.0, 1.0]
    qq_sizes = QQ_SIZES if not args.quick else [100, 1000]
    qq = qq_curves(qq_sizes, qq_eps)
    print("\nFedCP²-QQ: M(l_gamma + l_cor, k_gamma), m = 10, B = 100 (spec ref.)")
    print(f"{'n':>8s} " + " ".join(f"{'eps=' + format(e, 'g'):>18s}" for e in qq_eps))
    for n in qq_sizes:
        cells = []
        for e in qq_eps:
            ref = QQ_REFERENCE[e][QQ_SIZES.index(n)]
            ours = "infeasible" if qq[e, n] is None else f"{qq[e, n]:.4f}"
            theirs = "infeasible" if ref is None else f"{ref:.4f}"
            cells.append(f"{ours:>10s} ({theirs:>6s})")
        print(f"{n:8d} " + " ".join(f"{c:>18s}" for c in cells))
    rows = coverage_tables(reps)
    seconds = time.perf_counter() - start
    _common.save_record(
        "private_level_curves",
        {
            "alpha": ALPHA,
            "seconds": seconds,
            "central": [
                {"n": n, "epsilon": e, "level": lv, "n_bins": m, "gamma": g}
                for (e, n), (lv, m, g) in central.items()
            ],
            "dp_qq": [
                {"n": n, "epsilon": e, "score": s, "reference": QQ_REFERENCE.get(e)}
                for (e, n), s in qq.items()
            ],
            "tight_coverage": rows,
        },
    )


if __name__ == "__main__":
    main()
