"""FedCP²-QQ on real regression tables (seed 000, Appendix B.2 / Fig. 18).

The paper's DP experiment: m = 5 clients of n = 200 calibration rows,
B = 100 bins, epsilon in {10, 5, 1}, CQR with a quantile random forest, 20
random 40 % train / 40 % calibration / 20 % test splits, alpha = 0.1; it
reports (as boxplots only) mean coverage >= 0.90 for every epsilon, growing
more conservative as epsilon decreases. Its "bio" table (CASP) is not
available offline; we use Bikeshare (the paper's "bike") and Tennessee STAR.

Bin bounds. The paper puts the bins on [0, S_max] with S_max the largest
*calibration* score: not private, since the bins then depend on the data.
We run both:

* ``public``: bounds = (min, max) of the out-of-bag CQR scores of the
  *training* rows, which the model owner has anyway and which do not touch the
  calibration data, so the epsilon-DP guarantee of the calibration holds.
  Scores outside are clipped (the top bin then means an infinite threshold);
* ``paper``: [0, max calibration score], the paper's non-private choice.

Printed: mean coverage (± SE over splits), the median over splits of the
mean interval length relative to non-private FedCP-QQ on the same split, and
the number of splits whose threshold is infinite (the top bin was released);
central split CP for reference.
Run: ``python benchmarks/bench_dp_qq.py [--quick]``.
"""

import argparse
import time
import warnings

import _common  # noqa: F401
import numpy as np
from quantile_forest import RandomForestQuantileRegressor
from sklearn.preprocessing import StandardScaler

from skfedcp.calibrators import (
    CentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.datasets import load_bikeshare, load_star
from skfedcp.exceptions import ClippedScoresWarning, InfiniteThresholdWarning

ALPHA = 0.1
M, N, BINS = 5, 200, 100
EPSILONS = [10.0, 5.0, 1.0]
LOADERS = {"bike": load_bikeshare, "star": load_star}


def cqr_scores(X, y, lower_upper):
    return np.maximum(lower_upper[:, 0] - y, y - lower_upper[:, 1])


def one_split(X, y, seed, n_trees):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    n_tr, n_cal = int(0.4 * len(y)), int(0.4 * len(y))
    tr, cal, te = perm[:n_tr], perm[n_tr : n_tr + n_cal], perm[n_tr + n_cal :]
    cal = cal[: M * N]  # exactly m * n calibration rows (spec A15)
    scaler = StandardScaler().fit(X[tr])
    Xs = scaler.transform(X)
    forest = RandomForestQuantileRegressor(
        n_estimators=n_trees, min_samples_leaf=5, random_state=seed
    ).fit(Xs[tr], y[tr])
    levels = [ALPHA / 2, 1 - ALPHA / 2]
    oob = cqr_scores(Xs[tr], y[tr], forest.predict(Xs[tr], levels, oob_score=True))
    s_cal = cqr_scores(Xs[cal], y[cal], forest.predict(Xs[cal], levels))
    band = forest.predict(Xs[te], levels)
    ids = np.repeat(np.arange(M), N)

    def evaluate(threshold):
        lo, hi = band[:, 0] - threshold, band[:, 1] + threshold
        covered = (lo <= y[te]) & (y[te] <= hi)
        return covered.mean(), np.mean(hi - lo)

    out = {}
    out["central"] = evaluate(CentralCalibrator().fit(s_cal, alpha=ALPHA).threshold_)
    qq = QuantileOfQuantilesCalibrator().fit(s_cal, ids, alpha=ALPHA)
    out["qq"] = evaluate(qq.threshold_)
    bounds = {
        "public": (float(oob.min()), float(oob.max())),
        "paper": (0.0, float(s_cal.max())),  # leaks the largest score
    }
    for name, (low, high) in bounds.items():
        for eps in EPSILONS:
            cal_dp = PrivateQuantileOfQuantilesCalibrator(
                epsilon=eps, score_bounds=(low, high), n_bins=BINS
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ClippedScoresWarning)
                warnings.simplefilter("ignore", InfiniteThresholdWarning)
                cal_dp.fit(s_cal, ids, alpha=ALPHA, random_state=seed)
            out[f"dp-qq {name} eps={eps:g}"] = evaluate(cal_dp.threshold_)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="bike, 3 splits")
    args = parser.parse_args(argv)
    splits, trees = (3, 50) if args.quick else (args.splits, args.trees)
    tables = ["bike"] if args.quick else list(LOADERS)
    record = {"alpha": ALPHA, "m": M, "n": N, "bins": BINS, "splits": splits}
    plan = PrivateQuantileOfQuantilesCalibrator(score_bounds=(0, 1))
    for eps in EPSILONS:
        info = plan.set_params(epsilon=eps).plan([N] * M, ALPHA)
        print(
            f"eps={eps:g}: gamma*={info['gamma']}, (l, k)=({info['local_ranks'][0]}, "
            f"{info['k']}), l_cor={info['correction']}, level={info['levels'][0]:.3f}"
        )
    for table in tables:
        start = time.perf_counter()
        X, y, _ = LOADERS[table](return_X_y=True)
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        runs = [one_split(X, y, seed, trees) for seed in range(splits)]
        seconds = time.perf_counter() - start
        print(
            f"\n{table}: {len(y)} rows, m={M} x n={N}, B={BINS}, {splits} splits, "
            f"{trees} trees ({seconds:.0f} s)"
        )
        print(
            f"{'method':>26s} {'coverage':>17s} {'median length / QQ':>19s} "
            f"{'infinite':>9s}"
        )
        rows = []
        for name in runs[0]:
            cov = np.array([r[name][0] for r in runs])
            ratio = np.array([r[name][1] / r["qq"][1] for r in runs])
            se = cov.std(ddof=1) / np.sqrt(splits) if splits > 1 else np.nan
            n_inf = int(np.isinf(ratio).sum())
            print(
                f"{name:>26s} {cov.mean():8.4f} ± {se:.4f} "
                f"{np.median(ratio):19.3f} {n_inf:>4d}/{splits}"
            )
            rows.append(
                {
                    "method": name,
                    "coverage": cov.mean(),
                    "coverage_se": se,
                    "median_length_ratio_to_qq": np.median(ratio),
                    "infinite_splits": n_inf,
                }
            )
        record[table] = rows
    _common.save_record("dp_qq", record)


if __name__ == "__main__":
    main()
