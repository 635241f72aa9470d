"""Section 5.1 of Humbert et al. (2023): federated CQR on Romano et al.'s data.

Protocol, per seed (``--n-seeds``, default 20): draw 7,000 points of
``make_romano_regression`` (X ~ U[1,5], Y = Pois(sin^2 X + 0.1) + 0.03 X e1 +
25 1{U < 0.01} e2); 1,000 train a quantile regression forest, 1,000 calibrate
as m = 50 clients of n = 20 (spec A16), 5,000 test. The forest is frozen and
the same intervals are calibrated with central split CP, QQ (FedCP-QQ) and
Avg (FedCP-Avg), alpha = 0.1. Printed: mean +/- sd over seeds of test
coverage and mean interval length, and the length ratio to central.

The forest follows Romano et al.'s synthetic example (1,000 trees,
``min_samples_leaf=40``). Two settings of its quantile levels run side by
side on the same forest: ``oob``, tuned on the training rows only (the
symmetric pair ``(a, 1 - a)`` whose out-of-bag coverage is closest to
``1 - alpha``, a cheap stand-in for the paper's cross-validation), and
``fixed``, the wrapper's default ``(alpha/2, 1 - alpha/2)``.
``--quick``: 3 seeds, 100 trees. Run: ``python benchmarks/bench_cqr_synthetic.py``.
"""

import argparse
import time

import _common  # noqa: F401
import numpy as np
import pandas as pd
from quantile_forest import RandomForestQuantileRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp.datasets import make_romano_regression
from skfedcp.metrics import coverage_score, mean_width_score
from skfedcp.regression import FedCQRRegressor

CALIBRATORS = ["central", "qq", "avg"]
LEVEL_GRID = np.round(np.arange(0.01, 0.26, 0.01), 2)


def tune_levels_oob(forest, X, y, alpha):
    """Levels (a, 1 - a) with out-of-bag training coverage nearest 1 - alpha."""
    qs = np.concatenate([LEVEL_GRID, 1 - LEVEL_GRID[::-1]]).tolist()
    pred = forest.predict(X, quantiles=qs, oob_score=True)
    k = len(LEVEL_GRID)
    lower, upper = pred[:, :k], pred[:, k:][:, ::-1]
    cov = ((lower <= y[:, None]) & (y[:, None] <= upper)).mean(axis=0)
    a = LEVEL_GRID[np.argmin(np.abs(cov - (1 - alpha)))]
    return (float(a), float(1 - a))


def run_seed(seed, args):
    m, n = args.n_clients, args.n_per_client
    X, y = make_romano_regression(args.n_train + m * n + args.n_test, random_state=seed)
    tr = slice(0, args.n_train)
    ca = slice(args.n_train, args.n_train + m * n)
    te = slice(args.n_train + m * n, None)
    ids = np.repeat(np.arange(m), n)
    forest = RandomForestQuantileRegressor(
        n_estimators=args.n_trees,
        min_samples_leaf=40,
        random_state=seed,
    ).fit(X[tr], y[tr])
    settings = {
        "oob": tune_levels_oob(forest, X[tr], y[tr], args.alpha),
        "fixed": (args.alpha / 2, 1 - args.alpha / 2),
    }
    rows = []
    for mode, levels in settings.items():
        for name in CALIBRATORS:
            reg = FedCQRRegressor(
                FrozenEstimator(forest),
                alpha=args.alpha,
                quantile_levels=levels,
                calibrator=name,
            ).fit(X[ca], y[ca], client_ids=ids)
            iv = reg.predict_interval(X[te])
            rows.append(
                {
                    "seed": seed,
                    "levels": mode,
                    "lower_level": levels[0],
                    "calibrator": name,
                    "threshold": float(reg.threshold_),
                    "coverage": coverage_score(y[te], iv),
                    "length": mean_width_score(iv),
                }
            )
    return rows


def summarize(df):
    keys = ["levels", "calibrator"]
    out = df.groupby(keys, sort=False).agg(
        lower_level=("lower_level", "mean"),
        coverage_mean=("coverage", "mean"),
        coverage_sd=("coverage", "std"),
        length_mean=("length", "mean"),
        length_sd=("length", "std"),
        length_median=("length", "median"),
    )
    central = df[df.calibrator == "central"].set_index(["levels", "seed"])["length"]
    ref = central.loc[list(zip(df["levels"], df["seed"], strict=True))].to_numpy()
    ratio = df.assign(ratio=df["length"].to_numpy() / ref)
    out["length_vs_central"] = ratio.groupby(keys, sort=False)["ratio"].mean()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-seeds", type=int, default=20)
    parser.add_argument("--n-trees", type=int, default=1000)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-clients", type=int, default=50)
    parser.add_argument("--n-per-client", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=5000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true", help="3 seeds, 100 trees")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_seeds, args.n_trees = 3, 100
    start = time.perf_counter()
    rows = [r for seed in range(args.n_seeds) for r in run_seed(seed, args)]
    wall = time.perf_counter() - start
    df = pd.DataFrame(rows)
    summary = summarize(df)
    print(
        f"\nSection 5.1 reproduction: Romano data, quantile forest "
        f"({args.n_trees} trees), m={args.n_clients} clients x "
        f"n={args.n_per_client}, "
        f"{args.n_test} test points, alpha={args.alpha}, {args.n_seeds} seeds, "
        f"{wall:.0f} s"
    )
    table = pd.DataFrame(
        {
            "lower level": summary["lower_level"].map("{:.3f}".format).values,
            "coverage (mean ± sd)": [
                f"{r.coverage_mean:.4f} ± {r.coverage_sd:.4f}"
                for r in summary.itertuples()
            ],
            "length (mean ± sd)": [
                f"{r.length_mean:.3f} ± {r.length_sd:.3f}" for r in summary.itertuples()
            ],
            "median length": summary["length_median"].map("{:.3f}".format).values,
            "length / central": summary["length_vs_central"]
            .map("{:.3f}".format)
            .values,
        },
        index=summary.index,
    )
    print(table.to_string())
    for mode in ("oob", "fixed"):
        qq, central, avg = (summary.loc[(mode, c)] for c in ("qq", "central", "avg"))
        print(
            f"{mode:5s} levels: QQ - central coverage "
            f"{qq.coverage_mean - central.coverage_mean:+.4f}, QQ/central length "
            f"{qq.length_vs_central:.3f}, Avg/central length "
            f"{avg.length_vs_central:.3f} (paper: QQ ~ central, Avg wider)"
        )
    _common.save_record(
        "cqr_synthetic",
        {
            "settings": vars(args),
            "wall_time_s": wall,
            "summary": summary.reset_index().to_dict("records"),
            "rows": df.to_dict("records"),
        },
    )


if __name__ == "__main__":
    main()
